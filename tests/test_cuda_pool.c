/*
** test_cuda_pool.c: paged adapter residency on the GPU (issue 6 part 2).
**
** Compiled everywhere; every test skips with a message when the build has
** no CUDA or the machine no device.
**
**   1. publication: a launch cannot name an adapter before its copy event
**      has completed and its staged bytes passed the digest check; a
**      corrupted staged byte fails publication with E_DEV_DIGEST and the
**      previous generation stays published and launchable
**   2. slot reuse: pages of a retired generation are handed to a new load
**      only after the last launch that named it completed (and, with the
**      fence switched off by a test hook, the same sequence does corrupt
**      the launch: the test can fail)
**   3. every kernel in integer mode through the pool's page tables -- the
**      paged kernel and every fast path (decode, sgmv, indexed, sgmv_mma,
**      indexed_mma, fused, and the chooser's pick under two launch
**      settings) -- bit for bit against cpu_ref's exact value rounded once
**      to the type, on fragmented page tables, with NaN in unwritten
**      pages, X padding and base rows, canaries in Y's padding and guard
**      rows around Y
**   4. every misuse has its code
*/
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef LSIM_HAVE_CUDA
#include "backends/cpu_ref/cpu_ref.h"
#include "backends/cuda/cuda.h"
#include "backends/cuda/pool.h"
#include "engine/rowplan.h"
#include "base/rng.h"

#define MAXAD 24

static void need_gpu(void) {
  char d[256];
  if (lsim_cuda_describe(d, sizeof d) <= 0)
    cr_skip_test("no CUDA device: %s (GPU tests run on the device machine)",
                 d);
}

#define OK(call)                                                        \
  do {                                                                  \
    lsim_errbuf eb_ = LSIM_ERRBUF_INIT;                                 \
    lsim_errbuf *eb = &eb_;                                             \
    lsim_err rc_ = (call);                                              \
    cr_assert_eq(rc_, 0, "%s failed: %s: %s", #call, lsim_err_name(rc_), \
                 eb_.msg);                                              \
  } while (0)

#define FAILS(code, call)                                                 \
  do {                                                                    \
    lsim_errbuf eb_ = LSIM_ERRBUF_INIT;                                   \
    lsim_errbuf *eb = &eb_;                                               \
    lsim_err rc_ = (call);                                                \
    cr_assert_eq(rc_, code, "%s: got %s (%s), want %s", #call,            \
                 lsim_err_name(rc_), eb_.msg, lsim_err_name(code));       \
    cr_assert(eb_.msg[0] && eb_.msg[strlen(eb_.msg) - 1] != '.',          \
              "bad message '%s'", eb_.msg);                               \
  } while (0)

static lsim_plan_entry ent(int64_t uid, int adapter, int rank, int phase,
                           int rows) {
  lsim_plan_entry e;
  memset(&e, 0, sizeof e);
  e.request = uid;
  e.adapter = adapter;
  e.rank = rank;
  e.phase = phase;
  e.rows = rows;
  return e;
}

/* One adapter's factors as small integers (exact in both types). */
typedef struct fac {
  int id, rank;
  float scale;
  uint16_t *A, *B;   /* raw, in the pool's dtype */
  double *Ad, *Bd;   /* the same values */
} fac;

static void fac_make(fac *f, lsim_rng *r, int dtype, int id, int rank,
                     int d_in, int d_out, float scale) {
  f->id = id;
  f->rank = rank;
  f->scale = scale;
  f->A = calloc((size_t)rank * (size_t)d_in, 2);
  f->B = calloc((size_t)d_out * (size_t)rank, 2);
  f->Ad = calloc((size_t)rank * (size_t)d_in, sizeof(double));
  f->Bd = calloc((size_t)d_out * (size_t)rank, sizeof(double));
  cr_assert(f->A && f->B && f->Ad && f->Bd);
  for (size_t k = 0; k < (size_t)rank * (size_t)d_in; k++) {
    f->Ad[k] = (double)((int)lsim_rng_below(r, 5) - 2);
    f->A[k] = lsim_cuda_from_float(dtype, (float)f->Ad[k]);
  }
  for (size_t k = 0; k < (size_t)d_out * (size_t)rank; k++) {
    f->Bd[k] = (double)((int)lsim_rng_below(r, 5) - 2);
    f->B[k] = lsim_cuda_from_float(dtype, (float)f->Bd[k]);
  }
}

static void fac_free(fac *f) {
  free(f->A);
  free(f->B);
  free(f->Ad);
  free(f->Bd);
  memset(f, 0, sizeof *f);
}

static void qm_from(lsim_qmat *m, int rows, int cols, const double *v) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_qmat_init(m, rows, cols, &eb), 0);
  for (size_t k = 0; k < (size_t)rows * (size_t)cols; k++)
    mpq_set_d(m->v[k], v[k]);
}

/* A batch on the device: X, Y (with a guard row each side), host copies. */
typedef struct batch {
  int dtype, d_in, d_out, ldx, ldy, T;
  double *X, *Y0;     /* [T][d_in], [T][d_out] */
  uint16_t *hx, *hy;  /* [T][ldx], [T + 2][ldy] */
  void *dx, *dy;
} batch;

#define POISON 0xFFFFu /* NaN in fp16 and bf16 */
#define CANARY 0x7C01u /* a signalling-NaN pattern in fp16, NaN-ish in bf16 */

static void batch_make(batch *b, lsim_rng *r, const lsim_rowplan *p, int dtype,
                       int d_in, int d_out) {
  memset(b, 0, sizeof *b);
  b->dtype = dtype;
  b->d_in = d_in;
  b->d_out = d_out;
  b->ldx = (d_in + 7) / 8 * 8 + 8;
  b->ldy = (d_out + 7) / 8 * 8 + 8;
  b->T = p->T;
  int T = p->T > 0 ? p->T : 1;
  b->X = calloc((size_t)T * (size_t)d_in, sizeof(double));
  b->Y0 = calloc((size_t)T * (size_t)d_out, sizeof(double));
  b->hx = malloc((size_t)T * (size_t)b->ldx * 2);
  b->hy = malloc((size_t)(T + 2) * (size_t)b->ldy * 2);
  cr_assert(b->X && b->Y0 && b->hx && b->hy);
  for (size_t k = 0; k < (size_t)T * (size_t)b->ldx; k++)
    b->hx[k] = POISON; /* stride padding stays NaN */
  for (size_t k = 0; k < (size_t)(T + 2) * (size_t)b->ldy; k++)
    b->hy[k] = CANARY;
  for (int t = 0; t < p->T; t++) {
    for (int j = 0; j < d_in; j++) {
      b->X[t * d_in + j] = (double)((int)lsim_rng_below(r, 5) - 2);
      b->hx[(size_t)t * b->ldx + j] = lsim_cuda_from_float(dtype, (float)b->X[t * d_in + j]);
    }
    for (int c = 0; c < d_out; c++) {
      uint16_t *y = &b->hy[(size_t)(t + 1) * b->ldy + c];
      if (p->row_adapter[t] < 0) {
        *y = POISON; /* base row: must stay untouched */
      } else {
        b->Y0[t * d_out + c] = (double)((int)lsim_rng_below(r, 17) - 8);
        *y = lsim_cuda_from_float(dtype, (float)b->Y0[t * d_out + c]);
      }
    }
  }
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_cuda_malloc(&b->dx, (size_t)T * b->ldx * 2, &eb), 0);
  cr_assert_eq(lsim_cuda_malloc(&b->dy, (size_t)(T + 2) * b->ldy * 2, &eb), 0);
  cr_assert_eq(lsim_cuda_h2d(b->dx, b->hx, (size_t)T * b->ldx * 2, &eb), 0);
}

/* (Re)upload Y's initial contents. */
static void batch_reset_y(batch *b, const lsim_rowplan *p, int dtype) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  int T = p->T > 0 ? p->T : 1;
  for (int t = 0; t < p->T; t++)
    for (int c = 0; c < b->d_out; c++)
      b->hy[(size_t)(t + 1) * b->ldy + c] =
          p->row_adapter[t] < 0 ? POISON
                                : lsim_cuda_from_float(dtype, (float)b->Y0[t * b->d_out + c]);
  cr_assert_eq(lsim_cuda_h2d(b->dy, b->hy, (size_t)(T + 2) * b->ldy * 2, &eb), 0);
}

static void batch_free(batch *b) {
  free(b->X);
  free(b->Y0);
  free(b->hx);
  free(b->hy);
  lsim_cuda_free(b->dx);
  lsim_cuda_free(b->dy);
}

static void *ydev(const batch *b) { return (uint16_t *)b->dy + b->ldy; }

/*
** Read Y back and compare it with Y0 + cpu_ref's exact delta (adapters
** fs[0..n) with ids fs[k].id), each value rounded once to the type: every
** active element bit for bit, base rows, padding and guard rows untouched.
** Returns the number of differing active elements (0 when exact); asserts
** on any stray write.
*/
static int batch_check(batch *b, const lsim_rowplan *p, const fac *fs, int n) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  int T = p->T > 0 ? p->T : 1;
  uint16_t *got = malloc((size_t)(T + 2) * b->ldy * 2);
  cr_assert_not_null(got);
  cr_assert_eq(lsim_cuda_d2h(got, b->dy, (size_t)(T + 2) * b->ldy * 2, &eb), 0);
  lsim_qmat X = LSIM_QMAT_INIT, D = LSIM_QMAT_INIT;
  lsim_qadapter ad[MAXAD];
  memset(ad, 0, sizeof ad);
  qm_from(&X, p->T, b->d_in, b->X);
  for (int a = 0; a < n; a++) {
    ad[a].id = fs[a].id;
    ad[a].rank = fs[a].rank;
    mpq_init(ad[a].scale);
    mpq_set_d(ad[a].scale, (double)fs[a].scale);
    qm_from(&ad[a].A, fs[a].rank, b->d_in, fs[a].Ad);
    qm_from(&ad[a].B, b->d_out, fs[a].rank, fs[a].Bd);
  }
  cr_assert_eq(lsim_qmat_init(&D, p->T, b->d_out, &eb), 0);
  cr_assert_eq(lsim_ref_delta(p, &X, ad, n, LSIM_REF_PER_ROW, LSIM_SCALE_PASSED,
                              &D, &eb), 0, "%s", eb.msg);
  int bad = 0;
  mpq_t w;
  mpq_init(w);
  for (int t = -1; t <= p->T; t++)
    for (int c = 0; c < b->ldy; c++) {
      uint16_t g = got[(size_t)(t + 1) * b->ldy + c];
      if (t < 0 || t == p->T || c >= b->d_out) {
        cr_assert_eq(g, CANARY, "stray write at row %d col %d", t, c);
        continue;
      }
      if (p->row_adapter[t] < 0) {
        cr_assert_eq(g, POISON, "base row %d col %d written", t, c);
        continue;
      }
      mpq_set_d(w, b->Y0[t * b->d_out + c]);
      mpq_add(w, w, LSIM_QAT(&D, t, c));
      uint16_t want = lsim_cuda_from_float(b->dtype, (float)mpq_get_d(w));
      if (g != want)
        bad++;
    }
  mpq_clear(w);
  for (int a = 0; a < n; a++)
    lsim_qadapter_clear(&ad[a]);
  lsim_qmat_clear(&X);
  lsim_qmat_clear(&D);
  free(got);
  return bad;
}

static lsim_cuda_pool *pool_open(int dtype, int d_in, int d_out, int64_t pages,
                                 int max_adapters, int max_rank) {
  lsim_cuda_pool *P = NULL;
  lsim_cuda_pool_cfg c = {0, dtype, d_in, d_out, pages, max_adapters,
                          max_rank, 0, 0, NULL};
  OK(lsim_cuda_pool_open(&P, &c, eb));
  return P;
}

/* A small batch naming adapter `id` (rank r): a prefill of 11 rows, base
** rows, and three decodes. */
static void small_plan(lsim_rowplan *p, int id, int r) {
  lsim_plan_entry e[5] = {
      ent(1, id, r, LSIM_PHASE_PREFILL, 11), ent(2, LSIM_BASE, 0, LSIM_PHASE_PREFILL, 3),
      ent(3, id, r, LSIM_PHASE_DECODE, 1), ent(4, LSIM_BASE, 0, LSIM_PHASE_DECODE, 1),
      ent(5, id, r, LSIM_PHASE_DECODE, 1)};
  OK(lsim_rowplan_build(p, e, 5, NULL, 0, eb));
}

/* ---- 1. publication ------------------------------------------------------ */

Test(pool, launch_cannot_name_an_adapter_before_copy_event_and_digest,
     .timeout = 120) {
  need_gpu();
  const int dt = LSIM_CUDA_FP16, d_in = 40, d_out = 21, r = 8;
  lsim_rng g;
  lsim_rng_init(&g, 7, LSIM_RNG_TENSORS);
  lsim_cuda_pool *P = pool_open(dt, d_in, d_out, 64, 4, 16);
  fac f1, f2;
  fac_make(&f1, &g, dt, 0, r, d_in, d_out, 0.5f);
  fac_make(&f2, &g, dt, 0, r, d_in, d_out, 0.25f);
  lsim_rowplan p = LSIM_ROWPLAN_INIT;
  small_plan(&p, 0, r);
  batch b;
  batch_make(&b, &g, &p, dt, d_in, d_out);
  int64_t gen = -1;
  int pub = -1, pend = -1;

  /* generation 1, with the copy held back on the device for 300 ms (a
  ** spinning kernel on the copy stream ahead of it) */
  lsim_cuda_pool__set_delay(P, 0, 300 * 1000 * 1000LL);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  OK(lsim_cuda_pool_load(P, 0, r, f1.scale, f1.A, f1.B, NULL, eb));
  clock_gettime(CLOCK_MONOTONIC, &t1);
  lsim_errbuf e0 = LSIM_ERRBUF_INIT;
  int done = lsim_cuda_pool_copy_done(P, 0, &e0);
  cr_assert(done == 0 || done == 1, "%s", e0.msg);
  /* compute-sanitizer serialises kernel launches: the load call itself
  ** then lasts the whole delay and there is no early window to test */
  double load_s = (double)(t1.tv_sec - t0.tv_sec) +
                  1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  if (done && load_s >= 0.25)
    fprintf(stderr, "note: the load call took %.2f s (launches serialised, "
                    "e.g. by compute-sanitizer): the early-publish window is "
                    "not tested in this run\n", load_s);
  else
    cr_assert_eq(done, 0, "copy event already done");
  if (!done) {
    FAILS(LSIM_E_DEV_PUBLISH_EARLY, lsim_cuda_pool_publish(P, 0, 0, &gen, eb));
    OK(lsim_cuda_pool_adapter(P, 0, &gen, &pub, &pend, eb));
    cr_assert(gen == 0 && pub == 0 && pend == 1);
  }
  /* whatever the copy's state: nothing launches before publication */
  FAILS(LSIM_E_DEV_NOT_PUBLISHED,
        lsim_cuda_pool_run(P, &p, NULL, 0, b.dx, b.ldx, ydev(&b), b.ldy, eb));
  FAILS(LSIM_E_DEV_BUSY, lsim_cuda_pool_load(P, 0, r, f1.scale, f1.A, f1.B,
                                             NULL, eb));
  lsim_cuda_pool__set_delay(P, 0, 0);
  OK(lsim_cuda_pool_publish(P, 0, 1, &gen, eb));
  cr_assert_eq(gen, 1);
  batch_reset_y(&b, &p, dt);
  OK(lsim_cuda_pool_run(P, &p, NULL, 0, b.dx, b.ldx, ydev(&b), b.ldy, eb));
  int64_t ns = 0;
  OK(lsim_cuda_pool_last_ns(P, &ns, eb));
  cr_assert_gt(ns, 0, "no device time measured");
  cr_assert_eq(batch_check(&b, &p, &f1, 1), 0, "generation 1 not exact");

  /* generation 2 with one corrupted staged byte: refused, gen 1 stays */
  OK(lsim_cuda_pool_load(P, 0, r, f2.scale, f2.A, f2.B, NULL, eb));
  OK(lsim_cuda_pool__corrupt_staged(P, 0, 37, eb));
  batch_reset_y(&b, &p, dt);
  OK(lsim_cuda_pool_run(P, &p, NULL, 0, b.dx, b.ldx, ydev(&b), b.ldy, eb));
  OK(lsim_cuda_pool_sync(P, eb));
  cr_assert_eq(batch_check(&b, &p, &f1, 1), 0, "pending gen 2 was visible");
  FAILS(LSIM_E_DEV_DIGEST, lsim_cuda_pool_publish(P, 0, 1, &gen, eb));
  OK(lsim_cuda_pool_adapter(P, 0, &gen, &pub, &pend, eb));
  cr_assert(gen == 1 && pub == 1 && pend == 0, "gen %lld pub %d pend %d",
            (long long)gen, pub, pend);
  batch_reset_y(&b, &p, dt);
  OK(lsim_cuda_pool_run(P, &p, NULL, 0, b.dx, b.ldx, ydev(&b), b.ldy, eb));
  OK(lsim_cuda_pool_sync(P, eb));
  cr_assert_eq(batch_check(&b, &p, &f1, 1), 0, "gen 1 not launchable after a "
                                               "failed publication");
  lsim_cuda_pool_stats st;
  lsim_cuda_pool_stats_get(P, &st);
  cr_assert_eq(st.failed_validations, 1);

  /* a caller's artifact digest that does not match: nothing starts */
  lsim_digest d2;
  OK(lsim_cuda_pool_digest(P, r, f2.A, f2.B, &d2, eb));
  FAILS(LSIM_E_DEV_DIGEST, lsim_cuda_pool_load(P, 0, r, f1.scale, f1.A, f1.B,
                                               &d2, eb));
  FAILS(LSIM_E_DEV_NO_LOAD, lsim_cuda_pool_publish(P, 0, 1, &gen, eb));

  /* the clean generation 2 (with its digest) publishes and is what runs */
  OK(lsim_cuda_pool_load(P, 0, r, f2.scale, f2.A, f2.B, &d2, eb));
  OK(lsim_cuda_pool_publish(P, 0, 1, &gen, eb));
  cr_assert_eq(gen, 2);
  batch_reset_y(&b, &p, dt);
  OK(lsim_cuda_pool_run(P, &p, NULL, 0, b.dx, b.ldx, ydev(&b), b.ldy, eb));
  OK(lsim_cuda_pool_sync(P, eb));
  cr_assert_eq(batch_check(&b, &p, &f2, 1), 0, "generation 2 not exact");
  cr_assert_gt(batch_check(&b, &p, &f1, 1), 0, "the two generations agree");

  /* retired: no launch can name it */
  OK(lsim_cuda_pool_retire(P, 0, eb));
  FAILS(LSIM_E_DEV_NOT_PUBLISHED,
        lsim_cuda_pool_run(P, &p, NULL, 0, b.dx, b.ldx, ydev(&b), b.ldy, eb));
  OK(lsim_cuda_pool_sync(P, eb));
  batch_free(&b);
  lsim_rowplan_release(&p);
  fac_free(&f1);
  fac_free(&f2);
  lsim_cuda_pool_close(P);
}

/* ---- 2. slot reuse ----------------------------------------------------------- */

/* Launch X (slow), retire it, load Y into the same pages; the result of
** the launch, compared with X's exact value: mismatching elements. */
/* How a test launches a prepared plan: pool_run, or prepare + launch +
** mark_used, or the same with the launch captured into a CUDA graph. */
enum { RUN_DIRECT, RUN_STEPS, RUN_GRAPH };

static void run_mode(lsim_cuda_pool *P, const lsim_rowplan *p, const batch *b,
                     int mode) {
  if (mode == RUN_DIRECT) {
    OK(lsim_cuda_pool_run(P, p, NULL, 0, b->dx, b->ldx, ydev(b), b->ldy, eb));
    return;
  }
  OK(lsim_cuda_pool_prepare(P, p, NULL, 0, b->dx, b->ldx, ydev(b), b->ldy,
                            eb));
  if (mode == RUN_GRAPH) {
    lsim_cuda_graph *gr = NULL;
    cr_assert(lsim_cuda_pool_prepared_fast(P), "a fast path was prepared");
    OK(lsim_cuda_graph_open(&gr, eb));
    OK(lsim_cuda_graph_begin(gr, lsim_cuda_pool_stream(P), eb));
    lsim_errbuf leb = LSIM_ERRBUF_INIT;
    lsim_err lr = lsim_cuda_pool_launch(P, &leb);
    OK(lsim_cuda_graph_end(gr, lsim_cuda_pool_stream(P), lr == 0, eb));
    cr_assert_eq(lr, 0, "launch under capture: %s", leb.msg);
    OK(lsim_cuda_graph_launch(gr, lsim_cuda_pool_stream(P), eb));
    OK(lsim_cuda_pool_mark_used(P, eb));
    int64_t caps = 0, ups = 0;
    lsim_cuda_graph_counts(gr, &caps, &ups);
    cr_assert_eq(caps, p->nactive > 0 ? 1 : 0, "instantiations: %lld", (long long)caps);
    lsim_cuda_graph_close(gr); /* a launched graph may be destroyed */
  } else {
    OK(lsim_cuda_pool_launch(P, eb));
    OK(lsim_cuda_pool_mark_used(P, eb));
  }
}

static int reuse_once(int unfenced, int mode, int64_t *fenced,
                      double *run_s) {
  const int dt = LSIM_CUDA_FP16, d_in = 24, d_out = 24, r = 8;
  lsim_rng g;
  lsim_rng_init(&g, 11, LSIM_RNG_TENSORS);
  /* exactly one adapter's pages: Y can only go where X was */
  lsim_cuda_pool *P = pool_open(dt, d_in, d_out, 2 * r, 2, r);
  fac fx, fy;
  fac_make(&fx, &g, dt, 0, r, d_in, d_out, 1.0f);
  fac_make(&fy, &g, dt, 1, r, d_in, d_out, 1.0f);
  lsim_rowplan p = LSIM_ROWPLAN_INIT;
  small_plan(&p, 0, r);
  batch b;
  batch_make(&b, &g, &p, dt, d_in, d_out);
  batch_reset_y(&b, &p, dt);
  int64_t px[2 * 8], py[2 * 8];
  int nx = 0, ny = 0;
  OK(lsim_cuda_pool_load(P, 0, r, fx.scale, fx.A, fx.B, NULL, eb));
  OK(lsim_cuda_pool_publish(P, 0, 1, NULL, eb));
  lsim_cuda_pool_pages(P, 0, px, 16, &nx);
  lsim_cuda_pool__set_unfenced(P, unfenced);
  lsim_cuda_pool__set_delay(P, 300 * 1000 * 1000LL, 0);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  run_mode(P, &p, &b, mode);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  *run_s = (double)(t1.tv_sec - t0.tv_sec) +
           1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  lsim_cuda_pool__set_delay(P, 0, 0);
  OK(lsim_cuda_pool_retire(P, 0, eb));
  OK(lsim_cuda_pool_load(P, 1, r, fy.scale, fy.A, fy.B, NULL, eb));
  OK(lsim_cuda_pool_publish(P, 1, 1, NULL, eb));
  lsim_cuda_pool_pages(P, 1, py, 16, &ny);
  cr_assert_eq(nx, 2 * r);
  cr_assert_eq(ny, 2 * r);
  cr_assert_eq(memcmp(px, py, sizeof px), 0, "Y did not reuse X's pages");
  OK(lsim_cuda_pool_sync(P, eb));
  int bad = batch_check(&b, &p, &fx, 1);
  lsim_cuda_pool_stats st;
  lsim_cuda_pool_stats_get(P, &st);
  *fenced = st.fenced_reuses;
  batch_free(&b);
  lsim_rowplan_release(&p);
  fac_free(&fx);
  fac_free(&fy);
  lsim_cuda_pool_close(P);
  return bad;
}

Test(pool, slot_reuse_waits_for_the_last_use_event, .timeout = 120) {
  need_gpu();
  int64_t fenced = 0;
  double run_s = 0;
  for (int mode = RUN_DIRECT; mode <= RUN_GRAPH; mode++) {
    cr_assert_eq(reuse_once(0, mode, &fenced, &run_s), 0,
                 "a launch saw the next adapter's factors (mode %d)", mode);
    cr_assert_eq(fenced, 1, "reuse was not fenced (mode %d)", mode);
  }
  /* the control: without the fence the same sequence corrupts the launch,
  ** unless launches are serialised (compute-sanitizer): then the slow
  ** launch has ended before the run call returns and there is no window */
  int bad = reuse_once(1, RUN_DIRECT, &fenced, &run_s);
  cr_assert_eq(fenced, 0);
  if (run_s >= 0.25) {
    fprintf(stderr, "note: the run call took %.2f s (launches serialised, "
                    "e.g. by compute-sanitizer): the unfenced control has "
                    "no window in this run\n", run_s);
    return;
  }
  cr_assert_gt(bad, 0, "unfenced reuse went unnoticed: the test cannot fail");
}

/* ---- 3. the paged kernel, integer mode ------------------------------------------ */

static void paged_case(int seed, int dt) {
  lsim_rng g;
  lsim_rng_init(&g, 1000 + (uint64_t)seed, LSIM_RNG_TENSORS);
  const int d_in = 1 + (int)lsim_rng_below(&g, 300);
  const int d_out = 1 + (int)lsim_rng_below(&g, 300);
  const int nad = 1 + (int)lsim_rng_below(&g, MAXAD - 4);
  static const int ranks[] = {1, 2, 3, 4, 5, 8, 12, 16, 32, 33, 64};
  static const float scales[] = {1.0f, 0.5f, 0.25f, 2.0f, 0.125f};
  fac fs[MAXAD];
  int64_t pages = 0;
  for (int a = 0; a < nad; a++) {
    int r = ranks[lsim_rng_below(&g, sizeof ranks / sizeof ranks[0])];
    fac_make(&fs[a], &g, dt, a, r, d_in, d_out,
             scales[lsim_rng_below(&g, sizeof scales / sizeof scales[0])]);
    pages += 2 * r;
  }
  /* room for the adapters and one live filler only: a filler is loaded and
  ** replaced before each adapter, so once the free pages run out the later
  ** adapters take the retired fillers' scattered page pairs and their page
  ** tables are far from contiguous */
  lsim_cuda_pool *P = pool_open(dt, d_in, d_out, pages + 2, MAXAD, 64);
  fac filler;
  fac_make(&filler, &g, dt, MAXAD - 1, 1, d_in, d_out, 1.0f);
  for (int a = 0; a < nad; a++) {
    OK(lsim_cuda_pool_load(P, MAXAD - 1, 1, 1.0f, filler.A, filler.B, NULL, eb));
    OK(lsim_cuda_pool_publish(P, MAXAD - 1, 1, NULL, eb));
    OK(lsim_cuda_pool_load(P, a, fs[a].rank, fs[a].scale, fs[a].A, fs[a].B,
                           NULL, eb));
    OK(lsim_cuda_pool_publish(P, a, 1, NULL, eb));
  }
  /* the plan: requests over the adapters and the base model */
  lsim_plan_entry e[64];
  int n = 0, npre = (int)lsim_rng_below(&g, 8);
  for (int i = 0; i < npre; i++) {
    int a = (int)lsim_rng_below(&g, (uint64_t)nad + 1) - 1;
    int rows = 1 + (int)lsim_rng_below(&g, i % 3 == 0 ? 40 : 6);
    e[n] = ent(n + 1, a < 0 ? LSIM_BASE : a, a < 0 ? 0 : fs[a].rank,
               LSIM_PHASE_PREFILL, rows);
    n++;
  }
  int ndec = 1 + (int)lsim_rng_below(&g, 30);
  for (int i = 0; i < ndec; i++) {
    int a = (int)lsim_rng_below(&g, (uint64_t)nad + 1) - 1;
    e[n] = ent(n + 1, a < 0 ? LSIM_BASE : a, a < 0 ? 0 : fs[a].rank,
               LSIM_PHASE_DECODE, 1);
    n++;
  }
  lsim_rowplan p = LSIM_ROWPLAN_INIT;
  OK(lsim_rowplan_build(&p, e, n, NULL, 0, eb));
  batch b;
  batch_make(&b, &g, &p, dt, d_in, d_out);
  /* the references name only the plan's adapters */
  fac used[MAXAD];
  int nu = 0;
  for (int s = 0; s < p.nseg; s++)
    used[nu++] = fs[p.seg_adapter[s]];
  /* every kernel through the same fragmented page tables; the last run:
  ** the chooser under other launch settings (no PDL, 3 d_in ranges, 3
  ** column blocks) */
  static const int paths[] = {LSIM_CUDA_POOL_PAGED,    LSIM_CUDA_PATH_AUTO,
                              LSIM_CUDA_PATH_DECODE,   LSIM_CUDA_PATH_SGMV,
                              LSIM_CUDA_PATH_INDEXED,  LSIM_CUDA_PATH_SGMV_MMA,
                              LSIM_CUDA_PATH_INDEXED_MMA,
                              LSIM_CUDA_PATH_FUSED,    LSIM_CUDA_PATH_AUTO};
  const int npaths = (int)(sizeof paths / sizeof paths[0]);
  for (int k = 0; k < npaths; k++) {
    lsim_cuda_lora_tune tu;
    memset(&tu, 0, sizeof tu);
    tu.pdl = 0;
    tu.split_t = 1;
    tu.shrink_splits = 3;
    tu.expand_cols = 3;
    tu.fused_prefetch = tu.fused_preload = 1;
    lsim_cuda_pool_set_tune(P, k == npaths - 1 ? &tu : NULL);
    lsim_cuda_pool_set_path(P, paths[k]);
    batch_reset_y(&b, &p, dt);
    OK(lsim_cuda_pool_run(P, &p, NULL, 0, b.dx, b.ldx, ydev(&b), b.ldy, eb));
    OK(lsim_cuda_pool_sync(P, eb));
    const int got = lsim_cuda_pool_last_path(P);
    cr_assert(p.nactive == 0 ? got == -2 /* no launch, ever */
              : paths[k] == LSIM_CUDA_PATH_AUTO
                  ? got > LSIM_CUDA_PATH_AUTO && got < LSIM_CUDA_PATH__COUNT
                  : got == paths[k],
              "asked for path %d, ran %d (%d active rows)", paths[k], got,
              p.nactive);
    int bad = batch_check(&b, &p, used, nu);
    cr_assert_eq(bad, 0,
                 "seed %d %s, %s (run %d): %d elements differ (d_in %d d_out "
                 "%d, %d adapters, %d rows)",
                 seed, dt ? "fp16" : "bf16",
                 got == LSIM_CUDA_POOL_PAGED ? "paged kernel"
                                             : lsim_cuda_path_name(got),
                 k, bad, d_in, d_out, nad, p.T);
  }
  /* the chooser's path again, in three steps and captured into a graph */
  lsim_cuda_pool_set_tune(P, NULL);
  lsim_cuda_pool_set_path(P, LSIM_CUDA_PATH_AUTO);
  for (int mode = RUN_STEPS; mode <= RUN_GRAPH; mode++) {
    batch_reset_y(&b, &p, dt);
    run_mode(P, &p, &b, mode);
    OK(lsim_cuda_pool_sync(P, eb));
    int bad = batch_check(&b, &p, used, nu);
    cr_assert_eq(bad, 0, "seed %d %s, %s: %d elements differ", seed,
                 dt ? "fp16" : "bf16",
                 mode == RUN_GRAPH ? "captured graph" : "three steps", bad);
  }
  batch_free(&b);
  lsim_rowplan_release(&p);
  for (int a = 0; a < nad; a++)
    fac_free(&fs[a]);
  fac_free(&filler);
  lsim_cuda_pool_close(P);
}

Test(pool, every_path_bit_exact_through_page_tables, .timeout = 300) {
  need_gpu();
  const char *e = getenv("LSIM_CUDA_TEST_SEEDS");
  int n = e && atoi(e) > 0 && atoi(e) < 24 ? atoi(e) : 24;
  for (int seed = 0; seed < n; seed++) {
    paged_case(seed, LSIM_CUDA_FP16);
    paged_case(seed, LSIM_CUDA_BF16);
  }
}

/* ---- 4. errors --------------------------------------------------------------------- */

Test(pool, every_misuse_has_its_code) {
  need_gpu();
  const int dt = LSIM_CUDA_BF16;
  lsim_cuda_pool *P = NULL;
  lsim_cuda_pool_cfg bad = {0, dt, 16, 16, 1, 2, 8, 0, 0, NULL};
  FAILS(LSIM_E_USAGE, lsim_cuda_pool_open(&P, &bad, eb));
  cr_assert_null(P);
  bad.pages = 64;
  bad.max_rank = LSIM_POOL_MAX_RANK + 1;
  FAILS(LSIM_E_USAGE, lsim_cuda_pool_open(&P, &bad, eb));
  lsim_rng g;
  lsim_rng_init(&g, 3, LSIM_RNG_TENSORS);
  fac f, big;
  fac_make(&f, &g, dt, 0, 4, 16, 16, 1.0f);
  fac_make(&big, &g, dt, 0, 16, 16, 16, 1.0f);
  /* 20 pages, staging for 16 */
  lsim_cuda_pool_cfg c = {0, dt, 16, 16, 20, 3, 16, 0, 16, NULL};
  OK(lsim_cuda_pool_open(&P, &c, eb));
  FAILS(LSIM_E_USAGE, lsim_cuda_pool_load(P, 3, 4, 1.0f, f.A, f.B, NULL, eb));
  FAILS(LSIM_E_USAGE, lsim_cuda_pool_load(P, 0, 17, 1.0f, f.A, f.B, NULL, eb));
  FAILS(LSIM_E_USAGE, lsim_cuda_pool_load(P, 0, 4, INFINITY, f.A, f.B, NULL,
                                          eb));
  FAILS(LSIM_E_DEV_NO_LOAD, lsim_cuda_pool_publish(P, 0, 1, NULL, eb));
  FAILS(LSIM_E_STATE, lsim_cuda_pool_launch(P, eb)); /* nothing prepared */
  /* staging: 16 pages hold two rank-4 images, not a third */
  OK(lsim_cuda_pool_load(P, 0, 4, 1.0f, f.A, f.B, NULL, eb));
  OK(lsim_cuda_pool_load(P, 1, 4, 1.0f, f.A, f.B, NULL, eb));
  FAILS(LSIM_E_DEV_STAGING, lsim_cuda_pool_load(P, 2, 4, 1.0f, f.A, f.B, NULL,
                                                eb));
  OK(lsim_cuda_pool_publish(P, 0, 1, NULL, eb));
  OK(lsim_cuda_pool_publish(P, 1, 1, NULL, eb));
  /* pages: 16 used of 20; a rank-4 load needs 8 */
  FAILS(LSIM_E_DEV_NOSPACE, lsim_cuda_pool_load(P, 2, 4, 1.0f, f.A, f.B, NULL,
                                                eb));
  /* a plan naming id 0 at another rank, and one naming an absent id */
  lsim_rowplan p = LSIM_ROWPLAN_INIT;
  void *d = NULL, *y = NULL;
  OK(lsim_cuda_malloc(&d, 64 * 16 * 2, eb));
  OK(lsim_cuda_malloc(&y, 64 * 16 * 2, eb));
  OK(lsim_cuda_memset(d, 0, 64 * 16 * 2, eb));
  OK(lsim_cuda_memset(y, 0, 64 * 16 * 2, eb));
  small_plan(&p, 0, 8);
  FAILS(LSIM_E_REF_RANK, lsim_cuda_pool_run(P, &p, NULL, 0, d, 16, y, 16, eb));
  lsim_rowplan_release(&p);
  small_plan(&p, 2, 4);
  FAILS(LSIM_E_DEV_NOT_PUBLISHED,
        lsim_cuda_pool_run(P, &p, NULL, 0, d, 16, y, 16, eb));
  /* remapped to id 1: runs */
  int remap[3] = {-1, -1, 1};
  OK(lsim_cuda_pool_run(P, &p, remap, 3, d, 16, y, 16, eb));
  FAILS(LSIM_E_USAGE, lsim_cuda_pool_run(P, &p, remap, 3, d, 8, y, 16, eb));
  cr_assert_neq(lsim_cuda_pool_last_path(P), LSIM_CUDA_POOL_PAGED);
  /* X rows that are not 16-byte aligned: the paged kernel runs instead */
  OK(lsim_cuda_pool_run(P, &p, remap, 3, d, 17, y, 16, eb));
  cr_assert_eq(lsim_cuda_pool_last_path(P), LSIM_CUDA_POOL_PAGED);
  /* an explicit tensor-core path takes ranks up to 128 only: here it runs */
  lsim_cuda_pool_set_path(P, LSIM_CUDA_PATH_SGMV_MMA);
  OK(lsim_cuda_pool_run(P, &p, remap, 3, d, 16, y, 16, eb));
  cr_assert_eq(lsim_cuda_pool_last_path(P), LSIM_CUDA_PATH_SGMV_MMA);
  lsim_cuda_pool_set_path(P, LSIM_CUDA_PATH_AUTO);
  /* retiring frees the pages for a later load (after the last use) */
  OK(lsim_cuda_pool_retire(P, 1, eb));
  OK(lsim_cuda_pool_load(P, 2, 4, 1.0f, f.A, f.B, NULL, eb));
  OK(lsim_cuda_pool_publish(P, 2, 1, NULL, eb));
  OK(lsim_cuda_pool_sync(P, eb));
  lsim_rowplan_release(&p);
  lsim_cuda_free(d);
  lsim_cuda_free(y);
  fac_free(&f);
  fac_free(&big);
  lsim_cuda_pool_close(P);
}

#else
Test(pool, launch_cannot_name_an_adapter_before_copy_event_and_digest) {
  cr_skip_test("CUDA backend not built: nvcc was not found at configure time");
}
Test(pool, slot_reuse_waits_for_the_last_use_event) {
  cr_skip_test("CUDA backend not built: nvcc was not found at configure time");
}
Test(pool, every_path_bit_exact_through_page_tables) {
  cr_skip_test("CUDA backend not built: nvcc was not found at configure time");
}
Test(pool, every_misuse_has_its_code) {
  cr_skip_test("CUDA backend not built: nvcc was not found at configure time");
}
#endif
