/*
** prefetch_lookahead.c: queue-derived prefetch (S-LoRA style, article
** 0x09F), as a labelled first-fit rule: walk the distinct cold adapters of
** the waiting queue in queue order and take each one whose pages still fit
** in the speculative budget the joint ledger offers.  With waiting adapters
** [B, B, C, D], pages {B:3, C:4, D:2} and 6 pages available this proposes
** [B, D] (5 pages).
*/
#include "policy.h"

static int lsim__lookahead_propose(void *state, lsim_tick now,
                                   const lsim_prefetch_view *v, int *out,
                                   int max) {
  (void)state;
  (void)now;
  int64_t left = v->free_pages;
  int k = 0;
  for (int i = 0; i < v->ncold && k < max; i++)
    if (v->cold[i].pages <= left) {
      out[k++] = v->cold[i].adapter;
      left -= v->cold[i].pages;
    }
  return k;
}

const lsim_prefetch_ops lsim_prefetch_queue_lookahead = {
    /* .name       = */ "queue_lookahead",
    /* .state_size = */ 0,
    /* .init       = */ NULL,
    /* .propose    = */ lsim__lookahead_propose,
};
