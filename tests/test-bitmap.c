/* nbdrepl: unit tests of common/bitmap.c.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "bitmap.h"

#define G 4096u                 /* granularity used by most tests */

static uint64_t
nwords (const struct bitmap *bm)
{
  return (bm->bm_nbits + 63) / 64;
}

/* No bit at or beyond bm_nbits is set in the last word. */
static void
assert_tail_clear (const struct bitmap *bm)
{
  uint64_t n = nwords (bm);
  unsigned used = bm->bm_nbits % 64;

  if (n > 0 && used != 0)
    ck_assert_msg ((bm->bm_words[n - 1] >> used) == 0,
                   "bits beyond nbits %" PRIu64 " set: word 0x%016" PRIx64,
                   bm->bm_nbits, bm->bm_words[n - 1]);
}

/* Count set bits the slow way, to check bm_nset. */
static uint64_t
slow_count (const struct bitmap *bm)
{
  uint64_t i, n = 0;

  for (i = 0; i < bm->bm_nbits; ++i)
    n += bitmap_test (bm, i);
  return n;
}

/* Exactly the bits [first, end) are set. */
static void
assert_only (const struct bitmap *bm, uint64_t first, uint64_t end)
{
  uint64_t i;

  for (i = 0; i < bm->bm_nbits; ++i)
    ck_assert_msg (bitmap_test (bm, i) == (i >= first && i < end),
                   "bit %" PRIu64 " is %d, want [%" PRIu64 ", %" PRIu64 ")",
                   i, bitmap_test (bm, i), first, end);
  ck_assert_uint_eq (bitmap_count (bm), end - first);
  assert_tail_clear (bm);
}

START_TEST (test_init)
{
  static const uint32_t bad[] = {
    0, 1, 2, 256, 511, 513, 1000, 3 * 1024, 4095, 4097, UINT32_MAX,
  };
  static const uint32_t good[] = {
    512, 1024, 4096, 65536, UINT32_C (1) << 20, UINT32_C (1) << 31,
  };
  struct bitmap bm;
  size_t i;

  for (i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    errno = 0;
    ck_assert_int_eq (bitmap_init (&bm, 1 << 20, bad[i]), -1);
    ck_assert_int_eq (errno, EINVAL);
  }
  for (i = 0; i < sizeof good / sizeof good[0]; ++i) {
    ck_assert_int_eq (bitmap_init (&bm, UINT64_C (1) << 32, good[i]), 0);
    ck_assert_uint_eq (bm.bm_granularity, good[i]);
    ck_assert_uint_eq (UINT32_C (1) << bm.bm_shift, good[i]);
    ck_assert_uint_eq (bm.bm_nbits, (UINT64_C (1) << 32) / good[i]);
    ck_assert_uint_eq (bm.bm_size, UINT64_C (1) << 32);
    ck_assert_uint_eq (bitmap_count (&bm), 0);
    ck_assert_int_eq (bitmap_next_set (&bm, 0), -1);
    bitmap_free (&bm);
  }

  /* Chunk counts, including a short last chunk. */
  ck_assert_int_eq (bitmap_init (&bm, 1, G), 0);
  ck_assert_uint_eq (bm.bm_nbits, 1);
  bitmap_free (&bm);
  ck_assert_int_eq (bitmap_init (&bm, G, G), 0);
  ck_assert_uint_eq (bm.bm_nbits, 1);
  bitmap_free (&bm);
  ck_assert_int_eq (bitmap_init (&bm, G + 1, G), 0);
  ck_assert_uint_eq (bm.bm_nbits, 2);
  bitmap_free (&bm);
  ck_assert_int_eq (bitmap_init (&bm, 64 * G, G), 0);
  ck_assert_uint_eq (bm.bm_nbits, 64);
  bitmap_free (&bm);
  bitmap_free (&bm);            /* freeing twice is harmless */

  /* Far too large to allocate. */
  errno = 0;
  ck_assert_int_eq (bitmap_init (&bm, UINT64_MAX, 512), -1);
  ck_assert_int_eq (errno, ENOMEM);
}
END_TEST

/* Growing keeps the bits, the count and the clear tail; a short last
 * chunk becomes a whole one; shrinking is refused. */
START_TEST (test_grow)
{
  struct bitmap bm;

  ck_assert_int_eq (bitmap_init (&bm, 64 * 4096 + 100, 4096), 0);
  ck_assert_uint_eq (bm.bm_nbits, 65);
  bitmap_set_range (&bm, 0, 1);
  bitmap_set_range (&bm, 64 * 4096, 100);       /* the short last chunk */
  ck_assert_int_eq (bitmap_grow (&bm, 64 * 4096), -1);
  ck_assert_int_eq (errno, EINVAL);
  ck_assert_int_eq (bitmap_grow (&bm, 1000 * 4096), 0);
  ck_assert_uint_eq (bm.bm_nbits, 1000);
  ck_assert_uint_eq (bm.bm_size, 1000 * 4096);
  ck_assert_uint_eq (bitmap_count (&bm), 2);
  ck_assert (bitmap_test (&bm, 64));
  ck_assert_int_eq (bitmap_next_set (&bm, 65), -1);
  ck_assert_uint_eq (bitmap_dirty_bytes (&bm), 2 * 4096);
  bitmap_set_range (&bm, 999 * 4096, 4096);
  ck_assert (bitmap_test (&bm, 999));
  ck_assert_uint_eq (bitmap_count (&bm), 3);
  ck_assert_int_eq (bitmap_grow (&bm, 1000 * 4096), 0);       /* same */
  ck_assert_uint_eq (bitmap_count (&bm), 3);
  bitmap_free (&bm);
}
END_TEST

START_TEST (test_empty)
{
  struct bitmap bm;

  ck_assert_int_eq (bitmap_init (&bm, 0, G), 0);
  ck_assert_uint_eq (bm.bm_nbits, 0);
  bitmap_set_range (&bm, 0, G);
  bitmap_set_range (&bm, 0, UINT64_MAX);
  bitmap_set_all (&bm);
  ck_assert_uint_eq (bitmap_count (&bm), 0);
  ck_assert_uint_eq (bitmap_dirty_bytes (&bm), 0);
  ck_assert (!bitmap_test (&bm, 0));
  ck_assert_int_eq (bitmap_next_set (&bm, 0), -1);
  ck_assert_uint_eq (bitmap_next_clear (&bm, 0), 0);
  bitmap_clear_range (&bm, 0, G);
  bitmap_clear_all (&bm);
  ck_assert_uint_eq (bitmap_count (&bm), 0);
  bitmap_free (&bm);
}
END_TEST

START_TEST (test_single_bits)
{
  static const uint64_t bits[] = { 0, 1, 62, 63, 64, 65, 127, 128, 199 };
  struct bitmap bm;
  size_t i;

  ck_assert_int_eq (bitmap_init (&bm, 200 * G, G), 0);
  for (i = 0; i < sizeof bits / sizeof bits[0]; ++i) {
    uint64_t b = bits[i];

    bitmap_set_range (&bm, b * G, G);
    assert_only (&bm, b, b + 1);
    ck_assert_uint_eq (bitmap_dirty_bytes (&bm), G);
    bitmap_set_range (&bm, b * G, G);         /* idempotent */
    ck_assert_uint_eq (bitmap_count (&bm), 1);
    bitmap_clear_range (&bm, b * G, G);
    assert_only (&bm, 0, 0);
    bitmap_clear_range (&bm, b * G, G);
    ck_assert_uint_eq (bitmap_count (&bm), 0);
  }
  /* Out-of-range tests are false, not a read past the end. */
  bitmap_set_all (&bm);
  ck_assert (bitmap_test (&bm, 199));
  ck_assert (!bitmap_test (&bm, 200));
  ck_assert (!bitmap_test (&bm, UINT64_MAX));
  bitmap_free (&bm);
}
END_TEST

START_TEST (test_ranges)
{
  struct bitmap bm;

  ck_assert_int_eq (bitmap_init (&bm, 1000 * G, G), 0);

  /* Across one word boundary. */
  bitmap_set_range (&bm, 60 * G, 11 * G);
  assert_only (&bm, 60, 71);
  bitmap_clear_all (&bm);

  /* Across several words, starting and ending mid-word. */
  bitmap_set_range (&bm, 10 * G, 190 * G);
  assert_only (&bm, 10, 200);
  ck_assert_uint_eq (bitmap_dirty_bytes (&bm), 190 * G);

  /* Clearing the middle, on word boundaries then off them. */
  bitmap_clear_range (&bm, 64 * G, 64 * G);
  ck_assert_uint_eq (bitmap_count (&bm), 190 - 64);
  ck_assert (bitmap_test (&bm, 63));
  ck_assert (!bitmap_test (&bm, 64));
  ck_assert (!bitmap_test (&bm, 127));
  ck_assert (bitmap_test (&bm, 128));
  bitmap_clear_range (&bm, 11 * G, 188 * G);
  ck_assert_uint_eq (bitmap_count (&bm), 2);
  ck_assert (bitmap_test (&bm, 10));
  ck_assert (bitmap_test (&bm, 199));
  ck_assert_uint_eq (slow_count (&bm), 2);

  /* Overlapping set ranges count each chunk once. */
  bitmap_clear_all (&bm);
  bitmap_set_range (&bm, 0, 100 * G);
  bitmap_set_range (&bm, 50 * G, 100 * G);
  assert_only (&bm, 0, 150);

  /* Exactly whole words. */
  bitmap_clear_all (&bm);
  bitmap_set_range (&bm, 64 * G, 128 * G);
  assert_only (&bm, 64, 192);

  /* len 0 does nothing, anywhere. */
  bitmap_clear_all (&bm);
  bitmap_set_range (&bm, 5 * G, 0);
  bitmap_set_range (&bm, 5 * G + 1, 0);
  ck_assert_uint_eq (bitmap_count (&bm), 0);
  bitmap_set_all (&bm);
  bitmap_clear_range (&bm, 5 * G, 0);
  ck_assert_uint_eq (bitmap_count (&bm), 1000);
  bitmap_free (&bm);
}
END_TEST

/* A range touching part of a chunk marks the whole chunk. */
START_TEST (test_partial_chunks)
{
  struct bitmap bm;

  ck_assert_int_eq (bitmap_init (&bm, 100 * G, G), 0);

  bitmap_set_range (&bm, 5 * G + 17, 1);        /* 1 byte */
  assert_only (&bm, 5, 6);
  bitmap_clear_all (&bm);

  bitmap_set_range (&bm, 7 * G - 1, 2);         /* straddles 6|7 */
  assert_only (&bm, 6, 8);
  bitmap_clear_all (&bm);

  bitmap_set_range (&bm, 9 * G + 1, G);         /* one chunk, misaligned */
  assert_only (&bm, 9, 11);
  bitmap_clear_all (&bm);

  bitmap_set_range (&bm, 63 * G + G - 1, 2);    /* straddles a word */
  assert_only (&bm, 63, 65);
  bitmap_clear_all (&bm);

  bitmap_set_range (&bm, 20 * G, G - 1);        /* ends just short */
  assert_only (&bm, 20, 21);

  /* Clearing touches whole chunks too. */
  bitmap_set_all (&bm);
  bitmap_clear_range (&bm, 30 * G + 5, 1);
  ck_assert (!bitmap_test (&bm, 30));
  ck_assert_uint_eq (bitmap_count (&bm), 99);
  bitmap_free (&bm);
}
END_TEST

START_TEST (test_clipping)
{
  const uint64_t size = 10 * G + 100;           /* short last chunk */
  struct bitmap bm;

  ck_assert_int_eq (bitmap_init (&bm, size, G), 0);
  ck_assert_uint_eq (bm.bm_nbits, 11);

  bitmap_set_range (&bm, 9 * G, 100 * G);
  assert_only (&bm, 9, 11);
  bitmap_clear_all (&bm);

  bitmap_set_range (&bm, size, 5);              /* starts at the end */
  bitmap_set_range (&bm, size + G, G);
  bitmap_set_range (&bm, UINT64_MAX, UINT64_MAX);
  bitmap_set_range (&bm, UINT64_MAX - 10, 5);
  ck_assert_uint_eq (bitmap_count (&bm), 0);
  assert_tail_clear (&bm);

  bitmap_set_range (&bm, size - 1, UINT64_MAX); /* would wrap */
  assert_only (&bm, 10, 11);
  bitmap_set_range (&bm, 3 * G, UINT64_MAX);
  assert_only (&bm, 3, 11);

  bitmap_clear_range (&bm, 5 * G, UINT64_MAX);
  assert_only (&bm, 3, 5);
  bitmap_clear_range (&bm, size, UINT64_MAX);
  bitmap_clear_range (&bm, UINT64_MAX, 1);
  assert_only (&bm, 3, 5);
  bitmap_free (&bm);
}
END_TEST

START_TEST (test_dirty_bytes)
{
  const uint64_t size = 10 * G + 100;
  struct bitmap bm;

  ck_assert_int_eq (bitmap_init (&bm, size, G), 0);
  ck_assert_uint_eq (bitmap_dirty_bytes (&bm), 0);
  bitmap_set_range (&bm, size - 1, 1);          /* the short chunk */
  ck_assert_uint_eq (bitmap_count (&bm), 1);
  ck_assert_uint_eq (bitmap_dirty_bytes (&bm), 100);
  bitmap_set_range (&bm, 0, 1);
  ck_assert_uint_eq (bitmap_dirty_bytes (&bm), G + 100);
  bitmap_clear_range (&bm, 10 * G, 100);
  ck_assert_uint_eq (bitmap_dirty_bytes (&bm), G);
  bitmap_set_all (&bm);
  ck_assert_uint_eq (bitmap_count (&bm), 11);
  ck_assert_uint_eq (bitmap_dirty_bytes (&bm), size);
  bitmap_free (&bm);

  /* Whole chunks only: no short one. */
  ck_assert_int_eq (bitmap_init (&bm, 10 * G, G), 0);
  bitmap_set_all (&bm);
  ck_assert_uint_eq (bitmap_dirty_bytes (&bm), 10 * G);
  bitmap_clear_range (&bm, 0, G);
  ck_assert_uint_eq (bitmap_dirty_bytes (&bm), 9 * G);
  bitmap_free (&bm);

  /* A volume smaller than one chunk. */
  ck_assert_int_eq (bitmap_init (&bm, 1000, G), 0);
  bitmap_set_range (&bm, 999, 1);
  ck_assert_uint_eq (bitmap_dirty_bytes (&bm), 1000);
  bitmap_free (&bm);
}
END_TEST

START_TEST (test_next)
{
  struct bitmap bm;
  uint64_t b;

  ck_assert_int_eq (bitmap_init (&bm, 300 * G, G), 0);   /* 300 bits */
  ck_assert_int_eq (bitmap_next_set (&bm, 0), -1);
  ck_assert_uint_eq (bitmap_next_clear (&bm, 0), 0);
  ck_assert_uint_eq (bitmap_next_clear (&bm, 299), 299);

  bitmap_set_range (&bm, 5 * G, 1);
  bitmap_set_range (&bm, 64 * G, 1);
  bitmap_set_range (&bm, 200 * G, 1);
  bitmap_set_range (&bm, 299 * G, 1);
  ck_assert_int_eq (bitmap_next_set (&bm, 0), 5);
  ck_assert_int_eq (bitmap_next_set (&bm, 5), 5);
  ck_assert_int_eq (bitmap_next_set (&bm, 6), 64);
  ck_assert_int_eq (bitmap_next_set (&bm, 64), 64);
  ck_assert_int_eq (bitmap_next_set (&bm, 65), 200);        /* skips a word */
  ck_assert_int_eq (bitmap_next_set (&bm, 201), 299);
  ck_assert_int_eq (bitmap_next_set (&bm, 299), 299);
  ck_assert_int_eq (bitmap_next_set (&bm, 300), -1);
  ck_assert_int_eq (bitmap_next_set (&bm, UINT64_MAX), -1);
  ck_assert_uint_eq (bitmap_next_clear (&bm, 5), 6);

  /* Walking all set bits finds exactly those four. */
  b = 0;
  {
    int64_t n;
    unsigned found = 0;

    while ((n = bitmap_next_set (&bm, b)) >= 0) {
      found++;
      b = n + 1;
    }
    ck_assert_uint_eq (found, 4);
  }

  bitmap_set_all (&bm);
  ck_assert_uint_eq (bitmap_next_clear (&bm, 0), 300);      /* not the tail */
  ck_assert_uint_eq (bitmap_next_clear (&bm, 299), 300);
  ck_assert_uint_eq (bitmap_next_clear (&bm, 300), 300);
  ck_assert_uint_eq (bitmap_next_clear (&bm, UINT64_MAX), 300);
  bitmap_clear_range (&bm, 130 * G, G);
  bitmap_clear_range (&bm, 260 * G, G);
  ck_assert_uint_eq (bitmap_next_clear (&bm, 0), 130);      /* skips words */
  ck_assert_uint_eq (bitmap_next_clear (&bm, 130), 130);
  ck_assert_uint_eq (bitmap_next_clear (&bm, 131), 260);
  ck_assert_uint_eq (bitmap_next_clear (&bm, 261), 300);
  ck_assert_int_eq (bitmap_next_set (&bm, 130), 131);
  bitmap_free (&bm);

  /* nbits a multiple of 64: no tail at all. */
  ck_assert_int_eq (bitmap_init (&bm, 128 * G, G), 0);
  bitmap_set_all (&bm);
  ck_assert_uint_eq (bitmap_next_clear (&bm, 0), 128);
  ck_assert_int_eq (bitmap_next_set (&bm, 127), 127);
  ck_assert_int_eq (bitmap_next_set (&bm, 128), -1);
  bitmap_free (&bm);
}
END_TEST

/* set_all, and ranges running to the end, never set the tail bits. */
START_TEST (test_tail)
{
  static const uint64_t nbits[] = { 1, 2, 63, 64, 65, 127, 128, 129, 300 };
  struct bitmap bm;
  size_t i;

  for (i = 0; i < sizeof nbits / sizeof nbits[0]; ++i) {
    uint64_t size = nbits[i] * G - 1;           /* short last chunk */

    ck_assert_int_eq (bitmap_init (&bm, size, G), 0);
    ck_assert_uint_eq (bm.bm_nbits, nbits[i]);
    bitmap_set_all (&bm);
    assert_only (&bm, 0, nbits[i]);
    ck_assert_uint_eq (bitmap_dirty_bytes (&bm), size);
    bitmap_set_all (&bm);
    ck_assert_uint_eq (bitmap_count (&bm), nbits[i]);
    bitmap_clear_all (&bm);
    assert_only (&bm, 0, 0);
    bitmap_set_range (&bm, 0, UINT64_MAX);
    assert_only (&bm, 0, nbits[i]);
    bitmap_clear_range (&bm, 0, UINT64_MAX);
    assert_only (&bm, 0, 0);
    bitmap_set_range (&bm, size - 1, 1);
    assert_only (&bm, nbits[i] - 1, nbits[i]);
    bitmap_free (&bm);
  }
}
END_TEST

/* Large ranges go a word at a time: 16M chunks in well under a second,
 * even under valgrind. */
START_TEST (test_large)
{
  const uint64_t size = UINT64_C (64) << 30;
  struct bitmap bm;

  ck_assert_int_eq (bitmap_init (&bm, size, G), 0);
  ck_assert_uint_eq (bm.bm_nbits, size / G);
  bitmap_set_range (&bm, 0, size);
  ck_assert_uint_eq (bitmap_count (&bm), size / G);
  ck_assert_uint_eq (bitmap_dirty_bytes (&bm), size);
  bitmap_clear_range (&bm, G, size - 2 * G);
  ck_assert_uint_eq (bitmap_count (&bm), 2);
  ck_assert_int_eq (bitmap_next_set (&bm, 1), (int64_t) (size / G - 1));
  ck_assert_uint_eq (bitmap_next_clear (&bm, 0), 1);
  bitmap_set_all (&bm);
  ck_assert_uint_eq (bitmap_next_clear (&bm, 0), size / G);
  bitmap_clear_all (&bm);
  ck_assert_int_eq (bitmap_next_set (&bm, 0), -1);
  bitmap_free (&bm);
}
END_TEST

/* xorshift64*: deterministic, seeded. */
static uint64_t
rng_next (uint64_t *s)
{
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * UINT64_C (2685821657736338717);
}

/* The model: one bool per chunk, and the obvious loops. */
static void
model_range (bool *model, uint64_t nbits, uint64_t size, unsigned gran,
             uint64_t offset, uint64_t len, bool val)
{
  uint64_t b;

  for (b = 0; b < nbits; ++b) {
    uint64_t cstart = b * gran;
    uint64_t cend = cstart + gran < size ? cstart + gran : size;

    /* chunk [cstart, cend) intersects [offset, offset+len)? */
    if (len > 0 && offset < cend &&
        (cstart <= offset || cstart - offset < len))
      model[b] = val;
  }
}

/* Compare the bitmap with the model.  Plain ifs in the loops and one
 * ck_abort_msg on the first difference: a Check assertion per bit
 * would make this crawl under valgrind.  next_set/next_clear from
 * every position only when full is set. */
static void
compare_model (const struct bitmap *bm, const bool *model, uint64_t nbits,
               uint64_t size, unsigned gran, unsigned step, bool full)
{
  uint64_t b, count = 0, dirty = 0;
  int64_t want_set = -1, got_set;
  uint64_t want_clear = nbits, got_clear;

  for (b = 0; b < nbits; ++b) {
    if (model[b]) {
      count++;
      dirty += (b + 1) * gran <= size ? gran : size - b * gran;
    }
    if (bitmap_test (bm, b) != model[b])
      ck_abort_msg ("step %u: bit %" PRIu64 " is %d, model %d",
                    step, b, bitmap_test (bm, b), model[b]);
  }
  ck_assert_msg (bitmap_count (bm) == count, "step %u: count %" PRIu64
                 " != model %" PRIu64, step, bitmap_count (bm), count);
  ck_assert_uint_eq (bitmap_dirty_bytes (bm), dirty);
  assert_tail_clear (bm);
  if (!full)
    return;

  /* Walk backwards so the expected answers are known as we go. */
  for (b = nbits; b-- > 0; ) {
    if (model[b])
      want_set = b;
    else
      want_clear = b;
    got_set = bitmap_next_set (bm, b);
    if (got_set != want_set)
      ck_abort_msg ("step %u: next_set (%" PRIu64 ") = %" PRId64
                    ", want %" PRId64, step, b, got_set, want_set);
    got_clear = bitmap_next_clear (bm, b);
    if (got_clear != want_clear)
      ck_abort_msg ("step %u: next_clear (%" PRIu64 ") = %" PRIu64
                    ", want %" PRIu64, step, b, got_clear, want_clear);
  }
  ck_assert_int_eq (bitmap_next_set (bm, nbits), -1);
  ck_assert_uint_eq (bitmap_next_clear (bm, nbits), nbits);
}

START_TEST (test_random_model)
{
  static const unsigned grans[] = { 512, 4096, 65536 };
  uint64_t seed = UINT64_C (0x853c49e6748fea9b);
  unsigned round;

  for (round = 0; round < 12; ++round) {
    unsigned gran = grans[round % 3];
    uint64_t nfull = rng_next (&seed) % 400;
    uint64_t size = nfull * gran + (round & 1 ? rng_next (&seed) % gran : 0);
    struct bitmap bm;
    bool *model;
    unsigned step;

    ck_assert_int_eq (bitmap_init (&bm, size, gran), 0);
    model = calloc (bm.bm_nbits + 1, sizeof *model);
    ck_assert_ptr_nonnull (model);

    for (step = 0; step < 400; ++step) {
      uint64_t r = rng_next (&seed);
      uint64_t offset, len;

      /* Mostly short ranges near chunk edges, sometimes long or past
       * the end. */
      offset = rng_next (&seed) % (size + 2 * gran);
      if (r & 8)
        offset &= ~(uint64_t) (gran - 1);
      switch ((r >> 4) % 4) {
      case 0: len = rng_next (&seed) % 4; break;
      case 1: len = rng_next (&seed) % (3 * gran); break;
      case 2: len = rng_next (&seed) % (size + 1); break;
      default: len = rng_next (&seed) % (200 * (uint64_t) gran); break;
      }
      if ((r & 0x300) == 0x300)
        len = UINT64_MAX - rng_next (&seed) % 16;

      switch (r % 8) {
      case 0:
        if ((r >> 12) % 8 == 0) {
          bitmap_set_all (&bm);
          memset (model, 1, bm.bm_nbits);
          break;
        }
        /* fallthrough */
      case 1: case 2: case 3:
        bitmap_set_range (&bm, offset, len);
        model_range (model, bm.bm_nbits, size, gran, offset,
                     offset >= size ? 0 : len, true);
        break;
      case 4:
        if ((r >> 12) % 8 == 0) {
          bitmap_clear_all (&bm);
          memset (model, 0, bm.bm_nbits);
          break;
        }
        /* fallthrough */
      default:
        bitmap_clear_range (&bm, offset, len);
        model_range (model, bm.bm_nbits, size, gran, offset,
                     offset >= size ? 0 : len, false);
        break;
      }
      compare_model (&bm, model, bm.bm_nbits, size, gran, step,
                     step % 8 == 0);
    }

    free (model);
    bitmap_free (&bm);
  }
}
END_TEST

static Suite *
bitmap_suite (void)
{
  Suite *s = suite_create ("bitmap");
  TCase *tc;

  tc = tcase_create ("basic");
  tcase_set_timeout (tc, 30);
  tcase_add_test (tc, test_init);
  tcase_add_test (tc, test_empty);
  tcase_add_test (tc, test_single_bits);
  tcase_add_test (tc, test_ranges);
  tcase_add_test (tc, test_partial_chunks);
  tcase_add_test (tc, test_clipping);
  tcase_add_test (tc, test_dirty_bytes);
  tcase_add_test (tc, test_next);
  tcase_add_test (tc, test_tail);
  tcase_add_test (tc, test_large);
  tcase_add_test (tc, test_grow);
  suite_add_tcase (s, tc);

  /* Generous: valgrind slows the model comparison down a lot. */
  tc = tcase_create ("random");
  tcase_set_timeout (tc, 300);
  tcase_add_test (tc, test_random_model);
  suite_add_tcase (s, tc);

  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (bitmap_suite ());
  int failed;

  srunner_run_all (sr, CK_ENV);
  failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
