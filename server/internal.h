/* nbdrepl: the replication engine's private header.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 */
#ifndef NBDREPL_INTERNAL_H
#define NBDREPL_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <inttypes.h>
#include <sys/uio.h>
#include <time.h>
#include <sys/socket.h>

#include <openssl/types.h>

#include "activity-log.h"
#include "bitmap.h"
#include "metadata.h"
#include "uuid-compare.h"
#include "repl-config.h"
#include "repl-state.h"
#include "wire.h"
#include "engine.h"
#include "locks.h"

#define NODE_MAGIC 0x4e4f4445       /* "NODE" */
#define PEER_MAGIC 0x50454552       /* "PEER" */

/* Messages a peer may have sent but not yet acknowledged.  A writer that
 * finds the window full waits for acknowledgements. */
#define PEER_WINDOW 4096

/* Resync: requests in flight per peer, and the largest request (1 MiB:
 * a resync of 1 GiB ran at 1600 MiB/s with 256 KiB, 2050 with 1 MiB).
 * Online verify and csums compare digests of the same ranges in the
 * same slots.  Both hold at least one bitmap chunk (MD_MAX_GRANULARITY). */
#define RESYNC_SLOTS 8
#define RESYNC_MAX_BYTES (1024u << 10)
#define VERIFY_SLOTS RESYNC_SLOTS
#define VERIFY_MAX_BYTES RESYNC_MAX_BYTES

/* During a resync both sides write the bitmap pages of what is done at
 * least this often, so an interrupted resync resumes close to where it
 * stopped. */
#define RESYNC_PERSIST_NS    (1000 * 1000 * 1000)
#define RESYNC_PERSIST_BYTES (64u << 20)

/* ---- waiter.c ------------------------------------------------------- */

/* Something a thread waits for: `pending` events, each completed once by
 * another thread.  Lives on the waiting thread's stack.  A bare futex
 * rather than a mutex and condition variable: completing costs one
 * atomic operation, plus a wake-up system call only when the waiter has
 * actually gone to sleep.  The completer never touches the waiter after
 * the count reaches zero except for that futex wake, which is harmless
 * even if the waiter has returned, so the waiting thread may reuse the
 * memory as soon as waiter_wait returns. */
struct waiter {
  _Atomic uint32_t w_state;     /* pending count | WAITER_SLEEPING */
};
#define WAITER_SLEEPING 0x80000000u

extern void waiter_init (struct waiter *w, unsigned pending);
extern void waiter_add (struct waiter *w, unsigned n);
extern void waiter_complete (struct waiter *w);
extern void waiter_wait (struct waiter *w);
extern bool waiter_wait_until (struct waiter *w, uint64_t deadline_ns);
extern void waiter_destroy (struct waiter *w);

/* Monotonic clock in nanoseconds. */
extern uint64_t now_ns (void);

/* ---- volume.c ------------------------------------------------------- */

/* The local backing store: a regular file or a block device. */
struct volume {
  int vol_fd;
  char *vol_path;
  uint64_t vol_size;
  bool vol_is_block;
};

extern int volume_open (struct volume *vol, const char *path,
                        const char *where);
extern void volume_close (struct volume *vol);
extern int volume_capacity (struct volume *vol, uint64_t *size);

/* The volume's size as clients and peers see it.  It only grows
 * (resize.c stores it under n_lock, after everything that covers the
 * new area has grown), so a reader without a lock sees the old or the
 * new size, both valid. */
static inline uint64_t
volume_size (const struct volume *vol)
{
  return __atomic_load_n (&vol->vol_size, __ATOMIC_ACQUIRE);
}
extern int volume_pread (struct volume *vol, void *buf, uint32_t count,
                         uint64_t offset);
extern int volume_pwrite (struct volume *vol, const void *buf,
                          uint32_t count, uint64_t offset);
extern int volume_splice_in (struct volume *vol, int pipe_fd,
                             uint32_t count, uint64_t offset);
extern int volume_flush (struct volume *vol);
extern void volume_start_writeback (struct volume *vol, uint32_t count,
                                    uint64_t offset);
extern int volume_trim (struct volume *vol, uint32_t count, uint64_t offset);
extern int volume_zero (struct volume *vol, uint32_t count, uint64_t offset,
                        bool may_trim);

/* ---- interval-lock.c ------------------------------------------------ */

/* Serialises requests whose byte ranges overlap; others run in parallel.
 * A held range lives on the holder's stack.  With allow-two-primaries a
 * client write of this node says what the other Primary's writes need
 * to know of it (two-primaries.c), and such a write may be held over
 * ranges that are already held (tp_apply_begin). */
struct peer_ticket;
struct ilock_range {
  uint64_t ir_start, ir_end;    /* [start, end) */
  struct ilock_range *ir_next, *ir_prev;
  bool ir_local;                /* a client write of this node
                                   (ilock_acquire_local) */
  struct peer_ticket *ir_ticket; /* ... its message to the other
                                   Primary: pt_conn and pt_seq under
                                   that peer's pr_lock */
  bool ir_local_done;           /* ... it is on our disk (il_lock) */
  bool ir_queued;               /* ... its message is queued to the
                                   peer, or will not be sent (il_lock) */
  bool ir_failed;               /* ... its local write failed: nothing
                                   of it is sent (il_lock) */
};

struct interval_lock {
  pthread_mutex_t il_lock;      /* guards il_held */
  pthread_cond_t il_cond;       /* a range was released */
  struct ilock_range *il_held;
  unsigned il_waiters;          /* threads blocked in acquire */
};

extern void ilock_init (struct interval_lock *il);
extern void ilock_destroy (struct interval_lock *il);
extern void ilock_acquire (struct interval_lock *il, struct ilock_range *r,
                           uint64_t offset, uint64_t len);
extern void ilock_release (struct interval_lock *il, struct ilock_range *r);
extern void ilock_acquire_local (struct interval_lock *il,
                                 struct ilock_range *r, uint64_t offset,
                                 uint64_t len, struct peer_ticket *t);
extern void ilock_mark (struct interval_lock *il, struct ilock_range *r,
                        bool local_done, bool queued, bool failed);

/* two-primaries.c */
#define TP_MAX_CONFLICTS 64     /* local writes one peer write may
                                   overlap at once (more: it waits) */
struct rx_msg;
struct peer;
struct conn;
struct tp_apply {
  struct ilock_range ta_range;  /* held from begin to end */
  size_t ta_npieces;            /* the parts of the peer write to apply */
  struct { uint64_t start, end; } ta_pieces[TP_MAX_CONFLICTS + 1];
};
extern int tp_apply_begin (struct conn *c, const struct repl_hdr *h,
                           struct tp_apply *ta);
extern void tp_apply_end (struct conn *c, const struct rx_msg *m,
                          struct tp_apply *ta, bool ack);
struct repl_node;
extern uint32_t tp_al_reserve (const struct repl_node *node, bool *enough);
extern void tp_wait_lost (struct repl_node *node);
extern int tp_refuse_beside_primary (struct repl_node *node, const char *what,
                                     char *err, size_t errlen);
extern int tp_check_pair (struct repl_node *node, struct conn *c,
                          char *err, size_t errlen);
extern bool tp_routes_diskless (const struct repl_node *node);
extern int tp_check_routed (struct repl_node *node, struct conn *c,
                            uint32_t mask, char *err, size_t errlen);
extern uint32_t tp_routed_mask (struct repl_node *node);
extern int tp_take_routes (struct repl_node *node, char *err, size_t errlen);
extern void tp_wait_diskless_handshakes (struct repl_node *node,
                                         uint64_t deadline);
extern void tp_undo_promotion (struct repl_node *node, const char *why);
extern int tp_handle_routed (struct conn *c, const struct repl_hdr *h);
extern bool tp_beside_storage_primary (struct conn *c);

/* diskless-primaries.c */
/* Does a diskless Primary's via mask (STATE count) say that node id is
 * still deciding whom it writes through (wire.h)? */
static inline bool
dl_via_deciding (uint32_t via, unsigned id)
{
  return via == UINT32_C (1) << id;
}
extern bool dl_decides (struct repl_node *node);
extern uint32_t dl_via_mask_locked (const struct repl_node *node);
extern int dl_check_via (struct repl_node *node, struct conn *c,
                         uint32_t role, uint32_t via, char *err,
                         size_t errlen);
extern void dl_note_writer_locked (struct repl_node *node,
                                   const struct peer *p, bool writer);
extern uint32_t dl_follows_for_locked (const struct repl_node *node,
                                       const struct peer *p);
extern bool dl_beside_writer (struct conn *c);
extern void dl_answer_promoting (struct conn *c, uint32_t role, uint32_t via,
                                 bool hello);
extern int dl_handle_routed (struct conn *c, const struct repl_hdr *h);
extern int dl_take_routes (struct repl_node *node, char *err, size_t errlen);
extern void dl_start_deciding_locked (struct repl_node *node);
extern bool dl_routed_may_feed (struct conn *c, unsigned type);
extern int dl_apply_routed (struct conn *c, const struct rx_msg *m);
extern int dl_read_routed (struct conn *c, const struct repl_hdr *h);

/* ---- metrics.c ------------------------------------------------------ */

struct repl_node;
struct MHD_Daemon;

/* A peer's ACK latency (peer-window.c: from queueing a client write to
 * its applied ACK), in fixed buckets, for the Prometheus endpoint.
 * Under the peer's pr_lock. */
#define ACK_HIST_BUCKETS 16     /* finite upper bounds (metrics.c) */
struct ack_hist {
  uint64_t ah_bucket[ACK_HIST_BUCKETS + 1]; /* per bucket, not cumulative;
                                   the last is +Inf */
  uint64_t ah_count;
  uint64_t ah_sum_ns;
};
extern void ack_hist_add (struct ack_hist *h, uint64_t ns);
extern int metrics_listen (struct repl_node *node, const char *where);
extern int metrics_start (struct repl_node *node);
extern void metrics_stop (struct repl_node *node);

/* ---- peer.c, peer-send.c, peer-receive.c ---------------------------- */

/* A peer's connection state (state.c: peer_set_conn_locked):
 * Connecting -> Handshake -> Connected -> Disconnecting -> Connecting,
 * Handshake -> Connecting when a handshake fails, and Connecting <->
 * StandAlone (replctl disconnect, connect). */
enum conn_state {
  CONN_STANDALONE,              /* not connecting: replctl disconnect */
  CONN_CONNECTING,              /* no connection; dialling or waiting */
  CONN_HANDSHAKE,               /* a connection in its handshake (HELLO,
                                   authentication, HELLO_STATE) */
  CONN_CONNECTED,               /* handshake done, messages flow */
  CONN_DISCONNECTING,           /* failed; being torn down */
};

/* A message waiting in a peer's send queue.  The memory belongs to the
 * thread that queued it, which keeps it alive until om_done. */
struct out_msg {
  struct out_msg *om_next;
  uint64_t om_seq;              /* sequenced messages: their seq, else 0 */
  struct iovec om_iov[3];       /* header, optional payload, optional
                                   digest (flag DIGEST) */
  uint8_t om_digest[REPL_DIGEST_SIZE]; /* filled in by the sender */
  int om_niov;
  uint8_t om_hdr[REPL_HDR_SIZE];
  struct waiter *om_on_send;    /* completed once sent or dropped
                                   (protocol A writes) */
  bool om_done;                 /* sent or dropped; no longer referenced */
  bool om_heap;                 /* malloc'd: freed once done (an ACK of
                                   the reader's, peer-receive.c) */
};

/* A set of short-lived threads, every one joined (thread-set.c). */
#define THREAD_SET_MAX 64
/* Listener handshakes in progress at once, and from one address; more
 * connections are refused, unless a silent one can be closed for them
 * (listener.c).  The thread set has room for closed ones still
 * finishing. */
#define MAX_HANDSHAKES 16
#define MAX_HANDSHAKES_PER_ADDR 4
#define MAX_HANDSHAKE_THREADS (2 * MAX_HANDSHAKES)
struct thread_set {
  pthread_mutex_t ts_lock;      /* guards the fields below */
  pthread_cond_t ts_cond;
  unsigned ts_running;          /* started, not yet finished */
  unsigned ts_max;              /* at most this many running */
  size_t ts_ndone;              /* finished, not yet joined */
  pthread_t ts_done[THREAD_SET_MAX];
};
extern void thread_set_init (struct thread_set *ts, unsigned max);
extern void thread_set_destroy (struct thread_set *ts);
extern int thread_set_start (struct thread_set *ts, void *(*fn) (void *),
                             void *arg);
extern void thread_set_finish (struct thread_set *ts);
extern void thread_set_wait (struct thread_set *ts);
extern unsigned thread_set_wait_until (struct thread_set *ts,
                                       const struct timespec *deadline);

/* A message sent to the peer and not yet acknowledged. */
struct inflight {
  uint64_t if_seq;
  uint64_t if_offset;
  uint64_t if_time_ns;          /* when queued, for the ack timeout */
  uint32_t if_count;
  uint16_t if_type;             /* enum repl_msg_type */
  bool if_on_send;              /* the waiter was completed on send */
  struct waiter *if_waiter;     /* completed on ack or failure, or NULL */
  struct peer_ticket *if_ticket;  /* marked answered on ack, or NULL */
  void *if_read_buf;            /* READ_REQ: where the data goes */
  int *if_read_status;          /* ... set to 0 once it is there, or EIO */
  uint32_t if_bytes;            /* the message on the wire */
};

struct rx;

/* ACKs of peer writes a connection's reader may have queued and not yet
 * sent before it allocates more (allow-two-primaries, rx_queue_ack). */
#define RX_ACK_SLOTS 64

/* A handshake in progress (listener.c). */
struct hs_slot {
  bool hs_used;
  uint64_t hs_id;               /* which connection holds it */
  struct sockaddr_storage hs_addr; /* its source address, port 0 */
  int hs_fd;                    /* a dup of its socket, to close it */
  uint64_t hs_since_ns;         /* accepted then */
};

#define CONN_MAGIC 0x434f4e4e       /* "CONN" */

/* One replication connection to a peer, from the end of its handshake
 * until the last reference goes: allocated when the handshake succeeds
 * (peer_thread), reference-counted (the peer's pr_conn, the receive
 * loop, each writer's ticket, a running resync or verify pass), freed
 * by the last conn_put.  What the peer told on it and everything that
 * flows over it lives here, so a new connection starts from a fresh
 * allocation and a stale reference can only ever see its own, failed,
 * connection.  The locks, by field group:
 *
 *   set at creation, then read-only: the first block;
 *   the reader (whoever holds c_rx_busy, peer-receive.c): c_expect_seq,
 *     c_away_mask and *c_rx;
 *   atomic: c_refs, c_last_recv_ns, c_rx_forwarding, c_heard;
 *   its peer's pr_lock: everything else. */
struct conn {
  uint32_t c_magic;
  struct peer *c_peer;
  uint64_t c_id;                /* the peer's count of connections */
  struct stream *c_stream;      /* the peer thread's (peer-stream.c) */
  int c_sndbuf;                 /* the socket's SO_SNDBUF */
  uint64_t c_connected_ns;
  struct repl_hello c_hello;    /* the peer's HELLO and HELLO_STATE */
  _Atomic unsigned c_refs;

  bool c_failed;                /* conn_fail: nothing more is sent,
                                   applied or acknowledged on it */

  /* Send queue (flat combining: whoever finds no sender sends for all). */
  struct out_msg *c_qhead, **c_qtail;
  bool c_sending;
  uint32_t c_qlen;              /* messages in the queue */
  bool c_flush_wanted;          /* for the peer's flush thread */
  uint64_t c_next_seq;
  uint64_t c_sent_seq;          /* the highest seq taken by a sender */
  uint64_t c_last_ping_ns;

  /* Sent, unacknowledged messages in sequence order (peer-window.c). */
  struct inflight *c_ring;
  uint64_t c_ring_head;         /* index of the oldest, modulo PEER_WINDOW */
  uint64_t c_ring_count;
  uint64_t c_ring_bytes;        /* the wire bytes of the ring's messages:
                                   more than the socket holds of them */
  uint64_t c_acked_seq;         /* the peer has applied every seq <= this */
  uint64_t c_acked_ns;          /* when the last ACK that retired messages
                                   came (c_last_recv_ns then) */
  uint64_t c_received_seq;      /* ... received (protocol B) */

  /* Who reads (peer-receive.c): normally the receive thread; on the
   * primary, a writer waiting for its own ACK reads it itself while
   * nobody else is reading, which saves a wake-up per write at QD1. */
  struct rx *c_rx;              /* the receive state */
  bool c_rx_busy;               /* somebody is reading */
  bool c_rx_handover;           /* a reading writer left; others wait */
  uint64_t c_rx_wanted_applied; /* highest seq whose writer sleeps until
                                   somebody else reads its ACK */
  uint64_t c_rx_wanted_received; /* ... its RECEIVED ACK (protocol B) */
  uint64_t c_rx_writer_ns;      /* when a writer last read or wanted to */
  uint64_t c_expect_seq;        /* next seq the peer must send (reader) */
  _Atomic uint64_t c_last_recv_ns;
  atomic_bool c_rx_forwarding;  /* the reader waits for the ACKs of
                                   writes it forwarded (secondary.c):
                                   the peer's silence is not measured
                                   meanwhile (ticker.c) */
  atomic_bool c_peer_closed;    /* the peer ended it (end of stream,
                                   reset, broken pipe): the reconnect
                                   may wait (peer.c flap_delay_locked) */
  atomic_bool c_heard;          /* a message came after the handshake:
                                   the peer took the connection too (it
                                   may refuse it at the end of its own
                                   handshake); only then does it count
                                   for quorum (role.c) */
  struct out_msg c_ack_msg;     /* the receiver's ACK or NACK: its memory
                                   outlives the receiver's frame */
  /* allow-two-primaries: the reader's ACKs of peer writes, queued one by
   * one and never waited for (rx_queue_ack): used in turn, or malloc'd
   * when the next is still queued.  pr_lock. */
  struct out_msg c_acks[RX_ACK_SLOTS];
  unsigned c_ack_next;          /* the slot to use next, modulo */
  struct out_msg *c_ack_tail;   /* the last ACK queued, while no sender
                                   has taken it yet, or NULL */
  struct out_msg c_goodbye_msg; /* sent once when we shut down */
  bool c_peer_goodbye;          /* the peer said it is shutting down */

  /* The peer's state as it told it on this connection (HELLO_STATE,
   * STATE, UUIDS) and the decision taken at connect (generation.c). */
  enum repl_role c_role;
  bool c_peer_diskless;         /* the peer has no disk */
  struct gen_uuids c_peer_uuids;
  int c_decision;               /* enum uuid_decision, or -1 */
  bool c_decided;               /* sync_on_connect has decided: from now
                                   on a resync or verify may run on it
                                   (pr_lock) */
  bool c_fence_wanted;          /* sync target: the resync thread runs
                                   the sync fence, then sends our bitmap
                                   (sync_fence_then_bitmap; pr_lock) */
  struct gen_uuids c_hello_uuids; /* what our HELLO_STATE told it */
  uint64_t c_hello_changes;     /* ... the change count: what it expects
                                   a bitmap of */
  enum repl_disk_state c_hello_disk; /* ... and our disk state */
  enum repl_role c_hello_role;  /* ... and our role */
  uint64_t c_state_seq;         /* n_state_seq when the state in our
                                   last STATE (or HELLO_STATE) on it was
                                   read: an older one is not sent after
                                   it (role_tell_state; pr_lock) */
  uint64_t c_size;              /* the peer's volume size as far as we
                                   know: its HELLO_STATE's, or ours once
                                   it grew to it (resize.c) */

  /* Diskless primary (diskless.c): the AWAY state last sent.  Storage
   * node (forward.c): the AWAY mask a diskless primary last sent (the
   * reader's). */
  uint32_t c_dl_sent_away;
  uint64_t c_dl_sent_uuid;
  bool c_dl_in_gen;             /* it holds our current generation */
  struct out_msg c_away_msg;    /* the AWAY last queued */
  uint8_t c_away_buf[8];        /* ... and its payload */
  uint32_t c_away_mask;
  /* The sync fence (diskless.c, forward.c): on a diskless node, the
   * storage node asked to leave our targets (SYNC_FENCE) until it
   * reports UUIDS again, the writes in flight that went to it, and
   * the answer owed once they are done; on either side, the fence
   * message last queued (c_fence_queued: c_fence_msg is in use). */
  bool c_dl_leaving;
  unsigned c_dl_writes;
  bool c_dl_fence_pending;
  uint64_t c_dl_fence_token;
  bool c_fence_queued;
  struct out_msg c_fence_msg;
  /* allow-two-primaries with diskless nodes (two-primaries.c): the
   * STATEs (and HELLO_STATE) saying Primary sent on it (storage node)
   * or taken from it (diskless node), and on a storage node the highest
   * count a ROUTED named.  A diskless node's ROUTED goes in its own
   * message.  pr_lock. */
  uint64_t c_tp_primary_states;
  uint64_t c_tp_routed;
  /* On a diskless node: the storage Primaries this storage peer
   * follows, as its last STATE said (count), and whether one said. */
  uint32_t c_dl_follows;
  bool c_dl_follows_known;
  /* A diskless peer that is Primary: where its writes go, as its last
   * STATE (or HELLO_STATE) said (wire.h: STATE's count; diskless-
   * primaries.c). */
  uint32_t c_dl_via;
  uint64_t c_dl_taken;          /* ... its STATEs saying it promotes
                                   that we answered (ROUTED) */
  bool c_routed_queued;
  struct out_msg c_routed_msg;
};

/* conn.c */
extern struct conn *conn_new (struct peer *p, struct stream *st,
                              const struct repl_hello *hello);
extern struct conn *conn_get (struct conn *c);
extern void conn_put (struct conn *c);
extern struct conn *peer_conn_locked (struct peer *p);
extern struct conn *peer_conn_get (struct peer *p);
extern void conn_fail (struct conn *c, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));
extern void conn_fail_locked (struct conn *c, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));
extern void peer_fail_current_locked (struct peer *p, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));

/* One peer: what outlives its connections (configuration, the
 * connection state, bitmap, metadata slot, what we know of its disk,
 * resync and verify progress).  The locks, by field group:
 *
 *   set at creation, then read-only: the first block, pr_md_slot and
 *     pr_resync_bufs;
 *   atomic: pr_msgs_received, pr_bytes_received;
 *   pr_lock: everything else. */
struct peer {
  uint32_t pr_magic;
  struct repl_node *pr_node;
  const struct repl_node_cfg *pr_cfg;
  bool pr_dials;                /* we connect (our id is lower) */
  pthread_t pr_thread;          /* connection and receive loop */
  pthread_t pr_resync_thread;
  pthread_t pr_flush_thread;    /* sends what a reader may not (peer-send.c) */
  int pr_md_slot;               /* its bitmap's slot in the metadata */
  void *pr_resync_bufs[RESYNC_SLOTS]; /* RESYNC_MAX_BYTES each */

  pthread_mutex_t pr_lock;      /* guards the fields below */
  pthread_cond_t pr_cond;       /* state, queue, window or resync change */
  pthread_cond_t pr_rx_cond;    /* the receive thread may read again */
  pthread_cond_t pr_flush_cond; /* the flush thread waits here */
  pthread_cond_t pr_resync_cond; /* the resync thread waits here, not on
                                   pr_cond, which every send broadcasts */
  enum conn_state pr_state;     /* changed by peer_set_conn_locked only */
  struct conn *pr_conn;         /* Connected or Disconnecting: the
                                   connection (a reference), else NULL */
  uint64_t pr_nconns;           /* connections so far */
  struct stream *pr_incoming;   /* handed over by the listener, or NULL */
  struct repl_hello pr_incoming_hello; /* its HELLO (authenticated) */
  uint64_t pr_accepted;         /* the listener's number of the newest
                                   connection handed over */
  bool pr_stopping;
  bool pr_admin_down;           /* replctl disconnect: StandAlone until
                                   replctl connect */
  char pr_last_error[512];
  unsigned pr_flap_ms;          /* the wait after a connection that ended
                                   within a second; 0 once one lasted
                                   (peer.c, flap_delay_locked) */

  /* Replication with the peer (state.c, peer-sync.c). */
  enum repl_state pr_repl;      /* changed by peer_set_repl_locked only */
  uint64_t pr_repl_since_ns;    /* ... when it last changed */
  struct bitmap pr_bitmap;      /* chunks this peer may lack */
  enum repl_disk_state pr_disk; /* its disk as told, or as we know it */
  bool pr_disk_known;
  uint64_t pr_disk_left_uptodate_ns; /* when pr_disk last left UpToDate
                                   (a test hook of diskless.c) */
  bool pr_says_primary;         /* its last HELLO_STATE or STATE said
                                   Primary, even on a connection refused
                                   for it (role.c: role=primary at
                                   start) */
  bool pr_split_brain;          /* the last connect attempt found split
                                   brain (the handler ran once for it) */
  bool pr_resync_deferred;      /* we are its sync target, or it lacks
                                   chunks we marked (forward.c), but
                                   another peer resyncs us first: decide
                                   again once that ends (peer-sync.c) */
  uint64_t pr_bitmap_rx_bytes;  /* WFBitMapS: bytes of its bitmap so far */
  bool pr_pause_user;           /* replctl pause-sync here: the resync
                                   with the peer waits (PausedSyncS/T) */
  bool pr_pause_peer;           /* ... there (its STATE said so) */

  /* Resync towards the peer (we are sync source) or from it (target). */
  bool pr_resync_wanted;        /* kick the resync thread */
  uint64_t pr_resync_start_ns;  /* when the current resync started */
  uint64_t pr_bitmap_persist_ns; /* sync target: bitmap last written */
  uint64_t pr_bitmap_persist_from; /* ... up to this offset */
  uint64_t pr_resync_total;
  uint64_t pr_resync_done;
  bool pr_csum_resync;          /* a resync with csums is running */
  struct bitmap *pr_csum_done;  /* ... chunks whose digests were compared */
  uint64_t pr_csum_same;        /* ... bytes found the same (not sent) */

  /* Online verify (verify.c). */
  bool pr_verify_wanted;        /* kick the resync thread to verify */
  bool pr_verify_finished;      /* the last verify ran to the end */
  bool pr_verify_stop;          /* replctl verify --stop */
  uint64_t pr_verify_total, pr_verify_done;
  uint64_t pr_verify_oos;       /* bytes found out of sync */
  uint8_t *pr_verify_digests;   /* our digests per request slot */
  uint64_t pr_verify_slot_offset[VERIFY_SLOTS]; /* request per slot, or */
  uint32_t pr_verify_slot_count[VERIFY_SLOTS];  /* UINT64_MAX: none */

  /* replctl resize (resize.c): our RESIZE_QUERY and its answer. */
  uint64_t pr_rsz_query;        /* the last query number sent, or 0 */
  bool pr_rsz_answered;         /* ... its RESIZE_REPLY came */
  bool pr_rsz_refused;          /* ... with flag ERROR */
  uint64_t pr_rsz_capacity;     /* ... the size the peer can hold */

  /* Storage node (forward.c): a buffer for a diskless primary's reads. */
  void *pr_read_buf;            /* REPL_MAX_PAYLOAD bytes, or NULL */

  _Atomic uint64_t pr_fence_epoch; /* n_fence_epoch when its fence began */

  /* Counters for status, over every connection. */
  uint64_t pr_msgs_sent;
  uint64_t pr_bytes_sent;
  uint64_t pr_sends;            /* sendmsg calls: msgs_sent / sends is the
                                   batching factor */
  struct ack_hist pr_ack_hist;  /* client writes' ACK latency */
  _Atomic uint64_t pr_msgs_received;  /* added by the reader */
  _Atomic uint64_t pr_bytes_received; /* (peer-receive.c) */

  /* Removed by replctl adjust (peers.c): freed after a grace period.
   * n_grace_lock. */
  struct peer *pr_next_dead;
  uint64_t pr_dead_epoch;
  /* Added by replctl adjust, not started yet: its threads start once
   * every write counted in the write gate at pr_start_epoch (n_io_epoch
   * when the list with it was published) has ended (peers.c
   * peers_start_added).  n_adjust_lock. */
  bool pr_start_pending;
  uint64_t pr_start_epoch;
};

/* peer.c */
extern struct peer *peer_create (struct repl_node *node,
                                 const struct repl_node_cfg *cfg);
extern int peer_start (struct peer *p);
extern void peer_request_stop (struct peer *p);
extern void peer_stop (struct peer *p);
extern void peer_free (struct peer *p);
extern void peer_hand_over (struct peer *p, struct stream *st,
                            const char *from,
                            const struct repl_hello *hello,
                            uint64_t accepted);
extern const char *conn_state_name (enum conn_state state);
extern int peer_check_ident (struct peer *p, const struct repl_hello *h,
                             char *err, size_t errlen);
extern int peer_send_hello (struct peer *p, struct stream *st);
extern void peer_refuse (struct peer *p, const char *addr, bool incoming,
                         const char *why);

/* peer-auth.c */
extern int peer_authenticate (struct peer *p, struct stream *st,
                              const char *addr,
                              bool incoming, const struct repl_hello *h,
                              uint64_t deadline);

/* peer-stream.c: a connection's bytes, plain or TLS (see there for who
 * may call what when). */
struct stream;
extern struct stream *stream_new (int fd, SSL *ssl);
extern void stream_free (struct stream *st);
extern int stream_fd (const struct stream *st);
extern bool stream_is_tls (const struct stream *st);
extern const char *stream_kind (const struct stream *st);
extern void stream_shutdown (struct stream *st);
extern int stream_set_send_timeout (struct stream *st, unsigned ms);
extern const char *stream_error (struct stream *st, int errnum);
extern int stream_read_full (struct stream *st, void *buf, size_t len,
                             int timeout_ms, int stop_fd);
extern int stream_write_full (struct stream *st, const void *buf, size_t len,
                              int timeout_ms);
extern int stream_sendv (struct stream *st, struct iovec *iov, int niov);
extern ssize_t stream_recv (struct stream *st, void *buf, size_t len);
extern ssize_t stream_try_send (struct stream *st, const void *buf,
                                size_t len);
extern bool stream_can_splice (const struct stream *st);

/* peer-tls.c */
extern int peer_tls_init (struct repl_node *node);
extern void peer_tls_fini (struct repl_node *node);
extern struct stream *peer_tls_connect (struct peer *p, int fd, char *err,
                                        size_t errlen);
extern struct stream *peer_tls_accept (struct repl_node *node, int fd,
                                       uint64_t deadline, X509 **cert,
                                       char *err, size_t errlen);
extern int peer_tls_check_name (struct repl_node *node, X509 *cert,
                                const char *node_name, char *err,
                                size_t errlen);
extern const char *peer_tls_plain_mismatch (struct repl_node *node,
                                            const uint8_t *hdr);

/* A writer's message to one peer, whose answer it waits for: filled in
 * by peer_submit (pt_conn stays NULL if nothing was queued or nothing
 * needs an answer), used by ticket_wait_own_ack, given back by
 * ticket_release. */
struct peer_ticket {
  struct conn *pt_conn;         /* the connection it went on (a
                                   reference), or NULL */
  uint64_t pt_seq;
  bool pt_applied;              /* it waits for the applied ACK, not
                                   just the received one */
  bool pt_answered;             /* that ACK came (set under pr_lock
                                   before the waiter completes) */
  struct ilock_range *pt_range; /* allow-two-primaries: the client
                                   write's range, marked queued when the
                                   message is (peer-send.c), or NULL */
};

/* peer-send.c */
extern void out_msg_init (struct out_msg *om, enum repl_msg_type type,
                          uint16_t flags, uint32_t count, uint64_t seq,
                          uint64_t offset, const void *payload,
                          uint32_t length);
extern void conn_queue_locked (struct conn *c, struct out_msg *om);
extern void conn_flush_locked (struct conn *c);
extern void conn_flush_from_reader_locked (struct conn *c);
extern void conn_queue_from_reader_locked (struct conn *c,
                                           struct out_msg *om);
extern void *peer_flush_thread (void *arg);
extern int peer_submit (struct peer *p, enum repl_msg_type type,
                        uint16_t flags, const void *payload, uint32_t count,
                        uint64_t offset, struct waiter *w,
                        struct out_msg *om, struct peer_ticket *t);
extern int peer_submit_locked (struct peer *p, enum repl_msg_type type,
                               uint16_t flags, const void *payload,
                               uint32_t count, uint64_t offset,
                               struct waiter *w, bool on_send,
                               struct out_msg *om, struct peer_ticket *t);
extern void ticket_release (struct peer_ticket *t);
extern void conn_teardown_locked (struct conn *c);
extern int conn_send_wait (struct conn *c, struct out_msg *om);
extern int conn_send_wait_if (struct conn *c, struct out_msg *om,
                              bool (*admit) (struct conn *c, void *arg),
                              void *arg);

/* peer-window.c */
extern struct inflight *window_push_locked (struct conn *c, uint64_t seq);
extern struct inflight *window_find_locked (struct conn *c, uint64_t seq);
extern bool window_holds_resync_locked (struct conn *c, uint64_t offset,
                                        uint64_t count);
extern int window_ack_locked (struct conn *c, uint64_t seq,
                              bool nack, bool received,
                              struct waiter **done, size_t *ndone);
extern void window_fail_all_locked (struct conn *c);

/* peer-receive.c */
/* One connection's receive state; used by whoever holds c_rx_busy. */
struct rx {
  struct stream *rx_stream;     /* the connection */
  int rx_pipe[2];               /* for splicing payloads to disk, or -1 */
  size_t rx_pipe_size;
  uint8_t *rx_buf;              /* RECV_BUF_SIZE bytes */
  size_t rx_fill;               /* bytes in rx_buf not yet handled */
  struct waiter *rx_done[PEER_WINDOW]; /* an ACK's writers to complete */
  uint64_t rx_acked;            /* the highest seq acknowledged on its
                                   own (two-primaries.c), or 0 */
  uint64_t rx_recv_ns;          /* when the bytes being handled came */
};
/* A message as the receive loop hands it to its handler. */
struct rx_msg {
  const struct repl_hdr *m_hdr;
  const uint8_t *m_payload;     /* the bytes of it that have arrived */
  uint32_t m_have;              /* ... how many: fewer than its length
                                   only for a large WRITE or RESYNC_DATA
                                   whose rest is spliced from m_rx */
  struct rx *m_rx;
};
extern void conn_receive_loop (struct conn *c);
extern void rx_queue_ack (struct conn *c, struct rx *rx, uint64_t seq);
extern void ticket_wait_own_ack (struct peer_ticket *t);

/* secondary.c: each returns 0, -1 (the connection failed) or -2 (the
 * local disk failed: the caller NACKs). */
extern int secondary_check (struct conn *c, const struct repl_hdr *h);
extern int secondary_apply_io (struct conn *c, const struct rx_msg *m);
extern int secondary_apply_resync_start (struct conn *c, const struct rx_msg *m);
extern int secondary_apply_resync_data (struct conn *c, const struct rx_msg *m);
extern int secondary_apply_resync_done (struct conn *c, const struct rx_msg *m);

/* peer-sync.c */
extern void sync_on_connect (struct conn *c, const struct repl_hello *h);
extern void sync_on_lost (struct conn *c, bool fence);
extern void sync_check_newer_peers (struct repl_node *node,
                                    struct peer *except);
extern void sync_send_uuids (struct peer *p);
extern int sync_send_uuids_on (struct conn *c);
extern bool sync_claim_source (struct peer *p, bool preempt);
extern int sync_follow_primary (struct conn *c);
extern int node_outdate (struct repl_node *node);
extern int drop_marks_between_secondaries (struct peer *p);
extern int drop_marks_if_copy (struct peer *q);
extern void sync_release_source (struct peer *p, const char *why);
extern void sync_fence_then_bitmap (struct conn *c);
extern int sync_handle (struct conn *c, const struct repl_hdr *h, const uint8_t *payload);

/* verify.c */
extern void verify_run (struct conn *c);
extern int verify_handle_reply (struct conn *c, const struct repl_hdr *h,
                                const uint8_t *payload);
extern int verify_handle_request (struct conn *c, const struct repl_hdr *h);
extern void verify_csum_digest (struct peer *p, unsigned slot,
                                const uint8_t *buf, uint32_t len);
extern void verify_csum_submit_locked (struct peer *p, unsigned slot,
                                       uint32_t len, uint64_t offset,
                                       struct waiter *w, struct out_msg *om);
extern int verify_csum_begin (struct peer *p);
extern void verify_csum_end (struct peer *p);
extern int engine_verify (struct repl_node *node, char *err, size_t errlen);
extern int engine_resync (struct repl_node *node, char *err, size_t errlen);
/* adjust.c */
extern int engine_adjust (struct repl_node *node, char *out, size_t outlen);
extern void adjust_free (struct repl_node *node);

/* admin.c */
extern int engine_disconnect (struct repl_node *node, const char *name,
                              bool down, char *err, size_t errlen);
extern int engine_pause_sync (struct repl_node *node, const char *name,
                              bool pause, char *err, size_t errlen);
extern int engine_verify_stop (struct repl_node *node, char *err,
                               size_t errlen);
extern int engine_outdate (struct repl_node *node, char *err, size_t errlen);
extern int engine_down (struct repl_node *node, const struct ucred *cred,
                        char *err, size_t errlen);
extern int engine_invalidate_remote (struct repl_node *node,
                                     const char *name, char *err,
                                     size_t errlen);
extern int engine_invalidate (struct repl_node *node, char *err,
                              size_t errlen);

/* resize.c */
extern int resize_check_hello (struct conn *c, uint64_t h_size, char *err,
                               size_t errlen);
extern int resize_handle (struct conn *c, const struct rx_msg *m);
extern int resize_handle_query (struct conn *c, const struct repl_hdr *h);
extern int resize_handle_reply (struct conn *c, const struct repl_hdr *h);
extern int engine_resize (struct repl_node *node, bool assume_clean,
                          uint64_t want, char *out, size_t outlen);

/* state.c */
extern int peer_set_repl_locked (struct peer *p, enum repl_state to);
extern void peer_set_conn_locked (struct peer *p, enum conn_state to);
extern void peer_set_disk_locked (struct peer *p, bool known,
                                  enum repl_disk_state disk);
extern bool peer_resyncing_locked (const struct peer *p);
extern void peer_update_pause_locked (struct peer *p);
extern void node_set_disk (struct repl_node *node, enum repl_disk_state disk);
extern void node_set_role_locked (struct repl_node *node,
                                  enum repl_role role);
extern void node_peer_role_locked (struct repl_node *node,
                                   const struct peer *p, bool primary);
extern bool conn_wait_storage_primary_gone (struct conn *c);
extern void node_state_changed (struct repl_node *node);
extern uint64_t node_state_seq (struct repl_node *node);

/* resync.c */
extern void *resync_thread (void *arg);
/* Rate pacing of one resync or verify pass (resync-rate, or the
 * c-min-rate/c-max-rate controller); start zeroed. */
struct pace {
  uint64_t pc_next_ns;          /* the next chunk may not leave before */
  uint64_t pc_io_seen;          /* application requests counted so far */
  uint64_t pc_io_check_ns;      /* when that count was taken */
  bool pc_app_io;               /* application I/O in the last window */
};
extern bool pace_wait (struct conn *c, struct pace *pc, uint64_t len);

/* diskless.c */
extern int diskless_check_hello (struct repl_node *node, struct conn *c,
                                 char *err, size_t errlen);
extern void diskless_peer_uuids (struct repl_node *node, struct conn *c);
extern void diskless_peer_state (struct repl_node *node, struct conn *c);
extern int diskless_ranged (struct repl_node *node, enum repl_msg_type type,
                            const void *buf, uint32_t count, uint64_t offset,
                            uint16_t flags);
extern int diskless_ranged_routed (struct repl_node *node,
                                   enum repl_msg_type type, const void *buf,
                                   uint32_t count, uint64_t offset,
                                   uint16_t flags);
extern int diskless_pread (struct repl_node *node, void *buf, uint32_t count,
                           uint64_t offset);
extern bool node_primary_is_diskless_or_none (struct repl_node *node);
extern bool node_no_storage_primary (struct repl_node *node);
extern int diskless_handle_fence (struct conn *c, const struct repl_hdr *h);
extern void diskless_route_update (struct repl_node *node,
                                   struct conn *owed);
extern int diskless_route_name (struct repl_node *node, char *name,
                                size_t len);
extern void diskless_peer_follows (struct repl_node *node, struct conn *c,
                                   uint32_t mask);
extern int diskless_check_storage_primary (struct repl_node *node,
                                           struct conn *c, char *err,
                                           size_t errlen);

extern void role_tell_state (struct peer *p);
extern int gen_start_for_away (struct repl_node *node, uint32_t away,
                               uint64_t fresh);

/* forward.c */
extern int forward_handle_away (struct conn *c, const struct repl_hdr *h,
                                const uint8_t *payload);
extern int forward_handle_out_of_sync (struct conn *c, const struct repl_hdr *h,
                                       const uint8_t *payload);
extern int forward_handle_read (struct conn *c, const struct repl_hdr *h);
/* The copies of one message that a storage node forwards for a
 * diskless primary (forward_submit): each connected away node gets the
 * message, and an OUT_OF_SYNC naming the away nodes that we could not
 * reach (fc_marked) if there are any, so that it marks them too. */
struct forward_copies {
  struct out_msg fc_msgs[2 * REPL_MAX_NODES];
  struct conn *fc_to[2 * REPL_MAX_NODES]; /* fc_msgs[i] went on it (held) */
  int fc_n;
  uint8_t fc_marked[8];         /* OUT_OF_SYNC's payload: a node id mask */
};
extern void forward_wait (struct repl_node *node, struct waiter *w,
                          struct forward_copies *fc, uint64_t offset,
                          uint64_t received_ns);
extern void forward_submit (struct conn *c, const struct repl_hdr *h,
                            const uint8_t *payload, struct waiter *w,
                            struct forward_copies *fc);
extern bool forward_may_feed_us (struct conn *c);
extern int forward_fence (struct conn *c);
extern void forward_mark_unreached (struct conn *c, uint64_t offset,
                                    uint64_t count);
extern int forward_handle_fenced (struct conn *c, const struct repl_hdr *h);
extern void fence_queue_locked (struct conn *c, enum repl_msg_type type,
                                uint16_t flags, uint64_t seq,
                                uint64_t token);
extern int peer_submit_read_locked (struct peer *p, void *buf,
                                    uint32_t count, uint64_t offset,
                                    int *status, struct waiter *w,
                                    struct out_msg *om,
                                    struct peer_ticket *t);

/* ---- peers.c ------------------------------------------------------ */

/* The node's peers, as published by engine_create or replctl adjust:
 * never changed once published (peers.c). */
struct peer_list {
  size_t pl_n;
  struct peer *pl_peers[REPL_MAX_NODES];
  struct peer_list *pl_next_dead; /* unpublished, waiting for its grace
                                   period (n_grace_lock) */
  uint64_t pl_dead_epoch;
};

extern unsigned grace_read_lock (struct repl_node *node);
extern void grace_read_unlock (struct repl_node *node, unsigned idx);
extern void peers_enter (struct repl_node *node);
extern void peers_leave (struct repl_node *node);
extern void peers_quiesce (struct repl_node *node);
extern bool peers_wait_begin (struct repl_node *node);
extern void peers_wait_end (struct repl_node *node, bool held);
extern unsigned peers_io_begin (struct repl_node *node);
extern void peers_io_end (struct repl_node *node, unsigned idx);
extern struct peer_list *peers_pinned (struct repl_node *node);
extern struct peer_list *peer_list_new (void);
extern void peers_publish (struct repl_node *node, struct peer_list *pl);
extern void peers_retire (struct repl_node *node, struct peer *const *gone,
                          size_t ngone);
extern void peers_reclaim (struct repl_node *node, bool all);
extern void peers_start_added (struct repl_node *node);
extern struct peer *node_find_peer_name (struct repl_node *node,
                                         const char *name);
/* The list this thread has pinned (peers_enter). */
#define PEERS(node) peers_pinned (node)

static inline void
peers_cleanup (struct repl_node **nodep)
{
  peers_leave (*nodep);
}
/* Pin the peer list until the end of the scope. */
#define PEERS_PIN_FOR_CURRENT_SCOPE(node)                               \
  PEERS_PIN_1 ((node), __LINE__)
#define PEERS_PIN_1(node, line) PEERS_PIN_2 ((node), line)
#define PEERS_PIN_2(node, line)                                         \
  __attribute__ ((cleanup (peers_cleanup), unused))                     \
  struct repl_node *peers_pin_##line = (node);                          \
  peers_enter (peers_pin_##line)

/* ---- events.c ------------------------------------------------------- */

#define EVENTS_RING 1024              /* events kept for subscribers */
#define EVENT_TEXT 256                /* the longest event line */
#define EVENTS_MAX_SUBSCRIBERS 8      /* `replctl events` at once */

/* One state change, as `drbdsetup events2` would print it (events.c). */
struct event {
  uint64_t ev_seq;
  struct timespec ev_time;      /* CLOCK_REALTIME */
  bool ev_stats;                /* a progress line: --statistics only */
  char ev_text[EVENT_TEXT];
};

struct events {
  pthread_mutex_t ev_lock;      /* innermost: guards the fields below */
  pthread_cond_t ev_cond;       /* an event was posted, or closed */
  uint64_t ev_next;             /* the seq of the next event */
  bool ev_closed;               /* the node stops */
  struct event ev_ring[EVENTS_RING];
  struct thread_set ev_subscribers;
};

extern void events_init (struct events *ev);
extern void events_destroy (struct events *ev);
extern void events_close (struct repl_node *node);
extern void events_resource (struct repl_node *node, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));
extern void events_device (struct repl_node *node, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));
extern void events_connection (struct peer *p, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));
extern void events_peer_device (struct peer *p, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));
extern void events_progress (struct peer *p, uint64_t done, uint64_t total);
extern void events_membership (struct peer *p, bool created);
extern void events_helper (struct repl_node *node, const char *helper,
                           const struct peer *p, int rc);
extern int events_subscribe (struct repl_node *node, int fd,
                             const char *args, char *err, size_t errlen);

/* Handlers running at once; one more is not started (handler.c). */
#define HANDLERS_MAX 16
struct handlers {
  pthread_mutex_t hd_lock;      /* guards hd_pids; nothing under it */
  pid_t hd_pids[HANDLERS_MAX];  /* running handlers, or 0 */
  struct thread_set hd_reapers; /* one thread waits for each */
};

/* ---- node.c, listener.c, ticker.c, control.c ------------------------ */

/* The locks, listed in precedence order: do not take an earlier lock in
 * this list while holding a later one (nbdkit's rule).
 *
 *   n_adjust_lock     replctl adjust, one at a time (adjust.c); also
 *                     the only writer of the peer list (n_plist)
 *   n_role_lock       role changes against client opens (role.c)
 *   n_resize_lock     growing the volume here (resize.c): held across
 *                     the metadata's growth, never a network wait
 *   the range lock    n_ilock: a write's byte range, held across its
 *                     activity-log transaction, local write and the wait
 *                     for the peers' ACKs (write-path.c, by design)
 *   n_dl_route_lock   a diskless node's route (diskless.c): held
 *                     while it looks at the peers (pr_lock) and
 *                     stores the route (n_lock), by a reader that may
 *                     be a writer holding its range; never a network
 *                     wait
 *   rp_lock           a resync pass's cursor (resync.c)
 *   n_al_lock         the activity log; never held during I/O
 *   n_md_io_lock      the metadata file and n_md.md_super; held across
 *                     its writes and fdatasync
 *   n_lock            the node's role, disk state and the rest marked
 *                     below
 *   pr_lock           one peer (struct peer) and its connections
 *                     (struct conn); never two at once, and never
 *                     together with n_lock
 *   il_lock, ts_lock  inside the interval lock and a thread set only
 *   n_hs_lock         the listener's handshake slots; nothing is taken
 *                     under it
 *   n_grace_lock      removed peers and lists waiting to be freed
 *                     (peers.c); nothing is taken under it
 *   ev_lock           the events ring (events.c): innermost, taken
 *                     under any of the above, nothing taken under it
 *   st_ssl_lock       one stream's TLS session (peer-stream.c): held
 *                     only around an SSL_* call or an update of its
 *                     send buffer's offsets, taken under pr_lock
 *                     (the ticker's ping) or none; nothing under it
 *
 * No lock but the range lock is held across a network wait; a function
 * named *_locked asserts the lock it needs (ASSERT_LOCKED, locks.h). */

struct repl_node {
  uint32_t n_magic;
  struct repl_config n_cfg;
  const struct repl_node_cfg *n_self;
  struct volume n_vol;
  struct interval_lock n_ilock;
  /* The peers (peers.c): read through PEERS (node) under a pin, never
   * directly; replaced, never changed, by engine_create and adjust. */
  _Atomic (struct peer_list *) n_plist;
  _Atomic uint64_t n_peers_gen; /* bumped at each new list (the
                                   listener's allowed addresses) */
  _Atomic uint64_t n_grace_epoch;
  _Atomic uint64_t n_grace_readers[2]; /* pins, by epoch parity */
  pthread_mutex_t n_grace_lock; /* guards n_dead_*; nothing under it
                                   but the frees */
  struct peer_list *n_dead_lists;
  struct peer *n_dead_peers;
  atomic_bool n_added_pending;  /* a peer adjust added waits to start */
  /* The write gate (peers.c): the writes in flight, counted by the
   * parity of n_io_epoch, which only peers_start_added moves on, under
   * n_adjust_lock. */
  _Atomic uint64_t n_io_epoch;
  _Atomic uint64_t n_io_readers[2];
  int n_listen_fd;
  int n_control_fd;
  int n_stop_fd;                /* eventfd: readable once stopping */
  SSL_CTX *n_tls_client;        /* tls: true (peer-tls.c); else NULL */
  SSL_CTX *n_tls_server;
  struct thread_set n_handshakes;  /* listener handshakes (listener.c) */
  pthread_mutex_t n_hs_lock;    /* guards n_hs_slots and n_hs_next_id */
  struct hs_slot n_hs_slots[MAX_HANDSHAKES];
  uint64_t n_hs_next_id;
  bool n_started;
  pthread_t n_listener, n_ticker, n_control;

  pthread_mutex_t n_role_lock;  /* serialises role changes and client
                                   opens against them (role.c) */
  atomic_uint_fast64_t n_clients; /* NBD client connections open */
  void (*n_down_fn) (void);     /* replctl down: set once before
                                   engine_start (engine_on_down) */
  atomic_bool n_down_requested; /* ... and it was called */
  bool n_auto_promoted;         /* promoted by a client open (auto-promote):
                                   demoted when the last one closes */
  bool n_role_unannounced;      /* promoted, and the peers not yet told
                                   (role_changed): writes wait, else a
                                   peer takes one of ours for a protocol
                                   error (n_lock) */
  pthread_mutex_t n_lock;       /* guards n_role, n_disk, n_primary_id,
                                   n_primaries_*, n_start_*,
                                   n_sync_source_id, n_quorum,
                                   n_work, n_resizing,
                                   n_stopping, the n_dl_* fields and
                                   writes of n_vol.vol_size (volume_size
                                   reads it without) */
  pthread_cond_t n_cond;        /* signalled when stopping */
  enum repl_role n_role;
  enum repl_disk_state n_disk;
  int n_primary_id;             /* the primary as far as we know, or -1
                                   (state.c: primary_id_locked) */
  uint32_t n_primaries_storage; /* ids of the storage peers that are
                                   Primary, as their connections said */
  uint32_t n_primaries_diskless; /* ... the diskless peers */
  _Atomic uint64_t n_state_seq; /* bumped after anything our STATE says
                                   changes: role, disk, the storage
                                   Primaries followed, the routed mask,
                                   a pause (node_state_changed); no lock:
                                   it moves under n_lock or pr_lock */
  bool n_start_pending;         /* role=primary at start, not yet
                                   confirmed: no client until it is, and
                                   a connected Primary peer makes this
                                   node Secondary instead (role.c) */
  uint64_t n_start_deadline_ns; /* ... confirmed at the latest then */
  pthread_t n_worker;           /* node-level work (worker.c) */
  pthread_cond_t n_work_cond;   /* ... waits here for n_work */
  unsigned n_work;              /* WORK_* posted, not yet done */
  int n_sync_source_id;         /* the peer that resyncs this node (its
                                   connection is WFBitMapT or
                                   SyncTarget), or -1: one at a time
                                   (peer-sync.c) */
  bool n_sync_source_primary;   /* ... and it is a Primary */
  uint32_t n_sync_handover;     /* by node id: sources that a better one
                                   replaced, until each one's connection
                                   has been torn down (sync_release_
                                   source); n_cond is broadcast then */
  bool n_quorum;                /* as of the last peer change (role.c) */
  unsigned n_fencing;           /* fence-peer handlers running under
                                   fencing: writes wait (role.c) */
  bool n_fence_failed;          /* one failed: writes wait until
                                   replctl resume-io */
  uint64_t n_fence_deadline_ns; /* the last fence started: failed if it
                                   still runs then */
  uint64_t n_fence_epoch;       /* bumped by resume-io: fences begun
                                   before are forgotten */
  atomic_bool n_gen_unacked;    /* gen_before_write started a generation
                                   and no write has been acknowledged in
                                   it yet (gen_withdraw) */
  struct md_super n_gen_before; /* ... the superblock before it
                                   (n_md_io_lock) */
  _Atomic uint64_t n_gen_started; /* ... its current UUID: the one
                                   gen_commit may clear GU_FLAG_TENTATIVE
                                   of */
  _Atomic uint64_t n_tick_ns;   /* when the ticker last ran (ticker.c),
                                   0 before it first did */
  atomic_bool n_gen_pending;    /* a peer may be away with bitmap UUID 0:
                                   check before the next write
                                   (gen_before_write) */
  bool n_stopping;
  bool n_resizing;              /* replctl resize runs (resize.c) */
  pthread_mutex_t n_resize_lock; /* serialises growing the volume: the
                                   metadata's size, the bitmaps' and the
                                   log's (resize.c) */

  /* Metadata (meta.c). */
  char *n_md_path;
  int n_md_fd;
  uint64_t n_md_base;           /* where the area starts in n_md_fd */
  bool n_md_open, n_al_ready;
  bool n_md_crashed;            /* found not stopped cleanly */
  bool n_md_created;            /* this start created the file (removed
                                   again if the start fails) */
  struct md n_md;
  pthread_mutex_t n_md_io_lock; /* serialises md_* calls (they do I/O) */
  pthread_mutex_t n_al_lock;    /* guards n_al; never held during I/O */
  pthread_cond_t n_al_cond;     /* a transaction ended or a slot freed */
  struct activity_log n_al;
  uint32_t *n_al_table, *n_al_drops;    /* for write_txn */
  struct bitmap n_md_scratch;   /* bitmap pages on their way to disk */
  atomic_uint_fast64_t n_al_waits;      /* writes that waited for a
                                           transaction */
  /* allow-two-primaries (two-primaries.c): writes of the other Primary
   * that overlapped ours in flight, and those of them ours superseded
   * in part or whole. */
  atomic_uint_fast64_t n_tp_conflicts, n_tp_kept_local;

  /* A diskless node (disk: none; diskless.c).  n_lock guards these. */
  bool n_diskless;
  uint64_t n_dl_current;        /* the data's current UUID, as learnt
                                   from the storage nodes or started here */
  uint32_t n_dl_gen_away;       /* node ids away since it started */
  uint64_t n_dl_prev;           /* the generation before, if it was
                                   started here (else 0) ... */
  uint32_t n_dl_prev_targets;   /* ... and the targets of the write that
                                   started it: theirs until AWAY */
  unsigned n_dl_next_read;      /* round-robin read balancing */
  int n_dl_route;               /* allow-two-primaries: the storage
                                   Primary every write of ours goes
                                   through (the others get it from it),
                                   or -1: straight to every target
                                   (diskless_route_update) */
  unsigned n_dl_direct;         /* writes in flight that went straight
                                   to the targets (route -1) */
  int n_dl_owed_id;             /* a ROUTED is owed to this storage
                                   node, or -1 ... */
  uint64_t n_dl_owed_conn;      /* ... on its connection number ... */
  uint64_t n_dl_owed_count;     /* ... naming this many STATEs */
  uint64_t n_dl_follow_seq;     /* bumped (n_cond broadcast) when a
                                   peer's role, connection, what it
                                   follows, or the route changes:
                                   dl_wait_unfollowed */
  /* Two diskless Primaries (diskless-primaries.c).  On a diskless
   * node: */
  int n_dl_via;                 /* as Primary, the diskless Primary our
                                   writes go through, or -1: straight */
  bool n_dl_deciding;           /* promoting: asking the diskless peers */
  uint32_t n_dl_candidates;     /* ... the diskless peers promoting too */
  int n_dl_answer_writer;       /* ... one that answered WRITER, or -1 */
  bool n_dl_answer_through;     /* ... one answered THROUGH */
  bool n_dl_untold;             /* writing straight from now on, but the
                                   storage nodes are not told yet: the
                                   route waits (diskless_route_update) */
  /* On a storage node: the diskless Primaries that write straight to
   * us, and since when, in the order their STATEs came. */
  uint32_t n_dl_writers;
  uint64_t n_dl_writer_since[REPL_MAX_NODE_ID + 1];
  uint64_t n_dl_writer_seq;
  pthread_mutex_t n_dl_route_lock; /* serialises diskless_route_update
                                   (diskless.c); itself no n_lock field */
  /* A storage node's sync fence (forward.c).  n_lock guards these. */
  uint64_t n_fence_token;       /* of the last SYNC_FENCE sent */
  uint32_t n_fence_wait;        /* diskless node ids yet to answer it */
  bool n_fence_refused;         /* one answered with flag ERROR */

  atomic_uint_fast64_t n_requests_in_flight;
  atomic_uint_fast64_t n_writes, n_write_bytes, n_reads, n_read_bytes;

  struct events n_events;       /* the events stream (events.c) */
  char *n_config_abs;           /* the configuration file, absolute */
  pthread_mutex_t n_adjust_lock; /* serialises replctl adjust (adjust.c);
                                   taken before any other */
  struct adjusted *n_adjusted;  /* configurations adjust loaded */
  bool n_adjust_closed;         /* the node stops: no more adjust
                                   (n_adjust_lock) */
  struct handlers n_handlers;   /* handlers running (handler.c) */

  /* The Prometheus endpoint (metrics.c), if the node has metrics:. */
  int n_metrics_fd;             /* bound in engine_create, or -1 */
  struct MHD_Daemon *n_metrics; /* serving since engine_start, or NULL */
};

/* worker.c */
#define WORK_ANNOUNCE 0x1       /* STATE to every connected peer */
#define WORK_UUIDS 0x2          /* UUIDS to every connected peer */
#define WORK_DROP_MARKS 0x4     /* drop what we marked for secondaries
                                   that are copies of our Primary too */
#define WORK_GEN_COMMIT 0x8     /* a write of our new generation
                                   completed: not tentative any more */
extern void worker_post (struct repl_node *node, unsigned work);
extern void worker_post_locked (struct repl_node *node, unsigned work);
extern void *worker_thread (void *arg);

/* node.c */
extern const char *role_name (enum repl_role role);
extern const char *disk_state_name (enum repl_disk_state disk);
extern enum repl_role node_role (struct repl_node *node);
extern struct peer *node_find_peer (struct repl_node *node, unsigned id);

/* meta.c */
extern int meta_place_internal (struct repl_node *node, const char *where);
extern int meta_open (struct repl_node *node, const char *where);
extern void meta_close (struct repl_node *node);
extern int meta_set_flags (struct repl_node *node, uint32_t set,
                           uint32_t clear);
extern int meta_note_primary (struct repl_node *node);
extern int meta_write_peer_bitmap (struct repl_node *node, struct peer *p);
extern int meta_write_peer_bitmap_range (struct repl_node *node,
                                         struct peer *p, uint64_t offset,
                                         uint64_t len);
extern int meta_write_super_locked (struct repl_node *node,
                                    const struct md_super *sb);
extern int meta_assign_peer_slot (struct repl_node *node, struct peer *p,
                                  char *err, size_t errlen);
extern void meta_release_peer_slot (struct repl_node *node, struct peer *p);

/* generation.c */
extern void gen_view (struct repl_node *node, const struct peer *p,
                      struct gen_uuids *u);
extern void gen_to_wire (const struct gen_uuids *u, struct repl_uuids *w);
extern int gen_decide (struct repl_node *node, struct conn *conn,
                       int *rulep, char *err, size_t errlen);
extern int gen_full_sync_start_source (struct repl_node *node, struct peer *p,
                                       const struct gen_uuids *target);
extern int gen_resync_start_target (struct repl_node *node, struct peer *p,
                                    const struct gen_uuids *source);
extern int gen_resync_finished_target (struct repl_node *node,
                                       struct peer *p,
                                       const struct gen_uuids *source);
extern int gen_resync_finished_source (struct repl_node *node,
                                       struct peer *p);
extern int gen_clear_bitmap (struct repl_node *node, struct peer *p);
extern int gen_adopt_current (struct repl_node *node, struct peer *p,
                              const struct gen_uuids *primary);
extern void gen_before_write (struct repl_node *node);
extern void gen_two_primaries_lost (struct repl_node *node);
extern void gen_withdraw (struct repl_node *node);
extern int gen_commit (struct repl_node *node);
extern int gen_force_primary (struct repl_node *node);
extern int meta_al_begin (struct repl_node *node, uint64_t offset,
                          uint64_t len);
extern int meta_al_begin_reserve (struct repl_node *node, uint64_t offset,
                                  uint64_t len, uint32_t reserve);
extern void meta_al_end (struct repl_node *node, uint64_t offset,
                         uint64_t len);

/* handler.c */
extern void handlers_init (struct handlers *hd);
extern void handlers_stop (struct repl_node *node);
extern void handlers_destroy (struct handlers *hd);
typedef void handler_done_fn (struct repl_node *node, struct peer *p,
                              int status);
extern void handler_run (struct repl_node *node, enum repl_handler h,
                         const struct peer *p);
extern void handler_run_then (struct repl_node *node, enum repl_handler h,
                              struct peer *p, handler_done_fn *done);

/* role.c */
extern int role_handle_state (struct conn *c, const struct repl_hdr *h);
extern bool role_fence_begin (struct repl_node *node, struct conn *c);
extern void role_fence_check (struct repl_node *node);
extern void role_fence_done (struct repl_node *node, struct peer *p,
                             int status);
extern int engine_resume_io (struct repl_node *node, char *err,
                             size_t errlen);
extern bool role_auto_promote_locked (struct repl_node *node);
extern bool role_auto_demote_locked (struct repl_node *node);
extern int role_changed (struct repl_node *node, char *err, size_t errlen);
extern bool node_has_quorum (struct repl_node *node);
extern void node_quorum_changed (struct repl_node *node);
extern int role_check_write (struct repl_node *node);
extern int role_complete_write (struct repl_node *node, bool lost);
extern void role_start_check (struct repl_node *node);
extern bool role_start_yield (struct repl_node *node, struct peer *p);
extern void role_start_wait (struct repl_node *node);
extern int role_check_peer_role (struct repl_node *node, struct conn *c,
                                 uint32_t role, char *err, size_t errlen);

/* listener.c */
extern void *listener_thread (void *arg);
extern void listener_wait_handshakes (struct repl_node *node);
extern void listener_refuse_log (const char *from, const char *node,
                                 const char *fmt, ...)
  __attribute__ ((format (printf, 3, 4)));

/* ticker.c */
extern void *ticker_thread (void *arg);

/* control.c */
extern void *control_thread (void *arg);
extern char *control_status (struct repl_node *node, bool json);
extern int control_listen (const char *path, const char *group,
                           const char *where);

/* node.c */
extern void test_hook_sleep (const char *env, long long *ms);

#endif /* NBDREPL_INTERNAL_H */
