/*
** tp.h: the exact sharded reference of tensor-parallel LoRA (article
** 0x06F).  Every rank's local computation and every collective is carried
** out explicitly on exact rationals, so a sharded result is compared with
** the unsharded one with `==`.
**
** Orientation.  This file takes the repository's logical orientation
** (cpu_ref.h): A [r][d_in], B [d_out][r], base W [d_out][d_in], so that the
** adapter output is X A^T B^T and the base output X W^T.  The article's
** tensor-parallel figures write the same operator as X A B with A [d_in][r]
** and B [r][d_out]; a caller holding that orientation converts with
** lsim_qmat_transpose() before calling (0x06F1).  A factor passed in the
** other orientation fails with E_SHAPE unless the shape is square.
**
** Two schedules, each for a TP degree N that divides the split axes
** (E_TP_DIV otherwise, E_TP_WORLD for N < 1 or N > LSIM_TP_MAX_WORLD):
**
**   column parallel (first projection; base W split on d_out)
**     rank j holds A_j = A[j r/N .. (j+1) r/N)[:]   (rank axis of A)
**                  B_j = B[j d_out/N .. )[:]         (output axis of B)
**     Z_j = X A_j^T                                  [T][r/N]
**     Z   = all-gather of Z_0..Z_{N-1} on the rank axis, rank order  [T][r]
**     D_j = Z B_j^T                                  [T][d_out/N]
**     D   = concatenation of D_j on the output axis  == X A^T B^T
**
**   row parallel (second projection; base W split on d_in)
**     rank j holds H_j = H[:][j d_in/N .. )          (its activation shard)
**                  A_j = A[:][j d_in/N .. )          (input axis of A)
**                  B_j = B[j d_out/N .. )[:]         (output axis of B)
**                  W_j = W[:][j d_in/N .. )          (the base shard)
**     P_j = H_j A_j^T        a partial sum           [T][r]
**     Z   = all-reduce (+) of P_0..P_{N-1}           [T][r] == H A^T
**     D_j = Z B_j^T                                  [T][d_out/N]
**     Yb_j = H_j W_j^T       base partial            [T][d_out]
**     Y   = all-reduce (+) of Yb_j + E_j(D_j), where E_j puts D_j into the
**           columns [j d_out/N, (j+1) d_out/N) of a zero [T][d_out]
**         == H W^T + H A^T B^T
**     The adapter's output slices are disjoint, so the base path's final
**     all-reduce acts as their all-gather: the fusion of 0x06F3.
**
** Traces own every intermediate; lsim_tp_*_trace_clear() frees them and is
** safe on a zeroed trace.  On failure the trace is cleared.  Nothing here
** prints or aborts.
*/
#ifndef LSIM_CPU_REF_TP_H
#define LSIM_CPU_REF_TP_H

#include "cpu_ref.h"
#include "../../engine/tp.h"

#ifdef __cplusplus
extern "C" {
#endif


/* dst := src^T (output-matrix rule of cpu_ref.h). */
lsim_err lsim_qmat_transpose(lsim_qmat *dst, const lsim_qmat *src,
                             lsim_errbuf *eb);
/* dst := src[r0..r1)[c0..c1) (output-matrix rule); E_SHAPE out of range. */
lsim_err lsim_qmat_slice(lsim_qmat *dst, const lsim_qmat *src, int r0, int r1,
                         int c0, int c1, lsim_errbuf *eb);

/* The collectives, on exact values, parts in rank order 0..n-1. */
/* out := [parts[0] | parts[1] | ...] (column concatenation, equal rows). */
lsim_err lsim_tp_all_gather(const lsim_qmat *parts, int n, lsim_qmat *out,
                            lsim_errbuf *eb);
/* out := parts[0] + parts[1] + ... (equal shapes). */
lsim_err lsim_tp_all_reduce_sum(const lsim_qmat *parts, int n, lsim_qmat *out,
                                lsim_errbuf *eb);

/* Rank j's factor shards of each schedule (see above). */
lsim_err lsim_tp_shard_col(const lsim_qmat *A, const lsim_qmat *B, int world,
                           int rank, lsim_qmat *a_loc, lsim_qmat *b_loc,
                           lsim_errbuf *eb);
lsim_err lsim_tp_shard_row(const lsim_qmat *A, const lsim_qmat *B, int world,
                           int rank, lsim_qmat *a_loc, lsim_qmat *b_loc,
                           lsim_errbuf *eb);

typedef struct lsim_tp_col_trace {
  int world;
  lsim_qmat z_local[LSIM_TP_MAX_WORLD]; /* Z_j  [T][r/N] */
  lsim_qmat z;                          /* gathered [T][r] */
  lsim_qmat d_local[LSIM_TP_MAX_WORLD]; /* D_j  [T][d_out/N] */
  lsim_qmat d;                          /* concatenated [T][d_out] */
} lsim_tp_col_trace;

typedef struct lsim_tp_row_trace {
  int world;
  lsim_qmat p_local[LSIM_TP_MAX_WORLD];  /* P_j  [T][r] partial sums */
  lsim_qmat z;                           /* all-reduced [T][r] */
  lsim_qmat d_local[LSIM_TP_MAX_WORLD];  /* D_j  [T][d_out/N] */
  lsim_qmat d;                           /* sum of E_j(D_j) [T][d_out] */
  lsim_qmat yb_local[LSIM_TP_MAX_WORLD]; /* Yb_j [T][d_out] (zero if no W) */
  lsim_qmat y;                           /* the fused final all-reduce */
} lsim_tp_row_trace;

void lsim_tp_col_trace_clear(lsim_tp_col_trace *t);
void lsim_tp_row_trace_clear(lsim_tp_row_trace *t);

/* Column-parallel adapter on X [T][d_in]; A [r][d_in], B [d_out][r]. */
lsim_err lsim_tp_ref_col(const lsim_qmat *X, const lsim_qmat *A,
                         const lsim_qmat *B, int world, lsim_tp_col_trace *t,
                         lsim_errbuf *eb);
/* Row-parallel adapter on H [T][d_in] with base W [d_out][d_in] (W may be
** NULL: no base path, Y == D). */
lsim_err lsim_tp_ref_row(const lsim_qmat *H, const lsim_qmat *A,
                         const lsim_qmat *B, const lsim_qmat *W, int world,
                         lsim_tp_row_trace *t, lsim_errbuf *eb);

/* Unsharded: out := X A^T B^T (+ X W^T when W is not NULL). */
lsim_err lsim_tp_ref_full(const lsim_qmat *X, const lsim_qmat *A,
                          const lsim_qmat *B, const lsim_qmat *W,
                          lsim_qmat *out, lsim_errbuf *eb);

#ifdef __cplusplus
}
#endif

#endif /* LSIM_CPU_REF_TP_H */
