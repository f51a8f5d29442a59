/* nbdrepl: unit tests of common/conflict.c: two primaries' concurrent
 * writes.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include <check.h>

#include "conflict.h"

START_TEST (test_resolve)
{
  /* The peer applied ours first: theirs goes over ours, on both ids. */
  ck_assert_int_eq (conflict_resolve (true, 1, 0), CONFLICT_APPLY_AFTER);
  ck_assert_int_eq (conflict_resolve (true, 0, 1), CONFLICT_APPLY_AFTER);
  /* Crossed: the higher id's write is the newer one on both nodes. */
  ck_assert_int_eq (conflict_resolve (false, 1, 0), CONFLICT_KEEP_LOCAL);
  ck_assert_int_eq (conflict_resolve (false, 0, 1), CONFLICT_APPLY_AFTER);
  ck_assert_int_eq (conflict_resolve (false, 7, 3), CONFLICT_KEEP_LOCAL);
}
END_TEST

/* Node x's view of the other's write w_y, when w_y is taken from the
 * connection: either x's own write w_x is not in flight (x applied w_y
 * before it started w_x, which is then newer, or w_x was done before:
 * older), or it is, acknowledged by y before w_y came, or not.  Returns
 * whether x ends with w_x on top. */
enum view { NOT_IN_FLIGHT_NEWER, IN_FLIGHT_ACKED, IN_FLIGHT_CROSSED };

static bool
ends_with_own (enum view v, uint32_t x, uint32_t y)
{
  switch (v) {
  case NOT_IN_FLIGHT_NEWER:
    return true;
  case IN_FLIGHT_ACKED:
  case IN_FLIGHT_CROSSED:
    return conflict_resolve (v == IN_FLIGHT_ACKED, x, y)
           == CONFLICT_KEEP_LOCAL;
  }
  abort ();
}

/* Both nodes end with the same write on top in every case the protocol
 * allows: the writes crossed (both in flight, neither acknowledged
 * first), or one node applied the other's before it started its own
 * (which the other sees as acknowledged before the newer write came). */
START_TEST (test_resolve_symmetric)
{
  uint32_t ids[][2] = { { 0, 1 }, { 1, 0 }, { 2, 9 } };
  size_t i;

  for (i = 0; i < sizeof ids / sizeof ids[0]; i++) {
    uint32_t a = ids[i][0], b = ids[i][1];

    /* Crossed. */
    ck_assert (ends_with_own (IN_FLIGHT_CROSSED, a, b) ==
               !ends_with_own (IN_FLIGHT_CROSSED, b, a));
    /* a applied b's write, then wrote: a's is newer on both. */
    ck_assert (ends_with_own (NOT_IN_FLIGHT_NEWER, a, b));
    ck_assert (!ends_with_own (IN_FLIGHT_ACKED, b, a));
    /* b applied a's write, then wrote: b's is newer on both. */
    ck_assert (ends_with_own (NOT_IN_FLIGHT_NEWER, b, a));
    ck_assert (!ends_with_own (IN_FLIGHT_ACKED, a, b));
  }
}
END_TEST

static ssize_t
pieces (uint64_t s, uint64_t e, const struct conflict_range *d, size_t n,
        struct conflict_range *out)
{
  return conflict_pieces (s, e, d, n, out, n + 1);
}

START_TEST (test_pieces)
{
  struct conflict_range out[8];
  struct conflict_range d[3];

  /* Nothing dropped: the whole range. */
  ck_assert_int_eq (pieces (0, 4096, NULL, 0, out), 1);
  ck_assert_uint_eq (out[0].cr_start, 0);
  ck_assert_uint_eq (out[0].cr_end, 4096);
  /* All of it. */
  d[0] = (struct conflict_range) { 0, 8192 };
  ck_assert_int_eq (pieces (4096, 8192, d, 1, out), 0);
  /* The middle: two parts. */
  d[0] = (struct conflict_range) { 4096, 8192 };
  ck_assert_int_eq (pieces (0, 12288, d, 1, out), 2);
  ck_assert_uint_eq (out[0].cr_start, 0);
  ck_assert_uint_eq (out[0].cr_end, 4096);
  ck_assert_uint_eq (out[1].cr_start, 8192);
  ck_assert_uint_eq (out[1].cr_end, 12288);
  /* Out of order, overlapping each other, partly outside. */
  d[0] = (struct conflict_range) { 9000, 20000 };
  d[1] = (struct conflict_range) { 100, 200 };
  d[2] = (struct conflict_range) { 150, 1000 };
  ck_assert_int_eq (pieces (0, 10000, d, 3, out), 2);
  ck_assert_uint_eq (out[0].cr_start, 0);
  ck_assert_uint_eq (out[0].cr_end, 100);
  ck_assert_uint_eq (out[1].cr_start, 1000);
  ck_assert_uint_eq (out[1].cr_end, 9000);
  /* Too little room. */
  d[0] = (struct conflict_range) { 10, 20 };
  d[1] = (struct conflict_range) { 30, 40 };
  errno = 0;
  ck_assert_int_eq (conflict_pieces (0, 100, d, 2, out, 2), -1);
  ck_assert_int_eq (errno, ERANGE);
}
END_TEST

/* Against a byte map, on random cases. */
START_TEST (test_pieces_random)
{
  unsigned seed = 18;
  int round;

  for (round = 0; round < 2000; round++) {
    struct conflict_range d[4], out[5];
    bool keep[64];
    uint64_t s = rand_r (&seed) % 64, e = s + rand_r (&seed) % (65 - s);
    size_t n = rand_r (&seed) % 5, i;
    ssize_t np;
    uint64_t x;

    for (i = 0; i < n; i++) {
      d[i].cr_start = rand_r (&seed) % 64;
      d[i].cr_end = d[i].cr_start + rand_r (&seed) % 20;
    }
    for (x = 0; x < 64; x++) {
      keep[x] = x >= s && x < e;
      for (i = 0; i < n; i++)
        if (x >= d[i].cr_start && x < d[i].cr_end)
          keep[x] = false;
    }
    np = pieces (s, e, d, n, out);
    ck_assert_int_ge (np, 0);
    for (i = 0; i < (size_t) np; i++) {
      ck_assert_uint_lt (out[i].cr_start, out[i].cr_end);
      if (i > 0)            /* ascending, and never touching */
        ck_assert_uint_lt (out[i - 1].cr_end, out[i].cr_start);
      for (x = out[i].cr_start; x < out[i].cr_end; x++) {
        ck_assert (keep[x]);
        keep[x] = false;
      }
    }
    for (x = 0; x < 64; x++)
      ck_assert_msg (!keep[x], "round %d: byte %" PRIu64 " missing",
                     round, x);
  }
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("conflict");
  TCase *tc = tcase_create ("core");
  SRunner *sr;
  int failed;

  tcase_add_test (tc, test_resolve);
  tcase_add_test (tc, test_resolve_symmetric);
  tcase_add_test (tc, test_pieces);
  tcase_add_test (tc, test_pieces_random);
  suite_add_tcase (s, tc);
  sr = srunner_create (s);
  srunner_run_all (sr, CK_NORMAL);
  failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
