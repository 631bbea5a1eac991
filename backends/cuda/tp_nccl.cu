/*
** tp_nccl.cu: exact int64 kernels and the per-rank TP step over NCCL
** (tp_nccl.cuh).  Plain one-thread-per-output kernels: the tensors of the
** exactness test are tiny; the benchmark in tools/tp_nccl.cu measures the
** collectives, not these products.
*/
#include "tp_nccl.cuh"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int lsim_nccl_open(lsim_nccl_api *api, char *msg, size_t len) {
  /* Before NCCL initialises: no NVLink SHARP, hence no multicast objects. */
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  api->handle = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (!api->handle) {
    snprintf(msg, len, "cannot open libnccl.so.2 (%s)", dlerror());
    return -1;
  }
#define LSIM__SYM(field, name)                                              \
  do {                                                                      \
    *(void **)&api->field = dlsym(api->handle, name);                       \
    if (!api->field) {                                                      \
      snprintf(msg, len, "libnccl.so.2 lacks %s", name);                    \
      dlclose(api->handle);                                                 \
      api->handle = NULL;                                                   \
      return -1;                                                            \
    }                                                                       \
  } while (0)
  LSIM__SYM(GetUniqueId, "ncclGetUniqueId");
  LSIM__SYM(CommInitRank, "ncclCommInitRank");
  LSIM__SYM(CommDestroy, "ncclCommDestroy");
  LSIM__SYM(AllReduce, "ncclAllReduce");
  LSIM__SYM(AllGather, "ncclAllGather");
  LSIM__SYM(GroupStart, "ncclGroupStart");
  LSIM__SYM(GroupEnd, "ncclGroupEnd");
  LSIM__SYM(GetErrorString, "ncclGetErrorString");
  LSIM__SYM(GetVersion, "ncclGetVersion");
#undef LSIM__SYM
  return 0;
}

void lsim_nccl_close(lsim_nccl_api *api) {
  if (api->handle)
    dlclose(api->handle);
  api->handle = NULL;
}

__global__ void lsim__tp_mm_i64(int rows, int cols, int K,
                                const long long *X, long xt, long xk,
                                const long long *F, long fn, long fk,
                                long long *out, long ot, long on, int acc) {
  long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= (long)rows * cols)
    return;
  long t = idx / cols, n = idx % cols;
  long long s = 0;
  for (int k = 0; k < K; k++)
    s += X[t * xt + k * xk] * F[n * fn + k * fk];
  long long *o = out + t * ot + n * on;
  *o = acc ? *o + s : s;
}

cudaError_t lsim_tp_mm_i64(int rows, int cols, int K, const long long *X,
                           long xt, long xk, const long long *F, long fn,
                           long fk, long long *out, long ot, long on, int acc,
                           cudaStream_t stream) {
  long n = (long)rows * cols;
  if (n == 0)
    return cudaSuccess;
  int threads = 128;
  long blocks = (n + threads - 1) / threads;
  lsim__tp_mm_i64<<<(unsigned)blocks, threads, 0, stream>>>(
      rows, cols, K, X, xt, xk, F, fn, fk, out, ot, on, acc);
  return cudaGetLastError();
}

int lsim_tp_step_i64(const lsim_nccl_api *api, ncclComm_t comm,
                     cudaStream_t stream, const lsim_tp_rank_i64 *s) {
  int N = s->N, j = s->j, T = s->T, r = s->r;
  int rs = r / N, os = s->dout / N, is = s->din / N;
  cudaError_t ce;
  ncclResult_t nr;
#define LSIM__CU(x)                                                         \
  if ((ce = (x)) != cudaSuccess)                                            \
  return 1000 + (int)ce
#define LSIM__NC(x)                                                         \
  if ((nr = (x)) != ncclSuccess)                                            \
  return (int)nr
  /* ---- column parallel: Z_j^T [rs][T] = A_j X^T */
  LSIM__CU(lsim_tp_mm_i64(T, rs, s->din, s->x, s->din, 1, s->a1, s->din, 1,
                          s->zt_loc, 1, T, 0, stream));
  /* all-gather in rank order: rank j's block is rows [j rs, (j+1) rs) */
  LSIM__NC(api->AllGather(s->zt_loc, s->zt, (size_t)rs * T, ncclInt64, comm,
                          stream));
  /* D_j [T][os] = Z B_j^T, reading Z through Z^T */
  LSIM__CU(lsim_tp_mm_i64(T, os, r, s->zt, 1, T, s->b1, r, 1, s->d1, os, 1, 0,
                          stream));
  /* ---- row parallel: P_j [T][r] = H_j A_j^T, a partial sum */
  LSIM__CU(lsim_tp_mm_i64(T, r, is, s->h, is, 1, s->a2, is, 1, s->p, r, 1, 0,
                          stream));
  LSIM__NC(api->AllReduce(s->p, s->p, (size_t)T * r, ncclInt64, ncclSum, comm,
                          stream));
  /* base partial Yc_j [T][dout] = H_j W_j^T */
  LSIM__CU(lsim_tp_mm_i64(T, s->dout, is, s->h, is, 1, s->w2, is, 1, s->y,
                          s->dout, 1, 0, stream));
  /* E_j(D_j): Z B_j^T added into this rank's disjoint output columns */
  LSIM__CU(lsim_tp_mm_i64(T, os, r, s->p, r, 1, s->b2, r, 1, s->y + j * os,
                          s->dout, 1, 1, stream));
  /* the base final all-reduce, carrying the adapter slices */
  LSIM__NC(api->AllReduce(s->y, s->y, (size_t)T * s->dout, ncclInt64, ncclSum,
                          comm, stream));
#undef LSIM__CU
#undef LSIM__NC
  return 0;
}
