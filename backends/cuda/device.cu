/*
** device.cu: device probe and a checked self-test kernel.
*/
#include <stdio.h>
#include <stdlib.h>

#include "common.cuh"

extern "C" int lsim_cuda_factor_hint(void) { return LSIM_FACTOR_HINT; }

extern "C" int lsim_cuda_describe(char *buf, size_t n) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    snprintf(buf, n, "no usable device (%s)", cudaGetErrorString(e));
    return 0;
  }
  if (count == 0) {
    snprintf(buf, n, "no device");
    return 0;
  }
  cudaDeviceProp p;
  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) {
    snprintf(buf, n, "%d device(s); properties unavailable", count);
    return count;
  }
  snprintf(buf, n, "%d device(s); device 0: %s, sm_%d%d, %d SMs, %.1f GiB",
           count, p.name, p.major, p.minor, p.multiProcessorCount,
           (double)p.totalGlobalMem / (1024.0 * 1024.0 * 1024.0));
  return count;
}

/* y[i] = a * x[i] + b with small integers: exact in float32. */
__global__ void lsim__axpb(const float *x, float *y, float a, float b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    y[i] = a * x[i] + b;
}

extern "C" lsim_err lsim_cuda_selftest(int n, lsim_errbuf *eb) {
  lsim_err rc = 0;
  float *hx = NULL, *hy = NULL, *dx = NULL, *dy = NULL;
  size_t bytes = (size_t)n * sizeof(float);
  if (n < 1)
    return lsim_fail(eb, LSIM_E_USAGE, "selftest needs n >= 1");
  hx = (float *)malloc(bytes);
  hy = (float *)malloc(bytes);
  if (!hx || !hy) {
    rc = lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
    goto out;
  }
  for (int i = 0; i < n; i++)
    hx[i] = (float)((i * 37) % 201 - 100); /* non-zero pattern, exact */
  LSIM_CUDA_TRY(cudaMalloc((void **)&dx, bytes), eb);
  LSIM_CUDA_TRY(cudaMalloc((void **)&dy, bytes), eb);
  LSIM_CUDA_TRY(cudaMemcpy(dx, hx, bytes, cudaMemcpyHostToDevice), eb);
  /* poison the output so an unwritten element cannot pass */
  LSIM_CUDA_TRY(cudaMemset(dy, 0xFF, bytes), eb);
  lsim__axpb<<<(n + 255) / 256, 256>>>(dx, dy, 3.0f, -7.0f, n);
  LSIM_CUDA_TRY(cudaGetLastError(), eb);
  LSIM_CUDA_TRY(cudaDeviceSynchronize(), eb);
  LSIM_CUDA_TRY(cudaMemcpy(hy, dy, bytes, cudaMemcpyDeviceToHost), eb);
  for (int i = 0; i < n; i++) {
    float want = 3.0f * hx[i] - 7.0f;
    if (hy[i] != want) {
      rc = lsim_fail(eb, LSIM_E_BACKEND,
                     "selftest mismatch at %d: got %g want %g", i,
                     (double)hy[i], (double)want);
      goto out;
    }
  }
out:
  if (dx)
    cudaFree(dx);
  if (dy)
    cudaFree(dy);
  free(hx);
  free(hy);
  return rc;
}
