/*
** lgemm.cuh: the base projection and the adapter branch in one pass
** (issue 23):
**
**     Y = beta Y + X W^T + delta        (delta: the plan's s_a t B_a^T rows)
**
** for batches of at most LSIM__GEMM_MAXM rows (decode shapes, where the
** base GEMM is bound by reading W).  One launch after the plan's shrink:
** a tensor-core GEMM (mma.sync m16n8k16, fp32 accumulators) whose K range
** is split over the blocks of a thread-block cluster; after the main loop
** the partial tiles meet in distributed shared memory and each block of
** the cluster finishes its share of the output tile: the partials summed
** in a fixed order, beta Y, and the delta of every adapter row (t from the
** shrink's workspace, B^T from the factors) added before the one rounding
** to Y's type.  The launch is the shrink's programmatic dependent: it
** streams W while the shrink runs and waits (griddepcontrol.wait) only
** before it reads the workspace, so the branch costs the factor bytes, not
** two more dependent launches and a second pass over Y.
**
** Rows of the epilogue are the plan's rows in tiles of up to
** LSIM__GEMM_EMT rows of one adapter (erows: the active rows in perm
** order, so list position e is also the shrink's workspace row, then the
** base rows), so the rows of one adapter share each B^T load.
*/
#ifndef LSIM_CUDA_LGEMM_CUH
#define LSIM_CUDA_LGEMM_CUH

#include "common.cuh"

#define LSIM__GEMM_MAXM 256 /* rows of one launch */
#define LSIM__GEMM_BN 128   /* output columns per block */
#define LSIM__GEMM_EMT 8    /* rows per epilogue tile */
#define LSIM__GEMM_THREADS 256
#define LSIM__GEMM_MAXCS 16 /* blocks per column tile (K ranges) */
#define LSIM__GEMM_MAXR 128 /* largest rank of the epilogue */
/* dynamic shared memory at most: the 227 KB a block may have, less room
** for the kernel's few static bytes (static + dynamic must fit) */
#define LSIM__GEMM_MAXSMEM ((size_t)227 * 1024 - 256)

struct lsim__gemm_args {
  const uint16_t *X, *W;
  uint16_t *Y;
  int ldx, ldw, ldy;
  int M, N, K;
  float beta;
  int cs;    /* blocks per cluster = K ranges */
  int k_len; /* columns of K per block, a multiple of 64 */
  /* the epilogue: tiles {adapter or -1, first erows index, rows, 0} */
  const int4 *etiles;
  int netiles;
  const int *erows;
  int lora; /* 0: no adapter rows (plain GEMM, no wait) */
  const lsim__adapter_dev *table;
  int table_n;
  int ldb;
  const float *ws; /* [splits][nlist][ws_ld] */
  int ws_ld, splits, nlist;
  int flags; /* 1: ask L2 for the epilogue's B^T ranges first; timing
             ** probes (results wrong): 2 no MMAs, 4 no epilogue */
  int tpos;  /* positions of t staged per block (lsim__gemm_smem) */
  /* cs > 1: each block's fp32 partial tile [ct][cs][BM][BN], and one
  ** arrival counter per column tile (zero before a launch; the last block
  ** to arrive sums the partials and resets it) */
  float *part;
  int *count;
};

/* Dynamic shared memory of configuration bm (64, 128, 256): the larger of
** the pipeline and the epilogue (partial tile, staged t of up to tpos
** positions and their adapter entries). */
size_t lsim__gemm_smem(int bm, int tpos, int ws_ld);
/* Raise the kernels' shared-memory limits and allow clusters (once). */
cudaError_t lsim__gemm_init(void);
/* Launch: grid ceil(N / BN) x cs blocks; pdl: as the programmatic
** dependent of the launch before it (the shrink). */
cudaError_t lsim__gemm_launch(int dtype, int bm, const lsim__gemm_args &g,
                              size_t smem, int pdl, cudaStream_t stream);

#endif /* LSIM_CUDA_LGEMM_CUH */
