/* nbdrepl: sets of short-lived threads, every one of them joined.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * The listener's handshakes run in threads that come
 * and go with connections.  A detached thread that signals "done" still
 * runs a few instructions of the plugin afterwards, and nbdkit may have
 * unloaded the plugin by then.  So none is detached: as its last act a
 * thread puts itself on its set's list of finished threads, and the next
 * start, and the final wait, join those.  pthread_join returns only once
 * a thread has left the plugin's code for good.
 */
#include <config.h>

#include <assert.h>
#include <errno.h>

#include "internal.h"

void
thread_set_init (struct thread_set *ts, unsigned max)
{
  assert (max > 0 && max <= THREAD_SET_MAX);
  mutex_init (&ts->ts_lock);
  cond_init (&ts->ts_cond);     /* CLOCK_MONOTONIC: thread_set_wait_until */
  ts->ts_running = 0;
  ts->ts_max = max;
  ts->ts_ndone = 0;
}

void
thread_set_destroy (struct thread_set *ts)
{
  assert (ts->ts_running == 0 && ts->ts_ndone == 0);
  pthread_cond_destroy (&ts->ts_cond);
  pthread_mutex_destroy (&ts->ts_lock);
}

/* Join the finished threads.  ts_lock held; dropped while joining. */
static void
join_done_locked (struct thread_set *ts)
{
  while (ts->ts_ndone > 0) {
    pthread_t t = ts->ts_done[--ts->ts_ndone];

    pthread_mutex_unlock (&ts->ts_lock);
    pthread_join (t, NULL);
    pthread_mutex_lock (&ts->ts_lock);
  }
}

/* Start fn (arg) in a new thread of the set.  Returns 0, or -1 with
 * errno EAGAIN if ts_max threads are running, or pthread_create's
 * error. */
int
thread_set_start (struct thread_set *ts, void *(*fn) (void *), void *arg)
{
  pthread_t t;
  int e;

  pthread_mutex_lock (&ts->ts_lock);
  join_done_locked (ts);
  if (ts->ts_running >= ts->ts_max) {
    pthread_mutex_unlock (&ts->ts_lock);
    errno = EAGAIN;
    return -1;
  }
  /* Counted before it exists, so that its thread_set_finish (which may
   * come before pthread_create returns) finds it counted. */
  ts->ts_running++;
  e = pthread_create (&t, NULL, fn, arg);
  if (e != 0)
    ts->ts_running--;
  pthread_mutex_unlock (&ts->ts_lock);
  if (e != 0) {
    errno = e;
    return -1;
  }
  return 0;
}

/* The last call of a thread of the set: after it the thread only
 * returns (its caller must not touch anything shared any more). */
void
thread_set_finish (struct thread_set *ts)
{
  pthread_mutex_lock (&ts->ts_lock);
  assert (ts->ts_running > 0 && ts->ts_ndone < THREAD_SET_MAX);
  ts->ts_done[ts->ts_ndone++] = pthread_self ();
  ts->ts_running--;
  pthread_cond_broadcast (&ts->ts_cond);
  pthread_mutex_unlock (&ts->ts_lock);
}

/* Wait until every thread of the set has finished or the deadline
 * (CLOCK_MONOTONIC, as deadline_after_ns) has passed; join those that
 * finished.  Returns how many still run. */
unsigned
thread_set_wait_until (struct thread_set *ts, const struct timespec *deadline)
{
  unsigned running;

  pthread_mutex_lock (&ts->ts_lock);
  for (;;) {
    join_done_locked (ts);
    if (ts->ts_running == 0 ||
        pthread_cond_timedwait (&ts->ts_cond, &ts->ts_lock,
                                deadline) == ETIMEDOUT)
      break;
  }
  join_done_locked (ts);
  running = ts->ts_running;
  pthread_mutex_unlock (&ts->ts_lock);
  return running;
}

/* Wait until every thread of the set has finished, and join them all.
 * The caller has made them end (closed their sockets, or signalled
 * stop). */
void
thread_set_wait (struct thread_set *ts)
{
  pthread_mutex_lock (&ts->ts_lock);
  while (ts->ts_running > 0 || ts->ts_ndone > 0) {
    join_done_locked (ts);
    if (ts->ts_running > 0)
      pthread_cond_wait (&ts->ts_cond, &ts->ts_lock);
  }
  pthread_mutex_unlock (&ts->ts_lock);
}
