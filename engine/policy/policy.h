/*
** policy.h: the pluggable scheduler, eviction and prefetch policies.
**
** Four kinds: schedulers, eviction, prefetch and placement.  A policy is
** a const table of hooks plus the size of the state it needs;
** the engine allocates and zeroes that state, calls init once, and frees it
** (ROSS-style: the model declares, the kernel owns).  Policies see read-only
** views the engine builds for them and return decisions; they never touch
** engine state, read a clock or do I/O, and their decisions depend only on
** the views' contents (never on pointer values).  Callers go through the
** lsim_sched_*, lsim_evict_*, lsim_prefetch_*, lsim_place_* wrappers, which check
** optional slots for NULL.
**
** Registries: lsim_*_find(name) returns the table for a name or NULL;
** lsim_*_names() lists the registered names, NULL-terminated.
*/
#ifndef LSIM_POLICY_H
#define LSIM_POLICY_H

#include "../lsim.h"

/* ---- scheduler: orders eligible waiting requests ------------------------ */

/*
** The adapter cost of running one candidate on this worker, as a vector of
** unlike units that are never summed into one score (article 0x09C).  A
** policy compares it lexicographically in the field order below.
*/
typedef struct lsim_adapter_cost {
  int64_t load_bytes;       /* bytes a load would copy (0 when resident) */
  int64_t basis_bytes;      /* shared-basis bytes to load (0: no basis) */
  int64_t added_runs;       /* 1 when no running request uses the adapter */
  int64_t true_rank;        /* logical rank of the adapter */
  int64_t padded_rank;      /* rank of the physical slot (== true: no pad) */
  int64_t adapter_pages;    /* pool pages of the adapter */
  int64_t kv_pages;         /* pool pages of the request's KV reservation */
  int64_t collective_bytes; /* tensor-parallel traffic (0: one device) */
  /* compressed collections: basis-cluster affinity (lsim_cmp_affinity:
  ** 0 when the candidate's cluster is in the running batch, else weight/2
  ** or weight); 0 for ordinary adapters or affinity_weight 0 */
  int64_t affinity;
} lsim_adapter_cost;

/* Lexicographic comparison of two cost vectors: <0, 0, >0. */
int lsim_adapter_cost_cmp(const lsim_adapter_cost *a,
                          const lsim_adapter_cost *b);

typedef struct lsim_sched_cand {
  int64_t request;
  int tenant;
  int adapter;
  int rank;
  lsim_tick arrival_tick; /* the queue arrival; never reset by a load */
  int prompt_tokens;
  int resident; /* adapter generation published on this worker (ready);
                   only ready candidates are ever shown to order() */
  int urgency;  /* serving urgency class, lower is more urgent (0 today) */
  lsim_adapter_cost cost;
} lsim_sched_cand;

/*
** Policy parameters, from the scenario's $.fairness (docs/SCENARIO.md).
** Completed service of a tenant is w_in * input tokens + w_out * output
** tokens, counted only at iteration completion; the token produced by a
** prefill counts as input work (it is the prefill row's result).
*/
typedef struct lsim_sched_params {
  int ntenants;
  int nadapters;
  int64_t w_in, w_out;          /* service weights, >= 0 */
  const int64_t *tenant_weight; /* ntenants entries >= 1; NULL: all 1 */
  int64_t age_ticks;            /* deficit_aging: age class width (>= 1) */
  int cluster_window;           /* slora_cluster: same-adapter window */
  int64_t affinity_weight;      /* compressed collections: > 0 when the
                                   cost vectors carry basis affinity */
} lsim_sched_params;

typedef struct lsim_sched_ops {
  const char *name;
  size_t state_size;
  /* optional; the params (and tenant_weight) stay valid for the engine's
  ** lifetime */
  lsim_err (*init)(void *state, const lsim_sched_params *p);
  /* Write a permutation of 0..n-1 into order: the admission order for this
  ** iteration, among execution-eligible candidates only.  Required. */
  void (*order)(void *state, lsim_tick now, const lsim_sched_cand *c, int n,
                int *order);
  /* Told at each completed_service_debited publication what a tenant's
  ** request completed: input and output tokens (optional). */
  void (*on_service)(void *state, int tenant, int adapter, int64_t in_tokens,
                     int64_t out_tokens);
  /* Optional: bytes of state (overrides state_size when set). */
  size_t (*state_bytes)(const lsim_sched_params *p);
  /* Optional demand-load gate: may a load transaction start for this cold
  ** (feasible, not ready) candidate now?  ready_work is 1 when the worker
  ** has execution-eligible work (running or ready waiting requests).  NULL:
  ** always.  A gate only withholds loads; it can never make a candidate
  ** ready. */
  int (*load_ok)(void *state, lsim_tick now, const lsim_sched_cand *cold,
                 int ready_work);
  /* Optional: a request of `tenant` joined (+1) or left (-1) the backlog
  ** (waiting or running, any worker); VTC lifts a returning client here. */
  void (*on_backlog)(void *state, int tenant, int delta);
  /* 1: the demand-load gate is exactly "no ready work" (the load_ok above
  ** with `return !ready_work`, which must then be NULL).  The engine
  ** decides it once per step instead of once per cold candidate: while the
  ** worker has ready work it does not look at the cold ones at all (no
  ** candidate is built).  Same loads, same order. */
  int load_when_idle;
} lsim_sched_ops;

const lsim_sched_ops *lsim_sched_find(const char *name);
const char *const *lsim_sched_names(void);

/* ---- eviction: ranks eligible victims ----------------------------------- */

/*
** The engine decides eligibility (the full predicate of docs/RESIDENCY.md);
** a policy only ranks the candidates it is shown, and the engine decides
** when the victim's pages may be reused.
*/
#define LSIM_TICK_NEVER INT64_MAX /* next_use: no use known in the window */

typedef struct lsim_evict_cand {
  int adapter;
  int64_t pages;
  lsim_tick last_use_tick;
  lsim_tick published_tick;
  int64_t uses;       /* requests bound since this generation was published */
  int64_t total_uses; /* requests bound on this worker since the run began */
  int64_t load_cost;  /* bytes a reload would copy */
  lsim_tick next_use; /* oracle policies only (needs_future): tick of the
                         adapter's next arrival within the lookahead window,
                         LSIM_TICK_NEVER when none; LSIM_TICK_NEVER for
                         online policies */
} lsim_evict_cand;

typedef struct lsim_evict_ops {
  const char *name;
  size_t state_size; /* per worker; see state_bytes */
  lsim_err (*init)(void *state, int nadapters); /* optional */
  /* Index in c[0..n-1] of the victim to evict first.  n >= 1.  Required.
  ** The policy may update its own state (e.g. GDSF's inflation value). */
  int (*pick)(void *state, lsim_tick now, const lsim_evict_cand *c, int n);
  /* Optional: bytes of state for nadapters (overrides state_size when
  ** set), so per-adapter tables live in engine-owned memory. */
  size_t (*state_bytes)(int nadapters);
  /* Optional: told when a request binds adapter a on this worker (a hit or
  ** the first use after publication). */
  void (*on_use)(void *state, int adapter, lsim_tick now, int64_t pages,
                 int64_t load_cost);
  /* 1 when the policy reads next_use: the driver must feed the engine the
  ** future of the trace (lsim_engine_future) -- an offline oracle. */
  int needs_future;
} lsim_evict_ops;

const lsim_evict_ops *lsim_evict_find(const char *name);
const char *const *lsim_evict_names(void);

/* ---- prefetch: proposes adapters to load before they are needed --------- */

/*
** What a prefetch policy sees: the distinct cold adapters of the worker's
** waiting queue (first LSIM_ENGINE_WINDOW entries), in queue order, each
** with its pages and the arrival of its oldest waiter, and the pages the
** joint ledger can give a speculative reservation without touching the
** admitted KV growth horizon or the guard (free - guard).  Prefetch and
** admission draw from this one ledger.
*/
typedef struct lsim_prefetch_cand {
  int adapter;
  int64_t pages;
  lsim_tick oldest_arrival;
  int waiters;
} lsim_prefetch_cand;

typedef struct lsim_prefetch_view {
  int worker;
  const lsim_prefetch_cand *cold;
  int ncold;
  int64_t free_pages;
} lsim_prefetch_view;

typedef struct lsim_prefetch_ops {
  const char *name;
  size_t state_size;
  lsim_err (*init)(void *state, int nadapters, int64_t age_ticks); /* opt. */
  /* Write up to max adapter ids to load into out, in the order to try
  ** them; return the count.  Optional: a NULL slot proposes nothing (and
  ** the engine builds no view). */
  int (*propose)(void *state, lsim_tick now, const lsim_prefetch_view *v,
                 int *out, int max);
} lsim_prefetch_ops;

const lsim_prefetch_ops *lsim_prefetch_find(const char *name);
const char *const *lsim_prefetch_names(void);

/* ---- placement: the worker an arriving request joins --------------------- */

/*
** What a placement policy sees of the workers: per-worker queries answered
** by the engine (O(1) each), asked only for the workers the policy looks
** at.  load: waiting + running requests; free_pages: the pool's free
** pages; holds: 1 when the adapter is on the worker or on its way in (not
** absent, host-ready or retiring).
*/
typedef struct lsim_place_view {
  int workers;
  int max_batch_requests;
  int64_t guard_pages;
  const void *ctx;
  int (*load)(const void *ctx, int w);
  int64_t (*free_pages)(const void *ctx, int w);
  int (*holds)(const void *ctx, int w, int adapter);
} lsim_place_view;

typedef struct lsim_place_req {
  int64_t request;
  int tenant;
  int adapter;
  int64_t kv_pages; /* the KV reservation it will ask for */
} lsim_place_req;

typedef struct lsim_place_ops {
  const char *name;
  size_t state_size; /* one state per engine */
  /* The worker, 0..workers-1.  Required. */
  int (*place)(void *state, const lsim_place_view *v, const lsim_place_req *r);
} lsim_place_ops;

const lsim_place_ops *lsim_place_find(const char *name);
const char *const *lsim_place_names(void);
/* The index-th registered placement (the order of lsim_place_names), or
** NULL; index 0 is the default, least_loaded. */
const lsim_place_ops *lsim_place_at(int index);
/* The Punica placement rule on a snapshot (article 0x09E): among workers
** with working set < max_ws and free KV pages >= need, the one with the
** largest working set, ties to the highest index (the deterministic UUID
** order).  -1 when none is feasible. */
int lsim_place_punica(const int *working_set, const int64_t *kv_free, int n,
                      int max_ws, int64_t need);
/* Jump consistent hash (Lamping and Veach) of key into n buckets. */
int lsim_place_jump_hash(uint64_t key, int n);

/* Shared helper for policies: a stable merge sort of order[0..n) (the
** caller fills it) under cmp(ctx, i, j) < 0 meaning i runs before j.
** Deterministic; O(n log n); n is at most LSIM_POLICY_SORT_MAX. */
#define LSIM_POLICY_SORT_MAX 4096
void lsim_policy_sort(int *order, int n,
                      int (*cmp)(const void *ctx, int i, int j),
                      const void *ctx);

/* wrappers (NULL-checking optional slots) */
lsim_err lsim_sched_init(const lsim_sched_ops *o, void *st,
                         const lsim_sched_params *p);
size_t lsim_sched_state_bytes(const lsim_sched_ops *o,
                              const lsim_sched_params *p);
void lsim_sched_order(const lsim_sched_ops *o, void *st, lsim_tick now,
                      const lsim_sched_cand *c, int n, int *order);
void lsim_sched_on_service(const lsim_sched_ops *o, void *st, int tenant,
                           int adapter, int64_t in_tokens, int64_t out_tokens);
int lsim_sched_load_ok(const lsim_sched_ops *o, void *st, lsim_tick now,
                       const lsim_sched_cand *cold, int ready_work);
void lsim_sched_on_backlog(const lsim_sched_ops *o, void *st, int tenant,
                           int delta);
lsim_err lsim_evict_init(const lsim_evict_ops *o, void *st, int nadapters);
int lsim_evict_pick(const lsim_evict_ops *o, void *st, lsim_tick now,
                    const lsim_evict_cand *c, int n);
size_t lsim_evict_state_bytes(const lsim_evict_ops *o, int nadapters);
void lsim_evict_on_use(const lsim_evict_ops *o, void *st, int adapter,
                       lsim_tick now, int64_t pages, int64_t load_cost);
lsim_err lsim_prefetch_init(const lsim_prefetch_ops *o, void *st,
                            int nadapters, int64_t age_ticks);
int lsim_prefetch_propose(const lsim_prefetch_ops *o, void *st, lsim_tick now,
                          const lsim_prefetch_view *v, int *out, int max);
int lsim_place_pick(const lsim_place_ops *o, void *st,
                    const lsim_place_view *v, const lsim_place_req *r);

#endif /* LSIM_POLICY_H */
