/* nbdrepl: libFuzzer harness for the start of a peer connection.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * The connection's state machine lives in server/ (peer.c, listener.c,
 * peer-sync.c, peer-receive.c) and needs threads, sockets and a running
 * node, so this harness runs the pure part of it: the same common/
 * decode and check functions the receiver calls, in the same order, the
 * real decision at connect (decide.c decide_connect) and the real
 * replication state machine (repl-state.c: which message may arrive in
 * which state, which transition is allowed), with the little state they
 * need (our role, the peer's role, the next sequence number, the bitmap
 * being received) kept here as the engine keeps it.  Where the engine's
 * own check is a few lines of server/ code (BITMAP offsets, STATE
 * values, the ACK window), it is repeated here, marked with the
 * function it mirrors.
 *
 * Input:
 *   byte 0     bit 0: this node is Primary; bits 1-2: our generation
 *              UUIDs (one of four), bit 3: ours are the next 40 bytes
 *              instead (REPL_UUIDS_SIZE, wire layout); bits 4-5: bitmap
 *              granularity (grans[]); bits 6-7: volume size (sizes[])
 *   [40 bytes  our UUIDs, with bit 3]
 *   then what the peer sends: a HELLO (header and payload), a
 *   HELLO_STATE, then any number of framed messages.
 *
 * We are node 0 of resource "r0"; the peer must say it is node 1
 * talking to node 0 (HELLO), with a volume of our size (HELLO_STATE).
 * The authentication between the two (peer-auth.c: random challenges
 * and an HMAC, server code with sockets) is not modelled: the harness
 * takes the peer as proven, as the engine does once it has been.  The
 * stream ends where the engine would end the connection (or wait for
 * more bytes).
 */
#include <config.h>

#include <endian.h>
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "bitmap.h"
#include "decide.h"
#include "fuzz.h"
#include "repl-state.h"
#include "uuid-compare.h"
#include "wire.h"

#define OUR_ID          0
#define PEER_ID         1
#define RESOURCE        "r0"
#define WINDOW          16      /* messages we have in flight (Primary) */
#define VERIFY_MAX      (1024u << 10)   /* server/internal.h */
#define DISK_MAX        ((1u << 20) + 512)

static const uint32_t grans[4] = { 4096, 512, 65536, 1u << 20 };
static const uint64_t sizes[4] = {
  UINT64_C (1) << 20, (UINT64_C (1) << 20) + 512,
  UINT64_C (64) << 20, (UINT64_C (3) << 30) + 4096,
};

/* Our disk, for the sizes that fit: data messages are applied to it, so
 * that a range the checks let through beyond the end is caught by ASan. */
static uint8_t *disk;

static struct gen_uuids
our_uuids (unsigned which)
{
  struct gen_uuids u = { 0 };

  switch (which) {
  case 0:                       /* just created */
    uuid_init_fresh (&u);
    break;
  case 1:                       /* in sync, consistent */
    u.gu_current = UINT64_C (0x1111111111111110);
    u.gu_history[0] = UINT64_C (0x2222222222222220);
    u.gu_flags = GU_FLAG_CONSISTENT;
    break;
  case 2:                       /* a crashed primary with a bitmap */
    u.gu_current = UINT64_C (0x1111111111111110);
    u.gu_bitmap = UINT64_C (0x2222222222222220);
    u.gu_history[0] = UINT64_C (0x2222222222222220);
    u.gu_history[1] = UINT64_C (0x3333333333333330);
    u.gu_flags = GU_FLAG_CONSISTENT | GU_FLAG_CRASHED_PRIMARY;
    break;
  default:                      /* an interrupted resync target */
    u.gu_current = UINT64_C (0x4444444444444440);
    u.gu_history[0] = UINT64_C (0x1111111111111110);
    break;
  }
  return u;
}

static struct gen_uuids
from_wire (const struct repl_uuids *w)
{
  return (struct gen_uuids) {
    .gu_current = w->current, .gu_bitmap = w->bitmap,
    .gu_history = { w->history[0], w->history[1] }, .gu_flags = w->flags,
  };
}

static bool
consistent (const struct gen_uuids *u)
{
  return (u->gu_flags & GU_FLAG_CONSISTENT) && u->gu_current != 0 &&
         u->gu_current != UUID_JUST_CREATED;
}

/* generation.c gen_decide: decide.c's decision, with the promises of
 * uuid-compare.h: the peer, comparing the other way round, reaches the
 * mirror image, and neither side is a sync source with a disk that is
 * not Consistent; a Primary is never the target.  Returns the decision,
 * or -1 if the connection is refused. */
static int
decide (const struct gen_uuids *local, const struct gen_uuids *peer,
        bool we_primary, bool peer_primary, uint32_t peer_changes)
{
  struct connect_case cc = {
    .cc_our_id = OUR_ID, .cc_peer_id = PEER_ID,
    .cc_we_primary = we_primary, .cc_peer_primary = peer_primary,
    .cc_peer_changes = peer_changes,
  };
  struct connect_decision cd;
  enum uuid_decision dm;
  int rule_m;

  decide_connect (local, peer, &cc, &cd);
  dm = uuid_compare (peer, local, &rule_m);
  FUZZ_CHECK (cd.cd_decision <= UUID_DECISION_MAX);
  FUZZ_CHECK (cd.cd_decision != UUID_SYNC_BITMAP_TIEBREAK);
  FUZZ_CHECK (dm == uuid_decision_mirror (cd.cd_decision) ||
              dm == UUID_SYNC_BITMAP_TIEBREAK);
  FUZZ_CHECK (strcmp (uuid_rule_name (cd.cd_rule), "unknown") != 0);
  FUZZ_CHECK (!uuid_decision_is_source (cd.cd_decision) || consistent (local));
  FUZZ_CHECK (!uuid_decision_is_target (cd.cd_decision) || consistent (peer));
  if (cd.cd_verdict != CONNECT)
    return -1;
  FUZZ_CHECK (!(we_primary && uuid_decision_is_target (cd.cd_decision)));
  FUZZ_CHECK (!(peer_primary && uuid_decision_is_source (cd.cd_decision)));
  return cd.cd_decision;
}

/* state.c peer_set_repl_locked: only along the table. */
static void
set_repl (enum repl_state *s, enum repl_state to)
{
  if (*s == to)
    return;
  FUZZ_CHECK (repl_state_may (*s, to));
  *s = to;
}

struct conn {
  bool we_primary;
  bool peer_diskless;
  uint32_t peer_role;
  int decision;                 /* enum uuid_decision */
  enum repl_state repl;
  uint64_t size;
  uint32_t gran;
  uint64_t expect_seq;          /* next data message from the primary */
  uint64_t ring_first, ring_count;      /* our messages awaiting ACK */
  uint64_t bitmap_rx_bytes;
  struct bitmap bm;
};

/* secondary.c secondary_check (may_feed_us): resyncs from any storage
 * peer, never to a Primary; the rest from our Primary. */
static bool
may_feed_us (const struct conn *c, unsigned type)
{
  if (c->we_primary)
    return false;
  switch (type) {
  case REPL_MSG_RESYNC_START: case REPL_MSG_RESYNC_DATA:
  case REPL_MSG_RESYNC_DONE: case REPL_MSG_VERIFY_REQ:
    return !c->peer_diskless;
  default:
    return c->peer_role == REPL_ROLE_PRIMARY;
  }
}

/* peer-receive.c secondary_check and the secondary_apply_* handlers.
 * false: the connection ends. */
static bool
data_message (struct conn *c, const struct repl_hdr *h,
              const uint8_t *payload)
{
  char err[256];

  if (!may_feed_us (c, h->type))
    return false;
  if (h->seq != c->expect_seq)
    return false;
  if (wire_check_range (h, c->size, c->gran, err, sizeof err) == -1) {
    FUZZ_CHECK (errno == EPROTO && err[0] != '\0');
    return false;
  }
  if (h->type == REPL_MSG_RESYNC_START && h->offset > c->size)
    return false;
  c->expect_seq++;

  switch (h->type) {
  case REPL_MSG_WRITE:
  case REPL_MSG_RESYNC_DATA:
    if (disk != NULL && c->size <= DISK_MAX) {
      if (h->flags & REPL_FLAG_ZEROES)
        memset (disk + h->offset, 0, h->count);
      else
        memcpy (disk + h->offset, payload, h->count);
    }
    if (h->type == REPL_MSG_RESYNC_DATA)
      bitmap_clear_range (&c->bm, h->offset, h->count);
    break;
  case REPL_MSG_TRIM:
  case REPL_MSG_ZERO:
    if (disk != NULL && c->size <= DISK_MAX)
      memset (disk + h->offset, 0, h->count);
    break;
  case REPL_MSG_VERIFY_REQ:     /* verify.c verify_handle_request */
    if (h->count > VERIFY_MAX)
      return false;
    break;
  case REPL_MSG_OUT_OF_SYNC: {  /* forward.c forward_handle_out_of_sync */
    uint64_t mask = 0;
    size_t i;

    for (i = 0; i < 8; i++)
      mask = (mask << 8) | payload[i];
    if (mask > UINT32_MAX)
      return false;
    bitmap_set_range (&c->bm, h->offset, h->count);
    break;
  }
  case REPL_MSG_READ_REQ:       /* forward.c forward_handle_read */
    break;
  case REPL_MSG_RESIZE: {       /* resize.c resize_handle */
    uint64_t from = 0;
    size_t i;

    for (i = 0; i < 8; i++)
      from = (from << 8) | payload[i];
    if (h->offset == c->size)
      break;                    /* grown already */
    if (from != c->size || h->offset < c->size || h->offset > (64u << 20) ||
        c->we_primary)
      return false;
    if (bitmap_grow (&c->bm, h->offset) == -1)
      return false;
    if (!(h->flags & REPL_FLAG_ASSUME_CLEAN))
      bitmap_set_range (&c->bm, c->size, h->offset - c->size);
    c->size = h->offset;
    break;
  }
  case REPL_MSG_RESYNC_START:  /* secondary_apply_resync_start */
    if (c->decision < 0 || uuid_decision_is_source (c->decision))
      return false;
    set_repl (&c->repl, REPL_SYNC_TARGET);
    break;
  case REPL_MSG_RESYNC_DONE:
    bitmap_clear_all (&c->bm);
    set_repl (&c->repl, REPL_ESTABLISHED);
    break;
  default:
    break;
  }
  return true;
}

/* peer-sync.c sync_handle, BITMAP: words ORed in, nothing past the end
 * of the volume, bm_nset kept right. */
static bool
bitmap_message (struct conn *c, const struct repl_hdr *h,
                const uint8_t *payload)
{
  uint64_t nwords = (c->bm.bm_nbits + 63) / 64, i, first;

  if (!(c->repl == REPL_WF_BITMAP_S && h->offset % 8 == 0 &&
        h->offset == c->bitmap_rx_bytes &&
        h->offset / 8 + h->length / 8 <= nwords))
    return false;
  first = h->offset / 8;
  for (i = 0; i < h->length / 8; i++) {
    uint64_t *word = &c->bm.bm_words[first + i];
    uint64_t old = *word, w;

    memcpy (&w, payload + 8 * i, 8);
    *word |= le64toh (w);
    if (first + i == nwords - 1 && c->bm.bm_nbits % 64)
      *word &= (UINT64_C (1) << (c->bm.bm_nbits % 64)) - 1;
    c->bm.bm_nset += __builtin_popcountll (*word) -
                     __builtin_popcountll (old);
  }
  c->bitmap_rx_bytes += h->length;
  return true;
}

/* The bitmap's own bookkeeping still adds up. */
static void
check_bitmap (const struct bitmap *bm)
{
  uint64_t nwords = (bm->bm_nbits + 63) / 64, i, n = 0;

  for (i = 0; i < nwords; i++)
    n += __builtin_popcountll (bm->bm_words[i]);
  FUZZ_CHECK (n == bm->bm_nset && n == bitmap_count (bm));
  if (bm->bm_nbits % 64)
    FUZZ_CHECK ((bm->bm_words[nwords - 1] >> (bm->bm_nbits % 64)) == 0);
}

/* One message after the HELLO.  false: the connection ends. */
static bool
message (struct conn *c, const struct repl_hdr *h, const uint8_t *payload)
{
  char err[256];

  /* peer-receive.c check_state: only in the states where it may come. */
  if (!repl_state_accepts (h->type, c->repl))
    return false;
  if (wire_type_sequenced (h->type))
    return data_message (c, h, payload);

  switch (h->type) {
  case REPL_MSG_PING:
  case REPL_MSG_PONG:
  case REPL_MSG_GOODBYE:
    return true;
  case REPL_MSG_STATE:          /* role.c role_handle_state */
    if (h->offset > REPL_ROLE_MAX || h->seq > REPL_DISK_STATE_MAX)
      return false;
    if (h->offset == REPL_ROLE_PRIMARY && c->we_primary)
      return false;
    c->peer_role = h->offset;
    return true;
  case REPL_MSG_UUIDS: {        /* peer-sync.c sync_handle */
    struct repl_uuids w;
    struct gen_uuids u;

    if (wire_decode_uuids (payload, h->length, &w, err, sizeof err) == -1)
      return false;
    u = from_wire (&w);
    return uuid_check (&u, err, sizeof err) == 0;
  }
  case REPL_MSG_BITMAP:
    return bitmap_message (c, h, payload);
  case REPL_MSG_BITMAP_DONE: {
    uint64_t nwords = (c->bm.bm_nbits + 63) / 64;

    if (!(c->bitmap_rx_bytes == nwords * 8 && h->offset == nwords * 8))
      return false;
    set_repl (&c->repl, REPL_SYNC_SOURCE);
    return true;
  }
  case REPL_MSG_ACK:            /* peer-receive.c handle_ack */
  case REPL_MSG_NACK:
    if (c->ring_count == 0 || h->seq < c->ring_first ||
        h->seq > c->ring_first + c->ring_count - 1 ||
        h->type == REPL_MSG_NACK)
      return false;
    if (!(h->flags & REPL_FLAG_RECEIVED)) {
      c->ring_count -= h->seq - c->ring_first + 1;
      c->ring_first = h->seq + 1;
    }
    return true;
  case REPL_MSG_AWAY:           /* forward.c forward_handle_away */
    return h->offset <= UINT32_MAX && c->peer_role == REPL_ROLE_PRIMARY;
  case REPL_MSG_RESIZE_QUERY:   /* resize.c: answered, nothing changes */
    return true;
  case REPL_MSG_RESIZE_REPLY:   /* we asked for none */
  case REPL_MSG_READ_REPLY:     /* we asked for none */
  case REPL_MSG_VERIFY_REPLY:   /* we asked for none */
  case REPL_MSG_HELLO:          /* only once */
  case REPL_MSG_HELLO_STATE:    /* only once */
  case REPL_MSG_AUTH_CHALLENGE: /* only in the handshake */
  case REPL_MSG_AUTH_RESPONSE:
  default:
    return false;
  }
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  struct conn c = { 0 };
  struct gen_uuids local, peer;
  struct repl_hdr h;
  struct repl_hello hello;
  int d;
  bool diskless;
  char err[256], why[256];
  size_t pos = 1;

  if (size == 0)
    return 0;
  if (disk == NULL)
    disk = calloc (1, DISK_MAX);

  c.we_primary = data[0] & 1;
  local = our_uuids ((data[0] >> 1) & 3);
  c.gran = grans[(data[0] >> 4) & 3];
  c.size = sizes[(data[0] >> 6) & 3];
  if (data[0] & 8) {
    struct repl_uuids w;

    if (size - pos < REPL_UUIDS_SIZE)
      return 0;
    FUZZ_CHECK (wire_decode_uuids (data + pos, REPL_UUIDS_SIZE, &w,
                                   err, sizeof err) == 0);
    local = from_wire (&w);
    pos += REPL_UUIDS_SIZE;
    /* Ours come from our own metadata, which is checked the same way. */
    if (uuid_check (&local, why, sizeof why) == -1)
      return 0;
  }
  FUZZ_CHECK (uuid_check (&local, why, sizeof why) == 0);

  /* listener.c handle / peer.c read_hello: a HELLO header, then its
   * payload, of the length the header says. */
  if (size - pos < REPL_HDR_SIZE ||
      wire_decode_hdr (data + pos, &h, err, sizeof err) == -1 ||
      h.type != REPL_MSG_HELLO)
    return 0;
  pos += REPL_HDR_SIZE;
  FUZZ_CHECK (h.length >= 4 && h.length <= REPL_HELLO_MAX);
  if (size - pos < h.length ||
      wire_decode_hello (data + pos, h.length, &hello,
                         err, sizeof err) == -1)
    return 0;
  pos += h.length;

  /* peer.c peer_check_ident. */
  FUZZ_CHECK (memchr (hello.resource, '\0', sizeof hello.resource) != NULL);
  if (strcmp (hello.resource, RESOURCE) != 0 ||
      hello.node_id != PEER_ID || hello.peer_id != OUR_ID)
    return 0;

  /* (The authentication.)  peer.c read_hello_state. */
  if (size - pos < REPL_HDR_SIZE ||
      wire_decode_hdr (data + pos, &h, err, sizeof err) == -1 ||
      h.type != REPL_MSG_HELLO_STATE)
    return 0;
  pos += REPL_HDR_SIZE;
  FUZZ_CHECK (h.length == REPL_HELLO_STATE_SIZE);
  if (size - pos < REPL_HELLO_STATE_SIZE ||
      wire_decode_hello_state (data + pos, REPL_HELLO_STATE_SIZE, &hello,
                               err, sizeof err) == -1)
    return 0;
  pos += REPL_HELLO_STATE_SIZE;

  /* peer.c check_hello: never two Primaries.  A diskless peer
   * (diskless.c diskless_check_hello: our disk decides nothing about
   * it) has no generations to compare and nothing to resync; a storage
   * peer has our size, and generation.c gen_decide decides. */
  if (hello.role == REPL_ROLE_PRIMARY && c.we_primary)
    return 0;
  diskless = hello.disk_state == REPL_DISK_DISKLESS;
  if (diskless)
    d = UUID_NO_SYNC;
  else {
    if (hello.size != c.size)
      return 0;
    peer = from_wire (&hello.uuids);
    if (uuid_check (&peer, why, sizeof why) == -1)
      return 0;
    d = decide (&local, &peer, c.we_primary,
                hello.role == REPL_ROLE_PRIMARY, hello.uuids.changes);
    if (d == -1)
      return 0;
  }

  /* peer.c peer_thread and peer-sync.c sync_on_connect. */
  if (bitmap_init (&c.bm, c.size, c.gran) == -1)
    return 0;
  c.peer_role = hello.role;
  c.peer_diskless = diskless;
  c.decision = diskless ? -1 : d;
  c.expect_seq = 1;
  if (c.we_primary) {
    c.ring_first = 1;
    c.ring_count = WINDOW;
  }
  /* peer.c peer_thread: Established; peer-sync.c sync_on_connect: a
   * source waits for the target's bitmap, a target sends its own. */
  c.repl = REPL_OFF;
  set_repl (&c.repl, REPL_ESTABLISHED);
  if (!diskless && c.we_primary &&
      (uuid_decision_is_source (d) ||
       (d == UUID_NO_SYNC && hello.uuids.changes > 0)))
    set_repl (&c.repl, REPL_WF_BITMAP_S);
  else if (!diskless && !c.we_primary && uuid_decision_is_target (d))
    set_repl (&c.repl, REPL_WF_BITMAP_T);

  /* peer-receive.c handle_batch. */
  while (size - pos >= REPL_HDR_SIZE) {
    if (wire_decode_hdr (data + pos, &h, err, sizeof err) == -1)
      break;
    if (size - pos - REPL_HDR_SIZE < h.length)
      break;                    /* not all here yet */
    if (!message (&c, &h, data + pos + REPL_HDR_SIZE))
      break;
    check_bitmap (&c.bm);
    pos += REPL_HDR_SIZE + h.length;
  }
  check_bitmap (&c.bm);
  bitmap_free (&c.bm);
  return 0;
}
