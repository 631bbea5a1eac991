/*
** test_tp.c: tensor-parallel adapters (docs/TP.md).
**
**   - the article's two-rank fixture (0x06F4) through the exact sharded
**     reference, every printed intermediate compared exactly
**   - randomized shapes at TP degrees 2, 4, 8: sharded == unsharded
**   - the placement manifest: one test per placement fault, each with its
**     own code, and the binding of the manifest into the kernel ABI
**   - the distributed generation snapshot (one rank publishing early)
**   - the residency and collective ledgers with the article's numbers
**   - the int64 host reference used by the NCCL test equals cpu_ref
**   - the GPU step sequence (backends/cuda/tp_step.h) run on host threads
**     with emulated collectives equals the host reference
*/
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu_ref/tp.h"
#include "backends/cuda/tp_step.h"
#include "engine/identity.h"
#include "engine/tp.h"
#include "base/rng.h"
#include "tools/tp_host_ref.h"

/* ---------------------------------------------------------------- helpers */

static void set_int(lsim_qmat *m, int rows, int cols, const long *v) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_qmat_init(m, rows, cols, &eb), 0, "%s", eb.msg);
  for (int i = 0; i < rows; i++)
    for (int j = 0; j < cols; j++)
      mpq_set_si(LSIM_QAT(m, i, j), v[i * cols + j], 1);
}

static void expect_int(const lsim_qmat *m, int rows, int cols, const long *v,
                       const char *what) {
  cr_assert_eq(m->rows, rows, "%s rows %d", what, m->rows);
  cr_assert_eq(m->cols, cols, "%s cols %d", what, m->cols);
  for (int i = 0; i < rows; i++)
    for (int j = 0; j < cols; j++) {
      mpq_t w;
      mpq_init(w);
      mpq_set_si(w, v[i * cols + j], 1);
      int eq = mpq_equal(w, LSIM_QAT(m, i, j));
      mpq_clear(w);
      cr_assert(eq, "%s[%d][%d] differs from %ld", what, i, j,
                v[i * cols + j]);
    }
}

/*
** The article's two-rank fixture: B = 3 token rows, h = d = 4, r = N = 2.
** The article prints the intermediates (Z_1 slices, D_1, P_2, Z_2, D_2, Y)
** but not the inputs; these inputs were chosen here, in the article's
** S-LoRA orientation (A [d_in][r], B [r][d_out], W [d_in][d_out]), so that
** every printed intermediate comes out exactly.  They are converted to the
** repository orientation with lsim_qmat_transpose() (0x06F1).
*/
static const long FX_X[3 * 4] = {0, 1, 0, 2, 1, 0, 3, 2, 2, 1, 2, 1};
static const long FX_A1[4 * 2] = {1, 0, 0, 1, 1, 0, 0, 1};
static const long FX_B1[2 * 4] = {1, 0, 2, -1, 2, 1, 0, 3};
static const long FX_H[3 * 4] = {-2, -1, 4, -3, 1, 0, 1, -2, 0, -2, -2, -1};
static const long FX_A2[4 * 2] = {-2, -1, -1, 0, -1, 2, 0, -1};
static const long FX_B2[2 * 4] = {1, 2, 0, -1, 0, 1, 3, 2};
static const long FX_W2[4 * 4] = {-3, 6,  6,  -2, 5,  -8, -9, 3,
                                  -3, 5,  5,  -2, -4, 5,  5,  -3};

/* Load an article-orientation matrix and transpose it. */
static void load_t(lsim_qmat *dst, int rows, int cols, const long *v) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_qmat m = LSIM_QMAT_INIT;
  set_int(&m, rows, cols, v);
  cr_assert_eq(lsim_qmat_transpose(dst, &m, &eb), 0, "%s", eb.msg);
  lsim_qmat_clear(&m);
}

Test(tp_fixture, column_parallel_first_projection) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_qmat X = LSIM_QMAT_INIT, A = LSIM_QMAT_INIT, B = LSIM_QMAT_INIT;
  set_int(&X, 3, 4, FX_X);
  load_t(&A, 4, 2, FX_A1); /* -> [r 2][d_in 4] */
  load_t(&B, 2, 4, FX_B1); /* -> [d_out 4][r 2] */
  lsim_tp_col_trace t;
  memset(&t, 0, sizeof t);
  cr_assert_eq(lsim_tp_ref_col(&X, &A, &B, 2, &t, &eb), 0, "%s", eb.msg);
  expect_int(&t.z_local[0], 3, 1, (long[]){0, 4, 4}, "Z1,0");
  expect_int(&t.z_local[1], 3, 1, (long[]){3, 2, 2}, "Z1,1");
  expect_int(&t.z, 3, 2, (long[]){0, 3, 4, 2, 4, 2}, "Z1");
  static const long D1[] = {6, 3, 0, 9, 8, 2, 8, 2, 8, 2, 8, 2};
  expect_int(&t.d, 3, 4, D1, "D1");
  expect_int(&t.d_local[0], 3, 2, (long[]){6, 3, 8, 2, 8, 2}, "D1,0");
  expect_int(&t.d_local[1], 3, 2, (long[]){0, 9, 8, 2, 8, 2}, "D1,1");
  /* The concatenation is the unsharded X A^T B^T. */
  lsim_qmat full = LSIM_QMAT_INIT;
  cr_assert_eq(lsim_tp_ref_full(&X, &A, &B, NULL, &full, &eb), 0);
  cr_assert(lsim_qmat_equal(&full, &t.d));
  lsim_qmat_clear(&full);
  lsim_tp_col_trace_clear(&t);
  lsim_qmat_clear(&X);
  lsim_qmat_clear(&A);
  lsim_qmat_clear(&B);
}

Test(tp_fixture, row_parallel_second_projection_fused) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_qmat H = LSIM_QMAT_INIT, A = LSIM_QMAT_INIT, B = LSIM_QMAT_INIT,
            W = LSIM_QMAT_INIT;
  set_int(&H, 3, 4, FX_H);
  load_t(&A, 4, 2, FX_A2);
  load_t(&B, 2, 4, FX_B2);
  load_t(&W, 4, 4, FX_W2); /* -> [d_out][d_in] */
  lsim_tp_row_trace t;
  memset(&t, 0, sizeof t);
  cr_assert_eq(lsim_tp_ref_row(&H, &A, &B, &W, 2, &t, &eb), 0, "%s", eb.msg);
  expect_int(&t.p_local[0], 3, 2, (long[]){5, 2, -2, -1, 2, 0}, "P2,0");
  expect_int(&t.p_local[1], 3, 2, (long[]){-4, 11, -1, 4, 2, -3}, "P2,1");
  expect_int(&t.z, 3, 2, (long[]){1, 13, -3, 3, 4, -3}, "Z2");
  static const long D2[] = {1, 15, 39, 25, -3, -3, 9, 9, 4, 5, -9, -10};
  expect_int(&t.d, 3, 4, D2, "D2");
  static const long Y[] = {2, 16, 41, 27, -1, -2, 10, 11, 4, 6, -6, -9};
  expect_int(&t.y, 3, 4, Y, "Y");
  /* Y = Y^base + D2 with Y^base the sum of the two base partials. */
  lsim_qmat yb = LSIM_QMAT_INIT;
  cr_assert_eq(lsim_tp_all_reduce_sum(t.yb_local, 2, &yb, &eb), 0);
  cr_assert_eq(lsim_qmat_add(&yb, &t.d, &eb), 0);
  cr_assert(lsim_qmat_equal(&yb, &t.y));
  lsim_qmat full = LSIM_QMAT_INIT;
  cr_assert_eq(lsim_tp_ref_full(&H, &A, &B, &W, &full, &eb), 0, "%s", eb.msg);
  cr_assert(lsim_qmat_equal(&full, &t.y));
  lsim_qmat_clear(&full);
  lsim_qmat_clear(&yb);
  lsim_tp_row_trace_clear(&t);
  lsim_qmat_clear(&H);
  lsim_qmat_clear(&A);
  lsim_qmat_clear(&B);
  lsim_qmat_clear(&W);
}

Test(tp_fixture, orientation_not_reconciled_is_rejected) {
  /* The article-orientation A1 [d_in 4][r 2] passed as is: no shared rank
  ** with B, so the call fails instead of computing another operator. */
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_qmat X = LSIM_QMAT_INIT, A = LSIM_QMAT_INIT, B = LSIM_QMAT_INIT;
  set_int(&X, 3, 4, FX_X);
  set_int(&A, 4, 2, FX_A1);
  load_t(&B, 2, 4, FX_B1);
  lsim_tp_col_trace t;
  memset(&t, 0, sizeof t);
  cr_assert_eq(lsim_tp_ref_col(&X, &A, &B, 2, &t, &eb), LSIM_E_SHAPE);
  lsim_qmat_clear(&X);
  lsim_qmat_clear(&A);
  lsim_qmat_clear(&B);
}

Test(tp_fixture, indivisible_degree_fails) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_qmat X = LSIM_QMAT_INIT, A = LSIM_QMAT_INIT, B = LSIM_QMAT_INIT;
  set_int(&X, 3, 4, FX_X);
  load_t(&A, 4, 2, FX_A1);
  load_t(&B, 2, 4, FX_B1);
  lsim_tp_col_trace t;
  memset(&t, 0, sizeof t);
  cr_assert_eq(lsim_tp_ref_col(&X, &A, &B, 4, &t, &eb), LSIM_E_TP_DIV,
               "rank 2 split 4 ways: %s", eb.msg);
  cr_assert_eq(lsim_tp_ref_col(&X, &A, &B, 0, &t, &eb), LSIM_E_TP_WORLD);
  lsim_qmat_clear(&X);
  lsim_qmat_clear(&A);
  lsim_qmat_clear(&B);
}

/* ------------------------------------------------------------ randomized */

static void fill_rand(lsim_qmat *m, int rows, int cols, lsim_rng *r,
                      int frac) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_qmat_init(m, rows, cols, &eb), 0);
  for (int i = 0; i < rows; i++)
    for (int j = 0; j < cols; j++) {
      long num = (long)lsim_rng_below(r, 19) - 9;
      unsigned long den = frac ? 1 + lsim_rng_below(r, 5) : 1;
      mpq_set_si(LSIM_QAT(m, i, j), num, den);
      mpq_canonicalize(LSIM_QAT(m, i, j));
    }
}

Test(tp_random, sharded_equals_unsharded_degrees_2_4_8) {
  lsim_rng r;
  lsim_rng_init(&r, 9, 0x7470);
  static const int degrees[] = {2, 4, 8};
  int cases = 0;
  for (int di = 0; di < 3; di++) {
    int N = degrees[di];
    for (int it = 0; it < 6; it++) {
      lsim_errbuf eb = LSIM_ERRBUF_INIT;
      int T = 1 + (int)lsim_rng_below(&r, 5);
      int rank = N * (1 + (int)lsim_rng_below(&r, 2));
      int din = N * (1 + (int)lsim_rng_below(&r, 3));
      int dout = N * (1 + (int)lsim_rng_below(&r, 3));
      int frac = it & 1;
      lsim_qmat X = LSIM_QMAT_INIT, A = LSIM_QMAT_INIT, B = LSIM_QMAT_INIT,
                W = LSIM_QMAT_INIT, full = LSIM_QMAT_INIT;
      fill_rand(&X, T, din, &r, frac);
      fill_rand(&A, rank, din, &r, frac);
      fill_rand(&B, dout, rank, &r, frac);
      fill_rand(&W, dout, din, &r, frac);
      lsim_tp_col_trace c;
      lsim_tp_row_trace w;
      memset(&c, 0, sizeof c);
      memset(&w, 0, sizeof w);
      cr_assert_eq(lsim_tp_ref_col(&X, &A, &B, N, &c, &eb), 0, "%s", eb.msg);
      cr_assert_eq(lsim_tp_ref_full(&X, &A, &B, NULL, &full, &eb), 0);
      cr_assert(lsim_qmat_equal(&full, &c.d), "column N=%d T=%d r=%d", N, T,
                rank);
      lsim_qmat_clear(&full);
      cr_assert_eq(lsim_tp_ref_row(&X, &A, &B, &W, N, &w, &eb), 0, "%s",
                   eb.msg);
      cr_assert_eq(lsim_tp_ref_full(&X, &A, &B, &W, &full, &eb), 0);
      cr_assert(lsim_qmat_equal(&full, &w.y), "row N=%d T=%d r=%d", N, T,
                rank);
      /* The partial sums are not the answer on their own (N > 1): the
      ** reduction is needed; at least the shapes say they are full width. */
      cr_assert_eq(w.p_local[N - 1].cols, rank);
      lsim_qmat_clear(&full);
      lsim_tp_col_trace_clear(&c);
      lsim_tp_row_trace_clear(&w);
      lsim_qmat_clear(&X);
      lsim_qmat_clear(&A);
      lsim_qmat_clear(&B);
      lsim_qmat_clear(&W);
      cases++;
    }
  }
  cr_assert_eq(cases, 18);
}

/* -------------------------------------------------- int64 host reference */

static void to_i64(const lsim_qmat *m, int64_t *out) {
  for (int i = 0; i < m->rows * m->cols; i++)
    out[i] = mpz_get_si(mpq_numref(m->v[i]));
}

static void expect_i64(const lsim_qmat *m, const int64_t *v, const char *w) {
  for (int i = 0; i < m->rows * m->cols; i++) {
    cr_assert(mpz_cmp_ui(mpq_denref(m->v[i]), 1) == 0);
    cr_assert(mpz_cmp_si(mpq_numref(m->v[i]), (long)v[i]) == 0,
              "%s entry %d: host %lld", w, i, (long long)v[i]);
  }
}

Test(tp_host_ref, int64_schedule_equals_cpu_ref) {
  lsim_rng r;
  lsim_rng_init(&r, 17, 0x6873);
  static const int degrees[] = {1, 2, 4, 8};
  for (int di = 0; di < 4; di++)
    for (int it = 0; it < 3; it++) {
      lsim_errbuf eb = LSIM_ERRBUF_INIT;
      int N = degrees[di];
      int T = 1 + (int)lsim_rng_below(&r, 4), rank = N * (1 + it % 2);
      int din = N * (2 + it), dout = N * (1 + (int)lsim_rng_below(&r, 3));
      lsim_qmat X = LSIM_QMAT_INIT, A = LSIM_QMAT_INIT, B = LSIM_QMAT_INIT,
                W = LSIM_QMAT_INIT;
      fill_rand(&X, T, din, &r, 0);
      fill_rand(&A, rank, din, &r, 0);
      fill_rand(&B, dout, rank, &r, 0);
      fill_rand(&W, dout, din, &r, 0);
      int64_t *x = calloc((size_t)T * din, 8), *a = calloc((size_t)rank * din, 8),
              *b = calloc((size_t)dout * rank, 8),
              *w = calloc((size_t)dout * din, 8),
              *z = calloc((size_t)T * rank, 8), *y = calloc((size_t)T * dout, 8);
      to_i64(&X, x);
      to_i64(&A, a);
      to_i64(&B, b);
      to_i64(&W, w);
      lsim_tp_col_trace c;
      lsim_tp_row_trace rw;
      memset(&c, 0, sizeof c);
      memset(&rw, 0, sizeof rw);
      cr_assert_eq(lsim_tp_ref_col(&X, &A, &B, N, &c, &eb), 0, "%s", eb.msg);
      lsim_tph_col(T, din, dout, rank, N, x, a, b, z, y);
      expect_i64(&c.d, y, "column");
      cr_assert_eq(lsim_tp_ref_row(&X, &A, &B, &W, N, &rw, &eb), 0);
      lsim_tph_row(T, din, dout, rank, N, x, a, b, w, z, y);
      expect_i64(&rw.y, y, "row");
      lsim_tp_col_trace_clear(&c);
      lsim_tp_row_trace_clear(&rw);
      free(x), free(a), free(b), free(w), free(z), free(y);
      lsim_qmat_clear(&X);
      lsim_qmat_clear(&A);
      lsim_qmat_clear(&B);
      lsim_qmat_clear(&W);
    }
}

Test(tp_host_ref, article_fixture) {
  /* Repository orientation of the fixture factors (transposes of FX_*). */
  int64_t a1[2 * 4], b1[4 * 2], a2[2 * 4], b2[4 * 2], w2[4 * 4], x[12], h[12];
  for (int i = 0; i < 4; i++)
    for (int k = 0; k < 2; k++) {
      a1[k * 4 + i] = FX_A1[i * 2 + k];
      b1[i * 2 + k] = FX_B1[k * 4 + i];
      a2[k * 4 + i] = FX_A2[i * 2 + k];
      b2[i * 2 + k] = FX_B2[k * 4 + i];
    }
  for (int i = 0; i < 4; i++)
    for (int o = 0; o < 4; o++)
      w2[o * 4 + i] = FX_W2[i * 4 + o];
  for (int i = 0; i < 12; i++)
    x[i] = FX_X[i], h[i] = FX_H[i];
  int64_t z[6], d[12];
  lsim_tph_col(3, 4, 4, 2, 2, x, a1, b1, z, d);
  static const int64_t D1[] = {6, 3, 0, 9, 8, 2, 8, 2, 8, 2, 8, 2};
  cr_assert_arr_eq(d, D1, sizeof D1);
  lsim_tph_row(3, 4, 4, 2, 2, h, a2, b2, w2, z, d);
  static const int64_t Y[] = {2, 16, 41, 27, -1, -2, 10, 11, 4, 6, -6, -9};
  cr_assert_arr_eq(d, Y, sizeof Y);
}

/* ------------------------------------------------------------ manifests */

static lsim_tp_group fixture_group(int style, int64_t rank) {
  lsim_tp_group g = {2, rank, style, 4, 4, 2, 7};
  return g;
}

static lsim_tp_manifest good(int style, int64_t rank) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_tp_group g = fixture_group(style, rank);
  lsim_tp_manifest m;
  cr_assert_eq(lsim_tp_manifest_build(&g, LSIM_TP_DIV_EXACT, LSIM_DT_F16,
                                      LSIM_DT_F16, LSIM_DT_F32, 3, &m, &eb),
               0, "%s", eb.msg);
  cr_assert_eq(lsim_tp_validate(&m, &g, &eb), 0, "%s", eb.msg);
  return m;
}

static void expect_fault(const lsim_tp_manifest *m, const lsim_tp_group *g,
                         lsim_err code) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_err rc = lsim_tp_validate(m, g, &eb);
  cr_assert_eq(rc, code, "got %s (%s), want %s", lsim_err_name(rc), eb.msg,
               lsim_err_name(code));
  cr_assert(eb.msg[0] != 0);
}

Test(tp_manifest, article_schedule_validates_on_every_rank) {
  for (int style = LSIM_TP_COLUMN; style <= LSIM_TP_ROW; style++)
    for (int q = 0; q < 2; q++) {
      lsim_tp_manifest m = good(style, q);
      if (style == LSIM_TP_COLUMN) {
        /* A1,j [r/N][h] = [1][4]; B1,j [d/N][r] = [2][2] */
        cr_assert_eq(m.a.rows, 1);
        cr_assert_eq(m.a.cols, 4);
        cr_assert_eq(m.a.begin, q);
        cr_assert_eq(m.b.begin, 2 * q);
        cr_assert_eq(m.bottleneck.kind, LSIM_TP_COLL_ALL_GATHER);
      } else {
        cr_assert_eq(m.a.rows, 2);
        cr_assert_eq(m.a.cols, 2);
        cr_assert_eq(m.fused_into, LSIM_TP_FUSE_BASE_ALL_REDUCE);
      }
    }
}

Test(tp_manifest, built_manifests_validate_at_every_degree) {
  /* degree 1 (a gather of one part is the identity) up to 8, every rank */
  static const int64_t degrees[] = {1, 2, 4, 8};
  for (int di = 0; di < 4; di++)
    for (int style = LSIM_TP_COLUMN; style <= LSIM_TP_ROW; style++)
      for (int64_t q = 0; q < degrees[di]; q++) {
        lsim_errbuf eb = LSIM_ERRBUF_INIT;
        lsim_tp_group g = {degrees[di], q, style, 4096, 1024, 16, 3};
        lsim_tp_manifest m;
        cr_assert_eq(lsim_tp_manifest_build(&g, LSIM_TP_DIV_EXACT,
                                            LSIM_DT_BF16, LSIM_DT_BF16,
                                            LSIM_DT_F32, 1, &m, &eb),
                     0, "%s", eb.msg);
        cr_assert_eq(lsim_tp_validate(&m, &g, &eb), 0, "N=%lld rank %lld "
                     "style %d: %s", (long long)g.world, (long long)q, style,
                     eb.msg);
        /* r (d_in + d_out) / N scalars per rank in either style */
        cr_assert_eq(m.a.rows * m.a.cols + m.b.rows * m.b.cols,
                     16 * (4096 + 1024) / degrees[di]);
      }
}

Test(tp_fault, omitted_all_gather) {
  lsim_tp_group g = fixture_group(LSIM_TP_COLUMN, 1);
  lsim_tp_manifest m = good(LSIM_TP_COLUMN, 1);
  m.bottleneck.kind = LSIM_TP_COLL_NONE;
  expect_fault(&m, &g, LSIM_E_TP_NO_GATHER);
}

Test(tp_fault, concatenated_partial_sums) {
  lsim_tp_group g = fixture_group(LSIM_TP_ROW, 0);
  lsim_tp_manifest m = good(LSIM_TP_ROW, 0);
  m.bottleneck.kind = LSIM_TP_COLL_ALL_GATHER;
  m.bottleneck.reduction = LSIM_TP_RED_NONE;
  expect_fault(&m, &g, LSIM_E_TP_CONCAT_PARTIALS);
}

Test(tp_fault, max_or_mean_reduction) {
  lsim_tp_group g = fixture_group(LSIM_TP_ROW, 1);
  int reds[2] = {LSIM_TP_RED_MAX, LSIM_TP_RED_MEAN};
  for (int i = 0; i < 2; i++) {
    lsim_tp_manifest m = good(LSIM_TP_ROW, 1);
    m.bottleneck.reduction = reds[i];
    expect_fault(&m, &g, LSIM_E_TP_REDUCTION);
    m = good(LSIM_TP_ROW, 1);
    m.output.reduction = reds[i]; /* the fused base all-reduce too */
    expect_fault(&m, &g, LSIM_E_TP_REDUCTION);
  }
}

Test(tp_fault, stale_manifest_other_degree) {
  /* A manifest written for degree 2 meets a degree-4 group: the rank-0
  ** local extents of A (input split) would even look plausible. */
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_tp_group g4 = {4, 0, LSIM_TP_ROW, 8, 8, 4, 1};
  lsim_tp_group g2 = g4;
  g2.world = 2;
  lsim_tp_manifest m;
  cr_assert_eq(lsim_tp_manifest_build(&g2, LSIM_TP_DIV_EXACT, LSIM_DT_F16,
                                      LSIM_DT_F16, LSIM_DT_F32, 0, &m, &eb),
               0);
  expect_fault(&m, &g4, LSIM_E_TP_STALE_MANIFEST);
  /* and a manifest of an older generation */
  cr_assert_eq(lsim_tp_manifest_build(&g4, LSIM_TP_DIV_EXACT, LSIM_DT_F16,
                                      LSIM_DT_F16, LSIM_DT_F32, 0, &m, &eb),
               0);
  g4.generation = 2;
  expect_fault(&m, &g4, LSIM_E_TP_STALE_MANIFEST);
}

Test(tp_fault, one_rank_publishes_early) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_gensnap s;
  cr_assert_eq(lsim_gensnap_init(&s, 2, &eb), 0);
  lsim_digest g1 = {{1}}, g2 = {{2}};
  cr_assert_eq(lsim_gensnap_launchable(&s, NULL, NULL, &eb),
               LSIM_E_TP_UNPUBLISHED);
  cr_assert_eq(lsim_gensnap_publish(&s, 0, 1, &g1, &eb), 0);
  cr_assert_eq(lsim_gensnap_publish(&s, 1, 1, &g1, &eb), 0);
  int64_t gen = -1;
  lsim_digest c;
  cr_assert_eq(lsim_gensnap_launchable(&s, &gen, &c, &eb), 0, "%s", eb.msg);
  cr_assert_eq(gen, 1);
  cr_assert(lsim_digest_eq(&c, &g1));
  /* Rank 1 publishes generation 2 first: the group is mixed. */
  cr_assert_eq(lsim_gensnap_publish(&s, 1, 2, &g2, &eb), 0);
  cr_assert_eq(lsim_gensnap_launchable(&s, &gen, &c, &eb),
               LSIM_E_TP_MIXED_GEN);
  cr_assert_eq(gen, 1, "a failed check leaves the outputs alone");
  /* Same generation number but another content is mixed as well. */
  lsim_digest g3 = {{3}};
  cr_assert_eq(lsim_gensnap_publish(&s, 0, 2, &g3, &eb), 0);
  cr_assert_eq(lsim_gensnap_launchable(&s, NULL, NULL, &eb),
               LSIM_E_TP_MIXED_GEN);
  /* No going back, and a generation is not republished differently. */
  cr_assert_eq(lsim_gensnap_publish(&s, 0, 1, &g1, &eb), LSIM_E_TP_ORDER);
  cr_assert_eq(lsim_gensnap_publish(&s, 0, 2, &g2, &eb), LSIM_E_TP_ORDER);
  lsim_digest g4 = {{4}};
  cr_assert_eq(lsim_gensnap_publish(&s, 0, 3, &g4, &eb), 0);
  cr_assert_eq(lsim_gensnap_publish(&s, 1, 3, &g4, &eb), 0);
  cr_assert_eq(lsim_gensnap_launchable(&s, &gen, NULL, &eb), 0);
  cr_assert_eq(gen, 3);
}

Test(tp_fault, factor_sharded_independently_of_base) {
  /* Column: B split on the input axis instead of the base's d_out. */
  lsim_tp_group g = fixture_group(LSIM_TP_COLUMN, 0);
  lsim_tp_manifest m = good(LSIM_TP_COLUMN, 0);
  m.b.shard_axis = LSIM_AXIS_INPUT;
  expect_fault(&m, &g, LSIM_E_TP_INDEPENDENT);
  /* Row: A holds the other rank's input slice than the activation. */
  g = fixture_group(LSIM_TP_ROW, 0);
  m = good(LSIM_TP_ROW, 0);
  m.a.begin = 2;
  m.a.end = 4;
  expect_fault(&m, &g, LSIM_E_TP_INDEPENDENT);
  /* Row: A replicated while the base splits d_in. */
  m = good(LSIM_TP_ROW, 0);
  m.a.shard_axis = LSIM_TP_REPLICATED;
  expect_fault(&m, &g, LSIM_E_TP_INDEPENDENT);
}

Test(tp_fault, other_contract_faults) {
  lsim_tp_group g = fixture_group(LSIM_TP_ROW, 0);
  lsim_tp_manifest m = good(LSIM_TP_ROW, 0);
  m.fused_into = LSIM_TP_FUSE_NONE; /* a separate output gather */
  expect_fault(&m, &g, LSIM_E_TP_FUSION);
  m = good(LSIM_TP_ROW, 0);
  m.bottleneck.order = LSIM_TP_ORDER_RANK_DESC;
  expect_fault(&m, &g, LSIM_E_TP_ORDER);
  m = good(LSIM_TP_ROW, 0);
  m.accum_dtype = LSIM_DT_I8;
  expect_fault(&m, &g, LSIM_E_TP_DTYPE);
  m = good(LSIM_TP_ROW, 0);
  m.b.rows = 4; /* local shape of the global B */
  expect_fault(&m, &g, LSIM_E_TP_SHAPE);
  lsim_tp_group gc = fixture_group(LSIM_TP_COLUMN, 1);
  m = good(LSIM_TP_COLUMN, 1);
  m.output.kind = LSIM_TP_COLL_ALL_REDUCE; /* reducing a sharded output */
  m.output.reduction = LSIM_TP_RED_SUM;
  expect_fault(&m, &gc, LSIM_E_TP_FUSION);
  /* Exact divisibility: r = 2 over 4 ranks. */
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_tp_group g4 = {4, 0, LSIM_TP_COLUMN, 4, 4, 2, 0};
  cr_assert_eq(lsim_tp_manifest_build(&g4, LSIM_TP_DIV_EXACT, LSIM_DT_F16,
                                      LSIM_DT_F16, LSIM_DT_F32, 0, &m, &eb),
               LSIM_E_TP_DIV);
  /* ... allowed under the zero-padding rule: ceil(2/4) = 1 rank row. */
  g4.rank = 3;
  cr_assert_eq(lsim_tp_manifest_build(&g4, LSIM_TP_PAD_ZERO, LSIM_DT_F16,
                                      LSIM_DT_F16, LSIM_DT_F32, 0, &m, &eb),
               0, "%s", eb.msg);
  cr_assert_eq(lsim_tp_validate(&m, &g4, &eb), 0, "%s", eb.msg);
  cr_assert_eq(m.a.begin, 2);
  cr_assert_eq(m.a.end, 2); /* rank 3 holds only padding */
  cr_assert_eq(m.a.rows, 1);
}

Test(tp_manifest, digest_binds_into_kernel_abi) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_tp_manifest m0 = good(LSIM_TP_ROW, 0), m1 = good(LSIM_TP_ROW, 1);
  lsim_digest d0, d1, d0b;
  cr_assert_eq(lsim_tp_manifest_digest(&m0, &d0, &eb), 0);
  cr_assert_eq(lsim_tp_manifest_digest(&m1, &d1, &eb), 0);
  cr_assert_eq(lsim_tp_manifest_digest(&m0, &d0b, &eb), 0);
  cr_assert(lsim_digest_eq(&d0, &d0b));
  cr_assert(!lsim_digest_eq(&d0, &d1));
  m0.bottleneck.order = LSIM_TP_ORDER_RANK_DESC;
  cr_assert_eq(lsim_tp_manifest_digest(&m0, &d0b, &eb), 0);
  cr_assert(!lsim_digest_eq(&d0, &d0b), "order is part of the identity");

  /* A one-module artifact (fixture first projection, f16 zero bytes). */
  uint16_t abytes[8] = {0}, bbytes[8] = {0};
  lsim_module_spec mod = {"layers.0.mlp.up", "up_proj", 4, 4, 2, 2,
                          LSIM_SCALE_ALPHA_OVER_RANK,
                          {LSIM_AXIS_RANK, LSIM_AXIS_INPUT},
                          {LSIM_AXIS_OUTPUT, LSIM_AXIS_RANK},
                          abytes, sizeof abytes, bbytes, sizeof bbytes};
  lsim_artifact_in art = {"lora", {{1}}, {{2}}, LSIM_DT_F16, &mod, 1};
  lsim_semantic_in sem = {&art, {{3}}};
  lsim_module_layout lay = {"layers.0.mlp.up",
                            {LSIM_AXIS_RANK, LSIM_AXIS_INPUT},
                            {LSIM_AXIS_OUTPUT, LSIM_AXIS_RANK}, 0, 4, 0, 4};
  lsim_kernel_in k;
  memset(&k, 0, sizeof k);
  k.semantic = &sem;
  k.kernel_family = "punica_sgmv";
  k.dtype = LSIM_DT_F16;
  k.packing = "dense";
  k.layouts = &lay;
  k.n_layouts = 1;
  k.shard = (lsim_shard){0, 1, LSIM_SHARD_REPLICATED};
  lsim_digest none, with0, with1;
  cr_assert_eq(lsim_id_kernel(&k, &none, &eb), 0, "%s", eb.msg);
  k.tp_manifest = d0;
  cr_assert_eq(lsim_id_kernel(&k, &with0, &eb), 0, "%s", eb.msg);
  k.tp_manifest = d1;
  cr_assert_eq(lsim_id_kernel(&k, &with1, &eb), 0, "%s", eb.msg);
  cr_assert(!lsim_digest_eq(&none, &with0));
  cr_assert(!lsim_digest_eq(&with0, &with1));
}

/* -------------------------------------------------------------- ledgers */

Test(tp_ledger, fixture_residency_32_per_rank_64_cluster) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_tp_proj p[2] = {{LSIM_TP_COLUMN, 4, 4, 2}, {LSIM_TP_ROW, 4, 4, 2}};
  lsim_tp_res_ledger l;
  cr_assert_eq(lsim_tp_residency(p, 2, 2, LSIM_TP_DIV_EXACT, LSIM_DT_F16, &l,
                                 &eb),
               0, "%s", eb.msg);
  cr_assert_eq(l.rank_scalars, 16);
  cr_assert_eq(l.rank_bytes, 32);
  cr_assert_eq(l.cluster_bytes, 64);
  cr_assert_eq(l.replicated_rank_bytes, 64);
  cr_assert_eq(l.replicated_cluster_bytes, 128);
  cr_assert_eq(lsim_tp_residency_verify(p, 2, 2, LSIM_TP_DIV_EXACT,
                                        LSIM_DT_F16, &l, &eb),
               0, "%s", eb.msg);
  /* A ledger that counts the replicated bytes as the sharded ones. */
  lsim_tp_res_ledger bad = l;
  bad.rank_bytes = 64;
  cr_assert_eq(lsim_tp_residency_verify(p, 2, 2, LSIM_TP_DIV_EXACT,
                                        LSIM_DT_F16, &bad, &eb),
               LSIM_E_TP_LEDGER);
  cr_assert(strstr(eb.msg, "rank_bytes"), "%s", eb.msg);
  /* Degree 1: sharded and replicated coincide. */
  cr_assert_eq(lsim_tp_residency(p, 2, 1, LSIM_TP_DIV_EXACT, LSIM_DT_F16, &l,
                                 &eb),
               0);
  cr_assert_eq(l.rank_bytes, 64);
  cr_assert_eq(l.replicated_rank_bytes, 64);
}

Test(tp_ledger, collective_elements_fixture_30_vs_24_bytes) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_tp_coll_ledger c;
  /* B = 3, h = 4, r = 2, N = 2: three Q/K/V gathers + one reduction. */
  cr_assert_eq(lsim_tp_collectives(2, 3, 4, 2, 3, 1, LSIM_DT_F16, &c, &eb), 0,
               "%s", eb.msg);
  cr_assert_eq(c.gather_elems, 3);  /* (N-1) B r / N */
  cr_assert_eq(c.reduce_elems, 6);  /* 2 (N-1) B r / N */
  cr_assert_eq(c.lora_elems, 15);   /* 5 (N-1) B r / N */
  cr_assert_eq(c.base_elems, 12);   /* 2 (N-1) B h / N */
  cr_assert_eq(c.lora_bytes, 30);
  cr_assert_eq(c.base_bytes, 24);
  cr_assert_eq(c.ratio_num, 5); /* 1.25 = 5/4 */
  cr_assert_eq(c.ratio_den, 4);
}

Test(tp_ledger, ratio_5r_over_2h_at_h4096_r16) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  static const int64_t degrees[] = {2, 4, 8};
  for (int i = 0; i < 3; i++) {
    lsim_tp_coll_ledger c;
    int64_t N = degrees[i], B = 256;
    cr_assert_eq(lsim_tp_collectives(N, B, 4096, 16, 3, 1, LSIM_DT_BF16, &c,
                                     &eb),
                 0);
    cr_assert_eq(c.lora_elems, 5 * (N - 1) * B * 16 / N);
    cr_assert_eq(c.base_elems, 2 * (N - 1) * B * 4096 / N);
    /* 5 * 16 / (2 * 4096) = 5/512 = 0.9765625 % */
    cr_assert_eq(c.ratio_num, 5);
    cr_assert_eq(c.ratio_den, 512);
    cr_assert_eq(c.lora_elems * 512, c.base_elems * 5);
  }
  lsim_tp_coll_ledger c;
  cr_assert_eq(lsim_tp_collectives(3, 4, 4096, 16, 3, 1, LSIM_DT_F16, &c,
                                   &eb),
               LSIM_E_TP_DIV);
}

/* Why the faults are faults: on the fixture, the wrong collectives give a
** plausible-looking tensor of the right shape and the wrong values. */
Test(tp_fixture, wrong_collectives_change_the_update) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_qmat H = LSIM_QMAT_INIT, A = LSIM_QMAT_INIT, B = LSIM_QMAT_INIT;
  set_int(&H, 3, 4, FX_H);
  load_t(&A, 4, 2, FX_A2);
  load_t(&B, 2, 4, FX_B2);
  lsim_tp_row_trace t;
  memset(&t, 0, sizeof t);
  cr_assert_eq(lsim_tp_ref_row(&H, &A, &B, NULL, 2, &t, &eb), 0, "%s", eb.msg);
  /* MAX and MEAN in place of SUM */
  lsim_qmat mx = LSIM_QMAT_INIT, mean = LSIM_QMAT_INIT;
  cr_assert_eq(lsim_qmat_copy(&mx, &t.p_local[0], &eb), 0);
  cr_assert_eq(lsim_tp_all_reduce_sum(t.p_local, 2, &mean, &eb), 0);
  mpq_t half;
  mpq_init(half);
  mpq_set_si(half, 1, 2);
  for (int i = 0; i < 6; i++) {
    if (mpq_cmp(t.p_local[1].v[i], mx.v[i]) > 0)
      mpq_set(mx.v[i], t.p_local[1].v[i]);
    mpq_mul(mean.v[i], mean.v[i], half);
  }
  mpq_clear(half);
  cr_assert(!lsim_qmat_equal(&mx, &t.z));
  cr_assert(!lsim_qmat_equal(&mean, &t.z));
  /* Partials concatenated: [T][2r], and its first r columns are P_0, not
  ** the bottleneck. */
  lsim_qmat cat = LSIM_QMAT_INIT, head = LSIM_QMAT_INIT;
  cr_assert_eq(lsim_tp_all_gather(t.p_local, 2, &cat, &eb), 0);
  cr_assert_eq(lsim_qmat_slice(&head, &cat, 0, 3, 0, 2, &eb), 0);
  cr_assert(!lsim_qmat_equal(&head, &t.z));
  lsim_qmat_clear(&mx);
  lsim_qmat_clear(&mean);
  lsim_qmat_clear(&cat);
  lsim_qmat_clear(&head);
  lsim_tp_row_trace_clear(&t);

  /* Column parallel without the gather: rank j can only pair its own rank
  ** slice Z_j with the matching rank column of B_j, dropping cross terms. */
  lsim_qmat X = LSIM_QMAT_INIT, A1 = LSIM_QMAT_INIT, B1 = LSIM_QMAT_INIT;
  set_int(&X, 3, 4, FX_X);
  load_t(&A1, 4, 2, FX_A1);
  load_t(&B1, 2, 4, FX_B1);
  lsim_tp_col_trace c;
  memset(&c, 0, sizeof c);
  cr_assert_eq(lsim_tp_ref_col(&X, &A1, &B1, 2, &c, &eb), 0);
  /* rank 0 without the gather: D_0 = Z_0 (B_0[:, 0:1])^T */
  lsim_qmat b0 = LSIM_QMAT_INIT, b0d = LSIM_QMAT_INIT, d0 = LSIM_QMAT_INIT;
  cr_assert_eq(lsim_qmat_slice(&b0, &B1, 0, 2, 0, 2, &eb), 0);
  cr_assert_eq(lsim_qmat_slice(&b0d, &b0, 0, 2, 0, 1, &eb), 0);
  lsim_qmat a0 = LSIM_QMAT_INIT;
  cr_assert_eq(lsim_qmat_slice(&a0, &A1, 0, 1, 0, 4, &eb), 0);
  cr_assert_eq(lsim_tp_ref_full(&X, &a0, &b0d, NULL, &d0, &eb), 0, "%s",
               eb.msg);
  cr_assert_eq(d0.rows, c.d_local[0].rows);
  cr_assert_eq(d0.cols, c.d_local[0].cols);
  cr_assert(!lsim_qmat_equal(&d0, &c.d_local[0]));
  lsim_qmat_clear(&a0);
  lsim_qmat_clear(&b0);
  lsim_qmat_clear(&b0d);
  lsim_qmat_clear(&d0);
  lsim_tp_col_trace_clear(&c);
  lsim_qmat_clear(&X);
  lsim_qmat_clear(&A1);
  lsim_qmat_clear(&B1);
  lsim_qmat_clear(&H);
  lsim_qmat_clear(&A);
  lsim_qmat_clear(&B);
}

/* ------------------------------- the GPU step sequence, emulated on host */

/* One thread per rank; the collectives meet at a barrier, exactly NCCL's
** semantics: all-gather concatenates the ranks' blocks in rank order,
** all-reduce sums elementwise. */
typedef struct emu_group {
  int N;
  pthread_barrier_t bar;
  const long long *send[8];
  long long *copy[8];
} emu_group;

typedef struct emu_rank {
  emu_group *g;
  int j, rc;
  lsim_tp_rank_i64 s;
} emu_rank;

static int emu_mm(void *ud, int rows, int cols, int K, const long long *X,
                  long xt, long xk, const long long *F, long fn, long fk,
                  long long *out, long ot, long on, int acc) {
  (void)ud;
  for (long t = 0; t < rows; t++)
    for (long n = 0; n < cols; n++) {
      long long s = 0;
      for (long k = 0; k < K; k++)
        s += X[t * xt + k * xk] * F[n * fn + k * fk];
      out[t * ot + n * on] = acc ? out[t * ot + n * on] + s : s;
    }
  return 0;
}

static int emu_gather(void *ud, const long long *send, long long *recv,
                      size_t n) {
  emu_rank *r = ud;
  r->g->send[r->j] = send;
  pthread_barrier_wait(&r->g->bar);
  for (int q = 0; q < r->g->N; q++)
    memcpy(recv + (size_t)q * n, r->g->send[q], n * sizeof *recv);
  pthread_barrier_wait(&r->g->bar);
  return 0;
}

static int emu_reduce(void *ud, long long *buf, size_t n) {
  emu_rank *r = ud;
  long long *mine = malloc(n * sizeof *mine);
  if (!mine)
    return -1;
  memcpy(mine, buf, n * sizeof *mine);
  r->g->copy[r->j] = mine;
  pthread_barrier_wait(&r->g->bar);
  for (size_t i = 0; i < n; i++) {
    long long a = 0;
    for (int q = 0; q < r->g->N; q++) /* rank order */
      a += r->g->copy[q][i];
    buf[i] = a;
  }
  pthread_barrier_wait(&r->g->bar);
  free(mine);
  return 0;
}

static void *emu_thread(void *p) {
  emu_rank *r = p;
  lsim_tp_step_ops ops = {r, emu_mm, emu_gather, emu_reduce};
  r->rc = lsim_tp_step_run(&ops, &r->s);
  return NULL;
}

/* Host slice rows [r0, r1) x columns [c0, c1) of a row-major [.][cols]. */
static long long *emu_slice(const int64_t *m, int cols, int r0, int r1,
                            int c0, int c1) {
  long long *o = calloc((size_t)(r1 - r0) * (size_t)(c1 - c0) + 1, 8);
  for (int i = r0; i < r1; i++)
    for (int k = c0; k < c1; k++)
      o[(size_t)(i - r0) * (size_t)(c1 - c0) + (size_t)(k - c0)] =
          m[(size_t)i * (size_t)cols + (size_t)k];
  return o;
}

Test(tp_step, gpu_sequence_on_emulated_collectives_equals_host_ref) {
  lsim_rng rg;
  lsim_rng_init(&rg, 23, 0x7374);
  static const int degrees[] = {1, 2, 4, 8};
  for (int di = 0; di < 4; di++) {
    int N = degrees[di], T = 5, din = 8 * N, dout = 4 * N, R = 2 * N;
    int rs = R / N, os = dout / N, is = din / N;
    int64_t *x = calloc((size_t)T * din, 8), *h = calloc((size_t)T * din, 8),
            *a1 = calloc((size_t)R * din, 8), *a2 = calloc((size_t)R * din, 8),
            *b1 = calloc((size_t)dout * R, 8), *b2 = calloc((size_t)dout * R, 8),
            *w2 = calloc((size_t)dout * din, 8),
            *z = calloc((size_t)T * R, 8), *d1 = calloc((size_t)T * dout, 8),
            *y = calloc((size_t)T * dout, 8);
    int64_t *all[] = {x, h, a1, a2, b1, b2, w2};
    size_t len[] = {(size_t)T * din, (size_t)T * din, (size_t)R * din,
                    (size_t)R * din, (size_t)dout * R, (size_t)dout * R,
                    (size_t)dout * din};
    for (int m = 0; m < 7; m++)
      for (size_t i = 0; i < len[m]; i++)
        all[m][i] = (int64_t)lsim_rng_below(&rg, 17) - 8;
    lsim_tph_col(T, din, dout, R, N, x, a1, b1, z, d1);
    lsim_tph_row(T, din, dout, R, N, h, a2, b2, w2, z, y);
    emu_group g;
    memset(&g, 0, sizeof g);
    g.N = N;
    pthread_barrier_init(&g.bar, NULL, (unsigned)N);
    emu_rank rk[8];
    pthread_t th[8];
    for (int j = 0; j < N; j++) {
      lsim_tp_rank_i64 *s = &rk[j].s;
      memset(&rk[j], 0, sizeof rk[j]);
      rk[j].g = &g;
      rk[j].j = j;
      *s = (lsim_tp_rank_i64){.N = N, .j = j, .T = T, .din = din,
                              .dout = dout, .r = R};
      s->x = emu_slice(x, din, 0, T, 0, din);
      s->a1 = emu_slice(a1, din, j * rs, (j + 1) * rs, 0, din);
      s->b1 = emu_slice(b1, R, j * os, (j + 1) * os, 0, R);
      s->h = emu_slice(h, din, 0, T, j * is, (j + 1) * is);
      s->a2 = emu_slice(a2, din, 0, R, j * is, (j + 1) * is);
      s->b2 = emu_slice(b2, R, j * os, (j + 1) * os, 0, R);
      s->w2 = emu_slice(w2, din, 0, dout, j * is, (j + 1) * is);
      s->zt_loc = calloc((size_t)rs * T, 8);
      s->zt = calloc((size_t)R * T, 8);
      s->d1 = calloc((size_t)T * os, 8);
      s->p = calloc((size_t)T * R, 8);
      s->y = calloc((size_t)T * dout, 8);
      cr_assert_eq(pthread_create(&th[j], NULL, emu_thread, &rk[j]), 0);
    }
    for (int j = 0; j < N; j++)
      pthread_join(th[j], NULL);
    pthread_barrier_destroy(&g.bar);
    for (int j = 0; j < N; j++) {
      lsim_tp_rank_i64 *s = &rk[j].s;
      cr_assert_eq(rk[j].rc, 0);
      for (int t = 0; t < T; t++)
        for (int o = 0; o < os; o++)
          cr_assert_eq(s->d1[t * os + o], d1[t * dout + j * os + o],
                       "N=%d rank %d D1[%d][%d]", N, j, t, j * os + o);
      for (int q = 0; q < T * dout; q++)
        cr_assert_eq(s->y[q], y[q], "N=%d rank %d Y[%d]", N, j, q);
      long long *bufs[] = {s->x, s->a1, s->b1, s->h, s->a2, s->b2,
                           s->w2, s->zt_loc, s->zt, s->d1, s->p, s->y};
      for (int b = 0; b < 12; b++)
        free(bufs[b]);
    }
    for (int m = 0; m < 7; m++)
      free(all[m]);
    free(z), free(d1), free(y);
  }
}
