/* nbdrepl: the control socket.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * A unix socket per node (`control:` in the configuration) that replctl
 * talks to.  The protocol is one command line in, the answer out, then
 * the server closes the connection:
 *
 *   status           human-readable status
 *   status --json    the same as one JSON object
 *   primary [--force], secondary, invalidate, verify, resync,
 *   resize [--assume-clean] [--size BYTES]
 *
 * An answer starting with "error: " is a failure.
 *
 * Who may ask: the socket is created mode CONTROL_MODE (owner and group
 * of the node's process), whatever the umask, and each caller's
 * credentials are taken from the socket (SO_PEERCRED).  status only
 * reads, so any caller that can connect gets it; every other command
 * changes the node's state and is refused unless the caller is root or
 * the node's own user (DRBD asks for CAP_NET_ADMIN for all but status,
 * tgt for uid 0).  Everything is formatted
 * from a snapshot taken under each object's own lock, never across a
 * network wait.
 *
 * Locks: the snapshot takes n_lock, n_md_io_lock, n_al_lock and each
 * peer's pr_lock one at a time, never two at once, so it cannot join a
 * cycle with the engine's nestings (n_md_io_lock -> pr_lock in meta.c
 * and generation.c, n_md_io_lock -> n_lock through node_role).
 * n_md_io_lock is held by metadata writers across their fdatasync, so
 * it is taken with a deadline: a stalled metadata disk shows up in the
 * status as "busy" instead of hanging it.
 */
#include <config.h>

#include <errno.h>
#include <grp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>

#ifdef __SANITIZE_THREAD__
#include <sanitizer/tsan_interface.h>
#endif

#include "cleanup.h"
#include "internal.h"
#include "log.h"
#include "sockets.h"

#define CONTROL_READ_TIMEOUT_MS 2000

/* The control socket's permissions: read and write (connect) for the
 * owner and the group of the node's process only. */
#define CONTROL_MODE 0660

/* How long status waits for the metadata lock before it reports the
 * metadata as busy. */
#define CONTROL_MD_LOCK_TIMEOUT_MS 1000

/* Width of the resync progress bar, between the brackets. */
#define CONTROL_BAR_WIDTH 20

struct peer_snapshot {
  const char *name;
  unsigned id;
  const char *address;
  enum conn_state state;
  bool disk_known;
  bool has_conn;                /* a connection: its fields are known */
  const char *tls;              /* its TLS path (stream_kind), or NULL */
  bool pause_here, pause_peer;  /* pause-sync, here and on the peer */
  enum repl_role role;
  enum repl_disk_state disk;
  bool resyncing;
  uint64_t out_of_sync;
  uint64_t resync_total, resync_done;
  uint64_t in_flight;
  uint64_t msgs_sent, bytes_sent, sends;
  uint64_t connected_for_ms;
  uint64_t repl_for_ms;         /* in the replication state this long */
  uint64_t resync_elapsed_ns;   /* since the resync started */
  enum repl_state repl;         /* as stored (state.c) */
  struct gen_uuids peer_uuids;  /* as the peer told us */
  int decision;                 /* enum uuid_decision, or -1: none yet */
  int md_slot;
  bool verify_finished;
  uint64_t verify_total, verify_done, verify_oos;
  char last_error[512];
};

/* What status shows of the node itself, and of its metadata. */
struct node_snapshot {
  enum repl_role role;
  enum repl_disk_state disk;
  bool md_open;                 /* has metadata (n_md_open) */
  bool md_busy;                 /* n_md_io_lock not had in time: sb unknown */
  struct md_super sb;           /* copy of n_md.md_super */
  bool al_ready;
  uint32_t al_active, al_slots;
  uint64_t al_extent_size;
  uint64_t al_seq;              /* last durable transaction */
  bool al_failed;
  uint64_t al_waits;
  uint64_t tp_conflicts, tp_kept_local;
};

static void
snapshot_peer (struct peer *p, bool we_are_primary, struct peer_snapshot *s)
{
  struct conn *c;

  pthread_mutex_lock (&p->pr_lock);
  s->name = p->pr_cfg->nc_name;
  s->id = p->pr_cfg->nc_id;
  s->address = p->pr_cfg->nc_address;
  s->state = p->pr_state;
  s->disk_known = p->pr_disk_known;
  c = p->pr_conn;
  s->has_conn = c != NULL;
  s->tls = c != NULL && c->c_stream != NULL && stream_is_tls (c->c_stream)
           ? stream_kind (c->c_stream) : NULL;
  s->pause_here = p->pr_pause_user;
  s->pause_peer = p->pr_pause_peer;
  s->role = c != NULL ? c->c_role : REPL_ROLE_SECONDARY;
  s->disk = p->pr_disk;
  s->repl = p->pr_repl;
  s->resyncing = peer_resyncing_locked (p);
  s->resync_total = p->pr_resync_total;
  s->resync_done = p->pr_resync_done;
  /* What our bitmap for the peer marks; a sync target counts down what
   * its source announced. */
  if (p->pr_repl == REPL_SYNC_TARGET)
    s->out_of_sync = p->pr_resync_total > p->pr_resync_done
      ? p->pr_resync_total - p->pr_resync_done : 0;
  else if (p->pr_node->n_diskless || p->pr_cfg->nc_diskless)
    s->out_of_sync = 0;         /* no data on one side: nothing to lack */
  else
    s->out_of_sync = bitmap_dirty_bytes (&p->pr_bitmap);
  s->in_flight = c != NULL ? c->c_ring_count : 0;
  s->msgs_sent = p->pr_msgs_sent;
  s->bytes_sent = p->pr_bytes_sent;
  s->sends = p->pr_sends;
  s->repl_for_ms = p->pr_repl_since_ns != 0
    ? (now_ns () - p->pr_repl_since_ns) / 1000000 : 0;
  s->connected_for_ms = p->pr_state == CONN_CONNECTED
    ? (now_ns () - c->c_connected_ns) / 1000000 : 0;
  s->resync_elapsed_ns = s->resyncing
    ? now_ns () - p->pr_resync_start_ns : 0;
  if (c != NULL) {
    s->peer_uuids = c->c_peer_uuids;
    s->decision = c->c_decision;
  }
  else
    s->decision = -1;
  s->md_slot = p->pr_md_slot;
  s->verify_finished = p->pr_verify_finished;
  s->verify_total = p->pr_verify_total;
  s->verify_done = p->pr_verify_done;
  s->verify_oos = p->pr_verify_oos;
  snprintf (s->last_error, sizeof s->last_error, "%s", p->pr_last_error);
  pthread_mutex_unlock (&p->pr_lock);
}

/* pthread_mutex_clocklock, told to ThreadSanitizer: GCC 12's TSan
 * runtime does not intercept it, so without these annotations it sees
 * the unlock of a mutex it never saw locked, and races on what the
 * lock guards. */
static int
md_io_clocklock (pthread_mutex_t *m, const struct timespec *deadline)
{
  int r;

#ifdef __SANITIZE_THREAD__
  __tsan_mutex_pre_lock (m, __tsan_mutex_try_lock);
#endif
  r = pthread_mutex_clocklock (m, CLOCK_MONOTONIC, deadline);
#ifdef __SANITIZE_THREAD__
  __tsan_mutex_post_lock (m, __tsan_mutex_try_lock |
                          (r != 0 ? __tsan_mutex_try_lock_failed : 0), 0);
#endif
  return r;
}

/* The node's own state, each part under its own lock, one at a time. */
static void
snapshot_node (struct repl_node *node, struct node_snapshot *ns)
{
  struct timespec deadline;

  memset (ns, 0, sizeof *ns);
  pthread_mutex_lock (&node->n_lock);
  ns->role = node->n_role;
  ns->disk = node->n_disk;
  pthread_mutex_unlock (&node->n_lock);

  /* n_md_open, n_al_ready and n_md_path are set before the control
   * thread starts and cleared after it has stopped. */
  ns->md_open = node->n_md_open;
  if (ns->md_open) {
    deadline = deadline_after_ns (CONTROL_MD_LOCK_TIMEOUT_MS *
                                  UINT64_C (1000000));
    if (md_io_clocklock (&node->n_md_io_lock, &deadline) == 0) {
      ns->sb = node->n_md.md_super;
      pthread_mutex_unlock (&node->n_md_io_lock);
    }
    else
      ns->md_busy = true;
  }

  ns->al_ready = node->n_al_ready;
  if (ns->al_ready) {
    pthread_mutex_lock (&node->n_al_lock);
    ns->al_active = al_nactive (&node->n_al);
    ns->al_slots = node->n_al.al_nslots;
    ns->al_extent_size = UINT64_C (1) << node->n_al.al_shift;
    ns->al_seq = node->n_al.al_seq_durable;
    ns->al_failed = node->n_al.al_failed;
    pthread_mutex_unlock (&node->n_al_lock);
  }
  ns->al_waits = atomic_load (&node->n_al_waits);
  ns->tp_conflicts = atomic_load (&node->n_tp_conflicts);
  ns->tp_kept_local = atomic_load (&node->n_tp_kept_local);
}

/* Whether the superblock copy can be shown. */
static bool
have_super (const struct node_snapshot *ns)
{
  return ns->md_open && !ns->md_busy;
}

/* The bitmap UUID we hold for the peer, if known. */
static bool
peer_bitmap_uuid (const struct node_snapshot *ns,
                  const struct peer_snapshot *s, uint64_t *uuid)
{
  if (!have_super (ns) || s->md_slot < 0 || s->md_slot >= MD_MAX_PEER_SLOTS)
    return false;
  *uuid = ns->sb.ms_peers[s->md_slot].mp_bitmap_uuid;
  return true;
}

/* DRBD's replication states: how data flows on this connection. */
static const char *
replication_name (const struct peer_snapshot *s)
{
  return repl_state_name (s->repl);
}

/* The peer's disk as stored: what the peer told us while connected;
 * after that, Outdated once it has missed writes of ours (a Primary's,
 * recorded by the write path and at teardown), otherwise unknown. */
static const char *
peer_disk_name (const struct peer_snapshot *s)
{
  return s->disk_known ? disk_state_name (s->disk) : "DUnknown";
}

static unsigned
resync_percent (const struct peer_snapshot *s)
{
  if (!s->resyncing || s->resync_total == 0)
    return 100;
  return (unsigned) (s->resync_done * 100 / s->resync_total);
}

/* Resync speed so far, in bytes per second (0: not resyncing or too
 * early to say), and the seconds left at that speed (-1: unknown). */
static uint64_t
resync_rate (const struct peer_snapshot *s)
{
  if (!s->resyncing || s->resync_elapsed_ns < 1000000 || s->resync_done == 0)
    return 0;
  return (uint64_t) ((double) s->resync_done * 1e9 / s->resync_elapsed_ns);
}

static int64_t
resync_eta (const struct peer_snapshot *s)
{
  uint64_t rate = resync_rate (s);

  if (rate == 0 || s->resync_done > s->resync_total)
    return -1;
  return (int64_t) ((s->resync_total - s->resync_done + rate - 1) / rate);
}

/* Names of superblock flags (as replctl dump-md prints them) and of the
 * flags in a peer's generation UUIDs. */
struct flag_name {
  uint32_t fn_flag;
  const char *fn_name;
};

static const struct flag_name md_flag_names[] = {
  { MD_FLAG_CONSISTENT, "consistent" },
  { MD_FLAG_WAS_UPTODATE, "was-uptodate" },
  { MD_FLAG_PRIMARY, "primary" },
  { MD_FLAG_CRASHED_PRIMARY, "crashed-primary" },
  { MD_FLAG_CLEAN, "clean" },
  { MD_FLAG_TENTATIVE, "tentative" },
};

static const struct flag_name gu_flag_names[] = {
  { GU_FLAG_CONSISTENT, "consistent" },
  { GU_FLAG_CRASHED_PRIMARY, "crashed-primary" },
  { GU_FLAG_PRIMARY, "primary" },
  { GU_FLAG_TENTATIVE, "tentative" },
};
#define NFLAGS(t) (sizeof (t) / sizeof (t)[0])

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

/* How the replication link is protected: "off", "psk" or
 * "certificates" (peer-tls.c). */
static const char *
fencing_name (enum repl_fencing f)
{
  switch (f) {
  case REPL_FENCING_DONT_CARE: return "dont-care";
  case REPL_FENCING_RESOURCE_ONLY: return "resource-only";
  case REPL_FENCING_RESOURCE_AND_STONITH: return "resource-and-stonith";
  }
  return "?";
}

static const char *
link_tls (const struct repl_node *node)
{
  if (!node->n_cfg.cf_tls)
    return "off";
  return node->n_cfg.cf_tls_ca ? "certificates" : "psk";
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

/* A generation UUID as 16 hex digits (as in the log and dump-md). */
static void
buf_uuid (struct buf *b, uint64_t u, bool json)
{
  buf_printf (b, json ? "\"%016" PRIx64 "\"" : "%016" PRIx64, u);
}

/* Flag names: "a,b" (human, "none" when empty) or ["a","b"] (JSON). */
static void
buf_flags (struct buf *b, uint32_t flags,
           const struct flag_name *names, size_t n, bool json)
{
  bool any = false;
  size_t i;

  if (json)
    buf_printf (b, "[");
  for (i = 0; i < n; i++)
    if (flags & names[i].fn_flag) {
      buf_printf (b, json ? "%s\"%s\"" : "%s%s", any ? "," : "",
                  names[i].fn_name);
      any = true;
    }
  if (json)
    buf_printf (b, "]");
  else if (!any)
    buf_printf (b, "none");
}

/* Seconds as H:MM:SS. */
static void
buf_duration (struct buf *b, int64_t secs)
{
  buf_printf (b, "%" PRId64 ":%02d:%02d", secs / 3600,
              (int) (secs / 60 % 60), (int) (secs % 60));
}

/* The human lines about the node's metadata and activity log. */
static void
human_node_meta (struct buf *b, struct repl_node *node,
                 const struct node_snapshot *ns)
{
  char ext[32];

  if (!ns->md_open)
    return;
  buf_printf (b, "  meta:%s last-stop:%s", node->n_md_path,
              node->n_md_crashed ? "unclean" : "clean");
  if (ns->md_busy)
    buf_printf (b, " busy:yes (metadata I/O has taken more than %d ms; "
                "is the metadata disk stalled?)\n  uuids unknown\n",
                CONTROL_MD_LOCK_TIMEOUT_MS);
  else {
    buf_printf (b, " flags:");
    buf_flags (b, ns->sb.ms_flags, md_flag_names, NFLAGS (md_flag_names),
               false);
    buf_printf (b, "\n  uuids current:");
    buf_uuid (b, ns->sb.ms_current_uuid, false);
    buf_printf (b, " history:");
    buf_uuid (b, ns->sb.ms_history_uuid[0], false);
    buf_printf (b, ",");
    buf_uuid (b, ns->sb.ms_history_uuid[1], false);
    buf_printf (b, "\n");
  }
  if (ns->al_ready) {
    human_bytes (ns->al_extent_size, ext, sizeof ext);
    buf_printf (b, "  activity-log extents:%" PRIu32 "/%" PRIu32 " of %s "
                "seq:%" PRIu64 " waits:%" PRIu64 "%s\n", ns->al_active,
                ns->al_slots, ext, ns->al_seq, ns->al_waits,
                ns->al_failed ? " FAILED: the metadata cannot be written; "
                "writes fail" : "");
  }
}

/* The human lines about a peer's resync progress and generations. */
static void
human_peer_gen (struct buf *b, const struct node_snapshot *ns,
                const struct peer_snapshot *s)
{
  const struct gen_uuids *u = &s->peer_uuids;
  uint64_t bitmap_uuid;

  if (s->state == CONN_CONNECTED && s->resyncing) {
    unsigned width = s->resync_total
      ? (unsigned) (s->resync_done * CONTROL_BAR_WIDTH / s->resync_total)
      : CONTROL_BAR_WIDTH;
    uint64_t rate = resync_rate (s);
    int64_t eta = resync_eta (s);
    unsigned i;

    if (width > CONTROL_BAR_WIDTH)
      width = CONTROL_BAR_WIDTH;
    buf_printf (b, "    [");
    for (i = 0; i < CONTROL_BAR_WIDTH; i++)
      buf_printf (b, "%c", i < width ? '=' : i == width ? '>' : '.');
    buf_printf (b, "] %.1f%%", s->resync_total
                ? s->resync_done * 100.0 / s->resync_total : 100.0);
    if (rate > 0)
      buf_printf (b, " rate:%.1f MiB/s", rate / 1048576.0);
    else
      buf_printf (b, " rate:?");
    buf_printf (b, " eta:");
    if (eta >= 0)
      buf_duration (b, eta);
    else
      buf_printf (b, "?");
    buf_printf (b, "\n");
  }

  if (s->repl == REPL_VERIFY_S || s->verify_total > 0)
    buf_printf (b, "    verify:%s %" PRIu64 "%% found-out-of-sync:%" PRIu64
                "\n", s->repl == REPL_VERIFY_S ? "running" :
                s->verify_finished ? "finished" : "interrupted",
                s->verify_total ? s->verify_done * 100 / s->verify_total : 0,
                s->verify_oos);
  buf_printf (b, "    decision:%s bitmap-uuid:",
              s->decision >= 0 ? uuid_decision_name (s->decision) : "none");
  if (peer_bitmap_uuid (ns, s, &bitmap_uuid))
    buf_uuid (b, bitmap_uuid, false);
  else
    buf_printf (b, "unknown");
  buf_printf (b, "\n");
  if (s->has_conn) {
    buf_printf (b, "    peer-uuids current:");
    buf_uuid (b, u->gu_current, false);
    buf_printf (b, " bitmap:");
    buf_uuid (b, u->gu_bitmap, false);
    buf_printf (b, " history:");
    buf_uuid (b, u->gu_history[0], false);
    buf_printf (b, ",");
    buf_uuid (b, u->gu_history[1], false);
    buf_printf (b, " flags:");
    buf_flags (b, u->gu_flags, gu_flag_names, NFLAGS (gu_flag_names), false);
    buf_printf (b, "\n");
  }
}

/* The JSON keys about the node's metadata and activity log, each
 * preceded by a comma. */
static void
json_node_meta (struct buf *b, struct repl_node *node,
                const struct node_snapshot *ns)
{
  buf_printf (b, ",\"meta_path\":");
  if (ns->md_open)
    buf_json_string (b, node->n_md_path);
  else
    buf_printf (b, "null");
  buf_printf (b, ",\"meta_busy\":%s,\"last_stop\":\"%s\"",
              ns->md_busy ? "true" : "false",
              node->n_md_crashed ? "unclean" : "clean");
  if (have_super (ns)) {
    buf_printf (b, ",\"meta_flags\":");
    buf_flags (b, ns->sb.ms_flags, md_flag_names, NFLAGS (md_flag_names),
               true);
    buf_printf (b, ",\"current_uuid\":");
    buf_uuid (b, ns->sb.ms_current_uuid, true);
    buf_printf (b, ",\"history_uuids\":[");
    buf_uuid (b, ns->sb.ms_history_uuid[0], true);
    buf_printf (b, ",");
    buf_uuid (b, ns->sb.ms_history_uuid[1], true);
    buf_printf (b, "]");
  }
  else
    buf_printf (b, ",\"meta_flags\":null,\"current_uuid\":null,"
                "\"history_uuids\":null");
  buf_printf (b, ",\"al_active_extents\":%" PRIu32 ",\"al_extents\":%"
              PRIu32 ",\"al_extent_size\":%" PRIu64 ",\"al_seq\":%" PRIu64
              ",\"al_waits\":%" PRIu64 ",\"al_failed\":%s",
              ns->al_active, ns->al_slots, ns->al_extent_size, ns->al_seq,
              ns->al_waits, ns->al_failed ? "true" : "false");
  buf_printf (b, ",\"write_conflicts\":%" PRIu64 ",\"write_conflicts_"
              "kept_local\":%" PRIu64, ns->tp_conflicts, ns->tp_kept_local);
}

/* The JSON keys about a peer's generations and resync speed, each
 * preceded by a comma. */
static void
json_peer_gen (struct buf *b, const struct node_snapshot *ns,
               const struct peer_snapshot *s)
{
  const struct gen_uuids *u = &s->peer_uuids;
  int64_t eta = resync_eta (s);
  uint64_t bitmap_uuid;

  buf_printf (b, ",\"bitmap_uuid\":");
  if (peer_bitmap_uuid (ns, s, &bitmap_uuid))
    buf_uuid (b, bitmap_uuid, true);
  else
    buf_printf (b, "null");
  buf_printf (b, ",\"peer_uuids\":");
  if (s->has_conn) {
    buf_printf (b, "{\"current\":");
    buf_uuid (b, u->gu_current, true);
    buf_printf (b, ",\"bitmap\":");
    buf_uuid (b, u->gu_bitmap, true);
    buf_printf (b, ",\"history\":[");
    buf_uuid (b, u->gu_history[0], true);
    buf_printf (b, ",");
    buf_uuid (b, u->gu_history[1], true);
    buf_printf (b, "],\"flags\":");
    buf_flags (b, u->gu_flags, gu_flag_names, NFLAGS (gu_flag_names), true);
    buf_printf (b, "}");
  }
  else
    buf_printf (b, "null");
  buf_printf (b, ",\"sync_decision\":");
  if (s->decision >= 0)
    buf_printf (b, "\"%s\"", uuid_decision_name (s->decision));
  else
    buf_printf (b, "null");
  buf_printf (b, ",\"resync_rate_bytes_per_s\":%" PRIu64
              ",\"resync_eta_s\":", resync_rate (s));
  if (eta >= 0)
    buf_printf (b, "%" PRId64, eta);
  else
    buf_printf (b, "null");
  buf_printf (b, ",\"verify\":{\"state\":\"%s\",\"total_bytes\":%" PRIu64
              ",\"done_bytes\":%" PRIu64 ",\"out_of_sync_bytes\":%" PRIu64
              "}", s->repl == REPL_VERIFY_S ? "running" : s->verify_total == 0 ? "none" :
              s->verify_finished ? "finished" : "interrupted",
              s->verify_total, s->verify_done, s->verify_oos);
}

char *
control_status (struct repl_node *node, bool json)
{
  struct peer_snapshot snaps[REPL_MAX_NODES];
  struct node_snapshot ns;
  struct buf b = { 0 };
  bool primary;
  size_t i;
  uint64_t in_flight = atomic_load (&node->n_requests_in_flight);
  const char *held;             /* why writes wait, or NULL */
  char route[REPL_NAME_MAX + 1];
  bool routed;                  /* a diskless node's writes go through a
                                   storage Primary (diskless.c) */

  snapshot_node (node, &ns);
  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&node->n_lock);
    held = node->n_fence_failed ? "fence-failed"
         : node->n_fencing > 0 ? "fencing"
         : node->n_role == REPL_ROLE_PRIMARY && !node->n_quorum &&
           node->n_cfg.cf_on_no_quorum_suspend ? "no-quorum" : NULL;
  }
  primary = ns.role == REPL_ROLE_PRIMARY;
  for (i = 0; i < PEERS (node)->pl_n; i++)
    snapshot_peer (PEERS (node)->pl_peers[i], primary, &snaps[i]);
  routed = diskless_route_name (node, route, sizeof route) == 0;

  if (json) {
    buf_printf (&b, "{\"resource\":");
    buf_json_string (&b, node->n_cfg.cf_resource);
    buf_printf (&b, ",\"node\":");
    buf_json_string (&b, node->n_self->nc_name);
    buf_printf (&b, ",\"id\":%u,\"role\":\"%s\",\"disk\":\"%s\","
                "\"size\":%" PRIu64 ",\"protocol\":\"%c\","
                "\"in_flight\":%" PRIu64 ",\"writes\":%" PRIu64
                ",\"write_bytes\":%" PRIu64 ",\"reads\":%" PRIu64
                ",\"read_bytes\":%" PRIu64,
                node->n_self->nc_id, role_name (ns.role),
                disk_state_name (ns.disk),
                volume_size (&node->n_vol), node->n_cfg.cf_protocol,
                in_flight,
                (uint64_t) atomic_load (&node->n_writes),
                (uint64_t) atomic_load (&node->n_write_bytes),
                (uint64_t) atomic_load (&node->n_reads),
                (uint64_t) atomic_load (&node->n_read_bytes));
    json_node_meta (&b, node, &ns);
    buf_printf (&b, ",\"quorum\":%s,\"quorum_nodes\":%zu,"
                "\"auto_promote\":%s,\"fencing\":\"%s\",\"writes_held\":",
                node_has_quorum (node) ? "true" : "false",
                PEERS (node)->pl_n + 1,
                node->n_cfg.cf_auto_promote ? "true" : "false",
                fencing_name (node->n_cfg.cf_fencing));
    if (held != NULL)
      buf_printf (&b, "\"%s\"", held);
    else
      buf_printf (&b, "null");
    buf_printf (&b, ",\"writes_through\":");
    if (routed)
      buf_json_string (&b, route);
    else
      buf_printf (&b, "null");
    buf_printf (&b, ",\"tls\":\"%s\",\"auth\":%s,\"data_integrity\":\"%s\""
                ",\"cork\":%s",
                link_tls (node), node->n_cfg.cf_secret_len ? "true" : "false",
                node->n_cfg.cf_data_integrity ? "crc32c" : "none",
                node->n_cfg.cf_cork ? "true" : "false");
    buf_printf (&b, ",\"peers\":[");
    for (i = 0; i < PEERS (node)->pl_n; i++) {
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
                  "\"connected_ms\":%" PRIu64 ","
                  "\"replication_ms\":%" PRIu64 ","
                  "\"sync_paused_here\":%s,\"sync_paused_by_peer\":%s,"
                  "\"tls\":%s%s%s,\"last_error\":",
                  conn_state_name (s->state),
                  s->state == CONN_CONNECTED ? role_name (s->role) : "Unknown",
                  peer_disk_name (s),
                  replication_name (s), s->out_of_sync,
                  s->resync_total, s->resync_done, resync_percent (s),
                  s->in_flight, s->msgs_sent, s->bytes_sent, s->sends,
                  s->connected_for_ms, s->repl_for_ms,
                  s->pause_here ? "true" : "false",
                  s->pause_peer ? "true" : "false",
                  s->tls ? "\"" : "", s->tls ? s->tls : "null",
                  s->tls ? "\"" : "");
      buf_json_string (&b, s->last_error);
      json_peer_gen (&b, &ns, s);
      buf_printf (&b, "}");
    }
    buf_printf (&b, "]}\n");
  }
  else {
    char size[32];

    human_bytes (volume_size (&node->n_vol), size, sizeof size);
    buf_printf (&b, "%s node:%s role:%s disk:%s size:%s protocol:%c "
                "in-flight:%" PRIu64 "\n",
                node->n_cfg.cf_resource, node->n_self->nc_name,
                role_name (ns.role), disk_state_name (ns.disk), size,
                node->n_cfg.cf_protocol, in_flight);
    human_node_meta (&b, node, &ns);
    buf_printf (&b, "  link: tls:%s auth:%s data-integrity:%s cork:%s\n",
                link_tls (node),
                node->n_cfg.cf_secret_len ? "secret" : "NONE",
                node->n_cfg.cf_data_integrity ? "crc32c" : "none",
                node->n_cfg.cf_cork ? "on" : "off");
    if (routed)
      buf_printf (&b, "  writes: through %s, the storage Primary "
                  "(allow-two-primaries)\n", route);
    if (held != NULL)
      buf_printf (&b, "  writes: HELD (%s)%s\n", held,
                  strcmp (held, "fence-failed") == 0
                  ? ": replctl resume-io once the peer cannot take over"
                  : "");
    if (node->n_cfg.cf_quorum != REPL_QUORUM_OFF)
      buf_printf (&b, "  quorum:%s (%s of %zu nodes, on loss: %s)\n",
                  node_has_quorum (node) ? "yes" : "NO",
                  node->n_cfg.cf_quorum == REPL_QUORUM_ALL ? "all"
                                                           : "majority",
                  PEERS (node)->pl_n + 1,
                  node->n_cfg.cf_on_no_quorum_suspend ? "suspend-io"
                                                      : "io-error");
    for (i = 0; i < PEERS (node)->pl_n; i++) {
      const struct peer_snapshot *s = &snaps[i];
      char oos[32], done[32], total[32];

      human_bytes (s->out_of_sync, oos, sizeof oos);
      buf_printf (&b, "  %s (%s) connection:%s", s->name, s->address,
                  conn_state_name (s->state));
      if (s->state == CONN_CONNECTED)
        buf_printf (&b, " role:%s disk:%s replication:%s",
                    role_name (s->role), disk_state_name (s->disk),
                    replication_name (s));
      else
        buf_printf (&b, " disk:%s", peer_disk_name (s));
      if (s->pause_here || s->pause_peer)
        buf_printf (&b, " sync-paused-by:%s", s->pause_here && s->pause_peer
                    ? "both" : s->pause_here ? "this-node" : "peer");
      if (s->tls != NULL)
        buf_printf (&b, " tls:%s", s->tls);
      buf_printf (&b, "\n    out-of-sync:%s in-flight:%" PRIu64, oos,
                  s->in_flight);
      if (s->state == CONN_CONNECTED && s->resyncing) {
        human_bytes (s->resync_done, done, sizeof done);
        human_bytes (s->resync_total, total, sizeof total);
        buf_printf (&b, " resync:%u%% (%s of %s)", resync_percent (s),
                    done, total);
      }
      buf_printf (&b, "\n");
      human_peer_gen (&b, &ns, s);
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

/* replctl role | quorum | dstate [PEER] | cstate [PEER]: one word a
 * line, for scripts (drbdadm role, dstate, cstate).  cstate without a
 * peer is "PEER STATE" per peer.  NULL: out of memory. */
static char *
control_query (struct repl_node *node, const char *cmd)
{
  const char *peer = strchr (cmd, ' ');
  int len = peer ? (int) (peer - cmd) : (int) strlen (cmd);
  bool dstate = cmd[0] == 'd';
  struct buf b = { 0 };
  enum repl_role role;
  enum repl_disk_state disk;
  bool found = false;
  size_t i;

  pthread_mutex_lock (&node->n_lock);
  role = node->n_role;
  disk = node->n_disk;
  pthread_mutex_unlock (&node->n_lock);
  if (peer != NULL)
    peer++;

  if (cmd[0] == 'r')
    buf_printf (&b, "%s\n", role_name (role));
  else if (cmd[0] == 'q')
    buf_printf (&b, "%s\n", node_has_quorum (node) ? "yes" : "no");
  else if (dstate && peer == NULL)
    buf_printf (&b, "%s\n", disk_state_name (disk));
  else {
    for (i = 0; i < PEERS (node)->pl_n; i++) {
      struct peer_snapshot s;

      snapshot_peer (PEERS (node)->pl_peers[i], role == REPL_ROLE_PRIMARY, &s);
      if (peer == NULL)
        buf_printf (&b, "%s %s\n", s.name, conn_state_name (s.state));
      else if (strcmp (peer, s.name) == 0) {
        buf_printf (&b, "%s\n", dstate ? peer_disk_name (&s)
                                        : conn_state_name (s.state));
        found = true;
      }
    }
    if (peer != NULL && !found) {
      buf_printf (&b, "error: %.*s: no peer named '%.64s' (peers:", len, cmd,
                  peer);
      for (i = 0; i < PEERS (node)->pl_n; i++)
        buf_printf (&b, " %s", PEERS (node)->pl_peers[i]->pr_cfg->nc_name);
      buf_printf (&b, ")\n");
    }
  }
  if (b.b_failed) {
    free (b.b_data);
    return NULL;
  }
  return b.b_data ? b.b_data : strdup ("");
}

/* Commands that only read: allowed to any caller that can connect. */
static bool
read_only (const char *cmd)
{
  return strcmp (cmd, "status") == 0 || strcmp (cmd, "status --json") == 0 ||
         strcmp (cmd, "events") == 0 || strncmp (cmd, "events ", 7) == 0 ||
         strcmp (cmd, "role") == 0 || strcmp (cmd, "quorum") == 0 ||
         strcmp (cmd, "dstate") == 0 || strncmp (cmd, "dstate ", 7) == 0 ||
         strcmp (cmd, "cstate") == 0 || strncmp (cmd, "cstate ", 7) == 0;
}

/* Answer one command on fd from the caller cred.  Returns true if fd
 * was handed over (an events subscriber), else the caller closes it. */
static bool
serve (struct repl_node *node, int fd, const struct ucred *cred)
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
      return false;
    r = read (fd, cmd + len, sizeof cmd - 1 - len);
    if (r <= 0)
      return false;
    len += r;
    if (memchr (cmd, '\n', len))
      break;
  }
  cmd[len] = '\0';
  cmd[strcspn (cmd, "\r\n")] = '\0';

  if (!read_only (cmd) && cred->uid != 0 && cred->uid != geteuid ()) {
    char msg[400], who[64] = "root";

    if (geteuid () != 0)
      snprintf (who, sizeof who, "root or uid %u", (unsigned) geteuid ());
    /* The command is the caller's: shown as far as it is printable. */
    for (len = 0; cmd[len]; len++)
      if ((unsigned char) cmd[len] < 0x20 || cmd[len] == 0x7f)
        cmd[len] = '?';
    log_error ("control: '%.40s' from uid %u (pid %d) refused: only %s "
               "may change the node's state", cmd, (unsigned) cred->uid,
               (int) cred->pid, who);
    snprintf (msg, sizeof msg, "error: %.40s: permission denied: uid %u "
              "may only ask for status (only %s may change the node's "
              "state)\n", cmd, (unsigned) cred->uid, who);
    sock_write_full (fd, msg, strlen (msg), CONTROL_READ_TIMEOUT_MS);
    return false;
  }

  if (strcmp (cmd, "events") == 0 || strncmp (cmd, "events ", 7) == 0) {
    char err[256], msg[320];

    if (events_subscribe (node, fd, cmd + 6, err, sizeof err) == 0)
      return true;
    snprintf (msg, sizeof msg, "error: %.256s\n", err);
    sock_write_full (fd, msg, strlen (msg), CONTROL_READ_TIMEOUT_MS);
    return false;
  }
  else if (strcmp (cmd, "status") == 0)
    answer = control_status (node, false);
  else if (strcmp (cmd, "status --json") == 0)
    answer = control_status (node, true);
  else if (strcmp (cmd, "role") == 0 || strcmp (cmd, "quorum") == 0 ||
           strcmp (cmd, "dstate") == 0 || strncmp (cmd, "dstate ", 7) == 0 ||
           strcmp (cmd, "cstate") == 0 || strncmp (cmd, "cstate ", 7) == 0)
    answer = control_query (node, cmd);
  else if (strcmp (cmd, "primary") == 0 ||
           strcmp (cmd, "primary --force") == 0 ||
           strcmp (cmd, "secondary") == 0) {
    char err[256], msg[320];
    bool to_primary = cmd[0] == 'p';

    if (engine_set_role (node, to_primary, strstr (cmd, "--force") != NULL,
                         err, sizeof err) == -1)
      snprintf (msg, sizeof msg, "error: %s: %.256s\n",
                to_primary ? "primary" : "secondary", err);
    else
      snprintf (msg, sizeof msg, "%s\n", to_primary ? "Primary" : "Secondary");
    sock_write_full (fd, msg, strlen (msg), CONTROL_READ_TIMEOUT_MS);
    return false;
  }
  else if (strcmp (cmd, "invalidate") == 0) {
    char err[256], msg[320];

    if (engine_invalidate (node, err, sizeof err) == -1)
      snprintf (msg, sizeof msg, "error: invalidate: %.256s\n", err);
    else
      snprintf (msg, sizeof msg, "invalidated: a full sync from the "
                "primary follows\n");
    sock_write_full (fd, msg, strlen (msg), CONTROL_READ_TIMEOUT_MS);
    return false;
  }
  else if (strncmp (cmd, "disconnect ", 11) == 0 ||
           strncmp (cmd, "connect ", 8) == 0 ||
           strncmp (cmd, "pause-sync ", 11) == 0 ||
           strncmp (cmd, "resume-sync ", 12) == 0 ||
           strncmp (cmd, "invalidate-remote ", 18) == 0) {
    /* The commands on one peer: "COMMAND PEER". */
    char err[256], msg[400], verb[24];
    const char *name = strchr (cmd, ' ') + 1;
    int r;

    snprintf (verb, sizeof verb, "%.*s", (int) (name - 1 - cmd), cmd);
    if (strcmp (verb, "disconnect") == 0 || strcmp (verb, "connect") == 0)
      r = engine_disconnect (node, name, verb[0] == 'd', err, sizeof err);
    else if (strcmp (verb, "invalidate-remote") == 0)
      r = engine_invalidate_remote (node, name, err, sizeof err);
    else
      r = engine_pause_sync (node, name, verb[0] == 'p', err, sizeof err);
    if (r == -1)
      snprintf (msg, sizeof msg, "error: %s: %.256s\n", verb, err);
    else
      snprintf (msg, sizeof msg, "%s %.64s: done\n", verb, name);
    sock_write_full (fd, msg, strlen (msg), CONTROL_READ_TIMEOUT_MS);
    return false;
  }
  else if (strcmp (cmd, "resume-io") == 0 || strcmp (cmd, "outdate") == 0) {
    char err[256], msg[320];
    bool resume = cmd[0] == 'r';

    if ((resume ? engine_resume_io (node, err, sizeof err)
                : engine_outdate (node, err, sizeof err)) == -1)
      snprintf (msg, sizeof msg, "error: %.10s: %.256s\n", cmd, err);
    else
      snprintf (msg, sizeof msg, resume ? "writes resumed\n"
                                        : "Outdated\n");
    sock_write_full (fd, msg, strlen (msg), CONTROL_READ_TIMEOUT_MS);
    return false;
  }
  else if (strcmp (cmd, "down") == 0) {
    char err[256], msg[320];

    if (engine_down (node, cred, err, sizeof err) == -1)
      snprintf (msg, sizeof msg, "error: down: %.256s\n", err);
    else
      snprintf (msg, sizeof msg, "stopping\n");
    sock_write_full (fd, msg, strlen (msg), CONTROL_READ_TIMEOUT_MS);
    return false;
  }
  else if (strcmp (cmd, "resize") == 0 || strncmp (cmd, "resize ", 7) == 0) {
    /* "resize [--assume-clean] [--size BYTES]" (replctl checked it;
     * checked again, it is what came off the socket). */
    char out[600], msg[700], *save = NULL, *tok, *end;
    bool clean = false, bad = false;
    uint64_t want = 0;

    for (tok = strtok_r (cmd + 6, " ", &save); tok != NULL && !bad;
         tok = strtok_r (NULL, " ", &save)) {
      if (strcmp (tok, "--assume-clean") == 0)
        clean = true;
      else if (strcmp (tok, "--size") == 0 &&
               (tok = strtok_r (NULL, " ", &save)) != NULL &&
               tok[0] >= '0' && tok[0] <= '9') {
        errno = 0;
        want = strtoull (tok, &end, 10);
        bad = errno != 0 || *end != '\0' || want == 0;
      }
      else
        bad = true;
    }
    if (bad)
      snprintf (msg, sizeof msg, "error: resize: give [--assume-clean] "
                "[--size BYTES]\n");
    else if (engine_resize (node, clean, want, out, sizeof out) == -1)
      snprintf (msg, sizeof msg, "error: resize: %s\n", out);
    else
      snprintf (msg, sizeof msg, "resized: %s\n", out);
    sock_write_full (fd, msg, strlen (msg), CONTROL_READ_TIMEOUT_MS);
    return false;
  }
  else if (strcmp (cmd, "adjust") == 0) {
    char out[1024], msg[1100];

    if (engine_adjust (node, out, sizeof out) == -1)
      snprintf (msg, sizeof msg, "error: adjust: %s\n", out);
    else
      snprintf (msg, sizeof msg, "adjusted: %s\n", out);
    sock_write_full (fd, msg, strlen (msg), CONTROL_READ_TIMEOUT_MS);
    return false;
  }
  else if (strcmp (cmd, "verify --stop") == 0) {
    char err[256], msg[320];
    int n = engine_verify_stop (node, err, sizeof err);

    if (n == -1)
      snprintf (msg, sizeof msg, "error: verify --stop: %.256s\n", err);
    else
      snprintf (msg, sizeof msg, "verify stopping towards %d peer(s)\n", n);
    sock_write_full (fd, msg, strlen (msg), CONTROL_READ_TIMEOUT_MS);
    return false;
  }
  else if (strcmp (cmd, "verify") == 0 || strcmp (cmd, "resync") == 0) {
    char err[256], msg[600];
    int n = cmd[0] == 'v' ? engine_verify (node, err, sizeof err)
                          : engine_resync (node, err, sizeof err);

    if (n == -1)
      snprintf (msg, sizeof msg, "error: %.20s: %.256s\n", cmd, err);
    else
      snprintf (msg, sizeof msg, "%.20s started towards %d peer(s)\n", cmd, n);
    sock_write_full (fd, msg, strlen (msg), CONTROL_READ_TIMEOUT_MS);
    return false;
  }
  else {
    char msg[320];
    snprintf (msg, sizeof msg, "error: unknown command '%.200s'\n", cmd);
    sock_write_full (fd, msg, strlen (msg), CONTROL_READ_TIMEOUT_MS);
    return false;
  }
  reply = answer ? answer : "error: out of memory\n";
  if (sock_write_full (fd, reply, strlen (reply),
                       CONTROL_READ_TIMEOUT_MS) == -1)
    log_debug ("control: write: %m");
  free (answer);
  return false;
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
    struct ucred cred;
    socklen_t credlen = sizeof cred;
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
    if (getsockopt (fd, SOL_SOCKET, SO_PEERCRED, &cred, &credlen) == -1)
      log_error ("control: SO_PEERCRED: %m (connection refused)");
    else {
      bool handed_over;

      peers_enter (node);
      handed_over = serve (node, fd, &cred);
      peers_leave (node);
      if (handed_over)
        continue;               /* an events subscriber has it */
    }
    close (fd);
  }
  return NULL;
}

/* Listen on the node's control socket.  What is at the path already is
 * replaced only if it is a stale socket (nobody answers on it): never a
 * regular file or anything else, and never the live socket of another
 * node, which would silently answer for us from then on.  where starts
 * the messages ("FILE: node NAME: "). */
int
control_listen (const char *path, const char *group, const char *where)
{
  struct stat st;
  int fd, c;

  if (group != NULL && getgrnam (group) == NULL) {
    log_error ("%scontrol-group: no group '%s' on this machine", where,
               group);
    errno = ENOENT;
    return -1;
  }

  fd = sock_listen_unix (path, CONTROL_MODE);
  if (fd >= 0 || errno != EADDRINUSE)
    goto out;
  if (lstat (path, &st) == -1)
    goto out;
  if (!S_ISSOCK (st.st_mode)) {
    log_error ("%scontrol %s: exists and is not a socket; refusing to "
               "replace it (remove it, or give control: another path)",
               where, path);
    errno = EEXIST;
    return -1;
  }
  c = sock_connect_unix (path);
  if (c >= 0) {
    close (c);
    log_error ("%scontrol %s: a running server answers on it (another "
               "node?); refusing to take it over (give each node its own "
               "control: path)", where, path);
    errno = EADDRINUSE;
    return -1;
  }
  if (errno != ECONNREFUSED) {
    log_error ("%scontrol %s: cannot tell whether it is in use: %m", where,
               path);
    return -1;
  }
  /* Stale: left by a node that crashed. */
  if (unlink (path) == -1 && errno != ENOENT)
    goto out;
  fd = sock_listen_unix (path, CONTROL_MODE);
 out:
  if (fd == -1)
    log_error ("%scontrol %s: cannot listen: %m", where, path);
  /* Its members may ask for status (and nothing else: serve). */
  else if (group != NULL && chown (path, -1, getgrnam (group)->gr_gid) == -1) {
    log_error ("%scontrol %s: chown to group %s: %m", where, path, group);
    close (fd);
    return -1;
  }
  return fd;
}
