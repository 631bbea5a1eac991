/*
** prefix.c: the adapter-aware prefix cache (prefix.h).
**
** Invariants, checked by lsim_prefix_check():
**
**   P1  a live block owns exactly one live KV object of the pool with
**       pages_per_block pages; a dead block owns none.  So the pool's KV
**       pages that belong to the cache are live_blocks * pages_per_block
**       and the pool's own conservation (free + reserved + adapter + kv ==
**       slots) covers cache pages too.
**   P2  a published block is in the index under its key exactly once and
**       is never written again; a private block (a copy-on-write copy) is
**       in no index and has exactly one reference.
**   P3  a published block is on the LRU list iff its refcount is 0; only
**       blocks on that list are evicted.
**   P4  lookup authorizes (principal, namespace) before it touches the
**       index: an unauthorized call leaves `probes` unchanged.
*/
#include "prefix.h"

#include <stdlib.h>
#include <string.h>

typedef struct lsim__blk {
  int live, published;
  int64_t gen;
  int refs;
  int kv; /* pool KV object */
  int adapter;
  lsim_digest key, truth;
  int has_truth;
  int64_t hnext;      /* index chain */
  int64_t prev, next; /* LRU list */
  int on_lru;
} lsim__blk;

struct lsim_prefix {
  lsim_prefix_cfg cfg;
  lsim_prefix_grant *grants;
  lsim__blk *b;
  int64_t nb, cap;   /* blocks allocated in b */
  int64_t *freelist; /* dead block indices */
  int64_t nfree;
  int64_t *head;     /* index buckets */
  uint64_t mask;
  int64_t lru_head, lru_tail; /* head: evicted first */
  int64_t gen;
  lsim_prefix_stats st;
  lsim_prefix_adapter_stats *ad; /* nadapters + 1 (base last) */
};

/* ------------------------------------------------------------ helpers */

static uint64_t lsim__h(const lsim_digest *d) {
  uint64_t h = 0;
  for (int i = 0; i < 8; i++)
    h = (h << 8) | d->b[i];
  return h;
}

static lsim_prefix_adapter_stats *lsim__ad(lsim_prefix *pc, int a) {
  if (a < 0 || a >= pc->cfg.nadapters)
    return &pc->ad[pc->cfg.nadapters];
  return &pc->ad[a];
}

static void lsim__lru_remove(lsim_prefix *pc, int64_t i) {
  lsim__blk *x = &pc->b[i];
  if (!x->on_lru)
    return;
  if (x->prev >= 0)
    pc->b[x->prev].next = x->next;
  else
    pc->lru_head = x->next;
  if (x->next >= 0)
    pc->b[x->next].prev = x->prev;
  else
    pc->lru_tail = x->prev;
  x->prev = x->next = -1;
  x->on_lru = 0;
  pc->st.lru_blocks--;
}

static void lsim__lru_push(lsim_prefix *pc, int64_t i) {
  lsim__blk *x = &pc->b[i];
  x->prev = pc->lru_tail;
  x->next = -1;
  if (pc->lru_tail >= 0)
    pc->b[pc->lru_tail].next = i;
  else
    pc->lru_head = i;
  pc->lru_tail = i;
  x->on_lru = 1;
  pc->st.lru_blocks++;
}

static int64_t lsim__find(lsim_prefix *pc, const lsim_digest *key) {
  for (int64_t i = pc->head[lsim__h(key) & pc->mask]; i >= 0;
       i = pc->b[i].hnext) {
    pc->st.probes++;
    if (lsim_digest_eq(&pc->b[i].key, key))
      return i;
  }
  return -1;
}

static void lsim__unindex(lsim_prefix *pc, int64_t i) {
  int64_t *p = &pc->head[lsim__h(&pc->b[i].key) & pc->mask];
  while (*p != i)
    p = &pc->b[*p].hnext;
  *p = pc->b[i].hnext;
  pc->b[i].hnext = -1;
  pc->st.indexed_blocks--;
}

static void lsim__kill(lsim_prefix *pc, int64_t i) {
  lsim__blk *x = &pc->b[i];
  lsim__lru_remove(pc, i);
  if (x->published)
    lsim__unindex(pc, i);
  lsim_res_kv_release(pc->cfg.pool, x->kv, NULL);
  x->live = x->published = 0;
  x->refs = 0;
  x->kv = -1;
  pc->freelist[pc->nfree++] = i;
  pc->st.live_blocks--;
  pc->st.pool_pages -= pc->cfg.pages_per_block;
}

/* A new live block with pages, evicting LRU blocks when needed; -1 when
** nothing is left to evict (rc 0) or an error (rc < 0). */
static int64_t lsim__alloc(lsim_prefix *pc, lsim_err *rc, lsim_errbuf *eb) {
  *rc = 0;
  for (;;) {
    int full = pc->nfree == 0 && pc->nb == pc->cfg.max_blocks;
    int kv = -1;
    if (!full) {
      lsim_errbuf tmp = LSIM_ERRBUF_INIT;
      lsim_err e = lsim_res_kv_alloc(pc->cfg.pool, -2 - pc->gen,
                                     pc->cfg.pages_per_block, &kv, &tmp);
      if (e && e != LSIM_E_RES_NOSPACE) {
        *rc = lsim_fail(eb, e, "prefix block: %s", tmp.msg);
        return -1;
      }
    }
    if (kv >= 0) {
      int64_t i = pc->nfree ? pc->freelist[--pc->nfree] : pc->nb++;
      lsim__blk *x = &pc->b[i];
      memset(x, 0, sizeof *x);
      x->live = 1;
      x->gen = ++pc->gen;
      x->kv = kv;
      x->hnext = x->prev = x->next = -1;
      pc->st.live_blocks++;
      pc->st.pool_pages += pc->cfg.pages_per_block;
      return i;
    }
    if (pc->lru_head < 0)
      return -1;
    lsim__kill(pc, pc->lru_head);
    pc->st.evictions++;
  }
}

static lsim_err lsim__hold(lsim_prefix_receipt *rc, int64_t i, int64_t gen,
                           lsim_errbuf *eb) {
  if (rc->nblocks == rc->cap) {
    int64_t cap = rc->cap ? 2 * rc->cap : 16;
    lsim_prefix_ref *r = realloc(rc->ref, (size_t)cap * sizeof *r);
    if (!r)
      return lsim_fail(eb, LSIM_E_NOMEM, "prefix receipt: out of memory");
    rc->ref = r;
    rc->cap = cap;
  }
  rc->ref[rc->nblocks].block = i;
  rc->ref[rc->nblocks].gen = gen;
  rc->nblocks++;
  return 0;
}

static void lsim__ref(lsim_prefix *pc, int64_t i) {
  if (pc->b[i].refs++ == 0)
    lsim__lru_remove(pc, i);
}

static lsim_err lsim__ref_ok(const lsim_prefix *pc, lsim_prefix_ref r,
                             lsim_errbuf *eb) {
  if (r.block < 0 || r.block >= pc->nb || !pc->b[r.block].live ||
      pc->b[r.block].gen != r.gen)
    return lsim_fail(eb, LSIM_E_KV_STALE_HANDLE, "prefix block %lld "
                     "generation %lld is no longer live", (long long)r.block,
                     (long long)r.gen);
  return 0;
}

/* ------------------------------------------------------------ lifecycle */

lsim_err lsim_prefix_new(lsim_prefix **out, const lsim_prefix_cfg *cfg,
                         lsim_errbuf *eb) {
  if (!out || !cfg)
    return lsim_fail(eb, LSIM_E_USAGE, "prefix cache: null argument");
  *out = NULL;
  if (cfg->block_tokens < 1 || cfg->block_tokens > (1 << 20) ||
      cfg->pages_per_block < 1 || cfg->max_blocks < 1 ||
      cfg->max_blocks > (INT64_C(1) << 32) || cfg->nadapters < 0 || !cfg->pool)
    return lsim_fail(eb, LSIM_E_KV_CFG, "prefix cache: block_tokens %lld, "
                     "pages_per_block %lld, max_blocks %lld, nadapters %d%s",
                     (long long)cfg->block_tokens,
                     (long long)cfg->pages_per_block,
                     (long long)cfg->max_blocks, cfg->nadapters,
                     cfg->pool ? "" : ", no pool");
  if (cfg->ngrants < 1 || !cfg->grants)
    return lsim_fail(eb, LSIM_E_KV_GRANT, "prefix cache: no namespace grant; "
                     "nothing could be looked up");
  for (int i = 0; i < cfg->ngrants; i++) {
    if (lsim_digest_is_zero(&cfg->grants[i].ns))
      return lsim_fail(eb, LSIM_E_KV_GRANT, "grants[%d]: namespace digest is "
                       "missing", i);
    for (int j = 0; j < i; j++)
      if (cfg->grants[j].principal == cfg->grants[i].principal &&
          lsim_digest_eq(&cfg->grants[j].ns, &cfg->grants[i].ns))
        return lsim_fail(eb, LSIM_E_KV_GRANT, "grants[%d]: duplicate of "
                         "grants[%d]", i, j);
  }
  lsim_prefix *pc = calloc(1, sizeof *pc);
  if (!pc)
    return lsim_fail(eb, LSIM_E_NOMEM, "prefix cache: out of memory");
  pc->cfg = *cfg;
  uint64_t nbk = 16;
  while (nbk < (uint64_t)cfg->max_blocks * 2)
    nbk *= 2;
  pc->mask = nbk - 1;
  pc->grants = malloc((size_t)cfg->ngrants * sizeof *pc->grants);
  pc->b = malloc((size_t)cfg->max_blocks * sizeof *pc->b);
  pc->freelist = malloc((size_t)cfg->max_blocks * sizeof *pc->freelist);
  pc->head = malloc(nbk * sizeof *pc->head);
  pc->ad = calloc((size_t)cfg->nadapters + 1, sizeof *pc->ad);
  if (!pc->grants || !pc->b || !pc->freelist || !pc->head || !pc->ad) {
    lsim_prefix_release(pc);
    return lsim_fail(eb, LSIM_E_NOMEM, "prefix cache: out of memory for %lld "
                     "blocks", (long long)cfg->max_blocks);
  }
  memcpy(pc->grants, cfg->grants, (size_t)cfg->ngrants * sizeof *pc->grants);
  pc->cfg.grants = pc->grants;
  for (uint64_t i = 0; i < nbk; i++)
    pc->head[i] = -1;
  pc->lru_head = pc->lru_tail = -1;
  *out = pc;
  return 0;
}

void lsim_prefix_release(lsim_prefix *pc) {
  if (!pc)
    return;
  for (int64_t i = 0; pc->b && i < pc->nb; i++)
    if (pc->b[i].live)
      lsim_res_kv_release(pc->cfg.pool, pc->b[i].kv, NULL);
  free(pc->grants);
  free(pc->b);
  free(pc->freelist);
  free(pc->head);
  free(pc->ad);
  free(pc);
}

/* ------------------------------------------------------------ protocol */

static lsim_err lsim__keys_ok(const lsim_prefix *pc, const lsim_kv_keys *k,
                              const lsim_kv_keys *truth, lsim_errbuf *eb) {
  if (!k || (k->nblocks && !k->key))
    return lsim_fail(eb, LSIM_E_USAGE, "prefix cache: no keys");
  if (k->block_tokens != pc->cfg.block_tokens)
    return lsim_fail(eb, LSIM_E_KV_BLOCK_TOKENS, "keys of %lld-token blocks "
                     "in a cache of %lld-token blocks",
                     (long long)k->block_tokens,
                     (long long)pc->cfg.block_tokens);
  if (truth && (truth->block_tokens != k->block_tokens ||
                truth->nblocks != k->nblocks))
    return lsim_fail(eb, LSIM_E_USAGE, "prefix cache: truth keys of another "
                     "prompt");
  return 0;
}

lsim_err lsim_prefix_lookup(lsim_prefix *pc, int64_t principal,
                            const lsim_digest *ns, const lsim_kv_keys *keys,
                            const lsim_kv_keys *truth, int adapter,
                            lsim_prefix_receipt *rc, lsim_errbuf *eb) {
  if (!pc || !ns || !rc)
    return lsim_fail(eb, LSIM_E_USAGE, "prefix lookup: null argument");
  if (rc->open || rc->nblocks)
    return lsim_fail(eb, LSIM_E_KV_RECEIPT, "prefix lookup: the receipt still "
                     "holds %lld blocks; release it first",
                     (long long)rc->nblocks);
  /* P4: authorization first, before any candidate is examined */
  int ok = 0;
  for (int i = 0; i < pc->cfg.ngrants && !ok; i++)
    ok = pc->grants[i].principal == principal &&
         lsim_digest_eq(&pc->grants[i].ns, ns);
  if (!ok) {
    pc->st.unauthorized++;
    return lsim_fail(eb, LSIM_E_KV_UNAUTHORIZED, "principal %lld may not use "
                     "this namespace; no candidate was examined",
                     (long long)principal);
  }
  lsim_err e = lsim__keys_ok(pc, keys, truth, eb);
  if (e)
    return e;
  rc->principal = principal;
  rc->ns = *ns;
  rc->hit_blocks = rc->corrupt_blocks = 0;
  rc->open = 1;
  lsim_prefix_adapter_stats *ad = lsim__ad(pc, adapter);
  pc->st.lookups++;
  ad->lookups++;
  int64_t i = 0;
  for (; i < keys->full; i++) {
    int64_t j = lsim__find(pc, &keys->key[i]);
    if (j < 0)
      break;
    if ((e = lsim__hold(rc, j, pc->b[j].gen, eb)))
      break;
    lsim__ref(pc, j);
    /* a hit moves the block to the young end once it is released again */
    if (truth && pc->b[j].has_truth &&
        !lsim_digest_eq(&pc->b[j].truth, &truth->key[i]))
      rc->corrupt_blocks++;
  }
  rc->hit_blocks = rc->nblocks;
  pc->st.hit_blocks += rc->hit_blocks;
  pc->st.miss_blocks += keys->full - rc->hit_blocks;
  pc->st.corrupt_blocks += rc->corrupt_blocks;
  ad->hit_blocks += rc->hit_blocks;
  ad->miss_blocks += keys->full - rc->hit_blocks;
  ad->corrupt_blocks += rc->corrupt_blocks;
  return e;
}

lsim_err lsim_prefix_publish(lsim_prefix *pc, lsim_prefix_receipt *rc,
                             const lsim_kv_keys *keys,
                             const lsim_kv_keys *truth, int adapter,
                             int64_t upto, int64_t *published,
                             lsim_errbuf *eb) {
  if (published)
    *published = 0;
  if (!pc || !rc)
    return lsim_fail(eb, LSIM_E_USAGE, "prefix publish: null argument");
  if (!rc->open)
    return lsim_fail(eb, LSIM_E_KV_PUBLISH_ORDER, "prefix publish before the "
                     "authorized lookup that opens the receipt");
  lsim_err e = lsim__keys_ok(pc, keys, truth, eb);
  if (e)
    return e;
  if (upto < 0)
    upto = keys->full;
  if (upto > keys->full)
    return lsim_fail(eb, LSIM_E_KV_PARTIAL_BLOCK, "publish up to block %lld "
                     "but only %lld blocks are full: a partial tail is not "
                     "published", (long long)upto, (long long)keys->full);
  if (rc->nblocks > keys->full)
    return lsim_fail(eb, LSIM_E_KV_RELABEL, "receipt holds %lld blocks, keys "
                     "cover %lld", (long long)rc->nblocks,
                     (long long)keys->full);
  for (int64_t i = 0; i < rc->nblocks; i++) {
    if ((e = lsim__ref_ok(pc, rc->ref[i], eb)))
      return e;
    const lsim__blk *x = &pc->b[rc->ref[i].block];
    if (!x->published || !lsim_digest_eq(&x->key, &keys->key[i]))
      return lsim_fail(eb, LSIM_E_KV_RELABEL, "block %lld of the receipt "
                       "was computed under another key: rows are never "
                       "relabelled", (long long)i);
  }
  lsim_prefix_adapter_stats *ad = lsim__ad(pc, adapter);
  int64_t n0 = rc->nblocks;
  for (int64_t i = rc->nblocks; i < upto; i++) {
    int64_t j = lsim__find(pc, &keys->key[i]);
    if (j >= 0) { /* another request published it meanwhile: share */
      if ((e = lsim__hold(rc, j, pc->b[j].gen, eb)))
        break;
      lsim__ref(pc, j);
      pc->st.shared_publish++;
      continue;
    }
    j = lsim__alloc(pc, &e, eb);
    if (j < 0) {
      if (!e)
        pc->st.stopped_full++;
      break;
    }
    lsim__blk *x = &pc->b[j];
    if ((e = lsim__hold(rc, j, x->gen, eb))) {
      lsim__kill(pc, j);
      break;
    }
    x->key = keys->key[i];
    if (truth) {
      x->truth = truth->key[i];
      x->has_truth = 1;
    }
    x->adapter = adapter;
    x->refs = 1;
    x->published = 1;
    uint64_t h = lsim__h(&x->key) & pc->mask;
    x->hnext = pc->head[h];
    pc->head[h] = j;
    pc->st.indexed_blocks++;
    pc->st.published++;
    ad->published++;
  }
  if (published)
    *published = rc->nblocks - n0;
  return e;
}

lsim_err lsim_prefix_fork(lsim_prefix *pc, const lsim_prefix_receipt *src,
                          int64_t blocks, lsim_prefix_receipt *dst,
                          lsim_errbuf *eb) {
  if (!pc || !src || !dst)
    return lsim_fail(eb, LSIM_E_USAGE, "prefix fork: null argument");
  if (!src->open || dst->open || dst->nblocks || blocks < 0 ||
      blocks > src->nblocks)
    return lsim_fail(eb, LSIM_E_KV_RECEIPT, "prefix fork of %lld blocks from "
                     "a receipt holding %lld%s", (long long)blocks,
                     (long long)src->nblocks,
                     dst->open ? " into an open receipt" : "");
  lsim_err e = 0;
  for (int64_t i = 0; i < blocks; i++)
    if ((e = lsim__ref_ok(pc, src->ref[i], eb)))
      return e;
  dst->principal = src->principal;
  dst->ns = src->ns;
  dst->hit_blocks = dst->corrupt_blocks = 0;
  dst->open = 1;
  for (int64_t i = 0; i < blocks && !e; i++) {
    e = lsim__hold(dst, src->ref[i].block, src->ref[i].gen, eb);
    if (!e)
      lsim__ref(pc, src->ref[i].block);
  }
  return e;
}

lsim_err lsim_prefix_write(const lsim_prefix *pc,
                           const lsim_prefix_receipt *rc, int64_t i,
                           lsim_errbuf *eb) {
  if (!pc || !rc || i < 0 || i >= rc->nblocks)
    return lsim_fail(eb, LSIM_E_KV_RECEIPT, "prefix write: block %lld is not "
                     "held by the receipt", (long long)i);
  lsim_err e = lsim__ref_ok(pc, rc->ref[i], eb);
  if (e)
    return e;
  const lsim__blk *x = &pc->b[rc->ref[i].block];
  if (x->published || x->refs > 1)
    return lsim_fail(eb, LSIM_E_KV_IMMUTABLE, "prefix block %lld is %s: "
                     "copy it first (lsim_prefix_cow)", (long long)i,
                     x->published ? "published" : "shared");
  return 0;
}

lsim_err lsim_prefix_cow(lsim_prefix *pc, lsim_prefix_receipt *rc, int64_t i,
                         lsim_errbuf *eb) {
  if (!pc || !rc || i < 0 || i >= rc->nblocks)
    return lsim_fail(eb, LSIM_E_KV_RECEIPT, "prefix cow: block %lld is not "
                     "held by the receipt", (long long)i);
  lsim_err e = lsim__ref_ok(pc, rc->ref[i], eb);
  if (e)
    return e;
  int64_t old = rc->ref[i].block;
  if (!pc->b[old].published && pc->b[old].refs == 1)
    return 0;
  /* pin the source so that making room cannot evict it */
  int64_t j = lsim__alloc(pc, &e, eb);
  if (j < 0)
    return e ? e : lsim_fail(eb, LSIM_E_KV_NOSPACE, "prefix cow: no pages "
                             "for a private copy; every block is referenced");
  lsim__blk *x = &pc->b[j];
  x->key = pc->b[old].key;
  x->adapter = pc->b[old].adapter;
  x->refs = 1;
  rc->ref[i].block = j;
  rc->ref[i].gen = x->gen;
  if (--pc->b[old].refs == 0) {
    if (pc->b[old].published)
      lsim__lru_push(pc, old);
    else
      lsim__kill(pc, old);
  }
  pc->st.cow_copies++;
  return 0;
}

lsim_err lsim_prefix_unref(lsim_prefix *pc, lsim_prefix_receipt *rc,
                             lsim_errbuf *eb) {
  if (!pc || !rc)
    return lsim_fail(eb, LSIM_E_USAGE, "prefix release: null argument");
  lsim_err first = 0;
  for (int64_t i = rc->nblocks - 1; i >= 0; i--) {
    lsim_err e = lsim__ref_ok(pc, rc->ref[i], eb);
    if (!e && pc->b[rc->ref[i].block].refs < 1)
      e = lsim_fail(eb, LSIM_E_KV_REFCOUNT, "prefix block %lld released "
                    "with no reference", (long long)rc->ref[i].block);
    if (e) {
      if (!first)
        first = e;
      continue;
    }
    int64_t j = rc->ref[i].block;
    if (--pc->b[j].refs == 0) {
      if (pc->b[j].published)
        lsim__lru_push(pc, j);
      else
        lsim__kill(pc, j);
    }
  }
  free(rc->ref);
  memset(rc, 0, sizeof *rc);
  return first;
}

lsim_err lsim_prefix_admit(lsim_prefix *pc, int64_t principal,
                           const lsim_kv_manifest *m, int mode, int adapter,
                           lsim_kv_keys *keys, lsim_prefix_receipt *rc,
                           int64_t *reusable, lsim_errbuf *eb) {
  if (!reusable || !m)
    return lsim_fail(eb, LSIM_E_USAGE, "prefix admit: null argument");
  *reusable = 0;
  lsim_err e = lsim_kv_keys_derive(m, mode, keys, eb);
  if (e)
    return e;
  e = lsim_prefix_lookup(pc, principal, &m->isolation, keys, NULL, adapter, rc,
                         eb);
  if (e) {
    lsim_kv_keys_release(keys);
    return e;
  }
  int64_t t = rc->hit_blocks * keys->block_tokens;
  *reusable = t < m->ntokens ? t : m->ntokens - 1;
  return 0;
}

lsim_err lsim_prefix_reclaim(lsim_prefix *pc, int64_t want_free,
                             int64_t *freed, lsim_errbuf *eb) {
  if (freed)
    *freed = 0;
  if (!pc || want_free < 0)
    return lsim_fail(eb, LSIM_E_USAGE, "prefix reclaim: bad argument");
  lsim_res_view v;
  lsim_res_view_get(pc->cfg.pool, &v);
  while (v.free < want_free && pc->lru_head >= 0) {
    lsim__kill(pc, pc->lru_head);
    pc->st.evictions++;
    if (freed)
      *freed += pc->cfg.pages_per_block;
    lsim_res_view_get(pc->cfg.pool, &v);
  }
  return 0;
}

/* ------------------------------------------------------------ views */

void lsim_prefix_stats_get(const lsim_prefix *pc, lsim_prefix_stats *out) {
  *out = pc->st;
}

void lsim_prefix_adapter_stats_get(const lsim_prefix *pc, int adapter,
                                   lsim_prefix_adapter_stats *out) {
  *out = *lsim__ad((lsim_prefix *)pc, adapter);
}

int lsim_prefix_refs(const lsim_prefix *pc, lsim_prefix_ref r) {
  if (lsim__ref_ok(pc, r, NULL))
    return -1;
  return pc->b[r.block].refs;
}

lsim_err lsim_prefix_check(const lsim_prefix *pc, lsim_errbuf *eb) {
  int64_t live = 0, indexed = 0, lru = 0;
  for (int64_t i = 0; i < pc->nb; i++) {
    const lsim__blk *x = &pc->b[i];
    if (!x->live)
      continue;
    live++;
    int64_t owned, used;
    if (lsim_res_kv_pages(pc->cfg.pool, x->kv, &owned, &used, NULL) ||
        owned != pc->cfg.pages_per_block)
      return lsim_fail(eb, LSIM_E_KV_POOL, "prefix block %lld: pool KV object "
                       "%d is not live with %lld pages", (long long)i, x->kv,
                       (long long)pc->cfg.pages_per_block);
    if (x->refs < 0 || (!x->published && x->refs != 1))
      return lsim_fail(eb, LSIM_E_KV_REFCOUNT, "prefix block %lld: %d "
                       "references (%s)", (long long)i, x->refs,
                       x->published ? "published" : "private");
    if (x->published && (x->refs == 0) != x->on_lru)
      return lsim_fail(eb, LSIM_E_KV_REFCOUNT, "prefix block %lld: %d "
                       "references but %s the LRU list", (long long)i, x->refs,
                       x->on_lru ? "on" : "not on");
    if (x->published) {
      int64_t n = 0;
      for (int64_t j = pc->head[lsim__h(&x->key) & pc->mask]; j >= 0;
           j = pc->b[j].hnext)
        n += j == i;
      if (n != 1)
        return lsim_fail(eb, LSIM_E_KV_POOL, "prefix block %lld indexed %lld "
                         "times", (long long)i, (long long)n);
      indexed++;
    }
  }
  for (int64_t j = pc->lru_head; j >= 0; j = pc->b[j].next)
    lru++;
  if (live != pc->st.live_blocks || indexed != pc->st.indexed_blocks ||
      lru != pc->st.lru_blocks ||
      pc->st.pool_pages != live * pc->cfg.pages_per_block)
    return lsim_fail(eb, LSIM_E_KV_POOL, "prefix counters: live %lld/%lld, "
                     "indexed %lld/%lld, lru %lld/%lld",
                     (long long)live, (long long)pc->st.live_blocks,
                     (long long)indexed, (long long)pc->st.indexed_blocks,
                     (long long)lru, (long long)pc->st.lru_blocks);
  return lsim_res_check(pc->cfg.pool, eb);
}
