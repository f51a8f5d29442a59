/* nbdrepl: what every libFuzzer harness in tests/fuzz shares.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * A harness defines LLVMFuzzerTestOneInput and checks, besides "no
 * crash, no sanitizer report", the properties its decoders promise
 * (what is accepted is in range, encode after decode gives the same
 * bytes).  A broken promise aborts, which libFuzzer reports as a crash
 * with the input that caused it.
 */
#ifndef NBDREPL_FUZZ_H
#define NBDREPL_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

extern int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

#define FUZZ_CHECK(cond)                                                \
  do {                                                                  \
    if (!(cond)) {                                                      \
      fprintf (stderr, "%s:%d: broken promise: %s\n",                   \
               __FILE__, __LINE__, #cond);                              \
      abort ();                                                         \
    }                                                                   \
  } while (0)

#endif /* NBDREPL_FUZZ_H */
