/* nbdrepl: the on-disk metadata of a node.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * Each node keeps a metadata area, in a file of its own (by default the
 * disk's path + ".meta") or at the end of its backing device.  Every
 * function here takes an fd and the area's base offset, so both work.
 * All offsets below are from the base; everything is in 4096-byte
 * blocks (MD_BLOCK_SIZE); integers are big-endian.
 *
 * LAYOUT
 *
 *   block 0                 superblock, slot A
 *   block 1                 superblock, slot B
 *   block 2                 activity-log ring: al_ring transaction slots
 *                           of txn_blocks blocks each
 *   bm_offset               per peer slot 0..npeers-1, one after the
 *                           other: crc_blocks of page checksums, then
 *                           bm_pages of dirty bitmap; bm_offset is
 *                           right after the ring unless the superblock
 *                           says otherwise (version 2, below: the
 *                           bitmaps moved when the volume grew)
 *
 *   txn_blocks = ceil ((MD_AL_HDR_SIZE + 4 * al_extents) / 4096)
 *   bm_pages   = ceil (ceil (ceil (size / granularity) / 8) / 4096)
 *   crc_blocks = ceil (4 * bm_pages / 4096)
 *
 * md_layout computes these (struct md_layout).
 *
 * RECORDS
 *
 * Superblocks and activity-log transactions are records.  Each starts
 * with the same 32-byte header, and its crc32c covers the whole record
 * (length bytes) computed with the crc field set to 0:
 *
 *   offset size field
 *        0    4 magic      MD_MAGIC
 *        4    2 type       enum md_record_type
 *        6    2 version    MD_FORMAT_VERSION (1); a superblock whose
 *                          bitmaps moved (bm_offset != 0) has
 *                          MD_FORMAT_VERSION_MOVED (2) instead
 *        8    4 crc        crc32c (crc32c.h)
 *       12    4 length     bytes in the record, a multiple of 4096
 *       16    8 seq        sequence number, > 0, per kind of record
 *       24    8 instance   random, != 0, chosen by md_create; the same in
 *                          every record of one area, so a record left
 *                          from an earlier md_create is never taken
 *
 * Superblock (MD_REC_SUPER, length 4096):
 *
 *       32    4 node_id        this node's id, <= REPL_MAX_NODE_ID
 *       36    4 flags          MD_FLAG_*, no others
 *       40    8 size           volume size in bytes, 1..MD_MAX_SIZE
 *       48    4 granularity    bytes per bitmap bit, a power of 2 in
 *                              [MD_MIN_GRANULARITY, MD_MAX_GRANULARITY]
 *       52    4 al_extent_size bytes per AL extent, a power of 2 in
 *                              [MD_MIN_AL_EXTENT_SIZE, MD_MAX_AL_EXTENT_SIZE],
 *                              >= granularity
 *       56    4 al_extents     AL slots, 1..MD_MAX_AL_EXTENTS
 *       60    4 al_ring        transaction slots, 2..MD_MAX_AL_RING
 *       64    4 npeers         peer slots (bitmaps), 0..MD_MAX_PEER_SLOTS
 *       68    4 reserved       0
 *       72    8 current_uuid   generation UUID of the data, != 0
 *       80   16 history[2]     the two previous current UUIDs, newest
 *                              first (0: none)
 *       96  496 peers[31]      per peer slot, 16 bytes:
 *                                0 4 node_id      MD_NO_PEER (slot free) or
 *                                                 <= REPL_MAX_NODE_ID, not
 *                                                 ours, unique
 *                                4 4 flags        MD_PEER_*, no others
 *                                8 8 bitmap_uuid  our current UUID when the
 *                                                 bitmap started to record
 *                                                 what the peer misses
 *                                                 (0: in sync, none)
 *                              entries >= npeers are all zero
 *      592   16 boot_id        the machine's boot id (Linux
 *                              /proc/sys/kernel/random/boot_id) when
 *                              the node last started using the area;
 *                              tells a crash of the process (page cache
 *                              intact) from one of the machine
 *      608    8 primary_since  when the node last became Primary, ms
 *                              since the Unix epoch (0: never); for the
 *                              split-brain policy discard-younger-primary
 *      616    8 bm_offset      version 1: 0, the bitmaps are right after
 *                              the ring.  Version 2: where peer slot 0's
 *                              checksum blocks start, in bytes from the
 *                              base: a multiple of 4096, at or after the
 *                              end of the ring, at most MD_MAX_BM_OFFSET
 *      624 3472 reserved       0
 *
 * Activity-log transaction (MD_REC_AL, length txn_blocks * 4096):
 *
 *       32    4 nslots     == al_extents of the superblock
 *       36    4 nactive    entries that are not MD_AL_EMPTY
 *       40 4*nslots table  per AL slot, an extent number (< the volume's
 *                          extent count, no duplicates) or MD_AL_EMPTY
 *        …            0    up to length
 *
 * Bitmap pages are not records: bit i of the volume (chunk i, of
 * granularity bytes) is bit (i % 8) of byte (i / 8) of the peer's bitmap
 * area, so a 64-bit word of struct bitmap is stored little-endian.  Bits
 * beyond the end of the volume are 0.  The crc32c of each 4096-byte page
 * is in the peer's checksum blocks, big-endian, one uint32 per page.  A
 * page whose checksum does not match (a write torn by a crash, or
 * damage) is read as all dirty, which is always safe: it costs a resync
 * of that page's chunks, never a lost difference.
 *
 * CRASH SAFETY: what is written when, and why any instant is survivable
 *
 * - Superblock: written alternately to slot A and slot B, seq + 1 each
 *   time, then fdatasync; never over the slot holding the current one.
 *   The reader takes the valid slot with the higher seq, so a torn write
 *   leaves the previous superblock in the other slot.
 *
 * - Activity log: transaction n+1 goes into the ring slot after the one
 *   holding n, then fdatasync; the reader takes the valid transaction
 *   with the highest seq.  A torn transaction is simply not valid and
 *   the previous one counts: it is still in its own slot, since a ring
 *   write never touches the slot of the last durable transaction.
 *
 * - Data: a write to an extent starts only after a transaction that has
 *   the extent active is durable (activity-log.h).  After a crash, every
 *   write that may have reached one node and not another lies in an
 *   extent of the transaction the reader finds, and the engine marks
 *   those extents dirty for every peer (al_replay).
 *
 * - Leaving the activity log: before a transaction without extent E is
 *   written, (1) the writes to E have completed (its in-flight count is
 *   0), (2) the backing store is flushed, so they are durable there, and
 *   (3) the bitmap pages covering E are written and synced
 *   (md_write_bitmap).  Then the bits that record what each peer misses
 *   in E are on disk before the log forgets E.  A crash before the
 *   transaction is durable leaves E in the log; after, the bitmap has it.
 *
 * - Bitmap pages of extents still in the log can be stale or torn on
 *   disk: the log covers them.  Pages are written before their checksum
 *   blocks, both before one fdatasync; either order of arrival leaves a
 *   mismatch at worst, read as all dirty.
 *
 * - Growing the volume (md_grow, `replctl resize`): the bitmaps get
 *   longer, so every peer slot moves.  They are copied, as they are on
 *   disk (pages read as all dirty stay so), into a region that does not
 *   overlap the current one: right after the ring if the new bitmaps fit
 *   in front of the current ones, otherwise right after the current
 *   area's end; the new chunks are clear, or set for the peer slots the
 *   caller names.  Then an fdatasync, then the superblock with the new
 *   size and bm_offset goes into the slot not holding the current one,
 *   then an fdatasync: that write is the commit.  A crash before it
 *   leaves the current superblock, which still points at the old
 *   bitmaps, untouched (the half-written copy lies outside its area); a
 *   torn superblock write is not valid and the other slot is taken; a
 *   crash after it finds the new size and the copied bitmaps.  The
 *   activity log is not touched: its extents are numbered from the
 *   start of the volume and stay valid when the volume grows.  Bitmaps
 *   of extents in the log may be stale on disk when copied, as before:
 *   the log still covers them.
 *
 * VERSIONS AND COMPATIBILITY
 *
 * Version 1 is the format as first written.  Version 2 differs only in
 * one field of the superblock (bm_offset); this program reads both and
 * writes version 1 records except for a superblock whose bitmaps moved.
 * Metadata that never grew stays version 1, readable by every release;
 * metadata that grew (its bitmaps not after the ring) is refused by a
 * program of format 1 with "format version 2, this program knows 1",
 * never misread.  A version-1 superblock with a non-zero bm_offset, or a
 * version-2 one with a zero one, is invalid.  An area whose volume grew
 * is longer than md_layout of the size alone says: its end is bm_offset
 * plus the peer slots, and the bytes between the ring and bm_offset are
 * unused.
 *
 * - md_create zeroes both superblock slots (synced) before writing
 *   anything else, and writes superblock A last: until then there is no
 *   valid superblock, so an interrupted md_create is seen as "no
 *   metadata", never as a mix of old and new.
 */
#ifndef NBDREPL_METADATA_H
#define NBDREPL_METADATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "bitmap.h"
#include "repl-config.h"

#define MD_MAGIC              UINT32_C (0x4e42524d)   /* "NBRM" */
#define MD_FORMAT_VERSION     1
#define MD_FORMAT_VERSION_MOVED 2       /* a superblock with bm_offset */
#define MD_BLOCK_SIZE         4096
#define MD_RECORD_HDR_SIZE    32
#define MD_AL_HDR_SIZE        40

enum md_record_type {
  MD_REC_SUPER = 1,
  MD_REC_AL = 2,
};

#define MD_MAX_SIZE             (UINT64_C (1) << 60)   /* 1 EiB */
#define MD_MAX_BM_OFFSET        (UINT64_C (1) << 61)
#define MD_MIN_GRANULARITY      512
#define MD_MAX_GRANULARITY      (1u << 20)
#define MD_MIN_AL_EXTENT_SIZE   (64u << 10)
#define MD_MAX_AL_EXTENT_SIZE   (1u << 30)
#define MD_MAX_AL_EXTENTS       65536
#define MD_MAX_AL_RING          64
#define MD_MAX_PEER_SLOTS       31                     /* every other id:
                                                   >= REPL_MAX_NODE_ID */
#define MD_UUID_HISTORY         2
#define MD_BOOT_ID_SIZE         16
#define MD_NO_PEER              UINT32_MAX
#define MD_AL_EMPTY             UINT32_MAX              /* = AL_EMPTY */

#define MD_DEFAULT_GRANULARITY    4096
#define MD_DEFAULT_AL_EXTENT_SIZE (4u << 20)
#define MD_DEFAULT_AL_EXTENTS     1024                  /* 4 GiB hot */
#define MD_DEFAULT_AL_RING        4
#define MD_DEFAULT_PEER_SLOTS     (REPL_MAX_NODES - 1)

/* Superblock flags. */
#define MD_FLAG_CONSISTENT      0x0001  /* the data is whole: not a resync
                                           target interrupted midway */
#define MD_FLAG_WAS_UPTODATE    0x0002  /* the disk was UpToDate when the
                                           flag was last written */
#define MD_FLAG_PRIMARY         0x0004  /* the node is Primary: set before
                                           its first write as Primary,
                                           cleared when it is demoted */
#define MD_FLAG_CRASHED_PRIMARY 0x0008  /* found PRIMARY without CLEAN at
                                           start: the AL extents must be
                                           resynced to every peer; cleared
                                           once they are */
#define MD_FLAG_CLEAN           0x0010  /* stopped cleanly: every bitmap
                                           page written, the AL needs no
                                           replay; cleared when a node
                                           starts using the metadata */
#define MD_FLAG_TENTATIVE       0x0020  /* no write of the current
                                           generation is known to have been
                                           acknowledged to a client
                                           (GU_FLAG_TENTATIVE in
                                           uuid-compare.h) */
#define MD_FLAGS_KNOWN          0x003f

/* Peer slot flags. */
#define MD_PEER_OUTDATED        0x0001  /* the peer missed writes while
                                           we were Primary: its disk is
                                           Outdated */
#define MD_PEER_FLAGS_KNOWN     0x0001

/* The shape of an area: everything md_layout needs. */
struct md_geometry {
  uint64_t mg_size;             /* volume size in bytes */
  uint32_t mg_granularity;      /* bytes per bitmap bit */
  uint32_t mg_al_extent_size;   /* bytes per activity-log extent */
  uint32_t mg_al_extents;       /* activity-log slots */
  uint32_t mg_al_ring;          /* activity-log transaction slots */
  uint32_t mg_npeers;           /* peer slots */
  uint64_t mg_bm_offset;        /* where the bitmaps are; 0: right after
                                   the ring (the superblock's bm_offset) */
};

/* Where things are, in bytes from the base offset. */
struct md_layout {
  uint64_t ml_al_offset;        /* first transaction slot */
  uint32_t ml_txn_size;         /* bytes per transaction (and slot) */
  uint64_t ml_bm_offset;        /* peer slot 0's checksum blocks */
  uint64_t ml_bm_nbits;         /* chunks in the volume */
  uint64_t ml_bm_pages;         /* bitmap pages per peer */
  uint64_t ml_crc_blocks;       /* checksum blocks per peer */
  uint64_t ml_peer_size;        /* bytes per peer slot */
  uint64_t ml_total;            /* bytes in the whole area */
  uint32_t ml_vol_extents;      /* AL extents in the volume */
};

struct md_peer {
  uint32_t mp_node_id;          /* MD_NO_PEER: slot free */
  uint32_t mp_flags;            /* MD_PEER_* */
  uint64_t mp_bitmap_uuid;
};

struct md_super {
  uint64_t ms_seq;
  uint64_t ms_instance;
  uint32_t ms_node_id;
  uint32_t ms_flags;            /* MD_FLAG_* */
  struct md_geometry ms_geom;
  uint64_t ms_current_uuid;
  uint64_t ms_history_uuid[MD_UUID_HISTORY];
  struct md_peer ms_peers[MD_MAX_PEER_SLOTS];   /* [0..mg_npeers) used */
  uint8_t ms_boot_id[MD_BOOT_ID_SIZE];          /* any bytes; zero: unknown */
  uint64_t ms_primary_since;    /* ms since the epoch; 0: never Primary */
};

/* What md_create writes. */
struct md_params {
  uint32_t pa_node_id;
  struct md_geometry pa_geom;
  uint32_t pa_peer_ids[MD_MAX_PEER_SLOTS];      /* [0..mg_npeers): the
                                                   node id per peer slot,
                                                   or MD_NO_PEER */
  bool pa_in_sync;              /* the disks are known identical: every
                                   bitmap clear, flags CONSISTENT and
                                   WAS_UPTODATE; otherwise every bitmap
                                   set and no flag but CLEAN */
  uint64_t pa_current_uuid;     /* 0: a random one */
};

#define MD_HANDLE_MAGIC UINT32_C (0x4d444841)   /* "MDHA" */

/* An open metadata area.  md_super is what is on disk; change a copy and
 * give it to md_write_super.  Not thread-safe: one call at a time. */
struct md {
  uint32_t md_magic;            /* MD_HANDLE_MAGIC while open */
  int md_fd;                    /* the caller's; not closed here */
  uint64_t md_base;
  struct md_super md_super;
  struct md_layout md_layout;
  unsigned md_super_slot;       /* 0 (A) or 1 (B): holds md_super */
  uint64_t md_other_seq;        /* the other slot's seq, 0 if invalid */
  char md_other_why[128];       /* why the other slot is invalid, or "" */
  uint64_t md_al_seq;           /* last durable transaction */
  uint32_t md_al_slot;          /* its ring slot */
  uint32_t md_al_valid;         /* valid transactions found by md_load */
  uint32_t *md_al_table;        /* its table, mg_al_extents entries */
  uint32_t *md_crcs;            /* page checksums, bm_pages per peer */
};

/* Defaults: node id, size, granularity 4 KiB, AL 1024 extents of 4 MiB,
 * a ring of 4, MD_DEFAULT_PEER_SLOTS free peer slots, not in sync. */
extern void md_params_init (struct md_params *p, uint32_t node_id,
                            uint64_t size);

/* Check a geometry (the ranges in the superblock table above) and work
 * out the layout.  Returns 0, or -1 with errno EINVAL and a message. */
extern int md_layout (const struct md_geometry *g, struct md_layout *l,
                      char *err, size_t errlen);

/* Metadata at the end of a device of dev_size bytes: g->mg_size is
 * ignored and set to the volume size left in front of the area, *base to
 * where the area starts (4096-aligned, base + layout total <= dev_size).
 * The same dev_size always gives the same answer.  Returns 0, or -1 with
 * errno ENOSPC (device too small) or EINVAL, and a message. */
extern int md_internal_place (uint64_t dev_size, struct md_geometry *g,
                              uint64_t *base, char *err, size_t errlen);

/* Superblock record <-> struct.  Decoding checks every field (see the
 * table above) and fails with errno EINVAL and a message naming the
 * field and the value, or "checksum mismatch" / "bad magic". */
extern int md_encode_super (const struct md_super *sb,
                            uint8_t out[MD_BLOCK_SIZE],
                            char *err, size_t errlen);
extern int md_decode_super (const uint8_t in[MD_BLOCK_SIZE],
                            struct md_super *sb, char *err, size_t errlen);

/* Activity-log transaction record <-> table.  out/in are l->ml_txn_size
 * bytes; table has g->mg_al_extents entries. */
extern int md_encode_al (const struct md_geometry *g,
                         const struct md_layout *l, uint64_t instance,
                         uint64_t seq, const uint32_t *table, uint8_t *out,
                         char *err, size_t errlen);
extern int md_decode_al (const struct md_geometry *g,
                         const struct md_layout *l, uint64_t instance,
                         const uint8_t *in, uint64_t *seq, uint32_t *table,
                         char *err, size_t errlen);

/* Initialise the area at base in fd: a new instance, superblock A with
 * seq 1, transaction 1 with an empty table, every bitmap clear or set.
 * Refuses (EEXIST) when either superblock slot holds a record with our
 * magic, valid or not, unless force.  On success *md is open as after
 * md_load.  Returns 0, or -1 with errno and a message. */
extern int md_create (struct md *md, int fd, uint64_t base,
                      const struct md_params *p, bool force,
                      char *err, size_t errlen);

/* Read and check the area at base in fd: both superblock slots (the
 * valid one with the higher seq wins; both must belong to the same
 * instance), the activity-log ring (the valid transaction with the
 * highest seq wins), the page checksums.  node_id and size are checked
 * against the superblock unless MD_ANY_NODE / 0.  Returns 0, or -1 with
 * errno (EINVAL for bad metadata, an I/O errno) and a message such as
 *   "no valid superblock: slot A: checksum mismatch (stored 0x1234abcd,
 *    computed 0x5678ef01); slot B: bad magic 0x00000000"
 *   "volume size mismatch: metadata says 1073741824 bytes, disk has
 *    2147483648" */
#define MD_ANY_NODE UINT32_MAX
extern int md_load (struct md *md, int fd, uint64_t base, uint32_t node_id,
                    uint64_t size, char *err, size_t errlen);

/* The node id and volume size checks of md_load, on their own. */
extern int md_check (const struct md *md, uint32_t node_id, uint64_t size,
                     char *err, size_t errlen);

/* Release an area opened by md_create or md_load; errno is kept. */
extern void md_close (struct md *md);

/* Write sb (checked like a decoded one; the geometry, node id and
 * instance must not change) with seq + 1 into the other slot and
 * fdatasync.  On success md->md_super = *sb with the new seq. */
extern int md_write_super (struct md *md, const struct md_super *sb,
                           char *err, size_t errlen);

/* Grow the volume to size bytes (> the current size, a valid geometry
 * with it), crash-safely (CRASH SAFETY above): the bitmaps are copied to
 * their new place, the new chunks set in the peer slots whose bit is in
 * mark_slots (bit i: slot i) and clear in the others, then the
 * superblock with the new size and bm_offset is written and synced.  On
 * success md describes the grown area; on failure it is unchanged and
 * the old size is still the one on disk.  Not for metadata at the end
 * of a device (md_internal_place): the area would have to move.  Returns
 * 0, or -1 with errno (EINVAL: the size; an I/O errno) and a message. */
extern int md_grow (struct md *md, uint64_t size, uint32_t mark_slots,
                    char *err, size_t errlen);

/* Write transaction seq (> the last one) holding table (mg_al_extents
 * entries) into the next ring slot and fdatasync. */
extern int md_write_al (struct md *md, uint64_t seq, const uint32_t *table,
                        char *err, size_t errlen);

/* The peer slot for node_id, or -1.  MD_NO_PEER finds a free slot. */
extern int md_peer_slot (const struct md *md, uint32_t node_id);

/* The bitmap pages [*first, *first + *count) holding the bits of the
 * byte range [offset, offset+len); *count 0 when it is empty. */
extern void md_bitmap_pages (const struct md *md, uint64_t offset,
                             uint64_t len, uint64_t *first, uint64_t *count);

/* Write pages [first, first+count) of peer slot `slot` from bm (a
 * bitmap of the metadata's size and granularity), then their checksum
 * blocks, then fdatasync. */
extern int md_write_bitmap (struct md *md, unsigned slot,
                            const struct bitmap *bm, uint64_t first,
                            uint64_t count, char *err, size_t errlen);

/* Read pages [first, first+count) of peer slot `slot` into bm.  A page
 * whose checksum does not match is read as all set, and counted in
 * *nbad (if not NULL). */
extern int md_read_bitmap (struct md *md, unsigned slot, struct bitmap *bm,
                           uint64_t first, uint64_t count, uint64_t *nbad,
                           char *err, size_t errlen);

/* A description of everything, for `replctl dump-md`.  Reads every
 * bitmap to count what is dirty. */
extern int md_dump (struct md *md, FILE *fp, char *err, size_t errlen);

#endif /* NBDREPL_METADATA_H */
