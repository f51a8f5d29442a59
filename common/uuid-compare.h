/* nbdrepl: generation UUIDs and the sync decision at connect.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * Every node names the "generation" of the data on its disk with a
 * 64-bit generation UUID, as DRBD does.  Two nodes whose current UUIDs
 * are equal hold the same data.  When a node writes while a peer is away
 * it starts a new generation; the UUID it had before stays on as the
 * bitmap UUID, the generation its dirty bitmap for that peer counts
 * from.  The generations before that are kept in a short history.  At
 * connect the two nodes exchange their tuples and uuid_compare decides:
 * no sync, a bitmap-based resync one way, a full sync one way, or a
 * refusal (split brain, unrelated data, no consistent source).
 *
 * Simplifications from DRBD, and why:
 *
 *  - No role bit in the UUIDs.  DRBD keeps "was primary" in the lowest
 *    bit and masks it off in every comparison; we carry roles and disk
 *    states in gu_flags and compare UUIDs whole.
 *  - No sync UUID.  DRBD 8.4's sync source made up a UUID at the start
 *    of each resync and sent it to the target (P_SYNC_UUID); four of its
 *    rules (51, 71, 34/35's fix-ups) repair the tuples when that message
 *    or the "resync finished" step was lost.  Here, as in DRBD 9 with
 *    protocol >= 110, the target keeps its current UUID while it is a
 *    target (it is marked not Consistent instead), and the tuples only
 *    change at the start of a full sync (uuid_full_sync_start_source,
 *    uuid_resync_start_target) and at the end (uuid_resync_finished_*).
 *    uuid_compare never rewrites a tuple.
 *  - No protocol-version rows (DRBD's -1091, -1096, feature flags), no
 *    quorum rows (DRBD 9's lost-quorum), no automatic split-brain
 *    recovery policies: those belong to the engine and its
 *    configuration, which sees UUID_SPLIT_BRAIN and the rule.
 *  - A struct gen_uuids is one peer's view: gu_bitmap is the bitmap UUID
 *    this node holds for the peer it is talking to.  With several peers
 *    the engine keeps one bitmap UUID per peer on disk and builds the
 *    view per connection; see uuid_new_current for how the lifecycle
 *    helpers apply then.
 *
 * Pure and thread-free except uuid_generate (getrandom(2)).
 */
#ifndef NBDREPL_UUID_COMPARE_H
#define NBDREPL_UUID_COMPARE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The current UUID of metadata made by plain create-md: no data yet
 * (DRBD's UUID_JUST_CREATED).  A current UUID of 0 reads the same. */
#define UUID_JUST_CREATED  UINT64_C (4)

#define UUID_HISTORY  2         /* history UUIDs kept, newest first */

/* gu_flags. */
#define GU_FLAG_CONSISTENT       0x1u  /* the disk holds one generation's
                                          data whole: UpToDate or Outdated,
                                          not Inconsistent */
#define GU_FLAG_CRASHED_PRIMARY  0x2u  /* the node was primary when it last
                                          stopped without demoting: its
                                          activity-log extents may differ
                                          from its peers' */
#define GU_FLAG_PRIMARY          0x4u  /* the node is primary now */
#define GU_FLAG_TENTATIVE        0x8u  /* no write of the current
                                          generation is known to have been
                                          acknowledged to a client: a
                                          Primary's new generation until its
                                          first write completes, and the
                                          nodes that took it from that
                                          Primary meanwhile */
#define GU_FLAGS_KNOWN           0xfu

/* One node's generation UUIDs as seen by one peer.  A UUID of 0 means
 * "none" (except gu_current, where 0 reads as UUID_JUST_CREATED). */
struct gen_uuids {
  uint64_t gu_current;          /* the generation of the data on disk */
  uint64_t gu_bitmap;           /* the generation the dirty bitmap for the
                                   peer counts from; 0: no bitmap */
  uint64_t gu_history[UUID_HISTORY];  /* earlier generations, newest
                                         first; 0: empty slot */
  uint32_t gu_flags;            /* GU_FLAG_* */
};

/* What the connection does, seen from the local node ("source": the
 * local node sends data to the peer). */
enum uuid_decision {
  UUID_NO_SYNC = 0,             /* connect; no resync (disk states stay
                                   as they are: two fresh nodes stay
                                   Inconsistent) */
  UUID_SYNC_SOURCE_BITMAP,      /* send the chunks set in the local
                                   bitmap for the peer OR the peer's
                                   bitmap for us */
  UUID_SYNC_TARGET_BITMAP,      /* the mirror image */
  UUID_SYNC_SOURCE_FULL,        /* send every chunk */
  UUID_SYNC_TARGET_FULL,        /* receive every chunk */
  UUID_SYNC_BITMAP_TIEBREAK,    /* both sides crashed as primary in the
                                   same generation: a bitmap-based resync,
                                   and the node with the lower node id is
                                   the source (both sides get this same
                                   answer; the UUIDs cannot tell them
                                   apart) */
  UUID_SOURCE_INCONSISTENT,     /* a resync is needed but the side that
                                   would be its source is not Consistent:
                                   refuse; retry once it is */
  UUID_SPLIT_BRAIN,             /* both sides changed data apart: refuse;
                                   never resolved here */
  UUID_UNRELATED,               /* no common generation at all: refuse */
};
#define UUID_DECISION_MAX UUID_UNRELATED

/* The decision table.  uuid_compare evaluates part 1 top to bottom and
 * the first row that matches decides; part 2 then looks at the disk
 * states and may override.  *rule says which row decided.
 *
 * Notation: L is the local tuple, P the peer's.  "fresh": current UUID
 * UUID_JUST_CREATED or 0.  L.hist: L's non-zero history UUIDs.  L.anc:
 * L.hist plus L's bitmap UUID if non-zero.  "consistent": GU_FLAG_
 * CONSISTENT set and not fresh.  DRBD: the 8.4 rule number /
 * the DRBD 9 rule name of the counterpart.
 *
 * Part 1, the generations:
 *
 *  rule  condition                               decision       DRBD
 *  10    L and P fresh                           NO_SYNC        10 / just-created-both
 *  20    L fresh                                 TARGET_FULL    20 / just-created-self
 *  30    P fresh                                 SOURCE_FULL    30 / just-created-peer
 *        -- rows 34..49: L.current == P.current --
 *  34    L.bitmap != 0, P.bitmap == 0            SOURCE_BITMAP  34,36 / sync-source-missed-finish
 *  35    P.bitmap != 0, L.bitmap == 0            TARGET_BITMAP  35,37 / sync-target-peer-missed-finish
 *        -- rows 41..46 only if L or P has CRASHED_PRIMARY --
 *  41    L primary now, P not                    SOURCE_BITMAP  41
 *  42    P primary now, L not                    TARGET_BITMAP  41
 *  43    both primary now                        SPLIT_BRAIN    41 "can not resolve"
 *  44    L crashed primary, P not                SOURCE_BITMAP  40 / crashed-primary, both-off
 *  45    P crashed primary, L not                TARGET_BITMAP  40 / crashed-primary, both-off
 *  46    both crashed primary                    TIEBREAK       40 (RESOLVE_CONFLICTS) / both-off
 *  49    otherwise                               NO_SYNC        40 / reconnected
 *        -- rows 50..1000: the current UUIDs differ --
 *  50    P.bitmap == L.current,
 *          L.bitmap != P.current                 TARGET_BITMAP  50 / bitmap-peer
 *  55    P.bitmap == L.current and
 *          L.bitmap == P.current                 SPLIT_BRAIN    none (DRBD takes 50)
 *  70    L.bitmap == P.current,
 *          P.bitmap != L.current                 SOURCE_BITMAP  70 / bitmap-self
 *  60    L.current in P.hist,
 *          P.current not in L.hist               TARGET_FULL    60 / history-peer
 *  80    P.current in L.hist,
 *          L.current not in P.hist               SOURCE_FULL    80 / history-self
 *        -- rows 85..100: both moved on from a common generation --
 *  85    L tentative, P not                      TARGET_FULL    none
 *  86    P tentative, L not                      SOURCE_FULL    none
 *  90    L.bitmap == P.bitmap != 0               SPLIT_BRAIN    90 / bitmap-both
 *  100   L.anc and P.anc share a UUID            SPLIT_BRAIN    100 / history-both
 *  1000  otherwise                               UNRELATED      -1000 / unrelated-data
 *
 * Part 2, the disk states; not applied to SPLIT_BRAIN or UNRELATED:
 *
 *  110   neither consistent, part 1 chose a
 *          resync (or TIEBREAK)                  SOURCE_INCONSISTENT  "I shall become SyncSource,
 *                                                                        but I am inconsistent"
 *  120   L not consistent, P consistent, part 1
 *          did not choose P as source            TARGET_FULL    sync_handshake's "due to disk states"
 *  121   P not consistent, L consistent, part 1
 *          did not choose L as source            SOURCE_FULL    same
 *
 * Why the rows are as they are:
 *
 *  10-30  A fresh node has no data.  Two fresh nodes stay Inconsistent
 *         until one is forced primary (uuid_force_primary), which makes
 *         it the full-sync source of every fresh peer (row 30).
 *  34/35  Same generation, but one side still has a bitmap UUID: a resync
 *         ended and the source stopped before recording it (the target
 *         records first, see uuid_resync_finished_target), or a full sync
 *         is being resumed (uuid_full_sync_start_source).  The bitmap
 *         holds what is left; resending it is cheap and safe.
 *  41-46  Same generation, no bitmaps, but a primary crashed: its
 *         activity-log extents may differ.  Whoever is primary now is
 *         the source (its data is what clients see); else the crashed
 *         primary.  The extents themselves travel as bits in the crashed
 *         node's bitmap, so the resync must merge both sides' bitmaps.
 *  49     A plain reconnect (or both stopped cleanly): nothing to do.
 *  50/70  The usual case: one side wrote while the other was away; its
 *         bitmap counts from the other's current generation.  Also how
 *         an interrupted resync resumes in the same direction: the
 *         target's current UUID does not change until the resync ends.
 *  55     Each side claims the other is behind: cannot happen without
 *         a bug or a forged tuple; refusing is the safe answer, and it
 *         keeps compare (a, b) the mirror image of compare (b, a).
 *  60/80  The behind side's generation is in the other's history but no
 *         bitmap counts from it (the bitmap was cleared after a sync with
 *         a third node, or a forced primary): only a full sync is safe.
 *         If both are in each other's history, fall through.
 *  85/86  Both moved on from a common generation, but one side's
 *         generation is tentative: no write of it was acknowledged to a
 *         client, so nothing is lost if it goes.  A Primary that starts a
 *         generation and loses quorum before its first write completes
 *         withdraws it (the engine goes back to the UUIDs before); a
 *         secondary that had already taken it still holds it, and the
 *         Primary's next generation, or one started elsewhere from the
 *         same parent, is its sibling.  Without the flag that is a split
 *         brain; with it, the tentative side is overwritten.  Full: the
 *         other side's bitmap does not count from the tentative
 *         generation.  If both are tentative, fall through (split brain).
 *         The flag may be stale on a secondary that missed the Primary's
 *         word that a write completed; that is harmless, as a write is
 *         completed only with quorum, and every later quorum then holds a
 *         node of that generation, which is ahead of its parent, so that
 *         no sibling of it is started (sync_follow_primary, role.c).
 *  90/100 Both moved on from a common generation: split brain.  90 means
 *         both bitmaps count from the same generation, so once someone
 *         decides who loses, a bitmap-based resync is enough; after 100
 *         it must be full.  100 also looks at bitmap UUIDs (DRBD only at
 *         histories) and never at empty slots (a DRBD 8.4 bug, fixed in
 *         9: all-zero histories matched).
 *  110    Never copy from a disk that is not Consistent.
 *  120/121 Data that is Consistent, even Outdated, wins over data that
 *         is not, as in DRBD; but a bitmap cannot describe how a not
 *         Consistent disk differs when the generations did not say the
 *         consistent side is its source, so the override is a full sync.
 *         A split brain is never overridden, even when one side is not
 *         Consistent (DRBD would resync it from the consistent side):
 *         the issue says split brain is never resolved silently.
 */
enum uuid_rule {
  UUID_RULE_FRESH_BOTH = 10,
  UUID_RULE_FRESH_LOCAL = 20,
  UUID_RULE_FRESH_PEER = 30,
  UUID_RULE_SAME_BITMAP_LOCAL = 34,
  UUID_RULE_SAME_BITMAP_PEER = 35,
  UUID_RULE_CRASHED_LOCAL_PRIMARY_NOW = 41,
  UUID_RULE_CRASHED_PEER_PRIMARY_NOW = 42,
  UUID_RULE_CRASHED_BOTH_PRIMARY_NOW = 43,
  UUID_RULE_CRASHED_LOCAL = 44,
  UUID_RULE_CRASHED_PEER = 45,
  UUID_RULE_CRASHED_BOTH = 46,
  UUID_RULE_SAME = 49,
  UUID_RULE_BITMAP_PEER = 50,
  UUID_RULE_BITMAP_CROSSED = 55,
  UUID_RULE_BITMAP_LOCAL = 70,
  UUID_RULE_HISTORY_PEER = 60,
  UUID_RULE_HISTORY_LOCAL = 80,
  UUID_RULE_TENTATIVE_LOCAL = 85,
  UUID_RULE_TENTATIVE_PEER = 86,
  UUID_RULE_SPLIT_BRAIN_BITMAP = 90,
  UUID_RULE_SPLIT_BRAIN_HISTORY = 100,
  UUID_RULE_NO_CONSISTENT_SOURCE = 110,
  UUID_RULE_INCONSISTENT_LOCAL = 120,
  UUID_RULE_INCONSISTENT_PEER = 121,
  UUID_RULE_UNRELATED = 1000,
};

/* Decide what a new connection does; see the table above.  Pure: reads
 * both tuples, changes neither.  rule may be NULL.  For any a, b:
 * uuid_compare (b, a) == uuid_decision_mirror (uuid_compare (a, b)).
 * The peer's tuple should have passed uuid_check. */
extern enum uuid_decision uuid_compare (const struct gen_uuids *local,
                                        const struct gen_uuids *peer,
                                        int *rule);

/* "sync-source-bitmap" etc. for logs; "unknown" if out of range. */
extern const char *uuid_decision_name (enum uuid_decision d);

/* "bitmap-peer" etc. for logs; "unknown" if not a rule. */
extern const char *uuid_rule_name (int rule);

/* The decision the peer reaches from the same two tuples. */
extern enum uuid_decision uuid_decision_mirror (enum uuid_decision d);

/* Yes/no questions about a decision.  TIEBREAK is neither source nor
 * target until the engine has compared node ids. */
extern bool uuid_decision_is_source (enum uuid_decision d);
extern bool uuid_decision_is_target (enum uuid_decision d);
extern bool uuid_decision_is_full (enum uuid_decision d);
extern bool uuid_decision_refuses (enum uuid_decision d);

/* Check a tuple that came off the wire or out of the metadata: known
 * flags only; UUID_JUST_CREATED only as a current UUID; a fresh tuple
 * has no bitmap, no history and is not Consistent.  Returns 0, or -1
 * with errno = EPROTO and a message in err. */
extern int uuid_check (const struct gen_uuids *u, char *err, size_t errlen);

/* ---- The lifecycle.  Each helper changes one node's tuple; which node
 * calls which, and when, is said with each.  New UUIDs are passed in
 * (from uuid_generate in the engine) so that tests are deterministic;
 * a new UUID must be neither 0 nor UUID_JUST_CREATED. */

/* A random UUID from getrandom(2), never 0 or UUID_JUST_CREATED.
 * Returns 0, or -1 with errno set. */
extern int uuid_generate (uint64_t *out);

/* `replctl create-md`: a fresh node, no data, not Consistent. */
extern void uuid_init_fresh (struct gen_uuids *u);

/* `replctl create-md --in-sync`: the admin declares that every node's
 * disk already holds the same data.  Every node must then get the same
 * current UUID without talking to the others, so it is derived from
 * what they all share, the resource name and the volume size (see
 * uuid_in_sync_value).  Consistent; no bitmap, no history.  Nodes made
 * with a different name or size come out unrelated, and are refused. */
extern void uuid_init_in_sync (struct gen_uuids *u, const char *resource,
                               uint64_t size);

/* The current UUID uuid_init_in_sync uses: FNV-1a 64 over the bytes
 * "nbdrepl-in-sync", NUL, the resource name, NUL and the size as 8
 * big-endian bytes, then the splitmix64 finaliser; 0 and
 * UUID_JUST_CREATED map to other values.  Part of the on-disk format:
 * it must never change. */
extern uint64_t uuid_in_sync_value (const char *resource, uint64_t size);

/* Start a new generation.  Called by a primary before the first write
 * that a peer will miss (the peer is away, or was lost while the write
 * was in flight), and (through uuid_force_primary) by a forced
 * promotion.  The bitmap for the away peer counts from the old current
 * UUID (bitmap := current, unless a bitmap UUID is already set: the
 * bitmap then already counts from an older generation and covers this
 * one too).  The old current UUID also becomes the newest history
 * UUID, even when the bitmap UUID took it.  A fresh node's
 * UUID_JUST_CREATED is never kept.
 *
 * With several peers the engine applies this to the view of every away
 * peer (each bitmap UUID that is 0 becomes the old current UUID), and
 * uuid_adopt_current to the views of the connected ones; the current
 * UUID and history are shared by all views.  That is why the history
 * takes the old current UUID in any case: a connected peer's view has
 * no bitmap UUID to carry it, a resync target takes its source's view
 * whole (uuid_resync_finished_target), and without it there a node
 * still in the old generation would look like the other half of a
 * split brain (rule 100) instead of a node that is behind (60/80). */
extern void uuid_new_current (struct gen_uuids *u, uint64_t new_uuid);

/* A connected, in-sync node takes on the new current UUID its primary
 * just made (the data stays identical, so no bitmap starts): the old
 * current UUID goes into the history.  Only needed with 3+ nodes. */
extern void uuid_adopt_current (struct gen_uuids *u, uint64_t new_uuid);

/* `replctl primary --force`, or role=primary on a fresh node: declare
 * the local data authoritative.  A Consistent node starts a new
 * generation as uuid_new_current does.  A node that is not Consistent
 * has no whole generation to count a bitmap from, so its old current
 * UUID goes into the history: peers that hold it get a full sync (row
 * 80), never a bitmap one.  Sets GU_FLAG_CONSISTENT and clears
 * GU_FLAG_TENTATIVE: the administrator's word is no tentative one. */
extern void uuid_force_primary (struct gen_uuids *u, uint64_t new_uuid);

/* The sync source, as a full sync starts (with every bit of the peer's
 * bitmap set): make the bitmap UUID count from the generation the
 * target will hold during the sync (its current UUID; for a fresh
 * target, ours, see uuid_resync_start_target), so that an interrupted
 * full sync resumes as a bitmap-based one (row 50/70 or 34) instead of
 * starting again.  An older bitmap UUID goes into the history. */
extern void uuid_full_sync_start_source (struct gen_uuids *source,
                                         const struct gen_uuids *target);

/* The sync target, before the first resync write reaches its disk:
 * not Consistent any more.  A fresh target takes the source's current
 * UUID, the other half of uuid_full_sync_start_source; any other
 * target keeps its current UUID until the end. */
extern void uuid_resync_start_target (struct gen_uuids *target,
                                      const struct gen_uuids *source);

/* The sync target, once every chunk is on its disk, BEFORE it
 * acknowledges the end: it takes on the source's tuple as the source
 * will have it after uuid_resync_finished_source (same current UUID,
 * the source's bitmap UUID moved into the history), with no bitmap of
 * its own for the source.  Consistent; no longer a crashed primary;
 * tentative if the source's generation is (GU_FLAG_TENTATIVE).
 * `source` is the source's tuple as received at connect. */
extern void uuid_resync_finished_target (struct gen_uuids *target,
                                         const struct gen_uuids *source);

/* The sync source, once the target has acknowledged the end: the peer
 * is back in sync (uuid_clear_bitmap) and any crash is resolved (clear
 * GU_FLAG_CRASHED_PRIMARY; with several peers, only when the last one
 * is in sync). */
extern void uuid_resync_finished_source (struct gen_uuids *source);

/* A peer is back in sync and the bitmap for it is clear: its bitmap
 * UUID moves into the history (unless it is the current UUID, or
 * already the newest history UUID) and becomes 0. */
extern void uuid_clear_bitmap (struct gen_uuids *u);

#endif /* NBDREPL_UUID_COMPARE_H */
