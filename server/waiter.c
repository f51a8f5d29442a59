/* nbdrepl: waiters — a counted completion on the waiting thread's stack.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * A write waits for its local I/O and one acknowledgement per peer.  The
 * completing thread never touches the waiter after unlocking it, so the
 * waiting thread may destroy it as soon as waiter_wait returns.
 */
#include <config.h>

#include <assert.h>
#include <time.h>

#include "internal.h"

uint64_t
now_ns (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void
waiter_init (struct waiter *w, unsigned pending)
{
  pthread_condattr_t attr;

  pthread_mutex_init (&w->w_lock, NULL);
  pthread_condattr_init (&attr);
  pthread_condattr_setclock (&attr, CLOCK_MONOTONIC);
  pthread_cond_init (&w->w_cond, &attr);
  pthread_condattr_destroy (&attr);
  w->w_pending = pending;
}

void
waiter_add (struct waiter *w, unsigned n)
{
  pthread_mutex_lock (&w->w_lock);
  w->w_pending += n;
  pthread_mutex_unlock (&w->w_lock);
}

void
waiter_complete (struct waiter *w)
{
  pthread_mutex_lock (&w->w_lock);
  assert (w->w_pending > 0);
  if (--w->w_pending == 0)
    pthread_cond_signal (&w->w_cond);
  pthread_mutex_unlock (&w->w_lock);
}

void
waiter_wait (struct waiter *w)
{
  pthread_mutex_lock (&w->w_lock);
  while (w->w_pending > 0)
    pthread_cond_wait (&w->w_cond, &w->w_lock);
  pthread_mutex_unlock (&w->w_lock);
}

void
waiter_destroy (struct waiter *w)
{
  pthread_cond_destroy (&w->w_cond);
  pthread_mutex_destroy (&w->w_lock);
}
