/* nbdrepl: a connection's in-flight window.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * Every sequenced message sent to a peer stays in the window (c_ring,
 * in sequence order) until the peer acknowledges it; this file is the
 * only one that adds to it, retires from it or empties it, and states
 * once what each acknowledgement means:
 *
 *   ACK seq            every message <= seq is applied on the peer: its
 *                      writer completes (a client request's time since
 *                      it was queued goes into the peer's ACK latency
 *                      histogram), resync data leaves the bitmap,
 *                      RESYNC_DONE makes the peer UpToDate; the next
 *                      message's timeout runs from now (c_acked_ns);
 *   ACK seq RECEIVED   (protocol B) every message <= seq has arrived:
 *                      writers of messages that may be acknowledged on
 *                      receipt complete, but the messages stay until
 *                      the plain ACK, so that if the peer dies first
 *                      their ranges are still marked out of sync;
 *   NACK seq           message seq failed on the peer's disk: the
 *                      connection ends;
 *   connection lost    every message still in the window is released
 *                      (window_fail_all_locked); client writes among
 *                      them go into the peer's bitmap, for a resync.
 *
 * All under the peer's pr_lock.  Waiters are collected, not completed, so that the
 * caller completes them after dropping the lock.
 */
#include <config.h>

#include <assert.h>

#include "internal.h"
#include "log.h"

/* The slot for the next message, seq; the caller has checked that the
 * window has room and fills in the rest. */
struct inflight *
window_push_locked (struct conn *c, uint64_t seq)
{
  struct inflight *f;

  ASSERT_LOCKED (&c->c_peer->pr_lock);
  assert (c->c_ring_count < PEER_WINDOW);
  f = &c->c_ring[(c->c_ring_head + c->c_ring_count) % PEER_WINDOW];
  c->c_ring_count++;
  f->if_seq = seq;
  return f;
}

/* Is resync data overlapping [offset, offset + count) in the window?
 * Its ACK will clear the range's bits, also those set after it was
 * read: a mark for data newer than it must not wait for that ACK. */
bool
window_holds_resync_locked (struct conn *c, uint64_t offset, uint64_t count)
{
  uint32_t k;

  ASSERT_LOCKED (&c->c_peer->pr_lock);
  for (k = 0; k < c->c_ring_count; k++) {
    const struct inflight *f = &c->c_ring[(c->c_ring_head + k) % PEER_WINDOW];

    if (f->if_type == REPL_MSG_RESYNC_DATA &&
        f->if_offset < offset + count && offset < f->if_offset + f->if_count)
      return true;
  }
  return false;
}

/* The message with sequence number seq, or NULL if it is not in the
 * window. */
struct inflight *
window_find_locked (struct conn *c, uint64_t seq)
{
  uint64_t first;

  ASSERT_LOCKED (&c->c_peer->pr_lock);
  if (c->c_ring_count == 0)
    return NULL;
  first = c->c_ring[c->c_ring_head].if_seq;
  if (seq < first || seq - first >= c->c_ring_count)
    return NULL;
  return &c->c_ring[(c->c_ring_head + (seq - first)) % PEER_WINDOW];
}

/* Does this message wait for the applied ACK?  By its type
 * (wire_type_receipt_ackable: the rule both sides use), or by its
 * writer's ticket: protocol C, or FUA (the window keeps no flags; FUA
 * travels in the ticket as pt_applied). */
static bool
needs_applied_ack (const struct inflight *f)
{
  return !wire_type_receipt_ackable (f->if_type, 0) ||
         (f->if_ticket != NULL && f->if_ticket->pt_applied);
}

/* Whoever waits for f has its answer. */
static void
answered (struct inflight *f, struct waiter **done, size_t *ndone)
{
  if (f->if_ticket) {
    f->if_ticket->pt_answered = true;
    f->if_ticket = NULL;        /* its writer may return now */
  }
  if (f->if_waiter) {
    done[(*ndone)++] = f->if_waiter;
    f->if_waiter = NULL;
  }
}

/* The peer's ACK (RECEIVED with received) or NACK of seq, on connection
 * c.  The waiters to complete go to done[*ndone...].  Returns 0, or -1
 * once the connection has failed (a NACK, an ACK outside the window, or
 * a received-ACK covering a message that must be applied first:
 * reported). */
int
window_ack_locked (struct conn *c, uint64_t seq, bool nack, bool received,
                   struct waiter **done, size_t *ndone)
{
  struct peer *p = c->c_peer;
  const char *what = nack ? "NACK" : "ACK";
  bool wake = false;
  uint64_t first, k, now = 0;
  struct inflight *f;

  ASSERT_LOCKED (&p->pr_lock);
  /* Once the connection has failed, writers record their ranges in the
   * bitmap; a late ACK must not clear those bits.  Teardown settles
   * everything still in the window. */
  if (c->c_failed)
    return -1;
  if (c->c_ring_count == 0) {
    conn_fail_locked (c, "protocol error: %s %" PRIu64
                      " with nothing in flight", what, seq);
    return -1;
  }
  first = c->c_ring[c->c_ring_head].if_seq;
  f = window_find_locked (c, seq);
  if (f == NULL) {
    conn_fail_locked (c, "protocol error: %s %" PRIu64
                      " outside the window %" PRIu64 "..%" PRIu64,
                      what, seq, first, first + c->c_ring_count - 1);
    return -1;
  }
  if (nack) {
    /* Teardown records this and every later message in the bitmap. */
    conn_fail_locked (c, "%s of %" PRIu32 " bytes at offset %" PRIu64
                      " failed on the peer's disk",
                      wire_type_name (f->if_type), f->if_count, f->if_offset);
    return -1;
  }

  if (received) {
    /* The peer acknowledges receipt only of messages that need not be
     * applied first (secondary: handle_batch); a READ_REQ's data, for
     * one, must still come. */
    for (k = 0; k <= seq - first; k++) {
      f = &c->c_ring[(c->c_ring_head + k) % PEER_WINDOW];
      if (needs_applied_ack (f)) {
        conn_fail_locked (c, "protocol error: received-ACK %" PRIu64
                          " covers %s %" PRIu64 ", which must be applied "
                          "first", seq, wire_type_name (f->if_type),
                          f->if_seq);
        return -1;
      }
    }
    if (seq > c->c_received_seq)
      c->c_received_seq = seq;
    for (k = 0; k <= seq - first; k++)
      answered (&c->c_ring[(c->c_ring_head + k) % PEER_WINDOW], done,
                ndone);
    return 0;
  }

  if (c->c_ring_count == PEER_WINDOW)
    wake = true;                /* writers wait for room */
  c->c_acked_seq = seq;
  c->c_acked_ns = atomic_load_explicit (&c->c_last_recv_ns,
                                        memory_order_relaxed);
  while (c->c_ring_count > 0 &&
         c->c_ring[c->c_ring_head].if_seq <= seq) {
    f = &c->c_ring[c->c_ring_head];
    switch (f->if_type) {
    case REPL_MSG_RESYNC_DATA:
      bitmap_clear_range (&p->pr_bitmap, f->if_offset, f->if_count);
      p->pr_resync_done += f->if_count;
      break;
    case REPL_MSG_RESYNC_DONE:
      peer_set_disk_locked (p, true, REPL_DISK_UPTODATE);
      wake = true;
      break;
    case REPL_MSG_WRITE:
    case REPL_MSG_TRIM:
    case REPL_MSG_ZERO:
    case REPL_MSG_FLUSH:
      /* A client request's round trip to the peer's disk (metrics.c),
       * up to when the ACK arrived: the reader read the clock then
       * (rx_step), so no clock read here. */
      if (now == 0)
        now = atomic_load_explicit (&c->c_last_recv_ns,
                                    memory_order_relaxed);
      ack_hist_add (&p->pr_ack_hist,
                    now > f->if_time_ns ? now - f->if_time_ns : 0);
      break;
    }
    answered (f, done, ndone);
    c->c_ring_bytes -= f->if_bytes;
    c->c_ring_head = (c->c_ring_head + 1) % PEER_WINDOW;
    c->c_ring_count--;
  }
  if (wake)
    pthread_cond_broadcast (&p->pr_cond);
  return 0;
}

/* The connection has failed: release every message in the window.
 * Client writes the peer may not have applied go into its bitmap, so
 * that a later resync sends them; their writers complete (and find
 * their tickets unanswered: write-path.c). */
void
window_fail_all_locked (struct conn *c)
{
  struct peer *p = c->c_peer;

  ASSERT_LOCKED (&p->pr_lock);
  assert (c->c_failed);
  while (c->c_ring_count > 0) {
    struct inflight *f = &c->c_ring[c->c_ring_head];

    if (wire_type_changes_data (f->if_type))
      bitmap_set_range (&p->pr_bitmap, f->if_offset, f->if_count);
    if (f->if_waiter)
      waiter_complete (f->if_waiter);
    c->c_ring_head = (c->c_ring_head + 1) % PEER_WINDOW;
    c->c_ring_count--;
  }
  c->c_ring_bytes = 0;
}
