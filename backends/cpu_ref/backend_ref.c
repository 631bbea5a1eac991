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
** Tensor values are a pure function of (seed, adapter, artifact version,
** module) for the factors (version 0, the catalog's original artifact,
** keeps the values it always had; a hotswapped version draws new ones) and of (seed, iteration, request, token position) for the
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
#include "../backend.h"
#include "cpu_ref.h"
#include "materialise.h"

typedef struct lsim__ref_state {
  lsim_backend_cfg cfg;
  lsim_iter_tensors it;
} lsim__ref_state;

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
  int64_t t0 = lsim__now_ns();
  lsim_qmat D = LSIM_QMAT_INIT;
  lsim_err rc = lsim_iter_tensors_build(&s->it, plan, s->cfg.seed, s->cfg.d_in,
                                        s->cfg.d_out, eb);
  if (!rc)
    rc = lsim_ref_delta_all(&s->it.rp, &s->it.X, s->it.ad, s->it.nad, &D, eb);
  res->backend_ns = lsim__now_ns() - t0;
  res->ok = rc == 0;
  res->checked = rc == 0 || rc == LSIM_E_PATH_MISMATCH;
  res->exact = rc == 0;
  res->reference = "cpu_ref: every execution family and scale placement";
  lsim_qmat_clear(&D);
  return rc;
}

static void lsim__ref_close(void *state) {
  lsim_iter_tensors_release(&((lsim__ref_state *)state)->it);
}

const lsim_backend_ops lsim_backend_cpu_ref = {
    /* .name       = */ "cpu_ref",
    /* .state_size = */ sizeof(lsim__ref_state),
    /* .open       = */ lsim__ref_open,
    /* .stage      = */ NULL,
    /* .run        = */ lsim__ref_run,
    /* .close      = */ lsim__ref_close,
};
