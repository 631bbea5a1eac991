/*
** cpu_ref.h: the exact reference executor for multi-adapter LoRA projections.
**
** Every value is a rational number (GMP mpq_t); there is no floating point
** anywhere on this path, so two results are compared with `==`, never with a
** tolerance.  The executor consumes a frozen iteration plan (rowplan.h) and
** computes, for the packed rows X[T][d_in] of one projection,
**
**     delta[i] = s_a * (X[i] A_a^T) B_a^T     for a row i of adapter a
**     delta[i] = 0                            for a base-only row
**     Y        = X W^T (+ delta, by the caller)
**
** with the logical factor orientation A_a [r_a][d_in], B_a [d_out][r_a].
**
** Six execution families compute the same function with genuinely different
** data movement (the article's alternatives; README.md has the table):
**
**   per_row   one row at a time: shrink, expand, scale, store
**   grouped   host loop over adapters: gather that adapter's rows, two
**             block products, scatter (the PEFT-style sub-batch)
**   sgmv      gather X through perm into X_grouped, per-segment shrink into
**             an explicit Z, per-segment expand into an explicit D, scatter
**             D through perm (the contiguous Punica-style realization)
**   indexed   vLLM-style: read rows in place through sorted_rows/id_starts,
**             skip the -1 sentinel group, shrink into a row-addressed
**             buffer, expand and write rows in place
**   bucketed  one pass per rank bucket: gather, compute at that one fixed
**             rank with a per-row factor pointer, scatter
**   padded    zero-padded physical slots at the plan's phys_rank R
**             (lsim_qslot), tails verified zero, indexed execution at R
**
** and under three scale placements (passed after expand, folded into A,
** folded into B).  lsim_ref_delta_all() runs every family under every
** placement and fails unless all eighteen results agree exactly.
**
** Numeric tiers.  GMP mpq arithmetic per multiply-add is exact but slow, so
** each evaluation first tries an exact integer tier: every matrix is held as
** int64 numerators over a common denominator (one per row of X-like
** matrices, one per factor), and before each product a bound
** K * max|x| * max|f| <= INT64_MAX proves that no partial sum can overflow.
** The base projection has a further int16 tier (packed 16-bit operands,
** 32-bit partial sums over a proven-safe chunk of K, 64-bit totals; an AVX2
** kernel where the CPU has it).  When a bound cannot be proven the
** evaluation is redone in GMP from the start (LSIM_NUM_AUTO), so the result
** is identical whatever tier produced it; forcing a tier
** (LSIM_NUM_INT64/INT16) reports LSIM_E_OVERFLOW instead of falling back.
**
** Output matrices.  Every function that produces a matrix takes a caller
** lsim_qmat that is either zero-initialised (LSIM_QMAT_INIT, or cleared by
** lsim_qmat_clear) -- the function then allocates it with the right shape --
** or already initialised with exactly the result's shape (E_SHAPE
** otherwise), and overwrites it.  On failure a matrix the call allocated is
** freed again; lsim_qmat_clear() is always safe afterwards.
**
** Errors (engine/err_tensor.h): E_SHAPE, E_ORIENTATION (a factor given
** transposed), E_REF_UNKNOWN_ADAPTER, E_REF_DUP_ADAPTER, E_REF_RANK (factor
** rank != the plan's logical rank), E_SLOT_RANK (rank above R),
** E_PAD_NONZERO, E_SCALE_PLACEMENT, E_SCATTER (an active row written twice
** or never), E_BASE_DELTA (a base-only row addressed by an adapter path),
** E_PATH_MISMATCH, E_OVERFLOW, E_RATIONAL, E_ZERO_DENOM; plan metadata that
** a family reads and finds out of bounds or inconsistent fails with the
** matching E_PLAN_* code (the executor fails closed even on a plan that
** bypassed lsim_rowplan_validate).  Nothing here aborts or prints.
*/
#ifndef LSIM_CPU_REF_H
#define LSIM_CPU_REF_H

#include <gmp.h>

#include "../../engine/lsim.h"
#include "../../engine/rowplan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- exact matrices and scalars ----------------------------------------- */

/* A row-major matrix of rationals, owning its entries (rows*cols mpq_t). */
typedef struct lsim_qmat {
  int rows, cols;
  mpq_t *v; /* NULL when rows*cols == 0 */
} lsim_qmat;
#define LSIM_QMAT_INIT {0, 0, NULL}
#define LSIM_QAT(m, i, j) ((m)->v[(size_t)(i) * (size_t)(m)->cols + (size_t)(j)])

/* Initialise m as a zero-filled rows x cols matrix (0x0 and Nx0 allowed).
** m's previous contents are ignored (not freed).  E_SHAPE for negative
** sizes, E_NOMEM. */
lsim_err lsim_qmat_init(lsim_qmat *m, int rows, int cols, lsim_errbuf *eb);
/* Free the entries and reset m to LSIM_QMAT_INIT; safe on a zeroed m. */
void lsim_qmat_clear(lsim_qmat *m);
/* 1 when a and b have the same shape and equal entries, else 0. */
int lsim_qmat_equal(const lsim_qmat *a, const lsim_qmat *b);
/* dst := src, (re)shaping dst per the output-matrix rule above. */
lsim_err lsim_qmat_copy(lsim_qmat *dst, const lsim_qmat *src, lsim_errbuf *eb);
/* Set every entry of row i from strings (lsim_q_parse), n == m->cols. */
lsim_err lsim_qmat_set_row(lsim_qmat *m, int i, const char *const *s, int n,
                           lsim_errbuf *eb);

/*
** Parse "p", "-p", "p/q" or "-p/q" with p, q strings of decimal digits (no
** '+', no spaces, no exponent or point) into a canonical rational.
** E_RATIONAL for anything else (including NULL and ""), E_ZERO_DENOM when
** q is zero.  `out` must be initialised; it is unchanged on failure.
*/
lsim_err lsim_q_parse(mpq_t out, const char *s, lsim_errbuf *eb);
/* "3", "-1/2": lowest terms (q need not be canonical).  The string is
** malloc'd; the caller frees it with free().  NULL when out of memory. */
char *lsim_q_str(const mpq_t q);

/* ---- adapters ------------------------------------------------------------ */

/*
** One adapter's factors in logical orientation.  The executor only reads
** it.  The caller initialises scale, A and B and clears them.
*/
typedef struct lsim_qadapter {
  int id;      /* adapter id as in the plan's row_adapter (>= 0) */
  int rank;    /* logical rank r (>= 1) */
  mpq_t scale; /* semantic scale s */
  lsim_qmat A; /* logical [r][d_in] */
  lsim_qmat B; /* logical [d_out][r] */
} lsim_qadapter;

/* Initialise a zero adapter: scale 1, A [rank][d_in] and B [d_out][rank]
** zero-filled.  Release with lsim_qadapter_clear (also after a failed init;
** clearing twice is harmless). */
lsim_err lsim_qadapter_init(lsim_qadapter *a, int id, int rank, int d_in,
                            int d_out, lsim_errbuf *eb);
void lsim_qadapter_clear(lsim_qadapter *a);

/*
** Check one adapter against the projection shape: A must be [rank][d_in]
** and B [d_out][rank]; a factor stored the other way round ([d_in][rank]
** or [rank][d_out]) is E_ORIENTATION, any other disagreement E_SHAPE.
*/
lsim_err lsim_qadapter_check(const lsim_qadapter *a, int d_in, int d_out,
                             lsim_errbuf *eb);

/* ---- execution families, scale placements, numeric tiers ---------------- */

enum lsim_ref_path {
  LSIM_REF_PER_ROW = 0,
  LSIM_REF_GROUPED,
  LSIM_REF_SGMV,
  LSIM_REF_INDEXED,
  LSIM_REF_BUCKETED,
  LSIM_REF_PADDED,
  LSIM_REF__COUNT
};
/* "per_row", "grouped", "sgmv", "indexed", "bucketed", "padded"; "?" for
** anything else. */
const char *lsim_ref_path_name(int path);
/* The path whose name is `name`; -1 if unknown. */
int lsim_ref_path_find(const char *name);

/*
** Where the semantic scale s is applied.  PASSED: factors as given, the
** expand result is multiplied by s.  FOLD_A: the executor uses s*A and
** applies no scale after expand.  FOLD_B: it uses s*B likewise.
*/
enum lsim_scale_mode {
  LSIM_SCALE_PASSED = 0,
  LSIM_SCALE_FOLD_A,
  LSIM_SCALE_FOLD_B,
  LSIM_SCALE__COUNT
};
/* "passed", "fold_a", "fold_b"; "?" otherwise. */
const char *lsim_scale_mode_name(int mode);

/*
** Numeric tier.  AUTO: the fastest tier whose bounds hold, else GMP.
** GMP: mpq arithmetic for every multiply-add (the oracle).  INT64, INT16:
** that integer tier or LSIM_E_OVERFLOW.  INT16 is meaningful for
** lsim_ref_base only (adapter deltas treat it as INT64); it uses the AVX2
** kernel when the CPU has AVX2, INT16_SCALAR the portable loop always (so
** tests can check both kernels on one machine).
*/
enum lsim_num_mode {
  LSIM_NUM_AUTO = 0,
  LSIM_NUM_GMP,
  LSIM_NUM_INT64,
  LSIM_NUM_INT16,
  LSIM_NUM_INT16_SCALAR,
  LSIM_NUM__COUNT
};
/* "auto", "gmp", "int64", "int16", "int16_scalar"; "?" otherwise. */
const char *lsim_num_mode_name(int mode);

/* ---- adapter delta ------------------------------------------------------- */

/*
** delta[T][d_out] in packed row order: the adapter branch of plan p applied
** to X[T][d_in] (packed row order).  Base-only rows get exactly zero.
** ad[0..nad) are looked up by id (ids distinct: E_REF_DUP_ADAPTER); every
** adapter must pass lsim_qadapter_check with d_in = X->cols and one common
** d_out (B's row count; when nad == 0, delta's own shape if initialised,
** else 0).  Each active row's adapter must be present
** (E_REF_UNKNOWN_ADAPTER) with rank == the plan's row_rank (E_REF_RANK).
** path: enum lsim_ref_path; scale_mode: enum lsim_scale_mode (E_USAGE for
** out-of-range values).  AUTO numeric tier.
*/
lsim_err lsim_ref_delta(const lsim_rowplan *p, const lsim_qmat *X,
                        const lsim_qadapter *ad, int nad, int path,
                        int scale_mode, lsim_qmat *delta, lsim_errbuf *eb);

/*
** A family's intermediates, in the family's own row order (for tests and
** traces; the article's Z and D).  n intermediate rows; row[u] is the packed
** row that intermediate row u belongs to; rank[u] the width actually
** computed for it (the logical rank, or R for padded).  Z [n][W] with W the
** widest rank[u] (entries at or past rank[u] are zero), D [n][d_out] the
** expand output after scale placement, before scatter.  Orders:
**   per_row   active rows in packed order
**   grouped   adapters by ascending id, each adapter's rows in packed order
**   sgmv      grouped position u (row[u] == perm[u])
**   indexed   sorted_rows order with the sentinel group left out
**   bucketed  bucket_rows order
**   padded    as indexed, every rank[u] == R
** Under FOLD_A, Z holds s*(x A^T).  `num` is the tier that produced it.
*/
typedef struct lsim_ref_trace {
  int path, scale_mode, num;
  int n;
  int *row;    /* [n] owned */
  int *rank;   /* [n] owned */
  lsim_qmat Z; /* [n][W] owned */
  lsim_qmat D; /* [n][d_out] owned */
} lsim_ref_trace;
#define LSIM_REF_TRACE_INIT {0, 0, 0, 0, NULL, NULL, LSIM_QMAT_INIT, LSIM_QMAT_INIT}
void lsim_ref_trace_release(lsim_ref_trace *t);

/*
** lsim_ref_delta with a chosen numeric tier (enum lsim_num_mode) and an
** optional trace (NULL: none; otherwise released and refilled).  *num_used,
** when not NULL, receives the tier that produced the result (LSIM_NUM_GMP or
** LSIM_NUM_INT64).
*/
lsim_err lsim_ref_delta_ex(const lsim_rowplan *p, const lsim_qmat *X,
                           const lsim_qadapter *ad, int nad, int path,
                           int scale_mode, int num_mode, lsim_ref_trace *trace,
                           int *num_used, lsim_qmat *delta, lsim_errbuf *eb);

/*
** Run every path under every scale mode (AUTO tier) and fail with
** E_PATH_MISMATCH naming the first differing path, scale mode, row and
** column unless all agree exactly; on success *delta holds the common
** result (the per_row, passed-scale one).  An error of any single run is
** returned with its own code, the message prefixed with the path and mode.
** delta may be NULL when only the verdict is wanted (a replay backend):
** the agreed result is then not converted to rationals at all.
**
** When every bound of the int tier holds, the eighteen runs share one
** snapshot (adapters resolved, plan metadata checked and inputs loaded
** once) and are compared in integers; any other outcome is decided by
** running them one at a time, so codes and messages are those of a single
** evaluation.
*/
lsim_err lsim_ref_delta_all(const lsim_rowplan *p, const lsim_qmat *X,
                            const lsim_qadapter *ad, int nad,
                            lsim_qmat *delta, lsim_errbuf *eb);
/*
** Compare got with want exactly: E_SHAPE when the shapes differ,
** E_PATH_MISMATCH naming `what`, the first differing row and column and
** both values otherwise.  (lsim_ref_delta_all reports through it; a
** backend's result is checked against cpu_ref the same way.)
*/
lsim_err lsim_ref_compare(const lsim_qmat *want, const lsim_qmat *got,
                          const char *what, lsim_errbuf *eb);
/* The same with a chosen numeric tier for every run. */
lsim_err lsim_ref_delta_all_ex(const lsim_rowplan *p, const lsim_qmat *X,
                               const lsim_qadapter *ad, int nad, int num_mode,
                               lsim_qmat *delta, lsim_errbuf *eb);

/* ---- base projection ----------------------------------------------------- */

/* Y[T][d_out] = X W^T with W logical [d_out][d_in]; AUTO tier. */
lsim_err lsim_ref_base(const lsim_qmat *X, const lsim_qmat *W, lsim_qmat *Y,
                       lsim_errbuf *eb);
/* The same with a chosen tier; *num_used (may be NULL) gets the tier used
** (LSIM_NUM_INT16, LSIM_NUM_INT16_SCALAR, LSIM_NUM_INT64 or LSIM_NUM_GMP). */
lsim_err lsim_ref_base_ex(const lsim_qmat *X, const lsim_qmat *W, int num_mode,
                          int *num_used, lsim_qmat *Y, lsim_errbuf *eb);
/* Y := Y + delta entrywise (same shape, E_SHAPE otherwise). */
lsim_err lsim_qmat_add(lsim_qmat *Y, const lsim_qmat *delta, lsim_errbuf *eb);

/* ---- zero-padded physical slots ------------------------------------------ */

/*
** A resident slot at physical rank R (0x06A): A_bar [R][d_in] holds the
** logical A in its leading `rank` rows, B_bar [d_out][R] holds B in its
** leading `rank` columns, and both tails must be exactly zero.  `placement`
** tags where the semantic scale lives (enum lsim_scale_mode): PASSED means
** the factors are unscaled and `scale` must be applied at launch; FOLD_A /
** FOLD_B mean s is already inside A_bar / B_bar (`scale` still records s).
** The fields are read-only to callers except through the functions below;
** tests may write A_bar/B_bar directly to corrupt a tail.
*/
typedef struct lsim_qslot {
  int R, d_in, d_out;
  int adapter;   /* loaded adapter id; LSIM_BASE (-1) when empty */
  int rank;      /* loaded logical rank; 0 when empty */
  int placement; /* enum lsim_scale_mode */
  mpq_t scale;
  lsim_qmat A;   /* A_bar [R][d_in] */
  lsim_qmat B;   /* B_bar [d_out][R] */
} lsim_qslot;

/* An empty slot with zero factors.  Release with lsim_qslot_release (also
** after a failed init; releasing twice is harmless). */
lsim_err lsim_qslot_init(lsim_qslot *s, int R, int d_in, int d_out,
                         lsim_errbuf *eb);
void lsim_qslot_release(lsim_qslot *s);
/* Zero both factors entirely and mark the slot empty. */
void lsim_qslot_reset(lsim_qslot *s);
/*
** Reset, then copy a's factors into the leading slices, folding s into A
** or B per `placement`.  E_SLOT_RANK when a->rank > R; the adapter is
** checked with lsim_qadapter_check against the slot's d_in/d_out.  On
** failure the slot is left reset (empty).
*/
lsim_err lsim_qslot_load(lsim_qslot *s, const lsim_qadapter *a, int placement,
                         lsim_errbuf *eb);
/* E_PAD_NONZERO unless rows rank..R-1 of A_bar and columns rank..R-1 of
** B_bar are all exactly zero (message names the factor, row and column). */
lsim_err lsim_qslot_check(const lsim_qslot *s, lsim_errbuf *eb);

/*
** The padded family from resident slots: slots[0..nslots) looked up by
** their adapter id, every one with the same R (== p->phys_rank when the
** plan has active rows, E_SHAPE otherwise) and d_in == X->cols.  Every slot
** an active row uses is verified with lsim_qslot_check before any
** arithmetic.  launch_scale says how this launch applies the scale:
** LSIM_SCALE_PASSED multiplies each expand result by the slot's scale, a
** FOLD_* value applies none and expects the scale folded (into either
** factor: both are exact).  E_SCALE_PLACEMENT when a folded slot meets a
** launch that passes the scale (s applied twice) or an unscaled slot meets
** a folded launch (s never applied).
*/
lsim_err lsim_ref_delta_slots(const lsim_rowplan *p, const lsim_qmat *X,
                              const lsim_qslot *slots, int nslots,
                              int launch_scale, int num_mode,
                              lsim_ref_trace *trace, lsim_qmat *delta,
                              lsim_errbuf *eb);

/*
** Test-only: make the result of one family under one scale placement wrong
** (its first active row's first entry plus one) in every evaluation that
** follows, so tests can show lsim_ref_delta_all catching a wrong family;
** path -1 turns it off.  Process-wide; never called outside tests.
*/
void lsim_ref__fault(int path, int scale_mode);
/* Test-only: how many lsim_ref_delta_all calls so far were answered by the
** one-pass int tier (the others ran one evaluation at a time). */
long lsim_ref__one_pass_count(void);

#ifdef __cplusplus
}
#endif

#endif /* LSIM_CPU_REF_H */
