/*
** eorder.c: the balanced block order of the tensor-core expand (eorder.h).
*/
#include "eorder.h"

#include <stdlib.h>

typedef struct {
  long long w;
  int k, y;
} lsim__eitem;

/* The columns block (k, y) covers, as the kernel computes them
** (expand.cu, lsim__expand_mma). */
static int lsim__ecols(int r, int y, int len, int rsplit, int d_out,
                       int kc) {
  int c0 = y * len, c1 = c0 + len;
  if (rsplit) {
    const int f = r <= 16 ? 1 : r >= 64 ? 4 : (r + 15) / 16;
    const int sl = (len / f + kc - 1) / kc * kc;
    const int sub = y & 3, r0 = (y >> 2) * len;
    if (sub >= f)
      return 0;
    c0 = r0 + sub * sl;
    c1 = r0 + len < c0 + sl ? r0 + len : c0 + sl;
  }
  if (c1 > d_out)
    c1 = d_out;
  return c1 > c0 ? c1 - c0 : 0;
}

static long long lsim__eweight(const int *rank, const int *rows, int k,
                               int y, int len, int rsplit, int d_out,
                               int kc) {
  const int c = lsim__ecols(rank[k], y, len, rsplit, d_out, kc);
  return (long long)(rank[k] + 2 * rows[k] + 16) * c + 1;
}

static int lsim__eitem_cmp(const void *a, const void *b) {
  const lsim__eitem *x = (const lsim__eitem *)a, *y = (const lsim__eitem *)b;
  if (x->w != y->w)
    return x->w > y->w ? -1 : 1;
  if (x->y != y->y)
    return x->y < y->y ? -1 : 1;
  return (x->k > y->k) - (x->k < y->k);
}

/* heap order: the lighter slot first, the lower slot on a tie */
static int lsim__slot_before(const long long *load, int a, int b) {
  return load[a] < load[b] || (load[a] == load[b] && a < b);
}

static void lsim__sift_down(int *heap, int nh, const long long *load) {
  int i = 0;
  for (;;) {
    int m = i;
    const int l = 2 * i + 1, r = l + 1;
    if (l < nh && lsim__slot_before(load, heap[l], heap[m]))
      m = l;
    if (r < nh && lsim__slot_before(load, heap[r], heap[m]))
      m = r;
    if (m == i)
      return;
    const int t = heap[i];
    heap[i] = heap[m];
    heap[m] = t;
    i = m;
  }
}

int lsim_cuda_expand_order(int ntiles, const int *rank, const int *rows,
                           int ny, int len, int rsplit, int d_out, int kc,
                           int nsm, int *out) {
  if (ntiles < 1 || ny < 1 || len < 1 || kc < 1 || nsm < 1 || !rank ||
      !rows || !out || (long long)ntiles * ny > 0x3fffffff)
    return -1;
  const int n = ntiles * ny;
  lsim__eitem *it = (lsim__eitem *)malloc((size_t)n * sizeof *it);
  long long *load = (long long *)calloc((size_t)nsm, sizeof *load);
  int *cnt = (int *)calloc((size_t)nsm, sizeof *cnt);
  int *heap = (int *)malloc((size_t)nsm * sizeof *heap);
  if (!it || !load || !cnt || !heap) {
    free(it);
    free(load);
    free(cnt);
    free(heap);
    return -1;
  }
  for (int y = 0; y < ny; y++)
    for (int k = 0; k < ntiles; k++) {
      lsim__eitem *e = &it[(size_t)y * ntiles + k];
      e->k = k;
      e->y = y;
      e->w = lsim__eweight(rank, rows, k, y, len, rsplit, d_out, kc);
    }
  qsort(it, (size_t)n, sizeof *it, lsim__eitem_cmp);
  /* the slots with room in a binary heap on (weight, slot): a plan's
  ** blocks cost O(n log sms), not O(n sms).  The slots' room adds up to
  ** n, so the heap is empty only after the last block. */
  const int ns = nsm < n ? nsm : n;
  int nh = 0;
  for (int s = 0; s < ns; s++)
    heap[nh++] = s; /* all at weight 0: in slot order, already a heap */
  for (int b = 0; b < n; b++) {
    const int best = heap[0];
    const int pos = best + nsm * cnt[best];
    cnt[best]++;
    load[best] += it[b].w;
    out[2 * pos] = it[b].k;
    out[2 * pos + 1] = it[b].y;
    if (cnt[best] >= (n - 1 - best) / nsm + 1) /* full: leaves the heap */
      heap[0] = heap[--nh];
    lsim__sift_down(heap, nh, load);
  }
  free(it);
  free(load);
  free(cnt);
  free(heap);
  return n;
}

long long lsim_cuda_expand_order_cost(int ntiles, const int *rank,
                                      const int *rows, int ny, int len,
                                      int rsplit, int d_out, int kc, int nsm,
                                      const int *out) {
  const int n = ntiles * ny;
  long long *load = (long long *)calloc((size_t)nsm, sizeof *load), most = 0;
  if (!load)
    return -1;
  for (int p = 0; p < n; p++) {
    const int k = out ? out[2 * p] : p % ntiles;
    const int y = out ? out[2 * p + 1] : p / ntiles;
    load[p % nsm] += lsim__eweight(rank, rows, k, y, len, rsplit, d_out, kc);
  }
  for (int s = 0; s < nsm; s++)
    if (load[s] > most)
      most = load[s];
  free(load);
  return most;
}
