/* nbdrepl: mutual authentication of two nodes with the shared secret.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * Right after the HELLOs, when both nodes have a secret (feature AUTH),
 * each sends a fresh random challenge, then answers the other's:
 *
 *   AUTH_CHALLENGE  32 random bytes (getrandom)
 *   AUTH_RESPONSE   HMAC-SHA256 (secret, peer's challenge ||
 *                                own node id || peer's node id, each
 *                                4 bytes big-endian || resource name)
 *
 * and checks the other's answer in constant time.  The answerer's own
 * node id in the MAC stops a reflected answer (our own challenge sent
 * back to us computes with the other id), the fresh challenge a
 * replayed one.  The id of the node answered stops a node being used
 * as an oracle: with three nodes, an answer that node 1 gives to a
 * stranger claiming to be node 0 is no answer node 2 takes from node 1
 * (and a node gives answers meant for node N only on a connection to
 * N, which for a higher N it dials itself: listener.c refuses the
 * wrong direction before authenticating).
 *
 * On the accepting side this runs in the listener's handshake thread,
 * before the connection is handed to the peer (listener.c); on the
 * dialling side in the peer thread (peer.c establish).  Nothing but the
 * HELLO is exchanged before both are proven, the HELLO_STATE with the
 * node's data only after; a failure ends the connection with a log
 * line naming the peer's address, and the node goes on serving.
 */
#include <config.h>

#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "byte-order.h"
#include "internal.h"
#include "log.h"
#include "sockets.h"

/* The answer of node `from` to node `to`'s challenge. */
static int
mac (const struct repl_config *cf, const uint8_t challenge[REPL_AUTH_SIZE],
     uint32_t from, uint32_t to, uint8_t out[REPL_AUTH_SIZE])
{
  uint8_t msg[REPL_AUTH_SIZE + 8 + REPL_RESOURCE_MAX];
  size_t rlen = strlen (cf->cf_resource);
  unsigned outlen = 0;

  memcpy (msg, challenge, REPL_AUTH_SIZE);
  put_be32 (msg + REPL_AUTH_SIZE, from);
  put_be32 (msg + REPL_AUTH_SIZE + 4, to);
  memcpy (msg + REPL_AUTH_SIZE + 8, cf->cf_resource, rlen);
  if (HMAC (EVP_sha256 (), cf->cf_secret, cf->cf_secret_len, msg,
            REPL_AUTH_SIZE + 8 + rlen, out, &outlen) == NULL ||
      outlen != REPL_AUTH_SIZE)
    return -1;
  return 0;
}

static int
ms_left (uint64_t deadline)
{
  uint64_t now = now_ns ();

  return now >= deadline ? 0 : (int) ((deadline - now) / 1000000) + 1;
}

static int
send_msg (struct stream *st, enum repl_msg_type type, const uint8_t *payload,
          unsigned timeout_ms)
{
  uint8_t buf[REPL_HDR_SIZE + REPL_AUTH_SIZE];
  struct repl_hdr h;

  wire_hdr_init (&h, type, 0, REPL_AUTH_SIZE, 0, 0, 0);
  wire_encode_hdr (&h, buf);
  memcpy (buf + REPL_HDR_SIZE, payload, REPL_AUTH_SIZE);
  return stream_write_full (st, buf, sizeof buf, timeout_ms);
}

/* Read one message of the given type by the deadline, giving up at
 * once (errno ECANCELED) if the node stops; -1 with why in err. */
static int
read_msg (struct repl_node *node, struct stream *st, enum repl_msg_type type,
          uint8_t *payload, uint64_t deadline, char *err, size_t errlen)
{
  uint8_t hbuf[REPL_HDR_SIZE];
  struct repl_hdr h;
  char why[256];

  if (stream_read_full (st, hbuf, sizeof hbuf, ms_left (deadline),
                        node->n_stop_fd) == -1)
    goto read_error;
  if (wire_decode_hdr (hbuf, &h, why, sizeof why) == -1) {
    snprintf (err, errlen, "bad %s: %s", wire_type_name (type), why);
    return -1;
  }
  if (h.type != type) {
    snprintf (err, errlen, "expected %s, got %s", wire_type_name (type),
              wire_type_name (h.type));
    errno = EPROTO;
    return -1;
  }
  if (stream_read_full (st, payload, REPL_AUTH_SIZE, ms_left (deadline),
                        node->n_stop_fd) == -1)
    goto read_error;
  return 0;

 read_error:
  {
    int e = errno;
    snprintf (err, errlen, "reading %s: %m", wire_type_name (type));
    errno = e;
  }
  return -1;
}

/* A failure, logged; stopping (a read gave up with ECANCELED) is none. */
static int
refuse (struct peer *p, const char *addr, bool incoming, bool stopping,
        const char *why)
{
  if (!stopping)
    peer_refuse (p, addr, incoming, why);
  return -1;
}

/* Authenticate the connection st to p, whose HELLO was h, by the
 * deadline (ns, now_ns); addr is its address (incoming: it dialled
 * us), for log lines.  Returns 0, or -1 with the reason logged by
 * peer_refuse (which never disturbs an established connection). */
int
peer_authenticate (struct peer *p, struct stream *st, const char *addr,
                   bool incoming, const struct repl_hello *h,
                   uint64_t deadline)
{
  struct repl_node *node = p->pr_node;
  const struct repl_config *cf = &node->n_cfg;
  unsigned timeout = cf->cf_ping_timeout_ms;
  uint32_t self = node->n_self->nc_id, peer = p->pr_cfg->nc_id;
  uint8_t ours[REPL_AUTH_SIZE], theirs[REPL_AUTH_SIZE];
  uint8_t answer[REPL_AUTH_SIZE], expect[REPL_AUTH_SIZE];
  bool we = cf->cf_secret_len > 0;
  bool they = (h->features & REPL_FEATURE_AUTH) != 0;
  char err[300];
  int r = -1;

  if (!we && !they)
    return 0;
  if (we != they)
    return refuse (p, addr, incoming, false,
                   we ? "authentication failed: the peer has no secret "
                        "(set the same secret on every node)"
                      : "authentication failed: the peer has a secret and "
                        "this node has none (set the same secret on every "
                        "node)");
  if (getrandom (ours, sizeof ours, 0) != sizeof ours) {
    snprintf (err, sizeof err, "getrandom: %m");
    return refuse (p, addr, incoming, false, err);
  }
  if (send_msg (st, REPL_MSG_AUTH_CHALLENGE, ours, timeout) == -1) {
    snprintf (err, sizeof err, "sending AUTH_CHALLENGE: %m");
    return refuse (p, addr, incoming, false, err);
  }
  if (read_msg (node, st, REPL_MSG_AUTH_CHALLENGE, theirs, deadline, err,
                sizeof err) == -1)
    return refuse (p, addr, incoming, errno == ECANCELED, err);
  if (CRYPTO_memcmp (ours, theirs, sizeof ours) == 0)
    return refuse (p, addr, incoming, false, "authentication failed: the "
                   "peer sent our own challenge back (a reflection)");
  if (mac (cf, theirs, self, peer, answer) == -1 ||
      mac (cf, ours, peer, self, expect) == -1) {
    refuse (p, addr, incoming, false, "HMAC failed");
    goto out;
  }
  if (send_msg (st, REPL_MSG_AUTH_RESPONSE, answer, timeout) == -1) {
    snprintf (err, sizeof err, "sending AUTH_RESPONSE: %m");
    refuse (p, addr, incoming, false, err);
    goto out;
  }
  if (read_msg (node, st, REPL_MSG_AUTH_RESPONSE, theirs, deadline, err,
                sizeof err) == -1) {
    refuse (p, addr, incoming, errno == ECANCELED, err);
    goto out;
  }
  if (CRYPTO_memcmp (theirs, expect, sizeof expect) != 0) {
    refuse (p, addr, incoming, false, "authentication failed: wrong answer "
            "to our challenge (a different secret?)");
    goto out;
  }
  r = 0;
 out:
  explicit_bzero (answer, sizeof answer);
  explicit_bzero (expect, sizeof expect);
  return r;
}
