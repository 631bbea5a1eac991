/*
** evict_size.c: size-aware -- the largest eligible adapter first (fewest
** victims per admission, so fewest reloads per freed page); ties go to the
** least recently used, then to the lower adapter id.
*/
#include "policy.h"

static int lsim__size_pick(void *state, lsim_tick now,
                           const lsim_evict_cand *c, int n) {
  (void)state;
  (void)now;
  int best = 0;
  for (int i = 1; i < n; i++) {
    const lsim_evict_cand *x = &c[i], *b = &c[best];
    if (x->pages != b->pages ? x->pages > b->pages
        : x->last_use_tick != b->last_use_tick
            ? x->last_use_tick < b->last_use_tick
            : x->adapter < b->adapter)
      best = i;
  }
  return best;
}

const lsim_evict_ops lsim_evict_size = {
    /* .name         = */ "size",
    /* .state_size   = */ 0,
    /* .init         = */ NULL,
    /* .pick         = */ lsim__size_pick,
    /* .state_bytes  = */ NULL,
    /* .on_use       = */ NULL,
    /* .needs_future = */ 0,
};
