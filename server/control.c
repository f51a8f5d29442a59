/* nbdrepl: the control socket.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * A unix socket per node (`control:` in the configuration) that replctl
 * talks to.  The protocol is one command line in, the answer out, then
 * the server closes the connection:
 *
 *   status           human-readable status
 *   status --json    the same as one JSON object
 *
 * An answer starting with "error: " is a failure.  Everything is formatted
 * from a snapshot taken under each object's own lock, never across a
 * network wait.
 */
#include <config.h>

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "internal.h"
#include "log.h"
#include "sockets.h"

#define CONTROL_READ_TIMEOUT_MS 2000

struct peer_snapshot {
  const char *name;
  unsigned id;
  const char *address;
  enum conn_state state;
  bool disk_known;
  bool ever_connected;
  enum repl_role role;
  enum repl_disk_state disk;
  bool resyncing;
  uint64_t out_of_sync;
  uint64_t resync_total, resync_done;
  uint64_t in_flight;
  uint64_t msgs_sent, bytes_sent, sends;
  uint64_t connected_for_ms;
  char last_error[256];
};

static void
snapshot_peer (struct peer *p, bool we_are_primary, struct peer_snapshot *s)
{
  pthread_mutex_lock (&p->pr_lock);
  s->name = p->pr_cfg->nc_name;
  s->id = p->pr_cfg->nc_id;
  s->address = p->pr_cfg->nc_address;
  s->state = p->pr_state;
  s->disk_known = p->pr_disk_known && p->pr_state == CONN_CONNECTED;
  s->ever_connected = p->pr_gen > 0;
  s->role = p->pr_role;
  s->disk = p->pr_disk;
  s->resyncing = p->pr_resyncing;
  s->resync_total = p->pr_resync_total;
  s->resync_done = p->pr_resync_done;
  if (we_are_primary)
    s->out_of_sync = bitmap_dirty_bytes (&p->pr_bitmap);
  else
    s->out_of_sync = p->pr_resyncing && p->pr_resync_total > p->pr_resync_done
      ? p->pr_resync_total - p->pr_resync_done : 0;
  s->in_flight = p->pr_ring_count;
  s->msgs_sent = p->pr_msgs_sent;
  s->bytes_sent = p->pr_bytes_sent;
  s->sends = p->pr_sends;
  s->connected_for_ms = p->pr_state == CONN_CONNECTED
    ? (now_ns () - p->pr_connected_ns) / 1000000 : 0;
  snprintf (s->last_error, sizeof s->last_error, "%s", p->pr_last_error);
  pthread_mutex_unlock (&p->pr_lock);
}

/* DRBD's replication states: how data flows on this connection. */
static const char *
replication_name (const struct peer_snapshot *s, bool we_are_primary)
{
  if (s->state != CONN_CONNECTED)
    return "Off";
  if (s->resyncing)
    return we_are_primary ? "SyncSource" : "SyncTarget";
  return "Established";
}

/* The peer's disk as far as we know.  While disconnected: DUnknown,
 * except that the primary knows a peer it has been connected to is
 * Outdated once writes it missed are recorded. */
static const char *
peer_disk_name (const struct peer_snapshot *s, bool we_are_primary)
{
  if (s->state == CONN_CONNECTED && s->disk_known)
    return disk_state_name (s->disk);
  if (we_are_primary && s->ever_connected && s->out_of_sync > 0)
    return "Outdated";
  return "DUnknown";
}

static unsigned
resync_percent (const struct peer_snapshot *s)
{
  if (!s->resyncing || s->resync_total == 0)
    return 100;
  return (unsigned) (s->resync_done * 100 / s->resync_total);
}

/* A growing string. */
struct buf {
  char *b_data;
  size_t b_len, b_cap;
  bool b_failed;
};

static void
buf_printf (struct buf *b, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));

static void
buf_printf (struct buf *b, const char *fmt, ...)
{
  va_list ap;
  int n;

  if (b->b_failed)
    return;
  for (;;) {
    va_start (ap, fmt);
    n = vsnprintf (b->b_data + b->b_len, b->b_cap - b->b_len, fmt, ap);
    va_end (ap);
    if (n < 0) {
      b->b_failed = true;
      return;
    }
    if (b->b_len + n < b->b_cap) {
      b->b_len += n;
      return;
    }
    b->b_cap = (b->b_cap + n + 1) * 2;
    char *d = realloc (b->b_data, b->b_cap);
    if (d == NULL) {
      b->b_failed = true;
      return;
    }
    b->b_data = d;
  }
}

/* JSON string: names come from the validated configuration, but errors
 * may hold anything. */
static void
buf_json_string (struct buf *b, const char *s)
{
  buf_printf (b, "\"");
  for (; *s; s++) {
    unsigned char c = *s;
    if (c == '"' || c == '\\')
      buf_printf (b, "\\%c", c);
    else if (c < 0x20)
      buf_printf (b, "\\u%04x", c);
    else
      buf_printf (b, "%c", c);
  }
  buf_printf (b, "\"");
}

static void
human_bytes (uint64_t n, char *out, size_t len)
{
  static const char *units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
  double v = n;
  unsigned u = 0;

  while (v >= 1024 && u < 4) {
    v /= 1024;
    u++;
  }
  if (u == 0)
    snprintf (out, len, "%" PRIu64 " B", n);
  else
    snprintf (out, len, "%.1f %s", v, units[u]);
}

char *
control_status (struct repl_node *node, bool json)
{
  struct peer_snapshot snaps[REPL_MAX_NODES];
  struct buf b = { 0 };
  enum repl_role role;
  enum repl_disk_state disk;
  bool primary;
  size_t i;
  uint64_t in_flight = atomic_load (&node->n_requests_in_flight);

  pthread_mutex_lock (&node->n_lock);
  role = node->n_role;
  disk = node->n_disk;
  pthread_mutex_unlock (&node->n_lock);
  primary = role == REPL_ROLE_PRIMARY;
  for (i = 0; i < node->n_npeers; i++)
    snapshot_peer (node->n_peers[i], primary, &snaps[i]);

  if (json) {
    buf_printf (&b, "{\"resource\":");
    buf_json_string (&b, node->n_cfg.cf_resource);
    buf_printf (&b, ",\"node\":");
    buf_json_string (&b, node->n_self->nc_name);
    buf_printf (&b, ",\"id\":%u,\"role\":\"%s\",\"disk\":\"%s\","
                "\"size\":%" PRIu64 ",\"protocol\":\"%c\","
                "\"in_flight\":%" PRIu64 ",\"writes\":%" PRIu64
                ",\"write_bytes\":%" PRIu64 ",\"reads\":%" PRIu64
                ",\"read_bytes\":%" PRIu64 ",\"peers\":[",
                node->n_self->nc_id, role_name (role), disk_state_name (disk),
                node->n_vol.vol_size, node->n_cfg.cf_protocol, in_flight,
                (uint64_t) atomic_load (&node->n_writes),
                (uint64_t) atomic_load (&node->n_write_bytes),
                (uint64_t) atomic_load (&node->n_reads),
                (uint64_t) atomic_load (&node->n_read_bytes));
    for (i = 0; i < node->n_npeers; i++) {
      const struct peer_snapshot *s = &snaps[i];
      buf_printf (&b, "%s{\"name\":", i > 0 ? "," : "");
      buf_json_string (&b, s->name);
      buf_printf (&b, ",\"id\":%u,\"address\":", s->id);
      buf_json_string (&b, s->address);
      buf_printf (&b, ",\"connection\":\"%s\",\"role\":\"%s\","
                  "\"disk\":\"%s\",\"replication\":\"%s\","
                  "\"out_of_sync_bytes\":%" PRIu64 ","
                  "\"resync_total_bytes\":%" PRIu64 ","
                  "\"resync_done_bytes\":%" PRIu64 ","
                  "\"resync_percent\":%u,\"in_flight\":%" PRIu64 ","
                  "\"messages_sent\":%" PRIu64 ",\"bytes_sent\":%" PRIu64 ","
                  "\"sends\":%" PRIu64 ","
                  "\"connected_ms\":%" PRIu64 ",\"last_error\":",
                  conn_state_name (s->state),
                  s->disk_known ? role_name (s->role) : "Unknown",
                  peer_disk_name (s, primary),
                  replication_name (s, primary), s->out_of_sync,
                  s->resync_total, s->resync_done, resync_percent (s),
                  s->in_flight, s->msgs_sent, s->bytes_sent, s->sends,
                  s->connected_for_ms);
      buf_json_string (&b, s->last_error);
      buf_printf (&b, "}");
    }
    buf_printf (&b, "]}\n");
  }
  else {
    char size[32];

    human_bytes (node->n_vol.vol_size, size, sizeof size);
    buf_printf (&b, "%s node:%s role:%s disk:%s size:%s protocol:%c "
                "in-flight:%" PRIu64 "\n",
                node->n_cfg.cf_resource, node->n_self->nc_name,
                role_name (role), disk_state_name (disk), size,
                node->n_cfg.cf_protocol, in_flight);
    for (i = 0; i < node->n_npeers; i++) {
      const struct peer_snapshot *s = &snaps[i];
      char oos[32], done[32], total[32];

      human_bytes (s->out_of_sync, oos, sizeof oos);
      buf_printf (&b, "  %s (%s) connection:%s", s->name, s->address,
                  conn_state_name (s->state));
      if (s->state == CONN_CONNECTED)
        buf_printf (&b, " role:%s disk:%s replication:%s",
                    role_name (s->role), disk_state_name (s->disk),
                    replication_name (s, primary));
      else
        buf_printf (&b, " disk:%s", peer_disk_name (s, primary));
      buf_printf (&b, "\n    out-of-sync:%s in-flight:%" PRIu64, oos,
                  s->in_flight);
      if (s->state == CONN_CONNECTED && s->resyncing) {
        human_bytes (s->resync_done, done, sizeof done);
        human_bytes (s->resync_total, total, sizeof total);
        buf_printf (&b, " resync:%u%% (%s of %s)", resync_percent (s),
                    done, total);
      }
      buf_printf (&b, "\n");
      if (s->state != CONN_CONNECTED && s->last_error[0])
        buf_printf (&b, "    last-error: %s\n", s->last_error);
    }
  }

  if (b.b_failed) {
    free (b.b_data);
    return NULL;
  }
  return b.b_data;
}

static void
serve (struct repl_node *node, int fd)
{
  char cmd[256];
  size_t len = 0;
  char *answer = NULL;
  const char *reply;

  /* Read one line. */
  while (len < sizeof cmd - 1) {
    struct pollfd pfd = { .fd = fd, .events = POLLIN };
    ssize_t r;

    if (poll (&pfd, 1, CONTROL_READ_TIMEOUT_MS) <= 0)
      return;
    r = read (fd, cmd + len, sizeof cmd - 1 - len);
    if (r <= 0)
      return;
    len += r;
    if (memchr (cmd, '\n', len))
      break;
  }
  cmd[len] = '\0';
  cmd[strcspn (cmd, "\r\n")] = '\0';

  if (strcmp (cmd, "status") == 0)
    answer = control_status (node, false);
  else if (strcmp (cmd, "status --json") == 0)
    answer = control_status (node, true);
  else {
    char msg[320];
    snprintf (msg, sizeof msg, "error: unknown command '%.200s'\n", cmd);
    sock_write_full (fd, msg, strlen (msg), CONTROL_READ_TIMEOUT_MS);
    return;
  }
  reply = answer ? answer : "error: out of memory\n";
  if (sock_write_full (fd, reply, strlen (reply),
                       CONTROL_READ_TIMEOUT_MS) == -1)
    log_debug ("control: write: %m");
  free (answer);
}

void *
control_thread (void *arg)
{
  struct repl_node *node = arg;

  for (;;) {
    struct pollfd pfd[2] = {
      { .fd = node->n_control_fd, .events = POLLIN },
      { .fd = node->n_stop_fd, .events = POLLIN },
    };
    int fd;

    if (poll (pfd, 2, -1) == -1) {
      if (errno == EINTR)
        continue;
      log_error ("control: poll: %m");
      break;
    }
    if (pfd[1].revents)
      break;
    fd = accept4 (node->n_control_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd == -1)
      continue;
    serve (node, fd);
    close (fd);
  }
  return NULL;
}
