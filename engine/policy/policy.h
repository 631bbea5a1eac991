/*
** policy.h: the pluggable scheduler, eviction and prefetch policies.
**
** A policy is a const table of hooks plus the size of the state it needs;
** the engine allocates and zeroes that state, calls init once, and frees it
** (ROSS-style: the model declares, the kernel owns).  Policies see read-only
** views the engine builds for them and return decisions; they never touch
** engine state, read a clock or do I/O, and their decisions depend only on
** the views' contents (never on pointer values).  Callers go through the
** lsim_sched_*, lsim_evict_*, lsim_prefetch_* wrappers, which check
** optional slots for NULL.
**
** Registries: lsim_*_find(name) returns the table for a name or NULL;
** lsim_*_names() lists the registered names, NULL-terminated.
*/
#ifndef LSIM_POLICY_H
#define LSIM_POLICY_H

#include "../lsim.h"

/* ---- scheduler: orders eligible waiting requests ------------------------ */

typedef struct lsim_sched_cand {
  int64_t request;
  int tenant;
  int adapter;
  int rank;
  lsim_tick arrival_tick;
  int prompt_tokens;
  int resident; /* adapter generation published on this worker */
} lsim_sched_cand;

typedef struct lsim_sched_ops {
  const char *name;
  size_t state_size;
  lsim_err (*init)(void *state, int ntenants, int nadapters); /* optional */
  /* Write a permutation of 0..n-1 into order: the admission order for this
  ** iteration.  Required. */
  void (*order)(void *state, lsim_tick now, const lsim_sched_cand *c, int n,
                int *order);
  /* Told after each completed iteration how many service units a tenant
  ** received (optional; fairness policies use it). */
  void (*on_service)(void *state, int tenant, int adapter, int64_t units);
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

typedef struct lsim_prefetch_ops {
  const char *name;
  size_t state_size;
  lsim_err (*init)(void *state, int nadapters); /* optional */
  /* Write up to max adapter ids to load on `worker` into out; return the
  ** count.  Optional: a NULL slot proposes nothing. */
  int (*propose)(void *state, int worker, lsim_tick now, int *out, int max);
} lsim_prefetch_ops;

const lsim_prefetch_ops *lsim_prefetch_find(const char *name);
const char *const *lsim_prefetch_names(void);

/* wrappers (NULL-checking optional slots) */
lsim_err lsim_sched_init(const lsim_sched_ops *o, void *st, int ntenants,
                         int nadapters);
void lsim_sched_order(const lsim_sched_ops *o, void *st, lsim_tick now,
                      const lsim_sched_cand *c, int n, int *order);
void lsim_sched_on_service(const lsim_sched_ops *o, void *st, int tenant,
                           int adapter, int64_t units);
lsim_err lsim_evict_init(const lsim_evict_ops *o, void *st, int nadapters);
int lsim_evict_pick(const lsim_evict_ops *o, void *st, lsim_tick now,
                    const lsim_evict_cand *c, int n);
size_t lsim_evict_state_bytes(const lsim_evict_ops *o, int nadapters);
void lsim_evict_on_use(const lsim_evict_ops *o, void *st, int adapter,
                       lsim_tick now, int64_t pages, int64_t load_cost);
lsim_err lsim_prefetch_init(const lsim_prefetch_ops *o, void *st,
                            int nadapters);
int lsim_prefetch_propose(const lsim_prefetch_ops *o, void *st, int worker,
                          lsim_tick now, int *out, int max);

#endif /* LSIM_POLICY_H */
