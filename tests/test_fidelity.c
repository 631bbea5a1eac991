/*
** test_fidelity.c: --execute and --clock (sim/replay.c, docs/FIDELITY.md)
** and `lorasim fidelity` (sim/fidelity.c), through the real binary and the
** databases it writes.
**
** Every figure the fidelity report prints is recomputed here in SQL from
** the rows (nearest rank as ceil(p n / 100) in integers), and the clock's
** spans are checked against the times recorded beside them.  The fixture
** (tests/fixtures/clock/small.json: 24 requests, backend cpu_ref) runs in
** well under a second.  GPU-recorded databases dropped into
** tests/fixtures/fidelity (NAME.db) are checked the same way; without one the
** test says so and skips.
*/
#include <criterion/criterion.h>
#include <cjson/cJSON.h>
#include <glob.h>
#include <math.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LSIM_TMP_PREFIX "/tmp/lsim-fid-"
#include "cli_harness.h"

#define FIX LSIM_TEST_DIR "/fixtures/clock/small.json"

TestSuite(clock, .init = mk_tmp, .fini = rm_tmp, .timeout = 120);
TestSuite(fidelity, .init = mk_tmp, .fini = rm_tmp, .timeout = 120);

/* ---- helpers --------------------------------------------------------------------- */

static sqlite3 *open_db(const char *name) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", name[0] == '/' ? "" : tmpdir, name);
  sqlite3 *h = NULL;
  cr_assert_eq(sqlite3_open_v2(name[0] == '/' ? name : p, &h,
                               SQLITE_OPEN_READONLY, NULL),
               SQLITE_OK, "%s", p);
  return h;
}

static int64_t q_int(sqlite3 *h, const char *sql) {
  sqlite3_stmt *st = NULL;
  cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK, "%s: %s",
               sql, sqlite3_errmsg(h));
  cr_assert_eq(sqlite3_step(st), SQLITE_ROW, "%s", sql);
  int64_t v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return v;
}

static double q_dbl(sqlite3 *h, const char *sql) {
  sqlite3_stmt *st = NULL;
  cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK, "%s: %s",
               sql, sqlite3_errmsg(h));
  cr_assert_eq(sqlite3_step(st), SQLITE_ROW, "%s", sql);
  double v = sqlite3_column_type(st, 0) == SQLITE_NULL
                 ? NAN
                 : sqlite3_column_double(st, 0);
  sqlite3_finalize(st);
  return v;
}

static void q_text(sqlite3 *h, const char *sql, char *buf, size_t n) {
  sqlite3_stmt *st = NULL;
  cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK, "%s", sql);
  cr_assert_eq(sqlite3_step(st), SQLITE_ROW, "%s", sql);
  const unsigned char *t = sqlite3_column_text(st, 0);
  snprintf(buf, n, "%s", t ? (const char *)t : "(null)");
  sqlite3_finalize(st);
}

/* The number of entries in tmpdir. */
static int tmp_entries(void) {
  char cmd[400];
  snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", tmpdir);
  FILE *p = popen(cmd, "r");
  int n = -1;
  cr_assert_eq(fscanf(p, "%d", &n), 1);
  pclose(p);
  return n;
}

static cJSON *read_json(const char *name) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", tmpdir, name);
  FILE *f = fopen(p, "rb");
  cr_assert_not_null(f, "%s", p);
  static char buf[1 << 20];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  cJSON *j = cJSON_Parse(buf);
  cr_assert_not_null(j, "%s: not JSON", p);
  return j;
}

static void near(double got, double want, const char *what) {
  cr_assert(fabs(got - want) <= 1e-9 * fmax(1.0, fabs(want)),
            "%s: got %.17g, want %.17g", what, got, want);
}

/* A refused command: exit 2, its code in the message, nothing left in
** tmpdir (no database, lock, .prom or folder). */
static void refused(const char *args, const char *code) {
  cr_assert_eq(lorasim(args), 2, "%s\n%s", args, out);
  cr_assert_not_null(strstr(out, code), "%s: want %s\n%s", args, code, out);
  cr_assert_eq(tmp_entries(), 0, "%s left files behind\n%s", args, out);
}

/* ---- option validation ------------------------------------------------------------ */

Test(clock, each_bad_combination_is_refused_before_any_file) {
  refused("replay " FIX " --db r.db --clock bogus", "E_SCN_MODE:");
  cr_assert_not_null(strstr(out, "known: model, measured"), "%s", out);
  refused("replay " FIX " --db r.db --execute bogus", "E_SCN_MODE:");
  cr_assert_not_null(strstr(out, "known: adapters, full"), "%s", out);
  /* the scenario keys, with their JSON paths */
  refused("replay " FIX " --db r.db --set clock=tick", "E_SCN_MODE:");
  cr_assert_not_null(strstr(out, "$.clock"), "%s", out);
  refused("replay " FIX " --db r.db --set execute=7", "E_SCN_TYPE");
  cr_assert_not_null(strstr(out, "$.execute"), "%s", out);
  /* full execution is the cuda backend's */
  refused("replay " FIX " --db r.db --execute full", "E_SCN_MODE_BACKEND");
  refused("replay " FIX " --db r.db --execute full --backend model",
          "E_SCN_MODE_BACKEND");
  cr_assert_not_null(strstr(out, "--backend cuda"), "%s", out);
  /* the measured clock needs a backend that measures */
  refused("replay " FIX " --db r.db --clock measured --backend model",
          "E_SCN_MODE_BACKEND");
  cr_assert_not_null(strstr(out, "measures nothing"), "%s", out);
  refused("replay " FIX " --db r.db --backend model --set clock=measured",
          "E_SCN_MODE_BACKEND");
  /* ... and no TP group, whose collectives one device's time leaves out */
  refused("replay " FIX " --db r.db --clock measured --set "
          "workers.tp_degree=2",
          "E_SCN_MODE_TP");
  cr_assert_not_null(strstr(out, "collectives"), "%s", out);
  /* compare refuses before it makes its folder */
  refused("compare " FIX " --schedulers fcfs --out cmp --clock measured "
          "--set backend=model",
          "E_SCN_MODE_BACKEND");
  refused("compare " FIX " --schedulers fcfs --out cmp --execute nope",
          "E_SCN_MODE:");
  /* --resume takes the run's own choices */
  cr_assert_eq(lorasim("replay --resume r.db --clock measured"), 2, "%s", out);
  cr_assert_not_null(strstr(out, "E_USAGE"), "%s", out);
  /* without CUDA in the build, full execution says why */
  cr_assert_eq(lorasim("version"), 0, "%s", out);
  if (strstr(out, "cuda: not built")) {
    refused("replay " FIX " --db r.db --execute full --backend cuda",
            "E_SCN_MODE_DEVICE");
    cr_assert_not_null(strstr(out, "does not have"), "%s", out);
  } else {
    /* what the whole-model executor cannot run, refused from the
    ** scenario before the device is asked (a GPU or not) */
    refused("replay " FIX " --db r.db --execute full --backend cuda --set "
            "workers.tp_degree=2",
            "E_SCN_MODE_TP");
    cr_assert_not_null(strstr(out, "one device"), "%s", out);
    refused("replay " LSIM_TEST_DIR "/fixtures/replay/hotswap.json --db r.db "
            "--execute full --backend cuda",
            "E_DEV_UNSUPPORTED");
    cr_assert_not_null(strstr(out, "$.hotswaps"), "%s", out);
  }
}

/* ---- the model clock -------------------------------------------------------------- */

/* The rows a replay's decisions and times are in, as one string. */
static void rows_of(const char *db, char *buf, size_t n) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "sqlite3 %s 'SELECT * FROM events ORDER BY seq; SELECT * FROM "
           "requests ORDER BY request; SELECT iter, worker, start_tick, "
           "end_tick, model_ns, result FROM iterations ORDER BY iter' | "
           "sha256sum",
           db);
  char full[1400];
  snprintf(full, sizeof full, "cd '%s' && %s", tmpdir, cmd);
  FILE *p = popen(full, "r");
  cr_assert_not_null(p);
  cr_assert_not_null(fgets(buf, (int)n, p));
  pclose(p);
}

/* Under the model clock (the default, or asked for) the rows are the
** model backend's whatever backend executes, and every iteration lasts
** the ticks of its model_ns. */
Test(clock, model_clock_ignores_what_the_backend_measures) {
  cr_assert_eq(lorasim("replay " FIX " --backend model --db a.db --no-plots "
                       "--quiet"),
               0, "%s", out);
  cr_assert_eq(lorasim("replay " FIX " --clock model --db b.db --no-plots "
                       "--quiet"),
               0, "%s", out);
  cr_assert_eq(lorasim("replay " FIX " --backend model --set clock=model "
                       "--db c.db --no-plots --quiet"),
               0, "%s", out);
  char ra[128], rb[128], rc[128];
  rows_of("a.db", ra, sizeof ra);
  rows_of("b.db", rb, sizeof rb);
  rows_of("c.db", rc, sizeof rc);
  cr_assert_str_eq(ra, rb);
  cr_assert_str_eq(ra, rc);
  sqlite3 *a = open_db("a.db"), *b = open_db("b.db");
  /* the model backend's backend_ns is the cost model: model_ns at TP 1 */
  cr_assert_eq(q_int(a, "SELECT count(*) FROM iterations WHERE model_ns IS "
                        "NOT backend_ns OR measured_ns IS NOT NULL"),
               0);
  /* cpu_ref measured every iteration; none of it moved the clock */
  cr_assert_eq(q_int(b, "SELECT count(*) FROM iterations WHERE measured_ns "
                        "IS NULL"),
               0);
  for (int k = 0; k < 2; k++) {
    sqlite3 *h = k ? b : a;
    cr_assert_gt(q_int(h, "SELECT count(*) FROM iterations"), 100);
    cr_assert_eq(q_int(h, "SELECT count(*) FROM iterations WHERE end_tick - "
                          "start_tick != max(1, (model_ns + 999) / 1000)"),
                 0);
    cr_assert_eq(q_int(h, "SELECT count(*) FROM loads WHERE end_tick - "
                          "start_tick != max(1, (model_ns + 999) / 1000)"),
                 0);
  }
  /* the context each iteration reads: no prefix cache and no chunking in
  ** the fixture, so a prefill-only iteration reads its rows and nothing
  ** before them, and a decode row reads its prompt and earlier tokens */
  cr_assert_eq(q_int(b, "SELECT count(*) FROM iterations WHERE ctx_tokens IS "
                        "NULL OR ctx_tokens < prefill_rows + decode_rows"),
               0);
  cr_assert_eq(q_int(b, "SELECT count(*) FROM iterations WHERE decode_rows = "
                        "0 AND ctx_tokens != prefill_rows"),
               0);
  cr_assert_gt(q_int(b, "SELECT count(*) FROM iterations WHERE prefill_rows "
                        "= 0 AND ctx_tokens > decode_rows"),
               0);
  char v[64];
  q_text(b, "SELECT clock || ',' || execute FROM runs", v, sizeof v);
  cr_assert_str_eq(v, "model,adapters");
  /* no clock figures under the model clock */
  cr_assert_eq(q_int(b, "SELECT count(*) FROM runs_summary WHERE key LIKE "
                        "'clock%'"),
               0);
  sqlite3_close(a);
  sqlite3_close(b);
}

/* ---- the measured clock ------------------------------------------------------------ */

Test(clock, measured_clock_ends_spans_at_the_measured_times) {
  cr_assert_eq(lorasim("replay " FIX " --clock measured --db m.db "
                       "--no-plots"),
               0, "%s", out);
  cr_assert_not_null(strstr(out, "clock       measured:"), "%s", out);
  sqlite3 *h = open_db("m.db");
  int64_t iters = q_int(h, "SELECT count(*) FROM iterations WHERE result = "
                           "'ok'");
  cr_assert_gt(iters, 50);
  /* every iteration: end = start + the ticks of its measured ns */
  cr_assert_eq(q_int(h, "SELECT count(*) FROM iterations WHERE measured_ns IS "
                        "NULL OR model_ns IS NULL"),
               0);
  cr_assert_eq(q_int(h, "SELECT count(*) FROM iterations WHERE end_tick - "
                        "start_tick != max(1, (measured_ns + 999) / 1000)"),
               0);
  /* the measured times are not the model's (otherwise this proves nothing) */
  cr_assert_gt(q_int(h, "SELECT count(*) FROM iterations WHERE "
                        "max(1, (measured_ns + 999) / 1000) != "
                        "max(1, (model_ns + 999) / 1000)"),
               iters / 2);
  /* every load was staged in its own step, before its copy time was
  ** computed: none fell back to the model */
  int64_t loads = q_int(h, "SELECT count(*) FROM loads WHERE kind IN "
                           "('load', 'restore')");
  cr_assert_gt(loads, 5);
  cr_assert_eq(q_int(h, "SELECT count(*) FROM loads WHERE measured_ns IS "
                        "NULL"),
               0);
  cr_assert_eq(q_int(h, "SELECT count(*) FROM loads WHERE end_tick - "
                        "start_tick != max(1, (measured_ns + 999) / 1000)"),
               0);
  /* each load's row is its adapter_load_started event */
  cr_assert_eq(q_int(h, "SELECT count(*) FROM loads l WHERE NOT EXISTS "
                        "(SELECT 1 FROM events_named e WHERE e.kind_name = "
                        "'adapter_load_started' AND e.worker = l.worker AND "
                        "e.adapter = l.adapter AND e.tick <= l.start_tick)"),
               0);
  /* what drove the clock, counted */
  cr_assert_eq(q_int(h, "SELECT value FROM runs_summary WHERE key = "
                        "'clock_measured_iterations'"),
               q_int(h, "SELECT count(*) FROM iterations"));
  cr_assert_eq(q_int(h, "SELECT value FROM runs_summary WHERE key = "
                        "'clock_measured_loads'"),
               loads);
  cr_assert_eq(q_int(h, "SELECT sum(value) FROM runs_summary WHERE key IN "
                        "('clock_model_iterations', 'clock_model_loads', "
                        "'clock_model_other_copies')"),
               0);
  char v[128];
  q_text(h, "SELECT clock FROM runs", v, sizeof v);
  cr_assert_str_eq(v, "measured");
  q_text(h, "SELECT value FROM run_options WHERE name = 'clock'", v, sizeof v);
  cr_assert_str_eq(v, "measured");
  /* a measured-clock run's times are measured */
  q_text(h, "SELECT class || ' ' || source FROM runs_evidence WHERE key = "
            "'ttft_p50_ms'",
         v, sizeof v);
  cr_assert_str_eq(v, "measured measured_clock");
  /* ... but the default starvation threshold is the cost model's */
  q_text(h, "SELECT class || ' ' || source FROM runs_evidence WHERE key = "
            "'starvation_threshold_ms'",
         v, sizeof v);
  cr_assert_str_eq(v, "modeled sim_time");
  sqlite3_close(h);
  cr_assert_eq(lorasim("audit m.db"), 0, "%s", out);
  /* the same claim on a run whose clock was the model's is refused */
  char cmd[600];
  snprintf(cmd, sizeof cmd,
           "cd '%s' && cp m.db f.db && sqlite3 f.db \"UPDATE runs SET "
           "clock = 'model'\"",
           tmpdir);
  cr_assert_eq(system(cmd), 0);
  cr_assert_eq(lorasim("audit f.db"), 1, "%s", out);
  cr_assert_not_null(strstr(out, "E_CLAIM_CEILING"), "%s", out);
  cr_assert_not_null(strstr(out, "measured_clock"), "%s", out);
  /* --resume reruns it under the clock it was given */
  snprintf(cmd, sizeof cmd,
           "cd '%s' && sqlite3 m.db \"UPDATE runs SET status = 'running'\"",
           tmpdir);
  cr_assert_eq(system(cmd), 0);
  cr_assert_eq(lorasim("replay --resume m.db --quiet --no-plots"), 0, "%s",
               out);
  h = open_db("m.db");
  q_text(h, "SELECT clock || ' ' || status FROM runs", v, sizeof v);
  cr_assert_str_eq(v, "measured ok");
  cr_assert_eq(q_int(h, "SELECT count(*) FROM iterations WHERE end_tick - "
                        "start_tick != max(1, (measured_ns + 999) / 1000)"),
               0);
  sqlite3_close(h);
}

/* ---- the fidelity report ------------------------------------------------------------ */

/* The nearest-rank figures of one group, from the rows: the WHERE clause
** `cond` over table `t` (iterations or loads). */
typedef struct fig {
  int64_t n;
  double median, p90, mape, bias;
} fig;

static fig sql_fig(sqlite3 *h, const char *t, const char *cond) {
  char sql[2048];
  fig f;
  /* e = (model - measured) / measured; a = |e| */
  snprintf(sql, sizeof sql,
           "SELECT count(*) FROM %s WHERE measured_ns > 0 AND (%s)", t, cond);
  f.n = q_int(h, sql);
  if (!f.n)
    return f;
  snprintf(sql, sizeof sql,
           "WITH e AS (SELECT abs(model_ns - measured_ns) * 1.0 / measured_ns "
           "AS a FROM %s WHERE measured_ns > 0 AND (%s)), "
           "r AS (SELECT a, row_number() OVER (ORDER BY a) AS k FROM e) "
           "SELECT a * 100 FROM r WHERE k = max(1, (50 * %lld + 99) / 100)",
           t, cond, (long long)f.n);
  f.median = q_dbl(h, sql);
  snprintf(sql, sizeof sql,
           "WITH e AS (SELECT abs(model_ns - measured_ns) * 1.0 / measured_ns "
           "AS a FROM %s WHERE measured_ns > 0 AND (%s)), "
           "r AS (SELECT a, row_number() OVER (ORDER BY a) AS k FROM e) "
           "SELECT a * 100 FROM r WHERE k = max(1, (90 * %lld + 99) / 100)",
           t, cond, (long long)f.n);
  f.p90 = q_dbl(h, sql);
  snprintf(sql, sizeof sql,
           "SELECT avg(abs(model_ns - measured_ns) * 1.0 / measured_ns) * 100 "
           "FROM %s WHERE measured_ns > 0 AND (%s)",
           t, cond);
  f.mape = q_dbl(h, sql);
  snprintf(sql, sizeof sql,
           "SELECT avg((model_ns - measured_ns) * 1.0 / measured_ns) * 100 "
           "FROM %s WHERE measured_ns > 0 AND (%s)",
           t, cond);
  f.bias = q_dbl(h, sql);
  return f;
}

static const cJSON *find_group(const cJSON *arr, const char *g) {
  const cJSON *it;
  cJSON_ArrayForEach(it, arr) {
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(it, "group");
    if (cJSON_IsString(n) && strcmp(n->valuestring, g) == 0)
      return it;
  }
  return NULL;
}

static double jnum(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  cr_assert(cJSON_IsNumber(v), "%s is not a number", k);
  return v->valuedouble;
}

/* Every group of the report equals SQL over the rows, and no group is
** reported that the rows do not have (nor missing one they do). */
static void check_report(sqlite3 *h, const cJSON *j) {
  const char *ok = "result = 'ok' AND model_ns IS NOT NULL";
  struct {
    const char *group, *cond;
  } g[32];
  int ng = 0;
  char conds[32][256];
#define G(name, ...)                                                         \
  do {                                                                     \
    snprintf(conds[ng], sizeof conds[ng], __VA_ARGS__);                    \
    g[ng].group = name;                                                    \
    g[ng].cond = conds[ng];                                                \
    ng++;                                                                  \
  } while (0)
  G("all", "%s", ok);
  G("prefill_only", "%s AND decode_rows = 0", ok);
  G("decode_only", "%s AND prefill_rows = 0", ok);
  G("mixed", "%s AND prefill_rows > 0 AND decode_rows > 0", ok);
  G("rows_1", "%s AND prefill_rows + decode_rows = 1", ok);
  static const char *const rn[] = {"rows_2-7", "rows_8-31", "rows_32-127",
                                   "rows_128-511", "rows_512-2047",
                                   "rows_2048-8191"};
  static const int rl[] = {2, 8, 32, 128, 512, 2048, 8192};
  for (int i = 0; i < 6; i++)
    G(rn[i], "%s AND prefill_rows + decode_rows BETWEEN %d AND %d", ok, rl[i],
      rl[i + 1] - 1);
  G("rows_8192+", "%s AND prefill_rows + decode_rows >= 8192", ok);
  static const char *const cn[] = {"ctx_0-511", "ctx_512-2047",
                                   "ctx_2048-8191", "ctx_8192-32767",
                                   "ctx_32768-131071"};
  static const int cl[] = {0, 512, 2048, 8192, 32768, 131072};
  for (int i = 0; i < 5; i++)
    G(cn[i], "%s AND ctx_tokens BETWEEN %d AND %d", ok, cl[i], cl[i + 1] - 1);
  G("ctx_131072+", "%s AND ctx_tokens >= 131072", ok);
#undef G
  const cJSON *its = cJSON_GetObjectItemCaseSensitive(j, "iterations");
  cr_assert(cJSON_IsArray(its));
  int reported = 0;
  for (int i = 0; i < ng; i++) {
    fig f = sql_fig(h, "iterations", g[i].cond);
    const cJSON *o = find_group(its, g[i].group);
    if (!f.n) {
      cr_assert_null(o, "group %s reported with no rows", g[i].group);
      continue;
    }
    cr_assert_not_null(o, "group %s (%lld rows) not reported", g[i].group,
                       (long long)f.n);
    reported++;
    cr_assert_eq((int64_t)jnum(o, "n"), f.n, "%s", g[i].group);
    near(jnum(o, "median_pct"), f.median, g[i].group);
    near(jnum(o, "p90_pct"), f.p90, g[i].group);
    near(jnum(o, "mape_pct"), f.mape, g[i].group);
    near(jnum(o, "bias_pct"), f.bias, g[i].group);
  }
  cr_assert_eq(cJSON_GetArraySize(its), reported);
  const cJSON *lds = cJSON_GetObjectItemCaseSensitive(j, "loads");
  fig f = sql_fig(h, "loads", "kind IN ('load', 'restore')");
  const cJSON *o = find_group(lds, "all");
  if (!f.n) {
    cr_assert_null(o);
    return;
  }
  cr_assert_not_null(o);
  cr_assert_eq((int64_t)jnum(o, "n"), f.n);
  near(jnum(o, "median_pct"), f.median, "loads median");
  near(jnum(o, "p90_pct"), f.p90, "loads p90");
  near(jnum(o, "mape_pct"), f.mape, "loads mape");
  near(jnum(o, "bias_pct"), f.bias, "loads bias");
}

/* The evidence the report gives: the comparison is modeled, the measured
** side measured under an executing backend. */
static void check_evidence(const cJSON *j) {
  const cJSON *ev = cJSON_GetObjectItemCaseSensitive(j, "evidence");
  const char *want[3][2] = {{"model", "modeled"},
                            {"measured", "measured"},
                            {"error", "modeled"}};
  for (int i = 0; i < 3; i++) {
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(ev, want[i][0]), "class");
    cr_assert(cJSON_IsString(c) && strcmp(c->valuestring, want[i][1]) == 0,
              "evidence %s", want[i][0]);
  }
}

Test(fidelity, every_figure_is_the_rows) {
  cr_assert_eq(lorasim("replay " FIX " --clock measured --db m.db "
                       "--no-plots --quiet"),
               0, "%s", out);
  cr_assert_eq(lorasim("fidelity m.db --out fid --json f.json"), 0, "%s",
               out);
  cr_assert_not_null(strstr(out, "errors modeled (cost_model against "
                                 "backend_time)"),
                     "%s", out);
  cJSON *j = read_json("f.json");
  sqlite3 *h = open_db("m.db");
  check_report(h, j);
  check_evidence(j);
  /* the CSV says what the JSON says, row for row */
  char p[512], line[512];
  snprintf(p, sizeof p, "%s/fid/fidelity.csv", tmpdir);
  FILE *f = fopen(p, "r");
  cr_assert_not_null(f);
  cr_assert_not_null(fgets(line, sizeof line, f));
  cr_assert_str_eq(line, "section,group,n,median_pct,p90_pct,mape_pct,"
                         "bias_pct,class\n");
  int rows = 0;
  while (fgets(line, sizeof line, f)) {
    char sec[32], grp[32], cls[32];
    long long n;
    double md, p9, mp, bs;
    cr_assert_eq(sscanf(line, "%31[^,],%31[^,],%lld,%lf,%lf,%lf,%lf,%31s",
                        sec, grp, &n, &md, &p9, &mp, &bs, cls),
                 8, "%s", line);
    const cJSON *o = find_group(cJSON_GetObjectItemCaseSensitive(j, sec), grp);
    cr_assert_not_null(o, "%s", line);
    cr_assert_eq((long long)jnum(o, "n"), n);
    cr_assert(md == jnum(o, "median_pct") && p9 == jnum(o, "p90_pct") &&
                  mp == jnum(o, "mape_pct") && bs == jnum(o, "bias_pct"),
              "%s", line);
    cr_assert_str_eq(cls, "modeled");
    rows++;
  }
  fclose(f);
  cr_assert_eq(rows, cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(
                         j, "iterations")) +
                         cJSON_GetArraySize(
                             cJSON_GetObjectItemCaseSensitive(j, "loads")));
  /* the plot's data: one point per iteration and per load */
  char cmd[600];
  snprintf(cmd, sizeof cmd,
           "grep -vc '^#\\|^$' '%s/fid/fidelity-iterations.dat' > "
           "'%s/n.txt'",
           tmpdir, tmpdir);
  cr_assert_eq(system(cmd), 0);
  snprintf(p, sizeof p, "%s/n.txt", tmpdir);
  f = fopen(p, "r");
  long long pts = -1;
  cr_assert_eq(fscanf(f, "%lld", &pts), 1);
  fclose(f);
  cr_assert_eq(pts, q_int(h, "SELECT count(*) FROM iterations WHERE result "
                             "= 'ok' AND measured_ns > 0"));
  /* the figures, where gnuplot is installed */
  if (system("command -v gnuplot > /dev/null 2>&1") == 0) {
    snprintf(cmd, sizeof cmd,
             "cd '%s/fid' && test -s fidelity-iterations.png && test -s "
             "fidelity-iterations.svg && test -s fidelity-loads.png && "
             "grep -q 'set logscale xy' fidelity-plots.gp",
             tmpdir);
    cr_assert_eq(system(cmd), 0, "figures missing");
  }
  sqlite3_close(h);
  cJSON_Delete(j);
}

/* TTFT and TBT of the model-clock replay against the measured-clock one,
** the percentiles recomputed from the requests rows. */
static double sql_pct(sqlite3 *h, const char *expr, const char *cond, int p) {
  char sql[1024];
  snprintf(sql, sizeof sql,
           "WITH v AS (SELECT %s AS x FROM requests WHERE outcome = 'ok' AND "
           "%s), r AS (SELECT x, row_number() OVER (ORDER BY x) AS k, "
           "count(*) OVER () AS n FROM v) SELECT x * (SELECT ns_per_tick FROM "
           "runs) / 1e6 FROM r WHERE k = max(1, (%d * n + 99) / 100)",
           expr, cond, p);
  return q_dbl(h, sql);
}

/* The --against figures of report j: TTFT and TBT p50/p99 of the
** model-clock run a and the measured-clock run b, recomputed from their
** requests rows. */
static void check_against(sqlite3 *a, sqlite3 *b, const cJSON *j) {
  const cJSON *figs = cJSON_GetObjectItemCaseSensitive(
      cJSON_GetObjectItemCaseSensitive(j, "against"), "figures");
  cr_assert_eq(cJSON_GetArraySize(figs), 4);
  static const struct {
    const char *key, *expr, *cond;
    int p;
  } want[] = {
      {"ttft_p50_ms", "first_token_tick - arrival_tick",
       "first_token_tick IS NOT NULL", 50},
      {"ttft_p99_ms", "first_token_tick - arrival_tick",
       "first_token_tick IS NOT NULL", 99},
      {"tbt_p50_ms",
       "(finish_tick - first_token_tick) * 1.0 / (output_tokens - 1)",
       "output_tokens >= 2", 50},
      {"tbt_p99_ms",
       "(finish_tick - first_token_tick) * 1.0 / (output_tokens - 1)",
       "output_tokens >= 2", 99}};
  for (int i = 0; i < 4; i++) {
    const cJSON *o = cJSON_GetArrayItem(figs, i);
    cr_assert_str_eq(
        cJSON_GetObjectItemCaseSensitive(o, "metric")->valuestring,
        want[i].key);
    double m = sql_pct(a, want[i].expr, want[i].cond, want[i].p),
           x = sql_pct(b, want[i].expr, want[i].cond, want[i].p);
    near(jnum(o, "model_clock"), m, want[i].key);
    near(jnum(o, "measured_clock"), x, want[i].key);
    near(jnum(o, "diff_pct"), (m - x) / x * 100, want[i].key);
    cr_assert_str_eq(
        cJSON_GetObjectItemCaseSensitive(o, "model_clock_class")->valuestring,
        "modeled");
    cr_assert_str_eq(cJSON_GetObjectItemCaseSensitive(o, "measured_clock_class")
                         ->valuestring,
                     "measured");
  }
}

Test(fidelity, against_compares_the_two_clocks_of_one_run) {
  cr_assert_eq(lorasim("replay " FIX " --db a.db --no-plots --quiet"), 0,
               "%s", out);
  cr_assert_eq(lorasim("replay " FIX " --clock measured --db b.db "
                       "--no-plots --quiet"),
               0, "%s", out);
  cr_assert_eq(lorasim("fidelity a.db --against b.db --json f.json --out o"),
               0, "%s", out);
  cJSON *j = read_json("f.json");
  sqlite3 *a = open_db("a.db"), *b = open_db("b.db");
  check_report(a, j); /* a model-clock run has both times too */
  check_against(a, b, j);
  char p[512];
  snprintf(p, sizeof p, "%s/o/fidelity-e2e.csv", tmpdir);
  FILE *f = fopen(p, "r");
  cr_assert_not_null(f, "%s", p);
  fclose(f);
  sqlite3_close(a);
  sqlite3_close(b);
  cJSON_Delete(j);

  /* not the same run: refused, nothing written (copies of b whose run
  ** row says another seed, scheduler or edit) */
  char cmd[1200];
  snprintf(cmd, sizeof cmd,
           "cd '%s' && for x in c d e; do cp b.db $x.db; done && "
           "sqlite3 c.db 'UPDATE runs SET seed = 8' && "
           "sqlite3 d.db \"UPDATE runs SET scheduler = 'vtc'\" && "
           "sqlite3 e.db \"INSERT INTO run_options VALUES (1, 'set.1', "
           "'workers.pool_pages=64')\"",
           tmpdir);
  cr_assert_eq(system(cmd), 0);
  static const char *const bad[][2] = {
      {"fidelity a.db --against c.db --json g.json", "seed"},
      {"fidelity a.db --against d.db --json g.json", "scheduler"},
      {"fidelity a.db --against e.db --json g.json", "--set edits"},
      {"fidelity b.db --against a.db --json g.json", "clock"},
      {"fidelity a.db --against a.db --json g.json", "clock"}};
  for (int i = 0; i < 5; i++) {
    cr_assert_eq(lorasim(bad[i][0]), 2, "%s: %s", bad[i][0], out);
    cr_assert_not_null(strstr(out, "E_FID_MISMATCH"), "%s", out);
    cr_assert_not_null(strstr(out, bad[i][1]), "%s", out);
    snprintf(p, sizeof p, "%s/g.json", tmpdir);
    cr_assert_null(fopen(p, "r"), "%s left g.json", bad[i][0]);
  }
}

/* The model-clock run users make on a CPU (backend model) against a
** measured-clock run on a device: the end-to-end figures compare the two,
** and the per-span figures are the measured run's own. */
Test(fidelity, against_a_model_backend_run) {
  cr_assert_eq(lorasim("replay " FIX " --backend model --db a.db --no-plots "
                       "--quiet"),
               0, "%s", out);
  cr_assert_eq(lorasim("replay " FIX " --clock measured --db b.db "
                       "--no-plots --quiet"),
               0, "%s", out);
  cr_assert_eq(lorasim("fidelity a.db --against b.db --json f.json"), 0,
               "%s", out);
  cr_assert_not_null(strstr(out, "spans      from"), "%s", out);
  cJSON *j = read_json("f.json");
  sqlite3 *a = open_db("a.db"), *b = open_db("b.db");
  check_report(b, j); /* the spans are b's */
  check_against(a, b, j);
  sqlite3_close(a);
  sqlite3_close(b);
  cJSON_Delete(j);
}

Test(fidelity, a_database_without_measured_times_is_refused) {
  cr_assert_eq(lorasim("replay " FIX " --backend model --db a.db --no-plots "
                       "--quiet"),
               0, "%s", out);
  cr_assert_eq(lorasim("fidelity a.db --json f.json --out o"), 2, "%s", out);
  cr_assert_not_null(strstr(out, "E_FID_NO_MEASURED"), "%s", out);
  cr_assert_not_null(strstr(out, "measures nothing"), "%s", out);
  /* a database from before schema 6: no measured_ns column at all */
  char cmd[800];
  snprintf(cmd, sizeof cmd,
           "cd '%s' && cp a.db old.db && sqlite3 old.db \"DROP VIEW "
           "iterations; CREATE VIEW iterations AS SELECT 1 AS run_id, iter, "
           "start_tick, end_tick, backend_ns FROM iteration_log; PRAGMA "
           "user_version = 5\"",
           tmpdir);
  cr_assert_eq(system(cmd), 0);
  cr_assert_eq(lorasim("fidelity old.db"), 2, "%s", out);
  cr_assert_not_null(strstr(out, "E_FID_NO_MEASURED"), "%s", out);
  cr_assert_not_null(strstr(out, "schema 6"), "%s", out);
  cr_assert_eq(lorasim("fidelity " FIX), 2, "%s", out);
  cr_assert_not_null(strstr(out, "E_FID_NOT_RUN"), "%s", out);
  cr_assert_eq(lorasim("fidelity nothere.db"), 2, "%s", out);
  cr_assert_not_null(strstr(out, "E_FILE_MISSING"), "%s", out);
  cr_assert_eq(lorasim("fidelity"), 2, "%s", out);
  cr_assert_not_null(strstr(out, "E_USAGE"), "%s", out);
  /* nothing of the refused runs was written */
  snprintf(cmd, sizeof cmd, "test ! -e '%s/f.json' && test ! -e '%s/o'",
           tmpdir, tmpdir);
  cr_assert_eq(system(cmd), 0);
}

/* Databases recorded on the GPU (--backend cuda), checked in by hand:
** the report's figures are their rows. */
Test(fidelity, recorded_gpu_databases) {
  glob_t g;
  int r = glob(LSIM_TEST_DIR "/fixtures/fidelity/*.db", 0, NULL, &g);
  if (r != 0 || g.gl_pathc == 0) {
    globfree(&g);
    cr_skip_test("no GPU-recorded database in tests/fixtures/fidelity/ "
                 "yet (record one with lorasim replay --backend cuda and "
                 "check it in)");
  }
  for (size_t i = 0; i < g.gl_pathc; i++) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "fidelity '%s' --json f.json", g.gl_pathv[i]);
    cr_assert_eq(lorasim(cmd), 0, "%s", out);
    cJSON *j = read_json("f.json");
    sqlite3 *h = open_db(g.gl_pathv[i]);
    check_report(h, j);
    sqlite3_close(h);
    cJSON_Delete(j);
  }
  globfree(&g);
}

/* The GPU-recorded pair (tests/fixtures/fidelity/README.md): the same run
** of full_tiny under the model clock and under the measured clock. */
Test(fidelity, recorded_pair_against) {
  const char *m = LSIM_TEST_DIR
      "/fixtures/fidelity/full_tiny-h100-model-clock.db",
             *x = LSIM_TEST_DIR
      "/fixtures/fidelity/full_tiny-h100-measured-clock.db";
  FILE *f = fopen(m, "r");
  if (!f)
    cr_skip_test("no recorded pair in tests/fixtures/fidelity/");
  fclose(f);
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "fidelity '%s' --against '%s' --json f.json", m,
           x);
  cr_assert_eq(lorasim(cmd), 0, "%s", out);
  cJSON *j = read_json("f.json");
  sqlite3 *a = open_db(m), *b = open_db(x);
  check_report(a, j);
  check_against(a, b, j);
  sqlite3_close(a);
  sqlite3_close(b);
  cJSON_Delete(j);
}

/* ---- a recorded clock (replay --clock-from) --------------------------------------- */

/* Every row of b's table equals a's (the same multiset, the same count). */
static void same_rows(const char *a, const char *b, const char *cols,
                      const char *table) {
  sqlite3 *h = NULL;
  char sql[1400];
  cr_assert_eq(sqlite3_open_v2(a, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  snprintf(sql, sizeof sql, "ATTACH '%s' AS b", b);
  cr_assert_eq(sqlite3_exec(h, sql, NULL, NULL, NULL), SQLITE_OK, "%s",
               sqlite3_errmsg(h));
  snprintf(sql, sizeof sql,
           "SELECT (SELECT count(*) FROM main.%s) - (SELECT count(*) FROM "
           "b.%s) + (SELECT count(*) FROM (SELECT %s FROM main.%s EXCEPT "
           "SELECT %s FROM b.%s)) + (SELECT count(*) FROM (SELECT %s FROM "
           "b.%s EXCEPT SELECT %s FROM main.%s))",
           table, table, cols, table, cols, table, cols, table, cols, table);
  cr_assert_eq(q_int(h, sql), 0, "%s differs between %s and %s", table, a, b);
  cr_assert_gt(q_int(h, "SELECT 1"), 0);
  sqlite3_close(h);
}

static void same_run(const char *a, const char *b) {
  same_rows(a, b, "*", "events");
  same_rows(a, b, "*", "requests");
  same_rows(a, b, "*", "loads");
  same_rows(a, b, "*", "starvation");
  /* every column but backend_ns, which is the backend's own */
  same_rows(a, b,
            "iter, worker, start_tick, end_tick, prefill_rows, decode_rows, "
            "prefill_reqs, decode_reqs, distinct_adapters, segments, "
            "true_rank_rows, padded_rank_rows, result, model_ns, measured_ns, "
            "ctx_tokens",
            "iterations");
}

/* The GPU's measured run of full_tiny, replayed on the CPU with the model
** backend and the recorded clock: the same run, row for row; with another
** cost model the same rows again (the recorded spans drive the clock),
** each span priced anew in model_ns. */
Test(clock, recorded_clock_replays_the_gpu_run) {
  const char *x = LSIM_TEST_DIR
      "/fixtures/fidelity/full_tiny-h100-measured-clock.db";
  char cmd[1400], rdb[600], sdb[600];
  snprintf(cmd, sizeof cmd,
           "replay '" LSIM_TEST_DIR "/fixtures/replay/full_tiny.json' "
           "--clock-from '%s' --db r.db --quiet --no-plots",
           x);
  cr_assert_eq(lorasim(cmd), 0, "%s", out);
  snprintf(rdb, sizeof rdb, "%s/r.db", tmpdir);
  same_run(x, rdb);
  sqlite3 *h = open_db("r.db");
  char s[64];
  q_text(h, "SELECT backend FROM runs", s, sizeof s);
  cr_assert_str_eq(s, "model");
  q_text(h, "SELECT clock FROM runs", s, sizeof s);
  cr_assert_str_eq(s, "measured");
  /* its times claim no more than modeled: this process measured nothing */
  q_text(h, "SELECT class FROM runs_evidence WHERE key = 'ttft_p50_ms'", s,
         sizeof s);
  cr_assert_str_eq(s, "modeled");
  cr_assert_gt(q_int(h, "SELECT count(*) FROM run_inputs WHERE role = "
                        "'clock-from'"),
               0);
  sqlite3_close(h);
  /* doubled per-iteration cost: the same run, every model_ns larger */
  snprintf(cmd, sizeof cmd,
           "replay '" LSIM_TEST_DIR "/fixtures/replay/full_tiny.json' "
           "--clock-from '%s' --set '$.cost.iter_fixed_ns=400000' --db s.db "
           "--quiet --no-plots",
           x);
  cr_assert_eq(lorasim(cmd), 0, "%s", out);
  snprintf(sdb, sizeof sdb, "%s/s.db", tmpdir);
  same_rows(x, sdb, "*", "events");
  same_rows(x, sdb, "iter, start_tick, end_tick, measured_ns", "iterations");
  h = open_db("s.db");
  char at[700];
  snprintf(at, sizeof at, "ATTACH '%s' AS x", x);
  cr_assert_eq(sqlite3_exec(h, at, NULL, NULL, NULL), SQLITE_OK);
  cr_assert_eq(q_int(h, "SELECT count(*) FROM main.iterations AS a JOIN "
                        "x.iterations AS b USING (iter) WHERE a.model_ns != "
                        "b.model_ns + 200000"),
               0, "model_ns must be the recorded one plus the added 200 us");
  cr_assert_gt(q_int(h, "SELECT count(*) FROM main.iterations"), 100);
  sqlite3_close(h);
}

/* A measured run made here (cpu_ref, GMP on the host) replays the same
** through its recorded clock; a replay that departs from it (seed 8, not
** the scenario's 7) stops at the first iteration that differs, and is not
** ok. */
Test(clock, recorded_clock_of_a_cpu_run_and_a_departure) {
  cr_assert_eq(lorasim("replay " FIX " --backend cpu_ref --clock measured "
                       "--db m.db --quiet --no-plots"),
               0, "%s", out);
  cr_assert_eq(lorasim("replay " FIX " --clock-from m.db --db r.db --quiet "
                       "--no-plots"),
               0, "%s", out);
  char m[600], r[600];
  snprintf(m, sizeof m, "%s/m.db", tmpdir);
  snprintf(r, sizeof r, "%s/r.db", tmpdir);
  same_run(m, r);
  cr_assert_eq(lorasim("replay " FIX " --clock-from m.db --seed 8 --db d.db "
                       "--quiet --no-plots"),
               2, "%s", out);
  cr_assert_not_null(strstr(out, "E_FID_RECORDED"), "%s", out);
  cr_assert_not_null(strstr(out, "departs from the recorded run"), "%s", out);
  sqlite3 *h = open_db("d.db");
  char s[64];
  q_text(h, "SELECT status FROM runs", s, sizeof s);
  cr_assert_str_eq(s, "failed");
  sqlite3_close(h);
}

Test(clock, recorded_clock_bad_input_is_refused_before_any_file) {
  refused("replay " FIX " --clock-from nothere.db --db r.db",
          "E_FILE_MISSING");
  refused("replay " FIX " --clock-from " FIX " --db r.db", "E_FID_NOT_RUN");
  refused("replay " FIX " --clock-from " FIX " --clock model --db r.db",
          "E_USAGE");
}
