/*
** test_profile.c: the profiled cost model, version 2 profiles and `lorasim
** profile` (issue 20; docs/PROFILE.md).
**
**   - the fit reproduces the coefficients of a measurement file made from
**     known coefficients plus 3% noise (tests/fixtures/profile/README.md),
**     and its predictions stay within the noise of the truth
**   - predictions never decrease with more rows, more context or more
**     adapter work
**   - a replay with a profile (synthetic-1b.json, invented coefficients)
**     prices every prefill-only iteration by the profile's formula, times
**     every load by its copy model, and gives the same rows twice
**   - a malformed profile fails with E_DEV_PROFILE and its JSON path; one
**     measured at another shape with E_DEV_PROFILE_SHAPE; $.gpu with
**     $.model.preset finds profiles/GPU/PRESET.json, or fails with
**     E_DEV_PROFILE_NONE
**   - the command: usage errors, no device (exit 2, nothing written), a
**     dry run, the grid through cpu_ref's residency protocol, bad
**     measurement files named by line and column
*/
#include <criterion/criterion.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define LSIM_TMP_PREFIX "/tmp/lsim-prof-"
#include "cli_harness.h"

#include "backends/backend.h"
#include "engine/plan.h"
#include "sim/profile.h"
#include "sim/profile_fit.h"
#include "sim/scenario.h"

#ifdef LSIM_HAVE_CUDA
#include "backends/cuda/cuda.h"
#endif

TestSuite(profile, .init = mk_tmp, .fini = rm_tmp);

#define FIX LSIM_TEST_DIR "/fixtures/profile"

static void write_file(const char *rel, const char *text) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", tmpdir, rel);
  FILE *f = fopen(p, "w");
  cr_assert_not_null(f);
  fputs(text, f);
  fclose(f);
}

static int exists(const char *rel) {
  char p[512];
  struct stat st;
  snprintf(p, sizeof p, "%s/%s", tmpdir, rel);
  return stat(p, &st) == 0;
}

static sqlite3 *open_db(const char *rel) {
  char p[512];
  sqlite3 *h;
  snprintf(p, sizeof p, "%s/%s", tmpdir, rel);
  cr_assert_eq(sqlite3_open_v2(p, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  return h;
}

static long long q1(sqlite3 *h, const char *sql) {
  sqlite3_stmt *st;
  cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK, "%s", sql);
  cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
  long long v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return v;
}

/* The coefficients tools/synth_profile.awk made synthetic-8b.csv with. */
static const lsim_cost_coef truth8b = {{60000, 3200000, 180, 220000, 150, 2000,
                                        28, 5000, 1.1, 1500, 40, 0.00002}};

Test(profile, fit_reproduces_the_coefficients) {
  char a[1024];
  snprintf(a, sizeof a,
           "profile --model llama-3-8b --fit '%s/synthetic-8b.csv' --gpu "
           "synthetic --out p.json",
           FIX);
  cr_assert_eq(lorasim(a), 0, "%s", out);
  char path[512];
  snprintf(path, sizeof path, "%s/p.json", tmpdir);
  lsim_profile p;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_profile_read(path, &p, &eb), 0, "%s", eb.msg);
  cr_assert_eq(p.version, 2);
  cr_assert_str_eq(p.gpu_class, "synthetic");
  cr_assert_eq(p.hidden, 4096);
  cr_assert_eq(p.layers, 32);
  /* the terms each grid point exercises on its own come back within a
  ** few percent of the truth; the knee and the weight-streaming time trade
  ** against the fixed cost below it, so they get a wider band */
  static const struct {
    int term;
    double tol;
  } id[] = {{LSIM_COST_DECODE_CTX, 0.05},  {LSIM_COST_PREFILL_PAIR, 0.05},
            {LSIM_COST_LORA_ELEM, 0.05},   {LSIM_COST_LORA_MODULE, 0.10},
            {LSIM_COST_KNEE, 0.15},        {LSIM_COST_GEMM, 0.15}};
  for (size_t i = 0; i < sizeof id / sizeof id[0]; i++) {
    double got = p.coef.c[id[i].term], want = truth8b.c[id[i].term];
    cr_assert(fabs(got - want) <= id[i].tol * want, "%s: fitted %g, truth %g",
              lsim_cost_terms()[id[i].term], got, want);
  }
  /* the per-token GEMM slope above the knee */
  double slope = p.coef.c[LSIM_COST_GEMM] / p.coef.c[LSIM_COST_KNEE];
  double tslope = truth8b.c[LSIM_COST_GEMM] / truth8b.c[LSIM_COST_KNEE];
  cr_assert(fabs(slope - tslope) <= 0.03 * tslope, "slope %g vs %g", slope,
            tslope);
  cr_assert(p.copy_on);
  cr_assert(fabs(p.copy_gbps - 50) <= 0.03 * 50, "gbps %g", p.copy_gbps);
  cr_assert(fabs(p.copy_latency_ns - 12000) <= 0.15 * 12000, "latency %g",
            p.copy_latency_ns);
  /* and every point is predicted within the noise of the noise-free truth */
  lsim_prof_row *rows;
  int n;
  char csv[512];
  snprintf(csv, sizeof csv, "%s/synthetic-8b.csv", FIX);
  cr_assert_eq(lsim_prof_csv_read(csv, &rows, &n, &eb), 0, "%s", eb.msg);
  int checked = 0;
  for (int i = 0; i < n; i++) {
    if (rows[i].kind != LSIM_PROF_ITER || rows[i].rep != 0)
      continue;
    double t = (double)lsim_prof_predict(&truth8b, &rows[i]);
    double f = (double)lsim_prof_predict(&p.coef, &rows[i]);
    cr_assert(fabs(f - t) <= 0.03 * t, "point %d: fit %g, truth %g",
              rows[i].point, f, t);
    checked++;
  }
  free(rows);
  cr_assert_geq(checked, 40);
  /* the residuals the profile reports are the noise's size */
  cr_assert(strstr(out, "fit all") && strstr(out, "written to p.json"), "%s",
            out);
}

Test(profile, predictions_are_monotone_in_tokens_and_context) {
  lsim_profile p;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_profile_read(FIX "/synthetic-1b.json", &p, &eb), 0, "%s",
               eb.msg);
  /* the fixture predates the decode rank-row term: give it one */
  cr_assert_eq(p.coef.c[LSIM_COST_LORA_DECODE_ELEM], 0);
  cr_assert_eq(p.coef.c[LSIM_COST_LORA_ADAPTER_ELEM], 0);
  p.coef.c[LSIM_COST_LORA_DECODE_ELEM] = 4e-4;
  p.coef.c[LSIM_COST_LORA_ADAPTER_ELEM] = 2e-3;
  lsim_cost_prof c;
  cr_assert_eq(lsim_cost_prof_bind(&p.coef, 16, 4, 12288, &c, &eb), 0, "%s",
               eb.msg);
  cr_assert_gt(c.lora_decode_rank_row_ps, 0);
  cr_assert_gt(c.lora_adapter_rank_ps, 0);
  /* every feature grown alone, from several starting points, across the
  ** knee (160 tokens) */
  static const int64_t base[][10] = {
      {1, 1, 1, 0, 0, 0, 0, 0, 0, 0},    {100, 1, 0, 0, 1, 5050, 1, 800, 0, 8},
      {300, 44, 44, 20000, 1, 32896, 3, 2400, 352, 24},
      {8192, 1, 0, 0, 1, 33558528, 1, 65536, 0, 8}};
  for (size_t b = 0; b < sizeof base / sizeof base[0]; b++)
    for (int k = 0; k < 10; k++)
      for (int64_t step = 1; step <= 100000; step *= 7) {
        lsim_cost_feat f0 = {base[b][0], base[b][1], base[b][2], base[b][3],
                             base[b][4], base[b][5], base[b][6], base[b][7],
                             base[b][6] > 0, base[b][8], base[b][9]};
        lsim_cost_feat f1 = f0;
        int64_t *fld[10] = {&f1.tokens,       &f1.sampled,
                            &f1.decode_rows,  &f1.decode_ctx,
                            &f1.prefill_seqs, &f1.prefill_pairs,
                            &f1.lora_segments, &f1.rank_rows,
                            &f1.decode_rank_rows, &f1.adapter_ranks};
        *fld[k] += step;
        f1.lora = f1.lora_segments > 0;
        int64_t t0 = lsim_cost_prof_ns(&c, &f0), t1 = lsim_cost_prof_ns(&c, &f1);
        cr_assert_geq(t1, t0, "base %zu feature %d +%lld: %lld < %lld", b, k,
                      (long long)step, (long long)t1, (long long)t0);
      }
  /* and through plans: a decode batch at a growing context, a prefill of
  ** growing length (the features a replay computes) */
  lsim_cost_model m = {0, 0, 0, 0, 0, c};
  int64_t prev = 0;
  for (int64_t ctx = 0; ctx <= 65536; ctx = ctx ? 2 * ctx : 1) {
    lsim_plan pl = LSIM_PLAN_INIT;
    pl.positions = 1;
    for (int i = 0; i < 8; i++) {
      lsim_plan_entry e = {i, 0, i % 3, 8, LSIM_PHASE_DECODE, 1, 0, ctx, 1, i};
      cr_assert_eq(lsim_plan_push(&pl, &e, &eb), 0);
    }
    cr_assert_eq(lsim_plan_finish(&pl, &eb), 0);
    int64_t t = lsim_cost_plan_ns(&m, &pl);
    cr_assert_geq(t, prev, "ctx %lld", (long long)ctx);
    prev = t;
    lsim_plan_release(&pl);
  }
  prev = 0;
  for (int rows = 1; rows <= 16384; rows = rows * 3 / 2 + 1) {
    lsim_plan pl = LSIM_PLAN_INIT;
    pl.positions = 1;
    lsim_plan_entry e = {1, 0, 0, 16, LSIM_PHASE_PREFILL, rows, 0, 512, 1, 0};
    cr_assert_eq(lsim_plan_push(&pl, &e, &eb), 0);
    cr_assert_eq(lsim_plan_finish(&pl, &eb), 0);
    int64_t t = lsim_cost_plan_ns(&m, &pl);
    cr_assert_gt(t, prev, "rows %d", rows);
    prev = t;
    lsim_plan_release(&pl);
  }
}

/* hash of the rows a replay decides (tools/hash_rows.sh's queries) */
static void rows_digest(const char *db, char *buf, size_t n) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "cd '%s' && sqlite3 -batch %s 'select * from events order by "
           "seq; select iter, start_tick, end_tick, backend_ns from "
           "iterations order by iter; select * from requests order by "
           "request' | sha256sum",
           tmpdir, db);
  FILE *p = popen(cmd, "r");
  cr_assert_not_null(p);
  cr_assert_not_null(fgets(buf, (int)n, p));
  pclose(p);
}

Test(profile, replay_with_a_profile_uses_it_and_is_deterministic) {
  char a[1024];
  snprintf(a, sizeof a, "replay '%s/scn-1b.json' --db a.db --quiet --no-plots",
           FIX);
  cr_assert_eq(lorasim(a), 0, "%s", out);
  snprintf(a, sizeof a, "replay '%s/scn-1b.json' --db b.db --quiet --no-plots",
           FIX);
  cr_assert_eq(lorasim(a), 0, "%s", out);
  char ha[128], hb[128];
  rows_digest("a.db", ha, sizeof ha);
  rows_digest("b.db", hb, sizeof hb);
  cr_assert_str_eq(ha, hb, "two replays with one profile differ");

  lsim_profile p;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_profile_read(FIX "/synthetic-1b.json", &p, &eb), 0);
  /* q,k,v,o of llama-3.2-1b: d_in + d_out summed, 16 layers */
  int64_t elems = (2048 + 2048) + 2 * (2048 + 512) + (2048 + 2048);
  lsim_cost_prof c;
  cr_assert_eq(lsim_cost_prof_bind(&p.coef, 16, 4, elems, &c, &eb), 0);
  sqlite3 *h = open_db("a.db");
  sqlite3_stmt *st;
  /* a prefill-only iteration of one request: its rows at positions 0..,
  ** one sequence sampled, one adapter segment */
  cr_assert_eq(sqlite3_prepare_v2(h,
                                  "SELECT prefill_rows, segments, "
                                  "true_rank_rows, backend_ns, end_tick - "
                                  "start_tick FROM iterations WHERE "
                                  "prefill_reqs = 1 AND decode_reqs = 0",
                                  -1, &st, NULL),
               SQLITE_OK);
  int n = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    int64_t r = sqlite3_column_int64(st, 0);
    lsim_cost_feat f = {r, 1, 0, 0, 1, r * (r + 1) / 2,
                        sqlite3_column_int64(st, 1),
                        sqlite3_column_int64(st, 2), 1, 0,
                        /* one adapter at the request's rank */
                        sqlite3_column_int64(st, 1) > 0
                            ? sqlite3_column_int64(st, 2) / r
                            : 0};
    int64_t want = lsim_cost_prof_ns(&c, &f);
    cr_assert_eq(sqlite3_column_int64(st, 3), want, "rows %lld",
                 (long long)r);
    cr_assert_eq(sqlite3_column_int64(st, 4), (want + 999) / 1000);
    n++;
  }
  sqlite3_finalize(st);
  cr_assert_gt(n, 0);
  /* every load lasts the profile's copy model: 10 us + bytes / 50 GB/s */
  cr_assert_eq(sqlite3_prepare_v2(
                   h,
                   "SELECT c.tick - s.tick, s.bytes FROM events s JOIN events "
                   "c ON c.adapter = s.adapter AND c.attempt = s.attempt AND "
                   "c.kind = (SELECT kind FROM events_named WHERE kind_name = "
                   "'adapter_load_completed' LIMIT 1) WHERE s.kind = (SELECT "
                   "kind FROM events_named WHERE kind_name = "
                   "'adapter_load_started' LIMIT 1) AND c.seq > s.seq",
                   -1, &st, NULL),
               SQLITE_OK);
  n = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    int64_t bytes = sqlite3_column_int64(st, 1);
    int64_t ns = (int64_t)ceil(10000.0 + (double)bytes / 50.0);
    cr_assert_eq(sqlite3_column_int64(st, 0), (ns + 999) / 1000,
                 "a load of %lld bytes", (long long)bytes);
    n++;
  }
  sqlite3_finalize(st);
  cr_assert_gt(n, 0);
  /* the run names its profile among its inputs */
  cr_assert_eq(q1(h, "SELECT count(*) FROM run_inputs WHERE role = "
                     "'profile' AND path LIKE '%synthetic-1b.json'"),
               1);
  sqlite3_close(h);
}

/* A copy of synthetic-1b.json with `from` replaced by `to` as b.json. */
static void mutate(const char *from, const char *to) {
  FILE *f = fopen(FIX "/synthetic-1b.json", "r");
  cr_assert_not_null(f);
  char buf[8192];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char *at = strstr(buf, from);
  cr_assert_not_null(at, "fixture lacks %s", from);
  char res[8192];
  snprintf(res, sizeof res, "%.*s%s%s", (int)(at - buf), buf, to,
           at + strlen(from));
  write_file("b.json", res);
}

Test(profile, bad_profiles_name_the_json_path) {
  static const char *cases[][3] = {
      {"\"lorasim_profile\": 2", "\"lorasim_profile\": 3", "$.lorasim_profile"},
      {"\"gpu\": {", "\"gpux\": {", "$.gpu"},
      {"\"class\": \"synthetic\"", "\"class\": \"Synth etic\"", "$.gpu.class"},
      {"\"name\": \"synthetic", "\"name\": 5, \"x\": \"", "$.gpu.name"},
      {"\"model\": {", "\"modelx\": {", "$.model"},
      {"\"hidden\": 2048,", "", "$.model.hidden"},
      {"\"layers\": 16", "\"layers\": 0", "$.model.layers"},
      {"\"vocab\": 128256", "\"vocab\": 1.5", "$.model.vocab"},
      {"\"coefficients\": {", "\"coefficientsx\": {", "$.coefficients"},
      {"\"token_ns\": 40,", "", "$.coefficients.token_ns"},
      {"\"decode_ctx_ns\": 7", "\"decode_ctx_ns\": -7",
       "$.coefficients.decode_ctx_ns"},
      {"\"knee_tokens\": 160", "\"knee_tokens\": 0",
       "$.coefficients.knee_tokens"},
      {"\"gemm_weight_ns\": 600000", "\"gemm_weight_ns\": \"fast\"",
       "$.coefficients.gemm_weight_ns"},
      {"\"gbps\": 50", "\"gbps\": 0", "$.copy.gbps"},
      {"\"latency_ns\": 10000,", "", "$.copy.latency_ns"},
      {"\"created\": \"2026-12-06T00:00:00Z\"", "\"created\": 2026",
       "$.created"},
      {"\"fit\": { \"points\": 0 }", "\"fit\": [0]", "$.fit"},
  };
  char a[1024];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    mutate(cases[i][0], cases[i][1]);
    snprintf(a, sizeof a,
             "replay '%s/scn-1b.json' --db b.db --quiet --no-plots --profile "
             "b.json",
             FIX);
    cr_assert_eq(lorasim(a), 2, "case %zu: %s", i, out);
    cr_assert(strstr(out, "E_DEV_PROFILE") && strstr(out, cases[i][2]),
              "case %zu (%s): %s", i, cases[i][2], out);
    cr_assert(!exists("b.db"), "case %zu wrote a database", i);
  }
  /* a duplicate key is refused wherever it is */
  mutate("\"token_ns\": 40,", "\"token_ns\": 40, \"token_ns\": 41,");
  snprintf(a, sizeof a,
           "replay '%s/scn-1b.json' --db b.db --quiet --no-plots --profile "
           "b.json",
           FIX);
  cr_assert_eq(lorasim(a), 2, "%s", out);
  cr_assert(strstr(out, "$.coefficients.token_ns"), "%s", out);
  /* named by the scenario, the error carries the scenario's key too */
  mutate("\"knee_tokens\": 160", "\"knee_tokens\": -1");
  write_file("s.json", "{\"name\": \"s\", \"seed\": 1, \"workers\": "
                       "{\"count\": 1, \"pool_pages\": 64, \"page_bytes\": "
                       "1048576, \"h2d_gbps\": 8, \"max_batch_tokens\": 512, "
                       "\"max_batch_requests\": 8}, \"model\": {\"preset\": "
                       "\"llama-3.2-1b\", \"adapter_modules\": [\"q_proj\"]}, "
                       "\"cost\": {\"profile\": \"b.json\"}, \"adapters\": "
                       "{\"count\": 2, \"ranks\": [{\"rank\": 8, \"weight\": "
                       "1}]}, \"tenants\": [{\"name\": \"t\", "
                       "\"traffic_weight\": 1}], \"trace\": {\"generator\": "
                       "{\"requests\": 4, \"rate_per_s\": 1, "
                       "\"prompt_tokens\": {\"dist\": \"uniform\", \"min\": "
                       "8, \"max\": 8}, \"output_tokens\": {\"dist\": "
                       "\"uniform\", \"min\": 2, \"max\": 2}}}}");
  cr_assert_eq(lorasim("replay s.json --db s.db --quiet --no-plots"), 2, "%s",
               out);
  cr_assert(strstr(out, "E_DEV_PROFILE") && strstr(out, "$.cost.profile") &&
                strstr(out, "$.coefficients.knee_tokens"),
            "%s", out);
}

Test(profile, another_shape_is_refused) {
  char a[1024];
  /* four layers of the 1B: the profile timed sixteen */
  snprintf(a, sizeof a,
           "replay '%s/scn-1b.json' --db b.db --quiet --no-plots --set "
           "'$.model.layers=4'",
           FIX);
  cr_assert_eq(lorasim(a), 2, "%s", out);
  cr_assert(strstr(out, "E_DEV_PROFILE_SHAPE") && strstr(out, "layers 16") &&
                strstr(out, "$.model.layers is 4"),
            "%s", out);
  /* another preset */
  snprintf(a, sizeof a,
           "replay '%s/scn-1b.json' --db b.db --quiet --no-plots --set "
           "'$.model.preset=llama-3.2-3b' --set '$.model.layers=16'",
           FIX);
  cr_assert_eq(lorasim(a), 2, "%s", out);
  cr_assert(strstr(out, "E_DEV_PROFILE_SHAPE") && strstr(out, "hidden 2048"),
            "%s",
            out);
  /* a scenario without a full shape (the hand-written quickstart kind) */
  snprintf(a, sizeof a,
           "replay '%s/fixtures/replay/tiny.json' --db b.db --quiet "
           "--no-plots --profile '%s/synthetic-1b.json'",
           LSIM_TEST_DIR, FIX);
  cr_assert_eq(lorasim(a), 2, "%s", out);
  cr_assert(strstr(out, "E_DEV_PROFILE_SHAPE") && strstr(out, "not a full"),
            "%s", out);
  /* a tensor-parallel worker: the profile timed one GPU */
  snprintf(a, sizeof a,
           "replay '%s/scn-1b.json' --db b.db --quiet --no-plots --set "
           "'$.workers.tp_degree=2'",
           FIX);
  cr_assert_eq(lorasim(a), 2, "%s", out);
  cr_assert(strstr(out, "E_SCN_CONFLICT") && strstr(out, "tp_degree"), "%s",
            out);
  cr_assert(!exists("b.db"));
}

Test(profile, gpu_key_picks_the_profile_of_the_preset) {
  char sh[2048], a[1024];
  cr_assert_eq(system(NULL), 1);
  snprintf(sh, sizeof sh,
           "mkdir -p '%s/profiles/synthetic' '%s/scn' && cp '%s/synthetic-1b.json' "
           "'%s/profiles/synthetic/llama-3.2-1b.json' && sed "
           "'s/\"cost\": { \"profile\": \"synthetic-1b.json\" },/\"gpu\": "
           "\"synthetic\",/' '%s/scn-1b.json' > '%s/scn/g.json'",
           tmpdir, tmpdir, FIX, tmpdir, FIX, tmpdir);
  cr_assert_eq(system(sh), 0);
  /* scn/../profiles/synthetic/llama-3.2-1b.json */
  cr_assert_eq(lorasim("replay scn/g.json --db g.db --quiet --no-plots"), 0,
               "%s", out);
  sqlite3 *h = open_db("g.db");
  cr_assert_eq(q1(h, "SELECT count(*) FROM run_inputs WHERE role = "
                     "'profile' AND path LIKE "
                     "'%profiles/synthetic/llama-3.2-1b.json'"),
               1);
  sqlite3_close(h);
  /* the same rows as the scenario that names the file */
  snprintf(a, sizeof a, "replay '%s/scn-1b.json' --db n.db --quiet --no-plots",
           FIX);
  cr_assert_eq(lorasim(a), 0, "%s", out);
  char hg[128], hn[128];
  rows_digest("g.db", hg, sizeof hg);
  rows_digest("n.db", hn, sizeof hn);
  cr_assert_str_eq(hg, hn);
  /* a GPU without a profile of that preset */
  cr_assert_eq(lorasim("replay scn/g.json --db x.db --quiet --no-plots --set "
                       "'$.gpu=b200'"),
               2, "%s", out);
  cr_assert(strstr(out, "E_DEV_PROFILE_NONE") && strstr(out, "$.gpu") &&
                strstr(out, "b200/llama-3.2-1b.json"),
            "%s", out);
  /* not a class name */
  cr_assert_eq(lorasim("replay scn/g.json --db x.db --quiet --no-plots --set "
                       "'$.gpu=\"../x\"'"),
               2, "%s", out);
  cr_assert(strstr(out, "E_SCN_RANGE") && strstr(out, "$.gpu"), "%s", out);
  /* a profile named explicitly must be of $.gpu's class */
  snprintf(a, sizeof a,
           "replay scn/g.json --db x.db --quiet --no-plots --set "
           "'$.gpu=h200' --set '$.cost.profile=\"%s/synthetic-1b.json\"'",
           FIX);
  cr_assert_eq(lorasim(a), 2, "%s", out);
  cr_assert(strstr(out, "E_SCN_CONFLICT") && strstr(out, "'synthetic'"), "%s",
            out);
  cr_assert(!exists("x.db"));
}

Test(profile, command_usage_and_no_device) {
  cr_assert_eq(lorasim("profile"), 2, "%s", out);
  cr_assert(strstr(out, "E_USAGE") && strstr(out, "--model"), "%s", out);
  cr_assert_eq(lorasim("profile --model gpt-5"), 2, "%s", out);
  cr_assert(strstr(out, "llama-3-8b"), "%s", out);
  cr_assert_eq(lorasim("profile --model llama-3-8b --reps 0"), 2, "%s", out);
  cr_assert_eq(lorasim("profile --model llama-3-8b --target-sets qv,qx"), 2,
               "%s", out);
  cr_assert_eq(lorasim("profile --model llama-3-8b --backend model"), 2, "%s",
               out);
  cr_assert_eq(lorasim("profile --model llama-3-8b --out nodir/p.json"), 2,
               "%s", out);
  cr_assert(strstr(out, "E_OUT_NO_DIR"), "%s", out);
  cr_assert_eq(lorasim("profile --help"), 0, "%s", out);
  cr_assert(strstr(out, "--quick") && strstr(out, "--fit"), "%s", out);
  int gpu = 0;
#ifdef LSIM_HAVE_CUDA
  char d[256];
  gpu = lsim_cuda_describe(d, sizeof d) > 0;
#endif
  if (!gpu) {
    cr_assert_eq(lorasim("profile --model llama-3-8b --out p.json"), 2, "%s",
                 out);
    cr_assert(strstr(out, "E_DEV_NO_DEVICE") && strstr(out, "CUDA device"),
              "%s", out);
    cr_assert(!exists("p.json") && !exists("p.csv"));
  }
  /* a dry run needs no device: one row per point that fits, ns 0 */
  cr_assert_eq(lorasim("profile --model llama-3-8b --quick --dry-run --csv "
                       "g.csv"),
               0, "%s", out);
  cr_assert(exists("g.csv") && !exists("results"));
  lsim_prof_row *rows;
  int n;
  char p[512];
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  snprintf(p, sizeof p, "%s/g.csv", tmpdir);
  /* ns 0 is no measurement: the reader refuses it, so a dry run cannot be
  ** fitted by mistake */
  cr_assert_eq(lsim_prof_csv_read(p, &rows, &n, &eb), LSIM_E_DEV_PROFILE);
  cr_assert(strstr(eb.msg, "column ns"), "%s", eb.msg);
}

Test(profile, the_grid_runs_through_the_residency_protocol, .timeout = 120) {
  /* cpu_ref follows the engine's pages and refuses any event out of order
  ** (E_STAGE_*): every KV allocation, stage, publication, launch, retire
  ** at its fence and release of the grid must be right for it to finish */
  cr_assert_eq(lorasim("profile --model llama-3.2-1b --backend cpu_ref "
                       "--quick --reps 1 --target-sets qkvo --max-ctx 2048 "
                       "--pool-gib 2 --out c.json"),
               0, "%s", out);
  cr_assert(strstr(out, "points measured") && strstr(out, "written to c.json"),
            "%s", out);
  char p[512];
  snprintf(p, sizeof p, "%s/c.json", tmpdir);
  lsim_profile pr;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_profile_read(p, &pr, &eb), 0, "%s", eb.msg);
  cr_assert_str_eq(pr.gpu_class, "cpu_ref");
  /* cpu_ref times its stages (lsim_backend_load_ns): the copy model is
  ** fitted to them, one stage row per adapter staged */
  cr_assert(pr.copy_on, "no copy model from the stages");
  cr_assert(strstr(out, "copy model (adapter stages)"), "%s", out);
  lsim_prof_row *rows;
  int n, stages = 0, iters = 0;
  snprintf(p, sizeof p, "%s/c.csv", tmpdir);
  cr_assert_eq(lsim_prof_csv_read(p, &rows, &n, &eb), 0, "%s", eb.msg);
  for (int i = 0; i < n; i++) {
    stages += rows[i].kind == LSIM_PROF_COPY && rows[i].cls == LSIM_PROF_STAGE;
    iters += rows[i].kind == LSIM_PROF_ITER;
    if (rows[i].kind == LSIM_PROF_COPY)
      cr_assert_gt(rows[i].bytes, 0);
  }
  free(rows);
  cr_assert_gt(stages, 0);
  cr_assert_gt(iters, 0);
  /* its measurements refit to the same profile */
  cr_assert_eq(lorasim("profile --model llama-3.2-1b --fit c.csv --gpu cpu_ref "
                       "--out d.json"),
               0, "%s", out);
  lsim_profile p2;
  snprintf(p, sizeof p, "%s/d.json", tmpdir);
  cr_assert_eq(lsim_profile_read(p, &p2, &eb), 0, "%s", eb.msg);
  for (int i = 0; i < LSIM_COST_NTERMS; i++)
    cr_assert(fabs(pr.coef.c[i] - p2.coef.c[i]) <=
                  1e-9 * fabs(pr.coef.c[i]) + 1e-12,
              "%s: %g vs %g", lsim_cost_terms()[i], pr.coef.c[i],
              p2.coef.c[i]);
}

Test(profile, bad_measurement_files_name_line_and_column) {
  static const char *cases[][2] = {
      {"kind,point\n", "header expected"},
      {LSIM_PROF_CSV_HEADER_V1 "\nwalk,0,prefill,qv,0,1,1,0,0,1,1,0,0,0,2,4,0,0,"
                            "0,10\n",
       ":2: column kind"},
      {LSIM_PROF_CSV_HEADER_V1 "\niter,0,prefill,qv,0,1,1,0,0,1,1,0,0,0,2,4,0,0,"
                            "0,10\niter,0,lunch,qv,0,1,1,0,0,1,1,0,0,0,2,4,0,"
                            "0,0,10\n",
       ":3: column class"},
      {LSIM_PROF_CSV_HEADER_V1 "\niter,0,prefill,qv,0,-1,1,0,0,1,1,0,0,0,2,4,0,0,"
                            "0,10\n",
       ":2: column tokens"},
      {LSIM_PROF_CSV_HEADER_V1 "\niter,0,prefill,qv,0,1,1,0,0,1,1,0,0,0,2,4,0,0,"
                            "0\n",
       ":2: column ns"},
      {LSIM_PROF_CSV_HEADER_V1 "\niter,0,prefill,qv,0,1,1,0,0,1,1,0,0,0,2,4,0,0,"
                            "0,10,7\n",
       ":2: more than 20 columns"},
      /* the current header: 21 columns, the last one checked too */
      {LSIM_PROF_CSV_HEADER "\niter,0,decode,qv,0,1,1,1,1,0,0,0,0,0,2,4,0,0,"
                            "0,10\n",
       ":2: column decode_rank_rows: missing"},
      {LSIM_PROF_CSV_HEADER "\niter,0,decode,qv,0,1,1,1,1,0,0,1,1,8,2,4,1,8,"
                            "0,10,9\n",
       ":2: column decode_rank_rows: more than rank_rows"},
      {LSIM_PROF_CSV_HEADER "\niter,0,decode,qv,0,1,1,1,1,0,0,1,1,8,2,4,1,8,"
                            "0,10,8,1\n",
       ":2: more than 21 columns"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    write_file("m.csv", cases[i][0]);
    cr_assert_eq(lorasim("profile --model llama-3-8b --fit m.csv --out "
                         "m.json"),
                 2, "case %zu: %s", i, out);
    cr_assert(strstr(out, "E_DEV_PROFILE") && strstr(out, cases[i][1]),
              "case %zu: %s", i, out);
    cr_assert(!exists("m.json"));
  }
}

/* The held-out scenarios of the fidelity gate (scenarios/fidelity/) load
** with an 8B profile of their GPU class, and the quickstart one replays;
** the two that read real traces are checked when ../shared has them. */
Test(profile, held_out_scenarios_load_with_a_profile) {
  char a[1024], pd[1024];
  snprintf(a, sizeof a,
           "profile --model llama-3-8b --fit '%s/synthetic-8b.csv' --gpu "
           "synthetic --out p.json",
           FIX);
  cr_assert_eq(lorasim(a), 0, "%s", out);
  snprintf(pd, sizeof pd, "mkdir -p '%s/profiles/synthetic' && cp '%s/p.json' "
           "'%s/profiles/synthetic/llama-3-8b.json'", tmpdir, tmpdir, tmpdir);
  cr_assert_eq(system(pd), 0);
  snprintf(pd, sizeof pd, "%s/profiles", tmpdir);
  cr_assert_eq(setenv("LORASIM_PROFILE_DIR", pd, 1), 0);
  static const char *const scn[] = {"quickstart", "azure-2k", "mooncake-long"};
  static const char *const set[] = {"$.gpu=synthetic"};
  for (int i = 0; i < 3; i++) {
    static lsim_scenario sc;
    char path[512];
    lsim_errbuf eb = LSIM_ERRBUF_INIT;
    snprintf(path, sizeof path, "%s/scenarios/fidelity/%s.json",
             LSIM_SOURCE_DIR, scn[i]);
    lsim_scenario_src src = {NULL, 1, set};
    lsim_err rc = lsim_scenario_load_src(&sc, path, &src, &eb);
    if (rc == LSIM_E_SCN_TRACE_FILE) {
      fprintf(stderr, "%s: its trace is not here, not checked: %s\n", scn[i],
                  eb.msg);
      continue;
    }
    cr_assert_eq(rc, 0, "%s: %s", scn[i], eb.msg);
    cr_assert(sc.cost_prof.on && sc.copy_prof, "%s", scn[i]);
    cr_assert_eq(sc.model.hidden, 4096);
    cr_assert(strstr(sc.cost_profile, "profiles/synthetic/llama-3-8b.json"));
  }
  snprintf(a, sizeof a,
           "replay '%s/scenarios/fidelity/quickstart.json' --set "
           "'$.gpu=synthetic' --db q.db --quiet --no-plots",
           LSIM_SOURCE_DIR);
  cr_assert_eq(lorasim(a), 0, "%s", out);
  unsetenv("LORASIM_PROFILE_DIR");
  /* without the class's profile the scenario says where it looked */
  snprintf(a, sizeof a,
           "replay '%s/scenarios/fidelity/quickstart.json' --set "
           "'$.gpu=nosuchgpu' --db r.db --quiet --no-plots",
           LSIM_SOURCE_DIR);
  cr_assert_eq(lorasim(a), 2, "%s", out);
  cr_assert(strstr(out, "E_DEV_PROFILE_NONE") &&
                strstr(out, "nosuchgpu/llama-3-8b.json"),
            "%s", out);
}

/* tools/fidelity_gate.sh over cpu_ref's measured clock (no GPU): every
** figure of its gate.csv is recomputed here from the two databases, and
** each verdict follows from its figure and target. */
Test(profile, the_gate_reports_what_the_databases_hold, .timeout = 120) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd,
           "cd '%s' && sh '%s/tools/fidelity_gate.sh' -b '%s' -o gate -m "
           "'--backend cpu_ref' '%s/small-1b.json' > gate.out 2>&1",
           tmpdir, LSIM_SOURCE_DIR, LSIM_BIN, FIX);
  int st = system(cmd);
  cr_assert(WIFEXITED(st) && (WEXITSTATUS(st) == 0 || WEXITSTATUS(st) == 1),
            "gate exit %d", st);
  /* the per-iteration error and the latencies, from the rows */
  sqlite3 *m = open_db("gate/small-1b/measured.db");
  sqlite3 *x = open_db("gate/small-1b/model.db");
  sqlite3_stmt *q;
  cr_assert_eq(sqlite3_prepare_v2(m,
                                  "SELECT model_ns, measured_ns FROM "
                                  "iterations WHERE result = 'ok' AND "
                                  "measured_ns > 0",
                                  -1, &q, NULL),
               SQLITE_OK);
  double sum = 0;
  int n = 0;
  while (sqlite3_step(q) == SQLITE_ROW) {
    double a = (double)sqlite3_column_int64(q, 0);
    double b = (double)sqlite3_column_int64(q, 1);
    sum += fabs(a - b) / b;
    n++;
  }
  sqlite3_finalize(q);
  cr_assert_gt(n, 0);
  double mape = 100 * sum / n;
  double lat[4];
  static const char *const keys[] = {"ttft_p50_ms", "ttft_p99_ms",
                                     "tbt_p50_ms", "tbt_p99_ms"};
  for (int k = 0; k < 4; k++) {
    char sql[200];
    snprintf(sql, sizeof sql,
             "SELECT value FROM runs_summary WHERE key = '%s'", keys[k]);
    sqlite3_stmt *a, *b;
    cr_assert_eq(sqlite3_prepare_v2(x, sql, -1, &a, NULL), SQLITE_OK);
    cr_assert_eq(sqlite3_prepare_v2(m, sql, -1, &b, NULL), SQLITE_OK);
    cr_assert_eq(sqlite3_step(a), SQLITE_ROW);
    cr_assert_eq(sqlite3_step(b), SQLITE_ROW);
    double vm = sqlite3_column_double(a, 0), vx = sqlite3_column_double(b, 0);
    lat[k] = 100 * fabs(vm - vx) / vx;
    sqlite3_finalize(a);
    sqlite3_finalize(b);
  }
  sqlite3_close(m);
  sqlite3_close(x);
  /* gate.csv: scenario,metric,value_pct,target_pct,pass */
  char p[512], line[256];
  snprintf(p, sizeof p, "%s/gate/gate.csv", tmpdir);
  FILE *f = fopen(p, "r");
  cr_assert_not_null(f);
  int seen = 0, lats = 0;
  cr_assert_not_null(fgets(line, sizeof line, f));
  while (fgets(line, sizeof line, f)) {
    char metric[64], pass[8];
    double v, t;
    cr_assert_eq(sscanf(line, "small-1b,%63[^,],%lf,%lf,%7s", metric, &v, &t,
                        pass),
                 4, "%s", line);
    cr_assert_str_eq(pass, v <= t ? "yes" : "no", "%s", line);
    if (strncmp(metric, "iteration MAPE", 14) == 0) {
      cr_assert(fabs(v - mape) < 0.01, "MAPE %g, rows give %g", v, mape);
      seen++;
    }
    for (int k = 0; k < 4; k++)
      if (strcmp(metric, keys[k]) == 0) {
        cr_assert(fabs(v - lat[k]) < 0.01, "%s %g vs %g", keys[k], v, lat[k]);
        lats++;
      }
  }
  fclose(f);
  cr_assert_eq(seen, 1);
  cr_assert_eq(lats, 4);
  /* -r: the same gate from the recorded measured run (--clock-from), no
  ** measuring backend: the same table to the last digit */
  snprintf(cmd, sizeof cmd,
           "cd '%s' && sh '%s/tools/fidelity_gate.sh' -b '%s' -o regate -r "
           "gate '%s/small-1b.json' > regate.out 2>&1 && cmp gate/gate.csv "
           "regate/gate.csv",
           tmpdir, LSIM_SOURCE_DIR, LSIM_BIN, FIX);
  st = system(cmd);
  cr_assert(WIFEXITED(st) && (WEXITSTATUS(st) == 0 || WEXITSTATUS(st) == 1),
            "regate exit %d", st);
  snprintf(cmd, sizeof cmd, "cd '%s' && cmp gate/gate.csv regate/gate.csv",
           tmpdir);
  cr_assert_eq(system(cmd), 0, "the recorded gate differs");
  snprintf(cmd, sizeof cmd,
           "cd '%s' && grep -q 'clock-from' regate/small-1b/measured.log || "
           "sqlite3 regate/small-1b/measured.db \"SELECT 1 FROM run_inputs "
           "WHERE role = 'clock-from'\" | grep -q 1",
           tmpdir);
  cr_assert_eq(system(cmd), 0, "the regate did not replay the recorded run");
}

/* The committed profiles (profiles/CLASS/PRESET.json) are fits of the
** measurement files beside them: refitting each file gives its
** coefficients back exactly (the fit is deterministic), the decode
** rank-row term is identified by the real measurements (> 0), and the
** profile loads for its preset. */
Test(profile, committed_profiles_refit_from_their_measurements) {
  static const char *presets[] = {"llama-3-8b", "llama-3.2-1b"};
  for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
    char a[1024], pj[512];
    snprintf(pj, sizeof pj, LSIM_TEST_DIR "/../profiles/h100/%s.json",
             presets[i]);
    snprintf(a, sizeof a,
             "profile --model %s --fit '" LSIM_TEST_DIR
             "/../profiles/h100/%s.csv' --gpu h100 --out refit.json",
             presets[i], presets[i]);
    cr_assert_eq(lorasim(a), 0, "%s", out);
    lsim_profile c, r;
    lsim_errbuf eb = LSIM_ERRBUF_INIT;
    cr_assert_eq(lsim_profile_read(pj, &c, &eb), 0, "%s", eb.msg);
    char rj[512];
    snprintf(rj, sizeof rj, "%s/refit.json", tmpdir);
    cr_assert_eq(lsim_profile_read(rj, &r, &eb), 0, "%s", eb.msg);
    for (int k = 0; k < LSIM_COST_NTERMS; k++)
      cr_assert(fabs(c.coef.c[k] - r.coef.c[k]) <=
                    1e-12 * fabs(c.coef.c[k]),
                "%s %s: committed %.17g, refit %.17g", presets[i],
                lsim_cost_terms()[k], c.coef.c[k], r.coef.c[k]);
    cr_assert_gt(c.coef.c[LSIM_COST_LORA_DECODE_ELEM], 0, "%s", presets[i]);
    cr_assert(c.copy_on && fabs(c.copy_gbps - r.copy_gbps) <=
                               1e-12 * c.copy_gbps);
  }
}
