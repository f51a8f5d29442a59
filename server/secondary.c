/* nbdrepl: the secondary's side of a connection — applying the
 * sequenced messages of a primary or a sync source.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * The receive loop (peer-receive.c) checks each sequenced message
 * (secondary_check: who may send it, its sequence number and range) and
 * hands it to one of the functions here, by type; they apply it to the
 * local disk in arrival order, which is the sender's order, so that
 * overlapping writes land in the same order everywhere.  The batch's
 * cumulative ACK follows (or a NACK if our disk failed).
 *
 * Each returns 0, -1 if the connection failed (reported), or -2 if the
 * local disk failed (the caller NACKs).  Only m_have bytes of a WRITE or
 * RESYNC_DATA payload may have arrived yet; the rest is spliced from the
 * socket.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "byte-order.h"
#include "crc32c.h"
#include "internal.h"
#include "log.h"

/* Secondary: the payload of a large WRITE or RESYNC_DATA has partly
 * arrived (have bytes at payload).  Write that part, then move the rest
 * from the socket to the disk through a pipe with splice, so the bulk of
 * the data never passes through user space: one copy on the secondary
 * (into the page cache) instead of two.  Returns 0, -1 if the connection
 * failed (already reported), or -2 if the disk failed. */
static int
write_spliced (struct conn *c, struct rx *rx,
               const struct repl_hdr *h, const uint8_t *payload,
               uint32_t have)
{
  struct peer *p = c->c_peer;
  struct volume *vol = &p->pr_node->n_vol;
  uint64_t offset = h->offset + have;
  uint32_t left = h->count - have;

  if (have > 0 && volume_pwrite (vol, payload, have, h->offset) == -1)
    return -2;
  while (left > 0) {
    size_t want = left < rx->rx_pipe_size ? left : rx->rx_pipe_size;
    ssize_t r = splice (stream_fd (rx->rx_stream), NULL, rx->rx_pipe[1], NULL, want,
                        SPLICE_F_MOVE);

    if (r == -1 && errno == EINTR)
      continue;
    if (r <= 0) {
      if (r == 0)
        conn_fail (c, "connection closed by peer in the middle of "
                   "a %s message", wire_type_name (h->type));
      else
        conn_fail (c, "recv (splice): %m");
      return -1;
    }
    c->c_last_recv_ns = now_ns ();
    if (volume_splice_in (vol, rx->rx_pipe[0], r, offset) == -1)
      return -2;
    offset += r;
    left -= r;
  }
  return 0;
}

/* data-integrity: crc32c: the data must match its digest before it
 * goes anywhere.  A mismatch ends the connection; the sender then marks
 * the range out of sync and resyncs it.  Returns 0 or -1. */
static int
check_digest (struct conn *c, const struct repl_hdr *h,
              const uint8_t *payload)
{
  uint32_t want;

  if (!(h->flags & REPL_FLAG_DIGEST))
    return 0;
  want = get_be32 (payload + h->count);
  if (crc32c (0, payload, h->count) == want)
    return 0;
  conn_fail (c, "data-integrity: crc32c mismatch in %s of %" PRIu32
             " bytes at offset %" PRIu64 " (sequence %" PRIu64 "): "
             "corrupted in transit; dropped", wire_type_name (h->type),
             h->count, h->offset, h->seq);
  return -1;
}

/* The data of a WRITE or RESYNC_DATA onto the disk: all zeroes (flag
 * ZEROES), spliced from the socket (the payload has partly arrived),
 * or written from the buffer.  0, -1 (connection) or -2 (disk). */
static int
write_data (struct conn *c, const struct rx_msg *m)
{
  struct peer *p = c->c_peer;
  const struct repl_hdr *h = m->m_hdr;
  struct volume *vol = &p->pr_node->n_vol;

  if (h->flags & REPL_FLAG_ZEROES)
    return volume_zero (vol, h->count, h->offset, false) == -1 ? -2 : 0;
  if (m->m_have < h->count)
    return write_spliced (c, m->m_rx, h, m->m_payload, m->m_have);
  return volume_pwrite (vol, m->m_payload, h->count, h->offset) == -1
         ? -2 : 0;
}

/* allow-two-primaries: the parts of a WRITE, TRIM or ZERO that
 * tp_apply_begin kept (the payload is all in memory: no splice).
 * 0 or -2 (disk). */
static int
apply_parts (struct repl_node *node, const struct repl_hdr *h,
             const uint8_t *payload, const struct tp_apply *ta)
{
  struct volume *vol = &node->n_vol;
  size_t i;

  for (i = 0; i < ta->ta_npieces; i++) {
    uint64_t off = ta->ta_pieces[i].start;
    uint32_t len = ta->ta_pieces[i].end - off;
    int r;

    switch (h->type) {
    case REPL_MSG_WRITE:
      r = volume_pwrite (vol, payload + (off - h->offset), len, off);
      break;
    case REPL_MSG_TRIM:
      r = volume_trim (vol, len, off);
      break;
    case REPL_MSG_ZERO:
      r = volume_zero (vol, len, off, h->flags & REPL_FLAG_MAY_TRIM);
      break;
    default:
      abort ();
    }
    if (r == -1)
      return -2;
  }
  return 0;
}

/* WRITE, TRIM, ZERO, FLUSH from our primary.  A secondary keeps an
 * activity log too: after its own crash, what it had acknowledged but
 * not yet flushed is resynced from the primary (the extents travel in
 * its bitmap at the next connect).  A diskless primary's write that
 * some storage nodes do not get from it is forwarded to those we reach
 * (forward.c), ordered with any resync we send them by our interval
 * lock.  As a storage Primary beside a diskless one (allow-two-
 * primaries), its writes take our interval lock too, whether or not
 * they go on: ordered with our clients' writes (two-primaries.c), as
 * one of them would be (a new generation first if a peer went). */
int
secondary_apply_io (struct conn *c, const struct rx_msg *m)
{
  struct peer *p = c->c_peer;
  const struct repl_hdr *h = m->m_hdr;
  const uint8_t *payload = m->m_payload;
  struct repl_node *node = p->pr_node;
  struct volume *vol = &node->n_vol;
  struct forward_copies fwd_copies;   /* filled only when forwarding */
  struct ilock_range range;
  struct tp_apply ta;
  struct waiter fwd;
  bool forwarding = c->c_away_mask != 0;
  bool data = h->type != REPL_MSG_FLUSH;
  bool two = data && node->n_cfg.cf_two_primaries &&
             !node->n_cfg.cf_has_diskless;
  bool beside = c->c_peer_diskless && node->n_cfg.cf_two_primaries &&
                node_role (node) == REPL_ROLE_PRIMARY;
  bool hold = data && (forwarding || beside);
  int r = 0;

  if (check_digest (c, h, payload) == -1)
    return -1;
  /* A diskless node: the other diskless Primary's request, through
   * our write path (diskless-primaries.c). */
  if (node->n_diskless)
    return dl_apply_routed (c, m);
  /* Two primaries: ordered with our own writes (two-primaries.c).  The
   * activity log first, as a local write takes it (write-path.c): a
   * local write that holds extents may wait for the range we take, so
   * we never wait for extents while we hold it. */
  if (two) {
    if (meta_al_begin (node, h->offset, h->count) == -1)
      return -2;
    if (tp_apply_begin (c, h, &ta) == -1) {
      meta_al_end (node, h->offset, h->count);
      return -1;
    }
    r = apply_parts (node, h, payload, &ta);
    meta_al_end (node, h->offset, h->count);
    if (r == 0 && (h->flags & REPL_FLAG_FUA) && volume_flush (vol) == -1)
      r = -2;
    tp_apply_end (c, m, &ta, r == 0);
    return r;
  }
  if (beside && data && atomic_load (&node->n_gen_pending))
    gen_before_write (node);
  if (hold)
    ilock_acquire (&node->n_ilock, &range, h->offset, h->count);
  if (data && meta_al_begin (node, h->offset, h->count) == -1) {
    if (hold)
      ilock_release (&node->n_ilock, &range);
    return -2;
  }
  switch (h->type) {
  case REPL_MSG_WRITE:
    r = write_data (c, m);
    break;
  case REPL_MSG_TRIM:
    r = volume_trim (vol, h->count, h->offset) == -1 ? -2 : 0;
    break;
  case REPL_MSG_ZERO:
    r = volume_zero (vol, h->count, h->offset,
                     h->flags & REPL_FLAG_MAY_TRIM) == -1 ? -2 : 0;
    break;
  case REPL_MSG_FLUSH:
    break;
  default:
    abort ();
  }
  if (data)
    meta_al_end (node, h->offset, h->count);
  if (r == 0 && data)
    forward_mark_unreached (c, h->offset, h->count);
  if (r == -1) {
    if (hold)
      ilock_release (&node->n_ilock, &range);
    return -1;
  }
  if (r == 0 && (h->type == REPL_MSG_FLUSH || (h->flags & REPL_FLAG_FUA)) &&
      volume_flush (vol) == -1)
    r = -2;
  if (forwarding) {
    /* Only what our own disk took goes on (a failure is NACKed). */
    waiter_init (&fwd, 0);
    fwd_copies.fc_n = 0;
    if (r == 0)
      forward_submit (c, h, payload, &fwd, &fwd_copies);
    if (hold)
      ilock_release (&node->n_ilock, &range);
    /* Acknowledged by where it went, within half of timeout.  Meanwhile
     * nobody reads this one (the primary's pings too): its ping-timeout
     * counts again from the end of the wait. */
    atomic_store (&c->c_rx_forwarding, true);
    forward_wait (node, &fwd, &fwd_copies, h->offset, m->m_rx->rx_recv_ns);
    c->c_last_recv_ns = now_ns ();
    atomic_store (&c->c_rx_forwarding, false);
    waiter_destroy (&fwd);
  }
  else if (hold)
    ilock_release (&node->n_ilock, &range);
  /* Beside a diskless Primary, its write is answered in our
   * generation: one we started for it is no longer tentative
   * (role_complete_write does the same for our clients' writes). */
  if (r == 0 && beside && atomic_load (&node->n_gen_unacked) &&
      atomic_exchange (&node->n_gen_unacked, false))
    worker_post (node, WORK_GEN_COMMIT);
  return r;
}

/* RESYNC_DATA from our sync source: the data, and the chunks we no
 * longer lack, written out now and then, so that a resync interrupted
 * by our crash resumes instead of restarting. */
int
secondary_apply_resync_data (struct conn *c, const struct rx_msg *m)
{
  struct peer *p = c->c_peer;
  const struct repl_hdr *h = m->m_hdr;
  struct repl_node *node = p->pr_node;
  uint64_t now, from = 0, end = h->offset + h->count;
  bool persist;
  int r;

  if (check_digest (c, h, m->m_payload) == -1)
    return -1;
  if (meta_al_begin (node, h->offset, h->count) == -1)
    return -2;
  r = write_data (c, m);
  meta_al_end (node, h->offset, h->count);
  if (r != 0)
    return r;
  forward_mark_unreached (c, h->offset, h->count);
  if (!node->n_cfg.cf_al_updates)
    volume_start_writeback (&node->n_vol, h->count, h->offset); /* flushed
                                                                   at DONE */
  now = now_ns ();
  pthread_mutex_lock (&p->pr_lock);
  p->pr_resync_done += h->count;
  bitmap_clear_range (&p->pr_bitmap, h->offset, h->count);
  if (p->pr_bitmap_persist_from > h->offset)  /* a new pass */
    p->pr_bitmap_persist_from = h->offset;
  persist = now - p->pr_bitmap_persist_ns >= RESYNC_PERSIST_NS ||
            end - p->pr_bitmap_persist_from >= RESYNC_PERSIST_BYTES;
  if (persist) {
    from = p->pr_bitmap_persist_from;
    p->pr_bitmap_persist_ns = now;
    p->pr_bitmap_persist_from = end;
    events_progress (p, p->pr_resync_done, p->pr_resync_total);
  }
  pthread_mutex_unlock (&p->pr_lock);
  if (persist &&
      meta_write_peer_bitmap_range (node, p, from, end - from) == -1)
    return -2;
  return 0;
}

/* With no storage Primary, two storage secondaries resync what either
 * has marked for the other (sync_on_connect), but only from an UpToDate
 * one: on a connection taken while we were not, no resync was decided,
 * and nothing would look at those marks again (both end UpToDate, in
 * the same generation, and out of sync).  Now that the resync from p
 * made us UpToDate, such a connection decides again. */
static void
redecide_marked_pairs (struct repl_node *node, struct peer *p)
{
  size_t i;

  for (i = 0; i < PEERS (node)->pl_n; i++) {
    struct peer *q = PEERS (node)->pl_peers[i];
    struct conn *qc;

    if (q == p || q->pr_cfg->nc_diskless)
      continue;
    pthread_mutex_lock (&q->pr_lock);
    qc = peer_conn_locked (q);
    if (qc != NULL && !qc->c_failed && qc->c_decided &&
        !qc->c_peer_diskless && qc->c_role != REPL_ROLE_PRIMARY &&
        q->pr_repl == REPL_ESTABLISHED &&
        qc->c_hello_disk != REPL_DISK_UPTODATE &&
        (bitmap_count (&q->pr_bitmap) > 0 || qc->c_hello.uuids.changes > 0))
      peer_fail_current_locked (q, "chunks are marked out of sync between "
                                "us, and this node was not UpToDate when "
                                "we connected; reconnecting to decide "
                                "again");
    pthread_mutex_unlock (&q->pr_lock);
  }
}

/* RESYNC_START: a peer starts resyncing us (offset: the bytes it will
 * send). */
int
secondary_apply_resync_start (struct conn *c, const struct rx_msg *m)
{
  struct peer *p = c->c_peer;
  const struct repl_hdr *h = m->m_hdr;
  struct repl_node *node = p->pr_node;
  const char *name = p->pr_cfg->nc_name;
  int d;

  pthread_mutex_lock (&p->pr_lock);
  d = c->c_decision;
  pthread_mutex_unlock (&p->pr_lock);
  /* Both sides took the same decision at connect: a peer that is to
   * be resynced by us does not resync us. */
  if (d < 0 || uuid_decision_is_source (d)) {
    conn_fail (c, "protocol error: RESYNC_START, but the decision "
               "at connect was %s", d < 0 ? "not taken"
               : uuid_decision_name (d));
    return -1;
  }
  /* While we follow a storage Primary, only it resyncs us: a
   * secondary's resync would race the Primary's writes to us (and its
   * end would set our generation back to the secondary's). */
  if (c->c_role != REPL_ROLE_PRIMARY && !node_no_storage_primary (node)) {
    /* Usually that secondary lost the Primary a moment before we do
     * (its ping-timeout ran out first) and reconciles: we still refuse
     * it, but once the loss has reached us too (a bounded wait), else
     * the two reconnect and refuse again many times a millisecond until
     * it does.  The next connection decides on what we then know. */
    conn_wait_storage_primary_gone (c);
    conn_fail (c, "RESYNC_START from a secondary while this node "
               "follows a Primary; reconnecting");
    return -1;
  }
  if (!sync_claim_source (p, c->c_role == REPL_ROLE_PRIMARY)) {
    conn_fail (c, "RESYNC_START while another peer resyncs this "
               "node; reconnecting");
    return -1;
  }
  pthread_mutex_lock (&p->pr_lock);
  p->pr_resync_total = h->offset;
  p->pr_resync_done = 0;
  peer_set_repl_locked (p, REPL_SYNC_TARGET);
  peer_update_pause_locked (p);
  p->pr_resync_start_ns = now_ns ();
  p->pr_bitmap_persist_ns = p->pr_resync_start_ns;
  p->pr_bitmap_persist_from = 0;
  pthread_mutex_unlock (&p->pr_lock);
  if (h->offset > 0) {
    /* Not Consistent until the end (an interrupted resync leaves a
     * disk that is not); a fresh disk takes the source's generation. */
    handler_run (node, REPL_HANDLER_BEFORE_RESYNC_TARGET, p);
    if (gen_resync_start_target (node, p, &c->c_peer_uuids) == -1)
      return -2;
    /* The peers learn it from the worker (node_set_disk): a diskless
     * primary stops reading from us (a read that comes first is
     * answered with an error, and it reads elsewhere), and writes to us
     * through the source, which orders them with its resync data. */
    node_set_disk (node, REPL_DISK_INCONSISTENT);
    log_info ("peer %s: resync started, %" PRIu64 " bytes to receive",
              name, h->offset);
  }
  return 0;
}

/* RESYNC_DONE: from now on we hold the source's generation and lack
 * nothing of it. */
int
secondary_apply_resync_done (struct conn *c, const struct rx_msg *m)
{
  struct peer *p = c->c_peer;
  struct repl_node *node = p->pr_node;
  struct volume *vol = &node->n_vol;
  const char *name = p->pr_cfg->nc_name;

  /* From now on we hold the primary's generation and lack nothing of
   * it.  The resync's writes need not be on the disk yet: each went
   * through our activity log, and an extent only leaves the log once
   * its data is flushed, so after a crash of this machine whatever may
   * not have reached the disk is resynced again (meta.c).  Without an
   * activity log (al-updates: false) we flush first. */
  if ((!node->n_cfg.cf_al_updates && volume_flush (vol) == -1) ||
      gen_resync_finished_target (node, p, &c->c_peer_uuids) == -1)
    return -2;
  pthread_mutex_lock (&p->pr_lock);
  bitmap_clear_all (&p->pr_bitmap);
  pthread_mutex_unlock (&p->pr_lock);
  if (meta_write_peer_bitmap (node, p) == -1)
    return -2;
  handler_run (node, REPL_HANDLER_AFTER_RESYNC_TARGET, p);
  pthread_mutex_lock (&p->pr_lock);
  events_progress (p, p->pr_resync_total, p->pr_resync_total);
  peer_set_repl_locked (p, REPL_ESTABLISHED);
  pthread_mutex_unlock (&p->pr_lock);
  /* The source learns our new generation on its own connection; the
   * other peers from the worker (their sockets are not ours to wait
   * on), then that we are UpToDate again (node_set_disk). */
  sync_send_uuids (p);
  worker_post (node, WORK_UUIDS);
  node_set_disk (node, REPL_DISK_UPTODATE);
  log_info ("peer %s: resync finished, %s", name,
            disk_state_name (REPL_DISK_UPTODATE));
  sync_release_source (p, "finished");
  if (c->c_role != REPL_ROLE_PRIMARY && node_primary_is_diskless_or_none (node))
    redecide_marked_pairs (node, p);
  /* A copy of our Primary now, as are its other UpToDate secondaries in
   * the same generation: what we had marked for them is moot. */
  if (c->c_role == REPL_ROLE_PRIMARY) {
    size_t i;

    for (i = 0; i < PEERS (node)->pl_n; i++) {
      struct peer *q = PEERS (node)->pl_peers[i];
      struct conn *qc;
      bool same;

      if (q == p)
        continue;
      pthread_mutex_lock (&q->pr_lock);
      qc = peer_conn_locked (q);
      same = qc != NULL && qc->c_role != REPL_ROLE_PRIMARY &&
             q->pr_disk == REPL_DISK_UPTODATE &&
             qc->c_peer_uuids.gu_current == c->c_peer_uuids.gu_current;
      pthread_mutex_unlock (&q->pr_lock);
      if (same && drop_marks_between_secondaries (q) == -1)
        return -2;
    }
  }
  return 0;
}

/* May p send us this data message?  Never to a primary or a diskless
 * node.  A resync (or the digests of a resync with csums) from any
 * storage peer, Primary or not, as DRBD 9: the connection's replication
 * state and the decision taken at connect say whether it is expected
 * (check_state in peer-receive.c, secondary_apply_resync_start).  Writes from our primary, or forwarded by a
 * storage node for a diskless one (forward_may_feed_us); OUT_OF_SYNC
 * from a diskless primary, or from a storage peer after its data;
 * reads only from a diskless primary. */
static bool
may_feed_us (struct conn *c, unsigned type)
{
  struct peer *p = c->c_peer;
  struct repl_node *node = p->pr_node;

  /* A diskless node takes requests only from a diskless Primary that
   * writes through it (diskless-primaries.c). */
  if (node->n_diskless)
    return dl_routed_may_feed (c, type);
  switch (type) {
  case REPL_MSG_RESYNC_START: case REPL_MSG_RESYNC_DATA:
  case REPL_MSG_RESYNC_DONE: case REPL_MSG_VERIFY_REQ:
    return node_role (node) != REPL_ROLE_PRIMARY && !node->n_diskless &&
           !c->c_peer_diskless;
  case REPL_MSG_READ_REQ:       /* reads change nothing: beside a
                                   storage Primary too */
    return c->c_peer_diskless && !node->n_diskless &&
           c->c_role == REPL_ROLE_PRIMARY &&
           (node_role (node) != REPL_ROLE_PRIMARY ||
            node->n_cfg.cf_two_primaries);
  case REPL_MSG_OUT_OF_SYNC:   /* from a diskless primary, or after a
                                   write or resync data from a storage
                                   node (forward.c says when it counts) */
    return c->c_peer_diskless ? forward_may_feed_us (c)
                              : node_role (node) != REPL_ROLE_PRIMARY;
  case REPL_MSG_RESIZE:         /* from the Primary, or an UpToDate node
                                   when there is none (resize.c checks) */
    return node_role (node) != REPL_ROLE_PRIMARY && !node->n_diskless &&
           !c->c_peer_diskless;
  default:
    return forward_may_feed_us (c);
  }
}

/* Check a data message before anything is applied. */
int
secondary_check (struct conn *c, const struct repl_hdr *h)
{
  struct peer *p = c->c_peer;
  struct repl_node *node = p->pr_node;
  char err[256];

  if (!may_feed_us (c, h->type)) {
    if (node->n_diskless)
      conn_fail (c, "%s from a diskless node that does not write "
                 "through this one, or while this node is no longer the "
                 "diskless Primary that writes straight to the storage "
                 "nodes (it writes it straight then)",
                 wire_type_name (h->type));
    else if (c->c_peer_diskless && c->c_role == REPL_ROLE_PRIMARY &&
             node->n_cfg.cf_two_primaries &&
             node_role (node) != REPL_ROLE_PRIMARY)
      conn_fail (c, "%s straight from a diskless Primary while this node "
                 "follows another Primary, which it writes through "
                 "(allow-two-primaries); reconnecting",
                 wire_type_name (h->type));
    else
      conn_fail (c, "protocol error: %s from a peer that is not our "
                 "primary%s", wire_type_name (h->type),
                 node_primary_is_diskless_or_none (node)
                 ? " nor a storage node that feeds us" : "");
    return -1;
  }
  if (h->seq != c->c_expect_seq) {
    conn_fail (c, "protocol error: %s has sequence number %" PRIu64
               ", expected %" PRIu64, wire_type_name (h->type), h->seq,
               c->c_expect_seq);
    return -1;
  }
  if (wire_check_range (h, volume_size (&node->n_vol),
                        p->pr_bitmap.bm_granularity, err, sizeof err) == -1) {
    conn_fail (c, "protocol error: %s", err);
    return -1;
  }
  if (h->type == REPL_MSG_RESYNC_START &&
      h->offset > volume_size (&node->n_vol)) {
    conn_fail (c, "protocol error: RESYNC_START of %" PRIu64
               " bytes on a %" PRIu64 "-byte volume", h->offset,
               volume_size (&node->n_vol));
    return -1;
  }
  c->c_expect_seq++;
  return 0;
}

