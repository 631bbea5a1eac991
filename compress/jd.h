/*
** jd.h: joint shared-basis compression of an adapter collection
** (article 0x06G1, 0x06G5, 0x06G6).
**
** n source adapters of one module shape, each a checkpoint-orientation
** update  delta_i = s_i * B_i A_i  (A_i [r_i][d_in], B_i [d_out][r_i]),
** are approximated as  delta_i ~ U_c Sigma_i V_c^T  with bases shared by
** the adapters of one cluster c:
**
**   JD-Full  U_c [d_out][R], V_c [d_in][R] orthonormal; Sigma_i [R][R] is
**            U_c^T delta_i V_c.  The bases alternate between the top-R
**            eigenspaces of M(V) = sum_i delta_i V V^T delta_i^T and
**            N(U) = sum_i delta_i^T U U^T delta_i (LAPACKE_dsyevr).
**   JD-Diag  U_c, V_c unconstrained, Sigma_i = diag(s_i) [R].  Coordinate
**            descent: atom by atom, the exact minimiser for u_j with the
**            rest fixed, then v_j, then the j-th core entry of every
**            adapter; the final cores solve the normal equations for the
**            fitted atoms exactly (LAPACKE_dgelsd, minimum-norm).
**
** Every delta is fitted at unit Frobenius norm (delta_i / ||delta_i||_F)
** and the cores are restored to the source scale afterwards, so a loud
** adapter does not own the basis.  Nothing ever forms a dense
** d_out x d_in delta: products go through the factors, (B_i (A_i V)).
**
** Clustering (k > 1): one joint fit of the whole collection, k-means on
** its normalised cores (k-means++ seeded from cfg->seed, Lloyd to a fixed
** point; ties to the lowest cluster), then alternate: refit each cluster,
** reassign every adapter to the cluster whose bases reconstruct it best
** (the current cluster wins ties), until no assignment changes or
** cfg->max_rounds is reached.  The returned bases and cores always belong
** to the returned assignment.
**
** Determinism: no clock, no pointer value, no hash order; the seed fixes
** the k-means start.  Eigenvectors are sign-normalised (the entry of
** largest magnitude, first on ties, is positive), so a run on one machine
** and LAPACK build repeats bit for bit.
**
** This layer does no I/O.  Errors: E_CMP_SHAPE, E_CMP_RANK,
** E_CMP_CLUSTERS, E_CMP_METHOD, E_CMP_ITERATIONS, E_CMP_ZERO_NORM,
** E_CMP_NONFINITE, E_CMP_LAPACK, E_NOMEM.
*/
#ifndef LSIM_COMPRESS_JD_H
#define LSIM_COMPRESS_JD_H

#include "../engine/identity.h"
#include "../engine/lsim.h"

#ifdef __cplusplus
extern "C" {
#endif

enum lsim_jd_method { LSIM_JD_FULL = 1, LSIM_JD_DIAG = 2 };

/* "jd-full", "jd-diag"; NULL when unknown.  _find returns 0 when unknown. */
const char *lsim_jd_method_name(int method);
int lsim_jd_method_find(const char *name);

/* The largest source-adapter rank the fitter takes. */
#define LSIM_JD_MAX_SOURCE_RANK 512

/* One source adapter; the arrays are borrowed for the call only. */
typedef struct lsim_jd_source {
  int rank;        /* r_i >= 1 */
  double scale;    /* semantic scale s_i, finite and non-zero */
  const double *A; /* [rank][d_in], row-major */
  const double *B; /* [d_out][rank], row-major */
} lsim_jd_source;

typedef struct lsim_jd_config {
  int method;         /* LSIM_JD_FULL or LSIM_JD_DIAG */
  int rank;           /* shared rank R, 1..min(d_in, d_out) */
  int clusters;       /* k, 1..n */
  int max_iterations; /* per cluster fit, >= 1 (the paper uses 10) */
  int max_rounds;     /* refit/reassign rounds when k > 1, >= 1 */
  double tol;         /* stop a fit when the objective gains < tol * sum
                         of normalised energies (>= 0) */
  uint64_t seed;      /* k-means++ start */
} lsim_jd_config;
#define LSIM_JD_CONFIG_INIT {LSIM_JD_FULL, 2, 1, 10, 50, 1e-12, 1}

/* The fitted collection.  Every array is owned; release with
** lsim_jd_result_release (safe on a zero-filled or released result). */
typedef struct lsim_jd_result {
  int method, d_in, d_out, R, k, n;
  int core_len;   /* R*R (JD-Full, row-major [R][R]) or R (JD-Diag) */
  double *U;      /* [k][d_out][R] */
  double *V;      /* [k][d_in][R] */
  double *cores;  /* [n][core_len], at the source scale */
  int *cluster;   /* [n] */
  double *norm;   /* [n] ||delta_i||_F */
  double *err2;   /* [n] ||delta_i - U Sigma_i V^T||_F^2, source scale */
  int iterations; /* largest per-cluster iteration count of the final fit */
  int rounds;     /* refit/reassign rounds run (0 when k == 1) */
  int converged;  /* 1: assignment stable (always 1 when k == 1) */
  double total_err2, total_norm2; /* sums over the collection */
} lsim_jd_result;
#define LSIM_JD_RESULT_INIT {0}

lsim_err lsim_jd_fit(const lsim_jd_source *src, int n, int d_in, int d_out,
                     const lsim_jd_config *cfg, lsim_jd_result *out,
                     lsim_errbuf *eb);
void lsim_jd_result_release(lsim_jd_result *r);

/* ||s B A||_F^2 through the factors (r x r Gram matrices). */
double lsim_jd_delta_norm2(const lsim_jd_source *s, int d_in, int d_out);

/*
** Apply the fitted operator of adapter i to N rows of X [N][d_in]:
** Y [N][d_out] += ((X V_c) Sigma_i^T) U_c^T, the three-stage runtime
** operator (article 0x06G4), in doubles.  Used by the report and tests.
*/
lsim_err lsim_jd_apply(const lsim_jd_result *r, int i, const double *X,
                       int N, double *Y, lsim_errbuf *eb);

/* ---- identity (canonical encoding in docs/COMPRESSION.md) --------------- */

/* The digest of one source: d_in, d_out, rank, scale and the factor
** values as IEEE-754 binary64 (little-endian), A then B. */
lsim_err lsim_jd_source_digest(const lsim_jd_source *s, int d_in, int d_out,
                               lsim_digest *out, lsim_errbuf *eb);
/* The digest of the ordered source set: names and digests in order. */
lsim_err lsim_jd_source_set_digest(const char *const *names,
                                   const lsim_digest *src, int n,
                                   lsim_digest *out, lsim_errbuf *eb);
/* The digest of cluster c's bases (U_c then V_c). */
lsim_err lsim_jd_basis_digest(const lsim_jd_result *r, int c,
                              lsim_digest *out, lsim_errbuf *eb);
/* The digest of adapter i's core, bound to its cluster's basis digest. */
lsim_err lsim_jd_core_digest(const lsim_jd_result *r, int i,
                             const lsim_digest *basis, lsim_digest *out,
                             lsim_errbuf *eb);

/* Everything a bundle holds; the bundle identity is a digest over all of
** it.  Strings are borrowed. */
typedef struct lsim_jd_bundle_in {
  const char *base;   /* base model identity (token) */
  const char *module; /* module key (token) */
  int max_iterations, max_rounds;
  uint64_t seed;
  const char *const *names;   /* [n] source names, in order */
  const lsim_digest *sources; /* [n] source digests */
  const int *ranks;           /* [n] source ranks */
  const double *scales;       /* [n] source semantic scales */
  const lsim_digest *source_set;
  const lsim_jd_result *fit;
  const lsim_digest *bases; /* [k] */
  const lsim_digest *cores; /* [n] */
} lsim_jd_bundle_in;
lsim_err lsim_jd_bundle_digest(const lsim_jd_bundle_in *in, lsim_digest *out,
                               lsim_errbuf *eb);

#ifdef __cplusplus
}
#endif

#endif /* LSIM_COMPRESS_JD_H */
