/* nbdrepl: replctl — talk to a node's control socket, and manage its
 * metadata while it is stopped.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 *   replctl -s /run/nbdrepl/r0-alpha.sock status [--json]
 *   replctl -c r0.yaml -n alpha status [--json]
 *   replctl -c r0.yaml -n alpha create-md [--force] [--in-sync]
 *   replctl -c r0.yaml -n alpha dump-md
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <linux/fs.h>

#include "cleanup.h"
#include "metadata.h"
#include "uuid-compare.h"
#include "repl-config.h"
#include "sockets.h"

#define REPLY_TIMEOUT_MS 10000

static void usage (FILE *fp, int status) __attribute__ ((noreturn));

static void
usage (FILE *fp, int status)
{
  fprintf (fp,
           "usage: replctl (-s SOCKET | -c CONFIG -n NODE) status [--json]\n"
           "       replctl -c CONFIG -n NODE create-md [--force] [--in-sync]\n"
           "       replctl -c CONFIG -n NODE dump-md\n"
           "\n"
           "commands:\n"
           "  status [--json]   roles, disk and connection states, resync progress\n"
           "  create-md         initialise the node's metadata (node stopped)\n"
           "      --force       overwrite metadata that is already there\n"
           "      --in-sync     declare the disks of all nodes identical\n"
           "  dump-md           print the node's metadata\n"
           "\n"
           "options:\n"
           "  -s, --socket=PATH    the node's control socket\n"
           "  -c, --config=FILE    the resource configuration (YAML)\n"
           "  -n, --node=NAME      the node in CONFIG\n"
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

  if (config_path == NULL || node_name == NULL) {
    fprintf (stderr, "replctl: give -c CONFIG and -n NODE\n");
    usage (stderr, EXIT_FAILURE);
  }
  if (config_load (config_path, cfg, err, sizeof err) == -1) {
    fprintf (stderr, "replctl: %s\n", err);
    exit (EXIT_FAILURE);
  }
  n = config_find_node (cfg, node_name);
  if (n == NULL) {
    fprintf (stderr, "replctl: %s: no node named '%s'\n", config_path,
             node_name);
    exit (EXIT_FAILURE);
  }
  return n;
}

static int
cmd_status (const char *socket_path, bool json)
{
  char cmd[64], first[8] = "";
  size_t total = 0;
  int fd, status = EXIT_SUCCESS;

  snprintf (cmd, sizeof cmd, "status%s\n", json ? " --json" : "");

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

/* Where a node's metadata lives: in a file next to its disk, named after
 * the disk with ".meta" appended (/srv/r0.img -> /srv/r0.img.meta).
 * That default is for a disk that is a regular file; a block device has
 * no such place beside it, so it is refused.  Returns a new string, or
 * NULL after printing why. */
static char *
md_path_for_node (const char *config_path, const struct repl_node_cfg *n,
                  bool disk_is_block)
{
  char *path;

  if (disk_is_block) {
    fprintf (stderr, "replctl: %s: node %s: disk %s is a block device; "
             "metadata in a file beside the disk is only for disks that "
             "are regular files\n", config_path, n->nc_name, n->nc_disk);
    return NULL;
  }
  if (asprintf (&path, "%s.meta", n->nc_disk) == -1) {
    perror ("asprintf");
    return NULL;
  }
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
  uint64_t size;
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
  path = md_path_for_node (config_path, n, is_block);
  if (path == NULL)
    return EXIT_FAILURE;

  /* Every other node of the configuration gets a peer slot, in the order
   * of the file; the rest stay free for nodes added later. */
  md_params_init (&p, n->nc_id, size);
  for (i = 0; i < cfg->cf_nnodes; ++i)
    if (cfg->cf_nodes[i].nc_id != n->nc_id)
      p.pa_peer_ids[npeers++] = cfg->cf_nodes[i].nc_id;
  if (in_sync) {
    p.pa_in_sync = true;
    p.pa_current_uuid = md_in_sync_uuid (cfg->cf_resource, size);
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
  if (md_create (&md, fd, 0, &p, force, err, sizeof err) == -1) {
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
cmd_dump_md (const char *config_path, const struct repl_node_cfg *n)
{
  CLEANUP_FREE char *path = NULL;
  CLEANUP_CLOSE int disk_fd = -1;
  CLEANUP_CLOSE int fd = -1;
  struct md md;
  uint64_t size;
  bool is_block;
  char err[512];
  int status = EXIT_SUCCESS;

  disk_fd = open_disk (config_path, n, &size, &is_block);
  if (disk_fd == -1)
    return EXIT_FAILURE;
  path = md_path_for_node (config_path, n, is_block);
  if (path == NULL)
    return EXIT_FAILURE;
  fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd == -1) {
    fprintf (stderr, "replctl: %s: %s%s\n", path, strerror (errno),
             errno == ENOENT ? " (create it with replctl create-md)" : "");
    return EXIT_FAILURE;
  }
  if (md_load (&md, fd, 0, MD_ANY_NODE, 0, err, sizeof err) == -1) {
    fprintf (stderr, "replctl: %s: %s\n", path, err);
    return EXIT_FAILURE;
  }
  printf ("metadata: %s\n", path);
  if (md_dump (&md, stdout, err, sizeof err) == -1) {
    fprintf (stderr, "replctl: %s: %s\n", path, err);
    status = EXIT_FAILURE;
  }
  /* Shown whatever it says; but a node would refuse to start on it. */
  else if (md_check (&md, n->nc_id, size, err, sizeof err) == -1) {
    fflush (stdout);
    fprintf (stderr, "replctl: %s: %s (node %s, disk %s)\n", path, err,
             n->nc_name, n->nc_disk);
    status = EXIT_FAILURE;
  }
  md_close (&md);
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
  bool json = false, force = false, in_sync = false;
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
    else if (strcmp (command, "create-md") == 0 &&
             strcmp (argv[i], "--force") == 0)
      force = true;
    else if (strcmp (command, "create-md") == 0 &&
             strcmp (argv[i], "--in-sync") == 0)
      in_sync = true;
    else if (strcmp (command, "status") == 0 ||
             strcmp (command, "create-md") == 0 ||
             strcmp (command, "dump-md") == 0) {
      fprintf (stderr, "replctl: %s: unknown option '%s'\n", command,
               argv[i]);
      usage (stderr, EXIT_FAILURE);
    }
  }

  if (strcmp (command, "status") == 0) {
    if (socket_path != NULL)
      return cmd_status (socket_path, json);
    if (config_path == NULL || node_name == NULL) {
      fprintf (stderr, "replctl: give -s SOCKET, or -c CONFIG and -n NODE\n");
      usage (stderr, EXIT_FAILURE);
    }
    n = load_node (config_path, node_name, &cfg);
    status = cmd_status (n->nc_control, json);
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
      status = cmd_dump_md (config_path, n);
    config_free (&cfg);
    return status;
  }
  fprintf (stderr, "replctl: unknown command '%s'\n", command);
  usage (stderr, EXIT_FAILURE);
}
