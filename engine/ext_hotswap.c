/*
** ext_hotswap.c: replay-driven hotswap and request leases as an engine
** extension (engine.h, lsim_engine_hotswap; docs/RESIDENCY.md,
** "Replay-driven hotswap").  Each worker keeps an alias catalog
** (hotswap.h) whose aliases are the adapters, plus one fresh alias per
** new_alias hotswap.  A request resolves its adapter's alias once, when it
** is admitted to run (admit), into a lease that every launch checks
** (launch), whose slot the iteration's completion marks used (fence), and
** that it gives back when it leaves its worker (left, unless it stays
** preempted on it; migrate, when it moves).  Retiring slots are reaped
** after each iteration (iter_end).  The pool registers and validates the
** version the adapter's alias names on that worker (source, staged).  A
** hotswap's shadow copy is charged to the joint pool as a KV-type object
** until the old slot is reclaimed (sound counts it).
**
** The core sees none of this state but r->version, the artifact version a
** request's lease names (its plan row and the prefix cache's key read it).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_impl.h"

/* A worker's lease catalog (hotswap.h). */
typedef struct lsim__hsw {
  lsim_hs *hs;
  int nslots;
  int *alias;      /* [na] the alias adapter a resolves through */
  int *ver;        /* [naliases] version the alias names (or will name) */
  int *slot_ver;   /* [nslots] version staged or published in the slot */
  int64_t *shadow; /* [na] staged slot of a hotswap in flight, or -1 */
  int *shadow_alias, *shadow_ver, *shadow_mode; /* [na] */
  lsim_hs_handle *shadow_expect; /* [na] handle the CAS expects */
  int *drain;      /* [na] version waiting for drain_then_overwrite, or 0 */
  int active;      /* a retiring slot or a drain may be pending: reap looks */
  /* The joint pool's charge for a copy beside the live one (M_old + M_new,
  ** docs/RESIDENCY.md): a KV-type object of the adapter's pages, bound to
  ** the adapter, from staging until the old slot is reclaimed. */
  int *shadow_kv;  /* [na] charge of the staged copy, or -1 */
  int *slot_kv;    /* [nslots] charge held until this retiring slot goes */
  int *slot_kv_a;  /* [nslots] the adapter of that charge */
  int *reg_ver;    /* [na] version whose digest the pool registered */
} lsim__hsw;

/* Engine-level state: latest version requested per adapter, the alias
** space, one catalog per worker. */
typedef struct lsim__hss {
  int *version;       /* [na] */
  int *alias_adapter; /* [aliases] */
  int aliases, next_alias;
  lsim__hsw *w;       /* [workers] */
} lsim__hss;

/* Per-request slot. */
typedef struct lsim__hsr {
  lsim_hs_lease lease; /* resolved once, when admitted to run */
} lsim__hsr; /* r->version is the version its lease names */

static lsim__hss *lsim__H(const lsim_engine *e) {
  return e->ext_st[LSIM_CORE_EXT_HOTSWAP];
}

static lsim__hsr *lsim__L(const lsim_engine *e, const lsim_core_req *r) {
  return lsim_core_slot(e, r, LSIM_CORE_EXT_HOTSWAP);
}


static const char *const lsim__hsm_names[] = {"shadow", "drain_then_overwrite",
                                              "new_alias"};

const char *lsim_hs_mode_name(int mode) {
  return mode >= 0 && mode < 3 ? lsim__hsm_names[mode] : NULL;
}

static int lsim__hs_setup(lsim_engine *e, lsim__hss *H) {
  int na = e->cfg.nadapters;
  if (e->cfg.max_hotswaps < 0)
    return 0;
  H->aliases = na + e->cfg.max_hotswaps;
  H->next_alias = na;
  H->version = calloc((size_t)na, sizeof *H->version);
  H->alias_adapter = malloc((size_t)H->aliases * sizeof *H->alias_adapter);
  H->w = calloc((size_t)e->cfg.workers, sizeof *H->w);
  if (!H->version || !H->alias_adapter || !H->w)
    return 0;
  for (int i = 0; i < H->aliases; i++)
    H->alias_adapter[i] = i < na ? i : -1;
  return 1;
}

static int lsim__hs_worker_init(lsim_engine *e, lsim__hss *H, lsim__hsw *h) {
  int na = e->cfg.nadapters;
  /* every adapter's live slot, plus a retiring and a staged slot per
  ** hotswap the run may make */
  h->nslots = na + 2 * e->cfg.max_hotswaps + 1;
  if (lsim_hs_new(&h->hs, h->nslots, H->aliases, NULL))
    return 0;
  h->alias = malloc((size_t)na * sizeof *h->alias);
  h->ver = calloc((size_t)H->aliases, sizeof *h->ver);
  h->slot_ver = calloc((size_t)h->nslots, sizeof *h->slot_ver);
  h->shadow = malloc((size_t)na * sizeof *h->shadow);
  h->shadow_alias = calloc((size_t)na * 4, sizeof *h->shadow_alias);
  h->shadow_expect = calloc((size_t)na, sizeof *h->shadow_expect);
  if (!h->alias || !h->ver || !h->slot_ver || !h->shadow || !h->shadow_alias ||
      !h->shadow_expect)
    return 0;
  h->shadow_ver = h->shadow_alias + na;
  h->shadow_mode = h->shadow_alias + 2 * na;
  h->drain = h->shadow_alias + 3 * na;
  h->shadow_kv = malloc((size_t)na * sizeof *h->shadow_kv);
  h->reg_ver = calloc((size_t)na, sizeof *h->reg_ver);
  h->slot_kv = malloc((size_t)h->nslots * sizeof *h->slot_kv);
  h->slot_kv_a = malloc((size_t)h->nslots * sizeof *h->slot_kv_a);
  if (!h->shadow_kv || !h->reg_ver || !h->slot_kv || !h->slot_kv_a)
    return 0;
  for (int a = 0; a < na; a++) {
    h->alias[a] = a;
    h->shadow[a] = -1;
    h->shadow_kv[a] = -1;
  }
  for (int i = 0; i < h->nslots; i++)
    h->slot_kv[i] = h->slot_kv_a[i] = -1;
  return 1;
}

static void lsim__hs_worker_release(lsim__hsw *h) {
  lsim_hs_release_all(h->hs);
  free(h->alias);
  free(h->ver);
  free(h->slot_ver);
  free(h->shadow);
  free(h->shadow_alias);
  free(h->shadow_expect);
  free(h->shadow_kv);
  free(h->reg_ver);
  free(h->slot_kv);
  free(h->slot_kv_a);
}

/* The request id a hotswap charge's KV object carries: outside the trace's
** id space, one per adapter (one replacement at a time per adapter). */
#define LSIM__HS_CHARGE_ID(a) (((int64_t)1 << 62) | (int64_t)(a))

/*
** Charge the joint pool for a copy of adapter a staged beside its live
** version on worker wi: a KV-type object of e->pages[a] pages, reserved
** through the ordinary admission path (victims chosen by the eviction
** policy, never a itself), bound to a so that the live version cannot be
** evicted while its successor is being copied.  *kv = -1 and *ok = 1 when a
** has no live version in the pool (nothing is beside it); *ok = 0 when the
** pool has no room.
*/
static lsim_err lsim__hs_charge(lsim_engine *e, int wi, int a, lsim_tick now,
                                int *kv, int *ok, lsim_errbuf *eb) {
  lsim_core_worker *w = &e->w[wi];
  *kv = -1;
  *ok = 1;
  int st = lsim_core_av(w, a).state;
  if (st != LSIM_RS_PUBLISHED && st != LSIM_RS_ACTIVE && st != LSIM_RS_IDLE)
    return 0;
  lsim_res_req q = {LSIM_TXN_KV, a, LSIM__HS_CHARGE_ID(a), e->pages[a], 0};
  int64_t txn;
  int nv, relaxed;
  lsim_err rc = lsim_core_begin(e, wi, now, &q, 0, &txn, e->vict, &nv, &relaxed,
                            ok, eb);
  if (rc || !*ok)
    return rc;
  if ((rc = lsim_core_emit_victims(e, wi, now, e->vict, nv, 0, eb)) ||
      (rc = lsim_res_commit(w->res, txn, now, kv, eb)) ||
      (rc = lsim_core_emit_retired(e, wi, now, e->vict, nv, eb)))
    return rc;
  return lsim_core_emit(e, now, LSIM_EV_KV_RESERVED, wi, LSIM_NONE,
                    lsim_core_tenant_of(e, a), a, lsim_core_av(w, a).generation, 0,
                    e->pages[a], e->pages[a] * e->cfg.page_bytes, 0,
                    "hotswap_shadow", eb);
}

static lsim_err lsim__hs_uncharge(lsim_engine *e, int wi, int a, int kv,
                                  lsim_tick now, lsim_errbuf *eb) {
  lsim_core_worker *w = &e->w[wi];
  if (kv < 0)
    return 0;
  lsim_err rc;
  if ((rc = lsim_res_kv_release(w->res, kv, eb)) ||
      (rc = lsim_res_unbind(w->res, a, now, eb)))
    return rc;
  return lsim_core_emit(e, now, LSIM_EV_KV_RELEASED, wi, LSIM_NONE,
                    lsim_core_tenant_of(e, a), a, lsim_core_av(w, a).generation, 0,
                    e->pages[a], e->pages[a] * e->cfg.page_bytes, 0,
                    "hotswap_shadow", eb);
}

/* The artifact digest of version v of adapter a (v 0: the catalog's). */
static lsim_err lsim__hs_digest(const lsim_engine *e, int a, int v,
                                lsim_digest *out) {
  if (v == 0) {
    *out = e->artifact[a];
    return 0;
  }
  char id[128];
  int n = snprintf(id, sizeof id,
                   "lorasim-artifact:%d:rank=%d:bytes=%lld:version=%d", a,
                   e->rank[a], (long long)e->bytes[a], v);
  return lsim_sha256(id, (size_t)n, out, NULL);
}

/*
** Hotswap and lease events share one column layout (docs/SCHEMA.md):
** generation = catalog generation, attempt = artifact version, pages =
** slot, value = slot generation, bytes = pointer generation.
*/
static lsim_err lsim__hs_emit_h(lsim_engine *e, lsim_tick now, int kind,
                                int wi, int64_t request, int a, int version,
                                int64_t cgen, const lsim_hs_handle *hd,
                                const char *detail, lsim_errbuf *eb) {
  return lsim_core_emit(e, now, kind, wi, request, lsim_core_tenant_of(e, a), a, cgen,
                    version, hd ? hd->slot : LSIM_NONE,
                    hd ? hd->ptr_gen : 0, hd ? hd->slot_gen : 0, detail, eb);
}

/* Same, with the slot's current generations and the current catalog. */
static lsim_err lsim__hs_emit(lsim_engine *e, lsim_tick now, int kind, int wi,
                              int a, int version, int64_t slot,
                              const char *detail, lsim_errbuf *eb) {
  lsim__hsw *h = &lsim__H(e)->w[wi];
  lsim_hs_handle hd = {slot, 0, 0, LSIM_DIGEST_INIT};
  lsim_hs_slot_view v;
  if (slot >= 0 && !lsim_hs_slot(h->hs, slot, &v, NULL)) {
    hd.slot_gen = v.slot_gen;
    hd.ptr_gen = v.ptr_gen;
  }
  return lsim__hs_emit_h(e, now, kind, wi, LSIM_NONE, a, version,
                         lsim_hs_catalog_gen(h->hs), slot >= 0 ? &hd : NULL,
                         detail, eb);
}

/* Admission: resolve the adapter's alias once into r's lease.  The first
** use on a worker maps the alias to the version it names (the residency
** load already copied the bytes; no event). */
static lsim_err lsim__hs_bind(lsim_engine *e, int wi, lsim_core_req *r,
                              lsim_tick now, lsim_errbuf *eb) {
  lsim__hsw *h = &lsim__H(e)->w[wi];
  int a = r->adapter, al = h->alias[a];
  lsim_hs_handle cur;
  lsim_err rc = lsim_hs_lookup(h->hs, al, &cur, eb);
  if (rc)
    return rc;
  if (cur.slot < 0) {
    lsim_hs_handle none = {-1, 0, 0, LSIM_DIGEST_INIT};
    lsim_digest d;
    int64_t slot;
    if ((rc = lsim__hs_digest(e, a, h->ver[al], &d)) ||
        (rc = lsim_hs_stage(h->hs, al, &d, -1, &slot, eb)) ||
        (rc = lsim_hs_copy_done(h->hs, slot, 1, &d, 0, 1, eb)) ||
        (rc = lsim_hs_publish(h->hs, al, &none, slot, NULL, eb)))
      return rc;
    h->slot_ver[slot] = h->ver[al];
  }
  if ((rc = lsim_hs_resolve(h->hs, al, &lsim__L(e, r)->lease, eb)))
    return rc;
  r->version = h->slot_ver[lsim__L(e, r)->lease.h.slot];
  if (!e->cfg.log_leases)
    return 0;
  return lsim__hs_emit_h(e, now, LSIM_EV_LEASE_BOUND, wi, r->id, a,
                         r->version, lsim__L(e, r)->lease.catalog_gen, &lsim__L(e, r)->lease.h, NULL,
                         eb);
}

/* Every launch checks each request's lease against its slot. */
static lsim_err lsim__hs_launch(lsim_engine *e, void *st, int wi,
                                lsim_plan *plan, lsim_errbuf *eb) {
  lsim__hss *H = st;
  const lsim_core_worker *w = &e->w[wi];
  for (int i = 0; i < w->nbatch; i++) {
    lsim__hsr *q = lsim__L(e, w->batch[i]);
    lsim_err rc = lsim_hs_launch(H->w[wi].hs, &q->lease, eb);
    if (rc)
      return rc;
  }
  (void)plan;
  return 0;
}

/* The iteration's completion event is the last-use event of its slots. */
static void lsim__hs_fence(lsim_engine *e, void *st, int wi) {
  lsim__hss *H = st;
  const lsim_core_worker *w = &e->w[wi];
  for (int i = 0; i < w->nbatch; i++) {
    const lsim__hsr *q = lsim__L(e, w->batch[i]);
    if (q->lease.bound)
      lsim_hs_event_complete(H->w[wi].hs, q->lease.h.slot, NULL);
  }
}

static lsim_err lsim__hs_unbind(lsim_engine *e, int wi, lsim_core_req *r,
                                lsim_tick now, lsim_errbuf *eb) {
  if (!lsim__L(e, r)->lease.bound)
    return 0;
  lsim_hs_lease l = lsim__L(e, r)->lease;
  lsim_err rc = lsim_hs_unlease(lsim__H(e)->w[wi].hs, &lsim__L(e, r)->lease, eb);
  if (rc || !e->cfg.log_leases)
    return rc;
  return lsim__hs_emit_h(e, now, LSIM_EV_LEASE_RELEASED, wi, r->id, r->adapter,
                         r->version, l.catalog_gen, &l.h, NULL, eb);
}

/* Reclaim every retiring slot with refcount 0 and its last-use event
** complete, then run the drains that became possible. */
static lsim_err lsim__hs_reap(lsim_engine *e, int wi, lsim_tick now,
                              lsim_errbuf *eb) {
  lsim__hsw *h = &lsim__H(e)->w[wi];
  lsim_err rc;
  /* Nothing retires and nothing drains until a hotswap happened on this
  ** worker: skip the scans (they are O(slots + adapters) per call). */
  if (!h->active)
    return 0;
  int pending = 0;
  for (int64_t s = 0; s < h->nslots; s++) {
    lsim_hs_slot_view v;
    if ((rc = lsim_hs_slot(h->hs, s, &v, eb)))
      return rc;
    if (v.state == LSIM_RS_RETIRING && (v.refcount || !v.event_complete))
      pending = 1;
    if (v.state != LSIM_RS_RETIRING || v.refcount || !v.event_complete)
      continue;
    int a = v.alias >= 0 ? lsim__H(e)->alias_adapter[v.alias] : LSIM_NONE;
    if ((rc = lsim_hs_reclaim(h->hs, s, eb)) ||
        (rc = lsim__hs_emit(e, now, LSIM_EV_SLOT_RECLAIMED, wi, a,
                            h->slot_ver[s], s, NULL, eb)))
      return rc;
    if (h->slot_kv[s] >= 0) {
      int kv = h->slot_kv[s], ka = h->slot_kv_a[s];
      h->slot_kv[s] = h->slot_kv_a[s] = -1;
      if ((rc = lsim__hs_uncharge(e, wi, ka, kv, now, eb)))
        return rc;
    }
  }
  for (int a = 0; a < e->cfg.nadapters; a++) {
    if (!h->drain[a])
      continue;
    int al = h->alias[a], v = h->drain[a];
    lsim_hs_handle cur;
    lsim_hs_slot_view sv;
    if ((rc = lsim_hs_lookup(h->hs, al, &cur, eb)) ||
        (rc = lsim_hs_slot(h->hs, cur.slot, &sv, eb)))
      return rc;
    if (sv.refcount || !sv.event_complete) {
      pending = 1;
      continue;
    }
    lsim_digest d;
    lsim_hs_handle nh;
    if ((rc = lsim__hs_digest(e, a, v, &d)) ||
        (rc = lsim_hs_overwrite(h->hs, al, &d, &nh, eb)))
      return rc;
    h->slot_ver[nh.slot] = v;
    h->ver[al] = v;
    h->drain[a] = 0;
    if ((rc = lsim__hs_emit(e, now, LSIM_EV_HOTSWAP_PUBLISHED, wi, a, v,
                            nh.slot, lsim__hsm_names[LSIM_HSM_DRAIN], eb)))
      return rc;
  }
  h->active = pending;
  return 0;
}

lsim_err lsim_engine_hotswap(lsim_engine *e, lsim_tick now, int a, int mode,
                             lsim_hs_copy *copies, int maxcopies,
                             int *ncopies, lsim_errbuf *eb) {
  *ncopies = 0;
  if (e->k)
    return lsim_fail(eb, LSIM_E_CMP_SERVE_CONFLICT,
                     "hotswap of adapter %d: a compressed collection changes "
                     "by a new bundle version, not one core at a time", a);
  if (a < 0 || a >= e->cfg.nadapters || !lsim_hs_mode_name(mode))
    return lsim_fail(eb, LSIM_E_STATE, "hotswap: adapter %d or mode %d", a,
                     mode);
  int nal = -1;
  if (mode == LSIM_HSM_NEW_ALIAS) {
    if (lsim__H(e)->next_alias >= lsim__H(e)->aliases)
      return lsim_fail(eb, LSIM_E_STATE,
                       "hotswap: more new aliases than max_hotswaps (%d)",
                       e->cfg.max_hotswaps);
    nal = lsim__H(e)->next_alias++;
    lsim__H(e)->alias_adapter[nal] = a;
  }
  int v = ++lsim__H(e)->version[a];
  for (int i = 0; i < e->cfg.workers; i++)
    lsim__H(e)->w[i].active = 1; /* reap looks again on every worker */
  lsim_err rc = lsim_core_emit(e, now, LSIM_EV_HOTSWAP_REQUESTED, LSIM_NONE,
                           LSIM_NONE, lsim_core_tenant_of(e, a), a, LSIM_NONE, v,
                           LSIM_NONE, 0, 0, lsim__hsm_names[mode], eb);
  for (int wi = 0; !rc && wi < e->cfg.workers; wi++) {
    lsim__hsw *h = &lsim__H(e)->w[wi];
    int al = h->alias[a];
    lsim_hs_handle cur;
    if ((rc = lsim_hs_lookup(h->hs, al, &cur, eb)))
      break;
    if (h->shadow[a] >= 0 || h->drain[a]) {
      /* one replacement at a time per adapter and worker */
      rc = lsim__hs_emit(e, now, LSIM_EV_HOTSWAP_ABORTED, wi, a, v, -1,
                         "busy", eb);
      continue;
    }
    if (cur.slot < 0) {
      /* never mapped here: the first binding takes the new version */
      if (nal >= 0)
        h->alias[a] = al = nal;
      h->ver[al] = v;
      rc = lsim__hs_emit(e, now, LSIM_EV_HOTSWAP_PUBLISHED, wi, a, v, -1,
                         "cold", eb);
      continue;
    }
    if (mode == LSIM_HSM_DRAIN) {
      h->drain[a] = v; /* new admissions of a wait until the slot drains */
      rc = lsim__hs_emit(e, now, LSIM_EV_HOTSWAP_STAGED, wi, a, v, cur.slot,
                         lsim__hsm_names[mode], eb);
      continue;
    }
    int target = mode == LSIM_HSM_SHADOW ? al : nal;
    lsim_digest d;
    int64_t slot;
    lsim_errbuf tmp = LSIM_ERRBUF_INIT;
    if ((rc = lsim__hs_digest(e, a, v, &d)))
      break;
    rc = lsim_hs_stage(h->hs, target, &d, -1, &slot, &tmp);
    if (rc == LSIM_E_RES_NOSPACE) {
      rc = lsim__hs_emit(e, now, LSIM_EV_HOTSWAP_ABORTED, wi, a, v, -1,
                         "no_slot", eb);
      continue;
    }
    if (rc) {
      if (eb)
        *eb = tmp;
      break;
    }
    if (*ncopies >= maxcopies)
      return lsim_fail(eb, LSIM_E_STATE, "hotswap: more copies than room");
    int kv, room;
    if ((rc = lsim__hs_charge(e, wi, a, now, &kv, &room, eb)))
      break;
    if (!room) {
      /* the pool cannot hold both versions: the replacement waits for
      ** nothing and is refused here (drain_then_overwrite needs no room) */
      if ((rc = lsim_hs_abort(h->hs, slot, eb)))
        break;
      rc = lsim__hs_emit(e, now, LSIM_EV_HOTSWAP_ABORTED, wi, a, v, slot,
                         "no_pages", eb);
      continue;
    }
    h->shadow_kv[a] = kv;
    h->slot_ver[slot] = v;
    h->shadow[a] = slot;
    h->shadow_alias[a] = target;
    h->shadow_ver[a] = v;
    h->shadow_mode[a] = mode;
    if (mode == LSIM_HSM_SHADOW) {
      h->shadow_expect[a] = cur;
    } else {
      lsim_hs_handle none = {-1, 0, 0, LSIM_DIGEST_INIT};
      h->shadow_expect[a] = none;
    }
    copies[(*ncopies)++] = (lsim_hs_copy){wi, a, e->bytes[a], slot};
    rc = lsim__hs_emit(e, now, LSIM_EV_HOTSWAP_STAGED, wi, a, v, slot,
                       lsim__hsm_names[mode], eb);
  }
  for (int wi = 0; !rc && wi < e->cfg.workers; wi++)
    rc = lsim__hs_reap(e, wi, now, eb);
  return rc;
}

lsim_err lsim_engine_hotswap_done(lsim_engine *e, int wi, int a,
                                  lsim_tick now, int outcome,
                                  lsim_errbuf *eb) {
  if (wi < 0 || wi >= e->cfg.workers || a < 0 || a >= e->cfg.nadapters ||
      lsim__H(e)->w[wi].shadow[a] < 0)
    return lsim_fail(eb, LSIM_E_STATE,
                     "hotswap_done: no shadow copy of adapter %d on worker %d",
                     a, wi);
  lsim__hsw *h = &lsim__H(e)->w[wi];
  h->active = 1;
  int64_t slot = h->shadow[a];
  int v = h->shadow_ver[a], al = h->shadow_alias[a], mode = h->shadow_mode[a];
  lsim_digest staged;
  lsim_err rc = lsim__hs_digest(e, a, v, &staged);
  if (rc)
    return rc;
  if (outcome == LSIM_LOAD_DIGEST_BAD)
    staged.b[0] ^= 0x01; /* the world corrupted the staged bytes */
  lsim_errbuf tmp = LSIM_ERRBUF_INIT;
  rc = lsim_hs_copy_done(h->hs, slot, outcome != LSIM_LOAD_COPY_FAILED,
                         &staged, 0, 1, &tmp);
  if (rc == LSIM_E_RES_COPY || rc == LSIM_E_RES_DIGEST) {
    /* before publication: the shadow is discarded (generations + 1) and
    ** the catalog never changed */
    const char *why = rc == LSIM_E_RES_COPY ? "copy_failed" : "digest_failed";
    h->shadow[a] = -1;
    int kv = h->shadow_kv[a];
    h->shadow_kv[a] = -1;
    if ((rc = lsim_hs_abort(h->hs, slot, eb)) ||
        (rc = lsim__hs_uncharge(e, wi, a, kv, now, eb)))
      return rc;
    return lsim__hs_emit(e, now, LSIM_EV_HOTSWAP_ABORTED, wi, a, v, slot, why,
                         eb);
  }
  if (rc) {
    if (eb)
      *eb = tmp;
    return rc;
  }
  if ((rc = lsim__hs_emit(e, now, LSIM_EV_HOTSWAP_VALIDATED, wi, a, v, slot,
                          lsim__hsm_names[mode], eb)))
    return rc;
  lsim_hs_handle old;
  if ((rc = lsim_hs_lookup(h->hs, h->alias[a], &old, eb)) ||
      (rc = lsim_hs_publish(h->hs, al, &h->shadow_expect[a], slot, NULL, eb)))
    return rc;
  if (mode == LSIM_HSM_NEW_ALIAS) {
    /* the caller's migration: adapter a now resolves the new alias */
    if (old.slot >= 0 && (rc = lsim_hs_withdraw(h->hs, h->alias[a], eb)))
      return rc;
    h->alias[a] = al;
  }
  h->ver[al] = v;
  h->shadow[a] = -1;
  /* the charge stays until the old slot is reclaimed (M_old + M_new) */
  int kv = h->shadow_kv[a];
  h->shadow_kv[a] = -1;
  if (old.slot >= 0 && kv >= 0) {
    h->slot_kv[old.slot] = kv;
    h->slot_kv_a[old.slot] = a;
  } else if ((rc = lsim__hs_uncharge(e, wi, a, kv, now, eb))) {
    return rc;
  }
  if ((rc = lsim__hs_emit(e, now, LSIM_EV_HOTSWAP_PUBLISHED, wi, a, v, slot,
                          lsim__hsm_names[mode], eb)))
    return rc;
  if (old.slot >= 0 &&
      (rc = lsim__hs_emit(e, now, LSIM_EV_SLOT_RETIRING, wi, a,
                          h->slot_ver[old.slot], old.slot, NULL, eb)))
    return rc;
  return lsim__hs_reap(e, wi, now, eb);
}

/* ---- setup -------------------------------------------------------------- */


/* ---- hooks (engine_impl.h) ------------------------------------------------ */

static void lsim__hs_free(lsim_engine *e, void *st) {
  lsim__hss *H = st;
  for (int i = 0; H->w && i < e->cfg.workers; i++)
    lsim__hs_worker_release(&H->w[i]);
  free(H->w);
  free(H->version);
  free(H->alias_adapter);
}

static lsim_err lsim__hs_h_setup(lsim_engine *e, void *st, int *on,
                                 lsim_errbuf *eb) {
  lsim__hss *H = st;
  *on = 1;
  int ok = lsim__hs_setup(e, H);
  for (int i = 0; ok && i < e->cfg.workers; i++)
    ok = lsim__hs_worker_init(e, H, &H->w[i]);
  return ok ? 0
            : lsim_fail(eb, LSIM_E_NOMEM, "out of memory creating engine");
}

/* A preempted request keeps the lease it was admitted with. */
static lsim_err lsim__hs_h_admit(lsim_engine *e, void *st, int wi,
                                 lsim_core_req *r, lsim_tick now,
                                 lsim_errbuf *eb) {
  (void)st;
  return lsim__L(e, r)->lease.bound ? 0 : lsim__hs_bind(e, wi, r, now, eb);
}

static lsim_err lsim__hs_h_left(lsim_engine *e, void *st, int wi,
                                lsim_core_req *r, lsim_tick now, int keep,
                                lsim_errbuf *eb) {
  (void)st;
  return keep ? 0 : lsim__hs_unbind(e, wi, r, now, eb);
}

/* A lease names a slot of this worker's catalog: a migrated request
** resolves its alias again where it will run. */
static lsim_err lsim__hs_h_migrate(lsim_engine *e, void *st, int wi,
                                   lsim_core_req *r, int to, lsim_tick now,
                                   lsim_errbuf *eb) {
  (void)st;
  (void)to;
  return lsim__hs_unbind(e, wi, r, now, eb);
}

/* drain_then_overwrite: new work of the adapter waits for the swap. */
static int lsim__hs_h_hold(const lsim_engine *e, const void *st, int wi,
                           const lsim_core_req *r) {
  (void)e;
  return ((const lsim__hss *)st)->w[wi].drain[r->adapter] != 0;
}

static lsim_err lsim__hs_h_iter_end(lsim_engine *e, void *st, int wi,
                                    lsim_tick now, lsim_errbuf *eb) {
  (void)st;
  return lsim__hs_reap(e, wi, now, eb);
}

/* The host copy of the version adapter a's alias names on worker wi now
** (a reload after a hotswap loads the new version, not the catalog's). */
static lsim_err lsim__hs_h_source(lsim_engine *e, void *st, int wi, int a,
                                  int *version, lsim_digest *d,
                                  lsim_errbuf *eb) {
  lsim__hsw *h = &((lsim__hss *)st)->w[wi];
  int v = h->ver[h->alias[a]];
  lsim_err rc = lsim__hs_digest(e, a, v, d);
  if (rc)
    return rc;
  (void)eb;
  h->reg_ver[a] = v;
  *version = v;
  return 0;
}

/* The bytes of the version the pool registered for a's load. */
static lsim_err lsim__hs_h_staged(lsim_engine *e, void *st, int wi, int a,
                                  int *version, lsim_digest *d,
                                  lsim_errbuf *eb) {
  const lsim__hsw *h = &((lsim__hss *)st)->w[wi];
  (void)eb;
  *version = h->reg_ver[a];
  return lsim__hs_digest(e, a, *version, d);
}

/* Hotswap copies charged beside their live version: KV pages of the pool
** and a reference on their adapter each. */
static int lsim__hs_h_sound(const lsim_engine *e, const void *st, int wi,
                            int64_t *kv, int *ref) {
  const lsim__hsw *h = &((const lsim__hss *)st)->w[wi];
  for (int a = 0; a < e->cfg.nadapters; a++)
    if (h->shadow_kv[a] >= 0) {
      *kv += e->pages[a];
      ref[a]++;
    }
  for (int i = 0; i < h->nslots; i++)
    if (h->slot_kv[i] >= 0) {
      *kv += e->pages[h->slot_kv_a[i]];
      ref[h->slot_kv_a[i]]++;
    }
  return 1;
}

const lsim_core_ext lsim_ext_hotswap = {
    .name = "hotswap",
    .state_size = sizeof(lsim__hss),
    .req_state_size = sizeof(lsim__hsr),
    .setup = lsim__hs_h_setup,
    .release = lsim__hs_free,
    .admit = lsim__hs_h_admit,
    .left = lsim__hs_h_left,
    .migrate = lsim__hs_h_migrate,
    .hold = lsim__hs_h_hold,
    .launch = lsim__hs_launch,
    .fence = lsim__hs_fence,
    .iter_end = lsim__hs_h_iter_end,
    .source = lsim__hs_h_source,
    .staged = lsim__hs_h_staged,
    .sound = lsim__hs_h_sound,
};
