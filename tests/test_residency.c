/* The residency engine: the sixteen-slot fixture, its rollbacks, one test
** per residency fault (each failing closed with its own code), and a seeded
** randomized stress test of conservation and use-after-retire. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "engine/residency.h"
#include "base/rng.h"

/* ---- the sixteen-slot fixture (article 0x05B) ----------------------------- */

enum { A = 0, B = 1, C = 2, D = 3 }; /* D: scaffolding that places r0's KV */

typedef struct fx {
  lsim_res *r;
  lsim_digest dig[4];
  int kv_r0;
} fx;

static void digest_of(int a, lsim_digest *d) {
  char s[32];
  int n = snprintf(s, sizeof s, "fixture-adapter-%d", a);
  cr_assert_eq(lsim_sha256(s, (size_t)n, d, NULL), 0);
}

static lsim_digest kabi(void) {
  lsim_digest d;
  cr_assert_eq(lsim_sha256("kabi", 4, &d, NULL), 0);
  return d;
}

/* Load a (prefetch-style, no request) through the whole transaction. */
static void load_plain(lsim_res *r, int a, const lsim_digest *dig) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_res_req q = {LSIM_TXN_PREFETCH, a, -1, 0, 0};
  int64_t t, gen;
  int kv;
  cr_assert_eq(lsim_res_begin_with(r, &q, NULL, 0, &t, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_res_copy_start(r, t, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_res_copy_done(r, t, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_res_validate(r, t, dig, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_res_publish(r, t, 0, &gen, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_res_commit(r, t, 0, &kv, &eb), 0, "%s", eb.msg);
  cr_assert_eq(kv, -1);
}

static void fx_init(fx *f) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  /* H = 8, L = 2, b = 2: one paired slot is 2*L*H*b = 64 bytes */
  int64_t slot_bytes = lsim_res_slora_slot_bytes(2, 8, 2);
  cr_assert_eq(slot_bytes, 64);
  int64_t pages[4];
  for (int i = 0; i < 4; i++)
    pages[i] = lsim_res_pages_slora(1); /* rank-one q/k/v/o: 4 slots */
  cr_assert_eq(pages[C], 4);
  lsim_res_cfg cfg = {16, slot_bytes, 4, pages, 0, kabi()};
  cr_assert_eq(lsim_res_new(&f->r, &cfg, &eb), 0, "%s", eb.msg);
  lsim_digest k = kabi();
  for (int i = 0; i < 4; i++) {
    digest_of(i, &f->dig[i]);
    cr_assert_eq(lsim_res_register(f->r, i, &f->dig[i], &k, &eb), 0, "%s",
                 eb.msg);
  }
  /* D on 0..3, a on 4..7, b on 8..11; then r0's KV replaces D on 0..3 */
  load_plain(f->r, D, &f->dig[D]);
  load_plain(f->r, A, &f->dig[A]);
  load_plain(f->r, B, &f->dig[B]);
  lsim_res_req q0 = {LSIM_TXN_KV, A, 0, 4, 0};
  int victims[1] = {D};
  int64_t t;
  cr_assert_eq(lsim_res_begin_with(f->r, &q0, victims, 1, &t, &eb), 0, "%s",
               eb.msg);
  cr_assert_eq(lsim_res_commit(f->r, t, 1, &f->kv_r0, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_res_pin(f->r, A, +1, &eb), 0); /* a: refcount 1, pin 1 */
  /* b: used once, idle, unpinned, host-backed */
  cr_assert_eq(lsim_res_bind(f->r, B, 2, &eb), 0);
  cr_assert_eq(lsim_res_unbind(f->r, B, 3, &eb), 0);
  cr_assert_eq(lsim_res_check(f->r, &eb), 0, "%s", eb.msg);
}

static void expect_owner(const lsim_res *r, int64_t from, int64_t to, int st,
                         int64_t owner) {
  for (int64_t i = from; i <= to; i++) {
    int s;
    int64_t o, g;
    lsim_res_slot(r, i, &s, &o, &g);
    cr_expect_eq(s, st, "slot %lld state %d, want %d", (long long)i, s, st);
    if (owner != -2)
      cr_expect_eq(o, owner, "slot %lld owner %lld, want %lld", (long long)i,
                   (long long)o, (long long)owner);
  }
}

static int64_t begin_c(fx *f, lsim_errbuf *eb) {
  lsim_res_req q = {LSIM_TXN_LOAD, C, 1, 2, 2}; /* r1: KV 2 + growth 2 */
  int64_t t;
  int victims[4], nv;
  lsim_err rc = lsim_res_begin(f->r, &q, NULL, NULL, &t, victims, 4, &nv, eb);
  cr_assert_eq(rc, 0, "%s", eb->msg);
  cr_assert_eq(nv, 1);
  cr_assert_eq(victims[0], B, "b is the only legal victim");
  return t;
}

Test(fixture, initial_ownership_and_the_only_legal_victim) {
  fx f;
  fx_init(&f);
  expect_owner(f.r, 0, 3, LSIM_SLOT_KV, f.kv_r0);
  expect_owner(f.r, 4, 7, LSIM_SLOT_ADAPTER, A);
  expect_owner(f.r, 8, 11, LSIM_SLOT_ADAPTER, B);
  expect_owner(f.r, 12, 15, LSIM_SLOT_FREE, -1);
  lsim_res_view v;
  lsim_res_view_get(f.r, &v);
  cr_assert_eq(v.slots * v.slot_bytes, 1024);
  /* r0's KV and a fail the predicate although they sit next to b */
  cr_assert_eq(lsim_res_eligible(f.r, A), LSIM_E_RES_REFCOUNT);
  cr_assert_eq(lsim_res_eligible(f.r, B), 0);
  cr_assert_eq(lsim_res_reclaimable(f.r, C), 4);
  lsim_res_req q = {LSIM_TXN_LOAD, C, 1, 2, 2};
  lsim_res_demand d;
  cr_assert_eq(lsim_res_demand_of(f.r, &q, &d, NULL), 0);
  cr_assert_eq(d.adapter, 4);
  cr_assert_eq(d.kv_initial, 2);
  cr_assert_eq(d.kv_growth, 2);
  cr_assert_eq(d.total, 8);
  cr_assert_eq(d.total * 64, 512);
  cr_assert_eq(v.free + lsim_res_reclaimable(f.r, C), 8);
  lsim_res_release(f.r);
}

Test(fixture, successful_transaction_publishes_c_on_8_to_11) {
  fx f;
  fx_init(&f);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  int64_t t = begin_c(&f, &eb);
  lsim_res_txn_view tv;
  cr_assert_eq(lsim_res_txn(f.r, t, &tv, &eb), 0);
  cr_assert_eq(tv.nslots, 8);
  for (int i = 0; i < 8; i++)
    cr_assert_eq(tv.slot[i], 8 + i, "reservation is 8..15");
  expect_owner(f.r, 8, 15, LSIM_SLOT_RESERVED, t);
  lsim_res_adapter_view bv;
  lsim_res_adapter(f.r, B, &bv);
  cr_assert_eq(bv.state, LSIM_RS_RETIRING);
  /* b is retiring: new pins are blocked */
  cr_assert_eq(lsim_res_bind(f.r, B, 4, NULL), LSIM_E_RES_RETIRING);
  cr_assert_eq(lsim_res_copy_start(f.r, t, &eb), 0);
  cr_assert_eq(lsim_res_copy_done(f.r, t, &eb), 0);
  cr_assert_eq(lsim_res_validate(f.r, t, &f.dig[C], &eb), 0, "%s", eb.msg);
  int64_t gen;
  cr_assert_eq(lsim_res_publish(f.r, t, 5, &gen, &eb), 0, "%s", eb.msg);
  cr_assert_eq(gen, 1);
  lsim_res_adapter_view cv;
  lsim_res_adapter(f.r, C, &cv);
  cr_assert_eq(cv.pages, 4);
  for (int i = 0; i < 4; i++)
    cr_assert_eq(cv.slot[i], 8 + i, "c published on [8,9,10,11]");
  int kv;
  cr_assert_eq(lsim_res_commit(f.r, t, 5, &kv, &eb), 0, "%s", eb.msg);
  lsim_res_adapter(f.r, C, &cv);
  cr_assert_eq(cv.refcount, 1, "c pinned for r1");
  expect_owner(f.r, 12, 15, LSIM_SLOT_KV, kv);
  lsim_res_adapter(f.r, B, &bv);
  cr_assert_eq(bv.state, LSIM_RS_ABSENT);
  cr_assert_eq(bv.generation, 1, "b's generation stays as a tombstone");
  /* final ownership: r0 4 / a 4 / c 4 / r1 4 */
  expect_owner(f.r, 0, 3, LSIM_SLOT_KV, f.kv_r0);
  expect_owner(f.r, 4, 7, LSIM_SLOT_ADAPTER, A);
  expect_owner(f.r, 8, 11, LSIM_SLOT_ADAPTER, C);
  lsim_res_view v;
  lsim_res_view_get(f.r, &v);
  cr_assert_eq(v.free, 0);
  cr_assert_eq(v.reserved, 0);
  cr_assert_eq(v.adapter, 8);
  cr_assert_eq(v.kv, 8);
  cr_assert_eq(v.free + v.reserved + v.adapter + v.kv, 16);
  cr_assert_eq(lsim_res_check(f.r, &eb), 0, "%s", eb.msg);
  lsim_res_release(f.r);
}

static void copy_failure_then_restore(fx *f, int digest_fault) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  int64_t t = begin_c(f, &eb);
  cr_assert_eq(lsim_res_copy_start(f->r, t, &eb), 0);
  if (digest_fault) {
    cr_assert_eq(lsim_res_copy_done(f->r, t, &eb), 0);
    lsim_digest bad = f->dig[C];
    bad.b[7] ^= 0x80;
    cr_assert_eq(lsim_res_validate(f->r, t, &bad, &eb), LSIM_E_RES_DIGEST);
  }
  /* before failure: b retired, 8..15 reserved, c never published */
  lsim_res_adapter_view cv, bv;
  lsim_res_adapter(f->r, C, &cv);
  cr_assert_eq(cv.generation, 0);
  int64_t rest[4];
  int nr;
  cr_assert_eq(lsim_res_rollback(f->r, t, rest, 4, &nr, &eb), 0, "%s", eb.msg);
  cr_assert_eq(nr, 1);
  expect_owner(f->r, 12, 15, LSIM_SLOT_FREE, -1);
  expect_owner(f->r, 8, 11, LSIM_SLOT_RESERVED, rest[0]);
  lsim_res_adapter(f->r, C, &cv);
  cr_assert_eq(cv.state, LSIM_RS_HOST_READY, "c absent from the device");
  cr_assert_eq(cv.pages, 0);
  /* reload b from its verified host source, validate, publish anew */
  cr_assert_eq(lsim_res_copy_start(f->r, rest[0], &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_res_copy_done(f->r, rest[0], &eb), 0);
  cr_assert_eq(lsim_res_validate(f->r, rest[0], &f->dig[B], &eb), 0);
  int64_t gen;
  cr_assert_eq(lsim_res_publish(f->r, rest[0], 9, &gen, &eb), 0, "%s", eb.msg);
  int kv;
  cr_assert_eq(lsim_res_commit(f->r, rest[0], 9, &kv, &eb), 0);
  cr_assert_eq(kv, -1, "r1 not admitted");
  lsim_res_adapter(f->r, B, &bv);
  cr_assert_eq(bv.state, LSIM_RS_PUBLISHED);
  cr_assert_eq(gen, 2, "b back under a new generation");
  cr_assert_eq(bv.generation, 2);
  expect_owner(f->r, 8, 11, LSIM_SLOT_ADAPTER, B);
  /* r0 and a unchanged */
  expect_owner(f->r, 0, 3, LSIM_SLOT_KV, f->kv_r0);
  expect_owner(f->r, 4, 7, LSIM_SLOT_ADAPTER, A);
  lsim_res_view v;
  lsim_res_view_get(f->r, &v);
  cr_assert_eq(v.kv_objects, 1, "only r0 holds KV");
  cr_assert_eq(v.free + v.reserved + v.adapter + v.kv, 16);
  cr_assert_eq(v.free, 4);
  cr_assert_eq(v.open_txns, 0);
  cr_assert_eq(lsim_res_check(f->r, &eb), 0, "%s", eb.msg);
}

Test(fixture, copy_failure_rolls_back_and_restores_b_under_a_new_generation) {
  fx f;
  fx_init(&f);
  copy_failure_then_restore(&f, 0);
  lsim_res_release(f.r);
}

Test(fixture, digest_failure_rolls_back_the_same_way) {
  fx f;
  fx_init(&f);
  copy_failure_then_restore(&f, 1);
  lsim_res_release(f.r);
}

Test(fixture, a_failed_restoration_drops_the_victim_and_conserves_slots) {
  fx f;
  fx_init(&f);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  int64_t t = begin_c(&f, &eb), rest[2], rest2[2];
  int nr;
  cr_assert_eq(lsim_res_copy_start(f.r, t, &eb), 0);
  cr_assert_eq(lsim_res_rollback(f.r, t, rest, 2, &nr, &eb), 0);
  cr_assert_eq(lsim_res_copy_start(f.r, rest[0], &eb), 0);
  cr_assert_eq(lsim_res_rollback(f.r, rest[0], rest2, 2, &nr, &eb), 0);
  cr_assert_eq(nr, 0);
  lsim_res_adapter_view bv;
  lsim_res_adapter(f.r, B, &bv);
  cr_assert_eq(bv.state, LSIM_RS_ABSENT);
  lsim_res_view v;
  lsim_res_view_get(f.r, &v);
  cr_assert_eq(v.free, 8);
  cr_assert_eq(lsim_res_check(f.r, &eb), 0, "%s", eb.msg);
  lsim_res_release(f.r);
}

Test(fixture, cancelling_r1_during_the_load_returns_its_kv_share) {
  fx f;
  fx_init(&f);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  int64_t t = begin_c(&f, &eb), released;
  cr_assert_eq(lsim_res_copy_start(f.r, t, &eb), 0);
  cr_assert_eq(lsim_res_txn_drop_request(f.r, t, &released, &eb), 0, "%s",
               eb.msg);
  cr_assert_eq(released, 4);
  expect_owner(f.r, 12, 15, LSIM_SLOT_FREE, -1);
  cr_assert_eq(lsim_res_copy_done(f.r, t, &eb), 0);
  cr_assert_eq(lsim_res_validate(f.r, t, &f.dig[C], &eb), 0);
  cr_assert_eq(lsim_res_publish(f.r, t, 5, NULL, &eb), 0);
  int kv;
  cr_assert_eq(lsim_res_commit(f.r, t, 5, &kv, &eb), 0);
  cr_assert_eq(kv, -1);
  lsim_res_adapter_view cv;
  lsim_res_adapter(f.r, C, &cv);
  cr_assert_eq(cv.state, LSIM_RS_PUBLISHED);
  cr_assert_eq(cv.refcount, 0);
  cr_assert_eq(lsim_res_check(f.r, &eb), 0, "%s", eb.msg);
  lsim_res_release(f.r);
}

/* ---- one test per residency fault ------------------------------------------- */

Test(faults, publish_before_the_copy_event) {
  fx f;
  fx_init(&f);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  int64_t t = begin_c(&f, &eb);
  cr_assert_eq(lsim_res_publish(f.r, t, 5, NULL, &eb), LSIM_E_RES_PUBLISH_EARLY);
  cr_assert_eq(lsim_res_copy_start(f.r, t, &eb), 0);
  cr_assert_eq(lsim_res_validate(f.r, t, &f.dig[C], &eb),
               LSIM_E_RES_PUBLISH_EARLY, "validation before the copy event");
  cr_assert_eq(lsim_res_publish(f.r, t, 5, NULL, &eb), LSIM_E_RES_PUBLISH_EARLY);
  lsim_res_adapter_view cv;
  lsim_res_adapter(f.r, C, &cv);
  cr_assert_eq(cv.state, LSIM_RS_LOADING);
  cr_assert_eq(cv.generation, 0);
  cr_assert_eq(lsim_res_bind(f.r, C, 5, NULL), LSIM_E_RES_ILLEGAL);
  cr_assert_eq(lsim_res_check(f.r, &eb), 0, "%s", eb.msg);
  lsim_res_release(f.r);
}

Test(faults, victim_chosen_by_lru_before_eligibility) {
  fx f;
  fx_init(&f);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  /* a was touched before b: plain LRU would pick it */
  lsim_res_adapter_view av, bv;
  lsim_res_adapter(f.r, A, &av);
  lsim_res_adapter(f.r, B, &bv);
  cr_assert_lt(av.last_use, bv.last_use);
  lsim_res_req q = {LSIM_TXN_LOAD, C, 1, 2, 2};
  int v[1] = {A};
  int64_t t;
  cr_assert_eq(lsim_res_begin_with(f.r, &q, v, 1, &t, &eb), LSIM_E_RES_REFCOUNT,
               "%s", eb.msg);
  lsim_res_view view;
  lsim_res_view_get(f.r, &view);
  cr_assert_eq(view.reserved, 0, "nothing reserved after the refusal");
  lsim_res_adapter(f.r, A, &av);
  cr_assert_eq(av.state, LSIM_RS_ACTIVE);
  lsim_res_release(f.r);
}

Test(faults, pinned_victim_with_refcount_zero_is_still_illegal) {
  fx f;
  fx_init(&f);
  cr_assert_eq(lsim_res_pin(f.r, B, +1, NULL), 0);
  lsim_res_req q = {LSIM_TXN_LOAD, C, 1, 2, 2};
  int v[1] = {B};
  int64_t t;
  cr_assert_eq(lsim_res_begin_with(f.r, &q, v, 1, &t, NULL), LSIM_E_RES_PINNED);
  /* the ranking path finds no legal victim at all */
  cr_assert_eq(lsim_res_begin(f.r, &q, NULL, NULL, &t, NULL, 0, NULL, NULL),
               LSIM_E_RES_NOSPACE);
  lsim_res_release(f.r);
}

Test(faults, victim_with_queued_reservation_live_launch_or_event) {
  fx f;
  fx_init(&f);
  lsim_res_req q = {LSIM_TXN_LOAD, C, 1, 2, 2};
  int v[1] = {B};
  int64_t t;
  cr_assert_eq(lsim_res_queue(f.r, B, +1, NULL), 0);
  cr_assert_eq(lsim_res_begin_with(f.r, &q, v, 1, &t, NULL), LSIM_E_RES_QUEUED);
  cr_assert_eq(lsim_res_queue(f.r, B, -1, NULL), 0);
  cr_assert_eq(lsim_res_launch(f.r, B, +1, NULL), 0);
  cr_assert_eq(lsim_res_begin_with(f.r, &q, v, 1, &t, NULL),
               LSIM_E_RES_LIVE_LAUNCH);
  cr_assert_eq(lsim_res_launch(f.r, B, -1, NULL), 0);
  cr_assert_eq(lsim_res_begin_with(f.r, &q, v, 1, &t, NULL), 0);
  lsim_res_release(f.r);
}

Test(faults, victim_without_verified_host_backing) {
  fx f;
  fx_init(&f);
  lsim_res__set_host(f.r, B, 0);
  lsim_res_req q = {LSIM_TXN_LOAD, C, 1, 2, 2};
  int v[1] = {B};
  int64_t t;
  cr_assert_eq(lsim_res_begin_with(f.r, &q, v, 1, &t, NULL),
               LSIM_E_RES_HOST_SOURCE);
  lsim_res_release(f.r);
}

Test(faults, victim_pages_counted_twice) {
  fx f;
  fx_init(&f);
  lsim_res_req q = {LSIM_TXN_LOAD, C, 1, 2, 6}; /* needs 12: b twice = 8+4 */
  int v[2] = {B, B};
  int64_t t;
  cr_assert_eq(lsim_res_begin_with(f.r, &q, v, 2, &t, NULL),
               LSIM_E_RES_DUP_VICTIM);
  cr_assert_eq(lsim_res_begin(f.r, &q, NULL, NULL, &t, NULL, 0, NULL, NULL),
               LSIM_E_RES_NOSPACE, "free 4 + b 4 < 12");
  lsim_res_release(f.r);
}

Test(faults, growth_reserve_omitted) {
  fx f;
  fx_init(&f);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  /* admitting r1 without its growth reserve fits without evicting b ... */
  lsim_res_req q = {LSIM_TXN_KV, A, 1, 2, 0};
  int64_t t;
  int kv;
  cr_assert_eq(lsim_res_begin_with(f.r, &q, NULL, 0, &t, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_res_commit(f.r, t, 5, &kv, &eb), 0);
  cr_assert_eq(lsim_res_kv_grow(f.r, kv, 2, &eb), 0);
  /* ... and fails closed as soon as decode needs its third page */
  cr_assert_eq(lsim_res_kv_grow(f.r, kv, 3, &eb), LSIM_E_RES_GROWTH);
  int64_t owned, used;
  cr_assert_eq(lsim_res_kv_pages(f.r, kv, &owned, &used, &eb), 0);
  cr_assert_eq(owned, 2);
  cr_assert_eq(used, 2);
  lsim_res_release(f.r);
}

Test(faults, bitmap_released_but_owner_attached) {
  fx f;
  fx_init(&f);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_res__mutate_slot(f.r, 5, LSIM_SLOT_FREE, -1, 0);
  cr_assert_eq(lsim_res_check(f.r, &eb), LSIM_E_RES_OWNERSHIP, "%s", eb.msg);
  lsim_res_release(f.r);
}

Test(faults, one_slot_with_two_owners) {
  fx f;
  fx_init(&f);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_res__mutate_list(f.r, A, 0, 0); /* a claims r0's first KV slot */
  cr_assert_eq(lsim_res_check(f.r, &eb), LSIM_E_RES_DOUBLE_OWNER, "%s", eb.msg);
  lsim_res_release(f.r);
}

Test(faults, stale_generation_on_a_slot) {
  fx f;
  fx_init(&f);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  int s;
  int64_t o, g;
  lsim_res_slot(f.r, 9, &s, &o, &g);
  lsim_res__mutate_slot(f.r, 9, s, o, g + 1);
  cr_assert_eq(lsim_res_check(f.r, &eb), LSIM_E_RES_STALE_GEN, "%s", eb.msg);
  lsim_res_release(f.r);
}

Test(faults, leaked_reservation) {
  fx f;
  fx_init(&f);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_res__mutate_slot(f.r, 13, LSIM_SLOT_RESERVED, 999, 0);
  cr_assert_eq(lsim_res_check(f.r, &eb), LSIM_E_RES_LEAK, "%s", eb.msg);
  lsim_res_release(f.r);
}

Test(faults, rollback_after_publication_must_publish_a_successor) {
  fx f;
  fx_init(&f);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  int64_t t = begin_c(&f, &eb), rest[1];
  int nr;
  cr_assert_eq(lsim_res_copy_start(f.r, t, &eb), 0);
  cr_assert_eq(lsim_res_copy_done(f.r, t, &eb), 0);
  cr_assert_eq(lsim_res_validate(f.r, t, &f.dig[C], &eb), 0);
  cr_assert_eq(lsim_res_publish(f.r, t, 5, NULL, &eb), 0);
  cr_assert_eq(lsim_res_rollback(f.r, t, rest, 1, &nr, &eb),
               LSIM_E_RES_POST_PUBLISH);
  int kv;
  cr_assert_eq(lsim_res_commit(f.r, t, 5, &kv, &eb), 0);
  cr_assert_eq(lsim_res_check(f.r, &eb), 0, "%s", eb.msg);
  lsim_res_release(f.r);
}

Test(faults, identity_and_kernel_abi_are_checked_before_any_page_moves) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  int64_t pages[2] = {2, 2};
  lsim_res_cfg cfg = {8, 64, 2, pages, 0, kabi()};
  lsim_res *r;
  cr_assert_eq(lsim_res_new(&r, &cfg, &eb), 0);
  lsim_digest zero = LSIM_DIGEST_INIT, d, other;
  digest_of(0, &d);
  digest_of(1, &other);
  lsim_digest k = kabi();
  cr_assert_eq(lsim_res_register(r, 0, &zero, &k, &eb), 0);
  cr_assert_eq(lsim_res_register(r, 1, &d, &other, &eb), 0);
  lsim_res_req q0 = {LSIM_TXN_PREFETCH, 0, -1, 0, 0};
  lsim_res_req q1 = {LSIM_TXN_PREFETCH, 1, -1, 0, 0};
  int64_t t;
  cr_assert_eq(lsim_res_begin_with(r, &q0, NULL, 0, &t, &eb),
               LSIM_E_RES_IDENTITY);
  cr_assert_eq(lsim_res_begin_with(r, &q1, NULL, 0, &t, &eb),
               LSIM_E_RES_KERNEL_ABI);
  lsim_res_view v;
  lsim_res_view_get(r, &v);
  cr_assert_eq(v.free, 8);
  /* and a second registration is an illegal transition */
  cr_assert_eq(lsim_res_register(r, 1, &d, &k, &eb), LSIM_E_RES_ILLEGAL);
  lsim_res_release(r);
}

Test(faults, illegal_transitions_have_their_code) {
  fx f;
  fx_init(&f);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  /* c is host_ready: no bind, no copy, no unbind */
  cr_assert_eq(lsim_res_bind(f.r, C, 1, &eb), LSIM_E_RES_ILLEGAL);
  cr_assert_eq(lsim_res_unbind(f.r, C, 1, &eb), LSIM_E_RES_ILLEGAL);
  cr_assert_eq(lsim_res_unbind(f.r, B, 1, &eb), LSIM_E_RES_ILLEGAL);
  cr_assert_eq(lsim_res_copy_start(f.r, 12345, &eb), LSIM_E_RES_TXN);
  /* a visible adapter cannot start another load */
  lsim_res_req q = {LSIM_TXN_LOAD, B, 7, 0, 0};
  int64_t t;
  cr_assert_eq(lsim_res_begin_with(f.r, &q, NULL, 0, &t, &eb),
               LSIM_E_RES_ILLEGAL);
  cr_assert_eq(lsim_res_check(f.r, &eb), 0, "%s", eb.msg);
  lsim_res_release(f.r);
}

Test(demand, tensor_pages_per_module) {
  /* rank 2, d_in 10, d_out 7, H = 8: ceil(20/8) + ceil(14/8) = 3 + 2 */
  lsim_res_module m[2] = {{2, 10, 7}, {1, 8, 8}};
  cr_assert_eq(lsim_res_pages_tensor(m, 1, 8), 5);
  cr_assert_eq(lsim_res_pages_tensor(m, 2, 8), 7);
  cr_assert_eq(lsim_res_pages_tensor(m, 2, 0), -1);
  cr_assert_eq(lsim_res_pages_slora(3), 12);
}

/* ---- seeded randomized stress ------------------------------------------------- */

#define NA 12
#define MAXREQ 64

typedef struct sreq {
  int live, adapter, kv;
  int64_t gen; /* adapter generation at bind */
} sreq;

static int rank_first(void *ud, const int *c, int n) {
  lsim_rng *g = ud;
  return (int)lsim_rng_below(g, (uint64_t)n) * (c[0] >= 0);
}

Test(stress, thousands_of_transactions_with_injected_failures) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_rng g;
  lsim_rng_init(&g, 20240607, LSIM_RNG_FAULTS);
  int64_t pages[NA];
  lsim_digest dig[NA];
  for (int i = 0; i < NA; i++) {
    pages[i] = 1 + (int64_t)lsim_rng_below(&g, 8);
    digest_of(i, &dig[i]);
  }
  lsim_res_cfg cfg = {64, 64, NA, pages, 2, kabi()};
  lsim_res *r;
  cr_assert_eq(lsim_res_new(&r, &cfg, &eb), 0);
  lsim_digest k = kabi();
  sreq req[MAXREQ];
  memset(req, 0, sizeof req);
  int64_t open[256];
  int64_t open_req[256];
  int nopen = 0;
  int commits = 0, rollbacks = 0, restores = 0;
  for (int step = 0; step < 60000; step++) {
    static const int ops[8] = {0, 0, 0, 1, 1, 2, 3, 4};
    int op = ops[lsim_rng_below(&g, 8)];
    int a = (int)lsim_rng_below(&g, NA);
    lsim_res_adapter_view av;
    lsim_res_adapter(r, a, &av);
    if (op == 0 && nopen < 200) {
      /* open a load (or KV admission when visible) */
      int slot = -1;
      for (int i = 0; i < MAXREQ; i++)
        if (!req[i].live) {
          slot = i;
          break;
        }
      if (av.state == LSIM_RS_ABSENT)
        cr_assert_eq(lsim_res_register(r, a, &dig[a], &k, &eb), 0, "%s",
                     eb.msg);
      lsim_res_adapter(r, a, &av);
      int kind = av.state == LSIM_RS_HOST_READY ? LSIM_TXN_LOAD
                 : (av.state == LSIM_RS_PUBLISHED || av.state == LSIM_RS_IDLE ||
                    av.state == LSIM_RS_ACTIVE)
                     ? LSIM_TXN_KV
                     : 0;
      if (!kind || slot < 0)
        continue;
      lsim_res_req q = {kind, a, slot, (int64_t)lsim_rng_below(&g, 4),
                        (int64_t)lsim_rng_below(&g, 4)};
      int64_t t;
      lsim_err rc = lsim_res_begin(r, &q, rank_first, &g, &t, NULL, 0, NULL, &eb);
      cr_assert(rc == 0 || rc == LSIM_E_RES_NOSPACE, "%s", eb.msg);
      if (rc)
        continue;
      if (kind == LSIM_TXN_KV) {
        int kv;
        cr_assert_eq(lsim_res_commit(r, t, step, &kv, &eb), 0, "%s", eb.msg);
        lsim_res_adapter(r, a, &av);
        req[slot] = (sreq){1, a, kv, av.generation};
        commits++;
      } else {
        cr_assert_eq(lsim_res_copy_start(r, t, &eb), 0, "%s", eb.msg);
        req[slot].live = 2; /* reserved for this txn */
        open[nopen] = t;
        open_req[nopen++] = slot;
      }
    } else if (op == 1 && nopen > 0) {
      /* finish a copy: ok, copy failure, digest failure, or cancellation */
      int i = (int)lsim_rng_below(&g, (uint64_t)nopen);
      int64_t t = open[i];
      int slot = (int)open_req[i];
      open[i] = open[--nopen];
      open_req[i] = open_req[nopen];
      lsim_res_txn_view tv;
      cr_assert_eq(lsim_res_txn(r, t, &tv, &eb), 0, "%s", eb.msg);
      int fate = (int)lsim_rng_below(&g, 6);
      if (fate == 3 && slot >= 0 && tv.kind == LSIM_TXN_LOAD) {
        int64_t rel;
        cr_assert_eq(lsim_res_txn_drop_request(r, t, &rel, &eb), 0, "%s",
                     eb.msg);
        req[slot].live = 0;
        slot = -1;
        fate = 0;
      }
      if (fate == 1 || fate == 2) {
        if (fate == 2) {
          lsim_digest bad = dig[tv.adapter];
          bad.b[0] ^= 1;
          cr_assert_eq(lsim_res_copy_done(r, t, &eb), 0);
          cr_assert_eq(lsim_res_validate(r, t, &bad, &eb), LSIM_E_RES_DIGEST);
        }
        int64_t rest[16];
        int nr;
        cr_assert_eq(lsim_res_rollback(r, t, rest, 16, &nr, &eb), 0, "%s",
                     eb.msg);
        rollbacks++;
        if (slot >= 0)
          req[slot].live = 0;
        for (int j = 0; j < nr && nopen < 256; j++) {
          cr_assert_eq(lsim_res_copy_start(r, rest[j], &eb), 0, "%s", eb.msg);
          open[nopen] = rest[j];
          open_req[nopen++] = -1;
          restores++;
        }
      } else {
        cr_assert_eq(lsim_res_copy_done(r, t, &eb), 0, "%s", eb.msg);
        cr_assert_eq(lsim_res_validate(r, t, &dig[tv.adapter], &eb), 0);
        int64_t gen;
        cr_assert_eq(lsim_res_publish(r, t, step, &gen, &eb), 0, "%s", eb.msg);
        int kv;
        cr_assert_eq(lsim_res_commit(r, t, step, &kv, &eb), 0, "%s", eb.msg);
        if (slot >= 0) {
          req[slot] = (sreq){1, tv.adapter, kv, gen};
          cr_assert_geq(kv, 0);
        }
        commits++;
      }
    } else if (op == 2) {
      /* a request finishes: KV released, adapter unbound */
      int i = (int)lsim_rng_below(&g, MAXREQ), k = 0;
      while (k < MAXREQ && req[(i + k) % MAXREQ].live != 1)
        k++;
      if (k == MAXREQ)
        continue;
      i = (i + k) % MAXREQ;
      cr_assert_eq(lsim_res_kv_release(r, req[i].kv, &eb), 0, "%s", eb.msg);
      cr_assert_eq(lsim_res_unbind(r, req[i].adapter, step, &eb), 0, "%s",
                   eb.msg);
      req[i].live = 0;
    } else if (op == 3) {
      /* launches come and go */
      if (av.launches > 0)
        cr_assert_eq(lsim_res_launch(r, a, -1, &eb), 0);
      else if (av.state == LSIM_RS_ACTIVE)
        cr_assert_eq(lsim_res_launch(r, a, +1, &eb), 0);
    } else if (op == 4) {
      if (av.pins > 0)
        cr_assert_eq(lsim_res_pin(r, a, -1, &eb), 0);
      else if (av.state == LSIM_RS_IDLE && lsim_rng_below(&g, 4) == 0)
        cr_assert_eq(lsim_res_pin(r, a, +1, &eb), 0);
    }
    /* after every step: conservation, ownership, and no use after retire --
    ** every live request's adapter is still bound at the generation it
    ** was bound to, and owns its slots */
    cr_assert_eq(lsim_res_check(r, &eb), 0, "step %d: %s", step, eb.msg);
    lsim_res_view v;
    lsim_res_view_get(r, &v);
    cr_assert_eq(v.free + v.reserved + v.adapter + v.kv, 64);
    for (int i = 0; i < MAXREQ; i++) {
      if (req[i].live != 1)
        continue;
      lsim_res_adapter_view rv;
      lsim_res_adapter(r, req[i].adapter, &rv);
      cr_assert(rv.state == LSIM_RS_ACTIVE, "step %d: request %d's adapter is %s",
                step, i, lsim_res_state_name(rv.state));
      cr_assert_eq(rv.generation, req[i].gen, "step %d: generation moved", step);
      cr_assert_geq(rv.refcount, 1);
    }
  }
  cr_log_info("stress: %d commits, %d rollbacks, %d restores", commits,
              rollbacks, restores);
  cr_assert_gt(commits + rollbacks, 3000, "thousands of transactions");
  cr_assert_gt(rollbacks, 300);
  cr_assert_gt(restores, 30);
  lsim_res_release(r);
}
