/* nbdrepl: scoped cleanup, in the spirit of nbdkit's common/utils/cleanup.h.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 */
#ifndef NBDREPL_CLEANUP_H
#define NBDREPL_CLEANUP_H

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>
#include <assert.h>

static inline void
cleanup_free (void *ptr)
{
  free (*(void **) ptr);
}
#define CLEANUP_FREE __attribute__ ((cleanup (cleanup_free)))

static inline void
cleanup_close (int *fd)
{
  if (*fd >= 0)
    close (*fd);
}
#define CLEANUP_CLOSE __attribute__ ((cleanup (cleanup_close)))

static inline void
cleanup_unlock (pthread_mutex_t **ptr)
{
  int r = pthread_mutex_unlock (*ptr);
  assert (r == 0);
  (void) r;
}

#define CLEANUP_UNIQUE_VAR(base) CLEANUP_CONCAT (base, __LINE__)
#define CLEANUP_CONCAT(a, b) CLEANUP_CONCAT2 (a, b)
#define CLEANUP_CONCAT2(a, b) a##b

/* Hold the mutex until the end of the enclosing scope. */
#define ACQUIRE_LOCK_FOR_CURRENT_SCOPE(mutex)                           \
  __attribute__ ((cleanup (cleanup_unlock)))                            \
  pthread_mutex_t *CLEANUP_UNIQUE_VAR (_lock) = (mutex);                \
  do {                                                                  \
    int _r = pthread_mutex_lock (CLEANUP_UNIQUE_VAR (_lock));           \
    assert (_r == 0);                                                   \
    (void) _r;                                                          \
  } while (0)

#endif /* NBDREPL_CLEANUP_H */
