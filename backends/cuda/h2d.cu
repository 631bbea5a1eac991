/*
** h2d.cu: pinned host-to-device copy timing and the device's identity
** (h2d.h), for `lorasim profile`'s copy model.
*/
#include <stdio.h>

#include "common.cuh"
#include "h2d.h"

extern "C" lsim_err lsim_cuda_h2d_time(size_t bytes, int reps, int64_t *ns,
                                       lsim_errbuf *eb) {
  lsim_err rc = 0;
  void *h = NULL, *d = NULL;
  cudaStream_t s = NULL;
  cudaEvent_t a = NULL, b = NULL;
  if (bytes == 0 || reps < 1 || reps > 64)
    return lsim_fail(eb, LSIM_E_USAGE, "h2d timing: %zu bytes, %d reps",
                     bytes, reps);
  LSIM_CUDA_TRY(cudaMallocHost(&h, bytes), eb);
  LSIM_CUDA_TRY(cudaMalloc(&d, bytes), eb);
  /* touch the host pages so the first copy does not pay for faulting */
  memset(h, 0x5A, bytes);
  LSIM_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), eb);
  LSIM_CUDA_TRY(cudaEventCreate(&a), eb);
  LSIM_CUDA_TRY(cudaEventCreate(&b), eb);
  for (int r = 0; r < reps; r++) {
    float ms = 0;
    LSIM_CUDA_TRY(cudaEventRecord(a, s), eb);
    LSIM_CUDA_TRY(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, s), eb);
    LSIM_CUDA_TRY(cudaEventRecord(b, s), eb);
    LSIM_CUDA_TRY(cudaEventSynchronize(b), eb);
    LSIM_CUDA_TRY(cudaEventElapsedTime(&ms, a, b), eb);
    ns[r] = (int64_t)((double)ms * 1e6 + 0.5);
    if (ns[r] < 1)
      ns[r] = 1;
  }
out:
  if (a)
    cudaEventDestroy(a);
  if (b)
    cudaEventDestroy(b);
  if (s)
    cudaStreamDestroy(s);
  cudaFree(d);
  cudaFreeHost(h);
  return rc;
}

extern "C" int lsim_cuda_gpu_info(char *name, size_t n, int *driver,
                                  int *runtime, int64_t *mem) {
  cudaDeviceProp p;
  *driver = *runtime = 0;
  *mem = 0;
  cudaDriverGetVersion(driver);
  cudaRuntimeGetVersion(runtime);
  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) {
    snprintf(name, n, "unknown");
    return -1;
  }
  snprintf(name, n, "%s", p.name);
  *mem = (int64_t)p.totalGlobalMem;
  return 0;
}
