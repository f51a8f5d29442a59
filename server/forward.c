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
   * (role_changed), and a client may write on it meanwhile.  A storage
   * peer that is not Primary sends no writes (no diskless nodes with
   * allow-two-primaries). */
  if (node_role (node) == REPL_ROLE_PRIMARY)
    return node->n_cfg.cf_two_primaries && !c->c_peer_diskless;
  if (c->c_role == REPL_ROLE_PRIMARY)
    return true;
  return !c->c_peer_diskless && node_primary_is_diskless_or_none (node);
}

static bool
in_mask (uint32_t mask, const struct peer *q)
{
  return (mask & (UINT32_C (1) << q->pr_cfg->nc_id)) != 0;
}

/* Mark [offset, offset + count) out of sync for q, and if q is connected
 * to us, resync it from us (we are its only source then: a diskless
 * primary's storage nodes are at most two). */
static void
mark_for (struct peer *q, uint64_t offset, uint64_t count)
{
  pthread_mutex_lock (&q->pr_lock);
  bitmap_set_range (&q->pr_bitmap, offset, count);
  if (q->pr_state == CONN_CONNECTED) {
    q->pr_resync_wanted = true;
    pthread_cond_signal (&q->pr_resync_cond);
  }
  pthread_mutex_unlock (&q->pr_lock);
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
  if (fresh != 0 && gen_start_for_away (node, mask, fresh) == -1) {
    conn_fail (c, "cannot write metadata");
    return -2;
  }
  pthread_mutex_lock (&p->pr_lock);
  c->c_away_mask = mask;
  pthread_mutex_unlock (&p->pr_lock);
  if (fresh == 0)
    return 0;
  /* An away node connected to us is behind the new generation until we
   * have resynced it (what it lacks is in our bitmap, possibly nothing),
   * after which it takes the generation from us. */
  for (i = 0; i < PEERS (node)->pl_n; i++) {
    struct peer *q = PEERS (node)->pl_peers[i];

    if (q == p || q->pr_cfg->nc_diskless || !in_mask (mask, q))
      continue;
    pthread_mutex_lock (&q->pr_lock);
    if (q->pr_state == CONN_CONNECTED) {
      q->pr_resync_wanted = true;
      pthread_cond_signal (&q->pr_resync_cond);
    }
    pthread_mutex_unlock (&q->pr_lock);
  }
  return 0;
}

/* Before applying message h from p: queue it to every connected away
 * node, mark it for the others.  Returns how many were queued (the
 * caller waits for w, then msgs may go). */
int
forward_submit (struct conn *c, const struct repl_hdr *h,
                const uint8_t *payload, struct waiter *w,
                struct out_msg msgs[REPL_MAX_NODES])
{
  struct peer *p = c->c_peer;
  struct repl_node *node = p->pr_node;
  uint32_t mask;
  size_t i;
  int n = 0;

  pthread_mutex_lock (&p->pr_lock);
  mask = c->c_away_mask;
  pthread_mutex_unlock (&p->pr_lock);
  if (mask == 0)
    return 0;
  for (i = 0; i < PEERS (node)->pl_n; i++) {
    struct peer *q = PEERS (node)->pl_peers[i];
    bool data = h->type != REPL_MSG_FLUSH;

    if (q == p || q->pr_cfg->nc_diskless || !in_mask (mask, q))
      continue;
    pthread_mutex_lock (&q->pr_lock);
    if (q->pr_state == CONN_CONNECTED &&
        peer_submit_locked (q, h->type, h->flags & (REPL_FLAG_FUA |
                                                    REPL_FLAG_MAY_TRIM),
                            payload, data ? h->count : 0,
                            data ? h->offset : 0, w, false, &msgs[n],
                            NULL) == 1)
      n++;
    else if (data)
      bitmap_set_range (&q->pr_bitmap, h->offset, h->count);
    pthread_mutex_unlock (&q->pr_lock);
  }
  return n;
}

int
forward_handle_out_of_sync (struct conn *c, const struct repl_hdr *h, const uint8_t *payload)
{
  struct peer *p = c->c_peer;
  struct repl_node *node = p->pr_node;
  uint64_t mask = get_be64 (payload);
  size_t i;

  if (!c->c_peer_diskless || mask > UINT32_MAX) {
    conn_fail (c, "protocol error: OUT_OF_SYNC for nodes 0x%" PRIx64
               " from %s", mask, c->c_peer_diskless ? "our primary"
               : "a peer that is not a diskless primary");
    return -1;
  }
  for (i = 0; i < PEERS (node)->pl_n; i++) {
    struct peer *q = PEERS (node)->pl_peers[i];

    if (q != p && !q->pr_cfg->nc_diskless && in_mask (mask, q)) {
      log_info ("peer %s: %" PRIu32 " bytes at offset %" PRIu64 " were in "
                "flight to it when the primary lost it: marked out of sync",
                q->pr_cfg->nc_name, h->count, h->offset);
      mark_for (q, h->offset, h->count);
    }
  }
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
