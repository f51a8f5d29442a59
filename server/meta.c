/* nbdrepl: the node's metadata in use — flags, generation UUIDs, the
 * peers' dirty bitmaps on disk and the activity log.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * The format and the crash-safety argument are in common/metadata.h, the
 * activity-log rules in common/activity-log.h.  What this file adds is
 * when things are written:
 *
 *  - at start: the metadata is read (or created as `replctl create-md`
 *    would); each peer's bitmap is loaded; a node that did not stop
 *    cleanly marks its activity-log extents out of sync for every peer
 *    (and remembers if it crashed as primary); then CLEAN is cleared on
 *    disk, so that the next start knows whether this run ended well;
 *  - on the write path: before a write reaches the disk its extents are
 *    in a durable activity-log transaction (meta_al_begin); writers that
 *    queue up behind one transaction share the next (group commit);
 *  - when an extent leaves the log: the data disk is flushed and the
 *    bitmap pages covering it are written first;
 *  - at a clean stop: every bitmap, then CLEAN.
 *
 * Locks: n_al_lock guards the in-memory log and is never held during
 * I/O.  n_md_io_lock serialises the md_* calls, which are not
 * thread-safe and do their own I/O; only metadata writers take it, never
 * the write path's fast case (an extent that is already active).
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "cleanup.h"
#include "internal.h"
#include "log.h"
#include "uuid-compare.h"

/* The geometry new metadata gets, from the configuration. */
static void
config_geometry (const struct repl_node *node, struct md_geometry *g)
{
  struct md_params pa;

  md_params_init (&pa, node->n_self->nc_id, node->n_vol.vol_size);
  *g = pa.pa_geom;
  g->mg_granularity = node->n_cfg.cf_bitmap_granularity;
  g->mg_al_extent_size = node->n_cfg.cf_al_extent_size;
  g->mg_al_extents = node->n_cfg.cf_al_extents;
}

/* `meta: internal`: the metadata takes the end of the backing device
 * and the volume is what is left in front of it.  Called after
 * volume_open and before anything uses the volume size. */
int
meta_place_internal (struct repl_node *node, const char *where)
{
  struct md_geometry g;
  char err[256];

  if (!node->n_self->nc_meta_internal)
    return 0;
  config_geometry (node, &g);
  if (md_internal_place (node->n_vol.vol_size, &g, &node->n_md_base,
                         err, sizeof err) == -1) {
    log_error ("%sdisk %s: meta: internal: %s", where,
               node->n_vol.vol_path, err);
    return -1;
  }
  node->n_vol.vol_size = g.mg_size;
  return 0;
}

/* Copy the words of bitmap pages [first, first+count) of p's bitmap into
 * the scratch bitmap, under pr_lock, so that they can be written with
 * no lock held. */
static void
copy_pages (struct peer *p, struct bitmap *scratch, uint64_t first,
            uint64_t count)
{
  const uint64_t words_per_page = MD_BLOCK_SIZE / 8;
  uint64_t nwords = (p->pr_bitmap.bm_nbits + 63) / 64;
  uint64_t w0 = first * words_per_page, w1 = (first + count) * words_per_page;

  if (w1 > nwords)
    w1 = nwords;
  if (w0 >= w1)
    return;
  pthread_mutex_lock (&p->pr_lock);
  memcpy (&scratch->bm_words[w0], &p->pr_bitmap.bm_words[w0],
          (w1 - w0) * 8);
  pthread_mutex_unlock (&p->pr_lock);
}

/* Write bitmap pages [first, first+count) of every peer.  n_md_io_lock
 * held. */
static int
write_bitmap_pages_locked (struct repl_node *node, uint64_t first,
                           uint64_t count)
{
  char err[256];
  size_t i;

  for (i = 0; i < PEERS (node)->pl_n; i++) {
    struct peer *p = PEERS (node)->pl_peers[i];

    copy_pages (p, &node->n_md_scratch, first, count);
    if (md_write_bitmap (&node->n_md, p->pr_md_slot, &node->n_md_scratch,
                         first, count, err, sizeof err) == -1) {
      log_error ("metadata %s: bitmap of peer %s: %s", node->n_md_path,
                 p->pr_cfg->nc_name, err);
      return -1;
    }
  }
  return 0;
}

/* Write a changed superblock.  n_md_io_lock held. */
int
meta_write_super_locked (struct repl_node *node, const struct md_super *sb)
{
  char err[256];

  ASSERT_LOCKED (&node->n_md_io_lock);
  if (md_write_super (&node->n_md, sb, err, sizeof err) == -1) {
    log_error ("metadata %s: superblock: %s", node->n_md_path, err);
    return -1;
  }
  return 0;
}

/* This boot of the machine (Linux boot_id), or all zero if unknown. */
static void
read_boot_id (uint8_t id[MD_BOOT_ID_SIZE])
{
  char text[64];
  /* NBDREPL_TEST_BOOT_ID_FILE: the tests' stand-in for a reboot. */
  const char *path = getenv ("NBDREPL_TEST_BOOT_ID_FILE");
  FILE *fp = fopen (path ? path : "/proc/sys/kernel/random/boot_id", "re");
  size_t n = 0, i;

  memset (id, 0, MD_BOOT_ID_SIZE);
  if (fp == NULL)
    return;
  if (fgets (text, sizeof text, fp) != NULL)
    for (i = 0; text[i] && n < 2 * MD_BOOT_ID_SIZE; i++) {
      int v;
      char c = text[i];

      if (c >= '0' && c <= '9') v = c - '0';
      else if (c >= 'a' && c <= 'f') v = c - 'a' + 10;
      else continue;
      id[n / 2] |= n % 2 ? v : v << 4;
      n++;
    }
  fclose (fp);
}

/* Read the metadata, or create it if there is none. */
static int
load_or_create (struct repl_node *node, const char *where)
{
  const struct repl_node_cfg *self = node->n_self;
  char err[512], err2[512];
  struct md_params pa;
  size_t i, n = 0;

  /* External metadata says the volume's size, which may be less than the
   * disk's: a disk grown for a resize that has not run yet (meta_open
   * checks).  Internal metadata's place depends on the disk's size. */
  if (md_load (&node->n_md, node->n_md_fd, node->n_md_base, self->nc_id,
               self->nc_meta_internal ? node->n_vol.vol_size : 0,
               err, sizeof err) == 0)
    return 0;

  /* No metadata yet: make it as `replctl create-md` would (the disk is
   * Inconsistent, every bitmap set, the current UUID says "just
   * created").  md_create refuses to overwrite anything that looks like
   * metadata, so damaged metadata is reported, not silently replaced. */
  md_params_init (&pa, self->nc_id, node->n_vol.vol_size);
  config_geometry (node, &pa.pa_geom);
  pa.pa_current_uuid = UUID_JUST_CREATED;
  for (i = 0; i < node->n_cfg.cf_nnodes; i++)
    if (node->n_cfg.cf_nodes[i].nc_id != self->nc_id)
      pa.pa_peer_ids[n++] = node->n_cfg.cf_nodes[i].nc_id;
  if (md_create (&node->n_md, node->n_md_fd, node->n_md_base, &pa, false,
                 err2, sizeof err2) == -1) {
    if (errno == EEXIST)
      log_error ("%smetadata %s: %s (to start again with a full sync: "
                 "replctl create-md --force)", where, node->n_md_path, err);
    else
      log_error ("%smetadata %s: %s", where, node->n_md_path, err2);
    return -1;
  }
  log_info ("metadata %s: created (disk Inconsistent until synced)",
            node->n_md_path);
  return 0;
}

int
meta_open (struct repl_node *node, const char *where)
{
  const struct md_geometry *g;
  struct md_super sb;
  uint64_t replayed = 0;
  uint8_t boot_id[MD_BOOT_ID_SIZE];
  bool rebooted;
  uint32_t nactive;
  size_t i;
  char err[256];

  const struct repl_node_cfg *self = node->n_self;

  if (self->nc_meta_internal) {
    if (asprintf (&node->n_md_path, "%s (internal, at byte %" PRIu64 ")",
                  self->nc_disk, node->n_md_base) == -1) {
      node->n_md_path = NULL;
      log_error ("asprintf: %m");
      return -1;
    }
    node->n_md_fd = dup (node->n_vol.vol_fd);
  }
  else {
    if (self->nc_meta_default && node->n_vol.vol_is_block) {
      errno = EINVAL;
      log_error ("%sdisk %s is a block device: say where its metadata "
                 "goes (meta: PATH, or meta: internal)", where,
                 self->nc_disk);
      return -1;
    }
    node->n_md_path = strdup (self->nc_meta);
    if (node->n_md_path == NULL) {
      log_error ("strdup: %m");
      return -1;
    }
    node->n_md_fd = open (node->n_md_path,
                          O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (node->n_md_fd >= 0)
      node->n_md_created = true;
    else if (errno == EEXIST)
      node->n_md_fd = open (node->n_md_path, O_RDWR | O_CLOEXEC);
    /* Like the disk (volume_open): one process at a time. */
    if (node->n_md_fd >= 0 && flock (node->n_md_fd, LOCK_EX | LOCK_NB) == -1) {
      if (errno == EWOULDBLOCK)
        log_error ("%smetadata %s: in use by another process (is this "
                   "node already running?)", where, node->n_md_path);
      else
        log_error ("%smetadata %s: flock: %m", where, node->n_md_path);
      close (node->n_md_fd);
      node->n_md_fd = -1;
      return -1;
    }
  }
  if (node->n_md_fd == -1) {
    log_error ("%smetadata %s: %m", where, node->n_md_path);
    return -1;
  }
  if (load_or_create (node, where) == -1)
    return -1;
  node->n_md_open = true;
  g = &node->n_md.md_super.ms_geom;
  if (g->mg_size > node->n_vol.vol_size) {
    errno = EINVAL;
    log_error ("%smetadata %s: volume size mismatch: the metadata says %"
               PRIu64 " bytes, the disk has %" PRIu64 " (a disk smaller "
               "than its volume: shrinking is not supported)", where,
               node->n_md_path, g->mg_size, node->n_vol.vol_size);
    return -1;
  }
  if (g->mg_size < node->n_vol.vol_size) {
    /* The disk grew: the volume keeps its size until replctl resize
     * (resize.c), here or on a peer.  The peers' bitmaps were made for
     * the disk's size: again, for the volume's (nothing is in them). */
    log_info ("disk %s has %" PRIu64 " bytes, the volume %" PRIu64
              " (the metadata's size; replctl resize grows it)",
              node->n_vol.vol_path, node->n_vol.vol_size, g->mg_size);
    node->n_vol.vol_size = g->mg_size;
    for (i = 0; i < PEERS (node)->pl_n; i++) {
      struct peer *p = PEERS (node)->pl_peers[i];
      uint32_t gran = p->pr_bitmap.bm_granularity;

      bitmap_free (&p->pr_bitmap);
      if (bitmap_init (&p->pr_bitmap, g->mg_size, gran) == -1) {
        log_error ("%sbitmap: %m", where);
        return -1;
      }
    }
  }
  if (g->mg_granularity != node->n_cfg.cf_bitmap_granularity) {
    errno = EINVAL;
    log_error ("%smetadata %s: made with bitmap-granularity %" PRIu32
               ", but the configuration says %" PRIu32 " (every node must "
               "use the same; to change it: replctl create-md --force)",
               where, node->n_md_path, g->mg_granularity,
               node->n_cfg.cf_bitmap_granularity);
    return -1;
  }

  if (al_init (&node->n_al, g->mg_al_extents, g->mg_al_extent_size,
               node->n_vol.vol_size) == -1 ||
      al_load (&node->n_al, node->n_md.md_al_table, g->mg_al_extents,
               node->n_md.md_al_seq) == -1) {
    log_error ("%smetadata %s: activity log: %m", where, node->n_md_path);
    return -1;
  }
  node->n_al_ready = true;
  node->n_al_table = calloc (g->mg_al_extents, sizeof (uint32_t));
  node->n_al_drops = calloc (AL_MAX_DROPS (g->mg_al_extents),
                             sizeof (uint32_t));
  if (node->n_al_table == NULL || node->n_al_drops == NULL ||
      bitmap_init (&node->n_md_scratch, node->n_vol.vol_size,
                   g->mg_granularity) == -1) {
    log_error ("calloc: %m");
    return -1;
  }

  /* Every peer has a bitmap slot; a peer new to the metadata gets a free
   * one, all dirty (nothing says what it holds). */
  sb = node->n_md.md_super;
  for (i = 0; i < PEERS (node)->pl_n; i++) {
    struct peer *p = PEERS (node)->pl_peers[i];
    int slot = md_peer_slot (&node->n_md, p->pr_cfg->nc_id);
    uint64_t nbad = 0;

    if (slot == -1) {
      slot = md_peer_slot (&node->n_md, MD_NO_PEER);
      if (slot == -1) {
        errno = ENOSPC;
        log_error ("%smetadata %s: no free peer slot for %s", where,
                   node->n_md_path, p->pr_cfg->nc_name);
        return -1;
      }
      sb.ms_peers[slot].mp_node_id = p->pr_cfg->nc_id;
      sb.ms_peers[slot].mp_flags = 0;
      sb.ms_peers[slot].mp_bitmap_uuid = 0;
      node->n_md.md_super.ms_peers[slot].mp_node_id = p->pr_cfg->nc_id;
      p->pr_md_slot = slot;
      bitmap_set_all (&p->pr_bitmap);
      continue;
    }
    p->pr_md_slot = slot;
    if (md_read_bitmap (&node->n_md, slot, &p->pr_bitmap, 0,
                        node->n_md.md_layout.ml_bm_pages, &nbad,
                        err, sizeof err) == -1) {
      log_error ("%smetadata %s: bitmap of peer %s: %s", where,
                 node->n_md_path, p->pr_cfg->nc_name, err);
      return -1;
    }
    if (nbad > 0)
      log_error ("metadata %s: %" PRIu64 " damaged bitmap page(s) of peer "
                 "%s read as all out of sync", node->n_md_path, nbad,
                 p->pr_cfg->nc_name);
  }

  /* A node that did not stop cleanly: as primary, or as a storage node
   * of a diskless primary (which marks what the nodes away miss, in
   * memory: its bitmap pages go out when an extent leaves the activity
   * log), it may have written to its activity log's extents what some
   * peer never got, and not written the marks; after a
   * crash of the machine (not just of the process, which leaves the page
   * cache to reach the disk), any node may have lost writes it had
   * acknowledged.  Either way those extents are resynced. */
  nactive = al_nactive (&node->n_al);
  read_boot_id (boot_id);
  rebooted = memcmp (boot_id, sb.ms_boot_id, MD_BOOT_ID_SIZE) != 0;
  memcpy (sb.ms_boot_id, boot_id, MD_BOOT_ID_SIZE);
  if (!(sb.ms_flags & MD_FLAG_CLEAN) && !(sb.ms_flags & MD_FLAG_PRIMARY) &&
      !rebooted && !node->n_cfg.cf_has_diskless) {
    node->n_md_crashed = true;
    log_info ("metadata %s: node %s did not stop cleanly, but the machine "
              "did not restart: its writes are in the page cache; nothing "
              "to resync", node->n_md_path, node->n_self->nc_name);
  }
  else if (!(sb.ms_flags & MD_FLAG_CLEAN) && !node->n_cfg.cf_al_updates) {
    /* No activity log was kept: anything may differ. */
    for (i = 0; i < PEERS (node)->pl_n; i++)
      bitmap_set_all (&PEERS (node)->pl_peers[i]->pr_bitmap);
    if (sb.ms_flags & MD_FLAG_PRIMARY)
      sb.ms_flags |= MD_FLAG_CRASHED_PRIMARY;
    node->n_md_crashed = true;
    log_info ("metadata %s: node %s did not stop cleanly and keeps no "
              "activity log (al-updates: false): every peer gets a full "
              "resync", node->n_md_path, node->n_self->nc_name);
  }
  else if (!(sb.ms_flags & MD_FLAG_CLEAN)) {
    for (i = 0; i < PEERS (node)->pl_n; i++)
      al_replay (&node->n_al, &PEERS (node)->pl_peers[i]->pr_bitmap);
    replayed = (uint64_t) nactive * g->mg_al_extent_size;
    if (sb.ms_flags & MD_FLAG_PRIMARY)
      sb.ms_flags |= MD_FLAG_CRASHED_PRIMARY;
    node->n_md_crashed = true;
    log_info ("metadata %s: node %s did not stop cleanly%s%s: %" PRIu32
              " activity-log extent(s) (%" PRIu64 " bytes) marked out of "
              "sync for every peer", node->n_md_path,
              node->n_self->nc_name,
              sb.ms_flags & MD_FLAG_PRIMARY ? " (it was Primary)" : "",
              rebooted ? " (the machine restarted)" : "",
              nactive, replayed);
  }

  /* From now on a crash must be detectable. */
  sb.ms_flags &= ~MD_FLAG_CLEAN;
  pthread_mutex_lock (&node->n_md_io_lock);
  i = meta_write_super_locked (node, &sb);
  pthread_mutex_unlock (&node->n_md_io_lock);
  return i == 0 ? 0 : -1;
}

/* Stop cleanly: the data is flushed, every bitmap is on disk, and the
 * superblock says CLEAN.  Called once nothing writes any more. */
void
meta_close (struct repl_node *node)
{
  struct md_super sb;

  if (node->n_md_open && node->n_al_ready) {
    sb = node->n_md.md_super;
    sb.ms_flags |= MD_FLAG_CLEAN;
    sb.ms_flags &= ~MD_FLAG_PRIMARY;
    pthread_mutex_lock (&node->n_md_io_lock);
    if (volume_flush (&node->n_vol) == 0 &&
        write_bitmap_pages_locked (node, 0,
                                   node->n_md.md_layout.ml_bm_pages) == 0 &&
        meta_write_super_locked (node, &sb) == 0)
      log_info ("metadata %s: stopped cleanly", node->n_md_path);
    pthread_mutex_unlock (&node->n_md_io_lock);
  }
  if (node->n_md_open)
    md_close (&node->n_md);
  node->n_md_open = false;
  if (node->n_al_ready)
    al_free (&node->n_al);
  node->n_al_ready = false;
  if (node->n_md_fd >= 0)
    close (node->n_md_fd);
  node->n_md_fd = -1;
  bitmap_free (&node->n_md_scratch);
  free (node->n_al_table);
  free (node->n_al_drops);
  free (node->n_md_path);
  node->n_al_table = node->n_al_drops = NULL;
  node->n_md_path = NULL;
}

/* Write the bitmap pages of one peer that cover [offset, offset+len)
 * (during a resync, so that its progress survives a crash). */
int
meta_write_peer_bitmap_range (struct repl_node *node, struct peer *p,
                              uint64_t offset, uint64_t len)
{
  uint64_t first, count;
  char err[256];
  int r = 0;

  pthread_mutex_lock (&node->n_md_io_lock);
  md_bitmap_pages (&node->n_md, offset, len, &first, &count);
  if (count == 0) {
    pthread_mutex_unlock (&node->n_md_io_lock);
    return 0;
  }
  copy_pages (p, &node->n_md_scratch, first, count);
  if (md_write_bitmap (&node->n_md, p->pr_md_slot, &node->n_md_scratch,
                       first, count, err, sizeof err) == -1) {
    log_error ("metadata %s: bitmap of peer %s: %s", node->n_md_path,
               p->pr_cfg->nc_name, err);
    r = -1;
  }
  pthread_mutex_unlock (&node->n_md_io_lock);
  return r;
}

/* Write one peer's whole bitmap (after a resync, so that a crash does
 * not bring back what was just sent). */
int
meta_write_peer_bitmap (struct repl_node *node, struct peer *p)
{
  uint64_t pages = node->n_md.md_layout.ml_bm_pages;
  char err[256];
  int r = 0;

  pthread_mutex_lock (&node->n_md_io_lock);
  copy_pages (p, &node->n_md_scratch, 0, pages);
  if (md_write_bitmap (&node->n_md, p->pr_md_slot, &node->n_md_scratch,
                       0, pages, err, sizeof err) == -1) {
    log_error ("metadata %s: bitmap of peer %s: %s", node->n_md_path,
               p->pr_cfg->nc_name, err);
    r = -1;
  }
  pthread_mutex_unlock (&node->n_md_io_lock);
  return r;
}

/* The node becomes Primary: flag it, and note when (wall clock, for
 * the split-brain policy discard-younger-primary). */
int
meta_note_primary (struct repl_node *node)
{
  struct md_super sb;
  struct timespec ts;
  int r;

  if (node->n_diskless)
    return 0;
  clock_gettime (CLOCK_REALTIME, &ts);
  pthread_mutex_lock (&node->n_md_io_lock);
  sb = node->n_md.md_super;
  sb.ms_flags |= MD_FLAG_PRIMARY;
  sb.ms_primary_since = (uint64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
  r = meta_write_super_locked (node, &sb);
  pthread_mutex_unlock (&node->n_md_io_lock);
  return r;
}

/* Set and clear superblock flags (no-op if nothing changes). */
int
meta_set_flags (struct repl_node *node, uint32_t set, uint32_t clear)
{
  struct md_super sb;
  int r = 0;

  if (node->n_diskless)
    return 0;                   /* no metadata */
  pthread_mutex_lock (&node->n_md_io_lock);
  sb = node->n_md.md_super;
  sb.ms_flags = (sb.ms_flags | set) & ~clear;
  if (sb.ms_flags != node->n_md.md_super.ms_flags)
    r = meta_write_super_locked (node, &sb);
  pthread_mutex_unlock (&node->n_md_io_lock);
  return r;
}

/* Write the activity-log transaction in flight: the data of dropped
 * extents made durable and their bitmap pages written first.  Called
 * with n_al_lock held and al_txn_in_flight; drops and retakes it. */
static void
write_txn (struct repl_node *node)
{
  size_t ndrops, i;
  uint64_t seq, first = UINT64_MAX, last = 0;
  char err[256];
  int r = 0;

  if (al_snapshot (&node->n_al, node->n_al_table, node->n_al_drops,
                   &ndrops, &seq) == -1)
    return;                     /* EIO: the log has failed */
  pthread_mutex_unlock (&node->n_al_lock);

  pthread_mutex_lock (&node->n_md_io_lock);
  for (i = 0; i < ndrops; i++) {
    uint64_t off, len, f, c;

    al_extent_range (&node->n_al, node->n_al_drops[i], &off, &len);
    md_bitmap_pages (&node->n_md, off, len, &f, &c);
    if (c > 0) {
      if (f < first)
        first = f;
      if (f + c - 1 > last)
        last = f + c - 1;
    }
  }
  if (ndrops > 0)
    r = volume_flush (&node->n_vol);
  if (r == 0 && first != UINT64_MAX)
    r = write_bitmap_pages_locked (node, first, last - first + 1);
  if (r == 0 &&
      md_write_al (&node->n_md, seq, node->n_al_table, err, sizeof err) == -1) {
    log_error ("metadata %s: activity log: %s", node->n_md_path, err);
    r = -1;
  }
  pthread_mutex_unlock (&node->n_md_io_lock);

  pthread_mutex_lock (&node->n_al_lock);
  if (r == 0)
    al_committed (&node->n_al, seq);
  else {
    log_error ("metadata %s: the activity log cannot be written; writes "
               "fail from now on", node->n_md_path);
    al_txn_failed (&node->n_al);
  }
  pthread_cond_broadcast (&node->n_al_cond);
}

/* Before a write, trim or zero of [offset, offset+len) reaches any disk:
 * make sure every extent it touches is in a durable activity-log
 * transaction.  Returns 0, or -1 with errno (EIO once the metadata
 * cannot be written). */
int
meta_al_begin (struct repl_node *node, uint64_t offset, uint64_t len)
{
  return meta_al_begin_reserve (node, offset, len, 0);
}

/* The same, leaving reserve slots of the log to others
 * (al_begin_reserve). */
int
meta_al_begin_reserve (struct repl_node *node, uint64_t offset, uint64_t len,
                       uint32_t reserve)
{
  uint64_t need;
  int r;

  if (!node->n_cfg.cf_al_updates)
    return 0;
  pthread_mutex_lock (&node->n_al_lock);
  while ((r = al_begin_reserve (&node->n_al, offset, len, reserve,
                                &need)) == AL_BUSY)
    pthread_cond_wait (&node->n_al_cond, &node->n_al_lock);
  if (r == AL_NEED_TXN) {
    atomic_fetch_add (&node->n_al_waits, 1);
    while (!al_is_durable (&node->n_al, need) && !node->n_al.al_failed) {
      if (al_txn_in_flight (&node->n_al))
        pthread_cond_wait (&node->n_al_cond, &node->n_al_lock);
      else
        write_txn (node);
    }
    if (!al_is_durable (&node->n_al, need)) {
      al_complete (&node->n_al, offset, len);
      errno = EIO;
      r = -1;
    }
    else
      r = 0;
  }
  else if (r == -1)
    log_error ("activity log: %" PRIu64 " bytes at %" PRIu64 ": %m",
               len, offset);
  pthread_mutex_unlock (&node->n_al_lock);
  return r == -1 ? -1 : 0;
}

void
meta_al_end (struct repl_node *node, uint64_t offset, uint64_t len)
{
  if (!node->n_cfg.cf_al_updates)
    return;
  pthread_mutex_lock (&node->n_al_lock);
  if (al_complete (&node->n_al, offset, len))
    pthread_cond_broadcast (&node->n_al_cond);
  pthread_mutex_unlock (&node->n_al_lock);
}

/* replctl adjust added peer p (not published yet): give it a slot in
 * the metadata, as a start does for a peer new to it, but always
 * afresh, all out of sync: its id's old slot if one is left (a node
 * removed while this one was down), else a free one, else one whose
 * node is neither a peer now nor waiting to be freed.  The all-set
 * bitmap is on disk before the superblock names the slot, so a crash
 * in between leaves the slot free or the bitmap set.  Returns 0, or -1
 * with the reason in err. */
int
meta_assign_peer_slot (struct repl_node *node, struct peer *p,
                       char *err, size_t errlen)
{
  const uint32_t id = p->pr_cfg->nc_id;
  uint64_t pages = node->n_md.md_layout.ml_bm_pages;
  struct peer_list *pl = PEERS (node);
  struct md_super sb;
  char why[256];
  int slot;
  uint32_t i;
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&node->n_md_io_lock);

  slot = md_peer_slot (&node->n_md, id);
  if (slot == -1)
    slot = md_peer_slot (&node->n_md, MD_NO_PEER);
  for (i = 0; slot == -1 && i < node->n_md.md_super.ms_geom.mg_npeers; i++) {
    uint32_t other = node->n_md.md_super.ms_peers[i].mp_node_id;
    bool used = false;
    struct peer *q;
    size_t k;

    for (k = 0; k < pl->pl_n; k++)
      used |= pl->pl_peers[k]->pr_cfg->nc_id == other;
    pthread_mutex_lock (&node->n_grace_lock);
    for (q = node->n_dead_peers; q != NULL; q = q->pr_next_dead)
      used |= q->pr_cfg->nc_id == other;
    pthread_mutex_unlock (&node->n_grace_lock);
    if (!used)
      slot = i;
  }
  if (slot == -1) {
    snprintf (err, errlen, "metadata %s has no free peer slot for node %s "
              "(all %" PRIu32 " are in use%s); to make one, stop this node "
              "and run replctl create-md --force with the new "
              "configuration (then a full sync)", node->n_md_path,
              p->pr_cfg->nc_name, node->n_md.md_super.ms_geom.mg_npeers,
              node->n_dead_peers ? ", one by a node removed a moment ago: "
              "try again in a second" : "");
    errno = ENOSPC;
    return -1;
  }
  p->pr_md_slot = slot;
  bitmap_set_all (&p->pr_bitmap);
  copy_pages (p, &node->n_md_scratch, 0, pages);
  if (md_write_bitmap (&node->n_md, slot, &node->n_md_scratch, 0, pages,
                       why, sizeof why) == -1) {
    snprintf (err, errlen, "metadata %s: bitmap of new peer %s: %s",
              node->n_md_path, p->pr_cfg->nc_name, why);
    return -1;
  }
  sb = node->n_md.md_super;
  sb.ms_peers[slot].mp_node_id = id;
  sb.ms_peers[slot].mp_flags = 0;
  sb.ms_peers[slot].mp_bitmap_uuid = 0;
  if (md_write_super (&node->n_md, &sb, why, sizeof why) == -1) {
    snprintf (err, errlen, "metadata %s: superblock: %s", node->n_md_path,
              why);
    return -1;
  }
  log_info ("metadata %s: peer slot %d for new peer %s (id %" PRIu32
            "), all out of sync", node->n_md_path, slot, p->pr_cfg->nc_name,
            id);
  return 0;
}

/* Peer p, removed by replctl adjust, is gone for good (peers.c, after
 * its grace period): its slot is free for the next node added. */
void
meta_release_peer_slot (struct repl_node *node, struct peer *p)
{
  struct md_super sb;
  int slot = p->pr_md_slot;
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&node->n_md_io_lock);

  if (!node->n_md_open || slot < 0 ||
      node->n_md.md_super.ms_peers[slot].mp_node_id != p->pr_cfg->nc_id)
    return;
  sb = node->n_md.md_super;
  sb.ms_peers[slot].mp_node_id = MD_NO_PEER;
  sb.ms_peers[slot].mp_flags = 0;
  sb.ms_peers[slot].mp_bitmap_uuid = 0;
  if (meta_write_super_locked (node, &sb) == 0)
    log_info ("metadata %s: peer slot %d of removed peer %s released",
              node->n_md_path, slot, p->pr_cfg->nc_name);
}
