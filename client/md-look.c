/* nbdrepl: what replctl create-md looks at before it writes.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * DRBD's create-md asks before it puts internal metadata over a
 * filesystem; replctl asks for --force:
 *
 *   - meta: internal, no metadata there yet, and libblkid recognises
 *     what the disk holds (a filesystem, a RAID or LVM member, swap, a
 *     partition table): the metadata would take the disk's last
 *     megabytes and the volume would be smaller than what was made on
 *     the whole disk, cutting it off.  Refused without --force.
 *   - --in-sync on a disk that is not all zero in a sample: the claim
 *     that every node's disk holds the same bytes is checked against
 *     the other nodes' disks that this machine can open (on one
 *     machine, or shared storage); a difference, or nothing to compare
 *     with, is a warning.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <blkid.h>

#include "md-look.h"
#include "metadata.h"

#define SAMPLE_BLOCK 4096
#define SAMPLE_BLOCKS 256

/* What libblkid finds on the disk: 1 with `what` ("ext4 filesystem",
 * "gpt partition table"), 0 for nothing, -1 when it cannot probe. */
static int
disk_signature (int fd, char *what, size_t len)
{
  blkid_probe pr;
  const char *type = NULL, *usage = NULL;
  int r, found = 0;

  pr = blkid_new_probe ();
  if (pr == NULL)
    return -1;
  if (blkid_probe_set_device (pr, fd, 0, 0) == -1) {
    blkid_free_probe (pr);
    return -1;
  }
  blkid_probe_enable_superblocks (pr, 1);
  blkid_probe_set_superblocks_flags (pr, BLKID_SUBLKS_TYPE |
                                     BLKID_SUBLKS_USAGE);
  blkid_probe_enable_partitions (pr, 1);
  r = blkid_do_safeprobe (pr);
  if (r == 0) {
    found = 1;
    if (blkid_probe_lookup_value (pr, "TYPE", &type, NULL) == 0) {
      blkid_probe_lookup_value (pr, "USAGE", &usage, NULL);
      snprintf (what, len, "%s %s", type,
                usage && strcmp (usage, "filesystem") != 0 ? usage
                : "filesystem");
    }
    else if (blkid_probe_lookup_value (pr, "PTTYPE", &type, NULL) == 0)
      snprintf (what, len, "%s partition table", type);
    else
      snprintf (what, len, "a signature libblkid recognises");
  }
  else if (r == -2) {           /* more than one: ambivalent */
    found = 1;
    snprintf (what, len, "several signatures (blkid -p lists them)");
  }
  else if (r == -1)
    found = -1;
  blkid_free_probe (pr);
  return found;
}

/* The sample: SAMPLE_BLOCKS blocks spread evenly over the volume, the
 * last one included. */
static uint64_t
sample_offset (uint64_t size, unsigned i)
{
  uint64_t off;

  if (size <= SAMPLE_BLOCK)
    return 0;
  off = (size - SAMPLE_BLOCK) / (SAMPLE_BLOCKS - 1) * i;
  off -= off % SAMPLE_BLOCK;
  if (i == SAMPLE_BLOCKS - 1)
    off = size - SAMPLE_BLOCK;
  return off;
}

static size_t
sample_len (uint64_t size)
{
  return size < SAMPLE_BLOCK ? (size_t) size : SAMPLE_BLOCK;
}

static int
read_block (int fd, uint64_t off, size_t len, unsigned char *buf)
{
  ssize_t r = pread (fd, buf, len, off);

  if (r == -1)
    return -1;
  if ((size_t) r < len)
    memset (buf + r, 0, len - r);
  return 0;
}

/* The first sampled offset holding a non-zero byte, or UINT64_MAX. */
static uint64_t
sample_first_data (int fd, uint64_t size)
{
  unsigned char buf[SAMPLE_BLOCK];
  size_t len = sample_len (size), j;
  unsigned i;

  for (i = 0; i < SAMPLE_BLOCKS; i++) {
    uint64_t off = sample_offset (size, i);

    if (read_block (fd, off, len, buf) == -1)
      return UINT64_MAX;
    for (j = 0; j < len; j++)
      if (buf[j] != 0)
        return off;
  }
  return UINT64_MAX;
}

/* The first sampled offset where two disks differ, or UINT64_MAX. */
static uint64_t
sample_first_difference (int fd_a, int fd_b, uint64_t size)
{
  unsigned char a[SAMPLE_BLOCK], b[SAMPLE_BLOCK];
  size_t len = sample_len (size);
  unsigned i;

  for (i = 0; i < SAMPLE_BLOCKS; i++) {
    uint64_t off = sample_offset (size, i);

    if (read_block (fd_a, off, len, a) == -1 ||
        read_block (fd_b, off, len, b) == -1)
      return UINT64_MAX;
    if (memcmp (a, b, len) != 0)
      return off;
  }
  return UINT64_MAX;
}

/* Is there valid metadata at base in path already (create-md's own
 * "give --force to overwrite it" then speaks)? */
static bool
metadata_present (const char *md_path, uint64_t base)
{
  struct md md;
  char err[256];
  int fd = open (md_path, O_RDONLY | O_CLOEXEC);
  bool ok;

  if (fd == -1)
    return false;
  ok = md_load (&md, fd, base, MD_ANY_NODE, 0, err, sizeof err) == 0;
  if (ok)
    md_close (&md);
  close (fd);
  return ok;
}

/* --in-sync: compare the sample with every other node's disk that this
 * machine can open and that is not this very file. */
static void
look_in_sync (const char *config_path, const struct repl_config *cfg,
              const struct repl_node_cfg *n, int disk_fd, uint64_t size)
{
  struct stat self, st;
  uint64_t data_at, diff_at;
  size_t i, compared = 0;

  data_at = sample_first_data (disk_fd, size);
  if (data_at == UINT64_MAX)
    return;                     /* all zero where sampled: nothing to say */
  if (fstat (disk_fd, &self) == -1)
    return;
  for (i = 0; i < cfg->cf_nnodes; i++) {
    const struct repl_node_cfg *o = &cfg->cf_nodes[i];
    int fd;

    if (o == n || o->nc_diskless || o->nc_disk == NULL)
      continue;
    fd = open (o->nc_disk, O_RDONLY | O_CLOEXEC);
    if (fd == -1)
      continue;
    if (fstat (fd, &st) == -1 ||
        (st.st_dev == self.st_dev && st.st_ino == self.st_ino) ||
        (S_ISBLK (st.st_mode) && S_ISBLK (self.st_mode) &&
         st.st_rdev == self.st_rdev)) {
      close (fd);               /* the same disk under another name */
      continue;
    }
    compared++;
    diff_at = sample_first_difference (disk_fd, fd, size);
    close (fd);
    if (diff_at != UINT64_MAX)
      fprintf (stderr, "replctl: warning: %s: --in-sync: disk %s of node %s "
               "and disk %s of node %s differ (at offset %" PRIu64 " of a "
               "%d-block sample): they are not in sync; without --in-sync "
               "the first connect copies one to the other\n", config_path,
               n->nc_disk, n->nc_name, o->nc_disk, o->nc_name, diff_at,
               SAMPLE_BLOCKS);
  }
  if (compared == 0)
    fprintf (stderr, "replctl: warning: %s: --in-sync: disk %s of node %s "
             "holds data (at offset %" PRIu64 ") and no other node's disk "
             "is on this machine to compare it with: be sure they are "
             "identical copies (replctl verify compares them once the "
             "nodes run)\n", config_path, n->nc_disk, n->nc_name, data_at);
}

int
md_look_before_create (const char *config_path, const struct repl_config *cfg,
                       const struct repl_node_cfg *n, int disk_fd,
                       uint64_t size, const char *md_path, uint64_t base,
                       bool force, bool in_sync)
{
  char what[128];
  int r;

  if (n->nc_meta_internal && !force && !metadata_present (md_path, base)) {
    r = disk_signature (disk_fd, what, sizeof what);
    if (r == 1) {
      off_t disk_size = lseek (disk_fd, 0, SEEK_END);
      uint64_t taken = disk_size > 0 && (uint64_t) disk_size > size
        ? (uint64_t) disk_size - size : 0;

      fprintf (stderr, "replctl: %s: node %s: disk %s is not empty: "
               "libblkid finds a signature on it (%s).  With meta: internal "
               "the metadata takes the disk's last %" PRIu64 " bytes and "
               "the volume is that much smaller than what was made on the "
               "whole disk, which would be cut off.  Shrink it first, or "
               "use meta: PATH (external metadata keeps the whole disk), "
               "or give --force to write the metadata anyway\n",
               config_path, n->nc_name, n->nc_disk, what, taken);
      return -1;
    }
    if (r == -1)
      fprintf (stderr, "replctl: warning: %s: disk %s: libblkid could not "
               "probe it; nothing checked\n", config_path, n->nc_disk);
  }
  if (in_sync)
    look_in_sync (config_path, cfg, n, disk_fd, size);
  return 0;
}
