/*
** pct.c: nearest-rank percentiles by selection (pct.h).
*/
#include "pct.h"

#include <math.h>

void lsim_pct_kth(double *v, int64_t n, int64_t k) {
  int64_t lo = 0, hi = n - 1;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    double a = v[lo], b = v[mid], c = v[hi];
    double piv = a < b ? (b < c ? b : (a < c ? c : a))
                       : (a < c ? a : (b < c ? c : b));
    int64_t i = lo, j = hi;
    while (i <= j) {
      while (v[i] < piv)
        i++;
      while (v[j] > piv)
        j--;
      if (i <= j) {
        double t = v[i];
        v[i++] = v[j];
        v[j--] = t;
      }
    }
    /* v[lo..j] <= piv <= v[i..hi], and v[j+1..i-1] == piv */
    if (k <= j)
      hi = j;
    else if (k >= i)
      lo = i;
    else
      return;
  }
}

void lsim_pct_nearest(double *v, int64_t n, const double *p, int np,
                      double *out) {
  int64_t from = 0;
  for (int i = 0; i < np; i++) {
    int64_t rank = (int64_t)ceil(p[i] * (double)n / 100.0);
    if (rank < 1)
      rank = 1;
    if (rank > n)
      rank = n;
    /* after the previous pick everything from v[from] on is no smaller
    ** than it: select within v[from..n) */
    if (rank - 1 >= from) {
      lsim_pct_kth(v + from, n - from, rank - 1 - from);
      from = rank - 1;
    }
    out[i] = v[rank - 1];
  }
}
