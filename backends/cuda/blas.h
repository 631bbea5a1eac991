/*
** blas.h: the base GEMMs of the whole-model executor through cuBLAS, which
** is opened with dlopen at run time (as tools/bench_kernels.cu does), so
** that lorasim links only the CUDA runtime and a machine without cuBLAS
** still runs everything but `--execute full`.
**
** Row-major convention throughout: Y [T][N] (row stride ldy) =
** X [T][K] (stride ldx) times W^T, W [N][K] row-major (a weight matrix
** as Hugging Face stores it), plus beta * Y.  X and W are bf16; Y is bf16
** or fp32; the products are accumulated in fp32 (CUBLAS_COMPUTE_32F).
** Built only with CUDA.  Every failure is E_BACKEND with the library's
** status; nothing prints.
*/
#ifndef LSIM_CUDA_BLAS_H
#define LSIM_CUDA_BLAS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "../../engine/lsim.h"

typedef struct lsim_blas lsim_blas; /* opaque */

/* Open cuBLAS on `stream` (a cudaStream_t) with a workspace of its own
** (so that its launches can be captured into a graph).  E_BACKEND when the
** library is missing (the message names the files tried). */
lsim_err lsim_blas_open(lsim_blas **out, void *stream, lsim_errbuf *eb);
void lsim_blas_close(lsim_blas *B); /* NULL: no-op */

/* Y = X W^T + beta Y (above); y_fp32: Y is fp32, else bf16. */
lsim_err lsim_blas_gemm(lsim_blas *B, int T, int N, int K, const void *X,
                        int ldx, const void *W, void *Y, int ldy, float beta,
                        int y_fp32, lsim_errbuf *eb);

/* The same GEMM through cuBLASLt on `stream` (a cudaStream_t), its
** heuristic told to target sm_target SMs (CUBLASLT_MATMUL_DESC_SM_COUNT_
** TARGET; 0: all of the device's), so that a kernel on a concurrent stream
** finds the other SMs free (the partitioned composition, docs/CUDA.md).
** Descriptors and the chosen algorithm are cached per shape and target.
** Uses the same workspace as lsim_blas_gemm: never run the two
** concurrently.  E_BACKEND when cuBLASLt is missing or finds no
** algorithm. */
lsim_err lsim_blas_gemm_lt(lsim_blas *B, void *stream, int sm_target, int T,
                           int N, int K, const void *X, int ldx,
                           const void *W, void *Y, int ldy, float beta,
                           int y_fp32, lsim_errbuf *eb);
/* One line: the algorithm cuBLASLt's heuristic picks for these arguments
** (its id, tile, split-K, stages and cluster ids, its wave count), for the
** benchmark's notes; -1 (and the reason in buf) when it cannot say. */
int lsim_blas_lt_describe(lsim_blas *B, int T, int N, int K, int ldx,
                          int ldy, int y_fp32, int sm_target, char *buf,
                          size_t n);
/* 1 when cuBLASLt was found and opened with cuBLAS. */
int lsim_blas_has_lt(const lsim_blas *B);

#ifdef __cplusplus
}
#endif

#endif /* LSIM_CUDA_BLAS_H */
