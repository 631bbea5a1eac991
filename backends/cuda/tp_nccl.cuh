/*
** tp_nccl.cuh: the tensor-parallel adapter schedule on real GPUs (docs/TP.md,
** "The NCCL path").  One host thread drives one GPU; NCCL carries the
** adapter collectives:
**
**   column parallel  Z_j^T = A_j X^T on rank j           (a [r/N][T] block)
**                    ncclAllGather -> Z^T [r][T]          (rank order = the
**                                                          rank axis)
**                    D_j = Z B_j^T, stays on rank j       [T][d_out/N]
**   row parallel     P_j = H_j A_j^T                      [T][r] partial
**                    ncclAllReduce(sum) -> Z = H A^T
**                    Yc_j = H_j W_j^T (base partial), then D_j = Z B_j^T
**                    added into Yc_j's columns [j d_out/N, ...)
**                    ncclAllReduce(sum) of Yc_j -> Y = H W^T + H A^T B^T:
**                    the base's final all-reduce carries the adapter slices
**
** The sequence itself is tp_step.h, shared with the host emulation in
** tests/test_tp.c.  Integer mode (int64 tensors, ncclInt64) is exact, so tools/tp_nccl.cu
** compares it with the host reference (tools/tp_host_ref.h, proven equal to
** cpu_ref in tests/test_tp.c) with ==.
**
** NCCL is opened with dlopen("libnccl.so.2") so the binary needs no NCCL at
** link time and reports a skip when it is absent.  NVLink SHARP / multicast
** stays off: lsim_nccl_open() sets NCCL_NVLS_ENABLE=0 before NCCL reads its
** environment, and nothing here creates a multicast object.
*/
#ifndef LSIM_TP_NCCL_CUH
#define LSIM_TP_NCCL_CUH

#include <cuda_runtime.h>
#include <nccl.h>
#include <stdint.h>

#include "tp_step.h"

/* The NCCL entry points used here, resolved at run time. */
typedef struct lsim_nccl_api {
  void *handle;
  ncclResult_t (*GetUniqueId)(ncclUniqueId *);
  ncclResult_t (*CommInitRank)(ncclComm_t *, int, ncclUniqueId, int);
  ncclResult_t (*CommDestroy)(ncclComm_t);
  ncclResult_t (*AllReduce)(const void *, void *, size_t, ncclDataType_t,
                            ncclRedOp_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*AllGather)(const void *, void *, size_t, ncclDataType_t,
                            ncclComm_t, cudaStream_t);
  ncclResult_t (*GroupStart)(void);
  ncclResult_t (*GroupEnd)(void);
  const char *(*GetErrorString)(ncclResult_t);
  ncclResult_t (*GetVersion)(int *);
} lsim_nccl_api;

/* 0 and a filled table, or -1 with a message in msg[len]. */
int lsim_nccl_open(lsim_nccl_api *api, char *msg, size_t len);
void lsim_nccl_close(lsim_nccl_api *api);

/*
** out[t*ot + n*on] (+)= sum_{k<K} X[t*xt + k*xk] * F[n*fn + k*fk] for
** t < rows, n < cols, exact int64; acc 1 adds into out.  Asynchronous on
** stream; returns the launch error.
*/
cudaError_t lsim_tp_mm_i64(int rows, int cols, int K, const long long *X,
                           long xt, long xk, const long long *F, long fn,
                           long fk, long long *out, long ot, long on, int acc,
                           cudaStream_t stream);

/* Enqueue both schedules of tp_step.h for one rank on `stream` (s holds
** device pointers; d1 and y hold the results when the stream is done).
** Returns 0, an ncclResult_t, or 1000 + a cudaError_t. */
int lsim_tp_step_i64(const lsim_nccl_api *api, ncclComm_t comm,
                     cudaStream_t stream, const lsim_tp_rank_i64 *s);

#endif /* LSIM_TP_NCCL_CUH */
