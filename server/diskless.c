/* nbdrepl: the diskless client — a node with `disk: none`.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * A diskless node keeps no data and no metadata.  As primary it sends
 * every write straight to each storage node that is connected, UpToDate
 * and in the current generation (its targets), in parallel — no second
 * hop through a storage primary, as DRBD 9's diskless clients do — and
 * reads from one of them (read-balancing).  It learns the volume size
 * and the current generation UUID from the storage nodes.
 *
 * When a storage node is away, writes go on to the others as long as
 * one target remains.  Before the first write some storage node will
 * miss, a new current UUID is made here and sent to every target with
 * the mask of the away node ids (AWAY); the targets move to it together,
 * mark what the away nodes miss, or forward it to those they still reach
 * (forward.c).  A write in flight to a node that is lost is named to the
 * targets that did take it (OUT_OF_SYNC) before the client hears of its
 * completion, so that the lost node gets it back by resync.
 *
 * Any number of storage nodes (up to the resource's REPL_MAX_NODES),
 * and any number of diskless nodes, one of them Primary at a time.
 * With allow-two-primaries a storage node may be Primary beside the
 * diskless one (live migration between a diskless and a storage
 * host): while it is, every write of ours goes through it alone (the
 * route, diskless_route_update), which orders it with its own and
 * forwards it to the other storage nodes (two-primaries.c says why and
 * how the two ways of writing hand over).  Or a second diskless node
 * may be Primary: one of the two writes to the storage nodes, and the
 * other's route is that one (diskless-primaries.c).
 * The rule that makes more than two storage nodes safe is the sync
 * fence: with no storage Primary, a storage node T that a storage
 * peer S is to resync (gen decision or pair marks, sync_on_connect)
 *
 *  1. fails its own connections where it is a sync source (out of our
 *     targets it would pass on data we no longer write to it);
 *  2. sends SYNC_FENCE (naming S) to every diskless node it is
 *     connected to; each takes T out of its targets at once
 *     (c_dl_leaving: neither written to nor read from), and answers
 *     SYNC_FENCED once no replicate() that went to T is in flight
 *     (c_dl_writes, counted under the pr_lock of the target check, so
 *     a write either counted or never sent to T) — as Primary it
 *     refuses (flag ERROR) an S that is not its target itself;
 *  3. only then sends S its bitmap; S waits for it before reading any
 *     chunk (pair resyncs too).
 *
 * A write of ours after that goes to S (and the others) with T in the
 * AWAY mask (a new generation: T is behind), and S forwards it to T
 * under its interval lock, ordered with its resync data on that one
 * connection; another storage node forwards its copy too (the same
 * bytes; our interval lock keeps the next write of the range behind
 * both) or marks it.  A write in flight when a node is lost is marked
 * by OUT_OF_SYNC; the marking node resyncs a still connected node
 * through a reconnect, so through the fence (and reconnects too after
 * a mark made while its connection to the node was in its handshake,
 * once its HELLO_STATE had announced none: sync_on_connect).  One
 * source per target at a time (sync_claim_source: a Primary, else the
 * lowest node id; others wait and decide again when it ends).  T reports UUIDS at the end of its
 * resync (it took S's generation, forward_handle_away makes sure S
 * told it) and is a target again once in our generation.
 *
 * Losing us: the storage nodes reconcile their activity logs
 * (peer-sync.c reconcile), as with two.  Not covered: a storage node
 * resynced while not connected to the diskless Primary, whose source
 * is (the fence cannot check the source).
 */
#include <config.h>

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "byte-order.h"
#include "cleanup.h"
#include "internal.h"
#include "log.h"

static uint32_t
id_bit (const struct peer *p)
{
  return UINT32_C (1) << p->pr_cfg->nc_id;
}

/* Is the primary, as far as this node knows, none or a diskless node?
 * (Then storage secondaries resync each other: nobody else has data to
 * resync them from.) */
bool
node_no_storage_primary (struct repl_node *node)
{
  const struct repl_node_cfg *c;
  int id;

  pthread_mutex_lock (&node->n_lock);
  id = node->n_primary_id;
  pthread_mutex_unlock (&node->n_lock);
  if (id < 0)
    return true;
  if ((unsigned) id == node->n_self->nc_id)
    c = node->n_self;
  else {
    struct peer *p = node_find_peer (node, id);

    c = p ? p->pr_cfg : NULL;
  }
  return c != NULL && c->nc_diskless;
}

bool
node_primary_is_diskless_or_none (struct repl_node *node)
{
  return node->n_cfg.cf_has_diskless && node_no_storage_primary (node);
}

/* Is a storage node other than `except` connected to us? */
static bool
storage_connected (struct repl_node *node, const struct peer *except)
{
  bool any = false;
  size_t i;

  for (i = 0; i < PEERS (node)->pl_n && !any; i++) {
    struct peer *q = PEERS (node)->pl_peers[i];
    struct conn *qc;

    if (q == except)
      continue;
    pthread_mutex_lock (&q->pr_lock);
    qc = peer_conn_locked (q);
    any = qc != NULL && !qc->c_failed && !qc->c_peer_diskless;
    pthread_mutex_unlock (&q->pr_lock);
  }
  return any;
}

/* The hello of a connection where one side is diskless: no generations
 * to compare (the diskless side has none); a diskless node takes the
 * size of the first storage node and insists on it after, except that
 * it takes a larger one (replctl resize ran: resize.c) when no storage
 * node at the old size is connected any more.  Clients that are open
 * keep the size they were given (nbdkit fixes it per connection); new
 * ones get the new size.  Returns 0, or -1 with the reason in err. */
int
diskless_check_hello (struct repl_node *node, struct conn *c, char *err,
                      size_t errlen)
{
  const struct repl_hello *h = &c->c_hello;
  uint64_t size;

  if (h->disk_state == REPL_DISK_DISKLESS || !node->n_diskless)
    return 0;                   /* our disk decides nothing about theirs */
  pthread_mutex_lock (&node->n_lock);
  size = node->n_vol.vol_size;
  pthread_mutex_unlock (&node->n_lock);
  if (size != 0 && h->size > size && h->size <= MD_MAX_SIZE &&
      !storage_connected (node, c->c_peer)) {
    pthread_mutex_lock (&node->n_lock);
    __atomic_store_n (&node->n_vol.vol_size, h->size, __ATOMIC_RELEASE);
    pthread_mutex_unlock (&node->n_lock);
    log_info ("node %s: the volume grew from %" PRIu64 " to %" PRIu64
              " bytes (from %s); new clients see the new size",
              node->n_self->nc_name, size, h->size,
              c->c_peer->pr_cfg->nc_name);
    return 0;
  }
  if (size != 0 && h->size != size) {
    snprintf (err, errlen, "refusing connection: the storage node's "
              "volume is %" PRIu64 " bytes, the other storage nodes' %"
              PRIu64 " bytes", h->size, size);
    return -1;
  }
  return 0;
}

/* Does a say it holds newer data than b (b is in its history)? */
static bool
newer (const struct gen_uuids *a, uint64_t b)
{
  return a->gu_history[0] == b || a->gu_history[1] == b;
}

/* A storage node connected to us, a diskless node, on c, told us its
 * UUIDs, or its disk state (role_handle_state; pr_lock not held):
 * learn the size, take its generation if it is the newest we know (a
 * node we had counted as current but that is older is then no target
 * any more), and say whether it holds the current generation.
 *
 * Only an UpToDate node's generation, and only one grown out of ours
 * (ours in its history): a generation of ours may hold writes we
 * acknowledged, and a node that does not know it (in its parent, or
 * unrelated) may lack them; reading from it would return data older
 * than what we acknowledged.  We then serve no I/O until a node of our
 * generation, or of one grown from it, is back (or the storage nodes
 * are resynced from one). */
static void peer_generation (struct repl_node *node, struct conn *c,
                             bool uuids);
static void drop_stale_primaries (struct repl_node *node,
                                  const struct peer *q,
                                  const struct gen_uuids *u);

void
diskless_peer_uuids (struct repl_node *node, struct conn *c)
{
  peer_generation (node, c, true);
}

/* The same when a storage node's STATE came: it may have become
 * UpToDate after the UUIDS that named its generation.  A STATE is no
 * word that a resync of it ended (its UUIDS is): a node that left our
 * targets for one stays out. */
void
diskless_peer_state (struct repl_node *node, struct conn *c)
{
  peer_generation (node, c, false);
}

static void
peer_generation (struct repl_node *node, struct conn *c, bool uuids)
{
  struct peer *p = c->c_peer;
  struct gen_uuids u;
  enum repl_disk_state disk;
  uint64_t size = c->c_hello.size, current, prev, named;
  uint32_t prev_targets;
  bool adopted = false, in_gen, was_in_gen;
  size_t i;

  if (c->c_peer_diskless)
    return;
  pthread_mutex_lock (&p->pr_lock);
  u = c->c_peer_uuids;
  disk = p->pr_disk;
  pthread_mutex_unlock (&p->pr_lock);

  pthread_mutex_lock (&node->n_lock);
  if (node->n_vol.vol_size == 0 && size > 0) {
    node->n_vol.vol_size = size;
    pthread_cond_broadcast (&node->n_cond);
    log_info ("node %s: the volume is %" PRIu64 " bytes (from %s)",
              node->n_self->nc_name, size, p->pr_cfg->nc_name);
  }
  if (disk == REPL_DISK_UPTODATE && u.gu_current != node->n_dl_current &&
      (node->n_dl_current == 0 || newer (&u, node->n_dl_current))) {
    node->n_dl_current = u.gu_current;
    node->n_dl_gen_away = 0;
    node->n_dl_prev = 0;
    node->n_dl_prev_targets = 0;
    adopted = true;
  }
  current = node->n_dl_current;
  prev = node->n_dl_prev;
  prev_targets = node->n_dl_prev_targets;
  pthread_mutex_unlock (&node->n_lock);

  if (adopted)
    for (i = 0; i < PEERS (node)->pl_n; i++) {
      struct peer *q = PEERS (node)->pl_peers[i];
      struct conn *qc;

      pthread_mutex_lock (&q->pr_lock);
      qc = peer_conn_locked (q);
      if (q != p && qc != NULL && qc->c_peer_uuids.gu_current != current)
        qc->c_dl_in_gen = false;
      pthread_mutex_unlock (&q->pr_lock);
    }
  pthread_mutex_lock (&p->pr_lock);
  was_in_gen = c->c_dl_in_gen;
  in_gen = c->c_peer_uuids.gu_current == current;
  /* A node of ours, on this connection, still names the generation
   * before: one we started with it a target of the write that started
   * it, whose AWAY is not out yet or not yet taken there (its message
   * left before that).  It is in ours (is_target_locked takes it
   * through the previous one): the AWAY moves it.  A node newly
   * connected never comes in that way: it may have missed writes of
   * ours. */
  if (!in_gen && was_in_gen && prev != 0 &&
      c->c_peer_uuids.gu_current == prev && (prev_targets & id_bit (p)))
    in_gen = true;
  /* A STATE says nothing new of its generation (its UUIDs, at connect
   * or after a resync, do): it only ever finds it in ours, never puts
   * it out. */
  if (uuids || in_gen)
    c->c_dl_in_gen = in_gen;
  named = c->c_peer_uuids.gu_current;
  /* A node that left our targets for a resync (SYNC_FENCE) reports its
   * UUIDS when that ends: it may be a target again. */
  if (uuids && c->c_dl_leaving && !c->c_dl_fence_pending) {
    c->c_dl_leaving = false;
    log_info ("peer %s: back among our targets (%s our generation)",
              p->pr_cfg->nc_name, c->c_dl_in_gen ? "in" : "not in");
  }
  pthread_mutex_unlock (&p->pr_lock);
  if (was_in_gen && !in_gen && uuids)
    log_info ("peer %s: not in our generation any more (it names %016"
              PRIx64 ", ours is %016" PRIx64 "): no target until it is "
              "resynced", p->pr_cfg->nc_name, named, current);
  if (uuids && disk == REPL_DISK_UPTODATE && node->n_cfg.cf_two_primaries)
    drop_stale_primaries (node, p, &u);
}

/* allow-two-primaries: storage peer q, UpToDate, holds generation u: a
 * storage Primary connected here whose generation u grew out of missed
 * the writes since, and is dropped (diskless_check_storage_primary
 * refuses it when it comes back), so that it does not count us for its
 * quorum. */
static void
drop_stale_primaries (struct repl_node *node, const struct peer *q,
                      const struct gen_uuids *u)
{
  size_t i;

  for (i = 0; i < PEERS (node)->pl_n; i++) {
    struct peer *s = PEERS (node)->pl_peers[i];
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&s->pr_lock);
    struct conn *sc = peer_conn_locked (s);

    if (s != q && !s->pr_cfg->nc_diskless && sc != NULL && !sc->c_failed &&
        sc->c_role == REPL_ROLE_PRIMARY &&
        sc->c_peer_uuids.gu_current != u->gu_current &&
        newer (u, sc->c_peer_uuids.gu_current))
      conn_fail_locked (sc, "%s holds a newer generation grown out of this "
                        "Primary's (it missed writes while it was away); "
                        "dropping it", q->pr_cfg->nc_name);
  }
}

/* Test hook (tests/test-diskless-race.sh): NBDREPL_TEST_DISKLESS_STATE_
 * DELAY_MS=N makes this node go on taking a storage node for UpToDate
 * for N ms after it heard otherwise, as if its STATE came that late.
 * Without the sync fence a resync target stays our target for that
 * long, and our direct writes to it race the resync data: the test
 * shows the fence closes that window. */
static uint64_t state_delay_ns;
static pthread_once_t state_delay_once = PTHREAD_ONCE_INIT;

static void
state_delay_init (void)
{
  const char *s = getenv ("NBDREPL_TEST_DISKLESS_STATE_DELAY_MS");

  if (s != NULL)
    state_delay_ns = strtoull (s, NULL, 10) * UINT64_C (1000000);
}

/* Does p's disk count as UpToDate here?  pr_lock held. */
static bool
disk_uptodate_locked (const struct peer *p)
{
  pthread_once (&state_delay_once, state_delay_init);
  if (p->pr_disk == REPL_DISK_UPTODATE)
    return true;
  return state_delay_ns != 0 &&
         now_ns () - p->pr_disk_left_uptodate_ns < state_delay_ns;
}

/* Our generation, as a write or read reads it once (dl_gen_now), and
 * where it goes. */
struct dl_gen {
  uint64_t dg_current;
  uint64_t dg_prev;
  uint32_t dg_prev_targets;
  int dg_route;                 /* n_dl_route: the storage Primary the
                                   write goes through, or -1; -2: it
                                   failed, and a storage node still
                                   follows it (targets) */
  bool dg_direct;               /* counted in n_dl_direct (direct_done) */
};

/* May we write to and read from storage node p in generation g (as the
 * caller read it)?  pr_lock held.  c_dl_in_gen
 * says it holds the current generation: set when it connects or
 * reports UUIDs (diskless_peer_uuids) with our current UUID; a new
 * generation started here does not clear it, since every target hears
 * of it (AWAY) before our next write.  Its current UUID must be that
 * one too (or, for a target of the write that started it, the one
 * before: its AWAY may not be out yet): a node whose hello was taken (c_dl_in_gen, in the
 * generation before) while a write with it away started a new one,
 * which only the targets of that write heard of (AWAY, which also sets
 * c_peer_uuids here), missed that write and is no target until it is
 * resynced and says so (UUIDS). */
static bool
is_target_locked (struct peer *p, const struct dl_gen *g)
{
  struct conn *c = peer_conn_locked (p);
  uint64_t u;

  if (c == NULL || c->c_peer_diskless || !disk_uptodate_locked (p) ||
      !c->c_dl_in_gen || c->c_dl_leaving)
    return false;
  u = c->c_peer_uuids.gu_current;
  return u == g->dg_current ||
         (u == g->dg_prev && g->dg_prev != 0 &&
          (g->dg_prev_targets & id_bit (p)) != 0);
}

/* Our current generation (diskless primary), and which nodes take it
 * from the generation before (the targets of the write that started
 * it, which hear of it by AWAY, sent by whichever write of it reaches
 * them first: send_all). */
static void
dl_gen_now (struct repl_node *node, struct dl_gen *g, bool write)
{
  pthread_mutex_lock (&node->n_lock);
  g->dg_current = node->n_dl_current;
  g->dg_prev = node->n_dl_prev;
  g->dg_prev_targets = node->n_dl_prev_targets;
  g->dg_route = node->n_dl_route;
  /* A write that goes straight is counted under the lock that the
   * route is read under: a ROUTED never overtakes it. */
  g->dg_direct = write && g->dg_route < 0;
  if (g->dg_direct)
    node->n_dl_direct++;
  pthread_mutex_unlock (&node->n_lock);
}

/* The storage Primary, or the diskless Primary that writes straight to
 * the storage nodes (diskless-primaries.c), p that all our writes go
 * through (route): may we write to it now?  If so (held not NULL), its
 * connection is held in *held and its c_dl_writes counted, as for a
 * target.  Its generation is its own to start (it is Primary): no
 * check of ours. */
static bool
route_target (struct peer *p, struct conn **held)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&p->pr_lock);
  struct conn *c = peer_conn_locked (p);

  if (c == NULL || c->c_failed || c->c_role != REPL_ROLE_PRIMARY ||
      (c->c_peer_diskless && c->c_dl_via != 0))
    return false;
  if (held != NULL) {
    c->c_dl_writes++;
    *held = conn_get (c);
  }
  return true;
}

/* A connected UpToDate storage peer other than p that holds a generation
 * grown out of `current` (p's, which says it is Primary): its name, or
 * NULL.  Writes were made without p since (a diskless Primary that lost
 * it wrote straight to the others). */
static const char *
grown_beyond (struct repl_node *node, const struct peer *p,
              uint64_t current)
{
  size_t i;

  for (i = 0; i < PEERS (node)->pl_n; i++) {
    struct peer *q = PEERS (node)->pl_peers[i];
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&q->pr_lock);
    struct conn *qc = peer_conn_locked (q);

    if (q != p && !q->pr_cfg->nc_diskless && qc != NULL && !qc->c_failed &&
        q->pr_disk == REPL_DISK_UPTODATE &&
        qc->c_peer_uuids.gu_current != current &&
        newer (&qc->c_peer_uuids, current))
      return q->pr_cfg->nc_name;
  }
  return NULL;
}

/* allow-two-primaries: may storage peer c, which says it is Primary
 * (its hello or a STATE), be Primary beside us?  Not while another
 * storage node we are connected to holds a generation grown out of its
 * own, nor, while we are Primary, if it is outside our generation
 * (neither in it nor in one grown out of it): it was away while writes
 * were made (frozen, cut off) and missed them.  Connected, it would
 * count us for its quorum, Secondary or Primary, and answer its own
 * held writes in a generation of its own: with enough diskless nodes
 * connected to both sides, a majority it does not have.  Returns 0, or
 * -1 with the reason in err. */
int
diskless_check_storage_primary (struct repl_node *node, struct conn *c,
                                char *err, size_t errlen)
{
  struct gen_uuids u;
  uint64_t current;
  const char *q;

  if (!node->n_diskless || c->c_peer_diskless ||
      !node->n_cfg.cf_two_primaries)
    return 0;
  pthread_mutex_lock (&c->c_peer->pr_lock);
  u = c->c_peer_uuids;
  pthread_mutex_unlock (&c->c_peer->pr_lock);
  if ((q = grown_beyond (node, c->c_peer, u.gu_current)) != NULL) {
    snprintf (err, errlen, "refusing connection: the peer says it is "
              "Primary, but %s holds a newer generation grown out of its "
              "own (it missed writes while it was away): demote it "
              "(replctl secondary) to have it resynced", q);
    return -1;
  }
  if (node_role (node) != REPL_ROLE_PRIMARY)
    return 0;
  pthread_mutex_lock (&node->n_lock);
  current = node->n_dl_current;
  pthread_mutex_unlock (&node->n_lock);
  if (current == 0 || u.gu_current == current || newer (&u, current))
    return 0;
  snprintf (err, errlen, "refusing connection: the peer says it is "
            "Primary, but it is not in our generation (it missed writes "
            "of ours while it was away): demote it (replctl secondary) to "
            "have it resynced");
  return -1;
}

/* allow-two-primaries: a target of ours (a storage node in our
 * generation) that follows a storage Primary (its STATE says so:
 * diskless_peer_follows), or has not said yet, and would refuse a
 * write of ours that does not go through that Primary: its name, or
 * NULL if there is none. */
static const char *
followed_by (struct repl_node *node)
{
  struct dl_gen g;
  size_t i;

  dl_gen_now (node, &g, false);
  for (i = 0; i < PEERS (node)->pl_n; i++) {
    struct peer *q = PEERS (node)->pl_peers[i];
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&q->pr_lock);
    struct conn *c = peer_conn_locked (q);

    if (!q->pr_cfg->nc_diskless && c != NULL && is_target_locked (q, &g) &&
        (!c->c_dl_follows_known || c->c_dl_follows != 0))
      return q->pr_cfg->nc_name;
  }
  return NULL;
}

/* The storage nodes we may write to and read from now (not those in
 * skip), into tg; returns how many.  The others' ids go into *away,
 * the generation they were checked against into *g.  For a
 * write (held not NULL) each target's connection is held in held[] and
 * its c_dl_writes counted, under the pr_lock of the check: a
 * SYNC_FENCE handled later waits for it (release_targets).  With a
 * route (allow-two-primaries beside a storage Primary) the one target
 * is the storage Primary, and every other storage node is away: the
 * Primary forwards to it.  A route whose node has gone is not taken:
 * straight to the targets then (the route follows at the teardown). */
static size_t
targets (struct repl_node *node, uint32_t skip, struct peer **tg,
         struct conn **held, uint32_t *away, struct dl_gen *g)
{
  size_t i, n = 0;
  struct peer *r;

  *away = 0;
  dl_gen_now (node, g, held != NULL);
  if (g->dg_route >= 0) {
    if (!(skip & (UINT32_C (1) << g->dg_route)) &&
        (r = node_find_peer (node, g->dg_route)) != NULL &&
        route_target (r, held)) {
      tg[0] = r;
      /* (A diskless one sends them on itself: none away.) */
      for (i = 0; i < PEERS (node)->pl_n && !r->pr_cfg->nc_diskless; i++) {
        struct peer *p = PEERS (node)->pl_peers[i];

        if (p != r && !p->pr_cfg->nc_diskless)
          *away |= id_bit (p);
      }
      return 1;
    }
    /* Its connection has failed, and the teardown has not yet taken
     * the route away (diskless_route_update): a write goes nowhere
     * until it has (-2: the caller waits, dl_wait_unfollowed).  Only
     * dl_gen_now, reading route -1, lets a write go straight, and
     * counts it in the same step: a ROUTED owed to a new storage
     * Primary never overtakes it.  A read goes straight. */
    if (held != NULL) {
      g->dg_route = -2;
      return 0;
    }
    g->dg_route = -1;
  }
  for (i = 0; i < PEERS (node)->pl_n; i++) {
    struct peer *p = PEERS (node)->pl_peers[i];
    bool t;

    if (p->pr_cfg->nc_diskless || (skip & id_bit (p)))
      continue;
    pthread_mutex_lock (&p->pr_lock);
    t = is_target_locked (p, g);
    if (t && held != NULL) {
      struct conn *c = peer_conn_locked (p);

      c->c_dl_writes++;
      held[n] = conn_get (c);
    }
    pthread_mutex_unlock (&p->pr_lock);
    if (t)
      tg[n++] = p;
    else
      *away |= id_bit (p);
  }
  return n;
}

/* Queue a SYNC_FENCE or SYNC_FENCED on c (pr_lock held): the message
 * lives in the connection; one still queued is waited for. */
void
fence_queue_locked (struct conn *c, enum repl_msg_type type,
                    uint16_t flags, uint64_t seq, uint64_t token)
{
  struct peer *p = c->c_peer;

  while (c->c_fence_queued && !c->c_fence_msg.om_done && !c->c_failed)
    pthread_cond_wait (&p->pr_cond, &p->pr_lock);
  if (c->c_failed)
    return;
  out_msg_init (&c->c_fence_msg, type, flags, 0, seq, token, NULL, 0);
  c->c_fence_queued = true;
  conn_queue_locked (c, &c->c_fence_msg);
}

/* ---- allow-two-primaries: the route (two-primaries.c) ------------ */

/* A ROUTED to send, taken from the node under n_lock. */
struct routed {
  int rt_id;                    /* the storage node, or -1: none */
  uint64_t rt_conn;             /* on its connection number ... */
  uint64_t rt_count;            /* ... naming this many STATEs */
};

/* The ROUTED owed, if no write of ours that went straight to the
 * targets is in flight and its storage node is still our route (else
 * it is Primary no more, and waits for nothing).  n_lock held. */
static void
take_routed_locked (struct repl_node *node, struct routed *rt)
{
  ASSERT_LOCKED (&node->n_lock);
  rt->rt_id = -1;
  if (node->n_dl_owed_id < 0)
    return;
  if (node->n_dl_owed_id != node->n_dl_route) {
    node->n_dl_owed_id = -1;
    return;
  }
  if (node->n_dl_direct > 0)
    return;
  rt->rt_id = node->n_dl_owed_id;
  rt->rt_conn = node->n_dl_owed_conn;
  rt->rt_count = node->n_dl_owed_count;
  node->n_dl_owed_id = -1;
}

/* Send it, on the connection it is owed on only. */
static void
send_routed (struct repl_node *node, const struct routed *rt)
{
  struct peer *p;
  struct conn *c;

  if (rt->rt_id < 0 || (p = node_find_peer (node, rt->rt_id)) == NULL)
    return;
  pthread_mutex_lock (&p->pr_lock);
  c = peer_conn_locked (p);
  if (c != NULL && c->c_id == rt->rt_conn) {
    /* Its own message: one queued before, not yet sent, is done first
     * (bounded: the send timeout fails the connection). */
    while (c->c_routed_queued && !c->c_routed_msg.om_done && !c->c_failed)
      pthread_cond_wait (&p->pr_cond, &p->pr_lock);
    if (!c->c_failed) {
      out_msg_init (&c->c_routed_msg, REPL_MSG_ROUTED, 0, 0, 0,
                    rt->rt_count, NULL, 0);
      c->c_routed_queued = true;
      conn_queue_locked (c, &c->c_routed_msg);
    }
  }
  pthread_mutex_unlock (&p->pr_lock);
}

/* Does a connected storage node follow a Primary other than us (its
 * STATE says so), or has it not said yet?  Its name, or NULL. */
static const char *
storage_follows_other (struct repl_node *node)
{
  size_t i;

  for (i = 0; i < PEERS (node)->pl_n; i++) {
    struct peer *q = PEERS (node)->pl_peers[i];
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&q->pr_lock);
    struct conn *c = peer_conn_locked (q);

    if (!q->pr_cfg->nc_diskless && c != NULL && !c->c_failed &&
        (!c->c_dl_follows_known || c->c_dl_follows != 0))
      return q->pr_cfg->nc_name;
  }
  return NULL;
}

/* Is diskless peer w connected, Primary, and still deciding (its
 * STATE that says it writes straight is on its way)? */
static bool
writer_deciding (struct peer *w)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&w->pr_lock);
  struct conn *c = peer_conn_locked (w);

  return c != NULL && !c->c_failed && c->c_role == REPL_ROLE_PRIMARY &&
         c->c_peer_diskless &&
         dl_via_deciding (c->c_dl_via, w->pr_cfg->nc_id);
}

/* Two diskless Primaries (diskless-primaries.c), with no storage
 * Primary: the writer we write through (n_dl_via) while it is one.
 * Once it is not (lost, demoted), and no storage node follows it any
 * more, we write straight: *straight is set, and the route stays until
 * the storage nodes are told (n_dl_untold).  old: the route now.
 * n_dl_route_lock held. */
static int
via_route (struct repl_node *node, int old, bool *straight)
{
  struct peer *w;
  bool untold;
  int via;

  pthread_mutex_lock (&node->n_lock);
  via = node->n_role == REPL_ROLE_PRIMARY ? node->n_dl_via : -1;
  untold = node->n_dl_untold;
  pthread_mutex_unlock (&node->n_lock);
  if (untold)
    return old;
  if (via < 0)
    return -1;
  if ((w = node_find_peer (node, via)) != NULL &&
      (route_target (w, NULL) || writer_deciding (w)))
    return via;                 /* (deciding: its STATE will say) */
  if (storage_follows_other (node) != NULL)
    return via;                 /* writes wait (dl_wait_unfollowed) */
  pthread_mutex_lock (&node->n_lock);
  node->n_dl_via = -1;
  node->n_dl_untold = true;
  node_state_changed (node);
  pthread_mutex_unlock (&node->n_lock);
  *straight = true;
  return old;
}

/* A peer's role or connection changed: our writes go through the
 * storage Primary, if one is connected, or the diskless writer (via
 * above), else straight to every target (the one function that sets
 * n_dl_route; n_dl_route_lock makes its look at the peers and its store
 * one step).  owed: a STATE saying Primary came on it, to be answered
 * with ROUTED once no write of ours that went straight is in flight:
 * now, or when the last one ends (direct_done). */
void
diskless_route_update (struct repl_node *node, struct conn *owed)
{
  struct routed rt;
  struct dl_gen g;
  struct conn *stale = NULL;
  int route = -1, old;
  uint64_t count = 0;
  bool straight = false;
  size_t i;

  if (!node->n_diskless || !node->n_cfg.cf_two_primaries)
    return;
  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&node->n_dl_route_lock);

    /* Only a storage Primary in our generation: one that was away while
     * we wrote (frozen, cut off) and came back Primary missed writes
     * of ours, and what went through it would reach nobody else. */
    dl_gen_now (node, &g, false);
    for (i = 0; i < PEERS (node)->pl_n && route < 0; i++) {
      struct peer *q = PEERS (node)->pl_peers[i];
      struct conn *qc;

      if (q->pr_cfg->nc_diskless)
        continue;
      pthread_mutex_lock (&q->pr_lock);
      qc = peer_conn_locked (q);
      if (qc != NULL && !qc->c_failed && qc->c_role == REPL_ROLE_PRIMARY) {
        if (is_target_locked (q, &g))
          route = q->pr_cfg->nc_id;
        else if (stale == NULL)
          stale = conn_get (qc);
      }
      pthread_mutex_unlock (&q->pr_lock);
    }
    if (route < 0) {
      pthread_mutex_lock (&node->n_lock);
      old = node->n_dl_route;
      pthread_mutex_unlock (&node->n_lock);
      route = via_route (node, old, &straight);
    }
    if (owed != NULL) {
      pthread_mutex_lock (&owed->c_peer->pr_lock);
      count = owed->c_tp_primary_states;
      pthread_mutex_unlock (&owed->c_peer->pr_lock);
    }
    pthread_mutex_lock (&node->n_lock);
    old = node->n_dl_route;
    node->n_dl_route = route;
    if (old != route) {
      node->n_dl_follow_seq++;
      pthread_cond_broadcast (&node->n_cond);
      /* What we knew away in our generation is the storage Primary's
       * to know while we write through it, and no longer ours after:
       * the first write with a node away starts a new one again. */
      node->n_dl_gen_away = 0;
    }
    if (owed != NULL) {
      node->n_dl_owed_id = owed->c_peer->pr_cfg->nc_id;
      node->n_dl_owed_conn = owed->c_id;
      node->n_dl_owed_count = count;
    }
    take_routed_locked (node, &rt);
    pthread_mutex_unlock (&node->n_lock);
  }
  if (old != route) {
    struct peer *p = route >= 0 ? node_find_peer (node, route) : NULL;

    if (p != NULL)
      log_info ("node %s: writes go through %s, the %s Primary "
                "(allow-two-primaries), which forwards them",
                node->n_self->nc_name, p->pr_cfg->nc_name,
                p->pr_cfg->nc_diskless ? "diskless" : "storage");
    else
      log_info ("node %s: no storage node is Primary: writes go straight "
                "to every storage node again", node->n_self->nc_name);
  }
  send_routed (node, &rt);
  /* The writer we wrote through is gone: every peer hears that we
   * write straight now before the route lets a write go (STATE count
   * 0; FIFO on each connection), then the route is taken again. */
  if (straight) {
    log_info ("node %s: the diskless Primary our writes went through is "
              "gone, and no storage node follows it: this node writes "
              "straight to the storage nodes now", node->n_self->nc_name);
    for (i = 0; i < PEERS (node)->pl_n; i++)
      role_tell_state (PEERS (node)->pl_peers[i]);
    pthread_mutex_lock (&node->n_lock);
    node->n_dl_untold = false;
    pthread_mutex_unlock (&node->n_lock);
    diskless_route_update (node, NULL);
  }
  /* A Primary that missed our writes: not beside us (its peers refuse
   * it too, being ahead of it), until it is demoted and resynced. */
  if (stale != NULL) {
    if (route < 0 && node_role (node) == REPL_ROLE_PRIMARY)
      conn_fail (stale, "storage Primary %s is not in our generation (it "
                 "missed writes of ours while it was away): not writing "
                 "through it; demote it (replctl secondary) to have it "
                 "resynced", stale->c_peer->pr_cfg->nc_name);
    conn_put (stale);
  }
}

/* Storage peer c's STATE says which storage Primaries it follows
 * (mask; allow-two-primaries): dl_wait_unfollowed waits for it. */
void
diskless_peer_follows (struct repl_node *node, struct conn *c,
                       uint32_t mask)
{
  pthread_mutex_lock (&c->c_peer->pr_lock);
  c->c_dl_follows = mask;
  c->c_dl_follows_known = true;
  pthread_mutex_unlock (&c->c_peer->pr_lock);
  pthread_mutex_lock (&node->n_lock);
  node->n_dl_follow_seq++;
  pthread_cond_broadcast (&node->n_cond);
  pthread_mutex_unlock (&node->n_lock);
}

/* allow-two-primaries: with no storage Primary to write through, a
 * write of ours goes straight to the storage nodes, which must not
 * follow a storage Primary then: they would refuse it (tp_beside_
 * storage_primary), and the generation it may start would be taken by
 * nobody.  Wait while a connected storage node follows one (its STATE
 * says so), or has not said yet, bounded by a ping timeout and two
 * ping intervals (a Primary that we lost is lost there by then, unless
 * it is alive and only cut off from us: then we do not write beside
 * it).  Returns 0, or -1 (the write fails, EIO). */
static int
dl_wait_unfollowed (struct repl_node *node)
{
  uint64_t deadline = now_ns () +
                      (node->n_cfg.cf_ping_timeout_ms +
                       2 * node->n_cfg.cf_ping_interval_ms) *
                      UINT64_C (1000000);
  struct timespec ts = deadline_at_ns (deadline);
  const char *who;

  for (;;) {
    struct peer *r;
    uint64_t seq;
    int route;

    pthread_mutex_lock (&node->n_lock);
    seq = node->n_dl_follow_seq;
    route = node->n_dl_route;
    pthread_mutex_unlock (&node->n_lock);
    if (route >= 0) {
      /* Through it, or once its lost connection is torn down. */
      if ((r = node_find_peer (node, route)) == NULL ||
          route_target (r, NULL))
        return 0;
      who = r->pr_cfg->nc_name;
    }
    else if ((who = followed_by (node)) == NULL)
      return 0;
    pthread_mutex_lock (&node->n_lock);
    while (node->n_dl_follow_seq == seq && !node->n_stopping &&
           pthread_cond_timedwait (&node->n_cond, &node->n_lock,
                                   &ts) != ETIMEDOUT)
      ;
    if (node->n_dl_follow_seq == seq || node->n_stopping) {
      pthread_mutex_unlock (&node->n_lock);
      break;
    }
    pthread_mutex_unlock (&node->n_lock);
  }
  log_error ("node %s: write failed: %s still follows a Primary that "
             "our writes cannot go through, or is that Primary, lost and "
             "not yet torn down (allow-two-primaries: is the link to it "
             "down?)", node->n_self->nc_name, who);
  return -1;
}

/* A write that went straight to its targets (route -1) is over. */
static void
direct_done (struct repl_node *node)
{
  struct routed rt;

  pthread_mutex_lock (&node->n_lock);
  assert (node->n_dl_direct > 0);
  node->n_dl_direct--;
  take_routed_locked (node, &rt);
  pthread_mutex_unlock (&node->n_lock);
  send_routed (node, &rt);
}

/* For replctl status: the storage Primary our writes go through, into
 * name.  Returns 0, or -1 if there is none. */
int
diskless_route_name (struct repl_node *node, char *name, size_t len)
{
  struct peer *p;
  int route;

  pthread_mutex_lock (&node->n_lock);
  route = node->n_dl_route;
  pthread_mutex_unlock (&node->n_lock);
  if (route < 0 || (p = node_find_peer (node, route)) == NULL)
    return -1;
  snprintf (name, len, "%s", p->pr_cfg->nc_name);
  return 0;
}

/* A write to the n targets tg (connections held) is over: each
 * connection counts it off, and the last write to a storage node that
 * asked to leave our targets sends its SYNC_FENCED. */
static void
release_targets (struct peer **tg, struct conn **held, size_t n)
{
  size_t i;

  for (i = 0; i < n; i++) {
    struct peer *p = tg[i];
    struct conn *c = held[i];

    pthread_mutex_lock (&p->pr_lock);
    assert (c->c_dl_writes > 0);
    if (--c->c_dl_writes == 0 && c->c_dl_fence_pending) {
      c->c_dl_fence_pending = false;
      fence_queue_locked (c, REPL_MSG_SYNC_FENCED, 0, 0,
                          c->c_dl_fence_token);
    }
    pthread_mutex_unlock (&p->pr_lock);
    conn_put (c);
  }
}

/* SYNC_FENCE from storage node p: a storage peer of it (id h->seq)
 * is about to resync it.  From now on p is no target of ours (writes
 * reach it through its sync source, which forwards them after our
 * AWAY); the answer waits until no write of ours that went to p is in
 * flight (release_targets).  As Primary we refuse a sync source that
 * is not our target itself: it would not get, so not forward, our
 * writes, and its resync data could overwrite newer data on p. */
int
diskless_handle_fence (struct conn *c, const struct repl_hdr *h)
{
  struct peer *p = c->c_peer, *src;
  struct repl_node *node = p->pr_node;
  bool refused = false;

  src = h->seq <= REPL_MAX_NODE_ID ? node_find_peer (node, h->seq) : NULL;
  if (!node->n_diskless || c->c_peer_diskless || src == NULL ||
      src == p || src->pr_cfg->nc_diskless) {
    conn_fail (c, "protocol error: SYNC_FENCE for sync source %" PRIu64
               " from %s", h->seq, node->n_diskless ? "a diskless node"
               : "a peer, to a storage node");
    return -1;
  }
  /* (A Primary whose writes go through another node writes to no
   * storage node itself: it answers as a Secondary does.) */
  if (node_role (node) == REPL_ROLE_PRIMARY) {
    struct dl_gen g;

    dl_gen_now (node, &g, false);
    pthread_mutex_lock (&src->pr_lock);
    refused = g.dg_route < 0 && !is_target_locked (src, &g);
    pthread_mutex_unlock (&src->pr_lock);
  }
  pthread_mutex_lock (&p->pr_lock);
  if (refused)
    fence_queue_locked (c, REPL_MSG_SYNC_FENCED, REPL_FLAG_ERROR, 0,
                        h->offset);
  else {
    c->c_dl_leaving = true;
    c->c_dl_fence_token = h->offset;
    c->c_dl_fence_pending = c->c_dl_writes > 0;
    if (!c->c_dl_fence_pending)
      fence_queue_locked (c, REPL_MSG_SYNC_FENCED, 0, 0, h->offset);
  }
  pthread_mutex_unlock (&p->pr_lock);
  if (refused)
    log_info ("peer %s: refusing its resync from %s, which our writes "
              "do not reach", p->pr_cfg->nc_name, src->pr_cfg->nc_name);
  else
    log_info ("peer %s: leaves our targets while %s resyncs it",
              p->pr_cfg->nc_name, src->pr_cfg->nc_name);
  return 0;
}

/* Queue AWAY to target p if what it last heard differs.  pr_lock held.
 * The message lives in the peer; one still queued is waited for.
 * While another write to p is in flight (c_dl_writes counts ours too)
 * the mask only grows: that write may have been planned with other
 * nodes away (a new generation started by one writer while another
 * still writes in the one before), and p must forward or mark it for
 * them, which it does by the last mask it heard before it.  One node
 * too many in the mask costs a forward or a mark; one too few, a write
 * that node never gets.  With no other write in flight, the mask is
 * what this write needs. */
static void
send_away_locked (struct conn *c, uint32_t away, uint64_t gen)
{
  struct peer *p = c->c_peer;
  uint32_t mask;
  uint64_t fresh;

  ASSERT_LOCKED (&p->pr_lock);
  for (;;) {
    mask = away;
    if (c->c_dl_writes > 1)
      mask |= c->c_dl_sent_away;
    /* A target of the write that started gen may not have heard of it
     * yet: whichever write of gen comes first tells it. */
    fresh = c->c_peer_uuids.gu_current != gen && c->c_dl_sent_uuid != gen
            ? gen : 0;
    if (c->c_dl_sent_away == mask && fresh == 0)
      return;
    if (c->c_away_msg.om_done || c->c_failed)
      break;
    pthread_cond_wait (&p->pr_cond, &p->pr_lock);   /* then look again */
  }
  if (c->c_failed)
    return;
  put_be64 (c->c_away_buf, fresh);
  out_msg_init (&c->c_away_msg, REPL_MSG_AWAY, 0, 0, 0, mask,
                c->c_away_buf, 8);
  conn_queue_locked (c, &c->c_away_msg);
  c->c_dl_sent_away = mask;
  if (fresh != 0) {
    c->c_dl_sent_uuid = fresh;
    /* It moves to the new generation before our next message. */
    c->c_peer_uuids.gu_current = fresh;
  }
}

/* Has connection c failed? */
static bool
conn_failed (struct conn *c)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&c->c_peer->pr_lock);

  return c->c_failed;
}

/* Did the message of ticket t get its answer?  (Called once its waiter
 * has completed.)  A message that waited for the applied ACK has it for
 * good; one that waited only for receipt (protocol B: pt_applied false)
 * counts only while the connection that took it lasts. */
static bool
answered (const struct peer_ticket *t)
{
  struct peer *p;
  bool r;

  if (t->pt_conn == NULL || !t->pt_answered)
    return false;
  if (t->pt_applied)
    return true;
  p = t->pt_conn->c_peer;
  pthread_mutex_lock (&p->pr_lock);
  r = !t->pt_conn->c_failed;
  pthread_mutex_unlock (&p->pr_lock);
  return r;
}

/* Send and wait for one sequenced message to each peer of tg (n of
 * them), on the connection held[i] only (a newer one was not counted);
 * ok[i] says who answered.  Each goes after the AWAY its peer needs for
 * the nodes away and generation gen (an OUT_OF_SYNC only with a
 * generation: gen not 0). */
static void
send_all (struct peer **tg, struct conn **held, size_t n,
          enum repl_msg_type type, uint16_t flags, const void *payload,
          uint32_t count, uint64_t offset, uint32_t away, uint64_t gen,
          bool *ok)
{
  struct out_msg msgs[REPL_MAX_NODES];
  struct peer_ticket t[REPL_MAX_NODES];
  struct waiter w;
  size_t i;

  waiter_init (&w, 0);
  for (i = 0; i < n; i++) {
    struct peer *p = tg[i];

    struct conn *c;

    t[i] = (struct peer_ticket) { .pt_conn = NULL };
    pthread_mutex_lock (&p->pr_lock);
    if ((c = peer_conn_locked (p)) != NULL && c == held[i]) {
      if (type != REPL_MSG_OUT_OF_SYNC || gen != 0)
        send_away_locked (c, away, gen);
      /* send_away_locked may have waited (pr_lock dropped): the held
       * connection only, never a newer one that is no target yet. */
      if (!c->c_failed && peer_conn_locked (p) == c)
        peer_submit_locked (p, type, flags, payload, count, offset, &w,
                            false, &msgs[i], &t[i]);
    }
    pthread_mutex_unlock (&p->pr_lock);
  }
  for (i = 0; i < n; i++)
    ticket_wait_own_ack (&t[i]);
  waiter_wait (&w);
  waiter_destroy (&w);
  for (i = 0; i < n; i++) {
    ok[i] = answered (&t[i]);
    ticket_release (&t[i]);
  }
}

/* Test hook (tests/test-diskless-gen-race.sh): NBDREPL_TEST_DISKLESS_
 * TARGETS_DELAY_MS=N makes a write with a storage node away wait N ms
 * between taking its targets and deciding on a new generation, so that
 * the away node's hello can come in between. */
static void
targets_delay (void)
{
  static long long ms = -1;

  test_hook_sleep ("NBDREPL_TEST_DISKLESS_TARGETS_DELAY_MS", &ms);
}

/* Test hook (tests/test-diskless-gen-state.sh): NBDREPL_TEST_DISKLESS_
 * AWAY_DELAY_MS=N makes the write that started a new generation wait N
 * ms before it goes out (with the AWAY that tells its targets), so that
 * a target's STATE or UUIDS, sent in the generation before, can come in
 * between. */
static void
away_delay (void)
{
  static long long ms = -1;

  test_hook_sleep ("NBDREPL_TEST_DISKLESS_AWAY_DELAY_MS", &ms);
}

/* The first write with a node away starts a new generation: *fresh
 * becomes its current UUID (else it stays 0).  Nodes in in_gen are
 * targets of this write again.  Returns 1 if the generation is no
 * longer current, the one our targets were checked against (another
 * write started a new one, or a storage node told us of a newer one):
 * a node away for this write may be a target of that one's next write,
 * and would lack this one; the caller takes its targets again. */
static int
new_generation_if_away (struct repl_node *node, enum repl_msg_type type,
                        uint64_t current, uint32_t away, uint32_t in_gen,
                        uint64_t *fresh)
{
  uint32_t fresh_bits;

  pthread_mutex_lock (&node->n_lock);
  if (node->n_dl_current != current) {
    pthread_mutex_unlock (&node->n_lock);
    return type == REPL_MSG_FLUSH ? 0 : 1;
  }
  node->n_dl_gen_away &= ~in_gen;
  fresh_bits = away & ~node->n_dl_gen_away;
  if (fresh_bits != 0 && type != REPL_MSG_FLUSH) {
    if (uuid_generate (fresh) == -1) {
      pthread_mutex_unlock (&node->n_lock);
      log_error ("getrandom: %m");
      errno = EIO;
      return -1;
    }
    node->n_dl_prev = current;
    node->n_dl_prev_targets = in_gen;
    node->n_dl_current = *fresh;
    node->n_dl_gen_away |= away;
  }
  pthread_mutex_unlock (&node->n_lock);
  if (*fresh != 0)
    log_info ("node %s: first write with storage nodes away (mask 0x%"
              PRIx32 "): new current UUID %016" PRIx64,
              node->n_self->nc_name, away, *fresh);
  return 0;
}

/* A write went to storage nodes that were lost before they answered
 * (lost), and is to be acknowledged on the word of the others (done).
 * The lost ones missed it: they are away in our generation from now
 * on, a new one if the current one had them as targets, before the
 * write is acknowledged.  Else a lost node that comes back would still
 * be in our generation, a target again and a sync source for the
 * others (its activity log reconciled after it lost us, say), with an
 * acknowledged write it never got: the storage nodes would end
 * identical and without it.  *gen is the generation the done nodes must
 * hear of (AWAY) before the answer.  Returns 0, or -1 (errno set). */
static int
lost_generation (struct repl_node *node, uint32_t lost, uint32_t done,
                 uint64_t *gen)
{
  for (;;) {
    uint64_t current, fresh = 0;
    uint32_t gen_away;
    int r;

    pthread_mutex_lock (&node->n_lock);
    current = node->n_dl_current;
    gen_away = node->n_dl_gen_away;
    pthread_mutex_unlock (&node->n_lock);
    if ((gen_away & lost) == lost) {
      *gen = current;
      return 0;
    }
    r = new_generation_if_away (node, REPL_MSG_WRITE, current, lost, done,
                                &fresh);
    if (r == -1)
      return -1;
    if (r == 0) {
      *gen = fresh != 0 ? fresh : current;
      return 0;
    }
    /* The generation moved meanwhile: look again. */
  }
}

/* One message's worth of a write, trim, zero or flush, to the nt
 * targets tg (their connections held), checked against generation
 * current.  Returns 0, -1 (errno set), or 1: nothing sent, the
 * generation moved on; take the targets again. */
static int
replicate_to (struct repl_node *node, enum repl_msg_type type,
              const void *buf, uint32_t count, uint64_t offset,
              uint16_t flags, struct peer **tg, struct conn **held,
              size_t nt, uint32_t away, const struct dl_gen *g)
{
  struct peer *done[REPL_MAX_NODES];
  struct conn *done_held[REPL_MAX_NODES];
  bool ok[REPL_MAX_NODES];
  size_t i, ndone = 0;
  uint32_t lost = 0, in_gen = 0, gen_away;
  uint64_t fresh = 0;
  bool moved;

  pthread_mutex_lock (&node->n_lock);
  gen_away = node->n_dl_gen_away;
  pthread_mutex_unlock (&node->n_lock);
  for (i = 0; i < nt; i++)
    in_gen |= id_bit (tg[i]);
  /* No target in the generation we read, because another write started
   * a newer one meanwhile and its AWAY moved our targets there: take
   * them again (seen under load: test-diskless-3 under ASan). */
  if (nt == 0 && g->dg_route < 0) {
    pthread_mutex_lock (&node->n_lock);
    moved = node->n_dl_current != g->dg_current;
    pthread_mutex_unlock (&node->n_lock);
    if (moved)
      return 1;
  }
  if (nt == 0) {
    log_error ("node %s: %s of %" PRIu32 " bytes at offset %" PRIu64
               " failed: no UpToDate storage node is connected",
               node->n_self->nc_name, wire_type_name (type), count, offset);
    errno = EIO;
    return -1;
  }

  /* With every node a target and none marked away there is nothing to
   * do here (as if done in the first critical section): the common
   * case takes n_lock once.  Through a storage Primary, the nodes away
   * are those it forwards to: its generation, not ours. */
  if (g->dg_route < 0 && (away != 0 || (gen_away & in_gen) != 0)) {
    int r = new_generation_if_away (node, type, g->dg_current, away,
                                    in_gen, &fresh);

    if (r != 0)
      return r;
    if (fresh != 0)
      away_delay ();
  }

  send_all (tg, held, nt, type, flags, buf,
            type == REPL_MSG_FLUSH ? 0 : count,
            type == REPL_MSG_FLUSH ? 0 : offset, away,
            g->dg_route >= 0 ? 0 : fresh != 0 ? fresh : g->dg_current, ok);
  for (i = 0; i < nt; i++) {
    if (ok[i]) {
      done_held[ndone] = held[i];
      done[ndone++] = tg[i];
    }
    else
      lost |= id_bit (tg[i]);
  }
  /* The storage Primary it went through was lost: it may have reached
   * some storage nodes or none.  Again, straight to the targets now
   * (the same bytes; our interval lock holds the range). */
  if (ndone == 0 && g->dg_route >= 0 && conn_failed (held[0]))
    return 1;
  if (ndone == 0) {
    log_error ("node %s: %s of %" PRIu32 " bytes at offset %" PRIu64
               " failed: every storage node it went to was lost",
               node->n_self->nc_name, wire_type_name (type), count, offset);
    errno = EIO;
    return -1;
  }

  /* Those that took it learn that the lost ones may lack it. */
  if (lost != 0 && type != REPL_MSG_FLUSH) {
    uint8_t mask[8];
    uint32_t done_mask = 0;
    uint64_t gen = 0;

    for (i = 0; i < ndone; i++)
      done_mask |= id_bit (done[i]);
    /* Through a storage Primary, its generation, not ours. */
    if (g->dg_route < 0 &&
        lost_generation (node, lost, done_mask, &gen) == -1)
      return -1;
    put_be64 (mask, lost);
    send_all (done, done_held, ndone, REPL_MSG_OUT_OF_SYNC, 0, mask, count,
              offset, g->dg_route < 0 ? away | lost : 0, gen, ok);
    for (i = 0; i < ndone; i++)
      if (ok[i])
        return role_complete_write (node, true);
    log_error ("node %s: %s at offset %" PRIu64 ": no storage node "
               "confirmed what a lost node may lack",
               node->n_self->nc_name, wire_type_name (type), offset);
    errno = EIO;
    return -1;
  }
  return role_complete_write (node, lost != 0 ||
                                    (away != 0 && g->dg_route < 0));
}

static int
replicate (struct repl_node *node, enum repl_msg_type type,
           const void *buf, uint32_t count, uint64_t offset, uint16_t flags)
{
  struct peer *tg[REPL_MAX_NODES];
  struct conn *held[REPL_MAX_NODES];
  uint32_t away;
  struct dl_gen g;
  size_t nt;
  int r;

  unsigned tries;

  /* Bounded: a new generation starts only when a node goes away. */
  for (tries = 0; tries < 100; tries++) {
    if (node->n_cfg.cf_two_primaries && dl_wait_unfollowed (node) == -1) {
      errno = EIO;
      return -1;
    }
    nt = targets (node, 0, tg, held, &away, &g);
    if (g.dg_route == -2)
      continue;                 /* nothing held: wait above, again */
    if (away != 0 && type != REPL_MSG_FLUSH && g.dg_route < 0)
      targets_delay ();
    r = replicate_to (node, type, buf, count, offset, flags, tg, held, nt,
                      away, &g);
    release_targets (tg, held, nt);
    if (g.dg_direct)
      direct_done (node);
    if (r != 1)
      return r;
  }
  log_error ("node %s: %s of %" PRIu32 " bytes at offset %" PRIu64
             " failed: the generation changed under it %u times",
             node->n_self->nc_name, wire_type_name (type), count, offset,
             tries);
  errno = EIO;
  return -1;
}

/* A request of a client of ours, or (client false) of the other
 * diskless Primary, which writes through us (diskless-primaries.c):
 * not counted among our requests in flight, which a demotion waits
 * for; one that our demotion overtakes fails, and the other writes it
 * straight. */
static int
ranged (struct repl_node *node, enum repl_msg_type type, const void *buf,
        uint32_t count, uint64_t offset, uint16_t flags, bool client)
{
  struct ilock_range range;
  bool held;
  int r = 0;

  /* It may wait long (quorum, fencing): without the request's pin
   * meanwhile, as write-path.c's check_write (peers.c). */
  held = client && peers_wait_begin (node);
  r = role_check_write (node);
  if (client)
    peers_wait_end (node, held);
  if (r == -1)
    return -1;
  if (client)
    atomic_fetch_add (&node->n_requests_in_flight, 1);
  if (type == REPL_MSG_FLUSH)
    r = replicate (node, type, NULL, 0, 0, flags);
  else {
    ilock_acquire (&node->n_ilock, &range, offset, count);
    while (count > 0 && r == 0) {
      uint32_t n = count < REPL_MAX_PAYLOAD ? count : REPL_MAX_PAYLOAD;

      r = replicate (node, type, buf, n, offset, flags);
      count -= n;
      offset += n;
      if (buf)
        buf = (const char *) buf + n;
    }
    ilock_release (&node->n_ilock, &range);
  }
  if (client)
    atomic_fetch_sub (&node->n_requests_in_flight, 1);
  return r;
}

int
diskless_ranged (struct repl_node *node, enum repl_msg_type type,
                 const void *buf, uint32_t count, uint64_t offset,
                 uint16_t flags)
{
  return ranged (node, type, buf, count, offset, flags, true);
}

int
diskless_ranged_routed (struct repl_node *node, enum repl_msg_type type,
                        const void *buf, uint32_t count, uint64_t offset,
                        uint16_t flags)
{
  return ranged (node, type, buf, count, offset, flags, false);
}

/* The storage node to read from next, not one of those in `tried`. */
static struct peer *
pick_reader (struct repl_node *node, uint32_t tried)
{
  struct peer *cand[REPL_MAX_NODES], *best = NULL;
  size_t i, n;
  uint32_t away;
  struct dl_gen g;
  unsigned next;

  pthread_mutex_lock (&node->n_lock);
  next = node->n_dl_next_read++;
  pthread_mutex_unlock (&node->n_lock);
  n = targets (node, tried, cand, NULL, &away, &g);
  if (n == 0)
    return NULL;

  switch (node->n_cfg.cf_read_balancing) {
  case REPL_READ_PREFER:
    for (i = 0; i < n; i++)
      if (cand[i]->pr_cfg->nc_id == node->n_cfg.cf_read_prefer_id)
        return cand[i];
    /* The preferred node is not there: round-robin. */
    return cand[next % n];
  case REPL_READ_ROUND_ROBIN:
    return cand[next % n];
  case REPL_READ_LEAST_PENDING: {
    uint64_t least = UINT64_MAX;

    for (i = 0; i < n; i++) {
      uint64_t pending = UINT64_MAX;
      struct conn *c;

      pthread_mutex_lock (&cand[i]->pr_lock);
      if ((c = peer_conn_locked (cand[i])) != NULL)
        pending = c->c_ring_count;
      pthread_mutex_unlock (&cand[i]->pr_lock);
      if (pending < least) {
        least = pending;
        best = cand[i];
      }
    }
    return best != NULL ? best : cand[0];
  }
  }
  abort ();
}

static int
read_chunk (struct repl_node *node, void *buf, uint32_t count,
            uint64_t offset)
{
  uint32_t tried = 0;
  struct peer *p;

  while ((p = pick_reader (node, tried)) != NULL) {
    struct peer_ticket t = { .pt_conn = NULL };
    struct out_msg om;
    struct waiter w;
    int status = EIO;

    tried |= id_bit (p);
    waiter_init (&w, 0);
    pthread_mutex_lock (&p->pr_lock);
    peer_submit_read_locked (p, buf, count, offset, &status, &w, &om, &t);
    pthread_mutex_unlock (&p->pr_lock);
    ticket_wait_own_ack (&t);
    waiter_wait (&w);
    waiter_destroy (&w);
    ticket_release (&t);
    if (status == 0)
      return 0;
    log_error ("node %s: read of %" PRIu32 " bytes at offset %" PRIu64
               " from %s failed; trying another storage node",
               node->n_self->nc_name, count, offset, p->pr_cfg->nc_name);
  }
  log_error ("node %s: read of %" PRIu32 " bytes at offset %" PRIu64
             " failed: no UpToDate storage node %s",
             node->n_self->nc_name, count, offset,
             tried ? "answered" : "is connected");
  errno = EIO;
  return -1;
}

int
diskless_pread (struct repl_node *node, void *buf, uint32_t count,
                uint64_t offset)
{
  while (count > 0) {
    uint32_t n = count < REPL_MAX_PAYLOAD ? count : REPL_MAX_PAYLOAD;

    if (read_chunk (node, buf, n, offset) == -1)
      return -1;
    buf = (char *) buf + n;
    count -= n;
    offset += n;
  }
  return 0;
}
