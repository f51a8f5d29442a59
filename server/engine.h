/* nbdrepl: the replication engine's public interface.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * The engine knows nothing of nbdkit: plugins/repl/ is a thin adapter
 * that calls these functions.  Functions that can fail return -1 with
 * errno set, after logging the problem once (common/log.h).
 */
#ifndef NBDREPL_ENGINE_H
#define NBDREPL_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct repl_node;

/* Load the configuration, open the local disk, bind the replication and
 * control sockets.  No threads are started.  `primary` is the role at
 * start (the plugin's role=primary); `insecure` (insecure-permissions=
 * true) starts, with a warning, with a secret others can read. */
extern struct repl_node *engine_create (const char *config_path,
                                        const char *node_name,
                                        bool primary, bool insecure);

/* Start the background threads (listener, peers, resync, keepalive,
 * control socket).  Call after any fork. */
extern int engine_start (struct repl_node *node);

/* Stop every thread, close everything and free the node. */
extern void engine_destroy (struct repl_node *node);

/* How `replctl down` stops the process: the plugin passes
 * nbdkit_shutdown, which makes nbdkit unload the plugin (and so call
 * engine_destroy) and exit with status 0.  Until set, down is refused. */
extern void engine_on_down (struct repl_node *node, void (*stop) (void));

/* Did `replctl down` stop it?  (For the plugin's last log line.) */
extern bool engine_down_requested (struct repl_node *node);

extern uint64_t engine_size (struct repl_node *node);

/* May an NBD client use this node?  Only the primary serves clients;
 * a secondary answers -1 with errno EROFS after logging which node is
 * primary. */
extern int engine_check_client (struct repl_node *node);

/* A client connection opens (after engine_check_client allowed it, under
 * the same check) or closes: a primary is only demoted with none open. */
extern int engine_client_open (struct repl_node *node);
extern void engine_client_close (struct repl_node *node);

/* `replctl primary [--force]` / `replctl secondary`.  Returns 0, or -1
 * with the reason in err. */
extern int engine_set_role (struct repl_node *node, bool primary,
                            bool force, char *err, size_t errlen);

extern int engine_pread (struct repl_node *node, void *buf, uint32_t count,
                         uint64_t offset);
extern int engine_pwrite (struct repl_node *node, const void *buf,
                          uint32_t count, uint64_t offset, bool fua);
extern int engine_flush (struct repl_node *node);
extern int engine_trim (struct repl_node *node, uint32_t count,
                        uint64_t offset, bool fua);
extern int engine_zero (struct repl_node *node, uint32_t count,
                        uint64_t offset, bool may_trim, bool fua);

#endif /* NBDREPL_ENGINE_H */
