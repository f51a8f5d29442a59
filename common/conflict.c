/* nbdrepl: concurrent writes of two primaries — the rules (conflict.h).
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 */
#include <config.h>

#include <errno.h>
#include <sys/types.h>

#include "conflict.h"

enum conflict_action
conflict_resolve (bool acked, uint32_t our_id, uint32_t peer_id)
{
  if (acked)
    return CONFLICT_APPLY_AFTER;
  return our_id > peer_id ? CONFLICT_KEEP_LOCAL : CONFLICT_APPLY_AFTER;
}

ssize_t
conflict_pieces (uint64_t start, uint64_t end,
                 const struct conflict_range *drop, size_t n,
                 struct conflict_range *out, size_t max)
{
  uint64_t pos = start;
  size_t nout = 0;

  /* Walk from start to end; at each step the drop range that covers pos
   * moves it on, else the next drop range to begin after pos ends a
   * part.  n is small (the writes in flight): quadratic is fine. */
  while (pos < end) {
    uint64_t next = end;
    bool covered = false;
    size_t i;

    for (i = 0; i < n; i++) {
      if (drop[i].cr_start <= pos && pos < drop[i].cr_end) {
        pos = drop[i].cr_end;
        covered = true;
        break;
      }
      if (drop[i].cr_start > pos && drop[i].cr_start < next &&
          drop[i].cr_end > drop[i].cr_start)
        next = drop[i].cr_start;
    }
    if (covered)
      continue;
    if (nout == max) {
      errno = ERANGE;
      return -1;
    }
    out[nout].cr_start = pos;
    out[nout].cr_end = next;
    nout++;
    pos = next;
  }
  return nout;
}
