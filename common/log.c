/* nbdrepl: logging facade.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 */
#include <config.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "log.h"

static log_sink_fn log_sink;

void
log_set_sink (log_sink_fn sink)
{
  log_sink = sink;
}

void
log_msg (enum log_level level, const char *fmt, ...)
{
  int saved_errno = errno;
  char buf[1024];
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (buf, sizeof buf, fmt, ap);   /* %m sees the caller's errno */
  va_end (ap);

  if (log_sink)
    log_sink (level, buf);
  else if (level != LOG_LEVEL_DEBUG)
    fprintf (stderr, "%s: %s%s\n", program_invocation_short_name,
             level == LOG_LEVEL_ERROR ? "error: " :
             level == LOG_LEVEL_WARNING ? "warning: " : "", buf);

  errno = saved_errno;
}
