/* One-field mutations of valid residency and lifecycle fixtures, each
** refused with its own stable code (docs/RELIABILITY.md, "Malformed-input
** corpus"):
**
**   pool      the sixteen-slot fixture of test_residency.c, at rest and with
**             C's load transaction open (b retiring, 8..15 reserved): one
**             field (state, owner or generation) of one slot record, or one
**             entry of an owner's slot list, then lsim_res_check
**   handles   the hotswap fixture of test_hotswap.c (alias 0 on slot 7 at
**             generations 12/31 under catalog 8, a lease on it, a validated
**             shadow copy in slot 8): one field of a lease at launch, of the
**             expected handle at compare-and-publish, of the handle a
**             "rollback" names
**   requests  one field of a transaction request or of a victim list
*/
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "engine/hotswap.h"
#include "engine/residency.h"

/* ---- the pool ------------------------------------------------------------- */

enum { A = 0, B = 1, C = 2, D = 3 };

static lsim_digest digest_of(int a) {
  char s[32];
  int n = snprintf(s, sizeof s, "fixture-adapter-%d", a);
  lsim_digest d;
  cr_assert_eq(lsim_sha256(s, (size_t)n, &d, NULL), 0);
  return d;
}

static lsim_digest kabi(void) {
  lsim_digest d;
  cr_assert_eq(lsim_sha256("kabi", 4, &d, NULL), 0);
  return d;
}

static void load_plain(lsim_res *r, int a) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_res_req q = {LSIM_TXN_PREFETCH, a, -1, 0, 0};
  lsim_digest d = digest_of(a);
  int64_t t, gen;
  int kv;
  cr_assert_eq(lsim_res_begin_with(r, &q, NULL, 0, &t, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_res_copy_start(r, t, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_res_copy_done(r, t, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_res_validate(r, t, &d, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_res_publish(r, t, 0, &gen, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_res_commit(r, t, 0, &kv, &eb), 0, "%s", eb.msg);
}

/* r0's KV on 0..3, a on 4..7 (refcount 1, pinned), b on 8..11 (idle),
** 12..15 free; with `open_c`, C's load txn (victim b) holds 8..15. */
static lsim_res *pool(int open_c, int64_t *txn) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  int64_t pages[4] = {4, 4, 4, 4};
  lsim_res_cfg cfg = {16, 64, 4, pages, 0, kabi()};
  lsim_res *r;
  cr_assert_eq(lsim_res_new(&r, &cfg, &eb), 0, "%s", eb.msg);
  lsim_digest k = kabi();
  for (int i = 0; i < 4; i++) {
    lsim_digest d = digest_of(i);
    cr_assert_eq(lsim_res_register(r, i, &d, &k, &eb), 0, "%s", eb.msg);
  }
  load_plain(r, D);
  load_plain(r, A);
  load_plain(r, B);
  lsim_res_req q0 = {LSIM_TXN_KV, A, 0, 4, 0};
  int victims[1] = {D}, kv;
  int64_t t;
  cr_assert_eq(lsim_res_begin_with(r, &q0, victims, 1, &t, &eb), 0, "%s",
               eb.msg);
  cr_assert_eq(lsim_res_commit(r, t, 1, &kv, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_res_pin(r, A, +1, &eb), 0);
  cr_assert_eq(lsim_res_bind(r, B, 2, &eb), 0);
  cr_assert_eq(lsim_res_unbind(r, B, 3, &eb), 0);
  if (open_c) {
    lsim_res_req q = {LSIM_TXN_LOAD, C, 1, 2, 2};
    int vb[1] = {B};
    cr_assert_eq(lsim_res_begin_with(r, &q, vb, 1, txn, &eb), 0, "%s",
                 eb.msg);
  }
  cr_assert_eq(lsim_res_check(r, &eb), 0, "%s", eb.msg);
  return r;
}

enum { S_STATE, S_OWNER, S_GEN, S_LIST };
enum { OWNER_TXN = -100, OWNER_TXN_NEXT = -101 }; /* resolved at run time */

typedef struct pcase {
  const char *name;
  int open_c;      /* fixture with C's txn open */
  int64_t slot;    /* slot record to mutate (S_LIST: the list index) */
  int field;
  int64_t value;   /* new state / owner / generation, or slot for S_LIST;
                      S_GEN: added to the generation */
  int list_owner;  /* S_LIST: the adapter whose list entry changes */
  lsim_err code;
} pcase;

static const pcase pool_cases[] = {
  /* KV slots of r0 (object 0 on 0..3) */
  {"KV slot marked free", 0, 0, S_STATE, LSIM_SLOT_FREE, 0, LSIM_E_RES_OWNERSHIP},
  {"KV slot marked adapter", 0, 1, S_STATE, LSIM_SLOT_ADAPTER, 0, LSIM_E_RES_OWNERSHIP},
  {"KV slot marked reserved", 0, 2, S_STATE, LSIM_SLOT_RESERVED, 0, LSIM_E_RES_OWNERSHIP},
  {"KV slot with an out-of-range state", 0, 3, S_STATE, 7, 0, LSIM_E_RES_OWNERSHIP},
  {"KV slot naming another object", 0, 0, S_OWNER, 1, 0, LSIM_E_RES_OWNERSHIP},
  {"KV slot naming no object", 0, 1, S_OWNER, -1, 0, LSIM_E_RES_OWNERSHIP},
  {"KV slot one generation ahead", 0, 2, S_GEN, 1, 0, LSIM_E_RES_STALE_GEN},
  {"KV slot one generation behind", 0, 3, S_GEN, -1, 0, LSIM_E_RES_STALE_GEN},
  /* adapter slots of a (4..7) */
  {"adapter slot marked free", 0, 4, S_STATE, LSIM_SLOT_FREE, 0, LSIM_E_RES_OWNERSHIP},
  {"adapter slot marked KV", 0, 5, S_STATE, LSIM_SLOT_KV, 0, LSIM_E_RES_OWNERSHIP},
  {"adapter slot marked reserved", 0, 6, S_STATE, LSIM_SLOT_RESERVED, 0, LSIM_E_RES_OWNERSHIP},
  {"adapter slot naming b", 0, 7, S_OWNER, B, 0, LSIM_E_RES_OWNERSHIP},
  {"adapter slot naming an unknown adapter", 0, 4, S_OWNER, 9, 0, LSIM_E_RES_OWNERSHIP},
  {"adapter slot naming absent c", 0, 5, S_OWNER, C, 0, LSIM_E_RES_OWNERSHIP},
  {"adapter slot one generation ahead", 0, 6, S_GEN, 1, 0, LSIM_E_RES_STALE_GEN},
  {"adapter slot one generation behind", 0, 7, S_GEN, -1, 0, LSIM_E_RES_STALE_GEN},
  {"idle b's slot one generation ahead", 0, 8, S_GEN, 1, 0, LSIM_E_RES_STALE_GEN},
  /* free slots (12..15) */
  {"free slot with an owner", 0, 12, S_OWNER, 0, 0, LSIM_E_RES_OWNERSHIP},
  {"free slot marked adapter", 0, 13, S_STATE, LSIM_SLOT_ADAPTER, 0, LSIM_E_RES_OWNERSHIP},
  {"free slot marked KV", 0, 14, S_STATE, LSIM_SLOT_KV, 0, LSIM_E_RES_OWNERSHIP},
  {"free slot marked reserved", 0, 15, S_STATE, LSIM_SLOT_RESERVED, 0, LSIM_E_RES_LEAK},
  /* owners' slot lists */
  {"a lists a KV slot", 0, 0, S_LIST, 0, A, LSIM_E_RES_DOUBLE_OWNER},
  {"a lists its own slot twice", 0, 1, S_LIST, 4, A, LSIM_E_RES_DOUBLE_OWNER},
  {"a lists b's slot", 0, 2, S_LIST, 9, A, LSIM_E_RES_DOUBLE_OWNER},
  {"a lists slot 16 of 16", 0, 3, S_LIST, 16, A, LSIM_E_RES_DOUBLE_OWNER},
  {"a lists slot -1", 0, 0, S_LIST, -1, A, LSIM_E_RES_DOUBLE_OWNER},
  {"a lists a free slot", 0, 1, S_LIST, 13, A, LSIM_E_RES_OWNERSHIP},
  {"b lists a free slot", 0, 2, S_LIST, 12, B, LSIM_E_RES_OWNERSHIP},
  /* with C's load txn open: 8..15 reserved by it, b retiring */
  {"reserved slot released to free", 1, 9, S_STATE, LSIM_SLOT_FREE, 0, LSIM_E_RES_OWNERSHIP},
  {"retiring victim's slot marked adapter", 1, 8, S_STATE, LSIM_SLOT_ADAPTER, 0, LSIM_E_RES_OWNERSHIP},
  {"reserved slot of another txn", 1, 12, S_OWNER, OWNER_TXN_NEXT, 0, LSIM_E_RES_OWNERSHIP},
  {"victim slot of another txn", 1, 10, S_OWNER, OWNER_TXN_NEXT, 0, LSIM_E_RES_OWNERSHIP},
  {"reserved slot marked KV", 1, 15, S_STATE, LSIM_SLOT_KV, 0, LSIM_E_RES_OWNERSHIP},
  {"a lists a reserved slot", 1, 0, S_LIST, 14, A, LSIM_E_RES_DOUBLE_OWNER},
  {"reserved slot of the KV part marked free", 1, 13, S_STATE, LSIM_SLOT_FREE, 0, LSIM_E_RES_OWNERSHIP},
};

Test(malformed_residency, pool_records) {
  for (size_t i = 0; i < sizeof pool_cases / sizeof pool_cases[0]; i++) {
    const pcase *c = &pool_cases[i];
    int64_t txn = -1;
    lsim_res *r = pool(c->open_c, &txn);
    lsim_errbuf eb = LSIM_ERRBUF_INIT;
    if (c->field == S_LIST) {
      lsim_res__mutate_list(r, c->list_owner, c->slot, c->value);
    } else {
      int st;
      int64_t owner, gen;
      lsim_res_slot(r, c->slot, &st, &owner, &gen);
      int64_t v = c->value == OWNER_TXN ? txn
                  : c->value == OWNER_TXN_NEXT ? txn + 1 : c->value;
      if (c->field == S_STATE)
        lsim_res__mutate_slot(r, c->slot, (int)v, owner, gen);
      else if (c->field == S_OWNER)
        lsim_res__mutate_slot(r, c->slot, st, v, gen);
      else
        lsim_res__mutate_slot(r, c->slot, st, owner, gen + v);
    }
    cr_expect_eq(lsim_res_check(r, &eb), c->code, "%s: expected %s, got %s",
                 c->name, lsim_err_name(c->code), eb.msg);
    lsim_res_release(r);
  }
}

/* ---- transaction requests and victims --------------------------------------- */

typedef struct tcase {
  const char *name;
  lsim_res_req q;    /* one field changed from {LOAD, C, 1, 2, 2} */
  int victims[2];
  int nvictims;      /* one field changed from {b} */
  lsim_err code;
} tcase;

static const tcase txn_cases[] = {
  {"pinned, referenced a as the victim", {LSIM_TXN_LOAD, C, 1, 2, 2}, {A}, 1, LSIM_E_RES_REFCOUNT},
  {"b listed twice", {LSIM_TXN_LOAD, C, 1, 2, 2}, {B, B}, 2, LSIM_E_RES_DUP_VICTIM},
  {"no victim for 8 pages and 4 free", {LSIM_TXN_LOAD, C, 1, 2, 2}, {B}, 0, LSIM_E_RES_NOSPACE},
  {"growth reserve beyond the pool", {LSIM_TXN_LOAD, C, 1, 2, 20}, {B}, 1, LSIM_E_RES_NOSPACE},
  {"initial KV beyond the pool", {LSIM_TXN_LOAD, C, 1, 30, 2}, {B}, 1, LSIM_E_RES_NOSPACE},
  {"absent d as the victim", {LSIM_TXN_LOAD, C, 1, 2, 2}, {D}, 1, LSIM_E_RES_NOT_ELIGIBLE},
  {"the loading adapter as its own victim", {LSIM_TXN_LOAD, C, 1, 2, 2}, {C}, 1, LSIM_E_RES_NOT_ELIGIBLE},
};

Test(malformed_residency, transaction_requests) {
  for (size_t i = 0; i < sizeof txn_cases / sizeof txn_cases[0]; i++) {
    const tcase *c = &txn_cases[i];
    int64_t t;
    lsim_res *r = pool(0, &t);
    lsim_errbuf eb = LSIM_ERRBUF_INIT;
    lsim_res_view before, after;
    lsim_res_view_get(r, &before);
    cr_expect_eq(lsim_res_begin_with(r, &c->q, c->victims, c->nvictims, &t,
                                     &eb),
                 c->code, "%s: expected %s, got %s", c->name,
                 lsim_err_name(c->code), eb.msg);
    /* refused before any page moved */
    lsim_res_view_get(r, &after);
    cr_expect(before.free == after.free && before.reserved == after.reserved &&
                  before.adapter == after.adapter && before.kv == after.kv,
              "%s: pages moved", c->name);
    cr_expect_eq(lsim_res_check(r, &eb), 0, "%s: %s", c->name, eb.msg);
    lsim_res_release(r);
  }
}

/* ---- hotswap handles ------------------------------------------------------------ */

typedef struct hs {
  lsim_hs *h;
  lsim_digest old_d, new_d;
  lsim_hs_lease lease;
  lsim_hs_handle cur;
} hs;

static void hs_init(hs *x) {
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
  lsim_hs_handle none = {-1, 0, 0, LSIM_DIGEST_INIT};
  cr_assert_eq(lsim_hs_publish(x->h, 0, &none, 7, &x->cur, &eb), 0, "%s",
               eb.msg);
  lsim_hs_lease l = LSIM_HS_LEASE_INIT;
  x->lease = l;
  cr_assert_eq(lsim_hs_resolve(x->h, 0, &x->lease, &eb), 0);
  /* the shadow copy of the next version, validated, not yet published */
  cr_assert_eq(lsim_hs_stage(x->h, 0, &x->new_d, 8, &s, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_hs_copy_done(x->h, 8, 1, &x->new_d, 0, 1, &eb), 0);
  cr_assert_eq(lsim_hs_launch(x->h, &x->lease, &eb), 0, "%s", eb.msg);
}

enum { H_SLOT, H_SLOT_GEN, H_PTR_GEN, H_DIGEST, H_BOUND };

static void mutate_handle(lsim_hs_handle *h, int f, int64_t v) {
  switch (f) {
  case H_SLOT: h->slot += v; break;
  case H_SLOT_GEN: h->slot_gen += v; break;
  case H_PTR_GEN: h->ptr_gen += v; break;
  case H_DIGEST: h->digest.b[(size_t)v] ^= 1; break;
  }
}

typedef struct hcase {
  const char *name;
  int field;
  int64_t value;
  lsim_err code;
} hcase;

/* a launch under a lease whose handle differs in one field */
static const hcase launch_cases[] = {
  {"lease names the shadow slot", H_SLOT, 1, LSIM_E_RES_STALE_HANDLE},
  {"lease names a free slot", H_SLOT, -7, LSIM_E_RES_STALE_HANDLE},
  {"lease names slot 10 of 10", H_SLOT, 3, LSIM_E_RES_STALE_HANDLE},
  {"lease one slot generation behind", H_SLOT_GEN, -1, LSIM_E_RES_STALE_HANDLE},
  {"lease one slot generation ahead", H_SLOT_GEN, 1, LSIM_E_RES_STALE_HANDLE},
  {"lease one pointer generation behind", H_PTR_GEN, -1, LSIM_E_RES_STALE_HANDLE},
  {"lease with another artifact digest", H_DIGEST, 0, LSIM_E_RES_STALE_HANDLE},
  {"lease with the digest's last byte changed", H_DIGEST, 31, LSIM_E_RES_STALE_HANDLE},
  {"lease not bound", H_BOUND, 0, LSIM_E_RES_STALE_HANDLE},
};

/* compare-and-publish of the shadow with an expected handle that differs */
static const hcase cas_cases[] = {
  {"expected handle on the shadow slot", H_SLOT, 1, LSIM_E_RES_CATALOG_CAS},
  {"expected handle on no slot", H_SLOT, -8, LSIM_E_RES_CATALOG_CAS},
  {"expected slot generation behind", H_SLOT_GEN, -1, LSIM_E_RES_CATALOG_CAS},
  {"expected pointer generation ahead", H_PTR_GEN, 1, LSIM_E_RES_CATALOG_CAS},
  {"expected another artifact", H_DIGEST, 5, LSIM_E_RES_CATALOG_CAS},
};

/* after the publication, mapping the alias back (a "rollback") to a
** handle that differs from the live one in one field */
static const hcase back_cases[] = {
  {"back to the retiring slot", H_SLOT, -1, LSIM_E_RES_BACKWARD},
  {"back to the new slot's older pointer generation", H_PTR_GEN, -1, LSIM_E_RES_BACKWARD},
  {"back to the new slot's older slot generation", H_SLOT_GEN, -1, LSIM_E_RES_BACKWARD},
  {"back to the new slot under the old digest", H_DIGEST, 0, LSIM_E_RES_BACKWARD},
  {"back to slot -1", H_SLOT, -9, LSIM_E_RES_BACKWARD},
};

Test(malformed_residency, hotswap_handles) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  for (size_t i = 0; i < sizeof launch_cases / sizeof launch_cases[0]; i++) {
    const hcase *c = &launch_cases[i];
    hs x;
    hs_init(&x);
    lsim_hs_lease l = x.lease;
    if (c->field == H_BOUND)
      l.bound = 0;
    else
      mutate_handle(&l.h, c->field, c->value);
    cr_expect_eq(lsim_hs_launch(x.h, &l, &eb), c->code, "%s: %s", c->name,
                 eb.msg);
    cr_assert_eq(lsim_hs_launch(x.h, &x.lease, &eb), 0, "%s", eb.msg);
    lsim_hs_release_all(x.h);
  }
  for (size_t i = 0; i < sizeof cas_cases / sizeof cas_cases[0]; i++) {
    const hcase *c = &cas_cases[i];
    hs x;
    hs_init(&x);
    lsim_hs_handle e = x.cur;
    mutate_handle(&e, c->field, c->value);
    cr_expect_eq(lsim_hs_publish(x.h, 0, &e, 8, NULL, &eb), c->code, "%s: %s",
                 c->name, eb.msg);
    /* the catalog did not move; the true expected handle publishes */
    cr_assert_eq(lsim_hs_catalog_gen(x.h), 8);
    cr_assert_eq(lsim_hs_publish(x.h, 0, &x.cur, 8, NULL, &eb), 0, "%s",
                 eb.msg);
    lsim_hs_release_all(x.h);
  }
  for (size_t i = 0; i < sizeof back_cases / sizeof back_cases[0]; i++) {
    const hcase *c = &back_cases[i];
    hs x;
    hs_init(&x);
    lsim_hs_handle nh;
    cr_assert_eq(lsim_hs_publish(x.h, 0, &x.cur, 8, &nh, &eb), 0, "%s",
                 eb.msg);
    lsim_hs_handle to = nh;
    if (c->field == H_DIGEST)
      to.digest = x.old_d;
    else
      mutate_handle(&to, c->field, c->value);
    cr_expect_eq(lsim_hs_republish(x.h, 0, &to, &eb), c->code, "%s: %s",
                 c->name, eb.msg);
    lsim_hs_handle now;
    lsim_hs_lookup(x.h, 0, &now, NULL);
    cr_expect_eq(now.slot, 8, "%s: the catalog moved", c->name);
    cr_assert_eq(lsim_hs_republish(x.h, 0, &nh, &eb), 0, "naming the live "
                 "handle is a no-op: %s", eb.msg);
    lsim_hs_release_all(x.h);
  }
}
