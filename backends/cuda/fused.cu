/*
** fused.cu: shrink + expand in one launch through a thread-block cluster
** (fused.cuh).
**
** Block c of a cluster of CS owns d_in columns [c*split_len, +split_len)
** and d_out columns [c*col_len, +col_len) of one tile (<= MT rows of one
** adapter, list positions p0 .. p0+m-1).
**
** Shrink.  Warp w takes the rank rows k0 = 4w, 4w+16, ... in chunks of
** KR = 4; its lanes walk the block's d_in range in 16-byte vectors (a warp
** reads 512 contiguous bytes of each A row per step), U steps of loads
** issued before the first multiply.  A is read with the streaming hint
** (ld.global.cs: read once, evict first); X rows through the read-only
** path (the four warps read the same X range).  The MT x KR fp32 sums are
** reduced across the warp by the transposing butterfly (common.cuh) and
** written to this block's `part` [MT][ws_ld] in shared memory.  Warps
** never share a rank row, so there is no block-level reduction.
**
** Cluster exchange.  barrier.cluster (release / acquire) makes every
** block's `part` visible; each block then sums, for its tile's m x r
** values, the CS partials in the order c = 0 .. CS-1 (ld.shared::cluster
** through cooperative_groups' map_shared_rank), scales by s in fp32 and
** keeps t in its own `tsc`.  It then arrives on a second cluster barrier
** (it has finished reading the others' shared memory) and waits on it only
** at its very end, so a block never leaves while another may still read
** its `part`, and the expand overlaps the slowest block's exchange.
**
** Expand.  Item (v, g): 8 output columns o = o0 + 8v and a group of RPT
** rows (RPT = min(MT, 4)); its Y vectors are loaded first, then the rank
** rows of Bt 8 at a time (16-byte loads, a warp: 512 contiguous bytes of
** one Bt row), MT x 8 fused multiply-adds per rank row with t read from
** shared memory (a broadcast), then Y + delta rounded once and stored.
** With `PF` the block first asks L2 for its whole Bt range
** (prefetch.global.L2, no registers), so those bytes stream in while the
** shrink runs.
*/
#include <cooperative_groups.h>

#include "fused.cuh"

namespace cg = cooperative_groups;

__device__ __forceinline__ void lsim__cluster_arrive_release() {
  asm volatile("barrier.cluster.arrive.release;\n" ::: "memory");
}
__device__ __forceinline__ void lsim__cluster_wait_acquire() {
  asm volatile("barrier.cluster.wait.acquire;\n" ::: "memory");
}

/* Streaming 16-byte load (read once: evict first). */
__device__ __forceinline__ uint4 lsim__ldcs16(const uint16_t *p) {
  return __ldcs(reinterpret_cast<const uint4 *>(p));
}

template <typename T, int MT, bool PG>
__global__ void __launch_bounds__(LSIM__THREADS, MT <= 2 ? 4 : 2)
    lsim__fused_kernel(const lsim__lora_args a) {
  extern __shared__ float lsim__sm_fused[]; /* part, tsc [MT][ld]; red */
  constexpr int KR = 4, N = MT * KR, U = 2;
  constexpr int RPT = MT < 4 ? MT : 4, RG = MT / RPT;
  static_assert(N <= 32 && (N & (N - 1)) == 0, "MT*KR: power of two <= 32");
  cg::cluster_group cl = cg::this_cluster();
  const int cs = a.splits;
  const int crank = (int)cl.block_rank();
  lsim__tile t;
  /* the tile is the cluster's: every block of it leaves here, or none */
  if (!lsim__get_tile<MT, false>(a, blockIdx.x / cs, t))
    return;
  const lsim__adapter_dev ad = a.table[t.adapter];
  const int r = ad.rank, ld = a.ws_ld;
  float *part = lsim__sm_fused, *tsc = lsim__sm_fused + MT * ld;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int o0 = crank * a.col_len, o1 = min(a.d_out, o0 + a.col_len);

  /* the expand's geometry.  Items (v, g): 8 output columns o = o0 + 8v
  ** and RPT rows from jb = g * RPT; when the items are at most half the
  ** threads, ks = 2 or 4 threads share an item, each over its own range
  ** of rank rows (rq of them), and the first adds the others' sums */
  const int nvec = o0 < o1 ? (o1 - o0 + 7) >> 3 : 0, items = nvec * RG;
  const int ks = items * 4 <= LSIM__THREADS   ? 4
                 : items * 2 <= LSIM__THREADS ? 2
                                              : 1;
  const int per = LSIM__THREADS / ks;
  const int rq = ks == 1 ? r : (((r + ks - 1) / ks + 7) & ~7);
  const int kp = tid / per;
  const bool one = items <= per; /* a single pass over the items */
  const bool pre = one && (a.fused_flags & 2);

  /* independent of the shrink: this thread's Y vectors and first 8 Bt
  ** rows (pre), or the block's whole Bt range into L2 (flag 1) */
  uint4 ypre[RPT], bpre[8];
  if (pre) {
    const int it = tid - kp * per;
    const int jb = (it / (nvec > 0 ? nvec : 1)) * RPT;
    const int o = o0 + 8 * (it % (nvec > 0 ? nvec : 1)), n = min(8, o1 - o);
    const bool live = it < items && jb < t.m;
    const int k0 = kp * rq, k1 = min(r, k0 + rq);
#pragma unroll
    for (int u = 0; u < 8; u++)
      bpre[u] = live && k0 + u < k1
                    ? lsim__ldf16(lsim__brow<PG>(ad, k0 + u, a.ldb) + o)
                    : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int jj = 0; jj < RPT; jj++) {
      const int j = jb + jj;
      const uint16_t *yp =
          a.Y + (size_t)a.list[t.p0 + (live && j < t.m ? j : 0)] * a.ldy + o;
      ypre[jj] = !live || kp > 0 || j >= t.m ? make_uint4(0, 0, 0, 0)
                 : n == 8 ? *reinterpret_cast<const uint4 *>(yp)
                          : lsim__ld_partial(yp, n);
    }
  }
  if ((a.fused_flags & 1) && o0 < o1) {
    const int lines = (o1 - o0 + 63) >> 6;
    for (int i = tid; i < r * lines; i += LSIM__THREADS) {
      const int k = i / lines, l = i - k * lines;
      lsim__prefetch_l2(lsim__brow<PG>(ad, k, a.ldb) + o0 + 64 * l);
    }
  }

  /* 1. partial shrink over this block's d_in range */
  {
    const int c0 = crank * a.split_len, c1 = min(a.d_in, c0 + a.split_len);
    const uint16_t *xr[MT];
#pragma unroll
    for (int j = 0; j < MT; j++)
      xr[j] = a.X + (size_t)a.list[t.p0 + (j < t.m ? j : 0)] * a.ldx;
    for (int k0 = warp * KR; k0 < r; k0 += (LSIM__THREADS / 32) * KR) {
      const int nk = min(KR, r - k0);
      const uint16_t *ar[KR];
#pragma unroll
      for (int k = 0; k < KR; k++)
        ar[k] = lsim__arow<PG>(ad, k0 + (k < nk ? k : 0), a.lda);
      float acc[N];
#pragma unroll
      for (int i = 0; i < N; i++)
        acc[i] = 0.f;
      for (int c = c0 + lane * 8; c < c1; c += U * 256) {
        uint4 av[U][KR], xv[U][MT];
#pragma unroll
        for (int u = 0; u < U; u++) {
          const int cc = c + u * 256;
          const bool in = cc < c1, full = cc + 8 <= c1;
#pragma unroll
          for (int k = 0; k < KR; k++)
            av[u][k] = in && k < nk ? (LSIM_FACTOR_HINT ? lsim__ldf16(ar[k] + cc)
                                                        : lsim__ldcs16(ar[k] + cc))
                                    : make_uint4(0, 0, 0, 0);
#pragma unroll
          for (int j = 0; j < MT; j++)
            xv[u][j] = !in || j >= t.m ? make_uint4(0, 0, 0, 0)
                       : full ? lsim__ldg16(xr[j] + cc)
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
      lsim__tsum<N, 16>::run(acc, lane);
      constexpr int SH = 5 - lsim__log2<N>::v;
      if ((lane & ((1 << SH) - 1)) == 0) {
        const int i = lane >> SH, j = i / KR, k = i % KR;
        if (j < t.m && k < nk)
          part[j * ld + k0 + k] = acc[0];
      }
    }
  }

  /* 2. every block's partial, summed in a fixed order, times s */
  cl.sync();
  for (int i = tid; i < t.m * r; i += LSIM__THREADS) {
    const int j = i / r, k = i - j * r;
    float s = 0.f;
#pragma unroll 4
    for (int c = 0; c < cs; c++)
      s += cl.map_shared_rank(part, c)[j * ld + k];
    tsc[j * ld + k] = s * ad.scale;
  }
  lsim__cluster_arrive_release(); /* done with the others' shared memory */
  __syncthreads();

  /* 3. Y[rows][o0..o1) += t Bt */
  if (o0 < o1) {
    float *red = tsc + MT * ld; /* [(ks-1) * items][RPT * 8] */
    for (int it0 = 0; it0 < items; it0 += per) {
      const int it = it0 + tid - kp * per;
      const bool act = it < items;
      const int v = act ? it % nvec : 0, jb = act ? (it / nvec) * RPT : 0;
      const int o = o0 + 8 * v, n = min(8, o1 - o);
      const bool live = act && jb < t.m;
      const int k0 = kp * rq, k1 = min(r, k0 + rq);
      uint16_t *yr[RPT];
      uint4 yv[RPT];
#pragma unroll
      for (int jj = 0; jj < RPT; jj++) {
        const int j = jb + jj;
        yr[jj] = a.Y + (size_t)a.list[t.p0 + (live && j < t.m ? j : 0)] *
                           a.ldy + o;
        yv[jj] = pre ? ypre[jj]
                 : !live || kp > 0 || j >= t.m ? make_uint4(0, 0, 0, 0)
                 : n == 8 ? *reinterpret_cast<const uint4 *>(yr[jj])
                          : lsim__ld_partial(yr[jj], n);
      }
      float acc[RPT][8];
#pragma unroll
      for (int jj = 0; jj < RPT; jj++)
#pragma unroll
        for (int e = 0; e < 8; e++)
          acc[jj][e] = 0.f;
      if (live) {
        for (int kb = k0; kb < k1; kb += 8) {
          uint4 bv[8];
#pragma unroll
          for (int u = 0; u < 8; u++)
            bv[u] = pre && kb == k0 ? bpre[u]
                    : kb + u < k1
                        ? lsim__ldf16(lsim__brow<PG>(ad, kb + u, a.ldb) + o)
                        : make_uint4(0, 0, 0, 0);
#pragma unroll
          for (int u = 0; u < 8; u++) {
            if (kb + u < k1) {
              float bf[8];
              lsim__unpack8<T>(bv[u], bf);
#pragma unroll
              for (int jj = 0; jj < RPT; jj++) {
                if (jb + jj < t.m) {
                  const float tj = tsc[(jb + jj) * ld + kb + u];
#pragma unroll
                  for (int e = 0; e < 8; e++)
                    acc[jj][e] = fmaf(tj, bf[e], acc[jj][e]);
                }
              }
            }
          }
        }
      }
      if (ks > 1) { /* block-uniform; then there is one pass */
        if (live && kp > 0) {
          float *rp = red + ((size_t)(kp - 1) * items + it) * (RPT * 8);
#pragma unroll
          for (int jj = 0; jj < RPT; jj++)
#pragma unroll
            for (int e = 0; e < 8; e++)
              rp[jj * 8 + e] = acc[jj][e];
        }
        __syncthreads();
        if (live && kp == 0)
          for (int q = 1; q < ks; q++) {
            const float *rp = red + ((size_t)(q - 1) * items + it) * (RPT * 8);
#pragma unroll
            for (int jj = 0; jj < RPT; jj++)
#pragma unroll
              for (int e = 0; e < 8; e++)
                acc[jj][e] += rp[jj * 8 + e];
          }
      }
      if (!live || kp > 0)
        continue;
#pragma unroll
      for (int jj = 0; jj < RPT; jj++) {
        if (jb + jj < t.m) {
          float yf[8];
          lsim__unpack8<T>(yv[jj], yf);
#pragma unroll
          for (int e = 0; e < 8; e++)
            yf[e] += acc[jj][e];
          if (n == 8) {
            *reinterpret_cast<uint4 *>(yr[jj]) = lsim__pack8<T>(yf);
          } else {
#pragma unroll
            for (int e = 0; e < 8; e++)
              if (e < n)
                yr[jj][e] = lsim__dt<T>::from_f(yf[e]);
          }
        }
      }
    }
  }
  lsim__cluster_wait_acquire(); /* nobody reads our `part` any more */
}

/* ---- launch ---------------------------------------------------------------------- */

template <typename K> static cudaError_t lsim__fused_attr(K kernel) {
  cudaError_t e = cudaFuncSetAttribute(
      kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  if (e != cudaSuccess)
    return e;
  return cudaFuncSetAttribute(kernel,
                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                              (int)lsim__fused_smem(8, LSIM_CUDA_MAX_RANK));
}

template <typename T, bool PG> static cudaError_t lsim__fused_init_t() {
  cudaError_t e;
  if ((e = lsim__fused_attr(lsim__fused_kernel<T, 1, PG>)) != cudaSuccess ||
      (e = lsim__fused_attr(lsim__fused_kernel<T, 2, PG>)) != cudaSuccess ||
      (e = lsim__fused_attr(lsim__fused_kernel<T, 4, PG>)) != cudaSuccess)
    return e;
  return lsim__fused_attr(lsim__fused_kernel<T, 8, PG>);
}

cudaError_t lsim__fused_init(void) {
  cudaError_t e;
  if ((e = lsim__fused_init_t<lsim__bf16, false>()) != cudaSuccess ||
      (e = lsim__fused_init_t<lsim__bf16, true>()) != cudaSuccess ||
      (e = lsim__fused_init_t<lsim__fp16, false>()) != cudaSuccess)
    return e;
  return lsim__fused_init_t<lsim__fp16, true>();
}

template <typename K>
static cudaError_t lsim__fused_go(K kernel, int cs, unsigned ntiles,
                                  size_t smem, cudaStream_t s,
                                  const lsim__lora_args &a) {
  cudaLaunchConfig_t cfg;
  cudaLaunchAttribute at[1];
  cfg.gridDim = dim3(ntiles * (unsigned)cs);
  cfg.blockDim = dim3(LSIM__THREADS);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  at[0].id = cudaLaunchAttributeClusterDimension;
  at[0].val.clusterDim.x = (unsigned)cs;
  at[0].val.clusterDim.y = 1;
  at[0].val.clusterDim.z = 1;
  cfg.attrs = at;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, kernel, a);
}

template <typename T, bool PG>
static cudaError_t lsim__fused_t(int mt, int cs, const lsim__lora_args &a,
                                 unsigned ntiles, size_t smem,
                                 cudaStream_t s) {
  switch (mt) {
  case 1:
    return lsim__fused_go(lsim__fused_kernel<T, 1, PG>, cs, ntiles, smem, s,
                          a);
  case 2:
    return lsim__fused_go(lsim__fused_kernel<T, 2, PG>, cs, ntiles, smem, s,
                          a);
  case 4:
    return lsim__fused_go(lsim__fused_kernel<T, 4, PG>, cs, ntiles, smem, s,
                          a);
  case 8:
    return lsim__fused_go(lsim__fused_kernel<T, 8, PG>, cs, ntiles, smem, s,
                          a);
  default:
    return cudaErrorInvalidValue;
  }
}

cudaError_t lsim__fused_launch(int dtype, int mt, int cs,
                               const lsim__lora_args &a, unsigned ntiles,
                               size_t smem, cudaStream_t s) {
  if (cs < 1 || cs > LSIM__FUSED_MAXCS)
    return cudaErrorInvalidValue;
  if (a.paged)
    return dtype == LSIM_CUDA_FP16
               ? lsim__fused_t<lsim__fp16, true>(mt, cs, a, ntiles, smem, s)
               : lsim__fused_t<lsim__bf16, true>(mt, cs, a, ntiles, smem, s);
  return dtype == LSIM_CUDA_FP16
             ? lsim__fused_t<lsim__fp16, false>(mt, cs, a, ntiles, smem, s)
             : lsim__fused_t<lsim__bf16, false>(mt, cs, a, ntiles, smem, s);
}
