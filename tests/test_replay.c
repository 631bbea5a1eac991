/* Replay end to end: determinism, ledgers, interruption, failure. */
#include <criterion/criterion.h>
#include <openssl/evp.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "engine/event.h"
#include "sim/replay.h"
#include "sim/scenario.h"

static char tmpdir[256];

static void mk_tmp(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/lsim-replay-XXXXXX");
  cr_assert_not_null(mkdtemp(tmpdir));
}

static void rm_tmp(void) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  cr_assert_eq(system(cmd), 0);
}

static void load(lsim_scenario *sc, const char *rel) {
  char path[512];
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  snprintf(path, sizeof path, "%s/%s", LSIM_SOURCE_DIR, rel);
  cr_assert_eq(lsim_scenario_load(sc, path, &eb), 0, "%s", eb.msg);
}

static lsim_err run(const lsim_scenario *sc, const char *db, lsim_summary *s,
                    lsim_errbuf *eb) {
  lsim_replay_opts o = {.db_path = db, .command_line = "test"};
  return lsim_replay_run(sc, &o, s, eb);
}

/* SHA-256 (hex) of every column of every row of `sql`, in order. */
static void digest(const char *db, const char *sql, char hex[65]) {
  sqlite3 *h;
  sqlite3_stmt *st;
  cr_assert_eq(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK, "%s",
               sqlite3_errmsg(h));
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
  int rows = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    rows++;
    for (int c = 0; c < sqlite3_column_count(st); c++) {
      const unsigned char *t = sqlite3_column_text(st, c);
      const char *v = t ? (const char *)t : "\\N";
      EVP_DigestUpdate(ctx, v, strlen(v));
      EVP_DigestUpdate(ctx, "\x1f", 1);
    }
    EVP_DigestUpdate(ctx, "\x1e", 1);
  }
  cr_assert_gt(rows, 0, "no rows for %s", sql);
  unsigned char md[32];
  EVP_DigestFinal_ex(ctx, md, NULL);
  EVP_MD_CTX_free(ctx);
  for (int i = 0; i < 32; i++)
    sprintf(hex + 2 * i, "%02x", md[i]);
  sqlite3_finalize(st);
  sqlite3_close(h);
}

static int64_t q1(const char *db, const char *sql) {
  sqlite3 *h;
  sqlite3_stmt *st;
  cr_assert_eq(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK, "%s: %s",
               sql, sqlite3_errmsg(h));
  cr_assert_eq(sqlite3_step(st), SQLITE_ROW, "%s", sql);
  int64_t v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(h);
  return v;
}

static void qs(const char *db, const char *sql, char *out, size_t n) {
  sqlite3 *h;
  sqlite3_stmt *st;
  cr_assert_eq(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
  cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
  const unsigned char *t = sqlite3_column_text(st, 0);
  snprintf(out, n, "%s", t ? (const char *)t : "");
  sqlite3_finalize(st);
  sqlite3_close(h);
}

#define EVENTS_SQL                                                          \
  "SELECT seq,tick,kind,worker,request,tenant,adapter,generation,attempt,"  \
  "pages,bytes,value,detail FROM events ORDER BY seq"
#define REQUESTS_SQL "SELECT * FROM requests ORDER BY request"

TestSuite(replay, .init = mk_tmp, .fini = rm_tmp);

Test(replay, quickstart_same_seed_same_rows_other_seed_other_rows) {
  static lsim_scenario sc;
  load(&sc, "scenarios/quickstart.json");
  char a[512], b[512], c[512];
  snprintf(a, sizeof a, "%s/a.db", tmpdir);
  snprintf(b, sizeof b, "%s/b.db", tmpdir);
  snprintf(c, sizeof c, "%s/c.db", tmpdir);
  lsim_summary s1, s2, s3;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(run(&sc, a, &s1, &eb), 0, "%s", eb.msg);
  cr_assert_eq(run(&sc, b, &s2, &eb), 0, "%s", eb.msg);
  sc.seed += 1;
  cr_assert_eq(run(&sc, c, &s3, &eb), 0, "%s", eb.msg);

  char ha[65], hb[65], hc[65];
  digest(a, EVENTS_SQL, ha);
  digest(b, EVENTS_SQL, hb);
  digest(c, EVENTS_SQL, hc);
  cr_assert_str_eq(ha, hb, "same seed must give byte-identical events");
  cr_assert_str_neq(ha, hc, "another seed must give other events");
  digest(a, REQUESTS_SQL, ha);
  digest(b, REQUESTS_SQL, hb);
  cr_assert_str_eq(ha, hb);

  /* the quickstart is what the README promises: a few hundred requests,
  ** two tenants, all served, with adapter loads and a real hit rate */
  cr_assert_eq(s1.arrived, 400);
  cr_assert_eq(s1.completed + s1.rejected + s1.unfinished, 400);
  cr_assert_eq(s1.unfinished, 0);
  cr_assert_gt(s1.completed, 350);
  cr_assert_gt(s1.loads, 0);
  cr_assert(s1.hit_rate > 0 && s1.hit_rate < 1);
  cr_assert(s1.ttft_p50_ms > 0 && s1.ttft_p99_ms >= s1.ttft_p50_ms);
  cr_assert(s1.tbt_p50_ms > 0 && s1.tbt_p99_ms >= s1.tbt_p50_ms);
  char st[32];
  qs(a, "SELECT status FROM runs", st, sizeof st);
  cr_assert_str_eq(st, "ok");
  cr_assert_eq(q1(a, "SELECT events FROM runs"),
               q1(a, "SELECT count(*) FROM events"));
}

Test(replay, ledgers_reconcile_on_a_tiny_pool_with_faults) {
  static lsim_scenario sc;
  load(&sc, "tests/fixtures/replay/tiny.json");
  char db[512];
  snprintf(db, sizeof db, "%s/tiny.db", tmpdir);
  lsim_summary s;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(run(&sc, db, &s, &eb), 0, "%s", eb.msg);

  /* the small pool and 10% copy faults must exercise every path */
  cr_assert_gt(s.evictions, 0);
  cr_assert_gt(s.load_failures, 0);
  /* every arrival has exactly one request row */
  cr_assert_eq(q1(db, "SELECT count(*) FROM requests"), 600);
  cr_assert_eq(q1(db, "SELECT count(DISTINCT request) FROM requests"), 600);
  cr_assert_eq(q1(db, "SELECT count(*) FROM requests WHERE outcome='unfinished'"), 0);
  /* loads: started = completed + failed; completed = published;
  ** failed = rolled back; evicted = retired + handed back to a restore
  ** (a victim of a rolled-back load is reloaded, not retired) */
#define K(n) "(SELECT count(*) FROM events WHERE kind=" #n ")"
  cr_assert_eq(q1(db, "SELECT " K(3) " - " K(4) " - " K(13)), 0);
  cr_assert_eq(q1(db, "SELECT " K(4) " - " K(5)), 0);
  cr_assert_eq(q1(db, "SELECT " K(13) " - " K(14)), 0);
  cr_assert_eq(q1(db, "SELECT " K(11) " - " K(12) " - " K(18)), 0);
  /* KV pages: everything reserved was released (no request left running) */
  cr_assert_eq(q1(db, "SELECT (SELECT sum(pages) FROM events WHERE kind=15) -"
                      " (SELECT sum(pages) FROM events WHERE kind=16)"), 0);
  /* service: a completed request was debited prompt + output - 1 units */
  cr_assert_eq(q1(db, "SELECT count(*) FROM requests r WHERE outcome='ok' AND "
                      "prompt_tokens + output_tokens - 1 != (SELECT sum(value) "
                      "FROM events e WHERE e.kind=8 AND e.request=r.request)"),
               0);
  /* selected rows = completed rows (no iteration failed here) */
  cr_assert_eq(q1(db, "SELECT (SELECT sum(value) FROM events WHERE kind=6) - "
                      "(SELECT sum(value) FROM events WHERE kind=7)"), 0);
  /* each iteration's row count matches its plan ledger */
  cr_assert_eq(q1(db, "SELECT count(*) FROM iterations i JOIN events e ON "
                      "e.kind=6 AND e.generation=i.iter WHERE e.value != "
                      "i.prefill_rows + i.decode_rows"), 0);
  /* generations count load attempts per (worker, adapter) from 1: each
  ** publication or failed load takes the next, none is reused */
  cr_assert_eq(q1(db, "SELECT count(*) FROM (SELECT worker, adapter, "
                      "max(generation) g, count(*) n FROM events WHERE kind "
                      "IN (5, 13) GROUP BY worker, adapter) WHERE g != n"),
               0);
  cr_assert_eq(q1(db, "SELECT count(*) FROM (SELECT worker, adapter, "
                      "generation FROM events WHERE kind IN (5, 13) GROUP BY "
                      "worker, adapter, generation HAVING count(*) > 1)"),
               0);
  /* a rejected request never produced a token */
  cr_assert_eq(q1(db, "SELECT count(*) FROM requests WHERE outcome='rejected' "
                      "AND first_token_tick IS NOT NULL"), 0);
  /* both workers were used */
  cr_assert_eq(q1(db, "SELECT count(DISTINCT worker) FROM iterations"), 2);
  /* ticks never go backwards in seq order */
  cr_assert_eq(q1(db, "SELECT count(*) FROM events a JOIN events b ON "
                      "b.seq = a.seq + 1 WHERE b.tick < a.tick"), 0);
}

Test(replay, csv_trace_replays_every_line) {
  static lsim_scenario sc;
  load(&sc, "tests/fixtures/replay/csv.json");
  char db[512];
  snprintf(db, sizeof db, "%s/csv.db", tmpdir);
  lsim_summary s;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(run(&sc, db, &s, &eb), 0, "%s", eb.msg);
  cr_assert_eq(s.arrived, 40);
  cr_assert_eq(s.completed, 40);
  /* arrival ticks are the file's microseconds at 1000 ns per tick */
  cr_assert_eq(q1(db, "SELECT arrival_tick FROM requests WHERE request=0"), 543);
}

static volatile sig_atomic_t stop_flag;
static void on_int(int sig) { (void)sig; stop_flag = 1; }
static void raise_int(void *ud, int64_t n) {
  (void)ud;
  if (n >= 4096)
    raise(SIGINT);
}

Test(replay, sigint_marks_the_run_interrupted_never_ok) {
  static lsim_scenario sc;
  load(&sc, "scenarios/quickstart.json");
  char db[512];
  snprintf(db, sizeof db, "%s/int.db", tmpdir);
  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_int;
  sigaction(SIGINT, &sa, &old);
  stop_flag = 0;
  lsim_replay_opts o = {.db_path = db,
                        .command_line = "test",
                        .stop = &stop_flag,
                        .hook = raise_int};
  lsim_summary s;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_err rc = lsim_replay_run(&sc, &o, &s, &eb);
  sigaction(SIGINT, &old, NULL);
  cr_assert_eq(rc, LSIM_E_INTERRUPTED, "rc %d: %s", rc, eb.msg);
  char st[32];
  qs(db, "SELECT status FROM runs", st, sizeof st);
  cr_assert_str_eq(st, "interrupted");
  cr_assert_str_eq(s.status, "interrupted");
  /* what ran is kept and the unfinished requests are recorded */
  cr_assert_gt(q1(db, "SELECT count(*) FROM events"), 0);
  cr_assert_gt(q1(db, "SELECT count(*) FROM requests WHERE outcome='unfinished'"), 0);
  cr_assert_lt(q1(db, "SELECT count(*) FROM requests"), 400);
}

Test(replay, a_bad_trace_line_fails_the_run_with_its_location) {
  static lsim_scenario sc;
  load(&sc, "tests/fixtures/replay/bad_trace.json");
  char db[512];
  snprintf(db, sizeof db, "%s/bad.db", tmpdir);
  lsim_summary s;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_err rc = run(&sc, db, &s, &eb);
  cr_assert_eq(rc, LSIM_E_TRACE_PARSE, "%d %s", rc, eb.msg);
  cr_assert_not_null(strstr(eb.msg, "bad_trace.csv:4"), "%s", eb.msg);
  char st[32], err[512];
  qs(db, "SELECT status FROM runs", st, sizeof st);
  cr_assert_str_eq(st, "failed");
  qs(db, "SELECT error FROM runs", err, sizeof err);
  cr_assert_not_null(strstr(err, "bad_trace.csv:4"));
}

/* Every shipped scenario under every registered scheduler, eviction and
** prefetch policy: a smoke run that must finish ok with its ledgers sound.
** (bench-* scenarios are the benchmark's, too long for the suite.) */
#include <dirent.h>

#include "backends/backend.h"
#include "engine/policy/policy.h"

Test(replay, every_scenario_under_every_policy) {
  char dir[512];
  snprintf(dir, sizeof dir, "%s/scenarios", LSIM_SOURCE_DIR);
  DIR *d = opendir(dir);
  cr_assert_not_null(d);
  /* directory order is not ours to rely on: collect, then sort */
  char names[64][256];
  int n = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL && n < 64) {
    size_t len = strlen(de->d_name);
    if (len > 5 && strcmp(de->d_name + len - 5, ".json") == 0 &&
        strncmp(de->d_name, "bench", 5) != 0)
      snprintf(names[n++], sizeof names[0], "%s", de->d_name);
  }
  closedir(d);
  qsort(names, (size_t)n, sizeof names[0],
        (int (*)(const void *, const void *))strcmp);
  cr_assert_gt(n, 0);
  int runs = 0;
  for (int i = 0; i < n; i++) {
    for (const char *const *s = lsim_sched_names(); *s; s++)
      for (const char *const *e = lsim_evict_names(); *e; e++)
        for (const char *const *p = lsim_prefetch_names(); *p; p++) {
          static lsim_scenario sc;
          char rel[sizeof names[0] + 16], db[600];
          snprintf(rel, sizeof rel, "scenarios/%.255s", names[i]);
          load(&sc, rel);
          snprintf(sc.scheduler, sizeof sc.scheduler, "%s", *s);
          snprintf(sc.evict, sizeof sc.evict, "%s", *e);
          snprintf(sc.prefetch, sizeof sc.prefetch, "%s", *p);
          snprintf(db, sizeof db, "%s/smoke-%d.db", tmpdir, runs++);
          lsim_summary sum;
          lsim_errbuf eb = LSIM_ERRBUF_INIT;
          cr_assert_eq(run(&sc, db, &sum, &eb), 0, "%s under %s/%s/%s: %s",
                       names[i], *s, *e, *p, eb.msg);
          cr_assert_str_eq(sum.status, "ok");
          cr_assert_eq(sum.completed + sum.rejected + sum.unfinished,
                       sum.arrived);
        }
  }
  cr_assert_geq(runs, n);
}

/*
** One admission may have to evict more adapters than any small fixed
** bound: 100 idle one-request adapters fill the pool, then one long
** prompt needs the KV room of about 70 of them at once.  Every victim gets
** its adapter_evicted row and the run ends ok.
*/
Test(replay, one_admission_evicts_more_than_64_adapters) {
  static lsim_scenario sc;
  load(&sc, "tests/fixtures/replay/many_victims.json");
  char db[512];
  snprintf(db, sizeof db, "%s/victims.db", tmpdir);
  lsim_summary s;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(run(&sc, db, &s, &eb), 0, "%s", eb.msg);
  cr_assert_str_eq(s.status, "ok");
  cr_assert_eq(s.completed, 101);
  int64_t most = q1(db, "SELECT max(n) FROM (SELECT count(*) AS n FROM events "
                        "WHERE kind = 11 GROUP BY tick)");
  cr_assert_gt(most, 64, "largest eviction burst: %lld", (long long)most);
  cr_assert_eq(q1(db, "SELECT count(*) FROM events WHERE kind = 11"),
               q1(db, "SELECT count(*) FROM events WHERE kind = 12"));
}

/*
** The trace's cancel and deadline columns (withdraw.csv, one-request
** batches of 0.1 ms iterations): r0 runs and is cancelled at 5 ms while its
** iteration is in flight, so it leaves when that iteration completes with
** 50 tokens, debited exactly for them; r1 is cancelled at 3 ms while it
** waits (its KV already reserved); r2 is still waiting at its 2 ms deadline
** and is refused; r3 meets its deadline and completes.  A deadline that
** fires after its request finished does not stretch the run.
*/
Test(replay, trace_cancel_and_deadline_withdraw_requests) {
  static lsim_scenario sc;
  load(&sc, "tests/fixtures/replay/withdraw.json");
  char db[512];
  snprintf(db, sizeof db, "%s/withdraw.db", tmpdir);
  lsim_summary s;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(run(&sc, db, &s, &eb), 0, "%s", eb.msg);
  cr_assert_str_eq(s.status, "ok");
  cr_assert_eq(s.completed, 1);
  char out[64];
  const char *want[4] = {"cancelled", "cancelled", "rejected", "ok"};
  for (int r = 0; r < 4; r++) {
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT outcome FROM requests WHERE request=%d",
             r);
    qs(db, sql, out, sizeof out);
    cr_assert_str_eq(out, want[r], "request %d", r);
  }
  /* r0: cancelled while running, after its in-flight iteration completed */
  qs(db, "SELECT detail FROM events WHERE kind=21 AND request=0", out,
     sizeof out);
  cr_assert_str_eq(out, "running");
  int64_t produced = q1(db, "SELECT output_tokens FROM requests WHERE "
                            "request=0");
  cr_assert(produced > 1 && produced < 100, "produced %lld",
            (long long)produced);
  cr_assert_eq(q1(db, "SELECT value FROM events WHERE kind=21 AND request=0"),
               produced);
  cr_assert_eq(q1(db, "SELECT tick FROM events WHERE kind=21 AND request=0"),
               q1(db, "SELECT max(tick) FROM events WHERE kind=7 AND tick <= "
                      "(SELECT tick FROM events WHERE kind=21 AND "
                      "request=0)"));
  cr_assert_geq(q1(db, "SELECT tick FROM events WHERE kind=21 AND request=0"),
                5000);
  /* service: the prompt once, then one unit per decoded token */
  cr_assert_eq(q1(db, "SELECT sum(value) FROM events WHERE kind=8 AND "
                      "request=0"),
               16 + produced - 1);
  /* its KV went back: one release of what the reservation committed */
  cr_assert_eq(q1(db, "SELECT sum(pages) FROM events WHERE kind=16 AND "
                      "request=0"),
               q1(db, "SELECT sum(pages) FROM events WHERE kind=15 AND "
                      "request=0"));
  /* r1 waited with KV reserved; r2 refused at its deadline */
  qs(db, "SELECT detail FROM events WHERE kind=21 AND request=1", out,
     sizeof out);
  cr_assert_str_eq(out, "admitted");
  cr_assert_eq(q1(db, "SELECT tick FROM events WHERE kind=21 AND request=1"),
               3000);
  qs(db, "SELECT detail FROM events WHERE kind=10 AND request=2", out,
     sizeof out);
  cr_assert_str_eq(out, "deadline_expired");
  cr_assert_eq(q1(db, "SELECT tick FROM events WHERE kind=10 AND request=2"),
               2000);
  cr_assert_eq(q1(db, "SELECT count(*) FROM events WHERE kind=8 AND "
                      "request IN (1, 2)"),
               0);
  /* r3's late deadline (1 s) does not move the end of the run */
  cr_assert_eq(s.end_tick,
               q1(db, "SELECT finish_tick FROM requests WHERE request=3"));
}

/*
** The Prometheus text file: one TYPE line per metric name, before its
** samples; labels only from the bounded set (no raw ids); the figures are
** the run's (runs_summary and the event counts).
*/
Test(replay, prometheus_file_is_well_formed_and_bounded) {
  static lsim_scenario sc;
  load(&sc, "tests/fixtures/replay/faults.json");
  char db[512];
  snprintf(db, sizeof db, "%s/prom.db", tmpdir);
  lsim_summary s;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(run(&sc, db, &s, &eb), 0, "%s", eb.msg);
  FILE *f = fopen(s.metrics_path, "r");
  cr_assert_not_null(f, "%s", s.metrics_path);
  char line[512], typed[128][96], summaries[8][96];
  int ntyped = 0, nsummaries = 0, samples = 0;
  double hits = -1, rejected = -1, ttft_sum = -1, ttft_count = -1;
  while (fgets(line, sizeof line, f)) {
    char name[96], type[16];
    if (strncmp(line, "# TYPE ", 7) == 0) {
      cr_assert_eq(sscanf(line + 7, "%95s %15s", name, type), 2);
      for (int i = 0; i < ntyped; i++)
        cr_assert_str_neq(typed[i], name, "two TYPE lines for %s", name);
      cr_assert_lt(ntyped, 128);
      snprintf(typed[ntyped++], sizeof typed[0], "%s", name);
      if (strcmp(type, "summary") == 0) {
        cr_assert_lt(nsummaries, 8);
        snprintf(summaries[nsummaries++], sizeof summaries[0], "%s", name);
      }
      continue;
    }
    if (line[0] == '#')
      continue;
    size_t n = strcspn(line, "{ ");
    cr_assert_lt(n, sizeof name);
    memcpy(name, line, n);
    name[n] = 0;
    int known = 0;
    for (int i = 0; i < ntyped; i++)
      known |= strcmp(typed[i], name) == 0;
    /* a summary's samples: NAME{quantile}, NAME_sum, NAME_count */
    for (int i = 0; i < nsummaries; i++) {
      size_t k = strlen(summaries[i]);
      known |= strncmp(name, summaries[i], k) == 0 &&
               (strcmp(name + k, "_sum") == 0 ||
                strcmp(name + k, "_count") == 0);
    }
    cr_assert(known, "sample before its TYPE: %s", line);
    if (line[n] == '{') {
      char key[32], val[96];
      cr_assert_eq(sscanf(line + n + 1, "%31[a-z_]=\"%95[^\"]", key, val), 2,
                   "%s", line);
      const char *ok[] = {"kind", "phase", "result", "rank", "quantile"};
      int good = 0;
      for (int i = 0; i < 5; i++)
        good |= strcmp(key, ok[i]) == 0;
      /* tenant: bounded by the scenario's tenants (names, not ids) */
      for (int t = 0; strcmp(key, "tenant") == 0 && t < sc.ntenants; t++)
        good |= strcmp(val, sc.tenants[t].name) == 0;
      cr_assert(good, "unbounded label %s in %s", key, line);
    }
    double v = strtod(strrchr(line, ' ') + 1, NULL);
    if (strcmp(name, "lorasim_adapter_cache_hits_total") == 0)
      hits = v;
    if (strcmp(name, "lorasim_adapter_requests_rejected_total") == 0)
      rejected = v;
    if (strcmp(name, "lorasim_ttft_seconds_sum") == 0)
      ttft_sum = v;
    if (strcmp(name, "lorasim_ttft_seconds_count") == 0)
      ttft_count = v;
    samples++;
  }
  fclose(f);
  cr_assert_gt(samples, 40);
  cr_assert_eq(hits, (double)q1(db, "SELECT count(*) FROM events WHERE "
                                    "kind=1 AND value=1"));
  cr_assert_eq(rejected, (double)s.rejected);
  /* the TTFT summary's count and sum are over the requests its quantiles
  ** are taken over (completed, with a first token), from the rows */
  const char *ok = "FROM requests WHERE outcome='ok' AND "
                   "first_token_tick IS NOT NULL";
  char sql[256];
  snprintf(sql, sizeof sql, "SELECT count(*) %s", ok);
  int64_t nttft = q1(db, sql);
  cr_assert_gt(nttft, 0);
  cr_assert_eq(ttft_count, (double)nttft);
  snprintf(sql, sizeof sql, "SELECT sum(first_token_tick - arrival_tick) %s",
           ok);
  double want = (double)q1(db, sql) * (double)sc.ns_per_tick / 1e9;
  cr_assert(fabs(ttft_sum - want) <= 1e-9 * want, "sum %.9f, rows %.9f",
            ttft_sum, want);
}

Test(replay, cpu_ref_backend_validates_every_iteration_and_changes_no_decision) {
  static lsim_scenario sc;
  load(&sc, "tests/fixtures/replay/csv.json");
  char a[512], b[512];
  snprintf(a, sizeof a, "%s/model.db", tmpdir);
  snprintf(b, sizeof b, "%s/ref.db", tmpdir);
  lsim_summary s1, s2;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(run(&sc, a, &s1, &eb), 0, "%s", eb.msg);
  snprintf(sc.backend, sizeof sc.backend, "cpu_ref");
  cr_assert_eq(run(&sc, b, &s2, &eb), 0, "%s", eb.msg);
  /* the backend executes; time and decisions come from the cost model */
  char ha[65], hb[65];
  digest(a, EVENTS_SQL, ha);
  digest(b, EVENTS_SQL, hb);
  cr_assert_str_eq(ha, hb);
  /* every iteration was executed through every family and agreed exactly */
  int64_t iters = q1(b, "SELECT count(*) FROM iterations");
  cr_assert_gt(iters, 0);
  cr_assert_eq(q1(b, "SELECT count(*) FROM validations WHERE exact = 1 AND "
                     "backend = 'cpu_ref'"), iters);
  cr_assert_eq(q1(b, "SELECT count(*) FROM iterations WHERE backend_ns IS NULL"),
               0);
  cr_assert_eq(q1(a, "SELECT count(*) FROM validations"), 0);
}

/* Fault injection end to end: every fault and recovery is an event, the
** ledgers reconcile, the pool is conserved, and the run is deterministic. */
Test(replay, injected_faults_are_logged_and_recovered) {
  static lsim_scenario sc;
  load(&sc, "tests/fixtures/replay/faults.json");
  char a[512], b[512];
  snprintf(a, sizeof a, "%s/fa.db", tmpdir);
  snprintf(b, sizeof b, "%s/fb.db", tmpdir);
  lsim_summary s1, s2;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(run(&sc, a, &s1, &eb), 0, "%s", eb.msg);
  cr_assert_eq(run(&sc, b, &s2, &eb), 0, "%s", eb.msg);
  char ha[65], hb[65];
  digest(a, EVENTS_SQL, ha);
  digest(b, EVENTS_SQL, hb);
  cr_assert_str_eq(ha, hb, "faults are seeded: same rows");
  cr_assert_str_eq(s1.status, "ok");
  /* each kind of fault happened and was logged */
  const char *faults[] = {"copy_failure", "digest_failure", "h2d_slowdown",
                          "cancel"};
  for (int i = 0; i < 4; i++) {
    char sql[200];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM events WHERE kind=20 AND detail='%s'",
             faults[i]);
    cr_assert_gt(q1(a, sql), 0, "no %s fault", faults[i]);
  }
  /* the fixed-tick copy failures all fired (3 listed) */
  cr_assert_geq(q1(a, "SELECT count(*) FROM events WHERE kind=20 AND "
                      "detail='copy_failure'"), 3);
  /* every copy failure and digest failure was rolled back */
  cr_assert_eq(q1(a, "SELECT count(*) FROM events WHERE kind=20 AND detail IN "
                     "('copy_failure','digest_failure')"),
               q1(a, "SELECT count(*) FROM events WHERE kind=13"));
  cr_assert_eq(q1(a, "SELECT " K(13) " - " K(14)), 0);
  cr_assert_eq(q1(a, "SELECT " K(3) " - " K(4) " - " K(13)), 0);
  cr_assert_eq(q1(a, "SELECT " K(4) " - " K(5)), 0);
  cr_assert_eq(q1(a, "SELECT " K(5) " - " K(19)), 0);
  cr_assert_eq(q1(a, "SELECT " K(11) " - " K(12) " - " K(18)), 0);
  cr_assert_gt(q1(a, "SELECT " K(18)), 0, "some victim was restored");
  /* a digest failure is never published: no publication follows a
  ** digest_failed load without a new load start in between */
  cr_assert_gt(q1(a, "SELECT count(*) FROM events WHERE kind=13 AND "
                     "detail='digest_failed'"), 0);
  /* cancellations: one request record and one event each */
  cr_assert_eq(q1(a, "SELECT count(*) FROM requests WHERE outcome='cancelled'"),
               q1(a, "SELECT " K(21)));
  cr_assert_gt(q1(a, "SELECT " K(21)), 0);
  cr_assert_eq(q1(a, "SELECT count(*) FROM requests"), 500);
  /* KV: every reservation was released, by finishing or cancelling */
  cr_assert_eq(q1(a, "SELECT (SELECT sum(pages) FROM events WHERE kind=15) -"
                     " (SELECT sum(pages) FROM events WHERE kind=16)"), 0);
  cr_assert_eq(s1.completed + s1.rejected + s1.unfinished, s1.arrived);
}

/* The offline oracle sees the future of the trace through the bounded
** lookahead and never loads more than LRU on the quickstart. */
Test(replay, belady_oracle_bounds_lru_on_the_quickstart) {
  static lsim_scenario sc;
  load(&sc, "scenarios/quickstart.json");
  char a[512], b[512];
  snprintf(a, sizeof a, "%s/lru.db", tmpdir);
  snprintf(b, sizeof b, "%s/belady.db", tmpdir);
  lsim_summary s1, s2;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(run(&sc, a, &s1, &eb), 0, "%s", eb.msg);
  snprintf(sc.evict, sizeof sc.evict, "belady");
  cr_assert_eq(run(&sc, b, &s2, &eb), 0, "%s", eb.msg);
  cr_assert_leq(s2.loads, s1.loads);
  cr_assert_leq(s2.evictions, s1.evictions);
  cr_assert_eq(s2.completed, 400);
}

Test(replay, a_blocked_head_never_strands_requests_that_hold_their_kv) {
  /* A small pool under a burst: requests admitted together with their
  ** adapter's load hold committed KV while the FCFS head waits for pages.
  ** They must still run (they need no new pages); otherwise nothing ever
  ** frees the pool and the run ends with almost everything unfinished. */
  static lsim_scenario sc;
  load(&sc, "tests/fixtures/replay/kv_deadlock.json");
  char db[512];
  snprintf(db, sizeof db, "%s/kvd.db", tmpdir);
  lsim_summary s;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(run(&sc, db, &s, &eb), 0, "%s", eb.msg);
  cr_assert_eq(s.unfinished, 0, "%lld of %lld requests stranded",
               (long long)s.unfinished, (long long)s.arrived);
  cr_assert_eq(s.completed + s.rejected, s.arrived);
}

Test(replay, skip_bad_rows_counts_the_row_and_replays_the_rest) {
  static lsim_scenario sc;
  load(&sc, "tests/fixtures/replay/bad_trace.json");
  sc.trace_skip_bad_rows = 1; /* what --skip-bad-rows sets */
  char db[512];
  snprintf(db, sizeof db, "%s/skip.db", tmpdir);
  lsim_summary s;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(run(&sc, db, &s, &eb), 0, "%s", eb.msg);
  /* four data lines, the third malformed */
  cr_assert_eq(s.arrived, 3);
  cr_assert_eq(s.trace_rows_skipped, 1);
  cr_assert_not_null(strstr(s.trace_first_skipped, "bad_trace.csv:4"), "%s",
                     s.trace_first_skipped);
  cr_assert_eq(q1(db, "SELECT count(*) FROM requests"), 3);
  cr_assert_eq(q1(db, "SELECT CAST(value AS INTEGER) FROM runs_summary WHERE "
                      "key = 'trace_rows_skipped'"), 1);
  /* request ids stay dense over the rows actually replayed */
  cr_assert_eq(q1(db, "SELECT max(request) FROM requests"), 2);
}
