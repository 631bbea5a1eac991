/*
** sched_resident_greedy.c: prefer what is already resident and running.
**
** Order among ready candidates: fewest added runs (an adapter the running
** batch already uses first), then, for a compressed collection with an
** affinity weight, the basis-cluster affinity cost (a cluster the running
** batch already uses first: its shared V and U stages are paid already),
** then arrival, then id.  Only candidates that passed every predicate
** are ordered, so affinity never admits one that failed.  Demand loads start
** only when the worker has no execution-eligible work at all, and the
** policy never ages a cold request: as long as resident work keeps coming,
** a cold adapter is never loaded.  This is the baseline the article's
** six-tick witness (0x09I) shows load-starving a cold adapter.
*/
#include "policy.h"

static int lsim__greedy_cmp(const void *ctx, int i, int j) {
  const lsim_sched_cand *a = (const lsim_sched_cand *)ctx + i;
  const lsim_sched_cand *b = (const lsim_sched_cand *)ctx + j;
  if (a->resident != b->resident)
    return a->resident ? -1 : 1;
  if (a->cost.added_runs != b->cost.added_runs)
    return a->cost.added_runs < b->cost.added_runs ? -1 : 1;
  if (a->cost.affinity != b->cost.affinity)
    return a->cost.affinity < b->cost.affinity ? -1 : 1;
  if (a->arrival_tick != b->arrival_tick)
    return a->arrival_tick < b->arrival_tick ? -1 : 1;
  return a->request < b->request ? -1 : a->request > b->request;
}

static void lsim__greedy_order(void *state, lsim_tick now,
                               const lsim_sched_cand *c, int n, int *order) {
  (void)state;
  (void)now;
  for (int i = 0; i < n; i++)
    order[i] = i;
  lsim_policy_sort(order, n, lsim__greedy_cmp, c);
}

const lsim_sched_ops lsim_sched_resident_greedy = {
    /* .name        = */ "resident_greedy",
    /* .state_size  = */ 0,
    /* .init        = */ NULL,
    /* .order       = */ lsim__greedy_order,
    /* .on_service  = */ NULL,
    /* .state_bytes = */ NULL,
    /* .load_ok     = */ NULL, /* load_when_idle instead */
    /* .on_backlog  = */ NULL,
    /* .load_when_idle = */ 1,
};
