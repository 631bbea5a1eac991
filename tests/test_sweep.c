/*
** test_sweep.c: `--set` on replay and `lorasim sweep` (docs/SWEEP.md),
** through the real binary on the quickstart scenario cut to 40 requests.
**
**  - a --set value is refused with the code and the JSON path the same
**    value has in the file; the edits are recorded and a resume applies
**    them again;
**  - grid errors name the grid file's path; cells are enumerated in the
**    documented order (product and zip);
**  - a cell's rows are a lone replay's; -j 1 and -j 2 give the same cells
**    and the same merged files; --resume reruns only a missing cell; one
**    --cell per cell and `sweep merge` give -j 1's merged files;
**  - the merged mean and 95% interval are checked against a computation
**    from the cell databases here, and per-tenant figures are read from a
**    tenant_summary table when a database has one.
*/
#define LSIM_TMP_PREFIX "/tmp/lsim-sweep-"
#include "cli_harness.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <sqlite3.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../sim/sweep.h"

#define QS LSIM_TEST_DIR "/../scenarios/quickstart.json"
#define SMALL "--set '$.trace.generator.requests=40'"

static void setup(void) {
  mk_tmp();
  char cmd[600];
  snprintf(cmd, sizeof cmd, "cp '%s' '%s/base.json'", QS, tmpdir);
  cr_assert_eq(system(cmd), 0);
}

static void write_file(const char *name, const char *text) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", tmpdir, name);
  FILE *f = fopen(p, "w");
  cr_assert_not_null(f);
  fputs(text, f);
  cr_assert_eq(fclose(f), 0);
}

static char *read_file(const char *name) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", tmpdir, name);
  FILE *f = fopen(p, "rb");
  cr_assert_not_null(f, "cannot open %s", p);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)n + 1);
  cr_assert_not_null(b);
  cr_assert_eq(fread(b, 1, (size_t)n, f), (size_t)n);
  b[n] = 0;
  fclose(f);
  return b;
}

/* Every row of sql over tmpdir/db as text, one line per row. */
static char *rows(const char *db, const char *sql) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", tmpdir, db);
  sqlite3 *h = NULL;
  sqlite3_stmt *q = NULL;
  cr_assert_eq(sqlite3_open_v2(p, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK,
               "%s", p);
  cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &q, NULL), SQLITE_OK, "%s: %s",
               sql, sqlite3_errmsg(h));
  size_t cap = 4096, n = 0;
  char *b = malloc(cap);
  cr_assert_not_null(b);
  b[0] = 0;
  while (sqlite3_step(q) == SQLITE_ROW) {
    for (int i = 0; i < sqlite3_column_count(q); i++) {
      const char *t = (const char *)sqlite3_column_text(q, i);
      size_t need = n + (t ? strlen(t) : 4) + 3;
      if (need > cap) {
        while (need > cap)
          cap *= 2;
        b = realloc(b, cap);
        cr_assert_not_null(b);
      }
      n += (size_t)sprintf(b + n, "%s%c", t ? t : "NULL",
                           i + 1 < sqlite3_column_count(q) ? '|' : '\n');
    }
  }
  sqlite3_finalize(q);
  sqlite3_close(h);
  return b;
}

/* The rows that must be equal between two runs of one cell. */
static const char *const row_queries[] = {
    "SELECT * FROM events ORDER BY seq",
    "SELECT * FROM requests ORDER BY request",
    "SELECT key, value FROM runs_summary ORDER BY key",
    "SELECT name, value FROM run_options ORDER BY rowid",
    "SELECT role, path, sha256 FROM run_inputs ORDER BY rowid",
    NULL};

static void same_rows(const char *a, const char *b) {
  for (int i = 0; row_queries[i]; i++) {
    char *x = rows(a, row_queries[i]), *y = rows(b, row_queries[i]);
    cr_assert(strlen(x) > 0, "%s: no rows for %s", a, row_queries[i]);
    cr_assert_str_eq(x, y, "%s and %s differ in %s", a, b, row_queries[i]);
    free(x);
    free(y);
  }
}

/* "E_CODE: FILE: $.path: message" -> "E_CODE: $.path: message". */
static void strip_file(const char *line, char *outb, size_t n) {
  const char *e = strstr(line, "error: ");
  cr_assert_not_null(e, "no error in: %s", line);
  e += 7;
  const char *c1 = strstr(e, ": ");
  cr_assert_not_null(c1);
  const char *c2 = strstr(c1 + 2, ": ");
  cr_assert_not_null(c2);
  snprintf(outb, n, "%.*s%s", (int)(c1 - e), e, c2);
  char *nl = strchr(outb, '\n');
  if (nl)
    *nl = 0;
}

TestSuite(sweep, .init = setup, .fini = rm_tmp);

/* Each case: a JSON path (as cJSON steps), the value, and the --set. */
Test(sweep, set_errors_match_the_file) {
  static const struct {
    const char *sect, *key; /* sect NULL: top level */
    int idx;                /* >= 0: $.sect[idx].key */
    const char *value;      /* JSON */
  } cases[] = {
      {"workers", "pool_pages", -1, "-5"},
      {"workers", "bogus", -1, "1"},
      {"workers", "pool_pages", -1, "\"x\""},
      {"tenants", "name", 1, "\"a b\""},
      {"policies", "scheduler", -1, "\"nosuch\""},
      {NULL, "seed", -1, "1.5"},
      {"workers", "count", -1, "0"},
  };
  char *text = read_file("base.json");
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    cJSON *root = cJSON_Parse(text), *v = cJSON_Parse(cases[c].value);
    cr_assert_not_null(root);
    cr_assert_not_null(v);
    cJSON *obj = root;
    char path[200];
    if (cases[c].sect) {
      obj = cJSON_GetObjectItemCaseSensitive(root, cases[c].sect);
      if (cases[c].idx >= 0) {
        obj = cJSON_GetArrayItem(obj, cases[c].idx);
        snprintf(path, sizeof path, "$.%s[%d].%s", cases[c].sect,
                 cases[c].idx, cases[c].key);
      } else {
        snprintf(path, sizeof path, "$.%s.%s", cases[c].sect, cases[c].key);
      }
    } else {
      snprintf(path, sizeof path, "$.%s", cases[c].key);
    }
    cr_assert_not_null(obj);
    if (cJSON_GetObjectItemCaseSensitive(obj, cases[c].key))
      cJSON_ReplaceItemInObjectCaseSensitive(obj, cases[c].key, v);
    else
      cJSON_AddItemToObject(obj, cases[c].key, v);
    char *edited = cJSON_Print(root);
    write_file("edited.json", edited);
    free(edited);
    cJSON_Delete(root);

    char args[600], a[700], b[700];
    cr_assert_eq(lorasim("replay edited.json --db f.db --quiet --no-plots"),
                 2, "file case %zu: %s", c, out);
    strip_file(out, a, sizeof a);
    snprintf(args, sizeof args,
             "replay base.json --set '%s=%s' --db s.db --quiet --no-plots",
             path, cases[c].value);
    cr_assert_eq(lorasim(args), 2, "--set case %zu: %s", c, out);
    strip_file(out, b, sizeof b);
    cr_assert_str_eq(a, b, "case %zu (%s)", c, path);
    cr_assert(strstr(b, path), "case %zu: %s does not name %s", c, b, path);
    /* nothing written for refused input */
    struct stat st;
    char p[400];
    snprintf(p, sizeof p, "%s/s.db", tmpdir);
    cr_assert_neq(stat(p, &st), 0);
  }
  free(text);
  /* a path that cannot be walked, and a value that is not JSON */
  cr_assert_eq(lorasim("replay base.json --set '$.seed.x=1' --db s.db"), 2);
  cr_assert(strstr(out, "E_USAGE") && strstr(out, "$.seed is a number"), "%s",
            out);
  cr_assert_eq(lorasim("replay base.json --set '$.tenants[7].name=1' "
                       "--db s.db"),
               2);
  cr_assert(strstr(out, "$.tenants has 2 elements"), "%s", out);
  cr_assert_eq(lorasim("replay base.json --set '$.seed=1x' --db s.db"), 2);
  cr_assert(strstr(out, "not JSON"), "%s", out);
}

Test(sweep, set_bare_word_and_append) {
  /* a bare word is a string; an index one past the end appends */
  cr_assert_eq(lorasim("replay base.json " SMALL
                       " --set '$.policies.scheduler=vtc'"
                       " --set '$.tenants[2]={\"name\":\"third\","
                       "\"traffic_weight\":1}' --db a.db --quiet --no-plots"),
               0, "%s", out);
  char *r = rows("a.db", "SELECT scheduler FROM runs");
  cr_assert_str_eq(r, "vtc\n");
  free(r);
  r = rows("a.db", "SELECT count(DISTINCT tenant) FROM requests");
  cr_assert_str_eq(r, "3\n");
  free(r);
}

Test(sweep, set_recorded_and_resume_applies_it) {
  cr_assert_eq(lorasim("replay base.json " SMALL
                       " --set '$.workers.pool_pages=512' --db a.db --quiet "
                       "--no-plots"),
               0, "%s", out);
  char *o = rows("a.db", "SELECT name, value FROM run_options ORDER BY rowid");
  cr_assert_str_eq(o, "set.1|$.trace.generator.requests=40\n"
                      "set.2|$.workers.pool_pages=512\nno-plots|1\n");
  free(o);
  /* the same database, made unfinished: the resume must rerun with the
  ** edits (without them it would replay 400 requests on 768 pages) */
  char cmd[600];
  snprintf(cmd, sizeof cmd, "cp '%s/a.db' '%s/b.db'", tmpdir, tmpdir);
  cr_assert_eq(system(cmd), 0);
  snprintf(cmd, sizeof cmd, "%s/b.db", tmpdir);
  sqlite3 *h;
  cr_assert_eq(sqlite3_open(cmd, &h), SQLITE_OK);
  cr_assert_eq(sqlite3_exec(h,
                            "UPDATE runs SET status='running', events=NULL;"
                            "DELETE FROM runs_summary;",
                            NULL, NULL, NULL),
               SQLITE_OK);
  sqlite3_close(h);
  cr_assert_eq(lorasim("replay --resume b.db --quiet"), 0, "%s", out);
  same_rows("a.db", "b.db");
  char *n = rows("b.db", "SELECT count(*) FROM requests");
  cr_assert_str_eq(n, "40\n");
  free(n);
  /* --resume takes no edits of its own */
  cr_assert_eq(lorasim("replay --resume b.db --set '$.seed=1'"), 2);
}

static const char grid_text[] =
    "{\"name\": \"t\", \"base\": \"base.json\",\n"
    " \"axes\": [\n"
    "  {\"path\": \"$.policies.scheduler\", \"values\": [\"fcfs\", \"vtc\"]},\n"
    "  {\"path\": \"$.workers.pool_pages\", \"name\": \"pool\",\n"
    "   \"range\": {\"from\": 768, \"to\": 1000, \"step\": 256}}],\n"
    " \"seeds\": [7, 8]}\n";

Test(sweep, grid_errors_name_the_path) {
  static const struct {
    const char *grid, *code, *path;
  } cases[] = {
      {"{\"base\": \"base.json\", \"axes\": [], \"axez\": 1}",
       "E_SCN_UNKNOWN_KEY", "$.axez"},
      {"{\"base\": \"base.json\", \"axes\": [{\"values\": [1]}]}",
       "E_SCN_MISSING", "$.axes[0].path"},
      {"{\"base\": \"base.json\", \"axes\": [{\"path\": \"$.ns_per_tick\"}]}",
       "E_SCN_MISSING", "$.axes[0]"},
      {"{\"base\": \"base.json\", \"combine\": \"zip\", \"axes\": ["
       "{\"path\": \"$.ns_per_tick\", \"values\": [1, 2]},"
       "{\"path\": \"$.workers.count\", \"values\": [1]}]}",
       "E_SCN_CONFLICT", "$.axes[1]"},
      {"{\"base\": \"base.json\", \"axes\": [{\"path\": \"$.ns_per_tick\", "
       "\"range\": {\"from\": 1, \"to\": 5, \"step\": 0}}]}",
       "E_SCN_RANGE", "$.axes[0].range.step"},
      {"{\"base\": \"base.json\", \"axes\": [], \"seeds\": [1, 1]}",
       "E_SCN_DUP", "$.seeds[1]"},
      {"{\"base\": \"base.json\", \"axes\": [], \"seeds\": 0}", "E_SCN_RANGE",
       "$.seeds"},
      {"{\"base\": 3, \"axes\": []}", "E_SCN_TYPE", "$.base"},
      {"{\"base\": \"base.json\", \"axes\": [{\"path\": \"$.ns_per_tick\", "
       "\"name\": \"metric\", \"values\": [1]}]}",
       "E_SCN_CONFLICT", "$.axes[0].name"},
      {"{\"base\": \"base.json\", \"axes\": [], \"base\": \"x\"}", "E_SCN_DUP",
       "$.base"},
      /* a value the scenario refuses: the scenario's code and path */
      {"{\"base\": \"base.json\", \"axes\": [{\"path\": "
       "\"$.workers.pool_pages\", \"values\": [512, -1]}]}",
       "E_SCN_RANGE", "$.workers.pool_pages"},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    write_file("g.json", cases[c].grid);
    cr_assert_eq(lorasim("sweep g.json --list"), 2, "case %zu: %s", c, out);
    char want[200];
    snprintf(want, sizeof want, "%s: g.json", cases[c].code);
    cr_assert(strstr(out, want), "case %zu: %s", c, out);
    snprintf(want, sizeof want, "%s:", cases[c].path);
    cr_assert(strstr(out, want), "case %zu: no %s in %s", c, cases[c].path,
              out);
  }
  /* the failing combination is named */
  cr_assert(strstr(out, "cell 0001") && strstr(out, "pool_pages=-1"), "%s",
            out);
  /* a --set of a path an axis sets */
  write_file("g.json", grid_text);
  cr_assert_eq(lorasim("sweep g.json --list --set '$.workers.pool_pages=1'"),
               2);
  cr_assert(strstr(out, "E_USAGE"), "%s", out);
}

/* "cell NNNN seed S a=x b=y ..." lines of --list. */
static int list_cells(char lines[][128], int max) {
  int n = 0;
  for (char *p = out, *nl; *p && n < max; p = nl + 1) {
    nl = strchr(p, '\n');
    if (!nl)
      break;
    if (strncmp(p, "cell ", 5) == 0) {
      char *st = strstr(p, " todo ");
      if (!st)
        st = strstr(p, " done ");
      cr_assert_not_null(st);
      snprintf(lines[n++], 128, "%.*s", (int)(st - p), p);
    }
  }
  return n;
}

Test(sweep, cells_in_documented_order) {
  write_file("g.json",
             "{\"base\": \"base.json\", \"axes\": ["
             "{\"path\": \"$.workers.count\", \"name\": \"a\", "
             "\"values\": [1, 2]},"
             "{\"path\": \"$.policies.scheduler\", \"name\": \"b\", "
             "\"values\": [\"fcfs\", \"vtc\", \"deficit_aging\"]}],"
             " \"seeds\": [5, 9]}");
  cr_assert_eq(lorasim("sweep g.json --list"), 0, "%s", out);
  char got[64][128];
  int n = list_cells(got, 64);
  cr_assert_eq(n, 12, "%s", out);
  const char *bv[3] = {"\"fcfs\"", "\"vtc\"", "\"deficit_aging\""};
  int seeds[2] = {5, 9};
  for (int a = 0, cell = 0; a < 2; a++) /* first axis outermost */
    for (int b = 0; b < 3; b++)
      for (int s = 0; s < 2; s++, cell++) { /* the seed fastest */
        char want[128];
        snprintf(want, sizeof want, "cell %04d seed %d a=%d b=%s", cell,
                 seeds[s], a + 1, bv[b]);
        cr_assert_str_eq(got[cell], want);
      }
  /* zip: value k of every axis; a seed count counts from the scenario's */
  write_file("g.json",
             "{\"base\": \"base.json\", \"combine\": \"zip\", \"axes\": ["
             "{\"path\": \"$.workers.count\", \"name\": \"a\", "
             "\"values\": [1, 2, 3]},"
             "{\"path\": \"$.workers.pool_pages\", \"name\": \"b\", "
             "\"range\": {\"from\": 300, \"to\": 500, \"step\": 100}}],"
             " \"seeds\": 2}");
  cr_assert_eq(lorasim("sweep g.json --list"), 0, "%s", out);
  n = list_cells(got, 64);
  cr_assert_eq(n, 6, "%s", out);
  for (int k = 0; k < 3; k++)
    for (int s = 0; s < 2; s++) {
      char want[128];
      snprintf(want, sizeof want, "cell %04d seed %d a=%d b=%d", 2 * k + s,
               42 + s, k + 1, 300 + 100 * k);
      cr_assert_str_eq(got[2 * k + s], want);
    }
}

/* The cells of grid_text: 2 schedulers x 1 pool x 2 seeds. */
#define NCELLS 4

static void cell_name(const char *dir, int c, char *p, size_t n) {
  snprintf(p, n, "%s/cells/%04d.db", dir, c);
}

Test(sweep, cell_is_a_lone_replay_and_jobs_do_not_matter) {
  write_file("g.json", grid_text);
  cr_assert_eq(lorasim("sweep g.json " SMALL " --out j1 -j 1 --quiet"), 0,
               "%s", out);
  cr_assert_eq(lorasim("sweep g.json " SMALL " --out j2 -j 2"), 0, "%s", out);
  /* one progress line per cell */
  int lines = 0;
  for (const char *p = out; (p = strstr(p, "sweep: ")); p++)
    lines += strstr(p, " cells, ") != NULL && strstr(p, " cells, ") <
                                                  strchr(p, '\n');
  cr_assert_eq(lines, NCELLS, "%s", out);
  cr_assert(strstr(out, "sweep: 4/4 cells, 0 failed"), "%s", out);
  for (int c = 0; c < NCELLS; c++) {
    char a[64], b[64];
    cell_name("j1", c, a, sizeof a);
    cell_name("j2", c, b, sizeof b);
    same_rows(a, b);
  }
  char *x = read_file("j1/sweep.csv"), *y = read_file("j2/sweep.csv");
  cr_assert_str_eq(x, y);
  free(x);
  free(y);
  x = read_file("j1/sweep-stats.csv");
  y = read_file("j2/sweep-stats.csv");
  cr_assert_str_eq(x, y);
  free(x);
  free(y);
  /* cell 3: vtc and 768 pages (combination 1), seed 8 */
  cr_assert_eq(lorasim("replay base.json --seed 8"
                       " --set '$.trace.generator.requests=40'"
                       " --set '$.policies.scheduler=\"vtc\"'"
                       " --set '$.workers.pool_pages=768'"
                       " --no-plots --db lone.db --quiet"),
               0, "%s", out);
  same_rows("lone.db", "j1/cells/0003.db");
  char *r = rows("j1/cells/0003.db", "SELECT scheduler, seed FROM runs");
  cr_assert_str_eq(r, "vtc|8\n");
  free(r);
}

static void stamp(const char *dir, int c, struct stat *st) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s/cells/%04d.db", tmpdir, dir, c);
  cr_assert_eq(stat(p, st), 0, "%s", p);
}

Test(sweep, resume_reruns_only_the_missing_cell) {
  write_file("g.json", grid_text);
  cr_assert_eq(lorasim("sweep g.json " SMALL " --out o -j 2 --quiet"), 0,
               "%s", out);
  char *before = read_file("o/sweep.csv");
  struct stat st0[NCELLS];
  for (int c = 0; c < NCELLS; c++)
    stamp("o", c, &st0[c]);
  char p[512];
  snprintf(p, sizeof p, "%s/o/cells/0001.db", tmpdir);
  cr_assert_eq(unlink(p), 0);
  /* a cell made unfinished is not done either */
  snprintf(p, sizeof p, "%s/o/cells/0002.db", tmpdir);
  sqlite3 *h;
  cr_assert_eq(sqlite3_open(p, &h), SQLITE_OK);
  cr_assert_eq(sqlite3_exec(h, "UPDATE runs SET status='running'", NULL, NULL,
                            NULL),
               SQLITE_OK);
  sqlite3_close(h);
  stamp("o", 2, &st0[2]);
  cr_assert_eq(lorasim("sweep g.json --list --out o " SMALL), 0);
  cr_assert(strstr(out, "cell 0001 seed 8 scheduler=\"fcfs\" pool=768 todo"),
            "%s", out);
  cr_assert(strstr(out, "cell 0002") && strstr(strstr(out, "cell 0002"),
                                               "todo"),
            "%s", out);
  cr_assert_eq(lorasim("sweep g.json " SMALL " --out o -j 2 --resume"), 0,
               "%s", out);
  cr_assert(strstr(out, "2 done before"), "%s", out);
  for (int c = 0; c < NCELLS; c++) {
    struct stat st;
    stamp("o", c, &st);
    int same = st.st_ino == st0[c].st_ino &&
               st.st_mtim.tv_sec == st0[c].st_mtim.tv_sec &&
               st.st_mtim.tv_nsec == st0[c].st_mtim.tv_nsec;
    if (c == 2)
      cr_assert(!same, "cell %d was not rerun", c);
    else if (c != 1) /* 1 was deleted: stamp() checked it is back */
      cr_assert(same, "cell %d was rerun", c);
  }
  char *after = read_file("o/sweep.csv");
  cr_assert_str_eq(before, after);
  free(before);
  free(after);
  /* another --set is another grid of cells: nothing is done */
  cr_assert_eq(lorasim("sweep g.json --list --out o "
                       "--set '$.trace.generator.requests=41'"),
               0);
  cr_assert_null(strstr(out, " done "), "%s", out);
}

Test(sweep, cells_one_by_one_then_merge) {
  write_file("g.json", grid_text);
  cr_assert_eq(lorasim("sweep g.json " SMALL " --out j1 -j 1 --quiet"), 0,
               "%s", out);
  for (int c = 0; c < NCELLS; c++) {
    char args[200];
    if (c == 2)
      continue; /* first merged without it */
    snprintf(args, sizeof args, "sweep g.json " SMALL " --out arr --cell %d",
             c);
    cr_assert_eq(lorasim(args), 0, "cell %d: %s", c, out);
  }
  cr_assert_eq(lorasim("sweep merge arr"), 1, "%s", out);
  cr_assert(strstr(out, "E_SWEEP_MISSING") && strstr(out, "0002"), "%s", out);
  struct stat st;
  char p[512];
  snprintf(p, sizeof p, "%s/arr/sweep.csv", tmpdir);
  cr_assert_neq(stat(p, &st), 0, "a refused merge wrote sweep.csv");
  cr_assert_eq(lorasim("sweep merge arr --allow-partial"), 0, "%s", out);
  char *part = rows("arr/sweep.db", "SELECT count(*) FROM sweep_cells "
                                    "WHERE done=0");
  cr_assert_str_eq(part, "1\n");
  free(part);
  cr_assert_eq(lorasim("sweep g.json " SMALL " --out arr --cell 2"), 0, "%s",
               out);
  cr_assert_eq(lorasim("sweep merge arr"), 0, "%s", out);
  const char *files[] = {"sweep.csv", "sweep-stats.csv"};
  for (int i = 0; i < 2; i++) {
    char a[64], b[64];
    snprintf(a, sizeof a, "j1/%s", files[i]);
    snprintf(b, sizeof b, "arr/%s", files[i]);
    char *x = read_file(a), *y = read_file(b);
    cr_assert_str_eq(x, y, "%s", files[i]);
    free(x);
    free(y);
  }
  /* --cell out of range */
  cr_assert_eq(lorasim("sweep g.json --out arr --cell 4"), 2);
  cr_assert_eq(lorasim("sweep merge nosuchdir"), 2);
}

/* The mean and the 95% interval of one figure over the seeds, computed
** here from the cell databases. */
Test(sweep, stats_match_a_direct_computation) {
  write_file("g.json", grid_text);
  cr_assert_eq(lorasim("sweep g.json " SMALL " --out o --quiet"), 0, "%s",
               out);
  /* t(0.975, 1) and t(0.975, 2) in closed form: the Cauchy quantile, and
  ** F(t) = 1/2 + t / (2 sqrt(2 + t^2)) */
  double t1 = tan(0.475 * 3.14159265358979323846);
  cr_assert_float_eq(lsim_sweep_t95(1), t1, 1e-9);
  cr_assert_float_eq(lsim_sweep_t95(2), sqrt(2 * 0.9025 / 0.0975), 1e-9);
  cr_assert(lsim_sweep_t95(100000) > 1.959 && lsim_sweep_t95(100000) < 1.961);
  const char *metrics[] = {"ttft_p50_ms", "requests_completed",
                           "adapter_loads"};
  for (int k = 0; k < 2; k++)
    for (int m = 0; m < 3; m++) {
      double x[2], sum = 0;
      for (int s = 0; s < 2; s++) {
        char db[64], sql[200];
        cell_name("o", 2 * k + s, db, sizeof db);
        snprintf(sql, sizeof sql,
                 "SELECT value FROM runs_summary WHERE key='%s'", metrics[m]);
        char *v = rows(db, sql);
        x[s] = strtod(v, NULL);
        free(v);
        sum += x[s];
      }
      double mean = sum / 2, ss = 0;
      for (int s = 0; s < 2; s++)
        ss += (x[s] - mean) * (x[s] - mean);
      double sd = sqrt(ss / 1), half = t1 * sd / sqrt(2.0);
      char sql[300];
      snprintf(sql, sizeof sql,
               "SELECT n, mean, sd, ci95_half, ci95_lo, ci95_hi FROM "
               "sweep_stats WHERE combo=%d AND tenant IS NULL AND "
               "metric='%s'",
               k, metrics[m]);
      char *r = rows("o/sweep.db", sql);
      int n;
      double got[5];
      cr_assert_eq(sscanf(r, "%d|%lf|%lf|%lf|%lf|%lf", &n, &got[0], &got[1],
                          &got[2], &got[3], &got[4]),
                   6, "%s", r);
      free(r);
      cr_assert_eq(n, 2);
      double want[5] = {mean, sd, half, mean - half, mean + half};
      for (int i = 0; i < 5; i++)
        cr_assert(fabs(got[i] - want[i]) <= 1e-9 * (1 + fabs(want[i])),
                  "combo %d %s column %d: %.17g vs %.17g", k, metrics[m], i,
                  got[i], want[i]);
    }
  /* the CSV holds the same numbers as the database */
  char *csv = read_file("o/sweep-stats.csv");
  cr_assert(strncmp(csv, "combo,scheduler,pool,tenant,tenant_name,metric,n,"
                         "mean,sd,ci95_half,ci95_lo,ci95_hi\n",
                    80) == 0,
            "%.200s", csv);
  free(csv);
  /* one seed: no interval */
  write_file("g1.json", "{\"base\": \"base.json\", \"axes\": []}");
  cr_assert_eq(lorasim("sweep g1.json " SMALL " --out o1 --quiet"), 0, "%s",
               out);
  char *r = rows("o1/sweep.db", "SELECT count(*), count(sd), count(ci95_half)"
                                " FROM sweep_stats");
  int all, sd, ci;
  cr_assert_eq(sscanf(r, "%d|%d|%d", &all, &sd, &ci), 3);
  cr_assert_gt(all, 10);
  cr_assert_eq(sd + ci, 0, "%s", r);
  free(r);
}

/* A database with a tenant_summary table (issue 21) gives one row per
** tenant and figure; its all-tenants row is the run's. */
Test(sweep, tenant_summary_read_generically) {
  write_file("g.json",
             "{\"base\": \"base.json\", \"axes\": [], \"seeds\": [1, 2]}");
  cr_assert_eq(lorasim("sweep g.json " SMALL " --out o --quiet"), 0, "%s",
               out);
  for (int c = 0; c < 2; c++) {
    char p[512];
    snprintf(p, sizeof p, "%s/o/cells/%04d.db", tmpdir, c);
    sqlite3 *h;
    cr_assert_eq(sqlite3_open(p, &h), SQLITE_OK);
    char sql[600];
    snprintf(sql, sizeof sql,
             "CREATE TABLE tenant_summary(run_id INTEGER, tenant INTEGER, "
             "name TEXT, completed INTEGER, ttft_p99_ms REAL, note TEXT);"
             "INSERT INTO tenant_summary VALUES(1, NULL, 'all', %d, 9.5, 'x');"
             "INSERT INTO tenant_summary VALUES(1, 0, 'interactive', %d, "
             "%d.25, 'y');"
             "INSERT INTO tenant_summary VALUES(1, 1, 'batch', 3, NULL, 'z');",
             10 + c, 7 + c, 2 * c);
    cr_assert_eq(sqlite3_exec(h, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(h);
  }
  cr_assert_eq(lorasim("sweep merge o"), 0, "%s", out);
  char *r = rows("o/sweep.db",
                 "SELECT tenant, tenant_name, metric, value FROM sweep_rows "
                 "WHERE cell=1 AND (tenant IS NOT NULL OR metric IN "
                 "('completed', 'ttft_p99_ms', 'note')) ORDER BY rowid");
  cr_assert_str_eq(r, "NULL|all|completed|11\n"
                      "NULL|all|ttft_p99_ms|9.5\n"
                      "0|interactive|completed|8\n"
                      "0|interactive|ttft_p99_ms|2.25\n"
                      "1|batch|completed|3\n"
                      "1|batch|ttft_p99_ms|NULL\n");
  free(r);
  r = rows("o/sweep.db", "SELECT n, mean FROM sweep_stats WHERE tenant=0 AND "
                         "metric='ttft_p99_ms'");
  cr_assert_str_eq(r, "2|1.25\n");
  free(r);
  r = rows("o/sweep.db", "SELECT n, mean FROM sweep_stats WHERE tenant=1 AND "
                         "metric='ttft_p99_ms'");
  cr_assert_str_eq(r, "0|NULL\n");
  free(r);
}

Test(sweep, compare_takes_set_and_shows_progress) {
  cr_assert_eq(lorasim("compare base.json --schedulers fcfs,vtc " SMALL
                       " --out c --no-plots"),
               0, "%s", out);
  cr_assert(strstr(out, "compare: 1/2 arms (fcfs done)") &&
                strstr(out, "compare: 2/2 arms (vtc done)"),
            "%s", out);
  char *r = rows("c/vtc.db", "SELECT name, value FROM run_options");
  cr_assert_str_eq(r, "set.1|$.trace.generator.requests=40\n");
  free(r);
  r = rows("c/vtc.db", "SELECT count(*) FROM requests");
  cr_assert_str_eq(r, "40\n");
  free(r);
  cr_assert_eq(lorasim("compare base.json --schedulers fcfs --out c2 "
                       "--set '$.workers.pool_pages=0'"),
               2);
  cr_assert(strstr(out, "E_SCN_RANGE: base.json: $.workers.pool_pages:"), "%s",
            out);
  cr_assert_eq(lorasim("compare base.json --schedulers fcfs --out c3 --quiet "
                       SMALL " --no-plots"),
               0);
  cr_assert_null(strstr(out, "arms ("), "%s", out);
}

Test(sweep, inline_base_and_mpi_refused_without_mpi) {
  char *base = read_file("base.json");
  size_t n = strlen(base) + 200;
  char *g = malloc(n);
  snprintf(g, n,
           "{\"base\": %s, \"axes\": [{\"path\": \"$.workers.pool_pages\", "
           "\"values\": [512]}]}",
           base);
  write_file("g.json", g);
  free(g);
  free(base);
  cr_assert_eq(lorasim("sweep g.json " SMALL " --out o --quiet"), 0, "%s",
               out);
  char *r = rows("o/cells/0000.db",
                 "SELECT name, value FROM run_options ORDER BY rowid");
  cr_assert_str_eq(r, "scenario-member|base\nseed|42\n"
                      "set.1|$.trace.generator.requests=40\n"
                      "set.2|$.workers.pool_pages=512\nno-plots|1\n");
  free(r);
  /* the cell resumes like any run: the member and the edits again */
  char p[512];
  snprintf(p, sizeof p, "%s/o/cells/0000.db", tmpdir);
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "cp '%s' '%s/copy.db'", p, tmpdir);
  cr_assert_eq(system(cmd), 0);
  sqlite3 *h;
  snprintf(p, sizeof p, "%s/copy.db", tmpdir);
  cr_assert_eq(sqlite3_open(p, &h), SQLITE_OK);
  cr_assert_eq(sqlite3_exec(h, "UPDATE runs SET status='running'", NULL, NULL,
                            NULL),
               SQLITE_OK);
  sqlite3_close(h);
  cr_assert_eq(lorasim("replay --resume copy.db --quiet"), 0, "%s", out);
  same_rows("copy.db", "o/cells/0000.db");
#ifndef LSIM_HAVE_MPI
  cr_assert_eq(lorasim("sweep g.json --mpi --out o"), 2);
  cr_assert(strstr(out, "built without MPI"), "%s", out);
#endif
}
