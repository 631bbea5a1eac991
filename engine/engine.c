/*
** engine.c: placement, admission, iteration selection and the drive of
** each worker's residency engine (residency.c).
**
** Invariants (checked by lsim__worker_sound, under assert after every
** transaction and by lsim_engine_check on demand):
**
**   I1  the worker's lsim_res passes lsim_res_check (pool conservation,
**       unique ownership, generations, no leaked reservation).
**   I2  the KV slots of the pool are exactly the KV objects of this
**       worker's admitted requests (running, or waiting with a committed
**       reservation).
**   I3  an adapter's refcount equals its admitted requests on this worker;
**       its queued-reservation count equals its waiting requests whose
**       `queued` flag is set.
**   I4  a request with an open load txn (`txn` >= 0) is waiting, and that
**       txn carries it.
**   I5  compressed collections (engine.h, lsim_engine_cmp; checked by
**       ext_compress.c's sound hook): a basis
**       object's refcount equals the running requests of its cluster
**       holding a catalog lease, and equals the catalog's in-flight count
**       of the cluster; the catalog calls a basis resident exactly when
**       its residency object is visible.
**
** Event order within one call is fixed by the code below, and every list is
** walked in insertion order, so the emitted sequence depends only on the
** inputs.
*/
#include "engine.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_impl.h"


/* Decode pages of r for `tokens` tokens, less what the cache holds. */
static int64_t lsim__own_pages(const lsim_engine *e, const lsim_core_req *r,
                               int64_t tokens) {
  int64_t p = lsim_core_kv_pages(e, tokens) - r->kv_lent;
  return p > 0 ? p : 0;
}

/* ---- extensions (engine_impl.h, lsim_core_ext) ---------------------------- */

/* The extensions, in hook order (LSIM_CORE_EXT_*). */
static const lsim_core_ext *const lsim__exts[LSIM_CORE_NEXT] = {
    [LSIM_CORE_EXT_HOTSWAP] = &lsim_ext_hotswap,
    [LSIM_CORE_EXT_COMPRESS] = &lsim_ext_compress,
    [LSIM_CORE_EXT_PREFIX] = &lsim_ext_prefix};

#define LSIM__EXT_EACH(x, hook)                                          \
  for (int x = 0; x < LSIM_CORE_NEXT; x++)                              \
    if (e->ext_st[x] && lsim__exts[x]->hook)

static lsim_err lsim__ext_arrive(lsim_engine *e, lsim_core_req *r,
                                 const uint64_t *blocks, int nblocks,
                                 lsim_errbuf *eb) {
  LSIM__EXT_EACH(x, arrive) {
    lsim_err rc = lsim__exts[x]->arrive(e, e->ext_st[x], r, blocks, nblocks,
                                        eb);
    if (rc)
      return rc;
  }
  return 0;
}

static lsim_err lsim__ext_admit(lsim_engine *e, int wi, lsim_core_req *r,
                                lsim_tick now, lsim_errbuf *eb) {
  LSIM__EXT_EACH(x, admit) {
    lsim_err rc = lsim__exts[x]->admit(e, e->ext_st[x], wi, r, now, eb);
    if (rc)
      return rc;
  }
  return 0;
}

static lsim_err lsim__ext_first_row(lsim_engine *e, int wi, lsim_core_req *r,
                                    lsim_tick now, lsim_errbuf *eb) {
  if (!e->nfirst_row)
    return 0;
  LSIM__EXT_EACH(x, first_row) {
    lsim_err rc = lsim__exts[x]->first_row(e, e->ext_st[x], wi, r, now, eb);
    if (rc)
      return rc;
  }
  return 0;
}

static lsim_err lsim__ext_leave(lsim_engine *e, int wi, lsim_core_req *r,
                                lsim_errbuf *eb) {
  LSIM__EXT_EACH(x, leave) {
    lsim_err rc = lsim__exts[x]->leave(e, e->ext_st[x], wi, r, eb);
    if (rc)
      return rc;
  }
  return 0;
}

static lsim_err lsim__ext_left(lsim_engine *e, int wi, lsim_core_req *r,
                               lsim_tick now, int keep, lsim_errbuf *eb) {
  LSIM__EXT_EACH(x, left) {
    lsim_err rc = lsim__exts[x]->left(e, e->ext_st[x], wi, r, now, keep, eb);
    if (rc)
      return rc;
  }
  return 0;
}

static lsim_err lsim__ext_migrate(lsim_engine *e, int wi, lsim_core_req *r,
                                  int to, lsim_tick now, lsim_errbuf *eb) {
  LSIM__EXT_EACH(x, migrate) {
    lsim_err rc = lsim__exts[x]->migrate(e, e->ext_st[x], wi, r, to, now, eb);
    if (rc)
      return rc;
  }
  return 0;
}

static int lsim__ext_hold(const lsim_engine *e, int wi,
                          const lsim_core_req *r) {
  LSIM__EXT_EACH(x, hold)
  if (lsim__exts[x]->hold(e, e->ext_st[x], wi, r))
    return 1;
  return 0;
}

static lsim_err lsim__ext_launch(lsim_engine *e, int wi, lsim_plan *plan,
                                 lsim_errbuf *eb) {
  LSIM__EXT_EACH(x, launch) {
    lsim_err rc = lsim__exts[x]->launch(e, e->ext_st[x], wi, plan, eb);
    if (rc)
      return rc;
  }
  return 0;
}

static void lsim__ext_fence(lsim_engine *e, int wi) {
  LSIM__EXT_EACH(x, fence)
  lsim__exts[x]->fence(e, e->ext_st[x], wi);
}

static lsim_err lsim__ext_iter_end(lsim_engine *e, int wi, lsim_tick now,
                                   lsim_errbuf *eb) {
  LSIM__EXT_EACH(x, iter_end) {
    lsim_err rc = lsim__exts[x]->iter_end(e, e->ext_st[x], wi, now, eb);
    if (rc)
      return rc;
  }
  return 0;
}

/* The version and digest of adapter a the pool registers (source) or
** validates (staged) on worker wi: the catalog's artifact, version 0,
** unless an extension names another. */
static lsim_err lsim__ext_source(lsim_engine *e, int wi, int a, int staged,
                                 int *version, lsim_digest *d,
                                 lsim_errbuf *eb) {
  *version = 0;
  *d = e->artifact[a];
  for (int x = 0; x < LSIM_CORE_NEXT; x++) {
    const lsim_core_ext *o = lsim__exts[x];
    lsim_err (*f)(lsim_engine *, void *, int, int, int *, lsim_digest *,
                  lsim_errbuf *) = staged ? o->staged : o->source;
    if (!e->ext_st[x] || !f)
      continue;
    lsim_err rc = f(e, e->ext_st[x], wi, a, version, d, eb);
    if (rc)
      return rc;
  }
  return 0;
}

static lsim_err lsim__ext_reclaim(lsim_engine *e, int wi, lsim_tick now,
                                  int64_t want, lsim_errbuf *eb) {
  LSIM__EXT_EACH(x, reclaim) {
    lsim_err rc = lsim__exts[x]->reclaim(e, e->ext_st[x], wi, now, want, eb);
    if (rc)
      return rc;
  }
  return 0;
}

static int lsim__ext_sound(const lsim_engine *e, int wi, int64_t *kv,
                           int *ref) {
  int ok = 1;
  LSIM__EXT_EACH(x, sound)
  ok &= lsim__exts[x]->sound(e, e->ext_st[x], wi, kv, ref);
  return ok;
}

static void lsim__ext_req_free(lsim_engine *e, lsim_core_req *r) {
  LSIM__EXT_EACH(x, req_free)
  lsim__exts[x]->req_free(e, e->ext_st[x], r);
}

/* Every extension's setup, in order (after workers and policies exist). */
static lsim_err lsim__ext_setup(lsim_engine *e, lsim_errbuf *eb) {
  for (int x = 0; x < LSIM_CORE_NEXT; x++) {
    const lsim_core_ext *o = lsim__exts[x];
    void *st = calloc(1, o->state_size ? o->state_size : 1);
    if (!st)
      return lsim_fail(eb, LSIM_E_NOMEM, "extension %s: out of memory",
                       o->name);
    int on = 1;
    e->ext_st[x] = st; /* its release sees it even when setup fails */
    lsim_err rc = o->setup ? o->setup(e, st, &on, eb) : 0;
    if (rc)
      return rc;
    if (!on) {
      if (o->release)
        o->release(e, st);
      free(st);
      e->ext_st[x] = NULL;
      continue;
    }
    e->nreclaim += o->reclaim != NULL;
    e->nfirst_row += o->first_row != NULL;
  }
  return 0;
}

static void lsim__ext_release(lsim_engine *e) {
  for (int x = 0; x < LSIM_CORE_NEXT; x++)
    if (e->ext_st[x]) {
      if (lsim__exts[x]->release)
        lsim__exts[x]->release(e, e->ext_st[x]);
      free(e->ext_st[x]);
      e->ext_st[x] = NULL;
    }
}

/* ---- lists and request pool -------------------------------------------- */

static void lsim__list_push(lsim_core_list *l, lsim_core_req *r) {
  r->next = NULL;
  r->prev = l->tail;
  if (l->tail)
    l->tail->next = r;
  else
    l->head = r;
  l->tail = r;
  l->n++;
}

static void lsim__list_push_front(lsim_core_list *l, lsim_core_req *r) {
  r->prev = NULL;
  r->next = l->head;
  if (l->head)
    l->head->prev = r;
  else
    l->tail = r;
  l->head = r;
  l->n++;
}

static void lsim__list_remove(lsim_core_list *l, lsim_core_req *r) {
  if (r->prev)
    r->prev->next = r->next;
  else
    l->head = r->next;
  if (r->next)
    r->next->prev = r->prev;
  else
    l->tail = r->prev;
  r->prev = r->next = NULL;
  l->n--;
}

static lsim_core_req *lsim__req_alloc(lsim_engine *e) {
  lsim_core_req *r = e->freelist;
  if (r) {
    e->freelist = r->next;
  } else {
    r = malloc(e->req_size);
    if (!r)
      return NULL;
  }
  memset(r, 0, e->req_size);
  r->kv = -1;
  r->txn = -1;
  return r;
}

static void lsim__req_free(lsim_engine *e, lsim_core_req *r) {
  lsim__ext_req_free(e, r);
  r->next = e->freelist;
  e->freelist = r;
}

/* ---- events ------------------------------------------------------------- */

lsim_err lsim_core_emit(lsim_engine *e, lsim_tick now, int kind, int w,
                           int64_t request, int tenant, int adapter,
                           int64_t generation, int attempt, int64_t pages,
                           int64_t bytes, int64_t value, const char *detail,
                           lsim_errbuf *eb) {
  lsim_event ev;
  ev.tick = now;
  ev.kind = kind;
  ev.worker = w;
  ev.request = request;
  ev.tenant = tenant;
  ev.adapter = adapter;
  ev.generation = generation;
  ev.attempt = attempt;
  ev.pages = pages;
  ev.bytes = bytes;
  ev.value = value;
  ev.detail = detail;
  return lsim_evlog_emit(&e->log, &ev, eb);
}

lsim_evlog *lsim_engine_evlog(lsim_engine *e) { return &e->log; }

/* Charge the span since r->mark to r's current phase and enter phase
** `ph` at `now`.  Once the first token exists every span is decode. */
void lsim_core_phase(lsim_core_req *r, lsim_tick now, int ph) {
  if (now > r->mark)
    r->acc[r->phase] += now - r->mark;
  r->mark = now;
  r->phase = r->produced > 0 ? LSIM_CORE_PH_DECODE : ph;
}

static lsim_err lsim__record(lsim_engine *e, lsim_core_req *r,
                             lsim_tick now, const char *outcome,
                             lsim_errbuf *eb) {
  lsim_core_phase(r, now, r->phase);
  if (r->worker != LSIM_NONE)
    lsim_sched_on_backlog(e->cfg.sched, e->sched_st, r->tenant, -1);
  if (!e->cfg.sink.request_done)
    return 0;
  lsim_request_record rec;
  rec.request = r->id;
  rec.tenant = r->tenant;
  rec.adapter = r->adapter;
  rec.worker = r->worker;
  rec.arrival_tick = r->arrival;
  rec.first_token_tick = r->produced > 0 ? r->first_token : LSIM_NONE;
  rec.finish_tick = now;
  rec.prompt_tokens = r->prompt;
  rec.output_tokens = r->produced;
  rec.loads_waited = r->loads_waited;
  rec.outcome = outcome;
  rec.queue_wait_ticks = r->acc[LSIM_CORE_PH_QUEUE];
  rec.load_wait_ticks = r->acc[LSIM_CORE_PH_LOAD];
  rec.prefill_ticks = r->acc[LSIM_CORE_PH_PREFILL];
  rec.decode_ticks = r->acc[LSIM_CORE_PH_DECODE];
  rec.preemptions = r->preemptions;
  rec.cold = r->cold;
  rec.requested_tokens = r->output;
  lsim_err rc = e->cfg.sink.request_done(e->cfg.sink.ud, &rec);
  if (rc)
    return lsim_fail(eb, rc, "request sink failed on request %lld",
                     (long long)r->id);
  return 0;
}

/* ---- small views ---------------------------------------------------------- */

static int lsim__tenant_of(const lsim_engine *e, int a) {
  return a % e->cfg.ntenants;
}

static lsim_res_adapter_view lsim__av(const lsim_core_worker *w, int a) {
  lsim_res_adapter_view v;
  lsim_res_adapter(w->res, a, &v);
  return v;
}

static int lsim__visible(int st) {
  return st == LSIM_RS_PUBLISHED || st == LSIM_RS_ACTIVE || st == LSIM_RS_IDLE;
}

/* ---- compressed collections (engine.h, lsim_engine_cmp) ----------------- */

/* The basis object of adapter a, or -1 (ordinary adapter; or a is itself
** a basis). */
static int lsim__basis_of(const lsim_engine *e, int a) {
  return e->k && a >= 0 && a < e->cfg.nadapters
             ? e->cfg.nadapters + e->cluster[a]
             : -1;
}

static int lsim__is_basis(const lsim_engine *e, int o) {
  return o >= e->cfg.nadapters;
}

int lsim_engine_basis_object(const lsim_engine *e, int c) {
  return e->k && c >= 0 && c < e->k ? e->cfg.nadapters + c : -1;
}

const lsim_cmp_catalog *lsim_engine_cmp_catalog(const lsim_engine *e,
                                                int w) {
  return e->k && w >= 0 && w < e->cfg.workers ? &e->w[w].cat : NULL;
}

/* ---- core services for extensions (engine_impl.h) ---------------------- */

static lsim_err lsim__emit_victims(lsim_engine *e, int wi, lsim_tick now,
                                   const int *v, int nv, int relaxed,
                                   lsim_errbuf *eb);
static lsim_err lsim__emit_retired(lsim_engine *e, int wi, lsim_tick now,
                                   const int *v, int nv, lsim_errbuf *eb);
static lsim_err lsim__begin(lsim_engine *e, int wi, lsim_tick now,
                            const lsim_res_req *q, int relaxed, int64_t *txn,
                            int *victims, int *nv, int *used_relaxed, int *ok,
                            lsim_errbuf *eb);

lsim_err lsim_core_begin(lsim_engine *e, int wi, lsim_tick now,
                         const lsim_res_req *q, int relaxed, int64_t *txn,
                         int *victims, int *nv, int *used_relaxed, int *ok,
                         lsim_errbuf *eb) {
  return lsim__begin(e, wi, now, q, relaxed, txn, victims, nv, used_relaxed,
                     ok, eb);
}

lsim_err lsim_core_emit_victims(lsim_engine *e, int wi, lsim_tick now,
                                const int *v, int nv, int relaxed,
                                lsim_errbuf *eb) {
  return lsim__emit_victims(e, wi, now, v, nv, relaxed, eb);
}

lsim_err lsim_core_emit_retired(lsim_engine *e, int wi, lsim_tick now,
                                const int *v, int nv, lsim_errbuf *eb) {
  return lsim__emit_retired(e, wi, now, v, nv, eb);
}

/* ---- invariants --------------------------------------------------------- */

static int lsim__worker_sound(const lsim_engine *e, const lsim_core_worker *w) {
  if (lsim_res_check(w->res, NULL))
    return 0;
  lsim_res_view v;
  lsim_res_view_get(w->res, &v);
  int64_t kv = 0;
  int na = e->cfg.nadapters;
  /* I3 by recount, with two passes over the lists per adapter would be
  ** quadratic: count into the scratch arrays of the ranking context */
  int *ref = calloc((size_t)na * 2, sizeof *ref);
  if (!ref)
    return 1; /* cannot check without memory; not a violation */
  int *que = ref + na;
  int ok = 1;
  const lsim_core_list *lists[2] = {&w->running, &w->waiting};
  for (int k = 0; k < 2; k++)
    for (const lsim_core_req *r = lists[k]->head; r; r = r->next) {
      if (r->kv >= 0) {
        int64_t owned, used;
        if (lsim_res_kv_pages(w->res, r->kv, &owned, &used, NULL) ||
            owned != r->kv_pages)
          ok = 0;
        kv += r->kv_pages;
        ref[r->adapter]++;
      } else if (k == 0) {
        ok = 0; /* a running request always holds KV */
      }
      if (k == 1 && r->queued)
        que[r->adapter]++;
      if (r->txn >= 0 && (k == 0 || r->kv >= 0))
        ok = 0;
    }
  /* pages and adapter references the extensions hold in the pool (the
  ** prefix cache's blocks, hotswap copies beside their live version), and
  ** their own checks */
  if (!lsim__ext_sound(e, (int)(w - e->w), &kv, ref))
    ok = 0;
  for (int a = 0; ok && a < na; a++) {
    lsim_res_adapter_view av = lsim__av(w, a);
    if (av.refcount != ref[a] || av.queued != que[a])
      ok = 0;
  }
  free(ref);
  return ok && kv == v.kv;
}

int lsim_engine_check(const lsim_engine *e) {
  for (int i = 0; i < e->cfg.workers; i++)
    if (!lsim__worker_sound(e, &e->w[i]))
      return 0;
  return 1;
}

/* ---- setup -------------------------------------------------------------- */

static void *lsim__policy_state(size_t n) { return calloc(1, n ? n : 1); }

lsim_err lsim_engine_new(lsim_engine **out, const lsim_engine_cfg *cfg,
                         lsim_errbuf *eb) {
  *out = NULL;
  if (cfg->workers < 1 || cfg->nadapters < 1 || cfg->pool_pages < 1 ||
      cfg->page_bytes < 1 || !cfg->sched || !cfg->evict || !cfg->prefetch ||
      cfg->guard_pages < 0 || cfg->ntenants < 1 || cfg->max_loras < 0 ||
      cfg->max_lora_rank < 0 || cfg->max_cpu_loras < 0 ||
      (cfg->max_lora_rank > 0 && cfg->max_loras == 0))
    return lsim_fail(eb, LSIM_E_USAGE, "engine configuration incomplete");
  if (!lsim_place_at(cfg->placement))
    return lsim_fail(eb, LSIM_E_USAGE, "placement %d is not registered",
                     cfg->placement);
  lsim_engine *e = calloc(1, sizeof *e);
  if (!e)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory creating engine");
  e->cfg = *cfg;
  lsim_evlog_init(&e->log, &cfg->sink);
  /* each extension's request slot after the core's fields, aligned */
  size_t off = sizeof(lsim_core_req);
  for (int x = 0; x < LSIM_CORE_NEXT; x++) {
    off = (off + 15) & ~(size_t)15;
    e->ext_off[x] = off;
    off += lsim__exts[x]->req_state_size;
  }
  e->req_size = off;
  int na = cfg->nadapters;
  const lsim_engine_cmp *cm = cfg->compress;
  if (cm) {
    if (cm->clusters < 1 || cm->clusters > na || !cm->cluster ||
        !cm->basis_bytes || !cm->basis_pages || !cm->basis || !cm->core ||
        !cm->version || cm->affinity_weight < 0) {
      free(e);
      return lsim_fail(eb, LSIM_E_USAGE,
                       "compressed collection configuration incomplete");
    }
    for (int a = 0; a < na; a++)
      if (cm->cluster[a] < 0 || cm->cluster[a] >= cm->clusters) {
        free(e);
        return lsim_fail(eb, LSIM_E_CMP_CLUSTERS,
                         "adapter %d: cluster %d outside 0..%d", a,
                         cm->cluster[a], cm->clusters - 1);
      }
    e->k = cm->clusters;
    e->bundle = cm->bundle;
    e->cfg.sched_params.affinity_weight = cm->affinity_weight;
  } else {
    e->cfg.sched_params.affinity_weight = 0;
  }
  int nobj = e->nobj = na + e->k;
  e->rank = malloc((size_t)na * sizeof *e->rank);
  e->bytes = malloc((size_t)nobj * sizeof *e->bytes);
  e->pages = malloc((size_t)nobj * sizeof *e->pages);
  e->artifact = calloc((size_t)nobj, sizeof *e->artifact);
  e->w = calloc((size_t)cfg->workers, sizeof *e->w);
  e->cands = malloc(2 * LSIM_ENGINE_WINDOW * sizeof *e->cands);
  e->cand_req = malloc(2 * LSIM_ENGINE_WINDOW * sizeof *e->cand_req);
  e->order = malloc(2 * LSIM_ENGINE_WINDOW * sizeof *e->order);
  e->ecands = malloc((size_t)nobj * sizeof *e->ecands);
  e->admitted = malloc(2 * LSIM_ENGINE_WINDOW * sizeof *e->admitted);
  e->prop = malloc((size_t)nobj * sizeof *e->prop);
  e->capseen = calloc((size_t)na, sizeof *e->capseen);
  e->nudge = malloc((size_t)cfg->workers * sizeof *e->nudge);
  e->nudged = calloc((size_t)cfg->workers, 1);
  e->vict = malloc((size_t)nobj * sizeof *e->vict);
  e->lmark = calloc((size_t)nobj, sizeof *e->lmark);
  e->vict_done = malloc((size_t)nobj * sizeof *e->vict_done);
  e->rest = malloc((size_t)nobj * sizeof *e->rest);
  e->cluster = e->k ? malloc((size_t)na * sizeof *e->cluster) : NULL;
  e->bcl = malloc(((size_t)cfg->max_batch_requests + 1) * sizeof *e->bcl);
  e->fhead = malloc((size_t)na * sizeof *e->fhead);
  e->ftail = malloc((size_t)na * sizeof *e->ftail);
  e->cfg.sched_params.ntenants = cfg->ntenants;
  e->cfg.sched_params.nadapters = na;
  if (e->cfg.sched_params.w_in == 0 && e->cfg.sched_params.w_out == 0)
    e->cfg.sched_params.w_in = e->cfg.sched_params.w_out = 1;
  e->sched_st = lsim__policy_state(
      lsim_sched_state_bytes(cfg->sched, &e->cfg.sched_params));
  e->fair = lsim_fair_new(cfg->workers, na, cfg->ntenants, &cfg->sink);
  e->pcands = malloc(LSIM_ENGINE_WINDOW * sizeof *e->pcands);
  e->pseen = calloc((size_t)na, sizeof *e->pseen);
  e->prefetch_st = lsim__policy_state(cfg->prefetch->state_size);
  e->place = lsim_place_at(cfg->placement);
  e->place_st = lsim__policy_state(e->place->state_size);
  int ok = e->rank && e->bytes && e->pages && e->artifact && e->w &&
           e->cands && e->cand_req && e->order && e->ecands && e->admitted &&
           e->prop && e->capseen && e->nudge && e->nudged && e->vict && e->lmark && e->vict_done && e->rest && e->fhead && e->ftail && e->sched_st && e->prefetch_st && e->place_st &&
           e->fair && e->pcands && e->pseen && e->bcl &&
           (!e->k || e->cluster);
  if (ok) {
    for (int a = 0; a < na; a++) {
      e->rank[a] = cfg->adapter_rank[a];
      e->bytes[a] = cfg->adapter_bytes[a];
      e->pages[a] = cfg->adapter_pages
                        ? cfg->adapter_pages[a]
                        : (cfg->adapter_bytes[a] + cfg->page_bytes - 1) /
                              cfg->page_bytes;
      e->fhead[a] = e->ftail[a] = -1;
      /* the synthetic catalog's artifact identity: a digest of what the
      ** adapter is (no path, no alias) */
      char id[96];
      int n = snprintf(id, sizeof id, "lorasim-artifact:%d:rank=%d:bytes=%lld",
                       a, e->rank[a], (long long)e->bytes[a]);
      if (cm) /* a core is identified by its digest in the bundle */
        e->artifact[a] = cm->core[a];
      else if (lsim_sha256(id, (size_t)n, &e->artifact[a], NULL))
        ok = 0;
      if (cm)
        e->cluster[a] = cm->cluster[a];
    }
    for (int c = 0; cm && c < e->k; c++) {
      e->bytes[na + c] = cm->basis_bytes[c];
      e->pages[na + c] = cm->basis_pages[c];
      e->artifact[na + c] = cm->basis[c];
    }
    static const char kabi[] = "lorasim-kernel-abi:model:v1";
    if (lsim_sha256(kabi, sizeof kabi - 1, &e->kabi, NULL))
      ok = 0;
  }
  e->ffree = -1;
  size_t est = lsim_evict_state_bytes(cfg->evict, nobj);
  int *comp = NULL;
  if (ok && e->k) {
    comp = malloc((size_t)nobj * sizeof *comp);
    if (!comp)
      ok = 0;
    for (int o = 0; comp && o < nobj; o++)
      comp[o] = o < na ? na + e->cluster[o] : -1;
  }
  for (int i = 0; ok && i < cfg->workers; i++) {
    lsim_core_worker *w = &e->w[i];
    lsim_res_cfg rc = {cfg->pool_pages, cfg->page_bytes, nobj, e->pages,
                       cfg->guard_pages, e->kabi};
    lsim_err rrc = lsim_res_new(&w->res, &rc, eb);
    if (!rrc && cfg->res_hooks)
      rrc = lsim_res_set_hooks(w->res, cfg->res_hooks, cfg->res_hooks_ud, i,
                               eb);
    if (!rrc && comp)
      rrc = lsim_res_set_companions(w->res, comp, eb);
    /* padded-rank slots: max_loras slots per worker (residency R7) */
    if (!rrc && cfg->max_lora_rank > 0)
      rrc = lsim_res_set_slots(w->res, cfg->max_loras, eb);
    if (!rrc && cfg->max_cpu_loras > 0)
      rrc = lsim_host_init(&w->host, cfg->max_cpu_loras, nobj, eb);
    if (rrc) {
      free(comp);
      lsim_engine_release(e);
      return rrc;
    }
    w->attempts = calloc((size_t)na, sizeof *w->attempts);
    w->batch = malloc(((size_t)cfg->max_batch_requests + 1) * sizeof *w->batch);
    /* the launch names its adapters and, compressed, their bases */
    w->launched = malloc(2 * ((size_t)cfg->max_batch_requests + 1) *
                         sizeof *w->launched);
    w->evict_st = lsim__policy_state(est);
    ok = w->attempts && w->batch && w->launched && w->evict_st;
    if (ok && lsim_evict_init(cfg->evict, w->evict_st, nobj))
      ok = -1;
  }
  free(comp);
  if (ok != 1) {
    int pol = ok == -1;
    lsim_engine_release(e);
    return pol ? lsim_fail(eb, LSIM_E_POLICY, "policy initialisation failed")
               : lsim_fail(eb, LSIM_E_NOMEM, "out of memory creating engine");
  }
  e->cfg.adapter_rank = NULL;
  e->cfg.adapter_bytes = NULL;
  e->cfg.adapter_pages = NULL;
  lsim_err rc = lsim_sched_init(cfg->sched, e->sched_st, &e->cfg.sched_params);
  if (!rc)
    rc = lsim_prefetch_init(cfg->prefetch, e->prefetch_st, na,
                            e->cfg.sched_params.age_ticks);
  if (rc) {
    lsim_engine_release(e);
    return lsim_fail(eb, LSIM_E_POLICY, "policy initialisation failed");
  }
  if ((rc = lsim__ext_setup(e, eb))) {
    lsim_engine_release(e);
    return rc;
  }
  e->cfg.prefix = NULL;
  e->cfg.compress = NULL;
  *out = e;
  return 0;
}

static void lsim__free_list(lsim_core_req *r) {
  while (r) {
    lsim_core_req *n = r->next;
    free(r);
    r = n;
  }
}

void lsim_engine_release(lsim_engine *e) {
  if (!e)
    return;
  /* extensions first: they may still read the lists and the pools */
  lsim__ext_release(e);
  for (int i = 0; e->w && i < e->cfg.workers; i++) {
    lsim__free_list(e->w[i].waiting.head);
    lsim__free_list(e->w[i].running.head);
    lsim_res_release(e->w[i].res);
    free(e->w[i].attempts);
    free(e->w[i].batch);
    free(e->w[i].launched);
    free(e->w[i].evict_st);
    lsim_cmp_catalog_release(&e->w[i].cat);
    lsim_host_release(&e->w[i].host);
  }
  free(e->cluster);
  free(e->bcl);
  lsim__free_list(e->freelist);
  free(e->w);
  free(e->rank);
  free(e->bytes);
  free(e->pages);
  free(e->artifact);
  free(e->cands);
  free(e->cand_req);
  free(e->order);
  free(e->ecands);
  free(e->admitted);
  free(e->prop);
  free(e->capseen);
  free(e->nudge);
  free(e->nudged);
  free(e->vict);
  free(e->lmark);
  free(e->vict_done);
  free(e->rest);
  free(e->fhead);
  free(e->ftail);
  free(e->fnode);
  free(e->sched_st);
  free(e->prefetch_st);
  free(e->place_st);
  lsim_fair_release(e->fair);
  free(e->pcands);
  free(e->pseen);
  free(e);
}

/* ---- the future of the trace (oracle policies) -------------------------- */

lsim_err lsim_engine_future_push(lsim_engine *e, int a, lsim_tick tick,
                                 lsim_errbuf *eb) {
  if (a < 0 || a >= e->cfg.nadapters)
    return lsim_fail(eb, LSIM_E_STATE, "future: adapter %d out of range", a);
  if (e->ffree < 0) {
    int cap = e->fcap ? 2 * e->fcap : 256;
    lsim_core_fnode *n = realloc(e->fnode, (size_t)cap * sizeof *n);
    if (!n)
      return lsim_fail(eb, LSIM_E_NOMEM, "out of memory in the lookahead");
    e->fnode = n;
    for (int i = e->fcap; i < cap; i++)
      n[i].next = i + 1 < cap ? i + 1 : -1;
    e->ffree = e->fcap;
    e->fcap = cap;
  }
  int k = e->ffree;
  e->ffree = e->fnode[k].next;
  e->fnode[k].tick = tick;
  e->fnode[k].next = -1;
  if (e->ftail[a] >= 0)
    e->fnode[e->ftail[a]].next = k;
  else
    e->fhead[a] = k;
  e->ftail[a] = k;
  return 0;
}

void lsim_engine_future_pop(lsim_engine *e, int a) {
  if (a < 0 || a >= e->cfg.nadapters || e->fhead[a] < 0)
    return;
  int k = e->fhead[a];
  e->fhead[a] = e->fnode[k].next;
  if (e->fhead[a] < 0)
    e->ftail[a] = -1;
  e->fnode[k].next = e->ffree;
  e->ffree = k;
}

/* ---- helpers ------------------------------------------------------------ */

int64_t lsim_core_kv_pages(const lsim_engine *e, int64_t tokens) {
  int64_t b = tokens * e->cfg.kv_bytes_per_token;
  return (b + e->cfg.page_bytes - 1) / e->cfg.page_bytes;
}

/* Chunked prefill: the prompt tokens of a prefill row starting with
** `left` tokens still to prefill (all of them when chunking is off). */
static int lsim__chunk_of(const lsim_engine *e, int64_t left) {
  int64_t c = e->cfg.prefill_chunk;
  return (int)(c > 0 && left > c ? c : left);
}

static int lsim__first_chunk(const lsim_engine *e, int64_t prompt) {
  return lsim__chunk_of(e, prompt);
}

/* Token rows of a request's first row when admitted: its first prefill
** chunk, or, after a preemption, its prompt and the tokens it had
** produced, recomputed in one row. */
static int lsim__admit_rows(const lsim_engine *e, const lsim_core_req *r) {
  int p = r->prompt - r->reuse; /* prefix-cache hit: rows not computed */
  return r->recomp > 0 ? p + r->recomp : lsim__first_chunk(e, p);
}

/* A running request whose first row (its prefill, or its recompute after a
** preemption) has not completed: admitted, then its iteration failed. */
static int lsim__first_row_pending(const lsim_core_req *r) {
  return (r->produced == 0 && r->prefilled == 0) || r->recomp > 0;
}

/* A running request whose prefill is part-done (chunked prefill only): it
** gets its next prefill chunk, not a decode row. */
static int lsim__mid_prefill(const lsim_core_req *r) {
  return r->produced == 0 && r->prefilled > 0;
}

/* Ranking callback for lsim_res_begin: the eviction policy picks among the
** eligible adapters the residency engine found. */
static int lsim__rank(void *ud, const int *cand, int n) {
  lsim_engine *e = ud;
  lsim_core_worker *w = &e->w[e->rank_worker];
  for (int i = 0; i < n; i++) {
    int a = cand[i];
    lsim_res_adapter_view v = lsim__av(w, a);
    lsim_evict_cand *c = &e->ecands[i];
    c->adapter = a;
    c->pages = v.pages;
    c->last_use_tick = v.last_use;
    c->published_tick = v.published_tick;
    c->uses = v.uses;
    c->total_uses = v.total_uses;
    c->load_cost = e->bytes[a];
    c->next_use = LSIM_TICK_NEVER;
    if (e->cfg.evict->needs_future && a < e->cfg.nadapters && e->fhead[a] >= 0)
      c->next_use = e->fnode[e->fhead[a]].tick;
  }
  int k = lsim_evict_pick(e->cfg.evict, w->evict_st, e->rank_now, e->ecands, n);
  if (k < 0 || k >= n) {
    e->rank_bad = 1;
    return 0;
  }
  return k;
}

/* Emit adapter_evicted for the victims a txn just marked retiring. */
static lsim_err lsim__emit_victims(lsim_engine *e, int wi, lsim_tick now,
                                   const int *v, int nv, int relaxed,
                                   lsim_errbuf *eb) {
  lsim_core_worker *w = &e->w[wi];
  for (int k = 0; k < nv; k++) {
    lsim_res_adapter_view av = lsim__av(w, v[k]);
    if (lsim__is_basis(e, v[k])) {
      /* the catalog agrees (no request of the cluster in flight), or the
      ** pool and the catalog disagree: a broken invariant (I5) */
      int c = v[k] - e->cfg.nadapters;
      lsim_err rc = lsim_cmp_basis_evict(&w->cat, c, eb);
      if (rc)
        return rc;
      /* adapter: none; value: the cluster */
      if ((rc = lsim_core_emit(e, now, LSIM_EV_BASIS_EVICTED, wi, LSIM_NONE,
                           LSIM_NONE, LSIM_NONE, av.generation, 0,
                           e->pages[v[k]], e->bytes[v[k]], c,
                           relaxed ? "relaxed" : e->cfg.evict->name, eb)))
        return rc;
      continue;
    }
    lsim_err rc = lsim_core_emit(e, now, LSIM_EV_ADAPTER_EVICTED, wi, LSIM_NONE,
                             lsim__tenant_of(e, v[k]), v[k], av.generation, 0,
                             e->pages[v[k]], e->bytes[v[k]], av.uses,
                             relaxed ? "relaxed" : e->cfg.evict->name, eb);
    if (rc)
      return rc;
    /* a prefetched generation evicted before any request used it */
    if (lsim_fair_prefetch_wasted(e->fair, wi, v[k]) &&
        (rc = lsim_core_emit(e, now, LSIM_EV_PREFETCH_RELEASED, wi, LSIM_NONE,
                         lsim__tenant_of(e, v[k]), v[k], av.generation, 0,
                         e->pages[v[k]], e->bytes[v[k]], 0, "wasted", eb)))
      return rc;
    /* relaxed mode may evict under waiters: they are load-eligible again */
    for (lsim_core_req *r = relaxed ? w->waiting.head : NULL; r; r = r->next)
      if (r->adapter == v[k] && r->fair == 2) {
        r->fair = 1;
        lsim_core_phase(r, now, LSIM_CORE_PH_LOAD);
        if ((rc = lsim_fair_became_cold(e->fair, now, wi, r->tenant, v[k])))
          return lsim_fail(eb, rc, "interval sink failed");
      }
  }
  return 0;
}

static lsim_err lsim__emit_retired(lsim_engine *e, int wi, lsim_tick now,
                                   const int *v, int nv, lsim_errbuf *eb) {
  lsim_core_worker *w = &e->w[wi];
  for (int k = 0; k < nv; k++) {
    if (lsim__is_basis(e, v[k]))
      continue; /* basis_evicted said it */
    lsim_res_adapter_view av = lsim__av(w, v[k]);
    lsim_err rc = lsim_core_emit(e, now, LSIM_EV_ADAPTER_RETIRED, wi, LSIM_NONE,
                             lsim__tenant_of(e, v[k]), v[k], av.generation, 0,
                             e->pages[v[k]], e->bytes[v[k]], 0, NULL, eb);
    if (rc)
      return rc;
  }
  return 0;
}

/*
** Relaxed mode, only when a worker would otherwise be stuck: withdraw the
** queued reservations of waiting requests whose adapter fails the eviction
** predicate on that clause alone, so the predicate itself is never bent.
** lsim__requeue gives the flags back to adapters that stayed resident.
*/
static lsim_err lsim__revoke_queued(lsim_engine *e, lsim_core_worker *w, int keep,
                                    lsim_errbuf *eb) {
  for (lsim_core_req *r = w->waiting.head; r; r = r->next) {
    if (!r->queued || r->adapter == keep)
      continue;
    if (lsim_res_eligible(w->res, r->adapter) != LSIM_E_RES_QUEUED)
      continue;
    lsim_res_adapter_view av = lsim__av(w, r->adapter);
    if (av.refcount || av.pins || av.launches || av.inflight || !av.host_verified)
      continue;
    r->queued = 0;
    lsim_err rc = lsim_res_queue(w->res, r->adapter, -1, eb);
    if (rc)
      return rc;
  }
  (void)e;
  return 0;
}

static lsim_err lsim__requeue(lsim_core_worker *w, int only, lsim_errbuf *eb) {
  for (lsim_core_req *r = w->waiting.head; r; r = r->next) {
    if (r->queued || (only >= 0 && r->adapter != only))
      continue;
    if (!lsim__visible(lsim__av(w, r->adapter).state))
      continue;
    r->queued = 1;
    lsim_err rc = lsim_res_queue(w->res, r->adapter, +1, eb);
    if (rc)
      return rc;
  }
  return 0;
}

/*
** Begin a txn on worker wi with the policy ranking.  When `relaxed`, a
** first attempt that finds no room withdraws queued reservations and tries
** again.  *ok = 0 when there is no room (not an error).
*/
static lsim_err lsim__begin(lsim_engine *e, int wi, lsim_tick now,
                            const lsim_res_req *q, int relaxed, int64_t *txn,
                            int *victims, int *nv, int *used_relaxed, int *ok,
                            lsim_errbuf *eb) {
  lsim_core_worker *w = &e->w[wi];
  *ok = 0;
  *used_relaxed = 0;
  if (e->nreclaim) {
    /* what extensions hold (cached prefix blocks) gives way before any
    ** adapter is evicted */
    lsim_res_demand d;
    lsim_err prc = lsim_res_demand_of(w->res, q, &d, NULL);
    if (!prc && (prc = lsim__ext_reclaim(e, wi, now, d.total + d.guard, eb)))
      return prc;
  }
  e->rank_worker = wi;
  e->rank_now = now;
  e->rank_bad = 0;
  lsim_errbuf tmp = LSIM_ERRBUF_INIT;
  lsim_err rc = lsim_res_begin(w->res, q, lsim__rank, e, txn, victims,
                               e->cfg.nadapters, nv, &tmp);
  if (rc == LSIM_E_RES_NOSPACE && relaxed) {
    if ((rc = lsim__revoke_queued(e, w, q->adapter, eb)))
      return rc;
    rc = lsim_res_begin(w->res, q, lsim__rank, e, txn, victims,
                        e->cfg.nadapters, nv, &tmp);
    *used_relaxed = 1;
    lsim_err rc2 = lsim__requeue(w, -1, eb);
    if (rc2)
      return rc2;
  }
  if (e->rank_bad)
    return lsim_fail(eb, LSIM_E_POLICY,
                     "eviction policy '%s' picked a candidate out of range",
                     e->cfg.evict->name);
  if (rc == LSIM_E_RES_NOSPACE)
    return 0;
  if (rc) {
    if (eb)
      *eb = tmp;
    return rc;
  }
  if (*nv > e->cfg.nadapters)
    return LSIM_BUG(eb, "more victims than the engine can report");
  *ok = 1;
  return 0;
}

/*
** The one release path of a request that gives its place in the pool back:
** finish, cancellation (running or waiting), preemption and the end of the
** run all come through here.  In this order: the extensions' leave hooks
** (the prefix cache's references), then the request's KV object (*owned:
** the pages it held) and its adapter reference, then the extensions' left
** hooks, told whether the request keeps what names its worker (`lease` 0:
** a preempted request that stays keeps its hotswap lease; the compressed
** catalog's lease and basis reference always go back).  Nothing is emitted here except what the
** features emit (lease_released); the caller says why the request left.
** On error the remaining steps are skipped (the run fails).
*/
static lsim_err lsim__release(lsim_engine *e, int wi, lsim_core_req *r,
                              lsim_tick now, int lease, int64_t *owned,
                              lsim_errbuf *eb) {
  lsim_core_worker *w = &e->w[wi];
  lsim_err rc;
  *owned = 0;
  if ((rc = lsim__ext_leave(e, wi, r, eb)))
    return rc;
  if (r->kv >= 0) {
    int64_t used;
    if ((rc = lsim_res_kv_pages(w->res, r->kv, owned, &used, eb)) ||
        (rc = lsim_res_kv_release(w->res, r->kv, eb)) ||
        (rc = lsim_res_unbind(w->res, r->adapter, now, eb)))
      return rc;
    r->kv = -1;
  }
  return lsim__ext_left(e, wi, r, now, !lease, eb);
}

/* The request's record is written with `outcome` and it is freed. */
static lsim_err lsim__retire(lsim_engine *e, lsim_core_req *r, lsim_tick now,
                             const char *outcome, lsim_errbuf *eb) {
  lsim_err rc = lsim__record(e, r, now, outcome, eb);
  lsim__req_free(e, r);
  e->live--;
  return rc;
}

/* Reject a request that is not running: record + event, free it. */
static lsim_err lsim__reject(lsim_engine *e, lsim_core_req *r, lsim_tick now,
                             const char *why, lsim_errbuf *eb) {
  lsim_err rc = lsim_core_emit(e, now, LSIM_EV_ADMISSION_REJECTED, r->worker,
                           r->id, r->tenant, r->adapter, LSIM_NONE, 0, 0, 0,
                           0, why, eb);
  if (rc) {
    lsim__req_free(e, r);
    e->live--;
    return rc;
  }
  return lsim__retire(e, r, now, "rejected", eb);
}

/* Take r off the waiting list of its worker, closing its queue entry and
** its place in the liveness ledgers (fair.h). */
static lsim_err lsim__unwait(lsim_engine *e, lsim_tick now, lsim_core_worker *w,
                             lsim_core_req *r, lsim_errbuf *eb) {
  lsim__list_remove(&w->waiting, r);
  if (r->fair) {
    lsim_err rc = lsim_fair_leave(e->fair, now, (int)(w - e->w), r->tenant,
                                  r->adapter, r->fair == 2);
    r->fair = 0;
    if (rc)
      return lsim_fail(eb, rc, "interval sink failed");
  }
  if (r->queued) {
    r->queued = 0;
    return lsim_res_queue(w->res, r->adapter, -1, eb);
  }
  return 0;
}

/* ---- arrival ------------------------------------------------------------- */

/* Placement (engine/policy/place_*.c): the view's queries. */
static int lsim__pv_load(const void *ctx, int i) {
  const lsim_engine *e = ctx;
  return e->w[i].waiting.n + e->w[i].running.n;
}

static int64_t lsim__pv_free(const void *ctx, int i) {
  const lsim_engine *e = ctx;
  lsim_res_view v;
  lsim_res_view_get(e->w[i].res, &v);
  return v.free;
}

static int lsim__pv_holds(const void *ctx, int i, int a) {
  const lsim_engine *e = ctx;
  int st = lsim__av(&e->w[i], a).state;
  return st != LSIM_RS_ABSENT && st != LSIM_RS_HOST_READY &&
         st != LSIM_RS_RETIRING;
}

/* The worker the placement policy picks for r (O(workers) per arrival). */
static int lsim__place(lsim_engine *e, const lsim_core_req *r) {
  lsim_place_view v = {e->cfg.workers, e->cfg.max_batch_requests,
                       e->cfg.guard_pages, e, lsim__pv_load, lsim__pv_free,
                       lsim__pv_holds};
  lsim_place_req q = {r->id, r->tenant, r->adapter, r->kv_pages};
  return lsim_place_pick(e->place, e->place_st, &v, &q);
}

lsim_err lsim_engine_arrive(lsim_engine *e, lsim_tick now,
                            const lsim_arrival *a, int *worker,
                            lsim_errbuf *eb) {
  return lsim_engine_arrive_blocks(e, now, a, NULL, 0, worker, eb);
}

lsim_err lsim_engine_arrive_blocks(lsim_engine *e, lsim_tick now,
                                   const lsim_arrival *a,
                                   const uint64_t *blocks, int nblocks,
                                   int *worker, lsim_errbuf *eb) {
  *worker = -1;
  if (a->adapter < 0 || a->adapter >= e->cfg.nadapters || a->tenant < 0 ||
      a->tenant >= e->cfg.ntenants || a->prompt_tokens < 1 ||
      a->output_tokens < 1)
    return lsim_fail(eb, LSIM_E_STATE,
                     "request %lld: adapter, tenant or lengths out of range",
                     (long long)a->request);
  lsim_core_req *r = lsim__req_alloc(e);
  if (!r)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory admitting request");
  e->live++;
  r->id = a->request;
  r->tenant = a->tenant;
  r->adapter = a->adapter;
  r->arrival = now;
  r->mark = now; /* phase queue until placement says otherwise */
  r->prompt = a->prompt_tokens;
  r->output = a->output_tokens;
  /* initial KV covers the prompt; the growth reserve covers the declared
  ** output (the admission horizon is the whole request) */
  r->kv_initial = lsim_core_kv_pages(e, a->prompt_tokens);
  int64_t whole =
      lsim_core_kv_pages(e, (int64_t)a->prompt_tokens + a->output_tokens);
  /* incremental: the prompt and its first token now, the rest page by
  ** page as the request decodes */
  r->kv_pages = e->cfg.kv_incremental
                    ? lsim_core_kv_pages(e, (int64_t)a->prompt_tokens + 1)
                    : whole;
  r->worker = LSIM_NONE;
  lsim_err rc;
  /* extensions read the arrival (the prefix cache: its block hashes) */
  if ((rc = lsim__ext_arrive(e, r, blocks, nblocks, eb))) {
    lsim__req_free(e, r);
    e->live--;
    return rc;
  }
  if (lsim__first_chunk(e, a->prompt_tokens) > e->cfg.max_batch_tokens)
    return lsim__reject(e, r, now, "prompt_over_batch_budget", eb);
  if (e->cfg.max_lora_rank > 0 && e->rank[a->adapter] > e->cfg.max_lora_rank)
    return lsim__reject(e, r, now, "rank_over_max_lora_rank", eb);
  if (whole + e->pages[a->adapter] + e->cfg.guard_pages > e->cfg.pool_pages)
    return lsim__reject(e, r, now, "over_pool_capacity", eb);
  int wi = lsim__place(e, r);
  if (wi < 0 || wi >= e->cfg.workers)
    return lsim_fail(eb, LSIM_E_POLICY, "placement '%s' chose worker %d",
                     e->place->name, wi);
  lsim_core_worker *w = &e->w[wi];
  r->worker = wi;
  r->state = LSIM__WAITING;
  lsim_res_adapter_view av = lsim__av(w, a->adapter);
  int hit = lsim__visible(av.state);
  if (!hit) {
    r->loads_waited = 1;
    r->cold = 1;
    r->phase = LSIM_CORE_PH_LOAD;
  }
  r->queued = 1;
  rc = lsim_res_queue(w->res, a->adapter, +1, eb);
  if (rc)
    return rc;
  lsim__list_push(&w->waiting, r);
  *worker = wi;
  lsim_sched_on_backlog(e->cfg.sched, e->sched_st, r->tenant, +1);
  r->fair = hit ? 2 : 1;
  if ((rc = lsim_fair_enqueue(e->fair, now, wi, r->tenant, r->adapter, hit)))
    return lsim_fail(eb, rc, "interval sink failed");
  /* value: 1 when the adapter generation was resident at arrival (a cache
  ** hit), 0 for a cold or in-flight miss. */
  return lsim_core_emit(e, now, LSIM_EV_QUEUE_ENQUEUED, wi, r->id, r->tenant,
                    r->adapter, av.generation, 0, r->kv_pages, 0, hit,
                    hit ? "hit" : "miss", eb);
}

/* ---- loads --------------------------------------------------------------- */

/* The host copy of the version adapter a's alias names on worker w now
** (a reload after a hotswap loads the new version, not the catalog's). */
static lsim_err lsim__ensure_host(lsim_engine *e, lsim_core_worker *w, int a,
                                  lsim_errbuf *eb) {
  int b = lsim__basis_of(e, a);
  if (b >= 0 && lsim__av(w, b).state == LSIM_RS_ABSENT) {
    lsim_err rc = lsim_res_register(w->res, b, &e->artifact[b], &e->kabi, eb);
    if (rc)
      return rc;
  }
  if (lsim__av(w, a).state != LSIM_RS_ABSENT)
    return 0;
  int v;
  lsim_digest d;
  lsim_err rc = lsim__ext_source(e, (int)(w - e->w), a, 0, &v, &d, eb);
  if (rc)
    return rc;
  lsim_res_set_version(w->res, a, v);
  return lsim_res_register(w->res, a, &d, &e->kabi, eb);
}

/*
** The host tier (cfg.max_cpu_loras, hosttier.h) at the start of a load of
** a (with its companion `with`, or -1), right after adapter_load_started:
** each object is touched, those the tier did not hold are read from disk
** first (*disk: their bytes) and inserted, and an object dropped to make
** room is logged (adapter_host_dropped: value = the object that took its
** place).  Then one event says where the copy's bytes come from:
** adapter_disk_read (bytes read from disk) or adapter_host_hit (bytes
** copied from host); both carry the load's generation and attempt and, as
** value, the tier's occupancy.  Tier off: *disk = 0 and no event.
*/
static lsim_err lsim__host_stage(lsim_engine *e, int wi, lsim_tick now, int a,
                                 int with, int64_t request, int64_t gen,
                                 int attempt, int64_t *disk, lsim_errbuf *eb) {
  lsim_host_tier *h = &e->w[wi].host;
  *disk = 0;
  if (h->cap < 1)
    return 0;
  int obj[2] = {a, with}, nread = 0;
  for (int k = 0; k < 2 && obj[k] >= 0; k++) {
    int dropped;
    if (lsim_host_touch(h, obj[k], &dropped))
      continue;
    nread++;
    *disk += e->bytes[obj[k]];
    if (dropped < 0)
      continue;
    int dt = dropped < e->cfg.nadapters ? lsim__tenant_of(e, dropped)
                                        : LSIM_NONE;
    lsim_err rc = lsim_core_emit(e, now, LSIM_EV_ADAPTER_HOST_DROPPED, wi,
                                 LSIM_NONE, dt, dropped, LSIM_NONE, 0, 0,
                                 e->bytes[dropped], obj[k], NULL, eb);
    if (rc)
      return rc;
  }
  int64_t bytes = e->bytes[a] + (with >= 0 ? e->bytes[with] : 0);
  return lsim_core_emit(e, now,
                        nread ? LSIM_EV_ADAPTER_DISK_READ
                              : LSIM_EV_ADAPTER_HOST_HIT,
                        wi, request, lsim__tenant_of(e, a), a, gen, attempt, 0,
                        nread ? *disk : bytes, h->n, NULL, eb);
}

static void lsim__load_out(lsim_engine *e, int wi, int a, int attempt,
                           int64_t pages, int64_t request, int restore,
                           int with, int64_t disk, lsim_load_start *loads,
                           int *nloads) {
  lsim_load_start *ls = &loads[(*nloads)++];
  ls->disk_bytes = disk;
  ls->worker = wi;
  ls->adapter = a;
  ls->attempt = attempt;
  ls->bytes = e->bytes[a] + (with >= 0 ? e->bytes[with] : 0);
  ls->pages = pages;
  ls->request = request;
  ls->restore = restore;
}

/* A scheduler candidate for r on worker w: its cost vector (article
** 0x09C).  ready: the adapter generation is visible there. */
static void lsim__cand_fill(const lsim_engine *e, const lsim_core_worker *w,
                            const lsim_core_req *r, int ready,
                            lsim_sched_cand *c) {
  int a = r->adapter;
  lsim_res_adapter_view av = lsim__av(w, a);
  c->request = r->id;
  c->tenant = r->tenant;
  c->adapter = a;
  c->rank = e->rank[a];
  c->arrival_tick = r->arrival;
  c->prompt_tokens = r->prompt;
  c->resident = ready;
  c->urgency = 0;
  c->cost.load_bytes = ready ? 0 : e->bytes[a];
  int b = lsim__basis_of(e, a);
  c->cost.basis_bytes =
      b >= 0 && !lsim__visible(lsim__av(w, b).state) ? e->bytes[b] : 0;
  c->cost.affinity =
      b >= 0 && e->cfg.sched_params.affinity_weight > 0
          ? lsim_cmp_affinity(&w->cat, a, e->bcl, e->nbcl,
                              e->cfg.sched_params.affinity_weight)
          : 0;
  c->cost.added_runs = av.refcount > 0 ? 0 : 1;
  c->cost.true_rank = e->rank[a];
  c->cost.padded_rank = e->rank[a];
  c->cost.adapter_pages = e->pages[a];
  c->cost.kv_pages = r->kv_pages;
  c->cost.collective_bytes = 0;
}

/* Adapter a's basis is in a transaction (loading with another core, or
** retiring): a's load waits until it is resident or gone. */
static int lsim__basis_busy(const lsim_engine *e, const lsim_core_worker *w,
                            int a) {
  int b = lsim__basis_of(e, a);
  if (b < 0)
    return 0;
  int st = lsim__av(w, b).state;
  return st != LSIM_RS_ABSENT && st != LSIM_RS_HOST_READY &&
         !lsim__visible(st);
}

/* The worker has execution-eligible work: running or ready waiting
** requests, or an iteration in flight (the demand-load gate's input). */
static int lsim__ready_work(const lsim_engine *e, const lsim_core_worker *w,
                            int wi) {
  return w->busy || w->running.n > 0 ||
         lsim_fair_ready_waiting(e->fair, wi) > 0;
}

static int lsim__stuck(const lsim_core_worker *w) {
  return w->running.n == 0 && w->inflight_copies == 0 &&
         w->admitted_waiting == 0 && !w->busy;
}

static lsim_err lsim__start_loads(lsim_engine *e, int wi, lsim_tick now,
                                  lsim_load_start *loads, int maxloads,
                                  int *nloads, lsim_errbuf *eb) {
  lsim_core_worker *w = &e->w[wi];
  lsim_err rc;
  int *victims = e->vict;
  /* 1. compensating reloads left by a rollback come first */
  int npend = lsim_res_pending_restores(w->res, e->prop, e->cfg.nadapters);
  for (int k = 0; k < npend && *nloads < maxloads; k++) {
    int a = e->prop[k];
    lsim_res_adapter_view av = lsim__av(w, a);
    if (av.state != LSIM_RS_RESERVED)
      continue;
    lsim_res_txn_view tv;
    if ((rc = lsim_res_txn(w->res, av.txn, &tv, eb)))
      return rc;
    if (tv.kind != LSIM_TXN_RESTORE)
      continue;
    if ((rc = lsim_res_copy_start(w->res, av.txn, eb)))
      return rc;
    w->inflight_copies++;
    int64_t disk;
    if ((rc = lsim_core_emit(e, now, LSIM_EV_ADAPTER_LOAD_STARTED, wi, LSIM_NONE,
                         lsim__tenant_of(e, a), a, av.generation + 1, 1,
                         tv.nslots, e->bytes[a], 0, "restore", eb)) ||
        (rc = lsim__host_stage(e, wi, now, a, -1, LSIM_NONE,
                               av.generation + 1, 1, &disk, eb)))
      return rc;
    lsim__load_out(e, wi, a, 1, tv.nslots, LSIM_NONE, 1, -1, disk, loads,
                   nloads);
  }
  /* 2. demand loads, one txn per absent adapter, for the first waiter.
  ** A scheduler whose gate is "no ready work" withholds every one of them
  ** while the worker has some, and nothing below changes that (a load
  ** start or an eviction never makes work ready): skip the scan then. */
  int scanned = 0;
  const int idle_gate = e->cfg.sched->load_when_idle;
  lsim_core_req *first =
      idle_gate && lsim__ready_work(e, w, wi) ? NULL : w->waiting.head;
  for (lsim_core_req *r = first;
       r && scanned < LSIM_ENGINE_WINDOW && *nloads < maxloads;
       r = r->next, scanned++) {
    int a = r->adapter;
    int st = lsim__av(w, a).state;
    if (st != LSIM_RS_ABSENT && st != LSIM_RS_HOST_READY)
      continue;
    if (lsim__basis_busy(e, w, a))
      continue; /* its basis is loading or leaving: wait for it */
    /* r is load-eligible; the scheduler's gate may withhold the load (it
    ** can never make r ready) */
    if (idle_gate && lsim__ready_work(e, w, wi))
      continue;
    if (e->cfg.sched->load_ok) {
      lsim_sched_cand c;
      lsim__cand_fill(e, w, r, 0, &c);
      if (!lsim_sched_load_ok(e->cfg.sched, e->sched_st, now, &c,
                              lsim__ready_work(e, w, wi)))
        continue;
    }
    if ((rc = lsim__ensure_host(e, w, a, eb)))
      return rc;
    lsim_res_req q = {LSIM_TXN_LOAD, a, r->id, r->kv_initial,
                      r->kv_pages - r->kv_initial};
    int64_t txn;
    int nv, relaxed_used, ok;
    if ((rc = lsim__begin(e, wi, now, &q, lsim__stuck(w), &txn, victims, &nv,
                          &relaxed_used, &ok, eb)))
      return rc;
    if (!ok)
      break; /* no room now; retried when pages come back */
    lsim_res_txn_view tv;
    if ((rc = lsim_res_txn(w->res, txn, &tv, eb)) ||
        (rc = lsim_res_copy_start(w->res, txn, eb)))
      return rc;
    r->txn = txn;
    w->inflight_copies++;
    w->attempts[a]++;
    lsim_res_adapter_view av = lsim__av(w, a);
    if ((rc = lsim__emit_victims(e, wi, now, victims, nv, relaxed_used, eb)))
      return rc;
    assert(lsim__worker_sound(e, w));
    /* bytes: the one copy, core and (when it comes along) basis */
    rc = lsim_core_emit(e, now, LSIM_EV_ADAPTER_LOAD_STARTED, wi, r->id,
                    lsim__tenant_of(e, a), a, av.generation + 1,
                    w->attempts[a], tv.nslots,
                    e->bytes[a] + (tv.with >= 0 ? e->bytes[tv.with] : 0), 0,
                    tv.with >= 0 ? "with_basis" : NULL, eb);
    int64_t disk = 0;
    if (!rc)
      rc = lsim__host_stage(e, wi, now, a, tv.with, r->id, av.generation + 1,
                            w->attempts[a], &disk, eb);
    if (rc)
      return rc;
    lsim__load_out(e, wi, a, w->attempts[a], tv.nslots, r->id, 0, tv.with,
                   disk, loads, nloads);
  }
  /* 3. prefetch proposals draw from the same ledger, free slots only */
  int np = 0;
  if (e->cfg.prefetch->propose && *nloads < maxloads) {
    /* the view: distinct cold adapters of the queue window, queue order */
    lsim_prefetch_view pv = {wi, e->pcands, 0, 0};
    lsim_res_view rv;
    lsim_res_view_get(w->res, &rv);
    pv.free_pages = rv.free - e->cfg.guard_pages;
    if (++e->pstamp == 0) {
      memset(e->pseen, 0, (size_t)e->cfg.nadapters * sizeof *e->pseen);
      e->pstamp = 1;
    }
    int seen = 0;
    for (lsim_core_req *r = w->waiting.head; r && seen < LSIM_ENGINE_WINDOW;
         r = r->next, seen++) {
      int a = r->adapter, st = lsim__av(w, a).state;
      if (st != LSIM_RS_ABSENT && st != LSIM_RS_HOST_READY)
        continue;
      if (e->pseen[a] == e->pstamp) {
        for (int k = 0; k < pv.ncold; k++)
          if (e->pcands[k].adapter == a) {
            e->pcands[k].waiters++;
            break;
          }
        continue;
      }
      e->pseen[a] = e->pstamp;
      lsim_prefetch_cand *pc = &e->pcands[pv.ncold++];
      pc->adapter = a;
      pc->pages = e->pages[a];
      pc->oldest_arrival = r->arrival;
      pc->waiters = 1;
    }
    if (pv.ncold > 0 && pv.free_pages > 0)
      np = lsim_prefetch_propose(e->cfg.prefetch, e->prefetch_st, now, &pv,
                                 e->prop, e->cfg.nadapters);
  }
  for (int i = 0; i < np && *nloads < maxloads; i++) {
    int a = e->prop[i];
    if (a < 0 || a >= e->cfg.nadapters)
      return lsim_fail(eb, LSIM_E_POLICY, "prefetch '%s' proposed adapter %d",
                       e->cfg.prefetch->name, a);
    int st = lsim__av(w, a).state;
    if (st != LSIM_RS_ABSENT && st != LSIM_RS_HOST_READY)
      continue;
    if (lsim__basis_busy(e, w, a))
      continue;
    if ((rc = lsim__ensure_host(e, w, a, eb)))
      return rc;
    lsim_res_req q = {LSIM_TXN_PREFETCH, a, -1, 0, 0};
    int64_t txn;
    if (lsim_res_begin_with(w->res, &q, NULL, 0, &txn, NULL))
      continue;
    lsim_res_txn_view tv;
    if ((rc = lsim_res_txn(w->res, txn, &tv, eb)) ||
        (rc = lsim_res_copy_start(w->res, txn, eb)))
      return rc;
    w->inflight_copies++;
    w->attempts[a]++;
    lsim_res_adapter_view av = lsim__av(w, a);
    int64_t pages = e->pages[a] + (tv.with >= 0 ? e->pages[tv.with] : 0);
    int64_t bytes = e->bytes[a] + (tv.with >= 0 ? e->bytes[tv.with] : 0);
    if ((rc = lsim_core_emit(e, now, LSIM_EV_PREFETCH_RESERVED, wi, LSIM_NONE,
                         lsim__tenant_of(e, a), a, av.generation + 1, 0,
                         pages, bytes, 0, NULL, eb)) ||
        (rc = lsim_core_emit(e, now, LSIM_EV_ADAPTER_LOAD_STARTED, wi, LSIM_NONE,
                         lsim__tenant_of(e, a), a, av.generation + 1,
                         w->attempts[a], pages, bytes, 0,
                         "prefetch", eb)))
      return rc;
    int64_t disk;
    if ((rc = lsim__host_stage(e, wi, now, a, tv.with, LSIM_NONE,
                               av.generation + 1, w->attempts[a], &disk, eb)))
      return rc;
    lsim__load_out(e, wi, a, w->attempts[a], pages, LSIM_NONE, 0, tv.with,
                   disk, loads, nloads);
  }
  return 0;
}

static lsim_core_req *lsim__find_txn_req(lsim_core_worker *w, int64_t txn) {
  for (lsim_core_req *r = w->waiting.head; r; r = r->next)
    if (r->txn == txn)
      return r;
  return NULL;
}

/* Roll txn back after a failed copy or validation: events, restore txns,
** attempts and rejection of waiters. */
static lsim_err lsim__rollback(lsim_engine *e, int wi, int a, lsim_tick now,
                               int64_t txn, const char *why, lsim_errbuf *eb) {
  lsim_core_worker *w = &e->w[wi];
  lsim_res_txn_view tv;
  lsim_err rc = lsim_res_txn(w->res, txn, &tv, eb);
  if (rc)
    return rc;
  int restore = tv.kind == LSIM_TXN_RESTORE;
  int64_t pages = tv.nslots;
  int attempt = restore ? 1 : w->attempts[a];
  lsim_res_adapter_view av = lsim__av(w, a);
  int64_t gen_try = av.generation + 1;
  /* copied: the txn's view dies with the txn */
  int *victims = e->vict_done, nv = tv.nvictims;
  memcpy(victims, tv.victim, (size_t)nv * sizeof *victims);
  rc = lsim_core_emit(e, now, LSIM_EV_ADAPTER_LOAD_FAILED, wi, LSIM_NONE,
                  lsim__tenant_of(e, a), a, gen_try, attempt, pages,
                  e->bytes[a], 0, restore ? "restore_failed" : why, eb);
  if (rc)
    return rc;
  lsim_core_req *r = lsim__find_txn_req(w, txn);
  if (r)
    r->txn = -1;
  int nr;
  if ((rc = lsim_res_rollback(w->res, txn, e->rest, e->cfg.nadapters, &nr,
                              eb)))
    return rc;
  assert(lsim__worker_sound(e, w));
  /* value: victims handed to restore txns */
  rc = lsim_core_emit(e, now, LSIM_EV_LOAD_ROLLED_BACK, wi, LSIM_NONE,
                  lsim__tenant_of(e, a), a, gen_try, attempt, pages, 0, nr,
                  restore ? "restore_dropped" : NULL, eb);
  for (int k = 0; !rc && k < nv; k++) {
    lsim_res_adapter_view vv = lsim__av(w, victims[k]);
    if (vv.state != LSIM_RS_RESERVED)
      continue; /* a basis taken with its last cores, and those cores:
                   dropped, not restored (residency.h, "Companions") */
    rc = lsim_core_emit(e, now, LSIM_EV_ADAPTER_RESTORING, wi, LSIM_NONE,
                    lsim__tenant_of(e, victims[k]), victims[k],
                    vv.generation + 1, 0, e->pages[victims[k]],
                    e->bytes[victims[k]], vv.generation, "compensating_reload",
                    eb);
  }
  if (rc || restore)
    return rc;
  if (w->attempts[a] < e->cfg.max_load_attempts)
    return 0;
  /* Out of attempts: the waiters of this adapter are rejected. */
  w->attempts[a] = 0;
  lsim_core_req *q = w->waiting.head;
  while (q) {
    lsim_core_req *next = q->next;
    if (q->adapter == a) {
      if ((rc = lsim__unwait(e, now, w, q, eb)))
        return rc;
      if ((rc = lsim__reject(e, q, now, "adapter_load_failed", eb)))
        return rc;
    }
    q = next;
  }
  return 0;
}

lsim_err lsim_engine_load_result(lsim_engine *e, int wi, int a, lsim_tick now,
                                 int outcome, lsim_errbuf *eb) {
  if (wi < 0 || wi >= e->cfg.workers || a < 0 || a >= e->cfg.nadapters)
    return lsim_fail(eb, LSIM_E_STATE, "load_done: worker or adapter out of range");
  lsim_core_worker *w = &e->w[wi];
  int64_t txn = lsim_res_txn_of(w->res, a);
  if (txn < 0 || lsim__av(w, a).state != LSIM_RS_LOADING)
    return lsim_fail(eb, LSIM_E_STATE,
                     "load_done for adapter %d on worker %d, which is not loading",
                     a, wi);
  lsim_res_txn_view tv;
  lsim_err rc = lsim_res_txn(w->res, txn, &tv, eb);
  if (rc)
    return rc;
  int restore = tv.kind == LSIM_TXN_RESTORE;
  int attempt = restore ? 1 : w->attempts[a];
  int tenant = lsim__tenant_of(e, a);
  w->inflight_copies--;
  if (outcome == LSIM_LOAD_COPY_FAILED)
    return lsim__rollback(e, wi, a, now, txn, "copy_failed", eb);
  /* the copy-complete event, then validation of the staged bytes */
  if ((rc = lsim_res_copy_done(w->res, txn, eb)))
    return rc;
  /* the bytes of the version the pool registered for this load */
  lsim_digest staged;
  int regv;
  if ((rc = lsim__ext_source(e, wi, a, 1, &regv, &staged, eb)))
    return rc;
  if (outcome == LSIM_LOAD_DIGEST_BAD)
    staged.b[0] ^= 0x01; /* the world corrupted the staged bytes */
  lsim_errbuf vb = LSIM_ERRBUF_INIT;
  if (e->k) {
    /* the staged core names the basis it was fitted against: it must be
    ** the live generation's (the catalog's identity check) */
    int c = e->cluster[a];
    lsim_digest claimed = w->cat.live.basis[c];
    if (outcome == LSIM_LOAD_STALE_BASIS)
      claimed.b[31] ^= 0x01; /* the world staged a core of another version */
    rc = lsim_cmp_check_core(&w->cat, a, &e->bundle, &claimed, &staged, &vb);
    if (rc == LSIM_E_CMP_STALE_BASIS)
      return lsim__rollback(e, wi, a, now, txn, "stale_basis", eb);
    if (rc) {
      if (eb)
        *eb = vb;
      return rc;
    }
  } else if (outcome == LSIM_LOAD_STALE_BASIS) {
    return lsim_fail(eb, LSIM_E_STATE,
                     "stale basis outcome for adapter %d of a collection "
                     "that is not compressed", a);
  }
  rc = tv.with >= 0 ? lsim_res_validate_with(w->res, txn, &staged,
                                              &e->artifact[tv.with], &vb)
                    : lsim_res_validate(w->res, txn, &staged, &vb);
  if (rc == LSIM_E_RES_DIGEST)
    return lsim__rollback(e, wi, a, now, txn, "digest_failed", eb);
  if (rc) {
    if (eb)
      *eb = vb;
    return rc;
  }
  lsim_res_adapter_view av = lsim__av(w, a);
  int with = tv.with;
  int64_t copied = e->bytes[a] + (with >= 0 ? e->bytes[with] : 0);
  if ((rc = lsim_core_emit(e, now, LSIM_EV_ADAPTER_LOAD_COMPLETED, wi, LSIM_NONE,
                       tenant, a, av.generation + 1, attempt, tv.nslots,
                       copied, 0, restore ? "restore" : NULL, eb)) ||
      (rc = lsim_core_emit(e, now, LSIM_EV_ADAPTER_VALIDATED, wi, LSIM_NONE,
                       tenant, a, av.generation + 1, attempt, e->pages[a],
                       e->bytes[a], regv,
                       restore ? "restore" : NULL, eb)))
    return rc;
  int64_t gen;
  if ((rc = lsim_res_publish(w->res, txn, now, &gen, eb)))
    return rc;
  w->attempts[a] = 0;
  /* copied: the txn's view dies with the txn */
  int *victims = e->vict_done, nv = tv.nvictims;
  memcpy(victims, tv.victim, (size_t)nv * sizeof *victims);
  if ((rc = lsim_core_emit(e, now, LSIM_EV_ADAPTER_GENERATION_PUBLISHED, wi,
                       LSIM_NONE, tenant, a, gen, 0, e->pages[a], e->bytes[a],
                       0, restore ? "restore" : NULL, eb)))
    return rc;
  if (with >= 0) {
    /* the same publication made the basis visible: the catalog's device
    ** residency follows, and the event comes after its core's */
    int c = with - e->cfg.nadapters;
    if ((rc = lsim_cmp_basis_load(&w->cat, c, eb)) ||
        (rc = lsim_core_emit(e, now, LSIM_EV_BASIS_PUBLISHED, wi, LSIM_NONE,
                         LSIM_NONE, a, lsim__av(w, with).generation, 0,
                         e->pages[with], e->bytes[with], c, NULL, eb)))
      return rc;
    lsim_evict_on_use(e->cfg.evict, w->evict_st, with, now, e->pages[with],
                      e->bytes[with]);
  }
  lsim_evict_on_use(e->cfg.evict, w->evict_st, a, now, e->pages[a],
                    e->bytes[a]);
  /* liveness: the load interval closes; a's cold waiters become ready */
  if (tv.kind == LSIM_TXN_PREFETCH)
    lsim_fair_prefetched(e->fair, wi, a);
  int ncold = lsim_fair_cold(e->fair, wi, a); /* stop once all are found */
  if ((rc = lsim_fair_published(e->fair, now, wi, a)))
    return lsim_fail(eb, rc, "interval sink failed");
  for (lsim_core_req *q = w->waiting.head; q && ncold > 0; q = q->next)
    if (q->adapter == a && q->fair == 1) {
      ncold--;
      q->fair = 2;
      lsim_core_phase(q, now, LSIM_CORE_PH_QUEUE);
      if ((rc = lsim_fair_became_ready(e->fair, now, wi, q->tenant)))
        return lsim_fail(eb, rc, "interval sink failed");
    }
  /* commit: pin for the request, commit its KV, finalize victims */
  lsim_core_req *r = lsim__find_txn_req(w, txn);
  int kv;
  if ((rc = lsim_res_commit(w->res, txn, now, &kv, eb)))
    return rc;
  if (r) {
    r->txn = -1;
    r->kv = kv;
    w->admitted_waiting++;
  }
  /* waiters that lost their queued flag in a relaxed round get it back */
  if ((rc = lsim__requeue(w, a, eb)))
    return rc;
  assert(lsim__worker_sound(e, w));
  if (r && (rc = lsim_core_emit(e, now, LSIM_EV_KV_RESERVED, wi, r->id, r->tenant,
                            r->adapter, gen, 0, r->kv_pages,
                            r->kv_pages * e->cfg.page_bytes,
                            r->prompt + r->output, "with_load", eb)))
    return rc;
  return lsim__emit_retired(e, wi, now, victims, nv, eb);
}

lsim_err lsim_engine_load_done(lsim_engine *e, int w, int adapter,
                               lsim_tick now, int ok, lsim_errbuf *eb) {
  return lsim_engine_load_result(e, w, adapter, now,
                                 ok ? LSIM_LOAD_OK : LSIM_LOAD_COPY_FAILED, eb);
}

/* ---- cancellation ------------------------------------------------------- */

/* Withdraw waiting request r of worker wi: its KV share of an open load
** txn or its committed KV goes back, its queue entry closes.  *released
** gets the pages given back, *what the state it was in. */
static lsim_err lsim__withdraw_waiting(lsim_engine *e, int wi, lsim_core_req *r,
                                       lsim_tick now, int64_t *released,
                                       const char **what, lsim_errbuf *eb) {
  lsim_core_worker *w = &e->w[wi];
  lsim_err rc;
  *released = 0;
  *what = "waiting";
  if (r->txn >= 0) {
    /* during its adapter's load: the txn keeps loading the adapter (a
    ** prefetch now) but gives its KV share back */
    if ((rc = lsim_res_txn_drop_request(w->res, r->txn, released, eb)))
      return rc;
    r->txn = -1;
    *what = "during_load";
  } else if (r->kv >= 0) {
    /* a preempted request waiting on its own worker keeps its lease */
    if ((rc = lsim__release(e, wi, r, now, 0, released, eb)))
      return rc;
    w->admitted_waiting--;
    *what = "admitted";
  }
  rc = lsim__unwait(e, now, w, r, eb);
  assert(rc || lsim__worker_sound(e, w));
  return rc;
}

/* A running request leaves (cancelled): KV and adapter reference go
** back, its lease is released, its record is written. */
static lsim_err lsim__drop_running(lsim_engine *e, int wi, lsim_core_req *r,
                                   lsim_tick now, lsim_errbuf *eb) {
  lsim_core_worker *w = &e->w[wi];
  int64_t owned;
  lsim__list_remove(&w->running, r);
  lsim_err rc = lsim__release(e, wi, r, now, 1, &owned, eb);
  if (rc)
    return rc;
  assert(lsim__worker_sound(e, w));
  int64_t gen = lsim__av(w, r->adapter).generation;
  rc = lsim_core_emit(e, now, LSIM_EV_KV_RELEASED, wi, r->id, r->tenant,
                  r->adapter, gen, 0, owned, owned * e->cfg.page_bytes, 0,
                  "cancelled", eb);
  if (!rc)
    rc = lsim_core_emit(e, now, LSIM_EV_REQUEST_CANCELLED, wi, r->id, r->tenant,
                    r->adapter, gen, 0, owned, owned * e->cfg.page_bytes,
                    r->produced, "running", eb);
  if (rc) {
    lsim__req_free(e, r);
    e->live--;
    return rc;
  }
  return lsim__retire(e, r, now, "cancelled", eb);
}

/*
** Preemption by recompute (incremental KV only): running request r on
** worker wi gives back all its KV and its adapter reference and waits
** again, at the head of a queue, to recompute its prompt and the tokens it
** produced in one prefill row.  It keeps its arrival, its first-token time
** and, on its own worker, its lease (the alias is not re-resolved).  The
** queue is its own
** worker's, or, with several workers, the one with the most free pages
** (migration by recompute; ties: its own, then the lowest index).
*/
static lsim_err lsim__preempt(lsim_engine *e, int wi, lsim_core_req *r,
                              lsim_tick now, lsim_errbuf *eb) {
  lsim_core_worker *w = &e->w[wi];
  int64_t owned;
  lsim__list_remove(&w->running, r);
  /* the lease stays unless it migrates (below) */
  lsim_err rc = lsim__release(e, wi, r, now, 0, &owned, eb);
  if (rc)
    return rc;
  r->recomp = r->produced;
  r->prefilled = 0;
  r->kv_initial = lsim_core_kv_pages(e, (int64_t)r->prompt + r->recomp);
  r->kv_pages = lsim_core_kv_pages(e, (int64_t)r->prompt + r->recomp + 1);
  r->preemptions++;
  r->preempted_at = now;
  r->preempted_on = wi;
  int to = wi;
  if (e->cfg.workers > 1) {
    lsim_res_view v;
    lsim_res_view_get(w->res, &v);
    int64_t best = v.free;
    for (int i = 0; i < e->cfg.workers; i++) {
      lsim_res_view u;
      lsim_res_view_get(e->w[i].res, &u);
      if (u.free > best) {
        best = u.free;
        to = i;
      }
    }
  }
  lsim_core_worker *t = &e->w[to];
  if (to != wi) {
    /* what names this worker (a hotswap lease) goes back */
    if ((rc = lsim__ext_migrate(e, wi, r, to, now, eb)))
      return rc;
    if (!e->nudged[to]) {
      e->nudged[to] = 1;
      e->nudge[e->nnudge++] = to;
    }
  }
  r->worker = to;
  r->state = LSIM__WAITING;
  int hit = lsim__visible(lsim__av(t, r->adapter).state);
  r->queued = 1;
  if ((rc = lsim_res_queue(t->res, r->adapter, +1, eb)))
    return rc;
  lsim__list_push_front(&t->waiting, r);
  r->fair = hit ? 2 : 1;
  lsim_core_phase(r, now, hit ? LSIM_CORE_PH_QUEUE : LSIM_CORE_PH_LOAD);
  if ((rc = lsim_fair_enqueue(e->fair, now, to, r->tenant, r->adapter, hit)))
    return lsim_fail(eb, rc, "interval sink failed");
  assert(lsim__worker_sound(e, w) && lsim__worker_sound(e, t));
  /* generation: the worker it now waits on; attempt: its preemptions;
  ** value: tokens its recompute prefill will process */
  return lsim_core_emit(e, now, LSIM_EV_REQUEST_PREEMPTED, wi, r->id, r->tenant,
                    r->adapter, to, r->preemptions, owned,
                    owned * e->cfg.page_bytes, r->prompt + r->recomp,
                    to == wi ? "recompute" : "migrate", eb);
}

/* Pages for r's growth by evicting idle adapters (the policy ranks them,
** never r's own): a KV transaction of `add` pages whose object joins r's.
** *ok = 0 when even eviction cannot free them. */
static lsim_err lsim__grow_evict(lsim_engine *e, int wi, lsim_core_req *r,
                                 int64_t add, lsim_tick now, int *ok,
                                 lsim_errbuf *eb) {
  lsim_core_worker *w = &e->w[wi];
  lsim_res_req q = {LSIM_TXN_KV, r->adapter, r->id, add, 0};
  int64_t txn;
  int nv, relaxed, kv2;
  lsim_err rc = lsim__begin(e, wi, now, &q, 0, &txn, e->vict, &nv, &relaxed,
                            ok, eb);
  if (rc || !*ok)
    return rc;
  if ((rc = lsim__emit_victims(e, wi, now, e->vict, nv, 0, eb)) ||
      (rc = lsim_res_commit(w->res, txn, now, &kv2, eb)) ||
      (rc = lsim_res_unbind(w->res, r->adapter, now, eb)) ||
      (rc = lsim_res_kv_absorb(w->res, r->kv, kv2, eb)))
    return rc;
  return lsim__emit_retired(e, wi, now, e->vict, nv, eb);
}

/*
** Before a launch (incremental KV): every running request gets the pages
** its next token needs, oldest first; when the pool is out of free pages,
** the newest running request is preempted (possibly the one that asked).
*/
static lsim_err lsim__grow_running(lsim_engine *e, int wi, lsim_tick now,
                                   lsim_errbuf *eb) {
  lsim_core_worker *w = &e->w[wi];
  lsim_err rc;
  for (lsim_core_req *r = w->running.head, *nx; r; r = nx) {
    nx = r->next;
    if (r->produced == 0)
      continue; /* mid-prefill (chunked): its prompt pages are held */
    int64_t need = lsim__own_pages(e, r, (int64_t)r->prompt + r->produced + 1);
    while (need > r->kv_pages) {
      lsim_res_view v;
      int64_t add = need - r->kv_pages;
      if ((rc = lsim__ext_reclaim(e, wi, now, add + e->cfg.guard_pages, eb)))
        return rc;
      lsim_res_view_get(w->res, &v);
      if (v.free - e->cfg.guard_pages >= add) {
        if ((rc = lsim_res_kv_extend(w->res, r->kv, add, eb)))
          return rc;
        r->kv_pages = need;
        break;
      }
      int ok;
      if ((rc = lsim__grow_evict(e, wi, r, add, now, &ok, eb)))
        return rc;
      if (ok) {
        r->kv_pages = need;
        break;
      }
      lsim_core_req *victim = w->running.tail;
      if (victim == nx)
        nx = NULL; /* the loop must not visit a request that left */
      int self = victim == r;
      if ((rc = lsim__preempt(e, wi, victim, now, eb)))
        return rc;
      if (self)
        break;
    }
  }
  return 0;
}

static int lsim__in_flight(const lsim_core_worker *w, const lsim_core_req *r) {
  if (!w->busy)
    return 0;
  for (int i = 0; i < w->nbatch; i++)
    if (w->batch[i] == r)
      return 1;
  return 0;
}

lsim_err lsim_engine_withdraw(lsim_engine *e, int64_t request, lsim_tick now,
                              int why, int *found, lsim_errbuf *eb) {
  *found = 0;
  if (why != LSIM_WITHDRAW_CANCEL && why != LSIM_WITHDRAW_CANCEL_WAITING &&
      why != LSIM_WITHDRAW_DEADLINE)
    return lsim_fail(eb, LSIM_E_USAGE, "withdraw: unknown reason %d", why);
  for (int wi = 0; wi < e->cfg.workers; wi++) {
    lsim_core_worker *w = &e->w[wi];
    lsim_core_req *r;
    for (r = w->waiting.head; r && r->id != request; r = r->next)
      ;
    if (r) {
      if (why == LSIM_WITHDRAW_DEADLINE && (r->kv >= 0 || r->txn >= 0))
        return 0; /* admitted before its deadline: it runs */
      *found = 1;
      int64_t released;
      const char *what;
      lsim_err rc = lsim__withdraw_waiting(e, wi, r, now, &released, &what, eb);
      if (rc)
        return rc;
      if (why == LSIM_WITHDRAW_DEADLINE) {
        /* refused like an early abort, with its own reason */
        return lsim__reject(e, r, now, "deadline_expired", eb);
      }
      rc = lsim_core_emit(e, now, LSIM_EV_REQUEST_CANCELLED, wi, r->id, r->tenant,
                      r->adapter, lsim__av(w, r->adapter).generation, 0,
                      released, released * e->cfg.page_bytes, 0, what, eb);
      if (rc) {
        lsim__req_free(e, r);
        e->live--;
        return rc;
      }
      return lsim__retire(e, r, now, "cancelled", eb);
    }
    if (why != LSIM_WITHDRAW_CANCEL)
      continue;
    for (r = w->running.head; r && r->id != request; r = r->next)
      ;
    if (!r)
      continue;
    *found = 1;
    if (lsim__in_flight(w, r)) {
      r->cancel = 1; /* its launched rows complete first */
      return 0;
    }
    return lsim__drop_running(e, wi, r, now, eb);
  }
  return 0;
}

int lsim_engine_pop_nudge(lsim_engine *e) {
  if (e->nnudge == 0)
    return -1;
  int w = e->nudge[--e->nnudge];
  e->nudged[w] = 0;
  return w;
}

lsim_err lsim_engine_cancel(lsim_engine *e, int64_t request, lsim_tick now,
                            int *found, lsim_errbuf *eb) {
  return lsim_engine_withdraw(e, request, now, LSIM_WITHDRAW_CANCEL_WAITING,
                              found, eb);
}

/* ---- selection ------------------------------------------------------------ */

/*
** Selection of worker wi's next iteration, in named steps (each below):
**
**   1. lsim__sel_grow        incremental KV: running requests get their
**                            next page, or the newest is preempted
**   2. lsim__sel_running     rows the running set already needs
**   3. lsim__sel_abort       early abort of requests past their budget
**   4. lsim__sel_candidates  the ready waiting requests, queue order
**   5. lsim_sched_order      the scheduler ranks them
**   6. lsim__sel_admit       admission in that order, within the budgets
**   7. lsim__sel_pack        the plan's rows in packed order
**   8. lsim__sel_launch      the launch snapshot and iteration_selected
*/

/* Step 2: token rows of the running set: one decode row per request; a
** part-prefilled one (chunked prefill) takes its next chunk instead, and
** one whose first row (a prefill or a recompute) was in a failed iteration
** takes that row again.  Compressed: also the clusters of the running
** batch, for the affinity cost of the candidates. */
static int64_t lsim__sel_running(lsim_engine *e, lsim_core_worker *w) {
  int64_t tokens = w->running.n;
  for (lsim_core_req *r = w->running.head; r; r = r->next)
    if (lsim__mid_prefill(r))
      tokens += lsim__chunk_of(e, r->prompt - r->reuse - r->prefilled) - 1;
    else if (lsim__first_row_pending(r))
      tokens += lsim__admit_rows(e, r) - 1;
  e->nbcl = 0;
  for (lsim_core_req *r = e->k ? w->running.head : NULL; r; r = r->next) {
    int c = e->cluster[r->adapter], seen = 0;
    for (int j = 0; j < e->nbcl && !seen; j++)
      seen = e->bcl[j] == c;
    if (!seen && e->nbcl <= e->cfg.max_batch_requests)
      e->bcl[e->nbcl++] = c;
  }
  return tokens;
}

/* Step 3: S-LoRA-style early abort (option): a waiting request that can no
** longer meet its latency budget is rejected before it costs a row. */
static lsim_err lsim__sel_abort(lsim_engine *e, lsim_core_worker *w,
                                lsim_tick now, lsim_errbuf *eb) {
  if (e->cfg.abort_ticks <= 0)
    return 0;
  int seen = 0;
  lsim_err rc;
  for (lsim_core_req *r = w->waiting.head, *nx; r && seen < LSIM_ENGINE_WINDOW;
       r = nx, seen++) {
    nx = r->next;
    if (r->kv >= 0 || r->txn >= 0 || now - r->arrival <= e->cfg.abort_ticks)
      continue;
    if ((rc = lsim__unwait(e, now, w, r, eb)) ||
        (rc = lsim__reject(e, r, now, "early_abort", eb)))
      return rc;
  }
  return 0;
}

/*
** Step 4: eligible candidates (lsim_pred_eligible's engine form) into
** e->cands / e->cand_req; returns their count.  Waiting requests whose
** adapter generation is visible on this worker, from the queue head, at
** most a window.  Cold requests are never candidates: no ordering can make
** them selectable.
*/
static int lsim__sel_candidates(lsim_engine *e, int wi, lsim_tick now,
                                int slots) {
  lsim_core_worker *w = &e->w[wi];
  int n = 0, scanned = 0;
  for (lsim_core_req *r = w->waiting.head;
       r && slots > 0 && n < LSIM_ENGINE_WINDOW && scanned < 4 * LSIM_ENGINE_WINDOW;
       r = r->next, scanned++) {
    if (r->kv < 0 && !lsim__visible(lsim__av(w, r->adapter).state))
      continue;
    if (lsim__ext_hold(e, wi, r))
      continue; /* held by an extension (a drain_then_overwrite hotswap) */
    if (r->preemptions && r->preempted_at == now && r->preempted_on == wi)
      continue; /* not back in the step that preempted it (a request that
                   migrated may run where it went: nothing else would wake
                   that worker for it) */
    lsim__cand_fill(e, w, r, 1, &e->cands[n]);
    e->cand_req[n++] = r;
  }
  /* Waiting requests that already hold KV (admitted with their adapter's
  ** load) are candidates wherever they sit in the queue: left outside the
  ** window they would keep their pages while the window's requests wait
  ** for pages, and a worker that holds admitted work is never "stuck", so
  ** nothing would free them (a stall the fault campaign found). */
  if (w->admitted_waiting > 0 && slots > 0) {
    int held = 0;
    for (int i = 0; i < n; i++)
      held += e->cand_req[i]->kv >= 0;
    int extra = 0;
    for (lsim_core_req *r = w->waiting.head; r && held < w->admitted_waiting &&
                                         extra < LSIM_ENGINE_WINDOW;
         r = r->next) {
      if (r->kv < 0)
        continue;
      int seen = 0;
      for (int i = 0; i < n && !seen; i++)
        seen = e->cand_req[i] == r;
      if (seen)
        continue;
      held++;
      if (lsim__ext_hold(e, wi, r))
        continue;
      lsim__cand_fill(e, w, r, 1, &e->cands[n]);
      e->cand_req[n++] = r;
      extra++;
    }
  }
  return n;
}

/* max_loras: start the plan's adapter set from the running requests (every
** one of them has a row in the plan). */
static void lsim__cap_running(lsim_engine *e, const lsim_core_worker *w) {
  if (++e->capstamp == 0) {
    memset(e->capseen, 0, (size_t)e->cfg.nadapters * sizeof *e->capseen);
    e->capstamp = 1;
  }
  e->ncap = 0;
  for (const lsim_core_req *r = w->running.head; r; r = r->next)
    if (e->capseen[r->adapter] != e->capstamp) {
      e->capseen[r->adapter] = e->capstamp;
      e->ncap++;
    }
}

/*
** Step 6: admit the n ranked candidates (e->order) in order while the
** request slots and the token budget last; the admitted, in that order,
** go to e->admitted (*nadmit).  *tokens and *slots are updated.
*/
static lsim_err lsim__sel_admit(lsim_engine *e, int wi, lsim_tick now, int n,
                                int64_t *tokens, int *slots, int *nadmit,
                                lsim_errbuf *eb) {
  lsim_core_worker *w = &e->w[wi];
  lsim_err rc;
  int *victims = e->vict;
  int blocked = 0;
  *nadmit = 0;
  if (e->cfg.max_loras > 0)
    lsim__cap_running(e, w);
  for (int i = 0; i < n && *slots > 0; i++) {
    int k = e->order[i];
    if (k < 0 || k >= n)
      return lsim_fail(eb, LSIM_E_POLICY, "scheduler '%s' returned a bad order",
                       e->cfg.sched->name);
    lsim_core_req *r = e->cand_req[k];
    int first = lsim__admit_rows(e, r);
    if (*tokens + first > e->cfg.max_batch_tokens)
      break; /* keeps the policy's order: no overtaking past the budget */
    if (e->cfg.max_loras > 0 && e->capseen[r->adapter] != e->capstamp &&
        e->ncap >= e->cfg.max_loras) {
      /* max_loras: skipped, not rejected (vLLM leaves it waiting); later
      ** candidates of the plan's adapters may pass it, except when it is
      ** the policy's first choice: then none of them takes new pages
      ** before it, so the plan's adapters drain and it gets in (the cap
      ** alone starves no one the policy ranks first) */
      if (i == 0)
        blocked = 1;
      continue;
    }
    if (r->kv >= 0) {
      /* admitted together with its adapter's load: KV already committed */
      w->admitted_waiting--;
    } else {
      /* once a request could not get its pages, no later one may take new
      ** pages before it (no overtaking in allocation); requests that
      ** already hold theirs still run, or the pool could stay full of
      ** committed KV that nothing ever uses */
      if (blocked)
        continue;
      /* a relaxed begin earlier in this loop may have evicted the adapter
      ** this candidate was selected for: it is cold again (load-eligible),
      ** not admissible (found by the fault campaign, docs/RELIABILITY.md) */
      if (!lsim__visible(lsim__av(w, r->adapter).state))
        continue;
      lsim_res_req q = {LSIM_TXN_KV, r->adapter, r->id, r->kv_initial,
                        r->kv_pages - r->kv_initial};
      int64_t txn;
      int nv, relaxed_used, ok;
      int relaxed = lsim__stuck(w) && *nadmit == 0;
      if ((rc = lsim__begin(e, wi, now, &q, relaxed, &txn, victims, &nv,
                            &relaxed_used, &ok, eb)))
        return rc;
      if (!ok) {
        blocked = 1;
        continue;
      }
      if ((rc = lsim__emit_victims(e, wi, now, victims, nv, relaxed_used, eb)))
        return rc;
      int kv;
      if ((rc = lsim_res_commit(w->res, txn, now, &kv, eb)))
        return rc;
      r->kv = kv;
      if ((rc = lsim__emit_retired(e, wi, now, victims, nv, eb)))
        return rc;
      lsim_res_adapter_view av = lsim__av(w, r->adapter);
      if ((rc = lsim_core_emit(e, now, LSIM_EV_KV_RESERVED, wi, r->id, r->tenant,
                           r->adapter, av.generation, 0, r->kv_pages,
                           r->kv_pages * e->cfg.page_bytes,
                           r->prompt + r->output, NULL, eb)))
        return rc;
    }
    lsim_evict_on_use(e->cfg.evict, w->evict_st, r->adapter, now,
                      e->pages[r->adapter], e->bytes[r->adapter]);
    int b = lsim__basis_of(e, r->adapter);
    if (b >= 0)
      lsim_evict_on_use(e->cfg.evict, w->evict_st, b, now, e->pages[b],
                        e->bytes[b]);
    /* the first request bound to a prefetched generation makes it useful */
    if (lsim_fair_prefetch_used(e->fair, wi, r->adapter) &&
        (rc = lsim_core_emit(e, now, LSIM_EV_PREFETCH_RELEASED, wi, r->id,
                         r->tenant, r->adapter,
                         lsim__av(w, r->adapter).generation, 0,
                         e->pages[r->adapter], e->bytes[r->adapter], 1, "used",
                         eb)))
      return rc;
    if ((rc = lsim__unwait(e, now, w, r, eb)))
      return rc;
    if ((rc = lsim_res_kv_grow(w->res, r->kv, r->kv_initial, eb)))
      return rc;
    r->state = LSIM__RUNNING;
    lsim_core_phase(r, now, LSIM_CORE_PH_PREFILL);
    lsim__list_push(&w->running, r);
    /* extensions in order: the hotswap lease (a preempted request keeps
    ** its own), the compressed lease, the prefix cache (a hit shortens the
    ** first row, never past the budget checked above, which assumed no
    ** hit) */
    if ((rc = lsim__ext_admit(e, wi, r, now, eb)))
      return rc;
    first = lsim__admit_rows(e, r);
    assert(lsim__worker_sound(e, w));
    e->admitted[(*nadmit)++] = r;
    *tokens += first;
    (*slots)--;
    if (e->cfg.max_loras > 0 && e->capseen[r->adapter] != e->capstamp) {
      e->capseen[r->adapter] = e->capstamp;
      e->ncap++;
    }
  }
  return 0;
}

/* One row of r (phase, token rows) into the plan and the batch. */
static lsim_err lsim__sel_row(lsim_engine *e, lsim_core_worker *w, lsim_core_req *r,
                              int phase, int rows, lsim_plan *plan,
                              lsim_errbuf *eb) {
  r->planned = rows;
  lsim_plan_entry pe = {r->id, r->tenant, r->adapter, e->rank[r->adapter],
                        phase, rows, r->version, 0, 0, r->kv};
  if (phase == LSIM_PHASE_DECODE) {
    /* the row feeds the last produced token back: everything before it
    ** (the prompt, earlier outputs) is in the KV cache */
    pe.ctx = (int64_t)r->prompt + r->produced - 1;
    pe.sample = 1;
  } else {
    /* a first row after any prefix-cache reuse, a later chunk, or a
    ** recompute after a preemption (which zeroed prefilled: the prompt
    ** and the outputs again, from the reused prefix on) */
    pe.ctx = (int64_t)r->reuse + r->prefilled;
    pe.sample = pe.ctx + rows >= r->prompt;
  }
  lsim_err rc = lsim_plan_push(plan, &pe, eb);
  if (rc)
    return rc;
  w->batch[w->nbatch++] = r;
  return 0;
}

/* Step 7: packed order: the admitted prefills (in scheduler order), first
** rows lost with a failed iteration, continuing prefill chunks, then every
** running request that already has its first token, as decode rows. */
static lsim_err lsim__sel_pack(lsim_engine *e, lsim_core_worker *w, int nadmit,
                               lsim_plan *plan, lsim_errbuf *eb) {
  lsim_err rc;
  w->nbatch = 0;
  for (int i = 0; i < nadmit; i++) {
    lsim_core_req *r = e->admitted[i];
    if ((rc = lsim__sel_row(e, w, r, LSIM_PHASE_PREFILL,
                            lsim__admit_rows(e, r), plan, eb)))
      return rc;
  }
  /* running requests whose first row was lost with a failed iteration
  ** (admitted earlier, nothing completed): the same row again, first */
  for (lsim_core_req *r = w->running.head; r; r = r->next) {
    if (!lsim__first_row_pending(r))
      continue;
    int fresh = 0;
    for (int i = 0; i < nadmit && !fresh; i++)
      fresh = e->admitted[i] == r;
    if (fresh)
      continue;
    if ((rc = lsim__sel_row(e, w, r, LSIM_PHASE_PREFILL,
                            lsim__admit_rows(e, r), plan, eb)))
      return rc;
  }
  /* chunked prefill: part-prefilled requests continue, after the new ones */
  if (e->cfg.prefill_chunk > 0)
    for (lsim_core_req *r = w->running.head; r; r = r->next) {
      if (!lsim__mid_prefill(r))
        continue;
      if ((rc = lsim__sel_row(
               e, w, r, LSIM_PHASE_PREFILL,
               lsim__chunk_of(e, r->prompt - r->reuse - r->prefilled), plan,
               eb)))
        return rc;
    }
  for (lsim_core_req *r = w->running.head; r; r = r->next) {
    if (r->produced == 0 || r->recomp > 0)
      continue; /* prefilling or recomputing: its row is above */
    if ((rc = lsim__sel_row(e, w, r, LSIM_PHASE_DECODE, 1, plan, eb)))
      return rc;
  }
  return 0;
}

/* Step 8: the launch snapshot names each adapter generation it uses: those
** are not evictable until the iteration's completion event.  Then the
** features check the launch, and iteration_selected is emitted. */
static lsim_err lsim__sel_launch(lsim_engine *e, int wi, lsim_tick now,
                                 lsim_plan *plan, int *selected,
                                 lsim_errbuf *eb) {
  lsim_core_worker *w = &e->w[wi];
  lsim_err rc;
  if ((rc = lsim_plan_finish(plan, eb)))
    return rc;
  w->nlaunched = 0;
  if (++e->lstamp == 0) { /* wrapped: no mark may look current */
    memset(e->lmark, 0, (size_t)e->nobj * sizeof *e->lmark);
    e->lstamp = 1;
  }
  for (int i = 0; i < w->nbatch; i++) {
    int a = w->batch[i]->adapter;
    if (e->lmark[a] == e->lstamp)
      continue; /* named already, by an earlier row */
    e->lmark[a] = e->lstamp;
    w->launched[w->nlaunched++] = a;
    if ((rc = lsim_res_launch(w->res, a, +1, eb)))
      return rc;
  }
  if (e->k) {
    /* compressed: the launch names the bases of its clusters too (the
    ** rows' catalog leases are checked by ext_compress.c's launch hook) */
    int nad = w->nlaunched;
    for (int j = 0; j < nad; j++) {
      int b = lsim__basis_of(e, w->launched[j]), seen = 0;
      for (int i = nad; i < w->nlaunched && !seen; i++)
        seen = w->launched[i] == b;
      if (seen)
        continue;
      w->launched[w->nlaunched++] = b;
      if ((rc = lsim_res_launch(w->res, b, +1, eb)))
        return rc;
    }
  }
  /* the host tier: a launch is a use of each object it names */
  for (int j = 0; w->host.cap > 0 && j < w->nlaunched; j++)
    lsim_host_use(&w->host, w->launched[j]);
  if ((rc = lsim__ext_launch(e, wi, plan, eb)))
    return rc;
  plan->iter = e->iters++;
  w->iter = plan->iter;
  plan->worker = wi;
  plan->start_tick = now;
  w->busy = 1;
  *selected = 1;
  /* generation: the iteration number; value: token rows planned. */
  return lsim_core_emit(e, now, LSIM_EV_ITERATION_SELECTED, wi, LSIM_NONE,
                    LSIM_NONE, LSIM_NONE, plan->iter, 0, 0, 0,
                    plan->prefill_rows + plan->decode_rows, NULL, eb);
}

static lsim_err lsim__select(lsim_engine *e, int wi, lsim_tick now,
                             lsim_plan *plan, int *selected,
                             lsim_errbuf *eb) {
  lsim_core_worker *w = &e->w[wi];
  lsim_err rc;
  *selected = 0;
  lsim_plan_reset(plan);
  plan->slot_rank = e->cfg.max_lora_rank;
  plan->positions = 1;
  if (e->cfg.kv_incremental && (rc = lsim__grow_running(e, wi, now, eb)))
    return rc;
  int64_t tokens = lsim__sel_running(e, w);
  int slots = e->cfg.max_batch_requests - w->running.n;
  if ((rc = lsim__sel_abort(e, w, now, eb)))
    return rc;
  int n = lsim__sel_candidates(e, wi, now, slots);
  if (n > 0)
    lsim_sched_order(e->cfg.sched, e->sched_st, now, e->cands, n, e->order);
  int nadmit;
  if ((rc = lsim__sel_admit(e, wi, now, n, &tokens, &slots, &nadmit, eb)) ||
      (rc = lsim__sel_pack(e, w, nadmit, plan, eb)))
    return rc;
  if (w->nbatch == 0)
    return 0;
  return lsim__sel_launch(e, wi, now, plan, selected, eb);
}

lsim_err lsim_engine_step(lsim_engine *e, int wi, lsim_tick now,
                          lsim_load_start *loads, int maxloads, int *nloads,
                          lsim_plan *plan, int *selected, lsim_errbuf *eb) {
  *nloads = 0;
  *selected = 0;
  if (wi < 0 || wi >= e->cfg.workers)
    return lsim_fail(eb, LSIM_E_STATE, "step: worker %d out of range", wi);
  lsim_err rc = lsim__start_loads(e, wi, now, loads, maxloads, nloads, eb);
  if (rc || e->w[wi].busy)
    return rc;
  return lsim__select(e, wi, now, plan, selected, eb);
}

/* ---- completion ------------------------------------------------------------ */

lsim_err lsim_engine_iter_done(lsim_engine *e, int wi, lsim_tick now, int ok,
                               lsim_errbuf *eb) {
  if (wi < 0 || wi >= e->cfg.workers || !e->w[wi].busy)
    return lsim_fail(eb, LSIM_E_STATE, "iter_done on idle worker %d", wi);
  lsim_core_worker *w = &e->w[wi];
  /* this worker's plan, not the run's latest: with several workers another
  ** worker may have frozen a later plan meanwhile (found by the event-log
  ** audit, engine/ledger.c) */
  int64_t iter = w->iter;
  lsim_err rc;
  int64_t rows = 0;
  for (int i = 0; i < w->nbatch; i++)
    rows += w->batch[i]->planned;
  rc = lsim_core_emit(e, now, LSIM_EV_ITERATION_COMPLETED, wi, LSIM_NONE,
                  LSIM_NONE, LSIM_NONE, iter, 0, 0, 0, ok ? rows : 0,
                  ok ? "ok" : "failed", eb);
  w->busy = 0;
  /* the completion event fences every adapter the launch named */
  for (int j = 0; j < w->nlaunched; j++) {
    lsim_err rc2 = lsim_res_launch(w->res, w->launched[j], -1, eb);
    if (rc2 && !rc)
      rc = rc2;
  }
  w->nlaunched = 0;
  lsim__ext_fence(e, wi);
  if (rc || !ok) {
    int n = w->nbatch;
    w->nbatch = 0;
    /* nothing completed; a request cancelled meanwhile leaves now */
    for (int i = 0; !rc && i < n; i++)
      if (w->batch[i]->cancel)
        rc = lsim__drop_running(e, wi, w->batch[i], now, eb);
    return rc;
  }
  for (int i = 0; i < w->nbatch; i++) {
    lsim_core_req *r = w->batch[i];
    int64_t units = r->planned;
    if (r->produced == 0 && r->prefilled + r->planned < r->prompt - r->reuse) {
      /* a prefill chunk that is not the last: input service, no token
      ** (after a preemption, only the part not debited before) */
      r->prefilled += r->planned;
      units = r->prefilled > r->svc_in ? r->prefilled - r->svc_in : 0;
      if (r->prefilled > r->svc_in)
        r->svc_in = r->prefilled;
      if ((rc = lsim_core_emit(e, now, LSIM_EV_COMPLETED_SERVICE_DEBITED, wi,
                           r->id, r->tenant, r->adapter, iter, 0, 0, 0, units,
                           "prefill", eb)))
        return rc;
      lsim_sched_on_service(e->cfg.sched, e->sched_st, r->tenant, r->adapter,
                            units, 0);
      if ((rc = lsim_fair_debit(e->fair, now, r->tenant)))
        return lsim_fail(eb, rc, "interval sink failed");
      if (r->cancel && (rc = lsim__drop_running(e, wi, r, now, eb)))
        return rc;
      continue;
    }
    int prefill = r->produced == 0;
    if (prefill) {
      r->prefilled = r->prompt;
      r->first_token = now; /* a preempted request with a token recomputes */
      lsim_core_phase(r, now, LSIM_CORE_PH_DECODE);
      /* the prompt's input not debited yet (all of it, or the last chunk);
      ** tokens a prefix-cache hit reused were not computed */
      units = r->prompt - r->reuse - r->svc_in;
      if (units < 0)
        units = 0;
      if (r->svc_in < r->prompt - r->reuse)
        r->svc_in = r->prompt - r->reuse;
    } else if (r->recomp > 0) {
      /* a recompute row: the recomputed tokens were served before; the
      ** service is the one new token */
      r->prefilled = r->prompt;
      r->recomp = 0;
      units = 1;
    }
    r->produced++;
    rc = lsim_core_emit(e, now, LSIM_EV_COMPLETED_SERVICE_DEBITED, wi, r->id,
                    r->tenant, r->adapter, iter, 0, 0, 0, units,
                    prefill ? "prefill" : "decode", eb);
    if (rc)
      return rc;
    /* prefix cache: the first row's blocks become reusable */
    if ((rc = lsim__ext_first_row(e, wi, r, now, eb)))
      return rc;
    /* completed service, at its publication only: the prefill's input
    ** (its first token counts as input work), then one output per decode */
    lsim_sched_on_service(e->cfg.sched, e->sched_st, r->tenant, r->adapter,
                          prefill ? units : 0, prefill ? 0 : units);
    if ((rc = lsim_fair_debit(e->fair, now, r->tenant)))
      return lsim_fail(eb, rc, "interval sink failed");
    /* decode growth draws on the request's own reserve */
    if ((rc = lsim_res_kv_grow(
             w->res, r->kv,
             lsim__own_pages(e, r, (int64_t)r->prompt + r->produced), eb)))
      return rc;
    if (r->produced < r->output) {
      if (r->cancel && (rc = lsim__drop_running(e, wi, r, now, eb)))
        return rc;
      continue;
    }
    /* finished: close KV ownership and the adapter reference (a request
    ** cancelled during its last iteration finished first) */
    lsim__list_remove(&w->running, r);
    int64_t owned;
    if ((rc = lsim__release(e, wi, r, now, 1, &owned, eb)))
      return rc;
    assert(lsim__worker_sound(e, w));
    int64_t gen = lsim__av(w, r->adapter).generation;
    rc = lsim_core_emit(e, now, LSIM_EV_KV_RELEASED, wi, r->id, r->tenant,
                    r->adapter, gen, 0, r->kv_pages,
                    r->kv_pages * e->cfg.page_bytes, 0, NULL, eb);
    if (!rc)
      rc = lsim_core_emit(e, now, LSIM_EV_REQUEST_FINISHED, wi, r->id, r->tenant,
                      r->adapter, gen, 0, 0, 0, r->produced, "ok", eb);
    if (rc) {
      lsim__req_free(e, r);
      e->live--;
      return rc;
    }
    if ((rc = lsim__retire(e, r, now, "ok", eb)))
      return rc;
  }
  w->nbatch = 0;
  return lsim__ext_iter_end(e, wi, now, eb);
}

lsim_err lsim_engine_finish(lsim_engine *e, lsim_tick now, lsim_errbuf *eb) {
  /* intervals still open close as "open"; the requests below leave the
  ** ledgers without reporting again */
  lsim_err frc = lsim_fair_finish(e->fair, now);
  if (frc)
    return lsim_fail(eb, frc, "interval sink failed");
  for (int i = 0; i < e->cfg.workers; i++)
    for (lsim_core_req *r = e->w[i].waiting.head; r; r = r->next)
      r->fair = 0;
  for (int i = 0; i < e->cfg.workers; i++) {
    lsim_core_worker *w = &e->w[i];
    lsim_core_list *lists[2] = {&w->running, &w->waiting};
    for (int k = 0; k < 2; k++) {
      lsim_core_req *r;
      while ((r = lists[k]->head) != NULL) {
        /* the records are written; ownership stays as it was so that the
        ** final conservation check sees the pool the run ended with */
        lsim_err rc = lsim__record(e, r, now, "unfinished", eb);
        lsim_errbuf tmp = LSIM_ERRBUF_INIT;
        int64_t owned;
        if (k == 1 && r->kv >= 0)
          w->admitted_waiting--;
        /* leases stay: no lease_released for a request that never left */
        lsim__release(e, i, r, now, 0, &owned, &tmp);
        if (k == 1)
          lsim__unwait(e, now, w, r, &tmp);
        else
          lsim__list_remove(lists[k], r);
        if (r->txn >= 0) {
          int64_t rel;
          lsim_res_txn_drop_request(w->res, r->txn, &rel, &tmp);
        }
        lsim__req_free(e, r);
        e->live--;
        if (rc)
          return rc;
      }
    }
  }
  return 0;
}

/* ---- views ----------------------------------------------------------------- */

void lsim_engine_worker_view(const lsim_engine *e, int wi,
                             lsim_worker_view *out) {
  const lsim_core_worker *w = &e->w[wi];
  lsim_res_view v;
  lsim_res_view_get(w->res, &v);
  out->pool_pages = v.slots;
  out->free_pages = v.free;
  out->reserved_pages = v.reserved;
  out->adapter_pages = v.adapter;
  out->kv_pages = v.kv;
  out->waiting = w->waiting.n;
  out->running = w->running.n;
  out->resident_adapters = 0;
  out->loading_adapters = 0;
  for (int a = 0; a < e->cfg.nadapters; a++) {
    int st = lsim__av(w, a).state;
    out->resident_adapters += lsim__visible(st);
    out->loading_adapters += st == LSIM_RS_RESERVED || st == LSIM_RS_LOADING ||
                             st == LSIM_RS_VALIDATED;
  }
  out->busy = w->busy;
}

int64_t lsim_engine_adapter_pages(const lsim_engine *e, int adapter) {
  return e->pages[adapter];
}

int64_t lsim_engine_adapter_bytes(const lsim_engine *e, int adapter) {
  return e->bytes[adapter];
}

int lsim_engine_adapter_owner(const lsim_engine *e, int adapter) {
  return lsim__tenant_of(e, adapter);
}

int64_t lsim_engine_live_requests(const lsim_engine *e) { return e->live; }

const struct lsim_res *lsim_engine_res(const lsim_engine *e, int w) {
  return e->w[w].res;
}
