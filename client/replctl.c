/* nbdrepl: replctl — talk to a node's control socket, and manage its
 * metadata while it is stopped.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 *   replctl -s /run/nbdrepl/r0-alpha.sock status [--json] [--watch [SECS]]
 *   replctl -c r0.yaml -n alpha status [--json] [--watch [SECS]]
 *   replctl -c r0.yaml -n alpha create-md [--force] [--in-sync]
 *   replctl -c r0.yaml -n alpha dump-md
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <libgen.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <linux/fs.h>

#include "cleanup.h"
#include "local-node.h"
#include "md-look.h"
#include "metadata.h"
#include "uuid-compare.h"
#include "repl-config.h"
#include "sockets.h"

#define REPLY_TIMEOUT_MS 10000

/* status --watch: the default interval and the accepted range, in
 * seconds. */
#define WATCH_DEFAULT_S 1.0
#define WATCH_MIN_S 0.1
#define WATCH_MAX_S 86400.0

static void usage (FILE *fp, int status) __attribute__ ((noreturn));

/* "128M", "4096", "2G": bytes (K, M, G, T are powers of 1024).  Returns
 * 0, or -1 for anything else, 0 or an overflow. */
static int
parse_size (const char *s, uint64_t *bytes)
{
  unsigned shift = 0;
  uint64_t v;
  char *end;

  if (s[0] < '0' || s[0] > '9')
    return -1;
  errno = 0;
  v = strtoull (s, &end, 10);
  if (errno != 0 || v == 0)
    return -1;
  switch (*end) {
  case '\0': break;
  case 'K': case 'k': shift = 10; end++; break;
  case 'M': case 'm': shift = 20; end++; break;
  case 'G': case 'g': shift = 30; end++; break;
  case 'T': case 't': shift = 40; end++; break;
  default: return -1;
  }
  if (*end != '\0' || v > (UINT64_MAX >> shift))
    return -1;
  *bytes = v << shift;
  return 0;
}

static void
usage (FILE *fp, int status)
{
  /* After a mistake: the error said what; one line says where to look. */
  if (status != EXIT_SUCCESS) {
    fprintf (fp, "usage: replctl (-s SOCKET | -c CONFIG [-n NODE]) COMMAND "
             "[OPTIONS]; 'replctl --help' lists the commands\n");
    exit (status);
  }
  fprintf (fp,
           "usage: replctl (-s SOCKET | -c CONFIG -n NODE) status [--json] [--watch [SECONDS]]\n"
           "       replctl -c CONFIG -n NODE create-md [--force] [--in-sync]\n"
           "       replctl -c CONFIG -n NODE dump-md\n"
           "       replctl (-s SOCKET | -c CONFIG -n NODE) verify | resync | invalidate\n"
           "       replctl (-s SOCKET | -c CONFIG -n NODE) primary [--force] | secondary\n"
           "       replctl (-s SOCKET | -c CONFIG -n NODE) connect --discard-my-data\n"
           "       replctl (-s SOCKET | -c CONFIG -n NODE) disconnect | connect | pause-sync | resume-sync | invalidate-remote PEER\n"
           "       replctl (-s SOCKET | -c CONFIG -n NODE) verify --stop\n"
           "       replctl (-s SOCKET | -c CONFIG -n NODE) adjust | resume-io | outdate | down\n"
           "       replctl (-s SOCKET | -c CONFIG -n NODE) resize [--assume-clean] [--size BYTES]\n"
           "       replctl (-s SOCKET | -c CONFIG -n NODE) events [--now] [--statistics] [--json]\n"
           "       replctl (-s SOCKET | -c CONFIG -n NODE) role | quorum | dstate [PEER] | cstate [PEER]\n"
           "\n"
           "commands:\n"
           "  status [--json]   roles, disk and connection states, generation UUIDs,\n"
           "                    resync progress\n"
           "      --watch [SECONDS]  redraw every SECONDS (default 1) until Ctrl-C\n"
           "  create-md         initialise the node's metadata (node stopped)\n"
           "      --force       overwrite metadata that is already there\n"
           "      --in-sync     declare the disks of all nodes identical\n"
           "  dump-md           print the node's metadata\n"
           "  verify            (primary) compare every chunk with each peer\n"
           "  resync            (primary) resync what is marked out of sync\n"
           "  invalidate        (secondary) discard this node's data: full sync\n"
           "  primary           promote (UpToDate, no other primary)\n"
           "      --force       even if not UpToDate: its data becomes authoritative\n"
           "  secondary         demote (no client connected)\n"
           "  connect --discard-my-data  end a split brain: this node's changes go\n"
           "  disconnect PEER   drop the connection to PEER and make none (StandAlone)\n"
           "  connect PEER      connect to PEER again after disconnect\n"
           "  pause-sync PEER   pause the resync between this node and PEER\n"
           "  resume-sync PEER  let it go on\n"
           "  invalidate-remote PEER  (UpToDate source) resync all of PEER from here\n"
           "  verify --stop     stop a running verify\n"
           "  adjust            apply the node's changed configuration file\n"
           "  resume-io         let writes held by a failed fence go on\n"
           "  outdate           (secondary) mark this node's data out of date\n"
           "  down              stop the node (nbdkit exits; a Primary is demoted\n"
           "                    first, and refuses with clients attached)\n"
           "  resize            (Primary) grow the volume to what every node's\n"
           "                    backing device holds now (grow them first);\n"
           "                    the new area resyncs\n"
           "      --assume-clean  the new area is identical on every node already\n"
           "      --size BYTES  grow to this size (K, M, G, T: powers of 1024)\n"
           "  events            print every state change as it happens, until the\n"
           "                    node stops\n"
           "      --now         the current state first (\"exists\" lines)\n"
           "      --statistics  resync progress and out-of-sync counts too\n"
           "      --json        one JSON object per line\n"
           "  role              one word: Primary or Secondary (for scripts)\n"
           "  quorum            yes or no\n"
           "  dstate [PEER]     the node's disk state (or the peer's, as known)\n"
           "  cstate [PEER]     'PEER STATE' for each peer (or the one's state)\n"
           "\n"
           "options:\n"
           "  -s, --socket=PATH    the node's control socket\n"
           "  -c, --config=FILE    the resource configuration (YAML)\n"
           "  -n, --node=NAME      the node in CONFIG (default: the one named as\n"
           "                       this machine's host name)\n"
           "  -h, --help           this text\n"
           "\n"
           "See replctl(8).\n");
  exit (status);
}

/* The node named node_name in the configuration; exits on any error. */
static const struct repl_node_cfg *
load_node (const char *config_path, const char *node_name,
           struct repl_config *cfg)
{
  const struct repl_node_cfg *n;
  char err[512];

  if (config_path == NULL) {
    fprintf (stderr, "replctl: give -c CONFIG (and -n NODE)\n");
    usage (stderr, EXIT_FAILURE);
  }
  if (config_load (config_path, cfg, err, sizeof err) == -1) {
    fprintf (stderr, "replctl: %s\n", err);
    exit (EXIT_FAILURE);
  }
  if (node_name == NULL) {          /* the node named as this machine */
    n = config_find_local_node (cfg, err, sizeof err);
    if (n == NULL) {
      fprintf (stderr, "replctl: %s\n", err);
      exit (EXIT_FAILURE);
    }
    return n;
  }
  n = config_find_node (cfg, node_name);
  if (n == NULL) {
    fprintf (stderr, "replctl: %s: no node named '%s'\n", config_path,
             node_name);
    exit (EXIT_FAILURE);
  }
  return n;
}

/* Send one request line to the node and copy its answer to stdout; an
 * answer starting "error: " fails. */
static int
cmd_request (const char *socket_path, const char *cmd)
{
  char first[8] = "";
  size_t total = 0;
  int fd, status = EXIT_SUCCESS;

  fd = sock_connect_unix (socket_path);
  if (fd == -1) {
    fprintf (stderr, "replctl: %s: %s (is the node running?)\n",
             socket_path, strerror (errno));
    return EXIT_FAILURE;
  }
  if (sock_write_full (fd, cmd, strlen (cmd), REPLY_TIMEOUT_MS) == -1) {
    fprintf (stderr, "replctl: %s: write: %s\n", socket_path,
             strerror (errno));
    close (fd);
    return EXIT_FAILURE;
  }
  for (;;) {
    char buf[4096];
    ssize_t r = read (fd, buf, sizeof buf);

    if (r == -1) {
      if (errno == EINTR)
        continue;
      fprintf (stderr, "replctl: %s: read: %s\n", socket_path,
               strerror (errno));
      close (fd);
      return EXIT_FAILURE;
    }
    if (r == 0)
      break;
    if (total < sizeof first - 1) {
      size_t n = sizeof first - 1 - total < (size_t) r
        ? sizeof first - 1 - total : (size_t) r;
      memcpy (first + total, buf, n);
    }
    total += r;
    fwrite (buf, 1, r, stdout);
    fflush (stdout);            /* events: each line as it comes */
  }
  close (fd);
  if (total == 0) {
    fprintf (stderr, "replctl: %s: no answer\n", socket_path);
    status = EXIT_FAILURE;
  }
  else if (strncmp (first, "error: ", 7) == 0)
    status = EXIT_FAILURE;
  return status;
}

static int
cmd_status (const char *socket_path, bool json)
{
  return cmd_request (socket_path, json ? "status --json\n" : "status\n");
}

/* status --watch: SIGINT or SIGTERM ends the watch.  The signals are
 * blocked except while waiting (ppoll), so one that arrives between two
 * waits is seen by the next one instead of being lost. */
static volatile sig_atomic_t watch_stop;

static void
watch_signal (int sig)
{
  watch_stop = sig;
}

/* One status answer, read whole so that it can be drawn at once.
 * Waits with the signal mask `waitmask`, so that a signal interrupts
 * it.  Returns the text (to free), or NULL with errno: EINTR when a
 * signal came, ETIMEDOUT when the node did not answer in time, ENODATA
 * when it closed the connection without a word, or the errno of
 * connect or read. */
static char *
watch_fetch (const char *socket_path, bool json, const sigset_t *waitmask)
{
  const char *cmd = json ? "status --json\n" : "status\n";
  char *text = NULL;
  size_t len = 0;
  FILE *fp = NULL;
  int fd, err = 0;

  fd = sock_connect_unix (socket_path);
  if (fd == -1)
    return NULL;
  if (sock_write_full (fd, cmd, strlen (cmd), REPLY_TIMEOUT_MS) == -1 ||
      (fp = open_memstream (&text, &len)) == NULL) {
    err = errno;
    close (fd);
    errno = err;
    return NULL;
  }
  for (;;) {
    struct pollfd pfd = { .fd = fd, .events = POLLIN };
    struct timespec timeout = { .tv_sec = REPLY_TIMEOUT_MS / 1000,
                                .tv_nsec = REPLY_TIMEOUT_MS % 1000 * 1000000L };
    char buf[4096];
    ssize_t r;

    r = ppoll (&pfd, 1, &timeout, waitmask);
    if (r == 0) {
      err = ETIMEDOUT;
      break;
    }
    if (r == -1) {
      err = errno;
      break;
    }
    r = read (fd, buf, sizeof buf);
    if (r == -1) {
      if (errno == EINTR)
        continue;
      err = errno;
      break;
    }
    if (r == 0)
      break;
    fwrite (buf, 1, r, fp);
  }
  close (fd);
  if (fclose (fp) == EOF && err == 0)
    err = errno;
  if (err == 0 && len == 0)
    err = ENODATA;
  if (err != 0) {
    free (text);
    errno = err;
    return NULL;
  }
  return text;
}

/* Sleep until the monotonic time `until`, or until a signal. */
static void
watch_sleep (const struct timespec *until, const sigset_t *waitmask)
{
  struct timespec now, left;

  clock_gettime (CLOCK_MONOTONIC, &now);
  left.tv_sec = until->tv_sec - now.tv_sec;
  left.tv_nsec = until->tv_nsec - now.tv_nsec;
  if (left.tv_nsec < 0) {
    left.tv_sec--;
    left.tv_nsec += 1000000000L;
  }
  if (left.tv_sec < 0)
    return;
  ppoll (NULL, 0, &left, waitmask);
}

/* replctl status --watch: fetch the status every `interval` seconds and
 * redraw it, until SIGINT or SIGTERM (exit 0) or until the node stops
 * answering (exit 1).  On a terminal the screen is redrawn in place;
 * otherwise each answer is printed after the last (with --json: one
 * object per line). */
static int
cmd_status_watch (const char *socket_path, bool json, double interval)
{
  struct sigaction sa = { .sa_handler = watch_signal };
  sigset_t block, waitmask;
  struct timespec next;
  bool tty = !json && isatty (STDOUT_FILENO);
  const long long step_ns = (long long) (interval * 1e9);
  unsigned long shown = 0;
  int status = EXIT_SUCCESS;

  sigemptyset (&block);
  sigaddset (&block, SIGINT);
  sigaddset (&block, SIGTERM);
  sigprocmask (SIG_BLOCK, &block, &waitmask);
  sigdelset (&waitmask, SIGINT);
  sigdelset (&waitmask, SIGTERM);
  sigemptyset (&sa.sa_mask);
  sigaction (SIGINT, &sa, NULL);        /* no SA_RESTART */
  sigaction (SIGTERM, &sa, NULL);

  clock_gettime (CLOCK_MONOTONIC, &next);
  while (!watch_stop) {
    char *text = watch_fetch (socket_path, json, &waitmask);
    char stamp[32];
    time_t t = time (NULL);
    const char *c;

    if (text == NULL) {
      if (watch_stop)
        break;
      if (shown == 0)
        fprintf (stderr, "replctl: %s: %s (is the node running?)\n",
                 socket_path, errno == ENODATA ? "no answer"
                 : strerror (errno));
      else
        fprintf (stderr, "replctl: %s: %s: the node has stopped or no longer "
                 "answers; stopped watching\n", socket_path,
                 errno == ENODATA ? "no answer" : strerror (errno));
      status = EXIT_FAILURE;
      break;
    }
    if (strncmp (text, "error: ", 7) == 0) {
      fputs (text, stdout);
      free (text);
      status = EXIT_FAILURE;
      break;
    }

    strftime (stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", localtime (&t));
    if (json)
      fputs (text, stdout);
    else if (tty) {
      /* Home, then every line cleared to its end, then the rest of the
       * screen: redrawn in place, without the flicker of a full clear. */
      printf ("\033[H%s  every %gs  %s  (Ctrl-C to stop)\033[K\n\033[K\n",
              socket_path, interval, stamp);
      for (c = text; *c; c++) {
        if (*c == '\n')
          fputs ("\033[K", stdout);
        putchar (*c);
      }
      fputs ("\033[J", stdout);
    }
    else
      printf ("%s%s  %s\n%s", shown ? "\n" : "", socket_path, stamp, text);
    fflush (stdout);
    free (text);
    shown++;

    next.tv_nsec += step_ns % 1000000000LL;
    next.tv_sec += step_ns / 1000000000LL + next.tv_nsec / 1000000000L;
    next.tv_nsec %= 1000000000L;
    watch_sleep (&next, &waitmask);
  }
  return status;
}

/* Open the node's disk read-only to learn its size and kind.  Errors
 * name the configuration file and node, as the plugin's do. */
static int
open_disk (const char *config_path, const struct repl_node_cfg *n,
           uint64_t *size, bool *is_block)
{
  struct stat st;
  int fd;

  fd = open (n->nc_disk, O_RDONLY | O_CLOEXEC);
  if (fd == -1) {
    fprintf (stderr, "replctl: %s: node %s: disk %s: %s\n", config_path,
             n->nc_name, n->nc_disk, strerror (errno));
    return -1;
  }
  if (fstat (fd, &st) == -1) {
    fprintf (stderr, "replctl: %s: node %s: disk %s: fstat: %s\n",
             config_path, n->nc_name, n->nc_disk, strerror (errno));
    goto err;
  }
  if (S_ISBLK (st.st_mode)) {
    if (ioctl (fd, BLKGETSIZE64, size) == -1) {
      fprintf (stderr, "replctl: %s: node %s: disk %s: BLKGETSIZE64: %s\n",
               config_path, n->nc_name, n->nc_disk, strerror (errno));
      goto err;
    }
    *is_block = true;
  }
  else if (S_ISREG (st.st_mode)) {
    *size = st.st_size;
    *is_block = false;
  }
  else {
    fprintf (stderr, "replctl: %s: node %s: disk %s: not a regular file "
             "or block device\n", config_path, n->nc_name, n->nc_disk);
    goto err;
  }
  if (*size == 0) {
    fprintf (stderr, "replctl: %s: node %s: disk %s: size is 0 bytes\n",
             config_path, n->nc_name, n->nc_disk);
    goto err;
  }
  return fd;

 err:
  close (fd);
  return -1;
}

/* The geometry new metadata gets, as the node itself would make it. */
static void
config_geometry (const struct repl_config *cfg, struct md_geometry *g)
{
  g->mg_granularity = cfg->cf_bitmap_granularity;
  g->mg_al_extent_size = cfg->cf_al_extent_size;
  g->mg_al_extents = cfg->cf_al_extents;
}

/* Where a node's metadata lives, as the node finds it: `meta: PATH`,
 * by default the disk's path + ".meta" (only for a disk that is a regular
 * file), or `meta: internal` at the end of the disk (*base, and *size
 * becomes the volume in front of it).  Returns a new string, or NULL
 * after printing why. */
static char *
md_path_for_node (const char *config_path, const struct repl_config *cfg,
                  const struct repl_node_cfg *n, bool disk_is_block,
                  uint64_t *size, uint64_t *base)
{
  char *path;

  *base = 0;
  if (n->nc_meta_internal) {
    struct md_params p;
    char err[256];

    md_params_init (&p, n->nc_id, *size);
    config_geometry (cfg, &p.pa_geom);
    if (md_internal_place (*size, &p.pa_geom, base, err, sizeof err) == -1) {
      fprintf (stderr, "replctl: %s: node %s: disk %s: meta: internal: "
               "%s\n", config_path, n->nc_name, n->nc_disk, err);
      return NULL;
    }
    *size = p.pa_geom.mg_size;
    path = strdup (n->nc_disk);
  }
  else {
    if (disk_is_block && n->nc_meta_default) {
      fprintf (stderr, "replctl: %s: node %s: disk %s is a block device: "
               "say where its metadata goes (meta: PATH, or meta: "
               "internal)\n", config_path, n->nc_name, n->nc_disk);
      return NULL;
    }
    path = strdup (n->nc_meta);
  }
  if (path == NULL)
    perror ("strdup");
  return path;
}

/* A node that answers on its control socket is running: its metadata is
 * not ours to rewrite. */
static bool
node_is_running (const struct repl_node_cfg *n)
{
  int fd = sock_connect_unix (n->nc_control);

  if (fd == -1)
    return false;
  close (fd);
  return true;
}

/* Make a new file's directory entry durable. */
static int
sync_parent_dir (const char *path)
{
  CLEANUP_FREE char *copy = strdup (path);
  int fd, r;

  if (copy == NULL)
    return -1;
  fd = open (dirname (copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd == -1)
    return -1;
  r = fsync (fd);
  close (fd);
  return r;
}

static int
cmd_create_md (const char *config_path, const struct repl_config *cfg,
               const struct repl_node_cfg *n, bool force, bool in_sync)
{
  CLEANUP_FREE char *path = NULL;
  CLEANUP_CLOSE int disk_fd = -1;
  struct md_params p;
  struct md md;
  uint64_t size, base;
  bool is_block, created = false;
  char err[512];
  size_t i, npeers = 0;
  int fd;

  if (node_is_running (n)) {
    fprintf (stderr, "replctl: %s: node %s is running (its control socket "
             "%s answers); stop it before create-md\n", config_path,
             n->nc_name, n->nc_control);
    return EXIT_FAILURE;
  }
  disk_fd = open_disk (config_path, n, &size, &is_block);
  if (disk_fd == -1)
    return EXIT_FAILURE;
  path = md_path_for_node (config_path, cfg, n, is_block, &size, &base);
  if (path == NULL)
    return EXIT_FAILURE;
  if (md_look_before_create (config_path, cfg, n, disk_fd, size, path, base,
                             force, in_sync) == -1)
    return EXIT_FAILURE;

  /* Every other node of the configuration gets a peer slot, in the order
   * of the file; the rest stay free for nodes added later. */
  md_params_init (&p, n->nc_id, size);
  config_geometry (cfg, &p.pa_geom);
  for (i = 0; i < cfg->cf_nnodes; ++i)
    if (cfg->cf_nodes[i].nc_id != n->nc_id)
      p.pa_peer_ids[npeers++] = cfg->cf_nodes[i].nc_id;
  if (in_sync) {
    p.pa_in_sync = true;
    p.pa_current_uuid = uuid_in_sync_value (cfg->cf_resource, size);
  }
  else
    p.pa_current_uuid = UUID_JUST_CREATED;  /* no data yet */

  fd = open (path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd >= 0)
    created = true;
  else if (errno == EEXIST)
    fd = open (path, O_RDWR | O_CLOEXEC);
  if (fd == -1) {
    fprintf (stderr, "replctl: %s: %s\n", path, strerror (errno));
    return EXIT_FAILURE;
  }
  if (md_create (&md, fd, base, &p, force, err, sizeof err) == -1) {
    if (errno == EEXIST)
      fprintf (stderr, "replctl: %s: %s; give --force to overwrite it\n",
               path, err);
    else
      fprintf (stderr, "replctl: %s: %s\n", path, err);
    close (fd);
    if (created)
      unlink (path);
    return EXIT_FAILURE;
  }
  md_close (&md);
  if (close (fd) == -1) {
    fprintf (stderr, "replctl: %s: close: %s\n", path, strerror (errno));
    return EXIT_FAILURE;
  }
  if (created && sync_parent_dir (path) == -1) {
    fprintf (stderr, "replctl: %s: fsync of its directory: %s\n", path,
             strerror (errno));
    return EXIT_FAILURE;
  }

  printf ("%s: metadata for node %s (id %u) of %s, %" PRIu64 " bytes, "
          "%zu peer%s; %s\n", path, n->nc_name, n->nc_id, cfg->cf_resource,
          size, npeers, npeers == 1 ? "" : "s",
          in_sync ? "disks declared in sync, no initial resync"
                  : "every block out of sync with every peer");
  return EXIT_SUCCESS;
}

static int
cmd_dump_md (const char *config_path, const struct repl_config *cfg,
             const struct repl_node_cfg *n)
{
  CLEANUP_FREE char *path = NULL;
  CLEANUP_CLOSE int disk_fd = -1;
  CLEANUP_CLOSE int fd = -1;
  struct md md;
  uint64_t size, base;
  bool is_block;
  char err[512];
  int status = EXIT_SUCCESS;

  disk_fd = open_disk (config_path, n, &size, &is_block);
  if (disk_fd == -1)
    return EXIT_FAILURE;
  path = md_path_for_node (config_path, cfg, n, is_block, &size, &base);
  if (path == NULL)
    return EXIT_FAILURE;
  fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd == -1) {
    fprintf (stderr, "replctl: %s: %s%s\n", path, strerror (errno),
             errno == ENOENT ? " (create it with replctl create-md)" : "");
    return EXIT_FAILURE;
  }
  if (md_load (&md, fd, base, MD_ANY_NODE, 0, err, sizeof err) == -1) {
    fprintf (stderr, "replctl: %s: %s\n", path, err);
    return EXIT_FAILURE;
  }
  printf ("metadata: %s\n", path);
  if (md_dump (&md, stdout, err, sizeof err) == -1) {
    fprintf (stderr, "replctl: %s: %s\n", path, err);
    status = EXIT_FAILURE;
  }
  /* Shown whatever it says; but a node would refuse to start on it.
   * External metadata may say less than the disk holds: a disk grown
   * for a resize that has not run yet (server/resize.c). */
  else if (md_check (&md, n->nc_id, n->nc_meta_internal ? size : 0,
                     err, sizeof err) == -1) {
    fflush (stdout);
    fprintf (stderr, "replctl: %s: %s (node %s, disk %s)\n", path, err,
             n->nc_name, n->nc_disk);
    status = EXIT_FAILURE;
  }
  else if (md.md_super.ms_geom.mg_size > size) {
    fflush (stdout);
    fprintf (stderr, "replctl: %s: the volume has %" PRIu64 " bytes, but "
             "disk %s only %" PRIu64 " (node %s)\n", path,
             md.md_super.ms_geom.mg_size, n->nc_disk, size, n->nc_name);
    status = EXIT_FAILURE;
  }
  md_close (&md);
  return status;
}

/* role, quorum, dstate [PEER], cstate [PEER]: one line to the node,
 * its one-word answers to stdout (drbdadm role, dstate, cstate). */
static int
cmd_query (const char *socket_path, const char *config_path,
           const char *node_name, const char *command, int nargs,
           char **args)
{
  struct repl_config cfg;
  const struct repl_node_cfg *n;
  bool takes_peer = command[0] == 'd' || command[0] == 'c';
  char line[128];
  int status;

  if (nargs > (takes_peer ? 1 : 0) ||
      (nargs == 1 && (args[0][0] == '-' || strlen (args[0]) > 63 ||
                      strpbrk (args[0], " \t\n") != NULL))) {
    fprintf (stderr, "replctl: %s: unexpected '%s'%s\n", command,
             args[nargs > 1 ? 1 : 0],
             takes_peer ? " (give at most a peer's name)" : "");
    usage (stderr, EXIT_FAILURE);
  }
  snprintf (line, sizeof line, "%s%s%s\n", command, nargs ? " " : "",
            nargs ? args[0] : "");
  if (socket_path != NULL)
    return cmd_request (socket_path, line);
  n = load_node (config_path, node_name, &cfg);
  status = cmd_request (n->nc_control, line);
  config_free (&cfg);
  return status;
}

int
main (int argc, char *argv[])
{
  static const struct option long_options[] = {
    { "socket", required_argument, NULL, 's' },
    { "config", required_argument, NULL, 'c' },
    { "node", required_argument, NULL, 'n' },
    { "help", no_argument, NULL, 'h' },
    { NULL },
  };
  const char *socket_path = NULL, *config_path = NULL, *node_name = NULL;
  const char *command;
  struct repl_config cfg;
  const struct repl_node_cfg *n;
  bool json = false, force = false, in_sync = false, watch = false;
  bool discard = false, stop = false;
  const char *peer_name = NULL;
  char events_args[64] = "";
  bool assume_clean = false;
  uint64_t resize_to = 0;
  double interval = WATCH_DEFAULT_S;
  int c, i, status;

  while ((c = getopt_long (argc, argv, "+s:c:n:h", long_options, NULL)) != -1) {
    switch (c) {
    case 's': socket_path = optarg; break;
    case 'c': config_path = optarg; break;
    case 'n': node_name = optarg; break;
    case 'h': usage (stdout, EXIT_SUCCESS);
    default: usage (stderr, EXIT_FAILURE);
    }
  }
  if (optind >= argc) {
    fprintf (stderr, "replctl: no command given\n");
    usage (stderr, EXIT_FAILURE);
  }
  command = argv[optind];

  /* Each command's own options, after it. */
  for (i = optind + 1; i < argc; i++) {
    if (strcmp (command, "status") == 0 && strcmp (argv[i], "--json") == 0)
      json = true;
    else if (strcmp (command, "status") == 0 &&
             (strcmp (argv[i], "--watch") == 0 ||
              strncmp (argv[i], "--watch=", 8) == 0)) {
      const char *arg = argv[i][7] == '=' ? argv[i] + 8 : NULL;
      char *end;

      watch = true;
      /* The interval is optional: the next word, if it is a number. */
      if (arg == NULL && i + 1 < argc &&
          (argv[i + 1][0] == '.' ||
           (argv[i + 1][0] >= '0' && argv[i + 1][0] <= '9')))
        arg = argv[++i];
      if (arg != NULL) {
        errno = 0;
        interval = strtod (arg, &end);
        if (errno != 0 || end == arg || *end != '\0' ||
            !(interval >= WATCH_MIN_S && interval <= WATCH_MAX_S)) {
          fprintf (stderr, "replctl: status --watch: '%s': give seconds "
                   "from %g to %g\n", arg, WATCH_MIN_S, WATCH_MAX_S);
          usage (stderr, EXIT_FAILURE);
        }
      }
    }
    else if ((strcmp (command, "create-md") == 0 ||
              strcmp (command, "primary") == 0) &&
             strcmp (argv[i], "--force") == 0)
      force = true;
    else if (strcmp (command, "connect") == 0 &&
             strcmp (argv[i], "--discard-my-data") == 0)
      discard = true;
    else if (strcmp (command, "verify") == 0 &&
             strcmp (argv[i], "--stop") == 0)
      stop = true;
    else if ((strcmp (command, "connect") == 0 ||
              strcmp (command, "disconnect") == 0 ||
              strcmp (command, "pause-sync") == 0 ||
              strcmp (command, "resume-sync") == 0 ||
              strcmp (command, "invalidate-remote") == 0) &&
             argv[i][0] != '-' && peer_name == NULL)
      peer_name = argv[i];
    else if (strcmp (command, "create-md") == 0 &&
             strcmp (argv[i], "--in-sync") == 0)
      in_sync = true;
    else if (strcmp (command, "resize") == 0 &&
             strcmp (argv[i], "--assume-clean") == 0)
      assume_clean = true;
    else if (strcmp (command, "resize") == 0 &&
             strcmp (argv[i], "--size") == 0) {
      if (i + 1 >= argc || parse_size (argv[i + 1], &resize_to) == -1) {
        fprintf (stderr, "replctl: resize --size: give bytes, or a number "
                 "with K, M, G or T (powers of 1024)\n");
        usage (stderr, EXIT_FAILURE);
      }
      i++;
    }
    else if (strcmp (command, "events") == 0 &&
             (strcmp (argv[i], "--now") == 0 ||
              strcmp (argv[i], "--statistics") == 0 ||
              strcmp (argv[i], "--json") == 0)) {
      size_t l = strlen (events_args);
      snprintf (events_args + l, sizeof events_args - l, " %s", argv[i]);
    }
    else if (strcmp (command, "status") == 0 ||
             strcmp (command, "create-md") == 0 ||
             strcmp (command, "dump-md") == 0 ||
             strcmp (command, "verify") == 0 ||
             strcmp (command, "resync") == 0 ||
             strcmp (command, "invalidate") == 0 ||
             strcmp (command, "primary") == 0 ||
             strcmp (command, "secondary") == 0 ||
             strcmp (command, "connect") == 0 ||
             strcmp (command, "disconnect") == 0 ||
             strcmp (command, "pause-sync") == 0 ||
             strcmp (command, "resume-sync") == 0 ||
             strcmp (command, "invalidate-remote") == 0 ||
             strcmp (command, "adjust") == 0 ||
             strcmp (command, "resume-io") == 0 ||
             strcmp (command, "outdate") == 0 ||
             strcmp (command, "down") == 0 ||
             strcmp (command, "resize") == 0 ||
             strcmp (command, "events") == 0) {
      fprintf (stderr, "replctl: %s: unknown option '%s'\n", command,
               argv[i]);
      usage (stderr, EXIT_FAILURE);
    }
  }

  if (strcmp (command, "status") == 0) {
    if (socket_path != NULL)
      return watch ? cmd_status_watch (socket_path, json, interval)
                   : cmd_status (socket_path, json);
    if (config_path == NULL) {
      fprintf (stderr, "replctl: give -s SOCKET, or -c CONFIG and -n NODE\n");
      usage (stderr, EXIT_FAILURE);
    }
    n = load_node (config_path, node_name, &cfg);
    status = watch ? cmd_status_watch (n->nc_control, json, interval)
                   : cmd_status (n->nc_control, json);
    config_free (&cfg);
    return status;
  }
  if (strcmp (command, "create-md") == 0 || strcmp (command, "dump-md") == 0) {
    if (socket_path != NULL) {
      fprintf (stderr, "replctl: %s works on the configuration, not a "
               "socket: give -c CONFIG and -n NODE\n", command);
      usage (stderr, EXIT_FAILURE);
    }
    n = load_node (config_path, node_name, &cfg);
    if (strcmp (command, "create-md") == 0)
      status = cmd_create_md (config_path, &cfg, n, force, in_sync);
    else
      status = cmd_dump_md (config_path, &cfg, n);
    config_free (&cfg);
    return status;
  }
  if (strcmp (command, "role") == 0 || strcmp (command, "quorum") == 0 ||
      strcmp (command, "dstate") == 0 || strcmp (command, "cstate") == 0)
    return cmd_query (socket_path, config_path, node_name, command,
                      argc - optind - 1, argv + optind + 1);
  /* DRBD's way of ending a split brain by hand, on the node whose
   * changes are to go: the same as invalidate. */
  if (strcmp (command, "connect") == 0 && discard) {
    if (peer_name != NULL) {
      fprintf (stderr, "replctl: connect --discard-my-data takes no peer "
               "(it discards this node's data for all of them)\n");
      usage (stderr, EXIT_FAILURE);
    }
    command = "invalidate";
  }
  /* The commands on one peer. */
  if (strcmp (command, "connect") == 0 ||
      strcmp (command, "disconnect") == 0 ||
      strcmp (command, "pause-sync") == 0 ||
      strcmp (command, "resume-sync") == 0 ||
      strcmp (command, "invalidate-remote") == 0) {
    char line[160];

    if (peer_name == NULL) {
      fprintf (stderr, "replctl: %s: give the peer's name\n", command);
      usage (stderr, EXIT_FAILURE);
    }
    snprintf (line, sizeof line, "%s %.100s\n", command, peer_name);
    if (socket_path != NULL)
      return cmd_request (socket_path, line);
    n = load_node (config_path, node_name, &cfg);
    status = cmd_request (n->nc_control, line);
    config_free (&cfg);
    return status;
  }
  if (strcmp (command, "resize") == 0) {
    char line[128];

    snprintf (line, sizeof line, "resize%s", assume_clean
              ? " --assume-clean" : "");
    if (resize_to != 0) {
      size_t l = strlen (line);
      snprintf (line + l, sizeof line - l, " --size %" PRIu64, resize_to);
    }
    strcat (line, "\n");
    if (socket_path != NULL)
      return cmd_request (socket_path, line);
    n = load_node (config_path, node_name, &cfg);
    status = cmd_request (n->nc_control, line);
    config_free (&cfg);
    return status;
  }
  if (strcmp (command, "verify") == 0 || strcmp (command, "resync") == 0 ||
      strcmp (command, "invalidate") == 0 ||
      strcmp (command, "primary") == 0 || strcmp (command, "secondary") == 0 ||
      strcmp (command, "adjust") == 0 || strcmp (command, "resume-io") == 0 ||
      strcmp (command, "outdate") == 0 || strcmp (command, "down") == 0 ||
      strcmp (command, "events") == 0) {
    char line[128];

    snprintf (line, sizeof line, "%s%s%s%s\n", command,
              force ? " --force" : "", stop ? " --stop" : "", events_args);
    if (socket_path != NULL)
      return cmd_request (socket_path, line);
    n = load_node (config_path, node_name, &cfg);
    status = cmd_request (n->nc_control, line);
    config_free (&cfg);
    return status;
  }
  fprintf (stderr, "replctl: unknown command '%s'\n", command);
  usage (stderr, EXIT_FAILURE);
}
