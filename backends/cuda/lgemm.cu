/*
** lgemm.cu: Y = beta Y + X W^T + delta in one launch (lgemm.cuh).
**
** Block (column tile ct, cluster rank c) owns output columns
** n0 = ct * BN .. n0 + BN - 1 of every row (the launch has at most BM >= M
** rows) and the K range c * k_len .. (c + 1) * k_len - 1.
**
** Main loop.  64-column stages (128 bytes per row) through an NS-stage
** cp.async pipeline: the BM rows of X (rows past M zero-filled) and the BN
** rows of W (rows past N zero-filled; W read once, with an L2 evict_first
** policy so that it does not push out X, the factors or the workspace),
** columns past K zero-filled; rows XOR-swizzled as in the shrink
** (shrink.cu), ldmatrix.x4 for both operands (W is [n][k], k contiguous:
** the non-transposed ldmatrix yields the mma's column-major B fragments).
** Eight warps in a WM x WN grid, each an (BM / WM) x (BN / WN) tile of
** m16n8k16 MMAs.
**
** Epilogue.  Each block stores its fp32 partial tile in its own shared
** memory and arrives on a cluster barrier (release).  Block c owns the
** epilogue tiles c * netiles / cs .. (c + 1) * netiles / cs - 1: it reads
** their adapters' rank and scale, waits for the shrink grid
** (griddepcontrol.wait; the launch is the shrink's programmatic
** dependent), sums the shrink's d_in ranges of t for its rows in order,
** times s, into shared memory, and waits on the cluster barrier
** (acquire).  An item is 8 output columns of one epilogue tile (up to 8
** rows of one adapter): the cs partials of each row summed in the order
** c = 0 .. cs-1 through distributed shared memory, plus beta Y, then for
** each rank row k one 16-byte B^T load shared by the tile's rows and 8 x m
** fused multiply-adds, and one rounding to Y's type.  A last cluster
** barrier keeps every block's partial alive until no block reads it.
** Before the main loop each block asks L2 for the B^T ranges of its
** epilogue tiles (flag 1), so the epilogue's factor reads hit L2.
**
** Everything is summed in a fixed order: the result is deterministic.
*/
#include <cooperative_groups.h>

#include "lgemm.cuh"

namespace cg = cooperative_groups;

#define LSIM__GEMM_KC 64
#define LSIM__GEMM_PLD (LSIM__GEMM_BN + 4) /* partial tile row, floats */

__device__ __forceinline__ void lsim__gcl_arrive() {
  asm volatile("barrier.cluster.arrive.release;\n" ::: "memory");
}
__device__ __forceinline__ void lsim__gcl_wait() {
  asm volatile("barrier.cluster.wait.acquire;\n" ::: "memory");
}

__device__ __forceinline__ uint32_t lsim__gswz(int row, int ch) {
  return (uint32_t)(row * 128 + ((ch ^ (row & 7)) << 4));
}

/* pipeline stages and blocks per SM of configuration BM */
template <int BM> struct lsim__gcfg;
template <> struct lsim__gcfg<64> {
  static constexpr int WM = 2, WN = 4, NS = 4, MINB = 2;
};
template <> struct lsim__gcfg<128> {
  static constexpr int WM = 2, WN = 4, NS = 4, MINB = 1;
};
template <> struct lsim__gcfg<256> {
  static constexpr int WM = 4, WN = 2, NS = 4, MINB = 1;
};

template <typename T, int BM>
__global__ void __launch_bounds__(LSIM__GEMM_THREADS, lsim__gcfg<BM>::MINB)
    lsim__lgemm(const lsim__gemm_args g) {
  const int flags = g.flags, tpos = g.tpos;
  extern __shared__ __align__(128) unsigned char lsim__sm_gemm[];
  constexpr int BN = LSIM__GEMM_BN, KC = LSIM__GEMM_KC;
  constexpr int WM = lsim__gcfg<BM>::WM, WN = lsim__gcfg<BM>::WN;
  constexpr int NS = lsim__gcfg<BM>::NS;
  constexpr int STAGE = (BM + BN) * 128, XB = BM * 128;
  constexpr int WTM = BM / WM, WTN = BN / WN, MI = WTM / 16, NI = WTN / 8;
  constexpr int PLD = LSIM__GEMM_PLD, EMT = LSIM__GEMM_EMT, NV = BN / 8;
  static_assert(WM * WN == LSIM__GEMM_THREADS / 32, "eight warps");
  static_assert(NI % 2 == 0, "n8 tiles in pairs");

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int cs = g.cs;
  const int crank = (int)(blockIdx.x % (unsigned)cs);
  const int n0 = (int)(blockIdx.x / (unsigned)cs) * BN;
  const int k0 = crank * g.k_len, k1 = min(g.K, k0 + g.k_len);
  const int nkc = k1 > k0 ? (k1 - k0 + KC - 1) / KC : 0;
  const uint32_t sbase = lsim__smem(lsim__sm_gemm);

  /* this block's epilogue tiles */
  const int t0 = (int)((int64_t)g.netiles * crank / cs);
  const int t1 = (int)((int64_t)g.netiles * (crank + 1) / cs);

  /* the B^T ranges of those tiles into L2 (two 128-byte lines per rank
  ** row): independent of the shrink */
  if (g.lora && (flags & 1)) {
    for (int i = tid; i < (t1 - t0) * 2 * LSIM__GEMM_MAXR;
         i += LSIM__GEMM_THREADS) {
      const int4 tl = g.etiles[t0 + i / (2 * LSIM__GEMM_MAXR)];
      const int k = (i % (2 * LSIM__GEMM_MAXR)) >> 1, l = i & 1;
      if (tl.x < 0 || tl.x >= g.table_n)
        continue;
      const lsim__adapter_dev &ad = g.table[tl.x];
      if (k < ad.rank && n0 + 64 * l < g.N)
        lsim__prefetch_l2(lsim__brow_rt(ad, k, g.ldb) + n0 + 64 * l);
    }
  }

  /* ---- main loop ---- */
  const int ch = tid & 7, rb = tid >> 3; /* chunk, row base (0..31) */
  const uint16_t *xsrc[BM / 32], *wsrc[BN / 32];
#pragma unroll
  for (int i = 0; i < BM / 32; i++) {
    const int row = rb + 32 * i;
    xsrc[i] = row < g.M ? g.X + (size_t)row * g.ldx : nullptr;
  }
#pragma unroll
  for (int i = 0; i < BN / 32; i++) {
    const int n = n0 + rb + 32 * i;
    wsrc[i] = n < g.N ? g.W + (size_t)n * g.ldw : nullptr;
  }
  const uint64_t pol = lsim__policy_evict_first();
  auto load = [&](int st, int kc) {
    const uint32_t sx = sbase + st * STAGE, sw = sx + XB;
    const int col = k0 + kc * KC + ch * 8;
    const int bytes = max(0, min(16, (k1 - col) * 2));
#pragma unroll
    for (int i = 0; i < BM / 32; i++) {
      const bool ok = xsrc[i] != nullptr && bytes > 0;
      lsim__cp16(sx + lsim__gswz(rb + 32 * i, ch),
                 ok ? (const void *)(xsrc[i] + col) : (const void *)g.X,
                 ok ? bytes : 0);
    }
#pragma unroll
    for (int i = 0; i < BN / 32; i++) {
      const bool ok = wsrc[i] != nullptr && bytes > 0;
      asm volatile(
          "cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, "
          "%3;\n" ::"r"(sw + lsim__gswz(rb + 32 * i, ch)),
          "l"(ok ? (const void *)(wsrc[i] + col) : (const void *)g.W),
          "r"(ok ? bytes : 0), "l"(pol)
          : "memory");
    }
  };

  float acc[MI][NI][4];
#pragma unroll
  for (int i = 0; i < MI; i++)
#pragma unroll
    for (int j = 0; j < NI; j++)
#pragma unroll
      for (int e = 0; e < 4; e++)
        acc[i][j][e] = 0.f;

#pragma unroll
  for (int s = 0; s < NS - 1; s++) {
    if (s < nkc)
      load(s, s);
    lsim__cp_commit();
  }
  const int wm = warp / WN, wn = warp % WN;
  const int xr = (lane & 7) + (((lane >> 3) & 1) << 3), xc = lane >> 4;
  const int br = (lane & 7) + ((lane >> 4) << 3), bc = (lane >> 3) & 1;
  for (int kc = 0; kc < nkc; kc++) {
    lsim__cp_wait<NS - 2>();
    __syncthreads();
    {
      const int nx = kc + NS - 1;
      if (nx < nkc)
        load(nx % NS, nx);
      lsim__cp_commit();
    }
    const uint32_t sx = sbase + (kc % NS) * STAGE, sw = sx + XB;
#pragma unroll
    for (int ks = 0; ks < KC / 16; ks++) {
      uint32_t af[MI][4];
#pragma unroll
      for (int mi = 0; mi < MI; mi++)
        lsim__ldsm4(af[mi],
                    sx + lsim__gswz(wm * WTM + mi * 16 + xr, ks * 2 + xc));
#pragma unroll
      for (int nj = 0; nj < NI / 2; nj++) {
        uint32_t bfr[4];
        lsim__ldsm4(bfr,
                    sw + lsim__gswz(wn * WTN + nj * 16 + br, ks * 2 + bc));
#pragma unroll
        for (int mi = 0; mi < MI; mi++) {
          lsim__mma<T>(acc[mi][2 * nj], af[mi], bfr[0], bfr[1]);
          lsim__mma<T>(acc[mi][2 * nj + 1], af[mi], bfr[2], bfr[3]);
        }
      }
    }
  }
  lsim__cp_wait<0>();
  __syncthreads(); /* every warp is done with the stages */

  /* ---- epilogue ---- */
  float *part = reinterpret_cast<float *>(lsim__sm_gemm);
  {
    const int gq = lane >> 2, q = lane & 3;
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
      for (int ni = 0; ni < NI; ni++) {
        const int row = wm * WTM + mi * 16 + gq, col = wn * WTN + ni * 8 + 2 * q;
        *reinterpret_cast<float2 *>(&part[row * PLD + col]) =
            make_float2(acc[mi][ni][0], acc[mi][ni][1]);
        *reinterpret_cast<float2 *>(&part[(row + 8) * PLD + col]) =
            make_float2(acc[mi][ni][2], acc[mi][ni][3]);
      }
  }
  if (cs > 1)
    lsim__gcl_arrive(); /* this block's partial is written */

  /* t of this block's rows: rank and scale per position, then the
  ** shrink's ranges summed in order, times s */
  float *ts = part + BM * PLD;                  /* [tpos][ws_ld] */
  int *prank = reinterpret_cast<int *>(ts + (size_t)tpos * g.ws_ld);
  float *pscale = reinterpret_cast<float *>(prank + tpos);
  const int e_lo = t1 > t0 ? g.etiles[t0].y : 0;
  const int e_hi = t1 > t0 ? g.etiles[t1 - 1].y + g.etiles[t1 - 1].z : 0;
  if (g.lora) {
    for (int j = t0 + tid; j < t1; j += LSIM__GEMM_THREADS) {
      const int4 tl = g.etiles[j];
      const bool act = tl.x >= 0 && tl.x < g.table_n;
      const int r = act ? g.table[tl.x].rank : 0;
      const float s = act ? g.table[tl.x].scale : 0.f;
      for (int i = 0; i < tl.z; i++) {
        prank[tl.y + i - e_lo] = r;
        pscale[tl.y + i - e_lo] = s;
      }
    }
    __syncthreads();
    lsim__pdl_wait(); /* the shrink's workspace is complete from here on */
    const int n = (e_hi - e_lo) * g.ws_ld;
    const size_t sstride = (size_t)g.nlist * g.ws_ld;
    for (int b = tid; b < n; b += 4 * LSIM__GEMM_THREADS) {
      int off[4];
      float sum[4];
#pragma unroll
      for (int u = 0; u < 4; u++) {
        const int i = b + u * LSIM__GEMM_THREADS;
        const int pe = i / g.ws_ld, k = i - pe * g.ws_ld;
        off[u] = i < n && k < prank[pe] ? (e_lo + pe) * g.ws_ld + k : -1;
        sum[u] = 0.f;
      }
      for (int sp = 0; sp < g.splits; sp++)
#pragma unroll
        for (int u = 0; u < 4; u++)
          if (off[u] >= 0)
            sum[u] += g.ws[sp * sstride + off[u]];
#pragma unroll
      for (int u = 0; u < 4; u++)
        if (off[u] >= 0) {
          const int i = b + u * LSIM__GEMM_THREADS;
          ts[i] = sum[u] * pscale[i / g.ws_ld];
        }
    }
  }
  __syncthreads(); /* t, and (cs == 1) the partial, written by this block */
  if (cs > 1)
    lsim__gcl_wait(); /* every partial of the cluster is visible */

  cg::cluster_group cl = cg::this_cluster();
  const int nit = (t1 - t0) * NV;
  for (int it = tid; it < nit; it += LSIM__GEMM_THREADS) {
    const int4 tl = g.etiles[t0 + it / NV];
    const int v = it % NV, n = n0 + 8 * v, m = tl.z;
    if (n >= g.N)
      continue;
    float y[EMT][8];
    int rows[EMT];
#pragma unroll
    for (int i = 0; i < EMT; i++) {
      rows[i] = i < m ? g.erows[tl.y + i] : 0;
#pragma unroll
      for (int e = 0; e < 8; e++)
        y[i][e] = 0.f;
    }
    for (int c = 0; c < cs; c++) {
      const float *pc = c == crank ? part : cl.map_shared_rank(part, c);
#pragma unroll
      for (int i = 0; i < EMT; i++)
        if (i < m) {
          const float4 a =
              *reinterpret_cast<const float4 *>(pc + rows[i] * PLD + 8 * v);
          const float4 b = *reinterpret_cast<const float4 *>(
              pc + rows[i] * PLD + 8 * v + 4);
          y[i][0] += a.x;
          y[i][1] += a.y;
          y[i][2] += a.z;
          y[i][3] += a.w;
          y[i][4] += b.x;
          y[i][5] += b.y;
          y[i][6] += b.z;
          y[i][7] += b.w;
        }
    }
    const int nn = min(8, g.N - n);
    if (g.beta != 0.f) {
#pragma unroll
      for (int i = 0; i < EMT; i++)
        if (i < m) {
          const uint16_t *yp = g.Y + (size_t)rows[i] * g.ldy + n;
          const uint4 yv = nn == 8 ? *reinterpret_cast<const uint4 *>(yp)
                                   : lsim__ld_partial(yp, nn);
          float yf[8];
          lsim__unpack8<T>(yv, yf);
#pragma unroll
          for (int e = 0; e < 8; e++)
            y[i][e] = fmaf(g.beta, yf[e], y[i][e]);
        }
    }
    if (g.lora && tl.x >= 0 && tl.x < g.table_n) {
      const lsim__adapter_dev ad = g.table[tl.x];
      const int r = ad.rank;
      const float *tr = ts + (size_t)(tl.y - e_lo) * g.ws_ld;
      for (int kb = 0; kb < r; kb += 8) {
        uint4 bv[8];
#pragma unroll
        for (int u = 0; u < 8; u++)
          bv[u] = kb + u < r ? lsim__ldf16(lsim__brow_rt(ad, kb + u, g.ldb) + n)
                             : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int u = 0; u < 8; u++) {
          if (kb + u < r) {
            float bf[8];
            lsim__unpack8<T>(bv[u], bf);
#pragma unroll
            for (int i = 0; i < EMT; i++)
              if (i < m) {
                const float tk = tr[i * g.ws_ld + kb + u];
#pragma unroll
                for (int e = 0; e < 8; e++)
                  y[i][e] = fmaf(tk, bf[e], y[i][e]);
              }
          }
        }
      }
    }
#pragma unroll
    for (int i = 0; i < EMT; i++)
      if (i < m) {
        uint16_t *yp = g.Y + (size_t)rows[i] * g.ldy + n;
        if (nn == 8) {
          *reinterpret_cast<uint4 *>(yp) = lsim__pack8<T>(y[i]);
        } else {
#pragma unroll
          for (int e = 0; e < 8; e++)
            if (e < nn)
              yp[e] = lsim__dt<T>::from_f(y[i][e]);
        }
      }
  }
  if (cs > 1) { /* no block leaves while another may read its partial */
    lsim__gcl_arrive();
    lsim__gcl_wait();
  }
}

/* ---- host side ---------------------------------------------------------- */

static int lsim__gemm_ns(int bm) {
  return bm == 64    ? lsim__gcfg<64>::NS
         : bm == 128 ? lsim__gcfg<128>::NS
                     : lsim__gcfg<256>::NS;
}

size_t lsim__gemm_smem(int bm, int tpos, int ws_ld) {
  const size_t pipe =
      (size_t)lsim__gemm_ns(bm) * (size_t)(bm + LSIM__GEMM_BN) * 128;
  const size_t epi = (size_t)bm * LSIM__GEMM_PLD * 4 +
                     (size_t)tpos * (size_t)ws_ld * 4 + (size_t)tpos * 8;
  return pipe > epi ? pipe : epi;
}

template <typename K> static cudaError_t lsim__gemm_attr(K kernel) {
  return cudaFuncSetAttribute(kernel,
                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                              227 * 1024);
}

template <typename T> static cudaError_t lsim__gemm_init_t() {
  cudaError_t e;
  if ((e = lsim__gemm_attr(lsim__lgemm<T, 64>)) != cudaSuccess ||
      (e = lsim__gemm_attr(lsim__lgemm<T, 128>)) != cudaSuccess)
    return e;
  return lsim__gemm_attr(lsim__lgemm<T, 256>);
}

cudaError_t lsim__gemm_init(void) {
  cudaError_t e = lsim__gemm_init_t<lsim__bf16>();
  return e != cudaSuccess ? e : lsim__gemm_init_t<lsim__fp16>();
}

template <typename K>
static cudaError_t lsim__gemm_go(K kernel, const lsim__gemm_args &g,
                                 size_t smem, int pdl, cudaStream_t s) {
  cudaLaunchConfig_t cfg;
  cudaLaunchAttribute at[2];
  int na = 0;
  cfg.gridDim = dim3((unsigned)((g.N + LSIM__GEMM_BN - 1) / LSIM__GEMM_BN) *
                     (unsigned)g.cs);
  cfg.blockDim = dim3(LSIM__GEMM_THREADS);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  if (g.cs > 1) {
    at[na].id = cudaLaunchAttributeClusterDimension;
    at[na].val.clusterDim.x = (unsigned)g.cs;
    at[na].val.clusterDim.y = 1;
    at[na].val.clusterDim.z = 1;
    na++;
  }
  if (pdl) {
    at[na].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[na].val.programmaticStreamSerializationAllowed = 1;
    na++;
  }
  cfg.attrs = na ? at : nullptr;
  cfg.numAttrs = (unsigned)na;
  return cudaLaunchKernelEx(&cfg, kernel, g);
}

template <typename T>
static cudaError_t lsim__gemm_t(int bm, const lsim__gemm_args &g, size_t smem,
                                int pdl, cudaStream_t s) {
  switch (bm) {
  case 64:
    return lsim__gemm_go(lsim__lgemm<T, 64>, g, smem, pdl, s);
  case 128:
    return lsim__gemm_go(lsim__lgemm<T, 128>, g, smem, pdl, s);
  case 256:
    return lsim__gemm_go(lsim__lgemm<T, 256>, g, smem, pdl, s);
  default:
    return cudaErrorInvalidValue;
  }
}

cudaError_t lsim__gemm_launch(int dtype, int bm, const lsim__gemm_args &g,
                              size_t smem, int pdl, cudaStream_t s) {
  if (g.cs < 1 || g.cs > LSIM__GEMM_MAXCS || g.M > bm || g.M < 1)
    return cudaErrorInvalidValue;
  return dtype == LSIM_CUDA_FP16
             ? lsim__gemm_t<lsim__fp16>(bm, g, smem, pdl, s)
             : lsim__gemm_t<lsim__bf16>(bm, g, smem, pdl, s);
}
