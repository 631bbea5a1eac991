/* place_affinity.c: each adapter's requests to one worker, by a jump
** consistent hash of the adapter. */
#include "policy.h"

int lsim_place_jump_hash(uint64_t key, int n) {
  int64_t b = -1, j = 0;
  while (j < n) {
    b = j;
    key = key * 2862933555777941757ULL + 1;
    j = (int64_t)((double)(b + 1) *
                  ((double)(1LL << 31) / (double)((key >> 33) + 1)));
  }
  return (int)b;
}

static int lsim__place(void *st, const lsim_place_view *v,
                       const lsim_place_req *r) {
  (void)st;
  return lsim_place_jump_hash(
      (uint64_t)r->adapter * 0x9E3779B97F4A7C15ULL + 1, v->workers);
}

const lsim_place_ops lsim_place_adapter_affinity = {"adapter_affinity", 0,
                                                    lsim__place};
