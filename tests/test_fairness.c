/*
** test_fairness.c: the run's catalog (tenants, adapters and the named
** views), the default starvation threshold and the normalized Jain index
** (issue 21, parts 2 and 4), through the real binary and the real
** databases.
**
** Every figure is checked against its definition, recomputed here from
** the rows the run wrote (events, requests, starvation), never against a
** number copied from a run.  The Azure slice reads the real trace under
** /work/shared and is skipped with a message when it is absent.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LSIM_TMP_PREFIX "/tmp/lsim-fair-"
#include "cli_harness.h"

#define STARVE LSIM_TEST_DIR "/fixtures/replay/starve.json"
#define AZURE_CONV                                                            \
  LSIM_TEST_DIR "/../../shared/data/traces/azure-llm-2023/"                   \
                "AzureLLMInferenceTrace_conv.csv"

TestSuite(fairness, .init = mk_tmp, .fini = rm_tmp, .timeout = 300);

/* ---- helpers -------------------------------------------------------------- */

static void path_of(char *p, size_t n, const char *rel) {
  snprintf(p, n, "%s/%s", tmpdir, rel);
}

static void write_file(const char *rel, const char *text) {
  char p[512];
  path_of(p, sizeof p, rel);
  FILE *f = fopen(p, "w");
  cr_assert_not_null(f, "%s", p);
  fputs(text, f);
  cr_assert_eq(fclose(f), 0);
}

/* The starve fixture's text with `from` replaced by `to` (once), written
** to tmpdir/rel; its trace is a generator, so it runs from anywhere. */
static void starve_variant(const char *rel, const char *from, const char *to) {
  FILE *f = fopen(STARVE, "r");
  cr_assert_not_null(f);
  static char text[8192], res[8192];
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = 0;
  char *at = strstr(text, from);
  cr_assert_not_null(at, "the fixture no longer has '%s'", from);
  snprintf(res, sizeof res, "%.*s%s%s", (int)(at - text), text, to,
           at + strlen(from));
  write_file(rel, res);
}

static sqlite3 *db_open(const char *rel) {
  char p[512];
  path_of(p, sizeof p, rel);
  sqlite3 *h = NULL;
  cr_assert_eq(sqlite3_open_v2(p, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK,
               "%s", p);
  return h;
}

static double q_num(sqlite3 *h, const char *sql) {
  sqlite3_stmt *s = NULL;
  cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &s, NULL), SQLITE_OK, "%s: %s",
               sql, sqlite3_errmsg(h));
  cr_assert_eq(sqlite3_step(s), SQLITE_ROW, "%s", sql);
  double v = sqlite3_column_double(s, 0);
  sqlite3_finalize(s);
  return v;
}

static double summary(sqlite3 *h, const char *key) {
  char sql[256];
  snprintf(sql, sizeof sql,
           "SELECT value FROM runs_summary WHERE key = '%s'", key);
  return q_num(h, sql);
}

/* Jain's index of service per backlogged time, recomputed from the rows:
** S_t from completed_service_debited events, B_t the union of
** [arrival, finish] of the tenant's placed requests (queue_enqueued is at
** arrival; the record at finish), weights from the tenants table. */
static double jain_normalized_from_rows(sqlite3 *h) {
  enum { MAXT = 64 };
  double svc[MAXT] = {0}, busy[MAXT] = {0}, w[MAXT];
  int64_t open_until[MAXT], since[MAXT];
  for (int t = 0; t < MAXT; t++)
    open_until[t] = -1, since[t] = 0, w[t] = 0;
  sqlite3_stmt *s = NULL;
  cr_assert_eq(sqlite3_prepare_v2(h,
                                  "SELECT tenant, sum(value) FROM events "
                                  "WHERE kind = 8 GROUP BY tenant",
                                  -1, &s, NULL),
               SQLITE_OK);
  while (sqlite3_step(s) == SQLITE_ROW)
    svc[sqlite3_column_int(s, 0)] = sqlite3_column_double(s, 1);
  sqlite3_finalize(s);
  cr_assert_eq(sqlite3_prepare_v2(h, "SELECT tenant, weight FROM tenants",
                                  -1, &s, NULL),
               SQLITE_OK);
  while (sqlite3_step(s) == SQLITE_ROW)
    w[sqlite3_column_int(s, 0)] = sqlite3_column_double(s, 1);
  sqlite3_finalize(s);
  /* merge each tenant's intervals in arrival order */
  cr_assert_eq(sqlite3_prepare_v2(h,
                                  "SELECT tenant, arrival_tick, finish_tick "
                                  "FROM requests WHERE worker IS NOT NULL "
                                  "ORDER BY tenant, arrival_tick",
                                  -1, &s, NULL),
               SQLITE_OK);
  while (sqlite3_step(s) == SQLITE_ROW) {
    int t = sqlite3_column_int(s, 0);
    int64_t a = sqlite3_column_int64(s, 1), f = sqlite3_column_int64(s, 2);
    if (open_until[t] >= 0 && a <= open_until[t]) {
      if (f > open_until[t])
        open_until[t] = f;
      continue;
    }
    if (open_until[t] >= 0)
      busy[t] += (double)(open_until[t] - since[t]);
    since[t] = a;
    open_until[t] = f;
  }
  sqlite3_finalize(s);
  double sum = 0, sq = 0;
  int n = 0;
  for (int t = 0; t < MAXT; t++) {
    if (open_until[t] >= 0)
      busy[t] += (double)(open_until[t] - since[t]);
    if (busy[t] <= 0)
      continue;
    cr_assert_gt(w[t], 0, "tenant %d has no weight in the catalog", t);
    double x = svc[t] / (w[t] * busy[t]);
    sum += x;
    sq += x * x;
    n++;
  }
  cr_assert_gt(n, 0);
  return sum * sum / (n * sq);
}

/* ---- the catalog ------------------------------------------------------------ */

/* Every tenant and adapter integer the run wrote has its catalog row, and
** the rows agree with what the events say about them. */
Test(fairness, catalog_names_every_tenant_and_adapter) {
  cr_assert_eq(lorasim("replay " STARVE " --db s.db --no-plots --quiet"), 0,
               "%s", out);
  sqlite3 *h = db_open("s.db");
  /* the scenario's tenants, in order, with their traffic weights */
  cr_assert_eq(q_num(h, "SELECT count(*) FROM tenants"), 2);
  cr_assert_eq(q_num(h, "SELECT count(*) FROM tenants WHERE tenant = 0 AND "
                        "name = 'hot' AND traffic_weight = 4 AND weight = 1"),
               1);
  cr_assert_eq(q_num(h, "SELECT count(*) FROM tenants WHERE tenant = 1 AND "
                        "name = 'cold' AND traffic_weight = 1 AND weight = 1"),
               1);
  /* $.adapters.count rows, each named, with the scenario's targets */
  cr_assert_eq(q_num(h, "SELECT count(*) FROM adapters"), 16);
  cr_assert_eq(q_num(h, "SELECT count(DISTINCT name) FROM adapters"), 16);
  cr_assert_eq(q_num(h, "SELECT count(*) FROM adapters WHERE targets <> 'qkv' "
                        "OR rank <> 8"),
               0);
  /* the bytes and pages the engine charged, and the owner it logged */
  cr_assert_gt(q_num(h, "SELECT count(*) FROM events WHERE kind = 3"), 0);
  cr_assert_eq(q_num(h, "SELECT count(*) FROM events AS e JOIN adapters AS a "
                        "USING (adapter) WHERE e.kind = 3 AND "
                        "(e.bytes <> a.bytes OR e.tenant <> a.owner)"),
               0);
  cr_assert_eq(q_num(h, "SELECT count(*) FROM events AS e JOIN adapters AS a "
                        "USING (adapter) WHERE e.kind = 5 AND "
                        "e.pages <> a.pages"),
               0);
  /* no integer without its name, in any named view */
  cr_assert_eq(q_num(h, "SELECT count(*) FROM requests_named"),
               q_num(h, "SELECT count(*) FROM requests"));
  cr_assert_eq(q_num(h, "SELECT count(*) FROM requests_named AS r JOIN "
                        "tenants AS t USING (tenant) WHERE r.tenant_name IS "
                        "NOT t.name OR r.adapter_name IS NULL"),
               0);
  cr_assert_eq(q_num(h, "SELECT count(*) FROM events_named WHERE "
                        "(tenant IS NOT NULL AND tenant_name IS NULL) OR "
                        "(adapter IS NOT NULL AND adapter_name IS NULL)"),
               0);
  cr_assert_gt(q_num(h, "SELECT count(*) FROM starvation_named"), 0);
  cr_assert_eq(q_num(h, "SELECT count(*) FROM starvation_named WHERE "
                        "entity_name IS NULL OR tenant_name IS NULL OR "
                        "ticks <> end_tick - start_tick"),
               0);
  /* a service interval names its tenant, a load interval its adapter and
  ** the adapter's owner */
  cr_assert_eq(q_num(h, "SELECT count(*) FROM starvation_named AS s JOIN "
                        "tenants AS t ON t.tenant = s.entity WHERE "
                        "s.kind = 'service' AND s.entity_name <> t.name"),
               0);
  cr_assert_eq(q_num(h, "SELECT count(*) FROM starvation_named AS s JOIN "
                        "adapters AS a ON a.adapter = s.entity WHERE "
                        "s.kind = 'load' AND (s.entity_name <> a.name OR "
                        "s.tenant <> a.owner)"),
               0);
  sqlite3_close(h);
}

/* A native trace that names its adapters: those names replace the
** defaults, with and without the oracle's lookahead window. */
Test(fairness, catalog_takes_the_trace_adapter_names) {
  static const char *const alias[] = {"summarize/v1", "chat@2", "sql.gen",
                                      "summarize/v1", "chat@2", "sql.gen"};
  char trace[1024] = "arrival_ms,tenant,adapter,prompt_tokens,output_tokens\n";
  for (int i = 0; i < 24; i++) {
    char row[96];
    snprintf(row, sizeof row, "%d,%d,%s,%d,%d\n", i, i % 2, alias[i % 6],
             16 + i, 4 + i % 5);
    strncat(trace, row, sizeof trace - strlen(trace) - 1);
  }
  write_file("named.csv", trace);
  write_file(
      "named.json",
      "{\"name\": \"named\", \"seed\": 3,\n"
      " \"workers\": {\"count\": 1, \"pool_pages\": 64, \"page_bytes\": 4096,\n"
      "  \"h2d_gbps\": 1.0, \"max_batch_tokens\": 256,"
      " \"max_batch_requests\": 4},\n"
      " \"model\": {\"layers\": 1, \"kv_heads\": 1, \"head_dim\": 64,"
      " \"dtype_bytes\": 2,\n"
      "  \"targets\": [{\"name\": \"q_proj\", \"d_in\": 128, \"d_out\": 128},\n"
      "              {\"name\": \"v_proj\", \"d_in\": 128, \"d_out\": 64}]},\n"
      " \"cost\": {\"iter_fixed_ns\": 100000, \"prefill_token_ns\": 1000,\n"
      "  \"decode_token_ns\": 4000, \"segment_ns\": 1000, \"rank_row_ps\": 0},\n"
      " \"adapters\": {\"count\": 5, \"ranks\": [{\"rank\": 8, \"weight\": 1}]},\n"
      " \"tenants\": [{\"name\": \"a\", \"traffic_weight\": 1},"
      " {\"name\": \"b\", \"traffic_weight\": 2}],\n"
      " \"trace\": {\"file\": \"named.csv\"}}\n");
  static const char *const runs[] = {
      "replay named.json --db n.db --no-plots --quiet",
      "replay named.json --evict belady --db nb.db --no-plots --quiet"};
  static const char *const dbs[] = {"n.db", "nb.db"};
  for (int r = 0; r < 2; r++) {
    cr_assert_eq(lorasim(runs[r]), 0, "%s", out);
    sqlite3 *h = db_open(dbs[r]);
    /* aliases are numbered by first appearance: 0, 1, 2 */
    for (int a = 0; a < 3; a++) {
      char sql[200];
      snprintf(sql, sizeof sql,
               "SELECT count(*) FROM adapters WHERE adapter = %d AND "
               "name = '%s' AND targets = 'q_proj,v_proj'",
               a, alias[a]);
      cr_assert_eq(q_num(h, sql), 1, "%s: adapter %d", dbs[r], a);
    }
    /* the two the trace never names keep their default names */
    cr_assert_eq(q_num(h, "SELECT count(*) FROM adapters WHERE adapter >= 3 "
                          "AND name = 'adapter-' || adapter"),
                 2);
    /* each request's adapter name is the alias of its trace row */
    sqlite3_stmt *s = NULL;
    cr_assert_eq(sqlite3_prepare_v2(h,
                                    "SELECT request, adapter_name, "
                                    "tenant_name FROM requests_named",
                                    -1, &s, NULL),
                 SQLITE_OK);
    int n = 0;
    while (sqlite3_step(s) == SQLITE_ROW) {
      int id = sqlite3_column_int(s, 0);
      cr_assert_str_eq((const char *)sqlite3_column_text(s, 1),
                       alias[id % 6]);
      cr_assert_str_eq((const char *)sqlite3_column_text(s, 2),
                       id % 2 ? "b" : "a");
      n++;
    }
    sqlite3_finalize(s);
    cr_assert_eq(n, 24);
    sqlite3_close(h);
  }
}

/* ---- the default starvation threshold ------------------------------------- */

/* The fixture's formula, term by term (docs/SCHEDULING.md, "The default
** threshold"): one worker, max_batch_tokens 512, max_batch_requests 4,
** iter_fixed 200 us, prefill 2 us/token, decode 8 us/token, segment 5 us,
** rank_row 1000 ps, rank 8, 2 layers x one 256x256 target at 2 bytes,
** 2 GB/s, load_fixed 50 us, 1000 ns per tick. */
static int64_t starve_default_ticks(void) {
  double prefill = 200000 + 512 * 2000.0 + 4 * 5000.0 + 512 * 8 * 1000 / 1e3;
  double decode = 200000 + 4 * 8000.0 + 4 * 5000.0 + 4 * 8 * 1000 / 1e3;
  double bytes = 2.0 * 8 * (256 + 256) * 2;
  double load = bytes / 2.0 + 50 * 1000.0;
  double ns = 8 * ((prefill > decode ? prefill : decode) + load);
  return (int64_t)ceil(ns / 1000.0);
}

/* Without $.fairness.starvation_ticks the run derives a threshold, judges
** every interval by it, and it finds the tenant resident_greedy starves
** while deficit_aging starves none. */
Test(fairness, default_threshold_finds_resident_greedy_starving) {
  starve_variant("nokey.json", "\"starvation_ticks\": 10000, ", "");
  int64_t want = starve_default_ticks();
  cr_assert_eq(lorasim("replay nokey.json --scheduler resident_greedy "
                       "--prefetch age_triggered --db rg.db --no-plots"),
               0, "%s", out);
  char line[200];
  snprintf(line, sizeof line,
           "starvation  threshold %lld ticks (%.3f ms, derived from the "
           "workload)",
           (long long)want, (double)want / 1000.0);
  cr_assert_not_null(strstr(out, line), "no '%s' in:\n%s", line, out);
  sqlite3 *h = db_open("rg.db");
  cr_assert_float_eq(summary(h, "starvation_threshold_ms"),
                     (double)want / 1000.0, 1e-9);
  /* every interval judged by that threshold, and some starved */
  char sql[300];
  snprintf(sql, sizeof sql,
           "SELECT count(*) FROM starvation WHERE starved <> "
           "(closed_by = 'open' OR end_tick - start_tick >= %lld)",
           (long long)want);
  cr_assert_eq(q_num(h, sql), 0);
  double starved = q_num(h, "SELECT count(*) FROM starvation_named WHERE "
                            "starved = 1 AND kind = 'service' AND "
                            "tenant_name = 'cold'");
  cr_assert_gt(starved, 0, "resident_greedy starves no tenant by default");
  cr_assert_eq(summary(h, "tenant_service_starved_intervals"),
               q_num(h, "SELECT count(*) FROM starvation WHERE starved = 1 "
                        "AND kind = 'service'"));
  sqlite3_close(h);

  cr_assert_eq(lorasim("replay nokey.json --scheduler deficit_aging "
                       "--prefetch age_triggered --db da.db --no-plots "
                       "--quiet"),
               0, "%s", out);
  h = db_open("da.db");
  cr_assert_eq(q_num(h, "SELECT count(*) FROM starvation WHERE starved = 1"),
               0);
  cr_assert_gt(q_num(h, "SELECT count(*) FROM starvation"), 0);
  sqlite3_close(h);

  /* an explicit 0 keeps its meaning: only intervals open at the end */
  starve_variant("zero.json", "\"starvation_ticks\": 10000",
                 "\"starvation_ticks\": 0");
  cr_assert_eq(lorasim("replay zero.json --scheduler resident_greedy "
                       "--prefetch age_triggered --db z.db --no-plots"),
               0, "%s", out);
  cr_assert_not_null(strstr(out, "threshold 0 ticks"), "%s", out);
  h = db_open("z.db");
  cr_assert_eq(summary(h, "starvation_threshold_ms"), 0);
  cr_assert_eq(q_num(h, "SELECT count(*) FROM starvation WHERE starved <> "
                        "(closed_by = 'open')"),
               0);
  sqlite3_close(h);
}

/* ---- the normalized Jain index ---------------------------------------------- */

/* On the starve fixture every request completes under both schedulers,
** so the raw index cannot tell them apart; the normalized one equals its
** definition recomputed from the rows and puts vtc above fcfs.  The
** console, runs_summary, the .prom file and compare.csv agree. */
Test(fairness, normalized_jain_tells_fcfs_from_vtc) {
  cr_assert_eq(lorasim("compare " STARVE " --schedulers fcfs,vtc --prefetch "
                       "age_triggered --out cmp --no-plots --full-log"),
               0, "%s", out);
  double raw[2], norm[2];
  static const char *const dbs[] = {"cmp/fcfs.db", "cmp/vtc.db"};
  for (int i = 0; i < 2; i++) {
    sqlite3 *h = db_open(dbs[i]);
    raw[i] = summary(h, "tenant_service_jain");
    norm[i] = summary(h, "tenant_service_jain_normalized");
    cr_assert_float_eq(norm[i], jain_normalized_from_rows(h), 1e-9, "%s",
                       dbs[i]);
    cr_assert_eq(q_num(h, "SELECT count(*) FROM requests WHERE outcome <> "
                          "'ok'"),
                 0);
    sqlite3_close(h);
  }
  cr_assert_float_eq(raw[0], raw[1], 1e-12, "raw Jain %.6f vs %.6f", raw[0],
                     raw[1]);
  cr_assert_gt(norm[1], norm[0] + 0.05, "vtc %.4f, fcfs %.4f", norm[1],
               norm[0]);
  /* compare.csv: the column, per scheduler (its all-tenants row, where
  ** the run's figures are), as the summary has it */
  char p[512];
  path_of(p, sizeof p, "cmp/compare.csv");
  FILE *f = fopen(p, "r");
  cr_assert_not_null(f);
  char hdr[8192], row[8192];
  cr_assert_not_null(fgets(hdr, sizeof hdr, f));
  int col = -1, k = 0;
  for (char *t = strtok(hdr, ",\n"); t; t = strtok(NULL, ",\n"), k++)
    if (strcmp(t, "tenant_service_jain_normalized") == 0)
      col = k;
  cr_assert_geq(col, 0,
                "compare.csv has no tenant_service_jain_normalized column");
  for (int i = 0; i < 2; i++) {
    do
      cr_assert_not_null(fgets(row, sizeof row, f));
    while (!strstr(row, ",,all,"));
    char *c = row;
    for (int j = 0; j < col; j++)
      c = strchr(c, ',') + 1;
    cr_assert_float_eq(strtod(c, NULL), norm[i], 1e-6);
  }
  fclose(f);
  /* a plain replay prints it and writes it to the .prom file */
  cr_assert_eq(lorasim("replay " STARVE " --scheduler vtc --prefetch "
                       "age_triggered --db v.db --no-plots"),
               0, "%s", out);
  char want[64];
  snprintf(want, sizeof want, "%.3f (normalized)", norm[1]);
  cr_assert_not_null(strstr(out, want), "no '%s' in:\n%s", want, out);
  path_of(p, sizeof p, "v.prom");
  f = fopen(p, "r");
  cr_assert_not_null(f);
  double prom = -1;
  while (fgets(row, sizeof row, f))
    if (strncmp(row, "lorasim_tenant_service_jain_normalized ", 39) == 0)
      prom = strtod(row + 39, NULL);
  fclose(f);
  cr_assert_float_eq(prom, norm[1], 1e-8);
}

/* The service-gap line: the observed backlogged gap, the bound and the
** verdict, as runs_summary has them. */
Test(fairness, summary_prints_gap_against_vtc_bound) {
  cr_assert_eq(lorasim("replay " STARVE " --scheduler resident_greedy "
                       "--prefetch age_triggered --db g.db --no-plots"),
               0, "%s", out);
  sqlite3 *h = db_open("g.db");
  double gap = summary(h, "tenant_service_backlog_gap"),
         bound = summary(h, "vtc_bound");
  sqlite3_close(h);
  cr_assert_gt(gap, 0);
  char want[160];
  snprintf(want, sizeof want,
           "backlogged service gap %.0f, vtc bound %.0f: %s", gap, bound,
           gap <= bound ? "held" : "exceeded");
  cr_assert_not_null(strstr(out, want), "no '%s' in:\n%s", want, out);
}

/* ---- the Azure conv slice ----------------------------------------------------- */

/* bench-azure-1k's world on the first 1,000 requests of the real trace:
** the default threshold finds the adapters resident_greedy keeps waiting
** (and none under vtc), and the normalized index puts vtc above it while
** the raw one reads the same. */
Test(fairness, azure_slice_orders_vtc_above_resident_greedy) {
  if (access(AZURE_CONV, R_OK) != 0) {
    cr_skip_test("no Azure conv trace at %s", AZURE_CONV);
    return;
  }
  FILE *f = fopen(LSIM_TEST_DIR "/../scenarios/bench-azure-1k.json", "r");
  cr_assert_not_null(f);
  static char text[8192], res[8192];
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = 0;
  const char *from = "\"format\": \"azure\",";
  char *at = strstr(text, from);
  cr_assert_not_null(at);
  /* the trace by absolute path, and a slice of it */
  char *file = strstr(text, "\"file\":");
  cr_assert_not_null(file);
  char *file_end = strchr(file, ',');
  snprintf(res, sizeof res, "%.*s\"file\": \"%s\", \"max_requests\": 1000,%s",
           (int)(file - text), text, AZURE_CONV, file_end + 1);
  write_file("az.json", res);
  double raw[2], norm[2], load[2];
  static const char *const sched[] = {"resident_greedy", "vtc"};
  for (int i = 0; i < 2; i++) {
    char cmd[200], db[32];
    snprintf(db, sizeof db, "%s.db", sched[i]);
    snprintf(cmd, sizeof cmd,
             "replay az.json --scheduler %s --db %s --no-plots --quiet",
             sched[i], db);
    cr_assert_eq(lorasim(cmd), 0, "%s", out);
    sqlite3 *h = db_open(db);
    cr_assert_eq(q_num(h, "SELECT count(*) FROM requests"), 1000);
    raw[i] = summary(h, "tenant_service_jain");
    norm[i] = summary(h, "tenant_service_jain_normalized");
    cr_assert_float_eq(norm[i], jain_normalized_from_rows(h), 1e-9);
    load[i] = q_num(h, "SELECT count(*) FROM starvation_named WHERE "
                       "starved = 1 AND kind = 'load'");
    cr_assert_eq(load[i], summary(h, "adapter_load_starved_intervals"));
    sqlite3_close(h);
  }
  cr_assert_float_eq(raw[0], raw[1], 1e-12);
  cr_assert_gt(norm[1], norm[0], "vtc %.4f, resident_greedy %.4f", norm[1],
               norm[0]);
  cr_assert_gt(load[0], 0, "resident_greedy starves no adapter by default");
  cr_assert_eq(load[1], 0);
}
