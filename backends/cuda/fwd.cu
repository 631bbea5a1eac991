/*
** fwd.cu: the whole-model executor (fwd.h): its small kernels (weight
** generation, embedding gather, RMSNorm, RoPE, SiLU-mul, argmax), and the
** forward pass that strings them together with cuBLAS GEMMs (blas.h),
** paged attention (attn.cuh) and the adapter deltas (cuda.h, layered
** plans).  docs/CUDA.md, "The whole-model executor".
*/
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn.cuh"
#include "blas.h"
#include "common.cuh"
#include "fwd.h"
#include "pool.cuh" /* lsim__pg_term: the pool's positional checksum */

typedef __nv_bfloat16 lsim__bf;

/* ---- kernels ----------------------------------------------------------------- */

__device__ __forceinline__ uint64_t lsim__dmix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__global__ void lsim__k_fill(lsim__bf *dst, int64_t n, uint64_t key,
                             float scale, float offset) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    uint64_t h = lsim__dmix(key ^ lsim__dmix((uint64_t)i));
    float u = (float)(h >> 40) * (2.0f / 16777216.0f) - 1.0f;
    dst[i] = __float2bfloat16_rn(offset + scale * u);
  }
}

__global__ void lsim__k_embed(uint4 *out, const uint4 *table,
                              const int32_t *tok, int H8) {
  const int t = blockIdx.x;
  const uint4 *src = table + (size_t)tok[t] * (size_t)H8;
  uint4 *dst = out + (size_t)t * (size_t)H8;
  for (int i = threadIdx.x; i < H8; i += blockDim.x)
    dst[i] = src[i];
}

/* Sum over the block (blockDim.x a multiple of 32, at most 1024). */
__device__ __forceinline__ float lsim__block_sum(float v, float *sh) {
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  const int w = threadIdx.x >> 5, nw = blockDim.x >> 5;
  __syncthreads(); /* sh may still be read by a previous call */
  if ((threadIdx.x & 31) == 0)
    sh[w] = v;
  __syncthreads();
  v = 0;
  for (int i = 0; i < nw; i++) /* fixed order: deterministic */
    v += sh[i];
  return v;
}

__device__ __forceinline__ void lsim__unpack8(const uint4 &u, float *f) {
  const __nv_bfloat162 *p = (const __nv_bfloat162 *)&u;
  for (int j = 0; j < 4; j++) {
    float2 t = __bfloat1622float2(p[j]);
    f[2 * j] = t.x;
    f[2 * j + 1] = t.y;
  }
}

__device__ __forceinline__ uint4 lsim__pack8(const float *f) {
  uint4 u;
  __nv_bfloat162 *p = (__nv_bfloat162 *)&u;
  for (int j = 0; j < 4; j++)
    p[j] = __floats2bfloat162_rn(f[2 * j], f[2 * j + 1]);
  return u;
}

__global__ void lsim__k_rmsnorm(lsim__bf *out, int ldo, const lsim__bf *in,
                                int ldi, const int32_t *rows,
                                const lsim__bf *g, int H, float eps) {
  __shared__ float sh[32];
  const int t = blockIdx.x, r = rows ? rows[t] : t;
  const uint4 *x = (const uint4 *)(in + (size_t)r * (size_t)ldi);
  const uint4 *gv = (const uint4 *)g;
  uint4 *y = (uint4 *)(out + (size_t)t * (size_t)ldo);
  const int H8 = H / 8;
  float ss = 0;
  for (int i = threadIdx.x; i < H8; i += blockDim.x) {
    float f[8];
    lsim__unpack8(x[i], f);
    for (int j = 0; j < 8; j++)
      ss += f[j] * f[j];
  }
  ss = lsim__block_sum(ss, sh);
  const float inv = rsqrtf(ss / (float)H + eps);
  for (int i = threadIdx.x; i < H8; i += blockDim.x) {
    float f[8], w[8];
    lsim__unpack8(x[i], f);
    lsim__unpack8(gv[i], w);
    for (int j = 0; j < 8; j++)
      f[j] = f[j] * inv * w[j];
    y[i] = lsim__pack8(f);
  }
}

/* One block per row: the angles of its position once (fp64), then every
** q and k head's halves rotated in place. */
__global__ void lsim__k_rope(lsim__bf *x, int ld, const int32_t *pos,
                             const double *inv_freq, int nh, int d) {
  extern __shared__ float cs[]; /* [d/2] cos, [d/2] sin */
  const int t = blockIdx.x, half = d / 2;
  const double p = (double)pos[t];
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    double sn, c;
    sincos(p * inv_freq[i], &sn, &c);
    cs[i] = (float)c;
    cs[half + i] = (float)sn;
  }
  __syncthreads();
  lsim__bf *row = x + (size_t)t * (size_t)ld;
  for (int k = threadIdx.x; k < nh * half; k += blockDim.x) {
    const int h = k / half, i = k % half;
    lsim__bf *v = row + (size_t)h * d;
    const float a = __bfloat162float(v[i]), b = __bfloat162float(v[i + half]);
    const float c = cs[i], sn = cs[half + i];
    v[i] = __float2bfloat16_rn(a * c - b * sn);
    v[i + half] = __float2bfloat16_rn(b * c + a * sn);
  }
}

__global__ void lsim__k_silu_mul(uint4 *out, const uint4 *gu, int T, int I8) {
  const int64_t n = (int64_t)T * I8;
  for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < n;
       k += (int64_t)gridDim.x * blockDim.x) {
    const int64_t t = k / I8, i = k % I8;
    float g[8], u[8];
    lsim__unpack8(gu[t * 2 * I8 + i], g);
    lsim__unpack8(gu[t * 2 * I8 + I8 + i], u);
    for (int j = 0; j < 8; j++)
      g[j] = g[j] / (1.0f + expf(-g[j])) * u[j];
    out[k] = lsim__pack8(g);
  }
}

/* Y[t][0..N) += D[t][0..N), both bf16, stride ld: the fp32 sum rounded
** once (the partitioned composition's join) */
__global__ void lsim__k_add(uint4 *y, const uint4 *d, int T, int N8,
                            int ld8) {
  const int64_t n = (int64_t)T * N8;
  for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < n;
       k += (int64_t)gridDim.x * blockDim.x) {
    const int64_t o = k / N8 * ld8 + k % N8;
    float a[8], b[8];
    lsim__unpack8(y[o], a);
    lsim__unpack8(d[o], b);
    for (int j = 0; j < 8; j++)
      a[j] += b[j];
    y[o] = lsim__pack8(a);
  }
}

/* The better of two (value, index) candidates: larger value, then the
** lower index; NaN (and the empty index -1) never win. */
__device__ __forceinline__ void lsim__amax(float &v, int &i, float v2,
                                           int i2) {
  if (i2 < 0 || v2 != v2)
    return;
  if (i < 0 || v2 > v || (v2 == v && i2 < i)) {
    v = v2;
    i = i2;
  }
}

__global__ void lsim__k_argmax(int32_t *idx, const float *logits, int V) {
  __shared__ float sv[32];
  __shared__ int si[32];
  const float *row = logits + (size_t)blockIdx.x * (size_t)V;
  float v = 0;
  int i = -1;
  for (int k = threadIdx.x; k < V; k += blockDim.x)
    lsim__amax(v, i, row[k], k);
  for (int o = 16; o > 0; o >>= 1) {
    float v2 = __shfl_xor_sync(0xffffffffu, v, o);
    int i2 = __shfl_xor_sync(0xffffffffu, i, o);
    lsim__amax(v, i, v2, i2);
  }
  if ((threadIdx.x & 31) == 0) {
    sv[threadIdx.x >> 5] = v;
    si[threadIdx.x >> 5] = i;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < (int)(blockDim.x >> 5); w++)
      lsim__amax(v, i, sv[w], si[w]);
    idx[blockIdx.x] = i;
  }
}

__global__ void lsim__k_tern(lsim__bf *dst, int64_t n, uint64_t key) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    int v = (int)(lsim__dmix(key ^ lsim__dmix((uint64_t)i)) % 3u) - 1;
    dst[i] = __float2bfloat16_rn((float)v);
  }
}

/* ---- kernel entry points ----------------------------------------------------- */

#define LSIM__LAUNCHED(eb, what)                                             \
  do {                                                                       \
    cudaError_t lsim__le = cudaGetLastError();                               \
    if (lsim__le != cudaSuccess)                                             \
      return lsim_fail((eb), LSIM_E_BACKEND, "cuda: %s launch: %s", (what),  \
                       cudaGetErrorString(lsim__le));                        \
  } while (0)

static unsigned lsim__grid(int64_t n, int threads) {
  int64_t b = (n + threads - 1) / threads;
  return (unsigned)(b < 1 ? 1 : b > 65536 ? 65536 : b);
}

extern "C" lsim_err lsim_fwd_fill(void *dst, int64_t n, uint64_t key,
                                  float scale, float offset, void *stream,
                                  lsim_errbuf *eb) {
  if (n <= 0)
    return 0;
  lsim__k_fill<<<lsim__grid(n, 256), 256, 0, (cudaStream_t)stream>>>(
      (lsim__bf *)dst, n, key, scale, offset);
  LSIM__LAUNCHED(eb, "fill");
  return 0;
}

extern "C" lsim_err lsim_fwd_fill_tern(void *dst, int64_t n, uint64_t key,
                                       void *stream, lsim_errbuf *eb) {
  if (n <= 0)
    return 0;
  lsim__k_tern<<<lsim__grid(n, 256), 256, 0, (cudaStream_t)stream>>>(
      (lsim__bf *)dst, n, key);
  LSIM__LAUNCHED(eb, "fill_tern");
  return 0;
}

extern "C" lsim_err lsim_fwd_k_embed(void *out, const void *table,
                                     const int32_t *tok, int T, int H,
                                     void *stream, lsim_errbuf *eb) {
  if (H % 8)
    return lsim_fail(eb, LSIM_E_USAGE, "embed: hidden %d not a multiple of 8",
                     H);
  if (T <= 0)
    return 0;
  lsim__k_embed<<<(unsigned)T, 128, 0, (cudaStream_t)stream>>>(
      (uint4 *)out, (const uint4 *)table, tok, H / 8);
  LSIM__LAUNCHED(eb, "embed");
  return 0;
}

extern "C" lsim_err lsim_fwd_k_rmsnorm(void *out, int ldo, const void *in,
                                       int ldi, const int32_t *rows,
                                       const void *g, int T, int H, float eps,
                                       void *stream, lsim_errbuf *eb) {
  if (H % 8 || ldo % 8 || ldi % 8)
    return lsim_fail(eb, LSIM_E_USAGE,
                     "rmsnorm: hidden %d and strides %d, %d must be "
                     "multiples of 8", H, ldo, ldi);
  if (T <= 0)
    return 0;
  int th = H / 8 >= 512 ? 512 : H / 8 >= 256 ? 256 : 128;
  lsim__k_rmsnorm<<<(unsigned)T, th, 0, (cudaStream_t)stream>>>(
      (lsim__bf *)out, ldo, (const lsim__bf *)in, ldi, rows,
      (const lsim__bf *)g, H, eps);
  LSIM__LAUNCHED(eb, "rmsnorm");
  return 0;
}

extern "C" lsim_err lsim_fwd_k_rope(void *x, int ld, const int32_t *pos,
                                    const double *inv_freq, int T, int nq,
                                    int nk, int d, void *stream,
                                    lsim_errbuf *eb) {
  if (d < 2 || d % 2 || d > 1024)
    return lsim_fail(eb, LSIM_E_USAGE, "rope: head_dim %d", d);
  if (T <= 0)
    return 0;
  lsim__k_rope<<<(unsigned)T, 256, (size_t)d * sizeof(float),
                 (cudaStream_t)stream>>>((lsim__bf *)x, ld, pos, inv_freq,
                                         nq + nk, d);
  LSIM__LAUNCHED(eb, "rope");
  return 0;
}

extern "C" lsim_err lsim_fwd_k_silu_mul(void *out, const void *gu, int T,
                                        int I, void *stream, lsim_errbuf *eb) {
  if (I % 8)
    return lsim_fail(eb, LSIM_E_USAGE,
                     "silu_mul: intermediate %d not a multiple of 8", I);
  if (T <= 0)
    return 0;
  lsim__k_silu_mul<<<lsim__grid((int64_t)T * (I / 8), 256), 256, 0,
                     (cudaStream_t)stream>>>((uint4 *)out, (const uint4 *)gu,
                                             T, I / 8);
  LSIM__LAUNCHED(eb, "silu_mul");
  return 0;
}

extern "C" lsim_err lsim_fwd_k_argmax(int32_t *idx, const float *logits,
                                      int S, int V, void *stream,
                                      lsim_errbuf *eb) {
  if (S <= 0)
    return 0;
  lsim__k_argmax<<<(unsigned)S, 1024, 0, (cudaStream_t)stream>>>(idx, logits,
                                                                 V);
  LSIM__LAUNCHED(eb, "argmax");
  return 0;
}

/* ---- the executor ------------------------------------------------------------ */

enum { LSIM__P_GEMM = 0, LSIM__P_ATTN, LSIM__P_LORA, LSIM__P_OTHER,
       LSIM__P_N };
#define LSIM__PROF_EVENTS 4096

/* The host tier's copy of one adapter: its image (npages engine pages),
** the layout's row offsets and the image's checksum. */
struct lsim__img {
  uint16_t *img; /* pinned */
  int64_t npages, noff;
  int64_t *off;
  int art, ver, valid;
  uint64_t csum;
};

/* One object's generation in one pool. */
struct lsim__slot {
  int32_t *d_tab;  /* device: page tables [layers][7][2r], then pages */
  int32_t *h_tab;  /* pinned staging of the same */
  int64_t cap;     /* ints in both */
  uint64_t *d_csum, *h_csum;
  cudaEvent_t ev[3]; /* copy start, copy end, checksum read back */
  int staged, published, timed, obj;
  int64_t load_ns;
};

typedef struct lsim__layer_w {
  lsim__bf *attn_norm, *qkv, *o, *mlp_norm, *gu, *down;
} lsim__layer_w;

struct lsim_fwd {
  lsim_fwd_cfg cfg;
  lsim_model_shape shape;
  int L, H, I, nq, nk, d, V, qd, kvd, qkvd;
  int64_t tpp;
  float eps;
  cudaStream_t s, s_copy;
  lsim_blas *blas;
  lsim_cuda_attn *attn;
  lsim_cuda_lora *lora[LSIM_FWD_MODS];
  void *wbuf;
  lsim__bf *embed, *final_norm, *lm_head;
  lsim__layer_w *lw;
  void **pool;
  /* activations of one forward at max_rows */
  lsim__bf *h, *xn, *qkv, *ao, *gu, *act, *xs;
  float *logits;
  double *freq;
  int32_t *d_meta; /* tokens [max_rows], pos [max_rows], srows, idx */
  int32_t *h_meta; /* pinned: the same, then the sampled ids back */
  cudaEvent_t e0, e1;
  int T, S; /* the last run's rows and sampled rows */
  int lora_on; /* the last run prepared adapter plans */
  int onepass; /* the last run's adapted projections run in one pass */
  /* the partitioned composition (docs/CUDA.md): the GEMM through
  ** cuBLASLt on the side stream s2 beside the deltas into dpart on s;
  ** dpart NULL when cuBLASLt is missing (the composition is then never
  ** taken) */
  cudaStream_t s2;
  cudaEvent_t ef, ej;
  lsim__bf *dpart;
  int sms;
  int part; /* the last run composes its adapted projections so */
  /* host scratch */
  int32_t *ctx, *qstart, *btbuf;
  const int32_t **bt;
  lsim_cuda_paged_ref *ent; /* [layers][max_ids] */
  /* the adapters: host tier images per object, slots per (pool, object) */
  struct lsim__img *img;
  struct lsim__slot *slot;
  int *rank;
  int prof;
  cudaEvent_t *pev;
  int *ptag, npev;
  lsim_fwd_prof pr;
};

static int64_t lsim__al(int64_t b) { return (b + 255) / 256 * 256; }

static void lsim__dims(const lsim_model_shape *s, int layers, int64_t *w,
                       int64_t *per_layer) {
  const int64_t H = s->hidden, I = s->intermediate,
                q = s->q_heads * s->head_dim, kv = s->kv_heads * s->head_dim;
  int64_t pl = lsim__al(H * 2) * 2 + lsim__al((q + 2 * kv) * H * 2) +
               lsim__al(H * q * 2) + lsim__al(2 * I * H * 2) +
               lsim__al(H * I * 2);
  int64_t g = lsim__al(s->vocab * H * 2) * (s->tie_embeddings ? 1 : 2) +
              lsim__al(H * 2);
  *per_layer = pl;
  *w = g + pl * layers;
}

static int64_t lsim__work(const lsim_fwd_cfg *c, const lsim_model_shape *s) {
  const int64_t T = c->max_rows, S = c->max_seqs, H = s->hidden,
                I = s->intermediate, q = s->q_heads * s->head_dim,
                kv = s->kv_heads * s->head_dim;
  int64_t b = lsim__al(T * H * 2) * 2 + lsim__al(T * (q + 2 * kv) * 2) +
              lsim__al(T * q * 2) + lsim__al(T * 2 * I * 2) +
              lsim__al(T * I * 2) + lsim__al(S * H * 2) +
              lsim__al(S * s->vocab * 4) + lsim__al((2 * T + 2 * S) * 4);
  /* the deltas' shrink workspaces (at most d_in / 1024 ranges of rows x
  ** rank fp32 per module), attention's split partials, cuBLAS's 32 MiB,
  ** and a margin for the runtime's own */
  int64_t r = c->max_rank > 0 ? c->max_rank : 1;
  int64_t lw = 0;
  for (int m = 0; m < LSIM_FWD_MODS; m++)
    if (c->mods >> m & 1u) {
      int64_t di, dout;
      lsim_shape_module_dims(s, m, &di, &dout);
      lw += lsim__al((di / 1024 + 1) * T * (r + 1) * 4);
    }
  int64_t at = S * s->q_heads * 64 * (s->head_dim + 2) * 4 +
               T * s->q_heads * 4 * (s->head_dim + 2) * 4;
  /* the partitioned composition's delta buffer: up to
  ** LSIM_CUDA_GEMM_MAX_ROWS rows of the widest projection */
  int64_t wide = q + 2 * kv > 2 * I ? q + 2 * kv : 2 * I;
  if (H > wide)
    wide = H;
  const int64_t pr = T < LSIM_CUDA_GEMM_MAX_ROWS ? T : LSIM_CUDA_GEMM_MAX_ROWS;
  return b + lw + at + lsim__al(pr * wide * 2) + ((int64_t)32 << 20) +
         ((int64_t)256 << 20);
}

extern "C" void lsim_fwd_need(const lsim_fwd_cfg *cfg, int64_t *weights,
                              int64_t *pools, int64_t *work) {
  int64_t pl;
  int layers = cfg->layers > 0 ? cfg->layers : cfg->shape->layers;
  lsim__dims(cfg->shape, layers, weights, &pl);
  *pools = (int64_t)cfg->npools * cfg->pool_pages * cfg->page_bytes;
  *work = lsim__work(cfg, cfg->shape);
}

/* E_DEV_UNSUPPORTED: what the executor cannot run. */
static lsim_err lsim__supported(const lsim_fwd_cfg *c, lsim_errbuf *eb) {
  const lsim_model_shape *s = c->shape;
#define LSIM__NO(...) lsim_fail(eb, LSIM_E_DEV_UNSUPPORTED, __VA_ARGS__)
  if (!s || !s->full)
    return LSIM__NO("--execute full needs a full model shape ($.model.preset "
                    "or hidden, intermediate, q_heads and vocab)");
  if (s->dtype != LSIM_DTYPE_BF16 && s->dtype != LSIM_DTYPE_NONE)
    return LSIM__NO("--execute full runs bf16 models; $.model.dtype is %s",
                    lsim_shape_dtype_names()[s->dtype - 1]);
  if (s->dtype_bytes != 2)
    return LSIM__NO("--execute full runs 2-byte elements; $.model.dtype_bytes"
                    " is %d", s->dtype_bytes);
  if (s->head_dim != 64 && s->head_dim != 128)
    return LSIM__NO("--execute full: the attention kernels take head_dim 64 "
                    "or 128, the shape has %lld", (long long)s->head_dim);
  if (s->hidden % 64 || s->intermediate % 64)
    return LSIM__NO("--execute full: hidden (%lld) and intermediate (%lld) "
                    "must be multiples of 64", (long long)s->hidden,
                    (long long)s->intermediate);
  if (s->hidden > (1 << 20) || s->intermediate > (1 << 20) ||
      s->vocab > (1 << 24) || s->q_heads > 1024 || s->layers > 4096)
    return LSIM__NO("--execute full: a dimension of the shape is beyond the "
                    "kernels' range");
  if (s->norm != LSIM_NORM_RMSNORM || s->activation != LSIM_ACT_SILU)
    return LSIM__NO("--execute full runs rmsnorm and silu only");
  const int64_t kvb = 2 * (int64_t)s->layers * s->kv_heads * s->head_dim * 2;
  if (c->kv_bytes_per_token != kvb)
    return LSIM__NO("--execute full: %lld KV bytes per token, the shape has "
                    "%lld (tensor parallelism is not executed)",
                    (long long)c->kv_bytes_per_token, (long long)kvb);
  if (c->page_bytes < kvb || c->page_bytes % kvb)
    return LSIM__NO("--execute full: a page of %lld bytes holds %lld / %lld "
                    "tokens, not a positive whole number",
                    (long long)c->page_bytes, (long long)c->page_bytes,
                    (long long)kvb);
  if (c->pool_pages < 1 || c->npools < 1 ||
      c->pool_pages * c->page_bytes / LSIM_FWD_UNIT > INT32_MAX)
    return LSIM__NO("--execute full: a pool of %lld pages of %lld bytes is "
                    "beyond the page tables' 32-bit units",
                    (long long)c->pool_pages, (long long)c->page_bytes);
  if (c->max_rows < 1 || c->max_seqs < 1 || c->max_pages_seq < 1 ||
      c->max_rows > (1 << 24))
    return LSIM__NO("--execute full: batch bounds (%d rows, %d sequences)",
                    c->max_rows, c->max_seqs);
  if (c->mods && (c->max_rank < 1 || c->max_rank > LSIM_CUDA_MAX_RANK ||
                  c->max_ids < 1))
    return LSIM__NO("--execute full: adapter rank %d (1..%d)", c->max_rank,
                    LSIM_CUDA_MAX_RANK);
#undef LSIM__NO
  return 0;
}

extern "C" void lsim_fwd_close(lsim_fwd *F) {
  if (!F)
    return;
  if (F->s)
    cudaStreamSynchronize(F->s);
  if (F->s_copy)
    cudaStreamSynchronize(F->s_copy);
  lsim_blas_close(F->blas);
  lsim_cuda_attn_close(F->attn);
  for (int m = 0; m < LSIM_FWD_MODS; m++)
    lsim_cuda_lora_close(F->lora[m]);
  cudaFree(F->wbuf);
  for (int i = 0; F->pool && i < F->cfg.npools; i++)
    cudaFree(F->pool[i]);
  cudaFree(F->h);
  cudaFree(F->d_meta);
  cudaFree(F->freq);
  if (F->h_meta)
    cudaFreeHost(F->h_meta);
  if (F->e0)
    cudaEventDestroy(F->e0);
  if (F->e1)
    cudaEventDestroy(F->e1);
  if (F->s2)
    cudaStreamSynchronize(F->s2);
  cudaFree(F->dpart);
  if (F->ef)
    cudaEventDestroy(F->ef);
  if (F->ej)
    cudaEventDestroy(F->ej);
  if (F->s2)
    cudaStreamDestroy(F->s2);
  for (int i = 0; F->pev && i < LSIM__PROF_EVENTS; i++)
    if (F->pev[i])
      cudaEventDestroy(F->pev[i]);
  if (F->s)
    cudaStreamDestroy(F->s);
  if (F->s_copy)
    cudaStreamDestroy(F->s_copy);
  for (int i = 0; F->img && i < F->cfg.objects; i++) {
    if (F->img[i].img)
      cudaFreeHost(F->img[i].img);
    free(F->img[i].off);
  }
  for (int64_t i = 0;
       F->slot && i < (int64_t)F->cfg.npools * F->cfg.objects; i++) {
    struct lsim__slot *q = &F->slot[i];
    cudaFree(q->d_tab);
    cudaFree(q->d_csum);
    if (q->h_tab)
      cudaFreeHost(q->h_tab);
    if (q->h_csum)
      cudaFreeHost(q->h_csum);
    for (int k = 0; k < 3; k++)
      if (q->ev[k])
        cudaEventDestroy(q->ev[k]);
  }
  free(F->img);
  free(F->slot);
  free(F->rank);
  free(F->pev);
  free(F->ptag);
  free(F->pool);
  free(F->lw);
  free(F->ctx);
  free(F->qstart);
  free(F->btbuf);
  free(F->bt);
  free(F->ent);
  free(F);
}

/* A weight key: the seed, the tensor kind and the layer. */
static uint64_t lsim__wkey(uint64_t seed, int tensor, int layer) {
  return lsim_fwd_mix(lsim_fwd_mix(seed ^ 0x3E1647Bull) ^
                      ((uint64_t)tensor << 32 | (uint32_t)layer));
}

extern "C" lsim_err lsim_fwd_check(const lsim_fwd_cfg *cfg,
                                   lsim_errbuf *eb) {
  lsim_err rc = lsim__supported(cfg, eb);
  if (rc)
    return rc;
  const lsim_model_shape *s = cfg->shape;
  const int layers = cfg->layers > 0 ? cfg->layers : s->layers;
  if (layers > s->layers)
    return lsim_fail(eb, LSIM_E_USAGE, "forward: %d layers of %d", layers,
                     s->layers);
  int64_t wb, pb, kb;
  lsim_fwd_need(cfg, &wb, &pb, &kb);
  size_t fr = 0, tot = 0;
  cudaError_t ce = cudaMemGetInfo(&fr, &tot);
  if (ce != cudaSuccess)
    return lsim_fail(eb, LSIM_E_BACKEND, "cuda: cudaMemGetInfo: %s",
                     cudaGetErrorString(ce));
  {
    /* the shape's own weight count (every layer, whatever runs), the
    ** pools and the workspace against the free bytes (shape.h) */
    char msg[400];
    lsim_shape_fit fit;
    if (lsim_shape_fit_check(s, (int64_t)cfg->npools * cfg->pool_pages,
                             cfg->page_bytes, kb, (int64_t)fr, &fit, msg,
                             sizeof msg))
      return lsim_fail(eb, LSIM_E_DEV_FIT, "--execute full: %s (of %.1f "
                       "MiB on the device)", msg, tot / 1048576.0);
  }
  return 0;
}

extern "C" lsim_err lsim_fwd_open(lsim_fwd **out, const lsim_fwd_cfg *cfg,
                                  lsim_errbuf *eb) {
  *out = NULL;
  lsim_err rc = lsim_fwd_check(cfg, eb);
  if (rc)
    return rc;
  const lsim_model_shape *s = cfg->shape;
  const int layers = cfg->layers > 0 ? cfg->layers : s->layers;
  int64_t wb, pl;
  lsim_fwd *F = (lsim_fwd *)calloc(1, sizeof *F);
  if (!F)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  F->cfg = *cfg;
  F->shape = *s;
  F->cfg.shape = &F->shape;
  F->cfg.layers = layers;
  F->L = layers;
  F->H = (int)s->hidden;
  F->I = (int)s->intermediate;
  F->nq = (int)s->q_heads;
  F->nk = (int)s->kv_heads;
  F->d = (int)s->head_dim;
  F->V = (int)s->vocab;
  F->qd = F->nq * F->d;
  F->kvd = F->nk * F->d;
  F->qkvd = F->qd + 2 * F->kvd;
  F->tpp = cfg->page_bytes / cfg->kv_bytes_per_token;
  F->eps = (float)s->norm_eps;
  const int64_t T = cfg->max_rows, S = cfg->max_seqs;
  const char *pe = getenv("LSIM_FWD_PROFILE");
  F->prof = pe && *pe && strcmp(pe, "0") != 0;
#define LSIM__CK(call) LSIM_CUDA_TRY(call, eb)
  LSIM__CK(cudaStreamCreateWithFlags(&F->s, cudaStreamNonBlocking));
  LSIM__CK(cudaStreamCreateWithFlags(&F->s_copy, cudaStreamNonBlocking));
  LSIM__CK(cudaEventCreate(&F->e0));
  LSIM__CK(cudaEventCreate(&F->e1));
  if (F->prof) {
    F->pev = (cudaEvent_t *)calloc(LSIM__PROF_EVENTS, sizeof *F->pev);
    F->ptag = (int *)calloc(LSIM__PROF_EVENTS, sizeof *F->ptag);
    if (!F->pev || !F->ptag) {
      rc = lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
      goto out;
    }
    for (int i = 0; i < LSIM__PROF_EVENTS; i++)
      LSIM__CK(cudaEventCreate(&F->pev[i]));
  }
  if ((rc = lsim_blas_open(&F->blas, F->s, eb)))
    goto out;
  if (lsim_blas_has_lt(F->blas)) {
    /* the partitioned composition: a side stream, its fork and join
    ** events, the delta buffer (lsim__work counts it) */
    int64_t wide = F->qkvd > 2 * F->I ? F->qkvd : 2 * F->I;
    if (F->H > wide)
      wide = F->H;
    const int64_t pr =
        T < LSIM_CUDA_GEMM_MAX_ROWS ? T : LSIM_CUDA_GEMM_MAX_ROWS;
    int dev = 0;
    LSIM__CK(cudaGetDevice(&dev));
    LSIM__CK(cudaDeviceGetAttribute(&F->sms, cudaDevAttrMultiProcessorCount,
                                    dev));
    LSIM__CK(cudaStreamCreateWithFlags(&F->s2, cudaStreamNonBlocking));
    LSIM__CK(cudaEventCreateWithFlags(&F->ef, cudaEventDisableTiming));
    LSIM__CK(cudaEventCreateWithFlags(&F->ej, cudaEventDisableTiming));
    LSIM__CK(cudaMalloc((void **)&F->dpart, (size_t)(pr * wide * 2)));
  }
  {
    lsim_cuda_attn_cfg ac;
    memset(&ac, 0, sizeof ac);
    ac.q_heads = F->nq;
    ac.kv_heads = F->nk;
    ac.head_dim = F->d;
    ac.layers = s->layers; /* the page layout's, whatever runs */
    ac.page_bytes = cfg->page_bytes;
    ac.pool_pages = cfg->pool_pages;
    ac.max_seqs = cfg->max_seqs;
    ac.max_rows = cfg->max_rows;
    ac.max_kv = cfg->max_pages_seq * F->tpp;
    ac.stream = F->s;
    if ((rc = lsim_cuda_attn_open(&F->attn, &ac, eb)))
      goto out;
  }
  for (int m = 0; m < LSIM_FWD_MODS; m++)
    if (cfg->mods >> m & 1u) {
      int64_t di, dout;
      lsim_shape_module_dims(s, m, &di, &dout);
      lsim_cuda_lora_cfg lc = {0, LSIM_CUDA_BF16, (int)di, (int)dout,
                               cfg->max_ids, F->s, 0};
      if ((rc = lsim_cuda_lora_open(&F->lora[m], &lc, eb)))
        goto out;
    }
  /* weights: one allocation */
  lsim__dims(s, layers, &wb, &pl);
  LSIM__CK(cudaMalloc(&F->wbuf, (size_t)wb));
  F->lw = (lsim__layer_w *)calloc((size_t)layers, sizeof *F->lw);
  F->pool = (void **)calloc((size_t)cfg->npools, sizeof *F->pool);
  F->ctx = (int32_t *)calloc((size_t)S, sizeof *F->ctx);
  F->qstart = (int32_t *)calloc((size_t)S + 1, sizeof *F->qstart);
  F->btbuf = (int32_t *)calloc((size_t)(S * cfg->max_pages_seq),
                               sizeof *F->btbuf);
  F->bt = (const int32_t **)calloc((size_t)S, sizeof *F->bt);
  F->ent = (lsim_cuda_paged_ref *)calloc(
      (size_t)layers * (size_t)(cfg->max_ids > 0 ? cfg->max_ids : 1),
      sizeof *F->ent);
  if (cfg->objects > 0) {
    F->img = (struct lsim__img *)calloc((size_t)cfg->objects, sizeof *F->img);
    F->slot = (struct lsim__slot *)calloc(
        (size_t)cfg->npools * (size_t)cfg->objects, sizeof *F->slot);
    F->rank = (int *)malloc((size_t)cfg->objects * sizeof *F->rank);
    if (!F->img || !F->slot || !F->rank || !cfg->rank) {
      rc = lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
      goto out;
    }
    memcpy(F->rank, cfg->rank, (size_t)cfg->objects * sizeof *F->rank);
  }
  F->cfg.rank = F->rank;
  if (!F->lw || !F->pool || !F->ctx || !F->qstart || !F->btbuf || !F->bt ||
      !F->ent) {
    rc = lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
    goto out;
  }
  {
    unsigned char *w = (unsigned char *)F->wbuf;
    const int64_t H = F->H, I = F->I, V = F->V;
    const float sh = 1.0f / sqrtf((float)H), si = 1.0f / sqrtf((float)I),
                sq = 1.0f / sqrtf((float)F->qd);
    /* the gains near 1, the matrices uniform with variance 1 / (3 d_in) */
#define LSIM__T(ptr, n, tensor, layer, sc, of)                               \
  do {                                                                       \
    (ptr) = (lsim__bf *)w;                                                   \
    if ((rc = lsim_fwd_fill(w, (n), lsim__wkey(cfg->seed, (tensor), (layer)),\
                            (sc), (of), F->s, eb)))                          \
      goto out;                                                              \
    w += lsim__al((n) * 2);                                                  \
  } while (0)
    LSIM__T(F->embed, V * H, LSIM_FWD_W_EMBED, 0, 1.0f, 0.0f);
    LSIM__T(F->final_norm, H, LSIM_FWD_W_FINAL_NORM, 0, 0.1f, 1.0f);
    if (s->tie_embeddings)
      F->lm_head = F->embed;
    else
      LSIM__T(F->lm_head, V * H, LSIM_FWD_W_LM_HEAD, 0, sh, 0.0f);
    for (int l = 0; l < layers; l++) {
      lsim__layer_w *x = &F->lw[l];
      LSIM__T(x->attn_norm, H, LSIM_FWD_W_ATTN_NORM, l, 0.1f, 1.0f);
      LSIM__T(x->mlp_norm, H, LSIM_FWD_W_MLP_NORM, l, 0.1f, 1.0f);
      LSIM__T(x->qkv, (int64_t)F->qkvd * H, LSIM_FWD_W_QKV, l, sh, 0.0f);
      LSIM__T(x->o, H * F->qd, LSIM_FWD_W_O, l, sq, 0.0f);
      LSIM__T(x->gu, 2 * I * H, LSIM_FWD_W_GATE_UP, l, sh, 0.0f);
      LSIM__T(x->down, H * I, LSIM_FWD_W_DOWN, l, si, 0.0f);
    }
#undef LSIM__T
  }
  for (int i = 0; i < cfg->npools; i++) {
    size_t b = (size_t)(cfg->pool_pages * cfg->page_bytes);
    LSIM__CK(cudaMalloc(&F->pool[i], b));
    /* zero: KV never written reads as finite values */
    LSIM__CK(cudaMemsetAsync(F->pool[i], 0, b, F->s));
  }
  {
    const int64_t H = F->H, I = F->I;
    int64_t o[8], b = 0;
    o[0] = b, b += lsim__al(T * H * 2);           /* h */
    o[1] = b, b += lsim__al(T * H * 2);           /* xn */
    o[2] = b, b += lsim__al(T * F->qkvd * 2);     /* qkv */
    o[3] = b, b += lsim__al(T * F->qd * 2);       /* ao */
    o[4] = b, b += lsim__al(T * 2 * I * 2);       /* gu */
    o[5] = b, b += lsim__al(T * I * 2);           /* act */
    o[6] = b, b += lsim__al(S * H * 2);           /* xs */
    o[7] = b, b += lsim__al(S * (int64_t)F->V * 4); /* logits */
    unsigned char *a;
    LSIM__CK(cudaMalloc((void **)&a, (size_t)b));
    F->h = (lsim__bf *)(a + o[0]);
    F->xn = (lsim__bf *)(a + o[1]);
    F->qkv = (lsim__bf *)(a + o[2]);
    F->ao = (lsim__bf *)(a + o[3]);
    F->gu = (lsim__bf *)(a + o[4]);
    F->act = (lsim__bf *)(a + o[5]);
    F->xs = (lsim__bf *)(a + o[6]);
    F->logits = (float *)(a + o[7]);
  }
  {
    size_t nm = (size_t)(2 * T + 2 * S);
    LSIM__CK(cudaMalloc((void **)&F->d_meta, nm * sizeof(int32_t)));
    LSIM__CK(cudaMallocHost((void **)&F->h_meta, nm * sizeof(int32_t)));
    double *fq = (double *)malloc((size_t)(F->d / 2) * sizeof *fq);
    if (!fq) {
      rc = lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
      goto out;
    }
    lsim_fwd_rope_freqs(s, fq);
    cudaError_t e = cudaMalloc((void **)&F->freq, (size_t)(F->d / 2) * 8);
    if (e == cudaSuccess)
      e = cudaMemcpy(F->freq, fq, (size_t)(F->d / 2) * 8,
                     cudaMemcpyHostToDevice);
    free(fq);
    LSIM__CK(e);
  }
  LSIM__CK(cudaStreamSynchronize(F->s));
  LSIM__CK(cudaGetLastError());
  *out = F;
  return 0;
out:
  lsim_fwd_close(F);
  return rc;
#undef LSIM__CK
}

extern "C" void *lsim_fwd_pool(lsim_fwd *F, int i) {
  return i >= 0 && i < F->cfg.npools ? F->pool[i] : NULL;
}
extern "C" void *lsim_fwd_stream(lsim_fwd *F) { return F->s; }
extern "C" void *lsim_fwd_copy_stream(lsim_fwd *F) { return F->s_copy; }
extern "C" int lsim_fwd_tpp(const lsim_fwd *F) { return (int)F->tpp; }

extern "C" const void *lsim_fwd_weight(const lsim_fwd *F, int tensor,
                                       int layer, int64_t *elems) {
  const int64_t H = F->H, I = F->I, V = F->V;
  const lsim__layer_w *x = layer >= 0 && layer < F->L ? &F->lw[layer] : NULL;
  int64_t n = 0;
  const void *p = NULL;
  switch (tensor) {
  case LSIM_FWD_W_EMBED: p = F->embed, n = V * H; break;
  case LSIM_FWD_W_FINAL_NORM: p = F->final_norm, n = H; break;
  case LSIM_FWD_W_LM_HEAD: p = F->lm_head, n = V * H; break;
  case LSIM_FWD_W_ATTN_NORM: p = x ? x->attn_norm : NULL, n = H; break;
  case LSIM_FWD_W_QKV: p = x ? x->qkv : NULL, n = (int64_t)F->qkvd * H; break;
  case LSIM_FWD_W_O: p = x ? x->o : NULL, n = H * F->qd; break;
  case LSIM_FWD_W_MLP_NORM: p = x ? x->mlp_norm : NULL, n = H; break;
  case LSIM_FWD_W_GATE_UP: p = x ? x->gu : NULL, n = 2 * I * H; break;
  case LSIM_FWD_W_DOWN: p = x ? x->down : NULL, n = H * I; break;
  default: break;
  }
  if (elems)
    *elems = p ? n : 0;
  return p;
}

extern "C" const void *lsim_fwd_hidden(const lsim_fwd *F) { return F->h; }
extern "C" const int32_t *lsim_fwd_token_ids(const lsim_fwd *F) {
  return F->d_meta;
}

/* Profiling marks: an event after each stage, tagged with the stage. */
static void lsim__mark(lsim_fwd *F, int tag) {
  if (!F->prof || F->npev >= LSIM__PROF_EVENTS)
    return;
  F->ptag[F->npev] = tag;
  cudaEventRecord(F->pev[F->npev++], F->s);
}

extern "C" void lsim_fwd_prof_get(const lsim_fwd *F, lsim_fwd_prof *out) {
  *out = F->pr;
}

/* The adapter deltas of module m of layer l: X [T][ldx] into Y [T][ldy]. */
static lsim_err lsim__delta(lsim_fwd *F, int m, int l, const void *X, int ldx,
                            void *Y, int ldy, int on, lsim_errbuf *eb) {
  if (!on || !F->lora[m])
    return 0;
  lsim_err rc = lsim_cuda_lora_run_layer(F->lora[m], l, X, ldx, Y, ldy, eb);
  lsim__mark(F, LSIM__P_LORA);
  return rc;
}

/* Module m's base projection and delta in one pass (lsim_cuda_lora_run_gemm):
** Y = beta Y + X W^T + delta, W [d_out][ldw] the module's rows. */
static lsim_err lsim__gemm1(lsim_fwd *F, int m, int l, const void *X,
                            int ldx, const void *W, int ldw, void *Y, int ldy,
                            float beta, lsim_errbuf *eb) {
  lsim_err rc = lsim_cuda_lora_run_gemm_layer(F->lora[m], l, X, ldx, W, ldw,
                                              Y, ldy, beta, eb);
  lsim__mark(F, LSIM__P_GEMM);
  return rc;
}

static lsim_err lsim__gemm(lsim_fwd *F, int T, int N, int K, const void *X,
                           int ldx, const void *W, void *Y, int ldy,
                           float beta, lsim_errbuf *eb) {
  lsim_err rc = lsim_blas_gemm(F->blas, T, N, K, X, ldx, W, Y, ldy, beta, 0,
                               eb);
  lsim__mark(F, LSIM__P_GEMM);
  return rc;
}

/*
** The partitioned composition of one projection and its modules' deltas
** (docs/CUDA.md): Y [T][N] (stride ldy) = X W^T + beta Y through cuBLASLt
** on the side stream, told to target the SMs the branch leaves; on the
** compute stream meanwhile the delta buffer zeroed and each module's
** delta added into its columns col[i] of it (grids sized for the other
** SMs: tune sms, set at planning); after the join the buffer is added
** into Y.  The delta is rounded to bf16 in the buffer, then the sum once
** more.
*/
static lsim_err lsim__gemm_part(lsim_fwd *F, int l, int T, int N, int K,
                                const void *X, int ldx, const void *W,
                                void *Y, int ldy, float beta, const int *mods,
                                const int *col, int nm, lsim_errbuf *eb) {
  lsim_err rc;
  const int k = F->sms / LSIM_CUDA_PART_SHARE;
  int any = 0;
  for (int i = 0; i < nm; i++)
    any |= F->lora[mods[i]] != NULL;
  if (!any) /* no delta to overlap: the plain GEMM */
    return lsim__gemm(F, T, N, K, X, ldx, W, Y, ldy, beta, eb);
  LSIM_CUDA_RET(cudaEventRecord(F->ef, F->s), eb);
  LSIM_CUDA_RET(cudaStreamWaitEvent(F->s2, F->ef, 0), eb);
  if ((rc = lsim_blas_gemm_lt(F->blas, F->s2, F->sms - k, T, N, K, X, ldx, W,
                              Y, ldy, beta, 0, eb)))
    return rc;
  LSIM_CUDA_RET(cudaEventRecord(F->ej, F->s2), eb);
  LSIM_CUDA_RET(cudaMemsetAsync(F->dpart, 0, (size_t)T * ldy * 2, F->s), eb);
  for (int i = 0; i < nm; i++)
    if (F->lora[mods[i]] &&
        (rc = lsim_cuda_lora_run_layer(F->lora[mods[i]], l, X, ldx,
                                       F->dpart + col[i], ldy, eb)))
      return rc;
  LSIM_CUDA_RET(cudaStreamWaitEvent(F->s, F->ej, 0), eb);
  lsim__k_add<<<lsim__grid((int64_t)T * (N / 8), 256), 256, 0, F->s>>>(
      (uint4 *)Y, (const uint4 *)F->dpart, T, N / 8, ldy / 8);
  LSIM__LAUNCHED(eb, "add");
  lsim__mark(F, LSIM__P_GEMM);
  return 0;
}

extern "C" lsim_err lsim_fwd_run(lsim_fwd *F, const lsim_fwd_batch *b,
                                 int64_t *ns, lsim_errbuf *eb) {
  const lsim_fwd_cfg *c = &F->cfg;
  lsim_err rc = 0;
  if (ns)
    *ns = -1;
  if (!b || b->n < 0 || b->n > c->max_seqs || b->pool < 0 ||
      b->pool >= c->npools || (b->n > 0 && !b->seq))
    return lsim_fail(eb, LSIM_E_USAGE, "forward: %d sequences (at most %d), "
                     "pool %d of %d", b ? b->n : -1, c->max_seqs,
                     b ? b->pool : -1, c->npools);
  /* rows, sampled rows, block tables */
  int T = 0, S = 0, npre = 0, prefill_done = 0;
  int64_t nbt = 0;
  for (int j = 0; j < b->n; j++) {
    const lsim_fwd_seq *q = &b->seq[j];
    if (q->rows < 1 || q->ctx < 0 || (!q->prefill && q->rows != 1) ||
        (q->prefill && prefill_done) || T + (int64_t)q->rows > c->max_rows)
      return lsim_fail(eb, LSIM_E_USAGE,
                       "forward: sequence %d (request %lld): %d rows at "
                       "context %lld (%s; %d rows at most in all)", j,
                       (long long)q->request, q->rows, (long long)q->ctx,
                       q->prefill ? "prefill" : "decode", c->max_rows);
    if (!q->prefill)
      prefill_done = 1;
    else
      npre++;
    const int64_t need = (q->ctx + q->rows + F->tpp - 1) / F->tpp;
    if (q->npages < need || need > c->max_pages_seq || !q->pages)
      return lsim_fail(eb, LSIM_E_USAGE,
                       "forward: request %lld holds %lld KV pages for %lld "
                       "tokens (%lld tokens per page; at most %lld pages a "
                       "sequence)", (long long)q->request,
                       (long long)q->npages, (long long)(q->ctx + q->rows),
                       (long long)F->tpp, (long long)c->max_pages_seq);
    if (q->ctx + q->rows > INT32_MAX)
      return lsim_fail(eb, LSIM_E_USAGE, "forward: context %lld",
                       (long long)q->ctx);
    int32_t *bt = F->btbuf + nbt;
    for (int64_t i = 0; i < need; i++) {
      if (q->pages[i] < 0 || q->pages[i] >= c->pool_pages)
        return lsim_fail(eb, LSIM_E_USAGE,
                         "forward: request %lld names page %lld of a pool "
                         "of %lld", (long long)q->request,
                         (long long)q->pages[i], (long long)c->pool_pages);
      bt[i] = (int32_t)q->pages[i];
    }
    F->bt[j] = bt;
    nbt += need;
    F->ctx[j] = (int32_t)q->ctx;
    F->qstart[j] = T;
    int32_t *tok = F->h_meta, *pos = F->h_meta + c->max_rows;
    for (int i = 0; i < q->rows; i++) {
      tok[T + i] = lsim_fwd_token_id(c->seed, q->request, q->ctx + i, F->V);
      pos[T + i] = (int32_t)(q->ctx + i);
    }
    T += q->rows;
    if (q->sample)
      F->h_meta[2 * c->max_rows + S++] = T - 1;
  }
  F->qstart[b->n] = T;
  if (b->rp && b->rp->T != T)
    return lsim_fail(eb, LSIM_E_USAGE,
                     "forward: the adapter plan has %d rows, the batch %d",
                     b->rp->T, T);
  F->T = T;
  F->S = S;
  if (T == 0) {
    if (ns)
      *ns = 0;
    return 0;
  }
  /* plans: attention, then each adapted module's deltas (one metadata
  ** copy each, before the timed region) */
  lsim_cuda_attn_batch ab = {b->n, npre, F->qstart, F->ctx, F->bt};
  if ((rc = lsim_cuda_attn_plan(F->attn, &ab, eb)))
    return rc;
  int lora_on = b->rp && b->rp->nactive > 0 && c->mods;
  F->lora_on = 0;
  F->onepass = 0;
  F->part = 0;
  int bpath = b->path;
  if (lora_on && b->onepass >= 0 && b->ad) {
    /* the composition: the chooser's, for an AUTO batch; with onepass 1
    ** (one pass) or 2 (partitioned) wherever the plan allows it, on the
    ** batch's path (the chooser's shrink path when AUTO) */
    int rmax = 0, bp = LSIM_CUDA_PATH_AUTO;
    for (int id = 0; id < b->nad; id++)
      if (b->ad[id].ptab && b->ad[id].rank > rmax)
        rmax = b->ad[id].rank;
    int ch = lsim_cuda_gemm_choose(b->rp, rmax, F->H, F->H, &bp);
    /* the partitioned composition only when asked for (onepass 2): its
    ** path through the executor was written after the session's device
    ** time was spent and has not run on a GPU yet (docs/BENCHMARKS.md,
    ** issue 23); the kernel benchmark's measurements stand */
    if (ch == LSIM_CUDA_GEMM_PART)
      ch = LSIM_CUDA_GEMM_SEQ;
    if (b->onepass > 0)
      ch = b->onepass == 2 ? LSIM_CUDA_GEMM_PART : LSIM_CUDA_GEMM_ONEPASS;
    else if (b->path != LSIM_CUDA_PATH_AUTO)
      ch = LSIM_CUDA_GEMM_SEQ;
    if (ch == LSIM_CUDA_GEMM_PART && F->dpart &&
        T <= LSIM_CUDA_GEMM_MAX_ROWS)
      F->part = 1;
    else if (ch == LSIM_CUDA_GEMM_ONEPASS)
      F->onepass = 1; /* the plans below say whether it can */
    if (b->path == LSIM_CUDA_PATH_AUTO && (F->part || F->onepass))
      bpath = bp;
  }
  if (lora_on) {
    if (!b->ad || b->nad < 1 || b->nad > c->max_ids)
      return lsim_fail(eb, LSIM_E_USAGE,
                       "forward: %d adapter entries (at most %d)", b->nad,
                       c->max_ids);
    for (int m = 0; m < LSIM_FWD_MODS && !rc; m++) {
      if (!(c->mods >> m & 1u))
        continue;
      for (int l = 0; l < F->L; l++)
        for (int id = 0; id < b->nad; id++) {
          const lsim_fwd_adapter *a = &b->ad[id];
          lsim_cuda_paged_ref *e = &F->ent[(size_t)l * b->nad + id];
          e->ptab = a->ptab ? a->ptab + ((int64_t)l * LSIM_FWD_MODS + m) *
                                            2 * a->rank
                            : NULL;
          e->rank = a->rank;
          e->scale = a->scale;
        }
      {
        /* the partitioned composition sizes the branch's grids for the
        ** SMs the GEMM leaves it */
        lsim_cuda_lora_tune t;
        lsim_cuda_lora_get_tune(F->lora[m], &t);
        t.sms = F->part ? F->sms / LSIM_CUDA_PART_SHARE : 0;
        lsim_cuda_lora_set_tune(F->lora[m], &t);
      }
      rc = lsim_cuda_lora_plan_layers(F->lora[m], b->rp, bpath,
                                      F->pool[b->pool], LSIM_FWD_UNIT / 2,
                                      F->ent, b->nad, F->L, eb);
      if (!rc && !lsim_cuda_lora_gemm_ok(F->lora[m], NULL))
        F->onepass = 0; /* every adapted module, or none */
    }
    if (rc)
      return rc;
    F->lora_on = 1;
  }
  const int32_t *d_tok = F->d_meta, *d_pos = F->d_meta + c->max_rows,
                *d_srows = F->d_meta + 2 * c->max_rows;
  int32_t *d_idx = F->d_meta + 2 * c->max_rows + c->max_seqs;
  LSIM_CUDA_RET(cudaMemcpyAsync(F->d_meta, F->h_meta,
                                (size_t)(2 * c->max_rows + S) * 4,
                                cudaMemcpyHostToDevice, F->s),
                eb);
  F->npev = 0;
  LSIM_CUDA_RET(cudaEventRecord(F->e0, F->s), eb);
  lsim__mark(F, LSIM__P_OTHER);
  void *pool = F->pool[b->pool];
  const int H = F->H, I = F->I;
#define LSIM__DO(x)                                                          \
  do {                                                                       \
    if ((rc = (x)))                                                          \
      return rc;                                                             \
  } while (0)
  const int one = F->onepass && lora_on, part = F->part && lora_on;
  static const int mqkv[3] = {LSIM_MOD_Q, LSIM_MOD_K, LSIM_MOD_V},
                   mo[1] = {LSIM_MOD_O}, mgu[2] = {LSIM_MOD_GATE, LSIM_MOD_UP},
                   md[1] = {LSIM_MOD_DOWN};
  const int cqkv[3] = {0, F->qd, F->qd + F->kvd}, c0[1] = {0},
            cgu[2] = {0, I};
  LSIM__DO(lsim_fwd_k_embed(F->h, F->embed, d_tok, T, H, F->s, eb));
  for (int l = 0; l < F->L; l++) {
    const lsim__layer_w *w = &F->lw[l];
    LSIM__DO(lsim_fwd_k_rmsnorm(F->xn, H, F->h, H, NULL, w->attn_norm, T, H,
                                F->eps, F->s, eb));
    lsim__mark(F, LSIM__P_OTHER);
    if (part) {
      LSIM__DO(lsim__gemm_part(F, l, T, F->qkvd, H, F->xn, H, w->qkv, F->qkv,
                               F->qkvd, 0.0f, mqkv, cqkv, 3, eb));
    } else if (one && F->lora[LSIM_MOD_Q] && F->lora[LSIM_MOD_K] &&
               F->lora[LSIM_MOD_V]) {
      /* q, k and v: their rows of the fused weight, each with its delta */
      LSIM__DO(lsim__gemm1(F, LSIM_MOD_Q, l, F->xn, H, w->qkv, H, F->qkv,
                           F->qkvd, 0.0f, eb));
      LSIM__DO(lsim__gemm1(F, LSIM_MOD_K, l, F->xn, H,
                           w->qkv + (size_t)F->qd * H, H, F->qkv + F->qd,
                           F->qkvd, 0.0f, eb));
      LSIM__DO(lsim__gemm1(F, LSIM_MOD_V, l, F->xn, H,
                           w->qkv + (size_t)(F->qd + F->kvd) * H, H,
                           F->qkv + F->qd + F->kvd, F->qkvd, 0.0f, eb));
    } else {
      LSIM__DO(lsim__gemm(F, T, F->qkvd, H, F->xn, H, w->qkv, F->qkv,
                          F->qkvd, 0.0f, eb));
      LSIM__DO(lsim__delta(F, LSIM_MOD_Q, l, F->xn, H, F->qkv, F->qkvd,
                           lora_on, eb));
      LSIM__DO(lsim__delta(F, LSIM_MOD_K, l, F->xn, H, F->qkv + F->qd,
                           F->qkvd, lora_on, eb));
      LSIM__DO(lsim__delta(F, LSIM_MOD_V, l, F->xn, H,
                           F->qkv + F->qd + F->kvd, F->qkvd, lora_on, eb));
    }
    LSIM__DO(lsim_fwd_k_rope(F->qkv, F->qkvd, d_pos, F->freq, T, F->nq, F->nk,
                             F->d, F->s, eb));
    lsim__mark(F, LSIM__P_OTHER);
    LSIM__DO(lsim_cuda_attn_append(F->attn, l, pool, F->qkv + F->qd, F->qkvd,
                                   F->qkv + F->qd + F->kvd, F->qkvd, eb));
    LSIM__DO(lsim_cuda_attn_run(F->attn, l, pool, F->qkv, F->qkvd, F->ao,
                                F->qd, eb));
    lsim__mark(F, LSIM__P_ATTN);
    /* the residual added by the GEMM itself (beta 1), the delta after */
    if (part) {
      LSIM__DO(lsim__gemm_part(F, l, T, H, F->qd, F->ao, F->qd, w->o, F->h, H,
                               1.0f, mo, c0, 1, eb));
    } else if (one && F->lora[LSIM_MOD_O]) {
      LSIM__DO(lsim__gemm1(F, LSIM_MOD_O, l, F->ao, F->qd, w->o, F->qd, F->h,
                           H, 1.0f, eb));
    } else {
      LSIM__DO(lsim__gemm(F, T, H, F->qd, F->ao, F->qd, w->o, F->h, H, 1.0f,
                          eb));
      LSIM__DO(lsim__delta(F, LSIM_MOD_O, l, F->ao, F->qd, F->h, H, lora_on,
                           eb));
    }
    LSIM__DO(lsim_fwd_k_rmsnorm(F->xn, H, F->h, H, NULL, w->mlp_norm, T, H,
                                F->eps, F->s, eb));
    lsim__mark(F, LSIM__P_OTHER);
    if (part) {
      LSIM__DO(lsim__gemm_part(F, l, T, 2 * I, H, F->xn, H, w->gu, F->gu,
                               2 * I, 0.0f, mgu, cgu, 2, eb));
    } else if (one && F->lora[LSIM_MOD_GATE] && F->lora[LSIM_MOD_UP]) {
      LSIM__DO(lsim__gemm1(F, LSIM_MOD_GATE, l, F->xn, H, w->gu, H, F->gu,
                           2 * I, 0.0f, eb));
      LSIM__DO(lsim__gemm1(F, LSIM_MOD_UP, l, F->xn, H,
                           w->gu + (size_t)I * H, H, F->gu + I, 2 * I, 0.0f,
                           eb));
    } else {
      LSIM__DO(lsim__gemm(F, T, 2 * I, H, F->xn, H, w->gu, F->gu, 2 * I,
                          0.0f, eb));
      LSIM__DO(lsim__delta(F, LSIM_MOD_GATE, l, F->xn, H, F->gu, 2 * I,
                           lora_on, eb));
      LSIM__DO(lsim__delta(F, LSIM_MOD_UP, l, F->xn, H, F->gu + I, 2 * I,
                           lora_on, eb));
    }
    LSIM__DO(lsim_fwd_k_silu_mul(F->act, F->gu, T, I, F->s, eb));
    lsim__mark(F, LSIM__P_OTHER);
    if (part) {
      LSIM__DO(lsim__gemm_part(F, l, T, H, I, F->act, I, w->down, F->h, H,
                               1.0f, md, c0, 1, eb));
    } else if (one && F->lora[LSIM_MOD_DOWN]) {
      LSIM__DO(lsim__gemm1(F, LSIM_MOD_DOWN, l, F->act, I, w->down, I, F->h,
                           H, 1.0f, eb));
    } else {
      LSIM__DO(lsim__gemm(F, T, H, I, F->act, I, w->down, F->h, H, 1.0f,
                          eb));
      LSIM__DO(lsim__delta(F, LSIM_MOD_DOWN, l, F->act, I, F->h, H, lora_on,
                           eb));
    }
  }
  if (S > 0) {
    LSIM__DO(lsim_fwd_k_rmsnorm(F->xs, H, F->h, H, d_srows, F->final_norm, S,
                                H, F->eps, F->s, eb));
    lsim__mark(F, LSIM__P_OTHER);
    LSIM__DO(lsim_blas_gemm(F->blas, S, F->V, H, F->xs, H, F->lm_head,
                            F->logits, F->V, 0.0f, 1, eb));
    lsim__mark(F, LSIM__P_GEMM);
    LSIM__DO(lsim_fwd_k_argmax(d_idx, F->logits, S, F->V, F->s, eb));
    lsim__mark(F, LSIM__P_OTHER);
  }
#undef LSIM__DO
  LSIM_CUDA_RET(cudaEventRecord(F->e1, F->s), eb);
  LSIM_CUDA_RET(cudaMemcpyAsync(F->h_meta + 2 * c->max_rows + c->max_seqs,
                                d_idx, (size_t)S * 4, cudaMemcpyDeviceToHost,
                                F->s),
                eb);
  LSIM_CUDA_RET(cudaStreamSynchronize(F->s), eb);
  LSIM_CUDA_RET(cudaGetLastError(), eb);
  float ms = 0;
  LSIM_CUDA_RET(cudaEventElapsedTime(&ms, F->e0, F->e1), eb);
  if (ns)
    *ns = (int64_t)llround((double)ms * 1e6);
  if (F->prof) {
    memset(&F->pr, 0, sizeof F->pr);
    int64_t *acc[LSIM__P_N] = {&F->pr.gemm_ns, &F->pr.attn_ns, &F->pr.lora_ns,
                               &F->pr.other_ns};
    for (int i = 1; i < F->npev; i++) {
      float d = 0;
      if (cudaEventElapsedTime(&d, F->pev[i - 1], F->pev[i]) == cudaSuccess)
        *acc[F->ptag[i]] += (int64_t)llround((double)d * 1e6);
    }
    F->pr.total_ns = (int64_t)llround((double)ms * 1e6);
  }
  return 0;
}

extern "C" lsim_err lsim_fwd_tokens(lsim_fwd *F, int32_t *out, int max,
                                    int *n, lsim_errbuf *eb) {
  (void)eb;
  const int32_t *src = F->h_meta + 2 * F->cfg.max_rows + F->cfg.max_seqs;
  int k = F->S < max ? F->S : max;
  memcpy(out, src, (size_t)(k > 0 ? k : 0) * sizeof *out);
  *n = F->S;
  return 0;
}

/* ---- the adapters in the pools ----------------------------------------------- */

/* The sum of the positional checksum terms of the image as it sits in the
** pool: element i of image page i / E (E elements a page) is read at the
** engine page pages[i / E]. */
__global__ void lsim__k_csum(unsigned long long *out, const uint16_t *pool,
                             const int32_t *pages, int64_t npages,
                             int64_t E) {
  unsigned long long acc = 0;
  const int64_t n = npages * E;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    acc += lsim__pg_term((uint64_t)i,
                         pool[(int64_t)pages[i / E] * E + i % E]);
  atomicAdd(out, acc);
}

static struct lsim__slot *lsim__slot_of(const lsim_fwd *F, int pool,
                                        int obj) {
  if (!F->slot || pool < 0 || pool >= F->cfg.npools || obj < 0 ||
      obj >= F->cfg.objects)
    return NULL;
  return &F->slot[(size_t)pool * (size_t)F->cfg.objects + (size_t)obj];
}

/* The host tier image of (obj, art, ver) at npages pages. */
static lsim_err lsim__image(lsim_fwd *F, int obj, int art, int ver,
                            int64_t npages, lsim_errbuf *eb) {
  struct lsim__img *g = &F->img[obj];
  if (g->valid && g->art == art && g->ver == ver && g->npages == npages)
    return 0;
  const int r = F->rank[obj];
  const int64_t pb = F->cfg.page_bytes;
  const int64_t noff = (int64_t)F->shape.layers * LSIM_FWD_MODS * 2 * r;
  g->valid = 0;
  if (g->noff < noff) {
    free(g->off);
    g->off = (int64_t *)malloc((size_t)noff * sizeof *g->off);
    g->noff = g->off ? noff : 0;
    if (!g->off)
      return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  }
  lsim_err rc = lsim_fwd_layout(&F->shape, F->L, F->cfg.mods, r, pb, npages,
                                g->off, NULL, eb);
  if (rc)
    return rc;
  if (g->npages != npages || !g->img) {
    if (g->img)
      cudaFreeHost(g->img);
    g->img = NULL;
    g->npages = 0;
    cudaError_t e = cudaMallocHost((void **)&g->img, (size_t)(npages * pb));
    if (e != cudaSuccess) {
      g->img = NULL;
      return lsim_fail(eb, LSIM_E_NOMEM,
                       "host tier: %lld bytes of pinned memory for adapter "
                       "%d: %s", (long long)(npages * pb), art,
                       cudaGetErrorString(e));
    }
    g->npages = npages;
  }
  memset(g->img, 0, (size_t)(npages * pb));
  lsim_fwd_factors(&F->shape, F->L, F->cfg.mods, r, F->cfg.seed, art, ver,
                   g->off, g->img);
  uint64_t c = 0;
  const int64_t n = npages * pb / 2;
  for (int64_t i = 0; i < n; i++)
    c += lsim__pg_term((uint64_t)i, g->img[i]);
  g->csum = c;
  g->art = art;
  g->ver = ver;
  g->valid = 1;
  return 0;
}

extern "C" lsim_err lsim_fwd_adapter_stage(lsim_fwd *F, int pool, int obj,
                                           int art, int ver,
                                           const int64_t *pages,
                                           int64_t npages, lsim_errbuf *eb) {
  struct lsim__slot *q = lsim__slot_of(F, pool, obj);
  if (!q || !pages || npages < 1 || !F->cfg.mods)
    return lsim_fail(eb, LSIM_E_USAGE,
                     "forward: stage of object %d in pool %d (%lld pages)",
                     obj, pool, (long long)npages);
  if (q->staged && !q->published)
    return lsim_fail(eb, LSIM_E_DEV_BUSY,
                     "forward: object %d already has a stage in flight", obj);
  for (int64_t i = 0; i < npages; i++)
    if (pages[i] < 0 || pages[i] >= F->cfg.pool_pages)
      return lsim_fail(eb, LSIM_E_USAGE,
                       "forward: object %d: page %lld of a pool of %lld", obj,
                       (long long)pages[i], (long long)F->cfg.pool_pages);
  lsim_err rc = lsim__image(F, obj, art, ver, npages, eb);
  if (rc)
    return rc;
  const struct lsim__img *g = &F->img[obj];
  const int r = F->rank[obj];
  const int64_t pb = F->cfg.page_bytes;
  const int64_t ntab = (int64_t)F->L * LSIM_FWD_MODS * 2 * r;
  const int64_t need = ntab + npages;
  if (q->cap < need) {
    cudaFree(q->d_tab);
    if (q->h_tab)
      cudaFreeHost(q->h_tab);
    q->d_tab = NULL;
    q->h_tab = NULL;
    q->cap = 0;
    LSIM_CUDA_RET(cudaMalloc((void **)&q->d_tab, (size_t)need * 4), eb);
    LSIM_CUDA_RET(cudaMallocHost((void **)&q->h_tab, (size_t)need * 4), eb);
    q->cap = need;
  }
  if (!q->d_csum) {
    LSIM_CUDA_RET(cudaMalloc((void **)&q->d_csum, 8), eb);
    LSIM_CUDA_RET(cudaMallocHost((void **)&q->h_csum, 8), eb);
    for (int k = 0; k < 3; k++)
      LSIM_CUDA_RET(cudaEventCreate(&q->ev[k]), eb);
  }
  /* the page tables: every row's unit through the engine pages */
  memset(q->h_tab, 0, (size_t)ntab * 4);
  for (int l = 0; l < F->L; l++)
    for (int m = 0; m < LSIM_FWD_MODS; m++) {
      if (!(F->cfg.mods >> m & 1u))
        continue;
      const int64_t base = ((int64_t)l * LSIM_FWD_MODS + m) * 2 * r;
      for (int k = 0; k < 2 * r; k++) {
        const int64_t o = g->off[base + k];
        q->h_tab[base + k] =
            (int32_t)((pages[o / pb] * pb + o % pb) / LSIM_FWD_UNIT);
      }
    }
  for (int64_t i = 0; i < npages; i++)
    q->h_tab[ntab + i] = (int32_t)pages[i];
  cudaStream_t cs = F->s_copy;
  const uint16_t *dp = (const uint16_t *)F->pool[pool];
  LSIM_CUDA_RET(cudaEventRecord(q->ev[0], cs), eb);
  for (int64_t i = 0; i < npages;) {
    int64_t j = i + 1;
    while (j < npages && pages[j] == pages[j - 1] + 1)
      j++;
    LSIM_CUDA_RET(cudaMemcpyAsync((char *)F->pool[pool] + pages[i] * pb,
                                  (const char *)g->img + i * pb,
                                  (size_t)((j - i) * pb),
                                  cudaMemcpyHostToDevice, cs),
                  eb);
    i = j;
  }
  LSIM_CUDA_RET(cudaEventRecord(q->ev[1], cs), eb);
  LSIM_CUDA_RET(cudaMemcpyAsync(q->d_tab, q->h_tab, (size_t)need * 4,
                                cudaMemcpyHostToDevice, cs),
                eb);
  LSIM_CUDA_RET(cudaMemsetAsync(q->d_csum, 0, 8, cs), eb);
  lsim__k_csum<<<lsim__grid(npages * pb / 2, 256) < 1024
                     ? lsim__grid(npages * pb / 2, 256)
                     : 1024,
                 256, 0, cs>>>((unsigned long long *)q->d_csum, dp,
                               q->d_tab + ntab, npages, pb / 2);
  LSIM__LAUNCHED(eb, "checksum");
  LSIM_CUDA_RET(cudaMemcpyAsync(q->h_csum, q->d_csum, 8,
                                cudaMemcpyDeviceToHost, cs),
                eb);
  LSIM_CUDA_RET(cudaEventRecord(q->ev[2], cs), eb);
  q->staged = 1;
  q->published = 0;
  q->timed = 0;
  q->obj = obj;
  return 0;
}

static lsim_err lsim__slot_time(struct lsim__slot *q, lsim_errbuf *eb) {
  if (q->timed)
    return 0;
  LSIM_CUDA_RET(cudaEventSynchronize(q->ev[2]), eb);
  float ms = 0;
  LSIM_CUDA_RET(cudaEventElapsedTime(&ms, q->ev[0], q->ev[1]), eb);
  q->load_ns = (int64_t)llround((double)ms * 1e6);
  q->timed = 1;
  return 0;
}

extern "C" lsim_err lsim_fwd_adapter_publish(lsim_fwd *F, int pool, int obj,
                                             lsim_errbuf *eb) {
  struct lsim__slot *q = lsim__slot_of(F, pool, obj);
  if (!q || !q->staged || q->published)
    return lsim_fail(eb, LSIM_E_DEV_NO_LOAD,
                     "forward: publish of object %d in pool %d without a "
                     "stage", obj, pool);
  lsim_err rc = lsim__slot_time(q, eb);
  if (rc)
    return rc;
  if (*q->h_csum != F->img[obj].csum) {
    q->staged = 0;
    return lsim_fail(eb, LSIM_E_DEV_CHECKSUM,
                     "forward: adapter object %d: the pages on the device do "
                     "not reproduce the host image's checksum (%016llx, "
                     "%016llx)", obj, (unsigned long long)*q->h_csum,
                     (unsigned long long)F->img[obj].csum);
  }
  q->published = 1;
  return 0;
}

extern "C" lsim_err lsim_fwd_adapter_retire(lsim_fwd *F, int pool, int obj,
                                            lsim_errbuf *eb) {
  struct lsim__slot *q = lsim__slot_of(F, pool, obj);
  if (!q)
    return lsim_fail(eb, LSIM_E_USAGE, "forward: retire of object %d", obj);
  if (q->staged && !q->published) /* a copy in flight into the pages */
    LSIM_CUDA_RET(cudaEventSynchronize(q->ev[2]), eb);
  q->staged = q->published = 0;
  return 0;
}

extern "C" const int32_t *lsim_fwd_adapter_ptab(const lsim_fwd *F, int pool,
                                                int obj) {
  const struct lsim__slot *q = lsim__slot_of(F, pool, obj);
  return q && q->published ? q->d_tab : NULL;
}

extern "C" int64_t lsim_fwd_adapter_load_ns(lsim_fwd *F, int pool, int obj) {
  struct lsim__slot *q = lsim__slot_of(F, pool, obj);
  if (!q || !q->ev[0] || (!q->staged && !q->timed))
    return -1;
  return lsim__slot_time(q, NULL) ? -1 : q->load_ns;
}

extern "C" const uint16_t *lsim_fwd_adapter_image(const lsim_fwd *F, int obj,
                                                  const int64_t **off) {
  if (!F->img || obj < 0 || obj >= F->cfg.objects || !F->img[obj].valid)
    return NULL;
  if (off)
    *off = F->img[obj].off;
  return F->img[obj].img;
}

extern "C" void lsim_fwd__corrupt_image(lsim_fwd *F, int obj, int64_t byte) {
  if (F->img && obj >= 0 && obj < F->cfg.objects && F->img[obj].valid &&
      byte >= 0 && byte < F->img[obj].npages * F->cfg.page_bytes)
    ((unsigned char *)F->img[obj].img)[byte] ^= 0x40;
}

extern "C" lsim_err lsim_fwd_delta(lsim_fwd *F, int m, int l, const void *X,
                                   int ldx, void *Y, int ldy,
                                   lsim_errbuf *eb) {
  if (!F->lora_on || m < 0 || m >= LSIM_FWD_MODS || !F->lora[m] || l < 0 ||
      l >= F->L)
    return lsim_fail(eb, LSIM_E_STATE,
                     "forward: no adapter plan of module %d, layer %d", m, l);
  /* the caller filled X and Y on other streams (the legacy one) */
  LSIM_CUDA_RET(cudaDeviceSynchronize(), eb);
  lsim_err rc = lsim_cuda_lora_run_layer(F->lora[m], l, X, ldx, Y, ldy, eb);
  if (rc)
    return rc;
  LSIM_CUDA_RET(cudaStreamSynchronize(F->s), eb);
  LSIM_CUDA_RET(cudaGetLastError(), eb);
  return 0;
}
