/* nbdrepl: replctl — talk to a node's control socket.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 *   replctl -s /run/nbdrepl/r0-alpha.sock status [--json]
 *   replctl -c r0.yaml -n alpha status [--json]
 */
#include <config.h>

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "repl-config.h"
#include "sockets.h"

#define REPLY_TIMEOUT_MS 10000

static void usage (FILE *fp, int status) __attribute__ ((noreturn));

static void
usage (FILE *fp, int status)
{
  fprintf (fp,
           "usage: replctl (-s SOCKET | -c CONFIG -n NODE) COMMAND\n"
           "\n"
           "commands:\n"
           "  status [--json]   roles, disk and connection states, resync progress\n"
           "\n"
           "options:\n"
           "  -s, --socket=PATH    the node's control socket\n"
           "  -c, --config=FILE    the resource configuration (YAML)\n"
           "  -n, --node=NAME      the node in CONFIG whose socket to use\n"
           "  -h, --help           this text\n"
           "\n"
           "See replctl(8).\n");
  exit (status);
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
  char cmd[256], *socket_copy = NULL;
  size_t total = 0;
  int c, fd, i, status = 0;
  char first[8] = "";

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
  if (strcmp (argv[optind], "status") != 0) {
    fprintf (stderr, "replctl: unknown command '%s'\n", argv[optind]);
    usage (stderr, EXIT_FAILURE);
  }
  for (i = optind + 1; i < argc; i++)
    if (strcmp (argv[i], "--json") != 0) {
      fprintf (stderr, "replctl: status: unknown option '%s'\n", argv[i]);
      usage (stderr, EXIT_FAILURE);
    }

  if (socket_path == NULL) {
    struct repl_config cfg;
    const struct repl_node_cfg *n;
    char err[512];

    if (config_path == NULL || node_name == NULL) {
      fprintf (stderr, "replctl: give -s SOCKET, or -c CONFIG and -n NODE\n");
      usage (stderr, EXIT_FAILURE);
    }
    if (config_load (config_path, &cfg, err, sizeof err) == -1) {
      fprintf (stderr, "replctl: %s\n", err);
      exit (EXIT_FAILURE);
    }
    n = config_find_node (&cfg, node_name);
    if (n == NULL) {
      fprintf (stderr, "replctl: %s: no node named '%s'\n", config_path,
               node_name);
      exit (EXIT_FAILURE);
    }
    socket_copy = strdup (n->nc_control);
    config_free (&cfg);
    if (socket_copy == NULL) {
      perror ("strdup");
      exit (EXIT_FAILURE);
    }
    socket_path = socket_copy;
  }

  snprintf (cmd, sizeof cmd, "status%s\n",
            argc - optind > 1 ? " --json" : "");

  fd = sock_connect_unix (socket_path);
  if (fd == -1) {
    fprintf (stderr, "replctl: %s: %s (is the node running?)\n",
             socket_path, strerror (errno));
    exit (EXIT_FAILURE);
  }
  if (sock_write_full (fd, cmd, strlen (cmd), REPLY_TIMEOUT_MS) == -1) {
    fprintf (stderr, "replctl: %s: write: %s\n", socket_path,
             strerror (errno));
    exit (EXIT_FAILURE);
  }
  for (;;) {
    char buf[4096];
    ssize_t r = read (fd, buf, sizeof buf);

    if (r == -1) {
      if (errno == EINTR)
        continue;
      fprintf (stderr, "replctl: %s: read: %s\n", socket_path,
               strerror (errno));
      exit (EXIT_FAILURE);
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
  free (socket_copy);
  if (total == 0) {
    fprintf (stderr, "replctl: %s: no answer\n", socket_path);
    status = EXIT_FAILURE;
  }
  else if (strncmp (first, "error: ", 7) == 0)
    status = EXIT_FAILURE;
  return status;
}
