/*
** sched_slora_cluster.c: S-LoRA-style adapter clustering in a bounded
** window (article 0x09F).
**
** Start from first-come-first-served order.  Within the first
** cluster_window candidates of that order, requests whose adapter the head
** request uses, or that the running batch already uses (no added run),
** move to the front, keeping their relative order; the rest follow in
** arrival order.  The window bounds how far clustering can defer an older
** request: at most cluster_window - 1 candidates overtake it per iteration.
** Loads are on demand (no gate).  Fewer adapters per batch is an
** efficiency objective here, not a fairness rule.  With a compressed
** collection and an affinity weight, a candidate whose basis cluster the
** running batch already uses (affinity cost 0) moves forward too.
*/
#include "policy.h"

typedef struct lsim__cluster {
  int window;
  int affinity; /* basis-cluster affinity counts (compressed collections) */
} lsim__cluster;

static int lsim__near(const lsim__cluster *s, const lsim_sched_cand *x,
                      int head) {
  return x->adapter == head || x->cost.added_runs == 0 ||
         (s->affinity && x->cost.affinity == 0);
}

static int lsim__fifo_cmp(const void *ctx, int i, int j) {
  const lsim_sched_cand *a = (const lsim_sched_cand *)ctx + i;
  const lsim_sched_cand *b = (const lsim_sched_cand *)ctx + j;
  if (a->arrival_tick != b->arrival_tick)
    return a->arrival_tick < b->arrival_tick ? -1 : 1;
  return a->request < b->request ? -1 : a->request > b->request;
}

static lsim_err lsim__cluster_init(void *state, const lsim_sched_params *p) {
  lsim__cluster *s = state;
  s->window = p->cluster_window > 0 ? p->cluster_window : 1;
  s->affinity = p->affinity_weight > 0;
  return 0;
}

static void lsim__cluster_order(void *state, lsim_tick now,
                                const lsim_sched_cand *c, int n, int *order) {
  const lsim__cluster *s = state;
  (void)now;
  for (int i = 0; i < n; i++)
    order[i] = i;
  lsim_policy_sort(order, n, lsim__fifo_cmp, c);
  if (n < 2)
    return;
  int win = s->window < n ? s->window : n;
  int head = c[order[0]].adapter;
  int tmp[LSIM_POLICY_SORT_MAX];
  int k = 0;
  for (int i = 0; i < win; i++) {
    const lsim_sched_cand *x = &c[order[i]];
    if (lsim__near(s, x, head))
      tmp[k++] = order[i];
  }
  for (int i = 0; i < win; i++) {
    const lsim_sched_cand *x = &c[order[i]];
    if (!lsim__near(s, x, head))
      tmp[k++] = order[i];
  }
  for (int i = 0; i < win; i++)
    order[i] = tmp[i];
}

const lsim_sched_ops lsim_sched_slora_cluster = {
    /* .name        = */ "slora_cluster",
    /* .state_size  = */ sizeof(lsim__cluster),
    /* .init        = */ lsim__cluster_init,
    /* .order       = */ lsim__cluster_order,
    /* .on_service  = */ NULL,
    /* .state_bytes = */ NULL,
    /* .load_ok     = */ NULL,
    /* .on_backlog  = */ NULL,
    /* .load_when_idle = */ 0,
};
