/* nbdrepl: unit tests of common/uuid-compare.c.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * Three kinds of test: one per row of the decision table (each checked
 * both ways round), scenarios built only from the lifecycle helpers,
 * and an exhaustive sweep over small tuples for the properties every
 * answer must have (mirror symmetry, no Inconsistent source, one
 * decision per rule, every row reachable).
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "uuid-compare.h"

/* Generations.  Arbitrary, distinct, none reserved. */
#define X  UINT64_C (0x1111111111111110)
#define Y  UINT64_C (0x2222222222222220)
#define Z  UINT64_C (0x3333333333333330)
#define W  UINT64_C (0x4444444444444440)
#define V  UINT64_C (0x5555555555555550)
/* "Random" UUIDs handed to the lifecycle helpers. */
#define N1 UINT64_C (0x0123456789abcdef)
#define N2 UINT64_C (0xfedcba9876543210)
#define N3 UINT64_C (0x0f1e2d3c4b5a6978)

#define J  UUID_JUST_CREATED
#define C  GU_FLAG_CONSISTENT
#define K  GU_FLAG_CRASHED_PRIMARY
#define P  GU_FLAG_PRIMARY
#define T  GU_FLAG_TENTATIVE

#define SIZE (UINT64_C (1) << 30)

static struct gen_uuids
gu (uint64_t current, uint64_t bitmap, uint64_t h0, uint64_t h1,
    uint32_t flags)
{
  struct gen_uuids u = {
    .gu_current = current, .gu_bitmap = bitmap,
    .gu_history = { h0, h1 }, .gu_flags = flags,
  };
  return u;
}

/* The rule the peer reports for the same pair. */
static int
rule_mirror (int rule)
{
  switch (rule) {
  case UUID_RULE_FRESH_LOCAL: return UUID_RULE_FRESH_PEER;
  case UUID_RULE_FRESH_PEER: return UUID_RULE_FRESH_LOCAL;
  case UUID_RULE_SAME_BITMAP_LOCAL: return UUID_RULE_SAME_BITMAP_PEER;
  case UUID_RULE_SAME_BITMAP_PEER: return UUID_RULE_SAME_BITMAP_LOCAL;
  case UUID_RULE_CRASHED_LOCAL_PRIMARY_NOW:
    return UUID_RULE_CRASHED_PEER_PRIMARY_NOW;
  case UUID_RULE_CRASHED_PEER_PRIMARY_NOW:
    return UUID_RULE_CRASHED_LOCAL_PRIMARY_NOW;
  case UUID_RULE_CRASHED_LOCAL: return UUID_RULE_CRASHED_PEER;
  case UUID_RULE_CRASHED_PEER: return UUID_RULE_CRASHED_LOCAL;
  case UUID_RULE_BITMAP_PEER: return UUID_RULE_BITMAP_LOCAL;
  case UUID_RULE_BITMAP_LOCAL: return UUID_RULE_BITMAP_PEER;
  case UUID_RULE_HISTORY_PEER: return UUID_RULE_HISTORY_LOCAL;
  case UUID_RULE_HISTORY_LOCAL: return UUID_RULE_HISTORY_PEER;
  case UUID_RULE_TENTATIVE_LOCAL: return UUID_RULE_TENTATIVE_PEER;
  case UUID_RULE_TENTATIVE_PEER: return UUID_RULE_TENTATIVE_LOCAL;
  case UUID_RULE_INCONSISTENT_LOCAL: return UUID_RULE_INCONSISTENT_PEER;
  case UUID_RULE_INCONSISTENT_PEER: return UUID_RULE_INCONSISTENT_LOCAL;
  default: return rule;
  }
}

/* compare (l, p) gives d by rule, and compare (p, l) the mirror image. */
static void
expect_at (const char *file, int line, const struct gen_uuids *l,
           const struct gen_uuids *p, enum uuid_decision d, int rule)
{
  enum uuid_decision got;
  int r = -1;

  got = uuid_compare (l, p, &r);
  ck_assert_msg (got == d && r == rule,
                 "%s:%d: local->peer: got %s by %s (%d), want %s by %s (%d)",
                 file, line, uuid_decision_name (got), uuid_rule_name (r), r,
                 uuid_decision_name (d), uuid_rule_name (rule), rule);
  r = -1;
  got = uuid_compare (p, l, &r);
  ck_assert_msg (got == uuid_decision_mirror (d) && r == rule_mirror (rule),
                 "%s:%d: peer->local: got %s by %s (%d), want %s by %s (%d)",
                 file, line, uuid_decision_name (got), uuid_rule_name (r), r,
                 uuid_decision_name (uuid_decision_mirror (d)),
                 uuid_rule_name (rule_mirror (rule)), rule_mirror (rule));
}
#define expect(l, p, d, rule) \
  expect_at (__FILE__, __LINE__, (l), (p), (d), (rule))

/* ---- One test per row of the table in uuid-compare.h. */

struct row {
  const char *rw_what;
  struct gen_uuids rw_local, rw_peer;
  enum uuid_decision rw_decision;
  int rw_rule;
};

#define G(cur, bm, h0, h1, fl) \
  { .gu_current = (cur), .gu_bitmap = (bm), .gu_history = { (h0), (h1) }, \
    .gu_flags = (fl) }

static const struct row rows[] = {
  { "both fresh: neither has data",
    G (J, 0, 0, 0, 0), G (J, 0, 0, 0, 0),
    UUID_NO_SYNC, UUID_RULE_FRESH_BOTH },
  { "local fresh: full sync from the peer",
    G (J, 0, 0, 0, 0), G (X, 0, 0, 0, C),
    UUID_SYNC_TARGET_FULL, UUID_RULE_FRESH_LOCAL },
  { "peer fresh: full sync to the peer",
    G (X, 0, 0, 0, C), G (J, 0, 0, 0, 0),
    UUID_SYNC_SOURCE_FULL, UUID_RULE_FRESH_PEER },
  { "same generation, only local has a bitmap UUID",
    G (X, V, 0, 0, C), G (X, 0, 0, 0, C),
    UUID_SYNC_SOURCE_BITMAP, UUID_RULE_SAME_BITMAP_LOCAL },
  { "same generation, only the peer has a bitmap UUID",
    G (X, 0, 0, 0, C), G (X, V, 0, 0, C),
    UUID_SYNC_TARGET_BITMAP, UUID_RULE_SAME_BITMAP_PEER },
  { "peer crashed as primary, local is primary now",
    G (X, 0, 0, 0, C | P), G (X, 0, 0, 0, C | K),
    UUID_SYNC_SOURCE_BITMAP, UUID_RULE_CRASHED_LOCAL_PRIMARY_NOW },
  { "local crashed as primary, the peer is primary now",
    G (X, 0, 0, 0, C | K), G (X, 0, 0, 0, C | P),
    UUID_SYNC_TARGET_BITMAP, UUID_RULE_CRASHED_PEER_PRIMARY_NOW },
  { "a crash, and both are primary now",
    G (X, 0, 0, 0, C | K | P), G (X, 0, 0, 0, C | P),
    UUID_SPLIT_BRAIN, UUID_RULE_CRASHED_BOTH_PRIMARY_NOW },
  { "local crashed as primary, both secondary",
    G (X, 0, 0, 0, C | K), G (X, 0, 0, 0, C),
    UUID_SYNC_SOURCE_BITMAP, UUID_RULE_CRASHED_LOCAL },
  { "peer crashed as primary, both secondary",
    G (X, 0, 0, 0, C), G (X, 0, 0, 0, C | K),
    UUID_SYNC_TARGET_BITMAP, UUID_RULE_CRASHED_PEER },
  { "both crashed as primary in the same generation",
    G (X, 0, 0, 0, C | K), G (X, 0, 0, 0, C | K),
    UUID_SYNC_BITMAP_TIEBREAK, UUID_RULE_CRASHED_BOTH },
  { "same generation, no bitmaps, no crash (a role alone changes nothing)",
    G (X, 0, Y, 0, C | P), G (X, 0, Y, 0, C),
    UUID_NO_SYNC, UUID_RULE_SAME },
  { "the peer's bitmap counts from our generation",
    G (X, 0, 0, 0, C), G (Y, X, 0, 0, C),
    UUID_SYNC_TARGET_BITMAP, UUID_RULE_BITMAP_PEER },
  { "each bitmap counts from the other's generation",
    G (X, Y, 0, 0, C), G (Y, X, 0, 0, C),
    UUID_SPLIT_BRAIN, UUID_RULE_BITMAP_CROSSED },
  { "our bitmap counts from the peer's generation",
    G (Y, X, 0, 0, C), G (X, 0, 0, 0, C),
    UUID_SYNC_SOURCE_BITMAP, UUID_RULE_BITMAP_LOCAL },
  { "our generation is in the peer's history",
    G (X, 0, 0, 0, C), G (Y, 0, W, X, C),
    UUID_SYNC_TARGET_FULL, UUID_RULE_HISTORY_PEER },
  { "the peer's generation is in our history",
    G (Y, 0, X, 0, C), G (X, 0, 0, 0, C),
    UUID_SYNC_SOURCE_FULL, UUID_RULE_HISTORY_LOCAL },
  { "both moved on from a common generation, ours is tentative",
    G (Y, 0, X, 0, C | T), G (Z, 0, X, 0, C),
    UUID_SYNC_TARGET_FULL, UUID_RULE_TENTATIVE_LOCAL },
  { "both moved on from a common generation, the peer's is tentative",
    G (Y, X, 0, 0, C), G (Z, X, 0, 0, C | T),
    UUID_SYNC_SOURCE_FULL, UUID_RULE_TENTATIVE_PEER },
  { "both bitmaps count from the same generation",
    G (Y, X, 0, 0, C), G (Z, X, 0, 0, C),
    UUID_SPLIT_BRAIN, UUID_RULE_SPLIT_BRAIN_BITMAP },
  { "a common generation in both histories",
    G (Y, 0, W, X, C), G (Z, 0, X, 0, C),
    UUID_SPLIT_BRAIN, UUID_RULE_SPLIT_BRAIN_HISTORY },
  { "neither consistent: no source to copy from",
    G (X, 0, 0, 0, 0), G (J, 0, 0, 0, 0),
    UUID_SOURCE_INCONSISTENT, UUID_RULE_NO_CONSISTENT_SOURCE },
  { "local not consistent, same generation: full sync from the peer",
    G (X, 0, 0, 0, 0), G (X, 0, 0, 0, C),
    UUID_SYNC_TARGET_FULL, UUID_RULE_INCONSISTENT_LOCAL },
  { "peer not consistent, same generation: full sync to the peer",
    G (X, 0, 0, 0, C), G (X, 0, 0, 0, 0),
    UUID_SYNC_SOURCE_FULL, UUID_RULE_INCONSISTENT_PEER },
  { "nothing in common (empty slots are no common generation)",
    G (Y, 0, 0, 0, C), G (Z, 0, 0, 0, C),
    UUID_UNRELATED, UUID_RULE_UNRELATED },
};
#define NROWS ((int) (sizeof rows / sizeof rows[0]))

/* Every rule of enum uuid_rule. */
static const int all_rules[] = {
  UUID_RULE_FRESH_BOTH, UUID_RULE_FRESH_LOCAL, UUID_RULE_FRESH_PEER,
  UUID_RULE_SAME_BITMAP_LOCAL, UUID_RULE_SAME_BITMAP_PEER,
  UUID_RULE_CRASHED_LOCAL_PRIMARY_NOW, UUID_RULE_CRASHED_PEER_PRIMARY_NOW,
  UUID_RULE_CRASHED_BOTH_PRIMARY_NOW, UUID_RULE_CRASHED_LOCAL,
  UUID_RULE_CRASHED_PEER, UUID_RULE_CRASHED_BOTH, UUID_RULE_SAME,
  UUID_RULE_BITMAP_PEER, UUID_RULE_BITMAP_CROSSED, UUID_RULE_BITMAP_LOCAL,
  UUID_RULE_HISTORY_PEER, UUID_RULE_HISTORY_LOCAL,
  UUID_RULE_TENTATIVE_LOCAL, UUID_RULE_TENTATIVE_PEER,
  UUID_RULE_SPLIT_BRAIN_BITMAP, UUID_RULE_SPLIT_BRAIN_HISTORY,
  UUID_RULE_NO_CONSISTENT_SOURCE, UUID_RULE_INCONSISTENT_LOCAL,
  UUID_RULE_INCONSISTENT_PEER, UUID_RULE_UNRELATED,
};
#define NRULES ((int) (sizeof all_rules / sizeof all_rules[0]))

/* The decision a rule always gives, from the rows; -1 if none. */
static int
rule_decision (int rule)
{
  int i;

  for (i = 0; i < NROWS; ++i)
    if (rows[i].rw_rule == rule)
      return rows[i].rw_decision;
  return -1;
}

START_TEST (test_row)
{
  const struct row *rw = &rows[_i];
  char err[128];

  /* Every row's tuples are well formed: the table never relies on
   * input that uuid_check would turn away. */
  ck_assert_msg (uuid_check (&rw->rw_local, err, sizeof err) == 0,
                 "%s: local: %s", rw->rw_what, err);
  ck_assert_msg (uuid_check (&rw->rw_peer, err, sizeof err) == 0,
                 "%s: peer: %s", rw->rw_what, err);
  expect_at (rw->rw_what, _i, &rw->rw_local, &rw->rw_peer,
             rw->rw_decision, rw->rw_rule);
}
END_TEST

/* The rows above cover every rule, once each, and every rule has a
 * name. */
START_TEST (test_rows_cover_every_rule)
{
  int i, j, n;

  ck_assert_int_eq (NROWS, NRULES);
  for (i = 0; i < NRULES; ++i) {
    for (n = 0, j = 0; j < NROWS; ++j)
      n += rows[j].rw_rule == all_rules[i];
    ck_assert_msg (n == 1, "rule %d (%s) has %d rows", all_rules[i],
                   uuid_rule_name (all_rules[i]), n);
    ck_assert_str_ne (uuid_rule_name (all_rules[i]), "unknown");
    for (j = 0; j < i; ++j)
      ck_assert_str_ne (uuid_rule_name (all_rules[i]),
                        uuid_rule_name (all_rules[j]));
  }
  ck_assert_str_eq (uuid_rule_name (0), "unknown");
  ck_assert_str_eq (uuid_rule_name (999), "unknown");
}
END_TEST

/* ---- Edges of the table that the one-row-each tests leave out. */

START_TEST (test_edges)
{
  struct gen_uuids l, p;

  /* A current UUID of 0 (zeroed metadata) reads as fresh. */
  l = gu (0, 0, 0, 0, 0);
  p = gu (X, 0, 0, 0, C);
  expect (&l, &p, UUID_SYNC_TARGET_FULL, UUID_RULE_FRESH_LOCAL);
  p = gu (J, 0, 0, 0, 0);
  expect (&l, &p, UUID_NO_SYNC, UUID_RULE_FRESH_BOTH);

  /* Both have a bitmap UUID in the same generation: no side is "the"
   * source; with no crash, nothing to do. */
  l = gu (X, V, 0, 0, C);
  p = gu (X, W, 0, 0, C);
  expect (&l, &p, UUID_NO_SYNC, UUID_RULE_SAME);

  /* Each generation in the other's history: a cycle, no full sync
   * either way; falls through (here to unrelated). */
  l = gu (X, 0, Y, 0, C);
  p = gu (Y, 0, X, 0, C);
  expect (&l, &p, UUID_UNRELATED, UUID_RULE_UNRELATED);

  /* A common generation as one side's bitmap UUID and the other's
   * history UUID is a split brain too (DRBD looks at histories only). */
  l = gu (Y, X, 0, 0, C);
  p = gu (Z, 0, X, 0, C);
  expect (&l, &p, UUID_SPLIT_BRAIN, UUID_RULE_SPLIT_BRAIN_HISTORY);

  /* Part 2 keeps a resync whose source is the consistent side, even
   * bitmap-based (how an interrupted resync resumes). */
  l = gu (X, 0, 0, 0, 0);
  p = gu (Y, X, 0, 0, C);
  expect (&l, &p, UUID_SYNC_TARGET_BITMAP, UUID_RULE_BITMAP_PEER);
  l = gu (X, 0, 0, 0, 0);
  p = gu (Y, 0, X, 0, C);
  expect (&l, &p, UUID_SYNC_TARGET_FULL, UUID_RULE_HISTORY_PEER);

  /* Part 2 turns a resync from the not-consistent side around, always
   * as a full sync: its bitmap cannot describe its own mess. */
  l = gu (Y, X, 0, 0, 0);
  p = gu (X, 0, 0, 0, C);
  expect (&l, &p, UUID_SYNC_TARGET_FULL, UUID_RULE_INCONSISTENT_LOCAL);
  l = gu (X, 0, 0, 0, K);
  p = gu (X, 0, 0, 0, C | K);
  expect (&l, &p, UUID_SYNC_TARGET_FULL, UUID_RULE_INCONSISTENT_LOCAL);

  /* Part 2 never overrides a refusal: not a split brain, even with one
   * side not consistent, nor unrelated data. */
  l = gu (Y, X, 0, 0, 0);
  p = gu (Z, X, 0, 0, C);
  expect (&l, &p, UUID_SPLIT_BRAIN, UUID_RULE_SPLIT_BRAIN_BITMAP);
  l = gu (Y, 0, 0, 0, 0);
  p = gu (Z, 0, 0, 0, C);
  expect (&l, &p, UUID_UNRELATED, UUID_RULE_UNRELATED);

  /* Neither consistent: no resync, but no refusal when none is needed;
   * a refusal when one is, whichever row asked for it. */
  l = gu (X, 0, 0, 0, 0);
  p = gu (X, 0, 0, 0, 0);
  expect (&l, &p, UUID_NO_SYNC, UUID_RULE_SAME);
  l = gu (Y, X, 0, 0, 0);
  p = gu (X, 0, 0, 0, 0);
  expect (&l, &p, UUID_SOURCE_INCONSISTENT, UUID_RULE_NO_CONSISTENT_SOURCE);
  l = gu (X, 0, 0, 0, K);
  p = gu (X, 0, 0, 0, K);
  expect (&l, &p, UUID_SOURCE_INCONSISTENT, UUID_RULE_NO_CONSISTENT_SOURCE);

  /* A fresh tuple that claims to be consistent is not: its peer still
   * counts as the only source. */
  l = gu (J, 0, 0, 0, C);
  p = gu (X, 0, 0, 0, C);
  expect (&l, &p, UUID_SYNC_TARGET_FULL, UUID_RULE_FRESH_LOCAL);

  /* rule may be NULL. */
  ck_assert_int_eq (uuid_compare (&l, &p, NULL), UUID_SYNC_TARGET_FULL);
}
END_TEST

/* ---- Scenarios, built from the lifecycle helpers only. */

/* A and B created --in-sync; A is primary. */
static void
in_sync_pair (struct gen_uuids *a, struct gen_uuids *b)
{
  uuid_init_in_sync (a, "r0", SIZE);
  uuid_init_in_sync (b, "r0", SIZE);
  a->gu_flags |= GU_FLAG_PRIMARY;
}

/* `create-md --in-sync` on every node: identical without talking, so
 * no initial sync; a different name or size is another resource. */
START_TEST (test_scenario_in_sync_create)
{
  struct gen_uuids a, b;
  char err[128];

  uuid_init_in_sync (&a, "r0", SIZE);
  uuid_init_in_sync (&b, "r0", SIZE);
  ck_assert_int_eq (uuid_check (&a, err, sizeof err), 0);
  ck_assert (a.gu_flags & GU_FLAG_CONSISTENT);
  ck_assert_uint_eq (a.gu_bitmap, 0);
  ck_assert_uint_eq (a.gu_history[0], 0);
  expect (&a, &b, UUID_NO_SYNC, UUID_RULE_SAME);

  uuid_init_in_sync (&b, "r1", SIZE);
  expect (&a, &b, UUID_UNRELATED, UUID_RULE_UNRELATED);
  uuid_init_in_sync (&b, "r0", SIZE + 512);
  expect (&a, &b, UUID_UNRELATED, UUID_RULE_UNRELATED);
  uuid_init_in_sync (&b, "r", SIZE);     /* a prefix of the name */
  expect (&a, &b, UUID_UNRELATED, UUID_RULE_UNRELATED);

  /* The value is part of the on-disk format: pinned. */
  ck_assert_uint_eq (uuid_in_sync_value ("r0", SIZE),
                     UINT64_C (0xddb36a78e56828ef));
  ck_assert_uint_ne (uuid_in_sync_value ("", 0), 0);
  ck_assert_uint_ne (uuid_in_sync_value ("", 0), J);
}
END_TEST

/* (1) The primary writes while the secondary is away: the primary is
 * the bitmap-based sync source. */
START_TEST (test_scenario_primary_writes_alone)
{
  struct gen_uuids a, b;
  uint64_t x;

  in_sync_pair (&a, &b);
  x = a.gu_current;
  uuid_new_current (&a, N1);             /* B away, first write */
  ck_assert_uint_eq (a.gu_current, N1);
  ck_assert_uint_eq (a.gu_bitmap, x);
  expect (&a, &b, UUID_SYNC_SOURCE_BITMAP, UUID_RULE_BITMAP_LOCAL);

  /* Another new generation while B is still away (A restarted, say):
   * the bitmap still counts from B's generation. */
  uuid_new_current (&a, N2);
  ck_assert_uint_eq (a.gu_bitmap, x);
  ck_assert_uint_eq (a.gu_history[0], N1);
  expect (&a, &b, UUID_SYNC_SOURCE_BITMAP, UUID_RULE_BITMAP_LOCAL);
}
END_TEST

/* (2) Both wrote while apart: split brain, the same answer from both
 * sides; and still split brain once one side's bitmap is cleared by a
 * sync with a third node. */
START_TEST (test_scenario_split_brain)
{
  struct gen_uuids a, b;

  in_sync_pair (&a, &b);
  uuid_new_current (&a, N1);             /* A writes, B away */
  b.gu_flags |= GU_FLAG_PRIMARY;         /* B promoted, writes, A away */
  uuid_new_current (&b, N2);
  expect (&a, &b, UUID_SPLIT_BRAIN, UUID_RULE_SPLIT_BRAIN_BITMAP);
  ck_assert (uuid_decision_refuses (uuid_compare (&a, &b, NULL)));

  uuid_clear_bitmap (&a);
  expect (&a, &b, UUID_SPLIT_BRAIN, UUID_RULE_SPLIT_BRAIN_HISTORY);
}
END_TEST

/* (3) After a resync has finished there is nothing to sync; if the
 * source stopped between the target's and its own end-of-resync
 * records, it resends from its (empty) bitmap. */
START_TEST (test_scenario_resync_finished)
{
  struct gen_uuids a, b, a_at_connect;
  uint64_t x;
  char err[128];

  in_sync_pair (&a, &b);
  x = a.gu_current;
  uuid_new_current (&a, N1);
  a_at_connect = a;
  ck_assert_int_eq (uuid_compare (&b, &a_at_connect, NULL),
                    UUID_SYNC_TARGET_BITMAP);

  uuid_resync_start_target (&b, &a_at_connect);
  ck_assert (!(b.gu_flags & GU_FLAG_CONSISTENT));
  ck_assert_uint_eq (b.gu_current, x);   /* unchanged until the end */

  uuid_resync_finished_target (&b, &a_at_connect);
  ck_assert (b.gu_flags & GU_FLAG_CONSISTENT);
  ck_assert_uint_eq (b.gu_current, N1);
  expect (&a, &b, UUID_SYNC_SOURCE_BITMAP, UUID_RULE_SAME_BITMAP_LOCAL);

  uuid_resync_finished_source (&a);
  ck_assert_uint_eq (a.gu_bitmap, 0);
  ck_assert_uint_eq (a.gu_history[0], x);
  ck_assert_mem_eq (&a.gu_history, &b.gu_history, sizeof a.gu_history);
  ck_assert_int_eq (uuid_check (&a, err, sizeof err), 0);
  ck_assert_int_eq (uuid_check (&b, err, sizeof err), 0);
  expect (&a, &b, UUID_NO_SYNC, UUID_RULE_SAME);
}
END_TEST

/* (4) A fresh node joins a resource with data: it is the full-sync
 * target; afterwards the two are in sync. */
START_TEST (test_scenario_fresh_node_joins)
{
  struct gen_uuids a, b, dummy, a_at_connect, b_at_connect;

  in_sync_pair (&a, &dummy);
  uuid_new_current (&a, N1);             /* some history on A */
  uuid_clear_bitmap (&a);
  uuid_init_fresh (&b);
  expect (&a, &b, UUID_SYNC_SOURCE_FULL, UUID_RULE_FRESH_PEER);

  a_at_connect = a;
  b_at_connect = b;
  uuid_full_sync_start_source (&a, &b_at_connect);
  uuid_resync_start_target (&b, &a_at_connect);
  uuid_resync_finished_target (&b, &a_at_connect);
  uuid_resync_finished_source (&a);
  ck_assert_uint_eq (b.gu_current, N1);
  ck_assert_uint_eq (a.gu_bitmap, 0);
  ck_assert_mem_eq (&a.gu_history, &b.gu_history, sizeof a.gu_history);
  expect (&a, &b, UUID_NO_SYNC, UUID_RULE_SAME);
}
END_TEST

/* (5) Unrelated data is refused: other resources, or two fresh nodes
 * each forced primary on its own. */
START_TEST (test_scenario_unrelated)
{
  struct gen_uuids a, b;

  uuid_init_in_sync (&a, "web", SIZE);
  uuid_init_in_sync (&b, "db", SIZE);
  uuid_new_current (&a, N1);
  uuid_new_current (&b, N2);
  expect (&a, &b, UUID_UNRELATED, UUID_RULE_UNRELATED);
  ck_assert (uuid_decision_refuses (UUID_UNRELATED));

  uuid_init_fresh (&a);
  uuid_init_fresh (&b);
  uuid_force_primary (&a, N1);
  uuid_force_primary (&b, N2);
  expect (&a, &b, UUID_UNRELATED, UUID_RULE_UNRELATED);
}
END_TEST

/* (6) A primary crashes.  Its activity-log extents are set in its
 * bitmap when it restarts (the engine's job), and the decision makes
 * sure a bitmap-based resync runs: from the crashed primary if both are
 * secondary, from whoever is primary now otherwise.  Once done,
 * nothing is left to sync. */
START_TEST (test_scenario_crashed_primary)
{
  struct gen_uuids a, b, a_at_connect;

  in_sync_pair (&a, &b);
  /* A restarts after the crash: secondary, crashed primary. */
  a.gu_flags = (a.gu_flags & ~GU_FLAG_PRIMARY) | GU_FLAG_CRASHED_PRIMARY;
  expect (&a, &b, UUID_SYNC_SOURCE_BITMAP, UUID_RULE_CRASHED_LOCAL);

  a_at_connect = a;
  uuid_resync_start_target (&b, &a_at_connect);
  uuid_resync_finished_target (&b, &a_at_connect);
  uuid_resync_finished_source (&a);
  ck_assert (!(a.gu_flags & GU_FLAG_CRASHED_PRIMARY));
  expect (&a, &b, UUID_NO_SYNC, UUID_RULE_SAME);

  /* B was promoted meanwhile but has not written: B is the source. */
  in_sync_pair (&a, &b);
  a.gu_flags = (a.gu_flags & ~GU_FLAG_PRIMARY) | GU_FLAG_CRASHED_PRIMARY;
  b.gu_flags |= GU_FLAG_PRIMARY;
  expect (&b, &a, UUID_SYNC_SOURCE_BITMAP,
          UUID_RULE_CRASHED_LOCAL_PRIMARY_NOW);
  uuid_resync_start_target (&a, &b);
  uuid_resync_finished_target (&a, &b);
  uuid_resync_finished_source (&b);
  ck_assert (!(a.gu_flags & GU_FLAG_CRASHED_PRIMARY));
  expect (&a, &b, UUID_NO_SYNC, UUID_RULE_SAME);

  /* B was promoted and wrote: an ordinary bitmap-based resync from B
   * (A's extents travel in A's bitmap, merged). */
  in_sync_pair (&a, &b);
  a.gu_flags = (a.gu_flags & ~GU_FLAG_PRIMARY) | GU_FLAG_CRASHED_PRIMARY;
  b.gu_flags |= GU_FLAG_PRIMARY;
  uuid_new_current (&b, N1);
  expect (&b, &a, UUID_SYNC_SOURCE_BITMAP, UUID_RULE_BITMAP_LOCAL);

  /* Both crashed as primary (B promoted, crashed before writing): the
   * engine breaks the tie by node id; both sides see the same answer. */
  in_sync_pair (&a, &b);
  a.gu_flags = GU_FLAG_CONSISTENT | GU_FLAG_CRASHED_PRIMARY;
  b.gu_flags = GU_FLAG_CONSISTENT | GU_FLAG_CRASHED_PRIMARY;
  expect (&a, &b, UUID_SYNC_BITMAP_TIEBREAK, UUID_RULE_CRASHED_BOTH);
}
END_TEST

/* (7) A fresh resource: both nodes Inconsistent, no sync; the node
 * started as primary (forced) becomes the full-sync source of every
 * fresh peer. */
START_TEST (test_scenario_forced_primary_fresh)
{
  struct gen_uuids a, b, c, a_at_connect;
  char err[128];

  uuid_init_fresh (&a);
  uuid_init_fresh (&b);
  uuid_init_fresh (&c);
  ck_assert_int_eq (uuid_check (&a, err, sizeof err), 0);
  ck_assert (!(a.gu_flags & GU_FLAG_CONSISTENT));
  expect (&a, &b, UUID_NO_SYNC, UUID_RULE_FRESH_BOTH);

  uuid_force_primary (&a, N1);
  a.gu_flags |= GU_FLAG_PRIMARY;
  ck_assert (a.gu_flags & GU_FLAG_CONSISTENT);
  ck_assert_uint_eq (a.gu_current, N1);
  ck_assert_uint_eq (a.gu_bitmap, 0);    /* nothing counts from "fresh" */
  ck_assert_uint_eq (a.gu_history[0], 0);
  expect (&a, &b, UUID_SYNC_SOURCE_FULL, UUID_RULE_FRESH_PEER);
  expect (&a, &c, UUID_SYNC_SOURCE_FULL, UUID_RULE_FRESH_PEER);

  a_at_connect = a;
  uuid_full_sync_start_source (&a, &b);
  uuid_resync_start_target (&b, &a_at_connect);
  uuid_resync_finished_target (&b, &a_at_connect);
  uuid_resync_finished_source (&a);
  expect (&a, &b, UUID_NO_SYNC, UUID_RULE_SAME);
  /* B, now UpToDate, could feed C as well. */
  expect (&b, &c, UUID_SYNC_SOURCE_FULL, UUID_RULE_FRESH_PEER);
}
END_TEST

/* (8) The target of a resync is cut off half way; the source goes on
 * writing.  When it is back the resync resumes, same direction,
 * bitmap-based, and ends as usual. */
START_TEST (test_scenario_interrupted_resync)
{
  struct gen_uuids a, b, a_at_connect;

  in_sync_pair (&a, &b);
  uuid_new_current (&a, N1);
  a_at_connect = a;
  uuid_resync_start_target (&b, &a_at_connect);
  /* Cut off.  A writes on: a new generation, the bitmap UUID stays. */
  uuid_new_current (&a, N2);
  expect (&b, &a, UUID_SYNC_TARGET_BITMAP, UUID_RULE_BITMAP_PEER);

  /* B restarts in between: still not consistent, same answer. */
  ck_assert (!(b.gu_flags & GU_FLAG_CONSISTENT));
  a_at_connect = a;
  uuid_resync_start_target (&b, &a_at_connect);
  expect (&b, &a, UUID_SYNC_TARGET_BITMAP, UUID_RULE_BITMAP_PEER);
  uuid_resync_finished_target (&b, &a_at_connect);
  uuid_resync_finished_source (&a);
  ck_assert_uint_eq (b.gu_current, N2);
  expect (&a, &b, UUID_NO_SYNC, UUID_RULE_SAME);
}
END_TEST

/* An interrupted full sync resumes as a bitmap-based one: to a fresh
 * node, and to a node whose generation only the history knows. */
START_TEST (test_scenario_interrupted_full_sync)
{
  struct gen_uuids a, b, a_at_connect, b_at_connect;
  uint64_t x;

  /* To a fresh node. */
  uuid_init_in_sync (&a, "r0", SIZE);
  uuid_init_fresh (&b);
  a_at_connect = a;
  b_at_connect = b;
  uuid_full_sync_start_source (&a, &b_at_connect);
  uuid_resync_start_target (&b, &a_at_connect);
  ck_assert_uint_eq (b.gu_current, a.gu_current);
  expect (&a, &b, UUID_SYNC_SOURCE_BITMAP, UUID_RULE_SAME_BITMAP_LOCAL);
  /* ... and A wrote while B was away. */
  uuid_new_current (&a, N1);
  expect (&a, &b, UUID_SYNC_SOURCE_BITMAP, UUID_RULE_BITMAP_LOCAL);
  a_at_connect = a;
  uuid_resync_finished_target (&b, &a_at_connect);
  uuid_resync_finished_source (&a);
  expect (&a, &b, UUID_NO_SYNC, UUID_RULE_SAME);
  ck_assert_uint_ne (a.gu_history[0], a.gu_current);

  /* To a node whose generation X is in A's history, no bitmap. */
  in_sync_pair (&a, &b);
  x = a.gu_current;
  uuid_new_current (&a, N1);
  uuid_clear_bitmap (&a);
  expect (&a, &b, UUID_SYNC_SOURCE_FULL, UUID_RULE_HISTORY_LOCAL);
  a_at_connect = a;
  b_at_connect = b;
  uuid_full_sync_start_source (&a, &b_at_connect);
  uuid_resync_start_target (&b, &a_at_connect);
  ck_assert_uint_eq (b.gu_current, x);
  expect (&a, &b, UUID_SYNC_SOURCE_BITMAP, UUID_RULE_BITMAP_LOCAL);
}
END_TEST

/* Forcing a node that is not consistent: no bitmap may count from its
 * half-synced generation, so its old peers get full syncs or see the
 * split brain. */
START_TEST (test_scenario_forced_inconsistent)
{
  struct gen_uuids a, b, c, a_at_connect;

  in_sync_pair (&a, &b);
  c = b;                                 /* C: still at the old X */
  uuid_new_current (&a, N1);
  a_at_connect = a;
  uuid_resync_start_target (&b, &a_at_connect);
  /* A dies; B, half synced, is forced primary. */
  uuid_force_primary (&b, N2);
  ck_assert (b.gu_flags & GU_FLAG_CONSISTENT);
  ck_assert_uint_eq (b.gu_bitmap, 0);
  ck_assert_uint_eq (b.gu_history[0], c.gu_current);
  expect (&b, &c, UUID_SYNC_SOURCE_FULL, UUID_RULE_HISTORY_LOCAL);
  expect (&b, &a, UUID_SPLIT_BRAIN, UUID_RULE_SPLIT_BRAIN_HISTORY);

  /* Forcing a consistent (Outdated) node keeps its bitmap relation. */
  in_sync_pair (&a, &b);
  uuid_force_primary (&b, N2);
  expect (&b, &a, UUID_SYNC_SOURCE_BITMAP, UUID_RULE_BITMAP_LOCAL);
}
END_TEST

/* Three nodes: A primary, B connected, C away.  A starts a generation
 * for C's sake; B takes it on.  B's view of C counts a bitmap too, its
 * view of A does not. */
START_TEST (test_scenario_three_nodes)
{
  struct gen_uuids a_c, a_b, b_a, b_c, c;

  uuid_init_in_sync (&a_c, "r0", SIZE);
  a_b = b_a = b_c = c = a_c;
  uuid_new_current (&a_c, N1);           /* A, for C: away */
  uuid_adopt_current (&a_b, N1);         /* A, for B: connected */
  uuid_adopt_current (&b_a, N1);         /* B, for A: connected */
  uuid_new_current (&b_c, N1);           /* B, for C: away */
  expect (&a_b, &b_a, UUID_NO_SYNC, UUID_RULE_SAME);
  expect (&a_c, &c, UUID_SYNC_SOURCE_BITMAP, UUID_RULE_BITMAP_LOCAL);
  expect (&b_c, &c, UUID_SYNC_SOURCE_BITMAP, UUID_RULE_BITMAP_LOCAL);
  /* Had B kept no bitmap for C, only the history would tell. */
  expect (&b_a, &c, UUID_SYNC_SOURCE_FULL, UUID_RULE_HISTORY_LOCAL);
}
END_TEST

/* One node's view of one peer: the node's current UUID and history
 * (shared by all its views) with the bitmap UUID it holds for that
 * peer, as the engine builds it from the superblock. */
static struct gen_uuids
view_of (const struct gen_uuids *shared, uint64_t bitmap)
{
  struct gen_uuids u = *shared;

  u.gu_bitmap = bitmap;
  return u;
}

/* Three nodes, B primary.  B starts a generation while C is away; A,
 * connected, is a resync target of B just then and takes B's view of A
 * whole at the end.  A must see that its generation grew out of C's:
 * C is behind A, not the other half of a split brain (seeds 203 and 204
 * of tests/fault-random.py ended in rule 100 this way). */
START_TEST (test_scenario_three_nodes_shared_history)
{
  struct gen_uuids b, a, c, b_a, b_c;
  uint64_t x;

  uuid_init_in_sync (&b, "r0", SIZE);
  x = b.gu_current;
  a = c = b;

  /* B writes while A is away; C, connected, follows B. */
  b_a = view_of (&b, 0);
  uuid_new_current (&b_a, N1);
  b = view_of (&b_a, 0);
  uuid_adopt_current (&c, N1);
  /* A is back and resynced by B. */
  ck_assert_int_eq (uuid_compare (&b_a, &a, NULL), UUID_SYNC_SOURCE_BITMAP);
  uuid_resync_finished_target (&a, &b_a);
  uuid_resync_finished_source (&b_a);
  b = view_of (&b_a, 0);
  expect (&b, &a, UUID_NO_SYNC, UUID_RULE_SAME);

  /* C goes away; B's next write starts a generation for C's sake. */
  b_c = view_of (&b, 0);
  uuid_new_current (&b_c, N2);
  b = view_of (&b_c, 0);
  expect (&b_c, &c, UUID_SYNC_SOURCE_BITMAP, UUID_RULE_BITMAP_LOCAL);
  /* A, a resync target of B at that moment, takes B's view of A. */
  b_a = view_of (&b, 0);
  uuid_resync_finished_target (&a, &b_a);
  ck_assert_uint_eq (a.gu_current, N2);
  ck_assert_uint_eq (a.gu_history[0], N1);
  ck_assert_uint_eq (a.gu_history[1], x);
  /* C, still at N1, comes back and meets A first. */
  expect (&a, &c, UUID_SYNC_SOURCE_FULL, UUID_RULE_HISTORY_LOCAL);
}
END_TEST

/* Three nodes, B primary, C away.  B's first write starts a generation
 * (tentative until a write of it completes); A, connected, takes it,
 * flag and all.  A is cut off before any write completes: B has lost
 * quorum, withdraws the generation (the engine restores B's tuple from
 * before it), and once C is back starts another from the same parent,
 * which its first completed write commits.  A then meets B or C: A is
 * behind, not the other half of a split brain (seed 505761707 of
 * tests/fault-random.py --nodes 3 --faults kill,stop,partition,promote
 * --duration 120 ended in rule 100 this way).  Had A's copy not been
 * tentative, it would be rule 100; had both been, too. */
START_TEST (test_scenario_withdrawn_generation)
{
  struct gen_uuids b, a, c, b_a, before, a_stale;
  uint64_t x;

  uuid_init_in_sync (&b, "r0", SIZE);
  x = b.gu_current;
  a = c = b;

  /* B's first write with C away: a tentative generation; A follows. */
  before = b;
  uuid_new_current (&b, N1);
  b.gu_flags |= T;
  uuid_adopt_current (&a, N1);
  a.gu_flags |= T;
  b_a = view_of (&b, 0);        /* A was connected: no bitmap for it */
  expect (&b_a, &a, UUID_NO_SYNC, UUID_RULE_SAME);
  a_stale = a;
  a_stale.gu_flags &= ~T;

  /* A is cut off; B withdraws N1 and, with C back, starts N2 from X. */
  b = before;
  uuid_new_current (&b, N2);
  b.gu_flags |= T;
  uuid_adopt_current (&c, N2);
  c.gu_flags |= T;
  /* Before a write of N2 completes, both are tentative: refused. */
  expect (&b, &a, UUID_SPLIT_BRAIN, UUID_RULE_SPLIT_BRAIN_HISTORY);
  /* A write of N2 completes: B, then C on B's UUIDS, commit it. */
  b.gu_flags &= ~T;
  c.gu_flags &= ~T;
  ck_assert_uint_eq (b.gu_bitmap, x);
  expect (&b, &a, UUID_SYNC_SOURCE_FULL, UUID_RULE_TENTATIVE_PEER);
  expect (&c, &a, UUID_SYNC_SOURCE_FULL, UUID_RULE_TENTATIVE_PEER);
  /* Without the flag A would be the other half of a split brain. */
  expect (&c, &a_stale, UUID_SPLIT_BRAIN, UUID_RULE_SPLIT_BRAIN_HISTORY);
  /* A resynced from C takes C's tuple, flag and all. */
  uuid_resync_finished_target (&a, &c);
  ck_assert_uint_eq (a.gu_current, N2);
  ck_assert (!(a.gu_flags & T));
  expect (&a, &b, UUID_SYNC_TARGET_BITMAP, UUID_RULE_SAME_BITMAP_PEER);
}
END_TEST

/* ---- The helpers one by one. */

START_TEST (test_new_current)
{
  struct gen_uuids u;

  uuid_init_fresh (&u);
  uuid_new_current (&u, N1);
  ck_assert_uint_eq (u.gu_current, N1);
  ck_assert_uint_eq (u.gu_bitmap, 0);
  ck_assert_uint_eq (u.gu_history[0], 0);

  /* The old current UUID goes into the history even when the bitmap
   * UUID takes it: the history is shared by every peer's view. */
  u = gu (X, 0, 0, 0, C);
  uuid_new_current (&u, N1);
  ck_assert_uint_eq (u.gu_bitmap, X);
  ck_assert_uint_eq (u.gu_history[0], X);
  ck_assert_uint_eq (u.gu_history[1], 0);
  uuid_new_current (&u, N2);
  uuid_new_current (&u, N3);
  ck_assert_uint_eq (u.gu_current, N3);
  ck_assert_uint_eq (u.gu_bitmap, X);
  ck_assert_uint_eq (u.gu_history[0], N2);
  ck_assert_uint_eq (u.gu_history[1], N1);
  ck_assert_uint_eq (u.gu_flags, C);

  /* A bitmap UUID equal to the current one (a resumable full sync)
   * stays; the history takes X as well. */
  u = gu (X, X, 0, 0, C);
  uuid_new_current (&u, N1);
  ck_assert_uint_eq (u.gu_bitmap, X);
  ck_assert_uint_eq (u.gu_history[0], X);
  ck_assert_uint_eq (u.gu_history[1], 0);

  u = gu (X, 0, Y, 0, C);
  uuid_adopt_current (&u, N1);
  ck_assert_uint_eq (u.gu_current, N1);
  ck_assert_uint_eq (u.gu_bitmap, 0);
  ck_assert_uint_eq (u.gu_history[0], X);
  ck_assert_uint_eq (u.gu_history[1], Y);
}
END_TEST

START_TEST (test_clear_bitmap)
{
  struct gen_uuids u;

  u = gu (Y, X, W, V, C);
  uuid_clear_bitmap (&u);
  ck_assert_uint_eq (u.gu_bitmap, 0);
  ck_assert_uint_eq (u.gu_history[0], X);
  ck_assert_uint_eq (u.gu_history[1], W);   /* V falls off */
  uuid_clear_bitmap (&u);                   /* nothing to clear */
  ck_assert_uint_eq (u.gu_history[0], X);
  ck_assert_uint_eq (u.gu_history[1], W);

  u = gu (Y, X, X, 0, C);                   /* already the newest */
  uuid_clear_bitmap (&u);
  ck_assert_uint_eq (u.gu_history[0], X);
  ck_assert_uint_eq (u.gu_history[1], 0);

  u = gu (Y, Y, X, 0, C);                   /* the current one */
  uuid_clear_bitmap (&u);
  ck_assert_uint_eq (u.gu_history[0], X);
  ck_assert_uint_eq (u.gu_history[1], 0);

  /* The source's end of a resync also ends a crash; the target's end
   * takes the source's tuple and keeps only its own role. */
  u = gu (Y, X, 0, 0, C | K | P);
  uuid_resync_finished_source (&u);
  ck_assert_uint_eq (u.gu_flags, C | P);
  {
    struct gen_uuids t = gu (X, W, V, 0, K);
    struct gen_uuids s = gu (Y, X, Z, 0, C | P);

    uuid_resync_finished_target (&t, &s);
    ck_assert_uint_eq (t.gu_current, Y);
    ck_assert_uint_eq (t.gu_bitmap, 0);
    ck_assert_uint_eq (t.gu_history[0], X);
    ck_assert_uint_eq (t.gu_history[1], Z);
    ck_assert_uint_eq (t.gu_flags, C);
  }
}
END_TEST

START_TEST (test_generate)
{
  uint64_t a, b;

  ck_assert_int_eq (uuid_generate (&a), 0);
  ck_assert_int_eq (uuid_generate (&b), 0);
  ck_assert_uint_ne (a, 0);
  ck_assert_uint_ne (a, J);
  ck_assert_uint_ne (b, 0);
  ck_assert_uint_ne (b, J);
  ck_assert_uint_ne (a, b);                 /* 1 in 2^64 to fail */
}
END_TEST

START_TEST (test_check)
{
  static const struct {
    struct gen_uuids u;
    const char *why;
  } bad[] = {
    { G (X, 0, 0, 0, 0x10), "unknown flags" },
    { G (X, J, 0, 0, C), "bitmap UUID" },
    { G (X, 0, 0, J, C), "history UUID 1" },
    { G (J, 0, 0, 0, C), "Consistent" },
    { G (0, 0, 0, 0, C), "Consistent" },
    { G (J, X, 0, 0, 0), "bitmap or history" },
    { G (J, 0, X, 0, 0), "bitmap or history" },
  };
  static const struct gen_uuids good[] = {
    G (J, 0, 0, 0, 0), G (0, 0, 0, 0, 0), G (X, 0, 0, 0, 0),
    G (X, Y, Z, W, C | K | P | T), G (X, X, 0, 0, C),
  };
  char err[128];
  size_t i;

  for (i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    err[0] = '\0';
    errno = 0;
    ck_assert_int_eq (uuid_check (&bad[i].u, err, sizeof err), -1);
    ck_assert_int_eq (errno, EPROTO);
    ck_assert_msg (strstr (err, bad[i].why) != NULL,
                   "bad[%zu]: \"%s\" does not say \"%s\"", i, err,
                   bad[i].why);
  }
  for (i = 0; i < sizeof good / sizeof good[0]; ++i)
    ck_assert_msg (uuid_check (&good[i], err, sizeof err) == 0,
                   "good[%zu]: %s", i, err);
}
END_TEST

START_TEST (test_decisions)
{
  static const struct {
    enum uuid_decision d;
    bool source, target, full, refuses;
  } t[] = {
    { UUID_NO_SYNC, false, false, false, false },
    { UUID_SYNC_SOURCE_BITMAP, true, false, false, false },
    { UUID_SYNC_TARGET_BITMAP, false, true, false, false },
    { UUID_SYNC_SOURCE_FULL, true, false, true, false },
    { UUID_SYNC_TARGET_FULL, false, true, true, false },
    { UUID_SYNC_BITMAP_TIEBREAK, false, false, false, false },
    { UUID_SOURCE_INCONSISTENT, false, false, false, true },
    { UUID_SPLIT_BRAIN, false, false, false, true },
    { UUID_UNRELATED, false, false, false, true },
  };
  size_t i, j;

  ck_assert_int_eq (sizeof t / sizeof t[0], UUID_DECISION_MAX + 1);
  for (i = 0; i < sizeof t / sizeof t[0]; ++i) {
    enum uuid_decision m = uuid_decision_mirror (t[i].d);

    ck_assert_int_eq (uuid_decision_is_source (t[i].d), t[i].source);
    ck_assert_int_eq (uuid_decision_is_target (t[i].d), t[i].target);
    ck_assert_int_eq (uuid_decision_is_full (t[i].d), t[i].full);
    ck_assert_int_eq (uuid_decision_refuses (t[i].d), t[i].refuses);
    ck_assert_int_eq (uuid_decision_mirror (m), t[i].d);
    ck_assert_int_eq (uuid_decision_is_source (m), t[i].target);
    ck_assert_int_eq (uuid_decision_is_full (m), t[i].full);
    ck_assert_str_ne (uuid_decision_name (t[i].d), "unknown");
    for (j = 0; j < i; ++j)
      ck_assert_str_ne (uuid_decision_name (t[i].d),
                        uuid_decision_name (t[j].d));
  }
  ck_assert_str_eq (uuid_decision_name ((enum uuid_decision) 99),
                    "unknown");
}
END_TEST

/* ---- Every pair of small tuples: current in {0, fresh, X, Y, Z},
 * bitmap and history[0] in {0, X, Y, Z}, history[1] in {0, Z}, all
 * flag combinations, valid or not.  Plain ifs and one ck_abort_msg on
 * the first failure: a Check assertion per pair would crawl. */

#define NCUR 5
#define NBM  4
#define NH0  4
#define NH1  2
#define NFL  16
#define NTUPLES (NCUR * NBM * NH0 * NH1 * NFL)

static struct gen_uuids
nth_tuple (unsigned n)
{
  static const uint64_t cur[NCUR] = { 0, J, X, Y, Z };
  static const uint64_t bm[NBM] = { 0, X, Y, Z };
  static const uint64_t h0[NH0] = { 0, X, Y, Z };
  static const uint64_t h1[NH1] = { 0, Z };
  struct gen_uuids u;

  u.gu_flags = n % NFL; n /= NFL;
  u.gu_history[1] = h1[n % NH1]; n /= NH1;
  u.gu_history[0] = h0[n % NH0]; n /= NH0;
  u.gu_bitmap = bm[n % NBM]; n /= NBM;
  u.gu_current = cur[n % NCUR];
  return u;
}

static bool
consistent (const struct gen_uuids *u)
{
  return (u->gu_flags & GU_FLAG_CONSISTENT) &&
         u->gu_current != 0 && u->gu_current != J;
}

START_TEST (test_exhaustive)
{
  static struct gen_uuids t[NTUPLES];
  unsigned hits[NRULES] = { 0 };
  unsigned i, j;
  int k;

  for (i = 0; i < NTUPLES; ++i)
    t[i] = nth_tuple (i);

  for (i = 0; i < NTUPLES; ++i)
    for (j = 0; j < NTUPLES; ++j) {
      int r = -1, rm = -1;
      enum uuid_decision d = uuid_compare (&t[i], &t[j], &r);
      enum uuid_decision dm = uuid_compare (&t[j], &t[i], &rm);

      if (dm != uuid_decision_mirror (d) || rm != rule_mirror (r))
        ck_abort_msg ("pair %u,%u: %s by %s, mirrored %s by %s", i, j,
                      uuid_decision_name (d), uuid_rule_name (r),
                      uuid_decision_name (dm), uuid_rule_name (rm));
      if ((uuid_decision_is_source (d) && !consistent (&t[i])) ||
          (uuid_decision_is_target (d) && !consistent (&t[j])))
        ck_abort_msg ("pair %u,%u: %s by %s from a disk not Consistent",
                      i, j, uuid_decision_name (d), uuid_rule_name (r));
      if (rule_decision (r) != (int) d)
        ck_abort_msg ("pair %u,%u: rule %s gave %s, its row says %s", i, j,
                      uuid_rule_name (r), uuid_decision_name (d),
                      uuid_decision_name (rule_decision (r)));
      /* Two nodes holding the same generation whole never copy it
       * in full. */
      if (uuid_decision_is_full (d) && consistent (&t[i]) &&
          consistent (&t[j]) && t[i].gu_current == t[j].gu_current)
        ck_abort_msg ("pair %u,%u: full sync between equals", i, j);
      for (k = 0; k < NRULES; ++k)
        if (all_rules[k] == r) {
          hits[k]++;
          break;
        }
      if (k == NRULES)
        ck_abort_msg ("pair %u,%u: rule %d is not in the table", i, j, r);
    }

  /* Every row of the table is reachable. */
  for (k = 0; k < NRULES; ++k)
    ck_assert_msg (hits[k] > 0, "rule %s never decided",
                   uuid_rule_name (all_rules[k]));
}
END_TEST

static Suite *
uuid_compare_suite (void)
{
  Suite *s = suite_create ("uuid-compare");
  TCase *tc;

  tc = tcase_create ("table");
  tcase_add_loop_test (tc, test_row, 0, NROWS);
  tcase_add_test (tc, test_rows_cover_every_rule);
  tcase_add_test (tc, test_edges);
  suite_add_tcase (s, tc);

  tc = tcase_create ("scenarios");
  tcase_add_test (tc, test_scenario_in_sync_create);
  tcase_add_test (tc, test_scenario_primary_writes_alone);
  tcase_add_test (tc, test_scenario_split_brain);
  tcase_add_test (tc, test_scenario_resync_finished);
  tcase_add_test (tc, test_scenario_fresh_node_joins);
  tcase_add_test (tc, test_scenario_unrelated);
  tcase_add_test (tc, test_scenario_crashed_primary);
  tcase_add_test (tc, test_scenario_forced_primary_fresh);
  tcase_add_test (tc, test_scenario_interrupted_resync);
  tcase_add_test (tc, test_scenario_interrupted_full_sync);
  tcase_add_test (tc, test_scenario_forced_inconsistent);
  tcase_add_test (tc, test_scenario_three_nodes);
  tcase_add_test (tc, test_scenario_three_nodes_shared_history);
  tcase_add_test (tc, test_scenario_withdrawn_generation);
  suite_add_tcase (s, tc);

  tc = tcase_create ("helpers");
  tcase_add_test (tc, test_new_current);
  tcase_add_test (tc, test_clear_bitmap);
  tcase_add_test (tc, test_generate);
  tcase_add_test (tc, test_check);
  tcase_add_test (tc, test_decisions);
  suite_add_tcase (s, tc);

  /* Generous: 1.6 million pairs, slow under valgrind. */
  tc = tcase_create ("exhaustive");
  tcase_set_timeout (tc, 600);
  tcase_add_test (tc, test_exhaustive);
  suite_add_tcase (s, tc);

  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (uuid_compare_suite ());
  int failed;

  srunner_run_all (sr, CK_ENV);
  failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
