/* nbdrepl: the local backing store (regular file or block device).
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <linux/fs.h>

#include "internal.h"
#include "log.h"

/* Open the backing store.  `where` prefixes every error so that it names
 * the configuration file and node, e.g. "r0.yaml: node alpha: ". */
int
volume_open (struct volume *vol, const char *path, const char *where)
{
  struct stat st;
  int fd;

  memset (vol, 0, sizeof *vol);
  vol->vol_fd = -1;
  fd = open (path, O_RDWR | O_CLOEXEC);
  if (fd == -1) {
    log_error ("%sdisk %s: %m", where, path);
    return -1;
  }
  /* One process per disk: a second nbdkit started for a running node
   * must stop here, before it touches the node's metadata. */
  if (flock (fd, LOCK_EX | LOCK_NB) == -1) {
    if (errno == EWOULDBLOCK)
      log_error ("%sdisk %s: in use by another process (is this node "
                 "already running?)", where, path);
    else
      log_error ("%sdisk %s: flock: %m", where, path);
    goto err;
  }
  if (fstat (fd, &st) == -1) {
    log_error ("%sdisk %s: fstat: %m", where, path);
    goto err;
  }
  if (S_ISBLK (st.st_mode)) {
    if (ioctl (fd, BLKGETSIZE64, &vol->vol_size) == -1) {
      log_error ("%sdisk %s: BLKGETSIZE64: %m", where, path);
      goto err;
    }
    vol->vol_is_block = true;
  }
  else if (S_ISREG (st.st_mode))
    vol->vol_size = st.st_size;
  else {
    errno = EINVAL;
    log_error ("%sdisk %s: not a regular file or block device", where,
               path);
    goto err;
  }
  if (vol->vol_size == 0) {
    errno = EINVAL;
    log_error ("%sdisk %s: size is 0 bytes", where, path);
    goto err;
  }
  vol->vol_path = strdup (path);
  if (vol->vol_path == NULL) {
    log_error ("strdup: %m");
    goto err;
  }
  vol->vol_fd = fd;
  return 0;

 err:
  close (fd);
  return -1;
}

/* The backing store's size now, which may have grown since volume_open
 * (replctl resize: server/resize.c).  Returns 0, or -1 with errno. */
int
volume_capacity (struct volume *vol, uint64_t *size)
{
  struct stat st;

  if (vol->vol_is_block)
    return ioctl (vol->vol_fd, BLKGETSIZE64, size);
  if (fstat (vol->vol_fd, &st) == -1)
    return -1;
  *size = st.st_size;
  return 0;
}

void
volume_close (struct volume *vol)
{
  if (vol->vol_fd >= 0)
    close (vol->vol_fd);
  vol->vol_fd = -1;
  free (vol->vol_path);
  vol->vol_path = NULL;
}

int
volume_pread (struct volume *vol, void *buf, uint32_t count, uint64_t offset)
{
  char *p = buf;

  while (count > 0) {
    ssize_t r = pread (vol->vol_fd, p, count, offset);
    if (r == -1) {
      if (errno == EINTR)
        continue;
      log_error ("disk %s: pread at %" PRIu64 ": %m", vol->vol_path, offset);
      return -1;
    }
    if (r == 0) {
      errno = EIO;
      log_error ("disk %s: pread at %" PRIu64 ": unexpected end of file",
                 vol->vol_path, offset);
      return -1;
    }
    p += r;
    count -= r;
    offset += r;
  }
  return 0;
}

int
volume_pwrite (struct volume *vol, const void *buf, uint32_t count,
               uint64_t offset)
{
  const char *p = buf;

  while (count > 0) {
    ssize_t r = pwrite (vol->vol_fd, p, count, offset);
    if (r == -1) {
      if (errno == EINTR)
        continue;
      log_error ("disk %s: pwrite at %" PRIu64 ": %m", vol->vol_path, offset);
      return -1;
    }
    p += r;
    count -= r;
    offset += r;
  }
  return 0;
}

/* Start writing [offset, offset+count) back to the disk without waiting
 * for it, so that a later flush has less left to do (a resync target
 * flushes everything before it says UpToDate).  Advisory: errors are
 * left for that flush to report. */
void
volume_start_writeback (struct volume *vol, uint32_t count, uint64_t offset)
{
  (void) sync_file_range (vol->vol_fd, offset, count,
                          SYNC_FILE_RANGE_WRITE);
}

/* Move exactly count bytes from the pipe pipe_fd to the disk at offset,
 * without copying them through user space (the secondary's receive path
 * for large writes: socket -> pipe -> disk).  On error the pipe may still
 * hold some of the bytes; the caller discards it. */
int
volume_splice_in (struct volume *vol, int pipe_fd, uint32_t count,
                  uint64_t offset)
{
  while (count > 0) {
    loff_t off = offset;
    ssize_t r = splice (pipe_fd, NULL, vol->vol_fd, &off, count,
                        SPLICE_F_MOVE);
    if (r == -1) {
      if (errno == EINTR)
        continue;
      log_error ("disk %s: write (splice) at %" PRIu64 ": %m",
                 vol->vol_path, offset);
      return -1;
    }
    if (r == 0) {
      errno = EIO;
      log_error ("disk %s: write (splice) at %" PRIu64 ": pipe empty",
                 vol->vol_path, offset);
      return -1;
    }
    count -= r;
    offset += r;
  }
  return 0;
}

int
volume_flush (struct volume *vol)
{
  if (fdatasync (vol->vol_fd) == -1) {
    log_error ("disk %s: fdatasync: %m", vol->vol_path);
    return -1;
  }
  return 0;
}

/* Write zeroes the slow way, for when the file system or device has no
 * better means. */
static int
write_zeroes (struct volume *vol, uint32_t count, uint64_t offset)
{
  static const char zeroes[65536];

  while (count > 0) {
    uint32_t n = count < sizeof zeroes ? count : sizeof zeroes;
    if (volume_pwrite (vol, zeroes, n, offset) == -1)
      return -1;
    count -= n;
    offset += n;
  }
  return 0;
}

/* Trim must leave every replica identical, so where a hole cannot be
 * punched (block devices do not promise zeroes after a discard) the
 * range is written with zeroes instead. */
int
volume_trim (struct volume *vol, uint32_t count, uint64_t offset)
{
  return volume_zero (vol, count, offset, true);
}

int
volume_zero (struct volume *vol, uint32_t count, uint64_t offset,
             bool may_trim)
{
  if (!vol->vol_is_block) {
    int mode = may_trim ? FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
                        : FALLOC_FL_ZERO_RANGE;
    if (fallocate (vol->vol_fd, mode, offset, count) == 0)
      return 0;
    if (errno != EOPNOTSUPP && errno != ENODEV) {
      log_error ("disk %s: fallocate at %" PRIu64 ": %m",
                 vol->vol_path, offset);
      return -1;
    }
  }
  else {
    uint64_t range[2] = { offset, count };
    if (ioctl (vol->vol_fd, BLKZEROOUT, range) == 0)
      return 0;
  }
  return write_zeroes (vol, count, offset);
}
