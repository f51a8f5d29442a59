/* nbdrepl: preloaded into nbdkit by scripts/sanitize-thread, with and
 * before the TSan runtime.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * nbdkit is not built with TSan, so the runtime comes in by LD_PRELOAD
 * and initialises lazily, at the first call it intercepts.  That call
 * is a malloc inside newlocale, in the constructor of libp11-kit (a
 * dependency of nbdkit's libgnutls), with glibc's locale lock held for
 * writing.  The initialisation looks up swift_demangle with dlsym and,
 * not finding it, calls dlerror(), whose message translation takes the
 * same lock for reading: glibc refuses the read lock to its writer
 * (EDEADLK) but dcigettext unlocks anyway, which releases the write
 * lock, and newlocale's own unlock then leaves the lock's reader count
 * at -1.  Nothing takes the lock for writing again until nbdkit exits,
 * when libp11-kit's destructor (freelocale) waits for that reader
 * forever: every node hung at exit.
 *
 * With swift_demangle defined, the lookup succeeds and dlerror() has
 * nothing to translate.  TSan calls it only to demangle Swift names;
 * returning NULL says "not Swift", and it demangles C++ as usual.
 */
#include <stddef.h>

char *swift_demangle (const char *name, size_t len, char *out, size_t *outlen,
                      unsigned flags);

char *
swift_demangle (const char *name, size_t len, char *out, size_t *outlen,
                unsigned flags)
{
  return NULL;
}
