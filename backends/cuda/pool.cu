/*
** pool.cu: paged adapter residency on the GPU and the paged kernel
** (pool.h, pool.cuh, docs/CUDA.md).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool.cuh"

/* ---- streams and timers ------------------------------------------------------ */

extern "C" lsim_err lsim_cuda_stream_create(void **s, lsim_errbuf *eb) {
  cudaStream_t st = NULL;
  *s = NULL;
  LSIM_CUDA_RET(cudaStreamCreate(&st), eb);
  *s = st;
  return 0;
}

extern "C" void lsim_cuda_stream_destroy(void *s) {
  if (!s)
    return;
  cudaStreamSynchronize((cudaStream_t)s);
  cudaStreamDestroy((cudaStream_t)s);
}

struct lsim_cuda_timer {
  cudaStream_t s;
  cudaEvent_t a, b;
  int started, stopped;
};

extern "C" lsim_err lsim_cuda_timer_open(lsim_cuda_timer **out, void *stream,
                                         lsim_errbuf *eb) {
  lsim_err rc = 0;
  lsim_cuda_timer *t = (lsim_cuda_timer *)calloc(1, sizeof *t);
  *out = NULL;
  if (!t)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  t->s = (cudaStream_t)stream;
  LSIM_CUDA_TRY(cudaEventCreate(&t->a), eb);
  LSIM_CUDA_TRY(cudaEventCreate(&t->b), eb);
  *out = t;
  return 0;
out:
  lsim_cuda_timer_close(t);
  return rc;
}

extern "C" lsim_err lsim_cuda_timer_start(lsim_cuda_timer *t, lsim_errbuf *eb) {
  LSIM_CUDA_RET(cudaEventRecord(t->a, t->s), eb);
  t->started = 1;
  t->stopped = 0;
  return 0;
}

extern "C" lsim_err lsim_cuda_timer_stop(lsim_cuda_timer *t, lsim_errbuf *eb) {
  if (!t->started)
    return lsim_fail(eb, LSIM_E_STATE, "timer stopped before it started");
  LSIM_CUDA_RET(cudaEventRecord(t->b, t->s), eb);
  t->stopped = 1;
  return 0;
}

extern "C" lsim_err lsim_cuda_timer_ns(lsim_cuda_timer *t, int64_t *ns,
                                       lsim_errbuf *eb) {
  float ms = 0;
  if (!t->stopped)
    return lsim_fail(eb, LSIM_E_STATE, "timer read before it stopped");
  LSIM_CUDA_RET(cudaEventSynchronize(t->b), eb);
  LSIM_CUDA_RET(cudaEventElapsedTime(&ms, t->a, t->b), eb);
  *ns = (int64_t)((double)ms * 1e6 + 0.5);
  return 0;
}

extern "C" void lsim_cuda_timer_close(lsim_cuda_timer *t) {
  if (!t)
    return;
  if (t->a)
    cudaEventDestroy(t->a);
  if (t->b)
    cudaEventDestroy(t->b);
  free(t);
}

/* ---- kernels -------------------------------------------------------------------- */

static __device__ __forceinline__ uint64_t lsim__gtime(void) {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

static __device__ void lsim__spin(int64_t ns) {
  uint64_t t0 = lsim__gtime();
  while ((int64_t)(lsim__gtime() - t0) < ns)
    __nanosleep(1000);
}

/* Test hook: hold the copy stream for ns. */
__global__ void lsim__pg_delay(int64_t ns) { lsim__spin(ns); }

/* Checksum of one generation's pages in page-table order into *sum (zeroed
** first): block j reads page ptab[j]. */
__global__ void lsim__pg_checksum(const uint16_t *pool, const int32_t *ptab,
                                  int64_t H, unsigned long long *sum) {
  const int j = blockIdx.x;
  const uint16_t *pg = pool + (int64_t)ptab[j] * H;
  uint64_t acc = 0;
  for (int64_t e = threadIdx.x; e < H; e += blockDim.x)
    acc += lsim__pg_term((uint64_t)j * (uint64_t)H + (uint64_t)e, pg[e]);
  for (int o = 16; o > 0; o >>= 1)
    acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if ((threadIdx.x & 31) == 0)
    atomicAdd(sum, (unsigned long long)acc);
}

/*
** The paged kernel: one block per tile of up to 8 rows of one segment.
** Shrink: warp w takes rank rows k = w, w + 4, ...; each lane sums
** x[j] * A[k][j] over its columns j = lane + 32 m for every row of the tile,
** then the warp reduces by butterfly (a fixed order); t = s * sum goes to
** shared memory.  Expand: a group of column threads sums t[i][k] * Bt[k][c]
** over its share of k (narrow modules split the rank over up to four
** groups, added in group order) and adds it to Y[row][c] in fp32, rounded
** once to the type.  Every factor
** row address comes from the generation's page table.
*/
template <typename T>
__global__ void __launch_bounds__(LSIM__PG_THREADS)
    lsim__paged_kernel(const lsim__paged_args a) {
  extern __shared__ float lsim__pg_sm[];
  __shared__ int rows[LSIM__PG_TR];
  if (a.delay_ns > 0)
    lsim__spin(a.delay_ns);
  const int32_t *tile = a.meta + 3 * (int64_t)blockIdx.x;
  const int s = tile[0], u0 = tile[1], nr = tile[2];
  const int32_t *sg = a.meta + 3 * (int64_t)a.ntiles + 3 * (int64_t)s;
  const int slot = sg[0], rank = sg[1];
  const float scale = __int_as_float(sg[2]);
  const int32_t *perm = a.meta + 3 * (int64_t)a.ntiles + 3 * (int64_t)a.nseg;
  int *pgs = (int *)lsim__pg_sm;           /* [2 * rank] */
  float *t = lsim__pg_sm + 2 * rank;       /* [nr][rank] */
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  for (int i = tid; i < 2 * rank; i += blockDim.x)
    pgs[i] = a.ptab[(int64_t)slot * a.TW + i];
  if (tid < nr)
    rows[tid] = perm[u0 + tid];
  __syncthreads();

  for (int k = warp; k < rank; k += LSIM__PG_THREADS / 32) {
    const uint16_t *ar = a.pool + (int64_t)pgs[k] * a.H;
    float acc[LSIM__PG_TR];
#pragma unroll
    for (int i = 0; i < LSIM__PG_TR; i++)
      acc[i] = 0.f;
    for (int j = lane; j < a.d_in; j += 32) {
      const float w = lsim__dt<T>::to_f(ar[j]);
#pragma unroll
      for (int i = 0; i < LSIM__PG_TR; i++)
        if (i < nr)
          acc[i] += lsim__dt<T>::to_f(a.X[(int64_t)rows[i] * a.ldx + j]) * w;
    }
#pragma unroll
    for (int i = 0; i < LSIM__PG_TR; i++) {
      float v = acc[i];
      for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
      if (lane == 0 && i < nr)
        t[i * rank + k] = v * scale;
    }
  }
  __syncthreads();

  /* expand: cw column threads per group and S = 128 / cw groups splitting
  ** the rank (group g takes k = g, g + S, ...); the groups' partial sums
  ** meet in shared memory and are added in group order, so the order of
  ** every sum is fixed */
  __shared__ float part[LSIM__PG_THREADS][LSIM__PG_TR];
  const int cw = a.d_out >= LSIM__PG_THREADS / 2
                     ? (a.d_out >= LSIM__PG_THREADS ? LSIM__PG_THREADS : 64)
                     : 32;
  const int S = LSIM__PG_THREADS / cw, g = tid / cw, cl = tid % cw;
  for (int c0 = 0; c0 < a.d_out; c0 += cw) {
    const int c = c0 + cl;
    float acc[LSIM__PG_TR];
#pragma unroll
    for (int i = 0; i < LSIM__PG_TR; i++)
      acc[i] = 0.f;
    if (c < a.d_out)
      for (int k = g; k < rank; k += S) {
        const float w =
            lsim__dt<T>::to_f(a.pool[(int64_t)pgs[rank + k] * a.H + c]);
#pragma unroll
        for (int i = 0; i < LSIM__PG_TR; i++)
          if (i < nr)
            acc[i] += t[i * rank + k] * w;
      }
    if (S > 1) {
      __syncthreads(); /* the previous column block's partials are read */
#pragma unroll
      for (int i = 0; i < LSIM__PG_TR; i++)
        part[tid][i] = acc[i];
      __syncthreads();
      if (g == 0)
        for (int h = 1; h < S; h++)
#pragma unroll
          for (int i = 0; i < LSIM__PG_TR; i++)
            acc[i] += part[h * cw + cl][i];
    }
    if (g == 0 && c < a.d_out)
#pragma unroll
      for (int i = 0; i < LSIM__PG_TR; i++)
        if (i < nr) {
          uint16_t *y = a.Y + (int64_t)rows[i] * a.ldy + c;
          *y = lsim__dt<T>::from_f(lsim__dt<T>::to_f(*y) + acc[i]);
        }
  }
}

/* ---- the pool ---------------------------------------------------------------------- */

enum { LSIM__OBJ_FREE = 0, LSIM__OBJ_LOADING, LSIM__OBJ_PUBLISHED,
       LSIM__OBJ_RETIRED };

/* One generation of one adapter: a page-table slot and its pages. */
struct lsim__obj {
  int state, id, rank;
  float scale;
  int64_t gen;            /* generation it becomes / is */
  int64_t npages;
  int64_t *page;          /* [TW] */
  int64_t st_off;         /* staging page offset while loading, else -1 */
  lsim_digest digest;     /* of the staged image, taken when packed */
  uint64_t csum;          /* host checksum of the image */
  cudaEvent_t copy_ev;    /* the copy event */
  cudaEvent_t t0, t1;     /* timing: before and after the page copies */
  cudaEvent_t last_use;   /* re-recorded after every launch naming it */
  int used;               /* last_use was recorded at least once */
  int64_t retire_seq;
};

struct lsim_cuda_pool {
  lsim_cuda_pool_cfg cfg;
  int64_t H;
  int TW, nobj;
  cudaStream_t s_launch, s_copy;
  int own_launch;
  uint16_t *d_pool;
  int32_t *d_ptab;
  unsigned long long *d_csum;
  uint16_t *h_stage;        /* pinned [staging_pages][H] */
  int32_t *h_ptab;          /* pinned [nobj][TW] */
  unsigned long long *h_csum; /* pinned [nobj] */
  int32_t *owner;           /* [pages] object slot or -1 */
  lsim__obj *obj;           /* [nobj] */
  int *pub, *pend;          /* [max_adapters] object slot or -1 */
  int64_t *gen;             /* [max_adapters] published generation */
  int64_t *load_ns;         /* [max_adapters] the last load's page copies,
                               ns; -2 being timed (lastobj), -1 none */
  int *lastobj;             /* [max_adapters] object slot of that load */
  int64_t retire_seq;
  int32_t *h_meta, *d_meta; /* launch metadata */
  size_t meta_cap;          /* ints */
  cudaEvent_t meta_ev, ev0, ev1;
  int meta_live, timed;
  int64_t delay_launch, delay_copy;
  int unfenced;
  lsim_cuda_pool_stats st;
  /* the fast paths through the page tables (lsim__pg_launch_fast) */
  int path;                 /* enum lsim_cuda_path, or LSIM_CUDA_POOL_PAGED */
  int last_path;            /* of the last launch; -2 before any */
  lsim_cuda_lora *L;        /* opened at the first fast launch */
  lsim_cuda_paged_ref *refs; /* [refs_cap] by plan id */
  int refs_cap;
  lsim_cuda_lora_tune tune, tune0; /* set, and the context's defaults */
  int have_tune;
  /* a prepared run (lsim_cuda_pool_prepare): 0 none, 1 fast path planned,
  ** 2 the paged kernel, 3 nothing to launch; the plan and remap are the
  ** caller's, valid until lsim_cuda_pool_mark_used */
  int prep, prep_ntiles, prep_rmax, prep_ldx, prep_ldy;
  const lsim_rowplan *prep_p;
  const int *prep_remap;
  const void *prep_X;
  void *prep_Y;
};

extern "C" void lsim_cuda_pool_set_path(lsim_cuda_pool *P, int path) {
  P->path = path;
}

extern "C" int lsim_cuda_pool_last_path(const lsim_cuda_pool *P) {
  return P->last_path;
}

extern "C" void lsim_cuda_pool_set_tune(lsim_cuda_pool *P,
                                        const lsim_cuda_lora_tune *t) {
  P->have_tune = t != NULL;
  if (t)
    P->tune = *t;
}

extern "C" int lsim_cuda_pool_page_elems(const lsim_cuda_pool *P) {
  return (int)P->H;
}

extern "C" void lsim_cuda_pool_close(lsim_cuda_pool *P) {
  if (!P)
    return;
  if (P->s_copy)
    cudaStreamSynchronize(P->s_copy);
  if (P->s_launch)
    cudaStreamSynchronize(P->s_launch);
  if (P->obj)
    for (int i = 0; i < P->nobj; i++) {
      if (P->obj[i].copy_ev)
        cudaEventDestroy(P->obj[i].copy_ev);
      if (P->obj[i].t0)
        cudaEventDestroy(P->obj[i].t0);
      if (P->obj[i].t1)
        cudaEventDestroy(P->obj[i].t1);
      if (P->obj[i].last_use)
        cudaEventDestroy(P->obj[i].last_use);
      free(P->obj[i].page);
    }
  lsim_cuda_lora_close(P->L); /* waits for the launch stream first */
  free(P->refs);
  if (P->meta_ev)
    cudaEventDestroy(P->meta_ev);
  if (P->ev0)
    cudaEventDestroy(P->ev0);
  if (P->ev1)
    cudaEventDestroy(P->ev1);
  cudaFree(P->d_pool);
  cudaFree(P->d_ptab);
  cudaFree(P->d_csum);
  cudaFree(P->d_meta);
  cudaFreeHost(P->h_stage);
  cudaFreeHost(P->h_ptab);
  cudaFreeHost(P->h_csum);
  cudaFreeHost(P->h_meta);
  if (P->s_copy)
    cudaStreamDestroy(P->s_copy);
  if (P->own_launch && P->s_launch)
    cudaStreamDestroy(P->s_launch);
  free(P->owner);
  free(P->obj);
  free(P->pub);
  free(P->pend);
  free(P->gen);
  free(P->load_ns);
  free(P->lastobj);
  free(P);
}

extern "C" lsim_err lsim_cuda_pool_open(lsim_cuda_pool **out,
                                        const lsim_cuda_pool_cfg *cfg,
                                        lsim_errbuf *eb) {
  lsim_err rc = 0;
  lsim_cuda_pool *P = NULL;
  int64_t H;
  *out = NULL;
  if (!cfg || (cfg->dtype != LSIM_CUDA_BF16 && cfg->dtype != LSIM_CUDA_FP16) ||
      cfg->d_in < 1 || cfg->d_out < 1 || cfg->d_in > (1 << 24) ||
      cfg->d_out > (1 << 24) || cfg->pages < 2 || cfg->pages > INT32_MAX ||
      cfg->max_adapters < 1 || cfg->max_rank < 1 ||
      cfg->max_rank > LSIM_POOL_MAX_RANK || cfg->max_objects < 0 ||
      cfg->staging_pages < 0)
    return lsim_fail(eb, LSIM_E_USAGE,
                     "pool: bad configuration (dtype, d_in/d_out 1..2^24, "
                     "pages >= 2, max_adapters >= 1, max_rank 1..%d)",
                     LSIM_POOL_MAX_RANK);
  H = ((int64_t)(cfg->d_in > cfg->d_out ? cfg->d_in : cfg->d_out) + 7) / 8 * 8;
  P = (lsim_cuda_pool *)calloc(1, sizeof *P);
  if (!P)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  P->cfg = *cfg;
  P->H = H;
  P->path = LSIM_CUDA_PATH_AUTO;
  P->last_path = -2;
  P->TW = 2 * cfg->max_rank;
  P->nobj = cfg->max_objects ? cfg->max_objects : 2 * cfg->max_adapters + 2;
  if (!P->cfg.staging_pages)
    P->cfg.staging_pages = 4 * (int64_t)P->TW;
  P->owner = (int32_t *)malloc((size_t)cfg->pages * sizeof *P->owner);
  P->obj = (lsim__obj *)calloc((size_t)P->nobj, sizeof *P->obj);
  P->pub = (int *)malloc((size_t)cfg->max_adapters * sizeof *P->pub);
  P->pend = (int *)malloc((size_t)cfg->max_adapters * sizeof *P->pend);
  P->gen = (int64_t *)calloc((size_t)cfg->max_adapters, sizeof *P->gen);
  P->load_ns = (int64_t *)malloc((size_t)cfg->max_adapters *
                                 sizeof *P->load_ns);
  P->lastobj = (int *)malloc((size_t)cfg->max_adapters * sizeof *P->lastobj);
  if (!P->owner || !P->obj || !P->pub || !P->pend || !P->gen ||
      !P->load_ns || !P->lastobj) {
    rc = lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
    goto out;
  }
  for (int64_t i = 0; i < cfg->pages; i++)
    P->owner[i] = -1;
  for (int i = 0; i < cfg->max_adapters; i++) {
    P->pub[i] = P->pend[i] = P->lastobj[i] = -1;
    P->load_ns[i] = -1;
  }
  for (int i = 0; i < P->nobj; i++) {
    P->obj[i].st_off = -1;
    P->obj[i].page = (int64_t *)malloc((size_t)P->TW * sizeof(int64_t));
    if (!P->obj[i].page) {
      rc = lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
      goto out;
    }
  }
  LSIM_CUDA_TRY(cudaSetDevice(cfg->device), eb);
  for (int i = 0; i < P->nobj; i++) {
    LSIM_CUDA_TRY(cudaEventCreateWithFlags(&P->obj[i].copy_ev,
                                           cudaEventDisableTiming), eb);
    LSIM_CUDA_TRY(cudaEventCreateWithFlags(&P->obj[i].last_use,
                                           cudaEventDisableTiming), eb);
    LSIM_CUDA_TRY(cudaEventCreate(&P->obj[i].t0), eb);
    LSIM_CUDA_TRY(cudaEventCreate(&P->obj[i].t1), eb);
  }
  LSIM_CUDA_TRY(cudaEventCreateWithFlags(&P->meta_ev, cudaEventDisableTiming),
                eb);
  LSIM_CUDA_TRY(cudaEventCreate(&P->ev0), eb);
  LSIM_CUDA_TRY(cudaEventCreate(&P->ev1), eb);
  if (cfg->stream) {
    P->s_launch = (cudaStream_t)cfg->stream;
  } else {
    LSIM_CUDA_TRY(cudaStreamCreateWithFlags(&P->s_launch,
                                            cudaStreamNonBlocking), eb);
    P->own_launch = 1;
  }
  LSIM_CUDA_TRY(cudaStreamCreateWithFlags(&P->s_copy, cudaStreamNonBlocking),
                eb);
  LSIM_CUDA_TRY(cudaMalloc((void **)&P->d_pool,
                           (size_t)cfg->pages * (size_t)H * 2), eb);
  /* NaN-pattern fill (0xFFFF is a NaN in both types): a kernel reading a
  ** page nothing was copied to poisons its output */
  LSIM_CUDA_TRY(cudaMemset(P->d_pool, 0xFF, (size_t)cfg->pages * (size_t)H * 2),
                eb);
  LSIM_CUDA_TRY(cudaMalloc((void **)&P->d_ptab,
                           (size_t)P->nobj * (size_t)P->TW * sizeof(int32_t)),
                eb);
  LSIM_CUDA_TRY(cudaMemset(P->d_ptab, 0xFF,
                           (size_t)P->nobj * (size_t)P->TW * sizeof(int32_t)),
                eb);
  LSIM_CUDA_TRY(cudaMalloc((void **)&P->d_csum,
                           (size_t)P->nobj * sizeof(unsigned long long)), eb);
  LSIM_CUDA_TRY(cudaMallocHost((void **)&P->h_stage,
                               (size_t)P->cfg.staging_pages * (size_t)H * 2),
                eb);
  LSIM_CUDA_TRY(cudaMallocHost((void **)&P->h_ptab, (size_t)P->nobj *
                                                        (size_t)P->TW *
                                                        sizeof(int32_t)), eb);
  LSIM_CUDA_TRY(cudaMallocHost((void **)&P->h_csum,
                               (size_t)P->nobj * sizeof(unsigned long long)),
                eb);
  LSIM_CUDA_TRY(cudaDeviceSynchronize(), eb);
  P->st.pages = cfg->pages;
  P->st.free_pages = cfg->pages;
  *out = P;
  return 0;
out:
  lsim_cuda_pool_close(P);
  return rc;
}

/* Pack A and B into 2 * rank page images at dst ([2 rank][H], zero padded). */
static void lsim__pg_pack(int64_t H, int d_in, int d_out, int rank,
                          const uint16_t *A, const uint16_t *B, uint16_t *dst) {
  memset(dst, 0, (size_t)2 * (size_t)rank * (size_t)H * 2);
  for (int k = 0; k < rank; k++) {
    memcpy(dst + (int64_t)k * H, A + (int64_t)k * d_in, (size_t)d_in * 2);
    uint16_t *bt = dst + (int64_t)(rank + k) * H;
    for (int c = 0; c < d_out; c++)
      bt[c] = B[(int64_t)c * rank + k];
  }
}

static uint64_t lsim__pg_csum_host(const uint16_t *img, int64_t n) {
  uint64_t s = 0;
  for (int64_t i = 0; i < n; i++)
    s += lsim__pg_term((uint64_t)i, img[i]);
  return s;
}

extern "C" lsim_err lsim_cuda_pool_digest(const lsim_cuda_pool *P, int rank,
                                          const uint16_t *A, const uint16_t *B,
                                          lsim_digest *out, lsim_errbuf *eb) {
  if (rank < 1 || rank > P->cfg.max_rank || !A || !B)
    return lsim_fail(eb, LSIM_E_USAGE, "pool: bad rank or factor");
  size_t n = (size_t)2 * (size_t)rank * (size_t)P->H;
  uint16_t *img = (uint16_t *)malloc(n * 2);
  if (!img)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  lsim__pg_pack(P->H, P->cfg.d_in, P->cfg.d_out, rank, A, B, img);
  lsim_err rc = lsim_sha256(img, n * 2, out, eb);
  free(img);
  return rc;
}

/* Hand a retired generation's page-table slot and pages back: later copies
** (all on the copy stream) first wait for its last launch. */
static lsim_err lsim__pg_reclaim(lsim_cuda_pool *P, int o, lsim_errbuf *eb) {
  lsim__obj *ob = &P->obj[o];
  if (ob->used && !P->unfenced) {
    LSIM_CUDA_RET(cudaStreamWaitEvent(P->s_copy, ob->last_use, 0), eb);
    P->st.fenced_reuses++;
  }
  for (int64_t j = 0; j < ob->npages; j++)
    P->owner[ob->page[j]] = -1;
  P->st.fenced_pages -= ob->npages;
  P->st.free_pages += ob->npages;
  ob->npages = 0;
  ob->state = LSIM__OBJ_FREE;
  ob->used = 0;
  return 0;
}

/* The oldest retired generation, or -1. */
static int lsim__pg_oldest_retired(const lsim_cuda_pool *P) {
  int best = -1;
  for (int i = 0; i < P->nobj; i++)
    if (P->obj[i].state == LSIM__OBJ_RETIRED &&
        (best < 0 || P->obj[i].retire_seq < P->obj[best].retire_seq))
      best = i;
  return best;
}

/* First-fit staging range of n pages not held by a pending load; -1. */
static int64_t lsim__pg_staging(const lsim_cuda_pool *P, int64_t n) {
  int64_t at = 0;
  for (;;) {
    int moved = 0;
    if (at + n > P->cfg.staging_pages)
      return -1;
    for (int i = 0; i < P->nobj; i++) {
      const lsim__obj *o = &P->obj[i];
      if (o->st_off >= 0 && o->st_off < at + n && at < o->st_off + o->npages) {
        at = o->st_off + o->npages;
        moved = 1;
      }
    }
    if (!moved)
      return at;
  }
}

/* Load with the pages chosen by the pool (at NULL) or given by the caller
** (at: 2 * rank page ids, each free or held by a retired generation). */
static lsim_err lsim__pg_load(lsim_cuda_pool *P, int id, int rank, float scale,
                              const uint16_t *A, const uint16_t *B,
                              const lsim_digest *expect, const int64_t *at,
                              lsim_errbuf *eb);

extern "C" lsim_err lsim_cuda_pool_load(lsim_cuda_pool *P, int id, int rank,
                                        float scale, const uint16_t *A,
                                        const uint16_t *B,
                                        const lsim_digest *expect,
                                        lsim_errbuf *eb) {
  return lsim__pg_load(P, id, rank, scale, A, B, expect, NULL, eb);
}

extern "C" lsim_err lsim_cuda_pool_load_at(lsim_cuda_pool *P, int id, int rank,
                                           float scale, const uint16_t *A,
                                           const uint16_t *B,
                                           const lsim_digest *expect,
                                           const int64_t *at,
                                           lsim_errbuf *eb) {
  if (!at)
    return lsim_fail(eb, LSIM_E_USAGE, "pool: load_at without pages");
  return lsim__pg_load(P, id, rank, scale, A, B, expect, at, eb);
}

static lsim_err lsim__pg_load(lsim_cuda_pool *P, int id, int rank, float scale,
                              const uint16_t *A, const uint16_t *B,
                              const lsim_digest *expect, const int64_t *at,
                              lsim_errbuf *eb) {
  lsim_err rc = 0;
  const int64_t n = 2 * (int64_t)rank, H = P->H;
  int64_t off, got = 0;
  int o = -1;
  uint16_t *img;
  lsim__obj *ob;
  if (id < 0 || id >= P->cfg.max_adapters)
    return lsim_fail(eb, LSIM_E_USAGE, "pool: adapter id %d out of range 0..%d",
                     id, P->cfg.max_adapters - 1);
  if (rank < 1 || rank > P->cfg.max_rank || !A || !B || !(scale == scale) ||
      scale - scale != 0.0f)
    return lsim_fail(eb, LSIM_E_USAGE,
                     "pool: adapter %d: rank %d (1..%d), factors and a finite "
                     "scale are needed", id, rank, P->cfg.max_rank);
  if (P->pend[id] >= 0)
    return lsim_fail(eb, LSIM_E_DEV_BUSY,
                     "pool: adapter %d already has a load in flight", id);
  for (int64_t j = 0; at && j < n; j++) {
    if (at[j] < 0 || at[j] >= P->cfg.pages)
      return lsim_fail(eb, LSIM_E_USAGE,
                       "pool: adapter %d: page %lld outside the pool of %lld",
                       id, (long long)at[j], (long long)P->cfg.pages);
    for (int64_t k = 0; k < j; k++)
      if (at[k] == at[j])
        return lsim_fail(eb, LSIM_E_USAGE,
                         "pool: adapter %d: page %lld given twice", id,
                         (long long)at[j]);
    int ow = P->owner[at[j]];
    if (ow >= 0 && P->obj[ow].state != LSIM__OBJ_RETIRED)
      return lsim_fail(eb, LSIM_E_DEV_BUSY,
                       "pool: adapter %d: page %lld holds a live generation "
                       "of adapter %d", id, (long long)at[j], P->obj[ow].id);
  }
  off = lsim__pg_staging(P, n);
  if (off < 0)
    return lsim_fail(eb, LSIM_E_DEV_STAGING,
                     "pool: no %lld free staging pages (publish pending loads "
                     "first)", (long long)n);
  img = P->h_stage + off * H;
  lsim__pg_pack(H, P->cfg.d_in, P->cfg.d_out, rank, A, B, img);
  lsim_digest dg;
  if ((rc = lsim_sha256(img, (size_t)(n * H * 2), &dg, eb)))
    return rc;
  if (expect && !lsim_digest_eq(expect, &dg))
    return lsim_fail(eb, LSIM_E_DEV_DIGEST,
                     "pool: adapter %d: factors do not match the artifact "
                     "digest", id);
  /* a page-table slot, then pages: free ones first, then those of the
  ** oldest retired generations (fenced) */
  for (int i = 0; i < P->nobj && o < 0; i++)
    if (P->obj[i].state == LSIM__OBJ_FREE)
      o = i;
  {
    int64_t have = P->st.free_pages, reclaimable = P->st.fenced_pages;
    if (o < 0 && lsim__pg_oldest_retired(P) < 0)
      return lsim_fail(eb, LSIM_E_DEV_NOSPACE,
                       "pool: no page-table slot for adapter %d (every slot "
                       "holds a live generation)", id);
    if (!at && have + reclaimable < n)
      return lsim_fail(eb, LSIM_E_DEV_NOSPACE,
                       "pool: adapter %d needs %lld pages; %lld free, %lld "
                       "retired", id, (long long)n, (long long)have,
                       (long long)reclaimable);
  }
  if (o < 0) {
    o = lsim__pg_oldest_retired(P);
    if ((rc = lsim__pg_reclaim(P, o, eb)))
      return rc;
  }
  /* the caller's pages: retired generations holding them are reclaimed
  ** (fenced by their last use) */
  for (int64_t j = 0; at && j < n; j++)
    if (P->owner[at[j]] >= 0 && (rc = lsim__pg_reclaim(P, P->owner[at[j]], eb)))
      return rc;
  while (!at && P->st.free_pages < n) {
    int r = lsim__pg_oldest_retired(P);
    if (r < 0)
      return lsim_fail(eb, LSIM_E_BUG, "pool: page accounting broken");
    if ((rc = lsim__pg_reclaim(P, r, eb)))
      return rc;
  }
  ob = &P->obj[o];
  if (at) {
    for (int64_t j = 0; j < n; j++) {
      P->owner[at[j]] = o;
      ob->page[got++] = at[j];
    }
  } else {
    for (int64_t i = 0; i < P->cfg.pages && got < n; i++)
      if (P->owner[i] < 0) {
        P->owner[i] = o;
        ob->page[got++] = i;
      }
  }
  ob->state = LSIM__OBJ_LOADING;
  ob->id = id;
  ob->rank = rank;
  ob->scale = scale;
  ob->gen = P->gen[id] + 1;
  ob->npages = n;
  ob->st_off = off;
  ob->digest = dg;
  ob->csum = lsim__pg_csum_host(img, n * H);
  ob->used = 0;
  P->st.free_pages -= n;
  P->st.used_pages += n;
  P->pend[id] = o;
  for (int64_t j = 0; j < n; j++)
    P->h_ptab[(int64_t)o * P->TW + j] = (int32_t)ob->page[j];
  /* the copy, on the copy stream: runs of consecutive pages in one copy */
  if (P->delay_copy > 0) {
    lsim__pg_delay<<<1, 1, 0, P->s_copy>>>(P->delay_copy);
    LSIM_CUDA_TRY(cudaGetLastError(), eb);
  }

  LSIM_CUDA_TRY(cudaEventRecord(ob->t0, P->s_copy), eb);
  for (int64_t j = 0; j < n;) {
    int64_t k = j + 1;
    while (k < n && ob->page[k] == ob->page[k - 1] + 1)
      k++;
    LSIM_CUDA_TRY(cudaMemcpyAsync(P->d_pool + ob->page[j] * H, img + j * H,
                                  (size_t)((k - j) * H * 2),
                                  cudaMemcpyHostToDevice, P->s_copy), eb);
    j = k;
  }
  LSIM_CUDA_TRY(cudaEventRecord(ob->t1, P->s_copy), eb);
  /* the load's copy time, read when asked or at publication (the slot's
  ** events are re-recorded by a later load) */
  P->load_ns[id] = -2;
  P->lastobj[id] = o;
  LSIM_CUDA_TRY(cudaMemcpyAsync(P->d_ptab + (int64_t)o * P->TW,
                                P->h_ptab + (int64_t)o * P->TW,
                                (size_t)n * sizeof(int32_t),
                                cudaMemcpyHostToDevice, P->s_copy), eb);
  LSIM_CUDA_TRY(cudaMemsetAsync(P->d_csum + o, 0, sizeof(unsigned long long),
                                P->s_copy), eb);
  lsim__pg_checksum<<<(unsigned)n, 128, 0, P->s_copy>>>(
      P->d_pool, P->d_ptab + (int64_t)o * P->TW, H, P->d_csum + o);
  LSIM_CUDA_TRY(cudaGetLastError(), eb);
  LSIM_CUDA_TRY(cudaMemcpyAsync(P->h_csum + o, P->d_csum + o,
                                sizeof(unsigned long long),
                                cudaMemcpyDeviceToHost, P->s_copy), eb);
  LSIM_CUDA_TRY(cudaEventRecord(ob->copy_ev, P->s_copy), eb);
  P->st.loads++;
  return 0;
out:
  /* a CUDA failure after the pages were taken: the load is dropped (the
  ** context is most likely unusable anyway) */
  cudaStreamSynchronize(P->s_copy);
  for (int64_t j = 0; j < ob->npages; j++)
    P->owner[ob->page[j]] = -1;
  P->st.free_pages += ob->npages;
  P->st.used_pages -= ob->npages;
  ob->npages = 0;
  ob->state = LSIM__OBJ_FREE;
  ob->st_off = -1;
  P->pend[id] = -1;
  return rc;
}

/* Drop a pending generation whose copy event has completed. */
static void lsim__pg_drop(lsim_cuda_pool *P, int o) {
  lsim__obj *ob = &P->obj[o];
  for (int64_t j = 0; j < ob->npages; j++)
    P->owner[ob->page[j]] = -1;
  P->st.free_pages += ob->npages;
  P->st.used_pages -= ob->npages;
  ob->npages = 0;
  ob->state = LSIM__OBJ_FREE;
  ob->st_off = -1;
  P->pend[ob->id] = -1;
}

static void lsim__pg_retire(lsim_cuda_pool *P, int o) {
  lsim__obj *ob = &P->obj[o];
  ob->state = LSIM__OBJ_RETIRED;
  ob->retire_seq = ++P->retire_seq;
  P->st.used_pages -= ob->npages;
  P->st.fenced_pages += ob->npages;
  P->pub[ob->id] = -1;
}

extern "C" int lsim_cuda_pool_copy_done(lsim_cuda_pool *P, int id,
                                        lsim_errbuf *eb) {
  if (id < 0 || id >= P->cfg.max_adapters || P->pend[id] < 0)
    return lsim_fail(eb, LSIM_E_DEV_NO_LOAD, "pool: adapter %d has no load "
                                             "in flight", id);
  cudaError_t e = cudaEventQuery(P->obj[P->pend[id]].copy_ev);
  if (e == cudaSuccess)
    return 1;
  if (e == cudaErrorNotReady)
    return 0;
  return lsim_fail(eb, LSIM_E_BACKEND, "cuda: copy event of adapter %d: %s",
                   id, cudaGetErrorString(e));
}

extern "C" lsim_err lsim_cuda_pool_publish(lsim_cuda_pool *P, int id, int wait,
                                           int64_t *gen, lsim_errbuf *eb) {
  lsim_err rc;
  int o;
  lsim__obj *ob;
  if (id < 0 || id >= P->cfg.max_adapters || P->pend[id] < 0)
    return lsim_fail(eb, LSIM_E_DEV_NO_LOAD,
                     "pool: adapter %d has no load to publish", id);
  o = P->pend[id];
  ob = &P->obj[o];
  if (wait) {
    LSIM_CUDA_RET(cudaEventSynchronize(ob->copy_ev), eb);
  } else {
    cudaError_t e = cudaEventQuery(ob->copy_ev);
    if (e == cudaErrorNotReady)
      return lsim_fail(eb, LSIM_E_DEV_PUBLISH_EARLY,
                       "pool: adapter %d generation %lld: copy event not "
                       "complete", id, (long long)ob->gen);
    if (e != cudaSuccess)
      return lsim_fail(eb, LSIM_E_BACKEND, "cuda: copy event of adapter %d: %s",
                       id, cudaGetErrorString(e));
  }
  /* the copy is complete: validate what was staged and what arrived */
  {
    lsim_digest now;
    const uint16_t *img = P->h_stage + ob->st_off * P->H;
    if ((rc = lsim_sha256(img, (size_t)(ob->npages * P->H * 2), &now, eb)))
      return rc;
    if (!lsim_digest_eq(&now, &ob->digest)) {
      long long g = (long long)ob->gen;
      lsim__pg_drop(P, o);
      P->st.failed_validations++;
      return lsim_fail(eb, LSIM_E_DEV_DIGEST,
                       "pool: adapter %d generation %lld: staged bytes fail "
                       "the digest check; generation %lld stays published",
                       id, g, (long long)P->gen[id]);
    }
    if ((uint64_t)P->h_csum[o] != ob->csum) {
      long long g = (long long)ob->gen;
      lsim__pg_drop(P, o);
      P->st.failed_validations++;
      return lsim_fail(eb, LSIM_E_DEV_CHECKSUM,
                       "pool: adapter %d generation %lld: device pages fail "
                       "the checksum; generation %lld stays published", id, g,
                       (long long)P->gen[id]);
    }
  }
  /* the one visibility point */
  if (P->pub[id] >= 0)
    lsim__pg_retire(P, P->pub[id]);
  ob->state = LSIM__OBJ_PUBLISHED;
  ob->st_off = -1;
  P->pend[id] = -1;
  P->pub[id] = o;
  P->gen[id] = ob->gen;
  (void)lsim_cuda_pool_load_ns(P, id); /* the events are settled now */
  P->st.publishes++;
  if (gen)
    *gen = ob->gen;
  return 0;
}

extern "C" lsim_err lsim_cuda_pool_retire(lsim_cuda_pool *P, int id,
                                          lsim_errbuf *eb) {
  if (id < 0 || id >= P->cfg.max_adapters)
    return lsim_fail(eb, LSIM_E_USAGE, "pool: adapter id %d out of range", id);
  if (P->pend[id] >= 0) {
    LSIM_CUDA_RET(cudaEventSynchronize(P->obj[P->pend[id]].copy_ev), eb);
    lsim__pg_drop(P, P->pend[id]);
  }
  if (P->pub[id] >= 0)
    lsim__pg_retire(P, P->pub[id]);
  return 0;
}

extern "C" lsim_err lsim_cuda_pool_adapter(const lsim_cuda_pool *P, int id,
                                           int64_t *gen, int *published,
                                           int *pending, lsim_errbuf *eb) {
  if (id < 0 || id >= P->cfg.max_adapters)
    return lsim_fail(eb, LSIM_E_USAGE, "pool: adapter id %d out of range", id);
  if (gen)
    *gen = P->gen[id];
  if (published)
    *published = P->pub[id] >= 0;
  if (pending)
    *pending = P->pend[id] >= 0;
  return 0;
}

extern "C" void lsim_cuda_pool_stats_get(const lsim_cuda_pool *P,
                                         lsim_cuda_pool_stats *out) {
  *out = P->st;
}

extern "C" void lsim_cuda_pool_pages(const lsim_cuda_pool *P, int id,
                                     int64_t *pages, int max, int *n) {
  *n = 0;
  if (id < 0 || id >= P->cfg.max_adapters || P->pub[id] < 0)
    return;
  const lsim__obj *ob = &P->obj[P->pub[id]];
  for (int64_t j = 0; j < ob->npages && j < max; j++)
    pages[j] = ob->page[j];
  *n = (int)ob->npages;
}

/* The paged kernel: one metadata copy and one launch on the launch stream
** (the correctness-first path, and the fallback for X or Y rows that are
** not 16-byte aligned). */
static lsim_err lsim__pg_launch_paged(lsim_cuda_pool *P, const lsim_rowplan *p,
                                      const int *remap, int ntiles, int rmax,
                                      const void *X, int ldx, void *Y,
                                      int ldy, lsim_errbuf *eb) {
  size_t need;
  int32_t *m;
  lsim__paged_args a;
  need = (size_t)3 * (size_t)ntiles + (size_t)3 * (size_t)p->nseg +
         (size_t)p->nactive;
  if (P->meta_live) {
    LSIM_CUDA_RET(cudaEventSynchronize(P->meta_ev), eb);
    P->meta_live = 0;
  }
  if (need > P->meta_cap) {
    size_t cap = need * 2;
    cudaFreeHost(P->h_meta);
    cudaFree(P->d_meta);
    P->h_meta = NULL;
    P->d_meta = NULL;
    P->meta_cap = 0;
    LSIM_CUDA_RET(cudaMallocHost((void **)&P->h_meta, cap * sizeof(int32_t)),
                  eb);
    LSIM_CUDA_RET(cudaMalloc((void **)&P->d_meta, cap * sizeof(int32_t)), eb);
    P->meta_cap = cap;
  }
  m = P->h_meta;
  {
    int k = 0;
    for (int s = 0; s < p->nseg; s++)
      for (int u = p->seg_offsets[s]; u < p->seg_offsets[s + 1];
           u += LSIM__PG_TR) {
        int nr = p->seg_offsets[s + 1] - u;
        m[3 * k] = s;
        m[3 * k + 1] = u;
        m[3 * k + 2] = nr < LSIM__PG_TR ? nr : LSIM__PG_TR;
        k++;
      }
    int32_t *sg = m + 3 * ntiles;
    for (int s = 0; s < p->nseg; s++) {
      int id = remap ? remap[p->seg_adapter[s]] : p->seg_adapter[s];
      float sc = P->obj[P->pub[id]].scale;
      sg[3 * s] = P->pub[id];
      sg[3 * s + 1] = p->seg_rank[s];
      memcpy(&sg[3 * s + 2], &sc, sizeof sc);
    }
    memcpy(sg + 3 * p->nseg, p->perm, (size_t)p->nactive * sizeof(int32_t));
  }
  a.pool = P->d_pool;
  a.ptab = P->d_ptab;
  a.meta = P->d_meta;
  a.X = (const uint16_t *)X;
  a.Y = (uint16_t *)Y;
  a.H = P->H;
  a.TW = P->TW;
  a.d_in = P->cfg.d_in;
  a.d_out = P->cfg.d_out;
  a.ldx = ldx;
  a.ldy = ldy;
  a.ntiles = ntiles;
  a.nseg = p->nseg;
  a.delay_ns = P->delay_launch;
  {
    size_t smem = (size_t)(2 + LSIM__PG_TR) * (size_t)rmax * sizeof(float);
    LSIM_CUDA_RET(cudaEventRecord(P->ev0, P->s_launch), eb);
    LSIM_CUDA_RET(cudaMemcpyAsync(P->d_meta, m, need * sizeof(int32_t),
                                  cudaMemcpyHostToDevice, P->s_launch), eb);
    LSIM_CUDA_RET(cudaEventRecord(P->meta_ev, P->s_launch), eb);
    P->meta_live = 1;
    if (P->cfg.dtype == LSIM_CUDA_FP16)
      lsim__paged_kernel<lsim__fp16>
          <<<(unsigned)ntiles, LSIM__PG_THREADS, smem, P->s_launch>>>(a);
    else
      lsim__paged_kernel<lsim__bf16>
          <<<(unsigned)ntiles, LSIM__PG_THREADS, smem, P->s_launch>>>(a);
    LSIM_CUDA_RET(cudaGetLastError(), eb);
    LSIM_CUDA_RET(cudaEventRecord(P->ev1, P->s_launch), eb);
  }
  return 0;
}

/*
** The fast paths (cuda.h) reading every factor row through the published
** generations' page tables: a paged plan of the pool's own lsim_cuda_lora
** context (its one metadata copy carries the per-plan adapter table:
** pool base, page-table address, rank and scale per plan id), then its at
** most two launches, all on the launch stream.
*/
/* Launch the fast path planned on P->L (the test hook's delay first). */
static lsim_err lsim__pg_run_fast(lsim_cuda_pool *P, const void *X, int ldx,
                                  void *Y, int ldy, lsim_errbuf *eb) {
  lsim_err rc;
  if (P->delay_launch > 0) { /* test hook: hold the launch on the device */
    lsim__pg_delay<<<1, 1, 0, P->s_launch>>>(P->delay_launch);
    LSIM_CUDA_RET(cudaGetLastError(), eb);
  }
  if ((rc = lsim_cuda_lora_run(P->L, X, ldx, Y, ldy, eb)))
    return rc;
  P->last_path = lsim_cuda_lora_path(P->L);
  return 0;
}

/* Plan p on the fast path (its metadata copy enqueued); timed: also launch
** it between the pool's two timing events. */
static lsim_err lsim__pg_launch_fast(lsim_cuda_pool *P, const lsim_rowplan *p,
                                     const int *remap, const void *X, int ldx,
                                     void *Y, int ldy, int timed,
                                     lsim_errbuf *eb) {
  lsim_err rc;
  int nent = 1;
  for (int s = 0; s < p->nseg; s++)
    if (p->seg_adapter[s] + 1 > nent)
      nent = p->seg_adapter[s] + 1;
  if (nent > P->refs_cap) {
    lsim_cuda_paged_ref *nr = (lsim_cuda_paged_ref *)realloc(
        P->refs, (size_t)nent * sizeof *nr);
    if (!nr)
      return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
    P->refs = nr;
    P->refs_cap = nent;
  }
  memset(P->refs, 0, (size_t)nent * sizeof *P->refs);
  for (int s = 0; s < p->nseg; s++) {
    int pid = p->seg_adapter[s], id = remap ? remap[pid] : pid;
    const lsim__obj *ob = &P->obj[P->pub[id]];
    P->refs[pid].ptab = P->d_ptab + (int64_t)P->pub[id] * P->TW;
    P->refs[pid].rank = ob->rank;
    P->refs[pid].scale = ob->scale;
  }
  if (!P->L) {
    lsim_cuda_lora_cfg c;
    memset(&c, 0, sizeof c);
    c.device = P->cfg.device;
    c.dtype = P->cfg.dtype;
    c.d_in = P->cfg.d_in;
    c.d_out = P->cfg.d_out;
    c.max_adapters = 1; /* paged plans bring their own table */
    c.stream = P->s_launch;
    if ((rc = lsim_cuda_lora_open(&P->L, &c, eb)))
      return rc;
    lsim_cuda_lora_get_tune(P->L, &P->tune0);
  }
  lsim_cuda_lora_set_tune(P->L, P->have_tune ? &P->tune : &P->tune0);
  if (timed)
    LSIM_CUDA_RET(cudaEventRecord(P->ev0, P->s_launch), eb);
  if ((rc = lsim_cuda_lora_plan_paged(P->L, p, P->path, P->d_pool, P->H,
                                      P->refs, nent, eb)))
    return rc;
  if (!timed) /* prepared: lsim__pg_run_fast launches it later */
    return 0;
  if ((rc = lsim__pg_run_fast(P, X, ldx, Y, ldy, eb)))
    return rc;
  LSIM_CUDA_RET(cudaEventRecord(P->ev1, P->s_launch), eb);
  return 0;
}

/* The checks every run makes: the launch snapshot of each segment's
** published generation and its rank; *ntiles and *rmax for the paged
** kernel. */
static lsim_err lsim__pg_check(lsim_cuda_pool *P, const lsim_rowplan *p,
                               const int *remap, int nremap, const void *X,
                               int ldx, const void *Y, int ldy, int *ntiles,
                               int *rmax, lsim_errbuf *eb) {
  *ntiles = *rmax = 0;
  P->timed = 0; /* a new run: nothing timed, nothing prepared */
  P->prep = 0;
  if (!p || (p->nactive > 0 && (!X || !Y)) || ldx < P->cfg.d_in ||
      ldy < P->cfg.d_out)
    return lsim_fail(eb, LSIM_E_USAGE, "pool run: bad plan, pointers or "
                                       "strides");
  if (p->nactive == 0)
    return 0;
  /* resolve every segment through the published map: the launch snapshot */
  for (int s = 0; s < p->nseg; s++) {
    int id = p->seg_adapter[s];
    if (remap)
      id = id >= 0 && id < nremap ? remap[id] : -1;
    if (id < 0 || id >= P->cfg.max_adapters || P->pub[id] < 0)
      return lsim_fail(eb, LSIM_E_DEV_NOT_PUBLISHED,
                       "pool run: adapter %d (plan id %d) has no published "
                       "generation", id, p->seg_adapter[s]);
    if (P->obj[P->pub[id]].rank != p->seg_rank[s])
      return lsim_fail(eb, LSIM_E_REF_RANK,
                       "pool run: adapter %d is resident at rank %d, the plan "
                       "says %d", id, P->obj[P->pub[id]].rank, p->seg_rank[s]);
    int len = p->seg_offsets[s + 1] - p->seg_offsets[s];
    *ntiles += (len + LSIM__PG_TR - 1) / LSIM__PG_TR;
    if (p->seg_rank[s] > *rmax)
      *rmax = p->seg_rank[s];
  }
  return 0;
}

static int lsim__pg_fast_ok(const lsim_cuda_pool *P, const void *X, int ldx,
                            const void *Y, int ldy) {
  return P->path != LSIM_CUDA_POOL_PAGED && !((uintptr_t)X & 15) &&
         !((uintptr_t)Y & 15) && !(ldx & 7) && !(ldy & 7);
}

/* The last-use event of every generation a launch of p named. */
static lsim_err lsim__pg_mark(lsim_cuda_pool *P, const lsim_rowplan *p,
                              const int *remap, lsim_errbuf *eb) {
  for (int s = 0; s < p->nseg; s++) {
    int id = remap ? remap[p->seg_adapter[s]] : p->seg_adapter[s];
    lsim__obj *ob = &P->obj[P->pub[id]];
    LSIM_CUDA_RET(cudaEventRecord(ob->last_use, P->s_launch), eb);
    ob->used = 1;
  }
  return 0;
}

extern "C" lsim_err lsim_cuda_pool_run(lsim_cuda_pool *P, const lsim_rowplan *p,
                                       const int *remap, int nremap,
                                       const void *X, int ldx, void *Y, int ldy,
                                       lsim_errbuf *eb) {
  lsim_err rc = 0;
  int ntiles = 0, rmax = 0;
  if ((rc = lsim__pg_check(P, p, remap, nremap, X, ldx, Y, ldy, &ntiles,
                           &rmax, eb)) ||
      p->nactive == 0)
    return rc;
  if (lsim__pg_fast_ok(P, X, ldx, Y, ldy)) {
    if ((rc = lsim__pg_launch_fast(P, p, remap, X, ldx, Y, ldy, 1, eb)))
      return rc;
  } else {
    if ((rc = lsim__pg_launch_paged(P, p, remap, ntiles, rmax, X, ldx, Y,
                                    ldy, eb)))
      return rc;
    P->last_path = LSIM_CUDA_POOL_PAGED;
  }
  if ((rc = lsim__pg_mark(P, p, remap, eb)))
    return rc;
  P->timed = 1;
  P->st.launches++;
  return rc;
}

extern "C" lsim_err lsim_cuda_pool_prepare(lsim_cuda_pool *P,
                                           const lsim_rowplan *p,
                                           const int *remap, int nremap,
                                           const void *X, int ldx, void *Y,
                                           int ldy, lsim_errbuf *eb) {
  lsim_err rc;
  int ntiles = 0, rmax = 0;
  if ((rc = lsim__pg_check(P, p, remap, nremap, X, ldx, Y, ldy, &ntiles,
                           &rmax, eb)))
    return rc;
  P->prep_p = p;
  P->prep_remap = remap;
  P->prep_X = X;
  P->prep_Y = Y;
  P->prep_ldx = ldx;
  P->prep_ldy = ldy;
  P->prep_ntiles = ntiles;
  P->prep_rmax = rmax;
  if (p->nactive == 0) {
    P->prep = 3;
    return 0;
  }
  if (!lsim__pg_fast_ok(P, X, ldx, Y, ldy)) {
    P->prep = 2;
    return 0;
  }
  if ((rc = lsim__pg_launch_fast(P, p, remap, X, ldx, Y, ldy, 0, eb)))
    return rc;
  P->prep = 1;
  return 0;
}

extern "C" void *lsim_cuda_pool_stream(const lsim_cuda_pool *P) {
  return (void *)P->s_launch;
}

extern "C" int lsim_cuda_pool_prepared_fast(const lsim_cuda_pool *P) {
  return P->prep == 1 || P->prep == 3;
}

extern "C" lsim_err lsim_cuda_pool_launch(lsim_cuda_pool *P,
                                          lsim_errbuf *eb) {
  lsim_err rc = 0;
  if (!P->prep)
    return lsim_fail(eb, LSIM_E_STATE, "pool launch: nothing prepared");
  if (P->prep == 1)
    rc = lsim__pg_run_fast(P, P->prep_X, P->prep_ldx, P->prep_Y, P->prep_ldy,
                           eb);
  else if (P->prep == 2) {
    rc = lsim__pg_launch_paged(P, P->prep_p, P->prep_remap, P->prep_ntiles,
                               P->prep_rmax, P->prep_X, P->prep_ldx,
                               P->prep_Y, P->prep_ldy, eb);
    P->last_path = LSIM_CUDA_POOL_PAGED;
  }
  return rc;
}

extern "C" lsim_err lsim_cuda_pool_mark_used(lsim_cuda_pool *P,
                                             lsim_errbuf *eb) {
  lsim_err rc = 0;
  if (P->prep == 1 || P->prep == 2) {
    rc = lsim__pg_mark(P, P->prep_p, P->prep_remap, eb);
    P->st.launches++;
  }
  P->prep = 0;
  return rc;
}

/* ---- one iteration's launches as a CUDA graph ------------------------------ */

struct lsim_cuda_graph {
  cudaGraphExec_t exec;
  int empty; /* the last capture held no work: launch is a no-op */
  int64_t captures, updates;
};

extern "C" lsim_err lsim_cuda_graph_open(lsim_cuda_graph **g,
                                         lsim_errbuf *eb) {
  *g = (lsim_cuda_graph *)calloc(1, sizeof **g);
  return *g ? 0 : lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
}

extern "C" lsim_err lsim_cuda_graph_begin(lsim_cuda_graph *g, void *stream,
                                          lsim_errbuf *eb) {
  (void)g;
  LSIM_CUDA_RET(cudaStreamBeginCapture((cudaStream_t)stream,
                                       cudaStreamCaptureModeThreadLocal),
                eb);
  return 0;
}

extern "C" lsim_err lsim_cuda_graph_end(lsim_cuda_graph *g, void *stream,
                                        int ok, lsim_errbuf *eb) {
  cudaGraph_t gr = nullptr;
  cudaError_t e = cudaStreamEndCapture((cudaStream_t)stream, &gr);
  lsim_err rc = 0;
  if (!ok || e != cudaSuccess) {
    if (gr)
      cudaGraphDestroy(gr);
    cudaGetLastError(); /* the capture's error is reported here, not later */
    return ok ? lsim_fail(eb, LSIM_E_BACKEND, "cuda: graph capture: %s",
                          cudaGetErrorString(e))
              : 0;
  }
  size_t nodes = 0;
  if (cudaGraphGetNodes(gr, nullptr, &nodes) == cudaSuccess && nodes == 0) {
    cudaGraphDestroy(gr); /* nothing was launched: nothing to replay */
    g->empty = 1;
    return 0;
  }
  g->empty = 0;
  if (g->exec) { /* same topology as the last iteration: update in place */
    cudaGraphExecUpdateResultInfo info;
    if (cudaGraphExecUpdate(g->exec, gr, &info) == cudaSuccess) {
      g->updates++;
      cudaGraphDestroy(gr);
      goto upload;
    }
    cudaGetLastError();
    cudaGraphExecDestroy(g->exec);
    g->exec = nullptr;
  }
  e = cudaGraphInstantiateWithFlags(&g->exec, gr, 0);
  cudaGraphDestroy(gr);
  if (e != cudaSuccess) {
    g->exec = nullptr;
    cudaGetLastError();
    rc = lsim_fail(eb, LSIM_E_BACKEND, "cuda: graph instantiate: %s",
                   cudaGetErrorString(e));
    return rc;
  }
  g->captures++;
upload:
  /* the work descriptors go to the device now, not inside the first
  ** (timed) launch */
  LSIM_CUDA_RET(cudaGraphUpload(g->exec, (cudaStream_t)stream), eb);
  return 0;
}

extern "C" lsim_err lsim_cuda_graph_launch(lsim_cuda_graph *g, void *stream,
                                           lsim_errbuf *eb) {
  if (g->empty)
    return 0;
  if (!g->exec)
    return lsim_fail(eb, LSIM_E_STATE, "graph launch: nothing captured");
  LSIM_CUDA_RET(cudaGraphLaunch(g->exec, (cudaStream_t)stream), eb);
  return 0;
}

extern "C" void lsim_cuda_graph_counts(const lsim_cuda_graph *g,
                                       int64_t *captures, int64_t *updates) {
  *captures = g ? g->captures : 0;
  *updates = g ? g->updates : 0;
}

extern "C" void lsim_cuda_graph_close(lsim_cuda_graph *g) {
  if (!g)
    return;
  if (g->exec)
    cudaGraphExecDestroy(g->exec);
  free(g);
}

extern "C" lsim_err lsim_cuda_pool_last_ns(lsim_cuda_pool *P, int64_t *ns,
                                           lsim_errbuf *eb) {
  float ms = 0;
  *ns = 0;
  if (!P->timed)
    return 0;
  LSIM_CUDA_RET(cudaEventSynchronize(P->ev1), eb);
  LSIM_CUDA_RET(cudaEventElapsedTime(&ms, P->ev0, P->ev1), eb);
  *ns = (int64_t)((double)ms * 1e6 + 0.5);
  return 0;
}

extern "C" lsim_err lsim_cuda_pool_sync(lsim_cuda_pool *P, lsim_errbuf *eb) {
  LSIM_CUDA_RET(cudaStreamSynchronize(P->s_copy), eb);
  LSIM_CUDA_RET(cudaStreamSynchronize(P->s_launch), eb);
  return 0;
}

/* ---- test hooks ---------------------------------------------------------------- */

extern "C" lsim_err lsim_cuda_pool__corrupt_staged(lsim_cuda_pool *P, int id,
                                                   size_t byte,
                                                   lsim_errbuf *eb) {
  if (id < 0 || id >= P->cfg.max_adapters || P->pend[id] < 0)
    return lsim_fail(eb, LSIM_E_DEV_NO_LOAD, "pool: adapter %d has no load",
                     id);
  lsim__obj *ob = &P->obj[P->pend[id]];
  if (byte >= (size_t)(ob->npages * P->H * 2))
    return lsim_fail(eb, LSIM_E_USAGE, "pool: byte %zu past the image", byte);
  ((unsigned char *)(P->h_stage + ob->st_off * P->H))[byte] ^= 0x5a;
  return 0;
}

extern "C" void lsim_cuda_pool__set_delay(lsim_cuda_pool *P, int64_t launch_ns,
                                          int64_t copy_ns) {
  P->delay_launch = launch_ns;
  P->delay_copy = copy_ns;
}

extern "C" void lsim_cuda_pool__set_unfenced(lsim_cuda_pool *P, int unfenced) {
  P->unfenced = unfenced;
}

extern "C" int64_t lsim_cuda_pool_load_ns(lsim_cuda_pool *P, int id) {
  if (!P || id < 0 || id >= P->cfg.max_adapters)
    return -1;
  if (P->load_ns[id] == -2) {
    const lsim__obj *ob = &P->obj[P->lastobj[id]];
    float ms = 0;
    if (ob->id != id || cudaEventSynchronize(ob->t1) != cudaSuccess ||
        cudaEventElapsedTime(&ms, ob->t0, ob->t1) != cudaSuccess) {
      P->load_ns[id] = -1;
      return -1;
    }
    P->load_ns[id] = (int64_t)llround((double)ms * 1e6);
  }
  return P->load_ns[id];
}
