/*
** test_compress_replay.c: serving a compressed collection (issue 10, part
** 3 as a user sees it; docs/COMPRESSION.md "Serving").
**
**   engine    the engine driven by hand on a four-adapter, two-cluster
**             collection: basis and core in one load and one
**             publication, a basis that cannot go while a request of its
**             cluster runs (and, by design, while one of its cores is
**             resident), a core staged against another basis version
**             rolled back with the pool conserved and no service debited
**   sched     basis-cluster affinity orders feasible candidates and never
**             admits one that failed a predicate
**   replay    quickstart compressed vs not: fewer resident and copied
**             bytes, byte-identical event logs across two runs, the
**             ordinary quickstart unchanged
**   scenario  $.adapters.compression validation (JSON path + E_CMP_*)
**   cli       a bundle made by `lorasim compress` served by `lorasim
**             replay`
*/
#include <criterion/criterion.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "../engine/compress_res.h"
#include "../engine/engine.h"
#include "../engine/residency.h"
#include "../sim/replay.h"
#include "../sim/scenario.h"

#define LSIM_TMP_PREFIX "/tmp/lsim-cmpreplay-"
#include "cli_harness.h"

/* ---- a hand-driven engine over a compressed collection ----------------- */

#define NA 4
#define MAXEV 4096

typedef struct cdrv {
  lsim_engine *e;
  lsim_plan plan;
  lsim_event ev[MAXEV];
  int nev;
} cdrv;

static lsim_err on_ev(void *ud, const lsim_event *ev) {
  cdrv *d = ud;
  cr_assert_lt(d->nev, MAXEV);
  d->ev[d->nev++] = *ev;
  return 0;
}

/* adapters 0, 1 in cluster 0; 2, 3 in cluster 1; a core is 64 bytes in one
** page, a basis 16 KiB in four */
static int rank_[NA] = {5, 5, 5, 5};
static int64_t core_bytes_[NA] = {64, 64, 64, 64};
static int64_t core_pages_[NA] = {1, 1, 1, 1};
static int cluster_[NA] = {0, 0, 1, 1};
static int64_t basis_bytes_[2] = {16384, 16384};
static int64_t basis_pages_[2] = {4, 4};
static lsim_digest basis_[2], core_[NA];

static lsim_engine_cmp cmp_cfg(int64_t weight) {
  lsim_engine_cmp cm;
  memset(&cm, 0, sizeof cm);
  cr_assert_eq(lsim_sha256("bundle", 6, &cm.bundle, NULL), 0);
  cr_assert_eq(lsim_sha256("set", 3, &cm.source_set, NULL), 0);
  for (int c = 0; c < 2; c++) {
    char id[16];
    int n = snprintf(id, sizeof id, "basis%d", c);
    cr_assert_eq(lsim_sha256(id, (size_t)n, &basis_[c], NULL), 0);
  }
  for (int a = 0; a < NA; a++) {
    char id[16];
    int n = snprintf(id, sizeof id, "core%d", a);
    cr_assert_eq(lsim_sha256(id, (size_t)n, &core_[a], NULL), 0);
  }
  cm.clusters = 2;
  cm.cluster = cluster_;
  cm.basis_bytes = basis_bytes_;
  cm.basis_pages = basis_pages_;
  cm.version = "v1";
  cm.basis = basis_;
  cm.core = core_;
  cm.affinity_weight = weight;
  return cm;
}

static void cdrv_init(cdrv *d, const char *sched, int64_t pool, int max_req,
                      int64_t weight) {
  memset(d, 0, sizeof *d);
  lsim_engine_cmp cm = cmp_cfg(weight);
  lsim_engine_cfg cfg = {
      .workers = 1,
      .pool_pages = pool,
      .page_bytes = 4096,
      .max_batch_tokens = 64,
      .max_batch_requests = max_req,
      .kv_bytes_per_token = 1,
      .max_load_attempts = 4,
      .ntenants = 1,
      .nadapters = NA,
      .adapter_rank = rank_,
      .adapter_bytes = core_bytes_,
      .adapter_pages = core_pages_,
      .sched = lsim_sched_find(sched),
      .evict = lsim_evict_find("lru"),
      .prefetch = lsim_prefetch_find("none"),
      .sink = {on_ev, NULL, d, NULL},
      .sched_params = {.w_in = 1, .w_out = 1, .age_ticks = 2,
                       .cluster_window = 4},
      .compress = &cm,
  };
  cr_assert_not_null(cfg.sched);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_engine_new(&d->e, &cfg, &eb), 0, "%s", eb.msg);
  lsim_plan_reset(&d->plan);
}

static void cdrv_free(cdrv *d) {
  cr_assert(lsim_engine_check(d->e));
  lsim_engine_release(d->e);
  lsim_plan_release(&d->plan);
}

static void arrive(cdrv *d, lsim_tick t, int64_t id, int adapter, int out) {
  lsim_arrival a = {id, 0, adapter, 1, out};
  int w;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_engine_arrive(d->e, t, &a, &w, &eb), 0, "%s", eb.msg);
}

/* One step; the loads it started into ls (may be NULL); *sel. */
static int step(cdrv *d, lsim_tick t, lsim_load_start *ls, int *sel) {
  lsim_load_start tmp[8];
  int nl, s;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_engine_step(d->e, 0, t, ls ? ls : tmp, 8, &nl, &d->plan,
                                &s, &eb),
               0, "%s", eb.msg);
  if (sel)
    *sel = s;
  cr_assert(lsim_engine_check(d->e), "unsound after step at %lld",
            (long long)t);
  return nl;
}

static void load_result(cdrv *d, lsim_tick t, int adapter, int outcome) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_engine_load_result(d->e, 0, adapter, t, outcome, &eb), 0,
               "%s", eb.msg);
  cr_assert(lsim_engine_check(d->e));
}

static void iter_done(cdrv *d, lsim_tick t) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_engine_iter_done(d->e, 0, t, 1, &eb), 0, "%s", eb.msg);
  cr_assert(lsim_engine_check(d->e));
}

/* Run the worker until it is idle with nothing waiting (copies take one
** tick, iterations one tick). */
static void drain(cdrv *d, lsim_tick *t) {
  for (int guard = 0; guard < 200; guard++) {
    lsim_load_start ls[8];
    int sel, nl = step(d, *t, ls, &sel);
    (*t)++;
    for (int i = 0; i < nl; i++)
      load_result(d, *t, ls[i].adapter, LSIM_LOAD_OK);
    if (sel)
      iter_done(d, *t);
    lsim_worker_view v;
    lsim_engine_worker_view(d->e, 0, &v);
    if (!sel && !nl && v.waiting == 0 && v.running == 0 && !v.busy)
      return;
  }
  cr_assert_fail("the worker did not drain");
}

static int count(const cdrv *d, int kind) {
  int n = 0;
  for (int i = 0; i < d->nev; i++)
    n += d->ev[i].kind == kind;
  return n;
}

static int last(const cdrv *d, int kind) {
  for (int i = d->nev - 1; i >= 0; i--)
    if (d->ev[i].kind == kind)
      return i;
  return -1;
}

static int state_of(const cdrv *d, int object) {
  lsim_res_adapter_view v;
  lsim_res_adapter(lsim_engine_res(d->e, 0), object, &v);
  return v.state;
}

static int visible(int st) {
  return st == LSIM_RS_PUBLISHED || st == LSIM_RS_ACTIVE || st == LSIM_RS_IDLE;
}

static int running(const cdrv *d, int64_t request) {
  /* a request is running once it has a kv_reserved event and no finish */
  int kv = 0;
  for (int i = 0; i < d->nev; i++)
    if (d->ev[i].request == request &&
        (d->ev[i].kind == LSIM_EV_KV_RESERVED ||
         d->ev[i].kind == LSIM_EV_ITERATION_SELECTED))
      kv = 1;
  return kv;
}

Test(engine, basis_and_core_load_as_one_publication) {
  cdrv d;
  cdrv_init(&d, "fcfs", 32, 4, 0);
  arrive(&d, 0, 1, 0, 1);
  lsim_load_start ls[8];
  cr_assert_eq(step(&d, 0, ls, NULL), 1);
  cr_assert_eq(ls[0].adapter, 0);
  cr_assert_eq(ls[0].bytes, 64 + 16384, "one copy: core and basis");
  int st = last(&d, LSIM_EV_ADAPTER_LOAD_STARTED);
  cr_assert_str_eq(d.ev[st].detail, "with_basis");
  /* while the copy runs nothing of cluster 0 is visible */
  int b0 = lsim_engine_basis_object(d.e, 0);
  cr_assert_eq(b0, NA);
  cr_assert_not(visible(state_of(&d, b0)));
  cr_assert_eq(lsim_engine_cmp_catalog(d.e, 0)->live.resident[0], 0);
  load_result(&d, 1, 0, LSIM_LOAD_OK);
  int p = last(&d, LSIM_EV_ADAPTER_GENERATION_PUBLISHED);
  int q = last(&d, LSIM_EV_BASIS_PUBLISHED);
  cr_assert(p >= 0 && q == p + 1, "basis published right after its core");
  cr_assert_eq(d.ev[q].value, 0);
  cr_assert_eq(d.ev[q].bytes, 16384);
  cr_assert(visible(state_of(&d, 0)) && visible(state_of(&d, b0)));
  cr_assert_eq(lsim_engine_cmp_catalog(d.e, 0)->live.resident[0], 1);
  /* a second core of the cluster loads alone */
  arrive(&d, 1, 2, 1, 1);
  cr_assert_eq(step(&d, 1, ls, NULL), 1);
  cr_assert_eq(ls[0].adapter, 1);
  cr_assert_eq(ls[0].bytes, 64);
  cr_assert_eq(count(&d, LSIM_EV_BASIS_PUBLISHED), 1);
  cdrv_free(&d);
}

Test(engine, basis_not_evictable_while_a_request_of_its_cluster_runs) {
  cdrv d;
  /* pool 8: basis 4 + core 1 + KV 1 of cluster 0, and cluster 1 needs 6 */
  cdrv_init(&d, "fcfs", 8, 4, 0);
  int b0 = lsim_engine_basis_object(d.e, 0);
  const lsim_cmp_catalog *cat = lsim_engine_cmp_catalog(d.e, 0);
  arrive(&d, 0, 1, 0, 3);
  cr_assert_eq(step(&d, 0, NULL, NULL), 1);
  load_result(&d, 1, 0, LSIM_LOAD_OK);
  int sel;
  cr_assert_eq(step(&d, 1, NULL, &sel), 0);
  cr_assert(sel);
  /* request 1 of cluster 0 is in flight: it holds a lease and the basis */
  cr_assert_eq(cat->live.inflight[0], 1);
  cr_assert_eq(lsim_cmp_basis_evictable(cat, 0), 0);
  cr_assert_eq(lsim_res_eligible(lsim_engine_res(d.e, 0), b0),
               LSIM_E_RES_REFCOUNT);
  /* a request of cluster 1 cannot make room: nothing of cluster 0 goes */
  arrive(&d, 1, 2, 2, 1);
  lsim_tick t = 2;
  for (; t < 4; t++) {
    iter_done(&d, t);
    cr_assert_eq(step(&d, t, NULL, &sel), 0, "no load while 1 runs");
    cr_assert_eq(count(&d, LSIM_EV_BASIS_EVICTED), 0);
    cr_assert(visible(state_of(&d, b0)));
  }
  iter_done(&d, t); /* request 1's last token */
  cr_assert_eq(count(&d, LSIM_EV_REQUEST_FINISHED), 1);
  /* no request in flight: the catalog would let it go, the pool still
  ** keeps it for its resident core (by design: docs/COMPRESSION.md) */
  cr_assert_eq(cat->live.inflight[0], 0);
  cr_assert_eq(lsim_cmp_basis_evictable(cat, 0), 1);
  cr_assert_eq(lsim_res_eligible(lsim_engine_res(d.e, 0), b0),
               LSIM_E_RES_PINNED);
  /* the next load takes the core and, with it, the basis */
  lsim_load_start ls[8];
  cr_assert_eq(step(&d, t, ls, NULL), 1);
  cr_assert_eq(ls[0].adapter, 2);
  cr_assert_eq(ls[0].bytes, 64 + 16384);
  cr_assert_eq(count(&d, LSIM_EV_BASIS_EVICTED), 1);
  int be = last(&d, LSIM_EV_BASIS_EVICTED);
  cr_assert_eq(d.ev[be].value, 0);
  cr_assert_eq(d.ev[be].bytes, 16384);
  cr_assert_eq(cat->live.resident[0], 0);
  cr_assert_not(visible(state_of(&d, b0)));
  load_result(&d, t + 1, 2, LSIM_LOAD_OK);
  cr_assert_eq(cat->live.resident[1], 1);
  cdrv_free(&d);
}

Test(engine, core_against_wrong_basis_version_rolls_back) {
  cdrv d;
  cdrv_init(&d, "fcfs", 16, 4, 0);
  int b0 = lsim_engine_basis_object(d.e, 0);
  const lsim_cmp_catalog *cat = lsim_engine_cmp_catalog(d.e, 0);
  arrive(&d, 0, 1, 0, 1);
  cr_assert_eq(step(&d, 0, NULL, NULL), 1);
  load_result(&d, 1, 0, LSIM_LOAD_STALE_BASIS);
  int f = last(&d, LSIM_EV_ADAPTER_LOAD_FAILED);
  cr_assert(f >= 0);
  cr_assert_str_eq(d.ev[f].detail, "stale_basis");
  cr_assert_eq(count(&d, LSIM_EV_LOAD_ROLLED_BACK), 1);
  cr_assert_eq(count(&d, LSIM_EV_ADAPTER_GENERATION_PUBLISHED), 0);
  cr_assert_eq(count(&d, LSIM_EV_BASIS_PUBLISHED), 0, "basis never alone");
  cr_assert_eq(cat->live.resident[0], 0);
  cr_assert_not(visible(state_of(&d, b0)));
  lsim_worker_view v;
  lsim_engine_worker_view(d.e, 0, &v);
  cr_assert_eq(v.free_pages, 16, "every page back: pool conserved");
  cr_assert_eq(v.adapter_pages + v.kv_pages + v.reserved_pages, 0);
  cr_assert_eq(count(&d, LSIM_EV_COMPLETED_SERVICE_DEBITED), 0);
  /* the retry loads both again and serves */
  lsim_tick t = 1;
  drain(&d, &t);
  cr_assert_eq(count(&d, LSIM_EV_BASIS_PUBLISHED), 1);
  cr_assert_eq(count(&d, LSIM_EV_REQUEST_FINISHED), 1);
  /* a second core against a stale basis while the basis is resident: the
  ** basis stays, the core goes back, the pool adds up */
  arrive(&d, t, 2, 1, 1);
  lsim_load_start ls[8];
  cr_assert_eq(step(&d, t, ls, NULL), 1);
  cr_assert_eq(ls[0].bytes, 64);
  load_result(&d, t + 1, 1, LSIM_LOAD_STALE_BASIS);
  cr_assert_eq(count(&d, LSIM_EV_LOAD_ROLLED_BACK), 2);
  cr_assert(visible(state_of(&d, b0)));
  cr_assert_eq(cat->live.resident[0], 1);
  lsim_engine_worker_view(d.e, 0, &v);
  cr_assert_eq(v.adapter_pages, 4 + 1, "basis 0 and core 0 only");
  cr_assert_eq(v.free_pages, 16 - 5);
  int64_t debits = count(&d, LSIM_EV_COMPLETED_SERVICE_DEBITED);
  cr_assert_eq(debits, 1, "nothing debited for the failed load");
  cdrv_free(&d);
}

/* ---- the pool's companions, directly --------------------------------- */

static lsim_digest dg(int i) {
  lsim_digest d;
  char id[16];
  int n = snprintf(id, sizeof id, "obj%d", i);
  cr_assert_eq(lsim_sha256(id, (size_t)n, &d, NULL), 0);
  return d;
}

/* A basis whose cores left earlier, taken alone as a victim by a load that
** then fails: dropped, never restored (a restore of a basis would be a
** copy of no adapter, and a basis alone serves nothing). */
Test(residency, basis_taken_alone_is_dropped_on_rollback) {
  /* objects 0, 1: cores of bases 2, 3; cores 1 page, bases 4; pool 6 */
  int64_t pages[4] = {1, 1, 4, 4};
  int comp[4] = {2, 3, -1, -1};
  lsim_digest k = dg(99), d[4];
  for (int i = 0; i < 4; i++)
    d[i] = dg(i);
  lsim_res_cfg cfg = {6, 4096, 4, pages, 0, k};
  lsim_res *r;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_res_new(&r, &cfg, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_res_set_companions(r, comp, &eb), 0, "%s", eb.msg);
  for (int i = 0; i < 4; i++)
    cr_assert_eq(lsim_res_register(r, i, &d[i], &k, &eb), 0, "%s", eb.msg);
  /* core 0 and basis 2: one txn, one publication */
  lsim_res_req q = {LSIM_TXN_PREFETCH, 0, -1, 0, 0};
  int64_t t, gen;
  int kv, nr;
  cr_assert_eq(lsim_res_begin_with(r, &q, NULL, 0, &t, &eb), 0, "%s", eb.msg);
  lsim_res_txn_view tv;
  cr_assert_eq(lsim_res_txn(r, t, &tv, &eb), 0);
  cr_assert_eq(tv.with, 2);
  cr_assert_eq(tv.demand.adapter, 5);
  cr_assert_eq(lsim_res_copy_start(r, t, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_res_copy_done(r, t, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_res_validate(r, t, &d[0], &eb), LSIM_E_RES_DIGEST,
               "the basis's bytes must be checked too");
  cr_assert_eq(lsim_res_validate_with(r, t, &d[0], &d[2], &eb), 0, "%s",
               eb.msg);
  cr_assert_eq(lsim_res_publish(r, t, 1, &gen, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_res_commit(r, t, 1, &kv, &eb), 0, "%s", eb.msg);
  lsim_res_adapter_view v;
  lsim_res_adapter(r, 2, &v);
  cr_assert_eq(v.state, LSIM_RS_PUBLISHED);
  cr_assert_eq(v.deps, 1);
  cr_assert_eq(lsim_res_eligible(r, 2), LSIM_E_RES_PINNED);
  /* core 0 alone leaves (a KV need of one page, core 0 the named victim) */
  lsim_res_req kq = {LSIM_TXN_KV, 2, 7, 2, 0};
  int v0 = 0;
  cr_assert_eq(lsim_res_begin_with(r, &kq, &v0, 1, &t, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_res_commit(r, t, 2, &kv, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_res_kv_release(r, kv, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_res_unbind(r, 2, 2, &eb), 0, "%s", eb.msg);
  lsim_res_adapter(r, 2, &v);
  cr_assert_eq(v.deps, 0);
  cr_assert_eq(lsim_res_eligible(r, 2), 0, "no core holds it any more");
  /* core 1 with basis 3 needs 5 pages: basis 2 goes, alone */
  cr_assert_eq(lsim_res_register(r, 0, &d[0], &k, &eb), 0, "%s", eb.msg);
  q.adapter = 1;
  int victims[4], nv;
  cr_assert_eq(lsim_res_begin(r, &q, NULL, NULL, &t, victims, 4, &nv, &eb), 0,
               "%s", eb.msg);
  cr_assert_eq(nv, 1);
  cr_assert_eq(victims[0], 2);
  cr_assert_eq(lsim_res_copy_start(r, t, &eb), 0, "%s", eb.msg);
  int64_t rest[4];
  cr_assert_eq(lsim_res_rollback(r, t, rest, 4, &nr, &eb), 0, "%s", eb.msg);
  cr_assert_eq(nr, 0, "a basis is never restored");
  int pend[4];
  cr_assert_eq(lsim_res_pending_restores(r, pend, 4), 0);
  lsim_res_adapter(r, 2, &v);
  cr_assert_eq(v.state, LSIM_RS_ABSENT);
  lsim_res_adapter(r, 3, &v);
  cr_assert_eq(v.state, LSIM_RS_HOST_READY, "the companion's attempt ends");
  lsim_res_view rv;
  lsim_res_view_get(r, &rv);
  cr_assert_eq(rv.free, 6);
  cr_assert_eq(lsim_res_check(r, &eb), 0, "%s", eb.msg);
  lsim_res_release(r);
}

/* ---- scheduler: affinity after the predicates -------------------------- */

/* a0 (cluster 0) runs a long request; a1 and a2 were served before, so
** they are resident and idle, unless `cold1`: then a1 was never loaded. */
static void affinity_world(cdrv *d, int64_t weight, int cold1, lsim_tick *t) {
  cdrv_init(d, "resident_greedy", 64, 2, weight);
  *t = 0;
  if (!cold1)
    arrive(d, *t, 100, 1, 1);
  arrive(d, *t, 101, 2, 1);
  drain(d, t);
  arrive(d, *t, 1, 0, 40);
  lsim_load_start ls[8];
  int sel;
  cr_assert_eq(step(d, *t, ls, &sel), 1);
  (*t)++;
  load_result(d, *t, 0, LSIM_LOAD_OK);
  cr_assert_eq(step(d, *t, NULL, &sel), 0);
  cr_assert(sel && running(d, 1));
  iter_done(d, ++*t);
}

Test(sched, affinity_orders_feasible_candidates) {
  for (int k = 0; k < 2; k++) {
    int64_t weight = k ? 100 : 0;
    cdrv d;
    lsim_tick t;
    affinity_world(&d, weight, 0, &t);
    /* one free batch slot: request 2 (a2, cluster 1) came first, request 3
    ** (a1, the running batch's cluster 0) second; both ready */
    arrive(&d, t, 2, 2, 1);
    arrive(&d, t, 3, 1, 1);
    int sel;
    step(&d, t, NULL, &sel);
    cr_assert(sel);
    if (weight) {
      cr_assert(running(&d, 3) && !running(&d, 2),
                "affinity: the batch's cluster first");
    } else {
      cr_assert(running(&d, 2) && !running(&d, 3), "no weight: arrival");
    }
    cdrv_free(&d);
  }
}

Test(sched, affinity_never_overrides_a_failed_predicate) {
  cdrv d;
  lsim_tick t;
  affinity_world(&d, 1000000, 1, &t);
  /* request 2 is of the running batch's cluster (affinity 0) but its core
  ** is cold: it fails the eligibility predicate; request 3 (cluster 1,
  ** affinity weight / 2) is ready */
  arrive(&d, t, 2, 1, 1);
  arrive(&d, t, 3, 2, 1);
  int sel;
  step(&d, t, NULL, &sel);
  cr_assert(sel);
  cr_assert(running(&d, 3), "the feasible candidate runs");
  cr_assert_not(running(&d, 2), "affinity never admits a failed predicate");
  cr_assert_not(visible(state_of(&d, 1)));
  cdrv_free(&d);
}

/* ---- replay: compressed vs ordinary ------------------------------------ */

static void run(const char *scn, const char *db, lsim_summary *s) {
  static lsim_scenario sc;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_scenario_load(&sc, scn, &eb), 0, "%s", eb.msg);
  lsim_replay_opts o = {.db_path = db};
  cr_assert_eq(lsim_replay_run(&sc, &o, s, &eb), 0, "%s", eb.msg);
}

/* Every event row, in seq order, into a text digest. */
static void log_digest(const char *db, lsim_digest *out) {
  sqlite3 *h;
  cr_assert_eq(sqlite3_open(db, &h), SQLITE_OK);
  sqlite3_stmt *st;
  cr_assert_eq(sqlite3_prepare_v2(h,
                                  "SELECT group_concat(seq||','||tick||','||"
                                  "kind||','||coalesce(worker,'')||','||"
                                  "coalesce(request,'')||','||"
                                  "coalesce(adapter,'')||','||"
                                  "coalesce(generation,'')||','||"
                                  "coalesce(pages,'')||','||"
                                  "coalesce(bytes,'')||','||"
                                  "coalesce(value,'')||','||"
                                  "coalesce(detail,''), ';') FROM "
                                  "(SELECT * FROM events ORDER BY seq)",
                                  -1, &st, NULL),
               SQLITE_OK);
  cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
  const unsigned char *txt = sqlite3_column_text(st, 0);
  int n = sqlite3_column_bytes(st, 0);
  cr_assert(txt && n > 0);
  cr_assert_eq(lsim_sha256(txt, (size_t)n, out, NULL), 0);
  sqlite3_finalize(st);
  sqlite3_close(h);
}

Test(replay, compressed_quickstart_saves_bytes_and_repeats, .init = mk_tmp,
     .fini = rm_tmp) {
  char db1[400], db2[400], db3[400];
  snprintf(db1, sizeof db1, "%s/plain.db", tmpdir);
  snprintf(db2, sizeof db2, "%s/cmp1.db", tmpdir);
  snprintf(db3, sizeof db3, "%s/cmp2.db", tmpdir);
  lsim_summary p, c1, c2;
  /* the compressed quickstart keeps the linear $.cost: so does its twin */
  run(LSIM_TEST_DIR "/fixtures/quickstart-linear.json", db1, &p);
  run(LSIM_TEST_DIR "/../scenarios/quickstart-compressed.json", db2, &c1);
  run(LSIM_TEST_DIR "/../scenarios/quickstart-compressed.json", db3, &c2);
  /* the ordinary quickstart is what it always was */
  cr_assert_eq(p.completed, 400);
  cr_assert_eq(p.loads, 109);
  cr_assert_eq(p.load_failures, 2);
  cr_assert_eq(p.evictions, 88);
  cr_assert_eq(p.events, 61489);
  cr_assert_eq(p.basis_loads, 0);
  /* the same trace served compressed */
  cr_assert_eq(c1.completed, 400);
  cr_assert_gt(c1.basis_loads, 0);
  cr_assert_lt(c1.resident_peak_bytes, p.resident_peak_bytes);
  cr_assert_lt(c1.transfer_bytes, p.transfer_bytes);
  cr_assert_lt(10 * c1.transfer_bytes, p.transfer_bytes,
               "cores are 1/16 of a rank-16 basis: far fewer bytes");
  /* byte-identical logs across two runs */
  lsim_digest d2, d3;
  log_digest(db2, &d2);
  log_digest(db3, &d3);
  cr_assert(lsim_digest_eq(&d2, &d3), "two runs, two logs");
  cr_assert_eq(c1.events, c2.events);
  cr_assert_eq(c1.transfer_bytes, c2.transfer_bytes);
}

Test(replay, stale_basis_faults_roll_back_and_the_run_completes,
     .init = mk_tmp, .fini = rm_tmp) {
  static lsim_scenario sc;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_scenario_load(&sc, LSIM_TEST_DIR
                                  "/../scenarios/quickstart-compressed.json",
                                  &eb),
               0, "%s", eb.msg);
  sc.load_failure_rate = 0;
  sc.stale_basis_rate = 0.3;
  char db[400];
  snprintf(db, sizeof db, "%s/stale.db", tmpdir);
  lsim_replay_opts o = {.db_path = db};
  lsim_summary s;
  cr_assert_eq(lsim_replay_run(&sc, &o, &s, &eb), 0, "%s", eb.msg);
  cr_assert_str_eq(s.status, "ok");
  cr_assert_gt(s.load_failures, 0);
  cr_assert_eq(s.completed + s.rejected + s.unfinished, s.arrived);
  sqlite3 *h;
  cr_assert_eq(sqlite3_open(db, &h), SQLITE_OK);
  sqlite3_stmt *st;
  cr_assert_eq(sqlite3_prepare_v2(h,
                                  "SELECT (SELECT count(*) FROM events_named "
                                  "WHERE kind_name='adapter_load_failed' AND "
                                  "detail='stale_basis'), (SELECT count(*) "
                                  "FROM events_named WHERE "
                                  "kind_name='fault_injected' AND "
                                  "detail='stale_basis')",
                                  -1, &st, NULL),
               SQLITE_OK);
  cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
  cr_assert_gt(sqlite3_column_int(st, 0), 0);
  cr_assert_eq(sqlite3_column_int(st, 0), sqlite3_column_int(st, 1),
               "every injected stale basis is a failed, rolled-back load");
  sqlite3_finalize(st);
  sqlite3_close(h);
}

/* Two workers, incremental KV (preemption and migration), affinity with
** slora_cluster, copy, digest, cancel and stale-basis faults: bases come
** and go under pressure and every request ends.  (It found a stall: a
** request migrated by recompute was skipped by its new worker's step in
** the tick it arrived, and nothing woke that worker again.) */
Test(replay, compressed_under_pressure_on_two_workers, .init = mk_tmp,
     .fini = rm_tmp) {
  char db[400];
  snprintf(db, sizeof db, "%s/multi.db", tmpdir);
  lsim_summary s;
  run(LSIM_TEST_DIR "/fixtures/replay/compressed-multi.json", db, &s);
  cr_assert_str_eq(s.status, "ok");
  cr_assert_eq(s.unfinished, 0, "every request ends");
  cr_assert_eq(s.completed + s.rejected, s.arrived);
  cr_assert_gt(s.basis_evictions, 0, "bases left under pressure");
  cr_assert_gt(s.basis_loads, s.basis_evictions);
  cr_assert_gt(s.preemptions, 0);
  cr_assert_gt(s.migrations, 0);
}

/* ---- scenario validation ------------------------------------------------- */

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f);
  static char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = 0;
  fclose(f);
  return buf;
}

/* The quickstart with `"zipf_s": 1.1` followed by `extra` (a fragment of
** $.adapters) and optionally a replacement of one text. */
static lsim_err parse_with(const char *extra, const char *from, const char *to,
                           lsim_errbuf *eb) {
  const char *base = read_file(LSIM_TEST_DIR "/fixtures/quickstart-linear.json");
  static char txt[1 << 16], tmp[1 << 16];
  const char *at = strstr(base, "\"zipf_s\": 1.1");
  cr_assert_not_null(at);
  at += strlen("\"zipf_s\": 1.1");
  snprintf(txt, sizeof txt, "%.*s%s%s", (int)(at - base), base, extra, at);
  if (from) {
    char *p = strstr(txt, from);
    cr_assert_not_null(p, "%s", from);
    snprintf(tmp, sizeof tmp, "%.*s%s%s", (int)(p - txt), txt, to,
             p + strlen(from));
    memcpy(txt, tmp, sizeof txt);
  }
  static lsim_scenario sc;
  return lsim_scenario_parse(&sc, txt, strlen(txt), "c.json", LSIM_TEST_DIR,
                             eb);
}

static void bad(const char *extra, const char *from, const char *to,
                lsim_err code, const char *path) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(parse_with(extra, from, to, &eb), code, "%s: got %s (%s)",
               extra, lsim_err_name(eb.code), eb.msg);
  cr_assert_not_null(strstr(eb.msg, path), "%s", eb.msg);
}

Test(scenario, compression_validated) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(parse_with(", \"compression\": {\"method\": \"jd_diag\", "
                          "\"rank\": 8, \"clusters\": 2}",
                          NULL, NULL, &eb),
               0, "%s", eb.msg);
  const char *P = "$.adapters.compression";
  bad(", \"compression\": 3", NULL, NULL, LSIM_E_CMP_TYPE, P);
  bad(", \"compression\": {\"method\": \"jd\", \"rank\": 8, \"clusters\": 2}",
      NULL, NULL, LSIM_E_CMP_METHOD, "$.adapters.compression.method");
  bad(", \"compression\": {\"rank\": 8, \"clusters\": 2}", NULL, NULL,
      LSIM_E_CMP_MISSING, "$.adapters.compression.method");
  bad(", \"compression\": {\"method\": \"jd_full\", \"clusters\": 2}", NULL,
      NULL, LSIM_E_CMP_MISSING, "$.adapters.compression.rank");
  bad(", \"compression\": {\"method\": \"jd_full\", \"rank\": 0, "
      "\"clusters\": 2}", NULL, NULL, LSIM_E_CMP_RANK,
      "$.adapters.compression.rank");
  bad(", \"compression\": {\"method\": \"jd_full\", \"rank\": 2000, "
      "\"clusters\": 2}", NULL, NULL, LSIM_E_CMP_RANK,
      "$.adapters.compression.rank");
  bad(", \"compression\": {\"method\": \"jd_full\", \"rank\": 8, "
      "\"clusters\": 41}", NULL, NULL, LSIM_E_CMP_CLUSTERS,
      "$.adapters.compression.clusters");
  bad(", \"compression\": {\"method\": \"jd_full\", \"rank\": 8, "
      "\"clusters\": 2, \"colour\": 1}", NULL, NULL, LSIM_E_CMP_UNKNOWN_KEY,
      "$.adapters.compression.colour");
  bad(", \"compression\": {\"method\": \"jd_full\", \"rank\": 8.5, "
      "\"clusters\": 2}", NULL, NULL, LSIM_E_CMP_TYPE,
      "$.adapters.compression.rank");
  bad(", \"compression\": {\"bundle\": \"x.json\", \"rank\": 8}", NULL, NULL,
      LSIM_E_CMP_SERVE_CONFLICT, "$.adapters.compression.rank");
  bad(", \"compression\": {\"bundle\": \"no-such-bundle.json\"}", NULL, NULL,
      LSIM_E_CMP_BUNDLE, "$.adapters.compression.bundle");
  bad(", \"compression\": {\"method\": \"jd_full\", \"rank\": 8, "
      "\"clusters\": 2}", "\"max_batch_requests\": 48",
      "\"max_batch_requests\": 48, \"tp_degree\": 2",
      LSIM_E_CMP_SERVE_CONFLICT, P);
  bad("", "\"load_failure_rate\": 0.02", "\"stale_basis_rate\": 0.1",
      LSIM_E_CMP_SERVE_CONFLICT, "$.faults.stale_basis_rate");
  /* a basis of rank 1024 needs more than the 768-page pool */
  bad(", \"compression\": {\"method\": \"jd_full\", \"rank\": 1024, "
      "\"clusters\": 2}", NULL, NULL, LSIM_E_CMP_SERVE_CAPACITY,
      "$.adapters.compression.rank");
}

/* ---- the CLI: a bundle from `lorasim compress`, served --------------------- */

static void write_scenario(const char *name, int count, const char *comp) {
  char path[400];
  snprintf(path, sizeof path, "%s/%s", tmpdir, name);
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  fprintf(f,
          "{\"name\": \"b\", \"seed\": 5, \"ns_per_tick\": 1000,\n"
          " \"workers\": {\"count\": 1, \"pool_pages\": 200, \"page_bytes\": "
          "4096, \"h2d_gbps\": 25, \"load_fixed_us\": 200,\n"
          "   \"max_batch_tokens\": 4096, \"max_batch_requests\": 8},\n"
          " \"model\": {\"layers\": 2, \"kv_heads\": 1, \"head_dim\": 8, "
          "\"dtype_bytes\": 2,\n"
          "   \"targets\": [{\"name\": \"q_proj\", \"d_in\": 32, \"d_out\": "
          "32}]},\n"
          " \"cost\": {\"iter_fixed_ns\": 4000000, \"prefill_token_ns\": "
          "60000, \"decode_token_ns\": 120000, \"segment_ns\": 15000, "
          "\"rank_row_ps\": 2000},\n"
          " \"adapters\": {\"count\": %d, \"ranks\": [{\"rank\": 4, "
          "\"weight\": 1}]%s},\n"
          " \"tenants\": [{\"name\": \"t\", \"traffic_weight\": 1}],\n"
          " \"trace\": {\"generator\": {\"requests\": 60, \"rate_per_s\": 8,\n"
          "   \"prompt_tokens\": {\"dist\": \"uniform\", \"min\": 16, "
          "\"max\": 64},\n"
          "   \"output_tokens\": {\"dist\": \"uniform\", \"min\": 4, \"max\": "
          "16}}}}\n",
          count, comp);
  fclose(f);
}

Test(cli, bundle_served_by_replay, .init = mk_tmp, .fini = rm_tmp) {
  cr_assert_eq(lorasim("compress --synthetic 8 --d-in 32 --d-out 32 "
                       "--src-rank 4 --planted 4 --groups 2 --noise 0.01 "
                       "--rank 4 --clusters 2 --out bundle.json"),
               0, "%s", out);
  write_scenario("c.json", 8,
                 ", \"compression\": {\"bundle\": \"bundle.json\"}");
  write_scenario("p.json", 8, "");
  cr_assert_eq(lorasim("replay c.json --db c.db"), 0, "%s", out);
  cr_assert_not_null(strstr(out, "compressed  bundle"), "%s", out);
  cr_assert_not_null(strstr(out, "not measured"), "%s", out);
  cr_assert_not_null(strstr(out, "60 completed"), "%s", out);
  long long res_c, cp_c, res_p, cp_p;
  const char *b = strstr(out, "  bytes ");
  cr_assert_not_null(b);
  cr_assert_eq(sscanf(b, "  bytes %lld resident at peak, %lld copied", &res_c,
                      &cp_c), 2);
  cr_assert_eq(lorasim("replay p.json --db p.db"), 0, "%s", out);
  b = strstr(out, "  bytes ");
  cr_assert_not_null(b);
  cr_assert_eq(sscanf(b, "  bytes %lld resident at peak, %lld copied", &res_p,
                      &cp_p), 2);
  cr_assert_lt(res_c, res_p);
  cr_assert_lt(cp_c, cp_p);
  /* a bundle of 8 sources for 9 adapters: refused, nothing written */
  write_scenario("m.json", 9,
                 ", \"compression\": {\"bundle\": \"bundle.json\"}");
  cr_assert_eq(lorasim("replay m.json --db m.db"), 2, "%s", out);
  cr_assert_not_null(strstr(out, "E_CMP_SERVE_MISMATCH"), "%s", out);
  cr_assert_not_null(strstr(out, "$.adapters.compression.bundle"), "%s", out);
  char path[400];
  snprintf(path, sizeof path, "%s/m.db", tmpdir);
  cr_assert_null(fopen(path, "r"), "no database for bad input");
}
