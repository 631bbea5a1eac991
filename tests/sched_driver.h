/*
** sched_driver.h: a hand-driven engine (one worker, unit-tick world) for
** the scheduler tests (test_sched.c) and the typed-failure index
** (test_typed_failures.c): a recording sink, arrivals, steps,
** completions, and the article's six-tick starvation witness.
** Functions are static inline so a suite may use any subset of them.
*/
#ifndef LSIM_TEST_SCHED_DRIVER_H
#define LSIM_TEST_SCHED_DRIVER_H
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "engine/engine.h"
#include "testsupport/lab.h"
#include "engine/policy/policy.h"

#define MAXEV 512
#define MAXIV 32

typedef struct drv {
  lsim_engine *e;
  lsim_event ev[MAXEV];
  int nev;
  lsim_interval iv[MAXIV];
  int niv;
  lsim_plan plan;
  int busy;
  lsim_tick iter_end;
  lsim_load_start load[8];
  lsim_tick load_end[8];
  int nload;
  int64_t sel[64]; /* request selected at each tick (-1: none) */
  int64_t svc[4];  /* completed service per tenant */
  int fail_loads;  /* copies that fail, counted down */
  int copy_ticks;
} drv;

static inline lsim_err on_ev(void *ud, const lsim_event *ev) {
  drv *d = ud;
  cr_assert_lt(d->nev, MAXEV);
  d->ev[d->nev++] = *ev;
  if (ev->kind == LSIM_EV_COMPLETED_SERVICE_DEBITED)
    d->svc[ev->tenant] += ev->value;
  return 0;
}

static inline lsim_err on_iv(void *ud, const lsim_interval *iv) {
  drv *d = ud;
  cr_assert_lt(d->niv, MAXIV);
  d->iv[d->niv++] = *iv;
  return 0;
}

static int rank_[2] = {8, 8};
static int64_t bytes_[2] = {4096, 4096};
static int64_t pages_[2] = {2, 2};

static inline void drv_init(drv *d, const char *sched, const char *prefetch,
                     int64_t pool, int max_req) {
  memset(d, 0, sizeof *d);
  for (int i = 0; i < 64; i++)
    d->sel[i] = -1;
  d->copy_ticks = 1;
  lsim_engine_cfg cfg = {
      .workers = 1,
      .pool_pages = pool,
      .page_bytes = 4096,
      .max_batch_tokens = 64,
      .max_batch_requests = max_req,
      .kv_bytes_per_token = 1,
      .max_load_attempts = 4,
      .ntenants = 3,
      .nadapters = 2,
      .adapter_rank = rank_,
      .adapter_bytes = bytes_,
      .adapter_pages = pages_,
      .guard_pages = 0,
      .sched = lsim_sched_find(sched),
      .evict = lsim_evict_find("lru"),
      .prefetch = lsim_prefetch_find(prefetch),
      .sink = {on_ev, NULL, d, on_iv},
      .sched_params = {.w_in = 1, .w_out = 1, .age_ticks = 2,
                       .cluster_window = 4},
  };
  cr_assert_not_null(cfg.sched);
  cr_assert_not_null(cfg.prefetch);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_engine_new(&d->e, &cfg, &eb), 0, "%s", eb.msg);
  lsim_plan_reset(&d->plan);
}

static inline void drv_free(drv *d) {
  cr_assert(lsim_engine_check(d->e));
  lsim_engine_release(d->e);
  lsim_plan_release(&d->plan);
}

static inline void arrive(drv *d, lsim_tick t, int64_t id, int tenant, int adapter) {
  lsim_arrival a = {id, tenant, adapter, 1, 1};
  int w;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_engine_arrive(d->e, t, &a, &w, &eb), 0, "%s", eb.msg);
}

/* completions due at t (copies, then the iteration) */
static inline void completions(drv *d, lsim_tick t, int iter_ticks) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  for (int i = 0; i < d->nload; i++)
    if (d->load_end[i] == t) {
      int ok = d->fail_loads > 0 ? (d->fail_loads--, 0) : 1;
      cr_assert_eq(lsim_engine_load_done(d->e, 0, d->load[i].adapter, t, ok,
                                         &eb),
                   0, "%s", eb.msg);
      d->load_end[i] = -1;
    }
  if (d->busy && d->iter_end == t) {
    cr_assert_eq(lsim_engine_iter_done(d->e, 0, t, 1, &eb), 0, "%s", eb.msg);
    d->busy = 0;
  }
  (void)iter_ticks;
}

static inline void step(drv *d, lsim_tick t, int iter_ticks) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_load_start ls[4];
  int nl = 0, sel = 0;
  cr_assert_eq(lsim_engine_step(d->e, 0, t, ls, 4, &nl, &d->plan, &sel, &eb),
               0, "%s", eb.msg);
  for (int i = 0; i < nl; i++) {
    d->load[d->nload] = ls[i];
    d->load_end[d->nload++] = t + d->copy_ticks;
  }
  if (sel) {
    d->busy = 1;
    d->iter_end = t + iter_ticks;
    d->sel[t] = d->plan.e[0].request;
  }
}

static inline int count_kind(const drv *d, int kind, const char *detail) {
  int n = 0;
  for (int i = 0; i < d->nev; i++)
    if (d->ev[i].kind == kind &&
        (!detail || (d->ev[i].detail && !strcmp(d->ev[i].detail, detail))))
      n++;
  return n;
}

static inline const lsim_event *first_kind(const drv *d, int kind) {
  for (int i = 0; i < d->nev; i++)
    if (d->ev[i].kind == kind)
      return &d->ev[i];
  return NULL;
}

/* ---- 0x09I: the six-tick starvation witness -------------------------------- */

enum { HOT = 0, COLD = 1, WARM = 2 };
enum { AD_A = 0, AD_B = 1 };
#define T0 10 /* the witness starts once A is resident */

/* Make A resident before the witness: a warm-up request of a third tenant. */
static inline void warm_up(drv *d) {
  arrive(d, 0, 1000, WARM, AD_A);
  for (lsim_tick t = 0; t < T0; t++) {
    completions(d, t, 1);
    step(d, t, 1);
  }
  cr_assert_eq(d->svc[WARM], 1);
  d->nev = 0;
  d->niv = 0;
}

static inline void witness(drv *d) {
  warm_up(d);
  for (lsim_tick k = 0; k <= 6; k++) {
    lsim_tick t = T0 + k;
    completions(d, t, 1);
    if (k == 6)
      break; /* the six ticks are over: completions only */
    arrive(d, t, k, HOT, AD_A); /* h_k */
    if (k == 0)
      arrive(d, t, 100, COLD, AD_B); /* c0 */
    step(d, t, 1);
  }
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_engine_finish(d->e, T0 + 6, &eb), 0, "%s", eb.msg);

#endif /* LSIM_TEST_SCHED_DRIVER_H */
