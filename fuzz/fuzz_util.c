/*
** fuzz_util.c: the temporary input file of a harness (fuzz.h).
*/
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char lsim__dir[64];
static char lsim__path[128];

static void lsim__cleanup(void) {
  if (lsim__path[0])
    unlink(lsim__path);
  if (lsim__dir[0])
    rmdir(lsim__dir);
}

const char *lsim_fuzz_file(const char *name, const uint8_t *data,
                           size_t size) {
  if (!lsim__dir[0]) {
    /* memory-backed when it can be: rewriting a file on ext4 by truncation
    ** forces a write-back at every close (auto_da_alloc) */
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp || strlen(tmp) >= 40)
      tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(lsim__dir, sizeof lsim__dir, "%s/lsim-fuzz-XXXXXX", tmp);
    if (!mkdtemp(lsim__dir)) {
      perror("lsim_fuzz_file: mkdtemp");
      abort();
    }
    atexit(lsim__cleanup);
  }
  char path[sizeof lsim__path];
  snprintf(path, sizeof path, "%s/%s", lsim__dir, name);
  if (lsim__path[0])
    unlink(lsim__path); /* a new file each time, never a truncated one */
  memcpy(lsim__path, path, sizeof path);
  FILE *f = fopen(lsim__path, "wb");
  if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
    perror("lsim_fuzz_file: write");
    abort();
  }
  return lsim__path;
}
