/* nbdrepl: the activity log, in memory.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * Slots are found by extent through a chained hash (al_hash, chains
 * linked by as_hnext) and kept, while idle, on a doubly-linked list
 * from least to most recently used (as_prev, as_next).  A slot with
 * writes in flight is off the list, so eviction is O(1): the head of
 * the list.  Empty slots sit at the head, so they are used first.
 *
 * Why the drops: an extent that leaves the table may still be recorded
 * in the last durable transaction (or in the one in flight).  Its dirty
 * bits must be on disk before a transaction without it becomes durable,
 * or a crash would forget that the extent may differ between nodes.
 * An extent whose activation was never part of a snapshot had no write
 * (writes wait for durability), so it needs no flush when evicted.
 */
#include <config.h>

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "activity-log.h"
#include "bitmap.h"

static inline uint32_t
al_hash_of (const struct activity_log *al, uint32_t extent)
{
  return (uint32_t) ((extent * UINT64_C (0x9E3779B97F4A7C15)) >> 32) &
         al->al_hash_mask;
}

static uint32_t
al_lookup (const struct activity_log *al, uint32_t extent)
{
  uint32_t s;

  for (s = al->al_hash[al_hash_of (al, extent)]; s != AL_NIL;
       s = al->al_slots[s].as_hnext)
    if (al->al_slots[s].as_extent == extent)
      return s;
  return AL_NIL;
}

static void
al_hash_insert (struct activity_log *al, uint32_t s)
{
  uint32_t h = al_hash_of (al, al->al_slots[s].as_extent);

  al->al_slots[s].as_hnext = al->al_hash[h];
  al->al_hash[h] = s;
}

static void
al_hash_remove (struct activity_log *al, uint32_t s)
{
  uint32_t *link = &al->al_hash[al_hash_of (al, al->al_slots[s].as_extent)];

  while (*link != s) {
    assert (*link != AL_NIL);
    link = &al->al_slots[*link].as_hnext;
  }
  *link = al->al_slots[s].as_hnext;
  al->al_slots[s].as_hnext = AL_NIL;
}

static void
al_idle_remove (struct activity_log *al, uint32_t s)
{
  struct al_slot *sl = &al->al_slots[s];

  if (sl->as_prev != AL_NIL)
    al->al_slots[sl->as_prev].as_next = sl->as_next;
  else
    al->al_idle_head = sl->as_next;
  if (sl->as_next != AL_NIL)
    al->al_slots[sl->as_next].as_prev = sl->as_prev;
  else
    al->al_idle_tail = sl->as_prev;
  sl->as_prev = sl->as_next = AL_NIL;
  al->al_nidle--;
}

/* Append at the most recently used end. */
static void
al_idle_append (struct activity_log *al, uint32_t s)
{
  struct al_slot *sl = &al->al_slots[s];

  sl->as_next = AL_NIL;
  sl->as_prev = al->al_idle_tail;
  if (al->al_idle_tail != AL_NIL)
    al->al_slots[al->al_idle_tail].as_next = s;
  else
    al->al_idle_head = s;
  al->al_idle_tail = s;
  al->al_nidle++;
}

/* Every slot empty and idle, no drops. */
static void
al_reset (struct activity_log *al)
{
  uint32_t s;

  for (s = 0; s <= al->al_hash_mask; ++s)
    al->al_hash[s] = AL_NIL;
  al->al_idle_head = al->al_idle_tail = AL_NIL;
  al->al_nidle = 0;
  for (s = 0; s < al->al_nslots; ++s) {
    al->al_slots[s] = (struct al_slot) {
      .as_extent = AL_EMPTY, .as_refs = 0, .as_seq = 0,
      .as_prev = AL_NIL, .as_next = AL_NIL, .as_hnext = AL_NIL,
    };
    al_idle_append (al, s);
  }
  al->al_nactive = 0;
  al->al_ndrops = 0;
}

int
al_init (struct activity_log *al, uint32_t nslots, uint32_t extent_size,
         uint64_t size)
{
  uint64_t nextents;
  uint32_t hsize;

  memset (al, 0, sizeof *al);
  if (nslots == 0 || nslots > AL_MAX_SLOTS ||
      extent_size < 4096 || (extent_size & (extent_size - 1)) != 0 ||
      size == 0) {
    errno = EINVAL;
    return -1;
  }
  al->al_shift = __builtin_ctz (extent_size);
  nextents = (size >> al->al_shift) + ((size & (extent_size - 1)) != 0);
  if (nextents >= AL_EMPTY) {
    errno = EINVAL;
    return -1;
  }
  for (hsize = 1; hsize < 2 * nslots; hsize *= 2)
    ;
  al->al_slots = calloc (nslots, sizeof *al->al_slots);
  al->al_hash = calloc (hsize, sizeof *al->al_hash);
  al->al_drops = calloc (AL_MAX_DROPS (nslots), sizeof *al->al_drops);
  if (al->al_slots == NULL || al->al_hash == NULL || al->al_drops == NULL) {
    free (al->al_slots);
    free (al->al_hash);
    free (al->al_drops);
    memset (al, 0, sizeof *al);
    errno = ENOMEM;
    return -1;
  }
  al->al_nslots = nslots;
  al->al_size = size;
  al->al_nextents = nextents;
  al->al_hash_mask = hsize - 1;
  al_reset (al);
  al->al_magic = AL_MAGIC;
  return 0;
}

int
al_grow (struct activity_log *al, uint64_t size)
{
  uint64_t nextents;

  assert (al->al_magic == AL_MAGIC);
  nextents = (size >> al->al_shift) +
             ((size & ((UINT64_C (1) << al->al_shift) - 1)) != 0);
  if (size < al->al_size || nextents >= AL_EMPTY) {
    errno = EINVAL;
    return -1;
  }
  al->al_size = size;
  al->al_nextents = nextents;
  return 0;
}

void
al_free (struct activity_log *al)
{
  if (al->al_magic == AL_MAGIC) {
    free (al->al_slots);
    free (al->al_hash);
    free (al->al_drops);
  }
  memset (al, 0, sizeof *al);
}

int
al_load (struct activity_log *al, const uint32_t *table, size_t n,
         uint64_t seq)
{
  uint32_t s;

  assert (al->al_magic == AL_MAGIC);
  assert (!al->al_in_flight && al->al_nidle == al->al_nslots);

  if (n != al->al_nslots) {
    errno = EINVAL;
    return -1;
  }
  al_reset (al);
  /* Insert as we check, so that duplicates show up in the hash; undo
   * everything on the first bad entry. */
  for (s = 0; s < n; ++s) {
    if (table[s] == AL_EMPTY)
      continue;
    if (table[s] >= al->al_nextents || al_lookup (al, table[s]) != AL_NIL) {
      al_reset (al);
      errno = EINVAL;
      return -1;
    }
    al->al_slots[s].as_extent = table[s];
    al_hash_insert (al, s);
    al->al_nactive++;
  }
  /* Empty slots first, then the extents in table order. */
  al->al_idle_head = al->al_idle_tail = AL_NIL;
  al->al_nidle = 0;
  for (s = 0; s < n; ++s)
    if (table[s] == AL_EMPTY)
      al_idle_append (al, s);
  for (s = 0; s < n; ++s)
    if (table[s] != AL_EMPTY)
      al_idle_append (al, s);
  al->al_seq_taken = al->al_seq_durable = seq;
  al->al_failed = false;
  return 0;
}

void
al_extent_range (const struct activity_log *al, uint32_t e,
                 uint64_t *offset, uint64_t *len)
{
  uint64_t start = (uint64_t) e << al->al_shift;
  uint64_t end = start + (UINT64_C (1) << al->al_shift);

  assert (e < al->al_nextents);
  if (end > al->al_size)
    end = al->al_size;
  *offset = start;
  *len = end - start;
}

uint32_t
al_replay (const struct activity_log *al, struct bitmap *bm)
{
  uint64_t off, len;
  uint32_t s, n = 0;

  assert (al->al_magic == AL_MAGIC);
  for (s = 0; s < al->al_nslots; ++s) {
    if (al->al_slots[s].as_extent == AL_EMPTY)
      continue;
    al_extent_range (al, al->al_slots[s].as_extent, &off, &len);
    bitmap_set_range (bm, off, len);
    n++;
  }
  return n;
}

uint32_t
al_active_extents (const struct activity_log *al, uint32_t *out,
                   size_t max)
{
  uint32_t s, n = 0;

  assert (al->al_magic == AL_MAGIC);
  for (s = 0; s < al->al_nslots; ++s) {
    if (al->al_slots[s].as_extent == AL_EMPTY)
      continue;
    if (n < max)
      out[n] = al->al_slots[s].as_extent;
    n++;
  }
  return n;
}

bool
al_extent_span (const struct activity_log *al, uint64_t offset,
                uint64_t len, uint32_t *first, uint32_t *last)
{
  if (len == 0 || offset >= al->al_size)
    return false;
  if (len > al->al_size - offset)
    len = al->al_size - offset;
  *first = offset >> al->al_shift;
  *last = (offset + len - 1) >> al->al_shift;
  return true;
}

static void
al_drop_remove (struct activity_log *al, uint32_t extent)
{
  uint32_t i;

  for (i = 0; i < al->al_ndrops; ++i)
    if (al->al_drops[i].ad_extent == extent) {
      al->al_drops[i] = al->al_drops[--al->al_ndrops];
      return;
    }
}

/* Put extent into the least recently used idle slot, evicting what was
 * there, and take the first reference. */
static uint32_t
al_activate (struct activity_log *al, uint32_t extent)
{
  uint32_t s = al->al_idle_head;
  struct al_slot *sl;

  assert (s != AL_NIL);
  sl = &al->al_slots[s];
  assert (sl->as_refs == 0);
  al_idle_remove (al, s);
  if (sl->as_extent != AL_EMPTY) {
    /* In a snapshot already taken: maybe on disk, so its bitmap pages
     * must be written before a transaction without it. */
    if (sl->as_seq <= al->al_seq_taken) {
      assert (al->al_ndrops < AL_MAX_DROPS (al->al_nslots));
      al->al_drops[al->al_ndrops++] = (struct al_drop) {
        .ad_extent = sl->as_extent, .ad_in_snapshot = false,
      };
    }
    al_hash_remove (al, s);
  }
  else
    al->al_nactive++;
  al_drop_remove (al, extent);
  sl->as_extent = extent;
  sl->as_seq = al->al_seq_taken + 1;
  sl->as_refs = 1;
  al_hash_insert (al, s);
  return s;
}

int
al_begin (struct activity_log *al, uint64_t offset, uint64_t len,
          uint64_t *need_seq)
{
  return al_begin_reserve (al, offset, len, 0, need_seq);
}

int
al_begin_reserve (struct activity_log *al, uint64_t offset, uint64_t len,
                  uint32_t reserve, uint64_t *need_seq)
{
  uint32_t first, last, e, s, nnew = 0, nidle_in_range = 0;
  uint64_t need = 0;

  assert (al->al_magic == AL_MAGIC);
  if (al->al_failed) {
    errno = EIO;
    return -1;
  }
  if (len == 0 || offset >= al->al_size || len > al->al_size - offset) {
    errno = EINVAL;
    return -1;
  }
  first = offset >> al->al_shift;
  last = (offset + len - 1) >> al->al_shift;
  if (reserve >= al->al_nslots || last - first >= al->al_nslots - reserve) {
    errno = E2BIG;
    return -1;
  }

  /* All or nothing: count what is needed before touching anything.
   * Idle slots holding extents of this range will get a reference and
   * are no candidates for eviction. */
  for (e = first; e <= last; ++e) {
    s = al_lookup (al, e);
    if (s == AL_NIL)
      nnew++;
    else if (al->al_slots[s].as_refs == 0)
      nidle_in_range++;
  }
  if (nnew + reserve > al->al_nidle - nidle_in_range)
    return AL_BUSY;

  for (e = first; e <= last; ++e) {
    s = al_lookup (al, e);
    if (s == AL_NIL)
      continue;
    if (al->al_slots[s].as_refs++ == 0)
      al_idle_remove (al, s);
    if (al->al_slots[s].as_seq > need)
      need = al->al_slots[s].as_seq;
  }
  for (e = first; nnew > 0 && e <= last; ++e) {
    if (al_lookup (al, e) != AL_NIL)
      continue;
    s = al_activate (al, e);
    if (al->al_slots[s].as_seq > need)
      need = al->al_slots[s].as_seq;
  }

  *need_seq = need;
  return need <= al->al_seq_durable ? AL_READY : AL_NEED_TXN;
}

bool
al_complete (struct activity_log *al, uint64_t offset, uint64_t len)
{
  uint32_t first, last, e, s;
  bool freed = false;

  assert (al->al_magic == AL_MAGIC);
  if (!al_extent_span (al, offset, len, &first, &last))
    return false;
  for (e = first; e <= last; ++e) {
    s = al_lookup (al, e);
    assert (s != AL_NIL && al->al_slots[s].as_refs > 0);
    if (--al->al_slots[s].as_refs == 0) {
      al_idle_append (al, s);
      freed = true;
    }
  }
  return freed;
}

bool
al_is_durable (const struct activity_log *al, uint64_t need_seq)
{
  return need_seq <= al->al_seq_durable;
}

bool
al_txn_in_flight (const struct activity_log *al)
{
  return al->al_in_flight;
}

int
al_snapshot (struct activity_log *al, uint32_t *table, uint32_t *drops,
             size_t *ndrops, uint64_t *seq)
{
  uint32_t s, i;

  assert (al->al_magic == AL_MAGIC);
  if (al->al_failed) {
    errno = EIO;
    return -1;
  }
  if (al->al_in_flight) {
    errno = EBUSY;
    return -1;
  }
  for (s = 0; s < al->al_nslots; ++s)
    table[s] = al->al_slots[s].as_extent;
  for (i = 0; i < al->al_ndrops; ++i) {
    al->al_drops[i].ad_in_snapshot = true;
    drops[i] = al->al_drops[i].ad_extent;
  }
  *ndrops = al->al_ndrops;
  *seq = ++al->al_seq_taken;
  al->al_in_flight = true;
  return 0;
}

void
al_committed (struct activity_log *al, uint64_t seq)
{
  uint32_t i;

  assert (al->al_magic == AL_MAGIC);
  assert (al->al_in_flight && seq == al->al_seq_taken);
  al->al_seq_durable = seq;
  al->al_in_flight = false;
  for (i = 0; i < al->al_ndrops; )
    if (al->al_drops[i].ad_in_snapshot)
      al->al_drops[i] = al->al_drops[--al->al_ndrops];
    else
      i++;
}

void
al_txn_failed (struct activity_log *al)
{
  assert (al->al_magic == AL_MAGIC);
  assert (al->al_in_flight);
  al->al_in_flight = false;
  al->al_failed = true;
}

uint32_t
al_nactive (const struct activity_log *al)
{
  return al->al_nactive;
}
