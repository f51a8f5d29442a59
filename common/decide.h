/* nbdrepl: the engine's decisions, as pure functions.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * What the engine decides from facts it has gathered, with no I/O, no
 * locks and no side effects, so that each rule is written once and
 * tested on its own (tests/test-decide.c); the engine (server/) gathers
 * the facts, calls these, and then acts: runs the handler, invalidates,
 * logs, changes the state.
 *
 *   decide_quorum        has a node quorum with `votes` of `total`?
 *   decide_promote       may a node become Primary?
 *   decide_connect       what a new connection does with the two
 *                        nodes' generations: connect (and resync which
 *                        way), or refuse; split-brain policies included
 */
#ifndef NBDREPL_DECIDE_H
#define NBDREPL_DECIDE_H

#include <stdbool.h>
#include <stdint.h>

#include "repl-config.h"
#include "uuid-compare.h"
#include "wire.h"

/* Quorum with `votes` nodes of `total` (this node and its connected
 * peers count; quorum off: always). */
extern bool decide_quorum (enum repl_quorum quorum, unsigned votes,
                           unsigned total);

/* The facts for a promotion. */
struct promote_case {
  bool pc_peer_primary;         /* a connected peer is Primary ... */
  bool pc_peer_primary_diskless; /* ... a diskless one */
  bool pc_peers_primary;        /* two connected peers are Primary */
  bool pc_two_primaries;        /* allow-two-primaries: true */
  bool pc_has_diskless;         /* the resource has diskless nodes */
  bool pc_quorum;               /* decide_quorum, now */
  bool pc_diskless;             /* this node has no disk ... */
  bool pc_storage_uptodate;     /* ... and an UpToDate storage node is
                                   connected */
  enum repl_disk_state pc_disk; /* a storage node's disk */
  bool pc_force;                /* replctl primary --force */
};

enum promote_verdict {
  PROMOTE,                      /* becomes Primary */
  PROMOTE_FORCED,               /* becomes Primary with a disk that is not
                                   UpToDate: its data is declared
                                   authoritative (a new generation) */
  PROMOTE_REFUSE_PEER_PRIMARY,  /* a connected peer is Primary (also
                                   with --force: never two), unless
                                   allow-two-primaries and this node is
                                   UpToDate, or diskless; and of the
                                   two, one is a storage node, the
                                   other diskless if the resource has
                                   diskless nodes */
  PROMOTE_REFUSE_NO_QUORUM,
  PROMOTE_REFUSE_NO_STORAGE,    /* diskless, no UpToDate storage node */
  PROMOTE_REFUSE_DISK,          /* not UpToDate, and no --force */
};

extern enum promote_verdict decide_promote (const struct promote_case *c);

/* The facts for the generation decision at connect, besides the two
 * nodes' UUIDs. */
struct connect_case {
  uint32_t cc_our_id, cc_peer_id;
  bool cc_we_primary, cc_peer_primary;
  uint64_t cc_our_changes;      /* chunks our bitmap for the peer marks */
  uint64_t cc_peer_changes;     /* ... the peer's for us (its hello) */
  uint64_t cc_our_primary_since, cc_peer_primary_since; /* ms, 0: never */
  enum repl_sb_policy cc_after_sb_0pri, cc_after_sb_1pri;
};

enum connect_verdict {
  CONNECT,                      /* connect; cd_decision says how */
  CONNECT_REFUSE,               /* the generations refuse (split brain
                                   with no policy that resolves it,
                                   unrelated data, ...) */
  CONNECT_REFUSE_PRIMARY_BEHIND, /* we are Primary and the peer has data
                                   we lack: never overwrite a primary */
  CONNECT_REFUSE_PEER_PRIMARY_BEHIND, /* the peer is Primary and lacks
                                   data we have */
  CONNECT_SPLIT_BRAIN_RESOLVED, /* split brain, and the policy names the
                                   loser (cd_loser), which discards its
                                   data; reconnect for a full sync */
};

enum sb_loser { SB_NOBODY, SB_WE_LOSE, SB_PEER_LOSES };

struct connect_decision {
  enum uuid_decision cd_decision; /* TIEBREAK resolved by node id */
  int cd_rule;                  /* uuid_compare's rule number */
  enum connect_verdict cd_verdict;
  enum sb_loser cd_loser;       /* CONNECT_SPLIT_BRAIN_RESOLVED */
  enum repl_sb_policy cd_policy; /* ... by this policy */
};

extern void decide_connect (const struct gen_uuids *local,
                            const struct gen_uuids *peer,
                            const struct connect_case *c,
                            struct connect_decision *out);

/* Two storage secondaries with no storage Primary, in the same
 * generation (no-sync), each with a count of chunks it marked for the
 * other: who resyncs whom?  Only an UpToDate node is a source.  Both
 * UpToDate: whoever marked chunks sends them; if both did, the lower id
 * takes the other's marks too and sends all.  One UpToDate: it sends
 * what either marked.  Both sides reach the mirror answer from the
 * numbers their HELLO_STATEs announced.  Returns 1 (we are the
 * source), -1 (the peer is), 0 (no resync). */
extern int decide_pair_source (bool we_uptodate, bool peer_uptodate,
                               uint64_t ours, uint64_t theirs,
                               bool we_lower);

/* The split-brain policy's verdict alone (part of decide_connect):
 * both nodes come to the same answer, seeing the same roles and the
 * same two change counts.  A primary's data is what its clients see:
 * never the loser. */
extern enum sb_loser decide_split_brain_loser (const struct connect_case *c,
                                               enum repl_sb_policy *policy);

#endif /* NBDREPL_DECIDE_H */
