/*
** merge.h: merge and unmerge of an adapter delta into stored base weights,
** in binary16 (C's _Float16; gcc supports it on x86-64 and AArch64).
**
** In exact arithmetic W = (W + D) - D.  In binary16 it is not: merging 1
** into 2048 rounds back to 2048 (the unit in the last place there is 2),
** and subtracting 1 then rounds to 2047.  Every value stays finite, so a
** finiteness check cannot see the drift.  The rules that follow
** (docs/RESIDENCY.md, "Merge and unmerge"):
**
**   - the immutable clean base is the rollback source: lsim_f16_restore
**     copies it back; an arithmetic unmerge is a convenience operation;
**   - lsim_f16_rollback_check fails with E_RES_UNMERGE_INEXACT when an
**     arithmetic unmerge did not reproduce the clean base bit for bit;
**   - a whole-model merge is staged: lsim_f16_merge_model merges every
**     layer into a caller-owned staging copy and installs it only when all
**     layers succeeded (finite); a failing layer leaves the live weights
**     untouched.  lsim_f16_merge_inplace is the per-layer in-place variant;
**     when a later layer fails after earlier ones changed it reports
**     E_RES_PARTIAL_MERGE (it is not a whole-model transaction).
*/
#ifndef LSIM_MERGE_H
#define LSIM_MERGE_H

#include "../engine/lsim.h"

#if !defined(__FLT16_MANT_DIG__)
#error "lsim merge.h needs the C _Float16 type (gcc/clang on x86-64 or AArch64)"
#endif

typedef _Float16 lsim_f16;

/* w[i] := round16(w[i] + d[i]) */
void lsim_f16_merge(lsim_f16 *w, const lsim_f16 *d, size_t n);
/* w[i] := round16(w[i] - d[i]) */
void lsim_f16_unmerge(lsim_f16 *w, const lsim_f16 *d, size_t n);
/* w := clean (reload the immutable base) */
void lsim_f16_restore(lsim_f16 *w, const lsim_f16 *clean, size_t n);
/* 0 when w equals clean bit for bit, else E_RES_UNMERGE_INEXACT naming the
** first differing element. */
lsim_err lsim_f16_rollback_check(const lsim_f16 *w, const lsim_f16 *clean,
                                 size_t n, lsim_errbuf *eb);

/* A model of `layers` layers of n weights each, laid out layer after layer. */
/* Staged whole-model merge: staging (layers*n) receives w + d per layer; a
** non-finite result in any layer fails with E_RES_LAYOUT naming the layer
** and w is untouched; on success w := staging. */
lsim_err lsim_f16_merge_model(lsim_f16 *w, const lsim_f16 *d,
                              lsim_f16 *staging, int layers, size_t n,
                              lsim_errbuf *eb);
/* In-place per-layer merge: stops at the first non-finite layer and returns
** E_RES_PARTIAL_MERGE when earlier layers were already changed (E_RES_LAYOUT
** when the first layer failed and nothing changed). */
lsim_err lsim_f16_merge_inplace(lsim_f16 *w, const lsim_f16 *d, int layers,
                                size_t n, lsim_errbuf *eb);

#endif /* LSIM_MERGE_H */
