/*
** test_db.c: the SQLite event spine (sim/db.c).
**
** Every test writes into its own directory under /tmp and reads the result
** back through the plain sqlite3 API, never through db.c, so the schema in
** docs/SCHEMA.md is what is checked.
*/
#include <criterion/criterion.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../sim/db.h"
#include "../sim/report.h"
#include "../sim/scenario.h"

#ifndef LSIM_TEST_DB_EVENTS
#define LSIM_TEST_DB_EVENTS 200000
#endif

/* ---- scratch directory ----------------------------------------------------- */

typedef struct {
  char dir[64];
  char db[128];
} tmp_t;

static void tmp_make(tmp_t *t) {
  snprintf(t->dir, sizeof t->dir, "/tmp/lsim-test-db-XXXXXX");
  cr_assert_not_null(mkdtemp(t->dir), "mkdtemp: %s", strerror(errno));
  snprintf(t->db, sizeof t->db, "%s/run.db", t->dir);
}

static void tmp_remove(tmp_t *t) {
  static const char *const sfx[] = {"", "-wal", "-shm", "-journal"};
  char p[160];
  for (size_t i = 0; i < sizeof sfx / sizeof sfx[0]; i++) {
    snprintf(p, sizeof p, "%s%s", t->db, sfx[i]);
    unlink(p);
  }
  rmdir(t->dir);
}

static int file_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* ---- a deterministic event stream with every field shape --------------------- */

static const char *const details[] = {"hit", "miss", "copy_failed", "lru"};

static void make_event(int64_t i, lsim_event *ev) {
  ev->seq = i;
  ev->tick = i / 3;
  ev->kind = 1 + (int)(i % (LSIM_EV__END - 1));
  ev->worker = i % 5 == 0 ? LSIM_NONE : (int)(i % 4);
  ev->request = i % 7 == 0 ? LSIM_NONE : i / 2;
  ev->tenant = i % 11 == 0 ? LSIM_NONE : (int)(i % 3);
  ev->adapter = i % 13 == 0 ? LSIM_NONE : (int)(i % 40);
  ev->generation = i % 2 ? LSIM_NONE : i / 100;
  ev->attempt = i % 9 == 0 ? LSIM_NONE : (int)(i % 4);
  ev->pages = i % 6 == 0 ? LSIM_NONE : i % 64;
  ev->bytes = i % 6 == 0 ? LSIM_NONE : (i % 64) * 2097152;
  ev->value = i % 17 == 0 ? LSIM_NONE : i * 1000003;
  ev->detail = i % 3 == 0 ? NULL : details[i % 4];
}

static void make_request(int64_t i, lsim_request_record *r) {
  r->request = i;
  r->tenant = (int)(i % 3);
  r->adapter = i % 10 == 0 ? LSIM_NONE : (int)(i % 40);
  r->worker = i % 8 == 0 ? LSIM_NONE : (int)(i % 2);
  r->arrival_tick = i * 10;
  r->first_token_tick = i % 4 == 0 ? LSIM_NONE : i * 10 + 5;
  r->finish_tick = i * 10 + 50;
  r->prompt_tokens = (int)(64 + i % 900);
  r->output_tokens = r->first_token_tick == LSIM_NONE ? 0 : (int)(1 + i % 300);
  r->loads_waited = (int)(i % 2);
  r->outcome = i % 4 == 0 ? "rejected" : "ok";
  /* the time breakdown partitions finish - arrival (50 ticks) */
  r->queue_wait_ticks = i % 5;
  r->load_wait_ticks = r->loads_waited ? 3 : 0;
  r->prefill_ticks = 5 - r->queue_wait_ticks - r->load_wait_ticks + 3;
  r->decode_ticks = 50 - r->queue_wait_ticks - r->load_wait_ticks -
                    r->prefill_ticks;
  r->preemptions = (int)(i % 7 == 0);
  r->cold = r->loads_waited;
  r->requested_tokens = (int)(1 + i % 300);
}

static void make_iter(int64_t i, lsim_iter_record *it) {
  memset(it, 0, sizeof *it);
  it->iter = i;
  it->worker = (int)(i % 2);
  it->start_tick = i * 100;
  it->end_tick = i * 100 + 90;
  it->prefill_rows = i % 1000;
  it->decode_rows = i % 48;
  it->prefill_reqs = (int)(i % 5);
  it->decode_reqs = (int)(i % 48);
  it->distinct_adapters = (int)(i % 7);
  it->segments = (int)(i % 9);
  it->true_rank_rows = i * 8;
  it->padded_rank_rows = i * 64;
  it->backend_ns = i % 5 == 0 ? -1 : i * 1000;
  it->result = i % 50 == 0 ? "failed" : "ok";
}

static lsim_run_info run_info(void) {
  lsim_run_info info = {"quickstart", "scenarios/quickstart.json",
                        "0123456789abcdef0123456789abcdef"
                        "0123456789abcdef0123456789abcdef",
                        UINT64_C(18446744073709551557), /* > INT64_MAX */
                        "model", "fcfs", "lru", "none", 1000, 2,
                        "lorasim run scenarios/quickstart.json", NULL,
                        NULL};
  return info;
}

static lsim_db *open_and_begin(const char *path) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_db *db = NULL;
  lsim_run_info info = run_info();
  cr_assert_eq(lsim_db_open(&db, path, &eb), 0, "open: %s", eb.msg);
  cr_assert_not_null(db);
  cr_assert_eq(lsim_db_begin_run(db, &info, &eb), 0, "begin_run: %s", eb.msg);
  return db;
}

static void write_events(lsim_db *db, int64_t from, int64_t to) {
  lsim_event ev;
  for (int64_t i = from; i < to; i++) {
    make_event(i, &ev);
    lsim_err rc = lsim_db_event(db, &ev);
    if (rc)
      cr_assert_fail("event %lld: %s", (long long)i, lsim_db_errmsg(db));
  }
}

/* ---- plain sqlite3 readers ----------------------------------------------------- */

static sqlite3 *ro_open(const char *path) {
  sqlite3 *h = NULL;
  int rc = sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL);
  cr_assert_eq(rc, SQLITE_OK, "reopen %s: %s", path,
               h ? sqlite3_errmsg(h) : "?");
  return h;
}

static int64_t q_int(sqlite3 *h, const char *sql) {
  sqlite3_stmt *st = NULL;
  cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK, "%s: %s",
               sql, sqlite3_errmsg(h));
  cr_assert_eq(sqlite3_step(st), SQLITE_ROW, "%s: no row", sql);
  int64_t v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return v;
}

static int q_is_null(sqlite3 *h, const char *sql) {
  sqlite3_stmt *st = NULL;
  cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK, "%s: %s",
               sql, sqlite3_errmsg(h));
  cr_assert_eq(sqlite3_step(st), SQLITE_ROW, "%s: no row", sql);
  int v = sqlite3_column_type(st, 0) == SQLITE_NULL;
  sqlite3_finalize(st);
  return v;
}

/* Copy the text of the first column into out (empty string for NULL). */
static void q_text(sqlite3 *h, const char *sql, char *out, size_t n) {
  sqlite3_stmt *st = NULL;
  cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK, "%s: %s",
               sql, sqlite3_errmsg(h));
  cr_assert_eq(sqlite3_step(st), SQLITE_ROW, "%s: no row", sql);
  const unsigned char *s = sqlite3_column_text(st, 0);
  snprintf(out, n, "%s", s ? (const char *)s : "");
  sqlite3_finalize(st);
}

/* Column i of st equals v, where LSIM_NONE must read back as NULL. */
static void expect_opt(sqlite3_stmt *st, int i, int64_t v, int64_t row,
                       const char *col) {
  if (v == LSIM_NONE)
    cr_assert_eq(sqlite3_column_type(st, i), SQLITE_NULL,
                 "row %lld: %s should be NULL", (long long)row, col);
  else
    cr_assert_eq(sqlite3_column_int64(st, i), v, "row %lld: %s",
                 (long long)row, col);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- (1) round trip -------------------------------------------------------------- */

Test(db, round_trip) {
  const int64_t nev = LSIM_TEST_DB_EVENTS, nreq = 5000, niter = 2000;
  tmp_t t;
  tmp_make(&t);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;

  double t0 = now_s();
  lsim_db *db = open_and_begin(t.db);
  lsim_event ev;
  lsim_request_record rr;
  lsim_iter_record it;
  for (int64_t i = 0; i < nev; i++) {
    make_event(i, &ev);
    lsim_err rc = lsim_db_event(db, &ev);
    if (rc)
      cr_assert_fail("event %lld: %s", (long long)i, lsim_db_errmsg(db));
    /* requests and iterations interleaved with the events, as in a run */
    if (i % (nev / nreq) == 0 && i / (nev / nreq) < nreq) {
      make_request(i / (nev / nreq), &rr);
      cr_assert_eq(lsim_db_request(db, &rr), 0, "%s", lsim_db_errmsg(db));
    }
    if (i % (nev / niter) == 0 && i / (nev / niter) < niter) {
      make_iter(i / (nev / niter), &it);
      cr_assert_eq(lsim_db_iteration(db, &it), 0, "%s", lsim_db_errmsg(db));
    }
  }
  cr_assert_eq(lsim_db_event_count(db), nev);
  cr_assert_eq(lsim_db_summary(db, "ttft_p50_ms", 12.5), 0, "%s",
               lsim_db_errmsg(db));
  cr_assert_eq(lsim_db_summary(db, "hit_rate", 0.75), 0, "%s",
               lsim_db_errmsg(db));
  cr_assert_eq(lsim_db_end_run(db, "ok", NULL, nev / 3, &eb), 0, "%s", eb.msg);
  double t1 = now_s();
  lsim_db_close(db);
  double t2 = now_s();
  printf("test_db: %lld events + %lld requests + %lld iterations in %.3f s "
         "(%.0f events/s; %.3f s more to close)\n",
         (long long)nev, (long long)nreq, (long long)niter, t1 - t0,
         (double)nev / (t1 - t0), t2 - t1);

  /* the WAL was checkpointed into the file at close */
  char wal[160];
  snprintf(wal, sizeof wal, "%s-wal", t.db);
  cr_assert(!file_exists(wal), "%s left behind", wal);

  sqlite3 *h = ro_open(t.db);
  char s[256];
  cr_assert_eq(q_int(h, "PRAGMA user_version"), 7); /* 7: packed events */

  /* the run row */
  q_text(h, "SELECT status FROM runs WHERE run_id=1", s, sizeof s);
  cr_assert_str_eq(s, "ok");
  cr_assert(q_is_null(h, "SELECT error FROM runs WHERE run_id=1"));
  cr_assert_eq(q_int(h, "SELECT events FROM runs WHERE run_id=1"), nev);
  cr_assert_eq(q_int(h, "SELECT end_tick FROM runs WHERE run_id=1"), nev / 3);
  cr_assert_eq(q_int(h, "SELECT count(*) FROM runs"), 1);
  q_text(h, "SELECT version FROM runs", s, sizeof s);
  cr_assert_str_eq(s, LSIM_VERSION);
  q_text(h, "SELECT scheduler || '/' || evict || '/' || prefetch FROM runs", s,
         sizeof s);
  cr_assert_str_eq(s, "fcfs/lru/none");
  cr_assert_eq((uint64_t)q_int(h, "SELECT seed FROM runs"),
               UINT64_C(18446744073709551557));
  cr_assert_eq(q_int(h, "SELECT ns_per_tick * 10 + workers FROM runs"), 10002);

  /* every event, in seq order, field by field */
  cr_assert_eq(q_int(h, "SELECT count(*) FROM events"), nev);
  sqlite3_stmt *st = NULL;
  cr_assert_eq(sqlite3_prepare_v2(h,
                                  "SELECT run_id, seq, tick, kind, worker, "
                                  "request, tenant, adapter, generation, "
                                  "attempt, pages, bytes, value, detail "
                                  "FROM events ORDER BY seq",
                                  -1, &st, NULL),
               SQLITE_OK);
  int64_t row = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    make_event(row, &ev);
    cr_assert_eq(sqlite3_column_int64(st, 0), 1);
    cr_assert_eq(sqlite3_column_int64(st, 1), ev.seq, "row %lld: seq order",
                 (long long)row);
    cr_assert_eq(sqlite3_column_int64(st, 2), ev.tick);
    cr_assert_eq(sqlite3_column_int64(st, 3), ev.kind);
    expect_opt(st, 4, ev.worker, row, "worker");
    expect_opt(st, 5, ev.request, row, "request");
    expect_opt(st, 6, ev.tenant, row, "tenant");
    expect_opt(st, 7, ev.adapter, row, "adapter");
    expect_opt(st, 8, ev.generation, row, "generation");
    expect_opt(st, 9, ev.attempt, row, "attempt");
    expect_opt(st, 10, ev.pages, row, "pages");
    expect_opt(st, 11, ev.bytes, row, "bytes");
    expect_opt(st, 12, ev.value, row, "value");
    const unsigned char *d = sqlite3_column_text(st, 13);
    if (ev.detail)
      cr_assert(d && strcmp((const char *)d, ev.detail) == 0,
                "row %lld: detail", (long long)row);
    else
      cr_assert_null(d, "row %lld: detail should be NULL", (long long)row);
    row++;
  }
  sqlite3_finalize(st);
  cr_assert_eq(row, nev);

  /* kinds and the named view */
  cr_assert_eq(q_int(h, "SELECT count(*) FROM event_kinds"), LSIM_EV__END - 1);
  for (int k = 1; k < LSIM_EV__END; k++) {
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT name FROM event_kinds WHERE kind=%d", k);
    q_text(h, sql, s, sizeof s);
    cr_assert_str_eq(s, lsim_event_kind_name(k));
  }
  cr_assert_eq(q_int(h, "SELECT count(*) FROM events_named"), nev);
  cr_assert_eq(q_int(h, "SELECT count(*) FROM events_named "
                        "WHERE kind_name IS NULL"),
               0);
  cr_assert_eq(q_int(h, "SELECT count(*) FROM events_named AS v "
                        "JOIN event_kinds AS k ON k.kind = v.kind "
                        "WHERE k.name <> v.kind_name"),
               0);
  q_text(h, "SELECT kind_name FROM events_named WHERE seq = 4", s, sizeof s);
  cr_assert_str_eq(s, lsim_event_kind_name(5));

  /* requests and iterations */
  cr_assert_eq(q_int(h, "SELECT count(*) FROM requests"), nreq);
  cr_assert_eq(q_int(h, "SELECT count(*) FROM requests "
                        "WHERE first_token_tick IS NULL"),
               nreq / 4);
  cr_assert_eq(q_int(h, "SELECT count(*) FROM requests "
                        "WHERE outcome = 'rejected'"),
               nreq / 4);
  cr_assert_eq(q_int(h, "SELECT count(*) FROM requests WHERE worker IS NULL"),
               nreq / 8);
  cr_assert_eq(q_int(h, "SELECT count(*) FROM requests WHERE adapter IS NULL"),
               nreq / 10);
  cr_assert_eq(q_int(h, "SELECT first_token_tick FROM requests "
                        "WHERE request = 7"),
               75);
  /* the breakdown columns hold the record's values */
  cr_assert_eq(q_int(h, "SELECT count(*) FROM requests WHERE "
                        "queue_wait_ticks + load_wait_ticks + prefill_ticks + "
                        "decode_ticks = finish_tick - arrival_tick AND "
                        "queue_wait_ticks = request % 5 AND cold = "
                        "loads_waited AND load_wait_ticks = 3 * cold AND "
                        "preemptions = (request % 7 = 0) AND "
                        "requested_tokens = 1 + request % 300"),
               nreq);
  cr_assert_eq(q_int(h, "SELECT count(*) FROM iterations"), niter);
  cr_assert_eq(q_int(h, "SELECT count(*) FROM iterations "
                        "WHERE backend_ns IS NULL"),
               niter / 5);
  cr_assert_eq(q_int(h, "SELECT backend_ns FROM iterations WHERE iter = 3"),
               3000);
  cr_assert_eq(q_int(h, "SELECT padded_rank_rows FROM iterations "
                        "WHERE iter = 3"),
               192);
  cr_assert_eq(q_int(h, "SELECT count(*) FROM iterations "
                        "WHERE result = 'failed'"),
               niter / 50);

  /* summary */
  cr_assert_eq(q_int(h, "SELECT count(*) FROM runs_summary"), 2);
  cr_assert_eq(q_int(h, "SELECT value * 100 FROM runs_summary "
                        "WHERE key = 'hit_rate'"),
               75);
  sqlite3_close(h);
  tmp_remove(&t);
}

/* ---- (2) a run that is never ended ---------------------------------------------- */

Test(db, never_ended_stays_running) {
  tmp_t t;
  tmp_make(&t);
  lsim_db *db = open_and_begin(t.db);

  /* In progress: another connection sees the committed run row and every
  ** committed batch. */
  write_events(db, 0, LSIM_DB_BATCH + 100);
  sqlite3 *r = ro_open(t.db);
  char s[64];
  q_text(r, "SELECT status FROM runs", s, sizeof s);
  cr_assert_str_eq(s, "running");
  cr_assert_eq(q_int(r, "SELECT count(*) FROM events"), LSIM_DB_BATCH);
  sqlite3_close(r);

  /* The writer's own handle sees the buffered rows too. */
  cr_assert_eq(q_int(lsim_db_handle(db), "SELECT count(*) FROM events"),
               LSIM_DB_BATCH + 100);
  write_events(db, LSIM_DB_BATCH + 100, LSIM_DB_BATCH + 205);
  lsim_db_close(db); /* no lsim_db_end_run */

  sqlite3 *h = ro_open(t.db);
  q_text(h, "SELECT status FROM runs", s, sizeof s);
  cr_assert_str_eq(s, "running");
  cr_assert(q_is_null(h, "SELECT events FROM runs"));
  cr_assert(q_is_null(h, "SELECT end_tick FROM runs"));
  cr_assert_eq(q_int(h, "SELECT count(*) FROM events"), LSIM_DB_BATCH + 205);
  cr_assert_eq(q_int(h, "SELECT max(seq) FROM events"), LSIM_DB_BATCH + 204);
  sqlite3_close(h);
  tmp_remove(&t);
}

/* ---- (3) interrupted and failed runs ----------------------------------------------- */

Test(db, interrupted_status) {
  tmp_t t;
  tmp_make(&t);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_db *db = open_and_begin(t.db);
  write_events(db, 0, 1000);
  cr_assert_eq(lsim_db_end_run(db, "interrupted", "interrupted by sigint", 333,
                               &eb),
               0, "%s", eb.msg);
  lsim_db_close(db);

  sqlite3 *h = ro_open(t.db);
  char s[64];
  q_text(h, "SELECT status FROM runs", s, sizeof s);
  cr_assert_str_eq(s, "interrupted");
  q_text(h, "SELECT error FROM runs", s, sizeof s);
  cr_assert_str_eq(s, "interrupted by sigint");
  cr_assert_eq(q_int(h, "SELECT events FROM runs"), 1000);
  cr_assert_eq(q_int(h, "SELECT count(*) FROM events"), 1000);
  cr_assert_eq(q_int(h, "SELECT end_tick FROM runs"), 333);
  sqlite3_close(h);
  tmp_remove(&t);
}

Test(db, failed_status) {
  tmp_t t;
  tmp_make(&t);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_db *db = open_and_begin(t.db);
  write_events(db, 0, 10);
  cr_assert_eq(lsim_db_end_run(db, "failed", "backend: launch failed", 3, &eb),
               0, "%s", eb.msg);
  lsim_db_close(db);

  sqlite3 *h = ro_open(t.db);
  char s[64];
  q_text(h, "SELECT status || ': ' || error FROM runs", s, sizeof s);
  cr_assert_str_eq(s, "failed: backend: launch failed");
  sqlite3_close(h);
  tmp_remove(&t);
}

/* ---- (4) an unwritable path ------------------------------------------------------- */

Test(db, open_unwritable_path) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_db *db = (lsim_db *)&eb; /* must be reset to NULL */
  const char *path = "/nonexistent-dir/x.db";
  lsim_err rc = lsim_db_open(&db, path, &eb);
  /* its directory is not there: said so, naming it (sim/outfile.h) */
  cr_assert_eq(rc, LSIM_E_OUT_NO_DIR, "got %s", lsim_err_name(rc));
  cr_assert_eq(eb.code, LSIM_E_OUT_NO_DIR);
  cr_assert_not_null(strstr(eb.msg, "/nonexistent-dir: directory does not "
                                    "exist"),
                     "message: %s", eb.msg);
  cr_assert_null(db);
  cr_assert_not_null(strstr(eb.msg, path), "message: %s", eb.msg);
  cr_assert(eb.msg[0] != '\0' && eb.msg[strlen(eb.msg) - 1] != '.',
            "message: %s", eb.msg);
  lsim_db_close(NULL); /* safe */
}

/* ---- (5) opening over an existing database replaces it ---------------------------- */

Test(db, open_replaces_existing) {
  tmp_t t;
  tmp_make(&t);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_db *db = open_and_begin(t.db);
  write_events(db, 0, 5000);
  cr_assert_eq(lsim_db_end_run(db, "ok", NULL, 1, &eb), 0, "%s", eb.msg);
  lsim_db_close(db);

  /* stale side files from some crashed writer */
  char p[160];
  const char *const sfx[] = {"-wal", "-shm"};
  for (int i = 0; i < 2; i++) {
    snprintf(p, sizeof p, "%s%s", t.db, sfx[i]);
    FILE *f = fopen(p, "w");
    cr_assert_not_null(f);
    fputs("not sqlite", f);
    fclose(f);
  }

  db = open_and_begin(t.db);
  write_events(db, 0, 10);
  lsim_db_close(db);

  sqlite3 *h = ro_open(t.db);
  cr_assert_eq(q_int(h, "SELECT count(*) FROM events"), 10);
  cr_assert_eq(q_int(h, "SELECT count(*) FROM runs"), 1);
  char s[64];
  q_text(h, "SELECT status FROM runs", s, sizeof s);
  cr_assert_str_eq(s, "running");
  sqlite3_close(h);

  /* a file that is not a database at all is replaced too */
  FILE *f = fopen(t.db, "w");
  cr_assert_not_null(f);
  fputs("garbage, not a database", f);
  fclose(f);
  db = open_and_begin(t.db);
  cr_assert_eq(lsim_db_end_run(db, "ok", NULL, 0, &eb), 0, "%s", eb.msg);
  lsim_db_close(db);
  h = ro_open(t.db);
  cr_assert_eq(q_int(h, "SELECT count(*) FROM events"), 0);
  cr_assert_eq(q_int(h, "SELECT events FROM runs"), 0);
  sqlite3_close(h);
  tmp_remove(&t);
}

/* ---- misuse is reported, not obeyed ------------------------------------------------- */

Test(db, misuse) {
  tmp_t t;
  tmp_make(&t);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_db *db = NULL;
  cr_assert_eq(lsim_db_open(&db, t.db, &eb), 0, "%s", eb.msg);
  lsim_event ev;
  make_event(0, &ev);
  cr_assert_eq(lsim_db_event(db, &ev), LSIM_E_BUG);
  cr_assert_not_null(strstr(lsim_db_errmsg(db), "outside a run"));
  cr_assert_eq(lsim_db_end_run(db, "ok", NULL, 0, &eb), LSIM_E_BUG);

  lsim_run_info info = run_info();
  cr_assert_eq(lsim_db_begin_run(db, &info, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_db_begin_run(db, &info, &eb), LSIM_E_BUG);
  ev.kind = 999;
  cr_assert_eq(lsim_db_event(db, &ev), LSIM_E_BUG);
  cr_assert_eq(lsim_db_end_run(db, "running", NULL, 0, &eb), LSIM_E_BUG);
  cr_assert_eq(lsim_db_end_run(db, "done", NULL, 0, &eb), LSIM_E_BUG);
  make_event(0, &ev);
  cr_assert_eq(lsim_db_event(db, &ev), 0, "%s", lsim_db_errmsg(db));
  cr_assert_eq(lsim_db_end_run(db, "ok", NULL, 0, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_db_end_run(db, "ok", NULL, 0, &eb), LSIM_E_BUG);
  cr_assert_eq(lsim_db_event(db, &ev), LSIM_E_BUG);
  /* a figure may still be added after the end */
  cr_assert_eq(lsim_db_summary(db, "late", 1.0), 0, "%s", lsim_db_errmsg(db));
  lsim_db_close(db);

  sqlite3 *h = ro_open(t.db);
  cr_assert_eq(q_int(h, "SELECT count(*) FROM events"), 1);
  cr_assert_eq(q_int(h, "SELECT events FROM runs"), 1);
  cr_assert_eq(q_int(h, "SELECT count(*) FROM runs_summary"), 1);
  sqlite3_close(h);
  tmp_remove(&t);
}

/* ---- a failed write never ends as ok -------------------------------------------------- */

Test(db, duplicate_seq_fails_and_stays_running) {
  tmp_t t;
  tmp_make(&t);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_db *db = open_and_begin(t.db);
  write_events(db, 0, 100);
  lsim_event ev;
  make_event(5, &ev); /* seq 5 again: the engine broke its contract */
  lsim_err rc = lsim_db_event(db, &ev);
  /* events are buffered (up to 1024, sim/db.c): append past two buffers */
  for (int64_t i = 100; !rc && i < 2200; i++) {
    make_event(i, &ev);
    rc = lsim_db_event(db, &ev);
  }
  cr_assert_eq(rc, LSIM_E_DB);
  cr_assert_not_null(strstr(lsim_db_errmsg(db), t.db), "%s",
                     lsim_db_errmsg(db));
  make_event(1000, &ev);
  cr_assert_eq(lsim_db_event(db, &ev), LSIM_E_DB); /* fails fast from now on */
  cr_assert_eq(lsim_db_end_run(db, "ok", NULL, 0, &eb), LSIM_E_DB);
  cr_assert_not_null(strstr(eb.msg, "running"), "%s", eb.msg);
  lsim_db_close(db);

  sqlite3 *h = ro_open(t.db);
  char s[64];
  q_text(h, "SELECT status FROM runs", s, sizeof s);
  cr_assert_str_eq(s, "running");
  sqlite3_close(h);
  tmp_remove(&t);
}

/* ---- determinism: the same stream gives the same rows ---------------------------------- */

Test(db, same_stream_same_rows) {
  tmp_t a, b;
  tmp_make(&a);
  tmp_make(&b);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  tmp_t *both[2] = {&a, &b};
  for (int k = 0; k < 2; k++) {
    lsim_db *db = open_and_begin(both[k]->db);
    write_events(db, 0, 20000);
    cr_assert_eq(lsim_db_end_run(db, "ok", NULL, 6666, &eb), 0, "%s", eb.msg);
    lsim_db_close(db);
  }
  sqlite3 *h = ro_open(a.db);
  char sql[512];
  snprintf(sql, sizeof sql, "ATTACH '%s' AS b", b.db);
  cr_assert_eq(sqlite3_exec(h, sql, NULL, NULL, NULL), SQLITE_OK, "%s",
               sqlite3_errmsg(h));
  const char *const tables[] = {"events", "runs", "event_kinds"};
  for (int i = 0; i < 3; i++) {
    /* rows of a missing from b, plus rows of b missing from a */
    snprintf(sql, sizeof sql,
             "SELECT (SELECT count(*) FROM (SELECT * FROM main.%s EXCEPT "
             "SELECT * FROM b.%s)) + (SELECT count(*) FROM (SELECT * FROM "
             "b.%s EXCEPT SELECT * FROM main.%s))",
             tables[i], tables[i], tables[i], tables[i]);
    cr_assert_eq(q_int(h, sql), 0, "%s differ", tables[i]);
  }
  sqlite3_close(h);
  tmp_remove(&a);
  tmp_remove(&b);
}

/* ---- buffered writes: seq gaps, copied words, order ------------------------------------- */

/* The writer gives an event a NULL seq when it continues the table (SQLite's
** next rowid is then the seq) and its seq otherwise; requests and
** starvation intervals are buffered with their words copied.  Every row
** must read back exactly as appended, in order, whichever path wrote it. */
Test(db, seq_gaps_and_buffered_rows) {
  tmp_t t;
  tmp_make(&t);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_db *db = open_and_begin(t.db);

  /* contiguous from 0 (the first explicit, then rowid-assigned), a jump,
  ** a one-seq gap inside a batch, a stretch rowid-assigned again, then a
  ** final partial batch */
  enum { NEV = 1000 };
  static int64_t seqs[NEV];
  int64_t s = 0;
  for (int i = 0; i < NEV; i++) {
    if (i == 150)
      s += 1000;
    if (i == 300)
      s += 1;
    seqs[i] = s++;
  }
  lsim_event ev;
  for (int i = 0; i < NEV; i++) {
    make_event(i, &ev);
    ev.seq = seqs[i];
    cr_assert_eq(lsim_db_event(db, &ev), 0, "%s", lsim_db_errmsg(db));
  }

  /* words in a buffer the caller reuses at once; one too long to buffer */
  enum { NRQ = 150, NIV = 140, LONG_AT = 70 };
  static const char long_word[] = "an_outcome_word_longer_than_any_buffer_slot";
  char word[64];
  for (int i = 0; i < NRQ; i++) {
    lsim_request_record rr;
    make_request(i, &rr);
    snprintf(word, sizeof word, "%s", i == LONG_AT ? long_word
                                      : i % 3 ? "ok" : "unfinished");
    rr.outcome = word;
    cr_assert_eq(lsim_db_request(db, &rr), 0, "%s", lsim_db_errmsg(db));
    memset(word, 'x', sizeof word - 1);
  }
  char kind[16], closed[64];
  for (int i = 0; i < NIV; i++) {
    snprintf(kind, sizeof kind, "%s", i % 2 ? "load" : "service");
    snprintf(closed, sizeof closed, "%s", i == LONG_AT ? long_word : "served");
    lsim_interval iv = {kind, i % 2 ? i % 4 : LSIM_NONE, i, 10 * i, 10 * i + 7,
                        closed};
    cr_assert_eq(lsim_db_interval(db, &iv, i % 5 == 0), 0, "%s",
                 lsim_db_errmsg(db));
    memset(kind, 'x', sizeof kind - 1);
    memset(closed, 'x', sizeof closed - 1);
  }

  /* a report query mid-run sees every appended row */
  sqlite3 *live = lsim_db_handle(db);
  cr_assert_eq(q_int(live, "SELECT count(*) FROM events"), NEV);
  cr_assert_eq(q_int(live, "SELECT count(*) FROM requests"), NRQ);
  cr_assert_eq(q_int(live, "SELECT count(*) FROM starvation"), NIV);
  cr_assert_eq(lsim_db_end_run(db, "ok", NULL, 1, &eb), 0, "%s", eb.msg);
  lsim_db_close(db);

  sqlite3 *h = ro_open(t.db);
  sqlite3_stmt *st = NULL;
  cr_assert_eq(sqlite3_prepare_v2(h,
                                  "SELECT seq, tick, kind, request, value, "
                                  "detail FROM events ORDER BY seq",
                                  -1, &st, NULL),
               SQLITE_OK);
  int n = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    cr_assert_lt(n, NEV);
    make_event(n, &ev);
    cr_assert_eq(sqlite3_column_int64(st, 0), seqs[n], "row %d: seq", n);
    cr_assert_eq(sqlite3_column_int64(st, 1), ev.tick, "row %d: tick", n);
    cr_assert_eq(sqlite3_column_int64(st, 2), ev.kind, "row %d: kind", n);
    expect_opt(st, 3, ev.request, n, "request");
    expect_opt(st, 4, ev.value, n, "value");
    const unsigned char *d = sqlite3_column_text(st, 5);
    cr_assert(ev.detail ? d && !strcmp((const char *)d, ev.detail) : !d,
              "row %d: detail", n);
    n++;
  }
  sqlite3_finalize(st);
  cr_assert_eq(n, NEV);

  cr_assert_eq(sqlite3_prepare_v2(h,
                                  "SELECT request, arrival_tick, outcome "
                                  "FROM requests ORDER BY rowid",
                                  -1, &st, NULL),
               SQLITE_OK);
  for (n = 0; sqlite3_step(st) == SQLITE_ROW; n++) {
    const char *o = (const char *)sqlite3_column_text(st, 2);
    cr_assert_eq(sqlite3_column_int64(st, 0), n, "request row %d order", n);
    cr_assert_eq(sqlite3_column_int64(st, 1), 10 * n);
    cr_assert_str_eq(o, n == LONG_AT ? long_word
                        : n % 3      ? "ok"
                                     : "unfinished");
  }
  sqlite3_finalize(st);
  cr_assert_eq(n, NRQ);

  cr_assert_eq(sqlite3_prepare_v2(h,
                                  "SELECT kind, worker, entity, start_tick, "
                                  "end_tick, closed_by, starved "
                                  "FROM starvation ORDER BY start_tick",
                                  -1, &st, NULL),
               SQLITE_OK);
  for (n = 0; sqlite3_step(st) == SQLITE_ROW; n++) {
    cr_assert_str_eq((const char *)sqlite3_column_text(st, 0),
                     n % 2 ? "load" : "service");
    expect_opt(st, 1, n % 2 ? n % 4 : LSIM_NONE, n, "worker");
    cr_assert_eq(sqlite3_column_int64(st, 2), n, "interval row %d order", n);
    cr_assert_eq(sqlite3_column_int64(st, 3), 10 * n);
    cr_assert_eq(sqlite3_column_int64(st, 4), 10 * n + 7);
    cr_assert_str_eq((const char *)sqlite3_column_text(st, 5),
                     n == LONG_AT ? long_word : "served");
    cr_assert_eq(sqlite3_column_int64(st, 6), n % 5 == 0);
  }
  sqlite3_finalize(st);
  cr_assert_eq(n, NIV);
  sqlite3_close(h);
  tmp_remove(&t);
}

/* ---- iteration-bound events kept in their iteration's row ----------------------- */

/* An engine-shaped stream (sim/db.c, "iteration-bound events"): per
** worker, iteration_selected at launch, the iteration row at completion
** followed by iteration_completed and its debits, other events in
** between; and, on purpose, events the row cannot give back exactly (a
** field that differs, a width that does not fit, a seq too far) and
** iterations still running at the end.  Whatever went where, the events
** view must give back every appended event, field by field; the packed
** ones must really be in iteration_log, the others in event_log; and
** what a reader sees after each commit must be a prefix of the log (what
** a crash would leave). */
typedef struct {
  lsim_event *ev;
  int64_t n, cap;
  unsigned char *in_log; /* per event: 1 must be an event_log row */
  uint64_t rng;
} pk_stream;

static uint64_t pk_rand(pk_stream *s, uint64_t n) {
  s->rng = s->rng * 6364136223846793005ULL + 1442695040888963407ULL;
  return (s->rng >> 33) % n;
}

static void pk_emit(lsim_db *db, pk_stream *s, lsim_event ev, int in_log) {
  cr_assert_lt(s->n, s->cap);
  ev.seq = s->n;
  s->ev[s->n] = ev;
  s->in_log[s->n++] = (unsigned char)in_log;
  cr_assert_eq(lsim_db_event(db, &ev), 0, "%s", lsim_db_errmsg(db));
}

static lsim_event pk_plain(pk_stream *s, int kind, lsim_tick now, int w) {
  lsim_event ev = {0, now, kind, w, (int64_t)pk_rand(s, 5000),
                   (int)pk_rand(s, 3), (int)pk_rand(s, 40), 1, 0, 8, 16384,
                   0, kind == LSIM_EV_REQUEST_FINISHED ? "ok" : NULL};
  return ev;
}

Test(db, iteration_events_packed) {
  enum { W = 3, CAP = 400000, STEPS = 120000 };
  tmp_t t;
  tmp_make(&t);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_db *db = NULL;
  lsim_run_info info = run_info();
  info.workers = W;
  cr_assert_eq(lsim_db_open(&db, t.db, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_db_begin_run(db, &info, &eb), 0, "%s", eb.msg);
  pk_stream s = {calloc(CAP, sizeof(lsim_event)), 0, CAP, calloc(CAP, 1),
                 20261206};
  cr_assert(s.ev && s.in_log);
  struct {
    int busy, odd; /* odd: its selected event does not match its row */
    int64_t iter, rows;
    lsim_tick start;
  } wk[W + 1] = {{0}};
  int64_t iters = 0, commits_seen = 0, prefix_checks = 0, fillers = 0;
  lsim_tick now = 0;
  sqlite3 *rd = NULL; /* a second connection: what a crash would keep */
  for (int step = 0; step < STEPS; step++) {
    now += (lsim_tick)pk_rand(&s, 3);
    int w = (int)pk_rand(&s, W + 1); /* W: a worker past info.workers */
    uint64_t what = pk_rand(&s, 10);
    if (what < 3) { /* an arrival elsewhere */
      pk_emit(db, &s, pk_plain(&s, LSIM_EV_QUEUE_ENQUEUED, now, w), 1);
    } else if (!wk[w].busy) { /* a launch: admissions, then the plan */
      for (uint64_t k = pk_rand(&s, 3); k > 0; k--)
        pk_emit(db, &s, pk_plain(&s, LSIM_EV_KV_RESERVED, now, w), 1);
      wk[w].busy = 1;
      wk[w].iter = iters++;
      wk[w].rows = 1 + (int64_t)pk_rand(&s, 3000);
      wk[w].start = now;
      wk[w].odd = pk_rand(&s, 12) == 0;
      lsim_event ev = {0, now, LSIM_EV_ITERATION_SELECTED, w, LSIM_NONE,
                       LSIM_NONE, LSIM_NONE, wk[w].iter, 0, 0, 0,
                       wk[w].rows + wk[w].odd, NULL};
      pk_emit(db, &s, ev, w >= W || wk[w].odd);
    } else if (what < 8) { /* completion */
      int ok = pk_rand(&s, 15) != 0;
      int odd_done = pk_rand(&s, 15) == 0; /* a tick its row does not have */
      lsim_iter_record it;
      make_iter(wk[w].iter, &it);
      it.worker = w;
      it.start_tick = wk[w].start;
      it.end_tick = now;
      it.prefill_rows = wk[w].rows / 3;
      it.decode_rows = wk[w].rows - it.prefill_rows;
      it.result = ok ? "ok" : "failed";
      cr_assert_eq(lsim_db_iteration(db, &it), 0, "%s", lsim_db_errmsg(db));
      int packs = 1; /* past info.workers only the selected is not held */
      lsim_event done = {0, now + odd_done, LSIM_EV_ITERATION_COMPLETED, w,
                         LSIM_NONE, LSIM_NONE, LSIM_NONE, wk[w].iter, 0, 0,
                         0, ok ? wk[w].rows : 0, ok ? "ok" : "failed"};
      pk_emit(db, &s, done, odd_done);
      packs = packs && !odd_done;
      for (uint64_t k = ok ? pk_rand(&s, 9) : 0; k > 0; k--) {
        lsim_event d = {0, now, LSIM_EV_COMPLETED_SERVICE_DEBITED, w,
                        (int64_t)pk_rand(&s, 100000), (int)pk_rand(&s, 4) - 1,
                        (int)pk_rand(&s, 20000) - 1, wk[w].iter, 0, 0, 0,
                        1 + (int64_t)pk_rand(&s, 2048),
                        pk_rand(&s, 2) ? "decode" : "prefill"};
        int fits = 1;
        uint64_t r = pk_rand(&s, 400); /* fields past the packed widths */
        if (r < 10)
          d.adapter = 2000000, fits = 0;
        else if (r < 20)
          d.tenant = 5000, fits = 0;
        else if (r < 30)
          d.value = 200000, fits = 0;
        else if (r < 40)
          d.request = LSIM_NONE, fits = 0;
        else if (r < 50)
          d.pages = 1, fits = 0;
        else if (r < 60)
          d.request = -7; /* a negative id still fits */
        else if (r == 60 && fillers++ < 4) {
          /* more than 1023 events after its iteration_completed */
          for (int f = 0; f < 1100; f++)
            pk_emit(db, &s, pk_plain(&s, LSIM_EV_PREFIX_EVICTED, now, w), 1);
          fits = 0;
        }
        pk_emit(db, &s, d, !packs || !fits);
        if (pk_rand(&s, 3) == 0) { /* its request finished */
          int64_t pages = (int64_t)pk_rand(&s, 200);
          lsim_event kv = {0, now, LSIM_EV_KV_RELEASED, w, d.request,
                           d.tenant, d.adapter, (int64_t)pk_rand(&s, 100),
                           0, pages, pages * 2097152, 0, NULL};
          lsim_event fin = {0, now, LSIM_EV_REQUEST_FINISHED, w, d.request,
                            d.tenant, d.adapter, kv.generation, 0, 0, 0,
                            (int64_t)pk_rand(&s, 500), "ok"};
          int between = 0, in = !packs || !fits;
          switch (pk_rand(&s, 20)) { /* what cannot go in the member */
          case 0: kv.bytes = pages * 3000000, in |= pages > 0; break;
          case 1: fin.value = 70000, in = 1; break;
          case 2: between = 1, in = 1; break;
          case 3: fin.generation++, in = 1; break;
          case 4: kv.attempt = 1, in = 1; break;
          case 5: kv.generation = 70000, fin.generation = 70000, in = 1;
            break;
          }
          pk_emit(db, &s, kv, in);
          if (between)
            pk_emit(db, &s, pk_plain(&s, LSIM_EV_QUEUE_ENQUEUED, now, w), 1);
          pk_emit(db, &s, fin, in);
        }
      }
      wk[w].busy = 0;
    }
    if (pk_rand(&s, 20000) == 0)
      (void)lsim_db_handle(db); /* a report query settles the rows */
    /* after a commit, another connection sees a prefix of the log */
    if (s.n / LSIM_DB_BATCH > commits_seen) {
      commits_seen = s.n / LSIM_DB_BATCH;
      if (!rd)
        rd = ro_open(t.db);
      int64_t n = q_int(rd, "SELECT count(*) FROM events");
      if (n > 0) {
        cr_assert_eq(q_int(rd, "SELECT max(seq) FROM events"), n - 1,
                     "committed events are not a prefix of the log");
        prefix_checks++;
      }
    }
  }
  /* workers still running: their iteration_selected is still held */
  int running = 0;
  for (int w = 0; w < W; w++)
    running += wk[w].busy;
  cr_assert_gt(running, 0);
  cr_assert_gt(prefix_checks, 1);
  sqlite3_close(rd);
  cr_assert_eq(lsim_db_event_count(db), s.n);
  cr_assert_eq(lsim_db_end_run(db, "ok", NULL, now, &eb), 0, "%s", eb.msg);
  lsim_db_close(db);

  sqlite3 *h = ro_open(t.db);
  cr_assert_eq(q_int(h, "SELECT events FROM runs"), s.n);
  sqlite3_stmt *st = NULL;
  cr_assert_eq(sqlite3_prepare_v2(h,
                                  "SELECT run_id, seq, tick, kind, worker, "
                                  "request, tenant, adapter, generation, "
                                  "attempt, pages, bytes, value, detail, "
                                  "seq IN (SELECT seq FROM event_log) "
                                  "FROM events ORDER BY seq",
                                  -1, &st, NULL),
               SQLITE_OK, "%s", sqlite3_errmsg(h));
  int64_t row = 0, packed = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    cr_assert_lt(row, s.n);
    const lsim_event *ev = &s.ev[row];
    cr_assert_eq(sqlite3_column_int64(st, 0), 1);
    cr_assert_eq(sqlite3_column_int64(st, 1), ev->seq, "row %lld: seq",
                 (long long)row);
    cr_assert_eq(sqlite3_column_int64(st, 2), ev->tick, "seq %lld: tick",
                 (long long)row);
    cr_assert_eq(sqlite3_column_int64(st, 3), ev->kind, "seq %lld: kind",
                 (long long)row);
    expect_opt(st, 4, ev->worker, row, "worker");
    expect_opt(st, 5, ev->request, row, "request");
    expect_opt(st, 6, ev->tenant, row, "tenant");
    expect_opt(st, 7, ev->adapter, row, "adapter");
    expect_opt(st, 8, ev->generation, row, "generation");
    expect_opt(st, 9, ev->attempt, row, "attempt");
    expect_opt(st, 10, ev->pages, row, "pages");
    expect_opt(st, 11, ev->bytes, row, "bytes");
    expect_opt(st, 12, ev->value, row, "value");
    const unsigned char *d = sqlite3_column_text(st, 13);
    cr_assert(ev->detail ? d && !strcmp((const char *)d, ev->detail) : !d,
              "seq %lld: detail", (long long)row);
    /* an event that had to stay a row is one; the still running
    ** iterations' selected events went to event_log at the end */
    if (s.in_log[row])
      cr_assert_eq(sqlite3_column_int(st, 14), 1,
                   "seq %lld (kind %d) should be an event_log row",
                   (long long)row, ev->kind);
    packed += !sqlite3_column_int(st, 14);
    row++;
  }
  sqlite3_finalize(st);
  cr_assert_eq(row, s.n);
  /* the packing is real: most iteration events are in iteration_log */
  cr_assert_eq(q_int(h, "SELECT count(*) FROM event_log") + packed, s.n);
  int64_t nsel = q_int(h, "SELECT count(*) FROM events WHERE kind = 6");
  cr_assert_gt(q_int(h, "SELECT count(sel_seq) FROM iteration_log"),
               nsel / 2);
  cr_assert_gt(q_int(h, "SELECT count(done_seq) FROM iteration_log"),
               nsel / 2);
  cr_assert_gt(q_int(h, "SELECT count(*) FROM iteration_log AS i, "
                        "json_each(i.debits)"),
               q_int(h, "SELECT count(*) FROM events WHERE kind = 8") / 2);
  cr_assert_gt(q_int(h, "SELECT count(*) FROM iteration_log AS i, "
                        "json_each(i.fins)"),
               q_int(h, "SELECT count(*) FROM events WHERE kind = 17") / 3);
  /* the view's other uses agree with the table */
  cr_assert_eq(q_int(h, "SELECT count(*) FROM events_named"), s.n);
  cr_assert_eq(q_int(h, "SELECT count(*) FROM (SELECT seq FROM events "
                        "GROUP BY seq HAVING count(*) > 1)"),
               0);
  sqlite3_close(h);
  free(s.ev);
  free(s.in_log);
  tmp_remove(&t);
}

/* A run closed without lsim_db_end_run (a failure's path): the held
** iteration_selected events and the open iteration row are written
** too, so every appended event reads back. */
Test(db, packed_events_survive_close) {
  tmp_t t;
  tmp_make(&t);
  lsim_db *db = open_and_begin(t.db); /* 2 workers */
  lsim_event ev[6] = {
      {0, 10, LSIM_EV_ITERATION_SELECTED, 0, LSIM_NONE, LSIM_NONE, LSIM_NONE,
       0, 0, 0, 0, 7, NULL},
      {1, 11, LSIM_EV_ITERATION_SELECTED, 1, LSIM_NONE, LSIM_NONE, LSIM_NONE,
       1, 0, 0, 0, 9, NULL},
      {2, 20, LSIM_EV_ITERATION_COMPLETED, 0, LSIM_NONE, LSIM_NONE,
       LSIM_NONE, 0, 0, 0, 0, 7, "ok"},
      {3, 20, LSIM_EV_COMPLETED_SERVICE_DEBITED, 0, 42, 1, 3, 0, 0, 0, 0, 7,
       "prefill"},
      {4, 20, LSIM_EV_KV_RELEASED, 0, 42, 1, 3, 1, 0, 4, 64, 0, NULL},
      {5, 20, LSIM_EV_COMPLETED_SERVICE_DEBITED, 0, 43, LSIM_NONE, LSIM_NONE,
       0, 0, 0, 0, 1, "decode"},
  };
  lsim_iter_record it;
  make_iter(0, &it);
  it.worker = 0;
  it.start_tick = 10;
  it.end_tick = 20;
  it.prefill_rows = 3;
  it.decode_rows = 4;
  it.result = "ok";
  for (int i = 0; i < 6; i++) {
    if (i == 2)
      cr_assert_eq(lsim_db_iteration(db, &it), 0, "%s", lsim_db_errmsg(db));
    cr_assert_eq(lsim_db_event(db, &ev[i]), 0, "%s", lsim_db_errmsg(db));
  }
  lsim_db_close(db);

  sqlite3 *h = ro_open(t.db);
  char s[256];
  q_text(h, "SELECT status FROM runs", s, sizeof s);
  cr_assert_str_eq(s, "running");
  cr_assert_eq(q_int(h, "SELECT count(*) FROM events"), 6);
  /* iteration 0's own events in its row; worker 1's selected, whose
  ** iteration never completed, and the kv_released in event_log */
  q_text(h, "SELECT group_concat(seq) FROM (SELECT seq FROM event_log "
            "ORDER BY seq)", s, sizeof s);
  cr_assert_str_eq(s, "1,4");
  q_text(h, "SELECT group_concat(kind || ':' || coalesce(request, '-') || ':' "
            "|| coalesce(tenant, '-') || ':' || coalesce(adapter, '-') || "
            "':' || value || ':' || coalesce(detail, '-'), ' ') FROM (SELECT "
            "* FROM events ORDER BY seq)", s, sizeof s);
  cr_assert_str_eq(s, "6:-:-:-:7:- 6:-:-:-:9:- 7:-:-:-:7:ok "
                      "8:42:1:3:7:prefill 16:42:1:3:0:- 8:43:-:-:1:decode");
  sqlite3_close(h);
  tmp_remove(&t);
}

/* ---- exact percentiles of the summary ----------------------------------------------- */

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

/* Nearest rank: the ceil(p n / 100)-th smallest of v[0..n) (sorts v). */
static double nearest_rank(double *v, int n, double p) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  int r = (int)ceil(p * n / 100.0);
  return v[(r < 1 ? 1 : r) - 1];
}

/* lsim_report_summarize's TTFT and TBT p50/p99 equal a sort of the same
** values: many duplicates, rejected and single-token requests left out. */
Test(db, summary_percentiles_exact) {
  static const int sizes[] = {1, 2, 7, 100, 5001};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    int n = sizes[k];
    tmp_t t;
    tmp_make(&t);
    lsim_errbuf eb = LSIM_ERRBUF_INIT;
    lsim_db *db = open_and_begin(t.db);
    double *ttft = malloc((size_t)n * sizeof *ttft);
    double *tbt = malloc((size_t)n * sizeof *tbt);
    cr_assert(ttft && tbt);
    int nt = 0, nb = 0;
    uint64_t x = 88172645463325252u + k;
    for (int i = 0; i < n + n / 3; i++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      lsim_request_record rr;
      make_request(i, &rr);
      rr.outcome = i % 4 == 3 ? "rejected" : "ok";
      rr.arrival_tick = (int64_t)(x % 1000);
      rr.first_token_tick = rr.arrival_tick + (int64_t)(x >> 20) % 37;
      rr.output_tokens = 1 + (int)((x >> 40) % 5);
      rr.finish_tick = rr.first_token_tick + (int64_t)((x >> 50) % 29);
      if (i % 4 != 3 && nt < n) {
        ttft[nt++] = (double)(rr.first_token_tick - rr.arrival_tick);
        if (rr.output_tokens >= 2)
          tbt[nb++] = (double)(rr.finish_tick - rr.first_token_tick) * 1.0 /
                      (double)(rr.output_tokens - 1);
      } else if (i % 4 != 3) {
        rr.outcome = "unfinished"; /* keep exactly n completed */
      }
      cr_assert_eq(lsim_db_request(db, &rr), 0, "%s", lsim_db_errmsg(db));
    }
    lsim_scenario sc;
    memset(&sc, 0, sizeof sc);
    sc.ns_per_tick = 1000000; /* 1 tick = 1 ms: the figures are in ticks */
    lsim_metrics m;
    cr_assert_eq(lsim_metrics_init(&m, 1), 0);
    lsim_summary s;
    memset(&s, 0, sizeof s);
    cr_assert_eq(lsim_report_summarize(lsim_db_handle(db), &sc, &m, &s, &eb), 0,
                 "%s", eb.msg);
    cr_assert_eq(s.ttft_p50_ms, nearest_rank(ttft, nt, 50), "n %d ttft p50", n);
    cr_assert_eq(s.ttft_p99_ms, nearest_rank(ttft, nt, 99), "n %d ttft p99", n);
    if (nb > 0) {
      cr_assert_eq(s.tbt_p50_ms, nearest_rank(tbt, nb, 50), "n %d tbt p50", n);
      cr_assert_eq(s.tbt_p99_ms, nearest_rank(tbt, nb, 99), "n %d tbt p99", n);
    } else {
      cr_assert_eq(s.tbt_p50_ms, -1);
    }
    lsim_metrics_release(&m);
    free(ttft);
    free(tbt);
    cr_assert_eq(lsim_db_end_run(db, "ok", NULL, 1, &eb), 0, "%s", eb.msg);
    lsim_db_close(db);
    tmp_remove(&t);
  }
}
