/* nbdrepl: mutual authentication of two nodes with the shared secret.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * Right after the HELLOs, when both nodes have a secret (feature AUTH),
 * each sends a fresh random challenge, then answers the other's:
 *
 *   AUTH_CHALLENGE  32 random bytes (getrandom)
 *   AUTH_RESPONSE   HMAC-SHA256 (secret, peer's challenge ||
 *                                own node id, 4 bytes big-endian ||
 *                                resource name)
 *
 * and checks the other's answer in constant time.  The answerer's own
 * node id in the MAC stops a reflected answer (our own challenge sent
 * back to us computes with the other id), the fresh challenge a
 * replayed one.  Nothing but the HELLO is read before both are proven;
 * a failure ends the connection with a log line naming the peer's
 * address, and the node goes on serving.
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

static int
mac (const struct repl_config *cf, const uint8_t challenge[REPL_AUTH_SIZE],
     uint32_t node_id, uint8_t out[REPL_AUTH_SIZE])
{
  uint8_t msg[REPL_AUTH_SIZE + 4 + REPL_RESOURCE_MAX];
  size_t rlen = strlen (cf->cf_resource);
  unsigned outlen = 0;

  memcpy (msg, challenge, REPL_AUTH_SIZE);
  put_be32 (msg + REPL_AUTH_SIZE, node_id);
  memcpy (msg + REPL_AUTH_SIZE + 4, cf->cf_resource, rlen);
  if (HMAC (EVP_sha256 (), cf->cf_secret, cf->cf_secret_len, msg,
            REPL_AUTH_SIZE + 4 + rlen, out, &outlen) == NULL ||
      outlen != REPL_AUTH_SIZE)
    return -1;
  return 0;
}

static int
send_msg (int fd, enum repl_msg_type type, const uint8_t *payload,
          unsigned timeout_ms)
{
  uint8_t buf[REPL_HDR_SIZE + REPL_AUTH_SIZE];
  struct repl_hdr h;

  wire_hdr_init (&h, type, 0, REPL_AUTH_SIZE, 0, 0, 0);
  wire_encode_hdr (&h, buf);
  memcpy (buf + REPL_HDR_SIZE, payload, REPL_AUTH_SIZE);
  return sock_write_full (fd, buf, sizeof buf, timeout_ms);
}

/* Read one message of the given type; -1 with why in err. */
static int
read_msg (int fd, enum repl_msg_type type, uint8_t *payload,
          unsigned timeout_ms, char *err, size_t errlen)
{
  uint8_t hbuf[REPL_HDR_SIZE];
  struct repl_hdr h;
  char why[256];

  if (sock_read_full (fd, hbuf, sizeof hbuf, timeout_ms) == -1) {
    snprintf (err, errlen, "reading %s: %m", wire_type_name (type));
    return -1;
  }
  if (wire_decode_hdr (hbuf, &h, why, sizeof why) == -1) {
    snprintf (err, errlen, "bad %s: %s", wire_type_name (type), why);
    return -1;
  }
  if (h.type != type) {
    snprintf (err, errlen, "expected %s, got %s", wire_type_name (type),
              wire_type_name (h.type));
    return -1;
  }
  if (sock_read_full (fd, payload, REPL_AUTH_SIZE, timeout_ms) == -1) {
    snprintf (err, errlen, "reading %s: %m", wire_type_name (type));
    return -1;
  }
  return 0;
}

/* Authenticate the connection fd to p, whose HELLO was h; addr is its
 * address (incoming: it dialled us), for log lines.  Returns 0,
 * or -1 with the reason logged (once per reason, as the peer's other
 * errors are) and in p's last error. */
int
peer_authenticate (struct peer *p, int fd, const char *addr, bool incoming,
                   const struct repl_hello *h)
{
  const struct repl_config *cf = &p->pr_node->n_cfg;
  unsigned timeout = cf->cf_ping_timeout_ms;
  uint8_t ours[REPL_AUTH_SIZE], theirs[REPL_AUTH_SIZE];
  uint8_t answer[REPL_AUTH_SIZE], expect[REPL_AUTH_SIZE];
  bool we = cf->cf_secret_len > 0;
  bool they = (h->features & REPL_FEATURE_AUTH) != 0;
  char err[300];

  if (!we && !they)
    return 0;
  if (we != they) {
    peer_refuse (p, addr, incoming, we ? "authentication failed: the peer has no "
                 "secret (set the same secret on every node)"
                 : "authentication failed: the peer has a secret and this "
                 "node has none (set the same secret on every node)");
    return -1;
  }
  if (getrandom (ours, sizeof ours, 0) != sizeof ours) {
    snprintf (err, sizeof err, "getrandom: %m");
    peer_refuse (p, addr, incoming, err);
    return -1;
  }
  if (send_msg (fd, REPL_MSG_AUTH_CHALLENGE, ours, timeout) == -1) {
    snprintf (err, sizeof err, "sending AUTH_CHALLENGE: %m");
    peer_refuse (p, addr, incoming, err);
    return -1;
  }
  if (read_msg (fd, REPL_MSG_AUTH_CHALLENGE, theirs, timeout, err,
                sizeof err) == -1) {
    peer_refuse (p, addr, incoming, err);
    return -1;
  }
  if (CRYPTO_memcmp (ours, theirs, sizeof ours) == 0) {
    peer_refuse (p, addr, incoming, "authentication failed: the peer sent our own "
                 "challenge back (a reflection)");
    return -1;
  }
  if (mac (cf, theirs, p->pr_node->n_self->nc_id, answer) == -1 ||
      mac (cf, ours, p->pr_cfg->nc_id, expect) == -1) {
    peer_refuse (p, addr, incoming, "HMAC failed");
    return -1;
  }
  if (send_msg (fd, REPL_MSG_AUTH_RESPONSE, answer, timeout) == -1) {
    snprintf (err, sizeof err, "sending AUTH_RESPONSE: %m");
    peer_refuse (p, addr, incoming, err);
    return -1;
  }
  if (read_msg (fd, REPL_MSG_AUTH_RESPONSE, theirs, timeout, err,
                sizeof err) == -1) {
    peer_refuse (p, addr, incoming, err);
    return -1;
  }
  if (CRYPTO_memcmp (theirs, expect, sizeof expect) != 0) {
    peer_refuse (p, addr, incoming, "authentication failed: wrong answer to our "
                 "challenge (a different secret?)");
    return -1;
  }
  explicit_bzero (answer, sizeof answer);
  explicit_bzero (expect, sizeof expect);
  return 0;
}
