/* nbdrepl: the resource configuration file (YAML).
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * The same file is used on every node:
 *
 *   resource: r0                 # [A-Za-z0-9_.-], 1..63 chars
 *   protocol: C                  # A | B | C, default C
 *   net:                         # optional
 *     ping-interval: 1           # seconds between keepalive pings (0.1..60)
 *     ping-timeout: 5            # peer dead after this long silent (0.2..600)
 *     timeout: 6                 # peer dead when a write waits longer (0.2..600)
 *     connect-retry-max: 2       # max seconds between reconnect attempts (0.1..60)
 *   nodes:                       # 1..REPL_MAX_NODES entries
 *     - name: alpha              # [A-Za-z0-9_.-], 1..63 chars, unique
 *       id: 0                    # 0..REPL_MAX_NODE_ID, unique
 *       address: 10.0.0.1:7789   # host:port or '[v6addr]:port' (quoted:
 *                                #   a bare [ starts a YAML list), unique
 *       disk: /dev/vg/r0         # backing file or block device
 *       control: /run/nbdrepl/r0-alpha.sock   # optional
 *
 * Relative disk and control paths are taken relative to the directory
 * that holds the configuration file.  Every error names the file, the
 * line, the key and the offending value.
 */
#ifndef NBDREPL_REPL_CONFIG_H
#define NBDREPL_REPL_CONFIG_H

#include <stddef.h>

#define REPL_MAX_NODES    8
#define REPL_MAX_NODE_ID  31
#define REPL_NAME_MAX     63

#define REPL_CONTROL_DIR  "/run/nbdrepl"

struct repl_node_cfg {
  char *nc_name;
  unsigned nc_id;
  char *nc_address;             /* as written: "host:port" or "[v6]:port" */
  char *nc_host;                /* without brackets */
  char *nc_port;                /* decimal 1..65535 */
  char *nc_disk;                /* absolute path */
  char *nc_control;             /* absolute path; default
                                   REPL_CONTROL_DIR/RESOURCE-NAME.sock */
  int nc_line;                  /* line of the "- name:" entry, for messages */
};

struct repl_config {
  char *cf_path;                /* the file as given */
  char *cf_resource;
  char cf_protocol;             /* 'A', 'B' or 'C' */
  unsigned cf_ping_interval_ms;     /* default 1000 */
  unsigned cf_ping_timeout_ms;      /* default 5000 */
  unsigned cf_timeout_ms;           /* default 6000 */
  unsigned cf_connect_retry_max_ms; /* default 2000 */
  size_t cf_nnodes;
  struct repl_node_cfg cf_nodes[REPL_MAX_NODES];
};

/* Parse and validate the file.  *cfg need not be initialised.  On success
 * returns 0 and fills *cfg (free it with config_free).  On failure returns
 * -1 with errno set (open/read's errno, ENOMEM, or EINVAL for anything
 * wrong in the file), leaves *cfg zeroed and nothing allocated, and
 * writes one line into err (if errlen > 0), for example
 *   "r0.yaml:9: nodes[1] (beta): address: duplicate 127.0.0.1:7789, also used by alpha"
 *   "r0.yaml:4: unknown key 'protocl'"
 *   "r0.yaml: cannot open: No such file or directory"
 * Checked: YAML syntax; unknown and duplicate keys; required keys
 * (resource, nodes, and per node name, id, address, disk); types and
 * ranges of every value; unique node names, ids and addresses; address
 * syntax (host:port, [v6]:port, port 1..65535). */
extern int config_load (const char *path, struct repl_config *cfg,
                        char *err, size_t errlen);

extern void config_free (struct repl_config *cfg);

/* The node called name, or NULL. */
extern const struct repl_node_cfg *config_find_node (const struct repl_config *cfg,
                                                     const char *name);

/* The node with this id, or NULL. */
extern const struct repl_node_cfg *config_find_node_id (const struct repl_config *cfg,
                                                        unsigned id);

#endif /* NBDREPL_REPL_CONFIG_H */
