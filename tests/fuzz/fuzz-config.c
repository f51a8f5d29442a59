/* nbdrepl: libFuzzer harness for the configuration loader
 * (common/repl-config.c).
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * Input: the YAML text, as is, given to config_load_buffer (the loader
 * on bytes in memory; config_load reads the file and does the same).
 * The file is named /r0.yaml, so relative paths resolve against "/".
 * A configuration that loads must have what repl-config.h promises: 1
 * to REPL_MAX_NODES nodes with unique names and ids, absolute paths,
 * ping-timeout > ping-interval, a geometry md_layout takes; a refusal
 * leaves cfg zeroed, sets errno and writes one line.
 */
#include <config.h>

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "metadata.h"
#include "repl-config.h"

static bool
is_zero (const void *p, size_t len)
{
  const uint8_t *b = p;

  for (size_t i = 0; i < len; i++)
    if (b[i] != 0)
      return false;
  return true;
}

static void
check_loaded (const struct repl_config *cfg)
{
  struct md_geometry g;
  struct md_layout l;
  char err[160];
  size_t i, j;

  FUZZ_CHECK (cfg->cf_resource != NULL);
  FUZZ_CHECK (strlen (cfg->cf_resource) >= 1 &&
              strlen (cfg->cf_resource) <= REPL_NAME_MAX);
  FUZZ_CHECK (cfg->cf_protocol == 'A' || cfg->cf_protocol == 'B' ||
              cfg->cf_protocol == 'C');
  FUZZ_CHECK (cfg->cf_quorum != REPL_QUORUM_DEFAULT);
  FUZZ_CHECK (cfg->cf_ping_timeout_ms > cfg->cf_ping_interval_ms);
  FUZZ_CHECK (cfg->cf_sndbuf_size >= REPL_MIN_SOCKBUF && cfg->cf_sndbuf_size <= REPL_MAX_SOCKBUF);
  FUZZ_CHECK (cfg->cf_rcvbuf_size >= REPL_MIN_SOCKBUF && cfg->cf_rcvbuf_size <= REPL_MAX_SOCKBUF);
  FUZZ_CHECK (cfg->cf_nnodes >= 1 && cfg->cf_nnodes <= REPL_MAX_NODES);
  FUZZ_CHECK (cfg->cf_resync_rate <= REPL_MAX_RATE &&
              cfg->cf_c_min_rate <= cfg->cf_c_max_rate &&
              cfg->cf_c_max_rate <= REPL_MAX_RATE);
  FUZZ_CHECK ((cfg->cf_c_min_rate == 0) == (cfg->cf_c_max_rate == 0));
  FUZZ_CHECK (cfg->cf_resync_rate == 0 || cfg->cf_c_max_rate == 0);

  /* The geometry of a new metadata area comes from here. */
  g = (struct md_geometry) {
    .mg_size = UINT64_C (1) << 30,
    .mg_granularity = cfg->cf_bitmap_granularity,
    .mg_al_extent_size = cfg->cf_al_extent_size,
    .mg_al_extents = cfg->cf_al_extents,
    .mg_al_ring = MD_DEFAULT_AL_RING,
    .mg_npeers = MD_DEFAULT_PEER_SLOTS,
  };
  FUZZ_CHECK (md_layout (&g, &l, err, sizeof err) == 0);

  for (i = 0; i < cfg->cf_nnodes; i++) {
    const struct repl_node_cfg *n = &cfg->cf_nodes[i];

    FUZZ_CHECK (n->nc_name != NULL && n->nc_address != NULL &&
                n->nc_host != NULL && n->nc_port != NULL);
    FUZZ_CHECK (n->nc_id <= REPL_MAX_NODE_ID);
    FUZZ_CHECK (n->nc_disk != NULL && n->nc_disk[0] == '/');
    FUZZ_CHECK (n->nc_control != NULL && n->nc_control[0] == '/');
    FUZZ_CHECK (n->nc_meta_internal == (n->nc_meta == NULL));
    FUZZ_CHECK (n->nc_meta == NULL || n->nc_meta[0] == '/');
    FUZZ_CHECK (atoi (n->nc_port) >= 1 && atoi (n->nc_port) <= 65535);
    FUZZ_CHECK (config_find_node (cfg, n->nc_name) == n);
    FUZZ_CHECK (config_find_node_id (cfg, n->nc_id) == n);
    for (j = 0; j < cfg->cf_nnodes; j++) {
      const struct repl_node_cfg *m = &cfg->cf_nodes[j];

      if (j == i)
        continue;
      FUZZ_CHECK (strcmp (n->nc_name, m->nc_name) != 0);
      FUZZ_CHECK (n->nc_id != m->nc_id);
      FUZZ_CHECK (strcmp (n->nc_address, m->nc_address) != 0);
      FUZZ_CHECK (n->nc_meta == NULL ||
                  strcmp (n->nc_meta, m->nc_disk) != 0);
    }
  }
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  struct repl_config cfg;
  char err[512];

  if (config_load_buffer ("/r0.yaml", data, size, &cfg,
                          err, sizeof err) == -1) {
    FUZZ_CHECK (errno == EINVAL || errno == ENOMEM || errno == EFBIG);
    FUZZ_CHECK (is_zero (&cfg, sizeof cfg));
    FUZZ_CHECK (strncmp (err, "/r0.yaml:", 9) == 0);
    FUZZ_CHECK (strchr (err, '\n') == NULL);
    return 0;
  }
  check_loaded (&cfg);
  config_free (&cfg);
  FUZZ_CHECK (is_zero (&cfg, sizeof cfg));
  config_free (&cfg);           /* safe twice */
  return 0;
}
