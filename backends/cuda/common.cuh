/*
** common.cuh: what every CUDA op of lorasim shares.
**
**   - LSIM_CUDA_TRY / LSIM_CUDA_RET: a checked CUDA call.  A failure becomes
**     LSIM_E_BACKEND with the CUDA error string, the call and its place;
**     nothing here aborts.
**   - the element types: activations and factors are 16-bit (bf16 or fp16),
**     held as raw uint16_t; lsim__dt<T> converts and packs them
**   - the PTX wrappers the tiled kernels use (cp.async with zero fill,
**     ldmatrix, mma.sync m16n8k16 with fp32 accumulation, griddepcontrol)
**   - lsim__lora_args: the one parameter block of every shrink and expand
**     kernel, and lsim__tile: how a block finds its rows
**
** Everything is sm_90 (CMake builds sm_90 SASS plus compute_90 PTX):
** griddepcontrol (programmatic dependent launch) needs it.
*/
#ifndef LSIM_CUDA_COMMON_CUH
#define LSIM_CUDA_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "cuda.h"

/* ---- checked calls --------------------------------------------------------- */

/* In a function with `lsim_err rc` and an `out:` cleanup label. */
#define LSIM_CUDA_TRY(call, eb)                                             \
  do {                                                                      \
    cudaError_t lsim__e = (call);                                           \
    if (lsim__e != cudaSuccess) {                                           \
      rc = lsim_fail((eb), LSIM_E_BACKEND, "cuda: %s: %s (%s:%d)", #call,   \
                     cudaGetErrorString(lsim__e), __FILE__, __LINE__);      \
      goto out;                                                             \
    }                                                                       \
  } while (0)

/* Return the error directly (nothing to clean up). */
#define LSIM_CUDA_RET(call, eb)                                             \
  do {                                                                      \
    cudaError_t lsim__e = (call);                                           \
    if (lsim__e != cudaSuccess)                                             \
      return lsim_fail((eb), LSIM_E_BACKEND, "cuda: %s: %s (%s:%d)", #call, \
                       cudaGetErrorString(lsim__e), __FILE__, __LINE__);    \
  } while (0)

/* ---- element types ----------------------------------------------------------- */

struct lsim__bf16 {}; /* tags: the kernels are templates over these */
struct lsim__fp16 {};

template <typename T> struct lsim__dt;

template <> struct lsim__dt<lsim__bf16> {
  static __device__ __forceinline__ float lo(uint32_t w) {
    return __uint_as_float(w << 16);
  }
  static __device__ __forceinline__ float hi(uint32_t w) {
    return __uint_as_float(w & 0xffff0000u);
  }
  static __device__ __forceinline__ float to_f(uint16_t h) {
    return __uint_as_float((uint32_t)h << 16);
  }
  static __device__ __forceinline__ uint16_t from_f(float f) {
    return __bfloat16_as_ushort(__float2bfloat16_rn(f));
  }
  /* f rounded to the type, as a float */
  static __device__ __forceinline__ float round(float f) {
    return __bfloat162float(__float2bfloat16_rn(f));
  }
  /* two values, `a` in the low half */
  static __device__ __forceinline__ uint32_t pack(float a, float b) {
    return (uint32_t)from_f(a) | ((uint32_t)from_f(b) << 16);
  }
};

template <> struct lsim__dt<lsim__fp16> {
  static __device__ __forceinline__ float lo(uint32_t w) {
    return __half2float(__ushort_as_half((unsigned short)(w & 0xffffu)));
  }
  static __device__ __forceinline__ float hi(uint32_t w) {
    return __half2float(__ushort_as_half((unsigned short)(w >> 16)));
  }
  static __device__ __forceinline__ float to_f(uint16_t h) {
    return __half2float(__ushort_as_half(h));
  }
  static __device__ __forceinline__ uint16_t from_f(float f) {
    return __half_as_ushort(__float2half_rn(f));
  }
  static __device__ __forceinline__ float round(float f) {
    return __half2float(__float2half_rn(f));
  }
  static __device__ __forceinline__ uint32_t pack(float a, float b) {
    return (uint32_t)from_f(a) | ((uint32_t)from_f(b) << 16);
  }
};

/* Eight packed 16-bit values (one 16-byte vector) to floats. */
template <typename T>
__device__ __forceinline__ void lsim__unpack8(const uint4 v, float (&f)[8]) {
  f[0] = lsim__dt<T>::lo(v.x);
  f[1] = lsim__dt<T>::hi(v.x);
  f[2] = lsim__dt<T>::lo(v.y);
  f[3] = lsim__dt<T>::hi(v.y);
  f[4] = lsim__dt<T>::lo(v.z);
  f[5] = lsim__dt<T>::hi(v.z);
  f[6] = lsim__dt<T>::lo(v.w);
  f[7] = lsim__dt<T>::hi(v.w);
}

template <typename T>
__device__ __forceinline__ uint4 lsim__pack8(const float (&f)[8]) {
  uint4 v;
  v.x = lsim__dt<T>::pack(f[0], f[1]);
  v.y = lsim__dt<T>::pack(f[2], f[3]);
  v.z = lsim__dt<T>::pack(f[4], f[5]);
  v.w = lsim__dt<T>::pack(f[6], f[7]);
  return v;
}

/* Read-only 16-byte load through the non-coherent path. */
__device__ __forceinline__ uint4 lsim__ldg16(const uint16_t *p) {
  return __ldg(reinterpret_cast<const uint4 *>(p));
}

/*
** Factor loads.  A launch reads each adapter factor byte once (or, for the
** tiled kernels, from a few blocks at about the same time), so the factor
** loads can ask L2 to give their lines up first and leave what else is
** there (the base GEMM's output, X, the KV pages a serving engine keeps
** hot; under the benchmark's memset flush, dirty lines whose write-back the
** reads would otherwise pay).  LSIM_FACTOR_HINT (compile time) picks how:
**   0  plain read-only loads (__ldg; cp.async.cg), no hint
**   1  ld.global.cs (streaming) for the CUDA-core loads; an L2 evict_first
**      cache policy on the tiled kernels' cp.async
**   2  an L2 evict_first cache policy on both (ld.global.nc.L2::cache_hint)
** Measured in docs/BENCHMARKS.md ("L2 eviction hints").
*/
#ifndef LSIM_FACTOR_HINT
#define LSIM_FACTOR_HINT 1
#endif
/* 1: the tensor-core shrink's X rows take the same policy (each X element
** is read by one block only).  Measured and left off (0): prefill4096 r16
** 38.2 -> 38.7 us, r64 54.9 -> 54.0 (BENCHMARKS.md, "L2 eviction hints"). */
#ifndef LSIM_SHRINK_X_HINT
#define LSIM_SHRINK_X_HINT 0
#endif

__device__ __forceinline__ uint64_t lsim__policy_evict_first() {
  uint64_t pol;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
  return pol;
}

/* One 16-byte factor vector (A row or B^T row). */
__device__ __forceinline__ uint4 lsim__ldf16(const uint16_t *p) {
#if LSIM_FACTOR_HINT == 1
  return __ldcs(reinterpret_cast<const uint4 *>(p));
#elif LSIM_FACTOR_HINT == 2
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 "
               "{%0,%1,%2,%3}, [%4], %5;\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p), "l"(lsim__policy_evict_first()));
  return v;
#else
  return __ldg(reinterpret_cast<const uint4 *>(p));
#endif
}

/* n (0..8) elements from p, the rest zero: for the last, partial vector of
** a row whose length is not a multiple of 8. */
__device__ __forceinline__ uint4 lsim__ld_partial(const uint16_t *p, int n) {
  uint16_t e[8];
#pragma unroll
  for (int i = 0; i < 8; i++)
    e[i] = i < n ? p[i] : (uint16_t)0;
  uint4 v;
  v.x = (uint32_t)e[0] | ((uint32_t)e[1] << 16);
  v.y = (uint32_t)e[2] | ((uint32_t)e[3] << 16);
  v.z = (uint32_t)e[4] | ((uint32_t)e[5] << 16);
  v.w = (uint32_t)e[6] | ((uint32_t)e[7] << 16);
  return v;
}

/* ---- PTX wrappers -------------------------------------------------------------- */

__device__ __forceinline__ uint32_t lsim__smem(const void *p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}

/* 16-byte async copy global -> shared; src_bytes < 16 zero-fills the rest
** (0: the destination becomes zeros and src is not read). */
__device__ __forceinline__ void lsim__cp16(uint32_t dst, const void *src,
                                          int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst),
               "l"(src), "r"(src_bytes)
               : "memory");
}
/* The same for a factor vector: with LSIM_FACTOR_HINT != 0 its L2 line is
** the first to give up (pol from lsim__policy_evict_first). */
__device__ __forceinline__ void lsim__cp16f(uint32_t dst, const void *src,
                                           int src_bytes, uint64_t pol) {
#if LSIM_FACTOR_HINT != 0
  asm volatile(
      "cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n" ::
          "r"(dst),
      "l"(src), "r"(src_bytes), "l"(pol)
      : "memory");
#else
  (void)pol;
  lsim__cp16(dst, src, src_bytes);
#endif
}
__device__ __forceinline__ void lsim__cp_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N> __device__ __forceinline__ void lsim__cp_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void lsim__ldsm4(uint32_t (&r)[4], uint32_t a) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(a));
}
__device__ __forceinline__ void lsim__ldsm4t(uint32_t (&r)[4], uint32_t a) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(a));
}

/* D = A B + D, m16n8k16, A row-major, B column-major, fp32 accumulators. */
template <typename T>
__device__ __forceinline__ void lsim__mma(float (&c)[4], const uint32_t (&a)[4],
                                         uint32_t b0, uint32_t b1);
template <>
__device__ __forceinline__ void lsim__mma<lsim__bf16>(float (&c)[4],
                                                     const uint32_t (&a)[4],
                                                     uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0),
                 "r"(b1));
}
template <>
__device__ __forceinline__ void lsim__mma<lsim__fp16>(float (&c)[4],
                                                     const uint32_t (&a)[4],
                                                     uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0),
                 "r"(b1));
}

/* Programmatic dependent launch (sm_90).  The shrink lets its dependent
** (the expand) start as soon as every shrink block is running; the expand
** issues the loads that do not depend on the shrink (factors, Y), then
** waits for the shrink grid to complete and flush before it reads the
** workspace.  Without the launch attribute both are no-ops. */
__device__ __forceinline__ void lsim__pdl_trigger() {
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}
__device__ __forceinline__ void lsim__pdl_wait() {
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
}

__device__ __forceinline__ void lsim__prefetch_l2(const void *p) {
  asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p));
}

/* ---- kernel parameters ----------------------------------------------------------- */

/*
** One device adapter-table entry (the table is indexed by adapter id).
**
** Two layouts of the factor rows, one row-address function each:
**   contiguous (pt == NULL): A row k at A + k * lda, B^T row k at
**     Bt + k * ldb (lsim_cuda_lora_load's own allocation)
**   paged (pt != NULL): A = Bt = the pool's first page, lda = ldb = the page
**     width, and pt the generation's page table (2 * rank page indices: the
**     A rows, then the B^T rows): A row k at A + pt[k] * lda, B^T row k at
**     Bt + pt[rank + k] * ldb (the device pool, pool.h)
** Every kernel reaches a factor row only through lsim__arow / lsim__brow.
*/
struct lsim__adapter_dev {
  const uint16_t *A;  /* [rank][lda]: logical A [rank][d_in], rows padded */
  const uint16_t *Bt; /* [rank][ldb]: B transposed, rank rows of d_out */
  const int32_t *pt;  /* NULL: contiguous; else the page table */
  int rank;           /* rank the kernels compute; 0 = not loaded */
  float scale;        /* semantic scale s */
};

/*
** Address of factor row k of A (lda: the launch's A row stride) and of row
** k of B^T.  PG (compile time) says which layout: the CUDA-core kernels,
** which address a row per load, are instantiated for both (a run-time test
** per load kept the contiguous loads from being batched: decode64 r16 went
** from 13.9 to 19.7 us); the tensor-core kernels address each thread's
** rows once and use the run-time form (lsim__arow_rt, lsim__brow_rt).
*/
template <bool PG>
__device__ __forceinline__ const uint16_t *
lsim__arow(const lsim__adapter_dev &ad, int k, int lda) {
  if constexpr (PG)
    return ad.A + (size_t)__ldg(ad.pt + k) * (size_t)lda;
  else
    return ad.A + (size_t)k * (size_t)lda;
}
template <bool PG>
__device__ __forceinline__ const uint16_t *
lsim__brow(const lsim__adapter_dev &ad, int k, int ldb) {
  if constexpr (PG)
    return ad.Bt + (size_t)__ldg(ad.pt + ad.rank + k) * (size_t)ldb;
  else
    return ad.Bt + (size_t)k * (size_t)ldb;
}
__device__ __forceinline__ const uint16_t *
lsim__arow_rt(const lsim__adapter_dev &ad, int k, int lda) {
  return ad.pt ? lsim__arow<true>(ad, k, lda) : lsim__arow<false>(ad, k, lda);
}
__device__ __forceinline__ const uint16_t *
lsim__brow_rt(const lsim__adapter_dev &ad, int k, int ldb) {
  return ad.pt ? lsim__brow<true>(ad, k, ldb) : lsim__brow<false>(ad, k, ldb);
}

/*
** Everything a shrink or expand launch reads.  The metadata arrays live in
** one device buffer that lsim_cuda_lora_plan fills with one copy.
**
** Row list and groups: `list` holds packed row indices grouped by adapter
** (perm for the contiguous segments, sorted_rows for the indexed groups,
** perm again for the decode path); group g owns list positions
** offsets[g] .. offsets[g+1]-1 and uses adapter group_adapter[g] (-1: the
** indexed base sentinel, skipped on the device).  A tile is {group, first
** position}; it covers up to the kernel's tile height of that group's rows.
** The decode path has no tiles: block b takes list position b and reads
** its adapter from row_adapter[list[b]].
**
** Workspace: ws[s][p][k] (s < splits, p a list position, k < the row's
** rank) holds split s's partial shrink result x_p . A_a[k] in fp32.
*/
struct lsim__lora_args {
  const int2 *tiles;
  const int *list;
  const int *offsets;
  const int *group_adapter;
  const int *row_adapter;
  int ntiles, nlist;
  const lsim__adapter_dev *table;
  int table_n;
  int lda, ldb; /* factor row strides, elements */
  const uint16_t *X;
  uint16_t *Y;
  int ldx, ldy; /* elements, multiples of 8 */
  int d_in, d_out;
  float *ws;
  int ws_ld;     /* >= the plan's largest rank */
  int splits;    /* shrink: d_in split into this many ranges (grid z) */
  int split_len; /* columns per range, a multiple of 64 */
  int col_len;   /* expand: columns per block (grid y); fused: d_out range */
  int col_rsplit; /* _mma expand, the rank split: 1 grid y is 4 x the
                  ** column blocks, and a tile of rank r splits each
                  ** col_len range over min(4, ceil(r / 16)) blocks (the
                  ** rest exit), so that high-rank tiles' blocks do no more
                  ** work than low-rank ones'; 0 one block per range */
  const int2 *eitems; /* _mma expand, the balanced order: block b takes
                      ** tile eitems[b].x, column block eitems[b].y (a
                      ** 1-D grid); NULL: tile blockIdx.x, column block
                      ** blockIdx.y */
  int fused_flags; /* fused: 1 prefetch Bt to L2, 2 preload Y and Bt */
  int paged;       /* the table's entries are paged (pt != NULL): the
                   ** CUDA-core kernels' PG instantiation */
  int y_late;      /* expand: 1 read Y only after griddepcontrol.wait (the
                   ** launch that precedes it, e.g. the base GEMM, writes
                   ** Y); 0 read it before, beside the factors */
  int shrink_pdl;  /* shrink: 1 launched as a programmatic dependent of the
                   ** launch before it (the base GEMM), which it does not
                   ** read; every block that computes waits
                   ** (griddepcontrol.wait) before it exits, so the shrink
                   ** grid completes only after that launch has completed
                   ** and flushed: an expand waiting on the shrink then sees
                   ** the GEMM's Y too */
};

struct lsim__tile {
  int adapter; /* >= 0 */
  int p0;      /* first list position */
  int m;       /* rows, 1..tile height */
};

/* Resolve block b's tile; false for the base sentinel (skip the block). */
template <int MT, bool PER_ROW>
__device__ __forceinline__ bool lsim__get_tile(const lsim__lora_args &a,
                                              int b, lsim__tile &t) {
  if (PER_ROW) {
    t.p0 = b;
    t.m = 1;
    t.adapter = a.row_adapter[a.list[b]];
  } else {
    const int2 tl = a.tiles[b];
    t.p0 = tl.y;
    t.m = min(MT, a.offsets[tl.x + 1] - tl.y);
    t.adapter = a.group_adapter[tl.x];
  }
  return t.adapter >= 0 && t.adapter < a.table_n && t.m > 0;
}

/* ---- warp reduction -------------------------------------------------------- */

/*
** Sum N (a power of two, <= 32) values across a warp.  Level LVL exchanges
** half of the values with lane ^ LVL: the lane with bit LVL set keeps the
** upper half.  When one value is left the remaining levels reduce it.  The
** result in lane l is the sum of value index l >> (5 - log2 N).
*/
template <int N, int LVL> struct lsim__tsum {
  static __device__ __forceinline__ void run(float *v, int lane) {
    if constexpr (LVL >= 1) {
      if constexpr (N > 1) {
        const bool up = (lane & LVL) != 0;
#pragma unroll
        for (int i = 0; i < N / 2; i++) {
          float send = up ? v[i] : v[i + N / 2];
          float keep = up ? v[i + N / 2] : v[i];
          v[i] = keep + __shfl_xor_sync(0xffffffffu, send, LVL);
        }
        lsim__tsum<N / 2, LVL / 2>::run(v, lane);
      } else {
        v[0] += __shfl_xor_sync(0xffffffffu, v[0], LVL);
        lsim__tsum<1, LVL / 2>::run(v, lane);
      }
    }
  }
};

template <int N> struct lsim__log2 {
  static constexpr int v = N <= 1 ? 0 : 1 + lsim__log2<N / 2>::v;
};
template <> struct lsim__log2<1> {
  static constexpr int v = 0;
};

/* Tile heights and pipeline shapes of the kernels. */
#define LSIM__THREADS 128   /* every kernel: 4 warps */
#define LSIM__SIMT_MT 8     /* rows per SIMT tile (sgmv / indexed) */
#define LSIM__SIMT_KR 4     /* rank rows per SIMT shrink block */
#define LSIM__EXP_COLS 1024 /* columns per SIMT expand block (128 x 8) */
#define LSIM__MMA_MT 64     /* rows per tensor-core tile (16 per warp) */
#define LSIM__MMA_KC 64     /* columns per pipeline stage (128 bytes) */
#define LSIM__SH_STAGES 4   /* shrink cp.async stages */
#define LSIM__EX_STAGES 3   /* expand cp.async stages */

#endif /* LSIM_CUDA_COMMON_CUH */
