/*
** jd.c: JD-Full and JD-Diag fitting, clustering and identities (jd.h).
**
** Notation inside this file: a member set is a list of source indices
** fitted together (one cluster).  c_i = s_i / ||s_i B_i A_i||_F is the
** factor that turns B_i A_i into the unit-norm delta the fit sees, so
**   D_i := c_i B_i A_i,  ||D_i||_F = 1.
** Matrices are row-major doubles; a basis is [dim][R], column j the j-th
** basis vector.
**
** Invariants the fitting keeps:
**   1. JD-Full bases are the eigenvectors LAPACK returns (orthonormal to
**      working precision); cores are U^T D V exactly as computed.
**   2. Every coordinate-descent step of JD-Diag is the exact minimiser of
**      its block, so the objective never increases (up to rounding).
**   3. The result's bases/cores were fitted with the result's assignment.
*/
#include "jd.h"

#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/rng.h"

#define LSIM__KMEANS_STREAM 0x636d70u /* "cmp": the k-means++ start */

const char *lsim_jd_method_name(int method) {
  switch (method) {
  case LSIM_JD_FULL: return "jd-full";
  case LSIM_JD_DIAG: return "jd-diag";
  default: return NULL;
  }
}

int lsim_jd_method_find(const char *name) {
  if (!name)
    return 0;
  if (strcmp(name, "jd-full") == 0)
    return LSIM_JD_FULL;
  if (strcmp(name, "jd-diag") == 0)
    return LSIM_JD_DIAG;
  return 0;
}

void lsim_jd_result_release(lsim_jd_result *r) {
  if (!r)
    return;
  free(r->U);
  free(r->V);
  free(r->cores);
  free(r->cluster);
  free(r->norm);
  free(r->err2);
  memset(r, 0, sizeof *r);
}

/* ---- the fitting context ----------------------------------------------- */

typedef struct lsim__jd {
  const lsim_jd_source *src;
  int n, d_in, d_out, R, method;
  double *c; /* [n] scale / norm */
  /* scratch, sized for the largest source rank */
  int rmax;
  double *t1, *t2; /* [rmax * max(d_in, d_out, R)] */
  double *t3;      /* [2 rmax R] */
  double *gram;    /* [k][R][R] JD-Diag atom Gram matrix per cluster */
  uint8_t *gram_ok; /* [k] valid since the cluster's last fit */
} lsim__jd;

static void *lsim__zalloc(size_t n, size_t size) {
  if (n == 0)
    n = 1;
  return calloc(n, size);
}

double lsim_jd_delta_norm2(const lsim_jd_source *s, int d_in, int d_out) {
  int r = s->rank;
  double acc = 0;
  /* tr((B^T B)(A A^T)) */
  for (int p = 0; p < r; p++)
    for (int q = 0; q < r; q++) {
      double gb = 0, ga = 0;
      for (int o = 0; o < d_out; o++)
        gb += s->B[(size_t)o * r + p] * s->B[(size_t)o * r + q];
      for (int k = 0; k < d_in; k++)
        ga += s->A[(size_t)q * d_in + k] * s->A[(size_t)p * d_in + k];
      acc += gb * ga;
    }
  return s->scale * s->scale * acc;
}

/* out [d_out] = D_i x  (x [d_in]) */
static void lsim__dx(lsim__jd *J, int i, const double *x, double *out) {
  const lsim_jd_source *s = &J->src[i];
  int r = s->rank;
  double *ax = J->t1;
  for (int p = 0; p < r; p++) {
    double a = 0;
    const double *row = s->A + (size_t)p * J->d_in;
    for (int k = 0; k < J->d_in; k++)
      a += row[k] * x[k];
    ax[p] = a * J->c[i];
  }
  for (int o = 0; o < J->d_out; o++) {
    double a = 0;
    const double *row = s->B + (size_t)o * r;
    for (int p = 0; p < r; p++)
      a += row[p] * ax[p];
    out[o] = a;
  }
}

/* out [d_in] = D_i^T y  (y [d_out]) */
static void lsim__dty(lsim__jd *J, int i, const double *y, double *out) {
  const lsim_jd_source *s = &J->src[i];
  int r = s->rank;
  double *by = J->t1;
  for (int p = 0; p < r; p++)
    by[p] = 0;
  for (int o = 0; o < J->d_out; o++) {
    const double *row = s->B + (size_t)o * r;
    for (int p = 0; p < r; p++)
      by[p] += row[p] * y[o];
  }
  for (int k = 0; k < J->d_in; k++)
    out[k] = 0;
  for (int p = 0; p < r; p++) {
    const double *row = s->A + (size_t)p * J->d_in;
    double b = by[p] * J->c[i];
    for (int k = 0; k < J->d_in; k++)
      out[k] += b * row[k];
  }
}

/* C [R][R] = U^T D_i V = c_i (U^T B_i)(A_i V), through r x R factors */
static void lsim__core_full(lsim__jd *J, int i, const double *U,
                            const double *V, double *C) {
  const lsim_jd_source *s = &J->src[i];
  int r = s->rank, R = J->R;
  double *ub = J->t3, *av = J->t3 + (size_t)r * R; /* [r][R] each */
  for (int p = 0; p < r; p++)
    for (int j = 0; j < R; j++)
      ub[p * R + j] = av[p * R + j] = 0;
  for (int o = 0; o < J->d_out; o++)
    for (int p = 0; p < r; p++) {
      double b = s->B[(size_t)o * r + p];
      for (int j = 0; j < R; j++)
        ub[p * R + j] += b * U[(size_t)o * R + j];
    }
  for (int k = 0; k < J->d_in; k++)
    for (int p = 0; p < r; p++) {
      double a = s->A[(size_t)p * J->d_in + k];
      for (int j = 0; j < R; j++)
        av[p * R + j] += a * V[(size_t)k * R + j];
    }
  for (int a = 0; a < R; a++)
    for (int b = 0; b < R; b++) {
      double acc = 0;
      for (int p = 0; p < r; p++)
        acc += ub[p * R + a] * av[p * R + b];
      C[a * R + b] = J->c[i] * acc;
    }
}

/*
** The eigen problems of M(V) and N(U) are sums of sandwiches F G F^T with
** F [dim][r] a factor (B_i or A_i^T) and G [r][r] a small Gram matrix:
** assembled from the factors, at cost dim^2 r per adapter instead of
** dim^2 R, and without one persistent d_out x d_in delta.  The
** accumulator batches many adapters' columns (FG and F side by side, row-
** major [dim][cap]) so that S += FG F^T runs as long contiguous dot
** products; the order of every sum is fixed, so results repeat bit for bit.
*/
#define LSIM__GACC_COLS 512

typedef struct lsim__gacc {
  int dim, used;
  double *FG, *F; /* [dim][LSIM__GACC_COLS] */
  double *S;      /* [dim][dim], accumulated */
} lsim__gacc;

/* a . b over n entries with four running sums (fixed order) */
static double lsim__dot4(const double *a, const double *b, int n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int t = 0;
  for (; t + 4 <= n; t += 4) {
    s0 += a[t] * b[t];
    s1 += a[t + 1] * b[t + 1];
    s2 += a[t + 2] * b[t + 2];
    s3 += a[t + 3] * b[t + 3];
  }
  for (; t < n; t++)
    s0 += a[t] * b[t];
  return (s0 + s1) + (s2 + s3);
}

static void lsim__gacc_flush(lsim__gacc *g) {
  int dim = g->dim, n = g->used;
  if (!n)
    return;
  for (int a = 0; a < dim; a++) {
    const double *fa = g->FG + (size_t)a * LSIM__GACC_COLS;
    for (int b = a; b < dim; b++) {
      double v = lsim__dot4(fa, g->F + (size_t)b * LSIM__GACC_COLS, n);
      g->S[(size_t)a * dim + b] += v;
    }
  }
  for (int a = 0; a < dim; a++) /* the sum is symmetric: mirror it */
    for (int b = 0; b < a; b++)
      g->S[(size_t)a * dim + b] = g->S[(size_t)b * dim + a];
  g->used = 0;
}

/* add F G F^T; F element (a, p) at F[a*fs + p*ps]; r <= LSIM__GACC_COLS */
static void lsim__gacc_add(lsim__gacc *g, const double *F, size_t fs,
                           size_t ps, int r, const double *G) {
  if (g->used + r > LSIM__GACC_COLS)
    lsim__gacc_flush(g);
  for (int a = 0; a < g->dim; a++) {
    double *fg = g->FG + (size_t)a * LSIM__GACC_COLS + g->used;
    double *f = g->F + (size_t)a * LSIM__GACC_COLS + g->used;
    for (int q = 0; q < r; q++) {
      double acc = 0;
      for (int p = 0; p < r; p++)
        acc += F[(size_t)a * fs + (size_t)p * ps] * G[p * r + q];
      fg[q] = acc;
      f[q] = F[(size_t)a * fs + (size_t)q * ps];
    }
  }
  g->used += r;
}

/* G [r][r] = c^2 W W^T for W [r][R] */
static void lsim__outer(const double *W, int r, int R, double c2, double *G) {
  for (int p = 0; p < r; p++)
    for (int q = 0; q < r; q++) {
      double acc = 0;
      for (int j = 0; j < R; j++)
        acc += W[p * R + j] * W[q * R + j];
      G[p * r + q] = c2 * acc;
    }
}

/*
** Top-R eigenvectors of the symmetric S [m][m] (destroyed) into E [m][R],
** column 0 the largest eigenvalue; sign-normalised.
*/
static lsim_err lsim__top_eig(double *S, int m, int R, double *E,
                              lsim_errbuf *eb) {
  double *w = lsim__zalloc((size_t)m, sizeof *w);
  double *z = lsim__zalloc((size_t)m * R, sizeof *z);
  lapack_int *sup = lsim__zalloc((size_t)2 * R, sizeof *sup);
  lsim_err rc = 0;
  if (!w || !z || !sup) {
    rc = lsim_fail(eb, LSIM_E_NOMEM, "eigenvectors of a %dx%d matrix", m, m);
    goto out;
  }
  for (size_t t = 0; t < (size_t)m * m; t++)
    if (!isfinite(S[t])) {
      rc = lsim_fail(eb, LSIM_E_CMP_NONFINITE,
                     "non-finite entry in a %dx%d eigen problem", m, m);
      goto out;
    }
  lapack_int found = 0;
  lapack_int info = LAPACKE_dsyevr(LAPACK_ROW_MAJOR, 'V', 'I', 'U', m, S, m,
                                   0.0, 0.0, m - R + 1, m, 0.0, &found, w, z,
                                   R, sup);
  if (info != 0 || found != R) {
    rc = lsim_fail(eb, LSIM_E_CMP_LAPACK,
                   "LAPACKE_dsyevr on a %dx%d matrix: info %d, %d of %d "
                   "eigenvectors", m, m, (int)info, (int)found, R);
    goto out;
  }
  /* ascending -> descending, then fix each column's sign */
  for (int j = 0; j < R; j++) {
    int src = R - 1 - j, arg = 0;
    double best = -1;
    for (int t = 0; t < m; t++) {
      double v = fabs(z[(size_t)t * R + src]);
      if (v > best * (1 + 1e-12) + 1e-300) {
        best = v;
        arg = t;
      }
    }
    double sg = z[(size_t)arg * R + src] < 0 ? -1.0 : 1.0;
    for (int t = 0; t < m; t++)
      E[(size_t)t * R + j] = sg * z[(size_t)t * R + src];
  }
out:
  free(w);
  free(z);
  free(sup);
  return rc;
}

/* ---- JD-Full ------------------------------------------------------------- */

/*
** Fit orthonormal U [d_out][R], V [d_in][R] to the members; *iters gets
** the number of alternations run.  V starts as the top-R eigenspace of
** sum_i D_i^T D_i (N with U = I).
*/
static lsim_err lsim__fit_full(lsim__jd *J, const int *mem, int m,
                               int max_iter, double tol, double *U,
                               double *V, int *iters, lsim_errbuf *eb) {
  int R = J->R, din = J->d_in, dout = J->d_out;
  int big = din > dout ? din : dout;
  double *S = lsim__zalloc((size_t)big * big, sizeof *S);
  double *C = lsim__zalloc((size_t)R * R, sizeof *C);
  double *x = lsim__zalloc((size_t)J->rmax * R, sizeof *x);
  double *G = lsim__zalloc((size_t)J->rmax * J->rmax, sizeof *G);
  lsim__gacc ga = {din, 0, NULL, NULL, S};
  ga.FG = lsim__zalloc((size_t)big * LSIM__GACC_COLS, sizeof *ga.FG);
  ga.F = lsim__zalloc((size_t)big * LSIM__GACC_COLS, sizeof *ga.F);
  lsim_err rc = 0;
  *iters = 0;
  if (!S || !C || !x || !G || !ga.FG || !ga.F) {
    rc = lsim_fail(eb, LSIM_E_NOMEM, "jd-full scratch");
    goto out;
  }
  /* N0 = sum_i D_i^T D_i = sum_i c_i^2 A_i^T (B_i^T B_i) A_i */
  memset(S, 0, sizeof *S * (size_t)din * din);
  for (int t = 0; t < m; t++) {
    const lsim_jd_source *s = &J->src[mem[t]];
    int r = s->rank;
    double c2 = J->c[mem[t]] * J->c[mem[t]];
    for (int p = 0; p < r; p++)
      for (int q = 0; q < r; q++) {
        double acc = 0;
        for (int o = 0; o < dout; o++)
          acc += s->B[(size_t)o * r + p] * s->B[(size_t)o * r + q];
        G[p * r + q] = c2 * acc;
      }
    lsim__gacc_add(&ga, s->A, 1, (size_t)din, r, G);
  }
  lsim__gacc_flush(&ga);
  if ((rc = lsim__top_eig(S, din, R, V, eb)))
    goto out;
  double prev = -1;
  for (int it = 0; it < max_iter; it++) {
    /* U := top-R of M(V) = sum_i c_i^2 B_i (A_i V)(A_i V)^T B_i^T */
    memset(S, 0, sizeof *S * (size_t)dout * dout);
    ga.dim = dout;
    for (int t = 0; t < m; t++) {
      const lsim_jd_source *s = &J->src[mem[t]];
      int r = s->rank;
      memset(x, 0, sizeof *x * (size_t)r * R); /* W = A_i V [r][R] */
      for (int p = 0; p < r; p++)
        for (int k = 0; k < din; k++) {
          double a = s->A[(size_t)p * din + k];
          for (int j = 0; j < R; j++)
            x[p * R + j] += a * V[(size_t)k * R + j];
        }
      lsim__outer(x, r, R, J->c[mem[t]] * J->c[mem[t]], G);
      lsim__gacc_add(&ga, s->B, (size_t)r, 1, r, G);
    }
    lsim__gacc_flush(&ga);
    if ((rc = lsim__top_eig(S, dout, R, U, eb)))
      goto out;
    /* V := top-R of N(U) = sum_i c_i^2 A_i^T (B_i^T U)(B_i^T U)^T A_i */
    memset(S, 0, sizeof *S * (size_t)din * din);
    ga.dim = din;
    for (int t = 0; t < m; t++) {
      const lsim_jd_source *s = &J->src[mem[t]];
      int r = s->rank;
      memset(x, 0, sizeof *x * (size_t)r * R); /* W = B_i^T U [r][R] */
      for (int o = 0; o < dout; o++)
        for (int p = 0; p < r; p++) {
          double b = s->B[(size_t)o * r + p];
          for (int j = 0; j < R; j++)
            x[p * R + j] += b * U[(size_t)o * R + j];
        }
      lsim__outer(x, r, R, J->c[mem[t]] * J->c[mem[t]], G);
      lsim__gacc_add(&ga, s->A, 1, (size_t)din, r, G);
    }
    lsim__gacc_flush(&ga);
    if ((rc = lsim__top_eig(S, din, R, V, eb)))
      goto out;
    *iters = it + 1;
    /* captured energy sum_i ||U^T D_i V||^2 (each ||D_i|| = 1) */
    double cap = 0;
    for (int t = 0; t < m; t++) {
      lsim__core_full(J, mem[t], U, V, C);
      for (int q = 0; q < R * R; q++)
        cap += C[q] * C[q];
    }
    if (prev >= 0 && cap - prev <= tol * m)
      break;
    prev = cap;
  }
out:
  free(S);
  free(C);
  free(x);
  free(G);
  free(ga.FG);
  free(ga.F);
  return rc;
}

/* ---- JD-Diag ------------------------------------------------------------- */

static double lsim__dot(const double *a, int sa, const double *b, int sb,
                        int len) {
  double acc = 0;
  for (int t = 0; t < len; t++)
    acc += a[(size_t)t * sa] * b[(size_t)t * sb];
  return acc;
}

/* G [R][R] = (U^T U) o (V^T V): the Gram matrix of the atoms u_j v_j^T */
static void lsim__diag_gram(const lsim__jd *J, const double *U,
                            const double *V, double *G) {
  int R = J->R;
  for (int j = 0; j < R; j++)
    for (int l = j; l < R; l++)
      G[j * R + l] = G[l * R + j] =
          lsim__dot(U + j, R, U + l, R, J->d_out) *
          lsim__dot(V + j, R, V + l, R, J->d_in);
}

/*
** Least-squares diagonal core of member i for fixed atoms: the normal
** equations G s = b with G the atom Gram matrix (lsim__diag_gram) and
** b_j = u_j^T D_i v_j, solved with LAPACKE_dgelsd (minimum norm when G is
** singular).  Writes s [R] and returns the normalised squared error in
** *err.
*/
static lsim_err lsim__diag_core(lsim__jd *J, int i, const double *U,
                                const double *V, const double *G, double *s,
                                double *err, lsim_errbuf *eb) {
  int R = J->R, dout = J->d_out, din = J->d_in;
  size_t big = (size_t)(din > dout ? din : dout);
  double *G2 = lsim__zalloc((size_t)R * R, sizeof *G2);
  double *b = lsim__zalloc((size_t)R, sizeof *b);
  double *sv = lsim__zalloc((size_t)R, sizeof *sv);
  double *x = lsim__zalloc(big, sizeof *x);
  double *y = lsim__zalloc(big, sizeof *y);
  lsim_err rc = 0;
  if (!G2 || !b || !sv || !x || !y) {
    rc = lsim_fail(eb, LSIM_E_NOMEM, "jd-diag core scratch");
    goto out;
  }
  for (int j = 0; j < R; j++) {
    for (int k = 0; k < din; k++)
      x[k] = V[(size_t)k * R + j];
    lsim__dx(J, i, x, y);
    b[j] = lsim__dot(U + j, R, y, 1, dout);
  }
  memcpy(G2, G, sizeof *G * (size_t)R * R);
  memcpy(s, b, sizeof *b * (size_t)R);
  lapack_int rank = 0;
  lapack_int info = LAPACKE_dgelsd(LAPACK_ROW_MAJOR, R, R, 1, G2, R, s, 1,
                                   sv, 1e-12, &rank);
  if (info != 0) {
    rc = lsim_fail(eb, LSIM_E_CMP_LAPACK, "LAPACKE_dgelsd: info %d",
                   (int)info);
    goto out;
  }
  /* ||D||^2 - 2 s.b + s^T G s, ||D|| = 1 */
  double e = 1;
  for (int j = 0; j < R; j++) {
    e -= 2 * s[j] * b[j];
    for (int l = 0; l < R; l++)
      e += s[j] * G[j * R + l] * s[l];
  }
  *err = e < 0 ? 0 : e;
out:
  free(G2);
  free(b);
  free(sv);
  free(x);
  free(y);
  return rc;
}

/*
** Coordinate descent for JD-Diag on the members: U [d_out][R], V
** [d_in][R], S [m][R] (normalised cores, member order).  Starts from two
** JD-Full alternations and the diagonals of their cores.
*/
static lsim_err lsim__fit_diag(lsim__jd *J, const int *mem, int m,
                               int max_iter, double tol, double *U,
                               double *V, double *S, int *iters,
                               lsim_errbuf *eb) {
  int R = J->R, din = J->d_in, dout = J->d_out;
  size_t big = (size_t)(din > dout ? din : dout);
  double *C = lsim__zalloc((size_t)R * R, sizeof *C);
  double *x = lsim__zalloc(big, sizeof *x);
  double *y = lsim__zalloc(big, sizeof *y);
  double *acc = lsim__zalloc(big, sizeof *acc);
  double *uu = lsim__zalloc((size_t)R, sizeof *uu); /* u_k . u_j */
  double *vv = lsim__zalloc((size_t)R, sizeof *vv); /* v_k . v_j */
  double *om = lsim__zalloc((size_t)R, sizeof *om);
  lsim_err rc = 0;
  int dummy;
  *iters = 0;
  if (!C || !x || !y || !acc || !uu || !vv || !om) {
    rc = lsim_fail(eb, LSIM_E_NOMEM, "jd-diag scratch");
    goto out;
  }
  if ((rc = lsim__fit_full(J, mem, m, max_iter < 2 ? max_iter : 2, tol, U,
                           V, &dummy, eb)))
    goto out;
  for (int t = 0; t < m; t++) {
    lsim__core_full(J, mem[t], U, V, C);
    for (int j = 0; j < R; j++)
      S[(size_t)t * R + j] = C[j * R + j];
  }
  double prev = -1;
  for (int it = 0; it < max_iter; it++) {
    for (int j = 0; j < R; j++) {
      double ss = 0;
      for (int t = 0; t < m; t++)
        ss += S[(size_t)t * R + j] * S[(size_t)t * R + j];
      if (ss == 0)
        continue; /* a dead atom: no adapter uses it */
      /* u_j := sum_t s_tj R_t v_j / (ss ||v_j||^2), with
         R_t v_j = D_t v_j - sum_{k!=j} s_tk (v_k . v_j) u_k; the second
         sum is gathered over adapters first: U omega, omega_k =
         (v_k . v_j) sum_t s_tj s_tk */
      for (int k = 0; k < R; k++)
        vv[k] = lsim__dot(V + k, R, V + j, R, din);
      memset(acc, 0, sizeof *acc * (size_t)dout);
      memset(om, 0, sizeof *om * (size_t)R);
      for (int k = 0; k < din; k++)
        x[k] = V[(size_t)k * R + j];
      for (int t = 0; t < m; t++) {
        double stj = S[(size_t)t * R + j];
        if (stj == 0)
          continue;
        lsim__dx(J, mem[t], x, y);
        for (int o = 0; o < dout; o++)
          acc[o] += stj * y[o];
        for (int k = 0; k < R; k++)
          om[k] += stj * S[(size_t)t * R + k];
      }
      om[j] = 0;
      for (int k = 0; k < R; k++)
        om[k] *= vv[k];
      for (int o = 0; o < dout; o++)
        U[(size_t)o * R + j] =
            (acc[o] - lsim__dot(U + (size_t)o * R, 1, om, 1, R)) /
            (ss * vv[j]);
      /* v_j := sum_t s_tj R_t^T u_j / (ss ||u_j||^2), the same way */
      for (int k = 0; k < R; k++)
        uu[k] = lsim__dot(U + k, R, U + j, R, dout);
      if (uu[j] == 0)
        continue;
      memset(acc, 0, sizeof *acc * (size_t)din);
      memset(om, 0, sizeof *om * (size_t)R);
      for (int o = 0; o < dout; o++)
        y[o] = U[(size_t)o * R + j];
      for (int t = 0; t < m; t++) {
        double stj = S[(size_t)t * R + j];
        if (stj == 0)
          continue;
        lsim__dty(J, mem[t], y, x);
        for (int l = 0; l < din; l++)
          acc[l] += stj * x[l];
        for (int k = 0; k < R; k++)
          om[k] += stj * S[(size_t)t * R + k];
      }
      om[j] = 0;
      for (int k = 0; k < R; k++)
        om[k] *= uu[k];
      for (int l = 0; l < din; l++)
        V[(size_t)l * R + j] =
            (acc[l] - lsim__dot(V + (size_t)l * R, 1, om, 1, R)) /
            (ss * uu[j]);
      /* s_tj := u_j^T R_t v_j / (||u_j||^2 ||v_j||^2) */
      for (int k = 0; k < R; k++)
        vv[k] = lsim__dot(V + k, R, V + j, R, din);
      if (vv[j] == 0)
        continue;
      for (int t = 0; t < m; t++) {
        for (int k = 0; k < din; k++)
          x[k] = V[(size_t)k * R + j];
        lsim__dx(J, mem[t], x, y);
        double num = lsim__dot(U + j, R, y, 1, dout);
        for (int k = 0; k < R; k++)
          if (k != j)
            num -= S[(size_t)t * R + k] * uu[k] * vv[k];
        S[(size_t)t * R + j] = num / (uu[j] * vv[j]);
      }
      /* gauge: unit u_j and v_j, the scale moves into the cores */
      double nu = sqrt(uu[j]), nv = sqrt(vv[j]);
      for (int o = 0; o < dout; o++)
        U[(size_t)o * R + j] /= nu;
      for (int l = 0; l < din; l++)
        V[(size_t)l * R + j] /= nv;
      for (int t = 0; t < m; t++)
        S[(size_t)t * R + j] *= nu * nv;
    }
    *iters = it + 1;
    double obj = 0, e;
    lsim__diag_gram(J, U, V, C); /* C is R x R scratch here */
    for (int t = 0; t < m; t++) {
      if ((rc = lsim__diag_core(J, mem[t], U, V, C, x, &e, eb)))
        goto out;
      obj += e;
    }
    if (prev >= 0 && prev - obj <= tol * m)
      break;
    prev = obj;
  }
out:
  free(C);
  free(x);
  free(y);
  free(acc);
  free(uu);
  free(vv);
  free(om);
  return rc;
}

/* ---- per-cluster fit and errors ------------------------------------------ */

/* Fit cluster c of res from the members; writes U_c, V_c. */
static lsim_err lsim__fit_cluster(lsim__jd *J, const lsim_jd_config *cfg,
                                  const int *mem, int m, lsim_jd_result *res,
                                  int c, int *iters, lsim_errbuf *eb) {
  double *U = res->U + (size_t)c * J->d_out * J->R;
  double *V = res->V + (size_t)c * J->d_in * J->R;
  J->gram_ok[c] = 0;
  if (m == 0) {
    /* an empty cluster keeps zero bases; the caller refills it */
    memset(U, 0, sizeof *U * (size_t)J->d_out * J->R);
    memset(V, 0, sizeof *V * (size_t)J->d_in * J->R);
    *iters = 0;
    return 0;
  }
  if (J->method == LSIM_JD_FULL)
    return lsim__fit_full(J, mem, m, cfg->max_iterations, cfg->tol, U, V,
                          iters, eb);
  double *S = lsim__zalloc((size_t)m * J->R, sizeof *S);
  if (!S)
    return lsim_fail(eb, LSIM_E_NOMEM, "jd-diag cores");
  lsim_err rc = lsim__fit_diag(J, mem, m, cfg->max_iterations, cfg->tol, U,
                               V, S, iters, eb);
  free(S);
  return rc;
}

/* Normalised squared error of source i under cluster c; core into C. */
static lsim_err lsim__err_under(lsim__jd *J, lsim_jd_result *res, int i,
                                int c, double *C, double *err,
                                lsim_errbuf *eb) {
  const double *U = res->U + (size_t)c * J->d_out * J->R;
  const double *V = res->V + (size_t)c * J->d_in * J->R;
  if (J->method == LSIM_JD_FULL) {
    lsim__core_full(J, i, U, V, C);
    double cap = 0;
    for (int q = 0; q < J->R * J->R; q++)
      cap += C[q] * C[q];
    *err = 1 - cap < 0 ? 0 : 1 - cap;
    return 0;
  }
  double *G = J->gram + (size_t)c * J->R * J->R;
  if (!J->gram_ok[c]) {
    lsim__diag_gram(J, U, V, G);
    J->gram_ok[c] = 1;
  }
  return lsim__diag_core(J, i, U, V, G, C, err, eb);
}

/* Cores and errors of every source under its assigned cluster. */
static lsim_err lsim__finish(lsim__jd *J, lsim_jd_result *res,
                             lsim_errbuf *eb) {
  lsim_err rc = 0;
  res->total_err2 = res->total_norm2 = 0;
  for (int i = 0; i < J->n; i++) {
    double *C = res->cores + (size_t)i * res->core_len, e;
    if ((rc = lsim__err_under(J, res, i, res->cluster[i], C, &e, eb)))
      break;
    for (int q = 0; q < res->core_len; q++)
      C[q] *= res->norm[i]; /* restore the source scale */
    res->err2[i] = e * res->norm[i] * res->norm[i];
    res->total_err2 += res->err2[i];
    res->total_norm2 += res->norm[i] * res->norm[i];
  }
  return rc;
}

/* ---- k-means on normalised cores (the clustering start) ----------------- */

static double lsim__d2(const double *a, const double *b, int len) {
  double acc = 0;
  for (int t = 0; t < len; t++)
    acc += (a[t] - b[t]) * (a[t] - b[t]);
  return acc;
}

static lsim_err lsim__kmeans(const double *F, int n, int len, int k,
                             uint64_t seed, int *assign, lsim_errbuf *eb) {
  double *cent = lsim__zalloc((size_t)k * len, sizeof *cent);
  double *dist = lsim__zalloc((size_t)n, sizeof *dist);
  int *cnt = lsim__zalloc((size_t)k, sizeof *cnt);
  if (!cent || !dist || !cnt) {
    free(cent);
    free(dist);
    free(cnt);
    return lsim_fail(eb, LSIM_E_NOMEM, "k-means");
  }
  lsim_rng rng;
  lsim_rng_init(&rng, seed, LSIM__KMEANS_STREAM);
  /* k-means++: first centre uniform, then proportional to distance^2 */
  int first = (int)lsim_rng_below(&rng, (uint64_t)n);
  memcpy(cent, F + (size_t)first * len, sizeof *cent * (size_t)len);
  for (int c = 1; c < k; c++) {
    double tot = 0;
    for (int i = 0; i < n; i++) {
      double best = INFINITY;
      for (int d = 0; d < c; d++) {
        double v = lsim__d2(F + (size_t)i * len, cent + (size_t)d * len, len);
        if (v < best)
          best = v;
      }
      dist[i] = best;
      tot += best;
    }
    int pick = 0;
    if (tot > 0) {
      double u = lsim_rng_unit(&rng) * tot, run = 0;
      pick = n - 1;
      for (int i = 0; i < n; i++) {
        run += dist[i];
        if (dist[i] > 0 && u < run) {
          pick = i;
          break;
        }
      }
    } else {
      pick = c % n; /* every point coincides with a centre */
    }
    memcpy(cent + (size_t)c * len, F + (size_t)pick * len,
           sizeof *cent * (size_t)len);
  }
  for (int i = 0; i < n; i++)
    assign[i] = -1;
  for (int round = 0; round < 1000; round++) {
    int changed = 0;
    for (int i = 0; i < n; i++) {
      int best = 0;
      double bv = INFINITY;
      for (int c = 0; c < k; c++) {
        double v = lsim__d2(F + (size_t)i * len, cent + (size_t)c * len, len);
        if (v < bv) {
          bv = v;
          best = c;
        }
      }
      if (assign[i] != best) {
        assign[i] = best;
        changed = 1;
      }
    }
    if (!changed)
      break;
    memset(cent, 0, sizeof *cent * (size_t)k * len);
    memset(cnt, 0, sizeof *cnt * (size_t)k);
    for (int i = 0; i < n; i++) {
      cnt[assign[i]]++;
      for (int t = 0; t < len; t++)
        cent[(size_t)assign[i] * len + t] += F[(size_t)i * len + t];
    }
    for (int c = 0; c < k; c++)
      for (int t = 0; t < len && cnt[c]; t++)
        cent[(size_t)c * len + t] /= cnt[c];
  }
  free(cent);
  free(dist);
  free(cnt);
  return 0;
}

/* Give every empty cluster the worst-fitted source of a cluster with at
** least two members (lowest index on ties).  Returns 1 when it moved any. */
static int lsim__fill_empty(int n, int k, int *assign, const double *err) {
  int moved = 0;
  int *cnt = lsim__zalloc((size_t)k, sizeof *cnt);
  if (!cnt)
    return 0;
  for (int i = 0; i < n; i++)
    cnt[assign[i]]++;
  for (int c = 0; c < k; c++) {
    if (cnt[c])
      continue;
    int pick = -1;
    for (int i = 0; i < n; i++)
      if (cnt[assign[i]] >= 2 && (pick < 0 || err[i] > err[pick]))
        pick = i;
    if (pick < 0)
      break;
    cnt[assign[pick]]--;
    assign[pick] = c;
    cnt[c]++;
    moved = 1;
  }
  free(cnt);
  return moved;
}

/* ---- the entry point -------------------------------------------------------- */

static lsim_err lsim__fit_all(lsim__jd *J, const lsim_jd_config *cfg,
                              lsim_jd_result *res, int *members,
                              lsim_errbuf *eb) {
  int k = res->k, n = J->n;
  res->iterations = 0;
  for (int c = 0; c < k; c++) {
    int m = 0, it = 0;
    for (int i = 0; i < n; i++)
      if (res->cluster[i] == c)
        members[m++] = i;
    lsim_err rc = lsim__fit_cluster(J, cfg, members, m, res, c, &it, eb);
    if (rc)
      return rc;
    if (it > res->iterations)
      res->iterations = it;
  }
  return 0;
}

static lsim_err lsim__check(const lsim_jd_source *src, int n, int d_in,
                            int d_out, const lsim_jd_config *cfg,
                            lsim_errbuf *eb) {
  if (!src || n < 1 || d_in < 1 || d_out < 1)
    return lsim_fail(eb, LSIM_E_CMP_SHAPE,
                     "need at least one source and positive d_in, d_out "
                     "(n %d, d_in %d, d_out %d)", n, d_in, d_out);
  if (!cfg || !lsim_jd_method_name(cfg->method))
    return lsim_fail(eb, LSIM_E_CMP_METHOD, "unknown method %d",
                     cfg ? cfg->method : 0);
  int lim = d_in < d_out ? d_in : d_out;
  if (cfg->rank < 1 || cfg->rank > lim)
    return lsim_fail(eb, LSIM_E_CMP_RANK,
                     "shared rank %d outside 1..min(d_in, d_out) = %d",
                     cfg->rank, lim);
  if (cfg->clusters < 1 || cfg->clusters > n)
    return lsim_fail(eb, LSIM_E_CMP_CLUSTERS,
                     "cluster count %d outside 1..n = %d", cfg->clusters, n);
  if (cfg->max_iterations < 1 || cfg->max_rounds < 1 || !(cfg->tol >= 0))
    return lsim_fail(eb, LSIM_E_CMP_ITERATIONS,
                     "iteration limits must be >= 1 and tol >= 0 "
                     "(max_iterations %d, max_rounds %d)",
                     cfg->max_iterations, cfg->max_rounds);
  for (int i = 0; i < n; i++) {
    const lsim_jd_source *s = &src[i];
    if (s->rank < 1 || s->rank > LSIM_JD_MAX_SOURCE_RANK || !s->A || !s->B)
      return lsim_fail(eb, LSIM_E_CMP_SHAPE, "source %d: rank %d (want "
                       "1..%d) or factors missing", i, s->rank,
                       LSIM_JD_MAX_SOURCE_RANK);
    if (!isfinite(s->scale) || s->scale == 0)
      return lsim_fail(eb, LSIM_E_CMP_NONFINITE,
                       "source %d: scale must be finite and non-zero", i);
    for (size_t t = 0; t < (size_t)s->rank * d_in; t++)
      if (!isfinite(s->A[t]))
        return lsim_fail(eb, LSIM_E_CMP_NONFINITE,
                         "source %d: non-finite A entry %zu", i, t);
    for (size_t t = 0; t < (size_t)s->rank * d_out; t++)
      if (!isfinite(s->B[t]))
        return lsim_fail(eb, LSIM_E_CMP_NONFINITE,
                         "source %d: non-finite B entry %zu", i, t);
  }
  return 0;
}

lsim_err lsim_jd_fit(const lsim_jd_source *src, int n, int d_in, int d_out,
                     const lsim_jd_config *cfg, lsim_jd_result *out,
                     lsim_errbuf *eb) {
  lsim_err rc = lsim__check(src, n, d_in, d_out, cfg, eb);
  if (rc)
    return rc;
  memset(out, 0, sizeof *out);
  lsim__jd J;
  memset(&J, 0, sizeof J);
  J.src = src;
  J.n = n;
  J.d_in = d_in;
  J.d_out = d_out;
  J.R = cfg->rank;
  J.method = cfg->method;
  int rmax = 1;
  for (int i = 0; i < n; i++)
    if (src[i].rank > rmax)
      rmax = src[i].rank;
  int wide = d_in > d_out ? d_in : d_out;
  if (cfg->rank > wide)
    wide = cfg->rank;
  J.rmax = rmax;
  J.c = lsim__zalloc((size_t)n, sizeof *J.c);
  J.t1 = lsim__zalloc((size_t)rmax * wide, sizeof *J.t1);
  J.t2 = lsim__zalloc((size_t)rmax * wide, sizeof *J.t2);
  J.t3 = lsim__zalloc((size_t)2 * rmax * cfg->rank, sizeof *J.t3);
  J.gram = lsim__zalloc((size_t)cfg->clusters * cfg->rank * cfg->rank,
                        sizeof *J.gram);
  J.gram_ok = lsim__zalloc((size_t)cfg->clusters, sizeof *J.gram_ok);
  int k = cfg->clusters, R = cfg->rank;
  lsim_jd_result *res = out;
  res->method = cfg->method;
  res->d_in = d_in;
  res->d_out = d_out;
  res->R = R;
  res->k = k;
  res->n = n;
  res->core_len = cfg->method == LSIM_JD_FULL ? R * R : R;
  res->U = lsim__zalloc((size_t)k * d_out * R, sizeof *res->U);
  res->V = lsim__zalloc((size_t)k * d_in * R, sizeof *res->V);
  res->cores = lsim__zalloc((size_t)n * res->core_len, sizeof *res->cores);
  res->cluster = lsim__zalloc((size_t)n, sizeof *res->cluster);
  res->norm = lsim__zalloc((size_t)n, sizeof *res->norm);
  res->err2 = lsim__zalloc((size_t)n, sizeof *res->err2);
  int *members = lsim__zalloc((size_t)n, sizeof *members);
  int *next = lsim__zalloc((size_t)n, sizeof *next);
  double *F = NULL, *errs = lsim__zalloc((size_t)n * k, sizeof *errs);
  size_t big = (size_t)wide;
  double *C = lsim__zalloc((size_t)R * R > big ? (size_t)R * R : big,
                           sizeof *C);
  if (!J.c || !J.t1 || !J.t2 || !J.t3 || !J.gram || !J.gram_ok || !res->U ||
      !res->V || !res->cores || !res->cluster || !res->norm || !res->err2 ||
      !members || !next || !errs || !C) {
    rc = lsim_fail(eb, LSIM_E_NOMEM, "jd fit of %d sources", n);
    goto out;
  }
  for (int i = 0; i < n; i++) {
    double n2 = lsim_jd_delta_norm2(&src[i], d_in, d_out);
    if (!(n2 > 0) || !isfinite(n2)) {
      rc = lsim_fail(eb, LSIM_E_CMP_ZERO_NORM,
                     "source %d: ||s B A||_F is zero or not finite", i);
      goto out;
    }
    res->norm[i] = sqrt(n2);
    J.c[i] = src[i].scale / res->norm[i];
  }
  res->converged = 1;
  if (k > 1) {
    /* start: one joint fit, k-means on its normalised cores */
    res->k = 1;
    if ((rc = lsim__fit_all(&J, cfg, res, members, eb)))
      goto out;
    if ((rc = lsim__finish(&J, res, eb)))
      goto out;
    res->k = k;
    F = lsim__zalloc((size_t)n * res->core_len, sizeof *F);
    if (!F) {
      rc = lsim_fail(eb, LSIM_E_NOMEM, "k-means features");
      goto out;
    }
    for (int i = 0; i < n; i++)
      for (int q = 0; q < res->core_len; q++)
        F[(size_t)i * res->core_len + q] =
            res->cores[(size_t)i * res->core_len + q] / res->norm[i];
    if ((rc = lsim__kmeans(F, n, res->core_len, k, cfg->seed, res->cluster,
                           eb)))
      goto out;
    for (int i = 0; i < n; i++)
      errs[i] = res->err2[i] / (res->norm[i] * res->norm[i]);
    lsim__fill_empty(n, k, res->cluster, errs);
    res->converged = 0;
    for (int round = 0; round < cfg->max_rounds; round++) {
      res->rounds = round + 1;
      if ((rc = lsim__fit_all(&J, cfg, res, members, eb)))
        goto out;
      int changed = 0;
      for (int i = 0; i < n; i++) {
        int cur = res->cluster[i], best = cur;
        double be = 0;
        for (int c = 0; c < k; c++)
          if ((rc = lsim__err_under(&J, res, i, c, C,
                                    &errs[(size_t)i * k + c], eb)))
            goto out;
        be = errs[(size_t)i * k + cur];
        for (int c = 0; c < k; c++)
          if (errs[(size_t)i * k + c] < be - 1e-12) {
            be = errs[(size_t)i * k + c];
            best = c;
          }
        next[i] = best;
        changed |= best != cur;
      }
      if (!changed) {
        res->converged = 1;
        break;
      }
      if (round + 1 == cfg->max_rounds)
        break; /* keep the assignment the bases were fitted with */
      for (int i = 0; i < n; i++)
        errs[i] = errs[(size_t)i * k + next[i]];
      memcpy(res->cluster, next, sizeof *next * (size_t)n);
      lsim__fill_empty(n, k, res->cluster, errs);
    }
  } else {
    if ((rc = lsim__fit_all(&J, cfg, res, members, eb)))
      goto out;
  }
  rc = lsim__finish(&J, res, eb);
out:
  free(J.c);
  free(J.t1);
  free(J.t2);
  free(J.t3);
  free(J.gram);
  free(J.gram_ok);
  free(members);
  free(next);
  free(F);
  free(errs);
  free(C);
  if (rc)
    lsim_jd_result_release(out);
  return rc;
}

/* ---- the runtime operator in doubles ----------------------------------------- */

lsim_err lsim_jd_apply(const lsim_jd_result *r, int i, const double *X,
                       int N, double *Y, lsim_errbuf *eb) {
  if (!r || i < 0 || i >= r->n || N < 0 || (N && (!X || !Y)))
    return lsim_fail(eb, LSIM_E_CMP_SHAPE, "jd apply: bad arguments");
  int R = r->R, c = r->cluster[i];
  const double *U = r->U + (size_t)c * r->d_out * R;
  const double *V = r->V + (size_t)c * r->d_in * R;
  const double *S = r->cores + (size_t)i * r->core_len;
  double *t = lsim__zalloc((size_t)R, sizeof *t);
  double *z = lsim__zalloc((size_t)R, sizeof *z);
  if (!t || !z) {
    free(t);
    free(z);
    return lsim_fail(eb, LSIM_E_NOMEM, "jd apply");
  }
  for (int row = 0; row < N; row++) {
    const double *x = X + (size_t)row * r->d_in;
    for (int j = 0; j < R; j++) /* stage 1: x V */
      t[j] = lsim__dot(x, 1, V + j, R, r->d_in);
    for (int p = 0; p < R; p++) { /* stage 2: z = Sigma t */
      if (r->method == LSIM_JD_DIAG) {
        z[p] = S[p] * t[p];
        continue;
      }
      double a = 0;
      for (int q = 0; q < R; q++)
        a += S[p * R + q] * t[q];
      z[p] = a;
    }
    double *y = Y + (size_t)row * r->d_out; /* stage 3: y += U z */
    for (int o = 0; o < r->d_out; o++)
      y[o] += lsim__dot(U + (size_t)o * R, 1, z, 1, R);
  }
  free(t);
  free(z);
  return 0;
}
