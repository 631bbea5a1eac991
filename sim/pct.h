/*
** pct.h: nearest-rank percentiles of an array of doubles, by selection.
**
** The p-th percentile of n values is the ceil(p*n/100)-th smallest (at
** least the first, at most the n-th), as the summary, the per-tenant
** figures and docs/SCHEMA.md define it.  Selection finds the same value a
** full sort would, in linear time on average: only order statistics are
** read, so the result does not depend on how the array is permuted.
*/
#ifndef LSIM_PCT_H
#define LSIM_PCT_H

#include <stdint.h>

/* Move the k-th smallest of v[0..n) (0-based, k < n) to v[k], the smaller
** ones before it and the larger ones after it (quickselect, median-of-three
** pivot; deterministic).  Leaves v a permutation of what it held. */
void lsim_pct_kth(double *v, int64_t n, int64_t k);

/* The nearest-rank percentiles p[0] <= p[1] <= ... <= p[np-1] of v[0..n)
** into out[0..np), reordering v.  n must be at least 1. */
void lsim_pct_nearest(double *v, int64_t n, const double *p, int np,
                      double *out);

#endif /* LSIM_PCT_H */
