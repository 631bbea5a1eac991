/*
** compress_res.c: the compressed-collection catalog (compress_res.h).
**
** Invariants (checked by lsim__cat_ok in debug builds after every
** transition):
**   1. live.number > prev.number when both are set; staging.number == 0
**      (a staging generation gets its number only when published).
**   2. For live and prev: every basis and core is set, and every core's
**      basis digest equals its cluster's basis digest.
**   3. refs == sum of inflight[] and both are >= 0.
**   4. A version label maps to exactly one (source set, bundle).
*/
#include "compress_res.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void lsim__gen_free(lsim_cmp_gen *g) {
  free(g->basis);
  free(g->core);
  free(g->core_basis);
  free(g->cluster);
  free(g->basis_set);
  free(g->core_set);
  free(g->resident);
  free(g->inflight);
  memset(g, 0, sizeof *g);
}

static int lsim__gen_alloc(lsim_cmp_gen *g, int k, int n) {
  memset(g, 0, sizeof *g);
  g->k = k;
  g->n = n;
  g->basis = calloc((size_t)k, sizeof *g->basis);
  g->core = calloc((size_t)n, sizeof *g->core);
  g->core_basis = calloc((size_t)n, sizeof *g->core_basis);
  g->cluster = calloc((size_t)n, sizeof *g->cluster);
  g->basis_set = calloc((size_t)k, 1);
  g->core_set = calloc((size_t)n, 1);
  g->resident = calloc((size_t)k, 1);
  g->inflight = calloc((size_t)k, sizeof *g->inflight);
  if (!g->basis || !g->core || !g->core_basis || !g->cluster ||
      !g->basis_set || !g->core_set || !g->resident || !g->inflight) {
    lsim__gen_free(g);
    return -1;
  }
  return 0;
}

#ifndef NDEBUG
static int lsim__gen_complete(const lsim_cmp_gen *g) {
  for (int c = 0; c < g->k; c++)
    if (!g->basis_set[c])
      return 0;
  for (int i = 0; i < g->n; i++)
    if (!g->core_set[i] ||
        !lsim_digest_eq(&g->core_basis[i], &g->basis[g->cluster[i]]))
      return 0;
  return 1;
}

static int lsim__gen_ok(const lsim_cmp_gen *g) {
  if (!g->number)
    return 1;
  int64_t sum = 0;
  for (int c = 0; c < g->k; c++) {
    if (g->inflight[c] < 0)
      return 0;
    sum += g->inflight[c];
  }
  return sum == g->refs && lsim__gen_complete(g);
}

static int lsim__cat_ok(const lsim_cmp_catalog *cat) {
  if (cat->staging.number != 0)
    return 0;
  if (cat->prev.number && cat->live.number <= cat->prev.number)
    return 0;
  return lsim__gen_ok(&cat->live) && lsim__gen_ok(&cat->prev);
}
#endif

void lsim_cmp_catalog_release(lsim_cmp_catalog *cat) {
  if (!cat)
    return;
  lsim__gen_free(&cat->live);
  lsim__gen_free(&cat->staging);
  lsim__gen_free(&cat->prev);
  free(cat->versions);
  memset(cat, 0, sizeof *cat);
}

static lsim_err lsim__label(const char *label, lsim_errbuf *eb) {
  if (!label || !*label || strlen(label) >= LSIM_CMP_VERSION_MAX)
    return lsim_fail(eb, LSIM_E_CMP_STAGING,
                     "collection version label must be 1..%d bytes",
                     LSIM_CMP_VERSION_MAX - 1);
  return 0;
}

static lsim_cmp_version *lsim__find_version(const lsim_cmp_catalog *cat,
                                            const char *label) {
  for (int i = 0; i < cat->nversions; i++)
    if (strcmp(cat->versions[i].label, label) == 0)
      return &cat->versions[i];
  return NULL;
}

lsim_err lsim_cmp_register_version(lsim_cmp_catalog *cat, const char *label,
                                   const lsim_digest *source_set,
                                   const lsim_digest *bundle,
                                   lsim_errbuf *eb) {
  lsim_err rc = lsim__label(label, eb);
  if (rc)
    return rc;
  if (lsim_digest_is_zero(source_set) || lsim_digest_is_zero(bundle))
    return lsim_fail(eb, LSIM_E_CMP_STAGING,
                     "version '%s': source set and bundle digests required",
                     label);
  lsim_cmp_version *v = lsim__find_version(cat, label);
  if (v) {
    char h1[LSIM_DIGEST_HEX_SIZE], h2[LSIM_DIGEST_HEX_SIZE];
    if (!lsim_digest_eq(&v->source_set, source_set))
      return lsim_fail(eb, LSIM_E_CMP_SOURCE_SET,
                       "version '%s' is bound to source set %.16s, not "
                       "%.16s: a changed source set needs a new collection "
                       "version", label, lsim_digest_hex(&v->source_set, h1),
                       lsim_digest_hex(source_set, h2));
    if (!lsim_digest_eq(&v->bundle, bundle))
      return lsim_fail(eb, LSIM_E_CMP_BUNDLE_DIGEST,
                       "version '%s' is bound to bundle %.16s, not %.16s",
                       label, lsim_digest_hex(&v->bundle, h1),
                       lsim_digest_hex(bundle, h2));
    return 0; /* the same registration again */
  }
  if (cat->nversions == cat->cap) {
    int cap = cat->cap ? 2 * cat->cap : 8;
    lsim_cmp_version *nv = realloc(cat->versions, sizeof *nv * (size_t)cap);
    if (!nv)
      return lsim_fail(eb, LSIM_E_NOMEM, "version registry");
    cat->versions = nv;
    cat->cap = cap;
  }
  v = &cat->versions[cat->nversions++];
  memset(v, 0, sizeof *v);
  snprintf(v->label, sizeof v->label, "%s", label);
  v->source_set = *source_set;
  v->bundle = *bundle;
  return 0;
}

lsim_err lsim_cmp_stage_begin(lsim_cmp_catalog *cat, const char *label,
                              const lsim_digest *bundle, int k, int n,
                              lsim_errbuf *eb) {
  lsim_err rc = lsim__label(label, eb);
  if (rc)
    return rc;
  if (cat->staging.k)
    return lsim_fail(eb, LSIM_E_CMP_STAGING, "a staging generation is open");
  const lsim_cmp_version *v = lsim__find_version(cat, label);
  if (!v)
    return lsim_fail(eb, LSIM_E_CMP_STAGING,
                     "version '%s' is not registered", label);
  if (!lsim_digest_eq(&v->bundle, bundle))
    return lsim_fail(eb, LSIM_E_CMP_BUNDLE_DIGEST,
                     "staging a bundle that version '%s' is not bound to",
                     label);
  if (k < 1 || n < 1 || k > n)
    return lsim_fail(eb, LSIM_E_CMP_CLUSTERS, "k %d, n %d: want 1 <= k <= n",
                     k, n);
  if (lsim__gen_alloc(&cat->staging, k, n))
    return lsim_fail(eb, LSIM_E_NOMEM, "staging generation");
  snprintf(cat->staging.version, sizeof cat->staging.version, "%s", label);
  cat->staging.bundle = *bundle;
  cat->staging.source_set = v->source_set;
  return 0;
}

lsim_err lsim_cmp_stage_basis(lsim_cmp_catalog *cat, int cluster,
                              const lsim_digest *basis, lsim_errbuf *eb) {
  lsim_cmp_gen *g = &cat->staging;
  if (!g->k)
    return lsim_fail(eb, LSIM_E_CMP_STAGING, "no staging generation");
  if (cluster < 0 || cluster >= g->k)
    return lsim_fail(eb, LSIM_E_CMP_CLUSTERS, "no cluster %d", cluster);
  if (lsim_digest_is_zero(basis))
    return lsim_fail(eb, LSIM_E_CMP_STAGING, "basis digest missing");
  for (int i = 0; i < g->n; i++)
    if (g->core_set[i] && g->cluster[i] == cluster &&
        !lsim_digest_eq(&g->core_basis[i], basis))
      return lsim_fail(eb, LSIM_E_CMP_STALE_BASIS,
                       "core of adapter %d was fitted against another basis "
                       "of cluster %d", i, cluster);
  g->basis[cluster] = *basis;
  g->basis_set[cluster] = 1;
  return 0;
}

lsim_err lsim_cmp_stage_core(lsim_cmp_catalog *cat, int adapter, int cluster,
                             const lsim_digest *basis,
                             const lsim_digest *core, lsim_errbuf *eb) {
  lsim_cmp_gen *g = &cat->staging;
  if (!g->k)
    return lsim_fail(eb, LSIM_E_CMP_STAGING, "no staging generation");
  if (adapter < 0 || adapter >= g->n)
    return lsim_fail(eb, LSIM_E_CMP_UNKNOWN_ADAPTER, "no adapter %d", adapter);
  if (cluster < 0 || cluster >= g->k)
    return lsim_fail(eb, LSIM_E_CMP_CLUSTERS, "no cluster %d", cluster);
  if (lsim_digest_is_zero(basis) || lsim_digest_is_zero(core))
    return lsim_fail(eb, LSIM_E_CMP_STAGING, "core or basis digest missing");
  if (g->basis_set[cluster] && !lsim_digest_eq(&g->basis[cluster], basis))
    return lsim_fail(eb, LSIM_E_CMP_STALE_BASIS,
                     "core of adapter %d names another basis than the staged "
                     "basis of cluster %d", adapter, cluster);
  g->core[adapter] = *core;
  g->core_basis[adapter] = *basis;
  g->cluster[adapter] = cluster;
  g->core_set[adapter] = 1;
  return 0;
}

void lsim_cmp_stage_abort(lsim_cmp_catalog *cat) {
  lsim__gen_free(&cat->staging);
}

static lsim_err lsim__stage_ready(const lsim_cmp_gen *g, lsim_errbuf *eb) {
  if (!g->k)
    return lsim_fail(eb, LSIM_E_CMP_STAGING, "no staging generation");
  for (int c = 0; c < g->k; c++)
    if (!g->basis_set[c])
      return lsim_fail(eb, LSIM_E_CMP_PUBLISH_EARLY,
                       "basis of cluster %d is not staged", c);
  for (int i = 0; i < g->n; i++) {
    if (!g->core_set[i])
      return lsim_fail(eb, LSIM_E_CMP_PUBLISH_EARLY,
                       "core of adapter %d is not staged: publishing now "
                       "would expose bases before all of their cores", i);
    if (!lsim_digest_eq(&g->core_basis[i], &g->basis[g->cluster[i]]))
      return lsim_fail(eb, LSIM_E_CMP_STALE_BASIS,
                       "core of adapter %d was staged against another basis",
                       i);
  }
  return 0;
}

static lsim_err lsim__publish(lsim_cmp_catalog *cat, lsim_errbuf *eb) {
  lsim_err rc = lsim__stage_ready(&cat->staging, eb);
  if (rc)
    return rc;
  if (cat->prev.number && cat->prev.refs > 0)
    return lsim_fail(eb, LSIM_E_CMP_REFCOUNT,
                     "generation %llu still has %lld lease(s); it cannot "
                     "retire yet", (unsigned long long)cat->prev.number,
                     (long long)cat->prev.refs);
  lsim__gen_free(&cat->prev);
  cat->prev = cat->live;
  cat->live = cat->staging;
  memset(&cat->staging, 0, sizeof cat->staging);
  cat->live.number = ++cat->next_number;
  if (cat->prev.number && cat->live.number <= cat->prev.number)
    cat->live.number = cat->next_number = cat->prev.number + 1;
  for (int c = 0; c < cat->live.k; c++)
    cat->live.resident[c] = 1; /* staged bases were loaded on the device */
  assert(lsim__cat_ok(cat));
  return 0;
}

lsim_err lsim_cmp_publish(lsim_cmp_catalog *cat, lsim_errbuf *eb) {
  return lsim__publish(cat, eb);
}

lsim_err lsim_cmp_retire_prev(lsim_cmp_catalog *cat, lsim_errbuf *eb) {
  if (cat->prev.refs > 0)
    return lsim_fail(eb, LSIM_E_CMP_REFCOUNT,
                     "generation %llu still has %lld lease(s)",
                     (unsigned long long)cat->prev.number,
                     (long long)cat->prev.refs);
  lsim__gen_free(&cat->prev);
  return 0;
}

/* ---- residency --------------------------------------------------------- */

static lsim_err lsim__live_cluster(const lsim_cmp_catalog *cat, int cluster,
                                   lsim_errbuf *eb) {
  if (!cat->live.number)
    return lsim_fail(eb, LSIM_E_CMP_STAGING, "no live generation");
  if (cluster < 0 || cluster >= cat->live.k)
    return lsim_fail(eb, LSIM_E_CMP_CLUSTERS, "no cluster %d", cluster);
  return 0;
}

lsim_err lsim_cmp_basis_load(lsim_cmp_catalog *cat, int cluster,
                             lsim_errbuf *eb) {
  lsim_err rc = lsim__live_cluster(cat, cluster, eb);
  if (!rc)
    cat->live.resident[cluster] = 1;
  return rc;
}

int lsim_cmp_basis_evictable(const lsim_cmp_catalog *cat, int cluster) {
  return lsim__live_cluster(cat, cluster, NULL) == 0 &&
         cat->live.resident[cluster] && cat->live.inflight[cluster] == 0;
}

lsim_err lsim_cmp_basis_evict(lsim_cmp_catalog *cat, int cluster,
                              lsim_errbuf *eb) {
  lsim_err rc = lsim__live_cluster(cat, cluster, eb);
  if (rc)
    return rc;
  if (!cat->live.resident[cluster])
    return lsim_fail(eb, LSIM_E_CMP_NOT_RESIDENT,
                     "basis of cluster %d is not resident", cluster);
  if (cat->live.inflight[cluster] > 0)
    return lsim_fail(eb, LSIM_E_CMP_BASIS_INFLIGHT,
                     "basis of cluster %d has %lld request(s) in flight",
                     cluster, (long long)cat->live.inflight[cluster]);
  cat->live.resident[cluster] = 0;
  return 0;
}

/* ---- leases ------------------------------------------------------------- */

lsim_err lsim_cmp_acquire(lsim_cmp_catalog *cat, int adapter,
                          lsim_cmp_lease *out, lsim_errbuf *eb) {
  memset(out, 0, sizeof *out);
  lsim_cmp_gen *g = &cat->live;
  if (!g->number)
    return lsim_fail(eb, LSIM_E_CMP_STAGING, "no live generation");
  if (adapter < 0 || adapter >= g->n)
    return lsim_fail(eb, LSIM_E_CMP_UNKNOWN_ADAPTER,
                     "adapter %d is not in the live collection", adapter);
  int c = g->cluster[adapter];
  if (!g->resident[c])
    return lsim_fail(eb, LSIM_E_CMP_NOT_RESIDENT,
                     "basis of cluster %d (adapter %d) is not resident", c,
                     adapter);
  out->generation = g->number;
  out->adapter = adapter;
  out->cluster = c;
  out->bundle = g->bundle;
  out->basis = g->basis[c];
  out->core = g->core[adapter];
  g->refs++;
  g->inflight[c]++;
  assert(lsim__cat_ok(cat));
  return 0;
}

static lsim_cmp_gen *lsim__gen_of(lsim_cmp_catalog *cat, uint64_t number) {
  if (number && cat->live.number == number)
    return &cat->live;
  if (number && cat->prev.number == number)
    return &cat->prev;
  return NULL;
}

lsim_err lsim_cmp_launch_check(const lsim_cmp_catalog *cat,
                               const lsim_cmp_lease *l, lsim_errbuf *eb) {
  const lsim_cmp_gen *g =
      lsim__gen_of((lsim_cmp_catalog *)cat, l->generation);
  if (!g)
    return lsim_fail(eb, LSIM_E_CMP_STALE_BASIS,
                     "lease of generation %llu: that generation is gone",
                     (unsigned long long)l->generation);
  if (l->adapter < 0 || l->adapter >= g->n || l->cluster != g->cluster[l->adapter] ||
      !lsim_digest_eq(&l->bundle, &g->bundle) ||
      !lsim_digest_eq(&l->basis, &g->basis[l->cluster]) ||
      !lsim_digest_eq(&l->core, &g->core[l->adapter]))
    return lsim_fail(eb, LSIM_E_CMP_STALE_BASIS,
                     "lease of adapter %d does not match generation %llu",
                     l->adapter, (unsigned long long)l->generation);
  return 0;
}

lsim_err lsim_cmp_release(lsim_cmp_catalog *cat, const lsim_cmp_lease *l,
                          lsim_errbuf *eb) {
  lsim_cmp_gen *g = lsim__gen_of(cat, l->generation);
  if (!g || l->cluster < 0 || l->cluster >= g->k || g->refs <= 0 ||
      g->inflight[l->cluster] <= 0)
    return lsim_fail(eb, LSIM_E_CMP_REFCOUNT,
                     "release of a lease that generation %llu does not hold",
                     (unsigned long long)l->generation);
  g->refs--;
  g->inflight[l->cluster]--;
  assert(lsim__cat_ok(cat));
  return 0;
}

lsim_err lsim_cmp_check_core(const lsim_cmp_catalog *cat, int adapter,
                             const lsim_digest *bundle,
                             const lsim_digest *basis,
                             const lsim_digest *core, lsim_errbuf *eb) {
  const lsim_cmp_gen *g = &cat->live;
  if (!g->number)
    return lsim_fail(eb, LSIM_E_CMP_STAGING, "no live generation");
  if (adapter < 0 || adapter >= g->n)
    return lsim_fail(eb, LSIM_E_CMP_UNKNOWN_ADAPTER, "no adapter %d", adapter);
  if (!lsim_digest_eq(bundle, &g->bundle))
    return lsim_fail(eb, LSIM_E_CMP_STALE_BASIS,
                     "core of adapter %d belongs to another bundle than the "
                     "live generation %llu", adapter,
                     (unsigned long long)g->number);
  if (!lsim_digest_eq(basis, &g->basis[g->cluster[adapter]]))
    return lsim_fail(eb, LSIM_E_CMP_STALE_BASIS,
                     "core of adapter %d is paired with a stale basis of "
                     "cluster %d", adapter, g->cluster[adapter]);
  if (!lsim_digest_eq(core, &g->core[adapter]))
    return lsim_fail(eb, LSIM_E_CMP_STALE_BASIS,
                     "core digest of adapter %d differs from the live one",
                     adapter);
  return 0;
}

/* ---- tensor parallelism ----------------------------------------------------- */

/* 1 when two generations are the same snapshot (number optional). */
static int lsim__gen_same(const lsim_cmp_gen *a, const lsim_cmp_gen *b,
                          int with_number) {
  if ((with_number && a->number != b->number) || a->k != b->k ||
      a->n != b->n || !lsim_digest_eq(&a->bundle, &b->bundle))
    return 0;
  for (int c = 0; c < a->k; c++)
    if (a->basis_set[c] != b->basis_set[c] ||
        !lsim_digest_eq(&a->basis[c], &b->basis[c]))
      return 0;
  for (int i = 0; i < a->n; i++)
    if (a->core_set[i] != b->core_set[i] || a->cluster[i] != b->cluster[i] ||
        !lsim_digest_eq(&a->core[i], &b->core[i]))
      return 0;
  return 1;
}

lsim_err lsim_cmp_tp_check(lsim_cmp_catalog *const *ranks, int n,
                           lsim_errbuf *eb) {
  if (n < 1)
    return lsim_fail(eb, LSIM_E_CMP_TP_SPLIT, "no TP ranks");
  for (int r = 1; r < n; r++)
    if (!lsim__gen_same(&ranks[0]->live, &ranks[r]->live, 1))
      return lsim_fail(eb, LSIM_E_CMP_TP_SPLIT,
                       "TP rank %d serves generation %llu, rank 0 serves "
                       "%llu (or their bases and cores differ): fail closed",
                       r, (unsigned long long)ranks[r]->live.number,
                       (unsigned long long)ranks[0]->live.number);
  return 0;
}

lsim_err lsim_cmp_tp_publish(lsim_cmp_catalog *const *ranks, int n,
                             lsim_errbuf *eb) {
  lsim_err rc = lsim_cmp_tp_check(ranks, n, eb);
  if (!rc)
    for (int r = 0; r < n && !rc; r++)
      rc = lsim__stage_ready(&ranks[r]->staging, eb);
  if (rc == LSIM_E_CMP_PUBLISH_EARLY || rc == LSIM_E_CMP_STAGING)
    return rc; /* still loading: nothing to roll back */
  for (int r = 1; r < n && !rc; r++)
    if (!lsim__gen_same(&ranks[0]->staging, &ranks[r]->staging, 0))
      rc = lsim_fail(eb, LSIM_E_CMP_TP_SPLIT,
                     "TP rank %d staged another basis/core snapshot than "
                     "rank 0: staging rolled back on every rank", r);
  if (!rc)
    for (int r = 0; r < n && !rc; r++)
      if (ranks[r]->prev.number && ranks[r]->prev.refs > 0)
        rc = lsim_fail(eb, LSIM_E_CMP_REFCOUNT,
                       "TP rank %d: generation %llu still has leases", r,
                       (unsigned long long)ranks[r]->prev.number);
  if (rc) {
    if (rc != LSIM_E_CMP_REFCOUNT)
      for (int r = 0; r < n; r++)
        lsim_cmp_stage_abort(ranks[r]);
    return rc;
  }
  for (int r = 0; r < n; r++)
    if ((rc = lsim__publish(ranks[r], eb)))
      return LSIM_BUG(eb, "TP publish failed after every check passed");
  return 0;
}

lsim_err lsim_cmp_tp_rollback(lsim_cmp_catalog *const *ranks, int n,
                              int *reverted, lsim_errbuf *eb) {
  *reverted = 0;
  if (n < 1)
    return 0;
  uint64_t oldest = ranks[0]->live.number;
  for (int r = 1; r < n; r++)
    if (ranks[r]->live.number < oldest)
      oldest = ranks[r]->live.number;
  for (int r = 0; r < n; r++) {
    lsim_cmp_catalog *cat = ranks[r];
    if (cat->live.number > oldest) {
      if (cat->live.refs > 0)
        return lsim_fail(eb, LSIM_E_CMP_REFCOUNT,
                         "TP rank %d: early generation %llu has leases", r,
                         (unsigned long long)cat->live.number);
      if (cat->prev.number != oldest)
        return lsim_fail(eb, LSIM_E_CMP_STAGING,
                         "TP rank %d: generation %llu is not retained for "
                         "rollback", r, (unsigned long long)oldest);
      lsim__gen_free(&cat->live);
      cat->live = cat->prev;
      memset(&cat->prev, 0, sizeof cat->prev);
      cat->next_number = cat->live.number;
      (*reverted)++;
    }
  }
  for (int r = 0; r < n; r++)
    lsim_cmp_stage_abort(ranks[r]);
  return lsim_cmp_tp_check(ranks, n, eb);
}

/* ---- affinity ------------------------------------------------------------- */

int64_t lsim_cmp_affinity(const lsim_cmp_catalog *cat, int adapter,
                          const int *batch_clusters, int nbatch,
                          int64_t weight) {
  const lsim_cmp_gen *g = &cat->live;
  if (adapter < 0 || !g->number || adapter >= g->n)
    return 0;
  int c = g->cluster[adapter];
  for (int t = 0; t < nbatch; t++)
    if (batch_clusters[t] == c)
      return 0;
  return g->resident[c] ? weight / 2 : weight;
}

lsim_err lsim_cmp_pick(const lsim_cmp_catalog *cat, const lsim_cmp_cand *c,
                       int n, const int *batch_clusters, int nbatch,
                       int64_t weight, int *pick, lsim_errbuf *eb) {
  *pick = -1;
  int64_t best = 0;
  for (int i = 0; i < n; i++) {
    if (!c[i].feasible)
      continue; /* a failed predicate is final: affinity cannot buy it */
    int64_t v = c[i].cost +
                lsim_cmp_affinity(cat, c[i].adapter, batch_clusters, nbatch,
                                  weight);
    if (*pick < 0 || v < best) {
      best = v;
      *pick = i;
    }
  }
  if (*pick < 0)
    return lsim_fail(eb, LSIM_E_CMP_NO_CANDIDATE,
                     "no candidate passed its predicates (%d considered)", n);
  return 0;
}
