/*
** test_cuda_onepass.c: the base projection and the adapter branch in one
** pass (issue 23, lsim_cuda_lora_run_gemm) against a float64 reference.
**
** Compiled everywhere; the GPU tests skip with a message when the build
** has no CUDA or the machine no device (the chooser's test is host only).
**
**   1. seeded random batches (decode rows, segments of several rows, base
**      rows, 1..256 rows; d_in and d_out that are not multiples of any
**      tile; ranks 1..128, per-adapter scales) through every shrink path
**      the one pass takes (decode, sgmv, sgmv_mma, the chooser's), several
**      K-range counts and rows per block, beta 0 and 1: every element
**      within the bf16 bound of beta Y0 + X W^T + delta computed in
**      float64, Y poisoned with NaN first (an unwritten row fails), the
**      stride padding of Y and a guard row after it untouched, and the
**      same bits when the launch runs again (the sums are in a fixed
**      order)
**   2. an integer-mode batch whose exact result is representable: bit for
**      bit
**   3. every refusal with its code: the fused and indexed paths, more than
**      256 rows, a rank above 128, no plan, bad strides
*/
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef LSIM_HAVE_CUDA
#include "backends/cuda/cuda.h"
#include "base/rng.h"
#include "engine/rowplan.h"

static void need_gpu(void) {
  char d[256];
  if (lsim_cuda_describe(d, sizeof d) <= 0) {
    fprintf(stderr, "test_cuda_onepass: skipped, no CUDA device: %s\n", d);
    cr_skip_test("no CUDA device: %s (GPU tests run on the device machine)",
                 d);
  }
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
  } while (0)

#define NAD 12
#define BF(x) lsim_cuda_to_float(LSIM_CUDA_BF16, (x))

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

static uint16_t bfr(double v) {
  return lsim_cuda_from_float(LSIM_CUDA_BF16, (float)v);
}

/* One batch: shapes, adapters, plan, host data. */
typedef struct ocase {
  int d_in, d_out, ldx, ldw, ldy, T, nad;
  int ids[NAD], rank[NAD];
  float scale[NAD];
  uint16_t *A[NAD], *B[NAD]; /* A [r][d_in], B [d_out][r] */
  uint16_t *X, *W, *Y0;      /* X [T][ldx], W [d_out][ldw], Y0 [T][ldy] */
  int *row_ad;               /* packed row -> adapter index, -1 base */
  lsim_rowplan p;
} ocase;

static void ocase_free(ocase *c) {
  for (int a = 0; a < c->nad; a++)
    free(c->A[a]), free(c->B[a]);
  free(c->X), free(c->W), free(c->Y0), free(c->row_ad);
  lsim_rowplan_release(&c->p);
}

/* A value of the case's kind: integers in {-1, 0, 1} (integer mode, one
** in eight non-zero, so every sum stays a small integer) or uniform bf16
** in [-scale, scale). */
static double val(lsim_rng *r, int integer, double scale) {
  if (integer) {
    const uint64_t u = lsim_rng_below(r, 16);
    return u == 0 ? 1.0 : u == 1 ? -1.0 : 0.0;
  }
  return BF(bfr((2.0 * lsim_rng_unit(r) - 1.0) * scale));
}

static void make_case(ocase *c, uint64_t seed, int integer) {
  lsim_rng r;
  lsim_rng_init(&r, seed, 23);
  memset(c, 0, sizeof *c);
  c->d_in = 8 + (int)lsim_rng_below(&r, 300);
  c->d_out = 1 + (int)lsim_rng_below(&r, 400);
  c->ldx = ((c->d_in + 7) & ~7) + 8 * (int)lsim_rng_below(&r, 2);
  c->ldw = ((c->d_in + 7) & ~7);
  c->ldy = ((c->d_out + 7) & ~7) + 8;
  c->nad = 1 + (int)lsim_rng_below(&r, NAD);
  for (int a = 0; a < c->nad; a++) {
    c->ids[a] = 2 * a + (int)lsim_rng_below(&r, 2);
    c->rank[a] = lsim_rng_below(&r, 3) == 0 ? 1 + (int)lsim_rng_below(&r, 128)
                                            : 8 << lsim_rng_below(&r, 4);
    c->scale[a] = integer ? 1.0f : (float)(0.5 + lsim_rng_unit(&r));
    c->A[a] = malloc((size_t)c->rank[a] * c->d_in * 2);
    c->B[a] = malloc((size_t)c->d_out * c->rank[a] * 2);
    for (int i = 0; i < c->rank[a] * c->d_in; i++)
      c->A[a][i] = bfr(val(&r, integer, 1.0 / 16));
    for (int i = 0; i < c->d_out * c->rank[a]; i++)
      c->B[a][i] = bfr(val(&r, integer, 0.25));
  }
  /* entries: prefills (several rows of one adapter), then decode rows */
  lsim_plan_entry e[300];
  int n = 0, rows = 0;
  const int want = 1 + (int)lsim_rng_below(&r, 256);
  const int npre = (int)lsim_rng_below(&r, 4);
  for (int i = 0; i < npre && rows < want; i++) {
    const int k = 1 + (int)lsim_rng_below(&r, 40);
    const int a = (int)lsim_rng_below(&r, (uint64_t)c->nad + 1) - 1;
    const int rr = rows + k > want ? want - rows : k;
    e[n] = ent(n + 1, a < 0 ? LSIM_BASE : c->ids[a], a < 0 ? 0 : c->rank[a],
               LSIM_PHASE_PREFILL, rr);
    n++;
    rows += rr;
  }
  while (rows < want) {
    const int a = lsim_rng_below(&r, 6) == 0
                      ? -1
                      : (int)lsim_rng_below(&r, (uint64_t)c->nad);
    e[n] = ent(n + 1, a < 0 ? LSIM_BASE : c->ids[a], a < 0 ? 0 : c->rank[a],
               LSIM_PHASE_DECODE, 1);
    n++;
    rows++;
  }
  OK(lsim_rowplan_build(&c->p, e, n, NULL, 0, eb));
  c->T = c->p.T;
  c->row_ad = malloc((size_t)c->T * sizeof(int));
  for (int i = 0; i < c->T; i++) {
    c->row_ad[i] = -1;
    for (int a = 0; a < c->nad; a++)
      if (c->p.row_adapter[i] == c->ids[a])
        c->row_ad[i] = a;
  }
  c->X = malloc((size_t)c->T * c->ldx * 2);
  c->W = malloc((size_t)c->d_out * c->ldw * 2);
  c->Y0 = malloc((size_t)c->T * c->ldy * 2);
  for (int i = 0; i < c->T * c->ldx; i++) /* NaN in the stride padding */
    c->X[i] = (i % c->ldx) < c->d_in ? bfr(val(&r, integer, 1.0)) : 0x7fc1;
  for (int i = 0; i < c->d_out * c->ldw; i++)
    c->W[i] = (i % c->ldw) < c->d_in ? bfr(val(&r, integer, 1.0 / 16))
                                     : 0x7fc1;
  for (int i = 0; i < c->T * c->ldy; i++)
    c->Y0[i] = bfr(val(&r, integer, 1.0));
}

/* want[i][o] = beta Y0 + X W^T + s t B^T, and mag[i][o] the sum of the
** magnitudes of its terms (the fp32 accumulation bound). */
static void reference(const ocase *c, double beta, double *want,
                      double *mag) {
  double *t = malloc(128 * sizeof *t), *ta = malloc(128 * sizeof *ta);
  for (int i = 0; i < c->T; i++) {
    const uint16_t *x = c->X + (size_t)i * c->ldx;
    const int a = c->row_ad[i];
    for (int k = 0; a >= 0 && k < c->rank[a]; k++) {
      double s = 0, sa = 0;
      for (int j = 0; j < c->d_in; j++) {
        const double p = BF(x[j]) * BF(c->A[a][(size_t)k * c->d_in + j]);
        s += p;
        sa += fabs(p);
      }
      t[k] = s * c->scale[a];
      ta[k] = sa * c->scale[a];
    }
    for (int o = 0; o < c->d_out; o++) {
      const uint16_t *w = c->W + (size_t)o * c->ldw;
      double s = beta * BF(c->Y0[(size_t)i * c->ldy + o]), m = fabs(s);
      for (int j = 0; j < c->d_in; j++) {
        const double p = BF(x[j]) * BF(w[j]);
        s += p;
        m += fabs(p);
      }
      for (int k = 0; a >= 0 && k < c->rank[a]; k++) {
        const double b = BF(c->B[a][(size_t)o * c->rank[a] + k]);
        s += t[k] * b;
        m += fabs(t[k] * b) + ta[k] * fabs(b);
      }
      want[(size_t)i * c->d_out + o] = s;
      mag[(size_t)i * c->d_out + o] = m;
    }
  }
  free(t), free(ta);
}

static lsim_cuda_lora *open_ctx(const ocase *c) {
  lsim_cuda_lora *L = NULL;
  lsim_cuda_lora_cfg cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.dtype = LSIM_CUDA_BF16;
  cfg.d_in = c->d_in;
  cfg.d_out = c->d_out;
  cfg.max_adapters = 2 * NAD + 2;
  OK(lsim_cuda_lora_open(&L, &cfg, eb));
  for (int a = 0; a < c->nad; a++)
    OK(lsim_cuda_lora_load(L, c->ids[a], c->rank[a], c->scale[a], c->A[a],
                           c->B[a], eb));
  return L;
}

/* Run one configuration; returns the worst error in units of the bound
** (exact: 0 unless some bit differs). */
static double run_one(const ocase *c, lsim_cuda_lora *L, int kern, int ns,
                      int path, int cs, int bm, float beta,
                      const double *want, const double *mag, int exact,
                      const char *tag) {
  lsim_cuda_lora_tune t;
  lsim_cuda_lora_get_tune(L, &t);
  t.gemm_cs = cs;
  t.gemm_bm = bm;
  t.gemm_kernel = kern; /* 1 lgemm, 2 the streaming wgemm */
  t.gemm_ns = ns;
  lsim_cuda_lora_set_tune(L, &t);
  OK(lsim_cuda_lora_plan(L, &c->p, path, eb));
  const char *why = NULL;
  cr_assert(lsim_cuda_lora_gemm_ok(L, &why), "%s: not available: %s", tag,
            why);
  OK(lsim_cuda_lora_poison(L, eb));
  /* Y with a guard row after it; every element of the T rows NaN (beta
  ** 0) or Y0 (beta 1), the padding and the guard row canaries */
  const size_t ny = (size_t)(c->T + 1) * c->ldy;
  uint16_t *h0 = malloc(ny * 2), *hy = malloc(ny * 2), *h2 = malloc(ny * 2);
  for (size_t i = 0; i < ny; i++) {
    const int row = (int)(i / (size_t)c->ldy), col = (int)(i % c->ldy);
    h0[i] = row < c->T && col < c->d_out ? (beta != 0.f ? c->Y0[i] : 0x7fc1)
                                         : (uint16_t)(0x1234 + col);
  }
  void *dx, *dw, *dy;
  OK(lsim_cuda_malloc(&dx, (size_t)c->T * c->ldx * 2, eb));
  OK(lsim_cuda_malloc(&dw, (size_t)c->d_out * c->ldw * 2, eb));
  OK(lsim_cuda_malloc(&dy, ny * 2, eb));
  OK(lsim_cuda_h2d(dx, c->X, (size_t)c->T * c->ldx * 2, eb));
  OK(lsim_cuda_h2d(dw, c->W, (size_t)c->d_out * c->ldw * 2, eb));
  double worst = 0;
  for (int run = 0; run < 2; run++) {
    OK(lsim_cuda_h2d(dy, h0, ny * 2, eb)); /* the same Y before each run */
    OK(lsim_cuda_lora_run_gemm(L, dx, c->ldx, dw, c->ldw, dy, c->ldy, beta,
                               eb));
    OK(lsim_cuda_lora_sync(L, eb));
    OK(lsim_cuda_d2h(run ? h2 : hy, dy, ny * 2, eb));
    if (run)
      cr_assert(memcmp(hy, h2, ny * 2) == 0,
                "%s: a second run differs (the sums must be in a fixed "
                "order)", tag);
    else
      for (size_t i = 0; i < ny; i++) {
        const int row = (int)(i / (size_t)c->ldy), col = (int)(i % c->ldy);
        if (row >= c->T || col >= c->d_out) {
          cr_assert_eq(hy[i], (uint16_t)(0x1234 + col),
                       "%s: row %d col %d outside Y written", tag, row, col);
          continue;
        }
        const double y = BF(hy[i]), w = want[(size_t)row * c->d_out + col];
        cr_assert(y == y, "%s: Y[%d][%d] not written (NaN)", tag, row, col);
        if (exact) {
          cr_assert(y == w, "%s: Y[%d][%d] = %g, exact %g", tag, row, col, y,
                    w);
        } else {
          /* the one rounding to bf16, and fp32 sums in some order */
          const double bound =
              ldexp(fabs(w), -8) +
              ldexp(mag[(size_t)row * c->d_out + col],
                    -24) * (c->d_in + 130.0) +
              1e-30;
          const double e = fabs(y - w) / bound;
          cr_assert(e <= 1.0, "%s: Y[%d][%d] = %g, want %g (%.2f x bound)",
                    tag, row, col, y, w, e);
          if (e > worst)
            worst = e;
        }
      }
  }
  lsim_cuda_free(dx), lsim_cuda_free(dw), lsim_cuda_free(dy);
  free(h0), free(hy), free(h2);
  return worst;
}

TestSuite(onepass);

Test(onepass, gemm_plus_delta_within_the_bf16_bound_on_every_shrink_path,
     .timeout = 300) {
  need_gpu();
  static const int paths[] = {LSIM_CUDA_PATH_DECODE, LSIM_CUDA_PATH_SGMV,
                              LSIM_CUDA_PATH_SGMV_MMA};
  static const int cs[] = {0, 1, 3, 16};
  double worst = 0;
  int runs = 0;
  for (int seed = 1; seed <= 6; seed++) {
    ocase c;
    make_case(&c, (uint64_t)seed, 0);
    lsim_cuda_lora *L = open_ctx(&c);
    double *want0 = malloc((size_t)c.T * c.d_out * sizeof(double)),
           *want1 = malloc((size_t)c.T * c.d_out * sizeof(double)),
           *mag0 = malloc((size_t)c.T * c.d_out * sizeof(double)),
           *mag1 = malloc((size_t)c.T * c.d_out * sizeof(double));
    reference(&c, 0.0, want0, mag0);
    reference(&c, 1.0, want1, mag1);
    int rmax = 0;
    for (int a = 0; a < c.nad; a++)
      rmax = c.rank[a] > rmax ? c.rank[a] : rmax;
    /* the shrink path a one-pass plan of this shape would take */
    int chosen = -1;
    lsim_cuda_gemm_choose(&c.p, rmax, c.d_in, c.d_out, &chosen);
    cr_assert(chosen == LSIM_CUDA_PATH_DECODE ||
                  chosen == LSIM_CUDA_PATH_SGMV_MMA,
              "seed %d: %d rows at rank %d: no shrink path", seed, c.T, rmax);
    for (int k = 0; k < 8; k++) {
      const int path = k % 4 < 3 ? paths[k % 4] : chosen;
      const int kern = k < 4 ? 1 : 2;
      for (int beta = 0; beta < 2; beta++) {
        char tag[192];
        const int kc = cs[(seed + k + beta) % 4];
        const int bm = kern == 1 && (seed + k) % 3 == 0 ? 256 : 0;
        const int ns = kern == 2 && (seed + beta) % 3 == 0 ? 2 : 0;
        snprintf(tag, sizeof tag,
                 "seed %d (T %d, %dx%d, %d adapters) kernel %d %s cs %d bm %d "
                 "ns %d beta %d",
                 seed, c.T, c.d_in, c.d_out, c.nad, kern,
                 lsim_cuda_path_name(path), kc, bm, ns, beta);
        const double w = run_one(&c, L, kern, ns, path, kc, bm, (float)beta,
                                 beta ? want1 : want0, beta ? mag1 : mag0, 0,
                                 tag);
        worst = w > worst ? w : worst;
        runs++;
      }
    }
    free(want0), free(want1), free(mag0), free(mag1);
    lsim_cuda_lora_close(L);
    ocase_free(&c);
  }
  cr_log_info("onepass: %d runs, worst error %.2f of the bound", runs, worst);
}

Test(onepass, integer_mode_bit_exact) {
  need_gpu();
  for (int seed = 11; seed <= 13; seed++) {
    ocase c;
    make_case(&c, (uint64_t)seed, 1);
    lsim_cuda_lora *L = open_ctx(&c);
    double *want = malloc((size_t)c.T * c.d_out * sizeof(double)),
           *mag = malloc((size_t)c.T * c.d_out * sizeof(double));
    reference(&c, 1.0, want, mag);
    /* the exact values must be what bf16 holds (small integers and
    ** dyadic fractions): else the case proves nothing bit for bit */
    for (int i = 0; i < c.T * c.d_out; i++)
      cr_assert_eq(BF(bfr(want[i])), want[i], "seed %d: %g not exact in bf16",
                   seed, want[i]);
    for (int path = LSIM_CUDA_PATH_DECODE; path <= LSIM_CUDA_PATH_SGMV_MMA;
         path++) {
      if (path == LSIM_CUDA_PATH_INDEXED)
        continue;
      for (int kern = 1; kern <= 2; kern++) {
        char tag[96];
        snprintf(tag, sizeof tag, "integer seed %d kernel %d %s", seed, kern,
                 lsim_cuda_path_name(path));
        run_one(&c, L, kern, 0, path, seed % 2 ? 0 : 5, 0, 1.f, want, mag, 1,
                tag);
      }
    }
    free(want), free(mag);
    lsim_cuda_lora_close(L);
    ocase_free(&c);
  }
}

Test(onepass, refusals_have_their_codes) {
  need_gpu();
  ocase c;
  make_case(&c, 5, 0);
  lsim_cuda_lora *L = open_ctx(&c);
  void *d;
  OK(lsim_cuda_malloc(&d, (size_t)(c.T + 1) * 1024 * 2, eb));
  FAILS(LSIM_E_STATE,
        lsim_cuda_lora_run_gemm(L, d, c.ldx, d, c.ldw, d, c.ldy, 0.f, eb));
  const char *why = NULL;
  cr_assert_not(lsim_cuda_lora_gemm_ok(L, &why));
  OK(lsim_cuda_lora_plan(L, &c.p, LSIM_CUDA_PATH_FUSED, eb));
  cr_assert_not(lsim_cuda_lora_gemm_ok(L, &why));
  cr_assert(strstr(why, "fused") != NULL, "%s", why);
  FAILS(LSIM_E_USAGE,
        lsim_cuda_lora_run_gemm(L, d, c.ldx, d, c.ldw, d, c.ldy, 0.f, eb));
  OK(lsim_cuda_lora_plan(L, &c.p, LSIM_CUDA_PATH_INDEXED, eb));
  FAILS(LSIM_E_USAGE,
        lsim_cuda_lora_run_gemm(L, d, c.ldx, d, c.ldw, d, c.ldy, 0.f, eb));
  OK(lsim_cuda_lora_plan(L, &c.p, LSIM_CUDA_PATH_SGMV, eb));
  cr_assert(lsim_cuda_lora_gemm_ok(L, NULL));
  FAILS(LSIM_E_USAGE, lsim_cuda_lora_run_gemm(L, d, c.ldx, d, c.d_in - 1, d,
                                              c.ldy, 0.f, eb));
  FAILS(LSIM_E_USAGE, lsim_cuda_lora_run_gemm(L, (char *)d + 2, c.ldx, d,
                                              c.ldw, d, c.ldy, 0.f, eb));
  FAILS(LSIM_E_USAGE, lsim_cuda_lora_run_gemm(L, d, c.ldx, d, c.ldw, d,
                                              c.ldy, NAN, eb));
  FAILS(LSIM_E_USAGE, lsim_cuda_lora_run_gemm_layer(L, 1, d, c.ldx, d, c.ldw,
                                                    d, c.ldy, 0.f, eb));
  /* 257 rows: the chooser says no, and so does the plan */
  lsim_plan_entry e = ent(1, c.ids[0], c.rank[0], LSIM_PHASE_PREFILL, 257);
  lsim_rowplan p = LSIM_ROWPLAN_INIT;
  OK(lsim_rowplan_build(&p, &e, 1, NULL, 0, eb));
  int bp = -1;
  cr_assert_not(lsim_cuda_gemm_choose(&p, c.rank[0], c.d_in, c.d_out, &bp));
  OK(lsim_cuda_lora_plan(L, &p, LSIM_CUDA_PATH_SGMV, eb));
  cr_assert_not(lsim_cuda_lora_gemm_ok(L, &why));
  FAILS(LSIM_E_USAGE,
        lsim_cuda_lora_run_gemm(L, d, c.ldx, d, c.ldw, d, c.ldy, 0.f, eb));
  lsim_rowplan_release(&p);
  /* a rank above 128 */
  uint16_t *A = calloc((size_t)200 * c.d_in, 2),
           *B = calloc((size_t)200 * c.d_out, 2);
  OK(lsim_cuda_lora_load(L, 2 * NAD + 1, 200, 1.f, A, B, eb));
  e = ent(1, 2 * NAD + 1, 200, LSIM_PHASE_DECODE, 1);
  OK(lsim_rowplan_build(&p, &e, 1, NULL, 0, eb));
  OK(lsim_cuda_lora_plan(L, &p, LSIM_CUDA_PATH_DECODE, eb));
  cr_assert_not(lsim_cuda_lora_gemm_ok(L, &why));
  cr_assert(strstr(why, "128") != NULL, "%s", why);
  lsim_rowplan_release(&p);
  free(A), free(B);
  lsim_cuda_free(d);
  lsim_cuda_lora_close(L);
  ocase_free(&c);
}

/* The composition chooser (host only). */
static int gemm_chosen(int nseg, int rows, int r, int *bp) {
  lsim_plan_entry e[300];
  for (int i = 0; i < nseg; i++)
    e[i] = ent(i + 1, i, r, rows > 1 ? LSIM_PHASE_PREFILL : LSIM_PHASE_DECODE,
               rows);
  lsim_rowplan p = LSIM_ROWPLAN_INIT;
  OK(lsim_rowplan_build(&p, e, nseg, NULL, 0, eb));
  const int one = lsim_cuda_gemm_choose(&p, r, 4096, 4096, bp);
  lsim_rowplan_release(&p);
  return one;
}

/* The measured rule (docs/BENCHMARKS.md, issue 23): the one pass lost to
** cuBLAS then the branch at every workload, so it is taken nowhere; the
** partitioned composition won at mixed256 (256 rows) and tied at decode64
** (64), so it is taken above 128 rows and up to 256; the shrink path is
** named for the shapes either can run. */
Test(choose, the_one_pass_where_it_won) {
  int bp = -1;
  cr_assert_eq(gemm_chosen(64, 1, 16, &bp), LSIM_CUDA_GEMM_SEQ); /* decode64 */
  cr_assert_eq(bp, LSIM_CUDA_PATH_DECODE);
  cr_assert_eq(gemm_chosen(64, 1, 64, &bp), LSIM_CUDA_GEMM_SEQ);
  cr_assert_eq(bp, LSIM_CUDA_PATH_DECODE);
  cr_assert_eq(gemm_chosen(128, 1, 16, &bp), LSIM_CUDA_GEMM_SEQ);
  cr_assert_eq(gemm_chosen(129, 1, 16, &bp), LSIM_CUDA_GEMM_PART);
  cr_assert_eq(bp, LSIM_CUDA_PATH_DECODE);
  cr_assert_eq(gemm_chosen(32, 8, 16, &bp), /* mixed256 */
               LSIM_CUDA_GEMM_PART);
  cr_assert_eq(bp, LSIM_CUDA_PATH_SGMV_MMA);
  cr_assert_eq(gemm_chosen(32, 8, 64, &bp), LSIM_CUDA_GEMM_PART);
  cr_assert_eq(bp, LSIM_CUDA_PATH_SGMV_MMA);
  cr_assert_not(gemm_chosen(8, 512, 16, &bp)); /* prefill4096 */
  cr_assert_eq(bp, LSIM_CUDA_PATH_AUTO);
  cr_assert_not(gemm_chosen(2, 1, 200, &bp)); /* past rank 128 */
  cr_assert_eq(bp, LSIM_CUDA_PATH_AUTO);
}

#else
Test(onepass, gemm_plus_delta_within_the_bf16_bound_on_every_shrink_path) {
  cr_skip_test("CUDA backend not built: nvcc was not found at configure time");
}
Test(choose, the_one_pass_where_it_won) {
  cr_skip_test("CUDA backend not built: nvcc was not found at configure time");
}
#endif
