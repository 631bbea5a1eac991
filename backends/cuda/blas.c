/*
** blas.c: cuBLAS opened with dlopen for the whole-model executor (blas.h).
** Only cublas_v2.h's and cublasLt.h's types are used at compile time; the
** functions are looked up in libcublas.so.13 (CUDA 13), .12, or the
** unversioned name, and cuBLASLt's (for the GEMM on part of the SMs) in
** libcublasLt of the same versions.
*/
#include "blas.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>
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

/* cuBLASLt */
typedef cublasStatus_t (*lsim__f_lt_create)(cublasLtHandle_t *);
typedef cublasStatus_t (*lsim__f_lt_destroy)(cublasLtHandle_t);
typedef cublasStatus_t (*lsim__f_lt_desc_create)(cublasLtMatmulDesc_t *,
                                                 cublasComputeType_t,
                                                 cudaDataType_t);
typedef cublasStatus_t (*lsim__f_lt_desc_destroy)(cublasLtMatmulDesc_t);
typedef cublasStatus_t (*lsim__f_lt_desc_set)(cublasLtMatmulDesc_t,
                                              cublasLtMatmulDescAttributes_t,
                                              const void *, size_t);
typedef cublasStatus_t (*lsim__f_lt_lay_create)(cublasLtMatrixLayout_t *,
                                                cudaDataType, uint64_t,
                                                uint64_t, int64_t);
typedef cublasStatus_t (*lsim__f_lt_lay_destroy)(cublasLtMatrixLayout_t);
typedef cublasStatus_t (*lsim__f_lt_pref_create)(cublasLtMatmulPreference_t *);
typedef cublasStatus_t (*lsim__f_lt_pref_destroy)(cublasLtMatmulPreference_t);
typedef cublasStatus_t (*lsim__f_lt_pref_set)(
    cublasLtMatmulPreference_t, cublasLtMatmulPreferenceAttributes_t,
    const void *, size_t);
typedef cublasStatus_t (*lsim__f_lt_heur)(
    cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t,
    cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
    cublasLtMatmulPreference_t, int, cublasLtMatmulHeuristicResult_t *, int *);
typedef cublasStatus_t (*lsim__f_lt_cfg_get)(
    const cublasLtMatmulAlgo_t *, cublasLtMatmulAlgoConfigAttributes_t, void *,
    size_t, size_t *);
typedef cublasStatus_t (*lsim__f_lt_matmul)(
    cublasLtHandle_t, cublasLtMatmulDesc_t, const void *, const void *,
    cublasLtMatrixLayout_t, const void *, cublasLtMatrixLayout_t,
    const void *, const void *, cublasLtMatrixLayout_t, void *,
    cublasLtMatrixLayout_t, const cublasLtMatmulAlgo_t *, void *, size_t,
    cudaStream_t);

#define LSIM__BLAS_WS ((size_t)32 << 20) /* cuBLAS's own workspace */
#define LSIM__LT_PLANS 32 /* cached cuBLASLt plans (shape, SM target) */

/* One prepared cuBLASLt GEMM: its descriptors and the heuristic's algo.
** Looked up by every argument that shapes it; filled on first use. */
typedef struct {
  int used;
  int T, N, K, ldx, ldy, y_fp32, sm_target, beta_nz;
  unsigned long long tick; /* last use, for replacement */
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t a, b, c;
  cublasLtMatmulAlgo_t algo;
  float waves; /* the heuristic's wave count (1: the targeted SMs full) */
} lsim__lt_plan;

struct lsim_blas {
  void *lib;
  cublasHandle_t h;
  lsim__f_destroy destroy;
  lsim__f_gemmex gemm;
  void *ws;
  /* cuBLASLt: opened with the library; lt NULL when it is absent */
  void *ltlib;
  cublasLtHandle_t lt;
  lsim__f_lt_destroy lt_destroy;
  lsim__f_lt_desc_create lt_desc_create;
  lsim__f_lt_desc_destroy lt_desc_destroy;
  lsim__f_lt_desc_set lt_desc_set;
  lsim__f_lt_lay_create lt_lay_create;
  lsim__f_lt_lay_destroy lt_lay_destroy;
  lsim__f_lt_pref_create lt_pref_create;
  lsim__f_lt_pref_destroy lt_pref_destroy;
  lsim__f_lt_pref_set lt_pref_set;
  lsim__f_lt_heur lt_heur;
  lsim__f_lt_matmul lt_matmul;
  lsim__f_lt_cfg_get lt_cfg_get; /* optional: describe only */
  cublasLtMatmulPreference_t pref;
  lsim__lt_plan plan[LSIM__LT_PLANS];
  unsigned long long tick;
};

static void lsim__lt_plan_release(lsim_blas *B, lsim__lt_plan *p) {
  if (!p->used)
    return;
  if (p->desc)
    B->lt_desc_destroy(p->desc);
  if (p->a)
    B->lt_lay_destroy(p->a);
  if (p->b)
    B->lt_lay_destroy(p->b);
  if (p->c)
    B->lt_lay_destroy(p->c);
  memset(p, 0, sizeof *p);
}

void lsim_blas_close(lsim_blas *B) {
  if (!B)
    return;
  if (B->lt) {
    for (int i = 0; i < LSIM__LT_PLANS; i++)
      lsim__lt_plan_release(B, &B->plan[i]);
    if (B->pref)
      B->lt_pref_destroy(B->pref);
    B->lt_destroy(B->lt);
  }
  if (B->ltlib)
    dlclose(B->ltlib);
  if (B->h && B->destroy)
    B->destroy(B->h);
  if (B->ws)
    cudaFree(B->ws);
  if (B->lib)
    dlclose(B->lib);
  free(B);
}

/* cuBLASLt, best effort: B->lt stays NULL when the library or a symbol is
** missing or its handle cannot be made (lsim_blas_has_lt says so, and the
** GEMM on part of the SMs is then refused with E_BACKEND). */
static void lsim__lt_open(lsim_blas *B) {
  static const char *const names[] = {"libcublasLt.so.13",
                                      "libcublasLt.so.12", "libcublasLt.so"};
  for (size_t i = 0; i < sizeof names / sizeof names[0] && !B->ltlib; i++)
    B->ltlib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!B->ltlib)
    return;
  lsim__f_lt_create cr;
  *(void **)&cr = dlsym(B->ltlib, "cublasLtCreate");
  *(void **)&B->lt_destroy = dlsym(B->ltlib, "cublasLtDestroy");
  *(void **)&B->lt_desc_create = dlsym(B->ltlib, "cublasLtMatmulDescCreate");
  *(void **)&B->lt_desc_destroy = dlsym(B->ltlib, "cublasLtMatmulDescDestroy");
  *(void **)&B->lt_desc_set =
      dlsym(B->ltlib, "cublasLtMatmulDescSetAttribute");
  *(void **)&B->lt_lay_create = dlsym(B->ltlib, "cublasLtMatrixLayoutCreate");
  *(void **)&B->lt_lay_destroy =
      dlsym(B->ltlib, "cublasLtMatrixLayoutDestroy");
  *(void **)&B->lt_pref_create =
      dlsym(B->ltlib, "cublasLtMatmulPreferenceCreate");
  *(void **)&B->lt_pref_destroy =
      dlsym(B->ltlib, "cublasLtMatmulPreferenceDestroy");
  *(void **)&B->lt_pref_set =
      dlsym(B->ltlib, "cublasLtMatmulPreferenceSetAttribute");
  *(void **)&B->lt_heur = dlsym(B->ltlib, "cublasLtMatmulAlgoGetHeuristic");
  *(void **)&B->lt_matmul = dlsym(B->ltlib, "cublasLtMatmul");
  *(void **)&B->lt_cfg_get =
      dlsym(B->ltlib, "cublasLtMatmulAlgoConfigGetAttribute");
  cublasLtHandle_t h = NULL;
  if (!cr || !B->lt_destroy || !B->lt_desc_create || !B->lt_desc_destroy ||
      !B->lt_desc_set || !B->lt_lay_create || !B->lt_lay_destroy ||
      !B->lt_pref_create || !B->lt_pref_destroy || !B->lt_pref_set ||
      !B->lt_heur || !B->lt_matmul || cr(&h) != CUBLAS_STATUS_SUCCESS)
    return;
  const size_t wsb = LSIM__BLAS_WS;
  if (B->lt_pref_create(&B->pref) != CUBLAS_STATUS_SUCCESS ||
      B->lt_pref_set(B->pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb,
                     sizeof wsb) != CUBLAS_STATUS_SUCCESS) {
    if (B->pref)
      B->lt_pref_destroy(B->pref);
    B->pref = NULL;
    B->lt_destroy(h);
    return;
  }
  B->lt = h;
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
  lsim__lt_open(B);
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

int lsim_blas_has_lt(const lsim_blas *B) { return B && B->lt != NULL; }

/* The cached plan for these arguments, made (descriptors, heuristic) on
** first use; the least recently used one is replaced when all are taken. */
static lsim_err lsim__lt_plan_get(lsim_blas *B, int T, int N, int K, int ldx,
                                  int ldy, int y_fp32, int sm_target,
                                  int beta_nz, lsim__lt_plan **out,
                                  lsim_errbuf *eb) {
  lsim__lt_plan *victim = &B->plan[0];
  B->tick++;
  for (int i = 0; i < LSIM__LT_PLANS; i++) {
    lsim__lt_plan *p = &B->plan[i];
    if (p->used && p->T == T && p->N == N && p->K == K && p->ldx == ldx &&
        p->ldy == ldy && p->y_fp32 == y_fp32 && p->sm_target == sm_target &&
        p->beta_nz == beta_nz) {
      p->tick = B->tick;
      *out = p;
      return 0;
    }
    if (!p->used || (victim->used && p->tick < victim->tick))
      victim = p;
  }
  lsim__lt_plan_release(B, victim);
  lsim__lt_plan *p = victim;
  const cudaDataType yt = y_fp32 ? CUDA_R_32F : CUDA_R_16BF;
  const cublasOperation_t opt = CUBLAS_OP_T, opn = CUBLAS_OP_N;
  const int32_t smt = sm_target;
  cublasStatus_t st;
  /* column-major view, as lsim_blas_gemm: Y^T [N][T] = (W as K x N)^T X^T */
  p->used = 1; /* so that a failure below releases what was made */
  if ((st = B->lt_desc_create(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F)) ||
      (st = B->lt_desc_set(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opt,
                           sizeof opt)) ||
      (st = B->lt_desc_set(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opn,
                           sizeof opn)) ||
      (st = B->lt_desc_set(p->desc, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET,
                           &smt, sizeof smt)) ||
      (st = B->lt_lay_create(&p->a, CUDA_R_16BF, (uint64_t)K, (uint64_t)N,
                             K)) ||
      (st = B->lt_lay_create(&p->b, CUDA_R_16BF, (uint64_t)K, (uint64_t)T,
                             ldx)) ||
      (st = B->lt_lay_create(&p->c, yt, (uint64_t)N, (uint64_t)T, ldy))) {
    lsim__lt_plan_release(B, p);
    return lsim_fail(eb, LSIM_E_BACKEND, "cuBLASLt descriptors: status %d",
                     (int)st);
  }
  cublasLtMatmulHeuristicResult_t r;
  int n = 0;
  memset(&r, 0, sizeof r);
  st = B->lt_heur(B->lt, p->desc, p->a, p->b, p->c, p->c, B->pref, 1, &r, &n);
  if (st != CUBLAS_STATUS_SUCCESS || n < 1 ||
      r.state != CUBLAS_STATUS_SUCCESS) {
    lsim__lt_plan_release(B, p);
    return lsim_fail(eb, LSIM_E_BACKEND,
                     "cuBLASLt: no algorithm for %d x %d x %d on %d SMs "
                     "(status %d)",
                     T, N, K, sm_target, (int)st);
  }
  p->algo = r.algo;
  p->waves = r.wavesCount;
  p->T = T;
  p->N = N;
  p->K = K;
  p->ldx = ldx;
  p->ldy = ldy;
  p->y_fp32 = y_fp32;
  p->sm_target = sm_target;
  p->beta_nz = beta_nz;
  p->tick = B->tick;
  *out = p;
  return 0;
}

lsim_err lsim_blas_gemm_lt(lsim_blas *B, void *stream, int sm_target, int T,
                           int N, int K, const void *X, int ldx,
                           const void *W, void *Y, int ldy, float beta,
                           int y_fp32, lsim_errbuf *eb) {
  const float one = 1.0f;
  if (T == 0)
    return 0;
  if (!B->lt)
    return lsim_fail(eb, LSIM_E_BACKEND, "cuBLASLt is not available");
  if (sm_target < 0)
    return lsim_fail(eb, LSIM_E_USAGE, "cuBLASLt: SM target %d", sm_target);
  lsim__lt_plan *p = NULL;
  lsim_err rc = lsim__lt_plan_get(B, T, N, K, ldx, ldy, y_fp32, sm_target,
                                  beta != 0.0f, &p, eb);
  if (rc)
    return rc;
  cublasStatus_t st = B->lt_matmul(B->lt, p->desc, &one, W, p->a, X, p->b,
                                   &beta, Y, p->c, Y, p->c, &p->algo, B->ws,
                                   LSIM__BLAS_WS, (cudaStream_t)stream);
  if (st != CUBLAS_STATUS_SUCCESS)
    return lsim_fail(eb, LSIM_E_BACKEND,
                     "cublasLtMatmul (%d x %d x %d, %d SMs): status %d", T, N,
                     K, sm_target, (int)st);
  return 0;
}

int lsim_blas_lt_describe(lsim_blas *B, int T, int N, int K, int ldx,
                          int ldy, int y_fp32, int sm_target, char *buf,
                          size_t n) {
  lsim__lt_plan *p = NULL;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  if (!B || !B->lt || lsim__lt_plan_get(B, T, N, K, ldx, ldy, y_fp32,
                                         sm_target, 0, &p, &eb)) {
    snprintf(buf, n, "cuBLASLt: %s", B && B->lt ? eb.msg : "unavailable");
    return -1;
  }
  static const cublasLtMatmulAlgoConfigAttributes_t at[5] = {
      CUBLASLT_ALGO_CONFIG_ID, CUBLASLT_ALGO_CONFIG_TILE_ID,
      CUBLASLT_ALGO_CONFIG_SPLITK_NUM, CUBLASLT_ALGO_CONFIG_STAGES_ID,
      CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID};
  int v[5];
  for (int i = 0; i < 5; i++) {
    uint32_t x = 0;
    size_t w = 0;
    v[i] = B->lt_cfg_get && B->lt_cfg_get(&p->algo, at[i], &x, sizeof x,
                                          &w) == CUBLAS_STATUS_SUCCESS
               ? (int)x
               : -1;
  }
  snprintf(buf, n,
           "algo %d tile %d splitK %d stages %d cluster %d, waves %.2f", v[0],
           v[1], v[2], v[3], v[4], (double)p->waves);
  return 0;
}
