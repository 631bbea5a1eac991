/*
** compress_gpu.h: the three-stage shared-basis operator on the GPU
** (compress.cu, kernels in compress.cuh; docs/COMPRESSION.md).
**
** A context holds one module's compressed collection on the device: the
** per-cluster bases V_c [d_in][R] and U_c (kept transposed), the
** per-adapter cores (R x R for JD-Full, R for JD-Diag) and the cluster of
** every adapter.  lsim_cuda_jd_run adds ((X V_c) Sigma_a^T) U_c^T into Y
** for every row whose adapter is not -1; base-only rows are untouched.
** Values are fp32.  Built only with LSIM_HAVE_CUDA; CUDA failures are
** LSIM_E_BACKEND, bad arguments LSIM_E_USAGE; nothing prints or aborts.
*/
#ifndef LSIM_CUDA_COMPRESS_GPU_H
#define LSIM_CUDA_COMPRESS_GPU_H

#include "../../engine/lsim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lsim_cuda_jd lsim_cuda_jd; /* opaque */

/*
** U [k][d_out][R], V [k][d_in][R], cores [n][R*R] (diag = 0) or [n][R]
** (diag = 1), cluster [n] in 0..k-1; host arrays, copied (the caller
** keeps them).  *out is NULL on failure.
*/
lsim_err lsim_cuda_jd_open(lsim_cuda_jd **out, int diag, int d_in, int d_out,
                           int R, int k, int n, const float *U,
                           const float *V, const float *cores,
                           const int *cluster, lsim_errbuf *eb);
/*
** Host convenience for tests and tools: X [N][d_in], row_adapter [N]
** (-1 = base-only), Y [N][d_out] read, updated in place and copied back.
** Synchronous.
*/
lsim_err lsim_cuda_jd_run(lsim_cuda_jd *J, const float *X,
                          const int *row_adapter, int N, float *Y,
                          lsim_errbuf *eb);
void lsim_cuda_jd_close(lsim_cuda_jd *J);

#ifdef __cplusplus
}
#endif

#endif /* LSIM_CUDA_COMPRESS_GPU_H */
