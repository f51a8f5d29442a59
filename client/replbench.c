/* nbdrepl: replbench — one load generator for NBD exports (libnbd's
 * asynchronous API) and iSCSI LUNs (libiscsi's), with fio-like
 * workloads, several connections, a verify mode, latency percentiles
 * and the CPU it used itself.  See replbench(8).
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 *   replbench --uri nbd://...|nbd+unix://...|iscsi://HOST:PORT/IQN/LUN
 *             [--rw randwrite|randread|write|read|randrw]
 *             [--bs 4096] [--qd 16] [--jobs 1] [--runtime 10]
 *             [--size BYTES] [--seed N] [--rwmixread 70] [--time-based]
 *             [--verify] [--verify-only] [--json]
 *
 * Random workloads run for --runtime; sequential ones make one pass
 * over --size (or stop at --runtime), or with --time-based start again
 * at the beginning until --runtime is over, as fio's time_based.
 * With --jobs N, N threads each open their own connection with their own queue of --qd requests and
 * work on their own contiguous 1/N of the blocks.
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
#include <pthread.h>
#include <sys/resource.h>

#include "byte-order.h"
#include "replbench.h"

enum rw { RW_RANDWRITE, RW_RANDREAD, RW_WRITE, RW_READ, RW_RANDRW };

struct opts {
  const char *uri;
  const struct transport *tr;
  enum rw rw;
  uint32_t bs;
  unsigned qd, jobs;
  double runtime;
  uint64_t size;                /* 0: the export's size */
  uint64_t seed;
  unsigned rwmixread;           /* percent of reads in randrw */
  bool time_based;              /* sequential: wrap until the runtime */
  bool verify, verify_only, json;
};

/* One job: one connection, one queue of qd slots, one thread, and its
 * own contiguous range of blocks [jb_first, jb_first + jb_nblocks). */
struct job {
  struct opts *jb_o;
  void *jb_conn;
  unsigned jb_id;
  pthread_t jb_thread;
  uint64_t jb_first, jb_nblocks;
  uint64_t jb_rng;
  uint64_t jb_next_seq;         /* sequential workloads */
  uint32_t *jb_gen;             /* verify: generation per block (shared
                                 * array, this job's range only) */
  struct slot *jb_slots;
  uint64_t *jb_lat_ns;          /* completion latencies */
  size_t jb_nlat, jb_maxlat;
  uint64_t jb_t0, jb_t1;        /* when the load started and ended */
  double jb_user, jb_sys;       /* CPU seconds this thread used for it */
  uint64_t jb_reads, jb_writes, jb_errors, jb_bad;
  int jb_status;                /* 0, or -1 when the transport failed */
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

static void
record (struct job *j, struct slot *s)
{
  if (j->jb_nlat == j->jb_maxlat) {
    size_t n = j->jb_maxlat ? j->jb_maxlat * 2 : 1 << 16;
    uint64_t *p = realloc (j->jb_lat_ns, n * sizeof *p);
    if (p == NULL) {
      perror ("replbench: realloc");
      exit (EXIT_FAILURE);
    }
    j->jb_lat_ns = p;
    j->jb_maxlat = n;
  }
  j->jb_lat_ns[j->jb_nlat++] = now_ns () - s->start_ns;
  if (s->err) {
    j->jb_errors++;
    if (j->jb_errors == 1)
      fprintf (stderr, "replbench: job %u: %s at offset %" PRIu64 ": %s\n",
               j->jb_id, s->is_write ? "write" : "read", s->offset,
               strerror (s->err));
  }
  else if (s->is_write)
    j->jb_writes++;
  else
    j->jb_reads++;
}

/* Is a request to this offset in flight in the job's queue? */
static bool
in_flight (const struct job *j, uint64_t offset)
{
  unsigned k;

  for (k = 0; k < j->jb_o->qd; k++)
    if (j->jb_slots[k].busy && j->jb_slots[k].offset == offset)
      return true;
  return false;
}

static int
issue (struct job *j, struct slot *s)
{
  struct opts *o = j->jb_o;
  uint64_t block;
  bool w;

  switch (o->rw) {
  case RW_WRITE: case RW_READ:
    block = j->jb_first + j->jb_next_seq++ % j->jb_nblocks;
    w = o->rw == RW_WRITE;
    break;
  default:
    /* With verify, never two requests to one block at once, or the
     * generation it ends with would be unknown. */
    do
      block = j->jb_first + rnd (&j->jb_rng) % j->jb_nblocks;
    while (o->verify && in_flight (j, block * o->bs));
    w = o->rw == RW_RANDWRITE ||
        (o->rw == RW_RANDRW && rnd (&j->jb_rng) % 100 >= o->rwmixread);
    break;
  }
  s->offset = block * o->bs;
  s->is_write = w;
  s->busy = true;
  s->err = 0;
  s->start_ns = now_ns ();
  if (w && o->verify)
    fill (s->buf, o->bs, s->offset, o->seed, ++j->jb_gen[block]);
  return o->tr->tr_submit (j->jb_conn, s, o->bs);
}

static double
tv_secs (struct timeval tv)
{
  return tv.tv_sec + tv.tv_usec / 1e6;
}

/* The load: keep qd requests in flight until the runtime is over (or
 * a sequential pass is done), then wait for the last ones. */
static int
load (struct job *j)
{
  struct opts *o = j->jb_o;
  bool seq = o->rw == RW_WRITE || o->rw == RW_READ;
  struct rusage ru0, ru1;
  uint64_t end;
  unsigned i;

  getrusage (RUSAGE_THREAD, &ru0);
  j->jb_t0 = now_ns ();
  end = j->jb_t0 + (uint64_t) (o->runtime * 1e9);
  for (;;) {
    bool running = now_ns () < end, any = false;

    for (i = 0; i < o->qd; i++) {
      struct slot *s = &j->jb_slots[i];

      if (!s->busy && s->start_ns != 0) {
        record (j, s);
        s->start_ns = 0;
      }
      /* A sequential pass ends at its last block, even in the middle of
       * the queue: one more would start a second pass. */
      if (seq && !o->time_based && j->jb_next_seq >= j->jb_nblocks)
        running = false;
      if (!s->busy && running && issue (j, s) == -1)
        return -1;
      any |= s->busy;
    }
    if (!running && !any)
      break;
    if (o->tr->tr_poll (j->jb_conn) == -1)
      return -1;
  }
  j->jb_t1 = now_ns ();
  getrusage (RUSAGE_THREAD, &ru1);
  j->jb_user = tv_secs (ru1.ru_utime) - tv_secs (ru0.ru_utime);
  j->jb_sys = tv_secs (ru1.ru_stime) - tv_secs (ru0.ru_stime);
  return 0;
}

/* The generation a block should hold after the load (0: not written). */
static uint32_t
expected_gen (const struct job *j, uint64_t block)
{
  return j->jb_o->verify_only ? 1 : j->jb_gen[block];
}

static void
check_block (struct job *j, struct slot *s, uint8_t *want)
{
  struct opts *o = j->jb_o;
  uint32_t g = expected_gen (j, s->offset / o->bs);

  if (s->err) {
    if (j->jb_bad++ < 5)
      fprintf (stderr, "replbench: verify: read at offset %" PRIu64
               ": %s\n", s->offset, strerror (s->err));
    return;
  }
  fill (want, o->bs, s->offset, o->seed, g);
  if (memcmp (s->buf, want, o->bs) != 0 && j->jb_bad++ < 5)
    fprintf (stderr, "replbench: verify: block at offset %" PRIu64
             " does not hold generation %" PRIu32 " of seed %" PRIu64 "\n",
             s->offset, g, o->seed);
}

/* Read back every block of the job's range that should hold something
 * (qd reads in flight) and count those that do not in jb_bad. */
static int
check (struct job *j)
{
  struct opts *o = j->jb_o;
  uint64_t b = j->jb_first, end = j->jb_first + j->jb_nblocks;
  uint8_t *want = malloc (o->bs);
  unsigned i;

  if (want == NULL) {
    perror ("replbench: malloc");
    return -1;
  }
  for (;;) {
    bool any = false;

    for (i = 0; i < o->qd; i++) {
      struct slot *s = &j->jb_slots[i];

      if (!s->busy && s->start_ns != 0) {
        check_block (j, s, want);
        s->start_ns = 0;
      }
      while (!s->busy && b < end && expected_gen (j, b) == 0)
        b++;
      if (!s->busy && b < end) {
        s->offset = b++ * o->bs;
        s->is_write = false;
        s->busy = true;
        s->start_ns = 1;
        if (o->tr->tr_submit (j->jb_conn, s, o->bs) == -1) {
          free (want);
          return -1;
        }
      }
      any |= s->busy;
    }
    if (!any && b >= end)
      break;
    if (o->tr->tr_poll (j->jb_conn) == -1) {
      free (want);
      return -1;
    }
  }
  free (want);
  return 0;
}

static void *
job_run (void *arg)
{
  struct job *j = arg;

  j->jb_status = 0;
  if ((!j->jb_o->verify_only && load (j) == -1) ||
      ((j->jb_o->verify || j->jb_o->verify_only) && check (j) == -1))
    j->jb_status = -1;
  return NULL;
}

static int
cmp_u64 (const void *a, const void *b)
{
  uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
  return x < y ? -1 : x > y;
}

static double
pct (const uint64_t *lat, size_t n, double p)
{
  size_t i;

  if (n == 0)
    return 0;
  i = (size_t) (p / 100 * (n - 1) + 0.5);
  return lat[i] / 1000.0;
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

static const char *
rw_name (enum rw rw)
{
  switch (rw) {
  case RW_RANDWRITE: return "randwrite";
  case RW_RANDREAD: return "randread";
  case RW_WRITE: return "write";
  case RW_READ: return "read";
  case RW_RANDRW: return "randrw";
  default: abort ();
  }
}

static void
usage (void)
{
  fprintf (stderr, "usage: replbench --uri nbd://...|iscsi://HOST:PORT/IQN/LUN\n"
           "                 [--rw randwrite|randread|write|read|randrw] "
           "[--bs N] [--qd N] [--jobs N]\n"
           "                 [--runtime SECONDS] [--size N] [--seed N] "
           "[--rwmixread PCT] [--time-based]\n"
           "                 [--verify] [--verify-only] [--json]\n");
  exit (2);
}

/* Merge the jobs' results and print them, as a table or as JSON. */
static void
report (struct opts *o, struct job *jobs, uint64_t nblocks,
        uint64_t *bad_out, uint64_t *errors_out)
{
  uint64_t reads = 0, writes = 0, errors = 0, bad = 0, t0 = UINT64_MAX,
           t1 = 0, *lat;
  size_t nlat = 0, k;
  double secs, ios, user = 0, sys = 0;
  unsigned i;

  for (i = 0; i < o->jobs; i++)
    nlat += jobs[i].jb_nlat;
  lat = malloc ((nlat ? nlat : 1) * sizeof *lat);
  if (lat == NULL) {
    perror ("replbench: malloc");
    exit (EXIT_FAILURE);
  }
  for (i = 0, k = 0; i < o->jobs; i++) {
    struct job *j = &jobs[i];

    if (j->jb_nlat)             /* none with --verify-only: NULL */
      memcpy (lat + k, j->jb_lat_ns, j->jb_nlat * sizeof *lat);
    k += j->jb_nlat;
    reads += j->jb_reads;
    writes += j->jb_writes;
    errors += j->jb_errors;
    bad += j->jb_bad;
    user += j->jb_user;
    sys += j->jb_sys;
    if (j->jb_t0 < t0) t0 = j->jb_t0;
    if (j->jb_t1 > t1) t1 = j->jb_t1;
  }
  qsort (lat, nlat, sizeof *lat, cmp_u64);
  *bad_out = bad;
  *errors_out = errors;

  if (o->verify_only) {
    printf ("replbench: verify-only: %" PRIu64 " of %" PRIu64
            " blocks bad\n", bad, nblocks);
    free (lat);
    return;
  }
  secs = t1 > t0 ? (t1 - t0) / 1e9 : 1e-9;
  ios = reads + writes;
  if (o->json)
    printf ("{\"transport\":\"%s\",\"rw\":\"%s\",\"bs\":%" PRIu32
            ",\"qd\":%u,\"jobs\":%u,"
            "\"iops\":%.1f,\"mib_s\":%.2f,\"p50_us\":%.1f,\"p99_us\":%.1f,"
            "\"p999_us\":%.1f,\"reads\":%" PRIu64 ",\"writes\":%" PRIu64
            ",\"errors\":%" PRIu64 ",\"cpu_user_s\":%.3f,\"cpu_sys_s\":%.3f,"
            "\"cpu_pct\":%.1f,\"cpu_us_per_io\":%.2f,"
            "\"seconds\":%.3f,\"verify_bad_blocks\":%" PRIu64 "}\n",
            o->tr->tr_name, rw_name (o->rw), o->bs, o->qd, o->jobs,
            ios / secs, ios * o->bs / 1048576.0 / secs, pct (lat, nlat, 50),
            pct (lat, nlat, 99), pct (lat, nlat, 99.9), reads, writes, errors,
            user, sys, (user + sys) * 100 / secs,
            ios ? (user + sys) * 1e6 / ios : 0, secs, bad);
  else {
    printf ("replbench: %s %s bs=%" PRIu32 " qd=%u jobs=%u, %.1f s\n",
            o->uri, rw_name (o->rw), o->bs, o->qd, o->jobs, secs);
    printf ("  %10s %9s %9s %9s %9s %10s %7s %7s\n", "IOPS", "MiB/s",
            "p50 us", "p99 us", "p99.9 us", "cpu us/io", "cpu %", "errors");
    printf ("  %10.0f %9.1f %9.1f %9.1f %9.1f %10.1f %7.1f %7" PRIu64 "\n",
            ios / secs, ios * o->bs / 1048576.0 / secs, pct (lat, nlat, 50),
            pct (lat, nlat, 99), pct (lat, nlat, 99.9),
            ios ? (user + sys) * 1e6 / ios : 0, (user + sys) * 100 / secs,
            errors);
    if (o->verify)
      printf (bad ? "replbench: VERIFY FAILED: %" PRIu64 " bad blocks\n"
                  : "replbench: verify ok\n", bad);
  }
  free (lat);
}

int
main (int argc, char *argv[])
{
  static const struct option longopts[] = {
    { "uri", required_argument, NULL, 'u' },
    { "rw", required_argument, NULL, 'r' },
    { "bs", required_argument, NULL, 'b' },
    { "qd", required_argument, NULL, 'q' },
    { "jobs", required_argument, NULL, 'J' },
    { "runtime", required_argument, NULL, 't' },
    { "size", required_argument, NULL, 's' },
    { "seed", required_argument, NULL, 'S' },
    { "rwmixread", required_argument, NULL, 'm' },
    { "time-based", no_argument, NULL, 'T' },
    { "verify", no_argument, NULL, 'v' },
    { "verify-only", no_argument, NULL, 'V' },
    { "json", no_argument, NULL, 'j' },
    { NULL, 0, NULL, 0 },
  };
  struct opts o = { .rw = RW_RANDWRITE, .bs = 4096, .qd = 16, .jobs = 1,
                    .runtime = 10, .seed = 1, .rwmixread = 70 };
  struct job *jobs;
  uint32_t *gen = NULL;
  uint64_t size = 0, nblocks, bad, errors;
  uint32_t block = 0;
  unsigned i, k;
  int c, status = EXIT_SUCCESS;

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
    case 'J': o.jobs = atoi (optarg); break;
    case 't': o.runtime = atof (optarg); break;
    case 's': o.size = parse_size (optarg); break;
    case 'S': o.seed = strtoull (optarg, NULL, 10); break;
    case 'm': o.rwmixread = atoi (optarg); break;
    case 'T': o.time_based = true; break;
    case 'v': o.verify = true; break;
    case 'V': o.verify_only = true; break;
    case 'j': o.json = true; break;
    default: usage ();
    }
  }
  if (o.uri == NULL || o.qd < 1 || o.qd > 1024 || o.jobs < 1 ||
      o.jobs > 64 || o.bs < 512 || o.bs % 512 != 0 || o.rwmixread > 100 ||
      o.runtime <= 0)
    usage ();
  o.tr = strncmp (o.uri, "iscsi://", 8) == 0 ? &transport_iscsi
                                              : &transport_nbd;

  jobs = calloc (o.jobs, sizeof *jobs);
  if (jobs == NULL) {
    perror ("replbench: calloc");
    return EXIT_FAILURE;
  }
  for (i = 0; i < o.jobs; i++) {
    uint64_t esize;
    uint32_t eblock;

    jobs[i].jb_conn = o.tr->tr_open (o.uri, i, &esize, &eblock);
    if (jobs[i].jb_conn == NULL) {
      status = EXIT_FAILURE;
      goto out;
    }
    size = esize;
    block = eblock;
  }
  if (o.bs % block != 0) {
    fprintf (stderr, "replbench: --bs %" PRIu32 " is not a multiple of the "
             "export's block size %" PRIu32 "\n", o.bs, block);
    status = EXIT_FAILURE;
    goto out;
  }
  if (o.size == 0 || o.size > size)
    o.size = size;
  nblocks = o.size / o.bs;
  if (nblocks / o.jobs == 0 ||
      ((o.verify || o.verify_only) && nblocks / o.jobs <= o.qd)) {
    fprintf (stderr, "replbench: too few blocks (--size / --bs) for --jobs "
             "%u%s\n", o.jobs, o.verify ? " and --qd with --verify" : "");
    status = EXIT_FAILURE;
    goto out;
  }
  if (o.verify && (gen = calloc (nblocks, sizeof *gen)) == NULL) {
    perror ("replbench: calloc");
    status = EXIT_FAILURE;
    goto out;
  }
  for (i = 0; i < o.jobs; i++) {
    struct job *j = &jobs[i];

    j->jb_o = &o;
    j->jb_id = i;
    j->jb_first = nblocks / o.jobs * i;
    j->jb_nblocks = i == o.jobs - 1 ? nblocks - j->jb_first
                                    : nblocks / o.jobs;
    j->jb_rng = o.seed + i;
    j->jb_gen = gen;
    j->jb_slots = calloc (o.qd, sizeof *j->jb_slots);
    if (j->jb_slots == NULL) {
      perror ("replbench: calloc");
      status = EXIT_FAILURE;
      goto out;
    }
    for (k = 0; k < o.qd; k++) {
      j->jb_slots[k].buf = aligned_alloc (4096, (o.bs + 4095) & ~4095u);
      if (j->jb_slots[k].buf == NULL) {
        perror ("replbench: aligned_alloc");
        status = EXIT_FAILURE;
        goto out;
      }
      fill (j->jb_slots[k].buf, o.bs, k, o.seed, 0);
    }
  }

  for (i = 0; i < o.jobs; i++) {
    errno = pthread_create (&jobs[i].jb_thread, NULL, job_run, &jobs[i]);
    if (errno != 0) {
      perror ("replbench: pthread_create");
      exit (EXIT_FAILURE);
    }
  }
  for (i = 0; i < o.jobs; i++) {
    pthread_join (jobs[i].jb_thread, NULL);
    if (jobs[i].jb_status == -1)
      status = EXIT_FAILURE;
  }
  if (status == EXIT_SUCCESS) {
    report (&o, jobs, nblocks, &bad, &errors);
    if (bad || errors)
      status = EXIT_FAILURE;
  }

 out:
  for (i = 0; i < o.jobs; i++) {
    if (jobs[i].jb_conn)
      o.tr->tr_close (jobs[i].jb_conn);
    if (jobs[i].jb_slots)
      for (k = 0; k < o.qd; k++)
        free (jobs[i].jb_slots[k].buf);
    free (jobs[i].jb_slots);
    free (jobs[i].jb_lat_ns);
  }
  free (jobs);
  free (gen);
  return status;
}
