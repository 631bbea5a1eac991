/*
** prefix.h: the adapter-aware prefix cache of one worker.
**
** Blocks of `block_tokens` tokens are indexed by their semantic block key
** (kv.h, lsim_kv_keys_derive): a key names the whole prefix up to its
** block end, its execution digest and namespace, so a lookup walks the
** request's keys from block 0 and stops at the first miss.  Each block's
** K/V pages are a KV object of the joint page pool (residency.h,
** lsim_res_kv_alloc), so cache pages and adapter pages compete for one
** pool and lsim_res_check() conserves both.
**
** Protocol (article 0x08I), in this order:
**
**   derive keys     lsim_kv_keys_derive(manifest, mode)        (kv.h)
**   authorize       lsim_prefix_lookup checks (principal, namespace)
**                   against the grants BEFORE it examines any candidate;
**                   an unauthorized lookup learns nothing (no probe)
**   lookup/acquire  the longest run of indexed blocks, each referenced
**                   by the receipt (refcount + 1); reusable tokens =
**                   hit_blocks * block_tokens
**   fork            lsim_prefix_fork: a second receipt shares a clean
**                   prefix (refcount + 1 on each block)
**   compute suffix  the caller's prefill of the rest
**   publish         lsim_prefix_publish: every full block past the hit,
**                   immutable once indexed
**   release         lsim_prefix_unref: references drop; a published
**                   block with no reference joins the LRU list and may be
**                   evicted (its pages go back to FREE)
**
** Copy-on-write: a published block is immutable (lsim_prefix_write fails
** with E_KV_IMMUTABLE, as does a private block another receipt shares);
** lsim_prefix_cow gives the receipt a private copy in new pages.
**
** Hit accounting is per adapter index (0..nadapters-1, and the base
** bucket nadapters for adapter -1).  `truth` keys, when given, are a
** second derivation under the correct key mode; a hit whose stored truth
** differs is counted as corrupt (the adapter-oblivious study mode).
**
** Determinism: the index is exact-key lookup only; eviction takes the
** least recently released block, ties impossible (a list).  No decision
** reads a pointer or hash order.  Units: blocks, pages, tokens.
*/
#ifndef LSIM_PREFIX_H
#define LSIM_PREFIX_H

#include "kv.h"
#include "lsim.h"
#include "residency.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lsim_prefix_grant {
  int64_t principal; /* tenant / caller id */
  lsim_digest ns;    /* isolation salt it may read and write */
} lsim_prefix_grant;

typedef struct lsim_prefix_cfg {
  int64_t block_tokens;    /* 1..2^20, must equal the keys' */
  int64_t pages_per_block; /* pool slots per block, >= 1 */
  int64_t max_blocks;      /* index capacity, >= 1 */
  int nadapters;           /* accounting buckets, >= 0 */
  lsim_res *pool;          /* borrowed; outlives the cache */
  const lsim_prefix_grant *grants; /* copied */
  int ngrants;                     /* >= 1 */
} lsim_prefix_cfg;

typedef struct lsim_prefix lsim_prefix;

lsim_err lsim_prefix_new(lsim_prefix **out, const lsim_prefix_cfg *cfg,
                         lsim_errbuf *eb);
/* Releases every block's pages back to the pool. */
void lsim_prefix_release(lsim_prefix *pc);

typedef struct lsim_prefix_ref {
  int64_t block, gen;
} lsim_prefix_ref;

/* What a request holds.  Caller-owned; LSIM_PREFIX_RECEIPT_INIT, released
** by lsim_prefix_unref (which leaves it reusable and empty). */
typedef struct lsim_prefix_receipt {
  int64_t principal;      /* read-only */
  lsim_digest ns;         /* read-only */
  int64_t nblocks;        /* blocks held, prefix order; read-only */
  int64_t hit_blocks;     /* from the lookup */
  int64_t corrupt_blocks; /* hit blocks whose truth key differs */
  lsim_prefix_ref *ref;   /* private */
  int64_t cap;            /* private */
  int open;               /* private: 1 between lookup/fork and release */
} lsim_prefix_receipt;
#define LSIM_PREFIX_RECEIPT_INIT {0, LSIM_DIGEST_INIT, 0, 0, 0, NULL, 0, 0}

/* Authorize, then acquire the longest indexed prefix of keys (full blocks
** only).  truth may be NULL.  adapter: accounting bucket (-1 base). */
lsim_err lsim_prefix_lookup(lsim_prefix *pc, int64_t principal,
                            const lsim_digest *ns, const lsim_kv_keys *keys,
                            const lsim_kv_keys *truth, int adapter,
                            lsim_prefix_receipt *rc, lsim_errbuf *eb);

/*
** Publish blocks [rc->nblocks, upto) of keys (upto -1: every full block;
** a partial tail block is E_KV_PARTIAL_BLOCK).  The receipt's held blocks
** must carry exactly keys' first keys (E_KV_RELABEL otherwise: rows are
** never relabelled).  A key already indexed is shared instead of copied.
** When the pool or the index is full, unreferenced blocks are evicted LRU
** first; when none is left, publication stops early (not an error):
** *published (may be NULL) gets the count of newly held blocks.
*/
lsim_err lsim_prefix_publish(lsim_prefix *pc, lsim_prefix_receipt *rc,
                             const lsim_kv_keys *keys,
                             const lsim_kv_keys *truth, int adapter,
                             int64_t upto, int64_t *published,
                             lsim_errbuf *eb);

/* dst (empty) shares src's first `blocks` blocks. */
lsim_err lsim_prefix_fork(lsim_prefix *pc, const lsim_prefix_receipt *src,
                          int64_t blocks, lsim_prefix_receipt *dst,
                          lsim_errbuf *eb);
/* May the receipt write block i in place?  0, or E_KV_IMMUTABLE (published
** or shared), E_KV_STALE_HANDLE, E_KV_RECEIPT. */
lsim_err lsim_prefix_write(const lsim_prefix *pc,
                           const lsim_prefix_receipt *rc, int64_t i,
                           lsim_errbuf *eb);
/* Copy-on-write: give the receipt a private copy of block i (new pages,
** not indexed).  A private block nobody else holds is left as it is. */
lsim_err lsim_prefix_cow(lsim_prefix *pc, lsim_prefix_receipt *rc, int64_t i,
                         lsim_errbuf *eb);
/* Drop every reference of the receipt (deepest block first into the LRU,
** so a prefix's tail is evicted before its head). */
lsim_err lsim_prefix_unref(lsim_prefix *pc, lsim_prefix_receipt *rc,
                             lsim_errbuf *eb);

/*
** Admission in one call, for the replay engine: derive the manifest's
** block keys under `mode` into *keys (caller releases them after its
** publish), authorize and look up.  *reusable gets the tokens the prefill
** may skip: hit blocks * block_tokens, capped at ntokens - 1 so that at
** least one row is computed (the prompt logits of the last position).
** The receipt then holds the hit; after prefill call lsim_prefix_publish
** with the same keys, at completion lsim_prefix_unref.
*/
lsim_err lsim_prefix_admit(lsim_prefix *pc, int64_t principal,
                           const lsim_kv_manifest *m, int mode, int adapter,
                           lsim_kv_keys *keys, lsim_prefix_receipt *rc,
                           int64_t *reusable, lsim_errbuf *eb);

/* Make room in the shared pool for something else (an adapter load, a
** request's KV reservation): evict unreferenced blocks, least recently
** released first, until the pool has `want_free` free slots or nothing is
** evictable.  *freed (may be NULL) gets the pages given back.  Referenced
** blocks are never touched. */
lsim_err lsim_prefix_reclaim(lsim_prefix *pc, int64_t want_free,
                             int64_t *freed, lsim_errbuf *eb);

typedef struct lsim_prefix_adapter_stats {
  int64_t lookups, hit_blocks, miss_blocks, corrupt_blocks, published;
} lsim_prefix_adapter_stats;

typedef struct lsim_prefix_stats {
  int64_t lookups, unauthorized, probes;
  int64_t hit_blocks, miss_blocks, corrupt_blocks;
  int64_t published, shared_publish, evictions, cow_copies, stopped_full;
  int64_t live_blocks, indexed_blocks, lru_blocks, pool_pages;
} lsim_prefix_stats;

void lsim_prefix_stats_get(const lsim_prefix *pc, lsim_prefix_stats *out);
/* Per-adapter counters; adapter -1 is the base bucket. */
void lsim_prefix_adapter_stats_get(const lsim_prefix *pc, int adapter,
                                   lsim_prefix_adapter_stats *out);
/* References of a block (test and debug); -1 for a stale handle. */
int lsim_prefix_refs(const lsim_prefix *pc, lsim_prefix_ref r);

/*
** Full consistency check: every live block owns one live pool KV object of
** pages_per_block pages; the index holds exactly the published live
** blocks; the LRU list exactly the unreferenced published ones; the
** pool's own conservation check passes.  E_KV_POOL / E_KV_REFCOUNT.
*/
lsim_err lsim_prefix_check(const lsim_prefix *pc, lsim_errbuf *eb);

#ifdef __cplusplus
}
#endif

#endif /* LSIM_PREFIX_H */
