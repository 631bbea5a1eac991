/*
** prefetch_age.c: age-triggered prefetch.  A cold adapter is proposed once
** its oldest waiting request has waited age_ticks ($.fairness.age_ticks),
** oldest first (ties in queue order), first-fit within the speculative
** budget.  This is the load-progress protection that keeps a steady stream
** of resident work from load-starving a cold adapter (article 0x09I).
*/
#include "policy.h"

typedef struct lsim__age {
  int64_t age_ticks;
} lsim__age;

static lsim_err lsim__age_init(void *state, int nadapters, int64_t age) {
  lsim__age *s = state;
  (void)nadapters;
  s->age_ticks = age > 0 ? age : 1;
  return 0;
}

typedef struct lsim__actx {
  const lsim_prefetch_cand *c;
} lsim__actx;

static int lsim__age_cmp(const void *ctx, int i, int j) {
  const lsim_prefetch_cand *c = ((const lsim__actx *)ctx)->c;
  if (c[i].oldest_arrival != c[j].oldest_arrival)
    return c[i].oldest_arrival < c[j].oldest_arrival ? -1 : 1;
  return i < j ? -1 : i > j;
}

static int lsim__age_propose(void *state, lsim_tick now,
                             const lsim_prefetch_view *v, int *out, int max) {
  const lsim__age *s = state;
  int idx[LSIM_POLICY_SORT_MAX];
  int n = 0;
  for (int i = 0; i < v->ncold && n < LSIM_POLICY_SORT_MAX; i++)
    if (now - v->cold[i].oldest_arrival >= s->age_ticks)
      idx[n++] = i;
  lsim__actx x = {v->cold};
  lsim_policy_sort(idx, n, lsim__age_cmp, &x);
  int64_t left = v->free_pages;
  int k = 0;
  for (int i = 0; i < n && k < max; i++)
    if (v->cold[idx[i]].pages <= left) {
      out[k++] = v->cold[idx[i]].adapter;
      left -= v->cold[idx[i]].pages;
    }
  return k;
}

const lsim_prefetch_ops lsim_prefetch_age_triggered = {
    /* .name       = */ "age_triggered",
    /* .state_size = */ sizeof(lsim__age),
    /* .init       = */ lsim__age_init,
    /* .propose    = */ lsim__age_propose,
};
