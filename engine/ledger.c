/*
** ledger.c: the event-log audit (ledger.h).
**
** State is kept per request (an open-addressing map from the request id),
** per worker (the iteration in flight, the last completed one, the catalog
** generation), per (worker, adapter) (the open load and the published
** generation) and per (worker, slot) (leases and retirement, a second map).
*/
#include "ledger.h"

#include <stdlib.h>
#include <string.h>

enum { LSIM__R_WAITING = 1, LSIM__R_CLOSED = 2 };
enum { LSIM__C_NONE = 0, LSIM__C_FINISHED, LSIM__C_CANCELLED,
       LSIM__C_REJECTED };

typedef struct lsim__lreq {
  int64_t id;
  int state, closed_by;
  int tenant, adapter;
  int enqueued, recorded, kv, admitted, leased;
  /* prefix cache: a lookup open for the current admission, published */
  int px_open, px_pub;
  int64_t px_hit, px_full;
  lsim_tick enqueue_tick, finish_tick;
  int64_t finish_value;
  /* the handle of lease_bound: worker, catalog gen, version, slot, ptr gen,
  ** slot gen */
  int64_t lease[6];
} lsim__lreq;

typedef struct lsim__lslot {
  int64_t key; /* worker << 32 | slot */
  int leases;  /* live leases naming (slot, slot_gen) */
  int64_t lease_gen;
  int retiring;
  int64_t retire_ptr, retire_slot_gen;
} lsim__lslot;

typedef struct lsim__lload {
  int open, copied, validated, failed_pending, restore;
  int attempt, last_failed;
  int64_t gen, pages, failed_pages, failed_gen;
  int64_t published; /* g */
  int64_t used;      /* highest generation any attempt carried */
  int visible;
  int hs_staged, hs_validated;
  int shadow_charge; /* pages charged for a hotswap shadow (kv_reserved
                        without a request, detail hotswap_shadow) */
  int64_t hs_slot;
} lsim__lload;

typedef struct lsim__lworker {
  int busy;
  int64_t iter, rows;
  int64_t done_iter, done_rows, debited;
  lsim_tick done_tick;
  int done_ok, done_valid;
  int64_t catalog;
  int64_t px_blocks; /* prefix blocks cached: + published, - evicted */
} lsim__lworker;

struct lsim_ledger {
  int workers, nadapters, max_attempts;
  lsim__lworker *w;
  lsim__lload *ld; /* [workers * nadapters] */
  lsim__lreq *req;
  int64_t nreq, capreq;
  int64_t *rmap; /* open addressing: index + 1, 0 empty */
  int64_t rmap_cap;
  lsim__lslot *slot;
  int64_t nslot, capslot;
  int64_t last_seq;
  lsim_tick last_tick;
  int any_event;
  lsim_ledger_stats st;
  lsim_err dead;
};

static uint64_t lsim__mix(int64_t k) {
  uint64_t x = (uint64_t)k;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return x;
}

static lsim__lreq *lsim__find(lsim_ledger *l, int64_t id) {
  if (!l->rmap_cap)
    return NULL;
  uint64_t m = (uint64_t)l->rmap_cap - 1;
  for (uint64_t h = lsim__mix(id) & m;; h = (h + 1) & m) {
    int64_t v = l->rmap[h];
    if (!v)
      return NULL;
    if (l->req[v - 1].id == id)
      return &l->req[v - 1];
  }
}

static lsim_err lsim__add(lsim_ledger *l, int64_t id, lsim__lreq **out) {
  if (l->nreq == l->capreq) {
    int64_t cap = l->capreq ? 2 * l->capreq : 256;
    lsim__lreq *n = realloc(l->req, (size_t)cap * sizeof *n);
    if (!n)
      return LSIM_E_NOMEM;
    l->req = n;
    l->capreq = cap;
  }
  if (2 * (l->nreq + 1) > l->rmap_cap) {
    int64_t cap = l->rmap_cap ? 2 * l->rmap_cap : 512;
    int64_t *m = calloc((size_t)cap, sizeof *m);
    if (!m)
      return LSIM_E_NOMEM;
    free(l->rmap);
    l->rmap = m;
    l->rmap_cap = cap;
    for (int64_t i = 0; i < l->nreq; i++) {
      uint64_t h = lsim__mix(l->req[i].id) & (uint64_t)(cap - 1);
      while (m[h])
        h = (h + 1) & (uint64_t)(cap - 1);
      m[h] = i + 1;
    }
  }
  lsim__lreq *r = &l->req[l->nreq];
  memset(r, 0, sizeof *r);
  r->id = id;
  r->tenant = LSIM_NONE;
  r->adapter = LSIM_NONE;
  uint64_t mk = (uint64_t)l->rmap_cap - 1;
  uint64_t h = lsim__mix(id) & mk;
  while (l->rmap[h])
    h = (h + 1) & mk;
  l->rmap[h] = ++l->nreq;
  l->st.requests++;
  *out = r;
  return 0;
}

static lsim__lslot *lsim__slot(lsim_ledger *l, int w, int64_t s, int make) {
  int64_t key = ((int64_t)w << 32) | (s & 0xffffffff);
  for (int64_t i = 0; i < l->nslot; i++) /* few slots: a scan is enough */
    if (l->slot[i].key == key)
      return &l->slot[i];
  if (!make)
    return NULL;
  if (l->nslot == l->capslot) {
    int64_t cap = l->capslot ? 2 * l->capslot : 16;
    lsim__lslot *n = realloc(l->slot, (size_t)cap * sizeof *n);
    if (!n)
      return NULL;
    l->slot = n;
    l->capslot = cap;
  }
  lsim__lslot *p = &l->slot[l->nslot++];
  memset(p, 0, sizeof *p);
  p->key = key;
  return p;
}

lsim_err lsim_ledger_new(lsim_ledger **out, const lsim_ledger_cfg *cfg,
                         lsim_errbuf *eb) {
  int workers = cfg->workers, nadapters = cfg->nadapters;
  *out = NULL;
  if (workers < 1 || nadapters < 0)
    return lsim_fail(eb, LSIM_E_USAGE, "ledger: %d workers, %d adapters",
                     workers, nadapters);
  lsim_ledger *l = calloc(1, sizeof *l);
  if (!l)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  l->workers = workers;
  l->nadapters = nadapters;
  l->max_attempts = cfg->max_load_attempts;
  l->w = calloc((size_t)workers, sizeof *l->w);
  l->ld = calloc((size_t)workers * (size_t)(nadapters ? nadapters : 1),
                 sizeof *l->ld);
  if (!l->w || !l->ld) {
    lsim_ledger_release(l);
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  }
  l->last_seq = -1;
  *out = l;
  return 0;
}

void lsim_ledger_release(lsim_ledger *l) {
  if (!l)
    return;
  free(l->w);
  free(l->ld);
  free(l->req);
  free(l->rmap);
  free(l->slot);
  free(l);
}

void lsim_ledger_stats_get(const lsim_ledger *l, lsim_ledger_stats *out) {
  *out = l->st;
}

/* ---- per-kind vocabulary ---------------------------------------------------- */

static int lsim__is(const char *d, const char *const *ok) {
  for (; *ok; ok++)
    if (d && strcmp(d, *ok) == 0)
      return 1;
  return 0;
}

/* Details a kind may carry; NULL list: any (or none). "" stands for NULL. */
static int lsim__detail_ok(int kind, const char *d) {
  static const char *const done[] = {"ok", "failed", NULL};
  static const char *const phase[] = {"prefill", "decode", NULL};
  static const char *const reject[] = {
      "prompt_over_batch_budget", "over_pool_capacity", "adapter_load_failed",
      "early_abort", "deadline_expired", "rank_over_max_lora_rank", NULL};
  static const char *const failed[] = {"copy_failed", "digest_failed",
                                       "restore_failed", NULL};
  static const char *const cancel[] = {"during_load", "admitted", "waiting",
                                       "running", NULL};
  static const char *const hit[] = {"hit", "miss", NULL};
  static const char *const used[] = {"used", "wasted", NULL};
  static const char *const preempt[] = {"recompute", "migrate", NULL};
  static const char *const pxevict[] = {"publish", "reclaim", NULL};
  static const char *const pxbad[] = {"oblivious", NULL};
  switch (kind) {
  case LSIM_EV_QUEUE_ENQUEUED:
    return lsim__is(d, hit);
  case LSIM_EV_ITERATION_COMPLETED:
    return lsim__is(d, done);
  case LSIM_EV_COMPLETED_SERVICE_DEBITED:
    return lsim__is(d, phase);
  case LSIM_EV_ADMISSION_REJECTED:
    return lsim__is(d, reject);
  case LSIM_EV_ADAPTER_LOAD_FAILED:
    return lsim__is(d, failed);
  case LSIM_EV_REQUEST_CANCELLED:
    return lsim__is(d, cancel);
  case LSIM_EV_PREFETCH_RELEASED:
    return lsim__is(d, used);
  case LSIM_EV_REQUEST_PREEMPTED:
    return lsim__is(d, preempt);
  case LSIM_EV_REQUEST_FINISHED:
    return d && strcmp(d, "ok") == 0;
  case LSIM_EV_ITERATION_SELECTED:
  case LSIM_EV_PREFIX_PUBLISHED:
    return d == NULL;
  case LSIM_EV_PREFIX_HIT:
    return lsim__is(d, hit);
  case LSIM_EV_PREFIX_EVICTED:
    return lsim__is(d, pxevict);
  case LSIM_EV_PREFIX_CORRUPT:
    return lsim__is(d, pxbad);
  default:
    return 1;
  }
}

static int lsim__request_kind(int kind) {
  switch (kind) {
  case LSIM_EV_COMPLETED_SERVICE_DEBITED:
  case LSIM_EV_KV_RESERVED:
  case LSIM_EV_KV_RELEASED:
  case LSIM_EV_REQUEST_FINISHED:
  case LSIM_EV_REQUEST_CANCELLED:
  case LSIM_EV_LEASE_BOUND:
  case LSIM_EV_LEASE_RELEASED:
  case LSIM_EV_REQUEST_PREEMPTED:
  case LSIM_EV_PREFIX_HIT:
  case LSIM_EV_PREFIX_PUBLISHED:
  case LSIM_EV_PREFIX_CORRUPT:
    return 1;
  default:
    return 0;
  }
}

#define LSIM__F(code, ...) (l->dead = lsim_fail(eb, (code), __VA_ARGS__))

/* ---- requests --------------------------------------------------------------- */

static lsim_err lsim__req_event(lsim_ledger *l, const lsim_event *ev,
                                lsim__lreq *r, lsim_errbuf *eb) {
  long long s = (long long)ev->seq, id = (long long)ev->request;
  if (ev->tenant != r->tenant || ev->adapter != r->adapter)
    return LSIM__F(LSIM_E_LOG_IDENTITY,
                   "event seq %lld (%s): request %lld names tenant %d adapter "
                   "%d, enqueued as tenant %d adapter %d",
                   s, lsim_event_kind_name(ev->kind), id, ev->tenant,
                   ev->adapter, r->tenant, r->adapter);
  if (r->state == LSIM__R_CLOSED && ev->kind != LSIM_EV_KV_RELEASED &&
      ev->kind != LSIM_EV_LEASE_RELEASED &&
      !(ev->kind == LSIM_EV_COMPLETED_SERVICE_DEBITED &&
        r->closed_by == LSIM__C_CANCELLED))
    return LSIM__F(LSIM_E_LOG_AFTER_CLOSE,
                   "event seq %lld (%s): request %lld already closed", s,
                   lsim_event_kind_name(ev->kind), id);
  return 0;
}

/* ---- one event -------------------------------------------------------------- */

lsim_err lsim_ledger_event(lsim_ledger *l, const lsim_event *ev,
                           lsim_errbuf *eb) {
  if (l->dead)
    return lsim_fail(eb, l->dead, "ledger: audit already failed");
  long long s = (long long)ev->seq;
  const char *kn = lsim_event_kind_name(ev->kind);
  if (!kn)
    return LSIM__F(LSIM_E_LOG_KIND, "event seq %lld: unknown kind %d", s,
                   ev->kind);
  if (l->any_event && (ev->seq <= l->last_seq || ev->tick < l->last_tick))
    return LSIM__F(LSIM_E_LOG_ORDER,
                   "event seq %lld tick %lld (%s) after seq %lld tick %lld", s,
                   (long long)ev->tick, kn, (long long)l->last_seq,
                   (long long)l->last_tick);
  l->any_event = 1;
  l->last_seq = ev->seq;
  l->last_tick = ev->tick;
  l->st.events++;
  if (ev->attempt < 0 || ev->pages < 0 || ev->bytes < 0 || ev->value < 0)
    return LSIM__F(LSIM_E_LOG_FIELD,
                   "event seq %lld (%s): negative attempt, pages, bytes or "
                   "value", s, kn);
  if (ev->worker != LSIM_NONE && (ev->worker < 0 || ev->worker >= l->workers))
    return LSIM__F(LSIM_E_LOG_FIELD, "event seq %lld (%s): worker %d of %d",
                   s, kn, ev->worker, l->workers);
  if (ev->adapter != LSIM_NONE &&
      (ev->adapter < 0 || ev->adapter >= l->nadapters))
    return LSIM__F(LSIM_E_LOG_FIELD, "event seq %lld (%s): adapter %d of %d",
                   s, kn, ev->adapter, l->nadapters);
  if (!lsim__detail_ok(ev->kind, ev->detail))
    return LSIM__F(LSIM_E_LOG_FIELD, "event seq %lld (%s): detail '%s'", s,
                   kn, ev->detail ? ev->detail : "(null)");
  int wk = ev->worker, ad = ev->adapter;
  lsim__lworker *W = wk >= 0 ? &l->w[wk] : NULL;
  lsim__lload *L = wk >= 0 && ad >= 0 ? &l->ld[wk * l->nadapters + ad] : NULL;

  /* the pool charge of a hotswap shadow copy: KV kinds without a request */
  if ((ev->kind == LSIM_EV_KV_RESERVED || ev->kind == LSIM_EV_KV_RELEASED) &&
      ev->request == LSIM_NONE) {
    if (!L || !ev->detail || strcmp(ev->detail, "hotswap_shadow") != 0)
      return LSIM__F(LSIM_E_LOG_FIELD, "event seq %lld (%s): no request", s,
                     kn);
    if (ev->kind == LSIM_EV_KV_RESERVED) {
      if (!L->visible || L->published != ev->generation)
        return LSIM__F(LSIM_E_LOG_NOT_READY,
                       "event seq %lld: shadow charge of adapter %d under "
                       "generation %lld, visible %lld", s, ad,
                       (long long)ev->generation,
                       L->visible ? (long long)L->published : 0LL);
      L->shadow_charge++;
    } else {
      if (!L->shadow_charge)
        return LSIM__F(LSIM_E_LOG_KV_ORPHAN,
                       "event seq %lld: shadow charge of adapter %d released "
                       "twice", s, ad);
      L->shadow_charge--;
    }
    return 0;
  }

  /* requests: enqueue, rejection, then every request-scoped kind */
  lsim__lreq *r = NULL;
  if (ev->kind == LSIM_EV_QUEUE_ENQUEUED || ev->kind == LSIM_EV_ADMISSION_REJECTED ||
      lsim__request_kind(ev->kind)) {
    if (ev->request == LSIM_NONE)
      return LSIM__F(LSIM_E_LOG_FIELD, "event seq %lld (%s): no request", s,
                     kn);
    r = lsim__find(l, ev->request);
  }
  if (ev->kind == LSIM_EV_QUEUE_ENQUEUED) {
    if (r)
      return LSIM__F(LSIM_E_LOG_DUP_REQUEST,
                     "event seq %lld: request %lld enqueued twice", s,
                     (long long)ev->request);
    if (!W)
      return LSIM__F(LSIM_E_LOG_FIELD, "event seq %lld: enqueue without a "
                     "worker", s);
    if (lsim__add(l, ev->request, &r))
      return LSIM__F(LSIM_E_NOMEM, "out of memory");
    r->state = LSIM__R_WAITING;
    r->enqueued = 1;
    r->tenant = ev->tenant;
    r->adapter = ev->adapter;
    r->enqueue_tick = ev->tick;
    return 0;
  }
  if (ev->kind == LSIM_EV_ADMISSION_REJECTED) {
    if (!r) { /* refused before placement */
      if (lsim__add(l, ev->request, &r))
        return LSIM__F(LSIM_E_NOMEM, "out of memory");
      r->tenant = ev->tenant;
      r->adapter = ev->adapter;
    } else if (lsim__req_event(l, ev, r, eb)) {
      return l->dead;
    }
    r->state = LSIM__R_CLOSED;
    r->closed_by = LSIM__C_REJECTED;
    return 0;
  }
  if (lsim__request_kind(ev->kind)) {
    if (!r || !r->enqueued)
      return LSIM__F(LSIM_E_LOG_UNKNOWN_REQUEST,
                     "event seq %lld (%s): request %lld was never enqueued", s,
                     kn, (long long)ev->request);
    if (lsim__req_event(l, ev, r, eb))
      return l->dead;
    if (!W)
      return LSIM__F(LSIM_E_LOG_FIELD, "event seq %lld (%s): no worker", s,
                     kn);
  }

  switch (ev->kind) {
  /* ---- iterations and service ---- */
  case LSIM_EV_ITERATION_SELECTED:
    if (!W)
      return LSIM__F(LSIM_E_LOG_FIELD, "event seq %lld: no worker", s);
    if (W->busy)
      return LSIM__F(LSIM_E_LOG_ITERATION,
                     "event seq %lld: worker %d selects iteration %lld while "
                     "%lld is in flight", s, wk, (long long)ev->generation,
                     (long long)W->iter);
    W->busy = 1;
    W->iter = ev->generation;
    W->rows = ev->value;
    l->st.iterations++;
    return 0;
  case LSIM_EV_ITERATION_COMPLETED:
    if (!W)
      return LSIM__F(LSIM_E_LOG_FIELD, "event seq %lld: no worker", s);
    if (!W->busy || W->iter != ev->generation)
      return LSIM__F(LSIM_E_LOG_ITERATION,
                     "event seq %lld: worker %d completes iteration %lld, "
                     "in flight: %lld", s, wk, (long long)ev->generation,
                     W->busy ? (long long)W->iter : -1LL);
    W->busy = 0;
    W->done_ok = strcmp(ev->detail, "ok") == 0;
    if (!W->done_ok && ev->value != 0)
      return LSIM__F(LSIM_E_LOG_ITERATION,
                     "event seq %lld: failed iteration %lld completes %lld "
                     "rows", s, (long long)ev->generation,
                     (long long)ev->value);
    if (ev->value > W->rows)
      return LSIM__F(LSIM_E_LOG_ITERATION,
                     "event seq %lld: iteration %lld completes %lld rows of "
                     "%lld planned", s, (long long)ev->generation,
                     (long long)ev->value, (long long)W->rows);
    W->done_valid = 1;
    W->done_iter = ev->generation;
    W->done_rows = ev->value;
    W->done_tick = ev->tick;
    W->debited = 0;
    return 0;
  case LSIM_EV_COMPLETED_SERVICE_DEBITED:
    if (!W->done_valid || !W->done_ok || W->done_iter != ev->generation ||
        W->done_tick != ev->tick || W->busy)
      return LSIM__F(LSIM_E_LOG_PHANTOM_SERVICE,
                     "event seq %lld: service debited for request %lld under "
                     "iteration %lld, which worker %d did not just complete "
                     "ok", s, (long long)ev->request,
                     (long long)ev->generation, wk);
    if (!r->kv)
      return LSIM__F(LSIM_E_LOG_PHANTOM_SERVICE,
                     "event seq %lld: service debited for request %lld, which "
                     "holds no admission", s, (long long)ev->request);
    W->debited += ev->value;
    l->st.debits++;
    if (W->debited > W->done_rows)
      return LSIM__F(LSIM_E_LOG_SERVICE_EXCESS,
                     "event seq %lld: iteration %lld debits %lld units for "
                     "%lld completed rows", s, (long long)ev->generation,
                     (long long)W->debited, (long long)W->done_rows);
    return 0;

  /* ---- admission, KV ---- */
  case LSIM_EV_KV_RESERVED:
    if (L && (!L->visible || L->published != ev->generation ||
              ev->generation < 1))
      return LSIM__F(LSIM_E_LOG_NOT_READY,
                     "event seq %lld: request %lld admitted under generation "
                     "%lld of adapter %d on worker %d (visible: %lld)", s,
                     (long long)ev->request, (long long)ev->generation, ad, wk,
                     L->visible ? (long long)L->published : 0LL);
    r->kv = 1;
    r->admitted = 1;
    return 0;
  case LSIM_EV_KV_RELEASED:
  case LSIM_EV_REQUEST_PREEMPTED:
    r->px_open = 0; /* leaving releases its prefix references */
    if (!r->kv)
      return LSIM__F(LSIM_E_LOG_KV_ORPHAN,
                     "event seq %lld (%s): request %lld holds no KV", s, kn,
                     (long long)ev->request);
    r->kv = 0;
    return 0;
  case LSIM_EV_REQUEST_CANCELLED:
    if (ev->detail && strcmp(ev->detail, "during_load") == 0 && L &&
        L->open) {
      /* its KV share of the open load transaction goes back */
      if (ev->pages > L->pages)
        return LSIM__F(LSIM_E_LOG_ROLLBACK,
                       "event seq %lld: cancelled request %lld returns %lld "
                       "pages of a load holding %lld", s,
                       (long long)ev->request, (long long)ev->pages,
                       (long long)L->pages);
      L->pages -= ev->pages;
    }
    r->kv = 0;
    r->px_open = 0;
    r->state = LSIM__R_CLOSED;
    r->closed_by = LSIM__C_CANCELLED;
    return 0;
  case LSIM_EV_REQUEST_FINISHED:
    if (!r->admitted)
      return LSIM__F(LSIM_E_LOG_KV_ORPHAN,
                     "event seq %lld: request %lld finishes without an "
                     "admission", s, (long long)ev->request);
    r->state = LSIM__R_CLOSED;
    r->closed_by = LSIM__C_FINISHED;
    r->finish_tick = ev->tick;
    r->finish_value = ev->value;
    return 0;

  /* ---- the prefix cache (docs/PREFIX.md) ---- */
  case LSIM_EV_PREFIX_HIT:
    /* one lookup per admission, by a request holding its KV; hit blocks
    ** within the full blocks looked up; "hit" exactly when one matched */
    if (!r->kv || r->px_open || ev->generation < 0 ||
        ev->generation > ev->attempt || ev->attempt < 1 ||
        (ev->generation > 0) != (strcmp(ev->detail, "hit") == 0))
      return LSIM__F(LSIM_E_LOG_PREFIX,
                     "event seq %lld: request %lld prefix lookup of %lld "
                     "blocks with %lld hits (%s, %s)", s,
                     (long long)ev->request, (long long)ev->attempt,
                     (long long)ev->generation,
                     r->kv ? "admitted" : "no admission",
                     r->px_open ? "a lookup already open" : "first lookup");
    r->px_open = 1;
    r->px_pub = 0;
    r->px_hit = ev->generation;
    r->px_full = ev->attempt;
    return 0;
  case LSIM_EV_PREFIX_CORRUPT:
    if (!r->px_open || r->px_pub || ev->generation < 1 ||
        ev->generation > r->px_hit)
      return LSIM__F(LSIM_E_LOG_PREFIX,
                     "event seq %lld: request %lld reports %lld corrupt "
                     "blocks of a %lld-block hit", s, (long long)ev->request,
                     (long long)ev->generation,
                     r->px_open ? (long long)r->px_hit : 0LL);
    return 0;
  case LSIM_EV_PREFIX_PUBLISHED:
    /* once per admission, after its lookup, never past its full blocks */
    if (!r->px_open || r->px_pub || ev->generation < 0 ||
        ev->generation + ev->attempt < 1 ||
        r->px_hit + ev->generation + ev->attempt > r->px_full)
      return LSIM__F(LSIM_E_LOG_PREFIX,
                     "event seq %lld: request %lld publishes %lld + %lld "
                     "shared blocks (lookup %s, %lld of %lld hit)", s,
                     (long long)ev->request, (long long)ev->generation,
                     (long long)ev->attempt,
                     r->px_open ? (r->px_pub ? "already published" : "open")
                                : "missing",
                     (long long)r->px_hit, (long long)r->px_full);
    r->px_pub = 1;
    W->px_blocks += ev->generation;
    return 0;
  case LSIM_EV_PREFIX_EVICTED:
    if (!W || ev->request != LSIM_NONE || ev->generation < 1 ||
        ev->generation > W->px_blocks)
      return LSIM__F(LSIM_E_LOG_PREFIX,
                     "event seq %lld: %lld prefix blocks evicted on worker %d "
                     "holding %lld", s, (long long)ev->generation, wk,
                     W ? (long long)W->px_blocks : 0LL);
    W->px_blocks -= ev->generation;
    return 0;

  /* ---- leases and slots ---- */
  case LSIM_EV_LEASE_BOUND: {
    if (r->leased)
      return LSIM__F(LSIM_E_LOG_LEASE,
                     "event seq %lld: request %lld binds a second lease", s,
                     (long long)ev->request);
    int64_t h[6] = {ev->worker, ev->generation, ev->attempt, ev->pages,
                    ev->bytes, ev->value};
    memcpy(r->lease, h, sizeof h);
    r->leased = 1;
    l->st.leases++;
    lsim__lslot *p = lsim__slot(l, wk, ev->pages, 1);
    if (!p)
      return LSIM__F(LSIM_E_NOMEM, "out of memory");
    if (p->leases && p->lease_gen != ev->value)
      return LSIM__F(LSIM_E_LOG_LEASE,
                     "event seq %lld: lease on slot %lld generation %lld while "
                     "leases hold generation %lld", s, (long long)ev->pages,
                     (long long)ev->value, (long long)p->lease_gen);
    p->leases++;
    p->lease_gen = ev->value;
    return 0;
  }
  case LSIM_EV_LEASE_RELEASED: {
    int64_t h[6] = {ev->worker, ev->generation, ev->attempt, ev->pages,
                    ev->bytes, ev->value};
    if (!r->leased || memcmp(h, r->lease, sizeof h) != 0)
      return LSIM__F(LSIM_E_LOG_LEASE,
                     "event seq %lld: request %lld releases a lease it was "
                     "not bound with", s, (long long)ev->request);
    r->leased = 0;
    lsim__lslot *p = lsim__slot(l, wk, ev->pages, 0);
    if (p && p->leases > 0)
      p->leases--;
    return 0;
  }
  case LSIM_EV_SLOT_RETIRING: {
    lsim__lslot *p = lsim__slot(l, wk, ev->pages, 1);
    if (!p)
      return LSIM__F(LSIM_E_NOMEM, "out of memory");
    p->retiring = 1;
    p->retire_ptr = ev->bytes;
    p->retire_slot_gen = ev->value;
    return 0;
  }
  case LSIM_EV_SLOT_RECLAIMED: {
    lsim__lslot *p = W ? lsim__slot(l, wk, ev->pages, 0) : NULL;
    if (!p || !p->retiring)
      return LSIM__F(LSIM_E_LOG_RECLAIM,
                     "event seq %lld: slot %lld reclaimed without retiring", s,
                     (long long)ev->pages);
    if (p->leases > 0 && p->lease_gen == p->retire_slot_gen)
      return LSIM__F(LSIM_E_LOG_RECLAIM,
                     "event seq %lld: slot %lld reclaimed while %d lease(s) "
                     "name it", s, (long long)ev->pages, p->leases);
    if (ev->bytes <= p->retire_ptr || ev->value <= p->retire_slot_gen)
      return LSIM__F(LSIM_E_LOG_RECLAIM,
                     "event seq %lld: slot %lld reclaimed under generations "
                     "(%lld, %lld), not above (%lld, %lld)", s,
                     (long long)ev->pages, (long long)ev->bytes,
                     (long long)ev->value, (long long)p->retire_ptr,
                     (long long)p->retire_slot_gen);
    p->retiring = 0;
    return 0;
  }

  /* ---- hotswap ---- */
  case LSIM_EV_HOTSWAP_STAGED:
    if (!L)
      return LSIM__F(LSIM_E_LOG_FIELD, "event seq %lld: no worker/adapter", s);
    L->hs_staged = 1;
    L->hs_validated = 0;
    L->hs_slot = ev->pages;
    return 0;
  case LSIM_EV_HOTSWAP_VALIDATED:
    if (!L || !L->hs_staged || L->hs_slot != ev->pages)
      return LSIM__F(LSIM_E_LOG_HOTSWAP_ORDER,
                     "event seq %lld: hotswap validated without a staged copy "
                     "in slot %lld", s, (long long)ev->pages);
    L->hs_validated = 1;
    return 0;
  case LSIM_EV_HOTSWAP_ABORTED:
    if (L) {
      L->hs_staged = 0;
      L->hs_validated = 0;
    }
    return 0;
  case LSIM_EV_HOTSWAP_PUBLISHED: {
    if (!L || !W)
      return LSIM__F(LSIM_E_LOG_FIELD, "event seq %lld: no worker/adapter", s);
    const char *d = ev->detail ? ev->detail : "";
    int need_valid = strcmp(d, "shadow") == 0 || strcmp(d, "new_alias") == 0;
    int need_stage = need_valid || strcmp(d, "drain_then_overwrite") == 0;
    if ((need_stage && !L->hs_staged) || (need_valid && !L->hs_validated) ||
        (need_stage && L->hs_slot != ev->pages))
      return LSIM__F(LSIM_E_LOG_HOTSWAP_ORDER,
                     "event seq %lld: hotswap (%s) published before its copy "
                     "was staged and validated", s, d);
    /* a compare-and-publish bumps the catalog generation; a cold take
    ** (the worker never mapped the adapter) may not, but never lowers it */
    int cold = strcmp(d, "cold") == 0;
    if (ev->generation < W->catalog || (!cold && ev->generation == W->catalog))
      return LSIM__F(LSIM_E_LOG_CATALOG,
                     "event seq %lld: catalog generation %lld after %lld on "
                     "worker %d", s, (long long)ev->generation,
                     (long long)W->catalog, wk);
    W->catalog = ev->generation;
    L->hs_staged = L->hs_validated = 0;
    l->st.hotswaps++;
    return 0;
  }

  /* ---- loads, publication, recovery ---- */
  case LSIM_EV_ADAPTER_LOAD_STARTED: {
    if (!L)
      return LSIM__F(LSIM_E_LOG_FIELD, "event seq %lld: no worker/adapter", s);
    int restore = ev->detail && strcmp(ev->detail, "restore") == 0;
    if (L->open)
      return LSIM__F(LSIM_E_LOG_LOAD_ORPHAN,
                     "event seq %lld: second load of adapter %d on worker %d "
                     "while one is open", s, ad, wk);
    if (L->failed_pending)
      return LSIM__F(LSIM_E_LOG_ROLLBACK,
                     "event seq %lld: load of adapter %d starts before the "
                     "failed attempt was rolled back", s, ad);
    /* a sequence restarts at 1 after publication, or after its last
    ** allowed attempt failed (unknown limit: after any failure) */
    int want = restore ? 1 : L->last_failed + 1;
    int restart = !restore && ev->attempt == 1 && L->last_failed > 0 &&
                  (l->max_attempts <= 0 || L->last_failed >= l->max_attempts);
    if (ev->attempt != want && !restart)
      return LSIM__F(LSIM_E_LOG_ATTEMPT,
                     "event seq %lld: load of adapter %d on worker %d is "
                     "attempt %d, expected %d", s, ad, wk, ev->attempt, want);
    /* every attempt carries a generation never used before on this
    ** worker (a failed attempt's generation is dead, never reused) */
    if (ev->generation <= L->used || ev->generation <= L->published)
      return LSIM__F(LSIM_E_LOG_GENERATION,
                     "event seq %lld: load of adapter %d carries generation "
                     "%lld, already used up to %lld", s, ad,
                     (long long)ev->generation, (long long)L->used);
    L->used = ev->generation;
    if (ev->request != LSIM_NONE) {
      lsim__lreq *q = lsim__find(l, ev->request);
      if (!q || !q->enqueued)
        return LSIM__F(LSIM_E_LOG_UNKNOWN_REQUEST,
                       "event seq %lld: load opened for request %lld, never "
                       "enqueued", s, (long long)ev->request);
      if (q->adapter != ad)
        return LSIM__F(LSIM_E_LOG_IDENTITY,
                       "event seq %lld: load of adapter %d opened for request "
                       "%lld of adapter %d", s, ad, (long long)ev->request,
                       q->adapter);
    }
    L->open = 1;
    L->copied = L->validated = 0;
    L->restore = restore;
    L->attempt = ev->attempt;
    L->gen = ev->generation;
    L->pages = ev->pages;
    l->st.loads++;
    return 0;
  }
  case LSIM_EV_ADAPTER_HOST_HIT:
  case LSIM_EV_ADAPTER_DISK_READ:
    /* the host tier says where the open load's bytes come from */
    if (!L || !L->open || L->attempt != ev->attempt || L->gen != ev->generation ||
        L->copied)
      return LSIM__F(LSIM_E_LOG_LOAD_ORPHAN,
                     "event seq %lld (%s): adapter %d on worker %d has no "
                     "starting load of attempt %d generation %lld", s, kn, ad,
                     wk, ev->attempt, (long long)ev->generation);
    return 0;
  case LSIM_EV_ADAPTER_LOAD_COMPLETED:
  case LSIM_EV_ADAPTER_VALIDATED:
  case LSIM_EV_ADAPTER_LOAD_FAILED:
    if (!L || !L->open || L->attempt != ev->attempt || L->gen != ev->generation)
      return LSIM__F(LSIM_E_LOG_LOAD_ORPHAN,
                     "event seq %lld (%s): adapter %d on worker %d has no open "
                     "load of attempt %d generation %lld", s, kn, ad, wk,
                     ev->attempt, (long long)ev->generation);
    if (ev->kind == LSIM_EV_ADAPTER_LOAD_COMPLETED) {
      L->copied = 1;
    } else if (ev->kind == LSIM_EV_ADAPTER_VALIDATED) {
      if (!L->copied)
        return LSIM__F(LSIM_E_LOG_PUBLISH_ORDER,
                       "event seq %lld: adapter %d validated before its copy "
                       "completed", s, ad);
      L->validated = 1;
    } else {
      if (ev->pages != L->pages)
        return LSIM__F(LSIM_E_LOG_ROLLBACK,
                       "event seq %lld: failed load of adapter %d holds %lld "
                       "pages, its transaction reserved %lld", s, ad,
                       (long long)ev->pages, (long long)L->pages);
      L->open = 0;
      L->failed_pending = 1;
      L->failed_pages = ev->pages;
      L->failed_gen = ev->generation;
      if (!L->restore)
        L->last_failed = ev->attempt;
      l->st.failures++;
    }
    return 0;
  case LSIM_EV_LOAD_ROLLED_BACK:
    if (!L || !L->failed_pending)
      return LSIM__F(LSIM_E_LOG_ROLLBACK,
                     "event seq %lld: rollback of adapter %d on worker %d "
                     "without a failed load", s, ad, wk);
    if (ev->pages != L->failed_pages || ev->generation != L->failed_gen)
      return LSIM__F(LSIM_E_LOG_ROLLBACK,
                     "event seq %lld: rollback returns %lld pages of "
                     "generation %lld; the failed attempt held %lld of %lld",
                     s, (long long)ev->pages, (long long)ev->generation,
                     (long long)L->failed_pages, (long long)L->failed_gen);
    L->failed_pending = 0;
    l->st.rollbacks++;
    return 0;
  case LSIM_EV_ADAPTER_GENERATION_PUBLISHED:
    if (!L || !L->open)
      return LSIM__F(LSIM_E_LOG_LOAD_ORPHAN,
                     "event seq %lld: adapter %d published on worker %d "
                     "without an open load", s, ad, wk);
    if (!L->validated)
      return LSIM__F(LSIM_E_LOG_PUBLISH_ORDER,
                     "event seq %lld: adapter %d published before its copy "
                     "was validated", s, ad);
    if (ev->generation != L->gen)
      return LSIM__F(LSIM_E_LOG_GENERATION,
                     "event seq %lld: adapter %d publishes generation %lld, "
                     "its load carries %lld", s, ad, (long long)ev->generation,
                     (long long)L->gen);
    L->open = 0;
    L->published = ev->generation;
    L->visible = 1;
    L->last_failed = 0;
    return 0;
  case LSIM_EV_ADAPTER_EVICTED:
    if (!L || !L->visible || ev->generation != L->published)
      return LSIM__F(LSIM_E_LOG_GENERATION,
                     "event seq %lld: eviction of adapter %d generation %lld, "
                     "visible: %lld", s, ad, (long long)ev->generation,
                     L && L->visible ? (long long)L->published : 0LL);
    L->visible = 0;
    return 0;
  case LSIM_EV_ADAPTER_RETIRED:
    if (!L || ev->generation != L->published)
      return LSIM__F(LSIM_E_LOG_GENERATION,
                     "event seq %lld: retirement of adapter %d generation "
                     "%lld, last published %lld", s, ad,
                     (long long)ev->generation,
                     L ? (long long)L->published : 0LL);
    return 0;
  case LSIM_EV_ADAPTER_RESTORING:
    if (L)
      L->visible = 0;
    return 0;
  default:
    return 0;
  }
}

/* ---- request records ---------------------------------------------------------- */

lsim_err lsim_ledger_record(lsim_ledger *l, const lsim_request_record *rec,
                            lsim_errbuf *eb) {
  if (l->dead)
    return lsim_fail(eb, l->dead, "ledger: audit already failed");
  long long id = (long long)rec->request;
  lsim__lreq *r = lsim__find(l, rec->request);
  if (!r)
    return LSIM__F(LSIM_E_LOG_UNKNOWN_REQUEST,
                   "request %lld: a record but no event", id);
  if (r->recorded)
    return LSIM__F(LSIM_E_LOG_RECORD, "request %lld: two records", id);
  r->recorded = 1;
  l->st.records++;
  static const char *const outcomes[] = {"ok", "rejected", "cancelled",
                                         "unfinished", NULL};
  if (!rec->outcome || !lsim__is(rec->outcome, outcomes))
    return LSIM__F(LSIM_E_LOG_FIELD, "request %lld: outcome '%s'", id,
                   rec->outcome ? rec->outcome : "(null)");
  if (rec->tenant != r->tenant || rec->adapter != r->adapter)
    return LSIM__F(LSIM_E_LOG_IDENTITY,
                   "request %lld: record names tenant %d adapter %d, the log "
                   "tenant %d adapter %d", id, rec->tenant, rec->adapter,
                   r->tenant, r->adapter);
  if (r->enqueued && rec->arrival_tick != r->enqueue_tick)
    return LSIM__F(LSIM_E_LOG_AGE_RESET,
                   "request %lld: record arrival %lld, enqueued at %lld", id,
                   (long long)rec->arrival_tick, (long long)r->enqueue_tick);
  if (rec->prompt_tokens < 0 || rec->output_tokens < 0 ||
      rec->loads_waited < 0)
    return LSIM__F(LSIM_E_LOG_FIELD, "request %lld: negative count", id);
  int want = strcmp(rec->outcome, "ok") == 0          ? LSIM__C_FINISHED
             : strcmp(rec->outcome, "rejected") == 0  ? LSIM__C_REJECTED
             : strcmp(rec->outcome, "cancelled") == 0 ? LSIM__C_CANCELLED
                                                      : LSIM__C_NONE;
  if (want != r->closed_by)
    return LSIM__F(LSIM_E_LOG_RECORD,
                   "request %lld: outcome '%s' disagrees with its events", id,
                   rec->outcome);
  if (want == LSIM__C_FINISHED &&
      (rec->output_tokens != r->finish_value ||
       rec->finish_tick != r->finish_tick))
    return LSIM__F(LSIM_E_LOG_RECORD,
                   "request %lld: record %d tokens at %lld, request_finished "
                   "%lld at %lld", id, rec->output_tokens,
                   (long long)rec->finish_tick, (long long)r->finish_value,
                   (long long)r->finish_tick);
  if (rec->first_token_tick != LSIM_NONE &&
      (rec->first_token_tick < rec->arrival_tick ||
       rec->first_token_tick > rec->finish_tick))
    return LSIM__F(LSIM_E_LOG_RECORD,
                   "request %lld: first token at %lld outside [%lld, %lld]",
                   id, (long long)rec->first_token_tick,
                   (long long)rec->arrival_tick, (long long)rec->finish_tick);
  if (rec->finish_tick < rec->arrival_tick)
    return LSIM__F(LSIM_E_LOG_RECORD, "request %lld: finishes before it "
                   "arrives", id);
  return 0;
}

lsim_err lsim_ledger_end(lsim_ledger *l, lsim_errbuf *eb) {
  if (l->dead)
    return lsim_fail(eb, l->dead, "ledger: audit already failed");
  if (!l->st.records)
    return 0;
  for (int64_t i = 0; i < l->nreq; i++)
    if (!l->req[i].recorded)
      return LSIM__F(LSIM_E_LOG_RECORD, "request %lld: no record",
                     (long long)l->req[i].id);
  return 0;
}
