/* nbdrepl: the on-disk metadata of a node.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * Format and crash-safety argument in metadata.h.  Encoders check what
 * they write with the same code the decoders use, so a record that
 * md_write_* accepts is one md_load will accept.  Errors: -1, errno, and
 * one line in the caller's buffer, which the caller logs once (prefixed
 * with the file it opened).
 */
#include <config.h>

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/random.h>

#include "activity-log.h"
#include "bitmap.h"
#include "byte-order.h"
#include "cleanup.h"
#include "crc32c.h"
#include "metadata.h"
#include "uuid-compare.h"
#include "repl-config.h"

_Static_assert (MD_MAX_PEER_SLOTS >= REPL_MAX_NODE_ID,
                "a peer slot for every other node id");
_Static_assert (MD_AL_EMPTY == AL_EMPTY, "one 'empty' in memory and on disk");
_Static_assert (96 + 16 * MD_MAX_PEER_SLOTS <= MD_BLOCK_SIZE,
                "peer table fits the superblock");

#define MD_SUPER_PEERS_OFF   96
#define MD_SUPER_BOOT_OFF    (MD_SUPER_PEERS_OFF + 16 * MD_MAX_PEER_SLOTS)
#define MD_SUPER_PRIMARY_OFF (MD_SUPER_BOOT_OFF + MD_BOOT_ID_SIZE)
#define MD_SUPER_BM_OFF      (MD_SUPER_PRIMARY_OFF + 8)
#define MD_SUPER_END         (MD_SUPER_BM_OFF + 8)
#define MD_PAGE_BITS         (MD_BLOCK_SIZE * 8)
#define MD_PAGE_WORDS        (MD_BLOCK_SIZE / 8)
#define MD_CRCS_PER_BLOCK    (MD_BLOCK_SIZE / 4)
#define MD_IO_PAGES          256        /* bitmap pages per pwrite/pread */

/* Bytes of buffer for count bitmap pages: at most MD_IO_PAGES' worth,
 * so that writing one page does not take a megabyte. */
static inline size_t
md_io_buf_size (uint64_t count)
{
  return (size_t) (count < MD_IO_PAGES ? count : MD_IO_PAGES) * MD_BLOCK_SIZE;
}

/* Fail with errnum, leaving a message in err.  %m in fmt names the errno
 * at the time of the call. */
static int __attribute__ ((format (printf, 4, 5)))
md_error (char *err, size_t errlen, int errnum, const char *fmt, ...)
{
  va_list ap;

  if (err != NULL && errlen > 0) {
    va_start (ap, fmt);
    vsnprintf (err, errlen, fmt, ap);
    va_end (ap);
  }
  errno = errnum;
  return -1;
}

static inline bool
is_pow2 (uint64_t v)
{
  return v != 0 && (v & (v - 1)) == 0;
}

static inline uint64_t
div_round_up (uint64_t a, uint64_t b)
{
  return a / b + (a % b != 0);
}

/* The first byte is 0 and every byte equals the next: memcmp does the
 * comparing, word-wide (a superblock has 3.5 KiB that must be zero). */
static bool
all_zero (const uint8_t *p, size_t len)
{
  return len == 0 || (p[0] == 0 && memcmp (p, p + 1, len - 1) == 0);
}

/* The checksum of a record of len bytes, its crc field counted as 0. */
static uint32_t
md_record_crc (const uint8_t *rec, size_t len)
{
  static const uint8_t zero[4];
  uint32_t crc;

  crc = crc32c (0, rec, 8);
  crc = crc32c (crc, zero, 4);
  return crc32c (crc, rec + 12, len - 12);
}

static void
md_put_record_hdr (uint8_t *rec, enum md_record_type type, uint16_t version,
                   uint32_t len, uint64_t seq, uint64_t instance)
{
  put_be32 (rec + 0, MD_MAGIC);
  put_be16 (rec + 4, type);
  put_be16 (rec + 6, version);
  put_be32 (rec + 8, 0);
  put_be32 (rec + 12, len);
  put_be64 (rec + 16, seq);
  put_be64 (rec + 24, instance);
}

static void
md_seal_record (uint8_t *rec, size_t len)
{
  put_be32 (rec + 8, md_record_crc (rec, len));
}

/* The checks every record shares, in an order that gives the most
 * useful message: magic, version, type, length, checksum, seq.  A
 * version up to max_version passes (a superblock may be version 2). */
static int
md_check_record_hdr (const uint8_t *rec, enum md_record_type type,
                     uint16_t max_version, uint32_t len,
                     char *err, size_t errlen)
{
  uint32_t magic = get_be32 (rec + 0);
  uint16_t rtype = get_be16 (rec + 4);
  uint16_t version = get_be16 (rec + 6);
  uint32_t stored = get_be32 (rec + 8);
  uint32_t rlen = get_be32 (rec + 12);
  uint32_t computed;

  if (magic != MD_MAGIC)
    return md_error (err, errlen, EINVAL, "bad magic 0x%08" PRIx32, magic);
  if (version < MD_FORMAT_VERSION || version > max_version)
    return md_error (err, errlen, EINVAL,
                     "format version %" PRIu16 ", this program knows %d%s",
                     version, MD_FORMAT_VERSION,
                     max_version > MD_FORMAT_VERSION
                     ? " and 2 (superblocks whose bitmaps moved)" : "");
  if (rtype != type)
    return md_error (err, errlen, EINVAL,
                     "record type %" PRIu16 ", want %d", rtype, (int) type);
  if (rlen != len)
    return md_error (err, errlen, EINVAL,
                     "record length %" PRIu32 ", want %" PRIu32, rlen, len);
  computed = md_record_crc (rec, len);
  if (computed != stored)
    return md_error (err, errlen, EINVAL,
                     "checksum mismatch (stored 0x%08" PRIx32
                     ", computed 0x%08" PRIx32 ")", stored, computed);
  if (get_be64 (rec + 16) == 0)
    return md_error (err, errlen, EINVAL, "sequence number 0");
  if (get_be64 (rec + 24) == 0)
    return md_error (err, errlen, EINVAL, "instance 0");
  return 0;
}

void
md_params_init (struct md_params *p, uint32_t node_id, uint64_t size)
{
  uint32_t i;

  memset (p, 0, sizeof *p);
  p->pa_node_id = node_id;
  p->pa_geom = (struct md_geometry) {
    .mg_size = size,
    .mg_granularity = MD_DEFAULT_GRANULARITY,
    .mg_al_extent_size = MD_DEFAULT_AL_EXTENT_SIZE,
    .mg_al_extents = MD_DEFAULT_AL_EXTENTS,
    .mg_al_ring = MD_DEFAULT_AL_RING,
    .mg_npeers = MD_DEFAULT_PEER_SLOTS,
  };
  for (i = 0; i < MD_MAX_PEER_SLOTS; ++i)
    p->pa_peer_ids[i] = MD_NO_PEER;
}

int
md_layout (const struct md_geometry *g, struct md_layout *l,
           char *err, size_t errlen)
{
  uint64_t vol_extents, bm_bytes, total;

  memset (l, 0, sizeof *l);
  if (g->mg_size == 0 || g->mg_size > MD_MAX_SIZE)
    return md_error (err, errlen, EINVAL,
                     "volume size %" PRIu64 " out of range 1..%" PRIu64,
                     g->mg_size, MD_MAX_SIZE);
  if (!is_pow2 (g->mg_granularity) ||
      g->mg_granularity < MD_MIN_GRANULARITY ||
      g->mg_granularity > MD_MAX_GRANULARITY)
    return md_error (err, errlen, EINVAL,
                     "bitmap granularity %" PRIu32 " is not a power of 2 "
                     "in %u..%u", g->mg_granularity,
                     MD_MIN_GRANULARITY, MD_MAX_GRANULARITY);
  if (!is_pow2 (g->mg_al_extent_size) ||
      g->mg_al_extent_size < MD_MIN_AL_EXTENT_SIZE ||
      g->mg_al_extent_size > MD_MAX_AL_EXTENT_SIZE)
    return md_error (err, errlen, EINVAL,
                     "activity-log extent size %" PRIu32 " is not a power "
                     "of 2 in %u..%u", g->mg_al_extent_size,
                     MD_MIN_AL_EXTENT_SIZE, MD_MAX_AL_EXTENT_SIZE);
  if (g->mg_al_extent_size < g->mg_granularity)
    return md_error (err, errlen, EINVAL,
                     "activity-log extent size %" PRIu32 " < bitmap "
                     "granularity %" PRIu32, g->mg_al_extent_size,
                     g->mg_granularity);
  if (g->mg_al_extents == 0 || g->mg_al_extents > MD_MAX_AL_EXTENTS)
    return md_error (err, errlen, EINVAL,
                     "activity-log extents %" PRIu32 " out of range 1..%u",
                     g->mg_al_extents, MD_MAX_AL_EXTENTS);
  if (g->mg_al_ring < 2 || g->mg_al_ring > MD_MAX_AL_RING)
    return md_error (err, errlen, EINVAL,
                     "activity-log ring %" PRIu32 " out of range 2..%u",
                     g->mg_al_ring, MD_MAX_AL_RING);
  if (g->mg_npeers > MD_MAX_PEER_SLOTS)
    return md_error (err, errlen, EINVAL,
                     "peer slots %" PRIu32 " out of range 0..%u",
                     g->mg_npeers, MD_MAX_PEER_SLOTS);
  vol_extents = div_round_up (g->mg_size, g->mg_al_extent_size);
  if (vol_extents >= MD_AL_EMPTY)
    return md_error (err, errlen, EINVAL,
                     "volume size %" PRIu64 " has %" PRIu64 " activity-log "
                     "extents of %" PRIu32 " bytes, more than %" PRIu32,
                     g->mg_size, vol_extents, g->mg_al_extent_size,
                     MD_AL_EMPTY - 1);

  l->ml_vol_extents = vol_extents;
  l->ml_al_offset = 2 * MD_BLOCK_SIZE;
  l->ml_txn_size = div_round_up (MD_AL_HDR_SIZE +
                                 4 * (uint64_t) g->mg_al_extents,
                                 MD_BLOCK_SIZE) * MD_BLOCK_SIZE;
  l->ml_bm_offset = l->ml_al_offset +
                    (uint64_t) g->mg_al_ring * l->ml_txn_size;
  if (g->mg_bm_offset != 0) {
    if (g->mg_bm_offset % MD_BLOCK_SIZE != 0 ||
        g->mg_bm_offset < l->ml_bm_offset ||
        g->mg_bm_offset > MD_MAX_BM_OFFSET)
      return md_error (err, errlen, EINVAL,
                       "bitmap offset %" PRIu64 " is not a multiple of %d "
                       "in %" PRIu64 "..%" PRIu64, g->mg_bm_offset,
                       MD_BLOCK_SIZE, l->ml_bm_offset, MD_MAX_BM_OFFSET);
    l->ml_bm_offset = g->mg_bm_offset;
  }
  l->ml_bm_nbits = div_round_up (g->mg_size, g->mg_granularity);
  bm_bytes = div_round_up (l->ml_bm_nbits, 8);
  l->ml_bm_pages = div_round_up (bm_bytes, MD_BLOCK_SIZE);
  l->ml_crc_blocks = div_round_up (l->ml_bm_pages, MD_CRCS_PER_BLOCK);
  l->ml_peer_size = (l->ml_crc_blocks + l->ml_bm_pages) * MD_BLOCK_SIZE;
  /* At most 2^60 / 512 bits = 2^48 bytes per peer, times 31, after at
   * most 2^61: no overflow. */
  total = l->ml_bm_offset + g->mg_npeers * l->ml_peer_size;
  l->ml_total = total;
  return 0;
}

int
md_internal_place (uint64_t dev_size, struct md_geometry *g, uint64_t *base,
                   char *err, size_t errlen)
{
  struct md_geometry g0 = *g;
  struct md_layout l0, l1;
  uint64_t b;

  /* The area for the whole device is at least as big as the one for the
   * volume in front of it, so it fits behind that volume. */
  g0.mg_size = dev_size;
  g0.mg_bm_offset = g->mg_bm_offset = 0;     /* the area never grows here */
  if (md_layout (&g0, &l0, err, errlen) == -1)
    return -1;
  if (dev_size < l0.ml_total + MD_BLOCK_SIZE)
    return md_error (err, errlen, ENOSPC,
                     "device of %" PRIu64 " bytes is too small for %" PRIu64
                     " bytes of metadata", dev_size, l0.ml_total);
  b = (dev_size - l0.ml_total) & ~(uint64_t) (MD_BLOCK_SIZE - 1);
  g->mg_size = b;
  if (md_layout (g, &l1, err, errlen) == -1)
    return -1;
  assert (b + l1.ml_total <= dev_size);
  *base = b;
  return 0;
}

/* Everything in a superblock but the record header; node_id and geometry
 * first, since the peer checks need them. */
static int
md_check_super (const struct md_super *sb, const uint8_t *raw,
                char *err, size_t errlen)
{
  struct md_layout l;
  char lerr[160];
  uint32_t i, j;

  if (sb->ms_node_id > REPL_MAX_NODE_ID)
    return md_error (err, errlen, EINVAL,
                     "node id %" PRIu32 " > %d", sb->ms_node_id,
                     REPL_MAX_NODE_ID);
  if ((sb->ms_flags & ~MD_FLAGS_KNOWN) != 0)
    return md_error (err, errlen, EINVAL, "unknown flags 0x%" PRIx32,
                     sb->ms_flags & ~MD_FLAGS_KNOWN);
  if (md_layout (&sb->ms_geom, &l, lerr, sizeof lerr) == -1)
    return md_error (err, errlen, EINVAL, "%s", lerr);
  if (raw != NULL && get_be32 (raw + 68) != 0)
    return md_error (err, errlen, EINVAL, "reserved field at 68 not zero");
  if (sb->ms_current_uuid == 0)
    return md_error (err, errlen, EINVAL, "current UUID 0");

  for (i = 0; i < sb->ms_geom.mg_npeers; ++i) {
    const struct md_peer *pr = &sb->ms_peers[i];

    if (pr->mp_node_id == MD_NO_PEER) {
      if (pr->mp_flags != 0 || pr->mp_bitmap_uuid != 0)
        return md_error (err, errlen, EINVAL,
                         "peer slot %" PRIu32 ": free but flags or bitmap "
                         "UUID set", i);
      continue;
    }
    if (pr->mp_node_id > REPL_MAX_NODE_ID)
      return md_error (err, errlen, EINVAL,
                       "peer slot %" PRIu32 ": node id %" PRIu32 " > %d",
                       i, pr->mp_node_id, REPL_MAX_NODE_ID);
    if (pr->mp_node_id == sb->ms_node_id)
      return md_error (err, errlen, EINVAL,
                       "peer slot %" PRIu32 ": node id %" PRIu32
                       " is this node's own", i, pr->mp_node_id);
    for (j = 0; j < i; ++j)
      if (sb->ms_peers[j].mp_node_id == pr->mp_node_id)
        return md_error (err, errlen, EINVAL,
                         "peer slots %" PRIu32 " and %" PRIu32
                         ": both node id %" PRIu32, j, i, pr->mp_node_id);
    if ((pr->mp_flags & ~MD_PEER_FLAGS_KNOWN) != 0)
      return md_error (err, errlen, EINVAL,
                       "peer slot %" PRIu32 ": unknown flags 0x%" PRIx32,
                       i, pr->mp_flags & ~MD_PEER_FLAGS_KNOWN);
  }
  for (; i < MD_MAX_PEER_SLOTS; ++i) {
    const struct md_peer *pr = &sb->ms_peers[i];

    if (raw != NULL
        ? !all_zero (raw + MD_SUPER_PEERS_OFF + 16 * i, 16)
        : (pr->mp_node_id != MD_NO_PEER || pr->mp_flags != 0 ||
           pr->mp_bitmap_uuid != 0))
      return md_error (err, errlen, EINVAL,
                       "peer slot %" PRIu32 " beyond npeers %" PRIu32
                       " not empty", i, sb->ms_geom.mg_npeers);
  }
  if (raw != NULL && !all_zero (raw + MD_SUPER_END,
                                MD_BLOCK_SIZE - MD_SUPER_END))
    return md_error (err, errlen, EINVAL,
                     "reserved bytes %d..%d not zero", MD_SUPER_END,
                     MD_BLOCK_SIZE - 1);
  return 0;
}

int
md_decode_super (const uint8_t in[MD_BLOCK_SIZE], struct md_super *sb,
                 char *err, size_t errlen)
{
  uint32_t i;

  memset (sb, 0, sizeof *sb);
  if (md_check_record_hdr (in, MD_REC_SUPER, MD_FORMAT_VERSION_MOVED,
                           MD_BLOCK_SIZE, err, errlen) == -1)
    return -1;
  sb->ms_seq = get_be64 (in + 16);
  sb->ms_instance = get_be64 (in + 24);
  sb->ms_node_id = get_be32 (in + 32);
  sb->ms_flags = get_be32 (in + 36);
  sb->ms_geom.mg_size = get_be64 (in + 40);
  sb->ms_geom.mg_granularity = get_be32 (in + 48);
  sb->ms_geom.mg_al_extent_size = get_be32 (in + 52);
  sb->ms_geom.mg_al_extents = get_be32 (in + 56);
  sb->ms_geom.mg_al_ring = get_be32 (in + 60);
  sb->ms_geom.mg_npeers = get_be32 (in + 64);
  sb->ms_current_uuid = get_be64 (in + 72);
  for (i = 0; i < MD_UUID_HISTORY; ++i)
    sb->ms_history_uuid[i] = get_be64 (in + 80 + 8 * i);
  for (i = 0; i < MD_MAX_PEER_SLOTS; ++i) {
    const uint8_t *p = in + MD_SUPER_PEERS_OFF + 16 * i;

    if (i < sb->ms_geom.mg_npeers) {
      sb->ms_peers[i].mp_node_id = get_be32 (p);
      sb->ms_peers[i].mp_flags = get_be32 (p + 4);
      sb->ms_peers[i].mp_bitmap_uuid = get_be64 (p + 8);
    }
    else
      sb->ms_peers[i].mp_node_id = MD_NO_PEER;
  }
  memcpy (sb->ms_boot_id, in + MD_SUPER_BOOT_OFF, MD_BOOT_ID_SIZE);
  sb->ms_primary_since = get_be64 (in + MD_SUPER_PRIMARY_OFF);
  sb->ms_geom.mg_bm_offset = get_be64 (in + MD_SUPER_BM_OFF);
  /* The version says whether the field is used (metadata.h). */
  if ((get_be16 (in + 6) == MD_FORMAT_VERSION_MOVED) !=
      (sb->ms_geom.mg_bm_offset != 0))
    return md_error (err, errlen, EINVAL,
                     "format version %" PRIu16 " with bitmap offset %"
                     PRIu64, get_be16 (in + 6), sb->ms_geom.mg_bm_offset);
  return md_check_super (sb, in, err, errlen);
}

int
md_encode_super (const struct md_super *sb, uint8_t out[MD_BLOCK_SIZE],
                 char *err, size_t errlen)
{
  uint32_t i;

  if (sb->ms_seq == 0 || sb->ms_instance == 0)
    return md_error (err, errlen, EINVAL, "%s 0",
                     sb->ms_seq == 0 ? "sequence number" : "instance");
  if (md_check_super (sb, NULL, err, errlen) == -1)
    return -1;

  memset (out, 0, MD_BLOCK_SIZE);
  md_put_record_hdr (out, MD_REC_SUPER,
                     sb->ms_geom.mg_bm_offset != 0 ? MD_FORMAT_VERSION_MOVED
                                                   : MD_FORMAT_VERSION,
                     MD_BLOCK_SIZE, sb->ms_seq, sb->ms_instance);
  put_be32 (out + 32, sb->ms_node_id);
  put_be32 (out + 36, sb->ms_flags);
  put_be64 (out + 40, sb->ms_geom.mg_size);
  put_be32 (out + 48, sb->ms_geom.mg_granularity);
  put_be32 (out + 52, sb->ms_geom.mg_al_extent_size);
  put_be32 (out + 56, sb->ms_geom.mg_al_extents);
  put_be32 (out + 60, sb->ms_geom.mg_al_ring);
  put_be32 (out + 64, sb->ms_geom.mg_npeers);
  put_be64 (out + 72, sb->ms_current_uuid);
  for (i = 0; i < MD_UUID_HISTORY; ++i)
    put_be64 (out + 80 + 8 * i, sb->ms_history_uuid[i]);
  for (i = 0; i < sb->ms_geom.mg_npeers; ++i) {
    uint8_t *p = out + MD_SUPER_PEERS_OFF + 16 * i;

    put_be32 (p, sb->ms_peers[i].mp_node_id);
    put_be32 (p + 4, sb->ms_peers[i].mp_flags);
    put_be64 (p + 8, sb->ms_peers[i].mp_bitmap_uuid);
  }
  memcpy (out + MD_SUPER_BOOT_OFF, sb->ms_boot_id, MD_BOOT_ID_SIZE);
  put_be64 (out + MD_SUPER_PRIMARY_OFF, sb->ms_primary_since);
  put_be64 (out + MD_SUPER_BM_OFF, sb->ms_geom.mg_bm_offset);
  md_seal_record (out, MD_BLOCK_SIZE);
  return 0;
}

static int
md_cmp_u32 (const void *a, const void *b)
{
  uint32_t x = *(const uint32_t *) a, y = *(const uint32_t *) b;

  return x < y ? -1 : x > y;
}

/* Entries in range, no extent twice; *nactive gets the non-empty count. */
static int
md_check_al_table (const struct md_layout *l, const uint32_t *table,
                   uint32_t n, uint32_t *nactive, char *err, size_t errlen)
{
  CLEANUP_FREE uint32_t *sorted = NULL;
  uint32_t i, k = 0;

  sorted = malloc (n * sizeof *sorted);
  if (sorted == NULL)
    return md_error (err, errlen, ENOMEM, "malloc: %m");
  for (i = 0; i < n; ++i) {
    if (table[i] == MD_AL_EMPTY)
      continue;
    if (table[i] >= l->ml_vol_extents)
      return md_error (err, errlen, EINVAL,
                       "activity-log slot %" PRIu32 ": extent %" PRIu32
                       " beyond the volume's %" PRIu32, i, table[i],
                       l->ml_vol_extents);
    sorted[k++] = table[i];
  }
  qsort (sorted, k, sizeof *sorted, md_cmp_u32);
  for (i = 1; i < k; ++i)
    if (sorted[i] == sorted[i - 1])
      return md_error (err, errlen, EINVAL,
                       "activity-log extent %" PRIu32 " twice", sorted[i]);
  *nactive = k;
  return 0;
}

int
md_encode_al (const struct md_geometry *g, const struct md_layout *l,
              uint64_t instance, uint64_t seq, const uint32_t *table,
              uint8_t *out, char *err, size_t errlen)
{
  uint32_t i, nactive;

  if (seq == 0 || instance == 0)
    return md_error (err, errlen, EINVAL, "%s 0",
                     seq == 0 ? "sequence number" : "instance");
  if (md_check_al_table (l, table, g->mg_al_extents, &nactive,
                         err, errlen) == -1)
    return -1;
  memset (out, 0, l->ml_txn_size);
  md_put_record_hdr (out, MD_REC_AL, MD_FORMAT_VERSION, l->ml_txn_size,
                     seq, instance);
  put_be32 (out + 32, g->mg_al_extents);
  put_be32 (out + 36, nactive);
  for (i = 0; i < g->mg_al_extents; ++i)
    put_be32 (out + MD_AL_HDR_SIZE + 4 * i, table[i]);
  md_seal_record (out, l->ml_txn_size);
  return 0;
}

int
md_decode_al (const struct md_geometry *g, const struct md_layout *l,
              uint64_t instance, const uint8_t *in, uint64_t *seq,
              uint32_t *table, char *err, size_t errlen)
{
  uint32_t i, n, nactive, counted;
  size_t end;

  if (md_check_record_hdr (in, MD_REC_AL, MD_FORMAT_VERSION,
                           l->ml_txn_size, err, errlen) == -1)
    return -1;
  if (get_be64 (in + 24) != instance)
    return md_error (err, errlen, EINVAL,
                     "instance 0x%016" PRIx64 ", not the superblock's "
                     "0x%016" PRIx64, get_be64 (in + 24), instance);
  n = get_be32 (in + 32);
  if (n != g->mg_al_extents)
    return md_error (err, errlen, EINVAL,
                     "%" PRIu32 " slots, the superblock says %" PRIu32,
                     n, g->mg_al_extents);
  nactive = get_be32 (in + 36);
  for (i = 0; i < n; ++i)
    table[i] = get_be32 (in + MD_AL_HDR_SIZE + 4 * i);
  if (md_check_al_table (l, table, n, &counted, err, errlen) == -1)
    return -1;
  if (counted != nactive)
    return md_error (err, errlen, EINVAL,
                     "%" PRIu32 " active extents, the header says %" PRIu32,
                     counted, nactive);
  end = MD_AL_HDR_SIZE + 4 * (size_t) n;
  if (!all_zero (in + end, l->ml_txn_size - end))
    return md_error (err, errlen, EINVAL, "padding after the table not zero");
  *seq = get_be64 (in + 16);
  return 0;
}

/* pread until len bytes or end of file; returns the bytes read. */
static ssize_t
md_pread (int fd, void *buf, size_t len, uint64_t off)
{
  size_t done = 0;

  while (done < len) {
    ssize_t r = pread (fd, (char *) buf + done, len - done, off + done);

    if (r == -1) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    if (r == 0)
      break;
    done += r;
  }
  return done;
}

/* Read exactly len bytes at base + off; what names the part for errors. */
static int
md_read_exact (const struct md *md, void *buf, size_t len, uint64_t off,
               const char *what, char *err, size_t errlen)
{
  ssize_t r = md_pread (md->md_fd, buf, len, md->md_base + off);

  if (r == -1)
    return md_error (err, errlen, errno, "read %s at offset %" PRIu64 ": %m",
                     what, md->md_base + off);
  if ((size_t) r < len)
    return md_error (err, errlen, EINVAL,
                     "metadata ends at offset %" PRIu64 ", inside the %s "
                     "(%zu bytes at offset %" PRIu64 ")",
                     md->md_base + off + r, what, len, md->md_base + off);
  return 0;
}

static int
md_write_exact (const struct md *md, const void *buf, size_t len,
                uint64_t off, const char *what, char *err, size_t errlen)
{
  size_t done = 0;

  while (done < len) {
    ssize_t r = pwrite (md->md_fd, (const char *) buf + done, len - done,
                        md->md_base + off + done);

    if (r == -1) {
      if (errno == EINTR)
        continue;
      return md_error (err, errlen, errno,
                       "write %s at offset %" PRIu64 ": %m", what,
                       md->md_base + off + done);
    }
    done += r;
  }
  return 0;
}

static int
md_sync (const struct md *md, const char *what, char *err, size_t errlen)
{
  if (fdatasync (md->md_fd) == -1)
    return md_error (err, errlen, errno, "fdatasync after %s: %m", what);
  return 0;
}

static int
md_random64 (uint64_t *v, char *err, size_t errlen)
{
  do {
    ssize_t r = getrandom (v, sizeof *v, 0);

    if (r == -1 && errno == EINTR)
      continue;
    if (r != sizeof *v)
      return md_error (err, errlen, r == -1 ? errno : EIO, "getrandom: %s",
                       r == -1 ? strerror (errno) : "short read");
  } while (*v == 0);
  return 0;
}

static uint32_t *
md_crc_entry (const struct md *md, unsigned slot, uint64_t page)
{
  return &md->md_crcs[slot * md->md_layout.ml_bm_pages + page];
}

static uint64_t
md_peer_offset (const struct md *md, unsigned slot)
{
  return md->md_layout.ml_bm_offset + slot * md->md_layout.ml_peer_size;
}

/* Write checksum blocks [b0, b1) of a peer from md_crcs. */
static int
md_write_crc_blocks (struct md *md, unsigned slot, uint64_t b0, uint64_t b1,
                     char *err, size_t errlen)
{
  const struct md_layout *l = &md->md_layout;
  CLEANUP_FREE uint8_t *buf = NULL;
  uint64_t b, i, page;

  buf = malloc (MD_BLOCK_SIZE);
  if (buf == NULL)
    return md_error (err, errlen, ENOMEM, "malloc: %m");
  for (b = b0; b < b1; ++b) {
    memset (buf, 0, MD_BLOCK_SIZE);
    for (i = 0; i < MD_CRCS_PER_BLOCK; ++i) {
      page = b * MD_CRCS_PER_BLOCK + i;
      if (page >= l->ml_bm_pages)
        break;
      put_be32 (buf + 4 * i, *md_crc_entry (md, slot, page));
    }
    if (md_write_exact (md, buf, MD_BLOCK_SIZE,
                        md_peer_offset (md, slot) + b * MD_BLOCK_SIZE,
                        "bitmap checksums", err, errlen) == -1)
      return -1;
  }
  return 0;
}

/* Page `page` of a bitmap where every chunk is clear or every one is
 * set (only bits below ml_bm_nbits). */
static void
md_fill_page (const struct md_layout *l, uint64_t page, bool set,
              uint8_t *buf)
{
  uint64_t first = page * MD_PAGE_BITS, nbits;

  memset (buf, 0, MD_BLOCK_SIZE);
  if (!set || first >= l->ml_bm_nbits)
    return;
  nbits = l->ml_bm_nbits - first;
  if (nbits >= MD_PAGE_BITS) {
    memset (buf, 0xff, MD_BLOCK_SIZE);
    return;
  }
  memset (buf, 0xff, nbits / 8);
  if (nbits % 8 != 0)
    buf[nbits / 8] = (1u << (nbits % 8)) - 1;
}

/* A whole peer bitmap, clear or set, with its checksums. */
static int
md_init_peer_bitmap (struct md *md, unsigned slot, bool set,
                     char *err, size_t errlen)
{
  const struct md_layout *l = &md->md_layout;
  CLEANUP_FREE uint8_t *buf = NULL;
  uint64_t page, n, i, off;

  buf = malloc (md_io_buf_size (l->ml_bm_pages));
  if (buf == NULL)
    return md_error (err, errlen, ENOMEM, "malloc: %m");
  off = md_peer_offset (md, slot) + l->ml_crc_blocks * MD_BLOCK_SIZE;
  for (page = 0; page < l->ml_bm_pages; page += n) {
    n = l->ml_bm_pages - page < MD_IO_PAGES ? l->ml_bm_pages - page
                                            : MD_IO_PAGES;
    for (i = 0; i < n; ++i) {
      uint8_t *p = buf + i * MD_BLOCK_SIZE;

      /* Page by page, checksum and all: simple, and it runs once per
       * md_create. */
      md_fill_page (l, page + i, set, p);
      *md_crc_entry (md, slot, page + i) = crc32c (0, p, MD_BLOCK_SIZE);
    }
    if (md_write_exact (md, buf, n * MD_BLOCK_SIZE,
                        off + page * MD_BLOCK_SIZE, "bitmap",
                        err, errlen) == -1)
      return -1;
  }
  return md_write_crc_blocks (md, slot, 0, l->ml_crc_blocks, err, errlen);
}

/* Fill in md from a superblock: layout and the arrays. */
static int
md_setup (struct md *md, int fd, uint64_t base, const struct md_super *sb,
          char *err, size_t errlen)
{
  const struct md_geometry *g = &sb->ms_geom;
  uint64_t ncrcs;

  memset (md, 0, sizeof *md);
  md->md_fd = fd;
  md->md_base = base;
  md->md_super = *sb;
  if (md_layout (g, &md->md_layout, err, errlen) == -1)
    return -1;
  if (base > INT64_MAX || md->md_layout.ml_total > INT64_MAX - base)
    return md_error (err, errlen, EINVAL,
                     "metadata of %" PRIu64 " bytes at offset %" PRIu64
                     " ends beyond the largest file offset",
                     md->md_layout.ml_total, base);
  ncrcs = g->mg_npeers * md->md_layout.ml_bm_pages;
  if (ncrcs > SIZE_MAX / sizeof (uint32_t))
    return md_error (err, errlen, ENOMEM, "%" PRIu64 " page checksums: "
                     "too many", ncrcs);
  md->md_al_table = malloc (g->mg_al_extents * sizeof (uint32_t));
  md->md_crcs = calloc (ncrcs > 0 ? ncrcs : 1, sizeof (uint32_t));
  if (md->md_al_table == NULL || md->md_crcs == NULL) {
    free (md->md_al_table);
    free (md->md_crcs);
    md->md_al_table = NULL;
    md->md_crcs = NULL;
    return md_error (err, errlen, ENOMEM, "malloc: %m");
  }
  md->md_magic = MD_HANDLE_MAGIC;
  return 0;
}

void
md_close (struct md *md)
{
  int e = errno;                /* error paths close and return -1 */

  if (md->md_magic == MD_HANDLE_MAGIC) {
    free (md->md_al_table);
    free (md->md_crcs);
  }
  memset (md, 0, sizeof *md);
  md->md_fd = -1;
  errno = e;
}

/* What the two superblock slots at base hold, for md_create's refusal:
 * 1 if either has our magic (described in desc), 0 if neither, -1 if
 * they cannot be read. */
static int
md_exists (int fd, uint64_t base, char *desc, size_t desclen,
           char *err, size_t errlen)
{
  uint8_t buf[2 * MD_BLOCK_SIZE];
  ssize_t r;
  size_t used = 0;
  bool found = false;
  unsigned s;

  memset (buf, 0, sizeof buf);
  r = md_pread (fd, buf, sizeof buf, base);
  if (r == -1)
    return md_error (err, errlen, errno,
                     "read superblocks at offset %" PRIu64 ": %m", base);
  desc[0] = '\0';
  for (s = 0; s < 2; ++s) {
    const uint8_t *blk = buf + s * MD_BLOCK_SIZE;
    struct md_super sb;
    char why[160];
    int n;

    if (get_be32 (blk) != MD_MAGIC)
      continue;
    if (md_decode_super (blk, &sb, why, sizeof why) == 0)
      n = snprintf (desc + used, desclen - used,
                    "%sslot %c: node id %" PRIu32 ", %" PRIu64 " bytes, "
                    "seq %" PRIu64, found ? "; " : "", "AB"[s],
                    sb.ms_node_id, sb.ms_geom.mg_size, sb.ms_seq);
    else
      n = snprintf (desc + used, desclen - used, "%sslot %c: damaged (%s)",
                    found ? "; " : "", "AB"[s], why);
    if (n > 0)
      used += (size_t) n < desclen - used ? (size_t) n : desclen - used - 1;
    found = true;
  }
  return found;
}

int
md_create (struct md *md, int fd, uint64_t base, const struct md_params *p,
           bool force, char *err, size_t errlen)
{
  const struct md_geometry *g = &p->pa_geom;
  CLEANUP_FREE uint8_t *buf = NULL;
  struct md_super sb;
  uint8_t super[MD_BLOCK_SIZE];
  char desc[400];
  uint32_t i;

  memset (md, 0, sizeof *md);
  md->md_fd = -1;

  /* The superblock that will be written, checked before anything is. */
  memset (&sb, 0, sizeof sb);
  sb.ms_seq = 1;
  sb.ms_node_id = p->pa_node_id;
  sb.ms_flags = MD_FLAG_CLEAN |
                (p->pa_in_sync ? MD_FLAG_CONSISTENT | MD_FLAG_WAS_UPTODATE
                               : 0);
  sb.ms_geom = *g;
  for (i = 0; i < MD_MAX_PEER_SLOTS; ++i)
    sb.ms_peers[i].mp_node_id = i < g->mg_npeers ? p->pa_peer_ids[i]
                                                 : MD_NO_PEER;
  if (md_random64 (&sb.ms_instance, err, errlen) == -1)
    return -1;
  sb.ms_current_uuid = p->pa_current_uuid;
  if (sb.ms_current_uuid == 0 &&
      md_random64 (&sb.ms_current_uuid, err, errlen) == -1)
    return -1;
  if (md_encode_super (&sb, super, err, errlen) == -1)
    return -1;

  switch (md_exists (fd, base, desc, sizeof desc, err, errlen)) {
  case -1:
    return -1;
  case 1:
    if (!force)
      return md_error (err, errlen, EEXIST,
                       "metadata already present (%s)", desc);
    break;
  }

  if (md_setup (md, fd, base, &sb, err, errlen) == -1)
    goto fail;

  /* 1. No valid superblock from here on until the end. */
  buf = calloc (1, md->md_layout.ml_txn_size > 2 * MD_BLOCK_SIZE
                   ? md->md_layout.ml_txn_size : 2 * MD_BLOCK_SIZE);
  if (buf == NULL) {
    md_error (err, errlen, ENOMEM, "malloc: %m");
    goto fail;
  }
  if (md_write_exact (md, buf, 2 * MD_BLOCK_SIZE, 0, "superblocks",
                      err, errlen) == -1 ||
      md_sync (md, "clearing the superblocks", err, errlen) == -1)
    goto fail;

  /* 2. Transaction 1, empty, in ring slot 0; the other slots zero. */
  for (i = 0; i < g->mg_al_extents; ++i)
    md->md_al_table[i] = MD_AL_EMPTY;
  for (i = 0; i < g->mg_al_ring; ++i) {
    if (i == 0) {
      if (md_encode_al (g, &md->md_layout, sb.ms_instance, 1,
                        md->md_al_table, buf, err, errlen) == -1)
        goto fail;
    }
    else
      memset (buf, 0, md->md_layout.ml_txn_size);
    if (md_write_exact (md, buf, md->md_layout.ml_txn_size,
                        md->md_layout.ml_al_offset +
                        (uint64_t) i * md->md_layout.ml_txn_size,
                        "activity log", err, errlen) == -1)
      goto fail;
  }
  md->md_al_seq = 1;
  md->md_al_slot = 0;
  md->md_al_valid = 1;

  /* 3. The bitmaps. */
  for (i = 0; i < g->mg_npeers; ++i)
    if (md_init_peer_bitmap (md, i, !p->pa_in_sync, err, errlen) == -1)
      goto fail;
  if (md_sync (md, "writing the activity log and bitmaps",
               err, errlen) == -1)
    goto fail;

  /* 4. Superblock A makes it all valid. */
  if (md_write_exact (md, super, MD_BLOCK_SIZE, 0, "superblock slot A",
                      err, errlen) == -1 ||
      md_sync (md, "writing superblock slot A", err, errlen) == -1)
    goto fail;
  md->md_super_slot = 0;
  md->md_other_seq = 0;
  snprintf (md->md_other_why, sizeof md->md_other_why, "empty");
  return 0;

 fail:
  md_close (md);                /* keeps errno */
  return -1;
}

int
md_check (const struct md *md, uint32_t node_id, uint64_t size,
          char *err, size_t errlen)
{
  const struct md_super *sb = &md->md_super;

  assert (md->md_magic == MD_HANDLE_MAGIC);
  if (node_id != MD_ANY_NODE && sb->ms_node_id != node_id)
    return md_error (err, errlen, EINVAL,
                     "node id mismatch: the metadata belongs to node id %"
                     PRIu32 ", this node has id %" PRIu32,
                     sb->ms_node_id, node_id);
  if (size != 0 && sb->ms_geom.mg_size != size)
    return md_error (err, errlen, EINVAL,
                     "volume size mismatch: the metadata says %" PRIu64
                     " bytes, the disk has %" PRIu64,
                     sb->ms_geom.mg_size, size);
  return 0;
}

/* Pick the superblock: the valid slot with the higher seq. */
static int
md_load_super (int fd, uint64_t base, struct md_super *sb, unsigned *slot,
               uint64_t *other_seq, char *other_why, size_t whylen,
               char *err, size_t errlen)
{
  uint8_t buf[2 * MD_BLOCK_SIZE];
  struct md_super s[2];
  char why[2][160];
  bool ok[2];
  ssize_t r;
  unsigned i, best;

  memset (buf, 0, sizeof buf);
  r = md_pread (fd, buf, sizeof buf, base);
  if (r == -1)
    return md_error (err, errlen, errno,
                     "read superblocks at offset %" PRIu64 ": %m", base);
  if (r == 0)
    return md_error (err, errlen, EINVAL,
                     "no metadata: nothing at offset %" PRIu64, base);
  for (i = 0; i < 2; ++i) {
    if ((size_t) r <= i * MD_BLOCK_SIZE) {
      snprintf (why[i], sizeof why[i], "beyond the end of the metadata");
      ok[i] = false;
      continue;
    }
    if (all_zero (buf + i * MD_BLOCK_SIZE, MD_BLOCK_SIZE)) {
      snprintf (why[i], sizeof why[i], "empty");
      ok[i] = false;
      continue;
    }
    ok[i] = md_decode_super (buf + i * MD_BLOCK_SIZE, &s[i],
                             why[i], sizeof why[i]) == 0;
  }
  if (!ok[0] && !ok[1])
    return md_error (err, errlen, EINVAL,
                     "no valid superblock: slot A: %s; slot B: %s",
                     why[0], why[1]);
  if (ok[0] && ok[1]) {
    if (s[0].ms_instance != s[1].ms_instance)
      return md_error (err, errlen, EINVAL,
                       "superblock slots A and B belong to different "
                       "metadata (instance 0x%016" PRIx64 " and 0x%016"
                       PRIx64 ")", s[0].ms_instance, s[1].ms_instance);
    if (s[0].ms_seq == s[1].ms_seq)
      return md_error (err, errlen, EINVAL,
                       "superblock slots A and B both have sequence "
                       "number %" PRIu64, s[0].ms_seq);
    best = s[1].ms_seq > s[0].ms_seq;
    *other_seq = s[!best].ms_seq;
    other_why[0] = '\0';
  }
  else {
    best = ok[1];
    *other_seq = 0;
    snprintf (other_why, whylen, "%s", why[!best]);
  }
  *sb = s[best];
  *slot = best;
  return 0;
}

/* Pick the transaction: the valid one with the highest seq. */
static int
md_load_al (struct md *md, char *err, size_t errlen)
{
  const struct md_layout *l = &md->md_layout;
  const struct md_geometry *g = &md->md_super.ms_geom;
  CLEANUP_FREE uint8_t *buf = NULL;
  CLEANUP_FREE uint32_t *table = NULL;
  char why[160], reasons[600];
  size_t used = 0;
  uint64_t seq, best_seq = 0;
  uint32_t i, best = 0, nvalid = 0;
  int n;

  buf = malloc (l->ml_txn_size);
  table = malloc (g->mg_al_extents * sizeof *table);
  if (buf == NULL || table == NULL)
    return md_error (err, errlen, ENOMEM, "malloc: %m");
  reasons[0] = '\0';
  for (i = 0; i < g->mg_al_ring; ++i) {
    if (md_read_exact (md, buf, l->ml_txn_size,
                       l->ml_al_offset + (uint64_t) i * l->ml_txn_size,
                       "activity log", err, errlen) == -1)
      return -1;
    if (md_decode_al (g, l, md->md_super.ms_instance, buf, &seq, table,
                      why, sizeof why) == -1) {
      n = snprintf (reasons + used, sizeof reasons - used, "%sslot %" PRIu32
                    ": %s", used > 0 ? "; " : "", i, why);
      if (n > 0)
        used += (size_t) n < sizeof reasons - used ? (size_t) n
                                                   : sizeof reasons - used - 1;
      continue;
    }
    nvalid++;
    if (seq == best_seq)
      return md_error (err, errlen, EINVAL,
                       "activity-log slots %" PRIu32 " and %" PRIu32
                       " both have sequence number %" PRIu64,
                       best, i, seq);
    if (seq > best_seq) {
      best_seq = seq;
      best = i;
      memcpy (md->md_al_table, table, g->mg_al_extents * sizeof *table);
    }
  }
  if (nvalid == 0)
    return md_error (err, errlen, EINVAL,
                     "activity log: no valid transaction in %" PRIu32
                     " slots: %s", g->mg_al_ring, reasons);
  md->md_al_seq = best_seq;
  md->md_al_slot = best;
  md->md_al_valid = nvalid;
  return 0;
}

static int
md_load_crcs (struct md *md, char *err, size_t errlen)
{
  const struct md_layout *l = &md->md_layout;
  CLEANUP_FREE uint8_t *buf = NULL;
  uint64_t page;
  unsigned slot;

  buf = malloc (MD_BLOCK_SIZE);
  if (buf == NULL)
    return md_error (err, errlen, ENOMEM, "malloc: %m");
  for (slot = 0; slot < md->md_super.ms_geom.mg_npeers; ++slot)
    for (page = 0; page < l->ml_bm_pages; ++page) {
      if (page % MD_CRCS_PER_BLOCK == 0 &&
          md_read_exact (md, buf, MD_BLOCK_SIZE,
                         md_peer_offset (md, slot) +
                         page / MD_CRCS_PER_BLOCK * MD_BLOCK_SIZE,
                         "bitmap checksums", err, errlen) == -1)
        return -1;
      *md_crc_entry (md, slot, page) =
        get_be32 (buf + 4 * (page % MD_CRCS_PER_BLOCK));
    }
  return 0;
}

/* The whole area that superblock sb describes is there: its last byte
 * can be read.  Checked before anything is allocated after the
 * geometry, so that a superblock claiming an exabyte volume costs an
 * error message, not terabytes of page checksums. */
static int
md_check_area_end (int fd, uint64_t base, const struct md_super *sb,
                   char *err, size_t errlen)
{
  struct md_layout l;
  uint8_t last;
  ssize_t r;
  off_t end;

  if (md_layout (&sb->ms_geom, &l, err, errlen) == -1)
    return -1;
  if (base > INT64_MAX || l.ml_total > INT64_MAX - base)
    return md_error (err, errlen, EINVAL,
                     "metadata of %" PRIu64 " bytes at offset %" PRIu64
                     " ends beyond the largest file offset",
                     l.ml_total, base);
  r = md_pread (fd, &last, 1, base + l.ml_total - 1);
  if (r == -1)
    return md_error (err, errlen, errno, "read at offset %" PRIu64 ": %m",
                     base + l.ml_total - 1);
  if (r == 0) {
    end = lseek (fd, 0, SEEK_END);
    return md_error (err, errlen, EINVAL,
                     "metadata ends at offset %jd, before the end of its "
                     "area (%" PRIu64 " bytes at offset %" PRIu64 ")",
                     (intmax_t) end, l.ml_total, base);
  }
  return 0;
}

int
md_load (struct md *md, int fd, uint64_t base, uint32_t node_id,
         uint64_t size, char *err, size_t errlen)
{
  struct md_super sb;
  char other_why[sizeof md->md_other_why];
  uint64_t other_seq;
  unsigned slot;

  memset (md, 0, sizeof *md);
  md->md_fd = -1;
  if (md_load_super (fd, base, &sb, &slot, &other_seq, other_why,
                     sizeof other_why, err, errlen) == -1 ||
      md_check_area_end (fd, base, &sb, err, errlen) == -1)
    return -1;
  if (md_setup (md, fd, base, &sb, err, errlen) == -1)
    goto fail;
  md->md_super_slot = slot;
  md->md_other_seq = other_seq;
  memcpy (md->md_other_why, other_why, sizeof other_why);
  if (md_load_al (md, err, errlen) == -1 ||
      md_load_crcs (md, err, errlen) == -1 ||
      md_check (md, node_id, size, err, errlen) == -1)
    goto fail;
  return 0;

 fail:
  md_close (md);                /* keeps errno */
  return -1;
}

int
md_write_super (struct md *md, const struct md_super *sb,
                char *err, size_t errlen)
{
  struct md_super next = *sb;
  uint8_t buf[MD_BLOCK_SIZE];
  unsigned slot = !md->md_super_slot;
  const char *what = slot == 0 ? "superblock slot A" : "superblock slot B";

  assert (md->md_magic == MD_HANDLE_MAGIC);
  if (sb->ms_instance != md->md_super.ms_instance ||
      sb->ms_node_id != md->md_super.ms_node_id ||
      memcmp (&sb->ms_geom, &md->md_super.ms_geom, sizeof sb->ms_geom) != 0)
    return md_error (err, errlen, EINVAL,
                     "superblock: instance, node id or geometry changed");
  next.ms_seq = md->md_super.ms_seq + 1;
  if (md_encode_super (&next, buf, err, errlen) == -1 ||
      md_write_exact (md, buf, MD_BLOCK_SIZE, slot * MD_BLOCK_SIZE, what,
                      err, errlen) == -1 ||
      md_sync (md, what, err, errlen) == -1)
    return -1;
  md->md_other_seq = md->md_super.ms_seq;
  md->md_other_why[0] = '\0';
  md->md_super = next;
  md->md_super_slot = slot;
  return 0;
}

/* Where the bitmaps of a grown area go (metadata.h, CRASH SAFETY): 0
 * (right after the ring) if they fit in front of the current ones,
 * else the current area's end.  Never overlapping the current ones. */
static uint64_t
md_grown_bm_offset (const struct md *md, const struct md_layout *nl)
{
  const struct md_layout *l = &md->md_layout;
  uint64_t need = md->md_super.ms_geom.mg_npeers * nl->ml_peer_size;

  if (need == 0)
    return md->md_super.ms_geom.mg_bm_offset;
  if (l->ml_bm_offset > nl->ml_bm_offset &&
      need <= l->ml_bm_offset - nl->ml_bm_offset)
    return 0;
  return l->ml_total;           /* a multiple of MD_BLOCK_SIZE */
}

int
md_grow (struct md *md, uint64_t size, uint32_t mark_slots,
         char *err, size_t errlen)
{
  const struct md_geometry *g = &md->md_super.ms_geom;
  struct md_super next;
  struct md grown;
  struct md_layout nl;
  struct bitmap bm;
  uint8_t buf[MD_BLOCK_SIZE];
  unsigned slot = !md->md_super_slot, i;
  const char *what = slot == 0 ? "superblock slot A" : "superblock slot B";
  char why[200];

  assert (md->md_magic == MD_HANDLE_MAGIC);
  if (size <= g->mg_size)
    return md_error (err, errlen, EINVAL,
                     "cannot grow the volume from %" PRIu64 " to %" PRIu64
                     " bytes: %s", g->mg_size, size,
                     size < g->mg_size ? "shrinking is not supported"
                                       : "that is its size");
  next = md->md_super;
  next.ms_seq = md->md_super.ms_seq + 1;
  next.ms_geom.mg_size = size;
  next.ms_geom.mg_bm_offset = 0;
  if (md_layout (&next.ms_geom, &nl, why, sizeof why) == -1)
    return md_error (err, errlen, EINVAL, "cannot grow to %" PRIu64
                     " bytes: %s", size, why);
  next.ms_geom.mg_bm_offset = md_grown_bm_offset (md, &nl);
  /* Checked whole before anything is written. */
  if (md_encode_super (&next, buf, err, errlen) == -1 ||
      md_setup (&grown, md->md_fd, md->md_base, &next, err, errlen) == -1)
    return -1;

  /* 1. The bitmaps, as they are on disk, in their new place. */
  for (i = 0; i < g->mg_npeers; ++i) {
    if (bitmap_init (&bm, g->mg_size, g->mg_granularity) == -1) {
      md_error (err, errlen, errno, "bitmap: %m");
      goto fail;
    }
    if (md_read_bitmap (md, i, &bm, 0, md->md_layout.ml_bm_pages, NULL,
                        err, errlen) == -1 ||
        (bitmap_grow (&bm, size) == -1 &&
         md_error (err, errlen, errno, "bitmap: %m") == -1)) {
      bitmap_free (&bm);
      goto fail;
    }
    if (mark_slots & (UINT32_C (1) << i))
      bitmap_set_range (&bm, g->mg_size, size - g->mg_size);
    /* md_write_bitmap syncs each slot: the last sync is the one that
     * must precede the superblock. */
    if (md_write_bitmap (&grown, i, &bm, 0, grown.md_layout.ml_bm_pages,
                         err, errlen) == -1) {
      bitmap_free (&bm);
      goto fail;
    }
    bitmap_free (&bm);
  }
  if (g->mg_npeers == 0 && md_sync (md, "growing", err, errlen) == -1)
    goto fail;

  /* 2. The commit: the superblock with the new size. */
  if (md_write_exact (md, buf, MD_BLOCK_SIZE, slot * MD_BLOCK_SIZE, what,
                      err, errlen) == -1 ||
      md_sync (md, what, err, errlen) == -1)
    goto fail;

  /* The handle follows: what md_setup made, and the log as it was. */
  memcpy (grown.md_al_table, md->md_al_table,
          g->mg_al_extents * sizeof (uint32_t));
  grown.md_al_seq = md->md_al_seq;
  grown.md_al_slot = md->md_al_slot;
  grown.md_al_valid = md->md_al_valid;
  grown.md_super_slot = slot;
  grown.md_other_seq = md->md_super.ms_seq;
  grown.md_other_why[0] = '\0';
  md_close (md);
  *md = grown;
  return 0;

 fail:
  md_close (&grown);            /* keeps errno */
  return -1;
}

int
md_write_al (struct md *md, uint64_t seq, const uint32_t *table,
             char *err, size_t errlen)
{
  const struct md_layout *l = &md->md_layout;
  const struct md_geometry *g = &md->md_super.ms_geom;
  CLEANUP_FREE uint8_t *buf = NULL;
  uint32_t slot;

  assert (md->md_magic == MD_HANDLE_MAGIC);
  if (seq <= md->md_al_seq)
    return md_error (err, errlen, EINVAL,
                     "activity-log sequence number %" PRIu64 " not after %"
                     PRIu64, seq, md->md_al_seq);
  buf = malloc (l->ml_txn_size);
  if (buf == NULL)
    return md_error (err, errlen, ENOMEM, "malloc: %m");
  /* Never over the slot of the last durable transaction. */
  slot = (md->md_al_slot + 1) % g->mg_al_ring;
  if (md_encode_al (g, l, md->md_super.ms_instance, seq, table, buf,
                    err, errlen) == -1 ||
      md_write_exact (md, buf, l->ml_txn_size,
                      l->ml_al_offset + (uint64_t) slot * l->ml_txn_size,
                      "activity-log transaction", err, errlen) == -1 ||
      md_sync (md, "activity-log transaction", err, errlen) == -1)
    return -1;
  md->md_al_seq = seq;
  md->md_al_slot = slot;
  if (md->md_al_valid < g->mg_al_ring)
    md->md_al_valid++;
  memcpy (md->md_al_table, table, g->mg_al_extents * sizeof *table);
  return 0;
}

int
md_peer_slot (const struct md *md, uint32_t node_id)
{
  uint32_t i;

  for (i = 0; i < md->md_super.ms_geom.mg_npeers; ++i)
    if (md->md_super.ms_peers[i].mp_node_id == node_id)
      return i;
  return -1;
}

void
md_bitmap_pages (const struct md *md, uint64_t offset, uint64_t len,
                 uint64_t *first, uint64_t *count)
{
  const struct md_geometry *g = &md->md_super.ms_geom;
  uint64_t c0, c1;

  *first = *count = 0;
  if (len == 0 || offset >= g->mg_size)
    return;
  if (len > g->mg_size - offset)
    len = g->mg_size - offset;
  c0 = offset / g->mg_granularity;
  c1 = (offset + len - 1) / g->mg_granularity;
  *first = c0 / MD_PAGE_BITS;
  *count = c1 / MD_PAGE_BITS - *first + 1;
}

/* Arguments shared by md_read_bitmap and md_write_bitmap. */
static int
md_check_bitmap_args (const struct md *md, unsigned slot,
                      const struct bitmap *bm, uint64_t first,
                      uint64_t count, char *err, size_t errlen)
{
  const struct md_geometry *g = &md->md_super.ms_geom;

  assert (md->md_magic == MD_HANDLE_MAGIC);
  if (slot >= g->mg_npeers)
    return md_error (err, errlen, EINVAL, "peer slot %u >= %" PRIu32,
                     slot, g->mg_npeers);
  if (bm->bm_size != g->mg_size || bm->bm_granularity != g->mg_granularity)
    return md_error (err, errlen, EINVAL,
                     "bitmap of %" PRIu64 " bytes by %" PRIu32 " does not "
                     "match the metadata's %" PRIu64 " by %" PRIu32,
                     bm->bm_size, bm->bm_granularity, g->mg_size,
                     g->mg_granularity);
  if (first > md->md_layout.ml_bm_pages ||
      count > md->md_layout.ml_bm_pages - first)
    return md_error (err, errlen, EINVAL,
                     "bitmap pages %" PRIu64 "+%" PRIu64 " beyond %" PRIu64,
                     first, count, md->md_layout.ml_bm_pages);
  return 0;
}

static inline uint64_t
md_bm_nwords (const struct bitmap *bm)
{
  return bm->bm_nbits / 64 + (bm->bm_nbits % 64 != 0);
}

/* struct bitmap's words are read and written directly here, a page at a
 * time: going through bitmap_set_range bit run by bit run would make
 * reading a large bitmap slow.  bm_nset is kept right the way
 * bitmap.c keeps it. */
int
md_write_bitmap (struct md *md, unsigned slot, const struct bitmap *bm,
                 uint64_t first, uint64_t count, char *err, size_t errlen)
{
  const struct md_layout *l = &md->md_layout;
  CLEANUP_FREE uint8_t *buf = NULL;
  uint64_t nwords = md_bm_nwords (bm), page, n, i, j, w;

  if (md_check_bitmap_args (md, slot, bm, first, count, err, errlen) == -1)
    return -1;
  if (count == 0)
    return 0;
  buf = malloc (md_io_buf_size (count));
  if (buf == NULL)
    return md_error (err, errlen, ENOMEM, "malloc: %m");

  for (page = first; page < first + count; page += n) {
    n = first + count - page < MD_IO_PAGES ? first + count - page
                                           : MD_IO_PAGES;
    for (i = 0; i < n; ++i) {
      uint8_t *p = buf + i * MD_BLOCK_SIZE;

      for (j = 0; j < MD_PAGE_WORDS; ++j) {
        uint64_t v;
        unsigned k;

        w = (page + i) * MD_PAGE_WORDS + j;
        v = w < nwords ? bm->bm_words[w] : 0;
        for (k = 0; k < 8; ++k)
          p[8 * j + k] = v >> (8 * k);
      }
      *md_crc_entry (md, slot, page + i) = crc32c (0, p, MD_BLOCK_SIZE);
    }
    if (md_write_exact (md, buf, n * MD_BLOCK_SIZE,
                        md_peer_offset (md, slot) +
                        (l->ml_crc_blocks + page) * MD_BLOCK_SIZE,
                        "bitmap", err, errlen) == -1)
      return -1;
  }
  if (md_write_crc_blocks (md, slot, first / MD_CRCS_PER_BLOCK,
                           (first + count - 1) / MD_CRCS_PER_BLOCK + 1,
                           err, errlen) == -1)
    return -1;
  return md_sync (md, "bitmap", err, errlen);
}

int
md_read_bitmap (struct md *md, unsigned slot, struct bitmap *bm,
                uint64_t first, uint64_t count, uint64_t *nbad,
                char *err, size_t errlen)
{
  const struct md_layout *l = &md->md_layout;
  CLEANUP_FREE uint8_t *buf = NULL;
  uint64_t nwords = md_bm_nwords (bm), page, n, i, j, w, bad = 0;

  if (md_check_bitmap_args (md, slot, bm, first, count, err, errlen) == -1)
    return -1;
  if (nbad != NULL)
    *nbad = 0;
  if (count == 0)
    return 0;
  buf = malloc (md_io_buf_size (count));
  if (buf == NULL)
    return md_error (err, errlen, ENOMEM, "malloc: %m");

  for (page = first; page < first + count; page += n) {
    n = first + count - page < MD_IO_PAGES ? first + count - page
                                           : MD_IO_PAGES;
    if (md_read_exact (md, buf, n * MD_BLOCK_SIZE,
                       md_peer_offset (md, slot) +
                       (l->ml_crc_blocks + page) * MD_BLOCK_SIZE,
                       "bitmap", err, errlen) == -1)
      return -1;
    for (i = 0; i < n; ++i) {
      const uint8_t *p = buf + i * MD_BLOCK_SIZE;
      uint64_t pg = page + i;

      if (crc32c (0, p, MD_BLOCK_SIZE) != *md_crc_entry (md, slot, pg)) {
        /* Torn or damaged: every chunk of the page may be dirty. */
        bitmap_set_range (bm, pg * MD_PAGE_BITS * bm->bm_granularity,
                          (uint64_t) MD_PAGE_BITS * bm->bm_granularity);
        bad++;
        continue;
      }
      for (j = 0; j < MD_PAGE_WORDS; ++j) {
        uint64_t v = 0, old;
        unsigned k;

        for (k = 0; k < 8; ++k)
          v |= (uint64_t) p[8 * j + k] << (8 * k);
        w = pg * MD_PAGE_WORDS + j;
        if ((w >= nwords && v != 0) ||
            (w + 1 == nwords && bm->bm_nbits % 64 != 0 &&
             (v >> (bm->bm_nbits % 64)) != 0))
          return md_error (err, errlen, EINVAL,
                           "bitmap of peer slot %u, page %" PRIu64
                           ": bits set beyond the end of the volume",
                           slot, pg);
        if (w >= nwords)
          continue;
        old = bm->bm_words[w];
        if (v != old) {
          bm->bm_nset -= __builtin_popcountll (old);
          bm->bm_nset += __builtin_popcountll (v);
          bm->bm_words[w] = v;
        }
      }
    }
  }
  if (nbad != NULL)
    *nbad = bad;
  return 0;
}
