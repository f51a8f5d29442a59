/* nbdrepl: where the plugin's messages go, and why nbdkit stops.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * nbdkit has two levels for plugins, error and debug, and prints
 * "error:" on everything that goes through nbdkit_error.  The engine
 * also has info lines (state changes) and warnings, which are not
 * errors, so the plugin writes those three levels itself, to where
 * nbdkit's own messages go:
 *
 *   stderr (nbdkit -f)   "2026-12-02 18:23:01.123 nbdkit: repl: warning: MSG",
 *                        local time to the millisecond, one write(2) per line
 *   the journal          "<4>nbdkit: repl: warning: MSG": stderr is the
 *                        stream systemd names in $JOURNAL_STREAM; the
 *                        journal stamps each line and takes its priority
 *                        from the <N> prefix
 *   syslog               once nbdkit has forked into the background and
 *                        pointed stderr at /dev/null
 *   log-file=PATH        appended to PATH as to stderr, whatever nbdkit
 *                        does with its own messages (opened once, at
 *                        configuration, before nbdkit forks)
 *
 * Debug lines go through nbdkit_debug (only with nbdkit -v).
 *
 * nbdkit ends on SIGINT, SIGQUIT, SIGTERM or SIGHUP (its own handlers),
 * when its --run command or its only client (-s) is done, or with
 * --exit-with-parent when its parent dies (as a SIGTERM).  Which one it
 * was is only known here if we look: repl_log_watch_signals puts a
 * handler in front of nbdkit's that notes the signal and who sent it,
 * then calls nbdkit's; repl_log_stop says it when the plugin is torn
 * down.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "log.h"
#include "repl-log.h"

enum repl_log_dest { DEST_STDERR, DEST_JOURNAL, DEST_SYSLOG, DEST_FILE };

/* log-file=: its descriptor, or -1.  Set once at configuration (one
 * thread), read by every thread after. */
static int log_file_fd = -1;

int
repl_log_open_file (const char *path)
{
  int fd = open (path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);

  if (fd == -1) {
    nbdkit_error ("log-file=%s: %m", path);
    return -1;
  }
  if (log_file_fd != -1)
    close (log_file_fd);
  log_file_fd = fd;
  return 0;
}

/* Is stderr /dev/null (nbdkit has daemonised)? */
static bool
stderr_is_null (void)
{
  struct stat st, null;

  if (fstat (STDERR_FILENO, &st) == -1)
    return true;
  return S_ISCHR (st.st_mode) && stat ("/dev/null", &null) == 0 &&
         st.st_rdev == null.st_rdev;
}

/* Is stderr the journal stream systemd connected us to?  $JOURNAL_STREAM
 * is "DEVICE:INODE" of that stream (systemd.exec(5)). */
static bool
stderr_is_journal (void)
{
  const char *js = getenv ("JOURNAL_STREAM");
  unsigned long long dev, ino;
  struct stat st;

  if (js == NULL || sscanf (js, "%llu:%llu", &dev, &ino) != 2)
    return false;
  if (fstat (STDERR_FILENO, &st) == -1)
    return false;
  return (unsigned long long) st.st_dev == dev &&
         (unsigned long long) st.st_ino == ino;
}

/* Asked for each line: nbdkit daemonises after the plugin has loaded. */
static enum repl_log_dest
log_dest (void)
{
  if (log_file_fd != -1)
    return DEST_FILE;
  if (stderr_is_null ())
    return DEST_SYSLOG;
  if (stderr_is_journal ())
    return DEST_JOURNAL;
  return DEST_STDERR;
}

void
repl_log_sink (enum log_level level, const char *msg)
{
  const char *label = "";
  int prio = LOG_INFO, saved_errno = errno;
  char line[1280], stamp[40] = "";
  struct timespec ts;
  struct tm tm;
  int len;

  switch (level) {
  case LOG_LEVEL_DEBUG:
    nbdkit_debug ("%s", msg);
    return;
  case LOG_LEVEL_INFO:    prio = LOG_INFO;    label = "";          break;
  case LOG_LEVEL_WARNING: prio = LOG_WARNING; label = "warning: "; break;
  case LOG_LEVEL_ERROR:   prio = LOG_ERR;     label = "error: ";   break;
  }

  switch (log_dest ()) {
  case DEST_SYSLOG:
    syslog (prio, "repl: %s%s", label, msg);
    break;
  case DEST_JOURNAL:
    len = snprintf (line, sizeof line, "<%d>nbdkit: repl: %s%s\n", prio,
                    label, msg);
    goto write_line;
  case DEST_STDERR:
  case DEST_FILE:
    clock_gettime (CLOCK_REALTIME, &ts);
    if (localtime_r (&ts.tv_sec, &tm) != NULL) {
      strftime (stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &tm);
      snprintf (stamp + strlen (stamp), sizeof stamp - strlen (stamp),
                ".%03ld ", ts.tv_nsec / 1000000);
    }
    len = snprintf (line, sizeof line, "%snbdkit: repl: %s%s\n", stamp,
                    label, msg);
  write_line:
    if (len < 0)
      break;
    if ((size_t) len >= sizeof line) {         /* cut, but keep the \n */
      len = sizeof line - 1;
      line[len - 1] = '\n';
    }
    /* One write, so that lines of several threads never interleave. */
    if (write (log_file_fd != -1 ? log_file_fd : STDERR_FILENO,
               line, len) == -1) {
      /* Nowhere else to say it. */
    }
    break;
  }
  errno = saved_errno;
}

/* ---- why nbdkit stops ------------------------------------------------ */

static const int stop_signals[] = { SIGINT, SIGQUIT, SIGTERM, SIGHUP };
#define NR_STOP_SIGNALS (sizeof stop_signals / sizeof stop_signals[0])

static struct sigaction stop_old[NR_STOP_SIGNALS];
/* Written by the handler (on whichever thread takes the signal), read
 * by the main thread at the end: lock-free atomics, which a signal
 * handler may use. */
static atomic_int stop_signal;          /* the first one, or 0 */
static atomic_int stop_sender;          /* its sender's pid, or 0 */

static void
stop_handler (int sig, siginfo_t *si, void *uc)
{
  size_t i;

  if (atomic_load (&stop_signal) == 0) {
    atomic_store (&stop_sender,
                  si != NULL && si->si_code == SI_USER ? si->si_pid : 0);
    atomic_store (&stop_signal, sig);
  }
  for (i = 0; i < NR_STOP_SIGNALS; i++)
    if (stop_signals[i] == sig) {
      if (stop_old[i].sa_flags & SA_SIGINFO)
        stop_old[i].sa_sigaction (sig, si, uc);
      else
        stop_old[i].sa_handler (sig);
    }
}

void
repl_log_watch_signals (void)
{
  struct sigaction sa = { .sa_sigaction = stop_handler,
                          .sa_flags = SA_SIGINFO | SA_RESTART };
  size_t i;

  sigemptyset (&sa.sa_mask);
  for (i = 0; i < NR_STOP_SIGNALS; i++) {
    if (sigaction (stop_signals[i], NULL, &stop_old[i]) == -1)
      continue;
    /* Only in front of a handler of nbdkit's: a signal that would kill
     * or be ignored keeps doing so. */
    if (!(stop_old[i].sa_flags & SA_SIGINFO) &&
        (stop_old[i].sa_handler == SIG_DFL ||
         stop_old[i].sa_handler == SIG_IGN))
      continue;
    sa.sa_flags = SA_SIGINFO | (stop_old[i].sa_flags & SA_RESTART);
    sigaction (stop_signals[i], &sa, NULL);
  }
}

void
repl_log_stop (bool by_command)
{
  int sig = atomic_load (&stop_signal);
  pid_t from = atomic_load (&stop_sender);
  char comm[64] = "", path[64];
  FILE *fp;

  if (sig == 0 && by_command)
    return;                     /* logged when the command came */
  if (sig == 0) {
    log_info ("stopping: nbdkit is shutting down without a signal (its "
              "--run command ended, its only client left, or it could "
              "not serve)");
    return;
  }
  if (from <= 0) {
    log_info ("stopping: received SIG%s", sigabbrev_np (sig));
    return;
  }
  snprintf (path, sizeof path, "/proc/%d/comm", (int) from);
  fp = fopen (path, "re");
  if (fp != NULL) {
    if (fgets (comm, sizeof comm, fp) != NULL)
      comm[strcspn (comm, "\n")] = '\0';
    fclose (fp);
  }
  log_info ("stopping: received SIG%s from pid %d%s%s%s",
            sigabbrev_np (sig), (int) from, comm[0] ? " (" : "", comm,
            comm[0] ? ")" : "");
}
