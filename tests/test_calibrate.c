/*
** test_calibrate.c: cost profiles and `lorasim calibrate` (issue 6 part 6).
**
**   - a profile given to replay (--profile) or named by the scenario
**     ($.cost.profile) replaces $.cost: every iteration's modelled
**     backend_ns (model backend) equals the profile's formula on its own
**     ledgers, and the iteration durations change accordingly
**   - bad profiles are bad input: exit 2, E_DEV_PROFILE, the JSON path
**   - calibrate without a device fails with E_DEV_NO_DEVICE and exit 1; on
**     a machine with one, a short calibration writes a profile that loads
**     and reports the held-out error
*/
#include <criterion/criterion.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LSIM_TMP_PREFIX "/tmp/lsim-cal-"
#include "cli_harness.h"

#ifdef LSIM_HAVE_CUDA
#include "backends/cuda/cuda.h"
#endif

TestSuite(calibrate, .init = mk_tmp, .fini = rm_tmp);

static void write_file(const char *rel, const char *text) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", tmpdir, rel);
  FILE *f = fopen(p, "w");
  cr_assert_not_null(f);
  fputs(text, f);
  fclose(f);
}

static long long q1(const char *rel, const char *sql) {
  char p[512];
  sqlite3 *h;
  sqlite3_stmt *st;
  snprintf(p, sizeof p, "%s/%s", tmpdir, rel);
  cr_assert_eq(sqlite3_open_v2(p, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK, "%s", sql);
  cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
  long long v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(h);
  return v;
}

#define PROFILE                                                            \
  "{\"lorasim_profile\": 1, \"kernel\": \"test\",\n"                       \
  " \"cost\": {\"iter_fixed_ns\": 7000, \"prefill_token_ns\": 3,"         \
  " \"decode_token_ns\": 11, \"segment_ns\": 900, \"rank_row_ps\": 2500}}\n"

/* The profile's formula, as SQL over an iterations row. */
#define FORMULA                                                            \
  "max(1, 7000 + prefill_rows * 3 + decode_rows * 11 + segments * 900 + " \
  "(true_rank_rows * 2500) / 1000)"

Test(calibrate, replay_profile_replaces_the_cost_model) {
  char a[1024];
  write_file("p.json", PROFILE);
  snprintf(a, sizeof a,
           "replay '%s/fixtures/replay/tiny.json' --db plain.db --quiet "
           "--no-plots", LSIM_TEST_DIR);
  cr_assert_eq(lorasim(a), 0, "%s", out);
  snprintf(a, sizeof a,
           "replay '%s/fixtures/replay/tiny.json' --db prof.db --quiet "
           "--no-plots --profile p.json", LSIM_TEST_DIR);
  cr_assert_eq(lorasim(a), 0, "%s", out);
  long long n = q1("prof.db", "SELECT count(*) FROM iterations");
  cr_assert_gt(n, 0);
  cr_assert_eq(q1("prof.db", "SELECT count(*) FROM iterations WHERE "
                             "backend_ns = " FORMULA), n,
               "backend_ns is not the profile's cost");
  /* the plain run used $.cost, which this profile does not match */
  cr_assert_lt(q1("plain.db", "SELECT count(*) FROM iterations WHERE "
                              "backend_ns = " FORMULA), n);
  /* iteration durations follow the profile: ticks are 1 us in tiny.json */
  cr_assert_eq(q1("prof.db", "SELECT count(*) FROM iterations WHERE "
                             "end_tick - start_tick = (" FORMULA
                             " + 999) / 1000"), n);
}

Test(calibrate, scenario_names_a_profile_relative_to_itself) {
  char a[1024], path[600];
  snprintf(path, sizeof path, "%s/fixtures/replay/tiny.json", LSIM_TEST_DIR);
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f);
  static char text[65536];
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = 0;
  /* tiny.json with "profile" added to $.cost */
  char *at = strstr(text, "\"rank_row_ps\"");
  cr_assert_not_null(at);
  static char mod[70000];
  snprintf(mod, sizeof mod, "%.*s\"profile\": \"prof/p.json\", %s",
           (int)(at - text), text, at);
  snprintf(a, sizeof a, "mkdir -p '%s/prof'", tmpdir);
  cr_assert_eq(system(a), 0);
  write_file("prof/p.json", PROFILE);
  write_file("s.json", mod);
  cr_assert_eq(lorasim("replay s.json --db s.db --quiet --no-plots"), 0, "%s",
               out);
  long long it = q1("s.db", "SELECT count(*) FROM iterations");
  cr_assert_eq(q1("s.db", "SELECT count(*) FROM iterations WHERE "
                          "backend_ns = " FORMULA), it);
  /* a missing profile is bad scenario input naming the JSON path */
  write_file("prof/p.json", "{\"lorasim_profile\": 1, \"cost\": "
                            "{\"iter_fixed_ns\": 1}}");
  cr_assert_eq(lorasim("replay s.json --db s2.db --quiet --no-plots"), 2,
               "%s", out);
  cr_assert(strstr(out, "E_DEV_PROFILE") && strstr(out, "$.cost.profile") &&
                strstr(out, "prefill_token_ns"),
            "%s", out);
}

Test(calibrate, bad_profiles_are_bad_input) {
  char a[1024];
  static const char *bad[][2] = {
      {"not json", "not valid JSON"},
      {"{\"cost\": {}}", "$.lorasim_profile"},
      {"{\"lorasim_profile\": 3, \"cost\": {}}", "$.lorasim_profile"},
      {"{\"lorasim_profile\": 1}", "$.cost"},
      {"{\"lorasim_profile\": 1, \"cost\": {\"iter_fixed_ns\": -1, "
       "\"prefill_token_ns\": 1, \"decode_token_ns\": 1, \"segment_ns\": 1, "
       "\"rank_row_ps\": 1}}",
       "$.cost.iter_fixed_ns"},
      {"{\"lorasim_profile\": 1, \"cost\": {\"iter_fixed_ns\": 1, "
       "\"prefill_token_ns\": 1.5, \"decode_token_ns\": 1, \"segment_ns\": 1, "
       "\"rank_row_ps\": 1}}",
       "$.cost.prefill_token_ns"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    write_file("b.json", bad[i][0]);
    snprintf(a, sizeof a,
             "replay '%s/fixtures/replay/tiny.json' --db b.db --quiet "
             "--no-plots --profile b.json", LSIM_TEST_DIR);
    cr_assert_eq(lorasim(a), 2, "case %zu: %s", i, out);
    cr_assert(strstr(out, "E_DEV_PROFILE") && strstr(out, bad[i][1]),
              "case %zu: %s", i, out);
  }
  snprintf(a, sizeof a,
           "replay '%s/fixtures/replay/tiny.json' --db b.db --quiet "
           "--no-plots --profile nowhere.json", LSIM_TEST_DIR);
  cr_assert_eq(lorasim(a), 2, "%s", out);
  cr_assert(strstr(out, "E_FILE_MISSING") && strstr(out, "nowhere.json"), "%s",
            out);
}

Test(calibrate, usage_errors_exit_2) {
  cr_assert_eq(lorasim("calibrate --reps 0"), 2, "%s", out);
  cr_assert(strstr(out, "E_USAGE"), "%s", out);
  cr_assert_eq(lorasim("calibrate extra"), 2, "%s", out);
  cr_assert_eq(lorasim("calibrate --help"), 0, "%s", out);
  cr_assert(strstr(out, "--holdout"), "%s", out);
  /* the model shape comes from the held-out scenario */
  cr_assert_eq(lorasim("calibrate --tensor-shape model"), 2, "%s", out);
  cr_assert(strstr(out, "--holdout"), "%s", out);
  cr_assert_eq(lorasim("calibrate --tensor-shape big --holdout x.json"), 2,
               "%s", out);
  cr_assert_eq(lorasim("calibrate --tensor-layers 3"), 2, "%s", out);
  cr_assert(strstr(out, "needs --tensor-shape model"), "%s", out);
}

static int have_gpu(void) {
#ifdef LSIM_HAVE_CUDA
  char d[256];
  return lsim_cuda_describe(d, sizeof d) > 0;
#else
  return 0;
#endif
}

Test(calibrate, without_a_device_it_fails_clearly) {
  if (have_gpu())
    cr_skip_test("a CUDA device is present: the no-device path is not "
                 "reachable here");
  cr_assert_eq(lorasim("calibrate --out p.json"), 1, "%s", out);
  cr_assert(strstr(out, "E_DEV_NO_DEVICE") && strstr(out, "CUDA device"),
            "%s", out);
  char p[512];
  snprintf(p, sizeof p, "%s/p.json", tmpdir);
  FILE *f = fopen(p, "r");
  cr_assert_null(f, "a profile was written without a device");
}

Test(calibrate, on_a_device_the_profile_loads_and_holdout_is_reported,
     .timeout = 600) {
  if (!have_gpu())
    cr_skip_test("no CUDA device (GPU tests run on the device machine)");
  char a[1024];
  snprintf(a, sizeof a,
           "calibrate --reps 3 --out p.json --db h.db --holdout "
           "'%s/fixtures/replay/tiny.json'", LSIM_TEST_DIR);
  cr_assert_eq(lorasim(a), 0, "%s", out);
  cr_assert(strstr(out, "held-out error per iteration: median"), "%s", out);
  snprintf(a, sizeof a,
           "replay '%s/fixtures/replay/tiny.json' --db m.db --quiet "
           "--no-plots --profile p.json", LSIM_TEST_DIR);
  cr_assert_eq(lorasim(a), 0, "%s", out);
  cr_assert_gt(q1("m.db", "SELECT count(*) FROM iterations"), 0);
}

Test(calibrate, model_shape_profile_names_the_scenario_modules,
     .timeout = 600) {
  if (!have_gpu())
    cr_skip_test("no CUDA device (GPU tests run on the device machine)");
  char a[1024];
  snprintf(a, sizeof a,
           "calibrate --reps 3 --out pm.json --db hm.db --tensor-shape model "
           "--tensor-layers 1 --holdout '%s/fixtures/replay/tiny_model.json'",
           LSIM_TEST_DIR);
  cr_assert_eq(lorasim(a), 0, "%s", out);
  cr_assert(strstr(out, "model shape of") && strstr(out, "1 layers x 2 "
                                                           "targets"),
            "%s", out);
  char p[512], buf[4096];
  snprintf(p, sizeof p, "%s/pm.json", tmpdir);
  FILE *f = fopen(p, "r");
  cr_assert_not_null(f);
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  cr_assert(strstr(buf, "\"tensor_shape\":\t\"model\"") &&
                strstr(buf, "\"v_proj\"") && strstr(buf, "1000"),
            "%s", buf);
  /* the held-out replay ran at the model shape: its validations-free log
  ** still has device time on every iteration */
  snprintf(p, sizeof p, "%s/hm.db", tmpdir);
  cr_assert_eq(q1("hm.db", "SELECT count(*) FROM iterations WHERE "
                           "backend_ns IS NULL OR backend_ns <= 0"), 0);
}
