/* nbdrepl: the sending half of a peer connection.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * Sending is flat combining: a thread that queues a message and finds
 * nobody sending becomes the sender and writes everything queued
 * meanwhile with one sendmsg, until the queue is empty.  On the write
 * path that is usually the requesting thread itself, so a 4k write
 * costs no thread hand-off, and under load one syscall carries many
 * messages.  No lock is held during sendmsg; c_sending says a sender is
 * active, and teardown waits for it to finish before dropping buffers.
 */
#include <config.h>

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <linux/sockios.h>

#include "byte-order.h"
#include "crc32c.h"
#include "internal.h"
#include "log.h"

#define SEND_BATCH 256          /* messages per sendmsg (<= IOV_MAX / 3) */
#define CORK_MAX_BYTES (64u << 10) /* larger writes are never held */
#define CORK_MAX_MSGS  64       /* a queue this long is sent at once */

void
out_msg_init (struct out_msg *om, enum repl_msg_type type, uint16_t flags,
              uint32_t count, uint64_t seq, uint64_t offset,
              const void *payload, uint32_t length)
{
  struct repl_hdr h;

  wire_hdr_init (&h, type, flags, length, count, seq, offset);
  wire_encode_hdr (&h, om->om_hdr);
  om->om_next = NULL;
  om->om_seq = 0;               /* submit_locked sets it */
  om->om_iov[0].iov_base = om->om_hdr;
  om->om_iov[0].iov_len = REPL_HDR_SIZE;
  om->om_niov = 1;
  if (length > 0) {
    om->om_iov[1].iov_base = (void *) payload;
    om->om_iov[1].iov_len = length;
    om->om_niov = 2;
  }
  om->om_on_send = NULL;
  om->om_done = false;
  om->om_heap = false;
}

/* Mark a message finished with: nobody references its memory any more.
 * Completing the waiter may let its owner return and reuse the memory,
 * so nothing here touches om after that. */
static void
om_finish (struct out_msg *om)
{
  struct waiter *w = om->om_on_send;

  if (om->om_heap) {            /* nobody waits for it */
    free (om);
    return;
  }
  om->om_done = true;
  if (w)
    waiter_complete (w);
}

static void
append_locked (struct conn *c, struct out_msg *om)
{
  om->om_next = NULL;
  *c->c_qtail = om;
  c->c_qtail = &om->om_next;
  c->c_qlen++;
}

/* Queue om, and if no sender is active, send everything queued.  Called
 * and returns with pr_lock held; drops it around each sendmsg. */
void
conn_queue_locked (struct conn *c, struct out_msg *om)
{
  ASSERT_LOCKED (&c->c_peer->pr_lock);
  append_locked (c, om);
  conn_flush_locked (c);
}

/* If no sender is active and something is queued, send it: at most
 * max_batches sendmsg calls (0: until the queue is empty).  pr_lock
 * held; dropped around each sendmsg. */
static void
send_batches (struct conn *c, unsigned max_batches)
{
  struct peer *p = c->c_peer;
  struct out_msg *batch[SEND_BATCH];
  struct iovec iov[SEND_BATCH * 3];
  struct stream *st = c->c_stream;
  unsigned batches = 0;

  if (c->c_sending || c->c_qhead == NULL)
    return;                     /* the active sender will take it */
  c->c_sending = true;

  while (c->c_qhead != NULL && !c->c_failed &&
         (max_batches == 0 || batches++ < max_batches)) {
    int n = 0, niov = 0, r, i;
    uint64_t bytes = 0;

    while (c->c_qhead != NULL && n < SEND_BATCH) {
      struct out_msg *m = c->c_qhead;
      c->c_qhead = m->om_next;
      c->c_qlen--;
      if (m == c->c_ack_tail)   /* taken: rx_queue_ack leaves it be */
        c->c_ack_tail = NULL;
      if (m->om_seq > c->c_sent_seq)
        c->c_sent_seq = m->om_seq;
      batch[n++] = m;
      for (i = 0; i < m->om_niov; i++) {
        iov[niov++] = m->om_iov[i];
        bytes += m->om_iov[i].iov_len;
      }
    }
    if (c->c_qhead == NULL)
      c->c_qtail = &c->c_qhead;

    pthread_mutex_unlock (&p->pr_lock);
    /* The batch is ours until om_finish: digests are filled in here,
     * so that no crc32c of a large payload runs under pr_lock. */
    for (i = 0; i < n; i++)
      if (batch[i]->om_niov == 3)
        put_be32 (batch[i]->om_digest,
                  crc32c (0, batch[i]->om_iov[1].iov_base,
                          batch[i]->om_iov[1].iov_len));
    r = stream_sendv (st, iov, niov);
    pthread_mutex_lock (&p->pr_lock);

    for (i = 0; i < n; i++)
      om_finish (batch[i]);
    if (r == -1) {
      int e = errno;
      pthread_mutex_unlock (&p->pr_lock);
      if (e == EAGAIN || e == EWOULDBLOCK)
        conn_fail (c, "send made no progress for %.1f s (timeout)",
                   p->pr_node->n_cfg.cf_timeout_ms / 1000.0);
      else {
        if (e == EPIPE || e == ECONNRESET)
          atomic_store (&c->c_peer_closed, true);
        conn_fail (c, "send: %s", stream_error (st, e));
      }
      pthread_mutex_lock (&p->pr_lock);
      break;
    }
    p->pr_msgs_sent += n;
    p->pr_bytes_sent += bytes;
    p->pr_sends++;
  }

  c->c_sending = false;
  pthread_cond_broadcast (&p->pr_cond);
}

void
conn_flush_locked (struct conn *c)
{
  ASSERT_LOCKED (&c->c_peer->pr_lock);
  send_batches (c, 0);
}

/* Does the socket have room for the next batch, so that sending it
 * cannot block?  SO_SNDBUF counts the kernel's bookkeeping too (it
 * doubles what was asked for); a quarter of it is room for payload with
 * a margin.  Without a system call first: what the socket holds of our
 * sequenced messages is at most what they amount to until the peer
 * acknowledges them (it read them first), c_ring_bytes, which counts
 * the queued ones too; UNSEQUENCED_SLACK covers the rest (AWAY,
 * keepalives).  If that bound is too high (small buffers), ask the
 * kernel what it holds.  pr_lock held. */
#define UNSEQUENCED_SLACK (64u << 10)

static bool
room_for_next_batch (const struct conn *c)
{
  const struct out_msg *m;
  size_t room = (size_t) c->c_sndbuf / 4, bytes = 0, n = 0;
  int outq, i;

  if (c->c_ring_bytes + UNSEQUENCED_SLACK <= room)
    return true;
  for (m = c->c_qhead; m != NULL && n < SEND_BATCH; m = m->om_next, n++)
    for (i = 0; i < m->om_niov; i++)
      bytes += m->om_iov[i].iov_len;
  return ioctl (stream_fd (c->c_stream), SIOCOUTQ, &outq) == 0 && outq >= 0 &&
         (size_t) outq + bytes <= room;
}

/* Whoever reads the connection must never block in a send: the peer may
 * itself be blocked sending to us (a READ_REPLY, RESYNC_DATA) until we
 * read, and then neither side would read again.  So the reader, having
 * handled an ACK, sends the writes held for it (cork), and what is
 * queued behind them, only a batch at a time and only while the socket
 * has room for the whole batch; what is left goes to the peer's flush
 * thread.  pr_lock held. */
void
conn_flush_from_reader_locked (struct conn *c)
{
  struct peer *p = c->c_peer;

  ASSERT_LOCKED (&p->pr_lock);
  /* (A failed send ends the connection; teardown drops the rest.) */
  while (!c->c_sending && c->c_qhead != NULL && !c->c_failed) {
    if (!room_for_next_batch (c)) {
      c->c_flush_wanted = true;
      pthread_cond_signal (&p->pr_flush_cond);
      return;
    }
    send_batches (c, 1);
  }
}

/* The reader queues om: sent now only where that cannot block, else by
 * whoever sends or the flush thread.  pr_lock held. */
void
conn_queue_from_reader_locked (struct conn *c, struct out_msg *om)
{
  ASSERT_LOCKED (&c->c_peer->pr_lock);
  append_locked (c, om);
  conn_flush_from_reader_locked (c);
}

/* The flush thread of a peer: sends what a reader handed over. */
void *
peer_flush_thread (void *arg)
{
  struct peer *p = arg;

  pthread_mutex_lock (&p->pr_lock);
  while (!p->pr_stopping) {
    struct conn *c = p->pr_conn;

    if (c != NULL && c->c_flush_wanted) {
      c->c_flush_wanted = false;
      peers_enter (p->pr_node);
      conn_flush_locked (c);
      peers_leave (p->pr_node);
      continue;
    }
    pthread_cond_wait (&p->pr_flush_cond, &p->pr_lock);
  }
  pthread_mutex_unlock (&p->pr_lock);
  return NULL;
}

/* Take om out of the send queue if it is still there (not yet taken by
 * a sender).  pr_lock held. */
static bool
unqueue_locked (struct conn *c, struct out_msg *om)
{
  struct out_msg **pp;

  for (pp = &c->c_qhead; *pp != NULL; pp = &(*pp)->om_next)
    if (*pp == om) {
      *pp = om->om_next;
      c->c_qlen--;
      if (c->c_qtail == &om->om_next)
        c->c_qtail = pp;
      return true;
    }
  return false;
}

/* Send an unsequenced message on connection c and wait until it has
 * left, or the connection has failed and nobody holds om any more (om
 * may live on the caller's stack).  Returns 0 if it was sent, else -1. */
int
conn_send_wait (struct conn *c, struct out_msg *om)
{
  return conn_send_wait_if (c, om, NULL, NULL);
}

/* The same, if admit (unless NULL), called with pr_lock held just
 * before om is queued, agrees: if it does not, nothing is sent and 1 is
 * returned. */
int
conn_send_wait_if (struct conn *c, struct out_msg *om,
                   bool (*admit) (struct conn *c, void *arg), void *arg)
{
  struct peer *p = c->c_peer;
  int r = 0;

  pthread_mutex_lock (&p->pr_lock);
  if (c->c_failed) {
    pthread_mutex_unlock (&p->pr_lock);
    return -1;
  }
  if (admit != NULL && !admit (c, arg)) {
    pthread_mutex_unlock (&p->pr_lock);
    return 1;
  }
  conn_queue_locked (c, om);
  while (!om->om_done) {
    if (c->c_failed && unqueue_locked (c, om)) {
      r = -1;
      break;
    }
    pthread_cond_wait (&p->pr_cond, &p->pr_lock);
  }
  if (c->c_failed)
    r = -1;
  pthread_mutex_unlock (&p->pr_lock);
  return r;
}

/* Cork: a small client write (or trim, zero) that finds an answer from
 * the peer due — some message sent and not yet acknowledged — waits in
 * the queue for that ACK, and whoever handles it sends everything held
 * with one sendmsg (Nagle's algorithm, by message).  Under load one
 * send then carries many writes, and the peer answers them with one
 * ACK; a lone write (QD1) finds nothing due and goes at once.  Its
 * writer waits for its own ACK (t), so someone reads the connection
 * until the held messages are out and answered.  (The reader sends them
 * only where that cannot block: conn_flush_from_reader_locked.)
 * pr_lock held. */
static bool
hold_for_answer (const struct conn *c, unsigned type, uint32_t count,
                 bool on_send, const struct peer_ticket *t)
{
  return c->c_peer->pr_node->n_cfg.cf_cork && wire_type_changes_data (type) &&
         !on_send && t != NULL && count <= CORK_MAX_BYTES &&
         c->c_sent_seq > c->c_acked_seq && c->c_qlen < CORK_MAX_MSGS;
}

/* Queue a sequenced message to the peer and remember it until the peer
 * acknowledges it.  w (may be NULL) completes once the message has left
 * and, unless on_send, has been acknowledged (or the connection was
 * lost).  If the peer is not connected nothing is queued: client writes
 * are recorded in the dirty bitmap instead.  Returns 1 if queued, 0 if
 * not.  pr_lock held; om and the payload must stay alive until w
 * completes. */
static int
submit_locked (struct peer *p, enum repl_msg_type type, uint16_t flags,
               const void *payload, uint32_t count, uint64_t offset,
               struct waiter *w, bool on_send, struct out_msg *om,
               struct peer_ticket *t, void *read_buf, int *read_status)
{
  struct conn *c = peer_conn_locked (p);
  struct inflight *f;
  uint64_t seq;
  int i;

  ASSERT_LOCKED (&p->pr_lock);
  if (c != NULL && c->c_ring_count == PEER_WINDOW) {
    bool failed;

    conn_get (c);               /* it may fail and go while we wait */
    while (!c->c_failed && c->c_ring_count == PEER_WINDOW)
      pthread_cond_wait (&p->pr_cond, &p->pr_lock);
    failed = c->c_failed;
    conn_put (c);
    if (failed)
      c = NULL;
  }

  if (c == NULL) {
    if (wire_type_changes_data (type) && !p->pr_node->n_diskless) {
      bitmap_set_range (&p->pr_bitmap, offset, count);
      if (p->pr_nconns > 0)     /* a peer we know: it is behind now */
        peer_set_disk_locked (p, true, REPL_DISK_OUTDATED);
    }
    return 0;
  }

  seq = c->c_next_seq++;
  f = window_push_locked (c, seq);
  f->if_offset = offset;
  f->if_count = count;
  f->if_type = type;
  f->if_time_ns = now_ns ();
  f->if_on_send = on_send;
  f->if_waiter = on_send ? NULL : w;
  f->if_ticket = NULL;
  f->if_read_buf = read_buf;
  f->if_read_status = read_status;

  if (p->pr_node->n_cfg.cf_data_integrity &&
      (type == REPL_MSG_WRITE ||
       (type == REPL_MSG_RESYNC_DATA && !(flags & REPL_FLAG_ZEROES))))
    flags |= REPL_FLAG_DIGEST;
  out_msg_init (om, type, flags, count, seq, offset, payload,
                type == REPL_MSG_WRITE ||
                (type == REPL_MSG_RESYNC_DATA && !(flags & REPL_FLAG_ZEROES))
                ? count
                : type == REPL_MSG_OUT_OF_SYNC || type == REPL_MSG_RESIZE
                ? 8 : 0);
  if (flags & REPL_FLAG_DIGEST) {
    /* data-integrity: crc32c: the digest follows the data.  The sender
     * computes it, outside pr_lock (conn_queue_locked). */
    struct repl_hdr h;

    wire_hdr_init (&h, type, flags, count + REPL_DIGEST_SIZE, count, seq,
                   offset);
    wire_encode_hdr (&h, om->om_hdr);
    om->om_iov[2].iov_base = om->om_digest;
    om->om_iov[2].iov_len = REPL_DIGEST_SIZE;
    om->om_niov = 3;
  }
  om->om_seq = seq;
  f->if_bytes = 0;
  for (i = 0; i < om->om_niov; i++)
    f->if_bytes += om->om_iov[i].iov_len;
  c->c_ring_bytes += f->if_bytes;
  /* The waiter counts two events: the sender letting go of om (and the
   * payload) and the acknowledgement — they may come in either order,
   * since the peer can answer before sendmsg returns.  Protocol A plain
   * writes wait for the first only. */
  om->om_on_send = w;
  if (w)
    waiter_add (w, on_send ? 1 : 2);
  if (t != NULL && !on_send) {
    t->pt_conn = conn_get (c);
    t->pt_seq = seq;
    t->pt_applied = p->pr_node->n_cfg.cf_protocol != 'B' ||
                    type == REPL_MSG_FLUSH || (flags & REPL_FLAG_FUA);
    t->pt_answered = false;
    f->if_ticket = t;
    /* Two primaries: the other's writes to the range may go on now
     * (before we send, which may wait for the peer to read). */
    if (t->pt_range != NULL)
      ilock_mark (&p->pr_node->n_ilock, t->pt_range, false, true, false);
  }
  if (hold_for_answer (c, type, count, on_send, t))
    append_locked (c, om);      /* the next ACK sends it (handle_ack) */
  else
    conn_queue_locked (c, om);
  return 1;
}

int
peer_submit_locked (struct peer *p, enum repl_msg_type type, uint16_t flags,
                    const void *payload, uint32_t count, uint64_t offset,
                    struct waiter *w, bool on_send, struct out_msg *om,
                    struct peer_ticket *t)
{
  return submit_locked (p, type, flags, payload, count, offset, w, on_send,
                        om, t, NULL, NULL);
}

/* Diskless primary: queue a READ_REQ for count bytes at offset; the
 * answer's data goes to buf and *status becomes 0 (or EIO) before the
 * ACK that completes w.  Returns 1 if queued, 0 if not connected.
 * pr_lock held; om, buf and status must stay alive until w completes. */
int
peer_submit_read_locked (struct peer *p, void *buf, uint32_t count,
                         uint64_t offset, int *status, struct waiter *w,
                         struct out_msg *om, struct peer_ticket *t)
{
  if (submit_locked (p, REPL_MSG_READ_REQ, 0, NULL, count, offset, w, false,
                     om, t, buf, status) == 0)
    return 0;
  t->pt_applied = true;
  return 1;
}

int
peer_submit (struct peer *p, enum repl_msg_type type, uint16_t flags,
             const void *payload, uint32_t count, uint64_t offset,
             struct waiter *w, struct out_msg *om, struct peer_ticket *t)
{
  /* Protocol A: a plain write is done once it has left for the peer.
   * FUA writes and flushes always wait for the peer's disk. */
  bool on_send = p->pr_node->n_cfg.cf_protocol == 'A' &&
                 type != REPL_MSG_FLUSH && !(flags & REPL_FLAG_FUA);
  int r;

  pthread_mutex_lock (&p->pr_lock);
  r = peer_submit_locked (p, type, flags, payload, count, offset, w,
                          on_send, om, t);
  pthread_mutex_unlock (&p->pr_lock);
  return r;
}

/* The writer is done with ticket t (it has waited for its waiter). */
void
ticket_release (struct peer_ticket *t)
{
  conn_put (t->pt_conn);
  t->pt_conn = NULL;
}

/* The connection has failed: wait for an active sender to let go of its
 * buffers, then release every queued and unacknowledged message.  Client
 * writes the peer may not have applied are recorded in the dirty bitmap,
 * so a later resync sends them.  pr_lock held. */
void
conn_teardown_locked (struct conn *c)
{
  struct peer *p = c->c_peer;
  struct out_msg *om;

  ASSERT_LOCKED (&p->pr_lock);
  assert (c->c_failed);
  while (c->c_sending)
    pthread_cond_wait (&p->pr_cond, &p->pr_lock);

  while ((om = c->c_qhead) != NULL) {
    c->c_qhead = om->om_next;
    om_finish (om);
  }
  c->c_qtail = &c->c_qhead;
  c->c_qlen = 0;
  c->c_ack_tail = NULL;

  window_fail_all_locked (c);
  pthread_cond_broadcast (&p->pr_cond);
}
