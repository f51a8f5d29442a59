/* nbdrepl: which node of a configuration this machine is (local-node.c).
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 */
#ifndef NBDREPL_LOCAL_NODE_H
#define NBDREPL_LOCAL_NODE_H

#include <stddef.h>

#include "repl-config.h"

/* The node whose name is this machine's host name (uname -n), or else
 * its first label (alpha for alpha.example.com), as DRBD picks the
 * "on HOST" section and the OCF agent its default node.  NULL, with the
 * reason in err (the host name and the nodes), when there is none. */
extern const struct repl_node_cfg *
config_find_local_node (const struct repl_config *cfg,
                        char *err, size_t errlen);

#endif /* NBDREPL_LOCAL_NODE_H */
