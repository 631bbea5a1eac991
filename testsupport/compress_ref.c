/*
** compress_ref.c: exact checks of shared-basis compression
** (compress_ref.h).  Everything is mpq; the helpers build results in a
** temporary and hand it over with lsim_qmat_copy, so the output-matrix
** rule of cpu_ref.h holds and a failure leaves the caller's matrix alone.
*/
#include "compress_ref.h"

#include <stdlib.h>

/* rows/cols of op(M): transposed when t */
#define LSIM__R(M, t) ((t) ? (M)->cols : (M)->rows)
#define LSIM__C(M, t) ((t) ? (M)->rows : (M)->cols)
#define LSIM__AT(M, t, i, j) ((t) ? LSIM_QAT(M, j, i) : LSIM_QAT(M, i, j))

/* T := op(A) op(B), T zero-initialised by the caller. */
static lsim_err lsim__qmul(const lsim_qmat *A, int ta, const lsim_qmat *B,
                           int tb, lsim_qmat *T, lsim_errbuf *eb) {
  int n = LSIM__R(A, ta), k = LSIM__C(A, ta), m = LSIM__C(B, tb);
  if (LSIM__R(B, tb) != k)
    return lsim_fail(eb, LSIM_E_SHAPE, "product of [%d][%d] and [%d][%d]", n,
                     k, LSIM__R(B, tb), m);
  lsim_err rc = lsim_qmat_init(T, n, m, eb);
  if (rc)
    return rc;
  mpq_t p;
  mpq_init(p);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++)
      for (int t = 0; t < k; t++) {
        mpq_mul(p, LSIM__AT(A, ta, i, t), LSIM__AT(B, tb, t, j));
        mpq_add(LSIM_QAT(T, i, j), LSIM_QAT(T, i, j), p);
      }
  mpq_clear(p);
  return 0;
}

static lsim_err lsim__hand(lsim_qmat *T, lsim_qmat *out, lsim_errbuf *eb) {
  lsim_err rc = lsim_qmat_copy(out, T, eb);
  lsim_qmat_clear(T);
  return rc;
}

lsim_err lsim_ref_jd_orthonormal(const lsim_qmat *Q, lsim_errbuf *eb) {
  if (!Q || Q->cols < 1 || Q->rows < Q->cols)
    return lsim_fail(eb, LSIM_E_SHAPE, "basis must be [dim][R], dim >= R >= 1");
  lsim_qmat G = LSIM_QMAT_INIT;
  lsim_err rc = lsim__qmul(Q, 1, Q, 0, &G, eb);
  for (int i = 0; !rc && i < G.rows; i++)
    for (int j = 0; j < G.cols; j++)
      if (mpq_cmp_si(LSIM_QAT(&G, i, j), i == j, 1) != 0) {
        char *s = lsim_q_str(LSIM_QAT(&G, i, j));
        rc = lsim_fail(eb, LSIM_E_CMP_NOT_ORTHONORMAL,
                       "basis column %d . column %d = %s, want %d", i, j,
                       s ? s : "?", i == j);
        free(s);
        break;
      }
  lsim_qmat_clear(&G);
  return rc;
}

static lsim_err lsim__basis_shapes(const lsim_qmat *U, const lsim_qmat *V,
                                   const lsim_qmat *delta, lsim_errbuf *eb) {
  if (U->cols != V->cols || U->cols < 1)
    return lsim_fail(eb, LSIM_E_SHAPE, "U [%d][%d] and V [%d][%d] disagree on R",
                     U->rows, U->cols, V->rows, V->cols);
  if (delta && (delta->rows != U->rows || delta->cols != V->rows))
    return lsim_fail(eb, LSIM_E_SHAPE,
                     "delta [%d][%d] does not match U [%d][R], V [%d][R]",
                     delta->rows, delta->cols, U->rows, V->rows);
  return 0;
}

lsim_err lsim_ref_jd_core(const lsim_qmat *U, const lsim_qmat *V,
                          const lsim_qmat *delta, lsim_qmat *core,
                          lsim_errbuf *eb) {
  lsim_err rc = lsim__basis_shapes(U, V, delta, eb);
  if (rc)
    return rc;
  lsim_qmat T = LSIM_QMAT_INIT, C = LSIM_QMAT_INIT;
  if (!(rc = lsim__qmul(U, 1, delta, 0, &T, eb)) &&
      !(rc = lsim__qmul(&T, 0, V, 0, &C, eb)))
    rc = lsim_qmat_copy(core, &C, eb);
  lsim_qmat_clear(&T);
  lsim_qmat_clear(&C);
  return rc;
}

/* The full [R][R] form of a core (diag: [1][R] on the diagonal). */
static lsim_err lsim__full_core(const lsim_qmat *core, int diag, int R,
                                lsim_qmat *out, lsim_errbuf *eb) {
  if (diag ? (core->rows != 1 || core->cols != R)
           : (core->rows != R || core->cols != R))
    return lsim_fail(eb, LSIM_E_SHAPE, "core [%d][%d], want %s with R = %d",
                     core->rows, core->cols, diag ? "[1][R]" : "[R][R]", R);
  lsim_err rc = lsim_qmat_init(out, R, R, eb);
  for (int i = 0; !rc && i < R; i++)
    for (int j = 0; j < R; j++)
      if (!diag)
        mpq_set(LSIM_QAT(out, i, j), LSIM_QAT(core, i, j));
      else if (i == j)
        mpq_set(LSIM_QAT(out, i, j), LSIM_QAT(core, 0, j));
  return rc;
}

lsim_err lsim_ref_jd_expand(const lsim_qmat *U, const lsim_qmat *V,
                            const lsim_qmat *core, int diag,
                            lsim_qmat *delta, lsim_errbuf *eb) {
  lsim_err rc = lsim__basis_shapes(U, V, NULL, eb);
  if (rc)
    return rc;
  lsim_qmat S = LSIM_QMAT_INIT, T = LSIM_QMAT_INIT, D = LSIM_QMAT_INIT;
  if (!(rc = lsim__full_core(core, diag, U->cols, &S, eb)) &&
      !(rc = lsim__qmul(U, 0, &S, 0, &T, eb)) &&
      !(rc = lsim__qmul(&T, 0, V, 1, &D, eb)))
    rc = lsim__hand(&D, delta, eb);
  lsim_qmat_clear(&S);
  lsim_qmat_clear(&T);
  lsim_qmat_clear(&D);
  return rc;
}

lsim_err lsim_ref_fro2_diff(const lsim_qmat *a, const lsim_qmat *b, mpq_t out,
                            lsim_errbuf *eb) {
  if (a->rows != b->rows || a->cols != b->cols)
    return lsim_fail(eb, LSIM_E_SHAPE, "[%d][%d] vs [%d][%d]", a->rows,
                     a->cols, b->rows, b->cols);
  mpq_t d;
  mpq_init(d);
  mpq_set_ui(out, 0, 1);
  for (size_t t = 0; t < (size_t)a->rows * a->cols; t++) {
    mpq_sub(d, a->v[t], b->v[t]);
    mpq_mul(d, d, d);
    mpq_add(out, out, d);
  }
  mpq_clear(d);
  return 0;
}

/* sum_i ||delta_i - U core_i V^T||^2 with core_i = U^T delta_i V, keeping
** only its diagonal when diag. */
static lsim_err lsim__jd_error(const lsim_qmat *deltas, int n,
                               const lsim_qmat *U, const lsim_qmat *V,
                               int diag, mpq_t out, lsim_errbuf *eb) {
  lsim_err rc = 0;
  mpq_t e;
  mpq_init(e);
  mpq_set_ui(out, 0, 1);
  for (int i = 0; !rc && i < n; i++) {
    lsim_qmat C = LSIM_QMAT_INIT, Dg = LSIM_QMAT_INIT, Rc = LSIM_QMAT_INIT;
    rc = lsim_ref_jd_core(U, V, &deltas[i], &C, eb);
    if (!rc && diag) {
      rc = lsim_qmat_init(&Dg, 1, C.cols, eb);
      for (int j = 0; !rc && j < C.cols; j++)
        mpq_set(LSIM_QAT(&Dg, 0, j), LSIM_QAT(&C, j, j));
    }
    if (!rc)
      rc = lsim_ref_jd_expand(U, V, diag ? &Dg : &C, diag, &Rc, eb);
    if (!rc)
      rc = lsim_ref_fro2_diff(&deltas[i], &Rc, e, eb);
    if (!rc)
      mpq_add(out, out, e);
    lsim_qmat_clear(&C);
    lsim_qmat_clear(&Dg);
    lsim_qmat_clear(&Rc);
  }
  mpq_clear(e);
  return rc;
}

lsim_err lsim_ref_jd_full_error(const lsim_qmat *deltas, int n,
                                const lsim_qmat *U, const lsim_qmat *V,
                                mpq_t out, lsim_errbuf *eb) {
  lsim_err rc;
  if ((rc = lsim_ref_jd_orthonormal(U, eb)) ||
      (rc = lsim_ref_jd_orthonormal(V, eb)))
    return rc;
  return lsim__jd_error(deltas, n, U, V, 0, out, eb);
}

lsim_err lsim_ref_jd_diag_kept(const lsim_qmat *deltas, int n,
                               const lsim_qmat *U, const lsim_qmat *V,
                               mpq_t out, lsim_errbuf *eb) {
  return lsim__jd_error(deltas, n, U, V, 1, out, eb);
}

lsim_err lsim_ref_span_rank(const lsim_qmat *deltas, int n, int *rank,
                            lsim_errbuf *eb) {
  *rank = 0;
  if (n < 1)
    return 0;
  int len = deltas[0].rows * deltas[0].cols;
  for (int i = 1; i < n; i++)
    if (deltas[i].rows != deltas[0].rows || deltas[i].cols != deltas[0].cols)
      return lsim_fail(eb, LSIM_E_SHAPE, "delta %d has another shape", i);
  /* rows = the n vectorised deltas; eliminate column by column */
  lsim_qmat M = LSIM_QMAT_INIT;
  lsim_err rc = lsim_qmat_init(&M, n, len, eb);
  if (rc)
    return rc;
  for (int i = 0; i < n; i++)
    for (int t = 0; t < len; t++)
      mpq_set(LSIM_QAT(&M, i, t), deltas[i].v[t]);
  mpq_t f, p;
  mpq_init(f);
  mpq_init(p);
  int r = 0;
  for (int col = 0; col < len && r < n; col++) {
    int piv = -1;
    for (int i = r; i < n; i++)
      if (mpq_sgn(LSIM_QAT(&M, i, col))) {
        piv = i;
        break;
      }
    if (piv < 0)
      continue;
    for (int t = 0; t < len; t++)
      mpq_swap(LSIM_QAT(&M, r, t), LSIM_QAT(&M, piv, t));
    for (int i = r + 1; i < n; i++) {
      if (!mpq_sgn(LSIM_QAT(&M, i, col)))
        continue;
      mpq_div(f, LSIM_QAT(&M, i, col), LSIM_QAT(&M, r, col));
      for (int t = col; t < len; t++) {
        mpq_mul(p, f, LSIM_QAT(&M, r, t));
        mpq_sub(LSIM_QAT(&M, i, t), LSIM_QAT(&M, i, t), p);
      }
    }
    r++;
  }
  mpq_clear(f);
  mpq_clear(p);
  lsim_qmat_clear(&M);
  *rank = r;
  return 0;
}

lsim_err lsim_ref_jd_apply(const lsim_qmat *X, const lsim_qmat *U,
                           const lsim_qmat *V, const lsim_qmat *core,
                           int diag, lsim_qmat *Y, lsim_errbuf *eb) {
  lsim_err rc = lsim__basis_shapes(U, V, NULL, eb);
  if (rc)
    return rc;
  if (X->cols != V->rows)
    return lsim_fail(eb, LSIM_E_SHAPE, "X [%d][%d] against V [%d][R]",
                     X->rows, X->cols, V->rows);
  lsim_qmat S = LSIM_QMAT_INIT, T = LSIM_QMAT_INIT, Z = LSIM_QMAT_INIT,
            O = LSIM_QMAT_INIT;
  if (!(rc = lsim__full_core(core, diag, U->cols, &S, eb)) &&
      !(rc = lsim__qmul(X, 0, V, 0, &T, eb)) &&      /* X V      [N][R] */
      !(rc = lsim__qmul(&T, 0, &S, 1, &Z, eb)) &&    /* . Sigma^T [N][R] */
      !(rc = lsim__qmul(&Z, 0, U, 1, &O, eb)))       /* . U^T  [N][d_out] */
    rc = lsim__hand(&O, Y, eb);
  lsim_qmat_clear(&S);
  lsim_qmat_clear(&T);
  lsim_qmat_clear(&Z);
  lsim_qmat_clear(&O);
  return rc;
}

lsim_err lsim_ref_jd_breakeven(int full, long r0, long d_in, long d_out,
                               long R, long k, mpq_t threshold, long *min_n,
                               lsim_errbuf *eb) {
  *min_n = 0;
  if (r0 < 1 || d_in < 1 || d_out < 1 || R < 1 || k < 1)
    return lsim_fail(eb, LSIM_E_SHAPE, "break-even needs r0, d_in, d_out, R, "
                     "k >= 1");
  mpz_t S, num, den, c;
  mpz_inits(S, num, den, c, NULL);
  mpz_set_si(S, d_in);
  mpz_add_ui(S, S, (unsigned long)d_out);
  mpz_mul_si(num, S, R);
  mpz_mul_si(num, num, k);        /* k R S */
  mpz_mul_si(den, S, r0);         /* r0 S */
  mpz_set_si(c, R);
  if (full)
    mpz_mul_si(c, c, R);          /* R^2 */
  mpz_sub(den, den, c);           /* r0 S - c */
  lsim_err rc = 0;
  if (mpz_sgn(den) <= 0) {
    char *d = mpz_get_str(NULL, 10, den);
    rc = lsim_fail(eb, LSIM_E_CMP_NO_BREAKEVEN,
                   "r0*S - %s = %s is not positive: no collection size saves "
                   "parameters", full ? "R^2" : "R", d ? d : "?");
    free(d);
  } else {
    mpq_set_num(threshold, num);
    mpq_set_den(threshold, den);
    mpq_canonicalize(threshold);
    mpz_fdiv_q(num, num, den);
    *min_n = mpz_get_si(num) + 1;
  }
  mpz_clears(S, num, den, c, NULL);
  return rc;
}
