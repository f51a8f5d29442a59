/* nbdrepl: the primary's I/O path.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * A write, trim or zero:
 *   1. takes the interval lock on its range (overlapping requests are
 *      serialised, so every replica applies them in the same order);
 *   2. queues the message to every connected peer — the requesting thread
 *      usually sends it itself (peer-send.c) — and records the range in
 *      the dirty bitmap of every peer that is not connected;
 *   3. applies it to the local disk while the peers do the same;
 *   4. waits for every peer's acknowledgement (protocol C: on the peer's
 *      disk; B: received; A: sent).  A peer lost meanwhile has the range
 *      marked dirty instead; the client's request then succeeds only if
 *      the node still has quorum (role_complete_write).
 * FUA and flush wait, under every protocol, until the data is durable on
 * every connected peer.
 */
#include <config.h>

#include <assert.h>
#include <errno.h>
#include <stdlib.h>

#include "internal.h"
#include "log.h"

struct local_op {
  enum repl_msg_type lo_type;
  const void *lo_buf;
  bool lo_fua;
  bool lo_may_trim;
};

static int
local_apply (struct repl_node *node, const struct local_op *op,
             uint32_t count, uint64_t offset)
{
  struct volume *vol = &node->n_vol;
  int r;

  switch (op->lo_type) {
  case REPL_MSG_WRITE:
    r = volume_pwrite (vol, op->lo_buf, count, offset);
    break;
  case REPL_MSG_TRIM:
    r = volume_trim (vol, count, offset);
    break;
  case REPL_MSG_ZERO:
    r = volume_zero (vol, count, offset, op->lo_may_trim);
    break;
  case REPL_MSG_FLUSH:
    return volume_flush (vol);
  default:
    abort ();
  }
  if (r == 0 && op->lo_fua)
    r = volume_flush (vol);
  return r;
}

/* The local disk failed a write the peers may already have applied: the
 * client gets the error, and every peer gets the range back from our
 * disk by resync, so that all replicas hold the same bytes again.  (With
 * allow-two-primaries that resync waits while the peer is Primary:
 * resync.c.  The connection stays: losing it would be a split brain.) */
static void
mark_failed_local (struct repl_node *node, uint32_t count, uint64_t offset)
{
  size_t i;

  for (i = 0; i < PEERS (node)->pl_n; i++) {
    struct peer *p = PEERS (node)->pl_peers[i];

    pthread_mutex_lock (&p->pr_lock);
    bitmap_set_range (&p->pr_bitmap, offset, count);
    p->pr_resync_wanted = true;
    pthread_cond_signal (&p->pr_resync_cond);
    pthread_mutex_unlock (&p->pr_lock);
  }
}

/* Replicate one message (at most REPL_MAX_PAYLOAD of data) and apply it
 * locally; returns when the local disk and every connected peer are done.
 * While it waits, the writer reads the first peer's answer itself when
 * nobody else is reading that connection (peer-receive.c).
 *
 * With allow-two-primaries (tp, the range to hold, not NULL) the
 * message holds its own range (two-primaries.c), and is written to the
 * local disk before it is queued: what the other Primary's overlapping
 * writes wait for then never waits for the network. */
static int
replicate (struct repl_node *node, const struct local_op *op,
           uint32_t count, uint64_t offset, struct ilock_range *tp)
{
  struct out_msg msgs[REPL_MAX_NODES];
  struct peer_ticket tickets[REPL_MAX_NODES];
  /* In the write gate (peers.c) until it has sent, marked and written
   * all it will, with the list as it is now. */
  const unsigned gate = peers_io_begin (node);
  struct peer_list *pl = PEERS (node);
  uint16_t flags = 0;
  struct waiter w;
  size_t i;
  int r, saved_errno;
  bool lost = false;

  if (op->lo_fua)
    flags |= REPL_FLAG_FUA;
  if (op->lo_may_trim)
    flags |= REPL_FLAG_MAY_TRIM;

  waiter_init (&w, 0);
  for (i = 0; i < pl->pl_n; i++)
    tickets[i] = (struct peer_ticket) { .pt_conn = NULL,
                                        .pt_range = tp };
  if (tp != NULL) {
    /* Two storage nodes (config_load; adjust changes no node then):
     * our one peer's ticket. */
    assert (pl->pl_n == 1);
    ilock_acquire_local (&node->n_ilock, tp, offset, count, &tickets[0]);
    r = local_apply (node, op, count, offset);
    saved_errno = errno;
    ilock_mark (&node->n_ilock, tp, true, r == -1, r == -1);
    if (r == -1) {              /* nothing sent; the peers get the range
                                   from our disk (mark_failed_local) */
      waiter_destroy (&w);
      goto done;
    }
  }
  for (i = 0; i < pl->pl_n; i++) {
    if (pl->pl_peers[i]->pr_cfg->nc_diskless)
      continue;                 /* a diskless secondary keeps nothing */
    if (peer_submit (pl->pl_peers[i], op->lo_type, flags, op->lo_buf,
                     op->lo_type == REPL_MSG_FLUSH ? 0 : count,
                     op->lo_type == REPL_MSG_FLUSH ? 0 : offset, &w,
                     &msgs[i], &tickets[i]) == 0) {
      lost = true;              /* away: the range is in its bitmap */
      if (tp != NULL)
        ilock_mark (&node->n_ilock, tp, false, true, false); /* not sent */
    }
  }
  if (tp == NULL) {
    r = local_apply (node, op, count, offset);
    saved_errno = errno;
  }
  /* Read each peer's answer ourselves, one connection after the other,
   * where nobody else is reading it; elsewhere whoever reads completes
   * us. */
  for (i = 0; i < pl->pl_n; i++)
    ticket_wait_own_ack (&tickets[i]);
  waiter_wait (&w);
  waiter_destroy (&w);
  /* A peer lost while we waited: its connection failed the message
   * without an answer (and put the range in its bitmap). */
  for (i = 0; i < pl->pl_n; i++)
    if (tickets[i].pt_conn != NULL && !tickets[i].pt_answered)
      lost = true;
 done:
  /* The range goes before the tickets it points to. */
  if (tp != NULL)
    ilock_release (&node->n_ilock, tp);
  for (i = 0; i < pl->pl_n; i++)
    ticket_release (&tickets[i]);
  if (r == -1 && op->lo_type != REPL_MSG_FLUSH)
    mark_failed_local (node, count, offset);
  /* What follows may wait for quorum, which a peer adjust adds may be
   * what brings it back. */
  peers_io_end (node, gate);
  if (r == -1) {
    errno = saved_errno;
    return -1;
  }
  if (lost && tp != NULL)
    tp_wait_lost (node);
  return role_complete_write (node, lost);
}

/* role_check_write, which may wait long (suspended for want of quorum,
 * fencing): without the request's pin meanwhile (it uses no peer). */
static int
check_write (struct repl_node *node)
{
  bool held = peers_wait_begin (node);
  int r = role_check_write (node);

  peers_wait_end (node, held);
  return r;
}

/* ranged, with allow-two-primaries: the activity log first (no range is
 * held yet), leaving room in it for a peer write, then one range per
 * message. */
static int
ranged_two_primaries (struct repl_node *node, struct local_op *op,
                      uint32_t count, uint64_t offset)
{
  struct ilock_range range;
  uint64_t al_offset = offset;
  uint32_t al_count = count;
  int r = 0;

  if (check_write (node) == -1)
    return -1;
  if (atomic_load (&node->n_gen_pending))
    gen_before_write (node);
  atomic_fetch_add (&node->n_requests_in_flight, 1);
  /* Room is left in the log for a write of the other Primary
   * (two-primaries.c). */
  if (meta_al_begin_reserve (node, offset, count,
                             tp_al_reserve (node, NULL)) == -1) {
    atomic_fetch_sub (&node->n_requests_in_flight, 1);
    return -1;
  }
  while (count > 0 && r == 0) {
    uint32_t n = count < REPL_MAX_PAYLOAD ? count : REPL_MAX_PAYLOAD;

    r = replicate (node, op, n, offset, &range);
    count -= n;
    offset += n;
    if (op->lo_buf)
      op->lo_buf = (const char *) op->lo_buf + n;
  }
  meta_al_end (node, al_offset, al_count);
  atomic_fetch_sub (&node->n_requests_in_flight, 1);
  return r;
}

/* Writes, trims and zeroes: split into messages the wire allows, all
 * under one interval lock so the request is atomic towards overlapping
 * requests.  With allow-two-primaries each message holds its own range
 * (replicate): the other Primary's writes are ordered with ours message
 * by message (two-primaries.c). */
static int
ranged (struct repl_node *node, struct local_op *op, uint32_t count,
        uint64_t offset)
{
  struct ilock_range range;
  uint64_t al_offset;
  uint32_t al_count;
  int r = 0;

  /* Two storage Primaries (the only two nodes); beside diskless nodes
   * the other Primary is diskless and writes through us (diskless.c):
   * our writes go as a single Primary's. */
  if (!node->n_diskless && node->n_cfg.cf_two_primaries &&
      !node->n_cfg.cf_has_diskless)
    return ranged_two_primaries (node, op, count, offset);

  if (node->n_diskless)
    return diskless_ranged (node, op->lo_type, op->lo_buf, count, offset,
                            (op->lo_fua ? REPL_FLAG_FUA : 0) |
                            (op->lo_may_trim ? REPL_FLAG_MAY_TRIM : 0));
  if (check_write (node) == -1)
    return -1;
  if (atomic_load (&node->n_gen_pending))
    gen_before_write (node);
  atomic_fetch_add (&node->n_requests_in_flight, 1);
  ilock_acquire (&node->n_ilock, &range, offset, count);
  if (meta_al_begin (node, offset, count) == -1) {
    ilock_release (&node->n_ilock, &range);
    atomic_fetch_sub (&node->n_requests_in_flight, 1);
    return -1;
  }
  al_offset = offset;
  al_count = count;
  while (count > 0 && r == 0) {
    uint32_t n = count < REPL_MAX_PAYLOAD ? count : REPL_MAX_PAYLOAD;

    r = replicate (node, op, n, offset, NULL);
    count -= n;
    offset += n;
    if (op->lo_buf)
      op->lo_buf = (const char *) op->lo_buf + n;
  }
  meta_al_end (node, al_offset, al_count);
  ilock_release (&node->n_ilock, &range);
  atomic_fetch_sub (&node->n_requests_in_flight, 1);
  return r;
}

int
engine_pwrite (struct repl_node *node, const void *buf, uint32_t count,
               uint64_t offset, bool fua)
{
  struct local_op op = { .lo_type = REPL_MSG_WRITE, .lo_buf = buf,
                         .lo_fua = fua };
  PEERS_PIN_FOR_CURRENT_SCOPE (node);

  atomic_fetch_add (&node->n_writes, 1);
  atomic_fetch_add (&node->n_write_bytes, count);
  return ranged (node, &op, count, offset);
}

int
engine_trim (struct repl_node *node, uint32_t count, uint64_t offset,
             bool fua)
{
  struct local_op op = { .lo_type = REPL_MSG_TRIM, .lo_fua = fua };
  PEERS_PIN_FOR_CURRENT_SCOPE (node);

  return ranged (node, &op, count, offset);
}

int
engine_zero (struct repl_node *node, uint32_t count, uint64_t offset,
             bool may_trim, bool fua)
{
  struct local_op op = { .lo_type = REPL_MSG_ZERO, .lo_fua = fua,
                         .lo_may_trim = may_trim };
  PEERS_PIN_FOR_CURRENT_SCOPE (node);

  return ranged (node, &op, count, offset);
}

int
engine_flush (struct repl_node *node)
{
  struct local_op op = { .lo_type = REPL_MSG_FLUSH };
  int r;
  PEERS_PIN_FOR_CURRENT_SCOPE (node);

  if (node->n_diskless)
    return diskless_ranged (node, REPL_MSG_FLUSH, NULL, 0, 0, 0);
  if (check_write (node) == -1)
    return -1;
  atomic_fetch_add (&node->n_requests_in_flight, 1);
  r = replicate (node, &op, 0, 0, NULL);
  atomic_fetch_sub (&node->n_requests_in_flight, 1);
  return r;
}

int
engine_pread (struct repl_node *node, void *buf, uint32_t count,
              uint64_t offset)
{
  PEERS_PIN_FOR_CURRENT_SCOPE (node);

  atomic_fetch_add (&node->n_reads, 1);
  atomic_fetch_add (&node->n_read_bytes, count);
  if (node->n_diskless)
    return diskless_pread (node, buf, count, offset);
  return volume_pread (&node->n_vol, buf, count, offset);
}
