/*
** fuzz_exec.c: the `lorasim exec` batch reader (sim/exec.c) on any bytes.
**
** The input is a batch's JSON text, run exactly like `lorasim exec --in`
** with the cpu_ref backend and every execution path.  Exit status 2 (bad
** input) and 0 are fine; status 1 means the exact paths disagreed, the
** planner hit a bug or memory ran out on a small input: a finding.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../sim/exec.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text)
    return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  int st = lsim_exec_text(text, size, "fuzz.json", "", NULL);
  if (st != 0 && st != 2) {
    (void)lsim_exec_text(text, size, "fuzz.json", "", stderr);
    fprintf(stderr, "fuzz_exec: exit status %d\n", st);
    abort();
  }
  free(text);
  return 0;
}
