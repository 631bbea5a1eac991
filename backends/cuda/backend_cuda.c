/*
** backend_cuda.c: the `cuda` replay backend.
**
** Each iteration's adapter work for one d_in x d_out target module runs
** through the device adapter pool (pool.h: the chooser's fast path reading
** the page tables) on the
** tensors every tensor backend shares (backends/cpu_ref/materialise.h), in
** fp16 (11 significant bits, so the small-integer deltas of power-of-two
** ranks up to 64 are representable).
**
** Adapters are resident across iterations: an artifact (adapter, version)
** the iteration needs and the pool does not hold is loaded through the
** pool's event-fenced, digest-validated publication (pinned staging, copy
** stream, copy event, SHA-256 of the staged bytes, device checksum) and
** only then named by a launch; when the pool's pages or ids run out, the
** least recently used artifact the iteration does not need is retired, and
** its pages are reused only after its last launch completed.
**
** iterations.backend_ns is device time: two CUDA events on the launch
** stream around the iteration's metadata copy and kernel launch.  With
** verify, the exact reference (cpu_ref, per-row family) is computed too and
** the comparison becomes a `validations` row: bit-exact is required when
** the inputs were representable, a relative error of at most 1e-2
** otherwise; anything worse fails the iteration (and so the run).
** Simulated time still comes from the cost model.
**
** Model shape (cfg.layers > 0, `lorasim replay --tensor-shape model`): the
** iteration's adapter work runs for every layer and every target module of
** the scenario at its real shapes, one launch per (layer, target) module
** instance, each instance with its own device pool (its own factors);
** backend_ns is the device time of all of them together (two CUDA events
** around the sequence).  The values are generated directly in fp16, not
** through rationals (a 4096-wide module per adapter per layer would not
** fit the exact path's budget): A rows of LSIM__MS_NNZ entries +-1 at
** seeded positions, B entries in {-1, 0, 1}, scale 1/2, X entries in
** {-1, 0, 1}; so |shrink| <= LSIM__MS_NNZ and |delta| <= r * NNZ / 2,
** at most 1024 for ranks up to the model-shape pool's 128: every value is
** an integer fp16 holds, and fp32 accumulation of integers is exact.
** With verify, one instance per iteration (rotating over all of them) is
** run again into a zeroed buffer and compared, on up to LSIM__MS_VROWS
** rows (all of them when the iteration has no more), with an integer
** reference computed here; bit-exact equality is owed.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <stdio.h>

#include "../../sim/rng.h"
#include "../backend.h"
#include "../cpu_ref/materialise.h"
#include "gpu_exact.h"
#include "pool.h"

#define LSIM__CU_IDS 64        /* pool adapter ids */
#define LSIM__CU_RANK 256      /* largest rank the replay pool takes */
#define LSIM__CU_PAGES 4096    /* pool pages (a page: one 16-wide vector) */
#define LSIM__MS_RANK 128      /* largest rank of a model-shape pool */
#define LSIM__MS_NNZ 16        /* non-zeros per A row in model shape */
#define LSIM__MS_VROWS 256     /* rows compared per verified iteration */

typedef struct lsim__cu_res {
  int art, ver, rank;  /* the artifact */
  int exact;           /* its factors were representable in fp16 */
  int64_t last_iter;   /* last iteration that needed it */
} lsim__cu_res;

typedef struct lsim__cuda_state {
  lsim_backend_cfg cfg;
  lsim_iter_tensors it;
  /* module instances: one (small), or layers x ntargets (model shape,
  ** instance m = layer * ntargets + target); every pool holds the same
  ** artifacts under the same ids (res below) */
  int nmod;
  lsim_cuda_pool **pools;
  int *mod_din, *mod_dout;
  lsim_cuda_pool *pool; /* pools[0] */
  void *stream;
  lsim_cuda_timer *timer;  /* model shape: around all instances */
  lsim_cuda_graph *graph;  /* model shape: the instances' launches */
  int graph_off;           /* a capture failed: direct launches from then */
  void **dys;              /* model shape: Y per target */
  size_t *dys_cap;
  void *dyv;               /* model shape: the verified instance's Y */
  size_t dyv_cap;
  int maxd_in, maxd_out;
  int64_t nverified;
  char vref[96];
  lsim__cu_res res[LSIM__CU_IDS]; /* by pool id; art < 0: unused */
  int *remap;   /* plan id -> pool id */
  int remap_cap;
  uint16_t *hx, *hy, *hA, *hB;
  size_t hx_cap, hy_cap, hf_cap;
  void *dx, *dy;
  size_t dx_cap, dy_cap; /* bytes */
} lsim__cuda_state;

/* Grow a host buffer of 16-bit values to n elements. */
static lsim_err lsim__grow16(uint16_t **p, size_t *cap, size_t n,
                             lsim_errbuf *eb) {
  if (n <= *cap)
    return 0;
  uint16_t *q = realloc(*p, n * sizeof *q);
  if (!q)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  *p = q;
  *cap = n;
  return 0;
}

static lsim_err lsim__growdev(void **p, size_t *cap, size_t bytes,
                              lsim_errbuf *eb) {
  if (bytes <= *cap)
    return 0;
  lsim_cuda_free(*p);
  *p = NULL;
  *cap = 0;
  lsim_err rc = lsim_cuda_malloc(p, bytes * 2, eb);
  if (!rc)
    *cap = bytes * 2;
  return rc;
}

/* q rounded to fp16; *exact cleared when that is not q itself. */
static uint16_t lsim__to16(mpq_t q, mpq_t back, int *exact) {
  uint16_t h = lsim_cuda_from_float(LSIM_CUDA_FP16, (float)mpq_get_d(q));
  mpq_set_d(back, (double)lsim_cuda_to_float(LSIM_CUDA_FP16, h));
  if (mpq_cmp(back, q) != 0)
    *exact = 0;
  return h;
}

/* Pool id of an artifact, or -1. */
static int lsim__cu_find(const lsim__cuda_state *s, int art, int ver) {
  for (int i = 0; i < LSIM__CU_IDS; i++)
    if (s->res[i].art == art && s->res[i].ver == ver)
      return i;
  return -1;
}

/* Retire pool id v in every instance; its pages are reused only after its
** last launch completed (the pool's fence). */
static lsim_err lsim__cu_retire(lsim__cuda_state *s, int v, lsim_errbuf *eb) {
  for (int m = 0; m < s->nmod; m++) {
    lsim_err rc = lsim_cuda_pool_retire(s->pools[m], v, eb);
    if (rc)
      return rc;
  }
  s->res[v].art = -1;
  return 0;
}

/* Retire the least recently used artifact not needed by iteration `iter`;
** its pool id, or -1 when every resident artifact is needed. */
static int lsim__cu_evict(lsim__cuda_state *s, int64_t iter, lsim_errbuf *eb,
                          lsim_err *rc) {
  int v = -1;
  for (int i = 0; i < LSIM__CU_IDS; i++)
    if (s->res[i].art >= 0 && s->res[i].last_iter != iter &&
        (v < 0 || s->res[i].last_iter < s->res[v].last_iter))
      v = i;
  if (v >= 0)
    *rc = lsim__cu_retire(s, v, eb);
  return v;
}

/* A stream keyed by several integers (the model-shape values). */
static void lsim__cu_keyed(lsim_rng *r, uint64_t seed, uint64_t a, uint64_t b,
                           uint64_t c, uint64_t d) {
  uint64_t k = seed ^ 0x5D1F0C0DE5EEDull;
  k = k * 0x9E3779B97F4A7C15ull ^ (a + 0x632BE59BD9B4E019ull);
  k = k * 0x9E3779B97F4A7C15ull ^ (b + 0x8CB92BA72F3D8DD7ull);
  k = k * 0x9E3779B97F4A7C15ull ^ (c + 0xA0761D6478BD642Full);
  k = k * 0x9E3779B97F4A7C15ull ^ (d + 0xE7037ED1A0B428DBull);
  lsim_rng_init(r, k, LSIM_RNG_TENSORS);
}

#define LSIM__H_ONE 0x3C00u  /* fp16 +1 */
#define LSIM__H_MONE 0xBC00u /* fp16 -1 */

/* Model-shape factors of artifact (art, ver) at rank r for instance m:
** A [r][d_in] (NNZ entries +-1 per row), B [d_out][r] in {-1, 0, 1}. */
static void lsim__ms_factors(const lsim__cuda_state *s, int m, int art,
                             int ver, int r, uint16_t *A, uint16_t *B) {
  const int d_in = s->mod_din[m], d_out = s->mod_dout[m];
  lsim_rng g;
  lsim__cu_keyed(&g, s->cfg.seed, 1, (uint64_t)art, (uint64_t)ver,
                 (uint64_t)m);
  memset(A, 0, (size_t)r * (size_t)d_in * sizeof *A);
  for (int i = 0; i < r; i++)
    for (int k = 0; k < LSIM__MS_NNZ; k++) {
      uint64_t u = lsim_rng_next(&g);
      A[(size_t)i * (size_t)d_in + (size_t)((u >> 1) % (uint64_t)d_in)] =
          (u & 1) ? LSIM__H_ONE : LSIM__H_MONE;
    }
  static const uint16_t tern[4] = {0, LSIM__H_ONE, LSIM__H_MONE, 0};
  size_t n = (size_t)d_out * (size_t)r;
  for (size_t i = 0; i < n; i += 32) {
    uint64_t u = lsim_rng_next(&g);
    for (size_t j = i; j < n && j < i + 32; j++, u >>= 2)
      B[j] = tern[u & 3];
  }
}

/* fp16 -> small integer for the values this file generates. */
static int lsim__h2i(uint16_t h) {
  return (int)lsim_cuda_to_float(LSIM_CUDA_FP16, h);
}

/* Load artifact (art, ver) of rank r into pool id `id` of every instance
** and publish it there; ad: its exact values (one-module mode), NULL in
** model shape. */
static lsim_err lsim__cu_load(lsim__cuda_state *s, int id, int art, int ver,
                              int r, const lsim_qadapter *ad, int64_t iter,
                              int *exact, lsim_errbuf *eb) {
  lsim_err rc = 0;
  *exact = 1;
  if ((rc = lsim__grow16(&s->hA, &s->hf_cap,
                         (size_t)r * (size_t)(s->maxd_in > s->maxd_out
                                                  ? s->maxd_in
                                                  : s->maxd_out),
                         eb)))
    return rc;
  uint16_t *nb = realloc(s->hB, s->hf_cap * sizeof *nb);
  if (!nb)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  s->hB = nb;
  float sc = 0.5f;
  if (ad) {
    const int d_in = s->mod_din[0], d_out = s->mod_dout[0];
    mpq_t back;
    mpq_init(back);
    for (int i = 0; i < r; i++)
      for (int j = 0; j < d_in; j++)
        s->hA[(size_t)i * (size_t)d_in + (size_t)j] =
            lsim__to16(LSIM_QAT(&ad->A, i, j), back, exact);
    for (int i = 0; i < d_out; i++)
      for (int j = 0; j < r; j++)
        s->hB[(size_t)i * (size_t)r + (size_t)j] =
            lsim__to16(LSIM_QAT(&ad->B, i, j), back, exact);
    sc = (float)mpq_get_d(ad->scale);
    mpq_set_d(back, (double)sc);
    if (mpq_cmp(back, ad->scale) != 0)
      *exact = 0;
    mpq_clear(back);
  }
  for (int m = 0; m < s->nmod; m++) {
    if (!ad)
      lsim__ms_factors(s, m, art, ver, r, s->hA, s->hB);
    for (;;) {
      lsim_errbuf e2 = LSIM_ERRBUF_INIT;
      rc = lsim_cuda_pool_load(s->pools[m], id, r, sc, s->hA, s->hB, NULL,
                               &e2);
      if (rc != LSIM_E_DEV_NOSPACE) {
        if (rc)
          return lsim_fail(eb, rc, "%s", e2.msg);
        break;
      }
      if (lsim__cu_evict(s, iter, eb, &rc) < 0)
        return rc ? rc : lsim_fail(eb, LSIM_E_DEV_NOSPACE, "%s", e2.msg);
      if (rc)
        return rc;
    }
    /* the one visibility point: after the copy event, digest and checksum */
    if ((rc = lsim_cuda_pool_publish(s->pools[m], id, 1, NULL, eb)))
      return rc;
  }
  return 0;
}

/* Make an artifact of the iteration resident and published in every
** instance; *pid its pool id. */
static lsim_err lsim__cu_ensure(lsim__cuda_state *s, const lsim_qadapter *ad,
                                int art, int ver, int r, int64_t iter,
                                int *pid, lsim_errbuf *eb) {
  lsim_err rc = 0;
  int id = lsim__cu_find(s, art, ver);
  const int maxr = s->cfg.layers > 0 ? LSIM__MS_RANK : LSIM__CU_RANK;
  if (id >= 0 && s->res[id].rank != r) {
    /* the same artifact at another rank (calibration sweeps do this): a
    ** different tensor, so the resident one goes */
    if ((rc = lsim__cu_retire(s, id, eb)))
      return rc;
    id = -1;
  }
  if (id >= 0) {
    s->res[id].last_iter = iter;
    *pid = id;
    return 0;
  }
  if (r > maxr)
    return lsim_fail(eb, LSIM_E_BACKEND,
                     "backend cuda: adapter %d has rank %d; the device pool "
                     "takes ranks up to %d", art, r, maxr);
  for (int i = 0; i < LSIM__CU_IDS && id < 0; i++)
    if (s->res[i].art < 0)
      id = i;
  if (id < 0 && (id = lsim__cu_evict(s, iter, eb, &rc)) < 0)
    return rc ? rc
              : lsim_fail(eb, LSIM_E_BACKEND,
                          "backend cuda: more than %d adapters in one "
                          "iteration", LSIM__CU_IDS);
  if (rc)
    return rc;
  int exact = 1;
  if ((rc = lsim__cu_load(s, id, art, ver, r, ad, iter, &exact, eb)))
    return rc;
  s->res[id] = (lsim__cu_res){art, ver, r, exact, iter};
  *pid = id;
  return 0;
}

static lsim_err lsim__cuda_open(void *state, const lsim_backend_cfg *cfg,
                                lsim_errbuf *eb) {
  lsim__cuda_state *s = state;
  char desc[256];
  lsim_err rc;
  if (lsim_cuda_describe(desc, sizeof desc) <= 0)
    return lsim_fail(eb, LSIM_E_BACKEND, "backend cuda: %s", desc);
  const int ms = cfg->layers > 0;
  if (ms ? (cfg->ntargets < 1 || !cfg->target_d_in || !cfg->target_d_out)
         : (cfg->d_in < 1 || cfg->d_out < 1))
    return lsim_fail(eb, LSIM_E_BACKEND,
                     "cuda needs a tensor shape (d_in, d_out >= 1)");
  s->cfg = *cfg;
  s->cfg.target_d_in = s->cfg.target_d_out = NULL; /* not owned */
  for (int i = 0; i < LSIM__CU_IDS; i++)
    s->res[i].art = -1;
  s->nmod = ms ? cfg->layers * cfg->ntargets : 1;
  s->pools = calloc((size_t)s->nmod, sizeof *s->pools);
  s->mod_din = calloc((size_t)s->nmod, sizeof *s->mod_din);
  s->mod_dout = calloc((size_t)s->nmod, sizeof *s->mod_dout);
  if (ms) {
    s->dys = calloc((size_t)cfg->ntargets, sizeof *s->dys);
    s->dys_cap = calloc((size_t)cfg->ntargets, sizeof *s->dys_cap);
  }
  if (!s->pools || !s->mod_din || !s->mod_dout ||
      (ms && (!s->dys || !s->dys_cap)))
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  for (int m = 0; m < s->nmod; m++) {
    int t = ms ? m % cfg->ntargets : 0;
    s->mod_din[m] = ms ? cfg->target_d_in[t] : cfg->d_in;
    s->mod_dout[m] = ms ? cfg->target_d_out[t] : cfg->d_out;
    if (s->mod_din[m] < 1 || s->mod_dout[m] < 1)
      return lsim_fail(eb, LSIM_E_BACKEND,
                       "cuda needs a tensor shape (d_in, d_out >= 1)");
    if (s->mod_din[m] > s->maxd_in)
      s->maxd_in = s->mod_din[m];
    if (s->mod_dout[m] > s->maxd_out)
      s->maxd_out = s->mod_dout[m];
  }
  if ((rc = lsim_cuda_stream_create(&s->stream, eb)))
    return rc;
  if (ms && ((rc = lsim_cuda_timer_open(&s->timer, s->stream, eb)) ||
             (rc = lsim_cuda_graph_open(&s->graph, eb))))
    return rc;
  for (int m = 0; m < s->nmod; m++) {
    lsim_cuda_pool_cfg pc = {0,
                             LSIM_CUDA_FP16,
                             s->mod_din[m],
                             s->mod_dout[m],
                             LSIM__CU_PAGES,
                             LSIM__CU_IDS,
                             ms ? LSIM__MS_RANK : LSIM__CU_RANK,
                             0,
                             ms ? 2 * LSIM__MS_RANK + 2 : 0,
                             s->stream};
    if ((rc = lsim_cuda_pool_open(&s->pools[m], &pc, eb)))
      return rc; /* close releases what was opened */
  }
  s->pool = s->pools[0];
  /* LSIM_CUDA_PATH: every pool runs this path instead of the chooser's
  ** (a study knob, docs/CUDA.md) */
  const char *fp = getenv("LSIM_CUDA_PATH");
  if (fp && *fp) {
    int path = -1;
    for (int k = 0; k < LSIM_CUDA_PATH__COUNT; k++)
      if (!strcmp(fp, lsim_cuda_path_name(k)))
        path = k;
    if (!strcmp(fp, "paged"))
      path = LSIM_CUDA_POOL_PAGED;
    if (path == -1)
      return lsim_fail(eb, LSIM_E_BACKEND,
                       "LSIM_CUDA_PATH: unknown path '%s' (auto, decode, "
                       "sgmv, indexed, sgmv_mma, indexed_mma, fused, paged)",
                       fp);
    for (int m = 0; m < s->nmod; m++)
      lsim_cuda_pool_set_path(s->pools[m], path);
  }
  return 0;
}

/* Model-shape X: T rows of maxd_in (ldx wide) in {-1, 0, 1}, keyed by the
** row's request and token position (every instance reads it). */
static void lsim__ms_inputs(const lsim__cuda_state *s, const lsim_plan *plan,
                            const lsim_rowplan *p, uint16_t *hx, int ldx) {
  static const uint16_t tern[4] = {0, LSIM__H_ONE, LSIM__H_MONE, 0};
  for (int t = 0; t < p->T; t++) {
    lsim_rng g;
    lsim__cu_keyed(&g, s->cfg.seed, 2 + (uint64_t)plan->iter,
                   (uint64_t)p->req_uid[p->row_req[t]],
                   (uint64_t)p->row_pos[t], 0);
    uint16_t *row = hx + (size_t)t * (size_t)ldx;
    for (int j = 0; j < ldx; j += 32) {
      uint64_t u = lsim_rng_next(&g);
      for (int k = j; k < ldx && k < j + 32; k++, u >>= 2)
        row[k] = k < s->maxd_in ? tern[u & 3] : 0;
    }
  }
}

/* A sampled row of a verified iteration, ordered by (adapter, row). */
typedef struct lsim__vrow {
  int adapter, row;
} lsim__vrow;

static int lsim__vrow_cmp(const void *x, const void *y) {
  const lsim__vrow *a = x, *b = y;
  if (a->adapter != b->adapter)
    return a->adapter < b->adapter ? -1 : 1;
  return a->row < b->row ? -1 : a->row > b->row;
}

/* Model shape, verify: instance m's delta on a sample of rows against the
** integer reference.  Fills res; E_PATH_MISMATCH when they differ. */
static lsim_err lsim__ms_verify(lsim__cuda_state *s, const lsim_plan *plan,
                                int m, const uint16_t *hyv, int ldx, int ldy,
                                lsim_backend_result *res, lsim_errbuf *eb) {
  const lsim_rowplan *p = &s->it.rp;
  const int d_in = s->mod_din[m], d_out = s->mod_dout[m], T = p->T;
  const int step = T > LSIM__MS_VROWS ? (T + LSIM__MS_VROWS - 1) /
                                            LSIM__MS_VROWS : 1;
  const int ns = (T + step - 1) / step;
  int32_t *sh = malloc(LSIM__MS_RANK * sizeof *sh);
  lsim__vrow *order = malloc((size_t)(ns > 0 ? ns : 1) * sizeof *order);
  int cur = INT32_MIN, ok = 1;
  double maxabs = 0, maxrel = 0;
  lsim_err rc = 0;
  if (!sh || !order) {
    free(sh);
    free(order);
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  }
  /* the sampled rows in adapter order: each artifact's factors are
  ** generated once per verified iteration, not at every switch */
  for (int i = 0; i < ns; i++) {
    order[i].adapter = p->row_adapter[i * step];
    order[i].row = i * step;
  }
  qsort(order, (size_t)ns, sizeof *order, lsim__vrow_cmp);
  for (int i = 0; i < ns && !rc; i++) {
    const int t = order[i].row;
    int a = p->row_adapter[t], r = p->row_rank[t];
    const uint16_t *x = s->hx + (size_t)t * (size_t)ldx;
    const uint16_t *y = hyv + (size_t)t * (size_t)ldy;
    if (a < 0) { /* base rows: the delta must stay zero */
      for (int c = 0; c < d_out; c++)
        if (y[c] != 0 && y[c] != 0x8000u) {
          ok = 0;
          if (maxabs < fabs((double)lsim__h2i(y[c])))
            maxabs = fabs((double)lsim__h2i(y[c]));
        }
      continue;
    }
    if (a != cur) { /* factors of this row's artifact */
      int ver, art = lsim_iter_artifact(&s->it, a, &ver);
      lsim__ms_factors(s, m, art, ver, r, s->hA, s->hB);
      cur = a;
    }
    for (int i = 0; i < r; i++) {
      int32_t acc = 0;
      for (int j = 0; j < d_in; j++) {
        uint16_t w = s->hA[(size_t)i * (size_t)d_in + (size_t)j];
        if (w)
          acc += (w == LSIM__H_ONE ? 1 : -1) * lsim__h2i(x[j]);
      }
      sh[i] = acc;
    }
    for (int c = 0; c < d_out; c++) {
      int32_t acc = 0;
      const uint16_t *b = s->hB + (size_t)c * (size_t)r;
      for (int i = 0; i < r; i++)
        if (b[i])
          acc += (b[i] == LSIM__H_ONE ? 1 : -1) * sh[i];
      double want = 0.5 * acc, got = lsim_cuda_to_float(LSIM_CUDA_FP16, y[c]);
      if (got != want) {
        double e = fabs(got - want);
        ok = 0;
        if (e > maxabs)
          maxabs = e;
        if (want != 0 && e / fabs(want) > maxrel)
          maxrel = e / fabs(want);
        else if (want == 0)
          maxrel = INFINITY;
      }
    }
  }
  free(sh);
  free(order);
  s->nverified++;
  snprintf(s->vref, sizeof s->vref,
           "integer reference (exact; bit-exact owed), layer %d target %d",
           m / s->cfg.ntargets, m % s->cfg.ntargets);
  res->checked = 1;
  res->exact = ok;
  res->max_abs_err = maxabs;
  res->max_rel_err = maxrel;
  res->reference = s->vref;
  if (!ok)
    rc = lsim_fail(eb, LSIM_E_PATH_MISMATCH,
                   "iteration %lld: cuda kernel differs from the integer "
                   "reference at layer %d target %d (max abs %.3g, bit-exact "
                   "owed)", (long long)plan->iter, m / s->cfg.ntargets,
                   m % s->cfg.ntargets, maxabs);
  return rc;
}

/* Model shape: every (layer, target) instance of the iteration. */
static lsim_err lsim__ms_run(lsim__cuda_state *s, const lsim_plan *plan,
                             lsim_backend_result *res, lsim_errbuf *eb) {
  lsim_err rc = lsim_iter_rows_build(&s->it, plan, eb);
  const lsim_rowplan *p = &s->it.rp;
  const int T = p->T, nt = s->cfg.ntargets;
  const int ldx = (s->maxd_in + 7) / 8 * 8;
  int64_t ns = 0;
  if (rc)
    return rc;
  int maxid = -1;
  for (int k = 0; k < p->nseg; k++)
    if (p->seg_adapter[k] > maxid)
      maxid = p->seg_adapter[k];
  if (maxid + 1 > s->remap_cap) {
    int *nr = realloc(s->remap, (size_t)(maxid + 1) * sizeof *nr);
    if (!nr)
      return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
    s->remap = nr;
    s->remap_cap = maxid + 1;
  }
  for (int k = 0; k < p->nseg && !rc; k++) {
    int ver, art = lsim_iter_artifact(&s->it, p->seg_adapter[k], &ver);
    int pid = -1;
    rc = lsim__cu_ensure(s, NULL, art, ver, p->seg_rank[k], plan->iter, &pid,
                         eb);
    if (!rc)
      s->remap[p->seg_adapter[k]] = pid;
  }
  if (rc || T == 0)
    return rc;
  if ((rc = lsim__grow16(&s->hx, &s->hx_cap, (size_t)T * (size_t)ldx, eb)))
    return rc;
  lsim__ms_inputs(s, plan, p, s->hx, ldx);
  if ((rc = lsim__growdev(&s->dx, &s->dx_cap, (size_t)T * (size_t)ldx * 2,
                          eb)) ||
      (rc = lsim_cuda_h2d(s->dx, s->hx, (size_t)T * (size_t)ldx * 2, eb)))
    return rc;
  for (int t = 0; t < nt && !rc; t++) {
    size_t bytes = (size_t)T * (size_t)((s->mod_dout[t] + 7) / 8 * 8) * 2;
    if (!(rc = lsim__growdev(&s->dys[t], &s->dys_cap[t], bytes, eb)))
      rc = lsim_cuda_memset(s->dys[t], 0, bytes, eb);
  }
  /* every instance planned first (its metadata copy enqueued before the
  ** timed region), then the launches one after another, captured into one
  ** CUDA graph: backend_ns is the device time of the launches, not of the
  ** host's planning between them */
  int fast = 1;
  for (int m = 0; m < s->nmod && !rc; m++) {
    int t = m % nt;
    rc = lsim_cuda_pool_prepare(s->pools[m], p, s->remap, s->remap_cap, s->dx,
                                ldx, s->dys[t], (s->mod_dout[t] + 7) / 8 * 8,
                                eb);
    if (!rc && !lsim_cuda_pool_prepared_fast(s->pools[m]))
      fast = 0;
  }
  if (rc)
    return rc;
  int graph = fast && !s->graph_off;
  if (graph) {
    lsim_errbuf geb = LSIM_ERRBUF_INIT;
    int ok = !lsim_cuda_graph_begin(s->graph, s->stream, &geb);
    if (ok) {
      for (int m = 0; m < s->nmod && ok; m++)
        ok = !lsim_cuda_pool_launch(s->pools[m], &geb);
      if (lsim_cuda_graph_end(s->graph, s->stream, ok, &geb))
        ok = 0;
    }
    if (!ok) { /* direct launches (their own errors reported) from now on */
      graph = 0;
      s->graph_off = 1;
    }
  }
  if ((rc = lsim_cuda_timer_start(s->timer, eb)))
    return rc;
  if (graph)
    rc = lsim_cuda_graph_launch(s->graph, s->stream, eb);
  else
    for (int m = 0; m < s->nmod && !rc; m++)
      rc = lsim_cuda_pool_launch(s->pools[m], eb);
  if (!rc)
    rc = lsim_cuda_timer_stop(s->timer, eb);
  for (int m = 0; m < s->nmod && !rc; m++)
    rc = lsim_cuda_pool_mark_used(s->pools[m], eb);
  if (rc || (rc = lsim_cuda_timer_ns(s->timer, &ns, eb)))
    return rc;
  res->backend_ns = ns;
  if (s->cfg.verify) {
    int m = (int)(plan->iter % s->nmod);
    if (m < 0)
      m += s->nmod;
    const int ldy = (s->mod_dout[m] + 7) / 8 * 8;
    size_t bytes = (size_t)T * (size_t)ldy * 2;
    if ((rc = lsim__growdev(&s->dyv, &s->dyv_cap, bytes, eb)) ||
        (rc = lsim_cuda_memset(s->dyv, 0, bytes, eb)) ||
        (rc = lsim_cuda_pool_run(s->pools[m], p, s->remap, s->remap_cap,
                                 s->dx, ldx, s->dyv, ldy, eb)) ||
        (rc = lsim_cuda_pool_sync(s->pools[m], eb)) ||
        (rc = lsim__grow16(&s->hy, &s->hy_cap, (size_t)T * (size_t)ldy, eb)) ||
        (rc = lsim_cuda_d2h(s->hy, s->dyv, bytes, eb)))
      return rc;
    int rmax = LSIM__MS_RANK > s->maxd_in ? LSIM__MS_RANK : s->maxd_in;
    if ((rc = lsim__grow16(&s->hA, &s->hf_cap,
                           (size_t)rmax * (size_t)(s->maxd_in > s->maxd_out
                                                       ? s->maxd_in
                                                       : s->maxd_out),
                           eb)))
      return rc;
    uint16_t *nb = realloc(s->hB, s->hf_cap * sizeof *nb);
    if (!nb)
      return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
    s->hB = nb;
    rc = lsim__ms_verify(s, plan, m, s->hy, ldx, ldy, res, eb);
  }
  return rc;
}

static lsim_err lsim__cuda_run(void *state, const lsim_plan *plan,
                               lsim_backend_result *res, lsim_errbuf *eb) {
  lsim__cuda_state *s = state;
  if (s->cfg.layers > 0) {
    memset(res, 0, sizeof *res);
    lsim_err rc = lsim__ms_run(s, plan, res, eb);
    res->backend_ns = rc ? -1 : res->backend_ns;
    res->ok = rc == 0;
    return rc;
  }
  lsim_qmat G = LSIM_QMAT_INIT, R = LSIM_QMAT_INIT;
  const int d_in = s->cfg.d_in, d_out = s->cfg.d_out;
  const int ldx = (d_in + 7) / 8 * 8, ldy = (d_out + 7) / 8 * 8;
  int exact_in = 1, maxid = -1;
  int64_t ns = -1;
  mpq_t back;
  mpq_init(back);
  lsim_err rc = lsim_iter_tensors_build(&s->it, plan, s->cfg.seed, d_in,
                                        d_out, eb);
  const lsim_rowplan *p = &s->it.rp;
  const int T = p->T;
  if (rc)
    goto out;
  for (int k = 0; k < s->it.nad; k++)
    if (s->it.ad[k].id > maxid)
      maxid = s->it.ad[k].id;
  if (maxid + 1 > s->remap_cap) {
    int *nr = realloc(s->remap, (size_t)(maxid + 1) * sizeof *nr);
    if (!nr) {
      rc = lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
      goto out;
    }
    s->remap = nr;
    s->remap_cap = maxid + 1;
  }
  for (int k = 0; k < s->it.nad && !rc; k++) {
    const lsim_qadapter *ad = &s->it.ad[k];
    int ver, art = lsim_iter_artifact(&s->it, ad->id, &ver);
    int pid = -1;
    rc = lsim__cu_ensure(s, ad, art, ver, ad->rank, plan->iter, &pid, eb);
    if (!rc) {
      s->remap[ad->id] = pid;
      if (!s->res[pid].exact)
        exact_in = 0;
    }
  }
  if (rc)
    goto out;
  /* X in fp16 and a zeroed Y (the delta alone is compared) */
  if ((rc = lsim__grow16(&s->hx, &s->hx_cap, (size_t)(T > 0 ? T : 1) *
                                                 (size_t)ldx, eb)) ||
      (rc = lsim__grow16(&s->hy, &s->hy_cap, (size_t)(T > 0 ? T : 1) *
                                                 (size_t)ldy, eb)))
    goto out;
  memset(s->hx, 0, (size_t)(T > 0 ? T : 1) * (size_t)ldx * 2);
  for (int t = 0; t < T; t++)
    for (int j = 0; j < d_in; j++)
      s->hx[(size_t)t * (size_t)ldx + (size_t)j] =
          lsim__to16(LSIM_QAT(&s->it.X, t, j), back, &exact_in);
  if (T > 0) {
    if ((rc = lsim__growdev(&s->dx, &s->dx_cap, (size_t)T * (size_t)ldx * 2,
                            eb)) ||
        (rc = lsim__growdev(&s->dy, &s->dy_cap, (size_t)T * (size_t)ldy * 2,
                            eb)) ||
        (rc = lsim_cuda_h2d(s->dx, s->hx, (size_t)T * (size_t)ldx * 2, eb)) ||
        (rc = lsim_cuda_memset(s->dy, 0, (size_t)T * (size_t)ldy * 2, eb)) ||
        (rc = lsim_cuda_pool_run(s->pool, p, s->remap, s->remap_cap, s->dx,
                                 ldx, s->dy, ldy, eb)) ||
        (rc = lsim_cuda_pool_last_ns(s->pool, &ns, eb)) ||
        (rc = lsim_cuda_d2h(s->hy, s->dy, (size_t)T * (size_t)ldy * 2, eb)))
      goto out;
  } else {
    ns = 0;
  }
  if (s->cfg.verify) {
    if ((rc = lsim_qmat_init(&G, T, d_out, eb)))
      goto out;
    for (int t = 0; t < T; t++)
      for (int c = 0; c < d_out; c++)
        mpq_set_d(LSIM_QAT(&G, t, c),
                  (double)lsim_cuda_to_float(
                      LSIM_CUDA_FP16, s->hy[(size_t)t * (size_t)ldy + (size_t)c]));
    rc = lsim_qmat_init(&R, T, d_out, eb);
    if (!rc)
      rc = lsim_ref_delta(p, &s->it.X, s->it.ad, s->it.nad, LSIM_REF_PER_ROW,
                          LSIM_SCALE_PASSED, &R, eb);
    if (!rc) {
      lsim_q_errors(&G, &R, &res->max_abs_err, &res->max_rel_err,
                    &res->exact);
      /* bit-exactness is owed when fp16 holds every input and every exact
      ** output value; otherwise the bound is a relative error of 1e-2 */
      int owed = exact_in && lsim_q_representable(&R, LSIM_CUDA_FP16);
      res->checked = 1;
      res->reference = owed ? "cpu_ref (exact; bit-exact owed)"
                            : "cpu_ref (exact; within 1e-2 owed)";
      if ((owed && !res->exact) || !(res->max_rel_err <= 1e-2))
        rc = lsim_fail(eb, LSIM_E_PATH_MISMATCH,
                       "iteration %lld: cuda kernel (pool path) differs from "
                       "cpu_ref (max abs %.3g, rel %.3g%s)",
                       (long long)plan->iter, res->max_abs_err,
                       res->max_rel_err, owed ? ", bit-exact owed" : "");
    }
  }
out:
  res->backend_ns = rc ? -1 : ns;
  res->ok = rc == 0;
  lsim_qmat_clear(&G);
  lsim_qmat_clear(&R);
  mpq_clear(back);
  return rc;
}

static void lsim__cuda_close(void *state) {
  lsim__cuda_state *s = state;
  lsim_iter_tensors_release(&s->it);
  for (int m = 0; s->pools && m < s->nmod; m++)
    lsim_cuda_pool_close(s->pools[m]);
  lsim_cuda_timer_close(s->timer);
  lsim_cuda_graph_close(s->graph);
  lsim_cuda_stream_destroy(s->stream);
  lsim_cuda_free(s->dx);
  lsim_cuda_free(s->dy);
  lsim_cuda_free(s->dyv);
  for (int t = 0; s->dys && t < s->cfg.ntargets; t++)
    lsim_cuda_free(s->dys[t]);
  free(s->dys);
  free(s->dys_cap);
  free(s->pools);
  free(s->mod_din);
  free(s->mod_dout);
  free(s->remap);
  free(s->hx);
  free(s->hy);
  free(s->hA);
  free(s->hB);
}

const lsim_backend_ops lsim_backend_cuda = {
    .name = "cuda",
    .state_size = sizeof(lsim__cuda_state),
    .open = lsim__cuda_open,
    .run = lsim__cuda_run,
    .close = lsim__cuda_close,
};
