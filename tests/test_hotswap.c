/* Hotswap and leases (article 0x07B1, 0x07F-0x07I): the exact old/new
** adapter trace, shadow-copy publication, copy failure before publication,
** retirement fences, generation bumps, the lifecycle failure list, and
** merge/unmerge (exact with cpu_ref rationals; binary16 drift). */
#include <criterion/criterion.h>
#include <string.h>

#include "backends/cpu_ref/cpu_ref.h"
#include "engine/hotswap.h"
#include "engine/residency.h"
#include "testsupport/merge.h"

/* ---- exact tensors of the fixture ------------------------------------------- */

/* W = [[2,-1,0],[1,3,-2]] */
static void set_W(lsim_qmat *W) {
  static const char *const r0[] = {"2", "-1", "0"}, *const r1[] = {"1", "3", "-2"};
  cr_assert_eq(lsim_qmat_init(W, 2, 3, NULL), 0);
  cr_assert_eq(lsim_qmat_set_row(W, 0, r0, 3, NULL), 0);
  cr_assert_eq(lsim_qmat_set_row(W, 1, r1, 3, NULL), 0);
}

/* old: rank 2, s = 1/2, B = I, A = 2 * Delta_o = [[1,4,1],[-1,2,2]] */
static void set_old(lsim_qadapter *a) {
  static const char *const a0[] = {"1", "4", "1"}, *const a1[] = {"-1", "2", "2"};
  static const char *const b0[] = {"1", "0"}, *const b1[] = {"0", "1"};
  cr_assert_eq(lsim_qadapter_init(a, 0, 2, 3, 2, NULL), 0);
  mpq_set_str(a->scale, "1/2", 10);
  lsim_qmat_set_row(&a->A, 0, a0, 3, NULL);
  lsim_qmat_set_row(&a->A, 1, a1, 3, NULL);
  lsim_qmat_set_row(&a->B, 0, b0, 2, NULL);
  lsim_qmat_set_row(&a->B, 1, b1, 2, NULL);
}

/* new: logical rank 1, s = 1/4, A = [[2,-1,0]], B = [[1],[3]] */
static void set_new(lsim_qadapter *a) {
  static const char *const a0[] = {"2", "-1", "0"};
  static const char *const b0[] = {"1"}, *const b1[] = {"3"};
  cr_assert_eq(lsim_qadapter_init(a, 1, 1, 3, 2, NULL), 0);
  mpq_set_str(a->scale, "1/4", 10);
  lsim_qmat_set_row(&a->A, 0, a0, 3, NULL);
  lsim_qmat_set_row(&a->B, 0, b0, 1, NULL);
  lsim_qmat_set_row(&a->B, 1, b1, 1, NULL);
}

static void set_x(lsim_qmat *X, const char *const *x) {
  cr_assert_eq(lsim_qmat_init(X, 1, 3, NULL), 0);
  cr_assert_eq(lsim_qmat_set_row(X, 0, x, 3, NULL), 0);
}

/* live output through a physical rank-2 slot: X W^T + s (X A^T) B^T */
static void live_out(const lsim_qmat *W, const lsim_qslot *s,
                     const lsim_qmat *X, lsim_qmat *Y) {
  cr_assert_eq(lsim_qslot_check(s, NULL), 0, "padded tail must be zero");
  cr_assert_eq(lsim_ref_base(X, W, Y, NULL), 0);
  mpq_t z, t;
  mpq_init(z);
  mpq_init(t);
  for (int j = 0; j < s->d_out; j++) {
    mpq_set_ui(t, 0, 1);
    for (int k = 0; k < s->R; k++) {
      mpq_set_ui(z, 0, 1);
      for (int i = 0; i < s->d_in; i++) {
        mpq_t p;
        mpq_init(p);
        mpq_mul(p, LSIM_QAT(&s->A, k, i), LSIM_QAT(X, 0, i));
        mpq_add(z, z, p);
        mpq_clear(p);
      }
      mpq_mul(z, z, LSIM_QAT(&s->B, j, k));
      mpq_add(t, t, z);
    }
    mpq_mul(t, t, s->scale);
    mpq_add(LSIM_QAT(Y, 0, j), LSIM_QAT(Y, 0, j), t);
  }
  mpq_clear(z);
  mpq_clear(t);
}

/* merged output: X (W + s B A)^T */
static void merged_out(const lsim_qmat *W, const lsim_qadapter *a,
                       const lsim_qmat *X, lsim_qmat *Y) {
  lsim_qmat Wm = LSIM_QMAT_INIT;
  cr_assert_eq(lsim_qmat_copy(&Wm, W, NULL), 0);
  mpq_t p;
  mpq_init(p);
  for (int j = 0; j < W->rows; j++)
    for (int i = 0; i < W->cols; i++)
      for (int k = 0; k < a->rank; k++) {
        mpq_mul(p, LSIM_QAT(&a->B, j, k), LSIM_QAT(&a->A, k, i));
        mpq_mul(p, p, a->scale);
        mpq_add(LSIM_QAT(&Wm, j, i), LSIM_QAT(&Wm, j, i), p);
      }
  mpq_clear(p);
  cr_assert_eq(lsim_ref_base(X, &Wm, Y, NULL), 0);
  lsim_qmat_clear(&Wm);
}

static void expect_row(const lsim_qmat *Y, const char *y0, const char *y1) {
  char *a = lsim_q_str(LSIM_QAT(Y, 0, 0)), *b = lsim_q_str(LSIM_QAT(Y, 0, 1));
  cr_expect_str_eq(a, y0);
  cr_expect_str_eq(b, y1);
  free(a);
  free(b);
}

Test(merge, live_and_merged_outputs_are_equal_in_exact_arithmetic) {
  lsim_qmat W = LSIM_QMAT_INIT, xo = LSIM_QMAT_INIT, xn = LSIM_QMAT_INIT;
  set_W(&W);
  static const char *const vo[] = {"1", "2", "-1"}, *const vn[] = {"2", "0", "1"};
  set_x(&xo, vo);
  set_x(&xn, vn);
  lsim_qadapter o, n;
  set_old(&o);
  set_new(&n);
  lsim_qslot so, sn;
  cr_assert_eq(lsim_qslot_init(&so, 2, 3, 2, NULL), 0);
  cr_assert_eq(lsim_qslot_init(&sn, 2, 3, 2, NULL), 0);
  cr_assert_eq(lsim_qslot_load(&so, &o, LSIM_SCALE_PASSED, NULL), 0);
  cr_assert_eq(lsim_qslot_load(&sn, &n, LSIM_SCALE_PASSED, NULL), 0);
  lsim_qmat y1 = LSIM_QMAT_INIT, y2 = LSIM_QMAT_INIT;
  live_out(&W, &so, &xo, &y1);
  merged_out(&W, &o, &xo, &y2);
  cr_assert(lsim_qmat_equal(&y1, &y2));
  expect_row(&y1, "4", "19/2");
  lsim_qmat_clear(&y1);
  lsim_qmat_clear(&y2);
  /* logical rank 1 in a physical rank-2 slot: the zero tail adds nothing */
  live_out(&W, &sn, &xn, &y1);
  merged_out(&W, &n, &xn, &y2);
  cr_assert(lsim_qmat_equal(&y1, &y2));
  expect_row(&y1, "5", "3");
  lsim_qmat_clear(&y1);
  lsim_qmat_clear(&y2);
  lsim_qslot_release(&so);
  lsim_qslot_release(&sn);
  lsim_qadapter_clear(&o);
  lsim_qadapter_clear(&n);
  lsim_qmat_clear(&W);
  lsim_qmat_clear(&xo);
  lsim_qmat_clear(&xn);
}

Test(merge, binary16_merge_then_unmerge_of_2048_and_1_gives_2047) {
  lsim_f16 clean[1] = {(lsim_f16)2048}, w[1] = {(lsim_f16)2048},
           d[1] = {(lsim_f16)1};
  lsim_f16_merge(w, d, 1);
  cr_assert_eq((double)w[0], 2048.0, "the merge loses the increment");
  lsim_f16_unmerge(w, d, 1);
  cr_assert_eq((double)w[0], 2047.0, "the unmerge rounds to 2047");
  cr_assert(__builtin_isfinite((double)w[0]), "finite, so no check sees it");
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  /* lifecycle fault: arithmetic unmerge treated as exact artifact rollback */
  cr_assert_eq(lsim_f16_rollback_check(w, clean, 1, &eb),
               LSIM_E_RES_UNMERGE_INEXACT, "%s", eb.msg);
  /* the rule: reload the immutable clean base */
  lsim_f16_restore(w, clean, 1);
  cr_assert_eq(lsim_f16_rollback_check(w, clean, 1, &eb), 0);
  cr_assert_eq((double)w[0], 2048.0);
}

Test(merge, per_layer_safe_merge_is_not_a_whole_model_transaction) {
  /* two layers of two weights; layer 1 overflows binary16 */
  lsim_f16 w[4] = {1, 2, (lsim_f16)60000, 3}, d[4] = {1, 1, (lsim_f16)60000, 1};
  lsim_f16 w2[4], staging[4];
  memcpy(w2, w, sizeof w);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_f16_merge_inplace(w, d, 2, 2, &eb),
               LSIM_E_RES_PARTIAL_MERGE, "%s", eb.msg);
  cr_assert_eq((double)w[0], 2.0, "layer 0 already changed");
  /* the staged merge leaves the model untouched */
  cr_assert_eq(lsim_f16_merge_model(w2, d, staging, 2, 2, &eb),
               LSIM_E_RES_LAYOUT);
  cr_assert_eq((double)w2[0], 1.0);
  cr_assert_eq((double)w2[2], (double)(lsim_f16)60000, "untouched");
}

/* ---- the hotswap trace -------------------------------------------------------- */

typedef struct hx {
  lsim_hs *h;
  lsim_digest old_d, new_d;
  lsim_hs_lease old_lease;
} hx;

static void hx_init(hx *x) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_hs_new(&x->h, 10, 2, &eb), 0);
  cr_assert_eq(lsim_sha256("old adapter", 11, &x->old_d, NULL), 0);
  cr_assert_eq(lsim_sha256("new adapter", 11, &x->new_d, NULL), 0);
  /* slot 7 will carry generation 12 / pointer 31 under catalog 8 */
  cr_assert_eq(lsim_hs_seed_slot(x->h, 7, 11, 30, &eb), 0);
  cr_assert_eq(lsim_hs_seed_slot(x->h, 8, 20, 40, &eb), 0);
  lsim_hs_seed_catalog(x->h, 7);
  int64_t s;
  cr_assert_eq(lsim_hs_stage(x->h, 0, &x->old_d, 7, &s, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_hs_copy_done(x->h, 7, 1, &x->old_d, 0, 1, &eb), 0);
  lsim_hs_handle none = {-1, 0, 0, LSIM_DIGEST_INIT}, h;
  cr_assert_eq(lsim_hs_publish(x->h, 0, &none, 7, &h, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_hs_catalog_gen(x->h), 8);
  cr_assert_eq(h.slot, 7);
  cr_assert_eq(h.slot_gen, 12);
  cr_assert_eq(h.ptr_gen, 31);
  /* request-old holds a lease; its launch's last-use event is incomplete */
  lsim_hs_lease l = LSIM_HS_LEASE_INIT;
  x->old_lease = l;
  cr_assert_eq(lsim_hs_resolve(x->h, 0, &x->old_lease, &eb), 0);
  cr_assert_eq(lsim_hs_launch(x->h, &x->old_lease, &eb), 0);
  lsim_hs_slot_view v;
  lsim_hs_slot(x->h, 7, &v, NULL);
  cr_assert_eq(v.refcount, 1);
  cr_assert_eq(v.event_complete, 0);
}

/* Output of a request under its lease: the slot's weights. */
static void out_for(const lsim_hs_lease *l, const lsim_qslot *slots,
                    const lsim_qmat *W, const lsim_qmat *X, lsim_qmat *Y) {
  cr_assert(l->h.slot == 7 || l->h.slot == 8);
  live_out(W, &slots[l->h.slot - 7], X, Y);
}

Test(hotswap, shadow_copy_publishes_generation_9_and_leases_keep_their_outputs) {
  hx x;
  hx_init(&x);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_qmat W = LSIM_QMAT_INIT, xo = LSIM_QMAT_INIT, xn = LSIM_QMAT_INIT;
  set_W(&W);
  static const char *const vo[] = {"1", "2", "-1"}, *const vn[] = {"2", "0", "1"};
  set_x(&xo, vo);
  set_x(&xn, vn);
  lsim_qadapter o, n;
  set_old(&o);
  set_new(&n);
  lsim_qslot slots[2]; /* physical slots 7 and 8, rank 2 */
  lsim_qslot_init(&slots[0], 2, 3, 2, NULL);
  lsim_qslot_init(&slots[1], 2, 3, 2, NULL);
  lsim_qslot_load(&slots[0], &o, LSIM_SCALE_PASSED, NULL);

  lsim_hs_handle old;
  lsim_hs_lookup(x.h, 0, &old, NULL);
  int64_t shadow;
  cr_assert_eq(lsim_hs_stage(x.h, 0, &x.new_d, -1, &shadow, &eb), 0);
  cr_assert_eq(shadow, 0, "lowest free slot");
  cr_assert_eq(lsim_hs_abort(x.h, shadow, &eb), 0);
  cr_assert_eq(lsim_hs_stage(x.h, 0, &x.new_d, 8, &shadow, &eb), 0);
  /* not visible because the copy began or the shapes fit */
  cr_assert_eq(lsim_hs_bind_slot(x.h, 8, &eb), LSIM_E_RES_SHADOW);
  lsim_hs_handle nh;
  cr_assert_eq(lsim_hs_publish(x.h, 0, &old, 8, &nh, &eb),
               LSIM_E_RES_PUBLISH_EARLY, "alias published before copy event");
  lsim_qslot_load(&slots[1], &n, LSIM_SCALE_PASSED, NULL);
  cr_assert_eq(lsim_qslot_check(&slots[1], NULL), 0);
  cr_assert_eq(lsim_hs_copy_done(x.h, 8, 1, &x.new_d, 0, 1, &eb), 0);
  cr_assert_eq(lsim_hs_publish(x.h, 0, &old, 8, &nh, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_hs_catalog_gen(x.h), 9);
  cr_assert_eq(nh.slot, 8);
  cr_assert_eq(nh.slot_gen, 21);
  cr_assert_eq(nh.ptr_gen, 41);
  cr_assert(lsim_digest_eq(&nh.digest, &x.new_d));
  lsim_hs_slot_view v7, v8;
  lsim_hs_slot(x.h, 7, &v7, NULL);
  cr_assert_eq(v7.state, LSIM_RS_RETIRING);

  lsim_hs_lease nl = LSIM_HS_LEASE_INIT;
  cr_assert_eq(lsim_hs_resolve(x.h, 0, &nl, &eb), 0);
  lsim_hs_slot(x.h, 8, &v8, NULL);
  cr_assert_eq(v8.state, LSIM_RS_ACTIVE);
  /* both requests launch under their own, distinct immutable handles */
  cr_assert_eq(lsim_hs_launch(x.h, &x.old_lease, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_hs_launch(x.h, &nl, &eb), 0, "%s", eb.msg);
  cr_assert_neq(x.old_lease.h.slot, nl.h.slot);
  lsim_qmat y = LSIM_QMAT_INIT;
  out_for(&x.old_lease, slots, &W, &xo, &y);
  expect_row(&y, "4", "19/2");
  lsim_qmat_clear(&y);
  out_for(&nl, slots, &W, &xn, &y);
  expect_row(&y, "5", "3");
  lsim_qmat_clear(&y);

  /* the compare-and-publish refuses a stale expectation */
  int64_t s2;
  cr_assert_eq(lsim_hs_stage(x.h, 0, &x.old_d, -1, &s2, &eb), 0);
  cr_assert_eq(lsim_hs_copy_done(x.h, s2, 1, &x.old_d, 0, 1, &eb), 0);
  cr_assert_eq(lsim_hs_publish(x.h, 0, &old, s2, NULL, &eb),
               LSIM_E_RES_CATALOG_CAS);
  cr_assert_eq(lsim_hs_abort(x.h, s2, &eb), 0);

  /* retirement needs refcount zero AND the last-use event */
  cr_assert_eq(lsim_hs_reclaim(x.h, 7, &eb), LSIM_E_RES_REFCOUNT);
  cr_assert_eq(lsim_hs_event_complete(x.h, 7, &eb), 0);
  cr_assert_eq(lsim_hs_reclaim(x.h, 7, &eb), LSIM_E_RES_REFCOUNT,
               "the event alone is not enough");
  cr_assert_eq(lsim_hs_launch(x.h, &x.old_lease, &eb), 0);
  cr_assert_eq(lsim_hs_unlease(x.h, &x.old_lease, &eb), 0);
  cr_assert_eq(lsim_hs_reclaim(x.h, 7, &eb), LSIM_E_RES_EVENT_PENDING,
               "refcount zero alone is not enough");
  cr_assert_eq(lsim_hs_event_complete(x.h, 7, &eb), 0);
  cr_assert_eq(lsim_hs_reclaim(x.h, 7, &eb), 0, "%s", eb.msg);
  lsim_hs_slot(x.h, 7, &v7, NULL);
  cr_assert_eq(v7.slot_gen, 13, "reclaim bumps the slot generation");
  cr_assert_eq(v7.ptr_gen, 32, "and the pointer generation");

  lsim_qslot_release(&slots[0]);
  lsim_qslot_release(&slots[1]);
  lsim_qadapter_clear(&o);
  lsim_qadapter_clear(&n);
  lsim_qmat_clear(&W);
  lsim_qmat_clear(&xo);
  lsim_qmat_clear(&xn);
  lsim_hs_release_all(x.h);
}

Test(hotswap, copy_failure_before_publication_leaves_generation_8) {
  hx x;
  hx_init(&x);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_hs_handle old, now;
  lsim_hs_lookup(x.h, 0, &old, NULL);
  int64_t s;
  cr_assert_eq(lsim_hs_stage(x.h, 0, &x.new_d, 8, &s, &eb), 0);
  cr_assert_eq(lsim_hs_copy_done(x.h, 8, 0, NULL, 0, 1, &eb), LSIM_E_RES_COPY);
  cr_assert_eq(lsim_hs_publish(x.h, 0, &old, 8, NULL, &eb),
               LSIM_E_RES_PUBLISH_EARLY, "partial weights never visible");
  cr_assert_eq(lsim_hs_bind_slot(x.h, 8, &eb), LSIM_E_RES_SHADOW);
  cr_assert_eq(lsim_hs_abort(x.h, 8, &eb), 0);
  cr_assert_eq(lsim_hs_catalog_gen(x.h), 8);
  lsim_hs_lookup(x.h, 0, &now, NULL);
  cr_assert_eq(now.slot, 7);
  cr_assert_eq(now.slot_gen, 12);
  cr_assert_eq(now.ptr_gen, 31);
  /* the old request's lease still launches: its output is unchanged */
  cr_assert_eq(lsim_hs_launch(x.h, &x.old_lease, &eb), 0);
  lsim_qmat W = LSIM_QMAT_INIT, xo = LSIM_QMAT_INIT, y = LSIM_QMAT_INIT;
  set_W(&W);
  static const char *const vo[] = {"1", "2", "-1"};
  set_x(&xo, vo);
  lsim_qadapter o;
  set_old(&o);
  lsim_qslot so;
  lsim_qslot_init(&so, 2, 3, 2, NULL);
  lsim_qslot_load(&so, &o, LSIM_SCALE_PASSED, NULL);
  live_out(&W, &so, &xo, &y);
  expect_row(&y, "4", "19/2");
  /* the aborted shadow slot advanced both generations */
  lsim_hs_slot_view v8;
  lsim_hs_slot(x.h, 8, &v8, NULL);
  cr_assert_eq(v8.state, LSIM_RS_ABSENT);
  cr_assert_eq(v8.slot_gen, 22);
  cr_assert_eq(v8.ptr_gen, 41);
  lsim_qslot_release(&so);
  lsim_qadapter_clear(&o);
  lsim_qmat_clear(&W);
  lsim_qmat_clear(&xo);
  lsim_qmat_clear(&y);
  lsim_hs_release_all(x.h);
}

/* ---- the lifecycle failure list ------------------------------------------------ */

Test(lifecycle, compiled_slot_tail_not_zeroed) {
  hx x;
  hx_init(&x);
  int64_t s;
  cr_assert_eq(lsim_hs_stage(x.h, 0, &x.new_d, 8, &s, NULL), 0);
  cr_assert_eq(lsim_hs_copy_done(x.h, 8, 1, &x.new_d, 0, 0, NULL),
               LSIM_E_RES_PAD_TAIL);
  /* and in the exact tensors: a non-zero tail is caught before any math */
  lsim_qadapter n;
  set_new(&n);
  lsim_qslot sn;
  lsim_qslot_init(&sn, 2, 3, 2, NULL);
  lsim_qslot_load(&sn, &n, LSIM_SCALE_PASSED, NULL);
  mpq_set_ui(LSIM_QAT(&sn.A, 1, 0), 5, 1); /* stale old bytes in row 2 */
  cr_assert_eq(lsim_qslot_check(&sn, NULL), LSIM_E_PAD_NONZERO);
  lsim_qslot_release(&sn);
  lsim_qadapter_clear(&n);
  lsim_hs_release_all(x.h);
}

Test(lifecycle, missing_incoming_key_would_leave_old_factor_bytes) {
  hx x;
  hx_init(&x);
  int64_t s;
  cr_assert_eq(lsim_hs_stage(x.h, 0, &x.new_d, 8, &s, NULL), 0);
  cr_assert_eq(lsim_hs_copy_done(x.h, 8, 1, &x.new_d, 1, 1, NULL),
               LSIM_E_RES_MISSING_KEY);
  cr_assert_eq(lsim_hs_catalog_gen(x.h), 8);
  lsim_hs_release_all(x.h);
}

Test(lifecycle, staged_digest_mismatch) {
  hx x;
  hx_init(&x);
  int64_t s;
  cr_assert_eq(lsim_hs_stage(x.h, 0, &x.new_d, 8, &s, NULL), 0);
  cr_assert_eq(lsim_hs_copy_done(x.h, 8, 1, &x.old_d, 0, 1, NULL),
               LSIM_E_RES_DIGEST);
  lsim_hs_release_all(x.h);
}

Test(lifecycle, request_re_resolving_its_alias_per_iteration) {
  hx x;
  hx_init(&x);
  /* the old request already holds its admission-time lease */
  cr_assert_eq(lsim_hs_resolve(x.h, 0, &x.old_lease, NULL), LSIM_E_RES_REBIND);
  lsim_hs_release_all(x.h);
}

Test(lifecycle, reused_slot_never_keeps_its_generation) {
  hx x;
  hx_init(&x);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_hs_handle old;
  lsim_hs_lookup(x.h, 0, &old, NULL);
  int64_t s;
  lsim_hs_stage(x.h, 0, &x.new_d, 8, &s, NULL);
  lsim_hs_copy_done(x.h, 8, 1, &x.new_d, 0, 1, NULL);
  cr_assert_eq(lsim_hs_publish(x.h, 0, &old, 8, NULL, &eb), 0);
  lsim_hs_lease stale = x.old_lease; /* a delayed copy of the old lease */
  lsim_hs_event_complete(x.h, 7, NULL);
  cr_assert_eq(lsim_hs_unlease(x.h, &x.old_lease, NULL), 0);
  cr_assert_eq(lsim_hs_reclaim(x.h, 7, &eb), 0);
  /* slot 7 is reused for another alias with the same bytes */
  cr_assert_eq(lsim_hs_stage(x.h, 1, &x.old_d, 7, &s, &eb), 0);
  lsim_hs_copy_done(x.h, 7, 1, &x.old_d, 0, 1, NULL);
  lsim_hs_handle none = {-1, 0, 0, LSIM_DIGEST_INIT};
  cr_assert_eq(lsim_hs_publish(x.h, 1, &none, 7, NULL, &eb), 0);
  /* ABA: the stale handle names slot 7 and the same digest, but not the
  ** generations */
  cr_assert_eq(lsim_hs_launch(x.h, &stale, &eb), LSIM_E_RES_STALE_HANDLE);
  lsim_hs_release_all(x.h);
}

Test(lifecycle, post_publication_rollback_cannot_move_the_catalog_backward) {
  hx x;
  hx_init(&x);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_hs_handle old, nh;
  lsim_hs_lookup(x.h, 0, &old, NULL);
  int64_t s;
  lsim_hs_stage(x.h, 0, &x.new_d, 8, &s, NULL);
  lsim_hs_copy_done(x.h, 8, 1, &x.new_d, 0, 1, NULL);
  cr_assert_eq(lsim_hs_publish(x.h, 0, &old, 8, &nh, &eb), 0);
  cr_assert_eq(lsim_hs_republish(x.h, 0, &old, &eb), LSIM_E_RES_BACKWARD);
  cr_assert_eq(lsim_hs_abort(x.h, 8, &eb), LSIM_E_RES_POST_PUBLISH);
  /* recovery: stage the old bytes again and publish generation 10 */
  cr_assert_eq(lsim_hs_stage(x.h, 0, &x.old_d, -1, &s, &eb), 0);
  cr_assert_eq(lsim_hs_copy_done(x.h, s, 1, &x.old_d, 0, 1, &eb), 0);
  cr_assert_eq(lsim_hs_publish(x.h, 0, &nh, s, NULL, &eb), 0);
  cr_assert_eq(lsim_hs_catalog_gen(x.h), 10);
  lsim_hs_release_all(x.h);
}

Test(lifecycle, drain_then_overwrite_and_new_alias_alternatives) {
  hx x;
  hx_init(&x);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_hs_handle h;
  /* drain-then-overwrite waits for the old work */
  cr_assert_eq(lsim_hs_overwrite(x.h, 0, &x.new_d, &h, &eb), LSIM_E_RES_REFCOUNT);
  cr_assert_eq(lsim_hs_unlease(x.h, &x.old_lease, &eb), 0);
  cr_assert_eq(lsim_hs_overwrite(x.h, 0, &x.new_d, &h, &eb),
               LSIM_E_RES_EVENT_PENDING);
  cr_assert_eq(lsim_hs_event_complete(x.h, 7, &eb), 0);
  cr_assert_eq(lsim_hs_overwrite(x.h, 0, &x.new_d, &h, &eb), 0, "%s", eb.msg);
  cr_assert_eq(h.slot, 7);
  cr_assert_eq(h.slot_gen, 13);
  cr_assert_eq(h.ptr_gen, 32);
  cr_assert_eq(lsim_hs_catalog_gen(x.h), 9);
  /* load under a new alias: alias 1 gets its own slot, alias 0 untouched */
  int64_t s;
  lsim_hs_handle none = {-1, 0, 0, LSIM_DIGEST_INIT}, h1;
  cr_assert_eq(lsim_hs_stage(x.h, 1, &x.old_d, -1, &s, &eb), 0);
  cr_assert_eq(lsim_hs_copy_done(x.h, s, 1, &x.old_d, 0, 1, &eb), 0);
  cr_assert_eq(lsim_hs_publish(x.h, 1, &none, s, &h1, &eb), 0);
  lsim_hs_lookup(x.h, 0, &h, NULL);
  cr_assert_eq(h.slot, 7);
  cr_assert_neq(h1.slot, 7);
  lsim_hs_release_all(x.h);
}
