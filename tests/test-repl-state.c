/* nbdrepl: unit tests of common/repl-state.c: the replication state
 * transition table and which messages may arrive in which state.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "repl-state.h"
#include "wire.h"

#define OFF REPL_OFF
#define EST REPL_ESTABLISHED
#define WBS REPL_WF_BITMAP_S
#define WBT REPL_WF_BITMAP_T
#define SS REPL_SYNC_SOURCE
#define ST REPL_SYNC_TARGET
#define VS REPL_VERIFY_S
#define PS REPL_PAUSED_SYNC_S
#define PT REPL_PAUSED_SYNC_T

/* The transitions repl-state.h documents, written out again here. */
static const struct { enum repl_state from, to; } allowed[] = {
  { OFF, EST }, { OFF, WBS }, { OFF, WBT },
  { EST, WBS }, { EST, WBT }, { EST, SS }, { EST, ST }, { EST, VS },
  { EST, OFF },
  { WBS, SS }, { WBS, EST }, { WBS, OFF },
  { WBT, ST }, { WBT, EST }, { WBT, OFF },
  { SS, EST }, { SS, OFF }, { SS, PS },
  { ST, EST }, { ST, OFF }, { ST, PT },
  { VS, EST }, { VS, OFF },
  { PS, SS }, { PS, EST }, { PS, OFF },
  { PT, ST }, { PT, EST }, { PT, OFF },
};

static bool
listed (enum repl_state from, enum repl_state to)
{
  size_t i;

  for (i = 0; i < sizeof allowed / sizeof allowed[0]; i++)
    if (allowed[i].from == from && allowed[i].to == to)
      return true;
  return false;
}

START_TEST (test_transitions)
{
  int from, to;

  for (from = 0; from <= REPL_STATE_MAX; from++)
    for (to = 0; to <= REPL_STATE_MAX; to++)
      ck_assert_msg (repl_state_may (from, to) == listed (from, to),
                     "%s -> %s", repl_state_name (from),
                     repl_state_name (to));
  /* Out of range, either side. */
  ck_assert (!repl_state_may (REPL_STATE_MAX + 1, EST));
  ck_assert (!repl_state_may (EST, REPL_STATE_MAX + 1));
  ck_assert (!repl_state_may (-1, OFF));
}
END_TEST

START_TEST (test_names)
{
  ck_assert_str_eq (repl_state_name (OFF), "Off");
  ck_assert_str_eq (repl_state_name (EST), "Established");
  ck_assert_str_eq (repl_state_name (WBS), "WFBitMapS");
  ck_assert_str_eq (repl_state_name (WBT), "WFBitMapT");
  ck_assert_str_eq (repl_state_name (SS), "SyncSource");
  ck_assert_str_eq (repl_state_name (ST), "SyncTarget");
  ck_assert_str_eq (repl_state_name (VS), "VerifyS");
  ck_assert_str_eq (repl_state_name (PS), "PausedSyncS");
  ck_assert_str_eq (repl_state_name (PT), "PausedSyncT");
  ck_assert_str_eq (repl_state_name (REPL_STATE_MAX + 1), "?");
}
END_TEST

/* The resync, bitmap and verify messages only where their exchange
 * runs; a sync target that was never told the resync started refuses
 * its end (RESYNC_DONE out of order). */
START_TEST (test_messages_in_state)
{
  int s;

  ck_assert (repl_state_accepts (REPL_MSG_RESYNC_DONE, ST));
  ck_assert (!repl_state_accepts (REPL_MSG_RESYNC_DONE, EST));
  ck_assert (!repl_state_accepts (REPL_MSG_RESYNC_DONE, WBT));
  ck_assert (!repl_state_accepts (REPL_MSG_RESYNC_DATA, EST));
  ck_assert (repl_state_accepts (REPL_MSG_RESYNC_DATA, ST));
  ck_assert (repl_state_accepts (REPL_MSG_RESYNC_START, EST));
  ck_assert (repl_state_accepts (REPL_MSG_RESYNC_START, WBT));
  ck_assert (!repl_state_accepts (REPL_MSG_RESYNC_START, ST));
  ck_assert (!repl_state_accepts (REPL_MSG_RESYNC_START, SS));
  ck_assert (repl_state_accepts (REPL_MSG_BITMAP, WBS));
  ck_assert (!repl_state_accepts (REPL_MSG_BITMAP, EST));
  ck_assert (!repl_state_accepts (REPL_MSG_BITMAP_DONE, SS));
  ck_assert (repl_state_accepts (REPL_MSG_VERIFY_REPLY, VS));
  ck_assert (repl_state_accepts (REPL_MSG_VERIFY_REPLY, SS));
  ck_assert (repl_state_accepts (REPL_MSG_VERIFY_REPLY, PS));
  /* A paused resync: what the source sent before it heard of the pause
   * still arrives, and it may finish (nothing was left). */
  ck_assert (repl_state_accepts (REPL_MSG_RESYNC_DATA, PT));
  ck_assert (repl_state_accepts (REPL_MSG_RESYNC_DONE, PT));
  ck_assert (!repl_state_accepts (REPL_MSG_RESYNC_START, PT));
  ck_assert (!repl_state_accepts (REPL_MSG_BITMAP, PS));
  ck_assert (!repl_state_accepts (REPL_MSG_VERIFY_REPLY, EST));
  ck_assert (repl_state_accepts (REPL_MSG_VERIFY_REQ, EST));
  ck_assert (repl_state_accepts (REPL_MSG_VERIFY_REQ, ST));
  ck_assert (!repl_state_accepts (REPL_MSG_VERIFY_REQ, VS));
  for (s = 0; s <= REPL_STATE_MAX; s++) {
    /* Nothing arrives without a connection; the handshake messages
     * never reach the receive loop; data flows in every connected
     * state (a sync target receives the primary's writes too). */
    ck_assert (!repl_state_accepts (REPL_MSG_WRITE, OFF));
    ck_assert (!repl_state_accepts (REPL_MSG_HELLO, s));
    ck_assert (!repl_state_accepts (REPL_MSG_AUTH_CHALLENGE, s));
    ck_assert (!repl_state_accepts (REPL_MSG_AUTH_RESPONSE, s));
    if (s != OFF) {
      ck_assert (repl_state_accepts (REPL_MSG_WRITE, s));
      ck_assert (repl_state_accepts (REPL_MSG_ACK, s));
      ck_assert (repl_state_accepts (REPL_MSG_PING, s));
      ck_assert (repl_state_accepts (REPL_MSG_STATE, s));
    }
  }
  ck_assert (repl_state_any_connected (REPL_MSG_WRITE));
  ck_assert (!repl_state_any_connected (REPL_MSG_RESYNC_DONE));
  ck_assert (!repl_state_any_connected (REPL_MSG_HELLO));
  /* Unknown types and states. */
  ck_assert (!repl_state_accepts (0, EST));
  ck_assert (!repl_state_accepts (REPL_MSG_TYPE_MAX + 1, EST));
  ck_assert (!repl_state_accepts (REPL_MSG_WRITE, REPL_STATE_MAX + 1));
  ck_assert_str_eq (repl_state_accepts_names (REPL_MSG_RESYNC_DONE),
                    "SyncTarget or PausedSyncT");
  ck_assert_str_eq (repl_state_accepts_names (REPL_MSG_WRITE),
                    "any connected state");
}
END_TEST

static Suite *
repl_state_suite (void)
{
  Suite *s = suite_create ("repl-state");
  TCase *tc = tcase_create ("core");

  tcase_add_test (tc, test_transitions);
  tcase_add_test (tc, test_names);
  tcase_add_test (tc, test_messages_in_state);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (repl_state_suite ());
  int failed;

  srunner_run_all (sr, CK_ENV);
  failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
