/* The two engine pieces under the vLLM-parity knobs, on their own:
** the residency's slot cap (lsim_res_set_slots, invariant R7: padded-rank
** slots, vLLM's max_loras) and the host tier's LRU (engine/hosttier.h,
** vLLM's max_cpu_loras). */
#include <criterion/criterion.h>
#include <stdio.h>

#include "engine/hosttier.h"
#include "engine/residency.h"

/* ---- the slot cap ------------------------------------------------------------ */

enum { NA = 4 };

static lsim_digest dig(int a) {
  lsim_digest d;
  char s[32];
  int n = snprintf(s, sizeof s, "slots-adapter-%d", a);
  cr_assert_eq(lsim_sha256(s, (size_t)n, &d, NULL), 0);
  return d;
}

/* A pool of `slots` pages, NA adapters of 2 pages each, every one with a
** verified host source; cap > 0: at most cap adapter slots. */
static lsim_res *pool(int64_t slots, int cap) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  int64_t pages[NA] = {2, 2, 2, 2};
  lsim_res_cfg cfg = {slots, 64, NA, pages, 0, LSIM_DIGEST_INIT};
  lsim_res *r;
  cr_assert_eq(lsim_res_new(&r, &cfg, &eb), 0, "%s", eb.msg);
  if (cap > 0)
    cr_assert_eq(lsim_res_set_slots(r, cap, &eb), 0, "%s", eb.msg);
  lsim_digest none = LSIM_DIGEST_INIT;
  for (int a = 0; a < NA; a++) {
    lsim_digest d = dig(a);
    cr_assert_eq(lsim_res_register(r, a, &d, &none, &eb), 0, "%s", eb.msg);
  }
  return r;
}

/* Load a through its whole transaction (a prefetch: no request). */
static void load(lsim_res *r, int a) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_res_req q = {LSIM_TXN_PREFETCH, a, -1, 0, 0};
  lsim_digest d = dig(a);
  int64_t t, gen;
  int kv;
  cr_assert_eq(lsim_res_begin_with(r, &q, NULL, 0, &t, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_res_copy_start(r, t, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_res_copy_done(r, t, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_res_validate(r, t, &d, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_res_publish(r, t, 0, &gen, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_res_commit(r, t, 0, &kv, &eb), 0, "%s", eb.msg);
}

static int state(const lsim_res *r, int a) {
  lsim_res_adapter_view v;
  lsim_res_adapter(r, a, &v);
  return v.state;
}

Test(slots, set_once_first_and_at_least_one) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_res *r = pool(16, 0);
  cr_assert_eq(lsim_res_set_slots(r, 0, &eb), LSIM_E_USAGE);
  load(r, 0);
  cr_assert_eq(lsim_res_set_slots(r, 2, &eb), LSIM_E_USAGE);
  lsim_res_release(r);
}

Test(slots, a_full_slot_set_takes_a_victim_though_pages_are_free) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  for (int cap = 0; cap <= 2; cap += 2) {
    lsim_res *r = pool(64, cap);
    load(r, 0);
    load(r, 1);
    /* 60 pages free: only the slot count can ask for a victim */
    lsim_res_req q = {LSIM_TXN_LOAD, 2, 7, 1, 0};
    int64_t t;
    int victims[NA], nv = -1;
    cr_assert_eq(lsim_res_begin(r, &q, NULL, NULL, &t, victims, NA, &nv, &eb),
                 0, "%s", eb.msg);
    cr_assert_eq(nv, cap ? 1 : 0, "cap %d", cap);
    if (cap)
      cr_assert_eq(state(r, victims[0]), LSIM_RS_RETIRING);
    cr_assert_eq(lsim_res_check(r, &eb), 0, "%s", eb.msg);
    /* a prefetch takes free pages only, no victim: refused at the cap */
    lsim_res_req p = {LSIM_TXN_PREFETCH, 3, -1, 0, 0};
    lsim_err rc = lsim_res_begin_with(r, &p, NULL, 0, &t, &eb);
    cr_assert_eq(rc, cap ? LSIM_E_RES_NOSPACE : 0, "cap %d: %s", cap, eb.msg);
    lsim_res_release(r);
  }
}

Test(slots, a_rollback_restores_victims_only_while_the_cap_allows) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  for (int cap = 0; cap <= 2; cap += 2) {
    lsim_res *r = pool(8, cap);
    load(r, 0);
    load(r, 1);
    /* adapter 2 loads over both (chosen victims), leaving one slot and
    ** four pages free, which adapter 3 then takes */
    lsim_res_req q = {LSIM_TXN_LOAD, 2, 7, 0, 0};
    int victims[2] = {0, 1};
    int64_t t, t3;
    cr_assert_eq(lsim_res_begin_with(r, &q, victims, 2, &t, &eb), 0, "%s",
                 eb.msg);
    cr_assert_eq(lsim_res_copy_start(r, t, &eb), 0, "%s", eb.msg);
    lsim_res_req p = {LSIM_TXN_PREFETCH, 3, -1, 0, 0};
    cr_assert_eq(lsim_res_begin_with(r, &p, NULL, 0, &t3, &eb), 0, "%s",
                 eb.msg);
    /* the copy fails: victim 0 is restored; victim 1 would be a third
    ** slot under a cap of two and is dropped */
    int64_t rest[2];
    int nr = -1;
    cr_assert_eq(lsim_res_rollback(r, t, rest, 2, &nr, &eb), 0, "%s", eb.msg);
    cr_assert_eq(nr, cap ? 1 : 2, "cap %d", cap);
    cr_assert_eq(state(r, 0), LSIM_RS_RESERVED);
    cr_assert_eq(state(r, 1), cap ? LSIM_RS_ABSENT : LSIM_RS_RESERVED);
    cr_assert_eq(state(r, 2), LSIM_RS_HOST_READY);
    cr_assert_eq(lsim_res_check(r, &eb), 0, "%s", eb.msg);
    lsim_res_view v;
    lsim_res_view_get(r, &v);
    cr_assert_eq(v.free + v.reserved + v.adapter + v.kv, 8);
    lsim_res_release(r);
  }
}

/* ---- the host tier ----------------------------------------------------------- */

static void expect_order(const lsim_host_tier *h, const int *want, int n) {
  int got[8];
  cr_assert_eq(lsim_host_order(h, got, 8), n);
  for (int i = 0; i < n; i++)
    cr_assert_eq(got[i], want[i], "position %d: %d, want %d", i, got[i],
                 want[i]);
}

Test(host_tier, least_recently_touched_goes_first) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_host_tier h = LSIM_HOST_INIT;
  cr_assert_eq(lsim_host_init(&h, 2, 5, &eb), 0, "%s", eb.msg);
  int dropped;
  cr_assert_eq(lsim_host_touch(&h, 0, &dropped), 0); /* miss */
  cr_assert_eq(dropped, -1);
  cr_assert_eq(lsim_host_touch(&h, 1, &dropped), 0);
  cr_assert_eq(dropped, -1);
  cr_assert_eq(lsim_host_touch(&h, 0, &dropped), 1); /* hit: 0 is newest */
  expect_order(&h, (int[]){0, 1}, 2);
  cr_assert_eq(lsim_host_touch(&h, 2, &dropped), 0); /* full: 1 goes */
  cr_assert_eq(dropped, 1);
  cr_assert(!lsim_host_has(&h, 1));
  expect_order(&h, (int[]){2, 0}, 2);
  lsim_host_use(&h, 0); /* a launch: 0 is newest, nothing enters */
  lsim_host_use(&h, 4); /* not held: nothing */
  expect_order(&h, (int[]){0, 2}, 2);
  cr_assert_eq(lsim_host_touch(&h, 3, &dropped), 0);
  cr_assert_eq(dropped, 2);
  cr_assert_eq(h.n, 2);
  lsim_host_release(&h);
}

Test(host_tier, off_holds_nothing_and_bad_sizes_are_refused) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_host_tier h = LSIM_HOST_INIT;
  int dropped = 7, out[2];
  cr_assert(!lsim_host_has(&h, 0));
  cr_assert_eq(lsim_host_touch(&h, 0, &dropped), 0);
  cr_assert_eq(dropped, -1);
  cr_assert_eq(lsim_host_order(&h, out, 2), 0);
  cr_assert_eq(lsim_host_init(&h, 0, 5, &eb), LSIM_E_USAGE);
  cr_assert_eq(lsim_host_init(&h, 2, 0, &eb), LSIM_E_USAGE);
  /* a tier larger than the catalog holds every object, dropping none */
  cr_assert_eq(lsim_host_init(&h, 9, 3, &eb), 0, "%s", eb.msg);
  for (int round = 0; round < 2; round++)
    for (int o = 0; o < 3; o++) {
      cr_assert_eq(lsim_host_touch(&h, o, &dropped), round);
      cr_assert_eq(dropped, -1);
    }
  lsim_host_release(&h);
  lsim_host_release(&h); /* released twice: harmless */
}
