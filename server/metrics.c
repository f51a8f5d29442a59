/* nbdrepl: the Prometheus endpoint.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * A node with `metrics: HOST:PORT` in its configuration entry serves
 * GET /metrics there over HTTP, in Prometheus's text exposition format
 * (version 0.0.4), the way drbd-reactor's exporter does for DRBD.  Every
 * series carries the labels resource and node, the per-peer ones peer
 * too.  States are state sets: one series per state, 1 for the current
 * one and 0 for the others, so that a query or an alert names the state
 * (nbdrepl_peer_connection_state{connection="Connected"} == 1).
 * Anything but /metrics is 404; /metrics with a method other than GET
 * or HEAD is 405.
 *
 * The HTTP side is libmicrohttpd's: one internal thread polls every
 * connection (at most METRICS_MAX_CONNECTIONS at once, each closed
 * after METRICS_TIMEOUT_S idle) and runs the request handler.  The
 * socket is bound in engine_create, like the replication and control
 * sockets, so that a bad or busy address stops the node before it
 * serves; the thread starts in engine_start and is stopped first thing
 * in engine_destroy.
 *
 * Locks: a scrape copies the node's state under n_lock and each peer's
 * under its pr_lock, one at a time, never two at once (as control.c's
 * status does), then formats the copy with no lock held.  The counters
 * are atomics.  Nothing here waits for the network or a disk under a
 * lock.
 */
#include <config.h>

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <microhttpd.h>

#include "internal.h"
#include "log.h"
#include "sockets.h"

#define METRICS_MAX_CONNECTIONS 8
#define METRICS_TIMEOUT_S 10
#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* The ACK latency buckets' upper bounds, in nanoseconds (so that adding
 * a sample multiplies nothing): 50 us to 10 s,
 * about 2.5 per decade (a write to a peer on a LAN is ~100 us, one that
 * waits behind a resync or a slow disk many ms). */
static const uint64_t ack_bounds_ns[ACK_HIST_BUCKETS] = {
  50000, 100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000,
  25000000, 50000000, 100000000, 250000000, 500000000, 1000000000,
  2500000000, 10000000000,
};

/* Called under the peer's pr_lock (window_ack_locked), once per
 * acknowledged client request: a few comparisons. */
void
ack_hist_add (struct ack_hist *h, uint64_t ns)
{
  unsigned i;

  for (i = 0; i < ACK_HIST_BUCKETS; i++)
    if (ns <= ack_bounds_ns[i])
      break;
  h->ah_bucket[i]++;
  h->ah_count++;
  h->ah_sum_ns += ns;
}

/* What a scrape shows of one peer, copied under its pr_lock. */
struct metrics_peer {
  const char *name;
  enum conn_state state;
  enum repl_state repl;
  bool disk_known;
  enum repl_disk_state disk;
  bool role_known;              /* a connection: its role is known */
  enum repl_role role;
  bool split_brain;
  uint64_t out_of_sync;
  bool resyncing;
  uint64_t resync_total, resync_done, resync_elapsed_ns;
  uint64_t in_flight;
  uint64_t msgs_sent, bytes_sent, msgs_received, bytes_received;
  struct ack_hist ack;
};

/* ... and of the node. */
struct metrics_node {
  enum repl_role role;
  enum repl_disk_state disk;
  bool quorum;
  uint64_t size;
  uint64_t writes, write_bytes, reads, read_bytes;
  uint64_t requests_in_flight, al_waits, clients;
  size_t npeers;
  struct metrics_peer peers[REPL_MAX_NODES];
};

static void
snapshot_peer (struct peer *p, struct metrics_peer *s)
{
  struct conn *c;

  s->name = p->pr_cfg->nc_name;
  pthread_mutex_lock (&p->pr_lock);
  c = peer_conn_locked (p);
  s->state = p->pr_state;
  s->repl = p->pr_repl;
  s->disk_known = p->pr_disk_known;
  s->disk = p->pr_disk;
  s->role_known = c != NULL;
  s->role = c != NULL ? c->c_role : REPL_ROLE_SECONDARY;
  s->split_brain = p->pr_split_brain;
  /* As status counts it (control.c): what our bitmap for the peer
   * marks; a sync target counts down what its source announced. */
  if (p->pr_repl == REPL_SYNC_TARGET)
    s->out_of_sync = p->pr_resync_total > p->pr_resync_done
      ? p->pr_resync_total - p->pr_resync_done : 0;
  else if (p->pr_node->n_diskless || p->pr_cfg->nc_diskless)
    s->out_of_sync = 0;
  else
    s->out_of_sync = bitmap_dirty_bytes (&p->pr_bitmap);
  s->resyncing = peer_resyncing_locked (p);
  s->resync_total = p->pr_resync_total;
  s->resync_done = p->pr_resync_done;
  s->resync_elapsed_ns = s->resyncing ? now_ns () - p->pr_resync_start_ns : 0;
  s->in_flight = c != NULL ? c->c_ring_count : 0;
  s->msgs_sent = p->pr_msgs_sent;
  s->bytes_sent = p->pr_bytes_sent;
  s->ack = p->pr_ack_hist;
  pthread_mutex_unlock (&p->pr_lock);
  s->msgs_received = atomic_load (&p->pr_msgs_received);
  s->bytes_received = atomic_load (&p->pr_bytes_received);
}

static void
snapshot_node (struct repl_node *node, struct metrics_node *ns)
{
  size_t i;

  memset (ns, 0, sizeof *ns);
  pthread_mutex_lock (&node->n_lock);
  ns->role = node->n_role;
  ns->disk = node->n_disk;
  ns->quorum = node->n_quorum;
  ns->size = volume_size (&node->n_vol);
  pthread_mutex_unlock (&node->n_lock);
  ns->writes = atomic_load (&node->n_writes);
  ns->write_bytes = atomic_load (&node->n_write_bytes);
  ns->reads = atomic_load (&node->n_reads);
  ns->read_bytes = atomic_load (&node->n_read_bytes);
  ns->requests_in_flight = atomic_load (&node->n_requests_in_flight);
  ns->al_waits = atomic_load (&node->n_al_waits);
  ns->clients = atomic_load (&node->n_clients);
  PEERS_PIN_FOR_CURRENT_SCOPE (node);
  ns->npeers = PEERS (node)->pl_n;
  for (i = 0; i < PEERS (node)->pl_n; i++)
    snapshot_peer (PEERS (node)->pl_peers[i], &ns->peers[i]);
}

/* The body, formatted from a snapshot. */
struct exposition {
  FILE *x_fp;
  const char *x_labels;         /* resource="r0",node="alpha" */
};

static void
family (struct exposition *x, const char *name, const char *type,
        const char *help)
{
  fprintf (x->x_fp, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* name{labels[,peer="p"][,extra]} value */
static void
sample (struct exposition *x, const char *name, const char *peer,
        const char *extra, uint64_t value)
{
  fprintf (x->x_fp, "%s{%s", name, x->x_labels);
  if (peer)
    fprintf (x->x_fp, ",peer=\"%s\"", peer);
  if (extra)
    fprintf (x->x_fp, ",%s", extra);
  fprintf (x->x_fp, "} %" PRIu64 "\n", value);
}

/* One series of a state set: label="state", 1 if it is the current. */
static void
state_sample (struct exposition *x, const char *name, const char *peer,
              const char *label, const char *state, bool current)
{
  char extra[64];

  snprintf (extra, sizeof extra, "%s=\"%s\"", label, state);
  sample (x, name, peer, extra, current ? 1 : 0);
}

static const char *
peer_disk_name (const struct metrics_peer *s)
{
  return s->disk_known ? disk_state_name (s->disk) : "DUnknown";
}

static const char *
peer_role_name (const struct metrics_peer *s)
{
  return s->role_known ? role_name (s->role) : "Unknown";
}

static void
format_node (struct exposition *x, const struct metrics_node *ns)
{
  static const enum repl_role roles[] = {
    REPL_ROLE_PRIMARY, REPL_ROLE_SECONDARY,
  };
  static const enum repl_disk_state disks[] = {
    REPL_DISK_DISKLESS, REPL_DISK_INCONSISTENT, REPL_DISK_OUTDATED,
    REPL_DISK_UPTODATE,
  };
  bool split_brain = false;
  size_t i;

  for (i = 0; i < ns->npeers; i++)
    split_brain |= ns->peers[i].split_brain;

  family (x, "nbdrepl_role", "gauge",
          "The node's role: 1 for the current one.");
  for (i = 0; i < sizeof roles / sizeof roles[0]; i++)
    state_sample (x, "nbdrepl_role", NULL, "role", role_name (roles[i]),
                  roles[i] == ns->role);
  family (x, "nbdrepl_disk_state", "gauge",
          "The node's disk state: 1 for the current one.");
  for (i = 0; i < sizeof disks / sizeof disks[0]; i++)
    state_sample (x, "nbdrepl_disk_state", NULL, "disk",
                  disk_state_name (disks[i]), disks[i] == ns->disk);
  family (x, "nbdrepl_quorum", "gauge",
          "1 if the node has quorum (always 1 with quorum: off).");
  sample (x, "nbdrepl_quorum", NULL, NULL, ns->quorum);
  family (x, "nbdrepl_split_brain", "gauge",
          "1 if the last connection attempt to any peer found split brain.");
  sample (x, "nbdrepl_split_brain", NULL, NULL, split_brain);
  family (x, "nbdrepl_size_bytes", "gauge",
          "The size of the replicated device.");
  sample (x, "nbdrepl_size_bytes", NULL, NULL, ns->size);
  family (x, "nbdrepl_clients", "gauge", "NBD client connections open.");
  sample (x, "nbdrepl_clients", NULL, NULL, ns->clients);
  family (x, "nbdrepl_writes_total", "counter",
          "Client write requests received (trims and zeroes not counted).");
  sample (x, "nbdrepl_writes_total", NULL, NULL, ns->writes);
  family (x, "nbdrepl_write_bytes_total", "counter",
          "Bytes of client write requests received.");
  sample (x, "nbdrepl_write_bytes_total", NULL, NULL, ns->write_bytes);
  family (x, "nbdrepl_reads_total", "counter", "Client read requests received.");
  sample (x, "nbdrepl_reads_total", NULL, NULL, ns->reads);
  family (x, "nbdrepl_read_bytes_total", "counter",
          "Bytes of client read requests received.");
  sample (x, "nbdrepl_read_bytes_total", NULL, NULL, ns->read_bytes);
  family (x, "nbdrepl_requests_in_flight", "gauge",
          "Client requests being served.");
  sample (x, "nbdrepl_requests_in_flight", NULL, NULL, ns->requests_in_flight);
  family (x, "nbdrepl_activity_log_waits_total", "counter",
          "Writes that waited for an activity-log transaction.");
  sample (x, "nbdrepl_activity_log_waits_total", NULL, NULL, ns->al_waits);
}

/* A per-peer family: one sample per peer, of its field. */
#define PEER_FAMILY(x, ns, metric, type, help, field)                   \
  do {                                                                  \
    size_t i_;                                                          \
    family ((x), (metric), (type), (help));                             \
    for (i_ = 0; i_ < (ns)->npeers; i_++)                               \
      sample ((x), (metric), (ns)->peers[i_].name, NULL,                \
              (uint64_t) (ns)->peers[i_].field);                        \
  } while (0)

static void
format_ack_hist (struct exposition *x, const struct metrics_node *ns)
{
  const char *name = "nbdrepl_peer_ack_latency_seconds";
  char le[32];
  uint64_t cum;
  size_t i;
  unsigned b;

  family (x, name, "histogram",
          "Time from queueing a client write, trim, zero or flush for the "
          "peer to the peer's ACK that it is applied.");
  for (i = 0; i < ns->npeers; i++) {
    const struct metrics_peer *s = &ns->peers[i];

    cum = 0;
    for (b = 0; b <= ACK_HIST_BUCKETS; b++) {
      cum += s->ack.ah_bucket[b];
      if (b < ACK_HIST_BUCKETS)
        snprintf (le, sizeof le, "le=\"%g\"", ack_bounds_ns[b] / 1e9);
      else
        snprintf (le, sizeof le, "le=\"+Inf\"");
      fprintf (x->x_fp, "%s_bucket{%s,peer=\"%s\",%s} %" PRIu64 "\n",
               name, x->x_labels, s->name, le, cum);
    }
    fprintf (x->x_fp, "%s_sum{%s,peer=\"%s\"} %.9f\n",
             name, x->x_labels, s->name, s->ack.ah_sum_ns / 1e9);
    fprintf (x->x_fp, "%s_count{%s,peer=\"%s\"} %" PRIu64 "\n",
             name, x->x_labels, s->name, s->ack.ah_count);
  }
}

static void
format_peers (struct exposition *x, const struct metrics_node *ns)
{
  static const enum conn_state conns[] = {
    CONN_STANDALONE, CONN_CONNECTING, CONN_HANDSHAKE, CONN_CONNECTED,
    CONN_DISCONNECTING,
  };
  static const char *const peer_disks[] = {
    "DUnknown", "Diskless", "Inconsistent", "Outdated", "UpToDate",
  };
  static const char *const peer_roles[] = {
    "Unknown", "Primary", "Secondary",
  };
  size_t i, k;

  family (x, "nbdrepl_peer_connection_state", "gauge",
          "The connection to the peer: 1 for the current state.");
  for (i = 0; i < ns->npeers; i++)
    for (k = 0; k < sizeof conns / sizeof conns[0]; k++)
      state_sample (x, "nbdrepl_peer_connection_state", ns->peers[i].name,
                    "connection", conn_state_name (conns[k]),
                    conns[k] == ns->peers[i].state);
  family (x, "nbdrepl_peer_replication_state", "gauge",
          "The replication state with the peer: 1 for the current one.");
  for (i = 0; i < ns->npeers; i++)
    for (k = 0; k <= REPL_STATE_MAX; k++)
      state_sample (x, "nbdrepl_peer_replication_state", ns->peers[i].name,
                    "replication", repl_state_name (k),
                    k == ns->peers[i].repl);
  family (x, "nbdrepl_peer_disk_state", "gauge",
          "The peer's disk as it told or as we know it: 1 for the current "
          "state.");
  for (i = 0; i < ns->npeers; i++)
    for (k = 0; k < sizeof peer_disks / sizeof peer_disks[0]; k++)
      state_sample (x, "nbdrepl_peer_disk_state", ns->peers[i].name, "disk",
                    peer_disks[k],
                    strcmp (peer_disks[k], peer_disk_name (&ns->peers[i]))
                    == 0);
  family (x, "nbdrepl_peer_role", "gauge",
          "The peer's role (Unknown while not connected): 1 for the "
          "current one.");
  for (i = 0; i < ns->npeers; i++)
    for (k = 0; k < sizeof peer_roles / sizeof peer_roles[0]; k++)
      state_sample (x, "nbdrepl_peer_role", ns->peers[i].name, "role",
                    peer_roles[k],
                    strcmp (peer_roles[k], peer_role_name (&ns->peers[i]))
                    == 0);
  PEER_FAMILY (x, ns, "nbdrepl_peer_split_brain", "gauge",
               "1 if the last connection attempt to the peer found split "
               "brain.", split_brain);
  PEER_FAMILY (x, ns, "nbdrepl_peer_out_of_sync_bytes", "gauge",
               "Bytes the peer lacks (or, on a sync target, this node "
               "still lacks from it).", out_of_sync);
  PEER_FAMILY (x, ns, "nbdrepl_peer_resync_total_bytes", "gauge",
               "Bytes to resync in the current or last resync with the "
               "peer.", resync_total);
  PEER_FAMILY (x, ns, "nbdrepl_peer_resync_done_bytes", "gauge",
               "Bytes resynced so far in the current or last resync.",
               resync_done);
  family (x, "nbdrepl_peer_resync_rate_bytes_per_second", "gauge",
          "Average rate of the running resync since it started (0 when "
          "none runs).");
  for (i = 0; i < ns->npeers; i++) {
    const struct metrics_peer *s = &ns->peers[i];
    uint64_t rate = 0;

    if (s->resyncing && s->resync_elapsed_ns >= 1000000)
      rate = (uint64_t) ((double) s->resync_done * 1e9 / s->resync_elapsed_ns);
    sample (x, "nbdrepl_peer_resync_rate_bytes_per_second", s->name, NULL,
            rate);
  }
  family (x, "nbdrepl_peer_resync_progress_ratio", "gauge",
          "Fraction of the running resync done (1 when none runs).");
  for (i = 0; i < ns->npeers; i++) {
    const struct metrics_peer *s = &ns->peers[i];
    double ratio = 1;

    if (s->resyncing && s->resync_total > 0)
      ratio = s->resync_done >= s->resync_total
        ? 1 : (double) s->resync_done / s->resync_total;
    fprintf (x->x_fp, "nbdrepl_peer_resync_progress_ratio{%s,peer=\"%s\"} "
             "%.6f\n", x->x_labels, s->name, ratio);
  }
  PEER_FAMILY (x, ns, "nbdrepl_peer_in_flight_messages", "gauge",
               "Messages sent to the peer and not yet acknowledged.",
               in_flight);
  PEER_FAMILY (x, ns, "nbdrepl_peer_sent_messages_total", "counter",
               "Messages sent to the peer, over every connection.",
               msgs_sent);
  PEER_FAMILY (x, ns, "nbdrepl_peer_sent_bytes_total", "counter",
               "Bytes sent to the peer (headers and payloads).", bytes_sent);
  PEER_FAMILY (x, ns, "nbdrepl_peer_received_messages_total", "counter",
               "Messages received from the peer after the handshake.",
               msgs_received);
  PEER_FAMILY (x, ns, "nbdrepl_peer_received_bytes_total", "counter",
               "Bytes received from the peer after the handshake "
               "(headers and payloads).", bytes_received);
  format_ack_hist (x, ns);
}

/* The whole body (malloc'ed, *len bytes), or NULL. */
static char *
exposition (struct repl_node *node, size_t *len)
{
  struct metrics_node *ns;
  struct exposition x;
  char labels[2 * REPL_NAME_MAX + 32];
  char *body = NULL;

  ns = malloc (sizeof *ns);
  if (ns == NULL)
    return NULL;
  snapshot_node (node, ns);
  /* Names are [A-Za-z0-9_.-] (the loader checks them): nothing to
   * escape in a label value. */
  snprintf (labels, sizeof labels, "resource=\"%s\",node=\"%s\"",
            node->n_cfg.cf_resource, node->n_self->nc_name);
  x.x_labels = labels;
  x.x_fp = open_memstream (&body, len);
  if (x.x_fp == NULL) {
    free (ns);
    return NULL;
  }
  format_node (&x, ns);
  format_peers (&x, ns);
  free (ns);
  if (ferror (x.x_fp)) {
    fclose (x.x_fp);
    free (body);
    return NULL;
  }
  if (fclose (x.x_fp) != 0) {
    free (body);
    return NULL;
  }
  return body;
}

static enum MHD_Result
reply_text (struct MHD_Connection *conn, unsigned status, const char *text)
{
  struct MHD_Response *r;
  enum MHD_Result ret;

  r = MHD_create_response_from_buffer (strlen (text), (void *) text,
                                       MHD_RESPMEM_PERSISTENT);
  if (r == NULL)
    return MHD_NO;
  MHD_add_response_header (r, MHD_HTTP_HEADER_CONTENT_TYPE,
                           "text/plain; charset=utf-8");
  if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
    MHD_add_response_header (r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
  ret = MHD_queue_response (conn, status, r);
  MHD_destroy_response (r);
  return ret;
}

/* libmicrohttpd's request handler: answers on the first call. */
static enum MHD_Result
handle_request (void *cls, struct MHD_Connection *conn, const char *url,
                const char *method, const char *version,
                const char *upload_data, size_t *upload_data_size,
                void **req_cls)
{
  struct repl_node *node = cls;
  struct MHD_Response *r;
  enum MHD_Result ret;
  char *body;
  size_t len;

  (void) version; (void) upload_data; (void) upload_data_size;
  (void) req_cls;
  assert (node->n_magic == NODE_MAGIC);
  if (strcmp (url, "/metrics") != 0)
    return reply_text (conn, MHD_HTTP_NOT_FOUND,
                       "not found: the metrics are at /metrics\n");
  if (strcmp (method, MHD_HTTP_METHOD_GET) != 0 &&
      strcmp (method, MHD_HTTP_METHOD_HEAD) != 0)
    return reply_text (conn, MHD_HTTP_METHOD_NOT_ALLOWED,
                       "method not allowed: GET or HEAD\n");

  body = exposition (node, &len);
  if (body == NULL) {
    log_error ("metrics %s: formatting the metrics: %m",
               node->n_self->nc_metrics);
    return reply_text (conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
                       "out of memory\n");
  }
  r = MHD_create_response_from_buffer (len, body, MHD_RESPMEM_MUST_FREE);
  if (r == NULL) {
    free (body);
    return MHD_NO;
  }
  MHD_add_response_header (r, MHD_HTTP_HEADER_CONTENT_TYPE,
                           METRICS_CONTENT_TYPE);
  ret = MHD_queue_response (conn, MHD_HTTP_OK, r);
  MHD_destroy_response (r);
  return ret;
}

/* libmicrohttpd's errors, as one log line each. */
static void
mhd_log (void *cls, const char *fmt, va_list ap)
{
  struct repl_node *node = cls;
  char msg[256];
  size_t n;

  vsnprintf (msg, sizeof msg, fmt, ap);
  n = strlen (msg);
  while (n > 0 && msg[n - 1] == '\n')
    msg[--n] = '\0';
  log_error ("metrics %s: %s", node->n_self->nc_metrics, msg);
}

/* engine_create: bind the endpoint's socket, if the node has one. */
int
metrics_listen (struct repl_node *node, const char *where)
{
  const struct repl_node_cfg *self = node->n_self;

  if (self->nc_metrics == NULL)
    return 0;
  node->n_metrics_fd = sock_listen_tcp (self->nc_metrics_host,
                                        self->nc_metrics_port);
  if (node->n_metrics_fd == -1) {
    log_error ("%smetrics %s: cannot listen: %m", where, self->nc_metrics);
    return -1;
  }
  return 0;
}

/* engine_start: serve it.  libmicrohttpd gets a duplicate of the socket,
 * which it closes when it stops (or, on some of its failure paths, when
 * it fails to start): n_metrics_fd stays ours, closed by
 * metrics_stop. */
int
metrics_start (struct repl_node *node)
{
  int fd;

  if (node->n_metrics_fd == -1)
    return 0;
  fd = fcntl (node->n_metrics_fd, F_DUPFD_CLOEXEC, 0);
  if (fd == -1) {
    log_error ("metrics %s: dup: %m", node->n_self->nc_metrics);
    return -1;
  }
  node->n_metrics = MHD_start_daemon
    (MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ITC | MHD_USE_ERROR_LOG,
     0, NULL, NULL, handle_request, node,
     MHD_OPTION_EXTERNAL_LOGGER, mhd_log, node,
     MHD_OPTION_LISTEN_SOCKET, fd,
     MHD_OPTION_CONNECTION_LIMIT, (unsigned) METRICS_MAX_CONNECTIONS,
     MHD_OPTION_CONNECTION_TIMEOUT, (unsigned) METRICS_TIMEOUT_S,
     MHD_OPTION_END);
  if (node->n_metrics == NULL) {
    log_error ("metrics %s: cannot start the HTTP server",
               node->n_self->nc_metrics);
    return -1;
  }
  log_info ("node %s: metrics at http://%s/metrics",
            node->n_self->nc_name, node->n_self->nc_metrics);
  return 0;
}

/* engine_destroy: stop serving (joins libmicrohttpd's thread, which
 * may be in a scrape, so the caller holds no lock) and close the
 * socket. */
void
metrics_stop (struct repl_node *node)
{
  if (node->n_metrics) {
    MHD_stop_daemon (node->n_metrics);
    node->n_metrics = NULL;
  }
  if (node->n_metrics_fd >= 0) {
    close (node->n_metrics_fd);
    node->n_metrics_fd = -1;
  }
}
