/*
** stage.c: the residency ledger (stage.h).
*/
#include "stage.h"

#include <stdlib.h>
#include <string.h>

lsim_err lsim_stage_open(lsim_stage_ledger *L, const lsim_backend_cfg *cfg,
                         int keep_bytes, lsim_errbuf *eb) {
  memset(L, 0, sizeof *L);
  if (cfg->pool_pages <= 0)
    return 0;
  if (cfg->workers < 1 || cfg->objects < 1 || cfg->page_bytes < 1 ||
      cfg->nadapters < 1 || cfg->nadapters > cfg->objects ||
      !cfg->adapter_rank)
    return lsim_fail(eb, LSIM_E_BACKEND,
                     "backend: a residency geometry needs workers, objects, "
                     "page_bytes and the adapters' ranks");
  size_t np = (size_t)cfg->workers * (size_t)cfg->pool_pages;
  size_t no = (size_t)cfg->workers * (size_t)cfg->objects;
  L->pg = calloc(np, sizeof *L->pg);
  L->ob = calloc(no, sizeof *L->ob);
  L->pend = malloc(no * sizeof *L->pend);
  L->npend = calloc((size_t)cfg->workers, sizeof *L->npend);
  if (!L->pg || !L->ob || !L->pend || !L->npend) {
    lsim_stage_close(L);
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory for the page ledger");
  }
  for (size_t i = 0; i < np; i++)
    L->pg[i].owner = -1;
  L->on = 1;
  L->workers = cfg->workers;
  L->objects = cfg->objects;
  L->pool_pages = cfg->pool_pages;
  L->page_bytes = cfg->page_bytes;
  L->keep_bytes = keep_bytes;
  return 0;
}

void lsim_stage_close(lsim_stage_ledger *L) {
  if (L->pg)
    for (size_t i = 0; i < (size_t)L->workers * (size_t)L->pool_pages; i++)
      free(L->pg[i].bytes);
  if (L->ob)
    for (size_t i = 0; i < (size_t)L->workers * (size_t)L->objects; i++)
      free(L->ob[i].page);
  free(L->pg);
  free(L->ob);
  free(L->pend);
  free(L->npend);
  memset(L, 0, sizeof *L);
}

static lsim_stage_page *lsim__pg(const lsim_stage_ledger *L, int w,
                                 int64_t p) {
  return &L->pg[(size_t)w * (size_t)L->pool_pages + (size_t)p];
}

static lsim_stage_obj *lsim__ob(const lsim_stage_ledger *L, int w, int o) {
  return &L->ob[(size_t)w * (size_t)L->objects + (size_t)o];
}

static const char *lsim__st_name(int st) {
  return st == LSIM_STAGE_STAGED      ? "staged"
         : st == LSIM_STAGE_PUBLISHED ? "published"
                                      : "not held";
}

/* The event's worker, object and pages are in range. */
static lsim_err lsim__ev_ok(const lsim_stage_ledger *L,
                            const lsim_res_page_ev *ev, int kv,
                            lsim_errbuf *eb) {
  if (!L->on)
    return lsim_fail(eb, LSIM_E_STAGE_ORDER,
                     "backend: a residency event, but the backend was opened "
                     "without the pool geometry");
  if (ev->worker < 0 || ev->worker >= L->workers ||
      (!kv && (ev->object < 0 || ev->object >= L->objects)) ||
      (kv && ev->object < 0) || ev->npages < 0 ||
      (ev->npages > 0 && !ev->page))
    return lsim_fail(eb, LSIM_E_STAGE_ORDER,
                     "backend: residency event for worker %d object %d out of "
                     "range", ev->worker, ev->object);
  for (int64_t j = 0; j < ev->npages; j++)
    if (ev->page[j] < 0 || ev->page[j] >= L->pool_pages)
      return lsim_fail(eb, LSIM_E_STAGE_ORDER,
                       "backend: worker %d: page %lld outside the pool of "
                       "%lld pages", ev->worker, (long long)ev->page[j],
                       (long long)L->pool_pages);
  return 0;
}

/* The event names exactly the object's pages. */
static int lsim__same_pages(const lsim_stage_obj *o,
                            const lsim_res_page_ev *ev) {
  if (o->npages != ev->npages)
    return 0;
  for (int64_t j = 0; j < ev->npages; j++)
    if (o->page[j] != ev->page[j])
      return 0;
  return 1;
}

lsim_err lsim_stage_on_stage(lsim_stage_ledger *L, const lsim_res_page_ev *ev,
                             lsim_errbuf *eb) {
  lsim_err rc = lsim__ev_ok(L, ev, 0, eb);
  if (rc)
    return rc;
  int w = ev->worker;
  lsim_stage_obj *o = lsim__ob(L, w, ev->object);
  if (o->st != LSIM_STAGE_NONE)
    return lsim_fail(eb, LSIM_E_STAGE_ORDER,
                     "backend: worker %d: stage of object %d generation %lld "
                     "while it is %s at generation %lld", w, ev->object,
                     (long long)ev->generation, lsim__st_name(o->st),
                     (long long)o->gen);
  if (ev->npages < 1)
    return lsim_fail(eb, LSIM_E_STAGE_ORDER,
                     "backend: worker %d: stage of object %d names no page", w,
                     ev->object);
  for (int64_t j = 0; j < ev->npages; j++) {
    const lsim_stage_page *p = lsim__pg(L, w, ev->page[j]);
    if (p->st != LSIM_SLOT_FREE)
      return lsim_fail(eb, LSIM_E_STAGE_ORDER,
                       "backend: worker %d: stage of object %d into page %lld, "
                       "which still holds object %d generation %lld "
                       "(never retired or released)", w, ev->object,
                       (long long)ev->page[j], p->owner, (long long)p->gen);
  }
  int64_t *pl = realloc(o->page, (size_t)ev->npages * sizeof *pl);
  if (!pl)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory staging");
  o->page = pl;
  memcpy(o->page, ev->page, (size_t)ev->npages * sizeof *pl);
  o->npages = ev->npages;
  o->st = LSIM_STAGE_STAGED;
  o->gen = ev->generation;
  o->version = ev->version;
  o->launched = o->executed = 0;
  o->pending = 0;
  o->nbytes = 0;
  for (int64_t j = 0; j < ev->npages; j++) {
    lsim_stage_page *p = lsim__pg(L, w, ev->page[j]);
    p->st = LSIM_SLOT_RESERVED;
    p->owner = ev->object;
    p->gen = ev->generation;
  }
  L->c.stages++;
  return 0;
}

lsim_err lsim_stage_on_publish(lsim_stage_ledger *L,
                               const lsim_res_page_ev *ev, lsim_errbuf *eb) {
  lsim_err rc = lsim__ev_ok(L, ev, 0, eb);
  if (rc)
    return rc;
  int w = ev->worker;
  lsim_stage_obj *o = lsim__ob(L, w, ev->object);
  if (o->st != LSIM_STAGE_STAGED || o->gen != ev->generation ||
      !lsim__same_pages(o, ev))
    return lsim_fail(eb, LSIM_E_STAGE_ORDER,
                     "backend: worker %d: publication of object %d generation "
                     "%lld, but the backend has it %s at generation %lld%s", w,
                     ev->object, (long long)ev->generation,
                     lsim__st_name(o->st), (long long)o->gen,
                     o->st == LSIM_STAGE_STAGED && o->gen == ev->generation
                         ? " at other pages"
                         : "");
  o->st = LSIM_STAGE_PUBLISHED;
  for (int64_t j = 0; j < o->npages; j++)
    lsim__pg(L, w, o->page[j])->st = LSIM_SLOT_ADAPTER;
  L->c.publishes++;
  return 0;
}

static void lsim__free_obj(lsim_stage_ledger *L, int w, lsim_stage_obj *o) {
  for (int64_t j = 0; j < o->npages; j++) {
    lsim_stage_page *p = lsim__pg(L, w, o->page[j]);
    free(p->bytes);
    p->bytes = NULL;
    p->nbytes = 0;
    p->st = LSIM_SLOT_FREE;
    p->owner = -1;
    p->gen = 0;
  }
  o->st = LSIM_STAGE_NONE;
  o->npages = 0;
  o->nbytes = 0;
  o->pending = 0;
}

lsim_err lsim_stage_on_retire(lsim_stage_ledger *L, const lsim_res_page_ev *ev,
                              lsim_errbuf *eb) {
  lsim_err rc = lsim__ev_ok(L, ev, 0, eb);
  if (rc)
    return rc;
  int w = ev->worker;
  lsim_stage_obj *o = lsim__ob(L, w, ev->object);
  int want = ev->published ? LSIM_STAGE_PUBLISHED : LSIM_STAGE_STAGED;
  if (ev->published && o->st == LSIM_STAGE_STAGED)
    return lsim_fail(eb, LSIM_E_STAGE_UNPUBLISHED,
                     "backend: worker %d: object %d generation %lld is "
                     "retired as published, but the backend only staged it "
                     "(the engine never published it here)", w, ev->object,
                     (long long)o->gen);
  if (o->st != want || o->gen != ev->generation || !lsim__same_pages(o, ev))
    return lsim_fail(eb, LSIM_E_STAGE_ORDER,
                     "backend: worker %d: %s of object %d generation %lld, "
                     "but the backend has it %s at generation %lld", w,
                     ev->published ? "retirement" : "rollback", ev->object,
                     (long long)ev->generation, lsim__st_name(o->st),
                     (long long)o->gen);
  if (ev->published &&
      (o->pending || o->launched != ev->fence || o->executed != ev->fence))
    return lsim_fail(eb, LSIM_E_STAGE_FENCE,
                     "backend: worker %d: object %d generation %lld retired "
                     "at fence %lld (launches that named it), but %lld were "
                     "announced and %lld executed", w, ev->object,
                     (long long)ev->generation, (long long)ev->fence,
                     (long long)o->launched, (long long)o->executed);
  lsim__free_obj(L, w, o);
  if (ev->published)
    L->c.retires++;
  else
    L->c.aborts++;
  return 0;
}

lsim_err lsim_stage_on_launch(lsim_stage_ledger *L, const lsim_res_page_ev *ev,
                              lsim_errbuf *eb) {
  lsim_err rc = lsim__ev_ok(L, ev, 0, eb);
  if (rc)
    return rc;
  int w = ev->worker;
  lsim_stage_obj *o = lsim__ob(L, w, ev->object);
  if (o->st != LSIM_STAGE_PUBLISHED || o->gen != ev->generation)
    return lsim_fail(eb, LSIM_E_STAGE_LAUNCH,
                     "backend: worker %d: a launch names object %d generation "
                     "%lld, which the backend has %s at generation %lld", w,
                     ev->object, (long long)ev->generation,
                     lsim__st_name(o->st), (long long)o->gen);
  o->launched++;
  if (!o->pending) {
    o->pending = 1;
    L->pend[(size_t)w * (size_t)L->objects + (size_t)L->npend[w]++] =
        ev->object;
  }
  L->c.launches++;
  return 0;
}

lsim_err lsim_stage_on_kv(lsim_stage_ledger *L, const lsim_res_page_ev *ev,
                          lsim_errbuf *eb) {
  lsim_err rc = lsim__ev_ok(L, ev, 1, eb);
  if (rc)
    return rc;
  int w = ev->worker, alloc = ev->op == LSIM_RES_KV_ALLOC;
  if (!alloc && ev->op != LSIM_RES_KV_RELEASE)
    return lsim_fail(eb, LSIM_E_STAGE_ORDER, "backend: unknown KV op %d",
                     ev->op);
  for (int64_t j = 0; j < ev->npages; j++) {
    const lsim_stage_page *p = lsim__pg(L, w, ev->page[j]);
    if (alloc ? p->st != LSIM_SLOT_FREE
              : (p->st != LSIM_SLOT_KV || p->owner != ev->object))
      return lsim_fail(eb, LSIM_E_STAGE_ORDER,
                       "backend: worker %d: KV %s of page %lld for KV object "
                       "%d, which the backend has %s by %d", w,
                       alloc ? "alloc" : "release", (long long)ev->page[j],
                       ev->object,
                       p->st == LSIM_SLOT_FREE ? "free" : "held", p->owner);
  }
  for (int64_t j = 0; j < ev->npages; j++) {
    lsim_stage_page *p = lsim__pg(L, w, ev->page[j]);
    p->st = alloc ? LSIM_SLOT_KV : LSIM_SLOT_FREE;
    p->owner = alloc ? ev->object : -1;
    p->gen = alloc ? ev->generation : 0;
  }
  if (alloc)
    L->c.kv_allocs += ev->npages;
  else
    L->c.kv_releases += ev->npages;
  return 0;
}

lsim_err lsim_stage_write(lsim_stage_ledger *L, int w, int obj,
                          const void *bytes, int64_t len, lsim_errbuf *eb) {
  lsim_stage_obj *o = lsim__ob(L, w, obj);
  if (!L->keep_bytes || o->st != LSIM_STAGE_STAGED)
    return lsim_fail(eb, LSIM_E_STAGE_ORDER,
                     "backend: worker %d: bytes for object %d, which is not "
                     "being staged", w, obj);
  if (len > o->npages * L->page_bytes)
    return lsim_fail(eb, LSIM_E_STAGE_FIT,
                     "backend: worker %d: object %d: %lld bytes do not fit "
                     "its %lld pages of %lld bytes", w, obj, (long long)len,
                     (long long)o->npages, (long long)L->page_bytes);
  const unsigned char *b = bytes;
  for (int64_t j = 0, at = 0; j < o->npages && at < len; j++) {
    int64_t n = len - at < L->page_bytes ? len - at : L->page_bytes;
    lsim_stage_page *p = lsim__pg(L, w, o->page[j]);
    unsigned char *nb = realloc(p->bytes, (size_t)n);
    if (!nb)
      return lsim_fail(eb, LSIM_E_NOMEM, "out of memory staging bytes");
    memcpy(nb, b + at, (size_t)n);
    p->bytes = nb;
    p->nbytes = (int32_t)n;
    at += n;
  }
  o->nbytes = len;
  L->c.staged_bytes += len;
  return 0;
}

lsim_err lsim_stage_read(const lsim_stage_ledger *L, int w, int obj, void *buf,
                         int64_t len, lsim_errbuf *eb) {
  const lsim_stage_obj *o = lsim__ob(L, w, obj);
  if (len > o->nbytes)
    return lsim_fail(eb, LSIM_E_STAGE_FIT,
                     "backend: worker %d: object %d holds %lld bytes, %lld "
                     "asked", w, obj, (long long)o->nbytes, (long long)len);
  unsigned char *b = buf;
  for (int64_t j = 0, at = 0; j < o->npages && at < len; j++) {
    const lsim_stage_page *p = lsim__pg(L, w, o->page[j]);
    int64_t n = len - at < p->nbytes ? len - at : p->nbytes;
    memcpy(b + at, p->bytes, (size_t)n);
    at += n;
  }
  return 0;
}

lsim_err lsim_stage_check_run(lsim_stage_ledger *L, const lsim_plan *plan,
                              lsim_errbuf *eb) {
  if (!L->on)
    return 0;
  int w = plan->worker;
  if (w < 0 || w >= L->workers)
    return lsim_fail(eb, LSIM_E_STAGE_LAUNCH,
                     "backend: a plan for worker %d of %d", w, L->workers);
  for (int i = 0; i < plan->n; i++) {
    const lsim_plan_entry *e = &plan->e[i];
    if (e->adapter < 0)
      continue;
    if (e->adapter >= L->objects)
      return lsim_fail(eb, LSIM_E_STAGE_LAUNCH,
                       "backend: plan row %d names adapter %d of %d", i,
                       e->adapter, L->objects);
    const lsim_stage_obj *o = lsim__ob(L, w, e->adapter);
    if (o->st != LSIM_STAGE_PUBLISHED || o->gen != lsim_plan_generation(plan, i))
      return lsim_fail(eb, LSIM_E_STAGE_LAUNCH,
                       "backend: iteration %lld on worker %d names adapter %d "
                       "generation %lld, which the engine has not published "
                       "here (the backend has it %s at generation %lld)",
                       (long long)plan->iter, w, e->adapter,
                       (long long)lsim_plan_generation(plan, i), lsim__st_name(o->st),
                       (long long)o->gen);
    for (int64_t j = 0; j < o->npages; j++) {
      const lsim_stage_page *p = lsim__pg(L, w, o->page[j]);
      if (p->st != LSIM_SLOT_ADAPTER || p->owner != e->adapter ||
          p->gen != o->gen)
        return lsim_fail(eb, LSIM_E_STAGE_LAUNCH,
                         "backend: iteration %lld on worker %d reads page "
                         "%lld for adapter %d generation %lld, but the page "
                         "is not published for it", (long long)plan->iter, w,
                         (long long)o->page[j], e->adapter,
                         (long long)o->gen);
    }
    if (!o->pending)
      return lsim_fail(eb, LSIM_E_STAGE_LAUNCH,
                       "backend: iteration %lld on worker %d names adapter %d "
                       "generation %lld, which no launch of the engine named",
                       (long long)plan->iter, w, e->adapter,
                       (long long)o->gen);
  }
  /* the launch snapshot is executed */
  int *pl = &L->pend[(size_t)w * (size_t)L->objects];
  for (int k = 0; k < L->npend[w]; k++) {
    lsim_stage_obj *o = lsim__ob(L, w, pl[k]);
    if (o->pending) {
      o->pending = 0;
      o->executed++;
    }
  }
  L->npend[w] = 0;
  L->c.runs_checked++;
  return 0;
}

lsim_err lsim_stage_finish(const lsim_stage_ledger *L, lsim_errbuf *eb) {
  if (!L->on)
    return 0;
  for (int w = 0; w < L->workers; w++) {
    for (int k = 0; k < L->objects; k++) {
      const lsim_stage_obj *o = lsim__ob(L, w, k);
      if (o->st == LSIM_STAGE_STAGED)
        return lsim_fail(eb, LSIM_E_STAGE_UNPUBLISHED,
                         "backend: worker %d: object %d generation %lld was "
                         "staged and never published by the engine", w, k,
                         (long long)o->gen);
    }
    if (L->npend[w] > 0)
      return lsim_fail(eb, LSIM_E_STAGE_FENCE,
                       "backend: worker %d: a launch naming object %d was "
                       "never executed", w,
                       L->pend[(size_t)w * (size_t)L->objects]);
  }
  return 0;
}

void lsim_stage_page_get(const lsim_stage_ledger *L, int w, int64_t page,
                         int *st, int64_t *owner, int64_t *gen) {
  *st = -1;
  *owner = -1;
  *gen = 0;
  if (!L->on || w < 0 || w >= L->workers || page < 0 || page >= L->pool_pages)
    return;
  const lsim_stage_page *p = lsim__pg(L, w, page);
  *st = p->st;
  *owner = p->owner;
  *gen = p->gen;
}

const lsim_stage_obj *lsim_stage_obj_get(const lsim_stage_ledger *L, int w,
                                         int obj) {
  if (!L->on || w < 0 || w >= L->workers || obj < 0 || obj >= L->objects)
    return NULL;
  return lsim__ob(L, w, obj);
}

void lsim_stage__flip(lsim_stage_ledger *L, int w, int64_t page, int32_t at) {
  lsim_stage_page *p = lsim__pg(L, w, page);
  if (at >= 0 && at < p->nbytes)
    p->bytes[at] ^= 0x01;
}
