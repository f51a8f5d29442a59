/* nbdrepl: fencing — a Primary that loses a peer holds its writes until
 * the fence-peer handler has made sure the peer cannot take over with
 * older data, as DRBD's fencing: resource-only / resource-and-stonith.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * When a Primary's connection to a storage peer fails (not an orderly
 * stop of either node), role_fence_begin counts a fence in n_fencing,
 * before the writers that waited for the peer are released; from then
 * on new writes wait (role_check_write) and the writes that lost the
 * peer are not reported done (role_complete_write).  The fence-peer
 * handler runs, and its exit status (DRBD's codes) decides:
 *
 *   3  the peer's disk is Inconsistent        writes go on
 *   4  the peer was outdated                  writes go on; the peer's
 *                                             disk is known Outdated
 *   5  the peer is unreachable (down)         resource-only: writes go
 *                                             on; resource-and-stonith:
 *                                             failed (it may be alive)
 *   7  the peer was fenced (STONITH)          writes go on
 *   anything else (6: the peer is Primary; a failure; a signal)
 *                                             failed: writes stay held
 *                                             until replctl resume-io
 */
#include <config.h>

#include <errno.h>
#include <stdio.h>

#include "cleanup.h"
#include "internal.h"
#include "log.h"

static const char *
meaning (int status)
{
  switch (status) {
  case 3: return "the peer is Inconsistent";
  case 4: return "the peer was outdated";
  case 5: return "the peer is unreachable";
  case 6: return "the peer is Primary";
  case 7: return "the peer was fenced (STONITH)";
  case -1: return "the handler could not run";
  default: return "the fence failed";
  }
}

/* Connection c of this node has failed: does its peer need fencing
 * before writes go on?  If so counts it (writes wait) and returns true;
 * the caller then runs the handler (sync_on_lost). */
bool
role_fence_begin (struct repl_node *node, struct conn *c)
{
  struct peer *p = c->c_peer;
  enum repl_fencing how = node->n_cfg.cf_fencing;
  bool orderly;

  if (how == REPL_FENCING_DONT_CARE || node->n_diskless ||
      p->pr_cfg->nc_diskless || c->c_peer_diskless ||
      node_role (node) != REPL_ROLE_PRIMARY)
    return false;
  pthread_mutex_lock (&p->pr_lock);
  orderly = p->pr_stopping || c->c_peer_goodbye;
  pthread_mutex_unlock (&p->pr_lock);
  if (orderly)
    return false;
  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&node->n_lock);
    if (node->n_fencing++ == 0 && !node->n_fence_failed)
      events_resource (node, "suspended:fencing");
    atomic_store (&p->pr_fence_epoch, node->n_fence_epoch);
    node->n_fence_deadline_ns = now_ns () +
      node->n_cfg.cf_fencing_timeout_ms * UINT64_C (1000000);
    pthread_cond_broadcast (&node->n_cond);
  }
  log_error ("peer %s: lost: writes are held until the fence-peer handler "
             "has fenced it (fencing: %s)", p->pr_cfg->nc_name,
             how == REPL_FENCING_RESOURCE_ONLY ? "resource-only"
                                               : "resource-and-stonith");
  return true;
}

/* The fence-peer handler for p has ended with status (handler.c). */
void
role_fence_done (struct repl_node *node, struct peer *p, int status)
{
  bool stonith = node->n_cfg.cf_fencing == REPL_FENCING_RESOURCE_AND_STONITH;
  bool ok = status == 3 || status == 4 || status == 7 ||
            (status == 5 && !stonith);

  if (status == 4) {
    pthread_mutex_lock (&p->pr_lock);
    peer_set_disk_locked (p, true, REPL_DISK_OUTDATED);
    pthread_mutex_unlock (&p->pr_lock);
  }
  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&node->n_lock);
    if (atomic_load (&p->pr_fence_epoch) != node->n_fence_epoch) {
      log_info ("peer %s: fence-peer exited %d after replctl resume-io: "
                "ignored", p->pr_cfg->nc_name, status);
      return;
    }
    if (!ok)
      node->n_fence_failed = true;
    node->n_fencing--;
    if (node->n_fencing == 0)
      events_resource (node, "suspended:%s",
                       node->n_fence_failed ? "fence-failed" : "no");
    pthread_cond_broadcast (&node->n_cond);
  }
  if (ok)
    log_info ("peer %s: fence-peer exited %d (%s): writes go on",
              p->pr_cfg->nc_name, status, meaning (status));
  else
    log_error ("peer %s: fence-peer exited %d (%s%s): writes stay held "
               "until replctl resume-io", p->pr_cfg->nc_name, status,
               meaning (status), status == 5 && stonith
               ? "; resource-and-stonith needs it fenced" : "");
}

/* A fence-peer handler that runs past fencing-timeout has failed: the
 * writes stay held until replctl resume-io, whatever it says when it
 * ends.  Called by the ticker. */
void
role_fence_check (struct repl_node *node)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&node->n_lock);
  if (node->n_fencing == 0 || node->n_fence_failed ||
      now_ns () < node->n_fence_deadline_ns)
    return;
  node->n_fence_failed = true;
  events_resource (node, "suspended:fence-failed");
  log_error ("node %s: fence-peer has not exited within fencing-timeout "
             "(%.0f s): writes stay held until replctl resume-io",
             node->n_self->nc_name,
             node->n_cfg.cf_fencing_timeout_ms / 1000.0);
}

/* replctl resume-io: writes held by a failed fence go on (the operator
 * has made sure the peer cannot take over). */
int
engine_resume_io (struct repl_node *node, char *err, size_t errlen)
{
  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&node->n_lock);
    if (!node->n_fence_failed) {
      snprintf (err, errlen, "writes are not held by a failed fence%s",
                node->n_fencing > 0 ? " (a fence-peer handler still runs: "
                "wait for it, or for fencing-timeout)" : "");
      return -1;
    }
    node->n_fence_failed = false;
    /* Fence-peer handlers that still run are not waited for any more
     * (their ends are ignored: role_fence_done). */
    node->n_fencing = 0;
    node->n_fence_epoch++;
    events_resource (node, "suspended:no");
    pthread_cond_broadcast (&node->n_cond);
  }
  log_info ("node %s: writes resumed by replctl resume-io",
            node->n_self->nc_name);
  return 0;
}
