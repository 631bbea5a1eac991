/*
** residency.c: one worker's joint page pool, adapter residency state
** machine, joint admission and publication transactions.
**
** The state diagram and the function behind each arrow are in
** residency.h; docs/RESIDENCY.md explains them.  Invariants, checked by
** lsim__sound() under assert at the end of every mutating call and by
** lsim_res_check() on demand:
**
**   R1  free + reserved + adapter + kv == slots; each counter equals the
**       number of slots in that physical state.
**   R2  a FREE slot has no owner; a RESERVED slot names an open txn whose
**       list holds it; an ADAPTER slot names an adapter in a visible state
**       (PUBLISHED, ACTIVE, IDLE) whose list holds it, with that adapter's
**       current generation; a KV slot names a live KV object whose list
**       holds it, with that object's generation.
**   R3  no slot is listed by two owners (adapters, KV objects, txns).  A
**       RETIRING victim remembers its old slots so that rollback can give
**       them back; they are RESERVED by the txn that took it and do not
**       count as a listing.
**   R4  an adapter in RESERVED/LOADING/VALIDATED belongs to exactly one open
**       txn; a visible adapter owns exactly its demand in slots.
**   R5  refcount, pins, queued, inflight and launches are >= 0; refcount is
**       0 unless the adapter is ACTIVE or RETIRING.
**   R6  companions (residency.h): an object's deps equals the number of
**       objects naming it as companion that are neither ABSENT nor
**       HOST_READY, and a visible object's companion is visible.
**   R7  slots (lsim_res_set_slots): the objects in RESERVED .. IDLE
**       number nslotted <= max_slotted.  A begin that would pass the cap
**       takes victims for it as for pages; a rollback restores victims
**       only while the cap allows and drops the rest to ABSENT.
**
** Slots are handed out lowest index first and every list is kept sorted,
** so the physical layout depends only on the call sequence.
*/
#include "residency.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

typedef struct lsim__rslot {
  int state;
  int64_t owner; /* adapter index, KV handle or txn id; -1 when FREE */
  int64_t gen;
} lsim__rslot;

typedef struct lsim__adp {
  int state;
  int64_t gen;
  int refcount, pins, queued, inflight, launches;
  int host;
  lsim_digest artifact, kabi;
  int64_t need;   /* demand in slots */
  int64_t *slot;  /* [need] capacity */
  int64_t npages; /* listed slots */
  int64_t txn;    /* txn it belongs to (load/restore) or that retires it */
  lsim_tick last_use, published_tick;
  int64_t uses, total_uses;
  int deps;       /* R6 */
  int64_t version;  /* artifact version the next stage carries (hooks) */
  int64_t launched; /* launches naming the published generation (hooks) */
} lsim__adp;

typedef struct lsim__kv {
  int live;
  int64_t request, gen;
  int64_t *slot;
  int64_t n, cap, used;
} lsim__kv;

typedef struct lsim__txn {
  int live;
  int64_t id;
  int kind, adapter;
  int64_t request;
  lsim_res_demand d;
  int64_t *slot;
  int64_t nslots, cap;
  int *victim;
  int nvictims;
  int copied, published;
  int with;       /* companion loaded with the adapter, or -1 */
} lsim__txn;

struct lsim_res {
  lsim_res_cfg cfg;
  int64_t *need;
  lsim__rslot *s;
  int64_t nfree, nres, nadp, nkv;
  int64_t free_hint; /* no free slot below this index */
  int nslotted;      /* R7: objects in RESERVED .. IDLE */
  int max_slotted;   /* R7: the cap (lsim_res_set_slots); 0: none */
  lsim__adp *a;
  lsim__kv *kv;
  int nkvobj, kvcap;
  int64_t kvgen;
  lsim__txn *t;
  int ntxn;
  /* RESTORE transactions ever opened (rollbacks): 0 lets the engine's
  ** every-step question "any compensating reloads?" skip the scan */
  int64_t restores_opened;
  int64_t next_txn;
  /* adapters in PUBLISHED or IDLE (the only evictable states), so that
  ** eligibility scans the resident set, not the whole catalog; rlist is
  ** kept in ascending id order (the order a catalog scan gives), rin[i]
  ** says whether adapter i is in it */
  int *rlist;
  unsigned char *rin;
  int nrl;
  int *comp;      /* [nadapters] companion or -1; NULL: none at all */
  int *depchk;    /* [nadapters] scratch of the R6 recount */
  unsigned char *iscomp; /* [nadapters] some object names it as companion */
  /* scratch */
  int *cand;
  int *vict;
  unsigned char *mark;
  /* hooks (residency.h); pg: [slots] scratch for the pages an event names */
  lsim_res_hooks hk;
  int hooked, hk_worker;
  void *hk_ud;
  int64_t *pg;
};

/* ---- hooks -------------------------------------------------------------------- */

lsim_err lsim_res_set_hooks(lsim_res *r, const lsim_res_hooks *h, void *ud,
                            int worker, lsim_errbuf *eb) {
  r->hooked = 0;
  if (!h)
    return 0;
  if (!r->pg && !(r->pg = malloc((size_t)r->cfg.slots * sizeof *r->pg)))
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory attaching hooks");
  r->hk = *h;
  r->hk_ud = ud;
  r->hk_worker = worker;
  r->hooked = 1;
  return 0;
}

void lsim_res_set_version(lsim_res *r, int a, int64_t version) {
  if (a >= 0 && a < r->cfg.nadapters)
    r->a[a].version = version;
}

/* Call hook fn (when attached) with an event over pages[0..n). */
static lsim_err lsim__hook(const lsim_res *r, lsim_res_hook_fn fn, int object,
                           int64_t gen, const int64_t *pages, int64_t n,
                           int64_t fence, int published, int op,
                           lsim_errbuf *eb) {
  if (!r->hooked || !fn)
    return 0;
  lsim_res_page_ev ev = {r->hk_worker, object, gen,
                         object >= 0 && object < r->cfg.nadapters && !op
                             ? r->a[object].version
                             : 0,
                         pages, n, fence, published, op};
  return fn(r->hk_ud, &ev, eb);
}

static const char *const lsim__state_names[LSIM_RS__COUNT] = {
    "absent",    "host_ready", "reserved", "loading", "validated",
    "published", "active",     "idle",     "retiring"};

const char *lsim_res_state_name(int s) {
  return s >= 0 && s < LSIM_RS__COUNT ? lsim__state_names[s] : "?";
}

static int lsim__visible(int s) {
  return s == LSIM_RS_PUBLISHED || s == LSIM_RS_ACTIVE || s == LSIM_RS_IDLE;
}

/* ---- demand ------------------------------------------------------------------ */

static int64_t lsim__ceil_div(int64_t x, int64_t y) { return (x + y - 1) / y; }

int64_t lsim_res_pages_tensor(const lsim_res_module *m, int n, int64_t H) {
  if (!m || n < 1 || H < 1)
    return -1;
  int64_t p = 0;
  for (int i = 0; i < n; i++) {
    if (m[i].rank < 1 || m[i].d_in < 1 || m[i].d_out < 1 ||
        m[i].rank > (INT64_MAX / 4) / (m[i].d_in > m[i].d_out ? m[i].d_in
                                                               : m[i].d_out))
      return -1;
    p += lsim__ceil_div(m[i].rank * m[i].d_in, H) +
         lsim__ceil_div(m[i].d_out * m[i].rank, H);
  }
  return p;
}

int64_t lsim_res_pages_slora(int64_t rank) { return rank < 1 ? -1 : 4 * rank; }

int64_t lsim_res_slora_slot_bytes(int64_t layers, int64_t hidden,
                                  int64_t elem_bytes) {
  return 2 * layers * hidden * elem_bytes;
}

/* ---- slots ------------------------------------------------------------------- */

static void lsim__count_out(lsim_res *r, int st) {
  switch (st) {
  case LSIM_SLOT_FREE: r->nfree--; break;
  case LSIM_SLOT_RESERVED: r->nres--; break;
  case LSIM_SLOT_ADAPTER: r->nadp--; break;
  default: r->nkv--; break;
  }
}

static void lsim__set(lsim_res *r, int64_t i, int st, int64_t owner,
                      int64_t gen) {
  lsim__count_out(r, r->s[i].state);
  r->s[i].state = st;
  r->s[i].owner = owner;
  r->s[i].gen = gen;
  switch (st) {
  case LSIM_SLOT_FREE:
    r->nfree++;
    r->s[i].owner = -1;
    r->s[i].gen = 0;
    if (i < r->free_hint)
      r->free_hint = i;
    break;
  case LSIM_SLOT_RESERVED: r->nres++; break;
  case LSIM_SLOT_ADAPTER: r->nadp++; break;
  default: r->nkv++; break;
  }
}

static int lsim__cmp64(const void *x, const void *y) {
  int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
  return (a > b) - (a < b);
}

/* ---- invariants ------------------------------------------------------------------- */

static lsim__txn *lsim__txn_find(const lsim_res *r, int64_t id) {
  for (int i = 0; i < r->ntxn; i++)
    if (r->t[i].live && r->t[i].id == id)
      return &r->t[i];
  return NULL;
}

static int lsim__listed(const int64_t *list, int64_t n, int64_t x) {
  return bsearch(&x, list, (size_t)n, sizeof *list, lsim__cmp64) != NULL;
}

/* A state in which an object holds its companion (R6). */
static int lsim__holds(int st) {
  return st != LSIM_RS_ABSENT && st != LSIM_RS_HOST_READY;
}

/* R7: the object holds (or reserves) an adapter slot of its own; a
** RETIRING victim's slot already belongs to the txn that took it. */
static int lsim__slotted(int st) {
  return lsim__holds(st) && st != LSIM_RS_RETIRING;
}

static lsim_err lsim__check(const lsim_res *r, lsim_errbuf *eb) {
  /* 1. no slot is listed by two owners (R3) */
  unsigned char *mark = r->mark;
  memset(mark, 0, (size_t)r->cfg.slots);
  for (int i = 0; i < r->cfg.nadapters; i++) {
    const lsim__adp *a = &r->a[i];
    if (!lsim__visible(a->state))
      continue;
    for (int64_t k = 0; k < a->npages; k++)
      if (a->slot[k] < 0 || a->slot[k] >= r->cfg.slots || mark[a->slot[k]]++)
        return lsim_fail(eb, LSIM_E_RES_DOUBLE_OWNER,
                         "slot %lld listed by two owners (adapter %d)",
                         (long long)a->slot[k], i);
  }
  for (int i = 0; i < r->nkvobj; i++)
    for (int64_t j = 0; r->kv[i].live && j < r->kv[i].n; j++)
      if (mark[r->kv[i].slot[j]]++)
        return lsim_fail(eb, LSIM_E_RES_DOUBLE_OWNER,
                         "slot %lld listed by two owners (KV object %d)",
                         (long long)r->kv[i].slot[j], i);
  for (int i = 0; i < r->ntxn; i++)
    for (int64_t j = 0; r->t[i].live && j < r->t[i].nslots; j++)
      if (mark[r->t[i].slot[j]]++)
        return lsim_fail(eb, LSIM_E_RES_DOUBLE_OWNER,
                         "slot %lld listed by two owners (txn %lld)",
                         (long long)r->t[i].slot[j], (long long)r->t[i].id);
  /* 2. every owner holds what it lists (R2 from the owner's side, R4, R5) */
  for (int i = 0; i < r->cfg.nadapters; i++) {
    const lsim__adp *a = &r->a[i];
    if (a->refcount < 0 || a->pins < 0 || a->queued < 0 || a->inflight < 0 ||
        a->launches < 0 ||
        (a->refcount > 0 && a->state != LSIM_RS_ACTIVE &&
         a->state != LSIM_RS_RETIRING))
      return lsim_fail(eb, LSIM_E_RES_CONSERVATION,
                       "adapter %d: counters inconsistent with state %s", i,
                       lsim_res_state_name(a->state));
    if (lsim__visible(a->state)) {
      if (a->npages != a->need)
        return lsim_fail(eb, LSIM_E_RES_OWNERSHIP,
                         "adapter %d is visible with %lld of %lld slots", i,
                         (long long)a->npages, (long long)a->need);
      for (int64_t k = 0; k < a->npages; k++) {
        int64_t x = a->slot[k];
        if (r->s[x].state != LSIM_SLOT_ADAPTER || r->s[x].owner != i)
          return lsim_fail(eb, LSIM_E_RES_OWNERSHIP,
                           "adapter %d lists slot %lld, which it does not own",
                           i, (long long)x);
      }
    } else if (a->state == LSIM_RS_RETIRING) {
      for (int64_t k = 0; k < a->npages; k++)
        if (r->s[a->slot[k]].state != LSIM_SLOT_RESERVED ||
            r->s[a->slot[k]].owner != a->txn)
          return lsim_fail(eb, LSIM_E_RES_OWNERSHIP,
                           "retiring adapter %d: slot %lld is not held by its "
                           "txn",
                           i, (long long)a->slot[k]);
    } else if (a->npages != 0) {
      return lsim_fail(eb, LSIM_E_RES_OWNERSHIP,
                       "adapter %d lists slots in state %s", i,
                       lsim_res_state_name(a->state));
    }
    if ((a->state == LSIM_RS_RESERVED || a->state == LSIM_RS_LOADING ||
         a->state == LSIM_RS_VALIDATED) &&
        !lsim__txn_find(r, a->txn))
      return lsim_fail(eb, LSIM_E_RES_LEAK,
                       "adapter %d is %s without an open txn", i,
                       lsim_res_state_name(a->state));
  }
  for (int i = 0; i < r->nkvobj; i++)
    for (int64_t j = 0; r->kv[i].live && j < r->kv[i].n; j++) {
      int64_t x = r->kv[i].slot[j];
      if (r->s[x].state != LSIM_SLOT_KV || r->s[x].owner != i)
        return lsim_fail(eb, LSIM_E_RES_OWNERSHIP,
                         "KV object %d lists slot %lld, which it does not own",
                         i, (long long)x);
    }
  for (int i = 0; i < r->ntxn; i++)
    for (int64_t j = 0; r->t[i].live && j < r->t[i].nslots; j++) {
      int64_t x = r->t[i].slot[j];
      if (r->s[x].state != LSIM_SLOT_RESERVED || r->s[x].owner != r->t[i].id)
        return lsim_fail(eb, LSIM_E_RES_OWNERSHIP,
                         "txn %lld lists slot %lld, which it does not hold",
                         (long long)r->t[i].id, (long long)x);
    }
  /* 3. every slot names a live owner that lists it (R2 from the slot's
  ** side), with the owner's generation */
  int64_t c[4] = {0, 0, 0, 0};
  for (int64_t i = 0; i < r->cfg.slots; i++) {
    const lsim__rslot *s = &r->s[i];
    if (s->state < 0 || s->state > 3)
      return lsim_fail(eb, LSIM_E_RES_OWNERSHIP, "slot %lld: bad state",
                       (long long)i);
    c[s->state]++;
    if (s->state == LSIM_SLOT_FREE) {
      if (s->owner != -1 || mark[i])
        return lsim_fail(eb, LSIM_E_RES_OWNERSHIP,
                         "slot %lld is free but still has an owner attached",
                         (long long)i);
    } else if (s->state == LSIM_SLOT_RESERVED) {
      const lsim__txn *t = lsim__txn_find(r, s->owner);
      if (!t || !lsim__listed(t->slot, t->nslots, i))
        return lsim_fail(eb, LSIM_E_RES_LEAK,
                         "slot %lld is reserved by txn %lld, which is not open "
                         "or does not hold it (leaked reservation)",
                         (long long)i, (long long)s->owner);
    } else if (s->state == LSIM_SLOT_ADAPTER) {
      if (s->owner < 0 || s->owner >= r->cfg.nadapters)
        return lsim_fail(eb, LSIM_E_RES_OWNERSHIP,
                         "slot %lld names unknown adapter %lld", (long long)i,
                         (long long)s->owner);
      const lsim__adp *a = &r->a[s->owner];
      if (!lsim__visible(a->state) || !lsim__listed(a->slot, a->npages, i))
        return lsim_fail(eb, LSIM_E_RES_OWNERSHIP,
                         "slot %lld names adapter %lld (%s), which does not "
                         "own it",
                         (long long)i, (long long)s->owner,
                         lsim_res_state_name(a->state));
      if (s->gen != a->gen)
        return lsim_fail(eb, LSIM_E_RES_STALE_GEN,
                         "slot %lld carries generation %lld of adapter %lld, "
                         "whose generation is %lld",
                         (long long)i, (long long)s->gen, (long long)s->owner,
                         (long long)a->gen);
    } else {
      if (s->owner < 0 || s->owner >= r->nkvobj || !r->kv[s->owner].live ||
          !lsim__listed(r->kv[s->owner].slot, r->kv[s->owner].n, i))
        return lsim_fail(eb, LSIM_E_RES_OWNERSHIP,
                         "slot %lld names KV object %lld, which does not own it",
                         (long long)i, (long long)s->owner);
      if (s->gen != r->kv[s->owner].gen)
        return lsim_fail(eb, LSIM_E_RES_STALE_GEN,
                         "slot %lld carries a stale KV generation",
                         (long long)i);
    }
  }
  /* 4. R6: companions */
  if (r->comp) {
    int *deps = r->depchk;
    memset(deps, 0, (size_t)r->cfg.nadapters * sizeof *deps);
    for (int j = 0; j < r->cfg.nadapters; j++)
      if (r->comp[j] >= 0 && lsim__holds(r->a[j].state))
        deps[r->comp[j]]++;
    for (int i = 0; i < r->cfg.nadapters; i++)
      if (deps[i] != r->a[i].deps)
        return lsim_fail(eb, LSIM_E_RES_CONSERVATION,
                         "object %d counts %d dependants, %d hold it", i,
                         r->a[i].deps, deps[i]);
  }
  for (int i = 0; r->comp && i < r->cfg.nadapters; i++) {
    if (r->comp[i] >= 0 && lsim__visible(r->a[i].state) &&
        !lsim__visible(r->a[r->comp[i]].state))
      return lsim_fail(eb, LSIM_E_RES_OWNERSHIP,
                       "object %d is visible without its companion %d (%s)",
                       i, r->comp[i],
                       lsim_res_state_name(r->a[r->comp[i]].state));
  }
  /* 6. R7 */
  int slotted = 0;
  for (int i = 0; i < r->cfg.nadapters; i++)
    slotted += lsim__slotted(r->a[i].state);
  if (slotted != r->nslotted ||
      (r->max_slotted > 0 && slotted > r->max_slotted))
    return lsim_fail(eb, LSIM_E_RES_SLOTS,
                     "%d objects hold adapter slots (counted %d), the cap "
                     "is %d",
                     slotted, r->nslotted, r->max_slotted);
  /* 5. R1 */
  if (c[0] != r->nfree || c[1] != r->nres || c[2] != r->nadp ||
      c[3] != r->nkv || c[0] + c[1] + c[2] + c[3] != r->cfg.slots)
    return lsim_fail(eb, LSIM_E_RES_CONSERVATION,
                     "pool counters %lld/%lld/%lld/%lld disagree with the slots "
                     "(%lld/%lld/%lld/%lld of %lld)",
                     (long long)r->nfree, (long long)r->nres,
                     (long long)r->nadp, (long long)r->nkv, (long long)c[0],
                     (long long)c[1], (long long)c[2], (long long)c[3],
                     (long long)r->cfg.slots);
  return 0;
}

#ifndef NDEBUG
static int lsim__sound(const lsim_res *r) { return lsim__check(r, NULL) == 0; }
#endif

lsim_err lsim_res_check(const lsim_res *r, lsim_errbuf *eb) {
  /* the resident list is an index over adapter states: it must list
  ** exactly the PUBLISHED and IDLE adapters */
  int n = 0;
  for (int i = 0; i < r->cfg.nadapters; i++) {
    int in = r->a[i].state == LSIM_RS_PUBLISHED || r->a[i].state == LSIM_RS_IDLE;
    if (in != r->rin[i])
      return LSIM_BUG(eb, "resident list out of step with adapter states");
    n += in;
  }
  if (n != r->nrl)
    return LSIM_BUG(eb, "resident list length out of step");
  for (int k = 0; k < r->nrl; k++)
    if (r->rlist[k] < 0 || r->rlist[k] >= r->cfg.nadapters ||
        !r->rin[r->rlist[k]] || (k > 0 && r->rlist[k - 1] >= r->rlist[k]))
      return LSIM_BUG(eb, "resident list not in ascending adapter order");
  return lsim__check(r, eb);
}

/* ---- setup ------------------------------------------------------------------------ */

lsim_err lsim_res_new(lsim_res **out, const lsim_res_cfg *cfg,
                      lsim_errbuf *eb) {
  *out = NULL;
  if (cfg->slots < 1 || cfg->slot_bytes < 1 || cfg->nadapters < 1 ||
      !cfg->adapter_pages || cfg->guard_pages < 0)
    return lsim_fail(eb, LSIM_E_USAGE, "residency configuration incomplete");
  for (int i = 0; i < cfg->nadapters; i++)
    if (cfg->adapter_pages[i] < 1 || cfg->adapter_pages[i] > cfg->slots)
      return lsim_fail(eb, LSIM_E_USAGE,
                       "adapter %d needs %lld slots; the pool has %lld", i,
                       (long long)cfg->adapter_pages[i],
                       (long long)cfg->slots);
  lsim_res *r = calloc(1, sizeof *r);
  if (!r)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory creating a pool");
  r->cfg = *cfg;
  r->cfg.adapter_pages = NULL;
  size_t na = (size_t)cfg->nadapters;
  r->s = malloc((size_t)cfg->slots * sizeof *r->s);
  r->mark = malloc((size_t)cfg->slots);
  r->a = calloc(na, sizeof *r->a);
  r->cand = malloc(na * sizeof *r->cand);
  r->rlist = malloc(na * sizeof *r->rlist);
  r->rin = calloc(na, sizeof *r->rin);
  r->vict = malloc(na * sizeof *r->vict);
  int ok = r->s && r->mark && r->a && r->cand && r->vict && r->rlist && r->rin;
  for (size_t i = 0; ok && i < na; i++) {
    r->a[i].need = cfg->adapter_pages[i];
    r->a[i].slot = malloc((size_t)r->a[i].need * sizeof *r->a[i].slot);
    r->a[i].txn = -1;
    ok = r->a[i].slot != NULL;
  }
  if (!ok) {
    lsim_res_release(r);
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory creating a pool");
  }
  for (int64_t i = 0; i < cfg->slots; i++)
    r->s[i] = (lsim__rslot){LSIM_SLOT_FREE, -1, 0};
  r->nfree = cfg->slots;
  r->next_txn = 1;
  *out = r;
  return 0;
}

lsim_err lsim_res_set_slots(lsim_res *r, int max_adapters, lsim_errbuf *eb) {
  if (max_adapters < 1 || r->ntxn || r->nkvobj || r->nslotted)
    return lsim_fail(eb, LSIM_E_USAGE,
                     "slots are set once, first, to at least 1 (got %d)",
                     max_adapters);
  r->max_slotted = max_adapters;
  return 0;
}

lsim_err lsim_res_set_companions(lsim_res *r, const int *companion,
                                 lsim_errbuf *eb) {
  int n = r->cfg.nadapters;
  if (r->comp || r->ntxn || r->nkvobj)
    return lsim_fail(eb, LSIM_E_USAGE, "companions are set once, first");
  for (int i = 0; i < n; i++) {
    int c = companion[i];
    if (c < -1 || c >= n || c == i || (c >= 0 && companion[c] != -1) ||
        r->a[i].state != LSIM_RS_ABSENT)
      return lsim_fail(eb, LSIM_E_USAGE,
                       "object %d: companion %d is out of range, itself, "
                       "or has a companion of its own", i, c);
  }
  r->comp = malloc((size_t)n * sizeof *r->comp);
  r->depchk = malloc((size_t)n * sizeof *r->depchk);
  r->iscomp = calloc((size_t)n, 1);
  if (!r->comp || !r->depchk || !r->iscomp) {
    free(r->comp);
    free(r->depchk);
    free(r->iscomp);
    r->comp = r->depchk = NULL;
    r->iscomp = NULL;
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory setting companions");
  }
  memcpy(r->comp, companion, (size_t)n * sizeof *r->comp);
  for (int i = 0; i < n; i++)
    if (companion[i] >= 0)
      r->iscomp[companion[i]] = 1;
  return 0;
}

/* Set an adapter's state, keeping the resident (PUBLISHED/IDLE) list. */
static void lsim__adp_set(lsim_res *r, lsim__adp *a, int st) {
  int was = a->state == LSIM_RS_PUBLISHED || a->state == LSIM_RS_IDLE;
  int now = st == LSIM_RS_PUBLISHED || st == LSIM_RS_IDLE;
  int i = (int)(a - r->a);
  if (r->comp && r->comp[i] >= 0 && lsim__holds(a->state) != lsim__holds(st))
    r->a[r->comp[i]].deps += lsim__holds(st) ? 1 : -1;
  r->nslotted += lsim__slotted(st) - lsim__slotted(a->state);
  a->state = st;
  if (was == now)
    return;
  int lo = 0, hi = r->nrl; /* where i is, or goes, in the sorted list */
  while (lo < hi) {
    int m = lo + (hi - lo) / 2;
    if (r->rlist[m] < i)
      lo = m + 1;
    else
      hi = m;
  }
  if (now) {
    memmove(&r->rlist[lo + 1], &r->rlist[lo],
            (size_t)(r->nrl - lo) * sizeof *r->rlist);
    r->rlist[lo] = i;
    r->nrl++;
  } else {
    memmove(&r->rlist[lo], &r->rlist[lo + 1],
            (size_t)(r->nrl - lo - 1) * sizeof *r->rlist);
    r->nrl--;
  }
  r->rin[i] = (unsigned char)now;
}

/* The eligible adapters (but `exclude`) in ascending id order into out;
** returns the count.  Ascending order (the resident list's own) keeps
** rankings and event order exactly what a scan of the whole catalog would
** give. */
static int lsim__eligible_sorted(const lsim_res *r, int exclude, int keep,
                                 int *out) {
  int n = 0;
  for (int k = 0; k < r->nrl; k++) {
    int i = r->rlist[k];
    if (i != exclude && i != keep && lsim_res_eligible(r, i) == 0)
      out[n++] = i;
  }
  return n;
}

/* The companion of object i, or -1. */
static int lsim__comp(const lsim_res *r, int i) {
  return r->comp && i >= 0 ? r->comp[i] : -1;
}

void lsim_res_release(lsim_res *r) {
  if (r)
    free(r->pg);
  if (!r)
    return;
  for (int i = 0; r->a && i < r->cfg.nadapters; i++)
    free(r->a[i].slot);
  for (int i = 0; i < r->nkvobj; i++)
    free(r->kv[i].slot);
  for (int i = 0; i < r->ntxn; i++) {
    free(r->t[i].slot);
    free(r->t[i].victim);
  }
  free(r->kv);
  free(r->t);
  free(r->s);
  free(r->mark);
  free(r->a);
  free(r->cand);
  free(r->comp);
  free(r->depchk);
  free(r->iscomp);
  free(r->vict);
  free(r->rlist);
  free(r->rin);
  free(r);
}

/* ---- views -------------------------------------------------------------------------- */

void lsim_res_adapter(const lsim_res *r, int i, lsim_res_adapter_view *o) {
  const lsim__adp *a = &r->a[i];
  o->state = a->state;
  o->generation = a->gen;
  o->refcount = a->refcount;
  o->pins = a->pins;
  o->queued = a->queued;
  o->inflight = a->inflight;
  o->launches = a->launches;
  o->host_verified = a->host;
  o->pages = a->npages;
  o->slot = a->slot;
  o->txn = a->txn;
  o->last_use = a->last_use;
  o->published_tick = a->published_tick;
  o->uses = a->uses;
  o->total_uses = a->total_uses;
  o->deps = a->deps;
}

void lsim_res_view_get(const lsim_res *r, lsim_res_view *o) {
  o->slots = r->cfg.slots;
  o->slot_bytes = r->cfg.slot_bytes;
  o->free = r->nfree;
  o->reserved = r->nres;
  o->adapter = r->nadp;
  o->kv = r->nkv;
  o->open_txns = 0;
  for (int i = 0; i < r->ntxn; i++)
    o->open_txns += r->t[i].live;
  o->kv_objects = 0;
  for (int i = 0; i < r->nkvobj; i++)
    o->kv_objects += r->kv[i].live;
}

void lsim_res_slot(const lsim_res *r, int64_t i, int *state, int64_t *owner,
                   int64_t *gen) {
  *state = r->s[i].state;
  *owner = r->s[i].owner;
  *gen = r->s[i].gen;
}

/* ---- registration, references --------------------------------------------------- */

static lsim_err lsim__adapter_ok(const lsim_res *r, int a, lsim_errbuf *eb) {
  if (a < 0 || a >= r->cfg.nadapters)
    return lsim_fail(eb, LSIM_E_USAGE, "adapter %d out of range", a);
  return 0;
}

static lsim_err lsim__illegal(int a, int from, const char *arrow,
                              lsim_errbuf *eb) {
  return lsim_fail(eb, LSIM_E_RES_ILLEGAL,
                   "adapter %d: no transition '%s' from state %s", a, arrow,
                   lsim_res_state_name(from));
}

lsim_err lsim_res_register(lsim_res *r, int i, const lsim_digest *artifact,
                           const lsim_digest *kabi, lsim_errbuf *eb) {
  lsim_err rc = lsim__adapter_ok(r, i, eb);
  if (rc)
    return rc;
  lsim__adp *a = &r->a[i];
  if (a->state != LSIM_RS_ABSENT)
    return lsim__illegal(i, a->state, "register", eb);
  a->artifact = *artifact;
  a->kabi = *kabi;
  a->host = 1;
  lsim__adp_set(r, a, LSIM_RS_HOST_READY);
  return 0;
}

lsim_err lsim_res_bind(lsim_res *r, int i, lsim_tick now, lsim_errbuf *eb) {
  lsim_err rc = lsim__adapter_ok(r, i, eb);
  if (rc)
    return rc;
  lsim__adp *a = &r->a[i];
  if (a->state == LSIM_RS_RETIRING)
    return lsim_fail(eb, LSIM_E_RES_RETIRING,
                     "adapter %d is retiring: new binds are blocked", i);
  if (!lsim__visible(a->state))
    return lsim__illegal(i, a->state, "bind", eb);
  a->refcount++;
  lsim__adp_set(r, a, LSIM_RS_ACTIVE);
  a->uses++;
  a->total_uses++;
  a->last_use = now;
  assert(lsim__sound(r));
  return 0;
}

lsim_err lsim_res_unbind(lsim_res *r, int i, lsim_tick now, lsim_errbuf *eb) {
  lsim_err rc = lsim__adapter_ok(r, i, eb);
  if (rc)
    return rc;
  lsim__adp *a = &r->a[i];
  if (a->refcount < 1 ||
      (a->state != LSIM_RS_ACTIVE && a->state != LSIM_RS_RETIRING))
    return lsim__illegal(i, a->state, "unbind", eb);
  a->refcount--;
  a->last_use = now;
  if (a->refcount == 0 && a->state == LSIM_RS_ACTIVE)
    lsim__adp_set(r, a, LSIM_RS_IDLE);
  assert(lsim__sound(r));
  return 0;
}

static lsim_err lsim__counter(lsim_res *r, int i, int *c, int delta,
                              const char *what, lsim_errbuf *eb) {
  lsim_err rc = lsim__adapter_ok(r, i, eb);
  if (rc)
    return rc;
  if ((delta != 1 && delta != -1) || *c + delta < 0)
    return lsim_fail(eb, LSIM_E_RES_ILLEGAL, "adapter %d: %s count below zero",
                     i, what);
  *c += delta;
  return 0;
}

lsim_err lsim_res_pin(lsim_res *r, int i, int d, lsim_errbuf *eb) {
  if (i < 0 || i >= r->cfg.nadapters)
    return lsim__adapter_ok(r, i, eb);
  if (d > 0 && !lsim__visible(r->a[i].state))
    return lsim__illegal(i, r->a[i].state, "pin", eb);
  return lsim__counter(r, i, &r->a[i].pins, d, "pin", eb);
}
lsim_err lsim_res_queue(lsim_res *r, int i, int d, lsim_errbuf *eb) {
  if (i < 0 || i >= r->cfg.nadapters)
    return lsim__adapter_ok(r, i, eb);
  return lsim__counter(r, i, &r->a[i].queued, d, "queued reservation", eb);
}
lsim_err lsim_res_launch(lsim_res *r, int i, int d, lsim_errbuf *eb) {
  if (i < 0 || i >= r->cfg.nadapters)
    return lsim__adapter_ok(r, i, eb);
  if (d > 0 && !lsim__visible(r->a[i].state))
    return lsim__illegal(i, r->a[i].state, "launch", eb);
  lsim_err rc = lsim__counter(r, i, &r->a[i].launches, d, "launch", eb);
  if (!rc)
    r->a[i].inflight += d;
  if (!rc && d > 0) {
    r->a[i].launched++;
    rc = lsim__hook(r, r->hk.launch, i, r->a[i].gen, NULL, 0, 0, 0, 0, eb);
  }
  return rc;
}

/* The eviction predicate with `gone` of i's dependants counted as leaving
** (victims of the same txn). */
static lsim_err lsim__eligible(const lsim_res *r, int i, int gone) {
  if (i < 0 || i >= r->cfg.nadapters)
    return LSIM_E_USAGE;
  const lsim__adp *a = &r->a[i];
  if (a->refcount) /* ACTIVE, or RETIRING with users */
    return LSIM_E_RES_REFCOUNT;
  if (a->state != LSIM_RS_PUBLISHED && a->state != LSIM_RS_IDLE)
    return LSIM_E_RES_NOT_ELIGIBLE;
  if (a->pins || a->deps > gone) /* pinned, or a basis its cores hold */
    return LSIM_E_RES_PINNED;
  if (a->queued)
    return LSIM_E_RES_QUEUED;
  if (a->launches)
    return LSIM_E_RES_LIVE_LAUNCH;
  if (a->inflight)
    return LSIM_E_RES_INFLIGHT;
  if (!a->host)
    return LSIM_E_RES_HOST_SOURCE;
  return 0;
}

lsim_err lsim_res_eligible(const lsim_res *r, int i) {
  return lsim__eligible(r, i, 0);
}

int64_t lsim_res_reclaimable(const lsim_res *r, int exclude) {
  int64_t p = 0;
  for (int k = 0; k < r->nrl; k++) {
    int i = r->rlist[k];
    if (i != exclude && lsim_res_eligible(r, i) == 0)
      p += r->a[i].npages;
  }
  return p;
}

int lsim_res_pending_restores(const lsim_res *r, int *adapters, int max) {
  int n = 0;
  if (r->restores_opened == 0)
    return 0;
  for (int i = 0; i < r->ntxn && n < max; i++) {
    const lsim__txn *t = &r->t[i];
    if (t->live && t->kind == LSIM_TXN_RESTORE &&
        r->a[t->adapter].state == LSIM_RS_RESERVED)
      adapters[n++] = t->adapter;
  }
  for (int k = 1; k < n; k++) { /* ascending adapter order */
    int v = adapters[k], j = k;
    for (; j > 0 && adapters[j - 1] > v; j--)
      adapters[j] = adapters[j - 1];
    adapters[j] = v;
  }
  return n;
}

/* ---- transactions ----------------------------------------------------------------- */

lsim_err lsim_res_demand_of(const lsim_res *r, const lsim_res_req *q,
                            lsim_res_demand *d, lsim_errbuf *eb) {
  memset(d, 0, sizeof *d);
  lsim_err rc = lsim__adapter_ok(r, q->adapter, eb);
  if (rc)
    return rc;
  if (q->kv_initial < 0 || q->kv_growth < 0 ||
      (q->kind != LSIM_TXN_LOAD && q->kind != LSIM_TXN_KV &&
       q->kind != LSIM_TXN_PREFETCH) ||
      (q->kind == LSIM_TXN_PREFETCH && (q->request >= 0 || q->kv_initial ||
                                        q->kv_growth)) ||
      (q->kind != LSIM_TXN_PREFETCH && q->request < 0))
    return lsim_fail(eb, LSIM_E_USAGE, "malformed transaction request");
  const lsim__adp *a = &r->a[q->adapter];
  d->adapter = lsim__visible(a->state) ? 0 : a->need;
  int c = lsim__comp(r, q->adapter);
  if (q->kind != LSIM_TXN_KV && d->adapter && c >= 0 &&
      !lsim__visible(r->a[c].state))
    d->adapter += r->a[c].need; /* the companion comes in the same txn */
  d->kv_initial = q->kv_initial;
  d->kv_growth = q->kv_growth;
  d->guard = r->cfg.guard_pages;
  d->total = d->adapter + d->kv_initial + d->kv_growth;
  return 0;
}

static lsim__txn *lsim__txn_new(lsim_res *r) {
  int i;
  for (i = 0; i < r->ntxn; i++)
    if (!r->t[i].live)
      break;
  if (i == r->ntxn) {
    lsim__txn *t = realloc(r->t, (size_t)(r->ntxn + 1) * sizeof *t);
    if (!t)
      return NULL;
    r->t = t;
    memset(&r->t[r->ntxn], 0, sizeof *t);
    r->ntxn++;
  }
  lsim__txn *t = &r->t[i];
  t->live = 1;
  t->id = r->next_txn++;
  t->nslots = 0;
  t->nvictims = 0;
  t->copied = t->published = 0;
  t->with = -1;
  return t;
}

static int lsim__txn_reserve(lsim__txn *t, int64_t n, int nv) {
  if (n > t->cap) {
    int64_t *s = realloc(t->slot, (size_t)n * sizeof *s);
    if (!s)
      return -1;
    t->slot = s;
    t->cap = n;
  }
  int *v = realloc(t->victim, (size_t)(nv > 0 ? nv : 1) * sizeof *v);
  if (!v)
    return -1;
  t->victim = v;
  return 0;
}

/* Validate the request's identity and kernel ABI (begin, step 1). */
static lsim_err lsim__validate_identity(const lsim_res *r, const lsim__adp *a,
                                        int i, lsim_errbuf *eb) {
  if (!a->host)
    return lsim_fail(eb, LSIM_E_RES_HOST_SOURCE,
                     "adapter %d has no verified host source", i);
  if (lsim_digest_is_zero(&a->artifact))
    return lsim_fail(eb, LSIM_E_RES_IDENTITY,
                     "adapter %d has no artifact digest", i);
  if (!lsim_digest_is_zero(&r->cfg.kernel_abi) &&
      !lsim_digest_eq(&r->cfg.kernel_abi, &a->kabi))
    return lsim_fail(eb, LSIM_E_RES_KERNEL_ABI,
                     "adapter %d was converted for another kernel ABI", i);
  return 0;
}

/* How many of vict[0..nv) name i as their companion. */
static int lsim__gone(const lsim_res *r, int i, const int *vict, int nv) {
  int n = 0;
  for (int k = 0; r->comp && k < nv; k++)
    n += r->comp[vict[k]] == i;
  return n;
}

/* R7: the objects a load's txn adds to the slotted set (its adapter and
** a companion that comes along); 0 for one already visible. */
static int lsim__slots_new(const lsim_res *r, const lsim_res_req *q,
                           const lsim_res_demand *d) {
  if (q->kind == LSIM_TXN_KV || d->adapter == 0)
    return 0;
  int c = lsim__comp(r, q->adapter);
  return 1 + (c >= 0 && !lsim__visible(r->a[c].state));
}

/* R7: with nv victims (each slotted now) the txn would pass the cap. */
static int lsim__slots_short_n(const lsim_res *r, int add, int nv) {
  return r->max_slotted > 0 && add > 0 &&
         r->nslotted - nv + add > r->max_slotted;
}

/* The common part of begin: victims chosen and checked, then everything
** happens at once. */
static lsim_err lsim__begin(lsim_res *r, const lsim_res_req *q,
                            const lsim_res_demand *d, const int *victims,
                            int nv, int64_t *txn, lsim_errbuf *eb) {
  int load = q->kind != LSIM_TXN_KV;
  lsim__adp *a = &r->a[q->adapter];
  int keep = lsim__comp(r, q->adapter);
  int64_t vpages = 0;
  for (int k = 0; k < nv; k++) {
    int v = victims[k];
    if (v < 0 || v >= r->cfg.nadapters || v == q->adapter || v == keep)
      return lsim_fail(eb, LSIM_E_RES_NOT_ELIGIBLE,
                       "victim %d is not a legal victim for adapter %d", v,
                       q->adapter);
    for (int j = 0; j < k; j++)
      if (victims[j] == v)
        return lsim_fail(eb, LSIM_E_RES_DUP_VICTIM,
                         "victim %d listed twice (its pages would count twice)",
                         v);
    lsim_err why = lsim__eligible(r, v, lsim__gone(r, v, victims, nv));
    if (why)
      return lsim_fail(eb, why, "adapter %d fails the eviction predicate (%s)",
                       v, lsim_err_name(why));
    vpages += r->a[v].npages;
  }
  if (load && lsim__slots_short_n(r, lsim__slots_new(r, q, d), nv))
    return lsim_fail(eb, LSIM_E_RES_NOSPACE,
                     "adapter slots: %d held - %d victims + %d new > %d",
                     r->nslotted, nv, lsim__slots_new(r, q, d),
                     r->max_slotted);
  if (r->nfree + vpages < d->total + d->guard)
    return lsim_fail(eb, LSIM_E_RES_NOSPACE,
                     "joint admission: free %lld + reclaimed %lld < demand "
                     "%lld (adapter %lld + kv %lld + growth %lld + guard %lld)",
                     (long long)r->nfree, (long long)vpages,
                     (long long)(d->total + d->guard), (long long)d->adapter,
                     (long long)d->kv_initial, (long long)d->kv_growth,
                     (long long)d->guard);
  int64_t from_free = d->total > vpages ? d->total - vpages : 0;
  lsim__txn *t = lsim__txn_new(r);
  if (!t || lsim__txn_reserve(t, vpages + from_free, nv)) {
    if (t)
      t->live = 0;
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory reserving slots");
  }
  t->kind = q->kind;
  r->restores_opened += q->kind == LSIM_TXN_RESTORE;
  t->adapter = q->adapter;
  t->request = q->request;
  t->d = *d;
  /* mark victims retiring; their slots move to the txn */
  for (int k = 0; k < nv; k++) {
    lsim__adp *v = &r->a[victims[k]];
    t->victim[t->nvictims++] = victims[k];
    lsim__adp_set(r, v, LSIM_RS_RETIRING);
    v->txn = t->id;
    for (int64_t j = 0; j < v->npages; j++) {
      t->slot[t->nslots++] = v->slot[j];
      lsim__set(r, v->slot[j], LSIM_SLOT_RESERVED, t->id, 0);
    }
  }
  for (int64_t need = from_free, i = r->free_hint; need > 0; i++) {
    if (r->s[i].state != LSIM_SLOT_FREE)
      continue;
    t->slot[t->nslots++] = i;
    lsim__set(r, i, LSIM_SLOT_RESERVED, t->id, 0);
    r->free_hint = i + 1;
    need--;
  }
  /* the free slots were taken in increasing order: only victims' slots
  ** can put the list out of order */
  if (nv > 0)
    qsort(t->slot, (size_t)t->nslots, sizeof *t->slot, lsim__cmp64);
  if (load) {
    lsim__adp_set(r, a, LSIM_RS_RESERVED);
    a->txn = t->id;
    if (keep >= 0 && !lsim__visible(r->a[keep].state)) {
      t->with = keep; /* basis and core: one txn, one publication */
      lsim__adp_set(r, &r->a[keep], LSIM_RS_RESERVED);
      r->a[keep].txn = t->id;
    }
  }
  *txn = t->id;
  assert(lsim__sound(r));
  /* the victims' pages go back before any copy can write them */
  for (int k = 0; k < nv; k++) {
    const lsim__adp *v = &r->a[victims[k]];
    lsim_err rc = lsim__hook(r, r->hk.retire, victims[k], v->gen, v->slot,
                             v->npages, v->launched, 1, 0, eb);
    if (rc)
      return rc;
  }
  return 0;
}

static lsim_err lsim__begin_prep(lsim_res *r, const lsim_res_req *q,
                                 lsim_res_demand *d, lsim_errbuf *eb) {
  lsim_err rc = lsim_res_demand_of(r, q, d, eb);
  if (rc)
    return rc;
  const lsim__adp *a = &r->a[q->adapter];
  if (q->kind == LSIM_TXN_KV) {
    if (a->state == LSIM_RS_RETIRING)
      return lsim_fail(eb, LSIM_E_RES_RETIRING,
                       "adapter %d is retiring: new binds are blocked",
                       q->adapter);
    if (!lsim__visible(a->state))
      return lsim__illegal(q->adapter, a->state, "admit (kv)", eb);
    return 0;
  }
  if (a->state != LSIM_RS_HOST_READY)
    return lsim__illegal(q->adapter, a->state, "begin (reserve)", eb);
  int c = lsim__comp(r, q->adapter);
  if (c >= 0 && !lsim__visible(r->a[c].state)) {
    if (r->a[c].state != LSIM_RS_HOST_READY)
      return lsim__illegal(c, r->a[c].state, "begin (companion)", eb);
    if ((rc = lsim__validate_identity(r, &r->a[c], c, eb)))
      return rc;
  }
  return lsim__validate_identity(r, a, q->adapter, eb);
}

lsim_err lsim_res_begin_with(lsim_res *r, const lsim_res_req *q,
                             const int *victims, int nv, int64_t *txn,
                             lsim_errbuf *eb) {
  lsim_res_demand d;
  *txn = -1;
  lsim_err rc = lsim__begin_prep(r, q, &d, eb);
  if (rc)
    return rc;
  return lsim__begin(r, q, &d, victims, nv, txn, eb);
}

lsim_err lsim_res_begin(lsim_res *r, const lsim_res_req *q,
                        lsim_res_rank_fn rank, void *ud, int64_t *txn,
                        int *victims_out, int max_victims, int *nvictims,
                        lsim_errbuf *eb) {
  lsim_res_demand d;
  *txn = -1;
  if (nvictims)
    *nvictims = 0;
  lsim_err rc = lsim__begin_prep(r, q, &d, eb);
  if (rc)
    return rc;
  /* Step 1, eligibility (here); step 2, ranking (the caller's policy). */
  int nv = 0;
  /* candidates matter only when the free slots alone cannot cover it */
  int keep = lsim__comp(r, q->adapter);
  int add = lsim__slots_new(r, q, &d);
  int nc = r->nfree >= d.total + d.guard && !lsim__slots_short_n(r, add, 0)
               ? 0
               : lsim__eligible_sorted(r, q->adapter, keep, r->cand);
  int64_t have = r->nfree;
  while ((have < d.total + d.guard || lsim__slots_short_n(r, add, nv)) &&
         nc > 0) {
    int k = nc == 1 || !rank ? 0 : rank(ud, r->cand, nc);
    if (k < 0 || k >= nc)
      return lsim_fail(eb, LSIM_E_POLICY, "eviction ranking out of range");
    int v = r->cand[k];
    r->vict[nv++] = v;
    have += r->a[v].npages;
    memmove(&r->cand[k], &r->cand[k + 1], (size_t)(nc - k - 1) * sizeof *r->cand);
    nc--;
    /* the last core of a basis going makes the basis a candidate (in
    ** ascending order, where a catalog scan would have put it) */
    int b = lsim__comp(r, v);
    if (b >= 0 && b != keep && b != q->adapter && r->rin[b] &&
        lsim__eligible(r, b, lsim__gone(r, b, r->vict, nv)) == 0) {
      int at = 0, dup = 0;
      for (int j = 0; j < nv && !dup; j++)
        dup = r->vict[j] == b;
      while (!dup && at < nc && r->cand[at] < b)
        at++;
      if (!dup && (at == nc || r->cand[at] != b)) {
        memmove(&r->cand[at + 1], &r->cand[at],
                (size_t)(nc - at) * sizeof *r->cand);
        r->cand[at] = b;
        nc++;
      }
    }
  }
  if (lsim__slots_short_n(r, add, nv))
    return lsim_fail(eb, LSIM_E_RES_NOSPACE,
                     "adapter slots: %d held - %d reclaimable + %d new > %d",
                     r->nslotted, nv, add, r->max_slotted);
  if (have < d.total + d.guard)
    return lsim_fail(eb, LSIM_E_RES_NOSPACE,
                     "joint admission: free %lld + reclaimable %lld < demand "
                     "%lld (adapter %lld + kv %lld + growth %lld + guard %lld)",
                     (long long)r->nfree, (long long)(have - r->nfree),
                     (long long)(d.total + d.guard), (long long)d.adapter,
                     (long long)d.kv_initial, (long long)d.kv_growth,
                     (long long)d.guard);
  rc = lsim__begin(r, q, &d, r->vict, nv, txn, eb);
  if (!rc && nvictims) {
    for (int k = 0; k < nv && k < max_victims; k++)
      victims_out[k] = r->vict[k];
    *nvictims = nv;
  }
  return rc;
}

lsim_err lsim_res_txn(const lsim_res *r, int64_t id, lsim_res_txn_view *o,
                      lsim_errbuf *eb) {
  const lsim__txn *t = lsim__txn_find(r, id);
  if (!t)
    return lsim_fail(eb, LSIM_E_RES_TXN, "txn %lld is not open", (long long)id);
  o->id = t->id;
  o->kind = t->kind;
  o->adapter = t->adapter;
  o->stage = t->kind == LSIM_TXN_KV ? LSIM_RS_RESERVED : r->a[t->adapter].state;
  o->request = t->request;
  o->demand = t->d;
  o->nslots = t->nslots;
  o->slot = t->slot;
  o->nvictims = t->nvictims;
  o->victim = t->victim;
  o->copied = t->copied;
  o->with = t->with;
  return 0;
}

int64_t lsim_res_txn_of(const lsim_res *r, int i) {
  if (i < 0 || i >= r->cfg.nadapters)
    return -1;
  const lsim__adp *a = &r->a[i];
  if (a->state == LSIM_RS_RESERVED || a->state == LSIM_RS_LOADING ||
      a->state == LSIM_RS_VALIDATED)
    return a->txn;
  for (int k = 0; k < r->ntxn; k++)
    if (r->t[k].live && r->t[k].adapter == i && r->t[k].published &&
        r->t[k].kind != LSIM_TXN_KV)
      return r->t[k].id;
  return -1;
}

static lsim_err lsim__txn_get(lsim_res *r, int64_t id, lsim__txn **t,
                              lsim_errbuf *eb) {
  *t = lsim__txn_find(r, id);
  if (!*t)
    return lsim_fail(eb, LSIM_E_RES_TXN, "txn %lld is not open", (long long)id);
  return 0;
}

lsim_err lsim_res_copy_start(lsim_res *r, int64_t id, lsim_errbuf *eb) {
  lsim__txn *t;
  lsim_err rc = lsim__txn_get(r, id, &t, eb);
  if (rc)
    return rc;
  lsim__adp *a = &r->a[t->adapter];
  if (t->kind == LSIM_TXN_KV || a->state != LSIM_RS_RESERVED)
    return lsim__illegal(t->adapter, t->kind == LSIM_TXN_KV ? LSIM_RS__COUNT
                                                            : a->state,
                         "copy start", eb);
  lsim__adp_set(r, a, LSIM_RS_LOADING);
  a->inflight++;
  if (t->with >= 0) {
    lsim__adp_set(r, &r->a[t->with], LSIM_RS_LOADING);
    r->a[t->with].inflight++;
  }
  assert(lsim__sound(r));
  /* the copy writes the slots lsim_res_publish will give each object */
  rc = lsim__hook(r, r->hk.stage, t->adapter, a->gen + 1, t->slot, a->need, 0,
                  0, 0, eb);
  if (!rc && t->with >= 0)
    rc = lsim__hook(r, r->hk.stage, t->with, r->a[t->with].gen + 1,
                    t->slot + a->need, r->a[t->with].need, 0, 0, 0, eb);
  return rc;
}

lsim_err lsim_res_copy_done(lsim_res *r, int64_t id, lsim_errbuf *eb) {
  lsim__txn *t;
  lsim_err rc = lsim__txn_get(r, id, &t, eb);
  if (rc)
    return rc;
  lsim__adp *a = &r->a[t->adapter];
  if (t->kind == LSIM_TXN_KV || a->state != LSIM_RS_LOADING || t->copied)
    return lsim_fail(eb, LSIM_E_RES_ILLEGAL,
                     "txn %lld: copy event without a copy in flight",
                     (long long)id);
  t->copied = 1;
  a->inflight--;
  if (t->with >= 0)
    r->a[t->with].inflight--;
  return 0;
}

lsim_err lsim_res_validate(lsim_res *r, int64_t id, const lsim_digest *staged,
                           lsim_errbuf *eb) {
  return lsim_res_validate_with(r, id, staged, NULL, eb);
}

lsim_err lsim_res_validate_with(lsim_res *r, int64_t id,
                                const lsim_digest *staged,
                                const lsim_digest *staged_with,
                                lsim_errbuf *eb) {
  lsim__txn *t;
  lsim_err rc = lsim__txn_get(r, id, &t, eb);
  if (rc)
    return rc;
  lsim__adp *a = &r->a[t->adapter];
  if (t->kind == LSIM_TXN_KV)
    return lsim_fail(eb, LSIM_E_RES_ILLEGAL, "txn %lld copies nothing",
                     (long long)id);
  if (!t->copied || a->state != LSIM_RS_LOADING)
    return lsim_fail(eb, LSIM_E_RES_PUBLISH_EARLY,
                     "adapter %d: validation before the copy-complete event "
                     "(state %s)",
                     t->adapter, lsim_res_state_name(a->state));
  if (!staged || !lsim_digest_eq(staged, &a->artifact))
    return lsim_fail(eb, LSIM_E_RES_DIGEST,
                     "adapter %d: staged bytes do not match the artifact digest",
                     t->adapter);
  if (t->with >= 0 &&
      (!staged_with || !lsim_digest_eq(staged_with, &r->a[t->with].artifact)))
    return lsim_fail(eb, LSIM_E_RES_DIGEST,
                     "adapter %d: the staged bytes of its companion %d do not "
                     "match that artifact digest", t->adapter, t->with);
  lsim__adp_set(r, a, LSIM_RS_VALIDATED);
  if (t->with >= 0)
    lsim__adp_set(r, &r->a[t->with], LSIM_RS_VALIDATED);
  return 0;
}

lsim_err lsim_res_publish(lsim_res *r, int64_t id, lsim_tick now, int64_t *gen,
                          lsim_errbuf *eb) {
  lsim__txn *t;
  lsim_err rc = lsim__txn_get(r, id, &t, eb);
  if (rc)
    return rc;
  lsim__adp *a = &r->a[t->adapter];
  if (t->kind == LSIM_TXN_KV || a->state != LSIM_RS_VALIDATED || !t->copied)
    return lsim_fail(eb, LSIM_E_RES_PUBLISH_EARLY,
                     "adapter %d: publication before copy event and validation "
                     "(state %s)",
                     t->adapter, lsim_res_state_name(a->state));
  /* One visibility point: the adapter takes the first `need` reserved slots
  ** under its next generation. */
  a->gen++;
  a->npages = 0;
  for (int64_t k = 0; k < a->need; k++) {
    a->slot[a->npages++] = t->slot[k];
    lsim__set(r, t->slot[k], LSIM_SLOT_ADAPTER, t->adapter, a->gen);
  }
  int64_t took = a->need;
  if (t->with >= 0) {
    /* the companion, right after: visible at the same point as its core,
    ** never before it */
    lsim__adp *c = &r->a[t->with];
    c->gen++;
    c->npages = 0;
    for (int64_t k = 0; k < c->need; k++) {
      c->slot[c->npages++] = t->slot[took + k];
      lsim__set(r, t->slot[took + k], LSIM_SLOT_ADAPTER, t->with, c->gen);
    }
    took += c->need;
    lsim__adp_set(r, c, LSIM_RS_PUBLISHED);
    c->txn = -1;
    c->launched = 0;
    c->published_tick = now;
    c->last_use = now;
    c->uses = 0;
  }
  memmove(t->slot, t->slot + took,
          (size_t)(t->nslots - took) * sizeof *t->slot);
  t->nslots -= took;
  /* the victims can no longer be restored (rollback is closed from here):
  ** they forget their old slots, some of which the adapter now owns */
  for (int k = 0; k < t->nvictims; k++)
    r->a[t->victim[k]].npages = 0;
  lsim__adp_set(r, a, LSIM_RS_PUBLISHED);
  a->txn = -1;
  a->published_tick = now;
  a->last_use = now;
  a->uses = 0;
  t->published = 1;
  a->launched = 0;
  if (gen)
    *gen = a->gen;
  assert(lsim__sound(r));
  rc = lsim__hook(r, r->hk.publish, t->adapter, a->gen, a->slot, a->npages, 0,
                  0, 0, eb);
  if (!rc && t->with >= 0) {
    const lsim__adp *c = &r->a[t->with];
    rc = lsim__hook(r, r->hk.publish, t->with, c->gen, c->slot, c->npages, 0,
                    0, 0, eb);
  }
  return rc;
}

static lsim_err lsim__kv_new(lsim_res *r, int64_t request, int *out) {
  int i;
  for (i = 0; i < r->nkvobj; i++)
    if (!r->kv[i].live)
      break;
  if (i == r->nkvobj) {
    if (r->nkvobj == r->kvcap) {
      int cap = r->kvcap ? 2 * r->kvcap : 16;
      lsim__kv *k = realloc(r->kv, (size_t)cap * sizeof *k);
      if (!k)
        return LSIM_E_NOMEM;
      memset(k + r->kvcap, 0, (size_t)(cap - r->kvcap) * sizeof *k);
      r->kv = k;
      r->kvcap = cap;
    }
    r->nkvobj++;
  }
  lsim__kv *k = &r->kv[i];
  k->live = 1;
  k->request = request;
  k->gen = ++r->kvgen;
  k->n = k->used = 0;
  *out = i;
  return 0;
}

static void lsim__txn_close(lsim__txn *t) {
  t->live = 0;
  t->nslots = 0;
  t->nvictims = 0;
}

lsim_err lsim_res_commit(lsim_res *r, int64_t id, lsim_tick now, int *kvout,
                         lsim_errbuf *eb) {
  lsim__txn *t;
  *kvout = -1;
  lsim_err rc = lsim__txn_get(r, id, &t, eb);
  if (rc)
    return rc;
  lsim__adp *a = &r->a[t->adapter];
  if (t->kind != LSIM_TXN_KV && !t->published)
    return lsim_fail(eb, LSIM_E_RES_PUBLISH_EARLY,
                     "txn %lld: commit before publication", (long long)id);
  if (t->kind == LSIM_TXN_KV && !lsim__visible(a->state))
    return lsim_fail(eb, a->state == LSIM_RS_RETIRING ? LSIM_E_RES_RETIRING
                                                      : LSIM_E_RES_ILLEGAL,
                     "txn %lld: adapter %d is no longer bindable (%s)",
                     (long long)id, t->adapter, lsim_res_state_name(a->state));
  int64_t kvn = t->request >= 0 ? t->d.kv_initial + t->d.kv_growth : 0;
  int kv = -1;
  if (t->request >= 0) {
    if (lsim__kv_new(r, t->request, &kv))
      return lsim_fail(eb, LSIM_E_NOMEM, "out of memory committing KV");
    lsim__kv *k = &r->kv[kv];
    if (kvn > k->cap) {
      int64_t *s = realloc(k->slot, (size_t)kvn * sizeof *s);
      if (!s) {
        k->live = 0;
        return lsim_fail(eb, LSIM_E_NOMEM, "out of memory committing KV");
      }
      k->slot = s;
      k->cap = kvn;
    }
    /* pin for the request attempt, then commit its KV */
    a->refcount++;
    lsim__adp_set(r, a, LSIM_RS_ACTIVE);
    a->uses++;
    a->total_uses++;
    a->last_use = now;
    for (int64_t j = 0; j < kvn; j++) {
      k->slot[k->n++] = t->slot[j];
      lsim__set(r, t->slot[j], LSIM_SLOT_KV, kv, k->gen);
    }
  }
  /* slots past the demand (a victim larger than the shortfall) are freed */
  for (int64_t j = kvn; j < t->nslots; j++)
    lsim__set(r, t->slot[j], LSIM_SLOT_FREE, -1, 0);
  /* finalize victims: their generation stays as a tombstone */
  for (int k = 0; k < t->nvictims; k++) {
    lsim__adp *v = &r->a[t->victim[k]];
    lsim__adp_set(r, v, LSIM_RS_ABSENT);
    v->npages = 0;
    v->txn = -1;
    v->host = 0; /* absent: the next load re-registers its host source */
  }
  lsim__txn_close(t);
  *kvout = kv;
  assert(lsim__sound(r));
  if (kv >= 0 && r->kv[kv].n > 0)
    return lsim__hook(r, r->hk.kv, kv, r->kv[kv].gen, r->kv[kv].slot,
                      r->kv[kv].n, 0, 0, LSIM_RES_KV_ALLOC, eb);
  return 0;
}

/* A victim of t that a rollback drops instead of restoring: a companion
** (a basis restored alone would serve nothing, and with its cores it
** could become visible after them), or a victim whose companion is a
** victim too. */
static int lsim__dropped(const lsim_res *r, const lsim__txn *t, int v) {
  if (!r->comp)
    return 0;
  if (r->iscomp[v])
    return 1;
  for (int k = 0; k < t->nvictims; k++)
    if (t->victim[k] == r->comp[v])
      return 1;
  return 0;
}

lsim_err lsim_res_rollback(lsim_res *r, int64_t id, int64_t *restore,
                           int max_restore, int *nrestore, lsim_errbuf *eb) {
  lsim__txn *t;
  if (nrestore)
    *nrestore = 0;
  lsim_err rc = lsim__txn_get(r, id, &t, eb);
  if (rc)
    return rc;
  if (t->published)
    return lsim_fail(eb, LSIM_E_RES_POST_PUBLISH,
                     "txn %lld already published adapter %d: recover through a "
                     "successor generation, not a rollback",
                     (long long)id, t->adapter);
  if (t->nvictims > max_restore && t->nvictims > 0 && !restore)
    return lsim_fail(eb, LSIM_E_USAGE, "no room for restore transactions");
  lsim__adp *a = &r->a[t->adapter];
  /* a copy that started was staged: its pages go back unpublished */
  if (t->kind != LSIM_TXN_KV &&
      (a->state == LSIM_RS_LOADING || a->state == LSIM_RS_VALIDATED)) {
    rc = lsim__hook(r, r->hk.retire, t->adapter, a->gen + 1, t->slot, a->need,
                    0, 0, 0, eb);
    if (!rc && t->with >= 0)
      rc = lsim__hook(r, r->hk.retire, t->with, r->a[t->with].gen + 1,
                      t->slot + a->need, r->a[t->with].need, 0, 0, 0, eb);
    if (rc)
      return rc;
  }
  /* cancel / wait the txn's device events */
  if (t->kind != LSIM_TXN_KV && a->state == LSIM_RS_LOADING && !t->copied) {
    a->inflight--;
    if (t->with >= 0)
      r->a[t->with].inflight--;
  }
  /* victims keep their slots: each gets a restore txn over them, except
  ** a companion taken with its last dependants, and those dependants:
  ** they go to ABSENT (residency.h) */
  /* R7: with a slot cap, victims are restored in victim order only while
  ** the slots that the txn's own objects give back allow; the rest are
  ** dropped (another load may have taken the slot the txn had freed) */
  int left = r->max_slotted;
  if (left > 0) {
    left -= r->nslotted;
    if (t->kind != LSIM_TXN_KV) {
      left += lsim__slotted(a->state);
      if (t->with >= 0)
        left += lsim__slotted(r->a[t->with].state);
    }
  }
  int *restored = r->cand; /* scratch: victim k is restored */
  for (int k = 0; k < t->nvictims; k++)
    restored[k] = !lsim__dropped(r, t, t->victim[k]) &&
                  (r->max_slotted == 0 || left-- > 0);
  for (int64_t j = 0; j < t->nslots; j++)
    r->mark[t->slot[j]] = 0;
  for (int k = 0; k < t->nvictims; k++)
    if (restored[k])
      for (int64_t j = 0; j < r->a[t->victim[k]].npages; j++)
        r->mark[r->a[t->victim[k]].slot[j]] = 1;
  int nr = 0;
  for (int k = 0; k < t->nvictims; k++) {
    int vi = t->victim[k];
    lsim__adp *v = &r->a[vi];
    if (!restored[k])
      continue;
    /* the txn array may move: keep the id and look it up again */
    int64_t tid = t->id;
    lsim__txn *rt = lsim__txn_new(r);
    t = lsim__txn_find(r, tid);
    if (!rt || lsim__txn_reserve(rt, v->npages, 0)) {
      if (rt)
        rt->live = 0;
      return LSIM_BUG(eb, "out of memory in the middle of a rollback");
    }
    rt->kind = LSIM_TXN_RESTORE;
    r->restores_opened++;
    rt->adapter = vi;
    rt->request = -1;
    memset(&rt->d, 0, sizeof rt->d);
    rt->d.adapter = rt->d.total = v->npages;
    for (int64_t j = 0; j < v->npages; j++) {
      rt->slot[rt->nslots++] = v->slot[j];
      r->s[v->slot[j]].owner = rt->id; /* still RESERVED: no count change */
    }
    v->npages = 0;
    lsim__adp_set(r, v, LSIM_RS_RESERVED);
    v->txn = rt->id;
    if (restore && nr < max_restore)
      restore[nr] = rt->id;
    nr++;
  }
  for (int64_t j = 0; j < t->nslots; j++)
    if (!r->mark[t->slot[j]])
      lsim__set(r, t->slot[j], LSIM_SLOT_FREE, -1, 0);
  for (int k = 0; k < t->nvictims; k++) {
    lsim__adp *v = &r->a[t->victim[k]];
    if (v->state != LSIM_RS_RETIRING)
      continue; /* restoring */
    lsim__adp_set(r, v, LSIM_RS_ABSENT);
    v->npages = 0;
    v->txn = -1;
    v->host = 0;
  }
  if (t->with >= 0) {
    lsim__adp *c = &r->a[t->with];
    c->gen++; /* burnt with the core's attempt */
    lsim__adp_set(r, c, LSIM_RS_HOST_READY);
    c->txn = -1;
  }
  /* a failed load attempt burns the generation it was loading (article
  ** 0x09L: load-D-1 fails, load-D-2 publishes generation 2), so no two
  ** attempts ever share a generation number */
  if (t->kind != LSIM_TXN_KV)
    a->gen++;
  if (t->kind == LSIM_TXN_RESTORE) {
    lsim__adp_set(r, a, LSIM_RS_ABSENT); /* restoration itself failed: drop it */
    a->host = 0;
    a->txn = -1;
  } else if (t->kind != LSIM_TXN_KV) {
    lsim__adp_set(r, a, LSIM_RS_HOST_READY);
    a->txn = -1;
  }
  lsim__txn_close(t);
  if (nrestore)
    *nrestore = nr;
  assert(lsim__sound(r));
  return 0;
}

lsim_err lsim_res_txn_drop_request(lsim_res *r, int64_t id, int64_t *released,
                                   lsim_errbuf *eb) {
  lsim__txn *t;
  *released = 0;
  lsim_err rc = lsim__txn_get(r, id, &t, eb);
  if (rc)
    return rc;
  if (t->kind != LSIM_TXN_LOAD || t->request < 0)
    return lsim_fail(eb, LSIM_E_RES_ILLEGAL,
                     "txn %lld carries no request to drop", (long long)id);
  /* Give back slots that are neither a victim's nor needed by the adapter:
  ** the KV part, from the top of the list. */
  int64_t keep = t->published ? 0 : t->d.adapter;
  int64_t kv = t->d.kv_initial + t->d.kv_growth;
  for (int64_t j = 0; j < t->nslots; j++)
    r->mark[t->slot[j]] = 0;
  for (int k = 0; k < t->nvictims; k++)
    for (int64_t j = 0; j < r->a[t->victim[k]].npages; j++)
      r->mark[r->a[t->victim[k]].slot[j]] = 1;
  int64_t n = 0;
  for (int64_t j = t->nslots - 1; j >= keep && n < kv; j--) {
    if (r->mark[t->slot[j]])
      continue; /* a victim's slot stays for a possible restoration */
    lsim__set(r, t->slot[j], LSIM_SLOT_FREE, -1, 0);
    memmove(&t->slot[j], &t->slot[j + 1],
            (size_t)(t->nslots - j - 1) * sizeof *t->slot);
    t->nslots--;
    n++;
  }
  /* whatever KV could not be given back (victim slots) stays reserved and
  ** is freed at commit */
  t->request = -1;
  t->kind = LSIM_TXN_PREFETCH;
  t->d.kv_initial = t->d.kv_growth = 0;
  t->d.total = t->d.adapter;
  *released = n;
  assert(lsim__sound(r));
  return 0;
}

/* ---- KV objects ------------------------------------------------------------------- */

static lsim_err lsim__kv_get(const lsim_res *r, int kv, lsim_errbuf *eb) {
  if (kv < 0 || kv >= r->nkvobj || !r->kv[kv].live)
    return lsim_fail(eb, LSIM_E_RES_OWNERSHIP, "KV object %d is not live", kv);
  return 0;
}

lsim_err lsim_res_kv_pages(const lsim_res *r, int kv, int64_t *owned,
                           int64_t *used, lsim_errbuf *eb) {
  lsim_err rc = lsim__kv_get(r, kv, eb);
  if (rc)
    return rc;
  *owned = r->kv[kv].n;
  *used = r->kv[kv].used;
  return 0;
}

lsim_err lsim_res_kv_grow(lsim_res *r, int kv, int64_t used, lsim_errbuf *eb) {
  lsim_err rc = lsim__kv_get(r, kv, eb);
  if (rc)
    return rc;
  lsim__kv *k = &r->kv[kv];
  if (used > k->n)
    return lsim_fail(eb, LSIM_E_RES_GROWTH,
                     "KV of request %lld needs %lld pages but owns %lld: the "
                     "decode-growth reserve was omitted or too small",
                     (long long)k->request, (long long)used, (long long)k->n);
  if (used > k->used)
    k->used = used;
  return 0;
}

lsim_err lsim_res_kv_extend(lsim_res *r, int kv, int64_t add,
                            lsim_errbuf *eb) {
  lsim_err rc = lsim__kv_get(r, kv, eb);
  if (rc)
    return rc;
  if (add < 0)
    return lsim_fail(eb, LSIM_E_USAGE, "kv_extend: negative page count");
  if (add == 0)
    return 0;
  lsim__kv *k = &r->kv[kv];
  if (r->nfree < add)
    return lsim_fail(eb, LSIM_E_RES_NOSPACE,
                     "KV of request %lld needs %lld more pages, %lld free",
                     (long long)k->request, (long long)add,
                     (long long)r->nfree);
  if (k->n + add > k->cap) {
    int64_t cap = k->cap ? k->cap : 8;
    while (cap < k->n + add)
      cap *= 2;
    int64_t *sl = realloc(k->slot, (size_t)cap * sizeof *sl);
    if (!sl)
      return lsim_fail(eb, LSIM_E_NOMEM, "out of memory growing KV");
    k->slot = sl;
    k->cap = cap;
  }
  /* the lowest free slots, as a reservation takes them */
  int64_t got = 0;
  for (int64_t need = add, i = r->free_hint; need > 0; i++) {
    if (r->s[i].state != LSIM_SLOT_FREE)
      continue;
    lsim__set(r, i, LSIM_SLOT_KV, kv, k->gen);
    k->slot[k->n++] = i;
    if (r->hooked)
      r->pg[got++] = i;
    need--;
    r->free_hint = i + 1;
  }
  qsort(k->slot, (size_t)k->n, sizeof *k->slot, lsim__cmp64);
  assert(lsim__sound(r));
  return lsim__hook(r, r->hk.kv, kv, k->gen, r->pg, got, 0, 0,
                    LSIM_RES_KV_ALLOC, eb);
}

lsim_err lsim_res_kv_absorb(lsim_res *r, int dst, int src, lsim_errbuf *eb) {
  lsim_err rc = lsim__kv_get(r, dst, eb);
  if (!rc)
    rc = lsim__kv_get(r, src, eb);
  if (rc)
    return rc;
  if (dst == src)
    return lsim_fail(eb, LSIM_E_USAGE, "kv_absorb: an object into itself");
  lsim__kv *d = &r->kv[dst], *s = &r->kv[src];
  if (r->hooked) {
    /* the pages change owner: a release from src, an alloc to dst */
    if ((rc = lsim__hook(r, r->hk.kv, src, s->gen, s->slot, s->n, 0, 0,
                         LSIM_RES_KV_RELEASE, eb)) ||
        (rc = lsim__hook(r, r->hk.kv, dst, d->gen, s->slot, s->n, 0, 0,
                         LSIM_RES_KV_ALLOC, eb)))
      return rc;
  }
  if (d->n + s->n > d->cap) {
    int64_t cap = d->cap ? d->cap : 8;
    while (cap < d->n + s->n)
      cap *= 2;
    int64_t *sl = realloc(d->slot, (size_t)cap * sizeof *sl);
    if (!sl)
      return lsim_fail(eb, LSIM_E_NOMEM, "out of memory growing KV");
    d->slot = sl;
    d->cap = cap;
  }
  for (int64_t j = 0; j < s->n; j++) {
    r->s[s->slot[j]].owner = dst; /* KV stays KV: counters unchanged */
    r->s[s->slot[j]].gen = d->gen;
    d->slot[d->n++] = s->slot[j];
  }
  qsort(d->slot, (size_t)d->n, sizeof *d->slot, lsim__cmp64);
  s->n = s->used = 0;
  s->live = 0;
  assert(lsim__sound(r));
  return 0;
}

lsim_err lsim_res_kv_release(lsim_res *r, int kv, lsim_errbuf *eb) {
  lsim_err rc = lsim__kv_get(r, kv, eb);
  if (rc)
    return rc;
  lsim__kv *k = &r->kv[kv];
  if ((rc = lsim__hook(r, r->hk.kv, kv, k->gen, k->slot, k->n, 0, 0,
                       LSIM_RES_KV_RELEASE, eb)))
    return rc;
  for (int64_t j = 0; j < k->n; j++)
    lsim__set(r, k->slot[j], LSIM_SLOT_FREE, -1, 0);
  k->n = k->used = 0;
  k->live = 0;
  assert(lsim__sound(r));
  return 0;
}

lsim_err lsim_res_kv_shrink(lsim_res *r, int kv, int64_t give,
                            lsim_errbuf *eb) {
  lsim_err rc = lsim__kv_get(r, kv, eb);
  if (rc)
    return rc;
  lsim__kv *k = &r->kv[kv];
  if (give < 0 || give >= k->n)
    return lsim_fail(eb, LSIM_E_USAGE, "kv_shrink: %lld of %lld pages",
                     (long long)give, (long long)k->n);
  if ((rc = lsim__hook(r, r->hk.kv, kv, k->gen, k->slot + (k->n - give), give,
                       0, 0, LSIM_RES_KV_RELEASE, eb)))
    return rc;
  for (; give > 0; give--)
    lsim__set(r, k->slot[--k->n], LSIM_SLOT_FREE, -1, 0);
  if (k->used > k->n)
    k->used = k->n;
  assert(lsim__sound(r));
  return 0;
}

/* A KV object taken straight from free slots (prefix-cache blocks): no
** transaction, no adapter, no eviction of adapters; lowest free first. */
lsim_err lsim_res_kv_alloc(lsim_res *r, int64_t owner, int64_t pages, int *kv,
                           lsim_errbuf *eb) {
  *kv = -1;
  if (pages < 1)
    return lsim_fail(eb, LSIM_E_USAGE, "KV allocation of %lld pages",
                     (long long)pages);
  if (pages > r->nfree)
    return lsim_fail(eb, LSIM_E_RES_NOSPACE, "KV allocation of %lld pages: "
                     "%lld free", (long long)pages, (long long)r->nfree);
  int h;
  if (lsim__kv_new(r, owner, &h))
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory allocating KV");
  lsim_err rc = lsim_res_kv_extend(r, h, pages, eb);
  if (rc) {
    r->kv[h].live = 0; /* nothing was taken: extend changes nothing on error */
    return rc;
  }
  r->kv[h].used = pages;
  *kv = h;
  return 0;
}

/* ---- test-only mutation ------------------------------------------------------------- */

void lsim_res__mutate_slot(lsim_res *r, int64_t i, int state, int64_t owner,
                           int64_t gen) {
  /* deliberately leaves every counter and list alone */
  r->s[i].state = state;
  r->s[i].owner = owner;
  r->s[i].gen = gen;
}

void lsim_res__set_host(lsim_res *r, int a, int verified) {
  r->a[a].host = verified;
}

void lsim_res__mutate_list(lsim_res *r, int a, int64_t k, int64_t slot) {
  r->a[a].slot[k] = slot;
}
