/* nbdrepl: the resource configuration file (YAML).
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * The same file is used on every node:
 *
 *   resource: r0                 # [A-Za-z0-9_.-], 1..63 chars
 *   protocol: C                  # A | B | C, default C
 *   quorum: majority             # majority | all | off; default majority
 *                                #   with 3 or more nodes, else off
 *   on-no-quorum: io-error       # io-error | suspend-io (default io-error)
 *   after-sb-0pri: disconnect    # split brain, no primary: disconnect |
 *                                #   discard-zero-changes | discard-least-changes
 *   after-sb-1pri: disconnect    # ... one primary: the same, or
 *                                #   discard-secondary
 *   auto-promote: true           # a secondary that is UpToDate, with no
 *                                #   primary connected, is promoted by
 *                                #   its first client (default true)
 *   net:                         # optional
 *     ping-interval: 1           # seconds between keepalive pings (0.1..60)
 *     ping-timeout: 5            # peer dead after this long silent (0.2..600)
 *     timeout: 6                 # peer dead when a write waits longer (0.2..600)
 *     connect-retry-max: 2       # max seconds between reconnect attempts (0.1..60)
 *     cork: true                 # hold small writes for the peer's next
 *                                #   answer, send them together (default true)
 *     sndbuf-size: 4M            # replication socket buffers, 16K..64M; the
 *     rcvbuf-size: 4M            #   kernel caps them at net.core.[wr]mem_max
 *   metadata:                    # optional; used when metadata is created
 *     bitmap-granularity: 4K     # bytes per dirty-bitmap bit, power of 2, 512..1M
 *     al-extent-size: 4M         # bytes per activity-log extent, power of 2,
 *                                #   64K..1G, >= bitmap-granularity
 *     al-extents: 1024           # activity-log slots, 1..65536
 *   resync:                      # optional
 *     resync-rate: 100M          # fixed rate, bytes/s; 0 = unthrottled
 *     c-min-rate: 10M            # dynamic controller, bytes/s: the rate while
 *     c-max-rate: 400M           #   application I/O is present / otherwise;
 *                                #   both or neither, not with resync-rate
 *     csums: false               # checksum-based resync (DRBD's csums-alg)
 *   nodes:                       # 1..REPL_MAX_NODES entries
 *     - name: alpha              # [A-Za-z0-9_.-], 1..63 chars, unique
 *       id: 0                    # 0..REPL_MAX_NODE_ID, unique
 *       address: 10.0.0.1:7789   # host:port or '[v6addr]:port' (quoted:
 *                                #   a bare [ starts a YAML list), unique
 *       disk: /dev/vg/r0         # backing file or block device
 *       meta: internal           # PATH | internal; default DISK.meta
 *       control: /run/nbdrepl/r0-alpha.sock   # optional
 *       tls-cert: alpha.crt      # with tls-ca: this node's certificate,
 *       tls-key: alpha.key       #   which must name it (CN or DNS SAN)
 *       metrics: 127.0.0.1:9942  # optional: Prometheus endpoint (HTTP,
 *                                #   GET /metrics), host:port as address;
 *                                #   off when not given
 *   secret: ...                  # or secret-file: PATH (peer-auth.c)
 *   data-integrity: crc32c       # crc32c | none (default none)
 *   tls: true                    # TLS 1.3 between the nodes (default
 *                                #   false); a pre-shared key derived
 *                                #   from the secret, or with
 *   tls-ca: ca.crt               #   the CA that signed every node's
 *   tls-cert: node.crt           #   certificate; these two are the
 *   tls-key: node.key            #   default for nodes without their own
 *
 * Sizes and rates are whole numbers of bytes with an optional suffix K,
 * M, G or T (powers of 1024; either case; "KiB" etc. too): 4096, 4K,
 * 4KiB.  Unlike DRBD, a plain number is bytes, not KiB.  A rate of at
 * most REPL_MAX_RATE bytes per second.
 *
 * Relative disk, meta and control paths are taken relative to the
 * directory that holds the configuration file.  Every error names the
 * file, the line, the key and the offending value.
 */
#ifndef NBDREPL_REPL_CONFIG_H
#define NBDREPL_REPL_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define REPL_MAX_NODES    8
#define REPL_MIN_SOCKBUF  (16u << 10)   /* net: sndbuf-size, rcvbuf-size */
#define REPL_MAX_SOCKBUF  (64u << 20)
#define REPL_DEFAULT_SOCKBUF (4u << 20)
#define REPL_SECRET_MIN   8     /* bytes of secret: */
#define REPL_SECRET_MAX   256
#define REPL_MAX_NODE_ID  31
#define REPL_NAME_MAX     63

#define REPL_CONTROL_DIR  "/run/nbdrepl"
#define REPL_META_SUFFIX  ".meta"       /* default meta: DISK.meta */
#define REPL_MAX_RATE     (UINT64_C (1) << 40)  /* 1 TiB/s */

/* Events that run a configured command (DRBD's handlers, HAST's exec). */
enum repl_handler {
  REPL_HANDLER_SPLIT_BRAIN,
  REPL_HANDLER_BEFORE_RESYNC_TARGET,
  REPL_HANDLER_AFTER_RESYNC_TARGET,
  REPL_HANDLER_FENCE_PEER,
  REPL_HANDLER_ROLE_CHANGE,
  REPL_HANDLER_NKEYS
};

/* What to do about a split brain found at connect (DRBD's after-sb-*). */
enum repl_sb_policy {
  REPL_SB_DISCONNECT = 0,       /* refuse; an operator decides */
  REPL_SB_DISCARD_ZERO_CHANGES, /* the side that changed nothing loses */
  REPL_SB_DISCARD_LEAST_CHANGES, /* the side that changed less loses */
  REPL_SB_DISCARD_SECONDARY,    /* (one primary) the secondary loses */
  REPL_SB_DISCARD_YOUNGER_PRIMARY, /* (no primary now) the node that
                                   became primary last loses */
};

/* read-balancing: where a diskless primary reads from. */
enum repl_read_balancing {
  REPL_READ_ROUND_ROBIN = 0,    /* the default */
  REPL_READ_LEAST_PENDING,      /* the storage node with the fewest
                                   requests in flight */
  REPL_READ_PREFER,             /* prefer-NODE: that one while it is
                                   UpToDate, round-robin otherwise */
};

enum repl_quorum {
  REPL_QUORUM_DEFAULT = 0,      /* not given: set by the loader */
  REPL_QUORUM_OFF,
  REPL_QUORUM_MAJORITY,         /* more than half of the nodes, this one
                                   included, are connected */
  REPL_QUORUM_ALL,
};

/* fencing (DRBD's): what losing a peer does to a Primary's writes.
 * dont-care: they go on at once.  resource-only and resource-and-stonith:
 * they are suspended until the fence-peer handler has told, by its exit
 * status, that the peer cannot have data newer than ours or take over
 * (see the plugin man page). */
enum repl_fencing {
  REPL_FENCING_DONT_CARE = 0,
  REPL_FENCING_RESOURCE_ONLY,
  REPL_FENCING_RESOURCE_AND_STONITH,
};

struct repl_node_cfg {
  char *nc_name;
  unsigned nc_id;
  char *nc_address;             /* as written: "host:port" or "[v6]:port" */
  char *nc_host;                /* without brackets */
  char *nc_port;                /* decimal 1..65535 */
  char *nc_disk;                /* absolute path; NULL if diskless */
  bool nc_diskless;             /* disk: none (a diskless client: no data,
                                   no metadata; nc_meta NULL too) */
  char *nc_control;             /* absolute path; default
                                   REPL_CONTROL_DIR/RESOURCE-NAME.sock */
  /* Where the node's metadata lives (metadata.h).  Exactly one of:
   * - meta: internal   nc_meta NULL, nc_meta_internal: at the end of
   *                    the disk (md_internal_place; the volume is smaller
   *                    than the disk);
   * - meta: PATH       nc_meta the absolute path, a file or a device;
   * - no meta key      nc_meta nc_disk + REPL_META_SUFFIX and
   *                    nc_meta_default.  That default only makes sense
   *                    for a disk that is a regular file; the loader does
   *                    not stat the disk, so refusing it for a block
   *                    device ("give meta: PATH or meta: internal") is
   *                    the engine's job.
   * nc_meta is never the disk of any node, and two nodes have the same
   * nc_meta only if they have the same nc_disk too (then they must be on
   * different machines). */
  char *nc_meta;
  bool nc_meta_internal;
  char *nc_tls_cert;            /* absolute paths, with tls-ca; else NULL */
  char *nc_tls_key;
  bool nc_meta_default;
  char *nc_metrics;             /* metrics: "host:port" as written, or
                                   NULL: no Prometheus endpoint */
  char *nc_metrics_host;        /* ... without brackets */
  char *nc_metrics_port;        /* ... decimal 1..65535 */
  int nc_line;                  /* line of the "- name:" entry, for messages */
};

struct repl_config {
  char *cf_path;                /* the file as given */
  char *cf_resource;
  char cf_protocol;             /* 'A', 'B' or 'C' */
  bool cf_auto_promote;         /* promote on the first client open */
  bool cf_two_primaries;        /* allow-two-primaries: a second node may
                                   be promoted while one is Primary
                                   (protocol C, two storage nodes) */
  bool cf_has_diskless;         /* a node has disk: none */
  bool cf_data_integrity;       /* data-integrity: crc32c */
  /* secret / secret-file: the shared secret that authenticates the
   * nodes to each other (peer-auth.c); cf_secret_len 0: none. */
  uint8_t cf_secret[REPL_SECRET_MAX];
  size_t cf_secret_len;
  char *cf_secret_path;         /* secret-file: that file; NULL: the
                                   secret is in the configuration file */
  unsigned cf_secret_mode;      /* the permission bits of the file that
                                   holds the secret (0: not from a file) */
  /* tls: true: TLS 1.3 on every replication connection (peer-tls.c).
   * With cf_tls_ca, certificates (then every node has nc_tls_cert and
   * nc_tls_key); without, a pre-shared key derived from the secret
   * (then cf_secret_len > 0). */
  bool cf_tls;
  bool cf_tls_allow_wildcard;   /* tls-allow-wildcard: a node's certificate
                                   may name it by a wildcard (*.r0.lan);
                                   default false */
  char *cf_control_group;       /* control-group: the control sockets'
                                   group (status for its members), or
                                   NULL */
  char *cf_tls_ca;              /* absolute path, or NULL */
  enum repl_read_balancing cf_read_balancing;
  unsigned cf_read_prefer_id;   /* REPL_READ_PREFER: that node's id */
  bool cf_al_updates;           /* metadata: al-updates (DRBD's): false
                                   keeps no activity log, and a crash
                                   means a full resync */
  enum repl_quorum cf_quorum;   /* never REPL_QUORUM_DEFAULT after load */
  char *cf_handlers[REPL_HANDLER_NKEYS]; /* commands (handler.c), or NULL */
  bool cf_on_no_quorum_suspend; /* suspend writes (else fail them) */
  enum repl_fencing cf_fencing; /* fencing: what losing a peer does to
                                   writes (role.c); default dont-care */
  unsigned cf_fencing_timeout_ms; /* a fence-peer handler still running
                                   after this has failed; default 60 s */
  enum repl_sb_policy cf_after_sb_0pri;   /* neither node primary */
  enum repl_sb_policy cf_after_sb_1pri;   /* one node primary */
  unsigned cf_ping_interval_ms;     /* default 1000 */
  unsigned cf_ping_timeout_ms;      /* default 5000 */
  unsigned cf_timeout_ms;           /* default 6000 */
  unsigned cf_connect_retry_max_ms; /* default 2000 */
  bool cf_cork;                     /* hold small writes for the next
                                       ACK (peer-send.c); default true */
  uint32_t cf_sndbuf_size;          /* the replication sockets' SO_SNDBUF */
  uint32_t cf_rcvbuf_size;          /* ... and SO_RCVBUF; both
                                       REPL_MIN_SOCKBUF..REPL_MAX_SOCKBUF,
                                       default REPL_DEFAULT_SOCKBUF */

  /* metadata: the geometry of a new metadata area (struct md_geometry).
   * An area keeps the geometry it was created with; these values are
   * what `replctl create-md` and a first start use. */
  uint32_t cf_bitmap_granularity;   /* bytes per dirty-bitmap bit: a power
                                       of 2, MD_MIN_GRANULARITY ..
                                       MD_MAX_GRANULARITY; default
                                       MD_DEFAULT_GRANULARITY (4 KiB) */
  uint32_t cf_al_extent_size;       /* bytes per activity-log extent: a
                                       power of 2, MD_MIN_AL_EXTENT_SIZE ..
                                       MD_MAX_AL_EXTENT_SIZE, and >=
                                       cf_bitmap_granularity; default
                                       MD_DEFAULT_AL_EXTENT_SIZE (4 MiB) */
  uint32_t cf_al_extents;           /* activity-log slots (DRBD's
                                       al-extents): 1 .. MD_MAX_AL_EXTENTS;
                                       default MD_DEFAULT_AL_EXTENTS (1024) */

  /* resync: how fast a resync runs.  At most one of the two modes:
   * - fixed: cf_resync_rate != 0, both c-rates 0;
   * - dynamic controller: cf_c_max_rate != 0 (then cf_c_min_rate != 0
   *   too, cf_c_min_rate <= cf_c_max_rate, and cf_resync_rate == 0):
   *   resync backs off to cf_c_min_rate while application I/O is
   *   present and runs up to cf_c_max_rate otherwise;
   * - neither (all three 0, the default): unthrottled. */
  uint64_t cf_resync_rate;          /* bytes/s, 0 .. REPL_MAX_RATE;
                                       0: no fixed rate */
  uint64_t cf_c_min_rate;           /* bytes/s, 1 .. REPL_MAX_RATE, or 0:
                                       controller off */
  uint64_t cf_c_max_rate;           /* bytes/s, 1 .. REPL_MAX_RATE, or 0:
                                       controller off */
  bool cf_csums;                    /* checksum-based resync: compare a
                                       digest of each dirty block and send
                                       only blocks that differ (DRBD's
                                       csums-alg; the digest is fixed, not
                                       configurable); default false */

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
 * syntax (host:port, [v6]:port, port 1..65535); powers of 2 and
 * al-extent-size >= bitmap-granularity; c-min-rate <= c-max-rate, both
 * or neither, and not with resync-rate; no metadata path that is a
 * disk path, and none shared by nodes with different disks.  Not
 * checked (nothing is opened or stat'ed): whether a disk exists or is
 * a block device. */
extern int config_load (const char *path, struct repl_config *cfg,
                        char *err, size_t errlen);

/* The same, on len bytes of YAML already in memory (the fuzzer's way
 * in): path is not read, only named in messages, and its directory is
 * where relative paths are taken from, as for config_load. */
extern int config_load_buffer (const char *path, const void *buf,
                               size_t len, struct repl_config *cfg,
                               char *err, size_t errlen);

extern void config_free (struct repl_config *cfg);

/* "split-brain", "role-change", ... */
extern const char *config_handler_name (enum repl_handler h);
extern const char *config_sb_policy_name (enum repl_sb_policy p);

/* The node called name, or NULL. */
extern const struct repl_node_cfg *config_find_node (const struct repl_config *cfg,
                                                     const char *name);

/* The node with this id, or NULL. */
extern const struct repl_node_cfg *config_find_node_id (const struct repl_config *cfg,
                                                        unsigned id);

#endif /* NBDREPL_REPL_CONFIG_H */
