/* nbdrepl: generation UUIDs and the sync decision at connect.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * The decision table, and why each row is there, is in uuid-compare.h;
 * uuid_compare below follows it row by row, in the same order.
 */
#include <config.h>

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "uuid-compare.h"

/* A UUID that names a generation: not "none", not "fresh". */
static inline bool
uuid_is_real (uint64_t v)
{
  return v != 0 && v != UUID_JUST_CREATED;
}

/* The current UUID, with 0 read as fresh (zeroed metadata was never
 * created; DRBD 9 reads it the same way). */
static inline uint64_t
uuid_current (const struct gen_uuids *u)
{
  return u->gu_current == 0 ? UUID_JUST_CREATED : u->gu_current;
}

static inline bool
uuid_is_fresh (const struct gen_uuids *u)
{
  return uuid_current (u) == UUID_JUST_CREATED;
}

/* Consistent data: the flag, and a generation to be consistent with. */
static inline bool
uuid_is_consistent (const struct gen_uuids *u)
{
  return (u->gu_flags & GU_FLAG_CONSISTENT) != 0 && !uuid_is_fresh (u);
}

/* v (a real UUID) is one of u's history UUIDs. */
static bool
uuid_in_history (const struct gen_uuids *u, uint64_t v)
{
  size_t i;

  if (!uuid_is_real (v))
    return false;
  for (i = 0; i < UUID_HISTORY; ++i)
    if (u->gu_history[i] == v)
      return true;
  return false;
}

/* v (a real UUID) is among u's ancestors: history or bitmap UUID. */
static bool
uuid_in_ancestors (const struct gen_uuids *u, uint64_t v)
{
  return uuid_is_real (v) && (u->gu_bitmap == v || uuid_in_history (u, v));
}

/* Part 1, rows 34..49: the same current generation on both sides. */
static enum uuid_decision
uuid_compare_same (const struct gen_uuids *local,
                   const struct gen_uuids *peer, int *rule)
{
  bool lbm = local->gu_bitmap != 0, pbm = peer->gu_bitmap != 0;
  bool lcrash = (local->gu_flags & GU_FLAG_CRASHED_PRIMARY) != 0;
  bool pcrash = (peer->gu_flags & GU_FLAG_CRASHED_PRIMARY) != 0;
  bool lpri = (local->gu_flags & GU_FLAG_PRIMARY) != 0;
  bool ppri = (peer->gu_flags & GU_FLAG_PRIMARY) != 0;

  if (lbm && !pbm) {
    *rule = UUID_RULE_SAME_BITMAP_LOCAL;
    return UUID_SYNC_SOURCE_BITMAP;
  }
  if (pbm && !lbm) {
    *rule = UUID_RULE_SAME_BITMAP_PEER;
    return UUID_SYNC_TARGET_BITMAP;
  }

  if (lcrash || pcrash) {
    if (lpri && !ppri) {
      *rule = UUID_RULE_CRASHED_LOCAL_PRIMARY_NOW;
      return UUID_SYNC_SOURCE_BITMAP;
    }
    if (ppri && !lpri) {
      *rule = UUID_RULE_CRASHED_PEER_PRIMARY_NOW;
      return UUID_SYNC_TARGET_BITMAP;
    }
    if (lpri && ppri) {
      *rule = UUID_RULE_CRASHED_BOTH_PRIMARY_NOW;
      return UUID_SPLIT_BRAIN;
    }
    if (lcrash && !pcrash) {
      *rule = UUID_RULE_CRASHED_LOCAL;
      return UUID_SYNC_SOURCE_BITMAP;
    }
    if (pcrash && !lcrash) {
      *rule = UUID_RULE_CRASHED_PEER;
      return UUID_SYNC_TARGET_BITMAP;
    }
    *rule = UUID_RULE_CRASHED_BOTH;
    return UUID_SYNC_BITMAP_TIEBREAK;
  }

  *rule = UUID_RULE_SAME;
  return UUID_NO_SYNC;
}

/* Part 1 of the table: the generations alone. */
static enum uuid_decision
uuid_compare_generations (const struct gen_uuids *local,
                          const struct gen_uuids *peer, int *rule)
{
  uint64_t lcur = uuid_current (local), pcur = uuid_current (peer);
  bool peer_bitmap_is_us, our_bitmap_is_peer;
  bool we_are_in_peer_history, peer_is_in_our_history, ltent, ptent;
  int split = 0;
  size_t i;

  if (lcur == UUID_JUST_CREATED && pcur == UUID_JUST_CREATED) {
    *rule = UUID_RULE_FRESH_BOTH;
    return UUID_NO_SYNC;
  }
  if (lcur == UUID_JUST_CREATED) {
    *rule = UUID_RULE_FRESH_LOCAL;
    return UUID_SYNC_TARGET_FULL;
  }
  if (pcur == UUID_JUST_CREATED) {
    *rule = UUID_RULE_FRESH_PEER;
    return UUID_SYNC_SOURCE_FULL;
  }

  if (lcur == pcur)
    return uuid_compare_same (local, peer, rule);

  /* Both current UUIDs are real from here on, so an equality with one
   * of them never matches an empty (0) slot. */
  peer_bitmap_is_us = peer->gu_bitmap == lcur;
  our_bitmap_is_peer = local->gu_bitmap == pcur;
  if (peer_bitmap_is_us && our_bitmap_is_peer) {
    *rule = UUID_RULE_BITMAP_CROSSED;
    return UUID_SPLIT_BRAIN;
  }
  if (peer_bitmap_is_us) {
    *rule = UUID_RULE_BITMAP_PEER;
    return UUID_SYNC_TARGET_BITMAP;
  }
  if (our_bitmap_is_peer) {
    *rule = UUID_RULE_BITMAP_LOCAL;
    return UUID_SYNC_SOURCE_BITMAP;
  }

  we_are_in_peer_history = uuid_in_history (peer, lcur);
  peer_is_in_our_history = uuid_in_history (local, pcur);
  if (we_are_in_peer_history && !peer_is_in_our_history) {
    *rule = UUID_RULE_HISTORY_PEER;
    return UUID_SYNC_TARGET_FULL;
  }
  if (peer_is_in_our_history && !we_are_in_peer_history) {
    *rule = UUID_RULE_HISTORY_LOCAL;
    return UUID_SYNC_SOURCE_FULL;
  }

  if (uuid_is_real (local->gu_bitmap) &&
      local->gu_bitmap == peer->gu_bitmap)
    split = UUID_RULE_SPLIT_BRAIN_BITMAP;
  /* A common ancestor: any of our ancestors among the peer's.  Empty
   * slots are no ancestor (uuid_in_ancestors ignores 0). */
  else if (uuid_in_ancestors (peer, local->gu_bitmap))
    split = UUID_RULE_SPLIT_BRAIN_HISTORY;
  for (i = 0; i < UUID_HISTORY && split == 0; ++i)
    if (uuid_in_ancestors (peer, local->gu_history[i]))
      split = UUID_RULE_SPLIT_BRAIN_HISTORY;
  if (split == 0) {
    *rule = UUID_RULE_UNRELATED;
    return UUID_UNRELATED;
  }

  /* Both moved on; a tentative generation goes (rows 85/86). */
  ltent = (local->gu_flags & GU_FLAG_TENTATIVE) != 0;
  ptent = (peer->gu_flags & GU_FLAG_TENTATIVE) != 0;
  if (ltent && !ptent) {
    *rule = UUID_RULE_TENTATIVE_LOCAL;
    return UUID_SYNC_TARGET_FULL;
  }
  if (ptent && !ltent) {
    *rule = UUID_RULE_TENTATIVE_PEER;
    return UUID_SYNC_SOURCE_FULL;
  }
  *rule = split;
  return UUID_SPLIT_BRAIN;
}

/* A decision that moves data one way or the other. */
static bool
uuid_decision_is_resync (enum uuid_decision d)
{
  return uuid_decision_is_source (d) || uuid_decision_is_target (d) ||
         d == UUID_SYNC_BITMAP_TIEBREAK;
}

/* Part 2 of the table: never copy from a disk that is not Consistent;
 * Consistent data wins over data that is not. */
static enum uuid_decision
uuid_apply_disk_states (const struct gen_uuids *local,
                        const struct gen_uuids *peer,
                        enum uuid_decision d, int *rule)
{
  bool lcons = uuid_is_consistent (local);
  bool pcons = uuid_is_consistent (peer);

  if (d == UUID_SPLIT_BRAIN || d == UUID_UNRELATED || lcons == pcons) {
    if (!lcons && !pcons && uuid_decision_is_resync (d)) {
      *rule = UUID_RULE_NO_CONSISTENT_SOURCE;
      return UUID_SOURCE_INCONSISTENT;
    }
    return d;
  }
  if (!lcons) {
    if (uuid_decision_is_target (d))
      return d;
    *rule = UUID_RULE_INCONSISTENT_LOCAL;
    return UUID_SYNC_TARGET_FULL;
  }
  if (uuid_decision_is_source (d))
    return d;
  *rule = UUID_RULE_INCONSISTENT_PEER;
  return UUID_SYNC_SOURCE_FULL;
}

enum uuid_decision
uuid_compare (const struct gen_uuids *local, const struct gen_uuids *peer,
              int *rule)
{
  enum uuid_decision d;
  int r = 0;

  assert (local != NULL && peer != NULL);
  d = uuid_compare_generations (local, peer, &r);
  d = uuid_apply_disk_states (local, peer, d, &r);
  if (rule != NULL)
    *rule = r;
  return d;
}

static const char *const uuid_decision_names[] = {
  [UUID_NO_SYNC] = "no-sync",
  [UUID_SYNC_SOURCE_BITMAP] = "sync-source-bitmap",
  [UUID_SYNC_TARGET_BITMAP] = "sync-target-bitmap",
  [UUID_SYNC_SOURCE_FULL] = "sync-source-full",
  [UUID_SYNC_TARGET_FULL] = "sync-target-full",
  [UUID_SYNC_BITMAP_TIEBREAK] = "sync-bitmap-tiebreak",
  [UUID_SOURCE_INCONSISTENT] = "source-inconsistent",
  [UUID_SPLIT_BRAIN] = "split-brain",
  [UUID_UNRELATED] = "unrelated",
};

const char *
uuid_decision_name (enum uuid_decision d)
{
  if ((unsigned) d > UUID_DECISION_MAX)
    return "unknown";
  return uuid_decision_names[d];
}

static const struct {
  int rn_rule;
  const char *rn_name;
} uuid_rule_names[] = {
  { UUID_RULE_FRESH_BOTH, "fresh-both" },
  { UUID_RULE_FRESH_LOCAL, "fresh-local" },
  { UUID_RULE_FRESH_PEER, "fresh-peer" },
  { UUID_RULE_SAME_BITMAP_LOCAL, "same-bitmap-local" },
  { UUID_RULE_SAME_BITMAP_PEER, "same-bitmap-peer" },
  { UUID_RULE_CRASHED_LOCAL_PRIMARY_NOW, "crashed-local-primary-now" },
  { UUID_RULE_CRASHED_PEER_PRIMARY_NOW, "crashed-peer-primary-now" },
  { UUID_RULE_CRASHED_BOTH_PRIMARY_NOW, "crashed-both-primary-now" },
  { UUID_RULE_CRASHED_LOCAL, "crashed-local" },
  { UUID_RULE_CRASHED_PEER, "crashed-peer" },
  { UUID_RULE_CRASHED_BOTH, "crashed-both" },
  { UUID_RULE_SAME, "same" },
  { UUID_RULE_BITMAP_PEER, "bitmap-peer" },
  { UUID_RULE_BITMAP_CROSSED, "bitmap-crossed" },
  { UUID_RULE_BITMAP_LOCAL, "bitmap-local" },
  { UUID_RULE_HISTORY_PEER, "history-peer" },
  { UUID_RULE_HISTORY_LOCAL, "history-local" },
  { UUID_RULE_TENTATIVE_LOCAL, "tentative-local" },
  { UUID_RULE_TENTATIVE_PEER, "tentative-peer" },
  { UUID_RULE_SPLIT_BRAIN_BITMAP, "split-brain-bitmap" },
  { UUID_RULE_SPLIT_BRAIN_HISTORY, "split-brain-history" },
  { UUID_RULE_NO_CONSISTENT_SOURCE, "no-consistent-source" },
  { UUID_RULE_INCONSISTENT_LOCAL, "inconsistent-local" },
  { UUID_RULE_INCONSISTENT_PEER, "inconsistent-peer" },
  { UUID_RULE_UNRELATED, "unrelated" },
};

const char *
uuid_rule_name (int rule)
{
  size_t i;

  for (i = 0; i < sizeof uuid_rule_names / sizeof uuid_rule_names[0]; ++i)
    if (uuid_rule_names[i].rn_rule == rule)
      return uuid_rule_names[i].rn_name;
  return "unknown";
}

enum uuid_decision
uuid_decision_mirror (enum uuid_decision d)
{
  switch (d) {
  case UUID_SYNC_SOURCE_BITMAP: return UUID_SYNC_TARGET_BITMAP;
  case UUID_SYNC_TARGET_BITMAP: return UUID_SYNC_SOURCE_BITMAP;
  case UUID_SYNC_SOURCE_FULL: return UUID_SYNC_TARGET_FULL;
  case UUID_SYNC_TARGET_FULL: return UUID_SYNC_SOURCE_FULL;
  case UUID_NO_SYNC:
  case UUID_SYNC_BITMAP_TIEBREAK:
  case UUID_SOURCE_INCONSISTENT:
  case UUID_SPLIT_BRAIN:
  case UUID_UNRELATED:
    return d;
  }
  abort ();
}

bool
uuid_decision_is_source (enum uuid_decision d)
{
  return d == UUID_SYNC_SOURCE_BITMAP || d == UUID_SYNC_SOURCE_FULL;
}

bool
uuid_decision_is_target (enum uuid_decision d)
{
  return d == UUID_SYNC_TARGET_BITMAP || d == UUID_SYNC_TARGET_FULL;
}

bool
uuid_decision_is_full (enum uuid_decision d)
{
  return d == UUID_SYNC_SOURCE_FULL || d == UUID_SYNC_TARGET_FULL;
}

bool
uuid_decision_refuses (enum uuid_decision d)
{
  return d == UUID_SOURCE_INCONSISTENT || d == UUID_SPLIT_BRAIN ||
         d == UUID_UNRELATED;
}

int
uuid_check (const struct gen_uuids *u, char *err, size_t errlen)
{
  size_t i;

  if ((u->gu_flags & ~GU_FLAGS_KNOWN) != 0) {
    snprintf (err, errlen, "generation UUIDs: unknown flags 0x%" PRIx32,
              u->gu_flags & ~GU_FLAGS_KNOWN);
    goto bad;
  }
  if (u->gu_bitmap == UUID_JUST_CREATED) {
    snprintf (err, errlen, "generation UUIDs: bitmap UUID is the "
              "just-created value");
    goto bad;
  }
  for (i = 0; i < UUID_HISTORY; ++i)
    if (u->gu_history[i] == UUID_JUST_CREATED) {
      snprintf (err, errlen, "generation UUIDs: history UUID %zu is the "
                "just-created value", i);
      goto bad;
    }
  if (uuid_is_fresh (u)) {
    if (u->gu_flags & GU_FLAG_CONSISTENT) {
      snprintf (err, errlen, "generation UUIDs: fresh (no current UUID) "
                "but flagged Consistent");
      goto bad;
    }
    if (u->gu_bitmap != 0 || u->gu_history[0] != 0 ||
        u->gu_history[1] != 0) {
      snprintf (err, errlen, "generation UUIDs: fresh (no current UUID) "
                "but with a bitmap or history UUID");
      goto bad;
    }
  }
  return 0;

 bad:
  errno = EPROTO;
  return -1;
}

int
uuid_generate (uint64_t *out)
{
  uint64_t v;

  do {
    uint8_t *p = (uint8_t *) &v;
    size_t got = 0;

    while (got < sizeof v) {
      ssize_t r = getrandom (p + got, sizeof v - got, 0);

      if (r == -1) {
        if (errno == EINTR)
          continue;
        return -1;
      }
      got += (size_t) r;
    }
  } while (!uuid_is_real (v));
  *out = v;
  return 0;
}

void
uuid_init_fresh (struct gen_uuids *u)
{
  memset (u, 0, sizeof *u);
  u->gu_current = UUID_JUST_CREATED;
}

uint64_t
uuid_in_sync_value (const char *resource, uint64_t size)
{
  static const char domain[] = "nbdrepl-in-sync";   /* hashed with its NUL */
  const uint64_t fnv_prime = UINT64_C (0x100000001b3);
  uint64_t h = UINT64_C (0xcbf29ce484222325);      /* FNV-1a offset basis */
  const unsigned char *p;
  size_t i;
  int shift;

  for (i = 0; i < sizeof domain; ++i)
    h = (h ^ (unsigned char) domain[i]) * fnv_prime;
  for (p = (const unsigned char *) resource; *p != '\0'; ++p)
    h = (h ^ *p) * fnv_prime;
  h = (h ^ 0) * fnv_prime;                          /* the name's NUL */
  for (shift = 56; shift >= 0; shift -= 8)          /* size, big-endian */
    h = (h ^ ((size >> shift) & 0xff)) * fnv_prime;

  /* splitmix64's finaliser: spread FNV's weak high bits. */
  h ^= h >> 30;
  h *= UINT64_C (0xbf58476d1ce4e5b9);
  h ^= h >> 27;
  h *= UINT64_C (0x94d049bb133111eb);
  h ^= h >> 31;

  /* Keep clear of the two reserved values. */
  if (!uuid_is_real (h))
    h ^= UINT64_C (0x8000000000000000);
  return h;
}

void
uuid_init_in_sync (struct gen_uuids *u, const char *resource,
                   uint64_t size)
{
  memset (u, 0, sizeof *u);
  u->gu_current = uuid_in_sync_value (resource, size);
  u->gu_flags = GU_FLAG_CONSISTENT;
}

/* Make v (a real UUID) the newest history UUID, unless it is already. */
static void
uuid_history_insert (struct gen_uuids *u, uint64_t v)
{
  size_t i;

  if (!uuid_is_real (v) || v == u->gu_history[0])
    return;
  for (i = UUID_HISTORY - 1; i > 0; --i)
    u->gu_history[i] = u->gu_history[i - 1];
  u->gu_history[0] = v;
}

/* Remember v as the newest earlier generation.  Nothing to remember if
 * v names no generation, or if the tuple still names it elsewhere (the
 * current or bitmap UUID, or already the newest history UUID). */
static void
uuid_push_history (struct gen_uuids *u, uint64_t v)
{
  if (v == u->gu_current || v == u->gu_bitmap)
    return;
  uuid_history_insert (u, v);
}

void
uuid_new_current (struct gen_uuids *u, uint64_t new_uuid)
{
  uint64_t old = uuid_current (u);

  assert (uuid_is_real (new_uuid) && new_uuid != old);
  if (u->gu_bitmap == 0 && uuid_is_real (old))
    u->gu_bitmap = old;
  u->gu_current = new_uuid;
  /* Into the history too, even when the bitmap UUID took it: the
   * history is shared by every peer's view, and the views whose bitmap
   * UUID is not the old one (a connected peer's, which has none) must
   * still show where the new generation came from. */
  uuid_history_insert (u, old);
}

void
uuid_adopt_current (struct gen_uuids *u, uint64_t new_uuid)
{
  uint64_t old = uuid_current (u);

  assert (uuid_is_real (new_uuid));
  u->gu_current = new_uuid;
  uuid_push_history (u, old);
}

void
uuid_force_primary (struct gen_uuids *u, uint64_t new_uuid)
{
  uint64_t old = uuid_current (u), bitmap = u->gu_bitmap;

  assert (uuid_is_real (new_uuid) && new_uuid != old);
  if (uuid_is_consistent (u))
    uuid_new_current (u, new_uuid);
  else {
    /* No bitmap may count from a generation this disk does not hold
     * whole: the older ancestor first, so history stays newest first. */
    u->gu_bitmap = 0;
    u->gu_current = new_uuid;
    uuid_push_history (u, bitmap);
    uuid_push_history (u, old);
  }
  u->gu_flags |= GU_FLAG_CONSISTENT;
  u->gu_flags &= ~GU_FLAG_TENTATIVE;
}

void
uuid_full_sync_start_source (struct gen_uuids *source,
                             const struct gen_uuids *target)
{
  uint64_t from = uuid_is_fresh (target) ? uuid_current (source)
                                         : uuid_current (target);
  uint64_t old = source->gu_bitmap;

  assert (uuid_is_real (from));
  source->gu_bitmap = from;
  uuid_push_history (source, old);
}

void
uuid_resync_start_target (struct gen_uuids *target,
                          const struct gen_uuids *source)
{
  target->gu_flags &= ~GU_FLAG_CONSISTENT;
  if (uuid_is_fresh (target))
    target->gu_current = uuid_current (source);
}

void
uuid_clear_bitmap (struct gen_uuids *u)
{
  uint64_t old = u->gu_bitmap;

  u->gu_bitmap = 0;
  uuid_push_history (u, old);
}

void
uuid_resync_finished_source (struct gen_uuids *source)
{
  uuid_clear_bitmap (source);
  source->gu_flags &= ~GU_FLAG_CRASHED_PRIMARY;
}

void
uuid_resync_finished_target (struct gen_uuids *target,
                             const struct gen_uuids *source)
{
  struct gen_uuids after = *source;
  size_t i;

  uuid_resync_finished_source (&after);
  target->gu_current = after.gu_current;
  target->gu_bitmap = 0;
  for (i = 0; i < UUID_HISTORY; ++i)
    target->gu_history[i] = after.gu_history[i];
  target->gu_flags = (target->gu_flags & GU_FLAG_PRIMARY) |
                     (source->gu_flags & GU_FLAG_TENTATIVE) |
                     GU_FLAG_CONSISTENT;
}
