/*
** sched_vtc.c: the virtual token counter (Sheng et al., "Fairness in
** Serving Large Language Models"), over ready candidates.
**
** Each tenant u has a counter c_u that grows by (w_in * input + w_out *
** output) / weight_u at every completed_service_debited publication.
** Candidates run in increasing counter order (exact cross-multiplied
** comparison), then arrival, then id.  When a tenant returns to the
** backlog (its backlog goes 0 -> 1), its counter is lifted to the smallest
** counter among tenants still backlogged, so idle time is not banked as
** credit.  Loads are on demand (no gate).  The VTC service-gap bound
** (2 * max(w_in * max prompt, w_out * max batch tokens)) is reported next
** to the observed gap; it is the paper's bound for its own setting and is
** not claimed to hold once readiness and loading gate the candidates.
**
** Counters are kept as numerators over each tenant's weight: c_u =
** num_u / weight_u.
*/
#include "policy.h"

typedef struct lsim__vtc {
  int ntenants;
  int64_t w_in, w_out;
  /* followed by num[ntenants], weight[ntenants], backlog[ntenants] */
} lsim__vtc;

static int64_t *lsim__num(lsim__vtc *s) { return (int64_t *)(s + 1); }
static int64_t *lsim__w(lsim__vtc *s) { return lsim__num(s) + s->ntenants; }
static int64_t *lsim__bl(lsim__vtc *s) { return lsim__w(s) + s->ntenants; }

static size_t lsim__vtc_bytes(const lsim_sched_params *p) {
  return sizeof(lsim__vtc) + 3 * (size_t)p->ntenants * sizeof(int64_t);
}

static lsim_err lsim__vtc_init(void *state, const lsim_sched_params *p) {
  lsim__vtc *s = state;
  s->ntenants = p->ntenants;
  s->w_in = p->w_in;
  s->w_out = p->w_out;
  for (int t = 0; t < p->ntenants; t++) {
    lsim__num(s)[t] = 0;
    lsim__bl(s)[t] = 0;
    lsim__w(s)[t] = p->tenant_weight ? p->tenant_weight[t] : 1;
    if (lsim__w(s)[t] < 1)
      return LSIM_E_POLICY;
  }
  return 0;
}

/* c_a < c_b as rationals: <0, 0, >0 */
static int lsim__vtc_less(lsim__vtc *s, int a, int b) {
  __int128 l = (__int128)lsim__num(s)[a] * lsim__w(s)[b];
  __int128 r = (__int128)lsim__num(s)[b] * lsim__w(s)[a];
  return l < r ? -1 : l > r;
}

typedef struct lsim__vctx {
  const lsim_sched_cand *c;
  lsim__vtc *s;
} lsim__vctx;

static int lsim__vtc_cmp(const void *ctx, int i, int j) {
  const lsim__vctx *x = ctx;
  const lsim_sched_cand *a = &x->c[i], *b = &x->c[j];
  int k = lsim__vtc_less(x->s, a->tenant, b->tenant);
  if (k)
    return k;
  if (a->arrival_tick != b->arrival_tick)
    return a->arrival_tick < b->arrival_tick ? -1 : 1;
  return a->request < b->request ? -1 : a->request > b->request;
}

static void lsim__vtc_order(void *state, lsim_tick now,
                            const lsim_sched_cand *c, int n, int *order) {
  lsim__vctx x = {c, state};
  (void)now;
  for (int i = 0; i < n; i++)
    order[i] = i;
  lsim_policy_sort(order, n, lsim__vtc_cmp, &x);
}

static void lsim__vtc_service(void *state, int tenant, int adapter,
                              int64_t in, int64_t out) {
  lsim__vtc *s = state;
  (void)adapter;
  if (tenant >= 0 && tenant < s->ntenants)
    lsim__num(s)[tenant] += s->w_in * in + s->w_out * out;
}

static void lsim__vtc_backlog(void *state, int tenant, int delta) {
  lsim__vtc *s = state;
  if (tenant < 0 || tenant >= s->ntenants)
    return;
  int64_t *bl = lsim__bl(s);
  if (delta > 0 && bl[tenant] == 0) {
    /* the lift: max(own, min over the other backlogged tenants) */
    int m = -1;
    for (int t = 0; t < s->ntenants; t++)
      if (t != tenant && bl[t] > 0 && (m < 0 || lsim__vtc_less(s, t, m) < 0))
        m = t;
    if (m >= 0 && lsim__vtc_less(s, tenant, m) < 0) {
      /* num_t / w_t >= num_m / w_m, rounded up to stay at or above */
      __int128 v = (__int128)lsim__num(s)[m] * lsim__w(s)[tenant];
      int64_t wm = lsim__w(s)[m];
      lsim__num(s)[tenant] = (int64_t)((v + wm - 1) / wm);
    }
  }
  bl[tenant] += delta;
}

const lsim_sched_ops lsim_sched_vtc = {
    /* .name        = */ "vtc",
    /* .state_size  = */ sizeof(lsim__vtc),
    /* .init        = */ lsim__vtc_init,
    /* .order       = */ lsim__vtc_order,
    /* .on_service  = */ lsim__vtc_service,
    /* .state_bytes = */ lsim__vtc_bytes,
    /* .load_ok     = */ NULL,
    /* .on_backlog  = */ lsim__vtc_backlog,
    /* .load_when_idle = */ 0,
};
