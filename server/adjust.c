/* nbdrepl: replctl adjust — apply a changed configuration file to the
 * running node, as drbdadm adjust does.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * The file is loaded and checked as at start; then every key is either
 * one that may change while the node runs (net timeouts and buffers,
 * resync rates and csums, quorum and on-no-quorum, the split-brain
 * policies, cork, data-integrity, auto-promote, read balancing, fencing
 * and fencing-timeout, the handlers), or one that may not (the
 * resource, this node's own entry, the other nodes' ids, addresses,
 * disks, metadata, control and metrics sockets, the protocol, the
 * secret, TLS, tls-allow-wildcard, control-group, al-updates,
 * allow-two-primaries): a
 * change to any of the latter refuses the whole adjust, naming the key,
 * and nothing changes.  The values are stored one by one (atomically:
 * the engine reads them without a lock); net buffer sizes apply to new
 * connections, the rest at once.  A replaced handler string is kept
 * until the node stops, since a handler may be starting with it.
 *
 * Nodes come and go as with drbdadm adjust: a node new in the file (by
 * name and id) becomes a peer, with a metadata slot of its own, and is
 * started; a node gone from it (not the Primary) is unpublished from
 * the peer list, stopped and joined, and freed with its slot released
 * after a grace period (peers.c).  Quorum counts the new list.  Not
 * with allow-two-primaries: true (two-primaries.c: two storage
 * Primaries order the writes of their one peer; a storage Primary
 * beside a diskless one forwards to the storage nodes it knows).
 */
#include <config.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cleanup.h"
#include "internal.h"
#include "log.h"

struct change_buf {
  char *cb_out;
  size_t cb_len, cb_used;
  unsigned cb_n;
};

static void __attribute__ ((format (printf, 2, 3)))
note (struct change_buf *cb, const char *fmt, ...)
{
  va_list ap;
  int n;

  if (cb->cb_used >= cb->cb_len)
    return;
  if (cb->cb_n++ > 0)
    cb->cb_used += snprintf (cb->cb_out + cb->cb_used,
                             cb->cb_len - cb->cb_used, ", ");
  if (cb->cb_used >= cb->cb_len)
    return;
  va_start (ap, fmt);
  n = vsnprintf (cb->cb_out + cb->cb_used, cb->cb_len - cb->cb_used, fmt, ap);
  va_end (ap);
  if (n > 0)
    cb->cb_used += n;
}

static bool
same_str (const char *a, const char *b)
{
  return (a == NULL && b == NULL) || (a && b && strcmp (a, b) == 0);
}

/* A node's keys that may not change while it runs, compared: the one
 * that changed, or NULL. */
static const char *
node_key_changed (const struct repl_node_cfg *x, const struct repl_node_cfg *y)
{
  if (!same_str (x->nc_name, y->nc_name) || x->nc_id != y->nc_id)
    return "name / id";
  if (!same_str (x->nc_address, y->nc_address))
    return "address";
  if (!same_str (x->nc_disk, y->nc_disk) || x->nc_diskless != y->nc_diskless)
    return "disk";
  if (!same_str (x->nc_meta, y->nc_meta) ||
      x->nc_meta_internal != y->nc_meta_internal)
    return "meta";
  if (!same_str (x->nc_control, y->nc_control))
    return "control";
  if (!same_str (x->nc_metrics, y->nc_metrics))
    return "metrics (bound when nbdkit starts)";
  if (!same_str (x->nc_tls_cert, y->nc_tls_cert) ||
      !same_str (x->nc_tls_key, y->nc_tls_key))
    return "tls-cert / tls-key";
  return NULL;
}

/* The first key that may not change and did, or NULL. */
static const char *
fixed_key_changed (const struct repl_config *a, const struct repl_config *b,
                   char *buf, size_t len)
{
  if (!same_str (a->cf_resource, b->cf_resource))
    return "resource";
  if (a->cf_protocol != b->cf_protocol)
    return "protocol (both nodes must change it together: stop the "
           "resource, change it everywhere, start it)";
  if (a->cf_secret_len != b->cf_secret_len ||
      memcmp (a->cf_secret, b->cf_secret, a->cf_secret_len) != 0 ||
      !same_str (a->cf_secret_path, b->cf_secret_path))
    return "secret / secret-file";
  if (a->cf_tls != b->cf_tls || !same_str (a->cf_tls_ca, b->cf_tls_ca))
    return "tls / tls-ca";
  if (a->cf_tls_allow_wildcard != b->cf_tls_allow_wildcard)
    return "tls-allow-wildcard";
  if (!same_str (a->cf_control_group, b->cf_control_group))
    return "control-group (the sockets are made when nbdkit starts)";
  if (a->cf_al_updates != b->cf_al_updates)
    return "metadata.al-updates";
  if (a->cf_two_primaries != b->cf_two_primaries)
    return "allow-two-primaries (both nodes must change it together: "
           "stop the resource, change it everywhere, start it)";
  (void) buf; (void) len;
  return NULL;
}

/* What adjust does to the peers. */
struct membership {
  const struct repl_node_cfg *mb_add[REPL_MAX_NODES]; /* in the new file */
  size_t mb_nadd;
  struct peer *mb_remove[REPL_MAX_NODES];
  size_t mb_nremove;
};

/* The index of y in cfg, for messages. */
static size_t
node_index (const struct repl_config *cfg, const struct repl_node_cfg *y)
{
  return (size_t) (y - cfg->cf_nodes);
}

/* Compare the new file's nodes with this node and its peers: what is
 * added and removed, or the first change that cannot happen while the
 * node runs (0, or -1 with it in buf).  This node's own entry keeps its
 * every key; a peer found by name keeps its id, address, disk and the
 * rest (a node renamed or given another id is a removal and an
 * addition in DRBD, refused here: it would look like a new node with
 * another's id); a node not found is removed, unless it is the Primary;
 * a node new by name and id is added.  Diskless nodes neither come nor
 * go at run time. */
static int
diff_nodes (struct repl_node *node, const struct repl_config *b,
            struct membership *mb, char *buf, size_t len)
{
  const struct repl_node_cfg *self = node->n_self, *y;
  struct peer_list *pl = PEERS (node);
  const char *what;
  size_t i, k;
  int primary_id;

  memset (mb, 0, sizeof *mb);
  y = config_find_node (b, self->nc_name);
  if (y == NULL) {
    snprintf (buf, len, "nodes: this node (%s) is missing (a node cannot "
              "remove itself while it runs: stop it, then adjust the "
              "others)", self->nc_name);
    return -1;
  }
  if ((what = node_key_changed (self, y)) != NULL) {
    snprintf (buf, len, "nodes[%zu] (%s): %s (this node's own)",
              node_index (b, y), y->nc_name, what);
    return -1;
  }
  pthread_mutex_lock (&node->n_lock);
  primary_id = node->n_primary_id;
  pthread_mutex_unlock (&node->n_lock);
  for (i = 0; i < pl->pl_n; i++) {
    struct peer *p = pl->pl_peers[i];
    const struct repl_node_cfg *x = p->pr_cfg;
    bool says_primary;

    y = config_find_node (b, x->nc_name);
    if (y == NULL && (y = config_find_node_id (b, x->nc_id)) != NULL) {
      snprintf (buf, len, "nodes[%zu] (%s): name / id (id %u is node %s "
                "now: remove the node, adjust, then add the other)",
                node_index (b, y), y->nc_name, x->nc_id, x->nc_name);
      return -1;
    }
    if (y != NULL) {
      if ((what = node_key_changed (x, y)) != NULL) {
        snprintf (buf, len, "nodes[%zu] (%s): %s", node_index (b, y),
                  y->nc_name, what);
        return -1;
      }
      continue;
    }
    /* Removed. */
    pthread_mutex_lock (&p->pr_lock);
    says_primary = p->pr_says_primary;
    pthread_mutex_unlock (&p->pr_lock);
    if (primary_id == (int) x->nc_id || says_primary) {
      snprintf (buf, len, "nodes (%s removed): %s is the Primary; it cannot "
                "be removed while it is (make it Secondary first: replctl "
                "secondary on it)", x->nc_name, x->nc_name);
      return -1;
    }
    if (x->nc_diskless) {
      snprintf (buf, len, "nodes (%s removed): a diskless node cannot be "
                "removed at run time (restart the nodes one at a time)",
                x->nc_name);
      return -1;
    }
    mb->mb_remove[mb->mb_nremove++] = p;
  }
  for (k = 0; k < b->cf_nnodes; k++) {
    y = &b->cf_nodes[k];
    if (strcmp (y->nc_name, self->nc_name) == 0 ||
        node_find_peer_name (node, y->nc_name) != NULL)
      continue;
    if (y->nc_id == self->nc_id || node_find_peer (node, y->nc_id) != NULL) {
      snprintf (buf, len, "nodes[%zu] (%s): name / id (id %u is another "
                "node's)", k, y->nc_name, y->nc_id);
      return -1;
    }
    if (y->nc_diskless || node->n_diskless) {
      snprintf (buf, len, "nodes[%zu] (%s added): nodes cannot be added at "
                "run time %s (restart the nodes one at a time)", k,
                y->nc_name, y->nc_diskless ? "diskless" : "to a diskless "
                "node");
      return -1;
    }
    mb->mb_add[mb->mb_nadd++] = y;
  }
  /* Two primaries order the writes of their one peer, or the storage
   * Primary forwards a diskless Primary's writes (two-primaries.c,
   * write-path.c): the nodes stay the same with the key. */
  if (node->n_cfg.cf_two_primaries &&
      (mb->mb_nadd > 0 || mb->mb_nremove > 0)) {
    if (mb->mb_nadd > 0)
      snprintf (buf, len, "nodes[%zu] (%s added): allow-two-primaries is "
                "true: the nodes",
                node_index (b, mb->mb_add[0]), mb->mb_add[0]->nc_name);
    else
      snprintf (buf, len, "nodes (%s removed): allow-two-primaries is true: "
                "the nodes",
                mb->mb_remove[0]->pr_cfg->nc_name);
    return -1;
  }
  return 0;
}

#define SET(field, key, fmt, conv)                                      \
  do {                                                                  \
    if (cur->field != new->field) {                                     \
      note (cb, "%s %" fmt " -> %" fmt, key, conv (cur->field),        \
            conv (new->field));                                         \
      __atomic_store_n (&cur->field, new->field, __ATOMIC_RELAXED);     \
    }                                                                   \
  } while (0)
#define AS_IS(x) (x)
#define MS(x) ((x) / 1000.0)
#define YESNO(x) ((x) ? "true" : "false")

/* Store what changed from cur to new, noting each change in cb. */
static void
apply (struct repl_config *cur, struct repl_config *new,
       struct change_buf *cb)
{
  unsigned h;

  SET (cf_ping_interval_ms, "net.ping-interval", "g", MS);
  SET (cf_ping_timeout_ms, "net.ping-timeout", "g", MS);
  SET (cf_timeout_ms, "net.timeout", "g", MS);
  SET (cf_connect_retry_max_ms, "net.connect-retry-max", "g", MS);
  SET (cf_sndbuf_size, "net.sndbuf-size", PRIu32, AS_IS);
  SET (cf_rcvbuf_size, "net.rcvbuf-size", PRIu32, AS_IS);
  SET (cf_cork, "net.cork", "s", YESNO);
  SET (cf_data_integrity, "data-integrity", "s", YESNO);
  SET (cf_resync_rate, "resync.resync-rate", PRIu64, AS_IS);
  SET (cf_c_min_rate, "resync.c-min-rate", PRIu64, AS_IS);
  SET (cf_c_max_rate, "resync.c-max-rate", PRIu64, AS_IS);
  SET (cf_csums, "resync.csums", "s", YESNO);
  SET (cf_auto_promote, "auto-promote", "s", YESNO);
  SET (cf_quorum, "quorum", "d", (int));
  SET (cf_on_no_quorum_suspend, "on-no-quorum suspend-io", "s", YESNO);
  SET (cf_fencing, "fencing", "d", (int));
  SET (cf_fencing_timeout_ms, "fencing-timeout", "g", MS);
  SET (cf_after_sb_0pri, "after-sb-0pri", "d", (int));
  SET (cf_after_sb_1pri, "after-sb-1pri", "d", (int));
  SET (cf_read_balancing, "read-balancing", "d", (int));
  SET (cf_read_prefer_id, "read-balancing prefer", "u", AS_IS);
  for (h = 0; h < REPL_HANDLER_NKEYS; h++)
    if (!same_str (cur->cf_handlers[h], new->cf_handlers[h])) {
      char *old = cur->cf_handlers[h];

      note (cb, "handlers.%s", config_handler_name (h));
      __atomic_store_n (&cur->cf_handlers[h], new->cf_handlers[h],
                        __ATOMIC_RELEASE);
      new->cf_handlers[h] = old;        /* freed with new, at the end */
    }
}

/* A configuration loaded by adjust, kept until the node stops (the
 * peers it added point into it). */
struct adjusted {
  struct adjusted *ad_next;
  struct repl_config ad_cfg;
};

/* The test hook: adjust pauses this many milliseconds after publishing
 * the new list, before it marks the peers it added as waiting to start
 * (tests/test-adjust-during-resync.sh), the ticker running meanwhile. */
static void
test_publish_delay (void)
{
  const char *ms = getenv ("NBDREPL_TEST_ADJUST_PUBLISH_DELAY_MS");
  struct timespec ts;
  long n;

  if (ms == NULL || (n = atol (ms)) <= 0)
    return;
  log_info ("NBDREPL_TEST_ADJUST_PUBLISH_DELAY_MS=%ld: waiting", n);
  ts.tv_sec = n / 1000;
  ts.tv_nsec = n % 1000 * 1000000;
  nanosleep (&ts, NULL);
}

/* Apply what diff_nodes found: new peers get a metadata slot and are
 * created before anything changes (a failure changes nothing); then
 * the new list is published, removed peers are stopped and joined (and
 * freed after a grace period, peers.c), new ones started.  Returns 0,
 * or -1 with the reason in err. */
static int
change_nodes (struct repl_node *node, const struct membership *mb,
              struct change_buf *cb, char *err, size_t errlen)
{
  struct peer_list *old = PEERS (node), *pl;
  struct peer *added[REPL_MAX_NODES];
  uint64_t start_epoch;
  size_t i, k;

  if (mb->mb_nadd == 0 && mb->mb_nremove == 0)
    return 0;
  pl = peer_list_new ();
  if (pl == NULL) {
    snprintf (err, errlen, "out of memory");
    return -1;
  }
  /* The bitmaps' size is the volume's: no resize meanwhile. */
  pthread_mutex_lock (&node->n_resize_lock);
  for (i = 0; i < mb->mb_nadd; i++) {
    added[i] = peer_create (node, mb->mb_add[i]);
    if (added[i] == NULL ||
        meta_assign_peer_slot (node, added[i], err, errlen) == -1) {
      if (added[i] == NULL)
        snprintf (err, errlen, "peer %s: cannot create it: %m",
                  mb->mb_add[i]->nc_name);
      peer_free (added[i]);
      while (i > 0) {
        meta_release_peer_slot (node, added[--i]);
        peer_free (added[i]);
      }
      pthread_mutex_unlock (&node->n_resize_lock);
      free (pl);
      return -1;
    }
  }
  for (k = 0; k < old->pl_n; k++) {
    bool gone = false;

    for (i = 0; i < mb->mb_nremove; i++)
      gone |= mb->mb_remove[i] == old->pl_peers[k];
    if (!gone)
      pl->pl_peers[pl->pl_n++] = old->pl_peers[k];
  }
  for (i = 0; i < mb->mb_nadd; i++)
    pl->pl_peers[pl->pl_n++] = added[i];
  peers_publish (node, pl);
  /* A write that uses the old list was counted in the write gate at
   * this epoch or before; the epoch stays as it is until we are done
   * (it moves only under n_adjust_lock, peers.c). */
  start_epoch = atomic_load (&node->n_io_epoch);
  pthread_mutex_unlock (&node->n_resize_lock);
  test_publish_delay ();

  for (i = 0; i < mb->mb_nremove; i++) {
    struct peer *p = mb->mb_remove[i];

    p->pr_start_pending = false;        /* added and removed at once */
    log_info ("node %s: peer %s (id %u) removed by adjust: disconnecting",
              node->n_self->nc_name, p->pr_cfg->nc_name, p->pr_cfg->nc_id);
    peer_stop (p);
    events_membership (p, false);
    note (cb, "node %s removed", p->pr_cfg->nc_name);
  }
  peers_retire (node, mb->mb_remove, mb->mb_nremove);
  for (i = 0; i < mb->mb_nadd; i++) {
    struct peer *p = added[i];

    events_membership (p, true);
    note (cb, "node %s (id %u, %s) added", p->pr_cfg->nc_name,
          p->pr_cfg->nc_id, p->pr_cfg->nc_address);
    log_info ("node %s: peer %s (id %u, %s) added by adjust (%s once "
              "the writes begun before have ended)",
              node->n_self->nc_name, p->pr_cfg->nc_name, p->pr_cfg->nc_id,
              p->pr_cfg->nc_address,
              p->pr_dials ? "connecting" : "accepting it");
    /* Started by the ticker once the writes that began before it was
     * published have ended (peers.c peers_start_added). */
    p->pr_start_pending = true;
    p->pr_start_epoch = start_epoch;
  }
  if (mb->mb_nadd > 0)
    atomic_store (&node->n_added_pending, true);
  /* A Primary's writes from now on are a generation the new peers lack
   * (gen_before_write), as at start. */
  if (mb->mb_nadd > 0)
    atomic_store (&node->n_gen_pending, true);
  return 0;
}

/* replctl adjust.  Returns 0 with what changed in out ("nothing
 * changed" if nothing did), or -1 with the reason in out. */
int
engine_adjust (struct repl_node *node, char *out, size_t outlen)
{
  struct adjusted *ad = calloc (1, sizeof *ad);
  struct change_buf cb = { .cb_out = out, .cb_len = outlen };
  struct membership mb;
  char err[512], key[512];
  const char *fixed;
  bool quorum;
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&node->n_adjust_lock);

  if (ad == NULL) {
    snprintf (out, outlen, "out of memory");
    return -1;
  }
  if (node->n_adjust_closed) {
    snprintf (out, outlen, "the node is stopping (nothing changed)");
    free (ad);
    return -1;
  }
  if (config_load (node->n_config_abs, &ad->ad_cfg, err,
                   sizeof err) == -1) {
    snprintf (out, outlen, "%s (nothing changed)", err);
    free (ad);
    return -1;
  }
  /* The peers as this adjust found them: the list only changes here,
   * under n_adjust_lock, so PEERS () is the current list below. */
  peers_quiesce (node);
  if ((fixed = fixed_key_changed (&node->n_cfg, &ad->ad_cfg, key,
                                  sizeof key)) != NULL ||
      (diff_nodes (node, &ad->ad_cfg, &mb, key, sizeof key) == -1 &&
       (fixed = key) != NULL)) {
    snprintf (out, outlen, "%s: %s cannot change while the node runs "
              "(nothing changed)", node->n_cfg.cf_path, fixed);
    config_free (&ad->ad_cfg);
    free (ad);
    return -1;
  }
  out[0] = '\0';
  if (change_nodes (node, &mb, &cb, err, sizeof err) == -1) {
    snprintf (out, outlen, "%s (nothing changed)", err);
    config_free (&ad->ad_cfg);
    free (ad);
    return -1;
  }
  quorum = node->n_cfg.cf_quorum != ad->ad_cfg.cf_quorum ||
           mb.mb_nadd > 0 || mb.mb_nremove > 0;
  apply (&node->n_cfg, &ad->ad_cfg, &cb);
  ad->ad_next = node->n_adjusted;
  node->n_adjusted = ad;
  if (cb.cb_n == 0)
    snprintf (out, outlen, "nothing changed");
  else
    log_info ("node %s: adjusted from %s: %s", node->n_self->nc_name,
              node->n_cfg.cf_path, out);
  /* With the new list (nodes counted) from here on. */
  peers_quiesce (node);
  if (quorum)
    node_quorum_changed (node);
  return 0;
}

/* At the node's end: the configurations adjust loaded. */
void
adjust_free (struct repl_node *node)
{
  struct adjusted *ad, *next;

  for (ad = node->n_adjusted; ad != NULL; ad = next) {
    next = ad->ad_next;
    config_free (&ad->ad_cfg);
    free (ad);
  }
  node->n_adjusted = NULL;
}
