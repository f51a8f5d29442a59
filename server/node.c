/* nbdrepl: the node — this machine's replica of the resource.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * engine_create does everything that can fail because of the
 * configuration or the environment (parse, open the disk, bind the
 * sockets) so that nbdkit reports it before serving; engine_start only
 * starts threads.
 */
#include <config.h>

#include <assert.h>
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/stat.h>

#include "cleanup.h"
#include "internal.h"
#include "log.h"
#include "sockets.h"

const char *
role_name (enum repl_role role)
{
  switch (role) {
  case REPL_ROLE_SECONDARY: return "Secondary";
  case REPL_ROLE_PRIMARY: return "Primary";
  }
  abort ();
}

const char *
disk_state_name (enum repl_disk_state disk)
{
  switch (disk) {
  case REPL_DISK_INCONSISTENT: return "Inconsistent";
  case REPL_DISK_OUTDATED: return "Outdated";
  case REPL_DISK_UPTODATE: return "UpToDate";
  case REPL_DISK_DISKLESS: return "Diskless";
  }
  abort ();
}


enum repl_role
node_role (struct repl_node *node)
{
  enum repl_role role;

  pthread_mutex_lock (&node->n_lock);
  role = node->n_role;
  pthread_mutex_unlock (&node->n_lock);
  return role;
}

/* The disk state and role at start, from the metadata.  A primary whose
 * disk is not Consistent (new metadata, or an interrupted resync target)
 * declares its data authoritative, like DRBD's `primary --force`: every
 * peer gets a full sync. */
static int
start_role (struct repl_node *node)
{
  uint32_t flags = node->n_md.md_super.ms_flags;
  size_t i;

  node->n_quorum = node_has_quorum (node);
  if (node->n_role == REPL_ROLE_PRIMARY) {
    if (!(flags & MD_FLAG_CONSISTENT)) {
      log_info ("node %s: disk was not Consistent; role=primary declares "
                "its data authoritative: every peer gets a full sync",
                node->n_self->nc_name);
      for (i = 0; i < PEERS (node)->pl_n; i++)
        bitmap_set_all (&PEERS (node)->pl_peers[i]->pr_bitmap);
      if (gen_force_primary (node) == -1)
        return -1;
    }
    /* No peer is connected yet: whatever this primary writes is a
     * generation they lack. */
    atomic_store (&node->n_gen_pending, true);
    node->n_disk = REPL_DISK_UPTODATE;
    if (meta_set_flags (node, MD_FLAG_CONSISTENT | MD_FLAG_WAS_UPTODATE,
                        0) == -1)
      return -1;
    return meta_note_primary (node);
  }
  if (!(flags & MD_FLAG_CONSISTENT))
    node->n_disk = REPL_DISK_INCONSISTENT;
  else if (flags & MD_FLAG_WAS_UPTODATE)
    node->n_disk = REPL_DISK_UPTODATE;
  else
    node->n_disk = REPL_DISK_OUTDATED;
  return meta_set_flags (node, 0, MD_FLAG_PRIMARY);
}

/* mkdir -p of the directory holding path (for /run/nbdrepl). */
static int
make_parent_dir (const char *path)
{
  CLEANUP_FREE char *copy = strdup (path);
  char *dir, *p;

  if (copy == NULL)
    return -1;
  dir = dirname (copy);
  for (p = dir + 1; *p; p++) {
    if (*p == '/') {
      *p = '\0';
      if (mkdir (dir, 0755) == -1 && errno != EEXIST)
        return -1;
      *p = '/';
    }
  }
  if (mkdir (dir, 0755) == -1 && errno != EEXIST)
    return -1;
  return 0;
}

struct repl_node *
engine_create (const char *config_path, const char *node_name, bool primary,
               bool insecure)
{
  struct repl_node *node;
  const struct repl_node_cfg *self;
  char err[512];
  size_t i;

  node = calloc (1, sizeof *node);
  if (node == NULL) {
    log_error ("calloc: %m");
    return NULL;
  }
  node->n_magic = NODE_MAGIC;
  node->n_vol.vol_fd = -1;
  node->n_listen_fd = node->n_control_fd = node->n_stop_fd = -1;
  node->n_metrics_fd = -1;
  node->n_md_fd = -1;
  node->n_primary_id = -1;
  node->n_sync_source_id = -1;
  node->n_dl_route = -1;
  node->n_dl_owed_id = -1;
  node->n_dl_via = -1;
  node->n_dl_answer_writer = -1;
  mutex_init (&node->n_lock);
  mutex_init (&node->n_dl_route_lock);
  mutex_init (&node->n_role_lock);
  mutex_init (&node->n_md_io_lock);
  mutex_init (&node->n_resize_lock);
  mutex_init (&node->n_al_lock);
  cond_init (&node->n_cond);
  cond_init (&node->n_work_cond);
  cond_init (&node->n_al_cond);
  ilock_init (&node->n_ilock);
  thread_set_init (&node->n_handshakes, MAX_HANDSHAKE_THREADS);
  mutex_init (&node->n_hs_lock);
  events_init (&node->n_events);
  handlers_init (&node->n_handlers);
  mutex_init (&node->n_adjust_lock);
  mutex_init (&node->n_grace_lock);
  {
    struct peer_list *pl = peer_list_new ();

    if (pl == NULL) {
      engine_destroy (node);
      return NULL;
    }
    peers_publish (node, pl);
  }
  /* No thread runs yet, but PEERS () wants a pin (peers.c). */
  peers_enter (node);

  if (config_load (config_path, &node->n_cfg, err, sizeof err) == -1) {
    log_error ("%s", err);
    goto err;
  }
  /* replctl adjust reads it again, whatever the directory is then. */
  node->n_config_abs = realpath (config_path, NULL);
  if (node->n_config_abs == NULL) {
    log_error ("%s: %m", config_path);
    goto err;
  }
  self = config_find_node (&node->n_cfg, node_name);
  if (self == NULL) {
    char names[256] = "";
    for (i = 0; i < node->n_cfg.cf_nnodes; i++) {
      if (i > 0)
        strncat (names, ", ", sizeof names - strlen (names) - 1);
      strncat (names, node->n_cfg.cf_nodes[i].nc_name,
               sizeof names - strlen (names) - 1);
    }
    errno = ENOENT;
    log_error ("%s: node=%s: no such node in the configuration (nodes: %s)",
               config_path, node_name, names);
    goto err;
  }
  node->n_self = self;
  /* Whoever reads the secret can join the resource as any node: the
   * file that holds it must be readable by its owner only (as ssh
   * treats a private key). */
  if ((node->n_cfg.cf_secret_mode & 0044) != 0) {
    char what[512];

    snprintf (what, sizeof what, "%s: %s holds the secret of resource %s "
              "and is readable by %s (mode %04o)", config_path,
              node->n_cfg.cf_secret_path ? node->n_cfg.cf_secret_path
                                         : "this file",
              node->n_cfg.cf_resource,
              (node->n_cfg.cf_secret_mode & 0004) ? "all users"
                                                  : "its group",
              node->n_cfg.cf_secret_mode);
    if (!insecure) {
      errno = EACCES;
      log_error ("%s; refusing to start: chmod 600 it (or "
                 "insecure-permissions=true)", what);
      goto err;
    }
    log_warning ("%s; starting anyway (insecure-permissions=true): chmod "
                 "600 it", what);
  }
  if (peer_tls_init (node) == -1)
    goto err;
  node->n_role = primary ? REPL_ROLE_PRIMARY : REPL_ROLE_SECONDARY;
  node->n_start_pending = primary && node->n_cfg.cf_nnodes > 1;
  if (primary)
    node->n_primary_id = self->nc_id;

  node->n_diskless = self->nc_diskless;
  if (!node->n_diskless) {
    char where[512];
    snprintf (where, sizeof where, "%s: node %s: ", config_path,
              self->nc_name);
    if (volume_open (&node->n_vol, self->nc_disk, where) == -1 ||
        meta_place_internal (node, where) == -1)
      goto err;
  }

  for (i = 0; i < node->n_cfg.cf_nnodes; i++) {
    const struct repl_node_cfg *c = &node->n_cfg.cf_nodes[i];
    struct peer *p;

    if (c == self)
      continue;
    p = peer_create (node, c);
    if (p == NULL)
      goto err;
    /* Not published yet to anyone but this thread. */
    PEERS (node)->pl_peers[PEERS (node)->pl_n++] = p;
  }

  node->n_listen_fd = sock_listen_tcp (self->nc_host, self->nc_port);
  if (node->n_listen_fd == -1) {
    log_error ("%s: node %s: address %s: cannot listen: %m",
               config_path, self->nc_name, self->nc_address);
    goto err;
  }
  if (make_parent_dir (self->nc_control) == -1) {
    log_error ("%s: node %s: control %s: cannot create its directory: %m",
               config_path, self->nc_name, self->nc_control);
    goto err;
  }
  {
    char where[512];
    snprintf (where, sizeof where, "%s: node %s: ", config_path,
              self->nc_name);
    node->n_control_fd = control_listen (self->nc_control,
                                         node->n_cfg.cf_control_group, where);
    if (node->n_control_fd == -1 || metrics_listen (node, where) == -1)
      goto err;
  }
  node->n_stop_fd = eventfd (0, EFD_CLOEXEC);
  if (node->n_stop_fd == -1) {
    log_error ("eventfd: %m");
    goto err;
  }
  /* Last, after every other check that can fail at start: this may
   * create the metadata file (removed again below if a later step
   * fails). */
  {
    char where[512];
    snprintf (where, sizeof where, "%s: node %s: ", config_path,
              self->nc_name);
    if (node->n_diskless) {
      node->n_disk = REPL_DISK_DISKLESS;
      node->n_quorum = node_has_quorum (node);
    }
    else if (meta_open (node, where) == -1 || start_role (node) == -1)
      goto err;
  }

  peers_leave (node);
  return node;

 err:
  peers_leave (node);
  /* A start that failed leaves no metadata it created behind: the next
   * start (or create-md) makes it afresh. */
  if (node->n_md_created && unlink (node->n_md_path) == 0)
    log_info ("metadata %s: removed again (the start failed)",
              node->n_md_path);
  engine_destroy (node);
  return NULL;
}

int
engine_start (struct repl_node *node)
{
  size_t i;
  int err;
  enum repl_role role;
  enum repl_disk_state disk;
  uint64_t size;

  assert (node->n_magic == NODE_MAGIC);
  PEERS_PIN_FOR_CURRENT_SCOPE (node);
  /* What this node starts as, for the log line below: once the peer
   * threads run, they change these under n_lock (the size too, on a
   * diskless node that learns it from a peer: diskless.c). */
  role = node->n_role;
  disk = node->n_disk;
  size = node->n_vol.vol_size;
  /* Before the ticker starts, which checks it (role.c). */
  node->n_start_deadline_ns = now_ns () +
    node->n_cfg.cf_ping_timeout_ms * UINT64_C (1000000);
  err = pthread_create (&node->n_listener, NULL, listener_thread, node);
  if (err == 0) {
    err = pthread_create (&node->n_ticker, NULL, ticker_thread, node);
    if (err == 0) {
      err = pthread_create (&node->n_control, NULL, control_thread, node);
      if (err == 0)
        err = pthread_create (&node->n_worker, NULL, worker_thread, node);
      if (err != 0) {
        /* Unwound by engine_destroy via n_started below. */
      }
    }
  }
  node->n_started = true;
  if (err) {
    errno = err;
    log_error ("pthread_create: %m");
    return -1;
  }
  for (i = 0; i < PEERS (node)->pl_n; i++)
    if (peer_start (PEERS (node)->pl_peers[i]) == -1)
      return -1;
  if (metrics_start (node) == -1)
    return -1;
  if (node->n_cfg.cf_secret_len == 0)
    log_warning ("resource %s has no secret: any host that reaches "
                 "%s can join it as a node and read or overwrite its data "
                 "(set secret or secret-file in %s)", node->n_cfg.cf_resource,
                 node->n_self->nc_address, node->n_cfg.cf_path);
  if (node->n_cfg.cf_two_primaries && node->n_cfg.cf_al_updates &&
      !node->n_diskless && !node->n_cfg.cf_has_diskless) {
    bool enough;
    uint32_t reserve = tp_al_reserve (node, &enough);

    if (!enough)
      log_warning ("allow-two-primaries: the activity log has %" PRIu32
                   " extents of %u KiB; a write of the other Primary may "
                   "need %" PRIu32 " and only %" PRIu32 " are kept for it: "
                   "with both nodes writing at once the two may stop each "
                   "other until net: timeout (raise al-extents to at least "
                   "%" PRIu32 ")", node->n_al.al_nslots,
                   (1u << node->n_al.al_shift) >> 10,
                   (uint32_t) ((REPL_MAX_PAYLOAD - 1) /
                               (UINT64_C (1) << node->n_al.al_shift) + 2),
                   reserve,
                   2 * (uint32_t) ((REPL_MAX_PAYLOAD - 1) /
                                   (UINT64_C (1) << node->n_al.al_shift) + 2));
  }
  log_info ("resource %s: node %s (id %u) started as %s, disk %s (%" PRIu64
            " bytes), %zu peer(s), protocol %c",
            node->n_cfg.cf_resource, node->n_self->nc_name,
            node->n_self->nc_id, role_name (role),
            disk_state_name (disk), size, PEERS (node)->pl_n,
            node->n_cfg.cf_protocol);
  return 0;
}

void
engine_destroy (struct repl_node *node)
{
  size_t i;

  if (node == NULL)
    return;
  assert (node->n_magic == NODE_MAGIC);

  metrics_stop (node);          /* first: no scrape of a node stopping */
  /* No adjust changes the peers from now on (adjust.c). */
  pthread_mutex_lock (&node->n_adjust_lock);
  node->n_adjust_closed = true;
  pthread_mutex_unlock (&node->n_adjust_lock);
  peers_enter (node);
  if (node->n_started) {
    uint64_t one = 1;

    pthread_mutex_lock (&node->n_lock);
    node->n_stopping = true;
    pthread_cond_broadcast (&node->n_cond);
    pthread_cond_signal (&node->n_work_cond);
    pthread_mutex_unlock (&node->n_lock);
    if (write (node->n_stop_fd, &one, sizeof one) != sizeof one)
      log_error ("eventfd write: %m");
    for (i = 0; i < PEERS (node)->pl_n; i++)
      peer_request_stop (PEERS (node)->pl_peers[i]);
    for (i = 0; i < PEERS (node)->pl_n; i++)
      peer_stop (PEERS (node)->pl_peers[i]);
    if (node->n_listener)
      pthread_join (node->n_listener, NULL);
    listener_wait_handshakes (node);
    if (node->n_ticker)
      pthread_join (node->n_ticker, NULL);
    if (node->n_control)
      pthread_join (node->n_control, NULL);
    handlers_stop (node);       /* after every thread that runs them */
    events_close (node);        /* no new subscribers after the control
                                   thread */
    if (node->n_worker)
      pthread_join (node->n_worker, NULL);
  }

  /* Every thread is joined: removed peers (their metadata slots
   * released) and old lists go, then the current peers. */
  {
    struct peer_list *pl = PEERS (node);

    peers_reclaim (node, true);
    meta_close (node);          /* writes the current peers' bitmaps */
    peers_leave (node);
    if (pl != NULL) {
      for (i = 0; i < pl->pl_n; i++)
        peer_free (pl->pl_peers[i]);
      free (pl);
    }
  }
  peer_tls_fini (node);         /* after every peer socket is closed */
  if (node->n_listen_fd >= 0)
    close (node->n_listen_fd);
  if (node->n_control_fd >= 0) {
    close (node->n_control_fd);
    unlink (node->n_self->nc_control);
  }
  if (node->n_stop_fd >= 0)
    close (node->n_stop_fd);
  volume_close (&node->n_vol);
  config_free (&node->n_cfg);
  ilock_destroy (&node->n_ilock);
  thread_set_destroy (&node->n_handshakes);
  events_destroy (&node->n_events);
  handlers_destroy (&node->n_handlers);
  adjust_free (node);
  free (node->n_config_abs);
  pthread_mutex_destroy (&node->n_adjust_lock);
  pthread_mutex_destroy (&node->n_grace_lock);
  pthread_cond_destroy (&node->n_cond);
  pthread_cond_destroy (&node->n_work_cond);
  pthread_cond_destroy (&node->n_al_cond);
  pthread_mutex_destroy (&node->n_hs_lock);
  pthread_mutex_destroy (&node->n_al_lock);
  pthread_mutex_destroy (&node->n_md_io_lock);
  pthread_mutex_destroy (&node->n_resize_lock);
  pthread_mutex_destroy (&node->n_role_lock);
  pthread_mutex_destroy (&node->n_lock);
  pthread_mutex_destroy (&node->n_dl_route_lock);
  node->n_magic = 0;
  free (node);
}

/* A diskless node learns the size from the first storage node it
 * reaches; a client that opens before that waits for it, bounded by the
 * connect timeout, so that a node started just before its client (as
 * repl-attach does) works. */
uint64_t
engine_size (struct repl_node *node)
{
  uint64_t size;

  pthread_mutex_lock (&node->n_lock);
  if (node->n_diskless && node->n_vol.vol_size == 0) {
    struct timespec ts = deadline_after_ns
      ((node->n_cfg.cf_ping_timeout_ms + 1000) * UINT64_C (1000000));

    while (node->n_vol.vol_size == 0 && !node->n_stopping &&
           pthread_cond_timedwait (&node->n_cond, &node->n_lock, &ts) == 0)
      ;
  }
  size = node->n_vol.vol_size;
  pthread_mutex_unlock (&node->n_lock);
  return size;
}

int
engine_client_open (struct repl_node *node)
{
  bool changed = false;
  int r;
  PEERS_PIN_FOR_CURRENT_SCOPE (node);

  role_start_wait (node);
  role_start_check (node);
  pthread_mutex_lock (&node->n_role_lock);
  if (node_role (node) == REPL_ROLE_SECONDARY && node->n_cfg.cf_auto_promote)
    changed = role_auto_promote_locked (node);
  r = engine_check_client (node);
  if (r == 0)
    atomic_fetch_add (&node->n_clients, 1);
  pthread_mutex_unlock (&node->n_role_lock);
  if (changed) {
    char err[256];

    /* A promotion undone (two-primaries.c): the client is refused as
     * on any Secondary (the undo logged why). */
    if (role_changed (node, err, sizeof err) == -1 && r == 0) {
      atomic_fetch_sub (&node->n_clients, 1);
      errno = EROFS;
      r = -1;
    }
  }
  return r;
}

void
engine_client_close (struct repl_node *node)
{
  bool changed = false;
  PEERS_PIN_FOR_CURRENT_SCOPE (node);

  pthread_mutex_lock (&node->n_role_lock);
  if (atomic_fetch_sub (&node->n_clients, 1) == 1 && node->n_auto_promoted)
    changed = role_auto_demote_locked (node);
  pthread_mutex_unlock (&node->n_role_lock);
  if (changed) {
    char err[256];

    role_changed (node, err, sizeof err);
  }
}

int
engine_check_client (struct repl_node *node)
{
  const struct repl_node_cfg *primary = NULL;
  enum repl_role role;
  int primary_id;
  PEERS_PIN_FOR_CURRENT_SCOPE (node);

  pthread_mutex_lock (&node->n_lock);
  role = node->n_role;
  primary_id = node->n_primary_id;
  pthread_mutex_unlock (&node->n_lock);

  if (role == REPL_ROLE_PRIMARY)
    return 0;
  if (primary_id >= 0) {
    struct peer *p = node_find_peer (node, primary_id);

    primary = p ? p->pr_cfg : NULL;
  }
  if (primary)
    log_error ("refusing client: node %s is Secondary for resource %s; "
               "the primary is %s (%s)", node->n_self->nc_name,
               node->n_cfg.cf_resource, primary->nc_name,
               primary->nc_address);
  else
    log_error ("refusing client: node %s is Secondary for resource %s "
               "and no primary is connected", node->n_self->nc_name,
               node->n_cfg.cf_resource);
  errno = EROFS;
  return -1;
}

/* A test hook: if the environment variable env holds a positive number
 * of milliseconds, sleep that long (the tests use it to widen a race
 * window).  *ms caches the value (-1: not read yet). */
void
test_hook_sleep (const char *env, long long *ms)
{
  long long v = __atomic_load_n (ms, __ATOMIC_RELAXED);

  if (v == -1) {
    const char *s = getenv (env);

    v = s != NULL ? atoll (s) : 0;
    __atomic_store_n (ms, v, __ATOMIC_RELAXED);
  }
  if (v > 0)
    usleep (v * 1000);
}
