/* nbdrepl: replbench's private header — the transports (NBD, iSCSI)
 * behind one asynchronous interface that the workload code drives.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 */
#ifndef REPLBENCH_H
#define REPLBENCH_H

#include <stdbool.h>
#include <stdint.h>

/* One request slot of a job's queue.  The transport clears busy and
 * sets err (an errno value, 0 for success) when the request completes. */
struct slot {
  uint8_t *buf;
  bool busy, is_write;
  uint64_t offset;
  uint64_t start_ns;
  int err;
  void *rb_priv;                /* the transport's per-request state */
};

/* One connection to the export, with its own queue, used by one thread.
 * Every function reports its own errors on stderr once (with the URI
 * or the transport's message) and returns -1 / NULL. */
struct transport {
  const char *tr_name;
  /* Connect to uri (job is the job number, for names that must differ
   * between sessions).  Sets *size to the export's size in bytes and
   * *block to its logical block size (requests are multiples of it). */
  void *(*tr_open) (const char *uri, unsigned job, uint64_t *size,
                    uint32_t *block);
  /* Start a read or write of s->buf at s->offset, len bytes. */
  int (*tr_submit) (void *conn, struct slot *s, uint32_t len);
  /* Wait until at least one request completes (or an error). */
  int (*tr_poll) (void *conn);
  void (*tr_close) (void *conn);
};

/* replbench-nbd.c */
extern const struct transport transport_nbd;

/* replbench-iscsi.c */
extern const struct transport transport_iscsi;

#endif /* REPLBENCH_H */
