/*
** fused.cuh: shrink and expand in ONE launch, for batches of short
** segments (decode, or a few rows per adapter).
**
** A thread-block cluster of CS blocks (CS = a.splits, 1..16) owns one tile
** of up to MT rows of one adapter.  Block c of the cluster:
**
**   1. computes the partial t = x A^T over its own d_in range (columns
**      c * split_len .. +split_len) for every rank of the tile, into its
**      shared memory (CUDA cores, fp32);
**   2. after a cluster barrier, sums the CS partials of every block in a
**      fixed order through distributed shared memory (mapa), times s;
**   3. adds t B^T into its own d_out range of Y (columns c * col_len ..).
**
** No workspace in global memory, no second launch, no inter-kernel gap:
** the shrink's result never leaves the cluster.  The sum over the d_in
** ranges is in a fixed order, so results are deterministic, and exact in
** integer mode under the same bounds as the two-launch paths (fp32 t,
** never rounded to 16 bits).
*/
#ifndef LSIM_CUDA_FUSED_CUH
#define LSIM_CUDA_FUSED_CUH

#include "common.cuh"

#define LSIM__FUSED_MAXCS 16 /* largest cluster (non-portable above 8) */

/* Dynamic shared memory of the fused kernel: the partial and the summed t,
** [MT][ws_ld] floats each, and the expand's rank-split sums (at most 96
** items x min(MT, 4) rows x 8 columns). */
static inline size_t lsim__fused_smem(int mt, int ws_ld) {
  return ((size_t)2 * (size_t)mt * (size_t)ws_ld +
          (size_t)96 * (size_t)(mt < 4 ? mt : 4) * 8) *
         sizeof(float);
}

/* Allow clusters of up to 16 blocks and up to 64 KB of dynamic shared
** memory (rank 1024 at 8 rows). */
cudaError_t lsim__fused_init(void);

/* Launch: grid.x = tiles * cs, cluster (cs, 1, 1); mt: 1, 2, 4 or 8 rows
** per tile; a.fused_flags: 1 ask L2 for the block's Bt range first, 2 load
** the thread's Y and first Bt vectors before the shrink. */
cudaError_t lsim__fused_launch(int dtype, int mt, int cs,
                               const lsim__lora_args &a, unsigned ntiles,
                               size_t smem, cudaStream_t stream);

#endif /* LSIM_CUDA_FUSED_CUH */
