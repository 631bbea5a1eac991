/*
** shape.c: the model-shape presets and the whole-shape check.
**
** Each preset is the public shape of a model as its Hugging Face
** config.json states it (hidden_size, intermediate_size,
** num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim,
** vocab_size, rms_norm_eps, rope_theta, rope_scaling, hidden_act,
** tie_word_embeddings, torch_dtype); docs/SCENARIO.md lists them with the
** repository each comes from.  A preset is a full shape and passes
** lsim_shape_check (tests/test_model.c checks both).
**
** To add a preset: one row of lsim__presets (the name is its `preset`
** field) and its row in docs/SCENARIO.md.
*/
#include "shape.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* Llama 3 and 3.2: RMSNorm eps 1e-5, RoPE theta 500000, SiLU, bf16; 3.2
** adds the llama3 rope scaling (factor 32 over an original 8192
** positions) and ties the output head to the embeddings.  A preset names
** no adapter modules: the scenario says which carry adapters. */
#define LSIM__LLAMA3_ROPE {500000.0, LSIM_ROPE_SCALING_NONE, 0, 0, 0, 0}
#define LSIM__LLAMA32_ROPE                                                    \
  {500000.0, LSIM_ROPE_SCALING_LLAMA3, 32.0, 1.0, 4.0, 8192}

static const lsim_model_shape lsim__presets[] = {
    /* meta-llama/Meta-Llama-3-8B */
    {.preset = "llama-3-8b", .full = 1, .layers = 32, .hidden = 4096,
     .intermediate = 14336, .q_heads = 32, .kv_heads = 8, .head_dim = 128,
     .vocab = 128256, .tie_embeddings = 0, .norm = LSIM_NORM_RMSNORM,
     .norm_eps = 1e-5, .rope = LSIM__LLAMA3_ROPE, .activation = LSIM_ACT_SILU,
     .dtype = LSIM_DTYPE_BF16, .dtype_bytes = 2},
    /* meta-llama/Meta-Llama-3-70B (the tensor-parallel shape) */
    {.preset = "llama-3-70b", .full = 1, .layers = 80, .hidden = 8192,
     .intermediate = 28672, .q_heads = 64, .kv_heads = 8, .head_dim = 128,
     .vocab = 128256, .tie_embeddings = 0, .norm = LSIM_NORM_RMSNORM,
     .norm_eps = 1e-5, .rope = LSIM__LLAMA3_ROPE, .activation = LSIM_ACT_SILU,
     .dtype = LSIM_DTYPE_BF16, .dtype_bytes = 2},
    /* meta-llama/Llama-3.2-1B */
    {.preset = "llama-3.2-1b", .full = 1, .layers = 16, .hidden = 2048,
     .intermediate = 8192, .q_heads = 32, .kv_heads = 8, .head_dim = 64,
     .vocab = 128256, .tie_embeddings = 1, .norm = LSIM_NORM_RMSNORM,
     .norm_eps = 1e-5, .rope = LSIM__LLAMA32_ROPE,
     .activation = LSIM_ACT_SILU, .dtype = LSIM_DTYPE_BF16, .dtype_bytes = 2},
    /* meta-llama/Llama-3.2-3B */
    {.preset = "llama-3.2-3b", .full = 1, .layers = 28, .hidden = 3072,
     .intermediate = 8192, .q_heads = 24, .kv_heads = 8, .head_dim = 128,
     .vocab = 128256, .tie_embeddings = 1, .norm = LSIM_NORM_RMSNORM,
     .norm_eps = 1e-5, .rope = LSIM__LLAMA32_ROPE,
     .activation = LSIM_ACT_SILU, .dtype = LSIM_DTYPE_BF16, .dtype_bytes = 2},
};

#define LSIM__NPRESETS ((int)(sizeof lsim__presets / sizeof lsim__presets[0]))

static const char *const lsim__preset_names[] = {
    lsim__presets[0].preset, lsim__presets[1].preset, lsim__presets[2].preset,
    lsim__presets[3].preset, NULL};
_Static_assert(sizeof lsim__preset_names / sizeof lsim__preset_names[0] ==
                   sizeof lsim__presets / sizeof lsim__presets[0] + 1,
               "one name per preset");

static const char *const lsim__modules[LSIM_MOD_COUNT + 1] = {
    "q_proj", "k_proj", "v_proj", "o_proj",
    "gate_proj", "up_proj", "down_proj", NULL};
static const char *const lsim__norms[] = {"rmsnorm", NULL};
static const char *const lsim__acts[] = {"silu", NULL};
static const char *const lsim__dtypes[] = {"bf16", "fp16", "fp32", NULL};
/* bytes by enum lsim_shape_dtype */
static const int lsim__dtype_sizes[] = {0, 2, 2, 4};
static const char *const lsim__scalings[] = {"none", "llama3", NULL};

const lsim_model_shape *lsim_shape_preset_find(const char *name) {
  for (int i = 0; name && i < LSIM__NPRESETS; i++)
    if (strcmp(lsim__presets[i].preset, name) == 0)
      return &lsim__presets[i];
  return NULL;
}

const char *const *lsim_shape_preset_names(void) { return lsim__preset_names; }

void lsim_shape_custom(lsim_model_shape *s) {
  memset(s, 0, sizeof *s);
  s->norm = LSIM_NORM_RMSNORM;
  s->norm_eps = 1e-5;
  s->rope.theta = 10000.0;
  s->rope.scaling = LSIM_ROPE_SCALING_NONE;
  s->activation = LSIM_ACT_SILU;
  s->dtype = LSIM_DTYPE_NONE;
}

const char *const *lsim_shape_module_names(void) { return lsim__modules; }

int lsim_shape_module_find(const char *name) {
  for (int m = 0; name && m < LSIM_MOD_COUNT; m++)
    if (strcmp(lsim__modules[m], name) == 0)
      return m;
  return -1;
}

void lsim_shape_module_dims(const lsim_model_shape *s, int m, int64_t *d_in,
                            int64_t *d_out) {
  int64_t q = s->q_heads * s->head_dim, kv = s->kv_heads * s->head_dim;
  int64_t in = 0, out = 0;
  switch (m) {
  case LSIM_MOD_Q:
    in = s->hidden, out = q;
    break;
  case LSIM_MOD_K:
  case LSIM_MOD_V:
    in = s->hidden, out = kv;
    break;
  case LSIM_MOD_O:
    in = q, out = s->hidden;
    break;
  case LSIM_MOD_GATE:
  case LSIM_MOD_UP:
    in = s->hidden, out = s->intermediate;
    break;
  case LSIM_MOD_DOWN:
    in = s->intermediate, out = s->hidden;
    break;
  default:
    break;
  }
  *d_in = in;
  *d_out = out;
}

const char *const *lsim_shape_norm_names(void) { return lsim__norms; }
const char *const *lsim_shape_act_names(void) { return lsim__acts; }
const char *const *lsim_shape_dtype_names(void) { return lsim__dtypes; }
const char *const *lsim_shape_scaling_names(void) { return lsim__scalings; }

int lsim_shape_dtype_find(const char *name) {
  for (int i = 0; name && lsim__dtypes[i]; i++)
    if (strcmp(lsim__dtypes[i], name) == 0)
      return i + 1; /* enum lsim_shape_dtype: NONE is 0 */
  return -1;
}

int lsim_shape_dtype_size(int dtype) {
  return dtype >= 0 && dtype <= LSIM_DTYPE_FP32 ? lsim__dtype_sizes[dtype] : 0;
}

static lsim_err lsim__issue(lsim_shape_issue *is, lsim_err code,
                            const char *k0, const char *k1, const char *k2) {
  is->code = code;
  is->keys[0] = k0;
  is->keys[1] = k1;
  is->keys[2] = k1 ? k2 : NULL;
  is->keys[3] = NULL;
  return code;
}

lsim_err lsim_shape_check(const lsim_model_shape *s, lsim_shape_issue *is) {
  memset(is, 0, sizeof *is);
  if (s->full) {
    if (s->kv_heads < 1 || s->q_heads % s->kv_heads != 0) {
      snprintf(is->what, sizeof is->what,
               "kv_heads (%" PRId64 ") must divide q_heads (%" PRId64
               "): each key/value head serves a whole group of query heads",
               s->kv_heads, s->q_heads);
      return lsim__issue(is, LSIM_E_SCN_CONFLICT, "kv_heads", "q_heads",
                         NULL);
    }
    if (s->q_heads * s->head_dim != s->hidden) {
      snprintf(is->what, sizeof is->what,
               "q_heads x head_dim (%" PRId64 " x %" PRId64 " = %" PRId64
               ") must equal hidden (%" PRId64 ")",
               s->q_heads, s->head_dim, s->q_heads * s->head_dim, s->hidden);
      return lsim__issue(is, LSIM_E_SCN_CONFLICT, "hidden", "q_heads",
                         "head_dim");
    }
    if (s->head_dim % 2) {
      snprintf(is->what, sizeof is->what,
               "must be even, since RoPE rotates pairs of elements "
               "(got %" PRId64 ")",
               s->head_dim);
      return lsim__issue(is, LSIM_E_SCN_RANGE, "head_dim", NULL, NULL);
    }
  }
  if (s->dtype != LSIM_DTYPE_NONE &&
      s->dtype_bytes != lsim_shape_dtype_size(s->dtype)) {
    snprintf(is->what, sizeof is->what,
             "dtype_bytes (%d) must be the size of dtype %s (%d bytes); "
             "set dtype to change the element type",
             s->dtype_bytes, lsim__dtypes[s->dtype - 1],
             lsim_shape_dtype_size(s->dtype));
    return lsim__issue(is, LSIM_E_SCN_CONFLICT, "dtype_bytes", "dtype", NULL);
  }
  if (s->rope.scaling == LSIM_ROPE_SCALING_LLAMA3 &&
      !(s->rope.low_freq_factor < s->rope.high_freq_factor)) {
    snprintf(is->what, sizeof is->what,
             "low_freq_factor (%g) must be below high_freq_factor (%g): they "
             "bound the band of interpolated wavelengths",
             s->rope.low_freq_factor, s->rope.high_freq_factor);
    return lsim__issue(is, LSIM_E_SCN_CONFLICT, "rope.scaling.low_freq_factor",
                       "rope.scaling.high_freq_factor", NULL);
  }
  return 0;
}

/* ---- sizes and the device fit ---------------------------------------------- */

int64_t lsim_shape_weight_bytes(const lsim_model_shape *s) {
  if (!s->full)
    return 0;
  int64_t layer = 2 * s->hidden; /* the two RMSNorm weight vectors */
  for (int m = 0; m < LSIM_MOD_COUNT; m++) {
    int64_t din, dout;
    lsim_shape_module_dims(s, m, &din, &dout);
    layer += din * dout;
  }
  int64_t emb = s->vocab * s->hidden;
  int64_t el = emb + (int64_t)s->layers * layer + s->hidden +
               (s->tie_embeddings ? 0 : emb);
  return el * s->dtype_bytes;
}

int64_t lsim_shape_adapter_bytes(const lsim_model_shape *s, int64_t rank) {
  if (!s->full)
    return 0;
  int64_t per_rank = 0;
  for (int m = 0; m < LSIM_MOD_COUNT; m++) {
    if (!(s->adapter_modules >> m & 1u))
      continue;
    int64_t din, dout;
    lsim_shape_module_dims(s, m, &din, &dout);
    per_rank += din + dout;
  }
  return rank * per_rank * s->layers * s->dtype_bytes;
}

lsim_err lsim_shape_fit_check(const lsim_model_shape *s, int64_t pool_pages,
                              int64_t page_bytes, int64_t workspace,
                              int64_t device_free, lsim_shape_fit *out,
                              char *msg, size_t n) {
  lsim_shape_fit f = {lsim_shape_weight_bytes(s), pool_pages * page_bytes,
                      workspace, 0, device_free};
  f.need = f.weights + f.pool + f.workspace;
  if (out)
    *out = f;
  if (f.need <= f.have)
    return 0;
  const double M = 1024.0 * 1024.0;
  if (msg && n)
    snprintf(msg, n,
             "the model does not fit the device: weights %.1f MiB + page "
             "pool %.1f MiB (%" PRId64 " pages of %" PRId64 " bytes) + "
             "workspace %.1f MiB = %.1f MiB, %.1f MiB free",
             (double)f.weights / M, (double)f.pool / M, pool_pages,
             page_bytes, (double)f.workspace / M, (double)f.need / M,
             (double)f.have / M);
  return LSIM_E_DEV_FIT;
}
