/* nbdrepl: the replication listener.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * Accepts connections from peers with a lower node id (they dial us),
 * reads and checks their HELLO, and hands
 * the socket to that peer's thread.  Anything else is refused with a
 * log line naming the remote address and the problem.
 */
#include <config.h>

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "internal.h"
#include "log.h"
#include "sockets.h"

/* A peer has this long to send its HELLO. */
#define HELLO_TIMEOUT_MS 5000

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

static void
log_hello_error (const char *from)
{
  if (errno == ECONNRESET)
    log_error ("connection from %s: closed before a complete hello", from);
  else if (errno == ECANCELED)
    ;                           /* stopping: not worth a line */
  else if (errno == ETIMEDOUT)
    log_error ("connection from %s: no hello within %d s", from,
               HELLO_TIMEOUT_MS / 1000);
  else
    log_error ("connection from %s: reading hello: %m", from);
}

static void
handle (struct repl_node *node, int fd, const char *from)
{
  uint8_t hbuf[REPL_HDR_SIZE], pbuf[REPL_HELLO_SIZE];
  struct repl_hello hello;
  struct repl_hdr h;
  struct peer *p;
  char err[512];
  uint64_t deadline = now_ns () + HELLO_TIMEOUT_MS * UINT64_C (1000000);

  if (sock_tune (fd) == -1 ||
      read_hello_bytes (node, fd, hbuf, sizeof hbuf, deadline) == -1) {
    log_hello_error (from);
    goto refuse;
  }
  if (wire_decode_hdr (hbuf, &h, err, sizeof err) == -1) {
    log_error ("connection from %s: bad hello: %s", from, err);
    goto refuse;
  }
  if (h.type != REPL_MSG_HELLO) {
    log_error ("connection from %s: expected HELLO, got %s", from,
               wire_type_name (h.type));
    goto refuse;
  }
  if (read_hello_bytes (node, fd, pbuf, sizeof pbuf, deadline) == -1) {
    log_hello_error (from);
    goto refuse;
  }
  if (wire_decode_hello (pbuf, sizeof pbuf, &hello, err, sizeof err) == -1) {
    log_error ("connection from %s: bad hello: %s", from, err);
    goto refuse;
  }
  p = node_find_peer (node, hello.node_id);
  if (p == NULL) {
    log_error ("connection from %s: node id %" PRIu32 " is not a peer of "
               "node %s in resource %s", from, hello.node_id,
               node->n_self->nc_name, node->n_cfg.cf_resource);
    goto refuse;
  }
  /* Check everything before the hand-over, which replaces any existing
   * connection with this peer: a bad hello must not cost a good link. */
  if (peer_check_hello (p, &hello, false, err, sizeof err) == -1) {
    peer_refuse (p, from, err);
    /* Our hello lets the other side log the reason too. */
    peer_send_hello (p, fd);
    goto refuse;
  }
  if (p->pr_dials) {
    log_error ("connection from %s: node %s (id %" PRIu32 ") dialled us, "
               "but the node with the lower id dials; do both nodes use the "
               "same configuration?", from, p->pr_cfg->nc_name,
               hello.node_id);
    goto refuse;
  }
  peer_hand_over (p, fd, &hello);
  return;

 refuse:
  close (fd);
}

void *
listener_thread (void *arg)
{
  struct repl_node *node = arg;

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
    handle (node, fd, from);
  }
  return NULL;
}
