/* nbdrepl: the node's worker thread.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * Node-level work that a receive thread must not do itself, because it
 * waits on other peers' sockets: a receive thread only receives,
 * applies and acknowledges.  Work is posted as bits (worker_post) and
 * coalesced: posting twice before the worker runs does it once.
 *
 *   WORK_UUIDS      tell every connected peer our generation UUIDs
 *                   (UUIDS), after they changed on a secondary (a resync
 *                   ended, or it followed its primary into a new
 *                   generation): a diskless primary learns that we are in
 *                   its generation, and the other secondaries whether we
 *                   are ahead of them
 *   WORK_ANNOUNCE   tell every connected peer our role and disk state
 *                   (STATE), after the disk state changed, or (a storage
 *                   Secondary beside diskless nodes, allow-two-primaries)
 *                   the storage Primaries it follows
 *   WORK_GEN_COMMIT a write of the generation this Primary started
 *                   last completed: clear its tentative flag
 *                   (gen_commit) and tell the peers (then WORK_UUIDS)
 *   WORK_DROP_MARKS with a storage Primary to follow, drop what we had
 *                   marked out of sync for the other UpToDate
 *                   secondaries in our generation
 *                   (drop_marks_between_secondaries), after we connected
 *                   to a Primary or it became one
 *
 * In that order when both are posted: a diskless primary takes a storage
 * node as a target once it is in its generation and UpToDate.
 */
#include <config.h>

#include <stdlib.h>
#include <unistd.h>

#include "cleanup.h"
#include "internal.h"
#include "log.h"

void
worker_post (struct repl_node *node, unsigned work)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&node->n_lock);
  worker_post_locked (node, work);
}

/* The same with n_lock held. */
void
worker_post_locked (struct repl_node *node, unsigned work)
{
  ASSERT_LOCKED (&node->n_lock);
  node->n_work |= work;
  pthread_cond_signal (&node->n_work_cond);
}

/* Test hook (tests/test-resync-target-generation.sh): NBDREPL_TEST_
 * WORKER_UUIDS_DELAY_MS=N makes the worker wait N ms before it tells
 * the peers our UUIDs, as a loaded machine may: a resync started at the
 * same moment then ends before the UUIDS of the generation it resyncs. */
static void
uuids_delay (void)
{
  static long long ms = -1;

  test_hook_sleep ("NBDREPL_TEST_WORKER_UUIDS_DELAY_MS", &ms);
}

void *
worker_thread (void *arg)
{
  struct repl_node *node = arg;

  for (;;) {
    unsigned work;
    size_t i;

    {
      ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&node->n_lock);
      while (node->n_work == 0 && !node->n_stopping)
        pthread_cond_wait (&node->n_work_cond, &node->n_lock);
      if (node->n_stopping)
        return NULL;
      work = node->n_work;
      node->n_work = 0;
    }
    PEERS_PIN_FOR_CURRENT_SCOPE (node);
    if ((work & WORK_GEN_COMMIT) && gen_commit (node) == 1)
      work |= WORK_UUIDS;
    if (work & WORK_UUIDS)
      uuids_delay ();
    if (work & WORK_UUIDS)
      for (i = 0; i < PEERS (node)->pl_n; i++)
        sync_send_uuids (PEERS (node)->pl_peers[i]);
    if (work & WORK_ANNOUNCE)
      for (i = 0; i < PEERS (node)->pl_n; i++)
        role_tell_state (PEERS (node)->pl_peers[i]);
    if (work & WORK_DROP_MARKS)
      for (i = 0; i < PEERS (node)->pl_n; i++)
        if (drop_marks_if_copy (PEERS (node)->pl_peers[i]) == -1)
          log_error ("peer %s: cannot write its bitmap",
                     PEERS (node)->pl_peers[i]->pr_cfg->nc_name);
  }
}
