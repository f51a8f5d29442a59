/* nbdrepl: generation UUIDs at work — each peer's view of them, the sync
 * decision at connect, and the changes a node's life makes to them.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * The rules themselves are in common/uuid-compare.[ch] (comparing two
 * nodes' UUIDs) and common/decide.c (what a connection does with the
 * comparison, split-brain policies included); the UUIDs live in the
 * metadata superblock (common/metadata.h): one current UUID and history
 * for the node, one bitmap UUID per peer slot.  A struct gen_uuids is
 * the view of one peer: the shared current UUID, history and flags,
 * plus the bitmap UUID we hold for that peer.
 *
 * A decision that would make a primary a sync target, or a secondary
 * the source of a primary, is refused with a clear message.  Between two
 * secondaries the one with the newer data resyncs the other when no
 * storage node is Primary (peer-sync.c); a Primary resyncs each of its
 * secondaries itself.
 */
#include <config.h>

#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decide.h"
#include "internal.h"
#include "log.h"

/* The view of peer p (from the superblock).  n_md_io_lock held. */
static void
view_locked (struct repl_node *node, const struct peer *p,
             struct gen_uuids *u)
{
  const struct md_super *sb = &node->n_md.md_super;

  memset (u, 0, sizeof *u);
  u->gu_current = sb->ms_current_uuid;
  u->gu_bitmap = sb->ms_peers[p->pr_md_slot].mp_bitmap_uuid;
  u->gu_history[0] = sb->ms_history_uuid[0];
  u->gu_history[1] = sb->ms_history_uuid[1];
  if (sb->ms_flags & MD_FLAG_CONSISTENT)
    u->gu_flags |= GU_FLAG_CONSISTENT;
  if (sb->ms_flags & MD_FLAG_CRASHED_PRIMARY)
    u->gu_flags |= GU_FLAG_CRASHED_PRIMARY;
  if (sb->ms_flags & MD_FLAG_TENTATIVE)
    u->gu_flags |= GU_FLAG_TENTATIVE;
  if (node_role (node) == REPL_ROLE_PRIMARY)
    u->gu_flags |= GU_FLAG_PRIMARY;
}

void
gen_view (struct repl_node *node, const struct peer *p, struct gen_uuids *u)
{
  pthread_mutex_lock (&node->n_md_io_lock);
  view_locked (node, p, u);
  pthread_mutex_unlock (&node->n_md_io_lock);
}

/* Put a changed view of peer p into a superblock copy. */
static void
apply_view (struct md_super *sb, const struct peer *p,
            const struct gen_uuids *u)
{
  sb->ms_current_uuid = u->gu_current;
  sb->ms_history_uuid[0] = u->gu_history[0];
  sb->ms_history_uuid[1] = u->gu_history[1];
  sb->ms_peers[p->pr_md_slot].mp_bitmap_uuid = u->gu_bitmap;
  sb->ms_flags &= ~(MD_FLAG_CONSISTENT | MD_FLAG_WAS_UPTODATE |
                    MD_FLAG_CRASHED_PRIMARY | MD_FLAG_TENTATIVE);
  if (u->gu_flags & GU_FLAG_CONSISTENT)
    sb->ms_flags |= MD_FLAG_CONSISTENT | MD_FLAG_WAS_UPTODATE;
  if (u->gu_flags & GU_FLAG_CRASHED_PRIMARY)
    sb->ms_flags |= MD_FLAG_CRASHED_PRIMARY;
  if (u->gu_flags & GU_FLAG_TENTATIVE)
    sb->ms_flags |= MD_FLAG_TENTATIVE;
}

/* Change peer p's view with fn and write it.  Returns 0 or -1. */
static int
update_view (struct repl_node *node, const struct peer *p,
             void (*fn) (struct gen_uuids *u, const void *arg),
             const void *arg)
{
  struct gen_uuids u;
  struct md_super sb;
  int r;

  pthread_mutex_lock (&node->n_md_io_lock);
  view_locked (node, p, &u);
  fn (&u, arg);
  sb = node->n_md.md_super;
  apply_view (&sb, p, &u);
  r = meta_write_super_locked (node, &sb);
  pthread_mutex_unlock (&node->n_md_io_lock);
  return r;
}

void
gen_to_wire (const struct gen_uuids *u, struct repl_uuids *w)
{
  w->current = u->gu_current;
  w->bitmap = u->gu_bitmap;
  w->history[0] = u->gu_history[0];
  w->history[1] = u->gu_history[1];
  w->flags = u->gu_flags;
}

static void
gen_from_wire (const struct repl_uuids *w, struct gen_uuids *u)
{
  u->gu_current = w->current;
  u->gu_bitmap = w->bitmap;
  u->gu_history[0] = w->history[0];
  u->gu_history[1] = w->history[1];
  u->gu_flags = w->flags;
}

/* Decide what happens on connection conn, whose peer sent conn->c_hello: the
 * facts gathered here, the rules in common/decide.c, the actions (the
 * split-brain handler, once per episode; invalidating this node when a
 * policy makes it the loser) here.  Returns the decision (never
 * TIEBREAK: resolved by node id), or -1 with the reason in err if the
 * connection must be refused. */
int
gen_decide (struct repl_node *node, struct conn *conn, int *rulep, char *err,
            size_t errlen)
{
  struct peer *p = conn->c_peer;
  const struct repl_hello *h = &conn->c_hello;
  struct gen_uuids local = conn->c_hello_uuids, peer;
  struct connect_case c = {
    .cc_our_id = node->n_self->nc_id, .cc_peer_id = p->pr_cfg->nc_id,
    .cc_we_primary = node_role (node) == REPL_ROLE_PRIMARY,
    .cc_peer_primary = h->role == REPL_ROLE_PRIMARY,
    .cc_peer_changes = h->uuids.changes,
    .cc_peer_primary_since = h->primary_since,
    .cc_after_sb_0pri = node->n_cfg.cf_after_sb_0pri,
    .cc_after_sb_1pri = node->n_cfg.cf_after_sb_1pri,
  };
  struct connect_decision cd;
  char why[256];

  gen_from_wire (&h->uuids, &peer);
  if (uuid_check (&peer, why, sizeof why) == -1) {
    snprintf (err, errlen, "refusing connection: bad generation UUIDs in "
              "hello: %s", why);
    return -1;
  }
  /* Ours as our hello gave them: the peer decides on the same. */
  pthread_mutex_lock (&p->pr_lock);
  c.cc_our_changes = bitmap_count (&p->pr_bitmap);
  pthread_mutex_unlock (&p->pr_lock);
  pthread_mutex_lock (&node->n_md_io_lock);
  c.cc_our_primary_since = node->n_md.md_super.ms_primary_since;
  pthread_mutex_unlock (&node->n_md_io_lock);

  decide_connect (&local, &peer, &c, &cd);
  *rulep = cd.cd_rule;

  if (cd.cd_decision == UUID_SPLIT_BRAIN) {
    bool first;

    pthread_mutex_lock (&p->pr_lock);
    first = !p->pr_split_brain;
    p->pr_split_brain = true;
    pthread_mutex_unlock (&p->pr_lock);
    if (first)
      events_connection (p, "split-brain:yes rule:%d", cd.cd_rule);
    if (first)
      handler_run (node, REPL_HANDLER_SPLIT_BRAIN, p);
    if (cd.cd_policy == REPL_SB_DISCARD_YOUNGER_PRIMARY)
      log_info ("peer %s: split brain: this node became Primary at %"
                PRIu64 " ms, the peer at %" PRIu64 " ms (since the epoch)",
                p->pr_cfg->nc_name, c.cc_our_primary_since,
                c.cc_peer_primary_since);
  }

  switch (cd.cd_verdict) {
  case CONNECT:
    /* Two UpToDate copies of the same storage Primary, in one
     * generation, where one still counts a bitmap for the other from an
     * older one (rules 34/35): the Primary's resync of each settled it.
     * No resync between them; sync_on_connect drops the marks and that
     * bitmap UUID (drop_marks_between_secondaries). */
    if ((cd.cd_rule == UUID_RULE_SAME_BITMAP_LOCAL ||
         cd.cd_rule == UUID_RULE_SAME_BITMAP_PEER) &&
        !c.cc_we_primary && !c.cc_peer_primary &&
        h->disk_state == REPL_DISK_UPTODATE &&
        !node_no_storage_primary (node)) {
      enum repl_disk_state ours;

      pthread_mutex_lock (&node->n_lock);
      ours = node->n_disk;
      pthread_mutex_unlock (&node->n_lock);
      if (ours == REPL_DISK_UPTODATE)
        return UUID_NO_SYNC;
    }
    /* Two secondaries resync each other only when neither follows a
     * storage Primary (peer-sync.c): with one, that Primary resyncs
     * whichever lacks data, and what one secondary marked for the other
     * is the Primary's to settle.  The other side may have no Primary,
     * though, and would wait for us as its source, or take our word
     * that it is behind: refused, by this side, so that it does
     * neither (both retry with backoff, and meet again once the Primary
     * has settled it). */
    if ((uuid_decision_is_source (cd.cd_decision) ||
         uuid_decision_is_target (cd.cd_decision)) &&
        !c.cc_we_primary && !c.cc_peer_primary &&
        !node_no_storage_primary (node)) {
      snprintf (err, errlen, "refusing connection: %s (rule %d: %s) "
                "between two Secondaries; while this node follows a "
                "Primary, the Primary resyncs whichever lacks data",
                uuid_decision_name (cd.cd_decision), cd.cd_rule,
                uuid_rule_name (cd.cd_rule));
      return -1;
    }
    return cd.cd_decision;
  case CONNECT_SPLIT_BRAIN_RESOLVED: {
    const char *policy = config_sb_policy_name (cd.cd_policy);
    bool we = cd.cd_loser == SB_WE_LOSE;
    uint64_t ours = c.cc_our_changes > UINT32_MAX ? UINT32_MAX
                                                  : c.cc_our_changes;
    uint64_t lost = (we ? ours : c.cc_peer_changes) *
                    (uint64_t) p->pr_bitmap.bm_granularity;

    log_error ("peer %s: split brain (rule %d; ours: current %016" PRIx64
               ", peer's: current %016" PRIx64 "; changes: ours %" PRIu64
               " chunks, peer's %" PRIu64 "): resolved by %s: %s "
               "discards its data (%" PRIu64 " bytes of changes)",
               p->pr_cfg->nc_name, cd.cd_rule, local.gu_current,
               peer.gu_current, ours, c.cc_peer_changes, policy,
               we ? "this node" : "the peer", lost);
    if (we && engine_invalidate (node, why, sizeof why) == -1)
      log_error ("split brain: cannot discard our data: %s", why);
    snprintf (err, errlen, "refusing connection: split brain resolved by "
              "%s: %s discards its data; reconnecting for a full sync",
              policy, we ? "this node" : "the peer");
    return -1;
  }
  case CONNECT_REFUSE:
    snprintf (err, errlen, "refusing connection: %s (rule %d: %s); ours: "
              "current %016" PRIx64 " bitmap %016" PRIx64 ", peer's: "
              "current %016" PRIx64 " bitmap %016" PRIx64
              "%s", uuid_decision_name (cd.cd_decision), cd.cd_rule,
              uuid_rule_name (cd.cd_rule), local.gu_current,
              local.gu_bitmap, peer.gu_current, peer.gu_bitmap,
              cd.cd_decision == UUID_SPLIT_BRAIN
              ? "; both nodes changed the data while apart: resolve by "
                "hand (replctl connect --discard-my-data on the node whose "
                "changes are to go)" : "");
    return -1;
  case CONNECT_REFUSE_PRIMARY_BEHIND:
    snprintf (err, errlen, "refusing connection: the peer has data this "
              "primary lacks (%s, rule %d: %s); refusing to overwrite the "
              "primary's disk", uuid_decision_name (cd.cd_decision),
              cd.cd_rule, uuid_rule_name (cd.cd_rule));
    return -1;
  case CONNECT_REFUSE_PEER_PRIMARY_BEHIND:
    snprintf (err, errlen, "refusing connection: this node has data the "
              "primary lacks (%s, rule %d: %s); refusing to be "
              "overwritten by the primary", uuid_decision_name (cd.cd_decision),
              cd.cd_rule, uuid_rule_name (cd.cd_rule));
    return -1;
  }
  abort ();
}

static void
do_full_sync_start_source (struct gen_uuids *u, const void *arg)
{
  uuid_full_sync_start_source (u, arg);
}

static void
do_resync_start_target (struct gen_uuids *u, const void *arg)
{
  uuid_resync_start_target (u, arg);
}

static void
do_resync_finished_target (struct gen_uuids *u, const void *arg)
{
  uuid_resync_finished_target (u, arg);
}

static void
do_resync_finished_source (struct gen_uuids *u, const void *arg)
{
  (void) arg;
  uuid_resync_finished_source (u);
}

static void
do_adopt_current (struct gen_uuids *u, const void *arg)
{
  const struct gen_uuids *primary = arg;

  if (u->gu_current != primary->gu_current)
    uuid_adopt_current (u, primary->gu_current);
  u->gu_flags = (u->gu_flags & ~GU_FLAG_TENTATIVE) |
                (primary->gu_flags & GU_FLAG_TENTATIVE);
}

int
gen_full_sync_start_source (struct repl_node *node, struct peer *p,
                            const struct gen_uuids *target)
{
  return update_view (node, p, do_full_sync_start_source, target);
}

int
gen_resync_start_target (struct repl_node *node, struct peer *p,
                         const struct gen_uuids *source)
{
  return update_view (node, p, do_resync_start_target, source);
}

int
gen_resync_finished_target (struct repl_node *node, struct peer *p,
                            const struct gen_uuids *source)
{
  return update_view (node, p, do_resync_finished_target, source);
}

int
gen_resync_finished_source (struct repl_node *node, struct peer *p)
{
  return update_view (node, p, do_resync_finished_source, NULL);
}

static void
do_clear_bitmap (struct gen_uuids *u, const void *arg)
{
  (void) arg;
  uuid_clear_bitmap (u);
}

/* No bitmap counts for p any more (its marks were dropped): its bitmap
 * UUID goes into the history.  Returns 0, or -1 if the metadata cannot
 * be written. */
int
gen_clear_bitmap (struct repl_node *node, struct peer *p)
{
  struct gen_uuids u;

  gen_view (node, p, &u);
  if (u.gu_bitmap == 0)
    return 0;
  return update_view (node, p, do_clear_bitmap, NULL);
}

int
gen_adopt_current (struct repl_node *node, struct peer *p,
                   const struct gen_uuids *primary)
{
  struct gen_uuids u;

  gen_view (node, p, &u);
  if (u.gu_current == primary->gu_current &&
      (u.gu_flags & GU_FLAG_TENTATIVE) ==
      (primary->gu_flags & GU_FLAG_TENTATIVE))
    return 0;
  return update_view (node, p, do_adopt_current, primary);
}

/* role=primary on a node whose disk is not Consistent: its data is
 * declared authoritative (DRBD's primary --force).  A new current UUID;
 * no bitmap counts from the old, whole generation-less data. */
int
gen_force_primary (struct repl_node *node)
{
  struct md_super sb;
  struct gen_uuids u;
  uint64_t fresh;
  size_t i;
  int r;

  if (uuid_generate (&fresh) == -1) {
    log_error ("getrandom: %m");
    return -1;
  }
  pthread_mutex_lock (&node->n_md_io_lock);
  sb = node->n_md.md_super;
  memset (&u, 0, sizeof u);
  u.gu_current = sb.ms_current_uuid;
  u.gu_history[0] = sb.ms_history_uuid[0];
  u.gu_history[1] = sb.ms_history_uuid[1];
  if (sb.ms_flags & MD_FLAG_CONSISTENT)
    u.gu_flags |= GU_FLAG_CONSISTENT;
  uuid_force_primary (&u, fresh);
  sb.ms_current_uuid = u.gu_current;
  sb.ms_history_uuid[0] = u.gu_history[0];
  sb.ms_history_uuid[1] = u.gu_history[1];
  for (i = 0; i < sb.ms_geom.mg_npeers; i++)
    sb.ms_peers[i].mp_bitmap_uuid = 0;
  sb.ms_flags |= MD_FLAG_CONSISTENT | MD_FLAG_WAS_UPTODATE;
  sb.ms_flags &= ~MD_FLAG_TENTATIVE;
  r = meta_write_super_locked (node, &sb);
  pthread_mutex_unlock (&node->n_md_io_lock);
  if (r == 0)
    log_info ("node %s: new current UUID %016" PRIx64, node->n_self->nc_name,
              fresh);
  return r;
}

/* Before the first write a peer that is away will miss: if that peer's
 * bitmap does not count from an older generation already, start a new
 * current UUID, let every away peer's bitmap count from the old one, and
 * tell the connected peers.  Lazy, as DRBD does it (at the first write,
 * not when the peer goes): a primary that loses its peer and writes
 * nothing has not changed the data, and must not look like half of a
 * split brain.  The write path calls this while n_gen_pending is set
 * (a peer was lost, or the node became primary with peers away).
 * Writes that were in flight when the peer went are in the bitmap and
 * in the activity log; a reconnect in the same generation resyncs what
 * the bitmap holds (peer-sync.c). */
static void start_generation (struct repl_node *node, bool tentative);

void
gen_before_write (struct repl_node *node)
{
  start_generation (node, true);
}

/* allow-two-primaries: the connection to the other Primary was lost
 * while this node is Primary too.  A write of ours in flight then may
 * have been answered without the peer (quorum off), and the peer's may
 * be on its disk only: both sides hold data the other lacks, whether or
 * not either writes again.  So each starts a new generation at once,
 * not at its next write, and not tentative (it may already hold an
 * answered write): when they meet again the generations are a split
 * brain, which the split-brain policies or the operator resolve, never
 * a resync that silently overwrites the writes of one side.  Without
 * quorum nothing starts (gen_before_write's rule): the writes in flight
 * failed. */
void
gen_two_primaries_lost (struct repl_node *node)
{
  atomic_store (&node->n_gen_pending, true);
  start_generation (node, false);
}

static void
start_generation (struct repl_node *node, bool tentative)
{
  struct md_super sb;
  struct gen_uuids u;
  uint64_t old, fresh;
  struct peer *first = NULL;
  bool away[REPL_MAX_NODES];
  size_t i;
  int r;

  /* Taken before looking, so a peer lost meanwhile sets it again. */
  if (!atomic_exchange (&node->n_gen_pending, false))
    return;
  /* Without quorum this write fails anyway (role_complete_write): a
   * Primary that lost its peers (cut off, or frozen while the others
   * promoted a new one) must not start a generation of its own, which
   * would look like half of a split brain when it comes back.  Its
   * failed write is in the away peers' bitmaps, and resynced back. */
  if (!node_has_quorum (node)) {
    atomic_store (&node->n_gen_pending, true);
    return;
  }
  for (i = 0; i < PEERS (node)->pl_n; i++) {
    struct peer *q = PEERS (node)->pl_peers[i];
    /* A diskless peer holds no data: it misses nothing. */
    pthread_mutex_lock (&q->pr_lock);
    away[i] = !q->pr_cfg->nc_diskless && q->pr_state != CONN_CONNECTED;
    pthread_mutex_unlock (&q->pr_lock);
  }

  pthread_mutex_lock (&node->n_md_io_lock);
  sb = node->n_md.md_super;
  for (i = 0; i < PEERS (node)->pl_n && first == NULL; i++)
    if (away[i] && sb.ms_peers[PEERS (node)->pl_peers[i]->pr_md_slot].mp_bitmap_uuid == 0)
      first = PEERS (node)->pl_peers[i];
  if (first == NULL) {
    pthread_mutex_unlock (&node->n_md_io_lock);
    return;
  }
  if (uuid_generate (&fresh) == -1) {
    pthread_mutex_unlock (&node->n_md_io_lock);
    atomic_store (&node->n_gen_pending, true);
    log_error ("getrandom: %m");
    return;
  }
  view_locked (node, first, &u);
  old = u.gu_current;
  uuid_new_current (&u, fresh);
  /* Until one of its writes completes (gen_commit). */
  if (tentative)
    u.gu_flags |= GU_FLAG_TENTATIVE;
  apply_view (&sb, first, &u);
  for (i = 0; i < PEERS (node)->pl_n; i++) {
    struct peer *q = PEERS (node)->pl_peers[i];

    if (q != first && away[i] &&
        sb.ms_peers[q->pr_md_slot].mp_bitmap_uuid == 0 &&
        old != UUID_JUST_CREATED && old != 0)
      sb.ms_peers[q->pr_md_slot].mp_bitmap_uuid = old;
  }
  {
    struct md_super before = node->n_md.md_super;

    r = meta_write_super_locked (node, &sb);
    if (r == 0 && tentative) {
      node->n_gen_before = before;
      atomic_store (&node->n_gen_started, fresh);
      atomic_store (&node->n_gen_unacked, true);
    }
  }
  pthread_mutex_unlock (&node->n_md_io_lock);
  if (r == -1) {
    atomic_store (&node->n_gen_pending, true);
    return;
  }
  log_info ("node %s: %s peer %s away: new current UUID %016"
            PRIx64 " (its bitmap counts from %016" PRIx64 ")",
            node->n_self->nc_name, tentative ? "first write with"
            : "lost the other Primary (allow-two-primaries),",
            first->pr_cfg->nc_name, fresh, old);
  for (i = 0; i < PEERS (node)->pl_n; i++)
    if (!away[i])
      sync_send_uuids (PEERS (node)->pl_peers[i]);
}

/* The Primary lost quorum before any write of the generation that
 * gen_before_write started was acknowledged: that generation holds no
 * data anybody was promised, only the failed writes (marked for the
 * peers, and resynced over by whoever has the data).  It is withdrawn:
 * the generation UUIDs go back to what they were, so that this node,
 * when it comes back, is behind the others (or in their generation),
 * never the other half of a split brain with a node promoted meanwhile
 * from the same parent (its quorum was counted from a peer heard a
 * moment before it was cut off too).  The next write with quorum starts
 * a generation again.  A secondary that took the withdrawn generation
 * already keeps it, flagged tentative (GU_FLAG_TENTATIVE): against the
 * next generation from the same parent it gives way, with a full resync
 * (uuid-compare.h, rows 85/86), instead of being the other half of a
 * split brain.  Called when quorum is lost (role.c). */
void
gen_withdraw (struct repl_node *node)
{
  struct md_super sb;
  uint64_t fresh;
  unsigned i;
  int r;

  if (!atomic_exchange (&node->n_gen_unacked, false))
    return;
  pthread_mutex_lock (&node->n_md_io_lock);
  sb = node->n_md.md_super;
  fresh = sb.ms_current_uuid;
  sb.ms_current_uuid = node->n_gen_before.ms_current_uuid;
  for (i = 0; i < MD_UUID_HISTORY; i++)
    sb.ms_history_uuid[i] = node->n_gen_before.ms_history_uuid[i];
  sb.ms_flags = (sb.ms_flags & ~MD_FLAG_TENTATIVE) |
                (node->n_gen_before.ms_flags & MD_FLAG_TENTATIVE);
  /* The bitmap UUIDs the generation gave the away peers (the bits stay:
   * they are the failed writes). */
  for (i = 0; i < sb.ms_geom.mg_npeers; i++)
    if (node->n_gen_before.ms_peers[i].mp_bitmap_uuid == 0 &&
        sb.ms_peers[i].mp_bitmap_uuid == sb.ms_current_uuid)
      sb.ms_peers[i].mp_bitmap_uuid = 0;
  r = meta_write_super_locked (node, &sb);
  pthread_mutex_unlock (&node->n_md_io_lock);
  if (r == -1) {
    log_error ("node %s: cannot write the metadata to withdraw generation "
               "%016" PRIx64, node->n_self->nc_name, fresh);
    return;
  }
  atomic_store (&node->n_gen_pending, true);
  log_info ("node %s: quorum lost before any write of generation %016"
            PRIx64 " was acknowledged: withdrawn, back to %016" PRIx64,
            node->n_self->nc_name, fresh, sb.ms_current_uuid);
}

/* A write of the generation that gen_before_write started completed
 * (role_complete_write): the generation is no longer tentative.  The
 * flag is cleared on disk, and the caller tells the connected peers
 * (UUIDS), whose copy of the generation then is not tentative either.
 * A generation started after that write was sent keeps its flag: only
 * the generation this node started last, still current, is cleared.
 * Called by the worker.  Returns 1 if the flag was cleared, 0 if there
 * was nothing to clear, -1 if the metadata cannot be written. */
int
gen_commit (struct repl_node *node)
{
  struct md_super sb;
  uint64_t started = atomic_load (&node->n_gen_started);
  int r;

  if (atomic_load (&node->n_gen_unacked))
    return 0;                   /* a newer one, not yet written to */
  pthread_mutex_lock (&node->n_md_io_lock);
  sb = node->n_md.md_super;
  if (!(sb.ms_flags & MD_FLAG_TENTATIVE) || sb.ms_current_uuid != started) {
    pthread_mutex_unlock (&node->n_md_io_lock);
    return 0;
  }
  sb.ms_flags &= ~MD_FLAG_TENTATIVE;
  r = meta_write_super_locked (node, &sb);
  pthread_mutex_unlock (&node->n_md_io_lock);
  if (r == -1) {
    log_error ("node %s: cannot write the metadata to commit generation "
               "%016" PRIx64, node->n_self->nc_name, started);
    return -1;
  }
  log_info ("node %s: generation %016" PRIx64 " holds an acknowledged "
            "write: no longer tentative", node->n_self->nc_name, started);
  return 1;
}

/* A storage node whose primary is diskless: that primary starts the new
 * generation at its first write with nodes away (diskless.c) and sends
 * the same fresh UUID, with the mask of the away node ids, to every
 * storage node it writes to (AWAY), so that all of them move to it
 * together, as gen_before_write moves a primary with a disk.  A UUID
 * that is already current or in the history is an old announcement:
 * nothing to do.  Returns 0, or -1 if the metadata cannot be written. */
static bool
real_uuid (uint64_t v)
{
  return v != 0 && v != UUID_JUST_CREATED;
}

int
gen_start_for_away (struct repl_node *node, uint32_t away, uint64_t fresh)
{
  struct md_super sb;
  struct gen_uuids u;
  struct peer *first = NULL;
  uint64_t old;
  size_t i;
  int r;

  if (!real_uuid (fresh))
    return 0;
  pthread_mutex_lock (&node->n_md_io_lock);
  sb = node->n_md.md_super;
  if (sb.ms_current_uuid == fresh || sb.ms_history_uuid[0] == fresh ||
      sb.ms_history_uuid[1] == fresh) {
    pthread_mutex_unlock (&node->n_md_io_lock);
    return 0;
  }
  for (i = 0; i < PEERS (node)->pl_n && first == NULL; i++) {
    struct peer *q = PEERS (node)->pl_peers[i];
    if (!q->pr_cfg->nc_diskless && (away & (UINT32_C (1) << q->pr_cfg->nc_id)))
      first = q;
  }
  old = sb.ms_current_uuid;
  if (first != NULL) {
    view_locked (node, first, &u);
    uuid_new_current (&u, fresh);
    u.gu_flags &= ~GU_FLAG_TENTATIVE;
    apply_view (&sb, first, &u);
    for (i = 0; i < PEERS (node)->pl_n; i++) {
      struct peer *q = PEERS (node)->pl_peers[i];

      if (q != first && !q->pr_cfg->nc_diskless &&
          (away & (UINT32_C (1) << q->pr_cfg->nc_id)) &&
          sb.ms_peers[q->pr_md_slot].mp_bitmap_uuid == 0 &&
          real_uuid (old))
        sb.ms_peers[q->pr_md_slot].mp_bitmap_uuid = old;
    }
  }
  else {
    sb.ms_current_uuid = fresh;
    sb.ms_flags &= ~MD_FLAG_TENTATIVE;
    if (real_uuid (old)) {
      sb.ms_history_uuid[1] = sb.ms_history_uuid[0];
      sb.ms_history_uuid[0] = old;
    }
  }
  r = meta_write_super_locked (node, &sb);
  pthread_mutex_unlock (&node->n_md_io_lock);
  if (r == 0)
    log_info ("node %s: the diskless primary started a new generation "
              "with nodes away (mask 0x%" PRIx32 "): current UUID %016"
              PRIx64 " (was %016" PRIx64 ")", node->n_self->nc_name, away,
              fresh, old);
  return r;
}

/* `replctl invalidate` on a secondary: its data is to be discarded and
 * fully resynced.  The metadata is made "just created" (no generation,
 * no history, not Consistent: a new node's) and the connections are
 * dropped; at the reconnect the decision is a full sync from the
 * primary (rule 20). */
int
engine_invalidate (struct repl_node *node, char *err, size_t errlen)
{
  struct md_super sb;
  size_t i;
  int r;

  if (node_role (node) == REPL_ROLE_PRIMARY) {
    snprintf (err, errlen, "node %s is Primary: its data is what clients "
              "see; invalidate a secondary instead", node->n_self->nc_name);
    return -1;
  }
  pthread_mutex_lock (&node->n_md_io_lock);
  sb = node->n_md.md_super;
  sb.ms_current_uuid = UUID_JUST_CREATED;
  sb.ms_history_uuid[0] = sb.ms_history_uuid[1] = 0;
  sb.ms_flags &= ~(MD_FLAG_CONSISTENT | MD_FLAG_WAS_UPTODATE);
  for (i = 0; i < sb.ms_geom.mg_npeers; i++)
    sb.ms_peers[i].mp_bitmap_uuid = 0;
  r = meta_write_super_locked (node, &sb);
  pthread_mutex_unlock (&node->n_md_io_lock);
  if (r == -1) {
    snprintf (err, errlen, "cannot write the metadata");
    return -1;
  }
  node_set_disk (node, REPL_DISK_INCONSISTENT);
  log_info ("node %s: invalidated: its data will be replaced by a full "
            "sync from the primary", node->n_self->nc_name);
  for (i = 0; i < PEERS (node)->pl_n; i++) {
    struct peer *p = PEERS (node)->pl_peers[i];

    pthread_mutex_lock (&p->pr_lock);
    bitmap_set_all (&p->pr_bitmap);
    peer_fail_current_locked (p, "invalidated; reconnecting for a full sync");
    pthread_mutex_unlock (&p->pr_lock);
  }
  return 0;
}
