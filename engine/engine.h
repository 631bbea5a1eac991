/*
** engine.h: the serving engine, the runtime mechanism of lorasim.
**
** The engine owns the adapter catalog, one page pool per worker (shared by
** adapter weights and KV cache), each worker's waiting queue and running
** set, adapter residency per worker, admission, eviction and iteration
** selection.  It has no clock and does no I/O: the simulator hands it the
** current tick and the facts of the world (an arrival, a copy that finished
** or failed, an iteration that completed), and the engine answers with
** decisions (loads to start, a plan to run) and publishes what became
** authoritative through the sink (event.h).
**
** A typical driver (sim/replay.c):
**
**   lsim_engine_new(&e, &cfg, eb);
**   on arrival:        lsim_engine_arrive_blocks(e, now, &arr, blocks, n,
**                                                &worker, eb)
**   on copy finished:  lsim_engine_load_result(e, w, adapter, now, outcome,
**                                              eb)
**   on iteration end:  lsim_engine_iter_done(e, w, now, ok, eb)
**   after each tick, for each worker touched (and lsim_engine_pop_nudge's):
**                      lsim_engine_step(e, w, now, loads, max, &n, plan,
**                                       &selected, eb)
**   at the end:        lsim_engine_finish(e, now, eb); lsim_engine_release(e)
**
** Inside, engine.c is a core with extensions (engine_impl.h, private):
** the prefix cache is engine/ext_prefix.c; placement, scheduling, eviction
** and prefetch are policies (policy/policy.h).
**
** Each worker's residency runs on its own lsim_res (residency.h): a joint
** page pool of adapter and KV slots, the adapter residency state machine
** (diagram and the function behind each arrow in residency.h), joint
** admission and publication transactions.  The engine drives them:
**
**   step:      a waiting request whose adapter is absent opens a LOAD txn
**              (adapter + its initial KV + decode-growth reserve, victims
**              ranked by the eviction policy) and the copy starts; restore
**              txns left by a rollback start their copies first; prefetch
**              proposals open PREFETCH txns from the same ledger.
**   load done: copy event -> digest validation -> publication (generation
**              + 1) -> commit (the triggering request is pinned and its KV
**              committed, victims finalized); a failed copy or digest rolls
**              the txn back and each victim gets a restore txn (reloaded
**              from its verified host source under a new generation).
**   select:    requests whose adapter is visible are admitted in scheduler
**              order through KV txns (incremental adapter pages 0).
**
** Page conservation, per worker, after every transaction:
**   free + reserved + adapter + kv == pool_pages
** checked by assert in debug builds and by lsim_engine_check() on demand.
*/
#ifndef LSIM_ENGINE_H
#define LSIM_ENGINE_H

#include "compress_res.h"
#include "event.h"
#include "evlog.h"
#include "lsim.h"
#include "plan.h"
#include "policy/policy.h"
#include "residency.h"

typedef struct lsim_engine lsim_engine;

/* How many waiting requests one selection looks at, from the queue head. */
#define LSIM_ENGINE_WINDOW 256

typedef struct lsim_engine_cfg {
  int workers;
  int64_t pool_pages;        /* per worker */
  int64_t page_bytes;
  int64_t max_batch_tokens;  /* rows per iteration */
  int max_batch_requests;    /* running requests per worker */
  int64_t kv_bytes_per_token;
  int max_load_attempts;     /* failed copies before waiters are rejected */
  int ntenants;
  int nadapters;
  const int *adapter_rank;     /* nadapters entries, copied */
  const int64_t *adapter_bytes; /* nadapters entries, copied */
  const int64_t *adapter_pages; /* nadapters entries, copied; NULL: derived
                                   as ceil(bytes / page_bytes) */
  int64_t guard_pages;         /* admission safety margin per worker, >= 0 */
  const lsim_sched_ops *sched;
  const lsim_evict_ops *evict;
  const lsim_prefetch_ops *prefetch;
  lsim_sink sink;
  int max_hotswaps; /* lsim_engine_hotswap calls the run may make (sizes the
                       per-worker lease catalog), >= 0 */
  int log_leases;   /* 1: emit lease_bound / lease_released per request */
  /* scheduling (docs/SCHEDULING.md); zero values keep the defaults */
  lsim_sched_params sched_params; /* ntenants, nadapters: filled in here;
                                     w_in = w_out = 0 means 1 and 1 */
  int placement;        /* enum lsim_placement: the index of a registered
                           placement policy (policy.h, lsim_place_at) */
  int64_t abort_ticks;  /* early abort: a waiting request that has waited
                           longer than this when a selection looks at it is
                           rejected ("early_abort"); 0: off */
  int kv_incremental;    /* 0: a request's KV (prompt + output) is reserved
                            whole at admission; 1: prompt + one token, then
                            page by page, preempting by recompute when the
                            pool is out of pages (docs/SCHEDULING.md) */
  int64_t prefill_chunk; /* chunked prefill: at most this many prompt tokens
                            per prefill row, the rest in later iterations
                            (the first token comes with the last chunk);
                            0: the whole prompt in one row */
  /* vLLM-parity knobs (docs/SCHEDULING.md, docs/RESIDENCY.md); 0 is off
  ** for each, and leaves every row as it was. */
  int max_loras;      /* at most this many distinct adapters in one
                         iteration's plan: selection skips (never rejects)
                         a candidate whose adapter would exceed it; with
                         max_lora_rank also the adapter slots per worker */
  int max_lora_rank;  /* padded-rank slots: adapter_pages are the slot's
                         (the caller pads them); an arrival whose adapter's
                         rank exceeds it is refused
                         ("rank_over_max_lora_rank"); every plan's padded
                         rank rows are rows x max_lora_rank */
  int max_cpu_loras;  /* host tier: adapters each worker keeps in host
                         memory (LRU, touched at every load start and every
                         launch); a load of one not there reads it from
                         disk first (lsim_load_start.disk_bytes) */
  /* A compressed collection (docs/COMPRESSION.md, "Serving"); NULL:
  ** ordinary LoRA adapters.  Copied (its arrays too). */
  const struct lsim_engine_cmp *compress;
  /* The adapter-aware prefix cache (docs/PREFIX.md, "The prefix cache in
  ** the replay"); NULL: off.  Copied. */
  const struct lsim_engine_prefix *prefix;
  /* Residency hooks (residency.h, docs/RESIDENCY.md "Hooks"): attached to
  ** every worker's pool with res_hooks_ud, so that a backend sees each
  ** stage, publication, retirement, launch and KV page event with the
  ** engine's page ids; NULL: none.  Copied. */
  const lsim_res_hooks *res_hooks;
  void *res_hooks_ud;
} lsim_engine_cfg;

/*
** The prefix cache of each worker (engine/prefix.h) in the replay.  Every
** request's prompt is cut into blocks of block_tokens tokens named by the
** trace's prefix block hashes (lsim_arrival.blocks; only full blocks
** count).  The keys are lsim_kv_keys_derive's under `mode` with one hash
** as one pseudo token; every catalog adapter is an ordinary LoRA on
** q/k/v/o of layer 0 with its own semantic ABI.
**
**   admission   the worker's cache is looked up (prefix_hit); the
**               request's first row is prompt - reusable tokens, reusable
**               = hit blocks * block_tokens capped at prompt - 1; under
**               `oblivious` keys a hit computed under another adapter is
**               counted (prefix_corrupt), never silently taken
**   first row   when the prefill (or a recompute) completes, the
**               request's full blocks are published (prefix_published;
**               prefix_evicted when least recently released blocks made
**               room)
**   leaving     finish, cancellation, preemption and the end of the run
**               release the request's references
**   pressure    before a load or KV transaction, or a decode page, finds
**               too few free slots, unreferenced blocks are reclaimed
**               (prefix_evicted "reclaim")
**
** Cache pages are KV objects of the worker's joint pool, so the pool's
** conservation and the engine's recount cover them.  A request still
** reserves KV for its whole prompt (it holds its own copy of the rows):
** reuse saves prefill work, the cache costs pool pages.
*/
typedef struct lsim_engine_prefix {
  int mode;             /* enum lsim_kv_key_mode (kv.h), >= 1 */
  int64_t block_tokens; /* prompt tokens one block hash covers, >= 1 */
  int64_t max_blocks;   /* per worker; 0: pool_pages / pages per block */
  int layers;           /* the model's layers (the key's graph), >= 1 */
  /* share of the catalog (0..1) that are activated LoRAs (aLoRA), chosen
  ** by a fixed low-discrepancy rule over adapter ids; each such request
  ** activates at its last prefix block, so its earlier blocks are base
  ** computation (shareable under the semantic_alora key mode) */
  double alora_fraction;
} lsim_engine_prefix;

/* Worker w's prefix cache counters (engine/prefix.h); all zero when the
** cache is off. */
struct lsim_prefix_stats;
void lsim_engine_prefix_stats(const lsim_engine *e, int w,
                              struct lsim_prefix_stats *out);

/*
** A collection served compressed: adapter a is a core (adapter_bytes[a],
** adapter_pages[a]: R x R or R elements per module) that is useless
** without the shared basis of its cluster.  Each cluster's basis (U, V) is
** a residency object of its own in every worker's joint pool, object
** nadapters + c (lsim_engine_basis_object):
**   - a core whose basis is not resident loads together with it, in one
**     transaction and one copy (lsim_load_start.bytes = core + basis),
**     and both are published at one point: adapter_generation_published
**     for the core, then basis_published (never the basis first);
**   - a basis stays resident while any core of its cluster is resident,
**     loading or retiring (residency.h, "Companions"), and while any
**     request of its cluster is in flight: admission takes a catalog lease
**     (lsim_cmp_acquire) and binds the basis object, the finish (or
**     preemption, cancellation) releases both; the catalog's
**     lsim_cmp_basis_evict must agree when it goes (basis_evicted);
**   - every load's staged core is checked against the worker's catalog
**     (lsim_cmp_check_core): a core paired with another basis version
**     (LSIM_LOAD_STALE_BASIS) fails E_CMP_STALE_BASIS and the load is
**     rolled back like a corrupt copy;
**   - with affinity_weight > 0 a ready candidate's cost vector carries
**     lsim_cmp_affinity (0 when its cluster is in the running batch,
**     weight / 2 otherwise); schedulers that use it (resident_greedy,
**     slora_cluster) only ever see candidates that passed the predicates.
*/
typedef struct lsim_engine_cmp {
  int clusters;               /* k, 1 <= k <= nadapters */
  const int *cluster;         /* [nadapters] cluster of each adapter */
  const int64_t *basis_bytes; /* [clusters] U and V of one cluster */
  const int64_t *basis_pages; /* [clusters] pool pages of one basis */
  const char *version;        /* collection version label */
  lsim_digest bundle, source_set;
  const lsim_digest *basis;   /* [clusters] basis digests */
  const lsim_digest *core;    /* [nadapters] core digests */
  int64_t affinity_weight;    /* >= 0; 0: no affinity cost */
} lsim_engine_cmp;

/* The residency object of cluster c's basis (nadapters + c), or -1. */
int lsim_engine_basis_object(const lsim_engine *e, int cluster);
/* Worker w's collection catalog (NULL when not compressed). */
const lsim_cmp_catalog *lsim_engine_cmp_catalog(const lsim_engine *e, int w);

/* Multi-worker placement of an arriving request (docs/SCHEDULING.md). */
enum lsim_placement {
  LSIM_PLACE_VISIBLE_LEAST_LOADED = 0, /* where the adapter is, else least
                                          loaded (lowest index on ties) */
  LSIM_PLACE_ROUND_ROBIN = 1,
  LSIM_PLACE_PUNICA = 2,   /* largest working set among KV-feasible workers,
                              highest index on ties */
  LSIM_PLACE_AFFINITY = 3  /* jump consistent hash of the adapter */
};
/* Placement by name ("least_loaded", "round_robin", "punica_consolidate",
** "adapter_affinity"): its index (lsim_place_at), -1 when unknown.
** names: NULL-terminated list.  The policies themselves are tables in
** engine/policy/place_*.c (policy.h, lsim_place_ops), with
** lsim_place_punica and lsim_place_jump_hash. */
int lsim_placement_find(const char *name);
const char *const *lsim_placement_names(void);

typedef struct lsim_arrival {
  int64_t request;
  int tenant;
  int adapter;
  int prompt_tokens;
  int output_tokens;
} lsim_arrival;

/* A copy the engine wants the world to perform. */
typedef struct lsim_load_start {
  int worker;
  int adapter;
  int attempt;  /* 1, 2, ... within this load sequence */
  int64_t bytes;
  int64_t pages; /* slots the transaction reserved */
  int64_t request; /* the request it was started for, or LSIM_NONE */
  int restore;  /* 1: compensating reload of a rolled-back victim */
  int64_t disk_bytes; /* host tier (cfg.max_cpu_loras): bytes to read from
                         disk before the host-to-device copy (objects of
                         the load not in the worker's host tier); 0: a
                         host hit, or the tier is off */
} lsim_load_start;

/* What the world reports about a copy (lsim_engine_load_result). */
enum lsim_load_outcome {
  LSIM_LOAD_COPY_FAILED = 0, /* the copy itself failed */
  LSIM_LOAD_OK = 1,          /* copied; the staged digest matches */
  LSIM_LOAD_DIGEST_BAD = 2,  /* copied, but the staged bytes are corrupt */
  LSIM_LOAD_STALE_BASIS = 3  /* copied, but the core was fitted against
                                another basis version (compressed only) */
};

/* Allocate and initialise an engine (cfg and its arrays are copied; the
** policy tables must outlive it).  *out is released with
** lsim_engine_release. */
lsim_err lsim_engine_new(lsim_engine **out, const lsim_engine_cfg *cfg,
                         lsim_errbuf *eb);
void lsim_engine_release(lsim_engine *e);

/* A request arrives: placed on a worker and enqueued (queue_enqueued), or
** rejected at once (admission_rejected + a request record) when it can
** never fit.  *worker receives the worker index, or -1 when rejected. */
lsim_err lsim_engine_arrive(lsim_engine *e, lsim_tick now,
                            const lsim_arrival *a, int *worker,
                            lsim_errbuf *eb);
/* The same with the request's prefix block hashes in prompt order (the
** prefix cache reads the full blocks' hashes; borrowed for the call;
** ignored when the cache is off). */
lsim_err lsim_engine_arrive_blocks(lsim_engine *e, lsim_tick now,
                                   const lsim_arrival *a,
                                   const uint64_t *blocks, int nblocks,
                                   int *worker, lsim_errbuf *eb);

/* Decide for worker w at tick now: the copies to start (written to
** loads[0..*nloads), at most maxloads) and, when the worker is idle, the
** next iteration (*selected = 1 and *plan filled; the plan is owned by the
** caller and must be handed back to lsim_engine_iter_done unchanged). */
lsim_err lsim_engine_step(lsim_engine *e, int w, lsim_tick now,
                          lsim_load_start *loads, int maxloads, int *nloads,
                          lsim_plan *plan, int *selected, lsim_errbuf *eb);

/* A copy finished (ok = 1: validate and publish a new generation) or failed
** (ok = 0: roll the reservation back).  Same as lsim_engine_load_result
** with LSIM_LOAD_OK / LSIM_LOAD_COPY_FAILED. */
lsim_err lsim_engine_load_done(lsim_engine *e, int w, int adapter,
                               lsim_tick now, int ok, lsim_errbuf *eb);
/* A copy event with its outcome (enum lsim_load_outcome).  The engine
** validates the staged digest itself: a corrupt copy fails validation with
** E_RES_DIGEST inside the engine and is rolled back. */
lsim_err lsim_engine_load_result(lsim_engine *e, int w, int adapter,
                                 lsim_tick now, int outcome, lsim_errbuf *eb);

/* Cancel a request that is still waiting (for example while its adapter
** loads): its KV share of an open load txn is released, its queue entry
** closed, and its record written with outcome "cancelled".  *found = 0 when
** the request is not waiting (running, finished or unknown): nothing
** changes. */
lsim_err lsim_engine_cancel(lsim_engine *e, int64_t request, lsim_tick now,
                            int *found, lsim_errbuf *eb);

/* A worker that a migration by recompute queued a request on, which the
** world must step (its own events would not wake it); -1 when none. */
int lsim_engine_pop_nudge(lsim_engine *e);

/*
** Withdraw a request for a reason of the trace (docs/SCHEDULING.md,
** "Cancellation and deadlines"):
**   LSIM_WITHDRAW_CANCEL: the client went away.  Waiting: as
**     lsim_engine_cancel.  Running: its KV and adapter reference go back
**     and its record is written "cancelled" (event request_cancelled,
**     detail "running", value = tokens produced); if it is in the plan in
**     flight, that iteration completes first (its service is real work and
**     is debited) and it leaves at the iteration's completion.
**   LSIM_WITHDRAW_CANCEL_WAITING: only a waiting request (lsim_engine_cancel).
**   LSIM_WITHDRAW_DEADLINE: a request still waiting for admission at its
**     deadline is refused (admission_rejected, reason "deadline_expired",
**     outcome "rejected"); an admitted or running one is left alone.
** *found = 0 when nothing changed.
*/
enum {
  LSIM_WITHDRAW_CANCEL = 1,
  LSIM_WITHDRAW_CANCEL_WAITING = 2,
  LSIM_WITHDRAW_DEADLINE = 3
};
lsim_err lsim_engine_withdraw(lsim_engine *e, int64_t request, lsim_tick now,
                              int why, int *found, lsim_errbuf *eb);

/*
** The engine's event log (evlog.h): the one seq counter and cfg.sink's event
** callback.  The world writes the events it decides (fault_injected) here, so
** they take their place in the same sequence as the engine's own.  Borrowed:
** valid until lsim_engine_release.
*/
lsim_evlog *lsim_engine_evlog(lsim_engine *e);

/*
** The future of the trace, for offline eviction oracles (a policy with
** needs_future): the driver calls lsim_engine_future_push for every record
** it reads into its lookahead window, in arrival order, and
** lsim_engine_future_pop when that record's arrival is delivered.  The
** engine keeps one FIFO of arrival ticks per adapter, so its memory is
** bounded by the driver's window.  Unused (and harmless) for online
** policies.
*/
lsim_err lsim_engine_future_push(lsim_engine *e, int adapter, lsim_tick tick,
                                 lsim_errbuf *eb);
void lsim_engine_future_pop(lsim_engine *e, int adapter);

/* The worker's iteration finished.  ok = 1 debits completed service and
** advances requests; ok = 0 debits nothing and leaves requests as they
** were. */
lsim_err lsim_engine_iter_done(lsim_engine *e, int w, lsim_tick now, int ok,
                               lsim_errbuf *eb);

/* End of run: every request still queued or running gets its record with
** outcome "unfinished". */
lsim_err lsim_engine_finish(lsim_engine *e, lsim_tick now, lsim_errbuf *eb);

/*
** Hotswap (docs/RESIDENCY.md, "Replay-driven hotswap").  Each worker keeps
** an alias catalog (hotswap.h) whose aliases are the adapters; a request
** resolves its adapter's alias once, when it is admitted to run, into a
** lease (slot, slot generation, pointer generation, artifact digest) that
** every launch checks and that it keeps until it finishes.
**
** lsim_engine_hotswap replaces adapter's artifact with version v + 1 on
** every worker, in `mode`:
**
**   LSIM_HSM_SHADOW     stage the new version into a free slot; the world
**                       copies it (copies[] out) and reports with
**                       lsim_engine_hotswap_done: validated and published by
**                       one compare-and-publish, or aborted (the old
**                       generation stays authoritative).
**   LSIM_HSM_DRAIN      drain then overwrite: new admissions of the adapter
**                       wait on that worker until its slot has refcount 0
**                       and its last-use event complete, then the slot is
**                       rewritten in place under new generations.
**   LSIM_HSM_NEW_ALIAS  stage and publish under a fresh alias; on
**                       publication the adapter migrates to it and the old
**                       alias's slot retires.
**
** A worker whose catalog never mapped the adapter takes the version at
** once ("cold").  Old slots are reclaimed only at refcount 0 with their
** last-use event complete.  Every step is an event (event.h, the
** hotswap_*, slot_* and lease_* kinds).
*/
enum lsim_hs_mode { LSIM_HSM_SHADOW = 0, LSIM_HSM_DRAIN = 1,
                    LSIM_HSM_NEW_ALIAS = 2 };
/* Stable names: "shadow", "drain_then_overwrite", "new_alias". */
const char *lsim_hs_mode_name(int mode);

typedef struct lsim_hs_copy {
  int worker;
  int adapter;
  int64_t bytes; /* to copy */
  int64_t slot;  /* the shadow slot */
} lsim_hs_copy;

lsim_err lsim_engine_hotswap(lsim_engine *e, lsim_tick now, int adapter,
                             int mode, lsim_hs_copy *copies, int maxcopies,
                             int *ncopies, lsim_errbuf *eb);
/* The shadow copy of adapter on worker w finished with `outcome`
** (enum lsim_load_outcome). */
lsim_err lsim_engine_hotswap_done(lsim_engine *e, int w, int adapter,
                                  lsim_tick now, int outcome,
                                  lsim_errbuf *eb);

/* Conservation and ownership check of every worker's pool; 1 when sound. */
int lsim_engine_check(const lsim_engine *e);

/* Read-only views for reports and tests. */
typedef struct lsim_worker_view {
  int64_t pool_pages, free_pages, reserved_pages, adapter_pages, kv_pages;
  int waiting, running, resident_adapters, loading_adapters, busy;
} lsim_worker_view;
void lsim_engine_worker_view(const lsim_engine *e, int w,
                             lsim_worker_view *out);
int64_t lsim_engine_adapter_pages(const lsim_engine *e, int adapter);
/* The worker's residency engine (read-only use: views and checks). */
const struct lsim_res *lsim_engine_res(const lsim_engine *e, int w);
/* Requests not yet finished or rejected, over all workers. */
int64_t lsim_engine_live_requests(const lsim_engine *e);

#endif /* LSIM_ENGINE_H */
