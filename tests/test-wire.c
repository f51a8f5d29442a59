/* nbdrepl: unit tests of common/wire.c.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "repl-state.h"
#include "wire.h"
#include "uuid-compare.h"

/* What the header docs in wire.h say, written out again independently
 * of the table in wire.c. */
struct expect {
  unsigned type;
  const char *name;
  uint16_t flags;               /* allowed */
  int payload;                  /* 0 none, 1 == count, 2 hello (4 to
                                   REPL_HELLO_MAX), 3 uuids, 4 words
                                   (multiple of 8), 5 one word,
                                   6 REPL_AUTH_SIZE, 7 hello state */
  int has_count;                /* 1 count > 0, 0 count == 0, 2 any
                                   (the handler checks it) */
};

static const struct expect expect[] = {
  { REPL_MSG_HELLO, "HELLO", 0, 2, 0 },
  { REPL_MSG_PING, "PING", 0, 0, 0 },
  { REPL_MSG_PONG, "PONG", 0, 0, 0 },
  { REPL_MSG_WRITE, "WRITE", REPL_FLAG_FUA, 1, 1 },
  { REPL_MSG_TRIM, "TRIM", REPL_FLAG_FUA, 0, 1 },
  { REPL_MSG_ZERO, "ZERO", REPL_FLAG_FUA | REPL_FLAG_MAY_TRIM, 0, 1 },
  { REPL_MSG_FLUSH, "FLUSH", 0, 0, 0 },
  { REPL_MSG_RESYNC_START, "RESYNC_START", 0, 0, 0 },
  { REPL_MSG_RESYNC_DATA, "RESYNC_DATA", 0, 1, 1 },   /* + ZEROES: below */
  { REPL_MSG_RESYNC_DONE, "RESYNC_DONE", 0, 0, 0 },
  { REPL_MSG_ACK, "ACK", REPL_FLAG_RECEIVED, 0, 0 },
  { REPL_MSG_NACK, "NACK", 0, 0, 0 },
  { REPL_MSG_UUIDS, "UUIDS", 0, 3, 0 },
  { REPL_MSG_BITMAP, "BITMAP", 0, 4, 0 },
  { REPL_MSG_BITMAP_DONE, "BITMAP_DONE", 0, 0, 0 },
  { REPL_MSG_VERIFY_REQ, "VERIFY_REQ", 0, 0, 1 },
  { REPL_MSG_VERIFY_REPLY, "VERIFY_REPLY", 0, 4, 1 },
  { REPL_MSG_GOODBYE, "GOODBYE", 0, 0, 0 },
  { REPL_MSG_STATE, "STATE", REPL_FLAG_SYNC_PAUSED, 0, 2 },
  { REPL_MSG_AWAY, "AWAY", 0, 5, 0 },
  { REPL_MSG_OUT_OF_SYNC, "OUT_OF_SYNC", 0, 5, 1 },
  { REPL_MSG_READ_REQ, "READ_REQ", 0, 0, 1 },
  { REPL_MSG_READ_REPLY, "READ_REPLY", 0, 1, 1 },   /* + ERROR: below */
  { REPL_MSG_AUTH_CHALLENGE, "AUTH_CHALLENGE", 0, 6, 0 },
  { REPL_MSG_AUTH_RESPONSE, "AUTH_RESPONSE", 0, 6, 0 },
  { REPL_MSG_HELLO_STATE, "HELLO_STATE", 0, 7, 0 },
  { REPL_MSG_RESIZE_QUERY, "RESIZE_QUERY", 0, 0, 0 },
  { REPL_MSG_RESIZE_REPLY, "RESIZE_REPLY", REPL_FLAG_ERROR, 0, 0 },
  { REPL_MSG_RESIZE, "RESIZE", REPL_FLAG_ASSUME_CLEAN, 5, 0 },
  { REPL_MSG_ROUTED, "ROUTED", REPL_FLAG_WRITER | REPL_FLAG_PROMOTING |
    REPL_FLAG_THROUGH, 0, 0 },
};
#define NR_EXPECT (sizeof expect / sizeof expect[0])

/* A valid header of the given type with all allowed flags set. */
static void
valid_hdr (const struct expect *e, struct repl_hdr *h)
{
  uint32_t count = e->has_count == 1 ? 65536 : 0;
  uint32_t length = e->payload == 1 ? count
                  : e->payload == 2 ? REPL_HELLO_SIZE
                  : e->payload == 3 ? REPL_UUIDS_SIZE
                  : e->payload == 4 ? 4096
                  : e->payload == 5 ? 8
                  : e->payload == 6 ? REPL_AUTH_SIZE
                  : e->payload == 7 ? REPL_HELLO_STATE_SIZE : 0;

  wire_hdr_init (h, e->type, e->flags, length, count,
                 UINT64_C (0x0102030405060708) + e->type,
                 UINT64_C (0x1122334455667788));
}

/* Encode h, decode it and expect failure with msg in the error text. */
static void
expect_reject (const struct repl_hdr *h, const char *msg)
{
  uint8_t buf[REPL_HDR_SIZE];
  struct repl_hdr out;
  char err[256] = "";

  wire_encode_hdr (h, buf);
  errno = 0;
  ck_assert_int_eq (wire_decode_hdr (buf, &out, err, sizeof err), -1);
  ck_assert_int_eq (errno, EPROTO);
  ck_assert_msg (strstr (err, msg) != NULL,
                 "error \"%s\" does not contain \"%s\"", err, msg);
}

static void
expect_accept (const struct repl_hdr *h)
{
  uint8_t buf[REPL_HDR_SIZE];
  struct repl_hdr out;
  char err[256] = "";

  wire_encode_hdr (h, buf);
  ck_assert_msg (wire_decode_hdr (buf, &out, err, sizeof err) == 0,
                 "rejected: %s", err);
}

START_TEST (test_type_names)
{
  size_t i;

  for (i = 0; i < NR_EXPECT; ++i)
    ck_assert_str_eq (wire_type_name (expect[i].type), expect[i].name);
  ck_assert_str_eq (wire_type_name (0), "unknown");
  ck_assert_str_eq (wire_type_name (REPL_MSG_TYPE_MAX + 1), "unknown");
  ck_assert_str_eq (wire_type_name (0xffff), "unknown");
  ck_assert_str_eq (wire_type_name (~0u), "unknown");
}
END_TEST

/* The byte layout documented in wire.h, checked byte by byte. */
START_TEST (test_hdr_layout)
{
  static const uint8_t want[REPL_HDR_SIZE] = {
    0x4e, 0x42, 0x52, 0x50,     /* magic "NBRP" */
    0x00, 0x04,                 /* type WRITE */
    0x00, 0x01,                 /* flags FUA */
    0x00, 0x00, 0x10, 0x00,     /* length 4096 */
    0x00, 0x00, 0x10, 0x00,     /* count 4096 */
    0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, /* seq */
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x20, 0x00, /* offset */
  };
  struct repl_hdr h;
  uint8_t buf[REPL_HDR_SIZE];

  wire_hdr_init (&h, REPL_MSG_WRITE, REPL_FLAG_FUA, 4096, 4096,
                 UINT64_C (0x0102030405060708), UINT64_C (0x100002000));
  ck_assert_uint_eq (h.magic, REPL_MAGIC);
  wire_encode_hdr (&h, buf);
  ck_assert_mem_eq (buf, want, REPL_HDR_SIZE);
}
END_TEST

START_TEST (test_hdr_round_trip)
{
  size_t i;
  uint16_t flags;

  for (i = 0; i < NR_EXPECT; ++i) {
    const struct expect *e = &expect[i];

    /* Every allowed combination of flags (subsets of the mask). */
    flags = e->flags;
    for (;;) {
      struct repl_hdr h, out;
      uint8_t buf[REPL_HDR_SIZE], buf2[REPL_HDR_SIZE];
      char err[256] = "";

      valid_hdr (e, &h);
      h.flags = flags;
      wire_encode_hdr (&h, buf);
      ck_assert_msg (wire_decode_hdr (buf, &out, err, sizeof err) == 0,
                     "%s: %s", e->name, err);
      ck_assert_uint_eq (out.magic, REPL_MAGIC);
      ck_assert_uint_eq (out.type, h.type);
      ck_assert_uint_eq (out.flags, h.flags);
      ck_assert_uint_eq (out.length, h.length);
      ck_assert_uint_eq (out.count, h.count);
      ck_assert_uint_eq (out.seq, h.seq);
      ck_assert_uint_eq (out.offset, h.offset);
      wire_encode_hdr (&out, buf2);
      ck_assert_mem_eq (buf, buf2, REPL_HDR_SIZE);

      if (flags == 0)
        break;
      flags = (flags - 1) & e->flags;
    }
  }
}
END_TEST

START_TEST (test_hdr_extremes)
{
  struct repl_hdr h;

  /* Largest payload and seq/offset at the limits still decode. */
  wire_hdr_init (&h, REPL_MSG_WRITE, 0, REPL_MAX_PAYLOAD, REPL_MAX_PAYLOAD,
                 UINT64_MAX, UINT64_MAX);
  expect_accept (&h);
  wire_hdr_init (&h, REPL_MSG_RESYNC_DATA, 0, REPL_MAX_PAYLOAD,
                 REPL_MAX_PAYLOAD, 0, 0);
  expect_accept (&h);
  wire_hdr_init (&h, REPL_MSG_TRIM, 0, 0, UINT32_MAX, 0, 0);
  expect_accept (&h);
  wire_hdr_init (&h, REPL_MSG_WRITE, 0, 1, 1, 0, 0);
  expect_accept (&h);
}
END_TEST

START_TEST (test_hdr_bad_magic)
{
  struct repl_hdr h;

  wire_hdr_init (&h, REPL_MSG_PING, 0, 0, 0, 1, 0);
  h.magic = 0x12345678;
  expect_reject (&h, "bad magic 0x12345678");
  h.magic = 0;
  expect_reject (&h, "bad magic 0x00000000");
  h.magic = __builtin_bswap32 (REPL_MAGIC);     /* wrong byte order */
  expect_reject (&h, "bad magic 0x5052424e");
}
END_TEST

START_TEST (test_hdr_bad_type)
{
  static const unsigned bad[] = { 0, REPL_MSG_TYPE_MAX + 1, 0x100, 0xffff };
  struct repl_hdr h;
  char msg[64];
  size_t i;

  for (i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    wire_hdr_init (&h, REPL_MSG_PING, 0, 0, 0, 1, 0);
    h.type = bad[i];
    snprintf (msg, sizeof msg, "type %u", bad[i]);
    expect_reject (&h, msg);
  }
}
END_TEST

/* Every flag bit that the type does not allow, one at a time and
 * together with the allowed ones. */
START_TEST (test_hdr_bad_flags)
{
  struct repl_hdr h;
  char msg[64];
  size_t i;
  unsigned bit;
  int n = 0;

  for (i = 0; i < NR_EXPECT; ++i) {
    const struct expect *e = &expect[i];

    for (bit = 0; bit < 16; ++bit) {
      uint16_t f = 1u << bit;

      if (e->flags & f)
        continue;
      if (e->type == REPL_MSG_RESYNC_DATA && f == REPL_FLAG_ZEROES)
        continue;               /* allowed, with length 0: see below */
      if (e->type == REPL_MSG_READ_REPLY && f == REPL_FLAG_ERROR)
        continue;               /* likewise (test_read_reply_error) */
      if ((e->type == REPL_MSG_WRITE || e->type == REPL_MSG_RESYNC_DATA) &&
          f == REPL_FLAG_DIGEST)
        continue;               /* with a longer payload (test_digest) */
      valid_hdr (e, &h);
      h.flags = f;
      snprintf (msg, sizeof msg, "%s: flags 0x%x not allowed", e->name, f);
      expect_reject (&h, msg);
      h.flags = f | e->flags;
      expect_reject (&h, msg);  /* names only the bad bits */
      n++;
    }
  }
  /* 30 types * 16 bits, less the 15 allowed (FUA x3, MAY_TRIM x1,
   * RECEIVED x1, ZEROES x1, ERROR x2, DIGEST x2, SYNC_PAUSED x1,
   * ASSUME_CLEAN x1, WRITER, PROMOTING and THROUGH x1). */
  ck_assert_int_eq (n, 30 * 16 - 15);

  /* RESYNC_DATA with ZEROES: count bytes of zeroes, no payload. */
  {
    uint8_t buf[REPL_HDR_SIZE];
    struct repl_hdr out;
    char err[256] = "";

    wire_hdr_init (&h, REPL_MSG_RESYNC_DATA, REPL_FLAG_ZEROES, 0, 65536,
                   1, 65536);
    wire_encode_hdr (&h, buf);
    ck_assert_msg (wire_decode_hdr (buf, &out, err, sizeof err) == 0,
                   "%s", err);
    ck_assert_uint_eq (out.flags, REPL_FLAG_ZEROES);
    ck_assert_uint_eq (out.count, 65536);
    h.length = 65536;
    expect_reject (&h, "RESYNC_DATA: length 65536 != 0 with flag ZEROES");
    wire_hdr_init (&h, REPL_MSG_WRITE, REPL_FLAG_ZEROES, 0, 65536, 1, 0);
    expect_reject (&h, "WRITE: flags 0x8 not allowed");
  }

  wire_hdr_init (&h, REPL_MSG_TRIM, 0, 0, 4096, 0, 0);
  h.flags = 0x4;
  expect_reject (&h, "TRIM: flags 0x4 not allowed");
  h.flags = 0xffff;
  expect_reject (&h, "TRIM: flags 0xfffe not allowed");
}
END_TEST

START_TEST (test_hdr_too_long)
{
  struct repl_hdr h;

  wire_hdr_init (&h, REPL_MSG_WRITE, 0, REPL_MAX_PAYLOAD + 1,
                 REPL_MAX_PAYLOAD + 1, 0, 0);
  expect_reject (&h, "WRITE: length 4194305 > maximum 4194304");
  wire_hdr_init (&h, REPL_MSG_RESYNC_DATA, 0, UINT32_MAX, UINT32_MAX, 0, 0);
  expect_reject (&h, "RESYNC_DATA: length 4294967295 > maximum");
  wire_hdr_init (&h, REPL_MSG_PING, 0, UINT32_MAX, 0, 0, 0);
  expect_reject (&h, "PING: length 4294967295 > maximum");
}
END_TEST

START_TEST (test_hdr_length_count)
{
  struct repl_hdr h;
  char msg[128];
  size_t i;

  /* The examples of the brief. */
  wire_hdr_init (&h, REPL_MSG_WRITE, 0, 512, 4096, 0, 0);
  expect_reject (&h, "WRITE: length 512 != count 4096");
  wire_hdr_init (&h, REPL_MSG_WRITE, 0, 0, 0, 0, 0);
  expect_reject (&h, "WRITE: count 0");
  wire_hdr_init (&h, REPL_MSG_PING, 0, 0, 1, 0, 0);
  expect_reject (&h, "PING: count 1 != 0");

  for (i = 0; i < NR_EXPECT; ++i) {
    const struct expect *e = &expect[i];

    switch (e->payload) {
    case 0:
      valid_hdr (e, &h);
      h.length = 1;
      snprintf (msg, sizeof msg, "%s: length 1 != 0", e->name);
      expect_reject (&h, msg);
      valid_hdr (e, &h);
      h.length = REPL_MAX_PAYLOAD;
      snprintf (msg, sizeof msg, "%s: length %u != 0",
                e->name, REPL_MAX_PAYLOAD);
      expect_reject (&h, msg);
      break;
    case 1:
      valid_hdr (e, &h);
      h.length = h.count - 1;
      snprintf (msg, sizeof msg, "%s: length %u != count %u",
                e->name, h.count - 1, h.count);
      expect_reject (&h, msg);
      valid_hdr (e, &h);
      h.length = h.count + 1;
      snprintf (msg, sizeof msg, "%s: length %u != count %u",
                e->name, h.count + 1, h.count);
      expect_reject (&h, msg);
      valid_hdr (e, &h);
      h.length = 0;
      snprintf (msg, sizeof msg, "%s: length 0 != count", e->name);
      expect_reject (&h, msg);
      break;
    case 2:
      /* Any length a HELLO of some version may have: the payload
       * decoder names the version (test_hello_reject). */
      valid_hdr (e, &h);
      h.length = 3;
      expect_reject (&h, "HELLO: length 3 not in 4..256");
      h.length = 0;
      expect_reject (&h, "HELLO: length 0 not in 4..256");
      h.length = REPL_HELLO_MAX + 1;
      expect_reject (&h, "HELLO: length 257 not in 4..256");
      h.length = REPL_MAX_PAYLOAD;
      expect_reject (&h, "HELLO: length 4194304 not in 4..256");
      h.length = 4;
      expect_accept (&h);
      h.length = 144;           /* version 3's */
      expect_accept (&h);
      h.length = REPL_HELLO_MAX;
      expect_accept (&h);
      break;
    case 7:
      valid_hdr (e, &h);
      h.length = REPL_HELLO_STATE_SIZE - 1;
      expect_reject (&h, "HELLO_STATE: length 71 != 72");
      h.length = REPL_HELLO_STATE_SIZE + 1;
      expect_reject (&h, "HELLO_STATE: length 73 != 72");
      h.length = 0;
      expect_reject (&h, "HELLO_STATE: length 0 != 72");
      h.length = REPL_HELLO_SIZE;
      expect_reject (&h, "HELLO_STATE: length 80 != 72");
      break;
    case 3:
      valid_hdr (e, &h);
      h.length = REPL_UUIDS_SIZE - 8;
      expect_reject (&h, "UUIDS: length 32 != 40");
      h.length = 0;
      expect_reject (&h, "UUIDS: length 0 != 40");
      break;
    case 4:
      valid_hdr (e, &h);
      h.length = 0;
      snprintf (msg, sizeof msg,
                "%s: length 0 is not a positive multiple of 8", e->name);
      expect_reject (&h, msg);
      h.length = 4095;
      snprintf (msg, sizeof msg,
                "%s: length 4095 is not a positive multiple of 8", e->name);
      expect_reject (&h, msg);
      h.length = REPL_MAX_PAYLOAD + 8;
      snprintf (msg, sizeof msg, "%s: length 4194312 > maximum", e->name);
      expect_reject (&h, msg);
      break;
    case 6:
      valid_hdr (e, &h);
      h.length = 31;
      snprintf (msg, sizeof msg, "%s: length 31 != 32", e->name);
      expect_reject (&h, msg);
      h.length = 0;
      snprintf (msg, sizeof msg, "%s: length 0 != 32", e->name);
      expect_reject (&h, msg);
      break;
    case 5:
      valid_hdr (e, &h);
      h.length = 16;
      snprintf (msg, sizeof msg, "%s: length 16 != 8", e->name);
      expect_reject (&h, msg);
      h.length = 0;
      snprintf (msg, sizeof msg, "%s: length 0 != 8", e->name);
      expect_reject (&h, msg);
      break;
    default:
      abort ();
    }

    if (e->has_count == 2) {
      valid_hdr (e, &h);
      h.count = UINT32_MAX;
      expect_accept (&h);
    }
    else if (e->has_count) {
      valid_hdr (e, &h);
      h.count = 0;
      if (e->payload == 1)
        h.length = 0;
      snprintf (msg, sizeof msg, "%s: count 0", e->name);
      expect_reject (&h, msg);
    }
    else {
      valid_hdr (e, &h);
      h.count = 4096;
      snprintf (msg, sizeof msg, "%s: count 4096 != 0", e->name);
      expect_reject (&h, msg);
      h.count = UINT32_MAX;
      snprintf (msg, sizeof msg, "%s: count %u != 0", e->name, UINT32_MAX);
      expect_reject (&h, msg);
    }
  }
}
END_TEST

/* data-integrity: the digest follows the data. */
START_TEST (test_digest)
{
  struct repl_hdr h;

  wire_hdr_init (&h, REPL_MSG_WRITE, REPL_FLAG_DIGEST, 4100, 4096, 1, 0);
  expect_accept (&h);
  wire_hdr_init (&h, REPL_MSG_WRITE, REPL_FLAG_DIGEST, 4096, 4096, 1, 0);
  expect_reject (&h, "WRITE: length 4096 != count 4096 + 4 with flag DIGEST");
  wire_hdr_init (&h, REPL_MSG_RESYNC_DATA, REPL_FLAG_DIGEST | REPL_FLAG_ZEROES,
                 0, 4096, 1, 0);
  expect_reject (&h, "RESYNC_DATA: flags DIGEST and ZEROES together");
  wire_hdr_init (&h, REPL_MSG_WRITE, REPL_FLAG_DIGEST,
                 REPL_MAX_PAYLOAD + REPL_DIGEST_SIZE, REPL_MAX_PAYLOAD, 1, 0);
  expect_accept (&h);
  wire_hdr_init (&h, REPL_MSG_TRIM, REPL_FLAG_DIGEST, 0, 4096, 1, 0);
  expect_reject (&h, "TRIM: flags 0x20 not allowed");
}
END_TEST

/* A failed read's answer carries no data. */
START_TEST (test_read_reply_error)
{
  struct repl_hdr h;

  wire_hdr_init (&h, REPL_MSG_READ_REPLY, REPL_FLAG_ERROR, 0, 4096, 1, 0);
  expect_accept (&h);
  wire_hdr_init (&h, REPL_MSG_READ_REPLY, REPL_FLAG_ERROR, 4096, 4096, 1, 0);
  expect_reject (&h, "READ_REPLY: length 4096 != 0 with flag ERROR");
  wire_hdr_init (&h, REPL_MSG_WRITE, REPL_FLAG_ERROR, 4096, 4096, 1, 0);
  expect_reject (&h, "WRITE: flags 0x10 not allowed");
}
END_TEST

/* No error buffer, or a tiny one: still -1/EPROTO, no overrun. */
START_TEST (test_hdr_err_buffer)
{
  struct repl_hdr h, out;
  uint8_t buf[REPL_HDR_SIZE];
  char err[8];

  wire_hdr_init (&h, REPL_MSG_PING, 0, 0, 0, 0, 0);
  h.magic = 0x12345678;
  wire_encode_hdr (&h, buf);

  errno = 0;
  ck_assert_int_eq (wire_decode_hdr (buf, &out, NULL, 0), -1);
  ck_assert_int_eq (errno, EPROTO);

  memset (err, 'x', sizeof err);
  errno = 0;
  ck_assert_int_eq (wire_decode_hdr (buf, &out, err, 0), -1);
  ck_assert_int_eq (errno, EPROTO);
  ck_assert_int_eq (err[0], 'x');

  errno = 0;
  ck_assert_int_eq (wire_decode_hdr (buf, &out, err, sizeof err), -1);
  ck_assert_int_eq (errno, EPROTO);
  ck_assert_str_eq (err, "bad mag");

  errno = 0;
  h.magic = REPL_MAGIC;
  h.offset = 10;
  h.type = REPL_MSG_WRITE;
  h.count = 4096;
  ck_assert_int_eq (wire_check_range (&h, 4096, 512, NULL, 0), -1);
  ck_assert_int_eq (errno, EPROTO);
}
END_TEST

static void
range_hdr (struct repl_hdr *h, unsigned type, uint64_t offset,
           uint32_t count)
{
  wire_hdr_init (h, type, 0, type == REPL_MSG_WRITE ||
                 type == REPL_MSG_RESYNC_DATA ? count : 0, count, 1, offset);
}

static void
range_ok (unsigned type, uint64_t offset, uint32_t count,
          uint64_t dev_size, uint32_t gran)
{
  struct repl_hdr h;
  char err[256] = "";

  range_hdr (&h, type, offset, count);
  ck_assert_msg (wire_check_range (&h, dev_size, gran, err, sizeof err) == 0,
                 "%s offset %" PRIu64 " count %" PRIu32 " size %" PRIu64
                 ": %s", wire_type_name (type), offset, count, dev_size, err);
}

static void
range_bad (unsigned type, uint64_t offset, uint32_t count,
           uint64_t dev_size, uint32_t gran, const char *msg)
{
  struct repl_hdr h;
  char err[256] = "";

  range_hdr (&h, type, offset, count);
  errno = 0;
  ck_assert_int_eq (wire_check_range (&h, dev_size, gran, err, sizeof err),
                    -1);
  ck_assert_int_eq (errno, EPROTO);
  ck_assert_msg (strstr (err, msg) != NULL,
                 "error \"%s\" does not contain \"%s\"", err, msg);
}

START_TEST (test_check_range)
{
  static const unsigned types[] = {
    REPL_MSG_WRITE, REPL_MSG_TRIM, REPL_MSG_ZERO, REPL_MSG_RESYNC_DATA,
  };
  const uint64_t size = UINT64_C (1) << 30;
  struct repl_hdr h;
  size_t i;

  for (i = 0; i < sizeof types / sizeof types[0]; ++i) {
    unsigned t = types[i];

    range_ok (t, 0, 4096, size, 4096);
    range_ok (t, size - 4096, 4096, size, 4096);      /* exactly at end */
    range_bad (t, size - 4096, 8192, size, 4096, "beyond the end");
    range_bad (t, size, 4096, size, 4096, "beyond the end");
    range_bad (t, UINT64_C (1) << 40, 4096, size, 4096, "beyond the end");
    /* offset + count wraps to something small. */
    range_bad (t, UINT64_MAX - 4095, 8192, size, 4096, "overflows");
    range_bad (t, UINT64_MAX, 1, UINT64_MAX, 4096, "overflows");
    range_bad (t, UINT64_MAX - 4095, 8192, UINT64_MAX, 4096, "overflows");
  }
  /* Not a wrap: ends exactly at UINT64_MAX. */
  range_ok (REPL_MSG_WRITE, UINT64_MAX - 4096, 4096, UINT64_MAX, 4096);
  range_bad (REPL_MSG_WRITE, 1, 4096, 4096, 512,
             "WRITE: offset 1 + count 4096 beyond the end of the volume "
             "(4096 bytes)");

  /* WRITE, TRIM and ZERO need no alignment. */
  range_ok (REPL_MSG_WRITE, 1, 513, size, 4096);
  range_ok (REPL_MSG_TRIM, 1, 513, size, 4096);
  range_ok (REPL_MSG_ZERO, 1, 513, size, 4096);

  /* RESYNC_DATA: aligned start, aligned end or end of volume. */
  range_ok (REPL_MSG_RESYNC_DATA, 65536, 65536, size, 65536);
  range_ok (REPL_MSG_RESYNC_DATA, 65536, 131072, size, 65536);
  range_bad (REPL_MSG_RESYNC_DATA, 4096, 65536, size, 65536,
             "RESYNC_DATA: offset 4096 not a multiple of the granularity "
             "65536");
  range_bad (REPL_MSG_RESYNC_DATA, 512, 512, size, 1024,
             "offset 512 not a multiple");
  range_bad (REPL_MSG_RESYNC_DATA, 65536, 4096, size, 65536,
             "RESYNC_DATA: end 69632 neither a multiple of the granularity "
             "65536 nor the end of the volume");
  range_bad (REPL_MSG_RESYNC_DATA, 0, 65537, size, 65536, "end 65537");
  /* Short last chunk: volume of 10 full chunks and 1000 bytes. */
  range_ok (REPL_MSG_RESYNC_DATA, 10 * 4096, 1000, 10 * 4096 + 1000, 4096);
  range_ok (REPL_MSG_RESYNC_DATA, 8 * 4096, 2 * 4096 + 1000,
            10 * 4096 + 1000, 4096);
  range_bad (REPL_MSG_RESYNC_DATA, 10 * 4096, 999, 10 * 4096 + 1000, 4096,
             "end 41959 neither");
  range_bad (REPL_MSG_RESYNC_DATA, 10 * 4096, 1001, 10 * 4096 + 1000, 4096,
             "beyond the end");
  /* A volume smaller than one chunk. */
  range_ok (REPL_MSG_RESYNC_DATA, 0, 1000, 1000, 4096);

  /* Other types always pass, whatever their offset. */
  wire_hdr_init (&h, REPL_MSG_RESYNC_START, 0, 0, 0, 0, UINT64_MAX);
  ck_assert_int_eq (wire_check_range (&h, 4096, 4096, NULL, 0), 0);
  wire_hdr_init (&h, REPL_MSG_ACK, 0, 0, 0, UINT64_MAX, UINT64_MAX);
  ck_assert_int_eq (wire_check_range (&h, 0, 4096, NULL, 0), 0);
}
END_TEST

static void
valid_hello (struct repl_hello *hello)
{
  memset (hello, 0, sizeof *hello);
  hello->version = REPL_PROTO_VERSION;
  hello->features = 0;
  hello->node_id = 3;
  hello->peer_id = 7;
  strcpy (hello->resource, "r0");
  hello->role = REPL_ROLE_PRIMARY;
  hello->disk_state = REPL_DISK_UPTODATE;
  hello->size = UINT64_C (0x0000012345678000);
  hello->uuids.current = UINT64_C (0x0102030405060708);
  hello->uuids.bitmap = UINT64_C (0x1112131415161718);
  hello->uuids.history[0] = UINT64_C (0x2122232425262728);
  hello->uuids.history[1] = UINT64_C (0x3132333435363738);
  hello->uuids.flags = 5;
  hello->uuids.changes = 9;
  hello->primary_since = UINT64_C (0x0000018c5f6e7d80);
}

/* The HELLO carries who the sender is, and nothing of its data: the
 * state fields of the struct never reach its bytes. */
START_TEST (test_hello_round_trip)
{
  static const uint8_t want[REPL_HELLO_SIZE] = {
    0, 0, 0, 5,                 /* version */
    0, 0, 0, 0,                 /* features */
    0, 0, 0, 3,                 /* node_id */
    0, 0, 0, 7,                 /* peer_id */
    'r', '0', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* resource */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  };
  struct repl_hello in, out, other;
  uint8_t buf[REPL_HELLO_SIZE], buf2[REPL_HELLO_SIZE];
  char err[256] = "";
  char longname[REPL_RESOURCE_MAX];

  ck_assert_int_eq (REPL_PROTO_VERSION, 5);
  valid_hello (&in);
  memset (buf, 0xaa, sizeof buf);
  wire_encode_hello (&in, buf);
  ck_assert_mem_eq (buf, want, REPL_HELLO_SIZE);
  memset (&out, 0xaa, sizeof out);
  ck_assert_msg (wire_decode_hello (buf, sizeof buf, &out, err, sizeof err)
                 == 0, "%s", err);
  ck_assert_uint_eq (out.version, in.version);
  ck_assert_uint_eq (out.features, 0);
  ck_assert_uint_eq (out.node_id, in.node_id);
  ck_assert_uint_eq (out.peer_id, in.peer_id);
  ck_assert_mem_eq (out.resource, in.resource, REPL_RESOURCE_MAX);
  /* The state part of out is left alone: HELLO_STATE fills it. */
  ck_assert_uint_eq (out.role, 0xaaaaaaaa);
  ck_assert_uint_eq (out.size, UINT64_C (0xaaaaaaaaaaaaaaaa));
  ck_assert_uint_eq (out.uuids.current, UINT64_C (0xaaaaaaaaaaaaaaaa));
  ck_assert_uint_eq (out.primary_since, UINT64_C (0xaaaaaaaaaaaaaaaa));

  /* Another state gives the same bytes. */
  valid_hello (&other);
  other.role = REPL_ROLE_SECONDARY;
  other.disk_state = REPL_DISK_INCONSISTENT;
  other.size = 1;
  other.uuids.current = 99;
  other.primary_since = 0;
  wire_encode_hello (&other, buf2);
  ck_assert_mem_eq (buf2, want, REPL_HELLO_SIZE);

  /* Feature AUTH; the longest resource name; extreme ids. */
  memset (longname, 'a', sizeof longname - 1);
  longname[sizeof longname - 1] = '\0';
  valid_hello (&in);
  in.features = REPL_FEATURE_AUTH;
  in.node_id = UINT32_MAX;
  in.peer_id = 0;
  strcpy (in.resource, longname);
  wire_encode_hello (&in, buf);
  ck_assert_int_eq (buf[16 + REPL_RESOURCE_MAX - 1], 0);
  ck_assert_msg (wire_decode_hello (buf, sizeof buf, &out,
                                    err, sizeof err) == 0, "%s", err);
  ck_assert_uint_eq (out.features, REPL_FEATURE_AUTH);
  ck_assert_uint_eq (out.node_id, UINT32_MAX);
  ck_assert_uint_eq (out.peer_id, 0);
  ck_assert_str_eq (out.resource, longname);

  /* Garbage after the NUL in the host struct does not reach the wire. */
  valid_hello (&in);
  memset (in.resource + 3, 'z', REPL_RESOURCE_MAX - 3);
  wire_encode_hello (&in, buf);
  ck_assert_mem_eq (buf, want, REPL_HELLO_SIZE);
}
END_TEST

START_TEST (test_hello_state_round_trip)
{
  static const uint8_t want[REPL_HELLO_STATE_SIZE] = {
    0, 0, 0, 1,                 /* role primary */
    0, 0, 0, 2,                 /* UpToDate */
    0x00, 0x00, 0x01, 0x23, 0x45, 0x67, 0x80, 0x00, /* size */
    1, 2, 3, 4, 5, 6, 7, 8,     /* current UUID */
    0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, /* bitmap UUID */
    0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28, /* history */
    0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38,
    0, 0, 0, 5,                 /* flags */
    0, 0, 0, 9,                 /* changes */
    0, 0, 0x01, 0x8c, 0x5f, 0x6e, 0x7d, 0x80, /* primary_since */
    0, 0, 0, 0x05,              /* routed: nodes 0 and 2 */
    0, 0, 0, 0,                 /* reserved */
  };
  struct repl_hello in, out;
  uint8_t buf[REPL_HELLO_STATE_SIZE];
  char err[256] = "";
  unsigned role, ds;

  valid_hello (&in);
  in.routed = 5;
  memset (buf, 0xaa, sizeof buf);
  wire_encode_hello_state (&in, buf);
  ck_assert_mem_eq (buf, want, REPL_HELLO_STATE_SIZE);
  memset (&out, 0xaa, sizeof out);
  ck_assert_msg (wire_decode_hello_state (buf, sizeof buf, &out, err,
                                          sizeof err) == 0, "%s", err);
  ck_assert_uint_eq (out.role, in.role);
  ck_assert_uint_eq (out.disk_state, in.disk_state);
  ck_assert_uint_eq (out.size, in.size);
  ck_assert_uint_eq (out.uuids.current, in.uuids.current);
  ck_assert_uint_eq (out.uuids.bitmap, in.uuids.bitmap);
  ck_assert_uint_eq (out.uuids.history[0], in.uuids.history[0]);
  ck_assert_uint_eq (out.uuids.history[1], in.uuids.history[1]);
  ck_assert_uint_eq (out.uuids.flags, in.uuids.flags);
  ck_assert_uint_eq (out.uuids.changes, in.uuids.changes);
  ck_assert_uint_eq (out.primary_since, in.primary_since);
  ck_assert_uint_eq (out.routed, 5);
  /* The HELLO part of out is left alone. */
  ck_assert_uint_eq (out.version, 0xaaaaaaaa);
  ck_assert_uint_eq (out.node_id, 0xaaaaaaaa);

  /* Every role and disk state; the largest size; all flags. */
  for (role = 0; role <= REPL_ROLE_MAX; ++role)
    for (ds = 0; ds <= REPL_DISK_STATE_MAX; ++ds) {
      valid_hello (&in);
      in.role = role;
      in.disk_state = ds;
      in.size = INT64_MAX;
      in.uuids.flags = 7;
      in.uuids.changes = UINT32_MAX;
      in.primary_since = UINT64_MAX;
      wire_encode_hello_state (&in, buf);
      ck_assert_msg (wire_decode_hello_state (buf, sizeof buf, &out,
                                              err, sizeof err) == 0,
                     "%s", err);
      ck_assert_uint_eq (out.role, role);
      ck_assert_uint_eq (out.disk_state, ds);
      ck_assert_uint_eq (out.size, INT64_MAX);
      ck_assert_uint_eq (out.uuids.flags, 7);
      ck_assert_uint_eq (out.uuids.changes, UINT32_MAX);
      ck_assert_uint_eq (out.primary_since, UINT64_MAX);
    }
}
END_TEST

static void
hello_bad (const uint8_t *buf, size_t len, const char *msg)
{
  struct repl_hello out;
  char err[256] = "";

  errno = 0;
  ck_assert_int_eq (wire_decode_hello (buf, len, &out, err, sizeof err), -1);
  ck_assert_int_eq (errno, EPROTO);
  ck_assert_msg (strstr (err, msg) != NULL,
                 "error \"%s\" does not contain \"%s\"", err, msg);
  errno = 0;
  ck_assert_int_eq (wire_decode_hello (buf, len, &out, NULL, 0), -1);
  ck_assert_int_eq (errno, EPROTO);
}

START_TEST (test_hello_reject)
{
  struct repl_hello in;
  uint8_t good[REPL_HELLO_MAX], buf[REPL_HELLO_MAX];
  size_t i;

  valid_hello (&in);
  memset (good, 0, sizeof good);
  wire_encode_hello (&in, good);

  hello_bad (good, 0, "payload length 0 < 4");
  hello_bad (good, 3, "payload length 3 < 4");
  hello_bad (good, 4, "payload length 4 != 80");
  hello_bad (good, REPL_HELLO_SIZE - 1, "payload length 79 != 80");
  hello_bad (good, REPL_HELLO_SIZE + 1, "payload length 81 != 80");
  hello_bad (good, REPL_HELLO_MAX, "payload length 256 != 80");

  /* The version is checked before the length: a HELLO of protocol 3
   * (144 bytes, the state in it) is named for its version. */
  memcpy (buf, good, sizeof buf);
  buf[3] = 3;
  hello_bad (buf, 144, "HELLO: version 3 not supported (want 5)");
  hello_bad (buf, REPL_HELLO_SIZE, "version 3 not supported");
  hello_bad (buf, 4, "version 3 not supported");
  buf[3] = 1;
  hello_bad (buf, REPL_HELLO_SIZE, "version 1");
  buf[3] = 4;
  hello_bad (buf, REPL_HELLO_SIZE, "version 4 not supported (want 5)");
  buf[3] = 6;
  hello_bad (buf, REPL_HELLO_SIZE, "version 6");
  buf[3] = 0;
  hello_bad (buf, REPL_HELLO_SIZE, "version 0");
  buf[0] = 1; buf[3] = 4;
  hello_bad (buf, REPL_HELLO_SIZE, "version 16777220");

  memcpy (buf, good, sizeof buf);
  buf[7] = 4;
  hello_bad (buf, REPL_HELLO_SIZE, "features 0x4");
  memcpy (buf, good, sizeof buf);
  buf[4] = 0x80;
  hello_bad (buf, REPL_HELLO_SIZE, "features 0x80000000");

  /* Resource: no NUL anywhere in its 64 bytes. */
  memcpy (buf, good, sizeof buf);
  memset (buf + 16, 'a', REPL_RESOURCE_MAX);
  hello_bad (buf, REPL_HELLO_SIZE, "resource not NUL-terminated");

  /* Empty resource. */
  memcpy (buf, good, sizeof buf);
  memset (buf + 16, 0, REPL_RESOURCE_MAX);
  hello_bad (buf, REPL_HELLO_SIZE, "resource empty");

  /* Junk after the NUL, at every position of the padding. */
  for (i = 16 + 3; i < 16 + REPL_RESOURCE_MAX; ++i) {
    char msg[64];

    memcpy (buf, good, sizeof buf);
    buf[i] = 'x';
    snprintf (msg, sizeof msg, "resource byte %zu after the NUL is 0x78",
              i - 16);
    hello_bad (buf, REPL_HELLO_SIZE, msg);
  }
  /* An empty name with junk after it is "empty" first. */
  memcpy (buf, good, sizeof buf);
  buf[16] = 0;
  hello_bad (buf, REPL_HELLO_SIZE, "resource empty");
}
END_TEST

static void
hello_state_bad (const uint8_t *buf, size_t len, const char *msg)
{
  struct repl_hello out;
  char err[256] = "";

  errno = 0;
  ck_assert_int_eq (wire_decode_hello_state (buf, len, &out, err,
                                             sizeof err), -1);
  ck_assert_int_eq (errno, EPROTO);
  ck_assert_msg (strstr (err, msg) != NULL,
                 "error \"%s\" does not contain \"%s\"", err, msg);
  errno = 0;
  ck_assert_int_eq (wire_decode_hello_state (buf, len, &out, NULL, 0), -1);
  ck_assert_int_eq (errno, EPROTO);
}

START_TEST (test_hello_state_reject)
{
  struct repl_hello in;
  uint8_t good[REPL_HELLO_STATE_SIZE + 1], buf[REPL_HELLO_STATE_SIZE + 1];

  valid_hello (&in);
  wire_encode_hello_state (&in, good);
  good[REPL_HELLO_STATE_SIZE] = 0;

  hello_state_bad (good, 0, "HELLO_STATE: payload length 0 != 72");
  hello_state_bad (good, REPL_HELLO_STATE_SIZE - 1, "length 71 != 72");
  hello_state_bad (good, REPL_HELLO_STATE_SIZE + 1, "length 73 != 72");

  /* The routed mask: from a Primary only; the reserved word 0. */
  memcpy (buf, good, sizeof buf);
  buf[67] = 1;
  buf[3] = REPL_ROLE_SECONDARY;
  hello_state_bad (buf, REPL_HELLO_STATE_SIZE, "HELLO_STATE: routed mask "
                   "0x1 from a node that is not Primary");
  memcpy (buf, good, sizeof buf);
  buf[71] = 1;
  hello_state_bad (buf, REPL_HELLO_STATE_SIZE, "HELLO_STATE: reserved field "
                   "0x1 not 0");

  /* The UUIDs' change count and primary_since are any number. */
  memcpy (buf, good, sizeof buf);
  buf[55] = 1;
  buf[56] = 0xff;
  {
    struct repl_hello out;
    char err[256] = "";
    ck_assert_msg (wire_decode_hello_state (buf, REPL_HELLO_STATE_SIZE, &out,
                                            err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq (out.uuids.changes, 1);
    ck_assert_uint_eq (out.primary_since >> 56, 0xff);
  }

  memcpy (buf, good, sizeof buf);
  buf[3] = REPL_ROLE_MAX + 1;
  hello_state_bad (buf, REPL_HELLO_STATE_SIZE, "HELLO_STATE: role 2 out of "
                   "range");
  memset (buf, 0xff, 4);
  hello_state_bad (buf, REPL_HELLO_STATE_SIZE, "role 4294967295");

  memcpy (buf, good, sizeof buf);
  buf[7] = REPL_DISK_STATE_MAX + 1;
  hello_state_bad (buf, REPL_HELLO_STATE_SIZE, "HELLO_STATE: disk state 4 "
                   "out of range");
  buf[4] = 1;
  hello_state_bad (buf, REPL_HELLO_STATE_SIZE, "disk state 16777220");

  /* A size no file offset can hold. */
  memcpy (buf, good, sizeof buf);
  memset (buf + 8, 0, 8);
  buf[8] = 0x80;
  hello_state_bad (buf, REPL_HELLO_STATE_SIZE, "HELLO_STATE: size "
                   "9223372036854775808 out of range");
  memset (buf + 8, 0xff, 8);
  hello_state_bad (buf, REPL_HELLO_STATE_SIZE, "size 18446744073709551615");

  /* Generation UUID flags beyond Consistent | CrashedPrimary | Primary |
   * Tentative. */
  memcpy (buf, good, sizeof buf);
  buf[51] = 0x10;
  hello_state_bad (buf, REPL_HELLO_STATE_SIZE, "HELLO_STATE: generation UUID "
                   "flags 0x10 unknown");
  memcpy (buf, good, sizeof buf);
  buf[48] = 0x80;
  hello_state_bad (buf, REPL_HELLO_STATE_SIZE, "flags 0x80000000 unknown");
}
END_TEST

/* xorshift64*: deterministic, seeded, good enough for fuzzing. */
static uint64_t
rng_next (uint64_t *s)
{
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * UINT64_C (2685821657736338717);
}

/* 100k random headers: never crash, and whatever is accepted re-encodes
 * to the same bytes and obeys the rules of its type.  Most inputs are
 * nudged towards validity (right magic, small type, plausible lengths)
 * so that the later checks are reached too. */
START_TEST (test_hdr_fuzz)
{
  uint64_t seed = UINT64_C (0x9e3779b97f4a7c15);
  unsigned iter, accepted = 0, rejected = 0;

  for (iter = 0; iter < 100000; ++iter) {
    uint8_t buf[REPL_HDR_SIZE], buf2[REPL_HDR_SIZE];
    struct repl_hdr h;
    char err[128];
    uint64_t r;
    size_t i;
    int ret;

    for (i = 0; i < REPL_HDR_SIZE; i += 8) {
      r = rng_next (&seed);
      memcpy (buf + i, &r, 8);
    }
    r = rng_next (&seed);
    if (r & 1) {                /* right magic */
      buf[0] = 0x4e; buf[1] = 0x42; buf[2] = 0x52; buf[3] = 0x50;
    }
    if (r & 2) {                /* type 0..15 */
      buf[4] = 0; buf[5] &= 0x0f;
    }
    if (r & 4) {                /* flags in the low two bits */
      buf[6] = 0; buf[7] &= 0x03;
    }
    if (r & 8) {                /* length 0 or small */
      buf[8] = buf[9] = 0;
      if (r & 16)
        buf[10] = buf[11] = 0;
    }
    if (r & 32)                 /* count == length */
      memcpy (buf + 12, buf + 8, 4);
    else if (r & 64)            /* count 0 */
      memset (buf + 12, 0, 4);
    if ((r & 0x380) == 0x380) { /* length = HELLO or HELLO_STATE */
      memset (buf + 8, 0, 4);
      buf[11] = (r & 0x400) ? REPL_HELLO_SIZE : REPL_HELLO_STATE_SIZE;
    }

    err[0] = '\0';
    errno = 0;
    ret = wire_decode_hdr (buf, &h, err, sizeof err);
    if (ret == 0) {
      accepted++;
      wire_encode_hdr (&h, buf2);
      ck_assert_mem_eq (buf, buf2, REPL_HDR_SIZE);
      ck_assert_uint_eq (h.magic, REPL_MAGIC);
      ck_assert (h.type >= 1 && h.type <= REPL_MSG_TYPE_MAX);
      ck_assert (h.length <= REPL_MAX_PAYLOAD);
      ck_assert_uint_eq (h.flags & ~expect[h.type - 1].flags, 0);
      ck_assert_str_ne (wire_type_name (h.type), "unknown");
    }
    else {
      /* One plain test on this hot path: a Check assertion per
       * iteration is slow under valgrind. */
      rejected++;
      if (ret != -1 || errno != EPROTO || err[0] == '\0' ||
          memchr (err, '\0', sizeof err) == NULL)
        ck_abort_msg ("iteration %u: ret %d errno %d err \"%.*s\"",
                      iter, ret, errno, (int) sizeof err, err);
    }
  }
  /* The fuzzer must reach both outcomes, or it tests nothing. */
  ck_assert_uint_gt (accepted, 100);
  ck_assert_uint_gt (rejected, 10000);
}
END_TEST

/* Random HELLO payloads: never crash; accepted ones re-encode the same. */
START_TEST (test_hello_fuzz)
{
  uint64_t seed = UINT64_C (0x243f6a8885a308d3);
  unsigned iter, accepted = 0;

  for (iter = 0; iter < 20000; ++iter) {
    uint8_t buf[REPL_HELLO_MAX], buf2[REPL_HELLO_SIZE];
    struct repl_hello hello;
    uint64_t r;
    size_t i, n;

    for (i = 0; i < sizeof buf; i += 8) {
      r = rng_next (&seed);
      memcpy (buf + i, &r, 8);
    }
    r = rng_next (&seed);
    if (r & 1) {
      memset (buf, 0, 8);
      buf[3] = REPL_PROTO_VERSION;
      buf[7] = (r >> 8) & 1;    /* feature AUTH, or none */
    }
    if (r & 2) {
      n = (r >> 24) % (REPL_RESOURCE_MAX + 1);
      if (n < REPL_RESOURCE_MAX)
        memset (buf + 16 + n, 0, REPL_RESOURCE_MAX - n);
      for (i = 0; i < n; ++i)
        if (buf[16 + i] == 0)
          buf[16 + i] = 'a';
    }

    if (wire_decode_hello (buf, (r & 4) ? (r >> 32) % (REPL_HELLO_MAX + 1)
                                        : REPL_HELLO_SIZE,
                           &hello, NULL, 0) == 0) {
      accepted++;
      ck_assert_uint_eq (hello.version, REPL_PROTO_VERSION);
      ck_assert_uint_eq (hello.features & ~REPL_FEATURES_KNOWN, 0);
      wire_encode_hello (&hello, buf2);
      ck_assert_mem_eq (buf, buf2, REPL_HELLO_SIZE);
    }
  }
  ck_assert_uint_gt (accepted, 100);
}
END_TEST

/* Random HELLO_STATE payloads, likewise. */
START_TEST (test_hello_state_fuzz)
{
  uint64_t seed = UINT64_C (0x13198a2e03707344);
  unsigned iter, accepted = 0;

  for (iter = 0; iter < 20000; ++iter) {
    uint8_t buf[REPL_HELLO_STATE_SIZE], buf2[REPL_HELLO_STATE_SIZE];
    struct repl_hello hello;
    uint64_t r;
    size_t i;

    for (i = 0; i < sizeof buf; i += 8) {
      r = rng_next (&seed);
      memcpy (buf + i, &r, 8);
    }
    r = rng_next (&seed);
    if (r & 1) {
      memset (buf, 0, 8);
      buf[3] = (r >> 8) % 3;
      buf[7] = (r >> 16) % 5;
      buf[8] &= (r & 2) ? 0x7f : 0xff;
      memset (buf + 48, 0, 3);
      buf[51] &= (r & 8) ? 0x07 : 0x0f;
      /* The reserved word 0; a routed mask only from a Primary. */
      memset (buf + 68, 0, 4);
      if (buf[3] != REPL_ROLE_PRIMARY)
        memset (buf + 64, 0, 4);
    }

    if (wire_decode_hello_state (buf, (r & 4) ? (r >> 32) % 100 : sizeof buf,
                                 &hello, NULL, 0) == 0) {
      accepted++;
      ck_assert_uint_le (hello.role, REPL_ROLE_MAX);
      ck_assert_uint_le (hello.disk_state, REPL_DISK_STATE_MAX);
      ck_assert_uint_le (hello.size, INT64_MAX);
      ck_assert_uint_le (hello.uuids.flags, GU_FLAGS_KNOWN);
      ck_assert (hello.routed == 0 || hello.role == REPL_ROLE_PRIMARY);
      wire_encode_hello_state (&hello, buf2);
      ck_assert_mem_eq (buf, buf2, REPL_HELLO_STATE_SIZE);
    }
  }
  ck_assert_uint_gt (accepted, 100);
}
END_TEST

/* The message table's properties, as wire.h documents them, written out
 * again here. */
START_TEST (test_type_properties)
{
  static const unsigned sequenced[] = {
    REPL_MSG_WRITE, REPL_MSG_TRIM, REPL_MSG_ZERO, REPL_MSG_FLUSH,
    REPL_MSG_RESYNC_START, REPL_MSG_RESYNC_DATA, REPL_MSG_RESYNC_DONE,
    REPL_MSG_VERIFY_REQ, REPL_MSG_OUT_OF_SYNC, REPL_MSG_READ_REQ,
    REPL_MSG_RESIZE,
  };
  static const unsigned handshake[] = {
    REPL_MSG_HELLO, REPL_MSG_AUTH_CHALLENGE, REPL_MSG_AUTH_RESPONSE,
    REPL_MSG_HELLO_STATE,
  };
  unsigned t;
  size_t i;

  for (t = 0; t <= REPL_MSG_TYPE_MAX + 1; t++) {
    bool seq = false, hs = false;
    bool changes = t == REPL_MSG_WRITE || t == REPL_MSG_TRIM ||
                   t == REPL_MSG_ZERO;
    bool ackable;

    for (i = 0; i < sizeof sequenced / sizeof sequenced[0]; i++)
      seq |= sequenced[i] == t;
    for (i = 0; i < sizeof handshake / sizeof handshake[0]; i++)
      hs |= handshake[i] == t;
    ackable = seq && t != REPL_MSG_FLUSH && t != REPL_MSG_READ_REQ &&
              t != REPL_MSG_VERIFY_REQ && t != REPL_MSG_OUT_OF_SYNC &&
              t != REPL_MSG_RESIZE;
    ck_assert_msg (wire_type_sequenced (t) == seq, "type %u sequenced", t);
    ck_assert_msg (wire_type_changes_data (t) == changes,
                   "type %u changes data", t);
    ck_assert_msg (wire_type_receipt_ackable (t, 0) == ackable,
                   "type %u receipt-ackable", t);
    ck_assert_msg (!wire_type_receipt_ackable (t, REPL_FLAG_FUA),
                   "type %u receipt-ackable with FUA", t);
    if (hs || t == 0 || t > REPL_MSG_TYPE_MAX)
      ck_assert_msg (wire_type_states (t) == 0, "type %u states", t);
    else
      ck_assert_msg (wire_type_states (t) != 0, "type %u states", t);
  }
  /* Sent by the driving side, answered by the other. */
  ck_assert (wire_type_from_driver (REPL_MSG_WRITE));
  ck_assert (wire_type_from_driver (REPL_MSG_RESYNC_DATA));
  ck_assert (wire_type_from_driver (REPL_MSG_READ_REQ));
  ck_assert (!wire_type_from_driver (REPL_MSG_ACK));
  ck_assert (!wire_type_from_driver (REPL_MSG_BITMAP));
  ck_assert (!wire_type_from_driver (REPL_MSG_VERIFY_REPLY));
  ck_assert (!wire_type_from_driver (REPL_MSG_READ_REPLY));
  ck_assert (!wire_type_from_driver (REPL_MSG_PING));
  ck_assert (wire_type_from_driver (REPL_MSG_RESIZE));
  ck_assert (wire_type_from_driver (REPL_MSG_RESIZE_QUERY));
  ck_assert (!wire_type_from_driver (REPL_MSG_RESIZE_REPLY));
  /* A RESIZE only between two writes of an Established connection. */
  ck_assert_uint_eq (wire_type_states (REPL_MSG_RESIZE),
                     1u << REPL_ESTABLISHED);
}
END_TEST

static Suite *
wire_suite (void)
{
  Suite *s = suite_create ("wire");
  TCase *tc;

  tc = tcase_create ("header");
  tcase_set_timeout (tc, 30);
  tcase_add_test (tc, test_type_names);
  tcase_add_test (tc, test_type_properties);
  tcase_add_test (tc, test_hdr_layout);
  tcase_add_test (tc, test_hdr_round_trip);
  tcase_add_test (tc, test_hdr_extremes);
  tcase_add_test (tc, test_hdr_bad_magic);
  tcase_add_test (tc, test_hdr_bad_type);
  tcase_add_test (tc, test_hdr_bad_flags);
  tcase_add_test (tc, test_hdr_too_long);
  tcase_add_test (tc, test_hdr_length_count);
  tcase_add_test (tc, test_hdr_err_buffer);
  tcase_add_test (tc, test_read_reply_error);
  tcase_add_test (tc, test_digest);
  suite_add_tcase (s, tc);

  tc = tcase_create ("range");
  tcase_set_timeout (tc, 30);
  tcase_add_test (tc, test_check_range);
  suite_add_tcase (s, tc);

  tc = tcase_create ("hello");
  tcase_set_timeout (tc, 30);
  tcase_add_test (tc, test_hello_round_trip);
  tcase_add_test (tc, test_hello_reject);
  tcase_add_test (tc, test_hello_state_round_trip);
  tcase_add_test (tc, test_hello_state_reject);
  suite_add_tcase (s, tc);

  /* Generous: valgrind slows the 100k iterations down a lot. */
  tc = tcase_create ("fuzz");
  tcase_set_timeout (tc, 300);
  tcase_add_test (tc, test_hdr_fuzz);
  tcase_add_test (tc, test_hello_fuzz);
  tcase_add_test (tc, test_hello_state_fuzz);
  suite_add_tcase (s, tc);

  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (wire_suite ());
  int failed;

  srunner_run_all (sr, CK_ENV);
  failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
