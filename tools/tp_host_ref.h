/*
** tp_host_ref.h: the tensor-parallel schedule of backends/cpu_ref/tp.h in
** plain int64 host arithmetic, for the two-GPU NCCL test (tools/tp_nccl.cu)
** where GMP headers are not available.  tests/test_tp.c proves that these
** functions equal the exact GMP reference on the article fixture and on
** random shapes, so the NCCL test's expectations are cpu_ref's by proxy.
**
** Repository orientation, row-major: X/H [T][d_in], A [r][d_in],
** B [d_out][r], W [d_out][d_in].  The caller keeps values small enough that
** no sum overflows int64 (the NCCL test draws entries in -8..8).
** Header-only, C and CUDA host code; no allocation.
*/
#ifndef LSIM_TP_HOST_REF_H
#define LSIM_TP_HOST_REF_H

#include <stdint.h>

/* Column parallel: D [T][d_out] = concat_j ( gather_j(X A_j^T) B_j^T ).
** z [T][r] is caller scratch. */
static inline void lsim_tph_col(int T, int din, int dout, int r, int N,
                                const int64_t *X, const int64_t *A,
                                const int64_t *B, int64_t *z, int64_t *D) {
  int rs = r / N, os = dout / N;
  /* Each rank j computes its rank slice; the gather lays them in order. */
  for (int j = 0; j < N; j++)
    for (int t = 0; t < T; t++)
      for (int k = 0; k < rs; k++) {
        int64_t s = 0;
        for (int i = 0; i < din; i++)
          s += X[(int64_t)t * din + i] * A[(int64_t)(j * rs + k) * din + i];
        z[(int64_t)t * r + j * rs + k] = s;
      }
  for (int j = 0; j < N; j++)
    for (int t = 0; t < T; t++)
      for (int o = 0; o < os; o++) {
        int64_t s = 0;
        for (int k = 0; k < r; k++)
          s += z[(int64_t)t * r + k] * B[(int64_t)(j * os + o) * r + k];
        D[(int64_t)t * dout + j * os + o] = s;
      }
}

/* Row parallel with the fused final all-reduce:
** Y [T][d_out] = sum_j ( H_j W_j^T + E_j( (sum_i H_i A_i^T) B_j^T ) ).
** W may be NULL.  z [T][r] is caller scratch. */
static inline void lsim_tph_row(int T, int din, int dout, int r, int N,
                                const int64_t *H, const int64_t *A,
                                const int64_t *B, const int64_t *W,
                                int64_t *z, int64_t *Y) {
  int is = din / N, os = dout / N;
  for (int64_t q = 0; q < (int64_t)T * r; q++)
    z[q] = 0;
  for (int j = 0; j < N; j++) /* partial sums, all-reduced in rank order */
    for (int t = 0; t < T; t++)
      for (int k = 0; k < r; k++) {
        int64_t s = 0;
        for (int i = j * is; i < (j + 1) * is; i++)
          s += H[(int64_t)t * din + i] * A[(int64_t)k * din + i];
        z[(int64_t)t * r + k] += s;
      }
  for (int64_t q = 0; q < (int64_t)T * dout; q++)
    Y[q] = 0;
  for (int j = 0; j < N; j++)
    for (int t = 0; t < T; t++) {
      if (W)
        for (int o = 0; o < dout; o++) {
          int64_t s = 0;
          for (int i = j * is; i < (j + 1) * is; i++)
            s += H[(int64_t)t * din + i] * W[(int64_t)o * din + i];
          Y[(int64_t)t * dout + o] += s;
        }
      for (int o = 0; o < os; o++) {
        int64_t s = 0;
        for (int k = 0; k < r; k++)
          s += z[(int64_t)t * r + k] * B[(int64_t)(j * os + o) * r + k];
        Y[(int64_t)t * dout + j * os + o] += s;
      }
    }
}

#endif /* LSIM_TP_HOST_REF_H */
