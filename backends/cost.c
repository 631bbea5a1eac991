/*
** cost.c: the cost model (backend.h): the modelled time of a plan and of
** the tensor-parallel collectives an iteration pays for.
*/
#include "backend.h"

#include "engine/checked.h"

#include <stdint.h>

int64_t lsim_cost_collective_ns(const lsim_tp_cost *c, const lsim_plan *p,
                                int64_t *calls) {
  if (calls)
    *calls = 0;
  if (c->tp_degree <= 1)
    return 0;
  int64_t n = c->tp_degree, tokens = p->prefill_rows + p->decode_rows;
  if (tokens <= 0)
    return 0;
  /* elements received per rank, ring algorithms (engine/tp.h ledgers):
  ** all-gather (N-1)/N x width, all-reduce 2 (N-1)/N x width */
  int64_t ncalls = 2 * (int64_t)c->layers;
  double elems = (double)ncalls * 2.0 * (double)(n - 1) / (double)n *
                 (double)tokens * (double)c->hidden;
  if (p->true_rank_rows > 0) {
    ncalls += (int64_t)c->layers * (c->col_targets + c->row_targets);
    elems += (double)c->layers * (double)(n - 1) / (double)n *
             (double)p->true_rank_rows *
             (double)(c->col_targets + 2 * c->row_targets);
  }
  int64_t ns = ncalls * c->coll_latency_ns, bytes_ns;
  if (c->link_gbps > 0) {
    /* a tiny link_gbps makes the quotient too large for int64 (or inf):
    ** -1, never an undefined cast */
    if (lsim_d2i64_ceil(elems * (double)c->dtype_bytes / c->link_gbps, 0,
                        INT64_MAX - ns, &bytes_ns))
      return -1;
    ns += bytes_ns;
  }
  if (calls)
    *calls = ncalls;
  return ns;
}

int64_t lsim_cost_plan_ns(const lsim_cost_model *c, const lsim_plan *p) {
  int64_t ns = c->iter_fixed_ns + p->prefill_rows * c->prefill_token_ns +
               p->decode_rows * c->decode_token_ns +
               (int64_t)p->segments * c->segment_ns +
               /* padded-rank slots compute every row at the slot's rank */
               ((p->slot_rank > 0 ? p->padded_rank_rows : p->true_rank_rows) *
                c->rank_row_ps) / 1000;
  return ns < 1 ? 1 : ns;
}
