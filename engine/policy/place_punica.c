/* place_punica.c: Punica's consolidating placement (article 0x09E). */
#include "policy.h"

int lsim_place_punica(const int *ws, const int64_t *kv_free, int n, int max_ws,
                      int64_t need) {
  int best = -1;
  for (int i = 0; i < n; i++) {
    if (ws[i] >= max_ws || kv_free[i] < need)
      continue;
    if (best < 0 || ws[i] >= ws[best])
      best = i; /* ties go to the later (higher) id */
  }
  return best;
}

/* Working set: the worker's requests (waiting + running); KV free: its
** free pages less the guard.  No feasible worker: the least loaded. */
static int lsim__place(void *st, const lsim_place_view *v,
                       const lsim_place_req *r) {
  (void)st;
  int best = -1, ws_best = 0, least = 0;
  for (int i = 0; i < v->workers; i++) {
    int ws = v->load(v->ctx, i);
    if (ws < v->load(v->ctx, least))
      least = i;
    if (ws >= v->max_batch_requests ||
        v->free_pages(v->ctx, i) - v->guard_pages < r->kv_pages)
      continue;
    if (best < 0 || ws >= ws_best) {
      best = i;
      ws_best = ws;
    }
  }
  return best >= 0 ? best : least;
}

const lsim_place_ops lsim_place_punica_consolidate = {"punica_consolidate", 0,
                                                      lsim__place};
