/* nbdrepl: unit tests for the interval lock.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 */
#include <config.h>

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

/* Disjoint ranges are held at once. */
START_TEST (test_disjoint)
{
  struct interval_lock il;
  struct ilock_range a, b, c;

  ilock_init (&il);
  ilock_acquire (&il, &a, 0, 4096);
  ilock_acquire (&il, &b, 4096, 4096);    /* adjacent, not overlapping */
  ilock_acquire (&il, &c, 1 << 20, 1);
  ilock_release (&il, &b);
  ilock_release (&il, &a);
  ilock_release (&il, &c);
  ck_assert_ptr_null (il.il_held);
  ilock_destroy (&il);
}
END_TEST

struct blocker {
  struct interval_lock *il;
  uint64_t off, len;
  atomic_int acquired;
};

static void *
acquire_thread (void *arg)
{
  struct blocker *b = arg;
  struct ilock_range r;

  ilock_acquire (b->il, &r, b->off, b->len);
  atomic_store (&b->acquired, 1);
  ilock_release (b->il, &r);
  return NULL;
}

/* Wait (bounded) until a thread is blocked in ilock_acquire. */
static void
wait_for_waiter (struct interval_lock *il)
{
  int i;

  for (i = 0; i < 5000; i++) {
    unsigned w;
    pthread_mutex_lock (&il->il_lock);
    w = il->il_waiters;
    pthread_mutex_unlock (&il->il_lock);
    if (w > 0)
      return;
    usleep (1000);
  }
  ck_abort_msg ("no thread blocked within 5 s");
}

/* An overlapping range waits until the holder releases. */
START_TEST (test_overlap_blocks)
{
  struct interval_lock il;
  struct ilock_range held;
  struct blocker b = { .il = &il, .off = 4095, .len = 2 };
  pthread_t t;

  ilock_init (&il);
  ilock_acquire (&il, &held, 0, 4096);
  ck_assert_int_eq (pthread_create (&t, NULL, acquire_thread, &b), 0);
  wait_for_waiter (&il);
  ck_assert_int_eq (atomic_load (&b.acquired), 0);
  ilock_release (&il, &held);
  ck_assert_int_eq (pthread_join (t, NULL), 0);
  ck_assert_int_eq (atomic_load (&b.acquired), 1);
  ilock_destroy (&il);
}
END_TEST

/* Many threads hammer a small region with read-modify-write of a shared
 * array under the lock: with mutual exclusion for overlaps, no update is
 * lost. */
#define NTHREADS 8
#define NITER 20000
#define NSLOTS 16
static struct interval_lock hammer_il;
static uint64_t hammer_slots[NSLOTS];

static void *
hammer_thread (void *arg)
{
  unsigned seed = (uintptr_t) arg;
  int i;

  for (i = 0; i < NITER; i++) {
    unsigned s = rand_r (&seed) % NSLOTS;
    unsigned n = 1 + rand_r (&seed) % 3;
    struct ilock_range r;
    unsigned k;

    if (s + n > NSLOTS)
      n = NSLOTS - s;
    ilock_acquire (&hammer_il, &r, s * 512, n * 512);
    for (k = s; k < s + n; k++) {
      uint64_t v = hammer_slots[k];
      if (i % 64 == 0)
        sched_yield ();
      hammer_slots[k] = v + 1;
    }
    ilock_release (&hammer_il, &r);
  }
  return NULL;
}

START_TEST (test_hammer)
{
  pthread_t t[NTHREADS];
  uint64_t expected_total = 0, total = 0;
  unsigned seed;
  int i, j;

  ilock_init (&hammer_il);
  memset (hammer_slots, 0, sizeof hammer_slots);
  for (i = 0; i < NTHREADS; i++)
    ck_assert_int_eq (pthread_create (&t[i], NULL, hammer_thread,
                                      (void *) (uintptr_t) (i + 1)), 0);
  for (i = 0; i < NTHREADS; i++)
    pthread_join (t[i], NULL);

  /* Replay the same random sequence to know the expected count. */
  for (i = 0; i < NTHREADS; i++) {
    seed = i + 1;
    for (j = 0; j < NITER; j++) {
      unsigned s = rand_r (&seed) % NSLOTS;
      unsigned n = 1 + rand_r (&seed) % 3;
      if (s + n > NSLOTS)
        n = NSLOTS - s;
      expected_total += n;
    }
  }
  for (i = 0; i < NSLOTS; i++)
    total += hammer_slots[i];
  ck_assert_uint_eq (total, expected_total);
  ck_assert_ptr_null (hammer_il.il_held);
  ilock_destroy (&hammer_il);
}
END_TEST

static Suite *
ilock_suite (void)
{
  Suite *s = suite_create ("interval-lock");
  TCase *tc = tcase_create ("core");

  tcase_set_timeout (tc, 60);
  tcase_add_test (tc, test_disjoint);
  tcase_add_test (tc, test_overlap_blocks);
  tcase_add_test (tc, test_hammer);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (ilock_suite ());
  int failed;

  srunner_run_all (sr, CK_NORMAL);
  failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
