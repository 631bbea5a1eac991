/*
** shrink.cuh: the shrink op, t = x A^T per row of a plan's adapter rows.
**
** Three kernels, one launch each, all writing the fp32 workspace
** ws[split][list position][k] (common.cuh):
**
**   decode  one block per (active row, 4 rank rows, d_in range); the
**           adapter comes from row_adapter (CUDA cores)
**   simt    one block per (tile of <= 8 rows of one group, 4 rank rows,
**           d_in range) (CUDA cores)
**   mma     one block per (tile of <= 64 rows of one group, d_in range):
**           a cp.async pipeline feeding mma.sync m16n8k16 (tensor cores);
**           the rank is computed in 16-column groups up to the tile's own
**           rank, inside a compile-time rank class (16, 32, 64, 128)
**
** Every kernel skips a block whose group is the base sentinel (-1), skips
** rank rows at or past the adapter's logical rank and never writes them,
** and lets the expand launch start early (griddepcontrol).
*/
#ifndef LSIM_CUDA_SHRINK_CUH
#define LSIM_CUDA_SHRINK_CUH

#include "common.cuh"

enum lsim__kernel_kind {
  LSIM__KIND_DECODE = 0, /* per-row tiles of one row, CUDA cores */
  LSIM__KIND_SIMT,       /* tiles of <= 8 rows, CUDA cores */
  LSIM__KIND_MMA,        /* tiles of <= 64 rows, tensor cores */
  LSIM__KIND_FUSED       /* one launch, cluster per tile (fused.cuh) */
};

/* Rank class of the tensor-core kernels for a largest rank r (<= 128). */
static inline int lsim__rank_class(int r) {
  return r <= 16 ? 16 : r <= 32 ? 32 : r <= 64 ? 64 : 128;
}

/* Dynamic shared memory of the mma shrink for a rank class. */
static inline size_t lsim__shrink_smem(int rc) {
  return (size_t)LSIM__SH_STAGES * (LSIM__MMA_MT + rc) * LSIM__MMA_KC * 2;
}

/* Raise the shared-memory limits of the mma kernels (once per device). */
cudaError_t lsim__shrink_init(void);

/* Launch one shrink.  grid.x: tiles (or active rows for decode); grid.y:
** rank chunks of LSIM__SIMT_KR (1 for mma); grid.z: splits.  dtype: enum
** lsim_cuda_dtype; rc: rank class (mma only).  Returns the launch error. */
cudaError_t lsim__shrink_launch(int dtype, int kind, int rc,
                                const lsim__lora_args &a, dim3 grid,
                                cudaStream_t stream);

#endif /* LSIM_CUDA_SHRINK_CUH */
