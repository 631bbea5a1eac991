/*
** attn_cases.h: the paged attention check shared by tests/test_cuda_attn.c
** (Criterion) and tools/bench_attention.cu --check (libc and the CUDA
** driver only, for compute-sanitizer).  C and C++; header-only (every
** function static); needs backends/cuda/cuda.h and attn.cuh.
**
** One case: a batch of sequences (prefill entries first, then decode
** entries), each with its own pages taken from a shuffled pool, so that no
** two consecutive tokens of a page boundary sit in neighbouring pages.  The
** whole pool (every layer, every page, used or not) holds random bf16
** values; the prior context is whatever its pages hold.  The batch's Q, K
** and V are one fused [T][(q_heads + 2 kv_heads) * D] buffer, used in
** place.  The output has padded rows with canaries and is NaN before every
** run, the split workspace too.  After append + run:
**
**   - every pool byte equals the host image with exactly the new rows' K
**     and V of the layer written into their slots (nothing else changed);
**   - every output element is within ATTN_TOL of a float64 reference
**     computed from the same bf16 inputs (the softmax in float64);
**   - the padding canaries are intact.
**
** With `rows2` a second step continues the sequences (chunked prefill after
** a first chunk, decode after a prefill): its keys include the rows the
** first step appended.
**
** Error bound.  With bf16 inputs, fp32 accumulation and the probabilities
** rounded to bf16 before P.V, |out - ref| <= 2^-9 max|v| (P rounding; the
** normaliser is summed from the unrounded values) + 2^-9 max|v| (the output
** rounded to bf16) + the fp32 score error (about 1e-5 max|v| at these
** magnitudes).  ATTN_TOL is (2^-8 + 2^-10) max|v|, max|v| over the keys the
** row sees.
*/
#ifndef LSIM_TESTS_ATTN_CASES_H
#define LSIM_TESTS_ATTN_CASES_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/attn.cuh"
#include "backends/cuda/cuda.h"

#define ATTN_TOL_REL (1.0 / 256 + 1.0 / 1024)
#define ATTN_MAXSEQ 96

typedef struct attn_seq_spec {
  int rows;   /* rows in step 1 */
  int ctx;    /* tokens already cached before step 1 */
  int decode; /* step 1: a decode entry (rows must be 1) */
  int rows2;  /* rows in step 2 (0: absent; 1 goes as a decode entry) */
} attn_seq_spec;

typedef struct attn_spec {
  int q_heads, kv_heads, D;
  int layers, layer; /* layers in a page; the one attended */
  int tpp;           /* tokens per page */
  double qscale;     /* q values in [-qscale, qscale]; k, v in [-1, 1] */
  int nseq;
  attn_seq_spec seq[ATTN_MAXSEQ];
  int splits;     /* tune.splits (0: auto) */
  int pre_splits; /* tune.pre_splits */
  int wide;       /* tune.wide (0: default) */
  uint64_t seed;
} attn_spec;

typedef struct attn_result {
  double max_err;   /* max |out - ref| */
  double max_ratio; /* max |out - ref| / tol */
  double rel_l2;    /* ||out - ref|| / ||ref|| */
  long checked;     /* output elements compared */
  char desc[300];   /* the plan's description (last step) */
} attn_result;

typedef struct attn_rng {
  uint64_t s;
} attn_rng;
static uint64_t attn_next(attn_rng *r) {
  uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static double attn_unit(attn_rng *r) { /* [-1, 1) */
  return (double)(attn_next(r) >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}
static uint16_t attn_bf(double x) {
  return lsim_cuda_from_float(LSIM_CUDA_BF16, (float)x);
}
static double attn_f(uint16_t h) {
  return (double)lsim_cuda_to_float(LSIM_CUDA_BF16, h);
}

#define ATTN_FAIL(...)                    \
  do {                                    \
    snprintf(why, nwhy, __VA_ARGS__);     \
    rc = 1;                               \
    goto out;                             \
  } while (0)
#define ATTN_OK(call)                                                  \
  do {                                                                 \
    lsim_errbuf eb_ = LSIM_ERRBUF_INIT;                                \
    lsim_errbuf *eb = &eb_;                                            \
    lsim_err e_ = (call);                                              \
    if (e_)                                                            \
      ATTN_FAIL("%.80s: %s: %.250s", #call, lsim_err_name(e_), eb_.msg); \
  } while (0)

/*
** Run spec; 0 when every check passed (res filled), 1 with why filled, -1
** when the environment failed (also in why).
*/
static int attn_run_case(const attn_spec *sp, attn_result *res, char *why,
                         size_t nwhy) {
  int rc = 0;
  attn_rng rng;
  rng.s = sp->seed * 0x9E3779B97F4A7C15ull + 17;
  const int H = sp->q_heads, KV = sp->kv_heads, D = sp->D, G = H / KV;
  const int64_t tpp = sp->tpp;
  const int64_t page_bytes = tpp * lsim_cuda_attn_kv_bytes_per_token(
                                       sp->layers, KV, D) +
                             32; /* a gap the kernels must not touch */
  const int64_t page_elems = page_bytes / 2;
  const int W = (H + 2 * KV) * D;   /* fused QKV row */
  const int64_t ldqkv = W + 8;      /* padded */
  const int64_t ldo = (int64_t)H * D + 8;
  int n = sp->nseq;
  int64_t npages = 0, pool_pages;
  int32_t *pages_of[ATTN_MAXSEQ];
  int len[ATTN_MAXSEQ]; /* tokens in the cache so far */
  uint16_t *pool = NULL, *pool_dev_img = NULL, *qkv = NULL, *outh = NULL;
  int32_t *perm = NULL;
  void *d_pool = NULL, *d_qkv = NULL, *d_out = NULL;
  lsim_cuda_attn *A = NULL;
  int max_rows = 0;
  int64_t max_kv = 1;
  double err2 = 0, ref2 = 0;
  memset(pages_of, 0, sizeof pages_of);
  memset(res, 0, sizeof *res);
  if (n < 1 || n > ATTN_MAXSEQ || H % KV)
    ATTN_FAIL("bad spec");
  {
    int r1 = 0, r2 = 0;
    for (int j = 0; j < n; j++) {
      const attn_seq_spec *q = &sp->seq[j];
      const int64_t tot = (int64_t)q->ctx + q->rows + q->rows2;
      npages += (tot + tpp - 1) / tpp;
      r1 += q->rows;
      r2 += q->rows2;
      if (tot > max_kv)
        max_kv = tot;
    }
    max_rows = r1 > r2 ? r1 : r2;
  }
  pool_pages = npages + 5 + npages / 3; /* unused pages between */
  pool = (uint16_t *)malloc((size_t)(pool_pages * page_elems) * 2);
  pool_dev_img = (uint16_t *)malloc((size_t)(pool_pages * page_elems) * 2);
  perm = (int32_t *)malloc((size_t)pool_pages * sizeof *perm);
  qkv = (uint16_t *)malloc((size_t)max_rows * ldqkv * 2);
  outh = (uint16_t *)malloc((size_t)max_rows * ldo * 2);
  if (!pool || !pool_dev_img || !perm || !qkv || !outh)
    ATTN_FAIL("out of host memory");
  for (int64_t i = 0; i < pool_pages * page_elems; i++)
    pool[i] = attn_bf(attn_unit(&rng));
  for (int64_t i = 0; i < pool_pages; i++)
    perm[i] = (int32_t)i;
  for (int64_t i = pool_pages - 1; i > 0; i--) {
    const int64_t k = (int64_t)(attn_next(&rng) % (uint64_t)(i + 1));
    const int32_t t = perm[i];
    perm[i] = perm[k];
    perm[k] = t;
  }
  {
    int64_t at = 0;
    for (int j = 0; j < n; j++) {
      const attn_seq_spec *q = &sp->seq[j];
      const int64_t np = ((int64_t)q->ctx + q->rows + q->rows2 + tpp - 1) / tpp;
      pages_of[j] = (int32_t *)malloc((size_t)(np + 1) * sizeof(int32_t));
      if (!pages_of[j])
        ATTN_FAIL("out of host memory");
      memcpy(pages_of[j], perm + at, (size_t)np * sizeof(int32_t));
      at += np;
      len[j] = q->ctx;
    }
  }
  ATTN_OK(lsim_cuda_malloc(&d_pool, (size_t)(pool_pages * page_bytes), eb));
  ATTN_OK(lsim_cuda_malloc(&d_qkv, (size_t)max_rows * ldqkv * 2, eb));
  ATTN_OK(lsim_cuda_malloc(&d_out, (size_t)max_rows * ldo * 2, eb));
  ATTN_OK(lsim_cuda_h2d(d_pool, pool, (size_t)(pool_pages * page_bytes), eb));
  {
    lsim_cuda_attn_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.q_heads = H;
    cfg.kv_heads = KV;
    cfg.head_dim = D;
    cfg.layers = sp->layers;
    cfg.page_bytes = page_bytes;
    cfg.pool_pages = pool_pages;
    cfg.max_seqs = n;
    cfg.max_rows = max_rows;
    cfg.max_kv = max_kv;
    ATTN_OK(lsim_cuda_attn_open(&A, &cfg, eb));
    if (lsim_cuda_attn_page_tokens(A) != tpp)
      ATTN_FAIL("tpp %lld, want %lld", (long long)lsim_cuda_attn_page_tokens(A),
                (long long)tpp);
    lsim_cuda_attn_tune tu;
    lsim_cuda_attn_get_tune(A, &tu);
    tu.splits = sp->splits;
    tu.pre_splits = sp->pre_splits;
    tu.wide = sp->wide;
    lsim_cuda_attn_set_tune(A, &tu);
  }
  for (int step = 0; step < 2; step++) {
    /* the step's batch: prefill entries, then decode entries */
    int order[ATTN_MAXSEQ], rows[ATTN_MAXSEQ], m = 0, npre = 0;
    for (int pass = 0; pass < 2; pass++)
      for (int j = 0; j < n; j++) {
        const attn_seq_spec *q = &sp->seq[j];
        const int r = step ? q->rows2 : q->rows;
        const int dec = step ? r == 1 : q->decode;
        if (r <= 0 || dec != pass)
          continue;
        order[m] = j;
        rows[m++] = r;
        if (!pass)
          npre++;
      }
    if (m == 0)
      continue;
    int32_t q_start[ATTN_MAXSEQ + 1], ctxv[ATTN_MAXSEQ];
    const int32_t *bt[ATTN_MAXSEQ];
    q_start[0] = 0;
    for (int i = 0; i < m; i++) {
      q_start[i + 1] = q_start[i] + rows[i];
      ctxv[i] = len[order[i]];
      bt[i] = pages_of[order[i]];
    }
    const int T = q_start[m];
    for (int64_t i = 0; i < (int64_t)T * ldqkv; i++)
      qkv[i] = attn_bf(attn_unit(&rng) * ((i % ldqkv) < (int64_t)H * D
                                              ? sp->qscale
                                              : 1.0));
    for (int64_t i = 0; i < (int64_t)T * ldo; i++)
      outh[i] = (i % ldo) < (int64_t)H * D ? 0xFFFFu : 0x5A5Au; /* NaN; canary */
    ATTN_OK(lsim_cuda_h2d(d_qkv, qkv, (size_t)T * ldqkv * 2, eb));
    ATTN_OK(lsim_cuda_h2d(d_out, outh, (size_t)T * ldo * 2, eb));
    lsim_cuda_attn_batch b;
    b.nseq = m;
    b.npre = npre;
    b.q_start = q_start;
    b.ctx = ctxv;
    b.block_table = bt;
    ATTN_OK(lsim_cuda_attn_plan(A, &b, eb));
    ATTN_OK(lsim_cuda_attn_poison(A, eb));
    const uint16_t *dq = (const uint16_t *)d_qkv;
    ATTN_OK(lsim_cuda_attn_append(A, sp->layer, d_pool, dq + H * D, ldqkv,
                                  dq + (H + KV) * D, ldqkv, eb));
    ATTN_OK(lsim_cuda_attn_run(A, sp->layer, d_pool, dq, ldqkv, d_out, ldo, eb));
    ATTN_OK(lsim_cuda_attn_sync(A, eb));
    lsim_cuda_attn_describe(A, res->desc, sizeof res->desc);
    /* the host image: the new rows' K and V in their slots */
    for (int i = 0; i < m; i++) {
      const int j = order[i];
      for (int r = 0; r < rows[i]; r++) {
        const int64_t t = (int64_t)len[j] + r;
        const int64_t pg = pages_of[j][t / tpp];
        for (int kv = 0; kv < 2; kv++)
          for (int h = 0; h < KV; h++) {
            const int64_t o = pg * page_elems +
                              lsim_cuda_attn_kv_offset(tpp, KV, D, sp->layer, kv,
                                                       t % tpp, h);
            memcpy(pool + o,
                   qkv + (int64_t)(q_start[i] + r) * ldqkv + (H + kv * KV + h) * D,
                   (size_t)D * 2);
          }
      }
    }
    ATTN_OK(lsim_cuda_d2h(pool_dev_img, d_pool,
                          (size_t)(pool_pages * page_bytes), eb));
    for (int64_t i = 0; i < pool_pages * page_elems; i++)
      if (pool_dev_img[i] != pool[i])
        ATTN_FAIL("step %d: pool element %lld (page %lld, offset %lld) is "
                  "%04x, want %04x",
                  step + 1, (long long)i, (long long)(i / page_elems),
                  (long long)(i % page_elems), pool_dev_img[i], pool[i]);
    ATTN_OK(lsim_cuda_d2h(outh, d_out, (size_t)T * ldo * 2, eb));
    /* float64 reference */
    double *sc = (double *)malloc(sizeof(double) * (size_t)max_kv);
    if (!sc)
      ATTN_FAIL("out of host memory");
    for (int i = 0; i < m; i++) {
      const int j = order[i];
      for (int r = 0; r < rows[i]; r++) {
        const int row = q_start[i] + r;
        const int64_t nk = (int64_t)len[j] + r + 1; /* visible keys */
        for (int hq = 0; hq < H; hq++) {
          const int h = hq / G;
          const uint16_t *qv = qkv + (int64_t)row * ldqkv + (int64_t)hq * D;
          double mx = -INFINITY, vmax = 0, sum = 0;
          for (int64_t t = 0; t < nk; t++) {
            const uint16_t *kp = pool + (int64_t)pages_of[j][t / tpp] * page_elems +
                                 lsim_cuda_attn_kv_offset(tpp, KV, D, sp->layer,
                                                          0, t % tpp, h);
            double s = 0;
            for (int d = 0; d < D; d++)
              s += attn_f(qv[d]) * attn_f(kp[d]);
            sc[t] = s / sqrt((double)D);
            if (sc[t] > mx)
              mx = sc[t];
          }
          for (int64_t t = 0; t < nk; t++) {
            sc[t] = exp(sc[t] - mx);
            sum += sc[t];
          }
          for (int d = 0; d < D; d++) {
            double o = 0;
            for (int64_t t = 0; t < nk; t++) {
              const uint16_t *vp = pool +
                                   (int64_t)pages_of[j][t / tpp] * page_elems +
                                   lsim_cuda_attn_kv_offset(tpp, KV, D, sp->layer,
                                                            1, t % tpp, h);
              o += sc[t] * attn_f(vp[d]);
              if (d == 0) {
                for (int e = 0; e < D; e++)
                  if (fabs(attn_f(vp[e])) > vmax)
                    vmax = fabs(attn_f(vp[e]));
              }
            }
            o /= sum;
            const double got = attn_f(outh[(int64_t)row * ldo + hq * D + d]);
            const double err = fabs(got - o), tol = ATTN_TOL_REL * vmax;
            if (!(err <= tol)) {
              free(sc);
              ATTN_FAIL("step %d: sequence %d (ctx %d) row %d head %d dim %d: "
                        "got %.6g, want %.6g (err %.3g > tol %.3g)",
                        step + 1, j, len[j], r, hq, d, got, o, err, tol);
            }
            if (err > res->max_err)
              res->max_err = err;
            if (tol > 0 && err / tol > res->max_ratio)
              res->max_ratio = err / tol;
            err2 += err * err;
            ref2 += o * o;
            res->checked++;
          }
        }
        for (int64_t e = (int64_t)H * D; e < ldo; e++)
          if (outh[(int64_t)row * ldo + e] != 0x5A5Au) {
            free(sc);
            ATTN_FAIL("step %d: row %d: padding element %lld overwritten",
                      step + 1, row, (long long)e);
          }
      }
    }
    free(sc);
    for (int i = 0; i < m; i++)
      len[order[i]] += rows[i];
  }
  res->rel_l2 = ref2 > 0 ? sqrt(err2 / ref2) : 0;
out:
  lsim_cuda_attn_close(A);
  lsim_cuda_free(d_pool);
  lsim_cuda_free(d_qkv);
  lsim_cuda_free(d_out);
  for (int j = 0; j < ATTN_MAXSEQ; j++)
    free(pages_of[j]);
  free(pool);
  free(pool_dev_img);
  free(perm);
  free(qkv);
  free(outh);
  return rc;
}

/* A random awkward batch: GQA ratio from {1, 4, 8}, head dim 64 or 128,
** tpp not a power of two, up to `maxseq` sequences mixing one-token
** prompts, prefills with and without prior context, decodes, second
** steps; contexts up to maxctx. */
static void attn_random_spec(attn_spec *sp, uint64_t seed, int maxseq,
                             int maxctx) {
  attn_rng r;
  r.s = seed * 0xD1B54A32D192ED03ull + 5;
  memset(sp, 0, sizeof *sp);
  static const int ratios[3] = {1, 4, 8};
  static const int tpps[6] = {1, 3, 7, 16, 5, 13};
  sp->kv_heads = 1 + (int)(attn_next(&r) % 3);
  sp->q_heads = sp->kv_heads * ratios[attn_next(&r) % 3];
  sp->D = attn_next(&r) % 2 ? 128 : 64;
  sp->layers = 1 + (int)(attn_next(&r) % 3);
  sp->layer = (int)(attn_next(&r) % (uint64_t)sp->layers);
  sp->tpp = tpps[attn_next(&r) % 6];
  sp->qscale = attn_next(&r) % 2 ? 4.0 : 1.0;
  sp->nseq = 1 + (int)(attn_next(&r) % (uint64_t)maxseq);
  sp->seed = seed;
  sp->splits = attn_next(&r) % 3 == 0 ? 1 + (int)(attn_next(&r) % 5) : 0;
  sp->pre_splits = attn_next(&r) % 4 == 0 ? 1 + (int)(attn_next(&r) % 3) : 0;
  sp->wide = (int)(seed % 4); /* every wide-kernel variant */
  int ndec = (int)(attn_next(&r) % (uint64_t)(sp->nseq + 1));
  for (int j = 0; j < sp->nseq; j++) {
    attn_seq_spec *q = &sp->seq[j];
    const int kind = (int)(attn_next(&r) % 4);
    q->ctx = kind == 0 ? 0 : (int)(attn_next(&r) % (uint64_t)(maxctx + 1));
    q->decode = j >= sp->nseq - ndec;
    q->rows = q->decode ? 1
              : kind == 1 ? 1
                          : 1 + (int)(attn_next(&r) % 150);
    q->rows2 = attn_next(&r) % 3 == 0 ? 0
               : attn_next(&r) % 2  ? 1
                                    : 1 + (int)(attn_next(&r) % 70);
  }
}

#endif /* LSIM_TESTS_ATTN_CASES_H */
