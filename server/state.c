/* nbdrepl: changing a connection's replication state.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * Each peer's replication state (common/repl-state.h: Off, Established,
 * WFBitMapS/T, SyncSource/Target, VerifyS) is stored in pr_repl and
 * changed only here: the change is checked against the transition
 * table, logged once, and timestamped; status prints what is stored.
 * The connection state, what we know of the peer's disk, this node's
 * disk and role change here too; every change is posted to the events
 * stream (events.c).
 */
#include <config.h>

#include <assert.h>
#include <errno.h>

#include "cleanup.h"
#include "internal.h"
#include "log.h"

/* Change p's replication state to `to`.  A change the table forbids is
 * a bug of ours: logged, and nothing changes.  Returns 0 or -1.
 * pr_lock held. */
int
peer_set_repl_locked (struct peer *p, enum repl_state to)
{
  enum repl_state from = p->pr_repl;

  ASSERT_LOCKED (&p->pr_lock);
  if (from == to)
    return 0;
  if (!repl_state_may (from, to)) {
    log_error ("peer %s: replication state %s -> %s is not allowed; "
               "staying %s", p->pr_cfg->nc_name, repl_state_name (from),
               repl_state_name (to), repl_state_name (from));
    return -1;
  }
  p->pr_repl = to;
  p->pr_repl_since_ns = now_ns ();
  events_peer_device (p, "replication:%s", repl_state_name (to));
  /* Connects and disconnects have log lines of their own. */
  if (from != REPL_OFF && to != REPL_OFF)
    log_info ("peer %s: replication %s -> %s", p->pr_cfg->nc_name,
              repl_state_name (from), repl_state_name (to));
  pthread_cond_broadcast (&p->pr_cond);
  pthread_cond_signal (&p->pr_resync_cond);
  return 0;
}

/* Something our STATE says changed (role, disk, the storage Primaries
 * we follow, the diskless nodes routed through us, a pause): called
 * after the change is stored.  role_tell_state reads the sequence
 * before it reads the state, and does not send a STATE read before one
 * it has already queued on that connection: STATEs queued by two
 * threads leave in the order their contents were read.  Any lock, or
 * none. */
void
node_state_changed (struct repl_node *node)
{
  atomic_fetch_add (&node->n_state_seq, 1);
}

uint64_t
node_state_seq (struct repl_node *node)
{
  return atomic_load (&node->n_state_seq);
}

/* Change this node's disk state (not the one it starts with: node.c).
 * A diskless node has none to change.  Logged once per change. */
void
node_set_disk (struct repl_node *node, enum repl_disk_state disk)
{
  enum repl_disk_state from;

  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&node->n_lock);
    from = node->n_disk;
    if (from == disk || from == REPL_DISK_DISKLESS ||
        disk == REPL_DISK_DISKLESS)
      return;
    node->n_disk = disk;
    node_state_changed (node);
    pthread_cond_broadcast (&node->n_cond);
    events_device (node, "disk:%s", disk_state_name (disk));
  }
  log_info ("node %s: disk %s -> %s", node->n_self->nc_name,
            disk_state_name (from), disk_state_name (disk));
  worker_post (node, WORK_ANNOUNCE);   /* the peers learn it */
}

/* n_primary_id from this node's role and the peers that are Primary:
 * this node if it is, else a storage Primary (with two, allow-two-
 * primaries, one is a storage node: diskless.c), else a diskless one,
 * else -1.  The one place that sets it.  n_lock held. */
static void
primary_id_locked (struct repl_node *node)
{
  ASSERT_LOCKED (&node->n_lock);
  if (node->n_role == REPL_ROLE_PRIMARY)
    node->n_primary_id = node->n_self->nc_id;
  else if (node->n_primaries_storage != 0)
    node->n_primary_id = __builtin_ctz (node->n_primaries_storage);
  else if (node->n_primaries_diskless != 0)
    node->n_primary_id = __builtin_ctz (node->n_primaries_diskless);
  else
    node->n_primary_id = -1;
}

/* Change this node's role; n_lock held.  Logged by the caller, which
 * knows why (role.c). */
void
node_set_role_locked (struct repl_node *node, enum repl_role role)
{
  ASSERT_LOCKED (&node->n_lock);
  if (node->n_role != role)
    events_resource (node, "role:%s", role_name (role));
  if (role != REPL_ROLE_PRIMARY) {  /* its generation is the others' now */
    atomic_store (&node->n_gen_unacked, false);
    node->n_dl_via = -1;        /* diskless-primaries.c */
    node->n_dl_deciding = false;
  }
  node->n_role = role;
  node_state_changed (node);
  primary_id_locked (node);
  pthread_cond_broadcast (&node->n_cond);
}

/* Peer p is Primary (or no longer, or gone): n_primary_id names the
 * primary as far as we know.  With two primaries (allow-two-primaries)
 * a Primary names itself, and a Secondary the storage one of the two;
 * each peer's role is in its connection.  n_lock held. */
void
node_peer_role_locked (struct repl_node *node, const struct peer *p,
                       bool primary)
{
  uint32_t bit = UINT32_C (1) << p->pr_cfg->nc_id;
  uint32_t *mask = p->pr_cfg->nc_diskless ? &node->n_primaries_diskless
                                          : &node->n_primaries_storage;
  uint32_t was = *mask;

  ASSERT_LOCKED (&node->n_lock);
  if (primary)
    *mask |= bit;
  else
    *mask &= ~bit;
  if (*mask != was)
    node_state_changed (node);
  primary_id_locked (node);
  /* Waited for by conn_wait_storage_primary_gone (below) and a
   * diskless node's dl_wait_unfollowed. */
  node->n_dl_follow_seq++;
  pthread_cond_broadcast (&node->n_cond);
  /* A storage Secondary beside diskless nodes tells them which storage
   * Primaries it follows now (role_tell_state), on a change only. */
  if (*mask != was && tp_routes_diskless (node) &&
      node->n_role != REPL_ROLE_PRIMARY && !p->pr_cfg->nc_diskless)
    worker_post_locked (node, WORK_ANNOUNCE);
}

/* c's reader waits, at most a ping timeout and a ping interval, until
 * this node follows no storage Primary (its loss or demotion reaches
 * us: node_peer_role_locked).  Nobody reads c meanwhile: c_rx_forwarding
 * keeps the ticker from counting that silence.  Returns true if one is
 * still followed. */
bool
conn_wait_storage_primary_gone (struct conn *c)
{
  struct repl_node *node = c->c_peer->pr_node;
  struct timespec ts;
  bool following;

  ts = deadline_after_ns ((node->n_cfg.cf_ping_timeout_ms +
                           node->n_cfg.cf_ping_interval_ms) *
                          UINT64_C (1000000));
  atomic_store (&c->c_rx_forwarding, true);
  pthread_mutex_lock (&node->n_lock);
  while (node->n_primaries_storage != 0 && !node->n_stopping &&
         pthread_cond_timedwait (&node->n_cond, &node->n_lock,
                                 &ts) != ETIMEDOUT)
    ;
  following = node->n_primaries_storage != 0;
  pthread_mutex_unlock (&node->n_lock);
  c->c_last_recv_ns = now_ns ();
  atomic_store (&c->c_rx_forwarding, false);
  return following;
}

/* Change p's connection state along Connecting -> Handshake ->
 * Connected -> Disconnecting -> Connecting (or Handshake -> Connecting).
 * Anything else is a bug of ours.  pr_lock held.  (Connects and
 * disconnects are logged by the peer thread, with the reason.) */
void
peer_set_conn_locked (struct peer *p, enum conn_state to)
{
  static const unsigned next[] = {
    [CONN_STANDALONE] = 1u << CONN_CONNECTING,
    [CONN_CONNECTING] = 1u << CONN_HANDSHAKE | 1u << CONN_STANDALONE,
    [CONN_HANDSHAKE] = 1u << CONN_CONNECTING | 1u << CONN_CONNECTED,
    [CONN_CONNECTED] = 1u << CONN_DISCONNECTING,
    [CONN_DISCONNECTING] = 1u << CONN_CONNECTING,
  };

  enum conn_state from = p->pr_state;

  ASSERT_LOCKED (&p->pr_lock);
  if (from == to)
    return;
  assert (next[from] & (1u << to));
  p->pr_state = to;
  /* Attempts that end in their handshake are logged (peer.c), not
   * posted: a peer down for an hour would fill the ring with them. */
  if ((from == CONN_CONNECTING && to == CONN_HANDSHAKE) ||
      (from == CONN_HANDSHAKE && to == CONN_CONNECTING))
    ;
  else if (to == CONN_CONNECTED)
    events_connection (p, "connection:%s role:%s", conn_state_name (to),
                       role_name (p->pr_conn->c_role));
  else
    events_connection (p, "connection:%s", conn_state_name (to));
  pthread_cond_broadcast (&p->pr_cond);
}

/* What we know of p's disk: its state as it told us or as we found out
 * (disk), or nothing (known false: DUnknown).  pr_lock held. */
void
peer_set_disk_locked (struct peer *p, bool known, enum repl_disk_state disk)
{
  ASSERT_LOCKED (&p->pr_lock);
  if (p->pr_disk_known == known && (!known || p->pr_disk == disk))
    return;
  if (p->pr_disk_known && p->pr_disk == REPL_DISK_UPTODATE &&
      (!known || disk != REPL_DISK_UPTODATE))
    p->pr_disk_left_uptodate_ns = now_ns ();
  p->pr_disk_known = known;
  if (known)
    p->pr_disk = disk;
  events_peer_device (p, "peer-disk:%s",
                      known ? disk_state_name (disk) : "DUnknown");
}

/* Is p in one of the resync states (paused or not)? */
bool
peer_resyncing_locked (const struct peer *p)
{
  ASSERT_LOCKED (&p->pr_lock);
  return p->pr_repl == REPL_SYNC_SOURCE || p->pr_repl == REPL_SYNC_TARGET ||
         p->pr_repl == REPL_PAUSED_SYNC_S || p->pr_repl == REPL_PAUSED_SYNC_T;
}

/* The resync with p is paused while either node's administrator says
 * so (replctl pause-sync; the peer's comes in its STATE): a running
 * resync's state follows, SyncSource <-> PausedSyncS, SyncTarget <->
 * PausedSyncT; the source's resync waits while paused (resync.c).
 * pr_lock held. */
void
peer_update_pause_locked (struct peer *p)
{
  bool paused = p->pr_pause_user || p->pr_pause_peer;

  ASSERT_LOCKED (&p->pr_lock);
  switch (p->pr_repl) {
  case REPL_SYNC_SOURCE:
    if (paused)
      peer_set_repl_locked (p, REPL_PAUSED_SYNC_S);
    break;
  case REPL_PAUSED_SYNC_S:
    if (!paused)
      peer_set_repl_locked (p, REPL_SYNC_SOURCE);
    break;
  case REPL_SYNC_TARGET:
    if (paused)
      peer_set_repl_locked (p, REPL_PAUSED_SYNC_T);
    break;
  case REPL_PAUSED_SYNC_T:
    if (!paused)
      peer_set_repl_locked (p, REPL_SYNC_TARGET);
    break;
  default:
    break;
  }
}
