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

typedef struct lsim__nccl_ud {
  const lsim_nccl_api *api;
  ncclComm_t comm;
  cudaStream_t stream;
} lsim__nccl_ud;

static int lsim__op_mm(void *ud, int rows, int cols, int K, const long long *X,
                       long xt, long xk, const long long *F, long fn, long fk,
                       long long *out, long ot, long on, int acc) {
  cudaError_t e = lsim_tp_mm_i64(rows, cols, K, X, xt, xk, F, fn, fk, out, ot,
                                 on, acc, ((lsim__nccl_ud *)ud)->stream);
  return e == cudaSuccess ? 0 : 1000 + (int)e;
}

static int lsim__op_gather(void *ud, const long long *send, long long *recv,
                           size_t n) {
  lsim__nccl_ud *u = (lsim__nccl_ud *)ud;
  return (int)u->api->AllGather(send, recv, n, ncclInt64, u->comm, u->stream);
}

static int lsim__op_reduce(void *ud, long long *buf, size_t n) {
  lsim__nccl_ud *u = (lsim__nccl_ud *)ud;
  return (int)u->api->AllReduce(buf, buf, n, ncclInt64, ncclSum, u->comm,
                                u->stream);
}

int lsim_tp_step_i64(const lsim_nccl_api *api, ncclComm_t comm,
                     cudaStream_t stream, const lsim_tp_rank_i64 *s) {
  lsim__nccl_ud ud = {api, comm, stream};
  lsim_tp_step_ops ops = {&ud, lsim__op_mm, lsim__op_gather, lsim__op_reduce};
  return lsim_tp_step_run(&ops, s);
}
