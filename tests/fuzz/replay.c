/* nbdrepl: run a fuzz harness over files, without libFuzzer.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * Linked with each harness in the ordinary (gcc) build, where the
 * harnesses are unit tests: with no argument each replays its committed
 * seed corpus (FUZZ_CORPUS, a directory), so that every build, the
 * sanitizer build and valgrind check them too.  Arguments are files or
 * directories to replay instead (a crash file from scripts/fuzz, say).
 * A broken promise aborts, as under libFuzzer.
 */
#include <config.h>

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int
replay_file (const char *path)
{
  FILE *fp = fopen (path, "rb");
  uint8_t *buf = NULL;
  long len;
  int r = -1;

  if (fp == NULL) {
    fprintf (stderr, "%s: %m\n", path);
    return -1;
  }
  if (fseek (fp, 0, SEEK_END) == 0 && (len = ftell (fp)) >= 0 &&
      fseek (fp, 0, SEEK_SET) == 0 &&
      (buf = malloc (len > 0 ? len : 1)) != NULL &&
      fread (buf, 1, len, fp) == (size_t) len) {
    LLVMFuzzerTestOneInput (buf, len);
    r = 0;
  }
  else
    fprintf (stderr, "%s: cannot read\n", path);
  free (buf);
  fclose (fp);
  return r;
}

/* A file, or every regular file of a directory; returns the count. */
static int
replay (const char *path)
{
  struct stat st;
  struct dirent *d;
  DIR *dir;
  int n = 0;

  if (stat (path, &st) == -1) {
    fprintf (stderr, "%s: %m\n", path);
    return -1;
  }
  if (!S_ISDIR (st.st_mode))
    return replay_file (path) == 0 ? 1 : -1;
  dir = opendir (path);
  if (dir == NULL) {
    fprintf (stderr, "%s: %m\n", path);
    return -1;
  }
  while ((d = readdir (dir)) != NULL) {
    char sub[4096];

    if (d->d_name[0] == '.')
      continue;
    snprintf (sub, sizeof sub, "%s/%s", path, d->d_name);
    if (replay_file (sub) == -1) {
      closedir (dir);
      return -1;
    }
    n++;
  }
  closedir (dir);
  return n;
}

int
main (int argc, char *argv[])
{
  int i, n, total = 0;

  if (argc < 2) {
    n = replay (FUZZ_CORPUS);
    if (n <= 0) {
      fprintf (stderr, "%s: no inputs replayed\n", FUZZ_CORPUS);
      return EXIT_FAILURE;
    }
    printf ("%d inputs from %s: no crash\n", n, FUZZ_CORPUS);
    return EXIT_SUCCESS;
  }
  for (i = 1; i < argc; i++) {
    n = replay (argv[i]);
    if (n < 0)
      return EXIT_FAILURE;
    total += n;
  }
  printf ("%d inputs: no crash\n", total);
  return EXIT_SUCCESS;
}
