/*
** shrink.cu: t = x A^T for every adapter row of a plan (shrink.cuh).
**
** CUDA-core kernel (decode, simt).  A block owns MT rows of one adapter
** (MT = 1 for decode), KR = 4 consecutive rank rows of that adapter and one
** range of d_in.  Each thread walks the range in 16-byte vectors (8
** elements) at a stride of 128 vectors, so a warp reads 512 contiguous bytes
** of every row per step, issuing the loads of U steps (4 for decode, 2 for
** 8-row tiles) before the first multiply, and keeps MT x KR fp32 partial
** sums.  The warp
** reduces them with a transposing butterfly (each exchange halves the values
** a lane holds: 31 shuffles for 32 values instead of 160); the four warps
** meet in shared memory; MT x KR threads write the workspace.
**
** Tensor-core kernel (mma).  A block owns up to 64 rows of one adapter
** (16 per warp) and one range of d_in, walked in 64-column stages (128
** bytes per row) through a 4-stage cp.async pipeline: stage = the 64 X rows
** (gathered through the row list; missing rows and columns past d_in
** zero-filled) and the adapter's A rows up to the tile's rank rounded to 16
** (rows at or past the rank zero-filled).  Rows are 128 bytes, their eight
** 16-byte chunks XOR-swizzled by (row & 7) so that ldmatrix reads hit eight
** distinct bank groups.  Per 16 columns: one ldmatrix.x4 for the warp's X
** fragment, one ldmatrix.x4 per 16 rank columns for A (two n8 tiles), two
** mma.sync.  Accumulators: 16 rows x RC per warp in fp32.
*/
#include "shrink.cuh"

/* ---- CUDA-core shrink -------------------------------------------------------- */

template <typename T, int MT, int KR, bool PER_ROW, bool PG>
__global__ void __launch_bounds__(LSIM__THREADS, 3)
    lsim__shrink_simt(const lsim__lora_args a) {
  lsim__pdl_trigger();
  constexpr int N = MT * KR;
  static_assert(N <= 32 && (N & (N - 1)) == 0, "MT*KR: power of two <= 32");
  lsim__tile t;
  if (!lsim__get_tile<MT, PER_ROW>(a, blockIdx.x, t))
    return;
  const lsim__adapter_dev ad = a.table[t.adapter];
  const int k0 = blockIdx.y * KR;
  if (k0 >= ad.rank)
    return;
  const int nk = min(KR, ad.rank - k0);
  const int c0 = blockIdx.z * a.split_len;
  const int c1 = min(a.d_in, c0 + a.split_len);

  const uint16_t *xr[MT];
#pragma unroll
  for (int j = 0; j < MT; j++)
    xr[j] = a.X + (size_t)a.list[t.p0 + (j < t.m ? j : 0)] * a.ldx;
  const uint16_t *ar[KR];
#pragma unroll
  for (int k = 0; k < KR; k++)
    ar[k] = lsim__arow<PG>(ad, k0 + (k < nk ? k : 0), a.lda);

  float acc[N];
#pragma unroll
  for (int i = 0; i < N; i++)
    acc[i] = 0.f;

  /* U column steps per round: every load of a round is issued before the
  ** first multiply (4 x 5 vectors for decode, 2 x 12 for 8-row tiles) */
  constexpr int U = MT == 1 ? 4 : 2;
  for (int c = c0 + threadIdx.x * 8; c < c1; c += U * LSIM__THREADS * 8) {
    uint4 av[U][KR], xv[U][MT];
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int cc = c + u * LSIM__THREADS * 8;
      const bool in = cc < c1, full = cc + 8 <= c1;
#pragma unroll
      for (int k = 0; k < KR; k++)
        av[u][k] = in && k < nk ? lsim__ldf16(ar[k] + cc)
                                : make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int j = 0; j < MT; j++)
        xv[u][j] = !in || j >= t.m ? make_uint4(0, 0, 0, 0)
                   : full          ? lsim__ldg16(xr[j] + cc)
                                   : lsim__ld_partial(xr[j] + cc, c1 - cc);
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
      float af[KR][8];
#pragma unroll
      for (int k = 0; k < KR; k++)
        lsim__unpack8<T>(av[u][k], af[k]);
#pragma unroll
      for (int j = 0; j < MT; j++) {
        float xf[8];
        lsim__unpack8<T>(xv[u][j], xf);
#pragma unroll
        for (int k = 0; k < KR; k++)
#pragma unroll
          for (int e = 0; e < 8; e++)
            acc[j * KR + k] = fmaf(xf[e], af[k][e], acc[j * KR + k]);
      }
    }
  }

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  lsim__tsum<N, 16>::run(acc, lane);
  constexpr int SH = 5 - lsim__log2<N>::v;
  __shared__ float red[LSIM__THREADS / 32][N];
  if ((lane & ((1 << SH) - 1)) == 0)
    red[warp][lane >> SH] = acc[0];
  __syncthreads();
  if (threadIdx.x < N) {
    const int i = threadIdx.x, j = i / KR, k = i % KR;
    float s = 0.f;
#pragma unroll
    for (int w = 0; w < LSIM__THREADS / 32; w++)
      s += red[w][i];
    if (j < t.m && k < nk)
      a.ws[((size_t)blockIdx.z * a.nlist + t.p0 + j) * a.ws_ld + k0 + k] = s;
  }
  if (a.shrink_pdl)
    lsim__pdl_wait(); /* complete only after the launch before it */
}

/* ---- tensor-core shrink ------------------------------------------------------- */

/* Byte offset of 16-byte chunk `ch` of row `row` in a swizzled stage. */
__device__ __forceinline__ uint32_t lsim__swz(int row, int ch) {
  return (uint32_t)(row * 128 + ((ch ^ (row & 7)) << 4));
}

template <typename T, int RC>
__global__ void __launch_bounds__(LSIM__THREADS)
    lsim__shrink_mma(const lsim__lora_args a) {
  lsim__pdl_trigger();
  extern __shared__ __align__(128) unsigned char lsim__sm_shrink[];
  constexpr int MT = LSIM__MMA_MT, NS = LSIM__SH_STAGES;
  constexpr int XBYTES = MT * 128, STAGE = (MT + RC) * 128;
  constexpr int NP = RC / 16; /* 16-column rank groups */
  lsim__tile t;
  if (!lsim__get_tile<MT, false>(a, blockIdx.x, t))
    return;
  const lsim__adapter_dev ad = a.table[t.adapter];
  /* grid.y > 1: block y takes the rank rows ro .. ro + RC - 1 (a rank-64
  ** tile is four rank-16 blocks, balanced with the low-rank tiles) */
  const int ro = (int)blockIdx.y * RC;
  const int r = ad.rank - ro; /* rank rows of this block and beyond */
  if (r <= 0)
    return;
  const int np = min(NP, (r + 15) >> 4); /* rank groups in use */
  const int c0 = blockIdx.z * a.split_len;
  const int c1 = min(a.d_in, c0 + a.split_len);
  const int nkc = (c1 - c0 + LSIM__MMA_KC - 1) / LSIM__MMA_KC;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const uint32_t sbase = lsim__smem(lsim__sm_shrink);

  /* this thread's copies: chunk ch of rows (tid >> 3) + 16 i */
  const int ch = tid & 7, rbase = tid >> 3;
  const uint16_t *xsrc[MT / 16];
#pragma unroll
  for (int i = 0; i < MT / 16; i++) {
    const int row = rbase + 16 * i;
    xsrc[i] = row < t.m ? a.X + (size_t)a.list[t.p0 + row] * a.ldx : nullptr;
  }

  /* this thread's A rows (rank rows rbase + 16 i), through the row-address
  ** function once: NULL at or past the rank */
  const uint16_t *asrc[NP];
#pragma unroll
  for (int i = 0; i < NP; i++) {
    const int row = rbase + 16 * i;
    asrc[i] = i < np && row < r ? lsim__arow_rt(ad, ro + row, a.lda) : nullptr;
  }

  const uint64_t pol = LSIM_FACTOR_HINT ? lsim__policy_evict_first() : 0;
  auto load = [&](int st, int kc) {
    const uint32_t sx = sbase + st * STAGE, sa = sx + XBYTES;
    const int col = c0 + kc * LSIM__MMA_KC + ch * 8;
    const int bytes = max(0, min(16, (c1 - col) * 2));
#pragma unroll
    for (int i = 0; i < MT / 16; i++) {
      const int row = rbase + 16 * i;
      const bool ok = xsrc[i] != nullptr && bytes > 0;
#if LSIM_SHRINK_X_HINT
      /* each X element is read by exactly one block (its tile, its d_in
      ** range): it streams through L2 like the factors */
      lsim__cp16f(sx + lsim__swz(row, ch),
                  ok ? (const void *)(xsrc[i] + col) : (const void *)a.X,
                  ok ? bytes : 0, pol);
#else
      lsim__cp16(sx + lsim__swz(row, ch), ok ? (const void *)(xsrc[i] + col)
                                              : (const void *)a.X,
                 ok ? bytes : 0);
#endif
    }
#pragma unroll
    for (int i = 0; i < NP; i++) {
      if (i < np) {
        const int row = rbase + 16 * i; /* a rank row */
        const bool ok = asrc[i] != nullptr && bytes > 0;
        lsim__cp16f(sa + lsim__swz(row, ch),
                    ok ? (const void *)(asrc[i] + col) : (const void *)ad.A,
                    ok ? bytes : 0, pol);
      }
    }
  };

  float acc[2 * NP][4];
#pragma unroll
  for (int i = 0; i < 2 * NP; i++)
#pragma unroll
    for (int e = 0; e < 4; e++)
      acc[i][e] = 0.f;

#pragma unroll
  for (int s = 0; s < NS - 1; s++) {
    if (s < nkc)
      load(s, s);
    lsim__cp_commit();
  }

  /* ldmatrix lane addresses (row and chunk parts) */
  const int xrow = warp * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
  const int xch = lane >> 4;
  const int arow = (lane & 7) + ((lane >> 4) << 3);
  const int ach = (lane >> 3) & 1;

  for (int kc = 0; kc < nkc; kc++) {
    lsim__cp_wait<NS - 2>();
    __syncthreads();
    {
      const int nx = kc + NS - 1;
      if (nx < nkc)
        load(nx % NS, nx);
      lsim__cp_commit();
    }
    const uint32_t sx = sbase + (kc % NS) * STAGE, sa = sx + XBYTES;
#pragma unroll
    for (int ks = 0; ks < LSIM__MMA_KC / 16; ks++) {
      uint32_t af[4];
      lsim__ldsm4(af, sx + lsim__swz(xrow, ks * 2 + xch));
#pragma unroll
      for (int p = 0; p < NP; p++) {
        if (p < np) {
          uint32_t bf[4];
          const int n = p * 16 + arow;
          lsim__ldsm4(bf, sa + lsim__swz(n, ks * 2 + ach));
          lsim__mma<T>(acc[2 * p], af, bf[0], bf[1]);
          lsim__mma<T>(acc[2 * p + 1], af, bf[2], bf[3]);
        }
      }
    }
  }
  lsim__cp_wait<0>();

  /* C fragment: rows g and g + 8 of the warp's 16, columns 2q, 2q + 1 */
  const int g = lane >> 2, q = lane & 3;
  float *ws = a.ws + ((size_t)blockIdx.z * a.nlist + t.p0) * a.ws_ld + ro;
#pragma unroll
  for (int nt = 0; nt < 2 * NP; nt++) {
    if (nt < 2 * np) {
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int row = warp * 16 + g + 8 * h;
        const int col = nt * 8 + 2 * q;
        if (row < t.m) {
          if (col < r)
            ws[(size_t)row * a.ws_ld + col] = acc[nt][2 * h];
          if (col + 1 < r)
            ws[(size_t)row * a.ws_ld + col + 1] = acc[nt][2 * h + 1];
        }
      }
    }
  }
  if (a.shrink_pdl)
    lsim__pdl_wait(); /* complete only after the launch before it */
}

/* ---- launch ------------------------------------------------------------------------ */

template <typename T> static cudaError_t lsim__shrink_init_t() {
  cudaError_t e;
  if ((e = cudaFuncSetAttribute(lsim__shrink_mma<T, 16>,
                                cudaFuncAttributeMaxDynamicSharedMemorySize,
                                (int)lsim__shrink_smem(16))) != cudaSuccess)
    return e;
  if ((e = cudaFuncSetAttribute(lsim__shrink_mma<T, 32>,
                                cudaFuncAttributeMaxDynamicSharedMemorySize,
                                (int)lsim__shrink_smem(32))) != cudaSuccess)
    return e;
  if ((e = cudaFuncSetAttribute(lsim__shrink_mma<T, 64>,
                                cudaFuncAttributeMaxDynamicSharedMemorySize,
                                (int)lsim__shrink_smem(64))) != cudaSuccess)
    return e;
  return cudaFuncSetAttribute(lsim__shrink_mma<T, 128>,
                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                              (int)lsim__shrink_smem(128));
}

cudaError_t lsim__shrink_init(void) {
  cudaError_t e = lsim__shrink_init_t<lsim__bf16>();
  return e != cudaSuccess ? e : lsim__shrink_init_t<lsim__fp16>();
}

/* <<<grid, block, smem, s>>>, as a programmatic dependent launch when pdl */
template <typename K>
static cudaError_t lsim__sh_launch(K kernel, dim3 grid, size_t smem, int pdl,
                                   cudaStream_t s, const lsim__lora_args &a) {
  cudaLaunchConfig_t cfg;
  cudaLaunchAttribute at[1];
  cfg.gridDim = grid;
  cfg.blockDim = dim3(LSIM__THREADS);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = pdl ? at : nullptr;
  cfg.numAttrs = pdl ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, a);
}

template <typename T>
static cudaError_t lsim__shrink_launch_t(int kind, int rc,
                                         const lsim__lora_args &a, dim3 grid,
                                         cudaStream_t s) {
  const int pdl = a.shrink_pdl;
  switch (kind) {
  case LSIM__KIND_DECODE:
    return a.paged
               ? lsim__sh_launch(
                     lsim__shrink_simt<T, 1, LSIM__SIMT_KR, true, true>, grid,
                     0, pdl, s, a)
               : lsim__sh_launch(
                     lsim__shrink_simt<T, 1, LSIM__SIMT_KR, true, false>,
                     grid, 0, pdl, s, a);
  case LSIM__KIND_SIMT:
    return a.paged
               ? lsim__sh_launch(lsim__shrink_simt<T, LSIM__SIMT_MT,
                                                   LSIM__SIMT_KR, false, true>,
                                 grid, 0, pdl, s, a)
               : lsim__sh_launch(lsim__shrink_simt<T, LSIM__SIMT_MT,
                                                   LSIM__SIMT_KR, false, false>,
                                 grid, 0, pdl, s, a);
  case LSIM__KIND_MMA:
    switch (rc) {
    case 16:
      return lsim__sh_launch(lsim__shrink_mma<T, 16>, grid,
                             lsim__shrink_smem(16), pdl, s, a);
    case 32:
      return lsim__sh_launch(lsim__shrink_mma<T, 32>, grid,
                             lsim__shrink_smem(32), pdl, s, a);
    case 64:
      return lsim__sh_launch(lsim__shrink_mma<T, 64>, grid,
                             lsim__shrink_smem(64), pdl, s, a);
    case 128:
      return lsim__sh_launch(lsim__shrink_mma<T, 128>, grid,
                             lsim__shrink_smem(128), pdl, s, a);
    default:
      return cudaErrorInvalidValue;
    }
  default:
    return cudaErrorInvalidValue;
  }
}

cudaError_t lsim__shrink_launch(int dtype, int kind, int rc,
                                const lsim__lora_args &a, dim3 grid,
                                cudaStream_t s) {
  return dtype == LSIM_CUDA_FP16
             ? lsim__shrink_launch_t<lsim__fp16>(kind, rc, a, grid, s)
             : lsim__shrink_launch_t<lsim__bf16>(kind, rc, a, grid, s);
}
