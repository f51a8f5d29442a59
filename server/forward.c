/* nbdrepl: a storage node serving a diskless primary.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * A diskless primary (diskless.c) writes to every storage node that is
 * UpToDate in its generation, directly.  Before writes that some storage
 * nodes will not get from it, it sends AWAY with the mask of their ids.
 * For each write that follows, a storage node then
 *
 *  - forwards it to every away node it is connected to itself (the node
 *    is being resynced by us, or lost only its link to the primary),
 *    under our interval lock, so that it is ordered with the resync data
 *    we send that node, and acknowledges it only once that node has;
 *  - marks it out of sync for every away node it is not connected to,
 *    so that the node gets it by resync when it returns.
 *
 * The same AWAY may carry a new current UUID, which every storage node
 * adopts together (gen_start_for_away).  OUT_OF_SYNC names ranges that
 * were in flight to a node when it was lost; READ_REQ is a read.
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "byte-order.h"
#include "cleanup.h"
#include "internal.h"
#include "log.h"

/* May p send us data messages (writes, resync data)?  Our primary may;
 * with no primary, or a diskless one, so may a storage secondary: it
 * resyncs us, or forwards the diskless primary's writes to us. */
bool
forward_may_feed_us (struct conn *c)
{
  struct peer *p = c->c_peer;
  struct repl_node *node = p->pr_node;

  if (node->n_diskless)
    return false;
  /* allow-two-primaries: the other Primary's writes too
   * (two-primaries.c orders them with ours), even before its STATE says
   * it is Primary: a node that was just promoted tells us so once it is
   * (role_changed), and a client may write on it meanwhile.  Beside
   * diskless nodes the other Primary is a diskless one, which writes
   * through us (two-primaries.c), and a storage peer sends us no writes
   * while we are Primary. */
  if (node_role (node) == REPL_ROLE_PRIMARY) {
    if (!node->n_cfg.cf_two_primaries)
      return false;
    if (node->n_cfg.cf_has_diskless)
      return c->c_peer_diskless && c->c_role == REPL_ROLE_PRIMARY;
    return !c->c_peer_diskless;
  }
  /* A diskless Primary writes to us directly only while no storage
   * node is Primary (two-primaries.c). */
  if (c->c_role == REPL_ROLE_PRIMARY)
    return !tp_beside_storage_primary (c) && !dl_beside_writer (c);
  return !c->c_peer_diskless && node_primary_is_diskless_or_none (node);
}

static bool
in_mask (uint32_t mask, const struct peer *q)
{
  return (mask & (UINT32_C (1) << q->pr_cfg->nc_id)) != 0;
}

/* q (pr_lock held) is to be resynced from us: by the pass we run
 * already (another one), else through a reconnect, whose decision
 * (sync_on_connect) outdates it and fences it first: never by a pass
 * started on a connection whose decision was no sync. */
static void
resync_through_fence_locked (struct peer *q, const char *why)
{
  if (q->pr_state != CONN_CONNECTED)
    return;
  if (q->pr_repl == REPL_SYNC_SOURCE || q->pr_repl == REPL_PAUSED_SYNC_S ||
      q->pr_repl == REPL_WF_BITMAP_S) {
    q->pr_resync_wanted = true;
    pthread_cond_signal (&q->pr_resync_cond);
  }
  else if (q->pr_repl == REPL_ESTABLISHED)
    peer_fail_current_locked (q, "%s: reconnecting to resync it", why);
}

/* Mark [offset, offset + count) out of sync for q.  If q is connected
 * to us, it is to be resynced: by the pass we run already, else through
 * a reconnect, so that q leaves the diskless primary's targets first
 * (the sync fence, at the decision of sync_on_connect).  q may be one
 * again already (its link to the primary came back while we were still
 * connected to it); a resync started from here would race the primary's
 * writes to it.  While we are being resynced ourselves (the writes came
 * from our sync source), only once that ends: q decides again then
 * (sync_release_source), with us UpToDate.  A storage peer's
 * OUT_OF_SYNC marks under the interval lock of the range: a pass of
 * ours resyncing q reads and queues a chunk under it, so the chunk is
 * either in q's window now (its ACK would clear the mark: q reconnects)
 * or read after the write. */
static void
mark_for (struct peer *q, uint64_t offset, uint64_t count, const char *why)
{
  struct repl_node *node = q->pr_node;
  struct conn *c;
  bool uptodate;

  pthread_mutex_lock (&node->n_lock);
  uptodate = node->n_disk == REPL_DISK_UPTODATE;
  pthread_mutex_unlock (&node->n_lock);
  pthread_mutex_lock (&q->pr_lock);
  bitmap_set_range (&q->pr_bitmap, offset, count);
  c = q->pr_state == CONN_CONNECTED ? peer_conn_locked (q) : NULL;
  if (c != NULL && window_holds_resync_locked (c, offset, count))
    /* Our pass read the range before the write: its ACK would clear
     * the mark.  A failed connection's ACKs clear nothing. */
    peer_fail_current_locked (q, "%s, over resync data in flight to it: "
                              "reconnecting to resync it", why);
  else if (uptodate)
    resync_through_fence_locked (q, why);
  else if (c != NULL)
    q->pr_resync_deferred = true;
  pthread_mutex_unlock (&q->pr_lock);
}

/* We took data from storage peer p (a write it forwarded for a diskless
 * primary, or resync data) with no storage Primary: our data moved, and
 * a storage node not connected to us may lack it.  What we mark for it
 * is what our bitmap must say: it has to cover every chunk where our
 * data may differ from the node's since its bitmap UUID here, and our
 * generation may move on past that (at the end of a resync from p), so
 * that a later bitmap resync from us would miss those chunks.  p marks
 * them too, but only in memory until they reach its activity log's
 * next write-out: a crash of p loses them.  A node connected to us
 * gets its share from p, or from a resync decided at connect. */
void
forward_mark_unreached (struct conn *c, uint64_t offset, uint64_t count)
{
  struct peer *p = c->c_peer;
  struct repl_node *node = p->pr_node;
  size_t i;

  if (c->c_peer_diskless || !node_primary_is_diskless_or_none (node))
    return;
  for (i = 0; i < PEERS (node)->pl_n; i++) {
    struct peer *q = PEERS (node)->pl_peers[i];

    if (q == p || q->pr_cfg->nc_diskless)
      continue;
    pthread_mutex_lock (&q->pr_lock);
    if (q->pr_state != CONN_CONNECTED)
      bitmap_set_range (&q->pr_bitmap, offset, count);
    pthread_mutex_unlock (&q->pr_lock);
  }
}

/* A peer of ours without a storage Primary, src, is about to resync
 * us: every diskless node we are connected to stops writing to us
 * directly first (SYNC_FENCE), and answers (SYNC_FENCED) once none of
 * its writes to us is in flight.  A write that follows reaches us only
 * through a sync source, ordered with its resync data on its one
 * connection (forward_submit), so resync data never overwrites a
 * newer write that came straight from the primary.  We stop resyncing
 * others ourselves: out of a diskless primary's targets, we would send
 * them data it no longer writes to us.  Called by src's resync thread
 * (sync_fence_then_bitmap) before our bitmap goes out on sc, while
 * sc's receive loop runs: a diskless node's write to us that we
 * forward to src ends (and with it the wait for the answer) only once
 * src's ACK is read on sc; and src's forwards of the primary's writes
 * to us, which src acknowledges to the primary only once we do, are
 * read meanwhile.  The source reads no chunk before our bitmap.
 * Called with the peer list pinned (the resync thread's); the wait
 * lets go of the pin (peers.c), and what it keeps across it is by node
 * id, never from the list.  Returns 0, or -1 if a diskless node
 * refused or did not answer in time, or sc failed (the caller drops
 * the connection). */
static atomic_bool slow_fence_done;

/* Which of the diskless nodes in `sent` (our SYNC_FENCE's connections,
 * by node id) still hold that connection: the others write to us no
 * more (and owe no answer).  Pins the list for its walk. */
static uint32_t
fence_live (struct repl_node *node,
            struct conn *const sent[REPL_MAX_NODE_ID + 1])
{
  uint32_t live = 0;
  size_t i;
  PEERS_PIN_FOR_CURRENT_SCOPE (node);

  for (i = 0; i < PEERS (node)->pl_n; i++) {
    struct peer *q = PEERS (node)->pl_peers[i];
    struct conn *c = sent[q->pr_cfg->nc_id];

    if (!q->pr_cfg->nc_diskless || c == NULL)
      continue;
    pthread_mutex_lock (&q->pr_lock);
    if (!c->c_failed && peer_conn_locked (q) == c)
      live |= UINT32_C (1) << q->pr_cfg->nc_id;
    pthread_mutex_unlock (&q->pr_lock);
  }
  return live;
}

/* A diskless Primary refused the resync of us from sc's peer: it does
 * not write to that peer (they are cut off from each other, or it is
 * out of the Primary's generation).  That lasts until they reconnect,
 * so the connection that asks again (the caller reconnects) waits
 * connect-retry-max first, as a connection attempt would, or until sc
 * fails: else the two storage nodes reconnect and ask again many times
 * a second, each time with a line in every log. */
static void
refused_pause (struct conn *sc)
{
  struct peer *src = sc->c_peer;
  struct timespec ts = deadline_after_ns (
    src->pr_node->n_cfg.cf_connect_retry_max_ms * UINT64_C (1000000));
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&src->pr_lock);

  while (!sc->c_failed && !src->pr_stopping &&
         pthread_cond_timedwait (&src->pr_cond, &src->pr_lock,
                                 &ts) != ETIMEDOUT)
    ;
}

int
forward_fence (struct conn *sc)
{
  struct peer *src = sc->c_peer;
  struct repl_node *node = src->pr_node;
  struct conn *sent[REPL_MAX_NODE_ID + 1] = { NULL };   /* by node id */
  uint64_t token, deadline, least = 0;
  uint32_t wait = 0;
  bool refused = false, lost = false, held;
  const char *s;
  size_t i;

  /* Test hook (tests/test-diskless-race.sh): no fence at all, as before
   * it existed, to show that the test catches the race it closes. */
  if (getenv ("NBDREPL_TEST_NO_SYNC_FENCE") != NULL) {
    log_info ("peer %s: sync fence skipped (NBDREPL_TEST_NO_SYNC_FENCE)",
              src->pr_cfg->nc_name);
    return 0;
  }
  for (i = 0; i < PEERS (node)->pl_n; i++) {
    struct peer *q = PEERS (node)->pl_peers[i];

    if (q == src || q->pr_cfg->nc_diskless)
      continue;
    pthread_mutex_lock (&q->pr_lock);
    if (q->pr_repl == REPL_SYNC_SOURCE || q->pr_repl == REPL_PAUSED_SYNC_S ||
        q->pr_repl == REPL_WF_BITMAP_S)
      peer_fail_current_locked (q, "%s resyncs this node: it stops "
                                "resyncing others", src->pr_cfg->nc_name);
    pthread_mutex_unlock (&q->pr_lock);
  }

  pthread_mutex_lock (&node->n_lock);
  token = ++node->n_fence_token;
  node->n_fence_refused = false;
  for (i = 0; i < PEERS (node)->pl_n; i++)
    if (PEERS (node)->pl_peers[i]->pr_cfg->nc_diskless)
      wait |= UINT32_C (1) << PEERS (node)->pl_peers[i]->pr_cfg->nc_id;
  node->n_fence_wait = wait;
  pthread_mutex_unlock (&node->n_lock);

  for (i = 0; i < PEERS (node)->pl_n; i++) {
    struct peer *q = PEERS (node)->pl_peers[i];
    struct conn *c;

    if (!q->pr_cfg->nc_diskless)
      continue;
    pthread_mutex_lock (&q->pr_lock);
    if ((c = peer_conn_locked (q)) != NULL && !c->c_failed) {
      fence_queue_locked (c, REPL_MSG_SYNC_FENCE, 0, src->pr_cfg->nc_id,
                          token);
      sent[q->pr_cfg->nc_id] = conn_get (c);
    }
    pthread_mutex_unlock (&q->pr_lock);
  }

  /* Bounded: a diskless node owes the answer within its writes' own
   * timeout; one whose connection is gone writes to us no more.  Over
   * when the connection to src is (then a newer fence may run: its
   * token, and its wait, are no longer ours). */
  deadline = now_ns () + 2 * node->n_cfg.cf_timeout_ms * UINT64_C (1000000);
  /* Test hook (tests/test-diskless-3.sh): NBDREPL_TEST_SYNC_FENCE_MIN_MS
   * =N makes the first fence of the process last N ms at least (less
   * than the deadline), as if a diskless node's answer came that late:
   * longer than ping-timeout, nothing else may wait for it.  (Every
   * fence that long, with writes going on, and the resyncs of a node by
   * two sources in turn took longer than the test waits.) */
  if ((s = getenv ("NBDREPL_TEST_SYNC_FENCE_MIN_MS")) != NULL &&
      !atomic_exchange (&slow_fence_done, true))
    least = now_ns () + strtoull (s, NULL, 10) * UINT64_C (1000000);
  /* The wait may last (up to the deadline): no pin meanwhile. */
  held = peers_wait_begin (node);
  for (;;) {
    struct timespec ts;
    uint32_t live;
    uint64_t until;

    pthread_mutex_lock (&src->pr_lock);
    lost = sc->c_failed || peer_conn_locked (src) != sc;
    pthread_mutex_unlock (&src->pr_lock);
    if (lost)
      break;
    live = fence_live (node, sent);
    pthread_mutex_lock (&node->n_lock);
    if (node->n_fence_token != token) {     /* a newer fence runs */
      pthread_mutex_unlock (&node->n_lock);
      lost = true;
      break;
    }
    node->n_fence_wait &= live;
    wait = node->n_fence_wait;
    refused = node->n_fence_refused;
    if ((wait != 0 || now_ns () < least) && !refused &&
        now_ns () < deadline) {
      until = now_ns () + UINT64_C (100000000);
      ts.tv_sec = until / 1000000000;
      ts.tv_nsec = until % 1000000000;
      pthread_cond_timedwait (&node->n_cond, &node->n_lock, &ts);
    }
    pthread_mutex_unlock (&node->n_lock);
    if ((wait == 0 && now_ns () >= least) || refused ||
        now_ns () >= deadline)
      break;
  }
  peers_wait_end (node, held);
  for (i = 0; i <= REPL_MAX_NODE_ID; i++)
    if (sent[i] != NULL)
      conn_put (sent[i]);
  if (lost)
    return -1;                  /* the connection's loss is logged */
  if (refused || wait != 0) {
    log_info ("peer %s: its resync of this node waits: %s", 
              src->pr_cfg->nc_name, refused
              ? "the diskless primary does not write to it"
              : "a diskless node did not confirm the sync fence in time");
    if (refused)
      refused_pause (sc);
    return -1;
  }
  log_info ("peer %s: sync fence: no diskless node writes to this node "
            "directly now", src->pr_cfg->nc_name);
  return 0;
}

/* SYNC_FENCED from a diskless node: its answer to our last SYNC_FENCE
 * (an older one's is ignored). */
int
forward_handle_fenced (struct conn *c, const struct repl_hdr *h)
{
  struct peer *p = c->c_peer;
  struct repl_node *node = p->pr_node;
  uint32_t bit = UINT32_C (1) << p->pr_cfg->nc_id;

  if (node->n_diskless || !c->c_peer_diskless) {
    conn_fail (c, "protocol error: SYNC_FENCED from a peer that is not "
               "diskless");
    return -1;
  }
  pthread_mutex_lock (&node->n_lock);
  if (h->offset == node->n_fence_token && (node->n_fence_wait & bit)) {
    node->n_fence_wait &= ~bit;
    if (h->flags & REPL_FLAG_ERROR)
      node->n_fence_refused = true;
    pthread_cond_broadcast (&node->n_cond);
  }
  pthread_mutex_unlock (&node->n_lock);
  return 0;
}

int
forward_handle_away (struct conn *c, const struct repl_hdr *h,
                     const uint8_t *payload)
{
  struct peer *p = c->c_peer;
  struct repl_node *node = p->pr_node;
  uint64_t fresh = get_be64 (payload);
  uint32_t mask = h->offset;
  size_t i;

  if (!c->c_peer_diskless || c->c_role != REPL_ROLE_PRIMARY ||
      h->offset > UINT32_MAX) {
    conn_fail (c, "protocol error: AWAY 0x%" PRIx64 " from a peer "
               "that is not our diskless primary", h->offset);
    return -1;
  }
  /* allow-two-primaries: not while we follow a storage Primary, which
   * the diskless one writes through (two-primaries.c). */
  if (tp_beside_storage_primary (c) || dl_beside_writer (c)) {
    conn_fail (c, "AWAY from a diskless Primary while this node "
               "follows another Primary: it writes through that node "
               "(allow-two-primaries); reconnecting");
    return -1;
  }
  if (fresh != 0 && gen_start_for_away (node, mask, fresh) == -1) {
    conn_fail (c, "cannot write metadata");
    return -2;
  }
  pthread_mutex_lock (&p->pr_lock);
  c->c_away_mask = mask;
  pthread_mutex_unlock (&p->pr_lock);
  if (fresh == 0)
    return 0;
  /* The storage peers learn the generation: one we resync takes it at
   * the end (every write of it reached it through us). */
  worker_post (node, WORK_UUIDS);
  /* An away node connected to us is behind the new generation until we
   * have resynced it (what it lacks is in our bitmap, possibly nothing),
   * after which it takes the generation from us. */
  for (i = 0; i < PEERS (node)->pl_n; i++) {
    struct peer *q = PEERS (node)->pl_peers[i];

    if (q == p || q->pr_cfg->nc_diskless || !in_mask (mask, q))
      continue;
    pthread_mutex_lock (&q->pr_lock);
    resync_through_fence_locked (q, "away in the diskless primary's new "
                                 "generation");
    pthread_mutex_unlock (&q->pr_lock);
  }
  return 0;
}

/* Before applying message h from p: queue it to every connected away
 * node, mark it for the others.  A node that got it hears which ones we
 * marked (OUT_OF_SYNC after it, on the same connection): it marks them
 * too, for it may be connected to one of them, which would then lack
 * the write in the generation it shares with that node, and only our
 * bitmap would say so (lost with us if we never return).  fc gets the
 * copies queued (held connections); the caller waits for them
 * (forward_wait), then fc may go. */
void
forward_submit (struct conn *c, const struct repl_hdr *h,
                const uint8_t *payload, struct waiter *w,
                struct forward_copies *fc)
{
  struct peer *p = c->c_peer;
  struct repl_node *node = p->pr_node;
  bool data = h->type != REPL_MSG_FLUSH;
  uint32_t mask, marked = 0;
  int i, n;

  pthread_mutex_lock (&p->pr_lock);
  mask = c->c_away_mask;
  pthread_mutex_unlock (&p->pr_lock);
  fc->fc_n = 0;
  if (mask == 0)
    return;
  for (i = 0; i < (int) PEERS (node)->pl_n; i++) {
    struct peer *q = PEERS (node)->pl_peers[i];
    struct conn *qc;

    if (q == p || q->pr_cfg->nc_diskless || !in_mask (mask, q))
      continue;
    pthread_mutex_lock (&q->pr_lock);
    /* The connection the message goes on, held: sending it may fail
     * the connection at once (peer_conn_locked is NULL then). */
    qc = q->pr_state == CONN_CONNECTED ? peer_conn_locked (q) : NULL;
    if (qc != NULL)
      conn_get (qc);
    if (qc != NULL &&
        peer_submit_locked (q, h->type, h->flags & (REPL_FLAG_FUA |
                                                    REPL_FLAG_MAY_TRIM),
                            payload, data ? h->count : 0,
                            data ? h->offset : 0, w, false,
                            &fc->fc_msgs[fc->fc_n], NULL) == 1)
      fc->fc_to[fc->fc_n++] = qc;
    else {
      if (qc != NULL)
        conn_put (qc);
      if (data) {
        bitmap_set_range (&q->pr_bitmap, h->offset, h->count);
        marked |= UINT32_C (1) << q->pr_cfg->nc_id;
      }
    }
    pthread_mutex_unlock (&q->pr_lock);
  }
  if (marked == 0)
    return;
  put_be64 (fc->fc_marked, marked);
  for (i = 0, n = fc->fc_n; i < n; i++) {
    struct conn *qc = fc->fc_to[i];
    struct peer *q = qc->c_peer;

    pthread_mutex_lock (&q->pr_lock);
    if (!qc->c_failed && peer_conn_locked (q) == qc &&
        peer_submit_locked (q, REPL_MSG_OUT_OF_SYNC, 0, fc->fc_marked,
                            h->count, h->offset, w, false,
                            &fc->fc_msgs[fc->fc_n], NULL) == 1)
      fc->fc_to[fc->fc_n++] = conn_get (qc);
    pthread_mutex_unlock (&q->pr_lock);
  }
}

/* Wait for the copies of a message that came at received_ns
 * (forward_submit) to be acknowledged.  A node that has not answered by
 * half of net: timeout after that is given up (its connection fails;
 * its window marks the write for it, and the resync brings it), so that
 * we answer the diskless Primary before its own timeout gives us up: a
 * node that is slow to take what we forward (a resync target on a
 * loaded machine, a stalling disk) must not cost the Primary its live
 * node too.  The time runs from the write's arrival, not from here: the
 * writes that came with it waited here for the ones before.  Drops the
 * references. */
void
forward_wait (struct repl_node *node, struct waiter *w,
              struct forward_copies *fc, uint64_t offset,
              uint64_t received_ns)
{
  uint64_t half = node->n_cfg.cf_timeout_ms * UINT64_C (500000);
  int i;

  if (!waiter_wait_until (w, received_ns + half)) {
    for (i = 0; i < fc->fc_n; i++) {
      struct conn *qc = fc->fc_to[i];
      struct peer *q = qc->c_peer;
      ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&q->pr_lock);

      if (qc->c_acked_seq < fc->fc_msgs[i].om_seq)
        conn_fail_locked (qc, "a write forwarded for the diskless "
                          "Primary (offset %" PRIu64 ") not acknowledged "
                          "%.1f s after it came (half of timeout); giving "
                          "this node up, so that the Primary is answered "
                          "in time", offset,
                          (now_ns () - received_ns) / 1e9);
    }
    waiter_wait (w);
  }
  for (i = 0; i < fc->fc_n; i++)
    conn_put (fc->fc_to[i]);
}

/* OUT_OF_SYNC: from our diskless primary, the nodes a write to which
 * failed in flight; from a storage node that forwarded us a write
 * (forward_submit) or resynced us a chunk (resync.c), just before, the
 * nodes it has marked it for.
 * We mark it for them too, and resync those connected to us: they
 * share our generation and lack the write. */
int
forward_handle_out_of_sync (struct conn *c, const struct repl_hdr *h,
                            const uint8_t *payload)
{
  struct peer *p = c->c_peer;
  struct repl_node *node = p->pr_node;
  uint64_t mask = get_be64 (payload);
  struct ilock_range range;
  size_t i;

  if (mask > UINT32_MAX) {
    conn_fail (c, "protocol error: OUT_OF_SYNC for nodes 0x%" PRIx64,
               mask);
    return -1;
  }
  /* From a storage peer, after its write or resync data: it counts
   * only beside diskless nodes with no storage Primary (a resync
   * between secondaries would race the Primary's writes). */
  if (h->count == 0 || node->n_diskless ||
      (!c->c_peer_diskless && !node_primary_is_diskless_or_none (node)))
    return 0;
  /* (From our diskless primary a write that failed in flight, older
   * than any pass we run now; and beside a storage Primary its writes
   * hold ranges while they wait for the peers: no lock then.) */
  if (!c->c_peer_diskless)
    ilock_acquire (&node->n_ilock, &range, h->offset, h->count);
  for (i = 0; i < PEERS (node)->pl_n; i++) {
    struct peer *q = PEERS (node)->pl_peers[i];

    if (q == p || q->pr_cfg->nc_diskless || !in_mask (mask, q))
      continue;
    if (c->c_peer_diskless) {
      log_info ("peer %s: %" PRIu32 " bytes at offset %" PRIu64 " were "
                "in flight to it when the primary lost it: marked out of "
                "sync", q->pr_cfg->nc_name, h->count, h->offset);
      mark_for (q, h->offset, h->count, "chunks marked out of sync for it");
    }
    else {
      char why[128];

      snprintf (why, sizeof why, "writes that %s forwarded to this node "
                "did not reach it", p->pr_cfg->nc_name);
      mark_for (q, h->offset, h->count, why);
    }
  }
  if (!c->c_peer_diskless)
    ilock_release (&node->n_ilock, &range);
  return 0;
}

/* READ_REQ from our diskless primary: read and answer (READ_REPLY
 * carries the data, or flag ERROR).  Returns 0, or -1 if the connection
 * failed. */
int
forward_handle_read (struct conn *c, const struct repl_hdr *h)
{
  struct peer *p = c->c_peer;
  struct repl_node *node = p->pr_node;
  struct out_msg om;
  enum repl_disk_state disk;
  int r;

  if (node->n_diskless)         /* diskless-primaries.c */
    return dl_read_routed (c, h);
  pthread_mutex_lock (&node->n_lock);
  disk = node->n_disk;
  pthread_mutex_unlock (&node->n_lock);
  if (p->pr_read_buf == NULL) {
    p->pr_read_buf = malloc (REPL_MAX_PAYLOAD);
    if (p->pr_read_buf == NULL) {
      conn_fail (c, "malloc: %m");
      return -1;
    }
  }
  /* Only UpToDate data is served: a primary that asks a node that is
   * not gets an error and reads elsewhere. */
  r = disk == REPL_DISK_UPTODATE
      ? volume_pread (&node->n_vol, p->pr_read_buf, h->count, h->offset)
      : -1;
  if (r == 0) {
    /* Served here: counted like the reads of our own clients. */
    atomic_fetch_add (&node->n_reads, 1);
    atomic_fetch_add (&node->n_read_bytes, h->count);
    out_msg_init (&om, REPL_MSG_READ_REPLY, 0, h->count, h->seq, h->offset,
                  p->pr_read_buf, h->count);
  }
  else {
    log_error ("peer %s: read of %" PRIu32 " bytes at offset %" PRIu64
               " failed: %s", p->pr_cfg->nc_name, h->count, h->offset,
               disk == REPL_DISK_UPTODATE ? "disk error"
               : "our disk is not UpToDate");
    out_msg_init (&om, REPL_MSG_READ_REPLY, REPL_FLAG_ERROR, h->count,
                  h->seq, h->offset, NULL, 0);
  }
  return conn_send_wait (c, &om);
}
