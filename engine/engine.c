/*
** engine.c: placement, residency, admission, eviction and iteration
** selection for the foundation engine.
**
** Invariants (checked by lsim__worker_sound, under assert after every
** transaction and by lsim_engine_check on demand):
**
**   I1  free + reserved + adapter + kv == pool_pages, each term >= 0.
**   I2  adapter pages == sum of pages of PUBLISHED slots;
**       reserved pages == sum of pages of LOADING slots.
**   I3  kv pages == sum of kv_pages of running requests.
**   I4  a slot's refcount == its running requests; waiters == its queued
**       requests on this worker; an evicted slot had both at zero.
**
** Event order within one call is fixed by the code below, and every list is
** walked in insertion order, so the emitted sequence depends only on the
** inputs.
*/
#include "engine.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

enum { LSIM__ABSENT = 0, LSIM__LOADING = 1, LSIM__PUBLISHED = 2 };
enum { LSIM__WAITING = 0, LSIM__RUNNING = 1 };

typedef struct lsim__req {
  int64_t id;
  int tenant, adapter, worker;
  lsim_tick arrival, first_token;
  int prompt, output, produced;
  int state;
  int loads_waited;
  int64_t kv_pages;
  struct lsim__req *prev, *next; /* waiting or running list */
} lsim__req;

typedef struct lsim__list {
  lsim__req *head, *tail;
  int n;
} lsim__list;

typedef struct lsim__slot {
  int state;
  int64_t generation; /* published generations so far */
  int refcount;       /* running requests using it */
  int waiters;        /* queued requests needing it */
  int attempts;       /* failed copies in the current load sequence */
  lsim_tick last_use, published_tick;
  int64_t uses;
} lsim__slot;

typedef struct lsim__worker {
  int64_t free_pages, reserved_pages, adapter_pages, kv_pages;
  lsim__slot *slots; /* nadapters */
  lsim__list waiting, running;
  int busy;
  int resident, loading;
  /* the iteration in flight: its requests in plan order */
  lsim__req **batch;
  int nbatch;
} lsim__worker;

struct lsim_engine {
  lsim_engine_cfg cfg;
  int *rank;
  int64_t *bytes, *pages;
  lsim__worker *w;
  int64_t seq;   /* next event seq */
  int64_t iters; /* next iteration number */
  int64_t live;
  lsim__req *freelist;
  void *sched_st, *evict_st, *prefetch_st;
  /* scratch, sized once */
  lsim_sched_cand *cands;
  lsim__req **cand_req;
  int *order;
  lsim_evict_cand *ecands;
  lsim__req **admitted;
};

/* ---- lists and request pool -------------------------------------------- */

static void lsim__list_push(lsim__list *l, lsim__req *r) {
  r->next = NULL;
  r->prev = l->tail;
  if (l->tail)
    l->tail->next = r;
  else
    l->head = r;
  l->tail = r;
  l->n++;
}

static void lsim__list_remove(lsim__list *l, lsim__req *r) {
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

static lsim__req *lsim__req_alloc(lsim_engine *e) {
  lsim__req *r = e->freelist;
  if (r) {
    e->freelist = r->next;
  } else {
    r = malloc(sizeof *r);
    if (!r)
      return NULL;
  }
  memset(r, 0, sizeof *r);
  return r;
}

static void lsim__req_free(lsim_engine *e, lsim__req *r) {
  r->next = e->freelist;
  e->freelist = r;
}

/* ---- events ------------------------------------------------------------- */

static lsim_err lsim__emit(lsim_engine *e, lsim_tick now, int kind, int w,
                           int64_t request, int tenant, int adapter,
                           int64_t generation, int attempt, int64_t pages,
                           int64_t bytes, int64_t value, const char *detail,
                           lsim_errbuf *eb) {
  lsim_event ev;
  ev.seq = e->seq++;
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
  if (!e->cfg.sink.event)
    return 0;
  lsim_err rc = e->cfg.sink.event(e->cfg.sink.ud, &ev);
  if (rc)
    return lsim_fail(eb, rc, "event sink failed on %s (seq %lld)",
                     lsim_event_kind_name(kind), (long long)ev.seq);
  return 0;
}

static lsim_err lsim__record(lsim_engine *e, const lsim__req *r,
                             lsim_tick now, const char *outcome,
                             lsim_errbuf *eb) {
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
  lsim_err rc = e->cfg.sink.request_done(e->cfg.sink.ud, &rec);
  if (rc)
    return lsim_fail(eb, rc, "request sink failed on request %lld",
                     (long long)r->id);
  return 0;
}

/* ---- invariants --------------------------------------------------------- */

static int lsim__worker_sound(const lsim_engine *e, const lsim__worker *w) {
  const int64_t pool = e->cfg.pool_pages;
  if (w->free_pages < 0 || w->reserved_pages < 0 || w->adapter_pages < 0 ||
      w->kv_pages < 0)
    return 0;
  if (w->free_pages + w->reserved_pages + w->adapter_pages + w->kv_pages !=
      pool)
    return 0;
  int64_t pub = 0, res = 0, kv = 0;
  for (int a = 0; a < e->cfg.nadapters; a++) {
    if (w->slots[a].state == LSIM__PUBLISHED)
      pub += e->pages[a];
    else if (w->slots[a].state == LSIM__LOADING)
      res += e->pages[a];
    if (w->slots[a].refcount < 0 || w->slots[a].waiters < 0)
      return 0;
  }
  for (const lsim__req *r = w->running.head; r; r = r->next)
    kv += r->kv_pages;
  return pub == w->adapter_pages && res == w->reserved_pages &&
         kv == w->kv_pages;
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
      cfg->page_bytes < 1 || !cfg->sched || !cfg->evict || !cfg->prefetch)
    return lsim_fail(eb, LSIM_E_USAGE, "engine configuration incomplete");
  lsim_engine *e = calloc(1, sizeof *e);
  if (!e)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory creating engine");
  e->cfg = *cfg;
  int na = cfg->nadapters;
  e->rank = malloc((size_t)na * sizeof *e->rank);
  e->bytes = malloc((size_t)na * sizeof *e->bytes);
  e->pages = malloc((size_t)na * sizeof *e->pages);
  e->w = calloc((size_t)cfg->workers, sizeof *e->w);
  e->cands = malloc(LSIM_ENGINE_WINDOW * sizeof *e->cands);
  e->cand_req = malloc(LSIM_ENGINE_WINDOW * sizeof *e->cand_req);
  e->order = malloc(LSIM_ENGINE_WINDOW * sizeof *e->order);
  e->ecands = malloc((size_t)na * sizeof *e->ecands);
  e->admitted = malloc(LSIM_ENGINE_WINDOW * sizeof *e->admitted);
  e->sched_st = lsim__policy_state(cfg->sched->state_size);
  e->evict_st = lsim__policy_state(cfg->evict->state_size);
  e->prefetch_st = lsim__policy_state(cfg->prefetch->state_size);
  int ok = e->rank && e->bytes && e->pages && e->w && e->cands &&
           e->cand_req && e->order && e->ecands && e->admitted &&
           e->sched_st && e->evict_st && e->prefetch_st;
  for (int i = 0; ok && i < cfg->workers; i++) {
    lsim__worker *w = &e->w[i];
    w->slots = calloc((size_t)na, sizeof *w->slots);
    w->batch = malloc(((size_t)cfg->max_batch_requests + 1) * sizeof *w->batch);
    ok = w->slots && w->batch;
    w->free_pages = cfg->pool_pages;
  }
  if (!ok) {
    lsim_engine_release(e);
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory creating engine");
  }
  for (int a = 0; a < na; a++) {
    e->rank[a] = cfg->adapter_rank[a];
    e->bytes[a] = cfg->adapter_bytes[a];
    e->pages[a] = (cfg->adapter_bytes[a] + cfg->page_bytes - 1) / cfg->page_bytes;
  }
  e->cfg.adapter_rank = NULL;
  e->cfg.adapter_bytes = NULL;
  lsim_err rc = lsim_sched_init(cfg->sched, e->sched_st, cfg->ntenants, na);
  if (!rc)
    rc = lsim_evict_init(cfg->evict, e->evict_st, na);
  if (!rc)
    rc = lsim_prefetch_init(cfg->prefetch, e->prefetch_st, na);
  if (rc) {
    lsim_engine_release(e);
    return lsim_fail(eb, LSIM_E_POLICY, "policy initialisation failed");
  }
  *out = e;
  return 0;
}

static void lsim__free_list(lsim__req *r) {
  while (r) {
    lsim__req *n = r->next;
    free(r);
    r = n;
  }
}

void lsim_engine_release(lsim_engine *e) {
  if (!e)
    return;
  for (int i = 0; e->w && i < e->cfg.workers; i++) {
    lsim__free_list(e->w[i].waiting.head);
    lsim__free_list(e->w[i].running.head);
    free(e->w[i].slots);
    free(e->w[i].batch);
  }
  lsim__free_list(e->freelist);
  free(e->w);
  free(e->rank);
  free(e->bytes);
  free(e->pages);
  free(e->cands);
  free(e->cand_req);
  free(e->order);
  free(e->ecands);
  free(e->admitted);
  free(e->sched_st);
  free(e->evict_st);
  free(e->prefetch_st);
  free(e);
}

/* ---- helpers ------------------------------------------------------------ */

static int64_t lsim__kv_pages(const lsim_engine *e, int tokens) {
  int64_t b = (int64_t)tokens * e->cfg.kv_bytes_per_token;
  return (b + e->cfg.page_bytes - 1) / e->cfg.page_bytes;
}

/*
** Evict eligible adapters of worker w, by the eviction policy's ranking,
** until `need` pages are free or nothing is eligible.  Eligible: PUBLISHED,
** refcount 0, and (unless `relaxed`) no queued request waiting for it;
** `keep` is never evicted.  Returns 0 or an error; *freed says whether
** `need` was reached.
*/
static lsim_err lsim__evict_until(lsim_engine *e, int wi, lsim_tick now,
                                  int64_t need, int keep, int relaxed,
                                  int *reached, lsim_errbuf *eb) {
  lsim__worker *w = &e->w[wi];
  *reached = w->free_pages >= need;
  while (!*reached) {
    int n = 0;
    for (int a = 0; a < e->cfg.nadapters; a++) {
      const lsim__slot *s = &w->slots[a];
      if (s->state != LSIM__PUBLISHED || s->refcount > 0 || a == keep)
        continue;
      if (s->waiters > 0 && !relaxed)
        continue;
      lsim_evict_cand *c = &e->ecands[n++];
      c->adapter = a;
      c->pages = e->pages[a];
      c->last_use_tick = s->last_use;
      c->published_tick = s->published_tick;
      c->uses = s->uses;
    }
    if (n == 0)
      return 0;
    int pick = lsim_evict_pick(e->cfg.evict, e->evict_st, e->ecands, n);
    if (pick < 0 || pick >= n)
      return lsim_fail(eb, LSIM_E_POLICY,
                       "eviction policy '%s' picked %d of %d candidates",
                       e->cfg.evict->name, pick, n);
    int a = e->ecands[pick].adapter;
    lsim__slot *s = &w->slots[a];
    lsim_err rc = lsim__emit(e, now, LSIM_EV_ADAPTER_EVICTED, wi, LSIM_NONE,
                             a % e->cfg.ntenants, a, s->generation, 0,
                             e->pages[a], e->bytes[a], s->uses,
                             relaxed ? "relaxed" : "lru", eb);
    if (rc)
      return rc;
    s->state = LSIM__ABSENT;
    w->adapter_pages -= e->pages[a];
    w->free_pages += e->pages[a];
    w->resident--;
    rc = lsim__emit(e, now, LSIM_EV_ADAPTER_RETIRED, wi, LSIM_NONE,
                    a % e->cfg.ntenants, a, s->generation, 0, e->pages[a],
                    e->bytes[a], 0, NULL, eb);
    if (rc)
      return rc;
    assert(lsim__worker_sound(e, w));
    *reached = w->free_pages >= need;
  }
  return 0;
}

/* Reject a request that is not running: record + event, free it. */
static lsim_err lsim__reject(lsim_engine *e, lsim__req *r, lsim_tick now,
                             const char *why, lsim_errbuf *eb) {
  lsim_err rc = lsim__emit(e, now, LSIM_EV_ADMISSION_REJECTED, r->worker,
                           r->id, r->tenant, r->adapter, LSIM_NONE, 0, 0, 0,
                           0, why, eb);
  if (!rc)
    rc = lsim__record(e, r, now, "rejected", eb);
  lsim__req_free(e, r);
  e->live--;
  return rc;
}

/* ---- arrival ------------------------------------------------------------- */

static int lsim__place(const lsim_engine *e, int adapter) {
  int best = 0;
  for (int i = 0; i < e->cfg.workers; i++)
    if (e->w[i].slots[adapter].state != LSIM__ABSENT)
      return i;
  for (int i = 1; i < e->cfg.workers; i++) {
    const lsim__worker *a = &e->w[i], *b = &e->w[best];
    if (a->waiting.n + a->running.n < b->waiting.n + b->running.n)
      best = i;
  }
  return best;
}

lsim_err lsim_engine_arrive(lsim_engine *e, lsim_tick now,
                            const lsim_arrival *a, int *worker,
                            lsim_errbuf *eb) {
  *worker = -1;
  if (a->adapter < 0 || a->adapter >= e->cfg.nadapters || a->tenant < 0 ||
      a->tenant >= e->cfg.ntenants || a->prompt_tokens < 1 ||
      a->output_tokens < 1)
    return lsim_fail(eb, LSIM_E_STATE,
                     "request %lld: adapter, tenant or lengths out of range",
                     (long long)a->request);
  lsim__req *r = lsim__req_alloc(e);
  if (!r)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory admitting request");
  e->live++;
  r->id = a->request;
  r->tenant = a->tenant;
  r->adapter = a->adapter;
  r->arrival = now;
  r->prompt = a->prompt_tokens;
  r->output = a->output_tokens;
  r->kv_pages = lsim__kv_pages(e, a->prompt_tokens + a->output_tokens);
  r->worker = LSIM_NONE;
  if (a->prompt_tokens > e->cfg.max_batch_tokens)
    return lsim__reject(e, r, now, "prompt_over_batch_budget", eb);
  if (r->kv_pages + e->pages[a->adapter] > e->cfg.pool_pages)
    return lsim__reject(e, r, now, "over_pool_capacity", eb);
  int wi = lsim__place(e, a->adapter);
  lsim__worker *w = &e->w[wi];
  lsim__slot *s = &w->slots[a->adapter];
  r->worker = wi;
  r->state = LSIM__WAITING;
  int hit = s->state == LSIM__PUBLISHED;
  if (!hit)
    r->loads_waited = 1;
  s->waiters++;
  lsim__list_push(&w->waiting, r);
  *worker = wi;
  /* value: 1 when the adapter generation was resident at arrival (a cache
  ** hit), 0 for a cold or in-flight miss. */
  return lsim__emit(e, now, LSIM_EV_QUEUE_ENQUEUED, wi, r->id, r->tenant,
                    r->adapter, s->generation, 0, r->kv_pages, 0, hit,
                    hit ? "hit" : "miss", eb);
}

/* ---- loads --------------------------------------------------------------- */

static lsim_err lsim__start_loads(lsim_engine *e, int wi, lsim_tick now,
                                  lsim_load_start *loads, int maxloads,
                                  int *nloads, lsim_errbuf *eb) {
  lsim__worker *w = &e->w[wi];
  int scanned = 0;
  for (lsim__req *r = w->waiting.head;
       r && scanned < LSIM_ENGINE_WINDOW && *nloads < maxloads;
       r = r->next, scanned++) {
    int a = r->adapter;
    lsim__slot *s = &w->slots[a];
    if (s->state != LSIM__ABSENT)
      continue;
    int reached;
    lsim_err rc = lsim__evict_until(e, wi, now, e->pages[a], a, 0, &reached,
                                    eb);
    if (rc)
      return rc;
    if (!reached)
      break; /* no room now; retried when pages come back */
    s->state = LSIM__LOADING;
    s->attempts++;
    w->free_pages -= e->pages[a];
    w->reserved_pages += e->pages[a];
    w->loading++;
    assert(lsim__worker_sound(e, w));
    rc = lsim__emit(e, now, LSIM_EV_ADAPTER_LOAD_STARTED, wi, r->id,
                    a % e->cfg.ntenants, a, s->generation + 1, s->attempts,
                    e->pages[a], e->bytes[a], 0, NULL, eb);
    if (rc)
      return rc;
    lsim_load_start *ls = &loads[(*nloads)++];
    ls->worker = wi;
    ls->adapter = a;
    ls->attempt = s->attempts;
    ls->bytes = e->bytes[a];
    ls->pages = e->pages[a];
  }
  return 0;
}

lsim_err lsim_engine_load_done(lsim_engine *e, int wi, int a, lsim_tick now,
                               int ok, lsim_errbuf *eb) {
  if (wi < 0 || wi >= e->cfg.workers || a < 0 || a >= e->cfg.nadapters)
    return lsim_fail(eb, LSIM_E_STATE, "load_done: worker or adapter out of range");
  lsim__worker *w = &e->w[wi];
  lsim__slot *s = &w->slots[a];
  int tenant = a % e->cfg.ntenants;
  if (s->state != LSIM__LOADING)
    return lsim_fail(eb, LSIM_E_STATE,
                     "load_done for adapter %d on worker %d, which is not loading",
                     a, wi);
  lsim_err rc;
  w->loading--;
  if (ok) {
    rc = lsim__emit(e, now, LSIM_EV_ADAPTER_LOAD_COMPLETED, wi, LSIM_NONE,
                    tenant, a, s->generation + 1, s->attempts, e->pages[a],
                    e->bytes[a], 0, NULL, eb);
    if (rc)
      return rc;
    /* Validation passed (the world reports a good copy): one atomic
    ** visibility point, stamped with the new generation. */
    s->generation++;
    s->state = LSIM__PUBLISHED;
    s->published_tick = now;
    s->last_use = now;
    s->uses = 0;
    s->attempts = 0;
    w->reserved_pages -= e->pages[a];
    w->adapter_pages += e->pages[a];
    w->resident++;
    assert(lsim__worker_sound(e, w));
    return lsim__emit(e, now, LSIM_EV_ADAPTER_GENERATION_PUBLISHED, wi,
                      LSIM_NONE, tenant, a, s->generation, 0, e->pages[a],
                      e->bytes[a], 0, NULL, eb);
  }
  rc = lsim__emit(e, now, LSIM_EV_ADAPTER_LOAD_FAILED, wi, LSIM_NONE, tenant,
                  a, s->generation + 1, s->attempts, e->pages[a], e->bytes[a],
                  0, "copy_failed", eb);
  if (rc)
    return rc;
  /* Compensating rollback: the reservation closes, the previous generation
  ** (if any) stays authoritative, and the pages return to the free list. */
  s->state = LSIM__ABSENT;
  w->reserved_pages -= e->pages[a];
  w->free_pages += e->pages[a];
  assert(lsim__worker_sound(e, w));
  rc = lsim__emit(e, now, LSIM_EV_LOAD_ROLLED_BACK, wi, LSIM_NONE, tenant, a,
                  s->generation + 1, s->attempts, e->pages[a], 0, 0, NULL, eb);
  if (rc)
    return rc;
  if (s->attempts < e->cfg.max_load_attempts)
    return 0;
  /* Out of attempts: the waiters of this adapter are rejected. */
  s->attempts = 0;
  lsim__req *r = w->waiting.head;
  while (r) {
    lsim__req *next = r->next;
    if (r->adapter == a) {
      lsim__list_remove(&w->waiting, r);
      s->waiters--;
      rc = lsim__reject(e, r, now, "adapter_load_failed", eb);
      if (rc)
        return rc;
    }
    r = next;
  }
  return 0;
}

/* ---- selection ------------------------------------------------------------ */

static lsim_err lsim__select(lsim_engine *e, int wi, lsim_tick now,
                             lsim_plan *plan, int *selected,
                             lsim_errbuf *eb) {
  lsim__worker *w = &e->w[wi];
  *selected = 0;
  lsim_plan_reset(plan);
  int64_t tokens = w->running.n; /* one decode row per running request */
  int slots = e->cfg.max_batch_requests - w->running.n;
  int nadmit = 0;
  lsim_err rc;

  /* Eligible candidates: waiting requests whose adapter generation is
  ** published on this worker, from the queue head, at most a window. */
  int n = 0, scanned = 0;
  for (lsim__req *r = w->waiting.head;
       r && slots > 0 && n < LSIM_ENGINE_WINDOW && scanned < 4 * LSIM_ENGINE_WINDOW;
       r = r->next, scanned++) {
    const lsim__slot *s = &w->slots[r->adapter];
    if (s->state != LSIM__PUBLISHED)
      continue;
    lsim_sched_cand *c = &e->cands[n];
    c->request = r->id;
    c->tenant = r->tenant;
    c->adapter = r->adapter;
    c->rank = e->rank[r->adapter];
    c->arrival_tick = r->arrival;
    c->prompt_tokens = r->prompt;
    c->resident = 1;
    e->cand_req[n++] = r;
  }
  if (n > 0)
    lsim_sched_order(e->cfg.sched, e->sched_st, now, e->cands, n, e->order);

  for (int i = 0; i < n && slots > 0; i++) {
    int k = e->order[i];
    if (k < 0 || k >= n)
      return lsim_fail(eb, LSIM_E_POLICY, "scheduler '%s' returned a bad order",
                       e->cfg.sched->name);
    lsim__req *r = e->cand_req[k];
    if (tokens + r->prompt > e->cfg.max_batch_tokens)
      break; /* keeps the policy's order: no overtaking past the budget */
    int reached;
    int relaxed = w->running.n == 0 && nadmit == 0 && w->loading == 0;
    rc = lsim__evict_until(e, wi, now, r->kv_pages, r->adapter, relaxed,
                           &reached, eb);
    if (rc)
      return rc;
    if (!reached)
      break;
    /* admit: reserve the request's whole KV footprint */
    w->free_pages -= r->kv_pages;
    w->kv_pages += r->kv_pages;
    lsim__slot *s = &w->slots[r->adapter];
    s->waiters--;
    s->refcount++;
    s->uses++;
    s->last_use = now;
    lsim__list_remove(&w->waiting, r);
    r->state = LSIM__RUNNING;
    lsim__list_push(&w->running, r);
    assert(lsim__worker_sound(e, w));
    rc = lsim__emit(e, now, LSIM_EV_KV_RESERVED, wi, r->id, r->tenant,
                    r->adapter, s->generation, 0, r->kv_pages,
                    r->kv_pages * e->cfg.page_bytes, r->prompt + r->output,
                    NULL, eb);
    if (rc)
      return rc;
    e->admitted[nadmit++] = r;
    tokens += r->prompt;
    slots--;
  }

  /* Packed order: the admitted prefills (in scheduler order), then every
  ** running request that already has its first token, as decode rows. */
  w->nbatch = 0;
  for (int i = 0; i < nadmit; i++) {
    lsim__req *r = e->admitted[i];
    lsim_plan_entry pe = {r->id, r->tenant, r->adapter, e->rank[r->adapter],
                          LSIM_PHASE_PREFILL, r->prompt};
    if ((rc = lsim_plan_push(plan, &pe, eb)))
      return rc;
    w->batch[w->nbatch++] = r;
  }
  for (lsim__req *r = w->running.head; r; r = r->next) {
    if (r->produced == 0)
      continue; /* admitted just now: its prefill is above */
    lsim_plan_entry pe = {r->id, r->tenant, r->adapter, e->rank[r->adapter],
                          LSIM_PHASE_DECODE, 1};
    if ((rc = lsim_plan_push(plan, &pe, eb)))
      return rc;
    w->batch[w->nbatch++] = r;
  }
  if (w->nbatch == 0)
    return 0;
  if ((rc = lsim_plan_finish(plan, eb)))
    return rc;
  plan->iter = e->iters++;
  plan->worker = wi;
  plan->start_tick = now;
  w->busy = 1;
  *selected = 1;
  /* generation: the iteration number; value: token rows planned. */
  return lsim__emit(e, now, LSIM_EV_ITERATION_SELECTED, wi, LSIM_NONE,
                    LSIM_NONE, LSIM_NONE, plan->iter, 0, 0, 0,
                    plan->prefill_rows + plan->decode_rows, NULL, eb);
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
  lsim__worker *w = &e->w[wi];
  int64_t iter = e->iters - 1; /* workers run one plan at a time */
  lsim_err rc;
  int64_t rows = 0;
  for (int i = 0; i < w->nbatch; i++)
    rows += w->batch[i]->produced == 0 ? w->batch[i]->prompt : 1;
  rc = lsim__emit(e, now, LSIM_EV_ITERATION_COMPLETED, wi, LSIM_NONE,
                  LSIM_NONE, LSIM_NONE, iter, 0, 0, 0, ok ? rows : 0,
                  ok ? "ok" : "failed", eb);
  w->busy = 0;
  if (rc || !ok) {
    w->nbatch = 0;
    return rc;
  }
  for (int i = 0; i < w->nbatch; i++) {
    lsim__req *r = w->batch[i];
    int64_t units = r->produced == 0 ? r->prompt : 1;
    if (r->produced == 0)
      r->first_token = now;
    r->produced++;
    rc = lsim__emit(e, now, LSIM_EV_COMPLETED_SERVICE_DEBITED, wi, r->id,
                    r->tenant, r->adapter, iter, 0, 0, 0, units,
                    r->produced == 1 ? "prefill" : "decode", eb);
    if (rc)
      return rc;
    lsim_sched_on_service(e->cfg.sched, e->sched_st, r->tenant, r->adapter,
                          units);
    if (r->produced < r->output)
      continue;
    /* finished: close KV ownership and the adapter reference */
    lsim__slot *s = &w->slots[r->adapter];
    lsim__list_remove(&w->running, r);
    w->kv_pages -= r->kv_pages;
    w->free_pages += r->kv_pages;
    s->refcount--;
    s->last_use = now;
    assert(lsim__worker_sound(e, w));
    rc = lsim__emit(e, now, LSIM_EV_KV_RELEASED, wi, r->id, r->tenant,
                    r->adapter, s->generation, 0, r->kv_pages,
                    r->kv_pages * e->cfg.page_bytes, 0, NULL, eb);
    if (!rc)
      rc = lsim__emit(e, now, LSIM_EV_REQUEST_FINISHED, wi, r->id, r->tenant,
                      r->adapter, s->generation, 0, 0, 0, r->produced, "ok",
                      eb);
    if (!rc)
      rc = lsim__record(e, r, now, "ok", eb);
    lsim__req_free(e, r);
    e->live--;
    if (rc)
      return rc;
  }
  w->nbatch = 0;
  return 0;
}

lsim_err lsim_engine_finish(lsim_engine *e, lsim_tick now, lsim_errbuf *eb) {
  for (int i = 0; i < e->cfg.workers; i++) {
    lsim__worker *w = &e->w[i];
    lsim__list *lists[2] = {&w->running, &w->waiting};
    for (int k = 0; k < 2; k++) {
      lsim__req *r;
      while ((r = lists[k]->head) != NULL) {
        lsim__list_remove(lists[k], r);
        lsim_err rc = lsim__record(e, r, now, "unfinished", eb);
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
  const lsim__worker *w = &e->w[wi];
  out->pool_pages = e->cfg.pool_pages;
  out->free_pages = w->free_pages;
  out->reserved_pages = w->reserved_pages;
  out->adapter_pages = w->adapter_pages;
  out->kv_pages = w->kv_pages;
  out->waiting = w->waiting.n;
  out->running = w->running.n;
  out->resident_adapters = w->resident;
  out->loading_adapters = w->loading;
  out->busy = w->busy;
}

int64_t lsim_engine_adapter_pages(const lsim_engine *e, int adapter) {
  return e->pages[adapter];
}

int64_t lsim_engine_live_requests(const lsim_engine *e) { return e->live; }
