/* Adapter-aware scheduling (article 0x09-0x09N): the predicate snapshot,
** the teaching rules (PetS, Punica, S-LoRA prefetch and early abort), the
** six-tick starvation witness under resident_greedy and deficit_aging, the
** event-ledger fixture, the failed-load recovery, and one test per failure
** of the article's failure lab.  Exact tables, no tolerances. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "engine/engine.h"
#include "testsupport/lab.h"
#include "engine/policy/policy.h"

/* ---- a hand-driven engine (one worker, unit-tick world) ------------------- */

#include "sched_driver.h"
}

Test(sched, witness_resident_greedy_load_starves_b) {
  static drv d;
  drv_init(&d, "resident_greedy", "none", 64, 1);
  witness(&d);
  const int64_t want[6] = {0, 1, 2, 3, 4, 5};
  for (int k = 0; k < 6; k++)
    cr_assert_eq(d.sel[T0 + k], want[k], "tick %d ran %lld", k,
                 (long long)d.sel[T0 + k]);
  cr_assert_eq(d.svc[HOT], 6);
  cr_assert_eq(d.svc[COLD], 0);
  /* B never published; LoadStarved(B) over the whole window */
  cr_assert_eq(count_kind(&d, LSIM_EV_ADAPTER_GENERATION_PUBLISHED, NULL), 0);
  cr_assert_eq(count_kind(&d, LSIM_EV_ADAPTER_LOAD_STARTED, NULL), 0);
  int load = 0, service = 0;
  for (int i = 0; i < d.niv; i++) {
    if (!strcmp(d.iv[i].kind, "load")) {
      load++;
      cr_assert_eq(d.iv[i].entity, AD_B);
      cr_assert_eq(d.iv[i].start, T0);
      cr_assert_eq(d.iv[i].end, T0 + 6);
      cr_assert_str_eq(d.iv[i].closed_by, "open");
    } else {
      service++;
    }
  }
  cr_assert_eq(load, 1);
  /* not a service-starvation case: B never became execution-ready */
  cr_assert_eq(service, 0);
  drv_free(&d);
}

Test(sched, witness_deficit_aging_prefetches_b_and_runs_c0_at_tick_3) {
  static drv d;
  drv_init(&d, "deficit_aging", "age_triggered", 64, 1);
  witness(&d);
  const int64_t want[6] = {0, 1, 2, 100, 3, 4};
  for (int k = 0; k < 6; k++)
    cr_assert_eq(d.sel[T0 + k], want[k], "tick %d ran %lld", k,
                 (long long)d.sel[T0 + k]);
  cr_assert_eq(d.svc[HOT], 5);
  cr_assert_eq(d.svc[COLD], 1);
  const lsim_event *pf = first_kind(&d, LSIM_EV_PREFETCH_RESERVED);
  cr_assert_not_null(pf);
  cr_assert_eq(pf->tick, T0 + 2);
  cr_assert_eq(pf->adapter, AD_B);
  const lsim_event *pub = first_kind(&d, LSIM_EV_ADAPTER_GENERATION_PUBLISHED);
  cr_assert_not_null(pub);
  cr_assert_eq(pub->tick, T0 + 3);
  cr_assert_eq(pub->adapter, AD_B);
  /* the prefetched generation was used by c0 */
  cr_assert_eq(count_kind(&d, LSIM_EV_PREFETCH_RELEASED, "used"), 1);
  cr_assert_eq(count_kind(&d, LSIM_EV_PREFETCH_RELEASED, "wasted"), 0);
  /* no starved adapter or tenant: B's load interval closed by publication
  ** after 3 ticks; every service interval closed by service */
  for (int i = 0; i < d.niv; i++) {
    cr_assert_str_neq(d.iv[i].closed_by, "open");
    if (!strcmp(d.iv[i].kind, "load")) {
      cr_assert_eq(d.iv[i].entity, AD_B);
      cr_assert_eq(d.iv[i].start, T0);
      cr_assert_eq(d.iv[i].end, T0 + 3);
      cr_assert_str_eq(d.iv[i].closed_by, "published");
    }
  }
  drv_free(&d);
}

/* ---- 0x09K: the event-ledger fixture --------------------------------------- */

Test(sched, event_ledger_fixture) {
  static drv d;
  drv_init(&d, "deficit_aging", "age_triggered", 64, 1);
  warm_up(&d);
  /* h0 (resident A) and c0 (cold B) at tick 0; h0's iteration takes two
  ** ticks, so B's load starts at tick 2 and c0 runs at tick 3 */
  lsim_tick arr[2] = {T0, T0};
  for (lsim_tick k = 0; k <= 4; k++) {
    lsim_tick t = T0 + k;
    completions(&d, t, 0);
    if (k == 0) {
      arrive(&d, t, 0, HOT, AD_A);
      arrive(&d, t, 100, COLD, AD_B);
    }
    step(&d, t, k == 0 ? 2 : 1);
  }
  cr_assert_eq(count_kind(&d, LSIM_EV_QUEUE_ENQUEUED, NULL), 2);
  cr_assert_eq(count_kind(&d, LSIM_EV_ADAPTER_LOAD_STARTED, NULL), 1);
  cr_assert_eq(count_kind(&d, LSIM_EV_ITERATION_SELECTED, NULL), 2);
  cr_assert_eq(count_kind(&d, LSIM_EV_ITERATION_COMPLETED, NULL), 2);
  cr_assert_eq(count_kind(&d, LSIM_EV_COMPLETED_SERVICE_DEBITED, NULL), 2);
  /* load-B-1 latency: started -> published */
  const lsim_event *st = first_kind(&d, LSIM_EV_ADAPTER_LOAD_STARTED);
  const lsim_event *pub = first_kind(&d, LSIM_EV_ADAPTER_GENERATION_PUBLISHED);
  cr_assert_eq(st->attempt, 1);
  cr_assert_eq(pub->tick - st->tick, 1);
  /* completed queue waits {h0: 0, c0: 3} */
  lsim_tick h0 = -1, c0 = -1;
  for (int k = 0; k <= 4; k++) {
    if (d.sel[T0 + k] == 0 && h0 < 0)
      h0 = T0 + k - arr[0];
    if (d.sel[T0 + k] == 100 && c0 < 0)
      c0 = T0 + k - arr[1];
  }
  cr_assert_eq(h0, 0);
  cr_assert_eq(c0, 3);
  /* tenant-class service {resident: 1, cold: 1}; adapter-class projection
  ** {resident: 1, cold-loaded: 1} from the enqueue hit/miss of each debit */
  cr_assert_eq(d.svc[HOT], 1);
  cr_assert_eq(d.svc[COLD], 1);
  int64_t resident = 0, cold_loaded = 0;
  for (int i = 0; i < d.nev; i++) {
    if (d.ev[i].kind != LSIM_EV_COMPLETED_SERVICE_DEBITED)
      continue;
    int hit = -1;
    for (int j = 0; j < d.nev; j++)
      if (d.ev[j].kind == LSIM_EV_QUEUE_ENQUEUED &&
          d.ev[j].request == d.ev[i].request)
        hit = (int)d.ev[j].value;
    cr_assert_geq(hit, 0);
    *(hit ? &resident : &cold_loaded) += d.ev[i].value;
  }
  cr_assert_eq(resident, 1);
  cr_assert_eq(cold_loaded, 1);
  drv_free(&d);
}

/* ---- 0x09L: recovery is a transaction ---------------------------------------- */

Test(sched, failed_load_restores_pages_and_keeps_arrival) {
  static drv d;
  /* eight free pages; the load txn reserves 2 adapter + 1 KV = 3 */
  drv_init(&d, "fcfs", "none", 8, 1);
  d.copy_ticks = 1;
  d.fail_loads = 1;
  lsim_worker_view v;
  arrive(&d, 0, 7, COLD, AD_B); /* d0 */
  step(&d, 0, 1);
  lsim_engine_worker_view(d.e, 0, &v);
  cr_assert_eq(v.free_pages, 5);
  completions(&d, 1, 1); /* load-D-1 fails: rolled back */
  lsim_engine_worker_view(d.e, 0, &v);
  cr_assert_eq(v.free_pages, 8);
  cr_assert_eq(v.reserved_pages, 0);
  cr_assert_eq(count_kind(&d, LSIM_EV_COMPLETED_SERVICE_DEBITED, NULL), 0);
  d.copy_ticks = 0; /* the retry (after backoff) publishes at once */
  step(&d, 3, 1);
  lsim_engine_worker_view(d.e, 0, &v);
  cr_assert_eq(v.free_pages, 5);
  completions(&d, 3, 1);
  step(&d, 3, 1);
  cr_assert_eq(d.sel[3], 7);
  completions(&d, 4, 1);
  /* two attempts, two ids; the failed one published nothing */
  int att[2], na = 0;
  for (int i = 0; i < d.nev; i++)
    if (d.ev[i].kind == LSIM_EV_ADAPTER_LOAD_STARTED && na < 2)
      att[na++] = d.ev[i].attempt;
  cr_assert_eq(na, 2);
  cr_assert_eq(att[0], 1);
  cr_assert_eq(att[1], 2);
  cr_assert_eq(count_kind(&d, LSIM_EV_ADAPTER_LOAD_FAILED, NULL), 1);
  cr_assert_eq(count_kind(&d, LSIM_EV_ADAPTER_GENERATION_PUBLISHED, NULL), 1);
  const lsim_event *pub = first_kind(&d, LSIM_EV_ADAPTER_GENERATION_PUBLISHED);
  cr_assert_eq(pub->tick, 3);
  /* the failed attempt burned generation 1 (its load_failed row names
  ** it), so the retry publishes generation 2, as the article's ledger */
  const lsim_event *fail = first_kind(&d, LSIM_EV_ADAPTER_LOAD_FAILED);
  cr_assert_eq(fail->generation, 1);
  cr_assert_eq(pub->generation, 2);
  cr_assert_eq(pub->attempt, 0);
  /* service debited once, arrival never reset */
  cr_assert_eq(count_kind(&d, LSIM_EV_COMPLETED_SERVICE_DEBITED, NULL), 1);
  cr_assert_eq(d.svc[COLD], 1);
  const lsim_event *enq = first_kind(&d, LSIM_EV_QUEUE_ENQUEUED);
  cr_assert_eq(enq->tick, 0);
  const lsim_event *fin = first_kind(&d, LSIM_EV_REQUEST_FINISHED);
  cr_assert_not_null(fin);
  cr_assert_eq(fin->tick, 4);
  /* ownership closed: only the resident adapter's pages are held */
  lsim_engine_worker_view(d.e, 0, &v);
  cr_assert_eq(v.kv_pages, 0);
  cr_assert_eq(v.reserved_pages, 0);
  cr_assert_eq(v.free_pages + v.adapter_pages, 8);
  drv_free(&d);
}

/* ---- 0x09B / 0x09G: the feasibility snapshot ------------------------------- */

enum { R_HOT, R_COLD, R_PEER, R_STALE, R_RANK, NSNAP };

static void snapshot(lsim_pred_req *r, lsim_pred_slot *s, lsim_pred_worker *w) {
  *w = (lsim_pred_worker){.base_abi = 1, .targets = 0xF, .max_rank = 16,
                          .layouts = 1, .free_pages = 100};
  /* adapters: A = 0 (resident gen 7), B = 1 (cold, catalog gen 3), C = 2
  ** (resident gen 5, shares basis 0 with A but is its own artifact) */
  const lsim_pred_slot sa = {LSIM_PSLOT_RESIDENT, 7, 1};
  const lsim_pred_slot sb = {LSIM_PSLOT_COLD, 0, 0};
  const lsim_pred_slot sc = {LSIM_PSLOT_RESIDENT, 5, 1};
  lsim_pred_req base = {.base_abi = 1, .targets = 0x3, .rank = 8,
                        .layout = 0, .adapter_pages = 4, .kv_pages = 2,
                        .arrival = 0, .tokens = 1};
  for (int i = 0; i < NSNAP; i++)
    r[i] = base;
  r[R_HOT].id = 1, r[R_HOT].tenant = 0, r[R_HOT].adapter = 0;
  r[R_HOT].gen = r[R_HOT].lease_gen = 7, s[R_HOT] = sa;
  r[R_COLD].id = 2, r[R_COLD].tenant = 2, r[R_COLD].adapter = 1;
  r[R_COLD].gen = r[R_COLD].lease_gen = 3, s[R_COLD] = sb;
  r[R_PEER].id = 3, r[R_PEER].tenant = 1, r[R_PEER].adapter = 2;
  r[R_PEER].gen = r[R_PEER].lease_gen = 5, s[R_PEER] = sc;
  /* asks for generation 6; its lease binds the catalog's 7 */
  r[R_STALE].id = 4, r[R_STALE].tenant = 3, r[R_STALE].adapter = 0;
  r[R_STALE].gen = 6, r[R_STALE].lease_gen = 7, s[R_STALE] = sa;
  r[R_RANK].id = 5, r[R_RANK].tenant = 3, r[R_RANK].adapter = 2;
  r[R_RANK].gen = r[R_RANK].lease_gen = 5, r[R_RANK].rank = 32;
  s[R_RANK] = sc;
}

Test(sched, snapshot_feasible_ready_selected) {
  lsim_pred_req r[NSNAP];
  lsim_pred_slot s[NSNAP];
  lsim_pred_worker w;
  snapshot(r, s, &w);
  int64_t service[4] = {3, 1, 0, 0}; /* r_hot's tenant 3, r_peer's 1 */
  int f[NSNAP], rd[NSNAP], sel[NSNAP], nf, nr, ns;
  lsim_pred_select(r, s, NSNAP, &w, service, NULL, 0, 64, 1, f, &nf, rd, &nr,
                   sel, &ns);
  cr_assert_eq(nf, 3);
  cr_assert_eq(f[0], R_HOT);
  cr_assert_eq(f[1], R_COLD);
  cr_assert_eq(f[2], R_PEER);
  cr_assert_eq(nr, 2);
  cr_assert_eq(rd[0], R_HOT);
  cr_assert_eq(rd[1], R_PEER);
  cr_assert_eq(ns, 1);
  cr_assert_eq(sel[0], R_PEER);
  /* each predicate alone */
  cr_assert(lsim_pred_feasible(&r[R_COLD], &w, &s[R_COLD]));
  cr_assert_not(lsim_pred_ready(&r[R_COLD], &w, &s[R_COLD]));
  cr_assert_not(lsim_pred_feasible(&r[R_STALE], &w, &s[R_STALE]));
  cr_assert_not(lsim_pred_feasible(&r[R_RANK], &w, &s[R_RANK]));
  cr_assert_not(lsim_pred_eligible(&r[R_HOT], &w, &s[R_HOT], 0, 1));
}

/* failure lab: "affinity overriding a failed predicate" */
Test(sched, no_bonus_makes_a_failed_predicate_selectable) {
  lsim_pred_req r[NSNAP];
  lsim_pred_slot s[NSNAP];
  lsim_pred_worker w;
  snapshot(r, s, &w);
  r[R_COLD].affinity_bonus = INT64_MAX;
  r[R_STALE].affinity_bonus = INT64_MAX;
  r[R_RANK].affinity_bonus = INT64_MAX;
  int64_t service[4] = {0, 0, 0, 0};
  int sel[NSNAP], ns;
  lsim_pred_select(r, s, NSNAP, &w, service, NULL, 0, 64, NSNAP, NULL, NULL,
                   NULL, NULL, sel, &ns);
  cr_assert_eq(ns, 2);
  for (int i = 0; i < ns; i++)
    cr_assert(sel[i] == R_HOT || sel[i] == R_PEER);
}

/* failure lab: "stale adapter pointer executes" -- a resident slot with the
** wrong generation is neither ready nor a hit; a retiring slot stays ready
** only for a request that holds a lease on it */
Test(sched, readiness_is_the_published_generation_and_the_lease) {
  lsim_pred_worker w = {1, 0xF, 16, 1, 100};
  lsim_pred_req r = {.id = 1, .base_abi = 1, .targets = 1, .rank = 8,
                     .gen = 8, .lease_gen = 8, .kv_pages = 1, .tokens = 1};
  lsim_pred_slot wrong = {LSIM_PSLOT_RESIDENT, 9, 1};
  cr_assert_not(lsim_pred_ready(&r, &w, &wrong));
  lsim_pred_slot retiring = {LSIM_PSLOT_RETIRING, 8, 1};
  cr_assert_not(lsim_pred_ready(&r, &w, &retiring));
  r.holds_lease = 1;
  cr_assert(lsim_pred_ready(&r, &w, &retiring));
  lsim_pred_slot copying = {LSIM_PSLOT_RESIDENT, 8, 0};
  cr_assert_not(lsim_pred_ready(&r, &w, &copying));
}

/* ---- 0x09D: PetS two-stage batching ------------------------------------------ */

/* Teaching cost tables of our own, chosen so that the article's optimal
** partitions and costs (16, 6, 19) come out; the article gives outcomes,
** not tables. */
static int64_t beta_a(void *ud, int n, int l) {
  (void)ud;
  if (n == 1)
    return l == 2 ? 5 : l == 4 ? 6 : 9;
  if (n == 2)
    return l == 4 ? 7 : 12;
  return 18;
}
static int64_t beta_b(void *ud, int n, int l) {
  (void)ud;
  (void)l;
  return n == 1 ? 4 : 6;
}
/* alpha over mini-batches: ud carries their sizes, size = mini-batches */
typedef struct mb {
  const int *n;
} mb;
static int64_t alpha_tab(void *ud, int count, int maxlen) {
  (void)ud;
  (void)count;
  (void)maxlen;
  return 0;
}

typedef struct actx {
  const int *nsz; /* requests in each sorted mini-batch */
  int upto;
} actx;
static actx g_actx;
static int64_t alpha_seq(void *ud, int count, int maxlen) {
  (void)ud;
  /* the group is mini-batches [upto-count, upto) of the current prefix;
  ** the DP asks with lens[i-1] = maxlen, so recover N from maxlen's index */
  static const int maxes[3] = {3, 4, 8};
  int end = 0;
  while (maxes[end] != maxlen)
    end++;
  int N = 0;
  for (int k = end - count + 1; k <= end; k++)
    N += g_actx.nsz[k];
  if (N == 2 && maxlen == 3)
    return 6;
  if (N == 2 && maxlen == 4)
    return 7;
  if (N == 4 && maxlen == 4)
    return 10;
  if (N == 1 && maxlen == 8)
    return 9;
  if (N == 3 && maxlen == 8)
    return 14;
  return 21; /* N == 5, L == 8 */
}

Test(sched, pets_bellman_tables) {
  (void)alpha_tab;
  int ends[8];
  int64_t cost;
  const int la[3] = {2, 4, 8};
  int k = lsim_pets_partition(la, 3, beta_a, NULL, ends, &cost);
  cr_assert_eq(k, 2);
  cr_assert_eq(ends[0], 2); /* [a0, a1] */
  cr_assert_eq(ends[1], 3); /* [a2] */
  cr_assert_eq(cost, 16);
  const int lb[2] = {3, 3};
  k = lsim_pets_partition(lb, 2, beta_b, NULL, ends, &cost);
  cr_assert_eq(k, 1);
  cr_assert_eq(ends[0], 2);
  cr_assert_eq(cost, 6);
  /* macro stage over mini-batches sorted by max length:
  ** [B.mb0 (2 req, max 3), A.mb0 (2, max 4), A.mb1 (1, max 8)] */
  const int nsz[3] = {2, 2, 1};
  const int mx[3] = {3, 4, 8};
  g_actx.nsz = nsz;
  k = lsim_pets_partition(mx, 3, alpha_seq, NULL, ends, &cost);
  cr_assert_eq(k, 2);
  cr_assert_eq(ends[0], 2); /* [B.mb0, A.mb0] */
  cr_assert_eq(ends[1], 3); /* [A.mb1] */
  cr_assert_eq(cost, 19);
}

/* ---- 0x09E: Punica placement toy ----------------------------------------------- */

Test(sched, punica_placement_filters_kv_and_breaks_ties_by_id) {
  const int ws[3] = {8, 12, 8};
  const int64_t kv[3] = {100, 5, 20};
  cr_assert_eq(lsim_place_punica(ws, kv, 3, 1000, 8), 2);
  /* gpu-1 has the largest working set but not the K/V */
  cr_assert_eq(lsim_place_punica(ws, kv, 3, 1000, 200), -1);
  cr_assert_eq(lsim_placement_find("punica_consolidate"), LSIM_PLACE_PUNICA);
  cr_assert_eq(lsim_placement_find("nope"), -1);
  /* affinity: deterministic and within range */
  for (int a = 0; a < 100; a++) {
    int b = lsim_place_jump_hash((uint64_t)a, 4);
    cr_assert(b >= 0 && b < 4);
    cr_assert_eq(b, lsim_place_jump_hash((uint64_t)a, 4));
  }
}

/* ---- 0x09F: S-LoRA prefetch and early abort toys ---------------------------- */

Test(sched, slora_queue_prefetch_first_fit) {
  const lsim_prefetch_ops *o = lsim_prefetch_find("queue_lookahead");
  cr_assert_not_null(o);
  /* waiting [B, B, C, D]: the view lists distinct cold adapters */
  const lsim_prefetch_cand c[3] = {{1, 3, 0, 2}, {2, 4, 1, 1}, {3, 2, 2, 1}};
  lsim_prefetch_view v = {0, c, 3, 6};
  int out[4];
  int n = lsim_prefetch_propose(o, NULL, 10, &v, out, 4);
  cr_assert_eq(n, 2);
  cr_assert_eq(out[0], 1); /* B */
  cr_assert_eq(out[1], 3); /* D: 5 of 6 pages */
}

Test(sched, slora_early_abort_newest_under_overload) {
  const lsim_tick arr[4] = {0, 4, 6, 8};
  int out[4];
  /* t_now 10, prefill 2, budget 10: q0 cannot make it */
  int n = lsim_slora_abort_choice(10, 2, 10, arr, 4, 2, 5.0, 2.0, out);
  cr_assert_eq(n, 2);
  cr_assert_eq(out[0], 3);
  cr_assert_eq(out[1], 2);
  /* no overload: the earliest serviceable */
  n = lsim_slora_abort_choice(10, 2, 10, arr, 4, 2, 1.0, 2.0, out);
  cr_assert_eq(n, 2);
  cr_assert_eq(out[0], 1);
  cr_assert_eq(out[1], 2);
}

/* ---- failure lab ------------------------------------------------------------ */

/* "fairness counters increase on failed kernels": a failed iteration
** debits nothing, so the policy's ledger does not move */
Test(sched, failed_iteration_debits_no_service) {
  static drv d;
  drv_init(&d, "deficit_aging", "none", 64, 1);
  arrive(&d, 0, 1, HOT, AD_A);
  step(&d, 0, 1);
  completions(&d, 1, 1);
  step(&d, 1, 1);
  cr_assert(d.busy);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_engine_iter_done(d.e, 0, 2, 0, &eb), 0, "%s", eb.msg);
  d.busy = 0;
  cr_assert_eq(count_kind(&d, LSIM_EV_ITERATION_SELECTED, NULL), 1);
  cr_assert_eq(count_kind(&d, LSIM_EV_COMPLETED_SERVICE_DEBITED, NULL), 0);
  cr_assert_eq(d.svc[HOT], 0);
  drv_free(&d);
}

/* "prefetch and K/V reading one free counter": a prefetch never takes
** pages that admitted KV holds, and the joint pool stays conserved */
Test(sched, prefetch_draws_from_the_joint_ledger) {
  static drv d;
  /* pool 5: A (2 pages) + h0's KV (1) leave 2 free; B needs 2 */
  drv_init(&d, "fcfs", "queue_lookahead", 5, 4);
  arrive(&d, 0, 1, HOT, AD_A);
  step(&d, 0, 1);
  completions(&d, 1, 1);
  step(&d, 1, 1); /* h0 admitted: 3 of 5 pages held */
  lsim_worker_view v;
  lsim_engine_worker_view(d.e, 0, &v);
  cr_assert_eq(v.free_pages, 2);
  cr_assert(lsim_engine_check(d.e));
  drv_free(&d);
}

/* "load latency absent from TTFT": the cold request's wait includes its
** load; its arrival is the queue arrival */
Test(sched, cold_wait_counts_from_queue_arrival) {
  static drv d;
  drv_init(&d, "deficit_aging", "age_triggered", 64, 1);
  witness(&d);
  for (int i = 0; i < d.nev; i++)
    if (d.ev[i].kind == LSIM_EV_COMPLETED_SERVICE_DEBITED &&
        d.ev[i].request == 100)
      cr_assert_eq(d.ev[i].tick - T0, 4); /* first token 4 ticks after */
  drv_free(&d);
}

/* "success rate looks high during overload": early abort is an explicit
** rejection with its own reason, so offered = served + rejected + rest */
Test(sched, early_abort_is_an_explicit_rejection) {
  static drv d;
  memset(&d, 0, sizeof d);
  for (int i = 0; i < 64; i++)
    d.sel[i] = -1;
  d.copy_ticks = 1;
  lsim_engine_cfg cfg = {
      .workers = 1, .pool_pages = 64, .page_bytes = 4096,
      .max_batch_tokens = 64, .max_batch_requests = 1,
      .kv_bytes_per_token = 1, .max_load_attempts = 4, .ntenants = 3,
      .nadapters = 2, .adapter_rank = rank_, .adapter_bytes = bytes_,
      .adapter_pages = pages_, .sched = lsim_sched_find("fcfs"),
      .evict = lsim_evict_find("lru"), .prefetch = lsim_prefetch_find("none"),
      .sink = {on_ev, NULL, &d, on_iv}, .abort_ticks = 2};
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_engine_new(&d.e, &cfg, &eb), 0, "%s", eb.msg);
  lsim_plan_reset(&d.plan);
  /* A resident; then one request per tick, each needing 3 ticks */
  for (lsim_tick t = 0; t < 12; t++) {
    completions(&d, t, 3);
    if (t < 6)
      arrive(&d, t, t, HOT, AD_A);
    step(&d, t, 3);
  }
  int rej = count_kind(&d, LSIM_EV_ADMISSION_REJECTED, "early_abort");
  int done = count_kind(&d, LSIM_EV_REQUEST_FINISHED, NULL);
  cr_assert_gt(rej, 0);
  cr_assert_eq(count_kind(&d, LSIM_EV_QUEUE_ENQUEUED, NULL), 6);
  cr_assert_leq(done + rej, 6);
  drv_free(&d);
}
