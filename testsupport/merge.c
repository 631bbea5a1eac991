/*
** merge.c: binary16 merge / unmerge and the staged whole-model merge.
** Each operation rounds once per element to binary16 (the compiler
** evaluates _Float16 arithmetic in float and rounds on assignment, which is
** the correctly rounded binary16 result for one addition).
*/
#include "merge.h"

#include <math.h>
#include <string.h>

void lsim_f16_merge(lsim_f16 *w, const lsim_f16 *d, size_t n) {
  for (size_t i = 0; i < n; i++)
    w[i] = (lsim_f16)(w[i] + d[i]);
}

void lsim_f16_unmerge(lsim_f16 *w, const lsim_f16 *d, size_t n) {
  for (size_t i = 0; i < n; i++)
    w[i] = (lsim_f16)(w[i] - d[i]);
}

void lsim_f16_restore(lsim_f16 *w, const lsim_f16 *clean, size_t n) {
  memmove(w, clean, n * sizeof *w);
}

lsim_err lsim_f16_rollback_check(const lsim_f16 *w, const lsim_f16 *clean,
                                 size_t n, lsim_errbuf *eb) {
  for (size_t i = 0; i < n; i++)
    if (memcmp(&w[i], &clean[i], sizeof w[i]) != 0)
      return lsim_fail(eb, LSIM_E_RES_UNMERGE_INEXACT,
                       "element %zu is %g after unmerge, the clean base has %g: "
                       "reload the immutable base",
                       i, (double)w[i], (double)clean[i]);
  return 0;
}

static int lsim__layer_finite(const lsim_f16 *x, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!isfinite((double)x[i]))
      return 0;
  return 1;
}

lsim_err lsim_f16_merge_model(lsim_f16 *w, const lsim_f16 *d,
                              lsim_f16 *staging, int layers, size_t n,
                              lsim_errbuf *eb) {
  for (int l = 0; l < layers; l++) {
    size_t off = (size_t)l * n;
    for (size_t i = 0; i < n; i++)
      staging[off + i] = (lsim_f16)(w[off + i] + d[off + i]);
    if (!lsim__layer_finite(staging + off, n))
      return lsim_fail(eb, LSIM_E_RES_LAYOUT,
                       "layer %d merges to a non-finite value; the model is "
                       "unchanged",
                       l);
  }
  memcpy(w, staging, (size_t)layers * n * sizeof *w);
  return 0;
}

lsim_err lsim_f16_merge_inplace(lsim_f16 *w, const lsim_f16 *d, int layers,
                                size_t n, lsim_errbuf *eb) {
  for (int l = 0; l < layers; l++) {
    size_t off = (size_t)l * n;
    lsim_f16 tmp[64];
    int ok = 1;
    /* layer-local safe merge: clone, add, check, install */
    for (size_t i0 = 0; ok && i0 < n; i0 += 64) {
      size_t m = n - i0 < 64 ? n - i0 : 64;
      for (size_t i = 0; i < m; i++)
        tmp[i] = (lsim_f16)(w[off + i0 + i] + d[off + i0 + i]);
      ok = lsim__layer_finite(tmp, m);
    }
    if (!ok)
      return lsim_fail(eb, l > 0 ? LSIM_E_RES_PARTIAL_MERGE : LSIM_E_RES_LAYOUT,
                       "layer %d merges to a non-finite value after %d layers "
                       "were already changed in place",
                       l, l);
    lsim_f16_merge(w + off, d + off, n);
  }
  return 0;
}
