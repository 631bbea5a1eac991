/*
** backend_ref.c: the `cpu_ref` replay backend.
**
** For every iteration of a replay this backend builds the frozen row plan
** from the engine's plan entries (engine/rowplan.h), materialises the
** iteration's tensors for one target module of shape d_in x d_out, and
** executes the adapter branch exactly through every execution family and
** scale placement (lsim_ref_delta_all): the iteration is valid only if all
** of them agree to the last bit of every rational.  What it measures
** (wall ns of that work) is recorded and never feeds back into time.
**
** Tensor values are a pure function of (seed, adapter, module) for the
** factors and of (seed, iteration, request, token position) for the
** inputs, drawn from LSIM_RNG_TENSORS-derived streams: the same trace and
** seed give the same tensors whatever backend runs them, which is what
** lets the CUDA backend be compared with this one on identical traces.
** Integer mode: entries are small integers (|x| <= 4, |A|, |B| <= 3) and
** the scale is 2 / rank, a genuine rational.
*/
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../engine/rowplan.h"
#include "../../sim/rng.h"
#include "../backend.h"
#include "cpu_ref.h"

typedef struct lsim__ref_state {
  lsim_backend_cfg cfg;
  lsim_rowplan rp;
  lsim_plan_entry *ents;
  int ents_cap;
} lsim__ref_state;

/* A stream keyed by several integers: mix them into one seed. */
static void lsim__keyed(lsim_rng *r, uint64_t seed, uint64_t a, uint64_t b,
                        uint64_t c) {
  uint64_t k = seed;
  k = k * 0x9E3779B97F4A7C15ull ^ (a + 0x632BE59BD9B4E019ull);
  k = k * 0x9E3779B97F4A7C15ull ^ (b + 0x8CB92BA72F3D8DD7ull);
  k = k * 0x9E3779B97F4A7C15ull ^ (c + 0xA0761D6478BD642Full);
  lsim_rng_init(r, k, LSIM_RNG_TENSORS);
}

static long lsim__small(lsim_rng *r, int m) {
  return (long)lsim_rng_below(r, (uint64_t)(2 * m + 1)) - m;
}

static lsim_err lsim__ref_open(void *state, const lsim_backend_cfg *cfg,
                               lsim_errbuf *eb) {
  lsim__ref_state *s = state;
  if (cfg->d_in < 1 || cfg->d_out < 1)
    return lsim_fail(eb, LSIM_E_BACKEND,
                     "cpu_ref needs a tensor shape (d_in, d_out >= 1)");
  s->cfg = *cfg;
  return 0;
}

static int64_t lsim__now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static lsim_err lsim__ref_run(void *state, const lsim_plan *plan,
                              lsim_backend_result *res, lsim_errbuf *eb) {
  lsim__ref_state *s = state;
  const int d_in = s->cfg.d_in, d_out = s->cfg.d_out;
  lsim_err rc = 0;
  int64_t t0 = lsim__now_ns();
  if (plan->n > s->ents_cap) {
    lsim_plan_entry *ne = realloc(s->ents, (size_t)plan->n * sizeof *ne);
    if (!ne)
      return lsim_fail(eb, LSIM_E_NOMEM, "out of memory in cpu_ref");
    s->ents = ne;
    s->ents_cap = plan->n;
  }
  memcpy(s->ents, plan->e, (size_t)plan->n * sizeof *s->ents);
  for (int i = 0; i < plan->n; i++)
    if (s->ents[i].adapter < 0) {
      s->ents[i].adapter = LSIM_BASE;
      s->ents[i].rank = 0;
    }
  lsim_rowplan_release(&s->rp);
  if ((rc = lsim_rowplan_build(&s->rp, s->ents, plan->n, NULL, 0, eb)))
    return rc;
  const lsim_rowplan *p = &s->rp;

  /* distinct adapters of this plan, ascending (the grouped segments) */
  lsim_qadapter *ad = calloc((size_t)p->nseg + 1, sizeof *ad);
  lsim_qmat X = LSIM_QMAT_INIT, D = LSIM_QMAT_INIT;
  int nad = 0;
  if (!ad)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory in cpu_ref");
  for (int k = 0; k < p->nseg && !rc; k++) {
    int id = p->seg_adapter[k], r = p->seg_rank[k];
    if ((rc = lsim_qadapter_init(&ad[k], id, r, d_in, d_out, eb)))
      break;
    nad++;
    lsim_rng g;
    lsim__keyed(&g, s->cfg.seed, 1, (uint64_t)id, 0);
    for (int i = 0; i < r; i++)
      for (int j = 0; j < d_in; j++)
        mpq_set_si(LSIM_QAT(&ad[k].A, i, j), lsim__small(&g, 3), 1);
    for (int i = 0; i < d_out; i++)
      for (int j = 0; j < r; j++)
        mpq_set_si(LSIM_QAT(&ad[k].B, i, j), lsim__small(&g, 3), 1);
    mpq_set_ui(ad[k].scale, 2, (unsigned long)r);
    mpq_canonicalize(ad[k].scale);
  }
  if (!rc)
    rc = lsim_qmat_init(&X, p->T, d_in, eb);
  for (int t = 0; !rc && t < p->T; t++) {
    lsim_rng g;
    lsim__keyed(&g, s->cfg.seed, 2 + (uint64_t)plan->iter,
                (uint64_t)p->req_uid[p->row_req[t]], (uint64_t)p->row_pos[t]);
    for (int j = 0; j < d_in; j++)
      mpq_set_si(LSIM_QAT(&X, t, j), lsim__small(&g, 4), 1);
  }
  if (!rc)
    rc = lsim_ref_delta_all(p, &X, ad, nad, &D, eb);
  res->backend_ns = lsim__now_ns() - t0;
  res->ok = rc == 0;
  res->checked = rc == 0 || rc == LSIM_E_PATH_MISMATCH;
  res->exact = rc == 0;
  res->reference = "cpu_ref: every execution family and scale placement";
  lsim_qmat_clear(&X);
  lsim_qmat_clear(&D);
  for (int k = 0; k < nad; k++)
    lsim_qadapter_clear(&ad[k]);
  free(ad);
  return rc;
}

static void lsim__ref_close(void *state) {
  lsim__ref_state *s = state;
  lsim_rowplan_release(&s->rp);
  free(s->ents);
  s->ents = NULL;
}

const lsim_backend_ops lsim_backend_cpu_ref = {
    /* .name       = */ "cpu_ref",
    /* .state_size = */ sizeof(lsim__ref_state),
    /* .open       = */ lsim__ref_open,
    /* .stage      = */ NULL,
    /* .run        = */ lsim__ref_run,
    /* .close      = */ lsim__ref_close,
};
