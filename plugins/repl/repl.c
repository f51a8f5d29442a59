/* nbdrepl: the nbdkit repl plugin — glue between nbdkit and the engine.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 *   nbdkit repl config=r0.yaml node=alpha [role=primary]
 *
 * Everything that decides anything lives in server/; this file only
 * maps nbdkit's parameters, lifecycle and callbacks onto it.
 */
#include <config.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NBDKIT_API_VERSION 2
#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL
#include <nbdkit-plugin.h>

#include "engine.h"
#include "local-node.h"
#include "log.h"
#include "repl-config.h"
#include "repl-log.h"

/* Largest request we advertise; larger ones are split anyway. */
#define REPL_MAX_REQUEST (32u << 20)

static char *repl_config_path;      /* config= (absolute) */
static char *repl_node_name;        /* node= */
static bool repl_primary;           /* role=primary */
static bool repl_insecure;          /* insecure-permissions=true */
static struct repl_node *repl_node;

/* ---- parameters ----------------------------------------------------- */

static void
repl_load (void)
{
  log_set_sink (repl_log_sink);
}

static void
repl_unload (void)
{
  free (repl_config_path);
  free (repl_node_name);
}

static int
repl_config (const char *key, const char *value)
{
  if (strcmp (key, "config") == 0) {
    free (repl_config_path);
    repl_config_path = nbdkit_absolute_path (value);
    if (repl_config_path == NULL)
      return -1;
  }
  else if (strcmp (key, "node") == 0) {
    free (repl_node_name);
    repl_node_name = strdup (value);
    if (repl_node_name == NULL) {
      nbdkit_error ("strdup: %m");
      return -1;
    }
  }
  else if (strcmp (key, "role") == 0) {
    if (strcmp (value, "primary") == 0)
      repl_primary = true;
    else if (strcmp (value, "secondary") == 0)
      repl_primary = false;
    else {
      nbdkit_error ("role=%s: expected primary or secondary", value);
      return -1;
    }
  }
  else if (strcmp (key, "log-file") == 0) {
    if (repl_log_open_file (value) == -1)
      return -1;
  }
  else if (strcmp (key, "insecure-permissions") == 0) {
    int r = nbdkit_parse_bool (value);

    if (r == -1)
      return -1;
    repl_insecure = r;
  }
  else {
    nbdkit_error ("unknown parameter '%s' (expected config, node, role, "
                  "log-file, insecure-permissions)", key);
    return -1;
  }
  return 0;
}

/* Without node=, the node named as this machine (common/local-node.c). */
static int
repl_pick_node (void)
{
  const struct repl_node_cfg *n;
  struct repl_config cfg;
  char err[1024];

  if (config_load (repl_config_path, &cfg, err, sizeof err) == -1) {
    log_error ("%s", err);
    return -1;
  }
  n = config_find_local_node (&cfg, err, sizeof err);
  if (n == NULL)
    log_error ("%s", err);
  else if ((repl_node_name = strdup (n->nc_name)) == NULL)
    log_error ("strdup: %m");
  config_free (&cfg);
  return repl_node_name ? 0 : -1;
}

static int
repl_config_complete (void)
{
  if (repl_config_path == NULL) {
    nbdkit_error ("you must give config=FILE (see nbdkit-repl-plugin(1))");
    return -1;
  }
  if (repl_node_name == NULL)
    return repl_pick_node ();
  return 0;
}

#define repl_config_help \
  "config=<FILE>     (required) The resource configuration (YAML).\n" \
  "node=<NAME>       Which node of the configuration this is\n" \
  "                  (default: the one named as this machine's host name).\n" \
  "role=primary      Start as the primary (default: secondary).\n" \
  "log-file=<FILE>   Append the plugin's messages to FILE, not stderr.\n" \
  "insecure-permissions=true  Start even if others can read the secret."

/* ---- lifecycle ------------------------------------------------------ */

static int
repl_get_ready (void)
{
  repl_node = engine_create (repl_config_path, repl_node_name, repl_primary,
                             repl_insecure);
  if (repl_node == NULL)
    return -1;
  engine_on_down (repl_node, nbdkit_shutdown);
  return 0;
}

static int
repl_after_fork (void)
{
  repl_log_watch_signals ();
  if (engine_start (repl_node) == -1) {
    log_error ("stopping: the node could not start (see above)");
    return -1;
  }
  return 0;
}

static void
repl_cleanup (void)
{
  repl_log_stop (repl_node != NULL && engine_down_requested (repl_node));
  engine_destroy (repl_node);
  repl_node = NULL;
}

/* ---- callbacks ------------------------------------------------------ */

static void *
repl_open (int readonly)
{
  if (engine_client_open (repl_node) == -1)
    return NULL;
  return repl_node;
}

static void
repl_close (void *handle)
{
  engine_client_close (handle);
}

static int64_t
repl_get_size (void *handle)
{
  uint64_t size = engine_size (handle);

  /* Only a diskless node can get here without a size. */
  if (size == 0) {
    nbdkit_error ("this node is diskless and has not reached a storage "
                  "node yet: the volume size is unknown");
    return -1;
  }
  return size;
}

static int
repl_block_size (void *handle, uint32_t *minimum, uint32_t *preferred,
                 uint32_t *maximum)
{
  *minimum = 1;
  *preferred = 4096;
  *maximum = REPL_MAX_REQUEST;
  return 0;
}

static int
repl_can_multi_conn (void *handle)
{
  /* One backing store behind every connection: a flush on any of them
   * makes every completed write durable everywhere. */
  return 1;
}

static int
repl_can_fua (void *handle)
{
  return NBDKIT_FUA_NATIVE;
}

static int
repl_can_true (void *handle)
{
  return 1;
}

static int
repl_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
            uint32_t flags)
{
  return engine_pread (handle, buf, count, offset);
}

static int
repl_pwrite (void *handle, const void *buf, uint32_t count, uint64_t offset,
             uint32_t flags)
{
  return engine_pwrite (handle, buf, count, offset,
                        flags & NBDKIT_FLAG_FUA);
}

static int
repl_flush (void *handle, uint32_t flags)
{
  return engine_flush (handle);
}

static int
repl_trim (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  return engine_trim (handle, count, offset, flags & NBDKIT_FLAG_FUA);
}

static int
repl_zero (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  return engine_zero (handle, count, offset, flags & NBDKIT_FLAG_MAY_TRIM,
                      flags & NBDKIT_FLAG_FUA);
}

static struct nbdkit_plugin plugin = {
  .name              = "repl",
  .longname          = "nbdrepl replicated block device",
  .version           = PACKAGE_VERSION,
  .load              = repl_load,
  .unload            = repl_unload,
  .config            = repl_config,
  .config_complete   = repl_config_complete,
  .config_help       = repl_config_help,
  .magic_config_key  = "config",
  .get_ready         = repl_get_ready,
  .after_fork        = repl_after_fork,
  .cleanup           = repl_cleanup,
  .open              = repl_open,
  .close             = repl_close,
  .get_size          = repl_get_size,
  .block_size        = repl_block_size,
  .can_write         = repl_can_true,
  .can_flush         = repl_can_true,
  .can_trim          = repl_can_true,
  .can_zero          = repl_can_true,
  .can_fua           = repl_can_fua,
  .can_multi_conn    = repl_can_multi_conn,
  .pread             = repl_pread,
  .pwrite            = repl_pwrite,
  .flush             = repl_flush,
  .trim              = repl_trim,
  .zero              = repl_zero,
  .errno_is_preserved = 1,
};

NBDKIT_REGISTER_PLUGIN (plugin)
