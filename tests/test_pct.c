/* Nearest-rank percentiles by selection (sim/pct.c) against a full sort,
** and the plan ledger's distinct-adapter count against a direct count. */
#include <criterion/criterion.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "engine/plan.h"
#include "sim/pct.h"

static int cmp_dbl(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The p-th percentile by its definition: sort, take the ceil(p*n/100)-th
** smallest (at least the first, at most the n-th). */
static double by_sort(const double *v, int64_t n, double p) {
  double *s = malloc((size_t)n * sizeof *s);
  cr_assert_not_null(s);
  memcpy(s, v, (size_t)n * sizeof *s);
  qsort(s, (size_t)n, sizeof *s, cmp_dbl);
  int64_t rank = (int64_t)ceil(p * (double)n / 100.0);
  if (rank < 1)
    rank = 1;
  if (rank > n)
    rank = n;
  double x = s[rank - 1];
  free(s);
  return x;
}

/* Check lsim_pct_nearest on v[0..n) against by_sort, and that it leaves v
** a permutation of what it held. */
static void check(const double *v, int64_t n, const char *what) {
  static const double p[] = {0.001, 1, 25, 50, 90, 99, 99.9, 100};
  const int np = (int)(sizeof p / sizeof p[0]);
  double *w = malloc((size_t)n * sizeof *w), out[8];
  cr_assert_not_null(w);
  memcpy(w, v, (size_t)n * sizeof *w);
  lsim_pct_nearest(w, n, p, np, out);
  for (int i = 0; i < np; i++)
    cr_assert_eq(out[i], by_sort(v, n, p[i]), "%s, n=%lld, p%g: %g, sort %g",
                 what, (long long)n, p[i], out[i], by_sort(v, n, p[i]));
  double *a = malloc((size_t)n * sizeof *a);
  cr_assert_not_null(a);
  memcpy(a, v, (size_t)n * sizeof *a);
  qsort(a, (size_t)n, sizeof *a, cmp_dbl);
  qsort(w, (size_t)n, sizeof *w, cmp_dbl);
  cr_assert_eq(memcmp(a, w, (size_t)n * sizeof *a), 0,
               "%s, n=%lld: not a permutation any more", what, (long long)n);
  free(a);
  free(w);
}

Test(pct, selection_matches_sorting) {
  lsim_rng r;
  lsim_rng_init(&r, 24, 0);
  static const int64_t sizes[] = {1, 2, 3, 7, 64, 100, 101, 1000, 4099};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    int64_t n = sizes[s];
    double *v = malloc((size_t)n * sizeof *v);
    cr_assert_not_null(v);
    /* distinct values, few distinct values (ties everywhere), one value,
    ** ascending, descending, and an organ pipe */
    for (int64_t i = 0; i < n; i++)
      v[i] = lsim_rng_unit(&r) * 1e6;
    check(v, n, "random");
    for (int64_t i = 0; i < n; i++)
      v[i] = (double)lsim_rng_below(&r, 4);
    check(v, n, "four values");
    for (int64_t i = 0; i < n; i++)
      v[i] = 42.5;
    check(v, n, "one value");
    for (int64_t i = 0; i < n; i++)
      v[i] = (double)i;
    check(v, n, "ascending");
    for (int64_t i = 0; i < n; i++)
      v[i] = (double)(n - i);
    check(v, n, "descending");
    for (int64_t i = 0; i < n; i++)
      v[i] = (double)(i < n / 2 ? i : n - i);
    check(v, n, "organ pipe");
    free(v);
  }
}

/* Distinct adapters (>= 0) among the entries, counted directly. */
static int distinct(const lsim_plan *p) {
  int k = 0;
  for (int i = 0; i < p->n; i++) {
    int a = p->e[i].adapter, seen = a < 0;
    for (int j = 0; j < i && !seen; j++)
      seen = p->e[j].adapter == a;
    k += !seen;
  }
  return k;
}

Test(pct, plan_counts_distinct_adapters_and_segments) {
  lsim_rng r;
  lsim_rng_init(&r, 7, 0);
  lsim_errbuf eb = {0};
  /* small plans (the stack buffer), large ones (past it), adapters in
  ** runs or scattered, ascending or not, base-only entries among them */
  static const int sizes[] = {0, 1, 2, 5, 64, 127, 128, 129, 300};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
    for (int shape = 0; shape < 4; shape++) {
      lsim_plan p = {0};
      int segments = 0, prev = -2;
      for (int i = 0; i < sizes[s]; i++) {
        int a = shape == 0   ? (int)lsim_rng_below(&r, 9) - 1 /* -1: base */
                : shape == 1 ? i / 3                        /* ascending */
                : shape == 2 ? (sizes[s] - i) / 4           /* descending */
                             : (int)lsim_rng_below(&r, 1000);
        lsim_plan_entry e = {.request = i, .adapter = a, .rank = 8,
                             .phase = LSIM_PHASE_DECODE, .rows = 1};
        cr_assert_eq(lsim_plan_push(&p, &e, &eb), 0);
        segments += a != prev;
        prev = a;
      }
      cr_assert_eq(lsim_plan_finish(&p, &eb), 0, "%s", eb.msg);
      cr_assert_eq(p.distinct_adapters, distinct(&p),
                   "n=%d shape %d: %d distinct, counted %d", sizes[s], shape,
                   p.distinct_adapters, distinct(&p));
      cr_assert_eq(p.segments, segments, "n=%d shape %d", sizes[s], shape);
      cr_assert_eq(p.decode_rows, sizes[s]);
      lsim_plan_release(&p);
    }
}
