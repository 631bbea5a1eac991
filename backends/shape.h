/*
** shape.h: the shape of a decoder-only base model (Llama family) and the
** registry of its presets.
**
** A scenario's `$.model` (docs/SCENARIO.md, "model") is read into an
** lsim_model_shape: the dimensions of every layer, the vocabulary, the
** norm, RoPE, the activation, the dtype and which of the seven projections
** of a layer carry adapters.  The presets are whole shapes of public
** models, written once in the table of shape.c; their names are read from
** it (scenario errors, `replay --help`, docs).  The shape sits here, below
** sim/, so that a backend that executes the whole forward pass can be
** handed the same struct the scenario filled.
**
** Sizes are elements (hidden, intermediate, head_dim, vocab) or counts
** (layers, heads); dtype_bytes is bytes per element of weights and KV.
*/
#ifndef LSIM_SHAPE_H
#define LSIM_SHAPE_H

#include "../engine/lsim.h"

#define LSIM_SHAPE_NAME_MAX 64

/* The projections of one decoder layer, in the order derived targets take;
** bit m of lsim_model_shape.adapter_modules is module m. */
enum lsim_shape_module {
  LSIM_MOD_Q = 0,    /* q_proj:    hidden -> q_heads x head_dim */
  LSIM_MOD_K = 1,    /* k_proj:    hidden -> kv_heads x head_dim */
  LSIM_MOD_V = 2,    /* v_proj:    hidden -> kv_heads x head_dim */
  LSIM_MOD_O = 3,    /* o_proj:    q_heads x head_dim -> hidden */
  LSIM_MOD_GATE = 4, /* gate_proj: hidden -> intermediate */
  LSIM_MOD_UP = 5,   /* up_proj:   hidden -> intermediate */
  LSIM_MOD_DOWN = 6, /* down_proj: intermediate -> hidden */
  LSIM_MOD_COUNT = 7
};

enum lsim_shape_norm { LSIM_NORM_RMSNORM = 0 };
enum lsim_shape_act { LSIM_ACT_SILU = 0 };
/* NONE: only dtype_bytes is known (a scenario without `dtype`) */
enum lsim_shape_dtype {
  LSIM_DTYPE_NONE = 0,
  LSIM_DTYPE_BF16 = 1,
  LSIM_DTYPE_FP16 = 2,
  LSIM_DTYPE_FP32 = 3
};
enum lsim_rope_scaling {
  LSIM_ROPE_SCALING_NONE = 0,
  LSIM_ROPE_SCALING_LLAMA3 = 1 /* Llama 3.1's frequency-band rescaling */
};

typedef struct lsim_rope {
  double theta;       /* base of the rotary frequencies */
  int scaling;        /* LSIM_ROPE_SCALING_* */
  /* LSIM_ROPE_SCALING_LLAMA3 only: wavelengths longer than
  ** original_max_position / low_freq_factor are divided by factor, those
  ** shorter than original_max_position / high_freq_factor kept, the band
  ** between interpolated */
  double factor, low_freq_factor, high_freq_factor;
  int64_t original_max_position;
} lsim_rope;

typedef struct lsim_model_shape {
  char preset[LSIM_SHAPE_NAME_MAX]; /* registry name; "" for a custom shape */
  /* 1 when hidden, intermediate, q_heads and vocab are known, so that the
  ** whole forward pass and the targets are defined; 0 for a scenario that
  ** gives only what the simulator's sizes need (layers, kv_heads,
  ** head_dim, dtype_bytes and explicit targets) */
  int full;
  int layers;
  int64_t hidden;       /* 0 unless full */
  int64_t intermediate; /* MLP width; 0 unless full */
  int64_t q_heads;      /* 0 unless full; q_heads x head_dim == hidden */
  int64_t kv_heads;     /* divides q_heads (grouped-query attention) */
  int64_t head_dim;     /* even when full (RoPE rotates pairs) */
  int64_t vocab;        /* 0 unless full */
  int tie_embeddings;   /* the output head shares the embedding matrix */
  int norm;             /* enum lsim_shape_norm */
  double norm_eps;
  lsim_rope rope;
  int activation;       /* enum lsim_shape_act (the gated MLP's activation) */
  int dtype;            /* enum lsim_shape_dtype */
  int dtype_bytes;      /* 1, 2 or 4; the size of dtype unless NONE */
  /* bit m (enum lsim_shape_module): module m carries an adapter.  With explicit
  ** targets, the targets whose names are module names */
  unsigned adapter_modules;
} lsim_model_shape;

/* What lsim_shape_check found wrong: a code, the keys of $.model involved
** (most likely culprit first, NULL-terminated; dotted for nested keys,
** "rope.scaling.low_freq_factor") and a message without the path. */
typedef struct lsim_shape_issue {
  lsim_err code; /* LSIM_E_SCN_RANGE or LSIM_E_SCN_CONFLICT */
  const char *keys[4];
  char what[200];
} lsim_shape_issue;

/* The preset named `name`, or NULL; the names in registry order. */
const lsim_model_shape *lsim_shape_preset_find(const char *name);
const char *const *lsim_shape_preset_names(void);

/* A custom shape's starting values: every dimension 0 (unknown), rmsnorm
** with eps 1e-5, RoPE theta 10000 without scaling (the defaults of
** Hugging Face's LlamaConfig), silu, untied, dtype NONE. */
void lsim_shape_custom(lsim_model_shape *s);

/* Module names ("q_proj" ...) in enum lsim_shape_module order; find: the module
** of a name or -1. */
const char *const *lsim_shape_module_names(void);
int lsim_shape_module_find(const char *name);

/* Input and output dimension of module m in a full shape. */
void lsim_shape_module_dims(const lsim_model_shape *s, int m, int64_t *d_in,
                            int64_t *d_out);

/* Names of the choices of `norm`, `activation`, `dtype` (NONE has no
** name) and `rope.scaling.type` ("none", "llama3"), in enum order;
** dtype_find gives the enum or -1; dtype_size the bytes of one element (0
** for NONE). */
const char *const *lsim_shape_norm_names(void);
const char *const *lsim_shape_act_names(void);
const char *const *lsim_shape_dtype_names(void); /* [0] is BF16 */
int lsim_shape_dtype_find(const char *name);
int lsim_shape_dtype_size(int dtype);
const char *const *lsim_shape_scaling_names(void); /* [0] is NONE */

/* Check the shape as a whole (each key's own range is the reader's job):
** 0, or a code with *is filled.  A partial shape (full == 0) is checked
** only for what it has. */
lsim_err lsim_shape_check(const lsim_model_shape *s, lsim_shape_issue *is);

/* Bytes of a full shape's weights at dtype_bytes: the embedding (vocab x
** hidden), per layer the seven projections and the two norm vectors, the
** final norm, and the output head unless tied to the embedding; 0 for a
** partial shape. */
int64_t lsim_shape_weight_bytes(const lsim_model_shape *s);
/* Bytes of a whole-model adapter of rank r on a full shape: per layer,
** A (r x d_in) and B (r x d_out) of every module in adapter_modules, at
** dtype_bytes; 0 for a partial shape. */
int64_t lsim_shape_adapter_bytes(const lsim_model_shape *s, int64_t rank);

/* Whether a whole-forward executor fits a device (issue 19's refusal
** before anything runs): the weights, the engine's page pool (pages x
** page_bytes, KV and adapters together) and the executor's workspace
** against the device's free bytes.  0 when need <= have; LSIM_E_DEV_FIT
** otherwise, with msg (n bytes) naming every size in MiB. */
typedef struct lsim_shape_fit {
  int64_t weights, pool, workspace, need, have;
} lsim_shape_fit;
lsim_err lsim_shape_fit_check(const lsim_model_shape *s, int64_t pool_pages,
                              int64_t page_bytes, int64_t workspace,
                              int64_t device_free, lsim_shape_fit *out,
                              char *msg, size_t n);

#endif /* LSIM_SHAPE_H */
