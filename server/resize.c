/* nbdrepl: online grow — `replctl resize`, and a peer's larger size.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * DRBD's way: grow the backing device of every node, then run `replctl
 * resize` on one node; the volume grows while in use, and the new area
 * is resynced (or, with --assume-clean, taken as identical already).
 *
 * WHO RUNS IT.  The Primary; with no storage Primary anywhere we know of
 * (none, or a diskless one), any UpToDate storage node.  That node is
 * the new area's sync source.  It
 * refuses while a connected peer is not Established (a resync or verify
 * is running: wait for it), on a diskless node (no disk to grow), and
 * with `meta: internal` (the metadata sits at the end of the device and
 * would have to move: this release grows external metadata only; stop
 * the node and recreate its metadata to grow such a device).
 *
 * HOW THE NODES AGREE.  Three messages (wire.h):
 *
 *   1. RESIZE_QUERY to every connected storage peer; each answers
 *      RESIZE_REPLY with the largest size its backing store holds now
 *      (ERROR if it cannot grow at all).  The new size is the smallest
 *      of those and our own (rounded down to 512 bytes), or the --size
 *      asked for if every node can hold it.  Nothing has changed yet: a
 *      node whose device was not grown, or that does not answer within
 *      RESIZE_ANSWER_NS, makes the resize fail with its name.  Shrinking
 *      is refused, with the sizes.
 *   2. We grow ourselves (resize_local, below): the metadata first (the
 *      crash-safe commit, md_grow), then the bitmaps and the activity
 *      log in memory.  Every peer's bitmap gets the new area marked
 *      (unless --assume-clean), also for peers that are away.  Clients
 *      still see the old size.
 *   3. RESIZE, sequenced, to each peer of step 1: it travels between the
 *      writes, so that a peer has grown before any write to the new
 *      area can reach it.  The peer checks that it grows from its own
 *      size, grows the same way (marking the new area for the peers it
 *      has away, as it marks writes for them), and only then
 *      acknowledges.  A peer that fails here ends the connection, with
 *      the reason in its log; it refuses the next one until its backing
 *      store is large enough.
 *   Then the new size is published (new NBD connections see it: nbdkit
 *   fixes the size per connection), the resync of the new area starts
 *   towards the peers that grew, and any other connected peer (one that
 *   connected while this ran, at the old size) is disconnected so that
 *   it learns the size at its next handshake.
 *
 * A NODE THAT WAS AWAY learns the size at its return: the HELLO_STATEs
 * carry both sizes, and with two sizes both sides refuse the connection
 * (no connection ever runs with two sizes); the smaller node grows to
 * the larger size first (resize_check_hello), so that its next
 * connection, a moment later, has equal sizes; or, if its backing store
 * is too small (or its metadata internal), its refusal says so with
 * both sizes, and it keeps refusing until its disk is grown.  It marks
 * nothing: the nodes that grew marked the new area for it, and
 * the Primary (or an UpToDate secondary, by the same rules as for
 * writes) resyncs it.  Until then its new area holds whatever the
 * device held.  A node that restarts with a backing store larger than
 * its metadata's size keeps the metadata's size (meta.c): only resize
 * changes it.
 *
 * CRASH SAFETY is md_grow's (common/metadata.h): a crash before the
 * superblock with the new size is durable leaves the old size and the
 * old bitmaps; after, the new ones.  A node that crashes between its
 * commit and its acknowledgement restarts at the new size; the
 * initiator, whose RESIZE went unacknowledged, finds it grown at the
 * next handshake (sizes equal).  The test hook NBDREPL_TEST_RESIZE_CRASH
 * (=before-commit or =after-commit) kills the process at those two
 * points, for tests/test-resize-crash.sh.
 *
 * DISKLESS NODES get no RESIZE (they have no disk): every storage node
 * that grows ends its connection to them, and they take the larger
 * size at their next handshake once no storage node at the old size is
 * connected (diskless.c).  A diskless Primary's writes wait for the
 * reconnection as after a storage node's restart.
 *
 * Races: a connection whose handshake ran while we grew may end up at
 * the old size on the peer; the sweep at the end drops it, and if it
 * still slips by, the peer's range check refuses our first message
 * beyond its end, which ends the connection the same way: a reconnect,
 * never a write applied out of range.
 *
 * Locks: n_resize_lock serialises resize_local (local metadata and
 * memory, no network); n_resizing (under n_lock) says a `replctl
 * resize` runs, across its network waits, without a lock held.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "byte-order.h"
#include "internal.h"
#include "log.h"

/* How long a peer has to answer a RESIZE_QUERY; the whole command must
 * end before replctl gives up waiting (10 s). */
#define RESIZE_ANSWER_NS (UINT64_C (4) * 1000 * 1000 * 1000)

/* The test hook: kill this process at a point of the growth. */
static void
test_crash (const char *point)
{
  const char *want = getenv ("NBDREPL_TEST_RESIZE_CRASH");

  if (want != NULL && strcmp (want, point) == 0) {
    log_error ("NBDREPL_TEST_RESIZE_CRASH=%s: killing the process", point);
    kill (getpid (), SIGKILL);
  }
}

/* The largest volume this node can hold now.  Returns 0, or -1 with the
 * reason in err. */
static int
resize_capacity (struct repl_node *node, uint64_t *cap, char *err,
                 size_t errlen)
{
  if (node->n_diskless) {
    snprintf (err, errlen, "this node is diskless: no disk to grow");
    return -1;
  }
  if (node->n_self->nc_meta_internal) {
    snprintf (err, errlen, "disk %s has its metadata at its end (meta: "
              "internal), which would have to move: only external "
              "metadata grows online", node->n_vol.vol_path);
    return -1;
  }
  if (volume_capacity (&node->n_vol, cap) == -1) {
    snprintf (err, errlen, "disk %s: size: %s", node->n_vol.vol_path,
              strerror (errno));
    return -1;
  }
  *cap &= ~(uint64_t) 511;
  if (*cap > MD_MAX_SIZE)
    *cap = MD_MAX_SIZE;
  return 0;
}

/* Grow this node to size: metadata (the commit), then memory; publish
 * the size to clients too if `publish`.  mark_ids: the node ids whose
 * bitmaps get the new area marked.  Nothing to do if already grown.
 * Returns 0, or -1 with the reason in err (nothing changed). */
static int
resize_local (struct repl_node *node, uint64_t size, uint32_t mark_ids,
              bool publish, char *err, size_t errlen)
{
  struct bitmap grown[REPL_MAX_NODES + 1];     /* the peers', scratch */
  uint64_t cap, old;
  uint32_t mark_slots = 0, gran;
  char why[256];
  size_t i, n = 0;
  int r = -1;

  pthread_mutex_lock (&node->n_resize_lock);
  pthread_mutex_lock (&node->n_md_io_lock);     /* md_super's lock */
  old = node->n_md.md_super.ms_geom.mg_size;
  gran = node->n_md.md_super.ms_geom.mg_granularity;
  pthread_mutex_unlock (&node->n_md_io_lock);
  if (size == old)
    goto publish;                               /* grown already */
  if (size < old) {
    snprintf (err, errlen, "shrinking is not supported (%" PRIu64
              " bytes asked, the volume has %" PRIu64 ")", size, old);
    goto out;
  }
  if (resize_capacity (node, &cap, err, errlen) == -1)
    goto out;
  if (size > cap) {
    snprintf (err, errlen, "disk %s holds %" PRIu64 " bytes, not %" PRIu64
              " (grow it first)", node->n_vol.vol_path, cap, size);
    goto out;
  }
  /* Everything that can fail before the commit. */
  for (n = 0; n <= PEERS (node)->pl_n; n++)
    if (bitmap_init (&grown[n], size, gran) == -1) {
      snprintf (err, errlen, "bitmap: %s", strerror (errno));
      goto out;
    }
  pthread_mutex_lock (&node->n_al_lock);
  i = al_grow (&node->n_al, size);      /* harmless before the commit */
  pthread_mutex_unlock (&node->n_al_lock);
  if (i != 0) {
    snprintf (err, errlen, "activity log: %" PRIu64 " bytes is too large "
              "for its extents", size);
    goto out;
  }

  pthread_mutex_lock (&node->n_md_io_lock);
  for (i = 0; i < PEERS (node)->pl_n; i++)
    if (mark_ids & (UINT32_C (1) << PEERS (node)->pl_peers[i]->pr_cfg->nc_id))
      mark_slots |= UINT32_C (1) << PEERS (node)->pl_peers[i]->pr_md_slot;
  test_crash ("before-commit");
  if (md_grow (&node->n_md, size, mark_slots, why, sizeof why) == -1) {
    pthread_mutex_unlock (&node->n_md_io_lock);
    snprintf (err, errlen, "metadata %s: %s", node->n_md_path, why);
    goto out;
  }
  test_crash ("after-commit");
  /* Committed: nothing below can fail.  The scratch bitmap follows the
   * metadata's size (md_write_bitmap checks it); so do the peers'. */
  bitmap_free (&node->n_md_scratch);
  node->n_md_scratch = grown[PEERS (node)->pl_n];
  for (i = 0; i < PEERS (node)->pl_n; i++) {
    struct peer *p = PEERS (node)->pl_peers[i];
    struct bitmap *b = &grown[i];

    pthread_mutex_lock (&p->pr_lock);
    memcpy (b->bm_words, p->pr_bitmap.bm_words,
            (p->pr_bitmap.bm_nbits + 63) / 64 * sizeof (uint64_t));
    /* Only what changes: the granularity is read without the lock. */
    free (p->pr_bitmap.bm_words);
    p->pr_bitmap.bm_words = b->bm_words;
    p->pr_bitmap.bm_nbits = b->bm_nbits;
    p->pr_bitmap.bm_size = b->bm_size;
    if (mark_ids & (UINT32_C (1) << p->pr_cfg->nc_id))
      bitmap_set_range (&p->pr_bitmap, old, size - old);
    pthread_mutex_unlock (&p->pr_lock);
  }
  n = 0;                        /* all of grown[] is in use now */
  pthread_mutex_unlock (&node->n_md_io_lock);
  log_info ("metadata %s: the volume grew from %" PRIu64 " to %" PRIu64
            " bytes", node->n_md_path, old, size);
  events_device (node, "size:%" PRIu64, size);

 publish:
  if (publish) {
    pthread_mutex_lock (&node->n_lock);
    __atomic_store_n (&node->n_vol.vol_size, size, __ATOMIC_RELEASE);
    pthread_mutex_unlock (&node->n_lock);
  }
  r = 0;
 out:
  while (n > 0)
    bitmap_free (&grown[--n]);
  pthread_mutex_unlock (&node->n_resize_lock);
  return r;
}

/* A peer's HELLO_STATE says its volume is h_size bytes (peer.c
 * check_hello, storage nodes only).  Equal: fine.  Otherwise both sides
 * refuse this connection, so that no connection ever runs with two
 * sizes; the smaller side grows to the larger size first if its disk
 * allows (a resize it missed), and the next connection has equal sizes.
 * Returns 0, or -1 with the reason in err. */
int
resize_check_hello (struct conn *c, uint64_t h_size, char *err,
                    size_t errlen)
{
  struct peer *p = c->c_peer;
  struct repl_node *node = p->pr_node;
  uint64_t ours = volume_size (&node->n_vol);
  char why[400];

  if (h_size == ours) {
    pthread_mutex_lock (&p->pr_lock);
    c->c_size = ours;
    pthread_mutex_unlock (&p->pr_lock);
    return 0;
  }
  if (h_size < ours) {
    snprintf (err, errlen, "refusing connection: peer's disk is %" PRIu64
              " bytes, ours (%s) is %" PRIu64 " bytes; disks must be the "
              "same size (the peer grows to ours if its disk is large "
              "enough: a resize it missed)", h_size, node->n_vol.vol_path,
              ours);
    return -1;
  }
  if (resize_local (node, h_size, 0, true, why, sizeof why) == -1) {
    snprintf (err, errlen, "refusing connection: peer's disk is %" PRIu64
              " bytes, ours (%s) is %" PRIu64 " bytes; disks must be the "
              "same size, and ours cannot grow: %s", h_size,
              node->n_vol.vol_path, ours, why);
    return -1;
  }
  log_info ("peer %s: our volume grew from %" PRIu64 " to %" PRIu64
            " bytes, as the peer has it (a resize ran while this node was "
            "away); the new area comes by resync", p->pr_cfg->nc_name,
            ours, h_size);
  snprintf (err, errlen, "refusing connection: peer's disk is %" PRIu64
            " bytes, ours (%s) was %" PRIu64 " bytes; disks must be the "
            "same size: ours grew to it, the next connection has equal "
            "sizes", h_size, node->n_vol.vol_path, ours);
  return -1;
}

/* Connected diskless peers learn the new size at their next handshake
 * (diskless.c): end their connections, once we have grown. */
static void
drop_diskless (struct repl_node *node, uint64_t size)
{
  size_t i;

  for (i = 0; i < PEERS (node)->pl_n; i++) {
    struct peer *q = PEERS (node)->pl_peers[i];
    struct conn *qc;

    pthread_mutex_lock (&q->pr_lock);
    qc = peer_conn_locked (q);
    if (qc != NULL && !qc->c_failed && qc->c_peer_diskless &&
        qc->c_size != size)
      conn_fail_locked (qc, "the volume grew to %" PRIu64 " bytes: "
                        "reconnecting, so that the diskless node learns it",
                        size);
    pthread_mutex_unlock (&q->pr_lock);
  }
}

/* The node ids of our peers that are not connected: a write we applied
 * now would be marked for them, and so is the new area. */
static uint32_t
away_ids (struct repl_node *node, const struct peer *except)
{
  uint32_t ids = 0;
  size_t i;

  for (i = 0; i < PEERS (node)->pl_n; i++) {
    struct peer *q = PEERS (node)->pl_peers[i];

    if (q == except || q->pr_cfg->nc_diskless)
      continue;
    pthread_mutex_lock (&q->pr_lock);
    if (q->pr_state != CONN_CONNECTED)
      ids |= UINT32_C (1) << q->pr_cfg->nc_id;
    pthread_mutex_unlock (&q->pr_lock);
  }
  return ids;
}

/* RESIZE (sequenced; the receive loop checked the header, the state
 * and the sequence number): grow, then the caller acknowledges.
 * Returns 0, or -1 (the connection failed: reported). */
int
resize_handle (struct conn *c, const struct rx_msg *m)
{
  const struct repl_hdr *h = m->m_hdr;
  struct peer *p = c->c_peer;
  struct repl_node *node = p->pr_node;
  uint64_t from = get_be64 (m->m_payload), ours;
  uint32_t mark;
  char err[400];

  if (node->n_diskless || c->c_peer_diskless ||
      node_role (node) == REPL_ROLE_PRIMARY) {
    conn_fail (c, "protocol error: RESIZE %s", node->n_diskless
               ? "to a diskless node" : c->c_peer_diskless
               ? "from a diskless node" : "to the Primary (it runs the "
               "resize itself)");
    return -1;
  }
  ours = volume_size (&node->n_vol);
  if (h->offset == ours)
    return 0;                   /* grown already (at a handshake) */
  if (from != ours || h->offset < ours || h->offset > MD_MAX_SIZE) {
    conn_fail (c, "RESIZE from %" PRIu64 " to %" PRIu64 " bytes refused: "
               "our volume has %" PRIu64 " bytes%s", from, h->offset, ours,
               h->offset < ours ? " (shrinking is not supported)" : "");
    return -1;
  }
  mark = h->flags & REPL_FLAG_ASSUME_CLEAN ? 0 : away_ids (node, p);
  if (resize_local (node, h->offset, mark, true, err, sizeof err) == -1) {
    conn_fail (c, "RESIZE to %" PRIu64 " bytes refused: %s (the next "
               "connection is refused until this node can grow)",
               h->offset, err);
    return -1;
  }
  pthread_mutex_lock (&p->pr_lock);
  c->c_size = h->offset;
  pthread_mutex_unlock (&p->pr_lock);
  drop_diskless (node, h->offset);
  log_info ("peer %s: resize: the volume is %" PRIu64 " bytes now%s",
            p->pr_cfg->nc_name, h->offset,
            h->flags & REPL_FLAG_ASSUME_CLEAN ? " (new area assumed clean)"
                                              : "");
  return 0;
}

/* RESIZE_QUERY: answer how large we can be.  Returns 0 or -1. */
int
resize_handle_query (struct conn *c, const struct repl_hdr *h)
{
  struct repl_node *node = c->c_peer->pr_node;
  struct out_msg om;
  uint64_t cap;
  uint16_t flags = 0;
  char err[300];

  if (h->seq == 0) {
    conn_fail (c, "protocol error: RESIZE_QUERY with query number 0");
    return -1;
  }
  if (resize_capacity (node, &cap, err, sizeof err) == -1) {
    log_error ("peer %s asks to grow the volume: %s",
               c->c_peer->pr_cfg->nc_name, err);
    flags = REPL_FLAG_ERROR;
    cap = volume_size (&node->n_vol);
  }
  else if (h->offset != 0 && cap < h->offset)
    log_error ("peer %s asks to grow the volume to %" PRIu64 " bytes: "
               "disk %s holds only %" PRIu64 " (grow it first)",
               c->c_peer->pr_cfg->nc_name, h->offset, node->n_vol.vol_path,
               cap);
  out_msg_init (&om, REPL_MSG_RESIZE_REPLY, flags, 0, h->seq, cap, NULL, 0);
  return conn_send_wait (c, &om) == -1 ? -1 : 0;
}

/* RESIZE_REPLY: the answer to our query, if we asked it.  Returns 0 or
 * -1. */
int
resize_handle_reply (struct conn *c, const struct repl_hdr *h)
{
  struct peer *p = c->c_peer;

  pthread_mutex_lock (&p->pr_lock);
  if (h->seq == 0 || h->seq > p->pr_rsz_query) {
    conn_fail_locked (c, "protocol error: RESIZE_REPLY %" PRIu64
                      " answers no query", h->seq);
    pthread_mutex_unlock (&p->pr_lock);
    return -1;
  }
  if (h->seq == p->pr_rsz_query && !p->pr_rsz_answered) {
    p->pr_rsz_answered = true;
    p->pr_rsz_capacity = h->offset;
    p->pr_rsz_refused = (h->flags & REPL_FLAG_ERROR) != 0;
    pthread_cond_broadcast (&p->pr_cond);
  }
  /* else a late answer to a query that timed out: ignored */
  pthread_mutex_unlock (&p->pr_lock);
  return 0;
}

/* The peers `replctl resize` talks to: its connected storage peers. */
struct rsz_peer {
  struct peer *rp_peer;
  struct conn *rp_conn;         /* a reference */
  bool rp_grown;                /* it acknowledged the RESIZE */
};

/* Ask every peer in rp[0..n) how large it can be; *size becomes the
 * smallest answer (and ours).  Returns 0, or -1 with the reason. */
static int
query_peers (struct repl_node *node, struct rsz_peer *rp, size_t n,
             uint64_t want, uint64_t *size, char *err, size_t errlen)
{
  static _Atomic uint64_t next_query = 1;
  struct timespec deadline = deadline_after_ns (RESIZE_ANSWER_NS);
  size_t i;

  for (i = 0; i < n; i++) {
    struct peer *p = rp[i].rp_peer;
    struct out_msg om;
    uint64_t id = atomic_fetch_add (&next_query, 1);

    pthread_mutex_lock (&p->pr_lock);
    p->pr_rsz_query = id;
    p->pr_rsz_answered = false;
    pthread_mutex_unlock (&p->pr_lock);
    out_msg_init (&om, REPL_MSG_RESIZE_QUERY, 0, 0, id, want, NULL, 0);
    if (conn_send_wait (rp[i].rp_conn, &om) == -1) {
      snprintf (err, errlen, "peer %s: its connection failed",
                p->pr_cfg->nc_name);
      return -1;
    }
  }
  for (i = 0; i < n; i++) {
    struct peer *p = rp[i].rp_peer;
    struct conn *c = rp[i].rp_conn;
    bool answered, refused, failed;
    uint64_t cap;

    pthread_mutex_lock (&p->pr_lock);
    while (!p->pr_rsz_answered && !c->c_failed &&
           pthread_cond_timedwait (&p->pr_cond, &p->pr_lock,
                                   &deadline) == 0)
      ;
    answered = p->pr_rsz_answered;
    refused = p->pr_rsz_refused;
    cap = p->pr_rsz_capacity;
    failed = c->c_failed;
    pthread_mutex_unlock (&p->pr_lock);
    if (!answered) {
      snprintf (err, errlen, "peer %s did not answer%s", p->pr_cfg->nc_name,
                failed ? ": its connection failed (a release without "
                "resize ends it at the question)" : " in time");
      return -1;
    }
    if (refused) {
      snprintf (err, errlen, "peer %s cannot grow (its log says why)",
                p->pr_cfg->nc_name);
      return -1;
    }
    if (want != 0 && cap < want) {
      snprintf (err, errlen, "peer %s holds at most %" PRIu64 " bytes, not "
                "%" PRIu64 " (grow its disk first)", p->pr_cfg->nc_name,
                cap, want);
      return -1;
    }
    if (cap < *size)
      *size = cap;
  }
  return 0;
}

/* `replctl resize [--assume-clean] [--size BYTES]` (want 0: as large as
 * every node's backing store allows).  Returns 0 with a line for the
 * operator in out, or -1 with the reason in out. */
int
engine_resize (struct repl_node *node, bool assume_clean, uint64_t want,
               char *out, size_t outlen)
{
  struct rsz_peer rp[REPL_MAX_NODES];
  uint64_t old = volume_size (&node->n_vol), size, cap;
  enum repl_role role;
  enum repl_disk_state disk;
  char away[256] = "", unacked[256] = "", err[400];
  uint32_t mark;
  size_t i, n = 0, nresync = 0;
  int r = -1;

  if (resize_capacity (node, &cap, out, outlen) == -1 ||
      tp_refuse_beside_primary (node, "resize", out, outlen) == -1)
    return -1;
  pthread_mutex_lock (&node->n_lock);
  role = node->n_role;
  disk = node->n_disk;
  if (node->n_resizing) {
    pthread_mutex_unlock (&node->n_lock);
    snprintf (out, outlen, "a resize is running already");
    return -1;
  }
  node->n_resizing = true;
  pthread_mutex_unlock (&node->n_lock);

  if (disk != REPL_DISK_UPTODATE) {
    snprintf (out, outlen, "this node's disk is %s: run resize on an "
              "UpToDate node (the Primary)", disk_state_name (disk));
    goto done;
  }
  for (i = 0; i < PEERS (node)->pl_n; i++) {
    struct peer *p = PEERS (node)->pl_peers[i];
    struct conn *c;

    pthread_mutex_lock (&p->pr_lock);
    c = peer_conn_locked (p);
    if (role != REPL_ROLE_PRIMARY && p->pr_says_primary &&
        p->pr_state == CONN_CONNECTED && c != NULL && !c->c_peer_diskless) {
      snprintf (out, outlen, "peer %s is Primary: run resize there",
                p->pr_cfg->nc_name);
      pthread_mutex_unlock (&p->pr_lock);
      goto done;
    }
    if (p->pr_state == CONN_CONNECTED && c != NULL && !c->c_failed &&
        !c->c_peer_diskless) {
      if (p->pr_repl != REPL_ESTABLISHED) {
        snprintf (out, outlen, "peer %s is %s: wait until its resync or "
                  "verify ends", p->pr_cfg->nc_name,
                  repl_state_name (p->pr_repl));
        pthread_mutex_unlock (&p->pr_lock);
        goto done;
      }
      rp[n++] = (struct rsz_peer) { .rp_peer = p, .rp_conn = conn_get (c) };
    }
    else if (p->pr_state != CONN_CONNECTED) {
      size_t l = strlen (away);
      snprintf (away + l, sizeof away - l, "%s%s", l ? ", " : "",
                p->pr_cfg->nc_name);
    }
    pthread_mutex_unlock (&p->pr_lock);
  }

  /* 1. How large every node can be. */
  size = want != 0 ? want : cap;
  if (want != 0 && want > cap) {
    snprintf (out, outlen, "disk %s holds %" PRIu64 " bytes, not %" PRIu64
              " (grow it first)", node->n_vol.vol_path, cap, want);
    goto done;
  }
  if (query_peers (node, rp, n, want, &size, out, outlen) == -1)
    goto done;
  if (size < old) {
    snprintf (out, outlen, "shrinking is not supported: the volume has %"
              PRIu64 " bytes, %s %" PRIu64, old, want ? "asked:" :
              "the smallest disk holds", size);
    goto done;
  }
  if (size == old) {
    snprintf (out, outlen, "nothing to grow: the volume has %" PRIu64
              " bytes and the smallest disk holds no more (grow the backing "
              "devices of every node first)", old);
    goto done;
  }

  /* 2. Ourselves, the new area marked for every peer. */
  mark = 0;
  if (!assume_clean)
    for (i = 0; i < PEERS (node)->pl_n; i++)
      if (!PEERS (node)->pl_peers[i]->pr_cfg->nc_diskless)
        mark |= UINT32_C (1) << PEERS (node)->pl_peers[i]->pr_cfg->nc_id;
  if (resize_local (node, size, mark, false, err, sizeof err) == -1) {
    snprintf (out, outlen, "%s", err);
    goto done;
  }

  /* 3. The peers, between their writes. */
  for (i = 0; i < n; i++) {
    struct peer *p = rp[i].rp_peer;
    struct conn *c = rp[i].rp_conn;
    uint8_t from[8];
    struct waiter w;
    struct out_msg om;
    bool queued;

    put_be64 (from, old);
    waiter_init (&w, 0);
    pthread_mutex_lock (&p->pr_lock);
    queued = !c->c_failed && peer_conn_locked (p) == c &&
             peer_submit_locked (p, REPL_MSG_RESIZE,
                                 assume_clean ? REPL_FLAG_ASSUME_CLEAN : 0,
                                 from, 0, size, &w, false, &om, NULL) == 1;
    pthread_mutex_unlock (&p->pr_lock);
    waiter_wait (&w);           /* the ACK, or the connection's end */
    waiter_destroy (&w);
    pthread_mutex_lock (&p->pr_lock);
    rp[i].rp_grown = queued && !c->c_failed;
    if (rp[i].rp_grown)
      c->c_size = size;
    pthread_mutex_unlock (&p->pr_lock);
    if (!rp[i].rp_grown) {
      size_t l = strlen (unacked);

      log_error ("peer %s: it did not acknowledge the resize to %" PRIu64
                 " bytes; it learns the size when it reconnects, or "
                 "refuses the connection (see its log)", p->pr_cfg->nc_name,
                 size);
      snprintf (unacked + l, sizeof unacked - l, "%s%s", l ? ", " : "",
                p->pr_cfg->nc_name);
    }
  }

  /* Clients see it from here on; the new area goes to the peers. */
  pthread_mutex_lock (&node->n_lock);
  __atomic_store_n (&node->n_vol.vol_size, size, __ATOMIC_RELEASE);
  pthread_mutex_unlock (&node->n_lock);
  for (i = 0; i < PEERS (node)->pl_n; i++) {
    struct peer *p = PEERS (node)->pl_peers[i];
    struct conn *c;

    pthread_mutex_lock (&p->pr_lock);
    c = peer_conn_locked (p);
    if (c != NULL && !c->c_failed && c->c_size != size)
      conn_fail_locked (c, "the volume grew to %" PRIu64 " bytes: "
                        "reconnecting, so that the peer learns it", size);
    else if (c != NULL && !c->c_failed && !assume_clean &&
             !c->c_peer_diskless) {
      p->pr_resync_wanted = true;
      pthread_cond_signal (&p->pr_resync_cond);
      nresync++;
    }
    pthread_mutex_unlock (&p->pr_lock);
  }
  snprintf (out, outlen, "the volume grew from %" PRIu64 " to %" PRIu64
            " bytes; %s%s%s", old, size,
            assume_clean ? "the new area is assumed clean" : "",
            !assume_clean && nresync > 0 ? "the new area resyncs to the "
            "connected peers" : !assume_clean ? "the new area is marked out "
            "of sync" : "",
            away[0] ? "; away (they grow when they connect): " : "");
  if (away[0]) {
    size_t l = strlen (out);
    snprintf (out + l, outlen - l, "%s", away);
  }
  if (unacked[0]) {
    size_t l = strlen (out);
    snprintf (out + l, outlen - l, "; did not acknowledge (they grow at "
              "their next connection, or refuse it: see their logs): %s",
              unacked);
  }
  log_info ("resize: %s", out);
  r = 0;

 done:
  for (i = 0; i < n; i++)
    conn_put (rp[i].rp_conn);
  pthread_mutex_lock (&node->n_lock);
  node->n_resizing = false;
  pthread_mutex_unlock (&node->n_lock);
  return r;
}
