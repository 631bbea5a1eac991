/*
** evict_belady.c: Belady's MIN, an offline oracle -- evict the eligible
** adapter whose next request arrives farthest in the future (never, within
** the lookahead window, counts as farthest); ties go to the least recently
** used, then to the lower adapter id.  It reads next_use, which the engine
** fills only for policies with needs_future set, from the bounded lookahead
** window the replay feeds it (docs/RESIDENCY.md, "The Belady oracle").
** It is the bound online policies are measured against, not a deployable
** policy: no real server knows its future arrivals.
*/
#include "policy.h"

static int lsim__belady_pick(void *state, lsim_tick now,
                             const lsim_evict_cand *c, int n) {
  (void)state;
  (void)now;
  int best = 0;
  for (int i = 1; i < n; i++) {
    const lsim_evict_cand *x = &c[i], *b = &c[best];
    if (x->next_use != b->next_use ? x->next_use > b->next_use
        : x->last_use_tick != b->last_use_tick
            ? x->last_use_tick < b->last_use_tick
            : x->adapter < b->adapter)
      best = i;
  }
  return best;
}

const lsim_evict_ops lsim_evict_belady = {
    /* .name         = */ "belady",
    /* .state_size   = */ 0,
    /* .init         = */ NULL,
    /* .pick         = */ lsim__belady_pick,
    /* .state_bytes  = */ NULL,
    /* .on_use       = */ NULL,
    /* .needs_future = */ 1,
};
