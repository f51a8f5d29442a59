/* nbdrepl: logging facade.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * common/ and server/ never call nbdkit directly: they log through here,
 * and whoever embeds them (the nbdkit plugin, replctl, the unit tests)
 * installs a sink.  The default sink writes "PROGRAM: msg" (info),
 * "PROGRAM: warning: msg" or "PROGRAM: error: msg" to stderr, where
 * PROGRAM is the program's name (replctl).
 * Logging never changes errno.
 */
#ifndef NBDREPL_LOG_H
#define NBDREPL_LOG_H

enum log_level {
  LOG_LEVEL_DEBUG,              /* only with nbdkit -v */
  LOG_LEVEL_INFO,               /* state changes an operator wants to see */
  LOG_LEVEL_WARNING,            /* not an error, but an operator should act */
  LOG_LEVEL_ERROR,              /* something failed */
};

typedef void (*log_sink_fn) (enum log_level level, const char *msg);

/* Replace the sink (NULL restores the stderr default). */
extern void log_set_sink (log_sink_fn sink);

extern void log_msg (enum log_level level, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));

#define log_debug(fmt, ...) log_msg (LOG_LEVEL_DEBUG, fmt, ##__VA_ARGS__)
#define log_info(fmt, ...)  log_msg (LOG_LEVEL_INFO, fmt, ##__VA_ARGS__)
#define log_error(fmt, ...) log_msg (LOG_LEVEL_ERROR, fmt, ##__VA_ARGS__)
#define log_warning(fmt, ...) log_msg (LOG_LEVEL_WARNING, fmt, ##__VA_ARGS__)

#endif /* NBDREPL_LOG_H */
