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
 * Connections are accepted only from the addresses of the resource's
 * other nodes (as DRBD does; each node dials from its own address,
 * sock_connect_tcp), checked before any byte is read: a stranger
 * elsewhere costs one accept and one close.
 *
 * Each accepted connection gets a thread of its own for its handshake
 * (TLS, HELLO, authentication), so a client that connects and stalls
 * holds up nobody else.  At most MAX_HANDSHAKES run at once, and at
 * most MAX_HANDSHAKES_PER_ADDR from one address.  When a new
 * connection finds no slot, the oldest connection of that address (or,
 * with every slot taken, of any address) that has not sent a single
 * byte yet is closed for it; only when there is none is the new one
 * refused.  A real node sends its first bytes (a HELLO or a TLS
 * ClientHello) at once, so connections that connect and say nothing,
 * however many and from wherever, cannot keep it out; garbage ends its
 * connection at once.  The whole handshake has HANDSHAKE_TIMEOUT_MS.
 */
#include <config.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <netdb.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <linux/tcp.h>

#include <openssl/x509.h>

#include "internal.h"
#include "log.h"
#include "sockets.h"

/* A peer has this long from its connect to the end of its
 * authentication. */
#define HANDSHAKE_TIMEOUT_MS 3000

/* The most addresses the other nodes' hosts resolve to. */
#define MAX_PEER_ADDRS (REPL_MAX_NODES * 4)

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
read_hello_bytes (struct repl_node *node, struct stream *st, void *buf,
                  size_t len, uint64_t deadline)
{
  uint64_t now = now_ns ();
  int left_ms = now >= deadline ? 0 : (int) ((deadline - now) / 1000000);

  return stream_read_full (st, buf, len, left_ms, node->n_stop_fd);
}

/* Log why a connection from this address (claiming to be node `node`,
 * or NULL) was refused.  A peer retries every few seconds, and a
 * stranger may try far more often, with varying mistakes, from many
 * addresses.  So:
 *  - the same refusal from the same host is logged once a minute (the
 *    last REFUSE_SLOTS different ones are remembered);
 *  - a host gets at most HOST_LINES lines a minute, whatever the
 *    reasons (REFUSE_HOSTS hosts are remembered), and all hosts together
 *    at most ALL_LINES: a change of message restarts nothing;
 *  - what was not logged is counted, and the count goes with the next
 *    line logged for that host (or for any host). */
#define REPEAT_NS (60 * UINT64_C (1000000000))
#define REFUSE_SLOTS 16
#define REFUSE_HOSTS 8
#define HOST_LINES 16
#define ALL_LINES 32

struct refusal {
  char rf_key[600];             /* host and message; "" for a free slot */
  uint64_t rf_ns;               /* when it was last logged */
  unsigned rf_repeats;          /* since then, not logged */
};

/* Lines logged in the current minute, and refusals not logged. */
struct refusal_budget {
  char rb_host[INET6_ADDRSTRLEN + 8]; /* "" for a free slot, or all hosts */
  uint64_t rb_since_ns;         /* the minute started then */
  unsigned rb_lines;
  unsigned rb_unlogged;
};

/* Take a line from the budget, or count the refusal as not logged. */
static bool
budget_take (struct refusal_budget *b, unsigned max, uint64_t now)
{
  if (now - b->rb_since_ns >= REPEAT_NS) {
    b->rb_since_ns = now;
    b->rb_lines = 0;
  }
  if (b->rb_lines >= max) {
    b->rb_unlogged++;
    return false;
  }
  b->rb_lines++;
  return true;
}

static void
refuse_vlog (const char *from, const char *node, const char *fmt, va_list ap)
{
  /* All under lock: handshakes run in parallel. */
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  static struct refusal slots[REFUSE_SLOTS];
  static struct refusal_budget hosts[REFUSE_HOSTS], all;
  char msg[512], key[sizeof slots[0].rf_key], host[sizeof hosts[0].rb_host];
  char more[200] = "";
  const char *colon = strrchr (from, ':');
  uint64_t now = now_ns ();
  struct refusal *rf = NULL;
  struct refusal_budget *hb = NULL;
  unsigned repeats = 0, unlogged_here, unlogged_all;
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
  for (i = 0; i < REFUSE_HOSTS; i++)
    if (strcmp (hosts[i].rb_host, host) == 0)
      hb = &hosts[i];
  if (hb == NULL) {             /* the host whose minute started first */
    hb = &hosts[0];
    for (i = 1; i < REFUSE_HOSTS; i++)
      if (hosts[i].rb_since_ns < hb->rb_since_ns)
        hb = &hosts[i];
    if (hb->rb_host[0] && now - hb->rb_since_ns < REPEAT_NS)
      hb = NULL;                /* all busy: only the overall budget */
    else {
      memset (hb, 0, sizeof *hb);
      snprintf (hb->rb_host, sizeof hb->rb_host, "%s", host);
      hb->rb_since_ns = now;
    }
  }
  if (hb && !budget_take (hb, HOST_LINES, now)) {
    pthread_mutex_unlock (&lock);
    return;
  }
  if (!budget_take (&all, ALL_LINES, now)) {
    if (hb)
      hb->rb_lines--;           /* not logged: counted in all only */
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
  unlogged_here = hb ? hb->rb_unlogged : 0;
  if (hb)
    hb->rb_unlogged = 0;
  unlogged_all = all.rb_unlogged;
  all.rb_unlogged = 0;
  pthread_mutex_unlock (&lock);

  if (repeats > 0)
    n = snprintf (more, sizeof more, " (and %u times more in the minute "
                  "before)", repeats);
  else
    n = 0;
  if (unlogged_here + unlogged_all > 0)
    snprintf (more + n, sizeof more - n, " (%u other refusals not logged: "
              "too many)", unlogged_here + unlogged_all);
  log_error ("connection from %s%s%s%s", from, node ? " " : ": ", msg, more);
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

/* Our HELLO to a node that is not a peer: peer_id REPL_PEER_ID_NONE
 * says so (peer.c peer_check_ident logs it on that side). */
static void
send_refusal_hello (struct repl_node *node, struct stream *st)
{
  uint8_t buf[REPL_HDR_SIZE + REPL_HELLO_SIZE];
  struct repl_hdr h;
  struct repl_hello hello = {
    .version = REPL_PROTO_VERSION,
    .node_id = node->n_self->nc_id,
    .peer_id = REPL_PEER_ID_NONE,
  };

  snprintf (hello.resource, sizeof hello.resource, "%s",
            node->n_cfg.cf_resource);
  wire_hdr_init (&h, REPL_MSG_HELLO, 0, REPL_HELLO_SIZE, 0, 0, 0);
  wire_encode_hdr (&h, buf);
  wire_encode_hello (&hello, buf + REPL_HDR_SIZE);
  stream_write_full (st, buf, sizeof buf, node->n_cfg.cf_ping_timeout_ms);
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
  struct stream *st = NULL;

  if (sock_tune (fd, node->n_cfg.cf_sndbuf_size,
                 node->n_cfg.cf_rcvbuf_size) == -1) {
    refuse_log (from, "%m");
    close (fd);
    return;
  }
  if (node->n_cfg.cf_tls &&
      (st = peer_tls_accept (node, fd, deadline, &cert, err,
                             sizeof err)) == NULL) {
    if (errno != ECANCELED)
      refuse_log (from, "%s", err);
    return;
  }
  if (!node->n_cfg.cf_tls && (st = stream_new (fd, NULL)) == NULL) {
    refuse_log (from, "%m");
    return;
  }
  if (read_hello_bytes (node, st, hbuf, sizeof hbuf, deadline) == -1) {
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
  if (read_hello_bytes (node, st, pbuf, h.length, deadline) == -1) {
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
                "resource %s (not in its configuration, or removed from it "
                "by replctl adjust)", hello.node_id, node->n_self->nc_name,
                node->n_cfg.cf_resource);
    /* A HELLO to no peer tells the other side why, to log it too. */
    if (strcmp (hello.resource, node->n_cfg.cf_resource) == 0)
      send_refusal_hello (node, st);
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
    peer_send_hello (p, st);
    goto refuse;
  }
  if (p->pr_dials) {
    refuse_log (from, "node %s (id %" PRIu32 ") dialled us, but the node "
                "with the lower id dials; do both nodes use the same "
                "configuration?", p->pr_cfg->nc_name, hello.node_id);
    goto refuse;
  }
  if (peer_send_hello (p, st) == -1) {
    refuse_log (from, "sending hello: %m");
    goto refuse;
  }
  if (peer_authenticate (p, st, from, true, &hello, deadline) == -1)
    goto refuse;
  X509_free (cert);
  peer_hand_over (p, st, from, &hello, accepted);
  return;

 refuse:
  X509_free (cert);
  stream_free (st);
}

/* The address of a socket address, without its port; IPv4-mapped IPv6
 * addresses as IPv4. */
static void
host_only (const struct sockaddr_storage *in, struct sockaddr_storage *out)
{
  memset (out, 0, sizeof *out);
  if (in->ss_family == AF_INET6) {
    const struct sockaddr_in6 *a = (const void *) in;
    if (IN6_IS_ADDR_V4MAPPED (&a->sin6_addr)) {
      struct sockaddr_in *b = (void *) out;
      b->sin_family = AF_INET;
      memcpy (&b->sin_addr, &a->sin6_addr.s6_addr[12], 4);
    }
    else {
      struct sockaddr_in6 *b = (void *) out;
      b->sin6_family = AF_INET6;
      b->sin6_addr = a->sin6_addr;
      b->sin6_scope_id = a->sin6_scope_id;
    }
  }
  else if (in->ss_family == AF_INET) {
    const struct sockaddr_in *a = (const void *) in;
    struct sockaddr_in *b = (void *) out;
    b->sin_family = AF_INET;
    b->sin_addr = a->sin_addr;
  }
}

static bool
same_host (const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
  return memcmp (a, b, sizeof *a) == 0;
}

/* The addresses of the resource's other nodes (their hosts resolved
 * now: at the listener's start, and again after replctl adjust changed
 * the peers).  Returns how many. */
static size_t
peer_addresses (struct repl_node *node,
                struct sockaddr_storage addrs[MAX_PEER_ADDRS])
{
  size_t i, n = 0;

  for (i = 0; i < PEERS (node)->pl_n; i++) {
    const struct repl_node_cfg *c = PEERS (node)->pl_peers[i]->pr_cfg;
    struct addrinfo hints = {
      .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
      .ai_flags = AI_NUMERICSERV,
    }, *res, *ai;
    int r = getaddrinfo (c->nc_host, c->nc_port, &hints, &res);

    if (r != 0) {
      log_error ("listener: peer %s: address %s: %s (connections from it "
                 "are refused until the node restarts or is adjusted)",
                 c->nc_name,
                 c->nc_address, gai_strerror (r));
      continue;
    }
    for (ai = res; ai && n < MAX_PEER_ADDRS; ai = ai->ai_next) {
      struct sockaddr_storage ss;

      if (ai->ai_addrlen > sizeof ss)
        continue;
      memset (&ss, 0, sizeof ss);
      memcpy (&ss, ai->ai_addr, ai->ai_addrlen);
      host_only (&ss, &addrs[n++]);
    }
    freeaddrinfo (res);
  }
  return n;
}

/* Has the other end of this connection sent any byte yet (the kernel's
 * count, whether or not the handshake thread has read it)? */
static bool
heard_from (int fd)
{
  struct tcp_info ti;
  socklen_t len = sizeof ti;

  memset (&ti, 0, sizeof ti);
  if (getsockopt (fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == -1 ||
      len < offsetof (struct tcp_info, tcpi_bytes_received) +
            sizeof ti.tcpi_bytes_received)
    return true;                /* cannot tell: never close it for another */
  return ti.tcpi_bytes_received > 0;
}

/* Close a handshake's connection to free its slot (the handshake
 * thread sees its socket shut down and gives up). */
static void
evict_locked (struct hs_slot *sl)
{
  shutdown (sl->hs_fd, SHUT_RDWR);
  close (sl->hs_fd);
  sl->hs_used = false;
}

/* A slot for a new connection from addr, or -1 if there is none (the
 * refusal logged).  *id gets what release_slot needs. */
static int
take_slot (struct repl_node *node, int fd, const struct sockaddr_storage *addr,
           const char *from, uint64_t *id)
{
  struct hs_slot *slots = node->n_hs_slots, *sl = NULL, *old_here = NULL,
    *old_any = NULL;
  unsigned here = 0;
  size_t i;
  int dupfd = fcntl (fd, F_DUPFD_CLOEXEC, 0);

  if (dupfd == -1) {
    log_error ("connection from %s: dup: %m", from);
    return -1;
  }
  pthread_mutex_lock (&node->n_hs_lock);
  for (i = 0; i < MAX_HANDSHAKES; i++) {
    struct hs_slot *s = &slots[i];

    if (!s->hs_used) {
      if (sl == NULL)
        sl = s;
      continue;
    }
    if (same_host (&s->hs_addr, addr)) {
      here++;
      if ((old_here == NULL || s->hs_since_ns < old_here->hs_since_ns) &&
          !heard_from (s->hs_fd))
        old_here = s;
    }
    if ((old_any == NULL || s->hs_since_ns < old_any->hs_since_ns) &&
        !heard_from (s->hs_fd))
      old_any = s;
  }
  if (here >= MAX_HANDSHAKES_PER_ADDR || sl == NULL) {
    struct hs_slot *victim = here >= MAX_HANDSHAKES_PER_ADDR
      ? old_here : old_any;

    if (victim == NULL) {
      pthread_mutex_unlock (&node->n_hs_lock);
      close (dupfd);
      if (here >= MAX_HANDSHAKES_PER_ADDR)
        refuse_log (from, "%u other connections from this address are in "
                    "their handshake; refused", here);
      else
        refuse_log (from, "%d other connections are in their handshake; "
                    "refused", MAX_HANDSHAKES);
      return -1;
    }
    evict_locked (victim);
    sl = victim;
  }
  sl->hs_used = true;
  sl->hs_id = *id = ++node->n_hs_next_id;
  sl->hs_addr = *addr;
  sl->hs_fd = dupfd;
  sl->hs_since_ns = now_ns ();
  pthread_mutex_unlock (&node->n_hs_lock);
  return sl - slots;
}

static void
release_slot (struct repl_node *node, int slot, uint64_t id)
{
  struct hs_slot *sl = &node->n_hs_slots[slot];

  pthread_mutex_lock (&node->n_hs_lock);
  if (sl->hs_used && sl->hs_id == id) {   /* not closed for another */
    close (sl->hs_fd);
    sl->hs_used = false;
  }
  pthread_mutex_unlock (&node->n_hs_lock);
}

struct handshake {
  struct repl_node *hs_node;
  int hs_fd;
  int hs_slot;                  /* in n_hs_slots, and its id there */
  uint64_t hs_slot_id;
  uint64_t hs_accepted;         /* 1 for the first connection accepted */
  char hs_from[INET6_ADDRSTRLEN + 16];
};

static void *
handshake_thread (void *arg)
{
  struct handshake *hs = arg;
  struct repl_node *node = hs->hs_node;

  peers_enter (node);
  handle (node, hs->hs_fd, hs->hs_from, hs->hs_accepted);
  peers_leave (node);
  release_slot (node, hs->hs_slot, hs->hs_slot_id);
  free (hs);
  thread_set_finish (&node->n_handshakes);
  return NULL;
}

/* Start the handshake of a new connection in a thread of its own. */
static void
start_handshake (struct repl_node *node, int fd,
                 const struct sockaddr_storage *addr, /* port 0 */
                 const char *from,
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
  hs->hs_slot = take_slot (node, fd, addr, from, &hs->hs_slot_id);
  if (hs->hs_slot == -1) {
    free (hs);
    close (fd);
    return;
  }
  if (thread_set_start (&node->n_handshakes, handshake_thread, hs) == 0)
    return;
  if (errno == EAGAIN)
    refuse_log (from, "%d handshake threads still finishing; refused",
                MAX_HANDSHAKE_THREADS);
  else
    log_error ("connection from %s: cannot start its handshake: %m", from);
  release_slot (node, hs->hs_slot, hs->hs_slot_id);
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
  uint64_t accepted = 0, gen = atomic_load (&node->n_peers_gen);
  struct sockaddr_storage allowed[MAX_PEER_ADDRS];
  size_t nallowed;

  peers_enter (node);
  nallowed = peer_addresses (node, allowed);
  peers_leave (node);

  for (;;) {
    struct pollfd pfd[2] = {
      { .fd = node->n_listen_fd, .events = POLLIN },
      { .fd = node->n_stop_fd, .events = POLLIN },
    };
    struct sockaddr_storage ss, host;
    socklen_t sslen = sizeof ss;
    char from[INET6_ADDRSTRLEN + 16];
    size_t i;
    int fd;

    if (poll (pfd, 2, -1) == -1) {
      if (errno == EINTR)
        continue;
      log_error ("listener: poll: %m");
      break;
    }
    if (pfd[1].revents)
      break;
    memset (&ss, 0, sizeof ss);
    fd = accept4 (node->n_listen_fd, (struct sockaddr *) &ss, &sslen,
                  SOCK_CLOEXEC);
    if (fd == -1) {
      if (errno != EINTR && errno != ECONNABORTED && errno != EAGAIN)
        log_error ("listener: accept: %m");
      continue;
    }
    /* The peers as adjust last left them. */
    if (gen != atomic_load (&node->n_peers_gen)) {
      gen = atomic_load (&node->n_peers_gen);
      peers_enter (node);
      nallowed = peer_addresses (node, allowed);
      peers_leave (node);
    }
    describe (&ss, from, sizeof from);
    host_only (&ss, &host);
    for (i = 0; i < nallowed; i++)
      if (same_host (&allowed[i], &host))
        break;
    if (i == nallowed) {
      refuse_log (from, "not the address of a node of resource %s; "
                  "refused", node->n_cfg.cf_resource);
      close (fd);
      continue;
    }
    start_handshake (node, fd, &host, from, ++accepted);
  }
  return NULL;
}
