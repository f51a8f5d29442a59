/* nbdrepl: a peer — one replication connection to another node.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * There is exactly one TCP connection per pair of nodes: the node with
 * the lower id dials, the other accepts (listener.c hands it over).
 * Either may start first; the dialler retries with backoff.  Each peer
 * has one thread that establishes the connection (a new struct conn
 * each time, conn.c), runs its receive loop (peer-receive.c) and, when
 * it fails, tears it down and starts again.
 */
#include <config.h>

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "internal.h"
#include "log.h"
#include "sockets.h"

#define BACKOFF_MIN_MS 100

const char *
conn_state_name (enum conn_state state)
{
  switch (state) {
  case CONN_STANDALONE: return "StandAlone";
  case CONN_CONNECTING: return "Connecting";
  case CONN_HANDSHAKE: return "Handshake";
  case CONN_CONNECTED: return "Connected";
  case CONN_DISCONNECTING: return "Disconnecting";
  }
  abort ();
}

struct peer *
peer_create (struct repl_node *node, const struct repl_node_cfg *cfg)
{
  struct peer *p;
  unsigned i;

  p = calloc (1, sizeof *p);
  if (p == NULL) {
    log_error ("calloc: %m");
    return NULL;
  }
  if (bitmap_init (&p->pr_bitmap, node->n_vol.vol_size,
                   node->n_cfg.cf_bitmap_granularity) == -1) {
    log_error ("peer %s: bitmap: %m", cfg->nc_name);
    free (p);
    return NULL;
  }
  for (i = 0; i < RESYNC_SLOTS; i++) {
    p->pr_resync_bufs[i] = malloc (RESYNC_MAX_BYTES);
    if (p->pr_resync_bufs[i] == NULL) {
      log_error ("peer %s: resync buffers: %m", cfg->nc_name);
      while (i > 0)
        free (p->pr_resync_bufs[--i]);
      bitmap_free (&p->pr_bitmap);
      free (p);
      return NULL;
    }
  }
  p->pr_magic = PEER_MAGIC;
  p->pr_node = node;
  p->pr_cfg = cfg;
  p->pr_dials = node->n_self->nc_id < cfg->nc_id;
  mutex_init (&p->pr_lock);
  cond_init (&p->pr_cond);
  cond_init (&p->pr_rx_cond);
  cond_init (&p->pr_resync_cond);
  cond_init (&p->pr_flush_cond);
  p->pr_state = CONN_CONNECTING;
  p->pr_incoming = NULL;
  return p;
}

void
peer_free (struct peer *p)
{
  if (p == NULL)
    return;
  assert (p->pr_magic == PEER_MAGIC);
  assert (p->pr_conn == NULL);
  stream_free (p->pr_incoming);
  bitmap_free (&p->pr_bitmap);
  free (p->pr_verify_digests);
  free (p->pr_read_buf);
  if (p->pr_csum_done) {
    bitmap_free (p->pr_csum_done);
    free (p->pr_csum_done);
  }
  for (unsigned i = 0; i < RESYNC_SLOTS; i++)
    free (p->pr_resync_bufs[i]);
  pthread_cond_destroy (&p->pr_cond);
  pthread_cond_destroy (&p->pr_rx_cond);
  pthread_cond_destroy (&p->pr_resync_cond);
  pthread_cond_destroy (&p->pr_flush_cond);
  pthread_mutex_destroy (&p->pr_lock);
  p->pr_magic = 0;
  free (p);
}

/* A connection to or from this peer is refused: say why in the log,
 * once until the reason changes (the peer retries every few seconds),
 * and in status.  While the peer is connected on another connection, a
 * refused one (whoever made it: it may not be the peer at all) leaves
 * the link's status alone and is logged as the listener's other
 * refusals are, once a minute per host and reason. */
void
peer_refuse (struct peer *p, const char *addr, bool incoming, const char *why)
{
  pthread_mutex_lock (&p->pr_lock);
  if (p->pr_state == CONN_CONNECTED) {
    pthread_mutex_unlock (&p->pr_lock);
    if (incoming)
      listener_refuse_log (addr, p->pr_cfg->nc_name, "%s", why);
    else
      log_error ("connection to %s (node %s): %s", addr,
                 p->pr_cfg->nc_name, why);
    return;
  }
  if (strcmp (why, p->pr_last_error) != 0) {
    log_error ("connection %s %s (node %s): %s", incoming ? "from" : "to",
               addr, p->pr_cfg->nc_name, why);
    snprintf (p->pr_last_error, sizeof p->pr_last_error, "%s", why);
  }
  pthread_mutex_unlock (&p->pr_lock);
}

/* The listener accepted a connection from this peer (its accepted-th),
 * read its hello and authenticated it (listener.c): only now may it
 * replace the connection we have. */
void
peer_hand_over (struct peer *p, struct stream *st, const char *from,
                const struct repl_hello *hello, uint64_t accepted)
{
  pthread_mutex_lock (&p->pr_lock);
  if (p->pr_admin_down) {
    pthread_mutex_unlock (&p->pr_lock);
    peer_refuse (p, from, true, "this node is StandAlone towards it "
                 "(replctl disconnect; replctl connect ends it)");
    stream_free (st);
    return;
  }
  /* Handshakes run in parallel (listener.c): one that stalled may end
   * after a later connection from the same peer was handed over.  The
   * peer dialled again because it gave the stalled one up; it must not
   * replace the newer link. */
  if (accepted < p->pr_accepted) {
    pthread_mutex_unlock (&p->pr_lock);
    peer_refuse (p, from, true, "this connection finished its handshake "
                 "after a newer one from the same node; dropped (the "
                 "newer one stays)");
    stream_free (st);
    return;
  }
  p->pr_accepted = accepted;
  stream_free (p->pr_incoming);
  p->pr_incoming = st;
  p->pr_incoming_hello = *hello;
  /* A peer only dials again after losing the old connection, perhaps by
   * restarting, before we noticed: the new connection wins. */
  peer_fail_current_locked (p, "peer connected again; replacing the old "
                            "connection");
  pthread_cond_broadcast (&p->pr_cond);
  pthread_mutex_unlock (&p->pr_lock);
}

/* Sleep for ms unless stopping.  pr_lock held.  Returns false if stopping. */
static bool
sleep_locked (struct peer *p, unsigned ms)
{
  struct timespec ts = deadline_after_ns (ms * UINT64_C (1000000));

  ASSERT_LOCKED (&p->pr_lock);
  while (!p->pr_stopping && p->pr_incoming == NULL)
    if (pthread_cond_timedwait (&p->pr_cond, &p->pr_lock, &ts) == ETIMEDOUT)
      break;
  return !p->pr_stopping;
}

/* A connection that the peer ended within a second of being made and
 * before it sent anything after the handshake (it refused it, having
 * decided on the same HELLO_STATEs as we did): wait before the next,
 * longer each time in a row (up to connect-retry-max), so that two nodes
 * that keep refusing each other do not reconnect in a busy loop (the
 * first in a row waits nothing).  Not cut short by the peer dialling
 * us: that is the loop.  A connection
 * ended on purpose to reconnect at once (a new Primary resyncing a peer,
 * a stale decision), by either side after it was under way, is followed
 * by no wait.  pr_lock held.  Returns false if stopping. */
static bool
flap_delay_locked (struct peer *p, uint64_t lived_ns, bool peer_closed)
{
  unsigned max = p->pr_node->n_cfg.cf_connect_retry_max_ms;
  struct timespec ts;

  ASSERT_LOCKED (&p->pr_lock);
  if (lived_ns >= UINT64_C (1000000000)) {
    p->pr_flap_ms = 0;
    return !p->pr_stopping;
  }
  if (!peer_closed)
    return !p->pr_stopping;
  /* The first such end in a row costs nothing: a peer that dropped one
   * connection to reconnect at once (it lost its Primary and reconciles)
   * looks the same, and its new connection must not wait. */
  if (p->pr_flap_ms == 0) {
    p->pr_flap_ms = BACKOFF_MIN_MS / 2;
    return !p->pr_stopping;
  }
  p->pr_flap_ms *= 2;
  if (p->pr_flap_ms > max)
    p->pr_flap_ms = max > BACKOFF_MIN_MS ? max : BACKOFF_MIN_MS;
  ts = deadline_after_ns (p->pr_flap_ms * UINT64_C (1000000));
  while (!p->pr_stopping)
    if (pthread_cond_timedwait (&p->pr_cond, &p->pr_lock, &ts) == ETIMEDOUT)
      break;
  return !p->pr_stopping;
}

/* Record why we have no connection; log it only when it changes, so a
 * peer that is down for an hour does not fill the log. */
static void
set_error (struct peer *p, const char *fmt, ...)
{
  char msg[sizeof p->pr_last_error];
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (msg, sizeof msg, fmt, ap);
  va_end (ap);
  pthread_mutex_lock (&p->pr_lock);
  if (strcmp (msg, p->pr_last_error) != 0) {
    log_error ("peer %s: %s", p->pr_cfg->nc_name, msg);
    strcpy (p->pr_last_error, msg);
  }
  pthread_mutex_unlock (&p->pr_lock);
}

/* Send our HELLO on st: who we are, and whether we authenticate;
 * nothing about our data, since the peer is not proven yet. */
int
peer_send_hello (struct peer *p, struct stream *st)
{
  struct repl_node *node = p->pr_node;
  uint8_t buf[REPL_HDR_SIZE + REPL_HELLO_SIZE];
  struct repl_hdr h;
  struct repl_hello hello = {
    .version = REPL_PROTO_VERSION,
    .features = (node->n_cfg.cf_secret_len > 0 ? REPL_FEATURE_AUTH : 0) |
                (node->n_cfg.cf_two_primaries ? REPL_FEATURE_TWO_PRIMARIES
                                              : 0),
    .node_id = node->n_self->nc_id,
    .peer_id = p->pr_cfg->nc_id,
  };

  snprintf (hello.resource, sizeof hello.resource, "%s",
            node->n_cfg.cf_resource);
  wire_hdr_init (&h, REPL_MSG_HELLO, 0, REPL_HELLO_SIZE, 0, 0, 0);
  wire_encode_hdr (&h, buf);
  wire_encode_hello (&hello, buf + REPL_HDR_SIZE);
  return stream_write_full (st, buf, sizeof buf,
                            node->n_cfg.cf_ping_timeout_ms);
}

/* Send our HELLO_STATE on c, once the peer is authenticated (peer
 * thread only, before c is published).  It records what it said, which
 * the decision at connect compares. */
static int
send_hello_state (struct conn *c)
{
  struct peer *p = c->c_peer;
  struct repl_node *node = p->pr_node;
  uint8_t buf[REPL_HDR_SIZE + REPL_HELLO_STATE_SIZE];
  struct repl_hdr h;
  struct repl_hello hello = { 0 };
  struct gen_uuids u;
  uint64_t changes, seq = node_state_seq (node);
  uint32_t via;

  pthread_mutex_lock (&node->n_lock);
  hello.role = node->n_role;
  hello.disk_state = node->n_disk;
  hello.size = volume_size (&node->n_vol); /* a diskless node learns it */
  via = dl_via_mask_locked (node);
  pthread_mutex_unlock (&node->n_lock);
  /* A diskless Primary says where its writes go; promoting, it counts
   * this as a STATE that a diskless peer answers (diskless-
   * primaries.c). */
  if (node->n_diskless && node->n_cfg.cf_two_primaries) {
    hello.routed = via;
    if (p->pr_cfg->nc_diskless &&
        dl_via_deciding (via, node->n_self->nc_id))
      c->c_tp_primary_states = 1;
  }
  /* A storage Primary beside diskless nodes names those that write
   * through it (two-primaries.c: tp_check_routed). */
  if (hello.role == REPL_ROLE_PRIMARY && tp_routes_diskless (node) &&
      !p->pr_cfg->nc_diskless)
    hello.routed = tp_routed_mask (node);
  gen_view (node, p, &u);
  gen_to_wire (&u, &hello.uuids);
  /* The decision at connect compares what this message says, which is
   * what the peer compares too, even if a write changes our UUIDs
   * meanwhile (sync_on_connect then tells the peer the new ones). */
  pthread_mutex_lock (&node->n_md_io_lock);
  hello.primary_since = node->n_md.md_super.ms_primary_since;
  pthread_mutex_unlock (&node->n_md_io_lock);
  pthread_mutex_lock (&p->pr_lock);
  changes = bitmap_count (&p->pr_bitmap);
  pthread_mutex_unlock (&p->pr_lock);
  c->c_hello_uuids = u;
  c->c_hello_changes = changes;
  c->c_hello_disk = hello.disk_state;
  c->c_hello_role = hello.role;
  c->c_state_seq = seq;         /* no STATE read before is sent after */
  /* A storage Primary beside diskless nodes counts this as a STATE
   * saying Primary, which the diskless node answers with ROUTED
   * (two-primaries.c); c is not published yet. */
  if (hello.role == REPL_ROLE_PRIMARY && tp_routes_diskless (node) &&
      p->pr_cfg->nc_diskless)
    c->c_tp_primary_states = 1;
  hello.uuids.changes = changes > UINT32_MAX ? UINT32_MAX : changes;

  wire_hdr_init (&h, REPL_MSG_HELLO_STATE, 0, REPL_HELLO_STATE_SIZE, 0, 0, 0);
  wire_encode_hdr (&h, buf);
  wire_encode_hello_state (&hello, buf + REPL_HDR_SIZE);
  return stream_write_full (c->c_stream, buf, sizeof buf,
                            node->n_cfg.cf_ping_timeout_ms);
}

/* Read the header of a handshake message of the given type, and check
 * it.  Returns 0, or -1 with the reason recorded (set_error), in which
 * the message is `name`. */
static int
read_handshake_hdr (struct peer *p, struct stream *st,
                    enum repl_msg_type type,
                    const char *name, struct repl_hdr *h)
{
  uint8_t hbuf[REPL_HDR_SIZE];
  unsigned timeout = p->pr_node->n_cfg.cf_ping_timeout_ms;
  const char *why;
  char err[256];

  if (stream_read_full (st, hbuf, sizeof hbuf, timeout, -1) == -1) {
    set_error (p, "reading %s: %m", name);
    return -1;
  }
  if ((why = peer_tls_plain_mismatch (p->pr_node, hbuf)) != NULL) {
    set_error (p, "bad %s: %s", name, why);
    return -1;
  }
  if (wire_decode_hdr (hbuf, h, err, sizeof err) == -1) {
    set_error (p, "bad %s: %s", name, err);
    return -1;
  }
  if (h->type != type) {
    set_error (p, "expected %s, got %s", wire_type_name (type),
               wire_type_name (h->type));
    return -1;
  }
  return 0;
}

/* Read and decode the peer's HELLO (dialling side). */
static int
read_hello (struct peer *p, struct stream *st, struct repl_hello *hello)
{
  uint8_t pbuf[REPL_HELLO_MAX];
  unsigned timeout = p->pr_node->n_cfg.cf_ping_timeout_ms;
  struct repl_hdr h;
  char err[256];

  if (read_handshake_hdr (p, st, REPL_MSG_HELLO, "hello", &h) == -1)
    return -1;
  if (stream_read_full (st, pbuf, h.length, timeout, -1) == -1) {
    set_error (p, "reading hello: %m");
    return -1;
  }
  if (wire_decode_hello (pbuf, h.length, hello, err, sizeof err) == -1) {
    set_error (p, "bad hello: %s", err);
    return -1;
  }
  return 0;
}

/* Read and decode the peer's HELLO_STATE into the state part of hello
 * (both sides, after the authentication). */
static int
read_hello_state (struct peer *p, struct stream *st,
                  struct repl_hello *hello)
{
  uint8_t pbuf[REPL_HELLO_STATE_SIZE];
  unsigned timeout = p->pr_node->n_cfg.cf_ping_timeout_ms;
  struct repl_hdr h;
  char err[256];

  if (read_handshake_hdr (p, st, REPL_MSG_HELLO_STATE, "HELLO_STATE",
                          &h) == -1)
    return -1;
  if (stream_read_full (st, pbuf, sizeof pbuf, timeout, -1) == -1) {
    set_error (p, "reading HELLO_STATE: %m");
    return -1;
  }
  if (wire_decode_hello_state (pbuf, sizeof pbuf, hello, err,
                               sizeof err) == -1) {
    set_error (p, "bad HELLO_STATE: %s", err);
    return -1;
  }
  return 0;
}

/* Is this the node we expect, for the same resource?  The HELLO part
 * only: checked before the authentication.  Returns 0, or -1 with the
 * reason in err. */
int
peer_check_ident (struct peer *p, const struct repl_hello *h,
                  char *err, size_t errlen)
{
  struct repl_node *node = p->pr_node;

  if (strcmp (h->resource, node->n_cfg.cf_resource) != 0) {
    snprintf (err, errlen, "refusing connection: peer serves resource '%s', "
              "we serve '%s'", h->resource, node->n_cfg.cf_resource);
    return -1;
  }
  if (h->node_id == p->pr_cfg->nc_id && h->peer_id == REPL_PEER_ID_NONE) {
    snprintf (err, errlen, "refused: node %s (id %u) does not know this "
              "node (id %u): it is not in that node's configuration of "
              "resource %s (removed by replctl adjust there?)",
              p->pr_cfg->nc_name, p->pr_cfg->nc_id, node->n_self->nc_id,
              node->n_cfg.cf_resource);
    return -1;
  }
  if (h->node_id != p->pr_cfg->nc_id || h->peer_id != node->n_self->nc_id) {
    snprintf (err, errlen, "refusing connection: peer says it is node id %"
              PRIu32 " talking to id %" PRIu32 ", expected %u talking to %u "
              "(do both nodes use the same configuration?)",
              h->node_id, h->peer_id, p->pr_cfg->nc_id, node->n_self->nc_id);
    return -1;
  }
  /* Two primaries order their writes only if both know they may be two
   * (DRBD refuses such a connection too). */
  if (((h->features & REPL_FEATURE_TWO_PRIMARIES) != 0) !=
      node->n_cfg.cf_two_primaries) {
    snprintf (err, errlen, "refusing connection: allow-two-primaries is %s "
              "here and %s on the peer; both nodes must use the same value",
              node->n_cfg.cf_two_primaries ? "true" : "false",
              node->n_cfg.cf_two_primaries ? "false" : "true");
    return -1;
  }
  return 0;
}

static int
check_ident (struct peer *p, const struct repl_hello *h)
{
  char err[512];

  if (peer_check_ident (p, h, err, sizeof err) == -1) {
    set_error (p, "%s", err);
    return -1;
  }
  return 0;
}

/* The peer's data: the same volume, in a role we can work with, and
 * generations that allow a connection (gen_decide, which may decide to
 * discard our data).  Only ever run on a HELLO_STATE, which comes after
 * the authentication.  Returns 0, or -1 with the reason recorded. */
static int
check_hello (struct conn *c)
{
  struct peer *p = c->c_peer;
  struct repl_node *node = p->pr_node;
  const struct repl_hello *h = &c->c_hello;
  char err[512];
  int rule;

  c->c_size = h->size;          /* c is not published yet */
  if (node->n_diskless || h->disk_state == REPL_DISK_DISKLESS) {
    if (h->disk_state == REPL_DISK_DISKLESS && node->n_cfg.cf_two_primaries &&
        dl_check_via (node, c, h->role, h->routed, err, sizeof err) == -1)
      goto refuse;
    if (role_check_peer_role (node, c, h->role, err, sizeof err) == -1)
      goto refuse;
    if (diskless_check_hello (node, c, err, sizeof err) == -1)
      goto refuse;
    return 0;
  }
  /* The same size, or the smaller node grows (a resize it missed). */
  if (resize_check_hello (c, h->size, err, sizeof err) == -1)
    goto refuse;
  /* At most one Primary; a node started with role=primary may give way
   * (role_start_yield).  Beside diskless nodes a storage Primary must
   * name the diskless Primaries connected here (two-primaries.c). */
  if (role_check_peer_role (node, c, h->role, err, sizeof err) == -1)
    goto refuse;
  if (h->role == REPL_ROLE_PRIMARY &&
      tp_check_routed (node, c, h->routed, err, sizeof err) == -1)
    goto refuse;
  if (gen_decide (node, c, &rule, err, sizeof err) == -1)
    goto refuse;
  return 0;

 refuse:
  set_error (p, "%s", err);
  return -1;
}

/* The last step of the handshake on both sides, once the peer is
 * authenticated: tell each other our state (HELLO_STATE), and check the
 * peer's.  Both send before either reads. */
static int
exchange_state (struct conn *c)
{
  struct peer *p = c->c_peer;

  if (send_hello_state (c) == -1) {
    set_error (p, "sending HELLO_STATE: %m");
    return -1;
  }
  if (read_hello_state (p, c->c_stream, &c->c_hello) == -1)
    return -1;
  c->c_role = c->c_hello.role;
  c->c_peer_diskless = c->c_hello.disk_state == REPL_DISK_DISKLESS;
  /* ... and a diskless node counts what it takes (two-primaries.c). */
  if (p->pr_node->n_diskless && !c->c_peer_diskless &&
      c->c_role == REPL_ROLE_PRIMARY && p->pr_node->n_cfg.cf_two_primaries)
    c->c_tp_primary_states = 1;
  c->c_peer_uuids = (struct gen_uuids) {
    .gu_current = c->c_hello.uuids.current,
    .gu_bitmap = c->c_hello.uuids.bitmap,
    .gu_history = { c->c_hello.uuids.history[0],
                    c->c_hello.uuids.history[1] },
    .gu_flags = c->c_hello.uuids.flags,
  };
  return check_hello (c);
}

/* Get a connection, handshaken, or NULL if stopping: on a socket the
 * listener authenticated and handed over, or on one we dial and
 * authenticate here; then the HELLO_STATEs. */
static struct conn *
establish (struct peer *p)
{
  const struct repl_node_cfg *nc = p->pr_cfg;
  unsigned backoff = BACKOFF_MIN_MS;
  unsigned backoff_max = p->pr_node->n_cfg.cf_connect_retry_max_ms;

  for (;;) {
    struct repl_hello hello;
    struct stream *st = NULL;
    char err[512];

    pthread_mutex_lock (&p->pr_lock);
    /* The waits below may last: no pin on the peer list (peers.c)
     * meanwhile; this thread holds nothing from it but its own peer. */
    peers_leave (p->pr_node);
    /* replctl disconnect: no connection until replctl connect. */
    if (p->pr_admin_down && !p->pr_stopping) {
      peer_set_conn_locked (p, CONN_STANDALONE);
      while (p->pr_admin_down && !p->pr_stopping)
        pthread_cond_wait (&p->pr_cond, &p->pr_lock);
      peer_set_conn_locked (p, CONN_CONNECTING);
      backoff = BACKOFF_MIN_MS;
    }
    if (!p->pr_dials) {
      while (!p->pr_stopping && !p->pr_admin_down && p->pr_incoming == NULL)
        pthread_cond_wait (&p->pr_cond, &p->pr_lock);
    }
    peers_enter (p->pr_node);
    if (p->pr_admin_down && !p->pr_stopping) {
      pthread_mutex_unlock (&p->pr_lock);
      continue;
    }
    if (p->pr_stopping) {
      pthread_mutex_unlock (&p->pr_lock);
      return NULL;
    }
    if (p->pr_incoming != NULL) {   /* the peer dialled us */
      st = p->pr_incoming;
      hello = p->pr_incoming_hello;
      p->pr_incoming = NULL;
    }
    peer_set_conn_locked (p, CONN_HANDSHAKE);
    pthread_mutex_unlock (&p->pr_lock);

    if (st == NULL) {
      /* We dial: the same steps as the listener's, in the same order. */
      int fd = sock_connect_tcp (nc->nc_host, nc->nc_port,
                                 p->pr_node->n_self->nc_host,
                                 p->pr_node->n_cfg.cf_ping_timeout_ms,
                                 p->pr_node->n_cfg.cf_sndbuf_size,
                                 p->pr_node->n_cfg.cf_rcvbuf_size);
      if (fd == -1)
        set_error (p, "connect to %s: %m", nc->nc_address);
      else if (p->pr_node->n_cfg.cf_tls &&
               (st = peer_tls_connect (p, fd, err, sizeof err)) == NULL)
        set_error (p, "connect to %s: %s", nc->nc_address, err);
      else if (!p->pr_node->n_cfg.cf_tls &&
               (st = stream_new (fd, NULL)) == NULL)
        set_error (p, "connect to %s: %m", nc->nc_address);
      else if (peer_send_hello (p, st) == -1) {
        set_error (p, "sending hello: %m");
        stream_free (st);
        st = NULL;
      }
      else if (read_hello (p, st, &hello) == -1 ||
               check_ident (p, &hello) == -1 ||
               peer_authenticate (p, st, nc->nc_address, false, &hello,
                                  now_ns () + 2 * UINT64_C (1000000) *
                                  p->pr_node->n_cfg.cf_ping_timeout_ms)
               == -1) {
        stream_free (st);
        st = NULL;
      }
    }
    /* Authenticated, ours or handed over by the listener. */
    if (st != NULL) {
      struct conn *c = conn_new (p, st, &hello);

      if (c != NULL && exchange_state (c) == 0)
        return c;
      conn_put (c);
      stream_free (st);
    }

    pthread_mutex_lock (&p->pr_lock);
    peer_set_conn_locked (p, CONN_CONNECTING);
    peers_leave (p->pr_node);
    if (!sleep_locked (p, backoff)) {
      peers_enter (p->pr_node);
      pthread_mutex_unlock (&p->pr_lock);
      return NULL;
    }
    peers_enter (p->pr_node);
    pthread_mutex_unlock (&p->pr_lock);
    backoff = backoff * 2 > backoff_max ? backoff_max : backoff * 2;
  }
}

/* Publish connection c (Connected): pr_lock held. */
static void
connected_locked (struct peer *p, struct conn *c)
{
  uint64_t now = now_ns ();
  int sz = 0;
  socklen_t len = sizeof sz;

  ASSERT_LOCKED (&p->pr_lock);
  c->c_id = ++p->pr_nconns;
  c->c_sndbuf = getsockopt (stream_fd (c->c_stream), SOL_SOCKET, SO_SNDBUF, &sz, &len) == 0
                ? sz : 0;
  c->c_last_recv_ns = c->c_connected_ns = now;
  c->c_last_ping_ns = 0;        /* the ticker pings at once: the peer
                                   hears from us (c_heard) */
  p->pr_conn = conn_get (c);
  peer_set_conn_locked (p, CONN_CONNECTED);
  peer_set_repl_locked (p, REPL_ESTABLISHED);
  peer_set_disk_locked (p, true, c->c_hello.disk_state);
  p->pr_last_error[0] = '\0';
  p->pr_resync_total = p->pr_resync_done = 0;
  p->pr_resync_deferred = false;
  p->pr_resync_wanted = false;  /* a kick for the last connection: this
                                   one decides afresh (sync_on_connect) */
  p->pr_pause_peer = false;     /* its STATE says again */
  pthread_cond_broadcast (&p->pr_cond);
}

/* Connection c has failed and its receive loop returned: release what
 * it held, and forget it (pr_lock held). */
static void
disconnected_locked (struct peer *p, struct conn *c, bool primary)
{
  ASSERT_LOCKED (&p->pr_lock);
  assert (p->pr_conn == c && c->c_failed &&
          p->pr_state == CONN_DISCONNECTING);
  conn_teardown_locked (c);
  p->pr_conn = NULL;
  conn_put (c);
  peer_set_conn_locked (p, CONN_CONNECTING);
  peer_set_repl_locked (p, REPL_OFF);
  /* What we know of its disk from now on: Outdated if it lacks writes
   * of ours, a Primary's (the write path marks that too); else nothing. */
  if (primary && bitmap_count (&p->pr_bitmap) > 0)
    peer_set_disk_locked (p, true, REPL_DISK_OUTDATED);
  else
    peer_set_disk_locked (p, false, 0);
  pthread_cond_broadcast (&p->pr_cond);
}

static void *
peer_thread (void *arg)
{
  struct peer *p = arg;
  struct repl_node *node = p->pr_node;
  const char *name = p->pr_cfg->nc_name;
  struct conn *c;
  /* Left at its waits (establish, conn_receive_loop): peers.c. */
  PEERS_PIN_FOR_CURRENT_SCOPE (node);

  while ((c = establish (p)) != NULL) {
    struct stream *st = c->c_stream;
    bool primary, fence, tp_lost;

    /* A send that makes no progress for `timeout` fails, so a stalled
     * peer can never block a sender for ever. */
    stream_set_send_timeout (st, node->n_cfg.cf_timeout_ms);

    pthread_mutex_lock (&p->pr_lock);
    if (p->pr_stopping || p->pr_admin_down || p->pr_incoming != NULL) {
      /* Stopped or disconnected (replctl) during the handshake, or the
       * peer dialled again while we shook hands on its previous
       * connection (peer_hand_over could not fail that one: it was not
       * published yet): the new connection wins here too. */
      bool stopping = p->pr_stopping;

      if (!stopping && !p->pr_admin_down)
        log_error ("peer %s: peer connected again; replacing the old "
                   "connection (still in its handshake)", name);
      peer_set_conn_locked (p, CONN_CONNECTING);
      pthread_mutex_unlock (&p->pr_lock);
      conn_put (c);
      stream_free (st);
      if (stopping)
        break;
      continue;
    }
    /* Logged before the resync thread can log its start. */
    log_info ("peer %s: connected (%s, %s)", name,
              role_name (c->c_hello.role),
              disk_state_name (c->c_hello.disk_state));
    connected_locked (p, c);
    pthread_mutex_unlock (&p->pr_lock);

    pthread_mutex_lock (&node->n_lock);
    if (c->c_hello.role == REPL_ROLE_PRIMARY)
      node_peer_role_locked (node, p, true);
    if (c->c_peer_diskless)
      dl_note_writer_locked (node, p, c->c_hello.role == REPL_ROLE_PRIMARY &&
                                      c->c_hello.routed == 0);
    pthread_mutex_unlock (&node->n_lock);
    node_quorum_changed (node);

    sync_on_connect (c, &c->c_hello);
    /* A diskless node: a storage Primary to write through (allow-two-
     * primaries, diskless.c), once its generation is known; a diskless
     * peer promoting asks what we are, and a diskless writer may be
     * back (diskless-primaries.c). */
    dl_answer_promoting (c, c->c_hello.role, c->c_hello.routed, true);
    if (node->n_diskless)
      diskless_route_update (node, c->c_hello.role == REPL_ROLE_PRIMARY &&
                                   !c->c_peer_diskless ? c : NULL);
    conn_receive_loop (c);

    primary = node_role (node) == REPL_ROLE_PRIMARY;
    /* fencing: writes wait for the fence-peer handler, counted before
     * the teardown releases the writers that waited for this peer. */
    fence = role_fence_begin (node, c);
    /* Two primaries apart: a split brain from now on (generation.c),
     * even after a GOODBYE (the peer may have answered writes it could
     * not send us any more).  The new generation is on our disk before
     * the teardown releases any writer that waited for this peer (and
     * the writers that found the connection failed wait for the
     * teardown: tp_wait_lost), so that no write is answered without the
     * peer in the old one: after a crash the two would meet as a
     * resync. */
    pthread_mutex_lock (&p->pr_lock);
    tp_lost = primary && node->n_cfg.cf_two_primaries &&
              c->c_role == REPL_ROLE_PRIMARY &&
              !node->n_diskless && !c->c_peer_diskless;
    pthread_mutex_unlock (&p->pr_lock);
    if (tp_lost)
      gen_two_primaries_lost (node);
    pthread_mutex_lock (&p->pr_lock);
    /* The receive loop only returns after conn_fail. */
    disconnected_locked (p, c, primary);
    c->c_stream = NULL;         /* nobody uses it once failed and torn
                                   down */
    pthread_mutex_unlock (&p->pr_lock);
    stream_free (st);

    pthread_mutex_lock (&node->n_lock);
    node_peer_role_locked (node, p, false);
    dl_note_writer_locked (node, p, false);
    pthread_mutex_unlock (&node->n_lock);
    log_info ("peer %s: disconnected", name);
    node_quorum_changed (node);
    if (node->n_diskless)
      diskless_route_update (node, NULL);
    sync_on_lost (c, fence);
    {
      uint64_t lived = now_ns () - c->c_connected_ns;
      bool closed = atomic_load (&c->c_peer_closed) &&
                    !atomic_load (&c->c_heard);

      conn_put (c);
      pthread_mutex_lock (&p->pr_lock);
      if (!flap_delay_locked (p, lived, closed)) {
        pthread_mutex_unlock (&p->pr_lock);
        break;
      }
      pthread_mutex_unlock (&p->pr_lock);
    }
  }
  return NULL;
}
int
peer_start (struct peer *p)
{
  int err;

  err = pthread_create (&p->pr_thread, NULL, peer_thread, p);
  if (err) {
    errno = err;
    log_error ("peer %s: pthread_create: %m", p->pr_cfg->nc_name);
    return -1;
  }
  err = pthread_create (&p->pr_resync_thread, NULL, resync_thread, p);
  if (err == 0)
    err = pthread_create (&p->pr_flush_thread, NULL, peer_flush_thread, p);
  if (err) {
    errno = err;
    log_error ("peer %s: pthread_create: %m", p->pr_cfg->nc_name);
    peer_stop (p);
    return -1;
  }
  return 0;
}

/* Ask the peer's threads to stop and drop the connection, without waiting.
 * The node asks every peer before joining any, so that no peer thread
 * dials again while another is being stopped. */
void
peer_request_stop (struct peer *p)
{
  struct conn *c;

  pthread_mutex_lock (&p->pr_lock);
  p->pr_stopping = true;
  /* Tell the peer, so that it does not take our going for a fault (best
   * effort: if a sender is busy the message may not leave). */
  c = peer_conn_locked (p);
  if (c != NULL && !c->c_sending && c->c_goodbye_msg.om_done) {
    out_msg_init (&c->c_goodbye_msg, REPL_MSG_GOODBYE, 0, 0, 0, 0, NULL, 0);
    conn_queue_locked (c, &c->c_goodbye_msg);
  }
  peer_fail_current_locked (p, "shutting down");
  pthread_cond_broadcast (&p->pr_cond);
  pthread_cond_signal (&p->pr_resync_cond);
  pthread_cond_signal (&p->pr_flush_cond);
  pthread_mutex_unlock (&p->pr_lock);
}

/* Stop the peer's threads (those that were started) and drop the
 * connection. */
void
peer_stop (struct peer *p)
{
  peer_request_stop (p);
  if (p->pr_thread)
    pthread_join (p->pr_thread, NULL);
  if (p->pr_resync_thread)
    pthread_join (p->pr_resync_thread, NULL);
  if (p->pr_flush_thread)
    pthread_join (p->pr_flush_thread, NULL);
  p->pr_thread = p->pr_resync_thread = p->pr_flush_thread = 0;
}
