/* The positions of plan entries (engine/plan.h: ctx, sample, kv): what a
** backend that runs the whole forward pass reads to place each row in its
** request's sequence and KV pages.  A hand-driven engine (one worker, unit
** ticks) runs requests through chunked prefill, incremental KV with
** preemption by recompute, and full-prompt admission; the test follows
** every request across iterations and checks, entry by entry:
**   - the rows continue where the KV cache ends (ctx == tokens the request
**     has in KV), and a recompute after a preemption starts over at 0
**   - a decode row has ctx = prompt + produced - 1 and samples
**   - exactly one sampled row per output token
**   - the KV object the entry names holds pages for ctx + rows tokens
**     (counted from the residency's kv hook, the pages a backend sees). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/policy/policy.h"

#define NREQ 24
#define MAXKV 4096
#define PAGE_BYTES 64
#define KVB 16 /* bytes per token: 4 tokens a page */

typedef struct world {
  lsim_engine *e;
  lsim_plan plan;
  int64_t kvpages[MAXKV]; /* pages held per KV object handle */
  int preempted[NREQ];    /* a preemption since the request's last row */
  int64_t intkv[NREQ];    /* tokens the request has in its KV cache */
  int produced[NREQ], prompt[NREQ], output[NREQ], finished[NREQ];
  int preemptions, chunks, decodes, recomputes;
} world;

static lsim_err on_ev(void *ud, const lsim_event *ev) {
  world *w = ud;
  if (ev->kind == LSIM_EV_REQUEST_PREEMPTED && ev->request >= 0 &&
      ev->request < NREQ) {
    w->preempted[ev->request] = 1;
    w->preemptions++;
  }
  return 0;
}

static lsim_err on_iv(void *ud, const lsim_interval *iv) {
  (void)ud;
  (void)iv;
  return 0;
}

static lsim_err on_kv(void *ud, const lsim_res_page_ev *ev, lsim_errbuf *eb) {
  world *w = ud;
  (void)eb;
  cr_assert(ev->object >= 0 && ev->object < MAXKV);
  if (ev->op == LSIM_RES_KV_ALLOC)
    w->kvpages[ev->object] += ev->npages;
  else
    w->kvpages[ev->object] -= ev->npages;
  cr_assert_geq(w->kvpages[ev->object], 0);
  return 0;
}

static int rank_[1] = {8};
static int64_t bytes_[1] = {64};
static int64_t pages_[1] = {1};

static void run(int64_t pool, int64_t chunk, int incremental, int budget) {
  static world W;
  memset(&W, 0, sizeof W);
  lsim_res_hooks hooks = {0};
  hooks.kv = on_kv;
  lsim_engine_cfg cfg = {
      .workers = 1,
      .pool_pages = pool,
      .page_bytes = PAGE_BYTES,
      .max_batch_tokens = budget,
      .max_batch_requests = 8,
      .kv_bytes_per_token = KVB,
      .max_load_attempts = 4,
      .ntenants = 1,
      .nadapters = 1,
      .adapter_rank = rank_,
      .adapter_bytes = bytes_,
      .adapter_pages = pages_,
      .sched = lsim_sched_find("fcfs"),
      .evict = lsim_evict_find("lru"),
      .prefetch = lsim_prefetch_find("none"),
      .sink = {on_ev, NULL, &W, on_iv},
      .sched_params = {.w_in = 1, .w_out = 1},
      .kv_incremental = incremental,
      .prefill_chunk = chunk,
      .res_hooks = &hooks,
      .res_hooks_ud = &W,
  };
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_engine_new(&W.e, &cfg, &eb), 0, "%s", eb.msg);
  lsim_plan_reset(&W.plan);
  /* prompts 1 .. 60 and outputs 1 .. 20, three arrivals a tick */
  for (int i = 0; i < NREQ; i++) {
    W.prompt[i] = 1 + (i * 37) % 60;
    W.output[i] = 1 + (i * 11) % 20;
  }
  lsim_tick load_end = -1, iter_end = -1;
  int next = 0, busy = 0;
  for (lsim_tick t = 0; t < 4000; t++) {
    if (load_end == t) {
      cr_assert_eq(lsim_engine_load_done(W.e, 0, 0, t, 1, &eb), 0, "%s",
                   eb.msg);
      load_end = -1;
    }
    if (busy && iter_end == t) {
      /* the iteration completed: its rows are in the KV cache now */
      for (int i = 0; i < W.plan.n; i++) {
        const lsim_plan_entry *pe = &W.plan.e[i];
        W.intkv[pe->request] = pe->ctx + pe->rows;
        W.produced[pe->request] += pe->sample;
      }
      cr_assert_eq(lsim_engine_iter_done(W.e, 0, t, 1, &eb), 0, "%s", eb.msg);
      busy = 0;
    }
    for (int k = 0; k < 3 && next < NREQ; k++, next++) {
      lsim_arrival a = {next, 0, 0, W.prompt[next], W.output[next]};
      int wk;
      cr_assert_eq(lsim_engine_arrive(W.e, t, &a, &wk, &eb), 0, "%s", eb.msg);
      cr_assert_eq(wk, 0, "request %d refused", next);
    }
    lsim_load_start ls[4];
    int nl = 0, sel = 0;
    cr_assert_eq(
        lsim_engine_step(W.e, 0, t, ls, 4, &nl, &W.plan, &sel, &eb), 0,
        "%s", eb.msg);
    if (nl > 0)
      load_end = t + 2;
    if (!sel)
      continue;
    busy = 1;
    iter_end = t + 1;
    cr_assert_eq(W.plan.positions, 1);
    for (int i = 0; i < W.plan.n; i++) {
      const lsim_plan_entry *pe = &W.plan.e[i];
      int r = (int)pe->request;
      cr_assert(r >= 0 && r < NREQ);
      if (W.preempted[r]) {
        /* recompute: prompt and produced tokens again, from position 0,
        ** and the row yields the next token */
        cr_assert_eq(pe->phase, LSIM_PHASE_PREFILL);
        cr_assert_eq(pe->ctx, 0, "request %d recomputes from %lld", r,
                     (long long)pe->ctx);
        cr_assert_eq(pe->rows, W.prompt[r] + W.produced[r]);
        cr_assert_eq(pe->sample, 1);
        W.preempted[r] = 0;
        W.recomputes++;
      } else {
        cr_assert_eq(pe->ctx, W.intkv[r],
                     "request %d: ctx %lld, %lld tokens in its KV cache", r,
                     (long long)pe->ctx, (long long)W.intkv[r]);
      }
      if (pe->phase == LSIM_PHASE_DECODE) {
        cr_assert_eq(pe->rows, 1);
        cr_assert_eq(pe->sample, 1);
        cr_assert_eq(pe->ctx, W.prompt[r] + W.produced[r] - 1);
        W.decodes++;
      } else {
        /* a prefill samples exactly when it reaches the prompt's end */
        cr_assert_eq(pe->sample, pe->ctx + pe->rows >= W.prompt[r]);
        if (!pe->sample)
          W.chunks++;
      }
      cr_assert(pe->kv >= 0 && pe->kv < MAXKV);
      cr_assert_geq(W.kvpages[pe->kv] * PAGE_BYTES, (pe->ctx + pe->rows) * KVB,
                    "request %d: KV object %d holds %lld pages for %lld "
                    "tokens",
                    r, pe->kv, (long long)W.kvpages[pe->kv],
                    (long long)(pe->ctx + pe->rows));
    }
  }
  for (int r = 0; r < NREQ; r++)
    cr_assert_eq(W.produced[r], W.output[r], "request %d: %d of %d tokens", r,
                 W.produced[r], W.output[r]);
  cr_assert_eq(lsim_engine_finish(W.e, 4000, &eb), 0, "%s", eb.msg);
  cr_assert(lsim_engine_check(W.e));
  lsim_engine_release(W.e);
  lsim_plan_release(&W.plan);
  if (chunk > 0)
    cr_assert_gt(W.chunks, 0, "no prefill was chunked");
  if (incremental)
    cr_assert_gt(W.recomputes, 0, "nothing was preempted");
  cr_assert_gt(W.decodes, 0);
}

Test(positions, whole_prompts) { run(64, 0, 0, 128); }

Test(positions, chunked_prefill) { run(64, 7, 0, 32); }

Test(positions, incremental_kv_with_preemption) { run(24, 0, 1, 96); }

Test(positions, chunked_and_preempted) { run(24, 5, 1, 40); }

/* plans built outside the engine say they carry no positions */
Test(positions, plans_from_elsewhere_have_none) {
  lsim_plan p = LSIM_PLAN_INIT;
  lsim_plan_entry e = {1, 0, 0, 8, LSIM_PHASE_DECODE, 1, 0, 0, 0, 0};
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_plan_push(&p, &e, &eb), 0);
  cr_assert_eq(lsim_plan_finish(&p, &eb), 0, "%s", eb.msg);
  cr_assert_eq(p.positions, 0);
  cr_assert_eq(p.e[0].ctx, 0);
  cr_assert_eq(p.e[0].sample, 0);
  lsim_plan_release(&p);
}

/* The cost model's counts (plan.h: sampled, decode_ctx, prefill_pairs,
** lora_segments) come from lsim_plan_finish; worked by hand for a plan of
** three prefill entries and three decode rows, with and without
** positions. */
Test(positions, cost_counts_of_a_plan) {
  /* request, tenant, adapter, rank, phase, rows, version, ctx, sample, kv */
  const lsim_plan_entry es[] = {
      {1, 0, 3, 8, LSIM_PHASE_PREFILL, 5, 0, 2, 1, 0},
      {2, 0, -1, 0, LSIM_PHASE_PREFILL, 4, 0, 0, 0, 1},
      {3, 0, 3, 8, LSIM_PHASE_PREFILL, 2, 0, 10, 1, 2},
      {4, 0, 3, 8, LSIM_PHASE_DECODE, 1, 0, 7, 1, 3},
      {5, 0, 5, 16, LSIM_PHASE_DECODE, 1, 0, 0, 1, 4},
      {6, 0, -1, 0, LSIM_PHASE_DECODE, 1, 0, 3, 1, 5},
  };
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  for (int pos = 1; pos >= 0; pos--) {
    lsim_plan p = LSIM_PLAN_INIT;
    p.positions = pos;
    for (size_t i = 0; i < sizeof es / sizeof es[0]; i++)
      cr_assert_eq(lsim_plan_push(&p, &es[i], &eb), 0);
    cr_assert_eq(lsim_plan_finish(&p, &eb), 0, "%s", eb.msg);
    /* segments 3 | base | 3 3 | 5 | base: three of an adapter */
    cr_assert_eq(p.lora_segments, 3);
    cr_assert_eq(p.segments, 5);
    if (pos) {
      cr_assert_eq(p.sampled, 5);           /* the middle prefill does not */
      cr_assert_eq(p.decode_ctx, 8 + 1 + 4); /* ctx + 1 per decode row */
      /* rows x ctx + rows (rows + 1) / 2: 10 + 15, 0 + 10, 20 + 3 */
      cr_assert_eq(p.prefill_pairs, 58);
    } else {
      cr_assert_eq(p.sampled, 6);
      cr_assert_eq(p.decode_ctx, 3);
      cr_assert_eq(p.prefill_pairs, 15 + 10 + 3);
    }
    lsim_plan_release(&p);
  }
}
