/*
** engine_impl.h: the engine's private house, shared by the core
** (engine.c) and its extensions (ext_*.c); never included outside engine/.
**
** The core keeps the request lifecycle (arrival, waiting and running
** lists, admission, preemption, the one release path, records), event
** emission, the residency views, iteration selection and load / iteration
** completion.  A feature that rides on that lifecycle is an extension: a
** const table of hooks (lsim_core_ext) with the sizes of the state it
** needs -- engine-level and per request -- which the engine allocates,
** zeroes and frees, the way policies get their state (policy/policy.h).
**
** Extensions are listed once, in lsim__exts (engine.c); that order is the
** order every hook runs in, fixed for the run (LSIM_CORE_EXT_* below).
** The core calls a hook only through the lsim__ext_* wrappers, which skip
** a NULL slot and an extension whose setup switched it off, and stop at
** the first error.  Today: hotswap (ext_hotswap.c), compression
** (ext_compress.c), the prefix cache (ext_prefix.c), in that order.  Hook
** points, in the order a request meets them:
**
**   setup      lsim_engine_new, after the workers and policies exist;
**              *on = 0 switches the extension off for this run
**   arrive     lsim_engine_arrive_blocks, before placement (a request
**              that is then rejected is still freed through req_free)
**   source     lsim__ensure_host, when adapter a is registered on a
**              worker's pool: the version and digest to register (the
**              core's default: version 0, the catalog's artifact)
**   staged     lsim_engine_load_done, before validation: the version and
**              digest of what that registration staged
**   hold       lsim__sel_candidates, per waiting request: 1 keeps it out
**              of this step's candidates (a drain in progress)
**   admit      lsim__sel_admit, once the request is running; the first
**              row is sized again afterwards (r->reuse)
**   launch     lsim__sel_launch, after the core named the launch's
**              adapters (and bases) and before iteration_selected: checks
**              of the batch (w->batch[i] is plan entry i)
**   fence      lsim_engine_iter_done, right after iteration_completed and
**              the core's launch fences: the batch's last use completed
**   first_row  lsim_engine_iter_done, when the first row (prefill or
**              recompute) completed, after its service debit
**   leave      lsim__release, before the request's KV object and adapter
**              reference go back (finish, cancel, preempt, end of run)
**   left       lsim__release, after them; keep = 1 when the request stays,
**              preempted (or unfinished at the end of the run), on its
**              worker and keeps what names that worker
**   migrate    lsim__preempt, when the preempted request moves to another
**              worker (after left with keep = 1)
**   iter_end   lsim_engine_iter_done, last, after every request of the
**              batch was debited and the finished ones released
**   reclaim    lsim__begin and lsim__grow_running, before a transaction
**              or a decode page would find fewer than `want` free slots
**   sound      lsim__worker_sound: the extension's own check, and the KV
**              pages and adapter references it holds in the pool (added
**              to the recounts of I2 and I3)
**   req_free   whenever a request is freed
**   release    lsim_engine_release, before the core frees its lists
**
** To add one: its file ext_NAME.c defines a const lsim_core_ext, its id
** goes into the enum below and its table into lsim__exts, its
** configuration into lsim_engine_cfg (engine.h), and CMakeLists.txt lists
** the file (docs/ARCHITECTURE.md, "Engine extensions").
*/
#ifndef LSIM_ENGINE_IMPL_H
#define LSIM_ENGINE_IMPL_H

#include <stddef.h>

#include "engine.h"
#include "fair.h"
#include "hosttier.h"
#include "hotswap.h"
#include "identity.h"
#include "prefix.h"

/* Extension ids: the fixed hook order. */
enum {
  LSIM_CORE_EXT_HOTSWAP = 0,
  LSIM_CORE_EXT_COMPRESS = 1,
  LSIM_CORE_EXT_PREFIX = 2,
  LSIM_CORE_NEXT = 3
};

enum { LSIM__WAITING = 0, LSIM__RUNNING = 1 };

/* The phases of a request's time (lsim_core_req.phase, .acc): waiting with
** its adapter ready on its worker, waiting with it not ready (blocked on a
** load), running before the first token, everything after the first
** token.  Charged by lsim_core_phase (engine.c). */
enum {
  LSIM_CORE_PH_QUEUE = 0,
  LSIM_CORE_PH_LOAD = 1,
  LSIM_CORE_PH_PREFILL = 2,
  LSIM_CORE_PH_DECODE = 3
};


typedef struct lsim_core_req { /* core request state; extension slots follow */
  int64_t id;
  int tenant, adapter, worker;
  lsim_tick arrival, first_token;
  int prompt, output, produced;
  int prefilled;       /* prompt tokens whose prefill completed (chunked) */
  int planned;         /* token rows of this request in the launched plan */
  int state;
  int loads_waited;
  int64_t kv_pages;    /* initial + growth */
  int64_t kv_initial;  /* prompt pages */
  int kv;              /* KV object handle in the worker's pool, or -1 */
  int queued;          /* counted in the adapter's queued reservations */
  int64_t txn;         /* open load txn carrying this request, or -1 */
  int fair;            /* fair.h ledger: 0 not counted, 1 cold, 2 ready */
  int cancel;          /* cancelled while in the launched plan: leaves at
                          that iteration's completion */
  int recomp;          /* preempted: output tokens its next prefill
                          recomputes (with the prompt); 0 otherwise */
  int svc_in;          /* prompt tokens already debited as input service */
  int preemptions;
  /* where its time went (event.h, lsim_request_record): the span since
  ** `mark` is charged to `phase` (LSIM_CORE_PH_*) when the phase changes;
  ** acc[] holds the closed spans */
  lsim_tick mark;
  int phase;
  int cold;            /* its adapter missed at arrival (queue_enqueued) */
  int64_t acc[4];
  lsim_tick preempted_at;
  int preempted_on;    /* the worker that preempted it */
  /* set by extensions, read by the core and other extensions */
  int version;         /* artifact version the request runs, 0 the
                          catalog's: set at admission by the hotswap lease;
                          the plan row and the prefix cache's key read it */
  int reuse;           /* prompt tokens its current admission reuses */
  int64_t kv_lent;     /* KV pages it gave up because an extension holds
                          those rows for it (the prefix cache's blocks) */
  struct lsim_core_req *prev, *next; /* waiting or running list */
} lsim_core_req;

typedef struct lsim_core_list {
  lsim_core_req *head, *tail;
  int n;
} lsim_core_list;

typedef struct lsim_core_worker {
  lsim_res *res;
  lsim_cmp_catalog cat; /* compressed collections: this worker's catalog */
  int *attempts;       /* failed copies in the current load sequence [na] */
  lsim_core_list waiting, running;
  int busy;
  int inflight_copies;
  int admitted_waiting; /* waiting requests holding a KV reservation */
  void *evict_st;
  /* the iteration in flight: its requests in plan order, its adapters */
  lsim_core_req **batch;
  int nbatch;
  int *launched;
  int nlaunched;
  int64_t iter;  /* number of the iteration in flight (valid while busy) */
  lsim_host_tier host; /* cfg.max_cpu_loras: adapters in host memory */
} lsim_core_worker;

typedef struct lsim_core_fnode {
  lsim_tick tick;
  int next;
} lsim_core_fnode;

struct lsim_engine {
  lsim_engine_cfg cfg;
  /* residency objects: adapters 0..na-1, then (compressed) one basis per
  ** cluster, na..na+k-1; bytes, pages and artifact cover all of them */
  int nobj, k;
  int *cluster;          /* [na] compressed: cluster of each adapter */
  lsim_digest bundle;    /* compressed: the collection's bundle */
  int *bcl;              /* [batch + 1] clusters of the running batch */
  int nbcl;
  int *rank;
  int64_t *bytes, *pages;
  lsim_digest *artifact; /* per adapter */
  lsim_digest kabi;      /* the kernel ABI every worker accepts */
  lsim_core_worker *w;
  lsim_evlog log; /* the event log: seq and sink (evlog.h) */
  int64_t iters; /* next iteration number */
  int64_t live;
  lsim_core_req *freelist;
  void *sched_st, *prefetch_st;
  lsim_fair *fair;      /* liveness ledgers and starvation intervals */
  lsim_prefetch_cand *pcands; /* prefetch view scratch [window] */
  int *pseen;           /* [na] stamp of the view that listed an adapter */
  int pstamp;
  const lsim_place_ops *place; /* placement policy (cfg.placement) */
  void *place_st;
  /* future of the trace (oracle eviction): per-adapter FIFO of ticks */
  int *fhead, *ftail;
  lsim_core_fnode *fnode;
  int fcap, ffree;
  /* scratch, sized once */
  lsim_sched_cand *cands;
  lsim_core_req **cand_req;
  int *order;
  lsim_evict_cand *ecands;
  lsim_core_req **admitted; /* [window] admitted by lsim__sel_admit */
  int *prop;
  /* max_loras: the adapters of the plan being selected, a stamp per
  ** adapter (capseen[a] == capstamp: in the plan), and their count */
  int *capseen;
  int capstamp, ncap;
  int *vict;      /* [na] victims a txn just chose (begin) */
  /* the launch names each adapter once: lmark[a] == lstamp when the
  ** launch being built names it already (a stamp per launch, no clearing) */
  unsigned *lmark;
  unsigned lstamp;
  int *vict_done; /* [na] victims of a txn that completes or fails */
  int64_t *rest;  /* [na] restore txns handed out by a rollback */
  /* workers a migration queued work on, to be stepped by the world */
  int *nudge;      /* [workers] stack */
  int nnudge;
  unsigned char *nudged; /* [workers] */
  /* extensions (lsim_core_ext): state of each enabled one (NULL: off),
  ** offset of its per-request slot after the request */
  void *ext_st[LSIM_CORE_NEXT];
  size_t ext_off[LSIM_CORE_NEXT];
  size_t req_size;  /* sizeof (lsim_core_req) + every slot, aligned */
  int nreclaim;     /* enabled extensions with a reclaim hook */
  int nfirst_row;   /* enabled extensions with a first_row hook (asked at
                       every completed-service debit, so skipped when 0) */
  /* ranking context */
  int rank_worker;
  lsim_tick rank_now;
  int rank_bad;
};

typedef struct lsim_core_ext {
  const char *name;
  size_t state_size;     /* engine-level state, zeroed */
  size_t req_state_size; /* per-request slot, zeroed at arrival */
  lsim_err (*setup)(lsim_engine *e, void *st, int *on, lsim_errbuf *eb);
  void (*release)(lsim_engine *e, void *st);
  lsim_err (*arrive)(lsim_engine *e, void *st, lsim_core_req *r,
                     const uint64_t *blocks, int nblocks, lsim_errbuf *eb);
  lsim_err (*admit)(lsim_engine *e, void *st, int wi, lsim_core_req *r,
                    lsim_tick now, lsim_errbuf *eb);
  lsim_err (*first_row)(lsim_engine *e, void *st, int wi, lsim_core_req *r,
                        lsim_tick now, lsim_errbuf *eb);
  lsim_err (*leave)(lsim_engine *e, void *st, int wi, lsim_core_req *r,
                    lsim_errbuf *eb);
  /* keep: the request stays, preempted, on worker wi */
  lsim_err (*left)(lsim_engine *e, void *st, int wi, lsim_core_req *r,
                   lsim_tick now, int keep, lsim_errbuf *eb);
  lsim_err (*migrate)(lsim_engine *e, void *st, int wi, lsim_core_req *r,
                      int to, lsim_tick now, lsim_errbuf *eb);
  /* 1: waiting request r may not be admitted on wi now */
  int (*hold)(const lsim_engine *e, const void *st, int wi,
              const lsim_core_req *r);
  lsim_err (*launch)(lsim_engine *e, void *st, int wi, lsim_plan *plan,
                     lsim_errbuf *eb);
  void (*fence)(lsim_engine *e, void *st, int wi);
  lsim_err (*iter_end)(lsim_engine *e, void *st, int wi, lsim_tick now,
                       lsim_errbuf *eb);
  /* the version and digest the pool registers (source) and validated
  ** (staged) for adapter a; the core's default is version 0, the
  ** catalog's artifact */
  lsim_err (*source)(lsim_engine *e, void *st, int wi, int a, int *version,
                     lsim_digest *d, lsim_errbuf *eb);
  lsim_err (*staged)(lsim_engine *e, void *st, int wi, int a, int *version,
                     lsim_digest *d, lsim_errbuf *eb);
  lsim_err (*reclaim)(lsim_engine *e, void *st, int wi, lsim_tick now,
                      int64_t want, lsim_errbuf *eb);
  /* 1 when sound; adds the pool pages the extension holds to *kv and the
  ** adapter references it holds to ref[a] (the recounts of I2 and I3) */
  int (*sound)(const lsim_engine *e, const void *st, int wi, int64_t *kv,
               int *ref);
  void (*req_free)(lsim_engine *e, void *st, lsim_core_req *r);
} lsim_core_ext;

extern const lsim_core_ext lsim_ext_hotswap;
extern const lsim_core_ext lsim_ext_compress;
extern const lsim_core_ext lsim_ext_prefix;

/* Extension x's per-request slot of r. */
static inline void *lsim_core_slot(const lsim_engine *e, const lsim_core_req *r,
                                   int x) {
  return (char *)r + e->ext_off[x];
}

/* Core services for extensions. */
lsim_err lsim_core_emit(lsim_engine *e, lsim_tick now, int kind, int w,
                        int64_t request, int tenant, int adapter,
                        int64_t generation, int attempt, int64_t pages,
                        int64_t bytes, int64_t value, const char *detail,
                        lsim_errbuf *eb);
/* Charge r's time since its last phase change to its phase, then enter
** phase ph (LSIM_CORE_PH_*) at now; after the first token, always decode. */
void lsim_core_phase(lsim_core_req *r, lsim_tick now, int ph);
/* Pool pages of `tokens` tokens of KV. */
int64_t lsim_core_kv_pages(const lsim_engine *e, int64_t tokens);
/* The residency transaction for request q on worker wi (victims chosen by
** the eviction policy into victims[0..*nv); *ok = 0: no room), and the
** events of its victims before commit and after it. */
lsim_err lsim_core_begin(lsim_engine *e, int wi, lsim_tick now,
                         const lsim_res_req *q, int relaxed, int64_t *txn,
                         int *victims, int *nv, int *used_relaxed, int *ok,
                         lsim_errbuf *eb);
lsim_err lsim_core_emit_victims(lsim_engine *e, int wi, lsim_tick now,
                                const int *v, int nv, int relaxed,
                                lsim_errbuf *eb);
lsim_err lsim_core_emit_retired(lsim_engine *e, int wi, lsim_tick now,
                                const int *v, int nv, lsim_errbuf *eb);

static inline int lsim_core_tenant_of(const lsim_engine *e, int a) {
  return a % e->cfg.ntenants;
}

static inline lsim_res_adapter_view lsim_core_av(const lsim_core_worker *w,
                                                 int a) {
  lsim_res_adapter_view v;
  lsim_res_adapter(w->res, a, &v);
  return v;
}

#endif /* LSIM_ENGINE_IMPL_H */
