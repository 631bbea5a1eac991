/*
** test_compress_serve.c: serving identity of a compressed collection
** (engine/compress_res.c) with digests of real fits (compress/jd.c).
**
** One test per serving row of the article's compression failure lab:
**   - one core paired with a stale basis        -> E_CMP_STALE_BASIS
**   - source set changes under the same version -> E_CMP_SOURCE_SET
**   - basis published before its cores          -> E_CMP_PUBLISH_EARLY
**   - one TP rank publishes a new basis early   -> E_CMP_TP_SPLIT, rollback
** and the residency and scheduling rules: a basis is not evicted while a
** request of its cluster is in flight; an old generation retires only
** after its last lease; affinity never overrides a failed predicate.
*/
#include <criterion/criterion.h>
#include <string.h>

#include "compress/jd.h"
#include "engine/compress_res.h"

#define OK(call)                                                        \
  do {                                                                  \
    lsim_errbuf eb_ = LSIM_ERRBUF_INIT;                                 \
    lsim_errbuf *eb = &eb_;                                             \
    lsim_err rc_ = (call);                                              \
    cr_assert_eq(rc_, 0, "%s failed: %s: %s", #call, lsim_err_name(rc_), \
                 eb_.msg);                                              \
  } while (0)

#define FAILS(code, call)                                                 \
  do {                                                                    \
    lsim_errbuf eb_ = LSIM_ERRBUF_INIT;                                   \
    lsim_errbuf *eb = &eb_;                                               \
    lsim_err rc_ = (call);                                                \
    cr_assert_eq(rc_, code, "%s: got %s (%s), want %s", #call,            \
                 lsim_err_name(rc_), eb_.msg, lsim_err_name(code));       \
    cr_assert(eb_.msg[0] && eb_.msg[strlen(eb_.msg) - 1] != '.',          \
              "bad message '%s'", eb_.msg);                               \
  } while (0)

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
static void publish(lsim_cmp_catalog *cat, const char *label,
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

Test(serve, bundles_differ_and_fits_repeat) {
  bundle a, a2, b;
  make_bundle(&a, 1, 1);
  make_bundle(&a2, 1, 1);
  make_bundle(&b, 2, 1);
  cr_assert(lsim_digest_eq(&a.id, &a2.id), "a fit repeats bit for bit");
  cr_assert(!lsim_digest_eq(&a.id, &b.id));
  cr_assert(!lsim_digest_eq(&a.set, &b.set));
}

/* Failure lab: one core paired with a stale basis. */
Test(serve, lab_stale_basis_rejected) {
  bundle v1, v2;
  make_bundle(&v1, 1, 1);
  make_bundle(&v2, 2, 1);
  cr_assert(!lsim_digest_eq(&v1.basis[0], &v2.basis[0]));
  lsim_cmp_catalog cat = LSIM_CMP_CATALOG_INIT;
  publish(&cat, "coll-v1", &v1);
  OK(lsim_cmp_check_core(&cat, 1, &v1.id, &v1.basis[0], &v1.core[1], eb));
  publish(&cat, "coll-v2", &v2);
  /* the v1 core of adapter b loaded against the live v2 generation */
  FAILS(LSIM_E_CMP_STALE_BASIS,
        lsim_cmp_check_core(&cat, 1, &v1.id, &v1.basis[0], &v1.core[1], eb));
  /* right bundle id but a stale basis digest */
  FAILS(LSIM_E_CMP_STALE_BASIS,
        lsim_cmp_check_core(&cat, 1, &v2.id, &v1.basis[0], &v2.core[1], eb));
  /* a v2 core that was fitted against another basis */
  FAILS(LSIM_E_CMP_STALE_BASIS,
        lsim_cmp_check_core(&cat, 1, &v2.id, &v2.basis[0], &v1.core[1], eb));
  OK(lsim_cmp_check_core(&cat, 1, &v2.id, &v2.basis[0], &v2.core[1], eb));
  /* staging: a core naming another basis than the staged one */
  bundle v3;
  make_bundle(&v3, 3, 1);
  OK(lsim_cmp_register_version(&cat, "coll-v3", &v3.set, &v3.id, eb));
  OK(lsim_cmp_stage_begin(&cat, "coll-v3", &v3.id, 1, 3, eb));
  OK(lsim_cmp_stage_basis(&cat, 0, &v3.basis[0], eb));
  FAILS(LSIM_E_CMP_STALE_BASIS,
        lsim_cmp_stage_core(&cat, 0, 0, &v2.basis[0], &v2.core[0], eb));
  lsim_cmp_stage_abort(&cat);
  /* a lease taken on v1 and held across the swap stays launchable against
     prev; once prev is gone its launch fails closed */
  lsim_cmp_catalog c2 = LSIM_CMP_CATALOG_INIT;
  publish(&c2, "coll-v1", &v1);
  lsim_cmp_lease l;
  OK(lsim_cmp_acquire(&c2, 2, &l, eb));
  publish(&c2, "coll-v2", &v2);
  OK(lsim_cmp_launch_check(&c2, &l, eb));
  lsim_cmp_lease forged = l;
  forged.basis = v2.basis[0];
  FAILS(LSIM_E_CMP_STALE_BASIS, lsim_cmp_launch_check(&c2, &forged, eb));
  OK(lsim_cmp_release(&c2, &l, eb));
  OK(lsim_cmp_retire_prev(&c2, eb));
  FAILS(LSIM_E_CMP_STALE_BASIS, lsim_cmp_launch_check(&c2, &l, eb));
  lsim_cmp_catalog_release(&cat);
  lsim_cmp_catalog_release(&c2);
}

/* Failure lab: the source set changes under the same collection version. */
Test(serve, lab_source_set_change_needs_new_version) {
  bundle v1, changed;
  make_bundle(&v1, 1, 1);
  make_bundle(&changed, 2, 1);
  lsim_cmp_catalog cat = LSIM_CMP_CATALOG_INIT;
  publish(&cat, "coll-v1", &v1);
  FAILS(LSIM_E_CMP_SOURCE_SET,
        lsim_cmp_register_version(&cat, "coll-v1", &changed.set, &changed.id,
                                  eb));
  /* the same source set refitted into another bundle is also refused */
  FAILS(LSIM_E_CMP_BUNDLE_DIGEST,
        lsim_cmp_register_version(&cat, "coll-v1", &v1.set, &changed.id, eb));
  /* staging under the old label cannot smuggle the new bundle in */
  FAILS(LSIM_E_CMP_BUNDLE_DIGEST,
        lsim_cmp_stage_begin(&cat, "coll-v1", &changed.id, 1, 3, eb));
  /* registering the same thing again is idempotent; a new label works */
  OK(lsim_cmp_register_version(&cat, "coll-v1", &v1.set, &v1.id, eb));
  publish(&cat, "coll-v2", &changed);
  cr_assert_str_eq(cat.live.version, "coll-v2");
  cr_assert(lsim_digest_eq(&cat.live.source_set, &changed.set));
  lsim_cmp_catalog_release(&cat);
}

/* Failure lab: a basis published before its cores. */
Test(serve, lab_basis_before_cores_not_published) {
  bundle v1, v2;
  make_bundle(&v1, 1, 1);
  make_bundle(&v2, 2, 1);
  lsim_cmp_catalog cat = LSIM_CMP_CATALOG_INIT;
  publish(&cat, "coll-v1", &v1);
  OK(lsim_cmp_register_version(&cat, "coll-v2", &v2.set, &v2.id, eb));
  OK(lsim_cmp_stage_begin(&cat, "coll-v2", &v2.id, 1, 3, eb));
  OK(lsim_cmp_stage_basis(&cat, 0, &v2.basis[0], eb));
  OK(lsim_cmp_stage_core(&cat, 0, 0, &v2.basis[0], &v2.core[0], eb));
  FAILS(LSIM_E_CMP_PUBLISH_EARLY, lsim_cmp_publish(&cat, eb));
  /* nothing changed for the serving side: v1 is still live and whole */
  cr_assert(lsim_digest_eq(&cat.live.bundle, &v1.id));
  OK(lsim_cmp_check_core(&cat, 1, &v1.id, &v1.basis[0], &v1.core[1], eb));
  /* cores without their basis cannot publish either */
  lsim_cmp_stage_abort(&cat);
  OK(lsim_cmp_stage_begin(&cat, "coll-v2", &v2.id, 1, 3, eb));
  for (int i = 0; i < 3; i++)
    OK(lsim_cmp_stage_core(&cat, i, 0, &v2.basis[0], &v2.core[i], eb));
  FAILS(LSIM_E_CMP_PUBLISH_EARLY, lsim_cmp_publish(&cat, eb));
  OK(lsim_cmp_stage_basis(&cat, 0, &v2.basis[0], eb));
  OK(lsim_cmp_publish(&cat, eb));
  cr_assert(lsim_digest_eq(&cat.live.bundle, &v2.id));
  cr_assert_eq(cat.live.number, 2);
  cr_assert_eq(cat.prev.number, 1);
  lsim_cmp_catalog_release(&cat);
}

/* Failure lab: one TP rank publishes a new basis early. */
Test(serve, lab_tp_rank_publishing_early_fails_closed) {
  bundle v1, v2;
  make_bundle(&v1, 1, 1);
  make_bundle(&v2, 2, 1);
  lsim_cmp_catalog r0 = LSIM_CMP_CATALOG_INIT, r1 = LSIM_CMP_CATALOG_INIT;
  lsim_cmp_catalog *tp[2] = {&r0, &r1};
  publish(&r0, "coll-v1", &v1);
  publish(&r1, "coll-v1", &v1);
  OK(lsim_cmp_tp_check(tp, 2, eb));
  for (int r = 0; r < 2; r++) {
    OK(lsim_cmp_register_version(tp[r], "coll-v2", &v2.set, &v2.id, eb));
    OK(lsim_cmp_stage_begin(tp[r], "coll-v2", &v2.id, 1, 3, eb));
    OK(lsim_cmp_stage_basis(tp[r], 0, &v2.basis[0], eb));
    for (int i = 0; i < 3; i++)
      OK(lsim_cmp_stage_core(tp[r], i, 0, &v2.basis[0], &v2.core[i], eb));
  }
  /* rank 1 publishes on its own */
  OK(lsim_cmp_publish(&r1, eb));
  FAILS(LSIM_E_CMP_TP_SPLIT, lsim_cmp_tp_check(tp, 2, eb));
  FAILS(LSIM_E_CMP_TP_SPLIT, lsim_cmp_tp_publish(tp, 2, eb));
  cr_assert_eq(r0.staging.k, 0, "staging rolled back on every rank");
  int reverted = 0;
  OK(lsim_cmp_tp_rollback(tp, 2, &reverted, eb));
  cr_assert_eq(reverted, 1);
  cr_assert(lsim_digest_eq(&r1.live.bundle, &v1.id));
  OK(lsim_cmp_tp_check(tp, 2, eb));
  /* the proper way: stage on both, publish as a group */
  for (int r = 0; r < 2; r++) {
    OK(lsim_cmp_stage_begin(tp[r], "coll-v2", &v2.id, 1, 3, eb));
    OK(lsim_cmp_stage_basis(tp[r], 0, &v2.basis[0], eb));
    for (int i = 0; i < 3; i++)
      OK(lsim_cmp_stage_core(tp[r], i, 0, &v2.basis[0], &v2.core[i], eb));
  }
  OK(lsim_cmp_tp_publish(tp, 2, eb));
  OK(lsim_cmp_tp_check(tp, 2, eb));
  cr_assert(lsim_digest_eq(&r0.live.bundle, &v2.id));
  cr_assert(lsim_digest_eq(&r1.live.bundle, &v2.id));
  /* ranks that staged different snapshots: none publishes */
  bundle v3;
  make_bundle(&v3, 3, 1);
  for (int r = 0; r < 2; r++) {
    OK(lsim_cmp_register_version(tp[r], "coll-v3", &v3.set, &v3.id, eb));
    OK(lsim_cmp_stage_begin(tp[r], "coll-v3", &v3.id, 1, 3, eb));
    OK(lsim_cmp_stage_basis(tp[r], 0, &v3.basis[0], eb));
    for (int i = 0; i < 3; i++)
      OK(lsim_cmp_stage_core(tp[r], i, 0, &v3.basis[0],
                             r == 1 && i == 2 ? &v3.core[1] : &v3.core[i],
                             eb));
  }
  FAILS(LSIM_E_CMP_TP_SPLIT, lsim_cmp_tp_publish(tp, 2, eb));
  cr_assert(lsim_digest_eq(&r0.live.bundle, &v2.id));
  cr_assert(lsim_digest_eq(&r1.live.bundle, &v2.id));
  cr_assert_eq(r0.staging.k + r1.staging.k, 0);
  lsim_cmp_catalog_release(&r0);
  lsim_cmp_catalog_release(&r1);
}

Test(serve, basis_not_evicted_while_cluster_in_flight) {
  bundle v;
  make_bundle(&v, 1, 2);
  cr_assert_eq(v.k, 2);
  lsim_cmp_catalog cat = LSIM_CMP_CATALOG_INIT;
  publish(&cat, "coll-v1", &v);
  int a = 0, other = -1;
  for (int i = 1; i < 3; i++)
    if (v.cluster[i] != v.cluster[a])
      other = i;
  cr_assert_geq(other, 0, "the fit used both clusters");
  int ca = v.cluster[a], co = v.cluster[other];
  lsim_cmp_lease l1, l2;
  OK(lsim_cmp_acquire(&cat, a, &l1, eb));
  cr_assert(!lsim_cmp_basis_evictable(&cat, ca));
  FAILS(LSIM_E_CMP_BASIS_INFLIGHT, lsim_cmp_basis_evict(&cat, ca, eb));
  /* the other cluster's basis is free to go */
  cr_assert(lsim_cmp_basis_evictable(&cat, co));
  OK(lsim_cmp_basis_evict(&cat, co, eb));
  FAILS(LSIM_E_CMP_NOT_RESIDENT, lsim_cmp_acquire(&cat, other, &l2, eb));
  OK(lsim_cmp_basis_load(&cat, co, eb));
  OK(lsim_cmp_acquire(&cat, other, &l2, eb));
  OK(lsim_cmp_release(&cat, &l1, eb));
  cr_assert(lsim_cmp_basis_evictable(&cat, ca));
  OK(lsim_cmp_basis_evict(&cat, ca, eb));
  FAILS(LSIM_E_CMP_REFCOUNT, lsim_cmp_release(&cat, &l1, eb));
  OK(lsim_cmp_release(&cat, &l2, eb));
  lsim_cmp_catalog_release(&cat);
}

Test(serve, old_generation_retires_after_last_lease) {
  bundle v1, v2, v3;
  make_bundle(&v1, 1, 1);
  make_bundle(&v2, 2, 1);
  make_bundle(&v3, 3, 1);
  lsim_cmp_catalog cat = LSIM_CMP_CATALOG_INIT;
  publish(&cat, "coll-v1", &v1);
  lsim_cmp_lease l;
  OK(lsim_cmp_acquire(&cat, 0, &l, eb));
  publish(&cat, "coll-v2", &v2);
  cr_assert_eq(cat.prev.refs, 1);
  FAILS(LSIM_E_CMP_REFCOUNT, lsim_cmp_retire_prev(&cat, eb));
  /* a third generation cannot push v1 out while its lease lives */
  OK(lsim_cmp_register_version(&cat, "coll-v3", &v3.set, &v3.id, eb));
  OK(lsim_cmp_stage_begin(&cat, "coll-v3", &v3.id, 1, 3, eb));
  OK(lsim_cmp_stage_basis(&cat, 0, &v3.basis[0], eb));
  for (int i = 0; i < 3; i++)
    OK(lsim_cmp_stage_core(&cat, i, 0, &v3.basis[0], &v3.core[i], eb));
  FAILS(LSIM_E_CMP_REFCOUNT, lsim_cmp_publish(&cat, eb));
  OK(lsim_cmp_release(&cat, &l, eb));
  OK(lsim_cmp_publish(&cat, eb));
  cr_assert(lsim_digest_eq(&cat.prev.bundle, &v2.id));
  cr_assert_eq(cat.live.number, 3);
  lsim_cmp_catalog_release(&cat);
}

Test(serve, affinity_never_overrides_a_failed_predicate) {
  bundle v;
  make_bundle(&v, 1, 2);
  lsim_cmp_catalog cat = LSIM_CMP_CATALOG_INIT;
  publish(&cat, "coll-v1", &v);
  int a = 0, other = -1;
  for (int i = 1; i < 3; i++)
    if (v.cluster[i] != v.cluster[a])
      other = i;
  int batch[1] = {v.cluster[a]};
  int64_t w = 100;
  cr_assert_eq(lsim_cmp_affinity(&cat, a, batch, 1, w), 0);
  cr_assert_eq(lsim_cmp_affinity(&cat, other, batch, 1, w), 50);
  OK(lsim_cmp_basis_evict(&cat, v.cluster[other], eb));
  cr_assert_eq(lsim_cmp_affinity(&cat, other, batch, 1, w), 100);
  cr_assert_eq(lsim_cmp_affinity(&cat, -1, batch, 1, w), 0);
  /* cand 0: perfect affinity and cost, predicate failed; cand 1: feasible */
  lsim_cmp_cand c[3] = {{0, 0, a}, {1, 30, other}, {1, 40, a}};
  int pick = -1;
  OK(lsim_cmp_pick(&cat, c, 3, batch, 1, w, &pick, eb));
  cr_assert_eq(pick, 2, "affinity reorders feasible candidates (40 < 130)");
  OK(lsim_cmp_pick(&cat, c, 3, batch, 1, 0, &pick, eb));
  cr_assert_eq(pick, 1, "without affinity the cheaper one wins");
  c[2].feasible = 0;
  OK(lsim_cmp_pick(&cat, c, 3, batch, 1, 1000000, &pick, eb));
  cr_assert_eq(pick, 1, "a failed predicate is final, whatever the weight");
  c[1].feasible = 0;
  FAILS(LSIM_E_CMP_NO_CANDIDATE,
        lsim_cmp_pick(&cat, c, 3, batch, 1, w, &pick, eb));
  cr_assert_eq(pick, -1);
  lsim_cmp_catalog_release(&cat);
}
