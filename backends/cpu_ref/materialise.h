/*
** materialise.h: one replay iteration's tensors, as exact values.
**
** Tensor backends (cpu_ref, cuda) execute each iteration's adapter work for
** one d_in x d_out target module on synthetic values that are a pure
** function of the run's seed:
**
**   factors  A [r][d_in], B [d_out][r] of adapter a, artifact version v:
**            integers in [-1, 1] from a stream keyed by (seed, a, v); the
**            scale is 2 / r (dyadic for power-of-two ranks)
**   inputs   row t of request q at token position k in iteration i:
**            integers in [-1, 1] keyed by (seed, i, q, k)
**
** The magnitudes are kept small so that, at the replay's 16 x 16 module and
** power-of-two ranks up to 64, every exact delta is representable in fp16:
** a GPU backend then owes the exact reference bit-exact equality.
**
** so the same trace and seed give the same tensors whatever backend runs
** them.  Two versions of one adapter in one iteration (a request leased
** before a hotswap, another after) are distinct artifacts: each (adapter,
** version > 0) pair is given its own id past the plan's largest one.
**
** Ownership: an lsim_iter_tensors is caller-owned, zero-initialised, reused
** across iterations (lsim_iter_tensors_build releases the previous
** iteration's values) and released with lsim_iter_tensors_release.
**
** Reuse.  A replay meets the same few artifacts in thousands of iterations,
** so the object keeps the exact factors it has made, by (artifact, version,
** rank), and X's storage: an iteration still obtains every factor's bytes
** (from the backend's pages or drawn) and compares them with those its
** cached values were made from, rebuilding on any difference, so the values
** are always those of the bytes it obtained.  The cache holds at most
** LSIM_FACTOR_CACHE_ENTRIES rational entries beyond those the current
** iteration uses (least recently used artifacts go first).  ad[k] are views
** of cached factors, valid until the next build or release.
*/
#ifndef LSIM_MATERIALISE_H
#define LSIM_MATERIALISE_H

#include "../../engine/plan.h"
#include "../../engine/rowplan.h"
#include "cpu_ref.h"

/* Rational entries the factor cache may hold beyond the current
** iteration's (a rank-64 factor pair of the 16 x 16 module is 2,048). */
#define LSIM_FACTOR_CACHE_ENTRIES (1 << 18)

struct lsim_factor_ent; /* materialise.c */

typedef struct lsim_iter_tensors {
  lsim_rowplan rp;   /* the iteration's row plan (read-only for callers) */
  lsim_qadapter *ad; /* [nad] the plan's adapters, ascending id (views) */
  int nad;
  lsim_qmat X;       /* [T][d_in] packed row order (a view of xv) */
  /* private */
  lsim_plan_entry *ents;
  int ents_cap;
  int *vad, *vver;
  int maxa;          /* the plan's largest adapter id */
  int ad_cap;
  mpq_t *xv;         /* X's storage, xcap entries initialised */
  size_t xcap;
  struct lsim_factor_ent **fc; /* [nfc] cached factors */
  int nfc, fc_cap;
  size_t fc_held;    /* rational entries in the cache */
  int64_t fc_clock;  /* builds so far (LRU stamps) */
  signed char *fb;   /* factor bytes scratch */
  size_t fb_cap;
} lsim_iter_tensors;

#define LSIM_ITER_TENSORS_INIT {.rp = LSIM_ROWPLAN_INIT, .X = LSIM_QMAT_INIT, .maxa = -1}

lsim_err lsim_iter_tensors_build(lsim_iter_tensors *t, const lsim_plan *plan,
                                 uint64_t seed, int d_in, int d_out,
                                 lsim_errbuf *eb);
void lsim_iter_tensors_release(lsim_iter_tensors *t);

/* The factors of artifact (art, ver) at rank r for a d_in x d_out module,
** exactly as lsim_iter_tensors_build draws them: A [r][d_in] then
** B [d_out][r], row-major, one signed byte per entry (in [-1, 1]);
** r * (d_in + d_out) bytes. */
void lsim_factors_draw(uint64_t seed, int art, int ver, int r, int d_in,
                       int d_out, signed char *out);
/* Where a backend keeps factors of its own (the engine's pages): asked for
** the bytes of lsim_factors_draw's layout for (art, ver, r); returns 1
** when it wrote them to out, 0 to have them drawn, or a negative lsim_err
** (its message in eb). */
typedef int (*lsim_factor_fetch_fn)(void *ud, int art, int ver, int r,
                                    signed char *out, lsim_errbuf *eb);
/* lsim_iter_tensors_build with the factors taken from fetch when it has
** them (fetch NULL: the same as lsim_iter_tensors_build). */
lsim_err lsim_iter_tensors_build_with(lsim_iter_tensors *t,
                                      const lsim_plan *plan, uint64_t seed,
                                      int d_in, int d_out,
                                      lsim_factor_fetch_fn fetch, void *ud,
                                      lsim_errbuf *eb);

/* Only the row plan and the artifact numbering of lsim_iter_tensors_build,
** no values (ad and X stay empty): for backends that make their own. */
lsim_err lsim_iter_rows_build(lsim_iter_tensors *t, const lsim_plan *plan,
                              lsim_errbuf *eb);

/* The artifact (adapter) of a row-plan adapter id; *version (may be NULL)
** its version (0: the one the plan names without a version). */
int lsim_iter_artifact(const lsim_iter_tensors *t, int id, int *version);

#endif /* LSIM_MATERIALISE_H */
