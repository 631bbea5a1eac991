/* `lorasim compare` through the binary, and SLO attainment: the CSV rows,
** their agreement with each run's database, and a scenario built so that
** resident_greedy starves a tenant that fcfs and deficit_aging serve. */
#include <criterion/criterion.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define LSIM_TMP_PREFIX "/tmp/lsim-cmp-"
#include "cli_harness.h"

static int exists(const char *rel) {
  char p[512];
  struct stat sb;
  snprintf(p, sizeof p, "%s/%s", tmpdir, rel);
  return stat(p, &sb) == 0;
}

/* ---- a tiny CSV reader: header + rows, fields split on ',' ------------- */

#define MAXF 128
#define MAXR 64
typedef struct csv {
  int nf, nr;
  char head[MAXF][64];
  char cell[MAXR][MAXF][64];
} csv;

static void split(char *line, char (*dst)[64], int *n) {
  *n = 0;
  line[strcspn(line, "\r\n")] = 0;
  for (char *p = line;; (*n)++) {
    char *c = strchr(p, ',');
    if (c)
      *c = 0;
    size_t len = strlen(p) < 63 ? strlen(p) : 63;
    memcpy(dst[*n], p, len);
    dst[*n][len] = 0;
    if (!c) {
      (*n)++;
      return;
    }
    p = c + 1;
  }
}

static void csv_read(const char *rel, csv *t) {
  char p[512], line[8192];
  snprintf(p, sizeof p, "%s/%s", tmpdir, rel);
  FILE *f = fopen(p, "r");
  cr_assert_not_null(f, "%s missing", p);
  memset(t, 0, sizeof *t);
  cr_assert_not_null(fgets(line, sizeof line, f));
  split(line, t->head, &t->nf);
  while (fgets(line, sizeof line, f) && t->nr < MAXR) {
    int nf;
    split(line, t->cell[t->nr], &nf);
    cr_assert_eq(nf, t->nf, "row %d has %d fields, header %d", t->nr, nf,
                 t->nf);
    t->nr++;
  }
  fclose(f);
}

static const char *cell(const csv *t, int row, const char *col) {
  for (int i = 0; i < t->nf; i++)
    if (strcmp(t->head[i], col) == 0)
      return t->cell[row][i];
  cr_assert_fail("no column %s", col);
  return NULL;
}

static double num(const csv *t, int row, const char *col) {
  const char *s = cell(t, row, col);
  cr_assert(s[0], "column %s empty in row %d", col, row);
  return atof(s);
}

/* The row of arm `arm` and tenant `name` ("all": the all-tenants row,
** whose tenant cell is empty). */
static int row_tn(const csv *t, const char *arm, const char *name) {
  int all = strcmp(name, "all") == 0;
  for (int r = 0; r < t->nr; r++)
    if (strcmp(cell(t, r, "arm"), arm) == 0 &&
        strcmp(cell(t, r, "name"), name) == 0 &&
        (cell(t, r, "tenant")[0] == 0) == all)
      return r;
  cr_assert_fail("no row for %s / %s", arm, name);
  return -1;
}

static int row_of(const csv *t, const char *sched) {
  return row_tn(t, sched, "all");
}

static double q_dbl(const char *rel, const char *sql) {
  char p[512];
  sqlite3 *h;
  sqlite3_stmt *s;
  snprintf(p, sizeof p, "%s/%s", tmpdir, rel);
  cr_assert_eq(sqlite3_open_v2(p, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &s, NULL), SQLITE_OK, "%s",
               sqlite3_errmsg(h));
  cr_assert_eq(sqlite3_step(s), SQLITE_ROW);
  double v = sqlite3_column_type(s, 0) == SQLITE_NULL
                 ? -1
                 : sqlite3_column_double(s, 0);
  sqlite3_finalize(s);
  sqlite3_close(h);
  return v;
}

TestSuite(compare, .init = mk_tmp, .fini = rm_tmp);

Test(compare, tiny_three_schedulers_csv_rows_are_sane) {
  char args[1024];
  snprintf(args, sizeof args,
           "compare '%s/fixtures/replay/tiny.json' --schedulers "
           "fcfs,resident_greedy,deficit_aging --out cmp --no-plots "
           "--full-log",
           LSIM_TEST_DIR);
  cr_assert_eq(lorasim(args), 0, "%s", out);
  cr_assert_not_null(strstr(out, "resident_greedy"), "%s", out);
  cr_assert_not_null(strstr(out, "cmp/compare.csv"), "%s", out);
  static csv t;
  csv_read("cmp/compare.csv", &t);
  /* long form: per arm, one row per tenant, then the all-tenants row */
  cr_assert_eq(t.nr, 3 * 3);
  const char *order[3] = {"fcfs", "resident_greedy", "deficit_aging"};
  for (int a = 0; a < 3; a++) {
    char db[128];
    int r = row_of(&t, order[a]);
    cr_assert_eq(r, 3 * a + 2, "arms in order, all last");
    cr_assert_str_eq(cell(&t, r, "scheduler"), order[a]);
    cr_assert_str_eq(cell(&t, r, "seed"), "7");
    snprintf(db, sizeof db, "cmp/%s.db", order[a]);
    cr_assert(exists(db));
    cr_assert_eq(num(&t, r, "completed") + num(&t, r, "rejected") +
                     num(&t, r, "unfinished"),
                 600);
    cr_assert_gt(num(&t, r, "completed"), 500);
    cr_assert_gt(num(&t, r, "throughput_output_tokens_per_s"), 0);
    cr_assert_leq(num(&t, r, "ttft_p50_ms"), num(&t, r, "ttft_p99_ms"));
    cr_assert_leq(num(&t, r, "tbt_p50_ms"), num(&t, r, "tbt_p99_ms"));
    double j = num(&t, r, "tenant_service_jain");
    cr_assert(j > 0.5 && j <= 1.0, "jain %g", j);
    cr_assert_geq(num(&t, r, "tenant_service_max_gap"), 0);
    cr_assert_geq(num(&t, r, "adapter_load_starved_intervals"), 0);
    /* the run's figures are on the all row only */
    cr_assert_str_empty(cell(&t, row_tn(&t, order[a], "gold"),
                             "tenant_service_jain"));
    /* no SLO configured in tiny.json: the attainment cells are empty */
    cr_assert_str_empty(cell(&t, r, "slo_ttft_attainment"));
    cr_assert_str_empty(cell(&t, r, "slo_tbt_attainment"));
    /* the CSV row is the run's own summary and ledger */
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT value FROM runs_summary WHERE key='requests_completed'");
    cr_assert_eq(q_dbl(db, sql), num(&t, r, "completed"));
    snprintf(sql, sizeof sql,
             "SELECT sum(value) FROM events WHERE tenant=0 AND kind=(SELECT "
             "kind FROM event_kinds WHERE name='completed_service_debited')");
    cr_assert_eq(q_dbl(db, sql), num(&t, row_tn(&t, order[a], "gold"),
                                     "service"));
    cr_assert_eq(q_dbl(db, "SELECT status = 'ok' FROM runs"), 1);
  }
  /* the compare's run is the replay's run: same seed, same rows */
  snprintf(args, sizeof args,
           "replay '%s/fixtures/replay/tiny.json' --scheduler deficit_aging "
           "--db solo.db --no-plots --quiet",
           LSIM_TEST_DIR);
  cr_assert_eq(lorasim(args), 0, "%s", out);
  const char *dig = "SELECT count(*) * 1000003 + sum((seq * 7 + tick * 13 + "
                    "kind * 17 + coalesce(value, 0)) % 1000003) FROM events";
  cr_assert_eq(q_dbl("solo.db", dig), q_dbl("cmp/deficit_aging.db", dig));
}

Test(compare, resident_greedy_starves_where_fcfs_and_deficit_aging_serve) {
  /* starve.json: one worker, a hot tenant on popular adapters saturating a
  ** four-request batch, a cold tenant on the tail; age_triggered prefetch
  ** brings the cold adapters in, then only the scheduler decides. */
  char args[1024];
  snprintf(args, sizeof args,
           "compare '%s/fixtures/replay/starve.json' --schedulers "
           "fcfs,resident_greedy,deficit_aging --prefetch age_triggered "
           "--out st",
           LSIM_TEST_DIR);
  cr_assert_eq(lorasim(args), 0, "%s", out);
  static csv t;
  csv_read("st/compare.csv", &t);
  cr_assert_eq(t.nr, 3 * 3);
  int f = row_of(&t, "fcfs"), rg = row_of(&t, "resident_greedy"),
      da = row_of(&t, "deficit_aging");
  for (int r = 0; r < t.nr; r++)
    cr_assert_str_eq(cell(&t, r, "prefetch"), "age_triggered");
  cr_assert_eq(num(&t, f, "completed"), 400);
  cr_assert_eq(num(&t, rg, "completed"), 400);
  cr_assert_eq(num(&t, da, "completed"), 400);
  double s_rg = num(&t, rg, "adapter_load_starved_intervals") +
                num(&t, rg, "tenant_service_starved_intervals");
  double s_da = num(&t, da, "adapter_load_starved_intervals") +
                num(&t, da, "tenant_service_starved_intervals");
  double s_f = num(&t, f, "adapter_load_starved_intervals") +
               num(&t, f, "tenant_service_starved_intervals");
  cr_assert_gt(s_rg, s_da, "resident_greedy %g vs deficit_aging %g", s_rg,
               s_da);
  cr_assert_gt(s_rg, s_f, "resident_greedy %g vs fcfs %g", s_rg, s_f);
  cr_assert_eq(num(&t, da, "tenant_service_starved_intervals"), 0);
  /* the CSV count is the starvation table's, mostly the cold tenant's */
  cr_assert_eq(q_dbl("st/resident_greedy.db",
                     "SELECT count(*) FROM starvation WHERE starved=1 AND "
                     "kind='service'"),
               num(&t, rg, "tenant_service_starved_intervals"));
  cr_assert_gt(q_dbl("st/resident_greedy.db",
                     "SELECT sum(entity = 1) - sum(entity = 0) FROM "
                     "starvation WHERE starved=1 AND kind='service'"),
               0);
  /* and per tenant: the cold tenant holds most of them, and its longest
  ** unserved stretch is the table's */
  int rgc = row_tn(&t, "resident_greedy", "cold");
  cr_assert_eq(num(&t, rgc, "starved_intervals"),
               q_dbl("st/resident_greedy.db",
                     "SELECT count(*) FROM starvation WHERE starved=1 AND "
                     "kind='service' AND entity=1"));
  cr_assert_gt(num(&t, rgc, "starved_intervals"),
               num(&t, row_tn(&t, "resident_greedy", "hot"),
                   "starved_intervals"));
  cr_assert_float_eq(num(&t, rgc, "longest_starved_ms"),
                     q_dbl("st/resident_greedy.db",
                           "SELECT max(end_tick - start_tick) * 1e-3 FROM "
                           "starvation WHERE kind='service' AND entity=1"),
                     1e-9);
  if (system("command -v gnuplot >/dev/null 2>&1") == 0)
    cr_assert(exists("st/compare-service.png"));
  else
    cr_assert_not_null(strstr(out, "gnuplot not found"), "%s", out);
}

/* The last data row of block `idx` of a gnuplot data file, column col
** (1-based). */
static double dat_last(const char *path, int idx, int col) {
  char full[512];
  snprintf(full, sizeof full, "%s/%s", tmpdir, path);
  FILE *f = fopen(full, "r");
  cr_assert_not_null(f, "%s", path);
  char line[4096], last[4096] = "";
  int block = 0, blanks = 0;
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '\n') {
      if (++blanks == 2)
        block++;
      continue;
    }
    blanks = 0;
    if (block == idx)
      snprintf(last, sizeof last, "%s", line);
  }
  fclose(f);
  cr_assert(last[0], "no block %d in %s", idx, path);
  char *p = last;
  for (int c = 1; c < col; c++) {
    strtod(p, &p);
  }
  return strtod(p, NULL);
}

static int dat_rows(const char *path, int idx) {
  char full[512];
  snprintf(full, sizeof full, "%s/%s", tmpdir, path);
  FILE *f = fopen(full, "r");
  cr_assert_not_null(f, "%s", path);
  char line[4096];
  int block = 0, blanks = 0, n = 0;
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '\n') {
      if (++blanks == 2)
        block++;
      continue;
    }
    blanks = 0;
    n += block == idx && line[0] != '#'; /* comments are no rows */
  }
  fclose(f);
  return n;
}

/*
** By default compare keeps no event rows, yet every figure is the one a
** fully logged run gives; the time series end where the summary does.
*/
Test(compare, summary_logging_changes_no_figure_and_series_match_ledgers) {
  char args[1024];
  snprintf(args, sizeof args,
           "compare '%s/fixtures/replay/starve.json' --schedulers "
           "resident_greedy,vtc --prefetch age_triggered --out lean",
           LSIM_TEST_DIR);
  cr_assert_eq(lorasim(args), 0, "%s", out);
  snprintf(args, sizeof args,
           "compare '%s/fixtures/replay/starve.json' --schedulers "
           "resident_greedy,vtc --prefetch age_triggered --out full "
           "--full-log --no-plots",
           LSIM_TEST_DIR);
  cr_assert_eq(lorasim(args), 0, "%s", out);
  static csv a, b;
  csv_read("lean/compare.csv", &a);
  csv_read("full/compare.csv", &b);
  cr_assert_eq(a.nr, 2 * 3);
  cr_assert_eq(b.nr, 2 * 3);
  cr_assert_eq(a.nf, b.nf);
  for (int r = 0; r < a.nr; r++)
    for (int c = 0; c < a.nf; c++)
      cr_assert_str_eq(a.cell[r][c], b.cell[r][c], "row %d column %s", r,
                       a.head[c]);
  cr_assert_eq(q_dbl("lean/vtc.db", "SELECT count(*) FROM events"), 0);
  cr_assert_eq(q_dbl("lean/vtc.db", "SELECT count(*) FROM iterations"), 0);
  cr_assert_gt(q_dbl("full/vtc.db", "SELECT count(*) FROM events"), 0);
  cr_assert_eq(q_dbl("lean/vtc.db", "SELECT count(*) FROM requests"), 400);
  const char *arms[2] = {"resident_greedy", "vtc"};
  for (int i = 0; i < 2; i++) {
    int r = row_of(&a, arms[i]);
    double hot = num(&a, row_tn(&a, arms[i], "hot"), "service"),
           cold = num(&a, row_tn(&a, arms[i], "cold"), "service");
    /* final cumulative service per tenant = the CSV's ledger */
    cr_assert_eq(dat_last("lean/compare-timeline.dat", i, 2), hot);
    cr_assert_eq(dat_last("lean/compare-timeline.dat", i, 3), cold);
    cr_assert_eq(num(&a, r, "service"), hot + cold);
    /* the TTFT CDF ends at 1 */
    cr_assert_float_eq(dat_last("lean/compare-ttft.dat", i, 2), 1.0, 1e-9);
    /* projections partition the service */
    cr_assert_eq(num(&a, r, "service_prefill") + num(&a, r, "service_decode"),
                 hot + cold);
    cr_assert_eq(num(&a, r, "service_resident") +
                     num(&a, r, "service_cold_loaded"),
                 hot + cold);
    cr_assert_geq(num(&a, r, "adapter_load_amplification"), 1.0);
    cr_assert_geq(num(&a, r, "rank_padding_ratio"), 1.0);
    cr_assert_leq(num(&a, r, "tenant_service_backlog_gap"),
                  num(&a, r, "tenant_service_max_gap"));
  }
  /* one plotted segment per starved interval */
  int rg = row_of(&a, "resident_greedy");
  double starved = num(&a, rg, "adapter_load_starved_intervals") +
                   num(&a, rg, "tenant_service_starved_intervals");
  cr_assert_gt(starved, 0);
  cr_assert_eq(dat_rows("lean/compare-starvation.dat", 0), starved);
  /* the resident count of the full log's publish/retire rows */
  cr_assert_eq(dat_last("lean/compare-timeline.dat", 0, 5),
               q_dbl("full/resident_greedy.db",
                     "SELECT sum(kind = 5) - sum(kind = 12) - sum(kind = 13 "
                     "AND detail = 'restore_failed') FROM events"));
  if (system("command -v gnuplot >/dev/null 2>&1") == 0) {
    const char *png[] = {"service", "ttft", "service-time", "gap",
                         "residency", "starvation"};
    for (int i = 0; i < 6; i++) {
      char p[128];
      snprintf(p, sizeof p, "lean/compare-%s.png", png[i]);
      cr_assert(exists(p), "%s", p);
    }
  }
}

Test(compare, slo_attainment_is_exact_from_the_requests_table) {
  /* starve.json sets slo_ttft_ms 5 and slo_tbt_ms 1; ns_per_tick 1000 */
  char args[1024];
  snprintf(args, sizeof args,
           "compare '%s/fixtures/replay/starve.json' --schedulers "
           "fcfs,vtc --out slo --no-plots",
           LSIM_TEST_DIR);
  cr_assert_eq(lorasim(args), 0, "%s", out);
  static csv t;
  csv_read("slo/compare.csv", &t);
  const char *arms[2] = {"fcfs", "vtc"};
  for (int i = 0; i < 2; i++) {
    char db[128];
    int r = row_of(&t, arms[i]);
    snprintf(db, sizeof db, "slo/%s.db", cell(&t, r, "scheduler"));
    double tt = q_dbl(db, "SELECT avg((first_token_tick - arrival_tick) * "
                          "1000 <= 5000000) FROM requests WHERE outcome='ok' "
                          "AND first_token_tick IS NOT NULL");
    double tb = q_dbl(db, "SELECT avg((finish_tick - first_token_tick) * "
                          "1000.0 / (output_tokens - 1) <= 1000000) FROM "
                          "requests WHERE outcome='ok' AND output_tokens >= 2");
    cr_assert(tt > 0 && tt < 1, "ttft attainment %g: pick a tighter fixture",
              tt);
    cr_assert(fabs(num(&t, r, "slo_ttft_attainment") - tt) < 1e-6);
    cr_assert(fabs(num(&t, r, "slo_tbt_attainment") - tb) < 1e-6);
    cr_assert_eq(q_dbl(db, "SELECT value FROM runs_summary WHERE "
                           "key='slo_ttft_attainment'"),
                 tt);
    cr_assert_eq(q_dbl(db, "SELECT value FROM runs_summary WHERE "
                           "key='slo_tbt_attainment'"),
                 tb);
    char prom[128], line[256], cmd[512];
    snprintf(prom, sizeof prom, "slo/%s.prom", cell(&t, r, "scheduler"));
    snprintf(cmd, sizeof cmd,
             "grep '^lorasim_slo_ttft_attainment_ratio ' '%s/%s'", tmpdir,
             prom);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    cr_assert_not_null(fgets(line, sizeof line, p));
    pclose(p);
    cr_assert(fabs(atof(strchr(line, ' ') + 1) - tt) < 1e-9, "%s", line);
  }
}

Test(compare, usage_and_errors) {
  char args[1024];
  cr_assert_eq(lorasim("compare --help"), 0);
  cr_assert_not_null(strstr(out, "--schedulers LIST"), "%s", out);
  cr_assert_not_null(strstr(out, "deficit_aging"), "%s", out);
  cr_assert_eq(lorasim("help compare"), 0);
  cr_assert_not_null(strstr(out, "--schedulers LIST"), "%s", out);
  cr_assert_eq(lorasim("help"), 0);
  cr_assert_not_null(strstr(out, "compare SCENARIO.json"), "%s", out);
  cr_assert_eq(lorasim("compare"), 2);
  cr_assert_not_null(strstr(out, "E_USAGE"), "%s", out);
  cr_assert_eq(lorasim("compare --bogus x.json"), 2);
  const char *tiny = LSIM_TEST_DIR "/fixtures/replay/tiny.json";
  snprintf(args, sizeof args, "compare '%s'", tiny);
  cr_assert_eq(lorasim(args), 2);
  cr_assert_not_null(strstr(out, "E_USAGE: --schedulers is required"), "%s",
                     out);
  snprintf(args, sizeof args, "compare '%s' --schedulers fcfs,nope", tiny);
  cr_assert_eq(lorasim(args), 2);
  cr_assert_not_null(strstr(out, "E_SCN_POLICY"), "%s", out);
  cr_assert_not_null(strstr(out, "'nope'"), "%s", out);
  snprintf(args, sizeof args, "compare '%s' --schedulers fcfs,,vtc", tiny);
  cr_assert_eq(lorasim(args), 2);
  cr_assert_not_null(strstr(out, "empty name"), "%s", out);
  snprintf(args, sizeof args, "compare '%s' --schedulers fcfs,fcfs", tiny);
  cr_assert_eq(lorasim(args), 2);
  cr_assert_not_null(strstr(out, "named twice"), "%s", out);
  snprintf(args, sizeof args, "compare '%s' --schedulers fcfs --evict nope",
           tiny);
  cr_assert_eq(lorasim(args), 2);
  cr_assert_not_null(strstr(out, "E_SCN_POLICY"), "%s", out);
  snprintf(args, sizeof args,
           "compare '%s' --schedulers fcfs --prefetch nope", tiny);
  cr_assert_eq(lorasim(args), 2);
  snprintf(args, sizeof args, "compare '%s' --schedulers fcfs --seed -1",
           tiny);
  cr_assert_eq(lorasim(args), 2);
  cr_assert_not_null(strstr(out, "--seed"), "%s", out);
  cr_assert_eq(lorasim("compare missing.json --schedulers fcfs"), 2);
  /* nothing was written by a refused comparison */
  cr_assert(!exists("results"));
  /* the default directory, and --seed recorded in the rows */
  snprintf(args, sizeof args,
           "compare '%s' --schedulers vtc --seed 3 --no-plots", tiny);
  cr_assert_eq(lorasim(args), 0, "%s", out);
  cr_assert(exists("results/compare-tiny/vtc.db"));
  static csv t;
  csv_read("results/compare-tiny/compare.csv", &t);
  cr_assert_eq(t.nr, 3);
  cr_assert_str_eq(cell(&t, row_of(&t, "vtc"), "seed"), "3");
}

/* ---- --arms: one run per scheduler:evict:prefetch triple ---------------- */

/* The tick (relative to the witness's start, tick 10) at which request id
** ran its one prefill row (its first token comes one tick later), or -1
** when it never ran. */
static int ran_at(const char *db, int id) {
  char sql[160];
  snprintf(sql, sizeof sql,
           "SELECT coalesce(first_token_tick - 1 - 10, -1) FROM requests "
           "WHERE request = %d",
           id);
  return (int)q_dbl(db, sql);
}

/* Completed service of tenant t from the run's own ledger (events). */
static double served(const char *db, int t) {
  char sql[200];
  snprintf(sql, sizeof sql,
           "SELECT coalesce(sum(value), 0) FROM events WHERE tenant = %d AND "
           "kind = (SELECT kind FROM event_kinds WHERE "
           "name = 'completed_service_debited')",
           t);
  return q_dbl(db, sql);
}

/*
** The article's six-tick starvation witness (0x09I) as one compare run:
** resident A, cold B, a cold request c0 and one A request per tick.
** resident_greedy runs h0..h5, never publishes B (LoadStarved(B), no
** service starvation: B never became ready); deficit_aging with
** age_triggered prefetch loads B at age 2, publishes it at tick 3, runs c0
** there (its tenant has 0 completed service against the hot tenant's 3)
** and ends with {hot:5, cold:1} and nothing starved.  Request ids are the
** trace's rows: 0 warm-up, 1 h0, 2 c0, 3..7 h1..h5.
*/
Test(compare, arms_reproduce_the_six_tick_starvation_witness) {
  char args[1024];
  snprintf(args, sizeof args,
           "compare '%s/fixtures/replay/sixtick.json' --arms "
           "resident_greedy:lru:none,deficit_aging:lru:age_triggered "
           "--out six --full-log --no-plots",
           LSIM_TEST_DIR);
  cr_assert_eq(lorasim(args), 0, "%s", out);
  cr_assert_not_null(strstr(out, "resident_greedy:lru:none"), "%s", out);
  cr_assert_not_null(strstr(out, "deficit_aging:lru:age_triggered"), "%s",
                     out);
  const char *rg = "six/resident_greedy-lru-none.db",
             *da = "six/deficit_aging-lru-age_triggered.db";
  enum { HOT = 0, COLD = 1, WARM = 2, C0 = 2 };
  const int h[6] = {1, 3, 4, 5, 6, 7};
  /* the article's table, tick by tick */
  const int rg_tick[6] = {0, 1, 2, 3, 4, 5}, da_tick[6] = {0, 1, 2, 4, 5, -1};
  for (int k = 0; k < 6; k++) {
    cr_assert_eq(ran_at(rg, h[k]), rg_tick[k], "resident_greedy h%d", k);
    cr_assert_eq(ran_at(da, h[k]), da_tick[k], "deficit_aging h%d", k);
  }
  cr_assert_eq(ran_at(rg, C0), -1);
  cr_assert_eq(ran_at(da, C0), 3);
  /* the final ledgers (the warm-up request only made A resident) */
  cr_assert_eq(served(rg, HOT), 6);
  cr_assert_eq(served(rg, COLD), 0);
  cr_assert_eq(served(da, HOT), 5);
  cr_assert_eq(served(da, COLD), 1);
  cr_assert_eq(served(rg, WARM), 1);
  cr_assert_eq(served(da, WARM), 1);
  /* resident_greedy: B never loaded, load-starved over the six ticks */
  cr_assert_eq(q_dbl(rg, "SELECT count(*) FROM events WHERE adapter = 1 AND "
                         "kind = (SELECT kind FROM event_kinds WHERE name = "
                         "'adapter_generation_published')"),
               0);
  cr_assert_eq(q_dbl(rg, "SELECT count(*) FROM starvation WHERE starved = 1 "
                         "AND kind = 'load' AND entity = 1 AND start_tick = "
                         "10 AND end_tick = 16"),
               1);
  cr_assert_eq(q_dbl(rg, "SELECT value FROM runs_summary WHERE key = "
                         "'adapter_load_starved_intervals'"),
               1);
  cr_assert_eq(q_dbl(rg, "SELECT value FROM runs_summary WHERE key = "
                         "'tenant_service_starved_intervals'"),
               0);
  /* deficit_aging: prefetch of B at tick 2, published at tick 3 */
  cr_assert_eq(q_dbl(da, "SELECT min(tick) - 10 FROM events WHERE adapter = "
                         "1 AND kind = (SELECT kind FROM event_kinds WHERE "
                         "name = 'prefetch_reserved')"),
               2);
  cr_assert_eq(q_dbl(da, "SELECT min(tick) - 10 FROM events WHERE adapter = "
                         "1 AND kind = (SELECT kind FROM event_kinds WHERE "
                         "name = 'adapter_generation_published')"),
               3);
  cr_assert_eq(q_dbl(da, "SELECT count(*) FROM starvation WHERE starved = "
                         "1"),
               0);
  cr_assert_eq(q_dbl(da, "SELECT count(*) FROM starvation WHERE kind = "
                         "'load' AND entity = 1 AND end_tick = 13 AND "
                         "closed_by = 'published'"),
               1);
  /* each database records its own arm */
  cr_assert_eq(q_dbl(rg, "SELECT scheduler = 'resident_greedy' AND evict = "
                         "'lru' AND prefetch = 'none' FROM runs"),
               1);
  cr_assert_eq(q_dbl(da, "SELECT scheduler = 'deficit_aging' AND evict = "
                         "'lru' AND prefetch = 'age_triggered' FROM runs"),
               1);
  /* and so does every CSV row */
  csv t;
  csv_read("six/compare.csv", &t);
  cr_assert_geq(t.nr, 2);
  for (int r = 0; r < t.nr; r++)
    cr_assert_str_eq(cell(&t, r, "prefetch"),
                     strcmp(cell(&t, r, "scheduler"), "resident_greedy")
                         ? "age_triggered"
                         : "none");
}

Test(compare, arms_parsing_defaults_and_errors) {
  char args[1500];
  const char *tiny = LSIM_TEST_DIR "/fixtures/replay/tiny.json";
  cr_assert_eq(lorasim("compare --help"), 0);
  cr_assert_not_null(strstr(out, "--arms LIST"), "%s", out);
  static const struct {
    const char *arms, *code, *says;
  } bad[] = {
      {"fcfs:lru:none,nope", "E_SCN_POLICY",
       "unknown scheduler 'nope' (known: fcfs, resident_greedy,"},
      {"fcfs:nope", "E_SCN_POLICY",
       "unknown eviction policy 'nope' (known: lru, lfu,"},
      {"fcfs:lru:nope", "E_SCN_POLICY",
       "unknown prefetch policy 'nope' (known: none, queue_lookahead,"},
      {"fcfs:lru:none:x", "E_USAGE", "an arm is SCHEDULER[:EVICT[:PREFETCH]]"},
      {"fcfs::none", "E_USAGE", "empty eviction policy name in 'fcfs::none'"},
      {"fcfs:lru:", "E_USAGE", "empty prefetch policy name"},
      {"fcfs,,vtc", "E_USAGE", "empty arm"},
      /* tiny.json's own policies are lru and none: the same run twice */
      {"fcfs,vtc,fcfs:lru:none", "E_USAGE",
       "arms 1 and 3 are the same run (fcfs:lru:none)"},
      {"vtc:lfu,vtc:lfu", "E_USAGE", "are the same run (vtc:lfu:none)"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    snprintf(args, sizeof args, "compare '%s' --arms '%s'", tiny, bad[i].arms);
    cr_assert_eq(lorasim(args), 2, "%s: %s", bad[i].arms, out);
    cr_assert_not_null(strstr(out, bad[i].code), "%s: %s", bad[i].arms, out);
    cr_assert_not_null(strstr(out, bad[i].says), "%s: %s", bad[i].arms, out);
  }
  snprintf(args, sizeof args, "compare '%s' --arms fcfs --schedulers vtc",
           tiny);
  cr_assert_eq(lorasim(args), 2);
  cr_assert_not_null(strstr(out, "not both"), "%s", out);
  /* 17 distinct arms */
  const char *ev[] = {"lru", "lfu", "size", "gdsf"};
  const char *sch[] = {"fcfs", "vtc", "resident_greedy", "slora_cluster",
                       "deficit_aging"};
  size_t used = (size_t)snprintf(args, sizeof args, "compare '%s' --arms ",
                                 tiny);
  for (int k = 0; k < 17; k++)
    used += (size_t)snprintf(args + used, sizeof args - used, "%s%s:%s",
                             k ? "," : "", sch[k % 5], ev[k / 5]);
  cr_assert_eq(lorasim(args), 2);
  cr_assert_not_null(strstr(out, "at most 16 arms"), "%s", out);
  cr_assert(!exists("results"), "a refused comparison wrote files");
  /* parts left out: --prefetch, then the scenario (evict lru) */
  snprintf(args, sizeof args,
           "compare '%s' --arms fcfs,vtc:lfu --prefetch age_triggered "
           "--out d --no-plots",
           tiny);
  cr_assert_eq(lorasim(args), 0, "%s", out);
  cr_assert_eq(q_dbl("d/fcfs-lru-age_triggered.db",
                     "SELECT scheduler = 'fcfs' AND evict = 'lru' AND "
                     "prefetch = 'age_triggered' AND status = 'ok' FROM runs"),
               1);
  cr_assert_eq(q_dbl("d/vtc-lfu-age_triggered.db",
                     "SELECT scheduler = 'vtc' AND evict = 'lfu' AND "
                     "prefetch = 'age_triggered' AND status = 'ok' FROM runs"),
               1);
  cr_assert(!exists("d/fcfs.db") && !exists("d/vtc.db"));
  cr_assert_not_null(strstr(out, "vtc:lfu:age_triggered"), "%s", out);
  /* an arm's run is the replay with the same policies, row for row */
  snprintf(args, sizeof args,
           "replay '%s' --scheduler vtc --evict lfu --prefetch age_triggered "
           "--db solo.db --no-plots --quiet",
           tiny);
  cr_assert_eq(lorasim(args), 0, "%s", out);
  const char *dig = "SELECT count(*) * 1000003 + sum((request * 7 + "
                    "coalesce(first_token_tick, 0) * 13 + finish_tick * 17 + "
                    "tenant) % 1000003) FROM requests";
  cr_assert_eq(q_dbl("solo.db", dig), q_dbl("d/vtc-lfu-age_triggered.db", dig));
}

/* ---- figures: .dat headers, PNG and SVG, the script run where it lies ---- */

static char *slurp_rel(const char *rel, size_t *len) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", tmpdir, rel);
  FILE *f = fopen(p, "rb");
  cr_assert_not_null(f, "%s missing", rel);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)n + 1);
  cr_assert_not_null(b);
  cr_assert_eq(fread(b, 1, (size_t)n, f), (size_t)n);
  b[n] = 0;
  fclose(f);
  *len = (size_t)n;
  return b;
}

/* Every data file opens with a comment line naming its columns. */
static void dat_headed(const char *rel) {
  size_t n;
  char *b = slurp_rel(rel, &n);
  cr_assert(n > 2 && b[0] == '#' && strchr(b, '\n'), "%s: no header line",
            rel);
  free(b);
}

/* Each figure's PNG (its signature) and SVG (an <svg> element closed at
** the end) exist; then, with both removed, `gnuplot SCRIPT` run in the
** folder draws them again byte for byte. */
static void redrawn(const char *dir, const char *script,
                    const char *const *figs, int nfigs) {
  static const char *const ext[2] = {"png", "svg"};
  char rel[256], keep[300];
  for (int k = 0; k < nfigs; k++)
    for (int e = 0; e < 2; e++) {
      snprintf(rel, sizeof rel, "%s/%s.%s", dir, figs[k], ext[e]);
      size_t n;
      char *b = slurp_rel(rel, &n);
      if (e == 0) {
        cr_assert(n > 8 && memcmp(b, "\x89PNG\r\n\x1a\n", 8) == 0, "%s", rel);
      } else {
        cr_assert_not_null(strstr(b, "<svg"), "%s", rel);
        const char *end = b + n;
        while (end > b && (end[-1] == '\n' || end[-1] == ' '))
          end--;
        cr_assert(end - b > 6 && memcmp(end - 6, "</svg>", 6) == 0,
                  "%s does not end with </svg>", rel);
      }
      free(b);
      snprintf(keep, sizeof keep, "%s.kept", rel);
      char a[600], c[600];
      snprintf(a, sizeof a, "%s/%s", tmpdir, rel);
      snprintf(c, sizeof c, "%s/%s", tmpdir, keep);
      cr_assert_eq(rename(a, c), 0);
    }
  char cmd[700];
  snprintf(cmd, sizeof cmd, "cd '%s/%s' && gnuplot '%s' 2>&1", tmpdir, dir,
           script);
  cr_assert_eq(system(cmd), 0, "%s failed in its folder", script);
  for (int k = 0; k < nfigs; k++)
    for (int e = 0; e < 2; e++) {
      size_t n1, n2;
      snprintf(rel, sizeof rel, "%s/%s.%s", dir, figs[k], ext[e]);
      snprintf(keep, sizeof keep, "%s.kept", rel);
      char *a = slurp_rel(rel, &n1), *b = slurp_rel(keep, &n2);
      cr_assert(n1 == n2 && memcmp(a, b, n1) == 0,
                "%s drawn again differs from lorasim's", rel);
      free(a);
      free(b);
    }
}

Test(compare, figures_are_png_and_svg_redrawn_from_the_results_folder) {
  char args[1024];
  snprintf(args, sizeof args,
           "compare '%s/fixtures/replay/sixtick.json' --arms "
           "resident_greedy:lru:none,deficit_aging:lru:age_triggered "
           "--out p",
           LSIM_TEST_DIR);
  cr_assert_eq(lorasim(args), 0, "%s", out);
  int noted = strstr(out, "gnuplot not found") != NULL;
  snprintf(args, sizeof args,
           "replay '%s/fixtures/replay/sixtick.json' --db r/run.db --quiet",
           LSIM_TEST_DIR);
  char mk[600];
  snprintf(mk, sizeof mk, "%s/r", tmpdir);
  cr_assert_eq(mkdir(mk, 0777), 0);
  cr_assert_eq(lorasim(args), 0, "%s", out);
  static const char *const cdat[] = {
      "p/compare-service.dat", "p/compare-ttft.dat", "p/compare-timeline.dat",
      "p/compare-starvation.dat", "p/compare-tenant-starvation.dat",
      "p/compare-share.dat", "r/run-ttft.dat", "r/run-residency.dat",
      "r/run-starvation.dat", "r/run-share.dat"};
  for (size_t i = 0; i < sizeof cdat / sizeof cdat[0]; i++)
    dat_headed(cdat[i]);
  /* the share data: demand from the requests (every witness request asks
  ** for 1 unit: hot 6, cold 1, warm 1) and the ledger's service */
  size_t n;
  char *share = slurp_rel("r/run-share.dat", &n);
  cr_assert_not_null(strstr(share, "\nhot 6 0.750000 6 0.857143\n"), "%s",
                     share);
  cr_assert_not_null(strstr(share, "\ncold 1 0.125000 0 0.000000\n"), "%s",
                     share);
  free(share);
  /* the starvation timeline: B's load-starved interval on the cold
  ** tenant's row (1), ticks 10 to 16 of 1 ms */
  char *sv = slurp_rel("r/run-starvation.dat", &n);
  cr_assert_not_null(strstr(sv, "\n1 0.010000 0.016000\n"), "%s", sv);
  free(sv);
  if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
    cr_log_warn("gnuplot not installed: skipping the PNG/SVG checks");
    cr_assert(noted, "compare did not say that gnuplot is missing");
    return;
  }
  /* the scripts name their data relative to their folder */
  char *gp = slurp_rel("p/compare-plots.gp", &n);
  cr_assert_null(strstr(gp, tmpdir), "compare-plots.gp names an absolute path");
  free(gp);
  gp = slurp_rel("r/run-plots.gp", &n);
  cr_assert_null(strstr(gp, tmpdir), "run-plots.gp names an absolute path");
  free(gp);
  static const char *const cf[] = {
      "compare-service", "compare-ttft", "compare-service-time",
      "compare-gap", "compare-residency", "compare-starvation",
      "compare-tenant-starvation", "compare-share"};
  redrawn("p", "compare-plots.gp", cf, 8);
  static const char *const rf[] = {"run-ttft", "run-residency",
                                   "run-starvation", "run-share"};
  redrawn("r", "run-plots.gp", rf, 4);
}
