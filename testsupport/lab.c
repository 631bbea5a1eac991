/*
** lab.c: reference predicates and the teaching rules (see lab.h).
*/
#include "lab.h"

#include <string.h>

int lsim_pred_feasible(const lsim_pred_req *r, const lsim_pred_worker *w,
                       const lsim_pred_slot *s) {
  if (r->base_abi != w->base_abi)
    return 0;
  if ((r->targets & ~w->targets) != 0)
    return 0;
  if (r->rank > w->max_rank)
    return 0;
  if (r->layout < 0 || r->layout > 31 || !(w->layouts & (1u << r->layout)))
    return 0;
  if (r->gen != r->lease_gen)
    return 0;
  /* joint reserve: a resident or leased slot needs only KV; a cold one
  ** needs the adapter pages too */
  int64_t need = r->kv_pages;
  int on_slot = s->state == LSIM_PSLOT_RESIDENT || s->state == LSIM_PSLOT_LOADING ||
                (s->state == LSIM_PSLOT_RETIRING && r->holds_lease);
  if (!on_slot)
    need += r->adapter_pages;
  return need <= w->free_pages;
}

int lsim_pred_ready(const lsim_pred_req *r, const lsim_pred_worker *w,
                    const lsim_pred_slot *s) {
  if (!lsim_pred_feasible(r, w, s))
    return 0;
  int state_ok = s->state == LSIM_PSLOT_RESIDENT ||
                 (s->state == LSIM_PSLOT_RETIRING && r->holds_lease);
  return state_ok && s->copy_complete && s->published_gen == r->gen;
}

int lsim_pred_eligible(const lsim_pred_req *r, const lsim_pred_worker *w,
                       const lsim_pred_slot *s, int64_t tokens_left,
                       int slots_left) {
  return lsim_pred_ready(r, w, s) && slots_left > 0 &&
         r->tokens <= tokens_left;
}

typedef struct lsim__lctx {
  const lsim_pred_req *r;
  const int64_t *service, *weight;
  lsim_tick now;
} lsim__lctx;

static int lsim__local_cmp(const void *ctx, int i, int j) {
  const lsim__lctx *x = ctx;
  const lsim_pred_req *a = &x->r[i], *b = &x->r[j];
  int64_t wa = x->weight ? x->weight[a->tenant] : 1;
  int64_t wb = x->weight ? x->weight[b->tenant] : 1;
  __int128 l = (__int128)x->service[a->tenant] * wb;
  __int128 rr = (__int128)x->service[b->tenant] * wa;
  if (l != rr)
    return l < rr ? -1 : 1;
  int64_t ga = x->now - a->arrival, gb = x->now - b->arrival;
  if (ga != gb)
    return ga > gb ? -1 : 1;
  if (a->affinity_bonus != b->affinity_bonus)
    return a->affinity_bonus > b->affinity_bonus ? -1 : 1;
  if (a->arrival != b->arrival)
    return a->arrival < b->arrival ? -1 : 1;
  return a->id < b->id ? -1 : a->id > b->id;
}

void lsim_pred_select(const lsim_pred_req *r, const lsim_pred_slot *slots,
                      int n, const lsim_pred_worker *w,
                      const int64_t *service, const int64_t *weight,
                      lsim_tick now, int64_t token_budget, int max_requests,
                      int *feasible, int *nfeasible, int *ready, int *nready,
                      int *selected, int *nselected) {
  int nf = 0, nr = 0, ns = 0;
  int order[LSIM_POLICY_SORT_MAX];
  for (int i = 0; i < n && i < LSIM_POLICY_SORT_MAX; i++) {
    if (lsim_pred_feasible(&r[i], w, &slots[i]) && feasible)
      feasible[nf] = i;
    nf += lsim_pred_feasible(&r[i], w, &slots[i]);
    if (lsim_pred_ready(&r[i], w, &slots[i]))
      order[nr++] = i;
  }
  if (ready)
    memcpy(ready, order, (size_t)nr * sizeof *order);
  /* preference: among the ready only */
  lsim__lctx x = {r, service, weight, now};
  lsim_policy_sort(order, nr, lsim__local_cmp, &x);
  int64_t tokens = token_budget;
  int left = max_requests;
  for (int k = 0; k < nr; k++) {
    int i = order[k];
    if (!lsim_pred_eligible(&r[i], w, &slots[i], tokens, left))
      break; /* packing keeps the key's order: no overtaking */
    if (selected)
      selected[ns] = i;
    ns++;
    tokens -= r[i].tokens;
    left--;
  }
  if (nfeasible)
    *nfeasible = nf;
  if (nready)
    *nready = nr;
  if (nselected)
    *nselected = ns;
}

int lsim_pets_partition(const int *lens, int n,
                        int64_t (*cost)(void *ud, int size, int max_len),
                        void *ud, int *ends, int64_t *total) {
  int64_t d[65];
  int from[65];
  if (n < 0 || n > 64)
    return -1;
  d[0] = 0;
  for (int i = 1; i <= n; i++) {
    d[i] = INT64_MAX;
    from[i] = 0;
    for (int j = 1; j <= i; j++) {
      int64_t c = d[j - 1] + cost(ud, i - j + 1, lens[i - 1]);
      if (c < d[i]) {
        d[i] = c;
        from[i] = j - 1;
      }
    }
  }
  int k = 0, tmp[64];
  for (int i = n; i > 0; i = from[i])
    tmp[k++] = i;
  for (int i = 0; i < k; i++)
    ends[i] = tmp[k - 1 - i];
  *total = d[n];
  return k;
}

int lsim_slora_abort_choice(lsim_tick now, int64_t est_prefill,
                            int64_t max_latency, const lsim_tick *arrival,
                            int n, int count, double arrival_rate,
                            double admit_rate, int *out) {
  int ok[256], m = 0;
  for (int i = 0; i < n && m < 256; i++)
    if (now - arrival[i] + est_prefill <= max_latency)
      ok[m++] = i;
  /* ok[] is in input order; inputs are in arrival order */
  int k = 0;
  if (arrival_rate > admit_rate)
    for (int i = m - 1; i >= 0 && k < count; i--)
      out[k++] = ok[i];
  else
    for (int i = 0; i < m && k < count; i++)
      out[k++] = ok[i];
  return k;
}
