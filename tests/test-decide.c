/* nbdrepl: unit tests of common/decide.c: quorum, promotion and the
 * decision at connect (split-brain policies, primaries never
 * overwritten).
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 */
#include <config.h>

#include <stdlib.h>

#include <check.h>

#include "decide.h"

START_TEST (test_quorum)
{
  ck_assert (decide_quorum (REPL_QUORUM_OFF, 1, 3));
  ck_assert (decide_quorum (REPL_QUORUM_OFF, 0, 2));
  ck_assert (!decide_quorum (REPL_QUORUM_MAJORITY, 1, 3));
  ck_assert (decide_quorum (REPL_QUORUM_MAJORITY, 2, 3));
  ck_assert (!decide_quorum (REPL_QUORUM_MAJORITY, 2, 4)); /* a tie is none */
  ck_assert (decide_quorum (REPL_QUORUM_MAJORITY, 3, 4));
  ck_assert (decide_quorum (REPL_QUORUM_MAJORITY, 3, 5));
  ck_assert (!decide_quorum (REPL_QUORUM_ALL, 2, 3));
  ck_assert (decide_quorum (REPL_QUORUM_ALL, 3, 3));
}
END_TEST

START_TEST (test_promote)
{
  struct promote_case c = { .pc_quorum = true, .pc_disk = REPL_DISK_UPTODATE };

  ck_assert_int_eq (decide_promote (&c), PROMOTE);
  /* Never next to a connected Primary, not even with --force. */
  c.pc_peer_primary = true;
  c.pc_force = true;
  ck_assert_int_eq (decide_promote (&c), PROMOTE_REFUSE_PEER_PRIMARY);
  c.pc_peer_primary = false;
  c.pc_force = false;
  c.pc_quorum = false;
  ck_assert_int_eq (decide_promote (&c), PROMOTE_REFUSE_NO_QUORUM);
  c.pc_quorum = true;
  /* A disk that is not UpToDate needs --force, which forces it. */
  c.pc_disk = REPL_DISK_OUTDATED;
  ck_assert_int_eq (decide_promote (&c), PROMOTE_REFUSE_DISK);
  c.pc_disk = REPL_DISK_INCONSISTENT;
  ck_assert_int_eq (decide_promote (&c), PROMOTE_REFUSE_DISK);
  c.pc_force = true;
  ck_assert_int_eq (decide_promote (&c), PROMOTE_FORCED);
  /* Diskless: an UpToDate storage node must be there. */
  c = (struct promote_case) { .pc_quorum = true, .pc_diskless = true,
                              .pc_disk = REPL_DISK_DISKLESS };
  ck_assert_int_eq (decide_promote (&c), PROMOTE_REFUSE_NO_STORAGE);
  c.pc_storage_uptodate = true;
  ck_assert_int_eq (decide_promote (&c), PROMOTE);
}
END_TEST

/* allow-two-primaries: an UpToDate node may join a connected Primary;
 * never forced, never a third.  With diskless nodes, one storage and
 * one diskless Primary, never two of either. */
START_TEST (test_promote_two_primaries)
{
  struct promote_case c = { .pc_quorum = true, .pc_disk = REPL_DISK_UPTODATE,
                            .pc_peer_primary = true };

  ck_assert_int_eq (decide_promote (&c), PROMOTE_REFUSE_PEER_PRIMARY);
  c.pc_two_primaries = true;
  ck_assert_int_eq (decide_promote (&c), PROMOTE);
  c.pc_quorum = false;
  ck_assert_int_eq (decide_promote (&c), PROMOTE_REFUSE_NO_QUORUM);
  c.pc_quorum = true;
  c.pc_disk = REPL_DISK_OUTDATED;
  c.pc_force = true;
  ck_assert_int_eq (decide_promote (&c), PROMOTE_REFUSE_PEER_PRIMARY);

  /* A diskless node beside a storage Primary. */
  c = (struct promote_case) { .pc_quorum = true, .pc_diskless = true,
                              .pc_disk = REPL_DISK_DISKLESS,
                              .pc_storage_uptodate = true,
                              .pc_peer_primary = true,
                              .pc_has_diskless = true };
  ck_assert_int_eq (decide_promote (&c), PROMOTE_REFUSE_PEER_PRIMARY);
  c.pc_two_primaries = true;
  ck_assert_int_eq (decide_promote (&c), PROMOTE);
  c.pc_storage_uptodate = false;
  ck_assert_int_eq (decide_promote (&c), PROMOTE_REFUSE_NO_STORAGE);
  c.pc_storage_uptodate = true;
  /* ... beside a diskless Primary too (one writes through the other:
   * diskless-primaries.c), but not as a third. */
  c.pc_peer_primary_diskless = true;
  ck_assert_int_eq (decide_promote (&c), PROMOTE);
  c.pc_two_primaries = false;
  ck_assert_int_eq (decide_promote (&c), PROMOTE_REFUSE_PEER_PRIMARY);
  c.pc_two_primaries = true;
  c.pc_peer_primary_diskless = false;
  c.pc_peers_primary = true;
  ck_assert_int_eq (decide_promote (&c), PROMOTE_REFUSE_PEER_PRIMARY);

  /* A storage node beside a diskless Primary, UpToDate only; not
   * beside a storage Primary when the resource has diskless nodes. */
  c = (struct promote_case) { .pc_quorum = true,
                              .pc_disk = REPL_DISK_UPTODATE,
                              .pc_peer_primary = true,
                              .pc_peer_primary_diskless = true,
                              .pc_two_primaries = true,
                              .pc_has_diskless = true };
  ck_assert_int_eq (decide_promote (&c), PROMOTE);
  c.pc_peer_primary_diskless = false;
  ck_assert_int_eq (decide_promote (&c), PROMOTE_REFUSE_PEER_PRIMARY);
  c.pc_peer_primary_diskless = true;
  c.pc_disk = REPL_DISK_OUTDATED;
  c.pc_force = true;
  ck_assert_int_eq (decide_promote (&c), PROMOTE_REFUSE_PEER_PRIMARY);
  c.pc_disk = REPL_DISK_UPTODATE;
  c.pc_force = false;
  c.pc_peers_primary = true;
  ck_assert_int_eq (decide_promote (&c), PROMOTE_REFUSE_PEER_PRIMARY);
}
END_TEST

/* Two nodes that started from generation G and both wrote apart. */
static const struct gen_uuids sb_a = {
  .gu_current = 0xaaaa, .gu_bitmap = 0x6666, .gu_history = { 0x6666 },
  .gu_flags = GU_FLAG_CONSISTENT,
};
static const struct gen_uuids sb_b = {
  .gu_current = 0xbbbb, .gu_bitmap = 0x6666, .gu_history = { 0x6666 },
  .gu_flags = GU_FLAG_CONSISTENT,
};

static struct connect_case
sb_case (enum repl_sb_policy p0, enum repl_sb_policy p1)
{
  return (struct connect_case) {
    .cc_our_id = 0, .cc_peer_id = 1, .cc_after_sb_0pri = p0,
    .cc_after_sb_1pri = p1, .cc_our_changes = 10, .cc_peer_changes = 3,
  };
}

START_TEST (test_split_brain)
{
  struct connect_case c = sb_case (REPL_SB_DISCONNECT, REPL_SB_DISCONNECT);
  struct connect_decision cd, mirror;
  struct connect_case m;

  decide_connect (&sb_a, &sb_b, &c, &cd);
  ck_assert_int_eq (cd.cd_decision, UUID_SPLIT_BRAIN);
  ck_assert_int_eq (cd.cd_verdict, CONNECT_REFUSE);

  /* discard-least-changes: the side with 3 changes loses; both sides
   * agree. */
  c = sb_case (REPL_SB_DISCARD_LEAST_CHANGES, REPL_SB_DISCONNECT);
  decide_connect (&sb_a, &sb_b, &c, &cd);
  ck_assert_int_eq (cd.cd_verdict, CONNECT_SPLIT_BRAIN_RESOLVED);
  ck_assert_int_eq (cd.cd_loser, SB_PEER_LOSES);
  m = c;
  m.cc_our_id = 1; m.cc_peer_id = 0;
  m.cc_our_changes = 3; m.cc_peer_changes = 10;
  decide_connect (&sb_b, &sb_a, &m, &mirror);
  ck_assert_int_eq (mirror.cd_loser, SB_WE_LOSE);

  /* discard-zero-changes: both changed: nobody. */
  c = sb_case (REPL_SB_DISCARD_ZERO_CHANGES, REPL_SB_DISCONNECT);
  decide_connect (&sb_a, &sb_b, &c, &cd);
  ck_assert_int_eq (cd.cd_verdict, CONNECT_REFUSE);
  c.cc_peer_changes = 0;
  decide_connect (&sb_a, &sb_b, &c, &cd);
  ck_assert_int_eq (cd.cd_loser, SB_PEER_LOSES);

  /* discard-secondary with a primary: the secondary loses; a primary
   * is never the loser. */
  c = sb_case (REPL_SB_DISCONNECT, REPL_SB_DISCARD_SECONDARY);
  c.cc_we_primary = true;
  decide_connect (&sb_a, &sb_b, &c, &cd);
  ck_assert_int_eq (cd.cd_loser, SB_PEER_LOSES);
  c.cc_we_primary = false;
  c.cc_peer_primary = true;
  decide_connect (&sb_a, &sb_b, &c, &cd);
  ck_assert_int_eq (cd.cd_loser, SB_WE_LOSE);
  /* discard-least-changes would make the primary (fewer changes) lose:
   * refused instead. */
  c = sb_case (REPL_SB_DISCONNECT, REPL_SB_DISCARD_LEAST_CHANGES);
  c.cc_peer_primary = true;
  decide_connect (&sb_a, &sb_b, &c, &cd);
  ck_assert_int_eq (cd.cd_verdict, CONNECT_REFUSE);
  /* Both primary: nobody, whatever the policy. */
  c.cc_we_primary = true;
  decide_connect (&sb_a, &sb_b, &c, &cd);
  ck_assert_int_eq (cd.cd_verdict, CONNECT_REFUSE);

  /* discard-younger-primary: the later one loses; the same time: none. */
  c = sb_case (REPL_SB_DISCARD_YOUNGER_PRIMARY, REPL_SB_DISCONNECT);
  c.cc_our_primary_since = 2000;
  c.cc_peer_primary_since = 1000;
  decide_connect (&sb_a, &sb_b, &c, &cd);
  ck_assert_int_eq (cd.cd_loser, SB_WE_LOSE);
  c.cc_peer_primary_since = 2000;
  decide_connect (&sb_a, &sb_b, &c, &cd);
  ck_assert_int_eq (cd.cd_verdict, CONNECT_REFUSE);
}
END_TEST

/* A primary is never overwritten, and never resyncs from a secondary;
 * a secondary with newer data never overwrites a primary. */
START_TEST (test_primary_never_behind)
{
  struct gen_uuids old = { .gu_current = 0x1111,
                           .gu_flags = GU_FLAG_CONSISTENT };
  struct gen_uuids newer = { .gu_current = 0x2222, .gu_bitmap = 0x1111,
                             .gu_history = { 0x1111 },
                             .gu_flags = GU_FLAG_CONSISTENT };
  struct connect_case c = { .cc_our_id = 0, .cc_peer_id = 1 };
  struct connect_decision cd;

  decide_connect (&newer, &old, &c, &cd);
  ck_assert (uuid_decision_is_source (cd.cd_decision));
  ck_assert_int_eq (cd.cd_verdict, CONNECT);
  c.cc_we_primary = true;               /* a primary resyncs its peer */
  decide_connect (&newer, &old, &c, &cd);
  ck_assert_int_eq (cd.cd_verdict, CONNECT);
  c.cc_we_primary = false;
  c.cc_peer_primary = true;             /* ... but is never resynced */
  decide_connect (&newer, &old, &c, &cd);
  ck_assert_int_eq (cd.cd_verdict, CONNECT_REFUSE_PEER_PRIMARY_BEHIND);
  c.cc_peer_primary = false;
  c.cc_we_primary = true;
  decide_connect (&old, &newer, &c, &cd);
  ck_assert (uuid_decision_is_target (cd.cd_decision));
  ck_assert_int_eq (cd.cd_verdict, CONNECT_REFUSE_PRIMARY_BEHIND);
  /* The same generation: no resync, both ways. */
  c.cc_we_primary = false;
  decide_connect (&old, &old, &c, &cd);
  ck_assert_int_eq (cd.cd_decision, UUID_NO_SYNC);
  ck_assert_int_eq (cd.cd_verdict, CONNECT);
}
END_TEST

/* Two secondaries in the same generation with marks: an UpToDate source
 * only; the two sides agree. */
START_TEST (test_pair_source)
{
  bool a, b, lower;
  uint64_t ours, theirs;

  ck_assert_int_eq (decide_pair_source (true, true, 0, 0, true), 0);
  ck_assert_int_eq (decide_pair_source (true, true, 5, 0, false), 1);
  ck_assert_int_eq (decide_pair_source (true, true, 0, 5, true), -1);
  ck_assert_int_eq (decide_pair_source (true, true, 5, 5, true), 1);
  ck_assert_int_eq (decide_pair_source (true, true, 5, 5, false), -1);
  /* Never from a disk that is not UpToDate: two fresh nodes, both
   * marked all, resync nothing between them. */
  ck_assert_int_eq (decide_pair_source (false, false, 9, 9, true), 0);
  ck_assert_int_eq (decide_pair_source (false, true, 9, 0, true), -1);
  ck_assert_int_eq (decide_pair_source (true, false, 0, 9, false), 1);
  for (a = false; ; a = true) {
    for (b = false; ; b = true) {
      for (lower = false; ; lower = true) {
        for (ours = 0; ours < 3; ours++)
          for (theirs = 0; theirs < 3; theirs++) {
            int us = decide_pair_source (a, b, ours, theirs, lower);
            int them = decide_pair_source (b, a, theirs, ours, !lower);
            ck_assert_int_eq (us, -them);
            ck_assert (us != 1 || a);
            ck_assert (us != -1 || b);
          }
        if (lower) break;
      }
      if (b) break;
    }
    if (a) break;
  }
}
END_TEST

static Suite *
decide_suite (void)
{
  Suite *s = suite_create ("decide");
  TCase *tc = tcase_create ("core");

  tcase_add_test (tc, test_quorum);
  tcase_add_test (tc, test_promote);
  tcase_add_test (tc, test_promote_two_primaries);
  tcase_add_test (tc, test_split_brain);
  tcase_add_test (tc, test_primary_never_behind);
  tcase_add_test (tc, test_pair_source);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (decide_suite ());
  int failed;

  srunner_run_all (sr, CK_ENV);
  failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
