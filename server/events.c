/* nbdrepl: the events stream — every state change as it happens.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * The functions that change a state (state.c, role.c, generation.c,
 * handler.c, resync progress in resync.c and secondary.c) post one
 * event each, a line in the form of DRBD's `drbdsetup events2`:
 *
 *   change peer-device name:r0 peer-node-id:1 conn-name:beta volume:0
 *          replication:SyncSource
 *
 * (one line), kept with its time in a ring of the last EVENTS_RING.
 * `replctl events` subscribes through the control socket: a thread per
 * subscriber (at most EVENTS_MAX_SUBSCRIBERS) first prints the current
 * state as "exists" lines if asked (--now) and "exists -", then every
 * event as it is posted, as text or one JSON object per line, until the
 * node stops ("destroy resource"), the subscriber goes away, or it falls
 * so far behind that events were overwritten (it is then told how many
 * it lost, and goes on).  Progress lines (resync done, out of sync) are
 * only sent to subscribers that asked for --statistics.
 *
 * ev_lock is the innermost lock of all: events are posted under pr_lock
 * or n_lock, and nothing else is taken under it.  A subscriber copies
 * events out under it and writes them to its socket without it.
 */
#include <config.h>

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "log.h"
#include "sockets.h"

#define EVENTS_BATCH 64                 /* copied out at a time */
#define EVENTS_WRITE_TIMEOUT_MS 5000    /* a subscriber that does not read */
#define EVENTS_HANGUP_CHECK_NS (1000 * 1000 * 1000)

void
events_init (struct events *ev)
{
  mutex_init (&ev->ev_lock);
  cond_init (&ev->ev_cond);
  thread_set_init (&ev->ev_subscribers, EVENTS_MAX_SUBSCRIBERS);
}

void
events_destroy (struct events *ev)
{
  thread_set_destroy (&ev->ev_subscribers);
  pthread_cond_destroy (&ev->ev_cond);
  pthread_mutex_destroy (&ev->ev_lock);
}

/* Post prefix + text (stats: a progress line).  Any lock may be held
 * but ev_lock. */
static void
post (struct repl_node *node, bool stats, const char *prefix,
      const char *text)
{
  struct events *ev = &node->n_events;
  struct event *e;

  pthread_mutex_lock (&ev->ev_lock);
  if (!ev->ev_closed) {
    e = &ev->ev_ring[ev->ev_next % EVENTS_RING];
    e->ev_seq = ev->ev_next++;
    e->ev_stats = stats;
    clock_gettime (CLOCK_REALTIME, &e->ev_time);
    snprintf (e->ev_text, sizeof e->ev_text, "%s%s", prefix, text);
    pthread_cond_broadcast (&ev->ev_cond);
  }
  pthread_mutex_unlock (&ev->ev_lock);
}

#define FORMAT_TEXT(text, fmt)                  \
  do {                                          \
    va_list ap_;                                \
    va_start (ap_, fmt);                        \
    vsnprintf (text, sizeof text, fmt, ap_);    \
    va_end (ap_);                               \
  } while (0)

/* "change resource name:RES " + fmt; and so on for the other objects. */
void
events_resource (struct repl_node *node, const char *fmt, ...)
{
  char prefix[128], text[EVENT_TEXT];

  snprintf (prefix, sizeof prefix, "change resource name:%s ",
            node->n_cfg.cf_resource);
  FORMAT_TEXT (text, fmt);
  post (node, false, prefix, text);
}

void
events_device (struct repl_node *node, const char *fmt, ...)
{
  char prefix[128], text[EVENT_TEXT];

  snprintf (prefix, sizeof prefix, "change device name:%s volume:0 ",
            node->n_cfg.cf_resource);
  FORMAT_TEXT (text, fmt);
  post (node, false, prefix, text);
}

static void
peer_prefix (const char *kind, const struct peer *p, const char *object,
             char *prefix, size_t len)
{
  snprintf (prefix, len, "%s %s name:%s peer-node-id:%u conn-name:%s%s ",
            kind, object, p->pr_node->n_cfg.cf_resource, p->pr_cfg->nc_id,
            p->pr_cfg->nc_name,
            strcmp (object, "peer-device") == 0 ? " volume:0" : "");
}

void
events_connection (struct peer *p, const char *fmt, ...)
{
  char prefix[192], text[EVENT_TEXT];

  peer_prefix ("change", p, "connection", prefix, sizeof prefix);
  FORMAT_TEXT (text, fmt);
  post (p->pr_node, false, prefix, text);
}

/* replctl adjust added or removed peer p: DRBD's "create connection"
 * and "destroy connection" (and the same for its peer-device). */
void
events_membership (struct peer *p, bool created)
{
  const char *kind = created ? "create" : "destroy";
  char prefix[192];

  peer_prefix (kind, p, "connection", prefix, sizeof prefix);
  post (p->pr_node, false, prefix, created ? "connection:Connecting"
                                           : "connection:StandAlone");
  peer_prefix (kind, p, "peer-device", prefix, sizeof prefix);
  post (p->pr_node, false, prefix, "replication:Off");
}

void
events_peer_device (struct peer *p, const char *fmt, ...)
{
  char prefix[192], text[EVENT_TEXT];

  peer_prefix ("change", p, "peer-device", prefix, sizeof prefix);
  FORMAT_TEXT (text, fmt);
  post (p->pr_node, false, prefix, text);
}

/* A resync's progress, towards p or from it: for subscribers that asked
 * for --statistics. */
void
events_progress (struct peer *p, uint64_t done, uint64_t total)
{
  char prefix[192], text[96];

  peer_prefix ("change", p, "peer-device", prefix, sizeof prefix);
  snprintf (text, sizeof text, "done:%.2f", total && done < total
            ? done * 100.0 / total : 100.0);
  post (p->pr_node, true, prefix, text);
}

/* A handler is called (rc < 0) or has returned (its exit status). */
void
events_helper (struct repl_node *node, const char *helper,
               const struct peer *p, int rc)
{
  char prefix[160], text[96];

  snprintf (prefix, sizeof prefix, "%s helper name:%s ",
            rc < 0 ? "call" : "response", node->n_cfg.cf_resource);
  if (rc < 0)
    snprintf (text, sizeof text, "%s%s helper:%s",
              p ? "conn-name:" : "", p ? p->pr_cfg->nc_name : "", helper);
  else
    snprintf (text, sizeof text, "%s%s helper:%s status:%d",
              p ? "conn-name:" : "", p ? p->pr_cfg->nc_name : "", helper,
              rc);
  post (node, false, prefix, text);
}

/* The node stops: the last event, and every subscriber ends. */
void
events_close (struct repl_node *node)
{
  struct events *ev = &node->n_events;
  char prefix[128];

  snprintf (prefix, sizeof prefix, "destroy resource name:%s",
            node->n_cfg.cf_resource);
  post (node, false, prefix, "");
  pthread_mutex_lock (&ev->ev_lock);
  ev->ev_closed = true;
  pthread_cond_broadcast (&ev->ev_cond);
  pthread_mutex_unlock (&ev->ev_lock);
  thread_set_wait (&ev->ev_subscribers);
}

/* ---- subscribers ---------------------------------------------------- */

struct subscriber {
  struct repl_node *su_node;
  int su_fd;
  bool su_now, su_stats, su_json;
  uint64_t su_next;             /* the first event it gets: the next one
                                   when it subscribed */
};

static void
buf_add (char **buf, size_t *len, size_t *cap, const char *fmt, ...)
{
  va_list ap;
  int n;

  for (;;) {
    va_start (ap, fmt);
    n = vsnprintf (*buf + *len, *cap - *len, fmt, ap);
    va_end (ap);
    if (n < 0)
      return;
    if ((size_t) n < *cap - *len) {
      *len += n;
      return;
    }
    {
      size_t ncap = *cap * 2 + n;
      char *nb = realloc (*buf, ncap);
      if (nb == NULL)
        return;
      *buf = nb;
      *cap = ncap;
    }
  }
}

/* One event, as text or as a JSON object: "key:value" tokens become
 * members (numbers stay numbers). */
static void
format_event (char **buf, size_t *len, size_t *cap, bool json,
              const struct timespec *t, const char *text)
{
  char when[64];
  struct tm tm;

  gmtime_r (&t->tv_sec, &tm);
  strftime (when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
  if (!json) {
    buf_add (buf, len, cap, "%s.%06ld+00:00 %s\n", when, t->tv_nsec / 1000,
             text);
    return;
  }
  buf_add (buf, len, cap, "{\"time\":\"%s.%06ld+00:00\"", when,
           t->tv_nsec / 1000);
  {
    char copy[EVENT_TEXT + 64], *tok, *save = NULL;
    unsigned i = 0;

    snprintf (copy, sizeof copy, "%s", text);
    for (tok = strtok_r (copy, " ", &save); tok != NULL;
         tok = strtok_r (NULL, " ", &save), i++) {
      char *colon = strchr (tok, ':');
      char *end;

      if (i == 0)
        buf_add (buf, len, cap, ",\"kind\":\"%s\"", tok);
      else if (i == 1)
        buf_add (buf, len, cap, ",\"object\":\"%s\"", tok);
      else if (colon != NULL) {
        *colon = '\0';
        strtod (colon + 1, &end);
        if (colon[1] != '\0' && *end == '\0')
          buf_add (buf, len, cap, ",\"%s\":%s", tok, colon + 1);
        else
          buf_add (buf, len, cap, ",\"%s\":\"%s\"", tok, colon + 1);
      }
    }
  }
  buf_add (buf, len, cap, "}\n");
}

/* The current state, as "exists" lines, then "exists -". */
static void
format_now (struct subscriber *su, char **buf, size_t *len, size_t *cap)
{
  struct repl_node *node = su->su_node;
  const char *res = node->n_cfg.cf_resource;
  struct timespec t;
  char line[EVENT_TEXT + 128];
  PEERS_PIN_FOR_CURRENT_SCOPE (node);
  enum repl_role role;
  enum repl_disk_state disk;
  bool quorum;
  size_t i;

  clock_gettime (CLOCK_REALTIME, &t);
  pthread_mutex_lock (&node->n_lock);
  role = node->n_role;
  disk = node->n_disk;
  quorum = node->n_quorum;
  pthread_mutex_unlock (&node->n_lock);
  snprintf (line, sizeof line, "exists resource name:%s role:%s quorum:%s",
            res, role_name (role), quorum ? "yes" : "no");
  format_event (buf, len, cap, su->su_json, &t, line);
  snprintf (line, sizeof line, "exists device name:%s volume:0 disk:%s",
            res, disk_state_name (disk));
  format_event (buf, len, cap, su->su_json, &t, line);
  for (i = 0; i < PEERS (node)->pl_n; i++) {
    struct peer *p = PEERS (node)->pl_peers[i];
    enum conn_state cs;
    enum repl_state rs;
    const char *peer_role = "Unknown", *peer_disk = "DUnknown";
    uint64_t oos, done = 0, total = 0;
    bool resyncing;
    struct conn *c;

    pthread_mutex_lock (&p->pr_lock);
    cs = p->pr_state;
    rs = p->pr_repl;
    if ((c = peer_conn_locked (p)) != NULL)
      peer_role = role_name (c->c_role);
    if (p->pr_disk_known)
      peer_disk = disk_state_name (p->pr_disk);
    oos = node->n_diskless || p->pr_cfg->nc_diskless
          ? 0 : bitmap_dirty_bytes (&p->pr_bitmap);
    resyncing = peer_resyncing_locked (p);
    if (resyncing) {
      done = p->pr_resync_done;
      total = p->pr_resync_total;
    }
    pthread_mutex_unlock (&p->pr_lock);

    snprintf (line, sizeof line, "exists connection name:%s peer-node-id:%u "
              "conn-name:%s connection:%s role:%s", res, p->pr_cfg->nc_id,
              p->pr_cfg->nc_name, conn_state_name (cs), peer_role);
    format_event (buf, len, cap, su->su_json, &t, line);
    snprintf (line, sizeof line, "exists peer-device name:%s peer-node-id:%u "
              "conn-name:%s volume:0 replication:%s peer-disk:%s", res,
              p->pr_cfg->nc_id, p->pr_cfg->nc_name, repl_state_name (rs),
              peer_disk);
    if (su->su_stats) {
      size_t l = strlen (line);
      snprintf (line + l, sizeof line - l, " out-of-sync:%" PRIu64, oos);
      if (resyncing) {
        l = strlen (line);
        snprintf (line + l, sizeof line - l, " done:%.2f", total && done <
                  total ? done * 100.0 / total : 100.0);
      }
    }
    format_event (buf, len, cap, su->su_json, &t, line);
  }
  format_event (buf, len, cap, su->su_json, &t, "exists -");
}

/* Has the subscriber gone away? */
static bool
hung_up (int fd)
{
  struct pollfd pfd = { .fd = fd, .events = POLLRDHUP };

  return poll (&pfd, 1, 0) > 0 &&
         (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

static void *
subscriber_thread (void *arg)
{
  struct subscriber *su = arg;
  struct events *ev = &su->su_node->n_events;
  size_t cap = 4096, len = 0;
  char *buf = malloc (cap);
  struct event *copy = malloc (EVENTS_BATCH * sizeof *copy);
  uint64_t next = su->su_next;

  if (buf == NULL || copy == NULL)
    goto out;
  /* The state first if asked, then the events from the moment it
   * subscribed on, so that nothing between the two is missed (an event
   * may repeat what the state already shows, never the other way
   * round). */
  if (su->su_now)
    format_now (su, &buf, &len, &cap);
  else
    format_event (&buf, &len, &cap, su->su_json,
                  &(struct timespec) { .tv_sec = time (NULL) }, "exists -");

  for (;;) {
    uint64_t lost = 0;
    size_t n = 0, i;
    bool closed;

    if (len > 0) {
      if (sock_write_full (su->su_fd, buf, len,
                           EVENTS_WRITE_TIMEOUT_MS) == -1)
        break;
      len = 0;
    }
    pthread_mutex_lock (&ev->ev_lock);
    while (next == ev->ev_next && !ev->ev_closed) {
      struct timespec ts = deadline_after_ns (EVENTS_HANGUP_CHECK_NS);

      if (pthread_cond_timedwait (&ev->ev_cond, &ev->ev_lock, &ts)
          == ETIMEDOUT && hung_up (su->su_fd))
        break;
    }
    if (ev->ev_next - next > EVENTS_RING) {
      lost = ev->ev_next - next - EVENTS_RING;
      next = ev->ev_next - EVENTS_RING;
    }
    while (next < ev->ev_next && n < EVENTS_BATCH)
      copy[n++] = ev->ev_ring[next++ % EVENTS_RING];
    closed = ev->ev_closed && next == ev->ev_next;
    pthread_mutex_unlock (&ev->ev_lock);

    if (lost > 0) {
      char line[96];
      struct timespec t;

      clock_gettime (CLOCK_REALTIME, &t);
      snprintf (line, sizeof line, "lost events count:%" PRIu64, lost);
      format_event (&buf, &len, &cap, su->su_json, &t, line);
    }
    for (i = 0; i < n; i++)
      if (!copy[i].ev_stats || su->su_stats)
        format_event (&buf, &len, &cap, su->su_json, &copy[i].ev_time,
                      copy[i].ev_text);
    if (n == 0 && !closed && hung_up (su->su_fd))
      break;
    if (closed) {
      if (len > 0)
        sock_write_full (su->su_fd, buf, len, EVENTS_WRITE_TIMEOUT_MS);
      break;
    }
  }

 out:
  free (copy);
  free (buf);
  close (su->su_fd);
  free (su);
  thread_set_finish (&ev->ev_subscribers);
  return NULL;
}

/* The control command "events [--now] [--statistics] [--json]" on fd:
 * the subscriber's thread takes fd over.  Returns 0, or -1 with the
 * reason in err (fd is then still the caller's). */
int
events_subscribe (struct repl_node *node, int fd, const char *args,
                  char *err, size_t errlen)
{
  struct subscriber *su = calloc (1, sizeof *su);
  char copy[128], *tok, *save = NULL;

  if (su == NULL) {
    snprintf (err, errlen, "out of memory");
    return -1;
  }
  su->su_node = node;
  su->su_fd = fd;
  snprintf (copy, sizeof copy, "%s", args);
  for (tok = strtok_r (copy, " ", &save); tok != NULL;
       tok = strtok_r (NULL, " ", &save)) {
    if (strcmp (tok, "--now") == 0)
      su->su_now = true;
    else if (strcmp (tok, "--statistics") == 0)
      su->su_stats = true;
    else if (strcmp (tok, "--json") == 0)
      su->su_json = true;
    else {
      snprintf (err, errlen, "events: unknown option '%.64s' (--now, "
                "--statistics, --json)", tok);
      free (su);
      return -1;
    }
  }
  /* Every event posted after the command was answered reaches it, even
   * one posted before its thread runs. */
  pthread_mutex_lock (&node->n_events.ev_lock);
  su->su_next = node->n_events.ev_next;
  pthread_mutex_unlock (&node->n_events.ev_lock);
  if (thread_set_start (&node->n_events.ev_subscribers, subscriber_thread,
                        su) == -1) {
    if (errno == EAGAIN)
      snprintf (err, errlen, "events: too many subscribers (at most %d)",
                EVENTS_MAX_SUBSCRIBERS);
    else
      snprintf (err, errlen, "events: %s", strerror (errno));
    free (su);
    return -1;
  }
  return 0;
}
