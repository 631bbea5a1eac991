/*
** evict_gdsf.c: GreedyDual-Size-Frequency, cost aware.  Each adapter has a
** priority H = L + F * C / S, set when it is used: F uses since it was last
** evicted, C the reload cost (bytes to copy), S its size in pages, L the
** worker's inflation value.  The lowest H is evicted and L rises to that H,
** so adapters that were not used for a while age out.  Integer arithmetic
** only (C / S in bytes per page, times F), so runs are bit-reproducible;
** ties go to the lower adapter id.
**
** State (engine-owned, per worker): L, then F and H for every adapter.
*/
#include <string.h>

#include "policy.h"

typedef struct lsim__gdsf {
  int n;
  int64_t L;
  /* followed by int64_t F[n], H[n] */
} lsim__gdsf;

static int64_t *lsim__F(void *st) { return (int64_t *)((lsim__gdsf *)st + 1); }
static int64_t *lsim__H(void *st) {
  return lsim__F(st) + ((lsim__gdsf *)st)->n;
}

static size_t lsim__gdsf_bytes(int n) {
  return sizeof(lsim__gdsf) + 2 * (size_t)n * sizeof(int64_t);
}

static lsim_err lsim__gdsf_init(void *st, int n) {
  memset(st, 0, lsim__gdsf_bytes(n));
  ((lsim__gdsf *)st)->n = n;
  return 0;
}

static void lsim__gdsf_use(void *st, int a, lsim_tick now, int64_t pages,
                           int64_t cost) {
  (void)now;
  lsim__gdsf *g = st;
  if (a < 0 || a >= g->n)
    return;
  int64_t *F = lsim__F(st), *H = lsim__H(st);
  F[a]++;
  int64_t per_page = cost / (pages > 0 ? pages : 1);
  H[a] = g->L + F[a] * per_page;
}

static int lsim__gdsf_pick(void *st, lsim_tick now, const lsim_evict_cand *c,
                           int n) {
  (void)now;
  lsim__gdsf *g = st;
  int64_t *F = lsim__F(st), *H = lsim__H(st);
  int best = 0;
  for (int i = 1; i < n; i++) {
    int a = c[i].adapter, b = c[best].adapter;
    if (H[a] < H[b] || (H[a] == H[b] && a < b))
      best = i;
  }
  int v = c[best].adapter;
  if (H[v] > g->L)
    g->L = H[v];
  F[v] = 0;
  return best;
}

const lsim_evict_ops lsim_evict_gdsf = {
    /* .name         = */ "gdsf",
    /* .state_size   = */ sizeof(lsim__gdsf),
    /* .init         = */ lsim__gdsf_init,
    /* .pick         = */ lsim__gdsf_pick,
    /* .state_bytes  = */ lsim__gdsf_bytes,
    /* .on_use       = */ lsim__gdsf_use,
    /* .needs_future = */ 0,
};
