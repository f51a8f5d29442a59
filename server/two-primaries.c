/* nbdrepl: two primaries (allow-two-primaries) — ordering their
 * concurrent writes.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * With two primaries both nodes write, and a write of one may cross a
 * write of the other to an overlapping range on the wire.  Both nodes
 * must apply each such pair in the same order.  The rules are
 * common/conflict.h's; here is what makes the facts they need true:
 *
 *  - A client write (write-path.c) holds its range in the interval lock
 *    from before its local write until every ACK is in, as always, and
 *    says so (ilock_acquire_local): its ticket to the other Primary,
 *    whether it is on our disk (ir_local_done) and whether its message
 *    is queued (ir_queued, set by the sender under pr_lock before it
 *    sends).  It writes locally first and queues after, so that neither
 *    mark ever waits for the network.
 *
 *  - A write of the other Primary (secondary.c, on the receive path,
 *    which takes the connection's messages one at a time in order)
 *    looks at the local writes it overlaps under pr_lock and il_lock
 *    together, so that each one's ticket is either queued or not, and
 *    each ACK of ours the peer sent before its write has been handled:
 *    "acked" is exact.  Its own range goes into the interval lock at
 *    once, over theirs: no client write to the range starts until it is
 *    applied.  It waits until the local writes it overlaps are on our
 *    disk and queued (whatever the rule says of them, so that the ACK
 *    below never overtakes one), then applies the parts the rule keeps.
 *
 *  - Its ACK is queued before its range is let go (tp_apply_end), not
 *    at the end of the batch: a client write that starts after it then
 *    reaches the peer after that ACK, which tells the peer that its
 *    write is the older one.
 *
 *  - The activity log: a peer write takes its extents before its range
 *    (as a local write does), and our own writes leave room in the log
 *    for one peer write (tp_al_reserve): what they hold is given back
 *    only once the peer ACKs them, so a peer write that waited for it
 *    would stop the reader that would read those ACKs — and the other
 *    node's reader likewise.
 *
 * Other held ranges (a resync or verify pass) are waited for as usual.
 * What a peer write waits for never waits for the network, except for a
 * full window (PEER_WINDOW messages unanswered), which the two nodes'
 * queue depths stay far below.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "conflict.h"
#include "internal.h"
#include "log.h"

/* Has the peer acknowledged local write r on c?  pr_lock held. */
static bool
acked_locked (const struct conn *c, const struct ilock_range *r)
{
  const struct peer_ticket *t = r->ir_ticket;

  ASSERT_LOCKED (&c->c_peer->pr_lock);
  return t != NULL && t->pt_conn == c && c->c_acked_seq >= t->pt_seq;
}

static bool
overlaps (const struct ilock_range *r, uint64_t start, uint64_t end)
{
  return start < r->ir_end && r->ir_start < end;
}

/* Look at the held ranges that [start, end) overlaps, but self (our
 * own range once held) and local writes that failed (nothing of them
 * is sent, and the peer write goes over whatever our disk holds there,
 * as it does on the peer): 1 if a range that is not a client write is
 * held there (wait for it), or too many are; else collect what the
 * rule drops and return 0.  pr_lock and il_lock held. */
static int
classify_locked (struct repl_node *node, struct conn *c,
                 const struct ilock_range *self, uint64_t start,
                 uint64_t end, struct conflict_range *drop, size_t *ndrop,
                 unsigned *nconflicts)
{
  const struct ilock_range *r;
  uint32_t ours = node->n_self->nc_id, theirs = c->c_peer->pr_cfg->nc_id;
  size_t n = 0;

  *nconflicts = 0;
  for (r = node->n_ilock.il_held; r; r = r->ir_next) {
    if (r == self || !overlaps (r, start, end) ||
        (r->ir_local && r->ir_failed))
      continue;
    if (!r->ir_local || n == TP_MAX_CONFLICTS)
      return 1;
    (*nconflicts)++;
    if (conflict_resolve (acked_locked (c, r), ours, theirs) ==
        CONFLICT_KEEP_LOCAL) {
      drop[n].cr_start = r->ir_start > start ? r->ir_start : start;
      drop[n].cr_end = r->ir_end < end ? r->ir_end : end;
      n++;
    }
  }
  *ndrop = n;
  return 0;
}

/* Are the client writes that [start, end) overlaps on our disk and
 * queued?  il_lock held. */
static bool
settled_locked (const struct interval_lock *il, const struct ilock_range *self,
                uint64_t start, uint64_t end)
{
  const struct ilock_range *r;

  for (r = il->il_held; r; r = r->ir_next)
    if (r != self && r->ir_local && overlaps (r, start, end) &&
        (!r->ir_local_done || !r->ir_queued))
      return false;
  return true;
}

static void
insert_locked (struct interval_lock *il, struct ilock_range *r)
{
  r->ir_prev = NULL;
  r->ir_next = il->il_held;
  if (il->il_held)
    il->il_held->ir_prev = r;
  il->il_held = r;
}

/* Before a WRITE, TRIM or ZERO of the other Primary (or of our primary:
 * with allow-two-primaries every peer write takes this path, so that a
 * promotion in the middle of the stream changes nothing) is applied:
 * take its range, decide what of it to apply (ta_pieces), and wait
 * until that may go.  Returns 0, or -1 once the connection has failed
 * (the range is not held then). */
int
tp_apply_begin (struct conn *c, const struct repl_hdr *h, struct tp_apply *ta)
{
  struct peer *p = c->c_peer;
  struct repl_node *node = p->pr_node;
  struct interval_lock *il = &node->n_ilock;
  struct conflict_range drop[TP_MAX_CONFLICTS];
  struct conflict_range parts[TP_MAX_CONFLICTS + 1];
  uint64_t start = h->offset, end = h->offset + h->count;
  size_t ndrop = 0, i;
  unsigned nconflicts = 0;
  ssize_t nparts;

  for (;;) {
    int busy;

    pthread_mutex_lock (&p->pr_lock);
    pthread_mutex_lock (&il->il_lock);
    busy = classify_locked (node, c, NULL, start, end, drop, &ndrop,
                            &nconflicts);
    if (!busy) {
      ta->ta_range.ir_start = start;
      ta->ta_range.ir_end = end;
      ta->ta_range.ir_local = false;
      ta->ta_range.ir_ticket = NULL;
      insert_locked (il, &ta->ta_range);
    }
    pthread_mutex_unlock (&p->pr_lock);
    if (!busy)
      break;
    /* A resync or verify range: wait for it to go, then look again
     * (pr_lock is not held across the wait). */
    il->il_waiters++;
    pthread_cond_wait (&il->il_cond, &il->il_lock);
    il->il_waiters--;
    pthread_mutex_unlock (&il->il_lock);
  }
  while (!settled_locked (il, &ta->ta_range, start, end)) {
    il->il_waiters++;
    pthread_cond_wait (&il->il_cond, &il->il_lock);
    il->il_waiters--;
  }
  pthread_mutex_unlock (&il->il_lock);
  /* Decided once they are settled: a local write whose disk write
   * failed meanwhile is not kept over the peer's (the higher id would
   * drop the peer's bytes and ACK them, while the peer keeps them).
   * The facts are those of the first look: no client write to the
   * range started since (ours is held), nothing else can come, and
   * the ACKs we have handled are the same (we are the reader). */
  pthread_mutex_lock (&p->pr_lock);
  pthread_mutex_lock (&il->il_lock);
  if (classify_locked (node, c, &ta->ta_range, start, end, drop, &ndrop,
                       &nconflicts) != 0)
    abort ();                   /* cannot happen: see above */
  pthread_mutex_unlock (&il->il_lock);
  pthread_mutex_unlock (&p->pr_lock);

  nparts = conflict_pieces (start, end, drop, ndrop, parts,
                            TP_MAX_CONFLICTS + 1);
  if (nparts < 0)               /* cannot happen: room for ndrop + 1 */
    abort ();
  ta->ta_npieces = nparts;
  for (i = 0; i < (size_t) nparts; i++) {
    ta->ta_pieces[i].start = parts[i].cr_start;
    ta->ta_pieces[i].end = parts[i].cr_end;
  }
  if (nconflicts > 0) {
    atomic_fetch_add (&node->n_tp_conflicts, 1);
    if (ndrop > 0)
      atomic_fetch_add (&node->n_tp_kept_local, 1);
  }
  if (nconflicts > 0)
    log_debug ("peer %s: concurrent writes: its %s of %" PRIu32 " bytes at "
               "offset %" PRIu64 " (sequence %" PRIu64 ") overlaps %u of "
               "ours; %s", p->pr_cfg->nc_name, wire_type_name (h->type),
               h->count, h->offset, h->seq, nconflicts,
               ndrop == 0 ? "applied after them"
               : nparts == 0 ? "ours are newer: none of it applied"
               : "ours are newer: applied where it does not overlap them");
  return 0;
}

/* The activity-log slots a local write leaves free (al_begin_reserve):
 * as many as one peer write of the largest size spans at any alignment,
 * but at most half of the log (*enough false then: a peer write may
 * still have to wait for room, node.c warns at start). */
uint32_t
tp_al_reserve (const struct repl_node *node, bool *enough)
{
  uint64_t extent = UINT64_C (1) << node->n_al.al_shift;
  uint32_t span = (REPL_MAX_PAYLOAD - 1) / extent + 2;
  uint32_t half = node->n_al.al_nslots / 2;

  if (enough)
    *enough = span <= half;
  return span <= half ? span : half;
}

/* A write of ours that missed the other node (its connection failed
 * before the write was queued or answered): it is answered only once
 * that connection is torn down.  The peer thread starts the new
 * generation of two primaries apart before that (peer.c), so the write
 * is never answered in the generation the two shared. */
void
tp_wait_lost (struct repl_node *node)
{
  size_t i;

  for (i = 0; i < PEERS (node)->pl_n; i++) {
    struct peer *p = PEERS (node)->pl_peers[i];
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&p->pr_lock);

    while (p->pr_state == CONN_DISCONNECTING && !p->pr_stopping)
      pthread_cond_wait (&p->pr_cond, &p->pr_lock);
  }
}

/* ---- With diskless nodes: one storage and one diskless Primary ----
 *
 * Two storage Primaries order their writes between themselves (above);
 * that works for two nodes only.  With diskless nodes the pair is one
 * storage node S and one diskless node D, and there is nothing to
 * resolve: D writes through S alone (diskless.c, its route), S takes
 * D's writes into its interval lock like its own clients' and forwards
 * them to the other storage nodes (forward.c, AWAY), in its one order,
 * on the same connections as its own writes.  Every storage node then
 * applies the overlapping writes of both in the order S did.  What has
 * to be right is the change between the two ways D writes:
 *
 *  - S becomes Primary while D is (or may become) Primary
 *    (tp_take_routes, from role_changed): S waits for the handshakes
 *    with diskless nodes that are under way, tells the diskless nodes
 *    first, and waits for each one's ROUTED: D then writes through S
 *    only, and none of its writes that went straight to another
 *    storage node is in flight.  Each STATE (or HELLO_STATE) saying
 *    Primary that S sends a diskless node is counted, and ROUTED names
 *    the count it answers, so an old answer is never taken for a new
 *    one.  If a diskless Primary's connection fails during that wait,
 *    or its ROUTED does not come within net: timeout, the promotion is
 *    undone
 *    (tp_undo_promotion): its direct writes may still be on their way
 *    to the others.  Only then does S start its generation, tell the
 *    storage nodes, and do its clients write (n_role_unannounced).
 *
 *  - Its STATE (and HELLO_STATE) to the storage nodes names the
 *    diskless nodes whose ROUTED it holds (a bit mask).  A storage node
 *    T that has a diskless Primary connected which is not named refuses
 *    S, at a STATE or a handshake (tp_check_routed): that one wrote to T
 *    directly and may go on,
 *    and T could not order those writes with S's.  (S promoted while
 *    cut off from D, which writes to T: the two sides become a split
 *    brain that the next connection reports, not a silent
 *    divergence.)
 *
 *  - S stops being Primary (demoted, or lost): D writes straight to
 *    every target again.  Its writes to a range never overlap in
 *    flight (its own interval lock), so one that went through S is
 *    applied everywhere before the next one to the range goes out.
 *    Each storage Secondary tells the diskless nodes which storage
 *    Primaries it follows (STATE count, role_tell_state), and D writes
 *    straight only once none of them follows one (dl_wait_unfollowed,
 *    bounded by a ping timeout and two ping intervals: by then a silent
 *    S has been noticed there too, as D noticed it); else the write
 *    fails: D cut off from a live S does not write beside it, and
 *    starts no generation that nobody takes.  A storage node that
 *    still follows S when a direct write comes anyway refuses it after
 *    the same kind of wait (tp_beside_storage_primary).
 *
 *  - D takes only a storage Primary in its generation for its route
 *    (diskless_route_update): one that was away while D wrote (frozen
 *    past ping-timeout, cut off) and comes back Primary missed D's
 *    writes, and its peers do not follow it; D drops the connection
 *    until it is demoted and resynced.
 *
 * DRBD resolves overlapping writes of two Primaries per connection,
 * between the two of them (drbd_receiver.c, handle_write_conflicts);
 * a diskless Primary has no copy to resolve anything on, and one order
 * made by one storage node serves every other storage node, however
 * many.  The cost is a second hop for the diskless Primary's writes
 * while a storage node is Primary beside it.  Two diskless Primaries
 * work alike, one writing through the other (diskless-primaries.c);
 * two storage ones beside diskless nodes are refused (tp_check_pair,
 * decide_promote). */

/* Is this a storage node that takes diskless Primaries' writes through
 * it when it is Primary (allow-two-primaries with diskless nodes)? */
bool
tp_routes_diskless (const struct repl_node *node)
{
  return !node->n_diskless && node->n_cfg.cf_two_primaries &&
         node->n_cfg.cf_has_diskless;
}

/* Peer p (on c) says it is Primary: with diskless nodes, allow it only
 * if the Primaries, with it, are at most one storage node and one
 * diskless node (this node, if it is Primary, and the peers connected
 * on connections that have not failed: a storage Primary in an older
 * generation that p replaces was dropped by role_check_peer_role).
 * Returns 0, or -1 with the reason in err. */
int
tp_check_pair (struct repl_node *node, struct conn *c, char *err,
               size_t errlen)
{
  struct peer *p = c->c_peer;
  const char *other = NULL;
  unsigned storage = 0, diskless = 0;
  size_t i;

  if (node_role (node) == REPL_ROLE_PRIMARY) {
    other = node->n_self->nc_name;
    if (node->n_diskless)
      diskless++;
    else
      storage++;
  }
  for (i = 0; i < PEERS (node)->pl_n; i++) {
    struct peer *q = PEERS (node)->pl_peers[i];
    struct conn *qc;

    if (q == p)
      continue;
    pthread_mutex_lock (&q->pr_lock);
    qc = peer_conn_locked (q);
    if (qc != NULL && !qc->c_failed && qc->c_role == REPL_ROLE_PRIMARY) {
      other = q->pr_cfg->nc_name;
      if (q->pr_cfg->nc_diskless)
        diskless++;
      else
        storage++;
    }
    pthread_mutex_unlock (&q->pr_lock);
  }
  if (p->pr_cfg->nc_diskless)
    diskless++;
  else
    storage++;
  if ((storage <= 1 && diskless <= 1) || (storage == 0 && diskless == 2))
    return 0;
  snprintf (err, errlen, "refusing connection: the peer says it is "
            "Primary, and %s is Primary; with diskless nodes, allow-two-"
            "primaries allows one storage Primary and one diskless Primary, "
            "or two diskless Primaries, at a time", other);
  return -1;
}

/* Storage peer S (on c) says in a STATE that it is Primary, and that the
 * diskless nodes in mask write through it.  A diskless Primary connected
 * here that is not in mask may write to us directly: refuse S (see
 * above).  Returns 0, or -1 with the reason in err. */
int
tp_check_routed (struct repl_node *node, struct conn *c, uint32_t mask,
                 char *err, size_t errlen)
{
  size_t i;

  if (!tp_routes_diskless (node) || c->c_peer_diskless)
    return 0;
  for (i = 0; i < PEERS (node)->pl_n; i++) {
    struct peer *q = PEERS (node)->pl_peers[i];
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&q->pr_lock);
    struct conn *qc = peer_conn_locked (q);

    if (!q->pr_cfg->nc_diskless || qc == NULL || qc->c_failed ||
        qc->c_role != REPL_ROLE_PRIMARY ||
        (mask & (UINT32_C (1) << q->pr_cfg->nc_id)) != 0)
      continue;
    snprintf (err, errlen, "refusing it: diskless Primary %s, connected "
              "here, does not write through it (allow-two-primaries): "
              "its writes to this node could not be ordered with the "
              "peer's (the peer was promoted without a connection to %s?)",
              q->pr_cfg->nc_name, q->pr_cfg->nc_name);
    return -1;
  }
  return 0;
}

/* The diskless nodes whose ROUTED this storage Primary holds for every
 * STATE saying Primary it sent them: the mask its STATE carries. */
uint32_t
tp_routed_mask (struct repl_node *node)
{
  uint32_t mask = 0;
  size_t i;

  for (i = 0; i < PEERS (node)->pl_n; i++) {
    struct peer *q = PEERS (node)->pl_peers[i];
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&q->pr_lock);
    struct conn *c = peer_conn_locked (q);

    if (q->pr_cfg->nc_diskless && c != NULL && !c->c_failed &&
        c->c_tp_primary_states > 0 &&
        c->c_tp_routed >= c->c_tp_primary_states)
      mask |= UINT32_C (1) << q->pr_cfg->nc_id;
  }
  return mask;
}

/* A new Primary (this storage node, or a diskless node that decides:
 * diskless-primaries.c) lets the handshakes with diskless peers under
 * way end first, bounded by deadline: each then hears the STATE it is
 * to answer. */
void
tp_wait_diskless_handshakes (struct repl_node *node, uint64_t deadline)
{
  struct timespec ts = deadline_at_ns (deadline);
  size_t i;

  for (i = 0; i < PEERS (node)->pl_n; i++) {
    struct peer *q = PEERS (node)->pl_peers[i];
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&q->pr_lock);

    while (q->pr_cfg->nc_diskless && q->pr_state == CONN_HANDSHAKE &&
           !q->pr_stopping && now_ns () < deadline)
      pthread_cond_timedwait (&q->pr_cond, &q->pr_lock, &ts);
  }
}

/* This storage node became Primary beside diskless nodes (role_changed,
 * before anything else is told of it): the handshakes with diskless
 * nodes under way end first, then each connected diskless node hears
 * our STATE and answers ROUTED (see above), all bounded by net:
 * timeout.  A diskless Secondary that does not answer is dropped.
 * Returns 0, or -1 with the reason in err if a diskless Primary was
 * lost or did not answer: the caller undoes the promotion. */
int
tp_take_routes (struct repl_node *node, char *err, size_t errlen)
{
  uint64_t deadline = now_ns () +
                      node->n_cfg.cf_timeout_ms * UINT64_C (1000000);
  struct timespec ts = deadline_at_ns (deadline);
  size_t i;

  tp_wait_diskless_handshakes (node, deadline);
  for (i = 0; i < PEERS (node)->pl_n; i++)
    if (PEERS (node)->pl_peers[i]->pr_cfg->nc_diskless)
      role_tell_state (PEERS (node)->pl_peers[i]);
  for (i = 0; i < PEERS (node)->pl_n; i++) {
    struct peer *q = PEERS (node)->pl_peers[i];
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&q->pr_lock);
    struct conn *c;
    uint64_t want;
    bool primary, routed;

    if (!q->pr_cfg->nc_diskless || (c = peer_conn_locked (q)) == NULL)
      continue;
    want = c->c_tp_primary_states;
    /* The wait lets go of pr_lock: c may fail and its peer thread drop
     * it meanwhile; our reference keeps it. */
    conn_get (c);
    while (c->c_tp_routed < want && !c->c_failed && now_ns () < deadline)
      pthread_cond_timedwait (&q->pr_cond, &q->pr_lock, &ts);
    routed = c->c_tp_routed >= want;
    primary = c->c_role == REPL_ROLE_PRIMARY;
    if (!routed && !c->c_failed)
      conn_fail_locked (c, "no ROUTED within net: timeout after we "
                        "became Primary (allow-two-primaries)");
    conn_put (c);
    if (routed) {
      log_info ("peer %s: writes through this node now",
                q->pr_cfg->nc_name);
      continue;
    }
    if (primary) {
      snprintf (err, errlen, "diskless Primary %s was lost, or did not "
                "answer, before it wrote through this node (allow-two-"
                "primaries): its direct writes to the other storage "
                "nodes may still be on their way; try again once it is "
                "connected", q->pr_cfg->nc_name);
      return -1;
    }
  }
  return 0;
}

/* The promotion that tp_take_routes failed for is undone: this node is
 * Secondary again (unless something else changed the role meanwhile);
 * role_changed tells the peers. */
void
tp_undo_promotion (struct repl_node *node, const char *why)
{
  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&node->n_role_lock);

    if (node_role (node) != REPL_ROLE_PRIMARY)
      return;
    if (meta_set_flags (node, 0, MD_FLAG_PRIMARY) == -1)
      log_error ("node %s: cannot write the metadata (role flag)",
                 node->n_self->nc_name);
    pthread_mutex_lock (&node->n_lock);
    node_set_role_locked (node, REPL_ROLE_SECONDARY);
    pthread_mutex_unlock (&node->n_lock);
    node->n_auto_promoted = false;
  }
  atomic_store (&node->n_gen_pending, false);
  log_error ("node %s: promotion undone, Secondary again: %s",
             node->n_self->nc_name, why);
}

/* ROUTED from a diskless node (see above).  Returns 0, or -1 once the
 * connection has failed. */
int
tp_handle_routed (struct conn *c, const struct repl_hdr *h)
{
  struct peer *p = c->c_peer;
  struct repl_node *node = p->pr_node;

  /* Between diskless nodes: the answer to our promotion. */
  if (node->n_diskless && c->c_peer_diskless &&
      node->n_cfg.cf_two_primaries)
    return dl_handle_routed (c, h);
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&p->pr_lock);
  if (node->n_diskless || !c->c_peer_diskless ||
      !node->n_cfg.cf_two_primaries || h->offset > c->c_tp_primary_states) {
    conn_fail_locked (c, "protocol error: ROUTED %" PRIu64 " from %s (we "
                      "sent %" PRIu64 " STATEs saying Primary)", h->offset,
                      c->c_peer_diskless ? "a diskless node"
                      : "a storage node", c->c_tp_primary_states);
    return -1;
  }
  if (h->offset > c->c_tp_routed) {
    c->c_tp_routed = h->offset;
    node_state_changed (node);  /* tp_routed_mask */
  }
  pthread_cond_broadcast (&p->pr_cond);
  return 0;
}

/* A data message (or AWAY) straight from diskless Primary c to this
 * storage Secondary: refused while we follow a storage Primary (see
 * above), after a bounded wait for its loss or demotion to reach us:
 * a ping timeout and a ping interval (nobody reads c meanwhile: its
 * reader forwards, c_rx_forwarding).  True: refuse. */
bool
tp_beside_storage_primary (struct conn *c)
{
  struct repl_node *node = c->c_peer->pr_node;
  bool following, refuse;

  if (!tp_routes_diskless (node) || !c->c_peer_diskless ||
      node_role (node) == REPL_ROLE_PRIMARY)
    return false;
  pthread_mutex_lock (&node->n_lock);
  following = node->n_primaries_storage != 0;
  pthread_mutex_unlock (&node->n_lock);
  if (!following)
    return false;
  refuse = conn_wait_storage_primary_gone (c);
  if (!refuse)
    log_info ("peer %s: writes to this node directly again, now that no "
              "storage node is Primary", c->c_peer->pr_cfg->nc_name);
  return refuse;
}

/* replctl verify, resync, invalidate-remote and resize start an
 * exchange (a resync, a verify, RESIZE) that only a Secondary takes:
 * while this node is Primary and the other storage node is Primary
 * beside it, the other would refuse it, end the connection, and that
 * is a split brain.  Returns -1 with the reason in err then, else 0. */
int
tp_refuse_beside_primary (struct repl_node *node, const char *what,
                          char *err, size_t errlen)
{
  size_t i;

  if (!node->n_cfg.cf_two_primaries || node_role (node) != REPL_ROLE_PRIMARY)
    return 0;
  for (i = 0; i < PEERS (node)->pl_n; i++) {
    struct peer *p = PEERS (node)->pl_peers[i];
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&p->pr_lock);
    struct conn *c = peer_conn_locked (p);

    if (c != NULL && c->c_role == REPL_ROLE_PRIMARY && !c->c_peer_diskless) {
      snprintf (err, errlen, "peer %s is Primary too (allow-two-primaries): "
                "%s runs only while one of the two is Secondary (replctl "
                "secondary on one of them first)", p->pr_cfg->nc_name, what);
      return -1;
    }
  }
  return 0;
}

/* After the peer write: with ack (it was applied), its ACK is queued
 * before the range goes.  Queued is enough (the queue is FIFO: a write
 * of ours to the range queued later reaches the peer after it), and the
 * reader never waits for a send (rx_queue_ack). */
void
tp_apply_end (struct conn *c, const struct rx_msg *m, struct tp_apply *ta,
              bool ack)
{
  struct repl_node *node = c->c_peer->pr_node;

  if (ack)
    rx_queue_ack (c, m->m_rx, m->m_hdr->seq);
  ilock_release (&node->n_ilock, &ta->ta_range);
}
