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

#include <errno.h>
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

    if (c != NULL && c->c_role == REPL_ROLE_PRIMARY) {
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
