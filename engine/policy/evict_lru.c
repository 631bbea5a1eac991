/*
** evict_lru.c: least recently used eligible adapter first; ties go to the
** lower adapter id so that the choice never depends on candidate order.
*/
#include "policy.h"

static int lsim__lru_pick(void *state, lsim_tick now, const lsim_evict_cand *c,
                          int n) {
  (void)state;
  (void)now;
  int best = 0;
  for (int i = 1; i < n; i++)
    if (c[i].last_use_tick < c[best].last_use_tick ||
        (c[i].last_use_tick == c[best].last_use_tick &&
         c[i].adapter < c[best].adapter))
      best = i;
  return best;
}

const lsim_evict_ops lsim_evict_lru = {
    /* .name         = */ "lru",
    /* .state_size   = */ 0,
    /* .init         = */ NULL,
    /* .pick         = */ lsim__lru_pick,
    /* .state_bytes  = */ NULL,
    /* .on_use       = */ NULL,
    /* .needs_future = */ 0,
};
