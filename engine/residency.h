/*
** residency.h: the residency engine of one worker -- a joint page pool
** shared by adapter weights and KV cache, the adapter residency state
** machine, joint admission, victim eligibility, and publication
** transactions with compensating rollback (docs/RESIDENCY.md).
**
** The pool has `slots` allocator slots of `slot_bytes` bytes.  Every slot is
** in exactly one physical state:
**
**   FREE | RESERVED(txn) | ADAPTER(adapter, generation) | KV(kv object, gen)
**
** and free + reserved + adapter + kv == slots at every return from this
** module (checked by assert after every transaction in debug builds and by
** lsim_res_check() on demand).  Adapter objects are shared: many request
** attempts may bind one published generation (refcount).  A KV object
** belongs to one request attempt.
**
** Residency of one adapter object on this worker, and the function behind
** each arrow (any other transition is LSIM_E_RES_ILLEGAL):
**
**   ABSENT ---------- lsim_res_register ---------> HOST_READY
**   HOST_READY ------ lsim_res_begin -------------> RESERVED   (txn holds pages)
**   RESERVED -------- lsim_res_copy_start --------> LOADING    (copy event live)
**   LOADING --------- lsim_res_validate ----------> VALIDATED  (needs the copy
**                                                   event complete: copy_done)
**   VALIDATED ------- lsim_res_publish -----------> PUBLISHED  (generation + 1,
**                                                   one visibility point)
**   PUBLISHED/IDLE -- lsim_res_bind --------------> ACTIVE     (refcount 0 -> 1)
**   ACTIVE ---------- lsim_res_unbind ------------> IDLE       (refcount 1 -> 0)
**   PUBLISHED/IDLE -- lsim_res_begin (victim) ----> RETIRING   (new binds fail)
**   RETIRING -------- lsim_res_commit ------------> ABSENT     (finalized;
**                                                   generation kept as tombstone)
**   RESERVED/LOADING/VALIDATED
**                --- lsim_res_rollback ----------> HOST_READY (pages released)
**   RETIRING -------- lsim_res_rollback ----------> RESERVED   (compensation: a
**                                                   restore txn holds the victim's
**                                                   own slots; it then loads,
**                                                   validates and publishes a
**                                                   NEW generation)
**
** A transaction (lsim_res_begin .. lsim_res_commit / lsim_res_rollback):
**   begin     validate identity and kernel ABI, derive the demand, check
**             the joint admission inequality, pick victims (eligibility
**             here, ranking by the caller's policy callback), mark them
**             RETIRING and reserve victim + free slots atomically (all or
**             nothing).  Slots are handed out in ascending order; a load's
**             adapter takes the first `adapter` reserved slots, its KV the
**             rest.
**   copy      lsim_res_copy_start, then lsim_res_copy_done (the copy-complete
**             event), then lsim_res_validate (digest/layout) and
**             lsim_res_publish.
**   commit    bind the request (pin), commit its KV reservation (initial +
**             growth) to a KV object, finalize victims.
**   rollback  allowed until publication (after it, LSIM_E_RES_POST_PUBLISH:
**             publish a successor instead): release the request's KV part
**             and every non-victim slot, hand each victim's slots to a
**             restore txn (its old bytes are assumed overwritten).
**
** All functions return 0 or a negative LSIM_E_RES_* (or LSIM_E_NOMEM)
** code; on failure nothing changed unless the comment says otherwise.
** Units: slots ("pages"), bytes, ticks.  Nothing here reads a clock or does
** I/O; ties are broken by adapter index, so results depend on inputs only.
*/
#ifndef LSIM_RESIDENCY_H
#define LSIM_RESIDENCY_H

#include "identity.h"
#include "lsim.h"

enum lsim_res_state {
  LSIM_RS_ABSENT = 0,
  LSIM_RS_HOST_READY,
  LSIM_RS_RESERVED,
  LSIM_RS_LOADING,
  LSIM_RS_VALIDATED,
  LSIM_RS_PUBLISHED,
  LSIM_RS_ACTIVE,
  LSIM_RS_IDLE,
  LSIM_RS_RETIRING,
  LSIM_RS__COUNT
};
const char *lsim_res_state_name(int state); /* "absent", ...; "?" */

enum lsim_slot_state {
  LSIM_SLOT_FREE = 0,
  LSIM_SLOT_RESERVED,
  LSIM_SLOT_ADAPTER,
  LSIM_SLOT_KV
};

enum lsim_txn_kind {
  LSIM_TXN_LOAD = 1,     /* adapter load (+ the request's KV when request >= 0) */
  LSIM_TXN_KV = 2,       /* KV only: the adapter is already published */
  LSIM_TXN_PREFETCH = 3, /* adapter load with no request */
  LSIM_TXN_RESTORE = 4   /* compensating reload of a victim (made by rollback) */
};

/* ---- page demand derived from tensors ------------------------------------ */

/* One adapted module: A [rank][d_in], B [d_out][rank]. */
typedef struct lsim_res_module {
  int64_t rank, d_in, d_out;
} lsim_res_module;

/* Vector-page layout: sum over modules of ceil(rank*d_in/H) +
** ceil(d_out*rank/H), H = elements per page (>= 1).  -1 on bad input. */
int64_t lsim_res_pages_tensor(const lsim_res_module *m, int n, int64_t H);
/* S-LoRA paired-slot layout (q/k/v/o attention): 4 * rank slots of
** lsim_res_slora_slot_bytes() bytes each. */
int64_t lsim_res_pages_slora(int64_t rank);
int64_t lsim_res_slora_slot_bytes(int64_t layers, int64_t hidden,
                                  int64_t elem_bytes); /* 2 * L * H * b */

/* ---- the residency engine --------------------------------------------------- */

typedef struct lsim_res_cfg {
  int64_t slots;       /* pool slots, >= 1 */
  int64_t slot_bytes;  /* bytes per slot, >= 1 */
  int nadapters;
  const int64_t *adapter_pages; /* [nadapters] demand, each 1..slots; copied */
  int64_t guard_pages; /* pool-local safety margin of the inequality, >= 0 */
  lsim_digest kernel_abi; /* ABI this worker's kernels accept; all-zero:
                             no kernel check */
} lsim_res_cfg;

typedef struct lsim_res lsim_res;

lsim_err lsim_res_new(lsim_res **out, const lsim_res_cfg *cfg,
                      lsim_errbuf *eb);
void lsim_res_release(lsim_res *r);

/* Padded-rank slots (vLLM's max_loras; docs/RESIDENCY.md "Padded-rank
** slots"): at most max_adapters (>= 1) objects hold or reserve adapter
** pages (RESERVED .. IDLE; a RETIRING victim's slot already belongs to the
** txn that took it), invariant R7.  A load whose begin would pass the cap
** takes victims for it as for pages (E_RES_NOSPACE when none are
** eligible); a rollback restores victims only while the cap allows and
** drops the rest to ABSENT.  Set once, before any transaction; without
** it, pages alone bound residency. */
lsim_err lsim_res_set_slots(lsim_res *r, int max_adapters, lsim_errbuf *eb);

/*
** Hooks (docs/RESIDENCY.md, "Hooks: the residency reaches a backend").
** A pool with hooks tells an observer -- the replay connects them to the
** open backend (backends/backend.h) -- what its transactions do to its
** pages, with the slot ids it logs and reports (lsim_res_slot, the txn and
** adapter views):
**
**   stage    lsim_res_copy_start: object `object` (the txn's adapter,
**            then its companion when one comes along) will hold
**            generation `generation` (the next one) of artifact version
**            `version` at pages page[0..npages) -- the first slots of the
**            txn's reservation, those lsim_res_publish gives it
**   publish  lsim_res_publish: that generation became visible (core, then
**            companion)
**   retire   the object's pages go back: published = 1 for a victim at
**            lsim_res_begin / lsim_res_begin_with (generation: its
**            published one; fence: the launches that named that
**            generation, lsim_res_launch +1 calls since it was published;
**            every one of them has completed), published = 0 for a staged
**            copy that lsim_res_rollback undoes (fence 0)
**   launch   lsim_res_launch(+1): a launch snapshot names the object's
**            published generation
**   kv       KV pages: op LSIM_RES_KV_ALLOC when a KV object gains pages
**            (lsim_res_commit, kv_extend, kv_alloc; kv_absorb moves pages:
**            a release from src then an alloc to dst), LSIM_RES_KV_RELEASE
**            when it gives them back (kv_release, kv_shrink)
**
** Hooks observe: they are called after the transaction's own change
** (retire: after the victims are marked, before any copy can reuse their
** pages), never change a decision, and any may be NULL.  A hook's error is
** returned by the residency function that called it (its change stands;
** the caller stops).  The page array is valid only during the call.
*/
enum { LSIM_RES_KV_ALLOC = 1, LSIM_RES_KV_RELEASE = 2 };

typedef struct lsim_res_page_ev {
  int worker;         /* the pool's worker (lsim_res_set_hooks) */
  int object;         /* adapter object; kv: the KV object handle */
  int64_t generation; /* adapter generation; kv: the object's generation */
  int64_t version;    /* stage: artifact version (lsim_res_set_version) */
  const int64_t *page;
  int64_t npages;
  int64_t fence;      /* retire: launches that named the generation */
  int published;      /* retire: 1 evicted, 0 a staged copy rolled back */
  int op;             /* kv: LSIM_RES_KV_ALLOC / LSIM_RES_KV_RELEASE */
} lsim_res_page_ev;

typedef lsim_err (*lsim_res_hook_fn)(void *ud, const lsim_res_page_ev *ev,
                                     lsim_errbuf *eb);
typedef struct lsim_res_hooks {
  lsim_res_hook_fn stage, publish, retire, launch, kv;
} lsim_res_hooks;

/* Attach hooks (copied; NULL detaches) with their user data and the
** worker index the events carry.  E_NOMEM when the scratch fails. */
lsim_err lsim_res_set_hooks(lsim_res *r, const lsim_res_hooks *h, void *ud,
                            int worker, lsim_errbuf *eb);
/* The artifact version the next stage of object a carries (the engine's
** hotswap version of the host copy it registered; 0 by default). */
void lsim_res_set_version(lsim_res *r, int a, int64_t version);

/* Companions (docs/COMPRESSION.md, "Serving"): companion[a] is the
** object a cannot be used without (a compressed core's shared basis),
** or -1.  Set once with lsim_res_set_companions, before any other call;
** copied.  A companion is a residency object of its
** own, with the rules below:
**   - a LOAD/PREFETCH txn of a whose companion is not visible loads the
**     companion in the same txn (its slots are part of the adapter
**     demand) and lsim_res_publish makes both visible at one point; the
**     companion must then be HOST_READY (ABSENT, or a transitional
**     state: LSIM_E_RES_ILLEGAL, the caller waits)
**   - while any object naming it is neither ABSENT nor HOST_READY, the
**     companion fails the eviction predicate (E_RES_PINNED): a basis
**     stays while any of its cores is resident, loading or retiring,
**     except that a begin which takes its last cores as victims may
**     take it as a victim too, in the same txn
**   - a rollback does not restore a companion victim nor a victim whose
**     companion is a victim too: they go to ABSENT (their old bytes are gone and a
**     core restored before its basis would be visible without it)
** So a visible object's companion is always visible. */
lsim_err lsim_res_set_companions(lsim_res *r, const int *companion,
                                 lsim_errbuf *eb);

/* ABSENT -> HOST_READY: the host copy is verified; artifact is its
** content digest, kernel_abi the layout it was converted for (either may be
** all-zero only if the worker has no kernel ABI; a zero artifact digest is
** LSIM_E_RES_IDENTITY at begin). */
lsim_err lsim_res_register(lsim_res *r, int a, const lsim_digest *artifact,
                           const lsim_digest *kernel_abi, lsim_errbuf *eb);

/* A read-only view of one adapter object. */
typedef struct lsim_res_adapter_view {
  int state;
  int64_t generation; /* last published generation (0: never) */
  int refcount, pins, queued, inflight, launches;
  int host_verified;
  int64_t pages;        /* slots it owns now (0 unless visible/retiring) */
  const int64_t *slot;  /* [pages] ascending; valid until the next call */
  int64_t txn;          /* id of the txn it belongs to, or -1 */
  lsim_tick last_use, published_tick;
  int64_t uses, total_uses;
  int deps; /* objects naming it as companion that are not ABSENT/HOST_READY */
} lsim_res_adapter_view;
void lsim_res_adapter(const lsim_res *r, int a, lsim_res_adapter_view *out);

/* Counters of the pool. */
typedef struct lsim_res_view {
  int64_t slots, slot_bytes, free, reserved, adapter, kv;
  int open_txns, kv_objects;
} lsim_res_view;
void lsim_res_view_get(const lsim_res *r, lsim_res_view *out);
/* The physical state of slot i: state, owner (adapter index, KV object
** handle or txn id; -1 when free) and generation (0 when free/reserved). */
void lsim_res_slot(const lsim_res *r, int64_t i, int *state, int64_t *owner,
                   int64_t *gen);

/* ---- references, pins, queue entries, launches ------------------------------ */

/* PUBLISHED/IDLE/ACTIVE -> ACTIVE, refcount + 1.  RETIRING:
** LSIM_E_RES_RETIRING; any other state: LSIM_E_RES_ILLEGAL. */
lsim_err lsim_res_bind(lsim_res *r, int a, lsim_tick now, lsim_errbuf *eb);
/* refcount - 1; ACTIVE -> IDLE at zero (RETIRING stays RETIRING). */
lsim_err lsim_res_unbind(lsim_res *r, int a, lsim_tick now, lsim_errbuf *eb);
/* delta +1 / -1 on the pin count or the queued-reservation count. */
lsim_err lsim_res_pin(lsim_res *r, int a, int delta, lsim_errbuf *eb);
lsim_err lsim_res_queue(lsim_res *r, int a, int delta, lsim_errbuf *eb);
/* A launch snapshot naming a's generation starts (+1: also an in-flight
** device event) or its completion event fires (-1). */
lsim_err lsim_res_launch(lsim_res *r, int a, int delta, lsim_errbuf *eb);

/* 0 when a passes the full eviction predicate, else the code of the first
** failing clause: E_RES_REFCOUNT, E_RES_NOT_ELIGIBLE (state), E_RES_PINNED,
** E_RES_QUEUED, E_RES_INFLIGHT, E_RES_LIVE_LAUNCH, E_RES_HOST_SOURCE. */
lsim_err lsim_res_eligible(const lsim_res *r, int a);
/* Slots owned by adapters that pass the predicate (except `exclude`). */
int64_t lsim_res_reclaimable(const lsim_res *r, int exclude);

/* ---- transactions ------------------------------------------------------------ */

typedef struct lsim_res_demand {
  int64_t adapter;    /* incremental: 0 when a's generation is visible */
  int64_t kv_initial; /* prompt / prefill state */
  int64_t kv_growth;  /* decode growth reserved at admission */
  int64_t guard;      /* safety margin (required, never reserved) */
  int64_t total;      /* adapter + kv_initial + kv_growth (reserved) */
} lsim_res_demand;

typedef struct lsim_res_req {
  int kind;           /* enum lsim_txn_kind (not RESTORE) */
  int adapter;        /* the adapter to load or bind */
  int64_t request;    /* request attempt, or -1 (prefetch) */
  int64_t kv_initial, kv_growth;
} lsim_res_req;

/* The demand of q (no change to anything). */
lsim_err lsim_res_demand_of(const lsim_res *r, const lsim_res_req *q,
                            lsim_res_demand *out, lsim_errbuf *eb);

/*
** Ranking callback: given n >= 1 eligible adapters (ascending index),
** return the position (0..n-1) of the one to evict first.  The engine
** turns this into its eviction policy's pick.
*/
typedef int (*lsim_res_rank_fn)(void *ud, const int *cand, int n);

/*
** Begin a transaction for q.  Victims are chosen among eligible adapters
** (never q->adapter) by `rank` until free + reclaimed covers the demand
** plus the guard; LSIM_E_RES_NOSPACE when even free + reclaimable cannot.
** On success *txn is the txn id, victims are RETIRING, demand.total slots
** are RESERVED(txn) (victim slots first come, lowest index first), and the
** adapter (LOAD/PREFETCH) is RESERVED.  victims_out (may be NULL) gets up to
** max_victims victim indices, *nvictims the count.
*/
lsim_err lsim_res_begin(lsim_res *r, const lsim_res_req *q,
                        lsim_res_rank_fn rank, void *ud, int64_t *txn,
                        int *victims_out, int max_victims, int *nvictims,
                        lsim_errbuf *eb);
/* The same with a caller-chosen victim list (each must be eligible:
** E_RES_NOT_ELIGIBLE & co. otherwise; listed twice: E_RES_DUP_VICTIM;
** not enough: E_RES_NOSPACE). */
lsim_err lsim_res_begin_with(lsim_res *r, const lsim_res_req *q,
                             const int *victims, int nvictims, int64_t *txn,
                             lsim_errbuf *eb);

/* A view of a transaction (slots valid until the next call). */
typedef struct lsim_res_txn_view {
  int64_t id;
  int kind, adapter, stage; /* stage: the adapter's state, or RESERVED */
  int64_t request;
  lsim_res_demand demand;
  int64_t nslots;
  const int64_t *slot; /* [nslots] ascending */
  int nvictims;
  const int *victim;
  int copied;          /* the copy-complete event fired */
  int with;            /* companion loaded by this txn, or -1 */
} lsim_res_txn_view;
lsim_err lsim_res_txn(const lsim_res *r, int64_t txn, lsim_res_txn_view *out,
                      lsim_errbuf *eb);
/* Adapters whose compensating RESTORE txn waits for its copy to start,
** in ascending order, at most max; returns the count. */
int lsim_res_pending_restores(const lsim_res *r, int *adapters, int max);
/* The open txn of adapter a (load, prefetch or restore), or -1. */
int64_t lsim_res_txn_of(const lsim_res *r, int a);

lsim_err lsim_res_copy_start(lsim_res *r, int64_t txn, lsim_errbuf *eb);
/* The copy-complete event of the txn's copy (ok or not). */
lsim_err lsim_res_copy_done(lsim_res *r, int64_t txn, lsim_errbuf *eb);
/* LOADING -> VALIDATED when the staged bytes' digest equals the registered
** artifact digest (E_RES_DIGEST otherwise, state unchanged); before the
** copy event: E_RES_PUBLISH_EARLY. */
lsim_err lsim_res_validate(lsim_res *r, int64_t txn,
                           const lsim_digest *staged, lsim_errbuf *eb);
/* The same for a txn that also loads a companion: staged_with is the
** companion's staged digest (both must match; NULL for a txn without a
** companion).  lsim_res_validate on a txn with a companion fails
** E_RES_DIGEST: the companion's bytes would go unchecked. */
lsim_err lsim_res_validate_with(lsim_res *r, int64_t txn,
                                const lsim_digest *staged,
                                const lsim_digest *staged_with,
                                lsim_errbuf *eb);
/* VALIDATED -> PUBLISHED with generation + 1 (*gen); the adapter owns the
** first `adapter` reserved slots.  Any earlier stage: E_RES_PUBLISH_EARLY. */
lsim_err lsim_res_publish(lsim_res *r, int64_t txn, lsim_tick now,
                          int64_t *gen, lsim_errbuf *eb);
/* Close the txn: bind the request (if any), give its KV slots to a new KV
** object (*kv, or -1 when none), finalize victims (RETIRING -> ABSENT). */
lsim_err lsim_res_commit(lsim_res *r, int64_t txn, lsim_tick now, int *kv,
                         lsim_errbuf *eb);
/*
** Undo a txn that has not published: E_RES_POST_PUBLISH after publication.
** A RESTORE txn that fails drops its victim to ABSENT (slots freed).  Each
** victim of a LOAD/KV/PREFETCH txn gets a RESTORE txn over its own slots;
** their ids go to restore[0..*nrestore) (at most max_restore).
*/
lsim_err lsim_res_rollback(lsim_res *r, int64_t txn, int64_t *restore,
                           int max_restore, int *nrestore, lsim_errbuf *eb);
/* The request of a LOAD txn was cancelled: its KV part goes back to FREE
** and the txn continues as a prefetch.  *released gets the slot count. */
lsim_err lsim_res_txn_drop_request(lsim_res *r, int64_t txn,
                                   int64_t *released, lsim_errbuf *eb);

/* ---- KV objects ----------------------------------------------------------------- */

/* Pages of KV object kv (initial + growth) and pages in use. */
lsim_err lsim_res_kv_pages(const lsim_res *r, int kv, int64_t *owned,
                           int64_t *used, lsim_errbuf *eb);
/* Decode growth: used pages become `used` (<= owned, else E_RES_GROWTH:
** the growth reserve was omitted or too small). */
/* Incremental KV (docs/SCHEDULING.md, "Preemption by recompute"): give KV
** object kv `add` more slots, the lowest free ones, under its generation.
** LSIM_E_RES_NOSPACE (nothing changes) when fewer than `add` are free: the
** caller preempts or waits; growth never evicts an adapter. */
lsim_err lsim_res_kv_extend(lsim_res *r, int kv, int64_t add,
                            lsim_errbuf *eb);
/* Move every slot of KV object src into dst (same request: pages a KV
** transaction reserved, evicting adapters, join the request's object);
** src dies.  Counters do not move. */
lsim_err lsim_res_kv_absorb(lsim_res *r, int dst, int src, lsim_errbuf *eb);
lsim_err lsim_res_kv_grow(lsim_res *r, int kv, int64_t used, lsim_errbuf *eb);
/* Free a KV object's slots (KV -> FREE). */
lsim_err lsim_res_kv_release(lsim_res *r, int kv, lsim_errbuf *eb);
/* Give `give` slots of KV object kv back to FREE (its highest ones; 0 <=
** give < owned): the prefix cache took over rows the request no longer
** keeps a copy of.  Used pages are clamped to what is left. */
lsim_err lsim_res_kv_shrink(lsim_res *r, int kv, int64_t give,
                            lsim_errbuf *eb);

/* A KV object of `pages` slots taken from FREE slots only (lowest index
** first), outside any transaction: the prefix cache's blocks (prefix.h).
** `owner` is recorded as the object's request tag.  LSIM_E_RES_NOSPACE
** when fewer slots are free (nothing changes; adapters are never evicted
** for it).  Release with lsim_res_kv_release. */
lsim_err lsim_res_kv_alloc(lsim_res *r, int64_t owner, int64_t pages, int *kv,
                           lsim_errbuf *eb);

/* ---- checks -------------------------------------------------------------------------- */

/*
** Full check, in release builds too: counters add up to the pool
** (E_RES_CONSERVATION), every owned slot appears in exactly its owner's
** list with its owner's generation (E_RES_OWNERSHIP, E_RES_DOUBLE_OWNER,
** E_RES_STALE_GEN), every reserved slot belongs to an open txn
** (E_RES_LEAK), object states agree with their pages.
*/
lsim_err lsim_res_check(const lsim_res *r, lsim_errbuf *eb);

/*
** Test-only mutation of one slot's physical record, bypassing every rule,
** so that tests can plant the article's negative mutations (a freed
** bitmap entry with an owner still attached, double ownership, a stale
** generation, a leaked reservation) and see lsim_res_check fail closed.
** Never called by the engine.
*/
void lsim_res__mutate_slot(lsim_res *r, int64_t i, int state, int64_t owner,
                           int64_t gen);
/* Test-only: set or clear an adapter's verified host source. */
void lsim_res__set_host(lsim_res *r, int a, int verified);
/* Test-only: overwrite the k-th slot an adapter lists (double ownership). */
void lsim_res__mutate_list(lsim_res *r, int a, int64_t k, int64_t slot);

#endif /* LSIM_RESIDENCY_H */
