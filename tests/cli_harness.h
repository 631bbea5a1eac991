/*
** cli_harness.h: run the real lorasim binary from a test, in a fresh
** temporary directory per test.  Define LSIM_TMP_PREFIX (for example
** "/tmp/lsim-cli-") before including; use mk_tmp/rm_tmp as the suite's
** .init/.fini.  `out` holds the last command's stdout and stderr.
*/
#ifndef LSIM_CLI_HARNESS_H
#define LSIM_CLI_HARNESS_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

static char tmpdir[256];
static char out[65536];

static inline void mk_tmp(void) {
  snprintf(tmpdir, sizeof tmpdir, "%sXXXXXX", LSIM_TMP_PREFIX);
  cr_assert_not_null(mkdtemp(tmpdir));
}

static inline void rm_tmp(void) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  cr_assert_eq(system(cmd), 0);
}

/* Run `lorasim ARGS` in tmpdir, stdout+stderr into out; the exit status. */
static inline int lorasim(const char *args) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s 2>&1", tmpdir, LSIM_BIN, args);
  FILE *p = popen(cmd, "r");
  cr_assert_not_null(p);
  size_t n = fread(out, 1, sizeof out - 1, p);
  out[n] = 0;
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#endif /* LSIM_CLI_HARNESS_H */
