/* nbdrepl: handlers — configured commands run on events, as DRBD's
 * handlers and HAST's exec hooks.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * The command runs under /bin/sh -c with the node's environment plus:
 *
 *   NBDREPL_EVENT          split-brain, before-resync-target,
 *                          after-resync-target, fence-peer, role-change
 *   NBDREPL_RESOURCE       the resource
 *   NBDREPL_NODE           this node's name
 *   NBDREPL_ROLE           this node's role now (Primary, Secondary)
 *   NBDREPL_PEER           the peer concerned, if any
 *   NBDREPL_PEER_ADDRESS   ... its replication address
 *
 * Handlers run in the background: nothing waits for them, and a thread
 * reaps each one and logs how it ended.
 */
#include <config.h>

#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "internal.h"
#include "log.h"

extern char **environ;

struct reap {
  pid_t rp_pid;
  char rp_what[96];
};

static void *
reaper (void *arg)
{
  struct reap *rp = arg;
  int status;

  while (waitpid (rp->rp_pid, &status, 0) == -1 && errno == EINTR)
    ;
  if (WIFEXITED (status) && WEXITSTATUS (status) == 0)
    log_info ("%s: exited with status 0", rp->rp_what);
  else if (WIFEXITED (status))
    log_error ("%s: exited with status %d", rp->rp_what,
               WEXITSTATUS (status));
  else if (WIFSIGNALED (status))
    log_error ("%s: killed by signal %d", rp->rp_what, WTERMSIG (status));
  free (rp);
  return NULL;
}

void
handler_run (struct repl_node *node, enum repl_handler h,
             const struct peer *p)
{
  const char *cmd = node->n_cfg.cf_handlers[h];
  const char *event = config_handler_name (h);
  char *argv[] = { (char *) "sh", (char *) "-c", (char *) cmd, NULL };
  char *vars[6] = { NULL };
  char **envp = NULL;
  size_t n = 0, i, nvars = 0;
  struct reap *rp = NULL;
  pthread_t thread;
  pthread_attr_t attr;
  pid_t pid;
  int err;

  if (cmd == NULL)
    return;
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
  while (environ[n])
    n++;
  envp = calloc (n + nvars + 1, sizeof *envp);
  rp = calloc (1, sizeof *rp);
  if (envp == NULL || rp == NULL) {
    log_error ("handler %s: calloc: %m", event);
    goto out;
  }
  for (i = 0; i < n; i++)
    envp[i] = environ[i];
  for (i = 0; i < nvars; i++)
    envp[n + i] = vars[i];

  err = posix_spawn (&pid, "/bin/sh", NULL, NULL, argv, envp);
  if (err != 0) {
    errno = err;
    log_error ("handler %s: cannot run '%s': %m", event, cmd);
    goto out;
  }
  log_info ("handler %s%s%s: running '%s' (pid %d)", event,
            p ? " for peer " : "", p ? p->pr_cfg->nc_name : "", cmd,
            (int) pid);
  rp->rp_pid = pid;
  snprintf (rp->rp_what, sizeof rp->rp_what, "handler %s (pid %d)", event,
            (int) pid);
  pthread_attr_init (&attr);
  pthread_attr_setdetachstate (&attr, PTHREAD_CREATE_DETACHED);
  err = pthread_create (&thread, &attr, reaper, rp);
  pthread_attr_destroy (&attr);
  if (err != 0) {
    errno = err;
    log_error ("handler %s: pthread_create: %m (reaping it now)", event);
    reaper (rp);
  }
  rp = NULL;

 out:
  free (rp);
  free (envp);
  for (i = 0; i < nvars; i++)
    free (vars[i]);
}
