/* nbdrepl: two diskless Primaries (allow-two-primaries).
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * A live migration between two diskless hosts makes both Primary for a
 * while.  Their writes must reach every storage node in one order, so
 * only one of them writes to the storage nodes: the *writer*.  The
 * other sends every write and read to the writer over their direct
 * connection, and the writer takes them into its own write path
 * (diskless_ranged: its interval lock, its generations, AWAY), as a
 * storage Primary takes a diskless Primary's writes (two-primaries.c).
 * The storage nodes see one writer, as with one diskless Primary.
 *
 * Who writes.  A diskless node promoted while other diskless nodes are
 * configured decides first (n_dl_deciding; its clients wait):
 *
 *  1. It tells every connected diskless peer that it is Primary and
 *     deciding (STATE, count = its own bit), and waits (at most net:
 *     timeout) for each to answer ROUTED with what it is, read under
 *     the same n_lock hold that notes us among its candidates if it is
 *     deciding too: WRITER, PROMOTING, THROUGH (a Primary writing
 *     through another: we would be a third) or nothing (Secondary).
 *  2. A WRITER is written through.  Two nodes deciding at once see each
 *     other as PROMOTING (each answers the other's STATE after its own
 *     went out, or notes the other before it decides): the lower node
 *     id writes, the higher writes through it, on both sides alike.
 *  3. Then every peer hears where our writes go (STATE count: 0 for
 *     straight, else the writer's bit), before any client writes.
 *
 * A storage node keeps the diskless Primaries whose STATE says they
 * write straight (n_dl_writers), in the order it heard it.  A write
 * straight from a diskless Primary while an earlier writer is
 * connected waits (a ping timeout and a ping interval) for that one's
 * loss, demotion or route to reach us, and is refused after: a diskless
 * Primary promoted while cut off from the other one does not write
 * beside it.  Each storage node tells the diskless nodes which writers
 * it follows besides them (STATE count), as it does for a storage
 * Primary.
 *
 * When the writer is lost or demoted, the other writes straight, but
 * only once no storage node follows the writer any more (their STATEs
 * say so: diskless_route_update), and it says so first (STATE count 0,
 * queued ahead of its writes): what went through the writer and was
 * not answered is written again, straight (the same bytes; our
 * interval lock holds the range).  Cut off from the writer only, it
 * waits, and its writes fail (EIO) after the bounded wait: it writes
 * through the writer again once the link is back.  The storage nodes
 * reconcile their activity logs after losing the writer, as after
 * losing any diskless Primary (peer-sync.c), not after losing the other
 * one (nothing of it reached them but through the writer).
 *
 * The writer applies the other's requests one at a time, in its
 * receive loop (a write waits for the storage nodes' answers): the
 * other's queue depth is one at the writer.  A request the writer
 * cannot carry out (no quorum, no storage node) ends the connection:
 * the other then fails it too, after the same bounded wait.
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "internal.h"
#include "log.h"

static uint32_t
bit_of (unsigned id)
{
  return UINT32_C (1) << id;
}

/* Does this node decide, when promoted, whom it writes through?  A
 * diskless node with allow-two-primaries and another diskless node in
 * the resource. */
bool
dl_decides (struct repl_node *node)
{
  size_t i;

  if (!node->n_diskless || !node->n_cfg.cf_two_primaries)
    return false;
  for (i = 0; i < PEERS (node)->pl_n; i++)
    if (PEERS (node)->pl_peers[i]->pr_cfg->nc_diskless)
      return true;
  return false;
}

/* Where our writes go, as our STATE and HELLO_STATE say it (wire.h):
 * 0 straight (or not Primary), our own bit while deciding, the
 * writer's bit.  n_lock held. */
uint32_t
dl_via_mask_locked (const struct repl_node *node)
{
  ASSERT_LOCKED (&node->n_lock);
  if (!node->n_diskless || node->n_role != REPL_ROLE_PRIMARY)
    return 0;
  if (node->n_dl_deciding)
    return bit_of (node->n_self->nc_id);     /* dl_via_deciding */
  return node->n_dl_via >= 0 ? bit_of (node->n_dl_via) : 0;
}

/* A diskless peer on c says (STATE or HELLO_STATE) that it has role
 * `role` and that its writes go by `via`: a well-formed mask, and, on
 * a diskless node that is the writer, no second writer.  Stored in
 * c_dl_via.  Returns 0, or -1 with the reason in err. */
int
dl_check_via (struct repl_node *node, struct conn *c, uint32_t role,
              uint32_t via, char *err, size_t errlen)
{
  struct peer *p = c->c_peer, *w = NULL;
  bool writer;

  if (via != 0) {
    if (role != REPL_ROLE_PRIMARY || (via & (via - 1)) != 0 ||
        (unsigned) __builtin_ctz (via) > REPL_MAX_NODE_ID) {
      snprintf (err, errlen, "protocol error: a diskless %s says its "
                "writes go by node mask 0x%" PRIx32, role_name (role), via);
      return -1;
    }
    if ((unsigned) __builtin_ctz (via) != node->n_self->nc_id &&
        (w = node_find_peer (node, __builtin_ctz (via))) == NULL) {
      snprintf (err, errlen, "protocol error: a diskless Primary says "
                "its writes go through node id %d, not in the resource",
                __builtin_ctz (via));
      return -1;
    }
    if (via != bit_of (p->pr_cfg->nc_id) &&
        ((w != NULL && !w->pr_cfg->nc_diskless) ||
         (w == NULL && !node->n_diskless))) {
      snprintf (err, errlen, "protocol error: a diskless Primary says "
                "its writes go through a storage node");
      return -1;
    }
  }
  if (node->n_diskless && role == REPL_ROLE_PRIMARY && via == 0) {
    pthread_mutex_lock (&node->n_lock);
    writer = node->n_role == REPL_ROLE_PRIMARY && !node->n_dl_deciding &&
             node->n_dl_via < 0 && node->n_dl_route < 0;
    pthread_mutex_unlock (&node->n_lock);
    if (writer) {
      snprintf (err, errlen, "refusing it: the peer and this node are "
                "diskless Primaries that both write straight to the "
                "storage nodes (promoted while apart?): demote one of "
                "them (replctl secondary)");
      return -1;
    }
  }
  pthread_mutex_lock (&p->pr_lock);
  c->c_dl_via = via;
  pthread_mutex_unlock (&p->pr_lock);
  return 0;
}

/* ---- a storage node ---------------------------------------------- */

/* Diskless peer p writes straight to us (writer), or no longer (or is
 * gone): n_dl_writers, in the order heard; a change is told to the
 * diskless nodes (the writers they may not write beside).  n_lock
 * held. */
void
dl_note_writer_locked (struct repl_node *node, const struct peer *p,
                       bool writer)
{
  uint32_t bit = bit_of (p->pr_cfg->nc_id);

  ASSERT_LOCKED (&node->n_lock);
  if (node->n_diskless || writer == ((node->n_dl_writers & bit) != 0))
    return;
  if (writer) {
    node->n_dl_writers |= bit;
    node->n_dl_writer_since[p->pr_cfg->nc_id] = ++node->n_dl_writer_seq;
  }
  else
    node->n_dl_writers &= ~bit;
  node_state_changed (node);
  node->n_dl_follow_seq++;
  pthread_cond_broadcast (&node->n_cond);
  if (tp_routes_diskless (node))
    worker_post_locked (node, WORK_ANNOUNCE);
}

/* The writers that diskless peer p, writing straight, would write
 * beside: those before it, or all if it is none.  n_lock held. */
static uint32_t
earlier_writers_locked (const struct repl_node *node, const struct peer *p)
{
  unsigned id = p->pr_cfg->nc_id;
  uint32_t mask = 0, others = node->n_dl_writers & ~bit_of (id);
  bool writer = (node->n_dl_writers & bit_of (id)) != 0;

  while (others != 0) {
    unsigned q = __builtin_ctz (others);

    others &= others - 1;
    if (!writer ||
        node->n_dl_writer_since[q] < node->n_dl_writer_since[id])
      mask |= bit_of (q);
  }
  return mask;
}

/* What a diskless peer p follows through us, for our STATE to it: the
 * storage Primaries and the other writers.  n_lock held. */
uint32_t
dl_follows_for_locked (const struct repl_node *node, const struct peer *p)
{
  ASSERT_LOCKED (&node->n_lock);
  return node->n_primaries_storage |
         (node->n_dl_writers & ~bit_of (p->pr_cfg->nc_id));
}

/* A data message straight from diskless Primary c: refused while an
 * earlier writer is connected here, after a bounded wait (a ping
 * timeout and a ping interval) for its loss, demotion or route to
 * reach us (nobody reads c meanwhile: c_rx_forwarding).  True:
 * refuse. */
bool
dl_beside_writer (struct conn *c)
{
  struct peer *p = c->c_peer;
  struct repl_node *node = p->pr_node;
  struct timespec ts;
  uint32_t earlier, via;

  if (node->n_diskless || !c->c_peer_diskless ||
      !node->n_cfg.cf_two_primaries)
    return false;
  /* One that writes through another, or is deciding, sends nothing
   * straight (a switch to straight is told first). */
  pthread_mutex_lock (&p->pr_lock);
  via = c->c_dl_via;
  pthread_mutex_unlock (&p->pr_lock);
  if (via != 0)
    return true;
  pthread_mutex_lock (&node->n_lock);
  earlier = earlier_writers_locked (node, p);
  pthread_mutex_unlock (&node->n_lock);
  if (earlier == 0)
    return false;
  ts = deadline_after_ns ((node->n_cfg.cf_ping_timeout_ms +
                           node->n_cfg.cf_ping_interval_ms) *
                          UINT64_C (1000000));
  atomic_store (&c->c_rx_forwarding, true);
  pthread_mutex_lock (&node->n_lock);
  while ((earlier = earlier_writers_locked (node, p)) != 0 &&
         !node->n_stopping &&
         pthread_cond_timedwait (&node->n_cond, &node->n_lock,
                                 &ts) != ETIMEDOUT)
    ;
  earlier = earlier_writers_locked (node, p);
  pthread_mutex_unlock (&node->n_lock);
  c->c_last_recv_ns = now_ns ();
  atomic_store (&c->c_rx_forwarding, false);
  if (earlier == 0)
    log_info ("peer %s: writes to this node straight, now that the "
              "diskless Primary before it is gone",
              p->pr_cfg->nc_name);
  return earlier != 0;
}

/* ---- a diskless node promoting, and its peers' answers ------------ */

/* Peer c said (STATE, or HELLO_STATE with hello) its role and via
 * mask.  A diskless node promoting, to us a diskless node: answer
 * ROUTED with what we are (see above), noting it among our candidates
 * if we decide too. */
void
dl_answer_promoting (struct conn *c, uint32_t role, uint32_t via,
                     bool hello)
{
  struct peer *p = c->c_peer;
  struct repl_node *node = p->pr_node;
  uint16_t flags = 0;
  uint64_t count;

  if (!node->n_diskless || !c->c_peer_diskless ||
      !node->n_cfg.cf_two_primaries || role != REPL_ROLE_PRIMARY ||
      !dl_via_deciding (via, p->pr_cfg->nc_id))
    return;

  pthread_mutex_lock (&node->n_lock);
  if (node->n_role == REPL_ROLE_PRIMARY) {
    if (node->n_dl_deciding) {
      flags = REPL_FLAG_PROMOTING;
      node->n_dl_candidates |= bit_of (p->pr_cfg->nc_id);
    }
    else if (node->n_dl_via >= 0 || node->n_dl_route >= 0)
      flags = REPL_FLAG_THROUGH;
    else
      flags = REPL_FLAG_WRITER;
  }
  pthread_mutex_unlock (&node->n_lock);

  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&p->pr_lock);
  count = hello ? 1 : ++c->c_dl_taken;
  if (hello)
    c->c_dl_taken = 1;
  /* One queued before, not yet sent, is done first (bounded: the send
   * timeout fails the connection). */
  while (c->c_routed_queued && !c->c_routed_msg.om_done && !c->c_failed)
    pthread_cond_wait (&p->pr_cond, &p->pr_lock);
  if (c->c_failed)
    return;
  out_msg_init (&c->c_routed_msg, REPL_MSG_ROUTED, flags, 0, 0, count,
                NULL, 0);
  c->c_routed_queued = true;
  conn_queue_locked (c, &c->c_routed_msg);
}

/* ROUTED from diskless peer c: its answer to our promotion.  What it
 * says is noted (n_lock) before the count that the promotion waits
 * for (pr_lock).  Returns 0, or -1 once the connection has failed. */
int
dl_handle_routed (struct conn *c, const struct repl_hdr *h)
{
  struct peer *p = c->c_peer;
  struct repl_node *node = p->pr_node;
  uint16_t f = h->flags;
  uint64_t sent;

  pthread_mutex_lock (&p->pr_lock);
  sent = c->c_tp_primary_states;
  pthread_mutex_unlock (&p->pr_lock);
  if (h->offset > sent || (f & (f - 1)) != 0) {
    conn_fail (c, "protocol error: ROUTED %" PRIu64 " (flags 0x%" PRIx16
               ") from a diskless node (we sent %" PRIu64 " STATEs "
               "saying we promote)", h->offset, f, sent);
    return -1;
  }
  pthread_mutex_lock (&node->n_lock);
  if (node->n_dl_deciding) {
    if (f & REPL_FLAG_WRITER)
      node->n_dl_answer_writer = p->pr_cfg->nc_id;
    if (f & REPL_FLAG_PROMOTING)
      node->n_dl_candidates |= bit_of (p->pr_cfg->nc_id);
    if (f & REPL_FLAG_THROUGH)
      node->n_dl_answer_through = true;
  }
  pthread_mutex_unlock (&node->n_lock);
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&p->pr_lock);
  if (h->offset > c->c_tp_routed)
    c->c_tp_routed = h->offset;
  pthread_cond_broadcast (&p->pr_cond);
  return 0;
}

/* The decision (see above), from the answers.  Returns 0, or -1 with
 * the reason in err (a third Primary). */
static int
decide_locked (struct repl_node *node, char *err, size_t errlen)
{
  unsigned self = node->n_self->nc_id;
  uint32_t cand = node->n_dl_candidates & ~bit_of (self);
  int via = -1;

  ASSERT_LOCKED (&node->n_lock);
  /* (Beside a storage Primary we write through it: diskless.c.) */
  if (node->n_dl_answer_through || (cand & (cand - 1)) != 0 ||
      (cand != 0 && node->n_dl_answer_writer >= 0) ||
      (node->n_primaries_storage != 0 &&
       (cand != 0 || node->n_dl_answer_writer >= 0))) {
    snprintf (err, errlen, "two other nodes are Primary, or are being "
              "promoted, already (allow-two-primaries allows two)");
    return -1;
  }
  if (node->n_primaries_storage != 0)
    via = -1;
  else if (node->n_dl_answer_writer >= 0)
    via = node->n_dl_answer_writer;
  else if (cand != 0 && (unsigned) __builtin_ctz (cand) < self)
    via = __builtin_ctz (cand);
  node->n_dl_via = via;
  node->n_dl_deciding = false;
  node_state_changed (node);
  node->n_dl_follow_seq++;
  pthread_cond_broadcast (&node->n_cond);
  return 0;
}

/* Test hook (tests/test-two-diskless-primaries.sh): NBDREPL_TEST_DL_
 * DECIDE_DELAY_MS=N makes a promotion wait N ms after it asked the
 * diskless peers, so that two promotions cross. */
static void
decide_delay (void)
{
  static long long ms = -1;

  test_hook_sleep ("NBDREPL_TEST_DL_DECIDE_DELAY_MS", &ms);
}

/* This diskless node became Primary (role_changed): ask the diskless
 * peers and decide (see above), bounded by net: timeout.  A diskless
 * Secondary that does not answer is dropped.  Returns 0, or -1 with
 * the reason in err: the caller undoes the promotion. */
int
dl_take_routes (struct repl_node *node, char *err, size_t errlen)
{
  uint64_t deadline = now_ns () +
                      node->n_cfg.cf_timeout_ms * UINT64_C (1000000);
  struct timespec ts = deadline_at_ns (deadline);
  int r, via;
  size_t i;

  tp_wait_diskless_handshakes (node, deadline);
  for (i = 0; i < PEERS (node)->pl_n; i++)
    if (PEERS (node)->pl_peers[i]->pr_cfg->nc_diskless)
      role_tell_state (PEERS (node)->pl_peers[i]);
  decide_delay ();
  for (i = 0; i < PEERS (node)->pl_n; i++) {
    struct peer *q = PEERS (node)->pl_peers[i];
    struct conn *c;
    bool answered, primary;

    pthread_mutex_lock (&q->pr_lock);
    if (!q->pr_cfg->nc_diskless || (c = peer_conn_locked (q)) == NULL) {
      pthread_mutex_unlock (&q->pr_lock);
      continue;
    }
    /* The wait lets go of pr_lock: our reference keeps c. */
    conn_get (c);
    while (c->c_tp_routed < c->c_tp_primary_states && !c->c_failed &&
           now_ns () < deadline)
      pthread_cond_timedwait (&q->pr_cond, &q->pr_lock, &ts);
    answered = c->c_tp_routed >= c->c_tp_primary_states;
    primary = c->c_role == REPL_ROLE_PRIMARY;
    if (!answered && !c->c_failed)
      conn_fail_locked (c, "no answer within net: timeout to our "
                        "promotion (allow-two-primaries)");
    pthread_mutex_unlock (&q->pr_lock);
    conn_put (c);
    if (!answered && primary) {
      snprintf (err, errlen, "diskless Primary %s was lost, or did not "
                "answer, while this node was promoted (allow-two-"
                "primaries): it may write straight to the storage nodes; "
                "try again once it is connected", q->pr_cfg->nc_name);
      goto undo;
    }
  }
  pthread_mutex_lock (&node->n_lock);
  r = node->n_role == REPL_ROLE_PRIMARY ? decide_locked (node, err, errlen)
                                        : 0;
  via = node->n_dl_via;
  pthread_mutex_unlock (&node->n_lock);
  if (r == -1)
    goto undo;
  if (via >= 0)
    log_info ("node %s: diskless Primary %s writes to the storage nodes; "
              "our writes and reads go through it (allow-two-primaries)",
              node->n_self->nc_name, node_find_peer (node, via)->pr_cfg->nc_name);
  diskless_route_update (node, NULL);
  return 0;

 undo:
  pthread_mutex_lock (&node->n_lock);
  node->n_dl_deciding = false;
  node->n_dl_via = -1;
  pthread_mutex_unlock (&node->n_lock);
  return -1;
}

/* Start deciding, with the role just set to Primary (promote, under
 * n_lock). */
void
dl_start_deciding_locked (struct repl_node *node)
{
  ASSERT_LOCKED (&node->n_lock);
  node->n_dl_via = -1;
  if (!dl_decides (node))
    return;
  node->n_dl_deciding = true;
  node->n_dl_candidates = 0;
  node->n_dl_answer_writer = -1;
  node->n_dl_answer_through = false;
}

/* ---- the writer, for the other diskless Primary ------------------- */

/* May diskless peer c send us (a diskless node) this request?  Only a
 * Primary that says its writes go through us, while we write straight
 * to the storage nodes. */
bool
dl_routed_may_feed (struct conn *c, unsigned type)
{
  struct peer *p = c->c_peer;
  struct repl_node *node = p->pr_node;
  uint32_t via;
  bool writer;

  switch (type) {
  case REPL_MSG_WRITE: case REPL_MSG_TRIM: case REPL_MSG_ZERO:
  case REPL_MSG_FLUSH: case REPL_MSG_READ_REQ:
    break;
  default:
    return false;
  }
  if (!c->c_peer_diskless || c->c_role != REPL_ROLE_PRIMARY)
    return false;
  pthread_mutex_lock (&p->pr_lock);
  via = c->c_dl_via;
  pthread_mutex_unlock (&p->pr_lock);
  pthread_mutex_lock (&node->n_lock);
  writer = node->n_role == REPL_ROLE_PRIMARY && !node->n_dl_deciding &&
           node->n_dl_via < 0 && node->n_dl_route < 0;
  pthread_mutex_unlock (&node->n_lock);
  return writer && via == bit_of (node->n_self->nc_id);
}

/* WRITE, TRIM, ZERO or FLUSH from the diskless Primary that writes
 * through us: into our own write path, as a client's.  Nobody reads c
 * meanwhile (c_rx_forwarding).  Returns 0 (the batch's ACK answers
 * it), or -1: the connection is failed, and the other Primary fails
 * the request too or writes it straight once we are gone. */
int
dl_apply_routed (struct conn *c, const struct rx_msg *m)
{
  const struct repl_hdr *h = m->m_hdr;
  struct repl_node *node = c->c_peer->pr_node;
  int r;

  atomic_store (&c->c_rx_forwarding, true);
  r = diskless_ranged_routed (node, h->type,
                              h->type == REPL_MSG_WRITE ? m->m_payload
                                                        : NULL,
                              h->type == REPL_MSG_FLUSH ? 0 : h->count,
                              h->type == REPL_MSG_FLUSH ? 0 : h->offset,
                              h->flags & (REPL_FLAG_FUA |
                                          REPL_FLAG_MAY_TRIM));
  c->c_last_recv_ns = now_ns ();
  atomic_store (&c->c_rx_forwarding, false);
  if (r == 0)
    return 0;
  conn_fail (c, "%s of %" PRIu32 " bytes at offset %" PRIu64 " from the "
             "diskless Primary that writes through this node failed "
             "here: %m", wire_type_name (h->type), h->count, h->offset);
  return -1;
}

/* READ_REQ from it: read from the storage nodes and answer. */
int
dl_read_routed (struct conn *c, const struct repl_hdr *h)
{
  struct peer *p = c->c_peer;
  struct out_msg om;
  int r;

  if (p->pr_read_buf == NULL) {
    p->pr_read_buf = malloc (REPL_MAX_PAYLOAD);
    if (p->pr_read_buf == NULL) {
      conn_fail (c, "malloc: %m");
      return -1;
    }
  }
  atomic_store (&c->c_rx_forwarding, true);
  r = diskless_pread (p->pr_node, p->pr_read_buf, h->count, h->offset);
  c->c_last_recv_ns = now_ns ();
  atomic_store (&c->c_rx_forwarding, false);
  if (r == 0)
    out_msg_init (&om, REPL_MSG_READ_REPLY, 0, h->count, h->seq, h->offset,
                  p->pr_read_buf, h->count);
  else
    out_msg_init (&om, REPL_MSG_READ_REPLY, REPL_FLAG_ERROR, h->count,
                  h->seq, h->offset, NULL, 0);
  return conn_send_wait (c, &om);
}
