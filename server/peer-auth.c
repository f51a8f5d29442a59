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
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "byte-order.h"
#include "internal.h"
#include "log.h"
#include "sockets.h"

/* The peer's address, for log lines. */
static void
peer_address (int fd, char *buf, size_t len)
{
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  char host[INET6_ADDRSTRLEN] = "?";
  unsigned port = 0;

  if (getpeername (fd, (struct sockaddr *) &ss, &sl) == 0) {
    if (ss.ss_family == AF_INET) {
      struct sockaddr_in *in = (struct sockaddr_in *) &ss;
      inet_ntop (AF_INET, &in->sin_addr, host, sizeof host);
      port = ntohs (in->sin_port);
    }
    else if (ss.ss_family == AF_INET6) {
      struct sockaddr_in6 *in6 = (struct sockaddr_in6 *) &ss;
      inet_ntop (AF_INET6, &in6->sin6_addr, host, sizeof host);
      port = ntohs (in6->sin6_port);
    }
  }
  snprintf (buf, len, "%s:%u", host, port);
}

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

/* Authenticate the connection fd to p, whose HELLO was h.  Returns 0,
 * or -1 with the reason logged (once per reason, as the peer's other
 * errors are) and in p's last error. */
int
peer_authenticate (struct peer *p, int fd, const struct repl_hello *h)
{
  const struct repl_config *cf = &p->pr_node->n_cfg;
  unsigned timeout = cf->cf_ping_timeout_ms;
  uint8_t ours[REPL_AUTH_SIZE], theirs[REPL_AUTH_SIZE];
  uint8_t answer[REPL_AUTH_SIZE], expect[REPL_AUTH_SIZE];
  bool we = cf->cf_secret_len > 0;
  bool they = (h->features & REPL_FEATURE_AUTH) != 0;
  char err[300], addr[64];

  if (!we && !they)
    return 0;
  peer_address (fd, addr, sizeof addr);
  if (we != they) {
    peer_refuse (p, addr, we ? "authentication failed: the peer has no "
                 "secret (set the same secret on every node)"
                 : "authentication failed: the peer has a secret and this "
                 "node has none (set the same secret on every node)");
    return -1;
  }
  if (getrandom (ours, sizeof ours, 0) != sizeof ours) {
    snprintf (err, sizeof err, "getrandom: %m");
    peer_refuse (p, addr, err);
    return -1;
  }
  if (send_msg (fd, REPL_MSG_AUTH_CHALLENGE, ours, timeout) == -1) {
    snprintf (err, sizeof err, "sending AUTH_CHALLENGE: %m");
    peer_refuse (p, addr, err);
    return -1;
  }
  if (read_msg (fd, REPL_MSG_AUTH_CHALLENGE, theirs, timeout, err,
                sizeof err) == -1) {
    peer_refuse (p, addr, err);
    return -1;
  }
  if (CRYPTO_memcmp (ours, theirs, sizeof ours) == 0) {
    peer_refuse (p, addr, "authentication failed: the peer sent our own "
                 "challenge back (a reflection)");
    return -1;
  }
  if (mac (cf, theirs, p->pr_node->n_self->nc_id, answer) == -1 ||
      mac (cf, ours, p->pr_cfg->nc_id, expect) == -1) {
    peer_refuse (p, addr, "HMAC failed");
    return -1;
  }
  if (send_msg (fd, REPL_MSG_AUTH_RESPONSE, answer, timeout) == -1) {
    snprintf (err, sizeof err, "sending AUTH_RESPONSE: %m");
    peer_refuse (p, addr, err);
    return -1;
  }
  if (read_msg (fd, REPL_MSG_AUTH_RESPONSE, theirs, timeout, err,
                sizeof err) == -1) {
    peer_refuse (p, addr, err);
    return -1;
  }
  if (CRYPTO_memcmp (theirs, expect, sizeof expect) != 0) {
    peer_refuse (p, addr, "authentication failed: wrong answer to our "
                 "challenge (a different secret?)");
    return -1;
  }
  explicit_bzero (answer, sizeof answer);
  explicit_bzero (expect, sizeof expect);
  return 0;
}
