/* nbdrepl: the replication state of one connection, as data.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * The transition table and the message-in-state table (repl-state.h).
 */
#include <config.h>

#include "repl-state.h"
#include "wire.h"

#define BIT(s) (1u << (s))
#define CONNECTED_STATES \
  (BIT (REPL_ESTABLISHED) | BIT (REPL_WF_BITMAP_S) | BIT (REPL_WF_BITMAP_T) | \
   BIT (REPL_SYNC_SOURCE) | BIT (REPL_SYNC_TARGET) | BIT (REPL_VERIFY_S) | \
   BIT (REPL_PAUSED_SYNC_S) | BIT (REPL_PAUSED_SYNC_T))

static const char *const names[REPL_STATE_MAX + 1] = {
  [REPL_OFF] = "Off",
  [REPL_ESTABLISHED] = "Established",
  [REPL_WF_BITMAP_S] = "WFBitMapS",
  [REPL_WF_BITMAP_T] = "WFBitMapT",
  [REPL_SYNC_SOURCE] = "SyncSource",
  [REPL_SYNC_TARGET] = "SyncTarget",
  [REPL_VERIFY_S] = "VerifyS",
  [REPL_PAUSED_SYNC_S] = "PausedSyncS",
  [REPL_PAUSED_SYNC_T] = "PausedSyncT",
};

/* For each state, the states it may change to. */
static const unsigned next[REPL_STATE_MAX + 1] = {
  [REPL_OFF] = BIT (REPL_ESTABLISHED) | BIT (REPL_WF_BITMAP_S) |
               BIT (REPL_WF_BITMAP_T),
  [REPL_ESTABLISHED] = BIT (REPL_OFF) | BIT (REPL_WF_BITMAP_S) |
                       BIT (REPL_WF_BITMAP_T) | BIT (REPL_SYNC_SOURCE) |
                       BIT (REPL_SYNC_TARGET) | BIT (REPL_VERIFY_S),
  [REPL_WF_BITMAP_S] = BIT (REPL_OFF) | BIT (REPL_SYNC_SOURCE) |
                       BIT (REPL_ESTABLISHED),
  [REPL_WF_BITMAP_T] = BIT (REPL_OFF) | BIT (REPL_SYNC_TARGET) |
                       BIT (REPL_ESTABLISHED),
  [REPL_SYNC_SOURCE] = BIT (REPL_OFF) | BIT (REPL_ESTABLISHED) |
                       BIT (REPL_PAUSED_SYNC_S),
  [REPL_SYNC_TARGET] = BIT (REPL_OFF) | BIT (REPL_ESTABLISHED) |
                       BIT (REPL_PAUSED_SYNC_T),
  [REPL_VERIFY_S] = BIT (REPL_OFF) | BIT (REPL_ESTABLISHED),
  [REPL_PAUSED_SYNC_S] = BIT (REPL_OFF) | BIT (REPL_SYNC_SOURCE) |
                         BIT (REPL_ESTABLISHED),
  [REPL_PAUSED_SYNC_T] = BIT (REPL_OFF) | BIT (REPL_SYNC_TARGET) |
                         BIT (REPL_ESTABLISHED),
};

const char *
repl_state_name (enum repl_state s)
{
  return (unsigned) s <= REPL_STATE_MAX ? names[s] : "?";
}

bool
repl_state_may (enum repl_state from, enum repl_state to)
{
  if ((unsigned) from > REPL_STATE_MAX || (unsigned) to > REPL_STATE_MAX)
    return false;
  return (next[from] & BIT (to)) != 0;
}

static unsigned
accepted (unsigned type)
{
  return wire_type_states (type);
}

bool
repl_state_any_connected (unsigned type)
{
  return accepted (type) == CONNECTED_STATES;
}

bool
repl_state_accepts (unsigned type, enum repl_state s)
{
  if ((unsigned) s > REPL_STATE_MAX)
    return false;
  return (accepted (type) & BIT (s)) != 0;
}

const char *
repl_state_accepts_names (unsigned type)
{
  switch (accepted (type)) {
  case 0: return "none (not after the handshake)";
  case CONNECTED_STATES: return "any connected state";
  case BIT (REPL_SYNC_TARGET) | BIT (REPL_PAUSED_SYNC_T):
    return "SyncTarget or PausedSyncT";
  case BIT (REPL_WF_BITMAP_S): return "WFBitMapS";
  case BIT (REPL_ESTABLISHED) | BIT (REPL_WF_BITMAP_T):
    return "Established or WFBitMapT";
  case BIT (REPL_VERIFY_S) | BIT (REPL_SYNC_SOURCE) | BIT (REPL_PAUSED_SYNC_S):
    return "VerifyS, SyncSource or PausedSyncS";
  case BIT (REPL_ESTABLISHED) | BIT (REPL_SYNC_TARGET):
    return "Established or SyncTarget";
  default: return "?";
  }
}
