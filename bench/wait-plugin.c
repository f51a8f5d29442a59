/* nbdrepl benchmark: the floor for an nbdkit plugin whose writes wait.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * The nbd-wait row of `scripts/bench --table`.  It serves a file as
 * nbdkit's file plugin does, except that each write, once written,
 * waits until another thread wakes it, as a replicated write waits for
 * its peer's ACK: the writer queues itself and sleeps on a futex; a
 * completer thread takes the whole queue at once and wakes every writer
 * in it, at once (no network, no peer, nothing to wait for really).
 * What this row loses against nbd-file is what nbdkit's request model
 * costs any plugin whose requests wait for another thread, since a
 * plugin cannot answer a request later from another thread: the repl
 * primary pays that, and its peer, on top.
 *
 *   nbdkit wait-plugin.so file=FILE
 */
#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

struct waiting {
  _Atomic uint32_t done;        /* the futex word: 1 once woken */
  struct waiting *next;
};

static char *filename;
static int fd = -1;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static struct waiting *queue;   /* writers to wake */
static bool stopping;
static bool completer_started;
static pthread_t completer;

static int
wait_config (const char *key, const char *value)
{
  if (strcmp (key, "file") == 0) {
    free (filename);
    filename = nbdkit_absolute_path (value);
    return filename == NULL ? -1 : 0;
  }
  nbdkit_error ("unknown parameter '%s'", key);
  return -1;
}

static int
wait_config_complete (void)
{
  if (filename == NULL) {
    nbdkit_error ("file=FILE is required");
    return -1;
  }
  return 0;
}

static int
wait_get_ready (void)
{
  fd = open (filename, O_RDWR | O_CLOEXEC);
  if (fd == -1) {
    nbdkit_error ("open: %s: %m", filename);
    return -1;
  }
  return 0;
}

static void
wake (struct waiting *w)
{
  atomic_store (&w->done, 1);
  /* w may be gone once done is set (its writer returned): the wake-up
   * then finds no waiter on that word, which is harmless. */
  syscall (SYS_futex, &w->done, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void *
completer_thread (void *arg)
{
  pthread_mutex_lock (&lock);
  for (;;) {
    struct waiting *w;

    while (queue == NULL && !stopping)
      pthread_cond_wait (&cond, &lock);
    if (queue == NULL)
      break;                    /* stopping, and nobody waits */
    w = queue;
    queue = NULL;
    pthread_mutex_unlock (&lock);
    while (w != NULL) {
      struct waiting *next = w->next;
      wake (w);
      w = next;
    }
    pthread_mutex_lock (&lock);
  }
  pthread_mutex_unlock (&lock);
  return NULL;
}

/* The thread starts after nbdkit forks into the background, so that it
 * runs in the process that serves. */
static int
wait_after_fork (void)
{
  int err = pthread_create (&completer, NULL, completer_thread, NULL);

  if (err != 0) {
    errno = err;
    nbdkit_error ("pthread_create: %m");
    return -1;
  }
  completer_started = true;
  return 0;
}

static void
wait_unload (void)
{
  if (completer_started) {
    pthread_mutex_lock (&lock);
    stopping = true;
    pthread_cond_signal (&cond);
    pthread_mutex_unlock (&lock);
    pthread_join (completer, NULL);
  }
  if (fd >= 0)
    close (fd);
  free (filename);
}

static void *
wait_open (int readonly)
{
  return NBDKIT_HANDLE_NOT_NEEDED;
}

static int64_t
wait_get_size (void *handle)
{
  struct stat st;

  if (fstat (fd, &st) == -1) {
    nbdkit_error ("fstat: %m");
    return -1;
  }
  return st.st_size;
}

static int
wait_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
            uint32_t flags)
{
  while (count > 0) {
    ssize_t r = pread (fd, buf, count, offset);

    if (r == -1) {
      nbdkit_error ("pread: %m");
      return -1;
    }
    if (r == 0) {
      nbdkit_error ("pread: unexpected end of file");
      errno = EIO;
      return -1;
    }
    buf = (char *) buf + r;
    count -= r;
    offset += r;
  }
  return 0;
}

static int
wait_pwrite (void *handle, const void *buf, uint32_t count, uint64_t offset,
             uint32_t flags)
{
  struct waiting me = { .next = NULL };
  bool was_empty;

  while (count > 0) {
    ssize_t r = pwrite (fd, buf, count, offset);

    if (r == -1) {
      nbdkit_error ("pwrite: %m");
      return -1;
    }
    buf = (const char *) buf + r;
    count -= r;
    offset += r;
  }
  if ((flags & NBDKIT_FLAG_FUA) && fdatasync (fd) == -1) {
    nbdkit_error ("fdatasync: %m");
    return -1;
  }

  atomic_init (&me.done, 0);
  pthread_mutex_lock (&lock);
  was_empty = queue == NULL;
  me.next = queue;
  queue = &me;
  if (was_empty)
    pthread_cond_signal (&cond);
  pthread_mutex_unlock (&lock);
  while (atomic_load (&me.done) == 0)
    syscall (SYS_futex, &me.done, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
  return 0;
}

static int
wait_flush (void *handle, uint32_t flags)
{
  if (fdatasync (fd) == -1) {
    nbdkit_error ("fdatasync: %m");
    return -1;
  }
  return 0;
}

static int
wait_can_fua (void *handle)
{
  return NBDKIT_FUA_NATIVE;
}

static struct nbdkit_plugin plugin = {
  .name = "wait",
  .longname = "nbdrepl benchmark: a file whose writes wait to be woken",
  .config = wait_config,
  .config_complete = wait_config_complete,
  .config_help = "file=<FILENAME>  (required) The file to serve.",
  .get_ready = wait_get_ready,
  .after_fork = wait_after_fork,
  .unload = wait_unload,
  .open = wait_open,
  .get_size = wait_get_size,
  .can_fua = wait_can_fua,
  .pread = wait_pread,
  .pwrite = wait_pwrite,
  .flush = wait_flush,
};

NBDKIT_REGISTER_PLUGIN (plugin)
