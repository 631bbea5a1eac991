/* The lorasim binary as a user runs it: exit codes, messages, files. */
#include <criterion/criterion.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#define LSIM_TMP_PREFIX "/tmp/lsim-cli-"
#include "cli_harness.h"
#include "sim/cli.h"

static int exists(const char *rel) {
  char p[512];
  struct stat sb;
  snprintf(p, sizeof p, "%s/%s", tmpdir, rel);
  return stat(p, &sb) == 0;
}

static void write_file(const char *rel, const char *text) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", tmpdir, rel);
  FILE *f = fopen(p, "w");
  cr_assert_not_null(f);
  fputs(text, f);
  fclose(f);
}

static void db_status(const char *path, char *st, size_t n) {
  sqlite3 *h;
  sqlite3_stmt *s;
  cr_assert_eq(sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  cr_assert_eq(sqlite3_prepare_v2(h, "SELECT status FROM runs", -1, &s, NULL),
               SQLITE_OK);
  cr_assert_eq(sqlite3_step(s), SQLITE_ROW);
  snprintf(st, n, "%s", (const char *)sqlite3_column_text(s, 0));
  sqlite3_finalize(s);
  sqlite3_close(h);
}

TestSuite(cli, .init = mk_tmp, .fini = rm_tmp);

Test(cli, version_help_and_unknown_commands) {
  cr_assert_eq(lorasim("version"), 0);
  cr_assert_not_null(strstr(out, "lorasim 0."));
  cr_assert_eq(lorasim("help"), 0);
  cr_assert_not_null(strstr(out, "replay SCENARIO.json"));
  cr_assert_eq(lorasim("replay --help"), 0);
  cr_assert_not_null(strstr(out, "--scheduler NAME"));
  cr_assert_not_null(strstr(out, "fcfs"));
  cr_assert_eq(lorasim("help replay"), 0);
  cr_assert_not_null(strstr(out, "--db PATH"));
  cr_assert_eq(lorasim("frobnicate"), 2);
  cr_assert_not_null(strstr(out, "E_USAGE"));
  cr_assert_eq(lorasim(""), 2);
  cr_assert_eq(lorasim("replay"), 2);
  cr_assert_eq(lorasim("replay --bogus x.json"), 2);
}

/* `lorasim bench kernels` runs the standalone bench_kernels beside the
** binary (or $LSIM_BENCH_KERNELS); its own options pass through. */
Test(cli, bench_dispatches_to_the_kernel_benchmark) {
  cr_assert_eq(lorasim("bench"), 2);
  cr_assert_not_null(strstr(out, "usage: lorasim bench kernels"));
  cr_assert_eq(lorasim("help bench"), 0);
  cr_assert_not_null(strstr(out, "--check"));
  cr_assert_eq(lorasim("help"), 0);
  cr_assert_not_null(strstr(out, "bench kernels"));
  cr_assert_eq(lorasim("bench frobnicate"), 2);
  cr_assert_not_null(strstr(out, "E_USAGE"));
  /* a benchmark that is not there: a clear error, exit 1 */
  setenv("LSIM_BENCH_KERNELS", "/nonexistent/bench_kernels", 1);
  int st = lorasim("bench kernels --check");
  unsetenv("LSIM_BENCH_KERNELS");
  cr_assert_eq(st, 1);
  cr_assert_not_null(strstr(out, "cannot run /nonexistent/bench_kernels"));
  /* built (nvcc found): the options reach it, --help needs no GPU */
  char bk[600];
  struct stat sb;
  snprintf(bk, sizeof bk, "%s", LSIM_BIN);
  char *slash = strrchr(bk, '/');
  snprintf(slash ? slash + 1 : bk, 32, "bench_kernels");
  if (stat(bk, &sb) == 0) {
    cr_assert_eq(lorasim("bench kernels --help"), 0);
    cr_assert_not_null(strstr(out, "usage: bench_kernels"));
    cr_assert_eq(lorasim("bench kernels --frobnicate"), 2);
  }
}

Test(cli, quickstart_replay_writes_db_plots_and_summary) {
  char args[1024];
  snprintf(args, sizeof args, "replay '%s/scenarios/quickstart.json'",
           LSIM_SOURCE_DIR);
  cr_assert_eq(lorasim(args), 0, "%s", out);
  cr_assert_not_null(strstr(out, "400 arrived"), "%s", out);
  cr_assert_not_null(strstr(out, "TTFT"), "%s", out);
  cr_assert_not_null(strstr(out, "TBT"), "%s", out);
  cr_assert_not_null(strstr(out, "cache hit rate"), "%s", out);
  cr_assert_not_null(strstr(out, "interactive"), "%s", out);
  cr_assert_not_null(strstr(out, "results/quickstart-seed42.db"), "%s", out);
  cr_assert(exists("results/quickstart-seed42.db"));
  cr_assert(exists("results/quickstart-seed42.prom"));
  cr_assert(exists("results/quickstart-seed42-ttft.dat"));
  cr_assert(exists("results/quickstart-seed42-residency.dat"));
  if (system("command -v gnuplot >/dev/null 2>&1") == 0) {
    cr_assert(exists("results/quickstart-seed42-ttft.png"));
    cr_assert(exists("results/quickstart-seed42-residency.png"));
  } else {
    cr_assert_not_null(strstr(out, "gnuplot not found"));
  }
  char p[512], st[32];
  snprintf(p, sizeof p, "%s/results/quickstart-seed42.db", tmpdir);
  db_status(p, st, sizeof st);
  cr_assert_str_eq(st, "ok");
}

Test(cli, overrides_are_checked_and_recorded) {
  char args[1024];
  snprintf(args, sizeof args,
           "replay '%s/scenarios/quickstart.json' --scheduler nope --db x.db",
           LSIM_SOURCE_DIR);
  cr_assert_eq(lorasim(args), 2);
  cr_assert_not_null(strstr(out, "E_SCN_POLICY"), "%s", out);
  cr_assert(!exists("x.db"), "a rejected command must write nothing");
  snprintf(args, sizeof args,
           "replay '%s/scenarios/quickstart.json' --backend warp --db x.db",
           LSIM_SOURCE_DIR);
  cr_assert_eq(lorasim(args), 2);
  cr_assert_not_null(strstr(out, "E_SCN_BACKEND"), "%s", out);
  snprintf(args, sizeof args,
           "replay '%s/scenarios/quickstart.json' --seed -4 --db x.db",
           LSIM_SOURCE_DIR);
  cr_assert_eq(lorasim(args), 2);
  cr_assert(!exists("x.db"));
  snprintf(args, sizeof args,
           "replay '%s/scenarios/quickstart.json' --seed 9 --db y.db "
           "--no-plots --quiet --scheduler fcfs --evict lru --prefetch none",
           LSIM_SOURCE_DIR);
  cr_assert_eq(lorasim(args), 0, "%s", out);
  cr_assert(exists("y.db"));
  cr_assert(!exists("y-ttft.png"));
}

Test(cli, bad_scenario_exits_2_names_the_path_and_writes_nothing) {
  write_file("bad.json",
             "{\"name\":\"x\",\"seed\":1,\"workers\":{\"count\":0}}");
  cr_assert_eq(lorasim("replay bad.json --db bad.db"), 2);
  cr_assert_not_null(strstr(out, "bad.json"), "%s", out);
  cr_assert_not_null(strstr(out, "$.workers"), "%s", out);
  cr_assert(!exists("bad.db"));
  cr_assert(!exists("results"));
  cr_assert_eq(lorasim("replay missing.json"), 2);
  cr_assert_not_null(strstr(out, "missing.json"), "%s", out);
}

Test(cli, sigint_to_a_running_replay_exits_130_and_marks_interrupted) {
  /* a long trace: tens of thousands of requests, so SIGINT lands mid-run */
  char scn[1024], db[512];
  snprintf(scn, sizeof scn, "%s/scenarios/quickstart.json", LSIM_SOURCE_DIR);
  FILE *f = fopen(scn, "r");
  cr_assert_not_null(f);
  static char text[16384];
  size_t n = fread(text, 1, sizeof text - 1, f);
  text[n] = 0;
  fclose(f);
  char *p = strstr(text, "\"requests\": 400");
  cr_assert_not_null(p);
  static char edited[16500];
  size_t head = (size_t)(p - text);
  const char *tail = p + strlen("\"requests\": 400");
  /* a non-integer count must be rejected before anything is written */
  snprintf(edited, sizeof edited, "%.*s\"requests\": 9.5%s", (int)head, text,
           tail);
  write_file("long.json", edited);
  cr_assert_eq(lorasim("replay long.json --db never.db"), 2);
  cr_assert_not_null(strstr(out, "E_SCN_NOT_INTEGER"), "%s", out);
  cr_assert(!exists("never.db"));
  snprintf(edited, sizeof edited, "%.*s\"requests\": 10000000%s", (int)head,
           text, tail);
  write_file("long.json", edited);

  snprintf(db, sizeof db, "%s/long.db", tmpdir);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    cr_assert_eq(chdir(tmpdir), 0);
    int nul = open("/dev/null", O_WRONLY);
    dup2(nul, 1);
    dup2(nul, 2);
    execl(LSIM_BIN, "lorasim", "replay", "long.json", "--db", "long.db",
          "--no-plots", (char *)NULL);
    _exit(127);
  }
  /* wait until the run row is committed as 'running' */
  char st[32] = "";
  for (int i = 0; i < 400 && strcmp(st, "running") != 0; i++) {
    struct timespec ts = {0, 25 * 1000 * 1000};
    nanosleep(&ts, NULL);
    struct stat sb;
    if (stat(db, &sb) == 0 && sb.st_size > 0) {
      sqlite3 *h;
      sqlite3_stmt *s;
      if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
          sqlite3_prepare_v2(h, "SELECT status FROM runs", -1, &s, NULL) ==
              SQLITE_OK) {
        if (sqlite3_step(s) == SQLITE_ROW)
          snprintf(st, sizeof st, "%s", (const char *)sqlite3_column_text(s, 0));
        sqlite3_finalize(s);
      }
      sqlite3_close(h);
    }
  }
  cr_assert_str_eq(st, "running");
  kill(pid, SIGINT);
  int ws;
  cr_assert_eq(waitpid(pid, &ws, 0), pid);
  cr_assert(WIFEXITED(ws));
  cr_assert_eq(WEXITSTATUS(ws), 130);
  db_status(db, st, sizeof st);
  cr_assert_str_eq(st, "interrupted");
}

/* One exit-status table for every command (sim/cli.h). */
Test(cli, one_table_maps_codes_to_exit_status) {
  cr_assert_eq(lsim_cli_status(0), 0);
  cr_assert_eq(lsim_cli_status(LSIM_E_INTERRUPTED), 130);
  cr_assert_eq(lsim_cli_status(LSIM_E_USAGE), 2);
  cr_assert_eq(lsim_cli_status(LSIM_E_SCN_RANGE), 2);
  cr_assert_eq(lsim_cli_status(LSIM_E_TRACE_PARSE), 2);
  cr_assert_eq(lsim_cli_status(LSIM_E_CMP_JSON), 2);
  cr_assert_eq(lsim_cli_status(LSIM_E_CMP_LAPACK), 1);
  cr_assert_eq(lsim_cli_status(LSIM_E_OUT_SYMLINK), 2);
  cr_assert_eq(lsim_cli_status(LSIM_E_RUN_INPUT_CHANGED), 2);
  cr_assert_eq(lsim_cli_status(LSIM_E_FILE_MISSING), 2);
  cr_assert_eq(lsim_cli_status(LSIM_E_OUT_NO_DIR), 2);
  cr_assert_eq(lsim_cli_status(LSIM_E_DEV_PROFILE), 2);
  cr_assert_eq(lsim_cli_status(LSIM_E_DEV_PROFILE_SHAPE), 2);
  cr_assert_eq(lsim_cli_status(LSIM_E_DEV_PROFILE_NONE), 2);
  cr_assert_eq(lsim_cli_status(LSIM_E_DEV_FIT), 2);
  cr_assert_eq(lsim_cli_status(LSIM_E_DEV_UNSUPPORTED), 2);
  cr_assert_eq(lsim_cli_status(LSIM_E_STAGE_PAGES), 1);
  cr_assert_eq(lsim_cli_status(LSIM_E_DEV_NO_DEVICE), 1);
  cr_assert_eq(lsim_cli_status(LSIM_E_IO), 1);
  cr_assert_eq(lsim_cli_status(LSIM_E_DB), 1);
  cr_assert_eq(lsim_cli_status(LSIM_E_BACKEND), 1);
  cr_assert_eq(lsim_cli_status(LSIM_E_NOMEM), 1);
}

/* The document commands (exec, compress): the exec interface's line form
** and exec's status, from the same module (sim/cli.h). */
Test(cli, document_commands_share_the_line_form_and_status) {
  cr_assert_eq(lsim_cli_document_status(0), 0);
  cr_assert_eq(lsim_cli_document_status(LSIM_E_SHAPE), 2);
  cr_assert_eq(lsim_cli_document_status(LSIM_E_JSON_DUP_KEY), 2);
  cr_assert_eq(lsim_cli_document_status(LSIM_E_PATH_MISMATCH), 1);
  cr_assert_eq(lsim_cli_document_status(LSIM_E_NOMEM), 1);
  cr_assert_eq(lsim_cli_document_status(LSIM_E_IO), 1);
  char buf[256] = "";
  FILE *f = fmemopen(buf, sizeof buf, "w");
  cr_assert_not_null(f);
  lsim_cli_report_at(f, LSIM_E_SHAPE, "$.adapters[0].B[2]", "expected 2");
  lsim_cli_report_at(f, LSIM_E_IO, "", "cannot read");
  lsim_cli_report_at(NULL, LSIM_E_IO, "", "nowhere");
  fclose(f);
  cr_assert_str_eq(buf, "lorasim: error E_SHAPE at $.adapters[0].B[2]: "
                        "expected 2\nlorasim: error E_IO: cannot read\n");
}

/* Every entry in tmpdir, one name a line, sorted: what a command left. */
static void listing(char *buf, size_t n) {
  char cmd[400];
  snprintf(cmd, sizeof cmd, "cd '%s' && find . | LC_ALL=C sort", tmpdir);
  FILE *p = popen(cmd, "r");
  cr_assert_not_null(p);
  size_t k = fread(buf, 1, n - 1, p);
  buf[k] = 0;
  cr_assert_eq(pclose(p), 0);
}

/* One exit status and one code for an input file that is not there, in
** every command that reads one (docs/RELIABILITY.md, "Exit status"): 2,
** E_FILE_MISSING, the path in the message, nothing written. */
Test(cli, a_missing_input_file_is_exit_2_everywhere) {
  char qs[512], args[1024], before[4096], after[4096];
  snprintf(qs, sizeof qs, "'%s/scenarios/quickstart.json'", LSIM_SOURCE_DIR);
  struct {
    const char *fmt; /* %s: the quickstart, where a command needs one */
  } cmds[] = {
      {"replay gone.json --db r.db"},
      {"replay %s --profile gone.json --db r.db --no-plots"},
      {"replay --resume gone.db"},
      {"compare gone.json --schedulers fcfs,vtc --out cmp"},
      {"sweep gone.json --out sw"},
      {"exec --in gone.json --out x.json"},
      {"compress --in gone.json --out b.json"},
      {"compress --verify gone.json"},
      {"compress --synthetic 4 --report --kernel-times gone.json"},
      {"trace convert gone.json -o t.csv"},
      {"trace stats gone.json --plot p.png"},
      {"trace stats --scenario gone.json"},
      {"trace stats --format servegen gone.json"},
      {"prefix --trace gone.json --requests 10 --out px --no-plots"},
      {"calibrate --holdout gone.json --out p.json --db c.db"},
      {"audit gone.db"},
  };
  listing(before, sizeof before);
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
    snprintf(args, sizeof args, cmds[i].fmt, qs);
    cr_expect_eq(lorasim(args), 2, "%s: %s", args, out);
    cr_expect(strstr(out, "E_FILE_MISSING") &&
                  (strstr(out, "gone.json") || strstr(out, "gone.db")),
              "%s: %s", args, out);
    listing(after, sizeof after);
    cr_expect_str_eq(after, before, "%s left files behind", args);
  }
}

/* An output path in a directory that does not exist: the directory named,
** E_OUT_NO_DIR, exit 2, and nothing created (no directory made for it). */
Test(cli, a_missing_output_directory_is_reported_and_not_made) {
  char qs[512], tiny[512], args[1024], before[4096], after[4096];
  snprintf(qs, sizeof qs, "'%s/scenarios/quickstart.json'", LSIM_SOURCE_DIR);
  snprintf(tiny, sizeof tiny, "'%s/traces/samples/tiny.csv'", LSIM_SOURCE_DIR);
  struct {
    const char *fmt, *dir; /* fmt: %s the input */
    int tiny;
  } cmds[] = {
      {"replay %s --db nodir/r.db", "nodir", 0},
      {"replay %s --db sub/nodir/r.db --no-plots", "sub/nodir", 0},
      {"compare %s --schedulers fcfs,vtc --out nodir/cmp", "nodir", 0},
      {"trace convert %s -o nodir/t.csv", "nodir", 1},
      {"trace stats %s --plot nodir/p.png", "nodir", 1},
      {"prefix --requests 10 --out nodir/px --no-plots", "nodir", 0},
      {"calibrate --out nodir/p.json", "nodir", 0},
      {"calibrate --db nodir/c.db", "nodir", 0},
      {"sweep g.json --out nodir/sw --quiet", "nodir", 0},
  };
  char grid[700];
  snprintf(grid, sizeof grid,
           "{\"name\": \"g\", \"base\": \"%s/scenarios/quickstart.json\", "
           "\"axes\": [{\"path\": \"$.policies.scheduler\", \"values\": "
           "[\"fcfs\"]}], \"seeds\": [1]}\n",
           LSIM_SOURCE_DIR);
  write_file("g.json", grid);
  listing(before, sizeof before);
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
    snprintf(args, sizeof args, cmds[i].fmt, cmds[i].tiny ? tiny : qs);
    cr_expect_eq(lorasim(args), 2, "%s: %s", args, out);
    char want[128];
    snprintf(want, sizeof want, "E_OUT_NO_DIR: %s: directory does not exist",
             cmds[i].dir);
    cr_expect(strstr(out, want), "%s: no '%s' in: %s", args, want, out);
    listing(after, sizeof after);
    cr_expect_str_eq(after, before, "%s left files behind", args);
  }
  /* the document commands print the exec interface's line form */
  snprintf(args, sizeof args,
           "exec --in '%s/fixtures/exec/spec_example.json' --out nodir/y.json",
           LSIM_TEST_DIR);
  cr_expect_eq(lorasim(args), 2, "%s", out);
  cr_expect(strstr(out, "error E_OUT_NO_DIR: nodir: directory does not exist"),
            "%s", out);
  snprintf(args, sizeof args,
           "compress --in '%s/fixtures/compress/three.json' --rank 2 "
           "--out nodir/b.json",
           LSIM_TEST_DIR);
  cr_expect_eq(lorasim(args), 2, "%s", out);
  cr_expect(strstr(out, "error E_OUT_NO_DIR: nodir: directory does not exist"),
            "%s", out);
  listing(after, sizeof after);
  cr_expect_str_eq(after, before);
  /* compare makes the one directory it is given, in one that exists */
  snprintf(args, sizeof args,
           "compare '%s/fixtures/replay/tiny.json' --schedulers fcfs "
           "--out cmp --no-plots",
           LSIM_TEST_DIR);
  cr_expect_eq(lorasim(args), 0, "%s", out);
  cr_expect(exists("cmp/fcfs.db"));
}
