/*
** wgemm.cuh: the base projection and the adapter branch in one pass, the
** streaming version (issue 23, second design):
**
**     Y = beta Y + X W^T + T' B'
**
** for batches of at most 256 rows.  The expand is extra K work of the same
** GEMM, not an epilogue: the adapters of the plan, in list order, lay their
** ranks side by side along a K' axis (segment g owns K' columns koff_g ..
** koff_g + rank_g - 1); B' row k' is B^T row (k' - koff_g) of segment g's
** adapter, and T' row i holds row i's scaled shrink result s t_i in its
** segment's columns and zeros elsewhere.  K' is cut in units of 64 columns,
** each a pipeline stage like a 64-column slice of W.
**
** Every block (column tile of 128 outputs, K range c of cs): a producer
** warp feeds an NS-stage mbarrier pipeline -- the X and W slices of its K
** range by the tensor copy engine (cp.async.bulk.tensor, 128-byte swizzle,
** W with an L2 evict-first hint), then its share of the K' units, one
** 1-D bulk copy per B^T row straight from the adapter's factor memory --
** and the consumer warps run m16n8k16 MMAs on each stage as it lands.
** Only before their first K' unit do the consumers wait for the shrink
** (griddepcontrol.wait: the launch is the shrink's programmatic dependent)
** and stage T' (the shrink's split ranges summed in order, times s, rounded
** to the type once) in shared memory; the W stream never waits for it.
** K ranges meet as in lgemm.cu: each block writes its fp32 partial to its
** slot, counts itself in, and the last to arrive sums the slots in the
** order 0 .. cs-1 and writes Y (deterministic, no block waits).
*/
#ifndef LSIM_CUDA_WGEMM_CUH
#define LSIM_CUDA_WGEMM_CUH

#include "common.cuh"

#define LSIM__WG_BN 128     /* output columns per block */
#define LSIM__WG_MAXNS 8    /* pipeline stages at most */
#define LSIM__WG_BROW 272   /* bytes per staged B^T row (256 + 16: no bank
                            ** conflicts for ldmatrix.trans) */
#define LSIM__WG_MAXCS 16

struct lsim__wg_args {
  uint16_t *Y;
  int ldy;
  int M, N, K;
  float beta;
  int cs;     /* K ranges per column tile */
  int kb_len; /* 64-column slices of K per range */
  int ns;     /* pipeline stages */
  /* the K' units: segments {adapter, first list position, end, koff},
  ** their ranks, K' in all */
  int lora;
  const int4 *segs;
  const int *srank;
  int nseg, ktot;
  const int *erows; /* list position -> row */
  int nact;         /* active rows (list positions 0 .. nact-1) */
  const lsim__adapter_dev *table;
  int table_n;
  int ldb;
  const float *ws; /* [splits][nlist][ws_ld] */
  int ws_ld, splits, nlist;
  int tc_ld; /* staged T' row stride, >= the largest rank, even */
  int flags; /* timing probe (results wrong): 2 no MMAs */
  int wpol;  /* W's L2 policy: 1 evict-first, 0 normal (set by launch) */
  int kinter; /* K slices: 0 a range per block, 1 interleaved (launch) */
  unsigned long long *trace; /* benchmark knob (launch): per block start,
                             ** loop end, end, SM */
  float *part; /* [ct][cs][BM][BN] */
  int *count;  /* one per column tile */
};

/* Can this device run it (sm_90 and the driver's tensor-map encoder)? */
int lsim__wg_available(void);
/* Dynamic shared memory of rows bm (64, 128, 256) and ns stages, with the
** T' staging of tc_ld columns and nseg segments. */
size_t lsim__wg_smem(int bm, int ns, int tc_ld, int nseg);
/* The most stages that fit beside the staging. */
int lsim__wg_max_stages(int bm, int tc_ld, int nseg);
cudaError_t lsim__wg_init(void);
/* Launch over X [M][ldx] and W [N][ldw] (16-byte aligned, strides
** multiples of 8): grid ceil(N / 128) x cs; pdl as in lgemm. */
cudaError_t lsim__wg_launch(int dtype, int bm, const void *X, int ldx,
                            const void *W, int ldw, const lsim__wg_args &g,
                            int pdl, cudaStream_t stream);

#endif /* LSIM_CUDA_WGEMM_CUH */
