/*
** ext_prefix.c: the adapter-aware prefix cache as an engine extension
** (engine.h, lsim_engine_prefix; docs/PREFIX.md, "The prefix cache in the
** replay").  One lsim_prefix per worker on that worker's joint pool; a
** request's full blocks are looked up when it is admitted (admit), its
** first row's blocks published when that row completes (first_row), its
** references released when it leaves (leave), and unreferenced blocks
** reclaimed under pool pressure (reclaim).  The core sees only r->reuse
** (prompt tokens the admission reuses) and r->kv_lent (KV pages the
** request gave up because cache blocks hold those rows).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_impl.h"

/* Engine-level state. */
typedef struct lsim__pxs {
  int mode;               /* enum lsim_kv_key_mode */
  int64_t bt;             /* prompt tokens per block */
  int64_t ppb;            /* pool pages per block */
  lsim_kv_graph graph;
  lsim_kv_manifest m;     /* the manifest every request's keys start from */
  lsim_kv_adapter *ad;    /* [na] */
  lsim_prefix **pc;       /* [workers] the cache on each worker's pool */
} lsim__pxs;

/* Per-request slot. */
typedef struct lsim__pxr {
  int64_t *tok;   /* full blocks' hashes as pseudo tokens, or NULL */
  int n;
  int held;       /* holds a receipt (from admission to leaving) */
  int pub;        /* its blocks were published this admission */
  lsim_prefix_receipt rc;
  lsim_kv_keys keys, truth; /* until the publication */
} lsim__pxr;

static lsim__pxs *lsim__P(const lsim_engine *e) {
  return e->ext_st[LSIM_CORE_EXT_PREFIX];
}

static lsim__pxr *lsim__Q(const lsim_engine *e, const lsim_core_req *r) {
  return lsim_core_slot(e, r, LSIM_CORE_EXT_PREFIX);
}


/* prefix_evicted for the blocks the cache evicted since its counter read
** `before` (value: tokens; generation: blocks). */
static lsim_err lsim__px_evicted(lsim_engine *e, int wi, lsim_tick now,
                                 int64_t before, const char *why,
                                 lsim_errbuf *eb) {
  lsim__pxs *P = lsim__P(e);
  lsim_prefix_stats st;
  lsim_prefix_stats_get(P->pc[wi], &st);
  int64_t n = st.evictions - before;
  if (n <= 0)
    return 0;
  return lsim_core_emit(e, now, LSIM_EV_PREFIX_EVICTED, wi, LSIM_NONE, LSIM_NONE,
                    LSIM_NONE, n, 0, n * P->ppb,
                    n * P->ppb * e->cfg.page_bytes, n * P->bt, why, eb);
}

/* Make `want` slots free on worker wi by evicting unreferenced blocks
** (least recently released first), before a transaction or a decode page
** would otherwise find too few. */
static lsim_err lsim__px_reclaim(lsim_engine *e, int wi, lsim_tick now,
                                 int64_t want, lsim_errbuf *eb) {
  lsim__pxs *P = lsim__P(e);
  if (!P->pc[wi])
    return 0;
  lsim_res_view v;
  lsim_res_view_get(e->w[wi].res, &v);
  if (v.free >= want)
    return 0;
  lsim_prefix_stats st;
  lsim_prefix_stats_get(P->pc[wi], &st);
  lsim_err rc = lsim_prefix_reclaim(P->pc[wi], want, NULL, eb);
  if (rc)
    return rc;
  return lsim__px_evicted(e, wi, now, st.evictions, "reclaim", eb);
}

/* The request keeps no copy of rows its receipt's blocks hold: its KV
** object gives `want` pages (at most all but one) to the pool, or takes
** back what it gave beyond `want`. */
static lsim_err lsim__px_give(lsim_engine *e, int wi, lsim_core_req *r,
                              int64_t want, lsim_errbuf *eb) {
  int64_t cap = r->kv_lent + r->kv_pages - 1;
  if (want > cap)
    want = cap;
  if (want < 0)
    want = 0;
  lsim_err rc = 0;
  if (want > r->kv_lent)
    rc = lsim_res_kv_shrink(e->w[wi].res, r->kv, want - r->kv_lent, eb);
  else if (want < r->kv_lent)
    rc = lsim_res_kv_extend(e->w[wi].res, r->kv, r->kv_lent - want, eb);
  if (rc)
    return rc;
  r->kv_pages -= want - r->kv_lent;
  r->kv_lent = want;
  return 0;
}

/* Admission: look the request's full blocks up and size its first row.
** Emits prefix_hit (generation: hit blocks, attempt: full blocks looked
** up, pages: the hit's pages, value: reused tokens) and, for a hit whose
** rows another adapter's execution computed (oblivious keys only),
** prefix_corrupt (generation: such blocks, value: their tokens). */
static lsim_err lsim__px_admit(lsim_engine *e, int wi, lsim_core_req *r,
                               lsim_tick now, lsim_errbuf *eb) {
  lsim__pxs *P = lsim__P(e);
  lsim__pxr *q = lsim__Q(e, r);
  r->reuse = 0;
  if (!P->pc[wi] || q->n < 1 || q->held)
    return 0;
  lsim_kv_manifest m = P->m;
  /* a hotswapped artifact is another execution: the version its lease
  ** names enters the semantic ABI (version 0: the catalog's) */
  lsim_kv_adapter ad = P->ad[r->adapter];
  if (r->version > 0) {
    char buf[96];
    int n = snprintf(buf, sizeof buf, "lorasim-replay-prefix:semantic:%d:v%d",
                     r->adapter, r->version);
    lsim_sha256(buf, (size_t)n, &ad.semantic, NULL);
  }
  if (ad.kind == LSIM_KV_ALORA) { /* invoked by its own last block */
    ad.invocation = q->tok + (q->n - 1);
    ad.ninvocation = 1;
  }
  m.adapter = &ad;
  m.tokens = q->tok;
  m.ntokens = q->n;
  lsim_err rc = lsim_kv_keys_derive(&m, P->mode, &q->keys, eb);
  const lsim_kv_keys *truth = NULL;
  if (!rc && P->mode == LSIM_KV_KEYS_OBLIVIOUS) {
    /* the correct keys beside the study's: a hit is corrupt when the
    ** block's own correct key differs from the requester's */
    rc = lsim_kv_keys_derive(&m, LSIM_KV_KEYS_ALORA, &q->truth, eb);
    truth = &q->truth;
  }
  if (!rc)
    rc = lsim_prefix_lookup(P->pc[wi], 0, &m.isolation, &q->keys, truth,
                            r->adapter, &q->rc, eb);
  if (rc) {
    lsim_kv_keys_release(&q->keys);
    lsim_kv_keys_release(&q->truth);
    return rc;
  }
  q->held = 1;
  q->pub = 0;
  int64_t hit = q->rc.hit_blocks, t = hit * P->bt;
  if (hit > 0 && (rc = lsim__px_give(e, wi, r, hit * P->ppb, eb)))
    return rc;
  r->reuse = (int)(t < r->prompt - 1 ? t : r->prompt - 1);
  rc = lsim_core_emit(e, now, LSIM_EV_PREFIX_HIT, wi, r->id, r->tenant,
                  r->adapter, hit, q->n, hit * P->ppb,
                  hit * P->ppb * e->cfg.page_bytes, r->reuse,
                  hit ? "hit" : "miss", eb);
  int64_t bad = q->rc.corrupt_blocks;
  if (!rc && bad > 0)
    rc = lsim_core_emit(e, now, LSIM_EV_PREFIX_CORRUPT, wi, r->id, r->tenant,
                    r->adapter, bad, 0, bad * P->ppb,
                    bad * P->ppb * e->cfg.page_bytes, bad * P->bt,
                    "oblivious", eb);
  return rc;
}

/* The first row completed: publish the request's full blocks past its
** hit.  prefix_published: generation = blocks newly published (new pool
** pages), attempt = blocks another request had published meanwhile
** (shared, no pages), value = tokens of the new blocks. */
static lsim_err lsim__px_publish(lsim_engine *e, int wi, lsim_core_req *r,
                                 lsim_tick now, lsim_errbuf *eb) {
  lsim__pxs *P = lsim__P(e);
  lsim__pxr *q = lsim__Q(e, r);
  if (!P->pc[wi] || !q->held || q->pub)
    return 0;
  lsim_prefix_stats s0, s1;
  lsim_prefix_stats_get(P->pc[wi], &s0);
  int64_t n = 0;
  /* the request's own copy of the blocks it is about to publish goes
  ** first, so that publishing moves rows instead of doubling them */
  lsim_err rc = lsim__px_give(e, wi, r, q->n * P->ppb, eb);
  if (rc)
    return rc;
  rc = lsim_prefix_publish(
      P->pc[wi], &q->rc, &q->keys, q->truth.key ? &q->truth : NULL,
      r->adapter, -1, &n, eb);
  q->pub = 1;
  lsim_kv_keys_release(&q->keys);
  lsim_kv_keys_release(&q->truth);
  /* what did not get published (pool or index full) stays the request's */
  if (!rc)
    rc = lsim__px_give(e, wi, r, q->rc.nblocks * P->ppb, eb);
  if (rc)
    return rc;
  lsim_prefix_stats_get(P->pc[wi], &s1);
  if ((rc = lsim__px_evicted(e, wi, now, s0.evictions, "publish", eb)))
    return rc;
  int64_t shared = s1.shared_publish - s0.shared_publish, fresh = n - shared;
  if (n <= 0)
    return 0;
  return lsim_core_emit(e, now, LSIM_EV_PREFIX_PUBLISHED, wi, r->id, r->tenant,
                    r->adapter, fresh, (int)shared, fresh * P->ppb,
                    fresh * P->ppb * e->cfg.page_bytes, fresh * P->bt,
                    NULL, eb);
}

/* The request leaves (finish, cancel, preemption, end of run): its
** references go back; published blocks stay cached until evicted. */
static lsim_err lsim__px_release(lsim_engine *e, int wi, lsim_core_req *r,
                                 lsim_errbuf *eb) {
  lsim__pxs *P = lsim__P(e);
  lsim__pxr *q = lsim__Q(e, r);
  lsim_kv_keys_release(&q->keys);
  lsim_kv_keys_release(&q->truth);
  r->reuse = 0;
  if (!q->held)
    return 0;
  q->held = q->pub = 0;
  r->kv_lent = 0; /* its KV object goes back right after */
  return lsim_prefix_unref(P->pc[wi], &q->rc, eb);
}

static lsim_digest lsim__px_dg(const char *what, int a) {
  char buf[96];
  lsim_digest d;
  int n = snprintf(buf, sizeof buf, "lorasim-replay-prefix:%s:%d", what, a);
  lsim_sha256(buf, (size_t)n, &d, NULL);
  return d;
}

/* Every catalog adapter adapts q, k, v and o of layer 0 (K/V change from
** layer 0).  An ordinary LoRA shares nothing with another adapter or the
** base under a correct key mode; an aLoRA ($.prefix_cache.alora_fraction)
** shares the blocks before its activation under semantic_alora. */
static const lsim_kv_target lsim__px_targets[4] = {
    {0, LSIM_KV_Q}, {0, LSIM_KV_K}, {0, LSIM_KV_V}, {0, LSIM_KV_O}};

static lsim_err lsim__px_setup(lsim_engine *e, void *st, int *on,
                               lsim_errbuf *eb) {
  lsim__pxs *P = st;
  const lsim_engine_prefix *p = e->cfg.prefix;
  if (!p) {
    *on = 0;
    return 0;
  }
  if (!lsim_kv_key_mode_name(p->mode) || p->block_tokens < 1 ||
      p->max_blocks < 0 || p->layers < 1 || p->layers > LSIM_KV_MAX_LAYERS)
    return lsim_fail(eb, LSIM_E_KV_CFG, "prefix cache: mode %d, block_tokens "
                     "%lld, max_blocks %lld, layers %d", p->mode,
                     (long long)p->block_tokens, (long long)p->max_blocks,
                     p->layers);
  int na = e->cfg.nadapters;
  P->mode = p->mode;
  P->bt = p->block_tokens;
  P->ppb = lsim_core_kv_pages(e, p->block_tokens);
  if (P->ppb < 1)
    P->ppb = 1;
  int64_t maxb = p->max_blocks ? p->max_blocks : e->cfg.pool_pages / P->ppb;
  if (maxb < 1)
    return lsim_fail(eb, LSIM_E_KV_CFG, "prefix cache: a block of %lld "
                     "tokens takes %lld pages, more than the pool's %lld",
                     (long long)p->block_tokens, (long long)P->ppb,
                     (long long)e->cfg.pool_pages);
  P->ad = calloc((size_t)na, sizeof *P->ad);
  P->pc = calloc((size_t)e->cfg.workers, sizeof *P->pc);
  if (!P->ad || !P->pc)
    return lsim_fail(eb, LSIM_E_NOMEM, "prefix cache: out of memory");
  P->graph.arch = LSIM_KV_ARCH_SERIAL;
  P->graph.layers = p->layers;
  P->graph.revision = lsim__px_dg("graph", 0);
  memset(&P->m, 0, sizeof P->m);
  P->m.base_abi = lsim__px_dg("base", 0);
  P->m.cache_abi = lsim__px_dg("cache", 0);
  P->m.graph = &P->graph;
  P->m.side_inputs = lsim__px_dg("no side inputs", 0);
  P->m.isolation = lsim__px_dg("namespace", 0);
  P->m.block_tokens = 1; /* one block hash is one pseudo token */
  /* aLoRA ids: the fractional part of a times the golden ratio (in 64-bit
  ** fixed point) below the fraction -- spread over popular and rare ids
  ** alike, the same for every run */
  const uint64_t cut = p->alora_fraction >= 1 ? UINT64_MAX
                       : p->alora_fraction <= 0
                           ? 0
                           : (uint64_t)(p->alora_fraction * 18446744073709551616.0);
  for (int a = 0; a < na; a++) {
    lsim_kv_adapter *x = &P->ad[a];
    const uint64_t u = (uint64_t)a * UINT64_C(0x9E3779B97F4A7C15);
    x->kind = p->alora_fraction >= 1 || u < cut ? LSIM_KV_ALORA : LSIM_KV_LORA;
    x->offset_mode = LSIM_KV_OFFSET_DERIVE; /* read by aLoRA only */
    x->artifact = e->artifact[a];
    x->semantic = lsim__px_dg("semantic", a);
    x->raw_id = lsim__px_dg("alias", a);
    x->targets = lsim__px_targets;
    x->ntargets = 4;
    x->explicit_start = -1;
  }
  lsim_prefix_grant g = {0, P->m.isolation};
  lsim_prefix_cfg pc = {1, P->ppb, maxb, na, NULL, &g, 1};
  for (int i = 0; i < e->cfg.workers; i++) {
    pc.pool = e->w[i].res;
    lsim_err rc = lsim_prefix_new(&P->pc[i], &pc, eb);
    if (rc)
      return rc;
  }
  return 0;
}


/* The arrival: the hashes of the prompt's full blocks (a partial last
** block is never published nor matched). */
static lsim_err lsim__px_arrive(lsim_engine *e, void *st, lsim_core_req *r,
                                const uint64_t *blocks, int nblocks,
                                lsim_errbuf *eb) {
  lsim__pxs *P = st;
  lsim__pxr *q = lsim__Q(e, r);
  if (!blocks || nblocks <= 0)
    return 0;
  int64_t full = r->prompt / P->bt;
  int n = (int)(full < nblocks ? full : nblocks);
  if (n <= 0)
    return 0;
  q->tok = malloc((size_t)n * sizeof *q->tok);
  if (!q->tok)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory admitting request");
  for (int i = 0; i < n; i++)
    q->tok[i] = (int64_t)(blocks[i] & (uint64_t)INT64_MAX);
  q->n = n;
  return 0;
}

static lsim_err lsim__px_h_admit(lsim_engine *e, void *st, int wi,
                                 lsim_core_req *r, lsim_tick now,
                                 lsim_errbuf *eb) {
  (void)st;
  return lsim__px_admit(e, wi, r, now, eb);
}

static lsim_err lsim__px_h_first_row(lsim_engine *e, void *st, int wi,
                                     lsim_core_req *r, lsim_tick now,
                                     lsim_errbuf *eb) {
  (void)st;
  return lsim__px_publish(e, wi, r, now, eb);
}

static lsim_err lsim__px_h_leave(lsim_engine *e, void *st, int wi,
                                 lsim_core_req *r, lsim_errbuf *eb) {
  (void)st;
  return lsim__px_release(e, wi, r, eb);
}

static lsim_err lsim__px_h_reclaim(lsim_engine *e, void *st, int wi,
                                   lsim_tick now, int64_t want,
                                   lsim_errbuf *eb) {
  (void)st;
  return lsim__px_reclaim(e, wi, now, want, eb);
}

/* The cache's blocks are KV objects of the worker's pool (I2 counts them);
** lsim_prefix_check checks the cache's own index, LRU and references. */
static int lsim__px_sound(const lsim_engine *e, const void *st, int wi,
                          int64_t *kv, int *ref) {
  const lsim__pxs *P = st;
  (void)e;
  (void)ref; /* blocks hold no adapter reference */
  lsim_prefix_stats ps;
  lsim_prefix_stats_get(P->pc[wi], &ps);
  *kv += ps.pool_pages;
  return !lsim_prefix_check(P->pc[wi], NULL);
}

/* A receipt was released where the request left; its keys with it. */
static void lsim__px_req_free(lsim_engine *e, void *st, lsim_core_req *r) {
  lsim__pxr *q = lsim__Q(e, r);
  (void)st;
  lsim_kv_keys_release(&q->keys);
  lsim_kv_keys_release(&q->truth);
  free(q->tok);
  q->tok = NULL;
  q->n = 0;
}

/* Receipts of requests still live go back, then each worker's cache. */
static void lsim__px_free(lsim_engine *e, void *st) {
  lsim__pxs *P = st;
  for (int i = 0; P->pc && e->w && i < e->cfg.workers; i++) {
    lsim_core_list *lists[2] = {&e->w[i].waiting, &e->w[i].running};
    for (int k = 0; k < 2; k++)
      for (lsim_core_req *r = lists[k]->head; r; r = r->next) {
        lsim__pxr *q = lsim__Q(e, r);
        if (q->held && P->pc[i])
          lsim__px_release(e, i, r, NULL);
        lsim__px_req_free(e, st, r);
      }
    lsim_prefix_release(P->pc[i]);
  }
  free(P->pc);
  free(P->ad);
}

void lsim_engine_prefix_stats(const lsim_engine *e, int w,
                              lsim_prefix_stats *out) {
  const lsim__pxs *P = lsim__P(e);
  if (P && P->pc[w])
    lsim_prefix_stats_get(P->pc[w], out);
  else
    memset(out, 0, sizeof *out);
}

const lsim_core_ext lsim_ext_prefix = {
    .name = "prefix",
    .state_size = sizeof(lsim__pxs),
    .req_state_size = sizeof(lsim__pxr),
    .setup = lsim__px_setup,
    .release = lsim__px_free,
    .arrive = lsim__px_arrive,
    .admit = lsim__px_h_admit,
    .first_row = lsim__px_h_first_row,
    .leave = lsim__px_h_leave,
    .reclaim = lsim__px_h_reclaim,
    .sound = lsim__px_sound,
    .req_free = lsim__px_req_free,
};
