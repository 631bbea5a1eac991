/*
** test_compress.c: shared-basis collection compression (issue 10).
**
**   1. the article's three-adapter fixture, exactly (GMP): zero JD-Full
**      error, span rank 3 (> R = 2, so no rank-2 JD-Diag is exact), the
**      displayed-basis diagonal residual 27, the runtime operator on X for
**      adapter b, the recovered cores
**   2. the parameter ledger and break-even sizes (fixture and the
**      1000-adapter, 4096-wide example); a non-positive denominator fails
**   3. the floating-point fitter on the fixture and on planted collections:
**      exact structure is recovered (error below stated bounds), JD-Diag
**      cannot be exact on the fixture, objectives never increase with more
**      iterations, clustering recovers planted groups, normalisation makes
**      the bases scale-free, runs repeat bit for bit
**   4. errors are values
*/
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testsupport/compress_ref.h"
#include "compress/jd.h"
#include "compress/ledger.h"
#include "compress/synth.h"

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

/* ---- the fixture ------------------------------------------------------------ */

static const int fx_core[3][2][2] = {
    {{1, 0}, {0, 2}}, {{0, 3}, {4, 0}}, {{2, -1}, {1, 1}}};

static void qset(lsim_qmat *m, int rows, int cols, const int *v) {
  OK(lsim_qmat_init(m, rows, cols, eb));
  for (int i = 0; i < rows * cols; i++)
    mpq_set_si(m->v[i], v[i], 1);
}

/* U = V = [[1,0],[0,1],[0,0]]; delta_i = U Sigma_i V^T */
static void fixture(lsim_qmat *U, lsim_qmat *V, lsim_qmat *D) {
  static const int basis[6] = {1, 0, 0, 1, 0, 0};
  qset(U, 3, 2, basis);
  qset(V, 3, 2, basis);
  for (int i = 0; i < 3; i++) {
    lsim_qmat S = LSIM_QMAT_INIT;
    qset(&S, 2, 2, &fx_core[i][0][0]);
    D[i] = (lsim_qmat)LSIM_QMAT_INIT;
    OK(lsim_ref_jd_expand(U, V, &S, 0, &D[i], eb));
    lsim_qmat_clear(&S);
  }
}

static void release(lsim_qmat *U, lsim_qmat *V, lsim_qmat *D) {
  lsim_qmat_clear(U);
  lsim_qmat_clear(V);
  for (int i = 0; i < 3; i++)
    lsim_qmat_clear(&D[i]);
}

Test(fixture, jd_full_exact_and_cores_recovered) {
  lsim_qmat U = LSIM_QMAT_INIT, V = LSIM_QMAT_INIT, D[3];
  fixture(&U, &V, D);
  mpq_t e;
  mpq_init(e);
  OK(lsim_ref_jd_full_error(D, 3, &U, &V, e, eb));
  cr_assert_eq(mpq_sgn(e), 0, "JD-Full error %s", lsim_q_str(e));
  for (int i = 0; i < 3; i++) {
    lsim_qmat C = LSIM_QMAT_INIT, W = LSIM_QMAT_INIT;
    OK(lsim_ref_jd_core(&U, &V, &D[i], &C, eb));
    qset(&W, 2, 2, &fx_core[i][0][0]);
    cr_assert(lsim_qmat_equal(&C, &W), "core %d not recovered", i);
    lsim_qmat_clear(&C);
    lsim_qmat_clear(&W);
  }
  /* delta_b in full, checked by hand: row 0 = [0 3 0], row 1 = [4 0 0] */
  static const int db[9] = {0, 3, 0, 4, 0, 0, 0, 0, 0};
  lsim_qmat W = LSIM_QMAT_INIT;
  qset(&W, 3, 3, db);
  cr_assert(lsim_qmat_equal(&D[1], &W));
  lsim_qmat_clear(&W);
  mpq_clear(e);
  release(&U, &V, D);
}

Test(fixture, span_rank_three_and_diag_witness_27) {
  lsim_qmat U = LSIM_QMAT_INIT, V = LSIM_QMAT_INIT, D[3];
  fixture(&U, &V, D);
  int rank = 0;
  OK(lsim_ref_span_rank(D, 3, &rank, eb));
  cr_assert_eq(rank, 3);
  cr_assert_gt(rank, 2, "rank-2 JD-Diag would be exact");
  mpq_t e;
  mpq_init(e);
  OK(lsim_ref_jd_diag_kept(D, 3, &U, &V, e, eb));
  cr_assert_eq(mpq_cmp_si(e, 27, 1), 0, "diag residual %s", lsim_q_str(e));
  /* a and b alone: a is diagonal (0), b loses 3^2 + 4^2 */
  OK(lsim_ref_jd_diag_kept(D, 2, &U, &V, e, eb));
  cr_assert_eq(mpq_cmp_si(e, 25, 1), 0);
  /* two copies of one delta span rank 1 */
  lsim_qmat two[2] = {D[1], D[1]};
  OK(lsim_ref_span_rank(two, 2, &rank, eb));
  cr_assert_eq(rank, 1);
  mpq_clear(e);
  release(&U, &V, D);
}

Test(fixture, runtime_operator_for_b) {
  lsim_qmat U = LSIM_QMAT_INIT, V = LSIM_QMAT_INIT, D[3];
  fixture(&U, &V, D);
  static const int x[6] = {1, 2, 3, 0, -1, 2};
  static const int want[6] = {6, 4, 0, -3, 0, 0};
  lsim_qmat X = LSIM_QMAT_INIT, S = LSIM_QMAT_INIT, Y = LSIM_QMAT_INIT,
            W = LSIM_QMAT_INIT, XV = LSIM_QMAT_INIT, Yd = LSIM_QMAT_INIT;
  qset(&X, 2, 3, x);
  qset(&S, 2, 2, &fx_core[1][0][0]);
  qset(&W, 2, 3, want);
  OK(lsim_ref_jd_apply(&X, &U, &V, &S, 0, &Y, eb));
  cr_assert(lsim_qmat_equal(&Y, &W), "(XV) Sigma_b^T U^T");
  /* the same as X delta_b^T, through the two-stage path */
  OK(lsim_ref_jd_apply(&X, &U, &V, &S, 0, &Yd, eb));
  lsim_qmat Dt = LSIM_QMAT_INIT;
  OK(lsim_qmat_init(&Dt, 2, 3, eb));
  for (int i = 0; i < 2; i++)
    for (int o = 0; o < 3; o++)
      for (int k = 0; k < 3; k++)
        mpq_set_si(LSIM_QAT(&Dt, i, o),
                   mpz_get_si(mpq_numref(LSIM_QAT(&Dt, i, o))) +
                       x[i * 3 + k] *
                           mpz_get_si(mpq_numref(LSIM_QAT(&D[1], o, k))),
                   1);
  cr_assert(lsim_qmat_equal(&Dt, &W), "X delta_b^T");
  /* X V = [[1,2],[0,-1]]: with Sigma = I the operator returns X V U^T */
  static const int eye[4] = {1, 0, 0, 1};
  static const int xv[6] = {1, 2, 0, 0, -1, 0};
  lsim_qmat I = LSIM_QMAT_INIT, Xv = LSIM_QMAT_INIT;
  qset(&I, 2, 2, eye);
  qset(&Xv, 2, 3, xv);
  lsim_qmat_clear(&Y);
  OK(lsim_ref_jd_apply(&X, &U, &V, &I, 0, &Y, eb));
  cr_assert(lsim_qmat_equal(&Y, &Xv));
  /* the diagonal form: diag(Sigma_a) = [1, 2] */
  static const int sa[2] = {1, 2};
  static const int ya[6] = {1, 4, 0, 0, -2, 0};
  lsim_qmat Sa = LSIM_QMAT_INIT, Ya = LSIM_QMAT_INIT;
  qset(&Sa, 1, 2, sa);
  qset(&Ya, 2, 3, ya);
  lsim_qmat_clear(&Y);
  OK(lsim_ref_jd_apply(&X, &U, &V, &Sa, 1, &Y, eb));
  cr_assert(lsim_qmat_equal(&Y, &Ya));
  lsim_qmat *all[] = {&X, &S, &Y, &W, &XV, &Yd, &Dt, &I, &Xv, &Sa, &Ya};
  for (size_t t = 0; t < sizeof all / sizeof *all; t++)
    lsim_qmat_clear(all[t]);
  release(&U, &V, D);
}

Test(fixture, non_orthonormal_basis_rejected) {
  lsim_qmat U = LSIM_QMAT_INIT, V = LSIM_QMAT_INIT, D[3];
  fixture(&U, &V, D);
  mpq_t e;
  mpq_init(e);
  mpq_set_si(LSIM_QAT(&U, 0, 0), 2, 1); /* column 0 has norm^2 4 */
  FAILS(LSIM_E_CMP_NOT_ORTHONORMAL, lsim_ref_jd_full_error(D, 3, &U, &V, e, eb));
  mpq_set_si(LSIM_QAT(&U, 0, 0), 1, 1);
  mpq_set_si(LSIM_QAT(&V, 0, 1), 1, 2); /* columns not orthogonal */
  FAILS(LSIM_E_CMP_NOT_ORTHONORMAL, lsim_ref_jd_full_error(D, 3, &U, &V, e, eb));
  mpq_clear(e);
  release(&U, &V, D);
}

/* ---- ledgers ---------------------------------------------------------------- */

Test(ledger, fixture_counts_and_break_even) {
  lsim_jd_ledger L;
  OK(lsim_jd_ledger_count(3, 2, 3, 3, 2, 1, &L, eb));
  cr_assert_eq(L.S, 6);
  cr_assert_eq(L.lora, 36);
  cr_assert_eq(L.full, 24);
  cr_assert_eq(L.diag, 18);
  cr_assert_eq(L.lora * 2, 72); /* FP16 bytes */
  cr_assert_eq(L.full * 2, 48);
  cr_assert_eq(L.diag * 2, 36);
  int64_t n, num, den;
  OK(lsim_jd_breakeven(LSIM_JD_FULL, 2, 3, 3, 2, 1, &n, &num, &den, eb));
  cr_assert_eq(num, 12);
  cr_assert_eq(den, 8);
  cr_assert_eq(n, 2);
  OK(lsim_jd_breakeven(LSIM_JD_DIAG, 2, 3, 3, 2, 1, &n, &num, &den, eb));
  cr_assert_eq(den, 10);
  cr_assert_eq(n, 2);
  /* the break-even n really is the boundary of the ledger */
  OK(lsim_jd_ledger_count(1, 2, 3, 3, 2, 1, &L, eb));
  cr_assert_geq(L.full, L.lora);
  OK(lsim_jd_ledger_count(2, 2, 3, 3, 2, 1, &L, eb));
  cr_assert_lt(L.full, L.lora);
  cr_assert_lt(L.diag, L.lora);
}

Test(ledger, exact_rational_thresholds) {
  mpq_t t;
  mpq_init(t);
  long n = 0;
  /* fixture: 12/8 = 3/2 (JD-Full) and 12/10 = 6/5 (JD-Diag); n = 2 */
  OK(lsim_ref_jd_breakeven(1, 2, 3, 3, 2, 1, t, &n, eb));
  cr_assert_eq(mpq_cmp_si(t, 3, 2), 0, "%s", lsim_q_str(t));
  cr_assert_eq(n, 2);
  OK(lsim_ref_jd_breakeven(0, 2, 3, 3, 2, 1, t, &n, eb));
  cr_assert_eq(mpq_cmp_si(t, 6, 5), 0);
  cr_assert_eq(n, 2);
  /* JD-Diag with r0 S = R = 6: a zero denominator */
  FAILS(LSIM_E_CMP_NO_BREAKEVEN,
        lsim_ref_jd_breakeven(0, 1, 3, 3, 6, 1, t, &n, eb));
  /* an integral threshold needs the next n: 6 * 6 / (2 * 6 - 6) = 6 */
  OK(lsim_ref_jd_breakeven(0, 2, 3, 3, 6, 1, t, &n, eb));
  cr_assert_eq(mpq_cmp_si(t, 6, 1), 0);
  cr_assert_eq(n, 7, "n must exceed the threshold strictly");
  /* the rational and the integer ledger agree everywhere small */
  for (int r0 = 1; r0 <= 4; r0++)
    for (int R = 1; R <= 8; R++)
      for (int full = 0; full <= 1; full++) {
        int64_t in, num, den;
        lsim_errbuf e1 = LSIM_ERRBUF_INIT, e2 = LSIM_ERRBUF_INIT;
        lsim_err a = lsim_ref_jd_breakeven(full, r0, 3, 4, R, 2, t, &n, &e1);
        lsim_err b = lsim_jd_breakeven(full ? LSIM_JD_FULL : LSIM_JD_DIAG,
                                       r0, 3, 4, R, 2, &in, &num, &den, &e2);
        cr_assert_eq(a, b);
        if (!a)
          cr_assert_eq(n, in);
      }
  FAILS(LSIM_E_CMP_NO_BREAKEVEN,
        lsim_ref_jd_breakeven(1, 1, 3, 3, 3, 1, t, &n, eb));
  mpq_clear(t);
}

Test(ledger, thousand_adapters_4096_wide) {
  lsim_jd_ledger L;
  OK(lsim_jd_ledger_count(1000, 16, 4096, 4096, 32, 1, &L, eb));
  cr_assert_eq(L.lora, 131072000);
  cr_assert_eq(L.full, 1286144);
  cr_assert_eq(L.diag, 294144);
  OK(lsim_jd_ledger_count(1000, 16, 4096, 4096, 32, 4, &L, eb));
  cr_assert_eq(L.full_k, 4 * 32 * 8192 + 1000 * 1024);
  cr_assert_eq(L.full_k_paper, L.full_k + 1000);
  cr_assert_eq(L.diag_k, 4 * 32 * 8192 + 1000 * 32);
  int64_t n, num, den;
  OK(lsim_jd_breakeven(LSIM_JD_FULL, 16, 4096, 4096, 32, 1, &n, &num, &den,
                       eb));
  cr_assert_eq(num, 262144);
  cr_assert_eq(den, 131072 - 1024);
  cr_assert_eq(n, 262144 / 130048 + 1);
  /* exhaustive: for small shapes, min_n is exactly the first saving n */
  for (int r0 = 1; r0 <= 3; r0++)
    for (int R = 1; R <= 6; R++)
      for (int k = 1; k <= 2; k++)
        for (int meth = LSIM_JD_FULL; meth <= LSIM_JD_DIAG; meth++) {
          lsim_errbuf eb = LSIM_ERRBUF_INIT;
          lsim_err rc =
              lsim_jd_breakeven(meth, r0, 2, 3, R, k, &n, &num, &den, &eb);
          int64_t first = 0;
          for (int64_t m = 1; m <= 200 && !first; m++) {
            OK(lsim_jd_ledger_count(m, r0, 2, 3, R, k, &L, eb));
            int64_t jd = meth == LSIM_JD_FULL ? L.full_k : L.diag_k;
            if (jd < L.lora)
              first = m;
          }
          if (rc == 0)
            cr_assert_eq(first, n, "r0 %d R %d k %d meth %d", r0, R, k, meth);
          else
            cr_assert_eq(first, 0, "no break-even but n %lld saves",
                         (long long)first);
        }
}

Test(ledger, non_positive_denominator_fails) {
  int64_t n, num, den;
  /* r0 S = 6, R^2 = 9 */
  FAILS(LSIM_E_CMP_NO_BREAKEVEN,
        lsim_jd_breakeven(LSIM_JD_FULL, 1, 3, 3, 3, 1, &n, &num, &den, eb));
  cr_assert_eq(den, -3);
  cr_assert_eq(n, 0);
  /* exactly zero: r0 S = 6 = R with JD-Diag */
  FAILS(LSIM_E_CMP_NO_BREAKEVEN,
        lsim_jd_breakeven(LSIM_JD_DIAG, 1, 3, 3, 6, 1, &n, &num, &den, eb));
  cr_assert_eq(den, 0);
  lsim_jd_ledger L;
  FAILS(LSIM_E_CMP_OVERFLOW, lsim_jd_ledger_count(INT64_MAX / 2, 16, 4096,
                                                  4096, 32, 1, &L, eb));
  FAILS(LSIM_E_CMP_SHAPE, lsim_jd_ledger_count(3, 0, 3, 3, 2, 1, &L, eb));
}

/* ---- the fitter --------------------------------------------------------------- */

/* the fixture as factors: A_i = Sigma_i V^T [2][3], B_i = U [3][2] */
static double fxA[3][6], fxB[6] = {1, 0, 0, 1, 0, 0};
static lsim_jd_source fx_src[3];

static void fixture_sources(void) {
  for (int i = 0; i < 3; i++) {
    memset(fxA[i], 0, sizeof fxA[i]);
    for (int p = 0; p < 2; p++)
      for (int q = 0; q < 2; q++)
        fxA[i][p * 3 + q] = fx_core[i][p][q];
    fx_src[i].rank = 2;
    fx_src[i].scale = 1;
    fx_src[i].A = fxA[i];
    fx_src[i].B = fxB;
  }
}

static lsim_jd_config cfg(int method, int R, int k, int iters) {
  lsim_jd_config c = LSIM_JD_CONFIG_INIT;
  c.method = method;
  c.rank = R;
  c.clusters = k;
  c.max_iterations = iters;
  return c;
}

Test(fit, fixture_full_exact_diag_not) {
  fixture_sources();
  lsim_jd_config c = cfg(LSIM_JD_FULL, 2, 1, 10);
  lsim_jd_result r = LSIM_JD_RESULT_INIT;
  OK(lsim_jd_fit(fx_src, 3, 3, 3, &c, &r, eb));
  cr_assert_lt(r.total_err2, 1e-12 * r.total_norm2, "JD-Full err %g",
               r.total_err2);
  cr_assert_float_eq(r.total_norm2, 1 + 4 + 9 + 16 + 4 + 1 + 1 + 1, 1e-12);
  /* the operator of adapter b on X reproduces [[6,4,0],[-3,0,0]] */
  double X[6] = {1, 2, 3, 0, -1, 2}, Y[6] = {0};
  const double want[6] = {6, 4, 0, -3, 0, 0};
  OK(lsim_jd_apply(&r, 1, X, 2, Y, eb));
  for (int t = 0; t < 6; t++)
    cr_assert_float_eq(Y[t], want[t], 1e-12, "Y[%d] = %g", t, Y[t]);
  lsim_jd_result_release(&r);
  /* rank-2 JD-Diag cannot be exact (span rank 3): clearly non-zero */
  c = cfg(LSIM_JD_DIAG, 2, 1, 200);
  OK(lsim_jd_fit(fx_src, 3, 3, 3, &c, &r, eb));
  cr_assert_gt(r.total_err2, 1e-3 * r.total_norm2, "JD-Diag err %g",
               r.total_err2);
  lsim_jd_result_release(&r);
}

static void planted(lsim_jd_collection *col, int n, int din, int dout, int r0,
                    int P, int groups, int structure, double noise,
                    uint64_t seed) {
  lsim_jd_synth g = {n, din, dout, r0, P, groups, structure, noise, seed};
  OK(lsim_jd_synth_make(&g, col, eb));
}

Test(fit, planted_full_recovered) {
  lsim_jd_collection col;
  planted(&col, 24, 20, 16, 3, 5, 1, LSIM_SYNTH_FULL, 0, 7);
  lsim_jd_config c = cfg(LSIM_JD_FULL, 5, 1, 10);
  lsim_jd_result r = LSIM_JD_RESULT_INIT;
  OK(lsim_jd_fit(col.src, col.n, col.d_in, col.d_out, &c, &r, eb));
  /* bound: exact structure, only rounding remains (the error is computed
     as energy minus captured energy, so rounding shows at ~1e-16) */
  cr_assert_lt(r.total_err2 / r.total_norm2, 1e-12, "rel err %g",
               r.total_err2 / r.total_norm2);
  /* bases orthonormal to working precision */
  for (int a = 0; a < 5; a++)
    for (int b = 0; b < 5; b++) {
      double uu = 0, vv = 0;
      for (int o = 0; o < 16; o++)
        uu += r.U[o * 5 + a] * r.U[o * 5 + b];
      for (int k = 0; k < 20; k++)
        vv += r.V[k * 5 + a] * r.V[k * 5 + b];
      cr_assert_float_eq(uu, a == b, 1e-12);
      cr_assert_float_eq(vv, a == b, 1e-12);
    }
  /* the restored operator equals s B A x on a probe */
  double x[20], y[16] = {0}, want[16], ax[3];
  for (int k = 0; k < 20; k++)
    x[k] = (k % 7) - 3;
  for (int i = 0; i < col.n; i++) {
    memset(y, 0, sizeof y);
    OK(lsim_jd_apply(&r, i, x, 1, y, eb));
    const lsim_jd_source *s = &col.src[i];
    for (int p = 0; p < 3; p++) {
      ax[p] = 0;
      for (int k = 0; k < 20; k++)
        ax[p] += s->A[p * 20 + k] * x[k];
    }
    for (int o = 0; o < 16; o++) {
      want[o] = 0;
      for (int p = 0; p < 3; p++)
        want[o] += s->scale * s->B[o * 3 + p] * ax[p];
      cr_assert_float_eq(y[o], want[o], 1e-9 * (1 + fabs(want[o])));
    }
  }
  lsim_jd_result_release(&r);
  /* below the planted rank the error is clearly non-zero */
  c = cfg(LSIM_JD_FULL, 3, 1, 10);
  OK(lsim_jd_fit(col.src, col.n, col.d_in, col.d_out, &c, &r, eb));
  cr_assert_gt(r.total_err2 / r.total_norm2, 1e-3);
  lsim_jd_result_release(&r);
  lsim_jd_collection_release(&col);
}

Test(fit, planted_noisy_full_error_bounded) {
  /* noise 0.05 per factor entry: the relative error at R = P stays below
     the bound 0.01 (measured 5.3e-4); near-independent adapters (noise 50)
     at the same R are far worse (measured 0.80) */
  lsim_jd_collection col;
  planted(&col, 32, 24, 24, 4, 6, 1, LSIM_SYNTH_FULL, 0.05, 11);
  lsim_jd_config c = cfg(LSIM_JD_FULL, 6, 1, 10);
  lsim_jd_result r = LSIM_JD_RESULT_INIT;
  OK(lsim_jd_fit(col.src, col.n, col.d_in, col.d_out, &c, &r, eb));
  double planted_err = r.total_err2 / r.total_norm2;
  cr_assert_lt(planted_err, 0.01, "rel err %g", planted_err);
  lsim_jd_result_release(&r);
  lsim_jd_collection_release(&col);
  planted(&col, 32, 24, 24, 4, 6, 1, LSIM_SYNTH_FULL, 50, 11);
  OK(lsim_jd_fit(col.src, col.n, col.d_in, col.d_out, &c, &r, eb));
  cr_assert_gt(r.total_err2 / r.total_norm2, 10 * planted_err);
  lsim_jd_result_release(&r);
  lsim_jd_collection_release(&col);
}

Test(fit, planted_diag_recovered) {
  lsim_jd_collection col;
  planted(&col, 16, 12, 10, 3, 3, 1, LSIM_SYNTH_DIAG, 0, 5);
  lsim_jd_config c = cfg(LSIM_JD_DIAG, 3, 1, 300);
  lsim_jd_result r = LSIM_JD_RESULT_INIT;
  OK(lsim_jd_fit(col.src, col.n, col.d_in, col.d_out, &c, &r, eb));
  cr_assert_lt(r.total_err2 / r.total_norm2, 1e-6, "rel err %g",
               r.total_err2 / r.total_norm2);
  cr_assert_eq(r.core_len, 3);
  lsim_jd_result_release(&r);
  lsim_jd_collection_release(&col);
}

Test(fit, objective_never_increases_with_iterations) {
  lsim_jd_collection col;
  planted(&col, 12, 10, 9, 2, 4, 1, LSIM_SYNTH_FULL, 0.5, 3);
  for (int meth = LSIM_JD_FULL; meth <= LSIM_JD_DIAG; meth++) {
    double prev = INFINITY;
    for (int it = 1; it <= 16; it *= 2) {
      lsim_jd_config c = cfg(meth, 3, 1, it);
      c.tol = 0;
      lsim_jd_result r = LSIM_JD_RESULT_INIT;
      OK(lsim_jd_fit(col.src, col.n, col.d_in, col.d_out, &c, &r, eb));
      cr_assert_leq(r.iterations, it);
      /* the objective is over unit-norm deltas */
      double obj = 0;
      for (int i = 0; i < r.n; i++)
        obj += r.err2[i] / (r.norm[i] * r.norm[i]);
      cr_assert_leq(obj, prev * (1 + 1e-9), "%s iters %d: %g > %g",
                    lsim_jd_method_name(meth), it, obj, prev);
      prev = obj;
      lsim_jd_result_release(&r);
    }
  }
  lsim_jd_collection_release(&col);
}

Test(fit, clustering_recovers_planted_groups) {
  lsim_jd_collection col;
  planted(&col, 18, 16, 14, 2, 3, 3, LSIM_SYNTH_FULL, 0, 21);
  lsim_jd_config c = cfg(LSIM_JD_FULL, 3, 3, 10);
  c.seed = 4;
  lsim_jd_result r = LSIM_JD_RESULT_INIT;
  OK(lsim_jd_fit(col.src, col.n, col.d_in, col.d_out, &c, &r, eb));
  cr_assert_eq(r.converged, 1);
  cr_assert_lt(r.total_err2 / r.total_norm2, 1e-12, "rel err %g",
               r.total_err2 / r.total_norm2);
  /* the partition equals the planted one (labels may be permuted) */
  for (int i = 0; i < col.n; i++)
    for (int j = 0; j < col.n; j++)
      cr_assert_eq(r.cluster[i] == r.cluster[j],
                   col.group[i] == col.group[j], "adapters %d, %d", i, j);
  double clustered = r.total_err2 / r.total_norm2;
  lsim_jd_result_release(&r);
  /* one shared basis of the same rank cannot do it */
  c.clusters = 1;
  OK(lsim_jd_fit(col.src, col.n, col.d_in, col.d_out, &c, &r, eb));
  cr_assert_gt(r.total_err2 / r.total_norm2, 1e-2 + clustered);
  lsim_jd_result_release(&r);
  lsim_jd_collection_release(&col);
}

Test(fit, normalisation_makes_bases_scale_free) {
  lsim_jd_collection col;
  planted(&col, 10, 9, 8, 2, 3, 1, LSIM_SYNTH_FULL, 0.3, 9);
  lsim_jd_config c = cfg(LSIM_JD_FULL, 2, 1, 10);
  lsim_jd_result a = LSIM_JD_RESULT_INIT, b = LSIM_JD_RESULT_INIT;
  OK(lsim_jd_fit(col.src, col.n, col.d_in, col.d_out, &c, &a, eb));
  col.src[3].scale *= 1000; /* a loud adapter */
  OK(lsim_jd_fit(col.src, col.n, col.d_in, col.d_out, &c, &b, eb));
  for (int t = 0; t < 8 * 2; t++)
    cr_assert_float_eq(a.U[t], b.U[t], 1e-9);
  for (int q = 0; q < 4; q++) {
    cr_assert_float_eq(b.cores[3 * 4 + q], 1000 * a.cores[3 * 4 + q],
                       1e-6 * (1 + fabs(b.cores[3 * 4 + q])));
    cr_assert_float_eq(b.cores[q], a.cores[q], 1e-9);
  }
  cr_assert_float_eq(b.norm[3], 1000 * a.norm[3], 1e-9 * b.norm[3]);
  lsim_jd_result_release(&a);
  lsim_jd_result_release(&b);
  lsim_jd_collection_release(&col);
}

Test(fit, deterministic_bit_for_bit) {
  lsim_jd_collection col;
  planted(&col, 20, 12, 12, 2, 3, 2, LSIM_SYNTH_FULL, 0.2, 33);
  for (int meth = LSIM_JD_FULL; meth <= LSIM_JD_DIAG; meth++) {
    lsim_jd_config c = cfg(meth, 3, 2, 10);
    c.seed = 77;
    lsim_jd_result a = LSIM_JD_RESULT_INIT, b = LSIM_JD_RESULT_INIT;
    OK(lsim_jd_fit(col.src, col.n, col.d_in, col.d_out, &c, &a, eb));
    OK(lsim_jd_fit(col.src, col.n, col.d_in, col.d_out, &c, &b, eb));
    cr_assert_eq(memcmp(a.U, b.U, sizeof *a.U * 2 * 12 * 3), 0);
    cr_assert_eq(memcmp(a.V, b.V, sizeof *a.V * 2 * 12 * 3), 0);
    cr_assert_eq(memcmp(a.cores, b.cores,
                        sizeof *a.cores * 20 * (size_t)a.core_len), 0);
    cr_assert_eq(memcmp(a.cluster, b.cluster, sizeof *a.cluster * 20), 0);
    lsim_digest da, db;
    OK(lsim_jd_basis_digest(&a, 1, &da, eb));
    OK(lsim_jd_basis_digest(&b, 1, &db, eb));
    cr_assert(lsim_digest_eq(&da, &db));
    lsim_jd_result_release(&a);
    lsim_jd_result_release(&b);
  }
  lsim_jd_collection_release(&col);
}

Test(fit, source_digests_bind_content_and_order) {
  fixture_sources();
  lsim_digest d[3], set1, set2;
  for (int i = 0; i < 3; i++)
    OK(lsim_jd_source_digest(&fx_src[i], 3, 3, &d[i], eb));
  cr_assert(!lsim_digest_eq(&d[0], &d[1]));
  const char *names[3] = {"a", "b", "c"};
  OK(lsim_jd_source_set_digest(names, d, 3, &set1, eb));
  lsim_digest swapped[3] = {d[1], d[0], d[2]};
  const char *names2[3] = {"b", "a", "c"};
  OK(lsim_jd_source_set_digest(names2, swapped, 3, &set2, eb));
  cr_assert(!lsim_digest_eq(&set1, &set2), "order must matter");
  fx_src[2].scale = 2; /* same factors, another semantic scale */
  lsim_digest d2;
  OK(lsim_jd_source_digest(&fx_src[2], 3, 3, &d2, eb));
  cr_assert(!lsim_digest_eq(&d2, &d[2]));
}

Test(fit, errors_are_values) {
  fixture_sources();
  lsim_jd_result r = LSIM_JD_RESULT_INIT;
  lsim_jd_config c = cfg(LSIM_JD_FULL, 4, 1, 10);
  FAILS(LSIM_E_CMP_RANK, lsim_jd_fit(fx_src, 3, 3, 3, &c, &r, eb));
  c = cfg(LSIM_JD_FULL, 2, 4, 10);
  FAILS(LSIM_E_CMP_CLUSTERS, lsim_jd_fit(fx_src, 3, 3, 3, &c, &r, eb));
  c = cfg(7, 2, 1, 10);
  FAILS(LSIM_E_CMP_METHOD, lsim_jd_fit(fx_src, 3, 3, 3, &c, &r, eb));
  c = cfg(LSIM_JD_FULL, 2, 1, 0);
  FAILS(LSIM_E_CMP_ITERATIONS, lsim_jd_fit(fx_src, 3, 3, 3, &c, &r, eb));
  c = cfg(LSIM_JD_FULL, 2, 1, 10);
  static const double zero[6] = {0};
  lsim_jd_source bad[3] = {fx_src[0], fx_src[1], fx_src[2]};
  bad[1].A = zero;
  FAILS(LSIM_E_CMP_ZERO_NORM, lsim_jd_fit(bad, 3, 3, 3, &c, &r, eb));
  bad[1] = fx_src[1];
  bad[2].scale = NAN;
  FAILS(LSIM_E_CMP_NONFINITE, lsim_jd_fit(bad, 3, 3, 3, &c, &r, eb));
  cr_assert_null(r.U, "a failed fit leaves the result empty");
  lsim_jd_synth g = {4, 3, 3, 2, 3, 1, LSIM_SYNTH_DIAG, 0, 1};
  lsim_jd_collection col;
  FAILS(LSIM_E_CMP_SYNTHETIC, lsim_jd_synth_make(&g, &col, eb));
}
