/*
** lgemm.cu: Y = beta Y + X W^T + delta in one launch (lgemm.cuh).
**
** Block (column tile ct, K range c) owns output columns n0 = ct * BN ..
** n0 + BN - 1 of every row (the launch has at most BM >= M rows) and the
** K range c * k_len .. (c + 1) * k_len - 1; the cs blocks of a column tile
** are adjacent in the grid, so they run at about the same time.
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
** Epilogue.  The block stores its fp32 partial tile in shared memory and
** adds the delta of its share of the rows: the epilogue tiles c * netiles
** / cs .. (c + 1) * netiles / cs - 1 (up to 8 rows of one adapter each).
** It reads their adapters' rank and scale, waits for the shrink grid
** (griddepcontrol.wait; the launch is the shrink's programmatic
** dependent, so everything before this point overlaps the shrink), sums
** the shrink's d_in ranges of t for its rows in order, times s, into
** shared memory; an item is 4 columns of one tile: per rank row one 8-byte
** B^T load shared by the tile's rows and 4 x m fused multiply-adds into
** the partial.  Before the main loop the block asked L2 for those B^T
** ranges (flag 1), so these reads hit L2.
**
** With one K range the partial goes straight to Y (plus beta Y, one
** rounding).  Otherwise each block writes it to its slot of the partial
** workspace, fences, and counts itself in with an atomic on the tile's
** counter; the last block to arrive sums the cs slots in the order
** 0 .. cs-1 (whichever block that is), adds beta Y, rounds once, writes Y
** and resets the counter.  No block waits for another, so any number of
** blocks may be resident; every sum is in a fixed order, so the result is
** deterministic.  (A first version reduced through distributed shared
** memory in clusters of the K ranges: clusters of 8 could not all be
** resident, and the cluster barriers left most threads waiting; it ran at
** half the speed, docs/BENCHMARKS.md.)
*/
#include "lgemm.cuh"

#define LSIM__GEMM_KC 64
#define LSIM__GEMM_PLD (LSIM__GEMM_BN + 4) /* partial tile row, floats */


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
  constexpr int PLD = LSIM__GEMM_PLD, EMT = LSIM__GEMM_EMT;
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
    if (flags & 2) /* timing probe: the loads alone */
      continue;
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
  if (flags & 4) /* timing probe: no epilogue after the partial */
    return;

  /* the delta of this block's rows (epilogue tiles t0 .. t1-1) into its
  ** partial: t staged (rank and scale per position, the shrink's ranges
  ** summed in order, times s), then per item -- 4 columns of one tile --
  ** one B^T load per rank row shared by the tile's rows */
  if (g.lora) {
    float *ts = part + BM * PLD; /* [tpos][ws_ld] */
    int *prank = reinterpret_cast<int *>(ts + (size_t)tpos * g.ws_ld);
    float *pscale = reinterpret_cast<float *>(prank + tpos);
    const int e_lo = t1 > t0 ? g.etiles[t0].y : 0;
    const int e_hi = t1 > t0 ? g.etiles[t1 - 1].y + g.etiles[t1 - 1].z : 0;
    for (int j = t0 + tid; j < t1; j += LSIM__GEMM_THREADS) {
      const int4 tl = g.etiles[j];
      const bool act = tl.x >= 0 && tl.x < g.table_n;
      const int r = act ? g.table[tl.x].rank : 0;
      const float sc = act ? g.table[tl.x].scale : 0.f;
      for (int i = 0; i < tl.z; i++) {
        prank[tl.y + i - e_lo] = r;
        pscale[tl.y + i - e_lo] = sc;
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
    __syncthreads();
    constexpr int NV4 = BN / 4;
    const int nit = (t1 - t0) * NV4;
    for (int it = tid; it < nit; it += LSIM__GEMM_THREADS) {
      const int4 tl = g.etiles[t0 + it / NV4];
      if (tl.x < 0 || tl.x >= g.table_n)
        continue;
      const int v = it % NV4, m = tl.z;
      if (n0 + 4 * v >= g.N)
        continue;
      const lsim__adapter_dev ad = g.table[tl.x];
      const int r = ad.rank;
      const float *tr = ts + (size_t)(tl.y - e_lo) * g.ws_ld;
      float d[EMT][4];
#pragma unroll
      for (int i = 0; i < EMT; i++)
#pragma unroll
        for (int e = 0; e < 4; e++)
          d[i][e] = 0.f;
      for (int kb = 0; kb < r; kb += 16) {
        uint2 bv[16]; /* 16 loads in flight: one round trip at rank 16 */
#pragma unroll
        for (int u = 0; u < 16; u++)
          bv[u] = kb + u < r
                      ? __ldcs(reinterpret_cast<const uint2 *>(
                            lsim__brow_rt(ad, kb + u, g.ldb) + n0 + 4 * v))
                      : make_uint2(0, 0);
#pragma unroll
        for (int u = 0; u < 16; u++) {
          if (kb + u < r) {
            const float b0 = lsim__dt<T>::lo(bv[u].x),
                        b1 = lsim__dt<T>::hi(bv[u].x),
                        b2 = lsim__dt<T>::lo(bv[u].y),
                        b3 = lsim__dt<T>::hi(bv[u].y);
#pragma unroll
            for (int i = 0; i < EMT; i++)
              if (i < m) {
                const float tk = tr[i * g.ws_ld + kb + u];
                d[i][0] = fmaf(tk, b0, d[i][0]);
                d[i][1] = fmaf(tk, b1, d[i][1]);
                d[i][2] = fmaf(tk, b2, d[i][2]);
                d[i][3] = fmaf(tk, b3, d[i][3]);
              }
          }
        }
      }
#pragma unroll
      for (int i = 0; i < EMT; i++)
        if (i < m) {
          float4 *pp = reinterpret_cast<float4 *>(
              &part[g.erows[tl.y + i] * PLD + 4 * v]);
          float4 p = *pp;
          p.x += d[i][0];
          p.y += d[i][1];
          p.z += d[i][2];
          p.w += d[i][3];
          *pp = p;
        }
    }
  }
  __syncthreads(); /* the partial (with this block's deltas) is complete */

  /* rows M and columns N of the tile: with one K range, straight to Y;
  ** else to this block's slot of the partial workspace, and the last
  ** block of the tile to arrive sums the slots in the order 0 .. cs-1 */
  constexpr int NV4 = BN / 4;
  const int ct = (int)(blockIdx.x / (unsigned)cs);
  const int nitems = g.M * NV4;
  float *slots = g.part + (size_t)ct * cs * BM * BN;
  if (cs > 1) {
    float *mine = slots + (size_t)crank * BM * BN;
    for (int it = tid; it < nitems; it += LSIM__GEMM_THREADS) {
      const int row = it / NV4, v = it % NV4;
      __stcg(reinterpret_cast<float4 *>(mine + row * BN + 4 * v),
             *reinterpret_cast<const float4 *>(&part[row * PLD + 4 * v]));
    }
    __threadfence();
    __syncthreads();
    __shared__ int last;
    if (tid == 0)
      last = atomicAdd(&g.count[ct], 1) == cs - 1;
    __syncthreads();
    if (!last)
      return;
    __threadfence();
  }
  for (int it0 = tid; it0 < nitems; it0 += 4 * LSIM__GEMM_THREADS) {
    float4 y[4];
#pragma unroll
    for (int u = 0; u < 4; u++) {
      const int it = it0 + u * LSIM__GEMM_THREADS;
      const int row = it / NV4, v = it % NV4;
      y[u] = make_float4(0.f, 0.f, 0.f, 0.f);
      if (it >= nitems)
        continue;
      if (cs == 1) {
        y[u] = *reinterpret_cast<const float4 *>(&part[row * PLD + 4 * v]);
      } else {
        for (int c = 0; c < cs; c++) {
          const float4 pc = __ldcg(reinterpret_cast<const float4 *>(
              slots + ((size_t)c * BM + row) * BN + 4 * v));
          y[u].x += pc.x;
          y[u].y += pc.y;
          y[u].z += pc.z;
          y[u].w += pc.w;
        }
      }
    }
#pragma unroll
    for (int u = 0; u < 4; u++) {
      const int it = it0 + u * LSIM__GEMM_THREADS;
      const int row = it / NV4, n = n0 + 4 * (it % NV4);
      if (it >= nitems || n >= g.N)
        continue;
      uint16_t *yp = g.Y + (size_t)row * g.ldy + n;
      const int nn = min(4, g.N - n);
      float f[4] = {y[u].x, y[u].y, y[u].z, y[u].w};
      if (g.beta != 0.f) {
#pragma unroll
        for (int e = 0; e < 4; e++)
          if (e < nn)
            f[e] = fmaf(g.beta, lsim__dt<T>::to_f(yp[e]), f[e]);
      }
      if (nn == 4) {
        uint2 o;
        o.x = lsim__dt<T>::pack(f[0], f[1]);
        o.y = lsim__dt<T>::pack(f[2], f[3]);
        *reinterpret_cast<uint2 *>(yp) = o;
      } else {
#pragma unroll
        for (int e = 0; e < 4; e++)
          if (e < nn)
            yp[e] = lsim__dt<T>::from_f(f[e]);
      }
    }
  }
  if (cs > 1 && tid == 0)
    g.count[ct] = 0; /* ready for the next launch (stream order) */
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
                              (int)LSIM__GEMM_MAXSMEM);
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
