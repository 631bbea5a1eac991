/*
** profile_fit.c: the measurement file of `lorasim profile` and the fit of
** the profiled cost model (profile_fit.h, docs/PROFILE.md).
**
** The model is linear in every coefficient but the knee: for a fixed knee
** K, the GEMM and LM-head features are max(1, T / K) and max(1, S / K),
** and the time is a non-negative combination of eleven features.  So the
** fit is a one-dimensional search over K around a non-negative least
** squares solve, all deterministic: 64 log-spaced candidates from 1 to
** 32768 tokens, the best one refined by 40 golden-section steps between
** its neighbours.  Each solve minimises the relative error (rows divided
** by the measured time), columns scaled to unit norm, by Lawson and
** Hanson's active-set method with LAPACKE_dgels for each least-squares
** subproblem.
*/
#include "profile_fit.h"

#include <errno.h>
#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "escape.h"
#include "outfile.h"
#include "slurp.h"

static const char *const lsim__cls[LSIM_PROF_NCLASS] = {"prefill", "decode",
                                                        "mixed", "lora"};

static const char *const lsim__ccls[2] = {"h2d", "stage"};

const char *lsim_prof_class_name(int cls) {
  return cls >= 0 && cls < LSIM_PROF_NCLASS ? lsim__cls[cls] : "?";
}

/* ---- the file ------------------------------------------------------------ */

lsim_err lsim_prof_csv_write(const char *path, const lsim_prof_row *rows,
                             int n, lsim_errbuf *eb) {
  lsim_outfile of;
  lsim_err rc = lsim_out_open(&of, path, eb);
  if (rc)
    return rc;
  fputs(LSIM_PROF_CSV_HEADER "\n", of.fp);
  for (int i = 0; i < n; i++) {
    const lsim_prof_row *r = &rows[i];
    char tg[LSIM_ESC_SIZE(sizeof r->targets)];
    lsim_csv_field(tg, sizeof tg, r->targets);
    fprintf(of.fp,
            "%s,%d,%s,%s,%d,%lld,%lld,%lld,%lld,%lld,%lld,%d,%lld,%lld,%lld,"
            "%lld,%d,%d,%lld,%lld,%lld\n",
            r->kind == LSIM_PROF_COPY ? "copy" : "iter", r->point,
            r->kind == LSIM_PROF_COPY ? lsim__ccls[r->cls == LSIM_PROF_STAGE]
                                      : lsim_prof_class_name(r->cls),
            tg, r->rep, (long long)r->f.tokens, (long long)r->f.sampled,
            (long long)r->f.decode_rows, (long long)r->f.decode_ctx,
            (long long)r->f.prefill_seqs, (long long)r->f.prefill_pairs,
            r->f.lora, (long long)r->f.lora_segments,
            (long long)r->f.rank_rows, (long long)r->lora_modules,
            (long long)r->lora_elems, r->adapters, r->max_rank,
            (long long)r->bytes, (long long)r->ns,
            (long long)r->f.decode_rank_rows);
  }
  return lsim_out_commit(&of, eb);
}

#define LSIM__MAX_ROWS 1000000
#define LSIM__NCOL 21

static lsim_err lsim__bad(lsim_errbuf *eb, const char *path, long line,
                          int col, const char *what) {
  static const char *const names[LSIM__NCOL] = {
      "kind",         "point",        "class",         "targets",
      "rep",          "tokens",       "sampled",       "decode_rows",
      "decode_ctx",   "prefill_seqs", "prefill_pairs", "lora",
      "lora_segments", "rank_rows",   "lora_modules",  "lora_elems",
      "adapters",     "max_rank",     "bytes",         "ns",
      "decode_rank_rows"};
  return lsim_fail(eb, LSIM_E_DEV_PROFILE, "measurements %s:%ld: %s%s%s", path,
                   line, col >= 0 ? "column " : "",
                   col >= 0 ? names[col] : "", what);
}

lsim_err lsim_prof_csv_read(const char *path, lsim_prof_row **rows, int *n,
                            lsim_errbuf *eb) {
  const lsim_slurp_opts so = {(size_t)256 << 20, LSIM_E_DEV_PROFILE, 0, 0,
                              "measurements"};
  char *text = NULL;
  size_t len = 0;
  lsim_err rc = lsim_slurp(path, &so, &text, &len, eb);
  if (rc)
    return rc;
  lsim_prof_row *out = NULL;
  int cnt = 0, cap = 0;
  long line = 0;
  int ncol = LSIM__NCOL; /* 20 in a file with the older header */
  const char *p = text, *end = text + len;
  *rows = NULL;
  *n = 0;
  while (p < end && !rc) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t ll = nl ? (size_t)(nl - p) : (size_t)(end - p);
    char buf[1024];
    line++;
    if (ll >= sizeof buf) {
      rc = lsim__bad(eb, path, line, -1, "line too long");
      break;
    }
    memcpy(buf, p, ll);
    buf[ll] = 0;
    if (ll && buf[ll - 1] == '\r')
      buf[--ll] = 0;
    p = nl ? nl + 1 : end;
    if (line == 1) {
      if (strcmp(buf, LSIM_PROF_CSV_HEADER_V1) == 0)
        ncol = LSIM__NCOL - 1;
      else if (strcmp(buf, LSIM_PROF_CSV_HEADER) != 0)
        rc = lsim__bad(eb, path, line, -1,
                       "not a lorasim profile measurement file (header "
                       "expected: " LSIM_PROF_CSV_HEADER ")");
      continue;
    }
    if (ll == 0)
      continue;
    if (cnt >= LSIM__MAX_ROWS) {
      rc = lsim__bad(eb, path, line, -1, "more than 1000000 rows");
      break;
    }
    if (cnt == cap) {
      int nc = cap ? 2 * cap : 256;
      lsim_prof_row *nr = realloc(out, (size_t)nc * sizeof *nr);
      if (!nr) {
        rc = lsim_fail(eb, LSIM_E_NOMEM, "out of memory reading %s", path);
        break;
      }
      out = nr;
      cap = nc;
    }
    lsim_prof_row *r = &out[cnt];
    memset(r, 0, sizeof *r);
    const char *q = buf;
    char fld[64];
    int64_t v[LSIM__NCOL] = {0};
    for (int c = 0; c < ncol && !rc; c++) {
      int st = lsim_csv_next(&q, fld, sizeof fld);
      if (st != 1) {
        rc = lsim__bad(eb, path, line, c,
                       st == 0 ? ": missing" : ": malformed field");
        break;
      }
      if (c == 0) {
        if (strcmp(fld, "iter") && strcmp(fld, "copy"))
          rc = lsim__bad(eb, path, line, c, ": must be iter or copy");
        r->kind = strcmp(fld, "copy") == 0 ? LSIM_PROF_COPY : LSIM_PROF_ITER;
      } else if (c == 2) {
        r->cls = -1;
        int nn = r->kind == LSIM_PROF_COPY ? 2 : LSIM_PROF_NCLASS;
        for (int k = 0; k < nn; k++)
          if (strcmp(fld, r->kind == LSIM_PROF_COPY ? lsim__ccls[k]
                                                    : lsim__cls[k]) == 0)
            r->cls = k;
        if (r->cls < 0)
          rc = lsim__bad(eb, path, line, c,
                         r->kind == LSIM_PROF_COPY
                             ? ": a copy's class must be h2d or stage"
                             : ": must be prefill, decode, mixed or lora");
      } else if (c == 3) {
        if (strlen(fld) >= sizeof r->targets || !fld[0])
          rc = lsim__bad(eb, path, line, c, ": 1 to 31 characters");
        else
          memcpy(r->targets, fld, strlen(fld) + 1);
      } else {
        char *e;
        errno = 0;
        long long x = strtoll(fld, &e, 10);
        if (e == fld || *e || errno || x < 0 || x > (INT64_C(1) << 53))
          rc = lsim__bad(eb, path, line, c,
                         ": must be an integer in [0, 2^53]");
        v[c] = x;
      }
    }
    if (!rc && *q && *q != '\r')
      rc = lsim__bad(eb, path, line, -1, ncol == LSIM__NCOL
                                             ? "more than 21 columns"
                                             : "more than 20 columns");
    if (rc)
      break;
    if (v[1] > INT32_MAX || v[4] > INT32_MAX || v[11] > 1 ||
        v[16] > INT32_MAX || v[17] > INT32_MAX) {
      rc = lsim__bad(eb, path, line, -1,
                     "point, rep, adapters or max_rank too large, or lora "
                     "not 0 or 1");
      break;
    }
    if (v[20] > v[13]) {
      rc = lsim__bad(eb, path, line, 20, ": more than rank_rows");
      break;
    }
    if (v[19] < 1) {
      rc = lsim__bad(eb, path, line, 19, ": a measured time must be >= 1 ns");
      break;
    }
    r->point = (int)v[1];
    r->rep = (int)v[4];
    r->f = (lsim_cost_feat){v[5],  v[6],  v[7],  v[8], v[9],
                            v[10], v[12], v[13], (int)v[11], v[20], 0};
    r->lora_modules = v[14];
    r->lora_elems = v[15];
    r->adapters = (int)v[16];
    r->max_rank = (int)v[17];
    /* the point's distinct adapters at its (one) rank, as
    ** lsim_cost_plan_features counts them */
    r->f.adapter_ranks = r->f.lora ? v[16] * v[17] : 0;
    r->bytes = v[18];
    r->ns = v[19];
    cnt++;
  }
  free(text);
  if (!rc && line == 0)
    rc = lsim__bad(eb, path, 1, -1, "empty file");
  if (rc) {
    free(out);
    return rc;
  }
  *rows = out;
  *n = cnt;
  return 0;
}

/* ---- points: the median of each point's reps ----------------------------- */

typedef struct lsim__pt {
  const lsim_prof_row *r; /* the first row of the point */
  double y;               /* median ns */
} lsim__pt;

static int lsim__cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

static int lsim__cmp_dbl(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The points of `kind` (rows of one point are consecutive in a file the
** command wrote; a point met again later starts a new group) */
static lsim_err lsim__points(const lsim_prof_row *rows, int n, int kind,
                             int cls, lsim__pt **out, int *np,
                             lsim_errbuf *eb) {
  lsim__pt *pt = malloc((size_t)(n > 0 ? n : 1) * sizeof *pt);
  int64_t *t = malloc((size_t)(n > 0 ? n : 1) * sizeof *t);
  int m = 0;
  if (!pt || !t) {
    free(pt);
    free(t);
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory fitting");
  }
  for (int i = 0; i < n;) {
    int j = i;
    while (j < n && rows[j].kind == rows[i].kind &&
           rows[j].point == rows[i].point)
      j++;
    if (rows[i].kind == kind && (cls < 0 || rows[i].cls == cls)) {
      for (int k = i; k < j; k++)
        t[k - i] = rows[k].ns;
      qsort(t, (size_t)(j - i), sizeof *t, lsim__cmp_i64);
      int c = j - i;
      pt[m].r = &rows[i];
      pt[m].y = c % 2 ? (double)t[c / 2]
                      : ((double)t[c / 2 - 1] + (double)t[c / 2]) / 2;
      m++;
    }
    i = j;
  }
  free(t);
  *out = pt;
  *np = m;
  return 0;
}

/* ---- non-negative least squares ------------------------------------------ */

/* min ||A x - b|| over x >= 0, A n x m column-major (n >= 1, m <= 16),
** Lawson-Hanson.  0, or -1 when LAPACK fails. */
static int lsim__nnls(const double *A, const double *b, int n, int m,
                      double *x) {
  int passive[16] = {0};
  double w[16], s[16];
  double *Ap = malloc((size_t)n * (size_t)m * sizeof *Ap);
  double *bp = malloc((size_t)(n > m ? n : m) * sizeof *bp);
  double *r = malloc((size_t)n * sizeof *r);
  int rc = -1;
  if (!Ap || !bp || !r)
    goto out;
  for (int j = 0; j < m; j++)
    x[j] = 0;
  for (int outer = 0; outer < 3 * m + 3; outer++) {
    /* gradient w = A^T (b - A x) */
    for (int i = 0; i < n; i++) {
      r[i] = b[i];
      for (int j = 0; j < m; j++)
        r[i] -= A[(size_t)j * n + i] * x[j];
    }
    int jmax = -1;
    for (int j = 0; j < m; j++) {
      w[j] = 0;
      for (int i = 0; i < n; i++)
        w[j] += A[(size_t)j * n + i] * r[i];
      if (!passive[j] && w[j] > 1e-12 && (jmax < 0 || w[j] > w[jmax]))
        jmax = j;
    }
    if (jmax < 0)
      break;
    passive[jmax] = 1;
    for (int inner = 0; inner < 3 * m + 3; inner++) {
      int idx[16], p = 0;
      for (int j = 0; j < m; j++)
        if (passive[j])
          idx[p++] = j;
      for (int a = 0; a < p; a++)
        memcpy(Ap + (size_t)a * n, A + (size_t)idx[a] * n,
               (size_t)n * sizeof *Ap);
      memcpy(bp, b, (size_t)n * sizeof *bp);
      lapack_int info = LAPACKE_dgels(LAPACK_COL_MAJOR, 'N', n, p, 1, Ap, n,
                                      bp, n > p ? n : p);
      if (info < 0)
        goto out;
      for (int j = 0; j < m; j++)
        s[j] = 0;
      int allpos = 1;
      for (int a = 0; a < p; a++) {
        s[idx[a]] = info > 0 ? 0 : bp[a]; /* rank deficient: drop */
        if (s[idx[a]] <= 0)
          allpos = 0;
      }
      if (allpos) {
        memcpy(x, s, (size_t)m * sizeof *x);
        break;
      }
      double alpha = 1;
      for (int a = 0; a < p; a++) {
        int j = idx[a];
        if (s[j] <= 0 && x[j] - s[j] > 0) {
          double t = x[j] / (x[j] - s[j]);
          if (t < alpha)
            alpha = t;
        }
      }
      for (int j = 0; j < m; j++) {
        x[j] += alpha * (s[j] - x[j]);
        if (passive[j] && x[j] <= 1e-15) {
          passive[j] = 0;
          x[j] = 0;
        }
      }
    }
  }
  rc = 0;
out:
  free(Ap);
  free(bp);
  free(r);
  return rc;
}

/* ---- the iteration model ------------------------------------------------- */

/* The linear coefficients of the fit, in the order of their features */
static const int lsim__lin[] = {
    LSIM_COST_FIXED,       LSIM_COST_GEMM,         LSIM_COST_LM_HEAD,
    LSIM_COST_TOKEN,       LSIM_COST_DECODE_ROW,   LSIM_COST_DECODE_CTX,
    LSIM_COST_PREFILL_SEQ, LSIM_COST_PREFILL_PAIR, LSIM_COST_LORA_MODULE,
    LSIM_COST_LORA_SEGMENT, LSIM_COST_LORA_ELEM, LSIM_COST_LORA_DECODE_ELEM,
    LSIM_COST_LORA_ADAPTER_ELEM};
#define LSIM__NLIN ((int)(sizeof lsim__lin / sizeof lsim__lin[0]))

static double lsim__roof(int64_t n, double knee) {
  return n <= 0 ? 0 : ((double)n > knee ? (double)n / knee : 1);
}

static void lsim__features(const lsim_prof_row *r, double knee, double *x) {
  const lsim_cost_feat *f = &r->f;
  x[0] = 1;
  x[1] = lsim__roof(f->tokens, knee);
  x[2] = lsim__roof(f->sampled, knee);
  x[3] = (double)f->tokens;
  x[4] = (double)f->decode_rows;
  x[5] = (double)f->decode_ctx;
  x[6] = (double)f->prefill_seqs;
  x[7] = (double)f->prefill_pairs;
  x[8] = f->lora ? (double)r->lora_modules : 0;
  x[9] = (double)f->lora_segments * (double)r->lora_modules;
  x[10] = (double)f->rank_rows * (double)r->lora_elems;
  x[11] = (double)f->decode_rank_rows * (double)r->lora_elems;
  x[12] = (double)f->adapter_ranks * (double)r->lora_elems;
}

/* Solve at knee K: coefficients into k (ns), the weighted residual sum of
** squares as the return value (HUGE_VAL when the solve fails). */
static double lsim__solve(const lsim__pt *pt, int n, double knee,
                          lsim_cost_coef *k, double *A, double *b) {
  double x[LSIM__NLIN], scale[LSIM__NLIN], f[LSIM__NLIN];
  for (int j = 0; j < LSIM__NLIN; j++)
    scale[j] = 0;
  for (int i = 0; i < n; i++) {
    lsim__features(pt[i].r, knee, f);
    for (int j = 0; j < LSIM__NLIN; j++) {
      A[(size_t)j * n + i] = f[j] / pt[i].y;
      scale[j] += A[(size_t)j * n + i] * A[(size_t)j * n + i];
    }
    b[i] = 1;
  }
  for (int j = 0; j < LSIM__NLIN; j++) {
    scale[j] = scale[j] > 0 ? sqrt(scale[j]) : 1;
    for (int i = 0; i < n; i++)
      A[(size_t)j * n + i] /= scale[j];
  }
  if (lsim__nnls(A, b, n, LSIM__NLIN, x))
    return HUGE_VAL;
  memset(k, 0, sizeof *k);
  for (int j = 0; j < LSIM__NLIN; j++)
    k->c[lsim__lin[j]] = x[j] / scale[j];
  k->c[LSIM_COST_KNEE] = knee;
  double sse = 0;
  for (int i = 0; i < n; i++) {
    double e = -1;
    for (int j = 0; j < LSIM__NLIN; j++)
      e += A[(size_t)j * n + i] * x[j];
    sse += e * e;
  }
  return sse;
}

int64_t lsim_prof_predict(const lsim_cost_coef *k, const lsim_prof_row *r) {
  lsim_cost_prof p;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  /* lora_modules and lora_elems already hold the layers */
  if (lsim_cost_prof_bind(k, 1, (int)(r->lora_modules > INT32_MAX
                                          ? INT32_MAX
                                          : r->lora_modules),
                          r->lora_elems, &p, &eb))
    return -1;
  return lsim_cost_prof_ns(&p, &r->f);
}

static void lsim__stats(double *rel, double *sgn, int n, lsim_prof_stats *s) {
  memset(s, 0, sizeof *s);
  s->n = n;
  if (n == 0)
    return;
  double sum = 0, bias = 0;
  for (int i = 0; i < n; i++) {
    sum += rel[i];
    bias += sgn[i];
  }
  qsort(rel, (size_t)n, sizeof *rel, lsim__cmp_dbl);
  s->mape = 100 * sum / n;
  s->bias = 100 * bias / n;
  /* nearest rank: the value at rank ceil(p n) */
  s->median = 100 * rel[(n + 1) / 2 - 1];
  s->p90 = 100 * rel[(9 * n + 9) / 10 - 1];
  s->max = 100 * rel[n - 1];
}

static lsim_err lsim__fit_iters(const lsim__pt *pt, int n, lsim_prof_fit *o,
                                lsim_errbuf *eb) {
  double *A = malloc((size_t)n * LSIM__NLIN * sizeof *A);
  double *b = malloc((size_t)n * sizeof *b);
  if (!A || !b) {
    free(A);
    free(b);
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory fitting");
  }
  /* the knee: 64 log-spaced candidates, then golden section around the
  ** best between its neighbours */
  enum { NC = 64 };
  double lo = log(1.0), hi = log(32768.0), best = HUGE_VAL;
  int bi = 0;
  lsim_cost_coef k;
  for (int i = 0; i < NC; i++) {
    double s = lsim__solve(pt, n, exp(lo + (hi - lo) * i / (NC - 1)), &k, A, b);
    if (s < best) {
      best = s;
      bi = i;
    }
  }
  double a = lo + (hi - lo) * (bi > 0 ? bi - 1 : 0) / (NC - 1);
  double c = lo + (hi - lo) * (bi < NC - 1 ? bi + 1 : NC - 1) / (NC - 1);
  const double g = (sqrt(5.0) - 1) / 2;
  double x1 = c - g * (c - a), x2 = a + g * (c - a);
  double f1 = lsim__solve(pt, n, exp(x1), &k, A, b);
  double f2 = lsim__solve(pt, n, exp(x2), &k, A, b);
  for (int it = 0; it < 40; it++) {
    if (f1 <= f2) {
      c = x2;
      x2 = x1;
      f2 = f1;
      x1 = c - g * (c - a);
      f1 = lsim__solve(pt, n, exp(x1), &k, A, b);
    } else {
      a = x1;
      x1 = x2;
      f1 = f2;
      x2 = a + g * (c - a);
      f2 = lsim__solve(pt, n, exp(x2), &k, A, b);
    }
  }
  double kbest = f1 <= f2 ? x1 : x2, fb = f1 <= f2 ? f1 : f2;
  double knee = fb < best ? exp(kbest) : exp(lo + (hi - lo) * bi / (NC - 1));
  /* rounded as a profile stores it, so the residuals are the replay's */
  knee = floor(knee * 1000 + 0.5) / 1000;
  if (lsim__solve(pt, n, knee, &o->coef, A, b) == HUGE_VAL) {
    free(A);
    free(b);
    return lsim_fail(eb, LSIM_E_BUG, "the least-squares solver failed");
  }
  free(A);
  free(b);
  /* residuals of the bound (integer) model */
  double *rel = malloc((size_t)n * sizeof *rel), *sg = malloc((size_t)n * sizeof *sg);
  double *cr = malloc((size_t)n * sizeof *cr), *cs = malloc((size_t)n * sizeof *cs);
  if (!rel || !sg || !cr || !cs) {
    free(rel);
    free(sg);
    free(cr);
    free(cs);
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory fitting");
  }
  double sq = 0;
  for (int i = 0; i < n; i++) {
    double pr = (double)lsim_prof_predict(&o->coef, pt[i].r);
    sg[i] = (pr - pt[i].y) / pt[i].y;
    rel[i] = fabs(sg[i]);
    sq += (pr - pt[i].y) * (pr - pt[i].y);
  }
  o->rmse_ns = sqrt(sq / n);
  for (int cl = 0; cl < LSIM_PROF_NCLASS; cl++) {
    int m = 0;
    for (int i = 0; i < n; i++)
      if (pt[i].r->cls == cl) {
        cr[m] = rel[i];
        cs[m++] = sg[i];
      }
    lsim__stats(cr, cs, m, &o->cls[cl]);
  }
  lsim__stats(rel, sg, n, &o->all);
  free(rel);
  free(sg);
  free(cr);
  free(cs);
  return 0;
}

/* copies: ns = latency + bytes / gbps, non-negative, relative error */
static lsim_err lsim__fit_copies(const lsim__pt *pt, int n, lsim_prof_fit *o,
                                 lsim_errbuf *eb) {
  double *A = malloc((size_t)n * 2 * sizeof *A), *b = malloc((size_t)n * sizeof *b);
  double *rel = malloc((size_t)n * sizeof *rel), *sg = malloc((size_t)n * sizeof *sg);
  lsim_err rc = 0;
  double x[2], sc[2] = {0, 0};
  if (!A || !b || !rel || !sg) {
    rc = lsim_fail(eb, LSIM_E_NOMEM, "out of memory fitting");
    goto out;
  }
  for (int i = 0; i < n; i++) {
    A[i] = 1 / pt[i].y;
    A[n + i] = (double)pt[i].r->bytes / pt[i].y;
    b[i] = 1;
    sc[0] += A[i] * A[i];
    sc[1] += A[n + i] * A[n + i];
  }
  for (int j = 0; j < 2; j++) {
    sc[j] = sc[j] > 0 ? sqrt(sc[j]) : 1;
    for (int i = 0; i < n; i++)
      A[(size_t)j * n + i] /= sc[j];
  }
  if (lsim__nnls(A, b, n, 2, x)) {
    rc = lsim_fail(eb, LSIM_E_BUG, "the least-squares solver failed");
    goto out;
  }
  double lat = x[0] / sc[0], nspb = x[1] / sc[1];
  if (!(nspb > 0)) {
    o->copy_on = 0; /* bytes explained nothing: no copy model */
    goto out;
  }
  o->copy_on = 1;
  o->copy_latency_ns = lat;
  o->copy_gbps = 1 / nspb;
  for (int i = 0; i < n; i++) {
    double pr = ceil(lat + (double)pt[i].r->bytes * nspb);
    sg[i] = (pr - pt[i].y) / pt[i].y;
    rel[i] = fabs(sg[i]);
  }
  lsim__stats(rel, sg, n, &o->copy);
out:
  free(A);
  free(b);
  free(rel);
  free(sg);
  return rc;
}

lsim_err lsim_prof_fit_run(const lsim_prof_row *rows, int n,
                           lsim_prof_fit *out, lsim_errbuf *eb) {
  lsim__pt *it = NULL, *cp = NULL;
  int ni = 0, nc = 0;
  lsim_err rc;
  memset(out, 0, sizeof *out);
  if ((rc = lsim__points(rows, n, LSIM_PROF_ITER, -1, &it, &ni, eb)) ||
      (rc = lsim__points(rows, n, LSIM_PROF_COPY, LSIM_PROF_STAGE, &cp, &nc,
                         eb)))
    goto out;
  /* the stages when they span two sizes, else the pinned copies */
  int sizes = 0;
  for (int i = 0; i < nc && sizes < 2; i++)
    sizes = i == 0 ? 1 : (cp[i].r->bytes != cp[0].r->bytes ? 2 : sizes);
  out->copy_source = LSIM_PROF_STAGE;
  if (sizes < 2) {
    free(cp);
    cp = NULL;
    out->copy_source = LSIM_PROF_H2D;
    if ((rc = lsim__points(rows, n, LSIM_PROF_COPY, LSIM_PROF_H2D, &cp, &nc,
                           eb)))
      goto out;
  }
  if (ni == 0) {
    rc = lsim_fail(eb, LSIM_E_USAGE, "no iteration was measured: nothing "
                                     "to fit");
    goto out;
  }
  if ((rc = lsim__fit_iters(it, ni, out, eb)))
    goto out;
  if (nc >= 2)
    rc = lsim__fit_copies(cp, nc, out, eb);
out:
  free(it);
  free(cp);
  return rc;
}
