/*
** test_names.c: user-supplied names in outputs (issue 18 item 1).
**
** Names are restricted at scenario validation, every writer escapes what
** it writes anyway (sim/escape.h), and gnuplot runs without a shell
** (sim/plot_run.h).  The exploit tests feed hostile strings through the
** paths validation does not cover (a library caller's scenario, an output
** path) to the real writers and the real gnuplot, and check that the
** command in the string never ran.  Tests that need gnuplot say so and
** pass without asserting when it is not installed.
*/
#define LSIM_TMP_PREFIX "/tmp/lsim-names-"
#include "cli_harness.h"

#include <dirent.h>
#include <errno.h>
#include <sqlite3.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../sim/audit.h"
#include "../sim/escape.h"
#include "../sim/plot_run.h"
#include "../sim/report.h"
#include "../sim/scenario.h"

#define FIX LSIM_TEST_DIR "/fixtures/replay"
#define SIM_DIR LSIM_TEST_DIR "/../sim"

/* the issue's exploit: a quote ends the gnuplot string, the next line runs */
#define EXPLOIT_FMT "x'\nsystem 'touch %s'\n#"

static int exists(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0;
}

static long file_size(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f, "cannot open %s", path);
  static char buf[1 << 20];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = 0;
  fclose(f);
  return buf;
}

static int have_gnuplot(void) {
  if (lsim_gnuplot_available())
    return 1;
  cr_log_warn("gnuplot not installed: skipping the part that runs it");
  return 0;
}

/* ---- the escape functions ------------------------------------------------ */

Test(escape, csv_field_quotes_only_when_needed) {
  char b[64];
  cr_assert_eq(lsim_csv_field(b, sizeof b, "service_gold"), 12);
  cr_assert_str_eq(b, "service_gold");
  lsim_csv_field(b, sizeof b, "a,b");
  cr_assert_str_eq(b, "\"a,b\"");
  lsim_csv_field(b, sizeof b, "say \"hi\"");
  cr_assert_str_eq(b, "\"say \"\"hi\"\"\"");
  lsim_csv_field(b, sizeof b, "two\nlines\r");
  cr_assert_str_eq(b, "\"two\nlines\r\"");
  lsim_csv_field(b, sizeof b, "");
  cr_assert_str_eq(b, "");
  /* too small: nothing half-written */
  cr_assert_eq(lsim_csv_field(b, 5, "a,bcd"), -1);
  cr_assert_str_eq(b, "");
}

Test(escape, csv_round_trip_of_a_hostile_header) {
  const char *cols[] = {"scheduler", "a,b", "q\"uote", "x'\nsystem 'y'\n#",
                        "", "plain"};
  char line[1024] = "", field[256];
  size_t used = 0;
  for (int i = 0; i < 6; i++) {
    cr_assert_geq(lsim_csv_field(field, sizeof field, cols[i]), 0);
    used += (size_t)snprintf(line + used, sizeof line - used, "%s%s",
                             i ? "," : "", field);
  }
  const char *p = line;
  for (int i = 0; i < 6; i++) {
    cr_assert_eq(lsim_csv_next(&p, field, sizeof field), 1, "field %d", i);
    cr_assert_str_eq(field, cols[i]);
  }
  cr_assert_eq(lsim_csv_next(&p, field, sizeof field), 0);
  /* malformed: unterminated quote, text after a closing quote */
  p = "\"abc";
  cr_assert_eq(lsim_csv_next(&p, field, sizeof field), -1);
  p = "\"a\"b,c";
  cr_assert_eq(lsim_csv_next(&p, field, sizeof field), -1);
  p = "a\"b";
  cr_assert_eq(lsim_csv_next(&p, field, sizeof field), -1);
}

Test(escape, gp_string_doubles_quotes_and_refuses_controls) {
  char b[128];
  cr_assert_eq(lsim_gp_string(b, sizeof b, "gold", LSIM_GP_REFUSE), 6);
  cr_assert_str_eq(b, "'gold'");
  lsim_gp_string(b, sizeof b, "it's", LSIM_GP_REFUSE);
  cr_assert_str_eq(b, "'it''s'");
  /* backquotes, @ and backslashes are plain inside single quotes */
  lsim_gp_string(b, sizeof b, "`id` @m \\n", LSIM_GP_REFUSE);
  cr_assert_str_eq(b, "'`id` @m \\n'");
  cr_assert_eq(lsim_gp_string(b, sizeof b, "x'\nsystem 'id'\n#",
                              LSIM_GP_REFUSE),
               -1);
  cr_assert_str_eq(b, "");
  lsim_gp_string(b, sizeof b, "x'\nsystem 'id'\n#", LSIM_GP_REPLACE);
  cr_assert_str_eq(b, "'x''?system ''id''?#'");
  cr_assert_null(strchr(b, '\n'));
  cr_assert_eq(lsim_gp_string(b, 4, "abc", LSIM_GP_REFUSE), -1);
}

Test(escape, gp_path_always_names_a_file) {
  char b[128];
  lsim_gp_path(b, sizeof b, "<touch pwned");
  cr_assert_str_eq(b, "'./<touch pwned'");
  lsim_gp_path(b, sizeof b, "|cat");
  cr_assert_str_eq(b, "'./|cat'");
  lsim_gp_path(b, sizeof b, "-");
  cr_assert_str_eq(b, "'./-'");
  lsim_gp_path(b, sizeof b, "/tmp/a'b.dat");
  cr_assert_str_eq(b, "'/tmp/a''b.dat'");
  cr_assert_eq(lsim_gp_path(b, sizeof b, "/tmp/a\nb"), -1);
}

Test(escape, prom_label_and_dat_token) {
  char b[128];
  lsim_prom_label(b, sizeof b, "a\\b\"c\nd");
  cr_assert_str_eq(b, "a\\\\b\\\"c\\nd");
  lsim_prom_label(b, sizeof b, "gold");
  cr_assert_str_eq(b, "gold");
  lsim_dat_token(b, sizeof b, "a b\t\"c\"#d\n");
  cr_assert_str_eq(b, "a_b__c__d_");
}

Test(escape, console_str_makes_controls_visible) {
  char b[64];
  cr_assert_str_eq(lsim_console_str(b, sizeof b, "x'\nsystem\r\t\x1b[2J"),
                   "x'\\nsystem\\r\\t\\x1b[2J");
  cr_assert_str_eq(lsim_console_str(b, sizeof b, "/tmp/plain path.db"),
                   "/tmp/plain path.db");
  char small[12];
  cr_assert_str_eq(lsim_console_str(small, sizeof small, "abcdefghijklmnop"),
                   "abcdefgh...");
  cr_assert_str_eq(lsim_console_str(small, sizeof small, "abcdefghijk"),
                   "abcdefghijk");
}

/* ---- validation ---------------------------------------------------------- */

TestSuite(names, .init = mk_tmp, .fini = rm_tmp);

/* tiny.json with one string replaced (the first occurrence of `from`) */
static void scenario_with(const char *path, const char *from, const char *to) {
  char *text = slurp(FIX "/tiny.json");
  char *at = strstr(text, from);
  cr_assert_not_null(at);
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  fprintf(f, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
  cr_assert_eq(fclose(f), 0);
}

Test(names, exploit_tenant_name_refused_at_validation) {
  char marker[400], json[600], path[400], args[600];
  snprintf(marker, sizeof marker, "%s/pwned", tmpdir);
  /* the JSON spelling of the exploit: \n escapes inside the string */
  snprintf(json, sizeof json, "\"x'\\nsystem 'touch %s'\\n#\"", marker);
  snprintf(path, sizeof path, "%s/s.json", tmpdir);
  scenario_with(path, "\"gold\"", json);
  snprintf(args, sizeof args, "replay s.json --db r.db");
  cr_assert_eq(lorasim(args), 2, "%s", out);
  cr_assert(strstr(out, "E_SCN_RANGE"), "%s", out);
  cr_assert(strstr(out, "$.tenants[0].name"), "%s", out);
  cr_assert(strstr(out, "[A-Za-z0-9_.-]"), "%s", out);
  cr_assert_eq(strchr(out, '\n'), out + strlen(out) - 1,
               "the message is one line: %s", out);
  cr_assert(!exists(marker));
  snprintf(path, sizeof path, "%s/r.db", tmpdir);
  cr_assert(!exists(path), "nothing written for a refused scenario");
}

Test(names, csv_and_target_and_version_names_refused) {
  static const struct {
    const char *from, *to, *jpath, *code;
  } cases[] = {
      {"\"bronze\"", "\"a,b\"", "$.tenants[1].name", "E_SCN_RANGE"},
      {"\"bronze\"", "\"say \\\"hi\\\"\"", "$.tenants[1].name", "E_SCN_RANGE"},
      {"\"bronze\"", "\"caf\\u00e9\"", "$.tenants[1].name", "E_SCN_RANGE"},
      {"\"qkv\"", "\"q kv\"", "$.model.targets[0].name", "E_SCN_RANGE"},
      {"\"zipf_s\": 0.6", "\"zipf_s\": 0.6, \"compression\": {\"method\": "
                         "\"jd_diag\", \"rank\": 8, \"clusters\": 2, "
                         "\"version\": \"v'1\"}",
       "$.adapters.compression.version", "E_CMP_TYPE"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char path[400];
    snprintf(path, sizeof path, "%s/s.json", tmpdir);
    scenario_with(path, cases[i].from, cases[i].to);
    lsim_scenario *sc = malloc(sizeof *sc);
    lsim_errbuf eb = LSIM_ERRBUF_INIT;
    lsim_err rc = lsim_scenario_load(sc, path, &eb);
    free(sc);
    cr_assert_str_eq(lsim_err_name(rc), cases[i].code, "case %zu: %s", i,
                     eb.msg);
    cr_assert(strstr(eb.msg, cases[i].jpath), "case %zu: %s", i, eb.msg);
    cr_assert(strstr(eb.msg, "A-Za-z0-9_.-"), "case %zu: %s", i, eb.msg);
  }
}

Test(names, every_shipped_scenario_still_loads) {
  static const char *const dirs[] = {LSIM_TEST_DIR "/../scenarios",
                                     LSIM_TEST_DIR "/../scenarios/campaigns",
                                     FIX};
  int loaded = 0;
  for (int d = 0; d < 3; d++) {
    DIR *dir = opendir(dirs[d]);
    cr_assert_not_null(dir);
    struct dirent *e;
    while ((e = readdir(dir))) {
      size_t n = strlen(e->d_name);
      if (n < 6 || strcmp(e->d_name + n - 5, ".json") != 0)
        continue;
      char path[1024];
      snprintf(path, sizeof path, "%s/%s", dirs[d], e->d_name);
      lsim_scenario *sc = malloc(sizeof *sc);
      lsim_errbuf eb = LSIM_ERRBUF_INIT;
      lsim_err rc = lsim_scenario_load(sc, path, &eb);
      free(sc);
      /* other failures are the fixture's point (bad_trace, ...): only a
      ** name refusal would be this change breaking a shipped file */
      cr_assert(!rc || !strstr(eb.msg, "A-Za-z0-9_.-"), "%s: %s", path,
                eb.msg);
      loaded += rc == 0;
    }
    closedir(dir);
  }
  cr_assert_geq(loaded, 20);
}

/* ---- the gnuplot script cannot run a command ------------------------------ */

/* A replay of tiny.json into tmpdir/run.db (plots off), then its database
** open read-only and its scenario loaded into *sc. */
static sqlite3 *replayed(lsim_scenario *sc) {
  cr_assert_eq(lorasim("replay " FIX "/tiny.json --db run.db --no-plots "
                       "--quiet"),
               0, "%s", out);
  char path[400];
  snprintf(path, sizeof path, "%s/run.db", tmpdir);
  sqlite3 *db = NULL;
  cr_assert_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL),
               SQLITE_OK);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_scenario_load(sc, FIX "/tiny.json", &eb), 0, "%s",
               eb.msg);
  return db;
}

Test(names, hostile_names_from_a_library_caller_do_not_run_in_gnuplot) {
  lsim_scenario *sc = malloc(sizeof *sc);
  sqlite3 *db = replayed(sc);
  char marker[400], marker2[400], base[400];
  snprintf(marker, sizeof marker, "%s/pwned", tmpdir);
  snprintf(marker2, sizeof marker2, "%s/pwned2", tmpdir);
  /* names that bypass validation: the exploit, and a title expression */
  char name[600];
  snprintf(name, sizeof name, EXPLOIT_FMT, marker);
  cr_assert_lt(strlen(name), sizeof sc->tenants[0].name);
  memcpy(sc->tenants[0].name, name, strlen(name) + 1);
  snprintf(name, sizeof name, "n'.system('touch %s').'", marker2);
  cr_assert_lt(strlen(name), sizeof sc->name);
  memcpy(sc->name, name, strlen(name) + 1);
  snprintf(base, sizeof base, "%s/run", tmpdir);
  lsim_summary s;
  memset(&s, 0, sizeof s);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_report_plots(db, base, sc, NULL, &s, &eb), 0, "%s", eb.msg);
  sqlite3_close(db);
  /* the .dat comment stays one line */
  char path[500];
  snprintf(path, sizeof path, "%s-ttft.dat", base);
  cr_assert(strstr(slurp(path), "# tenant x'\\nsystem 'touch "), "%s",
            slurp(path));
  if (have_gnuplot()) {
    cr_assert_str_eq(s.plot_note, "", "%s", s.plot_note);
    cr_assert_gt(file_size(s.plots[0]), 0);
    cr_assert_gt(file_size(s.plots[1]), 0);
    snprintf(path, sizeof path, "%s-plots.gp", base);
    const char *gp = slurp(path);
    cr_assert(strstr(gp, "title 'x''?system ''touch "), "%s", gp);
    cr_assert_null(strstr(gp, "\nsystem"), "%s", gp);
  }
  cr_assert(!exists(marker), "gnuplot ran the tenant name's command");
  cr_assert(!exists(marker2), "gnuplot ran the scenario name's command");
  free(sc);
}

Test(names, a_data_path_starting_with_lt_is_a_file_not_a_command) {
  lsim_scenario *sc = malloc(sizeof *sc);
  sqlite3 *db = replayed(sc);
  /* gnuplot reads `plot '<cmd'` from a shell: a relative base starting
  ** with '<' made the data file name a command */
  cr_assert_eq(chdir(tmpdir), 0);
  lsim_summary s;
  memset(&s, 0, sizeof s);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_report_plots(db, "<touch pwned;x", sc, NULL, &s, &eb), 0, "%s",
               eb.msg);
  sqlite3_close(db);
  cr_assert(exists("<touch pwned;x-ttft.dat"));
  if (have_gnuplot()) {
    cr_assert_str_eq(s.plot_note, "", "%s", s.plot_note);
    cr_assert_gt(file_size("<touch pwned;x-ttft.png"), 0);
  }
  cr_assert(!exists("pwned"), "gnuplot ran the data path as a command");
  free(sc);
}

Test(names, replay_db_path_with_quotes_plots_without_running_anything) {
  /* the shell and gnuplot syntax of a path are plain bytes now: no
  ** shell parses the command, and the script quotes the path */
  cr_assert_eq(lorasim("replay " FIX "/tiny.json --db "
                       "\"a'.system('touch pwned').'\\`touch pwned2\\`.db\""),
               0, "%s", out);
  char png[600];
  snprintf(png, sizeof png, "%s/a'.system('touch pwned').'`touch pwned2`-ttft.png",
           tmpdir);
  if (have_gnuplot()) {
    cr_assert_gt(file_size(png), 0, "%s", out);
    cr_assert(strstr(out, "  plot        a'.system('touch pwned')"), "%s",
              out);
  }
  char m1[400], m2[400];
  snprintf(m1, sizeof m1, "%s/pwned", tmpdir);
  snprintf(m2, sizeof m2, "%s/pwned2", tmpdir);
  cr_assert(!exists(m1) && !exists(m2), "%s", out);
}

Test(names, replay_db_path_with_a_newline_is_shown_escaped_and_not_plotted) {
  cr_assert_eq(lorasim("replay " FIX "/tiny.json --db \"$(printf 'a\\nb.db')\""),
               0, "%s", out);
  cr_assert(strstr(out, "  database    a\\nb.db\n"), "%s", out);
  cr_assert(strstr(out, "skipped: the output path has control characters"),
            "%s", out);
}

/* ---- CSV through a path validation does not cover ------------------------ */

Test(names, evidence_sidecar_reads_a_quoted_header_as_one_record) {
  char csv[400], ev[400];
  snprintf(csv, sizeof csv, "%s/c.csv", tmpdir);
  snprintf(ev, sizeof ev, "%s/e.csv", tmpdir);
  FILE *f = fopen(csv, "w");
  cr_assert_not_null(f);
  fputs("scheduler,evict,prefetch,seed,completed,\"service_a,b\","
        "\"service_q\"\"t\"\nfcfs,lru,none,1,2,3,4\n",
        f);
  cr_assert_eq(fclose(f), 0);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_claims_csv_sidecar(csv, ev, "model", 0, &eb), 0, "%s",
               eb.msg);
  cr_assert_str_eq(slurp(ev), "column,class,source,time\n"
                              "completed,exact,log,0\n"
                              "\"service_a,b\",exact,log,0\n"
                              "\"service_q\"\"t\",exact,log,0\n");
}

Test(names, compare_csv_header_is_one_record_with_a_field_per_column) {
  cr_assert_eq(lorasim("compare " FIX "/tiny.json --schedulers fcfs,deficit_aging "
                       "--out cmp --no-plots"),
               0, "%s", out);
  char path[400];
  snprintf(path, sizeof path, "%s/cmp/compare.csv", tmpdir);
  const char *text = slurp(path);
  int fields[3] = {0}, rec = 0;
  char field[256];
  for (const char *p = text; *p && rec < 3; rec++) {
    int got;
    while ((got = lsim_csv_next(&p, field, sizeof field)) == 1)
      fields[rec]++;
    cr_assert_eq(got, 0);
    p += strspn(p, "\r\n");
  }
  cr_assert_eq(rec, 3);
  cr_assert_eq(fields[0], fields[1]); /* a tenant row */
  cr_assert_eq(fields[0], fields[2]);
  cr_assert(strstr(text, "arm,scheduler,evict,prefetch,seed,tenant,name,"),
            "%s", text);
  cr_assert(strstr(text, ",0,gold,"), "%s", text);
}

/* ---- gnuplot without a shell ---------------------------------------------- */

Test(names, gnuplot_runner_reports_failure_and_absence) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  if (have_gnuplot()) {
    char gp[400];
    snprintf(gp, sizeof gp, "%s/bad script's.gp", tmpdir);
    FILE *f = fopen(gp, "w");
    cr_assert_not_null(f);
    fputs("this is not gnuplot\n", f);
    cr_assert_eq(fclose(f), 0);
    cr_assert_eq(lsim_gnuplot_run(gp, &eb), LSIM_E_IO);
    cr_assert(strstr(eb.msg, "exited with status"), "%s", eb.msg);
    f = fopen(gp, "w");
    fputs("print 1\n", f);
    cr_assert_eq(fclose(f), 0);
    cr_assert_eq(lsim_gnuplot_run(gp, &eb), 0, "%s", eb.msg);
  }
  char saved[4096];
  snprintf(saved, sizeof saved, "%s", getenv("PATH") ? getenv("PATH") : "");
  cr_assert_eq(setenv("PATH", tmpdir, 1), 0);
  int found = lsim_gnuplot_available();
  lsim_err rc = lsim_gnuplot_run("x.gp", &eb);
  cr_assert_eq(setenv("PATH", saved, 1), 0); /* rm_tmp needs rm */
  cr_assert_eq(found, 0);
  cr_assert_eq(rc, LSIM_E_IO);
  cr_assert(strstr(eb.msg, "not found"), "%s", eb.msg);
}

Test(names, no_shell_is_started_anywhere_in_sim) {
  static const char *const banned[] = {"system(", "popen("};
  DIR *dir = opendir(SIM_DIR);
  cr_assert_not_null(dir);
  struct dirent *e;
  int files = 0;
  while ((e = readdir(dir))) {
    size_t n = strlen(e->d_name);
    if (n < 3 || strcmp(e->d_name + n - 2, ".c") != 0)
      continue;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", SIM_DIR, e->d_name);
    const char *text = slurp(path);
    files++;
    for (int b = 0; b < 2; b++)
      for (const char *p = text; (p = strstr(p, banned[b])); p++) {
        char before = p == text ? ' ' : p[-1];
        int ident = (before >= 'a' && before <= 'z') ||
                    (before >= 'A' && before <= 'Z') ||
                    (before >= '0' && before <= '9') || before == '_';
        cr_assert(ident, "%s calls %s", e->d_name, banned[b]);
      }
  }
  closedir(dir);
  cr_assert_geq(files, 10);
}
