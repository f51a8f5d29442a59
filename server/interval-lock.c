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

static void
acquire (struct interval_lock *il, struct ilock_range *r, uint64_t offset,
         uint64_t len, bool local, struct peer_ticket *t)
{
  r->ir_start = offset;
  r->ir_end = offset + (len > 0 ? len : 1);   /* a flush-like 0 still orders */
  r->ir_local = local;
  r->ir_ticket = t;
  r->ir_local_done = r->ir_queued = r->ir_failed = false;

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
ilock_acquire (struct interval_lock *il, struct ilock_range *r,
               uint64_t offset, uint64_t len)
{
  acquire (il, r, offset, len, false, NULL);
}

/* allow-two-primaries: a client write of this node, whose message to
 * the other Primary is t (two-primaries.c reads it while the range is
 * held). */
void
ilock_acquire_local (struct interval_lock *il, struct ilock_range *r,
                     uint64_t offset, uint64_t len, struct peer_ticket *t)
{
  acquire (il, r, offset, len, true, t);
}

/* A held client write is on our disk (local_done) or its message is
 * queued to the other Primary, or will not be sent (queued), or its
 * local write failed and nothing of it goes anywhere (failed): a peer
 * write waiting for it may look again (tp_apply_begin).  Called under
 * the peer's pr_lock by the sender (peer-send.c), or with no lock. */
void
ilock_mark (struct interval_lock *il, struct ilock_range *r, bool local_done,
            bool queued, bool failed)
{
  pthread_mutex_lock (&il->il_lock);
  if (local_done)
    r->ir_local_done = true;
  if (queued)
    r->ir_queued = true;
  if (failed)
    r->ir_failed = true;
  if (il->il_waiters > 0)
    pthread_cond_broadcast (&il->il_cond);
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
