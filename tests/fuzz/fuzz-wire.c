/* nbdrepl: libFuzzer harness for the wire decoders (common/wire.c).
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * Input: one byte choosing the volume the ranges are checked against
 * (bits 0-2: its size from sizes[], bits 3-6: granularity 512 << n, at
 * most 1 MiB; bit 7: decode with a 1-byte error buffer), then a run of
 * messages as they come off a socket: a 32-byte header and its payload,
 * again and again.  Each header goes through wire_decode_hdr, each
 * range through wire_check_range, each HELLO, HELLO_STATE and UUIDS
 * payload through its decoder; the whole input also goes through the
 * payload decoders as it is, whatever its length.
 *
 * Besides "no crash", it checks what the decoders promise: a header or
 * payload that is accepted is in range and encodes back to the very
 * bytes it came from; a refusal sets EPROTO and a message.
 */
#include <config.h>

#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "uuid-compare.h"
#include "wire.h"

static const uint64_t sizes[8] = {
  1, 511, 4096, UINT64_C (1) << 20, (UINT64_C (1) << 20) + 512,
  UINT64_C (64) << 20, UINT64_C (1) << 60, UINT64_MAX,
};

/* A refusal: -1, EPROTO, and a terminated message (maybe cut short). */
static void
check_refusal (const char *err, size_t errlen)
{
  FUZZ_CHECK (errno == EPROTO);
  FUZZ_CHECK (memchr (err, '\0', errlen) != NULL);
  if (errlen > 1)
    FUZZ_CHECK (err[0] != '\0');
}

static void
fuzz_hello (const uint8_t *in, size_t len, char *err, size_t errlen)
{
  struct repl_hello hello;
  uint8_t out[REPL_HELLO_SIZE];
  size_t n;

  if (wire_decode_hello (in, len, &hello, err, errlen) == -1) {
    check_refusal (err, errlen);
    return;
  }
  FUZZ_CHECK (len == REPL_HELLO_SIZE);
  FUZZ_CHECK (hello.version == REPL_PROTO_VERSION);
  FUZZ_CHECK ((hello.features & ~REPL_FEATURES_KNOWN) == 0);
  n = strnlen (hello.resource, REPL_RESOURCE_MAX);
  FUZZ_CHECK (n > 0 && n < REPL_RESOURCE_MAX);
  wire_encode_hello (&hello, out);
  FUZZ_CHECK (memcmp (out, in, REPL_HELLO_SIZE) == 0);
}

static void
fuzz_hello_state (const uint8_t *in, size_t len, char *err, size_t errlen)
{
  struct repl_hello hello;
  uint8_t out[REPL_HELLO_STATE_SIZE];

  if (wire_decode_hello_state (in, len, &hello, err, errlen) == -1) {
    check_refusal (err, errlen);
    return;
  }
  FUZZ_CHECK (len == REPL_HELLO_STATE_SIZE);
  FUZZ_CHECK (hello.role <= REPL_ROLE_MAX);
  FUZZ_CHECK (hello.disk_state <= REPL_DISK_STATE_MAX);
  FUZZ_CHECK (hello.size <= INT64_MAX);
  FUZZ_CHECK ((hello.uuids.flags & ~GU_FLAGS_KNOWN) == 0);
  wire_encode_hello_state (&hello, out);
  FUZZ_CHECK (memcmp (out, in, REPL_HELLO_STATE_SIZE) == 0);
}

static void
fuzz_uuids (const uint8_t *in, size_t len, char *err, size_t errlen)
{
  struct repl_uuids u;
  struct gen_uuids g;
  uint8_t out[REPL_UUIDS_SIZE];
  char why[128];

  if (wire_decode_uuids (in, len, &u, err, errlen) == -1) {
    check_refusal (err, errlen);
    return;
  }
  FUZZ_CHECK (len == REPL_UUIDS_SIZE);
  wire_encode_uuids (&u, out);
  FUZZ_CHECK (memcmp (out, in, REPL_UUIDS_SIZE) == 0);
  /* What the receiver does next with them. */
  g = (struct gen_uuids) { .gu_current = u.current, .gu_bitmap = u.bitmap,
                           .gu_history = { u.history[0], u.history[1] },
                           .gu_flags = u.flags };
  if (uuid_check (&g, why, sizeof why) == -1)
    FUZZ_CHECK (why[0] != '\0');
}

static void
fuzz_range (const struct repl_hdr *h, uint64_t dev_size, uint32_t g,
            char *err, size_t errlen)
{
  if (wire_check_range (h, dev_size, g, err, errlen) == -1) {
    check_refusal (err, errlen);
    return;
  }
  switch (h->type) {
  case REPL_MSG_RESYNC_DATA:
  case REPL_MSG_VERIFY_REQ:
    FUZZ_CHECK (h->offset % g == 0);
    FUZZ_CHECK ((h->offset + h->count) % g == 0 ||
                h->offset + h->count == dev_size);
    /* fall through */
  case REPL_MSG_WRITE:
  case REPL_MSG_TRIM:
  case REPL_MSG_ZERO:
    FUZZ_CHECK (h->count > 0);
    FUZZ_CHECK (h->offset <= dev_size && h->count <= dev_size - h->offset);
    break;
  default:
    break;
  }
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  char bigerr[256], tinyerr[1];
  char *err = bigerr;
  size_t errlen = sizeof bigerr;
  uint64_t dev_size;
  uint32_t g;
  unsigned shift;

  if (size == 0)
    return 0;
  dev_size = sizes[data[0] & 7];
  shift = (data[0] >> 3) & 15;
  g = 512u << (shift > 11 ? 11 : shift);
  if (data[0] & 0x80) {
    err = tinyerr;
    errlen = sizeof tinyerr;
  }

  /* The payload decoders take any length. */
  fuzz_hello (data + 1, size - 1, err, errlen);
  fuzz_hello_state (data + 1, size - 1, err, errlen);
  fuzz_uuids (data + 1, size - 1, err, errlen);

  for (size_t pos = 1; size - pos >= REPL_HDR_SIZE; ) {
    struct repl_hdr h;
    uint8_t out[REPL_HDR_SIZE];
    const uint8_t *payload;
    size_t have;

    if (wire_decode_hdr (data + pos, &h, err, errlen) == -1) {
      check_refusal (err, errlen);
      break;                    /* the connection would end here */
    }
    FUZZ_CHECK (h.magic == REPL_MAGIC);
    FUZZ_CHECK (h.type >= 1 && h.type <= REPL_MSG_TYPE_MAX);
    FUZZ_CHECK (strcmp (wire_type_name (h.type), "unknown") != 0);
    FUZZ_CHECK (h.length <= REPL_MAX_PAYLOAD + REPL_DIGEST_SIZE);
    FUZZ_CHECK (h.length == 0 || h.length == h.count ||
                ((h.flags & REPL_FLAG_DIGEST) &&
                 (uint64_t) h.length == (uint64_t) h.count + REPL_DIGEST_SIZE) ||
                (h.type == REPL_MSG_HELLO && h.length >= 4 &&
                 h.length <= REPL_HELLO_MAX) ||
                (h.type == REPL_MSG_HELLO_STATE &&
                 h.length == REPL_HELLO_STATE_SIZE) ||
                h.type == REPL_MSG_UUIDS ||
                h.type == REPL_MSG_BITMAP || h.type == REPL_MSG_VERIFY_REPLY ||
                ((h.type == REPL_MSG_AWAY ||
                  h.type == REPL_MSG_OUT_OF_SYNC ||
                  h.type == REPL_MSG_RESIZE) && h.length == 8) ||
                ((h.type == REPL_MSG_AUTH_CHALLENGE ||
                  h.type == REPL_MSG_AUTH_RESPONSE) &&
                 h.length == REPL_AUTH_SIZE));
    wire_encode_hdr (&h, out);
    FUZZ_CHECK (memcmp (out, data + pos, REPL_HDR_SIZE) == 0);

    fuzz_range (&h, dev_size, g, err, errlen);

    pos += REPL_HDR_SIZE;
    payload = data + pos;
    have = size - pos < h.length ? size - pos : h.length;
    switch (h.type) {
    case REPL_MSG_HELLO:
      fuzz_hello (payload, have, err, errlen);
      break;
    case REPL_MSG_HELLO_STATE:
      fuzz_hello_state (payload, have, err, errlen);
      break;
    case REPL_MSG_UUIDS:
      fuzz_uuids (payload, have, err, errlen);
      break;
    default:
      break;
    }
    if (have < h.length)
      break;                    /* the rest has not arrived */
    pos += h.length;
  }
  return 0;
}
