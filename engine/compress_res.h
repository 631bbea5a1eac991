/*
** compress_res.h: serving a compressed adapter collection (article
** 0x06G4, 0x06G7, 0x06G9): the collection catalog of one worker (one TP
** rank), its staging and live generations, basis residency with in-flight
** fencing, TP-wide generation agreement, and basis-cluster affinity as a
** scheduler cost.
**
** A compressed core is meaningless without its basis: everything here
** keys on the bundle identity (compress/jd.h: bundle, source-set, basis
** and core digests), never on names.
**
**   versions   a collection version label is bound to one ordered source
**              set and one bundle the first time it is registered; the
**              same label with another source set fails E_CMP_SOURCE_SET
**              (create a new version), with the same set but another
**              bundle E_CMP_BUNDLE_DIGEST
**   staging    lsim_cmp_stage_begin opens a staging generation for one
**              registered bundle; bases and cores are added in any order;
**              a core whose basis digest differs from its cluster's staged
**              basis fails E_CMP_STALE_BASIS
**   publish    lsim_cmp_publish swaps staging in as the live generation
**              atomically, only when every basis and every core of the
**              bundle is staged (E_CMP_PUBLISH_EARLY otherwise: a basis is
**              never visible before all of its cores); the old live
**              generation becomes `prev` and is freed once its last lease
**              is released and a later publish or lsim_cmp_retire_prev
**              needs the slot
**   leases     lsim_cmp_acquire binds a request to the live generation:
**              the adapter's cluster basis must be resident
**              (E_CMP_NOT_RESIDENT); the lease pins the generation and
**              counts the request in flight on its cluster until
**              lsim_cmp_release.  lsim_cmp_check_core refuses a core
**              whose bundle/basis/core digests are not the live ones
**              (E_CMP_STALE_BASIS: a core loaded with the wrong basis
**              version)
**   residency  lsim_cmp_basis_evict fails E_CMP_BASIS_INFLIGHT while any
**              request of that cluster holds a lease
**   TP         lsim_cmp_tp_check fails E_CMP_TP_SPLIT unless every rank's
**              live snapshot (generation, bundle, bases, cores) agrees;
**              lsim_cmp_tp_publish publishes on every rank or none (the
**              stagings must agree and the live generations too; on any
**              difference every staging is rolled back);
**              lsim_cmp_tp_rollback reverts ranks that published early
**   affinity   lsim_cmp_pick orders candidates by scheduler cost plus an
**              affinity cost (0: cluster already in the batch, weight/2:
**              basis resident, weight: basis cold); a candidate whose
**              predicate failed (queueing, SLO, memory) is never picked,
**              whatever its affinity
**
** State diagram of one catalog (function behind each arrow):
**
**   (none) --stage_begin--> STAGING --publish--> LIVE --publish(next)--> PREV
**               STAGING --stage_abort--> (none)        PREV --retire_prev--> freed
**               LIVE --unpublish (TP rollback)--> STAGING discarded, PREV -> LIVE
**
** No I/O, no clock; all state hangs off the caller's catalog.  Adapters are
** the bundle's source indices 0..n-1; clusters 0..k-1.
*/
#ifndef LSIM_COMPRESS_RES_H
#define LSIM_COMPRESS_RES_H

#include "identity.h"
#include "lsim.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LSIM_CMP_VERSION_MAX 64 /* bytes of a version label, with the NUL */

/* One generation of a compressed collection.  Read-only for callers. */
typedef struct lsim_cmp_gen {
  uint64_t number; /* catalog generation, 0 = empty slot */
  char version[LSIM_CMP_VERSION_MAX];
  lsim_digest bundle, source_set;
  int k, n;
  lsim_digest *basis;        /* [k] */
  lsim_digest *core;         /* [n] */
  lsim_digest *core_basis;   /* [n] the basis each core was staged against */
  int *cluster;              /* [n] */
  uint8_t *basis_set;        /* [k] staged? */
  uint8_t *core_set;         /* [n] staged? */
  uint8_t *resident;         /* [k] basis resident on the device */
  int64_t *inflight;         /* [k] leases per cluster */
  int64_t refs;              /* leases on this generation */
} lsim_cmp_gen;

typedef struct lsim_cmp_version {
  char label[LSIM_CMP_VERSION_MAX];
  lsim_digest source_set, bundle;
} lsim_cmp_version;

/* One worker's (one TP rank's) catalog.  Zero-filled = empty
** (LSIM_CMP_CATALOG_INIT); release with lsim_cmp_catalog_release. */
typedef struct lsim_cmp_catalog {
  lsim_cmp_gen live, staging, prev; /* read-only */
  uint64_t next_number;             /* private */
  lsim_cmp_version *versions;       /* private */
  int nversions, cap;               /* private */
} lsim_cmp_catalog;
#define LSIM_CMP_CATALOG_INIT {{0}, {0}, {0}, 0, NULL, 0, 0}

void lsim_cmp_catalog_release(lsim_cmp_catalog *cat);

lsim_err lsim_cmp_register_version(lsim_cmp_catalog *cat, const char *label,
                                   const lsim_digest *source_set,
                                   const lsim_digest *bundle,
                                   lsim_errbuf *eb);

lsim_err lsim_cmp_stage_begin(lsim_cmp_catalog *cat, const char *label,
                              const lsim_digest *bundle, int k, int n,
                              lsim_errbuf *eb);
lsim_err lsim_cmp_stage_basis(lsim_cmp_catalog *cat, int cluster,
                              const lsim_digest *basis, lsim_errbuf *eb);
lsim_err lsim_cmp_stage_core(lsim_cmp_catalog *cat, int adapter, int cluster,
                             const lsim_digest *basis,
                             const lsim_digest *core, lsim_errbuf *eb);
void lsim_cmp_stage_abort(lsim_cmp_catalog *cat);
lsim_err lsim_cmp_publish(lsim_cmp_catalog *cat, lsim_errbuf *eb);
/* Free prev; E_CMP_REFCOUNT while a lease still pins it. */
lsim_err lsim_cmp_retire_prev(lsim_cmp_catalog *cat, lsim_errbuf *eb);

/* Basis residency of the live generation. */
lsim_err lsim_cmp_basis_load(lsim_cmp_catalog *cat, int cluster,
                             lsim_errbuf *eb);
int lsim_cmp_basis_evictable(const lsim_cmp_catalog *cat, int cluster);
lsim_err lsim_cmp_basis_evict(lsim_cmp_catalog *cat, int cluster,
                              lsim_errbuf *eb);

/* A request's binding to one generation. */
typedef struct lsim_cmp_lease {
  uint64_t generation;
  int adapter, cluster;
  lsim_digest bundle, basis, core;
} lsim_cmp_lease;

lsim_err lsim_cmp_acquire(lsim_cmp_catalog *cat, int adapter,
                          lsim_cmp_lease *out, lsim_errbuf *eb);
/* At launch: the lease's generation is still live or prev, with the same
** digests (E_CMP_STALE_BASIS otherwise). */
lsim_err lsim_cmp_launch_check(const lsim_cmp_catalog *cat,
                               const lsim_cmp_lease *l, lsim_errbuf *eb);
lsim_err lsim_cmp_release(lsim_cmp_catalog *cat, const lsim_cmp_lease *l,
                          lsim_errbuf *eb);
/* A core (with the bundle and basis it claims) against the live one. */
lsim_err lsim_cmp_check_core(const lsim_cmp_catalog *cat, int adapter,
                             const lsim_digest *bundle,
                             const lsim_digest *basis,
                             const lsim_digest *core, lsim_errbuf *eb);

/* Tensor parallelism: ranks[0..n-1] hold the same collection. */
lsim_err lsim_cmp_tp_check(lsim_cmp_catalog *const *ranks, int n,
                           lsim_errbuf *eb);
lsim_err lsim_cmp_tp_publish(lsim_cmp_catalog *const *ranks, int n,
                             lsim_errbuf *eb);
/* Revert every rank whose live generation is newer than the oldest live
** generation among the ranks (prev becomes live again), and discard every
** staging.  *reverted gets the number of ranks reverted. */
lsim_err lsim_cmp_tp_rollback(lsim_cmp_catalog *const *ranks, int n,
                              int *reverted, lsim_errbuf *eb);

/* Scheduler candidates: feasible = every predicate passed. */
typedef struct lsim_cmp_cand {
  int feasible;
  int64_t cost;    /* the scheduler's own cost, >= 0 */
  int adapter;     /* bundle index, or -1 for an uncompressed adapter */
} lsim_cmp_cand;

/* Affinity cost of adapter's cluster given the clusters already in the
** batch: 0, weight / 2 or weight (see above); 0 for adapter -1. */
int64_t lsim_cmp_affinity(const lsim_cmp_catalog *cat, int adapter,
                          const int *batch_clusters, int nbatch,
                          int64_t weight);
/* The feasible candidate of least cost + affinity (lowest index on ties);
** E_CMP_NO_CANDIDATE when none is feasible. */
lsim_err lsim_cmp_pick(const lsim_cmp_catalog *cat, const lsim_cmp_cand *c,
                       int n, const int *batch_clusters, int nbatch,
                       int64_t weight, int *pick, lsim_errbuf *eb);

#ifdef __cplusplus
}
#endif

#endif /* LSIM_COMPRESS_RES_H */
