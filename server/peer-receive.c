/* nbdrepl: the receiving half of a peer connection.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * One thread per connection reads whatever has arrived into a buffer
 * and handles every complete message in it before reading again:
 *
 *  - on a secondary, data messages from the primary are applied to the
 *    local disk in arrival order (which is the primary's send order, so
 *    overlapping writes land in the same order everywhere), then one
 *    cumulative ACK covers the whole batch;
 *  - on the primary, ACKs complete the waiting writes, a batch at a time.
 *
 * Every header field is checked before use; anything malformed ends the
 * connection with a log line naming the problem, never the process.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "byte-order.h"
#include "cleanup.h"
#include "internal.h"
#include "log.h"

#define RECV_BUF_SIZE (REPL_HDR_SIZE + REPL_MAX_PAYLOAD + (256u << 10))
#define LARGE_MESSAGE (64u << 10)
#define PIPE_SIZE     (1u << 20)   /* wanted; the kernel may give less */

/* After a writer last read the connection, the receive thread leaves it
 * to writers for this long (unless writers wait for it). */
#define RX_GRACE_NS (2 * 1000 * 1000)

/* A writer reads its own ACK only while at most this many messages to
 * the peer are in its window (queued or sent and not yet acknowledged
 * as applied; its own included).  A lone writer (QD1)
 * saves a wake-up per write that way.  With more, other writers wait
 * too, and each reading writer would end by handing the connection
 * back to the receive thread (one more wake-up); the receive thread
 * reading for all of them costs less.  Measured on a diskless node:
 * 3% more IOPS at 4k QD16 than letting writers read at any depth, the
 * same at QD1, QD2 and QD4 (bench/RESULTS.md, the d3e9759 results). */
#define OWN_READ_MAX_UNANSWERED 2


/* Send a cumulative ACK for seq and wait until it has left (its header
 * lives in the connection, which we may only rewrite once it has been
 * sent). */
static void
send_ack (struct conn *c, enum repl_msg_type type,
          uint64_t seq, uint16_t flags)
{
  struct peer *p = c->c_peer;

  pthread_mutex_lock (&p->pr_lock);
  if (!c->c_failed) {
    out_msg_init (&c->c_ack_msg, type, flags, 0, seq, 0, NULL, 0);
    conn_queue_locked (c, &c->c_ack_msg);
    while (!c->c_ack_msg.om_done && !c->c_failed)
      pthread_cond_wait (&p->pr_cond, &p->pr_lock);
  }
  pthread_mutex_unlock (&p->pr_lock);
}

/* allow-two-primaries: the ACK of the peer write seq, queued at once
 * (two-primaries.c: before the write's range is let go; the queue is
 * FIFO, so a write of ours queued later reaches the peer after it) and
 * never waited for: both nodes' readers may be handling peer writes
 * while each one's sends wait for the other to read (peer-send.c,
 * conn_flush_from_reader_locked).  If the last message queued is an
 * ACK of ours that no sender has taken yet, it says seq now (ACKs are
 * cumulative, and nothing was queued after it); else the next of
 * c_acks, or one malloc'd while that one is still queued. */
void
rx_queue_ack (struct conn *c, struct rx *rx, uint64_t seq)
{
  struct peer *p = c->c_peer;
  struct out_msg *om;
  bool heap = false;
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&p->pr_lock);

  if (c->c_failed)
    return;
  om = c->c_ack_tail;
  if (om != NULL && c->c_qtail == &om->om_next) {
    heap = om->om_heap;
    out_msg_init (om, REPL_MSG_ACK, 0, 0, seq, 0, NULL, 0);
    om->om_heap = heap;
    rx->rx_acked = seq;
    return;
  }
  om = &c->c_acks[c->c_ack_next % RX_ACK_SLOTS];
  if (om->om_done)
    c->c_ack_next++;
  else if ((om = malloc (sizeof *om)) != NULL)
    heap = true;
  else {
    conn_fail_locked (c, "malloc: %m");
    return;
  }
  out_msg_init (om, REPL_MSG_ACK, 0, 0, seq, 0, NULL, 0);
  om->om_heap = heap;
  c->c_ack_tail = om;
  rx->rx_acked = seq;
  conn_queue_from_reader_locked (c, om);
}

/* After an ACK: wake the writers it completes, then send the writes
 * held for it (cork, peer-send.c), if any were queued when the ACK was
 * handled (held).  In this order the woken writers' clients have a
 * moment to send their next requests, which join the held ones in the
 * same sendmsg: measured on a diskless node at 4k QD16, 5% more IOPS
 * and 3% less CPU per write than sending first (bench/RESULTS.md,
 * the d3e9759 results).  With nothing held (QD1) pr_lock is not taken again: a
 * write queued meanwhile is held only behind another unanswered
 * message, whose ACK will send it. */
static void
complete_then_flush (struct conn *c, bool held,
                     struct waiter **done, size_t ndone)
{
  struct peer *p = c->c_peer;
  size_t i;

  for (i = 0; i < ndone; i++)
    waiter_complete (done[i]);
  if (!held)
    return;
  pthread_mutex_lock (&p->pr_lock);
  if (!c->c_failed)
    conn_flush_from_reader_locked (c);
  pthread_mutex_unlock (&p->pr_lock);
}

/* Primary: the peer acknowledged everything up to seq: applied, or with
 * `received` (protocol B) only received.  A received message completes
 * its writer but stays in the window until it is applied, so that if
 * the peer dies first the range is still marked out of sync. */
static int
handle_ack (struct conn *c, struct rx *rx, uint64_t seq, bool nack,
            bool received)
{
  struct peer *p = c->c_peer;

  /* Waiters are completed after pr_lock is dropped, so that writers
   * queueing new messages never wait behind our wake-ups.  They are
   * collected in the reader's rx (the reader holds c_rx_busy), not in a
   * thread-local array that every thread of the process would carry. */
  struct waiter **done = rx->rx_done;
  size_t ndone = 0;
  bool held;

  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&p->pr_lock);
    if (window_ack_locked (c, seq, nack, received, done, &ndone) == -1)
      return -1;
    held = c->c_qhead != NULL;
  }
  complete_then_flush (c, held, done, ndone);
  return 0;
}

/* Diskless primary: the answer to one of our READ_REQs.  The data goes
 * where the reader waits for it; the cumulative ACK that follows retires
 * the request and wakes the reader. */
static int
handle_read_reply (struct conn *c, const struct repl_hdr *h,
                   const uint8_t *payload)
{
  struct peer *p = c->c_peer;
  struct inflight *f;

  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&p->pr_lock);
  if (c->c_failed)
    return -1;
  f = window_find_locked (c, h->seq);
  if (f == NULL || f->if_type != REPL_MSG_READ_REQ ||
      f->if_read_status == NULL || f->if_count != h->count ||
      f->if_offset != h->offset) {
    conn_fail_locked (c, "protocol error: READ_REPLY %" PRIu64 " of %"
                      PRIu32 " bytes at offset %" PRIu64 " answers no read "
                      "of ours", h->seq, h->count, h->offset);
    return -1;
  }
  if (h->flags & REPL_FLAG_ERROR)
    *f->if_read_status = EIO;
  else {
    memcpy (f->if_read_buf, payload, h->count);
    *f->if_read_status = 0;
  }
  f->if_read_status = NULL;
  return 0;
}

/* May this message arrive in the connection's replication state
 * (common/repl-state.h)?  Resync, bitmap and verify messages only where
 * that exchange runs: anything else is a protocol error, before
 * anything is applied.  Returns 0, or -1 once the connection has
 * failed. */
static int
check_state (struct conn *c, const struct repl_hdr *h)
{
  struct peer *p = c->c_peer;
  enum repl_state s;

  if (repl_state_any_connected (h->type))
    return 0;
  pthread_mutex_lock (&p->pr_lock);
  s = p->pr_repl;
  pthread_mutex_unlock (&p->pr_lock);
  if (repl_state_accepts (h->type, s))
    return 0;
  conn_fail (c, "protocol error: %s in replication state %s (it may "
             "arrive only in %s)", wire_type_name (h->type),
             repl_state_name (s), repl_state_accepts_names (h->type));
  return -1;
}

/* What the receive loop does with each message after the handshake, by
 * type: the sequenced ones are applied by the secondary (secondary.c,
 * forward.c, verify.c) and acknowledged by the batch's ACK; the others
 * are handled as they arrive.  Each returns 0, or < 0 once the
 * connection has failed (sequenced: -2 if our disk failed). */
typedef int rx_handler (struct conn *c, const struct rx_msg *m);

static int
on_nothing (struct conn *c, const struct rx_msg *m)
{
  (void) c; (void) m;
  return 0;                     /* PING, PONG: the arrival is the point */
}

static int
on_state (struct conn *c, const struct rx_msg *m)
{
  return role_handle_state (c, m->m_hdr);
}

static int
on_goodbye (struct conn *c, const struct rx_msg *m)
{
  struct peer *p = c->c_peer;

  (void) m;
  pthread_mutex_lock (&p->pr_lock);
  c->c_peer_goodbye = true;
  pthread_mutex_unlock (&p->pr_lock);
  return 0;
}

static int
on_verify_req (struct conn *c, const struct rx_msg *m)
{
  return verify_handle_request (c, m->m_hdr);
}

static int
on_verify_reply (struct conn *c, const struct rx_msg *m)
{
  return verify_handle_reply (c, m->m_hdr, m->m_payload);
}

static int
on_away (struct conn *c, const struct rx_msg *m)
{
  return forward_handle_away (c, m->m_hdr, m->m_payload);
}

static int
on_out_of_sync (struct conn *c, const struct rx_msg *m)
{
  return forward_handle_out_of_sync (c, m->m_hdr, m->m_payload);
}

static int
on_read_req (struct conn *c, const struct rx_msg *m)
{
  return forward_handle_read (c, m->m_hdr);
}

static int
on_read_reply (struct conn *c, const struct rx_msg *m)
{
  return handle_read_reply (c, m->m_hdr, m->m_payload);
}

static int
on_resize_query (struct conn *c, const struct rx_msg *m)
{
  return resize_handle_query (c, m->m_hdr);
}

static int
on_resize_reply (struct conn *c, const struct rx_msg *m)
{
  return resize_handle_reply (c, m->m_hdr);
}

static int
on_sync_fence (struct conn *c, const struct rx_msg *m)
{
  return m->m_hdr->type == REPL_MSG_SYNC_FENCE
         ? diskless_handle_fence (c, m->m_hdr)
         : forward_handle_fenced (c, m->m_hdr);
}

static int
on_routed (struct conn *c, const struct rx_msg *m)
{
  return tp_handle_routed (c, m->m_hdr);
}

static int
on_sync (struct conn *c, const struct rx_msg *m)
{
  return sync_handle (c, m->m_hdr, m->m_payload);
}

static int
on_ack (struct conn *c, const struct rx_msg *m)
{
  const struct repl_hdr *h = m->m_hdr;

  return handle_ack (c, m->m_rx, h->seq, h->type == REPL_MSG_NACK,
                     h->flags & REPL_FLAG_RECEIVED);
}

static rx_handler *const rx_handlers[REPL_MSG_TYPE_MAX + 1] = {
  [REPL_MSG_PING] = on_nothing,
  [REPL_MSG_PONG] = on_nothing,
  [REPL_MSG_STATE] = on_state,
  [REPL_MSG_GOODBYE] = on_goodbye,
  [REPL_MSG_UUIDS] = on_sync,
  [REPL_MSG_BITMAP] = on_sync,
  [REPL_MSG_BITMAP_DONE] = on_sync,
  [REPL_MSG_ACK] = on_ack,
  [REPL_MSG_NACK] = on_ack,
  [REPL_MSG_WRITE] = secondary_apply_io,
  [REPL_MSG_TRIM] = secondary_apply_io,
  [REPL_MSG_ZERO] = secondary_apply_io,
  [REPL_MSG_FLUSH] = secondary_apply_io,
  [REPL_MSG_RESYNC_START] = secondary_apply_resync_start,
  [REPL_MSG_RESYNC_DATA] = secondary_apply_resync_data,
  [REPL_MSG_RESYNC_DONE] = secondary_apply_resync_done,
  [REPL_MSG_VERIFY_REQ] = on_verify_req,
  [REPL_MSG_VERIFY_REPLY] = on_verify_reply,
  [REPL_MSG_AWAY] = on_away,
  [REPL_MSG_OUT_OF_SYNC] = on_out_of_sync,
  [REPL_MSG_READ_REQ] = on_read_req,
  [REPL_MSG_READ_REPLY] = on_read_reply,
  [REPL_MSG_RESIZE_QUERY] = on_resize_query,
  [REPL_MSG_RESIZE_REPLY] = on_resize_reply,
  [REPL_MSG_RESIZE] = resize_handle,
  [REPL_MSG_SYNC_FENCE] = on_sync_fence,
  [REPL_MSG_SYNC_FENCED] = on_sync_fence,
  [REPL_MSG_ROUTED] = on_routed,
  /* HELLO, HELLO_STATE, AUTH_*: the handshake's, never here. */
};

/* A batch of messages still being applied this long after it came, or
 * after its last progress ACK, sends one (handle_batch). */
#define PROGRESS_ACK_NS UINT64_C (100000000)

/* Handle the complete messages in buf[0..len); return the bytes used,
 * or -1 if the connection has failed. */
static ssize_t
handle_batch (struct conn *c, struct rx *rx,
              const uint8_t *buf, size_t len)
{
  struct peer *p = c->c_peer;
  bool proto_b = p->pr_node->n_cfg.cf_protocol == 'B';
  bool two = p->pr_node->n_cfg.cf_two_primaries;
  uint64_t received = 0, nmsgs = 0, nbytes = 0, acked = 0;
  uint64_t acked_ns = rx->rx_recv_ns;
  size_t pos = 0;
  struct repl_hdr h;
  struct rx_msg m;
  rx_handler *fn;
  char err[256];

  /* Protocol B acknowledges on receipt: ack the leading messages of the
   * batch that do not ask for durability before applying anything. */
  if (proto_b) {
    for (pos = 0; len - pos >= REPL_HDR_SIZE; pos += REPL_HDR_SIZE + h.length) {
      if (wire_decode_hdr (buf + pos, &h, err, sizeof err) == -1 ||
          len - pos - REPL_HDR_SIZE < h.length ||
          !wire_type_receipt_ackable (h.type, h.flags) ||
          h.seq != c->c_expect_seq + (received))
        break;
      received++;
    }
    if (received > 0)
      send_ack (c, REPL_MSG_ACK, c->c_expect_seq + received - 1,
                REPL_FLAG_RECEIVED);
    pos = 0;
  }

  received = 0;
  while (len - pos >= REPL_HDR_SIZE) {
    uint32_t have;

    if (wire_decode_hdr (buf + pos, &h, err, sizeof err) == -1) {
      conn_fail (c, "protocol error: %s", err);
      return -1;
    }
    if (check_state (c, &h) == -1)
      return -1;
    have = len - pos - REPL_HDR_SIZE < h.length
           ? len - pos - REPL_HDR_SIZE : h.length;
    /* A payload not all here yet: wait for the rest, unless it is a
     * large write that can go from the socket to the disk directly. */
    if (have < h.length &&
        !(rx->rx_pipe[0] >= 0 && h.length >= LARGE_MESSAGE &&
          c->c_away_mask == 0 &&       /* forwarding needs the data */
          !p->pr_node->n_cfg.cf_two_primaries && /* ... and so do the
                                                    parts of a peer
                                                    write (two-
                                                    primaries.c) */
          !(h.flags & REPL_FLAG_DIGEST) &&      /* ... and so does the digest */
          (h.type == REPL_MSG_WRITE || h.type == REPL_MSG_RESYNC_DATA)))
      break;

    m = (struct rx_msg) { .m_hdr = &h, .m_payload = buf + pos + REPL_HDR_SIZE,
                          .m_have = have, .m_rx = rx };
    fn = rx_handlers[h.type];   /* the header is checked: h.type is known */
    if (fn == NULL) {
      conn_fail (c, "protocol error: unexpected %s",
                 wire_type_name (h.type));
      return -1;
    }
    if (wire_type_sequenced (h.type)) {
      int r;

      if (secondary_check (c, &h) == -1)
        return -1;
      r = fn (c, &m);
      if (r == -1)
        return -1;
      if (r == -2) {
        /* Tell the primary (if it is still there), which then marks
         * this and every later message out of sync. */
        send_ack (c, REPL_MSG_NACK, h.seq, 0);
        node_set_disk (p->pr_node, REPL_DISK_INCONSISTENT);
        conn_fail (c, "local disk error applying %s at offset %" PRIu64,
                   wire_type_name (h.type), h.offset);
        return -1;
      }
      received = h.seq;
      nmsgs++;
      nbytes += REPL_HDR_SIZE + h.length;
      /* A batch slow to apply (a slow disk, writes forwarded one at a
       * time to a slow node): what is applied so far is answered every
       * PROGRESS_ACK_NS, and the peer counts as heard meanwhile, so
       * that neither side takes our slowness for the other's silence
       * (the sender's timeout runs from our last answer, ticker.c). */
      if (!two) {
        uint64_t t = now_ns ();

        if (t - acked_ns >= PROGRESS_ACK_NS) {
          atomic_store_explicit (&c->c_last_recv_ns, t,
                                 memory_order_relaxed);
          send_ack (c, REPL_MSG_ACK, received, 0);
          acked = received;
          acked_ns = t;
        }
      }
      if (have < h.length) {    /* the rest came by splice */
        pos = len;
        break;
      }
    }
    else if (fn (c, &m) < 0)
      return -1;
    else {
      nmsgs++;
      nbytes += REPL_HDR_SIZE + h.length;
    }
    pos += REPL_HDR_SIZE + h.length;
  }

  /* For the metrics: once per batch. */
  if (nmsgs > 0) {
    atomic_fetch_add_explicit (&p->pr_msgs_received, nmsgs,
                               memory_order_relaxed);
    atomic_fetch_add_explicit (&p->pr_bytes_received, nbytes,
                               memory_order_relaxed);
  }
  /* (Two primaries: ACKed one by one, and a FLUSH here, never waiting
   * for the send.) */
  if (received > rx->rx_acked && two)
    rx_queue_ack (c, rx, received);
  else if (received > rx->rx_acked && received > acked)
    send_ack (c, REPL_MSG_ACK, received, 0);
  return pos;
}

static struct rx *
rx_new (struct conn *c, struct stream *st)
{
  struct peer *p = c->c_peer;
  struct rx *rx = calloc (1, sizeof *rx);

  if (rx == NULL || (rx->rx_buf = malloc (RECV_BUF_SIZE)) == NULL) {
    free (rx);
    conn_fail (c, "malloc: %m");
    return NULL;
  }
  rx->rx_stream = st;
  /* Without a pipe, large payloads are received into rx_buf like the
   * rest: always with TLS (the socket holds cipher text). */
  if (!stream_can_splice (st))
    rx->rx_pipe[0] = rx->rx_pipe[1] = -1;
  else if (pipe2 (rx->rx_pipe, O_CLOEXEC) == 0) {
    int size = fcntl (rx->rx_pipe[1], F_SETPIPE_SZ, PIPE_SIZE);
    if (size == -1)
      size = fcntl (rx->rx_pipe[1], F_GETPIPE_SZ);
    rx->rx_pipe_size = size > 0 ? (size_t) size : 65536;
  }
  else {
    log_error ("peer %s: pipe2: %m (large writes are copied instead)",
               p->pr_cfg->nc_name);
    rx->rx_pipe[0] = rx->rx_pipe[1] = -1;
  }
  return rx;
}

static void
rx_free (struct rx *rx)
{
  if (rx->rx_pipe[0] >= 0) {
    close (rx->rx_pipe[0]);
    close (rx->rx_pipe[1]);
  }
  free (rx->rx_buf);
  free (rx);
}

/* Read once (blocking) and handle every complete message.  The caller
 * holds c_rx_busy.  Returns 0, or -1 once the connection has failed. */
static int
rx_step (struct conn *c, struct rx *rx)
{
  uint8_t *buf = rx->rx_buf;
  size_t want = RECV_BUF_SIZE - rx->rx_fill;
  ssize_t r, used;

  /* A large message that has only partly arrived: read just up to its
   * end, so that nothing after it has to be moved to the front of the
   * buffer once it is handled (a memmove of up to a megabyte per 1M
   * write otherwise).  The header is checked properly later. */
  if (rx->rx_fill >= REPL_HDR_SIZE) {
    uint32_t length = get_be32 (buf + 8);
    size_t need = REPL_HDR_SIZE + (size_t) length;
    if (length >= LARGE_MESSAGE && length <= REPL_MAX_PAYLOAD &&
        need > rx->rx_fill)
      want = need - rx->rx_fill;
  }
  /* With splicing, read a little at a time: a large payload that has
   * not been read into buf yet can go straight to the disk. */
  if (rx->rx_pipe[0] >= 0 && want > LARGE_MESSAGE)
    want = LARGE_MESSAGE;

  r = stream_recv (rx->rx_stream, buf + rx->rx_fill, want);
  if (r <= 0) {
    if (r == 0 || errno == ECONNRESET)
      atomic_store (&c->c_peer_closed, true);
    if (r == 0 && rx->rx_fill > 0)
      conn_fail (c, "connection closed by peer in the middle of a "
                 "message (%zu bytes of it received); the message is "
                 "dropped", rx->rx_fill);
    else if (r == 0)
      conn_fail (c, "connection closed by peer%s",
                 c->c_peer_goodbye ? " (it is shutting down)" : "");
    else
      conn_fail (c, "recv: %s", stream_error (rx->rx_stream, errno));
    return -1;
  }
  c->c_last_recv_ns = rx->rx_recv_ns = now_ns ();
  rx->rx_fill += r;
  if (!atomic_load_explicit (&c->c_heard, memory_order_relaxed)) {
    /* The peer took the connection: it counts for quorum now. */
    atomic_store (&c->c_heard, true);
    node_quorum_changed (c->c_peer->pr_node);
  }

  used = handle_batch (c, rx, buf, rx->rx_fill);
  if (used == -1)
    return -1;
  if (used > 0) {
    memmove (buf, buf + used, rx->rx_fill - used);
    rx->rx_fill -= used;
  }
  return 0;
}

/* The receive thread stays away while a writer reads, or recently read
 * and nobody waits for an ACK that no writer is reading. */
static bool
leave_to_writers (const struct conn *c)
{
  return c->c_rx_busy ||
         (!c->c_rx_handover &&
          c->c_acked_seq >= c->c_rx_wanted_applied &&
          (c->c_acked_seq >= c->c_rx_wanted_received ||
           c->c_received_seq >= c->c_rx_wanted_received) &&
          c->c_rx_writer_ns != 0 &&
          now_ns () - c->c_rx_writer_ns < RX_GRACE_NS);
}

/* The receive thread of connection c (the peer thread, which holds a
 * reference): returns once it has failed. */
void
conn_receive_loop (struct conn *c)
{
  struct peer *p = c->c_peer;
  struct rx *rx = rx_new (c, c->c_stream);

  if (rx == NULL)
    return;

  pthread_mutex_lock (&p->pr_lock);
  c->c_rx = rx;
  for (;;) {
    int r;

    while (!c->c_failed && leave_to_writers (c)) {
      struct timespec ts = deadline_after_ns (RX_GRACE_NS);

      pthread_cond_timedwait (&p->pr_rx_cond, &p->pr_lock, &ts);
    }
    if (c->c_failed)
      break;
    c->c_rx_busy = true;
    c->c_rx_handover = false;
    pthread_mutex_unlock (&p->pr_lock);

    /* Each message with the peer list as it is now (peers.c): a no-op
     * for a writer reading its own ACK under its request's pin. */
    peers_quiesce (p->pr_node);
    r = rx_step (c, rx);

    pthread_mutex_lock (&p->pr_lock);
    c->c_rx_busy = false;
    if (r == -1)
      break;
  }
  /* A writer may still be reading: wait until it lets go of rx. */
  while (c->c_rx_busy)
    pthread_cond_wait (&p->pr_cond, &p->pr_lock);
  c->c_rx = NULL;
  pthread_mutex_unlock (&p->pr_lock);
  rx_free (rx);
}

static bool
own_ack_in (const struct conn *c, const struct peer_ticket *t)
{
  return c->c_acked_seq >= t->pt_seq ||
         (!t->pt_applied && c->c_received_seq >= t->pt_seq);
}

/* Called by a writer after its local write, for the first peer it waits
 * for.  If nobody is reading the connection and few messages are
 * unanswered (OWN_READ_MAX_UNANSWERED), the writer reads it itself until
 * its own message is acknowledged (or the connection fails), handling
 * every ACK that comes; then, if other writers wait, it asks the receive
 * thread to take over.  Otherwise it records the sequence number it
 * waits for, so that whoever reads keeps reading until it is in (waking
 * the receive thread if nobody reads); the caller then sleeps on its
 * waiter.  The reader role is only taken
 * here, never while the writer may still block elsewhere (sending, or on
 * its own disk), so that ACKs never pile up unread on the connection.
 * The ticket's reference keeps the connection. */
void
ticket_wait_own_ack (struct peer_ticket *t)
{
  struct conn *c = t->pt_conn;
  struct peer *p;

  if (c == NULL)
    return;
  p = c->c_peer;
  pthread_mutex_lock (&p->pr_lock);
  if (c->c_failed || own_ack_in (c, t)) {
    pthread_mutex_unlock (&p->pr_lock);
    return;
  }
  if (c->c_rx_busy || c->c_rx == NULL ||
      c->c_ring_count > OWN_READ_MAX_UNANSWERED) {
    /* Whoever reads keeps reading until this ACK is in. */
    if (t->pt_applied && t->pt_seq > c->c_rx_wanted_applied)
      c->c_rx_wanted_applied = t->pt_seq;
    if (!t->pt_applied && t->pt_seq > c->c_rx_wanted_received)
      c->c_rx_wanted_received = t->pt_seq;
    if (c->c_rx_busy || c->c_rx == NULL)
      /* ... and then leaves the connection to writers. */
      c->c_rx_writer_ns = now_ns ();
    else {
      /* Many writers wait: the receive thread reads for them all. */
      c->c_rx_handover = true;
      pthread_cond_signal (&p->pr_rx_cond);
    }
    pthread_mutex_unlock (&p->pr_lock);
    return;
  }

  c->c_rx_busy = true;
  while (!c->c_failed && !own_ack_in (c, t)) {
    struct rx *rx = c->c_rx;
    int r;

    pthread_mutex_unlock (&p->pr_lock);
    r = rx_step (c, rx);
    pthread_mutex_lock (&p->pr_lock);
    if (r == -1)
      break;
  }
  c->c_rx_busy = false;
  c->c_rx_writer_ns = now_ns ();
  if (!leave_to_writers (c)) {   /* others wait for their ACKs */
    c->c_rx_handover = true;
    pthread_cond_signal (&p->pr_rx_cond);
  }
  if (c->c_failed)
    pthread_cond_broadcast (&p->pr_cond);  /* the receive loop waits */
  pthread_mutex_unlock (&p->pr_lock);
}
