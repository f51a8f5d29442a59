/* nbdrepl: dirty bitmap.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * Bit i of the volume lives in bm_words[i / 64] at bit i % 64.  Bits at
 * or beyond bm_nbits in the last word are always clear, so that counts
 * and searches can work a whole word at a time without masking.
 */
#include <config.h>

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bitmap.h"

#define BITMAP_WORD_BITS 64

static inline uint64_t
bitmap_nwords (uint64_t nbits)
{
  return nbits / BITMAP_WORD_BITS + (nbits % BITMAP_WORD_BITS != 0);
}

/* Bits [lo, hi) of a word, 0 <= lo < hi <= 64. */
static inline uint64_t
bitmap_word_mask (unsigned lo, unsigned hi)
{
  uint64_t upto_hi = hi == BITMAP_WORD_BITS ? UINT64_MAX
                                            : (UINT64_C (1) << hi) - 1;

  assert (lo < hi && hi <= BITMAP_WORD_BITS);
  return upto_hi & ~((UINT64_C (1) << lo) - 1);
}

int
bitmap_init (struct bitmap *bm, uint64_t size, uint32_t granularity)
{
  uint64_t nbits, nwords;

  memset (bm, 0, sizeof *bm);

  if (granularity < 512 || (granularity & (granularity - 1)) != 0) {
    errno = EINVAL;
    return -1;
  }

  bm->bm_granularity = granularity;
  bm->bm_shift = __builtin_ctz (granularity);
  bm->bm_size = size;
  nbits = (size >> bm->bm_shift) + ((size & (granularity - 1)) != 0);
  nwords = bitmap_nwords (nbits);
  if (nwords > SIZE_MAX / sizeof (uint64_t)) {
    errno = ENOMEM;
    return -1;
  }
  /* At least one word, so that bm_words is never NULL after init. */
  bm->bm_words = calloc (nwords > 0 ? nwords : 1, sizeof (uint64_t));
  if (bm->bm_words == NULL)
    return -1;                  /* errno = ENOMEM from calloc */
  bm->bm_nbits = nbits;
  return 0;
}

int
bitmap_grow (struct bitmap *bm, uint64_t size)
{
  uint64_t nbits, old_nwords, nwords;
  uint64_t *words;

  if (size < bm->bm_size) {
    errno = EINVAL;
    return -1;
  }
  nbits = (size >> bm->bm_shift) + ((size & (bm->bm_granularity - 1)) != 0);
  old_nwords = bitmap_nwords (bm->bm_nbits);
  nwords = bitmap_nwords (nbits);
  if (nwords > SIZE_MAX / sizeof (uint64_t)) {
    errno = ENOMEM;
    return -1;
  }
  if (nwords > old_nwords) {
    words = realloc (bm->bm_words, nwords * sizeof (uint64_t));
    if (words == NULL)
      return -1;                /* errno = ENOMEM from realloc */
    /* init allocates at least one word: old_nwords may be 0 with one. */
    memset (&words[old_nwords], 0,
            (nwords - old_nwords) * sizeof (uint64_t));
    bm->bm_words = words;
  }
  /* Bits beyond the old end were clear (the invariant above), so the
   * new ones start clear. */
  bm->bm_nbits = nbits;
  bm->bm_size = size;
  return 0;
}

void
bitmap_free (struct bitmap *bm)
{
  free (bm->bm_words);
  memset (bm, 0, sizeof *bm);
}

/* Set or clear bits [first, end), first < end <= bm_nbits, a word at a
 * time, keeping bm_nset up to date from the words that changed. */
static void
bitmap_change_bits (struct bitmap *bm, uint64_t first, uint64_t end,
                    bool set)
{
  uint64_t w = first / BITMAP_WORD_BITS;
  uint64_t wlast = (end - 1) / BITMAP_WORD_BITS;

  assert (first < end && end <= bm->bm_nbits);

  for (; w <= wlast; ++w) {
    unsigned lo = w == first / BITMAP_WORD_BITS
      ? first % BITMAP_WORD_BITS : 0;
    unsigned hi = w == wlast
      ? (end - 1) % BITMAP_WORD_BITS + 1 : BITMAP_WORD_BITS;
    uint64_t mask = bitmap_word_mask (lo, hi);
    uint64_t old = bm->bm_words[w];
    uint64_t new = set ? old | mask : old & ~mask;

    if (new != old) {
      bm->bm_nset -= __builtin_popcountll (old);
      bm->bm_nset += __builtin_popcountll (new);
      bm->bm_words[w] = new;
    }
  }
}

/* The chunks [*first, *end) that [offset, offset+len) touches, clipped
 * to the volume.  false if there are none. */
static bool
bitmap_range_to_bits (const struct bitmap *bm, uint64_t offset,
                      uint64_t len, uint64_t *first, uint64_t *end)
{
  if (len == 0 || offset >= bm->bm_size)
    return false;
  if (len > bm->bm_size - offset)
    len = bm->bm_size - offset;
  *first = offset >> bm->bm_shift;
  *end = ((offset + len - 1) >> bm->bm_shift) + 1;
  return true;
}

void
bitmap_set_range (struct bitmap *bm, uint64_t offset, uint64_t len)
{
  uint64_t first, end;

  if (bitmap_range_to_bits (bm, offset, len, &first, &end))
    bitmap_change_bits (bm, first, end, true);
}

void
bitmap_clear_range (struct bitmap *bm, uint64_t offset, uint64_t len)
{
  uint64_t first, end;

  if (bitmap_range_to_bits (bm, offset, len, &first, &end))
    bitmap_change_bits (bm, first, end, false);
}

void
bitmap_set_all (struct bitmap *bm)
{
  if (bm->bm_nbits > 0)
    bitmap_change_bits (bm, 0, bm->bm_nbits, true);
}

void
bitmap_clear_all (struct bitmap *bm)
{
  memset (bm->bm_words, 0,
          bitmap_nwords (bm->bm_nbits) * sizeof (uint64_t));
  bm->bm_nset = 0;
}

bool
bitmap_test (const struct bitmap *bm, uint64_t bit)
{
  if (bit >= bm->bm_nbits)
    return false;
  return (bm->bm_words[bit / BITMAP_WORD_BITS] >>
          (bit % BITMAP_WORD_BITS)) & 1;
}

uint64_t
bitmap_count (const struct bitmap *bm)
{
  return bm->bm_nset;
}

uint64_t
bitmap_dirty_bytes (const struct bitmap *bm)
{
  uint64_t last;

  if (bm->bm_nset == 0)
    return 0;
  last = bm->bm_nbits - 1;
  if (bitmap_test (bm, last))
    return (bm->bm_nset - 1) * bm->bm_granularity +
           (bm->bm_size - (last << bm->bm_shift));
  return bm->bm_nset * bm->bm_granularity;
}

int64_t
bitmap_next_set (const struct bitmap *bm, uint64_t from)
{
  uint64_t nwords = bitmap_nwords (bm->bm_nbits);
  uint64_t w, word;

  if (from >= bm->bm_nbits)
    return -1;

  w = from / BITMAP_WORD_BITS;
  word = bm->bm_words[w] & (UINT64_MAX << (from % BITMAP_WORD_BITS));
  for (;;) {
    if (word != 0)
      /* Bits beyond bm_nbits are never set: this is < bm_nbits. */
      return (int64_t) (w * BITMAP_WORD_BITS + __builtin_ctzll (word));
    if (++w >= nwords)
      return -1;
    word = bm->bm_words[w];
  }
}

uint64_t
bitmap_next_clear (const struct bitmap *bm, uint64_t from)
{
  uint64_t nwords = bitmap_nwords (bm->bm_nbits);
  uint64_t w, word, bit;

  if (from >= bm->bm_nbits)
    return bm->bm_nbits;

  w = from / BITMAP_WORD_BITS;
  word = ~bm->bm_words[w] & (UINT64_MAX << (from % BITMAP_WORD_BITS));
  for (;;) {
    if (word != 0) {
      /* The tail past bm_nbits is clear, so a search that runs into
       * it stops at bm_nbits itself. */
      bit = w * BITMAP_WORD_BITS + __builtin_ctzll (word);
      assert (bit <= bm->bm_nbits);
      return bit;
    }
    if (++w >= nwords)
      return bm->bm_nbits;
    word = ~bm->bm_words[w];
  }
}
