/* nbdrepl: roles at run time — `replctl primary` and `replctl secondary`.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * role=primary on the nbdkit command line is only the role a node starts
 * in.  A secondary is promoted when its disk is UpToDate and no
 * connected peer is primary (or with --force, which declares its data
 * authoritative and starts a new generation, as DRBD's primary --force);
 * a primary is demoted when no NBD client has it open.  Connected peers
 * learn the new role from a STATE message; a node that came up while
 * the others were away learns it from the hello.
 */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "decide.h"
#include "internal.h"
#include "log.h"

/* Does this node, with the peers connected now, have quorum? */
bool
node_has_quorum (struct repl_node *node)
{
  uint64_t now = now_ns ();
  uint64_t fresh = node->n_cfg.cf_ping_timeout_ms * UINT64_C (1000000);
  unsigned votes = 1;
  size_t i;

  if (node->n_cfg.cf_quorum == REPL_QUORUM_OFF)
    return true;
  /* Nor any peer while the ticker has not run for ping-timeout: this
   * node was stopped (or starved), and what its receivers read now
   * was sent before; the ticker drops those connections first thing
   * (ticker.c). */
  {
    uint64_t tick = atomic_load (&node->n_tick_ns);

    if (tick != 0 && now > tick && now - tick > fresh)
      return false;
  }
  /* A peer counts if it is connected, has sent something on this
   * connection (c_heard: a peer that refuses it at the end of its own
   * handshake never does) and was heard from within ping-timeout: a
   * node that was frozen (SIGSTOP, a VM paused) still shows its old
   * connections as up until its ticker looks, while the others may have
   * given it up and promoted another node. */
  for (i = 0; i < PEERS (node)->pl_n; i++) {
    struct peer *p = PEERS (node)->pl_peers[i];
    struct conn *c;
    uint64_t last;

    pthread_mutex_lock (&p->pr_lock);
    if ((c = peer_conn_locked (p)) != NULL && atomic_load (&c->c_heard)) {
      last = atomic_load (&c->c_last_recv_ns);
      if (last >= now || now - last <= fresh)
        votes++;
    }
    pthread_mutex_unlock (&p->pr_lock);
  }
  /* Every configured node, this one and its peers as replctl adjust last
   * left them, counts (as DRBD counts configured nodes). */
  return decide_quorum (node->n_cfg.cf_quorum, votes, PEERS (node)->pl_n + 1);
}

/* A peer connected or went away: writers suspended for want of quorum
 * look again, and the change is logged once. */
void
node_quorum_changed (struct repl_node *node)
{
  bool q = node_has_quorum (node), withdraw;

  pthread_mutex_lock (&node->n_lock);
  if (q != node->n_quorum) {
    node->n_quorum = q;
    events_resource (node, "quorum:%s", q ? "yes" : "no");
    if (node->n_role == REPL_ROLE_PRIMARY) {
      if (q)
        log_info ("node %s: quorum regained; writes go on",
                  node->n_self->nc_name);
      else
        log_error ("node %s: quorum lost (%s): writes %s until enough "
                   "peers are back", node->n_self->nc_name,
                   node->n_cfg.cf_quorum == REPL_QUORUM_ALL
                   ? "not every node is connected"
                   : "no majority of the nodes is connected",
                   node->n_cfg.cf_on_no_quorum_suspend
                   ? "are suspended" : "fail with EIO");
    }
  }
  withdraw = !q && node->n_role == REPL_ROLE_PRIMARY;
  pthread_cond_broadcast (&node->n_cond);
  pthread_mutex_unlock (&node->n_lock);
  /* A generation nobody was promised a write in goes (generation.c). */
  if (withdraw)
    gen_withdraw (node);
}

/* The write path: may a write go on?  Only on the primary (EROFS), and
 * only with quorum: without it, either fail the write (on-no-quorum:
 * io-error, EIO) or wait until quorum is back or the node stops
 * (suspend-io), so that two sides of a partition never both write.  One
 * lock per write.  Returns 0, or -1 with errno. */
int
role_check_write (struct repl_node *node)
{
  bool primary;
  int r = 0;

  pthread_mutex_lock (&node->n_lock);
  primary = node->n_role == REPL_ROLE_PRIMARY;
  while (primary && !node->n_stopping &&
         ((!node->n_quorum && node->n_cfg.cf_on_no_quorum_suspend) ||
          node->n_fencing > 0 || node->n_fence_failed ||
          node->n_role_unannounced))   /* bounded: role_changed's sends */
    pthread_cond_wait (&node->n_cond, &node->n_lock);
  if (!primary || !node->n_quorum)
    r = -1;
  pthread_mutex_unlock (&node->n_lock);
  if (!primary) {
    log_error ("write refused: node %s is not Primary",
               node->n_self->nc_name);
    errno = EROFS;
  }
  else if (r == -1)
    errno = EIO;
  return r;
}

/* A write has reached the local disk and every peer that stayed, but
 * some storage peer did not take it (lost: the connection failed while
 * the write waited for it, or it was away when the write was sent).  It
 * may be reported as done only if this node has quorum now, counting
 * the peers connected at this moment: otherwise the majority, which may
 * already have promoted another node, may not hold it.  Without quorum
 * the write fails with EIO (on-no-quorum: io-error) or waits until
 * quorum is back (suspend-io; EIO if the node stops first).  With
 * quorum off, or when every peer took it, nothing to check: the peers
 * that missed it have the range in their bitmap.  Returns 0, or -1 with
 * errno = EIO. */
int
role_complete_write (struct repl_node *node, bool lost)
{
  /* fencing: a write that lost a peer is done only once that peer is
   * fenced (it cannot take over with data older than this write). */
  if (lost && node->n_cfg.cf_fencing != REPL_FENCING_DONT_CARE) {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&node->n_lock);
    while ((node->n_fencing > 0 || node->n_fence_failed) &&
           !node->n_stopping)
      pthread_cond_wait (&node->n_cond, &node->n_lock);
    if (node->n_fencing > 0 || node->n_fence_failed) {
      errno = EIO;
      return -1;
    }
  }
  if (!lost || node->n_cfg.cf_quorum == REPL_QUORUM_OFF ||
      /* Counted afresh: n_quorum is updated only once the peer thread
       * has torn the connection down, after this writer was
       * released. */
      node_has_quorum (node)) {
    /* Acknowledged: the generation holds a promised write now. */
    if (atomic_load_explicit (&node->n_gen_unacked, memory_order_relaxed) &&
        atomic_exchange (&node->n_gen_unacked, false))
      worker_post (node, WORK_GEN_COMMIT);
    return 0;
  }
  node_quorum_changed (node);
  if (!node->n_cfg.cf_on_no_quorum_suspend) {
    errno = EIO;
    return -1;
  }
  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&node->n_lock);
    while (!node->n_quorum && !node->n_stopping)
      pthread_cond_wait (&node->n_cond, &node->n_lock);
    if (!node->n_quorum) {
      errno = EIO;
      return -1;
    }
  }
  return 0;
}

static void confirm_start (struct repl_node *node, const char *why);

/* role=primary at start.  The node starts as Primary in its hellos,
 * so that every connection is decided as before, but it serves no
 * client until the role is confirmed: when every peer is connected,
 * when it has quorum with the peers it reached (quorum on), or once the
 * peers have had ping-timeout to connect.  A peer that says it is
 * Primary meanwhile wins: this node becomes Secondary instead of making
 * a second primary (role_start_yield).  At once if that peer has the
 * lower node id; otherwise the peer may be starting with role=primary
 * too and give way to us, so we give way only if it still says Primary
 * when our time is up (it is a confirmed Primary).  Called by the
 * ticker. */
void
role_start_check (struct repl_node *node)
{
  const char *why = NULL;
  struct peer *primary = NULL;
  bool all = true;
  size_t i;

  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&node->n_lock);
    if (!node->n_start_pending)
      return;
    if (now_ns () >= node->n_start_deadline_ns)
      why = "not every peer answered within ping-timeout; none is Primary";
  }
  for (i = 0; i < PEERS (node)->pl_n; i++) {
    struct peer *p = PEERS (node)->pl_peers[i];
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&p->pr_lock);

    if (peer_conn_locked (p) == NULL)
      all = false;
    if (p->pr_says_primary)
      primary = p;
  }
  if (primary != NULL) {
    if (why != NULL)            /* time is up: it is a real Primary */
      role_start_yield (node, primary);
    return;
  }
  if (all)
    why = "every peer is connected; none is Primary";
  else if (node->n_cfg.cf_quorum != REPL_QUORUM_OFF && node_has_quorum (node))
    why = "quorum with the peers connected; none is Primary";
  if (why == NULL)
    return;

  confirm_start (node, why);
}

/* End the wait of role=primary: the node is Primary now. */
static void
confirm_start (struct repl_node *node, const char *why)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&node->n_lock);
  if (!node->n_start_pending)
    return;                     /* a peer's role decided it meanwhile */
  node->n_start_pending = false;
  pthread_cond_broadcast (&node->n_cond);
  log_info ("node %s: role=primary confirmed (%s)", node->n_self->nc_name,
            why);
}

/* A peer that says it is Primary connects while this node's role=primary
 * is not yet confirmed: this node becomes Secondary (it has served no
 * client yet) and the connection is made again with that role.  Returns
 * true if it did (the caller refuses this connection attempt), false if
 * this node is a confirmed Primary (the caller refuses the peer). */
bool
role_start_yield (struct repl_node *node, struct peer *p)
{
  bool yielded = false;

  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&node->n_role_lock);
    {
      ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&node->n_lock);
      if (!node->n_start_pending || node->n_role != REPL_ROLE_PRIMARY)
        return false;
    }
    if (meta_set_flags (node, 0, MD_FLAG_PRIMARY) == -1)
      return false;
    {
      ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&node->n_lock);
      node_set_role_locked (node, REPL_ROLE_SECONDARY);
      node_peer_role_locked (node, p, true);
      node->n_start_pending = false;
    }
    atomic_store (&node->n_gen_pending, false);
    yielded = true;
  }
  log_error ("node %s: started with role=primary, but peer %s is Primary: "
             "this node stays Secondary (two primaries would be a split "
             "brain; demote %s first to make this node Primary)",
             node->n_self->nc_name, p->pr_cfg->nc_name, p->pr_cfg->nc_name);
  {
    char err[256];

    role_changed (node, err, sizeof err);
  }
  return yielded;
}

/* Does p, which says it is Primary, hold a newer generation that grew
 * out of ours: its current UUID new, its newest history UUID our
 * current one?  (A promotion with a peer away starts a new generation
 * at once, and the new Primary's UUIDs reach us before its role.) */
static bool
newer_primary (struct repl_node *node, struct conn *c)
{
  struct peer *p = c->c_peer;
  struct gen_uuids ours, theirs;

  gen_view (node, p, &ours);
  pthread_mutex_lock (&p->pr_lock);
  theirs = c->c_peer_uuids;
  pthread_mutex_unlock (&p->pr_lock);
  return theirs.gu_current != ours.gu_current &&
         theirs.gu_history[0] == ours.gu_current;
}

/* Peer p (on c) says it is Primary while we follow primary_id, another
 * storage peer q: if p holds a newer generation grown out of ours, q
 * has not been heard of for a while (it was frozen, or cut off), and
 * the others promoted p meanwhile: p is the Primary now, q one of the
 * past that must not find a follower here.  Returns true if q was
 * dropped. */
static bool
drop_earlier_primary (struct repl_node *node, struct conn *c, int primary_id)
{
  struct peer *p = c->c_peer;
  struct peer *q;

  if (primary_id < 0 || primary_id == (int) p->pr_cfg->nc_id ||
      primary_id == (int) node->n_self->nc_id ||
      (q = node_find_peer (node, primary_id)) == NULL ||
      !newer_primary (node, c))
    return false;
  pthread_mutex_lock (&q->pr_lock);
  peer_fail_current_locked (q, "peer %s became Primary in a newer "
                            "generation; dropping the earlier Primary %s",
                            p->pr_cfg->nc_name, q->pr_cfg->nc_name);
  pthread_mutex_unlock (&q->pr_lock);
  return true;
}

/* At most one Primary: a peer that says it is Primary (its hello once
 * it has authenticated, or a STATE) is refused while this node is a
 * confirmed Primary, or while another connected peer is Primary (a
 * secondary never follows two primaries, unless the new one holds a
 * newer generation grown out of ours: then the earlier one is dropped).
 * A node whose role=primary
 * is not yet confirmed gives way instead (role_start_yield) if the peer
 * has the lower id; else at the end of its wait (role_start_check).
 * Records what the peer said (pr_says_primary).  Returns 0, or -1 with
 * the reason in err. */
int
role_check_peer_role (struct repl_node *node, struct conn *c, uint32_t role,
                      char *err, size_t errlen)
{
  struct peer *p = c->c_peer;
  enum repl_role ours;
  int primary_id;
  uint32_t storage_primaries;

  pthread_mutex_lock (&p->pr_lock);
  p->pr_says_primary = role == REPL_ROLE_PRIMARY;
  pthread_mutex_unlock (&p->pr_lock);
  if (role != REPL_ROLE_PRIMARY)
    return 0;
  pthread_mutex_lock (&node->n_lock);
  ours = node->n_role;
  primary_id = node->n_primary_id;
  storage_primaries = node->n_primaries_storage;
  pthread_mutex_unlock (&node->n_lock);
  /* allow-two-primaries: the peer may be Primary beside us (the two
   * order their writes, two-primaries.c).  Only a storage peer in our
   * generation connects then: the decision at connect refuses a
   * Primary that would be a sync target.  With diskless nodes, one
   * storage and one diskless Primary (tp_check_pair). */
  if (node->n_cfg.cf_two_primaries) {
    if (!node->n_cfg.cf_has_diskless)
      return 0;                 /* the only two nodes (config_load) */
    /* A storage Primary in a newer generation replaces the earlier
     * storage one first (below), which tp_check_pair then no longer
     * counts (n_primary_id names a storage Primary if there is one). */
    if (!c->c_peer_diskless && ours != REPL_ROLE_PRIMARY &&
        storage_primaries != 0)
      drop_earlier_primary (node, c, __builtin_ctz (storage_primaries));
    if (diskless_check_storage_primary (node, c, err, errlen) == -1)
      return -1;
    return tp_check_pair (node, c, err, errlen);
  }
  if (ours == REPL_ROLE_PRIMARY) {
    snprintf (err, errlen, "refusing connection: both this node and the "
              "peer are Primary; only one node may be primary%s",
              p->pr_cfg->nc_id < node->n_self->nc_id &&
              role_start_yield (node, p)
              ? " (this node is Secondary now; reconnecting)" : "");
    return -1;
  }
  if (primary_id >= 0 && primary_id != (int) p->pr_cfg->nc_id &&
      primary_id != (int) node->n_self->nc_id) {
    struct peer *q = node_find_peer (node, primary_id);
    const char *other = q ? q->pr_cfg->nc_name : "?";

    if (q != NULL && drop_earlier_primary (node, c, primary_id))
      return 0;
    snprintf (err, errlen, "refusing connection: the peer says it is "
              "Primary, but this node is connected to Primary %s; only "
              "one node may be primary", other);
    return -1;
  }
  return 0;
}

/* A client opens while role=primary is not yet confirmed: wait for the
 * decision (bounded by the deadline and a second). */
void
role_start_wait (struct repl_node *node)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&node->n_lock);
  while (node->n_start_pending && !node->n_stopping) {
    struct timespec ts;
    uint64_t until = node->n_start_deadline_ns + UINT64_C (1000000000);

    if (now_ns () >= until)
      break;
    ts.tv_sec = until / 1000000000;
    ts.tv_nsec = until % 1000000000;
    pthread_cond_timedwait (&node->n_cond, &node->n_lock, &ts);
  }
}

/* What role_tell_state read, and whether it counts as a STATE saying
 * Primary to a diskless node (two-primaries.c). */
struct told_state {
  uint64_t ts_seq;
  bool ts_primary_to_diskless;
};

/* A STATE is queued only if no STATE read later is queued already on c
 * (n_state_seq, node_state_changed): two threads telling the same peer
 * may read in one order and reach the queue in the other, and the peer
 * must end with the newer.  pr_lock held (conn_send_wait_if). */
static bool
admit_state (struct conn *c, void *arg)
{
  const struct told_state *ts = arg;

  if (ts->ts_seq < c->c_state_seq) {
    log_debug ("peer %s: a STATE read before the one last sent is not "
               "sent", c->c_peer->pr_cfg->nc_name);
    return false;
  }
  c->c_state_seq = ts->ts_seq;
  if (ts->ts_primary_to_diskless) {
    c->c_tp_primary_states++;
    node_state_changed (c->c_peer->pr_node);  /* tp_routed_mask */
  }
  return true;
}

/* Test hook (tests/test-state-order.sh): NBDREPL_TEST_WORKER_STATE_
 * DELAY_MS=N makes the worker wait N ms between reading our state and
 * queueing its STATE, as a preempted thread may. */
static void
worker_state_delay (struct peer *p, enum repl_role role,
                    enum repl_disk_state disk)
{
  static const char env[] = "NBDREPL_TEST_WORKER_STATE_DELAY_MS";
  static long long ms = -1;

  if (getenv (env) == NULL ||
      !pthread_equal (pthread_self (), p->pr_node->n_worker))
    return;
  log_info ("%s: the worker holds its STATE (%s, %s) to %s", env,
            role_name (role), disk_state_name (disk), p->pr_cfg->nc_name);
  test_hook_sleep (env, &ms);
  log_info ("%s: the worker's STATE (%s, %s) to %s goes on", env,
            role_name (role), disk_state_name (disk), p->pr_cfg->nc_name);
}

/* Tell one peer our role and disk state (if connected). */
void
role_tell_state (struct peer *p)
{
  struct repl_node *node = p->pr_node;
  struct told_state ts = { .ts_seq = node_state_seq (node) };
  enum repl_role role;
  enum repl_disk_state disk;
  struct out_msg om;
  struct conn *c;
  uint16_t flags;
  uint32_t routed = 0, follows, via;

  pthread_mutex_lock (&node->n_lock);
  role = node->n_role;
  disk = node->n_disk;
  follows = dl_follows_for_locked (node, p);
  via = dl_via_mask_locked (node);
  pthread_mutex_unlock (&node->n_lock);
  pthread_mutex_lock (&p->pr_lock);
  flags = p->pr_pause_user ? REPL_FLAG_SYNC_PAUSED : 0;
  pthread_mutex_unlock (&p->pr_lock);
  if ((c = peer_conn_get (p)) == NULL)
    return;
  /* allow-two-primaries beside diskless nodes (two-primaries.c): a
   * STATE saying Primary to a diskless peer is counted for its ROUTED
   * (a diskless node counts what it takes); a storage peer learns which
   * diskless nodes write through us; as Secondary, a diskless peer
   * learns which storage Primaries we follow. */
  if (tp_routes_diskless (node)) {
    if (role == REPL_ROLE_PRIMARY && p->pr_cfg->nc_diskless)
      ts.ts_primary_to_diskless = true;
    else if (role == REPL_ROLE_PRIMARY)
      routed = tp_routed_mask (node);
    else if (p->pr_cfg->nc_diskless)
      routed = follows;
  }
  /* A diskless Primary: where its writes go (diskless-primaries.c); a
   * STATE saying it promotes is counted for the diskless peer's
   * ROUTED. */
  if (node->n_diskless && node->n_cfg.cf_two_primaries) {
    routed = via;
    ts.ts_primary_to_diskless = p->pr_cfg->nc_diskless &&
                                dl_via_deciding (via, node->n_self->nc_id);
  }
  worker_state_delay (p, role, disk);
  out_msg_init (&om, REPL_MSG_STATE, flags, routed, disk, role, NULL, 0);
  conn_send_wait_if (c, &om, admit_state, &ts);
  conn_put (c);
}

/* Tell the connected peers, diskless ones or storage ones, our role
 * and disk state. */
static void
tell_peers (struct repl_node *node, bool diskless)
{
  size_t i;

  for (i = 0; i < PEERS (node)->pl_n; i++)
    if (PEERS (node)->pl_peers[i]->pr_cfg->nc_diskless == diskless)
      role_tell_state (PEERS (node)->pl_peers[i]);
}

/* Tell every connected peer our role and disk state.  A storage node
 * with allow-two-primaries beside diskless nodes (two-primaries.c): as
 * Primary, the diskless nodes were told first (tp_take_routes); as
 * Secondary, the storage nodes first, which a diskless Primary then
 * writes to directly. */
static void
announce_state (struct repl_node *node)
{
  tell_peers (node, false);
  if (!tp_routes_diskless (node) || node_role (node) != REPL_ROLE_PRIMARY)
    tell_peers (node, true);
}

static int
promote (struct repl_node *node, bool force, char *err, size_t errlen)
{
  struct promote_case c = { .pc_force = force,
                            .pc_diskless = node->n_diskless };
  const char *primary = NULL;
  enum repl_disk_state disk;
  size_t i;

  /* The facts: the rules are common/decide.c's. */
  for (i = 0; i < PEERS (node)->pl_n; i++) {
    struct peer *p = PEERS (node)->pl_peers[i];
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&p->pr_lock);
    struct conn *conn = peer_conn_locked (p);

    if (conn == NULL)
      continue;
    if (conn->c_role == REPL_ROLE_PRIMARY) {
      c.pc_peers_primary = primary != NULL;
      primary = p->pr_cfg->nc_name;
      c.pc_peer_primary_diskless = conn->c_peer_diskless;
    }
    if (!conn->c_peer_diskless && p->pr_disk == REPL_DISK_UPTODATE)
      c.pc_storage_uptodate = true;
  }
  c.pc_peer_primary = primary != NULL;
  c.pc_two_primaries = node->n_cfg.cf_two_primaries;
  c.pc_has_diskless = node->n_cfg.cf_has_diskless;
  c.pc_quorum = node_has_quorum (node);
  pthread_mutex_lock (&node->n_lock);
  disk = c.pc_disk = node->n_disk;
  pthread_mutex_unlock (&node->n_lock);

  switch (decide_promote (&c)) {
  case PROMOTE_REFUSE_PEER_PRIMARY:
    if (node->n_cfg.cf_two_primaries && c.pc_peers_primary)
      snprintf (err, errlen, "two peers are Primary already (%s and "
                "another); allow-two-primaries allows two", primary);
    else if (node->n_cfg.cf_two_primaries && node->n_cfg.cf_has_diskless)
      snprintf (err, errlen, "peer %s is Primary; with diskless nodes "
                "(allow-two-primaries) the second Primary must be %s, "
                "with an UpToDate disk if it has one, and cannot be "
                "forced", primary, c.pc_peer_primary_diskless
                ? "a storage node" : "a diskless node");
    else if (node->n_cfg.cf_two_primaries)
      snprintf (err, errlen, "peer %s is Primary; a second Primary "
                "(allow-two-primaries) must have an UpToDate disk and "
                "cannot be forced", primary);
    else
      snprintf (err, errlen, "peer %s is Primary; demote it first "
                "(replctl secondary on it), or set allow-two-primaries: "
                "true on both nodes", primary);
    return -1;
  case PROMOTE_REFUSE_NO_QUORUM:
    snprintf (err, errlen, "no quorum: too few nodes are connected "
              "(quorum: %s)", node->n_cfg.cf_quorum == REPL_QUORUM_ALL
              ? "all" : "majority");
    return -1;
  case PROMOTE_REFUSE_NO_STORAGE:
    snprintf (err, errlen, "this node is diskless and no UpToDate "
              "storage node is connected");
    return -1;
  case PROMOTE_REFUSE_DISK:
    snprintf (err, errlen, "the disk is %s, not UpToDate; --force declares "
              "its data authoritative (a new generation, and every peer "
              "gets a full sync)", disk_state_name (disk));
    return -1;
  case PROMOTE:
  case PROMOTE_FORCED:
    break;
  }
  if (node->n_diskless) {
    pthread_mutex_lock (&node->n_lock);
    node_set_role_locked (node, REPL_ROLE_PRIMARY);
    dl_start_deciding_locked (node);
    node->n_role_unannounced = true;
    pthread_mutex_unlock (&node->n_lock);
    log_info ("node %s: now Primary (diskless)%s", node->n_self->nc_name,
              force ? " (forced)" : "");
    return 0;
  }
  if (disk != REPL_DISK_UPTODATE) {
    log_error ("node %s: FORCED to Primary with a disk that is %s: its "
               "data is now authoritative", node->n_self->nc_name,
               disk_state_name (disk));
    if (gen_force_primary (node) == -1) {
      snprintf (err, errlen, "cannot write the metadata");
      return -1;
    }
    for (i = 0; i < PEERS (node)->pl_n; i++) {
      struct peer *p = PEERS (node)->pl_peers[i];
      pthread_mutex_lock (&p->pr_lock);
      bitmap_set_all (&p->pr_bitmap);
      /* Connected peers resync from the new generation at once. */
      peer_fail_current_locked (p, "forced Primary; reconnecting for a "
                                "full sync");
      pthread_mutex_unlock (&p->pr_lock);
    }
  }
  if (meta_note_primary (node) == -1) {
    snprintf (err, errlen, "cannot write the metadata");
    return -1;
  }
  node_set_disk (node, REPL_DISK_UPTODATE);
  pthread_mutex_lock (&node->n_lock);
  node_set_role_locked (node, REPL_ROLE_PRIMARY);
  node->n_role_unannounced = true;
  pthread_mutex_unlock (&node->n_lock);
  log_info ("node %s: now Primary%s", node->n_self->nc_name,
            force ? " (forced)" : "");
  /* A new generation at once if a peer is away (not lazily at the first
   * write): a node that was Primary before and comes back, perhaps after
   * being frozen, is then never taken for a peer in the same generation
   * (it is behind, or a split brain). */
  atomic_store (&node->n_gen_pending, true);
  /* A connected peer whose disk is not UpToDate: reconnect, so that the
   * decision is made again with this node as Primary, its source (a
   * diskless peer has nothing to resync, and may be Primary beside us:
   * allow-two-primaries). */
  for (i = 0; i < PEERS (node)->pl_n; i++) {
    struct peer *p = PEERS (node)->pl_peers[i];

    pthread_mutex_lock (&p->pr_lock);
    if (p->pr_disk != REPL_DISK_UPTODATE && !p->pr_cfg->nc_diskless)
      peer_fail_current_locked (p, "peer is %s and this node is now "
                                "Primary; reconnecting to resync it",
                                disk_state_name (p->pr_disk));
    pthread_mutex_unlock (&p->pr_lock);
  }
  return 0;
}

static int
demote (struct repl_node *node, char *err, size_t errlen)
{
  uint64_t clients = atomic_load (&node->n_clients);

  if (clients > 0) {
    snprintf (err, errlen, "%" PRIu64 " NBD client connection(s) are "
              "open; disconnect them first", clients);
    return -1;
  }
  if (atomic_load (&node->n_requests_in_flight) > 0) {
    snprintf (err, errlen, "requests are in flight");
    return -1;
  }
  if ((!node->n_diskless && volume_flush (&node->n_vol) == -1) ||
      meta_set_flags (node, 0, MD_FLAG_PRIMARY) == -1) {
    snprintf (err, errlen, "cannot flush the disk or write the metadata");
    return -1;
  }
  pthread_mutex_lock (&node->n_lock);
  node_set_role_locked (node, REPL_ROLE_SECONDARY);
  pthread_mutex_unlock (&node->n_lock);
  log_info ("node %s: now Secondary", node->n_self->nc_name);
  /* Two primaries: the other one is this node's primary now. */
  if (node->n_cfg.cf_two_primaries) {
    size_t i;

    for (i = 0; i < PEERS (node)->pl_n; i++) {
      struct peer *p = PEERS (node)->pl_peers[i];
      struct conn *c;
      bool primary;

      pthread_mutex_lock (&p->pr_lock);
      c = peer_conn_locked (p);
      primary = c != NULL && c->c_role == REPL_ROLE_PRIMARY;
      pthread_mutex_unlock (&p->pr_lock);
      if (primary) {
        pthread_mutex_lock (&node->n_lock);
        node_peer_role_locked (node, p, true);
        pthread_mutex_unlock (&node->n_lock);
      }
    }
  }
  return 0;
}

/* After a role change, with n_role_lock released (telling the peers
 * waits on the network): the peers learn the new role, and the
 * role-change handler runs. */
int
role_changed (struct repl_node *node, char *err, size_t errlen)
{
  int r = 0;

  /* Beside diskless nodes (allow-two-primaries) a new storage Primary
   * takes their writes first, or is Secondary again (two-primaries.c). */
  if (node_role (node) == REPL_ROLE_PRIMARY && tp_routes_diskless (node) &&
      tp_take_routes (node, err, errlen) == -1) {
    tp_undo_promotion (node, err);
    r = -1;
  }
  /* A new diskless Primary beside other diskless nodes decides whom
   * it writes through first, or is Secondary again (diskless-
   * primaries.c). */
  if (node_role (node) == REPL_ROLE_PRIMARY && dl_decides (node) &&
      dl_take_routes (node, err, errlen) == -1) {
    tp_undo_promotion (node, err);
    r = -1;
  }
  /* A new Primary starts a new generation at once if a peer is away,
   * not lazily at its first write (gen_before_write, unless a write came
   * first): an earlier Primary that comes back, perhaps after being
   * frozen, is then never taken for a peer in the same generation. */
  if (node_role (node) == REPL_ROLE_PRIMARY && !node->n_diskless)
    gen_before_write (node);
  announce_state (node);
  /* Every connected peer has our STATE ahead of our first write: a
   * client that opened while the one that promoted us was still here
   * writes only now. */
  pthread_mutex_lock (&node->n_lock);
  node->n_role_unannounced = false;
  pthread_cond_broadcast (&node->n_cond);
  pthread_mutex_unlock (&node->n_lock);
  handler_run (node, REPL_HANDLER_ROLE_CHANGE, NULL);
  return r;
}

/* auto-promote (DRBD 9's default): the first client open of a secondary
 * that is UpToDate, with no connected peer primary, promotes it; when the
 * last client closes it is demoted again.  If the conditions do not
 * hold nothing happens, and the open is refused as on any secondary.
 * n_role_lock held; returns true if the role changed (the caller calls
 * role_changed once it has released the lock). */
bool
role_auto_promote_locked (struct repl_node *node)
{
  enum repl_disk_state disk;
  char err[256];

  ASSERT_LOCKED (&node->n_role_lock);
  pthread_mutex_lock (&node->n_lock);
  disk = node->n_disk;
  pthread_mutex_unlock (&node->n_lock);
  if (disk != REPL_DISK_UPTODATE && disk != REPL_DISK_DISKLESS)
    return false;
  if (promote (node, false, err, sizeof err) == 0) {
    node->n_auto_promoted = true;
    log_info ("node %s: auto-promoted by a client", node->n_self->nc_name);
    return true;
  }
  log_info ("node %s: not auto-promoted: %s", node->n_self->nc_name, err);
  return false;
}

/* Likewise for the demotion after the last client. */
bool
role_auto_demote_locked (struct repl_node *node)
{
  char err[256];

  ASSERT_LOCKED (&node->n_role_lock);
  node->n_auto_promoted = false;
  if (demote (node, err, sizeof err) == -1) {
    log_error ("node %s: auto-demote after the last client: %s",
               node->n_self->nc_name, err);
    return false;
  }
  return true;
}

/* `replctl primary [--force]` / `replctl secondary`. */
int
engine_set_role (struct repl_node *node, bool primary, bool force,
                 char *err, size_t errlen)
{
  enum repl_role role = primary ? REPL_ROLE_PRIMARY : REPL_ROLE_SECONDARY;
  bool changed = false;
  int r;

  pthread_mutex_lock (&node->n_role_lock);
  if (node_role (node) == role) {
    r = 0;
    /* role=primary still waiting for its peers: --force ends the wait
     * (a connected Primary peer would have made it Secondary). */
    if (primary && force)
      confirm_start (node, "replctl primary --force");
  }
  else {
    r = role == REPL_ROLE_PRIMARY ? promote (node, force, err, errlen)
                                  : demote (node, err, errlen);
    changed = r == 0;
  }
  /* An explicit role is the operator's: no auto-demote later. */
  if (r == 0)
    node->n_auto_promoted = false;
  pthread_mutex_unlock (&node->n_role_lock);
  if (changed && role_changed (node, err, errlen) == -1)
    r = -1;
  return r;
}

/* A peer's STATE message: its role (offset) and disk state (seq).
 * Returns 0, or -1 once the connection has failed (reported). */
int
role_handle_state (struct conn *c, const struct repl_hdr *h)
{
  struct peer *p = c->c_peer;
  struct repl_node *node = p->pr_node;
  char err[256];
  bool demoted, was_primary;

  if (h->offset > REPL_ROLE_MAX || h->seq > REPL_DISK_STATE_MAX) {
    conn_fail (c, "protocol error: STATE with role %" PRIu64
               " and disk state %" PRIu64, h->offset, h->seq);
    return -1;
  }
  /* count (allow-two-primaries): from a storage Primary to a storage
   * node the diskless nodes that write through it; from a storage
   * Secondary to a diskless node the Primaries it follows; from a
   * diskless node where its writes go (dl_check_via). */
  if (c->c_peer_diskless && node->n_cfg.cf_two_primaries) {
    if (dl_check_via (node, c, h->offset, h->count, err, sizeof err) == -1) {
      conn_fail (c, "%s", err);
      return -1;
    }
  }
  else if (h->count != 0 &&
      (c->c_peer_diskless || !node->n_cfg.cf_two_primaries ||
       (h->offset == REPL_ROLE_PRIMARY) == node->n_diskless)) {
    conn_fail (c, "protocol error: STATE (role %s) from a %s node with "
               "node mask 0x%" PRIx32, role_name (h->offset),
               c->c_peer_diskless ? "diskless" : "storage", h->count);
    return -1;
  }
  if (node->n_diskless && !c->c_peer_diskless &&
      node->n_cfg.cf_two_primaries)
    diskless_peer_follows (node, c, h->offset == REPL_ROLE_PRIMARY
                                    ? 0 : h->count);
  if (role_check_peer_role (node, c, h->offset, err, sizeof err) == -1) {
    conn_fail (c, "the peer became Primary: %s", err);
    return -1;
  }
  /* A storage peer that becomes Primary beside a diskless one (its
   * STATE names the diskless nodes that write through it). */
  pthread_mutex_lock (&p->pr_lock);
  was_primary = c->c_role == REPL_ROLE_PRIMARY;
  pthread_mutex_unlock (&p->pr_lock);
  if (h->offset == REPL_ROLE_PRIMARY && !was_primary &&
      tp_check_routed (node, c, h->count, err, sizeof err) == -1) {
    conn_fail (c, "the peer became Primary: %s", err);
    return -1;
  }
  pthread_mutex_lock (&p->pr_lock);
  if (c->c_role != h->offset)
    events_connection (p, "role:%s", role_name (h->offset));
  /* A diskless node answers a storage node's every STATE saying
   * Primary with ROUTED (diskless_route_update, two-primaries.c). */
  if (node->n_diskless && !c->c_peer_diskless &&
      h->offset == REPL_ROLE_PRIMARY)
    c->c_tp_primary_states++;
  demoted = c->c_role == REPL_ROLE_PRIMARY && h->offset != REPL_ROLE_PRIMARY;
  c->c_role = h->offset;
  /* allow-two-primaries: a resync or verify held back while it was
   * Primary may start (resync.c). */
  pthread_cond_signal (&p->pr_resync_cond);
  peer_set_disk_locked (p, true, h->seq);
  if (p->pr_pause_peer != ((h->flags & REPL_FLAG_SYNC_PAUSED) != 0)) {
    p->pr_pause_peer = (h->flags & REPL_FLAG_SYNC_PAUSED) != 0;
    log_info ("peer %s: its administrator %s the resync between us",
              p->pr_cfg->nc_name, p->pr_pause_peer ? "paused" : "resumed");
    peer_update_pause_locked (p);
  }
  pthread_mutex_unlock (&p->pr_lock);
  pthread_mutex_lock (&node->n_lock);
  node_peer_role_locked (node, p, h->offset == REPL_ROLE_PRIMARY);
  if (c->c_peer_diskless)
    dl_note_writer_locked (node, p, h->offset == REPL_ROLE_PRIMARY &&
                                    h->count == 0);
  pthread_mutex_unlock (&node->n_lock);
  log_info ("peer %s: now %s, %s", p->pr_cfg->nc_name,
            role_name (h->offset), disk_state_name (h->seq));
  /* A diskless peer promoting asks us what we are (diskless-
   * primaries.c). */
  dl_answer_promoting (c, h->offset, h->count, false);
  /* A new Primary's UUIDs came before its role (role_changed), when we
   * did not follow them yet: an in-sync secondary follows it into its
   * generation now. */
  if (h->offset == REPL_ROLE_PRIMARY && sync_follow_primary (c) == -1) {
    conn_fail (c, "cannot write metadata");
    return -1;
  }
  /* A new Primary, or a secondary that became UpToDate: our marks for
   * the Primary's other copies may be moot now. */
  if (h->offset == REPL_ROLE_PRIMARY || h->seq == REPL_DISK_UPTODATE)
    worker_post (node, WORK_DROP_MARKS);
  /* A diskless Primary that demotes leaves us with none to follow: a
   * storage peer ahead of us outdates us now (check_newer_peer waited
   * for it). */
  if (demoted && c->c_peer_diskless)
    sync_check_newer_peers (node, p);
  /* A diskless node takes a storage node's generation, and counts it as
   * a target, only while it is UpToDate: its UUIDS (at the end of a
   * resync) comes before the STATE that says so. */
  if (node->n_diskless && !c->c_peer_diskless &&
      h->seq == REPL_DISK_UPTODATE)
    diskless_peer_state (node, c);
  /* A storage node became Primary, or no longer is, or a diskless
   * Primary changed where its writes go: where ours go (allow-two-
   * primaries). */
  if (node->n_diskless)
    diskless_route_update (node, h->offset == REPL_ROLE_PRIMARY &&
                                 !c->c_peer_diskless ? c : NULL);
  return 0;
}
