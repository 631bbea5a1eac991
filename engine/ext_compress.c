/*
** ext_compress.c: a compressed collection's request leases as an engine
** extension (engine.h, lsim_engine_cmp; docs/COMPRESS.md and
** docs/RESIDENCY.md).  On when the engine is configured with a compressed
** collection.  Its setup registers the collection's version in each
** worker's catalog and publishes its bases and cores as generation 1; a
** request admitted to run takes a lease on the live generation and a
** reference on its cluster's basis object (admit), every launch checks the
** catalog across ranks and each row's lease against the live generation
** (launch), the lease and reference go back when the request leaves its
** place in the pool (left, whatever the reason), and the invariant I5 is
** this extension's check (sound).
**
** The residency-level handling of bases stays in the core, beside the
** catalog it reads (lsim_core_worker.cat): a basis as the companion of its
** cores in loads and evictions, the staged core checked against the live
** basis at validation, the bases a launch names, and the affinity cost a
** scheduler sees.  Those are facts of the pool, not of a request.
*/
#include "engine_impl.h"

/* Per-request slot. */
typedef struct lsim__cmr {
  lsim_cmp_lease lease; /* on the collection generation */
  int bound;            /* holds lease (and a reference on its basis) */
} lsim__cmr;

static lsim__cmr *lsim__C(const lsim_engine *e, const lsim_core_req *r) {
  return lsim_core_slot(e, r, LSIM_CORE_EXT_COMPRESS);
}

static int lsim__cm_basis(const lsim_engine *e, int a) {
  return e->cfg.nadapters + e->cluster[a];
}

/* A worker's catalog at start: the collection's version registered, its
** bases and cores staged and published as generation 1 (its identity,
** checked on every load and launch); no basis is resident on the device
** yet, that follows the pool. */
static lsim_err lsim__cm_worker_setup(lsim_engine *e, lsim_core_worker *w,
                                      const lsim_engine_cmp *cm,
                                      lsim_errbuf *eb) {
  lsim_cmp_catalog *cat = &w->cat;
  int na = e->cfg.nadapters;
  lsim_err rc;
  if ((rc = lsim_cmp_register_version(cat, cm->version, &cm->source_set,
                                      &cm->bundle, eb)) ||
      (rc = lsim_cmp_stage_begin(cat, cm->version, &cm->bundle, e->k, na,
                                 eb)))
    return rc;
  for (int c = 0; c < e->k; c++)
    if ((rc = lsim_cmp_stage_basis(cat, c, &cm->basis[c], eb)))
      return rc;
  for (int a = 0; a < na; a++)
    if ((rc = lsim_cmp_stage_core(cat, a, cm->cluster[a],
                                  &cm->basis[cm->cluster[a]], &cm->core[a],
                                  eb)))
      return rc;
  lsim_cmp_catalog *ranks[1] = {cat};
  if ((rc = lsim_cmp_tp_publish(ranks, 1, eb)))
    return rc;
  for (int c = 0; c < e->k; c++)
    if ((rc = lsim_cmp_basis_evict(cat, c, eb)))
      return rc;
  return 0;
}

static lsim_err lsim__cm_setup(lsim_engine *e, void *st, int *on,
                               lsim_errbuf *eb) {
  (void)st;
  const lsim_engine_cmp *cm = e->cfg.compress;
  *on = cm != NULL && e->k > 0;
  for (int i = 0; *on && i < e->cfg.workers; i++) {
    lsim_err rc = lsim__cm_worker_setup(e, &e->w[i], cm, eb);
    if (rc)
      return rc;
  }
  return 0;
}

/* Admission of r to run: a lease on the live collection generation and a
** reference on its basis object (so neither the catalog nor the pool lets
** the basis go while r is in flight). */
static lsim_err lsim__cm_admit(lsim_engine *e, void *st, int wi,
                               lsim_core_req *r, lsim_tick now,
                               lsim_errbuf *eb) {
  (void)st;
  lsim_core_worker *w = &e->w[wi];
  lsim__cmr *q = lsim__C(e, r);
  if (q->bound)
    return 0;
  lsim_err rc = lsim_cmp_acquire(&w->cat, r->adapter, &q->lease, eb);
  if (rc)
    return rc;
  if ((rc = lsim_res_bind(w->res, lsim__cm_basis(e, r->adapter), now, eb))) {
    lsim_cmp_release(&w->cat, &q->lease, NULL);
    return rc;
  }
  q->bound = 1;
  return 0;
}

/* Leaving its place in the pool (finished, cancelled, preempted -- kept
** or not -- or the end of the run): the lease and the basis reference go
** back. */
static lsim_err lsim__cm_left(lsim_engine *e, void *st, int wi,
                              lsim_core_req *r, lsim_tick now, int keep,
                              lsim_errbuf *eb) {
  (void)st;
  (void)keep;
  lsim_core_worker *w = &e->w[wi];
  lsim__cmr *q = lsim__C(e, r);
  if (!q->bound)
    return 0;
  q->bound = 0;
  lsim_err rc = lsim_cmp_release(&w->cat, &q->lease, eb);
  if (!rc)
    rc = lsim_res_unbind(w->res, lsim__cm_basis(e, r->adapter), now, eb);
  return rc;
}

/* The launch: the catalog agrees across ranks (one rank per worker here)
** and every row's lease still matches the live generation. */
static lsim_err lsim__cm_launch(lsim_engine *e, void *st, int wi,
                                lsim_plan *plan, lsim_errbuf *eb) {
  (void)st;
  (void)plan;
  lsim_core_worker *w = &e->w[wi];
  lsim_cmp_catalog *ranks[1] = {&w->cat};
  lsim_err rc = lsim_cmp_tp_check(ranks, 1, eb);
  for (int i = 0; !rc && i < w->nbatch; i++)
    rc = lsim_cmp_launch_check(&w->cat, &lsim__C(e, w->batch[i])->lease, eb);
  return rc;
}

/* I5: a basis object's refcount equals the running requests of its cluster
** holding a lease, and the catalog's in-flight count of the cluster; the
** catalog calls a basis resident exactly when its object is visible. */
static int lsim__cm_sound(const lsim_engine *e, const void *st, int wi,
                          int64_t *kv, int *ref) {
  (void)st;
  (void)kv; /* bases are adapter objects: no KV pages */
  (void)ref; /* leases reference bases, not adapters */
  const lsim_core_worker *w = &e->w[wi];
  const lsim_cmp_gen *g = &w->cat.live;
  if (!g->number || g->k != e->k)
    return 0;
  for (int c = 0; c < e->k; c++) {
    int64_t held = 0;
    for (const lsim_core_req *r = w->running.head; r; r = r->next) {
      const lsim__cmr *q = lsim__C(e, r);
      held += q->bound && q->lease.cluster == c;
    }
    for (const lsim_core_req *r = w->waiting.head; r; r = r->next)
      if (lsim__C(e, r)->bound)
        return 0; /* a waiting request holds no lease */
    lsim_res_adapter_view bv = lsim_core_av(w, e->cfg.nadapters + c);
    int64_t inflight = g->inflight[c];
    if (w->cat.prev.number && c < w->cat.prev.k)
      inflight += w->cat.prev.inflight[c];
    int vis = bv.state == LSIM_RS_PUBLISHED || bv.state == LSIM_RS_ACTIVE ||
              bv.state == LSIM_RS_IDLE;
    if (bv.refcount != held || inflight != held || !!g->resident[c] != vis)
      return 0;
  }
  return 1;
}

const lsim_core_ext lsim_ext_compress = {
    .name = "compress",
    .state_size = 0,
    .req_state_size = sizeof(lsim__cmr),
    .setup = lsim__cm_setup,
    .admit = lsim__cm_admit,
    .left = lsim__cm_left,
    .launch = lsim__cm_launch,
    .sound = lsim__cm_sound,
};
