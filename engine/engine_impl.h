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
** the first error.  Hook points, in the order a request meets them:
**
**   setup      lsim_engine_new, after the workers and policies exist;
**              *on = 0 switches the extension off for this run
**   arrive     lsim_engine_arrive_blocks, before placement (a request
**              that is then rejected is still freed through req_free)
**   admit      lsim__sel_admit, once the request is running; the first
**              row is sized again afterwards (r->reuse)
**   first_row  lsim_engine_iter_done, when the first row (prefill or
**              recompute) completed, after its service debit
**   leave      lsim__release, before the request's KV object and adapter
**              reference go back (finish, cancel, preempt, end of run)
**   reclaim    lsim__begin and lsim__grow_running, before a transaction
**              or a decode page would find fewer than `want` free slots
**   sound      lsim__worker_sound: the extension's own check, and the KV
**              pages it holds in the pool (added to the recount of I2)
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
#include "hotswap.h"
#include "identity.h"
#include "prefix.h"

/* Extension ids: the fixed hook order. */
enum { LSIM_CORE_EXT_PREFIX = 0, LSIM_CORE_NEXT = 1 };

enum { LSIM__WAITING = 0, LSIM__RUNNING = 1 };


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
  lsim_hs_lease lease; /* resolved once, when admitted to run (hotswap) */
  int version;         /* artifact version its lease names */
  int fair;            /* fair.h ledger: 0 not counted, 1 cold, 2 ready */
  int cancel;          /* cancelled while in the launched plan: leaves at
                          that iteration's completion */
  int recomp;          /* preempted: output tokens its next prefill
                          recomputes (with the prompt); 0 otherwise */
  int svc_in;          /* prompt tokens already debited as input service */
  int preemptions;
  lsim_tick preempted_at;
  int preempted_on;    /* the worker that preempted it */
  lsim_cmp_lease cmp;  /* compressed: lease on the collection generation */
  int cmp_bound;       /* holds cmp (and a reference on its basis object) */
  /* set by extensions (the prefix cache today) */
  int reuse;           /* prompt tokens its current admission reuses */
  int64_t kv_lent;     /* KV pages it gave up because an extension holds
                          those rows for it (the prefix cache's blocks) */
  struct lsim_core_req *prev, *next; /* waiting or running list */
} lsim_core_req;

typedef struct lsim_core_list {
  lsim_core_req *head, *tail;
  int n;
} lsim_core_list;

/* A worker's lease catalog (hotswap.h): aliases are adapters, plus one
** fresh alias per new_alias hotswap. */
typedef struct lsim_core_hsw {
  lsim_hs *hs;
  int nslots;
  int *alias;      /* [na] the alias adapter a resolves through */
  int *ver;        /* [naliases] version the alias names (or will name) */
  int *slot_ver;   /* [nslots] version staged or published in the slot */
  int64_t *shadow; /* [na] staged slot of a hotswap in flight, or -1 */
  int *shadow_alias, *shadow_ver, *shadow_mode; /* [na] */
  lsim_hs_handle *shadow_expect; /* [na] handle the CAS expects */
  int *drain;      /* [na] version waiting for drain_then_overwrite, or 0 */
  int active;      /* a retiring slot or a drain may be pending: reap looks */
  /* The joint pool's charge for a copy beside the live one (M_old + M_new,
  ** docs/RESIDENCY.md): a KV-type object of the adapter's pages, bound to
  ** the adapter, from staging until the old slot is reclaimed. */
  int *shadow_kv;  /* [na] charge of the staged copy, or -1 */
  int *slot_kv;    /* [nslots] charge held until this retiring slot goes */
  int *slot_kv_a;  /* [nslots] the adapter of that charge */
  int *reg_ver;    /* [na] version whose digest the pool registered */
} lsim_core_hsw;

typedef struct lsim_core_worker {
  lsim_res *res;
  lsim_core_hsw hsw;
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
  int *vict;      /* [na] victims a txn just chose (begin) */
  int *vict_done; /* [na] victims of a txn that completes or fails */
  int64_t *rest;  /* [na] restore txns handed out by a rollback */
  /* hotswap: latest version requested per adapter, alias space */
  int *hs_version;       /* [na] */
  int *hs_alias_adapter; /* [hs_aliases] */
  int hs_aliases, hs_next_alias;
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
  lsim_err (*reclaim)(lsim_engine *e, void *st, int wi, lsim_tick now,
                      int64_t want, lsim_errbuf *eb);
  /* 1 when sound; adds the pool pages the extension holds to *kv */
  int (*sound)(const lsim_engine *e, const void *st, int wi, int64_t *kv);
  void (*req_free)(lsim_engine *e, void *st, lsim_core_req *r);
} lsim_core_ext;

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
/* Pool pages of `tokens` tokens of KV. */
int64_t lsim_core_kv_pages(const lsim_engine *e, int64_t tokens);

#endif /* LSIM_ENGINE_IMPL_H */
