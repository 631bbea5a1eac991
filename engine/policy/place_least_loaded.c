/* place_least_loaded.c: where the adapter is, else the least loaded. */
#include "policy.h"

/* The first worker holding the adapter (published, active, idle, or on its
** way in); otherwise the fewest waiting + running requests, lowest index
** on ties. */
static int lsim__place(void *st, const lsim_place_view *v,
                       const lsim_place_req *r) {
  (void)st;
  for (int i = 0; i < v->workers; i++)
    if (v->holds(v->ctx, i, r->adapter))
      return i;
  int best = 0;
  for (int i = 1; i < v->workers; i++)
    if (v->load(v->ctx, i) < v->load(v->ctx, best))
      best = i;
  return best;
}

const lsim_place_ops lsim_place_least_loaded = {"least_loaded", 0,
                                                lsim__place};
