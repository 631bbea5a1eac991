/*
** blas.c: cuBLAS opened with dlopen for the whole-model executor (blas.h).
** Only cublas_v2.h's types are used at compile time; the four functions
** are looked up in libcublas.so.13 (CUDA 13), .12, or the unversioned name.
*/
#include "blas.h"

#include <dlfcn.h>
#include <stdlib.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

typedef cublasStatus_t (*lsim__f_create)(cublasHandle_t *);
typedef cublasStatus_t (*lsim__f_destroy)(cublasHandle_t);
typedef cublasStatus_t (*lsim__f_setstream)(cublasHandle_t, cudaStream_t);
typedef cublasStatus_t (*lsim__f_setws)(cublasHandle_t, void *, size_t);
typedef cublasStatus_t (*lsim__f_gemmex)(
    cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
    const void *, const void *, cudaDataType, int, const void *, cudaDataType,
    int, const void *, void *, cudaDataType, int, cublasComputeType_t,
    cublasGemmAlgo_t);

#define LSIM__BLAS_WS ((size_t)32 << 20) /* cuBLAS's own workspace */

struct lsim_blas {
  void *lib;
  cublasHandle_t h;
  lsim__f_destroy destroy;
  lsim__f_gemmex gemm;
  void *ws;
};

void lsim_blas_close(lsim_blas *B) {
  if (!B)
    return;
  if (B->h && B->destroy)
    B->destroy(B->h);
  if (B->ws)
    cudaFree(B->ws);
  if (B->lib)
    dlclose(B->lib);
  free(B);
}

lsim_err lsim_blas_open(lsim_blas **out, void *stream, lsim_errbuf *eb) {
  static const char *const names[] = {"libcublas.so.13", "libcublas.so.12",
                                      "libcublas.so"};
  *out = NULL;
  lsim_blas *B = calloc(1, sizeof *B);
  if (!B)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  for (size_t i = 0; i < sizeof names / sizeof names[0] && !B->lib; i++)
    B->lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!B->lib) {
    const char *why = dlerror();
    lsim_blas_close(B);
    return lsim_fail(eb, LSIM_E_BACKEND,
                     "cuBLAS not found (tried libcublas.so.13, .so.12, .so: "
                     "%s); the whole-model executor needs it",
                     why ? why : "?");
  }
  lsim__f_create cr;
  lsim__f_setstream ss;
  lsim__f_setws sw;
  /* object-to-function pointer casts through memcpy-free unions are what
  ** POSIX dlsym asks for; the cast is the documented idiom */
  *(void **)&cr = dlsym(B->lib, "cublasCreate_v2");
  *(void **)&B->destroy = dlsym(B->lib, "cublasDestroy_v2");
  *(void **)&ss = dlsym(B->lib, "cublasSetStream_v2");
  *(void **)&sw = dlsym(B->lib, "cublasSetWorkspace_v2");
  *(void **)&B->gemm = dlsym(B->lib, "cublasGemmEx");
  if (!cr || !B->destroy || !ss || !sw || !B->gemm) {
    lsim_blas_close(B);
    return lsim_fail(eb, LSIM_E_BACKEND, "cuBLAS: a symbol is missing");
  }
  cublasStatus_t st = cr(&B->h);
  if (st != CUBLAS_STATUS_SUCCESS) {
    B->h = NULL;
    lsim_blas_close(B);
    return lsim_fail(eb, LSIM_E_BACKEND, "cublasCreate: status %d", (int)st);
  }
  cudaError_t ce = cudaMalloc(&B->ws, LSIM__BLAS_WS);
  if (ce != cudaSuccess) {
    B->ws = NULL;
    lsim_blas_close(B);
    return lsim_fail(eb, LSIM_E_BACKEND, "cuBLAS workspace: %s",
                     cudaGetErrorString(ce));
  }
  if ((st = ss(B->h, (cudaStream_t)stream)) != CUBLAS_STATUS_SUCCESS ||
      (st = sw(B->h, B->ws, LSIM__BLAS_WS)) != CUBLAS_STATUS_SUCCESS) {
    lsim_blas_close(B);
    return lsim_fail(eb, LSIM_E_BACKEND, "cuBLAS stream/workspace: status %d",
                     (int)st);
  }
  *out = B;
  return 0;
}

lsim_err lsim_blas_gemm(lsim_blas *B, int T, int N, int K, const void *X,
                        int ldx, const void *W, void *Y, int ldy, float beta,
                        int y_fp32, lsim_errbuf *eb) {
  const float one = 1.0f;
  if (T == 0)
    return 0;
  /* column-major view: Y^T [N][T] = (W as K x N)^T (X^T as K x T) */
  cublasStatus_t st = B->gemm(
      B->h, CUBLAS_OP_T, CUBLAS_OP_N, N, T, K, &one, W, CUDA_R_16BF, K, X,
      CUDA_R_16BF, ldx, &beta, Y, y_fp32 ? CUDA_R_32F : CUDA_R_16BF, ldy,
      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS)
    return lsim_fail(eb, LSIM_E_BACKEND,
                     "cublasGemmEx (%d x %d x %d): status %d", T, N, K,
                     (int)st);
  return 0;
}
