/*
** sched_deficit_aging.c: completed-service deficit with aging and adapter
** affinity, the article's lexicographic local key (0x09C, 0x09G).
**
** Lower keys run first, compared field by field:
**   1. urgency class of the request (serving layer; 0 today);
**   2. the tenant's completed weighted service divided by its weight
**      (compared exactly by cross-multiplication, never in floating point);
**   3. minus the age class, floor((now - arrival) / age_ticks): older
**      classes first, so affinity can never defer a request forever;
**   4. the adapter cost vector (lsim_adapter_cost, lexicographic);
**   5. arrival tick, then request id.
** Service is what the engine reported at completed_service_debited
** (on_service): planned or failed work never moves it.
**
** The key orders only ready candidates; a cold request is never shown to
** it.  Demand loads start when the worker has no ready work; load progress
** under a steady resident stream comes from the age_triggered prefetch
** policy.  Nothing pairs the two behind the caller's back (a scheduler
** never picks the prefetch policy): name the pair, as an arm of
** `lorasim compare --arms deficit_aging:lru:age_triggered`
** (tests/fixtures/replay/sixtick.json is the article's witness so run).
*/
#include <string.h>

#include "policy.h"

typedef struct lsim__deficit {
  int ntenants;
  int64_t w_in, w_out, age_ticks;
  /* followed by service[ntenants], weight[ntenants] */
} lsim__deficit;

static int64_t *lsim__svc(lsim__deficit *s) { return (int64_t *)(s + 1); }
static int64_t *lsim__wt(lsim__deficit *s) {
  return lsim__svc(s) + s->ntenants;
}

static size_t lsim__deficit_bytes(const lsim_sched_params *p) {
  return sizeof(lsim__deficit) + 2 * (size_t)p->ntenants * sizeof(int64_t);
}

static lsim_err lsim__deficit_init(void *state, const lsim_sched_params *p) {
  lsim__deficit *s = state;
  s->ntenants = p->ntenants;
  s->w_in = p->w_in;
  s->w_out = p->w_out;
  s->age_ticks = p->age_ticks > 0 ? p->age_ticks : 1;
  for (int t = 0; t < p->ntenants; t++) {
    lsim__svc(s)[t] = 0;
    lsim__wt(s)[t] = p->tenant_weight ? p->tenant_weight[t] : 1;
    if (lsim__wt(s)[t] < 1)
      return LSIM_E_POLICY;
  }
  return 0;
}

typedef struct lsim__dctx {
  const lsim_sched_cand *c;
  lsim__deficit *s;
  lsim_tick now;
} lsim__dctx;

static int lsim__deficit_cmp(const void *ctx, int i, int j) {
  const lsim__dctx *x = ctx;
  const lsim_sched_cand *a = &x->c[i], *b = &x->c[j];
  if (a->urgency != b->urgency)
    return a->urgency < b->urgency ? -1 : 1;
  int64_t *svc = lsim__svc(x->s), *wt = lsim__wt(x->s);
  __int128 l = (__int128)svc[a->tenant] * wt[b->tenant];
  __int128 r = (__int128)svc[b->tenant] * wt[a->tenant];
  if (l != r)
    return l < r ? -1 : 1;
  int64_t ca = (x->now - a->arrival_tick) / x->s->age_ticks;
  int64_t cb = (x->now - b->arrival_tick) / x->s->age_ticks;
  if (ca != cb)
    return ca > cb ? -1 : 1;
  int k = lsim_adapter_cost_cmp(&a->cost, &b->cost);
  if (k)
    return k;
  if (a->arrival_tick != b->arrival_tick)
    return a->arrival_tick < b->arrival_tick ? -1 : 1;
  return a->request < b->request ? -1 : a->request > b->request;
}

static void lsim__deficit_order(void *state, lsim_tick now,
                                const lsim_sched_cand *c, int n, int *order) {
  lsim__dctx x = {c, state, now};
  for (int i = 0; i < n; i++)
    order[i] = i;
  lsim_policy_sort(order, n, lsim__deficit_cmp, &x);
}

static void lsim__deficit_service(void *state, int tenant, int adapter,
                                  int64_t in, int64_t out) {
  lsim__deficit *s = state;
  (void)adapter;
  if (tenant >= 0 && tenant < s->ntenants)
    lsim__svc(s)[tenant] += s->w_in * in + s->w_out * out;
}

const lsim_sched_ops lsim_sched_deficit_aging = {
    /* .name        = */ "deficit_aging",
    /* .state_size  = */ sizeof(lsim__deficit),
    /* .init        = */ lsim__deficit_init,
    /* .order       = */ lsim__deficit_order,
    /* .on_service  = */ lsim__deficit_service,
    /* .state_bytes = */ lsim__deficit_bytes,
    /* .load_ok     = */ NULL, /* load_when_idle instead */
    /* .on_backlog  = */ NULL,
    /* .load_when_idle = */ 1,
};
