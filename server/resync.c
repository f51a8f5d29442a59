/* nbdrepl: resync — bring a peer's disk up to date from ours.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * When a secondary connects to the primary, the primary sends it exactly
 * the chunks set in that peer's dirty bitmap, while client writes go on
 * and are replicated as usual.  Each chunk is read under the interval
 * lock and queued before the lock is dropped, so a client write to the
 * same range is either already on the peer's disk or queued after the
 * resync data: both sides end up with the newest data.  A chunk's bit is
 * cleared when the peer acknowledges it; if the connection fails first,
 * the bit stays and the next connection sends it again.
 *
 *   RESYNC_START (bytes to send) → RESYNC_DATA ... → RESYNC_DONE
 *
 * The peer is Inconsistent from START until it acknowledges DONE.
 *
 * A chunk that reads as all zeroes goes as RESYNC_DATA with flag ZEROES
 * and no payload.  The rate is either fixed (resync-rate) or, with
 * c-min-rate/c-max-rate, c-min-rate while the application does I/O and
 * c-max-rate otherwise (DRBD's dynamic controller, simplified); without
 * either it is unthrottled.  Both sides write the bitmap pages of what
 * is done every second or 64 MiB (the target clears its own bitmap for
 * the source as data arrives), so that a resync interrupted by a crash
 * of either resumes near where it was instead of starting again.
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "byte-order.h"
#include "internal.h"
#include "log.h"

struct resync_slot {
  struct waiter rs_waiter;      /* pending while the chunk is in flight */
  struct out_msg rs_msg;
  struct out_msg rs_marked_msg; /* the OUT_OF_SYNC after it, if any */
  uint8_t rs_marked[8];         /* its payload (marked_unreached) */
  void *rs_buf;
};

/* Beside diskless nodes with no storage Primary: the storage nodes
 * other than target that are not connected to us and that we have
 * marked in [offset, offset + len) (they lack data we hold).  The
 * target, taking the chunk, marks them too (an OUT_OF_SYNC after it:
 * forward.c), for it may be connected to one of them, which would
 * lack the chunk in the generation the two then share, marked only
 * here (lost with us if we never return). */
static uint32_t
marked_unreached (struct peer *target, uint64_t offset, uint64_t len)
{
  struct repl_node *node = target->pr_node;
  uint32_t mask = 0;
  size_t i;
  PEERS_PIN_FOR_CURRENT_SCOPE (node);   /* (a pass's worker thread) */

  if (!node_primary_is_diskless_or_none (node) ||
      node_role (node) == REPL_ROLE_PRIMARY)
    return 0;
  for (i = 0; i < PEERS (node)->pl_n; i++) {
    struct peer *q = PEERS (node)->pl_peers[i];
    const struct bitmap *bm = &q->pr_bitmap;
    int64_t next;

    if (q == target || q->pr_cfg->nc_diskless)
      continue;
    pthread_mutex_lock (&q->pr_lock);
    next = bitmap_next_set (bm, offset >> bm->bm_shift);
    if (q->pr_state != CONN_CONNECTED && next >= 0 &&
        (uint64_t) next <= (offset + len - 1) >> bm->bm_shift)
      mask |= UINT32_C (1) << q->pr_cfg->nc_id;
    pthread_mutex_unlock (&q->pr_lock);
  }
  return mask;
}

/* Send a control message and wait until the peer acknowledges it (or
 * the connection fails).  Returns 0 if acknowledged on this connection. */
static int
send_control (struct conn *c, enum repl_msg_type type, uint64_t offset)
{
  struct peer *p = c->c_peer;
  struct waiter w;
  struct out_msg om;
  int r;

  waiter_init (&w, 0);
  pthread_mutex_lock (&p->pr_lock);
  r = !c->c_failed &&
      peer_submit_locked (p, type, 0, NULL, 0, offset, &w, false, &om,
                          NULL) == 1;
  pthread_mutex_unlock (&p->pr_lock);
  waiter_wait (&w);
  waiter_destroy (&w);
  if (!r)
    return -1;
  pthread_mutex_lock (&p->pr_lock);
  r = c->c_failed ? -1 : 0;
  pthread_mutex_unlock (&p->pr_lock);
  return r;
}

#define PACE_SLICE_NS   (100 * 1000 * 1000)  /* longest sleep between checks */

static bool
all_zero (const void *buf, size_t len)
{
  const uint64_t *w = buf;
  size_t i;

  for (i = 0; i < len / 8; i++)
    if (w[i] != 0)
      return false;
  for (i = len & ~(size_t) 7; i < len; i++)
    if (((const uint8_t *) buf)[i] != 0)
      return false;
  return true;
}

/* Bytes per second the resync may use now, 0 for unthrottled. */
static uint64_t
current_rate (struct repl_node *node, struct pace *pc, uint64_t now)
{
  const struct repl_config *cf = &node->n_cfg;

  if (cf->cf_resync_rate > 0)
    return cf->cf_resync_rate;
  if (cf->cf_c_max_rate == 0)
    return 0;
  if (now - pc->pc_io_check_ns >= PACE_SLICE_NS) {
    uint64_t io = atomic_load (&node->n_writes) + atomic_load (&node->n_reads);
    pc->pc_app_io = io != pc->pc_io_seen;
    pc->pc_io_seen = io;
    pc->pc_io_check_ns = now;
  }
  return pc->pc_app_io ? cf->cf_c_min_rate : cf->cf_c_max_rate;
}

/* Wait until `len` more bytes fit the rate.  Returns false if the
 * connection failed or the peer is stopping meanwhile. */
bool
pace_wait (struct conn *c, struct pace *pc, uint64_t len)
{
  struct peer *p = c->c_peer;
  uint64_t now = now_ns (), rate = current_rate (p->pr_node, pc, now);
  bool held;

  if (rate == 0)
    return true;
  if (pc->pc_next_ns < now)
    pc->pc_next_ns = now;
  if (now >= pc->pc_next_ns) {
    pc->pc_next_ns += len * UINT64_C (1000000000) / rate;
    return true;
  }
  /* The sleep may last (a low rate): verify_run's pin goes meanwhile
   * (a resync pass holds none, resync_pass). */
  held = peers_wait_begin (p->pr_node);
  while ((now = now_ns ()) < pc->pc_next_ns) {
    uint64_t ns = pc->pc_next_ns - now;
    struct timespec ts;
    bool ok;

    if (ns > PACE_SLICE_NS)
      ns = PACE_SLICE_NS;
    ts.tv_sec = ns / 1000000000;
    ts.tv_nsec = ns % 1000000000;
    nanosleep (&ts, NULL);
    pthread_mutex_lock (&p->pr_lock);
    ok = !c->c_failed && !p->pr_stopping;
    pthread_mutex_unlock (&p->pr_lock);
    if (!ok) {
      peers_wait_end (p->pr_node, held);
      return false;
    }
  }
  peers_wait_end (p->pr_node, held);
  pc->pc_next_ns += len * UINT64_C (1000000000) / rate;
  return true;
}

/* One pass over the bitmap, shared by RESYNC_WORKERS threads: each
 * takes the next dirty range from the cursor, reads it and queues it,
 * so that one thread reads from the disk while another is sending (a
 * single thread would do both in turn, and reading the page cache is
 * as expensive as the send).  Ranges are disjoint, so the order in which
 * they reach the peer does not matter. */
struct resync_pass {
  struct peer *rp_peer;
  struct conn *rp_conn;         /* the resync thread's reference */
  struct resync_slot *rp_slots;
  pthread_mutex_t rp_lock;      /* protects the fields below */
  uint64_t rp_bit;              /* the cursor: next bit to look at */
  struct pace rp_pace;
  uint64_t rp_persisted_ns, rp_persisted_to;
  bool rp_failed;
};

#define RESYNC_WORKERS 2        /* RESYNC_SLOTS is a multiple of this */

_Static_assert (RESYNC_SLOTS % RESYNC_WORKERS == 0, "slots per worker");
_Static_assert (RESYNC_MAX_BYTES >= MD_MAX_GRANULARITY &&
                VERIFY_MAX_BYTES >= MD_MAX_GRANULARITY,
                "a request holds at least one bitmap chunk");

/* Under rp_lock: the next range to send, or false at the end of the
 * pass or when the connection failed (rp_failed). */
static bool
next_range (struct resync_pass *rp, uint64_t *offset_out, uint64_t *len_out,
            bool *compare_out)
{
  struct peer *p = rp->rp_peer;
  struct repl_node *node = p->pr_node;
  const uint32_t granularity = p->pr_bitmap.bm_granularity;
  const uint64_t max_bits = RESYNC_MAX_BYTES / granularity;
  uint64_t end = 0, offset, len;
  int64_t first;
  bool compare = false;

  if (rp->rp_failed)
    return false;
  pthread_mutex_lock (&p->pr_lock);
  /* Paused (replctl pause-sync, here or there): wait to be resumed. */
  while (p->pr_repl == REPL_PAUSED_SYNC_S && !rp->rp_conn->c_failed &&
         !p->pr_stopping)
    pthread_cond_wait (&p->pr_cond, &p->pr_lock);
  if (rp->rp_conn->c_failed || p->pr_stopping) {
    pthread_mutex_unlock (&p->pr_lock);
    rp->rp_failed = true;
    return false;
  }
  first = bitmap_next_set (&p->pr_bitmap, rp->rp_bit);
  if (first >= 0) {
    end = bitmap_next_clear (&p->pr_bitmap, first);
    if (end - first > max_bits)
      end = first + max_bits;
    /* With csums, chunks not compared yet get compared first; those
     * compared and still set differ, and their data goes. */
    if (p->pr_csum_resync) {
      uint64_t cut;

      compare = !bitmap_test (p->pr_csum_done, first);
      if (compare) {
        int64_t next = bitmap_next_set (p->pr_csum_done, first);
        cut = next < 0 ? p->pr_csum_done->bm_nbits : (uint64_t) next;
      }
      else
        cut = bitmap_next_clear (p->pr_csum_done, first);
      if (cut < end)
        end = cut;
    }
  }
  pthread_mutex_unlock (&p->pr_lock);
  if (first < 0)
    return false;

  offset = (uint64_t) first * granularity;
  len = (end - first) * granularity;
  if (offset + len > volume_size (&node->n_vol))
    len = volume_size (&node->n_vol) - offset;
  rp->rp_bit = end;

  if (!pace_wait (rp->rp_conn, &rp->rp_pace, len)) {
    rp->rp_failed = true;
    return false;
  }
  /* Acknowledged chunks before `offset` are clear in memory; their
   * pages go to disk now and then (those still in flight stay set,
   * which is safe). */
  if (now_ns () - rp->rp_persisted_ns >= RESYNC_PERSIST_NS ||
      offset - rp->rp_persisted_to >= RESYNC_PERSIST_BYTES) {
    uint64_t done, total;

    meta_write_peer_bitmap_range (node, p, rp->rp_persisted_to,
                                  offset - rp->rp_persisted_to);
    rp->rp_persisted_ns = now_ns ();
    rp->rp_persisted_to = offset;
    pthread_mutex_lock (&p->pr_lock);
    done = p->pr_resync_done;
    total = p->pr_resync_total;
    pthread_mutex_unlock (&p->pr_lock);
    events_progress (p, done, total);
  }
  *offset_out = offset;
  *len_out = len;
  *compare_out = compare;
  return true;
}

/* One worker of a pass: slots first, first + step, ... */
static void
resync_worker (struct resync_pass *rp, unsigned first, unsigned step)
{
  struct peer *p = rp->rp_peer;
  struct repl_node *node = p->pr_node;
  unsigned i = first;

  for (;;) {
    struct resync_slot *s = &rp->rp_slots[i];
    const unsigned slot = i;
    struct ilock_range range;
    uint64_t offset, len;
    uint32_t marked;
    bool compare, more, zeroes = false;

    i = (i + step) % RESYNC_SLOTS;
    waiter_wait (&s->rs_waiter);        /* the slot's last chunk is done */

    pthread_mutex_lock (&rp->rp_lock);
    more = next_range (rp, &offset, &len, &compare);
    pthread_mutex_unlock (&rp->rp_lock);
    if (!more)
      break;

    ilock_acquire (&node->n_ilock, &range, offset, len);
    marked = compare ? 0 : marked_unreached (p, offset, len);
    if (volume_pread (&node->n_vol, s->rs_buf, len, offset) == -1) {
      ilock_release (&node->n_ilock, &range);
      conn_fail (rp->rp_conn, "resync stopped: cannot read our own disk");
      pthread_mutex_lock (&rp->rp_lock);
      rp->rp_failed = true;
      pthread_mutex_unlock (&rp->rp_lock);
      break;
    }
    /* The digests or the zero scan before pr_lock, which every client
     * write to this peer takes. */
    if (compare)
      verify_csum_digest (p, slot, s->rs_buf, len);
    else
      zeroes = all_zero (s->rs_buf, len);
    /* Only on the connection this pass is for: if it failed during the
     * read, a new one may be up already, still in its handshake or
     * sync fence (WFBitMapT there), and a chunk read before that fence
     * could overwrite a write the target took directly since. */
    pthread_mutex_lock (&p->pr_lock);
    if (rp->rp_conn->c_failed || peer_conn_locked (p) != rp->rp_conn) {
      pthread_mutex_unlock (&p->pr_lock);
      ilock_release (&node->n_ilock, &range);
      pthread_mutex_lock (&rp->rp_lock);
      rp->rp_failed = true;
      pthread_mutex_unlock (&rp->rp_lock);
      break;
    }
    if (compare)
      verify_csum_submit_locked (p, slot, len, offset, &s->rs_waiter,
                                 &s->rs_msg);
    else if (peer_submit_locked (p, REPL_MSG_RESYNC_DATA,
                                 zeroes ? REPL_FLAG_ZEROES : 0, s->rs_buf,
                                 len, offset, &s->rs_waiter, false,
                                 &s->rs_msg, NULL) == 1 && marked != 0) {
      put_be64 (s->rs_marked, marked);
      peer_submit_locked (p, REPL_MSG_OUT_OF_SYNC, 0, s->rs_marked, len,
                          offset, &s->rs_waiter, false, &s->rs_marked_msg,
                          NULL);
    }
    pthread_mutex_unlock (&p->pr_lock);
    ilock_release (&node->n_ilock, &range);
  }
}

static void *
resync_worker_thread (void *arg)
{
  resync_worker (arg, 1, RESYNC_WORKERS);
  return NULL;
}

/* Returns 0 when every chunk that was set has been sent and
 * acknowledged, -1 if the connection failed. */
static int
resync_pass (struct conn *c, struct resync_slot *slots)
{
  struct resync_pass rp = {
    .rp_peer = c->c_peer, .rp_conn = c, .rp_slots = slots,
    .rp_persisted_ns = now_ns (),
  };
  pthread_t helper;
  unsigned i;
  bool held;
  int err;

  /* A pass lasts (the rate, pause-sync, the peer's ACKs) and uses no
   * list: both its threads run it without a pin, as the helper always
   * did (peers.c: a pin held long keeps removed peers from being
   * freed). */
  held = peers_wait_begin (c->c_peer->pr_node);
  pthread_mutex_init (&rp.rp_lock, NULL);
  err = pthread_create (&helper, NULL, resync_worker_thread, &rp);
  if (err == 0) {
    resync_worker (&rp, 0, RESYNC_WORKERS);
    pthread_join (helper, NULL);
  }
  else                          /* one thread does it all, just slower */
    resync_worker (&rp, 0, 1);
  pthread_mutex_destroy (&rp.rp_lock);

  for (i = 0; i < RESYNC_SLOTS; i++)
    waiter_wait (&slots[i].rs_waiter);
  peers_wait_end (c->c_peer->pr_node, held);
  return rp.rp_failed ? -1 : 0;
}

static void
resync (struct conn *c, struct resync_slot *slots)
{
  struct peer *p = c->c_peer;
  const char *name = p->pr_cfg->nc_name;
  uint64_t total, t0 = now_ns ();
  double secs;

  pthread_mutex_lock (&p->pr_lock);
  total = bitmap_dirty_bytes (&p->pr_bitmap);
  if (c->c_failed || peer_set_repl_locked (p, REPL_SYNC_SOURCE) == -1) {
    pthread_mutex_unlock (&p->pr_lock);
    return;
  }
  peer_update_pause_locked (p);
  p->pr_resync_start_ns = now_ns ();
  p->pr_resync_total = total;
  p->pr_resync_done = 0;
  if (total > 0)
    peer_set_disk_locked (p, true, REPL_DISK_INCONSISTENT);
  pthread_mutex_unlock (&p->pr_lock);

  if (total > 0)
    log_info ("peer %s: resync started, %" PRIu64 " bytes out of sync%s",
              name, total, p->pr_node->n_cfg.cf_csums
              ? " (csums: only chunks whose digests differ are sent)" : "");
  p->pr_csum_same = 0;
  if (p->pr_node->n_cfg.cf_csums && total > 0 && verify_csum_begin (p) == -1)
    log_error ("peer %s: csums: out of memory; sending every chunk", name);
  /* The target takes our generation from the UUIDs it last heard on
   * this connection: a fresh one at RESYNC_START, every one at
   * RESYNC_DONE (uuid_resync_finished_target).  Its hello's, or a
   * later UUIDS's, may be older than ours now: this resync may have
   * been started on a connection up for long (a resize's new area,
   * a diskless primary's AWAY that the worker tells the peers of
   * later).  With a stale tuple the target would stay in, or go back
   * to, a generation before ours, and be taken for that generation's
   * copy.  So ours go, on this connection, just before each. */
  if (sync_send_uuids_on (c) == -1 ||
      send_control (c, REPL_MSG_RESYNC_START, total) == -1)
    goto out;

  for (;;) {
    uint64_t left;

    if (resync_pass (c, slots) == -1)
      goto out;
    /* Bits are only set while disconnected, so one pass normally ends
     * it; go round again if anything is left. */
    pthread_mutex_lock (&p->pr_lock);
    left = bitmap_count (&p->pr_bitmap);
    pthread_mutex_unlock (&p->pr_lock);
    if (left == 0)
      break;
  }

  if (sync_send_uuids_on (c) == -1 ||
      send_control (c, REPL_MSG_RESYNC_DONE, 0) == -1)
    goto out;
  events_progress (p, total, total);
  gen_resync_finished_source (p->pr_node, p);
  meta_write_peer_bitmap (p->pr_node, p);
  secs = (now_ns () - t0) / 1e9;
  if (p->pr_csum_resync)
    log_info ("peer %s: resync finished, %" PRIu64 " bytes in %.3f s "
              "(%.0f MiB/s; %" PRIu64 " of them the same on both sides, "
              "not sent); peer is UpToDate", name, total, secs,
              total / 1048576.0 / secs, p->pr_csum_same);
  else
    log_info ("peer %s: resync finished, %" PRIu64 " bytes in %.3f s "
              "(%.0f MiB/s); peer is UpToDate", name, total, secs,
              total / 1048576.0 / secs);

 out:
  verify_csum_end (p);
  pthread_mutex_lock (&p->pr_lock);
  if (!c->c_failed)
    peer_set_repl_locked (p, REPL_ESTABLISHED);
  pthread_mutex_unlock (&p->pr_lock);
}

void *
resync_thread (void *arg)
{
  struct peer *p = arg;
  struct resync_slot slots[RESYNC_SLOTS];
  unsigned i;

  for (i = 0; i < RESYNC_SLOTS; i++) {
    waiter_init (&slots[i].rs_waiter, 0);
    slots[i].rs_buf = p->pr_resync_bufs[i];
  }

  for (;;) {
    struct conn *c;

    pthread_mutex_lock (&p->pr_lock);
    /* Not before sync_on_connect has taken the decision on the new
     * connection (c_decided): a kick meanwhile (forward_handle_away)
     * would start a resync the peer has not agreed to, bypassing the
     * bitmap exchange and the sync fence.  allow-two-primaries: a
     * Primary takes no resync and no verify (it would end the
     * connection: a split brain while we are Primary too); what is
     * marked for it waits until it is Secondary (role_handle_state
     * wakes us), or for the next connection.  (Diskless nodes and two
     * primaries do not go together: no fence then.) */
    while (!p->pr_stopping &&
           !(p->pr_state == CONN_CONNECTED && p->pr_conn->c_decided &&
             (p->pr_conn->c_fence_wanted ||
              ((p->pr_resync_wanted || p->pr_verify_wanted) &&
               p->pr_repl != REPL_WF_BITMAP_S &&
               !(p->pr_node->n_cfg.cf_two_primaries &&
                 p->pr_conn->c_role == REPL_ROLE_PRIMARY)))))
      pthread_cond_wait (&p->pr_resync_cond, &p->pr_lock);
    if (p->pr_stopping) {
      pthread_mutex_unlock (&p->pr_lock);
      break;
    }
    c = conn_get (p->pr_conn);  /* Connected: pr_conn is set */
    /* For the start and the end of the resync or verify (states,
     * generation, metadata), and for the sync fence: its passes and
     * pace waits, and the fence's wait, let go of it. */
    peers_enter (p->pr_node);
    if (c->c_fence_wanted) {
      /* A sync target's fence and bitmap (sync_on_connect), here
       * while the receive loop reads the connection. */
      c->c_fence_wanted = false;
      pthread_mutex_unlock (&p->pr_lock);
      sync_fence_then_bitmap (c);
    }
    else if (p->pr_verify_wanted && !p->pr_resync_wanted) {
      p->pr_verify_wanted = false;
      pthread_mutex_unlock (&p->pr_lock);
      verify_run (c);
    }
    else {
      p->pr_resync_wanted = false;
      pthread_mutex_unlock (&p->pr_lock);
      resync (c, slots);
    }
    peers_leave (p->pr_node);
    conn_put (c);
  }

  for (i = 0; i < RESYNC_SLOTS; i++)
    waiter_destroy (&slots[i].rs_waiter);
  return NULL;
}
