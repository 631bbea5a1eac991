/*
** event.h: publication events and the sink the engine emits them through.
**
** A publication event is the one point at which a piece of runtime state
** becomes authoritative (article 0x09K): a queue arrival, a reservation, a
** copy start or finish, a generation made visible, a plan frozen, a result
** known, service debited, ownership released.  Every counter and metric in
** lorasim is derived from these events and from nothing else.
**
** The engine has no I/O.  It hands each event to an lsim_sink, a pair of
** callbacks the simulator supplies (the SQLite logger and the metrics
** registry are sinks; tests use their own).  Events arrive at the sink in
** emission order; `seq` is assigned by the event log (evlog.h) that both the
** engine and the world write to, and is strictly increasing within one run,
** so (tick, seq) is a total order of the log.
**
** The numeric kind codes are stored in the database: append only, never
** renumber.  lsim_event_kind_name() gives the stable string.
*/
#ifndef LSIM_EVENT_H
#define LSIM_EVENT_H

#include "lsim.h"

#define LSIM_EVENT_KINDS(X)                                                \
  /* the 0x09K spine */                                                    \
  X(LSIM_EV_QUEUE_ENQUEUED, 1, "queue_enqueued")                           \
  X(LSIM_EV_PREFETCH_RESERVED, 2, "prefetch_reserved")                     \
  X(LSIM_EV_ADAPTER_LOAD_STARTED, 3, "adapter_load_started")               \
  X(LSIM_EV_ADAPTER_LOAD_COMPLETED, 4, "adapter_load_completed")           \
  X(LSIM_EV_ADAPTER_GENERATION_PUBLISHED, 5, "adapter_generation_published") \
  X(LSIM_EV_ITERATION_SELECTED, 6, "iteration_selected")                   \
  X(LSIM_EV_ITERATION_COMPLETED, 7, "iteration_completed")                 \
  X(LSIM_EV_COMPLETED_SERVICE_DEBITED, 8, "completed_service_debited")     \
  X(LSIM_EV_PREFETCH_RELEASED, 9, "prefetch_released")                     \
  /* admission, eviction, retirement, rollback, request closure */         \
  X(LSIM_EV_ADMISSION_REJECTED, 10, "admission_rejected")                  \
  X(LSIM_EV_ADAPTER_EVICTED, 11, "adapter_evicted")                        \
  X(LSIM_EV_ADAPTER_RETIRED, 12, "adapter_retired")                        \
  X(LSIM_EV_ADAPTER_LOAD_FAILED, 13, "adapter_load_failed")                \
  X(LSIM_EV_LOAD_ROLLED_BACK, 14, "load_rolled_back")                      \
  X(LSIM_EV_KV_RESERVED, 15, "kv_reserved")                                \
  X(LSIM_EV_KV_RELEASED, 16, "kv_released")                                \
  X(LSIM_EV_REQUEST_FINISHED, 17, "request_finished")                     \
  /* residency transactions, faults and recoveries (docs/RESIDENCY.md) */  \
  X(LSIM_EV_ADAPTER_RESTORING, 18, "adapter_restoring")                    \
  X(LSIM_EV_ADAPTER_VALIDATED, 19, "adapter_validated")                    \
  X(LSIM_EV_FAULT_INJECTED, 20, "fault_injected")                          \
  X(LSIM_EV_REQUEST_CANCELLED, 21, "request_cancelled")                   \
  /* replay-driven hotswap and request leases (docs/RESIDENCY.md) */       \
  X(LSIM_EV_HOTSWAP_REQUESTED, 22, "hotswap_requested")                   \
  X(LSIM_EV_HOTSWAP_STAGED, 23, "hotswap_staged")                         \
  X(LSIM_EV_HOTSWAP_VALIDATED, 24, "hotswap_validated")                   \
  X(LSIM_EV_HOTSWAP_PUBLISHED, 25, "hotswap_published")                   \
  X(LSIM_EV_HOTSWAP_ABORTED, 26, "hotswap_aborted")                       \
  X(LSIM_EV_SLOT_RETIRING, 27, "slot_retiring")                           \
  X(LSIM_EV_SLOT_RECLAIMED, 28, "slot_reclaimed")                         \
  X(LSIM_EV_LEASE_BOUND, 29, "lease_bound")                               \
  X(LSIM_EV_LEASE_RELEASED, 30, "lease_released")                         \
  /* preemption by recompute (docs/SCHEDULING.md) */                      \
  X(LSIM_EV_REQUEST_PREEMPTED, 31, "request_preempted")                  \
  /* compressed collections: shared bases (docs/COMPRESSION.md) */        \
  X(LSIM_EV_BASIS_PUBLISHED, 32, "basis_published")                      \
  X(LSIM_EV_BASIS_EVICTED, 33, "basis_evicted")                         \
  /* the adapter-aware prefix cache in the replay (docs/PREFIX.md) */     \
  X(LSIM_EV_PREFIX_HIT, 34, "prefix_hit")                                \
  X(LSIM_EV_PREFIX_PUBLISHED, 35, "prefix_published")                    \
  X(LSIM_EV_PREFIX_EVICTED, 36, "prefix_evicted")                        \
  X(LSIM_EV_PREFIX_CORRUPT, 37, "prefix_corrupt")                        \
  /* the host tier, $.workers.max_cpu_loras (docs/RESIDENCY.md) */        \
  X(LSIM_EV_ADAPTER_HOST_HIT, 38, "adapter_host_hit")                    \
  X(LSIM_EV_ADAPTER_DISK_READ, 39, "adapter_disk_read")                  \
  X(LSIM_EV_ADAPTER_HOST_DROPPED, 40, "adapter_host_dropped")

enum lsim_event_kind {
#define LSIM__EVK(sym, val, name) sym = val,
  LSIM_EVENT_KINDS(LSIM__EVK)
#undef LSIM__EVK
  LSIM_EV__END
};

/* Stable name of a kind ("queue_enqueued"); NULL for an unknown code. */
const char *lsim_event_kind_name(int kind);

#define LSIM_NONE (-1) /* an absent id field */

/*
** One publication event.  Every id field is LSIM_NONE when it does not
** apply.  Units: tick in ticks; pages in pool pages; bytes in bytes.
** `value` is kind-specific and documented in docs/SCHEMA.md (for example the
** service units debited, or the rows in a selected iteration); `detail` is a
** short static string or NULL (never owned by the sink).
*/
typedef struct lsim_event {
  int64_t seq;        /* assigned by the event log, strictly increasing */
  lsim_tick tick;
  int kind;           /* enum lsim_event_kind */
  int worker;
  int64_t request;
  int tenant;
  int adapter;
  int64_t generation; /* adapter slot generation, or iteration number */
  int attempt;        /* load attempt or request attempt */
  int64_t pages;
  int64_t bytes;
  int64_t value;
  const char *detail;
} lsim_event;

/* A finished (or rejected) request, handed to the sink once. */
typedef struct lsim_request_record {
  int64_t request;
  int tenant;
  int adapter;
  int worker;               /* LSIM_NONE when never placed */
  lsim_tick arrival_tick;
  lsim_tick first_token_tick; /* LSIM_NONE when no token was produced */
  lsim_tick finish_tick;
  int prompt_tokens;
  int output_tokens;        /* tokens actually produced */
  int loads_waited;         /* adapter loads this request waited for */
  const char *outcome;      /* "ok", "rejected", "unfinished" */
} lsim_request_record;

/*
** The sink.  Callbacks return 0 or an lsim_err; a non-zero return stops the
** engine, which propagates the code to its caller.  Either callback may be
** NULL.  The sink never takes ownership of the structs it is handed: copy
** what you keep.
*/
/*
** A starvation-predicate interval (article 0x09H), handed to the sink when
** it closes.  kind "load": adapter `entity` on `worker` had a load-eligible
** (feasible, not ready) waiting request throughout [start, end) and no
** generation was published.  kind "service": tenant `entity` had an
** execution-eligible waiting request throughout [start, end) and no
** completed_service_debited event (worker is LSIM_NONE).  closed_by:
** "published", "served", "drained" (the eligible requests left: admitted,
** cancelled or rejected) or "open" (still open when the run ended).
*/
typedef struct lsim_interval {
  const char *kind;
  int worker;
  int entity;
  lsim_tick start, end;
  const char *closed_by;
} lsim_interval;

typedef struct lsim_sink {
  lsim_err (*event)(void *ud, const lsim_event *ev);
  lsim_err (*request_done)(void *ud, const lsim_request_record *rec);
  void *ud;
  /* optional, appended: starvation-predicate intervals as they close */
  lsim_err (*interval)(void *ud, const lsim_interval *iv);
} lsim_sink;

#endif /* LSIM_EVENT_H */
