/* nbdrepl: dirty bitmap.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * One bit per `granularity` bytes of the volume (a "chunk"); a set bit
 * means the chunk may differ on the peer the bitmap belongs to.  The
 * last chunk may be short when the volume size is not a multiple of the
 * granularity.  Not thread-safe: the owner locks.
 */
#ifndef NBDREPL_BITMAP_H
#define NBDREPL_BITMAP_H

#include <stdbool.h>
#include <stdint.h>

struct bitmap {
  uint64_t *bm_words;
  uint64_t bm_nbits;            /* chunks in the volume */
  uint64_t bm_size;             /* volume size in bytes */
  uint32_t bm_granularity;      /* bytes per bit, a power of 2 >= 512 */
  unsigned bm_shift;            /* log2 (bm_granularity) */
  uint64_t bm_nset;             /* bits set, kept up to date */
};

/* Allocate an all-clear bitmap.  Returns 0, or -1 with errno EINVAL
 * (granularity not a power of 2 >= 512) or ENOMEM. */
extern int bitmap_init (struct bitmap *bm, uint64_t size,
                        uint32_t granularity);
extern void bitmap_free (struct bitmap *bm);

/* The volume grew to size bytes (>= bm_size): the bitmap covers it, every
 * new chunk clear, the old bits as they were (a short last chunk becomes
 * a whole one).  Returns 0, or -1 with errno EINVAL (size smaller) or
 * ENOMEM, the bitmap unchanged. */
extern int bitmap_grow (struct bitmap *bm, uint64_t size);

/* Mark every chunk that [offset, offset+len) touches, even partly.
 * Ranges past the end of the volume are clipped; len 0 does nothing. */
extern void bitmap_set_range (struct bitmap *bm, uint64_t offset,
                              uint64_t len);

/* Clear every chunk that [offset, offset+len) touches.  Callers pass
 * chunk-aligned ranges (a resync clears what it sent). */
extern void bitmap_clear_range (struct bitmap *bm, uint64_t offset,
                                uint64_t len);

extern void bitmap_set_all (struct bitmap *bm);
extern void bitmap_clear_all (struct bitmap *bm);

extern bool bitmap_test (const struct bitmap *bm, uint64_t bit);

/* Number of set bits. */
extern uint64_t bitmap_count (const struct bitmap *bm);

/* Bytes of the volume covered by set bits (the short last chunk counts
 * for its real length). */
extern uint64_t bitmap_dirty_bytes (const struct bitmap *bm);

/* First set bit >= from, or -1 if none. */
extern int64_t bitmap_next_set (const struct bitmap *bm, uint64_t from);

/* First clear bit >= from, or bm_nbits if none. */
extern uint64_t bitmap_next_clear (const struct bitmap *bm, uint64_t from);

#endif /* NBDREPL_BITMAP_H */
