/*
** exec_witness.h: what `lorasim exec` offers beyond the linear batch of
** shared/spec/exec-json.md (docs/EXEC.md):
**
**   - "mode": "kv_witness"  the exact two-layer K/V dependency witness
**                           (backends/cpu_ref/kvwitness.h) run on a base
**                           and an adapted model, with every intermediate
**                           and a reuse verdict;
**   - "tp": {...}           the batch's adapter branch run rank by rank
**                           through the exact sharded reference
**                           (backends/cpu_ref/tp.h), every rank's
**                           intermediates in the output, the assembled
**                           result checked against the unsharded one;
**   - "emit": ["z"]         the shrink output Z = X A^T of every row.
**
** All three are opt-in: a batch without these keys gives the output it
** always gave, byte for byte.  Each function reads its keys from the parsed
** batch with cJSON and, on failure, writes the JSON path of the fault to
** path[np] and returns the code with the message in eb (exec.c prints
** both).  Nothing here prints or writes files.
*/
#ifndef LSIM_EXEC_WITNESS_H
#define LSIM_EXEC_WITNESS_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "../backends/cpu_ref/cpu_ref.h"
#include "../engine/rowplan.h"

enum lsim_exec_mode {
  LSIM_EXEC_MODE_LINEAR = 0,    /* no "mode", or "linear" */
  LSIM_EXEC_MODE_KV_WITNESS = 1 /* "kv_witness" */
};

/* *mode := the batch's mode; E_TYPE at $.mode for anything else.  A root
** that is not an object is LINEAR here (the linear parser reports it). */
lsim_err lsim_exec_mode_of(const cJSON *root, int *mode, char *path,
                           size_t np, lsim_errbuf *eb);

/* Run a kv_witness batch; on success *res is the result object (the
** caller deletes it). */
lsim_err lsim_exec_witness(const cJSON *root, cJSON **res, char *path,
                           size_t np, lsim_errbuf *eb);

/* What a linear batch computed, as exec.c holds it. */
typedef struct lsim_exec_view {
  const lsim_rowplan *plan;
  const lsim_qmat *X;         /* [T][d_in] packed rows */
  const lsim_qmat *W;         /* [d_out][d_in] */
  const lsim_qadapter *ad;    /* [nad], ad[i].id == i */
  int nad;
  const char *const *ad_names; /* [nad] */
  const lsim_qmat *D;         /* [T][d_out] the delta, packed rows */
  const lsim_qmat *Y;         /* [T][d_out] the output, packed rows */
  const int *order;           /* [T] packed row of each scheduler-order row */
  int path;                   /* the cpu_ref path run, -1 for all */
  int use_cuda;               /* D came from the GPU */
} lsim_exec_view;

/* Add "z" (when $.emit asks for it) and "tp" (when $.tp is present) to
** res.  A batch with neither is left untouched.  E_TYPE/E_MISSING for
** malformed keys, E_TP_WORLD / E_TP_DIV / E_TP_FIELD for a tp object the
** batch cannot be sharded by, E_BACKEND with the cuda backend,
** E_PATH_MISMATCH when the sharded result differs from the unsharded one. */
lsim_err lsim_exec_extras(const cJSON *root, const lsim_exec_view *v,
                          cJSON *res, char *path, size_t np, lsim_errbuf *eb);

#endif /* LSIM_EXEC_WITNESS_H */
