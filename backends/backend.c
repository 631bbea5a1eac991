/*
** backend.c: the backend registry, the wrappers, and the `model` backend
** (which executes nothing and reports the modelled cost of cost.c).
*/
#include "backend.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- the model backend --------------------------------------------------- */

typedef struct lsim__model_state {
  lsim_cost_model cost;
} lsim__model_state;

static lsim_err lsim__model_open(void *state, const lsim_backend_cfg *cfg,
                                 lsim_errbuf *eb) {
  if (cfg->execute != LSIM_EXECUTE_ADAPTERS)
    return lsim_fail(eb, LSIM_E_BACKEND,
                     "backend model executes nothing: --execute full needs "
                     "--backend cuda");
  ((lsim__model_state *)state)->cost = cfg->cost;
  return 0;
}

static lsim_err lsim__model_run(void *state, const lsim_plan *plan,
                                lsim_backend_result *res, lsim_errbuf *eb) {
  (void)eb;
  res->backend_ns = lsim_cost_plan_ns(&((lsim__model_state *)state)->cost, plan);
  res->ok = 1;
  return 0;
}

/* The model backend records nothing of the residency (backend.h). */
static const lsim_backend_ops lsim__backend_model = {
    .name = "model",
    .state_size = sizeof(lsim__model_state),
    .open = lsim__model_open,
    .run = lsim__model_run,
};

/* ---- registry and wrappers ---------------------------------------------- */

/* A protocol backend opened without a geometry answers page 0 of worker 0
** with state -1: it follows nothing. */
static int lsim__follows(const lsim_backend *b) {
  int st = -1;
  int64_t o, g;
  b->ops->page(b->state, 0, 0, &st, &o, &g);
  return st != -1;
}

extern const lsim_backend_ops lsim_backend_cpu_ref;
#ifdef LSIM_HAVE_CUDA
extern const lsim_backend_ops lsim_backend_cuda;
#endif

static const lsim_backend_ops *const lsim__backends[] = {
    &lsim__backend_model, &lsim_backend_cpu_ref,
#ifdef LSIM_HAVE_CUDA
    &lsim_backend_cuda,
#endif
};
#define LSIM__NBACKENDS (sizeof lsim__backends / sizeof lsim__backends[0])

const lsim_backend_ops *lsim_backend_find(const char *name) {
  if (!name)
    return NULL;
  for (size_t i = 0; i < LSIM__NBACKENDS; i++)
    if (strcmp(lsim__backends[i]->name, name) == 0)
      return lsim__backends[i];
  return NULL;
}

#ifndef LSIM_HAVE_CUDA
/* cuda without nvcc: not built (find and names leave it out), but a run it
** recorded elsewhere is still judged by its flags */
static const lsim_backend_ops lsim__backend_cuda_absent = {
    .name = LSIM_CUDA_BACKEND_NAME, .flags = LSIM_CUDA_BACKEND_FLAGS};
#endif

unsigned lsim_backend_flags(const char *name) {
  const lsim_backend_ops *o = lsim_backend_find(name);
#ifndef LSIM_HAVE_CUDA
  if (!o && name && strcmp(name, lsim__backend_cuda_absent.name) == 0)
    o = &lsim__backend_cuda_absent;
#endif
  return o ? o->flags : 0;
}

const char *const *lsim_backend_names(void) {
  static const char *names[LSIM__NBACKENDS + 1];
  for (size_t i = 0; i < LSIM__NBACKENDS; i++)
    names[i] = lsim__backends[i]->name;
  return names;
}

lsim_err lsim_backend_open(lsim_backend *b, const char *name,
                           const lsim_backend_cfg *cfg, lsim_errbuf *eb) {
  const lsim_backend_ops *o = lsim_backend_find(name);
  b->ops = NULL;
  b->state = NULL;
  if (!o)
    return lsim_fail(eb, LSIM_E_BACKEND, "unknown backend '%s'", name);
  b->state = calloc(1, o->state_size ? o->state_size : 1);
  if (!b->state)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory opening backend");
  b->ops = o;
  lsim_err rc = o->open ? o->open(b->state, cfg, eb) : 0;
  if (rc) {
    free(b->state);
    b->state = NULL;
    b->ops = NULL;
  }
  return rc;
}

int lsim_backend_follows(const lsim_backend *b) {
  return b->ops && b->ops->stage && b->ops->page && b->state &&
         b->ops->counts && lsim__follows(b);
}

#define LSIM__FWD(fn, slot)                                                 \
  lsim_err fn(lsim_backend *b, const lsim_res_page_ev *ev, lsim_errbuf *eb) { \
    return b->ops && b->ops->slot ? b->ops->slot(b->state, ev, eb) : 0;    \
  }
LSIM__FWD(lsim_backend_stage, stage)
LSIM__FWD(lsim_backend_publish, publish)
LSIM__FWD(lsim_backend_retire, retire)
LSIM__FWD(lsim_backend_launch, launch)
LSIM__FWD(lsim_backend_kv, kv)
#undef LSIM__FWD

#define LSIM__HOOK(fn, wrap)                                                \
  static lsim_err fn(void *ud, const lsim_res_page_ev *ev, lsim_errbuf *eb) { \
    return wrap((lsim_backend *)ud, ev, eb);                                \
  }
LSIM__HOOK(lsim__hk_stage, lsim_backend_stage)
LSIM__HOOK(lsim__hk_publish, lsim_backend_publish)
LSIM__HOOK(lsim__hk_retire, lsim_backend_retire)
LSIM__HOOK(lsim__hk_launch, lsim_backend_launch)
LSIM__HOOK(lsim__hk_kv, lsim_backend_kv)
#undef LSIM__HOOK

const lsim_res_hooks *lsim_backend_res_hooks(void) {
  static const lsim_res_hooks h = {lsim__hk_stage, lsim__hk_publish,
                                   lsim__hk_retire, lsim__hk_launch,
                                   lsim__hk_kv};
  return &h;
}

lsim_err lsim_backend_finish(lsim_backend *b, lsim_errbuf *eb) {
  return b->ops && b->ops->finish ? b->ops->finish(b->state, eb) : 0;
}

void lsim_backend_counts_get(const lsim_backend *b, lsim_backend_counts *out) {
  memset(out, 0, sizeof *out);
  if (b->ops && b->ops->counts && b->state)
    b->ops->counts(b->state, out);
}

lsim_err lsim_backend_check_pages(const lsim_backend *b, int w,
                                  const lsim_res *res, lsim_errbuf *eb) {
  if (!b->ops || !b->ops->page)
    return 0;
  lsim_res_view v;
  lsim_res_view_get(res, &v);
  for (int64_t i = 0; i < v.slots; i++) {
    int est, bst;
    int64_t eown, egen, bown, bgen;
    lsim_res_slot(res, i, &est, &eown, &egen);
    b->ops->page(b->state, w, i, &bst, &bown, &bgen);
    int held = est == LSIM_SLOT_ADAPTER || est == LSIM_SLOT_KV;
    if (held ? (bst != est || bown != eown || bgen != egen)
             : bst != LSIM_SLOT_FREE)
      return lsim_fail(eb, LSIM_E_STAGE_PAGES,
                       "backend %s: worker %d page %lld is %s %lld gen %lld "
                       "in the engine's residency but %s %lld gen %lld in "
                       "the backend's", b->ops->name, w, (long long)i,
                       held ? (est == LSIM_SLOT_KV ? "kv" : "adapter")
                            : "not held",
                       (long long)eown, (long long)egen,
                       bst == LSIM_SLOT_FREE      ? "free"
                       : bst == LSIM_SLOT_KV      ? "kv"
                       : bst == LSIM_SLOT_ADAPTER ? "adapter"
                                                  : "staged",
                       (long long)bown, (long long)bgen);
  }
  return 0;
}

lsim_err lsim_backend_run(lsim_backend *b, const lsim_plan *plan,
                          lsim_backend_result *res, lsim_errbuf *eb) {
  memset(res, 0, sizeof *res);
  res->backend_ns = -1;
  return b->ops->run(b->state, plan, res, eb);
}

int64_t lsim_backend_load_ns(lsim_backend *b, int worker, int object) {
  return b->ops && b->ops->load_ns && b->state
             ? b->ops->load_ns(b->state, worker, object)
             : -1;
}

void lsim_backend_close(lsim_backend *b) {
  if (b->ops && b->ops->close)
    b->ops->close(b->state);
  free(b->state);
  b->state = NULL;
  b->ops = NULL;
}
