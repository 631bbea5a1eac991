/*
** replay.c: the replay loop and the world around the engine.
**
** Time flows only through the event queue.  Queue event classes fix what
** happens first within one tick:
**
**   0 LOAD_DONE   a copy finished (or failed) on a worker's copy engine
**   1 ITER_DONE   a worker's iteration finished
**   2 ARRIVAL     the next trace record is due (exactly one is pending)
**   3 STEP        a worker decides: loads to start, the next iteration
**
** A worker gets at most one pending STEP per tick, pushed when an event of
** classes 0-2 touched it, so the decision sees every fact of its tick.
** Random draws for copy faults come from the faults stream only.
**
** The clock ($.clock, --clock; docs/FIDELITY.md).  Under the model clock
** (the default) an iteration lasts what the cost model says (with TP
** collectives) and a copy what the link's bandwidth says: measured backend
** times are recorded and never feed back into time, so every backend gives
** the same rows.  Under the measured clock an iteration ends at its start
** plus the backend's measured time (lsim_backend_result.backend_ns, when
** ok) and a load at its copy's start plus the backend's measured time of
** the stage that wrote its bytes (lsim_backend_load_ns); a span with no
** measurement falls back to the model's time and is counted.  Decisions
** still come from the engine's state only: the measured clock changes when
** things happen, never how they are decided.  Both times are recorded
** either way (iterations.model_ns / measured_ns, the loads table).
**
** Ordering the measured load time relies on: lsim_engine_step starts a
** load's transaction (lsim_res_copy_start), which fires the stage hook,
** and only then returns the load, whose copy time this file computes
** after the step.  The replay's own stage hook notes which (worker,
** object) were staged during the current step (staged_at = the step's
** serial), and a load's measured time is taken only from a stage of that
** step: a load without one falls back to the model, counted.
**
** Faults ($.faults, docs/SCENARIO.md): a copy fails at a listed tick or with
** a seeded probability, its staged bytes fail the digest check, the H2D
** bandwidth slows down inside a tick window, or the request a demand load
** was started for is cancelled halfway through the copy (a CANCEL event,
** queued with the arrivals' class).  Each is logged as fault_injected when
** it takes effect and the engine logs the recovery.
**
** Hotswaps ($.hotswaps): each is a HOTSWAP event at its tick (queued with
** the arrivals' class, in array order on ties) that asks the engine to
** replace the adapter's artifact; a shadow copy runs on the worker's copy
** engine like a load and its completion (HS_DONE, class 0) carries the
** outcome the scenario forces ("fail": copy or digest), logged as
** fault_injected with value 1.
**
** Offline eviction oracles (a policy with needs_future) see the future of
** the trace through a bounded lookahead: the replay reads up to
** LSIM__LOOKAHEAD records ahead of the pending arrival and feeds each one to
** lsim_engine_future_push; memory stays bounded by that window.  Online
** policies read exactly one record ahead, as before.
*/
#include "replay.h"

#include "engine/checked.h"

#include <errno.h>
#include <math.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../backends/backend.h"
#ifdef LSIM_HAVE_CUDA
#include "../backends/cuda/backend_full.h"
#include "../backends/cuda/cuda.h"
#endif
#include "../engine/engine.h"
#include "../engine/tp.h"
#include "../traces/trace.h"
#include "bundle.h"
#include "db.h"
#include "outfile.h"
#include "queue.h"
#include "recclock.h"
#include "../base/rng.h"
#include "runid.h"
#include "sumjson.h"
#include "tenants.h"

enum { LSIM__Q_LOAD_DONE = 0, LSIM__Q_ITER_DONE = 1, LSIM__Q_ARRIVAL = 2,
       LSIM__Q_STEP = 3 };

#define LSIM__MAX_LOADS 64
#define LSIM__Q_CANCEL 4 /* queued with class 2 (a fact of the world) */
#define LSIM__Q_HOTSWAP 5 /* queued with class 2 */
#define LSIM__Q_HS_DONE 6 /* queued with class 0 */
#define LSIM__Q_WITHDRAW 7 /* queued with class 2: a trace cancel/deadline */
#define LSIM__LOOKAHEAD 4096 /* records the oracle may see ahead */

typedef struct lsim__ahead {
  int64_t id, arrival_ns, deadline_ns, cancel_ns;
  int tenant, adapter, prompt, output;
} lsim__ahead;

/* The serving side of a compressed collection, owned by the replay. */
typedef struct lsim__cmpset {
  lsim_engine_cmp cfg;
  int *cluster;
  int64_t *basis_bytes, *basis_pages;
  lsim_digest *basis, *core;
  int method, R;       /* for the cost model and the report */
} lsim__cmpset;

typedef struct lsim__world {
  const lsim_scenario *sc;
  const lsim_replay_opts *o;
  lsim_engine *eng;
  lsim_db *db;
  lsim_metrics m;
  lsim_backend be;
  int be_open;
  int follows;             /* the backend follows the residency (backend.h) */
  lsim_cost_model cost;
  lsim_tp_cost tp_cost;    /* zero unless $.workers.tp_degree > 1 */
  lsim_queue q;
  lsim_trace tr;
  int tr_open;
  lsim_rng faults;
  lsim_tick now;
  lsim_tick *copy_free_at; /* per worker */
  lsim_tick *disk_free_at; /* per worker: its disk channel (host tier) */
  lsim_tick *step_at;      /* per worker: tick of its pending STEP, or -1 */
  lsim_plan *plans;        /* per worker: the plan in flight */
  int64_t *backend_ns;     /* per worker: measured ns of the plan in flight */
  lsim_trace_rec next;     /* the pending arrival */
  int have_next;
  int64_t arrived, iterations, queue_events;
  int64_t events;          /* every event the sink saw (logged or not) */
  int *rank;               /* [adapters] the catalog's ranks */
  lsim__cmpset cmp;        /* $.adapters.compression (cfg.clusters 0: off) */
  lsim_err sink_rc;        /* first sink failure */
  int next_copy_fail, next_digest_fail; /* indices into the fault ticks */
  int64_t tp_gen;          /* TP: generations published through snapshots */
  lsim__ahead *ring;       /* lookahead window (oracle policies only) */
  int ring_head, ring_n, ring_cap, ring_eof;
  int64_t starve_ticks;    /* the threshold intervals are judged by */
  int64_t *tenant_weight;  /* [tenants] the schedulers' fairness weights */
  char **aname;            /* [adapters] names the trace gave, or NULL
                              (allocated at the first one) */
  char targets[LSIM_MAX_TARGETS * LSIM_NAME_MAX]; /* "q_proj,v_proj" */
  /* both clocks (file comment) */
  int executes;            /* the backend measures (LSIM_BACKEND_EXECUTES) */
  int model_be;            /* the backend is `model`: its time is W->cost's */
  int64_t *model_ns;       /* per worker: the plan in flight, cost model */
  int64_t *measured_ns;    /* per worker: its measured ns, or -1 */
  int64_t *ctx_tokens;     /* per worker: its context tokens, or -1 */
  int nobj;                /* residency objects per worker */
  int64_t *staged_at;      /* [workers][nobj]: step serial of the last
                              stage, 0 never */
  int64_t step_serial;     /* lsim__on_step calls so far */
  int64_t loads_logged;    /* rows of the loads table */
  lsim_replay_clock clk;   /* what drove the clock, counted */
  lsim_recclock *rec;      /* --clock-from: the recorded spans, or NULL */
} lsim__world;

/* ---- the fan-out sink: database first, then metrics --------------------- */

static lsim_err lsim__sink_event(void *ud, const lsim_event *ev) {
  lsim__world *W = ud;
  const lsim_sink *tap = W->o->tap;
  W->events++;
  if (!W->o->summary_only) {
    lsim_err rc = lsim_db_event(W->db, ev);
    if (rc)
      return rc;
  }
  lsim_metrics_event(&W->m, ev);
  return tap && tap->event ? tap->event(tap->ud, ev) : 0;
}

/* A starvation interval closed: judged, logged and counted. */
static lsim_err lsim__sink_interval(void *ud, const lsim_interval *iv) {
  lsim__world *W = ud;
  int64_t st = W->starve_ticks;
  int starved = !strcmp(iv->closed_by, "open") ||
                (st > 0 && iv->end - iv->start >= st);
  lsim_err rc = lsim_db_interval(W->db, iv, starved);
  if (rc)
    return rc;
  lsim_metrics_interval(&W->m, iv, starved);
  const lsim_sink *tap = W->o->tap;
  return tap && tap->interval ? tap->interval(tap->ud, iv) : 0;
}

static lsim_err lsim__sink_request(void *ud, const lsim_request_record *rec) {
  lsim__world *W = ud;
  lsim_err rc = lsim_db_request(W->db, rec);
  if (rc)
    return rc;
  lsim_metrics_request(&W->m, rec);
  const lsim_sink *tap = W->o->tap;
  return tap && tap->request_done ? tap->request_done(tap->ud, rec) : 0;
}

/* ---- the residency hooks: the backend's, with the stage noted ------------ */

static lsim_err lsim__hk_stage(void *ud, const lsim_res_page_ev *ev,
                               lsim_errbuf *eb) {
  lsim__world *W = ud;
  lsim_err rc = lsim_backend_stage(&W->be, ev, eb);
  if (!rc && ev->worker >= 0 && ev->worker < W->sc->workers &&
      ev->object >= 0 && ev->object < W->nobj)
    W->staged_at[(size_t)ev->worker * (size_t)W->nobj + (size_t)ev->object] =
        W->step_serial;
  return rc;
}

#define LSIM__HK(fn, wrap)                                                  \
  static lsim_err fn(void *ud, const lsim_res_page_ev *ev, lsim_errbuf *eb) { \
    return wrap(&((lsim__world *)ud)->be, ev, eb);                          \
  }
LSIM__HK(lsim__hk_publish, lsim_backend_publish)
LSIM__HK(lsim__hk_retire, lsim_backend_retire)
LSIM__HK(lsim__hk_launch, lsim_backend_launch)
LSIM__HK(lsim__hk_kv, lsim_backend_kv)
#undef LSIM__HK

static const lsim_res_hooks lsim__hooks = {lsim__hk_stage, lsim__hk_publish,
                                           lsim__hk_retire, lsim__hk_launch,
                                           lsim__hk_kv};

/* The measured time of the stage copy of `obj` on worker w, taken in the
** current step (file comment), or -1; consumed, so a companion staged
** once is counted once. */
static int64_t lsim__staged_ns(lsim__world *W, int w, int obj) {
  if (!W->staged_at || obj < 0 || obj >= W->nobj)
    return -1;
  int64_t *at = &W->staged_at[(size_t)w * (size_t)W->nobj + (size_t)obj];
  if (*at != W->step_serial)
    return -1;
  *at = 0;
  return lsim_backend_load_ns(&W->be, w, obj);
}

/* ---- time helpers ------------------------------------------------------- */

/* The longest span one copy or one iteration may take, in ns: 2^62 (about
** 146 simulated years), so that a tick sum of a few of them stays inside
** int64.  A longer one is an E_SCN_RANGE error naming the scenario key that
** made it (docs/SCENARIO.md), never a silently clamped or wrapped time. */
#define LSIM__MAX_SPAN_NS (INT64_C(1) << 62)

static lsim_tick lsim__ns_to_ticks_ceil(const lsim_scenario *sc, int64_t ns) {
  lsim_tick t = (ns + sc->ns_per_tick - 1) / sc->ns_per_tick;
  return t < 1 ? 1 : t;
}

/* *done = start + the ticks of ns, checked; key names the cause. */
static lsim_err lsim__span_end(const lsim_scenario *sc, lsim_tick start,
                               int64_t ns, const char *key, lsim_tick *done,
                               lsim_errbuf *eb) {
  if (ns < 0 || ns > LSIM__MAX_SPAN_NS ||
      lsim_add_i64_checked(start, lsim__ns_to_ticks_ceil(sc, ns), done))
    return lsim_fail(eb, LSIM_E_SCN_RANGE,
                     "%s: a span of %lld ns from tick %lld passes the end of "
                     "the tick clock",
                     key, (long long)ns, (long long)start);
  return 0;
}

/* The ns a disk read of `bytes` takes in the host tier's miss path
** ($.workers.disk_gbps, disk_fixed_us), like lsim__copy_ns. */
static lsim_err lsim__disk_ns(const lsim_scenario *sc, int64_t bytes,
                              int64_t *ns, lsim_errbuf *eb) {
  int64_t t;
  if (lsim_d2i64_ceil((double)bytes / sc->disk_gbps, 0, LSIM__MAX_SPAN_NS, &t) ||
      lsim_add_i64_checked(t, sc->disk_fixed_us * 1000, ns) ||
      *ns > LSIM__MAX_SPAN_NS)
    return lsim_fail(eb, LSIM_E_SCN_RANGE,
                     "$.workers.disk_gbps: a read of %lld bytes at %g GB/s "
                     "takes more than 2^62 ns",
                     (long long)bytes, sc->disk_gbps);
  return 0;
}

/* The ns a copy of `bytes` takes: bytes / (GB/s) = ns, rounded up so a copy
** never takes zero time, checked against LSIM__MAX_SPAN_NS. */
static lsim_err lsim__copy_ns(const lsim_scenario *sc, int64_t bytes,
                              int64_t *ns, lsim_errbuf *eb) {
  int64_t t;
  if (sc->copy_prof) { /* the profile's copy model (docs/PROFILE.md) */
    if (lsim_d2i64_ceil(lsim_scenario_copy_ns(sc, bytes), 1,
                        LSIM__MAX_SPAN_NS, ns))
      return lsim_fail(eb, LSIM_E_SCN_RANGE,
                       "%s: a copy of %lld bytes at %g GB/s takes more "
                       "than 2^62 ns",
                       sc->cost_profile, (long long)bytes, sc->copy_gbps);
    return 0;
  }
  if (lsim_d2i64_ceil((double)bytes / sc->h2d_gbps, 0, LSIM__MAX_SPAN_NS, &t) ||
      lsim_add_i64_checked(t, sc->load_fixed_us * 1000, ns) ||
      *ns > LSIM__MAX_SPAN_NS)
    return lsim_fail(eb, LSIM_E_SCN_RANGE,
                     "$.workers.h2d_gbps: a copy of %lld bytes at %g GB/s "
                     "takes more than 2^62 ns",
                     (long long)bytes, sc->h2d_gbps);
  return 0;
}

static lsim_err lsim__push(lsim__world *W, lsim_tick tick, int cls, int w,
                           int64_t a, int64_t b, lsim_errbuf *eb) {
  lsim_qev ev = {tick, cls, 0, cls, w, a, b};
  if (lsim_queue_push(&W->q, &ev))
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory in the event queue");
  return 0;
}

static lsim_err lsim__touch(lsim__world *W, int w, lsim_errbuf *eb) {
  if (W->step_at[w] == W->now)
    return 0;
  W->step_at[w] = W->now;
  return lsim__push(W, W->now, LSIM__Q_STEP, w, 0, 0, eb);
}

/* ---- the catalog (tables tenants and adapters) ---------------------------- */

static lsim_err lsim__catalog_adapter(lsim__world *W, int a, const char *name) {
  char dflt[32];
  if (!name) {
    snprintf(dflt, sizeof dflt, "adapter-%d", a);
    name = dflt;
  }
  lsim_db_adapter_row row = {a,
                             name,
                             lsim_engine_adapter_owner(W->eng, a),
                             W->rank[a],
                             lsim_engine_adapter_bytes(W->eng, a),
                             lsim_engine_adapter_pages(W->eng, a),
                             W->targets};
  return lsim_db_adapter(W->db, &row);
}

/* Every tenant and adapter, before the first event: a reader of a run in
** progress (or of one that died) already sees the names. */
static lsim_err lsim__catalog(lsim__world *W, lsim_errbuf *eb) {
  const lsim_scenario *sc = W->sc;
  size_t off = 0;
  /* 16 names of at most 63 bytes and their commas fit */
  for (int i = 0; i < sc->ntargets && off < sizeof W->targets; i++)
    off += (size_t)snprintf(W->targets + off, sizeof W->targets - off, "%s%s",
                            i ? "," : "", sc->targets[i].name);
  lsim_err rc = 0;
  for (int t = 0; !rc && t < sc->ntenants; t++) {
    lsim_db_tenant_row row = {t, sc->tenants[t].name, W->tenant_weight[t],
                              sc->tenants[t].traffic_weight};
    rc = lsim_db_tenant(W->db, &row);
  }
  for (int a = 0; !rc && a < sc->adapters; a++)
    rc = lsim__catalog_adapter(W, a, NULL);
  return rc ? lsim_fail(eb, rc, "writing the catalog: %s",
                        lsim_db_errmsg(W->db))
            : 0;
}

/* A record that names its adapter (the trace's alias for the index): the
** first name seen replaces the adapter's default one in the catalog. */
static lsim_err lsim__note_name(lsim__world *W, const lsim_trace_rec *rec,
                                lsim_errbuf *eb) {
  int a = rec->adapter;
  if (!rec->adapter_name || a < 0 || a >= W->sc->adapters)
    return 0;
  if (!W->aname && !(W->aname = calloc((size_t)W->sc->adapters,
                                       sizeof *W->aname)))
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory for adapter names");
  if (W->aname[a])
    return 0;
  if (!(W->aname[a] = strdup(rec->adapter_name)))
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory for adapter names");
  lsim_err rc = lsim__catalog_adapter(W, a, W->aname[a]);
  return rc ? lsim_fail(eb, rc, "writing the catalog: %s",
                        lsim_db_errmsg(W->db))
            : 0;
}

/* Fill the lookahead window (oracle policies only). */
static lsim_err lsim__fill_ahead(lsim__world *W, lsim_errbuf *eb) {
  while (!W->ring_eof && W->ring_n < W->ring_cap) {
    lsim_trace_rec rec;
    int r = lsim_trace_next(&W->tr, &rec, eb);
    if (r < 0)
      return r;
    if (!r) {
      W->ring_eof = 1;
      break;
    }
    lsim__ahead *a = &W->ring[(W->ring_head + W->ring_n) % W->ring_cap];
    *a = (lsim__ahead){rec.id,          rec.arrival_ns,    rec.deadline_ns,
                       rec.cancel_ns,   rec.tenant,        rec.adapter,
                       rec.prompt_tokens, rec.output_tokens};
    W->ring_n++;
    lsim_err rc = lsim__note_name(W, &rec, eb);
    if (rc)
      return rc;
    rc = lsim_engine_future_push(W->eng, rec.adapter,
                                 rec.arrival_ns / W->sc->ns_per_tick, eb);
    if (rc)
      return rc;
  }
  return 0;
}

static lsim_err lsim__read_next(lsim__world *W, lsim_errbuf *eb) {
  int r;
  if (W->ring) {
    lsim_err rc = lsim__fill_ahead(W, eb);
    if (rc)
      return rc;
    r = W->ring_n > 0;
    if (r) {
      const lsim__ahead *a = &W->ring[W->ring_head];
      memset(&W->next, 0, sizeof W->next);
      W->next.id = a->id;
      W->next.arrival_ns = a->arrival_ns;
      W->next.tenant = a->tenant;
      W->next.adapter = a->adapter;
      W->next.prompt_tokens = a->prompt;
      W->next.output_tokens = a->output;
      W->next.deadline_ns = a->deadline_ns;
      W->next.cancel_ns = a->cancel_ns;
      W->ring_head = (W->ring_head + 1) % W->ring_cap;
      W->ring_n--;
    }
  } else {
    r = lsim_trace_next(&W->tr, &W->next, eb);
    if (r < 0)
      return r;
    lsim_err rc = r ? lsim__note_name(W, &W->next, eb) : 0;
    if (rc)
      return rc;
  }
  W->have_next = r;
  if (!r)
    return 0;
  lsim_tick t = W->next.arrival_ns / W->sc->ns_per_tick;
  if (t < W->now)
    t = W->now;
  return lsim__push(W, t, LSIM__Q_ARRIVAL, -1, 0, 0, eb);
}

/* ---- tensor parallelism (docs/TP.md) ------------------------------------- */

/* Row-parallel targets by the usual Megatron names; the rest are column
** parallel (q/k/v/gate/up...). */
static int lsim__row_parallel(const char *name) {
  static const char *const rows[] = {"o_proj", "down_proj", "out_proj",
                                     "dense", "fc2", "wo", "w2"};
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
    if (strcmp(name, rows[i]) == 0)
      return 1;
  return 0;
}

static void lsim__tp_cost(const lsim_scenario *sc, lsim_tp_cost *c) {
  memset(c, 0, sizeof *c);
  c->tp_degree = sc->tp_degree;
  c->coll_latency_ns = sc->collective_latency_ns;
  c->link_gbps = sc->link_gbps;
  c->layers = sc->layers;
  c->dtype_bytes = sc->dtype_bytes;
  int64_t hidden = 0, din = 0;
  for (int i = 0; i < sc->ntargets; i++) {
    const lsim_target *t = &sc->targets[i];
    if (lsim__row_parallel(t->name)) {
      c->row_targets++;
      if (t->d_out > hidden)
        hidden = t->d_out;
    } else {
      c->col_targets++;
    }
    if (t->d_in > din)
      din = t->d_in;
  }
  c->hidden = hidden ? hidden : din; /* the model's hidden size */
}

/* ---- copy outcomes -------------------------------------------------------- */

/* The fault outcome of one copy starting at `start` ($.faults). */
static int lsim__copy_outcome(lsim__world *W, lsim_tick start) {
  const lsim_scenario *sc = W->sc;
  if (W->next_copy_fail < sc->ncopy_fail_ticks &&
      start >= sc->copy_fail_ticks[W->next_copy_fail]) {
    W->next_copy_fail++;
    return LSIM_LOAD_COPY_FAILED;
  }
  if (sc->load_failure_rate > 0 &&
      lsim_rng_unit(&W->faults) < sc->load_failure_rate)
    return LSIM_LOAD_COPY_FAILED;
  if (W->next_digest_fail < sc->ndigest_fail_ticks &&
      start >= sc->digest_fail_ticks[W->next_digest_fail]) {
    W->next_digest_fail++;
    return LSIM_LOAD_DIGEST_BAD;
  }
  if (sc->digest_failure_rate > 0 &&
      lsim_rng_unit(&W->faults) < sc->digest_failure_rate)
    return LSIM_LOAD_DIGEST_BAD;
  if (sc->stale_basis_rate > 0 &&
      lsim_rng_unit(&W->faults) < sc->stale_basis_rate)
    return LSIM_LOAD_STALE_BASIS;
  return LSIM_LOAD_OK;
}

/*
** TP worker (docs/TP.md): a load is N rank copies, each with its own fault
** draw (rank order; a listed fault tick hits the first rank that copies at
** or after it).  Publication goes through the distributed generation
** snapshot of engine/tp.h: every rank holds the previous generation, each
** rank whose copy succeeded publishes the new one, and the adapter is
** published (LSIM_LOAD_OK) only when the snapshot is launchable.  A fault
** on one rank leaves a mixed snapshot, so the load fails with that rank's
** outcome and nothing is published.
*/
static lsim_err lsim__tp_outcome(lsim__world *W, lsim_tick start, int adapter,
                                 int *outcome, lsim_errbuf *eb) {
  int n = W->sc->tp_degree, first_bad = LSIM_LOAD_OK;
  lsim_gensnap snap;
  lsim_digest old_d = LSIM_DIGEST_INIT, new_d = LSIM_DIGEST_INIT;
  int64_t g0 = W->tp_gen, g1 = ++W->tp_gen;
  for (int k = 0; k < 8; k++) {
    old_d.b[k] = (uint8_t)((uint64_t)g0 >> (8 * k));
    new_d.b[k] = (uint8_t)((uint64_t)g1 >> (8 * k));
    old_d.b[8 + k] = new_d.b[8 + k] = (uint8_t)((uint64_t)adapter >> (8 * k));
  }
  old_d.b[31] = new_d.b[31] = 1;
  lsim_err rc = lsim_gensnap_init(&snap, n, eb);
  for (int q = 0; !rc && q < n; q++) {
    rc = lsim_gensnap_publish(&snap, q, g0, &old_d, eb);
    int o = lsim__copy_outcome(W, start);
    if (!rc && o == LSIM_LOAD_OK)
      rc = lsim_gensnap_publish(&snap, q, g1, &new_d, eb);
    else if (first_bad == LSIM_LOAD_OK)
      first_bad = o;
  }
  if (rc)
    return rc;
  int64_t gen;
  lsim_err lr = lsim_gensnap_launchable(&snap, &gen, NULL, NULL);
  if (lr == 0 && gen == g1)
    *outcome = LSIM_LOAD_OK;
  else if (lr == LSIM_E_TP_MIXED_GEN && first_bad != LSIM_LOAD_OK)
    *outcome = first_bad;
  else if (lr == 0 && gen == g0 && first_bad != LSIM_LOAD_OK)
    *outcome = first_bad; /* every rank failed: the old generation stays */
  else
    return LSIM_BUG(eb, "tp snapshot disagrees with the rank outcomes");
  return 0;
}

/* ---- faults: decided by the world, logged by it ------------------------------ */

/*
** Write a fault the world injected to the engine's event log (event
** fault_injected; what: a short static string such as "copy_failure"; value:
** kind-specific, docs/SCHEMA.md).  The tenant follows the scenario's rule,
** adapter a belongs to tenant a % ntenants (docs/SCENARIO.md).
*/
static lsim_err lsim__fault(lsim__world *W, int w, int adapter,
                            int64_t request, const char *what, int64_t value,
                            lsim_errbuf *eb) {
  lsim_event ev = {0};
  ev.tick = W->now;
  ev.kind = LSIM_EV_FAULT_INJECTED;
  ev.worker = w;
  ev.request = request;
  ev.tenant = adapter >= 0 ? adapter % W->sc->ntenants : LSIM_NONE;
  ev.adapter = adapter;
  ev.generation = LSIM_NONE;
  ev.value = value;
  ev.detail = what;
  return lsim_evlog_emit(lsim_engine_evlog(W->eng), &ev, eb);
}

/* ---- handlers ------------------------------------------------------------- */

/* Log one copy the world timed (loads table; not with summary_only). */
static lsim_err lsim__log_load(lsim__world *W, const char *kind, int w,
                               int adapter, int attempt, int64_t request,
                               int64_t bytes, int64_t disk_bytes,
                               lsim_tick start, lsim_tick done,
                               int64_t model_ns, int64_t measured_ns,
                               lsim_errbuf *eb) {
  lsim_load_record lr = {++W->loads_logged, kind,       w,
                         adapter,           attempt,    request,
                         bytes,             disk_bytes, start,
                         done,              model_ns,   measured_ns};
  lsim_err rc = W->o->summary_only ? 0 : lsim_db_load(W->db, &lr);
  return rc ? lsim_fail(eb, rc, "%s", lsim_db_errmsg(W->db)) : 0;
}

/* The ns that drives a span: the measured one under the measured clock
** when there is one (counted in *measured), else the model's (counted in
** *model, under the measured clock only). */
static int64_t lsim__drive(lsim__world *W, int64_t model_ns,
                           int64_t measured_ns, int64_t *measured,
                           int64_t *model) {
  if (!W->clk.measured)
    return model_ns;
  if (measured_ns >= 0) {
    (*measured)++;
    return measured_ns;
  }
  (*model)++;
  return model_ns;
}

static lsim_err lsim__on_step(lsim__world *W, int w, lsim_errbuf *eb) {
  lsim_load_start loads[LSIM__MAX_LOADS];
  int nloads, selected;
  W->step_at[w] = -1;
  W->step_serial++; /* the stages of this step carry it (file comment) */
  lsim_err rc = lsim_engine_step(W->eng, w, W->now, loads, LSIM__MAX_LOADS,
                                 &nloads, &W->plans[w], &selected, eb);
  if (rc)
    return rc;
  const lsim_scenario *sc = W->sc;
  for (int i = 0; i < nloads; i++) {
    /* copies on one worker run one after another on its copy engine; a
    ** host-tier miss first reads from disk on the worker's disk channel
    ** (one read at a time), and its copy starts when both the read is
    ** done and the copy engine is free (docs/RESIDENCY.md, "Host tier") */
    lsim_tick first = W->now, ready = W->now;
    if (loads[i].disk_bytes > 0) {
      int64_t dns = 0;
      first = W->disk_free_at[w] > W->now ? W->disk_free_at[w] : W->now;
      if ((rc = lsim__disk_ns(sc, loads[i].disk_bytes, &dns, eb)) ||
          (rc = lsim__span_end(sc, first, dns, "$.workers.disk_gbps", &ready,
                               eb)))
        return rc;
      W->disk_free_at[w] = ready;
      if (W->clk.measured)
        W->clk.other_model++; /* a disk read is always the model's */
    }
    lsim_tick start = W->copy_free_at[w] > ready ? W->copy_free_at[w] : ready;
    if (loads[i].disk_bytes == 0)
      first = start; /* a host hit (or no tier): the copy is the load */
    int64_t ns = 0, model_ns = 0;
    if ((rc = lsim__copy_ns(sc, loads[i].bytes, &model_ns, eb)))
      return rc;
    /* the stage this step made of the adapter's bytes (and of its
    ** compressed basis, when the load brought that too) */
    int64_t measured_ns = lsim__staged_ns(W, w, loads[i].adapter);
    if (measured_ns >= 0 && W->cmp.cfg.clusters > 0) {
      int64_t bns =
          lsim__staged_ns(W, w, sc->adapters + W->cmp.cluster[loads[i].adapter]);
      if (bns > 0 && lsim_add_i64_checked(measured_ns, bns, &measured_ns))
        measured_ns = -1;
    }
    if (measured_ns > LSIM__MAX_SPAN_NS)
      measured_ns = -1;
    if (W->rec) {
      /* --clock-from: the copy the recorded run made here, and its span */
      if ((rc = lsim_recclock_load(W->rec, loads[i].restore ? "restore"
                                                             : "load",
                                   w, loads[i].adapter, &ns, &measured_ns,
                                   eb)))
        return rc;
      if (measured_ns >= 0)
        W->clk.loads_measured++;
      else
        W->clk.loads_model++;
    } else {
      ns = lsim__drive(W, model_ns, measured_ns, &W->clk.loads_measured,
                       &W->clk.loads_model);
    }
    if (sc->h2d_slowdown > 1 && start >= sc->h2d_slowdown_from_tick &&
        (sc->h2d_slowdown_until_tick == 0 ||
         start < sc->h2d_slowdown_until_tick)) {
      int64_t slow;
      if (lsim_d2i64_ceil((double)ns * sc->h2d_slowdown, 0, LSIM__MAX_SPAN_NS,
                          &slow))
        return lsim_fail(eb, LSIM_E_SCN_RANGE,
                         "$.faults.h2d_slowdown: a copy of %lld ns slowed "
                         "x%g takes more than 2^62 ns",
                         (long long)ns, sc->h2d_slowdown);
      /* value: the extra copy time in ns */
      if ((rc = lsim__fault(W, w, loads[i].adapter, loads[i].request,
                            "h2d_slowdown", slow - ns, eb)))
        return rc;
      ns = slow;
    }
    lsim_tick done = 0;
    if ((rc = lsim__span_end(sc, start, ns, "$.workers.h2d_gbps", &done, eb)))
      return rc;
    W->copy_free_at[w] = done;
    int outcome = LSIM_LOAD_OK;
    if (sc->tp_degree > 1) {
      /* TP: the N rank copies (each loads.bytes, the shard) run in
      ** parallel on the N GPUs' own links and finish together */
      if ((rc = lsim__tp_outcome(W, start, loads[i].adapter, &outcome, eb)))
        return rc;
    } else {
      outcome = lsim__copy_outcome(W, start);
    }
    if ((rc = lsim__push(W, done, LSIM__Q_LOAD_DONE, w, loads[i].adapter,
                         outcome, eb)) ||
        (rc = lsim__log_load(W, loads[i].restore ? "restore" : "load", w,
                             loads[i].adapter, loads[i].attempt,
                             loads[i].request, loads[i].bytes,
                             loads[i].disk_bytes, start, done, model_ns,
                             measured_ns, eb)))
      return rc;
    if (!loads[i].restore && loads[i].request >= 0 &&
        sc->cancel_during_load_rate > 0 &&
        lsim_rng_unit(&W->faults) < sc->cancel_during_load_rate) {
      lsim_qev cev = {first + (done - first) / 2, LSIM__Q_ARRIVAL, 0,
                      LSIM__Q_CANCEL, w, loads[i].request, loads[i].adapter};
      if (lsim_queue_push(&W->q, &cev))
        return lsim_fail(eb, LSIM_E_NOMEM, "out of memory in the event queue");
    }
  }
  if (nloads == LSIM__MAX_LOADS && (rc = lsim__touch(W, w, eb)))
    return rc;
  if (!selected)
    return 0;
  lsim_plan *p = &W->plans[w];
  if (W->follows) {
    /* each row names its adapter's published generation on this worker */
    const lsim_res *res = lsim_engine_res(W->eng, w);
    for (int i = 0; i < p->n; i++) {
      if (p->e[i].adapter < 0)
        continue;
      lsim_res_adapter_view av;
      lsim_res_adapter(res, p->e[i].adapter, &av);
      if ((rc = lsim_plan_name(p, i, av.generation, eb)))
        return rc;
    }
  }
  lsim_backend_result br;
  if ((rc = lsim_backend_run(&W->be, p, &br, eb)))
    return rc;
  W->backend_ns[w] = br.ok ? br.backend_ns : -1;
  /* measured: what an executing backend timed of a valid iteration */
  W->measured_ns[w] = W->executes && br.ok && br.backend_ns >= 0 &&
                              br.backend_ns <= LSIM__MAX_SPAN_NS
                          ? br.backend_ns
                          : -1;
  /* the tokens its attention reads: each entry's context and its rows
  ** (engine/plan.h; -1 for a plan without positions) */
  W->ctx_tokens[w] = -1;
  if (p->positions) {
    int64_t ctx = 0;
    for (int i = 0; i < p->n; i++)
      ctx += p->e[i].ctx + p->e[i].rows;
    W->ctx_tokens[w] = ctx;
  }
  if (br.checked) {
    lsim_validation_record v = {p->iter, W->sc->backend, br.reference,
                                br.max_abs_err, br.max_rel_err, br.exact};
    if ((rc = lsim_db_validation(W->db, &v)))
      return lsim_fail(eb, rc, "%s", lsim_db_errmsg(W->db));
  }
  /* TP workers add their collective time (0 at degree 1; docs/TP.md) */
  int64_t cns = lsim_cost_collective_ns(&W->tp_cost, p, NULL), ins;
  lsim_tick end = 0;
  /* the model backend priced the plan with this same cost model
  ** (bcfg.cost): its answer, not a second evaluation per iteration */
  int64_t mns = W->model_be && br.ok && br.backend_ns >= 0
                    ? br.backend_ns
                    : lsim_cost_plan_ns(&W->cost, p);
  if (cns < 0 || lsim_add_i64_checked(mns, cns, &ins))
    return lsim_fail(eb, LSIM_E_SCN_RANGE,
                     "$.cost: an iteration's modelled time passes the end of "
                     "the ns clock (cost.link_gbps too small?)");
  W->model_ns[w] = ins;
  int64_t drive;
  if (W->rec) {
    /* --clock-from: this iteration as the recorded run ran it */
    if ((rc = lsim_recclock_iter(W->rec, p->iter, w, p->start_tick,
                                 p->prefill_rows, p->decode_rows, &drive,
                                 &W->measured_ns[w], eb)))
      return rc;
    if (W->measured_ns[w] >= 0)
      W->clk.iters_measured++;
    else
      W->clk.iters_model++;
  } else {
    drive = lsim__drive(W, ins, W->measured_ns[w], &W->clk.iters_measured,
                        &W->clk.iters_model);
  }
  if ((rc = lsim__span_end(W->sc, W->now, drive,
                           drive == ins ? "$.cost" : "--clock measured", &end,
                           eb)))
    return rc;
  W->iterations++;
  return lsim__push(W, end, LSIM__Q_ITER_DONE, w, br.ok, 0, eb);
}

static lsim_err lsim__on_iter_done(lsim__world *W, int w, int ok,
                                   lsim_errbuf *eb) {
  const lsim_plan *p = &W->plans[w];
  lsim_iter_record it = {p->iter, w, p->start_tick, W->now, p->prefill_rows,
                         p->decode_rows, p->prefill_reqs, p->decode_reqs,
                         p->distinct_adapters, p->segments, p->true_rank_rows,
                         p->padded_rank_rows, W->backend_ns[w],
                         ok ? "ok" : "failed", W->model_ns[w],
                         W->measured_ns[w], W->ctx_tokens[w]};
  lsim_err rc = W->o->summary_only ? 0 : lsim_db_iteration(W->db, &it);
  if (rc)
    return lsim_fail(eb, rc, "%s", lsim_db_errmsg(W->db));
  if (ok)
    lsim_metrics_iteration(&W->m, p->distinct_adapters, p->segments,
                           p->true_rank_rows, p->padded_rank_rows);
  if ((rc = lsim_engine_iter_done(W->eng, w, W->now, ok, eb)))
    return rc;
  return lsim__touch(W, w, eb);
}

static lsim_err lsim__on_load_done(lsim__world *W, int w, int adapter,
                                   int outcome, lsim_errbuf *eb) {
  lsim_err rc = 0;
  if (outcome == LSIM_LOAD_COPY_FAILED)
    rc = lsim__fault(W, w, adapter, LSIM_NONE, "copy_failure", 0, eb);
  else if (outcome == LSIM_LOAD_DIGEST_BAD)
    rc = lsim__fault(W, w, adapter, LSIM_NONE, "digest_failure", 0, eb);
  else if (outcome == LSIM_LOAD_STALE_BASIS)
    rc = lsim__fault(W, w, adapter, LSIM_NONE, "stale_basis", 0, eb);
  if (!rc)
    rc = lsim_engine_load_result(W->eng, w, adapter, W->now, outcome, eb);
  if (!rc)
    rc = lsim__touch(W, w, eb);
  return rc;
}

static lsim_err lsim__on_cancel(lsim__world *W, int w, int64_t request,
                                int adapter, lsim_errbuf *eb) {
  int found;
  /* value: 1 when the request was still waiting and is now cancelled */
  lsim_err rc = lsim_engine_cancel(W->eng, request, W->now, &found, eb);
  if (!rc)
    rc = lsim__fault(W, w, adapter, request, "cancel", found, eb);
  if (!rc && found)
    rc = lsim__touch(W, w, eb);
  return rc;
}

/* ---- hotswaps ($.hotswaps) ------------------------------------------------ */

static lsim_err lsim__on_hotswap(lsim__world *W, int i, lsim_errbuf *eb) {
  const lsim_scenario *sc = W->sc;
  const lsim_hotswap_spec *h = &sc->hotswaps[i];
  lsim_hs_copy copies[LSIM__MAX_LOADS];
  int n;
  lsim_err rc = lsim_engine_hotswap(W->eng, W->now, h->adapter, h->mode,
                                    copies, LSIM__MAX_LOADS, &n, eb);
  for (int k = 0; !rc && k < n; k++) {
    int w = copies[k].worker;
    lsim_tick start = W->copy_free_at[w] > W->now ? W->copy_free_at[w] : W->now;
    int64_t ns = 0, mns = 0, drive = 0, meas = -1;
    lsim_tick done = 0;
    if ((rc = lsim__copy_ns(sc, copies[k].bytes, &mns, eb)))
      break;
    drive = mns;
    /* --clock-from: the span the recorded run gave this copy */
    if (W->rec && (rc = lsim_recclock_load(W->rec, "hotswap", w,
                                           copies[k].adapter, &drive, &meas,
                                           eb)))
      break;
    ns = drive;
    if ((rc = lsim__span_end(sc, start, ns, "$.workers.h2d_gbps", &done, eb)) ||
        (rc = lsim__log_load(W, "hotswap", w, copies[k].adapter, -1, -1,
                             copies[k].bytes, 0, start, done, mns, meas, eb)))
      break;
    if (W->clk.measured)
      W->clk.other_model++; /* a shadow copy is staged by no backend */
    W->copy_free_at[w] = done;
    int outcome = h->fail == LSIM_HS_FAIL_COPY     ? LSIM_LOAD_COPY_FAILED
                  : h->fail == LSIM_HS_FAIL_DIGEST ? LSIM_LOAD_DIGEST_BAD
                                                   : LSIM_LOAD_OK;
    lsim_qev ev = {done, LSIM__Q_LOAD_DONE, 0, LSIM__Q_HS_DONE, w,
                   copies[k].adapter, outcome};
    if (lsim_queue_push(&W->q, &ev))
      rc = lsim_fail(eb, LSIM_E_NOMEM, "out of memory in the event queue");
  }
  /* a drain may have completed, or new admissions may now wait */
  for (int w = 0; !rc && w < sc->workers; w++)
    rc = lsim__touch(W, w, eb);
  return rc;
}

static lsim_err lsim__on_hs_done(lsim__world *W, int w, int adapter,
                                 int outcome, lsim_errbuf *eb) {
  lsim_err rc = 0;
  /* value 1: the fault hit a hotswap's shadow copy */
  if (outcome == LSIM_LOAD_COPY_FAILED)
    rc = lsim__fault(W, w, adapter, LSIM_NONE, "copy_failure", 1, eb);
  else if (outcome == LSIM_LOAD_DIGEST_BAD)
    rc = lsim__fault(W, w, adapter, LSIM_NONE, "digest_failure", 1, eb);
  if (!rc)
    rc = lsim_engine_hotswap_done(W->eng, w, adapter, W->now, outcome, eb);
  if (!rc)
    rc = lsim__touch(W, w, eb);
  return rc;
}

/* A trace cancel or deadline reached its tick. */
static lsim_err lsim__on_withdraw(lsim__world *W, lsim_tick before,
                                  int64_t request, int why, lsim_errbuf *eb) {
  int found;
  lsim_err rc = lsim_engine_withdraw(W->eng, request, W->now, why, &found, eb);
  if (!rc && !found)
    W->now = before; /* a no-op (the request is gone): time does not move,
                     ** so a late deadline does not stretch the run */
  if (rc || !found)
    return rc;
  /* freed pages or batch room: every worker may decide again */
  for (int w = 0; !rc && w < W->sc->workers; w++)
    rc = lsim__touch(W, w, eb);
  return rc;
}

/* Queue the arrival's own cancel and deadline (trace clock, ns). */
static lsim_err lsim__push_withdraws(lsim__world *W, lsim_errbuf *eb) {
  struct {
    int64_t ns;
    int why;
  } w[2] = {{W->next.deadline_ns, LSIM_WITHDRAW_DEADLINE},
            {W->next.cancel_ns, LSIM_WITHDRAW_CANCEL}};
  for (int i = 0; i < 2; i++) {
    if (w[i].ns < 0)
      continue;
    lsim_tick t = w[i].ns / W->sc->ns_per_tick;
    if (t < W->now)
      t = W->now;
    lsim_qev ev = {t, LSIM__Q_ARRIVAL, 0, LSIM__Q_WITHDRAW, -1, W->next.id,
                   w[i].why};
    if (lsim_queue_push(&W->q, &ev))
      return lsim_fail(eb, LSIM_E_NOMEM, "out of memory in the event queue");
  }
  return 0;
}

static lsim_err lsim__on_arrival(lsim__world *W, lsim_errbuf *eb) {
  lsim_arrival a = {W->next.id, W->next.tenant, W->next.adapter,
                    W->next.prompt_tokens, W->next.output_tokens};
  if (W->ring)
    lsim_engine_future_pop(W->eng, a.adapter);
  int w;
  lsim_err rc = lsim_engine_arrive_blocks(W->eng, W->now, &a, W->next.blocks,
                                          W->next.nblocks, &w, eb);
  if (rc)
    return rc;
  if ((rc = lsim__push_withdraws(W, eb)))
    return rc;
  W->arrived++;
  if (w >= 0 && (rc = lsim__touch(W, w, eb)))
    return rc;
  return lsim__read_next(W, eb);
}

/* ---- progress ------------------------------------------------------------- */

static double lsim__wall(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void lsim__progress(lsim__world *W, double t0, double *last) {
  /* Wall time only decides whether to draw this line, never the run. */
  double t = lsim__wall();
  if (t - t0 < 1.0 || t - *last < 0.25)
    return;
  *last = t;
  fprintf(stderr,
          "\r[lorasim] t=%.3fs sim  arrived %lld  done %lld  events %lld  "
          "(%.0f ev/s)   ",
          (double)W->now * (double)W->sc->ns_per_tick * 1e-9,
          (long long)W->arrived, (long long)W->m.requests_ok,
          (long long)W->events, (double)W->events / (t - t0));
  fflush(stderr);
}

/* ---- compressed collections ($.adapters.compression) ------------------------ */

static void lsim__cmpset_release(lsim__cmpset *cs) {
  free(cs->cluster);
  free(cs->basis_bytes);
  free(cs->basis_pages);
  free(cs->basis);
  free(cs->core);
  memset(cs, 0, sizeof *cs);
}

static lsim_err lsim__sha(lsim_digest *out, lsim_errbuf *eb, const char *fmt,
                          ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static lsim_err lsim__sha(lsim_digest *out, lsim_errbuf *eb, const char *fmt,
                          ...) {
  char id[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(id, sizeof id, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof id)
    return LSIM_BUG(eb, "identity string too long");
  return lsim_sha256(id, (size_t)n, out, eb);
}

/*
** The synthetic form: adapters are dealt to clusters by a seeded shuffle
** (stream LSIM_RNG_CLUSTERS of $.adapters.compression.seed), cluster
** i mod k for the i-th adapter of the shuffled order, so every cluster is
** used and the assignment depends on the seed only.  Identities are
** digests of what the collection is (method, R, k, seed, n), so a run
** repeats them bit for bit.
*/
static lsim_err lsim__cmp_synthetic(const lsim_scenario *sc, lsim__cmpset *cs,
                                    lsim_errbuf *eb) {
  const lsim_compression_spec *sp = &sc->compression;
  int na = sc->adapters, k = sp->clusters;
  int *perm = malloc((size_t)na * sizeof *perm);
  if (!perm)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory for the clusters");
  for (int i = 0; i < na; i++)
    perm[i] = i;
  lsim_rng g;
  lsim_rng_init(&g, sp->seed, LSIM_RNG_CLUSTERS);
  for (int i = na - 1; i > 0; i--) {
    int j = (int)lsim_rng_below(&g, (uint64_t)i + 1);
    int t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  for (int i = 0; i < na; i++)
    cs->cluster[perm[i]] = i % k;
  free(perm);
  const char *mn = sp->method == LSIM_CMPM_JD_FULL ? "jd-full" : "jd-diag";
  lsim_err rc = lsim__sha(&cs->cfg.bundle, eb,
                          "lorasim-synthetic-bundle:%s:R=%d:k=%d:seed=%llu:"
                          "n=%d", mn, sp->rank, k,
                          (unsigned long long)sp->seed, na);
  if (!rc)
    rc = lsim__sha(&cs->cfg.source_set, eb,
                   "lorasim-synthetic-source-set:n=%d:seed=%llu", na,
                   (unsigned long long)sc->seed);
  char h[LSIM_DIGEST_HEX_SIZE];
  lsim_digest_hex(&cs->cfg.bundle, h);
  for (int c = 0; !rc && c < k; c++)
    rc = lsim__sha(&cs->basis[c], eb, "%s:basis:%d", h, c);
  for (int a = 0; !rc && a < na; a++)
    rc = lsim__sha(&cs->core[a], eb, "%s:core:%d:cluster=%d", h, a,
                   cs->cluster[a]);
  return rc;
}

/*
** The bundle form: a `lorasim compress` bundle, verified digest by digest;
** its source i is the scenario's adapter i (the counts must agree), and
** its one fitted module shape stands for every target of $.model (each
** must have the bundle's d_in x d_out), layer by layer.
*/
static lsim_err lsim__cmp_bundle(const lsim_scenario *sc, lsim__cmpset *cs,
                                 lsim_errbuf *eb) {
  const char *p = "$.adapters.compression.bundle";
  lsim_bundle b;
  lsim_err rc = lsim_bundle_read(sc->compression.bundle, &b, eb);
  if (rc)
    return rc;
  if (b.n != sc->adapters)
    rc = lsim_fail(eb, LSIM_E_CMP_SERVE_MISMATCH,
                   "%s: %s: the bundle has %d sources, $.adapters.count is %d",
                   sc->path, p, b.n, sc->adapters);
  for (int i = 0; !rc && i < sc->ntargets; i++)
    if (sc->targets[i].d_in != b.d_in || sc->targets[i].d_out != b.d_out)
      rc = lsim_fail(eb, LSIM_E_CMP_SERVE_MISMATCH,
                     "%s: %s: the bundle fits a %d x %d module, target %s is "
                     "%lld x %lld", sc->path, p, b.d_in, b.d_out,
                     sc->targets[i].name, (long long)sc->targets[i].d_in,
                     (long long)sc->targets[i].d_out);
  int method = b.method == 1 ? LSIM_CMPM_JD_FULL : LSIM_CMPM_JD_DIAG;
  int64_t need = lsim_scenario_adapter_pages(sc, b.R) +
                 lsim_scenario_core_pages(sc, method, b.R);
  if (!rc && need + sc->guard_pages > sc->pool_pages)
    rc = lsim_fail(eb, LSIM_E_CMP_SERVE_CAPACITY,
                   "%s: %s: a basis and one core of rank %d need %lld pages "
                   "(plus %lld guard) but a worker's pool has %lld", sc->path,
                   p, b.R, (long long)need, (long long)sc->guard_pages,
                   (long long)sc->pool_pages);
  if (rc) {
    lsim_bundle_release(&b);
    return rc;
  }
  cs->method = method;
  cs->R = b.R;
  cs->cfg.clusters = b.k;
  cs->cfg.bundle = b.bundle;
  cs->cfg.source_set = b.source_set;
  cs->cluster = b.cluster;
  cs->basis = b.basis;
  cs->core = b.core;
  return 0;
}

/* The rank, in the cost model's units (rows x rank of an ordinary LoRA
** row, i.e. sum over targets of d_in + d_out per rank), of one row of the
** three-stage operator: V projection and U expansion are R units, the
** per-adapter core R x R (JD-Full) or R (JD-Diag) multiply-adds per target
** on top.  A model of the arithmetic, not a measurement: docs/BENCHMARKS.md
** has the measured CUDA ratios (1.0-2.0x LoRA time). */
static int lsim__cmp_model_rank(const lsim_scenario *sc, int method, int R) {
  int64_t S = 0;
  for (int i = 0; i < sc->ntargets; i++)
    S += sc->targets[i].d_in + sc->targets[i].d_out;
  int64_t core = sc->ntargets * (method == LSIM_CMPM_JD_FULL ? (int64_t)R * R
                                                              : R);
  return (int)(R + (core + S - 1) / S);
}

static lsim_err lsim__cmp_setup(const lsim_scenario *sc, lsim__cmpset *cs,
                                int *rank, int64_t *bytes, int64_t *pages,
                                lsim_errbuf *eb) {
  const lsim_compression_spec *sp = &sc->compression;
  int na = sc->adapters;
  memset(cs, 0, sizeof *cs);
  lsim_err rc;
  if (sp->bundle[0]) {
    rc = lsim__cmp_bundle(sc, cs, eb);
    if (rc)
      return rc;
  } else {
    int k = sp->clusters;
    cs->method = sp->method;
    cs->R = sp->rank;
    cs->cfg.clusters = k;
    cs->cluster = malloc((size_t)na * sizeof *cs->cluster);
    cs->basis = calloc((size_t)k, sizeof *cs->basis);
    cs->core = calloc((size_t)na, sizeof *cs->core);
    if (!cs->cluster || !cs->basis || !cs->core)
      return lsim_fail(eb, LSIM_E_NOMEM, "out of memory for the collection");
    if ((rc = lsim__cmp_synthetic(sc, cs, eb)))
      return rc;
  }
  int k = cs->cfg.clusters;
  cs->basis_bytes = malloc((size_t)k * sizeof *cs->basis_bytes);
  cs->basis_pages = malloc((size_t)k * sizeof *cs->basis_pages);
  if (!cs->basis_bytes || !cs->basis_pages)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory for the collection");
  for (int c = 0; c < k; c++) {
    /* U [d_out][R] and V [d_in][R] per target and layer: a rank-R adapter */
    cs->basis_bytes[c] = lsim_scenario_adapter_bytes(sc, cs->R);
    cs->basis_pages[c] = lsim_scenario_adapter_pages(sc, cs->R);
  }
  int mr = lsim__cmp_model_rank(sc, cs->method, cs->R);
  for (int a = 0; a < na; a++) {
    rank[a] = mr;
    bytes[a] = lsim_scenario_core_bytes(sc, cs->method, cs->R);
    pages[a] = lsim_scenario_core_pages(sc, cs->method, cs->R);
  }
  cs->cfg.cluster = cs->cluster;
  cs->cfg.basis_bytes = cs->basis_bytes;
  cs->cfg.basis_pages = cs->basis_pages;
  cs->cfg.version = sp->version;
  cs->cfg.basis = cs->basis;
  cs->cfg.core = cs->core;
  cs->cfg.affinity_weight = sp->affinity_weight;
  return 0;
}

/* ---- setup and the loop ----------------------------------------------------- */

static lsim_err lsim__setup(lsim__world *W, lsim_errbuf *eb) {
  const lsim_scenario *sc = W->sc;
  int na = sc->adapters;
  int *rank = malloc((size_t)na * sizeof *rank);
  int64_t *bytes = malloc((size_t)na * sizeof *bytes);
  int64_t *pages = malloc((size_t)na * sizeof *pages);
  W->copy_free_at = calloc((size_t)sc->workers, sizeof *W->copy_free_at);
  W->disk_free_at = calloc((size_t)sc->workers, sizeof *W->disk_free_at);
  W->step_at = malloc((size_t)sc->workers * sizeof *W->step_at);
  W->plans = calloc((size_t)sc->workers, sizeof *W->plans);
  W->backend_ns = calloc((size_t)sc->workers, sizeof *W->backend_ns);
  W->model_ns = calloc((size_t)sc->workers, sizeof *W->model_ns);
  W->measured_ns = calloc((size_t)sc->workers, sizeof *W->measured_ns);
  W->ctx_tokens = calloc((size_t)sc->workers, sizeof *W->ctx_tokens);
  if (!rank || !bytes || !pages || !W->copy_free_at || !W->disk_free_at ||
      !W->step_at || !W->plans || !W->backend_ns || !W->model_ns ||
      !W->measured_ns || !W->ctx_tokens) {
    free(rank);
    free(bytes);
    free(pages);
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory setting up the replay");
  }
  for (int i = 0; i < sc->workers; i++)
    W->step_at[i] = -1;
  W->starve_ticks = lsim_scenario_starvation_ticks(sc, NULL);
  /* one weight per tenant, the array the schedulers read (all 1: a
  ** scenario gives no per-tenant fairness weight), kept for the catalog */
  W->tenant_weight = malloc((size_t)sc->ntenants * sizeof *W->tenant_weight);
  if (!W->tenant_weight) {
    free(rank);
    free(bytes);
    free(pages);
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory setting up the replay");
  }
  for (int t = 0; t < sc->ntenants; t++)
    W->tenant_weight[t] = 1;

  /* The synthetic catalog: ranks drawn by weight from the catalog stream. */
  lsim_rng cat;
  lsim_rng_init(&cat, sc->seed, LSIM_RNG_CATALOG);
  int64_t total = 0;
  for (int i = 0; i < sc->nranks; i++)
    total += sc->ranks[i].weight;
  for (int a = 0; a < na; a++) {
    int64_t u = (int64_t)lsim_rng_below(&cat, (uint64_t)total);
    int k = 0;
    while (u >= sc->ranks[k].weight)
      u -= sc->ranks[k++].weight;
    rank[a] = sc->ranks[k].rank;
    bytes[a] = lsim_scenario_adapter_bytes(sc, rank[a]);
    /* padded-rank slots: a slot's pages; an adapter too large for a slot
    ** is refused at arrival and never loads, it gets a slot's pages too */
    pages[a] = lsim_scenario_adapter_pages(
        sc, sc->max_lora_rank > 0 && rank[a] > sc->max_lora_rank
                ? sc->max_lora_rank
                : rank[a]);
  }
  lsim_rng_init(&W->faults, sc->seed, LSIM_RNG_FAULTS);
  /* a compressed collection: cores instead of the drawn adapters (the
  ** draw above still runs, so the other streams are the same) */
  if (sc->compression.on) {
    lsim_err rc = lsim__cmp_setup(sc, &W->cmp, rank, bytes, pages, eb);
    if (rc) {
      free(rank);
      free(bytes);
      free(pages);
      return rc;
    }
  }

  /* The backend first: one that follows the residency (backend.h) gets
  ** every worker pool's hooks, with the engine's geometry and page ids. */
  lsim_scenario_cost_model(sc, &W->cost);
  lsim__tp_cost(sc, &W->tp_cost);
  lsim_backend_cfg bcfg = {
      .cost = W->cost,
      .seed = sc->seed,
      .d_in = LSIM_REPLAY_TENSOR_DIM,
      .d_out = LSIM_REPLAY_TENSOR_DIM,
      .verify = W->o->verify,
      .execute = sc->execute,
      .workers = sc->workers,
      .pool_pages = sc->pool_pages,
      .page_bytes = sc->page_bytes,
      .nadapters = na,
      .objects = na + (sc->compression.on ? W->cmp.cfg.clusters : 0),
      .adapter_rank = rank,
      .shape = &sc->model,
      .kv_bytes_per_token = lsim_scenario_kv_bytes_per_token(sc),
      .max_batch_tokens = (int)sc->max_batch_tokens,
      .max_batch_requests = sc->max_batch_requests,
  };
  int tdin[LSIM_MAX_TARGETS], tdout[LSIM_MAX_TARGETS];
  if (W->o->tensor_model) {
    for (int i = 0; i < sc->ntargets; i++) {
      tdin[i] = sc->targets[i].d_in;
      tdout[i] = sc->targets[i].d_out;
    }
    bcfg.layers = W->o->tensor_layers > 0 && W->o->tensor_layers < sc->layers
                      ? W->o->tensor_layers
                      : sc->layers;
    bcfg.ntargets = sc->ntargets;
    bcfg.target_d_in = tdin;
    bcfg.target_d_out = tdout;
  }
  lsim_err brc = lsim_backend_open(&W->be, sc->backend, &bcfg, eb);
  if (brc) {
    free(rank);
    free(bytes);
    free(pages);
    return brc;
  }
  W->be_open = 1;
  W->follows = lsim_backend_follows(&W->be);
  W->executes = (W->be.ops->flags & LSIM_BACKEND_EXECUTES) != 0;
  W->model_be = strcmp(W->be.ops->name, "model") == 0;
  W->clk.measured = sc->clock == LSIM_CLOCK_MEASURED;
  if (sc->clock_from[0]) {
    W->clk.recorded = 1;
    lsim_err rrc = lsim_recclock_open(&W->rec, sc->clock_from, eb);
    if (rrc) {
      free(rank);
      free(bytes);
      free(pages);
      return rrc;
    }
  }
  W->nobj = bcfg.objects;
  if (W->follows &&
      !(W->staged_at = calloc((size_t)sc->workers * (size_t)W->nobj,
                              sizeof *W->staged_at))) {
    free(rank);
    free(bytes);
    free(pages);
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory setting up the replay");
  }

  lsim_engine_prefix pxc = {sc->prefix_mode, sc->prefix_block_tokens,
                            sc->prefix_max_blocks, sc->layers,
                            sc->prefix_alora_fraction};
  lsim_engine_cfg cfg = {
      .workers = sc->workers,
      .pool_pages = sc->pool_pages,
      .page_bytes = sc->page_bytes,
      .max_batch_tokens = sc->max_batch_tokens,
      .max_batch_requests = sc->max_batch_requests,
      .kv_bytes_per_token = lsim_scenario_kv_bytes_per_token(sc),
      .max_load_attempts = sc->max_load_attempts,
      .ntenants = sc->ntenants,
      .nadapters = na,
      .adapter_rank = rank,
      .adapter_bytes = bytes,
      .adapter_pages = pages,
      .guard_pages = sc->guard_pages,
      .sched = lsim_sched_find(sc->scheduler),
      .evict = lsim_evict_find(sc->evict),
      .prefetch = lsim_prefetch_find(sc->prefetch),
      .sink = {lsim__sink_event, lsim__sink_request, W, lsim__sink_interval},
      .sched_params = {.w_in = sc->fair_w_in, .w_out = sc->fair_w_out,
                       .tenant_weight = W->tenant_weight,
                       .age_ticks = sc->age_ticks,
                       .cluster_window = sc->cluster_window},
      .placement = lsim_placement_find(sc->placement) > 0
                       ? lsim_placement_find(sc->placement)
                       : 0,
      .abort_ticks = sc->abort_ticks,
      .prefill_chunk = sc->prefill_chunk,
      .kv_incremental = sc->kv_incremental,
      .max_loras = sc->max_loras,
      .max_lora_rank = sc->max_lora_rank,
      .max_cpu_loras = sc->max_cpu_loras,
      .max_hotswaps = sc->nhotswaps,
      .log_leases = sc->nhotswaps > 0,
      .compress = sc->compression.on ? &W->cmp.cfg : NULL,
      .prefix = sc->prefix_mode ? &pxc : NULL,
      .res_hooks = W->follows ? &lsim__hooks : NULL,
      .res_hooks_ud = W,
  };
  lsim_err rc = lsim_engine_new(&W->eng, &cfg, eb);
  W->rank = rank; /* the metrics' rank buckets read it; freed at teardown */
  free(bytes);
  free(pages);
  if (!rc)
    rc = lsim__catalog(W, eb);
  if (rc)
    return rc;
  if (cfg.evict && cfg.evict->needs_future) {
    W->ring = malloc(LSIM__LOOKAHEAD * sizeof *W->ring);
    if (!W->ring)
      return lsim_fail(eb, LSIM_E_NOMEM, "out of memory for the lookahead");
    W->ring_cap = LSIM__LOOKAHEAD;
  }


  for (int i = 0; i < sc->nhotswaps; i++) {
    lsim_tick t = (lsim_tick)llround(sc->hotswaps[i].at_s * 1e9 /
                                     (double)sc->ns_per_tick);
    lsim_qev ev = {t, LSIM__Q_ARRIVAL, 0, LSIM__Q_HOTSWAP, -1, i, 0};
    if (lsim_queue_push(&W->q, &ev))
      return lsim_fail(eb, LSIM_E_NOMEM, "out of memory in the event queue");
  }

  rc = lsim_scenario_trace_open(sc, &W->tr, sc->trace_skip_bad_rows, 0, eb);
  if (rc)
    return rc;
  W->tr_open = 1;
  if (lsim_metrics_init(&W->m, sc->ntenants) ||
      lsim_metrics_shape(&W->m, sc->workers, na, W->rank))
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  W->m.tenant_weight = W->tenant_weight; /* borrowed, freed at teardown */
  return 0;
}

static lsim_err lsim__loop(lsim__world *W, lsim_errbuf *eb) {
  const lsim_replay_opts *o = W->o;
  int show = o->progress && isatty(STDERR_FILENO);
  double t0 = show ? lsim__wall() : 0, last = 0;
  lsim_err rc = lsim__read_next(W, eb);
  if (rc)
    return rc;
  lsim_qev ev;
  while (lsim_queue_pop(&W->q, &ev)) {
    lsim_tick before = W->now;
    W->now = ev.tick;
    W->queue_events++;
    switch (ev.kind) {
    case LSIM__Q_LOAD_DONE:
      rc = lsim__on_load_done(W, ev.worker, (int)ev.a, (int)ev.b, eb);
      break;
    case LSIM__Q_CANCEL:
      rc = lsim__on_cancel(W, ev.worker, ev.a, (int)ev.b, eb);
      break;
    case LSIM__Q_HOTSWAP:
      rc = lsim__on_hotswap(W, (int)ev.a, eb);
      break;
    case LSIM__Q_WITHDRAW:
      rc = lsim__on_withdraw(W, before, ev.a, (int)ev.b, eb);
      break;
    case LSIM__Q_HS_DONE:
      rc = lsim__on_hs_done(W, ev.worker, (int)ev.a, (int)ev.b, eb);
      break;
    case LSIM__Q_ITER_DONE:
      rc = lsim__on_iter_done(W, ev.worker, (int)ev.a, eb);
      break;
    case LSIM__Q_ARRIVAL:
      rc = lsim__on_arrival(W, eb);
      break;
    case LSIM__Q_STEP:
      rc = lsim__on_step(W, ev.worker, eb);
      break;
    default:
      rc = LSIM_BUG(eb, "unknown queue event class");
    }
    for (int nw; !rc && (nw = lsim_engine_pop_nudge(W->eng)) >= 0;)
      rc = lsim__touch(W, nw, eb);
    if (rc)
      return rc;
    if ((W->queue_events & (LSIM_REPLAY_HOOK_EVERY - 1)) == 0) {
      if (o->hook)
        o->hook(o->hook_ud, W->queue_events);
      if (show)
        lsim__progress(W, t0, &last);
    }
    if (o->stop && *o->stop)
      return lsim_fail(eb, LSIM_E_INTERRUPTED,
                       "interrupted at tick %lld", (long long)W->now);
  }
  if (show)
    fprintf(stderr, "\r%*s\r", 100, "");
  return 0;
}

static void lsim__teardown(lsim__world *W) {
  if (W->tr_open)
    lsim_trace_close(&W->tr);
  if (W->be_open)
    lsim_backend_close(&W->be);
  lsim_engine_release(W->eng);
  if (W->plans)
    for (int i = 0; i < W->sc->workers; i++)
      lsim_plan_release(&W->plans[i]);
  free(W->plans);
  free(W->copy_free_at);
  free(W->disk_free_at);
  free(W->step_at);
  free(W->backend_ns);
  free(W->model_ns);
  free(W->measured_ns);
  lsim_recclock_close(W->rec);
  W->rec = NULL;
  free(W->ctx_tokens);
  free(W->staged_at);
  free(W->ring);
  free(W->rank);
  free(W->tenant_weight);
  if (W->aname)
    for (int a = 0; a < W->sc->adapters; a++)
      free(W->aname[a]);
  free(W->aname);
  lsim__cmpset_release(&W->cmp);
  lsim_queue_release(&W->q);
  lsim_metrics_release(&W->m);
}

static void lsim__base_path(const char *db_path, char *out, size_t n) {
  snprintf(out, n, "%s", db_path);
  size_t len = strlen(out);
  if (len > 3 && strcmp(out + len - 3, ".db") == 0)
    out[len - 3] = 0;
}

lsim_err lsim_replay_check_modes(const lsim_scenario *sc, lsim_errbuf *eb) {
  if (!lsim_scenario_execute_name(sc->execute))
    return lsim_fail(eb, LSIM_E_SCN_MODE, "execute mode %d unknown (known: %s)",
                     sc->execute, lsim_scenario_execute_names());
  if (!lsim_scenario_clock_name(sc->clock))
    return lsim_fail(eb, LSIM_E_SCN_MODE, "clock %d unknown (known: %s)",
                     sc->clock, lsim_scenario_clock_names());
  if (sc->execute == LSIM_EXECUTE_FULL) {
    if (strcmp(sc->backend, LSIM_CUDA_BACKEND_NAME) != 0)
      return lsim_fail(eb, LSIM_E_SCN_MODE_BACKEND,
                       "--execute full ($.execute) runs the whole model on "
                       "the GPU and needs --backend cuda ($.backend), not "
                       "'%s'",
                       sc->backend);
    /* what the executor cannot run and a scenario can say before any
    ** file: one device holds one rank, and a hotswap's new version lives
    ** outside the pool's pages while a lease holds it */
    if (sc->tp_degree > 1)
      return lsim_fail(eb, LSIM_E_SCN_MODE_TP,
                       "--execute full ($.execute) with "
                       "$.workers.tp_degree %d: the executor runs a whole "
                       "model on one device and holds no rank's shard; use "
                       "--execute adapters",
                       sc->tp_degree);
    if (sc->nhotswaps > 0)
      return lsim_fail(eb, LSIM_E_DEV_UNSUPPORTED,
                       "--execute full ($.execute) with $.hotswaps: a "
                       "lease's new version is charged as KV pages beside "
                       "the old one, not held in the engine's pages, so the "
                       "executor cannot read it; use --execute adapters");
#ifndef LSIM_HAVE_CUDA
    return lsim_fail(eb, LSIM_E_SCN_MODE_DEVICE,
                     "--execute full needs the cuda backend, which this "
                     "build does not have (nvcc was not found at configure "
                     "time: see lorasim version)");
#else
    char desc[256];
    if (lsim_cuda_describe(desc, sizeof desc) <= 0)
      return lsim_fail(eb, LSIM_E_SCN_MODE_DEVICE,
                       "--execute full needs a GPU: backend cuda: %s", desc);
    /* what the executor cannot run, and a model and pool that do not fit
    ** the device, are refused here too, before any file (E_DEV_UNSUPPORTED,
    ** E_DEV_FIT; docs/CUDA.md "The whole-model executor") */
    int maxr = 1;
    for (int i = 0; i < sc->nranks; i++)
      if (sc->ranks[i].rank > maxr)
        maxr = sc->ranks[i].rank;
    lsim_backend_cfg fc = {
        .seed = sc->seed,
        .execute = sc->execute,
        .workers = sc->workers,
        .pool_pages = sc->pool_pages,
        .page_bytes = sc->page_bytes,
        .nadapters = sc->adapters,
        .objects = sc->adapters + (sc->compression.on ? 1 : 0),
        .shape = &sc->model,
        .kv_bytes_per_token = lsim_scenario_kv_bytes_per_token(sc),
        .max_batch_tokens = (int)sc->max_batch_tokens,
        .max_batch_requests = sc->max_batch_requests,
    };
    lsim_err frc = lsim_full_check(&fc, maxr, eb);
    if (frc)
      return frc;
#endif
  }
  if (sc->clock_from[0]) {
    /* the recorded run opens and is whole before any file is written */
    lsim_recclock *r = NULL;
    lsim_err rrc = lsim_recclock_open(&r, sc->clock_from, eb);
    lsim_recclock_close(r);
    if (rrc)
      return rrc;
  }
  if (sc->clock == LSIM_CLOCK_MEASURED) {
    /* --clock-from brings its measured times with it: any backend */
    if (!sc->clock_from[0] &&
        !(lsim_backend_flags(sc->backend) & LSIM_BACKEND_EXECUTES))
      return lsim_fail(eb, LSIM_E_SCN_MODE_BACKEND,
                       "--clock measured ($.clock) needs a backend that "
                       "executes and times the iterations (cpu_ref or "
                       "cuda); backend '%s' measures nothing (its times "
                       "are the cost model's)",
                       sc->backend);
    if (sc->tp_degree > 1)
      return lsim_fail(eb, LSIM_E_SCN_MODE_TP,
                       "--clock measured ($.clock) with $.workers.tp_degree "
                       "%d: a backend times one device's work, which holds "
                       "none of the group's collectives, so the clock would "
                       "leave them out; use --clock model (the cost model "
                       "adds them)",
                       sc->tp_degree);
  }
  return 0;
}

lsim_err lsim_replay_run(const lsim_scenario *sc, const lsim_replay_opts *o,
                         lsim_summary *res, lsim_errbuf *eb) {
  lsim__world W;
  memset(&W, 0, sizeof W);
  memset(res, 0, sizeof *res);
  res->status = "failed";
  const char *final_path = o->final_path ? o->final_path : o->db_path;
  snprintf(res->db_path, sizeof res->db_path, "%s", final_path);
  W.sc = sc;
  W.o = o;

  /* One writer per database (sim/outfile.h), held to the end of the run;
  ** `replay --resume` takes it itself, before it reads the database. */
  lsim_outlock lock = LSIM_OUTLOCK_INIT;
  lsim_err rc = lsim_replay_check_modes(sc, eb);
  if (rc)
    return rc; /* before any file: nothing is written */
  rc = lsim_out_check(final_path, eb); /* no lock beside a device */
  if (!rc) /* never replace a file that is not one of lorasim's databases */
    rc = lsim_db_check_target(final_path, eb);
  if (!rc && !o->lock_held)
    rc = lsim_out_lock(&lock, final_path, eb);
  if (rc)
    return rc;
  /* the side files are refused and the run's identity taken before anything
  ** is written: an input that cannot be read leaves no database behind */
  lsim_runid *ident = calloc(1, sizeof *ident);
  if (!ident) {
    lsim_out_unlock(&lock);
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  }
  rc = lsim_report_check_paths(final_path, o->plots, eb);
  if (!rc && o->json_path)
    rc = lsim_out_check(o->json_path, eb);
  if (!rc)
    rc = lsim_runid_collect(sc, ident, eb);
  for (const char *const *p = o->run_options; !rc && p && p[0] && p[1];
       p += 2)
    rc = lsim_runid_option(ident, p[0], p[1], eb);
  if (!rc)
    rc = lsim_db_open(&W.db, o->db_path, eb);
  if (rc) {
    free(ident);
    lsim_out_unlock(&lock);
    return rc;
  }
  char sha[65];
  lsim_scenario_sha_hex(sc, sha);
  lsim_run_info info = {sc->name,      sc->path,      sha,
                        sc->seed,      sc->backend,   sc->scheduler,
                        sc->evict,     sc->prefetch,  sc->ns_per_tick,
                        sc->workers,   o->command_line,
                        lsim_scenario_execute_name(sc->execute),
                        lsim_scenario_clock_name(sc->clock)};
  rc = lsim_db_begin_identified(W.db, &info, ident, eb);
  free(ident);
  if (!rc)
    res->db_status = "running";
  if (!rc)
    rc = lsim__setup(&W, eb);
  if (!rc)
    rc = lsim__loop(&W, eb);
  if (!rc || rc == LSIM_E_INTERRUPTED) {
    lsim_errbuf eb2 = LSIM_ERRBUF_INIT;
    lsim_err rc2 = W.eng ? lsim_engine_finish(W.eng, W.now, &eb2) : 0;
    if (rc2 && !rc) {
      rc = rc2;
      *eb = eb2;
    }
  }
  if (!rc && W.eng && !lsim_engine_check(W.eng))
    rc = LSIM_BUG(eb, "page conservation violated at the end of the run");
  if (!rc && W.rec) /* --clock-from: the recorded run was used up exactly */
    rc = lsim_recclock_finish(W.rec, eb);
  if (!rc && W.follows) {
    /* the backend holds nothing the engine did not publish, and its page
    ** map is the engine's */
    rc = lsim_backend_finish(&W.be, eb);
    for (int w = 0; !rc && w < sc->workers; w++)
      rc = lsim_backend_check_pages(&W.be, w, lsim_engine_res(W.eng, w), eb);
  }
  if (o->backend_counts && W.be_open)
    lsim_backend_counts_get(&W.be, o->backend_counts);
  /* a sink that failed on a database write says only which event it was:
  ** add SQLite's own reason (a full disk, an I/O error) */
  const char *dbwhy = lsim_db_failure(W.db);
  if (rc && dbwhy && !strstr(eb->msg, dbwhy)) {
    char head[sizeof eb->msg];
    snprintf(head, sizeof head, "%s", eb->msg);
    lsim_fail(eb, rc, "%s: %s", head, dbwhy);
  }

  res->events = W.events;
  res->queue_events = W.queue_events;
  res->iterations = W.iterations;
  res->end_tick = W.now;
  res->arrived = W.arrived;
  res->clock = W.clk;
  if (W.tr_open) {
    lsim_trace_info ti;
    lsim_trace_get_info(&W.tr, &ti);
    res->trace_rows_skipped = ti.skipped;
    snprintf(res->trace_first_skipped, sizeof res->trace_first_skipped, "%s",
             ti.first_skipped);
  }

  /* Order (docs/RELIABILITY.md, "Output guarantees"): the summary and
  ** every side file complete, then 'ok' committed and checkpointed into
  ** the main file (lsim_db_end_run), then the report.  Any failure on the
  ** way makes the run 'failed' with its reason. */
  const char *status = !rc ? "ok" : rc == LSIM_E_INTERRUPTED ? "interrupted" : "failed";
  /* the per-tenant figures (sim/tenants.h): the tenants, then all */
  lsim_tenant_fig *tf = NULL;
  if (!rc) {
    /* The summary goes in before the status turns ok, so an ok run always
    ** has its figures. */
    rc = lsim_report_summarize(lsim_db_handle(W.db), sc, &W.m, res, eb);
    if (!rc && !(tf = calloc((size_t)sc->ntenants + 1, sizeof *tf)))
      rc = lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
    if (!rc)
      rc = lsim_tenants_compute(lsim_db_handle(W.db), sc, W.m.tenant_service,
                                W.m.requests_ok, W.m.tenant_svc_longest,
                                W.m.tenant_svc_starved, tf, eb);
    if (!rc) {
      res->tenants = tf;
      res->clock = W.clk;
      res->events = W.events;
      res->queue_events = W.queue_events;
      res->iterations = W.iterations;
      res->end_tick = W.now;
      res->arrived = W.arrived;
      rc = lsim_report_store(W.db, res, eb);
    }
    if (!rc)
      rc = lsim_tenants_store(W.db, sc, tf, eb);
    if (!rc) {
      char base[1024];
      lsim__base_path(final_path, base, sizeof base);
      char prom[1100];
      snprintf(prom, sizeof prom, "%s.prom", base);
      rc = lsim_report_metrics_file(prom, sc, &W.m, res, eb);
      if (!rc)
        snprintf(res->metrics_path, sizeof res->metrics_path, "%s", prom);
      if (!rc && o->plots)
        rc = lsim_report_plots(lsim_db_handle(W.db), base, sc,
                               W.m.tenant_service, res, eb);
      if (!rc && o->json_path) {
        rc = lsim_sumjson_write(o->json_path, sc, res, eb);
        if (!rc)
          snprintf(res->json_path, sizeof res->json_path, "%s", o->json_path);
      }
    }
    status = rc ? "failed" : "ok";
  }
  lsim_errbuf eb_end = LSIM_ERRBUF_INIT;
  lsim_err rc_end = lsim_db_end_run(W.db, status, rc ? eb->msg : NULL, W.now,
                                    &eb_end);
  if (rc_end && !rc) {
    rc = rc_end;
    *eb = eb_end;
    status = "failed";
  }
  if (!rc_end)
    res->db_status = status;
  res->status = status;
  if (o->tenant_service && W.m.tenant_service)
    memcpy(o->tenant_service, W.m.tenant_service,
           (size_t)sc->ntenants * sizeof(int64_t));
  if (!rc && o->report)
    lsim_report_print(o->report, sc, &W.m, res);
  if (!rc && o->tenant_figs && tf)
    memcpy(o->tenant_figs, tf, ((size_t)sc->ntenants + 1) * sizeof *tf);
  res->tenants = NULL; /* borrowed from tf, freed here */
  free(tf);
  lsim_db_close(W.db);
  lsim__teardown(&W);
  lsim_out_unlock(&lock);
  return rc;
}

void lsim_replay_explain(FILE *f, const char *prog, const lsim_summary *res,
                         const char *db_path) {
  struct stat lst;
  if (res->db_status && strcmp(res->db_status, "running") != 0)
    fprintf(f, "%s: run marked '%s' in %s\n", prog, res->db_status, db_path);
  else if (res->db_status)
    fprintf(f, "%s: the run's end could not be recorded: %s still says "
               "'running' (it holds the rows committed before the "
               "failure)\n",
            prog, db_path);
  else if (lstat(db_path, &lst) != 0)
    fprintf(f, "%s: no database written: %s was not created\n", prog,
            db_path);
  else if (!S_ISREG(lst.st_mode)) /* never opened: a FIFO would block */
    fprintf(f, "%s: no database written: %s left as it was (not a regular "
               "file)\n",
            prog, db_path);
  else {
    /* this run committed no row; say what the file at the path is */
    char st[16] = "";
    sqlite3 *h = NULL;
    sqlite3_stmt *q = NULL;
    if (sqlite3_open_v2(db_path, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(h, "SELECT status FROM runs WHERE run_id=1", -1, &q,
                           NULL) == SQLITE_OK &&
        sqlite3_step(q) == SQLITE_ROW && sqlite3_column_text(q, 0))
      snprintf(st, sizeof st, "%s", (const char *)sqlite3_column_text(q, 0));
    sqlite3_finalize(q);
    sqlite3_close(h);
    if (st[0])
      fprintf(f, "%s: %s left as it was (it holds an earlier run, '%s')\n",
              prog, db_path, st);
    else
      fprintf(f, "%s: no run recorded in %s (it holds no run row: not a "
                 "lorasim run database)\n",
              prog, db_path);
  }
}
