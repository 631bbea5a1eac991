/*
** lora.cu: the adapter branch's host side (cuda.h): the device adapter
** table, plan preparation (tiles, the path chooser, one metadata copy) and
** the two launches of a run.
**
** Invariants:
**   1. h_table mirrors d_table: an entry with rank > 0 names live device
**      factors of that rank and scale; every change to the device copy
**      happens after the stream is idle (load/unload synchronize), so a
**      launch never reads a half-written entry.
**   2. A prepared plan (planned == 1) only names resident adapters with the
**      plan's rank: load/unload of an id the plan uses clears `planned`.
**   3. The pinned staging buffer is rewritten only after the previous
**      metadata copy completed (meta_done), and the device metadata buffer
**      only in stream order after the launches that read it.
**   4. ws holds at least splits * nlist * ws_ld floats for the plan.
**   5. With pad_rank R (the zero-padded slot layout), every device entry
**      has rank R (rows past the adapter's own rank are zero) and lrank
**      holds the logical rank that plans are checked against.
**   6. A paged plan (lsim_cuda_lora_plan_paged) carries its own adapter
**      table at the start of the metadata buffer; it names no adapter of
**      the context's table, so load/unload do not invalidate it.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.cuh"
#include "eorder.h"
#include "expand.cuh"
#include "fused.cuh"
#include "lgemm.cuh"
#include "wgemm.cuh"
#include "shrink.cuh"

struct lsim_cuda_lora {
  lsim_cuda_lora_cfg cfg;
  cudaStream_t stream;
  int own_stream;
  int sms;
  int lda, ldb; /* padded factor row strides */
  lsim__adapter_dev *h_table;
  lsim__adapter_dev *d_table;
  void **mem;           /* per id: the device allocation of A and Bt */
  int *lrank;           /* per id: logical rank (0: not loaded) */
  unsigned char *used; /* per id: named by the prepared plan */
  lsim_cuda_lora_tune tune;
  /* the prepared plan */
  int planned, path, kind, rc, nactive;
  int src; /* the mma shrink's rank class: rc, or 16 with grid.y rank
              groups (the rank split) */
  int *h_meta, *d_meta;
  size_t meta_cap; /* ints */
  cudaEvent_t meta_done;
  int meta_pending;
  float *ws;
  size_t ws_cap; /* floats */
  lsim__lora_args args;
  dim3 g_shrink, g_expand;
  size_t simt_smem;
  int fused_mt, fused_cs; /* fused path: rows per tile, blocks per cluster */
  size_t fused_smem;
  int pdl; /* the plan's launch mode (tune.pdl resolved) */
  int paged; /* the prepared plan reads factors through page tables */
  int nlayers; /* layered plan (lsim_cuda_lora_plan_layers): tables in
                  the metadata, one per layer, nent entries each; 1 else */
  const lsim__adapter_dev *table0; /* the first layer's table */
  /* the one-pass GEMM (lsim_cuda_lora_run_gemm, lgemm.cuh): set up by
  ** every plan of at most LSIM__GEMM_MAXM rows on a perm-ordered path */
  int gemm_ok;              /* 0: run_gemm refuses, gemm_why says why */
  const char *gemm_why;
  int gemm_bm, gemm_cs, gemm_klen, gemm_tpos, netiles, gemm_T;
  size_t gemm_smem;
  size_t o_erows, o_etiles; /* ints into the metadata buffer */
  /* the streaming one-pass GEMM (wgemm.cuh): used by run_gemm when wg_ok
  ** (tune.gemm_kernel 0 or 2); segments {adapter, list start, end, K'
  ** offset} and their ranks in the metadata */
  int wg_ok, wg_bm, wg_cs, wg_ns, wg_kblen, wg_tcld, wg_nseg, wg_ktot;
  const char *wg_why;
  size_t o_wsegs, o_wsrank;
  float *gpart;             /* the K ranges' partial tiles */
  size_t gpart_cap;         /* floats */
  int *gcount;              /* arrival counters, zero between launches */
  int gcount_cap;
};

static const char *const lsim__path_names[LSIM_CUDA_PATH__COUNT] = {
    "auto", "decode", "sgmv", "indexed", "sgmv_mma", "indexed_mma", "fused"};

extern "C" const char *lsim_cuda_path_name(int path) {
  return path >= 0 && path < LSIM_CUDA_PATH__COUNT ? lsim__path_names[path]
                                                   : "?";
}

extern "C" int lsim_cuda_path_find(const char *name) {
  for (int i = 0; name && i < LSIM_CUDA_PATH__COUNT; i++)
    if (strcmp(name, lsim__path_names[i]) == 0)
      return i;
  return -1;
}

/* ---- 16-bit conversions (host) ----------------------------------------------- */

extern "C" uint16_t lsim_cuda_from_float(int dtype, float f) {
  if (dtype == LSIM_CUDA_FP16)
    return __half_as_ushort(__float2half_rn(f));
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it quiet */
    return (uint16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
  return (uint16_t)(u >> 16);
}

extern "C" float lsim_cuda_to_float(int dtype, uint16_t h) {
  if (dtype == LSIM_CUDA_FP16)
    return __half2float(__ushort_as_half(h));
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* ---- device memory helpers ------------------------------------------------------ */

extern "C" lsim_err lsim_cuda_malloc(void **p, size_t bytes, lsim_errbuf *eb) {
  *p = NULL;
  cudaError_t e = cudaMalloc(p, bytes ? bytes : 1);
  if (e != cudaSuccess) {
    *p = NULL;
    return lsim_fail(eb, LSIM_E_BACKEND, "cuda: cudaMalloc of %zu bytes: %s",
                     bytes, cudaGetErrorString(e));
  }
  return 0;
}

extern "C" void lsim_cuda_free(void *p) {
  if (p)
    cudaFree(p);
}

extern "C" lsim_err lsim_cuda_h2d(void *dst, const void *src, size_t bytes,
                                  lsim_errbuf *eb) {
  LSIM_CUDA_RET(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), eb);
  /* From pageable memory cudaMemcpy may return before the DMA has landed;
  ** kernels on a non-blocking stream would then read the old bytes. */
  LSIM_CUDA_RET(cudaDeviceSynchronize(), eb);
  return 0;
}

extern "C" lsim_err lsim_cuda_d2h(void *dst, const void *src, size_t bytes,
                                  lsim_errbuf *eb) {
  LSIM_CUDA_RET(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), eb);
  return 0;
}

extern "C" lsim_err lsim_cuda_memset(void *dst, int byte, size_t bytes,
                                     lsim_errbuf *eb) {
  LSIM_CUDA_RET(cudaMemset(dst, byte, bytes), eb);
  LSIM_CUDA_RET(cudaDeviceSynchronize(), eb);
  return 0;
}

/* ---- context ------------------------------------------------------------------------ */

static int lsim__round8(int n) { return (n + 7) & ~7; }

extern "C" lsim_err lsim_cuda_lora_open(lsim_cuda_lora **out,
                                        const lsim_cuda_lora_cfg *cfg,
                                        lsim_errbuf *eb) {
  lsim_err rc = 0;
  lsim_cuda_lora *L = NULL;
  cudaDeviceProp prop;
  if (!out)
    return lsim_fail(eb, LSIM_E_USAGE, "lora open: no output pointer");
  *out = NULL;
  if (!cfg || (cfg->dtype != LSIM_CUDA_BF16 && cfg->dtype != LSIM_CUDA_FP16) ||
      cfg->d_in < 1 || cfg->d_out < 1 || cfg->d_in > (1 << 24) ||
      cfg->d_out > (1 << 24) || cfg->max_adapters < 1 ||
      cfg->max_adapters > (1 << 24) || cfg->pad_rank < 0 ||
      cfg->pad_rank > LSIM_CUDA_MAX_RANK)
    return lsim_fail(eb, LSIM_E_USAGE,
                     "lora open: bad configuration (dtype 0/1, d_in and "
                     "d_out 1..2^24, max_adapters 1..2^24, pad_rank "
                     "0..%d)", LSIM_CUDA_MAX_RANK);
  L = (lsim_cuda_lora *)calloc(1, sizeof *L);
  if (!L)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  L->cfg = *cfg;
  L->path = -1;
  L->lda = lsim__round8(cfg->d_in);
  L->ldb = lsim__round8(cfg->d_out);
  /* Programmatic dependent launch is on.  (It was off for a while: the
  ** tests saw stale values now and then with it on.  The cause was the
  ** tests' own input copies: cudaMemcpy from pageable memory may return
  ** before the DMA lands, and the context's stream does not wait for the
  ** legacy stream; with PDL the expand reads Y earlier, while the shrink
  ** runs, and so saw the previous run's Y.  lsim_cuda_h2d and the table
  ** copies now wait for the DMA; docs/CUDA.md.) */
  L->tune.pdl = 1;
  L->tune.split_t = 1;
  L->tune.fused_prefetch = 1;
  L->tune.fused_preload = 1;
  L->tune.gemm_prefetch = 1;
  L->h_table = (lsim__adapter_dev *)calloc((size_t)cfg->max_adapters,
                                           sizeof *L->h_table);
  L->mem = (void **)calloc((size_t)cfg->max_adapters, sizeof *L->mem);
  L->used = (unsigned char *)calloc((size_t)cfg->max_adapters, 1);
  L->lrank = (int *)calloc((size_t)cfg->max_adapters, sizeof *L->lrank);
  if (!L->h_table || !L->mem || !L->used || !L->lrank) {
    rc = lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
    goto out;
  }
  LSIM_CUDA_TRY(cudaSetDevice(cfg->device), eb);
  LSIM_CUDA_TRY(cudaGetDeviceProperties(&prop, cfg->device), eb);
  if (prop.major < 9) {
    rc = lsim_fail(eb, LSIM_E_BACKEND,
                   "lora open: device %d (%s) is sm_%d%d; the kernels need "
                   "sm_90",
                   cfg->device, prop.name, prop.major, prop.minor);
    goto out;
  }
  L->sms = prop.multiProcessorCount;
  LSIM_CUDA_TRY(lsim__shrink_init(), eb);
  LSIM_CUDA_TRY(lsim__expand_init(), eb);
  LSIM_CUDA_TRY(lsim__fused_init(), eb);
  LSIM_CUDA_TRY(lsim__gemm_init(), eb);
  LSIM_CUDA_TRY(lsim__wg_init(), eb);
  if (cfg->stream) {
    L->stream = (cudaStream_t)cfg->stream;
  } else {
    LSIM_CUDA_TRY(cudaStreamCreateWithFlags(&L->stream, cudaStreamNonBlocking),
                  eb);
    L->own_stream = 1;
  }
  LSIM_CUDA_TRY(cudaEventCreateWithFlags(&L->meta_done,
                                         cudaEventDisableTiming),
                eb);
  LSIM_CUDA_TRY(cudaMalloc((void **)&L->d_table,
                           (size_t)cfg->max_adapters * sizeof *L->d_table),
                eb);
  LSIM_CUDA_TRY(cudaMemset(L->d_table, 0,
                           (size_t)cfg->max_adapters * sizeof *L->d_table),
                eb);
  LSIM_CUDA_TRY(cudaDeviceSynchronize(), eb);
out:
  if (rc) {
    lsim_cuda_lora_close(L);
    return rc;
  }
  *out = L;
  return 0;
}

extern "C" void lsim_cuda_lora_close(lsim_cuda_lora *L) {
  if (!L)
    return;
  if (L->stream)
    cudaStreamSynchronize(L->stream);
  if (L->mem)
    for (int i = 0; i < L->cfg.max_adapters; i++)
      if (L->mem[i])
        cudaFree(L->mem[i]);
  if (L->d_table)
    cudaFree(L->d_table);
  if (L->d_meta)
    cudaFree(L->d_meta);
  if (L->h_meta)
    cudaFreeHost(L->h_meta);
  if (L->ws)
    cudaFree(L->ws);
  if (L->gpart)
    cudaFree(L->gpart);
  if (L->gcount)
    cudaFree(L->gcount);
  if (L->meta_done)
    cudaEventDestroy(L->meta_done);
  if (L->own_stream && L->stream)
    cudaStreamDestroy(L->stream);
  free(L->h_table);
  free(L->mem);
  free(L->used);
  free(L->lrank);
  free(L);
}

extern "C" void lsim_cuda_lora_get_tune(const lsim_cuda_lora *L,
                                        lsim_cuda_lora_tune *t) {
  *t = L->tune;
}

extern "C" void lsim_cuda_lora_set_tune(lsim_cuda_lora *L,
                                        const lsim_cuda_lora_tune *t) {
  L->tune = *t;
}

/* ---- adapters ------------------------------------------------------------------------ */

static lsim_err lsim__table_put(lsim_cuda_lora *L, int id, lsim_errbuf *eb) {
  LSIM_CUDA_RET(cudaMemcpy(L->d_table + id, L->h_table + id,
                           sizeof *L->d_table, cudaMemcpyHostToDevice),
                eb);
  /* a pageable copy may still be in flight on return (see lsim_cuda_h2d) */
  LSIM_CUDA_RET(cudaDeviceSynchronize(), eb);
  return 0;
}

extern "C" lsim_err lsim_cuda_lora_unload(lsim_cuda_lora *L, int id,
                                          lsim_errbuf *eb) {
  if (id < 0 || id >= L->cfg.max_adapters)
    return lsim_fail(eb, LSIM_E_USAGE, "adapter id %d outside 0..%d", id,
                     L->cfg.max_adapters - 1);
  if (!L->mem[id])
    return 0;
  LSIM_CUDA_RET(cudaStreamSynchronize(L->stream), eb);
  memset(&L->h_table[id], 0, sizeof L->h_table[id]);
  L->lrank[id] = 0;
  lsim_err rc = lsim__table_put(L, id, eb);
  cudaFree(L->mem[id]);
  L->mem[id] = NULL;
  if (L->used[id])
    L->planned = 0;
  return rc;
}

extern "C" lsim_err lsim_cuda_lora_load(lsim_cuda_lora *L, int id, int rank,
                                        float scale, const uint16_t *A,
                                        const uint16_t *B, lsim_errbuf *eb) {
  lsim_err rc = 0;
  uint16_t *h = NULL;
  void *d = NULL;
  size_t na, nb;
  int rows; /* rank rows stored and computed: rank, or pad_rank */
  if (id < 0 || id >= L->cfg.max_adapters)
    return lsim_fail(eb, LSIM_E_USAGE, "adapter id %d outside 0..%d", id,
                     L->cfg.max_adapters - 1);
  if (rank < 1 || rank > LSIM_CUDA_MAX_RANK)
    return lsim_fail(eb, LSIM_E_USAGE, "adapter %d: rank %d outside 1..%d",
                     id, rank, LSIM_CUDA_MAX_RANK);
  if (!A || !B)
    return lsim_fail(eb, LSIM_E_USAGE, "adapter %d: missing factor", id);
  if (!isfinite(scale))
    return lsim_fail(eb, LSIM_E_USAGE, "adapter %d: scale is not finite",
                     id);
  if (L->cfg.pad_rank > 0 && rank > L->cfg.pad_rank)
    return lsim_fail(eb, LSIM_E_USAGE,
                     "adapter %d: rank %d above the padded slot rank %d", id,
                     rank, L->cfg.pad_rank);
  rows = L->cfg.pad_rank > 0 ? L->cfg.pad_rank : rank;
  na = (size_t)rows * (size_t)L->lda;
  nb = (size_t)rows * (size_t)L->ldb;
  LSIM_CUDA_RET(cudaStreamSynchronize(L->stream), eb);
  h = (uint16_t *)calloc(na + nb, sizeof *h);
  if (!h)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  for (int k = 0; k < rank; k++)
    memcpy(h + (size_t)k * L->lda, A + (size_t)k * L->cfg.d_in,
           (size_t)L->cfg.d_in * sizeof *h);
  for (int o = 0; o < L->cfg.d_out; o++) /* B [d_out][r] -> Bt [r][ldb] */
    for (int k = 0; k < rank; k++)
      h[na + (size_t)k * L->ldb + o] = B[(size_t)o * rank + k];
  if ((rc = lsim_cuda_lora_unload(L, id, eb)))
    goto out;
  LSIM_CUDA_TRY(cudaMalloc(&d, (na + nb) * sizeof *h), eb);
  LSIM_CUDA_TRY(cudaMemcpy(d, h, (na + nb) * sizeof *h,
                           cudaMemcpyHostToDevice),
                eb);
  L->mem[id] = d;
  d = NULL;
  L->h_table[id].A = (const uint16_t *)L->mem[id];
  L->h_table[id].Bt = (const uint16_t *)L->mem[id] + na;
  L->h_table[id].pt = NULL;
  L->h_table[id].rank = rows; /* the rows past rank are zero */
  L->h_table[id].scale = scale;
  L->lrank[id] = rank;
  if ((rc = lsim__table_put(L, id, eb))) {
    memset(&L->h_table[id], 0, sizeof L->h_table[id]);
    L->lrank[id] = 0;
    cudaFree(L->mem[id]);
    L->mem[id] = NULL;
    goto out;
  }
  if (L->used[id])
    L->planned = 0;
out:
  if (d)
    cudaFree(d);
  free(h);
  return rc;
}

/* ---- plans ------------------------------------------------------------------------------ */

/*
** The path chooser (docs/CUDA.md "The path chooser"; numbers from
** docs/BENCHMARKS.md, H200, device time with the L2 flushed).  Two sets of
** measurements set it:
**
** bench_kernels at 4096 x 4096 (one module, large batches): pure decode
** batches (every segment one row) go to the per-row decode kernels --
** decode64 r16 13.4 us against 15.4 fused and 24.5 for the tensor-core
** tiles, r64 31.4 against 34.8 fused.  Once adapters own several rows the
** tensor-core tiles win at rank > 16 (mixed256 r64 35.6 against 47.8 fused
** and 55.7 decode; prefill4096 r16 38.1 against 120 for the CUDA-core
** tiles); at rank <= 16 with segments of at most 8 rows the one-launch
** cluster path does (mixed256 r16 18.6 against 19.1).
**
** The model-shape sweep of `lorasim calibrate` under each path (160
** iteration shapes x 16 modules of the quickstart's q/k/v/o shapes, the
** pool's paged plans): small batches are latency-bound, and there the
** tensor-core tiles' fixed cost loses to everything: 8 decode rows at r64
** over 4 adapters 363 us against 191 fused and 196 decode; one 16-row
** prefill at r8 153 us against 80 decode.  So, for batches of at most 128
** active rows: rank <= 16 -> decode (best, or within 9% of the best, on
** every such shape), rank <= 128 -> fused (best on every r64 shape up to 128
** rows, e.g. 128 decode rows over 16 adapters 385 us against 509 decode and
** 403 tensor-core tiles).  Pure decode at rank > 16 takes fused up to 32
** rows (r64, 8 rows: 180 against 204 decode) and decode above (decode64
** r64 above).  Beyond 128 rows at rank <= 16 the decode kernels stay ahead
** while rows x rank <= 2560 (two 64-row prefills and 32 decodes at r8:
** 118-125 us against 158-232 for the tensor-core tiles; 296 rows at r8
** 166-178 against 162-232; 256 rows at r16 lose, 210 against 170).
**
** Paged plans (the device pool's) are the exception at that last step:
** through the page tables the cluster path loses its edge (mixed256 r16
** paged, four runs: `fused` 20.35-20.86 us against 19.39-19.87 for the
** tensor-core tiles), so they take `sgmv_mma` there.
**
** Ranks above 128 (the tensor-core rank classes end at 128) go to the
** per-row decode kernels or the CUDA-core tiles.  The indexed realizations
** run the same kernels over sorted_rows and cost the same (within 1%) when
** there is no base row; the contiguous-segment metadata is chosen because
** its row list holds no base rows at all.
*/
static int lsim__choose(const lsim_rowplan *p, int rmax, int paged) {
  int maxseg = 0;
  const int n = p->nactive;
  if (n == 0)
    return LSIM_CUDA_PATH_SGMV;
  for (int t = 0; t < p->nseg; t++) {
    int len = p->seg_offsets[t + 1] - p->seg_offsets[t];
    if (len > maxseg)
      maxseg = len;
  }
  if (rmax > 128)
    return maxseg == 1 ? LSIM_CUDA_PATH_DECODE : LSIM_CUDA_PATH_SGMV;
  if (maxseg == 1)
    return rmax > 16 && n <= 32 ? LSIM_CUDA_PATH_FUSED : LSIM_CUDA_PATH_DECODE;
  if (n <= 128)
    return rmax <= 16 ? LSIM_CUDA_PATH_DECODE : LSIM_CUDA_PATH_FUSED;
  if (rmax <= 16 && (int64_t)n * rmax <= 2560)
    return LSIM_CUDA_PATH_DECODE;
  if (maxseg <= 8 && rmax <= 16 && !paged)
    return LSIM_CUDA_PATH_FUSED;
  return LSIM_CUDA_PATH_SGMV_MMA;
}

extern "C" int lsim_cuda_choose_path(const lsim_rowplan *p, int rmax,
                                     int paged) {
  return lsim__choose(p, rmax, paged);
}

static size_t lsim__al4(size_t n) { return (n + 3) & ~(size_t)3; }

/* Mean active rows per tile. */
static int nactive_tiles_rows(const lsim_rowplan *p, int ntiles) {
  return ntiles > 0 ? p->nactive / ntiles : 0;
}

static int lsim__cdiv(int a, int b) { return (a + b - 1) / b; }

/* The SM count the grid rules size for: tune.sms when set (the SMs a
** concurrent base GEMM leaves the branch), else the device's. */
static int lsim__sms(const lsim_cuda_lora *L) {
  return L->tune.sms > 0 && L->tune.sms < L->sms ? L->tune.sms : L->sms;
}

/* Where a paged plan's factor rows live (lsim_cuda_lora_plan_paged). */
struct lsim__paged_src {
  const void *pool;
  int64_t H;
  const lsim_cuda_paged_ref *ent; /* [nlayers][nent] */
  int nent;
  int nlayers; /* >= 1 */
};

/* The split-K scratch both one-pass GEMMs share: np float partials and a
** zeroed arrival counter per column tile (ct), grown, never shrunk.  Freeing
** a buffer synchronizes with launches still using it; the counters are
** zeroed once here and reset by the kernels' last blocks. */
static lsim_err lsim__split_scratch(lsim_cuda_lora *L, size_t np, int ct,
                                    lsim_errbuf *eb) {
  if (np > L->gpart_cap) {
    if (L->gpart)
      cudaFree(L->gpart);
    L->gpart = NULL;
    L->gpart_cap = 0;
    LSIM_CUDA_RET(cudaMalloc((void **)&L->gpart, np * sizeof(float)), eb);
    L->gpart_cap = np;
  }
  if (ct > L->gcount_cap) {
    if (L->gcount)
      cudaFree(L->gcount);
    L->gcount = NULL;
    L->gcount_cap = 0;
    LSIM_CUDA_RET(cudaMalloc((void **)&L->gcount, (size_t)ct * sizeof(int)),
                  eb);
    LSIM_CUDA_RET(cudaMemset(L->gcount, 0, (size_t)ct * sizeof(int)), eb);
    LSIM_CUDA_RET(cudaDeviceSynchronize(), eb);
    L->gcount_cap = ct;
  }
  return 0;
}

/*
** The one-pass GEMM's launch geometry for a plan of T rows (its epilogue
** tiles are in h_meta): rows per block (the smallest of 64, 128, 256 that
** holds T, or the tune's), blocks per cluster (the tune's, else doubled
** while the grid stays under about one wave -- two blocks per SM at 64
** rows -- and each block keeps at least 256 columns of K), the K range per
** block, the t positions a block stages, and the shared memory.
*/
static lsim_err lsim__gemm_geometry(lsim_cuda_lora *L, int T, int rmax,
                                    lsim_errbuf *eb) {
  const int N = L->cfg.d_out, K = L->cfg.d_in;
  const int fit = T <= 64 ? 64 : T <= 128 ? 128 : 256;
  int bm = L->tune.gemm_bm, cs = L->tune.gemm_cs, tpos = 0;
  if ((bm != 64 && bm != 128 && bm != 256) || bm < T)
    bm = fit;
  const int ct = lsim__cdiv(N, LSIM__GEMM_BN), occ = bm == 64 ? 2 : 1;
  if (cs < 1 || cs > LSIM__GEMM_MAXCS)
    for (cs = 1; cs < LSIM__GEMM_MAXCS && ct * cs * 2 <= occ * L->sms + ct &&
                 K / (2 * cs) >= 256;
         cs *= 2)
      ;
  /* t positions a block stages; with few K ranges, many rows and high
  ** ranks they may not fit shared memory: then more K ranges (a range
  ** past K only contributes zeros), so each block stages fewer rows */
  const int *et = L->h_meta + L->o_etiles;
  for (;;) {
    tpos = 0;
    for (int c = 0; c < cs; c++) {
      const int t0 = (int)((int64_t)L->netiles * c / cs);
      const int t1 = (int)((int64_t)L->netiles * (c + 1) / cs);
      if (t1 > t0) {
        const int n =
            et[4 * (t1 - 1) + 1] + et[4 * (t1 - 1) + 2] - et[4 * t0 + 1];
        if (n > tpos)
          tpos = n;
      }
    }
    if (cs >= LSIM__GEMM_MAXCS ||
        lsim__gemm_smem(bm, tpos, L->args.ws_ld) <= LSIM__GEMM_MAXSMEM)
      break;
    cs = cs * 2 > LSIM__GEMM_MAXCS ? LSIM__GEMM_MAXCS : cs * 2;
  }
  L->gemm_bm = bm;
  L->gemm_cs = cs;
  L->gemm_klen = lsim__cdiv(lsim__cdiv(K, cs), 64) * 64;
  L->gemm_tpos = tpos;
  L->gemm_T = T;
  L->gemm_smem = lsim__gemm_smem(bm, tpos, L->args.ws_ld);
  if (rmax > LSIM__GEMM_MAXR) {
    L->gemm_ok = 0;
    L->gemm_why = "a rank above 128";
    return 0;
  }
  if (L->gemm_smem > LSIM__GEMM_MAXSMEM) {
    L->gemm_ok = 0;
    L->gemm_why = "the epilogue does not fit shared memory";
    return 0;
  }
  if (cs > 1) {
    lsim_err rc = lsim__split_scratch(
        L, (size_t)ct * (size_t)cs * (size_t)bm * LSIM__GEMM_BN, ct, eb);
    if (rc)
      return rc;
  }
  return 0;
}

/*
** The streaming one-pass GEMM's geometry (wgemm.cuh): rows per block (64,
** 128 or 256, the smallest that holds T), K ranges (the tune's, else
** doubled while the grid stays within one block per SM and each range
** keeps at least four 64-column slices of K), stages (the tune's, else
** as many as fit beside the T' staging, at most 8), and the partial slots.
*/
static lsim_err lsim__wg_geometry(lsim_cuda_lora *L, int T, int rmax,
                                  lsim_errbuf *eb) {
  const int N = L->cfg.d_out, K = L->cfg.d_in;
  const int ct = lsim__cdiv(N, LSIM__WG_BN), nkb = lsim__cdiv(K, 64);
  int cs = L->tune.gemm_cs, ns;
  L->wg_ok = 0;
  L->wg_why = L->gemm_why;
  if (!L->gemm_ok)
    return 0;
  if (!lsim__wg_available()) {
    L->wg_why = "no tensor-map encoder in the driver";
    return 0;
  }
  if (L->args.ldb & 7) {
    L->wg_why = "factor rows not 16-byte aligned";
    return 0;
  }
  L->wg_bm = T <= 64 ? 64 : T <= 128 ? 128 : 256;
  if (cs < 1 || cs > LSIM__WG_MAXCS)
    for (cs = 1; cs < LSIM__WG_MAXCS && ct * cs * 2 <= L->sms &&
                 nkb / (2 * cs) >= 4;
         cs *= 2)
      ;
  L->wg_cs = cs;
  L->wg_kblen = lsim__cdiv(nkb, cs);
  L->wg_tcld = rmax < 2 ? 2 : (rmax + 1) & ~1;
  ns = lsim__wg_max_stages(L->wg_bm, L->wg_tcld, L->wg_nseg);
  if (L->tune.gemm_ns >= 2 && L->tune.gemm_ns < ns)
    ns = L->tune.gemm_ns;
  if (ns < 2) {
    L->wg_why = "the staging does not fit shared memory";
    return 0;
  }
  L->wg_ns = ns;
  if (cs > 1) {
    lsim_err rc = lsim__split_scratch(
        L, (size_t)ct * (size_t)cs * (size_t)L->wg_bm * LSIM__WG_BN, ct, eb);
    if (rc)
      return rc;
  }
  L->wg_ok = 1;
  return 0;
}

/* The tensor-core expand's balanced order (tune expand_order; eorder.h).
** Its blocks are (tile, column block) pairs whose bytes differ with the
** tile's rank and rows: at mixed256 a rank-64 tile's block reads four
** times the Bt bytes of a rank-16 one.  With the grid (tiles, column
** blocks), blocks b, b + sms, b + 2 sms, ... land on one SM in the first
** waves, and the tiles' ranks repeat with the adapters' order, so some
** SMs got only high-rank blocks and set the launch's length.  out: 2 ints
** per block; the grid's own order when the order cannot be made. */
static void lsim__expand_order(const lsim_cuda_lora *L,
                               const lsim__paged_src *pg, const int *tiles,
                               int ntiles, const int *offsets, const int *gad,
                               int cc, int len, int rsplit, int *out) {
  const int ny = cc * (rsplit ? 4 : 1), n = ntiles * ny;
  int *rk = (int *)malloc(2 * (size_t)ntiles * sizeof *rk), *rows = rk + ntiles;
  int done = -1;
  if (rk) {
    for (int k = 0; k < ntiles; k++) {
      const int g = tiles[2 * k], j = tiles[2 * k + 1], id = gad[g];
      rows[k] = offsets[g + 1] - j < LSIM__MMA_MT ? offsets[g + 1] - j
                                                  : LSIM__MMA_MT;
      rk[k] = pg ? pg->ent[id].rank : L->h_table[id].rank;
    }
    done = lsim_cuda_expand_order(ntiles, rk, rows, ny, len, rsplit,
                                  L->cfg.d_out, LSIM__MMA_KC, lsim__sms(L),
                                  out);
    free(rk);
  }
  if (done < 0) /* correct, only unbalanced */
    for (int b = 0; b < n; b++) {
      out[2 * b] = b % ntiles;
      out[2 * b + 1] = b / ntiles;
    }
}

static lsim_err lsim__plan(lsim_cuda_lora *L, const lsim_rowplan *p, int path,
                           const lsim__paged_src *pg, lsim_errbuf *eb) {
  lsim_err rc;
  int rmax = 0, kind, mt, nlist, ngroups, ntiles = 0, decode;
  const int *list, *offsets, *gad;
  size_t o_tab, o_tiles, o_list, o_off, o_gad, o_radp, need;
  int splits, split_len, nb, full, netiles, ersplit = 0;
  size_t wsn;

  if (!p)
    return lsim_fail(eb, LSIM_E_USAGE, "lora plan: no plan");
  if (path < 0 || path >= LSIM_CUDA_PATH__COUNT)
    return lsim_fail(eb, LSIM_E_USAGE, "lora plan: unknown path %d", path);
  if ((rc = lsim_rowplan_validate(p, eb)))
    return rc;
  L->planned = 0;
  memset(L->used, 0, (size_t)L->cfg.max_adapters);
  for (int t = 0; t < p->nseg; t++) {
    int id = p->seg_adapter[t], have, rk;
    if (pg) {
      if (id < 0 || id >= pg->nent || !pg->ent[id].ptab)
        return lsim_fail(eb, LSIM_E_REF_UNKNOWN_ADAPTER,
                         "adapter %d of segment %d has no page table", id, t);
      for (int l = 1; l < pg->nlayers; l++) {
        const lsim_cuda_paged_ref *e = &pg->ent[(size_t)l * pg->nent + id];
        if (!e->ptab || e->rank != pg->ent[id].rank)
          return lsim_fail(eb, LSIM_E_REF_UNKNOWN_ADAPTER,
                           "adapter %d of segment %d: layer %d has no page "
                           "table of rank %d", id, t, l, pg->ent[id].rank);
      }
      have = pg->ent[id].rank;
      rk = have;
      if (have < 1 || have > LSIM_CUDA_MAX_RANK)
        return lsim_fail(eb, LSIM_E_USAGE,
                         "adapter %d: paged rank %d outside 1..%d", id, have,
                         LSIM_CUDA_MAX_RANK);
    } else {
      if (id < 0 || id >= L->cfg.max_adapters || L->lrank[id] == 0)
        return lsim_fail(eb, LSIM_E_REF_UNKNOWN_ADAPTER,
                         "adapter %d of segment %d is not resident", id, t);
      have = L->lrank[id];
      rk = L->h_table[id].rank; /* pad_rank in the padded layout */
    }
    if (have != p->seg_rank[t])
      return lsim_fail(eb, LSIM_E_REF_RANK,
                       "adapter %d is resident at rank %d, the plan says %d",
                       id, have, p->seg_rank[t]);
    if (rk > rmax)
      rmax = rk;
  }
  if (path == LSIM_CUDA_PATH_AUTO)
    path = lsim__choose(p, rmax, pg != NULL);
  if ((path == LSIM_CUDA_PATH_SGMV_MMA || path == LSIM_CUDA_PATH_INDEXED_MMA) &&
      rmax > 128)
    return lsim_fail(eb, LSIM_E_USAGE,
                     "path %s takes ranks up to 128, the plan has %d",
                     lsim_cuda_path_name(path), rmax);

  decode = path == LSIM_CUDA_PATH_DECODE;
  kind = decode ? LSIM__KIND_DECODE
         : (path == LSIM_CUDA_PATH_SGMV_MMA ||
            path == LSIM_CUDA_PATH_INDEXED_MMA)
             ? LSIM__KIND_MMA
         : path == LSIM_CUDA_PATH_FUSED ? LSIM__KIND_FUSED
                                        : LSIM__KIND_SIMT;
  mt = kind == LSIM__KIND_MMA ? LSIM__MMA_MT : kind == LSIM__KIND_SIMT
                                                   ? LSIM__SIMT_MT
                                                   : 1;
  if (kind == LSIM__KIND_FUSED) {
    /* rows per tile: the tune's, else the smallest power of two that
    ** holds the longest segment, at most 8 */
    int ft = L->tune.fused_mt, maxseg = 1;
    for (int t = 0; t < p->nseg; t++)
      if (p->seg_offsets[t + 1] - p->seg_offsets[t] > maxseg)
        maxseg = p->seg_offsets[t + 1] - p->seg_offsets[t];
    if (ft != 1 && ft != 2 && ft != 4 && ft != 8)
      for (ft = 1; ft < 2 && ft < maxseg; ft *= 2)
        ;
    mt = ft;
  }
  if (path == LSIM_CUDA_PATH_INDEXED || path == LSIM_CUDA_PATH_INDEXED_MMA) {
    list = p->sorted_rows;
    nlist = p->T;
    offsets = p->id_starts;
    gad = p->active_ids;
    ngroups = p->nids;
  } else {
    list = p->perm;
    nlist = p->nactive;
    offsets = p->seg_offsets;
    gad = p->seg_adapter;
    ngroups = p->nseg;
  }
  if (decode)
    ntiles = p->nactive;
  else
    for (int g = 0; g < ngroups; g++)
      ntiles += lsim__cdiv(offsets[g + 1] - offsets[g], mt);

  /* the tensor-core kind's rank rule and expand geometry, before the
  ** metadata (the balanced order's block list lives there) */
  int mma_rule = 0, e_cc = 1, e_len = 0, e_n = 0;
  full = 0;
  if (kind == LSIM__KIND_MMA) {
    int rmin = rmax;
    for (int t = 0; t < p->nseg; t++)
      if (p->seg_rank[t] < rmin)
        rmin = p->seg_rank[t];
    const int rc0 = lsim__rank_class(rmax > 128 ? 128 : rmax);
    full = nactive_tiles_rows(p, ntiles) >= 32;
    mma_rule = !full && rc0 >= 32 && pg == NULL && L->cfg.pad_rank == 0 &&
               lsim__rank_class(rmin) < rc0;
    /* the expand's rank split: a tile's column ranges over ceil(r / 16)
    ** blocks (at most 4), tune expand_rsplit: off by default (it lost
    ** where measured, docs/BENCHMARKS.md, issue 23), 1 by the rule of
    ** the shrink's split, 2 always */
    const int er = L->tune.expand_rsplit;
    ersplit = er == 2 || (er == 1 && mma_rule);
    if (L->tune.expand_cols > 0) {
      e_cc = L->tune.expand_cols;
    } else {
      e_cc = ntiles > 0 ? (4 * lsim__sms(L)) / ntiles : 1;
      if (e_cc < 1)
        e_cc = 1;
    }
    e_len = lsim__cdiv(lsim__cdiv(L->cfg.d_out, e_cc), 64) * 64;
    e_cc = lsim__cdiv(L->cfg.d_out, e_len);
    /* the balanced order: 1 where the tiles' ranks differ, 2 always */
    const int eo = L->tune.expand_order;
    if (ntiles > 0 && (eo == 2 || (eo == 1 && rmin != rmax)))
      e_n = ntiles * e_cc * (ersplit ? 4 : 1);
  }

  /* one metadata buffer: the paged plan's adapter table, tiles, list,
  ** offsets, group adapters, row adapters */
  o_tab = 0;
  o_tiles = o_tab + (pg ? lsim__al4((size_t)pg->nlayers * (size_t)pg->nent *
                                    (sizeof(lsim__adapter_dev) / sizeof(int)))
                        : 0);
  o_list = o_tiles + lsim__al4(decode ? 0 : 2 * (size_t)ntiles);
  o_off = o_list + lsim__al4((size_t)nlist);
  o_gad = o_off + lsim__al4((size_t)ngroups + 1);
  o_radp = o_gad + lsim__al4((size_t)ngroups);
  need = o_radp + lsim__al4(decode ? (size_t)p->T : 0);
  /* the one-pass GEMM's epilogue rows and tiles (lgemm.cuh): every row of
  ** the plan, the active ones in list order (so that an index is also the
  ** workspace row), then the base rows; tiles of up to EMT rows of one
  ** adapter (-1: base) */
  L->gemm_ok = 0;
  L->gemm_why = "the plan has more than 256 rows";
  netiles = 0;
  if (list != p->perm)
    L->gemm_why = "the path's row list is not perm (indexed paths)";
  else if (kind == LSIM__KIND_FUSED)
    L->gemm_why = "the fused path has no separate shrink";
  else if (p->T >= 1 && p->T <= LSIM__GEMM_MAXM) {
    for (int g = 0; g < ngroups; g++)
      netiles += lsim__cdiv(offsets[g + 1] - offsets[g], LSIM__GEMM_EMT);
    netiles += lsim__cdiv(p->T - p->nactive, LSIM__GEMM_EMT);
    L->gemm_ok = 1;
  }
  L->o_erows = need;
  L->o_etiles = L->o_erows + lsim__al4(L->gemm_ok ? (size_t)p->T : 0);
  need = L->o_etiles + (L->gemm_ok ? 4 * (size_t)netiles : 0);
  L->o_wsegs = need;
  L->o_wsrank = L->o_wsegs + (L->gemm_ok ? 4 * (size_t)ngroups : 0);
  need = L->o_wsrank + lsim__al4(L->gemm_ok ? (size_t)ngroups : 0);
  const size_t o_eitems = need;
  need = o_eitems + 2 * (size_t)e_n;
  if (need < 4)
    need = 4;

  if (L->meta_pending) {
    LSIM_CUDA_RET(cudaEventSynchronize(L->meta_done), eb);
    L->meta_pending = 0;
  }
  if (need > L->meta_cap) {
    size_t cap = need + need / 2;
    if (L->h_meta)
      cudaFreeHost(L->h_meta);
    if (L->d_meta)
      cudaFree(L->d_meta); /* synchronizes with the launches using it */
    L->h_meta = NULL;
    L->d_meta = NULL;
    L->meta_cap = 0;
    LSIM_CUDA_RET(cudaMallocHost((void **)&L->h_meta, cap * sizeof(int)), eb);
    LSIM_CUDA_RET(cudaMalloc((void **)&L->d_meta, cap * sizeof(int)), eb);
    L->meta_cap = cap;
  }
  {
    int *h = L->h_meta;
    memset(h, 0, need * sizeof(int));
    if (pg) {
      lsim__adapter_dev *tb = (lsim__adapter_dev *)(h + o_tab);
      const size_t ne = (size_t)pg->nlayers * (size_t)pg->nent;
      for (size_t id = 0; id < ne; id++)
        if (pg->ent[id].ptab) {
          tb[id].A = (const uint16_t *)pg->pool;
          tb[id].Bt = (const uint16_t *)pg->pool;
          tb[id].pt = pg->ent[id].ptab;
          tb[id].rank = pg->ent[id].rank;
          tb[id].scale = pg->ent[id].scale;
        }
    }
    if (!decode) {
      int k = 0;
      for (int g = 0; g < ngroups; g++)
        for (int j = offsets[g]; j < offsets[g + 1]; j += mt) {
          h[o_tiles + 2 * (size_t)k] = g;
          h[o_tiles + 2 * (size_t)k + 1] = j;
          k++;
        }
    }
    if (e_n > 0)
      lsim__expand_order(L, pg, h + o_tiles, ntiles, offsets, gad, e_cc,
                         e_len, ersplit, h + o_eitems);
    memcpy(h + o_list, list, (size_t)nlist * sizeof(int));
    memcpy(h + o_off, offsets, ((size_t)ngroups + 1) * sizeof(int));
    memcpy(h + o_gad, gad, (size_t)ngroups * sizeof(int));
    if (decode)
      memcpy(h + o_radp, p->row_adapter, (size_t)p->T * sizeof(int));
    if (L->gemm_ok) {
      int *er = h + L->o_erows, *et = h + L->o_etiles, ne = 0, k = 0;
      memcpy(er, p->perm, (size_t)p->nactive * sizeof(int));
      for (int g = 0; g < ngroups; g++)
        for (int j = offsets[g]; j < offsets[g + 1]; j += LSIM__GEMM_EMT) {
          et[4 * ne] = gad[g];
          et[4 * ne + 1] = j;
          et[4 * ne + 2] = offsets[g + 1] - j < LSIM__GEMM_EMT
                               ? offsets[g + 1] - j
                               : LSIM__GEMM_EMT;
          ne++;
        }
      k = p->nactive;
      for (int row = 0; row < p->T; row++)
        if (p->row_adapter[row] == LSIM_BASE)
          er[k++] = row;
      for (int j = p->nactive; j < p->T; j += LSIM__GEMM_EMT) {
        et[4 * ne] = -1;
        et[4 * ne + 1] = j;
        et[4 * ne + 2] = p->T - j < LSIM__GEMM_EMT ? p->T - j
                                                   : LSIM__GEMM_EMT;
        ne++;
      }
      L->netiles = ne;
      /* the streaming GEMM's segments: each group's ranks side by side
      ** along K' (wgemm.cuh) */
      int *ws4 = h + L->o_wsegs, *wr = h + L->o_wsrank, koff = 0;
      for (int g = 0; g < ngroups; g++) {
        const int id = gad[g];
        const int rk = pg ? pg->ent[id].rank : L->h_table[id].rank;
        ws4[4 * g] = id;
        ws4[4 * g + 1] = offsets[g];
        ws4[4 * g + 2] = offsets[g + 1];
        ws4[4 * g + 3] = koff;
        wr[g] = rk;
        koff += rk;
      }
      L->wg_nseg = ngroups;
      L->wg_ktot = koff;
    }
  }
  LSIM_CUDA_RET(cudaMemcpyAsync(L->d_meta, L->h_meta, need * sizeof(int),
                                cudaMemcpyHostToDevice, L->stream),
                eb);
  LSIM_CUDA_RET(cudaEventRecord(L->meta_done, L->stream), eb);
  L->meta_pending = 1;

  /* launch geometry */
  L->rc = lsim__rank_class(rmax > 128 ? 128 : rmax);
  L->src = L->rc;
  if (kind == LSIM__KIND_FUSED) {
    /* blocks per cluster: the tune's, else double while the grid stays
    ** within about four blocks per SM and each block keeps at least 256
    ** columns of d_in (one 16-byte vector per lane) */
    int cs = L->tune.fused_cs;
    if (cs < 1 || cs > LSIM__FUSED_MAXCS)
      for (cs = 1; cs < LSIM__FUSED_MAXCS && ntiles * cs * 2 <= 2 * lsim__sms(L) &&
                   cs * 2 * 256 <= L->cfg.d_in;
           cs *= 2)
        ;
    splits = cs;
    split_len = lsim__round8(lsim__cdiv(L->cfg.d_in, cs));
  } else {
  nb = kind == LSIM__KIND_MMA ? ntiles
                              : ntiles * lsim__cdiv(rmax, LSIM__SIMT_KR);
  /* the rank split (tensor-core shrink): for a batch of short tiles whose
  ** ranks fall in different rank classes, every block computes 16 rank
  ** columns (a rank-64 tile is four blocks), so the blocks of the highest
  ** rank no longer set the launch's length (issue 23; measured in
  ** docs/BENCHMARKS.md); tune shrink_rsplit 1 never, 2 always */
  if (kind == LSIM__KIND_MMA) {
    const int rc0 = lsim__rank_class(rmax > 128 ? 128 : rmax);
    const int rs = L->tune.shrink_rsplit;
    if (rs == 2 || (rs != 1 && mma_rule)) {
      L->src = 16;
      nb = ntiles * (rc0 / 16);
    }
  }
  if (L->tune.shrink_splits > 0) {
    splits = L->tune.shrink_splits;
  } else {
    /* about two blocks per SM, at most d_in / 1024 ranges; full
    ** tensor-core tiles at rank class >= 64 take half as many (measured:
    ** prefill4096 r64 52 us at 2 ranges, 76 at 4; r16 and r30 best at 4) */
    int most = kind == LSIM__KIND_MMA && full && lsim__rank_class(rmax) >= 64
                   ? L->cfg.d_in / 2048
                   : L->cfg.d_in / 1024;
    splits = nb > 0 ? (2 * lsim__sms(L)) / nb : 1;
    if (splits > most)
      splits = most;
    if (splits < 1)
      splits = 1;
  }
  split_len = lsim__cdiv(lsim__cdiv(L->cfg.d_in, splits), 64) * 64;
  splits = lsim__cdiv(L->cfg.d_in, split_len);
  }
  if (splits > 65535)
    return lsim_fail(eb, LSIM_E_USAGE, "lora plan: %d d_in splits", splits);

  {
    int ws_ld = rmax < 2 ? 2 : (rmax + 1) & ~1;
    wsn = (size_t)splits * (size_t)(nlist > 0 ? nlist : 1) * (size_t)ws_ld;
    if (wsn > L->ws_cap) {
      if (L->ws)
        cudaFree(L->ws);
      L->ws = NULL;
      L->ws_cap = 0;
      LSIM_CUDA_RET(cudaMalloc((void **)&L->ws, wsn * sizeof(float)), eb);
      L->ws_cap = wsn;
    }
    lsim__lora_args *a = &L->args;
    memset(a, 0, sizeof *a);
    a->tiles = decode ? NULL : (const int2 *)(L->d_meta + o_tiles);
    a->list = L->d_meta + o_list;
    a->offsets = L->d_meta + o_off;
    a->group_adapter = L->d_meta + o_gad;
    a->row_adapter = decode ? L->d_meta + o_radp : NULL;
    a->ntiles = ntiles;
    a->nlist = nlist;
    a->table = pg ? (const lsim__adapter_dev *)(L->d_meta + o_tab)
                  : L->d_table;
    a->table_n = pg ? pg->nent : L->cfg.max_adapters;
    a->lda = pg ? (int)pg->H : L->lda;
    a->ldb = pg ? (int)pg->H : L->ldb;
    a->paged = pg != NULL;
    a->d_in = L->cfg.d_in;
    a->d_out = L->cfg.d_out;
    a->ws = L->ws;
    a->ws_ld = ws_ld;
    a->splits = splits;
    a->split_len = split_len;
    if (kind == LSIM__KIND_FUSED) {
      /* the cluster's blocks: one d_in range and one d_out range each */
      a->col_len = lsim__round8(lsim__cdiv(L->cfg.d_out, splits));
      L->fused_mt = mt;
      L->fused_cs = splits;
      L->fused_smem = lsim__fused_smem(mt, ws_ld);
      a->fused_flags = (L->tune.fused_prefetch ? 1 : 0) |
                       (L->tune.fused_preload ? 2 : 0);
      L->g_shrink = dim3((unsigned)ntiles * (unsigned)splits, 1, 1);
      L->g_expand = dim3(0, 0, 0);
      L->simt_smem = 0;
    } else if (kind == LSIM__KIND_MMA) {
      a->col_len = e_len;
      a->col_rsplit = ersplit;
      L->g_shrink = dim3((unsigned)ntiles, (unsigned)(L->rc / L->src),
                         (unsigned)splits);
      if (e_n > 0) {
        a->eitems = (const int2 *)(L->d_meta + o_eitems);
        L->g_expand = dim3((unsigned)e_n, 1, 1);
      } else {
        L->g_expand =
            dim3((unsigned)ntiles, (unsigned)e_cc * (ersplit ? 4u : 1u), 1);
      }
      L->simt_smem = 0;
    } else {
      a->col_len = LSIM__EXP_COLS;
      L->g_shrink = dim3((unsigned)ntiles,
                         (unsigned)lsim__cdiv(rmax > 0 ? rmax : 1,
                                              LSIM__SIMT_KR),
                         (unsigned)splits);
      L->g_expand = dim3((unsigned)ntiles,
                         (unsigned)lsim__cdiv(L->cfg.d_out, LSIM__EXP_COLS), 1);
      L->simt_smem = (size_t)mt * (size_t)ws_ld * sizeof(float);
    }
  }
  if (L->gemm_ok && (rc = lsim__gemm_geometry(L, p->T, rmax, eb)))
    return rc;
  if ((rc = lsim__wg_geometry(L, p->T, rmax, eb)))
    return rc;
  /* programmatic dependent launch: on by default (measured with the split
  ** rule above it gains 1 to 2 us on every workload; with 4 ranges at rank
  ** class 64 prefill4096 lost 20 us with it, which the rule avoids) */
  L->pdl = L->tune.pdl < 0 ? 1 : L->tune.pdl;
  if (!pg)
    for (int t = 0; t < p->nseg; t++)
      L->used[p->seg_adapter[t]] = 1;
  L->path = path;
  L->paged = pg != NULL;
  L->nlayers = pg ? pg->nlayers : 1;
  L->table0 = L->args.table;
  L->kind = kind;
  L->nactive = p->nactive;
  L->planned = 1;
  return 0;
}

extern "C" lsim_err lsim_cuda_lora_plan(lsim_cuda_lora *L,
                                        const lsim_rowplan *p, int path,
                                        lsim_errbuf *eb) {
  return lsim__plan(L, p, path, NULL, eb);
}

extern "C" lsim_err lsim_cuda_lora_plan_paged(
    lsim_cuda_lora *L, const lsim_rowplan *p, int path, const void *pool,
    int64_t page_elems, const lsim_cuda_paged_ref *ent, int nent,
    lsim_errbuf *eb) {
  if (!L || L->cfg.pad_rank > 0)
    return lsim_fail(eb, LSIM_E_USAGE,
                     "lora plan paged: the context stores padded slots");
  if (!pool || ((uintptr_t)pool & 15) || page_elems < 8 ||
      (page_elems & 7) || page_elems > (1 << 24) ||
      page_elems < lsim__round8(L->cfg.d_in) ||
      page_elems < lsim__round8(L->cfg.d_out) || !ent || nent < 1 ||
      nent > (1 << 24))
    return lsim_fail(eb, LSIM_E_USAGE,
                     "lora plan paged: bad pool geometry (pool 16-byte "
                     "aligned, page of %lld elements: a multiple of 8 that "
                     "holds d_in %d and d_out %d; %d entries)",
                     (long long)page_elems, L->cfg.d_in, L->cfg.d_out, nent);
  lsim__paged_src pg = {pool, page_elems, ent, nent, 1};
  return lsim__plan(L, p, path, &pg, eb);
}

extern "C" lsim_err lsim_cuda_lora_plan_layers(
    lsim_cuda_lora *L, const lsim_rowplan *p, int path, const void *base,
    int64_t unit_elems, const lsim_cuda_paged_ref *ent, int nent,
    int nlayers, lsim_errbuf *eb) {
  if (!L || L->cfg.pad_rank > 0)
    return lsim_fail(eb, LSIM_E_USAGE,
                     "lora plan layers: the context stores padded slots");
  /* rows are addressed as base + ptab[k] * unit: the unit is an address
  ** step, not a row width, so it need not hold d_in or d_out */
  if (!base || ((uintptr_t)base & 15) || unit_elems < 8 || (unit_elems & 7) ||
      unit_elems > (1 << 24) || !ent || nent < 1 || nent > (1 << 24) ||
      nlayers < 1 || nlayers > 4096)
    return lsim_fail(eb, LSIM_E_USAGE,
                     "lora plan layers: bad geometry (base 16-byte aligned, "
                     "unit of %lld elements a multiple of 8, %d entries, %d "
                     "layers)", (long long)unit_elems, nent, nlayers);
  lsim__paged_src pg = {base, unit_elems, ent, nent, nlayers};
  return lsim__plan(L, p, path, &pg, eb);
}

extern "C" lsim_err lsim_cuda_lora_run_layer(lsim_cuda_lora *L, int layer,
                                             const void *X, int ldx, void *Y,
                                             int ldy, lsim_errbuf *eb) {
  if (!L || !L->planned)
    return lsim_fail(eb, LSIM_E_STATE, "lora run: no prepared plan");
  if (layer < 0 || layer >= L->nlayers)
    return lsim_fail(eb, LSIM_E_USAGE,
                     "lora run: layer %d of a plan of %d layers", layer,
                     L->nlayers);
  /* kernel arguments travel by value at each launch: the layer's table is
  ** just another pointer into the plan's one metadata buffer */
  L->args.table = L->table0 + (size_t)layer * (size_t)L->args.table_n;
  lsim_err rc = lsim_cuda_lora_run(L, X, ldx, Y, ldy, eb);
  L->args.table = L->table0;
  return rc;
}

extern "C" int lsim_cuda_lora_path(const lsim_cuda_lora *L) {
  return L ? L->path : -1;
}

extern "C" void lsim_cuda_lora_describe(const lsim_cuda_lora *L, char *buf,
                                        size_t n) {
  if (!L || L->path < 0) {
    snprintf(buf, n, "no plan");
    return;
  }
  if (L->kind == LSIM__KIND_FUSED) {
    snprintf(buf, n,
             "fused: %d tiles of <= %d rows x cluster %d (d_in %d, d_out %d "
             "cols per block), %u blocks, one launch, flags %d (1 prefetch, "
             "2 preload), %zu B shared%s",
             L->args.ntiles, L->fused_mt, L->fused_cs, L->args.split_len,
             L->args.col_len, L->g_shrink.x, L->args.fused_flags,
             L->fused_smem,
             L->paged ? ", paged" : L->cfg.pad_rank > 0 ? ", padded slots"
                                                        : "");
    return;
  }
  int k = snprintf(buf, n,
                   "%s: shrink %ux%ux%u (splits %d x %d cols), expand %ux%u "
                   "(%d cols), rank class %d, pdl %d, split_t %d",
                   lsim_cuda_path_name(L->path), L->g_shrink.x,
                   L->g_shrink.y, L->g_shrink.z, L->args.splits,
                   L->args.split_len, L->g_expand.x, L->g_expand.y,
                   L->args.col_len, L->rc, L->pdl, L->tune.split_t);
  if (k > 0 && (size_t)k < n && (L->paged || L->cfg.pad_rank > 0))
    snprintf(buf + k, n - (size_t)k, L->paged ? ", paged (page %d)"
                                              : ", padded slots (rank %d)",
             L->paged ? L->args.lda : L->cfg.pad_rank);
}

extern "C" lsim_err lsim_cuda_lora_run(lsim_cuda_lora *L, const void *X,
                                       int ldx, void *Y, int ldy,
                                       lsim_errbuf *eb) {
  cudaError_t e;
  if (!L || !L->planned)
    return lsim_fail(eb, LSIM_E_STATE, "lora run: no prepared plan");
  if (!X || !Y || ((uintptr_t)X & 15) || ((uintptr_t)Y & 15) ||
      ldx < L->cfg.d_in || ldy < L->cfg.d_out || (ldx & 7) || (ldy & 7))
    return lsim_fail(eb, LSIM_E_USAGE,
                     "lora run: X and Y must be 16-byte aligned with strides "
                     ">= d_in/d_out in multiples of 8 (ldx %d, ldy %d)",
                     ldx, ldy);
  if (L->nactive == 0)
    return 0;
  L->args.X = (const uint16_t *)X;
  L->args.Y = (uint16_t *)Y;
  L->args.ldx = ldx;
  L->args.ldy = ldy;
  if (L->kind == LSIM__KIND_FUSED) {
    e = lsim__fused_launch(L->cfg.dtype, L->fused_mt, L->fused_cs, L->args,
                           (unsigned)L->args.ntiles, L->fused_smem,
                           L->stream);
    if (e != cudaSuccess)
      return lsim_fail(eb, LSIM_E_BACKEND, "cuda: fused launch: %s",
                       cudaGetErrorString(e));
    return 0;
  }
  /* only 4: the shrink as a programmatic dependent of the launch before it
  ** (the base GEMM), completing only after it; the expand as usual after
  ** the shrink but reading Y only after its wait */
  L->args.shrink_pdl = L->tune.only == 4;
  L->args.y_late = L->tune.only == 3 || L->tune.only == 4;
  if (L->tune.only != 2 && L->tune.only != 3) {
    e = lsim__shrink_launch(L->cfg.dtype, L->kind, L->src, L->args,
                            L->g_shrink, L->stream);
    if (e != cudaSuccess)
      return lsim_fail(eb, LSIM_E_BACKEND, "cuda: shrink launch (%s): %s",
                       lsim_cuda_path_name(L->path), cudaGetErrorString(e));
  }
  if (L->tune.only == 1)
    return 0;
  /* only 3: the expand alone as a programmatic dependent of whatever
  ** precedes it on the stream (the base GEMM), Y read after the wait */
  e = lsim__expand_launch(L->cfg.dtype, L->kind, L->rc, L->tune.split_t,
                          L->args, L->g_expand, L->simt_smem,
                          L->tune.only == 2 ? 0
                          : L->tune.only == 3 ? 1
                                              : L->pdl,
                          L->stream);
  if (e != cudaSuccess)
    return lsim_fail(eb, LSIM_E_BACKEND, "cuda: expand launch (%s): %s",
                     lsim_cuda_path_name(L->path), cudaGetErrorString(e));
  return 0;
}

extern "C" lsim_err lsim_cuda_lora_sync(lsim_cuda_lora *L, lsim_errbuf *eb) {
  LSIM_CUDA_RET(cudaStreamSynchronize(L->stream), eb);
  LSIM_CUDA_RET(cudaGetLastError(), eb);
  return 0;
}

extern "C" lsim_err lsim_cuda_lora_poison(lsim_cuda_lora *L, lsim_errbuf *eb) {
  if (!L->ws)
    return 0;
  LSIM_CUDA_RET(cudaMemsetAsync(L->ws, 0xff, L->ws_cap * sizeof(float),
                                L->stream),
                eb);
  LSIM_CUDA_RET(cudaStreamSynchronize(L->stream), eb);
  return 0;
}

/* ---- the base projection and the branch in one pass (lgemm.cuh) -------------- */

/*
** Which composition of the base GEMM and the branch a plan should run
** (docs/CUDA.md "Base projection and branch in one pass"; measured in
** docs/BENCHMARKS.md, issue 23): above 128 rows the partitioned
** composition (below), else the caller's base GEMM (cuBLAS), then the
** branch on the chooser's path.  The one-pass GEMM lost
** wherever it was measured on the H100 (decode64 r16 46.6 us against 33.5
** for cuBLAS then the branch, mixed256 r16 67.8 against 44.4; its W stream
** alone ran at 28 us where cuBLAS's whole GEMM took 21.5), and so did the
** streaming wgemm (decode64 r16 47.0 us against 34.0, r64 99.0 against
** 54.6, mixed256 r16 110.7 against 44.4; its W stream alone 26.8 us
** against cuBLAS's 21.8), so the rule takes it nowhere; *branch_path is the shrink path a one-pass plan would
** use (the per-row decode kernel when every segment is one row, the
** tensor-core tiles otherwise), for callers that ask for it anyway.
*/
extern "C" int lsim_cuda_gemm_choose(const lsim_rowplan *p, int rmax,
                                     int d_in, int d_out, int *branch_path) {
  int maxseg = 0;
  (void)d_in;
  (void)d_out;
  for (int t = 0; t < p->nseg; t++)
    if (p->seg_offsets[t + 1] - p->seg_offsets[t] > maxseg)
      maxseg = p->seg_offsets[t + 1] - p->seg_offsets[t];
  if (p->T < 1 || p->T > LSIM__GEMM_MAXM || rmax > LSIM__GEMM_MAXR) {
    if (branch_path)
      *branch_path = LSIM_CUDA_PATH_AUTO;
    return 0;
  }
  if (branch_path)
    *branch_path = maxseg <= 1 ? LSIM_CUDA_PATH_DECODE
                               : LSIM_CUDA_PATH_SGMV_MMA;
  /* the partitioned composition where it won: mixed256 (256 rows, 8 a
  ** segment) 38.1 us against 44.8 for cuBLAS then the branch at r16, 54.0
  ** against 59.0 at r64 (H100, bench_kernels --part); at decode64 it
  ** measured within 2% of the sequence (33.2-33.5 against 33.4-34.0), so
  ** 128 rows and fewer keep the sequence */
  if (p->T > 128)
    return LSIM_CUDA_GEMM_PART;
  return LSIM_CUDA_GEMM_SEQ;
}

/* Which one-pass kernel run_gemm takes (tune gemm_kernel 0), by what was
** measured (H100, docs/BENCHMARKS.md, issue 23): the streaming wgemm at up
** to 64 rows with at most 1024 K' columns of adapters, where it was faster
** (decode64 with no adapter rows 26.8 us against lgemm's 29.3, r16 47.0
** against 47.7); lgemm elsewhere: at decode64 r64 (K' 4096) wgemm's units
** cost more than lgemm's epilogue (99.0 against 93.7), and above 64 rows
** wgemm's mma.sync warps are compute-bound (mixed256 alone 66.5 against
** 48.9). */
static int lsim__use_wg(const lsim_cuda_lora *L) {
  if (!L->wg_ok || L->tune.gemm_kernel == 1)
    return 0;
  return L->tune.gemm_kernel == 2 ||
         (L->wg_bm <= 64 && (L->nactive == 0 || L->wg_ktot <= 1024));
}

extern "C" int lsim_cuda_lora_gemm_ok(const lsim_cuda_lora *L,
                                      const char **why) {
  if (why)
    *why = !L || !L->planned ? "no prepared plan"
           : L->gemm_ok       ? ""
                              : L->gemm_why;
  return L && L->planned && L->gemm_ok;
}

extern "C" void lsim_cuda_lora_gemm_describe(const lsim_cuda_lora *L,
                                             char *buf, size_t n) {
  if (!L || !L->planned || !L->gemm_ok) {
    snprintf(buf, n, "one-pass gemm: not available (%s)",
             !L || !L->planned ? "no plan" : L->gemm_why);
    return;
  }
  if (lsim__use_wg(L)) {
    snprintf(buf, n,
             "one-pass gemm (streaming): shrink %s, %d rows per block, %d K "
             "ranges (%d slices of 64 each), %d column tiles, %d stages, "
             "K' %d in %d segments",
             lsim_cuda_path_name(L->path), L->wg_bm, L->wg_cs, L->wg_kblen,
             lsim__cdiv(L->cfg.d_out, LSIM__WG_BN), L->wg_ns, L->wg_ktot,
             L->wg_nseg);
    return;
  }
  snprintf(buf, n,
           "one-pass gemm: shrink %s, %d rows per block, %d K ranges (K "
           "%d per block), %d column tiles, %d epilogue tiles, %d t "
           "positions, %zu B shared, prefetch %d",
           lsim_cuda_path_name(L->path), L->gemm_bm, L->gemm_cs,
           L->gemm_klen, lsim__cdiv(L->cfg.d_out, LSIM__GEMM_BN), L->netiles,
           L->gemm_tpos, L->gemm_smem, L->tune.gemm_prefetch);
}

extern "C" lsim_err lsim_cuda_lora_run_gemm_layer(
    lsim_cuda_lora *L, int layer, const void *X, int ldx, const void *W,
    int ldw, void *Y, int ldy, float beta, lsim_errbuf *eb) {
  cudaError_t e;
  if (!L || !L->planned)
    return lsim_fail(eb, LSIM_E_STATE, "lora run gemm: no prepared plan");
  if (layer < 0 || layer >= L->nlayers)
    return lsim_fail(eb, LSIM_E_USAGE,
                     "lora run gemm: layer %d of a plan of %d layers", layer,
                     L->nlayers);
  if (!L->gemm_ok)
    return lsim_fail(eb, LSIM_E_USAGE,
                     "lora run gemm: no one-pass GEMM for this plan (%s)",
                     L->gemm_why);
  if (!X || !W || !Y || ((uintptr_t)X & 15) || ((uintptr_t)W & 15) ||
      ((uintptr_t)Y & 15) || ldx < L->cfg.d_in || ldw < L->cfg.d_in ||
      ldy < L->cfg.d_out || (ldx & 7) || (ldw & 7) || (ldy & 7) ||
      !isfinite(beta))
    return lsim_fail(eb, LSIM_E_USAGE,
                     "lora run gemm: X, W and Y must be 16-byte aligned "
                     "with strides >= d_in, d_in, d_out in multiples of 8 "
                     "(ldx %d, ldw %d, ldy %d) and beta finite",
                     ldx, ldw, ldy);
  const lsim__adapter_dev *table =
      L->table0 + (size_t)layer * (size_t)L->args.table_n;
  const int lora = L->nactive > 0;
  if (lora) {
    L->args.X = (const uint16_t *)X;
    L->args.Y = (uint16_t *)Y;
    L->args.ldx = ldx;
    L->args.ldy = ldy;
    L->args.shrink_pdl = 0;
    L->args.y_late = 0;
    L->args.table = table;
    e = lsim__shrink_launch(L->cfg.dtype, L->kind, L->src, L->args,
                            L->g_shrink, L->stream);
    L->args.table = L->table0;
    if (e != cudaSuccess)
      return lsim_fail(eb, LSIM_E_BACKEND, "cuda: shrink launch (%s): %s",
                       lsim_cuda_path_name(L->path), cudaGetErrorString(e));
  }
  if (lsim__use_wg(L)) {
    lsim__wg_args w;
    memset(&w, 0, sizeof w);
    w.Y = (uint16_t *)Y;
    w.ldy = ldy;
    w.M = L->gemm_T;
    w.N = L->cfg.d_out;
    w.K = L->cfg.d_in;
    w.beta = beta;
    w.cs = L->wg_cs;
    w.kb_len = L->wg_kblen;
    w.ns = L->wg_ns;
    w.lora = lora && L->wg_ktot > 0;
    w.segs = (const int4 *)(L->d_meta + L->o_wsegs);
    w.srank = L->d_meta + L->o_wsrank;
    w.nseg = L->wg_nseg;
    w.ktot = L->wg_ktot;
    w.erows = L->d_meta + L->o_erows;
    w.nact = L->nactive;
    w.table = table;
    w.table_n = L->args.table_n;
    w.ldb = L->args.ldb;
    w.ws = L->ws;
    w.ws_ld = L->args.ws_ld;
    w.splits = L->args.splits;
    w.nlist = L->args.nlist;
    w.tc_ld = L->wg_tcld;
    w.flags = (L->tune.gemm_probe & 1) << 1;
    w.part = L->gpart;
    w.count = L->gcount;
    e = lsim__wg_launch(L->cfg.dtype, L->wg_bm, X, ldx, W, ldw, w,
                        lora && L->pdl, L->stream);
    if (e != cudaSuccess)
      return lsim_fail(eb, LSIM_E_BACKEND,
                       "cuda: streaming one-pass gemm launch: %s",
                       cudaGetErrorString(e));
    return 0;
  }
  if (L->tune.gemm_kernel == 2)
    return lsim_fail(eb, LSIM_E_USAGE,
                     "lora run gemm: no streaming one-pass GEMM for this "
                     "plan (%s)",
                     L->wg_why);
  lsim__gemm_args g;
  memset(&g, 0, sizeof g);
  g.X = (const uint16_t *)X;
  g.W = (const uint16_t *)W;
  g.Y = (uint16_t *)Y;
  g.ldx = ldx;
  g.ldw = ldw;
  g.ldy = ldy;
  g.M = L->gemm_T;
  g.N = L->cfg.d_out;
  g.K = L->cfg.d_in;
  g.beta = beta;
  g.cs = L->gemm_cs;
  g.k_len = L->gemm_klen;
  g.etiles = (const int4 *)(L->d_meta + L->o_etiles);
  g.netiles = L->netiles;
  g.erows = L->d_meta + L->o_erows;
  g.lora = lora;
  g.table = table;
  g.table_n = L->args.table_n;
  g.ldb = L->args.ldb;
  g.ws = L->ws;
  g.ws_ld = L->args.ws_ld;
  g.splits = L->args.splits;
  g.nlist = L->args.nlist;
  g.flags = (L->tune.gemm_prefetch ? 1 : 0) | ((L->tune.gemm_probe & 3) << 1);
  g.tpos = L->gemm_tpos;
  g.part = L->gpart;
  g.count = L->gcount;
  e = lsim__gemm_launch(L->cfg.dtype, L->gemm_bm, g, L->gemm_smem,
                        lora && L->pdl, L->stream);
  if (e != cudaSuccess)
    return lsim_fail(eb, LSIM_E_BACKEND, "cuda: one-pass gemm launch: %s",
                     cudaGetErrorString(e));
  return 0;
}

extern "C" lsim_err lsim_cuda_lora_run_gemm(lsim_cuda_lora *L, const void *X,
                                            int ldx, const void *W, int ldw,
                                            void *Y, int ldy, float beta,
                                            lsim_errbuf *eb) {
  return lsim_cuda_lora_run_gemm_layer(L, 0, X, ldx, W, ldw, Y, ldy, beta,
                                       eb);
}
