/* nbdrepl: the replication wire format.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * Every message between two nodes is a fixed 32-byte big-endian header,
 * optionally followed by a payload of exactly `length` bytes:
 *
 *   offset size field
 *        0    4 magic     REPL_MAGIC
 *        4    2 type      enum repl_msg_type
 *        6    2 flags     REPL_FLAG_* (only those valid for the type)
 *        8    4 length    payload bytes that follow, <= REPL_MAX_PAYLOAD
 *                         (+ REPL_DIGEST_SIZE with flag DIGEST)
 *       12    4 count     bytes of the volume affected (WRITE, TRIM, ZERO,
 *                         RESYNC_DATA); 0 for every other type
 *       16    8 seq       sender's sequence number (ACK: the acknowledged one)
 *       24    8 offset    byte offset in the volume (RESYNC_START: bytes to
 *                         resync; RESIZE, RESIZE_QUERY: the new volume
 *                         size; RESIZE_REPLY: the largest size the
 *                         sender can hold); 0 where unused
 *
 * Host-order structs are converted at the edge only, by the functions
 * below; decoders check every field and never trust the peer.
 */
#ifndef NBDREPL_WIRE_H
#define NBDREPL_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define REPL_MAGIC          UINT32_C (0x4e425250)   /* "NBRP" */
#define REPL_PROTO_VERSION  5
#define REPL_PEER_ID_NONE   UINT32_MAX  /* HELLO peer_id: refused */
#define REPL_HDR_SIZE       32
#define REPL_MAX_PAYLOAD    (4u << 20)              /* 4 MiB */
#define REPL_RESOURCE_MAX   64                      /* bytes incl. NUL */

/* Message types.  The table in wire.c says, for each, which flags are
 * allowed and whether it carries a payload. */
enum repl_msg_type {
  REPL_MSG_HELLO = 1,         /* payload: the identity part of struct
                                 repl_hello (REPL_HELLO_SIZE bytes); first
                                 message each way on a new connection,
                                 before authentication: says nothing of
                                 the sender's data */
  REPL_MSG_PING = 2,          /* keepalive, sent by both sides when idle */
  REPL_MSG_PONG = 3,          /* reserved; accepted and ignored */
  REPL_MSG_WRITE = 4,         /* primary→secondary: payload = count bytes of
                                 data at offset; flag FUA */
  REPL_MSG_TRIM = 5,          /* no payload; count bytes at offset; flag FUA */
  REPL_MSG_ZERO = 6,          /* no payload; flags FUA, MAY_TRIM */
  REPL_MSG_FLUSH = 7,         /* make every earlier message durable */
  REPL_MSG_RESYNC_START = 8,  /* offset = bytes the sync source will send */
  REPL_MSG_RESYNC_DATA = 9,   /* like WRITE; offset aligned to the bitmap
                                 granularity; flag ZEROES */
  REPL_MSG_RESYNC_DONE = 10,  /* the sync target is now UpToDate */
  REPL_MSG_ACK = 11,          /* secondary→primary: every message with a
                                 sequence number <= seq is on the
                                 secondary's disk; flag RECEIVED: only
                                 received so far */
  REPL_MSG_NACK = 12,         /* message seq failed on the secondary's disk */
  REPL_MSG_UUIDS = 13,        /* payload: REPL_UUIDS_SIZE bytes, the
                                 sender's generation UUIDs, sent when they
                                 change while connected */
  REPL_MSG_BITMAP = 14,       /* sync target→source at connect: payload =
                                 bytes of the target's bitmap for the
                                 source (what it may lack), starting at
                                 byte `offset` of the bitmap; length > 0,
                                 a multiple of 8 */
  REPL_MSG_BITMAP_DONE = 15,  /* the target's bitmap is all sent */
  REPL_MSG_VERIFY_REQ = 16,   /* primary→secondary, sequenced: digest the
                                 count bytes at offset (aligned like
                                 RESYNC_DATA); no payload */
  REPL_MSG_VERIFY_REPLY = 17, /* the answer, unsequenced, seq/offset/count
                                 of the request; payload: 8 bytes of
                                 digest per bitmap chunk */
  REPL_MSG_GOODBYE = 18,      /* the sender is shutting down; the
                                 connection closing next is no fault */
  REPL_MSG_STATE = 19,        /* the sender's role changed: offset = enum
                                 repl_role, seq = enum repl_disk_state;
                                 count = 0, or with allow-two-primaries
                                 beside diskless nodes (server/two-
                                 primaries.c) a bit mask of node ids:
                                 from a storage Primary to a storage
                                 node, the diskless nodes that write
                                 through it (their ROUTED came); from a
                                 storage Secondary to a diskless node,
                                 the Primaries it follows (sent after
                                 the handshake and whenever they
                                 change: storage Primaries, and
                                 diskless Primaries other than the
                                 receiver that write straight to the
                                 storage nodes); from a diskless
                                 Primary to any node, where its writes
                                 go (server/diskless-primaries.c): 0
                                 straight to the storage nodes, the bit
                                 of its own id while it decides (its
                                 promotion), the bit of another
                                 diskless Primary through which they
                                 go; no payload */
  /* From a diskless primary to the storage nodes it writes to: */
  REPL_MSG_AWAY = 20,         /* unsequenced; offset = bit mask of the node
                                 ids that the sender's following writes
                                 will not reach directly (the receiver
                                 forwards them to those it is connected
                                 to, and marks them out of sync for the
                                 others); payload: 8 bytes, a new current
                                 UUID to start (the first write with a
                                 node away), or 0 */
  REPL_MSG_OUT_OF_SYNC = 21,  /* sequenced; the count bytes at offset may
                                 be missing on the node ids of the payload
                                 (8 bytes, a bit mask): a write to them
                                 failed in flight; or, from a storage
                                 node right after a write it forwarded,
                                 the away nodes it could not forward
                                 the write to (it marked them) */
  REPL_MSG_READ_REQ = 22,     /* sequenced; read count bytes at offset */
  REPL_MSG_READ_REPLY = 23,   /* unsequenced; seq, offset, count of the
                                 request; payload: the data (length ==
                                 count), or none with flag ERROR */
  /* Right after the HELLOs, when both have feature AUTH: */
  REPL_MSG_AUTH_CHALLENGE = 24, /* payload: REPL_AUTH_SIZE random bytes */
  REPL_MSG_AUTH_RESPONSE = 25,  /* payload: HMAC-SHA256 (secret, the
                                 peer's challenge || our node id || the
                                 peer's node id, each 4 big-endian
                                 bytes || the resource name) */
  REPL_MSG_HELLO_STATE = 26,  /* unsequenced; payload: the state part of
                                 struct repl_hello (REPL_HELLO_STATE_SIZE
                                 bytes); sent once each way after the
                                 HELLOs and the authentication (secret,
                                 or TLS with certificates), before any
                                 other message */
  /* Online grow (`replctl resize`, server/resize.c), from the node that
   * runs it (the Primary, or an UpToDate node when none is) to each
   * connected storage peer.  A node of an older release knows none of
   * the three: it ends the connection at the RESIZE_QUERY as an unknown
   * type, the query goes unanswered and the resize is refused. */
  REPL_MSG_RESIZE_QUERY = 27, /* unsequenced, no payload; seq = a query
                                 number (> 0), offset = the size asked
                                 for, or 0 for "as large as you can" */
  REPL_MSG_RESIZE_REPLY = 28, /* unsequenced, no payload; seq = the
                                 query's; offset = the largest volume
                                 size the sender's
                                 backing store holds now (>= its size);
                                 flag ERROR: it cannot grow at all (its
                                 log says why), offset = its size */
  REPL_MSG_RESIZE = 29,       /* sequenced, between the writes before it
                                 and after it; offset = the new size (>
                                 the receiver's, <= MD_MAX_SIZE); payload
                                 8 bytes: the size it grows from, which
                                 must be the receiver's (or the receiver
                                 already has the new size: nothing to
                                 do); flag ASSUME_CLEAN: the new area is
                                 not marked out of sync.  Only in
                                 Established.  The receiver grows its
                                 metadata and its volume before the ACK;
                                 if it cannot, it ends the connection
                                 (and refuses the next one until its
                                 backing store is large enough) */
  /* A storage node that a peer (no storage Primary) is about to resync,
   * and the diskless nodes it is connected to (forward.c, diskless.c): */
  REPL_MSG_SYNC_FENCE = 30,   /* unsequenced, storage→diskless; offset = a
                                 token, seq = the id of the storage node
                                 that is to resync the sender.  The
                                 receiver stops writing to the sender
                                 directly (its following writes reach it
                                 through its sync source: AWAY) until the
                                 sender reports UUIDS again, and answers
                                 SYNC_FENCED once none of its writes that
                                 went to the sender is in flight */
  REPL_MSG_SYNC_FENCED = 31,  /* unsequenced, diskless→storage; offset =
                                 the token of the SYNC_FENCE; flag ERROR:
                                 refused (a diskless Primary that does
                                 not write to that sync source itself:
                                 it would resync stale data) */
  /* allow-two-primaries with diskless nodes (server/diskless.c,
   * server/role.c): */
  REPL_MSG_ROUTED = 32,       /* unsequenced, diskless→storage or
                                 diskless→diskless; offset =
                                 how many STATEs saying Primary the
                                 sender has taken from the receiver on
                                 this connection (never more than the
                                 receiver sent).  The answer to such a
                                 STATE: every write of the sender from
                                 now on goes to the receiver only (AWAY
                                 names the other storage nodes, which
                                 the receiver forwards it to), and none
                                 of its writes that went to another
                                 storage node directly is in flight.
                                 Between diskless nodes the answer to
                                 a STATE of a diskless node promoting
                                 (count: its own bit), whose flags say
                                 what the sender is then: WRITER (a
                                 Primary writing straight to the
                                 storage nodes), PROMOTING (promoting
                                 too), THROUGH (a Primary writing
                                 through another node), or none (a
                                 Secondary) */
};
#define REPL_MSG_TYPE_MAX 32
#define REPL_AUTH_SIZE 32

/* HELLO features. */
#define REPL_FEATURE_AUTH   0x00000001  /* the sender has a secret and
                                           authenticates (peer-auth.c) */
#define REPL_FEATURE_TWO_PRIMARIES 0x00000002 /* the sender's configuration
                                           has allow-two-primaries: true;
                                           both ends must agree */
#define REPL_FEATURES_KNOWN (REPL_FEATURE_AUTH | REPL_FEATURE_TWO_PRIMARIES)

#define REPL_FLAG_FUA       0x0001
#define REPL_FLAG_MAY_TRIM  0x0002
#define REPL_FLAG_RECEIVED  0x0004  /* ACK: received, not yet applied
                                       (protocol B); the sender keeps the
                                       messages until the plain ACK */
#define REPL_FLAG_ZEROES    0x0008  /* RESYNC_DATA: the count bytes are
                                       all zero and not sent (length 0) */
#define REPL_FLAG_ERROR     0x0010  /* READ_REPLY: the read failed; no
                                       payload.  SYNC_FENCED: refused */
#define REPL_FLAG_DIGEST    0x0020  /* WRITE, RESYNC_DATA: the payload is
                                       the count bytes of data, then their
                                       crc32c, 4 bytes big-endian
                                       (data-integrity: crc32c) */
#define REPL_FLAG_SYNC_PAUSED 0x0040 /* STATE: the sender's administrator
                                       paused the resync between us
                                       (replctl pause-sync) */
#define REPL_FLAG_ASSUME_CLEAN 0x0080 /* RESIZE: replctl resize
                                       --assume-clean */
#define REPL_FLAG_WRITER    0x0100  /* ROUTED between diskless nodes */
#define REPL_FLAG_PROMOTING 0x0200  /* ... (the meanings: ROUTED above) */
#define REPL_FLAG_THROUGH   0x0400  /* ... */
#define REPL_DIGEST_SIZE    4

struct repl_hdr {
  uint32_t magic;
  uint16_t type;
  uint16_t flags;
  uint32_t length;
  uint32_t count;
  uint64_t seq;
  uint64_t offset;
};

/* Roles and disk states, as carried in HELLO_STATE and STATE. */
enum repl_role {
  REPL_ROLE_SECONDARY = 0,
  REPL_ROLE_PRIMARY = 1,
};
#define REPL_ROLE_MAX 1

enum repl_disk_state {
  REPL_DISK_INCONSISTENT = 0,
  REPL_DISK_OUTDATED = 1,
  REPL_DISK_UPTODATE = 2,
  REPL_DISK_DISKLESS = 3,       /* a diskless node: no data of its own */
};
#define REPL_DISK_STATE_MAX 3

/* Generation UUIDs (see common/uuid-compare.h), REPL_UUIDS_SIZE bytes:
 *
 *   0  8 current     the sender's current UUID
 *   8  8 bitmap      the bitmap UUID it holds for the receiver
 *  16 16 history[2]  its history UUIDs, newest first
 *  32  4 flags       GU_FLAG_* (checked by the receiver, uuid_check)
 *  36  4 changes     chunks the sender's bitmap for the receiver has set
 *                    (what it changed that the receiver lacks), at most
 *                    UINT32_MAX; for the split-brain policies
 */
#define REPL_UUIDS_SIZE 40

struct repl_uuids {
  uint64_t current;
  uint64_t bitmap;
  uint64_t history[2];
  uint32_t flags;
  uint32_t changes;
};

/* The handshake of a connection, in this order:
 *
 *   TLS       with tls: true (server/peer-tls.c)
 *   HELLO     each way: who the sender is and how it authenticates;
 *             nothing about its data
 *   AUTH_*    with a secret on both sides (server/peer-auth.c)
 *   HELLO_STATE  each way, only once the peer is authenticated: the
 *             sender's role, disk state, size and generation UUIDs
 *
 * The receiver keeps both in one struct repl_hello.
 *
 * HELLO payload, REPL_HELLO_SIZE bytes, big-endian:
 *
 *   0  4 version     REPL_PROTO_VERSION
 *   4  4 features    REPL_FEATURE_*
 *   8  4 node_id     the sender's id
 *  12  4 peer_id     the id the sender believes it is talking to, or
 *                    REPL_PEER_ID_NONE: "you are not a node of this
 *                    resource here" (the listener's answer to a node
 *                    it does not know, e.g. one replctl adjust removed,
 *                    just before it closes the connection)
 *  16 64 resource    NUL-terminated, NUL-padded resource name
 *
 * The header of a HELLO may announce any length from 4 to
 * REPL_HELLO_MAX, so that a HELLO of another protocol version (3 had
 * 144 bytes) is read whole and refused for its version, by name.
 */
#define REPL_HELLO_SIZE 80
#define REPL_HELLO_MAX 256

/* HELLO_STATE payload, REPL_HELLO_STATE_SIZE bytes, big-endian:
 *
 *   0  4 role        enum repl_role
 *   4  4 disk_state  enum repl_disk_state
 *   8  8 size        the sender's volume size in bytes, <= INT64_MAX (a
 *                    diskless node: the size it learnt from a storage
 *                    node, or 0).  Sizes may differ after a resize that
 *                    one node missed: both refuse the connection, the
 *                    smaller node grows to the larger size if it can,
 *                    and the next connection has equal sizes
 *                    (server/resize.c)
 *  16 40 uuids       the sender's generation UUIDs (above)
 *  56  8 primary_since when the sender last became Primary, ms since the
 *                    Unix epoch, 0 if never (discard-younger-primary)
 *  64  4 routed      a storage Primary beside diskless nodes (allow-two-
 *                    primaries), to a storage node: the bit mask of the
 *                    diskless nodes that write through it, as in STATE's
 *                    count (server/two-primaries.c); a diskless Primary
 *                    (allow-two-primaries): where its writes go, as in
 *                    its STATE's count; else 0
 *  68  4 reserved    0
 */
#define REPL_HELLO_STATE_SIZE 72

struct repl_hello {
  /* HELLO */
  uint32_t version;
  uint32_t features;
  uint32_t node_id;
  uint32_t peer_id;
  char resource[REPL_RESOURCE_MAX];
  /* HELLO_STATE */
  uint32_t role;
  uint32_t disk_state;
  uint64_t size;
  struct repl_uuids uuids;
  uint64_t primary_since;
  uint32_t routed;
};

/* Name of a message type for log lines ("WRITE"), or "unknown". */
extern const char *wire_type_name (unsigned type);

/* What wire.c's table of message types says of a type (false or 0 for
 * an unknown type):
 * - sequenced: it carries the sender's next sequence number, is applied
 *   in order and answered by a cumulative ACK or a NACK (WRITE, TRIM,
 *   ZERO, FLUSH, RESYNC_*, VERIFY_REQ, OUT_OF_SYNC, READ_REQ); every
 *   other type after the handshake is handled on arrival;
 * - changes data: a client's change to the volume (WRITE, TRIM, ZERO):
 *   a peer that misses it gets the range back by resync;
 * - receipt-ackable: protocol B may acknowledge it on receipt, before it
 *   is applied: sequenced, asking for no durability (not FLUSH, no flag
 *   FUA), no answer (not READ_REQ, VERIFY_REQ) and no bitmap update
 *   (not OUT_OF_SYNC);
 * - from the driver: sent by the side that drives the connection (the
 *   primary, a sync source, a verify's source), answered by the other;
 * - states: the receiver's replication states in which it may arrive, as
 *   bits (1 << enum repl_state, repl-state.h); 0 for the handshake
 *   messages, which never reach the receive loop. */
extern bool wire_type_sequenced (unsigned type);
extern bool wire_type_changes_data (unsigned type);
extern bool wire_type_receipt_ackable (unsigned type, uint16_t flags);
extern bool wire_type_from_driver (unsigned type);
extern unsigned wire_type_states (unsigned type);

/* Fill a header: magic is set, the rest from the arguments. */
extern void wire_hdr_init (struct repl_hdr *h, enum repl_msg_type type,
                           uint16_t flags, uint32_t length, uint32_t count,
                           uint64_t seq, uint64_t offset);

extern void wire_encode_hdr (const struct repl_hdr *h,
                             uint8_t out[REPL_HDR_SIZE]);

/* Decode and check a header on its own: magic, known type, flags allowed
 * for the type, length <= REPL_MAX_PAYLOAD and consistent with the type
 * (WRITE and RESYNC_DATA: length == count > 0; HELLO: 4 to
 * REPL_HELLO_MAX; HELLO_STATE: REPL_HELLO_STATE_SIZE; TRIM and ZERO:
 * length 0, count > 0; all others: length 0, count 0).
 * Returns 0, or -1 with errno = EPROTO and a message in err naming the
 * field and the value. */
extern int wire_decode_hdr (const uint8_t in[REPL_HDR_SIZE],
                            struct repl_hdr *h, char *err, size_t errlen);

/* Check the volume range of a decoded WRITE, TRIM, ZERO or RESYNC_DATA
 * against a volume of dev_size bytes: offset + count must not overflow
 * and must be <= dev_size.  RESYNC_DATA must also start on a multiple of
 * granularity and end on one or at the end of the volume.  Other types
 * always pass.  Returns 0, or -1 with errno = EPROTO and a message. */
extern int wire_check_range (const struct repl_hdr *h, uint64_t dev_size,
                             uint32_t granularity, char *err, size_t errlen);

extern void wire_encode_uuids (const struct repl_uuids *u,
                               uint8_t out[REPL_UUIDS_SIZE]);
/* Checks the length only (the caller checks the UUIDs, uuid_check). */
extern int wire_decode_uuids (const uint8_t *in, size_t len,
                              struct repl_uuids *u, char *err,
                              size_t errlen);

/* The HELLO fields of hello (version to resource). */
extern void wire_encode_hello (const struct repl_hello *hello,
                               uint8_t out[REPL_HELLO_SIZE]);

/* Decode and check a HELLO payload into the HELLO fields of hello:
 * version == REPL_PROTO_VERSION (checked first, so that a HELLO of
 * another version is named for it), len == REPL_HELLO_SIZE, no unknown
 * features, resource NUL-terminated within its field, NUL-padded and
 * non-empty.  Node ids are checked by the caller, who knows the
 * configuration.  Returns 0, or -1 with errno = EPROTO and a message. */
extern int wire_decode_hello (const uint8_t *in, size_t len,
                              struct repl_hello *hello,
                              char *err, size_t errlen);

/* The HELLO_STATE fields of hello (role to routed). */
extern void wire_encode_hello_state (const struct repl_hello *hello,
                                     uint8_t out[REPL_HELLO_STATE_SIZE]);

/* Decode and check a HELLO_STATE payload into the HELLO_STATE fields of
 * hello: len == REPL_HELLO_STATE_SIZE, role and disk_state in range,
 * size <= INT64_MAX, no unknown generation UUID flags (GU_FLAGS_KNOWN).
 * The UUIDs themselves (uuid_check), and the size against ours, are
 * checked by the caller, who knows whether they count.  Returns 0, or
 * -1 with errno = EPROTO and a message. */
extern int wire_decode_hello_state (const uint8_t *in, size_t len,
                                    struct repl_hello *hello,
                                    char *err, size_t errlen);

#endif /* NBDREPL_WIRE_H */
