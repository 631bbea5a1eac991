/*
** test_exec_witness.c: what `lorasim exec` runs beyond the linear batch
** (docs/EXEC.md, sim/exec_witness.h), through the real binary and through
** the functions:
**
**   - $.tp: the article's two-rank fixture (0x06F4) rank by rank, column
**     and row parallel, every printed intermediate exact and the final
**     output equal to the unsharded run; malformed tp objects fail with
**     the TP codes and their JSON path
**   - "mode": "kv_witness": the article's two-layer witness (0x08C) and the
**     K-delta, LM-head (0x08D) and aLoRA variants, with their verdicts
**   - $.emit ["z"]: Z equals X A^T computed here, and the rest of the
**     output is byte-identical to the batch without emit
*/
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <gmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "sim/exec.h"
#include "sim/exec_witness.h"

static char tmpdir[256];
static char out[1 << 18], err[1 << 14];

static void mk_tmp(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/lsim-execw-XXXXXX");
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

/* Run `lorasim exec ARGS` in tmpdir; stdout into out, stderr into err. */
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

/* Run a (possibly mutated) fixture through the binary; the parsed result. */
static cJSON *run_json(const cJSON *batch) {
  write_json("batch.json", batch);
  int st = exec("--in batch.json");
  cr_assert_eq(st, 0, "exit %d: %s", st, err);
  cJSON *r = cJSON_Parse(out);
  cr_assert_not_null(r, "%s", out);
  return r;
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

/* o.a.b[i].c ... : a small path walker ("ranks[1]" indexes arrays). */
static const cJSON *at(const cJSON *o, const char *path) {
  char buf[256], *save = NULL;
  snprintf(buf, sizeof buf, "%s", path);
  for (char *tok = strtok_r(buf, ".", &save); tok && o;
       tok = strtok_r(NULL, ".", &save)) {
    char *br = strchr(tok, '[');
    if (br)
      *br = 0;
    if (*tok)
      o = cJSON_GetObjectItemCaseSensitive(o, tok);
    while (br && o) {
      o = cJSON_GetArrayItem(o, atoi(br + 1));
      br = strchr(br + 1, '[');
    }
  }
  return o;
}

TestSuite(tp, .init = mk_tmp, .fini = rm_tmp);
TestSuite(kvw, .init = mk_tmp, .fini = rm_tmp);
TestSuite(emit, .init = mk_tmp, .fini = rm_tmp);

/* ------------------------------------------------------------------- tp */

Test(tp, column_parallel_fixture_rank_by_rank) {
  cJSON *b = load_fixture("tp_0x06F4_column.json");
  cJSON *r = run_json(b);
  const cJSON *s = at(r, "tp.segments[0]");
  cr_assert_not_null(s, "%s", out);
  expect(at(s, "adapter"), "\"proj1\"", "adapter");
  expect(at(r, "tp.style"), "\"column\"", "style");
  /* the local rank slices Z_{1,0}, Z_{1,1} and their gather */
  expect(at(s, "ranks[0].shrink"), "[[\"0\"],[\"4\"],[\"4\"]]", "Z1,0");
  expect(at(s, "ranks[1].shrink"), "[[\"3\"],[\"2\"],[\"2\"]]", "Z1,1");
  expect(at(s, "bottleneck.collective"), "\"all_gather\"", "collective");
  expect(at(s, "bottleneck.output"),
         "[[\"0\",\"3\"],[\"4\",\"2\"],[\"4\",\"2\"]]", "Z1");
  /* the output shards concatenate to X A1 B1 */
  expect(at(s, "ranks[0].expand"),
         "[[\"6\",\"3\"],[\"8\",\"2\"],[\"8\",\"2\"]]", "D1,0");
  expect(at(s, "ranks[1].expand"),
         "[[\"0\",\"9\"],[\"8\",\"2\"],[\"8\",\"2\"]]", "D1,1");
  expect(at(s, "delta"),
         "[[\"6\",\"3\",\"0\",\"9\"],[\"8\",\"2\",\"8\",\"2\"],"
         "[\"8\",\"2\",\"8\",\"2\"]]",
         "D1");
  /* each rank holds its own slices of the factors and the base */
  expect(at(s, "ranks[0].a"), "[[\"1\",\"0\",\"1\",\"0\"]]", "A1,0");
  expect(at(s, "ranks[1].b"), "[[\"2\",\"0\"],[\"-1\",\"3\"]]", "B1,1");
  expect(at(s, "ranks[1].w"),
         "[[\"0\",\"0\",\"1\",\"0\"],[\"0\",\"0\",\"0\",\"1\"]]", "W1,1");
  /* the final output is the unsharded one, and the unsharded run of the
  ** same batch without tp agrees */
  expect(at(r, "tp.equals_unsharded"), "true", "equals_unsharded");
  cr_assert(cJSON_Compare(at(r, "tp.y"), at(r, "y"), 1));
  cr_assert(cJSON_Compare(at(s, "final.output"), at(r, "y"), 1));
  cJSON_DeleteItemFromObject(b, "tp");
  cJSON_DeleteItemFromObject(b, "emit");
  cJSON *plain = run_json(b);
  cr_assert(cJSON_Compare(at(plain, "y"), at(r, "tp.y"), 1));
  cr_assert(cJSON_Compare(at(plain, "delta"), at(r, "tp.delta"), 1));
  cr_assert_null(at(plain, "tp"));
  cJSON_Delete(plain);
  cJSON_Delete(r);
  cJSON_Delete(b);
}

Test(tp, row_parallel_fixture_fused_all_reduce) {
  cJSON *b = load_fixture("tp_0x06F4_row.json");
  cJSON *r = run_json(b);
  const cJSON *s = at(r, "tp.segments[0]");
  cr_assert_not_null(s, "%s", out);
  expect(at(s, "ranks[0].shrink"),
         "[[\"5\",\"2\"],[\"-2\",\"-1\"],[\"2\",\"0\"]]", "P2,0");
  expect(at(s, "ranks[1].shrink"),
         "[[\"-4\",\"11\"],[\"-1\",\"4\"],[\"2\",\"-3\"]]", "P2,1");
  expect(at(s, "bottleneck.collective"), "\"all_reduce_sum\"", "collective");
  expect(at(s, "bottleneck.output"),
         "[[\"1\",\"13\"],[\"-3\",\"3\"],[\"4\",\"-3\"]]", "Z2");
  expect(at(s, "delta"),
         "[[\"1\",\"15\",\"39\",\"25\"],[\"-3\",\"-3\",\"9\",\"9\"],"
         "[\"4\",\"5\",\"-9\",\"-10\"]]",
         "D2");
  static const char *Y = "[[\"2\",\"16\",\"41\",\"27\"],"
                         "[\"-1\",\"-2\",\"10\",\"11\"],"
                         "[\"4\",\"6\",\"-6\",\"-9\"]]";
  expect(at(s, "final.output"), Y, "Y");
  expect(at(r, "tp.y"), Y, "tp.y");
  expect(at(r, "y"), Y, "unsharded y");
  /* rank 0 holds the first half of the activation and the base columns */
  expect(at(s, "ranks[0].x"),
         "[[\"-2\",\"-1\"],[\"1\",\"0\"],[\"0\",\"-2\"]]", "H_0");
  /* what rank 1 hands to the final all-reduce: its base partial plus its
  ** adapter slice in columns 2..3 only */
  const cJSON *base = at(s, "ranks[1].base"), *fin = at(s, "ranks[1].final_in"),
              *ex = at(s, "ranks[1].expand");
  for (int i = 0; i < 3; i++)
    for (int c = 0; c < 4; c++) {
      long want = atol(cJSON_GetArrayItem(cJSON_GetArrayItem(base, i), c)
                           ->valuestring) +
                  (c >= 2 ? atol(cJSON_GetArrayItem(cJSON_GetArrayItem(ex, i),
                                                    c - 2)
                                     ->valuestring)
                          : 0);
      cr_assert_eq(atol(cJSON_GetArrayItem(cJSON_GetArrayItem(fin, i), c)
                            ->valuestring),
                   want, "final_in[%d][%d]", i, c);
    }
  cJSON_Delete(r);
  cJSON_Delete(b);
}

Test(tp, through_the_function_with_base_rows_and_two_adapters) {
  /* the mixed batch (three adapters, a base-only request): row parallel at
  ** degree 2 is refused (d_in 3), degree 1 runs; exec_text writes the file
  ** and the sharded result equals the unsharded one */
  cJSON *b = load_fixture("mixed_five.json");
  cJSON *tp = cJSON_AddObjectToObject(b, "tp");
  cJSON_AddNumberToObject(tp, "degree", 2);
  cJSON_AddStringToObject(tp, "style", "row"); /* d_in 3: not divisible */
  char *t = cJSON_PrintUnformatted(b);
  char p[512];
  snprintf(p, sizeof p, "%s/res.json", tmpdir);
  cr_assert_eq(lsim_exec_text(t, strlen(t), "mixed", p, NULL), 2);
  struct stat sb;
  cr_assert_neq(stat(p, &sb), 0, "nothing written on error");
  free(t);
  cJSON_ReplaceItemInObject(tp, "degree", cJSON_CreateNumber(1));
  t = cJSON_PrintUnformatted(b);
  cr_assert_eq(lsim_exec_text(t, strlen(t), "mixed", p, NULL), 0);
  free(t);
  slurp(p, out, sizeof out);
  cJSON *r = cJSON_Parse(out);
  cr_assert_not_null(r, "%s", out);
  expect(at(r, "tp.equals_unsharded"), "true", "equals_unsharded");
  cr_assert(cJSON_Compare(at(r, "tp.y"), at(r, "y"), 1));
  cr_assert(cJSON_Compare(at(r, "tp.delta"), at(r, "delta"), 1));
  /* three adapter segments and the base-only rows last */
  const cJSON *segs = at(r, "tp.segments");
  cr_assert_eq(cJSON_GetArraySize(segs), 4);
  cr_assert(cJSON_IsNull(at(segs, "[3].adapter")));
  cr_assert_null(at(segs, "[3].bottleneck"));
  cJSON_Delete(r);
  cJSON_Delete(b);
  /* degree 2 with a base-only request beside the adapter's rows: the base
  ** rows run their own sharded base projection */
  b = load_fixture("tp_0x06F4_column.json");
  cJSON_AddItemToArray(cJSON_GetObjectItem(b, "requests"),
                       cJSON_Parse("{\"id\": \"plain\", \"phase\": \"decode\", "
                                   "\"adapter\": null, \"x\": [[1, 2, 3, 4]]}"));
  t = cJSON_PrintUnformatted(b);
  cr_assert_eq(lsim_exec_text(t, strlen(t), "col+base", p, NULL), 0);
  free(t);
  slurp(p, out, sizeof out);
  r = cJSON_Parse(out);
  cr_assert_not_null(r, "%s", out);
  expect(at(r, "tp.segments[1].rows"), "[3]", "base rows");
  expect(at(r, "tp.segments[1].ranks[1].final_in"), "[[\"3\",\"4\"]]",
         "base shard of rank 1");
  expect(at(r, "tp.y[3]"), "[\"1\",\"2\",\"3\",\"4\"]", "base row");
  cr_assert(cJSON_Compare(at(r, "tp.y"), at(r, "y"), 1));
  cJSON_Delete(r);
  cJSON_Delete(b);
}

struct tp_bad {
  const char *name, *tp, *code, *path;
};

Test(tp, malformed_tp_fails_with_the_tp_codes_and_the_path) {
  static const struct tp_bad cases[] = {
      {"degree not dividing d_out", "{\"degree\": 3, \"style\": \"column\"}",
       "E_TP_DIV", "$.tp.degree"},
      {"degree not dividing the rank", "{\"degree\": 4, \"style\": \"column\"}",
       "E_TP_DIV", "$.tp.degree"},
      {"unknown style", "{\"degree\": 2, \"style\": \"diagonal\"}",
       "E_TP_FIELD", "$.tp.style"},
      {"degree 0", "{\"degree\": 0, \"style\": \"row\"}", "E_TP_WORLD",
       "$.tp.degree"},
      {"degree above the world limit", "{\"degree\": 65, \"style\": \"row\"}",
       "E_TP_WORLD", "$.tp.degree"},
      {"fractional degree", "{\"degree\": 1.5, \"style\": \"row\"}", "E_TYPE",
       "$.tp.degree"},
      {"missing style", "{\"degree\": 2}", "E_MISSING", "$.tp.style"},
      {"tp not an object", "[2]", "E_TYPE", "$.tp"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    cJSON *b = load_fixture("tp_0x06F4_column.json");
    cJSON_ReplaceItemInObject(b, "tp", cJSON_Parse(cases[i].tp));
    write_json("bad.json", b);
    cJSON_Delete(b);
    int st = exec("--in bad.json --out res.json");
    cr_assert_eq(st, 2, "%s: exit %d, %s", cases[i].name, st, err);
    char want[256];
    snprintf(want, sizeof want, "lorasim: error %s at %s:", cases[i].code,
             cases[i].path);
    cr_assert_not_null(strstr(err, want), "%s: want '%s', got '%s'",
                       cases[i].name, want, err);
    struct stat sb;
    char p[512];
    snprintf(p, sizeof p, "%s/res.json", tmpdir);
    cr_assert_neq(stat(p, &sb), 0, "%s: --out written", cases[i].name);
  }
  /* row parallel needs d_in divisible too: d_in 3 */
  cJSON *b = load_fixture("mixed_five.json");
  cJSON_AddItemToObject(b, "tp",
                        cJSON_Parse("{\"degree\": 2, \"style\": \"row\"}"));
  write_json("bad.json", b);
  cJSON_Delete(b);
  cr_assert_eq(exec("--in bad.json"), 2);
  cr_assert_not_null(strstr(err, "E_TP_DIV at $.tp.degree"), "%s", err);
  cr_assert_eq(out[0], 0, "nothing on stdout");
}

/* ------------------------------------------------------------ kv_witness */

Test(kvw, article_two_layer_witness_values_and_verdict) {
  char args[600];
  snprintf(args, sizeof args, "--in '%s/fixtures/exec/kv_witness_0x08C.json'",
           LSIM_TEST_DIR);
  cr_assert_eq(exec(args), 0, "%s", err);
  cJSON *r = cJSON_Parse(out);
  cr_assert_not_null(r, "%s", out);
  expect(at(r, "mode"), "\"kv_witness\"", "mode");
  /* layer 0 stores K = [0, 1], V = [1, 3] in both models */
  for (int m = 0; m < 2; m++) {
    const char *who = m ? "adapted" : "base";
    char p[128];
    snprintf(p, sizeof p, "%s.layers[0].k", who);
    expect(at(r, p), "[\"0\",\"1\"]", p);
    snprintf(p, sizeof p, "%s.layers[0].v", who);
    expect(at(r, p), "[\"1\",\"3\"]", p);
  }
  /* token 1: logits [0,0] -> weights 1/2, 1/2 under the base query;
  ** [0,1] (base 3, i.e. [0, ln 3]) -> 1/4, 3/4 under the adapted one */
  expect(at(r, "base.layers[0].scores[1]"), "[\"0\",\"0\"]", "base scores");
  expect(at(r, "base.layers[0].weights[1]"), "[\"1/2\",\"1/2\"]", "base w");
  expect(at(r, "adapted.layers[0].scores[1]"), "[\"0\",\"1\"]", "ad scores");
  expect(at(r, "adapted.layers[0].weights[1]"), "[\"1/4\",\"3/4\"]", "ad w");
  expect(at(r, "base.layers[0].context[1]"), "\"2\"", "c base");
  expect(at(r, "adapted.layers[0].context[1]"), "\"5/2\"", "c adapted");
  /* the residual update and the next layer's cache rows */
  expect(at(r, "base.layers[1].input[1]"), "[\"3\",\"1\"]", "h base");
  expect(at(r, "adapted.layers[1].input[1]"), "[\"7/2\",\"1\"]", "h adapted");
  expect(at(r, "base.layers[1].k[1]"), "\"6\"", "K1 base");
  expect(at(r, "adapted.layers[1].k[1]"), "\"7\"", "K1 adapted");
  expect(at(r, "base.layers[1].v[1]"), "\"4\"", "V1 base");
  expect(at(r, "adapted.layers[1].v[1]"), "\"9/2\"", "V1 adapted");
  /* the verdict: a Q-only update changes layer 1's K/V, not layer 0's */
  expect(at(r, "verdict.observed.kv_changed"), "true", "observed");
  expect(at(r, "verdict.observed.kv_first_layer"), "1", "first layer");
  expect(at(r, "verdict.observed.kv_changed_rows"), "[[1,1]]", "rows");
  expect(at(r, "verdict.closure.kv_first_layer"), "1", "closure layer");
  expect(at(r, "verdict.closure.kv_direct"), "false", "closure direct");
  expect(at(r, "verdict.reuse.kv"),
         "{\"allowed\":false,\"code\":\"E_KV_REUSE_DOWNSTREAM\"}", "reuse kv");
  expect(at(r, "verdict.sound"), "true", "sound");
  cJSON_Delete(r);
}

Test(kvw, k_delta_lm_head_and_alora_variants) {
  /* a direct K delta [1,1]^T: layer-0 K becomes [1,3] at once */
  cJSON *b = load_fixture("kv_witness_0x08C.json");
  cJSON_ReplaceItemInObject(
      b, "adapter",
      cJSON_Parse("{\"deltas\":[{\"proj\":\"k_proj\",\"layer\":0,"
                  "\"v\":[1,1]}]}"));
  cJSON *r = run_json(b);
  expect(at(r, "adapted.layers[0].k"), "[\"1\",\"3\"]", "K0 with dK");
  expect(at(r, "verdict.observed.kv_first_layer"), "0", "first layer");
  expect(at(r, "verdict.closure.kv_direct"), "true", "direct");
  expect(at(r, "verdict.reuse.kv.code"), "\"E_KV_REUSE_KV_TARGET\"", "code");
  cJSON_Delete(r);
  /* LM head only (0x08D): final hidden [3,1], logits [3,1] -> [6,0], no
  ** K/V row changes and K/V reuse is allowed, prompt logits are not */
  cJSON_ReplaceItemInObject(
      b, "adapter",
      cJSON_Parse("{\"deltas\":[{\"proj\":\"lm_head\","
                  "\"v\":[[1,0],[0,-1]]}]}"));
  r = run_json(b);
  expect(at(r, "base.logits[1]"), "[\"3\",\"1\"]", "base logits");
  expect(at(r, "adapted.logits[1]"), "[\"6\",\"0\"]", "adapted logits");
  expect(at(r, "verdict.observed.kv_changed"), "false", "kv");
  expect(at(r, "verdict.observed.kv_changed_rows"), "[]", "rows");
  expect(at(r, "verdict.observed.logits_changed"), "true", "logits");
  expect(at(r, "verdict.reuse.kv.allowed"), "true", "kv reuse");
  expect(at(r, "verdict.reuse.logits.allowed"), "false", "logit reuse");
  cJSON_Delete(r);
  /* the Q adapter as an aLoRA active from token 1: token 0 is the base
  ** trace at every layer, token 1 the adapted one */
  cJSON_ReplaceItemInObject(
      b, "adapter",
      cJSON_Parse("{\"deltas\":[{\"proj\":\"q_proj\",\"layer\":0,"
                  "\"v\":[1,0]}],\"mask\":[0,1]}"));
  r = run_json(b);
  expect(at(r, "adapted.layers[1].k"), "[\"4\",\"7\"]", "K1 aLoRA");
  expect(at(r, "verdict.observed.kv_changed_rows"), "[[1,1]]", "rows");
  cJSON_Delete(r);
  /* no adapter at all: the two traces agree and everything is reusable */
  cJSON_DeleteItemFromObject(b, "adapter");
  r = run_json(b);
  cr_assert(cJSON_Compare(at(r, "base"), at(r, "adapted"), 1));
  cr_assert(cJSON_IsNull(at(r, "verdict.closure")));
  expect(at(r, "verdict.reuse.kv.allowed"), "true", "kv");
  cJSON_Delete(r);
  cJSON_Delete(b);
}

Test(kvw, through_the_function) {
  cJSON *b = load_fixture("kv_witness_0x08C.json");
  cJSON *res = NULL;
  char path[128] = "";
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_exec_witness(b, &res, path, sizeof path, &eb), 0, "%s",
               eb.msg);
  expect(at(res, "adapted.layers[0].weights"),
         "[[\"1\"],[\"1/4\",\"3/4\"]]", "weights");
  expect(at(res, "adapted.layers[0].q"), "[\"1\",\"1\"]", "q");
  cJSON_Delete(res);
  /* a half logit over base 3 has weight sqrt(3): refused, not rounded */
  cJSON_ReplaceItemInObject(
      b, "adapter",
      cJSON_Parse("{\"deltas\":[{\"proj\":\"q_proj\",\"layer\":0,"
                  "\"v\":[\"1/2\",0]}]}"));
  res = NULL;
  cr_assert_eq(lsim_exec_witness(b, &res, path, sizeof path, &eb),
               LSIM_E_KV_WITNESS_INEXACT);
  cr_assert_null(res);
  cr_assert_str_eq(path, "$.adapter");
  cJSON_Delete(b);
}

struct kvw_bad {
  const char *name, *key, *value, *code, *path;
};

Test(kvw, malformed_witness_batches) {
  static const struct kvw_bad cases[] = {
      {"softmax base 1", "softmax_base", "1", "E_KV_WITNESS_BASE",
       "$.softmax_base"},
      {"five layers", "layers",
       "[{},{},{},{},{}]", "E_KV_WITNESS_SHAPE", "$.layers"},
      {"short wk", "layers",
       "[{\"wq\":[0,0],\"wk\":[0],\"wv\":[1,2],\"wo\":[1,0]}]", "E_SHAPE",
       "$.layers[0].wk"},
      {"missing wo", "layers", "[{\"wq\":[0,0],\"wk\":[0,1],\"wv\":[1,2]}]",
       "E_MISSING", "$.layers[0].wo"},
      {"unknown projection", "adapter",
       "{\"deltas\":[{\"proj\":\"mlp\",\"layer\":0,\"v\":[1,0]}]}", "E_TYPE",
       "$.adapter.deltas[0].proj"},
      {"layer out of range", "adapter",
       "{\"deltas\":[{\"proj\":\"q_proj\",\"layer\":2,\"v\":[1,0]}]}",
       "E_KV_WITNESS_SHAPE", "$.adapter.deltas[0].layer"},
      {"mask of the wrong length", "adapter",
       "{\"deltas\":[],\"mask\":[1]}", "E_SHAPE", "$.adapter.mask"},
      {"non-rational weight", "x", "[[\"one\",0],[1,1]]", "E_RATIONAL",
       "$.x[0][0]"},
      {"unknown mode", "mode", "\"witness\"", "E_TYPE", "$.mode"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    cJSON *b = load_fixture("kv_witness_0x08C.json");
    cJSON_ReplaceItemInObject(b, cases[i].key, cJSON_Parse(cases[i].value));
    write_json("bad.json", b);
    cJSON_Delete(b);
    int st = exec("--in bad.json --out res.json");
    cr_assert_eq(st, 2, "%s: exit %d, %s", cases[i].name, st, err);
    char want[256];
    snprintf(want, sizeof want, "lorasim: error %s at %s:", cases[i].code,
             cases[i].path);
    cr_assert_not_null(strstr(err, want), "%s: want '%s', got '%s'",
                       cases[i].name, want, err);
    struct stat sb;
    char p[512];
    snprintf(p, sizeof p, "%s/res.json", tmpdir);
    cr_assert_neq(stat(p, &sb), 0, "%s: --out written", cases[i].name);
  }
}

/* ------------------------------------------------------------------ emit */

/* An exact fixture number (JSON integer or "p/q") into q. */
static void fx_num(mpq_t q, const cJSON *j) {
  if (cJSON_IsString(j))
    cr_assert_eq(mpq_set_str(q, j->valuestring, 10), 0);
  else
    mpq_set_si(q, (long)j->valuedouble, 1);
  mpq_canonicalize(q);
}

/* Z of row x under adapter a, computed here: z_k = sum_i x_i A[k][i]. */
static void expect_z(const cJSON *x, const cJSON *a, const cJSON *zrow,
                     const char *what) {
  const cJSON *A = cJSON_GetObjectItem(a, "A");
  cr_assert_eq(cJSON_GetArraySize(zrow), cJSON_GetArraySize(A), "%s width",
               what);
  mpq_t s, t, u;
  mpq_inits(s, t, u, NULL);
  int k = 0;
  for (const cJSON *ar = A->child; ar; ar = ar->next, k++) {
    mpq_set_ui(s, 0, 1);
    const cJSON *xi = x->child;
    for (const cJSON *aik = ar->child; aik; aik = aik->next, xi = xi->next) {
      fx_num(t, xi);
      fx_num(u, aik);
      mpq_mul(t, t, u);
      mpq_add(s, s, t);
    }
    char *want = mpq_get_str(NULL, 10, s);
    cr_assert_str_eq(cJSON_GetArrayItem(zrow, k)->valuestring, want,
                     "%s z[%d]", what, k);
    free(want);
  }
  mpq_clears(s, t, u, NULL);
}

Test(emit, z_equals_x_a_transposed_and_the_rest_is_unchanged) {
  cJSON *b = load_fixture("mixed_five.json");
  cJSON *plain = NULL;
  write_json("plain.json", b);
  cr_assert_eq(exec("--in plain.json"), 0, "%s", err);
  char *want = strdup(out);
  cJSON_AddItemToObject(b, "emit", cJSON_Parse("[\"z\"]"));
  cJSON *r = run_json(b);
  const cJSON *z = at(r, "z");
  cr_assert_not_null(z, "%s", out);
  /* rows in scheduler order, each request's rows in order */
  const cJSON *ads = cJSON_GetObjectItem(b, "adapters");
  int row = 0;
  for (const cJSON *q = cJSON_GetObjectItem(b, "requests")->child; q;
       q = q->next) {
    const cJSON *an = cJSON_GetObjectItem(q, "adapter");
    const cJSON *a = NULL;
    for (const cJSON *c = ads->child; c && cJSON_IsString(an); c = c->next)
      if (strcmp(cJSON_GetObjectItem(c, "id")->valuestring,
                 an->valuestring) == 0)
        a = c;
    for (const cJSON *x = cJSON_GetObjectItem(q, "x")->child; x;
         x = x->next, row++) {
      const cJSON *zr = cJSON_GetArrayItem(z, row);
      char what[64];
      snprintf(what, sizeof what, "row %d", row);
      if (!a)
        cr_assert(cJSON_IsNull(zr), "%s: base row has no Z", what);
      else
        expect_z(x, a, zr, what);
    }
  }
  cr_assert_eq(cJSON_GetArraySize(z), row);
  /* with one named path, Z is that path's (padded: trimmed to the rank) */
  write_json("batch.json", b);
  cr_assert_eq(exec("--in batch.json --path padded"), 0, "%s", err);
  plain = cJSON_Parse(out);
  expect(at(plain, "z_path"), "\"padded\"", "z_path");
  cr_assert(cJSON_Compare(at(plain, "z"), z, 1));
  cJSON_Delete(plain);
  /* every other key is what the batch without emit printed, byte for byte */
  cJSON_DeleteItemFromObject(r, "z");
  cJSON_DeleteItemFromObject(r, "z_path");
  char *got = cJSON_PrintUnformatted(r);
  size_t n = strlen(want);
  if (n && want[n - 1] == '\n')
    want[n - 1] = 0;
  cr_assert_str_eq(got, want);
  free(got);
  free(want);
  cJSON_Delete(r);
  /* an unknown name */
  cJSON_ReplaceItemInObject(b, "emit", cJSON_Parse("[\"z\", \"h\"]"));
  write_json("bad.json", b);
  cr_assert_eq(exec("--in bad.json"), 2);
  cr_assert_not_null(strstr(err, "E_TYPE at $.emit[1]"), "%s", err);
  cJSON_Delete(b);
}
