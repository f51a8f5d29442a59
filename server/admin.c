/* nbdrepl: the administrator's commands on one peer — disconnect and
 * connect, pause-sync and resume-sync, invalidate-remote — and
 * verify --stop (replctl, through the control socket).
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * Each one changes what the peer's threads obey (pr_admin_down,
 * pr_pause_user, the bitmap, pr_verify_stop) and lets the state follow
 * through the functions that change states (state.c); none waits on
 * the network.
 */
#include <config.h>

#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "log.h"

/* The peer named name, or NULL with the reason in err. */
static struct peer *
find_peer (struct repl_node *node, const char *name, char *err,
           size_t errlen)
{
  struct peer *p;

  if (name[0] == '\0') {
    snprintf (err, errlen, "give the peer's name (a node of resource %s)",
              node->n_cfg.cf_resource);
    return NULL;
  }
  if ((p = node_find_peer_name (node, name)) == NULL) {
    snprintf (err, errlen, "'%.64s' is not a peer of node %s in resource "
              "%s", name, node->n_self->nc_name, node->n_cfg.cf_resource);
    return NULL;
  }
  return p;
}

/* replctl disconnect PEER (down) and connect PEER: StandAlone towards
 * the peer, as DRBD's disconnect: the connection is dropped and none is
 * made or accepted until connect; writes go on and are marked for it. */
int
engine_disconnect (struct repl_node *node, const char *name, bool down,
                   char *err, size_t errlen)
{
  struct peer *p = find_peer (node, name, err, errlen);
  bool was;

  if (p == NULL)
    return -1;
  pthread_mutex_lock (&p->pr_lock);
  was = p->pr_admin_down;
  p->pr_admin_down = down;
  if (down)
    peer_fail_current_locked (p, "disconnected by replctl disconnect");
  pthread_cond_broadcast (&p->pr_cond);
  pthread_mutex_unlock (&p->pr_lock);
  if (was != down)
    log_info ("peer %s: %s by replctl", name,
              down ? "disconnected (StandAlone)" : "connecting again");
  return 0;
}

/* replctl pause-sync PEER (pause) and resume-sync PEER: the resync
 * between this node and the peer waits, whichever of the two is its
 * source; the peer learns it from our STATE. */
int
engine_pause_sync (struct repl_node *node, const char *name, bool pause,
                   char *err, size_t errlen)
{
  struct peer *p = find_peer (node, name, err, errlen);
  bool was;

  if (p == NULL)
    return -1;
  pthread_mutex_lock (&p->pr_lock);
  was = p->pr_pause_user;
  p->pr_pause_user = pause;
  node_state_changed (node);
  peer_update_pause_locked (p);
  pthread_mutex_unlock (&p->pr_lock);
  if (was != pause) {
    log_info ("peer %s: resync %s by replctl", name,
              pause ? "paused" : "resumed");
    role_tell_state (p);
  }
  return 0;
}

/* replctl outdate: a Secondary declares its data out of date (a fence-peer
 * handler on the Primary that lost it runs this on it, as DRBD's
 * drbdadm outdate): from now on it is not promoted without --force and
 * is a sync target of an UpToDate peer; a restart keeps it. */
int
engine_outdate (struct repl_node *node, char *err, size_t errlen)
{
  enum repl_disk_state disk;

  if (node->n_diskless) {
    snprintf (err, errlen, "this node is diskless: it has no data");
    return -1;
  }
  if (node_role (node) == REPL_ROLE_PRIMARY) {
    snprintf (err, errlen, "this node is Primary: demote it first");
    return -1;
  }
  pthread_mutex_lock (&node->n_lock);
  disk = node->n_disk;
  pthread_mutex_unlock (&node->n_lock);
  if (disk != REPL_DISK_UPTODATE && disk != REPL_DISK_OUTDATED) {
    snprintf (err, errlen, "the disk is %s: nothing to outdate",
              disk_state_name (disk));
    return -1;
  }
  if (node_outdate (node) == -1) {
    snprintf (err, errlen, "cannot write the metadata");
    return -1;
  }
  log_info ("node %s: outdated by replctl outdate", node->n_self->nc_name);
  return 0;
}

void
engine_on_down (struct repl_node *node, void (*stop) (void))
{
  node->n_down_fn = stop;
}

bool
engine_down_requested (struct repl_node *node)
{
  return atomic_load (&node->n_down_requested);
}

/* replctl down (drbdadm down): the node stops, cleanly, as on SIGTERM.
 * A Primary with NBD clients attached refuses, as DRBD refuses a device
 * held open; a Primary with none is demoted first, so that it stops as
 * a Secondary (and its peers see it go without a fence).  The process
 * exits with status 0: systemd's Restart=on-abnormal leaves it stopped.
 * "Up" is starting nbdkit again (systemctl start nbdrepl@RESOURCE). */
int
engine_down (struct repl_node *node, const struct ucred *cred, char *err,
             size_t errlen)
{
  if (node->n_down_fn == NULL) {
    snprintf (err, errlen, "this process cannot stop itself; stop it with "
              "SIGTERM");
    return -1;
  }
  if (atomic_load (&node->n_down_requested)) {
    snprintf (err, errlen, "already stopping");
    return -1;
  }
  if (node_role (node) == REPL_ROLE_PRIMARY &&
      engine_set_role (node, false, false, err, errlen) == -1)
    return -1;
  atomic_store (&node->n_down_requested, true);
  log_info ("stopping: replctl down from uid %u (pid %d)",
            (unsigned) cred->uid, (int) cred->pid);
  node->n_down_fn ();
  return 0;
}

/* replctl verify --stop: a running verify ends at its next request. */
int
engine_verify_stop (struct repl_node *node, char *err, size_t errlen)
{
  size_t i, n = 0;

  for (i = 0; i < PEERS (node)->pl_n; i++) {
    struct peer *p = PEERS (node)->pl_peers[i];

    pthread_mutex_lock (&p->pr_lock);
    if (p->pr_repl == REPL_VERIFY_S || p->pr_verify_wanted) {
      p->pr_verify_stop = true;
      p->pr_verify_wanted = false;
      n++;
    }
    pthread_mutex_unlock (&p->pr_lock);
  }
  if (n == 0) {
    snprintf (err, errlen, "no verify is running");
    return -1;
  }
  return n;
}

/* replctl invalidate-remote PEER: the peer's data is to be replaced by
 * ours, all of it, as DRBD's invalidate-remote: every chunk is marked
 * out of sync for it and resynced from here (at once if it is
 * connected, else when it connects).  Only where this node may be a
 * source: UpToDate, and the Primary or with no storage Primary. */
int
engine_invalidate_remote (struct repl_node *node, const char *name,
                          char *err, size_t errlen)
{
  struct peer *p = find_peer (node, name, err, errlen);
  enum repl_disk_state disk;
  enum repl_role role;
  bool connected;

  if (p == NULL)
    return -1;
  if (node->n_diskless || p->pr_cfg->nc_diskless) {
    snprintf (err, errlen, "no data to resync: %s is diskless",
              node->n_diskless ? "this node" : name);
    return -1;
  }
  pthread_mutex_lock (&node->n_lock);
  disk = node->n_disk;
  role = node->n_role;
  pthread_mutex_unlock (&node->n_lock);
  if (disk != REPL_DISK_UPTODATE) {
    snprintf (err, errlen, "this node's disk is %s: only an UpToDate node "
              "may overwrite a peer", disk_state_name (disk));
    return -1;
  }
  if (role != REPL_ROLE_PRIMARY && !node_no_storage_primary (node)) {
    snprintf (err, errlen, "a Primary is connected: run invalidate-remote "
              "on the Primary (only it resyncs its secondaries)");
    return -1;
  }
  if (tp_refuse_beside_primary (node, "invalidate-remote", err,
                                errlen) == -1)
    return -1;
  pthread_mutex_lock (&p->pr_lock);
  bitmap_set_all (&p->pr_bitmap);
  connected = peer_conn_locked (p) != NULL;
  pthread_mutex_unlock (&p->pr_lock);
  if (meta_write_peer_bitmap (node, p) == -1) {
    snprintf (err, errlen, "cannot write the metadata");
    return -1;
  }
  log_info ("peer %s: invalidated by replctl invalidate-remote: every "
            "chunk is resynced from this node %s", name,
            connected ? "now" : "when it connects");
  if (connected) {
    pthread_mutex_lock (&p->pr_lock);
    p->pr_resync_wanted = true;
    pthread_cond_signal (&p->pr_resync_cond);
    pthread_mutex_unlock (&p->pr_lock);
  }
  return 0;
}
