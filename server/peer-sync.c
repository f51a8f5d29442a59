/* nbdrepl: what a connection starts with — acting on the sync decision,
 * sending a sync target's bitmap to its source — and the generation
 * messages (UUIDS, BITMAP, BITMAP_DONE) that travel while connected.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * At connect both nodes make the same decision (generation.c).  The sync
 * target sends its bitmap for the source (what it knows it may lack: the
 * chunks of a resync it did not finish, and after a crash the extents of
 * its activity log); the source adds those bits to its own bitmap for
 * the target and only then resyncs (resync.c).
 */
#include <config.h>

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "decide.h"
#include "internal.h"
#include "log.h"

/* Sync target: send our bitmap for the source, then BITMAP_DONE. */
static int
send_bitmap (struct conn *c)
{
  struct peer *p = c->c_peer;
  uint64_t nwords, i;
  size_t bytes, off;
  uint64_t *words;
  struct out_msg om;

  /* The bitmap's length is pr_lock's too: a resize grows it (resize.c). */
  pthread_mutex_lock (&p->pr_lock);
  nwords = (p->pr_bitmap.bm_nbits + 63) / 64;
  bytes = nwords * 8;
  words = malloc (bytes ? bytes : 8);
  if (words == NULL) {
    pthread_mutex_unlock (&p->pr_lock);
    conn_fail (c, "malloc: %m");
    return -1;
  }
  for (i = 0; i < nwords; i++)
    words[i] = htole64 (p->pr_bitmap.bm_words[i]);
  pthread_mutex_unlock (&p->pr_lock);

  for (off = 0; off < bytes; off += REPL_MAX_PAYLOAD) {
    uint32_t n = bytes - off < REPL_MAX_PAYLOAD ? bytes - off
                                                : REPL_MAX_PAYLOAD;
    out_msg_init (&om, REPL_MSG_BITMAP, 0, 0, 0, off,
                  (const char *) words + off, n);
    if (conn_send_wait (c, &om) == -1) {
      free (words);
      return -1;
    }
  }
  free (words);
  out_msg_init (&om, REPL_MSG_BITMAP_DONE, 0, 0, 0, bytes, NULL, 0);
  return conn_send_wait (c, &om);
}

/* Sync target: WFBitMapT (unless the connection failed meanwhile),
 * then our bitmap (a failure ends the connection: reported there). */
static void
bitmap_to_source (struct conn *c)
{
  struct peer *p = c->c_peer;

  pthread_mutex_lock (&p->pr_lock);
  if (!c->c_failed)
    peer_set_repl_locked (p, REPL_WF_BITMAP_T);
  pthread_mutex_unlock (&p->pr_lock);
  send_bitmap (c);
}

/* Tell the peer of connection c our generation UUIDs as they are now
 * (our view of it).  Queued behind whatever c has queued already, and
 * ahead of what is queued after: the peer reads them in that order.
 * Returns 0 if sent, -1 if the connection failed. */
int
sync_send_uuids_on (struct conn *c)
{
  struct peer *p = c->c_peer;
  uint8_t buf[REPL_UUIDS_SIZE];
  struct gen_uuids u;
  struct repl_uuids w;
  struct out_msg om;

  gen_view (p->pr_node, p, &u);
  gen_to_wire (&u, &w);
  wire_encode_uuids (&w, buf);
  out_msg_init (&om, REPL_MSG_UUIDS, 0, 0, 0, 0, buf, sizeof buf);
  return conn_send_wait (c, &om);
}

/* Tell a connected peer our generation UUIDs (after they changed). */
void
sync_send_uuids (struct peer *p)
{
  struct conn *c;

  if ((c = peer_conn_get (p)) == NULL)
    return;
  sync_send_uuids_on (c);
  conn_put (c);
}

/* Two UpToDate secondaries of the same storage Primary, in the same
 * generation, are both the Primary's copy: what either marked for the
 * other (its activity log after a crash, writes in flight when a
 * primary was lost) was settled by the Primary's resync of each, and no
 * resync between them runs while there is a Primary (it would race the
 * Primary's writes).  Those marks are dropped, so that status shows
 * what is out of sync, not what once may have been.  Returns 0, or -1
 * if the bitmap cannot be written. */
int
drop_marks_between_secondaries (struct peer *p)
{
  struct repl_node *node = p->pr_node;
  uint64_t marked;

  if (node->n_diskless || p->pr_cfg->nc_diskless ||
      node_no_storage_primary (node))
    return 0;
  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&node->n_lock);
    if (node->n_role == REPL_ROLE_PRIMARY || node->n_disk != REPL_DISK_UPTODATE)
      return 0;
  }
  pthread_mutex_lock (&p->pr_lock);
  marked = bitmap_dirty_bytes (&p->pr_bitmap);
  bitmap_clear_all (&p->pr_bitmap);
  pthread_mutex_unlock (&p->pr_lock);
  /* The generation the marks counted from goes too (else the next
   * connection would decide a bitmap resync again: rules 34/35). */
  if (gen_clear_bitmap (node, p) == -1)
    return -1;
  if (marked == 0)
    return 0;
  log_info ("peer %s: both are in sync with the Primary: dropping the %"
            PRIu64 " bytes marked out of sync for it", p->pr_cfg->nc_name,
            marked);
  return meta_write_peer_bitmap (node, p);
}

/* Did our HELLO_STATE on c say UpToDate?  (The c_hello_* fields are
 * written once, in the handshake.) */
static bool
announced_uptodate (const struct conn *c)
{
  return c->c_hello_disk == REPL_DISK_UPTODATE;
}

/* decide_pair_source for this connection, from what the two
 * HELLO_STATEs announced. */
static int
pair_source (const struct conn *c)
{
  const struct peer *p = c->c_peer;
  const struct repl_hello *h = &c->c_hello;
  bool we_up = announced_uptodate (c);
  bool lower = p->pr_node->n_self->nc_id < p->pr_cfg->nc_id;
  uint64_t ours = c->c_hello_changes > UINT32_MAX ? UINT32_MAX
                                                  : c->c_hello_changes;

  return decide_pair_source (we_up, h->disk_state == REPL_DISK_UPTODATE,
                             ours, h->uuids.changes, lower);
}

/* drop_marks_between_secondaries for q if it is, as far as we can tell,
 * a copy of our Primary too: a connected, Established, UpToDate
 * secondary in our generation.  Returns 0 or -1. */
int
drop_marks_if_copy (struct peer *q)
{
  struct repl_node *node = q->pr_node;
  struct gen_uuids ours;
  bool copy;

  if (node->n_diskless || q->pr_cfg->nc_diskless)
    return 0;
  gen_view (node, q, &ours);
  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&q->pr_lock);
    struct conn *c = peer_conn_locked (q);

    copy = c != NULL && q->pr_repl == REPL_ESTABLISHED &&
           c->c_role != REPL_ROLE_PRIMARY &&
           q->pr_disk == REPL_DISK_UPTODATE &&
           c->c_peer_uuids.gu_current == ours.gu_current &&
           bitmap_count (&q->pr_bitmap) > 0;
  }
  return copy ? drop_marks_between_secondaries (q) : 0;
}

/* This node learnt that a peer has newer data (or was told so: replctl
 * outdate): an UpToDate disk becomes Outdated, in the metadata too (a
 * restart keeps it). */
int
node_outdate (struct repl_node *node)
{
  enum repl_disk_state disk;

  pthread_mutex_lock (&node->n_lock);
  disk = node->n_disk;
  pthread_mutex_unlock (&node->n_lock);
  if (disk != REPL_DISK_UPTODATE)
    return 0;
  if (meta_set_flags (node, 0, MD_FLAG_WAS_UPTODATE) == -1)
    return -1;
  node_set_disk (node, REPL_DISK_OUTDATED);
  return 0;
}

/* Connection c is up; h is the peer's hello.  Called by the peer thread
 * before its receive loop starts. */
void
sync_on_connect (struct conn *c, const struct repl_hello *h)
{
  struct peer *p = c->c_peer;
  struct repl_node *node = p->pr_node;
  const char *name = p->pr_cfg->nc_name;
  bool we_primary = node_role (node) == REPL_ROLE_PRIMARY;
  bool resync = false, paused;
  char err[512];
  int d, rule;

  /* The peer learns that our administrator paused the resync with it
   * (replctl pause-sync) before any resync starts. */
  pthread_mutex_lock (&p->pr_lock);
  paused = p->pr_pause_user;
  pthread_mutex_unlock (&p->pr_lock);
  if (paused)
    role_tell_state (p);

  /* A diskless node has no generations and nothing to resync. */
  if (node->n_diskless || c->c_peer_diskless) {
    if (node->n_diskless)
      diskless_peer_uuids (node, c);
    /* A role change of ours during the handshake was told to the
     * published connections only: this one hears it now (a storage
     * Primary beside diskless nodes also waited for the handshake to
     * end: tp_take_routes).  Beside diskless nodes a Secondary's STATE
     * also says which storage Primaries it follows, which a diskless
     * Primary waits for before it writes to it directly. */
    else if (node_role (node) != c->c_hello_role ||
             tp_routes_diskless (node))
      role_tell_state (p);
    pthread_mutex_lock (&p->pr_lock);
    c->c_decided = true;
    pthread_mutex_unlock (&p->pr_lock);
    return;
  }
  /* With a diskless primary, or none, storage secondaries resync each
   * other (nobody else has data to resync them from). */
  bool pair = !we_primary && h->role != REPL_ROLE_PRIMARY &&
              node_no_storage_primary (node);
  /* ... and where a diskless node may write to both: the target leaves
   * its targets before the source reads a chunk (forward_fence), so the
   * source always waits for the target's bitmap, sent after that. */
  bool fenced = pair && node->n_cfg.cf_has_diskless;

  /* Chunks marked for the peer while this connection was in its
   * handshake (a diskless primary's write forwarded to it, which it was
   * not yet connected to take, or OUT_OF_SYNC naming it), after our
   * HELLO_STATE announced none: both sides decide from the announced
   * counts, so no resync would pick them up and they would stay marked
   * on an idle, connected pair.  Reconnect: the next HELLO_STATE
   * announces them.  Bounded: that one announces more than none, and
   * the resync it leads to reads our bitmap as it is then. */
  if (fenced && c->c_hello_changes == 0) {
    uint64_t now;

    pthread_mutex_lock (&p->pr_lock);
    now = bitmap_count (&p->pr_bitmap);
    pthread_mutex_unlock (&p->pr_lock);
    if (now > 0) {
      conn_fail (c, "%" PRIu64 " chunks were marked out of sync for it "
                 "after our HELLO_STATE said none; reconnecting to "
                 "announce them", now);
      return;
    }
  }

  /* The same decision the handshake checked; the state may have moved
   * on since, so it may now refuse. */
  d = gen_decide (node, c, &rule, err, sizeof err);
  if (d == -1) {
    conn_fail (c, "%s", err);
    return;
  }
  log_info ("peer %s: generations: %s (rule %d: %s)", name,
            uuid_decision_name (d), rule, uuid_rule_name (rule));
  /* The peer has data we lack: until a resync makes us UpToDate again
   * we are Outdated (and, as that, never promoted without --force).
   * Unless our generation moved on since our hello (another peer's
   * resync of us ended meanwhile): the decision is stale, and taken
   * again on a new connection. */
  if (uuid_decision_is_target (d)) {
    struct gen_uuids now;

    gen_view (node, p, &now);
    if (now.gu_current != c->c_hello_uuids.gu_current) {
      conn_fail (c, "our generation changed during the handshake "
                 "(now %016" PRIx64 "); reconnecting", now.gu_current);
      return;
    }
    if (node_outdate (node) == -1) {
      conn_fail (c, "cannot write metadata");
      return;
    }
  }
  pthread_mutex_lock (&p->pr_lock);
  p->pr_split_brain = false;
  pthread_mutex_unlock (&p->pr_lock);

  /* A source is a Primary, or an UpToDate secondary with no Primary
   * (an Outdated one would pass on data it knows to be old). */
  if ((we_primary || (pair && announced_uptodate (c))) &&
      uuid_decision_is_source (d))
    resync = true;              /* a full one marks everything once the
                                   peer's bitmap is in (BITMAP_DONE) */
  else if (pair && d == UUID_NO_SYNC) {
    /* Two storage secondaries in the same generation: an UpToDate one
     * sends what was marked (decide_pair_source), from the numbers both
     * HELLO_STATEs announced. */
    resync = pair_source (c) == 1;
    if (resync)
      log_info ("peer %s: in the same generation, but chunks are marked "
                "out of sync (%" PRIu64 " here, %" PRIu32 " there): "
                "resyncing them from here", name, c->c_hello_changes,
                h->uuids.changes);
  }
  else if (d == UUID_NO_SYNC && !we_primary && h->role != REPL_ROLE_PRIMARY &&
           h->disk_state == REPL_DISK_UPTODATE &&
           drop_marks_between_secondaries (p) == -1) {
    conn_fail (c, "cannot write metadata");
    return;
  }
  else if (we_primary) {
    /* No sync by the generations.  Bits in either side's bitmap would
     * still be chunks the peer lacks: never drop them silently.  (The
     * peer's: a secondary whose machine crashed marks its activity log,
     * where acknowledged writes may have been lost with its page cache;
     * its hello says how many chunks, and it sends them.) */
    pthread_mutex_lock (&p->pr_lock);
    resync = bitmap_count (&p->pr_bitmap) > 0 || h->uuids.changes > 0;
    pthread_mutex_unlock (&p->pr_lock);
    if (resync)
      log_info ("peer %s: in the same generation, but chunks are marked "
                "out of sync (%" PRIu64 " here, %" PRIu32 " there): "
                "resyncing them", name, bitmap_count (&p->pr_bitmap),
                h->uuids.changes);
  }

  /* A resync wanted before this decision (on the connection before, or
   * marks made meanwhile) is this decision's to take: the resync thread
   * waits for it (c_decided), then runs only what it chose. */
  pthread_mutex_lock (&p->pr_lock);
  c->c_decision = d;
  p->pr_bitmap_rx_bytes = 0;
  if (resync &&
      (uuid_decision_is_source (d) ||
       (d == UUID_NO_SYNC && (h->uuids.changes > 0 || fenced))))
    peer_set_repl_locked (p, REPL_WF_BITMAP_S);
  if (resync)
    p->pr_resync_wanted = true;
  /* The resync thread waits for c_decided; a kick that came before it
   * (marks made during the handshake) is taken now too.  One from the
   * connection before was cleared at connect (connected_locked). */
  c->c_decided = true;
  pthread_cond_signal (&p->pr_resync_cond);
  pthread_mutex_unlock (&p->pr_lock);

  /* Connected to a Primary: the other secondaries that are its copies
   * need no marks of ours. */
  if (h->role == REPL_ROLE_PRIMARY)
    worker_post (node, WORK_DROP_MARKS);

  /* A write started a new generation after our hello left (the peer
   * was still away for it), or committed it: tell the peer now.  The
   * chunks it wrote are in the peer's bitmap and resync above.  Our
   * disk state too: a change while the connection was in its handshake
   * (a resync by another peer ended) was announced to the connected
   * peers only. */
  {
    struct gen_uuids now, sent;
    enum repl_disk_state disk;

    gen_view (node, p, &now);
    sent = c->c_hello_uuids;
    if (now.gu_current != sent.gu_current ||
        (now.gu_flags & GU_FLAG_TENTATIVE) !=
        (sent.gu_flags & GU_FLAG_TENTATIVE))
      sync_send_uuids (p);
    pthread_mutex_lock (&node->n_lock);
    disk = node->n_disk;
    pthread_mutex_unlock (&node->n_lock);
    if (disk != c->c_hello_disk)
      role_tell_state (p);
  }

  if (!we_primary && (h->role == REPL_ROLE_PRIMARY || pair)) {
    bool mine;

    /* What our hello announced, which is what the primary expects. */
    mine = c->c_hello_changes > 0;
    /* Between two storage secondaries the lower id resyncs what either
     * has marked in the same generation. */
    if ((uuid_decision_is_target (d) &&
         (h->role == REPL_ROLE_PRIMARY ||
          h->disk_state == REPL_DISK_UPTODATE)) ||
        (d == UUID_NO_SYNC && fenced && pair_source (c) == -1) ||
        (d == UUID_NO_SYNC && !fenced &&
         mine && (!pair || pair_source (c) == -1))) {
      /* One source at a time: a second one waits until the first is
       * done (then both decide again); a primary goes first. */
      if (!sync_claim_source (p, h->role == REPL_ROLE_PRIMARY)) {
        pthread_mutex_lock (&p->pr_lock);
        p->pr_resync_deferred = true;
        pthread_mutex_unlock (&p->pr_lock);
        log_info ("peer %s: its resync of this node waits: another peer "
                  "resyncs this node first", name);
        return;
      }
      if (fenced) {
        /* The fence waits for the diskless nodes' writes to us to end,
         * and those may wait for this connection (forwarded by us to
         * the source, whose ACKs come in here), or for the source's
         * forwarded writes to us to be read: not here, before the
         * receive loop, but in the resync thread while it runs. */
        pthread_mutex_lock (&p->pr_lock);
        c->c_fence_wanted = true;
        pthread_cond_signal (&p->pr_resync_cond);
        pthread_mutex_unlock (&p->pr_lock);
        return;
      }
      bitmap_to_source (c);
    }
  }
}

/* Sync target of c's peer, with diskless nodes: the sync fence
 * (forward_fence), then our bitmap.  Run by the peer's resync thread
 * while the receive loop reads c (the source's forwarded writes and
 * the ACKs of ours to it).  A fence that fails drops the connection;
 * its loss releases the source (sync_on_lost). */
void
sync_fence_then_bitmap (struct conn *c)
{
  if (forward_fence (c) == -1) {
    conn_fail (c, "the diskless nodes did not stop writing to this "
               "node directly; reconnecting");
    return;
  }
  bitmap_to_source (c);
}

/* Does a sync source (primary?, id) rank before another?  A Primary
 * first, then the lower node id: with several peers able to resync this
 * node, the one that does is the same whatever the order they connect
 * in. */
static bool
source_ranks_before (bool primary, int id, bool other_primary, int other_id)
{
  if (primary != other_primary)
    return primary;
  return id < other_id;
}

/* p (a Primary if primary) is about to resync this node (we send it our
 * bitmap, or it sent RESYNC_START): only one peer at a time may.  A peer
 * that ranks before the one resyncing us (source_ranks_before) takes
 * over: the other's connection is dropped (on its return it waits for
 * ours to end), and p goes on only once the connection of every source
 * replaced so far has been torn down (its receive thread has stopped),
 * so that a chunk from one still being written cannot land after p's
 * data or a write p forwards.  That wait is bounded by ping-timeout
 * (nobody reads p's connection meanwhile).  Returns false if another
 * peer resyncs us, or if a replaced one did not stop in time: then p's
 * connection is dropped too, and its teardown releases the claim. */
bool
sync_claim_source (struct peer *p, bool primary)
{
  struct repl_node *node = p->pr_node;
  int id = p->pr_cfg->nc_id, old;
  bool take, stopped;
  struct peer *q;
  struct timespec ts;

  pthread_mutex_lock (&node->n_lock);
  old = node->n_sync_source_id;
  take = old == -1 || old == id ||
    source_ranks_before (primary, id, node->n_sync_source_primary, old);
  if (take) {
    node->n_sync_source_id = id;
    node->n_sync_source_primary = primary;
    if (old != -1 && old != id)
      node->n_sync_handover |= UINT32_C (1) << old;
  }
  pthread_mutex_unlock (&node->n_lock);
  if (!take)
    return false;

  if (old != -1 && old != id) {
    /* (A peer that adjust removed is being stopped: its teardown
     * releases it all the same.) */
    q = node_find_peer (node, old);
    if (q != NULL) {
      pthread_mutex_lock (&q->pr_lock);
      peer_fail_current_locked (q, "%s %s resyncs this node instead "
                                "(it ranks before: %s); reconnecting",
                                primary ? "the primary" : "the peer",
                                p->pr_cfg->nc_name,
                                primary ? "a Primary" : "lower node id");
      pthread_mutex_unlock (&q->pr_lock);
    }
  }

  ts = deadline_after_ns (node->n_cfg.cf_ping_timeout_ms *
                          UINT64_C (1000000));
  pthread_mutex_lock (&node->n_lock);
  while ((node->n_sync_handover & ~(UINT32_C (1) << id)) != 0 &&
         !node->n_stopping &&
         pthread_cond_timedwait (&node->n_cond, &node->n_lock, &ts) == 0)
    ;
  stopped = (node->n_sync_handover & ~(UINT32_C (1) << id)) == 0;
  pthread_mutex_unlock (&node->n_lock);
  if (!stopped) {
    pthread_mutex_lock (&p->pr_lock);
    peer_fail_current_locked (p, "a peer that resynced this node before "
                              "did not stop within ping-timeout; "
                              "reconnecting");
    pthread_mutex_unlock (&p->pr_lock);
    return false;
  }
  if (old != -1 && old != id)
    log_info ("peer %s: takes over the resync of this node",
              p->pr_cfg->nc_name);
  return true;
}

/* p no longer resyncs this node (its resync ended, or its connection):
 * the peers whose resync of us waited decide again, on a new
 * connection. */
void
sync_release_source (struct peer *p, const char *why)
{
  struct repl_node *node = p->pr_node;
  bool was = false;
  size_t i;

  pthread_mutex_lock (&node->n_lock);
  if (node->n_sync_source_id == (int) p->pr_cfg->nc_id) {
    node->n_sync_source_id = -1;
    was = true;
  }
  if (node->n_sync_handover & (UINT32_C (1) << p->pr_cfg->nc_id)) {
    /* Replaced, and now torn down: its successor goes on. */
    node->n_sync_handover &= ~(UINT32_C (1) << p->pr_cfg->nc_id);
    pthread_cond_broadcast (&node->n_cond);
  }
  pthread_mutex_unlock (&node->n_lock);
  if (!was)
    return;
  for (i = 0; i < PEERS (node)->pl_n; i++) {
    struct peer *q = PEERS (node)->pl_peers[i];

    pthread_mutex_lock (&q->pr_lock);
    if (q->pr_resync_deferred) {
      q->pr_resync_deferred = false;
      peer_fail_current_locked (q, "the resync from %s %s; reconnecting "
                                "to decide again", p->pr_cfg->nc_name, why);
    }
    pthread_mutex_unlock (&q->pr_lock);
  }
}

/* Our primary (a storage node or a diskless one) is gone without saying
 * goodbye: writes it had in flight may have reached one of its
 * secondaries and not another, and all still say UpToDate.  Each
 * storage secondary marks the extents of its activity log (where every
 * such write lies) out of sync for the other storage nodes it is
 * connected to, and reconnects to them: at the reconnect a Primary among
 * them resyncs the marks of both, or with none the lower id takes the
 * other's marks too and resyncs all of them (sync_on_connect), so that
 * they hold the same bytes again, as DRBD 9 reconciles after losing a
 * primary. */
static void
reconcile (struct repl_node *node, struct peer *primary)
{
  uint32_t *ext;
  uint32_t n, i;
  uint64_t extent_size;
  size_t k;

  if (!node->n_al_ready)
    return;
  ext = malloc (node->n_al.al_nslots * sizeof *ext);
  if (ext == NULL) {
    log_error ("reconcile: malloc: %m");
    return;
  }
  pthread_mutex_lock (&node->n_al_lock);
  n = al_active_extents (&node->n_al, ext, node->n_al.al_nslots);
  extent_size = UINT64_C (1) << node->n_al.al_shift;
  pthread_mutex_unlock (&node->n_al_lock);
  if (n > node->n_al.al_nslots)
    n = node->n_al.al_nslots;

  for (k = 0; k < PEERS (node)->pl_n; k++) {
    struct peer *q = PEERS (node)->pl_peers[k];

    if (q == primary || q->pr_cfg->nc_diskless)
      continue;
    pthread_mutex_lock (&q->pr_lock);
    if (peer_conn_locked (q) != NULL) {
      for (i = 0; i < n; i++)
        bitmap_set_range (&q->pr_bitmap, (uint64_t) ext[i] * extent_size,
                          extent_size);
      peer_fail_current_locked (q, "the %sprimary %s was lost: "
                                "reconciling the %" PRIu32 " extent(s) of "
                                "our activity log",
                                primary->pr_cfg->nc_diskless ? "diskless " : "",
                                primary->pr_cfg->nc_name, n);
    }
    pthread_mutex_unlock (&q->pr_lock);
  }
  free (ext);
}

static int check_newer_peer (struct peer *q);

/* Our Primary (peer except) was lost, or our diskless Primary became
 * Secondary: are the other storage peers ahead of us? */
void
sync_check_newer_peers (struct repl_node *node, struct peer *except)
{
  size_t i;

  if (node->n_diskless)
    return;
  for (i = 0; i < PEERS (node)->pl_n; i++)
    if (PEERS (node)->pl_peers[i] != except &&
        check_newer_peer (PEERS (node)->pl_peers[i]) == -1)
      log_error ("peer %s: cannot write metadata",
                 PEERS (node)->pl_peers[i]->pr_cfg->nc_name);
}

/* Is a diskless Primary connected to us (a storage node)? */
static bool
diskless_primary_connected (struct repl_node *node)
{
  bool any = false;
  size_t i;

  for (i = 0; i < PEERS (node)->pl_n && !any; i++) {
    struct peer *q = PEERS (node)->pl_peers[i];
    struct conn *qc;

    if (!q->pr_cfg->nc_diskless)
      continue;
    pthread_mutex_lock (&q->pr_lock);
    qc = peer_conn_locked (q);
    any = qc != NULL && !qc->c_failed && qc->c_role == REPL_ROLE_PRIMARY;
    pthread_mutex_unlock (&q->pr_lock);
  }
  return any;
}

/* Connection c was lost (and torn down).  With fence (role_fence_begin
 * counted it before the writers were released) the fence-peer handler
 * decides when writes go on (role_fence_done). */
void
sync_on_lost (struct conn *c, bool fence)
{
  struct peer *p = c->c_peer;
  struct repl_node *node = p->pr_node;
  bool goodbye, was_primary, stopping, through;

  sync_release_source (p, "was interrupted");
  pthread_mutex_lock (&p->pr_lock);
  goodbye = c->c_peer_goodbye;
  was_primary = c->c_role == REPL_ROLE_PRIMARY;
  through = c->c_peer_diskless && c->c_dl_via != 0;
  pthread_mutex_unlock (&p->pr_lock);
  /* (A diskless Primary beside a storage one wrote through it alone:
   * we hold what it forwarded, in its order; nothing to reconcile.
   * Likewise one that wrote through the other diskless Primary.) */
  if (!node->n_diskless && was_primary && !goodbye && !through &&
      node_role (node) != REPL_ROLE_PRIMARY &&
      !(p->pr_cfg->nc_diskless && node->n_cfg.cf_two_primaries &&
        !node_no_storage_primary (node)))
    reconcile (node, p);
  /* No Primary to follow now: are the others ahead of us? */
  if (was_primary && !node->n_diskless)
    sync_check_newer_peers (node, p);
  /* (Two primaries apart: the peer thread started the new generation
   * before the teardown, peer.c.) */
  if (fence) {
    handler_run_then (node, REPL_HANDLER_FENCE_PEER, p, role_fence_done);
    atomic_store (&node->n_gen_pending, true);
    return;
  }
  if (node_role (node) != REPL_ROLE_PRIMARY || node->n_diskless ||
      p->pr_cfg->nc_diskless)
    return;
  /* Our own stop is no reason to fence the peer. */
  pthread_mutex_lock (&p->pr_lock);
  stopping = p->pr_stopping;
  pthread_mutex_unlock (&p->pr_lock);
  if (!stopping)
    handler_run (node, REPL_HANDLER_FENCE_PEER, p);
  /* The next write starts a new generation (gen_before_write). */
  atomic_store (&node->n_gen_pending, true);
}

/* An in-sync secondary follows its primary, the peer of c, into its
 * generation (its current UUID and whether that is tentative, as it last
 * told us on c); a resync
 * target keeps its own until the resync ends.  Returns 0, or -1 if the
 * metadata cannot be written. */
int
sync_follow_primary (struct conn *c)
{
  struct peer *p = c->c_peer;
  struct repl_node *node = p->pr_node;
  enum repl_disk_state disk;
  struct gen_uuids ours, theirs;
  bool follow;

  if (node->n_diskless || c->c_peer_diskless)
    return 0;                   /* no generations on one side */
  pthread_mutex_lock (&p->pr_lock);
  follow = c->c_role == REPL_ROLE_PRIMARY && !peer_resyncing_locked (p);
  theirs = c->c_peer_uuids;
  pthread_mutex_unlock (&p->pr_lock);
  if (theirs.gu_current == 0 || theirs.gu_current == UUID_JUST_CREATED)
    return 0;
  pthread_mutex_lock (&node->n_lock);
  disk = node->n_disk;
  follow = follow && node->n_role != REPL_ROLE_PRIMARY &&
           disk == REPL_DISK_UPTODATE;
  pthread_mutex_unlock (&node->n_lock);
  if (!follow)
    return 0;
  gen_view (node, p, &ours);
  if (ours.gu_current == theirs.gu_current &&
      (ours.gu_flags & GU_FLAG_TENTATIVE) ==
      (theirs.gu_flags & GU_FLAG_TENTATIVE))
    return 0;
  /* Its tentative flag too (uuid-compare.h, rows 85/86). */
  if (gen_adopt_current (node, p, &theirs) == -1)
    return -1;
  worker_post (node, WORK_UUIDS);      /* the other secondaries learn it */
  return 0;
}

/* A storage peer q that is not our primary tells us its UUIDs (UUIDS,
 * or we have just lost our primary and look again at what q told us):
 * with no storage Primary to follow, an UpToDate node whose peer holds
 * newer data, grown out of our generation, is Outdated from now on, and
 * is not promoted without --force (a secondary cut off from the primary
 * while the primary kept writing with the others).  With a Primary, its
 * generation is ours to follow instead.  With a diskless Primary
 * connected to us, it decides: it writes to us and reads from us only
 * in its generation, and a storage peer that took a generation of it
 * (AWAY) may tell us so before the same AWAY reaches us on our own
 * connection to it; outdating ourselves then would leave its targets
 * for nothing (fewer copies, and no UpToDate one if the others fail).
 * Left behind for good, we are resynced, which outdates us at connect
 * (sync_on_connect); and we look again once it is lost or demotes
 * (sync_check_newer_peers).  Returns 0, or -1 if the metadata cannot
 * be written. */
static int
check_newer_peer (struct peer *q)
{
  struct repl_node *node = q->pr_node;
  struct gen_uuids ours, theirs;
  struct conn *c;
  bool storage = false;
  int rule;

  if (node->n_diskless || !node_no_storage_primary (node) ||
      diskless_primary_connected (node))
    return 0;
  pthread_mutex_lock (&q->pr_lock);
  if ((c = peer_conn_locked (q)) != NULL && !c->c_peer_diskless) {
    storage = true;
    theirs = c->c_peer_uuids;
  }
  pthread_mutex_unlock (&q->pr_lock);
  if (!storage)
    return 0;
  /* Only an UpToDate disk becomes Outdated (node_outdate); a resync
   * target hears its source's UUIDs before RESYNC_DONE (resync.c) while
   * it is not Consistent, which is no news. */
  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&node->n_lock);
    if (node->n_disk != REPL_DISK_UPTODATE)
      return 0;
  }
  gen_view (node, q, &ours);
  /* With diskless nodes, a generation grown out of ours only: in the
   * same one, a bitmap UUID the peer told us before its resync of us
   * ended (rules 34/35) is no newer data (and is looked at again when
   * our diskless Primary demotes, long after). */
  if (node->n_cfg.cf_has_diskless && ours.gu_current == theirs.gu_current)
    return 0;
  if (!uuid_decision_is_target (uuid_compare (&ours, &theirs, &rule)))
    return 0;
  log_info ("peer %s: holds newer data (current %016" PRIx64 ", rule %d: "
            "%s)", q->pr_cfg->nc_name, theirs.gu_current, rule,
            uuid_rule_name (rule));
  return node_outdate (node);
}

/* A generation message from the peer.  Returns 0, or -1 once the
 * connection has failed (reported). */
int
sync_handle (struct conn *c, const struct repl_hdr *h, const uint8_t *payload)
{
  struct peer *p = c->c_peer;
  struct repl_node *node = p->pr_node;
  const char *name = p->pr_cfg->nc_name;
  char err[256];

  switch (h->type) {
  case REPL_MSG_UUIDS: {
    struct repl_uuids w;
    struct gen_uuids u;

    if (wire_decode_uuids (payload, h->length, &w, err, sizeof err) == -1) {
      conn_fail (c, "protocol error: %s", err);
      return -1;
    }
    u = (struct gen_uuids) { .gu_current = w.current, .gu_bitmap = w.bitmap,
                             .gu_history = { w.history[0], w.history[1] },
                             .gu_flags = w.flags };
    if (uuid_check (&u, err, sizeof err) == -1) {
      conn_fail (c, "protocol error: UUIDS: %s", err);
      return -1;
    }
    pthread_mutex_lock (&p->pr_lock);
    c->c_peer_uuids = u;
    pthread_mutex_unlock (&p->pr_lock);
    if (node->n_diskless) {
      diskless_peer_uuids (node, c);
      return 0;
    }
    /* A new Primary sends the generation it starts before its role
     * (role_changed): its STATE follows, and then we follow it
     * (role_handle_state) or refuse it.  Outdated now, we would not
     * follow it, yet take its writes while our UUIDs still name the
     * generation before: a stale Primary of that one would then find
     * us "in the same generation" and win quorum with us. */
    if (sync_follow_primary (c) == -1 ||
        (!(u.gu_flags & GU_FLAG_PRIMARY) && check_newer_peer (p) == -1)) {
      conn_fail (c, "cannot write metadata");
      return -1;
    }
    return 0;
  }

  case REPL_MSG_BITMAP: {
    uint64_t nwords, i, first;
    bool ok;

    pthread_mutex_lock (&p->pr_lock);
    nwords = (p->pr_bitmap.bm_nbits + 63) / 64;
    ok = p->pr_repl == REPL_WF_BITMAP_S && h->offset % 8 == 0 &&
         h->offset == p->pr_bitmap_rx_bytes &&
         h->offset / 8 + h->length / 8 <= nwords;
    if (ok) {
      first = h->offset / 8;
      for (i = 0; i < h->length / 8; i++) {
        uint64_t w, *word = &p->pr_bitmap.bm_words[first + i];
        uint64_t old = *word;

        memcpy (&w, payload + 8 * i, 8);
        *word |= le64toh (w);
        /* Bits past the end of the volume stay clear. */
        if (first + i == nwords - 1 && p->pr_bitmap.bm_nbits % 64)
          *word &= (UINT64_C (1) << (p->pr_bitmap.bm_nbits % 64)) - 1;
        p->pr_bitmap.bm_nset += __builtin_popcountll (*word) -
                                __builtin_popcountll (old);
      }
      p->pr_bitmap_rx_bytes += h->length;
    }
    pthread_mutex_unlock (&p->pr_lock);
    if (!ok) {
      conn_fail (c, "protocol error: BITMAP of %" PRIu32 " bytes at "
                 "byte %" PRIu64 " not expected (bitmap of %" PRIu64
                 " bytes)", h->length, h->offset, nwords * 8);
      return -1;
    }
    return 0;
  }

  case REPL_MSG_BITMAP_DONE: {
    uint64_t nwords;
    bool ok, full;

    pthread_mutex_lock (&p->pr_lock);
    nwords = (p->pr_bitmap.bm_nbits + 63) / 64;
    ok = p->pr_repl == REPL_WF_BITMAP_S &&
         p->pr_bitmap_rx_bytes == nwords * 8 && h->offset == nwords * 8;
    full = uuid_decision_is_full (c->c_decision);
    pthread_mutex_unlock (&p->pr_lock);
    if (!ok) {
      conn_fail (c, "protocol error: BITMAP_DONE after %" PRIu64
                 " of %" PRIu64 " bytes", p->pr_bitmap_rx_bytes,
                 nwords * 8);
      return -1;
    }
    /* A full sync marks everything only now, once the peer has taken us
     * as its source: it may take another one first (sync_claim_source),
     * be resynced by it, and come back UpToDate in our generation; the
     * marks of a full sync it never took would then make us its source
     * again, of data it may hold newer (forwarded for a diskless
     * primary, or resynced from a node that holds it). */
    if (full) {
      pthread_mutex_lock (&p->pr_lock);
      bitmap_set_all (&p->pr_bitmap);
      pthread_mutex_unlock (&p->pr_lock);
      if (gen_full_sync_start_source (node, p, &c->c_peer_uuids) == -1) {
        conn_fail (c, "cannot write metadata");
        return -1;
      }
    }
    pthread_mutex_lock (&p->pr_lock);
    if (p->pr_repl == REPL_WF_BITMAP_S && !c->c_failed)
      peer_set_repl_locked (p, REPL_SYNC_SOURCE); /* wakes the resync
                                                     thread */
    pthread_mutex_unlock (&p->pr_lock);
    log_info ("peer %s: its bitmap is in", name);
    return 0;
  }

  default:
    abort ();
  }
}
