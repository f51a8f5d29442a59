/* nbdrepl: replbench's iSCSI transport — libiscsi's asynchronous API
 * (READ16 / WRITE16 tasks, iscsi_service in a poll loop), one session
 * per job.  URIs: iscsi://HOST[:PORT]/TARGET-IQN/LUN.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 */
#include <config.h>

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include "replbench.h"

/* Commands not answered within this many seconds fail (libiscsi checks
 * it in iscsi_service, which the poll loop calls at least every second). */
#define ISCSI_TR_TIMEOUT 30

struct iscsi_conn {
  struct iscsi_context *ic_iscsi;
  int ic_lun;
  uint32_t ic_block;            /* logical block size */
};

static void *
iscsi_tr_open (const char *uri, unsigned job, uint64_t *size, uint32_t *block)
{
  struct iscsi_conn *c;
  struct iscsi_url *url = NULL;
  struct scsi_task *task = NULL;
  struct scsi_readcapacity16 *rc16;
  char initiator[128];

  /* A name of its own per session: two logins with one name and one
   * ISID would make the target drop the first as reinstated. */
  snprintf (initiator, sizeof initiator,
            "iqn.2026-01.org.nbdrepl:replbench-%ld-%u", (long) getpid (), job);
  c = calloc (1, sizeof *c);
  if (c == NULL) {
    perror ("replbench: calloc");
    return NULL;
  }
  c->ic_iscsi = iscsi_create_context (initiator);
  if (c->ic_iscsi == NULL) {
    fprintf (stderr, "replbench: iscsi_create_context failed\n");
    goto err;
  }
  url = iscsi_parse_full_url (c->ic_iscsi, uri);
  if (url == NULL) {
    fprintf (stderr, "replbench: %s: %s\n", uri, iscsi_get_error (c->ic_iscsi));
    goto err;
  }
  c->ic_lun = url->lun;
  iscsi_set_noautoreconnect (c->ic_iscsi, 1);
  if (iscsi_set_targetname (c->ic_iscsi, url->target) == -1 ||
      iscsi_set_session_type (c->ic_iscsi, ISCSI_SESSION_NORMAL) == -1 ||
      iscsi_set_header_digest (c->ic_iscsi,
                               ISCSI_HEADER_DIGEST_NONE_CRC32C) == -1 ||
      iscsi_set_timeout (c->ic_iscsi, ISCSI_TR_TIMEOUT) == -1 ||
      iscsi_full_connect_sync (c->ic_iscsi, url->portal, url->lun) == -1) {
    fprintf (stderr, "replbench: %s: %s\n", uri, iscsi_get_error (c->ic_iscsi));
    goto err;
  }
  task = iscsi_readcapacity16_sync (c->ic_iscsi, c->ic_lun);
  if (task == NULL || task->status != SCSI_STATUS_GOOD ||
      (rc16 = scsi_datain_unmarshall (task)) == NULL) {
    fprintf (stderr, "replbench: %s: READ CAPACITY(16): %s\n", uri,
             iscsi_get_error (c->ic_iscsi));
    goto err;
  }
  c->ic_block = rc16->block_length;
  *block = rc16->block_length;
  *size = (rc16->returned_lba + 1) * rc16->block_length;
  scsi_free_scsi_task (task);
  iscsi_destroy_url (url);
  return c;

 err:
  if (task)
    scsi_free_scsi_task (task);
  if (url)
    iscsi_destroy_url (url);
  if (c->ic_iscsi)
    iscsi_destroy_context (c->ic_iscsi);
  free (c);
  return NULL;
}

/* Completion of a READ16 or WRITE16.  A failure is EIO to the
 * workload, which reports the first one. */
static void
iscsi_tr_done (struct iscsi_context *iscsi, int status, void *command_data,
               void *private_data)
{
  struct slot *s = private_data;
  struct scsi_task *task = command_data;

  s->err = status == SCSI_STATUS_GOOD ? 0 : EIO;
  if (task)
    scsi_free_scsi_task (task);
  s->busy = false;
}

static int
iscsi_tr_submit (void *conn, struct slot *s, uint32_t len)
{
  struct iscsi_conn *c = conn;
  struct iscsi_context *iscsi = c->ic_iscsi;
  uint64_t lba = s->offset / c->ic_block;
  struct scsi_task *task;

  if (s->is_write)
    task = iscsi_write16_task (iscsi, c->ic_lun, lba, s->buf, len,
                               c->ic_block, 0, 0, 0, 0, 0, iscsi_tr_done, s);
  else {
    task = iscsi_read16_task (iscsi, c->ic_lun, lba, len, c->ic_block,
                              0, 0, 0, 0, 0, iscsi_tr_done, s);
    /* Straight into the slot's buffer, as libnbd reads. */
    if (task && scsi_task_add_data_in_buffer (task, len, s->buf) == -1) {
      fprintf (stderr, "replbench: scsi_task_add_data_in_buffer failed\n");
      return -1;
    }
  }
  if (task == NULL) {
    fprintf (stderr, "replbench: iSCSI %s: %s\n",
             s->is_write ? "WRITE16" : "READ16", iscsi_get_error (iscsi));
    return -1;
  }
  return 0;
}

static int
iscsi_tr_poll (void *conn)
{
  struct iscsi_conn *c = conn;
  struct pollfd pfd = { .fd = iscsi_get_fd (c->ic_iscsi),
                        .events = iscsi_which_events (c->ic_iscsi) };
  int n;

  if (pfd.events == 0) {
    fprintf (stderr, "replbench: iSCSI: the session is down\n");
    return -1;
  }
  n = poll (&pfd, 1, 1000);
  if (n == -1) {
    if (errno == EINTR)
      return 0;
    perror ("replbench: poll");
    return -1;
  }
  /* revents 0 after a timeout: lets libiscsi time commands out. */
  if (iscsi_service (c->ic_iscsi, n ? pfd.revents : 0) == -1) {
    fprintf (stderr, "replbench: iSCSI: %s\n", iscsi_get_error (c->ic_iscsi));
    return -1;
  }
  return 0;
}

static void
iscsi_tr_close (void *conn)
{
  struct iscsi_conn *c = conn;

  iscsi_logout_sync (c->ic_iscsi);
  iscsi_destroy_context (c->ic_iscsi);
  free (c);
}

const struct transport transport_iscsi = {
  .tr_name = "iscsi",
  .tr_open = iscsi_tr_open,
  .tr_submit = iscsi_tr_submit,
  .tr_poll = iscsi_tr_poll,
  .tr_close = iscsi_tr_close,
};
