/*
** wgemm.cu: the streaming one-pass GEMM (wgemm.cuh).
**
** Why this shape.  lgemm.cu loaded W with cp.async, 128-byte row pieces per
** thread and a block-wide barrier per stage: about 24 KB in flight per SM
** and every warp waiting at each stage's barrier, so its W stream ran at 28
** us where cuBLAS's whole GEMM took 21.4 (decode64, H100).  Here one warp
** issues whole 16 KB tiles to the tensor copy engine, NS (up to 8) stages
** deep, and each consumer warp waits only on the stage it needs (mbarrier
** phases), so up to ~170 KB per SM is in flight.  The expand's B^T rows
** come through the same pipeline, so its factor reads overlap the W stream
** instead of following it as dependent round trips.
**
** Stage layout (base 1024-aligned for the 128-byte swizzle): X slice
** [BM][64] then W slice [128][64] (TMA, 16-byte chunk c of row r at
** (c ^ (r & 7)) -- the same swizzle as lsim__gswz, so ldmatrix addresses
** as in lgemm.cu); a K' unit instead holds up to 64 B^T rows of 128
** columns, LSIM__WG_BROW bytes apart, read with ldmatrix.trans.
*/
#include "wgemm.cuh"

#include <cuda.h>
#include <stdlib.h>
#include <stdio.h>
#include <algorithm>

#define LSIM__WG_KC 64

__device__ __forceinline__ uint32_t lsim__wswz(int row, int ch) {
  return (uint32_t)(row * 128 + ((ch ^ (row & 7)) << 4));
}

template <int BM> struct lsim__wcfg;
template <> struct lsim__wcfg<64> {
  static constexpr int WM = 2, WN = 4, MINB = 2;
};
template <> struct lsim__wcfg<128> {
  static constexpr int WM = 4, WN = 2, MINB = 1;
};
template <> struct lsim__wcfg<256> {
  static constexpr int WM = 4, WN = 4, MINB = 1;
};
template <int BM> struct lsim__wthreads {
  static constexpr int NCW = lsim__wcfg<BM>::WM * lsim__wcfg<BM>::WN;
  static constexpr int N = 32 * (NCW + 1); /* consumers + one producer */
};

/* ---- mbarrier and bulk-copy wrappers -------------------------------------------- */

__device__ __forceinline__ void lsim__mb_init(uint32_t b, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(b),
               "r"(count)
               : "memory");
}
__device__ __forceinline__ void lsim__mb_expect(uint32_t b, uint32_t tx) {
  asm volatile(
      "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(b),
      "r"(tx)
      : "memory");
}
__device__ __forceinline__ void lsim__mb_arrive(uint32_t b) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(b)
               : "memory");
}
__device__ __forceinline__ void lsim__mb_wait(uint32_t b, uint32_t parity) {
  uint32_t done;
  do {
    asm volatile("{\n .reg .pred p;\n"
                 " mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 " selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(b), "r"(parity)
                 : "memory");
  } while (!done);
}
__device__ __forceinline__ void lsim__tma2d(uint32_t dst, const CUtensorMap *m,
                                           int c0, int c1, uint32_t bar,
                                           uint64_t pol) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::"
      "bytes.L2::cache_hint [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(dst),
      "l"(m), "r"(c0), "r"(c1), "r"(bar), "l"(pol)
      : "memory");
}
__device__ __forceinline__ void lsim__bulk(uint32_t dst, const void *src,
                                          uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::"
               "bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}
__device__ __forceinline__ void lsim__bar_sync(int id, int n) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}
__device__ __forceinline__ uint64_t lsim__policy_evict_normal() {
  uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;\n"
               : "=l"(p));
  return p;
}
__device__ __forceinline__ uint64_t lsim__policy_evict_last() {
  uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n"
               : "=l"(p));
  return p;
}

__device__ __forceinline__ unsigned long long lsim__gtime() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ unsigned long long lsim__smid() {
  unsigned r;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(r));
  return r;
}

template <typename T, int BM>
__global__ void __launch_bounds__(lsim__wthreads<BM>::N, lsim__wcfg<BM>::MINB)
    lsim__wgemm(const __grid_constant__ CUtensorMap tx,
                const __grid_constant__ CUtensorMap tw,
                const lsim__wg_args g) {
  constexpr int BN = LSIM__WG_BN, KC = LSIM__WG_KC;
  constexpr int WM = lsim__wcfg<BM>::WM, WN = lsim__wcfg<BM>::WN;
  constexpr int NCW = lsim__wthreads<BM>::NCW, NC = 32 * NCW;
  constexpr int WTM = BM / WM, WTN = BN / WN, MI = WTM / 16, NI = WTN / 8;
  constexpr int XB = BM * 128, STAGE = XB + BN * 128;
  static_assert(NI % 2 == 0, "n8 tiles in pairs");
  static_assert(64 * LSIM__WG_BROW <= STAGE, "a K' unit fits a stage");
  extern __shared__ unsigned char lsim__sm_wg[];
  __shared__ __align__(8) uint64_t full[LSIM__WG_MAXNS],
      empty[LSIM__WG_MAXNS];
  __shared__ int last;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int cs = g.cs, NS = g.ns;
  if (g.trace && tid == 0) { /* benchmark knob: block start */
    g.trace[blockIdx.x * 4] = lsim__gtime();
    g.trace[blockIdx.x * 4 + 3] = lsim__smid();
  }
  const int crank = (int)(blockIdx.x % (unsigned)cs);
  const int ct = (int)(blockIdx.x / (unsigned)cs), n0 = ct * BN;
  const int nkb = (g.K + KC - 1) / KC;
  /* this block's 64-column slices of K: a range kb0 .. kb0 + nw - 1, or
  ** (kinter) every cs-th slice from crank on, so that the cs blocks of a
  ** column tile read adjacent 128-byte pieces of each W row together */
  const int kb0 = min(nkb, crank * g.kb_len);
  const int nw = g.kinter ? (nkb - crank + cs - 1) / cs
                          : min(nkb, kb0 + g.kb_len) - kb0;
  const int nunits = g.lora ? (g.ktot + 63) / 64 : 0;
  const int u0 = (int)((int64_t)nunits * crank / cs);
  const int u1 = (int)((int64_t)nunits * (crank + 1) / cs);
  const int nj = nw + (u1 - u0);

  /* shared memory: stages, then T' [BM][tc_ld], row tables, segments */
  const uint32_t raw = lsim__smem(lsim__sm_wg);
  const uint32_t pad = (1024u - (raw & 1023u)) & 1023u;
  unsigned char *base = lsim__sm_wg + pad;
  const uint32_t sbase = raw + pad;
  uint16_t *tc = reinterpret_cast<uint16_t *>(base + (size_t)NS * STAGE);
  int *rk0 = reinterpret_cast<int *>(tc + (size_t)2 * BM * g.tc_ld);
  int *rrk = rk0 + BM, *rps = rrk + BM;
  float *rsc = reinterpret_cast<float *>(rps + BM);
  int *skoff = reinterpret_cast<int *>(rsc + BM), *sad = skoff + g.nseg;

  if (tid == 0) {
    for (int s = 0; s < NS; s++) {
      lsim__mb_init(lsim__smem(&full[s]), 1);
      lsim__mb_init(lsim__smem(&empty[s]), NCW);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  if (g.lora) {
    for (int i = tid; i < BM; i += blockDim.x)
      rrk[i] = 0;
    for (int i = tid; i < g.nseg; i += blockDim.x) {
      skoff[i] = g.segs[i].w;
      sad[i] = g.segs[i].x;
    }
  }
  __syncthreads();
  if (g.lora) {
    /* each active row's K' columns, rank and list position */
    for (int i = tid; i < g.nseg; i += blockDim.x) {
      const int4 sg = g.segs[i];
      const float sc = sg.x >= 0 && sg.x < g.table_n ? g.table[sg.x].scale
                                                     : 0.f;
      for (int e = sg.y; e < sg.z; e++) {
        const int row = g.erows[e];
        rk0[row] = sg.w;
        rrk[row] = g.srank[i];
        rps[row] = e;
        rsc[row] = sc;
      }
    }
  }
  __syncthreads();

  if (warp == NCW) {
    /* ---- producer ---- */
    const uint64_t pol =
        g.wpol ? lsim__policy_evict_first() : lsim__policy_evict_normal();
    const uint64_t polx = lsim__policy_evict_last();
    /* a B^T row's columns n0 .. n0 + BN - 1 that exist, rounded up to 8
    ** (every layout pads a factor row to a multiple of 8 elements): not
    ** ldb, which a layered plan's rows do not have (its ldb is the page
    ** table's address unit, 64 elements in the whole-model executor, and
    ** the copy sized by it ran past the row; test_cuda_forward's one pass
    ** at 256 columns failed with a launch failure) */
    const uint32_t rowbytes =
        (uint32_t)min(BN, ((g.N + 7) & ~7) - n0) * 2u;
    for (int j = 0; j < nj; j++) {
      const int s = j % NS;
      const uint32_t st = sbase + (uint32_t)(s * STAGE);
      const uint32_t fb = lsim__smem(&full[s]);
      if (j >= NS)
        lsim__mb_wait(lsim__smem(&empty[s]), (uint32_t)((j / NS) - 1) & 1u);
      if (j < nw) {
        if (lane == 0) {
          const int k = (g.kinter ? crank + j * cs : kb0 + j) * KC;
          lsim__mb_expect(fb, (uint32_t)STAGE);
          lsim__tma2d(st, &tx, k, 0, fb, polx);
          lsim__tma2d(st + XB, &tw, k, n0, fb, pol);
        }
      } else {
        const int kk0 = (u0 + j - nw) * 64;
        const int nv = min(64, g.ktot - kk0);
        if (lane == 0)
          lsim__mb_expect(fb, (uint32_t)nv * rowbytes);
        __syncwarp();
        for (int q = lane; q < nv; q += 32) {
          const int kk = kk0 + q;
          int lo = 0, hi = g.nseg - 1; /* the last segment with koff <= kk */
          while (lo < hi) {
            const int mid = (lo + hi + 1) >> 1;
            if (skoff[mid] <= kk)
              lo = mid;
            else
              hi = mid - 1;
          }
          const lsim__adapter_dev &ad = g.table[sad[lo]];
          lsim__bulk(st + (uint32_t)(q * LSIM__WG_BROW),
                     lsim__brow_rt(ad, kk - skoff[lo], g.ldb) + n0, rowbytes,
                     fb);
        }
      }
    }
    return;
  }

  /* ---- consumers ---- */
  const int wm = warp / WN, wn = warp % WN, gq = lane >> 2, q4 = lane & 3;
  float acc[MI][NI][4];
#pragma unroll
  for (int i = 0; i < MI; i++)
#pragma unroll
    for (int j = 0; j < NI; j++)
#pragma unroll
      for (int e = 0; e < 4; e++)
        acc[i][j][e] = 0.f;
  const int xr = (lane & 7) + (((lane >> 3) & 1) << 3), xc = lane >> 4;
  const int br = (lane & 7) + ((lane >> 4) << 3), bc = (lane >> 3) & 1;
  int mk0[MI][2] = {}, mrk[MI][2] = {}; /* this thread's rows: K' start,
                                        ** rank */

  for (int j = 0; j < nj; j++) {
    const int s = j % NS;
    const uint32_t st = sbase + (uint32_t)(s * STAGE);
    lsim__mb_wait(lsim__smem(&full[s]), (uint32_t)(j / NS) & 1u);
    if (j < nw) {
      if (!(g.flags & 2)) {
        const uint32_t sx = st, sw = st + XB;
#pragma unroll
        for (int ks = 0; ks < KC / 16; ks++) {
          uint32_t af[MI][4];
#pragma unroll
          for (int mi = 0; mi < MI; mi++)
            lsim__ldsm4(af[mi],
                        sx + lsim__wswz(wm * WTM + mi * 16 + xr, ks * 2 + xc));
#pragma unroll
          for (int nj2 = 0; nj2 < NI / 2; nj2++) {
            uint32_t bfr[4];
            lsim__ldsm4(bfr, sw + lsim__wswz(wn * WTN + nj2 * 16 + br,
                                             ks * 2 + bc));
#pragma unroll
            for (int mi = 0; mi < MI; mi++) {
              lsim__mma<T>(acc[mi][2 * nj2], af[mi], bfr[0], bfr[1]);
              lsim__mma<T>(acc[mi][2 * nj2 + 1], af[mi], bfr[2], bfr[3]);
            }
          }
        }
      }
    } else {
      const int kk0 = (u0 + j - nw) * 64;
      const int nv = min(64, g.ktot - kk0);
      if (j == nw) {
        /* first K' unit: wait for the shrink, stage T' of the rows whose
        ** K' columns meet this block's units */
        lsim__pdl_wait();
        const int ka = u0 * 64, kz = min(g.ktot, u1 * 64);
        const size_t sstride = (size_t)g.nlist * g.ws_ld;
        for (int i = tid; i < BM * g.tc_ld; i += NC) {
          const int row = i / g.tc_ld, r = i - row * g.tc_ld;
          if (row >= g.M || r >= rrk[row] || rk0[row] + r < ka ||
              rk0[row] + r >= kz)
            continue;
          const float *w = g.ws + (size_t)rps[row] * g.ws_ld + r;
          float sum = 0.f;
          for (int sp = 0; sp < g.splits; sp++)
            sum += __ldcg(w + sp * sstride);
          /* s t as hi + lo, two 16-bit values: the MMAs then carry t to
          ** about 16 bits of mantissa, as the fp32 epilogue of lgemm */
          const float v = sum * rsc[row];
          const uint16_t hi = lsim__dt<T>::from_f(v);
          tc[i] = hi;
          tc[i + BM * g.tc_ld] = lsim__dt<T>::from_f(v - lsim__dt<T>::to_f(hi));
        }
#pragma unroll
        for (int mi = 0; mi < MI; mi++)
#pragma unroll
          for (int h = 0; h < 2; h++) {
            const int row = wm * WTM + mi * 16 + gq + 8 * h;
            mk0[mi][h] = rk0[row];
            mrk[mi][h] = row < g.M ? rrk[row] : 0;
          }
        lsim__bar_sync(1, NC);
      }
      if (!(g.flags & 2)) {
#pragma unroll
        for (int ks = 0; ks < 4; ks++) {
          if (ks * 16 >= nv)
            break;
          const int kl = ks * 16 + 2 * q4; /* this thread's B rows */
          const uint32_t m0 = (kl < nv ? 0xffffu : 0u) |
                              (kl + 1 < nv ? 0xffff0000u : 0u);
          const uint32_t m1 = (kl + 8 < nv ? 0xffffu : 0u) |
                              (kl + 9 < nv ? 0xffff0000u : 0u);
#pragma unroll
          for (int pl = 0; pl < 2; pl++) { /* hi and lo planes of s t */
            uint32_t af[MI][4];
#pragma unroll
            for (int mi = 0; mi < MI; mi++)
#pragma unroll
              for (int h = 0; h < 2; h++) {
                const int row = wm * WTM + mi * 16 + gq + 8 * h;
#pragma unroll
                for (int hk = 0; hk < 2; hk++) {
                  const int d = kk0 + ks * 16 + 8 * hk + 2 * q4 - mk0[mi][h];
                  const uint16_t *tp =
                      tc + (size_t)(pl * BM + row) * g.tc_ld + d;
                  const uint32_t lo16 =
                      (unsigned)d < (unsigned)mrk[mi][h] ? tp[0] : 0u;
                  const uint32_t hi16 =
                      (unsigned)(d + 1) < (unsigned)mrk[mi][h] ? tp[1] : 0u;
                  af[mi][h + 2 * hk] = lo16 | (hi16 << 16);
                }
              }
#pragma unroll
            for (int nj2 = 0; nj2 < NI / 2; nj2++) {
              uint32_t bfr[4];
              lsim__ldsm4t(bfr, st +
                                    (uint32_t)((ks * 16 + (lane & 7) +
                                                ((lane >> 3) & 1) * 8) *
                                               LSIM__WG_BROW) +
                                    (uint32_t)((wn * WTN + nj2 * 16 +
                                                (lane >> 4) * 8) *
                                               2));
              bfr[0] &= m0;
              bfr[1] &= m1;
              bfr[2] &= m0;
              bfr[3] &= m1;
#pragma unroll
              for (int mi = 0; mi < MI; mi++) {
                lsim__mma<T>(acc[mi][2 * nj2], af[mi], bfr[0], bfr[1]);
                lsim__mma<T>(acc[mi][2 * nj2 + 1], af[mi], bfr[2], bfr[3]);
              }
            }
          }
        }
      }
    }
    __syncwarp();
    if (lane == 0)
      lsim__mb_arrive(lsim__smem(&empty[s]));
  }

  if (g.trace && tid == 0)
    g.trace[blockIdx.x * 4 + 1] = lsim__gtime();
  /* ---- the K ranges meet: straight to Y, or the slots and the last
  ** block to arrive sums them in the order 0 .. cs-1 ---- */
  float *slots = g.part + (size_t)ct * cs * BM * BN;
  if (cs > 1) {
    float *mine = slots + (size_t)crank * BM * BN;
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
      for (int ni = 0; ni < NI; ni++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
          const int row = wm * WTM + mi * 16 + gq + 8 * h;
          const int col = wn * WTN + ni * 8 + 2 * q4;
          __stcg(reinterpret_cast<float2 *>(mine + row * BN + col),
                 make_float2(acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1]));
        }
    __threadfence();
    lsim__bar_sync(1, NC);
    if (tid == 0)
      last = atomicAdd(&g.count[ct], 1) == cs - 1;
    lsim__bar_sync(1, NC);
    if (!last) {
      if (g.trace && tid == 0)
        g.trace[blockIdx.x * 4 + 2] = lsim__gtime();
      return;
    }
    __threadfence();
    /* the slots in the order 0 .. cs-1, slot by slot so that each
    ** thread's loads of one slot are all in flight together (a loop over
    ** the slots per element made cs dependent round trips per element:
    ** about 9 us of tail at decode64, 46 at mixed256, H100) */
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
      for (int ni = 0; ni < NI; ni++)
#pragma unroll
        for (int e = 0; e < 4; e++)
          acc[mi][ni][e] = 0.f;
    for (int c = 0; c < cs; c++) {
      const float *sl = slots + (size_t)c * BM * BN;
#pragma unroll
      for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int ni = 0; ni < NI; ni++)
#pragma unroll
          for (int h = 0; h < 2; h++) {
            const int row = wm * WTM + mi * 16 + gq + 8 * h;
            const int col = wn * WTN + ni * 8 + 2 * q4;
            const float2 p =
                __ldcg(reinterpret_cast<const float2 *>(sl + row * BN + col));
            acc[mi][ni][2 * h] += p.x;
            acc[mi][ni][2 * h + 1] += p.y;
          }
    }
  }
#pragma unroll
  for (int mi = 0; mi < MI; mi++)
#pragma unroll
    for (int ni = 0; ni < NI; ni++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int row = wm * WTM + mi * 16 + gq + 8 * h;
        const int col = wn * WTN + ni * 8 + 2 * q4, n = n0 + col;
        if (row >= g.M || n >= g.N)
          continue;
        float f0 = acc[mi][ni][2 * h], f1 = acc[mi][ni][2 * h + 1];
        uint16_t *yp = g.Y + (size_t)row * g.ldy + n;
        if (n + 1 < g.N) {
          if (g.beta != 0.f) {
            const uint32_t y = *reinterpret_cast<const uint32_t *>(yp);
            f0 = fmaf(g.beta, lsim__dt<T>::lo(y), f0);
            f1 = fmaf(g.beta, lsim__dt<T>::hi(y), f1);
          }
          *reinterpret_cast<uint32_t *>(yp) = lsim__dt<T>::pack(f0, f1);
        } else {
          if (g.beta != 0.f)
            f0 = fmaf(g.beta, lsim__dt<T>::to_f(yp[0]), f0);
          yp[0] = lsim__dt<T>::from_f(f0);
        }
      }
  if (cs > 1) {
    lsim__bar_sync(1, NC);
    if (tid == 0)
      g.count[ct] = 0; /* ready for the next launch (stream order) */
  }
  if (g.trace && tid == 0)
    g.trace[blockIdx.x * 4 + 2] = lsim__gtime();
}

/* ---- host side ---------------------------------------------------------- */

typedef CUresult (*lsim__encode_fn)(CUtensorMap *, CUtensorMapDataType,
                                     cuuint32_t, void *, const cuuint64_t *,
                                     const cuuint64_t *, const cuuint32_t *,
                                     const cuuint32_t *, CUtensorMapInterleave,
                                     CUtensorMapSwizzle,
                                     CUtensorMapL2promotion,
                                     CUtensorMapFloatOOBfill);
static lsim__encode_fn lsim__encode = nullptr;
static unsigned long long *lsim__trace_d = nullptr;
static int lsim__trace_n = 0;

/* The last traced launch: block start, main-loop end and end times (us
** from the first start), quantiles over the blocks. */
extern "C" void lsim_cuda_wg_trace_print(FILE *f) {
  if (!lsim__trace_d || lsim__trace_n < 1)
    return;
  const int n = lsim__trace_n;
  unsigned long long *h = (unsigned long long *)malloc((size_t)n * 32);
  if (!h || cudaMemcpy(h, lsim__trace_d, (size_t)n * 32,
                       cudaMemcpyDeviceToHost) != cudaSuccess) {
    free(h);
    return;
  }
  unsigned long long t0 = h[0];
  for (int i = 0; i < n; i++)
    t0 = h[4 * i] < t0 ? h[4 * i] : t0;
  double *v[3];
  for (int k = 0; k < 3; k++) {
    v[k] = (double *)malloc((size_t)n * sizeof(double));
    for (int i = 0; i < n; i++)
      v[k][i] = (double)(h[4 * i + k] - t0) / 1000.0;
    std::sort(v[k], v[k] + n);
  }
  static const char *nm[3] = {"start", "loop end", "end"};
  for (int k = 0; k < 3; k++) {
    fprintf(f, "wgemm trace %-8s us: min %.2f p10 %.2f p50 %.2f p90 %.2f "
               "max %.2f\n",
            nm[k], v[k][0], v[k][n / 10], v[k][n / 2], v[k][(9 * n) / 10],
            v[k][n - 1]);
    free(v[k]);
  }
  free(h);
}
static int lsim__wg_state = 0; /* 0 unknown, 1 available, -1 not */

static int lsim__wg_stage(int bm) { return bm * 128 + LSIM__WG_BN * 128; }

size_t lsim__wg_smem(int bm, int ns, int tc_ld, int nseg) {
  return 1024 + (size_t)ns * (size_t)lsim__wg_stage(bm) +
         (size_t)bm * (size_t)tc_ld * 4 + (size_t)bm * 16 +
         (size_t)nseg * 8 + 16;
}

#define LSIM__WG_MAXSMEM ((size_t)227 * 1024 - 256)

int lsim__wg_max_stages(int bm, int tc_ld, int nseg) {
  int ns = LSIM__WG_MAXNS;
  while (ns > 2 && lsim__wg_smem(bm, ns, tc_ld, nseg) > LSIM__WG_MAXSMEM)
    ns--;
  return lsim__wg_smem(bm, ns, tc_ld, nseg) <= LSIM__WG_MAXSMEM ? ns : 0;
}

template <typename K> static cudaError_t lsim__wg_attr(K kernel) {
  return cudaFuncSetAttribute(kernel,
                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                              (int)LSIM__WG_MAXSMEM);
}

template <typename T> static cudaError_t lsim__wg_init_t() {
  cudaError_t e;
  if ((e = lsim__wg_attr(lsim__wgemm<T, 64>)) != cudaSuccess ||
      (e = lsim__wg_attr(lsim__wgemm<T, 128>)) != cudaSuccess)
    return e;
  return lsim__wg_attr(lsim__wgemm<T, 256>);
}

cudaError_t lsim__wg_init(void) {
  if (lsim__wg_state == 0) {
    void *fn = nullptr;
    cudaDriverEntryPointQueryResult q;
    lsim__wg_state = -1;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000,
                                         cudaEnableDefault,
                                         &q) == cudaSuccess &&
        q == cudaDriverEntryPointSuccess && fn) {
      lsim__encode = (lsim__encode_fn)fn;
      lsim__wg_state = 1;
    }
    cudaGetLastError();
  }
  {
    /* the trace buffer (benchmark knob LSIM_WG_TRACE): allocated here,
    ** never during a graph capture */
    const char *t = getenv("LSIM_WG_TRACE");
    if (t && *t == '1' && !lsim__trace_d &&
        cudaMalloc((void **)&lsim__trace_d, 4096 * 4 * 8) != cudaSuccess)
      lsim__trace_d = nullptr;
  }
  cudaError_t e = lsim__wg_init_t<lsim__bf16>();
  return e != cudaSuccess ? e : lsim__wg_init_t<lsim__fp16>();
}

int lsim__wg_available(void) { return lsim__wg_state == 1; }

/* Benchmark knob (bench_kernels sweeps; not for production use):
** LSIM_WG_PROMO = 0 none, 1 64 B, 2 128 B, 3 256 B: the tensor maps' L2
** promotion. */
static CUtensorMapL2promotion lsim__wg_promo(void) {
  const char *e = getenv("LSIM_WG_PROMO");
  const int v = e && *e ? atoi(e) : 0;
  return v == 1   ? CU_TENSOR_MAP_L2_PROMOTION_L2_64B
         : v == 2 ? CU_TENSOR_MAP_L2_PROMOTION_L2_128B
         : v == 3 ? CU_TENSOR_MAP_L2_PROMOTION_L2_256B
                  : CU_TENSOR_MAP_L2_PROMOTION_NONE;
}

static int lsim__wg_map(CUtensorMap *m, const void *p, int cols, int rows,
                        int ld, int box_rows) {
  const cuuint64_t dim[2] = {(cuuint64_t)cols, (cuuint64_t)rows};
  const cuuint64_t stride[1] = {(cuuint64_t)ld * 2};
  const cuuint32_t box[2] = {LSIM__WG_KC, (cuuint32_t)box_rows};
  const cuuint32_t es[2] = {1, 1};
  return lsim__encode(m, CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, (void *)p, dim,
                      stride, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
                      CU_TENSOR_MAP_SWIZZLE_128B,
                      lsim__wg_promo(),
                      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

template <typename K>
static cudaError_t lsim__wg_go(K kernel, int threads, const CUtensorMap &mx,
                               const CUtensorMap &mw, const lsim__wg_args &g,
                               size_t smem, int pdl, cudaStream_t s) {
  cudaLaunchConfig_t cfg;
  cudaLaunchAttribute at[1];
  int na = 0;
  cfg.gridDim = dim3((unsigned)((g.N + LSIM__WG_BN - 1) / LSIM__WG_BN) *
                     (unsigned)g.cs);
  cfg.blockDim = dim3((unsigned)threads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  if (pdl) {
    at[na].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[na].val.programmaticStreamSerializationAllowed = 1;
    na++;
  }
  cfg.attrs = na ? at : nullptr;
  cfg.numAttrs = (unsigned)na;
  return cudaLaunchKernelEx(&cfg, kernel, mx, mw, g);
}

template <typename T>
static cudaError_t lsim__wg_t(int bm, const CUtensorMap &mx,
                              const CUtensorMap &mw, const lsim__wg_args &g,
                              size_t smem, int pdl, cudaStream_t s) {
  switch (bm) {
  case 64:
    return lsim__wg_go(lsim__wgemm<T, 64>, lsim__wthreads<64>::N, mx, mw, g,
                       smem, pdl, s);
  case 128:
    return lsim__wg_go(lsim__wgemm<T, 128>, lsim__wthreads<128>::N, mx, mw,
                       g, smem, pdl, s);
  case 256:
    return lsim__wg_go(lsim__wgemm<T, 256>, lsim__wthreads<256>::N, mx, mw,
                       g, smem, pdl, s);
  default:
    return cudaErrorInvalidValue;
  }
}

cudaError_t lsim__wg_launch(int dtype, int bm, const void *X, int ldx,
                            const void *W, int ldw, const lsim__wg_args &g,
                            int pdl, cudaStream_t s) {
  CUtensorMap mx, mw;
  if (lsim__wg_state != 1 || g.cs < 1 || g.cs > LSIM__WG_MAXCS ||
      g.M > bm || g.M < 1 || g.ns < 2 || g.ns > LSIM__WG_MAXNS ||
      (g.lora && (g.ldb & 7)))
    return cudaErrorInvalidValue;
  if (!lsim__wg_map(&mx, X, g.K, g.M, ldx, bm) ||
      !lsim__wg_map(&mw, W, g.K, g.N, ldw, LSIM__WG_BN))
    return cudaErrorInvalidValue;
  const size_t smem = lsim__wg_smem(bm, g.ns, g.tc_ld, g.nseg);
  lsim__wg_args ga = g;
  {
    /* benchmark knobs: LSIM_WG_WPOL=0 reads W with the normal L2 policy;
    ** LSIM_WG_KINTER=1 interleaves the K slices of the cs blocks */
    const char *e = getenv("LSIM_WG_WPOL");
    ga.wpol = e && *e ? atoi(e) != 0 : 1;
    e = getenv("LSIM_WG_KINTER");
    ga.kinter = e && *e ? atoi(e) != 0 : 0;
    /* LSIM_WG_TRACE=1: each block's start, main-loop end, end and SM
    ** (lsim_cuda_wg_trace_print) */
    e = getenv("LSIM_WG_TRACE");
    if (e && *e == '1') {
      lsim__trace_n = (int)((g.N + LSIM__WG_BN - 1) / LSIM__WG_BN) * g.cs;
      ga.trace = lsim__trace_n <= 4096 ? lsim__trace_d : nullptr;
    }
  }
  return dtype == LSIM_CUDA_FP16
             ? lsim__wg_t<lsim__fp16>(bm, mx, mw, ga, smem, pdl, s)
             : lsim__wg_t<lsim__bf16>(bm, mx, mw, ga, smem, pdl, s);
}
