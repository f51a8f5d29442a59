/* nbdrepl: the node's list of peers, which `replctl adjust` may change
 * while the node runs.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * The list (struct peer_list) is never changed in place: adjust builds
 * a new one and publishes it with one atomic store.  Whoever uses the
 * list, or a peer found in it, pins it first (peers_enter, or
 * PEERS_PIN_FOR_CURRENT_SCOPE): the thread then sees the same list,
 * through PEERS (node), until it leaves, however many functions down
 * and whatever adjust publishes meanwhile, so two loops over the peers
 * in one request always agree.  Pins nest; the outermost decides.
 *
 * A removed peer, and a list no longer current, are freed only once no
 * pin taken before they were unpublished remains (a grace period, as
 * in SRCU): a pin counts itself in one of two reader counters, chosen
 * by the parity of n_grace_epoch; peers_reclaim (the ticker, every
 * tick) moves the epoch on only once the other counter is zero, and
 * frees what was unpublished at epoch e once the epoch is e + 2, which
 * means every pin taken at e or before has been left.  Nothing ever
 * waits for a grace period: a pin held long only delays the freeing.
 *
 * A peer adjust adds waits for something narrower, the write gate: the
 * writes (write-path.c replicate, one message of a request at a time)
 * count themselves in two counters of their own, by the parity of
 * n_io_epoch, and only then pin the list they send to and mark for.  A
 * write that used a list without the new peer was therefore counted at
 * the epoch adjust reads right after publishing (pr_start_epoch) or
 * before; peers_start_added, while a peer waits, moves that epoch on by
 * the same rule, and starts the peer at pr_start_epoch + 2.  Pins that
 * write nothing (the resync and verify threads, handler reapers, the
 * receivers, a write waiting for quorum or fencing before or after its
 * messages) do not hold a new peer back.  The storage node that
 * forwards a diskless Primary's writes (forward.c) marks and forwards
 * for the nodes that Primary names, outside the gate: a diskless node
 * adds no node at run time (adjust.c), so it names none added here.
 *
 * Long-lived threads leave their pin at their waits (peers_quiesce,
 * peers_wait_begin, or leave and enter around them), never holding a
 * pointer from the list across: a peer's own threads hold their own
 * peer, which is stopped and joined before it is unpublished for good.
 */
#include <config.h>

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "log.h"

/* This thread's pin. */
static __thread struct {
  struct repl_node *node;
  struct peer_list *list;
  unsigned depth;
  unsigned idx;                 /* which reader counter it is in */
} pin;

/* Count in the reader counter of the epoch's parity. */
static unsigned
epoch_read_lock (_Atomic uint64_t *epoch, _Atomic uint64_t readers[2])
{
  for (;;) {
    uint64_t e = atomic_load (epoch);

    atomic_fetch_add (&readers[e & 1], 1);
    if (atomic_load (epoch) == e)
      return e & 1;
    /* The epoch moved on between the two loads: count in the new one. */
    atomic_fetch_sub (&readers[e & 1], 1);
  }
}

static void
epoch_read_unlock (_Atomic uint64_t readers[2], unsigned idx)
{
  uint64_t was = atomic_fetch_sub (&readers[idx], 1);

  assert (was > 0);
  (void) was;
}

/* Move the epoch on if no reader of the one before remains (its
 * counter is the next one's); returns the epoch.  One caller at a time
 * per epoch. */
static uint64_t
epoch_advance (_Atomic uint64_t *epoch, _Atomic uint64_t readers[2])
{
  uint64_t e = atomic_load (epoch);

  if (atomic_load (&readers[(e + 1) & 1]) == 0)
    atomic_store (epoch, ++e);
  return e;
}

unsigned
grace_read_lock (struct repl_node *node)
{
  return epoch_read_lock (&node->n_grace_epoch, node->n_grace_readers);
}

void
grace_read_unlock (struct repl_node *node, unsigned idx)
{
  epoch_read_unlock (node->n_grace_readers, idx);
}

void
peers_enter (struct repl_node *node)
{
  if (pin.depth++ > 0) {
    assert (pin.node == node);
    return;
  }
  pin.idx = grace_read_lock (node);
  pin.node = node;
  pin.list = atomic_load (&node->n_plist);
}

void
peers_leave (struct repl_node *node)
{
  assert (pin.depth > 0 && pin.node == node);
  if (--pin.depth > 0)
    return;
  pin.list = NULL;
  pin.node = NULL;
  grace_read_unlock (node, pin.idx);
}

/* At a wait of a long-lived thread that holds nothing from the list:
 * let go of the old list (if this is the outermost pin). */
void
peers_quiesce (struct repl_node *node)
{
  if (pin.depth == 1) {
    peers_leave (node);
    peers_enter (node);
  }
}

/* Before a wait that may last, in a thread that holds nothing from the
 * list across it: let go of the pin, if this is the outermost one
 * (returns whether it was; pass that to peers_wait_end).  A thread
 * without a pin, or inside a nested one, keeps what it has. */
bool
peers_wait_begin (struct repl_node *node)
{
  if (pin.depth != 1)
    return false;
  assert (pin.node == node);
  peers_leave (node);
  return true;
}

/* After it: the pin again, with the list as it is now. */
void
peers_wait_end (struct repl_node *node, bool held)
{
  if (held)
    peers_enter (node);
}

/* A write's message begins: counted in the write gate first, then
 * pinned afresh, so that the list it uses is one published before it
 * was counted, or the current one.  The request's pin is the only one
 * (engine_pwrite and the rest take it).  Returns what peers_io_end
 * takes. */
unsigned
peers_io_begin (struct repl_node *node)
{
  unsigned idx = epoch_read_lock (&node->n_io_epoch, node->n_io_readers);

  assert (pin.depth == 1 && pin.node == node);
  peers_leave (node);
  peers_enter (node);
  return idx;
}

/* It has sent, marked and written all it will: it may wait on (for
 * quorum, for fencing) without holding an added peer back. */
void
peers_io_end (struct repl_node *node, unsigned idx)
{
  epoch_read_unlock (node->n_io_readers, idx);
}

struct peer_list *
peers_pinned (struct repl_node *node)
{
  assert (pin.depth > 0 && pin.node == node);
  return pin.list;
}

struct peer *
node_find_peer (struct repl_node *node, unsigned id)
{
  struct peer_list *pl = PEERS (node);
  size_t i;

  for (i = 0; i < pl->pl_n; i++)
    if (pl->pl_peers[i]->pr_cfg->nc_id == id)
      return pl->pl_peers[i];
  return NULL;
}

struct peer *
node_find_peer_name (struct repl_node *node, const char *name)
{
  struct peer_list *pl = PEERS (node);
  size_t i;

  for (i = 0; i < pl->pl_n; i++)
    if (strcmp (pl->pl_peers[i]->pr_cfg->nc_name, name) == 0)
      return pl->pl_peers[i];
  return NULL;
}

struct peer_list *
peer_list_new (void)
{
  struct peer_list *pl = calloc (1, sizeof *pl);

  if (pl == NULL)
    log_error ("calloc: %m");
  return pl;
}

/* Publish a new list; the old one is freed after a grace period.
 * n_adjust_lock held (or no thread running yet). */
void
peers_publish (struct repl_node *node, struct peer_list *pl)
{
  struct peer_list *old = atomic_exchange (&node->n_plist, pl);

  atomic_fetch_add (&node->n_peers_gen, 1);
  if (old == NULL)
    return;
  pthread_mutex_lock (&node->n_grace_lock);
  /* Tagged with the epoch after the exchange: a pin that still sees the
   * old list was taken at this epoch or before. */
  old->pl_dead_epoch = atomic_load (&node->n_grace_epoch);
  old->pl_next_dead = node->n_dead_lists;
  node->n_dead_lists = old;
  pthread_mutex_unlock (&node->n_grace_lock);
}

/* Peers no longer in the published list, their threads stopped and
 * joined: freed after a grace period. */
void
peers_retire (struct repl_node *node, struct peer *const *gone,
              size_t ngone)
{
  size_t i;

  pthread_mutex_lock (&node->n_grace_lock);
  for (i = 0; i < ngone; i++) {
    gone[i]->pr_dead_epoch = atomic_load (&node->n_grace_epoch);
    gone[i]->pr_next_dead = node->n_dead_peers;
    node->n_dead_peers = gone[i];
  }
  pthread_mutex_unlock (&node->n_grace_lock);
}

/* Move the grace period on and free what no pin can see any more.
 * Called with no lock held and no pin (the ticker, adjust's caller).
 * `all`: the node stops and every thread is joined: free everything. */
void
peers_reclaim (struct repl_node *node, bool all)
{
  struct peer_list *lists = NULL, **lp;
  struct peer *peers = NULL, **pp;
  uint64_t e;

  pthread_mutex_lock (&node->n_grace_lock);
  if (node->n_dead_lists == NULL && node->n_dead_peers == NULL) {
    pthread_mutex_unlock (&node->n_grace_lock);
    return;
  }
  /* The counter of epoch e - 1 (the same as e + 1's) is zero: every pin
   * taken at e - 1 or before is gone; new pins count in e's. */
  e = epoch_advance (&node->n_grace_epoch, node->n_grace_readers);
  for (lp = &node->n_dead_lists; *lp != NULL; ) {
    struct peer_list *l = *lp;

    if (all || e >= l->pl_dead_epoch + 2) {
      *lp = l->pl_next_dead;
      l->pl_next_dead = lists;
      lists = l;
    }
    else
      lp = &l->pl_next_dead;
  }
  for (pp = &node->n_dead_peers; *pp != NULL; ) {
    struct peer *p = *pp;

    if (all || e >= p->pr_dead_epoch + 2) {
      *pp = p->pr_next_dead;
      p->pr_next_dead = peers;
      peers = p;
    }
    else
      pp = &p->pr_next_dead;
  }
  pthread_mutex_unlock (&node->n_grace_lock);

  while (lists != NULL) {
    struct peer_list *next = lists->pl_next_dead;

    free (lists);
    lists = next;
  }
  while (peers != NULL) {
    struct peer *next = peers->pr_next_dead;

    /* No pin sees it: its metadata slot may go to another node now
     * (meta.c), and nobody writes its bitmap pages there any more. */
    if (!node->n_diskless)
      meta_release_peer_slot (node, peers);
    log_info ("peer %s: removed from the node (memory freed)",
              peers->pr_cfg->nc_name);
    peer_free (peers);
    peers = next;
  }
}

/* Start the peers replctl adjust added, once every write that may have
 * used a list without them has ended (the write gate, above): such a
 * write neither sent a new peer its data nor marked it in its bitmap,
 * which is all set only until the peer's first resync.  Started only
 * after those writes have ended, the peer cannot be resynced, and so
 * be reported in sync, while one of them still writes.  The gate's
 * epoch moves on here, a tick at a time, for as long as a peer waits
 * (and only here, under n_adjust_lock: adjust reads it unchanged after
 * publishing).  The ticker, with no lock held and no pin. */
void
peers_start_added (struct repl_node *node)
{
  struct peer_list *pl;
  bool pending = false;
  uint64_t e;
  size_t i;

  if (!atomic_load (&node->n_added_pending) ||
      pthread_mutex_trylock (&node->n_adjust_lock) != 0)
    return;
  e = epoch_advance (&node->n_io_epoch, node->n_io_readers);
  /* Only adjust, under n_adjust_lock, replaces or frees the current
   * list: no pin needed to read it here. */
  pl = atomic_load (&node->n_plist);
  for (i = 0; !node->n_adjust_closed && i < pl->pl_n; i++) {
    struct peer *p = pl->pl_peers[i];

    if (!p->pr_start_pending)
      continue;
    if (e < p->pr_start_epoch + 2) {
      pending = true;
      continue;
    }
    p->pr_start_pending = false;
    if (peer_start (p) == 0)
      log_info ("peer %s: started (added by replctl adjust)",
                p->pr_cfg->nc_name);
  }
  atomic_store (&node->n_added_pending, pending);
  pthread_mutex_unlock (&node->n_adjust_lock);
}
