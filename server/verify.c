/* nbdrepl: online verify — compare every chunk with a peer while clients
 * go on writing.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * The primary walks the volume in requests of up to VERIFY_MAX_BYTES.
 * For each it takes the interval lock, reads its own data and digests
 * every bitmap chunk of it, queues VERIFY_REQ (sequenced, like a write)
 * and drops the lock.  The peer handles the request in stream order —
 * after every write queued before it, before every write queued after —
 * reads the same range, and answers VERIFY_REPLY with its digests
 * before its cumulative ACK.  So both sides digest the same moment of
 * the range's history.  A chunk whose digests differ is marked in the
 * peer's bitmap and counted; `replctl resync` (or the next connect)
 * repairs it from the primary.
 *
 * Digest: the first 8 bytes of SHA-256 of the chunk.
 *
 * The same exchange serves a resync with `csums: true` (DRBD's
 * csums-alg): before sending a range's data the source sends its digests'
 * request; chunks whose digests match are done (their bits cleared), the
 * others are marked compared and the next resync pass sends their data.
 */
#include <config.h>

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "internal.h"
#include "log.h"

#define DIGEST_SIZE       8

struct verify_slot {
  struct waiter vs_waiter;
  struct out_msg vs_msg;
  uint8_t *vs_buf;              /* VERIFY_MAX_BYTES */
};

static int
digest_chunks (const uint8_t *data, uint32_t len, uint32_t granularity,
               uint8_t *out)
{
  uint32_t off;

  for (off = 0; off < len; off += granularity) {
    uint8_t md[EVP_MAX_MD_SIZE];
    unsigned mdlen;
    uint32_t n = len - off < granularity ? len - off : granularity;

    if (EVP_Digest (data + off, n, md, &mdlen, EVP_sha256 (), NULL) != 1)
      return -1;
    memcpy (out, md, DIGEST_SIZE);
    out += DIGEST_SIZE;
  }
  return 0;
}

static uint32_t
nchunks (uint32_t len, uint32_t granularity)
{
  return (len + granularity - 1) / granularity;
}

/* Primary: one verify pass over the whole volume against peer p.  Called
 * by the peer's resync thread. */
void
verify_run (struct conn *c)
{
  struct peer *p = c->c_peer;
  struct repl_node *node = p->pr_node;
  const uint32_t g = p->pr_bitmap.bm_granularity;
  const uint64_t size = volume_size (&node->n_vol);
  struct verify_slot slots[VERIFY_SLOTS];
  uint64_t offset = 0, t0 = now_ns ();
  struct pace pace = { 0 };
  bool failed = false, quiet = false, stopped = false;
  unsigned i;

  memset (slots, 0, sizeof slots);
  for (i = 0; i < VERIFY_SLOTS; i++) {
    waiter_init (&slots[i].vs_waiter, 0);
    slots[i].vs_buf = malloc (VERIFY_MAX_BYTES);
    if (slots[i].vs_buf == NULL)
      failed = true;
  }
  pthread_mutex_lock (&p->pr_lock);
  p->pr_verify_total = size;
  p->pr_verify_done = 0;
  p->pr_verify_stop = false;
  p->pr_verify_oos = 0;
  for (i = 0; i < VERIFY_SLOTS; i++) {
    p->pr_verify_slot_offset[i] = UINT64_MAX;
    p->pr_verify_slot_count[i] = 0;
  }
  if (p->pr_verify_digests == NULL)
    p->pr_verify_digests = calloc (VERIFY_SLOTS, VERIFY_MAX_BYTES / 512 *
                                   DIGEST_SIZE);
  if (p->pr_verify_digests == NULL)
    failed = true;
  if (!failed &&
      (c->c_failed || peer_set_repl_locked (p, REPL_VERIFY_S) == -1))
    failed = true, quiet = true;
  pthread_mutex_unlock (&p->pr_lock);
  if (failed) {
    if (!quiet)
      log_error ("peer %s: verify: out of memory", p->pr_cfg->nc_name);
    goto out;
  }
  log_info ("peer %s: verify started, %" PRIu64 " bytes",
            p->pr_cfg->nc_name, size);

  for (i = 0; offset < size; i = (i + 1) % VERIFY_SLOTS) {
    struct verify_slot *s = &slots[i];
    uint32_t len = size - offset < VERIFY_MAX_BYTES ? size - offset
                                                    : VERIFY_MAX_BYTES;
    uint8_t *digests;
    struct ilock_range range;
    bool ok;

    waiter_wait (&s->vs_waiter);
    pthread_mutex_lock (&p->pr_lock);
    ok = !c->c_failed && !p->pr_stopping && !p->pr_verify_stop;
    stopped = p->pr_verify_stop;
    digests = p->pr_verify_digests + (size_t) i * (VERIFY_MAX_BYTES / 512) *
                                     DIGEST_SIZE;
    pthread_mutex_unlock (&p->pr_lock);
    if (!ok || !pace_wait (c, &pace, len)) {
      failed = true;
      break;
    }

    ilock_acquire (&node->n_ilock, &range, offset, len);
    if (volume_pread (&node->n_vol, s->vs_buf, len, offset) == -1 ||
        digest_chunks (s->vs_buf, len, g, digests) == -1) {
      ilock_release (&node->n_ilock, &range);
      conn_fail (c, "verify stopped: cannot read or digest our disk");
      failed = true;
      break;
    }
    pthread_mutex_lock (&p->pr_lock);
    p->pr_verify_slot_offset[i] = offset;
    p->pr_verify_slot_count[i] = len;
    peer_submit_locked (p, REPL_MSG_VERIFY_REQ, 0, NULL, len, offset,
                        &s->vs_waiter, false, &s->vs_msg, NULL);
    pthread_mutex_unlock (&p->pr_lock);
    ilock_release (&node->n_ilock, &range);
    offset += len;
  }

 out:
  for (i = 0; i < VERIFY_SLOTS; i++) {
    waiter_wait (&slots[i].vs_waiter);
    waiter_destroy (&slots[i].vs_waiter);
    free (slots[i].vs_buf);
  }
  pthread_mutex_lock (&p->pr_lock);
  if (p->pr_repl == REPL_VERIFY_S && !c->c_failed)
    peer_set_repl_locked (p, REPL_ESTABLISHED);
  p->pr_verify_finished = !failed;
  pthread_mutex_unlock (&p->pr_lock);
  if (!failed)
    log_info ("peer %s: verify finished in %.1f s: %" PRIu64 " bytes out "
              "of sync%s", p->pr_cfg->nc_name, (now_ns () - t0) / 1e9,
              p->pr_verify_oos, p->pr_verify_oos
              ? " (marked; `replctl resync` or the next connect repairs "
                "them)" : "");
  else if (stopped)
    log_info ("peer %s: verify stopped (replctl verify --stop) at %"
              PRIu64 "%%", p->pr_cfg->nc_name,
              size ? offset * 100 / size : 100);
  else
    log_error ("peer %s: verify interrupted", p->pr_cfg->nc_name);
}

/* Resync with csums: our digests of the len bytes in buf (read under the
 * interval lock the caller holds), into resync slot `slot`'s digests.
 * Without pr_lock: SHA-256 of up to a megabyte; the slot is this
 * caller's until its request is answered (verify_csum_submit_locked). */
void
verify_csum_digest (struct peer *p, unsigned slot, const uint8_t *buf,
                    uint32_t len)
{
  uint8_t *digests = p->pr_verify_digests +
    (size_t) slot * (VERIFY_MAX_BYTES / 512) * DIGEST_SIZE;

  assert (slot < VERIFY_SLOTS && len <= VERIFY_MAX_BYTES);
  if (digest_chunks (buf, len, p->pr_bitmap.bm_granularity, digests) == -1)
    memset (digests, 0xff, (size_t) nchunks (len, p->pr_bitmap.bm_granularity)
                           * DIGEST_SIZE);      /* cannot match: data goes */
}

/* ... then ask the peer for its digests of [offset, offset+len), in
 * slot `slot`.  pr_lock held. */
void
verify_csum_submit_locked (struct peer *p, unsigned slot, uint32_t len,
                           uint64_t offset, struct waiter *w,
                           struct out_msg *om)
{
  ASSERT_LOCKED (&p->pr_lock);
  assert (slot < VERIFY_SLOTS && len <= VERIFY_MAX_BYTES);
  p->pr_verify_slot_offset[slot] = offset;
  p->pr_verify_slot_count[slot] = len;
  bitmap_set_range (p->pr_csum_done, offset, len);
  peer_submit_locked (p, REPL_MSG_VERIFY_REQ, 0, NULL, len, offset, w, false,
                      om, NULL);
}

/* Prepare peer p for a resync with csums: the digests and the "compared"
 * bitmap.  Returns 0 or -1. */
int
verify_csum_begin (struct peer *p)
{
  unsigned i;

  pthread_mutex_lock (&p->pr_lock);
  if (p->pr_verify_digests == NULL)
    p->pr_verify_digests = calloc (VERIFY_SLOTS, VERIFY_MAX_BYTES / 512 *
                                   DIGEST_SIZE);
  if (p->pr_csum_done == NULL) {
    p->pr_csum_done = malloc (sizeof *p->pr_csum_done);
    if (p->pr_csum_done != NULL &&
        bitmap_init (p->pr_csum_done, p->pr_bitmap.bm_size,
                     p->pr_bitmap.bm_granularity) == -1) {
      free (p->pr_csum_done);
      p->pr_csum_done = NULL;
    }
  }
  else
    bitmap_clear_all (p->pr_csum_done);
  for (i = 0; i < VERIFY_SLOTS; i++) {
    p->pr_verify_slot_offset[i] = UINT64_MAX;
    p->pr_verify_slot_count[i] = 0;
  }
  p->pr_csum_resync = p->pr_verify_digests != NULL &&
                      p->pr_csum_done != NULL;
  pthread_mutex_unlock (&p->pr_lock);
  return p->pr_csum_resync ? 0 : -1;
}

void
verify_csum_end (struct peer *p)
{
  pthread_mutex_lock (&p->pr_lock);
  p->pr_csum_resync = false;
  pthread_mutex_unlock (&p->pr_lock);
}

/* Primary: the peer's digests for the request of slot-sized range at
 * h->offset.  Returns 0, or -1 once the connection has failed. */
int
verify_handle_reply (struct conn *c, const struct repl_hdr *h,
                     const uint8_t *payload)
{
  struct peer *p = c->c_peer;
  const uint32_t g = p->pr_bitmap.bm_granularity;
  uint32_t n = nchunks (h->count, g), k;
  unsigned i;
  int slot = -1;

  pthread_mutex_lock (&p->pr_lock);
  if ((p->pr_repl == REPL_VERIFY_S || p->pr_csum_resync) &&
      h->length == (uint64_t) n * DIGEST_SIZE &&
      h->count <= VERIFY_MAX_BYTES)
    for (i = 0; i < VERIFY_SLOTS; i++)
      if (p->pr_verify_slot_offset[i] == h->offset &&
          p->pr_verify_slot_count[i] == h->count) {
        slot = i;
        /* Answered: a second reply for it is a protocol error. */
        p->pr_verify_slot_offset[i] = UINT64_MAX;
        p->pr_verify_slot_count[i] = 0;
        break;
      }
  if (slot >= 0 && p->pr_csum_resync) {
    const uint8_t *ours = p->pr_verify_digests +
      (size_t) slot * (VERIFY_MAX_BYTES / 512) * DIGEST_SIZE;

    /* Chunks with the same digest need no data: done. */
    for (k = 0; k < n; k++)
      if (memcmp (ours + k * DIGEST_SIZE, payload + k * DIGEST_SIZE,
                  DIGEST_SIZE) == 0) {
        uint64_t off = h->offset + (uint64_t) k * g;
        uint64_t len = h->count - (uint64_t) k * g < g
                       ? h->count - (uint64_t) k * g : g;
        if (bitmap_test (&p->pr_bitmap, off / g)) {
          bitmap_clear_range (&p->pr_bitmap, off, len);
          p->pr_resync_done += len;
          p->pr_csum_same += len;
        }
      }
  }
  else if (slot >= 0) {
    const uint8_t *ours = p->pr_verify_digests +
      (size_t) slot * (VERIFY_MAX_BYTES / 512) * DIGEST_SIZE;

    for (k = 0; k < n; k++)
      if (memcmp (ours + k * DIGEST_SIZE, payload + k * DIGEST_SIZE,
                  DIGEST_SIZE) != 0) {
        uint64_t off = h->offset + (uint64_t) k * g;
        uint64_t len = h->count - (uint64_t) k * g < g
                       ? h->count - (uint64_t) k * g : g;
        if (!bitmap_test (&p->pr_bitmap, off / g))
          p->pr_verify_oos += len;
        bitmap_set_range (&p->pr_bitmap, off, len);
      }
    p->pr_verify_done += h->count;
  }
  pthread_mutex_unlock (&p->pr_lock);
  if (slot < 0) {
    conn_fail (c, "protocol error: VERIFY_REPLY for %" PRIu32
               " bytes at %" PRIu64 " that we did not ask for",
               h->count, h->offset);
    return -1;
  }
  return 0;
}

/* Secondary: digest the range of a VERIFY_REQ and answer.  Returns 0,
 * -1 if the connection failed, -2 if our disk failed. */
int
verify_handle_request (struct conn *c, const struct repl_hdr *h)
{
  struct peer *p = c->c_peer;
  struct repl_node *node = p->pr_node;
  const uint32_t g = p->pr_bitmap.bm_granularity;
  uint32_t n = nchunks (h->count, g);
  uint8_t *buf, *digests;
  struct out_msg om;
  int r = 0;

  if (h->count > VERIFY_MAX_BYTES) {
    conn_fail (c, "protocol error: VERIFY_REQ of %" PRIu32 " bytes "
               "(at most %u)", h->count, VERIFY_MAX_BYTES);
    return -1;
  }
  buf = malloc (h->count);
  digests = malloc ((size_t) n * DIGEST_SIZE);
  if (buf == NULL || digests == NULL) {
    free (buf);
    free (digests);
    conn_fail (c, "malloc: %m");
    return -1;
  }
  if (volume_pread (&node->n_vol, buf, h->count, h->offset) == -1 ||
      digest_chunks (buf, h->count, g, digests) == -1)
    r = -2;
  else {
    out_msg_init (&om, REPL_MSG_VERIFY_REPLY, 0, h->count, h->seq,
                  h->offset, digests, n * DIGEST_SIZE);
    if (conn_send_wait (c, &om) == -1)
      r = -1;
  }
  free (buf);
  free (digests);
  return r;
}

/* Kick the resync thread of every connected peer, to verify or to
 * resync (`replctl verify` / `replctl resync`, primary only).  Returns
 * the number of peers, or -1 with the reason in err. */
static int
kick_connected_peers (struct repl_node *node, bool verify,
                      char *err, size_t errlen)
{
  const char *what = verify ? "verify" : "resync";
  size_t i, n = 0;

  if (node_role (node) != REPL_ROLE_PRIMARY) {
    snprintf (err, errlen, "%s runs on the primary", what);
    return -1;
  }
  if (tp_refuse_beside_primary (node, what, err, errlen) == -1)
    return -1;
  for (i = 0; i < PEERS (node)->pl_n; i++) {
    struct peer *p = PEERS (node)->pl_peers[i];

    pthread_mutex_lock (&p->pr_lock);
    if (p->pr_state == CONN_CONNECTED) {
      if (verify)
        p->pr_verify_wanted = true;
      else
        p->pr_resync_wanted = true;
      pthread_cond_signal (&p->pr_resync_cond);
      n++;
    }
    pthread_mutex_unlock (&p->pr_lock);
  }
  if (n == 0) {
    snprintf (err, errlen, "no peer is connected");
    return -1;
  }
  return n;
}

/* `replctl verify`: compare every chunk with each connected peer. */
int
engine_verify (struct repl_node *node, char *err, size_t errlen)
{
  return kick_connected_peers (node, true, err, errlen);
}

/* `replctl resync`: resync what is marked out of sync (after a verify)
 * to every connected peer. */
int
engine_resync (struct repl_node *node, char *err, size_t errlen)
{
  return kick_connected_peers (node, false, err, errlen);
}
