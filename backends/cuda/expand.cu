/*
** expand.cu: Y[row] += s_a * t B_a^T in place (expand.cuh).
**
** CUDA-core kernel (decode, simt).  A block owns MT rows of one adapter
** and 1024 output columns; thread i owns the 8 columns o = 8 i (one 16-byte
** vector of Y per row).  Before griddepcontrol.wait it loads its Y vectors
** and its first Bt vectors (16 for decode, 4 for 8-row tiles) into
** registers and asks L2 for the rest of its Bt column (prefetch.global.L2):
** with programmatic dependent launch those loads overlap the shrink still
** running.  Then the tile's t (splits summed, times s, fp32; the splits are
** the outer loop, so one L2 round trip per split) is staged in shared
** memory, and each rank step does one 16-byte Bt load (a warp: 512
** contiguous bytes of one rank row) and 8 x MT fused multiply-adds, the
** loads batched 8 (4) at a time.  The last, partial vector of a row
** (d_out % 8 != 0) is read and written element by element.
**
** Tensor-core kernel (mma).  See expand.cuh; fragment layouts of
** mma.m16n8k16: A (row-major 16x16) a0 = (g, 2q..2q+1), a1 = (g+8, 2q..),
** a2 = (g, 2q+8..), a3 = (g+8, 2q+8..); B (16x8, column-major) b0 =
** (k 2q..2q+1, n g), b1 = (k 2q+8.., n g); C c0,c1 = (g, 2q..2q+1), c2,c3 =
** (g+8, 2q..), with g = lane / 4, q = lane % 4.  Bt is stored [k][n], so
** ldmatrix.trans of the four 8x8 blocks (k 0-7 | 8-15) x (n 0-7 | 8-15)
** yields b0, b1 of two n8 tiles at once.
*/
#include "expand.cuh"

/* ---- CUDA-core expand --------------------------------------------------------- */

template <typename T, int MT, bool PER_ROW, bool PG>
__global__ void __launch_bounds__(LSIM__THREADS, 3)
    lsim__expand_simt(const lsim__lora_args a) {
  extern __shared__ float lsim__sm_ts[]; /* [MT][ws_ld] scaled t */
  constexpr int PRE = MT == 1 ? 16 : 4;  /* Bt vectors loaded before the wait */
  constexpr int BATCH = MT == 1 ? 8 : 4; /* Bt vectors in flight after it */
  lsim__tile t;
  if (!lsim__get_tile<MT, PER_ROW>(a, blockIdx.x, t))
    return;
  const lsim__adapter_dev ad = a.table[t.adapter];
  const int r = ad.rank;
  const int o = blockIdx.y * LSIM__EXP_COLS + threadIdx.x * 8;
  const bool act = o < a.d_out;
  const int n = act ? min(8, a.d_out - o) : 0;
  uint16_t *yr[MT];
#pragma unroll
  for (int j = 0; j < MT; j++)
    yr[j] = a.Y + (size_t)a.list[t.p0 + (j < t.m ? j : 0)] * a.ldy;

  /* independent of the shrink: the first Bt vectors and Y into registers,
  ** the rest of Bt into L2 */
  uint4 bpre[PRE], yv[MT];
#pragma unroll
  for (int u = 0; u < PRE; u++)
    bpre[u] = act && u < r ? lsim__ldf16(lsim__brow<PG>(ad, u, a.ldb) + o)
                           : make_uint4(0, 0, 0, 0);
  auto load_y = [&] {
#pragma unroll
    for (int j = 0; j < MT; j++)
      yv[j] = act && j < t.m
                  ? (n == 8 ? *reinterpret_cast<const uint4 *>(yr[j] + o)
                            : lsim__ld_partial(yr[j] + o, n))
                  : make_uint4(0, 0, 0, 0);
  };
  if (!a.y_late)
    load_y();
  if (act)
    for (int k = PRE; k < r; k++)
      lsim__prefetch_l2(lsim__brow<PG>(ad, k, a.ldb) + o);

  lsim__pdl_wait(); /* the shrink's workspace is complete from here on */
  if (a.y_late)
    load_y(); /* the launch before (the base GEMM) has written Y */

  /* t, splits summed, times s: splits outer, 4 independent loads inner */
  const size_t sstride = (size_t)a.nlist * a.ws_ld;
  for (int b0 = threadIdx.x; b0 < t.m * r; b0 += 4 * LSIM__THREADS) {
    int off[4];
    float sum[4];
#pragma unroll
    for (int u = 0; u < 4; u++) {
      const int i = b0 + u * LSIM__THREADS;
      const int j = i / r, k = i - j * r;
      off[u] = i < t.m * r ? (t.p0 + j) * a.ws_ld + k : -1;
      sum[u] = 0.f;
    }
    for (int sp = 0; sp < a.splits; sp++)
#pragma unroll
      for (int u = 0; u < 4; u++)
        if (off[u] >= 0)
          sum[u] += a.ws[sp * sstride + off[u]];
#pragma unroll
    for (int u = 0; u < 4; u++) {
      const int i = b0 + u * LSIM__THREADS;
      if (off[u] >= 0)
        lsim__sm_ts[(i / r) * a.ws_ld + (i % r)] = sum[u] * ad.scale;
    }
  }
  __syncthreads();
  if (!act)
    return;

  float acc[MT][8];
#pragma unroll
  for (int j = 0; j < MT; j++)
#pragma unroll
    for (int e = 0; e < 8; e++)
      acc[j][e] = 0.f;
  auto step = [&](const uint4 bv, int k) {
    float bf[8];
    lsim__unpack8<T>(bv, bf);
#pragma unroll
    for (int j = 0; j < MT; j++) {
      if (j < t.m) {
        const float tj = lsim__sm_ts[j * a.ws_ld + k];
#pragma unroll
        for (int e = 0; e < 8; e++)
          acc[j][e] = fmaf(tj, bf[e], acc[j][e]);
      }
    }
  };
#pragma unroll
  for (int u = 0; u < PRE; u++)
    if (u < r)
      step(bpre[u], u);
  for (int k0 = PRE; k0 < r; k0 += BATCH) {
    uint4 bv[BATCH];
#pragma unroll
    for (int u = 0; u < BATCH; u++)
      bv[u] = k0 + u < r ? lsim__ldf16(lsim__brow<PG>(ad, k0 + u, a.ldb) + o)
                         : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < BATCH; u++)
      if (k0 + u < r)
        step(bv[u], k0 + u);
  }

#pragma unroll
  for (int j = 0; j < MT; j++) {
    if (j < t.m) {
      uint16_t *yp = yr[j] + o;
      float yf[8];
      lsim__unpack8<T>(yv[j], yf);
#pragma unroll
      for (int e = 0; e < 8; e++)
        yf[e] += acc[j][e];
      if (n == 8) {
        *reinterpret_cast<uint4 *>(yp) = lsim__pack8<T>(yf);
      } else {
#pragma unroll
        for (int e = 0; e < 8; e++)
          if (e < n)
            yp[e] = lsim__dt<T>::from_f(yf[e]);
      }
    }
  }
}

/* ---- tensor-core expand -------------------------------------------------------- */

__device__ __forceinline__ uint32_t lsim__eswz(int row, int ch) {
  return (uint32_t)(row * 128 + ((ch ^ (row & 7)) << 4));
}

template <typename T, int RC, bool SPLIT>
__global__ void __launch_bounds__(LSIM__THREADS)
    lsim__expand_mma(const lsim__lora_args a) {
  extern __shared__ __align__(128) unsigned char lsim__sm_expand[];
  constexpr int MT = LSIM__MMA_MT, NS = LSIM__EX_STAGES;
  constexpr int YBYTES = MT * 128, STAGE = (MT + RC) * 128;
  constexpr int NK = RC / 16; /* 16-deep rank steps */
  lsim__tile t;
  int tb = blockIdx.x, yb = blockIdx.y;
  if (a.eitems != nullptr) { /* the balanced order (lora.cu) */
    const int2 it = a.eitems[blockIdx.x];
    tb = it.x;
    yb = it.y;
  }
  if (!lsim__get_tile<MT, false>(a, tb, t))
    return;
  const lsim__adapter_dev ad = a.table[t.adapter];
  const int r = ad.rank;
  const int nks = min(NK, (r + 15) >> 4);
  int cb0 = yb * a.col_len;
  int cb1 = min(a.d_out, cb0 + a.col_len);
  if (a.col_rsplit) {
    /* the rank split: block (yb, sub) takes sub-range sub of range yb */
    const int f = min(4, max(1, (r + 15) >> 4)), sub = yb & 3;
    const int sl = (a.col_len / f + LSIM__MMA_KC - 1) / LSIM__MMA_KC *
                   LSIM__MMA_KC;
    if (sub >= f)
      return;
    const int r0 = (yb >> 2) * a.col_len;
    cb0 = r0 + sub * sl;
    cb1 = min(a.d_out, min(r0 + a.col_len, cb0 + sl));
  }
  if (cb0 >= cb1)
    return;
  const int nch = (cb1 - cb0 + LSIM__MMA_KC - 1) / LSIM__MMA_KC;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const uint32_t sbase = lsim__smem(lsim__sm_expand);

  /* copies: chunk ch of rows (tid >> 3) + 16 i */
  const int ch = tid & 7, rbase = tid >> 3;
  const uint16_t *ysrc[MT / 16];
#pragma unroll
  for (int i = 0; i < MT / 16; i++) {
    const int row = rbase + 16 * i;
    ysrc[i] = row < t.m ? a.Y + (size_t)a.list[t.p0 + row] * a.ldy : nullptr;
  }
  /* this thread's Bt rows (rank rows rbase + 16 i), addressed once: NULL
  ** at or past the rank */
  const uint16_t *bsrc[NK];
#pragma unroll
  for (int i = 0; i < NK; i++) {
    const int k = rbase + 16 * i;
    bsrc[i] = i < nks && k < r ? lsim__brow_rt(ad, k, a.ldb) : nullptr;
  }
  const uint64_t pol = LSIM_FACTOR_HINT ? lsim__policy_evict_first() : 0;
  auto load = [&](int st, int ci) {
    const uint32_t sy = sbase + st * STAGE, sb = sy + YBYTES;
    const int col = cb0 + ci * LSIM__MMA_KC + ch * 8;
    const int bytes = max(0, min(16, (cb1 - col) * 2));
#pragma unroll
    for (int i = 0; i < MT / 16; i++)
      if (ysrc[i] != nullptr && bytes > 0)
        lsim__cp16(sy + lsim__eswz(rbase + 16 * i, ch), ysrc[i] + col, bytes);
#pragma unroll
    for (int i = 0; i < NK; i++) {
      if (i < nks) {
        const int k = rbase + 16 * i;
        const bool ok = bsrc[i] != nullptr && bytes > 0;
        lsim__cp16f(sb + lsim__eswz(k, ch),
                    ok ? (const void *)(bsrc[i] + col) : (const void *)ad.Bt,
                    ok ? bytes : 0, pol);
      }
    }
  };

  /* Y and Bt do not depend on the shrink: start the pipeline first (with
  ** y_late, Y is written by the launch before: wait first) */
  if (a.y_late)
    lsim__pdl_wait();
#pragma unroll
  for (int s = 0; s < NS - 1; s++) {
    if (s < nch)
      load(s, s);
    lsim__cp_commit();
  }

  lsim__pdl_wait();

  /* the tile's scaled t as A fragments (hi, and lo = the rest).  v[ks][i]:
  ** i = 0,1 (row g, k, k+1), 2,3 (row g+8, k, k+1), 4..7 the same at k+8,
  ** k = 16 ks + 2q.  The splits are the outer loop so that the loads of
  ** one split are independent (one L2 round trip per split). */
  const int g = lane >> 2, q = lane & 3;
  float v[NK][8];
#pragma unroll
  for (int ks = 0; ks < NK; ks++)
#pragma unroll
    for (int i = 0; i < 8; i++)
      v[ks][i] = 0.f;
  {
    const int ra = warp * 16 + g, rb = ra + 8;
    const bool oka = ra < t.m, okb = rb < t.m;
    const float *wa = a.ws + (size_t)(t.p0 + (oka ? ra : 0)) * a.ws_ld;
    const float *wb = a.ws + (size_t)(t.p0 + (okb ? rb : 0)) * a.ws_ld;
    const size_t sstride = (size_t)a.nlist * a.ws_ld;
    for (int sp = 0; sp < a.splits; sp++) {
#pragma unroll
      for (int ks = 0; ks < NK; ks++) {
        if (ks < nks) {
#pragma unroll
          for (int h = 0; h < 2; h++) {
            const int k = ks * 16 + 2 * q + 8 * h;
            if (k + 1 < r) { /* k even, ws_ld even: 8-byte aligned */
              if (oka) {
                const float2 p = *reinterpret_cast<const float2 *>(wa + k);
                v[ks][4 * h] += p.x;
                v[ks][4 * h + 1] += p.y;
              }
              if (okb) {
                const float2 p = *reinterpret_cast<const float2 *>(wb + k);
                v[ks][4 * h + 2] += p.x;
                v[ks][4 * h + 3] += p.y;
              }
            } else if (k < r) {
              if (oka)
                v[ks][4 * h] += wa[k];
              if (okb)
                v[ks][4 * h + 2] += wb[k];
            }
          }
        }
      }
      wa += sstride;
      wb += sstride;
    }
  }
  uint32_t ahi[NK][4], alo[NK][4];
#pragma unroll
  for (int ks = 0; ks < NK; ks++) {
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const float x0 = v[ks][2 * i] * ad.scale;
      const float x1 = v[ks][2 * i + 1] * ad.scale;
      const float h0 = lsim__dt<T>::round(x0);
      const float h1 = lsim__dt<T>::round(x1);
      ahi[ks][i] = lsim__dt<T>::pack(h0, h1);
      alo[ks][i] = SPLIT ? lsim__dt<T>::pack(x0 - h0, x1 - h1) : 0u;
    }
  }

  /* store phase: rows warp*16 + 4 i + lane/8, chunk lane % 8 */
  uint16_t *ydst[4];
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const int row = warp * 16 + 4 * i + (lane >> 3);
    ydst[i] = row < t.m ? a.Y + (size_t)a.list[t.p0 + row] * a.ldy : nullptr;
  }
  const int brow = (lane & 7) + (((lane >> 3) & 1) << 3);
  const int bch = lane >> 4;

  for (int ci = 0; ci < nch; ci++) {
    lsim__cp_wait<NS - 2>();
    __syncthreads();
    {
      const int nx = ci + NS - 1;
      if (nx < nch)
        load(nx % NS, nx);
      lsim__cp_commit();
    }
    const uint32_t yoff = (ci % NS) * STAGE, boff = yoff + YBYTES;

    float acc[8][4];
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
      for (int e = 0; e < 4; e++)
        acc[i][e] = 0.f;
#pragma unroll
    for (int ks = 0; ks < NK; ks++) {
      if (ks < nks) {
#pragma unroll
        for (int np = 0; np < 4; np++) {
          uint32_t bf[4];
          lsim__ldsm4t(bf, sbase + boff +
                               lsim__eswz(ks * 16 + brow, np * 2 + bch));
          lsim__mma<T>(acc[2 * np], ahi[ks], bf[0], bf[1]);
          lsim__mma<T>(acc[2 * np + 1], ahi[ks], bf[2], bf[3]);
          if (SPLIT) {
            lsim__mma<T>(acc[2 * np], alo[ks], bf[0], bf[1]);
            lsim__mma<T>(acc[2 * np + 1], alo[ks], bf[2], bf[3]);
          }
        }
      }
    }

    /* Y += acc in shared memory (each warp its own 16 rows) */
#pragma unroll
    for (int nt = 0; nt < 8; nt++) {
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int row = warp * 16 + g + 8 * h;
        uint32_t *p = reinterpret_cast<uint32_t *>(
            lsim__sm_expand + yoff + lsim__eswz(row, nt) + 4 * q);
        const uint32_t yv = *p;
        *p = lsim__dt<T>::pack(lsim__dt<T>::lo(yv) + acc[nt][2 * h],
                               lsim__dt<T>::hi(yv) + acc[nt][2 * h + 1]);
      }
    }
    __syncwarp();
    const int cbase = cb0 + ci * LSIM__MMA_KC;
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const int row = warp * 16 + 4 * i + (lane >> 3), c = lane & 7;
      const int col = cbase + c * 8;
      if (ydst[i] != nullptr && col < cb1) {
        const uint4 v = *reinterpret_cast<const uint4 *>(
            lsim__sm_expand + yoff + lsim__eswz(row, c));
        uint16_t *yp = ydst[i] + col;
        if (col + 8 <= cb1) {
          *reinterpret_cast<uint4 *>(yp) = v;
        } else {
          const uint16_t e[8] = {
              (uint16_t)(v.x & 0xffffu), (uint16_t)(v.x >> 16),
              (uint16_t)(v.y & 0xffffu), (uint16_t)(v.y >> 16),
              (uint16_t)(v.z & 0xffffu), (uint16_t)(v.z >> 16),
              (uint16_t)(v.w & 0xffffu), (uint16_t)(v.w >> 16)};
#pragma unroll
          for (int k = 0; k < 8; k++)
            if (k < cb1 - col)
              yp[k] = e[k];
        }
      }
    }
  }
  lsim__cp_wait<0>();
}

/* ---- launch ---------------------------------------------------------------------- */

template <typename K>
static cudaError_t lsim__launch(K kernel, dim3 grid, size_t smem, int pdl,
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

template <typename T, bool SPLIT> static cudaError_t lsim__expand_init_ts() {
  cudaError_t e;
  if ((e = cudaFuncSetAttribute(lsim__expand_mma<T, 16, SPLIT>,
                                cudaFuncAttributeMaxDynamicSharedMemorySize,
                                (int)lsim__expand_smem(16))) != cudaSuccess)
    return e;
  if ((e = cudaFuncSetAttribute(lsim__expand_mma<T, 32, SPLIT>,
                                cudaFuncAttributeMaxDynamicSharedMemorySize,
                                (int)lsim__expand_smem(32))) != cudaSuccess)
    return e;
  if ((e = cudaFuncSetAttribute(lsim__expand_mma<T, 64, SPLIT>,
                                cudaFuncAttributeMaxDynamicSharedMemorySize,
                                (int)lsim__expand_smem(64))) != cudaSuccess)
    return e;
  return cudaFuncSetAttribute(lsim__expand_mma<T, 128, SPLIT>,
                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                              (int)lsim__expand_smem(128));
}

cudaError_t lsim__expand_init(void) {
  cudaError_t e;
  if ((e = lsim__expand_init_ts<lsim__bf16, true>()) != cudaSuccess ||
      (e = lsim__expand_init_ts<lsim__bf16, false>()) != cudaSuccess ||
      (e = lsim__expand_init_ts<lsim__fp16, true>()) != cudaSuccess)
    return e;
  return lsim__expand_init_ts<lsim__fp16, false>();
}

template <typename T, bool SPLIT>
static cudaError_t lsim__expand_mma_rc(int rc, const lsim__lora_args &a,
                                       dim3 grid, int pdl, cudaStream_t s) {
  switch (rc) {
  case 16:
    return lsim__launch(lsim__expand_mma<T, 16, SPLIT>, grid,
                        lsim__expand_smem(16), pdl, s, a);
  case 32:
    return lsim__launch(lsim__expand_mma<T, 32, SPLIT>, grid,
                        lsim__expand_smem(32), pdl, s, a);
  case 64:
    return lsim__launch(lsim__expand_mma<T, 64, SPLIT>, grid,
                        lsim__expand_smem(64), pdl, s, a);
  case 128:
    return lsim__launch(lsim__expand_mma<T, 128, SPLIT>, grid,
                        lsim__expand_smem(128), pdl, s, a);
  default:
    return cudaErrorInvalidValue;
  }
}

template <typename T>
static cudaError_t lsim__expand_launch_t(int kind, int rc, int split,
                                         const lsim__lora_args &a, dim3 grid,
                                         size_t simt_smem, int pdl,
                                         cudaStream_t s) {
  switch (kind) {
  case LSIM__KIND_DECODE:
    return a.paged ? lsim__launch(lsim__expand_simt<T, 1, true, true>, grid,
                                  simt_smem, pdl, s, a)
                   : lsim__launch(lsim__expand_simt<T, 1, true, false>, grid,
                                  simt_smem, pdl, s, a);
  case LSIM__KIND_SIMT:
    return a.paged
               ? lsim__launch(lsim__expand_simt<T, LSIM__SIMT_MT, false, true>,
                              grid, simt_smem, pdl, s, a)
               : lsim__launch(lsim__expand_simt<T, LSIM__SIMT_MT, false, false>,
                              grid, simt_smem, pdl, s, a);
  case LSIM__KIND_MMA:
    return split ? lsim__expand_mma_rc<T, true>(rc, a, grid, pdl, s)
                 : lsim__expand_mma_rc<T, false>(rc, a, grid, pdl, s);
  default:
    return cudaErrorInvalidValue;
  }
}

cudaError_t lsim__expand_launch(int dtype, int kind, int rc, int split,
                                const lsim__lora_args &a, dim3 grid,
                                size_t simt_smem, int pdl,
                                cudaStream_t s) {
  return dtype == LSIM_CUDA_FP16
             ? lsim__expand_launch_t<lsim__fp16>(kind, rc, split, a, grid,
                                                 simt_smem, pdl, s)
             : lsim__expand_launch_t<lsim__bf16>(kind, rc, split, a, grid,
                                                 simt_smem, pdl, s);
}
