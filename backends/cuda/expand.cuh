/*
** expand.cuh: the expand op, Y[row] += s_a * t B_a^T, in place.
**
** Reads the shrink's workspace (summing its d_in splits), scales by the
** adapter's s in fp32 and adds the delta into the caller's base output Y:
** Y is read, the fp32 sum rounded once to Y's type and written back, row by
** row through the row list, so rows no tile names (base rows, rows of other
** plans) are never touched.  Factor B is held transposed on the device
** (Bt [rank][d_out]: each rank row is one hidden-width vector), so a warp
** reads 512 contiguous bytes of a rank row per step whatever the rank.
**
**   decode  one block per (active row, 1024 columns), CUDA cores
**   simt    one block per (tile of <= 8 rows, 1024 columns), CUDA cores
**   mma     one block per (tile of <= 64 rows, col_len columns): the tile's
**           t (scaled) held as mma A fragments in registers, split into a
**           high and a low 16-bit part (t = hi + lo to 16 significant
**           bits; with split off, t is rounded to the input type as vLLM
**           does), then 64-column stages of Y and Bt through a 3-stage
**           cp.async pipeline, ldmatrix.trans for Bt, mma.sync, and the
**           update of Y in shared memory before 16-byte coalesced stores
**
** All three are launched as programmatic dependents of the shrink: before
** griddepcontrol.wait they only touch memory the shrink does not write
** (metadata, factors, Y).
*/
#ifndef LSIM_CUDA_EXPAND_CUH
#define LSIM_CUDA_EXPAND_CUH

#include "common.cuh"
#include "shrink.cuh"

static inline size_t lsim__expand_smem(int rc) {
  return (size_t)LSIM__EX_STAGES * (LSIM__MMA_MT + rc) * LSIM__MMA_KC * 2;
}

cudaError_t lsim__expand_init(void);

/* Launch one expand.  grid.x: tiles (or active rows); grid.y: column
** blocks (LSIM__EXP_COLS for decode/simt, a.col_len for mma).  simt_smem:
** bytes of the t staging for decode/simt.  split: the hi/lo t split (mma).
** pdl: launch as a programmatic dependent of the previous kernel. */
cudaError_t lsim__expand_launch(int dtype, int kind, int rc, int split,
                                const lsim__lora_args &a, dim3 grid,
                                size_t simt_smem, int pdl,
                                cudaStream_t stream);

#endif /* LSIM_CUDA_EXPAND_CUH */
