/* nbdrepl: mutexes and condition variables, set up one way.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * As hastd's synch.h: every condition variable waits on CLOCK_MONOTONIC
 * (cond_init, deadline_after_ns), and a function whose name ends in
 * _locked says which lock it needs with ASSERT_LOCKED, checked in every
 * build without NDEBUG (glibc records the owner's thread id in every
 * mutex, whatever its type).  The lock order is in internal.h, at the
 * locks.
 */
#ifndef NBDREPL_LOCKS_H
#define NBDREPL_LOCKS_H

#include <assert.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

static inline void
mutex_init (pthread_mutex_t *m)
{
  int r = pthread_mutex_init (m, NULL);
  assert (r == 0);
  (void) r;
}

static inline void
cond_init (pthread_cond_t *c)
{
  pthread_condattr_t attr;
  int r;

  pthread_condattr_init (&attr);
  pthread_condattr_setclock (&attr, CLOCK_MONOTONIC);
  r = pthread_cond_init (c, &attr);
  assert (r == 0);
  (void) r;
  pthread_condattr_destroy (&attr);
}

/* The CLOCK_MONOTONIC time ns from now, for pthread_cond_timedwait on a
 * condition variable made by cond_init. */
static inline struct timespec
deadline_after_ns (uint64_t ns)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  ts.tv_sec += ns / 1000000000;
  ts.tv_nsec += ns % 1000000000;
  if (ts.tv_nsec >= 1000000000) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000;
  }
  return ts;
}

/* The same for an absolute CLOCK_MONOTONIC time in ns (now_ns). */
static inline struct timespec
deadline_at_ns (uint64_t ns)
{
  struct timespec ts = { .tv_sec = ns / 1000000000,
                         .tv_nsec = ns % 1000000000 };

  return ts;
}

#if !defined (NDEBUG) && defined (__GLIBC__)
/* The calling thread's id, asked of the kernel once per thread.  Every
 * ASSERT_LOCKED reads it, many times per write: initial-exec, so that
 * the plugin (a dlopened object) reads it at a fixed offset from the
 * thread pointer instead of calling __tls_get_addr.  That puts the
 * plugin's TLS (a few bytes: nothing else may be large) in glibc's
 * static TLS reserve for dlopened objects. */
static inline pid_t
locks_self (void)
{
  static __thread pid_t self __attribute__ ((tls_model ("initial-exec")));

  if (self == 0)
    self = gettid ();
  return self;
}
/* Does the calling thread hold m? */
#define LOCK_HELD(m) ((m)->__data.__owner == locks_self ())
#define ASSERT_LOCKED(m) assert (LOCK_HELD (m))
#else
#define ASSERT_LOCKED(m) ((void) (m))
#endif

#endif /* NBDREPL_LOCKS_H */
