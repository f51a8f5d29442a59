/* nbdrepl: interval lock.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * Two in-flight writes to overlapping ranges must reach every replica in
 * the same order, or the replicas diverge.  The primary holds the range
 * from before it queues the write to its peers until every copy is
 * acknowledged, so overlapping writes are sent and applied one after the
 * other while writes to disjoint ranges run in parallel.  At the queue
 * depths NBD clients use, the held list is short and a linear scan is
 * cheaper than a tree.
 */
#include <config.h>

#include <assert.h>

#include "internal.h"

void
ilock_init (struct interval_lock *il)
{
  pthread_mutex_init (&il->il_lock, NULL);
  pthread_cond_init (&il->il_cond, NULL);
  il->il_held = NULL;
  il->il_waiters = 0;
}

void
ilock_destroy (struct interval_lock *il)
{
  assert (il->il_held == NULL);
  pthread_cond_destroy (&il->il_cond);
  pthread_mutex_destroy (&il->il_lock);
}

static bool
overlaps_held (const struct interval_lock *il, uint64_t start, uint64_t end)
{
  const struct ilock_range *r;

  for (r = il->il_held; r; r = r->ir_next)
    if (start < r->ir_end && r->ir_start < end)
      return true;
  return false;
}

void
ilock_acquire (struct interval_lock *il, struct ilock_range *r,
               uint64_t offset, uint64_t len)
{
  r->ir_start = offset;
  r->ir_end = offset + (len > 0 ? len : 1);   /* a flush-like 0 still orders */

  pthread_mutex_lock (&il->il_lock);
  while (overlaps_held (il, r->ir_start, r->ir_end)) {
    il->il_waiters++;
    pthread_cond_wait (&il->il_cond, &il->il_lock);
    il->il_waiters--;
  }
  r->ir_prev = NULL;
  r->ir_next = il->il_held;
  if (il->il_held)
    il->il_held->ir_prev = r;
  il->il_held = r;
  pthread_mutex_unlock (&il->il_lock);
}

void
ilock_release (struct interval_lock *il, struct ilock_range *r)
{
  pthread_mutex_lock (&il->il_lock);
  if (r->ir_prev)
    r->ir_prev->ir_next = r->ir_next;
  else
    il->il_held = r->ir_next;
  if (r->ir_next)
    r->ir_next->ir_prev = r->ir_prev;
  if (il->il_waiters > 0)
    pthread_cond_broadcast (&il->il_cond);
  pthread_mutex_unlock (&il->il_lock);
}
