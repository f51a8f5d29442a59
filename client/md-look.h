/* nbdrepl: what replctl create-md looks at before it writes (md-look.c).
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 */
#ifndef NBDREPL_MD_LOOK_H
#define NBDREPL_MD_LOOK_H

#include <stdbool.h>
#include <stdint.h>

#include "repl-config.h"

/* Before create-md writes the metadata of node n at base in md_path
 * (the volume in front of it: size bytes of disk_fd): -1 after saying
 * why when it must not without --force (internal metadata over a
 * filesystem or partition table), else 0, after any warning about
 * --in-sync on a disk with data. */
extern int md_look_before_create (const char *config_path,
                                  const struct repl_config *cfg,
                                  const struct repl_node_cfg *n, int disk_fd,
                                  uint64_t size, const char *md_path,
                                  uint64_t base, bool force, bool in_sync);

#endif /* NBDREPL_MD_LOOK_H */
