/* nbdrepl: the plugin's log sink and stop reason (repl-log.c).
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 */
#ifndef NBDREPL_REPL_LOG_H
#define NBDREPL_REPL_LOG_H

#include "log.h"

/* The sink for common/log.h: stderr with a timestamp, the journal, or
 * syslog, as nbdkit's own messages go. */
extern void repl_log_sink (enum log_level level, const char *msg);

/* log-file=PATH: the plugin's lines go to PATH (appended, with a
 * timestamp) instead, wherever nbdkit's own go, so that a daemonised
 * nbdkit (repl-attach's diskless node) keeps them without syslog.
 * Returns -1 after nbdkit_error if PATH cannot be opened. */
extern int repl_log_open_file (const char *path);

/* After nbdkit has set up its signal handlers (.after_fork): note which
 * signal stops it, and from whom. */
extern void repl_log_watch_signals (void);

/* Log why nbdkit is stopping (.cleanup); by_command: `replctl down`
 * asked for it, and said so. */
extern void repl_log_stop (bool by_command);

#endif /* NBDREPL_REPL_LOG_H */
