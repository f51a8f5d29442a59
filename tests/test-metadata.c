/* nbdrepl: unit tests of common/crc32c.c, common/metadata.c and
 * common/activity-log.c.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * The I/O tests work on mkstemp files under /tmp, unlinked as soon as
 * they are open so that nothing is left behind, even by a failed test.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "activity-log.h"
#include "bitmap.h"
#include "crc32c.h"
#include "metadata.h"
#include "uuid-compare.h"

#define MiB (UINT64_C (1) << 20)
#define GiB (UINT64_C (1) << 30)

/* ---------------------------------------------------------------- */
/* Helpers. */

static int
tmp_fd (void)
{
  char path[] = "/tmp/test-metadata-XXXXXX";
  int fd = mkstemp (path);

  ck_assert_msg (fd >= 0, "mkstemp: %s", strerror (errno));
  ck_assert_int_eq (unlink (path), 0);
  return fd;
}

static void
put_be32 (uint8_t *p, uint32_t v)
{
  p[0] = v >> 24;
  p[1] = v >> 16;
  p[2] = v >> 8;
  p[3] = v;
}

static void
put_be64 (uint8_t *p, uint64_t v)
{
  put_be32 (p, v >> 32);
  put_be32 (p + 4, v);
}

static uint32_t
get_be32 (const uint8_t *p)
{
  return (uint32_t) p[0] << 24 | (uint32_t) p[1] << 16 |
         (uint32_t) p[2] << 8 | p[3];
}

static uint64_t
get_be64 (const uint8_t *p)
{
  return (uint64_t) get_be32 (p) << 32 | get_be32 (p + 4);
}

/* Recompute a record's crc32c (field at 8, counted as 0), the way the
 * format says, independently of metadata.c. */
static void
reseal (uint8_t *rec, size_t len)
{
  put_be32 (rec + 8, 0);
  put_be32 (rec + 8, crc32c (0, rec, len));
}

static void
pwrite_all (int fd, const void *buf, size_t len, uint64_t off)
{
  ck_assert_int_eq (pwrite (fd, buf, len, off), (ssize_t) len);
}

static void
pread_all (int fd, void *buf, size_t len, uint64_t off)
{
  ck_assert_int_eq (pread (fd, buf, len, off), (ssize_t) len);
}

/* Flip one byte on disk. */
static void
corrupt_byte (int fd, uint64_t off)
{
  uint8_t b;

  pread_all (fd, &b, 1, off);
  b ^= 0x5a;
  pwrite_all (fd, &b, 1, off);
}

/* A small geometry for the I/O tests: 64 MiB, 4 KiB chunks, 1024 extents
 * of 64 KiB of which 8 may be active, a ring of 4, 2 peer slots. */
static void
small_params (struct md_params *p, uint32_t node_id)
{
  md_params_init (p, node_id, 64 * MiB);
  p->pa_geom.mg_al_extent_size = 64 << 10;
  p->pa_geom.mg_al_extents = 8;
  p->pa_geom.mg_al_ring = 4;
  p->pa_geom.mg_npeers = 2;
  p->pa_peer_ids[0] = 2;
  p->pa_peer_ids[1] = MD_NO_PEER;
}

static void
valid_super (struct md_super *sb)
{
  uint32_t i;

  memset (sb, 0, sizeof *sb);
  sb->ms_seq = 7;
  sb->ms_instance = UINT64_C (0x1122334455667788);
  sb->ms_node_id = 1;
  sb->ms_flags = MD_FLAG_CONSISTENT | MD_FLAG_PRIMARY;
  sb->ms_geom = (struct md_geometry) {
    .mg_size = 4 * GiB + 512,
    .mg_granularity = 4096,
    .mg_al_extent_size = 4 << 20,
    .mg_al_extents = 1024,
    .mg_al_ring = 4,
    .mg_npeers = 3,
  };
  sb->ms_current_uuid = UINT64_C (0xaaaabbbbccccdddd);
  sb->ms_history_uuid[0] = UINT64_C (0x0101010101010101);
  sb->ms_history_uuid[1] = UINT64_C (0x0202020202020202);
  for (i = 0; i < MD_MAX_PEER_SLOTS; ++i)
    sb->ms_peers[i].mp_node_id = MD_NO_PEER;
  sb->ms_peers[0] = (struct md_peer) { 0, MD_PEER_OUTDATED,
                                       UINT64_C (0x5555666677778888) };
  sb->ms_peers[1] = (struct md_peer) { 31, 0, 0 };
}

static void
assert_super_eq (const struct md_super *a, const struct md_super *b)
{
  uint32_t i;

  ck_assert_uint_eq (a->ms_seq, b->ms_seq);
  ck_assert_uint_eq (a->ms_instance, b->ms_instance);
  ck_assert_uint_eq (a->ms_node_id, b->ms_node_id);
  ck_assert_uint_eq (a->ms_flags, b->ms_flags);
  ck_assert_uint_eq (a->ms_geom.mg_size, b->ms_geom.mg_size);
  ck_assert_uint_eq (a->ms_geom.mg_granularity, b->ms_geom.mg_granularity);
  ck_assert_uint_eq (a->ms_geom.mg_al_extent_size,
                     b->ms_geom.mg_al_extent_size);
  ck_assert_uint_eq (a->ms_geom.mg_al_extents, b->ms_geom.mg_al_extents);
  ck_assert_uint_eq (a->ms_geom.mg_al_ring, b->ms_geom.mg_al_ring);
  ck_assert_uint_eq (a->ms_geom.mg_npeers, b->ms_geom.mg_npeers);
  ck_assert_uint_eq (a->ms_current_uuid, b->ms_current_uuid);
  for (i = 0; i < MD_UUID_HISTORY; ++i)
    ck_assert_uint_eq (a->ms_history_uuid[i], b->ms_history_uuid[i]);
  for (i = 0; i < MD_MAX_PEER_SLOTS; ++i) {
    ck_assert_uint_eq (a->ms_peers[i].mp_node_id, b->ms_peers[i].mp_node_id);
    ck_assert_uint_eq (a->ms_peers[i].mp_flags, b->ms_peers[i].mp_flags);
    ck_assert_uint_eq (a->ms_peers[i].mp_bitmap_uuid,
                       b->ms_peers[i].mp_bitmap_uuid);
  }
}

#define ck_assert_err_has(err, what) \
  ck_assert_msg (strstr ((err), (what)) != NULL, \
                 "error '%s' does not mention '%s'", (err), (what))

/* xorshift64*: deterministic, seeded. */
static uint64_t
rng_next (uint64_t *s)
{
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * UINT64_C (2685821657736338717);
}

/* ---------------------------------------------------------------- */
/* crc32c */

START_TEST (test_crc32c_vectors)
{
  uint8_t buf[32];
  unsigned i;

  ck_assert_uint_eq (crc32c (0, "123456789", 9), 0xE3069283);
  ck_assert_uint_eq (crc32c_sw (0, "123456789", 9), 0xE3069283);
  ck_assert_uint_eq (crc32c (0, "", 0), 0);

  /* RFC 3720, B.4. */
  memset (buf, 0, sizeof buf);
  ck_assert_uint_eq (crc32c (0, buf, 32), 0x8A9136AA);
  ck_assert_uint_eq (crc32c_sw (0, buf, 32), 0x8A9136AA);
  memset (buf, 0xff, sizeof buf);
  ck_assert_uint_eq (crc32c (0, buf, 32), 0x62A8AB43);
  ck_assert_uint_eq (crc32c_sw (0, buf, 32), 0x62A8AB43);
  for (i = 0; i < 32; ++i)
    buf[i] = i;
  ck_assert_uint_eq (crc32c (0, buf, 32), 0x46DD794E);
  ck_assert_uint_eq (crc32c_sw (0, buf, 32), 0x46DD794E);
  for (i = 0; i < 32; ++i)
    buf[i] = 31 - i;
  ck_assert_uint_eq (crc32c (0, buf, 32), 0x113FDB5C);
  ck_assert_uint_eq (crc32c_sw (0, buf, 32), 0x113FDB5C);
}
END_TEST

/* Chaining, and the hardware path against the software one at every
 * length and alignment that matters for the 8-byte loops. */
START_TEST (test_crc32c_chain_and_paths)
{
  uint64_t seed = UINT64_C (0x9e3779b97f4a7c15);
  uint8_t buf[600];
  size_t i, len, off, split;

  for (i = 0; i < sizeof buf; ++i)
    buf[i] = rng_next (&seed);
  for (off = 0; off < 8; ++off)
    for (len = 0; len + off <= sizeof buf && len < 300; ++len)
      ck_assert_msg (crc32c (0, buf + off, len) ==
                     crc32c_sw (0, buf + off, len),
                     "hardware and software differ at off %zu len %zu",
                     off, len);
  for (split = 0; split <= 100; ++split)
    ck_assert_uint_eq (crc32c (crc32c (0, buf, split), buf + split,
                               100 - split),
                       crc32c (0, buf, 100));
  ck_assert_uint_eq (crc32c_sw (crc32c (0, "1234", 4), "56789", 5),
                     0xE3069283);
}
END_TEST

/* ---------------------------------------------------------------- */
/* Layout */

START_TEST (test_layout)
{
  struct md_geometry g = {
    .mg_size = 4 * GiB, .mg_granularity = 4096,
    .mg_al_extent_size = 4 << 20, .mg_al_extents = 1024, .mg_al_ring = 4,
    .mg_npeers = 7,
  };
  struct md_layout l;
  struct md_params p;
  char err[256];

  ck_assert_int_eq (md_layout (&g, &l, err, sizeof err), 0);
  ck_assert_uint_eq (l.ml_al_offset, 8192);
  ck_assert_uint_eq (l.ml_txn_size, 8192);     /* 40 + 4096 bytes */
  ck_assert_uint_eq (l.ml_bm_offset, 8192 + 4 * 8192);
  ck_assert_uint_eq (l.ml_bm_nbits, 1 << 20);
  ck_assert_uint_eq (l.ml_bm_pages, 32);       /* 128 KiB */
  ck_assert_uint_eq (l.ml_crc_blocks, 1);
  ck_assert_uint_eq (l.ml_peer_size, 33 * 4096);
  ck_assert_uint_eq (l.ml_total, 40960 + 7 * 33 * 4096);
  ck_assert_uint_eq (l.ml_vol_extents, 1024);

  /* The defaults are the ones the issue asks for. */
  md_params_init (&p, 3, 4 * GiB);
  ck_assert_uint_eq (p.pa_node_id, 3);
  ck_assert_uint_eq (p.pa_geom.mg_granularity, 4096);
  ck_assert_uint_eq (p.pa_geom.mg_al_extent_size, 4 << 20);
  ck_assert_uint_eq (p.pa_geom.mg_al_extents, 1024);
  ck_assert_uint_eq (p.pa_peer_ids[0], MD_NO_PEER);

  /* One byte: one chunk, one page, one extent. */
  g.mg_size = 1;
  ck_assert_int_eq (md_layout (&g, &l, err, sizeof err), 0);
  ck_assert_uint_eq (l.ml_bm_nbits, 1);
  ck_assert_uint_eq (l.ml_bm_pages, 1);
  ck_assert_uint_eq (l.ml_vol_extents, 1);

  /* 1024 checksums per block: 1025 pages need two. */
  g.mg_size = UINT64_C (1025) * 32768 * 4096;
  ck_assert_int_eq (md_layout (&g, &l, err, sizeof err), 0);
  ck_assert_uint_eq (l.ml_bm_pages, 1025);
  ck_assert_uint_eq (l.ml_crc_blocks, 2);

  /* A transaction exactly filling one block, and one byte more. */
  g.mg_size = 4 * GiB;
  g.mg_al_extents = (4096 - 40) / 4;
  ck_assert_int_eq (md_layout (&g, &l, err, sizeof err), 0);
  ck_assert_uint_eq (l.ml_txn_size, 4096);
  g.mg_al_extents++;
  ck_assert_int_eq (md_layout (&g, &l, err, sizeof err), 0);
  ck_assert_uint_eq (l.ml_txn_size, 8192);
}
END_TEST

START_TEST (test_internal_place)
{
  static const uint64_t devs[] = {
    1 * MiB, 64 * MiB + 12345, 4 * GiB, 4 * GiB + 4095, 1000 * GiB + 1,
  };
  struct md_geometry g;
  struct md_layout l;
  uint64_t base, base2;
  char err[256];
  size_t i;

  for (i = 0; i < sizeof devs / sizeof devs[0]; ++i) {
    struct md_params p;

    md_params_init (&p, 0, 0);
    g = p.pa_geom;
    ck_assert_int_eq (md_internal_place (devs[i], &g, &base, err, sizeof err),
                      0);
    ck_assert_uint_eq (base % 4096, 0);
    ck_assert_uint_eq (g.mg_size, base);
    ck_assert_int_eq (md_layout (&g, &l, err, sizeof err), 0);
    ck_assert_uint_le (base + l.ml_total, devs[i]);
    /* Not much wasted: less than a block plus the difference between
     * the areas of the device and of the volume. */
    ck_assert_uint_gt (base, devs[i] / 2);
    g.mg_size = 12345;                      /* ignored */
    ck_assert_int_eq (md_internal_place (devs[i], &g, &base2, err,
                                         sizeof err), 0);
    ck_assert_uint_eq (base2, base);
  }

  {
    struct md_params p;

    md_params_init (&p, 0, 0);
    g = p.pa_geom;
  }
  ck_assert_int_eq (md_internal_place (64 * 1024, &g, &base, err,
                                       sizeof err), -1);
  ck_assert_int_eq (errno, ENOSPC);
  ck_assert_err_has (err, "too small");
}
END_TEST

START_TEST (test_in_sync_uuid)
{
  uint64_t a = uuid_in_sync_value ("r0", 4 * GiB);

  ck_assert_uint_ne (a, 0);
  ck_assert_uint_eq (a, uuid_in_sync_value ("r0", 4 * GiB));
  ck_assert_uint_ne (a, uuid_in_sync_value ("r1", 4 * GiB));
  ck_assert_uint_ne (a, uuid_in_sync_value ("r0", 4 * GiB + 512));
  ck_assert_uint_ne (uuid_in_sync_value ("r0", 0), uuid_in_sync_value ("r", 0));
}
END_TEST

/* ---------------------------------------------------------------- */
/* Superblock encoding */

START_TEST (test_super_round_trip)
{
  struct md_super sb, out;
  uint8_t buf[MD_BLOCK_SIZE];
  char err[256];

  valid_super (&sb);
  ck_assert_int_eq (md_encode_super (&sb, buf, err, sizeof err), 0);

  /* The documented offsets. */
  ck_assert_int_eq (memcmp (buf, "NBRM", 4), 0);
  ck_assert_uint_eq (buf[4] << 8 | buf[5], MD_REC_SUPER);
  ck_assert_uint_eq (buf[6] << 8 | buf[7], MD_FORMAT_VERSION);
  ck_assert_uint_eq (get_be32 (buf + 12), 4096);
  ck_assert_uint_eq (get_be64 (buf + 16), 7);
  ck_assert_uint_eq (get_be64 (buf + 24), sb.ms_instance);
  ck_assert_uint_eq (get_be32 (buf + 32), 1);
  ck_assert_uint_eq (get_be32 (buf + 36), sb.ms_flags);
  ck_assert_uint_eq (get_be64 (buf + 40), 4 * GiB + 512);
  ck_assert_uint_eq (get_be32 (buf + 48), 4096);
  ck_assert_uint_eq (get_be32 (buf + 52), 4 << 20);
  ck_assert_uint_eq (get_be32 (buf + 56), 1024);
  ck_assert_uint_eq (get_be32 (buf + 60), 4);
  ck_assert_uint_eq (get_be32 (buf + 64), 3);
  ck_assert_uint_eq (get_be64 (buf + 72), sb.ms_current_uuid);
  ck_assert_uint_eq (get_be64 (buf + 80), sb.ms_history_uuid[0]);
  ck_assert_uint_eq (get_be64 (buf + 88), sb.ms_history_uuid[1]);
  ck_assert_uint_eq (get_be32 (buf + 96), 0);
  ck_assert_uint_eq (get_be32 (buf + 100), MD_PEER_OUTDATED);
  ck_assert_uint_eq (get_be64 (buf + 104), sb.ms_peers[0].mp_bitmap_uuid);
  ck_assert_uint_eq (get_be32 (buf + 112), 31);
  ck_assert_uint_eq (get_be32 (buf + 128), MD_NO_PEER);   /* slot 2 free */
  ck_assert_uint_eq (get_be32 (buf + 144), 0);            /* slot 3 unused */
  {
    uint8_t copy[MD_BLOCK_SIZE];
    uint32_t stored = get_be32 (buf + 8);

    memcpy (copy, buf, sizeof copy);
    reseal (copy, sizeof copy);
    ck_assert_uint_eq (get_be32 (copy + 8), stored);
  }

  ck_assert_int_eq (md_decode_super (buf, &out, err, sizeof err), 0);
  assert_super_eq (&sb, &out);

  /* Every flag, every peer slot. */
  {
    uint32_t i;

    sb.ms_flags = MD_FLAGS_KNOWN;
    sb.ms_node_id = 0;
    sb.ms_geom.mg_npeers = MD_MAX_PEER_SLOTS;
    for (i = 0; i < MD_MAX_PEER_SLOTS; ++i)
      sb.ms_peers[i] = (struct md_peer) { i + 1, MD_PEER_FLAGS_KNOWN,
                                          UINT64_C (1000) + i };
    ck_assert_int_eq (md_encode_super (&sb, buf, err, sizeof err), 0);
    ck_assert_int_eq (md_decode_super (buf, &out, err, sizeof err), 0);
    assert_super_eq (&sb, &out);
  }
}
END_TEST

/* Encode a valid superblock, let tamper change the raw bytes, reseal
 * (unless told not to) and expect decoding to fail naming what. */
static void
expect_super_reject (void (*tamper) (uint8_t *), bool seal, const char *what)
{
  struct md_super sb, out;
  uint8_t buf[MD_BLOCK_SIZE];
  char err[256] = "";

  valid_super (&sb);
  ck_assert_int_eq (md_encode_super (&sb, buf, err, sizeof err), 0);
  tamper (buf);
  if (seal)
    reseal (buf, sizeof buf);
  errno = 0;
  ck_assert_msg (md_decode_super (buf, &out, err, sizeof err) == -1,
                 "accepted, expected '%s'", what);
  ck_assert_int_eq (errno, EINVAL);
  ck_assert_err_has (err, what);
}

#define TAMPER(name, body) \
  static void name (uint8_t *b) { body; }

TAMPER (t_magic, b[0] = 'X')
TAMPER (t_version, put_be32 (b + 4, MD_REC_SUPER << 16 | 2))
TAMPER (t_type, put_be32 (b + 4, MD_REC_AL << 16 | MD_FORMAT_VERSION))
TAMPER (t_length, put_be32 (b + 12, 8192))
TAMPER (t_crc_field, b[8] ^= 1)
TAMPER (t_payload_bit, b[2000] ^= 0x10)
TAMPER (t_seq0, put_be64 (b + 16, 0))
TAMPER (t_instance0, put_be64 (b + 24, 0))
TAMPER (t_node32, put_be32 (b + 32, 32))
TAMPER (t_node_max, put_be32 (b + 32, UINT32_MAX))
TAMPER (t_flags, put_be32 (b + 36, 0x40))
TAMPER (t_size0, put_be64 (b + 40, 0))
TAMPER (t_size_huge, put_be64 (b + 40, MD_MAX_SIZE + 1))
TAMPER (t_gran0, put_be32 (b + 48, 0))
TAMPER (t_gran256, put_be32 (b + 48, 256))
TAMPER (t_gran_odd, put_be32 (b + 48, 3 * 1024))
TAMPER (t_gran_big, put_be32 (b + 48, 2 << 20))
TAMPER (t_ext_small, put_be32 (b + 52, 32 << 10))
TAMPER (t_ext_odd, put_be32 (b + 52, 3 << 20))
TAMPER (t_ext_big, put_be32 (b + 52, UINT32_C (2) << 30))
TAMPER (t_ext_lt_gran, put_be32 (b + 48, 1 << 20); put_be32 (b + 52, 512 << 10))
TAMPER (t_alext0, put_be32 (b + 56, 0))
TAMPER (t_alext_big, put_be32 (b + 56, MD_MAX_AL_EXTENTS + 1))
TAMPER (t_ring1, put_be32 (b + 60, 1))
TAMPER (t_ring_big, put_be32 (b + 60, MD_MAX_AL_RING + 1))
TAMPER (t_npeers, put_be32 (b + 64, MD_MAX_PEER_SLOTS + 1))
TAMPER (t_too_many_extents, put_be64 (b + 40, MD_MAX_SIZE);
        put_be32 (b + 52, 64 << 10))
TAMPER (t_reserved68, b[70] = 1)
TAMPER (t_uuid0, put_be64 (b + 72, 0))
TAMPER (t_peer_node, put_be32 (b + 96, 40))
TAMPER (t_peer_self, put_be32 (b + 96, 1))
TAMPER (t_peer_dup, put_be32 (b + 112, 0))
TAMPER (t_peer_flags, put_be32 (b + 100, 2))
TAMPER (t_peer_free_uuid, put_be64 (b + 136, 9))
TAMPER (t_peer_beyond, put_be32 (b + 144 + 4, 1))
TAMPER (t_peer_last, b[96 + 16 * MD_MAX_PEER_SLOTS - 1] = 1)
TAMPER (t_tail, b[4000] = 1)
TAMPER (t_tail_last, b[4095] = 1)

START_TEST (test_super_reject)
{
  expect_super_reject (t_magic, true, "bad magic 0x58425");
  expect_super_reject (t_version, true, "format version 2");
  expect_super_reject (t_type, true, "record type 2");
  expect_super_reject (t_length, true, "record length 8192");
  expect_super_reject (t_crc_field, false, "checksum mismatch");
  expect_super_reject (t_payload_bit, false, "checksum mismatch");
  expect_super_reject (t_seq0, true, "sequence number 0");
  expect_super_reject (t_instance0, true, "instance 0");
  expect_super_reject (t_node32, true, "node id 32 > 31");
  expect_super_reject (t_node_max, true, "node id 4294967295");
  expect_super_reject (t_flags, true, "unknown flags 0x40");
  expect_super_reject (t_size0, true, "volume size 0 out of range");
  expect_super_reject (t_size_huge, true, "out of range");
  expect_super_reject (t_gran0, true, "bitmap granularity 0");
  expect_super_reject (t_gran256, true, "bitmap granularity 256");
  expect_super_reject (t_gran_odd, true, "bitmap granularity 3072");
  expect_super_reject (t_gran_big, true, "bitmap granularity 2097152");
  expect_super_reject (t_ext_small, true, "extent size 32768");
  expect_super_reject (t_ext_odd, true, "extent size 3145728");
  expect_super_reject (t_ext_big, true, "extent size 2147483648");
  expect_super_reject (t_ext_lt_gran, true, "< bitmap granularity");
  expect_super_reject (t_alext0, true, "activity-log extents 0");
  expect_super_reject (t_alext_big, true, "activity-log extents 65537");
  expect_super_reject (t_ring1, true, "activity-log ring 1");
  expect_super_reject (t_ring_big, true, "activity-log ring 65");
  expect_super_reject (t_npeers, true, "peer slots 32");
  expect_super_reject (t_too_many_extents, true, "more than 4294967294");
  expect_super_reject (t_reserved68, true, "reserved field at 68");
  expect_super_reject (t_uuid0, true, "current UUID 0");
  expect_super_reject (t_peer_node, true, "peer slot 0: node id 40");
  expect_super_reject (t_peer_self, true, "is this node's own");
  expect_super_reject (t_peer_dup, true, "peer slots 0 and 1");
  expect_super_reject (t_peer_flags, true, "peer slot 0: unknown flags 0x2");
  expect_super_reject (t_peer_free_uuid, true, "peer slot 2: free");
  expect_super_reject (t_peer_beyond, true, "peer slot 3 beyond npeers 3");
  expect_super_reject (t_peer_last, true, "peer slot 30 beyond npeers");
  expect_super_reject (t_tail, true, "reserved bytes");
  expect_super_reject (t_tail_last, true, "reserved bytes");
}
END_TEST

/* The encoder refuses what the decoder would. */
START_TEST (test_super_encode_checks)
{
  struct md_super sb;
  uint8_t buf[MD_BLOCK_SIZE];
  char err[256];

  valid_super (&sb);
  sb.ms_geom.mg_granularity = 1000;
  ck_assert_int_eq (md_encode_super (&sb, buf, err, sizeof err), -1);
  ck_assert_int_eq (errno, EINVAL);
  ck_assert_err_has (err, "granularity 1000");

  valid_super (&sb);
  sb.ms_seq = 0;
  ck_assert_int_eq (md_encode_super (&sb, buf, err, sizeof err), -1);
  ck_assert_err_has (err, "sequence number 0");

  valid_super (&sb);
  sb.ms_peers[5].mp_node_id = 4;               /* beyond npeers 3 */
  ck_assert_int_eq (md_encode_super (&sb, buf, err, sizeof err), -1);
  ck_assert_err_has (err, "peer slot 5 beyond npeers");

  valid_super (&sb);
  sb.ms_node_id = 31;                          /* peer slot 1 is 31 */
  ck_assert_int_eq (md_encode_super (&sb, buf, err, sizeof err), -1);
  ck_assert_err_has (err, "own");
}
END_TEST

/* ---------------------------------------------------------------- */
/* Activity-log transactions: encoding */

static void
al_geom (struct md_geometry *g, struct md_layout *l)
{
  char err[256];

  *g = (struct md_geometry) {
    .mg_size = 100 * MiB + 1, .mg_granularity = 4096,
    .mg_al_extent_size = 1 << 20, .mg_al_extents = 1100, .mg_al_ring = 3,
    .mg_npeers = 1,
  };
  ck_assert_int_eq (md_layout (g, l, err, sizeof err), 0);
  ck_assert_uint_eq (l->ml_vol_extents, 101);
  ck_assert_uint_eq (l->ml_txn_size, 8192);
}

START_TEST (test_al_txn_round_trip)
{
  struct md_geometry g;
  struct md_layout l;
  uint32_t table[1100], out[1100], i;
  uint8_t buf[8192];
  uint64_t seq;
  char err[256];

  al_geom (&g, &l);
  for (i = 0; i < 1100; ++i)
    table[i] = i % 3 == 0 && i / 3 <= 100 ? 100 - i / 3 : MD_AL_EMPTY;
  ck_assert_int_eq (md_encode_al (&g, &l, 42, 9, table, buf,
                                  err, sizeof err), 0);
  ck_assert_int_eq (memcmp (buf, "NBRM", 4), 0);
  ck_assert_uint_eq (buf[4] << 8 | buf[5], MD_REC_AL);
  ck_assert_uint_eq (get_be32 (buf + 12), 8192);
  ck_assert_uint_eq (get_be64 (buf + 16), 9);
  ck_assert_uint_eq (get_be64 (buf + 24), 42);
  ck_assert_uint_eq (get_be32 (buf + 32), 1100);
  ck_assert_uint_eq (get_be32 (buf + 36), 101);
  ck_assert_uint_eq (get_be32 (buf + 40), 100);
  ck_assert_uint_eq (get_be32 (buf + 44), MD_AL_EMPTY);

  ck_assert_int_eq (md_decode_al (&g, &l, 42, buf, &seq, out,
                                  err, sizeof err), 0);
  ck_assert_uint_eq (seq, 9);
  ck_assert_int_eq (memcmp (table, out, sizeof table), 0);
}
END_TEST

static void
expect_al_reject (uint8_t *buf, const struct md_geometry *g,
                  const struct md_layout *l, const char *what)
{
  uint32_t out[MD_MAX_AL_EXTENTS];
  uint64_t seq;
  char err[256] = "";

  ck_assert_msg (md_decode_al (g, l, 42, buf, &seq, out, err,
                               sizeof err) == -1,
                 "accepted, expected '%s'", what);
  ck_assert_int_eq (errno, EINVAL);
  ck_assert_err_has (err, what);
}

START_TEST (test_al_txn_reject)
{
  struct md_geometry g;
  struct md_layout l;
  uint32_t table[1100], i;
  uint8_t good[8192], buf[8192];
  char err[256];

  al_geom (&g, &l);
  for (i = 0; i < 1100; ++i)
    table[i] = i < 5 ? i * 20 : MD_AL_EMPTY;
  ck_assert_int_eq (md_encode_al (&g, &l, 42, 3, table, good,
                                  err, sizeof err), 0);

  memcpy (buf, good, sizeof buf);
  buf[5000] ^= 1;                              /* second block */
  expect_al_reject (buf, &g, &l, "checksum mismatch");

  memcpy (buf, good, sizeof buf);
  put_be64 (buf + 24, 43);
  reseal (buf, sizeof buf);
  expect_al_reject (buf, &g, &l, "not the superblock's");

  memcpy (buf, good, sizeof buf);
  put_be32 (buf + 32, 1099);
  reseal (buf, sizeof buf);
  expect_al_reject (buf, &g, &l, "1099 slots");

  memcpy (buf, good, sizeof buf);
  put_be32 (buf + 36, 6);
  reseal (buf, sizeof buf);
  expect_al_reject (buf, &g, &l, "5 active extents, the header says 6");

  memcpy (buf, good, sizeof buf);
  put_be32 (buf + 40 + 4 * 7, 101);            /* the volume has 101 */
  put_be32 (buf + 36, 6);
  reseal (buf, sizeof buf);
  expect_al_reject (buf, &g, &l, "extent 101 beyond");

  memcpy (buf, good, sizeof buf);
  put_be32 (buf + 40 + 4 * 7, 40);             /* slot 2 has 40 too */
  put_be32 (buf + 36, 6);
  reseal (buf, sizeof buf);
  expect_al_reject (buf, &g, &l, "extent 40 twice");

  memcpy (buf, good, sizeof buf);
  buf[8191] = 1;
  reseal (buf, sizeof buf);
  expect_al_reject (buf, &g, &l, "padding");

  memcpy (buf, good, sizeof buf);
  put_be64 (buf + 16, 0);
  reseal (buf, sizeof buf);
  expect_al_reject (buf, &g, &l, "sequence number 0");

  memcpy (buf, good, sizeof buf);
  buf[5] = MD_REC_SUPER;
  reseal (buf, sizeof buf);
  expect_al_reject (buf, &g, &l, "record type 1");

  /* Torn: the second block from an older transaction. */
  table[3] = MD_AL_EMPTY;
  table[1099] = 99;
  ck_assert_int_eq (md_encode_al (&g, &l, 42, 2, table, buf,
                                  err, sizeof err), 0);
  memcpy (buf, good, 4096);
  expect_al_reject (buf, &g, &l, "checksum mismatch");

  /* The encoder checks the table too. */
  table[1099] = 0;                             /* table[0] is 0 */
  ck_assert_int_eq (md_encode_al (&g, &l, 42, 4, table, buf,
                                  err, sizeof err), -1);
  ck_assert_err_has (err, "extent 0 twice");
  table[1099] = 500;
  ck_assert_int_eq (md_encode_al (&g, &l, 42, 4, table, buf,
                                  err, sizeof err), -1);
  ck_assert_err_has (err, "beyond");
}
END_TEST

/* ---------------------------------------------------------------- */
/* Create, load, superblock writes */

START_TEST (test_create_load)
{
  struct md_params p;
  struct md md, md2;
  struct bitmap bm;
  char err[256];
  uint64_t nbad;
  uint32_t i;
  int fd = tmp_fd ();

  small_params (&p, 1);
  ck_assert_int_eq (md_create (&md, fd, 0, &p, false, err, sizeof err), 0);
  ck_assert_uint_eq (md.md_super.ms_seq, 1);
  ck_assert_uint_ne (md.md_super.ms_instance, 0);
  ck_assert_uint_ne (md.md_super.ms_current_uuid, 0);
  ck_assert_uint_eq (md.md_super.ms_flags, MD_FLAG_CLEAN);
  ck_assert_uint_eq (lseek (fd, 0, SEEK_END), md.md_layout.ml_total);

  ck_assert_int_eq (md_load (&md2, fd, 0, 1, 64 * MiB, err, sizeof err), 0);
  assert_super_eq (&md.md_super, &md2.md_super);
  ck_assert_uint_eq (md2.md_super_slot, 0);
  ck_assert_uint_eq (md2.md_other_seq, 0);
  ck_assert_uint_eq (md2.md_al_seq, 1);
  ck_assert_uint_eq (md2.md_al_slot, 0);
  ck_assert_uint_eq (md2.md_al_valid, 1);
  for (i = 0; i < 8; ++i)
    ck_assert_uint_eq (md2.md_al_table[i], MD_AL_EMPTY);
  ck_assert_int_eq (md_peer_slot (&md2, 2), 0);
  ck_assert_int_eq (md_peer_slot (&md2, 0), -1);
  ck_assert_int_eq (md_peer_slot (&md2, MD_NO_PEER), 1);   /* free slot */

  /* Not in sync: everything dirty for every slot. */
  ck_assert_int_eq (bitmap_init (&bm, 64 * MiB, 4096), 0);
  for (i = 0; i < 2; ++i) {
    bitmap_clear_all (&bm);
    ck_assert_int_eq (md_read_bitmap (&md2, i, &bm, 0,
                                      md2.md_layout.ml_bm_pages, &nbad,
                                      err, sizeof err), 0);
    ck_assert_uint_eq (nbad, 0);
    ck_assert_uint_eq (bitmap_count (&bm), 64 * MiB / 4096);
  }
  bitmap_free (&bm);
  md_close (&md2);
  md_close (&md);

  /* In sync, with a given UUID. */
  p.pa_in_sync = true;
  p.pa_current_uuid = uuid_in_sync_value ("r0", 64 * MiB);
  ck_assert_int_eq (md_create (&md, fd, 0, &p, true, err, sizeof err), 0);
  md_close (&md);
  ck_assert_int_eq (md_load (&md, fd, 0, 1, 64 * MiB, err, sizeof err), 0);
  ck_assert_uint_eq (md.md_super.ms_flags,
                     MD_FLAG_CLEAN | MD_FLAG_CONSISTENT |
                     MD_FLAG_WAS_UPTODATE);
  ck_assert_uint_eq (md.md_super.ms_current_uuid,
                     uuid_in_sync_value ("r0", 64 * MiB));
  ck_assert_int_eq (bitmap_init (&bm, 64 * MiB, 4096), 0);
  ck_assert_int_eq (md_read_bitmap (&md, 0, &bm, 0, md.md_layout.ml_bm_pages,
                                    &nbad, err, sizeof err), 0);
  ck_assert_uint_eq (nbad, 0);
  ck_assert_uint_eq (bitmap_count (&bm), 0);
  bitmap_free (&bm);
  md_close (&md);
  close (fd);
}
END_TEST

START_TEST (test_create_refuses)
{
  struct md_params p;
  struct md md;
  char err[256];
  uint64_t inst;
  int fd = tmp_fd ();
  uint8_t junk[8192];

  /* Garbage without our magic is not metadata. */
  memset (junk, 0xa5, sizeof junk);
  pwrite_all (fd, junk, sizeof junk, 0);
  small_params (&p, 1);
  ck_assert_int_eq (md_create (&md, fd, 0, &p, false, err, sizeof err), 0);
  inst = md.md_super.ms_instance;
  md_close (&md);

  errno = 0;
  ck_assert_int_eq (md_create (&md, fd, 0, &p, false, err, sizeof err), -1);
  ck_assert_int_eq (errno, EEXIST);
  ck_assert_err_has (err, "metadata already present");
  ck_assert_err_has (err, "slot A: node id 1, 67108864 bytes, seq 1");
  ck_assert_int_eq (md.md_fd, -1);
  /* Nothing was touched. */
  ck_assert_int_eq (md_load (&md, fd, 0, 1, 64 * MiB, err, sizeof err), 0);
  ck_assert_uint_eq (md.md_super.ms_instance, inst);
  md_close (&md);

  /* Damaged metadata is refused too. */
  corrupt_byte (fd, 1000);
  ck_assert_int_eq (md_create (&md, fd, 0, &p, false, err, sizeof err), -1);
  ck_assert_int_eq (errno, EEXIST);
  ck_assert_err_has (err, "slot A: damaged (checksum mismatch");

  /* --force overwrites, with a new instance. */
  ck_assert_int_eq (md_create (&md, fd, 0, &p, true, err, sizeof err), 0);
  ck_assert_uint_ne (md.md_super.ms_instance, inst);
  md_close (&md);
  ck_assert_int_eq (md_load (&md, fd, 0, 1, 64 * MiB, err, sizeof err), 0);
  md_close (&md);

  /* Bad parameters are refused before anything is written. */
  p.pa_peer_ids[0] = 1;                        /* our own id */
  ck_assert_int_eq (md_create (&md, fd, 0, &p, true, err, sizeof err), -1);
  ck_assert_int_eq (errno, EINVAL);
  ck_assert_err_has (err, "own");
  ck_assert_int_eq (md_load (&md, fd, 0, 1, 64 * MiB, err, sizeof err), 0);
  md_close (&md);
  close (fd);
}
END_TEST

START_TEST (test_load_checks)
{
  struct md_params p;
  struct md md;
  char err[256];
  int fd = tmp_fd ();

  errno = 0;
  ck_assert_int_eq (md_load (&md, fd, 0, 1, 0, err, sizeof err), -1);
  ck_assert_int_eq (errno, EINVAL);
  ck_assert_err_has (err, "no metadata");

  small_params (&p, 1);
  ck_assert_int_eq (md_create (&md, fd, 0, &p, false, err, sizeof err), 0);
  md_close (&md);

  ck_assert_int_eq (md_load (&md, fd, 0, 2, 64 * MiB, err, sizeof err), -1);
  ck_assert_int_eq (errno, EINVAL);
  ck_assert_err_has (err, "node id mismatch: the metadata belongs to node "
                     "id 1, this node has id 2");
  ck_assert_int_eq (md_load (&md, fd, 0, 1, 128 * MiB, err, sizeof err), -1);
  ck_assert_err_has (err, "volume size mismatch: the metadata says "
                     "67108864 bytes, the disk has 134217728");
  ck_assert_int_eq (md_load (&md, fd, 0, MD_ANY_NODE, 0, err, sizeof err), 0);
  ck_assert_int_eq (md_check (&md, 1, 64 * MiB, err, sizeof err), 0);
  ck_assert_int_eq (md_check (&md, 3, 0, err, sizeof err), -1);
  ck_assert_err_has (err, "node id mismatch");
  md_close (&md);

  /* Truncated: the last bitmap page is missing. */
  ck_assert_int_eq (ftruncate (fd, lseek (fd, 0, SEEK_END) - 4096), 0);
  ck_assert_int_eq (md_load (&md, fd, 0, 1, 64 * MiB, err, sizeof err), -1);
  ck_assert_err_has (err, "metadata ends at offset");
  ck_assert_int_eq (md.md_fd, -1);
  /* Truncated inside superblock B: A still counts, and says how big
   * the area is. */
  ck_assert_int_eq (ftruncate (fd, 6000), 0);
  ck_assert_int_eq (md_load (&md, fd, 0, 1, 64 * MiB, err, sizeof err), -1);
  ck_assert_err_has (err, "metadata ends at offset 6000, before the end "
                     "of its area");
  ck_assert_int_eq (ftruncate (fd, 60), 0);      /* inside the fields */
  ck_assert_int_eq (md_load (&md, fd, 0, 1, 64 * MiB, err, sizeof err), -1);
  ck_assert_err_has (err, "no valid superblock: slot A: checksum mismatch");
  ck_assert_err_has (err, "slot B: beyond the end");
  close (fd);
}
END_TEST

/* A superblock with a good checksum that claims an enormous volume
 * (found by fuzz-metadata): refused because the file is far too short
 * for that area, before anything is allocated after the geometry (the
 * page checksums alone would be terabytes). */
START_TEST (test_load_huge_geometry)
{
  struct md_params p;
  struct md md;
  uint8_t blk[4096];
  char err[256];
  int fd = tmp_fd ();

  small_params (&p, 1);
  ck_assert_int_eq (md_create (&md, fd, 0, &p, false, err, sizeof err), 0);
  md_close (&md);
  pread_all (fd, blk, sizeof blk, 0);
  put_be64 (blk + 40, UINT64_C (1) << 60);      /* size: 1 EiB */
  put_be32 (blk + 48, 512);                     /* granularity */
  put_be32 (blk + 52, 1u << 30);                /* AL extent size */
  put_be32 (blk + 64, 31);                      /* peer slots */
  memset (blk + 96 + 16 * 2, 0xff, 16 * 29);    /* ... free */
  for (unsigned i = 2; i < 31; i++)
    memset (blk + 96 + 16 * i + 4, 0, 12);
  reseal (blk, sizeof blk);
  pwrite_all (fd, blk, sizeof blk, 0);

  errno = 0;
  ck_assert_int_eq (md_load (&md, fd, 0, MD_ANY_NODE, 0, err, sizeof err),
                    -1);
  ck_assert_int_eq (errno, EINVAL);
  ck_assert_err_has (err, "before the end of its area");
  ck_assert_int_eq (md.md_fd, -1);
  close (fd);
}
END_TEST

START_TEST (test_super_alternation_and_fallback)
{
  struct md_params p;
  struct md md;
  struct md_super sb;
  uint8_t blk[MD_BLOCK_SIZE];
  char err[512];
  int fd = tmp_fd ();

  small_params (&p, 1);
  ck_assert_int_eq (md_create (&md, fd, 0, &p, false, err, sizeof err), 0);

  /* seq 2 into B, 3 into A, 4 into B. */
  sb = md.md_super;
  sb.ms_flags &= ~MD_FLAG_CLEAN;
  ck_assert_int_eq (md_write_super (&md, &sb, err, sizeof err), 0);
  ck_assert_uint_eq (md.md_super.ms_seq, 2);
  ck_assert_uint_eq (md.md_super_slot, 1);
  sb = md.md_super;
  sb.ms_flags |= MD_FLAG_PRIMARY;
  sb.ms_history_uuid[0] = sb.ms_current_uuid;
  sb.ms_current_uuid = UINT64_C (0x1234);
  ck_assert_int_eq (md_write_super (&md, &sb, err, sizeof err), 0);
  ck_assert_uint_eq (md.md_super.ms_seq, 3);
  ck_assert_uint_eq (md.md_super_slot, 0);
  sb = md.md_super;
  sb.ms_peers[0].mp_flags = MD_PEER_OUTDATED;
  sb.ms_peers[0].mp_bitmap_uuid = UINT64_C (0x1234);
  ck_assert_int_eq (md_write_super (&md, &sb, err, sizeof err), 0);
  ck_assert_uint_eq (md.md_super.ms_seq, 4);
  ck_assert_uint_eq (md.md_super_slot, 1);
  ck_assert_uint_eq (md.md_other_seq, 3);

  /* Immutable fields. */
  sb = md.md_super;
  sb.ms_geom.mg_size++;
  ck_assert_int_eq (md_write_super (&md, &sb, err, sizeof err), -1);
  ck_assert_err_has (err, "geometry changed");
  sb = md.md_super;
  sb.ms_node_id = 5;
  ck_assert_int_eq (md_write_super (&md, &sb, err, sizeof err), -1);
  sb = md.md_super;
  sb.ms_flags = 0x100;
  ck_assert_int_eq (md_write_super (&md, &sb, err, sizeof err), -1);
  ck_assert_err_has (err, "unknown flags");
  ck_assert_uint_eq (md.md_super.ms_seq, 4);
  sb = md.md_super;
  md_close (&md);

  ck_assert_int_eq (md_load (&md, fd, 0, 1, 64 * MiB, err, sizeof err), 0);
  ck_assert_uint_eq (md.md_super.ms_seq, 4);
  ck_assert_uint_eq (md.md_super_slot, 1);
  ck_assert_uint_eq (md.md_other_seq, 3);
  assert_super_eq (&md.md_super, &sb);
  md_close (&md);

  /* A torn write of seq 5 into A: only its first 64 bytes made it (the
   * new current UUID at 72 did not).  A tear after the last byte that
   * differs from the old block would leave the whole new record, which
   * is then rightly valid. */
  {
    struct md_super next = sb;
    uint8_t torn[MD_BLOCK_SIZE];

    next.ms_seq = 5;
    next.ms_flags |= MD_FLAG_CRASHED_PRIMARY;
    next.ms_current_uuid = 0x9999;
    ck_assert_int_eq (md_encode_super (&next, torn, err, sizeof err), 0);
    pwrite_all (fd, torn, 64, 0);
  }
  ck_assert_int_eq (md_load (&md, fd, 0, 1, 64 * MiB, err, sizeof err), 0);
  ck_assert_uint_eq (md.md_super.ms_seq, 4);
  assert_super_eq (&md.md_super, &sb);
  ck_assert_uint_eq (md.md_other_seq, 0);
  ck_assert_err_has (md.md_other_why, "checksum mismatch");
  /* The same tear when the old block already equals the new record
   * beyond byte 64 leaves the complete new record: taken. */
  {
    struct md_super next = sb;
    uint8_t blk2[MD_BLOCK_SIZE], old[MD_BLOCK_SIZE];

    pread_all (fd, old, sizeof old, 0);
    next.ms_seq = 5;
    next.ms_flags |= MD_FLAG_CRASHED_PRIMARY;
    ck_assert_int_eq (md_encode_super (&next, blk2, err, sizeof err), 0);
    pwrite_all (fd, blk2 + 64, sizeof blk2 - 64, 64);   /* the old block */
    md_close (&md);
    ck_assert_int_eq (md_load (&md, fd, 0, 1, 64 * MiB, err, sizeof err), 0);
    ck_assert_uint_eq (md.md_super.ms_seq, 4);          /* still torn */
    pwrite_all (fd, blk2, 64, 0);                       /* the tear */
    md_close (&md);
    ck_assert_int_eq (md_load (&md, fd, 0, 1, 64 * MiB, err, sizeof err), 0);
    ck_assert_uint_eq (md.md_super.ms_seq, 5);
    ck_assert_uint_eq (md.md_super.ms_flags, next.ms_flags);
    md_close (&md);
    pwrite_all (fd, old, sizeof old, 0);       /* back to the torn one */
    ck_assert_int_eq (md_load (&md, fd, 0, 1, 64 * MiB, err, sizeof err), 0);
    ck_assert_uint_eq (md.md_super.ms_seq, 4);
  }
  /* The next write goes into A again, never over B. */
  sb = md.md_super;
  ck_assert_int_eq (md_write_super (&md, &sb, err, sizeof err), 0);
  ck_assert_uint_eq (md.md_super.ms_seq, 5);
  ck_assert_uint_eq (md.md_super_slot, 0);
  md_close (&md);
  ck_assert_int_eq (md_load (&md, fd, 0, 1, 64 * MiB, err, sizeof err), 0);
  ck_assert_uint_eq (md.md_super.ms_seq, 5);
  ck_assert_uint_eq (md.md_other_seq, 4);
  md_close (&md);

  /* The newest slot damaged: the older one is used. */
  corrupt_byte (fd, 300);                      /* slot A, seq 5 */
  ck_assert_int_eq (md_load (&md, fd, 0, 1, 64 * MiB, err, sizeof err), 0);
  ck_assert_uint_eq (md.md_super.ms_seq, 4);
  ck_assert_uint_eq (md.md_super_slot, 1);
  md_close (&md);

  /* Both damaged: an error that names both. */
  corrupt_byte (fd, 4096 + 300);
  ck_assert_int_eq (md_load (&md, fd, 0, 1, 64 * MiB, err, sizeof err), -1);
  ck_assert_int_eq (errno, EINVAL);
  ck_assert_err_has (err, "no valid superblock: slot A: checksum mismatch");
  ck_assert_err_has (err, "slot B: checksum mismatch");

  /* Both valid but from different areas, or with the same seq. */
  corrupt_byte (fd, 300);
  corrupt_byte (fd, 4096 + 300);
  pread_all (fd, blk, sizeof blk, 0);          /* A: seq 5 */
  put_be64 (blk + 24, get_be64 (blk + 24) + 1);
  reseal (blk, sizeof blk);
  pwrite_all (fd, blk, sizeof blk, 0);
  ck_assert_int_eq (md_load (&md, fd, 0, 1, 64 * MiB, err, sizeof err), -1);
  ck_assert_err_has (err, "belong to different metadata");
  put_be64 (blk + 24, get_be64 (blk + 24) - 1);
  put_be64 (blk + 16, 4);
  reseal (blk, sizeof blk);
  pwrite_all (fd, blk, sizeof blk, 0);
  ck_assert_int_eq (md_load (&md, fd, 0, 1, 64 * MiB, err, sizeof err), -1);
  ck_assert_err_has (err, "both have sequence number 4");
  close (fd);
}
END_TEST

/* ---------------------------------------------------------------- */
/* Activity-log transactions on disk */

static void
table_of (uint32_t *table, const uint32_t *extents, size_t n)
{
  size_t i;

  for (i = 0; i < 8; ++i)
    table[i] = i < n ? extents[i] : MD_AL_EMPTY;
}

START_TEST (test_al_ring)
{
  static const uint32_t sets[][3] = {
    { 1, 2, 3 }, { 4, 5, 6 }, { 7, 8, 9 }, { 10, 11, 12 }, { 13, 14, 15 },
    { 16, 17, 18 },
  };
  struct md_params p;
  struct md md;
  struct md_layout l;
  uint32_t table[8];
  uint8_t torn[8192];
  char err[512];
  int fd = tmp_fd ();
  size_t i;

  small_params (&p, 1);
  p.pa_geom.mg_al_extents = 1100;              /* two blocks per txn */
  ck_assert_int_eq (md_create (&md, fd, 0, &p, false, err, sizeof err), 0);
  ck_assert_uint_eq (md.md_layout.ml_txn_size, 8192);
  md_close (&md);
  p.pa_geom.mg_al_extents = 8;
  ck_assert_int_eq (md_create (&md, fd, 0, &p, true, err, sizeof err), 0);
  l = md.md_layout;

  /* Transactions 2..7: ring slots 1, 2, 3, 0, 1, 2. */
  for (i = 0; i < 6; ++i) {
    table_of (table, sets[i], 3);
    ck_assert_int_eq (md_write_al (&md, i + 2, table, err, sizeof err), 0);
    ck_assert_uint_eq (md.md_al_seq, i + 2);
    ck_assert_uint_eq (md.md_al_slot, (i + 1) % 4);
  }
  ck_assert_int_eq (md_write_al (&md, 7, table, err, sizeof err), -1);
  ck_assert_err_has (err, "sequence number 7 not after 7");
  table[1] = table[0];
  ck_assert_int_eq (md_write_al (&md, 8, table, err, sizeof err), -1);
  ck_assert_err_has (err, "twice");
  md_close (&md);

  ck_assert_int_eq (md_load (&md, fd, 0, 1, 64 * MiB, err, sizeof err), 0);
  ck_assert_uint_eq (md.md_al_seq, 7);
  ck_assert_uint_eq (md.md_al_slot, 2);
  ck_assert_uint_eq (md.md_al_valid, 4);
  table_of (table, sets[5], 3);
  ck_assert_int_eq (memcmp (md.md_al_table, table, sizeof table), 0);

  /* A torn transaction 8 in slot 3: its header made it, its table did
   * not. */
  {
    uint32_t t8[8] = { 30, 31, MD_AL_EMPTY, MD_AL_EMPTY, MD_AL_EMPTY,
                       MD_AL_EMPTY, MD_AL_EMPTY, MD_AL_EMPTY };

    ck_assert_int_eq (md_encode_al (&md.md_super.ms_geom, &l,
                                    md.md_super.ms_instance, 8, t8, torn,
                                    err, sizeof err), 0);
    pwrite_all (fd, torn, 40, l.ml_al_offset + 3 * 4096);
  }
  md_close (&md);
  ck_assert_int_eq (md_load (&md, fd, 0, 1, 64 * MiB, err, sizeof err), 0);
  ck_assert_uint_eq (md.md_al_seq, 7);
  ck_assert_int_eq (memcmp (md.md_al_table, table, sizeof table), 0);
  ck_assert_uint_eq (md.md_al_valid, 3);

  /* The next write goes into slot 3 again. */
  ck_assert_int_eq (md_write_al (&md, 9, table, err, sizeof err), 0);
  ck_assert_uint_eq (md.md_al_slot, 3);
  md_close (&md);

  /* The newest damaged: the one before. */
  corrupt_byte (fd, l.ml_al_offset + 3 * 4096 + 50);
  ck_assert_int_eq (md_load (&md, fd, 0, 1, 64 * MiB, err, sizeof err), 0);
  ck_assert_uint_eq (md.md_al_seq, 7);
  md_close (&md);

  /* A transaction of another instance (an earlier md_create) with a
   * higher seq is not taken. */
  ck_assert_int_eq (md_load (&md, fd, 0, 1, 64 * MiB, err, sizeof err), 0);
  {
    uint32_t t[8] = { 60, MD_AL_EMPTY, MD_AL_EMPTY, MD_AL_EMPTY,
                      MD_AL_EMPTY, MD_AL_EMPTY, MD_AL_EMPTY, MD_AL_EMPTY };

    ck_assert_int_eq (md_encode_al (&md.md_super.ms_geom, &l,
                                    md.md_super.ms_instance + 1, 100, t,
                                    torn, err, sizeof err), 0);
    pwrite_all (fd, torn, 4096, l.ml_al_offset + 3 * 4096);
  }
  md_close (&md);
  ck_assert_int_eq (md_load (&md, fd, 0, 1, 64 * MiB, err, sizeof err), 0);
  ck_assert_uint_eq (md.md_al_seq, 7);
  md_close (&md);

  /* None valid: an error naming every slot. */
  for (i = 0; i < 4; ++i)
    corrupt_byte (fd, l.ml_al_offset + i * 4096 + 100);
  ck_assert_int_eq (md_load (&md, fd, 0, 1, 64 * MiB, err, sizeof err), -1);
  ck_assert_int_eq (errno, EINVAL);
  ck_assert_err_has (err, "activity log: no valid transaction in 4 slots");
  ck_assert_err_has (err, "slot 0: checksum mismatch");
  ck_assert_err_has (err, "slot 3: ");
  close (fd);
}
END_TEST

/* ---------------------------------------------------------------- */
/* Bitmaps on disk */

START_TEST (test_bitmap_io)
{
  /* 512-byte chunks and a short last chunk: 204800 bits, 7 pages, the
   * last one partly used. */
  const uint64_t size = 100 * MiB - 100;
  struct md_params p;
  struct md md;
  struct bitmap bm, back;
  uint64_t nbad, first, count, seed = 77, i;
  char err[256];
  int fd = tmp_fd ();

  small_params (&p, 0);
  p.pa_geom.mg_size = size;
  p.pa_geom.mg_granularity = 512;
  p.pa_peer_ids[1] = 5;
  p.pa_in_sync = true;
  ck_assert_int_eq (md_create (&md, fd, 0, &p, false, err, sizeof err), 0);
  ck_assert_uint_eq (md.md_layout.ml_bm_nbits, 204800);
  ck_assert_uint_eq (md.md_layout.ml_bm_pages, 7);

  ck_assert_int_eq (bitmap_init (&bm, size, 512), 0);
  ck_assert_int_eq (bitmap_init (&back, size, 512), 0);
  for (i = 0; i < 3000; ++i)
    bitmap_set_range (&bm, rng_next (&seed) % size, rng_next (&seed) % 9000);
  bitmap_set_range (&bm, size - 1, 1);         /* the very last bit */
  ck_assert_int_eq (md_write_bitmap (&md, 1, &bm, 0, 7, err, sizeof err), 0);
  md_close (&md);

  ck_assert_int_eq (md_load (&md, fd, 0, 0, size, err, sizeof err), 0);
  ck_assert_int_eq (md_read_bitmap (&md, 1, &back, 0, 7, &nbad,
                                    err, sizeof err), 0);
  ck_assert_uint_eq (nbad, 0);
  ck_assert_uint_eq (bitmap_count (&back), bitmap_count (&bm));
  ck_assert_int_eq (memcmp (bm.bm_words, back.bm_words,
                            (204800 / 64) * 8), 0);
  /* Slot 0 untouched: clear. */
  bitmap_clear_all (&back);
  ck_assert_int_eq (md_read_bitmap (&md, 0, &back, 0, 7, &nbad,
                                    err, sizeof err), 0);
  ck_assert_uint_eq (bitmap_count (&back), 0);

  /* On disk: bit i at byte i / 8, bit i % 8. */
  {
    uint8_t page[4096];
    uint64_t off = md.md_layout.ml_bm_offset + md.md_layout.ml_peer_size +
                   md.md_layout.ml_crc_blocks * 4096;

    pread_all (fd, page, sizeof page, off + 6 * 4096);
    ck_assert_uint_eq (page[(204799 - 6 * 32768) / 8],
                       1u << (204799 % 8));
    ck_assert_uint_eq (page[4095], 0);
  }

  /* One page rewritten: the others keep what they had. */
  md_bitmap_pages (&md, 3 * 32768 * 512, 512, &first, &count);
  ck_assert_uint_eq (first, 3);
  ck_assert_uint_eq (count, 1);
  md_bitmap_pages (&md, 32768 * 512 - 1, 2, &first, &count);
  ck_assert_uint_eq (first, 0);
  ck_assert_uint_eq (count, 2);
  md_bitmap_pages (&md, 0, UINT64_MAX, &first, &count);
  ck_assert_uint_eq (first, 0);
  ck_assert_uint_eq (count, 7);
  md_bitmap_pages (&md, size, 1, &first, &count);
  ck_assert_uint_eq (count, 0);

  bitmap_clear_all (&bm);
  bitmap_set_range (&bm, 3 * 32768 * 512, 512);
  ck_assert_int_eq (md_write_bitmap (&md, 1, &bm, 3, 1, err, sizeof err), 0);
  bitmap_clear_all (&back);
  ck_assert_int_eq (md_read_bitmap (&md, 1, &back, 3, 1, &nbad,
                                    err, sizeof err), 0);
  ck_assert_uint_eq (bitmap_count (&back), 1);
  ck_assert (bitmap_test (&back, 3 * 32768));
  ck_assert_int_eq (md_read_bitmap (&md, 1, &back, 0, 7, &nbad,
                                    err, sizeof err), 0);
  ck_assert_uint_gt (bitmap_count (&back), 1);
  md_close (&md);

  /* A damaged page reads as all dirty; its neighbours are fine. */
  ck_assert_int_eq (md_load (&md, fd, 0, 0, size, err, sizeof err), 0);
  corrupt_byte (fd, md.md_layout.ml_bm_offset + md.md_layout.ml_peer_size +
                (md.md_layout.ml_crc_blocks + 3) * 4096 + 10);
  bitmap_clear_all (&back);
  ck_assert_int_eq (md_read_bitmap (&md, 1, &back, 2, 3, &nbad,
                                    err, sizeof err), 0);
  ck_assert_uint_eq (nbad, 1);
  bitmap_clear_all (&back);
  ck_assert_int_eq (md_read_bitmap (&md, 1, &back, 3, 1, &nbad,
                                    err, sizeof err), 0);
  ck_assert_uint_eq (nbad, 1);
  ck_assert_uint_eq (bitmap_count (&back), 32768);
  ck_assert_uint_eq (bitmap_next_set (&back, 0), 3 * 32768);
  /* The last page, damaged, is all dirty only up to the end. */
  corrupt_byte (fd, md.md_layout.ml_bm_offset + md.md_layout.ml_peer_size +
                (md.md_layout.ml_crc_blocks + 6) * 4096 + 4000);
  bitmap_clear_all (&back);
  ck_assert_int_eq (md_read_bitmap (&md, 1, &back, 6, 1, &nbad,
                                    err, sizeof err), 0);
  ck_assert_uint_eq (nbad, 1);
  ck_assert_uint_eq (bitmap_count (&back), 204800 - 6 * 32768);

  /* A torn checksum block: the pages it covers read as all dirty. */
  corrupt_byte (fd, md.md_layout.ml_bm_offset + 4 * 2 + 1);   /* slot 0 */
  md_close (&md);
  ck_assert_int_eq (md_load (&md, fd, 0, 0, size, err, sizeof err), 0);
  bitmap_clear_all (&back);
  ck_assert_int_eq (md_read_bitmap (&md, 0, &back, 0, 7, &nbad,
                                    err, sizeof err), 0);
  ck_assert_uint_eq (nbad, 1);
  ck_assert_uint_eq (bitmap_count (&back), 32768);

  /* A valid page with bits past the end of the volume is refused. */
  {
    uint8_t page[4096], c[4];
    uint64_t poff = md.md_layout.ml_bm_offset +
                    (md.md_layout.ml_crc_blocks + 6) * 4096;

    memset (page, 0, sizeof page);
    page[4095] = 0x80;
    pwrite_all (fd, page, sizeof page, poff);
    put_be32 (c, crc32c (0, page, sizeof page));
    pwrite_all (fd, c, 4, md.md_layout.ml_bm_offset + 6 * 4);
    md_close (&md);
    ck_assert_int_eq (md_load (&md, fd, 0, 0, size, err, sizeof err), 0);
    ck_assert_int_eq (md_read_bitmap (&md, 0, &back, 6, 1, &nbad,
                                      err, sizeof err), -1);
    ck_assert_err_has (err, "bits set beyond the end of the volume");
  }

  /* Argument checks. */
  ck_assert_int_eq (md_read_bitmap (&md, 2, &back, 0, 1, &nbad,
                                    err, sizeof err), -1);
  ck_assert_err_has (err, "peer slot 2");
  ck_assert_int_eq (md_write_bitmap (&md, 0, &back, 6, 2, err, sizeof err),
                    -1);
  ck_assert_err_has (err, "beyond 7");
  bitmap_free (&back);
  ck_assert_int_eq (bitmap_init (&back, size, 4096), 0);
  ck_assert_int_eq (md_write_bitmap (&md, 0, &back, 0, 1, err, sizeof err),
                    -1);
  ck_assert_err_has (err, "does not match");

  bitmap_free (&back);
  bitmap_free (&bm);
  md_close (&md);
  close (fd);
}
END_TEST

/* Metadata at the end of a "device" (a file of a fixed size), data in
 * front of it untouched. */
/* Growing the volume (md_grow): the bitmaps move to a region of their
 * own, keep their bits, get the new chunks clear or set per slot; the
 * superblock written last is the commit, so putting the old one back
 * (a crash before the commit became durable) gives the old metadata,
 * intact.  Twice: the second growth puts the bitmaps back after the
 * ring when they fit in front of the moved ones, or further on. */
START_TEST (test_grow)
{
  const uint64_t size = 64 * MiB - 512, big = 128 * MiB, bigger = 129 * MiB;
  struct md_params p;
  struct md md;
  struct bitmap bm, back;
  uint8_t before[2 * MD_BLOCK_SIZE], after[2 * MD_BLOCK_SIZE];
  uint64_t nbad, old_bm_offset;
  uint32_t table[8];
  char err[256];
  unsigned i;
  int fd = tmp_fd ();

  small_params (&p, 0);
  p.pa_geom.mg_size = size;
  p.pa_peer_ids[1] = 5;
  p.pa_in_sync = true;
  ck_assert_int_eq (md_create (&md, fd, 0, &p, false, err, sizeof err), 0);
  old_bm_offset = md.md_layout.ml_bm_offset;
  ck_assert_int_eq (bitmap_init (&bm, size, 4096), 0);
  bitmap_set_range (&bm, 0, 4096);
  bitmap_set_range (&bm, size - 1, 1);          /* the short last chunk */
  ck_assert_int_eq (md_write_bitmap (&md, 1, &bm, 0,
                                     md.md_layout.ml_bm_pages,
                                     err, sizeof err), 0);
  for (i = 0; i < 8; ++i)
    table[i] = i < 2 ? i * 7 : MD_AL_EMPTY;
  ck_assert_int_eq (md_write_al (&md, 2, table, err, sizeof err), 0);

  /* Refused: smaller, the same, beyond the largest. */
  ck_assert_int_eq (md_grow (&md, size - 4096, 0, err, sizeof err), -1);
  ck_assert_ptr_nonnull (strstr (err, "shrinking is not supported"));
  ck_assert_int_eq (md_grow (&md, size, 0, err, sizeof err), -1);
  ck_assert_int_eq (md_grow (&md, MD_MAX_SIZE + 1, 0, err, sizeof err), -1);
  ck_assert_uint_eq (md.md_super.ms_geom.mg_size, size);

  pread_all (fd, before, sizeof before, 0);
  ck_assert_int_eq (md_grow (&md, big, 1u << 1, err, sizeof err), 0);
  ck_assert_uint_eq (md.md_super.ms_geom.mg_size, big);
  ck_assert_uint_ge (md.md_layout.ml_bm_offset, old_bm_offset + 2 * 4096);
  ck_assert_uint_eq (md.md_super.ms_geom.mg_bm_offset,
                     md.md_layout.ml_bm_offset);
  pread_all (fd, after, sizeof after, 0);
  md_close (&md);

  /* What a restart finds: the new size, version 2, the bits. */
  ck_assert_int_eq (md_load (&md, fd, 0, 0, 0, err, sizeof err), 0);
  ck_assert_uint_eq (md.md_super.ms_geom.mg_size, big);
  ck_assert_uint_eq (md.md_al_seq, 2);
  ck_assert_uint_eq (md.md_al_table[1], 7);
  ck_assert_int_eq (bitmap_init (&back, big, 4096), 0);
  ck_assert_int_eq (md_read_bitmap (&md, 1, &back, 0,
                                    md.md_layout.ml_bm_pages, &nbad,
                                    err, sizeof err), 0);
  ck_assert_uint_eq (nbad, 0);
  ck_assert (bitmap_test (&back, 0));
  ck_assert (!bitmap_test (&back, 1));
  ck_assert (bitmap_test (&back, (size - 1) / 4096));
  /* slot 1 marked: every new chunk set; slot 0 not: all clear. */
  ck_assert_uint_eq (bitmap_count (&back),
                     2 + (big / 4096 - (size + 4095) / 4096));
  bitmap_free (&back);
  ck_assert_int_eq (bitmap_init (&back, big, 4096), 0);
  ck_assert_int_eq (md_read_bitmap (&md, 0, &back, 0,
                                    md.md_layout.ml_bm_pages, &nbad,
                                    err, sizeof err), 0);
  ck_assert_uint_eq (bitmap_count (&back), 0);
  bitmap_free (&back);

  /* A second growth: the new bitmaps do not fit in front of the moved
   * ones, so they go after them; still readable, still version 2. */
  ck_assert_int_eq (md_grow (&md, bigger, 0, err, sizeof err), 0);
  md_close (&md);
  ck_assert_int_eq (md_load (&md, fd, 0, 0, 0, err, sizeof err), 0);
  ck_assert_uint_eq (md.md_super.ms_geom.mg_size, bigger);
  ck_assert_int_eq (bitmap_init (&back, bigger, 4096), 0);
  ck_assert_int_eq (md_read_bitmap (&md, 1, &back, 0,
                                    md.md_layout.ml_bm_pages, &nbad,
                                    err, sizeof err), 0);
  ck_assert_uint_eq (bitmap_count (&back),
                     2 + (big / 4096 - (size + 4095) / 4096));
  bitmap_free (&back);
  md_close (&md);

  /* The crash before the commit was durable: the superblocks as they
   * were before the first growth.  The old area was never written. */
  pwrite_all (fd, before, sizeof before, 0);
  ck_assert_int_eq (md_load (&md, fd, 0, 0, size, err, sizeof err), 0);
  ck_assert_uint_eq (md.md_super.ms_geom.mg_bm_offset, 0);
  ck_assert_int_eq (bitmap_init (&back, size, 4096), 0);
  ck_assert_int_eq (md_read_bitmap (&md, 1, &back, 0,
                                    md.md_layout.ml_bm_pages, &nbad,
                                    err, sizeof err), 0);
  ck_assert_uint_eq (nbad, 0);
  ck_assert_uint_eq (bitmap_count (&back), 2);
  bitmap_free (&back);
  md_close (&md);

  /* A torn commit: the slot it went to is garbage; the other is taken. */
  {
    unsigned s;
    for (s = 0; s < 2; ++s)
      if (get_be64 (after + s * MD_BLOCK_SIZE + 40) == big) {
        memcpy (before + s * MD_BLOCK_SIZE, after + s * MD_BLOCK_SIZE,
                MD_BLOCK_SIZE);
        before[s * MD_BLOCK_SIZE + 1000] ^= 1;        /* torn */
      }
  }
  pwrite_all (fd, before, sizeof before, 0);
  ck_assert_int_eq (md_load (&md, fd, 0, 0, size, err, sizeof err), 0);
  md_close (&md);

  /* A version-1 superblock may not have a bitmap offset, nor a
   * version-2 one lack it. */
  {
    uint8_t blk[MD_BLOCK_SIZE];
    struct md_super sb;
    unsigned s = get_be64 (after + 40) == big ? 0 : 1;

    memcpy (blk, after + s * MD_BLOCK_SIZE, MD_BLOCK_SIZE);
    ck_assert_int_eq (md_decode_super (blk, &sb, err, sizeof err), 0);
    blk[7] = 1;                                 /* version 1 */
    reseal (blk, MD_BLOCK_SIZE);
    ck_assert_int_eq (md_decode_super (blk, &sb, err, sizeof err), -1);
    ck_assert_ptr_nonnull (strstr (err, "bitmap offset"));
    blk[7] = 3;
    reseal (blk, MD_BLOCK_SIZE);
    ck_assert_int_eq (md_decode_super (blk, &sb, err, sizeof err), -1);
    ck_assert_ptr_nonnull (strstr (err, "format version 3"));
  }
  bitmap_free (&bm);
  close (fd);
}
END_TEST

START_TEST (test_internal_on_file)
{
  const uint64_t dev = 256 * MiB + 4096 * 3;
  struct md_params p;
  struct md md;
  uint64_t base;
  char err[256], marker[16] = "volume-data-end";
  char back[16];
  int fd = tmp_fd ();

  small_params (&p, 1);
  ck_assert_int_eq (md_internal_place (dev, &p.pa_geom, &base,
                                       err, sizeof err), 0);
  ck_assert_int_eq (ftruncate (fd, dev), 0);
  pwrite_all (fd, marker, sizeof marker, base - sizeof marker);
  ck_assert_int_eq (md_create (&md, fd, base, &p, false, err, sizeof err), 0);
  md_close (&md);
  ck_assert_uint_eq (lseek (fd, 0, SEEK_END), dev);
  ck_assert_int_eq (md_load (&md, fd, base, 1, base, err, sizeof err), 0);
  ck_assert_uint_eq (md.md_super.ms_geom.mg_size, base);
  md_close (&md);
  pread_all (fd, back, sizeof back, base - sizeof back);
  ck_assert_int_eq (memcmp (back, marker, sizeof marker), 0);
  /* Nothing at offset 0. */
  ck_assert_int_eq (md_load (&md, fd, 0, 1, 0, err, sizeof err), -1);
  close (fd);
}
END_TEST

START_TEST (test_dump)
{
  struct md_params p;
  struct md md;
  struct bitmap bm;
  uint32_t table[8] = { 3, 7, MD_AL_EMPTY, MD_AL_EMPTY, MD_AL_EMPTY,
                        MD_AL_EMPTY, MD_AL_EMPTY, MD_AL_EMPTY };
  char err[256], *text = NULL;
  size_t len = 0;
  FILE *fp;
  int fd = tmp_fd ();

  small_params (&p, 1);
  p.pa_in_sync = true;
  ck_assert_int_eq (md_create (&md, fd, 0, &p, false, err, sizeof err), 0);
  ck_assert_int_eq (md_write_al (&md, 2, table, err, sizeof err), 0);
  ck_assert_int_eq (bitmap_init (&bm, 64 * MiB, 4096), 0);
  bitmap_set_range (&bm, 0, 1 * MiB);
  ck_assert_int_eq (md_write_bitmap (&md, 0, &bm, 0, 1, err, sizeof err), 0);
  bitmap_free (&bm);

  fp = open_memstream (&text, &len);
  ck_assert_ptr_nonnull (fp);
  ck_assert_int_eq (md_dump (&md, fp, err, sizeof err), 0);
  fclose (fp);
  ck_assert_err_has (text, "superblock: slot A, seq 1 (slot B: empty)");
  ck_assert_err_has (text, "node-id: 1\n");
  ck_assert_err_has (text, "size: 67108864 (64.0 MiB)\n");
  ck_assert_err_has (text, "flags: consistent was-uptodate clean\n");
  ck_assert_err_has (text, "activity-log: 8 extents of 64.0 KiB");
  ck_assert_err_has (text, "activity-log-transaction: seq 2 in ring slot 1");
  ck_assert_err_has (text, "active-extents: 3 7\n");
  ck_assert_err_has (text, "slot 0: node-id 2 bitmap-uuid 0x0000000000000000"
                     " flags none out-of-sync 1048576 (1.0 MiB)");
  ck_assert_err_has (text, "slot 1: free");
  free (text);
  md_close (&md);
  close (fd);
}
END_TEST

/* ---------------------------------------------------------------- */
/* The activity log in memory */

#define X (64u << 10)           /* extent size in the logic tests */

/* Run one snapshot + commit; the drops go to drops (room for 2 * n). */
static uint64_t
commit (struct activity_log *al, uint32_t *table, uint32_t *drops,
        size_t *ndrops)
{
  uint64_t seq;

  ck_assert (!al_txn_in_flight (al));
  ck_assert_int_eq (al_snapshot (al, table, drops, ndrops, &seq), 0);
  ck_assert (al_txn_in_flight (al));
  al_committed (al, seq);
  ck_assert (!al_txn_in_flight (al));
  return seq;
}

static bool
table_has (const uint32_t *table, size_t n, uint32_t e)
{
  size_t i;

  for (i = 0; i < n; ++i)
    if (table[i] == e)
      return true;
  return false;
}

START_TEST (test_al_init)
{
  struct activity_log al;

  ck_assert_int_eq (al_init (&al, 0, X, 100 * X), -1);
  ck_assert_int_eq (errno, EINVAL);
  ck_assert_int_eq (al_init (&al, AL_MAX_SLOTS + 1, X, 100 * X), -1);
  ck_assert_int_eq (al_init (&al, 4, 3000, 100 * X), -1);
  ck_assert_int_eq (al_init (&al, 4, X + 1, 100 * X), -1);
  ck_assert_int_eq (al_init (&al, 4, X, 0), -1);
  ck_assert_int_eq (al_init (&al, 4, 4096, UINT64_C (4096) * UINT32_MAX), -1);
  ck_assert_int_eq (al_init (&al, 4, X, 100 * X + 1), 0);
  ck_assert_uint_eq (al.al_nextents, 101);
  ck_assert_uint_eq (al_nactive (&al), 0);
  al_free (&al);
  al_free (&al);                               /* harmless twice */
}
END_TEST

START_TEST (test_al_activation)
{
  struct activity_log al;
  uint32_t table[4], drops[8];
  size_t ndrops;
  uint64_t need, need2, seq;

  ck_assert_int_eq (al_init (&al, 4, X, 100 * X), 0);

  /* A new extent needs a transaction. */
  ck_assert_int_eq (al_begin (&al, 5 * X + 10, 100, &need), AL_NEED_TXN);
  ck_assert_uint_eq (need, 1);
  ck_assert (!al_is_durable (&al, need));
  ck_assert_uint_eq (al_nactive (&al), 1);
  /* A second writer to the same extent waits for the same one. */
  ck_assert_int_eq (al_begin (&al, 5 * X, X, &need2), AL_NEED_TXN);
  ck_assert_uint_eq (need2, 1);
  /* And one to another extent joins the same transaction. */
  ck_assert_int_eq (al_begin (&al, 9 * X, 1, &need2), AL_NEED_TXN);
  ck_assert_uint_eq (need2, 1);

  ck_assert_int_eq (al_snapshot (&al, table, drops, &ndrops, &seq), 0);
  ck_assert_uint_eq (seq, 1);
  ck_assert_uint_eq (ndrops, 0);
  ck_assert (table_has (table, 4, 5));
  ck_assert (table_has (table, 4, 9));
  ck_assert (table_has (table, 4, AL_EMPTY));

  /* While it is in flight: no second snapshot, and a new activation
   * waits for the next one. */
  ck_assert_int_eq (al_snapshot (&al, table, drops, &ndrops, &seq), -1);
  ck_assert_int_eq (errno, EBUSY);
  ck_assert_int_eq (al_begin (&al, 11 * X, 1, &need2), AL_NEED_TXN);
  ck_assert_uint_eq (need2, 2);
  ck_assert_int_eq (al_begin (&al, 5 * X, 1, &need2), AL_NEED_TXN);
  ck_assert_uint_eq (need2, 1);

  al_committed (&al, 1);
  ck_assert (al_is_durable (&al, 1));
  ck_assert (!al_is_durable (&al, 2));

  /* Re-use of an active, durable extent: no transaction. */
  ck_assert_int_eq (al_begin (&al, 9 * X + 5, 7, &need), AL_READY);
  ck_assert_uint_eq (need, 1);

  seq = commit (&al, table, drops, &ndrops);
  ck_assert_uint_eq (seq, 2);
  ck_assert (al_is_durable (&al, 2));
  ck_assert (table_has (table, 4, 11));
  ck_assert_int_eq (al_begin (&al, 11 * X, 1, &need), AL_READY);

  /* Errors. */
  ck_assert_int_eq (al_begin (&al, 0, 0, &need), -1);
  ck_assert_int_eq (errno, EINVAL);
  ck_assert_int_eq (al_begin (&al, 100 * X, 1, &need), -1);
  ck_assert_int_eq (errno, EINVAL);
  ck_assert_int_eq (al_begin (&al, 99 * X, X + 1, &need), -1);
  ck_assert_int_eq (errno, EINVAL);
  ck_assert_int_eq (al_begin (&al, 0, 5 * X, &need), -1);
  ck_assert_int_eq (errno, E2BIG);
  al_free (&al);
}
END_TEST

START_TEST (test_al_span)
{
  struct activity_log al;
  uint32_t table[4], drops[8], active[4], first, last;
  size_t ndrops;
  uint64_t need, off, len;

  ck_assert_int_eq (al_init (&al, 4, X, 10 * X + 100), 0);

  /* A write across an extent boundary activates both. */
  ck_assert_int_eq (al_begin (&al, 3 * X - 512, 1024, &need), AL_NEED_TXN);
  ck_assert_uint_eq (al_nactive (&al), 2);
  ck_assert_uint_eq (al_active_extents (&al, active, 4), 2);
  ck_assert (table_has (active, 2, 2) && table_has (active, 2, 3));
  commit (&al, table, drops, &ndrops);
  /* Half of it active already, the other half not: a transaction. */
  ck_assert_int_eq (al_begin (&al, 4 * X - 1, 2, &need), AL_NEED_TXN);
  ck_assert_uint_eq (al_nactive (&al), 3);
  commit (&al, table, drops, &ndrops);
  ck_assert_int_eq (al_begin (&al, 2 * X, 3 * X, &need), AL_READY);

  ck_assert (al_extent_span (&al, 3 * X - 512, 1024, &first, &last));
  ck_assert_uint_eq (first, 2);
  ck_assert_uint_eq (last, 3);
  ck_assert (!al_extent_span (&al, 5, 0, &first, &last));
  al_extent_range (&al, 10, &off, &len);       /* the short last one */
  ck_assert_uint_eq (off, 10 * X);
  ck_assert_uint_eq (len, 100);

  /* Completion drops a reference on both; only then may they go. */
  ck_assert (!al_complete (&al, 3 * X - 512, 1024));   /* 2, 3 held */
  ck_assert (!al_complete (&al, 4 * X - 1, 2));         /* 2, 3, 4 held */
  ck_assert_uint_eq (al.al_nidle, 1);
  ck_assert (al_complete (&al, 2 * X, 3 * X));
  ck_assert_uint_eq (al.al_nidle, 4);
  al_free (&al);
}
END_TEST

START_TEST (test_al_lru)
{
  struct activity_log al;
  uint32_t table[3], drops[6];
  size_t ndrops;
  uint64_t need;
  uint32_t e;

  ck_assert_int_eq (al_init (&al, 3, X, 100 * X), 0);
  for (e = 0; e < 3; ++e) {
    ck_assert_int_eq (al_begin (&al, e * X, 1, &need), AL_NEED_TXN);
    commit (&al, table, drops, &ndrops);
    ck_assert_uint_eq (ndrops, 0);             /* empty slots used first */
    al_complete (&al, e * X, 1);
  }
  /* Touch 0: now 1 is the least recently used. */
  ck_assert_int_eq (al_begin (&al, 0, 1, &need), AL_READY);
  al_complete (&al, 0, 1);

  ck_assert_int_eq (al_begin (&al, 50 * X, 1, &need), AL_NEED_TXN);
  commit (&al, table, drops, &ndrops);
  ck_assert_uint_eq (ndrops, 1);
  ck_assert_uint_eq (drops[0], 1);
  ck_assert (table_has (table, 3, 0));
  ck_assert (table_has (table, 3, 2));
  ck_assert (table_has (table, 3, 50));
  ck_assert (!table_has (table, 3, 1));
  al_complete (&al, 50 * X, 1);

  /* Then 2, then 0. */
  ck_assert_int_eq (al_begin (&al, 51 * X, 1, &need), AL_NEED_TXN);
  commit (&al, table, drops, &ndrops);
  ck_assert_uint_eq (ndrops, 1);
  ck_assert_uint_eq (drops[0], 2);
  ck_assert_int_eq (al_begin (&al, 52 * X, 1, &need), AL_NEED_TXN);
  commit (&al, table, drops, &ndrops);
  ck_assert_uint_eq (ndrops, 1);
  ck_assert_uint_eq (drops[0], 0);
  al_free (&al);
}
END_TEST

START_TEST (test_al_busy)
{
  struct activity_log al;
  uint32_t table[2], drops[4];
  size_t ndrops;
  uint64_t need;

  ck_assert_int_eq (al_init (&al, 2, X, 100 * X), 0);
  ck_assert_int_eq (al_begin (&al, 0, 1, &need), AL_NEED_TXN);
  ck_assert_int_eq (al_begin (&al, X, 1, &need), AL_NEED_TXN);
  commit (&al, table, drops, &ndrops);

  /* Both slots have writes in flight: nothing may be evicted. */
  ck_assert_int_eq (al_begin (&al, 7 * X, 1, &need), AL_BUSY);
  ck_assert_uint_eq (al_nactive (&al), 2);
  ck_assert (table_has (table, 2, 0) && table_has (table, 2, 1));
  /* But the active ones can still be written. */
  ck_assert_int_eq (al_begin (&al, 0, 1, &need), AL_READY);

  /* 0 has two writes in flight; one completing frees nothing. */
  ck_assert (!al_complete (&al, 0, 1));
  ck_assert_int_eq (al_begin (&al, 7 * X, 1, &need), AL_BUSY);
  ck_assert (al_complete (&al, 0, 1));

  /* All or nothing: 7 and 8 need two slots, only one is idle. */
  ck_assert_int_eq (al_begin (&al, 8 * X - 1, 2, &need), AL_BUSY);
  ck_assert_uint_eq (al.al_nidle, 1);
  ck_assert_int_eq (al_begin (&al, X, 1, &need), AL_READY);     /* 1 again */
  /* A range whose active part is idle: that slot can't be the victim. */
  ck_assert (!al_complete (&al, X, 1));
  ck_assert (al_complete (&al, X, 1));
  ck_assert_int_eq (al_begin (&al, 2 * X - 1, 2, &need), AL_NEED_TXN);
  /* 1 kept, 2 took 0's slot. */
  commit (&al, table, drops, &ndrops);
  ck_assert (table_has (table, 2, 1) && table_has (table, 2, 2));
  ck_assert_uint_eq (ndrops, 1);
  ck_assert_uint_eq (drops[0], 0);
  al_free (&al);
}
END_TEST

START_TEST (test_al_drops)
{
  struct activity_log al;
  uint32_t table[2], drops[4];
  size_t ndrops;
  uint64_t need, seq;

  ck_assert_int_eq (al_init (&al, 2, X, 100 * X), 0);

  /* Activated and given up before any snapshot: evicting it needs no
   * bitmap flush, it was never on disk. */
  ck_assert_int_eq (al_begin (&al, 0, 1, &need), AL_NEED_TXN);
  al_complete (&al, 0, 1);
  ck_assert_int_eq (al_begin (&al, X, 1, &need), AL_NEED_TXN);
  al_complete (&al, X, 1);
  /* evicts 0 */
  ck_assert_int_eq (al_begin (&al, 2 * X, 1, &need), AL_NEED_TXN);
  commit (&al, table, drops, &ndrops);
  ck_assert_uint_eq (ndrops, 0);
  ck_assert (table_has (table, 2, 1) && table_has (table, 2, 2));
  al_complete (&al, 2 * X, 1);

  /* Logged extent 1 evicted, then brought back before the snapshot: no
   * drop for it any more; 2 evicted in its place is one. */
  /* evicts 1 */
  ck_assert_int_eq (al_begin (&al, 3 * X, 1, &need), AL_NEED_TXN);
  al_complete (&al, 3 * X, 1);
  ck_assert_uint_eq (al.al_ndrops, 1);
  /* evicts 2 */
  ck_assert_int_eq (al_begin (&al, X, 1, &need), AL_NEED_TXN);
  commit (&al, table, drops, &ndrops);
  ck_assert_uint_eq (ndrops, 1);
  ck_assert_uint_eq (drops[0], 2);
  al_complete (&al, X, 1);

  /* A drop made while a snapshot is in flight stays for the next one. */
  /* evicts 3 */
  ck_assert_int_eq (al_begin (&al, 4 * X, 1, &need), AL_NEED_TXN);
  al_complete (&al, 4 * X, 1);
  ck_assert_int_eq (al_snapshot (&al, table, drops, &ndrops, &seq), 0);
  ck_assert_uint_eq (ndrops, 1);
  ck_assert_uint_eq (drops[0], 3);
  /* evicts 1 */
  ck_assert_int_eq (al_begin (&al, 5 * X, 1, &need), AL_NEED_TXN);
  al_committed (&al, seq);
  ck_assert_uint_eq (al.al_ndrops, 1);
  commit (&al, table, drops, &ndrops);
  ck_assert_uint_eq (ndrops, 1);
  ck_assert_uint_eq (drops[0], 1);
  ck_assert_uint_eq (al.al_ndrops, 0);
  al_free (&al);
}
END_TEST

/* Extent 0 has a durable write whose bits were never flushed.  It is
 * evicted, brought back (now in the snapshot in flight), given up and
 * evicted again before that snapshot commits: the next transaction,
 * which no longer has it, must still drop (flush) it. */
START_TEST (test_al_drop_reactivated)
{
  struct activity_log al;
  uint32_t table[2], drops[4];
  size_t ndrops;
  uint64_t need, seq;

  ck_assert_int_eq (al_init (&al, 2, X, 100 * X), 0);
  ck_assert_int_eq (al_begin (&al, 0, 1, &need), AL_NEED_TXN);
  commit (&al, table, drops, &ndrops);         /* 1: {0} */
  al_complete (&al, 0, 1);                     /* written, completed */
  ck_assert_int_eq (al_begin (&al, X, 1, &need), AL_NEED_TXN);
  commit (&al, table, drops, &ndrops);         /* 2: {0, 1} */
  al_complete (&al, X, 1);

  /* evicts 0 */
  ck_assert_int_eq (al_begin (&al, 2 * X, 1, &need), AL_NEED_TXN);
  /* evicts 1 */
  ck_assert_int_eq (al_begin (&al, 0, 1, &need), AL_NEED_TXN);
  ck_assert_int_eq (al_snapshot (&al, table, drops, &ndrops, &seq), 0);
  ck_assert_uint_eq (seq, 3);                  /* 3: {2, 0}, drops 1 */
  ck_assert_uint_eq (ndrops, 1);
  ck_assert_uint_eq (drops[0], 1);
  al_complete (&al, 0, 1);                     /* both writers give up */
  al_complete (&al, 2 * X, 1);
  /* evicts 0 */
  ck_assert_int_eq (al_begin (&al, 3 * X, 1, &need), AL_NEED_TXN);
  al_committed (&al, seq);

  ck_assert_int_eq (al_snapshot (&al, table, drops, &ndrops, &seq), 0);
  ck_assert_uint_eq (seq, 4);                  /* 4: {2, 3} */
  ck_assert (!table_has (table, 2, 0));
  ck_assert_uint_eq (ndrops, 1);
  ck_assert_uint_eq (drops[0], 0);
  al_free (&al);
}
END_TEST

START_TEST (test_al_failed)
{
  struct activity_log al;
  uint32_t table[2], drops[4];
  size_t ndrops;
  uint64_t need, seq;

  ck_assert_int_eq (al_init (&al, 2, X, 100 * X), 0);
  ck_assert_int_eq (al_begin (&al, 0, 1, &need), AL_NEED_TXN);
  ck_assert_int_eq (al_snapshot (&al, table, drops, &ndrops, &seq), 0);
  al_txn_failed (&al);
  ck_assert (!al_txn_in_flight (&al));
  ck_assert (!al_is_durable (&al, need));
  ck_assert_int_eq (al_begin (&al, X, 1, &need), -1);
  ck_assert_int_eq (errno, EIO);
  ck_assert_int_eq (al_snapshot (&al, table, drops, &ndrops, &seq), -1);
  ck_assert_int_eq (errno, EIO);
  al_complete (&al, 0, 1);                     /* still fine */
  al_free (&al);
}
END_TEST

START_TEST (test_al_load_replay)
{
  const uint64_t size = 20 * X + 1000;
  struct activity_log al;
  struct bitmap bm;
  uint32_t table[4] = { 20, AL_EMPTY, 3, 4 }, drops[8], out[4];
  size_t ndrops;
  uint64_t need, seq;

  ck_assert_int_eq (al_init (&al, 4, X, size), 0);
  ck_assert_int_eq (al_load (&al, table, 4, 17), 0);
  ck_assert_uint_eq (al_nactive (&al), 3);
  ck_assert_uint_eq (al_active_extents (&al, out, 4), 3);
  ck_assert (table_has (out, 3, 20) && table_has (out, 3, 3) &&
             table_has (out, 3, 4));

  /* Replay marks exactly the active extents, the last one clipped. */
  ck_assert_int_eq (bitmap_init (&bm, size, 4096), 0);
  ck_assert_uint_eq (al_replay (&al, &bm), 3);
  ck_assert_uint_eq (bitmap_dirty_bytes (&bm), 2 * X + 1000);
  ck_assert_int_eq (bitmap_next_set (&bm, 0), 3 * X / 4096);
  ck_assert_uint_eq (bitmap_next_clear (&bm, 3 * X / 4096), 5 * X / 4096);
  ck_assert_int_eq (bitmap_next_set (&bm, 5 * X / 4096), 20 * X / 4096);
  bitmap_free (&bm);

  /* Loaded extents are durable, and the next transaction is 18. */
  ck_assert_int_eq (al_begin (&al, 3 * X, 1, &need), AL_READY);
  ck_assert_int_eq (al_begin (&al, 7 * X, 1, &need), AL_NEED_TXN);
  ck_assert_uint_eq (need, 18);
  ck_assert_int_eq (al_snapshot (&al, table, drops, &ndrops, &seq), 0);
  ck_assert_uint_eq (seq, 18);
  ck_assert_uint_eq (ndrops, 0);               /* the empty slot was used */
  al_committed (&al, seq);
  al_complete (&al, 3 * X, 1);
  al_complete (&al, 7 * X, 1);
  /* Evicting a loaded extent is a drop: it is on disk. */
  ck_assert_int_eq (al_begin (&al, 8 * X, 1, &need), AL_NEED_TXN);
  ck_assert_int_eq (al_snapshot (&al, table, drops, &ndrops, &seq), 0);
  ck_assert_uint_eq (ndrops, 1);
  ck_assert_uint_eq (drops[0], 20);            /* first in table order */
  al_free (&al);

  /* Bad tables are refused and leave the log empty. */
  ck_assert_int_eq (al_init (&al, 4, X, size), 0);
  {
    uint32_t dup[4] = { 1, 2, 1, AL_EMPTY };
    uint32_t big[4] = { 1, 21, AL_EMPTY, AL_EMPTY };

    ck_assert_int_eq (al_load (&al, dup, 4, 3), -1);
    ck_assert_int_eq (errno, EINVAL);
    ck_assert_uint_eq (al_nactive (&al), 0);
    ck_assert_int_eq (al_load (&al, big, 4, 3), -1);
    ck_assert_uint_eq (al_nactive (&al), 0);
    ck_assert_int_eq (al_load (&al, big, 3, 3), -1);
    ck_assert_uint_eq (al.al_nidle, 4);
  }
  al_free (&al);
}
END_TEST

/* The whole cycle through the metadata: activate, write transactions,
 * "crash" (close without anything else), load, replay. */
START_TEST (test_al_through_metadata)
{
  struct md_params p;
  struct md md;
  struct activity_log al;
  struct bitmap bm;
  uint32_t table[8], drops[16];
  size_t ndrops;
  uint64_t need, seq;
  char err[256];
  uint32_t e;
  int fd = tmp_fd ();

  small_params (&p, 1);
  ck_assert_int_eq (md_create (&md, fd, 0, &p, false, err, sizeof err), 0);
  ck_assert_int_eq (al_init (&al, 8, 64 << 10, 64 * MiB), 0);
  ck_assert_int_eq (al_load (&al, md.md_al_table, 8, md.md_al_seq), 0);

  for (e = 100; e < 110; ++e) {                /* 10 extents, 8 slots */
    ck_assert_int_eq (al_begin (&al, (uint64_t) e << 16, 1, &need),
                      AL_NEED_TXN);
    ck_assert_int_eq (al_snapshot (&al, table, drops, &ndrops, &seq), 0);
    ck_assert_int_eq (md_write_al (&md, seq, table, err, sizeof err), 0);
    al_committed (&al, seq);
    al_complete (&al, (uint64_t) e << 16, 1);
  }
  ck_assert_uint_eq (seq, 11);
  /* One more, torn by the crash inside its table (at 60: slots 5..7). */
  ck_assert_int_eq (al_begin (&al, (uint64_t) 200 << 16, 1, &need),
                    AL_NEED_TXN);
  ck_assert_int_eq (al_snapshot (&al, table, drops, &ndrops, &seq), 0);
  {
    uint8_t buf[4096];
    uint64_t off = md.md_layout.ml_al_offset +
                   ((md.md_al_slot + 1) % 4) * 4096;
    uint32_t i, slot200 = 8;

    for (i = 0; i < 8; ++i)
      if (table[i] == 200)
        slot200 = i;
    ck_assert_uint_lt (slot200, 8);
    ck_assert_int_eq (md_encode_al (&md.md_super.ms_geom, &md.md_layout,
                                    md.md_super.ms_instance, seq, table, buf,
                                    err, sizeof err), 0);
    pwrite_all (fd, buf, 40 + 4 * slot200, off);
  }
  al_free (&al);
  md_close (&md);

  ck_assert_int_eq (md_load (&md, fd, 0, 1, 64 * MiB, err, sizeof err), 0);
  ck_assert_uint_eq (md.md_al_seq, 11);
  ck_assert_int_eq (al_init (&al, 8, 64 << 10, 64 * MiB), 0);
  ck_assert_int_eq (al_load (&al, md.md_al_table, 8, md.md_al_seq), 0);
  ck_assert_int_eq (bitmap_init (&bm, 64 * MiB, 4096), 0);
  ck_assert_uint_eq (al_replay (&al, &bm), 8);
  /* Exactly the 8 most recent extents, 102..109. */
  ck_assert_uint_eq (bitmap_dirty_bytes (&bm), 8 * (64 << 10));
  ck_assert_int_eq (bitmap_next_set (&bm, 0), (102 << 16) / 4096);
  ck_assert_uint_eq (bitmap_next_clear (&bm, (102 << 16) / 4096),
                     (110 << 16) / 4096);
  bitmap_free (&bm);
  al_free (&al);
  md_close (&md);
  close (fd);
}
END_TEST

/* Random writers against the crash-safety rule: at every commit, an
 * extent that had a write since its bits were last flushed is in the
 * committed table, or was dropped (flushed) by a committed snapshot.
 * Also: a write only proceeds when its extents are in the last durable
 * table. */
START_TEST (test_al_random_rule)
{
  enum { NSLOTS = 6, NEXT = 20, NW = 12 };
  struct activity_log al;
  struct writer {
    bool active, proceeded;
    uint64_t off, len, need;
  } w[NW];
  uint32_t durable[NSLOTS], table[NSLOTS], drops[2 * NSLOTS];
  bool unflushed[NEXT];
  size_t ndrops = 0, i, k;
  uint64_t seed = 12345, seq = 0;
  bool in_flight = false;
  unsigned step;

  memset (w, 0, sizeof w);
  memset (unflushed, 0, sizeof unflushed);
  for (i = 0; i < NSLOTS; ++i)
    durable[i] = AL_EMPTY;
  ck_assert_int_eq (al_init (&al, NSLOTS, X, NEXT * X), 0);

  for (step = 0; step < 20000; ++step) {
    uint64_t r = rng_next (&seed);
    struct writer *wr = &w[r % NW];

    switch ((r >> 8) % 4) {
    case 0:                                    /* a new write */
      if (wr->active)
        break;
      wr->off = rng_next (&seed) % (NEXT * X);
      wr->len = 1 + rng_next (&seed) % (2 * X);
      if (wr->len > NEXT * X - wr->off)
        wr->len = NEXT * X - wr->off;
      {
        int res = al_begin (&al, wr->off, wr->len, &wr->need);

        ck_assert_int_ge (res, 0);
        if (res != AL_BUSY) {
          wr->active = true;
          wr->proceeded = false;
        }
      }
      break;
    case 1:                                    /* proceed or complete */
      if (!wr->active)
        break;
      if (!wr->proceeded && al_is_durable (&al, wr->need)) {
        uint32_t f, l, e;

        ck_assert (al_extent_span (&al, wr->off, wr->len, &f, &l));
        for (e = f; e <= l; ++e) {
          ck_assert_msg (table_has (durable, NSLOTS, e),
                         "step %u: write to extent %u not in the durable "
                         "table", step, e);
          unflushed[e] = true;
        }
        wr->proceeded = true;
      }
      else if (wr->proceeded || (r >> 20) % 8 == 0) {
        al_complete (&al, wr->off, wr->len);
        wr->active = false;
      }
      break;
    case 2:                                    /* start a transaction */
      if (in_flight)
        break;
      ck_assert_int_eq (al_snapshot (&al, table, drops, &ndrops, &seq), 0);
      in_flight = true;
      break;
    case 3:                                    /* it becomes durable */
      if (!in_flight)
        break;
      for (k = 0; k < ndrops; ++k) {
        ck_assert (!table_has (table, NSLOTS, drops[k]));
        unflushed[drops[k]] = false;           /* bitmap pages written */
      }
      al_committed (&al, seq);
      memcpy (durable, table, sizeof durable);
      in_flight = false;
      for (k = 0; k < NEXT; ++k)
        ck_assert_msg (!unflushed[k] || table_has (durable, NSLOTS, k),
                       "step %u: extent %zu written, not flushed, and no "
                       "longer in the log", step, k);
      break;
    }
    ck_assert_uint_le (al.al_ndrops, 2 * NSLOTS);
    ck_assert_uint_le (al_nactive (&al), NSLOTS);
  }
  al_free (&al);
}
END_TEST

static Suite *
metadata_suite (void)
{
  Suite *s = suite_create ("metadata");
  TCase *tc;

  tc = tcase_create ("crc32c");
  tcase_add_test (tc, test_crc32c_vectors);
  tcase_add_test (tc, test_crc32c_chain_and_paths);
  suite_add_tcase (s, tc);

  tc = tcase_create ("format");
  tcase_add_test (tc, test_layout);
  tcase_add_test (tc, test_internal_place);
  tcase_add_test (tc, test_in_sync_uuid);
  tcase_add_test (tc, test_super_round_trip);
  tcase_add_test (tc, test_super_reject);
  tcase_add_test (tc, test_super_encode_checks);
  tcase_add_test (tc, test_al_txn_round_trip);
  tcase_add_test (tc, test_al_txn_reject);
  suite_add_tcase (s, tc);

  tc = tcase_create ("io");
  tcase_set_timeout (tc, 60);
  tcase_add_test (tc, test_create_load);
  tcase_add_test (tc, test_create_refuses);
  tcase_add_test (tc, test_load_checks);
  tcase_add_test (tc, test_load_huge_geometry);
  tcase_add_test (tc, test_super_alternation_and_fallback);
  tcase_add_test (tc, test_al_ring);
  tcase_add_test (tc, test_bitmap_io);
  tcase_add_test (tc, test_internal_on_file);
  tcase_add_test (tc, test_grow);
  tcase_add_test (tc, test_dump);
  suite_add_tcase (s, tc);

  tc = tcase_create ("activity-log");
  tcase_set_timeout (tc, 60);
  tcase_add_test (tc, test_al_init);
  tcase_add_test (tc, test_al_activation);
  tcase_add_test (tc, test_al_span);
  tcase_add_test (tc, test_al_lru);
  tcase_add_test (tc, test_al_busy);
  tcase_add_test (tc, test_al_drops);
  tcase_add_test (tc, test_al_drop_reactivated);
  tcase_add_test (tc, test_al_failed);
  tcase_add_test (tc, test_al_load_replay);
  tcase_add_test (tc, test_al_through_metadata);
  tcase_add_test (tc, test_al_random_rule);
  suite_add_tcase (s, tc);

  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (metadata_suite ());
  int failed;

  srunner_run_all (sr, CK_ENV);
  failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
