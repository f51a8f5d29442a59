/* nbdrepl: write the seed corpora of the fuzz harnesses.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 *   make tests/fuzz/make-corpus && tests/fuzz/make-corpus tests/fuzz/corpus
 *
 * writes DIR/wire, DIR/handshake and DIR/metadata: a few valid inputs,
 * made with the encoders the product uses, and a few that are nearly
 * valid (one field wrong).  The config corpus is hand-written YAML.
 * Metadata instances are random (md_create), so a run does not give
 * the same bytes twice; the committed files are one such run.
 */
#include <config.h>

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "bitmap.h"
#include "metadata.h"
#include "uuid-compare.h"
#include "wire.h"

static const char *outdir;

/* A growing input. */
struct buf {
  uint8_t b[1 << 20];
  size_t n;
};

static void
die (const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  vfprintf (stderr, fmt, ap);
  va_end (ap);
  fputc ('\n', stderr);
  exit (EXIT_FAILURE);
}

static void
put (struct buf *b, const void *p, size_t len)
{
  if (b->n + len > sizeof b->b)
    die ("input too big");
  memcpy (b->b + b->n, p, len);
  b->n += len;
}

static void
put_byte (struct buf *b, uint8_t v)
{
  put (b, &v, 1);
}

static void
put_msg (struct buf *b, enum repl_msg_type type, uint16_t flags,
         uint32_t length, uint32_t count, uint64_t seq, uint64_t offset,
         const void *payload)
{
  struct repl_hdr h;
  uint8_t raw[REPL_HDR_SIZE];
  static const uint8_t zeroes[REPL_MAX_PAYLOAD];

  wire_hdr_init (&h, type, flags, length, count, seq, offset);
  wire_encode_hdr (&h, raw);
  put (b, raw, sizeof raw);
  put (b, payload ? payload : zeroes, length);
}

static void
save (const char *corpus, const char *name, const struct buf *b)
{
  char path[4096];
  FILE *fp;

  snprintf (path, sizeof path, "%s/%s", outdir, corpus);
  mkdir (path, 0755);
  snprintf (path, sizeof path, "%s/%s/%s", outdir, corpus, name);
  fp = fopen (path, "w");
  if (fp == NULL || fwrite (b->b, 1, b->n, fp) != b->n || fclose (fp) != 0)
    die ("%s: %m", path);
}

static struct repl_uuids
to_wire (const struct gen_uuids *u, uint32_t changes)
{
  return (struct repl_uuids) {
    .current = u->gu_current, .bitmap = u->gu_bitmap,
    .history = { u->gu_history[0], u->gu_history[1] },
    .flags = u->gu_flags, .changes = changes,
  };
}

/* A HELLO, then (after the authentication, which the harnesses do not
 * model) the HELLO_STATE. */
static void
put_hello (struct buf *b, uint32_t node_id, uint32_t peer_id, uint32_t role,
           uint32_t disk, uint64_t size, const struct repl_uuids *u)
{
  struct repl_hello hello = {
    .version = REPL_PROTO_VERSION, .node_id = node_id, .peer_id = peer_id,
    .role = role, .disk_state = disk, .size = size, .uuids = *u,
  };
  uint8_t raw[REPL_HELLO_SIZE], state[REPL_HELLO_STATE_SIZE];

  strcpy (hello.resource, "r0");
  wire_encode_hello (&hello, raw);
  put_msg (b, REPL_MSG_HELLO, 0, REPL_HELLO_SIZE, 0, 0, 0, raw);
  wire_encode_hello_state (&hello, state);
  put_msg (b, REPL_MSG_HELLO_STATE, 0, REPL_HELLO_STATE_SIZE, 0, 0, 0, state);
}

static void
put_uuids_msg (struct buf *b, const struct gen_uuids *u)
{
  struct repl_uuids w = to_wire (u, 0);
  uint8_t raw[REPL_UUIDS_SIZE];

  wire_encode_uuids (&w, raw);
  put_msg (b, REPL_MSG_UUIDS, 0, sizeof raw, 0, 0, 0, raw);
}

/* The UUIDs fuzz-handshake.c our_uuids (1) gives this node. */
static const struct gen_uuids ours_in_sync = {
  .gu_current = UINT64_C (0x1111111111111110),
  .gu_history = { UINT64_C (0x2222222222222220) },
  .gu_flags = GU_FLAG_CONSISTENT,
};

static void
wire_corpus (void)
{
  static struct buf b;
  static uint8_t data[4096];
  struct repl_uuids u = to_wire (&ours_in_sync, 3);
  uint8_t raw[REPL_HELLO_SIZE], state[REPL_HELLO_STATE_SIZE];
  struct repl_hello hello;

  memset (data, 0xa5, sizeof data);

  /* Byte 0 = 0x1b: 1 MiB volume, granularity 4096 (512 << 3). */
  b.n = 0;
  put_byte (&b, 0x1b);
  put_hello (&b, 1, 0, REPL_ROLE_PRIMARY, REPL_DISK_UPTODATE, 1 << 20, &u);
  save ("wire", "hello", &b);

  b.n = 0;
  put_byte (&b, 0x1b);
  put_msg (&b, REPL_MSG_WRITE, REPL_FLAG_FUA, 512, 512, 1, 4096, data);
  put_msg (&b, REPL_MSG_TRIM, 0, 0, 8192, 2, 0, NULL);
  put_msg (&b, REPL_MSG_ZERO, REPL_FLAG_MAY_TRIM, 0, 4096, 3, 1 << 19, NULL);
  put_msg (&b, REPL_MSG_FLUSH, 0, 0, 0, 4, 0, NULL);
  put_msg (&b, REPL_MSG_VERIFY_REQ, 0, 0, 8192, 5, 8192, NULL);
  save ("wire", "data", &b);

  b.n = 0;
  put_byte (&b, 0x1b);
  put_msg (&b, REPL_MSG_RESYNC_START, 0, 0, 0, 1, 1 << 20, NULL);
  put_msg (&b, REPL_MSG_RESYNC_DATA, REPL_FLAG_ZEROES, 0, 4096, 2, 0, NULL);
  put_msg (&b, REPL_MSG_RESYNC_DATA, 0, 4096, 4096, 3, 4096, data);
  put_msg (&b, REPL_MSG_RESYNC_DONE, 0, 0, 0, 4, 0, NULL);
  save ("wire", "resync", &b);

  b.n = 0;
  put_byte (&b, 0x1b);
  put_msg (&b, REPL_MSG_PING, 0, 0, 0, 0, 0, NULL);
  put_msg (&b, REPL_MSG_PONG, 0, 0, 0, 0, 0, NULL);
  put_msg (&b, REPL_MSG_ACK, REPL_FLAG_RECEIVED, 0, 0, 7, 0, NULL);
  put_msg (&b, REPL_MSG_ACK, 0, 0, 0, 7, 0, NULL);
  put_msg (&b, REPL_MSG_NACK, 0, 0, 0, 8, 0, NULL);
  put_uuids_msg (&b, &ours_in_sync);
  put_msg (&b, REPL_MSG_BITMAP, 0, 32, 0, 0, 0, data);
  put_msg (&b, REPL_MSG_BITMAP_DONE, 0, 0, 0, 0, 32, NULL);
  put_msg (&b, REPL_MSG_VERIFY_REPLY, 0, 16, 8192, 5, 8192, data);
  put_msg (&b, REPL_MSG_STATE, 0, 0, 0, REPL_DISK_UPTODATE, REPL_ROLE_PRIMARY,
           NULL);
  put_msg (&b, REPL_MSG_GOODBYE, 0, 0, 0, 0, 0, NULL);
  save ("wire", "control", &b);

  /* A diskless primary's messages. */
  {
    static const uint8_t fresh[8] = { 0, 0, 0, 0, 0, 0x12, 0x34, 0x56 };
    static const uint8_t mask[8] = { 0, 0, 0, 0, 0, 0, 0, 1 };

    b.n = 0;
    put_byte (&b, 0x1b);
    put_msg (&b, REPL_MSG_AWAY, 0, 8, 0, 0, 1, fresh);
    put_msg (&b, REPL_MSG_WRITE, 0, 512, 512, 1, 4096, data);
    put_msg (&b, REPL_MSG_OUT_OF_SYNC, 0, 8, 4096, 2, 8192, mask);
    put_msg (&b, REPL_MSG_READ_REQ, 0, 0, 4096, 3, 0, NULL);
    put_msg (&b, REPL_MSG_READ_REPLY, 0, 512, 512, 3, 0, data);
    put_msg (&b, REPL_MSG_READ_REPLY, REPL_FLAG_ERROR, 0, 512, 3, 0, NULL);
    save ("wire", "diskless", &b);
  }

  /* Online grow: a query, its answer, the resize itself (from 1 MiB,
   * the volume of byte 0x1b, to 2 MiB), and one from the wrong size. */
  {
    static const uint8_t from[8] = { 0, 0, 0, 0, 0, 0x10, 0, 0 };
    static const uint8_t wrong[8] = { 0, 0, 0, 0, 0, 0x20, 0, 0 };

    b.n = 0;
    put_byte (&b, 0x1b);
    put_msg (&b, REPL_MSG_RESIZE_QUERY, 0, 0, 0, 1, 2 << 20, NULL);
    put_msg (&b, REPL_MSG_RESIZE_REPLY, 0, 0, 0, 1, 2 << 20, NULL);
    put_msg (&b, REPL_MSG_RESIZE_REPLY, REPL_FLAG_ERROR, 0, 0, 1, 1 << 20,
             NULL);
    put_msg (&b, REPL_MSG_RESIZE, 0, 8, 0, 1, 2 << 20, from);
    put_msg (&b, REPL_MSG_WRITE, 0, 512, 512, 2, (2 << 20) - 512, data);
    save ("wire", "resize", &b);
    b.n = 0;
    put_byte (&b, 0x1b);
    put_msg (&b, REPL_MSG_RESIZE, REPL_FLAG_ASSUME_CLEAN, 8, 0, 1, 2 << 20,
             wrong);
    save ("wire", "resize-wrong-size", &b);
  }

  /* Nearly valid: one field wrong each. */
  b.n = 0;
  put_byte (&b, 0x9b);                          /* 1-byte error buffer */
  put_msg (&b, REPL_MSG_WRITE, REPL_FLAG_ZEROES, 512, 512, 1, 0, data);
  save ("wire", "bad-flags", &b);
  b.n = 0;
  put_byte (&b, 0x1b);
  put_msg (&b, REPL_MSG_WRITE, 0, 512, 512, 1, (1 << 20) - 256, data);
  save ("wire", "bad-range", &b);
  b.n = 0;
  put_byte (&b, 0x1b);
  put_msg (&b, REPL_MSG_RESYNC_DATA, 0, 512, 512, 1, 512, data);
  save ("wire", "bad-alignment", &b);
  b.n = 0;
  put_byte (&b, 0x1b);
  hello = (struct repl_hello) { .version = REPL_PROTO_VERSION, .node_id = 1,
                                .size = 1 << 20, .uuids = u };
  strcpy (hello.resource, "r0");
  wire_encode_hello (&hello, raw);
  raw[16 + 10] = 'x';                           /* after the NUL */
  put_msg (&b, REPL_MSG_HELLO, 0, REPL_HELLO_SIZE, 0, 0, 0, raw);
  save ("wire", "bad-hello-padding", &b);
  b.n = 0;
  put_byte (&b, 0x1b);
  wire_encode_hello_state (&hello, state);
  state[3] = REPL_ROLE_MAX + 1;                 /* role */
  put_msg (&b, REPL_MSG_HELLO_STATE, 0, REPL_HELLO_STATE_SIZE, 0, 0, 0,
           state);
  save ("wire", "bad-hello-state-role", &b);
  /* A HELLO of protocol version 3: 144 bytes, its version first. */
  {
    uint8_t v3[144];

    memset (v3, 0, sizeof v3);
    v3[3] = 3;
    v3[11] = 1;                                 /* node id */
    memcpy (v3 + 32, "r0", 2);
    b.n = 0;
    put_byte (&b, 0x1b);
    put_msg (&b, REPL_MSG_HELLO, 0, sizeof v3, 0, 0, 0, v3);
    save ("wire", "hello-v3", &b);
  }
}

static void
handshake_corpus (void)
{
  static struct buf b;
  static uint8_t data[8192];
  struct gen_uuids newer = ours_in_sync, fresh;
  struct repl_uuids u;
  uint8_t words[32];

  memset (data, 0x5a, sizeof data);
  uuid_init_fresh (&fresh);
  newer.gu_current = UINT64_C (0x5555555555555550);
  newer.gu_history[0] = ours_in_sync.gu_current;
  newer.gu_history[1] = ours_in_sync.gu_history[0];

  /* Byte 0: bit 0 Primary, bits 1-2 our UUIDs (1: ours_in_sync), bits
   * 4-5 granularity (0: 4096), bits 6-7 size (0: 1 MiB). */

  /* Secondary, peer Primary in the same generation: no sync; writes. */
  b.n = 0;
  put_byte (&b, 0x02);
  u = to_wire (&ours_in_sync, 0);
  put_hello (&b, 1, 0, REPL_ROLE_PRIMARY, REPL_DISK_UPTODATE, 1 << 20, &u);
  put_msg (&b, REPL_MSG_WRITE, 0, 4096, 4096, 1, 0, data);
  put_msg (&b, REPL_MSG_WRITE, REPL_FLAG_FUA, 512, 512, 2, 4096 + 512, data);
  put_msg (&b, REPL_MSG_TRIM, 0, 0, 65536, 3, 65536, NULL);
  put_msg (&b, REPL_MSG_ZERO, REPL_FLAG_MAY_TRIM, 0, 4096, 4, (1 << 20) - 4096,
           NULL);
  put_msg (&b, REPL_MSG_FLUSH, 0, 0, 0, 5, 0, NULL);
  put_msg (&b, REPL_MSG_PING, 0, 0, 0, 0, 0, NULL);
  put_msg (&b, REPL_MSG_VERIFY_REQ, 0, 0, 8192, 6, 0, NULL);
  put_uuids_msg (&b, &newer);
  put_msg (&b, REPL_MSG_STATE, 0, 0, 0, REPL_DISK_UPTODATE,
           REPL_ROLE_SECONDARY, NULL);
  put_msg (&b, REPL_MSG_GOODBYE, 0, 0, 0, 0, 0, NULL);
  save ("handshake", "secondary-writes", &b);

  /* A storage node of a diskless primary. */
  {
    static const uint8_t new_uuid[8] = { 0, 0, 0, 0, 0, 0x12, 0x34, 0x56 };
    static const uint8_t mask[8] = { 0, 0, 0, 0, 0, 0, 0, 4 };

    b.n = 0;
    put_byte (&b, 0x02);
    u = to_wire (&ours_in_sync, 0);
    put_hello (&b, 1, 0, REPL_ROLE_PRIMARY, REPL_DISK_DISKLESS, 0, &u);
    put_msg (&b, REPL_MSG_AWAY, 0, 8, 0, 0, 4, new_uuid);
    put_msg (&b, REPL_MSG_WRITE, 0, 4096, 4096, 1, 0, data);
    put_msg (&b, REPL_MSG_OUT_OF_SYNC, 0, 8, 4096, 2, 8192, mask);
    put_msg (&b, REPL_MSG_READ_REQ, 0, 0, 4096, 3, 0, NULL);
    put_msg (&b, REPL_MSG_AWAY, 0, 8, 0, 0, 0, mask);
    put_msg (&b, REPL_MSG_FLUSH, 0, 0, 0, 4, 0, NULL);
    save ("handshake", "storage-of-diskless", &b);
  }

  /* Secondary behind the primary's newer generation: resync target. */
  b.n = 0;
  put_byte (&b, 0x02);
  u = to_wire (&newer, 2);
  put_hello (&b, 1, 0, REPL_ROLE_PRIMARY, REPL_DISK_UPTODATE, 1 << 20, &u);
  put_msg (&b, REPL_MSG_RESYNC_START, 0, 0, 0, 1, 12288, NULL);
  put_msg (&b, REPL_MSG_RESYNC_DATA, REPL_FLAG_ZEROES, 0, 4096, 2, 0, NULL);
  put_msg (&b, REPL_MSG_RESYNC_DATA, 0, 8192, 8192, 3, 8192, data);
  put_msg (&b, REPL_MSG_RESYNC_DONE, 0, 0, 0, 4, 0, NULL);
  put_uuids_msg (&b, &newer);
  save ("handshake", "secondary-resync", &b);

  /* Primary; the peer's hello says it changed chunks: its bitmap comes
   * (1 MiB / 4096 = 256 bits = 32 bytes), then ACKs. */
  b.n = 0;
  put_byte (&b, 0x03);
  u = to_wire (&ours_in_sync, 2);
  put_hello (&b, 1, 0, REPL_ROLE_SECONDARY, REPL_DISK_UPTODATE, 1 << 20, &u);
  memset (words, 0, sizeof words);
  words[0] = 0x81;
  words[31] = 0x80;
  put_msg (&b, REPL_MSG_BITMAP, 0, 16, 0, 0, 0, words);
  put_msg (&b, REPL_MSG_BITMAP, 0, 16, 0, 0, 16, words + 16);
  put_msg (&b, REPL_MSG_BITMAP_DONE, 0, 0, 0, 0, 32, NULL);
  put_msg (&b, REPL_MSG_ACK, REPL_FLAG_RECEIVED, 0, 0, 2, 0, NULL);
  put_msg (&b, REPL_MSG_ACK, 0, 0, 0, 3, 0, NULL);
  put_msg (&b, REPL_MSG_ACK, 0, 0, 0, 16, 0, NULL);
  save ("handshake", "primary-bitmap", &b);

  /* Primary, fresh peer: full sync source. 1 MiB + 512 by 512:
   * 2049 bits, 33 words. */
  b.n = 0;
  put_byte (&b, 0x43 | 0x10);
  u = to_wire (&fresh, 0);
  put_hello (&b, 1, 0, REPL_ROLE_SECONDARY, REPL_DISK_INCONSISTENT,
             (1 << 20) + 512, &u);
  {
    static uint8_t all[33 * 8];

    memset (all, 0xff, sizeof all);
    put_msg (&b, REPL_MSG_BITMAP, 0, sizeof all, 0, 0, 0, all);
    put_msg (&b, REPL_MSG_BITMAP_DONE, 0, 0, 0, 0, sizeof all, NULL);
  }
  put_msg (&b, REPL_MSG_NACK, 0, 0, 0, 1, 0, NULL);
  save ("handshake", "primary-fresh-peer", &b);

  /* Our UUIDs inline (bit 3): a crashed primary meets another one. */
  b.n = 0;
  put_byte (&b, 0x08);
  {
    struct gen_uuids a = ours_in_sync, p = ours_in_sync;
    struct repl_uuids w;
    uint8_t raw[REPL_UUIDS_SIZE];

    a.gu_flags |= GU_FLAG_CRASHED_PRIMARY;
    p.gu_flags |= GU_FLAG_CRASHED_PRIMARY;
    w = to_wire (&a, 0);
    wire_encode_uuids (&w, raw);
    put (&b, raw, sizeof raw);
    u = to_wire (&p, 0);
  }
  put_hello (&b, 1, 0, REPL_ROLE_PRIMARY, REPL_DISK_UPTODATE, 1 << 20, &u);
  put_msg (&b, REPL_MSG_WRITE, 0, 512, 512, 1, 0, data);
  save ("handshake", "inline-uuids", &b);

  /* Nearly: wrong node id in the hello; a sequence number skipped. */
  b.n = 0;
  put_byte (&b, 0x02);
  u = to_wire (&ours_in_sync, 0);
  put_hello (&b, 2, 0, REPL_ROLE_PRIMARY, REPL_DISK_UPTODATE, 1 << 20, &u);
  save ("handshake", "bad-node-id", &b);
  b.n = 0;
  put_byte (&b, 0x02);
  put_hello (&b, 1, 0, REPL_ROLE_PRIMARY, REPL_DISK_UPTODATE, 1 << 20, &u);
  put_msg (&b, REPL_MSG_WRITE, 0, 512, 512, 2, 0, data);
  save ("handshake", "bad-seq", &b);
}

/* One image: md_create on a memfd, then whatever `more` does. */
static void
metadata_image (const char *name, uint8_t flags, uint64_t size,
                uint32_t gran, uint32_t al_extents, uint32_t npeers,
                bool in_sync, void (*more) (struct md *))
{
  static struct buf b;
  struct md_params p;
  struct md md;
  char err[256];
  struct stat st;
  int fd = memfd_create ("make-corpus", MFD_CLOEXEC);
  uint32_t i;

  if (fd == -1)
    die ("memfd_create: %m");
  md_params_init (&p, 0, size);
  p.pa_geom.mg_granularity = gran;
  p.pa_geom.mg_al_extent_size = 65536;
  p.pa_geom.mg_al_extents = al_extents;
  p.pa_geom.mg_al_ring = 2;
  p.pa_geom.mg_npeers = npeers;
  for (i = 0; i < npeers; i++)
    p.pa_peer_ids[i] = i + 1;
  p.pa_in_sync = in_sync;
  if (md_create (&md, fd, 0, &p, false, err, sizeof err) == -1)
    die ("md_create: %s", err);
  if (more)
    more (&md);
  md_close (&md);
  if (fstat (fd, &st) == -1)
    die ("fstat: %m");
  b.n = 0;
  put_byte (&b, flags);
  if ((size_t) st.st_size > sizeof b.b - 1)
    die ("image too big");
  if (pread (fd, b.b + 1, st.st_size, 0) != st.st_size)
    die ("pread: %m");
  b.n += st.st_size;
  close (fd);
  save ("metadata", name, &b);
}

/* Two superblocks, two transactions with extents in them, a bitmap
 * with a few bits set. */
static void
used (struct md *md)
{
  struct md_super sb = md->md_super;
  uint32_t table[4] = { 1, MD_AL_EMPTY, 0, MD_AL_EMPTY };
  struct bitmap bm;
  char err[256];

  sb.ms_flags = MD_FLAG_PRIMARY | MD_FLAG_CONSISTENT;
  sb.ms_peers[0].mp_flags = MD_PEER_OUTDATED;
  sb.ms_peers[0].mp_bitmap_uuid = UINT64_C (0x1234);
  sb.ms_history_uuid[0] = UINT64_C (0x4321);
  memset (sb.ms_boot_id, 0x42, sizeof sb.ms_boot_id);
  if (md_write_super (md, &sb, err, sizeof err) == -1 ||
      md_write_al (md, 2, table, err, sizeof err) == -1)
    die ("%s", err);
  if (bitmap_init (&bm, sb.ms_geom.mg_size, sb.ms_geom.mg_granularity) == -1)
    die ("bitmap_init: %m");
  bitmap_set_range (&bm, 0, 512);
  bitmap_set_range (&bm, sb.ms_geom.mg_size - 1, 1);
  if (md_write_bitmap (md, 0, &bm, 0, md->md_layout.ml_bm_pages,
                       err, sizeof err) == -1)
    die ("%s", err);
  bitmap_free (&bm);
}

/* `used`, then grown (replctl resize) to twice its size: version 2,
 * the bitmaps moved behind the first area, the new chunks marked. */
static void
used_grown (struct md *md)
{
  char err[256];

  used (md);
  if (md_grow (md, 2 * md->md_super.ms_geom.mg_size, 1, err,
               sizeof err) == -1)
    die ("md_grow: %s", err);
}

static void
metadata_corpus (void)
{
  /* 64 KiB by 4 KiB, 1 AL extent, 1 peer: 6 blocks. */
  metadata_image ("in-sync", 0x00, 65536, 4096, 1, 1, true, NULL);
  metadata_image ("not-in-sync-2-peers", 0x13, 65536, 4096, 1, 2, false,
                  NULL);
  metadata_image ("no-peers-at-4k", 0x04, 65536, 4096, 1, 0, true, NULL);
  /* 128 KiB + 512 by 512: 257 bits; 2 volume extents + a partial. */
  metadata_image ("used", 0x0b, 131072 + 512, 512, 4, 1, false, used);
  metadata_image ("grown", 0x0b, 131072 + 512, 512, 4, 1, false,
                  used_grown);
}

int
main (int argc, char *argv[])
{
  if (argc != 2)
    die ("usage: %s OUTDIR", argv[0]);
  outdir = argv[1];
  mkdir (outdir, 0755);
  wire_corpus ();
  handshake_corpus ();
  metadata_corpus ();
  return EXIT_SUCCESS;
}
