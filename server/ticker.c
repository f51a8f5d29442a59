/* nbdrepl: keepalive and timeouts.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * Every connected peer gets a PING each ping-interval when nothing else
 * is being sent, so a healthy idle link always carries traffic.  A peer
 * is declared dead when nothing has arrived from it for ping-timeout, or
 * when its oldest unacknowledged message is older than timeout (a peer
 * that is alive but stalled).  The connection is then torn down and its
 * writes recorded in the dirty bitmap: clients never wait longer than
 * about `timeout` for a sick peer.
 *
 * A ticker that did not run for ping-timeout (the process was stopped,
 * SIGSTOP or a paused VM, or starved) finds every connection stale:
 * its peers have given this node up, and what its receivers read on
 * waking was sent before.  It drops them all, and until it has,
 * node_has_quorum counts no peer: a Primary that wakes does not answer
 * its held writes on the word of a peer that has left (a diskless
 * peer's old pings, read from the socket buffer, looked like life).
 */
#include <config.h>

#include <errno.h>
#include <sys/socket.h>
#include <time.h>

#include "cleanup.h"
#include "internal.h"
#include "log.h"

#define TICK_MS 100

/* The ticker's first look after a gap longer than ping-timeout (see
 * above): drop every connection; then note the time. */
static void
woke_stale (struct repl_node *node)
{
  uint64_t now = now_ns ();
  uint64_t last = atomic_load (&node->n_tick_ns);
  size_t i;

  if (last != 0 && now > last &&
      now - last > node->n_cfg.cf_ping_timeout_ms * UINT64_C (1000000)) {
    log_error ("node %s: did not run for %.1f s (stopped, or starved): "
               "its peers have given it up; reconnecting to every peer",
               node->n_self->nc_name, (now - last) / 1e9);
    for (i = 0; i < PEERS (node)->pl_n; i++) {
      struct peer *p = PEERS (node)->pl_peers[i];
      ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&p->pr_lock);
      struct conn *c = peer_conn_locked (p);

      if (c != NULL && !c->c_failed)
        conn_fail_locked (c, "this node did not run for %.1f s",
                          (now - last) / 1e9);
    }
  }
  atomic_store (&node->n_tick_ns, now);
}

static void
check_peer (struct repl_node *node, struct peer *p, uint64_t now)
{
  const struct repl_config *cfg = &node->n_cfg;
  struct conn *c;
  uint64_t last_recv;

  pthread_mutex_lock (&p->pr_lock);
  if ((c = peer_conn_locked (p)) == NULL)
    goto out;

  /* The receiver updates this without the lock; it may be after now.
   * While it waits for forwarded writes (bounded by their connections'
   * timeout) it reads nothing: that is no silence of the peer's. */
  last_recv = c->c_last_recv_ns;
  if (!atomic_load (&c->c_rx_forwarding) && last_recv < now &&
      now - last_recv > cfg->cf_ping_timeout_ms * UINT64_C (1000000)) {
    conn_fail_locked (c, "nothing received for %.1f s (ping-timeout)",
                      (now - last_recv) / 1e9);
    goto out;
  }
  /* The oldest message unanswered for timeout: since it was sent, or
   * since the peer last answered one, whichever is later.  A peer
   * applies its messages in order, so one queued behind others is
   * expected only once those are answered: a peer that answers
   * steadily but slowly (a node that forwards our writes one at a time
   * to its slow resync target) is making progress, not stalled. */
  if (c->c_ring_count > 0) {
    const struct inflight *f = &c->c_ring[c->c_ring_head];
    uint64_t since = f->if_time_ns > c->c_acked_ns ? f->if_time_ns
                                                   : c->c_acked_ns;

    if (since < now &&
        now - since > cfg->cf_timeout_ms * UINT64_C (1000000)) {
      conn_fail_locked (c, "%s at offset %" PRIu64 " not acknowledged "
                        "for %.1f s (timeout)", wire_type_name (f->if_type),
                        f->if_offset, (now - since) / 1e9);
      goto out;
    }
  }
  /* A sync source waits for its target's bitmap before resyncing, and
   * the target then for the source's RESYNC_START; a peer that never
   * sends it (it decided differently, or it resyncs another node first)
   * must not hold the connection for ever. */
  if ((p->pr_repl == REPL_WF_BITMAP_S || p->pr_repl == REPL_WF_BITMAP_T) &&
      p->pr_repl_since_ns < now &&
      now - p->pr_repl_since_ns > 5 * cfg->cf_timeout_ms * UINT64_C (1000000)) {
    conn_fail_locked (c, "%s did not arrive within %.1f s of %s; "
                      "reconnecting",
                      p->pr_repl == REPL_WF_BITMAP_S ? "its bitmap"
                      : "its RESYNC_START", (now - p->pr_repl_since_ns) / 1e9,
                      p->pr_repl == REPL_WF_BITMAP_S ? "connecting"
                      : "sending our bitmap");
    goto out;
  }
  /* Only ping an idle link (a busy one proves itself), and never wait:
   * with nobody sending, the ping goes straight out with MSG_DONTWAIT
   * under pr_lock, so the ticker can neither block on a stalled peer
   * nor end up sending writers' messages.  A full socket buffer skips
   * the ping; the timeouts above deal with a peer that stopped reading. */
  if (now >= c->c_last_ping_ns &&
      now - c->c_last_ping_ns >= cfg->cf_ping_interval_ms * UINT64_C (1000000) &&
      !c->c_sending && c->c_qhead == NULL) {
    struct repl_hdr h;
    uint8_t buf[REPL_HDR_SIZE];
    ssize_t r;

    c->c_last_ping_ns = now;
    wire_hdr_init (&h, REPL_MSG_PING, 0, 0, 0, 0, 0);
    wire_encode_hdr (&h, buf);
    r = stream_try_send (c->c_stream, buf, sizeof buf);
    if (r > 0 && r < (ssize_t) sizeof buf)
      conn_fail_locked (c, "send buffer full: the peer is not reading");
    else if (r == -1 && errno != EAGAIN && errno != EWOULDBLOCK)
      conn_fail_locked (c, "send: %s", stream_error (c->c_stream, errno));
  }
 out:
  pthread_mutex_unlock (&p->pr_lock);
}

void *
ticker_thread (void *arg)
{
  struct repl_node *node = arg;

  pthread_mutex_lock (&node->n_lock);
  while (!node->n_stopping) {
    struct timespec ts;
    size_t i;

    pthread_mutex_unlock (&node->n_lock);
    peers_enter (node);
    woke_stale (node);
    for (i = 0; i < PEERS (node)->pl_n; i++)
      check_peer (node, PEERS (node)->pl_peers[i], now_ns ());
    role_start_check (node);
    role_fence_check (node);
    peers_leave (node);
    peers_reclaim (node, false);  /* what replctl adjust removed */
    peers_start_added (node);     /* ... and added */
    pthread_mutex_lock (&node->n_lock);

    /* From here: a wait longer than ping-timeout is a stop (woke_stale),
     * not this loop's own work. */
    atomic_store (&node->n_tick_ns, now_ns ());
    ts = deadline_after_ns (TICK_MS * UINT64_C (1000000));
    if (!node->n_stopping)
      pthread_cond_timedwait (&node->n_cond, &node->n_lock, &ts);
  }
  pthread_mutex_unlock (&node->n_lock);
  return NULL;
}
