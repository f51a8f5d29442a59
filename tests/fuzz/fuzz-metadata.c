/* nbdrepl: libFuzzer harness for the metadata reader (common/metadata.c).
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * Input: one byte of flags, then a metadata image (metadata.h), which
 * md_load reads from a memfd (in memory: no disk I/O per input):
 *
 *   bit 0  fix the checksums of both superblock slots and of every
 *          activity-log transaction slot before loading, so that
 *          mutations reach the checks behind the checksum; without it
 *          the checksum checks themselves are what is fuzzed
 *   bit 1  fix the bitmap page checksums the same way
 *   bit 2  the image sits at offset 4096 of the file (internal
 *          metadata: base != 0)
 *   bit 3  after a good load, write everything back (md_write_super,
 *          md_write_al, md_write_bitmap) and load again: what the
 *          writers accept, the reader must accept, unchanged
 *   bit 4  md_dump it (to /dev/null)
 *
 * After a good load every peer's bitmap is read (md_read_bitmap) and
 * its bookkeeping checked.  The image must hold the whole area (md_load
 * reads its last byte), so what the geometry asks for is bounded by the
 * input's size.
 */
#include <config.h>

#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include "bitmap.h"
#include "byte-order.h"
#include "crc32c.h"
#include "fuzz.h"
#include "metadata.h"

#define FIX_RECORDS     0x01
#define FIX_PAGES       0x02
#define AT_4K           0x04
#define WRITE_BACK      0x08
#define DUMP            0x10

static int fd = -1;
static FILE *devnull;

/* metadata.c md_record_crc: the crc field counts as 0. */
static void
seal (uint8_t *rec, size_t len)
{
  static const uint8_t zero[4];
  uint32_t crc = crc32c (0, rec, 8);

  crc = crc32c (crc, zero, 4);
  crc = crc32c (crc, rec + 12, len - 12);
  put_be32 (rec + 8, crc);
}

/* Fix checksums in img (len bytes) after the geometry of the first
 * superblock slot whose geometry md_layout takes. */
static void
fix_checksums (uint8_t *img, size_t len, unsigned flags)
{
  struct md_geometry g;
  struct md_layout l;
  char err[160];
  unsigned s;
  uint64_t i, slot, page;

  for (s = 0; s < 2; s++)
    if (len >= (s + 1) * (size_t) MD_BLOCK_SIZE && (flags & FIX_RECORDS))
      seal (img + s * MD_BLOCK_SIZE, MD_BLOCK_SIZE);
  for (s = 0; s < 2; s++) {
    const uint8_t *sb = img + s * MD_BLOCK_SIZE;

    if (len < (s + 1) * (size_t) MD_BLOCK_SIZE)
      return;
    g = (struct md_geometry) {
      .mg_size = get_be64 (sb + 40), .mg_granularity = get_be32 (sb + 48),
      .mg_al_extent_size = get_be32 (sb + 52),
      .mg_al_extents = get_be32 (sb + 56), .mg_al_ring = get_be32 (sb + 60),
      .mg_npeers = get_be32 (sb + 64),
    };
    if (md_layout (&g, &l, err, sizeof err) == 0)
      break;
  }
  if (s == 2)
    return;

  if (flags & FIX_RECORDS)
    for (i = 0; i < g.mg_al_ring; i++) {
      uint64_t off = l.ml_al_offset + i * l.ml_txn_size;

      if (off + l.ml_txn_size > len)
        break;
      seal (img + off, l.ml_txn_size);
    }
  if (flags & FIX_PAGES)
    for (slot = 0; slot < g.mg_npeers; slot++) {
      uint64_t base = l.ml_bm_offset + slot * l.ml_peer_size;

      for (page = 0; page < l.ml_bm_pages; page++) {
        uint64_t crc_off = base + page / (MD_BLOCK_SIZE / 4) * MD_BLOCK_SIZE +
                           4 * (page % (MD_BLOCK_SIZE / 4));
        uint64_t page_off = base + (l.ml_crc_blocks + page) * MD_BLOCK_SIZE;

        if (page_off + MD_BLOCK_SIZE > len)
          break;
        put_be32 (img + crc_off, crc32c (0, img + page_off, MD_BLOCK_SIZE));
      }
    }
}

/* What md_load promises about an area it accepted. */
static void
check_loaded (const struct md *md, size_t len)
{
  const struct md_geometry *g = &md->md_super.ms_geom;
  struct md_layout l;
  char err[160];
  uint32_t i, j;

  FUZZ_CHECK (md->md_magic == MD_HANDLE_MAGIC);
  FUZZ_CHECK (md_layout (g, &l, err, sizeof err) == 0);
  FUZZ_CHECK (memcmp (&l, &md->md_layout, sizeof l) == 0);
  FUZZ_CHECK (md->md_base + l.ml_total <= len + md->md_base);
  FUZZ_CHECK (md->md_super_slot <= 1);
  FUZZ_CHECK (md->md_al_slot < g->mg_al_ring);
  FUZZ_CHECK (md->md_al_valid >= 1 && md->md_al_valid <= g->mg_al_ring);
  for (i = 0; i < g->mg_al_extents; i++) {
    uint32_t e = md->md_al_table[i];

    if (e == MD_AL_EMPTY)
      continue;
    FUZZ_CHECK (e < l.ml_vol_extents);
    for (j = 0; j < i; j++)
      FUZZ_CHECK (md->md_al_table[j] != e);
  }
  FUZZ_CHECK (md_peer_slot (md, md->md_super.ms_node_id) == -1);
}

static void
check_bitmap (const struct bitmap *bm)
{
  uint64_t nwords = (bm->bm_nbits + 63) / 64, i, n = 0;

  for (i = 0; i < nwords; i++)
    n += __builtin_popcountll (bm->bm_words[i]);
  FUZZ_CHECK (n == bm->bm_nset);
  if (bm->bm_nbits % 64)
    FUZZ_CHECK ((bm->bm_words[nwords - 1] >> (bm->bm_nbits % 64)) == 0);
}

/* Read peer slot `slot`'s whole bitmap into bm (initialised here). */
static int
read_bitmap (struct md *md, unsigned slot, struct bitmap *bm)
{
  const struct md_geometry *g = &md->md_super.ms_geom;
  char err[256];
  uint64_t nbad = 0;

  FUZZ_CHECK (bitmap_init (bm, g->mg_size, g->mg_granularity) == 0);
  if (md_read_bitmap (md, slot, bm, 0, md->md_layout.ml_bm_pages, &nbad,
                      err, sizeof err) == -1) {
    FUZZ_CHECK (err[0] != '\0');
    bitmap_free (bm);
    return -1;
  }
  FUZZ_CHECK (nbad <= md->md_layout.ml_bm_pages);
  check_bitmap (bm);
  return 0;
}

/* Write everything back, load again: the same superblock (but its
 * seq and slot), activity log and bitmaps. */
static void
write_back (struct md *md, uint64_t base, size_t len)
{
  const struct md_geometry *g = &md->md_super.ms_geom;
  struct md_super sb = md->md_super;
  struct md again;
  char err[256];
  uint32_t slot;

  if (md_write_super (md, &sb, err, sizeof err) == -1)
    return;                     /* e.g. seq at its maximum */
  FUZZ_CHECK (md->md_super.ms_seq == sb.ms_seq + 1);
  if (md->md_al_seq == UINT64_MAX)
    return;
  FUZZ_CHECK (md_write_al (md, md->md_al_seq + 1, md->md_al_table,
                           err, sizeof err) == 0);
  for (slot = 0; slot < g->mg_npeers; slot++) {
    struct bitmap bm;

    if (read_bitmap (md, slot, &bm) == -1)
      return;
    FUZZ_CHECK (md_write_bitmap (md, slot, &bm, 0, md->md_layout.ml_bm_pages,
                                 err, sizeof err) == 0);
    bitmap_free (&bm);
  }

  if (md_load (&again, fd, base, MD_ANY_NODE, 0, err, sizeof err) == -1) {
    fprintf (stderr, "reload: %s\n", err);
    FUZZ_CHECK (!"written metadata loads again");
  }
  check_loaded (&again, len);
  sb = md->md_super;
  FUZZ_CHECK (again.md_super.ms_seq == sb.ms_seq);
  FUZZ_CHECK (memcmp (&again.md_super, &sb, sizeof sb) == 0);
  FUZZ_CHECK (again.md_al_seq == md->md_al_seq);
  FUZZ_CHECK (memcmp (again.md_al_table, md->md_al_table,
                      g->mg_al_extents * sizeof (uint32_t)) == 0);
  for (slot = 0; slot < g->mg_npeers; slot++) {
    struct bitmap a, b;

    FUZZ_CHECK (read_bitmap (md, slot, &a) == 0);
    FUZZ_CHECK (read_bitmap (&again, slot, &b) == 0);
    FUZZ_CHECK (a.bm_nset == b.bm_nset);
    FUZZ_CHECK (memcmp (a.bm_words, b.bm_words,
                        (a.bm_nbits + 63) / 64 * 8) == 0);
    bitmap_free (&a);
    bitmap_free (&b);
  }
  md_close (&again);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  static uint8_t *img;
  static size_t img_size;
  struct md md;
  char err[512];
  unsigned flags;
  uint64_t base;
  size_t len;

  if (size == 0)
    return 0;
  if (fd == -1) {
    fd = memfd_create ("fuzz-metadata", MFD_CLOEXEC);
    devnull = fopen ("/dev/null", "w");
    FUZZ_CHECK (fd >= 0 && devnull != NULL);
  }
  flags = data[0];
  len = size - 1;
  base = flags & AT_4K ? MD_BLOCK_SIZE : 0;
  if (len == 0)
    return 0;
  if (len > img_size) {
    free (img);
    img = malloc (len);
    FUZZ_CHECK (img != NULL);
    img_size = len;
  }
  memcpy (img, data + 1, len);
  fix_checksums (img, len, flags);

  /* Only the tail changes size: the pages of the last input are
   * overwritten, not freed and faulted in again. */
  FUZZ_CHECK (ftruncate (fd, base + len) == 0);
  FUZZ_CHECK (pwrite (fd, img, len, base) == (ssize_t) len);

  if (md_load (&md, fd, base, MD_ANY_NODE, 0, err, sizeof err) == -1) {
    FUZZ_CHECK (err[0] != '\0');
    FUZZ_CHECK (memchr (err, '\0', sizeof err) != NULL);
    return 0;
  }
  check_loaded (&md, len);
  for (unsigned slot = 0; slot < md.md_super.ms_geom.mg_npeers; slot++) {
    struct bitmap bm;

    if (read_bitmap (&md, slot, &bm) == 0)
      bitmap_free (&bm);
  }
  if (flags & DUMP)
    md_dump (&md, devnull, err, sizeof err);
  if (flags & WRITE_BACK)
    write_back (&md, base, len);
  md_close (&md);
  return 0;
}
