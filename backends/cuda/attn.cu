/*
** attn.cu: paged attention over the KV page pool and the KV append
** (issue 19); the API and the page layout are in attn.cuh, the design in
** docs/CUDA.md ("Paged attention").
**
** Rows are packed per kv head: the G = q_heads / kv_heads query heads that
** read one kv head are consecutive rows of one tile (packed row
** pr = token * G + g), so every K/V tile a block gathers from the pages
** serves all of them (the grouped-query sharing that makes decode cost one
** pass over the KV bytes).  One kernel template computes a work item
** {sequence, packed rows row0 .. row0+nrows-1, kv head, keys kv0 .. kv1-1}
** with mma.sync m16n8k16 (bf16 in, fp32 accumulators) and an online
** softmax, K/V tiles of 64 tokens gathered from the pages by cp.async into
** XOR-swizzled shared memory, two stages deep.  Two shapes of it:
**
**   wide    8 warps x 16 rows (128 packed rows), each warp every token of
**           a tile: prefill tiles (FlashAttention-2's split of the rows)
**   narrow  1 x 16 rows, the 4 warps split each tile's 64 tokens and merge
**           their softmax states in shared memory at the end: decode items
**           (G rows of one token) and prefill tiles of at most 16 rows
**
** An item whose key range is split (flash-decoding) writes its normalised
** partial output and log-sum-exp to the workspace; a combine kernel merges
** the splits of each row in split order.  Fixed orders everywhere, no
** atomics: the result is the same bits run to run.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn.cuh"
#include "common.cuh"

#define LSIM__ATT_BN 64 /* tokens per K/V tile */

/* One work item (8 ints, one metadata record). */
struct lsim__att_item {
  int seq;   /* sequence index (seqs[]) */
  int row0;  /* first packed row of the sequence's rows x G */
  int nrows; /* packed rows, 1 .. the kernel's 16 * WM */
  int kvh;   /* kv head */
  int kv0, kv1; /* keys kv0 .. kv1-1 of the sequence */
  int part;  /* -1: write the output; else the first workspace row */
  int pad;
};

/* One combine entry: a packed row whose keys were split. */
struct lsim__att_comb {
  int row;    /* batch row (token) */
  int hq;     /* query head */
  int slot0;  /* workspace row of split 0 */
  int nsplit; /* splits, >= 2 */
  int stride; /* workspace rows between splits */
  int pad[3];
};

struct lsim__att_args {
  const uint16_t *pool;
  int64_t page_elems; /* page_bytes / 2 */
  int64_t koff;       /* element offset of the layer's K block */
  int64_t voff;       /* V block minus K block */
  int tpp, kvh, G;
  const int4 *seqs; /* {q_start, ctx, first page entry, ctx + rows} */
  const int32_t *pages;
  const lsim__att_item *items;
  const uint16_t *q;
  int64_t ldq;
  uint16_t *out;
  int64_t ldo;
  float *ws_o;   /* [rows][D] normalised partial outputs */
  float *ws_lse; /* [rows] log2-sum-exp of the scaled scores */
  float sl2;     /* log2(e) / sqrt(D) */
};

/* 16-byte unit of (row r, chunk c) in a swizzled tile of CH chunks a row:
** the chunk index XOR the row's low 3 bits, so the 8 rows an ldmatrix
** reads at one logical chunk land in 8 different bank groups. */
template <int CH>
__device__ __forceinline__ int lsim__att_sw(int r, int c) {
  return r * CH + (c ^ (r & 7));
}

__device__ __forceinline__ uint32_t lsim__att_pack(float a, float b) {
  return lsim__dt<lsim__bf16>::pack(a, b);
}

/*
** The attention kernel: one block per item.  D head dim, WM warps of 16
** rows, WN warps splitting each tile's tokens, ST cp.async stages, QREG:
** keep the Q fragments in registers (else re-read from shared memory),
** MINB: blocks per SM the registers must allow.
*/
template <int D, int WM, int WN, int ST, bool QREG, int MINB>
__global__ void __launch_bounds__(32 * WM * WN, MINB)
    lsim__att_kernel(const lsim__att_args a) {
  constexpr int NTH = 32 * WM * WN;
  constexpr int BM = 16 * WM;
  constexpr int BN = LSIM__ATT_BN;
  constexpr int NT = BN / WN; /* tokens per warp per tile */
  constexpr int CH = D / 8;   /* 16-byte chunks per row */
  constexpr int KS = D / 16;  /* k steps of Q.K^T */
  static_assert(NT % 16 == 0, "a warp's tokens must be a multiple of 16");

  extern __shared__ __align__(128) unsigned char lsim__att_smem[];
  uint16_t *sQ = (uint16_t *)lsim__att_smem;
  uint16_t *sK = sQ + BM * D;
  uint16_t *sV = sK + ST * BN * D;

  const lsim__att_item it = a.items[blockIdx.x];
  const int4 sq = a.seqs[it.seq]; /* q_start, ctx, page0, kvlen */
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp % WM, wn = warp / WM;

  /* ---- Q tile: packed rows -> (token, head) rows of q ---- */
  for (int i = tid; i < BM * CH; i += NTH) {
    const int r = i / CH, c = i % CH;
    const uint16_t *src = a.q;
    int bytes = 0;
    if (r < it.nrows) {
      const int pr = it.row0 + r;
      const int tok = pr / a.G, g = pr - tok * a.G;
      src = a.q + (int64_t)(sq.x + tok) * a.ldq +
            (int64_t)(it.kvh * a.G + g) * D + c * 8;
      bytes = 16;
    }
    lsim__cp16(lsim__smem(sQ + lsim__att_sw<CH>(r, c) * 8), src, bytes);
  }
  lsim__cp_commit();

  const int ntile = (it.kv1 - it.kv0 + BN - 1) / BN;
  const uint16_t *kbase = a.pool + a.koff + (int64_t)it.kvh * D;
  auto load_tile = [&](int t, int st) {
    const int kb = it.kv0 + t * BN;
    uint16_t *k = sK + st * BN * D, *v = sV + st * BN * D;
    for (int i = tid; i < BN * CH; i += NTH) {
      const int r = i / CH, c = i % CH;
      const int tok = kb + r;
      const uint16_t *src = a.pool;
      int bytes = 0;
      if (tok < it.kv1) {
        const int pi = tok / a.tpp, slot = tok - pi * a.tpp;
        const int64_t pg = __ldg(a.pages + sq.z + pi);
        src = kbase + pg * a.page_elems + (int64_t)slot * a.kvh * D + c * 8;
        bytes = 16;
      }
      const int u = lsim__att_sw<CH>(r, c) * 8;
      lsim__cp16(lsim__smem(k + u), src, bytes);
      lsim__cp16(lsim__smem(v + u), bytes ? src + a.voff : src, bytes);
    }
  };
#pragma unroll
  for (int s = 0; s < ST - 1; s++) {
    if (s < ntile)
      load_tile(s, s);
    lsim__cp_commit();
  }

  /* the two rows of this thread in the warp's 16: g and g + 8 */
  const int qr = lane >> 2, qc = (lane & 3) * 2;
  int lim[2]; /* keys < lim[i] are visible to row i */
#pragma unroll
  for (int i = 0; i < 2; i++) {
    const int pr = it.row0 + wm * 16 + qr + 8 * i;
    lim[i] = min(it.kv1, sq.y + pr / a.G + 1);
  }
  /* tiles ending at or below every row's limit need no mask */
  const int lim_all = min(it.kv1, sq.y + it.row0 / a.G + 1);

  float o[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; n++)
    o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  uint32_t qf[QREG ? KS : 1][4];

  for (int t = 0; t < ntile; t++) {
    {
      const int nx = t + ST - 1;
      if (nx < ntile)
        load_tile(nx, nx % ST);
      lsim__cp_commit();
    }
    lsim__cp_wait<ST - 1>();
    __syncthreads();
    const int st = t % ST;
    const uint32_t kq = lsim__smem(sK + st * BN * D);
    const uint32_t vq = lsim__smem(sV + st * BN * D);
    const uint32_t qq = lsim__smem(sQ);
    const int mi = lane >> 3, mr = lane & 7;
    if constexpr (QREG) {
      if (t == 0) {
#pragma unroll
        for (int ks = 0; ks < KS; ks++)
          lsim__ldsm4(qf[ks], qq + lsim__att_sw<CH>(wm * 16 + (mi & 1) * 8 + mr,
                                                   ks * 2 + (mi >> 1)) *
                                      16);
      }
    }

    /* S = Q K^T over this warp's NT tokens */
    float s[NT / 8][4];
#pragma unroll
    for (int n = 0; n < NT / 8; n++)
      s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
    for (int ks = 0; ks < KS; ks++) {
      uint32_t qa[4];
      if constexpr (QREG) {
#pragma unroll
        for (int j = 0; j < 4; j++)
          qa[j] = qf[ks][j];
      } else {
        lsim__ldsm4(qa, qq + lsim__att_sw<CH>(wm * 16 + (mi & 1) * 8 + mr,
                                             ks * 2 + (mi >> 1)) *
                                16);
      }
#pragma unroll
      for (int np = 0; np < NT / 16; np++) {
        uint32_t kb[4];
        lsim__ldsm4(kb, kq + lsim__att_sw<CH>(wn * NT + np * 16 + (mi >> 1) * 8 +
                                                  mr,
                                              ks * 2 + (mi & 1)) *
                                 16);
        lsim__mma<lsim__bf16>(s[2 * np], qa, kb[0], kb[1]);
        lsim__mma<lsim__bf16>(s[2 * np + 1], qa, kb[2], kb[3]);
      }
    }

    /* online softmax, base 2, on the scaled scores */
    const int kb0 = it.kv0 + t * BN + wn * NT;
    const bool mask = it.kv0 + (t + 1) * BN > lim_all;
    float mx[2] = {m[0], m[1]};
#pragma unroll
    for (int n = 0; n < NT / 8; n++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        float v = s[n][e] * a.sl2;
        if (mask && kb0 + n * 8 + qc + (e & 1) >= lim[e >> 1])
          v = -INFINITY;
        s[n][e] = v;
        mx[e >> 1] = fmaxf(mx[e >> 1], v);
      }
#pragma unroll
    for (int i = 0; i < 2; i++) {
      mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
      mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
    }
    float ref[2], alpha[2];
#pragma unroll
    for (int i = 0; i < 2; i++) {
      ref[i] = mx[i] == -INFINITY ? 0.f : mx[i];
      alpha[i] = exp2f(m[i] - ref[i]); /* m = -inf: 0 */
      m[i] = mx[i];
      l[i] *= alpha[i];
    }
#pragma unroll
    for (int n = 0; n < NT / 8; n++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const float p = exp2f(s[n][e] - ref[e >> 1]);
        s[n][e] = p;
        l[e >> 1] += p;
      }
#pragma unroll
    for (int n = 0; n < D / 8; n++) {
      o[n][0] *= alpha[0];
      o[n][1] *= alpha[0];
      o[n][2] *= alpha[1];
      o[n][3] *= alpha[1];
    }

    /* O += P V: P's accumulators are the A fragments of the next mma */
#pragma unroll
    for (int kt = 0; kt < NT / 16; kt++) {
      uint32_t pa[4];
      pa[0] = lsim__att_pack(s[2 * kt][0], s[2 * kt][1]);
      pa[1] = lsim__att_pack(s[2 * kt][2], s[2 * kt][3]);
      pa[2] = lsim__att_pack(s[2 * kt + 1][0], s[2 * kt + 1][1]);
      pa[3] = lsim__att_pack(s[2 * kt + 1][2], s[2 * kt + 1][3]);
#pragma unroll
      for (int dp = 0; dp < D / 16; dp++) {
        uint32_t vb[4];
        lsim__ldsm4t(vb, vq + lsim__att_sw<CH>(wn * NT + kt * 16 + (mi & 1) * 8 +
                                                   mr,
                                               dp * 2 + (mi >> 1)) *
                                  16);
        lsim__mma<lsim__bf16>(o[2 * dp], pa, vb[0], vb[1]);
        lsim__mma<lsim__bf16>(o[2 * dp + 1], pa, vb[2], vb[3]);
      }
    }
    __syncthreads(); /* the stage is reloaded next iteration */
  }
  lsim__cp_wait<0>();

#pragma unroll
  for (int i = 0; i < 2; i++) {
    l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
    l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
  }

  if constexpr (WN == 1) {
#pragma unroll
    for (int i = 0; i < 2; i++) {
      const int r = wm * 16 + qr + 8 * i;
      if (r >= it.nrows)
        continue;
      const float inv = l[i] > 0.f ? 1.f / l[i] : 0.f;
      const int pr = it.row0 + r;
      if (it.part < 0) {
        const int tok = pr / a.G, g = pr - tok * a.G;
        uint16_t *dst = a.out + (int64_t)(sq.x + tok) * a.ldo +
                        (int64_t)(it.kvh * a.G + g) * D;
#pragma unroll
        for (int n = 0; n < D / 8; n++)
          *(uint32_t *)(dst + n * 8 + qc) =
              lsim__att_pack(o[n][2 * i] * inv, o[n][2 * i + 1] * inv);
      } else {
        float *dst = a.ws_o + (int64_t)(it.part + r) * D;
#pragma unroll
        for (int n = 0; n < D / 8; n++)
          *(float2 *)(dst + n * 8 + qc) =
              make_float2(o[n][2 * i] * inv, o[n][2 * i + 1] * inv);
        if ((lane & 3) == 0)
          a.ws_lse[it.part + r] = l[i] > 0.f ? m[i] + log2f(l[i]) : -INFINITY;
      }
    }
  } else {
    /* merge the WN warps' states of each row (the stages are free now) */
    float *so = (float *)sK;           /* [WN][BM][D] */
    float *sm = so + WN * BM * D;      /* [WN][BM] */
    float *sl = sm + WN * BM;          /* [WN][BM] */
#pragma unroll
    for (int i = 0; i < 2; i++) {
      const int r = wm * 16 + qr + 8 * i;
      float *dst = so + ((int64_t)wn * BM + r) * D;
#pragma unroll
      for (int n = 0; n < D / 8; n++)
        *(float2 *)(dst + n * 8 + qc) = make_float2(o[n][2 * i], o[n][2 * i + 1]);
      if ((lane & 3) == 0) {
        sm[wn * BM + r] = m[i];
        sl[wn * BM + r] = l[i];
      }
    }
    __syncthreads();
    for (int u = tid; u < BM * (D / 4); u += NTH) {
      const int r = u / (D / 4), d = (u % (D / 4)) * 4;
      if (r >= it.nrows)
        continue;
      float M = -INFINITY;
#pragma unroll
      for (int w = 0; w < WN; w++)
        M = fmaxf(M, sm[w * BM + r]);
      const float ref = M == -INFINITY ? 0.f : M;
      float L = 0.f, acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int w = 0; w < WN; w++) {
        const float f = exp2f(sm[w * BM + r] - ref);
        L += sl[w * BM + r] * f;
        const float4 x = *(const float4 *)(so + ((int64_t)w * BM + r) * D + d);
        acc[0] += x.x * f;
        acc[1] += x.y * f;
        acc[2] += x.z * f;
        acc[3] += x.w * f;
      }
      const float inv = L > 0.f ? 1.f / L : 0.f;
      const int pr = it.row0 + r;
      if (it.part < 0) {
        const int tok = pr / a.G, g = pr - tok * a.G;
        uint16_t *dst = a.out + (int64_t)(sq.x + tok) * a.ldo +
                        (int64_t)(it.kvh * a.G + g) * D + d;
        uint2 v;
        v.x = lsim__att_pack(acc[0] * inv, acc[1] * inv);
        v.y = lsim__att_pack(acc[2] * inv, acc[3] * inv);
        *(uint2 *)dst = v;
      } else {
        float *dst = a.ws_o + (int64_t)(it.part + r) * D + d;
        *(float4 *)dst =
            make_float4(acc[0] * inv, acc[1] * inv, acc[2] * inv, acc[3] * inv);
        if (d == 0)
          a.ws_lse[it.part + r] = L > 0.f ? M + log2f(L) : -INFINITY;
      }
    }
  }
}

/* Merge the splits of each combine entry, one warp per entry, in split
** order. */
template <int D>
__global__ void __launch_bounds__(128)
    lsim__att_combine(const lsim__att_comb *cb, int n, const float *ws_o,
                      const float *ws_lse, uint16_t *out, int64_t ldo) {
  const int e = blockIdx.x * 4 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (e >= n)
    return;
  const lsim__att_comb c = cb[e];
  float M = -INFINITY;
  for (int s = 0; s < c.nsplit; s++)
    M = fmaxf(M, ws_lse[c.slot0 + s * c.stride]);
  const float ref = M == -INFINITY ? 0.f : M;
  constexpr int PL = D / 32; /* elements per lane, consecutive */
  float acc[PL], W = 0.f;
#pragma unroll
  for (int j = 0; j < PL; j++)
    acc[j] = 0.f;
  for (int s = 0; s < c.nsplit; s++) {
    const int row = c.slot0 + s * c.stride;
    const float w = exp2f(ws_lse[row] - ref);
    W += w;
    const float *src = ws_o + (int64_t)row * D + lane * PL;
#pragma unroll
    for (int j = 0; j < PL; j += 2) {
      const float2 x = *(const float2 *)(src + j);
      acc[j] += w * x.x;
      acc[j + 1] += w * x.y;
    }
  }
  const float inv = W > 0.f ? 1.f / W : 0.f;
  uint16_t *dst = out + (int64_t)c.row * ldo + (int64_t)c.hq * D + lane * PL;
#pragma unroll
  for (int j = 0; j < PL; j += 2)
    *(uint32_t *)(dst + j) = lsim__att_pack(acc[j] * inv, acc[j + 1] * inv);
}

/* KV append: block (row, kv) copies the row's kv_heads * D elements of K
** (kv 0) or V (kv 1) into its page slot, 16 bytes a thread. */
__global__ void __launch_bounds__(128)
    lsim__att_append(uint16_t *pool, int64_t page_elems, int64_t koff,
                     int64_t voff, int width,
                     const int2 *dst_slot, const uint16_t *k, int64_t ldk,
                     const uint16_t *v, int64_t ldv) {
  const int r = blockIdx.x, kv = blockIdx.y;
  const int2 ps = dst_slot[r]; /* page, slot */
  const uint16_t *src = kv ? v + (int64_t)r * ldv : k + (int64_t)r * ldk;
  uint16_t *dst = pool + (int64_t)ps.x * page_elems + koff + (kv ? voff : 0) +
                  (int64_t)ps.y * width;
  for (int c = threadIdx.x; c < width / 8; c += blockDim.x)
    *(uint4 *)(dst + c * 8) = *(const uint4 *)(src + c * 8);
}

/* ---- launch shapes -------------------------------------------------------------- */

#define LSIM__ATT_WIDE_WM 8 /* wide: 8 warps x 16 rows */
#define LSIM__ATT_NARROW_WN 4
#define LSIM__ATT_ST 2

/* Dynamic shared memory: the Q tile and ST stages of K and V; with WN > 1
** the warps' states are merged in the stages' space at the end. */
template <int D, int WM, int WN>
static size_t lsim__att_smem_bytes(void) {
  const size_t q = (size_t)16 * WM * D * 2;
  const size_t tiles = q + (size_t)2 * LSIM__ATT_ST * LSIM__ATT_BN * D * 2;
  const size_t merge =
      WN > 1 ? q + (size_t)WN * 16 * WM * (D + 2) * sizeof(float) : 0;
  return tiles > merge ? tiles : merge;
}

/* The wide variants (tune.wide): 1 one block of 8 warps per SM (up to 255
** registers), 2 two blocks (128 registers), 3 as 1 with Q in registers. */
#define LSIM__ATT_WIDE_VARIANTS 3
#define LSIM__ATT_WIDE_DEFAULT 2
template <int D> struct lsim__att_k {
  typedef void (*kfn)(const lsim__att_args);
  static kfn wide(int v) {
    return v == 1   ? lsim__att_kernel<D, LSIM__ATT_WIDE_WM, 1, LSIM__ATT_ST,
                                     false, 1>
           : v == 3 ? lsim__att_kernel<D, LSIM__ATT_WIDE_WM, 1, LSIM__ATT_ST,
                                     true, 1>
                    : lsim__att_kernel<D, LSIM__ATT_WIDE_WM, 1, LSIM__ATT_ST,
                                     false, 2>;
  }
  static kfn narrow() {
    return lsim__att_kernel<D, 1, LSIM__ATT_NARROW_WN, LSIM__ATT_ST, true, 1>;
  }
  static size_t wide_smem() {
    return lsim__att_smem_bytes<D, LSIM__ATT_WIDE_WM, 1>();
  }
  static size_t narrow_smem() {
    return lsim__att_smem_bytes<D, 1, LSIM__ATT_NARROW_WN>();
  }
};

/* ---- the context ------------------------------------------------------------------ */

struct lsim_cuda_attn {
  lsim_cuda_attn_cfg cfg;
  cudaStream_t stream;
  int own_stream;
  int sms;
  int G;
  int64_t tpp;
  int slots_wide_v[LSIM__ATT_WIDE_VARIANTS + 1]; /* per variant (0: default) */
  int slots_wide, slots_narrow; /* resident blocks: the plan's variant */
  int wide; /* the plan's wide variant */
  lsim_cuda_attn_tune tune;
  /* metadata: one int32 buffer, sections packed per plan */
  int32_t *h_meta, *d_meta;
  size_t meta_cap; /* ints */
  cudaEvent_t meta_done;
  int meta_pending;
  /* workspace */
  float *ws_o, *ws_lse;
  int64_t ws_rows;
  int64_t max_items, max_comb, max_pages;
  /* the prepared plan */
  int planned;
  int nrows_total, n_wide, n_narrow, n_comb, split_items;
  int max_split;
  size_t off_seqs, off_pages, off_items, off_comb, off_app; /* ints */
};

static int lsim__cdiv(int64_t a, int64_t b) { return (int)((a + b - 1) / b); }

extern "C" int64_t lsim_cuda_attn_page_tokens(const lsim_cuda_attn *A) {
  return A ? A->tpp : 0;
}

extern "C" void lsim_cuda_attn_close(lsim_cuda_attn *A) {
  if (!A)
    return;
  if (A->stream)
    cudaStreamSynchronize(A->stream);
  if (A->d_meta)
    cudaFree(A->d_meta);
  if (A->h_meta)
    cudaFreeHost(A->h_meta);
  if (A->ws_o)
    cudaFree(A->ws_o);
  if (A->ws_lse)
    cudaFree(A->ws_lse);
  if (A->meta_done)
    cudaEventDestroy(A->meta_done);
  if (A->own_stream && A->stream)
    cudaStreamDestroy(A->stream);
  free(A);
}

template <int D>
static cudaError_t lsim__att_setup(int *slots_wide, int *slots_narrow,
                                   int sms) {
  cudaError_t e;
  for (int v = 1; v <= LSIM__ATT_WIDE_VARIANTS; v++) {
    e = cudaFuncSetAttribute(lsim__att_k<D>::wide(v),
                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)lsim__att_k<D>::wide_smem());
    if (e != cudaSuccess)
      return e;
    int bw = 0;
    e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &bw, lsim__att_k<D>::wide(v), 32 * LSIM__ATT_WIDE_WM,
        lsim__att_k<D>::wide_smem());
    if (e != cudaSuccess)
      return e;
    slots_wide[v] = (bw > 0 ? bw : 1) * sms;
  }
  slots_wide[0] = slots_wide[LSIM__ATT_WIDE_DEFAULT];
  e = cudaFuncSetAttribute(lsim__att_k<D>::narrow(),
                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                           (int)lsim__att_k<D>::narrow_smem());
  if (e != cudaSuccess)
    return e;
  int bn = 0;
  e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &bn, lsim__att_k<D>::narrow(), 32 * LSIM__ATT_NARROW_WN,
      lsim__att_k<D>::narrow_smem());
  if (e != cudaSuccess)
    return e;
  *slots_narrow = (bn > 0 ? bn : 1) * sms;
  return cudaSuccess;
}

extern "C" lsim_err lsim_cuda_attn_open(lsim_cuda_attn **out,
                                        const lsim_cuda_attn_cfg *cfg,
                                        lsim_errbuf *eb) {
  lsim_err rc = 0;
  lsim_cuda_attn *A = NULL;
  if (!out || !cfg)
    return lsim_fail(eb, LSIM_E_USAGE, "attn: NULL context or cfg");
  *out = NULL;
  if (cfg->head_dim != 64 && cfg->head_dim != 128)
    return lsim_fail(eb, LSIM_E_USAGE, "attn: head_dim %d (64 or 128)",
                     cfg->head_dim);
  if (cfg->kv_heads < 1 || cfg->q_heads < 1 ||
      cfg->q_heads % cfg->kv_heads != 0 || cfg->kv_heads > 1024)
    return lsim_fail(eb, LSIM_E_USAGE,
                     "attn: q_heads %d, kv_heads %d (q_heads a multiple of "
                     "kv_heads, kv_heads 1..1024)",
                     cfg->q_heads, cfg->kv_heads);
  if (cfg->layers < 1)
    return lsim_fail(eb, LSIM_E_USAGE, "attn: layers %d", cfg->layers);
  const int64_t tpp = lsim_cuda_attn_tpp(cfg->page_bytes, cfg->layers,
                                         cfg->kv_heads, cfg->head_dim);
  if (cfg->page_bytes <= 0 || cfg->page_bytes % 16 != 0 || tpp < 1 ||
      tpp > (1 << 24))
    return lsim_fail(eb, LSIM_E_USAGE,
                     "attn: page_bytes %lld (a multiple of 16 holding 1.."
                     "2^24 tokens of %lld bytes)",
                     (long long)cfg->page_bytes,
                     (long long)lsim_cuda_attn_kv_bytes_per_token(
                         cfg->layers, cfg->kv_heads, cfg->head_dim));
  if (cfg->pool_pages < 1 || cfg->max_seqs < 1 || cfg->max_rows < 1 ||
      cfg->max_kv < 1 || cfg->max_kv > (1 << 30) || cfg->max_seqs > (1 << 20) ||
      cfg->max_rows > (1 << 24))
    return lsim_fail(eb, LSIM_E_USAGE,
                     "attn: pool_pages %lld, max_seqs %d, max_rows %d, "
                     "max_kv %lld (each >= 1, within 2^20 / 2^24 / 2^30)",
                     (long long)cfg->pool_pages, cfg->max_seqs, cfg->max_rows,
                     (long long)cfg->max_kv);
  A = (lsim_cuda_attn *)calloc(1, sizeof *A);
  if (!A)
    return lsim_fail(eb, LSIM_E_NOMEM, "attn: out of memory");
  A->cfg = *cfg;
  A->G = cfg->q_heads / cfg->kv_heads;
  A->tpp = tpp;
  {
    cudaDeviceProp p;
    LSIM_CUDA_TRY(cudaSetDevice(cfg->device), eb);
    LSIM_CUDA_TRY(cudaGetDeviceProperties(&p, cfg->device), eb);
    A->sms = p.multiProcessorCount;
  }
  if (cfg->stream) {
    A->stream = (cudaStream_t)cfg->stream;
  } else {
    LSIM_CUDA_TRY(cudaStreamCreateWithFlags(&A->stream, cudaStreamNonBlocking),
                  eb);
    A->own_stream = 1;
  }
  LSIM_CUDA_TRY(cudaEventCreateWithFlags(&A->meta_done, cudaEventDisableTiming),
                eb);
  if (cfg->head_dim == 64)
    LSIM_CUDA_TRY(lsim__att_setup<64>(A->slots_wide_v, &A->slots_narrow, A->sms),
                  eb);
  else
    LSIM_CUDA_TRY(
        lsim__att_setup<128>(A->slots_wide_v, &A->slots_narrow, A->sms), eb);
  A->slots_wide = A->slots_wide_v[0];
  {
    /* Unsplit items: per sequence its packed rows in tiles (wide tiles of
    ** 128 rows, or 16-row narrow ones), per kv head.  Splits add items and
    ** workspace rows; the planner halves its splits until they fit. */
    const int64_t kvh = cfg->kv_heads, G = A->G;
    const int64_t base =
        kvh * ((int64_t)cfg->max_rows * G / 16 + 2 * (int64_t)cfg->max_seqs);
    A->max_items = base + 16 * (int64_t)A->slots_narrow;
    A->ws_rows = 16 * 8 * (int64_t)A->slots_narrow +
                 128 * 4 * (int64_t)A->sms * 2;
    A->max_comb = A->ws_rows / 2;
    A->max_pages = (int64_t)cfg->max_seqs * lsim__cdiv(cfg->max_kv, tpp);
    A->meta_cap = (size_t)4 * cfg->max_seqs + (size_t)A->max_pages +
                  (size_t)8 * A->max_items + (size_t)8 * A->max_comb +
                  (size_t)2 * cfg->max_rows + 64;
  }
  LSIM_CUDA_TRY(cudaMallocHost((void **)&A->h_meta, A->meta_cap * 4), eb);
  LSIM_CUDA_TRY(cudaMalloc((void **)&A->d_meta, A->meta_cap * 4), eb);
  LSIM_CUDA_TRY(cudaMalloc((void **)&A->ws_o,
                           (size_t)A->ws_rows * cfg->head_dim * sizeof(float)),
                eb);
  LSIM_CUDA_TRY(cudaMalloc((void **)&A->ws_lse,
                           (size_t)A->ws_rows * sizeof(float)),
                eb);
  *out = A;
  return 0;
out:
  lsim_cuda_attn_close(A);
  return rc;
}

extern "C" void lsim_cuda_attn_get_tune(const lsim_cuda_attn *A,
                                        lsim_cuda_attn_tune *t) {
  *t = A->tune;
}
extern "C" void lsim_cuda_attn_set_tune(lsim_cuda_attn *A,
                                        const lsim_cuda_attn_tune *t) {
  A->tune = *t;
}

/* Wide items: longest key range first (the tail of the launch), then
** emission order. */
static int lsim__item_cmp(const void *x, const void *y) {
  const lsim__att_item *a = (const lsim__att_item *)x,
                       *b = (const lsim__att_item *)y;
  const int la = a->kv1 - a->kv0, lb = b->kv1 - b->kv0;
  if (la != lb)
    return la > lb ? -1 : 1;
  return a->pad < b->pad ? -1 : a->pad > b->pad;
}

static int lsim__key_cmp(const void *x, const void *y) {
  const int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
  return a < b ? -1 : a > b;
}

/* Splits of one item with `kv` keys: s chunks of `chunk` tokens (a multiple
** of the tile). */
static void lsim__att_split(int64_t kv, int want, int min_chunk, int *s,
                            int *chunk) {
  int n = want < 1 ? 1 : want;
  const int64_t most = kv / (min_chunk > 0 ? min_chunk : 1);
  if (n > most)
    n = most > 1 ? (int)most : 1;
  int64_t c = (kv + n - 1) / n;
  c = (c + LSIM__ATT_BN - 1) / LSIM__ATT_BN * LSIM__ATT_BN;
  *chunk = (int)c;
  *s = (int)((kv + c - 1) / c);
}

extern "C" lsim_err lsim_cuda_attn_plan(lsim_cuda_attn *A,
                                        const lsim_cuda_attn_batch *b,
                                        lsim_errbuf *eb) {
  if (!A || !b)
    return lsim_fail(eb, LSIM_E_USAGE, "attn: NULL context or batch");
  const lsim_cuda_attn_cfg *c = &A->cfg;
  A->planned = 0;
  if (b->nseq < 0 || b->nseq > c->max_seqs || b->npre < 0 ||
      b->npre > b->nseq)
    return lsim_fail(eb, LSIM_E_USAGE,
                     "attn: batch nseq %d, npre %d (max_seqs %d)", b->nseq,
                     b->npre, c->max_seqs);
  if (b->nseq > 0 && (!b->q_start || !b->ctx || !b->block_table))
    return lsim_fail(eb, LSIM_E_USAGE, "attn: batch arrays missing");
  if (b->nseq > 0 && b->q_start[0] != 0)
    return lsim_fail(eb, LSIM_E_USAGE, "attn: q_start[0] is %d, not 0",
                     b->q_start[0]);
  int64_t npages = 0;
  for (int j = 0; j < b->nseq; j++) {
    const int64_t rows = (int64_t)b->q_start[j + 1] - b->q_start[j];
    if (rows < 1 || b->q_start[j + 1] > c->max_rows)
      return lsim_fail(eb, LSIM_E_USAGE,
                       "attn: sequence %d: rows %lld (q_start %d..%d; at least "
                       "1, total at most max_rows %d)",
                       j, (long long)rows, b->q_start[j], b->q_start[j + 1],
                       c->max_rows);
    if (j >= b->npre && rows != 1)
      return lsim_fail(eb, LSIM_E_USAGE,
                       "attn: sequence %d: a decode entry has %lld rows, not 1",
                       j, (long long)rows);
    if (b->ctx[j] < 0 || b->ctx[j] + rows > c->max_kv)
      return lsim_fail(eb, LSIM_E_USAGE,
                       "attn: sequence %d: ctx %d + rows %lld outside 0..max_kv "
                       "%lld",
                       j, b->ctx[j], (long long)rows, (long long)c->max_kv);
    if (!b->block_table[j])
      return lsim_fail(eb, LSIM_E_USAGE, "attn: sequence %d: no block table",
                       j);
    const int np = lsim__cdiv(b->ctx[j] + rows, A->tpp);
    for (int p = 0; p < np; p++)
      if (b->block_table[j][p] < 0 || b->block_table[j][p] >= c->pool_pages)
        return lsim_fail(eb, LSIM_E_USAGE,
                         "attn: sequence %d: block_table[%d] = %d outside the "
                         "pool (0..%lld)",
                         j, p, b->block_table[j][p],
                         (long long)c->pool_pages - 1);
    npages += np;
  }
  const int T = b->nseq > 0 ? b->q_start[b->nseq] : 0;
  if (npages > A->max_pages)
    return lsim_fail(eb, LSIM_E_USAGE, "attn: %lld block-table entries (max %lld)",
                     (long long)npages, (long long)A->max_pages);
  /* two new rows must not write the same page slot */
  if (T > 1) {
    int64_t *key = (int64_t *)malloc((size_t)T * sizeof *key);
    if (!key)
      return lsim_fail(eb, LSIM_E_NOMEM, "attn: out of memory");
    for (int j = 0; j < b->nseq; j++)
      for (int r = b->q_start[j]; r < b->q_start[j + 1]; r++) {
        const int64_t t = b->ctx[j] + (r - b->q_start[j]);
        key[r] = (int64_t)b->block_table[j][t / A->tpp] * A->tpp + t % A->tpp;
      }
    qsort(key, (size_t)T, sizeof *key, lsim__key_cmp);
    for (int i = 1; i < T; i++)
      if (key[i] == key[i - 1]) {
        const int64_t k = key[i];
        free(key);
        return lsim_fail(eb, LSIM_E_USAGE,
                         "attn: two new rows write page %lld slot %lld",
                         (long long)(k / A->tpp), (long long)(k % A->tpp));
      }
    free(key);
  }

  /* the previous plan's copy must have left the staging area */
  if (A->meta_pending) {
    LSIM_CUDA_RET(cudaEventSynchronize(A->meta_done), eb);
    A->meta_pending = 0;
  }
  int32_t *h = A->h_meta;
  size_t at = 0;
  A->off_seqs = at;
  int64_t pg = 0;
  for (int j = 0; j < b->nseq; j++) {
    const int rows = b->q_start[j + 1] - b->q_start[j];
    h[at++] = b->q_start[j];
    h[at++] = b->ctx[j];
    h[at++] = (int32_t)pg;
    h[at++] = b->ctx[j] + rows;
    pg += lsim__cdiv(b->ctx[j] + rows, A->tpp);
  }
  A->off_pages = at;
  for (int j = 0; j < b->nseq; j++) {
    const int np = lsim__cdiv(b->ctx[j] + b->q_start[j + 1] - b->q_start[j],
                              A->tpp);
    memcpy(h + at, b->block_table[j], (size_t)np * 4);
    at += (size_t)np;
  }
  at = (at + 1) & ~(size_t)1; /* int2 records */
  A->off_app = at;
  for (int j = 0; j < b->nseq; j++)
    for (int r = b->q_start[j]; r < b->q_start[j + 1]; r++) {
      const int64_t t = b->ctx[j] + (r - b->q_start[j]);
      h[at++] = b->block_table[j][t / A->tpp];
      h[at++] = (int32_t)(t % A->tpp);
    }
  at = (at + 7) & ~(size_t)7; /* 32-byte records */

  /* Work items: every sequence's packed rows in tiles, per kv head.  A
  ** tile of more than 16 rows is wide (128 rows), else narrow.  Tile keys:
  ** 0 .. ctx + its last token. */
  const int G = A->G, kvh = c->kv_heads;
  A->wide = A->tune.wide >= 1 && A->tune.wide <= LSIM__ATT_WIDE_VARIANTS
                ? A->tune.wide
                : LSIM__ATT_WIDE_DEFAULT;
  A->slots_wide = A->slots_wide_v[A->wide];
  /* splits: narrow items aim at two waves of the narrow kernel, chunks of
  ** at least min_chunk keys; wide ones split only when they cannot fill the
  ** device (or as tuned) */
  int64_t n_narrow0 = 0, n_wide0 = 0;
  for (int j = 0; j < b->nseq; j++) {
    const int64_t P = (int64_t)(b->q_start[j + 1] - b->q_start[j]) * G;
    if (P > 16)
      n_wide0 += (P + 127) / 128 * kvh;
    else
      n_narrow0 += (P + 15) / 16 * kvh;
  }
  int want_n = A->tune.splits > 0 ? A->tune.splits
               : n_narrow0 ? lsim__cdiv(2 * (int64_t)A->slots_narrow, n_narrow0)
                           : 1;
  int want_w = A->tune.pre_splits > 0 ? A->tune.pre_splits
               : (n_wide0 && n_wide0 < A->slots_wide)
                   ? lsim__cdiv(2 * (int64_t)A->slots_wide, n_wide0)
                   : 1;
  const int min_n = A->tune.min_chunk > 0 ? A->tune.min_chunk : 256;
  const int min_w = A->tune.min_chunk > 0 ? A->tune.min_chunk : 512;
  int64_t nitems = 0;
  for (;;) {
    /* count what these splits need */
    int64_t items = 0, wrows = 0;
    for (int j = 0; j < b->nseq; j++) {
      const int64_t P = (int64_t)(b->q_start[j + 1] - b->q_start[j]) * G;
      const int BMj = P > 16 ? 128 : 16;
      for (int64_t r0 = 0; r0 < P; r0 += BMj) {
        const int64_t nr = P - r0 < BMj ? P - r0 : BMj;
        const int64_t kv1 = b->ctx[j] + (r0 + nr - 1) / G + 1;
        int s, ch;
        lsim__att_split(kv1, BMj == 16 ? want_n : want_w,
                        BMj == 16 ? min_n : min_w, &s, &ch);
        items += (int64_t)s * kvh;
        if (s > 1)
          wrows += (int64_t)s * nr * kvh;
      }
    }
    if ((items <= A->max_items && wrows <= A->ws_rows &&
         wrows / 2 <= A->max_comb) ||
        (want_n <= 1 && want_w <= 1)) {
      nitems = items;
      break;
    }
    want_n = want_n > 1 ? want_n / 2 : 1;
    want_w = want_w > 1 ? want_w / 2 : 1;
  }
  /* emit: wide items first (longest key range first), then narrow; the
  ** combine list after them, one entry per packed row of a split tile */
  lsim__att_item *items = (lsim__att_item *)(h + at);
  int nw = 0, nn = 0, split_items = 0, max_split = 1, ncomb = 0;
  int64_t part = 0;
  lsim__att_comb *comb_h = (lsim__att_comb *)(h + at + (size_t)8 * nitems);
  if (at + (size_t)8 * nitems > A->meta_cap)
    return lsim_fail(eb, LSIM_E_BUG, "bug: attn items overflow");
  for (int pass = 0; pass < 2; pass++) {
    int idx = 0;
    for (int j = 0; j < b->nseq; j++) {
      const int64_t P = (int64_t)(b->q_start[j + 1] - b->q_start[j]) * G;
      const int BMj = P > 16 ? 128 : 16;
      if ((pass == 0) != (BMj == 128))
        continue;
      for (int64_t r0 = 0; r0 < P; r0 += BMj) {
        const int nr = (int)(P - r0 < BMj ? P - r0 : BMj);
        const int kv1 = b->ctx[j] + (int)((r0 + nr - 1) / G) + 1;
        int s, ch;
        lsim__att_split(kv1, BMj == 16 ? want_n : want_w,
                        BMj == 16 ? min_n : min_w, &s, &ch);
        for (int h2 = 0; h2 < kvh; h2++) {
          for (int k = 0; k < s; k++) {
            lsim__att_item *e = &items[nw + idx];
            e->seq = j;
            e->row0 = (int)r0;
            e->nrows = nr;
            e->kvh = h2;
            e->kv0 = k * ch;
            e->kv1 = kv1 < (k + 1) * ch ? kv1 : (k + 1) * ch;
            e->part = s > 1 ? (int)(part + (int64_t)k * nr) : -1;
            e->pad = nw + idx; /* emission order, the sort's tie-break */
            idx++;
          }
          if (s > 1) {
            for (int r = 0; r < nr; r++) {
              lsim__att_comb *cb = &comb_h[ncomb++];
              const int pr = (int)r0 + r, tok = pr / G, g = pr - tok * G;
              cb->row = b->q_start[j] + tok;
              cb->hq = h2 * G + g;
              cb->slot0 = (int)part + r;
              cb->nsplit = s;
              cb->stride = nr;
              cb->pad[0] = cb->pad[1] = cb->pad[2] = 0;
            }
            part += (int64_t)s * nr;
            split_items += s;
            if (s > max_split)
              max_split = s;
          }
        }
      }
    }
    if (pass == 0) {
      nw = idx;
      qsort(items, (size_t)nw, sizeof *items, lsim__item_cmp);
    } else {
      nn = idx;
    }
  }
  if (nw + nn != nitems)
    return lsim_fail(eb, LSIM_E_BUG, "bug: attn items %d != %lld", nw + nn,
                     (long long)nitems);
  A->off_items = at;
  at += (size_t)8 * (nw + nn);
  A->off_comb = at;
  at += (size_t)8 * ncomb;
  if (at > A->meta_cap)
    return lsim_fail(eb, LSIM_E_BUG, "bug: attn metadata %zu > %zu ints", at,
                     A->meta_cap);
  A->nrows_total = T;
  A->n_wide = nw;
  A->n_narrow = nn;
  A->n_comb = ncomb;
  A->split_items = split_items;
  A->max_split = max_split;
  if (at > 0) {
    LSIM_CUDA_RET(cudaMemcpyAsync(A->d_meta, A->h_meta, at * 4,
                                  cudaMemcpyHostToDevice, A->stream),
                  eb);
    LSIM_CUDA_RET(cudaEventRecord(A->meta_done, A->stream), eb);
    A->meta_pending = 1;
  }
  A->planned = 1;
  return 0;
}

extern "C" void lsim_cuda_attn_describe(const lsim_cuda_attn *A, char *buf,
                                        size_t n) {
  if (!A->planned) {
    snprintf(buf, n, "no plan");
    return;
  }
  snprintf(buf, n,
           "rows %d, wide items %d (8 warps x 16 rows), narrow items %d "
           "(4 warps over the keys), split items %d (up to %d splits), "
           "combine rows %d; wide variant %d; slots wide %d narrow %d",
           A->nrows_total, A->n_wide, A->n_narrow, A->split_items, A->max_split,
           A->n_comb, A->wide, A->slots_wide, A->slots_narrow);
}

static bool lsim__al16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

extern "C" lsim_err lsim_cuda_attn_append(lsim_cuda_attn *A, int layer,
                                          void *pool, const void *k,
                                          int64_t ldk, const void *v,
                                          int64_t ldv, lsim_errbuf *eb) {
  if (!A)
    return lsim_fail(eb, LSIM_E_USAGE, "attn: NULL context");
  if (!A->planned)
    return lsim_fail(eb, LSIM_E_STATE, "attn: append without a plan");
  const lsim_cuda_attn_cfg *c = &A->cfg;
  const int width = c->kv_heads * c->head_dim;
  if (layer < 0 || layer >= c->layers)
    return lsim_fail(eb, LSIM_E_USAGE, "attn: layer %d (0..%d)", layer,
                     c->layers - 1);
  if (!pool || !k || !v || !lsim__al16(pool) || !lsim__al16(k) ||
      !lsim__al16(v) || ldk < width || ldv < width || ldk % 8 || ldv % 8)
    return lsim_fail(eb, LSIM_E_USAGE,
                     "attn: append pointers must be 16-byte aligned, ldk %lld "
                     "and ldv %lld multiples of 8 and >= %d",
                     (long long)ldk, (long long)ldv, width);
  if (A->nrows_total == 0)
    return 0;
  const int64_t blk = A->tpp * width;
  lsim__att_append<<<dim3(A->nrows_total, 2), 128, 0, A->stream>>>(
      (uint16_t *)pool, c->page_bytes / 2, (int64_t)layer * 2 * blk, blk,
      width, (const int2 *)(A->d_meta + A->off_app),
      (const uint16_t *)k, ldk, (const uint16_t *)v, ldv);
  LSIM_CUDA_RET(cudaGetLastError(), eb);
  return 0;
}

template <int D>
static cudaError_t lsim__att_launch(lsim_cuda_attn *A, lsim__att_args &g) {
  if (A->n_wide > 0) {
    g.items = (const lsim__att_item *)(A->d_meta + A->off_items);
    lsim__att_k<D>::wide(A->wide)<<<A->n_wide, 32 * LSIM__ATT_WIDE_WM,
                           lsim__att_k<D>::wide_smem(), A->stream>>>(g);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
      return e;
  }
  if (A->n_narrow > 0) {
    g.items = (const lsim__att_item *)(A->d_meta + A->off_items) + A->n_wide;
    lsim__att_k<D>::narrow()<<<A->n_narrow, 32 * LSIM__ATT_NARROW_WN,
                             lsim__att_k<D>::narrow_smem(), A->stream>>>(g);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
      return e;
  }
  if (A->n_comb > 0) {
    lsim__att_combine<D><<<(A->n_comb + 3) / 4, 128, 0, A->stream>>>(
        (const lsim__att_comb *)(A->d_meta + A->off_comb), A->n_comb, A->ws_o,
        A->ws_lse, g.out, g.ldo);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
      return e;
  }
  return cudaSuccess;
}

extern "C" lsim_err lsim_cuda_attn_run(lsim_cuda_attn *A, int layer,
                                       const void *pool, const void *q,
                                       int64_t ldq, void *out, int64_t ldo,
                                       lsim_errbuf *eb) {
  if (!A)
    return lsim_fail(eb, LSIM_E_USAGE, "attn: NULL context");
  if (!A->planned)
    return lsim_fail(eb, LSIM_E_STATE, "attn: run without a plan");
  const lsim_cuda_attn_cfg *c = &A->cfg;
  const int width = c->q_heads * c->head_dim;
  if (layer < 0 || layer >= c->layers)
    return lsim_fail(eb, LSIM_E_USAGE, "attn: layer %d (0..%d)", layer,
                     c->layers - 1);
  if (!pool || !q || !out || !lsim__al16(pool) || !lsim__al16(q) ||
      !lsim__al16(out) || ldq < width || ldo < width || ldq % 8 || ldo % 8)
    return lsim_fail(eb, LSIM_E_USAGE,
                     "attn: run pointers must be 16-byte aligned, ldq %lld and "
                     "ldo %lld multiples of 8 and >= %d",
                     (long long)ldq, (long long)ldo, width);
  if (A->nrows_total == 0)
    return 0;
  lsim__att_args g;
  memset(&g, 0, sizeof g);
  const int64_t blk = A->tpp * c->kv_heads * c->head_dim;
  g.pool = (const uint16_t *)pool;
  g.page_elems = c->page_bytes / 2;
  g.koff = (int64_t)layer * 2 * blk;
  g.voff = blk;
  g.tpp = (int)A->tpp;
  g.kvh = c->kv_heads;
  g.G = A->G;
  g.seqs = (const int4 *)(A->d_meta + A->off_seqs);
  g.pages = A->d_meta + A->off_pages;
  g.q = (const uint16_t *)q;
  g.ldq = ldq;
  g.out = (uint16_t *)out;
  g.ldo = ldo;
  g.ws_o = A->ws_o;
  g.ws_lse = A->ws_lse;
  g.sl2 = (float)(1.4426950408889634 / sqrt((double)c->head_dim));
  cudaError_t e = c->head_dim == 64 ? lsim__att_launch<64>(A, g)
                                    : lsim__att_launch<128>(A, g);
  if (e != cudaSuccess)
    return lsim_fail(eb, LSIM_E_BACKEND, "cuda: attention launch: %s",
                     cudaGetErrorString(e));
  return 0;
}

extern "C" lsim_err lsim_cuda_attn_sync(lsim_cuda_attn *A, lsim_errbuf *eb) {
  if (!A)
    return lsim_fail(eb, LSIM_E_USAGE, "attn: NULL context");
  LSIM_CUDA_RET(cudaStreamSynchronize(A->stream), eb);
  LSIM_CUDA_RET(cudaGetLastError(), eb);
  return 0;
}

extern "C" lsim_err lsim_cuda_attn_poison(lsim_cuda_attn *A, lsim_errbuf *eb) {
  if (!A)
    return lsim_fail(eb, LSIM_E_USAGE, "attn: NULL context");
  LSIM_CUDA_RET(cudaMemsetAsync(A->ws_o, 0xFF,
                                (size_t)A->ws_rows * A->cfg.head_dim * 4,
                                A->stream),
                eb);
  LSIM_CUDA_RET(cudaMemsetAsync(A->ws_lse, 0xFF, (size_t)A->ws_rows * 4,
                                A->stream),
                eb);
  return 0;
}
