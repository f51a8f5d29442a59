/* nbdrepl: a connection — one authenticated TCP link to a peer.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * A struct conn is allocated when a handshake has authenticated the
 * peer (peer.c: establish) and lives until its last reference goes:
 *
 *   the peer's pr_conn       from Connected until teardown (peer_thread)
 *   the peer thread          from the handshake until teardown
 *   a writer's ticket        from peer_submit until ticket_release
 *   a resync or verify pass  while it runs (resync.c)
 *
 * It fails once (conn_fail: c_failed, logged with the reason) and never
 * recovers: a new connection is a new allocation, so whoever holds a
 * stale reference sees its own failed connection, never the next one.
 */
#include <config.h>

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "internal.h"
#include "log.h"

/* A new connection of p on stream st, authenticated, whose HELLO was hello;
 * one reference, the caller's.  Until the peer thread publishes it
 * (pr_conn) nobody else sees it.  NULL if out of memory (logged). */
struct conn *
conn_new (struct peer *p, struct stream *st, const struct repl_hello *hello)
{
  struct conn *c = calloc (1, sizeof *c);
  size_t i;

  if (c == NULL || (c->c_ring = calloc (PEER_WINDOW,
                                        sizeof *c->c_ring)) == NULL) {
    log_error ("peer %s: calloc: %m", p->pr_cfg->nc_name);
    free (c);
    return NULL;
  }
  c->c_magic = CONN_MAGIC;
  c->c_peer = p;
  c->c_stream = st;
  c->c_hello = *hello;
  c->c_refs = 1;
  c->c_qtail = &c->c_qhead;
  c->c_next_seq = 1;
  c->c_expect_seq = 1;
  c->c_decision = -1;
  c->c_ack_msg.om_done = true;
  for (i = 0; i < RX_ACK_SLOTS; i++)
    c->c_acks[i].om_done = true;
  c->c_away_msg.om_done = true;
  c->c_goodbye_msg.om_done = true;
  return c;
}

struct conn *
conn_get (struct conn *c)
{
  assert (c->c_magic == CONN_MAGIC);
  atomic_fetch_add (&c->c_refs, 1);
  return c;
}

/* Drop a reference; the last frees the connection (its stream is the
 * peer thread's, closed at teardown). */
void
conn_put (struct conn *c)
{
  if (c == NULL)
    return;
  assert (c->c_magic == CONN_MAGIC);
  if (atomic_fetch_sub (&c->c_refs, 1) != 1)
    return;
  assert (c->c_ring_count == 0 && c->c_qhead == NULL && c->c_rx == NULL);
  c->c_magic = 0;
  free (c->c_ring);
  free (c);
}

/* p's connection if it is Connected and has not failed, else NULL.
 * pr_lock held; the pointer is good while it is. */
struct conn *
peer_conn_locked (struct peer *p)
{
  ASSERT_LOCKED (&p->pr_lock);
  if (p->pr_conn == NULL || p->pr_conn->c_failed)
    return NULL;
  return p->pr_conn;
}

/* The same, with a reference for the caller (conn_put), or NULL. */
struct conn *
peer_conn_get (struct peer *p)
{
  struct conn *c;

  pthread_mutex_lock (&p->pr_lock);
  c = peer_conn_locked (p);
  if (c != NULL)
    conn_get (c);
  pthread_mutex_unlock (&p->pr_lock);
  return c;
}

static void
vfail_locked (struct conn *c, const char *fmt, va_list ap)
{
  struct peer *p = c->c_peer;

  ASSERT_LOCKED (&p->pr_lock);
  if (c->c_failed)
    return;                     /* already failed */
  c->c_failed = true;
  if (c->c_peer_diskless)       /* tp_routed_mask */
    node_state_changed (p->pr_node);
  vsnprintf (p->pr_last_error, sizeof p->pr_last_error, fmt, ap);
  if (p->pr_stopping || c->c_peer_goodbye) /* an orderly stop is not a
                                              fault */
    log_info ("peer %s: %s; disconnecting", p->pr_cfg->nc_name,
              p->pr_last_error);
  else
    log_error ("peer %s: %s; disconnecting", p->pr_cfg->nc_name,
               p->pr_last_error);
  if (p->pr_conn == c)
    peer_set_conn_locked (p, CONN_DISCONNECTING);
  /* Wakes the receiver out of recv and any sender out of sendmsg. */
  stream_shutdown (c->c_stream);
  pthread_cond_broadcast (&p->pr_cond);
  pthread_cond_broadcast (&p->pr_rx_cond);
}

/* Declare connection c dead, once, saying why.  Safe from any thread; a
 * no-op if it has already failed. */
void
conn_fail_locked (struct conn *c, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  vfail_locked (c, fmt, ap);
  va_end (ap);
}

void
conn_fail (struct conn *c, const char *fmt, ...)
{
  struct peer *p = c->c_peer;
  va_list ap;

  pthread_mutex_lock (&p->pr_lock);
  va_start (ap, fmt);
  vfail_locked (c, fmt, ap);
  va_end (ap);
  pthread_mutex_unlock (&p->pr_lock);
}

/* Fail p's current connection, if it has one.  pr_lock held. */
void
peer_fail_current_locked (struct peer *p, const char *fmt, ...)
{
  struct conn *c = peer_conn_locked (p);
  va_list ap;

  if (c == NULL)
    return;
  va_start (ap, fmt);
  vfail_locked (c, fmt, ap);
  va_end (ap);
}
