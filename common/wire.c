/* nbdrepl: the replication wire format.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * Encoding and checked decoding of the 32-byte message header and of the
 * HELLO and HELLO_STATE payloads (layouts in wire.h).  Everything here is pure: no I/O,
 * no logging; failures come back as -1, errno = EPROTO and one line in
 * the caller's buffer, which the caller logs once.
 */
#include <config.h>

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "byte-order.h"
#include "uuid-compare.h"
#include "repl-state.h"
#include "wire.h"

/* What a message of each type may carry. */
enum wire_payload {
  WIRE_PAYLOAD_NONE,            /* length 0 */
  WIRE_PAYLOAD_COUNT,           /* length == count: the data itself */
  WIRE_PAYLOAD_HELLO,           /* 4 <= length <= REPL_HELLO_MAX (the
                                   payload decoder checks the version,
                                   then REPL_HELLO_SIZE) */
  WIRE_PAYLOAD_HELLO_STATE,     /* length == REPL_HELLO_STATE_SIZE */
  WIRE_PAYLOAD_UUIDS,           /* length == REPL_UUIDS_SIZE */
  WIRE_PAYLOAD_WORD,            /* length == 8 */
  WIRE_PAYLOAD_AUTH,            /* length == REPL_AUTH_SIZE */
  WIRE_PAYLOAD_WORDS,           /* length > 0, a multiple of 8 */
};

/* How a message travels (repl-state.h has the states). */
enum wire_class {
  WIRE_HANDSHAKE,               /* before the receive loop only: HELLO,
                                   AUTH_*, HELLO_STATE */
  WIRE_SEQUENCED,               /* carries the sender's next sequence
                                   number; applied in order; answered by
                                   a cumulative ACK (or a NACK) */
  WIRE_CONTROL,                 /* unsequenced, handled on arrival */
};

/* Who sends it, on a connection where one side drives: the primary (or
 * a sync source, a verify's source) sends FORWARD, its peer answers
 * BACK; BOTH: either side. */
enum wire_dir { WIRE_BOTH, WIRE_FORWARD, WIRE_BACK };

struct wire_type {
  const char *wt_name;          /* NULL: no such type */
  uint16_t wt_flags;            /* REPL_FLAG_* allowed */
  enum wire_payload wt_payload;
  bool wt_has_count;            /* count > 0 (else count == 0) */
  bool wt_count_free;           /* count is any value, checked by its
                                   handler (STATE's routed mask) */
  enum wire_class wt_class;
  enum wire_dir wt_dir;
  bool wt_changes_data;         /* a client's change to the volume: a
                                   peer that misses it gets the range
                                   back by resync */
  bool wt_receipt_ack;          /* protocol B may acknowledge it on
                                   receipt (unless it has flag FUA) */
  unsigned wt_states;           /* the receiver's replication states in
                                   which it may arrive (bits of enum
                                   repl_state); 0: any connected state */
};

#define ST(s) (1u << REPL_##s)
#define SEQ(dir) .wt_class = WIRE_SEQUENCED, .wt_dir = WIRE_##dir
#define CTL(dir) .wt_class = WIRE_CONTROL, .wt_dir = WIRE_##dir
#define HANDSHAKE .wt_class = WIRE_HANDSHAKE, .wt_dir = WIRE_BOTH

static const struct wire_type wire_types[REPL_MSG_TYPE_MAX + 1] = {
  [REPL_MSG_HELLO] = { "HELLO", 0, WIRE_PAYLOAD_HELLO, false, HANDSHAKE },
  [REPL_MSG_AUTH_CHALLENGE] = { "AUTH_CHALLENGE", 0, WIRE_PAYLOAD_AUTH,
                                false, HANDSHAKE },
  [REPL_MSG_AUTH_RESPONSE] = { "AUTH_RESPONSE", 0, WIRE_PAYLOAD_AUTH,
                               false, HANDSHAKE },
  [REPL_MSG_HELLO_STATE] = { "HELLO_STATE", 0, WIRE_PAYLOAD_HELLO_STATE,
                             false, HANDSHAKE },

  [REPL_MSG_PING] = { "PING", 0, WIRE_PAYLOAD_NONE, false, CTL (BOTH) },
  [REPL_MSG_PONG] = { "PONG", 0, WIRE_PAYLOAD_NONE, false, CTL (BOTH) },
  [REPL_MSG_GOODBYE] = { "GOODBYE", 0, WIRE_PAYLOAD_NONE, false,
                         CTL (BOTH) },
  [REPL_MSG_STATE] = { "STATE", REPL_FLAG_SYNC_PAUSED, WIRE_PAYLOAD_NONE,
                       false, CTL (BOTH), .wt_count_free = true },
  [REPL_MSG_UUIDS] = { "UUIDS", 0, WIRE_PAYLOAD_UUIDS, false, CTL (BOTH) },

  [REPL_MSG_WRITE] = { "WRITE", REPL_FLAG_FUA | REPL_FLAG_DIGEST,
                       WIRE_PAYLOAD_COUNT, true, SEQ (FORWARD),
                       .wt_changes_data = true, .wt_receipt_ack = true },
  [REPL_MSG_TRIM] = { "TRIM", REPL_FLAG_FUA, WIRE_PAYLOAD_NONE, true,
                      SEQ (FORWARD),
                      .wt_changes_data = true, .wt_receipt_ack = true },
  [REPL_MSG_ZERO] = { "ZERO", REPL_FLAG_FUA | REPL_FLAG_MAY_TRIM,
                      WIRE_PAYLOAD_NONE, true, SEQ (FORWARD),
                      .wt_changes_data = true, .wt_receipt_ack = true },
  [REPL_MSG_FLUSH] = { "FLUSH", 0, WIRE_PAYLOAD_NONE, false,
                       SEQ (FORWARD) },
  [REPL_MSG_ACK] = { "ACK", REPL_FLAG_RECEIVED, WIRE_PAYLOAD_NONE, false,
                     CTL (BACK) },
  [REPL_MSG_NACK] = { "NACK", 0, WIRE_PAYLOAD_NONE, false, CTL (BACK) },

  /* The target, once the bitmaps are in: */
  [REPL_MSG_RESYNC_START] = { "RESYNC_START", 0, WIRE_PAYLOAD_NONE, false,
                              SEQ (FORWARD), .wt_receipt_ack = true,
                              .wt_states = ST (ESTABLISHED) |
                                           ST (WF_BITMAP_T) },
  [REPL_MSG_RESYNC_DATA] = { "RESYNC_DATA",
                             REPL_FLAG_ZEROES | REPL_FLAG_DIGEST,
                             WIRE_PAYLOAD_COUNT, true, SEQ (FORWARD),
                             .wt_receipt_ack = true,
                             .wt_states = ST (SYNC_TARGET) |
                                          ST (PAUSED_SYNC_T) },
  [REPL_MSG_RESYNC_DONE] = { "RESYNC_DONE", 0, WIRE_PAYLOAD_NONE, false,
                             SEQ (FORWARD), .wt_receipt_ack = true,
                             .wt_states = ST (SYNC_TARGET) |
                                          ST (PAUSED_SYNC_T) },
  /* The source, before it starts: the target's bitmap. */
  [REPL_MSG_BITMAP] = { "BITMAP", 0, WIRE_PAYLOAD_WORDS, false, CTL (BACK),
                        .wt_states = ST (WF_BITMAP_S) },
  [REPL_MSG_BITMAP_DONE] = { "BITMAP_DONE", 0, WIRE_PAYLOAD_NONE, false,
                             CTL (BACK), .wt_states = ST (WF_BITMAP_S) },
  /* A verify's target, or the target of a resync with csums: */
  [REPL_MSG_VERIFY_REQ] = { "VERIFY_REQ", 0, WIRE_PAYLOAD_NONE, true,
                            SEQ (FORWARD),
                            .wt_states = ST (ESTABLISHED) |
                                         ST (SYNC_TARGET) },
  [REPL_MSG_VERIFY_REPLY] = { "VERIFY_REPLY", 0, WIRE_PAYLOAD_WORDS, true,
                              CTL (BACK),
                              .wt_states = ST (VERIFY_S) |
                                           ST (SYNC_SOURCE) |
                                           ST (PAUSED_SYNC_S) },

  /* A diskless primary and its storage nodes: */
  [REPL_MSG_AWAY] = { "AWAY", 0, WIRE_PAYLOAD_WORD, false, CTL (FORWARD) },
  [REPL_MSG_OUT_OF_SYNC] = { "OUT_OF_SYNC", 0, WIRE_PAYLOAD_WORD, true,
                             SEQ (FORWARD) },
  [REPL_MSG_READ_REQ] = { "READ_REQ", 0, WIRE_PAYLOAD_NONE, true,
                          SEQ (FORWARD) },
  [REPL_MSG_READ_REPLY] = { "READ_REPLY", REPL_FLAG_ERROR,
                            WIRE_PAYLOAD_COUNT, true, CTL (BACK) },
  /* Online grow (server/resize.c): */
  [REPL_MSG_RESIZE_QUERY] = { "RESIZE_QUERY", 0, WIRE_PAYLOAD_NONE, false,
                              CTL (FORWARD) },
  [REPL_MSG_RESIZE_REPLY] = { "RESIZE_REPLY", REPL_FLAG_ERROR,
                              WIRE_PAYLOAD_NONE, false, CTL (BACK) },
  [REPL_MSG_RESIZE] = { "RESIZE", REPL_FLAG_ASSUME_CLEAN, WIRE_PAYLOAD_WORD,
                        false, SEQ (FORWARD),
                        .wt_states = ST (ESTABLISHED) },
  /* A resync target with no storage Primary, and the diskless nodes: */
  [REPL_MSG_SYNC_FENCE] = { "SYNC_FENCE", 0, WIRE_PAYLOAD_NONE, false,
                            CTL (BOTH) },
  [REPL_MSG_SYNC_FENCED] = { "SYNC_FENCED", REPL_FLAG_ERROR,
                             WIRE_PAYLOAD_NONE, false, CTL (BOTH) },
  /* A diskless node to a storage Primary beside it: */
  [REPL_MSG_ROUTED] = { "ROUTED", REPL_FLAG_WRITER | REPL_FLAG_PROMOTING |
                        REPL_FLAG_THROUGH, WIRE_PAYLOAD_NONE, false,
                        CTL (BOTH) },
};

#define CONNECTED_STATES \
  (ST (ESTABLISHED) | ST (WF_BITMAP_S) | ST (WF_BITMAP_T) | \
   ST (SYNC_SOURCE) | ST (SYNC_TARGET) | ST (VERIFY_S) | \
   ST (PAUSED_SYNC_S) | ST (PAUSED_SYNC_T))

static const struct wire_type *
wire_type_lookup (unsigned type)
{
  if (type == 0 || type > REPL_MSG_TYPE_MAX || wire_types[type].wt_name == NULL)
    return NULL;
  return &wire_types[type];
}

const char *
wire_type_name (unsigned type)
{
  const struct wire_type *wt = wire_type_lookup (type);

  return wt ? wt->wt_name : "unknown";
}

bool
wire_type_sequenced (unsigned type)
{
  const struct wire_type *wt = wire_type_lookup (type);

  return wt != NULL && wt->wt_class == WIRE_SEQUENCED;
}

bool
wire_type_changes_data (unsigned type)
{
  const struct wire_type *wt = wire_type_lookup (type);

  return wt != NULL && wt->wt_changes_data;
}

bool
wire_type_receipt_ackable (unsigned type, uint16_t flags)
{
  const struct wire_type *wt = wire_type_lookup (type);

  return wt != NULL && wt->wt_receipt_ack && !(flags & REPL_FLAG_FUA);
}

bool
wire_type_from_driver (unsigned type)
{
  const struct wire_type *wt = wire_type_lookup (type);

  return wt != NULL && wt->wt_dir == WIRE_FORWARD;
}

unsigned
wire_type_states (unsigned type)
{
  const struct wire_type *wt = wire_type_lookup (type);

  if (wt == NULL || wt->wt_class == WIRE_HANDSHAKE)
    return 0;
  return wt->wt_states != 0 ? wt->wt_states : CONNECTED_STATES;
}

/* Fail with EPROTO, leaving a message in err if there is room for one. */
static int __attribute__ ((format (printf, 3, 4)))
wire_error (char *err, size_t errlen, const char *fmt, ...)
{
  va_list ap;

  if (err != NULL && errlen > 0) {
    va_start (ap, fmt);
    vsnprintf (err, errlen, fmt, ap);
    va_end (ap);
  }
  errno = EPROTO;
  return -1;
}

/* Big-endian at the edge: byte shifts, no alignment assumptions. */

void
wire_hdr_init (struct repl_hdr *h, enum repl_msg_type type,
               uint16_t flags, uint32_t length, uint32_t count,
               uint64_t seq, uint64_t offset)
{
  h->magic = REPL_MAGIC;
  h->type = type;
  h->flags = flags;
  h->length = length;
  h->count = count;
  h->seq = seq;
  h->offset = offset;
}

void
wire_encode_hdr (const struct repl_hdr *h, uint8_t out[REPL_HDR_SIZE])
{
  put_be32 (out + 0, h->magic);
  put_be16 (out + 4, h->type);
  put_be16 (out + 6, h->flags);
  put_be32 (out + 8, h->length);
  put_be32 (out + 12, h->count);
  put_be64 (out + 16, h->seq);
  put_be64 (out + 24, h->offset);
}

/* The header is filled in even when a check fails, so that the caller
 * can still name the sequence number in a NACK or a log line. */
int
wire_decode_hdr (const uint8_t in[REPL_HDR_SIZE], struct repl_hdr *h,
                 char *err, size_t errlen)
{
  const struct wire_type *wt;
  const char *name;
  uint16_t bad_flags;

  h->magic = get_be32 (in + 0);
  h->type = get_be16 (in + 4);
  h->flags = get_be16 (in + 6);
  h->length = get_be32 (in + 8);
  h->count = get_be32 (in + 12);
  h->seq = get_be64 (in + 16);
  h->offset = get_be64 (in + 24);

  if (h->magic != REPL_MAGIC)
    return wire_error (err, errlen, "bad magic 0x%08" PRIx32, h->magic);

  wt = wire_type_lookup (h->type);
  if (wt == NULL)
    return wire_error (err, errlen, "unknown type %" PRIu16, h->type);
  name = wt->wt_name;

  bad_flags = h->flags & ~wt->wt_flags;
  if (bad_flags != 0)
    return wire_error (err, errlen, "%s: flags 0x%" PRIx16 " not allowed",
                       name, bad_flags);

  if (h->length > REPL_MAX_PAYLOAD +
                  (h->flags & REPL_FLAG_DIGEST ? REPL_DIGEST_SIZE : 0))
    return wire_error (err, errlen, "%s: length %" PRIu32 " > maximum %u",
                       name, h->length, REPL_MAX_PAYLOAD);

  if (wt->wt_has_count && h->count == 0)
    return wire_error (err, errlen, "%s: count 0", name);
  if (!wt->wt_has_count && !wt->wt_count_free && h->count != 0)
    return wire_error (err, errlen, "%s: count %" PRIu32 " != 0",
                       name, h->count);

  switch (wt->wt_payload) {
  case WIRE_PAYLOAD_NONE:
    if (h->length != 0)
      return wire_error (err, errlen, "%s: length %" PRIu32 " != 0",
                         name, h->length);
    break;
  case WIRE_PAYLOAD_COUNT:
    if ((h->flags & REPL_FLAG_DIGEST) && (h->flags & REPL_FLAG_ZEROES))
      return wire_error (err, errlen, "%s: flags DIGEST and ZEROES together",
                         name);
    if (h->flags & (REPL_FLAG_ZEROES | REPL_FLAG_ERROR)) {
      if (h->length != 0)
        return wire_error (err, errlen, "%s: length %" PRIu32
                           " != 0 with flag %s", name, h->length,
                           h->flags & REPL_FLAG_ZEROES ? "ZEROES" : "ERROR");
    }
    else if (h->flags & REPL_FLAG_DIGEST) {
      if ((uint64_t) h->length != (uint64_t) h->count + REPL_DIGEST_SIZE)
        return wire_error (err, errlen,
                           "%s: length %" PRIu32 " != count %" PRIu32
                           " + %d with flag DIGEST",
                           name, h->length, h->count, REPL_DIGEST_SIZE);
    }
    else if (h->length != h->count)
      return wire_error (err, errlen,
                         "%s: length %" PRIu32 " != count %" PRIu32,
                         name, h->length, h->count);
    break;
  case WIRE_PAYLOAD_HELLO:
    if (h->length < 4 || h->length > REPL_HELLO_MAX)
      return wire_error (err, errlen, "%s: length %" PRIu32 " not in 4..%d",
                         name, h->length, REPL_HELLO_MAX);
    break;
  case WIRE_PAYLOAD_HELLO_STATE:
    if (h->length != REPL_HELLO_STATE_SIZE)
      return wire_error (err, errlen, "%s: length %" PRIu32 " != %d",
                         name, h->length, REPL_HELLO_STATE_SIZE);
    break;
  case WIRE_PAYLOAD_UUIDS:
    if (h->length != REPL_UUIDS_SIZE)
      return wire_error (err, errlen, "%s: length %" PRIu32 " != %d",
                         name, h->length, REPL_UUIDS_SIZE);
    break;
  case WIRE_PAYLOAD_AUTH:
    if (h->length != REPL_AUTH_SIZE)
      return wire_error (err, errlen, "%s: length %" PRIu32 " != %d",
                         name, h->length, REPL_AUTH_SIZE);
    break;
  case WIRE_PAYLOAD_WORD:
    if (h->length != 8)
      return wire_error (err, errlen, "%s: length %" PRIu32 " != 8",
                         name, h->length);
    break;
  case WIRE_PAYLOAD_WORDS:
    if (h->length == 0 || h->length % 8 != 0)
      return wire_error (err, errlen, "%s: length %" PRIu32
                         " is not a positive multiple of 8",
                         name, h->length);
    break;
  default:
    abort ();
  }

  return 0;
}

int
wire_check_range (const struct repl_hdr *h, uint64_t dev_size,
                  uint32_t granularity, char *err, size_t errlen)
{
  const char *name = wire_type_name (h->type);
  uint64_t end;

  switch (h->type) {
  case REPL_MSG_WRITE:
  case REPL_MSG_TRIM:
  case REPL_MSG_ZERO:
  case REPL_MSG_RESYNC_DATA:
  case REPL_MSG_VERIFY_REQ:
  case REPL_MSG_OUT_OF_SYNC:
  case REPL_MSG_READ_REQ:
  case REPL_MSG_READ_REPLY:
    break;
  default:
    return 0;
  }

  /* count is 32 bits, offset 64: offset + count wraps iff offset is
   * within count of UINT64_MAX. */
  if (h->offset > UINT64_MAX - h->count)
    return wire_error (err, errlen,
                       "%s: offset %" PRIu64 " + count %" PRIu32
                       " overflows", name, h->offset, h->count);
  end = h->offset + h->count;
  if (end > dev_size)
    return wire_error (err, errlen,
                       "%s: offset %" PRIu64 " + count %" PRIu32
                       " beyond the end of the volume (%" PRIu64 " bytes)",
                       name, h->offset, h->count, dev_size);

  if (h->type == REPL_MSG_RESYNC_DATA || h->type == REPL_MSG_VERIFY_REQ) {
    assert (granularity > 0 && (granularity & (granularity - 1)) == 0);
    if ((h->offset & (granularity - 1)) != 0)
      return wire_error (err, errlen,
                         "%s: offset %" PRIu64 " not a multiple of the "
                         "granularity %" PRIu32, name, h->offset, granularity);
    if ((end & (granularity - 1)) != 0 && end != dev_size)
      return wire_error (err, errlen,
                         "%s: end %" PRIu64 " neither a multiple of the "
                         "granularity %" PRIu32 " nor the end of the volume "
                         "(%" PRIu64 " bytes)",
                         name, end, granularity, dev_size);
  }

  return 0;
}

void
wire_encode_hello (const struct repl_hello *hello,
                   uint8_t out[REPL_HELLO_SIZE])
{
  size_t n = strnlen (hello->resource, REPL_RESOURCE_MAX);

  /* Our own resource names come from a checked configuration. */
  assert (n > 0 && n < REPL_RESOURCE_MAX);

  put_be32 (out + 0, hello->version);
  put_be32 (out + 4, hello->features);
  put_be32 (out + 8, hello->node_id);
  put_be32 (out + 12, hello->peer_id);
  memset (out + 16, 0, REPL_RESOURCE_MAX);
  memcpy (out + 16, hello->resource, n);
}

void
wire_encode_hello_state (const struct repl_hello *hello,
                         uint8_t out[REPL_HELLO_STATE_SIZE])
{
  put_be32 (out + 0, hello->role);
  put_be32 (out + 4, hello->disk_state);
  put_be64 (out + 8, hello->size);
  wire_encode_uuids (&hello->uuids, out + 16);
  put_be64 (out + 56, hello->primary_since);
  put_be32 (out + 64, hello->routed);
  put_be32 (out + 68, 0);
}

void
wire_encode_uuids (const struct repl_uuids *u, uint8_t out[REPL_UUIDS_SIZE])
{
  put_be64 (out + 0, u->current);
  put_be64 (out + 8, u->bitmap);
  put_be64 (out + 16, u->history[0]);
  put_be64 (out + 24, u->history[1]);
  put_be32 (out + 32, u->flags);
  put_be32 (out + 36, u->changes);
}

int
wire_decode_uuids (const uint8_t *in, size_t len, struct repl_uuids *u,
                   char *err, size_t errlen)
{
  if (len != REPL_UUIDS_SIZE)
    return wire_error (err, errlen, "UUIDS: length %zu != %d",
                       len, REPL_UUIDS_SIZE);
  u->current = get_be64 (in + 0);
  u->bitmap = get_be64 (in + 8);
  u->history[0] = get_be64 (in + 16);
  u->history[1] = get_be64 (in + 24);
  u->flags = get_be32 (in + 32);
  u->changes = get_be32 (in + 36);
  return 0;
}

/* The version first: a HELLO of another version has another size, and
 * "version 3 not supported" says more than a length.  Strict on the
 * resource field: the name, one NUL, then only NULs, so that two peers
 * can never disagree about what the name was. */
int
wire_decode_hello (const uint8_t *in, size_t len, struct repl_hello *hello,
                   char *err, size_t errlen)
{
  const uint8_t *res = in + 16;
  const uint8_t *nul;
  size_t i, n;

  if (len < 4)
    return wire_error (err, errlen, "HELLO: payload length %zu < 4", len);
  hello->version = get_be32 (in + 0);
  if (hello->version != REPL_PROTO_VERSION)
    return wire_error (err, errlen, "HELLO: version %" PRIu32
                       " not supported (want %d)",
                       hello->version, REPL_PROTO_VERSION);
  if (len != REPL_HELLO_SIZE)
    return wire_error (err, errlen, "HELLO: payload length %zu != %d",
                       len, REPL_HELLO_SIZE);

  hello->features = get_be32 (in + 4);
  hello->node_id = get_be32 (in + 8);
  hello->peer_id = get_be32 (in + 12);

  if (hello->features & ~REPL_FEATURES_KNOWN)
    return wire_error (err, errlen, "HELLO: features 0x%" PRIx32
                       " not supported",
                       hello->features & ~REPL_FEATURES_KNOWN);

  nul = memchr (res, 0, REPL_RESOURCE_MAX);
  if (nul == NULL)
    return wire_error (err, errlen,
                       "HELLO: resource not NUL-terminated in %d bytes",
                       REPL_RESOURCE_MAX);
  n = nul - res;
  if (n == 0)
    return wire_error (err, errlen, "HELLO: resource empty");
  for (i = n + 1; i < REPL_RESOURCE_MAX; ++i)
    if (res[i] != 0)
      return wire_error (err, errlen,
                         "HELLO: resource byte %zu after the NUL is 0x%02x, "
                         "not 0", i, res[i]);

  memcpy (hello->resource, res, REPL_RESOURCE_MAX);
  return 0;
}

int
wire_decode_hello_state (const uint8_t *in, size_t len,
                         struct repl_hello *hello, char *err, size_t errlen)
{
  if (len != REPL_HELLO_STATE_SIZE)
    return wire_error (err, errlen, "HELLO_STATE: payload length %zu != %d",
                       len, REPL_HELLO_STATE_SIZE);

  hello->role = get_be32 (in + 0);
  hello->disk_state = get_be32 (in + 4);
  hello->size = get_be64 (in + 8);
  if (wire_decode_uuids (in + 16, REPL_UUIDS_SIZE, &hello->uuids,
                         err, errlen) == -1)
    return -1;
  hello->primary_since = get_be64 (in + 56);
  hello->routed = get_be32 (in + 64);

  if (get_be32 (in + 68) != 0)
    return wire_error (err, errlen, "HELLO_STATE: reserved field 0x%" PRIx32
                       " not 0", get_be32 (in + 68));
  if (hello->routed != 0 && hello->role != REPL_ROLE_PRIMARY)
    return wire_error (err, errlen, "HELLO_STATE: routed mask 0x%" PRIx32
                       " from a node that is not Primary", hello->routed);
  if (hello->role > REPL_ROLE_MAX)
    return wire_error (err, errlen, "HELLO_STATE: role %" PRIu32
                       " out of range", hello->role);
  if (hello->disk_state > REPL_DISK_STATE_MAX)
    return wire_error (err, errlen, "HELLO_STATE: disk state %" PRIu32
                       " out of range", hello->disk_state);
  if (hello->size > INT64_MAX)
    return wire_error (err, errlen, "HELLO_STATE: size %" PRIu64
                       " out of range", hello->size);
  if (hello->uuids.flags & ~GU_FLAGS_KNOWN)
    return wire_error (err, errlen, "HELLO_STATE: generation UUID flags 0x%"
                       PRIx32 " unknown", hello->uuids.flags & ~GU_FLAGS_KNOWN);
  return 0;
}
