/* nbdrepl: handlers — configured commands run on events, as DRBD's
 * handlers and HAST's exec hooks.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * A handler runs with a fixed environment, not nbdkit's (which may hold
 * anything its starter had, and a handler runs as root):
 *
 *   PATH                   HANDLER_PATH
 *   NBDREPL_EVENT          split-brain, before-resync-target,
 *                          after-resync-target, fence-peer, role-change
 *   NBDREPL_RESOURCE       the resource
 *   NBDREPL_NODE           this node's name
 *   NBDREPL_ROLE           this node's role now (Primary, Secondary)
 *   NBDREPL_PEER           the peer concerned, if any
 *   NBDREPL_PEER_ADDRESS   ... its replication address
 *
 * A command of plain words (letters, digits and _ . / : = , + @ % -,
 * separated by spaces or tabs) is split at the blanks and executed
 * directly, the program looked up in HANDLER_PATH when its name has no
 * slash.  Anything else (quotes, $, ;, |, &, redirections, globs, ...)
 * is shell syntax and runs under /bin/sh -c, as the configuration asked
 * for it; so does a first word with a '=' (a shell assignment).
 *
 * Handlers run in the background: nothing waits for them, and a thread
 * of the node's (one per handler, at most HANDLERS_MAX at once) reaps
 * each one and logs how it ended; both ends go to the events stream
 * ("call helper", "response helper").  When the node stops it waits for
 * them HANDLERS_STOP_GRACE, then sends what still runs SIGTERM, and
 * SIGKILL a little later.
 */
#include <config.h>

#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <signal.h>
#include <sys/wait.h>

#include "internal.h"
#include "log.h"

#define HANDLER_PATH "/usr/sbin:/usr/bin:/sbin:/bin"

/* The most words a plain command may have; more go to the shell. */
#define HANDLER_MAX_ARGS 32

#define HANDLERS_STOP_GRACE_NS (10 * UINT64_C (1000000000))
#define HANDLERS_KILL_GRACE_NS (2 * UINT64_C (1000000000))

struct reap {
  struct repl_node *rp_node;
  pid_t rp_pid;
  unsigned rp_slot;             /* in hd_pids */
  const char *rp_event;
  struct peer *rp_peer;
  handler_done_fn *rp_done;     /* told the exit status, or NULL */
  unsigned rp_grace;            /* a read-side grace section that keeps
                                   rp_peer from being freed should adjust
                                   remove it meanwhile (peers.c) */
  char rp_what[96];
};

void
handlers_init (struct handlers *hd)
{
  mutex_init (&hd->hd_lock);
  thread_set_init (&hd->hd_reapers, HANDLERS_MAX);
}

void
handlers_destroy (struct handlers *hd)
{
  thread_set_destroy (&hd->hd_reapers);
  pthread_mutex_destroy (&hd->hd_lock);
}

/* Send sig to every handler still running. */
static void
signal_all (struct handlers *hd, int sig)
{
  unsigned i;

  pthread_mutex_lock (&hd->hd_lock);
  for (i = 0; i < HANDLERS_MAX; i++)
    if (hd->hd_pids[i] > 0) {
      log_error ("handler (pid %d) still running as the node stops: "
                 "sending it %s", (int) hd->hd_pids[i], strsignal (sig));
      kill (hd->hd_pids[i], sig);
    }
  pthread_mutex_unlock (&hd->hd_lock);
}

/* The node stops: its handlers end, by themselves or by signal, and are
 * reaped. */
void
handlers_stop (struct repl_node *node)
{
  struct handlers *hd = &node->n_handlers;
  struct timespec ts = deadline_after_ns (HANDLERS_STOP_GRACE_NS);

  if (thread_set_wait_until (&hd->hd_reapers, &ts) > 0) {
    signal_all (hd, SIGTERM);
    ts = deadline_after_ns (HANDLERS_KILL_GRACE_NS);
    if (thread_set_wait_until (&hd->hd_reapers, &ts) > 0)
      signal_all (hd, SIGKILL);
  }
  thread_set_wait (&hd->hd_reapers);
}

static void *
reaper (void *arg)
{
  struct reap *rp = arg;
  struct handlers *hd = &rp->rp_node->n_handlers;
  int status = 0, code = 128;

  while (waitpid (rp->rp_pid, &status, 0) == -1 && errno == EINTR)
    ;
  pthread_mutex_lock (&hd->hd_lock);
  hd->hd_pids[rp->rp_slot] = 0;
  pthread_mutex_unlock (&hd->hd_lock);
  if (WIFEXITED (status) && WEXITSTATUS (status) == 0)
    log_info ("%s: exited with status 0", rp->rp_what);
  else if (WIFEXITED (status))
    log_error ("%s: exited with status %d", rp->rp_what,
               WEXITSTATUS (status));
  else if (WIFSIGNALED (status))
    log_error ("%s: killed by signal %d", rp->rp_what, WTERMSIG (status));
  if (WIFEXITED (status))
    code = WEXITSTATUS (status);
  else if (WIFSIGNALED (status))
    code = 128 + WTERMSIG (status);     /* as the shell reports it */
  peers_enter (rp->rp_node);
  events_helper (rp->rp_node, rp->rp_event, rp->rp_peer, code);
  if (rp->rp_done)
    rp->rp_done (rp->rp_node, rp->rp_peer, code);
  peers_leave (rp->rp_node);
  grace_read_unlock (rp->rp_node, rp->rp_grace);
  free (rp);
  thread_set_finish (&hd->hd_reapers);
  return NULL;
}

/* Is cmd plain words that need no shell?  Then split it into argv
 * (pointing into words, a copy of cmd) and return the number of words;
 * else 0. */
static size_t
split_plain (const char *cmd, char *words, char *argv[HANDLER_MAX_ARGS + 1])
{
  static const char plain[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    "_./:=,+@%- \t";
  size_t n = 0;
  char *w, *save = NULL;

  if (cmd[strspn (cmd, plain)] != '\0')
    return 0;
  strcpy (words, cmd);
  for (w = strtok_r (words, " \t", &save); w;
       w = strtok_r (NULL, " \t", &save)) {
    if (n == HANDLER_MAX_ARGS)
      return 0;
    argv[n++] = w;
  }
  argv[n] = NULL;
  if (n == 0 || strchr (argv[0], '=') != NULL)
    return 0;
  return n;
}

/* The program of a plain command: argv[0] if it has a slash, else the
 * first executable of that name in HANDLER_PATH, written into buf.
 * NULL with errno ENOENT if there is none. */
static const char *
find_program (const char *name, char *buf, size_t len)
{
  const char *dir = HANDLER_PATH, *end;

  if (strchr (name, '/'))
    return name;
  for (; *dir; dir = *end ? end + 1 : end) {
    end = strchrnul (dir, ':');
    snprintf (buf, len, "%.*s/%s", (int) (end - dir), dir, name);
    if (access (buf, X_OK) == 0)
      return buf;
  }
  errno = ENOENT;
  return NULL;
}

void
handler_run (struct repl_node *node, enum repl_handler h,
             const struct peer *p)
{
  handler_run_then (node, h, (struct peer *) p, NULL);
}

/* Run handler h (for peer p, or NULL) in the background; done, unless
 * NULL, is told its exit status (128 + the signal if a signal ended
 * it; -1 if it could not run at all) from the thread that reaps it. */
void
handler_run_then (struct repl_node *node, enum repl_handler h,
                  struct peer *p, handler_done_fn *done)
{
  int status = -1;              /* for done, if it never runs */

  const char *cmd = node->n_cfg.cf_handlers[h];
  const char *event = config_handler_name (h);
  char *shell_argv[] = { (char *) "sh", (char *) "-c", (char *) cmd, NULL };
  char *plain_argv[HANDLER_MAX_ARGS + 1];
  char *words = NULL, program[512];
  const char *path = "/bin/sh";
  char **argv = shell_argv;
  char *vars[8] = { NULL };    /* PATH, 6 NBDREPL_*, NULL */
  size_t i, nvars = 0;
  struct handlers *hd = &node->n_handlers;
  struct reap *rp = NULL;
  unsigned slot;
  pid_t pid;
  int err;

  if (cmd == NULL)
    goto out;
  vars[nvars++] = (char *) "PATH=" HANDLER_PATH;
  if (asprintf (&vars[nvars++], "NBDREPL_EVENT=%s", event) == -1 ||
      asprintf (&vars[nvars++], "NBDREPL_RESOURCE=%s",
                node->n_cfg.cf_resource) == -1 ||
      asprintf (&vars[nvars++], "NBDREPL_NODE=%s",
                node->n_self->nc_name) == -1 ||
      asprintf (&vars[nvars++], "NBDREPL_ROLE=%s",
                role_name (node_role (node))) == -1 ||
      (p && asprintf (&vars[nvars++], "NBDREPL_PEER=%s",
                      p->pr_cfg->nc_name) == -1) ||
      (p && asprintf (&vars[nvars++], "NBDREPL_PEER_ADDRESS=%s",
                      p->pr_cfg->nc_address) == -1)) {
    vars[--nvars] = NULL;       /* asprintf left it undefined */
    log_error ("handler %s: asprintf: %m", event);
    goto out;
  }
  words = malloc (strlen (cmd) + 1);
  rp = calloc (1, sizeof *rp);
  if (words == NULL || rp == NULL) {
    log_error ("handler %s: malloc: %m", event);
    goto out;
  }
  if (split_plain (cmd, words, plain_argv) > 0) {
    path = find_program (plain_argv[0], program, sizeof program);
    if (path == NULL) {
      log_error ("handler %s: cannot run '%s': %s: not found in %s", event,
                 cmd, plain_argv[0], HANDLER_PATH);
      goto out;
    }
    argv = plain_argv;
  }

  /* A slot for its pid, held from before the spawn. */
  pthread_mutex_lock (&hd->hd_lock);
  for (slot = 0; slot < HANDLERS_MAX && hd->hd_pids[slot] != 0; slot++)
    ;
  if (slot < HANDLERS_MAX)
    hd->hd_pids[slot] = -1;
  pthread_mutex_unlock (&hd->hd_lock);
  if (slot == HANDLERS_MAX) {
    log_error ("handler %s: not run: %d handlers are still running",
               event, HANDLERS_MAX);
    goto out;
  }
  err = posix_spawn (&pid, path, NULL, NULL, argv, vars);
  if (err != 0) {
    errno = err;
    log_error ("handler %s: cannot run '%s': %s: %m", event, cmd, path);
    pthread_mutex_lock (&hd->hd_lock);
    hd->hd_pids[slot] = 0;
    pthread_mutex_unlock (&hd->hd_lock);
    goto out;
  }
  pthread_mutex_lock (&hd->hd_lock);
  hd->hd_pids[slot] = pid;
  pthread_mutex_unlock (&hd->hd_lock);
  log_info ("handler %s%s%s: running '%s' (pid %d)", event,
            p ? " for peer " : "", p ? p->pr_cfg->nc_name : "", cmd,
            (int) pid);
  events_helper (node, event, p, -1);
  rp->rp_node = node;
  rp->rp_pid = pid;
  rp->rp_slot = slot;
  rp->rp_event = event;
  rp->rp_peer = p;
  rp->rp_done = done;
  snprintf (rp->rp_what, sizeof rp->rp_what, "handler %s (pid %d)", event,
            (int) pid);
  rp->rp_grace = grace_read_lock (node);
  /* A free slot means a free thread in the set (both HANDLERS_MAX). */
  if (thread_set_start (&hd->hd_reapers, reaper, rp) == -1) {
    grace_read_unlock (node, rp->rp_grace);
    log_error ("handler %s: cannot start its reaper: %m (waiting for it "
               "now)", event);
    /* reaper's thread_set_finish needs a counted thread: do it here. */
    {
      int ws;

      while (waitpid (pid, &ws, 0) == -1 && errno == EINTR)
        ;
      pthread_mutex_lock (&hd->hd_lock);
      hd->hd_pids[slot] = 0;
      pthread_mutex_unlock (&hd->hd_lock);
      status = WIFEXITED (ws) ? WEXITSTATUS (ws) : 128;
      events_helper (node, event, p, status);
    }
    goto out;
  }
  rp = NULL;
  done = NULL;                  /* the reaper tells it */

 out:
  free (rp);
  free (words);
  for (i = 1; i < nvars; i++)   /* vars[0], PATH, is static */
    free (vars[i]);
  if (done != NULL)
    done (node, p, status);
}
