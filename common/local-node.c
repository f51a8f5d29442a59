/* nbdrepl: which node of a configuration this machine is.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * Without node= (the plugin) or -n (replctl), the node is found by
 * host name, so that one unit file, nbdrepl@RESOURCE.service, and one
 * configuration file serve every machine.
 */
#include <config.h>

#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>

#include "local-node.h"

const struct repl_node_cfg *
config_find_local_node (const struct repl_config *cfg,
                        char *err, size_t errlen)
{
  const struct repl_node_cfg *n;
  struct utsname u;
  char label[sizeof u.nodename];
  size_t i, used;

  if (uname (&u) == -1) {
    snprintf (err, errlen, "uname: %m");
    return NULL;
  }
  n = config_find_node (cfg, u.nodename);
  if (n != NULL)
    return n;
  snprintf (label, sizeof label, "%.*s", (int) strcspn (u.nodename, "."),
            u.nodename);
  n = config_find_node (cfg, label);
  if (n != NULL)
    return n;

  used = snprintf (err, errlen, "%s: no node is named as this machine "
                   "(host name %s) and no node= or -n was given (nodes:",
                   cfg->cf_path, u.nodename);
  for (i = 0; i < cfg->cf_nnodes && used < errlen; i++)
    used += snprintf (err + used, errlen - used, " %s",
                      cfg->cf_nodes[i].nc_name);
  if (used < errlen)
    snprintf (err + used, errlen - used, ")");
  return NULL;
}
