/*
** cpu_ref.c: the exact reference executor (see cpu_ref.h for the contract).
**
** Design notes and invariants.
**
**  1. One evaluation = prepare, check, compute, convert.  `prepare` resolves
**     the adapters by id and freezes the launch snapshot (shapes, logical
**     ranks, which adapters the plan uses).  `check` re-derives, from the
**     plan metadata the chosen family actually reads, that every active row
**     is computed exactly once under its own adapter and that no base row
**     is addressed (the family's coverage simulated on a bitmap); nothing is
**     computed before it passes, so a malformed plan fails closed with the
**     same code whatever numeric tier would have run.  `compute` runs the
**     family.  `convert` turns the integer tier's numerator/denominator pairs
**     into canonical mpq values.
**
**  2. Every family writes a delta row only through lsim__claim(), which
**     refuses a base row (E_BASE_DELTA) or a second write (E_SCATTER); the
**     delta starts as exact zeros, so the article's scatter-add
**     "delta[g_u] += D_u" is a store into a zero row.  After compute, every
**     active row must have been claimed (E_SCATTER otherwise) -- these are
**     debug-grade re-checks of what `check` already proved.
**
**  3. Numeric tiers (lsim__xm).  A matrix is either mpq entries (gmp) or
**     int64 numerators with a positive int64 denominator per row ("int").
**     Factors (A, B, slot factors, W) have one denominator for the whole
**     matrix so that a product row x F^T has the single denominator
**     den(x) * den(F).  Every integer operation either proves it cannot
**     overflow (a product of K terms is safe when K * max|x| * max|f| <=
**     INT64_MAX: every partial sum is then bounded by the same quantity) or
**     returns LSIM_E_OVERFLOW, and under LSIM_NUM_AUTO the whole evaluation
**     is redone in gmp.  Numerators never hold INT64_MIN, so |n| is always
**     representable.  The tiers compute the same rationals, so the canonical
**     results are identical.
**
**  4. Families differ in data movement, not in the arithmetic primitive:
**     all of them use lsim__mul_t (rows of an input times a factor
**     transposed), lsim__copy_row (gather) and lsim__scale_row (scale
**     passed after expand).  What differs is what is gathered, in which
**     order, at which width, into which intermediate and how results are
**     routed back -- exactly what the article's alternatives differ in.
**
**  5. The base projection has its own tiers (int16 packed kernel with
**     int32 partial sums over a proven-safe chunk of K, int64, gmp); see
**     the section "base projection".
*/
#include "cpu_ref.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define LSIM__X86_AVX2 1
#else
#define LSIM__X86_AVX2 0
#endif

/* ======================================================================== */
/* exact matrices and scalars                                               */
/* ======================================================================== */

/* An allocation count for n items (never 0, never from a negative n). */
static size_t lsim__cnt(int n) { return n > 0 ? (size_t)n : 1; }

lsim_err lsim_qmat_init(lsim_qmat *m, int rows, int cols, lsim_errbuf *eb) {
  m->rows = m->cols = 0;
  m->v = NULL;
  if (rows < 0 || cols < 0)
    return lsim_fail(eb, LSIM_E_SHAPE, "matrix shape [%d][%d] is negative",
                     rows, cols);
  size_t n = (size_t)rows * (size_t)cols;
  if (cols != 0 && n / (size_t)cols != (size_t)rows)
    return lsim_fail(eb, LSIM_E_SHAPE, "matrix shape [%d][%d] is too large",
                     rows, cols);
  if (n > 0) {
    if (n > SIZE_MAX / sizeof(mpq_t))
      return lsim_fail(eb, LSIM_E_NOMEM, "matrix [%d][%d] is too large", rows,
                       cols);
    m->v = malloc(n * sizeof(mpq_t));
    if (!m->v)
      return lsim_fail(eb, LSIM_E_NOMEM, "out of memory for a [%d][%d] matrix",
                       rows, cols);
    for (size_t k = 0; k < n; k++)
      mpq_init(m->v[k]);
  }
  m->rows = rows;
  m->cols = cols;
  return 0;
}

void lsim_qmat_clear(lsim_qmat *m) {
  if (!m)
    return;
  if (m->v) {
    size_t n = (size_t)m->rows * (size_t)m->cols;
    for (size_t k = 0; k < n; k++)
      mpq_clear(m->v[k]);
    free(m->v);
  }
  m->v = NULL;
  m->rows = m->cols = 0;
}

int lsim_qmat_equal(const lsim_qmat *a, const lsim_qmat *b) {
  if (a->rows != b->rows || a->cols != b->cols)
    return 0;
  size_t n = (size_t)a->rows * (size_t)a->cols;
  for (size_t k = 0; k < n; k++)
    if (!mpq_equal(a->v[k], b->v[k]))
      return 0;
  return 1;
}

/* The output-matrix rule of cpu_ref.h: allocate a zeroed m, accept an m of
** exactly the wanted shape, refuse anything else.  *fresh says which. */
static lsim_err lsim__out_shape(lsim_qmat *m, int rows, int cols,
                                const char *what, int *fresh,
                                lsim_errbuf *eb) {
  *fresh = 0;
  if (m->rows == 0 && m->cols == 0 && m->v == NULL) {
    if (rows == 0 && cols == 0)
      return 0;
    *fresh = 1;
    return lsim_qmat_init(m, rows, cols, eb);
  }
  if (m->rows != rows || m->cols != cols)
    return lsim_fail(eb, LSIM_E_SHAPE, "%s is [%d][%d], expected [%d][%d]",
                     what, m->rows, m->cols, rows, cols);
  return 0;
}

lsim_err lsim_qmat_copy(lsim_qmat *dst, const lsim_qmat *src,
                        lsim_errbuf *eb) {
  int fresh;
  lsim_err rc = lsim__out_shape(dst, src->rows, src->cols, "copy destination",
                                &fresh, eb);
  if (rc)
    return rc;
  size_t n = (size_t)src->rows * (size_t)src->cols;
  for (size_t k = 0; k < n; k++)
    mpq_set(dst->v[k], src->v[k]);
  return 0;
}

lsim_err lsim_q_parse(mpq_t out, const char *s, lsim_errbuf *eb) {
  static const char digits[] = "0123456789";
  if (!s)
    return lsim_fail(eb, LSIM_E_RATIONAL, "missing rational (null string)");
  const char *p = s;
  int neg = 0;
  if (*p == '-') {
    neg = 1;
    p++;
  }
  size_t nl = strspn(p, digits);
  const char *num = p;
  p += nl;
  const char *den = NULL;
  size_t dl = 0;
  if (*p == '/') {
    den = ++p;
    dl = strspn(p, digits);
    p += dl;
  }
  if (nl == 0 || (den && dl == 0) || *p != '\0')
    return lsim_fail(eb, LSIM_E_RATIONAL,
                     "'%.60s' is not a rational (p, -p, p/q or -p/q with "
                     "decimal digits)",
                     s);
  size_t len = nl > dl ? nl : dl;
  char *buf = malloc(len + 1);
  if (!buf)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory parsing a rational");
  mpq_t q;
  mpq_init(q);
  memcpy(buf, num, nl);
  buf[nl] = '\0';
  mpz_set_str(mpq_numref(q), buf, 10);
  if (den) {
    memcpy(buf, den, dl);
    buf[dl] = '\0';
    mpz_set_str(mpq_denref(q), buf, 10);
  }
  free(buf);
  if (mpz_sgn(mpq_denref(q)) == 0) {
    mpq_clear(q);
    return lsim_fail(eb, LSIM_E_ZERO_DENOM, "'%.60s' has a zero denominator",
                     s);
  }
  mpq_canonicalize(q);
  if (neg)
    mpq_neg(q, q);
  mpq_swap(out, q);
  mpq_clear(q);
  return 0;
}

char *lsim_q_str(const mpq_t q) {
  mpq_t c;
  mpq_init(c);
  mpq_set(c, q);
  mpq_canonicalize(c);
  size_t n = mpz_sizeinbase(mpq_numref(c), 10) +
             mpz_sizeinbase(mpq_denref(c), 10) + 3;
  char *s = malloc(n);
  if (s)
    mpq_get_str(s, 10, c);
  mpq_clear(c);
  return s;
}

lsim_err lsim_qmat_set_row(lsim_qmat *m, int i, const char *const *s, int n,
                           lsim_errbuf *eb) {
  if (i < 0 || i >= m->rows || n != m->cols)
    return lsim_fail(eb, LSIM_E_SHAPE,
                     "row %d with %d values does not fit a [%d][%d] matrix",
                     i, n, m->rows, m->cols);
  for (int j = 0; j < n; j++) {
    lsim_err rc = lsim_q_parse(LSIM_QAT(m, i, j), s[j], eb);
    if (rc)
      return rc;
  }
  return 0;
}

lsim_err lsim_qmat_add(lsim_qmat *Y, const lsim_qmat *delta, lsim_errbuf *eb) {
  if (Y->rows != delta->rows || Y->cols != delta->cols)
    return lsim_fail(eb, LSIM_E_SHAPE, "cannot add a [%d][%d] delta to [%d][%d]",
                     delta->rows, delta->cols, Y->rows, Y->cols);
  size_t n = (size_t)Y->rows * (size_t)Y->cols;
  for (size_t k = 0; k < n; k++)
    mpq_add(Y->v[k], Y->v[k], delta->v[k]);
  return 0;
}

/* ======================================================================== */
/* adapters and names                                                       */
/* ======================================================================== */

lsim_err lsim_qadapter_init(lsim_qadapter *a, int id, int rank, int d_in,
                            int d_out, lsim_errbuf *eb) {
  a->id = id;
  a->rank = rank;
  mpq_init(a->scale);
  mpq_set_ui(a->scale, 1, 1);
  a->A = (lsim_qmat)LSIM_QMAT_INIT;
  a->B = (lsim_qmat)LSIM_QMAT_INIT;
  lsim_err rc = lsim_qmat_init(&a->A, rank, d_in, eb);
  if (!rc)
    rc = lsim_qmat_init(&a->B, d_out, rank, eb);
  if (rc)
    lsim_qadapter_clear(a);
  return rc;
}

void lsim_qadapter_clear(lsim_qadapter *a) {
  mpq_clear(a->scale);
  memset(a->scale, 0, sizeof a->scale); /* a second clear is then a no-op */
  lsim_qmat_clear(&a->A);
  lsim_qmat_clear(&a->B);
}

static int lsim__qmat_sane(const lsim_qmat *m) {
  return m->rows >= 0 && m->cols >= 0 &&
         (m->v != NULL || (size_t)m->rows * (size_t)m->cols == 0);
}

lsim_err lsim_qadapter_check(const lsim_qadapter *a, int d_in, int d_out,
                             lsim_errbuf *eb) {
  const lsim_qmat *A = &a->A, *B = &a->B;
  int r = a->rank;
  if (r < 1)
    return lsim_fail(eb, LSIM_E_SHAPE, "adapter %d has rank %d, expected >= 1",
                     a->id, r);
  if (!lsim__qmat_sane(A) || !lsim__qmat_sane(B))
    return lsim_fail(eb, LSIM_E_SHAPE, "adapter %d has an uninitialised factor",
                     a->id);
  if (!(A->rows == r && A->cols == d_in)) {
    if (A->rows == d_in && A->cols == r)
      return lsim_fail(eb, LSIM_E_ORIENTATION,
                       "adapter %d factor A is [d_in=%d][r=%d]; the logical "
                       "orientation is [r][d_in]",
                       a->id, d_in, r);
    return lsim_fail(eb, LSIM_E_SHAPE,
                     "adapter %d factor A is [%d][%d], expected [r=%d][d_in=%d]",
                     a->id, A->rows, A->cols, r, d_in);
  }
  if (!(B->rows == d_out && B->cols == r)) {
    if (B->rows == r && B->cols == d_out)
      return lsim_fail(eb, LSIM_E_ORIENTATION,
                       "adapter %d factor B is [r=%d][d_out=%d]; the logical "
                       "orientation is [d_out][r]",
                       a->id, r, d_out);
    return lsim_fail(eb, LSIM_E_SHAPE,
                     "adapter %d factor B is [%d][%d], expected "
                     "[d_out=%d][r=%d]",
                     a->id, B->rows, B->cols, d_out, r);
  }
  return 0;
}

static const char *const lsim__path_names[LSIM_REF__COUNT] = {
    "per_row", "grouped", "sgmv", "indexed", "bucketed", "padded"};
static const char *const lsim__scale_names[LSIM_SCALE__COUNT] = {
    "passed", "fold_a", "fold_b"};
static const char *const lsim__num_names[LSIM_NUM__COUNT] = {
    "auto", "gmp", "int64", "int16", "int16_scalar"};

const char *lsim_ref_path_name(int path) {
  return path >= 0 && path < LSIM_REF__COUNT ? lsim__path_names[path] : "?";
}

int lsim_ref_path_find(const char *name) {
  if (!name)
    return -1;
  for (int i = 0; i < LSIM_REF__COUNT; i++)
    if (strcmp(name, lsim__path_names[i]) == 0)
      return i;
  return -1;
}

const char *lsim_scale_mode_name(int mode) {
  return mode >= 0 && mode < LSIM_SCALE__COUNT ? lsim__scale_names[mode] : "?";
}

const char *lsim_num_mode_name(int mode) {
  return mode >= 0 && mode < LSIM_NUM__COUNT ? lsim__num_names[mode] : "?";
}

/* ======================================================================== */
/* the two numeric representations                                         */
/* ======================================================================== */

typedef struct lsim__xm {
  int rows, cols;
  int gmp;       /* 1: q[] holds the values; 0: n[]/den[] */
  mpq_t *q;      /* gmp: [rows * cols] */
  int64_t *n;    /* int: [rows * cols] numerators, never INT64_MIN */
  int64_t *den;  /* int: [rows] positive denominators */
  int64_t amax;  /* int: an upper bound of |n| over all entries */
  int64_t *nt;   /* int, optional: n transposed, [cols][rows] (lsim__xm_t) */
  int16_t *p16;  /* int, optional: n transposed in int16 column pairs,
                 ** [(cols + 1) / 2][rows][2] (lsim__xm_t) */
  size_t cap;    /* int: entries allocated in n */
  int dcap;      /* int: entries allocated in den */
} lsim__xm;

#define LSIM__XM_INIT {0, 0, 0, NULL, NULL, NULL, 0, NULL, NULL, 0, 0}
#define LSIM__N(m, i, j) ((m)->n[(size_t)(i) * (size_t)(m)->cols + (size_t)(j)])
#define LSIM__Q(m, i, j) ((m)->q[(size_t)(i) * (size_t)(m)->cols + (size_t)(j)])

static void lsim__xm_free(lsim__xm *m) {
  if (m->q) {
    size_t n = (size_t)m->rows * (size_t)m->cols;
    for (size_t k = 0; k < n; k++)
      mpq_clear(m->q[k]);
    free(m->q);
  }
  free(m->n);
  free(m->den);
  free(m->nt);
  free(m->p16);
  *m = (lsim__xm)LSIM__XM_INIT;
}

static lsim_err lsim__xm_init(lsim__xm *m, int rows, int cols, int gmp,
                              lsim_errbuf *eb) {
  *m = (lsim__xm)LSIM__XM_INIT;
  size_t n = (size_t)rows * (size_t)cols;
  m->rows = rows;
  m->cols = cols;
  m->gmp = gmp;
  if (gmp) {
    if (n) {
      m->q = malloc(n * sizeof(mpq_t));
      if (!m->q)
        goto nomem;
      for (size_t k = 0; k < n; k++)
        mpq_init(m->q[k]);
    }
  } else {
    m->n = calloc(n ? n : 1, sizeof *m->n);
    m->den = malloc(lsim__cnt(rows) * sizeof *m->den);
    if (!m->n || !m->den)
      goto nomem;
    for (int i = 0; i < (rows > 0 ? rows : 1); i++)
      m->den[i] = 1;
    m->cap = n ? n : 1;
    m->dcap = rows > 0 ? rows : 1;
  }
  return 0;
nomem:
  lsim__xm_free(m);
  return lsim_fail(eb, LSIM_E_NOMEM, "out of memory for a [%d][%d] work matrix",
                   rows, cols);
}

/* m := exact zeros [rows][cols] in the given tier, keeping an int-tier
** m's storage when it is large enough (the families' work matrices are
** reshaped for every adapter, bucket and run). */
static lsim_err lsim__xm_reuse(lsim__xm *m, int rows, int cols, int gmp,
                               lsim_errbuf *eb) {
  size_t n = (size_t)rows * (size_t)cols;
  if (gmp || m->gmp || !m->n || n > m->cap || rows > m->dcap) {
    lsim__xm_free(m);
    return lsim__xm_init(m, rows, cols, gmp, eb);
  }
  m->rows = rows;
  m->cols = cols;
  if (n)
    memset(m->n, 0, n * sizeof *m->n);
  for (int i = 0; i < rows; i++)
    m->den[i] = 1;
  m->amax = 0;
  free(m->nt);
  free(m->p16);
  m->nt = NULL;
  m->p16 = NULL;
  return 0;
}

/* ---- int64 <-> mpz ------------------------------------------------------ */
/*
** Reading an mpz through mpz_size / mpz_getlimbn / mpz_sgn (inline in
** gmp.h) instead of mpz_fits_slong_p + mpz_get_si keeps the conversion of
** a 4096 x 4096 matrix from being dominated by library calls.
*/

#if LONG_MAX < INT64_MAX
#error "cpu_ref's integer tier assumes a 64-bit long (LP64)"
#endif

/* *out := z when z fits int64 and is not INT64_MIN; returns 0 otherwise. */
static inline int lsim__z_i64(mpz_srcptr z, int64_t *out) {
#if GMP_NUMB_BITS == 64 && GMP_NAIL_BITS == 0
  size_t n = mpz_size(z);
  if (n == 0) {
    *out = 0;
    return 1;
  }
  mp_limb_t l = mpz_getlimbn(z, 0);
  if (n > 1 || l > (mp_limb_t)INT64_MAX)
    return 0;
  *out = mpz_sgn(z) < 0 ? -(int64_t)l : (int64_t)l;
  return 1;
#else
  if (!mpz_fits_slong_p(z))
    return 0;
  long v = mpz_get_si(z);
  if (v == LONG_MIN)
    return 0;
  *out = (int64_t)v;
  return 1;
#endif
}

/* z == 1 (used on denominators, which are positive). */
static inline int lsim__z_is_one(mpz_srcptr z) {
  return mpz_size(z) == 1 && mpz_getlimbn(z, 0) == 1;
}

static int64_t lsim__abs64(int64_t v) { return v < 0 ? -v : v; }

static int64_t lsim__gcd64(int64_t a, int64_t b) {
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/* *l := lcm(*l, d) for positive l, d; 0 on overflow. */
static int lsim__lcm_into(int64_t *l, int64_t d) {
  if (d == 1 || *l % d == 0)
    return 1;
  int64_t g = lsim__gcd64(*l, d);
  return !__builtin_mul_overflow(*l / g, d, l);
}

/* out := n / d (d > 0), canonical, reduced with int64 arithmetic. */
static void lsim__q_from(mpq_ptr out, int64_t n, int64_t d) {
  if (d != 1 && n != 0) {
    int64_t g = lsim__gcd64(lsim__abs64(n), d);
    n /= g;
    d /= g;
  } else if (n == 0) {
    d = 1;
  }
  mpz_set_si(mpq_numref(out), (long)n);
  mpz_set_si(mpq_denref(out), (long)d);
}

#define LSIM__OVERFLOW(eb, ...) lsim_fail((eb), LSIM_E_OVERFLOW, __VA_ARGS__)

/*
** Load an exact matrix from src.  uniform: one denominator for the whole
** matrix (factors), else one per row.  scale (may be NULL) is folded in:
** the values become scale * src.  In the int tier E_OVERFLOW when a value
** does not fit.
*/
static lsim_err lsim__xm_load(lsim__xm *m, const lsim_qmat *src, int uniform,
                              mpq_srcptr scale, int gmp, lsim_errbuf *eb) {
  lsim_err rc = lsim__xm_init(m, src->rows, src->cols, gmp, eb);
  if (rc)
    return rc;
  int R = src->rows, C = src->cols;
  if (gmp) {
    size_t n = (size_t)R * (size_t)C;
    for (size_t k = 0; k < n; k++) {
      if (scale)
        mpq_mul(m->q[k], src->v[k], scale);
      else
        mpq_set(m->q[k], src->v[k]);
    }
    return 0;
  }
  int64_t sp = 1, sq = 1;
  if (scale && (!lsim__z_i64(mpq_numref(scale), &sp) ||
                !lsim__z_i64(mpq_denref(scale), &sq)))
    goto over;
  /* Every entry an integer (the common case): one pass, each denominator
  ** sq.  The first fraction sends the load to the general passes below,
  ** which overwrite what this one wrote. */
  {
    size_t n = (size_t)R * (size_t)C, k = 0;
    int64_t amax = 0;
    for (; k < n; k++) {
      mpq_srcptr e = src->v[k];
      int64_t v;
      if (!lsim__z_is_one(mpq_denref(e)))
        break;
      if (!lsim__z_i64(mpq_numref(e), &v) ||
          (sp != 1 && __builtin_mul_overflow(v, sp, &v)) || v == INT64_MIN)
        goto over;
      m->n[k] = v;
      if (lsim__abs64(v) > amax)
        amax = lsim__abs64(v);
    }
    if (k == n) {
      for (int i = 0; i < R; i++)
        m->den[i] = sq;
      m->amax = amax;
      return 0;
    }
  }
  /* Denominators first: lcm per row (or over all rows when uniform). */
  int64_t L = 1;
  for (int i = 0; i < R; i++) {
    if (!uniform)
      L = 1;
    for (int j = 0; j < C; j++) {
      mpz_srcptr d = mpq_denref(LSIM_QAT(src, i, j));
      if (lsim__z_is_one(d))
        continue;
      int64_t dv;
      if (!lsim__z_i64(d, &dv) || !lsim__lcm_into(&L, dv))
        goto over;
    }
    if (!uniform)
      m->den[i] = L;
  }
  int64_t amax = 0;
  for (int i = 0; i < R; i++) {
    int64_t Li = uniform ? L : m->den[i];
    int64_t *row = m->n + (size_t)i * (size_t)C;
    for (int j = 0; j < C; j++) {
      mpq_srcptr e = LSIM_QAT(src, i, j);
      int64_t v, dv = 1;
      if (!lsim__z_i64(mpq_numref(e), &v))
        goto over;
      if (!lsim__z_is_one(mpq_denref(e))) {
        if (!lsim__z_i64(mpq_denref(e), &dv))
          goto over;
      }
      if (Li != dv && __builtin_mul_overflow(v, Li / dv, &v))
        goto over;
      if (sp != 1 && __builtin_mul_overflow(v, sp, &v))
        goto over;
      if (v == INT64_MIN)
        goto over;
      row[j] = v;
      int64_t a = lsim__abs64(v);
      if (a > amax)
        amax = a;
    }
    int64_t di = Li;
    if (sq != 1 && __builtin_mul_overflow(di, sq, &di))
      goto over;
    m->den[i] = di;
  }
  m->amax = amax;
  return 0;
over:
  lsim__xm_free(m);
  return LSIM__OVERFLOW(eb, "a [%d][%d] matrix does not fit the int64 tier",
                        R, C);
}

/* K * a * b <= INT64_MAX (so no partial sum of K products can overflow). */
static int lsim__bound_ok(int64_t K, int64_t a, int64_t b) {
  uint64_t t;
  if (__builtin_mul_overflow((uint64_t)a, (uint64_t)b, &t))
    return 0;
  if (__builtin_mul_overflow(t, (uint64_t)(K > 0 ? K : 1), &t))
    return 0;
  return t <= (uint64_t)INT64_MAX;
}

/* 1 when the CPU has AVX2 (runtime check; 0 off x86-64). */
static int lsim__cpu_avx2(void);

/*
** A factor's numerators transposed for the AVX2 products below: m->nt
** [cols][rows] when the int-tier factor's entries fit int32, and m->p16
** (column pairs interleaved, [(cols + 1) / 2][rows][2], a zero column
** completing an odd count) when they fit int16; neither otherwise (the
** product then runs the portable loop).
*/
static lsim_err lsim__xm_t(lsim__xm *m, lsim_errbuf *eb) {
  free(m->nt);
  free(m->p16);
  m->nt = NULL;
  m->p16 = NULL;
  if (m->gmp || m->amax > INT32_MAX || !lsim__cpu_avx2())
    return 0;
  size_t R = (size_t)m->rows, C = (size_t)m->cols, Ch = (C + 1) / 2;
  m->nt = malloc((R * C > 0 ? R * C : 1) * sizeof *m->nt);
  if (m->nt && m->amax <= INT16_MAX)
    m->p16 = calloc(R * Ch > 0 ? 2 * R * Ch : 1, sizeof *m->p16);
  if (!m->nt || (m->amax <= INT16_MAX && !m->p16))
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory for a [%d][%d] factor",
                     m->rows, m->cols);
  for (size_t i = 0; i < R; i++)
    for (size_t j = 0; j < C; j++)
      m->nt[j * R + i] = m->n[i * C + j];
  if (m->p16)
    for (size_t i = 0; i < R; i++)
      for (size_t j = 0; j < C; j++)
        m->p16[((j / 2) * R + i) * 2 + j % 2] = (int16_t)m->n[i * C + j];
  return 0;
}

#if LSIM__X86_AVX2
/* max(mx, |v|) lane by lane (|v| < 2^63: v is never INT64_MIN). */
__attribute__((target("avx2"))) static inline __m256i
lsim__absmax_avx2(__m256i mx, __m256i v) {
  __m256i a = _mm256_blendv_epi8(
      v, _mm256_sub_epi64(_mm256_setzero_si256(), v),
      _mm256_cmpgt_epi64(_mm256_setzero_si256(), v));
  return _mm256_blendv_epi8(mx, a, _mm256_cmpgt_epi64(a, mx));
}

/*
** The same sums over int16 operands: y[k] = sum_c x[c] * f[k][c] from the
** column pairs p (lsim__xm_t's p16).  vpmaddwd multiplies 16 int16 pairs and
** adds each pair into an int32 lane, one lane per output k, so a lane sums
** the K products of its output and nothing else: the caller's proof
** K * max|x| * max|f| <= INT32_MAX keeps every partial sum exact.  Eight
** outputs to a 256-bit lane group, widened to int64 at the store.  Returns
** max |y[k]|.
*/
/* x[2h], x[2h + 1] (0 past K) as the int16 pair vpmaddwd reads. */
static inline int32_t lsim__pair16(const int64_t *x, int h, int K) {
  uint32_t lo = (uint16_t)(int16_t)x[2 * h];
  uint32_t hi = 2 * h + 1 < K ? (uint16_t)(int16_t)x[2 * h + 1] : 0;
  return (int32_t)(lo | hi << 16);
}

/* y[k..k+8) := the int32 lanes of a widened; mx := max(mx, |a|) lanewise
** (|a| < 2^31: no lane holds INT32_MIN, by the caller's bound). */
__attribute__((target("avx2"))) static inline __m256i
lsim__store16_avx2(int64_t *y, __m256i a, __m256i mx) {
  _mm256_storeu_si256((__m256i *)y,
                      _mm256_cvtepi32_epi64(_mm256_castsi256_si128(a)));
  _mm256_storeu_si256((__m256i *)(y + 4),
                      _mm256_cvtepi32_epi64(_mm256_extracti128_si256(a, 1)));
  return _mm256_max_epi32(mx, _mm256_abs_epi32(a));
}

__attribute__((target("avx2"))) static int64_t
lsim__dot_p16_avx2(int64_t *y, const int64_t *x, const int16_t *p, int K,
                   int FR) {
  const int Kh = (K + 1) / 2;
  int32_t pairs[64]; /* the pairs once, for the usual small K */
  const int kept = Kh <= 64;
  for (int h = 0; kept && h < Kh; h++)
    pairs[h] = lsim__pair16(x, h, K);
  __m256i mx = _mm256_setzero_si256();
  int k = 0;
  for (; k + 16 <= FR; k += 16) {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0;
    for (int h = 0; h < Kh; h++) {
      const __m256i b =
          _mm256_set1_epi32(kept ? pairs[h] : lsim__pair16(x, h, K));
      const __m256i *f =
          (const __m256i *)(p + ((size_t)h * (size_t)FR + (size_t)k) * 2);
      a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(b, _mm256_loadu_si256(f)));
      a1 = _mm256_add_epi32(a1,
                            _mm256_madd_epi16(b, _mm256_loadu_si256(f + 1)));
    }
    mx = lsim__store16_avx2(y + k, a0, mx);
    mx = lsim__store16_avx2(y + k + 8, a1, mx);
  }
  for (; k + 8 <= FR; k += 8) {
    __m256i a = _mm256_setzero_si256();
    for (int h = 0; h < Kh; h++) {
      const __m256i b =
          _mm256_set1_epi32(kept ? pairs[h] : lsim__pair16(x, h, K));
      const __m256i *f =
          (const __m256i *)(p + ((size_t)h * (size_t)FR + (size_t)k) * 2);
      a = _mm256_add_epi32(a, _mm256_madd_epi16(b, _mm256_loadu_si256(f)));
    }
    mx = lsim__store16_avx2(y + k, a, mx);
  }
  __m128i m = _mm_max_epi32(_mm256_castsi256_si128(mx),
                            _mm256_extracti128_si256(mx, 1));
  m = _mm_max_epi32(m, _mm_shuffle_epi32(m, 0x4E));
  m = _mm_max_epi32(m, _mm_shuffle_epi32(m, 0xB1));
  int64_t amax = _mm_cvtsi128_si32(m);
  for (; k < FR; k++) {
    int64_t acc = 0;
    for (int c = 0; c < K; c++)
      acc += x[c] * p[((size_t)(c / 2) * (size_t)FR + (size_t)k) * 2 + c % 2];
    y[k] = acc;
    if (lsim__abs64(acc) > amax)
      amax = lsim__abs64(acc);
  }
  return amax;
}

/*
** y[k] = sum_c x[c] * ft[c][k] for k < FR, c < K, four outputs to a 256-bit
** lane group.  vpmuldq multiplies the low signed 32 bits of each 64-bit lane
** into a 64-bit product, which is the exact product because the caller has
** proven every x and f within int32; the sums are within int64 by the same
** K * max|x| * max|f| bound as the portable loop's.  (Skipping zero x[c]
** cost more in mispredicted branches than it saved.)  Returns max |y[k]|.
*/
__attribute__((target("avx2"))) static int64_t
lsim__dot_t_avx2(int64_t *y, const int64_t *x, const int64_t *ft, int K,
                 int FR) {
  __m256i mx = _mm256_setzero_si256();
  int k = 0;
  for (; k + 16 <= FR; k += 16) {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (int c = 0; c < K; c++) {
      const __m256i b = _mm256_set1_epi64x(x[c]);
      const __m256i *f =
          (const __m256i *)(ft + (size_t)c * (size_t)FR + (size_t)k);
      a0 = _mm256_add_epi64(a0, _mm256_mul_epi32(b, _mm256_loadu_si256(f)));
      a1 = _mm256_add_epi64(a1,
                            _mm256_mul_epi32(b, _mm256_loadu_si256(f + 1)));
      a2 = _mm256_add_epi64(a2,
                            _mm256_mul_epi32(b, _mm256_loadu_si256(f + 2)));
      a3 = _mm256_add_epi64(a3,
                            _mm256_mul_epi32(b, _mm256_loadu_si256(f + 3)));
    }
    _mm256_storeu_si256((__m256i *)(y + k), a0);
    _mm256_storeu_si256((__m256i *)(y + k + 4), a1);
    _mm256_storeu_si256((__m256i *)(y + k + 8), a2);
    _mm256_storeu_si256((__m256i *)(y + k + 12), a3);
    mx = lsim__absmax_avx2(mx, a0);
    mx = lsim__absmax_avx2(mx, a1);
    mx = lsim__absmax_avx2(mx, a2);
    mx = lsim__absmax_avx2(mx, a3);
  }
  for (; k + 4 <= FR; k += 4) {
    __m256i a0 = _mm256_setzero_si256();
    for (int c = 0; c < K; c++) {
      const __m256i b = _mm256_set1_epi64x(x[c]);
      const __m256i *f =
          (const __m256i *)(ft + (size_t)c * (size_t)FR + (size_t)k);
      a0 = _mm256_add_epi64(a0, _mm256_mul_epi32(b, _mm256_loadu_si256(f)));
    }
    _mm256_storeu_si256((__m256i *)(y + k), a0);
    mx = lsim__absmax_avx2(mx, a0);
  }
  int64_t lanes[4], amax = 0;
  _mm256_storeu_si256((__m256i *)lanes, mx);
  for (int l = 0; l < 4; l++)
    if (lanes[l] > amax)
      amax = lanes[l];
  for (; k < FR; k++) {
    int64_t acc = 0;
    for (int c = 0; c < K; c++)
      acc += x[c] * ft[(size_t)c * (size_t)FR + (size_t)k];
    y[k] = acc;
    if (lsim__abs64(acc) > amax)
      amax = lsim__abs64(acc);
  }
  return amax;
}
#endif

/*
** The one arithmetic primitive: for i in [0, nrows)
**     out[orow + i][k] = in[irow + i][0..K) . F[k][0..K)     k < F->rows
** with K = F->cols; out columns from F->rows on are left alone.
*/
static lsim_err lsim__mul_t(lsim__xm *out, int orow, const lsim__xm *in,
                            int irow, int nrows, const lsim__xm *F,
                            lsim_errbuf *eb) {
  int K = F->cols, FR = F->rows;
  if (in->cols < K || out->cols < FR)
    return LSIM_BUG(eb, "mul_t operand widths disagree");
  if (out->gmp) {
    mpq_t acc, t;
    mpq_init(acc);
    mpq_init(t);
    for (int i = 0; i < nrows; i++) {
      for (int k = 0; k < FR; k++) {
        mpq_set_ui(acc, 0, 1);
        for (int c = 0; c < K; c++) {
          mpq_srcptr x = LSIM__Q(in, irow + i, c);
          if (mpq_sgn(x) == 0)
            continue;
          mpq_mul(t, x, LSIM__Q(F, k, c));
          mpq_add(acc, acc, t);
        }
        mpq_set(LSIM__Q(out, orow + i, k), acc);
      }
    }
    mpq_clear(acc);
    mpq_clear(t);
    return 0;
  }
  if (!lsim__bound_ok(K, in->amax, F->amax))
    return LSIM__OVERFLOW(eb, "a product over %d terms may overflow int64", K);
  int64_t fden = F->den[0];
  int64_t amax = out->amax;
  /* int16 operands whose K-term sums fit int32 (lsim__dot_p16_avx2) */
  const int p16 = F->p16 && in->amax <= INT16_MAX &&
                  (uint64_t)K * (uint64_t)in->amax * (uint64_t)F->amax <=
                      (uint64_t)INT32_MAX;
  for (int i = 0; i < nrows; i++) {
    const int64_t *x = in->n + (size_t)(irow + i) * (size_t)in->cols;
    int64_t *y = out->n + (size_t)(orow + i) * (size_t)out->cols;
    int64_t d;
    if (__builtin_mul_overflow(in->den[irow + i], fden, &d))
      return LSIM__OVERFLOW(eb, "a denominator product overflows int64");
    out->den[orow + i] = d;
#if LSIM__X86_AVX2
    if (p16) {
      int64_t a = lsim__dot_p16_avx2(y, x, F->p16, K, FR);
      if (a > amax)
        amax = a;
      continue;
    }
    if (F->nt && in->amax <= INT32_MAX) {
      int64_t a = lsim__dot_t_avx2(y, x, F->nt, K, FR);
      if (a > amax)
        amax = a;
      continue;
    }
#endif
    for (int k = 0; k < FR; k++) {
      const int64_t *f = F->n + (size_t)k * (size_t)K;
      int64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      int c = 0;
      for (; c + 4 <= K; c += 4) {
        s0 += x[c] * f[c];
        s1 += x[c + 1] * f[c + 1];
        s2 += x[c + 2] * f[c + 2];
        s3 += x[c + 3] * f[c + 3];
      }
      for (; c < K; c++)
        s0 += x[c] * f[c];
      /* Each partial and the total are sums of at most K products, so all
      ** are within the proven bound. */
      int64_t s = (s0 + s1) + (s2 + s3);
      y[k] = s;
      int64_t a = lsim__abs64(s);
      if (a > amax)
        amax = a;
    }
  }
  out->amax = amax;
  return 0;
}

/* dst[di][0..ncols) := src[si][0..ncols) (same representation). */
static void lsim__copy_row(lsim__xm *dst, int di, const lsim__xm *src, int si,
                           int ncols) {
  if (dst->gmp) {
    for (int j = 0; j < ncols; j++)
      mpq_set(LSIM__Q(dst, di, j), LSIM__Q(src, si, j));
    return;
  }
  memcpy(&LSIM__N(dst, di, 0), &LSIM__N(src, si, 0),
         (size_t)ncols * sizeof(int64_t));
  dst->den[di] = src->den[si];
  if (src->amax > dst->amax)
    dst->amax = src->amax;
}

/* A scale as the int tier uses it: s = sp / sq, sq > 0. */
typedef struct lsim__scale {
  mpq_srcptr q;
  int64_t sp, sq;
  int fits;
} lsim__scale;

static void lsim__scale_set(lsim__scale *s, mpq_srcptr q) {
  s->q = q;
  s->fits = lsim__z_i64(mpq_numref(q), &s->sp) &&
            lsim__z_i64(mpq_denref(q), &s->sq);
}

/* m[i][0..ncols) *= s. */
static lsim_err lsim__scale_row(lsim__xm *m, int i, int ncols,
                                const lsim__scale *s, lsim_errbuf *eb) {
  if (m->gmp) {
    for (int j = 0; j < ncols; j++)
      mpq_mul(LSIM__Q(m, i, j), LSIM__Q(m, i, j), s->q);
    return 0;
  }
  if (!s->fits)
    return LSIM__OVERFLOW(eb, "a scale does not fit the int64 tier");
  int64_t *r = &LSIM__N(m, i, 0);
  int64_t amax = m->amax;
  for (int j = 0; j < ncols; j++) {
    if (__builtin_mul_overflow(r[j], s->sp, &r[j]) || r[j] == INT64_MIN)
      return LSIM__OVERFLOW(eb, "a scaled value overflows int64");
    int64_t a = lsim__abs64(r[j]);
    if (a > amax)
      amax = a;
  }
  m->amax = amax;
  if (__builtin_mul_overflow(m->den[i], s->sq, &m->den[i]))
    return LSIM__OVERFLOW(eb, "a scaled denominator overflows int64");
  return 0;
}

/* out[0..ncols) := m[i][0..ncols) as canonical rationals. */
static void lsim__row_to_q(mpq_t *out, const lsim__xm *m, int i, int ncols) {
  if (m->gmp) {
    for (int j = 0; j < ncols; j++)
      mpq_set(out[j], LSIM__Q(m, i, j));
    return;
  }
  const int64_t *r = &LSIM__N(m, i, 0);
  int64_t d = m->den[i];
  for (int j = 0; j < ncols; j++)
    lsim__q_from(out[j], r[j], d);
}

/* ======================================================================== */
/* the launch snapshot                                                      */
/* ======================================================================== */

/* One adapter as a launch uses it: backed by caller factors or by a slot. */
typedef struct lsim__fac {
  int id;
  int rank;                  /* logical rank */
  const lsim_qadapter *ad;   /* adapter-backed, or */
  const lsim_qslot *slot;    /* slot-backed (padded execution) */
  int used;                  /* some active row of the plan uses it */
  const lsim__xm *A, *B;     /* factors as launched (scale folded or not),
                             ** pointing into own[] */
  int apply;                 /* multiply the expand output by s */
  lsim__scale s;
  /* Storage: a single evaluation loads A and B into own[0], own[1];
  ** lsim__all_int keeps A, B, s*A, s*B and the zero-padded copies of each
  ** it launches the padded family with (own[LSIM__OWN_*]). */
  lsim__xm own[8];
} lsim__fac;

enum {
  LSIM__OWN_A = 0, LSIM__OWN_B, LSIM__OWN_SA, LSIM__OWN_SB,
  LSIM__OWN_PAD, /* + any of the four above: its padded copy */
  LSIM__OWN_N = 2 * LSIM__OWN_PAD
};

static void lsim__fac_free(lsim__fac *F) {
  for (int k = 0; k < LSIM__OWN_N; k++)
    lsim__xm_free(&F->own[k]);
  F->A = F->B = NULL;
}

typedef struct lsim__ctx {
  const lsim_rowplan *p;
  const lsim_qmat *Xq;
  int T, d_in, d_out;
  int path;
  int scale_mode;     /* adapter-backed: placement; slot-backed: launch */
  int gmp;            /* tier of the current attempt */
  int nactive, maxrank;
  int zwidth;         /* width of the family's shrink intermediate */
  lsim__fac *fac;     /* [nfac], ascending id */
  int nfac;
  int *row_fac;       /* [T] index into fac, -1 for a base row */
  unsigned char *mark; /* [T] coverage / claim bitmap */
  lsim__xm X, out;
  lsim__xm w[3];      /* the families' work matrices (lsim__xm_reuse) */
  int *iw;            /* the grouped family's row lists */
  size_t iw_cap;
  lsim_ref_trace *tr;
  int tr_next;
  lsim_errbuf *eb;
} lsim__ctx;

static void lsim__ctx_release(lsim__ctx *c) {
  for (int i = 0; i < c->nfac; i++)
    lsim__fac_free(&c->fac[i]);
  free(c->fac);
  free(c->row_fac);
  free(c->mark);
  lsim__xm_free(&c->X);
  lsim__xm_free(&c->out);
  for (int k = 0; k < 3; k++)
    lsim__xm_free(&c->w[k]);
  free(c->iw);
  memset(c, 0, sizeof *c);
}

void lsim_ref_trace_release(lsim_ref_trace *t) {
  if (!t)
    return;
  free(t->row);
  free(t->rank);
  lsim_qmat_clear(&t->Z);
  lsim_qmat_clear(&t->D);
  memset(t, 0, sizeof *t);
}

static int lsim__fac_cmp(const void *a, const void *b) {
  int x = ((const lsim__fac *)a)->id, y = ((const lsim__fac *)b)->id;
  return (x > y) - (x < y);
}

/* Index of adapter `id` in c->fac, or -1. */
static int lsim__find(const lsim__ctx *c, int id) {
  int lo = 0, hi = c->nfac;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (c->fac[mid].id < id)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < c->nfac && c->fac[lo].id == id ? lo : -1;
}

/* Sort c->fac by id and refuse duplicates. */
static lsim_err lsim__fac_sort(lsim__ctx *c) {
  if (c->nfac > 1)
    qsort(c->fac, (size_t)c->nfac, sizeof *c->fac, lsim__fac_cmp);
  for (int i = 1; i < c->nfac; i++)
    if (c->fac[i].id == c->fac[i - 1].id)
      return lsim_fail(c->eb, LSIM_E_REF_DUP_ADAPTER,
                       "adapter id %d is supplied twice", c->fac[i].id);
  return 0;
}

/*
** Resolve every packed row: its adapter must be supplied, with the logical
** rank the plan froze for the row.  Counts active rows and the widest rank.
*/
static lsim_err lsim__prep_rows(lsim__ctx *c) {
  const lsim_rowplan *p = c->p;
  int T = c->T;
  if (T > 0 && (!p->row_adapter || !p->row_rank))
    return lsim_fail(c->eb, LSIM_E_PLAN_ROW_COUNT,
                     "plan has %d rows but no row metadata", T);
  c->row_fac = malloc(lsim__cnt(T) * sizeof *c->row_fac);
  c->mark = calloc(lsim__cnt(T), 1);
  if (!c->row_fac || !c->mark)
    return lsim_fail(c->eb, LSIM_E_NOMEM, "out of memory for %d plan rows", T);
  c->nactive = c->maxrank = 0;
  for (int i = 0; i < T; i++) {
    int a = p->row_adapter[i];
    c->row_fac[i] = -1;
    if (a == LSIM_BASE)
      continue;
    int f = lsim__find(c, a);
    if (f < 0)
      return lsim_fail(c->eb, LSIM_E_REF_UNKNOWN_ADAPTER,
                       "row %d uses adapter %d, which was not supplied", i, a);
    if (p->row_rank[i] != c->fac[f].rank)
      return lsim_fail(c->eb, LSIM_E_REF_RANK,
                       "row %d: plan rank %d, adapter %d has rank %d", i,
                       p->row_rank[i], a, c->fac[f].rank);
    c->row_fac[i] = f;
    c->fac[f].used = 1;
    c->nactive++;
    if (c->fac[f].rank > c->maxrank)
      c->maxrank = c->fac[f].rank;
  }
  return 0;
}

/* ---- coverage simulation (the `check` step) ----------------------------- */

static void lsim__cover_begin(lsim__ctx *c) {
  if (c->T)
    memset(c->mark, 0, (size_t)c->T);
}

/*
** The family is about to route packed row `row` through adapter `want`
** (-2: any adapter; the caller checks identity itself).  mismatch is the
** E_PLAN_* code for an adapter disagreement.
*/
static lsim_err lsim__cover_row(lsim__ctx *c, int row, int want, int mismatch,
                                const char *via) {
  if (row < 0 || row >= c->T)
    return lsim_fail(c->eb, LSIM_E_PLAN_ROW_BOUNDS,
                     "%s: row index %d outside [0, %d)", via, row, c->T);
  int a = c->p->row_adapter[row];
  if (a == LSIM_BASE)
    return lsim_fail(c->eb, LSIM_E_BASE_DELTA,
                     "%s: base-only row %d is routed through adapter %d", via,
                     row, want);
  if (want != -2 && a != want)
    return lsim_fail(c->eb, mismatch,
                     "%s: row %d of adapter %d is routed through adapter %d",
                     via, row, a, want);
  if (c->mark[row])
    return lsim_fail(c->eb, LSIM_E_SCATTER, "%s: row %d is reached twice",
                     via, row);
  c->mark[row] = 1;
  return 0;
}

static lsim_err lsim__cover_end(lsim__ctx *c, const char *via) {
  for (int i = 0; i < c->T; i++)
    if (c->row_fac[i] >= 0 && !c->mark[i])
      return lsim_fail(c->eb, LSIM_E_SCATTER,
                       "%s: active row %d (adapter %d) is never reached", via,
                       i, c->p->row_adapter[i]);
  return 0;
}

/* Offsets vector o[0..n] must run 0 = o[0] <= ... <= o[n] = total. */
static lsim_err lsim__check_offsets(lsim__ctx *c, const int *o, int n,
                                    int total, int code, const char *what) {
  if (n < 0 || (!o && (n > 0 || total > 0)))
    return lsim_fail(c->eb, code, "%s: missing or negative count %d", what, n);
  if (!o)
    return 0;
  if (o[0] != 0 || o[n] != total)
    return lsim_fail(c->eb, code, "%s: offsets run %d..%d, expected 0..%d",
                     what, o[0], o[n], total);
  for (int t = 0; t < n; t++)
    if (o[t] > o[t + 1])
      return lsim_fail(c->eb, code, "%s: offsets decrease at %d (%d > %d)",
                       what, t, o[t], o[t + 1]);
  return 0;
}

static lsim_err lsim__check_sgmv(lsim__ctx *c) {
  const lsim_rowplan *p = c->p;
  lsim_err rc;
  if (p->nactive != c->nactive)
    return lsim_fail(c->eb, LSIM_E_SCATTER,
                     "sgmv: perm has %d rows, the plan has %d active rows",
                     p->nactive, c->nactive);
  if (c->nactive > 0 && !p->perm)
    return lsim_fail(c->eb, LSIM_E_SCATTER, "sgmv: perm is missing");
  if ((rc = lsim__check_offsets(c, p->seg_offsets, p->nseg, p->nactive,
                                LSIM_E_PLAN_OFFSETS, "sgmv segments")))
    return rc;
  if (p->nseg > 0 && (!p->seg_adapter || !p->seg_rank))
    return lsim_fail(c->eb, LSIM_E_PLAN_OFFSETS,
                     "sgmv: %d segments but no adapter or rank table", p->nseg);
  lsim__cover_begin(c);
  for (int t = 0; t < p->nseg; t++) {
    int a = p->seg_adapter[t];
    int f = lsim__find(c, a);
    if (a == LSIM_BASE)
      return lsim_fail(c->eb, LSIM_E_BASE_DELTA,
                       "sgmv: segment %d is the base-only path", t);
    if (f < 0)
      return lsim_fail(c->eb, LSIM_E_REF_UNKNOWN_ADAPTER,
                       "sgmv: segment %d names adapter %d, which was not "
                       "supplied",
                       t, a);
    if (p->seg_rank[t] != c->fac[f].rank)
      return lsim_fail(c->eb, LSIM_E_REF_RANK,
                       "sgmv: segment %d has rank %d, adapter %d has rank %d",
                       t, p->seg_rank[t], a, c->fac[f].rank);
    for (int u = p->seg_offsets[t]; u < p->seg_offsets[t + 1]; u++)
      if ((rc = lsim__cover_row(c, p->perm[u], a, LSIM_E_PLAN_SEG_ADAPTER,
                                "sgmv")))
        return rc;
  }
  return lsim__cover_end(c, "sgmv");
}

static lsim_err lsim__check_indexed(lsim__ctx *c, const char *via) {
  const lsim_rowplan *p = c->p;
  lsim_err rc;
  if (c->T > 0 && !p->sorted_rows)
    return lsim_fail(c->eb, LSIM_E_PLAN_INDEXED, "%s: sorted_rows is missing",
                     via);
  if ((rc = lsim__check_offsets(c, p->id_starts, p->nids, c->T,
                                LSIM_E_PLAN_INDEXED, via)))
    return rc;
  if (p->nids > 0 && !p->active_ids)
    return lsim_fail(c->eb, LSIM_E_PLAN_INDEXED, "%s: active_ids is missing",
                     via);
  lsim__cover_begin(c);
  for (int g = 0; g < p->nids; g++) {
    int a = p->active_ids[g];
    if (a == LSIM_BASE) {
      /* The sentinel group is skipped by the kernel; its rows must be
      ** base rows, which keep their zero delta. */
      for (int k = p->id_starts[g]; k < p->id_starts[g + 1]; k++) {
        int row = p->sorted_rows[k];
        if (row < 0 || row >= c->T)
          return lsim_fail(c->eb, LSIM_E_PLAN_ROW_BOUNDS,
                           "%s: row index %d outside [0, %d)", via, row, c->T);
        if (c->row_fac[row] >= 0)
          return lsim_fail(c->eb, LSIM_E_SCATTER,
                           "%s: active row %d sits in the base sentinel group "
                           "and would get no delta",
                           via, row);
      }
      continue;
    }
    if (lsim__find(c, a) < 0)
      return lsim_fail(c->eb, LSIM_E_REF_UNKNOWN_ADAPTER,
                       "%s: group %d names adapter %d, which was not supplied",
                       via, g, a);
    for (int k = p->id_starts[g]; k < p->id_starts[g + 1]; k++)
      if ((rc = lsim__cover_row(c, p->sorted_rows[k], a, LSIM_E_PLAN_INDEXED,
                                via)))
        return rc;
  }
  return lsim__cover_end(c, via);
}

static lsim_err lsim__check_bucketed(lsim__ctx *c) {
  const lsim_rowplan *p = c->p;
  lsim_err rc;
  if ((rc = lsim__check_offsets(c, p->bucket_offsets, p->nbuckets, c->nactive,
                                LSIM_E_PLAN_BUCKET, "bucketed")))
    return rc;
  if (c->nactive > 0 && (!p->bucket_rows || !p->bucket_rank))
    return lsim_fail(c->eb, LSIM_E_PLAN_BUCKET, "bucketed: buckets missing");
  lsim__cover_begin(c);
  for (int b = 0; b < p->nbuckets; b++) {
    for (int k = p->bucket_offsets[b]; k < p->bucket_offsets[b + 1]; k++) {
      int row = p->bucket_rows[k];
      if ((rc = lsim__cover_row(c, row, -2, 0, "bucketed")))
        return rc;
      int f = c->row_fac[row];
      if (c->fac[f].rank != p->bucket_rank[b])
        return lsim_fail(c->eb, LSIM_E_PLAN_BUCKET,
                         "bucketed: row %d (adapter %d, rank %d) sits in the "
                         "rank-%d bucket",
                         row, c->fac[f].id, c->fac[f].rank, p->bucket_rank[b]);
    }
  }
  return lsim__cover_end(c, "bucketed");
}

/* ---- compute helpers ---------------------------------------------------- */

/* Take packed row `row` for writing (once, never a base row). */
static lsim_err lsim__claim(lsim__ctx *c, int row) {
  if (row < 0 || row >= c->T || c->row_fac[row] < 0 || c->mark[row])
    return LSIM_BUG(c->eb, "a checked plan routed a row twice or to base");
  c->mark[row] = 1;
  return 0;
}

static lsim_err lsim__claims_done(lsim__ctx *c) {
  for (int i = 0; i < c->T; i++)
    if (c->row_fac[i] >= 0 && !c->mark[i])
      return LSIM_BUG(c->eb, "a checked plan left an active row unwritten");
  return 0;
}

static lsim_err lsim__trace_begin(lsim__ctx *c) {
  lsim_ref_trace *t = c->tr;
  if (!t)
    return 0;
  lsim_ref_trace_release(t);
  t->path = c->path;
  t->scale_mode = c->scale_mode;
  t->num = c->gmp ? LSIM_NUM_GMP : LSIM_NUM_INT64;
  t->n = c->nactive;
  t->row = malloc(lsim__cnt(t->n) * sizeof *t->row);
  t->rank = malloc(lsim__cnt(t->n) * sizeof *t->rank);
  if (!t->row || !t->rank)
    return lsim_fail(c->eb, LSIM_E_NOMEM, "out of memory for a trace");
  lsim_err rc = lsim_qmat_init(&t->Z, t->n, c->zwidth, c->eb);
  if (!rc)
    rc = lsim_qmat_init(&t->D, t->n, c->d_out, c->eb);
  c->tr_next = 0;
  return rc;
}

/* Record intermediate row u: packed row `row`, width `w`, Z row zi of Z,
** D row di of D. */
static void lsim__trace_put(lsim__ctx *c, int row, int w, const lsim__xm *Z,
                            int zi, const lsim__xm *D, int di) {
  lsim_ref_trace *t = c->tr;
  if (!t || c->tr_next >= t->n)
    return;
  int u = c->tr_next++;
  t->row[u] = row;
  t->rank[u] = w;
  if (w > 0)
    lsim__row_to_q(&LSIM_QAT(&t->Z, u, 0), Z, zi, w);
  if (c->d_out > 0)
    lsim__row_to_q(&LSIM_QAT(&t->D, u, 0), D, di, c->d_out);
}

/* Apply the launch's scale to rows [r0, r0 + n) of D when it is passed. */
static lsim_err lsim__scale_rows(lsim__ctx *c, lsim__xm *D, int r0, int n,
                                 const lsim__fac *f) {
  if (!f->apply)
    return 0;
  for (int i = 0; i < n; i++) {
    lsim_err rc = lsim__scale_row(D, r0 + i, c->d_out, &f->s, c->eb);
    if (rc)
      return rc;
  }
  return 0;
}

/* ======================================================================== */
/* the six families                                                         */
/* ======================================================================== */

/* per_row: one row at a time -- shrink x A^T, expand z B^T, scale, store. */
static lsim_err lsim__fam_per_row(lsim__ctx *c) {
  lsim__xm *z = &c->w[0], *d = &c->w[1];
  lsim_err rc;
  if ((rc = lsim__xm_reuse(z, 1, c->maxrank, c->gmp, c->eb)) ||
      (rc = lsim__xm_reuse(d, 1, c->d_out, c->gmp, c->eb)))
    return rc;
  for (int i = 0; i < c->T && !rc; i++) {
    int f = c->row_fac[i];
    if (f < 0)
      continue; /* a base row: its delta stays exactly zero */
    const lsim__fac *F = &c->fac[f];
    if ((rc = lsim__claim(c, i)) ||
        (rc = lsim__mul_t(z, 0, &c->X, i, 1, F->A, c->eb)) ||
        (rc = lsim__mul_t(d, 0, z, 0, 1, F->B, c->eb)) ||
        (rc = lsim__scale_rows(c, d, 0, 1, F)))
      break;
    lsim__trace_put(c, i, F->A->rows, z, 0, d, 0);
    lsim__copy_row(&c->out, i, d, 0, c->d_out);
  }
  return rc;
}

/*
** grouped: a host loop over adapters (ascending id).  For each, find its
** rows in packed order, gather them into a sub-batch, run one block shrink
** and one block expand, scale, and scatter the sub-batch back.
*/
static lsim_err lsim__fam_grouped(lsim__ctx *c) {
  lsim_err rc = 0;
  /* every factor's rows in increasing order, bucketed in one counting pass
  ** (a scan of all rows per factor made a batch quadratic) */
  size_t need = lsim__cnt(c->T) + (size_t)c->nfac + 2;
  if (need > c->iw_cap) {
    int *nw = realloc(c->iw, need * sizeof *nw);
    if (!nw)
      return lsim_fail(c->eb, LSIM_E_NOMEM, "out of memory for a row list");
    c->iw = nw;
    c->iw_cap = need;
  }
  int *all = c->iw, *start = c->iw + lsim__cnt(c->T);
  memset(start, 0, ((size_t)c->nfac + 2) * sizeof *start);
  for (int i = 0; i < c->T; i++)
    if (c->row_fac[i] >= 0 && c->row_fac[i] < c->nfac)
      start[c->row_fac[i] + 2]++;
  for (int f = 0; f < c->nfac; f++)
    start[f + 2] += start[f + 1];
  for (int i = 0; i < c->T; i++)
    if (c->row_fac[i] >= 0 && c->row_fac[i] < c->nfac)
      all[start[c->row_fac[i] + 1]++] = i;
  for (int f = 0; f < c->nfac && !rc; f++) {
    const lsim__fac *F = &c->fac[f];
    int *rows = all + start[f];
    int na = start[f + 1] - start[f];
    if (na == 0)
      continue;
    lsim__xm *Xa = &c->w[0], *Ua = &c->w[1], *Da = &c->w[2];
    if (!(rc = lsim__xm_reuse(Xa, na, c->d_in, c->gmp, c->eb)) &&
        !(rc = lsim__xm_reuse(Ua, na, F->A->rows, c->gmp, c->eb)) &&
        !(rc = lsim__xm_reuse(Da, na, c->d_out, c->gmp, c->eb))) {
      for (int j = 0; j < na; j++)
        lsim__copy_row(Xa, j, &c->X, rows[j], c->d_in);
      if (!(rc = lsim__mul_t(Ua, 0, Xa, 0, na, F->A, c->eb)) &&
          !(rc = lsim__mul_t(Da, 0, Ua, 0, na, F->B, c->eb)) &&
          !(rc = lsim__scale_rows(c, Da, 0, na, F))) {
        for (int j = 0; j < na && !rc; j++) {
          if ((rc = lsim__claim(c, rows[j])))
            break;
          lsim__trace_put(c, rows[j], F->A->rows, Ua, j, Da, j);
          lsim__copy_row(&c->out, rows[j], Da, j, c->d_out);
        }
      }
    }
  }
  return rc;
}

/*
** sgmv: the contiguous realization.  Gather X through perm into X_grouped,
** one shrink launch over all segments (Z), one expand launch over all
** segments (D, scale applied per segment), then scatter D through perm.
*/
static lsim_err lsim__fam_sgmv(lsim__ctx *c) {
  const lsim_rowplan *p = c->p;
  int na = p->nactive;
  lsim__xm *Xg = &c->w[0], *Z = &c->w[1], *D = &c->w[2];
  lsim_err rc;
  if ((rc = lsim__xm_reuse(Xg, na, c->d_in, c->gmp, c->eb)) ||
      (rc = lsim__xm_reuse(Z, na, c->maxrank, c->gmp, c->eb)) ||
      (rc = lsim__xm_reuse(D, na, c->d_out, c->gmp, c->eb)))
    return rc;
  for (int u = 0; u < na; u++) /* gather */
    lsim__copy_row(Xg, u, &c->X, p->perm[u], c->d_in);
  for (int t = 0; t < p->nseg; t++) { /* shrink launch */
    int lo = p->seg_offsets[t], hi = p->seg_offsets[t + 1];
    const lsim__fac *F = &c->fac[lsim__find(c, p->seg_adapter[t])];
    if ((rc = lsim__mul_t(Z, lo, Xg, lo, hi - lo, F->A, c->eb)))
      return rc;
  }
  for (int t = 0; t < p->nseg; t++) { /* expand launch */
    int lo = p->seg_offsets[t], hi = p->seg_offsets[t + 1];
    const lsim__fac *F = &c->fac[lsim__find(c, p->seg_adapter[t])];
    if ((rc = lsim__mul_t(D, lo, Z, lo, hi - lo, F->B, c->eb)) ||
        (rc = lsim__scale_rows(c, D, lo, hi - lo, F)))
      return rc;
    for (int u = lo; u < hi; u++)
      lsim__trace_put(c, p->perm[u], F->A->rows, Z, u, D, u);
  }
  for (int u = 0; u < na; u++) { /* scatter */
    if ((rc = lsim__claim(c, p->perm[u])))
      return rc;
    lsim__copy_row(&c->out, p->perm[u], D, u, c->d_out);
  }
  return 0;
}

/*
** indexed (and padded, with slot factors of width R): rows are addressed
** in place through sorted_rows / id_starts; the -1 group is skipped.  The
** shrink launch writes a row-addressed intermediate Zb[T][width]; the expand
** launch reads it and writes each delta row in place.
*/
static lsim_err lsim__fam_indexed(lsim__ctx *c) {
  const lsim_rowplan *p = c->p;
  lsim__xm *Zb = &c->w[0];
  lsim_err rc = lsim__xm_reuse(Zb, c->T, c->zwidth, c->gmp, c->eb);
  if (rc)
    return rc;
  for (int g = 0; g < p->nids && !rc; g++) { /* shrink launch */
    if (p->active_ids[g] == LSIM_BASE)
      continue; /* the sentinel slice exits early */
    const lsim__fac *F = &c->fac[lsim__find(c, p->active_ids[g])];
    for (int k = p->id_starts[g]; k < p->id_starts[g + 1] && !rc; k++) {
      int row = p->sorted_rows[k];
      rc = lsim__mul_t(Zb, row, &c->X, row, 1, F->A, c->eb);
    }
  }
  for (int g = 0; g < p->nids && !rc; g++) { /* expand launch */
    if (p->active_ids[g] == LSIM_BASE)
      continue;
    const lsim__fac *F = &c->fac[lsim__find(c, p->active_ids[g])];
    for (int k = p->id_starts[g]; k < p->id_starts[g + 1] && !rc; k++) {
      int row = p->sorted_rows[k];
      if ((rc = lsim__claim(c, row)) ||
          (rc = lsim__mul_t(&c->out, row, Zb, row, 1, F->B, c->eb)) ||
          (rc = lsim__scale_rows(c, &c->out, row, 1, F)))
        break;
      lsim__trace_put(c, row, F->A->rows, Zb, row, &c->out, row);
    }
  }
  return rc;
}

/*
** bucketed: one pass per rank bucket.  Gather the bucket's rows, shrink each
** at the bucket's one fixed rank through its own adapter's factor pointer,
** expand, scale, scatter.
*/
static lsim_err lsim__fam_bucketed(lsim__ctx *c) {
  const lsim_rowplan *p = c->p;
  lsim_err rc = 0;
  for (int b = 0; b < p->nbuckets && !rc; b++) {
    int lo = p->bucket_offsets[b], nb = p->bucket_offsets[b + 1] - lo;
    int r = p->bucket_rank[b];
    const int *rows = p->bucket_rows + lo;
    if (nb == 0)
      continue;
    lsim__xm *Xb = &c->w[0], *Zb = &c->w[1], *Db = &c->w[2];
    if (!(rc = lsim__xm_reuse(Xb, nb, c->d_in, c->gmp, c->eb)) &&
        !(rc = lsim__xm_reuse(Zb, nb, r, c->gmp, c->eb)) &&
        !(rc = lsim__xm_reuse(Db, nb, c->d_out, c->gmp, c->eb))) {
      for (int j = 0; j < nb; j++) /* gather */
        lsim__copy_row(Xb, j, &c->X, rows[j], c->d_in);
      for (int j = 0; j < nb && !rc; j++) /* shrink at rank r */
        rc = lsim__mul_t(Zb, j, Xb, j, 1, c->fac[c->row_fac[rows[j]]].A,
                         c->eb);
      for (int j = 0; j < nb && !rc; j++) { /* expand at rank r */
        const lsim__fac *F = &c->fac[c->row_fac[rows[j]]];
        if (!(rc = lsim__mul_t(Db, j, Zb, j, 1, F->B, c->eb)))
          rc = lsim__scale_rows(c, Db, j, 1, F);
      }
      for (int j = 0; j < nb && !rc; j++) { /* scatter */
        if ((rc = lsim__claim(c, rows[j])))
          break;
        lsim__trace_put(c, rows[j], r, Zb, j, Db, j);
        lsim__copy_row(&c->out, rows[j], Db, j, c->d_out);
      }
    }
  }
  return rc;
}

/* ======================================================================== */
/* evaluation driver                                                        */
/* ======================================================================== */

static void lsim__numerics_free(lsim__ctx *c) {
  for (int i = 0; i < c->nfac; i++)
    lsim__fac_free(&c->fac[i]);
  lsim__xm_free(&c->X);
  lsim__xm_free(&c->out);
  for (int k = 0; k < 3; k++)
    lsim__xm_free(&c->w[k]);
}

/* Load the factors every used adapter launches with, in the current tier. */
static lsim_err lsim__load_factors(lsim__ctx *c) {
  for (int i = 0; i < c->nfac; i++) {
    lsim__fac *F = &c->fac[i];
    lsim_err rc;
    if (!F->used)
      continue;
    F->A = &F->own[LSIM__OWN_A];
    F->B = &F->own[LSIM__OWN_B];
    if (F->ad) {
      mpq_srcptr s = F->ad->scale;
      int m = c->scale_mode;
      if ((rc = lsim__xm_load(&F->own[LSIM__OWN_A], &F->ad->A, 1,
                              m == LSIM_SCALE_FOLD_A ? s : NULL, c->gmp,
                              c->eb)) ||
          (rc = lsim__xm_load(&F->own[LSIM__OWN_B], &F->ad->B, 1,
                              m == LSIM_SCALE_FOLD_B ? s : NULL, c->gmp,
                              c->eb)))
        return rc;
      F->apply = m == LSIM_SCALE_PASSED;
      lsim__scale_set(&F->s, s);
    } else {
      if ((rc = lsim__xm_load(&F->own[LSIM__OWN_A], &F->slot->A, 1, NULL,
                              c->gmp, c->eb)) ||
          (rc = lsim__xm_load(&F->own[LSIM__OWN_B], &F->slot->B, 1, NULL,
                              c->gmp, c->eb)))
        return rc;
      F->apply = c->scale_mode == LSIM_SCALE_PASSED;
      lsim__scale_set(&F->s, F->slot->scale);
    }
    if ((rc = lsim__xm_t(&F->own[LSIM__OWN_A], c->eb)) ||
        (rc = lsim__xm_t(&F->own[LSIM__OWN_B], c->eb)))
      return rc;
  }
  return 0;
}

/* Test-only fault (cpu_ref.h, lsim_ref__fault): the family and placement
** whose result is made wrong, -1 for none. */
static int lsim__fault_path = -1, lsim__fault_mode = -1;
/* Test-only: batches lsim__all_int answered (lsim_ref__one_pass_count). */
static long lsim__one_pass_n;

void lsim_ref__fault(int path, int scale_mode) {
  lsim__fault_path = path;
  lsim__fault_mode = scale_mode;
}

long lsim_ref__one_pass_count(void) { return lsim__one_pass_n; }

/* out[row][0] += 1, the test-only fault's wrong value. */
static void lsim__fault_apply(lsim__ctx *c) {
  for (int i = 0; i < c->T; i++) {
    if (c->row_fac[i] < 0 || c->d_out < 1)
      continue;
    if (c->out.gmp) {
      mpq_ptr q = LSIM__Q(&c->out, i, 0);
      mpz_add(mpq_numref(q), mpq_numref(q), mpq_denref(q));
    } else {
      LSIM__N(&c->out, i, 0) += c->out.den[i];
    }
    return;
  }
}

/* Run the current family into c->out (zeroed, of c->out's tier). */
static lsim_err lsim__run_family(lsim__ctx *c) {
  lsim_err rc;
  if (c->T)
    memset(c->mark, 0, (size_t)c->T);
  switch (c->path) {
  case LSIM_REF_PER_ROW:
    rc = lsim__fam_per_row(c);
    break;
  case LSIM_REF_GROUPED:
    rc = lsim__fam_grouped(c);
    break;
  case LSIM_REF_SGMV:
    rc = lsim__fam_sgmv(c);
    break;
  case LSIM_REF_INDEXED:
  case LSIM_REF_PADDED:
    rc = lsim__fam_indexed(c);
    break;
  case LSIM_REF_BUCKETED:
    rc = lsim__fam_bucketed(c);
    break;
  default:
    rc = LSIM_BUG(c->eb, "unknown path");
  }
  if (!rc && c->path == lsim__fault_path && c->scale_mode == lsim__fault_mode)
    lsim__fault_apply(c);
  return rc ? rc : lsim__claims_done(c);
}

static lsim_err lsim__compute(lsim__ctx *c) {
  lsim_err rc;
  lsim__numerics_free(c);
  if ((rc = lsim__load_factors(c)) ||
      (rc = lsim__xm_load(&c->X, c->Xq, 0, NULL, c->gmp, c->eb)) ||
      (rc = lsim__xm_init(&c->out, c->T, c->d_out, c->gmp, c->eb)) ||
      (rc = lsim__trace_begin(c)))
    return rc;
  return lsim__run_family(c);
}

/* Compute in the requested tier (falling back to gmp under AUTO) and write
** the canonical result into delta (already shaped [T][d_out]). */
static lsim_err lsim__run_tiers(lsim__ctx *c, int num_mode, int *num_used,
                                lsim_qmat *delta) {
  int gmp = num_mode == LSIM_NUM_GMP;
  lsim_err rc;
  for (;;) {
    c->gmp = gmp;
    rc = lsim__compute(c);
    if (rc == LSIM_E_OVERFLOW && !gmp && num_mode == LSIM_NUM_AUTO) {
      gmp = 1;
      continue;
    }
    break;
  }
  if (!rc) {
    for (int i = 0; i < c->T; i++) {
      if (c->d_out > 0)
        lsim__row_to_q(&LSIM_QAT(delta, i, 0), &c->out, i, c->d_out);
      if (c->row_fac[i] < 0)
        for (int j = 0; j < c->d_out; j++)
          if (mpq_sgn(LSIM_QAT(delta, i, j)) != 0)
            return lsim_fail(c->eb, LSIM_E_BASE_DELTA,
                             "base-only row %d received a nonzero delta", i);
    }
    if (num_used)
      *num_used = gmp ? LSIM_NUM_GMP : LSIM_NUM_INT64;
  }
  lsim__numerics_free(c);
  return rc;
}

/* d_out for an output: delta's own shape when initialised, else guessed
** from a B factor (orientation is checked afterwards). */
static int lsim__guess_dout(const lsim_qmat *delta, const lsim_qmat *B,
                            int rank) {
  if (!(delta->rows == 0 && delta->cols == 0 && delta->v == NULL))
    return delta->cols;
  if (!B)
    return 0;
  if (B->cols == rank || B->rows != rank)
    return B->rows;
  return B->cols;
}

static lsim_err lsim__args(const lsim_rowplan *p, const lsim_qmat *X,
                           int nitems, const void *items, int path,
                           int scale_mode, int num_mode, lsim_qmat *delta,
                           lsim_errbuf *eb) {
  if (!p || !X || !delta || nitems < 0 || (nitems > 0 && !items))
    return lsim_fail(eb, LSIM_E_USAGE, "missing plan, input or output");
  if (path < 0 || path >= LSIM_REF__COUNT)
    return lsim_fail(eb, LSIM_E_USAGE, "unknown execution path %d", path);
  if (scale_mode < 0 || scale_mode >= LSIM_SCALE__COUNT)
    return lsim_fail(eb, LSIM_E_USAGE, "unknown scale mode %d", scale_mode);
  if (num_mode < 0 || num_mode >= LSIM_NUM__COUNT)
    return lsim_fail(eb, LSIM_E_USAGE, "unknown numeric tier %d", num_mode);
  if (!lsim__qmat_sane(X))
    return lsim_fail(eb, LSIM_E_SHAPE, "input matrix is not initialised");
  if (p->T < 0 || X->rows != p->T)
    return lsim_fail(eb, LSIM_E_SHAPE, "input has %d rows, the plan has %d",
                     X->rows, p->T);
  return 0;
}

static lsim_err lsim__delta_adapters(const lsim_rowplan *p, const lsim_qmat *X,
                                     const lsim_qadapter *ad, int nad,
                                     int path, int scale_mode, int num_mode,
                                     lsim_ref_trace *trace, int *num_used,
                                     lsim_qmat *delta, lsim_errbuf *eb);
static lsim_err lsim__delta_slots(const lsim_rowplan *p, const lsim_qmat *X,
                                  const lsim_qslot *slots, int nslots,
                                  int launch, int num_mode,
                                  lsim_ref_trace *trace, int *num_used,
                                  lsim_qmat *delta, lsim_errbuf *eb);

lsim_err lsim_ref_delta_ex(const lsim_rowplan *p, const lsim_qmat *X,
                           const lsim_qadapter *ad, int nad, int path,
                           int scale_mode, int num_mode, lsim_ref_trace *trace,
                           int *num_used, lsim_qmat *delta, lsim_errbuf *eb) {
  lsim_err rc = lsim__args(p, X, nad, ad, path, scale_mode, num_mode, delta,
                           eb);
  if (rc)
    return rc;
  return lsim__delta_adapters(p, X, ad, nad, path, scale_mode, num_mode, trace,
                              num_used, delta, eb);
}

lsim_err lsim_ref_delta(const lsim_rowplan *p, const lsim_qmat *X,
                        const lsim_qadapter *ad, int nad, int path,
                        int scale_mode, lsim_qmat *delta, lsim_errbuf *eb) {
  return lsim_ref_delta_ex(p, X, ad, nad, path, scale_mode, LSIM_NUM_AUTO,
                           NULL, NULL, delta, eb);
}

static lsim_err lsim__delta_adapters(const lsim_rowplan *p, const lsim_qmat *X,
                                     const lsim_qadapter *ad, int nad,
                                     int path, int scale_mode, int num_mode,
                                     lsim_ref_trace *trace, int *num_used,
                                     lsim_qmat *delta, lsim_errbuf *eb) {
  lsim__ctx c;
  memset(&c, 0, sizeof c);
  c.p = p;
  c.Xq = X;
  c.T = p->T;
  c.d_in = X->cols;
  c.path = path;
  c.scale_mode = scale_mode;
  c.tr = trace;
  c.eb = eb;
  c.d_out = lsim__guess_dout(delta, nad ? &ad[0].B : NULL,
                             nad ? ad[0].rank : 0);
  int fresh = 0;
  lsim_qslot *slots = NULL;
  int nslots = 0;
  lsim_err rc = 0;
  c.fac = calloc(lsim__cnt(nad), sizeof *c.fac);
  if (!c.fac) {
    rc = lsim_fail(eb, LSIM_E_NOMEM, "out of memory for %d adapters", nad);
    goto out;
  }
  for (int i = 0; i < nad; i++) {
    if (ad[i].id < 0) {
      rc = lsim_fail(eb, LSIM_E_USAGE, "adapter id %d is negative", ad[i].id);
      goto out;
    }
    if ((rc = lsim_qadapter_check(&ad[i], c.d_in, c.d_out, eb)))
      goto out;
    c.fac[i].id = ad[i].id;
    c.fac[i].rank = ad[i].rank;
    c.fac[i].ad = &ad[i];
  }
  c.nfac = nad;
  if ((rc = lsim__fac_sort(&c)) || (rc = lsim__prep_rows(&c)))
    goto out;
  if ((rc = lsim__out_shape(delta, c.T, c.d_out, "delta", &fresh, eb)))
    goto out;
  if (path == LSIM_REF_PADDED) {
    /* Make resident slots at the plan's physical rank for every adapter
    ** the plan uses, with the scale placed as asked, and launch them with
    ** the matching scale placement. */
    int R = p->phys_rank;
    slots = calloc(lsim__cnt(c.nfac), sizeof *slots);
    if (!slots) {
      rc = lsim_fail(eb, LSIM_E_NOMEM, "out of memory for slots");
      goto out;
    }
    for (int i = 0; i < c.nfac; i++) {
      if (!c.fac[i].used)
        continue;
      if ((rc = lsim_qslot_init(&slots[nslots], R, c.d_in, c.d_out, eb)))
        goto out;
      nslots++;
      if ((rc = lsim_qslot_load(&slots[nslots - 1], c.fac[i].ad, scale_mode,
                                eb)))
        goto out;
    }
    rc = lsim__delta_slots(p, X, slots, nslots, scale_mode, num_mode, trace,
                           num_used, delta, eb);
    goto out;
  }
  switch (path) {
  case LSIM_REF_SGMV:
    rc = lsim__check_sgmv(&c);
    break;
  case LSIM_REF_INDEXED:
    rc = lsim__check_indexed(&c, "indexed");
    break;
  case LSIM_REF_BUCKETED:
    rc = lsim__check_bucketed(&c);
    break;
  default: /* per_row and grouped read only row_adapter, checked above */
    break;
  }
  if (rc)
    goto out;
  c.zwidth = c.maxrank;
  rc = lsim__run_tiers(&c, num_mode, num_used, delta);
out:
  for (int i = 0; i < nslots; i++)
    lsim_qslot_release(&slots[i]);
  free(slots);
  lsim__ctx_release(&c);
  if (rc && fresh)
    lsim_qmat_clear(delta);
  if (rc && trace)
    lsim_ref_trace_release(trace);
  return rc;
}

/* ======================================================================== */
/* zero-padded physical slots                                               */
/* ======================================================================== */

lsim_err lsim_qslot_init(lsim_qslot *s, int R, int d_in, int d_out,
                         lsim_errbuf *eb) {
  memset(s, 0, sizeof *s);
  mpq_init(s->scale);
  mpq_set_ui(s->scale, 1, 1);
  s->adapter = LSIM_BASE;
  s->placement = LSIM_SCALE_PASSED;
  if (R < 0 || d_in < 0 || d_out < 0) {
    lsim_qslot_release(s);
    return lsim_fail(eb, LSIM_E_SHAPE, "slot shape R=%d d_in=%d d_out=%d", R,
                     d_in, d_out);
  }
  s->R = R;
  s->d_in = d_in;
  s->d_out = d_out;
  lsim_err rc = lsim_qmat_init(&s->A, R, d_in, eb);
  if (!rc)
    rc = lsim_qmat_init(&s->B, d_out, R, eb);
  if (rc)
    lsim_qslot_release(s);
  return rc;
}

void lsim_qslot_release(lsim_qslot *s) {
  mpq_clear(s->scale);
  lsim_qmat_clear(&s->A);
  lsim_qmat_clear(&s->B);
  memset(s, 0, sizeof *s);
}

void lsim_qslot_reset(lsim_qslot *s) {
  size_t na = (size_t)s->A.rows * (size_t)s->A.cols;
  size_t nb = (size_t)s->B.rows * (size_t)s->B.cols;
  for (size_t k = 0; k < na; k++)
    mpq_set_ui(s->A.v[k], 0, 1);
  for (size_t k = 0; k < nb; k++)
    mpq_set_ui(s->B.v[k], 0, 1);
  s->adapter = LSIM_BASE;
  s->rank = 0;
  s->placement = LSIM_SCALE_PASSED;
  mpq_set_ui(s->scale, 1, 1);
}

lsim_err lsim_qslot_load(lsim_qslot *s, const lsim_qadapter *a, int placement,
                         lsim_errbuf *eb) {
  lsim_qslot_reset(s);
  if (placement < 0 || placement >= LSIM_SCALE__COUNT)
    return lsim_fail(eb, LSIM_E_USAGE, "unknown scale placement %d",
                     placement);
  lsim_err rc = lsim_qadapter_check(a, s->d_in, s->d_out, eb);
  if (rc)
    return rc;
  if (a->rank > s->R)
    return lsim_fail(eb, LSIM_E_SLOT_RANK,
                     "adapter %d has rank %d, above the slot rank R=%d", a->id,
                     a->rank, s->R);
  int r = a->rank;
  for (int i = 0; i < r; i++)
    for (int j = 0; j < s->d_in; j++) {
      if (placement == LSIM_SCALE_FOLD_A)
        mpq_mul(LSIM_QAT(&s->A, i, j), LSIM_QAT(&a->A, i, j), a->scale);
      else
        mpq_set(LSIM_QAT(&s->A, i, j), LSIM_QAT(&a->A, i, j));
    }
  for (int o = 0; o < s->d_out; o++)
    for (int k = 0; k < r; k++) {
      if (placement == LSIM_SCALE_FOLD_B)
        mpq_mul(LSIM_QAT(&s->B, o, k), LSIM_QAT(&a->B, o, k), a->scale);
      else
        mpq_set(LSIM_QAT(&s->B, o, k), LSIM_QAT(&a->B, o, k));
    }
  s->adapter = a->id;
  s->rank = r;
  s->placement = placement;
  mpq_set(s->scale, a->scale);
  return 0;
}

lsim_err lsim_qslot_check(const lsim_qslot *s, lsim_errbuf *eb) {
  if (s->rank < 0 || s->rank > s->R)
    return lsim_fail(eb, LSIM_E_SLOT_RANK,
                     "slot of adapter %d holds rank %d outside [0, R=%d]",
                     s->adapter, s->rank, s->R);
  if (s->A.rows != s->R || s->A.cols != s->d_in || s->B.rows != s->d_out ||
      s->B.cols != s->R || !lsim__qmat_sane(&s->A) || !lsim__qmat_sane(&s->B))
    return lsim_fail(eb, LSIM_E_SHAPE,
                     "slot of adapter %d has factors [%d][%d] and [%d][%d], "
                     "expected [R=%d][d_in=%d] and [d_out=%d][R]",
                     s->adapter, s->A.rows, s->A.cols, s->B.rows, s->B.cols,
                     s->R, s->d_in, s->d_out);
  for (int i = s->rank; i < s->R; i++)
    for (int j = 0; j < s->d_in; j++)
      if (mpq_sgn(LSIM_QAT(&s->A, i, j)) != 0) {
        char *v = lsim_q_str(LSIM_QAT(&s->A, i, j));
        lsim_err rc = lsim_fail(eb, LSIM_E_PAD_NONZERO,
                                "slot of adapter %d: padding A_bar[%d][%d] = "
                                "%s, expected 0 (rank %d, R=%d)",
                                s->adapter, i, j, v ? v : "?", s->rank, s->R);
        free(v);
        return rc;
      }
  for (int o = 0; o < s->d_out; o++)
    for (int k = s->rank; k < s->R; k++)
      if (mpq_sgn(LSIM_QAT(&s->B, o, k)) != 0) {
        char *v = lsim_q_str(LSIM_QAT(&s->B, o, k));
        lsim_err rc = lsim_fail(eb, LSIM_E_PAD_NONZERO,
                                "slot of adapter %d: padding B_bar[%d][%d] = "
                                "%s, expected 0 (rank %d, R=%d)",
                                s->adapter, o, k, v ? v : "?", s->rank, s->R);
        free(v);
        return rc;
      }
  return 0;
}

static lsim_err lsim__delta_slots(const lsim_rowplan *p, const lsim_qmat *X,
                                  const lsim_qslot *slots, int nslots,
                                  int launch, int num_mode,
                                  lsim_ref_trace *trace, int *num_used,
                                  lsim_qmat *delta, lsim_errbuf *eb) {
  lsim__ctx c;
  memset(&c, 0, sizeof c);
  c.p = p;
  c.Xq = X;
  c.T = p->T;
  c.d_in = X->cols;
  c.path = LSIM_REF_PADDED;
  c.scale_mode = launch;
  c.tr = trace;
  c.eb = eb;
  int fresh = 0, R = -1;
  lsim_err rc = 0;
  const lsim_qslot *first = NULL;
  for (int i = 0; i < nslots && !first; i++)
    if (slots[i].adapter != LSIM_BASE)
      first = &slots[i];
  c.d_out = lsim__guess_dout(delta, NULL, 0);
  if (delta->rows == 0 && delta->cols == 0 && delta->v == NULL && first)
    c.d_out = first->d_out;
  c.fac = calloc(lsim__cnt(nslots), sizeof *c.fac);
  if (!c.fac) {
    rc = lsim_fail(eb, LSIM_E_NOMEM, "out of memory for %d slots", nslots);
    goto out;
  }
  for (int i = 0; i < nslots; i++) {
    const lsim_qslot *s = &slots[i];
    if (s->adapter == LSIM_BASE)
      continue; /* an empty slot serves no row */
    if (s->adapter < 0) {
      rc = lsim_fail(eb, LSIM_E_USAGE, "slot holds adapter id %d", s->adapter);
      goto out;
    }
    if (R < 0)
      R = s->R;
    if (s->R != R || s->d_in != c.d_in || s->d_out != c.d_out) {
      rc = lsim_fail(eb, LSIM_E_SHAPE,
                     "slot of adapter %d is R=%d d_in=%d d_out=%d, the launch "
                     "is R=%d d_in=%d d_out=%d",
                     s->adapter, s->R, s->d_in, s->d_out, R, c.d_in, c.d_out);
      goto out;
    }
    c.fac[c.nfac].id = s->adapter;
    c.fac[c.nfac].rank = s->rank;
    c.fac[c.nfac].slot = s;
    c.nfac++;
  }
  if ((rc = lsim__fac_sort(&c)) || (rc = lsim__prep_rows(&c)))
    goto out;
  if (c.nactive > 0 && R != p->phys_rank) {
    rc = lsim_fail(eb, LSIM_E_SHAPE,
                   "slots have physical rank R=%d, the plan's phys_rank is %d",
                   R, p->phys_rank);
    goto out;
  }
  for (int i = 0; i < c.nfac; i++) {
    const lsim_qslot *s = c.fac[i].slot;
    if (!c.fac[i].used)
      continue;
    if ((rc = lsim_qslot_check(s, eb)))
      goto out;
    if (launch == LSIM_SCALE_PASSED && s->placement != LSIM_SCALE_PASSED) {
      rc = lsim_fail(eb, LSIM_E_SCALE_PLACEMENT,
                     "slot of adapter %d has its scale folded into %s; a launch "
                     "that passes the scale would apply it twice",
                     s->adapter, s->placement == LSIM_SCALE_FOLD_A ? "A" : "B");
      goto out;
    }
    if (launch != LSIM_SCALE_PASSED && s->placement == LSIM_SCALE_PASSED) {
      rc = lsim_fail(eb, LSIM_E_SCALE_PLACEMENT,
                     "slot of adapter %d holds unscaled factors; a launch that "
                     "expects the scale folded would never apply it",
                     s->adapter);
      goto out;
    }
  }
  if ((rc = lsim__out_shape(delta, c.T, c.d_out, "delta", &fresh, eb)) ||
      (rc = lsim__check_indexed(&c, "padded")))
    goto out;
  c.zwidth = c.nactive > 0 ? R : 0;
  rc = lsim__run_tiers(&c, num_mode, num_used, delta);
out:
  lsim__ctx_release(&c);
  if (rc && fresh)
    lsim_qmat_clear(delta);
  if (rc && trace)
    lsim_ref_trace_release(trace);
  return rc;
}

lsim_err lsim_ref_delta_slots(const lsim_rowplan *p, const lsim_qmat *X,
                              const lsim_qslot *slots, int nslots,
                              int launch_scale, int num_mode,
                              lsim_ref_trace *trace, lsim_qmat *delta,
                              lsim_errbuf *eb) {
  lsim_err rc = lsim__args(p, X, nslots, slots, LSIM_REF_PADDED, launch_scale,
                           num_mode, delta, eb);
  if (rc)
    return rc;
  return lsim__delta_slots(p, X, slots, nslots, launch_scale, num_mode, trace,
                           NULL, delta, eb);
}

/* ======================================================================== */
/* every path, every placement                                              */
/* ======================================================================== */

lsim_err lsim_ref_compare(const lsim_qmat *want, const lsim_qmat *got,
                          const char *what, lsim_errbuf *eb) {
  if (!what)
    what = "result";
  if (want->rows != got->rows || want->cols != got->cols)
    return lsim_fail(eb, LSIM_E_SHAPE, "%s is [%d][%d], expected [%d][%d]",
                     what, got->rows, got->cols, want->rows, want->cols);
  for (int i = 0; i < want->rows; i++)
    for (int j = 0; j < want->cols; j++)
      if (!mpq_equal(LSIM_QAT(got, i, j), LSIM_QAT(want, i, j))) {
        char *a = lsim_q_str(LSIM_QAT(got, i, j));
        char *b = lsim_q_str(LSIM_QAT(want, i, j));
        lsim_err rc = lsim_fail(eb, LSIM_E_PATH_MISMATCH,
                                "%s differs at row %d column %d: %s, "
                                "expected %s",
                                what, i, j, a ? a : "?", b ? b : "?");
        free(a);
        free(b);
        return rc;
      }
  return 0;
}

/* ---- every family and placement in one pass of the int tier ------------- */
/*
** lsim_ref_delta_all evaluates one batch eighteen times.  Done one
** evaluation at a time (lsim__delta_adapters), each run resolves and checks
** the adapters again, converts X and every factor out of mpq again, builds
** mpq slots for the padded family, allocates its result as mpq and is
** compared with the reference entry by entry in mpq: on the replay's small
** batches that bookkeeping, not the arithmetic, was nearly all of the time
** (docs/BENCHMARKS.md, "cpu_ref replay backend").
**
** lsim__all_int runs the same eighteen evaluations in the int tier over one
** snapshot: the adapters are resolved and every family's metadata checked
** once, X and each used factor are loaded once (s*A and s*B are derived
** from the loaded A and B; the padded family's zero-padded copies are built
** per placement and their tails checked), each run writes into one reused
** work matrix through the very family code a single evaluation runs
** (lsim__run_family), and each result is compared with per_row/passed as
** rationals (n1 * d2 == n2 * d1 when the denominators differ).  Only the
** common result is converted to mpq.
**
** It only ever answers "all eighteen agree, here is the delta".  Anything
** else -- a plan or adapter a check refuses, a bound that cannot be proven,
** a product that does not fit, a family that disagrees -- returns nonzero,
** and lsim_ref_delta_all_ex then runs the evaluation-at-a-time path, which
** reports it with its own code and message (or falls back to gmp where a
** bound failed).  Success here implies success there with the same delta:
** both run the same families on the same exact values, and the derived
** s*A, s*B carry denominators that are multiples of the ones loaded from
** mpq, so every bound proven here holds there too.
*/

/* dst := s * src (int tier, uniform denominator), as lsim__xm_load with a
** scale would load it. */
static lsim_err lsim__xm_scaled(lsim__xm *dst, const lsim__xm *src,
                                const lsim__scale *s, lsim_errbuf *eb) {
  if (!s->fits)
    return LSIM__OVERFLOW(eb, "a scale does not fit the int64 tier");
  lsim_err rc = lsim__xm_init(dst, src->rows, src->cols, 0, eb);
  if (rc)
    return rc;
  size_t n = (size_t)src->rows * (size_t)src->cols;
  int64_t amax = 0;
  for (size_t k = 0; k < n; k++) {
    int64_t v;
    if (__builtin_mul_overflow(src->n[k], s->sp, &v) || v == INT64_MIN)
      return LSIM__OVERFLOW(eb, "a scaled factor overflows int64");
    dst->n[k] = v;
    if (lsim__abs64(v) > amax)
      amax = lsim__abs64(v);
  }
  for (int i = 0; i < (src->rows > 0 ? src->rows : 1); i++)
    if (__builtin_mul_overflow(src->den[0], s->sq, &dst->den[i]))
      return LSIM__OVERFLOW(eb, "a scaled denominator overflows int64");
  dst->amax = amax;
  return 0;
}

/* dst := src zero-padded to [rows][cols] (src in the leading corner). */
static lsim_err lsim__xm_padded(lsim__xm *dst, const lsim__xm *src, int rows,
                                int cols, lsim_errbuf *eb) {
  lsim_err rc = lsim__xm_reuse(dst, rows, cols, 0, eb);
  if (rc)
    return rc;
  if (src->rows > rows || src->cols > cols)
    return LSIM_BUG(eb, "a padded copy is narrower than its factor");
  for (int i = 0; i < src->rows; i++)
    memcpy(&LSIM__N(dst, i, 0), &LSIM__N(src, i, 0),
           (size_t)src->cols * sizeof(int64_t));
  for (int i = 0; i < (rows > 0 ? rows : 1); i++)
    dst->den[i] = src->den[0];
  dst->amax = src->amax;
  if (!src->nt)
    return 0;
  /* the transposed copy padded alike, row by row from src's */
  size_t n = (size_t)rows * (size_t)cols;
  if (!(dst->nt = calloc(n ? n : 1, sizeof *dst->nt)))
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory for a padded factor");
  for (int j = 0; j < src->cols; j++)
    memcpy(dst->nt + (size_t)j * (size_t)rows,
           src->nt + (size_t)j * (size_t)src->rows,
           (size_t)src->rows * sizeof *dst->nt);
  if (!src->p16)
    return 0;
  size_t h = ((size_t)cols + 1) / 2, hs = ((size_t)src->cols + 1) / 2;
  if (!(dst->p16 = calloc(h * (size_t)rows > 0 ? 2 * h * (size_t)rows : 1,
                          sizeof *dst->p16)))
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory for a padded factor");
  for (size_t j = 0; j < hs; j++)
    memcpy(dst->p16 + j * (size_t)rows * 2,
           src->p16 + j * (size_t)src->rows * 2,
           (size_t)src->rows * 2 * sizeof *dst->p16);
  return 0;
}

/* Every entry of m outside its leading [rows][cols] corner is zero (the
** padded family's tail check, lsim_qslot_check, in the int tier). */
static int lsim__xm_tail_zero(const lsim__xm *m, int rows, int cols) {
  for (int i = 0; i < m->rows; i++)
    for (int j = i < rows ? cols : 0; j < m->cols; j++)
      if (LSIM__N(m, i, j) != 0)
        return 0;
  return 1;
}

/* a and b (int tier, one shape) hold the same rationals; 0 also when a
** cross product does not fit int64 (the caller then decides in mpq). */
static int lsim__xm_same(const lsim__xm *a, const lsim__xm *b) {
  size_t C = (size_t)a->cols;
  for (int i = 0; i < a->rows; i++) {
    const int64_t *x = a->n + (size_t)i * C, *y = b->n + (size_t)i * C;
    int64_t da = a->den[i], db = b->den[i];
    if (da == db) {
      if (C && memcmp(x, y, C * sizeof *x) != 0)
        return 0;
      continue;
    }
    for (size_t j = 0; j < C; j++) {
      int64_t l, r;
      if (__builtin_mul_overflow(x[j], db, &l) ||
          __builtin_mul_overflow(y[j], da, &r) || l != r)
        return 0;
    }
  }
  return 1;
}

/* m := exact zeros (int tier), keeping its storage. */
static void lsim__xm_zero(lsim__xm *m) {
  size_t n = (size_t)m->rows * (size_t)m->cols;
  if (n)
    memset(m->n, 0, n * sizeof *m->n);
  for (int i = 0; i < m->rows; i++)
    m->den[i] = 1;
  m->amax = 0;
}

/* Point every used factor at the copies the (path, placement) launches. */
static lsim_err lsim__all_int_launch(lsim__ctx *c, int path, int m, int R) {
  for (int i = 0; i < c->nfac; i++) {
    lsim__fac *F = &c->fac[i];
    if (!F->used)
      continue;
    int a = m == LSIM_SCALE_FOLD_A ? LSIM__OWN_SA : LSIM__OWN_A;
    int b = m == LSIM_SCALE_FOLD_B ? LSIM__OWN_SB : LSIM__OWN_B;
    int pad = path == LSIM_REF_PADDED ? LSIM__OWN_PAD : 0;
    F->A = &F->own[pad + a];
    F->B = &F->own[pad + b];
    F->apply = m == LSIM_SCALE_PASSED;
  }
  c->path = path;
  c->scale_mode = m;
  c->zwidth = path == LSIM_REF_PADDED ? (c->nactive > 0 ? R : 0) : c->maxrank;
  return 0;
}

/* The padded family's factors: each of A, B, s*A, s*B zero-padded to
** the physical rank R (A [R][d_in], B [d_out][R]), tails checked zero as
** lsim_qslot_check checks a slot's. */
static lsim_err lsim__all_int_pad(lsim__ctx *c, lsim__fac *F, int R) {
  for (int k = 0; k < LSIM__OWN_PAD; k++) {
    int isA = k == LSIM__OWN_A || k == LSIM__OWN_SA;
    lsim__xm *dst = &F->own[LSIM__OWN_PAD + k];
    lsim_err rc = isA ? lsim__xm_padded(dst, &F->own[k], R, c->d_in, c->eb)
                      : lsim__xm_padded(dst, &F->own[k], c->d_out, R, c->eb);
    if (rc)
      return rc;
    if (!(isA ? lsim__xm_tail_zero(dst, F->rank, c->d_in)
              : lsim__xm_tail_zero(dst, c->d_out, F->rank)))
      return lsim_fail(c->eb, LSIM_E_PAD_NONZERO, "a padded tail is not 0");
  }
  return 0;
}

static lsim_err lsim__all_int(const lsim_rowplan *p, const lsim_qmat *X,
                              const lsim_qadapter *ad, int nad,
                              lsim_qmat *delta, lsim_errbuf *eb) {
  lsim__ctx c;
  memset(&c, 0, sizeof c);
  c.p = p;
  c.Xq = X;
  c.T = p->T;
  c.d_in = X->cols;
  c.eb = eb;
  lsim_qmat none = LSIM_QMAT_INIT;
  c.d_out = lsim__guess_dout(delta ? delta : &none, nad ? &ad[0].B : NULL,
                             nad ? ad[0].rank : 0);
  lsim__xm ref = LSIM__XM_INIT;
  const int R = p->phys_rank;
  lsim_err rc = 0;
  c.fac = calloc(lsim__cnt(nad), sizeof *c.fac);
  if (!c.fac) {
    rc = lsim_fail(eb, LSIM_E_NOMEM, "out of memory for %d adapters", nad);
    goto out;
  }
  for (int i = 0; i < nad && !rc; i++) {
    if (ad[i].id < 0)
      rc = lsim_fail(eb, LSIM_E_USAGE, "adapter id %d is negative", ad[i].id);
    else
      rc = lsim_qadapter_check(&ad[i], c.d_in, c.d_out, eb);
    c.fac[i].id = ad[i].id;
    c.fac[i].rank = ad[i].rank;
    c.fac[i].ad = &ad[i];
  }
  c.nfac = nad;
  if (rc || (rc = lsim__fac_sort(&c)) || (rc = lsim__prep_rows(&c)) ||
      (rc = lsim__check_sgmv(&c)) ||
      (rc = lsim__check_indexed(&c, "indexed")) ||
      (rc = lsim__check_bucketed(&c)))
    goto out;
  /* padded launches from slots of the used adapters only: a group naming
  ** an adapter no row uses, or a rank above R, is for the slow path */
  for (int g = 0; g < p->nids; g++) {
    int f = p->active_ids[g] == LSIM_BASE ? 0 : lsim__find(&c, p->active_ids[g]);
    if (p->active_ids[g] != LSIM_BASE && (f < 0 || !c.fac[f].used)) {
      rc = LSIM_E_REF_UNKNOWN_ADAPTER;
      goto out;
    }
  }
  for (int i = 0; i < c.nfac; i++)
    if (c.fac[i].used && c.fac[i].rank > R) {
      rc = LSIM_E_SLOT_RANK;
      goto out;
    }
  /* X and every used factor, once; s*A and s*B from them */
  if ((rc = lsim__xm_load(&c.X, X, 0, NULL, 0, eb)) ||
      (rc = lsim__xm_init(&c.out, c.T, c.d_out, 0, eb)) ||
      (rc = lsim__xm_init(&ref, c.T, c.d_out, 0, eb)))
    goto out;
  for (int i = 0; i < c.nfac && !rc; i++) {
    lsim__fac *F = &c.fac[i];
    if (!F->used)
      continue;
    lsim__scale_set(&F->s, F->ad->scale);
    if (!(rc = lsim__xm_load(&F->own[LSIM__OWN_A], &F->ad->A, 1, NULL, 0,
                             eb)) &&
        !(rc = lsim__xm_load(&F->own[LSIM__OWN_B], &F->ad->B, 1, NULL, 0,
                             eb)) &&
        !(rc = lsim__xm_scaled(&F->own[LSIM__OWN_SA], &F->own[LSIM__OWN_A],
                               &F->s, eb)))
      rc = lsim__xm_scaled(&F->own[LSIM__OWN_SB], &F->own[LSIM__OWN_B],
                           &F->s, eb);
    for (int k = LSIM__OWN_A; k <= LSIM__OWN_SB && !rc; k++)
      rc = lsim__xm_t(&F->own[k], eb);
    if (!rc)
      rc = lsim__all_int_pad(&c, F, R);
  }
  if (rc)
    goto out;
  for (int path = 0; path < LSIM_REF__COUNT && !rc; path++)
    for (int m = 0; m < LSIM_SCALE__COUNT && !rc; m++) {
      int first = path == LSIM_REF_PER_ROW && m == LSIM_SCALE_PASSED;
      lsim__xm_zero(&c.out);
      if ((rc = lsim__all_int_launch(&c, path, m, R)) ||
          (rc = lsim__run_family(&c)))
        break;
      if (first) {
        lsim__xm tmp = ref;
        ref = c.out;
        c.out = tmp;
        for (int i = 0; i < c.T && !rc; i++)
          for (int j = 0; j < c.d_out && c.row_fac[i] < 0; j++)
            if (LSIM__N(&ref, i, j) != 0) {
              rc = LSIM_E_BASE_DELTA;
              break;
            }
      } else if (!lsim__xm_same(&ref, &c.out)) {
        rc = LSIM_E_PATH_MISMATCH;
      }
    }
  if (rc || !delta) /* no result wanted: the verdict is all */
    goto out;
  int fresh;
  if ((rc = lsim__out_shape(delta, c.T, c.d_out, "delta", &fresh, eb)))
    goto out;
  for (int i = 0; i < c.T && c.d_out > 0; i++)
    lsim__row_to_q(&LSIM_QAT(delta, i, 0), &ref, i, c.d_out);
out:
  lsim__xm_free(&ref);
  lsim__ctx_release(&c);
  return rc;
}

static lsim_err lsim__all_each(const lsim_rowplan *p, const lsim_qmat *X,
                               const lsim_qadapter *ad, int nad, int num_mode,
                               lsim_qmat *delta, lsim_errbuf *eb);

lsim_err lsim_ref_delta_all_ex(const lsim_rowplan *p, const lsim_qmat *X,
                               const lsim_qadapter *ad, int nad, int num_mode,
                               lsim_qmat *delta, lsim_errbuf *eb) {
  lsim_qmat mine = LSIM_QMAT_INIT; /* the result when the caller wants none */
  lsim_err rc = lsim__args(p, X, nad, ad, 0, 0, num_mode,
                           delta ? delta : &mine, eb);
  if (rc)
    return rc;
  lsim_errbuf sub = LSIM_ERRBUF_INIT;
  /* the int tier in one pass; anything but agreement is decided below */
  if (num_mode == LSIM_NUM_AUTO || num_mode == LSIM_NUM_INT64 ||
      num_mode == LSIM_NUM_INT16 || num_mode == LSIM_NUM_INT16_SCALAR) {
    if (lsim__all_int(p, X, ad, nad, delta, &sub) == 0) {
      lsim__one_pass_n++;
      return 0;
    }
  }
  if (!delta) {
    rc = lsim__all_each(p, X, ad, nad, num_mode, &mine, eb);
    lsim_qmat_clear(&mine);
    return rc;
  }
  return lsim__all_each(p, X, ad, nad, num_mode, delta, eb);
}

/* lsim_ref_delta_all_ex one evaluation at a time: what decides and reports
** every case lsim__all_int leaves to it. */
static lsim_err lsim__all_each(const lsim_rowplan *p, const lsim_qmat *X,
                               const lsim_qadapter *ad, int nad, int num_mode,
                               lsim_qmat *delta, lsim_errbuf *eb) {
  int fresh = delta->rows == 0 && delta->cols == 0 && delta->v == NULL;
  lsim_qmat got = LSIM_QMAT_INIT;
  lsim_errbuf sub = LSIM_ERRBUF_INIT;
  lsim_err rc = lsim__delta_adapters(p, X, ad, nad, LSIM_REF_PER_ROW, LSIM_SCALE_PASSED,
                            num_mode, NULL, NULL, delta, &sub);
  if (rc) {
    lsim_fail(eb, rc, "per_row/passed: %s", sub.msg);
    return rc;
  }
  for (int path = 0; path < LSIM_REF__COUNT && !rc; path++) {
    for (int m = 0; m < LSIM_SCALE__COUNT && !rc; m++) {
      if (path == LSIM_REF_PER_ROW && m == LSIM_SCALE_PASSED)
        continue;
      /* shaped like the reference, so d_out never has to be guessed */
      if ((rc = lsim_qmat_init(&got, delta->rows, delta->cols, eb)))
        break;
      rc = lsim__delta_adapters(p, X, ad, nad, path, m, num_mode, NULL, NULL,
                                &got, &sub);
      if (rc) {
        lsim_fail(eb, rc, "%s/%s: %s", lsim_ref_path_name(path),
                  lsim_scale_mode_name(m), sub.msg);
        break;
      }
      char what[64];
      snprintf(what, sizeof what, "path %s, scale %s",
               lsim_ref_path_name(path), lsim_scale_mode_name(m));
      rc = lsim_ref_compare(delta, &got, what, eb);
      lsim_qmat_clear(&got);
    }
  }
  lsim_qmat_clear(&got);
  if (rc && fresh)
    lsim_qmat_clear(delta);
  return rc;
}

lsim_err lsim_ref_delta_all(const lsim_rowplan *p, const lsim_qmat *X,
                            const lsim_qadapter *ad, int nad,
                            lsim_qmat *delta, lsim_errbuf *eb) {
  return lsim_ref_delta_all_ex(p, X, ad, nad, LSIM_NUM_AUTO, delta, eb);
}

/* ======================================================================== */
/* base projection                                                          */
/* ======================================================================== */
/*
** Y = X W^T.  Tiers, fastest first:
**
**   int16  X and W numerators fit in int16 and a chunk length kc (a multiple
**          of 16) with kc * max|x| * max|w| <= INT32_MAX exists.  Operands
**          are packed as zero-padded int16 rows ([M][Kp], [N][Kp]); each
**          output's dot product is accumulated in 32-bit lanes over one
**          chunk of K (every lane sums a subset of the chunk's products, so
**          it stays within the bound) and the chunk's total is added into a
**          64-bit result (K * max|x| * max|w| <= INT64_MAX, checked).  An
**          AVX2 kernel (vpmaddwd, a 4x3 register tile) runs when the CPU
**          has AVX2; otherwise a portable loop does the same sums.
**   int64  plain int64 dot products under the K * max|x| * max|w| bound.
**   gmp    mpq multiply-adds.
**
** Both operands are read along K (rows of X and rows of W are contiguous),
** which is the W^T access pattern without materialising W^T.
*/

#define LSIM__MR 4   /* X rows per register tile */
#define LSIM__NR 3   /* W rows per register tile */
#define LSIM__NB 96  /* W rows per cache block (a multiple of NR) */
#define LSIM__KC 1024 /* preferred K chunk (a multiple of 16) */

typedef struct lsim__pack16 {
  int M, N, K;    /* logical sizes */
  int Mp, Np, Kp; /* padded: Mp % MR == 0, Np % NR == 0, Kp % 16 == 0 */
  int kc;         /* proven-safe chunk, a multiple of 16 */
  int16_t *x;     /* [Mp][Kp] */
  int16_t *w;     /* [Np][Kp] */
  int64_t *y;     /* [Mp][Np] */
} lsim__pack16;

static void lsim__pack16_free(lsim__pack16 *pk) {
  free(pk->x);
  free(pk->w);
  free(pk->y);
  memset(pk, 0, sizeof *pk);
}

static int16_t *lsim__pack_rows16(const lsim__xm *m, int rows_p, int Kp) {
  size_t bytes = (size_t)rows_p * (size_t)Kp * sizeof(int16_t);
  int16_t *d = aligned_alloc(32, bytes ? (bytes + 31) / 32 * 32 : 32);
  if (!d)
    return NULL;
  memset(d, 0, bytes);
  for (int i = 0; i < m->rows; i++) {
    const int64_t *s = m->n + (size_t)i * (size_t)m->cols;
    int16_t *t = d + (size_t)i * (size_t)Kp;
    for (int k = 0; k < m->cols; k++)
      t[k] = (int16_t)s[k];
  }
  return d;
}

#if LSIM__X86_AVX2
__attribute__((target("avx2"))) static inline int64_t
lsim__hsum_epi32(__m256i a) {
  __m256i lo = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(a));
  __m256i hi = _mm256_cvtepi32_epi64(_mm256_extracti128_si256(a, 1));
  __m256i s = _mm256_add_epi64(lo, hi);
  __m128i t = _mm_add_epi64(_mm256_castsi256_si128(s),
                            _mm256_extracti128_si256(s, 1));
  return _mm_cvtsi128_si64(t) + _mm_extract_epi64(t, 1);
}

__attribute__((target("avx2"))) static void
lsim__gemm16_avx2(lsim__pack16 *pk) {
  const int Kp = pk->Kp, Np = pk->Np;
  for (int k0 = 0; k0 < Kp; k0 += pk->kc) {
    int kl = Kp - k0 < pk->kc ? Kp - k0 : pk->kc;
    for (int n0 = 0; n0 < Np; n0 += LSIM__NB) {
      int n1 = n0 + LSIM__NB < Np ? n0 + LSIM__NB : Np;
      for (int m = 0; m < pk->Mp; m += LSIM__MR) {
        const int16_t *x0 = pk->x + (size_t)m * Kp + k0;
        const int16_t *x1 = x0 + Kp, *x2 = x1 + Kp, *x3 = x2 + Kp;
        for (int n = n0; n < n1; n += LSIM__NR) {
          const int16_t *w0 = pk->w + (size_t)n * Kp + k0;
          const int16_t *w1 = w0 + Kp, *w2 = w1 + Kp;
          __m256i a00 = _mm256_setzero_si256(), a01 = a00, a02 = a00;
          __m256i a10 = a00, a11 = a00, a12 = a00;
          __m256i a20 = a00, a21 = a00, a22 = a00;
          __m256i a30 = a00, a31 = a00, a32 = a00;
          for (int k = 0; k < kl; k += 16) {
            __m256i v0 = _mm256_load_si256((const __m256i *)(w0 + k));
            __m256i v1 = _mm256_load_si256((const __m256i *)(w1 + k));
            __m256i v2 = _mm256_load_si256((const __m256i *)(w2 + k));
            __m256i u = _mm256_load_si256((const __m256i *)(x0 + k));
            a00 = _mm256_add_epi32(a00, _mm256_madd_epi16(u, v0));
            a01 = _mm256_add_epi32(a01, _mm256_madd_epi16(u, v1));
            a02 = _mm256_add_epi32(a02, _mm256_madd_epi16(u, v2));
            u = _mm256_load_si256((const __m256i *)(x1 + k));
            a10 = _mm256_add_epi32(a10, _mm256_madd_epi16(u, v0));
            a11 = _mm256_add_epi32(a11, _mm256_madd_epi16(u, v1));
            a12 = _mm256_add_epi32(a12, _mm256_madd_epi16(u, v2));
            u = _mm256_load_si256((const __m256i *)(x2 + k));
            a20 = _mm256_add_epi32(a20, _mm256_madd_epi16(u, v0));
            a21 = _mm256_add_epi32(a21, _mm256_madd_epi16(u, v1));
            a22 = _mm256_add_epi32(a22, _mm256_madd_epi16(u, v2));
            u = _mm256_load_si256((const __m256i *)(x3 + k));
            a30 = _mm256_add_epi32(a30, _mm256_madd_epi16(u, v0));
            a31 = _mm256_add_epi32(a31, _mm256_madd_epi16(u, v1));
            a32 = _mm256_add_epi32(a32, _mm256_madd_epi16(u, v2));
          }
          int64_t *y = pk->y + (size_t)m * Np + n;
          y[0] += lsim__hsum_epi32(a00);
          y[1] += lsim__hsum_epi32(a01);
          y[2] += lsim__hsum_epi32(a02);
          y += Np;
          y[0] += lsim__hsum_epi32(a10);
          y[1] += lsim__hsum_epi32(a11);
          y[2] += lsim__hsum_epi32(a12);
          y += Np;
          y[0] += lsim__hsum_epi32(a20);
          y[1] += lsim__hsum_epi32(a21);
          y[2] += lsim__hsum_epi32(a22);
          y += Np;
          y[0] += lsim__hsum_epi32(a30);
          y[1] += lsim__hsum_epi32(a31);
          y[2] += lsim__hsum_epi32(a32);
        }
      }
    }
  }
}

static int lsim__cpu_avx2(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") != 0;
}
#else
static int lsim__cpu_avx2(void) { return 0; }
#endif

/* The same sums as the AVX2 kernel, for any CPU. */
static void lsim__gemm16_portable(lsim__pack16 *pk) {
  const int Kp = pk->Kp, Np = pk->Np;
  for (int k0 = 0; k0 < Kp; k0 += pk->kc) {
    int kl = Kp - k0 < pk->kc ? Kp - k0 : pk->kc;
    for (int m = 0; m < pk->Mp; m++) {
      const int16_t *x = pk->x + (size_t)m * Kp + k0;
      for (int n = 0; n < Np; n++) {
        const int16_t *w = pk->w + (size_t)n * Kp + k0;
        int32_t acc = 0;
        for (int k = 0; k < kl; k++)
          acc += (int32_t)x[k] * (int32_t)w[k];
        pk->y[(size_t)m * Np + n] += acc;
      }
    }
  }
}

/*
** W packed straight from the rationals when every entry is an integer in
** int16 range (the common integer-mode case: no int64 copy of W at all).
** NULL when some entry is not, or on allocation failure (*nomem set).
*/
static int16_t *lsim__pack_q16(const lsim_qmat *W, int rows_p, int Kp,
                               int64_t *amax, int *nomem) {
  size_t bytes = (size_t)rows_p * (size_t)Kp * sizeof(int16_t);
  int16_t *d = aligned_alloc(32, bytes ? (bytes + 31) / 32 * 32 : 32);
  *nomem = d == NULL;
  if (!d)
    return NULL;
  memset(d, 0, bytes);
  int64_t a = 0;
  for (int i = 0; i < W->rows; i++) {
    int16_t *t = d + (size_t)i * (size_t)Kp;
    for (int k = 0; k < W->cols; k++) {
      mpq_srcptr e = LSIM_QAT(W, i, k);
      int64_t v;
      if (!lsim__z_is_one(mpq_denref(e)) || !lsim__z_i64(mpq_numref(e), &v) ||
          v > INT16_MAX || v < -INT16_MAX) {
        free(d);
        return NULL;
      }
      t[k] = (int16_t)v;
      if (lsim__abs64(v) > a)
        a = lsim__abs64(v);
    }
  }
  *amax = a;
  return d;
}

/* The int16 tier: pk->w already packed, X packed here from xi.  The caller
** proved xa, wa <= INT16_MAX and 16 * xa * wa <= INT32_MAX. */
static lsim_err lsim__base_int16(lsim__pack16 *pk, const lsim__xm *X,
                                 int64_t wa, int simd, int64_t *y,
                                 lsim_errbuf *eb) {
  int64_t kc = (int64_t)INT32_MAX / (X->amax * wa > 0 ? X->amax * wa : 1);
  pk->kc = (int)(kc > LSIM__KC ? LSIM__KC : kc / 16 * 16);
  pk->x = lsim__pack_rows16(X, pk->Mp, pk->Kp);
  pk->y = calloc((size_t)pk->Mp * (size_t)pk->Np + 1, sizeof *pk->y);
  if (!pk->x || !pk->y)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory packing the base GEMM");
#if LSIM__X86_AVX2
  if (simd && lsim__cpu_avx2())
    lsim__gemm16_avx2(pk);
  else
#endif
    lsim__gemm16_portable(pk);
  (void)simd;
  for (int m = 0; m < pk->M; m++)
    memcpy(y + (size_t)m * pk->N, pk->y + (size_t)m * pk->Np,
           (size_t)pk->N * sizeof *y);
  return 0;
}

static void lsim__base_int64(const lsim__xm *X, const lsim__xm *W,
                             int64_t *y) {
  const int M = X->rows, N = W->rows, K = X->cols;
  const int NB = 16, KB = 2048;
  for (int k0 = 0; k0 < K; k0 += KB) {
    int kl = K - k0 < KB ? K - k0 : KB;
    for (int n0 = 0; n0 < N; n0 += NB) {
      int n1 = n0 + NB < N ? n0 + NB : N;
      for (int m = 0; m < M; m++) {
        const int64_t *x = X->n + (size_t)m * K + k0;
        for (int n = n0; n < n1; n++) {
          const int64_t *w = W->n + (size_t)n * K + k0;
          int64_t s0 = 0, s1 = 0;
          int k = 0;
          for (; k + 2 <= kl; k += 2) {
            s0 += x[k] * w[k];
            s1 += x[k + 1] * w[k + 1];
          }
          if (k < kl)
            s0 += x[k] * w[k];
          y[(size_t)m * N + n] += s0 + s1;
        }
      }
    }
  }
}

/* The integer tiers; E_OVERFLOW when the chosen (or any, under AUTO) tier's
** bounds cannot be proven.  Y is written only on success. */
static lsim_err lsim__base_int(const lsim_qmat *X, const lsim_qmat *W,
                               int num_mode, int *used, lsim_qmat *Y,
                               lsim_errbuf *eb) {
  int M = X->rows, N = W->rows, K = X->cols, nomem = 0;
  int want16 = num_mode == LSIM_NUM_AUTO || num_mode == LSIM_NUM_INT16 ||
               num_mode == LSIM_NUM_INT16_SCALAR;
  int force16 = want16 && num_mode != LSIM_NUM_AUTO;
  lsim__xm xi = LSIM__XM_INIT, wi = LSIM__XM_INIT;
  lsim__pack16 pk;
  memset(&pk, 0, sizeof pk);
  pk.M = M;
  pk.N = N;
  pk.K = K;
  pk.Mp = (M + LSIM__MR - 1) / LSIM__MR * LSIM__MR;
  pk.Np = (N + LSIM__NR - 1) / LSIM__NR * LSIM__NR;
  pk.Kp = (K + 15) / 16 * 16;
  int64_t wa = 0, wden = 1, *y = NULL;
  lsim_err rc = lsim__xm_load(&xi, X, 0, NULL, 0, eb);
  if (rc)
    return rc;
  if (want16 && xi.amax <= INT16_MAX)
    pk.w = lsim__pack_q16(W, pk.Np, pk.Kp, &wa, &nomem);
  if (nomem) {
    rc = lsim_fail(eb, LSIM_E_NOMEM, "out of memory packing W");
    goto out;
  }
  if (!pk.w) { /* general W: one common denominator */
    if ((rc = lsim__xm_load(&wi, W, 1, NULL, 0, eb)))
      goto out;
    wa = wi.amax;
    wden = wi.den[0];
  }
  int ok64 = lsim__bound_ok(K, xi.amax, wa);
  int ok16 = ok64 && xi.amax <= INT16_MAX && wa <= INT16_MAX &&
             16 * xi.amax * wa <= INT32_MAX;
  y = calloc((size_t)M * (size_t)N + 1, sizeof *y);
  if (!y) {
    rc = lsim_fail(eb, LSIM_E_NOMEM, "out of memory for the base output");
  } else if (!ok64 || (force16 && !ok16)) {
    rc = LSIM__OVERFLOW(eb, "a base product over %d terms does not fit the "
                            "%s tier",
                        K, force16 ? "int16" : "int64");
  } else if (want16 && ok16) {
    if (!pk.w && !(pk.w = lsim__pack_rows16(&wi, pk.Np, pk.Kp)))
      rc = lsim_fail(eb, LSIM_E_NOMEM, "out of memory packing W");
    else
      rc = lsim__base_int16(&pk, &xi, wa, num_mode != LSIM_NUM_INT16_SCALAR, y,
                            eb);
    *used = num_mode == LSIM_NUM_INT16_SCALAR ? LSIM_NUM_INT16_SCALAR
                                              : LSIM_NUM_INT16;
  } else {
    if (!wi.n && (rc = lsim__xm_load(&wi, W, 1, NULL, 0, eb)))
      goto out;
    lsim__base_int64(&xi, &wi, y);
    *used = LSIM_NUM_INT64;
  }
  /* Check every row's denominator before writing any of Y. */
  for (int m = 0; m < M && !rc; m++) {
    int64_t d;
    if (__builtin_mul_overflow(xi.den[m], wden, &d))
      rc = LSIM__OVERFLOW(eb, "a base denominator overflows int64");
  }
  for (int m = 0; m < M && !rc; m++)
    for (int n = 0; n < N; n++)
      lsim__q_from(LSIM_QAT(Y, m, n), y[(size_t)m * N + n], xi.den[m] * wden);
out:
  free(y);
  lsim__pack16_free(&pk);
  lsim__xm_free(&xi);
  lsim__xm_free(&wi);
  return rc;
}

static void lsim__base_gmp(const lsim_qmat *X, const lsim_qmat *W,
                           lsim_qmat *Y) {
  mpq_t acc, t;
  mpq_init(acc);
  mpq_init(t);
  for (int m = 0; m < X->rows; m++)
    for (int n = 0; n < W->rows; n++) {
      mpq_set_ui(acc, 0, 1);
      for (int k = 0; k < X->cols; k++) {
        if (mpq_sgn(LSIM_QAT(X, m, k)) == 0)
          continue;
        mpq_mul(t, LSIM_QAT(X, m, k), LSIM_QAT(W, n, k));
        mpq_add(acc, acc, t);
      }
      mpq_set(LSIM_QAT(Y, m, n), acc);
    }
  mpq_clear(acc);
  mpq_clear(t);
}

lsim_err lsim_ref_base_ex(const lsim_qmat *X, const lsim_qmat *W, int num_mode,
                          int *num_used, lsim_qmat *Y, lsim_errbuf *eb) {
  if (!X || !W || !Y)
    return lsim_fail(eb, LSIM_E_USAGE, "missing base projection operand");
  if (num_mode < 0 || num_mode >= LSIM_NUM__COUNT)
    return lsim_fail(eb, LSIM_E_USAGE, "unknown numeric tier %d", num_mode);
  if (!lsim__qmat_sane(X) || !lsim__qmat_sane(W))
    return lsim_fail(eb, LSIM_E_SHAPE, "base operand is not initialised");
  int yfree = Y->rows == 0 && Y->cols == 0 && Y->v == NULL;
  if (W->cols != X->cols) {
    if (W->rows == X->cols && !yfree && Y->cols == W->cols)
      return lsim_fail(eb, LSIM_E_ORIENTATION,
                       "W is [d_in=%d][d_out=%d]; the logical orientation is "
                       "[d_out][d_in]",
                       W->rows, W->cols);
    return lsim_fail(eb, LSIM_E_SHAPE, "W is [%d][%d], X has %d columns",
                     W->rows, W->cols, X->cols);
  }
  int fresh, used = LSIM_NUM_GMP;
  lsim_err rc = lsim__out_shape(Y, X->rows, W->rows, "base output", &fresh, eb);
  if (rc)
    return rc;
  if (num_mode != LSIM_NUM_GMP)
    rc = lsim__base_int(X, W, num_mode, &used, Y, eb);
  if (num_mode == LSIM_NUM_GMP ||
      (num_mode == LSIM_NUM_AUTO && rc == LSIM_E_OVERFLOW)) {
    lsim__base_gmp(X, W, Y);
    used = LSIM_NUM_GMP;
    rc = 0;
  }
  if (rc && fresh)
    lsim_qmat_clear(Y);
  if (!rc && num_used)
    *num_used = used;
  return rc;
}

lsim_err lsim_ref_base(const lsim_qmat *X, const lsim_qmat *W, lsim_qmat *Y,
                       lsim_errbuf *eb) {
  return lsim_ref_base_ex(X, W, LSIM_NUM_AUTO, NULL, Y, eb);
}
