/* nbdrepl: TLS on the replication link.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * With `tls: true` every connection between nodes runs TLS 1.3 from
 * its first byte (contexts: common/tls.c).  The handshake happens here,
 * before the HELLO; a failure refuses the connection, never falls back
 * to plain text.
 *
 * After the handshake the session and its TCP socket become a stream
 * (peer-stream.c): the peer code's readers and senders drive OpenSSL on
 * the socket themselves, or the kernel does (kernel TLS), with no thread
 * or copy in between.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "internal.h"
#include "log.h"
#include "tls.h"

int
peer_tls_init (struct repl_node *node)
{
  char err[512];

  if (!node->n_cfg.cf_tls)
    return 0;
  node->n_tls_client = tls_ctx_new (&node->n_cfg, node->n_self, false,
                                    err, sizeof err);
  if (node->n_tls_client)
    node->n_tls_server = tls_ctx_new (&node->n_cfg, node->n_self, true,
                                      err, sizeof err);
  if (node->n_tls_server == NULL) {
    log_error ("%s: node %s: %s", node->n_cfg.cf_path,
               node->n_self->nc_name, err);
    return -1;
  }
  return 0;
}

/* After every peer has stopped and closed its streams. */
void
peer_tls_fini (struct repl_node *node)
{
  SSL_CTX_free (node->n_tls_client);
  SSL_CTX_free (node->n_tls_server);
  node->n_tls_client = node->n_tls_server = NULL;
}

static int
set_nonblock (int fd)
{
  int fl = fcntl (fd, F_GETFL);

  return fl == -1 ? -1 : fcntl (fd, F_SETFL, fl | O_NONBLOCK);
}

static int
ms_left (uint64_t deadline)
{
  uint64_t now = now_ns ();

  return now >= deadline ? 0 : (int) ((deadline - now) / 1000000) + 1;
}

/* Why a handshake failed, in words an operator can act on. */
static void
handshake_error (SSL *ssl, int r, char *err, size_t errlen)
{
  char why[256];
  long v = SSL_get_verify_result (ssl);
  int e = SSL_get_error (ssl, r);

  if (v != X509_V_OK) {
    snprintf (err, errlen, "TLS handshake: the peer's certificate: %s",
              X509_verify_cert_error_string (v));
    ERR_clear_error ();
    return;
  }
  if (e == SSL_ERROR_SYSCALL && ERR_peek_error () == 0) {
    if (r == 0 || errno == 0 || errno == ECONNRESET || errno == EPIPE)
      snprintf (err, errlen, "TLS handshake: the peer closed the "
                "connection (does it have tls: true, and the same secret "
                "or CA?)");
    else
      snprintf (err, errlen, "TLS handshake: %m");
    return;
  }
  tls_error_string (why, sizeof why, "failed");
  if (strstr (why, "wrong version number") || strstr (why, "packet length") ||
      strstr (why, "record layer") || strstr (why, "http request"))
    snprintf (err, errlen, "TLS handshake: %s: the peer does not speak "
              "TLS (set tls: true on every node)", why);
  else if (strstr (why, "alert"))
    snprintf (err, errlen, "TLS handshake: the peer refused us: %s "
              "(the same secret, or a certificate from the same CA?)", why);
  else
    snprintf (err, errlen, "TLS handshake: %s", why);
}

/* Run the handshake on fd (non-blocking) until done, the deadline or
 * the node stopping. */
static int
handshake (struct repl_node *node, SSL *ssl, bool server, uint64_t deadline,
           char *err, size_t errlen)
{
  for (;;) {
    int r, e, left;
    struct pollfd pfd[2] = {
      { .fd = SSL_get_fd (ssl) },
      { .fd = node->n_stop_fd, .events = POLLIN },
    };

    ERR_clear_error ();
    errno = 0;
    r = server ? SSL_accept (ssl) : SSL_connect (ssl);
    if (r == 1)
      return 0;
    e = SSL_get_error (ssl, r);
    if (e == SSL_ERROR_WANT_READ)
      pfd[0].events = POLLIN;
    else if (e == SSL_ERROR_WANT_WRITE)
      pfd[0].events = POLLOUT;
    else {
      handshake_error (ssl, r, err, errlen);
      return -1;
    }
    left = ms_left (deadline);
    if (left == 0 || (r = poll (pfd, 2, left)) == 0) {
      snprintf (err, errlen, "TLS handshake: no answer within the timeout");
      return -1;
    }
    if (r == -1 && errno != EINTR) {
      snprintf (err, errlen, "TLS handshake: poll: %m");
      return -1;
    }
    if (pfd[1].revents) {
      snprintf (err, errlen, "TLS handshake: stopping");
      errno = ECANCELED;
      return -1;
    }
  }
}

/* Common to both sides: fd is a connected TCP socket, which this takes
 * over (closed on failure).  expect: the node name the server's
 * certificate must carry (client side, certificates), or NULL.  On the
 * server side *cert gets the client's certificate (or NULL with a
 * PSK), which the caller frees after checking it against the node the
 * HELLO names. */
static struct stream *
start (struct repl_node *node, int fd, bool server, const char *expect,
       uint64_t deadline, X509 **cert, char *err, size_t errlen)
{
  SSL_CTX *ctx = server ? node->n_tls_server : node->n_tls_client;
  SSL *ssl = NULL;
  struct stream *st;

  ERR_clear_error ();
  if (set_nonblock (fd) == -1) {
    snprintf (err, errlen, "TLS: fcntl: %m");
    goto fail;
  }
  ssl = SSL_new (ctx);
  if (ssl == NULL || SSL_set_fd (ssl, fd) != 1 ||
      (expect && tls_ctx_uses_certs (ctx) && SSL_set1_host (ssl, expect) != 1)) {
    char why[256];
    snprintf (err, errlen, "TLS: %s",
              tls_error_string (why, sizeof why, "out of memory"));
    goto fail;
  }
  /* The name must be the node's own: a wildcard certificate
   * (*.r0.lan) would let any node of the domain claim any other. */
  if (expect && tls_ctx_uses_certs (ctx))
    SSL_set_hostflags (ssl, node->n_cfg.cf_tls_allow_wildcard
                       ? 0 : X509_CHECK_FLAG_NO_WILDCARDS);
  if (handshake (node, ssl, server, deadline, err, errlen) == -1)
    goto fail;
  st = stream_new (fd, ssl);   /* takes fd and ssl, also on failure */
  if (st == NULL) {
    snprintf (err, errlen, "TLS: %m");
    return NULL;
  }
  if (cert)
    *cert = SSL_get1_peer_certificate (ssl);
  return st;

 fail:
  {
    int e = errno;            /* ECANCELED (stopping) is not an error */
    SSL_free (ssl);
    close (fd);
    errno = e;
  }
  return NULL;
}

struct stream *
peer_tls_connect (struct peer *p, int fd, char *err, size_t errlen)
{
  struct repl_node *node = p->pr_node;

  return start (node, fd, false, p->pr_cfg->nc_name,
                now_ns () + node->n_cfg.cf_ping_timeout_ms * UINT64_C (1000000),
                NULL, err, errlen);
}

struct stream *
peer_tls_accept (struct repl_node *node, int fd, uint64_t deadline,
                 X509 **cert, char *err, size_t errlen)
{
  *cert = NULL;
  return start (node, fd, true, NULL, deadline, cert, err, errlen);
}

/* Certificates: does the client's certificate name the node its HELLO
 * says it is?  Always true with a PSK (cert NULL: the key proves the
 * resource; the HMAC challenge then proves the node). */
int
peer_tls_check_name (struct repl_node *node, X509 *cert,
                     const char *node_name, char *err, size_t errlen)
{
  if (!node->n_cfg.cf_tls || !tls_ctx_uses_certs (node->n_tls_server))
    return 0;
  if (!tls_cert_names (cert, node_name, node->n_cfg.cf_tls_allow_wildcard)) {
    snprintf (err, errlen, "refusing connection: its TLS certificate does "
              "not name node %s", node_name);
    return -1;
  }
  return 0;
}

/* Without tls: true, the first bytes of what should be a HELLO header:
 * a TLS handshake (0x16) or alert (0x15) record means the peer has tls:
 * true and we do not.  Returns the advice, or NULL. */
const char *
peer_tls_plain_mismatch (struct repl_node *node, const uint8_t *hdr)
{
  if (node->n_cfg.cf_tls || hdr[1] != 0x03)
    return NULL;
  if (hdr[0] == 0x16 || hdr[0] == 0x15)
    return "the peer speaks TLS and this node does not: set tls: true on "
      "every node, or on none";
  return NULL;
}
