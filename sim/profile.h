/*
** profile.h: cost profiles (docs/PROFILE.md; version 1: docs/CUDA.md,
** "Calibration").
**
** Version 1, written by `lorasim calibrate`, holds the five coefficients
** of the linear iteration cost model (backends/backend.h, lsim_cost_model):
**
**   {"lorasim_profile": 1,
**    "cost": {"iter_fixed_ns": N, "prefill_token_ns": N,
**             "decode_token_ns": N, "segment_ns": N, "rank_row_ps": N},
**    ...}   (other keys describe the fit and are ignored when loading)
**
** Version 2, written by `lorasim profile`, holds the profiled model's
** coefficients (lsim_cost_coef) measured at one model shape on one GPU, and
** the host-to-device copy model:
**
**   {"lorasim_profile": 2,
**    "gpu": {"name": S, "class": S, ...},
**    "model": {"preset": S, "layers": N, "hidden": N, "intermediate": N,
**              "q_heads": N, "kv_heads": N, "head_dim": N, "vocab": N,
**              "dtype_bytes": N},
**    "coefficients": {"iter_fixed_ns": X, ... one per lsim_cost_terms()},
**    "copy": {"latency_ns": X, "gbps": X},          (optional)
**    ...}   (created, commit, grid, fit, copy_fit, measurements: written
**             for readers, checked for type only)
**
** A scenario names one with $.cost.profile, `lorasim replay --profile FILE`
** does, or $.gpu with $.model.preset picks the committed one
** (profiles/GPU/PRESET.json).  A version 1 profile replaces $.cost's five
** coefficients; a version 2 profile must match the scenario's model shape
** (E_DEV_PROFILE_SHAPE otherwise) and replaces the linear model by the
** profiled one, and its copy model replaces $.workers.h2d_gbps and
** load_fixed_us for adapter loads.
*/
#ifndef LSIM_PROFILE_H
#define LSIM_PROFILE_H

#include "../backends/backend.h"
#include "../backends/shape.h"
#include "../engine/lsim.h"

#define LSIM_PROFILE_VERSION 2 /* the newest version this build reads */
#define LSIM_PROFILE_TEXT_MAX 128

typedef struct lsim_profile {
  int version;            /* 1 or 2 */
  lsim_cost_model linear; /* version 1: the five coefficients (prof off) */
  /* version 2 */
  lsim_cost_coef coef;
  int copy_on;            /* "copy" given */
  double copy_latency_ns, copy_gbps;
  char gpu_name[LSIM_PROFILE_TEXT_MAX];
  char gpu_class[LSIM_PROFILE_TEXT_MAX];
  char preset[LSIM_SHAPE_NAME_MAX]; /* "" when the shape was custom */
  int layers;
  int64_t hidden, intermediate, q_heads, kv_heads, head_dim, vocab;
  int dtype_bytes;
} lsim_profile;

/* Read a profile of either version.  E_IO (unreadable), E_DEV_PROFILE (not
** JSON, no known "lorasim_profile" version, a missing, mistyped or out of
** range key), naming the file and the JSON path. */
lsim_err lsim_profile_read(const char *path, lsim_profile *out,
                           lsim_errbuf *eb);

/* Whether a version 2 profile was measured at shape s: every dimension of
** the profile's model equal to s's (s must be full: a partial shape has
** no hidden size to compare).  0, or E_DEV_PROFILE_SHAPE with a message
** naming the first key that differs, both values and the profile's file. */
lsim_err lsim_profile_check_shape(const lsim_profile *p, const char *file,
                                  const lsim_model_shape *s,
                                  lsim_errbuf *eb);

/* The version 1 reader, kept for its callers: the five coefficients of a
** version 1 profile (a version 2 profile is E_DEV_PROFILE at
** $.lorasim_profile: it needs a model shape, lsim_profile_read). */
lsim_err lsim_profile_load(const char *path, lsim_cost_model *out,
                           lsim_errbuf *eb);

#endif /* LSIM_PROFILE_H */
