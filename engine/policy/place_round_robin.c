/* place_round_robin.c: arrivals dealt to the workers in turn. */
#include "policy.h"

static int lsim__place(void *st, const lsim_place_view *v,
                       const lsim_place_req *r) {
  int64_t *next = st; /* arrivals placed so far */
  (void)r;
  return (int)((*next)++ % v->workers);
}

const lsim_place_ops lsim_place_round_robin = {"round_robin", sizeof(int64_t),
                                               lsim__place};
