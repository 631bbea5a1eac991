/*
** evict_lfu.c: least frequently used first -- fewest requests bound on this
** worker since the run began (frequency survives eviction, so a popular
** adapter that was pushed out once is protected when it returns); ties go
** to the least recently used, then to the lower adapter id.
*/
#include "policy.h"

static int lsim__lfu_pick(void *state, lsim_tick now, const lsim_evict_cand *c,
                          int n) {
  (void)state;
  (void)now;
  int best = 0;
  for (int i = 1; i < n; i++) {
    const lsim_evict_cand *x = &c[i], *b = &c[best];
    if (x->total_uses != b->total_uses ? x->total_uses < b->total_uses
        : x->last_use_tick != b->last_use_tick
            ? x->last_use_tick < b->last_use_tick
            : x->adapter < b->adapter)
      best = i;
  }
  return best;
}

const lsim_evict_ops lsim_evict_lfu = {
    /* .name         = */ "lfu",
    /* .state_size   = */ 0,
    /* .init         = */ NULL,
    /* .pick         = */ lsim__lfu_pick,
    /* .state_bytes  = */ NULL,
    /* .on_use       = */ NULL,
    /* .needs_future = */ 0,
};
