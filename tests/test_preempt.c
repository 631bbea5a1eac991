/* Preemption by recompute ($.workers.kv_reserve "incremental") through the
** binary: KV grows page by page, the newest running request is preempted
** when the pool is out of pages, it recomputes its prompt and tokens in one
** row, its service is debited exactly once, its arrival and first token
** stay, and with several workers it migrates to the worker with the most
** free pages.  The whole-reservation default never preempts. */
#include <criterion/criterion.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define LSIM_TMP_PREFIX "/tmp/lsim-preempt-"
#include "cli_harness.h"

static double q(const char *rel, const char *sql) {
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

static void replay(const char *fixture, const char *db) {
  char args[1024];
  snprintf(args, sizeof args,
           "replay '%s/fixtures/replay/%s' --db %s --no-plots --quiet",
           LSIM_TEST_DIR, fixture, db);
  cr_assert_eq(lorasim(args), 0, "%s", out);
}

TestSuite(preempt, .init = mk_tmp, .fini = rm_tmp);

Test(preempt, incremental_kv_preempts_newest_and_debits_once) {
  replay("preempt-whole.json", "w.db");
  replay("preempt-incremental.json", "i.db");
  /* whole reservation: never preempts, and queues instead */
  cr_assert_eq(q("w.db", "SELECT count(*) FROM events WHERE kind=31"), 0);
  double pre = q("i.db", "SELECT count(*) FROM events WHERE kind=31");
  cr_assert_gt(pre, 0);
  cr_assert_eq(q("i.db", "SELECT value FROM runs_summary WHERE "
                         "key='requests_preempted'"),
               pre);
  /* everyone completes, with every token */
  cr_assert_eq(q("i.db", "SELECT count(*) FROM requests WHERE outcome='ok' "
                         "AND output_tokens = CASE WHEN request < 4 THEN 200 "
                         "ELSE 120 END"),
               6);
  /* the first preemption takes the newest request (the last admitted) */
  cr_assert_eq(q("i.db", "SELECT request FROM events WHERE kind=31 ORDER BY "
                         "seq LIMIT 1"),
               5);
  /* a preempted request was running at the time: it had a first token */
  cr_assert_eq(q("i.db", "SELECT count(*) FROM events p JOIN requests r USING "
                         "(request) WHERE p.kind=31 AND r.first_token_tick > "
                         "p.tick"),
               0);
  /* service exactly once: prompt + (output - 1) decode units */
  cr_assert_eq(q("i.db", "SELECT count(*) FROM (SELECT request, sum(value) AS "
                         "s FROM events WHERE kind=8 GROUP BY request) JOIN "
                         "requests USING (request) WHERE s = prompt_tokens + "
                         "output_tokens - 1"),
               6);
  /* its recompute row: prompt + the tokens it had, one row */
  cr_assert_eq(q("i.db", "SELECT count(*) FROM events p WHERE p.kind=31 AND "
                         "p.value != 64 + (SELECT count(*) FROM events d "
                         "WHERE d.kind=8 AND d.request=p.request AND d.tick "
                         "<= p.tick)"),
               0);
  /* arrival never moves: the trace's times (0.1 ms apart, 1 µs ticks) */
  cr_assert_eq(q("i.db", "SELECT count(*) FROM requests WHERE arrival_tick = "
                         "request * 100"),
               6);
  /* all pages back, and the pool was never over-committed (the run is ok
  ** only if every conservation check passed) */
  cr_assert_eq(q("i.db", "SELECT status='ok' FROM runs"), 1);
  /* incremental reservation runs them together: lower p99 TTFT */
  cr_assert_lt(q("i.db", "SELECT value FROM runs_summary WHERE "
                         "key='ttft_p99_ms'"),
               q("w.db", "SELECT value FROM runs_summary WHERE "
                         "key='ttft_p99_ms'"));
}

Test(preempt, migration_moves_the_newest_to_the_freest_worker) {
  replay("preempt-migrate.json", "m.db");
  double mig = q("m.db", "SELECT count(*) FROM events WHERE kind=31 AND "
                         "detail='migrate'");
  cr_assert_gt(mig, 0);
  /* every migrated request finished on worker 1, where it went */
  cr_assert_eq(q("m.db", "SELECT count(*) FROM events p JOIN requests r USING "
                         "(request) WHERE p.kind=31 AND p.detail='migrate' AND "
                         "r.worker = p.generation AND r.outcome='ok'"),
               mig);
  cr_assert_eq(q("m.db", "SELECT count(*) FROM requests WHERE outcome='ok'"),
               6);
  /* worker 1 had to load the adapter: the cold side of a migration */
  cr_assert_geq(q("m.db", "SELECT count(*) FROM events WHERE kind=3 AND "
                          "worker=1"),
                1);
}

Test(preempt, same_seed_same_rows) {
  replay("preempt-incremental.json", "a.db");
  replay("preempt-incremental.json", "b.db");
  const char *d = "SELECT count(*) * 1000003 + sum((seq * 7 + tick * 13 + "
                  "kind * 17 + coalesce(value, 0) * 19 + coalesce(request, "
                  "0)) % 1000003) FROM events";
  cr_assert_eq(q("a.db", d), q("b.db", d));
}
