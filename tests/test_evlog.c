/* The event log (engine/evlog.h): one seq counter for every writer. */
#include <criterion/criterion.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/evlog.h"
#include "sim/replay.h"
#include "sim/scenario.h"

typedef struct {
  int64_t seq[8];
  int kind[8];
  int n;
  int64_t fail_at; /* fail the call with this seq (LSIM_E_IO) */
} rec;

static lsim_err on_event(void *ud, const lsim_event *ev) {
  rec *r = ud;
  if (ev->seq == r->fail_at)
    return LSIM_E_IO;
  r->seq[r->n] = ev->seq;
  r->kind[r->n++] = ev->kind;
  return 0;
}

Test(evlog, numbers_every_event_once_in_emission_order) {
  rec r = {.fail_at = -1};
  lsim_sink sink = {.event = on_event, .ud = &r};
  lsim_evlog log;
  lsim_evlog_init(&log, &sink);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  for (int i = 0; i < 3; i++) {
    /* a stale seq in the struct is overwritten */
    lsim_event ev = {.seq = 99, .kind = LSIM_EV_FAULT_INJECTED + i};
    cr_assert_eq(lsim_evlog_emit(&log, &ev, &eb), 0, "%s", eb.msg);
    cr_assert_eq(ev.seq, i);
  }
  cr_assert_eq(r.n, 3);
  for (int i = 0; i < 3; i++) {
    cr_assert_eq(r.seq[i], i);
    cr_assert_eq(r.kind[i], LSIM_EV_FAULT_INJECTED + i);
  }
  cr_assert_eq(log.next_seq, 3);
}

Test(evlog, without_a_sink_seqs_are_still_consumed) {
  lsim_evlog log;
  lsim_evlog_init(&log, NULL);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_event ev = {.kind = LSIM_EV_QUEUE_ENQUEUED};
  cr_assert_eq(lsim_evlog_emit(&log, &ev, &eb), 0);
  cr_assert_eq(lsim_evlog_emit(&log, &ev, &eb), 0);
  cr_assert_eq(ev.seq, 1);
  cr_assert_eq(log.next_seq, 2);
}

Test(evlog, a_sink_error_names_the_kind_and_seq) {
  rec r = {.fail_at = 1};
  lsim_sink sink = {.event = on_event, .ud = &r};
  lsim_evlog log;
  lsim_evlog_init(&log, &sink);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_event ev = {.kind = LSIM_EV_FAULT_INJECTED};
  cr_assert_eq(lsim_evlog_emit(&log, &ev, &eb), 0);
  cr_assert_eq(lsim_evlog_emit(&log, &ev, &eb), LSIM_E_IO);
  cr_assert_not_null(strstr(eb.msg, "fault_injected (seq 1)"), "%s", eb.msg);
}

static int64_t q1(sqlite3 *h, const char *sql) {
  sqlite3_stmt *st;
  cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK, "%s: %s",
               sql, sqlite3_errmsg(h));
  cr_assert_eq(sqlite3_step(st), SQLITE_ROW, "%s", sql);
  int64_t v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return v;
}

/* The world (sim/replay.c) writes the faults it decides to the engine's log:
** one gap-free sequence, and a failed copy's fault row comes right before
** the engine's adapter_load_failed for the same worker and adapter. */
Test(evlog, world_faults_share_the_engine_sequence) {
  char dir[] = "/tmp/lsim-evlog-XXXXXX";
  cr_assert_not_null(mkdtemp(dir));
  char db[300], path[512];
  snprintf(db, sizeof db, "%s/f.db", dir);
  snprintf(path, sizeof path, "%s/tests/fixtures/replay/faults.json",
           LSIM_SOURCE_DIR);
  static lsim_scenario sc;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_scenario_load(&sc, path, &eb), 0, "%s", eb.msg);
  lsim_replay_opts o = {.db_path = db, .command_line = "test"};
  lsim_summary s;
  cr_assert_eq(lsim_replay_run(&sc, &o, &s, &eb), 0, "%s", eb.msg);
  sqlite3 *h;
  cr_assert_eq(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  int64_t n = q1(h, "SELECT count(*) FROM events");
  cr_assert_gt(n, 0);
  cr_assert_eq(q1(h, "SELECT count(DISTINCT seq) FROM events"), n);
  cr_assert_eq(q1(h, "SELECT min(seq) FROM events"), 0);
  cr_assert_eq(q1(h, "SELECT max(seq) FROM events"), n - 1);
  int64_t faults = q1(h, "SELECT count(*) FROM events WHERE kind=20 AND "
                         "detail='copy_failure' AND value=0");
  cr_assert_gt(faults, 0);
  cr_assert_eq(q1(h, "SELECT count(*) FROM events f JOIN events l ON "
                     "l.seq = f.seq + 1 AND l.kind = 13 AND "
                     "l.worker = f.worker AND l.adapter = f.adapter AND "
                     "l.tick = f.tick WHERE f.kind=20 AND "
                     "f.detail='copy_failure' AND f.value=0"),
               faults);
  sqlite3_close(h);
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
}
