/* nbdrepl: TLS on the replication link.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * With `tls: true` every connection between nodes runs TLS 1.3 from
 * its first byte (contexts: common/tls.c).  The handshake happens here,
 * before the HELLO; a failure refuses the connection, never falls back
 * to plain text.
 *
 * The rest of the peer code keeps working on a plain socket: after the
 * handshake a relay thread owns the TLS session and the TCP socket and
 * moves bytes between them and one end of a unix socket pair; the peer
 * code gets the other end.  The receiver, the senders and the pinging
 * ticker use that socket at the same time, as they use a TCP socket,
 * which an OpenSSL session would not allow (and this kernel has no TLS
 * offload to hand the session to).  The relay ends when either side
 * does: end of file or an error on the TCP side shuts the pair (the
 * peer code sees the connection close); the peer code closing or
 * shutting its end sends TLS close_notify and closes the TCP socket.
 * Whatever one side has already sent is passed on first, within the
 * resource's timeout.
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

#define RELAY_BUF (256 * 1024)  /* bytes buffered in each direction */
#define PAIR_BUF (4 * 1024 * 1024)      /* socket pair buffers */

struct relay {
  struct repl_node *rl_node;
  SSL *rl_ssl;
  int rl_net;                   /* TCP, non-blocking */
  int rl_app;                   /* our end of the pair, non-blocking */
  char rl_name[80];             /* for log lines */
  unsigned rl_drain_ms;         /* the resource's timeout */
  uint8_t *rl_out;              /* app -> net (plain text) */
  size_t rl_out_len, rl_out_off;
  uint8_t *rl_in;               /* net -> app (plain text) */
  size_t rl_in_len, rl_in_off;
};

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

/* After every peer has stopped (their sockets are closed, so every
 * relay is ending): wait for the relays, then free the contexts. */
void
peer_tls_fini (struct repl_node *node)
{
  thread_set_wait (&node->n_tls_relays);
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

/* Encrypt and send what rl_out holds.  Returns the bytes moved; sets
 * *failed on a fatal error; *want_net gets POLLIN/POLLOUT when OpenSSL
 * waits for the socket. */
static ssize_t
relay_ssl_write (struct relay *rl, short *want_net, bool *failed)
{
  size_t moved = 0;

  while (rl->rl_out_off < rl->rl_out_len) {
    int r = SSL_write (rl->rl_ssl, rl->rl_out + rl->rl_out_off,
                       rl->rl_out_len - rl->rl_out_off);
    if (r > 0) {
      rl->rl_out_off += r;
      moved += r;
      continue;
    }
    switch (SSL_get_error (rl->rl_ssl, r)) {
    case SSL_ERROR_WANT_WRITE: *want_net |= POLLOUT; return moved;
    case SSL_ERROR_WANT_READ: *want_net |= POLLIN; return moved;
    default: *failed = true; return moved;
    }
  }
  rl->rl_out_len = rl->rl_out_off = 0;
  return moved;
}

/* Decrypt what has arrived into the free end of rl_in. */
static ssize_t
relay_ssl_read (struct relay *rl, short *want_net, bool *net_eof,
                bool *failed)
{
  size_t moved = 0;

  while (rl->rl_in_len < RELAY_BUF) {
    int r = SSL_read (rl->rl_ssl, rl->rl_in + rl->rl_in_len,
                      RELAY_BUF - rl->rl_in_len);
    if (r > 0) {
      rl->rl_in_len += r;
      moved += r;
      continue;
    }
    switch (SSL_get_error (rl->rl_ssl, r)) {
    case SSL_ERROR_WANT_READ: *want_net |= POLLIN; return moved;
    case SSL_ERROR_WANT_WRITE: *want_net |= POLLOUT; return moved;
    case SSL_ERROR_ZERO_RETURN: *net_eof = true; return moved;
    case SSL_ERROR_SYSCALL:
      if (ERR_peek_error () == 0) {     /* closed without close_notify */
        *net_eof = true;
        return moved;
      }
      /* fall through */
    default: *failed = true; return moved;
    }
  }
  return moved;
}

static void
relay_log_failure (struct relay *rl)
{
  char why[256];

  if (ERR_peek_error () != 0)
    log_error ("%s: TLS: %s", rl->rl_name,
               tls_error_string (why, sizeof why, "error"));
  else if (errno != 0 && errno != ECONNRESET && errno != EPIPE)
    log_error ("%s: TLS: %m", rl->rl_name);
}

static void *
relay_thread (void *arg)
{
  struct relay *rl = arg;
  struct repl_node *node = rl->rl_node;
  bool app_eof = false, net_eof = false, failed = false;
  bool app_hup = false;         /* the peer code shut its end: whatever
                                   it wrote before is still passed on */
  bool app_gone = false;        /* nothing can be delivered to it */
  uint64_t drain_deadline = 0;

  for (;;) {
    short want_net = 0, want_app = 0;
    size_t moved = 0;
    ssize_t r;

    /* app -> net */
    if (!app_eof && !failed && rl->rl_out_len == 0) {
      r = read (rl->rl_app, rl->rl_out, RELAY_BUF);
      if (r > 0) {
        rl->rl_out_len = r;
        rl->rl_out_off = 0;
      }
      else if (r == 0 || (errno != EAGAIN && errno != EINTR))
        app_eof = true;
      else
        want_app |= POLLIN;
    }
    if (!failed && rl->rl_out_len > 0) {
      ERR_clear_error ();
      errno = 0;
      moved += relay_ssl_write (rl, &want_net, &failed);
      if (failed)
        relay_log_failure (rl);
    }
    /* net -> app */
    if (rl->rl_in_off == rl->rl_in_len)
      rl->rl_in_off = rl->rl_in_len = 0;
    if (!net_eof && !failed && !app_gone && rl->rl_in_len < RELAY_BUF) {
      ERR_clear_error ();
      errno = 0;
      moved += relay_ssl_read (rl, &want_net, &net_eof, &failed);
      if (failed)
        relay_log_failure (rl);
    }
    if (rl->rl_in_off < rl->rl_in_len) {
      r = write (rl->rl_app, rl->rl_in + rl->rl_in_off,
                 rl->rl_in_len - rl->rl_in_off);
      if (r > 0) {
        rl->rl_in_off += r;
        moved += r;
      }
      else if (errno == EAGAIN || errno == EINTR)
        want_app |= POLLOUT;
      else {                    /* the peer code is gone */
        rl->rl_in_off = rl->rl_in_len = 0;
        app_gone = true;
      }
    }

    /* The end: pass on what one side sent before it ended, within the
     * timeout, then close.  The deadline also frees a relay stuck on a
     * peer that stopped reading once the peer code has given up. */
    if (failed || net_eof || app_eof || app_hup || app_gone) {
      bool out_done = failed || net_eof || (rl->rl_out_len == 0 && app_eof);
      bool in_done = rl->rl_in_off == rl->rl_in_len || app_gone;

      if (drain_deadline == 0)
        drain_deadline = now_ns () + rl->rl_drain_ms * UINT64_C (1000000);
      if ((out_done && in_done) || ms_left (drain_deadline) == 0)
        break;
      if (net_eof || failed)
        want_net = 0;
    }
    if (moved > 0)
      continue;

    {
      /* Until it happens, also watch for the peer code shutting its
       * end, even while nothing is to be read from it. */
      short app_events = want_app | (app_hup || app_eof ? 0 : POLLRDHUP);
      struct pollfd pfd[2] = {
        { .fd = want_net ? rl->rl_net : -1, .events = want_net },
        { .fd = app_events ? rl->rl_app : -1, .events = app_events },
      };
      int timeout = drain_deadline ? ms_left (drain_deadline) : -1;

      if (want_net == 0 && app_events == 0 && timeout == -1)
        break;                  /* nothing can move any more */
      if (poll (pfd, 2, timeout) == -1 && errno != EINTR) {
        log_error ("%s: TLS relay: poll: %m", rl->rl_name);
        break;
      }
      if (pfd[1].revents & (POLLRDHUP | POLLHUP | POLLERR))
        app_hup = true;
    }
  }

  if (!failed && !net_eof)
    SSL_shutdown (rl->rl_ssl);  /* close_notify, best effort */
  SSL_free (rl->rl_ssl);
  close (rl->rl_net);
  shutdown (rl->rl_app, SHUT_RDWR);
  close (rl->rl_app);
  free (rl->rl_out);
  free (rl->rl_in);
  free (rl);
  ERR_clear_error ();
  thread_set_finish (&node->n_tls_relays);
  return NULL;
}

/* Hand ssl (done with its handshake on fd) to a new relay thread;
 * returns the peer code's end of the pair, or -1. */
static int
start_relay (struct repl_node *node, SSL *ssl, int fd, const char *name,
             char *err, size_t errlen)
{
  struct relay *rl = calloc (1, sizeof *rl);
  int sv[2] = { -1, -1 }, size = PAIR_BUF;

  if (rl == NULL || (rl->rl_out = malloc (RELAY_BUF)) == NULL ||
      (rl->rl_in = malloc (RELAY_BUF)) == NULL ||
      socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == -1) {
    snprintf (err, errlen, "TLS relay: %m");
    goto fail;
  }
  for (int i = 0; i < 2; i++) {
    setsockopt (sv[i], SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
    setsockopt (sv[i], SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
  }
  if (set_nonblock (sv[1]) == -1) {
    snprintf (err, errlen, "TLS relay: fcntl: %m");
    goto fail;
  }
  rl->rl_node = node;
  rl->rl_ssl = ssl;
  rl->rl_net = fd;
  rl->rl_app = sv[1];
  rl->rl_drain_ms = node->n_cfg.cf_timeout_ms;
  snprintf (rl->rl_name, sizeof rl->rl_name, "%s", name);
  SSL_set_read_ahead (ssl, 1);

  if (thread_set_start (&node->n_tls_relays, relay_thread, rl) == -1) {
    if (errno == EAGAIN)
      snprintf (err, errlen, "TLS relay: %d TLS connections already; "
                "refused", MAX_TLS_RELAYS);
    else
      snprintf (err, errlen, "TLS relay: pthread_create: %m");
    goto fail;
  }
  return sv[0];

 fail:
  if (sv[0] >= 0) {
    close (sv[0]);
    close (sv[1]);
  }
  if (rl) {
    free (rl->rl_out);
    free (rl->rl_in);
    free (rl);
  }
  return -1;
}

/* Common to both sides: fd is a connected TCP socket, which this takes
 * over (closed on failure).  expect: the node name the server's
 * certificate must carry (client side, certificates), or NULL.  On the
 * server side *cert gets the client's certificate (or NULL with a
 * PSK), which the caller frees after checking it against the node the
 * HELLO names. */
static struct stream *
start (struct repl_node *node, int fd, bool server, const char *expect,
       const char *name, uint64_t deadline, X509 **cert, char *err,
       size_t errlen)
{
  SSL_CTX *ctx = server ? node->n_tls_server : node->n_tls_client;
  SSL *ssl = NULL;
  struct stream *st;
  int app;

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
  if (cert)
    *cert = SSL_get1_peer_certificate (ssl);
  app = start_relay (node, ssl, fd, name, err, errlen);
  if (app == -1) {
    if (cert) {
      X509_free (*cert);
      *cert = NULL;
    }
    goto fail;
  }
  st = stream_new (app, NULL);
  if (st == NULL) {
    snprintf (err, errlen, "TLS: %m");
    if (cert) {
      X509_free (*cert);
      *cert = NULL;
    }
  }
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
  char name[80];

  snprintf (name, sizeof name, "peer %s", p->pr_cfg->nc_name);
  return start (node, fd, false, p->pr_cfg->nc_name, name,
                now_ns () + node->n_cfg.cf_ping_timeout_ms * UINT64_C (1000000),
                NULL, err, errlen);
}

struct stream *
peer_tls_accept (struct repl_node *node, int fd, const char *from,
                 uint64_t deadline, X509 **cert, char *err, size_t errlen)
{
  char name[80];

  *cert = NULL;
  snprintf (name, sizeof name, "connection from %s", from);
  return start (node, fd, true, NULL, name, deadline, cert, err, errlen);
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
