/* nbdrepl: the byte stream of a connection between nodes.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * A stream is a connected TCP socket, plain or with a TLS session on it
 * (peer-tls.c runs the handshake and hands the session over).  The
 * handshake messages, the senders and the readers of a connection all
 * go through here, so that the rest of the peer code does not care
 * which it is.
 *
 * Plain: a blocking socket (SO_SNDTIMEO bounds a send), used with
 * sendmsg and recv as before.
 *
 * TLS, the usual case (OpenSSL encrypts): OpenSSL's record layer reads
 * cipher text from st_rx and writes it to st_tx, through a BIO of ours
 * (stream_bio_*), and the stream makes the system calls itself, as
 * with plain TCP: the reader one blocking recv for whatever has arrived
 * (no poll before it, no read that finds nothing), the sender one
 * send for all the records of a batch (not one write per 16 KiB
 * record).  Each node then makes the same system calls per batch as
 * with plain TCP (bench/RESULTS.md, 2026-12-02).  The socket is blocking; sends use MSG_DONTWAIT and poll
 * for room, so that a send never waits holding anything.  The price is
 * a copy of the cipher text on each side (into st_rx's and OpenSSL's
 * buffers, out of OpenSSL's into st_tx), small against the AES-GCM
 * work on the same bytes.
 *
 * TLS with kernel TLS in either direction (st_own_io false): OpenSSL's
 * record layer works on the TCP socket itself, which is non-blocking,
 * and the waits below are polls.
 *
 * Who calls what is the connection's existing ownership
 * (struct conn): one reader at a time (c_rx_busy: the receive thread or
 * a writer reading its own ACK), one sender at a time (c_sending, or the
 * ticker's ping under pr_lock while nobody sends), and during the
 * handshake the one thread running it.  A reader and a sender run at
 * the same time, and an SSL object must not be used by two threads at
 * once: st_ssl_lock is held around each SSL_* call and around the
 * updates of st_tx's offsets, never across a wait (st_rx is the
 * reader's alone: only its SSL_read takes from it).  With
 * the socket BIO (kernel TLS), a call that cannot go on says what it
 * waits for:
 *
 *   SSL_ERROR_WANT_WRITE   poll for POLLOUT, then the same call again
 *                          (same buffer, same length: OpenSSL may hold
 *                          part of a record from it);
 *   SSL_ERROR_WANT_READ    a reader polls for POLLIN.  A sender (TLS
 *                          1.3 has no renegotiation, so this should not
 *                          happen) may have pulled bytes into OpenSSL's
 *                          buffer where a reader parked in poll would
 *                          not see them: it wakes the reader through
 *                          st_wake_fd, then waits in short slices for
 *                          the reader to make progress, within its
 *                          timeout.
 *
 * With our own BIO, SSL_ERROR_WANT_WRITE means st_tx is full: the
 * sender sends it (tx_flush) and makes the same call again.
 * SSL_ERROR_WANT_READ means st_rx is empty: a reader receives
 * (rx_fill), a sender (should not happen) waits in short slices for the
 * reader.  A reader's SSL_read may add to st_tx too (an alert, a
 * KeyUpdate's answer: TLS 1.3 lets a read write); that waits there for
 * the next sender or ping.
 *
 * A ping that OpenSSL could only partly send (socket full) stays in
 * st_pend, and the next sender finishes it before writing anything else
 * (OpenSSL counts the held record against the next SSL_write).
 *
 * Kernel TLS: the contexts ask for it (SSL_OP_ENABLE_KTLS, common/tls.c);
 * OpenSSL hands the keys to the kernel where it has the "tls" ULP and
 * quietly keeps the work itself where it has not.  st_kind records what
 * it did, for replctl status, and says which of the two ways above the
 * stream works (own I/O only for "openssl"): the kernel's record layer
 * needs the socket BIO.
 */
#include <config.h>

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "cleanup.h"
#include "internal.h"
#include "log.h"
#include "sockets.h"
#include "tls.h"

#define STREAM_MAGIC 0x5354524d     /* "STRM" */

/* Small pieces of a batch are gathered into one record's worth of
 * plain text (TLS 1.3's largest record), so that a batch of 4k writes
 * costs a record per four of them, not two per write. */
#define TLS_RECORD 16384

/* A sender that got SSL_ERROR_WANT_READ looks again this often. */
#define WANT_READ_SLICE_MS 10

/* Own I/O: the cipher text buffers.  One recv takes up to ST_RX_SIZE
 * of whatever has arrived (a QD16 batch of 4k writes is ~70 KiB); one
 * sendmsg sends up to ST_TX_SIZE.  A sender's SSL_write leaves
 * ST_TX_RESERVE free for what a reader's SSL_read may have to write (an
 * alert, a KeyUpdate: a few dozen bytes). */
#define ST_RX_SIZE (256u << 10)
#define ST_TX_SIZE (256u << 10)
#define ST_TX_RESERVE 4096

struct stream {
  uint32_t st_magic;
  int st_fd;                    /* the TCP socket */
  SSL *st_ssl;                  /* NULL: plain TCP */
  const char *st_kind;          /* "plain", "openssl", "ktls", ... */
  int st_wake_fd;               /* TLS: eventfd, see above; else -1 */
  _Atomic unsigned st_send_timeout_ms; /* TLS: a send making no progress
                                   for this long fails (EAGAIN) */
  pthread_mutex_t st_ssl_lock;  /* guards st_ssl, st_pend, st_why and
                                   the offsets of st_tx; held only
                                   around SSL_* calls and those
                                   offsets' updates, never across a
                                   wait; innermost (taken under pr_lock
                                   by the ticker, nothing taken under
                                   it) */
  uint8_t st_pend[64];          /* a ping OpenSSL holds part of */
  size_t st_pend_len;
  char st_why[160];             /* the last TLS error, for stream_error */
  uint8_t *st_gather;           /* the sender's TLS_RECORD bytes */
  bool st_rx_waited;            /* the reader's: its last read found
                                   nothing and waited (see
                                   tls_read_some; kernel TLS only) */
  /* Own I/O (see above): */
  bool st_own_io;               /* set once, in stream_new */
  uint8_t *st_rx;               /* cipher text received, [st_rx_off,
                                   st_rx_len) not yet taken by OpenSSL:
                                   the reader's alone, without a lock
                                   (rx_fill, and stream_bio_read inside
                                   the reader's SSL_read; OpenSSL's
                                   other calls find nothing there) */
  size_t st_rx_off, st_rx_len;
  uint8_t *st_tx;               /* cipher text from OpenSSL, [st_tx_off,
                                   st_tx_len) not yet sent: under
                                   st_ssl_lock; any SSL_* call adds, the
                                   sender (or the ping) sends, outside
                                   the lock while st_tx_sending, when
                                   nothing may move the bytes */
  size_t st_tx_off, st_tx_len;
  bool st_tx_sending;
  bool st_rx_dry;               /* the reader's: its last read left
                                   nothing in st_rx or OpenSSL, so the
                                   next one starts with rx_fill */
  bool st_in_write;             /* an SSL_write is running (under
                                   st_ssl_lock): it keeps out of
                                   ST_TX_RESERVE */
  bool st_in_read;              /* the reader's SSL_read is running
                                   (under st_ssl_lock): only it may
                                   take from st_rx */
};

static int
set_nonblock (int fd)
{
  int fl = fcntl (fd, F_GETFL);

  return fl == -1 ? -1 : fcntl (fd, F_SETFL, fl | O_NONBLOCK);
}

/* What OpenSSL did about kernel TLS on ssl, whose handshake is done. */
static const char *
tls_kind (SSL *ssl)
{
  bool tx = false, rx = false;

#ifndef OPENSSL_NO_KTLS
  tx = BIO_get_ktls_send (SSL_get_wbio (ssl)) > 0;
  rx = BIO_get_ktls_recv (SSL_get_rbio (ssl)) > 0;
#else
  (void) ssl;
#endif
  return tx && rx ? "ktls" : tx ? "ktls-tx" : rx ? "ktls-rx" : "openssl";
}

/* ---- Own I/O: our BIO between OpenSSL and the buffers --------------- */

/* Called by OpenSSL inside an SSL_* call, so under st_ssl_lock.  Only
 * the reader's SSL_read takes from st_rx, which the reader fills
 * without the lock: any other call that wants input (TLS 1.3 after the
 * handshake has none that should) finds none, as if st_rx were empty
 * (a sender then waits for the reader: tls_write_all). */
static int
stream_bio_read (BIO *b, char *buf, size_t len, size_t *n)
{
  struct stream *st = BIO_get_data (b);
  size_t have = st->st_in_read ? st->st_rx_len - st->st_rx_off : 0;

  BIO_clear_retry_flags (b);
  *n = 0;
  if (have == 0) {              /* the reader receives more */
    BIO_set_retry_read (b);
    return 0;
  }
  if (len > have)
    len = have;
  memcpy (buf, st->st_rx + st->st_rx_off, len);
  st->st_rx_off += len;
  *n = len;
  return 1;
}

static int
stream_bio_write (BIO *b, const char *buf, size_t len, size_t *n)
{
  struct stream *st = BIO_get_data (b);
  size_t end = st->st_in_write ? ST_TX_SIZE - ST_TX_RESERVE : ST_TX_SIZE;

  BIO_clear_retry_flags (b);
  *n = 0;
  if (st->st_tx_off > 0 && !st->st_tx_sending) {
    /* What a partial send left goes to the front. */
    memmove (st->st_tx, st->st_tx + st->st_tx_off,
             st->st_tx_len - st->st_tx_off);
    st->st_tx_len -= st->st_tx_off;
    st->st_tx_off = 0;
  }
  if (st->st_tx_len >= end) {   /* full: the sender sends it */
    BIO_set_retry_write (b);
    return 0;
  }
  if (len > end - st->st_tx_len)
    len = end - st->st_tx_len;
  memcpy (st->st_tx + st->st_tx_len, buf, len);
  st->st_tx_len += len;
  *n = len;
  return 1;
}

static long
stream_bio_ctrl (BIO *b, int cmd, long num, void *ptr)
{
  (void) b; (void) num; (void) ptr;
  return cmd == BIO_CTRL_FLUSH;  /* the sender sends: tx_flush */
}

static int
stream_bio_create (BIO *b)
{
  BIO_set_init (b, 1);
  return 1;
}

static BIO_METHOD *stream_bio_method;
static pthread_once_t stream_bio_once = PTHREAD_ONCE_INIT;

static void
stream_bio_method_init (void)
{
  int index = BIO_get_new_index ();
  BIO_METHOD *m;

  if (index == -1)
    return;                     /* own_io_start: ENOMEM */
  m = BIO_meth_new (index | BIO_TYPE_SOURCE_SINK, "nbdrepl stream");
  if (m == NULL ||
      !BIO_meth_set_read_ex (m, stream_bio_read) ||
      !BIO_meth_set_write_ex (m, stream_bio_write) ||
      !BIO_meth_set_ctrl (m, stream_bio_ctrl) ||
      !BIO_meth_set_create (m, stream_bio_create)) {
    BIO_meth_free (m);
    return;
  }
  stream_bio_method = m;        /* for the life of the process */
}

/* Put our BIO under st's session in place of the socket's, after the
 * handshake (OpenSSL holds no cipher text of the socket's: it read the
 * handshake without read-ahead), and make the socket blocking.
 * Returns 0, or -1 with errno. */
static int
own_io_start (struct stream *st)
{
  BIO *rb, *wb;
  int fl;

  pthread_once (&stream_bio_once, stream_bio_method_init);
  if (stream_bio_method == NULL) {
    errno = ENOMEM;
    return -1;
  }
  st->st_rx = malloc (ST_RX_SIZE);
  st->st_tx = malloc (ST_TX_SIZE);
  if (st->st_rx == NULL || st->st_tx == NULL)
    return -1;
  rb = BIO_new (stream_bio_method);
  wb = BIO_new (stream_bio_method);
  if (rb == NULL || wb == NULL) {
    BIO_free (rb);
    BIO_free (wb);
    errno = ENOMEM;
    return -1;
  }
  BIO_set_data (rb, st);
  BIO_set_data (wb, st);
  SSL_set0_rbio (st->st_ssl, rb);  /* each drops a reference to the */
  SSL_set0_wbio (st->st_ssl, wb);  /* socket BIO (BIO_NOCLOSE) */
  fl = fcntl (st->st_fd, F_GETFL);
  if (fl == -1 || fcntl (st->st_fd, F_SETFL, fl & ~O_NONBLOCK) == -1)
    return -1;
  st->st_own_io = true;
  return 0;
}

/* A stream on fd, a connected TCP socket, and ssl (NULL: plain), whose
 * handshake is done on fd.  Takes both over, also on failure (NULL,
 * errno set). */
struct stream *
stream_new (int fd, SSL *ssl)
{
  struct stream *st = calloc (1, sizeof *st);

  if (st == NULL)
    goto fail;
  st->st_magic = STREAM_MAGIC;
  st->st_fd = fd;
  st->st_ssl = ssl;
  st->st_wake_fd = -1;
  st->st_kind = "plain";
  mutex_init (&st->st_ssl_lock);
  if (ssl != NULL) {
    int r;

    st->st_kind = tls_kind (ssl);
    if ((st->st_gather = malloc (TLS_RECORD)) == NULL)
      r = -1;
    else if (strcmp (st->st_kind, "openssl") == 0)
      r = own_io_start (st);
    else if (set_nonblock (fd) == -1 ||
             (st->st_wake_fd = eventfd (0, EFD_NONBLOCK | EFD_CLOEXEC)) == -1)
      r = -1;
    else
      r = 0;
    if (r == -1) {
      int e = errno;
      stream_free (st);
      errno = e;
      return NULL;
    }
    st->st_send_timeout_ms = 30000;
    /* Socket BIO: read whatever has arrived with one system call.  Own
     * I/O: st_rx is the read-ahead; OpenSSL takes a record at a time
     * from it.  (With read-ahead, OpenSSL moves all the bytes it holds
     * to the front of its buffer before each record: a batch of n
     * records costs n²/2 records' worth of memmove.) */
    SSL_set_read_ahead (ssl, !st->st_own_io);
    /* Own I/O: one SSL_write_ex writes all the records of what it is
     * given, until st_tx is full (SSL_ERROR_WANT_WRITE: tx_flush, then
     * the same call again), not one record per call: a 1 MiB payload
     * costs a call (and a turn of st_ssl_lock) per st_tx, not 64.  The
     * socket BIO keeps partial writes: each SSL_write_ex returns what
     * the socket took. */
    if (st->st_own_io)
      SSL_clear_mode (ssl, SSL_MODE_ENABLE_PARTIAL_WRITE);
    /* Every message is framed: a cut one is seen as such. */
    SSL_set_options (ssl, SSL_OP_IGNORE_UNEXPECTED_EOF);
  }
  return st;

 fail:
  SSL_free (ssl);
  close (fd);
  return NULL;
}

/* Close the stream.  Nobody may be using it.  No close_notify: the
 * connection has failed by now (shut down), or the handshake was
 * refused; the peer sees the end of the TCP stream either way. */
void
stream_free (struct stream *st)
{
  if (st == NULL)
    return;
  assert (st->st_magic == STREAM_MAGIC);
  st->st_magic = 0;
  SSL_free (st->st_ssl);
  close (st->st_fd);
  if (st->st_wake_fd >= 0)
    close (st->st_wake_fd);
  pthread_mutex_destroy (&st->st_ssl_lock);
  free (st->st_gather);
  free (st->st_rx);
  free (st->st_tx);
  free (st);
  ERR_clear_error ();
}

int
stream_fd (const struct stream *st)
{
  return st->st_fd;
}

bool
stream_is_tls (const struct stream *st)
{
  return st->st_ssl != NULL;
}

/* "plain", or for TLS "openssl" (OpenSSL encrypts), "ktls" (the kernel
 * does, both ways), "ktls-tx" or "ktls-rx" (one way). */
const char *
stream_kind (const struct stream *st)
{
  return st->st_kind;
}

/* Wake whoever waits on the stream (a reader in recv or poll, a sender
 * in sendmsg or poll): they fail.  Any thread, any time before
 * stream_free. */
void
stream_shutdown (struct stream *st)
{
  shutdown (st->st_fd, SHUT_RDWR);
}

/* A send that makes no progress for ms fails with EAGAIN. */
int
stream_set_send_timeout (struct stream *st, unsigned ms)
{
  struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };

  if (st->st_ssl != NULL) {
    st->st_send_timeout_ms = ms;
    return 0;
  }
  return setsockopt (st->st_fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/* After a failed call: why, in words, for the caller's one log line. */
const char *
stream_error (struct stream *st, int errnum)
{
  if (st->st_ssl != NULL && errnum == EPROTO) {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&st->st_ssl_lock);
    if (st->st_why[0])
      return st->st_why;
  }
  return strerror (errnum);
}

/* ---- TLS ------------------------------------------------------------- */

/* One SSL_read_ex or SSL_write_ex under the lock.  Returns 1 with *n
 * bytes moved, else 0 with *err the SSL_ERROR_* code; for a fatal one,
 * errno is set (EPROTO: st_why says why; 0 with *err ZERO_RETURN: the
 * end of the stream).  *pending: more input is in OpenSSL's buffer. */
static int
tls_call (struct stream *st, bool write, const void *buf, size_t len,
          size_t *n, int *err, bool *pending)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&st->st_ssl_lock);
  int r, e;

  /* SSL_get_error must see only this call's errors.  Cleared only if
   * there are any: ERR_clear_error frees all 16 slots of the queue
   * (~800 instructions, twice per 4k write on each node at QD1), and
   * this thread's queue is normally empty (cleared after every call
   * that failed). */
  if (ERR_peek_error () != 0)
    ERR_clear_error ();
  errno = 0;
  *n = 0;
  st->st_in_write = write;
  st->st_in_read = !write;
  r = write ? SSL_write_ex (st->st_ssl, buf, len, n)
            : SSL_read_ex (st->st_ssl, (void *) buf, len, n);
  st->st_in_write = st->st_in_read = false;
  if (pending)
    *pending = SSL_has_pending (st->st_ssl) ||
               st->st_rx_off < st->st_rx_len;
  if (r == 1) {
    *err = SSL_ERROR_NONE;
    return 1;
  }
  e = *err = SSL_get_error (st->st_ssl, r);
  switch (e) {
  case SSL_ERROR_WANT_READ:
  case SSL_ERROR_WANT_WRITE:
  case SSL_ERROR_ZERO_RETURN:
    break;
  case SSL_ERROR_SYSCALL:
    if (ERR_peek_error () == 0) {
      if (errno == 0) {         /* end of the TCP stream */
        *err = SSL_ERROR_ZERO_RETURN;
        break;
      }
      ERR_clear_error ();
      break;                    /* errno says */
    }
    /* fall through */
  default:
    tls_error_string (st->st_why, sizeof st->st_why, "TLS error");
    errno = EPROTO;
  }
  if (ERR_peek_error () != 0) {
    int saved = errno;
    ERR_clear_error ();
    errno = saved;
  }
  return 0;
}

/* Wait until fd can do events, or timeout_ms (-1: no limit), or (for a
 * reader) st_wake_fd is kicked; stop_fd (-1: none) cancels.  Returns 1
 * ready, 0 timed out, -1 with errno. */
static int
tls_wait (struct stream *st, short events, int timeout_ms, int stop_fd)
{
  struct pollfd pfd[3] = {
    { .fd = st->st_fd, .events = events },
    { .fd = events == POLLIN ? st->st_wake_fd : -1, .events = POLLIN },
    { .fd = stop_fd, .events = POLLIN },
  };
  int r;

  r = poll (pfd, 3, timeout_ms);
  if (r == -1)
    return errno == EINTR ? 1 : -1;
  if (pfd[2].revents) {
    errno = ECANCELED;
    return -1;
  }
  if (pfd[1].revents) {
    uint64_t v;
    if (read (st->st_wake_fd, &v, sizeof v) == -1 && errno != EAGAIN)
      return -1;
  }
  return r > 0;
}

/* A reader's wait for input: 0 ready, -1 with errno (ETIMEDOUT once
 * timeout_ms has passed). */
static int
tls_wait_input (struct stream *st, int timeout_ms, int stop_fd)
{
  int w = tls_wait (st, POLLIN, timeout_ms, stop_fd);

  if (w == 0)
    errno = ETIMEDOUT;
  return w == 1 ? 0 : -1;
}

static void
kick_reader (struct stream *st)
{
  uint64_t one = 1;

  if (write (st->st_wake_fd, &one, sizeof one) == -1 && errno != EAGAIN)
    log_error ("TLS: eventfd: %m");
}

static int
ms_until (uint64_t deadline_ms)
{
  uint64_t now = (now_ns () / 1000000);

  return now >= deadline_ms ? 0 : (int) (deadline_ms - now);
}

/* Own I/O: send what st_tx holds, all of it (try: one send without
 * waiting, whatever it takes; for the ping).  timeout_ms: for each send
 * to make progress (-1: no limit); running out fails with
 * timeout_errno.  The sender's (or the ping's): one at a time. */
static int
tx_flush (struct stream *st, bool try, int timeout_ms, int timeout_errno)
{
  uint64_t deadline = timeout_ms < 0 ? 0 : (now_ns () / 1000000) + timeout_ms;

  for (;;) {
    const uint8_t *p;
    size_t len;
    ssize_t r;
    int e, wait_ms;

    {
      ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&st->st_ssl_lock);
      if (st->st_tx_off == st->st_tx_len) {
        st->st_tx_off = st->st_tx_len = 0;
        return 0;
      }
      p = st->st_tx + st->st_tx_off;
      len = st->st_tx_len - st->st_tx_off;
      st->st_tx_sending = true;
    }
    r = send (st->st_fd, p, len, MSG_DONTWAIT | MSG_NOSIGNAL);
    e = errno;
    {
      ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&st->st_ssl_lock);
      st->st_tx_sending = false;
      if (r > 0)
        st->st_tx_off += r;
    }
    if (r > 0) {
      if (try)
        return 0;
      if (timeout_ms >= 0)
        deadline = (now_ns () / 1000000) + timeout_ms;
      continue;
    }
    errno = e;
    if (r == -1 && errno == EINTR)
      continue;
    if (r == -1 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (try)
        return 0;
      wait_ms = timeout_ms < 0 ? -1 : ms_until (deadline);
      if (wait_ms == 0) {
        errno = timeout_errno;
        return -1;
      }
      if (tls_wait (st, POLLOUT, wait_ms, -1) == -1)
        return -1;
      continue;
    }
    return -1;
  }
}

/* Own I/O: the reader receives what has arrived into st_rx (which
 * OpenSSL has emptied: it asked for more), at least a byte.  With
 * neither a timeout nor stop_fd (the receive loop) in one blocking recv,
 * as with plain TCP; else poll, then recv.  Returns the bytes, 0 at the
 * end of the stream, -1 with errno (EAGAIN: nothing yet, try again).
 * st_rx is the reader's: no lock (a sender's SSL_write meanwhile does
 * not wait for us, nor we for it). */
static ssize_t
rx_fill (struct stream *st, int timeout_ms, int stop_fd)
{
  bool block = timeout_ms < 0 && stop_fd < 0;
  size_t pos;
  ssize_t r;

  if (st->st_rx_off == st->st_rx_len)
    st->st_rx_off = st->st_rx_len = 0;
  else if (st->st_rx_off > 0) {
    memmove (st->st_rx, st->st_rx + st->st_rx_off,
             st->st_rx_len - st->st_rx_off);
    st->st_rx_len -= st->st_rx_off;
    st->st_rx_off = 0;
  }
  pos = st->st_rx_len;
  if (pos == ST_RX_SIZE) {      /* cannot happen: OpenSSL takes what
                                   there is before it asks for more */
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&st->st_ssl_lock);
    snprintf (st->st_why, sizeof st->st_why,
              "TLS: more wanted with %u bytes unread", ST_RX_SIZE);
    errno = EPROTO;
    return -1;
  }
  if (!block && tls_wait_input (st, timeout_ms, stop_fd) == -1)
    return -1;
  do
    r = recv (st->st_fd, st->st_rx + pos, ST_RX_SIZE - pos,
              block ? 0 : MSG_DONTWAIT);
  while (r == -1 && errno == EINTR);
  if (r > 0)
    st->st_rx_len = pos + r;
  return r;
}

/* Write all of buf (from its sender: see above).  timeout_ms: for each
 * chunk to make progress (-1: no limit); running out fails with
 * timeout_errno.  A pending ping is finished first. */
static int
tls_write_all (struct stream *st, const void *buf, size_t len,
               int timeout_ms, int timeout_errno)
{
  const uint8_t *p = buf;
  uint64_t deadline = timeout_ms < 0 ? 0 : (now_ns () / 1000000) + timeout_ms;
  bool pend = true;

  while (len > 0 || pend) {
    const uint8_t *b = p;
    size_t l = len, n;
    int err, w, wait_ms;

    if (pend) {
      {
        ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&st->st_ssl_lock);
        pend = st->st_pend_len > 0;
        b = st->st_pend;
        l = st->st_pend_len;
      }
      if (!pend)
        continue;
    }
    if (tls_call (st, true, b, l, &n, &err, NULL) == 1) {
      if (pend) {
        ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&st->st_ssl_lock);
        st->st_pend_len = 0;
        pend = false;
      }
      else {
        p += n;
        len -= n;
      }
      if (timeout_ms >= 0)
        deadline = (now_ns () / 1000000) + timeout_ms;
      continue;
    }
    if (err != SSL_ERROR_WANT_WRITE && err != SSL_ERROR_WANT_READ) {
      if (err == SSL_ERROR_ZERO_RETURN)
        errno = EPIPE;
      return -1;
    }
    if (err == SSL_ERROR_WANT_WRITE && st->st_own_io) {
      /* st_tx is full: send it, then the same call again. */
      if (tx_flush (st, false, timeout_ms, timeout_errno) == -1)
        return -1;
      continue;
    }
    wait_ms = timeout_ms < 0 ? -1 : ms_until (deadline);
    if (wait_ms == 0) {
      errno = timeout_errno;
      return -1;
    }
    if (err == SSL_ERROR_WANT_READ && st->st_own_io) {
      /* The reader feeds OpenSSL: give it a moment. */
      if (wait_ms < 0 || wait_ms > WANT_READ_SLICE_MS)
        wait_ms = WANT_READ_SLICE_MS;
      poll (NULL, 0, wait_ms);
      continue;
    }
    if (err == SSL_ERROR_WANT_READ) {
      kick_reader (st);
      if (wait_ms < 0 || wait_ms > WANT_READ_SLICE_MS)
        wait_ms = WANT_READ_SLICE_MS;
      w = tls_wait (st, POLLIN, wait_ms, -1);
    }
    else
      w = tls_wait (st, POLLOUT, wait_ms, -1);
    if (w == -1)
      return -1;
  }
  return 0;
}

/* Does OpenSSL hold input not yet read (a record, or bytes of one)? */
static bool
tls_pending (struct stream *st)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&st->st_ssl_lock);
  return SSL_has_pending (st->st_ssl);
}

/* Read what has arrived, at least one byte, at most len; 0 at the end
 * of the stream.  Waits up to timeout_ms (-1: no limit; then ETIMEDOUT)
 * unless stop_fd (-1: none) becomes readable (ECANCELED).
 *
 * Own I/O: OpenSSL takes what st_rx holds; when it wants more, rx_fill
 * receives it (waiting in recv, as the plain reader does).
 *
 * Kernel TLS: a reader whose last read found nothing and waited (one
 * message at a time: queue depth 1) polls before it reads, unless
 * OpenSSL holds input: reading first would cost a read() that finds
 * nothing, then the poll, then the read — per message, on both nodes.
 * A reader that finds data waiting (under load) reads first. */
static ssize_t
tls_read_some (struct stream *st, void *buf, size_t len, int timeout_ms,
               int stop_fd)
{
  uint8_t *p = buf;
  size_t got = 0;
  uint64_t deadline = timeout_ms < 0 ? 0 : (now_ns () / 1000000) + timeout_ms;
  bool waited = false;

  if (!st->st_own_io && st->st_rx_waited && !tls_pending (st)) {
    if (tls_wait_input (st, timeout_ms, stop_fd) == -1)
      return -1;
    waited = true;
  }
  for (;;) {
    size_t n;
    int err, w, wait_ms;
    bool more;

    if (st->st_rx_dry) {
      /* Nothing to read without receiving: not even an SSL_read that
       * would say so. */
      st->st_rx_dry = false;
      err = SSL_ERROR_WANT_READ;
    }
    else if (tls_call (st, false, p + got, len - got, &n, &err, &more) == 1) {
      got += n;
      /* Take everything OpenSSL already holds, without another
       * system call for what is not there yet.  (Input left over
       * means load: the next read goes first.) */
      st->st_rx_waited = waited && !more;
      st->st_rx_dry = st->st_own_io && !more;
      if (got == len || !more)
        return got;
      continue;
    }
    if (got > 0 && (err == SSL_ERROR_WANT_READ ||
                    err == SSL_ERROR_WANT_WRITE ||
                    err == SSL_ERROR_ZERO_RETURN))
      return got;
    if (err == SSL_ERROR_ZERO_RETURN)
      return 0;
    if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE)
      return -1;
    if (st->st_own_io && err == SSL_ERROR_WANT_WRITE) {
      /* What this read had to write (an alert, a KeyUpdate) found
       * st_tx full even with ST_TX_RESERVE: cannot happen. */
      ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&st->st_ssl_lock);
      snprintf (st->st_why, sizeof st->st_why,
                "TLS: no room to answer the peer");
      errno = EPROTO;
      return -1;
    }
    wait_ms = timeout_ms < 0 ? -1 : ms_until (deadline);
    if (wait_ms == 0) {
      errno = ETIMEDOUT;
      return -1;
    }
    if (st->st_own_io) {
      ssize_t r = rx_fill (st, wait_ms, stop_fd);

      if (r == 0)
        return 0;               /* the end of the TCP stream */
      if (r == -1 && errno != EAGAIN)
        return -1;
      continue;
    }
    w = tls_wait (st, err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT,
                  wait_ms, stop_fd);
    if (w == -1)
      return -1;
    waited = true;
  }
}

/* ---- The handshake's messages --------------------------------------- */

/* Read exactly len bytes; the semantics of sock_read_full_until. */
int
stream_read_full (struct stream *st, void *buf, size_t len, int timeout_ms,
                  int stop_fd)
{
  uint64_t deadline = timeout_ms < 0 ? 0 : (now_ns () / 1000000) + timeout_ms;
  uint8_t *p = buf;

  if (st->st_ssl == NULL)
    return sock_read_full_until (st->st_fd, buf, len, timeout_ms, stop_fd);
  while (len > 0) {
    int left = timeout_ms < 0 ? -1 : ms_until (deadline);
    ssize_t r;

    if (left == 0) {
      errno = ETIMEDOUT;
      return -1;
    }
    r = tls_read_some (st, p, len, left, stop_fd);
    if (r == -1)
      return -1;
    if (r == 0) {
      errno = ECONNRESET;
      return -1;
    }
    p += r;
    len -= r;
  }
  return 0;
}

/* Write exactly len bytes; the semantics of sock_write_full. */
int
stream_write_full (struct stream *st, const void *buf, size_t len,
                   int timeout_ms)
{
  if (st->st_ssl == NULL)
    return sock_write_full (st->st_fd, buf, len, timeout_ms);
  if (tls_write_all (st, buf, len, timeout_ms, ETIMEDOUT) == -1)
    return -1;
  return st->st_own_io ? tx_flush (st, false, timeout_ms, ETIMEDOUT) : 0;
}

/* ---- The connection's sender, reader and pinger ----------------------- */

/* Plain: sendmsg all the iovecs, coping with short writes. */
static int
plain_sendv (int fd, struct iovec *iov, int niov)
{
  while (niov > 0) {
    struct msghdr msg = { .msg_iov = iov, .msg_iovlen = niov };
    ssize_t r = sendmsg (fd, &msg, MSG_NOSIGNAL);

    if (r == -1) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    while (niov > 0 && (size_t) r >= iov->iov_len) {
      r -= iov->iov_len;
      iov++;
      niov--;
    }
    if (niov > 0) {
      iov->iov_base = (char *) iov->iov_base + r;
      iov->iov_len -= r;
    }
  }
  return 0;
}

/* TLS: small pieces are gathered into records of TLS_RECORD bytes; a
 * large payload goes from its own memory (OpenSSL cuts it into
 * records). */
static int
tls_sendv (struct stream *st, const struct iovec *iov, int niov)
{
  int timeout = st->st_send_timeout_ms;
  size_t fill = 0, off = 0;

  while (niov > 0) {
    const uint8_t *base = (const uint8_t *) iov->iov_base + off;
    size_t left = iov->iov_len - off, n;

    if (fill == 0 && left >= TLS_RECORD) {
      if (tls_write_all (st, base, left, timeout, EAGAIN) == -1)
        return -1;
      n = left;
    }
    else {
      n = left < TLS_RECORD - fill ? left : TLS_RECORD - fill;
      memcpy (st->st_gather + fill, base, n);
      fill += n;
      if (fill == TLS_RECORD) {
        if (tls_write_all (st, st->st_gather, fill, timeout, EAGAIN) == -1)
          return -1;
        fill = 0;
      }
    }
    off += n;
    if (off == iov->iov_len) {
      iov++;
      niov--;
      off = 0;
    }
  }
  if (fill > 0 && tls_write_all (st, st->st_gather, fill, timeout,
                                 EAGAIN) == -1)
    return -1;
  /* Own I/O: the batch's records leave together. */
  return st->st_own_io ? tx_flush (st, false, timeout, EAGAIN) : 0;
}

/* The sender: write all the iovecs (they may be modified).  A send that
 * makes no progress within the send timeout fails with EAGAIN. */
int
stream_sendv (struct stream *st, struct iovec *iov, int niov)
{
  if (st->st_ssl == NULL)
    return plain_sendv (st->st_fd, iov, niov);
  return tls_sendv (st, iov, niov);
}

/* The reader: wait for what arrives and read it, at most len bytes;
 * 0 at the end of the stream, -1 with errno on an error. */
ssize_t
stream_recv (struct stream *st, void *buf, size_t len)
{
  ssize_t r;

  if (st->st_ssl != NULL)
    return tls_read_some (st, buf, len, -1, -1);
  do
    r = recv (st->st_fd, buf, len, 0);
  while (r == -1 && errno == EINTR);
  return r;
}

/* The ticker's ping, while nobody sends (pr_lock held): never waits.
 * Returns len once it has left (or, TLS, is OpenSSL's to finish: the
 * next sender does), fewer bytes if only part of it fit (plain), or -1:
 * EAGAIN if the socket has no room (nothing sent), else an error. */
ssize_t
stream_try_send (struct stream *st, const void *buf, size_t len)
{
  size_t n, pend;
  int err;

  if (st->st_ssl == NULL)
    return send (st->st_fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
  assert (len <= sizeof st->st_pend);
  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&st->st_ssl_lock);
    if (st->st_pend_len == 0) {
      memcpy (st->st_pend, buf, len);
      st->st_pend_len = len;
    }
    pend = st->st_pend_len;
  }
  /* st_pend: OpenSSL wants the same buffer again if it cannot finish. */
  if (tls_call (st, true, st->st_pend, pend, &n, &err, NULL) == 1) {
    {
      ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&st->st_ssl_lock);
      st->st_pend_len = 0;
    }
    /* Own I/O: what does not leave now, the next sender sends. */
    if (st->st_own_io && tx_flush (st, true, 0, EAGAIN) == -1)
      return -1;
    return len;
  }
  if (err == SSL_ERROR_WANT_READ && !st->st_own_io)
    kick_reader (st);
  if (err == SSL_ERROR_WANT_WRITE || err == SSL_ERROR_WANT_READ)
    return len;                 /* held: the next send finishes it */
  if (err == SSL_ERROR_ZERO_RETURN)
    errno = EPIPE;
  return -1;
}

/* May a payload go from the socket to the disk with splice?  Only as
 * plain text: never with TLS (with kernel TLS receive, records other
 * than data would stop it). */
bool
stream_can_splice (const struct stream *st)
{
  return st->st_ssl == NULL;
}
