/* nbdrepl: replbench — a load generator for NBD exports (libnbd's
 * asynchronous API), with fio-like workloads, a verify mode and
 * latency percentiles.  See replbench(1) in the README for now.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 *   replbench --uri URI [--rw randwrite|randread|write|read|randrw]
 *             [--bs 4096] [--qd 16] [--runtime 10] [--size BYTES]
 *             [--seed N] [--rwmixread 70] [--verify] [--verify-only]
 *             [--json]
 *
 * Random workloads run for --runtime; sequential ones make one pass
 * over --size (or stop at --runtime).
 *
 * --verify: every block written carries its offset, the seed and a
 * generation (how often this run has written it) in its first 24 bytes
 * and a pattern from them in the rest; after the load every block
 * written is read back and checked.  --verify-only: read the first
 * --size bytes and check that every block holds what a sequential
 * --verify write with the same seed leaves (generation 1).
 */
#include <config.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>

#include <libnbd.h>

#include "byte-order.h"

enum rw { RW_RANDWRITE, RW_RANDREAD, RW_WRITE, RW_READ, RW_RANDRW };

struct opts {
  const char *uri;
  enum rw rw;
  uint32_t bs;
  unsigned qd;
  double runtime;
  uint64_t size;                /* 0: the export's size */
  uint64_t seed;
  unsigned rwmixread;           /* percent of reads in randrw */
  bool verify, verify_only, json;
};

struct slot {
  uint8_t *buf;
  bool busy, is_write;
  uint64_t offset;
  uint64_t start_ns;
  int err;
};

struct run {
  struct opts *o;
  struct nbd_handle *nbd;
  uint64_t nblocks;
  uint64_t rng;
  uint64_t next_seq;            /* sequential workloads */
  uint32_t *gen;                /* verify: generation per block */
  uint64_t *lat_ns;             /* completion latencies */
  size_t nlat, maxlat;
  uint64_t reads, writes, errors;
};

static uint64_t
now_ns (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t
rnd (uint64_t *s)               /* splitmix64 */
{
  uint64_t z = (*s += UINT64_C (0x9e3779b97f4a7c15));

  z = (z ^ (z >> 30)) * UINT64_C (0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C (0x94d049bb133111eb);
  return z ^ (z >> 31);
}

/* The block at offset, generation gen, of this seed. */
static void
fill (uint8_t *buf, uint32_t bs, uint64_t offset, uint64_t seed, uint32_t gen)
{
  uint64_t s = offset ^ (seed * UINT64_C (0x2545f4914f6cdd1d)) ^ gen;
  uint32_t i;

  for (i = 0; i + 8 <= bs; i += 8)
    put_be64 (buf + i, rnd (&s));
  if (bs >= 24) {
    put_be64 (buf, offset);
    put_be64 (buf + 8, seed);
    put_be64 (buf + 16, gen);
  }
}

static int
done_cb (void *user_data, int *error)
{
  struct slot *s = user_data;

  s->err = *error;
  s->busy = false;
  return 1;                     /* retire the command */
}

static void
record (struct run *r, struct slot *s)
{
  if (r->nlat == r->maxlat) {
    size_t n = r->maxlat ? r->maxlat * 2 : 1 << 16;
    uint64_t *p = realloc (r->lat_ns, n * sizeof *p);
    if (p == NULL) {
      perror ("replbench: realloc");
      exit (EXIT_FAILURE);
    }
    r->lat_ns = p;
    r->maxlat = n;
  }
  r->lat_ns[r->nlat++] = now_ns () - s->start_ns;
  if (s->err) {
    r->errors++;
    if (r->errors == 1)
      fprintf (stderr, "replbench: %s at offset %" PRIu64 ": %s\n",
               s->is_write ? "write" : "read", s->offset, strerror (s->err));
  }
  else if (s->is_write)
    r->writes++;
  else
    r->reads++;
}

/* Is a request to block b in flight? */
static bool
in_flight (const struct slot *slots, unsigned qd, uint64_t offset)
{
  unsigned k;

  for (k = 0; k < qd; k++)
    if (slots[k].busy && slots[k].offset == offset)
      return true;
  return false;
}

static int
issue (struct run *r, struct slot *slots, struct slot *s)
{
  struct opts *o = r->o;
  uint64_t block;
  bool w;

  switch (o->rw) {
  case RW_WRITE: case RW_READ:
    block = r->next_seq++ % r->nblocks;
    w = o->rw == RW_WRITE;
    break;
  default:
    /* With verify, never two requests to one block at once, or the
     * generation it ends with would be unknown. */
    do
      block = rnd (&r->rng) % r->nblocks;
    while (o->verify && r->nblocks > o->qd &&
           in_flight (slots, o->qd, block * o->bs));
    w = o->rw == RW_RANDWRITE ||
        (o->rw == RW_RANDRW && rnd (&r->rng) % 100 >= o->rwmixread);
    break;
  }
  s->offset = block * o->bs;
  s->is_write = w;
  s->busy = true;
  s->err = 0;
  s->start_ns = now_ns ();
  if (w && o->verify)
    fill (s->buf, o->bs, s->offset, o->seed, ++r->gen[block]);
  nbd_completion_callback cb = { .callback = done_cb, .user_data = s };
  if ((w ? nbd_aio_pwrite (r->nbd, s->buf, o->bs, s->offset, cb, 0)
         : nbd_aio_pread (r->nbd, s->buf, o->bs, s->offset, cb, 0)) == -1) {
    fprintf (stderr, "replbench: %s\n", nbd_get_error ());
    return -1;
  }
  return 0;
}

static int
cmp_u64 (const void *a, const void *b)
{
  uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
  return x < y ? -1 : x > y;
}

static double
pct (struct run *r, double p)
{
  size_t i;

  if (r->nlat == 0)
    return 0;
  i = (size_t) (p / 100 * (r->nlat - 1) + 0.5);
  return r->lat_ns[i] / 1000.0;
}

/* Read back [0, nblocks) and check each block that verify says holds
 * generation gen[b] (or 1 for --verify-only).  Returns bad blocks. */
static uint64_t
check (struct run *r)
{
  struct opts *o = r->o;
  uint8_t *got = malloc (o->bs), *want = malloc (o->bs);
  uint64_t b, bad = 0;

  if (got == NULL || want == NULL) {
    perror ("replbench: malloc");
    exit (EXIT_FAILURE);
  }
  for (b = 0; b < r->nblocks; b++) {
    uint32_t g = o->verify_only ? 1 : r->gen[b];

    if (g == 0)
      continue;
    if (nbd_pread (r->nbd, got, o->bs, b * o->bs, 0) == -1) {
      fprintf (stderr, "replbench: verify read: %s\n", nbd_get_error ());
      bad++;
      continue;
    }
    fill (want, o->bs, b * o->bs, o->seed, g);
    if (memcmp (got, want, o->bs) != 0) {
      if (bad < 5)
        fprintf (stderr, "replbench: verify: block at offset %" PRIu64
                 " does not hold generation %" PRIu32 " of seed %" PRIu64
                 "\n", b * o->bs, g, o->seed);
      bad++;
    }
  }
  free (got);
  free (want);
  return bad;
}

static uint64_t
parse_size (const char *s)
{
  char *end;
  uint64_t v = strtoull (s, &end, 10);

  switch (*end) {
  case 'k': case 'K': v <<= 10; end++; break;
  case 'm': case 'M': v <<= 20; end++; break;
  case 'g': case 'G': v <<= 30; end++; break;
  default: break;
  }
  if (*end != '\0' || v == 0) {
    fprintf (stderr, "replbench: bad size '%s'\n", s);
    exit (2);
  }
  return v;
}

static void
usage (void)
{
  fprintf (stderr, "usage: replbench --uri URI [--rw randwrite|randread|"
           "write|read|randrw] [--bs N] [--qd N] [--runtime SECONDS]\n"
           "                 [--size N] [--seed N] [--rwmixread PCT] "
           "[--verify] [--verify-only] [--json]\n");
  exit (2);
}

int
main (int argc, char *argv[])
{
  static const struct option longopts[] = {
    { "uri", required_argument, NULL, 'u' },
    { "rw", required_argument, NULL, 'r' },
    { "bs", required_argument, NULL, 'b' },
    { "qd", required_argument, NULL, 'q' },
    { "runtime", required_argument, NULL, 't' },
    { "size", required_argument, NULL, 's' },
    { "seed", required_argument, NULL, 'S' },
    { "rwmixread", required_argument, NULL, 'm' },
    { "verify", no_argument, NULL, 'v' },
    { "verify-only", no_argument, NULL, 'V' },
    { "json", no_argument, NULL, 'j' },
    { NULL, 0, NULL, 0 },
  };
  struct opts o = { .rw = RW_RANDWRITE, .bs = 4096, .qd = 16, .runtime = 10,
                    .seed = 1, .rwmixread = 70 };
  struct run r = { .o = &o };
  struct slot *slots;
  struct rusage ru0, ru1;
  uint64_t t0, t1, bad = 0;
  int64_t esize;
  unsigned i;
  int c;

  while ((c = getopt_long (argc, argv, "", longopts, NULL)) != -1) {
    switch (c) {
    case 'u': o.uri = optarg; break;
    case 'r':
      if (strcmp (optarg, "randwrite") == 0) o.rw = RW_RANDWRITE;
      else if (strcmp (optarg, "randread") == 0) o.rw = RW_RANDREAD;
      else if (strcmp (optarg, "write") == 0) o.rw = RW_WRITE;
      else if (strcmp (optarg, "read") == 0) o.rw = RW_READ;
      else if (strcmp (optarg, "randrw") == 0) o.rw = RW_RANDRW;
      else usage ();
      break;
    case 'b': o.bs = parse_size (optarg); break;
    case 'q': o.qd = atoi (optarg); break;
    case 't': o.runtime = atof (optarg); break;
    case 's': o.size = parse_size (optarg); break;
    case 'S': o.seed = strtoull (optarg, NULL, 10); break;
    case 'm': o.rwmixread = atoi (optarg); break;
    case 'v': o.verify = true; break;
    case 'V': o.verify_only = true; break;
    case 'j': o.json = true; break;
    default: usage ();
    }
  }
  if (o.uri == NULL || o.qd < 1 || o.qd > 1024 || o.bs < 512 ||
      o.bs % 512 != 0 || o.rwmixread > 100 || o.runtime <= 0)
    usage ();

  r.nbd = nbd_create ();
  if (r.nbd == NULL || nbd_connect_uri (r.nbd, o.uri) == -1) {
    fprintf (stderr, "replbench: %s\n", nbd_get_error ());
    return EXIT_FAILURE;
  }
  esize = nbd_get_size (r.nbd);
  if (esize <= 0) {
    fprintf (stderr, "replbench: %s: no size\n", o.uri);
    return EXIT_FAILURE;
  }
  if (o.size == 0 || o.size > (uint64_t) esize)
    o.size = esize;
  r.nblocks = o.size / o.bs;
  if (r.nblocks == 0) {
    fprintf (stderr, "replbench: --size is smaller than --bs\n");
    return EXIT_FAILURE;
  }
  r.rng = o.seed;

  if (o.verify_only) {
    bad = check (&r);
    printf ("replbench: verify-only: %" PRIu64 " of %" PRIu64
            " blocks bad\n", bad, r.nblocks);
    nbd_close (r.nbd);
    return bad ? EXIT_FAILURE : EXIT_SUCCESS;
  }

  if (o.verify && (r.gen = calloc (r.nblocks, sizeof *r.gen)) == NULL) {
    perror ("replbench: calloc");
    return EXIT_FAILURE;
  }
  slots = calloc (o.qd, sizeof *slots);
  if (slots == NULL) {
    perror ("replbench: calloc");
    return EXIT_FAILURE;
  }
  for (i = 0; i < o.qd; i++) {
    slots[i].buf = aligned_alloc (4096, (o.bs + 4095) & ~4095u);
    if (slots[i].buf == NULL) {
      perror ("replbench: aligned_alloc");
      return EXIT_FAILURE;
    }
    fill (slots[i].buf, o.bs, i, o.seed, 0);
  }
  if (o.verify && r.nblocks <= o.qd) {
    fprintf (stderr, "replbench: --verify needs more blocks (--size / --bs) "
             "than --qd\n");
    return EXIT_FAILURE;
  }

  getrusage (RUSAGE_SELF, &ru0);
  t0 = now_ns ();
  t1 = t0 + (uint64_t) (o.runtime * 1e9);
  for (;;) {
    /* Sequential workloads make one pass over --size, as fio does. */
    bool running = now_ns () < t1 &&
                   !((o.rw == RW_WRITE || o.rw == RW_READ) &&
                     r.next_seq >= r.nblocks),
         any = false;

    for (i = 0; i < o.qd; i++) {
      struct slot *s = &slots[i];

      if (!s->busy && s->start_ns != 0) {
        record (&r, s);
        s->start_ns = 0;
      }
      if (!s->busy && running && issue (&r, slots, s) == -1)
        return EXIT_FAILURE;
      any |= s->busy;
    }
    if (!running && !any)
      break;
    if (nbd_poll (r.nbd, -1) == -1) {
      fprintf (stderr, "replbench: %s\n", nbd_get_error ());
      return EXIT_FAILURE;
    }
  }
  t1 = now_ns ();
  getrusage (RUSAGE_SELF, &ru1);

  if (o.verify)
    bad = check (&r);
  qsort (r.lat_ns, r.nlat, sizeof *r.lat_ns, cmp_u64);
  {
    double secs = (t1 - t0) / 1e9;
    double ios = r.reads + r.writes;
    double cpu = (ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec) +
                 (ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) +
                 ((ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec) +
                  (ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec)) / 1e6;

    if (o.json)
      printf ("{\"iops\":%.1f,\"mib_s\":%.2f,\"p50_us\":%.1f,\"p99_us\":%.1f,"
              "\"p999_us\":%.1f,\"reads\":%" PRIu64 ",\"writes\":%" PRIu64
              ",\"errors\":%" PRIu64 ",\"cpu_us_per_io\":%.2f,"
              "\"seconds\":%.3f,\"verify_bad_blocks\":%" PRIu64 "}\n",
              ios / secs, ios * o.bs / 1048576.0 / secs, pct (&r, 50),
              pct (&r, 99), pct (&r, 99.9), r.reads, r.writes, r.errors,
              ios ? cpu * 1e6 / ios : 0, secs, bad);
    else
      printf ("replbench: %.0f IOPS  %.1f MiB/s  p50 %.1f us  p99 %.1f us  "
              "p99.9 %.1f us  errors %" PRIu64 "  cpu %.1f us/io%s\n",
              ios / secs, ios * o.bs / 1048576.0 / secs, pct (&r, 50),
              pct (&r, 99), pct (&r, 99.9), r.errors,
              ios ? cpu * 1e6 / ios : 0,
              o.verify ? (bad ? "  VERIFY FAILED" : "  verify ok") : "");
  }
  nbd_shutdown (r.nbd, 0);
  nbd_close (r.nbd);
  for (i = 0; i < o.qd; i++)
    free (slots[i].buf);
  free (slots);
  free (r.gen);
  free (r.lat_ns);
  return r.errors || bad ? EXIT_FAILURE : EXIT_SUCCESS;
}
