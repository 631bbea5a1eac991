/* `lorasim exec` as outside checkers call it: exact output, failing closed. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmpdir[256];
static char out[1 << 16], err[1 << 14];

static void mk_tmp(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/lsim-exec-XXXXXX");
  cr_assert_not_null(mkdtemp(tmpdir));
}

static void rm_tmp(void) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  cr_assert_eq(system(cmd), 0);
}

static void slurp(const char *path, char *buf, size_t n) {
  FILE *f = fopen(path, "r");
  size_t k = f ? fread(buf, 1, n - 1, f) : 0;
  buf[k] = 0;
  if (f)
    fclose(f);
}

/* Run `lorasim exec ARGS`; stdout into out, stderr into err. */
static int exec(const char *args) {
  char cmd[2048], ef[400], of[400];
  snprintf(of, sizeof of, "%s/stdout", tmpdir);
  snprintf(ef, sizeof ef, "%s/stderr", tmpdir);
  snprintf(cmd, sizeof cmd, "cd '%s' && '%s' exec %s >'%s' 2>'%s'", tmpdir,
           LSIM_BIN, args, of, ef);
  int st = system(cmd);
  slurp(of, out, sizeof out);
  slurp(ef, err, sizeof err);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static cJSON *load_fixture(const char *name) {
  char p[512];
  static char buf[1 << 16];
  snprintf(p, sizeof p, "%s/fixtures/exec/%s", LSIM_TEST_DIR, name);
  slurp(p, buf, sizeof buf);
  cJSON *j = cJSON_Parse(buf);
  cr_assert_not_null(j, "fixture %s", name);
  return j;
}

static void write_json(const char *name, const cJSON *j) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", tmpdir, name);
  char *t = cJSON_Print(j);
  FILE *f = fopen(p, "w");
  cr_assert_not_null(f);
  fputs(t, f);
  fclose(f);
  free(t);
}

/* Compare a JSON value with the JSON text `want` exactly. */
static void expect(const cJSON *got, const char *want, const char *what) {
  cJSON *w = cJSON_Parse(want);
  cr_assert_not_null(w, "bad expectation for %s", what);
  char *g = got ? cJSON_PrintUnformatted(got) : strdup("(missing)");
  cr_assert(cJSON_Compare(got, w, 1), "%s: got %s, want %s", what, g, want);
  free(g);
  cJSON_Delete(w);
}

TestSuite(exec, .init = mk_tmp, .fini = rm_tmp);

Test(exec, spec_example_gives_the_documented_result_on_every_path) {
  char args[1024];
  const char *paths[] = {"all", "per_row", "grouped", "sgmv", "indexed",
                         "bucketed", "padded"};
  for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
    snprintf(args, sizeof args,
             "--in '%s/fixtures/exec/spec_example.json' --path %s",
             LSIM_TEST_DIR, paths[i]);
    cr_assert_eq(exec(args), 0, "path %s: %s", paths[i], err);
    cJSON *r = cJSON_Parse(out);
    cr_assert_not_null(r, "%s", out);
    const cJSON *plan = cJSON_GetObjectItem(r, "plan");
    expect(cJSON_GetObjectItem(plan, "packed_rows"),
           "[[\"req-a\",0],[\"req-a\",1],[\"req-c\",0]]", "packed_rows");
    expect(cJSON_GetObjectItem(plan, "prefill_indptr"), "[0,2]", "indptr");
    expect(cJSON_GetObjectItem(plan, "doff"), "2", "doff");
    expect(cJSON_GetObjectItem(plan, "segment_adapters"), "[\"a1\"]", "segs");
    expect(cJSON_GetObjectItem(plan, "segment_offsets"), "[0,2]", "offsets");
    expect(cJSON_GetObjectItem(plan, "sample_rows"),
           "{\"req-a\":1,\"req-c\":2}", "sample_rows");
    expect(cJSON_GetObjectItem(plan, "true_rank_rows"), "4", "true rank");
    expect(cJSON_GetObjectItem(plan, "padded_rank_rows"), "8", "padded rank");
    expect(cJSON_GetObjectItem(r, "delta"),
           "[[\"1\",\"0\",\"1\"],[\"1/2\",\"1/2\",\"1\"],[\"0\",\"0\",\"0\"]]",
           "delta");
    expect(cJSON_GetObjectItem(r, "y"),
           "[[\"3\",\"0\",\"2\"],[\"3/2\",\"3/2\",\"3\"],[\"0\",\"1\",\"1\"]]",
           "y");
    cJSON_Delete(r);
  }
}

Test(exec, mixed_five_request_plan_matches_the_article) {
  char args[1024];
  snprintf(args, sizeof args,
           "--in '%s/fixtures/exec/mixed_five.json' --out res.json",
           LSIM_TEST_DIR);
  cr_assert_eq(exec(args), 0, "%s", err);
  cr_assert_str_eq(out, "", "--out must keep stdout empty");
  char p[512];
  snprintf(p, sizeof p, "%s/res.json", tmpdir);
  slurp(p, out, sizeof out);
  cJSON *r = cJSON_Parse(out);
  cr_assert_not_null(r);
  const cJSON *plan = cJSON_GetObjectItem(r, "plan");
  expect(cJSON_GetObjectItem(plan, "prefill_indptr"), "[0,2,5]", "indptr");
  expect(cJSON_GetObjectItem(plan, "doff"), "5", "doff");
  expect(cJSON_GetObjectItem(plan, "sample_rows"),
         "{\"p0\":4,\"p1\":1,\"d0\":5,\"d1\":6,\"d2\":7}", "sample rows");
  const cJSON *runs = cJSON_GetObjectItem(plan, "runs");
  expect(cJSON_GetObjectItem(runs, "adapters"), "[\"b\",\"a\",null,\"c\"]",
         "runs");
  expect(cJSON_GetObjectItem(runs, "offsets"), "[0,2,6,7,8]", "run offsets");
  expect(cJSON_GetObjectItem(plan, "true_rank_rows"), "15", "true rank rows");
  expect(cJSON_GetObjectItem(plan, "padded_rank_rows"), "21", "padded");
  expect(cJSON_GetObjectItem(plan, "wasted_rank_rows"), "6", "wasted");
  /* y and delta in scheduler order: p0's three rows first.  p0 row 0 is
  ** x = [1,2,3] through adapter a (alpha 1 / rank 2 = 1/2):
  ** x A^T = [4, 2]; B^T = I; delta = [2, 1]; x W^T = [-2, 4]; y = [0, 5]. */
  const cJSON *y = cJSON_GetObjectItem(r, "y");
  const cJSON *d = cJSON_GetObjectItem(r, "delta");
  cr_assert_eq(cJSON_GetArraySize(y), 8);
  expect(cJSON_GetArrayItem(d, 0), "[\"2\",\"1\"]", "delta p0 row 0");
  expect(cJSON_GetArrayItem(y, 0), "[\"0\",\"5\"]", "y p0 row 0");
  /* d1 (base only, scheduler row 6) has a zero delta */
  expect(cJSON_GetArrayItem(d, 6), "[\"0\",\"0\"]", "base row delta");
  /* d2: x = [1,-1,2], c: A = [1,1,1] -> z = 2; B = [2,-1/2]; scale 1 */
  expect(cJSON_GetArrayItem(d, 7), "[\"4\",\"-1\"]", "d2 delta");
  cJSON_Delete(r);
}

struct bad_case {
  const char *name;
  void (*mutate)(cJSON *root);
  const char *code, *path;
};

#define REQ(i) cJSON_GetArrayItem(cJSON_GetObjectItem(root, "requests"), i)
#define ADP(i) cJSON_GetArrayItem(cJSON_GetObjectItem(root, "adapters"), i)

static void set(cJSON *obj, const char *key, cJSON *v) {
  cJSON_ReplaceItemInObjectCaseSensitive(obj, key, v);
}
static void m_b_cols(cJSON *root) {
  cJSON *B = cJSON_GetObjectItem(ADP(0), "B");
  cJSON_ReplaceItemInArray(B, 2, cJSON_Parse("[1,1,1]"));
}
static void m_unknown_adapter(cJSON *root) {
  set(REQ(0), "adapter", cJSON_CreateString("zz"));
}
static void m_rank_slot(cJSON *root) {
  set(root, "max_rank", cJSON_CreateNumber(1));
}
static void m_empty_prefill(cJSON *root) {
  set(REQ(0), "x", cJSON_CreateArray());
}
static void m_decode_rows(cJSON *root) {
  set(REQ(1), "x", cJSON_Parse("[[0,1,0,1],[1,1,1,1]]"));
}
static void m_dup_request(cJSON *root) {
  set(REQ(1), "id", cJSON_CreateString("req-a"));
}
static void m_dup_adapter(cJSON *root) {
  cJSON_AddItemToArray(cJSON_GetObjectItem(root, "adapters"),
                       cJSON_Duplicate(ADP(0), 1));
}
static void m_not_rational(cJSON *root) {
  cJSON_ReplaceItemInArray(cJSON_GetArrayItem(cJSON_GetObjectItem(root, "W"), 0),
                           1, cJSON_CreateString("abc"));
}
static void m_zero_denom(cJSON *root) {
  set(ADP(0), "scale", cJSON_CreateString("1/0"));
}
static void m_fraction(cJSON *root) {
  cJSON_ReplaceItemInArray(cJSON_GetArrayItem(cJSON_GetObjectItem(root, "W"), 1),
                           0, cJSON_CreateNumber(1.5));
}
static void m_missing_din(cJSON *root) {
  cJSON_DeleteItemFromObject(root, "d_in");
}
static void m_w_rows(cJSON *root) {
  cJSON_DeleteItemFromArray(cJSON_GetObjectItem(root, "W"), 2);
}
static void m_packed_unknown(cJSON *root) {
  cJSON_ReplaceItemInArray(cJSON_GetObjectItem(root, "packed_order"), 1,
                           cJSON_CreateString("nobody"));
}
static void m_x_width(cJSON *root) {
  set(REQ(0), "x", cJSON_Parse("[[1,0,1,0],[1,1,0]]"));
}
static void m_phase(cJSON *root) {
  set(REQ(0), "phase", cJSON_CreateString("middle"));
}
static void m_a_rows(cJSON *root) {
  set(ADP(0), "A", cJSON_Parse("[[1,0,1,0]]"));
}
static void m_a_transposed(cJSON *root) {
  /* A given as [d_in][rank] instead of [rank][d_in] */
  set(ADP(0), "A", cJSON_Parse("[[1,0],[0,1],[1,0],[0,1]]"));
}
static void m_neg_denominator_form(cJSON *root) {
  set(ADP(0), "scale", cJSON_CreateString("1/-2"));
}

Test(exec, malformed_batches_fail_closed_with_code_and_path) {
  const struct bad_case cases[] = {
      {"B has 3 columns", m_b_cols, "E_SHAPE", "$.adapters[0].B[2]"},
      {"unknown adapter", m_unknown_adapter, "E_UNKNOWN_ADAPTER",
       "$.requests[0].adapter"},
      {"rank above max_rank", m_rank_slot, "E_PLAN_RANK_SLOT",
       "$.adapters[0].rank"},
      {"empty prefill", m_empty_prefill, "E_PLAN_EMPTY_PREFILL",
       "$.requests[0].x"},
      {"decode with two rows", m_decode_rows, "E_PLAN_DECODE_ROWS",
       "$.requests[1].x"},
      {"duplicate request id", m_dup_request, "E_DUP_ID", "$.requests[1].id"},
      {"duplicate adapter id", m_dup_adapter, "E_DUP_ID", "$.adapters[1].id"},
      {"non-rational string", m_not_rational, "E_RATIONAL", "$.W[0][1]"},
      {"zero denominator", m_zero_denom, "E_ZERO_DENOM", "$.adapters[0].scale"},
      {"fractional JSON number", m_fraction, "E_RATIONAL", "$.W[1][0]"},
      {"missing d_in", m_missing_din, "E_MISSING", "$.d_in"},
      {"W with two rows", m_w_rows, "E_SHAPE", "$.W"},
      {"packed order names nobody", m_packed_unknown, "E_PLAN_PACKED_ORDER",
       "$.packed_order[1]"},
      {"x row too short", m_x_width, "E_SHAPE", "$.requests[0].x[1]"},
      {"unknown phase", m_phase, "E_TYPE", "$.requests[0].phase"},
      {"A rows != rank", m_a_rows, "E_SHAPE", "$.adapters[0].A"},
      {"A transposed", m_a_transposed, "E_SHAPE", "$.adapters[0].A"},
      {"sign in the denominator", m_neg_denominator_form, "E_RATIONAL",
       "$.adapters[0].scale"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    cJSON *root = load_fixture("spec_example.json");
    cases[i].mutate(root);
    write_json("bad.json", root);
    cJSON_Delete(root);
    int st = exec("--in bad.json --out res.json");
    cr_assert_eq(st, 2, "%s: exit %d, stderr %s", cases[i].name, st, err);
    char want[256];
    snprintf(want, sizeof want, "lorasim: error %s at %s:", cases[i].code,
             cases[i].path);
    cr_assert_not_null(strstr(err, want), "%s: want '%s', got '%s'",
                       cases[i].name, want, err);
    cr_assert_eq(strchr(err, '\n'), err + strlen(err) - 1,
                 "%s: one line on stderr", cases[i].name);
    struct stat sb;
    char p[512];
    snprintf(p, sizeof p, "%s/res.json", tmpdir);
    cr_assert_neq(stat(p, &sb), 0, "%s: --out must not be written",
                  cases[i].name);
  }
}

Test(exec, bad_json_usage_and_paths) {
  char p[512];
  snprintf(p, sizeof p, "%s/broken.json", tmpdir);
  FILE *f = fopen(p, "w");
  fputs("{\n \"d_in\": 4,\n \"d_out\": [\n", f);
  fclose(f);
  cr_assert_eq(exec("--in broken.json"), 2);
  cr_assert_not_null(strstr(err, "E_JSON"), "%s", err);
  cr_assert_eq(exec("--in nothere.json"), 2);
  cr_assert_not_null(strstr(err, "nothere.json"), "%s", err);
  cr_assert_eq(exec(""), 2);
  char args[600];
  snprintf(args, sizeof args,
           "--in '%s/fixtures/exec/spec_example.json' --path warp",
           LSIM_TEST_DIR);
  cr_assert_eq(exec(args), 2);
  cr_assert_not_null(strstr(err, "E_PATH"), "%s", err);
  cr_assert_eq(exec("--help"), 0);
  cr_assert_not_null(strstr(out, "--path NAME"));
}

Test(exec, a_batch_without_adapters_is_the_base_projection) {
  char args[600];
  snprintf(args, sizeof args, "--in '%s/fixtures/exec/base_only.json'",
           LSIM_TEST_DIR);
  cr_assert_eq(exec(args), 0, "%s", err);
  cJSON *r = cJSON_Parse(out);
  cr_assert_not_null(r, "%s", out);
  expect(cJSON_GetObjectItem(r, "delta"),
         "[[\"0\",\"0\"],[\"0\",\"0\"],[\"0\",\"0\"]]", "delta");
  /* [1,1]W^T = [3, 1/3]; [0,3]W^T = [6, 0]; [-1/2,2]W^T = [7/2, -1/6] */
  expect(cJSON_GetObjectItem(r, "y"),
         "[[\"3\",\"1/3\"],[\"6\",\"0\"],[\"7/2\",\"-1/6\"]]", "y");
  expect(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "plan"), "segment_adapters"),
         "[]", "no segments");
  cJSON_Delete(r);
}
