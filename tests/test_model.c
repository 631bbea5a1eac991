/*
** test_model.c: model shapes and presets ($.model, backends/shape.h).
**
** Each case starts from scenarios/quickstart.json and replaces its whole
** `model` object (through cJSON, so the rest of the file stays as it is).
** The preset table below is written from the models' Hugging Face
** config.json files, independently of backends/shape.c, and the expected
** target dimensions from the Llama projection shapes (q: hidden to
** q_heads x head_dim, k/v: hidden to kv_heads x head_dim, o the reverse of
** q, gate/up: hidden to intermediate, down the reverse).  The replay cases
** run the real binary: the quickstart's explicit targets and the
** llama-3-8b preset with the four attention modules must give the same
** rows (and all seven modules other rows), and the small preset fixture
** tests/fixtures/replay/preset_1b.json (also a seed of fuzz_scenario) must
** copy adapters of the size its derived targets give.
*/
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <cjson/cJSON.h>
#include <sqlite3.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backends/shape.h"
#include "sim/scenario.h"

/* the quickstart as it was before it took the measured profile: the
** hand-set linear $.cost and explicit targets, which these cases edit */
#define QUICKSTART LSIM_SOURCE_DIR "/tests/fixtures/quickstart-linear.json"
#define ALL7                                                                 \
  "[\"q_proj\", \"k_proj\", \"v_proj\", \"o_proj\", \"gate_proj\", "        \
  "\"up_proj\", \"down_proj\"]"
#define QKVO "[\"q_proj\", \"k_proj\", \"v_proj\", \"o_proj\"]"

/* ---- helpers ------------------------------------------------------------- */

static char *read_all(const char *path) {
  FILE *fp = fopen(path, "rb");
  cr_assert_not_null(fp, "cannot open %s", path);
  cr_assert_eq(fseek(fp, 0, SEEK_END), 0);
  long n = ftell(fp);
  cr_assert_geq(n, 0);
  rewind(fp);
  char *buf = malloc((size_t)n + 1);
  cr_assert_not_null(buf);
  cr_assert_eq(fread(buf, 1, (size_t)n, fp), (size_t)n);
  buf[n] = '\0';
  fclose(fp);
  return buf;
}

/* quickstart.json with `model` replaced by the JSON text `model` and,
** when pool_pages > 0, $.workers.pool_pages set to it. */
static char *quickstart_model_pool(const char *model, int pool_pages) {
  char *text = read_all(QUICKSTART);
  cJSON *root = cJSON_Parse(text);
  free(text);
  cr_assert_not_null(root);
  cJSON *m = cJSON_Parse(model);
  cr_assert_not_null(m, "bad test model text: %s", model);
  cr_assert(cJSON_ReplaceItemInObjectCaseSensitive(root, "model", m));
  if (pool_pages > 0) {
    cJSON *w = cJSON_GetObjectItemCaseSensitive(root, "workers");
    cr_assert(cJSON_ReplaceItemInObjectCaseSensitive(
        w, "pool_pages", cJSON_CreateNumber(pool_pages)));
  }
  char *out = cJSON_Print(root);
  cr_assert_not_null(out);
  cJSON_Delete(root);
  return out;
}

static char *quickstart_model(const char *model) {
  return quickstart_model_pool(model, 0);
}

static lsim_err parse_model_pool(lsim_scenario *sc, const char *model,
                                 int pool_pages, lsim_errbuf *eb) {
  char *text = quickstart_model_pool(model, pool_pages);
  lsim_err err = lsim_scenario_parse(sc, text, strlen(text), "m.json",
                                     LSIM_SOURCE_DIR "/scenarios", eb);
  free(text);
  return err;
}

static lsim_err parse_model(lsim_scenario *sc, const char *model,
                            lsim_errbuf *eb) {
  return parse_model_pool(sc, model, 0, eb);
}

static void must_parse(lsim_scenario *sc, const char *model) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(parse_model(sc, model, &eb), 0, "%s: %s", model, eb.msg);
}

/* ---- the presets --------------------------------------------------------- */

/* Criterion hands each case to a fresh process: strings, not pointers. */
typedef struct pcase {
  char name[32];
  int layers;
  int64_t hidden, intermediate, q_heads, kv_heads, head_dim, vocab;
  int tie;
  double rope_factor; /* 0: no rope scaling */
  /* d_in, d_out of q,k,v,o,gate,up,down */
  int64_t dims[7][2];
  int64_t kv_bytes_per_token; /* 2 x layers x kv_heads x head_dim x 2 */
} pcase;

ParameterizedTestParameters(model, preset) {
  static pcase cases[] = {
      {"llama-3-8b", 32, 4096, 14336, 32, 8, 128, 128256, 0, 0,
       {{4096, 4096}, {4096, 1024}, {4096, 1024}, {4096, 4096},
        {4096, 14336}, {4096, 14336}, {14336, 4096}},
       131072},
      {"llama-3-70b", 80, 8192, 28672, 64, 8, 128, 128256, 0, 0,
       {{8192, 8192}, {8192, 1024}, {8192, 1024}, {8192, 8192},
        {8192, 28672}, {8192, 28672}, {28672, 8192}},
       327680},
      {"llama-3.2-1b", 16, 2048, 8192, 32, 8, 64, 128256, 1, 32,
       {{2048, 2048}, {2048, 512}, {2048, 512}, {2048, 2048}, {2048, 8192},
        {2048, 8192}, {8192, 2048}},
       32768},
      {"llama-3.2-3b", 28, 3072, 8192, 24, 8, 128, 128256, 1, 32,
       {{3072, 3072}, {3072, 1024}, {3072, 1024}, {3072, 3072},
        {3072, 8192}, {3072, 8192}, {8192, 3072}},
       114688},
  };
  return cr_make_param_array(pcase, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(pcase *pc, model, preset) {
  static const char *const mods[] = {"q_proj",    "k_proj",  "v_proj",
                                     "o_proj",    "gate_proj", "up_proj",
                                     "down_proj"};
  char text[256];
  snprintf(text, sizeof text,
           "{\"preset\": \"%s\", \"adapter_modules\": " ALL7 "}", pc->name);
  /* a pool that holds a rank-64 adapter of every module of the 70B */
  lsim_scenario sc;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(parse_model_pool(&sc, text, 4096, &eb), 0, "%s", eb.msg);
  const lsim_model_shape *m = &sc.model;
  cr_expect_str_eq(m->preset, pc->name);
  cr_expect_eq(m->full, 1);
  cr_expect_eq(m->layers, pc->layers);
  cr_expect_eq(m->hidden, pc->hidden);
  cr_expect_eq(m->intermediate, pc->intermediate);
  cr_expect_eq(m->q_heads, pc->q_heads);
  cr_expect_eq(m->kv_heads, pc->kv_heads);
  cr_expect_eq(m->head_dim, pc->head_dim);
  cr_expect_eq(m->vocab, pc->vocab);
  cr_expect_eq(m->tie_embeddings, pc->tie);
  cr_expect_eq(m->norm, LSIM_NORM_RMSNORM);
  cr_expect_float_eq(m->norm_eps, 1e-5, 1e-12);
  cr_expect_eq(m->activation, LSIM_ACT_SILU);
  cr_expect_eq(m->dtype, LSIM_DTYPE_BF16);
  cr_expect_float_eq(m->rope.theta, 500000.0, 1e-6);
  if (pc->rope_factor > 0) {
    cr_expect_eq(m->rope.scaling, LSIM_ROPE_SCALING_LLAMA3);
    cr_expect_float_eq(m->rope.factor, pc->rope_factor, 1e-12);
    cr_expect_float_eq(m->rope.low_freq_factor, 1.0, 1e-12);
    cr_expect_float_eq(m->rope.high_freq_factor, 4.0, 1e-12);
    cr_expect_eq(m->rope.original_max_position, 8192);
  } else {
    cr_expect_eq(m->rope.scaling, LSIM_ROPE_SCALING_NONE);
  }
  cr_expect_eq(m->adapter_modules, 0x7fu);
  /* the simulator's copies */
  cr_expect_eq(sc.layers, pc->layers);
  cr_expect_eq(sc.kv_heads, pc->kv_heads);
  cr_expect_eq(sc.head_dim, pc->head_dim);
  cr_expect_eq(sc.dtype_bytes, 2);
  cr_assert_eq(sc.ntargets, 7);
  int64_t per_rank = 0;
  for (int i = 0; i < 7; i++) {
    cr_expect_str_eq(sc.targets[i].name, mods[i]);
    cr_expect_eq(sc.targets[i].d_in, pc->dims[i][0], "%s %s d_in", pc->name,
                 mods[i]);
    cr_expect_eq(sc.targets[i].d_out, pc->dims[i][1], "%s %s d_out",
                 pc->name, mods[i]);
    per_rank += pc->dims[i][0] + pc->dims[i][1];
  }
  cr_expect_eq(lsim_scenario_kv_bytes_per_token(&sc), pc->kv_bytes_per_token);
  cr_expect_eq(lsim_scenario_adapter_bytes(&sc, 8),
               (int64_t)pc->layers * 8 * per_rank * 2);
  /* the preset on its own is a valid whole shape */
  lsim_shape_issue is;
  const lsim_model_shape *ps = lsim_shape_preset_find(pc->name);
  cr_assert_not_null(ps);
  cr_expect_eq(lsim_shape_check(ps, &is), 0, "%s: %s", pc->name, is.what);
}

Test(model, registry_lists_the_documented_presets) {
  static const char *const want[] = {"llama-3-8b", "llama-3-70b",
                                     "llama-3.2-1b", "llama-3.2-3b"};
  const char *const *names = lsim_shape_preset_names();
  int n = 0;
  for (; names[n]; n++) {
    cr_assert_lt(n, 4, "more presets than docs/SCENARIO.md lists: %s",
                 names[n]);
    cr_expect_str_eq(names[n], want[n]);
    cr_expect_not_null(lsim_shape_preset_find(names[n]));
  }
  cr_expect_eq(n, 4);
  cr_expect_null(lsim_shape_preset_find("llama-3-8B"));
}

/* `lorasim replay --help` lists the registry's names on its preset line. */
Test(model, replay_help_lists_the_presets) {
  FILE *fp = popen(LSIM_BIN " replay --help", "r");
  cr_assert_not_null(fp);
  char line[512], want[512] = "  preset    ";
  int found = 0;
  const char *const *names = lsim_shape_preset_names();
  for (int i = 0; names[i]; i++) {
    strcat(want, i ? ", " : "");
    strcat(want, names[i]);
  }
  strcat(want, "\n");
  while (fgets(line, sizeof line, fp))
    found += strcmp(line, want) == 0;
  cr_expect_eq(pclose(fp), 0);
  cr_expect_eq(found, 1, "no line '%s' in replay --help", want);
}

/* ---- explicit keys over a preset ----------------------------------------- */

Test(model, overrides) {
  lsim_scenario sc;
  /* fewer layers: the rest of the shape stays the preset's */
  must_parse(&sc, "{\"preset\": \"llama-3-8b\", \"layers\": 2, "
                  "\"adapter_modules\": " QKVO "}");
  cr_expect_eq(sc.layers, 2);
  cr_expect_eq(sc.model.layers, 2);
  cr_expect_eq(sc.model.hidden, 4096);
  cr_expect_str_eq(sc.model.preset, "llama-3-8b");
  cr_expect_eq(lsim_scenario_kv_bytes_per_token(&sc), 2 * 2 * 8 * 128 * 2);

  /* kv heads 4 (still dividing 32): k and v narrow to 512 */
  must_parse(&sc, "{\"preset\": \"llama-3-8b\", \"kv_heads\": 4, "
                  "\"adapter_modules\": [\"k_proj\", \"q_proj\"]}");
  cr_assert_eq(sc.ntargets, 2);
  cr_expect_str_eq(sc.targets[0].name, "q_proj"); /* module order */
  cr_expect_str_eq(sc.targets[1].name, "k_proj");
  cr_expect_eq(sc.targets[1].d_out, 512);
  cr_expect_eq(sc.model.adapter_modules, 0x3u);

  /* dtype fp32: four bytes per element everywhere */
  must_parse(&sc, "{\"preset\": \"llama-3-8b\", \"dtype\": \"fp32\", "
                  "\"adapter_modules\": " QKVO "}");
  cr_expect_eq(sc.dtype_bytes, 4);
  cr_expect_eq(sc.model.dtype, LSIM_DTYPE_FP32);
  cr_expect_eq(lsim_scenario_kv_bytes_per_token(&sc), 2 * 32 * 8 * 128 * 4);

  /* rope: theta alone keeps the preset's scaling; type none removes it */
  must_parse(&sc, "{\"preset\": \"llama-3.2-1b\", \"rope\": {\"theta\": "
                  "10000}, \"adapter_modules\": " QKVO "}");
  cr_expect_float_eq(sc.model.rope.theta, 10000.0, 1e-9);
  cr_expect_eq(sc.model.rope.scaling, LSIM_ROPE_SCALING_LLAMA3);
  cr_expect_float_eq(sc.model.rope.factor, 32.0, 1e-12);
  must_parse(&sc, "{\"preset\": \"llama-3.2-1b\", \"rope\": {\"scaling\": "
                  "{\"type\": \"none\"}}, \"tie_embeddings\": false, "
                  "\"adapter_modules\": " QKVO "}");
  cr_expect_eq(sc.model.rope.scaling, LSIM_ROPE_SCALING_NONE);
  cr_expect_float_eq(sc.model.rope.theta, 500000.0, 1e-6);
  cr_expect_eq(sc.model.tie_embeddings, 0);
  must_parse(&sc, "{\"preset\": \"llama-3-8b\", \"rope\": {\"scaling\": "
                  "{\"type\": \"llama3\", \"factor\": 8, \"low_freq_factor\": "
                  "1, \"high_freq_factor\": 4, \"original_max_position\": "
                  "8192}}, \"norm_eps\": 1e-6, \"adapter_modules\": " QKVO "}");
  cr_expect_eq(sc.model.rope.scaling, LSIM_ROPE_SCALING_LLAMA3);
  cr_expect_float_eq(sc.model.rope.factor, 8.0, 1e-12);
  cr_expect_float_eq(sc.model.norm_eps, 1e-6, 1e-15);
}

Test(model, scenario_without_new_keys_is_a_partial_custom_shape) {
  lsim_scenario sc;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_scenario_load(&sc, QUICKSTART, &eb), 0, "%s", eb.msg);
  cr_expect_str_eq(sc.model.preset, "");
  cr_expect_eq(sc.model.full, 0);
  cr_expect_eq(sc.model.hidden, 0);
  cr_expect_eq(sc.model.dtype, LSIM_DTYPE_NONE);
  cr_expect_eq(sc.model.dtype_bytes, 2);
  cr_expect_eq(sc.model.layers, 32);
  /* the targets' module names are recorded: q, k, v, o */
  cr_expect_eq(sc.model.adapter_modules, 0xfu);
}

/* ---- derived targets equal explicit ones --------------------------------- */

#define CUSTOM_SHAPE                                                         \
  "\"layers\": 4, \"hidden\": 1024, \"intermediate\": 2816, "               \
  "\"q_heads\": 16, \"kv_heads\": 4, \"head_dim\": 64, \"vocab\": 32000, "  \
  "\"dtype\": \"fp16\""

Test(model, derived_targets_equal_explicit) {
  lsim_scenario d, e;
  must_parse(&d, "{" CUSTOM_SHAPE ", \"adapter_modules\": [\"v_proj\", "
                 "\"down_proj\", \"gate_proj\"]}");
  must_parse(&e, "{" CUSTOM_SHAPE ", \"targets\": ["
                 "{\"name\": \"v_proj\", \"d_in\": 1024, \"d_out\": 256}, "
                 "{\"name\": \"gate_proj\", \"d_in\": 1024, \"d_out\": 2816}, "
                 "{\"name\": \"down_proj\", \"d_in\": 2816, "
                 "\"d_out\": 1024}]}");
  cr_expect_eq(d.model.full, 1);
  cr_expect_str_eq(d.model.preset, "");
  cr_expect_eq(d.dtype_bytes, 2);
  cr_assert_eq(d.ntargets, 3);
  cr_assert_eq(e.ntargets, 3);
  cr_expect_eq(d.model.adapter_modules, e.model.adapter_modules);
  /* same modules, same dimensions (derived in module order: v, gate, down) */
  for (int i = 0; i < 3; i++) {
    cr_expect_str_eq(d.targets[i].name, e.targets[i].name);
    cr_expect_eq(d.targets[i].d_in, e.targets[i].d_in);
    cr_expect_eq(d.targets[i].d_out, e.targets[i].d_out);
  }
  for (int r = 1; r <= 64; r *= 4) {
    cr_expect_eq(lsim_scenario_adapter_bytes(&d, r),
                 lsim_scenario_adapter_bytes(&e, r));
    cr_expect_eq(lsim_scenario_adapter_pages(&d, r),
                 lsim_scenario_adapter_pages(&e, r));
  }
  /* both given and agreeing is fine too */
  must_parse(&e, "{\"preset\": \"llama-3-8b\", \"adapter_modules\": "
                 "[\"o_proj\"], \"targets\": [{\"name\": \"o_proj\", "
                 "\"d_in\": 4096, \"d_out\": 4096}]}");
  cr_expect_eq(e.ntargets, 1);
  /* explicit targets that are not modules ride along unchecked */
  must_parse(&e, "{\"preset\": \"llama-3-8b\", \"targets\": [{\"name\": "
                 "\"wqkv\", \"d_in\": 4096, \"d_out\": 6144}]}");
  cr_expect_eq(e.model.adapter_modules, 0u);
  cr_expect_eq(e.targets[0].d_out, 6144);
}

/* ---- bad shapes ---------------------------------------------------------- */

typedef struct bcase {
  char label[48];
  char model[320];
  lsim_err code;
  char path[48];
} bcase;

#define P8 "\"preset\": \"llama-3-8b\", "
#define MODS "\"adapter_modules\": " QKVO
#define CUST                                                                 \
  "\"layers\": 2, \"kv_heads\": 8, \"head_dim\": 128, \"dtype_bytes\": 2, "

ParameterizedTestParameters(model, bad) {
  static bcase cases[] = {
      /* the whole shape */
      {"kv heads not dividing q heads", "{" P8 "\"kv_heads\": 5, " MODS "}",
       LSIM_E_SCN_CONFLICT, "$.model.kv_heads"},
      {"kv heads above q heads",
       "{" P8 "\"kv_heads\": 64, " MODS "}", LSIM_E_SCN_CONFLICT,
       "$.model.kv_heads"},
      {"custom kv heads not dividing",
       "{\"layers\": 2, \"hidden\": 4096, \"intermediate\": 8192, "
       "\"q_heads\": 32, \"kv_heads\": 6, \"head_dim\": 128, \"vocab\": 100, "
       "\"dtype_bytes\": 2, " MODS "}",
       LSIM_E_SCN_CONFLICT, "$.model.kv_heads"},
      {"q heads x head dim is not hidden", "{" P8 "\"q_heads\": 16, " MODS "}",
       LSIM_E_SCN_CONFLICT, "$.model.q_heads"},
      {"hidden not heads x head dim", "{" P8 "\"hidden\": 4000, " MODS "}",
       LSIM_E_SCN_CONFLICT, "$.model.hidden"},
      {"head dim against hidden", "{" P8 "\"head_dim\": 64, " MODS "}",
       LSIM_E_SCN_CONFLICT, "$.model.head_dim"},
      {"odd head dim",
       "{\"layers\": 2, \"hidden\": 96, \"intermediate\": 256, \"q_heads\": "
       "32, \"kv_heads\": 8, \"head_dim\": 3, \"vocab\": 100, \"dtype\": "
       "\"bf16\", " MODS "}",
       LSIM_E_SCN_RANGE, "$.model.head_dim"},
      {"zero intermediate", "{" P8 "\"intermediate\": 0, " MODS "}",
       LSIM_E_SCN_RANGE, "$.model.intermediate"},
      {"zero vocab", "{" P8 "\"vocab\": 0, " MODS "}", LSIM_E_SCN_RANGE,
       "$.model.vocab"},
      {"zero q heads", "{" P8 "\"q_heads\": 0, " MODS "}", LSIM_E_SCN_RANGE,
       "$.model.q_heads"},
      {"hidden beyond 2^20", "{" P8 "\"hidden\": 2097152, " MODS "}",
       LSIM_E_SCN_RANGE, "$.model.hidden"},
      {"half a full shape",
       "{" CUST "\"hidden\": 1024, \"q_heads\": 8, " MODS "}",
       LSIM_E_SCN_MISSING, "$.model.intermediate"},
      /* names */
      {"unknown preset", "{\"preset\": \"llama-4\", " MODS "}",
       LSIM_E_SCN_RANGE, "$.model.preset"},
      {"preset not a string", "{\"preset\": 8, " MODS "}", LSIM_E_SCN_TYPE,
       "$.model.preset"},
      {"unknown norm", "{" P8 "\"norm\": \"layernorm\", " MODS "}",
       LSIM_E_SCN_RANGE, "$.model.norm"},
      {"unknown activation", "{" P8 "\"activation\": \"gelu\", " MODS "}",
       LSIM_E_SCN_RANGE, "$.model.activation"},
      {"unknown dtype", "{" P8 "\"dtype\": \"int4\", " MODS "}",
       LSIM_E_SCN_RANGE, "$.model.dtype"},
      {"unknown key", "{" P8 "\"n_heads\": 32, " MODS "}",
       LSIM_E_SCN_UNKNOWN_KEY, "$.model.n_heads"},
      {"tie not a boolean", "{" P8 "\"tie_embeddings\": 1, " MODS "}",
       LSIM_E_SCN_TYPE, "$.model.tie_embeddings"},
      /* dtype and dtype_bytes */
      {"dtype against dtype_bytes",
       "{" P8 "\"dtype\": \"fp32\", \"dtype_bytes\": 2, " MODS "}",
       LSIM_E_SCN_CONFLICT, "$.model.dtype_bytes"},
      {"preset dtype against dtype_bytes",
       "{" P8 "\"dtype_bytes\": 4, " MODS "}",
       LSIM_E_SCN_CONFLICT, "$.model.dtype_bytes"},
      {"custom without any dtype",
       "{\"layers\": 2, \"kv_heads\": 8, \"head_dim\": 128, \"targets\": "
       "[{\"name\": \"q\", \"d_in\": 8, \"d_out\": 8}]}",
       LSIM_E_SCN_MISSING, "$.model.dtype_bytes"},
      /* norm and rope */
      {"zero norm eps", "{" P8 "\"norm_eps\": 0, " MODS "}", LSIM_E_SCN_RANGE,
       "$.model.norm_eps"},
      {"zero rope theta", "{" P8 "\"rope\": {\"theta\": 0}, " MODS "}",
       LSIM_E_SCN_RANGE, "$.model.rope.theta"},
      {"unknown rope key", "{" P8 "\"rope\": {\"base\": 1e4}, " MODS "}",
       LSIM_E_SCN_UNKNOWN_KEY, "$.model.rope.base"},
      {"unknown rope scaling",
       "{" P8 "\"rope\": {\"scaling\": {\"type\": \"yarn\", \"factor\": 8, "
       "\"low_freq_factor\": 1, \"high_freq_factor\": 4, "
       "\"original_max_position\": 8192}}, " MODS "}",
       LSIM_E_SCN_RANGE, "$.model.rope.scaling.type"},
      {"rope scaling without factor",
       "{" P8 "\"rope\": {\"scaling\": {\"type\": \"llama3\", "
       "\"low_freq_factor\": 1, \"high_freq_factor\": 4, "
       "\"original_max_position\": 8192}}, " MODS "}",
       LSIM_E_SCN_MISSING, "$.model.rope.scaling.factor"},
      {"rope band upside down",
       "{" P8 "\"rope\": {\"scaling\": {\"type\": \"llama3\", \"factor\": 8, "
       "\"low_freq_factor\": 4, \"high_freq_factor\": 1, "
       "\"original_max_position\": 8192}}, " MODS "}",
       LSIM_E_SCN_CONFLICT, "$.model.rope.scaling.low_freq_factor"},
      {"rope scaling null", "{" P8 "\"rope\": {\"scaling\": null}, " MODS "}",
       LSIM_E_SCN_TYPE, "$.model.rope.scaling"},
      {"factor with scaling none",
       "{" P8 "\"rope\": {\"scaling\": {\"type\": \"none\", \"factor\": "
       "8}}, " MODS "}",
       LSIM_E_SCN_UNKNOWN_KEY, "$.model.rope.scaling.factor"},
      {"rope scaling not an object",
       "{" P8 "\"rope\": {\"scaling\": 8}, " MODS "}", LSIM_E_SCN_TYPE,
       "$.model.rope.scaling"},
      /* adapter modules and targets */
      {"unknown module", "{" P8 "\"adapter_modules\": [\"qkv_proj\"]}",
       LSIM_E_SCN_RANGE, "$.model.adapter_modules[0]"},
      {"module named twice",
       "{" P8 "\"adapter_modules\": [\"q_proj\", \"q_proj\"]}",
       LSIM_E_SCN_DUP, "$.model.adapter_modules[1]"},
      {"no modules", "{" P8 "\"adapter_modules\": []}", LSIM_E_SCN_EMPTY,
       "$.model.adapter_modules"},
      {"module not a string", "{" P8 "\"adapter_modules\": [7]}",
       LSIM_E_SCN_TYPE, "$.model.adapter_modules[0]"},
      {"preset with no modules or targets", "{\"preset\": \"llama-3-8b\"}",
       LSIM_E_SCN_MISSING, "$.model.adapter_modules"},
      {"partial shape with modules only", "{" CUST MODS "}",
       LSIM_E_SCN_MISSING, "$.model.targets"},
      {"explicit target against the shape",
       "{" P8 "\"targets\": [{\"name\": \"q_proj\", \"d_in\": 4096, "
       "\"d_out\": 4096}, {\"name\": \"k_proj\", \"d_in\": 4096, \"d_out\": "
       "2048}]}",
       LSIM_E_SCN_CONFLICT, "$.model.targets[1].d_out"},
      {"explicit d_in against the shape",
       "{" P8 "\"targets\": [{\"name\": \"down_proj\", \"d_in\": 4096, "
       "\"d_out\": 4096}]}",
       LSIM_E_SCN_CONFLICT, "$.model.targets[0].d_in"},
      {"target outside the modules",
       "{" P8 "\"adapter_modules\": [\"q_proj\"], \"targets\": [{\"name\": "
       "\"q_proj\", \"d_in\": 4096, \"d_out\": 4096}, {\"name\": \"o_proj\", "
       "\"d_in\": 4096, \"d_out\": 4096}]}",
       LSIM_E_SCN_CONFLICT, "$.model.targets[1].name"},
      {"module without its target",
       "{" P8 "\"adapter_modules\": [\"q_proj\", \"v_proj\"], \"targets\": "
       "[{\"name\": \"q_proj\", \"d_in\": 4096, \"d_out\": 4096}]}",
       LSIM_E_SCN_CONFLICT, "$.model.adapter_modules"},
  };
  return cr_make_param_array(bcase, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(bcase *bc, model, bad) {
  lsim_scenario sc;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_err err = parse_model(&sc, bc->model, &eb);
  cr_expect_eq(err, bc->code, "%s: expected %s, got %s (%s)", bc->label,
               lsim_err_name(bc->code), lsim_err_name(err), eb.msg);
  char want[80];
  snprintf(want, sizeof want, "m.json: %s: ", bc->path);
  cr_expect_eq(strncmp(eb.msg, want, strlen(want)), 0,
               "%s: message does not start with '%s': %s", bc->label, want,
               eb.msg);
}

/* ---- replays through the real binary ------------------------------------ */

/* The runs leave their .prom files and SQLite's -wal/-shm beside the
** databases: empty the (flat) directory, then remove it. */
static void remove_tree(const char *dir) {
  DIR *d = opendir(dir);
  cr_assert_not_null(d);
  for (struct dirent *e; (e = readdir(d));) {
    char f[320];
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    snprintf(f, sizeof f, "%s/%s", dir, e->d_name);
    cr_expect_eq(unlink(f), 0, "unlink %s", f);
  }
  closedir(d);
  cr_expect_eq(rmdir(dir), 0);
}

static void run_replay(const char *scenario, const char *db) {
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    execl(LSIM_BIN, LSIM_BIN, "replay", scenario, "--db", db, "--no-plots",
          "--quiet", (char *)NULL);
    _exit(127);
  }
  int st = 0;
  cr_assert_eq(waitpid(pid, &st, 0), pid);
  cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "replay %s failed (%d)",
            scenario, st);
}

/* Rows of `sel` (a SELECT over table t) in main and not in b, plus the
** reverse, and the row count in main. */
static void diff_rows(sqlite3 *h, const char *sel_main, const char *sel_b,
                      int64_t *diff, int64_t *rows, const char *what) {
  char sql[1024];
  sqlite3_stmt *st;
  snprintf(sql, sizeof sql,
           "SELECT (SELECT count(*) FROM (%s EXCEPT %s)) + "
           "(SELECT count(*) FROM (%s EXCEPT %s)), "
           "(SELECT count(*) FROM (%s))",
           sel_main, sel_b, sel_b, sel_main, sel_main);
  cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK, "%s: %s",
               what, sqlite3_errmsg(h));
  cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
  *diff = sqlite3_column_int64(st, 0);
  *rows = sqlite3_column_int64(st, 1);
  sqlite3_finalize(st);
}

/* A small preset with overrides replays, and every adapter copy moves the
** bytes of the derived targets: 4 layers x rank 16 x 2 bytes x
** (q 2048+2048, v 2048+512, gate and up 2048+8192, down 8192+2048). */
Test(model, small_preset_fixture_replays_with_its_derived_sizes) {
  static const char *const fx = LSIM_TEST_DIR "/fixtures/replay/preset_1b.json";
  lsim_scenario sc;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_scenario_load(&sc, fx, &eb), 0, "%s", eb.msg);
  cr_expect_str_eq(sc.model.preset, "llama-3.2-1b");
  cr_expect_eq(sc.layers, 4);
  cr_expect_float_eq(sc.model.rope.theta, 250000.0, 1e-9);
  cr_expect_eq(sc.model.rope.scaling, LSIM_ROPE_SCALING_LLAMA3);
  cr_expect_eq(sc.ntargets, 5);
  const int64_t per_load = (int64_t)4 * 16 * 2 *
                           ((2048 + 2048) + (2048 + 512) + 2 * (2048 + 8192) +
                            (8192 + 2048));
  cr_expect_eq(lsim_scenario_adapter_bytes(&sc, 16), per_load);
  cr_expect_eq(lsim_scenario_kv_bytes_per_token(&sc), 2 * 4 * 8 * 64 * 2);

  char dir[] = "/tmp/lsim_model_XXXXXX";
  cr_assert_not_null(mkdtemp(dir));
  char db[64];
  snprintf(db, sizeof db, "%s/p.db", dir);
  run_replay(fx, db);
  sqlite3 *h;
  sqlite3_stmt *st;
  cr_assert_eq(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  cr_assert_eq(
      sqlite3_prepare_v2(h,
                         "SELECT count(*), min(bytes), max(bytes), "
                         "(SELECT status FROM runs) FROM events WHERE kind = "
                         "(SELECT kind FROM event_kinds WHERE name = "
                         "'adapter_load_started')",
                         -1, &st, NULL),
      SQLITE_OK, "%s", sqlite3_errmsg(h));
  cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
  cr_expect_gt(sqlite3_column_int64(st, 0), 0);
  cr_expect_eq(sqlite3_column_int64(st, 1), per_load);
  cr_expect_eq(sqlite3_column_int64(st, 2), per_load);
  cr_expect_str_eq((const char *)sqlite3_column_text(st, 3), "ok");
  sqlite3_finalize(st);
  sqlite3_close(h);
  remove_tree(dir);
}

Test(model, quickstart_rows_through_the_preset) {
  char dir[] = "/tmp/lsim_model_XXXXXX";
  cr_assert_not_null(mkdtemp(dir));
  char scn[64], dba[64], dbb[64], dbc[64], scn7[64];
  snprintf(scn, sizeof scn, "%s/qs-preset.json", dir);
  snprintf(scn7, sizeof scn7, "%s/qs-all7.json", dir);
  snprintf(dba, sizeof dba, "%s/a.db", dir);
  snprintf(dbb, sizeof dbb, "%s/b.db", dir);
  snprintf(dbc, sizeof dbc, "%s/c.db", dir);
  /* the only change: the explicit model becomes the preset + 4 modules */
  char *text = quickstart_model("{\"preset\": \"llama-3-8b\", "
                                "\"adapter_modules\": " QKVO "}");
  FILE *fp = fopen(scn, "wb");
  cr_assert_not_null(fp);
  cr_assert_eq(fputs(text, fp) >= 0, 1);
  cr_assert_eq(fclose(fp), 0);
  free(text);
  /* and a control: all seven modules, which must change the rows */
  text = quickstart_model("{\"preset\": \"llama-3-8b\", "
                          "\"adapter_modules\": " ALL7 "}");
  fp = fopen(scn7, "wb");
  cr_assert_not_null(fp);
  cr_assert_eq(fputs(text, fp) >= 0, 1);
  cr_assert_eq(fclose(fp), 0);
  free(text);

  run_replay(QUICKSTART, dba);
  run_replay(scn, dbb);
  run_replay(scn7, dbc);

  static const char *const tables[][2] = {
      {"events", "seq, tick, kind, worker, request, tenant, adapter, "
                 "generation, attempt, pages, bytes, value, detail"},
      {"requests", "*"},
      {"iterations", "iter, worker, start_tick, end_tick, prefill_rows, "
                     "decode_rows, distinct_adapters, segments, "
                     "true_rank_rows, padded_rank_rows, result"},
      {"runs_summary", "key, value"},
  };
  sqlite3 *h;
  cr_assert_eq(sqlite3_open_v2(dba, &h, SQLITE_OPEN_READONLY, NULL),
               SQLITE_OK);
  char att[160];
  snprintf(att, sizeof att, "ATTACH '%s' AS b; ATTACH '%s' AS c", dbb, dbc);
  cr_assert_eq(sqlite3_exec(h, att, NULL, NULL, NULL), SQLITE_OK, "%s",
               sqlite3_errmsg(h));
  int64_t control_diff = 0;
  for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
    char a[256], b[256], c[256];
    snprintf(a, sizeof a, "SELECT %s FROM main.%s", tables[i][1],
             tables[i][0]);
    snprintf(b, sizeof b, "SELECT %s FROM b.%s", tables[i][1], tables[i][0]);
    snprintf(c, sizeof c, "SELECT %s FROM c.%s", tables[i][1], tables[i][0]);
    int64_t diff, rows, cdiff, crows;
    diff_rows(h, a, b, &diff, &rows, tables[i][0]);
    cr_expect_gt(rows, 0, "%s has no rows", tables[i][0]);
    cr_expect_eq(diff, 0, "%s: %lld rows differ between the explicit model "
                          "and the preset",
                 tables[i][0], (long long)diff);
    diff_rows(h, a, c, &cdiff, &crows, tables[i][0]);
    control_diff += cdiff;
  }
  cr_expect_gt(control_diff, 0,
               "gate/up/down adapters must change the rows (the comparison "
               "would not see a difference otherwise)");
  sqlite3_close(h);
  remove_tree(dir);
}

/* ---- weight and adapter bytes, the device fit (issue 19) ------------------ */

/* The parameter counts the models' publishers state (the safetensors
** metadata of the Hugging Face repositories): 8,030,261,248 for
** Meta-Llama-3-8B, 70,553,706,496 for Meta-Llama-3-70B and 1,235,814,400
** for Llama-3.2-1B (tied embeddings); bf16 is two bytes a parameter. */
Test(model, weight_bytes_are_the_published_parameter_counts) {
  cr_assert_eq(lsim_shape_weight_bytes(lsim_shape_preset_find("llama-3-8b")),
               2 * INT64_C(8030261248));
  cr_assert_eq(lsim_shape_weight_bytes(lsim_shape_preset_find("llama-3-70b")),
               2 * INT64_C(70553706496));
  cr_assert_eq(
      lsim_shape_weight_bytes(lsim_shape_preset_find("llama-3.2-1b")),
      2 * INT64_C(1235814400));
  lsim_model_shape part;
  lsim_shape_custom(&part);
  cr_assert_eq(lsim_shape_weight_bytes(&part), 0);
}

/* A rank-16 adapter on q/k/v/o of the 8B shape: per layer 16 x (4096 +
** 4096 + 4096 + 1024 + 4096 + 1024 + 4096 + 4096) bf16 values. */
Test(model, adapter_bytes_follow_the_adapted_modules) {
  lsim_model_shape s = *lsim_shape_preset_find("llama-3-8b");
  s.adapter_modules = 1u << LSIM_MOD_Q | 1u << LSIM_MOD_K |
                      1u << LSIM_MOD_V | 1u << LSIM_MOD_O;
  cr_assert_eq(lsim_shape_adapter_bytes(&s, 16),
               INT64_C(16) * 26624 * 32 * 2);
  s.adapter_modules |= 1u << LSIM_MOD_DOWN;
  cr_assert_eq(lsim_shape_adapter_bytes(&s, 8),
               INT64_C(8) * (26624 + 14336 + 4096) * 32 * 2);
  s.adapter_modules = 0;
  cr_assert_eq(lsim_shape_adapter_bytes(&s, 8), 0);
}

Test(model, fit_check_refuses_with_every_size) {
  const lsim_model_shape *s = lsim_shape_preset_find("llama-3-8b");
  int64_t w = lsim_shape_weight_bytes(s), pool = INT64_C(768) * 2097152,
          ws = INT64_C(1) << 30;
  lsim_shape_fit f;
  char msg[400] = "";
  cr_assert_eq(lsim_shape_fit_check(s, 768, 2097152, ws, w + pool + ws, &f,
                                    msg, sizeof msg),
               0);
  cr_assert_eq(f.need, w + pool + ws);
  cr_assert_eq(f.pool, pool);
  cr_assert_eq(lsim_shape_fit_check(s, 768, 2097152, ws, w + pool + ws - 1,
                                    &f, msg, sizeof msg),
               LSIM_E_DEV_FIT);
  /* weights 15316.5 MiB (16,060,522,496 bytes), pool 1536, workspace 1024 */
  cr_assert(strstr(msg, "weights 15316.5 MiB"), "%s", msg);
  cr_assert(strstr(msg, "page pool 1536.0 MiB (768 pages of 2097152 bytes)"),
            "%s", msg);
  cr_assert(strstr(msg, "workspace 1024.0 MiB"), "%s", msg);
  /* the 70B shape does not fit one 141 GB card with any pool */
  const lsim_model_shape *big = lsim_shape_preset_find("llama-3-70b");
  cr_assert_eq(lsim_shape_fit_check(big, 1, 2097152, 0, INT64_C(141) * 1000000000,
                                    &f, msg, sizeof msg),
               LSIM_E_DEV_FIT);
}
