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
 */
#include <config.h>

#include <stdlib.h>

#include "internal.h"
#include "log.h"

struct resync_slot {
  struct waiter rs_waiter;      /* pending while the chunk is in flight */
  struct out_msg rs_msg;
  void *rs_buf;
};

static bool
still_connected (struct peer *p, uint64_t gen)
{
  return p->pr_state == CONN_CONNECTED && p->pr_gen == gen;
}

/* Send a control message and wait until the peer acknowledges it (or
 * the connection fails).  Returns 0 if acknowledged on this connection. */
static int
send_control (struct peer *p, uint64_t gen, enum repl_msg_type type,
              uint64_t offset)
{
  struct waiter w;
  struct out_msg om;
  int r;

  waiter_init (&w, 0);
  pthread_mutex_lock (&p->pr_lock);
  r = still_connected (p, gen) &&
      peer_submit_locked (p, type, 0, NULL, 0, offset, &w, false, &om,
                          NULL) == 1;
  pthread_mutex_unlock (&p->pr_lock);
  waiter_wait (&w);
  waiter_destroy (&w);
  if (!r)
    return -1;
  pthread_mutex_lock (&p->pr_lock);
  r = still_connected (p, gen) ? 0 : -1;
  pthread_mutex_unlock (&p->pr_lock);
  return r;
}

/* One pass over the bitmap.  Returns 0 when every chunk that was set
 * has been sent and acknowledged, -1 if the connection failed. */
static int
resync_pass (struct peer *p, uint64_t gen, struct resync_slot *slots)
{
  struct repl_node *node = p->pr_node;
  const uint32_t granularity = p->pr_bitmap.bm_granularity;
  const uint64_t max_bits = RESYNC_MAX_BYTES / granularity;
  uint64_t bit = 0;
  unsigned i = 0;
  int ret = 0;

  for (;;) {
    struct resync_slot *s = &slots[i];
    struct ilock_range range;
    uint64_t end, offset, len;
    int64_t first;

    i = (i + 1) % RESYNC_SLOTS;
    waiter_wait (&s->rs_waiter);        /* the slot's last chunk is done */

    pthread_mutex_lock (&p->pr_lock);
    if (!still_connected (p, gen) || p->pr_stopping) {
      pthread_mutex_unlock (&p->pr_lock);
      ret = -1;
      break;
    }
    first = bitmap_next_set (&p->pr_bitmap, bit);
    if (first >= 0) {
      end = bitmap_next_clear (&p->pr_bitmap, first);
      if (end - first > max_bits)
        end = first + max_bits;
    }
    pthread_mutex_unlock (&p->pr_lock);
    if (first < 0)
      break;

    offset = (uint64_t) first * granularity;
    len = (end - first) * granularity;
    if (offset + len > node->n_vol.vol_size)
      len = node->n_vol.vol_size - offset;
    bit = end;

    ilock_acquire (&node->n_ilock, &range, offset, len);
    if (volume_pread (&node->n_vol, s->rs_buf, len, offset) == -1) {
      ilock_release (&node->n_ilock, &range);
      peer_fail (p, gen, "resync stopped: cannot read our own disk");
      ret = -1;
      break;
    }
    pthread_mutex_lock (&p->pr_lock);
    peer_submit_locked (p, REPL_MSG_RESYNC_DATA, 0, s->rs_buf, len, offset,
                        &s->rs_waiter, false, &s->rs_msg, NULL);
    pthread_mutex_unlock (&p->pr_lock);
    ilock_release (&node->n_ilock, &range);
  }

  for (i = 0; i < RESYNC_SLOTS; i++)
    waiter_wait (&slots[i].rs_waiter);
  return ret;
}

static void
resync (struct peer *p, uint64_t gen, struct resync_slot *slots)
{
  const char *name = p->pr_cfg->nc_name;
  uint64_t total, t0 = now_ns ();

  pthread_mutex_lock (&p->pr_lock);
  total = bitmap_dirty_bytes (&p->pr_bitmap);
  p->pr_resyncing = true;
  p->pr_resync_total = total;
  p->pr_resync_done = 0;
  if (total > 0)
    p->pr_disk = REPL_DISK_INCONSISTENT;
  pthread_mutex_unlock (&p->pr_lock);

  if (total > 0)
    log_info ("peer %s: resync started, %" PRIu64 " bytes out of sync",
              name, total);
  if (send_control (p, gen, REPL_MSG_RESYNC_START, total) == -1)
    goto out;

  for (;;) {
    uint64_t left;

    if (resync_pass (p, gen, slots) == -1)
      goto out;
    /* Bits are only set while disconnected, so one pass normally ends
     * it; go round again if anything is left. */
    pthread_mutex_lock (&p->pr_lock);
    left = bitmap_count (&p->pr_bitmap);
    pthread_mutex_unlock (&p->pr_lock);
    if (left == 0)
      break;
  }

  if (send_control (p, gen, REPL_MSG_RESYNC_DONE, 0) == -1)
    goto out;
  gen_resync_finished_source (p->pr_node, p);
  meta_write_peer_bitmap (p->pr_node, p);
  log_info ("peer %s: resync finished, %" PRIu64 " bytes in %.1f s; peer is UpToDate",
            name, total, (now_ns () - t0) / 1e9);

 out:
  pthread_mutex_lock (&p->pr_lock);
  if (p->pr_gen == gen)
    p->pr_resyncing = false;
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
    uint64_t gen;

    pthread_mutex_lock (&p->pr_lock);
    while (!p->pr_stopping &&
           !(p->pr_resync_wanted && p->pr_state == CONN_CONNECTED &&
             !p->pr_bitmap_pending))
      pthread_cond_wait (&p->pr_resync_cond, &p->pr_lock);
    if (p->pr_stopping) {
      pthread_mutex_unlock (&p->pr_lock);
      break;
    }
    p->pr_resync_wanted = false;
    gen = p->pr_gen;
    pthread_mutex_unlock (&p->pr_lock);

    resync (p, gen, slots);
  }

  for (i = 0; i < RESYNC_SLOTS; i++)
    waiter_destroy (&slots[i].rs_waiter);
  return NULL;
}
