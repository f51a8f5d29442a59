/* nbdrepl: the engine's decisions, as pure functions (decide.h).
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 */
#include <config.h>

#include <stdlib.h>

#include "decide.h"

bool
decide_quorum (enum repl_quorum quorum, unsigned votes, unsigned total)
{
  switch (quorum) {
  case REPL_QUORUM_OFF:
    return true;
  case REPL_QUORUM_ALL:
    return votes >= total;
  case REPL_QUORUM_MAJORITY:
  case REPL_QUORUM_DEFAULT:     /* never after config_load */
    return 2 * votes > total;
  }
  abort ();
}

enum promote_verdict
decide_promote (const struct promote_case *c)
{
  /* A second Primary only with allow-two-primaries, never a third, and
   * only as a copy of the first: never forced (that would make the
   * other Primary a sync target).  Two storage nodes (the resource's
   * only two: config_load) order their writes between themselves
   * (two-primaries.c); with diskless nodes the pair is one storage node
   * and one diskless node, which writes through the storage one
   * (diskless.c), or two diskless nodes, one writing through the other
   * (diskless-primaries.c): never two storage nodes. */
  if (c->pc_peer_primary) {
    bool second;

    if (c->pc_diskless)       /* beside a storage or a diskless one */
      second = true;
    else
      second = c->pc_disk == REPL_DISK_UPTODATE &&
               (c->pc_has_diskless ? c->pc_peer_primary_diskless
                                   : !c->pc_peer_primary_diskless);
    if (!c->pc_two_primaries || c->pc_peers_primary || !second)
      return PROMOTE_REFUSE_PEER_PRIMARY;
  }
  if (!c->pc_quorum)
    return PROMOTE_REFUSE_NO_QUORUM;
  if (c->pc_diskless)
    return c->pc_storage_uptodate ? PROMOTE : PROMOTE_REFUSE_NO_STORAGE;
  if (c->pc_disk == REPL_DISK_UPTODATE)
    return PROMOTE;
  return c->pc_force ? PROMOTE_FORCED : PROMOTE_REFUSE_DISK;
}

enum sb_loser
decide_split_brain_loser (const struct connect_case *c,
                          enum repl_sb_policy *policyp)
{
  enum repl_sb_policy policy;
  uint64_t ours = c->cc_our_changes, theirs = c->cc_peer_changes;
  bool we_lose;

  if (ours > UINT32_MAX)        /* as a hello carries it */
    ours = UINT32_MAX;
  if (theirs > UINT32_MAX)
    theirs = UINT32_MAX;
  policy = c->cc_we_primary || c->cc_peer_primary ? c->cc_after_sb_1pri
                                                  : c->cc_after_sb_0pri;
  *policyp = policy;
  if (c->cc_we_primary && c->cc_peer_primary)
    return SB_NOBODY;
  switch (policy) {
  case REPL_SB_DISCONNECT:
    return SB_NOBODY;
  case REPL_SB_DISCARD_ZERO_CHANGES:
    if (ours > 0 && theirs > 0)
      return SB_NOBODY;
    /* Both unchanged: nothing is lost either way; the higher id yields. */
    we_lose = ours == 0 && (theirs > 0 || c->cc_our_id > c->cc_peer_id);
    break;
  case REPL_SB_DISCARD_LEAST_CHANGES:
    we_lose = ours < theirs ||
              (ours == theirs && c->cc_our_id > c->cc_peer_id);
    break;
  case REPL_SB_DISCARD_SECONDARY:
    we_lose = !c->cc_we_primary;
    break;
  case REPL_SB_DISCARD_YOUNGER_PRIMARY:
    /* Neither is primary now; the one that became primary last loses
     * (the clocks of the two machines are compared: keep them in sync).
     * The same moment on both, or neither ever primary: nobody. */
    if (c->cc_our_primary_since == c->cc_peer_primary_since)
      return SB_NOBODY;
    we_lose = c->cc_our_primary_since > c->cc_peer_primary_since;
    break;
  default:
    abort ();
  }
  /* A primary's data is what its clients see: never discarded here. */
  if ((we_lose && c->cc_we_primary) || (!we_lose && c->cc_peer_primary))
    return SB_NOBODY;
  return we_lose ? SB_WE_LOSE : SB_PEER_LOSES;
}

int
decide_pair_source (bool we_uptodate, bool peer_uptodate, uint64_t ours,
                    uint64_t theirs, bool we_lower)
{
  if (ours == 0 && theirs == 0)
    return 0;
  if (we_uptodate && peer_uptodate) {
    if (ours > 0 && (theirs == 0 || we_lower))
      return 1;
    return -1;
  }
  if (we_uptodate)
    return 1;
  if (peer_uptodate)
    return -1;
  return 0;
}

void
decide_connect (const struct gen_uuids *local, const struct gen_uuids *peer,
                const struct connect_case *c, struct connect_decision *out)
{
  enum uuid_decision d;
  int rule;

  d = uuid_compare (local, peer, &rule);
  if (d == UUID_SYNC_BITMAP_TIEBREAK)
    d = c->cc_our_id < c->cc_peer_id ? UUID_SYNC_SOURCE_BITMAP
                                      : UUID_SYNC_TARGET_BITMAP;
  out->cd_decision = d;
  out->cd_rule = rule;
  out->cd_loser = SB_NOBODY;
  out->cd_policy = REPL_SB_DISCONNECT;
  if (d == UUID_SPLIT_BRAIN) {
    out->cd_loser = decide_split_brain_loser (c, &out->cd_policy);
    if (out->cd_loser != SB_NOBODY) {
      out->cd_verdict = CONNECT_SPLIT_BRAIN_RESOLVED;
      return;
    }
  }
  if (uuid_decision_refuses (d))
    out->cd_verdict = CONNECT_REFUSE;
  else if (c->cc_we_primary && uuid_decision_is_target (d))
    out->cd_verdict = CONNECT_REFUSE_PRIMARY_BEHIND;
  else if (c->cc_peer_primary && uuid_decision_is_source (d))
    out->cd_verdict = CONNECT_REFUSE_PEER_PRIMARY_BEHIND;
  else
    out->cd_verdict = CONNECT;
}
