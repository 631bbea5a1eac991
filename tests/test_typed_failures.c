/* The typed failure index (article 0x0DB): one test per typed failure of
** loops 2..10, each named after it.  Every test injects the failure through
** the module that owns its detector, asserts detection by the stable error
** code (or the ledger that shows it), asserts the declared consequence is
** prevented and, where a recovery is named, that the invariant holds after
** it.  docs/RELIABILITY.md ("Typed failure index") maps each row to its test;
** failures without a detector in lorasim have no test there, on purpose. */
#include <criterion/criterion.h>
#define LSIM_TMP_PREFIX "/tmp/lsim-typed-"
#include "cli_harness.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "backends/cpu_ref/cpu_ref.h"
#include "testsupport/repr.h"
#include "compress/jd.h"
#include "engine/compress_res.h"
#include "engine/engine.h"
#include "engine/hotswap.h"
#include "engine/kv.h"
#include "testsupport/lab.h"
#include "engine/policy/policy.h"
#include "engine/prefix.h"
#include "engine/identity.h"
#include "testsupport/merge.h"
#include "engine/residency.h"
#include "engine/rowplan.h"
#include "engine/tp.h"
#include "exact_harness.h"
#include "sim/audit.h"
#include "sim/db.h"

#include <sqlite3.h>

/* ==== loop 5: residency and publication ===================================
** The sixteen-slot fixture of test_residency.c: D (scaffold) placed r0's KV
** on 0..3, a on 4..7 (refcount 1, pinned), b on 8..11 (idle, host-backed),
** 12..15 free; c is registered but absent. */

enum { A = 0, B = 1, C = 2, D = 3 };

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
}

static void fx_init(fx *f) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  int64_t slot_bytes = lsim_res_slora_slot_bytes(2, 8, 2);
  int64_t pages[4];
  for (int i = 0; i < 4; i++)
    pages[i] = lsim_res_pages_slora(1);
  lsim_res_cfg cfg = {16, slot_bytes, 4, pages, 0, kabi()};
  cr_assert_eq(lsim_res_new(&f->r, &cfg, &eb), 0, "%s", eb.msg);
  lsim_digest k = kabi();
  for (int i = 0; i < 4; i++) {
    digest_of(i, &f->dig[i]);
    cr_assert_eq(lsim_res_register(f->r, i, &f->dig[i], &k, &eb), 0, "%s",
                 eb.msg);
  }
  load_plain(f->r, D, &f->dig[D]);
  load_plain(f->r, A, &f->dig[A]);
  load_plain(f->r, B, &f->dig[B]);
  lsim_res_req q0 = {LSIM_TXN_KV, A, 0, 4, 0};
  int victims[1] = {D};
  int64_t t;
  cr_assert_eq(lsim_res_begin_with(f->r, &q0, victims, 1, &t, &eb), 0, "%s",
               eb.msg);
  cr_assert_eq(lsim_res_commit(f->r, t, 1, &f->kv_r0, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_res_pin(f->r, A, +1, &eb), 0);
  cr_assert_eq(lsim_res_bind(f->r, B, 2, &eb), 0);
  cr_assert_eq(lsim_res_unbind(f->r, B, 3, &eb), 0);
  cr_assert_eq(lsim_res_check(f->r, &eb), 0, "%s", eb.msg);
}

static int64_t begin_c(fx *f, lsim_errbuf *eb) {
  lsim_res_req q = {LSIM_TXN_LOAD, C, 1, 2, 2};
  int64_t t;
  int victims[4], nv;
  cr_assert_eq(lsim_res_begin(f->r, &q, NULL, NULL, &t, victims, 4, &nv, eb), 0,
               "%s", eb->msg);
  cr_assert_eq(nv, 1);
  cr_assert_eq(victims[0], B);
  return t;
}

static void expect_slots(const lsim_res *r, int64_t from, int64_t to, int st,
                         int64_t owner) {
  for (int64_t i = from; i <= to; i++) {
    int s;
    int64_t o, g;
    lsim_res_slot(r, i, &s, &o, &g);
    cr_assert_eq(s, st, "slot %lld state %d, want %d", (long long)i, s, st);
    cr_assert_eq(o, owner, "slot %lld owner %lld", (long long)i, (long long)o);
  }
}

Test(loop5, registered_called_resident) {
  fx f;
  fx_init(&f);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  /* c is registered in the catalog but owns no page: binding it (the launch
  ** path) is refused by the residency state machine */
  lsim_res_adapter_view cv;
  lsim_res_adapter(f.r, C, &cv);
  cr_assert(cv.state == LSIM_RS_ABSENT || cv.state == LSIM_RS_HOST_READY,
            "c owns no page (state %d)", cv.state);
  cr_assert_eq(lsim_res_bind(f.r, C, 4, &eb), LSIM_E_RES_ILLEGAL, "%s", eb.msg);
  /* reserved pages and a finished copy are not residency either */
  int64_t t = begin_c(&f, &eb);
  cr_assert_eq(lsim_res_bind(f.r, C, 4, NULL), LSIM_E_RES_ILLEGAL);
  cr_assert_eq(lsim_res_copy_start(f.r, t, &eb), 0);
  cr_assert_eq(lsim_res_copy_done(f.r, t, &eb), 0);
  cr_assert_eq(lsim_res_bind(f.r, C, 4, NULL), LSIM_E_RES_ILLEGAL,
               "copied but not validated/published");
  lsim_res_adapter(f.r, C, &cv);
  cr_assert_eq(cv.refcount, 0, "no launch dereferenced c");
  cr_assert_eq(cv.generation, 0);
  /* recovery: the whole transaction, then c binds under generation 1 */
  cr_assert_eq(lsim_res_validate(f.r, t, &f.dig[C], &eb), 0, "%s", eb.msg);
  int64_t gen;
  int kv;
  cr_assert_eq(lsim_res_publish(f.r, t, 5, &gen, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_res_commit(f.r, t, 5, &kv, &eb), 0, "%s", eb.msg);
  cr_assert_eq(gen, 1);
  cr_assert_eq(lsim_res_bind(f.r, C, 6, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_res_check(f.r, &eb), 0, "%s", eb.msg);
  lsim_res_release(f.r);
}

Test(loop5, publication_before_copy_validation) {
  fx f;
  fx_init(&f);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  int64_t t = begin_c(&f, &eb);
  cr_assert_eq(lsim_res_publish(f.r, t, 5, NULL, &eb),
               LSIM_E_RES_PUBLISH_EARLY);
  cr_assert_eq(lsim_res_copy_start(f.r, t, &eb), 0);
  cr_assert_eq(lsim_res_publish(f.r, t, 5, NULL, &eb), LSIM_E_RES_PUBLISH_EARLY,
               "copy in flight");
  cr_assert_eq(lsim_res_copy_done(f.r, t, &eb), 0);
  cr_assert_eq(lsim_res_publish(f.r, t, 5, NULL, &eb), LSIM_E_RES_PUBLISH_EARLY,
               "copy complete but digest/layout not validated");
  /* nothing published: no generation, the kernel cannot bind the payload */
  lsim_res_adapter_view cv;
  lsim_res_adapter(f.r, C, &cv);
  cr_assert_eq(cv.generation, 0);
  cr_assert_eq(lsim_res_bind(f.r, C, 5, NULL), LSIM_E_RES_ILLEGAL);
  /* a wrong digest never publishes either */
  lsim_digest bad = f.dig[C];
  bad.b[0] ^= 1;
  cr_assert_eq(lsim_res_validate(f.r, t, &bad, &eb), LSIM_E_RES_DIGEST);
  lsim_res_adapter(f.r, C, &cv);
  cr_assert_eq(cv.generation, 0);
  cr_assert_eq(lsim_res_check(f.r, &eb), 0, "%s", eb.msg);
  lsim_res_release(f.r);
}

Test(loop5, eviction_eligibility_bypassed) {
  fx f;
  fx_init(&f);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_res_req q = {LSIM_TXN_LOAD, C, 1, 2, 2};
  int64_t t;
  /* a has refcount 1 and a pin; b gets a queued reservation, then a live
  ** launch: each is refused as a victim by its own predicate */
  int va[1] = {A}, vb[1] = {B};
  cr_assert_eq(lsim_res_eligible(f.r, A), LSIM_E_RES_REFCOUNT);
  cr_assert_eq(lsim_res_begin_with(f.r, &q, va, 1, &t, &eb),
               LSIM_E_RES_REFCOUNT);
  cr_assert_eq(lsim_res_pin(f.r, B, +1, NULL), 0);
  cr_assert_eq(lsim_res_begin_with(f.r, &q, vb, 1, &t, NULL),
               LSIM_E_RES_PINNED);
  cr_assert_eq(lsim_res_pin(f.r, B, -1, NULL), 0);
  cr_assert_eq(lsim_res_queue(f.r, B, +1, NULL), 0);
  cr_assert_eq(lsim_res_begin_with(f.r, &q, vb, 1, &t, NULL),
               LSIM_E_RES_QUEUED);
  cr_assert_eq(lsim_res_queue(f.r, B, -1, NULL), 0);
  cr_assert_eq(lsim_res_launch(f.r, B, +1, NULL), 0);
  cr_assert_eq(lsim_res_begin_with(f.r, &q, vb, 1, &t, NULL),
               LSIM_E_RES_LIVE_LAUNCH);
  /* live storage is not overwritten: a and b still own their pages */
  expect_slots(f.r, 4, 7, LSIM_SLOT_ADAPTER, A);
  expect_slots(f.r, 8, 11, LSIM_SLOT_ADAPTER, B);
  lsim_res_view v;
  lsim_res_view_get(f.r, &v);
  cr_assert_eq(v.reserved, 0);
  cr_assert_eq(v.open_txns, 0);
  /* once the launch ends b is a legal victim again */
  cr_assert_eq(lsim_res_launch(f.r, B, -1, NULL), 0);
  cr_assert_eq(lsim_res_begin_with(f.r, &q, vb, 1, &t, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_res_check(f.r, &eb), 0, "%s", eb.msg);
  lsim_res_release(f.r);
}

Test(loop5, rollback_owner_leak) {
  fx f;
  fx_init(&f);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  /* the detector: a reservation with no transaction is a leak */
  fx g;
  fx_init(&g);
  lsim_res__mutate_slot(g.r, 13, LSIM_SLOT_RESERVED, 999, 0);
  cr_assert_eq(lsim_res_check(g.r, &eb), LSIM_E_RES_LEAK, "%s", eb.msg);
  lsim_res_release(g.r);
  /* the failure path: c's digest fails after b was evicted for it */
  int64_t t = begin_c(&f, &eb), rest[4];
  int nr;
  cr_assert_eq(lsim_res_copy_start(f.r, t, &eb), 0);
  cr_assert_eq(lsim_res_copy_done(f.r, t, &eb), 0);
  lsim_digest bad = f.dig[C];
  bad.b[3] ^= 0x80;
  cr_assert_eq(lsim_res_validate(f.r, t, &bad, &eb), LSIM_E_RES_DIGEST);
  cr_assert_eq(lsim_res_rollback(f.r, t, rest, 4, &nr, &eb), 0, "%s", eb.msg);
  cr_assert_eq(nr, 1, "b is restored");
  /* the catalog never names c's corrupt bytes */
  lsim_res_adapter_view cv;
  lsim_res_adapter(f.r, C, &cv);
  cr_assert(cv.state == LSIM_RS_ABSENT || cv.state == LSIM_RS_HOST_READY,
            "c owns no page (state %d)", cv.state);
  cr_assert_eq(cv.pages, 0);
  cr_assert_eq(lsim_res_bind(f.r, C, 8, NULL), LSIM_E_RES_ILLEGAL);
  /* recovery: b reloaded from its host copy under a new generation; every
  ** provisional owner (c's pages, r1's KV and growth) released */
  cr_assert_eq(lsim_res_copy_start(f.r, rest[0], &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_res_copy_done(f.r, rest[0], &eb), 0);
  cr_assert_eq(lsim_res_validate(f.r, rest[0], &f.dig[B], &eb), 0);
  int64_t gen;
  int kv;
  cr_assert_eq(lsim_res_publish(f.r, rest[0], 9, &gen, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_res_commit(f.r, rest[0], 9, &kv, &eb), 0);
  cr_assert_eq(kv, -1, "r1 not admitted");
  cr_assert_eq(gen, 2, "b under a new generation");
  expect_slots(f.r, 8, 11, LSIM_SLOT_ADAPTER, B);
  lsim_res_view v;
  lsim_res_view_get(f.r, &v);
  cr_assert_eq(v.kv_objects, 1, "only r0 holds KV");
  cr_assert_eq(v.free + v.reserved + v.adapter + v.kv, 16);
  cr_assert_eq(v.free, 4);
  cr_assert_eq(v.reserved, 0);
  cr_assert_eq(v.open_txns, 0);
  cr_assert_eq(lsim_res_check(f.r, &eb), 0, "%s", eb.msg);
  lsim_res_release(f.r);
}

/* ==== loop 7: lifecycle and hotswap =======================================
** The hotswap trace of test_hotswap.c: alias 0 published on slot 7 (slot
** generation 12, pointer 31, catalog 8); request-old holds a lease and its
** launch's last-use event is incomplete.  Slot 8 is the shadow. */

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
  cr_assert_eq(lsim_hs_seed_slot(x->h, 7, 11, 30, &eb), 0);
  cr_assert_eq(lsim_hs_seed_slot(x->h, 8, 20, 40, &eb), 0);
  lsim_hs_seed_catalog(x->h, 7);
  int64_t s;
  cr_assert_eq(lsim_hs_stage(x->h, 0, &x->old_d, 7, &s, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_hs_copy_done(x->h, 7, 1, &x->old_d, 0, 1, &eb), 0);
  lsim_hs_handle none = {-1, 0, 0, LSIM_DIGEST_INIT}, h;
  cr_assert_eq(lsim_hs_publish(x->h, 0, &none, 7, &h, &eb), 0, "%s", eb.msg);
  lsim_hs_lease l = LSIM_HS_LEASE_INIT;
  x->old_lease = l;
  cr_assert_eq(lsim_hs_resolve(x->h, 0, &x->old_lease, &eb), 0);
  cr_assert_eq(lsim_hs_launch(x->h, &x->old_lease, &eb), 0);
}

/* stage the new bytes on slot 8 and publish them: catalog 9 */
static void hx_publish_new(hx *x, lsim_hs_handle *nh) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_hs_handle old;
  int64_t s;
  cr_assert_eq(lsim_hs_lookup(x->h, 0, &old, &eb), 0);
  cr_assert_eq(lsim_hs_stage(x->h, 0, &x->new_d, 8, &s, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_hs_copy_done(x->h, 8, 1, &x->new_d, 0, 1, &eb), 0);
  cr_assert_eq(lsim_hs_publish(x->h, 0, &old, 8, nh, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_hs_catalog_gen(x->h), 9);
}

Test(loop7, arithmetic_unmerge_called_rollback) {
  /* binary16: merging +1 into 2048 is lost, the unmerge leaves 2047 */
  lsim_f16 clean[2] = {(lsim_f16)2048, (lsim_f16)3},
           w[2] = {(lsim_f16)2048, (lsim_f16)3},
           d[2] = {(lsim_f16)1, (lsim_f16)1};
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_f16_merge(w, d, 2);
  lsim_f16_unmerge(w, d, 2);
  cr_assert_eq((double)w[0], 2047.0, "finite drift, no NaN to catch it");
  /* the digest comparison against the immutable base detects the drift */
  cr_assert_eq(lsim_f16_rollback_check(w, clean, 2, &eb),
               LSIM_E_RES_UNMERGE_INEXACT, "%s", eb.msg);
  /* a second merge/unmerge cycle would accumulate: the check keeps failing */
  lsim_f16_merge(w, d, 2);
  lsim_f16_unmerge(w, d, 2);
  cr_assert_eq(lsim_f16_rollback_check(w, clean, 2, NULL),
               LSIM_E_RES_UNMERGE_INEXACT);
  /* recovery: reload the immutable clean base; the check passes exactly */
  lsim_f16_restore(w, clean, 2);
  cr_assert_eq(lsim_f16_rollback_check(w, clean, 2, &eb), 0, "%s", eb.msg);
  cr_assert_eq((double)w[0], 2048.0);
  cr_assert_eq((double)w[1], 3.0);
}

Test(loop7, hotswap_without_generation_lease) {
  hx x;
  hx_init(&x);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_hs_handle nh;
  hx_publish_new(&x, &nh);
  /* re-resolving the alias mid-sequence would pick up the new factors: the
  ** lease audit refuses it */
  cr_assert_eq(lsim_hs_resolve(x.h, 0, &x.old_lease, &eb), LSIM_E_RES_REBIND,
               "%s", eb.msg);
  /* the sequence keeps its one immutable generation: slot 7, gen 12 */
  cr_assert_eq(x.old_lease.h.slot, 7);
  cr_assert_eq(x.old_lease.h.slot_gen, 12);
  cr_assert(lsim_digest_eq(&x.old_lease.h.digest, &x.old_d));
  cr_assert_eq(lsim_hs_launch(x.h, &x.old_lease, &eb), 0, "%s", eb.msg);
  /* a new request resolves to the new generation */
  lsim_hs_lease nl = LSIM_HS_LEASE_INIT;
  cr_assert_eq(lsim_hs_resolve(x.h, 0, &nl, &eb), 0, "%s", eb.msg);
  cr_assert_eq(nl.h.slot, 8);
  cr_assert(lsim_digest_eq(&nl.h.digest, &x.new_d));
  cr_assert_eq(nl.catalog_gen, 9);
  lsim_hs_release_all(x.h);
}

Test(loop7, retiring_slot_reclaimed_early) {
  hx x;
  hx_init(&x);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_hs_handle nh;
  hx_publish_new(&x, &nh);
  lsim_hs_slot_view v7;
  cr_assert_eq(lsim_hs_slot(x.h, 7, &v7, NULL), 0);
  cr_assert_eq(v7.state, LSIM_RS_RETIRING);
  /* retirement fence: refcount first, then the last-use event */
  cr_assert_eq(lsim_hs_reclaim(x.h, 7, &eb), LSIM_E_RES_REFCOUNT, "%s", eb.msg);
  cr_assert_eq(lsim_hs_unlease(x.h, &x.old_lease, &eb), 0);
  cr_assert_eq(lsim_hs_reclaim(x.h, 7, &eb), LSIM_E_RES_EVENT_PENDING, "%s",
               eb.msg);
  /* no new payload can be staged over the in-flight storage */
  int64_t s;
  cr_assert_neq(lsim_hs_stage(x.h, 1, &x.new_d, 7, &s, NULL), 0);
  lsim_hs_slot(x.h, 7, &v7, NULL);
  cr_assert_eq(v7.slot_gen, 12, "slot 7 untouched while fenced");
  /* recovery: the event completes, the slot is reclaimed under a new
  ** generation */
  cr_assert_eq(lsim_hs_event_complete(x.h, 7, &eb), 0);
  cr_assert_eq(lsim_hs_reclaim(x.h, 7, &eb), 0, "%s", eb.msg);
  lsim_hs_slot(x.h, 7, &v7, NULL);
  cr_assert_eq(v7.state, LSIM_RS_ABSENT);
  cr_assert_gt(v7.slot_gen, 12, "reclaim advances the slot generation");
  lsim_hs_release_all(x.h);
}

Test(loop7, postpublication_recovery_called_rollback) {
  hx x;
  hx_init(&x);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_hs_handle old, nh, cur;
  lsim_hs_lookup(x.h, 0, &old, NULL);
  hx_publish_new(&x, &nh);
  /* after publication an abort, or republishing the old handle in place,
  ** would silently rewrite state consumers hold receipts for */
  cr_assert_eq(lsim_hs_abort(x.h, 8, &eb), LSIM_E_RES_POST_PUBLISH, "%s",
               eb.msg);
  cr_assert_eq(lsim_hs_republish(x.h, 0, &old, &eb), LSIM_E_RES_BACKWARD, "%s",
               eb.msg);
  cr_assert_eq(lsim_hs_catalog_gen(x.h), 9, "catalog not moved backward");
  lsim_hs_lookup(x.h, 0, &cur, NULL);
  cr_assert_eq(cur.slot, 8);
  cr_assert_eq(cur.ptr_gen, nh.ptr_gen, "receipt of generation 9 still valid");
  /* recovery: replacement is a forward publication of the old bytes */
  int64_t s;
  cr_assert_eq(lsim_hs_stage(x.h, 0, &x.old_d, -1, &s, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_hs_copy_done(x.h, s, 1, &x.old_d, 0, 1, &eb), 0);
  cr_assert_eq(lsim_hs_publish(x.h, 0, &nh, s, &cur, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_hs_catalog_gen(x.h), 10);
  cr_assert(lsim_digest_eq(&cur.digest, &x.old_d));
  lsim_hs_release_all(x.h);
}

/* ==== loop 2: identity and state ==========================================
** The synthetic adapter world of test_identity.c (q_proj rank 2, v_proj rank
** 4, two TP ranks).  Helpers copied from there. */



#include "identity_world.h"
Test(loop2, identity_alias_collision) {
  world w;
  world_init(&w);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_digest before = w.art_d;
  /* the catalog republishes other factor bytes under the same alias */
  w.qa[0] ^= 0x80;
  lsim_digest after;
  cr_assert_eq(lsim_id_artifact(&w.art, &after, &eb), 0, "%s", eb.msg);
  cr_assert_not(lsim_digest_eq(&before, &after),
                "the alias is not an input: the bytes are");
  world_derive(&w);
  /* a request admitted under the old semantic digest launches against the
  ** owners that now name the new bytes: reconciliation refuses it */
  world old;
  world_init(&old);
  w.snap = old.snap;
  w.owners.request = old.owners.request;
  cr_assert_eq(lsim_launch_validate(&w.snap, &w.owners, &eb),
               LSIM_E_ID_REQ_SEMANTIC, "%s", eb.msg);
  /* recovery: a fresh admission binds to the one new artifact */
  world_derive(&w);
  cr_assert_eq(lsim_launch_validate(&w.snap, &w.owners, &eb), 0, "%s", eb.msg);
}

Test(loop2, module_rank_manifest_collapse) {
  world w;
  world_init(&w);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_digest d;
  /* v_proj's rank collapsed to q_proj's while its bytes still hold rank 4 */
  w.mods[1].rank = 2;
  cr_assert_eq(lsim_id_artifact(&w.art, &d, &eb), LSIM_E_ID_FACTOR_SIZE, "%s",
               eb.msg);
  world_init(&w);
  /* B read in another module's (Punica) orientation */
  w.mods[1].b_axes[0] = LSIM_AXIS_RANK;
  w.mods[1].b_axes[1] = LSIM_AXIS_OUTPUT;
  cr_assert_eq(lsim_id_artifact(&w.art, &d, &eb), LSIM_E_ID_AXES, "%s", eb.msg);
  world_init(&w);
  /* the module-shape ledger: local bytes claimed as cluster bytes */
  w.claimed.local_bytes = w.claimed.cluster_bytes;
  cr_assert_eq(lsim_id_residency_verify(w.art.modules, w.art.n_modules,
                                        w.art.dtype, &w.ker.shard, &w.claimed,
                                        &eb),
               LSIM_E_ID_LEDGER, "%s", eb.msg);
  /* per-module ranks are kept apart in the true ledger */
  world_init(&w);
  cr_assert_eq(lsim_id_residency_verify(w.art.modules, w.art.n_modules,
                                        w.art.dtype, &w.ker.shard, &w.claimed,
                                        &eb), 0, "%s", eb.msg);
  cr_assert_neq(w.mods[0].rank, w.mods[1].rank);
}

Test(loop2, generation_namespace_collapse) {
  static const lsim_err want[LSIM_GEN_COUNT] = {
      [LSIM_GEN_CATALOG] = LSIM_E_ID_STALE_CATALOG,
      [LSIM_GEN_ATTEMPT] = LSIM_E_ID_STALE_ATTEMPT,
      [LSIM_GEN_SLOT] = LSIM_E_ID_STALE_SLOT,
      [LSIM_GEN_POINTER_TABLE] = LSIM_E_ID_STALE_PTABLE,
      [LSIM_GEN_BATCH_PLAN] = LSIM_E_ID_STALE_PLAN,
      [LSIM_GEN_CACHE] = LSIM_E_ID_STALE_CACHE,
      [LSIM_GEN_RNG] = LSIM_E_ID_STALE_RNG};
  /* advancing one owner's generation is seen as that owner, and only that
  ** owner: no update hides another's staleness */
  for (int c = 0; c < LSIM_GEN_COUNT; c++) {
    world w;
    world_init(&w);
    lsim_errbuf eb = LSIM_ERRBUF_INIT;
    cr_assert_eq(lsim_genvec_advance(&w.owners.gen, c, &eb), 0);
    cr_assert_eq(lsim_launch_validate(&w.snap, &w.owners, &eb), want[c],
                 "component %d: %s", c, eb.msg);
    for (int k = 0; k < LSIM_GEN_COUNT; k++)
      if (k != c)
        cr_assert_eq(w.owners.gen.g[k], w.snap.gen.g[k]);
    /* recovery: a new launch snapshot of the advanced vector validates */
    w.snap.gen = w.owners.gen;
    cr_assert_eq(lsim_launch_validate(&w.snap, &w.owners, &eb), 0, "%s",
                 eb.msg);
  }
}

Test(loop2, slot_semantic_identity_conflation) {
  world a, b;
  world_init(&a);
  world_init(&b);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  /* relocation: same bytes reloaded on another slot, generation, device */
  b.slot.slot_index = 5;
  b.slot.device_id = 1;
  b.slot.slot_generation = 12;
  b.slot.pointer_table_generation = 32;
  world_derive(&b);
  cr_assert(lsim_digest_eq(&a.sem_d, &b.sem_d), "semantic identity kept");
  cr_assert(lsim_digest_eq(&a.prefix_d, &b.prefix_d), "prefix reuse kept");
  cr_assert_not(lsim_digest_eq(&a.slot_d, &b.slot_d), "slot binding moved");
  /* a slot that now holds another adapter cannot stand in for the semantic
  ** identity the request was admitted under */
  a.owners.slot.adapter_semantic = fill(0x9b);
  cr_assert_eq(lsim_launch_validate(&a.snap, &a.owners, &eb),
               LSIM_E_ID_SLOT_SEMANTIC, "%s", eb.msg);
  /* nor can a slot binding of another device with unchanged generations */
  world_init(&a);
  a.owners.slot.binding = b.slot_d;
  cr_assert_eq(lsim_launch_validate(&a.snap, &a.owners, &eb),
               LSIM_E_ID_SLOT_BINDING, "%s", eb.msg);
}

/* ==== loops 3 and 4: tensor and kernel, mixed phase and rank ==============
** The exact executor's fixtures of test_cpu_ref.c: the fixed-rank batch
** (eight one-row decodes over adapters [1,2,1,base,2,2,1,base]) and the
** mixed batch (prefills 10, 11; decodes 12, 13 base, 14; packed p1 first,
** physical rank 3). */

#define BASE LSIM_BASE
#define PRE LSIM_PHASE_PREFILL
#define DEC LSIM_PHASE_DECODE

static lsim_plan_entry ent(int64_t uid, int adapter, int rank, int phase,
                           int rows) {
  lsim_plan_entry e;
  memset(&e, 0, sizeof e);
  e.request = uid;
  e.adapter = adapter;
  e.rank = rank;
  e.phase = phase;
  e.rows = rows;
  return e;
}

static void qm_is(const lsim_qmat *m, int rows, int cols, const char *spec) {
  lsim_qmat w = LSIM_QMAT_INIT;
  qm(&w, rows, cols, spec);
  cr_assert_eq(m->rows, rows);
  cr_assert_eq(m->cols, cols);
  lsim_errbuf e = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_ref_compare(&w, m, "delta", &e), 0, "%s", e.msg);
  lsim_qmat_clear(&w);
}

static const char *const F1_X = "1 0 1 0 | 0 1 0 1 | 1 1 0 0 | 2 0 0 1 |"
                                "0 1 1 0 | 1 0 0 1 | 1 1 1 1 | 0 0 2 1";
static const char *const F1_W = "1 0 0 1 | 0 1 1 0 | 1 1 0 0";
static const char *const F1_DY = "1 0 1 | 4 0 2 | 1/2 1/2 1 | 0 0 0 |"
                                 "4 0 2 | 4 0 2 | 1 1 2 | 0 0 0";

typedef struct fix1 {
  lsim_rowplan p;
  lsim_qmat X, W;
  lsim_qadapter ad[2];
} fix1;

static void fix1_init(fix1 *f) {
  static const int ids[8] = {1, 2, 1, BASE, 2, 2, 1, BASE};
  lsim_plan_entry e[8];
  for (int i = 0; i < 8; i++)
    e[i] = ent(100 + i, ids[i], ids[i] == BASE ? 0 : 2, DEC, 1);
  memset(f, 0, sizeof *f);
  OK(lsim_rowplan_build(&f->p, e, 8, NULL, 0, eb));
  qm(&f->X, 8, 4, F1_X);
  qm(&f->W, 3, 4, F1_W);
  adapter(&f->ad[0], 1, 2, 4, 3, "1 0 1 0 | 0 1 0 1", "1 0 | 0 1 | 1 1",
          "1/2");
  adapter(&f->ad[1], 2, 2, 4, 3, "1 1 0 0 | 0 0 1 1", "1 1 | 1 -1 | 0 1",
          "2");
}

static void fix1_fini(fix1 *f) {
  lsim_rowplan_release(&f->p);
  lsim_qmat_clear(&f->X);
  lsim_qmat_clear(&f->W);
  lsim_qadapter_clear(&f->ad[0]);
  lsim_qadapter_clear(&f->ad[1]);
}

static const char *const F2_D = "0 3 | 3 0 | 0 -3/2 | 3/2 0 | 2 -1/2 |"
                                "-3/2 -3 | 0 0 | 4 2";
/* X rows keyed by (uid, token position) */
typedef struct xrow {
  int64_t uid;
  int pos;
  const char *x;
} xrow;
static const xrow F2_X[8] = {
    {11, 0, "-1 2 -1"}, {11, 1, "1 1 1"}, {10, 0, "1 0 1"},
    {10, 1, "1 1 0"},   {10, 2, "0 3 2"}, {12, 0, "4 -4 -1"},
    {13, 0, "5 -7 3"},  {14, 0, "2 -1 0"}};

typedef struct fix2 {
  lsim_rowplan p;
  lsim_qmat X;
  lsim_qadapter ad[3];
} fix2;

static void fix2_x(fix2 *f) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_qmat_init(&f->X, f->p.T, 3, &eb), 0);
  for (int i = 0; i < f->p.T; i++) {
    int64_t uid = f->p.req_uid[f->p.row_req[i]];
    int pos = f->p.row_pos[i], hit = 0;
    for (int k = 0; k < 8; k++)
      if (F2_X[k].uid == uid && F2_X[k].pos == pos) {
        lsim_qmat one = LSIM_QMAT_INIT;
        qm(&one, 1, 3, F2_X[k].x);
        for (int j = 0; j < 3; j++)
          mpq_set(LSIM_QAT(&f->X, i, j), LSIM_QAT(&one, 0, j));
        lsim_qmat_clear(&one);
        hit = 1;
      }
    cr_assert(hit);
  }
}

static void fix2_init(fix2 *f, const int *packed) {
  lsim_plan_entry e[5] = {ent(10, 1, 2, PRE, 3), ent(11, 2, 3, PRE, 2),
                          ent(12, 1, 2, DEC, 1), ent(13, BASE, 0, DEC, 1),
                          ent(14, 3, 1, DEC, 1)};
  memset(f, 0, sizeof *f);
  OK(lsim_rowplan_build(&f->p, e, 5, packed, 3, eb));
  fix2_x(f);
  adapter(&f->ad[0], 1, 2, 3, 2, "1 0 1 | 0 1 -1", "1 2 | -1 1", "1/2");
  adapter(&f->ad[1], 2, 3, 3, 2, "1 1 0 | 0 1 0 | 0 0 1",
          "2/3 0 2/3 | 0 2/3 -2/3", "3/2");
  adapter(&f->ad[2], 3, 1, 3, 2, "1 1 1", "2 | 1", "2");
}

static void fix2_fini(fix2 *f) {
  lsim_rowplan_release(&f->p);
  lsim_qmat_clear(&f->X);
  for (int i = 0; i < 3; i++)
    lsim_qadapter_clear(&f->ad[i]);
}

/* A copy of plan p with one field changed must be refused by the planner's
** validator with `code`; the exact executor refuses it too and allocates no
** output, so nothing reaches a request row. */
#define PLAN_FAULT(p, stmt, code)                                         \
  do {                                                                    \
    lsim_rowplan q = LSIM_ROWPLAN_INIT;                                   \
    OK(lsim_rowplan_copy(&q, (p), eb));                                   \
    stmt;                                                                 \
    FAILS(code, lsim_rowplan_validate(&q, eb));                           \
    lsim_rowplan_release(&q);                                             \
  } while (0)

/* The same change through the exact executor (fixture 1, adapters f.ad). */
#define EXEC_FAULT(f, stmt, path, code)                                   \
  do {                                                                    \
    lsim_rowplan q = LSIM_ROWPLAN_INIT;                                   \
    lsim_qmat dy_ = LSIM_QMAT_INIT;                                       \
    OK(lsim_rowplan_copy(&q, &(f)->p, eb));                               \
    stmt;                                                                 \
    FAILS(code, lsim_ref_delta(&q, &(f)->X, (f)->ad, 2, path,             \
                               LSIM_SCALE_PASSED, &dy_, eb));             \
    cr_assert_null(dy_.v, "no output written");                           \
    lsim_rowplan_release(&q);                                             \
  } while (0)

/* recovery for the planner faults: the unmodified plan still executes to
** the article's exact delta on every path */
static void fix1_exact(fix1 *f) {
  for (int path = 0; path < LSIM_REF__COUNT; path++) {
    lsim_qmat dy = LSIM_QMAT_INIT;
    OK(lsim_ref_delta(&f->p, &f->X, f->ad, 2, path, LSIM_SCALE_PASSED, &dy,
                      eb));
    qm_is(&dy, 8, 3, F1_DY);
    lsim_qmat_clear(&dy);
  }
}

Test(loop3, row_permutation_not_bijective) {
  fix1 f;
  fix1_init(&f);
  /* a row gathered twice (and so another never): the scatter audit */
  EXEC_FAULT(&f, q.perm[1] = q.perm[0], LSIM_REF_SGMV, LSIM_E_SCATTER);
  PLAN_FAULT(&f.p, q.perm[1] = q.perm[0], LSIM_E_PLAN_ROW_DUP);
  EXEC_FAULT(&f, q.perm[2] = 8, LSIM_REF_SGMV, LSIM_E_PLAN_ROW_BOUNDS);
  fix1_exact(&f);
  fix1_fini(&f);
}

Test(loop3, segment_identity_drift) {
  fix1 f;
  fix1_init(&f);
  /* row 1 (adapter 2) placed into adapter 1's segment */
  EXEC_FAULT(&f, q.perm[2] = 1, LSIM_REF_SGMV, LSIM_E_PLAN_SEG_ADAPTER);
  /* the segment relabelled to another adapter */
  PLAN_FAULT(&f.p, q.seg_adapter[0] = q.seg_adapter[1],
             LSIM_E_PLAN_SEG_ADAPTER);
  /* a boundary moved across adapters */
  EXEC_FAULT(&f, q.seg_offsets[1] = 7, LSIM_REF_SGMV, LSIM_E_PLAN_OFFSETS);
  fix1_exact(&f);
  fix1_fini(&f);
}

Test(loop3, scale_orientation_drift) {
  fix1 f;
  fix1_init(&f);
  lsim_qadapter bad[2];
  lsim_qmat dy = LSIM_QMAT_INIT;
  /* A given transposed ([d_in][r]): refused on every path */
  adapter(&bad[0], 1, 2, 4, 3, "1 0 1 0 | 0 1 0 1", "1 0 | 0 1 | 1 1", "1/2");
  lsim_qmat_clear(&bad[0].A);
  qm(&bad[0].A, 4, 2, "1 0 | 0 1 | 1 0 | 0 1");
  bad[1] = f.ad[1];
  for (int path = 0; path < LSIM_REF__COUNT; path++) {
    FAILS(LSIM_E_ORIENTATION, lsim_ref_delta(&f.p, &f.X, bad, 2, path,
                                             LSIM_SCALE_PASSED, &dy, eb));
    cr_assert_null(dy.v);
  }
  lsim_qadapter_clear(&bad[0]);
  fix1_exact(&f);
  fix1_fini(&f);
  /* scale folded into B at load, then passed again at launch: refused */
  static const int packed[5] = {1, 0, 2, 3, 4};
  fix2 g;
  fix2_init(&g, packed);
  lsim_qslot s[3];
  for (int k = 0; k < 3; k++) {
    OK(lsim_qslot_init(&s[k], 3, 3, 2, eb));
    OK(lsim_qslot_load(&s[k], &g.ad[k], LSIM_SCALE_FOLD_B, eb));
  }
  FAILS(LSIM_E_SCALE_PLACEMENT,
        lsim_ref_delta_slots(&g.p, &g.X, s, 3, LSIM_SCALE_PASSED,
                             LSIM_NUM_AUTO, NULL, &dy, eb));
  cr_assert_null(dy.v);
  /* the declared encoding reconstructs the declared delta */
  OK(lsim_ref_delta_slots(&g.p, &g.X, s, 3, LSIM_SCALE_FOLD_B, LSIM_NUM_AUTO,
                          NULL, &dy, eb));
  qm_is(&dy, 8, 2, F2_D);
  lsim_qmat_clear(&dy);
  for (int k = 0; k < 3; k++)
    lsim_qslot_release(&s[k]);
  fix2_fini(&g);
}

Test(loop3, combine_metadata_loss) {
  fix1 f;
  fix1_init(&f);
  /* an active row dropped from the gather: the scatter audit sees a row
  ** that was never claimed */
  EXEC_FAULT(&f, q.nactive = 5, LSIM_REF_SGMV, LSIM_E_SCATTER);
  /* a base-only row routed through the adapter path */
  EXEC_FAULT(&f, q.perm[2] = 3, LSIM_REF_SGMV, LSIM_E_BASE_DELTA);
  fix1_fini(&f);
  /* origin/local row metadata of the mixed batch */
  static const int packed[5] = {1, 0, 2, 3, 4};
  fix2 g;
  fix2_init(&g, packed);
  PLAN_FAULT(&g.p, q.row_req[0] = 0, LSIM_E_PLAN_ROW_OWNER);
  PLAN_FAULT(&g.p, q.row_pos[4] = 1, LSIM_E_PLAN_ROW_OWNER);
  PLAN_FAULT(&g.p, q.row_adapter[2] = 2, LSIM_E_PLAN_EXPANSION);
  fix2_fini(&g);
}

Test(loop4, phase_row_count_drift) {
  static const int packed[5] = {1, 0, 2, 3, 4};
  fix2 g;
  fix2_init(&g, packed);
  /* a decode with two rows, a prefill with the wrong token count, and a
  ** row total that disagrees with the expansion */
  PLAN_FAULT(&g.p, q.req_rows[2] = 2, LSIM_E_PLAN_DECODE_ROWS);
  PLAN_FAULT(&g.p, q.req_rows[1] = 3, LSIM_E_PLAN_ROW_COUNT);
  PLAN_FAULT(&g.p, q.T = 7, LSIM_E_PLAN_ROW_COUNT);
  /* and at build time: nothing is planned */
  lsim_plan_entry e[1] = {ent(1, 1, 2, DEC, 2)};
  lsim_rowplan p, zero = LSIM_ROWPLAN_INIT;
  FAILS(LSIM_E_PLAN_DECODE_ROWS, lsim_rowplan_build(&p, e, 1, NULL, 0, eb));
  cr_assert_eq(memcmp(&p, &zero, sizeof p), 0, "plan left empty");
  /* the valid batch: 3 + 2 prefill rows, one per decode */
  cr_assert_eq(g.p.T, 8);
  fix2_fini(&g);
}

Test(loop4, rank_tail_nonzero) {
  static const int packed[5] = {1, 0, 2, 3, 4};
  fix2 g;
  fix2_init(&g, packed);
  lsim_qslot s[3];
  lsim_qmat dy = LSIM_QMAT_INIT;
  for (int k = 0; k < 3; k++) {
    OK(lsim_qslot_init(&s[k], 3, 3, 2, eb));
    OK(lsim_qslot_load(&s[k], &g.ad[k], LSIM_SCALE_PASSED, eb));
  }
  /* rank-1 adapter c inherits a stale byte in its padded A row */
  mpq_set_si(LSIM_QAT(&s[2].A, 2, 1), 5, 1);
  FAILS(LSIM_E_PAD_NONZERO, lsim_qslot_check(&s[2], eb));
  FAILS(LSIM_E_PAD_NONZERO,
        lsim_ref_delta_slots(&g.p, &g.X, s, 3, LSIM_SCALE_PASSED,
                             LSIM_NUM_AUTO, NULL, &dy, eb));
  cr_assert_null(dy.v, "no delta computed from the dirty slot");
  /* recovery: the loader zeroes before copying */
  OK(lsim_qslot_load(&s[2], &g.ad[2], LSIM_SCALE_PASSED, eb));
  OK(lsim_qslot_check(&s[2], eb));
  OK(lsim_ref_delta_slots(&g.p, &g.X, s, 3, LSIM_SCALE_PASSED, LSIM_NUM_AUTO,
                          NULL, &dy, eb));
  qm_is(&dy, 8, 2, F2_D);
  lsim_qmat_clear(&dy);
  for (int k = 0; k < 3; k++)
    lsim_qslot_release(&s[k]);
  fix2_fini(&g);
}

Test(loop4, sampling_inverse_missing) {
  static const int packed[5] = {1, 0, 2, 3, 4};
  fix2 g;
  fix2_init(&g, packed);
  /* request 1's sample row pointed at request 0's last token */
  PLAN_FAULT(&g.p, q.sample_rows[1] = 0, LSIM_E_PLAN_SAMPLE_ROWS);
  PLAN_FAULT(&g.p, q.sample_rows[4] = 99, LSIM_E_PLAN_SAMPLE_ROWS);
  /* the packed order's inverse lost */
  PLAN_FAULT(&g.p, q.packed_inv[0] = 0, LSIM_E_PLAN_INVERSE);
  /* the valid map is a bijection back to scheduler order */
  for (int i = 0; i < g.p.n; i++)
    cr_assert_eq(g.p.packed[g.p.packed_inv[i]], i);
  fix2_fini(&g);
}

Test(loop4, attention_boundary_alias) {
  static const int packed[5] = {1, 0, 2, 3, 4};
  fix2 g;
  fix2_init(&g, packed);
  /* a prefill boundary moved into the neighbour's tokens */
  PLAN_FAULT(&g.p, q.prefill_indptr[1] = 3, LSIM_E_PLAN_INDPTR);
  /* decode offset overlapping the last prefill */
  PLAN_FAULT(&g.p, q.doff = 4, LSIM_E_PLAN_DOFF);
  /* boundaries follow requests, not adapter runs: the valid plan has
  ** prefill_indptr [0,2,5] while its runs split at [0,2,6,7,8] */
  cr_assert_eq(g.p.prefill_indptr[1], 2);
  cr_assert_eq(g.p.prefill_indptr[2], 5);
  cr_assert_eq(g.p.doff, 5);
  fix2_fini(&g);
}

/* ==== loop 6: TP and compression ==========================================
** The two-rank TP fixture of test_tp.c (B = 3, h = d = 4, r = 2) and the
** compressed collection of test_compress_serve.c. */

static lsim_tp_group tp_group(int style, int64_t rank) {
  lsim_tp_group g = {2, rank, style, 4, 4, 2, 7};
  return g;
}

static lsim_tp_manifest tp_good(int style, int64_t rank) {
  lsim_errbuf e = LSIM_ERRBUF_INIT;
  lsim_tp_group g = tp_group(style, rank);
  lsim_tp_manifest m;
  cr_assert_eq(lsim_tp_manifest_build(&g, LSIM_TP_DIV_EXACT, LSIM_DT_F16,
                                      LSIM_DT_F16, LSIM_DT_F32, 3, &m, &e),
               0, "%s", e.msg);
  cr_assert_eq(lsim_tp_validate(&m, &g, &e), 0, "%s", e.msg);
  return m;
}

Test(loop6, tp_factor_placement_drift) {
  /* column parallel: B split on the input axis instead of the base's d_out */
  lsim_tp_group g = tp_group(LSIM_TP_COLUMN, 0);
  lsim_tp_manifest m = tp_good(LSIM_TP_COLUMN, 0);
  m.b.shard_axis = LSIM_AXIS_INPUT;
  FAILS(LSIM_E_TP_INDEPENDENT, lsim_tp_validate(&m, &g, eb));
  /* row parallel: A holds the other rank's input slice */
  g = tp_group(LSIM_TP_ROW, 0);
  m = tp_good(LSIM_TP_ROW, 0);
  m.a.begin = 2;
  m.a.end = 4;
  FAILS(LSIM_E_TP_INDEPENDENT, lsim_tp_validate(&m, &g, eb));
  /* row parallel: A replicated while the base splits d_in */
  m = tp_good(LSIM_TP_ROW, 0);
  m.a.shard_axis = LSIM_TP_REPLICATED;
  FAILS(LSIM_E_TP_INDEPENDENT, lsim_tp_validate(&m, &g, eb));
  /* a manifest of another degree is stale, not reinterpreted */
  lsim_tp_group g4 = {4, 0, LSIM_TP_ROW, 8, 8, 4, 1}, g2 = g4;
  g2.world = 2;
  OK(lsim_tp_manifest_build(&g2, LSIM_TP_DIV_EXACT, LSIM_DT_F16, LSIM_DT_F16,
                            LSIM_DT_F32, 0, &m, eb));
  FAILS(LSIM_E_TP_STALE_MANIFEST, lsim_tp_validate(&m, &g4, eb));
  /* recovery: the manifest built from the base's ownership validates */
  OK(lsim_tp_manifest_build(&g4, LSIM_TP_DIV_EXACT, LSIM_DT_F16, LSIM_DT_F16,
                            LSIM_DT_F32, 0, &m, eb));
  OK(lsim_tp_validate(&m, &g4, eb));
}

Test(loop6, collective_schedule_omitted) {
  lsim_tp_group g = tp_group(LSIM_TP_COLUMN, 1);
  lsim_tp_manifest m = tp_good(LSIM_TP_COLUMN, 1);
  /* the bottleneck all-gather dropped from the schedule */
  m.bottleneck.kind = LSIM_TP_COLL_NONE;
  FAILS(LSIM_E_TP_NO_GATHER, lsim_tp_validate(&m, &g, eb));
  /* row parallel: partial sums gathered (concatenated) instead of reduced */
  g = tp_group(LSIM_TP_ROW, 0);
  m = tp_good(LSIM_TP_ROW, 0);
  m.bottleneck.kind = LSIM_TP_COLL_ALL_GATHER;
  m.bottleneck.reduction = LSIM_TP_RED_NONE;
  FAILS(LSIM_E_TP_CONCAT_PARTIALS, lsim_tp_validate(&m, &g, eb));
  /* the collective's order changed */
  m = tp_good(LSIM_TP_ROW, 0);
  m.bottleneck.order = LSIM_TP_ORDER_RANK_DESC;
  FAILS(LSIM_E_TP_ORDER, lsim_tp_validate(&m, &g, eb));
  /* every collective has a byte count in the ledger: three Q/K/V gathers and
  ** one reduction for B = 3, h = 4, r = 2, N = 2 */
  lsim_tp_coll_ledger c;
  OK(lsim_tp_collectives(2, 3, 4, 2, 3, 1, LSIM_DT_F16, &c, eb));
  cr_assert_eq(c.lora_elems, 15);
  cr_assert_eq(c.lora_bytes, 30);
  /* completion: a rank publishing early leaves the group unlaunchable */
  lsim_gensnap s;
  OK(lsim_gensnap_init(&s, 2, eb));
  lsim_digest g1 = {{1}}, g2 = {{2}};
  OK(lsim_gensnap_publish(&s, 0, 1, &g1, eb));
  OK(lsim_gensnap_publish(&s, 1, 1, &g1, eb));
  OK(lsim_gensnap_publish(&s, 1, 2, &g2, eb));
  int64_t gen = -1;
  FAILS(LSIM_E_TP_MIXED_GEN, lsim_gensnap_launchable(&s, &gen, NULL, eb));
  cr_assert_eq(gen, -1, "no generation handed out");
  OK(lsim_gensnap_publish(&s, 0, 2, &g2, eb));
  OK(lsim_gensnap_launchable(&s, &gen, NULL, eb));
  cr_assert_eq(gen, 2);
}

/* A fitted bundle's identities. */
typedef struct bundle {
  int k, n;
  lsim_digest set, id, basis[4], core[8];
  int cluster[8];
} bundle;

/* Fit a small collection: the article's fixture (A_i = Sigma_i V^T,
** B = U) for variant 1; variant v > 1 retrains adapter c (its first row
** gains v - 1 in the third input column, which moves the shared V basis)
** and scales adapter b by v; k clusters. */
static void make_bundle(bundle *b, double variant, int k) {
  double A[3][6] = {
      {1, 0, 0, 0, 2, 0}, {0, 3, 0, 4, 0, 0}, {2, -1, 0, 1, 1, 0}};
  double bscale = variant;
  A[2][2] = variant - 1;
  static const double B[6] = {1, 0, 0, 1, 0, 0};
  lsim_jd_source src[3];
  for (int i = 0; i < 3; i++) {
    src[i].rank = 2;
    src[i].scale = i == 1 ? bscale : 1;
    src[i].A = A[i];
    src[i].B = B;
  }
  lsim_jd_config cfg = LSIM_JD_CONFIG_INIT;
  cfg.rank = 2;
  cfg.clusters = k;
  lsim_jd_result r = LSIM_JD_RESULT_INIT;
  OK(lsim_jd_fit(src, 3, 3, 3, &cfg, &r, eb));
  const char *names[3] = {"a", "b", "c"};
  lsim_digest sd[3];
  int ranks[3] = {2, 2, 2};
  double scales[3] = {1, bscale, 1};
  for (int i = 0; i < 3; i++)
    OK(lsim_jd_source_digest(&src[i], 3, 3, &sd[i], eb));
  OK(lsim_jd_source_set_digest(names, sd, 3, &b->set, eb));
  b->k = r.k;
  b->n = r.n;
  for (int c = 0; c < r.k; c++)
    OK(lsim_jd_basis_digest(&r, c, &b->basis[c], eb));
  for (int i = 0; i < r.n; i++) {
    b->cluster[i] = r.cluster[i];
    OK(lsim_jd_core_digest(&r, i, &b->basis[r.cluster[i]], &b->core[i], eb));
  }
  lsim_jd_bundle_in in = {"toy-base-v1", "layers.0.proj", 10, 50, 1, names,
                          sd, ranks, scales, &b->set, &r, b->basis, b->core};
  OK(lsim_jd_bundle_digest(&in, &b->id, eb));
  lsim_jd_result_release(&r);
}

/* register + stage everything + publish */
static void cmp_publish(lsim_cmp_catalog *cat, const char *label,
                    const bundle *b) {
  OK(lsim_cmp_register_version(cat, label, &b->set, &b->id, eb));
  OK(lsim_cmp_stage_begin(cat, label, &b->id, b->k, b->n, eb));
  for (int c = 0; c < b->k; c++)
    OK(lsim_cmp_stage_basis(cat, c, &b->basis[c], eb));
  for (int i = 0; i < b->n; i++)
    OK(lsim_cmp_stage_core(cat, i, b->cluster[i], &b->basis[b->cluster[i]],
                           &b->core[i], eb));
  OK(lsim_cmp_publish(cat, eb));
}


Test(loop6, compressed_basis_version_mismatch) {
  bundle v1, v2;
  make_bundle(&v1, 1, 1);
  make_bundle(&v2, 2, 1);
  cr_assert(!lsim_digest_eq(&v1.basis[0], &v2.basis[0]));
  lsim_cmp_catalog cat = LSIM_CMP_CATALOG_INIT;
  cmp_publish(&cat, "coll-v1", &v1);
  cmp_publish(&cat, "coll-v2", &v2);
  /* a v1 core against the live v2 basis, and a v2 core fitted elsewhere */
  FAILS(LSIM_E_CMP_STALE_BASIS,
        lsim_cmp_check_core(&cat, 1, &v1.id, &v1.basis[0], &v1.core[1], eb));
  FAILS(LSIM_E_CMP_STALE_BASIS,
        lsim_cmp_check_core(&cat, 1, &v2.id, &v2.basis[0], &v1.core[1], eb));
  /* a forged lease naming the new basis for an old core */
  lsim_cmp_catalog c2 = LSIM_CMP_CATALOG_INIT;
  cmp_publish(&c2, "coll-v1", &v1);
  lsim_cmp_lease l;
  OK(lsim_cmp_acquire(&c2, 2, &l, eb));
  cmp_publish(&c2, "coll-v2", &v2);
  lsim_cmp_lease forged = l;
  forged.basis = v2.basis[0];
  FAILS(LSIM_E_CMP_STALE_BASIS, lsim_cmp_launch_check(&c2, &forged, eb));
  /* the honest lease stays launchable until released, then the old
  ** generation retires and it fails closed */
  OK(lsim_cmp_launch_check(&c2, &l, eb));
  OK(lsim_cmp_release(&c2, &l, eb));
  OK(lsim_cmp_retire_prev(&c2, eb));
  FAILS(LSIM_E_CMP_STALE_BASIS, lsim_cmp_launch_check(&c2, &l, eb));
  /* recovery: the matching pair of the live version checks */
  OK(lsim_cmp_check_core(&cat, 1, &v2.id, &v2.basis[0], &v2.core[1], eb));
  lsim_cmp_catalog_release(&cat);
  lsim_cmp_catalog_release(&c2);
}

/* What this proves: the compression report keeps storage/reconstruction
** ledgers apart from kernel time and never fills a kernel time without a
** measurement file; a measured time lands only on its own row.  What it
** does not prove: that any measured time is right, or anything about
** throughput in a serving deployment. */
Test(loop6, compression_ratio_called_speedup, .init = mk_tmp, .fini = rm_tmp) {
  int rc = lorasim("compress --synthetic 12 --d-in 10 --d-out 9 --src-rank 2 "
                   "--planted 3 --groups 3 --report --ranks 2,3 "
                   "--clusters-list 1,3");
  cr_assert_eq(rc, 0, "%s", out);
  cr_assert(strstr(out, "kernel_time"), "%s", out);
  int rows = 0;
  for (const char *q = out; (q = strstr(q, "not measured")); q++)
    rows++;
  cr_assert_eq(rows, 8, "every row's kernel time unmeasured: %s", out);
  cr_assert_null(strstr(out, " ms,"), "no time without a measurement: %s",
                 out);
  char path[512];
  snprintf(path, sizeof path, "%s/times.txt", tmpdir);
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  fputs("jd-diag 3 1 0.0420 0.0310 256\n", f);
  fclose(f);
  rc = lorasim("compress --synthetic 12 --d-in 10 --d-out 9 --src-rank 2 "
               "--planted 3 --groups 3 --report --ranks 2,3 "
               "--clusters-list 1,3 --kernel-times times.txt");
  cr_assert_eq(rc, 0, "%s", out);
  rows = 0;
  for (const char *q = out; (q = strstr(q, "not measured")); q++)
    rows++;
  cr_assert_eq(rows, 7, "only the measured row gets a time: %s", out);
}

/* ==== loop 8: adapter, KV and prefix ======================================
** The KV compatibility fixtures of test_prefix.c: a two-layer serial graph,
** the prompt [11, 12, 99, 100] and the aLoRA invocation [99, 100]. */

static lsim_digest KD(const char *s) {
  lsim_digest d;
  cr_assert_eq(lsim_sha256(s, strlen(s), &d, NULL), 0);
  return d;
}

static const int64_t TOK4[4] = {11, 12, 99, 100};
static const int64_t INV[2] = {99, 100};
static const lsim_kv_target T_Q0[1] = {{0, LSIM_KV_Q}};
static const lsim_kv_target T_K0[1] = {{0, LSIM_KV_K}};
static const lsim_kv_target T_LM[1] = {{-1, LSIM_KV_LM_HEAD}};
static const lsim_kv_target T_Q1[1] = {{1, LSIM_KV_Q}};

typedef struct kfx {
  lsim_kv_graph g;
  lsim_kv_adapter a;
  lsim_kv_manifest m;
} kfx;

static void fx_base(kfx *f) {
  memset(f, 0, sizeof *f);
  f->g.arch = LSIM_KV_ARCH_SERIAL;
  f->g.layers = 2;
  f->g.revision = KD("graph-r1");
  f->m.base_abi = KD("base");
  f->m.cache_abi = KD("cache-bf16-paged");
  f->m.graph = &f->g;
  f->m.adapter = NULL;
  f->m.tokens = TOK4;
  f->m.ntokens = 4;
  f->m.side_inputs = KD("no-side-inputs");
  f->m.isolation = KD("tenant-0");
  f->m.block_tokens = 1;
}

static void fx_lora(kfx *f, const char *name, const lsim_kv_target *t, int n) {
  fx_base(f);
  f->a.kind = LSIM_KV_LORA;
  char b[64];
  snprintf(b, sizeof b, "sem-%s", name);
  f->a.semantic = KD(b);
  snprintf(b, sizeof b, "art-%s", name);
  f->a.artifact = KD(b);
  snprintf(b, sizeof b, "alias-%s", name);
  f->a.raw_id = KD(b);
  f->a.targets = t;
  f->a.ntargets = n;
  f->a.explicit_start = -1;
  f->m.adapter = &f->a;
}

static void fx_alora(kfx *f, const char *name) {
  fx_lora(f, name, T_Q0, 1);
  f->a.kind = LSIM_KV_ALORA;
  f->a.invocation = INV;
  f->a.ninvocation = 2;
  f->a.require_specialization = 1;
  f->a.offset_mode = LSIM_KV_OFFSET_DERIVE;
}

typedef struct cache_fx {
  lsim_res *pool;
  lsim_prefix *pc;
  lsim_prefix_grant grants[2];
} cache_fx;

static void cache_open(cache_fx *c, int64_t slots, int64_t max_blocks) {
  int64_t ap[1] = {1};
  lsim_res_cfg rc = {slots, 4096, 1, ap, 0, LSIM_DIGEST_INIT};
  cr_assert_eq(lsim_res_new(&c->pool, &rc, NULL), 0);
  c->grants[0].principal = 0;
  c->grants[0].ns = KD("tenant-0");
  c->grants[1].principal = 1;
  c->grants[1].ns = KD("tenant-1");
  lsim_prefix_cfg cfg = {1, 1, max_blocks, 4, c->pool, c->grants, 2};
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_prefix_new(&c->pc, &cfg, &eb), 0, "%s", eb.msg);
}

static void cache_close(cache_fx *c) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_prefix_check(c->pc, &eb), 0, "%s", eb.msg);
  lsim_prefix_release(c->pc);
  lsim_res_view v;
  lsim_res_view_get(c->pool, &v);
  cr_assert_eq(v.kv, 0, "cache pages went back to the pool");
  lsim_res_release(c->pool);
}

static void keys_of(const kfx *f, int mode, lsim_kv_keys *k) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_kv_keys_derive(&f->m, mode, k, &eb), 0, "%s", eb.msg);
}


Test(loop8, kv_dependency_closure_omitted) {
  lsim_kv_graph g = {LSIM_KV_ARCH_SERIAL, 2, KD("g")};
  lsim_kv_closure c;
  /* a Q adapter in layer 0 changes no K/V there, but layer 1's K/V reads
  ** its output: reusing base K/V would be another model function */
  OK(lsim_kv_closure_of(&g, T_Q0, 1, &c, eb));
  cr_assert(c.kv_changed && !c.kv_direct && c.kv_first_layer == 1);
  FAILS(LSIM_E_KV_REUSE_DOWNSTREAM,
        lsim_kv_reuse_from_base(&c, LSIM_KV_OBJ_KV, eb));
  OK(lsim_kv_closure_of(&g, T_K0, 1, &c, eb));
  FAILS(LSIM_E_KV_REUSE_KV_TARGET,
        lsim_kv_reuse_from_base(&c, LSIM_KV_OBJ_KV, eb));
  /* an architecture without a proof is conservative */
  g.arch = LSIM_KV_ARCH_PARALLEL;
  OK(lsim_kv_closure_of(&g, T_LM, 1, &c, eb));
  cr_assert(!c.proven);
  FAILS(LSIM_E_KV_UNPROVEN, lsim_kv_reuse_from_base(&c, LSIM_KV_OBJ_KV, eb));
  /* the closure does allow what it proves: Q in the last layer */
  g.arch = LSIM_KV_ARCH_SERIAL;
  OK(lsim_kv_closure_of(&g, T_Q1, 1, &c, eb));
  OK(lsim_kv_reuse_from_base(&c, LSIM_KV_OBJ_KV, eb));
  /* and the switch table recomputes for a Q0 adapter rather than reusing */
  kfx base, a;
  fx_base(&base);
  fx_lora(&a, "A", T_Q0, 1);
  lsim_kv_switch s;
  OK(lsim_kv_switch_of(&base.m, &a.m, &s, eb));
  cr_assert_eq(s.kv_rows, 0, "no base row reused under the Q0 adapter");
}

Test(loop8, alora_interval_boundary_drift) {
  kfx f;
  fx_alora(&f, "A");
  int64_t start;
  uint8_t mask[6];
  static const int64_t tok6[6] = {99, 100, 11, 99, 100, 12};
  f.m.tokens = tok6;
  f.m.ntokens = 6;
  OK(lsim_kv_activation(&f.m, &start, mask, eb));
  cr_assert_eq(start, 3, "the last occurrence, not the first (0)");
  uint8_t want6[6] = {0, 0, 0, 1, 1, 1};
  cr_assert_arr_eq(mask, want6, 6);
  /* a required invocation that is absent fails closed */
  static const int64_t none[4] = {11, 12, 13, 14};
  f.m.tokens = none;
  f.m.ntokens = 4;
  FAILS(LSIM_E_KV_INVOCATION_ABSENT,
        lsim_kv_activation(&f.m, &start, NULL, eb));
  /* cache identity changes exactly at the boundary: before it the
  ** intervals are the base's, from it on they are the adapter's */
  kfx b, a;
  fx_base(&b);
  fx_alora(&a, "A");
  lsim_digest base, e;
  OK(lsim_kv_base_digest(&b.m, &base, eb));
  for (int64_t s = 0; s < 4; s++) {
    OK(lsim_kv_interval_digest(&a.m, LSIM_KV_KEYS_ALORA, s, s + 1, &e, eb));
    cr_assert_eq(lsim_digest_eq(&e, &base), s < 2, "interval %lld",
                 (long long)s);
  }
  /* a block straddling the boundary is never shared with the base */
  static const int64_t inv1[1] = {12};
  a.a.invocation = inv1;
  a.a.ninvocation = 1;
  b.m.block_tokens = a.m.block_tokens = 2;
  lsim_kv_keys kb = LSIM_KV_KEYS_INIT, ka = LSIM_KV_KEYS_INIT;
  OK(lsim_kv_keys_derive(&b.m, LSIM_KV_KEYS_ALORA, &kb, eb));
  OK(lsim_kv_keys_derive(&a.m, LSIM_KV_KEYS_ALORA, &ka, eb));
  cr_assert_eq(lsim_kv_common_tokens(&kb, &ka), 0);
  lsim_kv_keys_release(&ka);
  lsim_kv_keys_release(&kb);
}

Test(loop8, prefix_identity_incomplete) {
  /* a key schema without the execution (adapter) identity is refused */
  FAILS(LSIM_E_KV_KEY_NO_EXEC,
        lsim_kv_key_schema_check(lsim_kv_key_schema(LSIM_KV_KEYS_OBLIVIOUS),
                                 LSIM_KV_KEYS_OBLIVIOUS, eb));
  OK(lsim_kv_key_schema_check(lsim_kv_key_schema(LSIM_KV_KEYS_ALORA),
                              LSIM_KV_KEYS_ALORA, eb));
  /* the consequence, measured by the cache itself: with oblivious keys a
  ** Q-adapted request hits the base's blocks (all corrupt); with the
  ** complete identity it hits none */
  cache_fx c;
  cache_open(&c, 16, 16);
  kfx base, a;
  fx_base(&base);
  fx_lora(&a, "A", T_Q0, 1);
  lsim_kv_keys kb, ka, tb, ta;
  keys_of(&base, LSIM_KV_KEYS_OBLIVIOUS, &kb);
  keys_of(&a, LSIM_KV_KEYS_OBLIVIOUS, &ka);
  keys_of(&base, LSIM_KV_KEYS_ALORA, &tb);
  keys_of(&a, LSIM_KV_KEYS_ALORA, &ta);
  lsim_prefix_receipt r = LSIM_PREFIX_RECEIPT_INIT;
  lsim_digest ns0 = KD("tenant-0");
  OK(lsim_prefix_lookup(c.pc, 0, &ns0, &kb, &tb, -1, &r, eb));
  OK(lsim_prefix_publish(c.pc, &r, &kb, &tb, -1, -1, NULL, eb));
  OK(lsim_prefix_unref(c.pc, &r, eb));
  OK(lsim_prefix_lookup(c.pc, 0, &ns0, &ka, &ta, 0, &r, eb));
  cr_assert_eq(r.hit_blocks, 4);
  cr_assert_eq(r.corrupt_blocks, 4, "the audit sees cross-adapter reuse");
  OK(lsim_prefix_unref(c.pc, &r, eb));
  OK(lsim_prefix_lookup(c.pc, 0, &ns0, &tb, NULL, -1, &r, eb));
  OK(lsim_prefix_publish(c.pc, &r, &tb, NULL, -1, -1, NULL, eb));
  OK(lsim_prefix_unref(c.pc, &r, eb));
  OK(lsim_prefix_lookup(c.pc, 0, &ns0, &ta, &ta, 0, &r, eb));
  cr_assert_eq(r.hit_blocks, 0, "complete keys: no exact reuse");
  cr_assert_eq(r.corrupt_blocks, 0);
  OK(lsim_prefix_unref(c.pc, &r, eb));
  lsim_kv_keys_release(&kb);
  lsim_kv_keys_release(&ka);
  lsim_kv_keys_release(&tb);
  lsim_kv_keys_release(&ta);
  cache_close(&c); /* checks the cache and that every page went back */
}

Test(loop8, prompt_logit_equivalence_overclaimed) {
  lsim_kv_graph g = {LSIM_KV_ARCH_SERIAL, 2, KD("g")};
  lsim_kv_closure c;
  /* an LM-head-only adapter: K/V and hidden states equal the base's, the
  ** prompt logits do not */
  OK(lsim_kv_closure_of(&g, T_LM, 1, &c, eb));
  OK(lsim_kv_reuse_from_base(&c, LSIM_KV_OBJ_KV, eb));
  OK(lsim_kv_reuse_from_base(&c, LSIM_KV_OBJ_HIDDEN, eb));
  FAILS(LSIM_E_KV_REUSE_LOGITS,
        lsim_kv_reuse_from_base(&c, LSIM_KV_OBJ_LOGITS, eb));
  /* Q in the last layer: K/V equal, hidden not */
  OK(lsim_kv_closure_of(&g, T_Q1, 1, &c, eb));
  OK(lsim_kv_reuse_from_base(&c, LSIM_KV_OBJ_KV, eb));
  FAILS(LSIM_E_KV_REUSE_HIDDEN,
        lsim_kv_reuse_from_base(&c, LSIM_KV_OBJ_HIDDEN, eb));
  /* the switch keeps all K/V rows but recomputes the logits */
  kfx base, lm;
  fx_base(&base);
  fx_lora(&lm, "lm", T_LM, 1);
  lsim_kv_switch s;
  OK(lsim_kv_switch_of(&base.m, &lm.m, &s, eb));
  cr_assert_eq(s.kv_rows, 4);
  cr_assert_not(s.logits_reusable);
  cr_assert_eq(s.action, LSIM_KV_ACT_RECOMPUTE_LOGITS);
}

/* ==== loop 9: scheduler and observability =================================
** The hand-driven one-worker engine of test_sched.c; detection here is by
** the event ledger and the interval rows the engine emits, not by an error
** code: these failures are about what the scheduler does. */

/* ---- a hand-driven engine (one worker, unit-tick world) ----------------- */

#include "sched_driver.h"
}

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


Test(loop9, feasibility_readiness_collapsed) {
  lsim_pred_req r[NSNAP];
  lsim_pred_slot s[NSNAP];
  lsim_pred_worker w;
  snapshot(r, s, &w);
  /* the cold request is feasible but not ready; stale generation and rank
  ** above the worker are not even feasible */
  cr_assert(lsim_pred_feasible(&r[R_COLD], &w, &s[R_COLD]));
  cr_assert_not(lsim_pred_ready(&r[R_COLD], &w, &s[R_COLD]));
  cr_assert_not(lsim_pred_feasible(&r[R_STALE], &w, &s[R_STALE]));
  cr_assert_not(lsim_pred_feasible(&r[R_RANK], &w, &s[R_RANK]));
  /* a copy in flight is resident but not ready */
  lsim_pred_req q = r[R_HOT];
  lsim_pred_slot copying = {LSIM_PSLOT_RESIDENT, 7, 0};
  cr_assert_not(lsim_pred_ready(&q, &w, &copying));
  /* preference cannot make cold or unsupported work executable: an infinite
  ** affinity bonus on every failed predicate selects none of them */
  r[R_COLD].affinity_bonus = INT64_MAX;
  r[R_STALE].affinity_bonus = INT64_MAX;
  r[R_RANK].affinity_bonus = INT64_MAX;
  int64_t service[4] = {0, 0, 0, 0};
  int f[NSNAP], rd[NSNAP], sel[NSNAP], nf, nr, ns;
  lsim_pred_select(r, s, NSNAP, &w, service, NULL, 0, 64, NSNAP, f, &nf, rd,
                   &nr, sel, &ns);
  cr_assert_eq(nf, 3, "feasible: hot, cold, peer");
  cr_assert_eq(nr, 2, "ready: hot, peer");
  cr_assert_eq(ns, 2);
  for (int i = 0; i < ns; i++)
    cr_assert(sel[i] == R_HOT || sel[i] == R_PEER);
}

Test(loop9, load_starvation_hidden) {
  static drv d;
  /* resident_greedy: hot work progresses every tick, cold B never loads; the
  ** engine's load-starvation interval for B stays open over the window,
  ** separate from service intervals (B never became execution-ready) */
  drv_init(&d, "resident_greedy", "none", 64, 1);
  witness(&d);
  cr_assert_eq(d.svc[HOT], 6);
  cr_assert_eq(d.svc[COLD], 0);
  int load = 0;
  for (int i = 0; i < d.niv; i++) {
    cr_assert_str_eq(d.iv[i].kind, "load", "no service interval for B");
    load++;
    cr_assert_eq(d.iv[i].entity, AD_B);
    cr_assert_eq(d.iv[i].end - d.iv[i].start, 6);
    cr_assert_str_eq(d.iv[i].closed_by, "open");
  }
  cr_assert_eq(load, 1);
  drv_free(&d);
  /* recovery: deficit aging with age-triggered prefetch publishes B at tick
  ** 3 and closes the interval by publication; c0 is served */
  static drv e;
  drv_init(&e, "deficit_aging", "age_triggered", 64, 1);
  witness(&e);
  cr_assert_eq(e.svc[COLD], 1);
  cr_assert_gt(e.niv, 0);
  for (int i = 0; i < e.niv; i++) {
    cr_assert_str_neq(e.iv[i].closed_by, "open");
    if (!strcmp(e.iv[i].kind, "load")) {
      cr_assert_eq(e.iv[i].end - e.iv[i].start, 3);
      cr_assert_str_eq(e.iv[i].closed_by, "published");
    }
  }
  drv_free(&e);
}

Test(loop9, service_debited_before_commit) {
  static drv d;
  drv_init(&d, "deficit_aging", "none", 64, 1);
  arrive(&d, 0, 1, HOT, AD_A);
  step(&d, 0, 1);
  completions(&d, 1, 1);
  step(&d, 1, 1);
  cr_assert(d.busy);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  /* the iteration fails: selected, but nothing published */
  cr_assert_eq(lsim_engine_iter_done(d.e, 0, 2, 0, &eb), 0, "%s", eb.msg);
  d.busy = 0;
  cr_assert_eq(count_kind(&d, LSIM_EV_ITERATION_SELECTED, NULL), 1);
  cr_assert_eq(count_kind(&d, LSIM_EV_COMPLETED_SERVICE_DEBITED, NULL), 0);
  cr_assert_eq(d.svc[HOT], 0, "no phantom service");
  /* the completion row records the failure; no "ok" completion exists */
  cr_assert_eq(count_kind(&d, LSIM_EV_ITERATION_COMPLETED, "failed"), 1);
  cr_assert_eq(count_kind(&d, LSIM_EV_ITERATION_COMPLETED, "ok"), 0);
  /* recovery: the request is not stranded; the next step plans its lost
  ** prefill again, and its service is debited once, on that success */
  step(&d, 3, 1);
  cr_assert(d.busy, "the failed request's prefill was not planned again");
  cr_assert_eq(d.sel[3], 1);
  cr_assert_eq(d.plan.n, 1);
  cr_assert_eq(d.plan.e[0].phase, LSIM_PHASE_PREFILL);
  completions(&d, 4, 1);
  cr_assert_eq(count_kind(&d, LSIM_EV_ITERATION_COMPLETED, "ok"), 1);
  cr_assert_eq(count_kind(&d, LSIM_EV_COMPLETED_SERVICE_DEBITED, NULL), 1);
  cr_assert_eq(count_kind(&d, LSIM_EV_REQUEST_FINISHED, NULL), 1);
  cr_assert_eq(d.svc[HOT], 1, "the prompt once");
  drv_free(&d);
}

Test(loop9, recovery_observability_incomplete) {
  static drv d;
  drv_init(&d, "fcfs", "none", 8, 1);
  d.copy_ticks = 1;
  d.fail_loads = 1;
  lsim_worker_view v;
  arrive(&d, 0, 7, COLD, AD_B);
  step(&d, 0, 1);
  lsim_engine_worker_view(d.e, 0, &v);
  cr_assert_eq(v.free_pages, 5, "2 adapter + 1 KV pages reserved");
  completions(&d, 1, 1); /* the copy fails */
  /* page restoration is observable at once */
  lsim_engine_worker_view(d.e, 0, &v);
  cr_assert_eq(v.free_pages, 8);
  cr_assert_eq(v.reserved_pages, 0);
  cr_assert_eq(count_kind(&d, LSIM_EV_ADAPTER_LOAD_FAILED, NULL), 1);
  cr_assert_eq(count_kind(&d, LSIM_EV_COMPLETED_SERVICE_DEBITED, NULL), 0);
  d.copy_ticks = 0;
  step(&d, 3, 1);
  completions(&d, 3, 1);
  step(&d, 3, 1);
  completions(&d, 4, 1);
  /* attempt ids 1 and 2, the failed generation named, the retry's newer */
  int att[2], na = 0;
  for (int i = 0; i < d.nev; i++)
    if (d.ev[i].kind == LSIM_EV_ADAPTER_LOAD_STARTED && na < 2)
      att[na++] = d.ev[i].attempt;
  cr_assert_eq(na, 2);
  cr_assert_eq(att[0], 1);
  cr_assert_eq(att[1], 2);
  const lsim_event *fail = first_kind(&d, LSIM_EV_ADAPTER_LOAD_FAILED);
  const lsim_event *pub = first_kind(&d, LSIM_EV_ADAPTER_GENERATION_PUBLISHED);
  cr_assert_not_null(pub);
  cr_assert_gt(pub->generation, fail->generation);
  /* request age preserved: the queue arrival is still tick 0 and the request
  ** finishes once, debited once */
  cr_assert_eq(first_kind(&d, LSIM_EV_QUEUE_ENQUEUED)->tick, 0);
  cr_assert_eq(count_kind(&d, LSIM_EV_QUEUE_ENQUEUED, NULL), 1);
  cr_assert_eq(count_kind(&d, LSIM_EV_COMPLETED_SERVICE_DEBITED, NULL), 1);
  cr_assert_not_null(first_kind(&d, LSIM_EV_REQUEST_FINISHED));
  lsim_engine_worker_view(d.e, 0, &v);
  cr_assert_eq(v.kv_pages, 0);
  cr_assert_eq(v.reserved_pages, 0);
  cr_assert_eq(v.free_pages + v.adapter_pages, 8, "pool conserved");
  drv_free(&d); /* lsim_engine_check */
}

/* ==== loop 10: backend representations, evidence and release =============
** The five-row transaction of test_loop10.c through the Punica, S-LoRA,
** PEFT and vLLM layouts of backends/cpu_ref/repr.c. */

static void l10_is(const lsim_qmat *m, int rows, int cols, const char *spec,
                   const char *what) {
  lsim_qmat w = LSIM_QMAT_INIT;
  qm(&w, rows, cols, spec);
  lsim_errbuf e = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_ref_compare(&w, m, what, &e), 0, "%s", e.msg);
  lsim_qmat_clear(&w);
}

#include "loop10_world.h"


static void exact_table(const all4 *a, int which, const l10fx *f) {
  lsim_qmat d = LSIM_QMAT_INIT, y = LSIM_QMAT_INIT, z = LSIM_QMAT_INIT;
  OK(eval_one(a, which, &f->X, NULL, &d, eb));
  l10_is(&d, T, DOUT, L10_DELTA, LNAME[which]);
  OK(eval_one(a, which, &f->X, &f->base, &y, eb));
  l10_is(&y, T, DOUT, L10_Y, LNAME[which]);
  OK(lsim_qmat_copy(&z, &f->base, eb));
  OK(eval_one(a, which, &f->X, &z, &z, eb));
  l10_is(&z, T, DOUT, L10_Y, LNAME[which]);
  lsim_qmat_clear(&d);
  lsim_qmat_clear(&y);
  lsim_qmat_clear(&z);
}

#define REJECTS(code, lay, a, which, f)                                    \
  do {                                                                     \
    FAILS(code, lsim_repr_##lay##_validate(&(a)->lay##_field, eb));        \
    lsim_qmat o_ = LSIM_QMAT_INIT;                                         \
    FAILS(code, eval_one((a), (which), &(f)->X, NULL, &o_, eb));           \
    cr_assert_null(o_.v, "a failed evaluation left an output allocated"); \
  } while (0)
#define punica_field pu
#define slora_field sl
#define peft_field pf
#define vllm_field vl

Test(loop10, backend_representation_normalized_away) {
  l10fx f;
  l10fx_init(&f);
  all4 a;
  memset(&a, 0, sizeof a);
  all4_build(&a, &f);
  /* each backend's own metadata contract is checked by its own validator,
  ** with its own code: one layout's coordinates are not another's */
  a.vl.token_slot[0] = 0; /* vLLM: token of lora 11 in the slot of 22 */
  REJECTS(LSIM_E_REPR_SLOT, vllm, &a, L_VLLM, &f);
  a.vl.token_slot[0] = 1;
  a.sl.row_index[0] = 2; /* S-LoRA: a compact index past the adapters */
  REJECTS(LSIM_E_REPR_INDEX, slora, &a, L_SLORA, &f);
  a.sl.row_index[0] = 0;
  a.pu.pA[0] = &a.pu.store_A[1]; /* Punica: segment pointer to B's entry */
  REJECTS(LSIM_E_REPR_POINTER, punica, &a, L_PUNICA, &f);
  a.pu.pA[0] = &a.pu.store_A[0];
  a.pf.sub_mod[0] = 1; /* PEFT: sub-batch names swapped */
  a.pf.sub_mod[1] = 0;
  REJECTS(LSIM_E_REPR_NAME, peft, &a, L_PEFT, &f);
  a.pf.sub_mod[0] = 0;
  a.pf.sub_mod[1] = 1;
  /* restored, all four give the article's exact table */
  for (int w = 0; w < L__COUNT; w++)
    exact_table(&a, w, &f);
  all4_release(&a);
  l10fx_fini(&f);
}

/* What this proves: lorasim's lifecycle is checked separately from output
** equality.  Shadow-copy publication and drain-then-overwrite give the same
** new output, yet the overwrite path is refused while a lease and its
** last-use event are live; only the shadow path is legal in flight.  It
** does not prove anything about a real backend's unload/hotswap safety. */
Test(loop10, lifecycle_parity_overclaimed) {
  hx x;
  hx_init(&x);
  lsim_errbuf eb_ = LSIM_ERRBUF_INIT;
  lsim_hs_handle h;
  cr_assert_eq(lsim_hs_overwrite(x.h, 0, &x.new_d, &h, &eb_),
               LSIM_E_RES_REFCOUNT, "%s", eb_.msg);
  cr_assert_eq(lsim_hs_unlease(x.h, &x.old_lease, &eb_), 0);
  cr_assert_eq(lsim_hs_overwrite(x.h, 0, &x.new_d, &h, &eb_),
               LSIM_E_RES_EVENT_PENDING, "%s", eb_.msg);
  lsim_hs_handle cur;
  lsim_hs_lookup(x.h, 0, &cur, NULL);
  cr_assert(lsim_digest_eq(&cur.digest, &x.old_d), "nothing overwritten");
  cr_assert_eq(lsim_hs_catalog_gen(x.h), 8);
  /* recovery: once the event completes the overwrite is legal and
  ** publishes a new generation of the slot and catalog */
  cr_assert_eq(lsim_hs_event_complete(x.h, 7, &eb_), 0);
  cr_assert_eq(lsim_hs_overwrite(x.h, 0, &x.new_d, &h, &eb_), 0, "%s",
               eb_.msg);
  cr_assert_eq(h.slot, 7);
  cr_assert_gt(h.slot_gen, 12);
  cr_assert_eq(lsim_hs_catalog_gen(x.h), 9);
  cr_assert(lsim_digest_eq(&h.digest, &x.new_d));
  lsim_hs_release_all(x.h);
}

/* What this proves: the exact executor's answer (`lorasim exec`) is
** algebraic only: exact rational delta and y, plan metadata, and no
** latency, throughput, memory or timing figure that a release note could
** quote as measured.  It does not prove that docs/BENCHMARKS.md is free of
** overclaims; that page is reviewed by hand. */
Test(loop10, numeric_parity_called_performance_parity, .init = mk_tmp,
     .fini = rm_tmp) {
  char args[512];
  snprintf(args, sizeof args,
           "exec --in '%s/fixtures/exec/spec_example.json' --path all",
           LSIM_TEST_DIR);
  cr_assert_eq(lorasim(args), 0, "%s", out);
  cr_assert(strstr(out, "\"delta\""), "%s", out);
  cr_assert(strstr(out, "\"1/2\""), "exact rationals: %s", out);
  static const char *const perf[] = {"time", "latency", "throughput", "_ms",
                                     "seconds", "tokens_per", "bandwidth",
                                     "speedup"};
  for (size_t i = 0; i < sizeof perf / sizeof perf[0]; i++)
    cr_assert_null(strstr(out, perf[i]), "exec claims '%s': %s", perf[i], out);
}

/* ==== loop 10: source_claim_ceiling_exceeded ===============================
** Every runs_summary figure carries an evidence class (exact, measured,
** modeled, cited) in runs_evidence; the claim audit (sim/audit.c) refuses
** a class above what the figure's source supports under the run's backend.
** Injected: three overclaims (a `model` run's iteration time called
** measured, a latency derived from bytes called measured, a ratio to a
** cited baseline called measured as if both ran here) through the writer,
** and a forged row in a real run's database.  Consequence prevented: the
** writer stores nothing (not even the honest claims beside the forged one)
** and `lorasim audit` rejects the forged database.  Recovery: relabelled to
** the ceiling, the claims store and the audit passes. */

static int64_t sql_int(sqlite3 *h, const char *sql) {
  sqlite3_stmt *st;
  cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK, "%s: %s",
               sql, sqlite3_errmsg(h));
  cr_assert_eq(sqlite3_step(st), SQLITE_ROW, "%s", sql);
  int64_t v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return v;
}

Test(loop10, source_claim_ceiling_exceeded, .init = mk_tmp, .fini = rm_tmp) {
  /* a real run on the executing backend: every figure has its class, and
  ** the simulated times stay modeled although cpu_ref timed each iteration */
  char args[512], path[512];
  snprintf(args, sizeof args,
           "replay '%s/fixtures/replay/reload_version.json' --backend cpu_ref "
           "--quiet --no-plots --db r.db", LSIM_TEST_DIR);
  cr_assert_eq(lorasim(args), 0, "%s", out);
  cr_assert_eq(lorasim("audit r.db"), 0, "%s", out);
  snprintf(path, sizeof path, "%s/r.db", tmpdir);
  sqlite3 *h;
  cr_assert_eq(sqlite3_open(path, &h), SQLITE_OK);
  cr_assert_gt(sql_int(h, "SELECT count(*) FROM runs_summary"), 40);
  cr_assert_eq(sql_int(h, "SELECT count(*) FROM runs_summary s WHERE NOT "
                          "EXISTS (SELECT 1 FROM runs_evidence e WHERE "
                          "e.key = s.key)"), 0);
  cr_assert_eq(sql_int(h, "SELECT count(*) FROM runs_evidence WHERE key IN "
                          "('ttft_p50_ms','sim_seconds','e2e_p99_ms') AND "
                          "class = 'modeled' AND source = 'sim_time'"), 3);
  cr_assert_eq(sql_int(h, "SELECT count(*) FROM runs_evidence WHERE key = "
                          "'requests_completed' AND class = 'exact'"), 1);
  cr_assert_eq(sql_int(h, "SELECT count(*) FROM runs_evidence WHERE class IN "
                          "('measured','cited')"), 0);

  /* detection in a stored run: a forged class */
  cr_assert_eq(sqlite3_exec(h, "UPDATE runs_evidence SET class = 'measured' "
                               "WHERE key = 'ttft_p99_ms'", NULL, NULL, NULL),
               SQLITE_OK);
  cr_assert_eq(lorasim("audit r.db"), 1, "%s", out);
  cr_assert(strstr(out, "E_CLAIM_CEILING") && strstr(out, "ttft_p99_ms"),
            "%s", out);
  cr_assert(strstr(out, "1 finding"), "%s", out);
  /* a figure without any class is an uncontrolled claim */
  cr_assert_eq(sqlite3_exec(h, "UPDATE runs_evidence SET class = 'modeled' "
                               "WHERE key = 'ttft_p99_ms'; DELETE FROM "
                               "runs_evidence WHERE key = 'iterations'",
                            NULL, NULL, NULL), SQLITE_OK);
  cr_assert_eq(lorasim("audit r.db"), 1, "%s", out);
  cr_assert(strstr(out, "E_CLAIM_MISSING") && strstr(out, "iterations"), "%s",
            out);
  /* recovery: relabelled (and labelled), the audit passes */
  cr_assert_eq(sqlite3_exec(h, "INSERT INTO runs_evidence VALUES(1, "
                               "'iterations', 'exact', 'log', NULL, 0)",
                            NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(h);
  cr_assert_eq(lorasim("audit r.db"), 0, "%s", out);

  /* the writer: all or nothing */
  lsim_db *db;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  snprintf(path, sizeof path, "%s/w.db", tmpdir);
  cr_assert_eq(lsim_db_open(&db, path, &eb), 0, "%s", eb.msg);
  lsim_run_info info = {"claims", "claims.json", "0000000000000000000000000000"
                        "000000000000000000000000000000000000", 1, "model",
                        "fcfs", "lru", "none", 1000, 1, NULL, NULL, NULL};
  cr_assert_eq(lsim_db_begin_run(db, &info, &eb), 0, "%s", eb.msg);
  lsim_claim honest = {"ttft_p50_ms", LSIM_EVID_MODELED, LSIM_SRC_SIM_TIME,
                       LSIM_SRC_NONE, 1};
  struct {
    const char *backend;
    lsim_claim forged;
    int ceiling;
  } inj[] = {
      {"model", {"iteration_ms", LSIM_EVID_MEASURED, LSIM_SRC_BACKEND_TIME,
                 LSIM_SRC_NONE, 1}, LSIM_EVID_MODELED},
      {"cuda", {"h2d_latency_ms", LSIM_EVID_MEASURED, LSIM_SRC_BYTES,
                LSIM_SRC_NONE, 1}, LSIM_EVID_MODELED},
      {"cuda", {"speedup_vs_best", LSIM_EVID_MEASURED, LSIM_SRC_BACKEND_TIME,
                LSIM_SRC_BASELINE, 1}, LSIM_EVID_CITED},
  };
  sqlite3 *wh = lsim_db_handle(db);
  for (size_t i = 0; i < sizeof inj / sizeof inj[0]; i++) {
    lsim_claim two[2] = {honest, inj[i].forged};
    cr_assert_eq(lsim_claims_store(db, inj[i].backend, two, 2, &eb),
                 LSIM_E_CLAIM_CEILING, "%s", inj[i].forged.key);
    cr_assert(strstr(eb.msg, inj[i].forged.key), "%s", eb.msg);
    cr_assert_eq(lsim_claim_ceiling(&inj[i].forged, inj[i].backend),
                 inj[i].ceiling, "%s", inj[i].forged.key);
    /* nothing claimed: no table yet, or no row */
    cr_assert_eq(sql_int(wh, "SELECT count(*) FROM sqlite_master WHERE "
                             "name = 'runs_evidence'") == 0 ||
                     sql_int(wh, "SELECT count(*) FROM runs_evidence") == 0,
                 1, "%s", inj[i].forged.key);
  }
  /* recovery: relabel each to its ceiling; stored, one row per claim */
  for (size_t i = 0; i < sizeof inj / sizeof inj[0]; i++) {
    lsim_claim two[2] = {honest, inj[i].forged};
    two[1].claimed = inj[i].ceiling;
    cr_assert_eq(lsim_claims_store(db, inj[i].backend, two, 2, &eb), 0, "%s",
                 eb.msg);
  }
  cr_assert_eq(sql_int(wh, "SELECT count(*) FROM runs_evidence"), 4);
  cr_assert_eq(sql_int(wh, "SELECT count(*) FROM runs_evidence WHERE key = "
                           "'speedup_vs_best' AND class = 'cited' AND "
                           "operand = 'baseline'"), 1);
  lsim_db_close(db);
}
