/* nbdrepl: the replication state of one connection, as data.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * DRBD's replication states, as this node sees one peer connection:
 *
 *   Off          no connection
 *   Established  connected; writes flow, nothing is being resynced
 *   WFBitMapS    we are the sync source and wait for the target's bitmap
 *                (BITMAP ... BITMAP_DONE) before resyncing
 *   WFBitMapT    we are the sync target and have sent our bitmap; the
 *                source's RESYNC_START comes next
 *   SyncSource   we resync the peer (RESYNC_START sent, RESYNC_DONE not
 *                yet acknowledged)
 *   SyncTarget   the peer resyncs us (RESYNC_START received, RESYNC_DONE
 *                not yet)
 *   VerifyS      we run an online verify against the peer
 *   PausedSyncS  SyncSource, paused (replctl pause-sync, on either
 *                node): nothing more is sent until resumed
 *   PausedSyncT  SyncTarget, paused likewise
 *
 * The allowed transitions (repl_state_may):
 *
 *   Off         -> Established, WFBitMapS, WFBitMapT
 *   Established -> WFBitMapS, WFBitMapT, SyncSource, SyncTarget, VerifyS
 *   WFBitMapS   -> SyncSource, Established
 *   WFBitMapT   -> SyncTarget, Established
 *   SyncSource  -> Established, PausedSyncS
 *   SyncTarget  -> Established, PausedSyncT
 *   VerifyS     -> Established
 *   PausedSyncS -> SyncSource, Established
 *   PausedSyncT -> SyncTarget, Established (RESYNC_DONE: the source
 *                  had sent everything before it heard of the pause)
 *   any         -> Off (the connection is lost)
 *
 * and which messages may arrive in which state (repl_state_accepts,
 * from wire.c's table of message types): the resync, bitmap and verify
 * messages only where that exchange is running; everything else in any
 * connected state.  A message in a wrong state is
 * a protocol error that ends the connection and changes nothing.  Pure:
 * no I/O, no locks; the engine stores the state (server/state.c).
 */
#ifndef NBDREPL_REPL_STATE_H
#define NBDREPL_REPL_STATE_H

#include <stdbool.h>

enum repl_state {
  REPL_OFF,
  REPL_ESTABLISHED,
  REPL_WF_BITMAP_S,
  REPL_WF_BITMAP_T,
  REPL_SYNC_SOURCE,
  REPL_SYNC_TARGET,
  REPL_VERIFY_S,
  REPL_PAUSED_SYNC_S,
  REPL_PAUSED_SYNC_T,
};
#define REPL_STATE_MAX REPL_PAUSED_SYNC_T

/* DRBD's name ("SyncSource"), or "?" for a value out of range. */
extern const char *repl_state_name (enum repl_state s);

/* May a connection go from `from` to `to`?  (A state to itself: no.) */
extern bool repl_state_may (enum repl_state from, enum repl_state to);

/* May a message of this type (enum repl_msg_type) arrive on a
 * connection in state s?  Never in Off; an unknown type never. */
extern bool repl_state_accepts (unsigned type, enum repl_state s);

/* May it arrive in every connected state (so that the receiver need not
 * look at its state)? */
extern bool repl_state_any_connected (unsigned type);

/* A short list of the states in which type may arrive, for the log line
 * of a refusal ("SyncTarget"). */
extern const char *repl_state_accepts_names (unsigned type);

#endif /* NBDREPL_REPL_STATE_H */
