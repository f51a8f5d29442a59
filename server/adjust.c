/* nbdrepl: replctl adjust — apply a changed configuration file to the
 * running node, as drbdadm adjust does.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * The file is loaded and checked as at start; then every key is either
 * one that may change while the node runs (net timeouts and buffers,
 * resync rates and csums, quorum and on-no-quorum, the split-brain
 * policies, cork, data-integrity, auto-promote, read balancing, the
 * handlers), or one that may not (the resource, the nodes and their
 * addresses, disks, metadata and control sockets, the protocol, the
 * secret, TLS, al-updates, allow-two-primaries): a change to any of the latter refuses the
 * whole adjust, naming the key, and nothing changes.  The values are
 * stored one by one (atomically: the engine reads them without a
 * lock); net buffer sizes apply to new connections, the rest at once.
 * A replaced handler string is kept until the node stops, since a
 * handler may be starting with it.
 */
#include <config.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "internal.h"
#include "log.h"

struct change_buf {
  char *cb_out;
  size_t cb_len, cb_used;
  unsigned cb_n;
};

static void __attribute__ ((format (printf, 2, 3)))
note (struct change_buf *cb, const char *fmt, ...)
{
  va_list ap;
  int n;

  if (cb->cb_used >= cb->cb_len)
    return;
  if (cb->cb_n++ > 0)
    cb->cb_used += snprintf (cb->cb_out + cb->cb_used,
                             cb->cb_len - cb->cb_used, ", ");
  if (cb->cb_used >= cb->cb_len)
    return;
  va_start (ap, fmt);
  n = vsnprintf (cb->cb_out + cb->cb_used, cb->cb_len - cb->cb_used, fmt, ap);
  va_end (ap);
  if (n > 0)
    cb->cb_used += n;
}

static bool
same_str (const char *a, const char *b)
{
  return (a == NULL && b == NULL) || (a && b && strcmp (a, b) == 0);
}

/* The first key that may not change and did, or NULL. */
static const char *
fixed_key_changed (const struct repl_config *a, const struct repl_config *b,
                   char *buf, size_t len)
{
  size_t i;

  if (!same_str (a->cf_resource, b->cf_resource))
    return "resource";
  if (a->cf_protocol != b->cf_protocol)
    return "protocol (both nodes must change it together: stop the "
           "resource, change it everywhere, start it)";
  if (a->cf_secret_len != b->cf_secret_len ||
      memcmp (a->cf_secret, b->cf_secret, a->cf_secret_len) != 0 ||
      !same_str (a->cf_secret_path, b->cf_secret_path))
    return "secret / secret-file";
  if (a->cf_tls != b->cf_tls || !same_str (a->cf_tls_ca, b->cf_tls_ca))
    return "tls / tls-ca";
  if (a->cf_al_updates != b->cf_al_updates)
    return "metadata.al-updates";
  if (a->cf_two_primaries != b->cf_two_primaries)
    return "allow-two-primaries (both nodes must change it together: "
           "stop the resource, change it everywhere, start it)";
  if (a->cf_nnodes != b->cf_nnodes)
    return "nodes (a node added or removed: not at run time yet; restart "
           "the nodes one at a time)";
  for (i = 0; i < a->cf_nnodes; i++) {
    const struct repl_node_cfg *x = &a->cf_nodes[i], *y = &b->cf_nodes[i];
    const char *what = NULL;

    if (!same_str (x->nc_name, y->nc_name) || x->nc_id != y->nc_id)
      what = "name / id";
    else if (!same_str (x->nc_address, y->nc_address))
      what = "address";
    else if (!same_str (x->nc_disk, y->nc_disk) ||
             x->nc_diskless != y->nc_diskless)
      what = "disk";
    else if (!same_str (x->nc_meta, y->nc_meta) ||
             x->nc_meta_internal != y->nc_meta_internal)
      what = "meta";
    else if (!same_str (x->nc_control, y->nc_control))
      what = "control";
    else if (!same_str (x->nc_tls_cert, y->nc_tls_cert) ||
             !same_str (x->nc_tls_key, y->nc_tls_key))
      what = "tls-cert / tls-key";
    if (what != NULL) {
      snprintf (buf, len, "nodes[%zu] (%s): %s", i, x->nc_name, what);
      return buf;
    }
  }
  return NULL;
}

#define SET(field, key, fmt, conv)                                      \
  do {                                                                  \
    if (cur->field != new->field) {                                     \
      note (cb, "%s %" fmt " -> %" fmt, key, conv (cur->field),        \
            conv (new->field));                                         \
      __atomic_store_n (&cur->field, new->field, __ATOMIC_RELAXED);     \
    }                                                                   \
  } while (0)
#define AS_IS(x) (x)
#define MS(x) ((x) / 1000.0)
#define YESNO(x) ((x) ? "true" : "false")

/* Store what changed from cur to new, noting each change in cb. */
static void
apply (struct repl_config *cur, struct repl_config *new,
       struct change_buf *cb)
{
  unsigned h;

  SET (cf_ping_interval_ms, "net.ping-interval", "g", MS);
  SET (cf_ping_timeout_ms, "net.ping-timeout", "g", MS);
  SET (cf_timeout_ms, "net.timeout", "g", MS);
  SET (cf_connect_retry_max_ms, "net.connect-retry-max", "g", MS);
  SET (cf_sndbuf_size, "net.sndbuf-size", PRIu32, AS_IS);
  SET (cf_rcvbuf_size, "net.rcvbuf-size", PRIu32, AS_IS);
  SET (cf_cork, "net.cork", "s", YESNO);
  SET (cf_data_integrity, "data-integrity", "s", YESNO);
  SET (cf_resync_rate, "resync.resync-rate", PRIu64, AS_IS);
  SET (cf_c_min_rate, "resync.c-min-rate", PRIu64, AS_IS);
  SET (cf_c_max_rate, "resync.c-max-rate", PRIu64, AS_IS);
  SET (cf_csums, "resync.csums", "s", YESNO);
  SET (cf_auto_promote, "auto-promote", "s", YESNO);
  SET (cf_quorum, "quorum", "d", (int));
  SET (cf_on_no_quorum_suspend, "on-no-quorum suspend-io", "s", YESNO);
  SET (cf_fencing, "fencing", "d", (int));
  SET (cf_after_sb_0pri, "after-sb-0pri", "d", (int));
  SET (cf_after_sb_1pri, "after-sb-1pri", "d", (int));
  SET (cf_read_balancing, "read-balancing", "d", (int));
  SET (cf_read_prefer_id, "read-balancing prefer", "u", AS_IS);
  for (h = 0; h < REPL_HANDLER_NKEYS; h++)
    if (!same_str (cur->cf_handlers[h], new->cf_handlers[h])) {
      char *old = cur->cf_handlers[h];

      note (cb, "handlers.%s", config_handler_name (h));
      __atomic_store_n (&cur->cf_handlers[h], new->cf_handlers[h],
                        __ATOMIC_RELEASE);
      new->cf_handlers[h] = old;        /* freed with new, at the end */
    }
}

/* A configuration loaded by adjust, kept until the node stops. */
struct adjusted {
  struct adjusted *ad_next;
  struct repl_config ad_cfg;
};

/* replctl adjust.  Returns 0 with what changed in out ("nothing
 * changed" if nothing did), or -1 with the reason in out. */
int
engine_adjust (struct repl_node *node, char *out, size_t outlen)
{
  struct adjusted *ad = calloc (1, sizeof *ad);
  struct change_buf cb = { .cb_out = out, .cb_len = outlen };
  char err[512], key[160];
  const char *fixed;
  bool quorum;
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&node->n_adjust_lock);

  if (ad == NULL) {
    snprintf (out, outlen, "out of memory");
    return -1;
  }
  if (config_load (node->n_config_abs, &ad->ad_cfg, err,
                   sizeof err) == -1) {
    snprintf (out, outlen, "%s (nothing changed)", err);
    free (ad);
    return -1;
  }
  if ((fixed = fixed_key_changed (&node->n_cfg, &ad->ad_cfg, key,
                                  sizeof key)) != NULL) {
    snprintf (out, outlen, "%s: %s cannot change while the node runs "
              "(nothing changed)", node->n_cfg.cf_path, fixed);
    config_free (&ad->ad_cfg);
    free (ad);
    return -1;
  }
  out[0] = '\0';
  quorum = node->n_cfg.cf_quorum != ad->ad_cfg.cf_quorum;
  apply (&node->n_cfg, &ad->ad_cfg, &cb);
  ad->ad_next = node->n_adjusted;
  node->n_adjusted = ad;
  if (cb.cb_n == 0)
    snprintf (out, outlen, "nothing changed");
  else
    log_info ("node %s: adjusted from %s: %s", node->n_self->nc_name,
              node->n_cfg.cf_path, out);
  if (quorum)
    node_quorum_changed (node);
  return 0;
}

/* At the node's end: the configurations adjust loaded. */
void
adjust_free (struct repl_node *node)
{
  struct adjusted *ad, *next;

  for (ad = node->n_adjusted; ad != NULL; ad = next) {
    next = ad->ad_next;
    config_free (&ad->ad_cfg);
    free (ad);
  }
  node->n_adjusted = NULL;
}
