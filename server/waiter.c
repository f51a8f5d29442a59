/* nbdrepl: waiters — a counted completion on the waiting thread's stack.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * A write waits for one acknowledgement per peer.  On these machines a
 * thread wake-up is the most expensive thing on the write path, so the
 * waiter is a futex word: the count of pending events in the low bits
 * and WAITER_SLEEPING set by a waiter that is about to sleep.  Only a
 * completion that brings the count to zero while that bit is set makes
 * a system call.
 */
#include <config.h>

#include <assert.h>
#include <errno.h>
#include <time.h>
#include <unistd.h>
#include <linux/futex.h>
#include <sys/syscall.h>

#include "internal.h"

uint64_t
now_ns (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void
futex_wait (_Atomic uint32_t *addr, uint32_t expected)
{
  /* Returns at once if *addr != expected; spurious wake-ups are fine,
   * the caller loops. */
  syscall (SYS_futex, addr, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

/* The same, for at most ns nanoseconds. */
static void
futex_wait_for (_Atomic uint32_t *addr, uint32_t expected, uint64_t ns)
{
  struct timespec ts = { .tv_sec = ns / 1000000000,
                         .tv_nsec = ns % 1000000000 };

  syscall (SYS_futex, addr, FUTEX_WAIT_PRIVATE, expected, &ts, NULL, 0);
}

static void
futex_wake_all (_Atomic uint32_t *addr)
{
  syscall (SYS_futex, addr, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

void
waiter_init (struct waiter *w, unsigned pending)
{
  atomic_init (&w->w_state, pending);
}

/* Only the waiting thread adds events, before it waits. */
void
waiter_add (struct waiter *w, unsigned n)
{
  atomic_fetch_add (&w->w_state, n);
}

void
waiter_complete (struct waiter *w)
{
  uint32_t old = atomic_fetch_sub (&w->w_state, 1);

  assert ((old & ~WAITER_SLEEPING) > 0);
  if (old == (WAITER_SLEEPING | 1))
    futex_wake_all (&w->w_state);
}

void
waiter_wait (struct waiter *w)
{
  uint32_t v = atomic_load (&w->w_state);

  while (v != 0 && v != WAITER_SLEEPING) {
    if (!(v & WAITER_SLEEPING)) {
      /* Announce that we sleep; if the count changed meanwhile, look
       * again. */
      if (!atomic_compare_exchange_weak (&w->w_state, &v,
                                         v | WAITER_SLEEPING))
        continue;
      v |= WAITER_SLEEPING;
    }
    futex_wait (&w->w_state, v);
    v = atomic_load (&w->w_state);
  }
  atomic_store (&w->w_state, 0);
}

/* waiter_wait, until deadline_ns at the latest (now_ns's clock).
 * Returns true once every event has come; false at the deadline, with
 * events pending (waiter_wait then waits for the rest). */
bool
waiter_wait_until (struct waiter *w, uint64_t deadline_ns)
{
  uint32_t v = atomic_load (&w->w_state);

  while (v != 0 && v != WAITER_SLEEPING) {
    uint64_t now = now_ns ();

    if (now >= deadline_ns)
      return false;
    if (!(v & WAITER_SLEEPING)) {
      if (!atomic_compare_exchange_weak (&w->w_state, &v,
                                         v | WAITER_SLEEPING))
        continue;
      v |= WAITER_SLEEPING;
    }
    futex_wait_for (&w->w_state, v, deadline_ns - now);
    v = atomic_load (&w->w_state);
  }
  atomic_store (&w->w_state, 0);
  return true;
}

void
waiter_destroy (struct waiter *w)
{
  /* Nothing to free: the state is a plain word. */
  assert ((atomic_load (&w->w_state) & ~WAITER_SLEEPING) == 0);
}
