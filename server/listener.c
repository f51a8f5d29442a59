/* nbdrepl: the replication listener.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * Accepts connections from peers with a lower node id (they dial us),
 * reads and checks their HELLO, authenticates them, and only then hands
 * the socket to that peer's thread, where it replaces an older
 * connection (peer.c peer_hand_over).  Anything else is refused with a
 * log line naming the remote address and the problem, and changes
 * nothing: a stranger claiming a node's id never costs that node its
 * link, and learns nothing of our data (our HELLO says who we are and
 * whether we want a secret; role, disk state, size and generations
 * come in HELLO_STATE, which the peer thread sends after the hand-over).
 *
 * Each accepted connection gets a thread of its own for its handshake
 * (TLS, HELLO, authentication), so a client that connects and stalls
 * holds up nobody else; at most MAX_HANDSHAKES run at once, and
 * connections beyond that are refused.  The whole handshake has
 * HANDSHAKE_TIMEOUT_MS.
 */
#include <config.h>

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include <openssl/x509.h>

#include "internal.h"
#include "log.h"
#include "sockets.h"

/* A peer has this long from its connect to the end of its
 * authentication. */
#define HANDSHAKE_TIMEOUT_MS 5000

static void
describe (const struct sockaddr_storage *ss, char *buf, size_t len)
{
  char host[INET6_ADDRSTRLEN] = "?";
  unsigned port = 0;

  if (ss->ss_family == AF_INET) {
    const struct sockaddr_in *sin = (const void *) ss;
    inet_ntop (AF_INET, &sin->sin_addr, host, sizeof host);
    port = ntohs (sin->sin_port);
    snprintf (buf, len, "%s:%u", host, port);
  }
  else if (ss->ss_family == AF_INET6) {
    const struct sockaddr_in6 *sin6 = (const void *) ss;
    inet_ntop (AF_INET6, &sin6->sin6_addr, host, sizeof host);
    port = ntohs (sin6->sin6_port);
    snprintf (buf, len, "[%s]:%u", host, port);
  }
  else
    snprintf (buf, len, "unknown address");
}

/* Read part of a hello, within what is left of the deadline, giving up
 * at once if the node stops. */
static int
read_hello_bytes (struct repl_node *node, int fd, void *buf, size_t len,
                  uint64_t deadline)
{
  uint64_t now = now_ns ();
  int left_ms = now >= deadline ? 0 : (int) ((deadline - now) / 1000000);

  return sock_read_full_until (fd, buf, len, left_ms, node->n_stop_fd);
}

/* Log why a connection from this address (claiming to be node `node`,
 * or NULL) was refused.  A peer retries every few seconds, and a
 * stranger may try far more often, with varying mistakes: the same
 * refusal from the same host is logged once a minute, with how often it
 * was repeated meanwhile.  The last REFUSE_SLOTS different refusals are
 * remembered, so that alternating between a few reasons floods nothing
 * either. */
#define REPEAT_NS (60 * UINT64_C (1000000000))
#define REFUSE_SLOTS 8

struct refusal {
  char rf_key[600];             /* host and message; "" for a free slot */
  uint64_t rf_ns;               /* when it was last logged */
  unsigned rf_repeats;          /* since then, not logged */
};

static void
refuse_vlog (const char *from, const char *node, const char *fmt, va_list ap)
{
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  static struct refusal slots[REFUSE_SLOTS]; /* under lock: handshakes run
                                                in parallel */
  char msg[512], key[sizeof slots[0].rf_key], host[INET6_ADDRSTRLEN + 8];
  const char *colon = strrchr (from, ':');
  uint64_t now = now_ns ();
  struct refusal *rf = NULL;
  unsigned repeats = 0;
  int n = 0;
  size_t i;

  if (node)
    n = snprintf (msg, sizeof msg, "(node %s): ", node);
  vsnprintf (msg + n, sizeof msg - n, fmt, ap);
  snprintf (host, sizeof host, "%.*s",
            colon ? (int) (colon - from) : (int) strlen (from), from);
  snprintf (key, sizeof key, "%s %s", host, msg);

  pthread_mutex_lock (&lock);
  for (i = 0; i < REFUSE_SLOTS; i++)
    if (strcmp (slots[i].rf_key, key) == 0) {
      rf = &slots[i];
      break;
    }
  if (rf && now - rf->rf_ns < REPEAT_NS) {
    rf->rf_repeats++;
    pthread_mutex_unlock (&lock);
    return;
  }
  if (rf)
    repeats = rf->rf_repeats;
  else {                        /* the slot logged longest ago */
    rf = &slots[0];
    for (i = 1; i < REFUSE_SLOTS; i++)
      if (slots[i].rf_ns < rf->rf_ns)
        rf = &slots[i];
  }
  snprintf (rf->rf_key, sizeof rf->rf_key, "%s", key);
  rf->rf_ns = now;
  rf->rf_repeats = 0;
  pthread_mutex_unlock (&lock);

  if (repeats > 0)
    log_error ("connection from %s%s%s (and %u times more in the minute "
               "before)", from, node ? " " : ": ", msg, repeats);
  else
    log_error ("connection from %s%s%s", from, node ? " " : ": ", msg);
}

static void __attribute__ ((format (printf, 2, 3)))
refuse_log (const char *from, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  refuse_vlog (from, NULL, fmt, ap);
  va_end (ap);
}

/* The same for a connection that named a peer, from peer_refuse. */
void
listener_refuse_log (const char *from, const char *node, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  refuse_vlog (from, node, fmt, ap);
  va_end (ap);
}

static void
log_hello_error (const char *from)
{
  if (errno == ECONNRESET)
    refuse_log (from, "closed before a complete hello");
  else if (errno == ECANCELED)
    ;                           /* stopping: not worth a line */
  else if (errno == ETIMEDOUT)
    refuse_log (from, "no hello within %d s",
                HANDSHAKE_TIMEOUT_MS / 1000);
  else
    refuse_log (from, "reading hello: %m");
}

/* The handshake of one connection, up to the hand-over. */
static void
handle (struct repl_node *node, int fd, const char *from, uint64_t accepted)
{
  uint8_t hbuf[REPL_HDR_SIZE], pbuf[REPL_HELLO_MAX];
  struct repl_hello hello;
  struct repl_hdr h;
  struct peer *p;
  char err[512];
  const char *why;
  uint64_t deadline = now_ns () + HANDSHAKE_TIMEOUT_MS * UINT64_C (1000000);
  X509 *cert = NULL;

  if (sock_tune (fd, node->n_cfg.cf_sndbuf_size,
                 node->n_cfg.cf_rcvbuf_size) == -1) {
    refuse_log (from, "%m");
    goto refuse;
  }
  if (node->n_cfg.cf_tls &&
      (fd = peer_tls_accept (node, fd, from, deadline, &cert, err,
                             sizeof err)) == -1) {
    if (errno != ECANCELED)
      refuse_log (from, "%s", err);
    return;
  }
  if (read_hello_bytes (node, fd, hbuf, sizeof hbuf, deadline) == -1) {
    log_hello_error (from);
    goto refuse;
  }
  if ((why = peer_tls_plain_mismatch (node, hbuf)) != NULL) {
    refuse_log (from, "bad hello: %s", why);
    goto refuse;
  }
  if (wire_decode_hdr (hbuf, &h, err, sizeof err) == -1) {
    refuse_log (from, "bad hello: %s", err);
    goto refuse;
  }
  if (h.type != REPL_MSG_HELLO) {
    refuse_log (from, "expected HELLO, got %s",
               wire_type_name (h.type));
    goto refuse;
  }
  if (read_hello_bytes (node, fd, pbuf, h.length, deadline) == -1) {
    log_hello_error (from);
    goto refuse;
  }
  if (wire_decode_hello (pbuf, h.length, &hello, err, sizeof err) == -1) {
    refuse_log (from, "bad hello: %s", err);
    goto refuse;
  }
  p = node_find_peer (node, hello.node_id);
  if (p == NULL) {
    refuse_log (from, "node id %" PRIu32 " is not a peer of node %s in "
                "resource %s", hello.node_id, node->n_self->nc_name,
                node->n_cfg.cf_resource);
    goto refuse;
  }
  /* Everything up to the hand-over, which replaces any existing
   * connection with this peer, is checked here: a bad or unproven
   * connection must not cost a good link. */
  if (peer_tls_check_name (node, cert, p->pr_cfg->nc_name, err,
                           sizeof err) == -1) {
    peer_refuse (p, from, true, err);
    goto refuse;
  }
  if (peer_check_ident (p, &hello, err, sizeof err) == -1) {
    peer_refuse (p, from, true, err);
    /* Our hello (who we are, nothing more) lets the other side log
     * the reason too. */
    peer_send_hello (p, fd);
    goto refuse;
  }
  if (p->pr_dials) {
    refuse_log (from, "node %s (id %" PRIu32 ") dialled us, but the node "
                "with the lower id dials; do both nodes use the same "
                "configuration?", p->pr_cfg->nc_name, hello.node_id);
    goto refuse;
  }
  if (peer_send_hello (p, fd) == -1) {
    refuse_log (from, "sending hello: %m");
    goto refuse;
  }
  if (peer_authenticate (p, fd, from, true, &hello, deadline) == -1)
    goto refuse;
  X509_free (cert);
  peer_hand_over (p, fd, from, &hello, accepted);
  return;

 refuse:
  X509_free (cert);
  close (fd);
}

struct handshake {
  struct repl_node *hs_node;
  int hs_fd;
  uint64_t hs_accepted;         /* 1 for the first connection accepted */
  char hs_from[INET6_ADDRSTRLEN + 16];
};

static void *
handshake_thread (void *arg)
{
  struct handshake *hs = arg;
  struct repl_node *node = hs->hs_node;

  handle (node, hs->hs_fd, hs->hs_from, hs->hs_accepted);
  free (hs);
  thread_set_finish (&node->n_handshakes);
  return NULL;
}

/* Start the handshake of a new connection in a thread of its own. */
static void
start_handshake (struct repl_node *node, int fd, const char *from,
                 uint64_t accepted)
{
  struct handshake *hs = malloc (sizeof *hs);

  if (hs == NULL) {
    log_error ("connection from %s: cannot start its handshake: %m", from);
    close (fd);
    return;
  }
  hs->hs_node = node;
  hs->hs_fd = fd;
  hs->hs_accepted = accepted;
  snprintf (hs->hs_from, sizeof hs->hs_from, "%s", from);
  if (thread_set_start (&node->n_handshakes, handshake_thread, hs) == 0)
    return;
  if (errno == EAGAIN)
    refuse_log (from, "%d other connections are still in their handshake; "
                "refused", MAX_HANDSHAKES);
  else
    log_error ("connection from %s: cannot start its handshake: %m", from);
  free (hs);
  close (fd);
}

/* Stopping (n_stop_fd is readable, so every handshake gives up at
 * once): wait until the handshake threads are gone. */
void
listener_wait_handshakes (struct repl_node *node)
{
  thread_set_wait (&node->n_handshakes);
}

void *
listener_thread (void *arg)
{
  struct repl_node *node = arg;
  uint64_t accepted = 0;

  for (;;) {
    struct pollfd pfd[2] = {
      { .fd = node->n_listen_fd, .events = POLLIN },
      { .fd = node->n_stop_fd, .events = POLLIN },
    };
    struct sockaddr_storage ss;
    socklen_t sslen = sizeof ss;
    char from[INET6_ADDRSTRLEN + 16];
    int fd;

    if (poll (pfd, 2, -1) == -1) {
      if (errno == EINTR)
        continue;
      log_error ("listener: poll: %m");
      break;
    }
    if (pfd[1].revents)
      break;
    fd = accept4 (node->n_listen_fd, (struct sockaddr *) &ss, &sslen,
                  SOCK_CLOEXEC);
    if (fd == -1) {
      if (errno != EINTR && errno != ECONNABORTED && errno != EAGAIN)
        log_error ("listener: accept: %m");
      continue;
    }
    describe (&ss, from, sizeof from);
    start_handshake (node, fd, from, ++accepted);
  }
  return NULL;
}
