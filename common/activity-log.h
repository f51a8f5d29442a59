/* nbdrepl: the activity log, in memory.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * The volume is cut into extents of al_extent_size bytes (4 MiB by
 * default).  The activity log (AL) is a table of al_nslots slots (1024
 * by default: 4 GiB of "hot" volume), each empty or holding one extent
 * number.  A write may only reach the disk once every extent it touches
 * is in the table AND a transaction recording that table is durable in
 * the metadata (metadata.h); after a crash of the primary, exactly the
 * extents of the last durable transaction may differ between the nodes,
 * and are resynced.  A synchronous metadata write is thus needed only
 * when a write touches an extent that is not active yet; the writes that
 * follow to the same extent go straight on.
 *
 * Each active extent has a count of writes in flight.  Only an extent
 * with none may be evicted to make room for another; eviction order is
 * least recently used.  Empty slots are used before anything is evicted.
 *
 * Transactions are sequence-numbered and written one at a time (group
 * commit): al_begin records which transaction must be durable before the
 * write may go on; whoever finds none in flight takes a snapshot
 * (al_snapshot), writes it (md_write_al) with no lock held, and reports
 * back (al_committed or al_txn_failed).  Every activation made before a
 * snapshot is in it, so one transaction covers all the writers that
 * queued up behind the previous one.  The caller's loop, under its lock:
 *
 *   while ((r = al_begin (al, off, len, &need)) == AL_BUSY)
 *     wait for al_complete to free a slot;
 *   while (!al_is_durable (al, need)) {
 *     if (al_txn_in_flight (al))
 *       wait for the writer of the transaction in flight;
 *     else {
 *       al_snapshot (al, table, drops, &ndrops, &seq);
 *       unlock; flush the data of the dropped extents and write their
 *       bitmap pages (md_write_bitmap); md_write_al (table, seq); lock;
 *       al_committed (al, seq) or al_txn_failed (al); wake the waiters;
 *     }
 *   }
 *   unlock; write the data; lock; al_complete (al, off, len); unlock.
 *
 * Pure and thread-free: no I/O, no locks; the engine locks around every
 * call.
 */
#ifndef NBDREPL_ACTIVITY_LOG_H
#define NBDREPL_ACTIVITY_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bitmap.h"

#define AL_EMPTY      UINT32_MAX       /* a slot holding no extent */
#define AL_NIL        UINT32_MAX       /* no slot (list and hash links) */
#define AL_MAX_SLOTS  65536
#define AL_MAGIC      UINT32_C (0x414c4f47)   /* "ALOG" */

struct al_slot {
  uint32_t as_extent;           /* AL_EMPTY or an extent number */
  uint32_t as_refs;             /* writes in flight to the extent */
  uint64_t as_seq;              /* first transaction that records the
                                   extent; durable iff <= al_seq_durable */
  uint32_t as_prev, as_next;    /* idle list (as_refs == 0), or AL_NIL */
  uint32_t as_hnext;            /* next slot in the same hash chain */
};

struct al_drop {
  uint32_t ad_extent;           /* left the table; may still be recorded
                                   in a transaction on disk */
  bool ad_in_snapshot;          /* the snapshot in flight drops it */
};

/* Room al_snapshot needs for its drops: extents of the last durable
 * transaction and of the one in flight. */
#define AL_MAX_DROPS(nslots) (2 * (size_t) (nslots))

struct activity_log {
  uint32_t al_magic;            /* AL_MAGIC while initialised */
  uint32_t al_nslots;
  unsigned al_shift;            /* log2 (extent size) */
  uint64_t al_size;             /* volume size in bytes */
  uint32_t al_nextents;         /* extents in the volume */
  struct al_slot *al_slots;
  uint32_t *al_hash;            /* heads of the hash chains, or AL_NIL */
  uint32_t al_hash_mask;
  uint32_t al_idle_head;        /* least recently used idle slot (empty
                                   slots first), or AL_NIL */
  uint32_t al_idle_tail;        /* most recently used idle slot */
  uint32_t al_nidle;            /* slots with as_refs == 0 */
  uint32_t al_nactive;          /* slots holding an extent */
  struct al_drop *al_drops;     /* AL_MAX_DROPS (al_nslots) entries */
  uint32_t al_ndrops;
  uint64_t al_seq_taken;        /* last snapshot handed out */
  uint64_t al_seq_durable;      /* last transaction known durable */
  bool al_in_flight;            /* a snapshot is being written */
  bool al_failed;               /* a transaction failed: the log is in
                                   doubt, al_begin refuses (EIO) */
};

enum al_begin_result {
  AL_READY = 0,                 /* references taken; every extent is in a
                                   durable transaction: write now */
  AL_NEED_TXN = 1,              /* references taken; wait until
                                   al_is_durable (need_seq), writing a
                                   transaction if none is in flight */
  AL_BUSY = 2,                  /* nothing taken: a new extent needs a
                                   slot and every slot has writes in
                                   flight; retry after an al_complete */
};

/* An empty log of nslots slots (1..AL_MAX_SLOTS) of extent_size bytes
 * (a power of 2 >= 4096) over a volume of size bytes (> 0, at most
 * UINT32_MAX - 1 extents).  The first transaction will have sequence
 * number 1, unless al_load says otherwise.  Returns 0, or -1 with errno
 * EINVAL or ENOMEM. */
extern int al_init (struct activity_log *al, uint32_t nslots,
                    uint32_t extent_size, uint64_t size);
extern void al_free (struct activity_log *al);

/* The volume grew to size bytes (>= al_size, at most UINT32_MAX - 1
 * extents): extents beyond the old end may be used from now on.  Nothing
 * else changes.  Returns 0, or -1 with errno EINVAL (the log unchanged). */
extern int al_grow (struct activity_log *al, uint64_t size);

/* Restore the table of a transaction read back from the metadata:
 * table[0..al_nslots) of extent numbers or AL_EMPTY (in any order,
 * without duplicates, each < al_nextents), durable at sequence number
 * seq.  Every extent is idle.  Only on a log with nothing in flight (just
 * initialised).  Returns 0, or -1 with errno EINVAL (the log unchanged). */
extern int al_load (struct activity_log *al, const uint32_t *table,
                    size_t n, uint64_t seq);

/* After a crash: mark every active extent, clipped to the volume, in bm
 * (a bitmap of the same volume size; one per peer).  Returns the number
 * of active extents. */
extern uint32_t al_replay (const struct activity_log *al, struct bitmap *bm);

/* The active extents, in slot order, into out[0..max); returns how many
 * there are (which may exceed max). */
extern uint32_t al_active_extents (const struct activity_log *al,
                                   uint32_t *out, size_t max);

/* Extents [*first, *last] that the byte range [offset, offset+len)
 * touches; false when len is 0 or the range starts beyond the volume. */
extern bool al_extent_span (const struct activity_log *al, uint64_t offset,
                            uint64_t len, uint32_t *first, uint32_t *last);

/* The byte range of extent e, clipped to the volume. */
extern void al_extent_range (const struct activity_log *al, uint32_t e,
                             uint64_t *offset, uint64_t *len);

/* Take a reference on every extent of [offset, offset+len) for a write,
 * activating those that are not active (all or nothing).  Returns
 * AL_READY, AL_NEED_TXN with *need_seq set, AL_BUSY, or -1 with errno
 * EINVAL (len 0 or the range not inside the volume), E2BIG (the range
 * spans more extents than the log has slots) or EIO (after
 * al_txn_failed). */
extern int al_begin (struct activity_log *al, uint64_t offset, uint64_t len,
                     uint64_t *need_seq);

/* The same, leaving at least reserve slots without references for
 * others (AL_BUSY until that many stay, E2BIG if the range spans more
 * than the slots minus reserve): allow-two-primaries keeps room for the
 * other Primary's writes, which must never wait for room that only our
 * own writes in flight can give back (two-primaries.c). */
extern int al_begin_reserve (struct activity_log *al, uint64_t offset,
                             uint64_t len, uint32_t reserve,
                             uint64_t *need_seq);

/* Drop the references al_begin took for the same range (whether or not
 * the write succeeded).  Returns true if some extent became idle, so
 * that a writer waiting after AL_BUSY may retry. */
extern bool al_complete (struct activity_log *al, uint64_t offset,
                         uint64_t len);

/* Is the transaction need_seq (from al_begin) durable? */
extern bool al_is_durable (const struct activity_log *al, uint64_t need_seq);

/* Is a snapshot being written? */
extern bool al_txn_in_flight (const struct activity_log *al);

/* Start a transaction: table[0..al_nslots) gets the extent of every slot
 * (AL_EMPTY for empty ones), drops[0..*ndrops) the extents that left the
 * table since the last durable transaction (drops has room for
 * AL_MAX_DROPS (al_nslots)), *seq the transaction's sequence number.
 * Before writing the transaction the caller must make the data of the
 * dropped extents durable and write their bitmap pages.  Returns 0, or
 * -1 with errno EBUSY if a snapshot is in flight already, or EIO after
 * al_txn_failed. */
extern int al_snapshot (struct activity_log *al, uint32_t *table,
                        uint32_t *drops, size_t *ndrops, uint64_t *seq);

/* The transaction seq (the one in flight) is durable. */
extern void al_committed (struct activity_log *al, uint64_t seq);

/* The transaction in flight could not be written.  What is on disk is
 * now in doubt (the old transaction, the new one, or neither if the ring
 * itself is failing), so the log stops: al_begin and al_snapshot fail
 * with EIO from now on, as DRBD detaches a disk whose metadata cannot
 * be written.  al_complete still works for the writes in flight. */
extern void al_txn_failed (struct activity_log *al);

/* Number of active extents. */
extern uint32_t al_nactive (const struct activity_log *al);

#endif /* NBDREPL_ACTIVITY_LOG_H */
