/*
** cost.c: the cost model (backend.h): the modelled time of a plan and of
** the tensor-parallel collectives an iteration pays for.
**
** Two models.  The linear one (five hand-set or calibrated coefficients)
** is what every scenario without a profile uses, unchanged.  The profiled
** one (docs/PROFILE.md) follows the hardware: the base GEMMs cost the
** time to stream the weights until the batch is wide enough to be compute
** bound (the roofline knee), then grow with the rows; attention grows with
** the keys each decode row reads and with the (query, key) pairs of each
** prefill; the adapter branch with its segments and rank-rows; the LM
** head with the sampled rows.  Its coefficients are bound to the scenario
** once (lsim_cost_prof_bind) into integers, and a plan's time is summed in
** exact integer arithmetic, so it is deterministic, and monotone in rows
** and context since every coefficient is >= 0.
*/
#include "backend.h"

#include "engine/checked.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>

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
  if (c->prof.on) {
    lsim_cost_feat f;
    lsim_cost_plan_features(p, &f);
    return lsim_cost_prof_ns(&c->prof, &f);
  }
  int64_t ns = c->iter_fixed_ns + p->prefill_rows * c->prefill_token_ns +
               p->decode_rows * c->decode_token_ns +
               (int64_t)p->segments * c->segment_ns +
               /* padded-rank slots compute every row at the slot's rank */
               ((p->slot_rank > 0 ? p->padded_rank_rows : p->true_rank_rows) *
                c->rank_row_ps) / 1000;
  return ns < 1 ? 1 : ns;
}

static const char *const lsim__terms[LSIM_COST_NTERMS + 1] = {
    "iter_fixed_ns",    "gemm_weight_ns",  "knee_tokens",
    "lm_head_ns",       "token_ns",        "decode_row_ns",
    "decode_ctx_ns",    "prefill_seq_ns",  "prefill_pair_ns",
    "lora_module_ns",   "lora_segment_ns", "lora_rank_elem_ns",
    "lora_decode_elem_ns", "lora_adapter_elem_ns", NULL};

const char *const *lsim_cost_terms(void) { return lsim__terms; }

/* llround(x * scale) when it is finite, >= 0 and below 2^62. */
static int lsim__bind1(double x, double scale, int64_t *out) {
  return lsim_d2i64_checked(floor(x * scale + 0.5), 0, INT64_C(1) << 62, out);
}

lsim_err lsim_cost_prof_bind(const lsim_cost_coef *k, int layers, int modules,
                             int64_t elems, lsim_cost_prof *out,
                             lsim_errbuf *eb) {
  const double *c = k->c;
  double lm = (double)layers * (double)modules;
  lsim_cost_prof p = {0};
  struct {
    int term;
    double scale;
    int64_t *dst;
  } b[] = {
      {LSIM_COST_FIXED, 1e3, &p.fixed_ps},
      {LSIM_COST_GEMM, 1e3, &p.gemm_ps},
      {LSIM_COST_KNEE, 1e3, &p.knee_mtok},
      {LSIM_COST_LM_HEAD, 1e3, &p.lm_head_ps},
      {LSIM_COST_TOKEN, 1e3, &p.token_ps},
      {LSIM_COST_DECODE_ROW, 1e3, &p.decode_row_ps},
      {LSIM_COST_DECODE_CTX, 1e6, &p.decode_ctx_fs},
      {LSIM_COST_PREFILL_SEQ, 1e3, &p.prefill_seq_ps},
      {LSIM_COST_PREFILL_PAIR, 1e6, &p.prefill_pair_fs},
      {LSIM_COST_LORA_MODULE, 1e3 * lm, &p.lora_fixed_ps},
      {LSIM_COST_LORA_SEGMENT, 1e3 * lm, &p.lora_segment_ps},
      {LSIM_COST_LORA_ELEM, 1e3 * (double)layers * (double)elems,
       &p.lora_rank_row_ps},
      {LSIM_COST_LORA_DECODE_ELEM, 1e3 * (double)layers * (double)elems,
       &p.lora_decode_rank_row_ps},
      {LSIM_COST_LORA_ADAPTER_ELEM, 1e3 * (double)layers * (double)elems,
       &p.lora_adapter_rank_ps},
  };
  for (size_t i = 0; i < sizeof b / sizeof b[0]; i++) {
    if (lsim__bind1(c[b[i].term], b[i].scale, b[i].dst))
      return lsim_fail(eb, LSIM_E_USAGE,
                       "%s = %g: must be a finite number >= 0 whose time "
                       "fits the clock",
                       lsim__terms[b[i].term], c[b[i].term]);
  }
  if (p.knee_mtok < 1)
    return lsim_fail(eb, LSIM_E_USAGE,
                     "knee_tokens = %g: must be at least 0.001",
                     c[LSIM_COST_KNEE]);
  p.on = 1;
  *out = p;
  return 0;
}

void lsim_cost_plan_features(const lsim_plan *p, lsim_cost_feat *f) {
  /* the plan's ledgers (lsim_plan_finish) hold every count */
  *f = (lsim_cost_feat){0};
  f->tokens = p->prefill_rows + p->decode_rows;
  f->sampled = p->sampled;
  f->decode_rows = p->decode_rows;
  f->decode_ctx = p->decode_ctx;
  f->prefill_seqs = p->prefill_reqs;
  f->prefill_pairs = p->prefill_pairs;
  f->lora = p->lora_segments > 0;
  f->lora_segments = p->lora_segments;
  /* The adapter branch runs every row of the batch at the batch's largest
  ** rank (the slot rank with padded-rank slots): the row plan pads to it
  ** (engine/rowplan.c, phys_rank), so that is the work the GPU does. */
  f->rank_rows = p->padded_rank_rows;
  int rank = p->slot_rank > 0 ? p->slot_rank : p->max_rank;
  f->decode_rank_rows = f->decode_rows * rank;
  f->adapter_ranks = (int64_t)p->distinct_adapters * rank;
}

/* a * b, saturated at INT64_MAX (a, b >= 0) */
static int64_t lsim__mul(int64_t a, int64_t b) {
  int64_t r;
  return a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

/* floor(a * b / c), saturated */
static int64_t lsim__muldiv(int64_t a, int64_t b, int64_t c) {
  int64_t r;
  return lsim_muldiv_i64_checked(a, b, c, &r) ? INT64_MAX : r;
}

/* w x max(1, n / knee) for n > 0, 0 for n = 0: streaming the weights
** costs w until the rows make the product compute bound */
static int64_t lsim__roofline(int64_t w, int64_t n, int64_t knee_mtok) {
  if (n <= 0)
    return 0;
  int64_t mt = lsim__mul(n, 1000);
  return mt <= knee_mtok ? w : lsim__muldiv(w, mt, knee_mtok);
}

int64_t lsim_cost_prof_ns(const lsim_cost_prof *c, const lsim_cost_feat *f) {
  int64_t t[] = {
      c->fixed_ps,
      lsim__roofline(c->gemm_ps, f->tokens, c->knee_mtok),
      lsim__roofline(c->lm_head_ps, f->sampled, c->knee_mtok),
      lsim__mul(c->token_ps, f->tokens),
      lsim__mul(c->decode_row_ps, f->decode_rows),
      lsim__muldiv(c->decode_ctx_fs, f->decode_ctx, 1000),
      lsim__mul(c->prefill_seq_ps, f->prefill_seqs),
      lsim__muldiv(c->prefill_pair_fs, f->prefill_pairs, 1000),
      f->lora ? c->lora_fixed_ps : 0,
      lsim__mul(c->lora_segment_ps, f->lora_segments),
      lsim__mul(c->lora_rank_row_ps, f->rank_rows),
      lsim__mul(c->lora_decode_rank_row_ps, f->decode_rank_rows),
      lsim__mul(c->lora_adapter_rank_ps, f->adapter_ranks),
  };
  int64_t ps = 0;
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
    if (lsim_add_i64_checked(ps, t[i], &ps))
      return INT64_MAX;
  int64_t ns = ps / 1000 + (ps % 1000 != 0); /* ceil: never 0 for work */
  return ns < 1 ? 1 : ns;
}
