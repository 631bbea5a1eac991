/* The per-tenant study figures (issue 21): the request time breakdown on
** the replay fixtures, and, on a slice of the real Azure conv 2023 trace
** under two schedulers, every tenant_summary figure against SQL over the
** run's request, event and starvation rows, and compare.csv, the JSON
** summaries and the .prom files against the database, figure by figure. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LSIM_TMP_PREFIX "/tmp/lsim-study-"
#include "cli_harness.h"

#define AZURE                                                              \
  LSIM_SOURCE_DIR "/../shared/data/traces/azure-llm-2023/"                \
                "AzureLLMInferenceTrace_conv.csv"

TestSuite(study, .init = mk_tmp, .fini = rm_tmp);

static sqlite3 *open_db(const char *rel) {
  char p[512];
  sqlite3 *h;
  snprintf(p, sizeof p, "%s/%s", tmpdir, rel);
  cr_assert_eq(sqlite3_open_v2(p, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK,
               "%s", p);
  return h;
}

/* One value of `sql`, with ?1 the tenant (NULL: every tenant), ?2 the
** milliseconds per tick and ?3 a flag, where the statement names them;
** NAN for NULL. */
static double q(sqlite3 *h, const char *sql, int tenant, double ms, int flag) {
  sqlite3_stmt *s;
  cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &s, NULL), SQLITE_OK, "%s: %s",
               sql, sqlite3_errmsg(h));
  int np = sqlite3_bind_parameter_count(s);
  if (np >= 1) {
    if (tenant >= 0)
      sqlite3_bind_int(s, 1, tenant);
    else
      sqlite3_bind_null(s, 1);
  }
  if (np >= 2)
    sqlite3_bind_double(s, 2, ms);
  if (np >= 3)
    sqlite3_bind_int(s, 3, flag);
  cr_assert_eq(sqlite3_step(s), SQLITE_ROW, "%s", sql);
  double v = sqlite3_column_type(s, 0) == SQLITE_NULL
                 ? NAN
                 : sqlite3_column_double(s, 0);
  sqlite3_finalize(s);
  return v;
}

static int same(double a, double b) {
  return (isnan(a) && isnan(b)) || a == b;
}

/* ---- the breakdown on the fixtures ----------------------------------------- */

/* Every request's parts partition its life; first token splits them. */
static void check_partition(sqlite3 *h, const char *what) {
  cr_assert_gt(q(h, "SELECT count(*) FROM requests", -1, 0, 0), 0);
  cr_assert_eq(q(h,
                 "SELECT count(*) FROM requests WHERE queue_wait_ticks < 0 "
                 "OR load_wait_ticks < 0 OR prefill_ticks < 0 OR "
                 "decode_ticks < 0 OR queue_wait_ticks + load_wait_ticks + "
                 "prefill_ticks + decode_ticks != finish_tick - arrival_tick",
                 -1, 0, 0),
               0, "%s: parts do not add up to finish - arrival", what);
  cr_assert_eq(q(h,
                 "SELECT count(*) FROM requests WHERE first_token_tick IS NOT "
                 "NULL AND (queue_wait_ticks + load_wait_ticks + "
                 "prefill_ticks != first_token_tick - arrival_tick OR "
                 "decode_ticks != finish_tick - first_token_tick)",
                 -1, 0, 0),
               0, "%s: TTFT != queue + load + prefill", what);
  cr_assert_eq(q(h,
                 "SELECT count(*) FROM requests WHERE first_token_tick IS "
                 "NULL AND decode_ticks != 0",
                 -1, 0, 0),
               0, "%s: decode without a first token", what);
  /* cold is the queue_enqueued miss; preemptions its request_preempted
  ** events; requested_tokens what a completed request produced */
  cr_assert_eq(q(h,
                 "SELECT count(*) FROM requests AS r JOIN (SELECT request, "
                 "value FROM events WHERE kind = 1) AS e USING (request) "
                 "WHERE r.cold != (e.value = 0)",
                 -1, 0, 0),
               0, "%s: cold", what);
  cr_assert_eq(q(h,
                 "SELECT count(*) FROM requests AS r LEFT JOIN (SELECT "
                 "request, count(*) AS n FROM events WHERE kind = 31 GROUP "
                 "BY request) AS p USING (request) WHERE r.preemptions != "
                 "coalesce(p.n, 0)",
                 -1, 0, 0),
               0, "%s: preemptions", what);
  cr_assert_eq(q(h,
                 "SELECT count(*) FROM requests WHERE outcome = 'ok' AND "
                 "requested_tokens != output_tokens",
                 -1, 0, 0),
               0, "%s: requested tokens", what);
}

/* On runs without relaxed evictions or preemptions: a cold request waited
** for its load from its arrival to the publication of its adapter on its
** worker (or to its end, when it left first); a warm one never did. */
static void check_load_wait(sqlite3 *h, const char *what) {
  cr_assert_eq(q(h,
                 "SELECT count(*) FROM events WHERE kind = 31 OR (kind = 11 "
                 "AND detail = 'relaxed')",
                 -1, 0, 0),
               0, "%s: pick a fixture without relaxed evictions", what);
  cr_assert_eq(q(h,
                 "WITH p AS MATERIALIZED (SELECT worker, adapter, tick FROM "
                 "events WHERE kind = 5) SELECT count(*) FROM requests AS r "
                 "WHERE cold = 1 AND load_wait_ticks != min(coalesce(("
                 "SELECT min(p.tick) FROM p WHERE p.worker = r.worker AND "
                 "p.adapter = r.adapter AND p.tick >= r.arrival_tick), "
                 "r.finish_tick), r.finish_tick) - r.arrival_tick",
                 -1, 0, 0),
               0, "%s: load wait of a cold request", what);
  cr_assert_eq(q(h,
                 "SELECT count(*) FROM requests WHERE cold = 0 AND "
                 "load_wait_ticks != 0",
                 -1, 0, 0),
               0, "%s: a warm request waited for a load", what);
  /* not vacuous: loads were waited for, and requests arrived warm */
  cr_assert_gt(q(h, "SELECT count(*) FROM requests WHERE load_wait_ticks > 0",
                 -1, 0, 0),
               0, "%s", what);
  cr_assert_gt(q(h, "SELECT count(*) FROM requests WHERE cold = 0", -1, 0, 0),
               0, "%s", what);
}

Test(study, breakdown_partitions_each_request_and_load_wait_is_the_load) {
  static const char *const plain[] = {"faults", "kv_deadlock", "tiny"};
  static const char *const other[] = {"preempt-incremental",
                                      "preempt-migrate", "compressed-multi",
                                      "hotswap", "withdraw"};
  char args[1024], db[64];
  for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) {
    snprintf(db, sizeof db, "%s.db", plain[i]);
    snprintf(args, sizeof args,
             "replay '%s/fixtures/replay/%s.json' --db %s --no-plots --quiet",
             LSIM_TEST_DIR, plain[i], db);
    cr_assert_eq(lorasim(args), 0, "%s", out);
    sqlite3 *h = open_db(db);
    check_partition(h, plain[i]);
    check_load_wait(h, plain[i]);
    sqlite3_close(h);
  }
  for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
    snprintf(db, sizeof db, "%s.db", other[i]);
    snprintf(args, sizeof args,
             "replay '%s/fixtures/replay/%s.json' --db %s --no-plots --quiet",
             LSIM_TEST_DIR, other[i], db);
    cr_assert_eq(lorasim(args), 0, "%s", out);
    sqlite3 *h = open_db(db);
    check_partition(h, other[i]);
    sqlite3_close(h);
  }
  /* preemption: the time after a preemption that followed the first
  ** token is decode; before it, the request waits again (queue or load) */
  sqlite3 *h = open_db("preempt-incremental.db");
  cr_assert_gt(q(h, "SELECT sum(preemptions) FROM requests", -1, 0, 0), 0);
  sqlite3_close(h);
}

/* ---- the study on the Azure trace ------------------------------------------ */

static const char scenario[] =
    "{\"name\": \"study-azure\", \"seed\": 11,\n"
    " \"workers\": {\"count\": 2, \"pool_pages\": 2048, \"page_bytes\": "
    "2097152, \"h2d_gbps\": 25.0, \"load_fixed_us\": 200, "
    "\"max_batch_tokens\": 16384, \"max_batch_requests\": 64},\n"
    " \"model\": {\"layers\": 32, \"kv_heads\": 8, \"head_dim\": 128, "
    "\"dtype_bytes\": 2, \"targets\": [{\"name\": \"q_proj\", \"d_in\": 4096, "
    "\"d_out\": 4096}, {\"name\": \"v_proj\", \"d_in\": 4096, \"d_out\": "
    "1024}]},\n"
    " \"cost\": {\"iter_fixed_ns\": 4000000, \"prefill_token_ns\": 20000, "
    "\"decode_token_ns\": 60000, \"segment_ns\": 15000, \"rank_row_ps\": "
    "2000},\n"
    " \"adapters\": {\"count\": 1000, \"ranks\": [{\"rank\": 8, \"weight\": "
    "3}, {\"rank\": 16, \"weight\": 1}]},\n"
    " \"tenants\": [{\"name\": \"chat\", \"traffic_weight\": 6}, {\"name\": "
    "\"api\", \"traffic_weight\": 3}, {\"name\": \"batch\", "
    "\"traffic_weight\": 1}],\n"
    " \"fairness\": {\"starvation_ticks\": 20000},\n"
    " \"trace\": {\"file\": \"%s\", \"format\": \"azure\", "
    "\"max_requests\": 1500, \"assign\": {\"tenants\": \"weights\", "
    "\"adapters\": \"zipf\", \"alpha\": 1.1, \"scope\": \"tenant\"}}}\n";

/* The nearest-rank p-th percentile of `expr` (ticks) over the completed
** requests with `cond` of tenant t (-1: all), in ms, ordered by SQLite. */
static double pct(sqlite3 *h, const char *expr, const char *cond, int t,
                  double ms, double p) {
  char sql[1024];
  snprintf(sql, sizeof sql,
           "SELECT count(*) FROM requests WHERE outcome = 'ok' AND %s AND "
           "(?1 IS NULL OR tenant = ?1)",
           cond);
  double n = q(h, sql, t, ms, 0);
  if (n == 0)
    return NAN;
  long long rank = (long long)ceil(p * n / 100.0);
  if (rank < 1)
    rank = 1;
  snprintf(sql, sizeof sql,
           "SELECT (%s) * ?2 FROM requests WHERE outcome = 'ok' AND %s AND "
           "(?1 IS NULL OR tenant = ?1) ORDER BY (%s) LIMIT 1 OFFSET %lld",
           expr, cond, expr, rank - 1);
  return q(h, sql, t, ms, 0);
}

/* Matched windows: per tenant, the windows (arrival / W) holding both a
** cold and a warm completed request with a first token. */
#define MATCHED                                                            \
  "WITH w AS (SELECT max(arrival_tick) / 100 + 1 AS W FROM requests), "   \
  "r AS (SELECT tenant, arrival_tick / (SELECT W FROM w) AS win, cold, "  \
  "first_token_tick - arrival_tick AS v FROM requests WHERE outcome = "   \
  "'ok' AND first_token_tick IS NOT NULL), m AS (SELECT tenant, win FROM " \
  "r GROUP BY tenant, win HAVING max(cold) = 1 AND min(cold) = 0), "      \
  "x AS (SELECT r.tenant, r.cold, r.v FROM r JOIN m USING (tenant, win) " \
  "WHERE (?1 IS NULL OR r.tenant = ?1) AND r.cold = ?3) "

/* The cold TTFT cost: in each matched window, the nearest-rank p50 of its
** cold requests minus that of its warm ones, averaged over the windows
** with the window's cold requests as weights. */
static double matched_cost(sqlite3 *h, int t, double ms) {
  static const char sql[] =
      "WITH w AS (SELECT max(arrival_tick) / 100 + 1 AS W FROM requests), "
      "r AS (SELECT tenant, arrival_tick / (SELECT W FROM w) AS win, cold, "
      "first_token_tick - arrival_tick AS v FROM requests WHERE outcome = "
      "'ok' AND first_token_tick IS NOT NULL), m AS (SELECT tenant, win FROM "
      "r GROUP BY tenant, win HAVING max(cold) = 1 AND min(cold) = 0), "
      "g AS (SELECT r.tenant, r.win, r.cold, r.v, row_number() OVER (PARTITION "
      "BY r.tenant, r.win, r.cold ORDER BY r.v) AS rn, count(*) OVER "
      "(PARTITION BY r.tenant, r.win, r.cold) AS cnt FROM r JOIN m USING "
      "(tenant, win) WHERE (?1 IS NULL OR r.tenant = ?1)), "
      "med AS (SELECT tenant, win, cold, v, cnt FROM g WHERE rn = (cnt + 1) / 2) "
      "SELECT sum(c.cnt * (c.v - h.v)) * 1.0 / sum(c.cnt) * ?2 FROM med c "
      "JOIN med h ON c.tenant = h.tenant AND c.win = h.win AND c.cold = 1 AND "
      "h.cold = 0";
  return q(h, sql, t, ms, 0);
}

static double matched_p50(sqlite3 *h, int t, double ms, int cold) {
  double n = q(h, MATCHED "SELECT count(*) FROM x", t, ms, cold);
  if (n == 0)
    return NAN;
  long long rank = (long long)ceil(50 * n / 100.0);
  char sql[2048];
  snprintf(sql, sizeof sql,
           MATCHED "SELECT v * ?2 FROM x ORDER BY v LIMIT 1 OFFSET %lld",
           rank - 1);
  return q(h, sql, t, ms, cold);
}

/* Each figure of tenant_summary's row for tenant t (-1: all) against SQL
** over the rows. */
static void check_row_sql(sqlite3 *h, int t, double ms, const char *arm) {
  char sql[512];
  snprintf(sql, sizeof sql,
           "SELECT * FROM tenant_summary WHERE tenant IS ?1 OR (tenant IS "
           "NULL AND ?1 IS NULL)");
  sqlite3_stmt *s;
  cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &s, NULL), SQLITE_OK);
  if (t >= 0)
    sqlite3_bind_int(s, 1, t);
  else
    sqlite3_bind_null(s, 1);
  cr_assert_eq(sqlite3_step(s), SQLITE_ROW, "%s: no row for tenant %d", arm,
               t);
  const char *F = "(?1 IS NULL OR tenant = ?1)";
  char w[512];
#define COUNT(cond) (snprintf(w, sizeof w,                                 \
                              "SELECT count(*) FROM requests WHERE %s AND %s", \
                              cond, F), q(h, w, t, ms, 0))
#define SUM(expr, cond) (snprintf(w, sizeof w,                             \
                                  "SELECT coalesce(sum(%s), 0) FROM requests " \
                                  "WHERE %s AND %s", expr, cond, F),       \
                         q(h, w, t, ms, 0))
#define MEAN(col) (snprintf(w, sizeof w,                                   \
                            "SELECT avg(%s) * ?2 FROM requests WHERE "     \
                            "outcome = 'ok' AND %s", col, F),              \
                   q(h, w, t, ms, 0))
  double service =
      q(h, "SELECT coalesce(sum(value), 0) FROM events WHERE kind = 8 AND "
           "(?1 IS NULL OR tenant = ?1)", t, ms, 0);
  double service_all =
      q(h, "SELECT sum(value) FROM events WHERE kind = 8", -1, ms, 0);
  double demand = SUM("prompt_tokens + requested_tokens - 1", "1");
  double demand_all =
      q(h, "SELECT sum(prompt_tokens + requested_tokens - 1) FROM requests",
        -1, ms, 0);
  double cold_p50 = matched_p50(h, t, ms, 1),
         warm_p50 = matched_p50(h, t, ms, 0);
  const char *ttft = "first_token_tick - arrival_tick",
             *tbt = "(finish_tick - first_token_tick) * 1.0 / "
                    "(output_tokens - 1)",
             *e2e = "finish_tick - arrival_tick";
  struct {
    const char *col;
    double want;
  } fig[] = {
      {"arrived", COUNT("1")},
      {"completed", COUNT("outcome = 'ok'")},
      {"rejected", COUNT("outcome IN ('rejected', 'cancelled')")},
      {"unfinished", COUNT("outcome NOT IN ('ok', 'rejected', 'cancelled')")},
      {"output_tokens", SUM("output_tokens", "1")},
      {"ttft_p50_ms", pct(h, ttft, "first_token_tick IS NOT NULL", t, ms, 50)},
      {"ttft_p90_ms", pct(h, ttft, "first_token_tick IS NOT NULL", t, ms, 90)},
      {"ttft_p99_ms", pct(h, ttft, "first_token_tick IS NOT NULL", t, ms, 99)},
      {"tbt_p50_ms", pct(h, tbt, "output_tokens >= 2", t, ms, 50)},
      {"tbt_p90_ms", pct(h, tbt, "output_tokens >= 2", t, ms, 90)},
      {"tbt_p99_ms", pct(h, tbt, "output_tokens >= 2", t, ms, 99)},
      {"e2e_p50_ms", pct(h, e2e, "1", t, ms, 50)},
      {"e2e_p90_ms", pct(h, e2e, "1", t, ms, 90)},
      {"e2e_p99_ms", pct(h, e2e, "1", t, ms, 99)},
      {"service", service},
      {"service_share", service / service_all},
      {"demand", demand},
      {"demand_share", demand / demand_all},
      {"queue_wait_mean_ms", MEAN("queue_wait_ticks")},
      {"load_wait_mean_ms", MEAN("load_wait_ticks")},
      {"prefill_mean_ms", MEAN("prefill_ticks")},
      {"decode_mean_ms", MEAN("decode_ticks")},
      {"preemptions", SUM("preemptions", "1")},
      {"cold_requests", SUM("cold", "1")},
      {"cold_compared", q(h, MATCHED "SELECT count(*) FROM x", t, ms, 1)},
      {"warm_compared", q(h, MATCHED "SELECT count(*) FROM x", t, ms, 0)},
      {"ttft_cold_p50_ms", cold_p50},
      {"ttft_warm_p50_ms", warm_p50},
      {"cold_ttft_cost_ms", matched_cost(h, t, ms)},
      {"longest_starved_ms",
       q(h, "SELECT coalesce(max(end_tick - start_tick), 0) * ?2 FROM "
            "starvation WHERE kind = 'service' AND (?1 IS NULL OR entity = "
            "?1)", t, ms, 0)},
      {"starved_intervals",
       q(h, "SELECT coalesce(sum(starved), 0) FROM starvation WHERE kind = "
            "'service' AND (?1 IS NULL OR entity = ?1)", t, ms, 0)},
  };
#undef COUNT
#undef SUM
#undef MEAN
  int nf = (int)(sizeof fig / sizeof fig[0]), seen = 0;
  for (int c = 0; c < sqlite3_column_count(s); c++) {
    const char *name = sqlite3_column_name(s, c);
    if (!strcmp(name, "run_id") || !strcmp(name, "tenant") ||
        !strcmp(name, "name"))
      continue;
    int k = 0;
    while (k < nf && strcmp(fig[k].col, name) != 0)
      k++;
    cr_assert_lt(k, nf, "%s: column %s has no SQL check here", arm, name);
    /* every column but run_id, tenant and name is numeric */
    int ty = sqlite3_column_type(s, c);
    cr_assert(ty == SQLITE_INTEGER || ty == SQLITE_FLOAT || ty == SQLITE_NULL,
              "%s: %s is not numeric", arm, name);
    double got = ty == SQLITE_NULL ? NAN : sqlite3_column_double(s, c);
    cr_assert(same(got, fig[k].want), "%s tenant %d %s: %.17g, SQL %.17g",
              arm, t, name, got, fig[k].want);
    seen++;
  }
  cr_assert_eq(seen, nf, "%s: tenant_summary has %d figures", arm, seen);
  sqlite3_finalize(s);
}

/* ---- compare.csv, the JSON summary and the .prom file ---------------------- */

#define MAXF 160
#define MAXR 32
typedef struct csv {
  int nf, nr;
  char head[MAXF][48];
  char cell[MAXR][MAXF][32];
} csv;

static void split(char *line, int cap, char *dst, int *n) {
  *n = 0;
  line[strcspn(line, "\r\n")] = 0;
  for (char *p = line;; (*n)++) {
    char *c = strchr(p, ',');
    if (c)
      *c = 0;
    cr_assert_lt(*n, MAXF);
    size_t len = strlen(p) < (size_t)cap - 1 ? strlen(p) : (size_t)cap - 1;
    memcpy(dst + (size_t)*n * (size_t)cap, p, len);
    dst[(size_t)*n * (size_t)cap + len] = 0;
    if (!c) {
      (*n)++;
      return;
    }
    p = c + 1;
  }
}

static void csv_read(const char *rel, csv *t) {
  char p[512];
  static char line[16384];
  snprintf(p, sizeof p, "%s/%s", tmpdir, rel);
  FILE *f = fopen(p, "r");
  cr_assert_not_null(f, "%s", p);
  memset(t, 0, sizeof *t);
  cr_assert_not_null(fgets(line, sizeof line, f));
  split(line, 48, &t->head[0][0], &t->nf);
  while (fgets(line, sizeof line, f)) {
    int nf;
    cr_assert_lt(t->nr, MAXR);
    split(line, 32, &t->cell[t->nr][0][0], &nf);
    cr_assert_eq(nf, t->nf);
    t->nr++;
  }
  fclose(f);
}

static const char *csv_cell(const csv *t, int r, const char *col) {
  for (int i = 0; i < t->nf; i++)
    if (!strcmp(t->head[i], col))
      return t->cell[r][i];
  return NULL;
}

static double csv_num(const char *s) { return s[0] ? strtod(s, NULL) : NAN; }

static cJSON *json_read(const char *rel) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", tmpdir, rel);
  FILE *f = fopen(p, "r");
  cr_assert_not_null(f, "%s", p);
  static char buf[1 << 20];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  cJSON *j = cJSON_Parse(buf);
  cr_assert_not_null(j, "%s: not JSON", rel);
  return j;
}

static double json_num(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  cr_assert_not_null(v, "JSON has no %s", key);
  cr_assert(cJSON_IsNumber(v) || cJSON_IsNull(v), "JSON %s", key);
  /* cJSON reads the printed text with strtod: the same double */
  return cJSON_IsNull(v) ? NAN : v->valuedouble;
}

/* The sample of `series` (name and labels, exactly) in a .prom file; NAN
** when absent. */
static double prom(const char *rel, const char *series) {
  char p[512], line[1024];
  snprintf(p, sizeof p, "%s/%s", tmpdir, rel);
  FILE *f = fopen(p, "r");
  cr_assert_not_null(f, "%s", p);
  double v = NAN;
  size_t n = strlen(series);
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, series, n) && line[n] == ' ') {
      v = strtod(line + n + 1, NULL);
      break;
    }
  fclose(f);
  return v;
}

Test(study, azure_tenant_figures_equal_sql_and_every_output_agrees,
     .timeout = 300) {
  if (access(AZURE, R_OK) != 0)
    cr_skip_test("the Azure conv 2023 trace is not at %s (../shared absent)",
                 AZURE);
  char p[512], args[1024];
  snprintf(p, sizeof p, "%s/scn.json", tmpdir);
  FILE *f = fopen(p, "w");
  cr_assert_not_null(f);
  fprintf(f, scenario, AZURE);
  fclose(f);
  static const char *const arms[] = {"fcfs", "resident_greedy"};
  enum { NARM = 2, NT = 3 };
  static const char *const names[NT + 1] = {"chat", "api", "batch", "all"};
  snprintf(args, sizeof args,
           "compare scn.json --schedulers fcfs,resident_greedy --out cmp "
           "--no-plots --full-log");
  cr_assert_eq(lorasim(args), 0, "%s", out);
  static csv t;
  csv_read("cmp/compare.csv", &t);
  cr_assert_eq(t.nr, NARM * (NT + 1));
  for (int a = 0; a < NARM; a++) {
    char rel[128];
    snprintf(rel, sizeof rel, "cmp/%s.db", arms[a]);
    sqlite3 *h = open_db(rel);
    double ms = q(h, "SELECT ns_per_tick / 1e6 FROM runs", -1, 0, 0);
    cr_assert_eq(q(h, "SELECT count(*) FROM requests", -1, ms, 0), 1500);
    /* the study is not vacuous: loads were waited for, cold requests
    ** were compared with warm ones, some tenant waited unserved */
    cr_assert_gt(q(h, "SELECT sum(load_wait_ticks) FROM requests", -1, ms, 0),
                 0);
    for (int r = 0; r <= NT; r++)
      check_row_sql(h, r < NT ? r : -1, ms, arms[a]);
    cr_assert_gt(q(h, "SELECT cold_compared FROM tenant_summary WHERE tenant "
                      "IS NULL", -1, ms, 0), 0);
    cr_assert_gt(q(h, "SELECT longest_starved_ms FROM tenant_summary WHERE "
                      "tenant IS NULL", -1, ms, 0), 0);
    /* the all row's percentiles are the run's */
    cr_assert(same(q(h, "SELECT ttft_p99_ms FROM tenant_summary WHERE tenant "
                        "IS NULL", -1, ms, 0),
                   q(h, "SELECT value FROM runs_summary WHERE key = "
                        "'ttft_p99_ms'", -1, ms, 0)));

    /* every tenant_summary cell = its CSV cell = its JSON value */
    snprintf(rel, sizeof rel, "cmp/%s.json", arms[a]);
    cJSON *j = json_read(rel);
    const cJSON *tens = cJSON_GetObjectItemCaseSensitive(j, "tenants");
    cr_assert_eq(cJSON_GetArraySize(tens), NT + 1);
    snprintf(rel, sizeof rel, "cmp/%s.prom", arms[a]);
    for (int r = 0; r <= NT; r++) {
      int row = a * (NT + 1) + r;
      cr_assert_str_eq(csv_cell(&t, row, "arm"), arms[a]);
      cr_assert_str_eq(csv_cell(&t, row, "name"), names[r]);
      const cJSON *o = cJSON_GetArrayItem(tens, r);
      cr_assert_str_eq(
          cJSON_GetObjectItemCaseSensitive(o, "name")->valuestring, names[r]);
      sqlite3_stmt *s;
      cr_assert_eq(sqlite3_prepare_v2(h,
                                      "SELECT * FROM tenant_summary ORDER "
                                      "BY tenant IS NULL, tenant",
                                      -1, &s, NULL),
                   SQLITE_OK);
      for (int k = 0; k <= r; k++)
        cr_assert_eq(sqlite3_step(s), SQLITE_ROW);
      int nfig = 0;
      for (int c = 0; c < sqlite3_column_count(s); c++) {
        const char *col = sqlite3_column_name(s, c);
        if (!strcmp(col, "run_id") || !strcmp(col, "tenant") ||
            !strcmp(col, "name"))
          continue;
        double db = sqlite3_column_type(s, c) == SQLITE_NULL
                        ? NAN
                        : sqlite3_column_double(s, c);
        const char *cc = csv_cell(&t, row, col);
        cr_assert_not_null(cc, "compare.csv has no column %s", col);
        cr_assert(same(db, csv_num(cc)), "%s/%s %s: db %.17g csv %s",
                  arms[a], names[r], col, db, cc);
        cr_assert(same(db, json_num(o, col)), "%s/%s %s: db %.17g json",
                  arms[a], names[r], col, db);
        nfig++;
      }
      cr_assert_gt(nfig, 25);
      /* the .prom series of the tenant: the same figures, in seconds */
      if (r < NT) {
        char se[256];
        struct {
          const char *series, *col;
          double scale;
        } pm[] = {
            {"lorasim_tenant_requests_total{tenant=\"%s\",outcome=\"completed\"}",
             "completed", 1},
            {"lorasim_tenant_requests_total{tenant=\"%s\",outcome=\"rejected\"}",
             "rejected", 1},
            {"lorasim_tenant_requests_total{tenant=\"%s\",outcome=\"unfinished\"}",
             "unfinished", 1},
            {"lorasim_tenant_output_tokens_total{tenant=\"%s\"}",
             "output_tokens", 1},
            {"lorasim_tenant_service_units_total{tenant=\"%s\"}", "service", 1},
            {"lorasim_tenant_demand_units_total{tenant=\"%s\"}", "demand", 1},
            {"lorasim_tenant_service_share_ratio{tenant=\"%s\"}",
             "service_share", 1},
            {"lorasim_tenant_demand_share_ratio{tenant=\"%s\"}",
             "demand_share", 1},
            {"lorasim_tenant_cold_requests_total{tenant=\"%s\"}",
             "cold_requests", 1},
            {"lorasim_tenant_preemptions_total{tenant=\"%s\"}", "preemptions",
             1},
            {"lorasim_tenant_ttft_seconds{tenant=\"%s\",quantile=\"0.5\"}",
             "ttft_p50_ms", 1e-3},
            {"lorasim_tenant_ttft_seconds{tenant=\"%s\",quantile=\"0.9\"}",
             "ttft_p90_ms", 1e-3},
            {"lorasim_tenant_ttft_seconds{tenant=\"%s\",quantile=\"0.99\"}",
             "ttft_p99_ms", 1e-3},
            {"lorasim_tenant_tbt_seconds{tenant=\"%s\",quantile=\"0.99\"}",
             "tbt_p99_ms", 1e-3},
            {"lorasim_tenant_e2e_seconds{tenant=\"%s\",quantile=\"0.5\"}",
             "e2e_p50_ms", 1e-3},
            {"lorasim_tenant_queue_wait_mean_seconds{tenant=\"%s\"}",
             "queue_wait_mean_ms", 1e-3},
            {"lorasim_tenant_load_wait_mean_seconds{tenant=\"%s\"}",
             "load_wait_mean_ms", 1e-3},
            {"lorasim_tenant_prefill_mean_seconds{tenant=\"%s\"}",
             "prefill_mean_ms", 1e-3},
            {"lorasim_tenant_decode_mean_seconds{tenant=\"%s\"}",
             "decode_mean_ms", 1e-3},
            {"lorasim_tenant_cold_ttft_cost_seconds{tenant=\"%s\"}",
             "cold_ttft_cost_ms", 1e-3},
            {"lorasim_tenant_longest_starved_seconds{tenant=\"%s\"}",
             "longest_starved_ms", 1e-3},
            {"lorasim_tenant_starved_intervals_total{tenant=\"%s\"}",
             "starved_intervals", 1},
        };
        for (size_t k = 0; k < sizeof pm / sizeof pm[0]; k++) {
          snprintf(se, sizeof se, pm[k].series, names[r]);
          double want = csv_num(csv_cell(&t, row, pm[k].col)) * pm[k].scale;
          cr_assert(same(prom(rel, se), want), "%s: %s = %.17g, want %.17g",
                    rel, se, prom(rel, se), want);
        }
        snprintf(se, sizeof se, "lorasim_tenant_ttft_seconds_count{tenant=\"%s\"}",
                 names[r]);
        cr_assert_eq(prom(rel, se),
                     q(h, "SELECT count(*) FROM requests WHERE outcome = 'ok' "
                          "AND first_token_tick IS NOT NULL AND tenant = ?1",
                       r, ms, 0));
      }
      sqlite3_finalize(s);
    }
    /* the run's figures: runs_summary = the JSON summary = the CSV all row
    ** (where the CSV has the column; -1 is "no value": null, empty) */
    const cJSON *sum = cJSON_GetObjectItemCaseSensitive(j, "summary");
    sqlite3_stmt *s;
    cr_assert_eq(sqlite3_prepare_v2(h, "SELECT key, value FROM runs_summary",
                                    -1, &s, NULL),
                 SQLITE_OK);
    int all = a * (NT + 1) + NT, nkeys = 0, incsv = 0;
    while (sqlite3_step(s) == SQLITE_ROW) {
      const char *key = (const char *)sqlite3_column_text(s, 0);
      double v = sqlite3_column_double(s, 1);
      if (v < 0)
        v = NAN;
      cr_assert(same(v, json_num(sum, key)), "%s %s: db %.17g json", arms[a],
                key, v);
      const char *cc = csv_cell(&t, all, key);
      if (cc) {
        cr_assert(same(v, csv_num(cc)), "%s %s: db %.17g csv %s", arms[a],
                  key, v, cc);
        incsv++;
      }
      nkeys++;
    }
    sqlite3_finalize(s);
    cr_assert_eq(cJSON_GetArraySize(sum), nkeys);
    cr_assert_gt(incsv, 40);
    cr_assert_eq(csv_num(csv_cell(&t, all, "events")),
                 q(h, "SELECT count(*) FROM events", -1, ms, 0));
    cJSON_Delete(j);
    sqlite3_close(h);
  }
  /* fairness costs: resident_greedy leaves cold adapters waiting, and the
  ** cold TTFT cost shows it against fcfs (same trace, same windows) */
  double cost_f = csv_num(csv_cell(&t, NT, "cold_ttft_cost_ms")),
         cost_rg = csv_num(csv_cell(&t, 2 * NT + 1, "cold_ttft_cost_ms"));
  cr_assert_gt(cost_rg, cost_f, "resident_greedy %g vs fcfs %g", cost_rg,
               cost_f);
}
