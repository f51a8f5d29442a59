/* nbdrepl: replbench's NBD transport — libnbd's asynchronous API, one
 * handle per job.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 */
#include <config.h>

#include <stdio.h>

#include <libnbd.h>

#include "replbench.h"

static void *
nbd_tr_open (const char *uri, unsigned job, uint64_t *size, uint32_t *block)
{
  struct nbd_handle *nbd = nbd_create ();
  int64_t esize;

  if (nbd == NULL) {
    fprintf (stderr, "replbench: %s\n", nbd_get_error ());
    return NULL;
  }
  if (nbd_connect_uri (nbd, uri) == -1) {
    fprintf (stderr, "replbench: %s: %s\n", uri, nbd_get_error ());
    nbd_close (nbd);
    return NULL;
  }
  esize = nbd_get_size (nbd);
  if (esize <= 0) {
    fprintf (stderr, "replbench: %s: the export has no size\n", uri);
    nbd_close (nbd);
    return NULL;
  }
  *size = esize;
  *block = 512;
  return nbd;
}

static int
nbd_tr_done (void *user_data, int *error)
{
  struct slot *s = user_data;

  s->err = *error;
  s->busy = false;
  return 1;                     /* retire the command */
}

static int
nbd_tr_submit (void *conn, struct slot *s, uint32_t len)
{
  struct nbd_handle *nbd = conn;
  nbd_completion_callback cb = { .callback = nbd_tr_done, .user_data = s };

  if ((s->is_write ? nbd_aio_pwrite (nbd, s->buf, len, s->offset, cb, 0)
                   : nbd_aio_pread (nbd, s->buf, len, s->offset, cb, 0))
      == -1) {
    fprintf (stderr, "replbench: %s\n", nbd_get_error ());
    return -1;
  }
  return 0;
}

/* Wait for progress, then take every reply that is already there
 * before the caller issues new requests, as an event loop (or fio's
 * nbd engine) does.  Answering each reply with a new request on its
 * own made the server see more, smaller TCP segments and spend 10% more
 * CPU per request than under fio (bench/RESULTS.md, the 2026-11-30 results at d3e9759). */
static int
nbd_tr_poll (void *conn)
{
  int r;

  if (nbd_poll (conn, -1) == -1) {
    fprintf (stderr, "replbench: %s\n", nbd_get_error ());
    return -1;
  }
  while (nbd_aio_in_flight (conn) > 0 && (r = nbd_poll (conn, 0)) != 0) {
    if (r == -1) {
      fprintf (stderr, "replbench: %s\n", nbd_get_error ());
      return -1;
    }
  }
  return 0;
}

static void
nbd_tr_close (void *conn)
{
  nbd_shutdown (conn, 0);
  nbd_close (conn);
}

const struct transport transport_nbd = {
  .tr_name = "nbd",
  .tr_open = nbd_tr_open,
  .tr_submit = nbd_tr_submit,
  .tr_poll = nbd_tr_poll,
  .tr_close = nbd_tr_close,
};
