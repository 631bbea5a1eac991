/*
** tp_step.h: the per-rank sequence of the exact tensor-parallel step, as
** plain C over three operations (a strided int64 product, an all-gather
** and a SUM all-reduce), so that the very sequence the GPUs run
** (backends/cuda/tp_nccl.cu: CUDA kernels and NCCL) is also run on the
** host with emulated collectives (tests/test_tp.c) in CI, without a GPU.
**
**   column parallel  Z_j^T = A_j X^T          a [r/N][T] block
**                    all-gather -> Z^T [r][T] (rank blocks in rank order)
**                    D_j = Z B_j^T            stays on rank j [T][d_out/N]
**   row parallel     P_j = H_j A_j^T          [T][r] partial sum
**                    all-reduce(sum) in place -> Z = H A^T
**                    Yc_j = H_j W_j^T         base partial [T][d_out]
**                    Yc_j[:, j d_out/N ...) += Z B_j^T   the fused slice
**                    all-reduce(sum) of Yc_j  -> Y = H W^T + H A^T B^T
**
** Header-only; no allocation.  Operations return 0 or their own nonzero
** error code, which the step returns unchanged.
*/
#ifndef LSIM_TP_STEP_H
#define LSIM_TP_STEP_H

#include <stddef.h>

/* One rank's tensors (device or host memory, as the operations expect). */
typedef struct lsim_tp_rank_i64 {
  int N, j;            /* degree, this rank */
  int T, din, dout, r; /* global shapes */
  /* column: X [T][din] full, A_j [r/N][din], B_j [dout/N][r];
  ** scratch zt_loc [r/N][T], zt [r][T]; result d1 [T][dout/N] */
  long long *x, *a1, *b1, *zt_loc, *zt, *d1;
  /* row: H_j [T][din/N], A_j [r][din/N], B_j [dout/N][r],
  ** W_j [dout][din/N]; scratch p [T][r]; result y [T][dout] */
  long long *h, *a2, *b2, *w2, *p, *y;
} lsim_tp_rank_i64;

typedef struct lsim_tp_step_ops {
  void *ud;
  /* out[t*ot + n*on] (+)= sum_{k<K} X[t*xt + k*xk] * F[n*fn + k*fk] */
  int (*mm)(void *ud, int rows, int cols, int K, const long long *X, long xt,
            long xk, const long long *F, long fn, long fk, long long *out,
            long ot, long on, int acc);
  /* recv = the n-element send blocks of ranks 0..N-1, concatenated */
  int (*all_gather)(void *ud, const long long *send, long long *recv,
                    size_t n);
  /* buf = the elementwise sum of every rank's buf */
  int (*all_reduce_sum)(void *ud, long long *buf, size_t n);
} lsim_tp_step_ops;

static inline int lsim_tp_step_run(const lsim_tp_step_ops *o,
                                   const lsim_tp_rank_i64 *s) {
  int N = s->N, j = s->j, T = s->T, r = s->r;
  int rs = r / N, os = s->dout / N, is = s->din / N;
  int rc;
  /* ---- column parallel */
  if ((rc = o->mm(o->ud, T, rs, s->din, s->x, s->din, 1, s->a1, s->din, 1,
                  s->zt_loc, 1, T, 0)))
    return rc;
  if ((rc = o->all_gather(o->ud, s->zt_loc, s->zt, (size_t)rs * T)))
    return rc;
  if ((rc = o->mm(o->ud, T, os, r, s->zt, 1, T, s->b1, r, 1, s->d1, os, 1,
                  0)))
    return rc;
  /* ---- row parallel */
  if ((rc = o->mm(o->ud, T, r, is, s->h, is, 1, s->a2, is, 1, s->p, r, 1, 0)))
    return rc;
  if ((rc = o->all_reduce_sum(o->ud, s->p, (size_t)T * r)))
    return rc;
  if ((rc = o->mm(o->ud, T, s->dout, is, s->h, is, 1, s->w2, is, 1, s->y,
                  s->dout, 1, 0)))
    return rc;
  if ((rc = o->mm(o->ud, T, os, r, s->p, r, 1, s->b2, r, 1, s->y + j * os,
                  s->dout, 1, 1)))
    return rc;
  return o->all_reduce_sum(o->ud, s->y, (size_t)T * s->dout);
}

#endif /* LSIM_TP_STEP_H */
