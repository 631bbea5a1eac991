/*
** test_resume.c: resume identity and the messages around a run that did
** not end (issue 18, items 6 and 11), through the real binary.
**
** A killed run is made the way a crash makes one: the real `lorasim
** replay` runs as a child process, the test watches its database until a
** batch of events is committed and the run is still 'running', then sends
** SIGKILL.  The disk-full cases mount a small tmpfs of their own (root
** only; skipped with a message otherwise).
*/
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LSIM_TMP_PREFIX "/tmp/lsim-resume-"
#include "cli_harness.h"

#include "../sim/replay.h"

extern char **environ;

static char mnt[300]; /* a tmpfs this test mounted, or "" */

static void fini(void) {
  if (mnt[0]) {
    umount2(mnt, MNT_DETACH);
    mnt[0] = 0;
  }
  rm_tmp();
}

TestSuite(resume, .init = mk_tmp, .fini = fini, .timeout = 300);

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

/* A native CSV trace of n requests (a fixed LCG, so always the same
** bytes); `variant` changes one output length near the end. */
static void write_trace(const char *rel, int n, int variant) {
  char p[512];
  path_of(p, sizeof p, rel);
  FILE *f = fopen(p, "w");
  cr_assert_not_null(f);
  fputs("arrival_ms,tenant,adapter,prompt_tokens,output_tokens\n", f);
  uint64_t x = 20261201;
  for (int i = 0; i < n; i++) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    int prompt = 64 + (int)((x >> 33) % 900);
    int output = 8 + (int)((x >> 13) % 180);
    if (variant && i == n - 10)
      output = output == 9 ? 10 : 9;
    fprintf(f, "%d,%s,%d,%d,%d\n", i * 50, (x >> 60) & 1 ? "batch" : "interactive",
            (int)((x >> 40) % 40), prompt, output);
  }
  cr_assert_eq(fclose(f), 0);
}

/* The crash fixture's world (tests/fixtures/replay/crash.json) reading
** its requests from trace.csv. */
static void write_scenario(void) {
  write_file(
      "scn.json",
      "{\"name\": \"resume\", \"seed\": 42, \"ns_per_tick\": 1000,\n"
      " \"workers\": {\"count\": 2, \"pool_pages\": 768, \"page_bytes\": 2097152,\n"
      "  \"h2d_gbps\": 25.0, \"load_fixed_us\": 200, \"max_batch_tokens\": 4096,\n"
      "  \"max_batch_requests\": 48},\n"
      " \"model\": {\"layers\": 32, \"kv_heads\": 8, \"head_dim\": 128,\n"
      "  \"dtype_bytes\": 2, \"targets\": [{\"name\": \"q_proj\", \"d_in\": 4096,\n"
      "  \"d_out\": 4096}, {\"name\": \"v_proj\", \"d_in\": 4096, \"d_out\": 1024}]},\n"
      " \"cost\": {\"iter_fixed_ns\": 4000000, \"prefill_token_ns\": 60000,\n"
      "  \"decode_token_ns\": 120000, \"segment_ns\": 15000, \"rank_row_ps\": 2000},\n"
      " \"adapters\": {\"count\": 40, \"ranks\": [{\"rank\": 8, \"weight\": 4},\n"
      "  {\"rank\": 16, \"weight\": 3}, {\"rank\": 64, \"weight\": 1}], \"zipf_s\": 1.1},\n"
      " \"tenants\": [{\"name\": \"interactive\", \"traffic_weight\": 3},\n"
      "  {\"name\": \"batch\", \"traffic_weight\": 1}],\n"
      " \"trace\": {\"file\": \"trace.csv\"},\n"
      " \"faults\": {\"load_failure_rate\": 0.02, \"max_load_attempts\": 4}}\n");
}

/* A calibrated cost profile far from the scenario's $.cost. */
static void write_profile(const char *rel, int64_t decode_ns) {
  char text[512];
  snprintf(text, sizeof text,
           "{\"lorasim_profile\": 1, \"cost\": {\"iter_fixed_ns\": 1500000,"
           " \"prefill_token_ns\": 20000, \"decode_token_ns\": %lld,"
           " \"segment_ns\": 5000, \"rank_row_ps\": 500}}\n",
           (long long)decode_ns);
  write_file(rel, text);
}

/* "status|events" of a database, read as any reader would; "" when it
** has no committed run row yet. */
static void peek(const char *path, char *st, size_t n, long long *events) {
  st[0] = 0;
  *events = 0;
  sqlite3 *h = NULL;
  if (sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
    sqlite3_close(h);
    return;
  }
  sqlite3_busy_timeout(h, 1000);
  sqlite3_stmt *s = NULL;
  if (sqlite3_prepare_v2(h,
                         "SELECT status, (SELECT count(*) FROM event_log) "
                         "FROM runs",
                         -1, &s, NULL) == SQLITE_OK &&
      sqlite3_step(s) == SQLITE_ROW) {
    snprintf(st, n, "%s", (const char *)sqlite3_column_text(s, 0));
    *events = sqlite3_column_int64(s, 1);
  }
  sqlite3_finalize(s);
  sqlite3_close(h);
}

/* Run `lorasim replay scn.json --db DB --no-plots --quiet [extra]` in
** tmpdir (crash_scn: another scenario) and kill it with SIGKILL once it committed a batch of events
** while still 'running'.  Leaves DB as the crash left it. */
static void crash_scn(const char *scenario, const char *db,
                      const char *extra) {
  char dbp[512], scn[512];
  path_of(dbp, sizeof dbp, db);
  path_of(scn, sizeof scn, scenario);
  const char *argv[12] = {LSIM_BIN, "replay", scn, "--db", dbp,
                          "--no-plots", "--quiet"};
  int argc = 7;
  char extra_copy[512] = "";
  if (extra) {
    snprintf(extra_copy, sizeof extra_copy, "%s", extra);
    for (char *t = strtok(extra_copy, " "); t && argc < 11;
         t = strtok(NULL, " "))
      argv[argc++] = t;
  }
  argv[argc] = NULL;
  cr_assert_eq(chdir(tmpdir), 0);
  pid_t pid;
  cr_assert_eq(posix_spawn(&pid, LSIM_BIN, NULL, NULL, (char *const *)argv,
                           environ),
               0);
  char st[32];
  long long events = 0;
  for (int i = 0; i < 60000; i++) {
    peek(dbp, st, sizeof st, &events);
    if (strcmp(st, "running") == 0 && events > 0)
      break;
    if (st[0] && strcmp(st, "running") != 0)
      break;
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  kill(pid, SIGKILL);
  int ws = 0;
  cr_assert_eq(waitpid(pid, &ws, 0), pid);
  cr_assert(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL,
            "the replay ended before it could be killed (status '%s'): "
            "the scenario is too short for this machine",
            st);
  peek(dbp, st, sizeof st, &events);
  cr_assert_str_eq(st, "running");
  cr_assert_gt(events, 0, "no batch was committed before the kill");
}

static void crash_run(const char *db, const char *extra) {
  crash_scn("scn.json", db, extra);
}

/* A digest of the rows a run wrote (events, requests, iterations). */
static uint64_t rows_digest(const char *db) {
  char p[512];
  path_of(p, sizeof p, db);
  sqlite3 *h;
  cr_assert_eq(sqlite3_open_v2(p, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  static const char *const q[] = {
      "SELECT * FROM events ORDER BY seq",
      "SELECT * FROM requests ORDER BY request",
      "SELECT * FROM iterations ORDER BY iter, worker"};
  uint64_t d = 1469598103934665603ULL;
  for (int k = 0; k < 3; k++) {
    sqlite3_stmt *s;
    cr_assert_eq(sqlite3_prepare_v2(h, q[k], -1, &s, NULL), SQLITE_OK);
    while (sqlite3_step(s) == SQLITE_ROW) {
      for (int c = 0; c < sqlite3_column_count(s); c++) {
        const unsigned char *t = sqlite3_column_text(s, c);
        for (const unsigned char *u = t ? t : (const unsigned char *)"\x01";
             *u; u++)
          d = (d ^ *u) * 1099511628211ULL;
        d = (d ^ 0xff) * 1099511628211ULL;
      }
    }
    sqlite3_finalize(s);
  }
  sqlite3_close(h);
  return d;
}

/* A digest of the run's catalog (tenants, adapters); 0 when it has no
** rows. */
static uint64_t catalog_digest(const char *db) {
  char p[512];
  path_of(p, sizeof p, db);
  sqlite3 *h;
  cr_assert_eq(sqlite3_open_v2(p, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  static const char *const q[] = {"SELECT * FROM tenants ORDER BY tenant",
                                  "SELECT * FROM adapters ORDER BY adapter"};
  uint64_t d = 1469598103934665603ULL;
  int rows = 0;
  for (int k = 0; k < 2; k++) {
    sqlite3_stmt *s;
    cr_assert_eq(sqlite3_prepare_v2(h, q[k], -1, &s, NULL), SQLITE_OK);
    while (sqlite3_step(s) == SQLITE_ROW) {
      rows++;
      for (int c = 0; c < sqlite3_column_count(s); c++) {
        const unsigned char *t = sqlite3_column_text(s, c);
        for (const unsigned char *u = t ? t : (const unsigned char *)"\x01";
             *u; u++)
          d = (d ^ *u) * 1099511628211ULL;
        d = (d ^ 0xff) * 1099511628211ULL;
      }
    }
    sqlite3_finalize(s);
  }
  sqlite3_close(h);
  return rows ? d : 0;
}

static void status_of(const char *db, char *st, size_t n) {
  char p[512];
  long long ev;
  path_of(p, sizeof p, db);
  peek(p, st, n, &ev);
}

#define N_REQ 4000

/* A trace file changed between the kill and the resume: refused, the
** database left as the crash left it; the original trace resumes to the
** uninterrupted run's rows. */
Test(resume, changed_trace_is_refused) {
  write_scenario();
  write_trace("trace.csv", N_REQ, 0);
  cr_assert_eq(lorasim("replay scn.json --db ref.db --no-plots --quiet"), 0,
               "%s", out);
  crash_run("k.db", NULL);
  /* the catalog is written before the first event: a killed run has it */
  cr_assert_neq(catalog_digest("ref.db"), 0);
  cr_assert_eq(catalog_digest("k.db"), catalog_digest("ref.db"));
  write_trace("trace.csv", N_REQ, 1); /* same size, one digit changed */
  cr_assert_eq(lorasim("replay --resume k.db --no-plots --quiet"), 2, "%s",
               out);
  cr_assert_not_null(strstr(out, "E_RUN_INPUT_CHANGED"), "%s", out);
  cr_assert_not_null(strstr(out, "trace"), "%s", out);
  cr_assert_not_null(strstr(out, "trace.csv"), "%s", out);
  char st[32];
  status_of("k.db", st, sizeof st);
  cr_assert_str_eq(st, "running");

  write_trace("trace.csv", N_REQ, 0);
  cr_assert_eq(lorasim("replay --resume k.db --no-plots --quiet"), 0, "%s",
               out);
  status_of("k.db", st, sizeof st);
  cr_assert_str_eq(st, "ok");
  cr_assert_eq(rows_digest("k.db"), rows_digest("ref.db"));
  cr_assert_eq(catalog_digest("k.db"), catalog_digest("ref.db"));
}

/* A trace file removed after the kill: refused, naming it. */
Test(resume, missing_trace_is_refused) {
  write_scenario();
  write_trace("trace.csv", N_REQ, 0);
  crash_run("k.db", NULL);
  char p[512];
  path_of(p, sizeof p, "trace.csv");
  cr_assert_eq(unlink(p), 0);
  cr_assert_eq(lorasim("replay --resume k.db --no-plots --quiet"), 2, "%s",
               out);
  cr_assert_not_null(strstr(out, "E_RUN_INPUT_MISSING"), "%s", out);
  cr_assert_not_null(strstr(out, "trace.csv"), "%s", out);
}

/* A run started with --profile resumes with it: the resumed rows are the
** profiled run's, not the plain run's; a changed profile is refused. */
Test(resume, profile_is_reapplied_and_checked) {
  write_scenario();
  write_trace("trace.csv", N_REQ, 0);
  write_profile("p.json", 30000);
  cr_assert_eq(lorasim("replay scn.json --db plain.db --no-plots --quiet"), 0,
               "%s", out);
  cr_assert_eq(lorasim("replay scn.json --profile p.json --db prof.db "
                       "--no-plots --quiet"),
               0, "%s", out);
  uint64_t plain = rows_digest("plain.db"), prof = rows_digest("prof.db");
  cr_assert_neq(plain, prof, "the profile must change the run");

  crash_run("k.db", "--profile p.json");
  cr_assert_eq(lorasim("replay --resume k.db --no-plots --quiet"), 0, "%s",
               out);
  cr_assert_eq(rows_digest("k.db"), prof,
               "the resumed run is not the profiled run%s",
               rows_digest("k.db") == plain ? " (it is the plain run)" : "");

  crash_run("k2.db", "--profile p.json");
  write_profile("p.json", 31000);
  cr_assert_eq(lorasim("replay --resume k2.db --no-plots --quiet"), 2, "%s",
               out);
  cr_assert_not_null(strstr(out, "E_RUN_INPUT_CHANGED"), "%s", out);
  cr_assert_not_null(strstr(out, "profile p.json"), "%s", out);
  char st[32];
  status_of("k2.db", st, sizeof st);
  cr_assert_str_eq(st, "running");
}

/* Run a shell command in tmpdir, stdout+stderr into out; the exit status. */
static int sh(const char *c) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "cd '%s' && ( %s ) 2>&1", tmpdir, c);
  FILE *p = popen(cmd, "r");
  cr_assert_not_null(p);
  size_t n = fread(out, 1, sizeof out - 1, p);
  out[n] = 0;
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* What a run records: every input with its digest and size, and the
** options it was given. */
Test(resume, identity_rows) {
  write_scenario();
  write_trace("trace.csv", 50, 0);
  write_profile("p.json", 30000);
  cr_assert_eq(lorasim("replay scn.json --profile p.json --seed 7 "
                       "--scheduler fcfs --skip-bad-rows --db r.db "
                       "--no-plots --quiet"),
               0, "%s", out);
  cr_assert_eq(sh("sqlite3 r.db \"SELECT role || ' ' || path || ' ' || "
                  "sha256 || ' ' || bytes FROM run_inputs ORDER BY role; "
                  "SELECT name || '=' || value FROM run_options ORDER BY "
                  "name; PRAGMA user_version\""),
               0, "%s", out);
  char rows[sizeof out];
  snprintf(rows, sizeof rows, "%s", out);
  cr_assert_eq(sh("for f in p.json scn.json trace.csv; do "
                  "echo \"$(sha256sum < $f | cut -c1-64) $(wc -c < $f)\"; "
                  "done"),
               0, "%s", out);
  char sums[3][65];
  long long sizes[3];
  cr_assert_eq(sscanf(out, "%64s %lld\n%64s %lld\n%64s %lld", sums[0],
                      &sizes[0], sums[1], &sizes[1], sums[2], &sizes[2]),
               6, "%s", out);
  char want[4096];
  snprintf(want, sizeof want,
           "profile p.json %s %lld\n"
           "scenario scn.json %s %lld\n"
           "trace trace.csv %s %lld\n"
           "no-plots=1\nprofile=p.json\nscheduler=fcfs\nseed=7\n"
           "skip-bad-rows=1\n7\n",
           sums[0], sizes[0], sums[1], sizes[1], sums[2], sizes[2]);
  cr_assert_str_eq(rows, want);
}

/* A database written without the identity (schema 2) cannot be checked:
** refused with its own code, left as it was. */
Test(resume, older_database_is_refused) {
  write_scenario();
  write_trace("trace.csv", N_REQ, 0);
  crash_run("k.db", NULL);
  cr_assert_eq(sh("sqlite3 k.db 'DROP TABLE run_inputs; DROP TABLE "
                  "run_options; PRAGMA user_version=2'"),
               0, "%s", out);
  cr_assert_eq(lorasim("replay --resume k.db --no-plots --quiet"), 2, "%s",
               out);
  cr_assert_not_null(strstr(out, "E_RUN_IDENTITY"), "%s", out);
  cr_assert_not_null(strstr(out, "schema version 2"), "%s", out);
  char st[32];
  status_of("k.db", st, sizeof st);
  cr_assert_str_eq(st, "running");
}

/* `audit` on a killed run: the run is incomplete (its own finding and
** code, exit 1), not a missing request record. */
Test(resume, audit_of_a_killed_run_says_incomplete) {
  write_scenario();
  write_trace("trace.csv", N_REQ, 0);
  crash_run("k.db", NULL);
  cr_assert_eq(lorasim("audit k.db"), 1, "%s", out);
  cr_assert_not_null(strstr(out, "finding: E_RUN_INCOMPLETE"), "%s", out);
  cr_assert_not_null(strstr(out, "run incomplete"), "%s", out);
  cr_assert_not_null(strstr(out, "'running'"), "%s", out);
  cr_assert_null(strstr(out, "E_LOG_RECORD"), "%s", out);
  cr_assert_not_null(strstr(out, "1 finding\n"), "%s", out);
  /* once resumed, the same database audits clean */
  cr_assert_eq(lorasim("replay --resume k.db --no-plots --quiet"), 0, "%s",
               out);
  cr_assert_eq(lorasim("audit k.db"), 0, "%s", out);
}

/* The other file inputs: a compression bundle and an empirical length
** file are recorded (no "trace" row for a generator) and checked. */
Test(resume, bundle_and_length_file_are_checked) {
  write_trace("lengths.csv", 200, 0);
  cr_assert_eq(lorasim("compress --synthetic 8 --d-in 32 --d-out 32 "
                       "--src-rank 4 --planted 4 --groups 2 --noise 0.01 "
                       "--rank 4 --clusters 2 --out bundle.json"),
               0, "%s", out);
  write_file(
      "g.json",
      "{\"name\": \"g\", \"seed\": 5, \"ns_per_tick\": 1000,\n"
      " \"workers\": {\"count\": 2, \"pool_pages\": 200, \"page_bytes\": 4096,\n"
      "  \"h2d_gbps\": 25, \"load_fixed_us\": 200, \"max_batch_tokens\": 4096,\n"
      "  \"max_batch_requests\": 48},\n"
      " \"model\": {\"layers\": 2, \"kv_heads\": 1, \"head_dim\": 8,\n"
      "  \"dtype_bytes\": 2, \"targets\": [{\"name\": \"q_proj\", \"d_in\": 32,\n"
      "  \"d_out\": 32}]},\n"
      " \"cost\": {\"iter_fixed_ns\": 4000000, \"prefill_token_ns\": 60000,\n"
      "  \"decode_token_ns\": 120000, \"segment_ns\": 15000, \"rank_row_ps\": 2000},\n"
      " \"adapters\": {\"count\": 8, \"ranks\": [{\"rank\": 4, \"weight\": 1}],\n"
      "  \"compression\": {\"bundle\": \"bundle.json\"}},\n"
      " \"tenants\": [{\"name\": \"interactive\", \"traffic_weight\": 1}],\n"
      " \"trace\": {\"generator\": {\"requests\": 4000, \"rate_per_s\": 20,\n"
      "  \"prompt_tokens\": {\"dist\": \"empirical\", \"file\": \"lengths.csv\"},\n"
      "  \"output_tokens\": {\"dist\": \"empirical\", \"file\": \"lengths.csv\"}}}}\n");
  cr_assert_eq(lorasim("replay g.json --db r.db --no-plots --quiet"), 0, "%s",
               out);
  cr_assert_eq(sh("sqlite3 r.db 'SELECT role, path FROM run_inputs ORDER BY "
                  "role'"),
               0, "%s", out);
  cr_assert_str_eq(out, "bundle|bundle.json\ndist|lengths.csv\n"
                        "scenario|g.json\n");

  crash_scn("g.json", "k.db", NULL);
  cr_assert_eq(sh("cp bundle.json b.orig && echo ' ' >> bundle.json"), 0);
  cr_assert_eq(lorasim("replay --resume k.db --no-plots --quiet"), 2, "%s",
               out);
  cr_assert_not_null(strstr(out, "E_RUN_INPUT_CHANGED"), "%s", out);
  cr_assert_not_null(strstr(out, "bundle "), "%s", out);
  cr_assert_not_null(strstr(out, "bundle.json changed since the run"), "%s",
                     out);
  cr_assert_eq(sh("mv b.orig bundle.json"), 0);
  write_trace("lengths.csv", 200, 1);
  cr_assert_eq(lorasim("replay --resume k.db --no-plots --quiet"), 2, "%s",
               out);
  cr_assert_not_null(strstr(out, "dist "), "%s", out);
  cr_assert_not_null(strstr(out, "lengths.csv changed since the run"), "%s",
                     out);
  write_trace("lengths.csv", 200, 0);
  cr_assert_eq(lorasim("replay --resume k.db --no-plots --quiet"), 0, "%s",
               out);
  cr_assert_eq(rows_digest("k.db"), rows_digest("r.db"));
}

/* ---- messages ---------------------------------------------------------- */

static const char *quickstart(void) {
  static char p[600];
  snprintf(p, sizeof p, "'%s/../scenarios/quickstart.json'", LSIM_TEST_DIR);
  return p;
}

/* A database that could not be created is not "marked 'failed'". */
Test(resume, no_database_is_not_marked_failed) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "replay %s --db no-such-dir/x.db --no-plots "
                            "--quiet", quickstart());
  /* a --db in no directory is bad usage (E_OUT_NO_DIR), refused first */
  cr_assert_eq(lorasim(cmd), 2, "%s", out);
  cr_assert_not_null(strstr(out, "E_OUT_NO_DIR: no-such-dir: directory does "
                                 "not exist"),
                     "%s", out);
  cr_assert_null(strstr(out, "marked"), "%s", out);
  cr_assert_not_null(strstr(out, "no database written: no-such-dir/x.db was "
                                 "not created"),
                     "%s", out);
}

/* A --db that names a directory holds no run: not "marked 'failed'". */
Test(resume, a_directory_is_not_marked_failed) {
  char cmd[1024];
  cr_assert_eq(mkdir(strcat(strcpy(cmd, tmpdir), "/d.db"), 0755), 0);
  snprintf(cmd, sizeof cmd, "replay %s --db d.db --no-plots --quiet",
           quickstart());
  cr_assert_neq(lorasim(cmd), 0, "%s", out);
  cr_assert_null(strstr(out, "marked"), "%s", out);
  /* refused as an output path (E_OUT_NOT_REGULAR) and never opened */
  cr_assert_not_null(strstr(out, "E_OUT_NOT_REGULAR"), "%s", out);
  cr_assert_not_null(strstr(out, "no database written: d.db left as it was "
                                 "(not a regular file)"),
                     "%s", out);
}

/* What lsim_replay_explain says for each state of the path, on real
** files: an earlier run left alone is named as such. */
Test(resume, explain_names_what_the_path_holds) {
  char cmd[1024], db[512], got[1024];
  snprintf(cmd, sizeof cmd, "replay %s --db old.db --no-plots --quiet",
           quickstart());
  cr_assert_eq(lorasim(cmd), 0, "%s", out);
  path_of(db, sizeof db, "old.db");
  lsim_summary s;
  memset(&s, 0, sizeof s);
  FILE *f = fmemopen(got, sizeof got, "w");
  lsim_replay_explain(f, "p", &s, db); /* no row committed by this run */
  s.db_status = "running";
  lsim_replay_explain(f, "p", &s, db);
  s.db_status = "failed";
  lsim_replay_explain(f, "p", &s, db);
  s.db_status = NULL;
  lsim_replay_explain(f, "p", &s, "/nonexistent/x.db");
  fclose(f);
  char want[2048];
  snprintf(want, sizeof want,
           "p: %s left as it was (it holds an earlier run, 'ok')\n"
           "p: the run's end could not be recorded: %s still says 'running' "
           "(it holds the rows committed before the failure)\n"
           "p: run marked 'failed' in %s\n"
           "p: no database written: /nonexistent/x.db was not created\n",
           db, db, db);
  cr_assert_str_eq(got, want);
}

/* Mount a tmpfs of `size` at tmpdir/full; 0 when this process may not
** (not root, or no mount permission), after saying why. */
static int mount_small(const char *size) {
  snprintf(mnt, sizeof mnt, "%s/full", tmpdir);
  cr_assert_eq(mkdir(mnt, 0755), 0);
  if (geteuid() != 0) {
    mnt[0] = 0;
    return 0;
  }
  char opt[64];
  snprintf(opt, sizeof opt, "size=%s", size);
  if (mount("tmpfs", mnt, "tmpfs", 0, opt) != 0) {
    fprintf(stderr, "mount tmpfs: %s\n", strerror(errno));
    mnt[0] = 0;
    return 0;
  }
  return 1;
}

/* A full disk mid-run: SQLite's own reason beside E_DB, and the database
** said to be still 'running' (its end could not be written), not
** "marked 'failed'".  The disk holds the schema and the run row, not the
** run (256 KiB stopped holding the first two once schema 6 added the
** loads table). */
Test(resume, full_disk_reports_sqlite_reason) {
  if (!mount_small("384k"))
    cr_skip_test("needs root and mount(2) to put a 384 KiB tmpfs under %s",
                 tmpdir);
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "replay %s --db full/q.db --no-plots --quiet",
           quickstart());
  cr_assert_eq(lorasim(cmd), 1, "%s", out);
  cr_assert_not_null(strstr(out, "E_DB: "), "%s", out);
  cr_assert(strstr(out, "database or disk is full (SQLITE_FULL") ||
                strstr(out, "disk I/O error (SQLITE_IOERR"),
            "%s", out);
  cr_assert_not_null(strstr(out, "full/q.db still says 'running'"), "%s", out);
  cr_assert_null(strstr(out, "marked"), "%s", out);
  char st[32];
  status_of("full/q.db", st, sizeof st);
  cr_assert_str_eq(st, "running");
}

/* A disk too full for the schema: no run row, and the message says so. */
Test(resume, full_disk_before_the_run_row) {
  if (!mount_small("12k"))
    cr_skip_test("needs root and mount(2) to put a 12 KiB tmpfs under %s",
                 tmpdir);
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "replay %s --db full/q.db --no-plots --quiet",
           quickstart());
  cr_assert_eq(lorasim(cmd), 1, "%s", out);
  cr_assert_not_null(strstr(out, "E_DB: "), "%s", out);
  cr_assert(strstr(out, "(SQLITE_FULL") || strstr(out, "(SQLITE_IOERR"), "%s",
            out);
  cr_assert_not_null(strstr(out, "no run recorded in full/q.db"), "%s", out);
  cr_assert_null(strstr(out, "marked"), "%s", out);
}
