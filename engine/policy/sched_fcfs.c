/*
** sched_fcfs.c: first come, first served among eligible requests.
** Order: arrival tick, then request id (ids are assigned in arrival order,
** so ties at one tick keep trace order).
*/
#include "policy.h"

static void lsim__fcfs_order(void *state, lsim_tick now,
                             const lsim_sched_cand *c, int n, int *order) {
  (void)state;
  (void)now;
  /* Insertion sort: the engine hands candidates already close to arrival
  ** order, so this is linear in practice and stable by construction. */
  for (int i = 0; i < n; i++) {
    int j = i;
    order[i] = i;
    while (j > 0) {
      const lsim_sched_cand *a = &c[order[j - 1]], *b = &c[order[j]];
      int later = a->arrival_tick > b->arrival_tick ||
                  (a->arrival_tick == b->arrival_tick && a->request > b->request);
      if (!later)
        break;
      int t = order[j - 1];
      order[j - 1] = order[j];
      order[j] = t;
      j--;
    }
  }
}

const lsim_sched_ops lsim_sched_fcfs = {
    /* .name       = */ "fcfs",
    /* .state_size = */ 0,
    /* .init       = */ NULL,
    /* .order      = */ lsim__fcfs_order,
    /* .on_service = */ NULL,
    /* .state_bytes = */ NULL,
    /* .load_ok    = */ NULL,
    /* .on_backlog = */ NULL,
    /* .load_when_idle = */ 0,
};
