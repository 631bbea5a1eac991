/*
** test_input_cli.c: how `lorasim exec`, `compress` and `replay` read their
** input files, through the real binary.
**
** Covered: a FIFO as exec --in, compress --in or the scenario is refused
** at once (run under timeout(1): a blocking open would hang); /dev/zero as
** compress --in is refused (it used to grow to out of memory) and a file
** over the 256 MiB cap is E_FILE_SIZE; duplicate keys in exec batches,
** compress collections and cost profiles are E_JSON_DUP_KEY with the JSON
** path; exec integers between 2^53 and 2^63 come out exact and 2^63 is
** refused; out of memory in exec is E_NOMEM, not a syntax error; and a
** batch of 100,000 requests completes (exec used to be quadratic).
*/
#define LSIM_TMP_PREFIX "/tmp/lsim-input-cli-"
#include "cli_harness.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

TestSuite(input, .init = mk_tmp, .fini = rm_tmp, .timeout = 580);

static void write_file(const char *name, const char *text) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", tmpdir, name);
  FILE *f = fopen(p, "w");
  cr_assert_not_null(f);
  fputs(text, f);
  fclose(f);
}

static void mkfifo_in_tmp(const char *name) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", tmpdir, name);
  cr_assert_eq(mkfifo(p, 0600), 0);
}

/* A one-module batch: d_in 1, d_out 1, W = [[w]], one base request x = [[1]]. */
static void one_by_one(const char *name, const char *w) {
  char t[512];
  snprintf(t, sizeof t,
           "{\"d_in\": 1, \"d_out\": 1, \"W\": [[%s]], \"adapters\": [], "
           "\"requests\": [{\"id\": \"r\", \"phase\": \"decode\", "
           "\"adapter\": null, \"x\": [[1]]}]}",
           w);
  write_file(name, t);
}

Test(input, fifos_and_devices_are_refused_without_blocking, .timeout = 60) {
  mkfifo_in_tmp("in.fifo");
  int rc = lorasim("exec --in in.fifo");
  cr_assert_eq(rc, 2, "%s", out);
  cr_assert(strstr(out, "E_FILE_TYPE") && strstr(out, "in.fifo") &&
                strstr(out, "fifo, not a regular file"),
            "%s", out);
  rc = lorasim("compress --in in.fifo --out o.json");
  cr_assert_eq(rc, 2, "%s", out);
  cr_assert(strstr(out, "E_FILE_TYPE"), "%s", out);
  rc = lorasim("compress --verify in.fifo");
  cr_assert_eq(rc, 2, "%s", out);
  cr_assert(strstr(out, "E_FILE_TYPE"), "%s", out);
  /* a scenario keeps its code for an unreadable file (E_IO) */
  rc = lorasim("replay in.fifo --db x.db --quiet --no-plots");
  cr_assert_eq(rc, 2, "%s", out);
  cr_assert(strstr(out, "E_IO") && strstr(out, "fifo"), "%s", out);
  rc = lorasim("compress --in /dev/zero --out o.json");
  cr_assert_eq(rc, 2, "%s", out);
  cr_assert(strstr(out, "E_FILE_TYPE") && strstr(out, "/dev/zero"), "%s", out);
  rc = lorasim("exec --in /dev/zero");
  cr_assert_eq(rc, 2, "%s", out);
  cr_assert(strstr(out, "E_FILE_TYPE"), "%s", out);
}

/* lorasim() under timeout(1), so that a blocking open fails the test
** instead of hanging it. */
Test(input, a_fifo_does_not_block) {
  mkfifo_in_tmp("b.fifo");
  int rc = lorasim("version > v.txt; timeout 20 '" LSIM_BIN "' exec --in "
                   "b.fifo 2>&1; echo status $?; timeout 20 '" LSIM_BIN
                   "' compress --in b.fifo --out o.json 2>&1; echo status $?");
  cr_assert_eq(rc, 0, "%s", out);
  cr_assert(strstr(out, "status 2") && !strstr(out, "status 124"),
            "timed out or wrong status: %s", out);
}

Test(input, compress_in_has_a_size_cap) {
  char p[512];
  snprintf(p, sizeof p, "%s/huge.json", tmpdir);
  int fd = open(p, O_WRONLY | O_CREAT, 0600);
  cr_assert_geq(fd, 0);
  cr_assert_eq(ftruncate(fd, ((off_t)256 << 20) + 1), 0); /* sparse */
  close(fd);
  int rc = lorasim("compress --in huge.json --out o.json");
  cr_assert_eq(rc, 2, "%s", out);
  cr_assert(strstr(out, "E_FILE_SIZE") && strstr(out, "256 MiB"), "%s", out);
  rc = lorasim("exec --in huge.json");
  cr_assert_eq(rc, 2, "%s", out);
  cr_assert(strstr(out, "E_FILE_SIZE"), "%s", out);
}

Test(input, exec_refuses_duplicate_keys_with_their_path) {
  write_file("d1.json",
             "{\"d_in\": 1, \"d_out\": 1, \"d_in\": 2, \"W\": [[1]], "
             "\"adapters\": [], \"requests\": [{\"id\": \"r\", \"phase\": "
             "\"decode\", \"x\": [[1]]}]}");
  int rc = lorasim("exec --in d1.json");
  cr_assert_eq(rc, 2, "%s", out);
  cr_assert(strstr(out, "E_JSON_DUP_KEY") && strstr(out, "d1.json: $.d_in: "
                                                         "duplicate key"),
            "%s", out);
  write_file("d2.json",
             "{\"d_in\": 1, \"d_out\": 1, \"W\": [[1]], \"adapters\": [], "
             "\"requests\": [{\"id\": \"r\", \"phase\": \"decode\", \"x\": "
             "[[1]]}, {\"id\": \"s\", \"phase\": \"decode\", \"x\": [[2]], "
             "\"x\": [[3]]}]}");
  rc = lorasim("exec --in d2.json --out r.json");
  cr_assert_eq(rc, 2, "%s", out);
  cr_assert(strstr(out, "$.requests[1].x: duplicate key"), "%s", out);
  struct stat st;
  char p[512];
  snprintf(p, sizeof p, "%s/r.json", tmpdir);
  cr_assert_neq(stat(p, &st), 0, "nothing written on error");
}

Test(input, exec_integers_are_exact_between_2_53_and_2_63) {
  one_by_one("b53.json", "9007199254740993");
  int rc = lorasim("exec --in b53.json");
  cr_assert_eq(rc, 0, "%s", out);
  cr_assert(strstr(out, "\"y\":[[\"9007199254740993\"]]"), "%s", out);
  one_by_one("b63.json", "9223372036854775807");
  rc = lorasim("exec --in b63.json");
  cr_assert_eq(rc, 0, "%s", out);
  cr_assert(strstr(out, "\"y\":[[\"9223372036854775807\"]]"), "%s", out);
  one_by_one("bneg.json", "-9223372036854775808");
  rc = lorasim("exec --in bneg.json");
  cr_assert_eq(rc, 0, "%s", out);
  cr_assert(strstr(out, "\"y\":[[\"-9223372036854775808\"]]"), "%s", out);
  one_by_one("bover.json", "9223372036854775808");
  rc = lorasim("exec --in bover.json");
  cr_assert_eq(rc, 2, "%s", out);
  cr_assert(strstr(out, "E_RATIONAL at $.W[0][0]") &&
                strstr(out, "9223372036854775808"),
            "%s", out);
  /* the same value as a string is exact rational input */
  one_by_one("bstr.json", "\"9223372036854775808\"");
  rc = lorasim("exec --in bstr.json");
  cr_assert_eq(rc, 0, "%s", out);
  cr_assert(strstr(out, "\"y\":[[\"9223372036854775808\"]]"), "%s", out);
}

Test(input, compress_and_profiles_refuse_duplicate_keys) {
  write_file("c.json", "{\"base\": \"b\", \"module\": \"m\", \"d_in\": 3, "
                       "\"d_out\": 3, \"adapters\": [{\"name\": \"a\", "
                       "\"rank\": 1, \"rank\": 2, \"A\": [[1,0,0]], "
                       "\"B\": [[1],[0],[0]]}]}");
  int rc = lorasim("compress --in c.json --out o.json");
  cr_assert_eq(rc, 2, "%s", out);
  cr_assert(strstr(out, "E_JSON_DUP_KEY") &&
                strstr(out, "c.json: $.adapters[0].rank: duplicate key"),
            "%s", out);
  write_file("p.json", "{\"lorasim_profile\": 1, \"cost\": {\"iter_fixed_ns\": "
                       "1, \"prefill_token_ns\": 1, \"decode_token_ns\": 1, "
                       "\"segment_ns\": 1, \"rank_row_ps\": 1, "
                       "\"segment_ns\": 900}}");
  char a[1024];
  snprintf(a, sizeof a,
           "replay '%s/fixtures/replay/tiny.json' --db p.db --quiet "
           "--no-plots --profile p.json",
           LSIM_TEST_DIR);
  rc = lorasim(a);
  cr_assert_eq(rc, 2, "%s", out);
  cr_assert(strstr(out, "E_JSON_DUP_KEY") &&
                strstr(out, "$.cost.segment_ns: duplicate key"),
            "%s", out);
}

/* an address-space limit starves ASan's own shadow mappings: the test runs
** in the builds without it (gcc says __SANITIZE_ADDRESS__, clang
** __has_feature(address_sanitizer)) */
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define LSIM_TEST_SANITIZED 1
#endif
#endif
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__) && \
    !defined(LSIM_TEST_SANITIZED)
Test(input, exec_out_of_memory_is_reported_as_such) {
  /* 4M numbers: 8 MB of text, about 250 MB of parse tree, under a 160 MB
  ** address-space limit */
  char p[512];
  snprintf(p, sizeof p, "%s/big.json", tmpdir);
  FILE *f = fopen(p, "w");
  cr_assert_not_null(f);
  fputs("{\"d_in\": 1, \"d_out\": 1, \"W\": [[1]], \"pad\": [0", f);
  for (int i = 1; i < 4000000; i++)
    fputs(",0", f);
  fputs("]}", f);
  fclose(f);
  int rc = lorasim("exec --in big.json 2>&1; echo status $?");
  cr_assert(strstr(out, "E_MISSING"), "without a limit it parses: %s", out);
  (void)rc;
  /* lorasim() runs the binary first: `version` is the harmless command */
  rc = lorasim("version > v.txt; ulimit -v 160000; '" LSIM_BIN "' exec --in big.json 2>&1; "
               "echo status $?");
  cr_assert(strstr(out, "E_NOMEM") && strstr(out, "out of memory") &&
                strstr(out, "status 1"),
            "%s", out);
  cr_assert_null(strstr(out, "invalid"), "%s", out);
}
#endif

Test(input, exec_is_linear_in_the_request_count) {
  /* 200,000 requests, each with its own adapter: a quadratic reader needs
  ** about ten minutes (10k took 4.5 s, 20k 19 s); ours takes seconds, and
  ** timeout(1) fails the test at 240 s */
  char p[512];
  int n = 200000;
  snprintf(p, sizeof p, "%s/many.json", tmpdir);
  FILE *f = fopen(p, "w");
  cr_assert_not_null(f);
  fputs("{\"d_in\": 2, \"d_out\": 2, \"W\": [[1, 0], [0, 1]], \"adapters\": [",
        f);
  for (int i = 0; i < n; i++)
    fprintf(f, "%s{\"id\": \"a%d\", \"rank\": 1, \"A\": [[1, %d]], \"B\": "
               "[[1], [0]]}",
            i ? ", " : "", i, i % 5);
  fputs("], \"requests\": [", f);
  for (int i = 0; i < n; i++)
    fprintf(f, "%s{\"id\": \"r%d\", \"phase\": \"decode\", \"adapter\": "
               "\"a%d\", \"x\": [[1, %d]]}",
            i ? ", " : "", i, (i * 7) % n, i % 3);
  fputs("], \"packed_order\": [", f);
  for (int i = 0; i < n; i++)
    fprintf(f, "%s\"r%d\"", i ? ", " : "", n - 1 - i);
  fputs("]}", f);
  fclose(f);
  int rc = lorasim("version > v.txt; timeout 240 '" LSIM_BIN "' exec --in many.json --out "
                   "r.json --path grouped 2>&1; echo status $?");
  cr_assert(strstr(out, "status 0"), "%s", out);
  (void)rc;
  /* every request is in the plan's sample rows */
  snprintf(p, sizeof p, "%s/r.json", tmpdir);
  f = fopen(p, "r");
  cr_assert_not_null(f);
  static char res[64 << 20];
  size_t got = fread(res, 1, sizeof res - 1, f);
  fclose(f);
  res[got] = '\0';
  cr_assert_not_null(strstr(res, "\"r0\":"));
  cr_assert_not_null(strstr(res, "\"r199999\":"));
}
