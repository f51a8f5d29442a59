/* nbdrepl: ackwrite — a writer that logs what was acknowledged, for
 * tests/ackcheck.py to check against the disks after faults.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 *   ackwrite -l LOG [-f FIRST] [-c BLOCKS] [-n COUNT] [-t SECONDS]
 *            [-m plain|fua|flush] [-T TIMEOUT] [-R RATE] [-s SEED]
 *            [-r RUN] [-1] URI...
 *
 * One request at a time (QD1): it writes 4096-byte blocks at random
 * block numbers in [FIRST, FIRST + BLOCKS) of the export, at most
 * COUNT of them (default unlimited) for at most SECONDS (default 60),
 * at most RATE a second (default unlimited), until SIGTERM or SIGINT,
 * which end the run after the request in flight.
 *
 * A write is acknowledged when the server has answered it with
 * success: -m plain (the default) a plain NBD_CMD_WRITE, -m fua the
 * write with FUA, -m flush the write then an NBD_CMD_FLUSH, both
 * answered.  Under protocol C the primary answers a write only once
 * every connected peer has written it.  The faults the tests inject
 * kill processes, not machines, so the page cache of a disk survives
 * and plain is enough; fua and flush cover a lost machine too.
 *
 * BLOCK FORMAT (4096 bytes, integers big-endian)
 *
 *   offset size field
 *        0    8 magic     "ACKWRIT1"
 *        8    8 block     the block number written (offset / 4096)
 *       16    8 seq       this run's write sequence number: 1, 2, ...
 *                         (unique in the run, so monotonic per block)
 *       24    8 run       the run id, random and != 0 (or -r RUN)
 *       32   32 sha256    SHA-256 of all 4096 bytes with this field 0
 *       64 4032 body      pseudo-random bytes from (block, seq, run)
 *
 * A block whose magic, block number or checksum is wrong was torn or
 * written at the wrong place.
 *
 * LOG FORMAT (one line per record, each appended with one write(2)
 * before the next request goes out)
 *
 *   run RUN FIRST BLOCKS MODE  the header: RUN in hex, MODE as -m
 *   attempt BLOCK SEQ          before the request is sent
 *   ack BLOCK SEQ              the server acknowledged it
 *   fail BLOCK SEQ REASON      it failed, timed out (-T, default 8 s)
 *                              or the connection was lost: the block
 *                              may hold it or what it held before
 *   # TEXT                     information (connections), ignored
 *
 * After a failure ackwrite drops the connection and connects again,
 * trying the URIs in turn from the next one (after a failover the
 * primary is elsewhere; secondaries refuse clients) until one accepts
 * it; with -1 it stops at the first failure instead.  SIGUSR1 makes it
 * do the same after the request in flight without a failure (a test
 * moves it off a primary that is to be demoted).  Exit status 0
 * when the run ended by count, time or signal, 1 on a usage or setup
 * error or (with -1) a failed write.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libnbd.h>
#include <openssl/sha.h>

#include "byte-order.h"

#define BLOCK_SIZE 4096
#define HDR_SHA 32
#define HDR_SIZE 64
static const char block_magic[8] = { 'A', 'C', 'K', 'W', 'R', 'I', 'T', '1' };

enum mode { MODE_PLAIN, MODE_FUA, MODE_FLUSH };
static const char *const mode_names[] = { "plain", "fua", "flush" };

struct opts {
  const char *log_path;
  uint64_t first, nblocks, count, seed, run;
  double seconds, rate, timeout;
  enum mode mode;
  bool stop_on_fail;
  char **uris;
  int nuris;
  char **last_error;            /* per URI: the last refusal reported */
};

static volatile sig_atomic_t stop_requested, move_requested;

static void
on_signal (int sig)
{
  if (sig == SIGUSR1)
    move_requested = 1;
  else
    stop_requested = 1;
}

static double
now (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t
splitmix64 (uint64_t *x)
{
  uint64_t z = (*x += UINT64_C (0x9e3779b97f4a7c15));

  z = (z ^ (z >> 30)) * UINT64_C (0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C (0x94d049bb133111eb);
  return z ^ (z >> 31);
}

/* Fill buf with the record of (block, seq, run): see BLOCK FORMAT. */
static void
block_fill (uint8_t *buf, uint64_t block, uint64_t seq, uint64_t run)
{
  uint64_t x = block ^ (seq * UINT64_C (0x2545f4914f6cdd1d)) ^ run;
  size_t i;

  memcpy (buf, block_magic, 8);
  put_be64 (buf + 8, block);
  put_be64 (buf + 16, seq);
  put_be64 (buf + 24, run);
  memset (buf + 32, 0, HDR_SHA);
  for (i = HDR_SIZE; i < BLOCK_SIZE; i += 8) {
    uint64_t r = splitmix64 (&x);
    memcpy (buf + i, &r, 8);
  }
  SHA256 (buf, BLOCK_SIZE, buf + 32);
}

/* Append one line to the log with a single write(2), so that a record
 * is in the file before the request it announces goes out. */
static int log_fd = -1;

static void __attribute__ ((format (printf, 1, 2)))
log_record (const char *fmt, ...)
{
  char line[512];
  va_list ap;
  int n;

  va_start (ap, fmt);
  n = vsnprintf (line, sizeof line - 1, fmt, ap);
  va_end (ap);
  if (n < 0)
    return;
  if ((size_t) n > sizeof line - 2)
    n = sizeof line - 2;
  line[n++] = '\n';
  if (write (log_fd, line, n) != n) {
    fprintf (stderr, "ackwrite: write: %s: %m\n", "log");
    exit (EXIT_FAILURE);
  }
}

/* Wait (bounded by deadline) until command cookie is answered.  0 on
 * success; -1 with reason filled in otherwise. */
static int
wait_command (struct nbd_handle *h, int64_t cookie, double deadline,
              char *reason, size_t len)
{
  for (;;) {
    int r = nbd_aio_command_completed (h, cookie);
    double left;

    if (r == 1)
      return 0;
    if (r == -1) {
      snprintf (reason, len, "%s", strerror (nbd_get_errno () ?: EIO));
      return -1;
    }
    left = deadline - now ();
    if (left <= 0) {
      snprintf (reason, len, "timeout");
      return -1;
    }
    if (nbd_poll (h, (int) (left * 1000) + 1) == -1 && errno != EINTR) {
      snprintf (reason, len, "connection: %s", nbd_get_error ());
      return -1;
    }
  }
}

/* Connect to uri within timeout seconds; NULL if it fails or refuses. */
static struct nbd_handle *
connect_one (const char *uri, double timeout, uint64_t need_size,
             bool need_fua, char *reason, size_t len)
{
  struct nbd_handle *h = nbd_create ();
  double deadline = now () + timeout;
  int64_t size;

  if (h == NULL) {
    snprintf (reason, len, "%s", nbd_get_error ());
    return NULL;
  }
  if (nbd_aio_connect_uri (h, uri) == -1)
    goto err;
  while (nbd_aio_is_connecting (h)) {
    double left = deadline - now ();

    if (left <= 0) {
      snprintf (reason, len, "connect timeout");
      goto out;
    }
    if (nbd_poll (h, (int) (left * 1000) + 1) == -1 && errno != EINTR)
      goto err;
  }
  if (!nbd_aio_is_ready (h)) {
    snprintf (reason, len, "handshake failed: %s", nbd_get_error ());
    goto out;
  }
  size = nbd_get_size (h);
  if (size < 0 || (uint64_t) size < need_size) {
    snprintf (reason, len, "export too small (%" PRIi64 " bytes)", size);
    goto out;
  }
  if (nbd_is_read_only (h) == 1) {
    snprintf (reason, len, "read-only export");
    goto out;
  }
  if (need_fua && nbd_can_fua (h) != 1) {
    snprintf (reason, len, "the server does not support FUA");
    goto out;
  }
  return h;

 err:
  snprintf (reason, len, "%s", nbd_get_error ());
 out:
  nbd_close (h);
  return NULL;
}

/* Try the URIs in turn from *next until one accepts us, the run's time
 * is over or a signal came; NULL then. */
static struct nbd_handle *
connect_any (struct opts *o, int *next, double end)
{
  uint64_t need = (o->first + o->nblocks) * BLOCK_SIZE;
  char reason[256];

  while (!stop_requested && now () < end) {
    int i;

    for (i = 0; i < o->nuris && !stop_requested; i++) {
      int k = (*next + i) % o->nuris;
      double left = end - now ();
      struct nbd_handle *h;

      if (left <= 0)
        break;
      h = connect_one (o->uris[k], left < 2 ? left : 2, need,
                       o->mode == MODE_FUA, reason, sizeof reason);
      if (h) {
        log_record ("# connected %s", o->uris[k]);
        *next = k;
        return h;
      }
      if (o->last_error[k] == NULL || strcmp (reason, o->last_error[k])) {
        fprintf (stderr, "ackwrite: %s: %s\n", o->uris[k], reason);
        free (o->last_error[k]);
        o->last_error[k] = strdup (reason);
      }
    }
    usleep (100 * 1000);
  }
  return NULL;
}

/* One acknowledged write (see -m): 0, or -1 with reason. */
static int
write_block (struct nbd_handle *h, const struct opts *o, const uint8_t *buf,
             uint64_t block, char *reason, size_t len)
{
  double deadline = now () + o->timeout;
  uint32_t flags = o->mode == MODE_FUA ? LIBNBD_CMD_FLAG_FUA : 0;
  int64_t cookie;

  cookie = nbd_aio_pwrite (h, buf, BLOCK_SIZE, block * BLOCK_SIZE,
                           NBD_NULL_COMPLETION, flags);
  if (cookie == -1) {
    snprintf (reason, len, "%s", nbd_get_error ());
    return -1;
  }
  if (wait_command (h, cookie, deadline, reason, len) == -1)
    return -1;
  if (o->mode != MODE_FLUSH)
    return 0;
  cookie = nbd_aio_flush (h, NBD_NULL_COMPLETION, 0);
  if (cookie == -1) {
    snprintf (reason, len, "flush: %s", nbd_get_error ());
    return -1;
  }
  return wait_command (h, cookie, deadline, reason, len);
}

static void
usage (void)
{
  fprintf (stderr,
           "usage: ackwrite -l LOG [-f FIRST] [-c BLOCKS] [-n COUNT] "
           "[-t SECONDS]\n"
           "                [-m plain|fua|flush] [-T TIMEOUT] [-R RATE] "
           "[-s SEED] [-r RUN] [-1]\n"
           "                URI...\n");
  exit (EXIT_FAILURE);
}

static uint64_t
random_u64 (void)
{
  uint64_t r = 0;
  int fd = open ("/dev/urandom", O_RDONLY);

  if (fd == -1 || read (fd, &r, sizeof r) != sizeof r) {
    fprintf (stderr, "ackwrite: /dev/urandom: %m\n");
    exit (EXIT_FAILURE);
  }
  close (fd);
  return r;
}

static void
parse_args (int argc, char **argv, struct opts *o)
{
  int c;

  *o = (struct opts) { .nblocks = 1024, .seconds = 60, .timeout = 8,
                       .mode = MODE_PLAIN };
  while ((c = getopt (argc, argv, "l:f:c:n:t:m:T:R:s:r:1")) != -1) {
    switch (c) {
    case 'l': o->log_path = optarg; break;
    case 'f': o->first = strtoull (optarg, NULL, 0); break;
    case 'c': o->nblocks = strtoull (optarg, NULL, 0); break;
    case 'n': o->count = strtoull (optarg, NULL, 0); break;
    case 't': o->seconds = atof (optarg); break;
    case 'T': o->timeout = atof (optarg); break;
    case 'R': o->rate = atof (optarg); break;
    case 's': o->seed = strtoull (optarg, NULL, 0); break;
    case 'r': o->run = strtoull (optarg, NULL, 0); break;
    case '1': o->stop_on_fail = true; break;
    case 'm':
      if (strcmp (optarg, "plain") == 0) o->mode = MODE_PLAIN;
      else if (strcmp (optarg, "fua") == 0) o->mode = MODE_FUA;
      else if (strcmp (optarg, "flush") == 0) o->mode = MODE_FLUSH;
      else usage ();
      break;
    default:
      usage ();
    }
  }
  if (o->log_path == NULL || optind >= argc || o->nblocks == 0 ||
      o->seconds <= 0 || o->timeout <= 0)
    usage ();
  o->uris = argv + optind;
  o->nuris = argc - optind;
  o->last_error = calloc (o->nuris, sizeof *o->last_error);
  if (o->last_error == NULL) {
    fprintf (stderr, "ackwrite: calloc: %m\n");
    exit (EXIT_FAILURE);
  }
  while (o->run == 0)
    o->run = random_u64 ();
  if (o->seed == 0)
    o->seed = random_u64 ();
}

int
main (int argc, char **argv)
{
  struct opts o;
  struct nbd_handle *h = NULL;
  uint8_t buf[BLOCK_SIZE];
  uint64_t seq = 0, acks = 0, fails = 0, rng;
  double start, end;
  int next = 0;
  struct sigaction sa = { .sa_handler = on_signal };

  parse_args (argc, argv, &o);
  rng = o.seed;
  sigaction (SIGTERM, &sa, NULL);
  sigaction (SIGINT, &sa, NULL);
  sigaction (SIGUSR1, &sa, NULL);
  signal (SIGPIPE, SIG_IGN);

  log_fd = open (o.log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd == -1) {
    fprintf (stderr, "ackwrite: %s: %m\n", o.log_path);
    exit (EXIT_FAILURE);
  }
  log_record ("run %016" PRIx64 " %" PRIu64 " %" PRIu64 " %s", o.run,
              o.first, o.nblocks, mode_names[o.mode]);

  start = now ();
  end = start + o.seconds;
  while (!stop_requested && now () < end &&
         (o.count == 0 || seq < o.count)) {
    uint64_t block;
    char reason[256];

    if (move_requested && h) {
      log_record ("# moving off %s (SIGUSR1)", o.uris[next]);
      nbd_close (h);
      h = NULL;
      next = (next + 1) % o.nuris;
    }
    move_requested = 0;
    if (h == NULL && (h = connect_any (&o, &next, end)) == NULL)
      break;
    if (o.rate > 0) {
      double due = start + seq / o.rate, t = now ();
      if (due > t)
        usleep ((useconds_t) ((due - t) * 1e6));
    }
    block = o.first + splitmix64 (&rng) % o.nblocks;
    seq++;
    block_fill (buf, block, seq, o.run);
    log_record ("attempt %" PRIu64 " %" PRIu64, block, seq);
    if (write_block (h, &o, buf, block, reason, sizeof reason) == 0) {
      log_record ("ack %" PRIu64 " %" PRIu64, block, seq);
      acks++;
      continue;
    }
    log_record ("fail %" PRIu64 " %" PRIu64 " %s", block, seq, reason);
    fails++;
    nbd_close (h);
    h = NULL;
    if (o.stop_on_fail)
      break;
    next = (next + 1) % o.nuris;
    usleep (50 * 1000);         /* no busy loop on a node that fails all */
  }
  if (h)
    nbd_close (h);
  printf ("ackwrite: run %016" PRIx64 ": %" PRIu64 " attempts, %" PRIu64
          " acknowledged, %" PRIu64 " failed in %.1f s\n",
          o.run, seq, acks, fails, now () - start);
  close (log_fd);
  for (int k = 0; k < o.nuris; k++)
    free (o.last_error[k]);
  free (o.last_error);
  return o.stop_on_fail && fails > 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
