/*
** backend_cuda.c: the `cuda` replay backend.
**
** Each iteration's adapter work for one d_in x d_out target module runs
** through the CUDA kernels on the tensors every tensor backend shares
** (backends/cpu_ref/materialise.h), in fp16 (11 significant bits, so the
** small-integer deltas of power-of-two ranks up to 64 are representable).  The chooser picks the path.  With verify,
** the exact reference (cpu_ref, per-row family) is computed too and the
** comparison becomes a `validations` row: bit-exact is required when the
** inputs were representable, a relative error of at most 1e-2 otherwise;
** anything worse fails the iteration (and so the run).  The measured time
** (host clock around the launches and their completion) goes to
** iterations.backend_ns; simulated time still comes from the cost model.
*/
#include <math.h>
#include <stdlib.h>

#include "../backend.h"
#include "../cpu_ref/materialise.h"
#include "gpu_exact.h"

typedef struct lsim__cuda_state {
  lsim_backend_cfg cfg;
  lsim_iter_tensors it;
} lsim__cuda_state;

static lsim_err lsim__cuda_open(void *state, const lsim_backend_cfg *cfg,
                                lsim_errbuf *eb) {
  lsim__cuda_state *s = state;
  char desc[256];
  if (lsim_cuda_describe(desc, sizeof desc) <= 0)
    return lsim_fail(eb, LSIM_E_BACKEND, "backend cuda: %s", desc);
  if (cfg->d_in < 1 || cfg->d_out < 1)
    return lsim_fail(eb, LSIM_E_BACKEND,
                     "cuda needs a tensor shape (d_in, d_out >= 1)");
  s->cfg = *cfg;
  return 0;
}

static lsim_err lsim__cuda_run(void *state, const lsim_plan *plan,
                               lsim_backend_result *res, lsim_errbuf *eb) {
  lsim__cuda_state *s = state;
  lsim_qmat G = LSIM_QMAT_INIT, R = LSIM_QMAT_INIT;
  int exact_in = 1, used = -1;
  int64_t ns = -1;
  lsim_err rc = lsim_iter_tensors_build(&s->it, plan, s->cfg.seed, s->cfg.d_in,
                                        s->cfg.d_out, eb);
  if (!rc)
    rc = lsim_cuda_exact_delta(&s->it.rp, &s->it.X, s->it.ad, s->it.nad,
                               s->cfg.d_in, s->cfg.d_out, LSIM_CUDA_FP16,
                               LSIM_CUDA_PATH_AUTO, &G, &exact_in, &used, &ns,
                               eb);
  if (!rc && s->cfg.verify) {
    rc = lsim_qmat_init(&R, s->it.rp.T, s->cfg.d_out, eb);
    if (!rc)
      rc = lsim_ref_delta(&s->it.rp, &s->it.X, s->it.ad, s->it.nad,
                          LSIM_REF_PER_ROW, LSIM_SCALE_PASSED, &R, eb);
    if (!rc) {
      lsim_q_errors(&G, &R, &res->max_abs_err, &res->max_rel_err,
                    &res->exact);
      /* bit-exactness is owed when fp16 holds every input and every exact
      ** output value; otherwise the bound is a relative error of 1e-2 */
      int owed = exact_in && lsim_q_representable(&R, LSIM_CUDA_FP16);
      res->checked = 1;
      res->reference = owed ? "cpu_ref (exact; bit-exact owed)"
                            : "cpu_ref (exact; within 1e-2 owed)";
      if ((owed && !res->exact) || !(res->max_rel_err <= 1e-2))
        rc = lsim_fail(eb, LSIM_E_PATH_MISMATCH,
                       "iteration %lld: cuda path %s differs from cpu_ref "
                       "(max abs %.3g, rel %.3g%s)",
                       (long long)plan->iter, lsim_cuda_path_name(used),
                       res->max_abs_err, res->max_rel_err,
                       owed ? ", bit-exact owed" : "");
    }
  }
  res->backend_ns = ns;
  res->ok = rc == 0;
  lsim_qmat_clear(&G);
  lsim_qmat_clear(&R);
  return rc;
}

static void lsim__cuda_close(void *state) {
  lsim_iter_tensors_release(&((lsim__cuda_state *)state)->it);
}

const lsim_backend_ops lsim_backend_cuda = {
    /* .name       = */ "cuda",
    /* .state_size = */ sizeof(lsim__cuda_state),
    /* .open       = */ lsim__cuda_open,
    /* .stage      = */ NULL,
    /* .run        = */ lsim__cuda_run,
    /* .close      = */ lsim__cuda_close,
};
