/*
** rowplan.c: the iteration planner's frozen row-level launch metadata.
**
** One iteration arrives as requests in scheduler order.  The planner packs
** them phase-major (every prefill before every decode, within-phase order
** from the caller or from the scheduler), expands each request into its
** token rows, and derives every view a backend or the cost model may want:
** contiguous adapter runs, the adapter-grouped permutation of active rows
** (contiguous/SGMV style), vLLM-style indexed groups with a base group,
** rank buckets, sampling rows and the rank ledgers.  docs/PLANNER.md walks
** through the coordinate systems and the two reference fixtures.
**
** Invariants.  lsim_rowplan_validate() checks them in this order, reading
** only the arrays, and returns the code in brackets for the first one that
** fails.  The order matters: a count is always cross-checked against an
** independent derivation before it is used as an array length, so a plan
** with one corrupted field never makes validate read out of bounds.
**
**   V1  every array is present [the family's code]; n, npre, ndec >= 0
**       and n == npre + ndec [REQ_COUNT]; phys_rank >= 0 [RANK_SLOT]
**   V2  per request: phase is PREFILL or DECODE [PHASE_ORDER]; adapter is
**       LSIM_BASE or >= 0 [UNKNOWN_ADAPTER]; rank 0 on base, >= 1 on an
**       adapter [RANK]; rank <= phys_rank [RANK_SLOT]; a prefill has >= 1
**       rows [EMPTY_PREFILL]; a decode exactly 1 [DECODE_ROWS]; uids are
**       distinct [DUP_REQUEST]; one adapter id, one rank [FIXED_RANK]
**   V3  packed is a permutation of 0..n-1 [PACKED_ORDER] whose first npre
**       entries are the prefills [PHASE_ORDER]
**   V4  packed_inv[packed[k]] == k [INVERSE]
**   V5  T == sum of req_rows [ROW_COUNT; EXPANSION when T == n instead]
**   V6  prefill_indptr is the exclusive prefix sum of the packed prefills'
**       rows [INDPTR]; doff == prefill_indptr[npre] [DOFF]
**   V7  each row names its owner, its position in the owner's rows and the
**       owner's phase [ROW_OWNER], the owner's adapter [EXPANSION] and
**       the owner's rank [RANK]
**   V8  sample_rows[j] is the last row of prefill j or the row of decode j
**       [SAMPLE_ROWS]
**   V9  runs are the maximal equal-adapter runs of rows 0..T-1: nruns,
**       offsets 0..T strictly increasing, labels, maximality [RUNS; a last
**       offset equal to n instead of T is EXPANSION]
**   V10 grouped segments: nactive == number of non-base rows [ROW_COUNT
**       when larger, ROW_MISSING when smaller]; perm entries in 0..T-1
**       [ROW_BOUNDS], non-base [BASE_ROW], distinct [ROW_DUP], covering
**       [ROW_MISSING]; nseg == distinct active adapters [PTR_COUNT];
**       offsets 0..nactive, non-decreasing [OFFSETS], no empty segment
**       [EMPTY_SEGMENT]; each segment's rows carry its adapter and the
**       adapters ascend [SEG_ADAPTER]; rows ascend within a segment
**       [GROUP_ORDER]; seg_rank is the segment's rank [FIXED_RANK]
**   V11 indexed metadata: nids == distinct row adapters (base included),
**       starts 0..T strictly increasing, counts == start differences, ids
**       ascending (so -1 first), sorted_rows a stable grouping of all rows
**       [INDEXED]
**   V12 rank buckets: nbuckets == distinct active ranks, offsets 0..nactive
**       strictly increasing, ranks ascending, bucket_rows a stable grouping
**       of the active rows by rank [BUCKET]
**   V13 true_rank_rows == sum of active row ranks, padded_rank_rows ==
**       nactive * phys_rank, wasted == padded - true [LEDGER]
**
** lsim_rowplan_build() checks its input against V2 and V3 (with max_rank in
** place of phys_rank), derives the arrays, then runs the full validator; a
** failure there is the builder's own bug and comes back as LSIM_E_BUG.
**
** Every array is allocated with at least one element, so a built plan has
** no NULL array even when a count is 0; validate insists on that.
**
** What validate cannot see is how large an allocation really is.  One
** corrupted count is always caught before it serves as a length (each is
** re-derived first: n from npre + ndec, T from the request rows, nactive,
** nseg, nids, nbuckets and nruns from the rows), and corrupted elements
** are range-checked before they index anything.  Two counts changed
** together so that they agree (n and npre, say) are beyond it.
*/
#include "rowplan.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/*
** Every array of the plan: field, the count field that sizes it, the extra
** element (+1 for offset vectors), and the code reported when it is absent.
*/
#define LSIM__ROWPLAN_ARRAYS(X)                          \
  X(req_uid, n, 0, LSIM_E_PLAN_REQ_COUNT)                \
  X(req_adapter, n, 0, LSIM_E_PLAN_REQ_COUNT)            \
  X(req_rank, n, 0, LSIM_E_PLAN_REQ_COUNT)               \
  X(req_phase, n, 0, LSIM_E_PLAN_REQ_COUNT)              \
  X(req_rows, n, 0, LSIM_E_PLAN_REQ_COUNT)               \
  X(packed, n, 0, LSIM_E_PLAN_PACKED_ORDER)              \
  X(packed_inv, n, 0, LSIM_E_PLAN_INVERSE)               \
  X(prefill_indptr, npre, 1, LSIM_E_PLAN_INDPTR)         \
  X(sample_rows, n, 0, LSIM_E_PLAN_SAMPLE_ROWS)          \
  X(row_req, T, 0, LSIM_E_PLAN_ROW_COUNT)                \
  X(row_pos, T, 0, LSIM_E_PLAN_ROW_COUNT)                \
  X(row_phase, T, 0, LSIM_E_PLAN_ROW_COUNT)              \
  X(row_adapter, T, 0, LSIM_E_PLAN_ROW_COUNT)            \
  X(row_rank, T, 0, LSIM_E_PLAN_ROW_COUNT)               \
  X(run_adapter, nruns, 0, LSIM_E_PLAN_RUNS)             \
  X(run_offsets, nruns, 1, LSIM_E_PLAN_RUNS)             \
  X(perm, nactive, 0, LSIM_E_PLAN_ROW_MISSING)           \
  X(seg_adapter, nseg, 0, LSIM_E_PLAN_PTR_COUNT)         \
  X(seg_rank, nseg, 0, LSIM_E_PLAN_PTR_COUNT)            \
  X(seg_offsets, nseg, 1, LSIM_E_PLAN_PTR_COUNT)         \
  X(sorted_rows, T, 0, LSIM_E_PLAN_INDEXED)              \
  X(active_ids, nids, 0, LSIM_E_PLAN_INDEXED)            \
  X(id_counts, nids, 0, LSIM_E_PLAN_INDEXED)             \
  X(id_starts, nids, 1, LSIM_E_PLAN_INDEXED)             \
  X(bucket_rank, nbuckets, 0, LSIM_E_PLAN_BUCKET)        \
  X(bucket_rows, nactive, 0, LSIM_E_PLAN_BUCKET)         \
  X(bucket_offsets, nbuckets, 1, LSIM_E_PLAN_BUCKET)

/* ---- small helpers ------------------------------------------------------ */

/* calloc of max(count, 1) elements; NULL on overflow or exhaustion. */
static void *lsim__alloc(int64_t count, size_t elt) {
  if (count < 1)
    count = 1;
  if ((uint64_t)count > SIZE_MAX / elt)
    return NULL;
  return calloc((size_t)count, elt);
}

static int lsim__cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/*
** A sort key: hi in 0..2^32-1 (an adapter id + 1, a rank, ...) above lo
** in 0..2^32-1 (a row).  Sorting keys is a stable sort of lo by hi, and the
** order depends on nothing but the values.
*/
static uint64_t lsim__key(int64_t hi, int64_t lo) {
  return ((uint64_t)hi << 32) | (uint64_t)(uint32_t)lo;
}

static int64_t lsim__key_hi(uint64_t k) { return (int64_t)(k >> 32); }
static int lsim__key_lo(uint64_t k) { return (int)(uint32_t)k; }

/* Number of distinct values among keys[0..m) after sorting them by hi. */
static int lsim__distinct_hi(uint64_t *keys, int m) {
  int d = 0;
  if (m > 1)
    qsort(keys, (size_t)m, sizeof *keys, lsim__cmp_u64);
  for (int i = 0; i < m; i++)
    if (i == 0 || lsim__key_hi(keys[i]) != lsim__key_hi(keys[i - 1]))
      d++;
  return d;
}

/* ---- checks shared by build and validate -------------------------------- */

/*
** V2 on the request arrays.  slot is the largest rank allowed (INT_MAX when
** there is no physical slot).  keys needs room for n entries.
*/
static lsim_err lsim__check_requests(const lsim_rowplan *p, int slot,
                                     uint64_t *keys, lsim_errbuf *eb) {
  int n = p->n, m = 0;
  for (int j = 0; j < n; j++) {
    long long uid = (long long)p->req_uid[j];
    int ph = p->req_phase[j], a = p->req_adapter[j], r = p->req_rank[j];
    int rows = p->req_rows[j];
    if (ph != LSIM_PHASE_PREFILL && ph != LSIM_PHASE_DECODE)
      return lsim_fail(eb, LSIM_E_PLAN_PHASE_ORDER,
                       "request %d (uid %lld) has unknown phase %d", j, uid,
                       ph);
    if (a < LSIM_BASE)
      return lsim_fail(eb, LSIM_E_PLAN_UNKNOWN_ADAPTER,
                       "request %d (uid %lld) names adapter %d, neither base "
                       "(-1) nor a catalog index",
                       j, uid, a);
    if (a == LSIM_BASE && r != 0)
      return lsim_fail(eb, LSIM_E_PLAN_RANK,
                       "base-only request %d (uid %lld) has rank %d, not 0", j,
                       uid, r);
    if (a != LSIM_BASE && r < 1)
      return lsim_fail(eb, LSIM_E_PLAN_RANK,
                       "request %d (uid %lld) uses adapter %d with rank %d, "
                       "below 1",
                       j, uid, a, r);
    if (r > slot)
      return lsim_fail(eb, LSIM_E_PLAN_RANK_SLOT,
                       "request %d (uid %lld) has rank %d above the physical "
                       "slot rank %d",
                       j, uid, r, slot);
    if (ph == LSIM_PHASE_PREFILL && rows < 1)
      return lsim_fail(eb, LSIM_E_PLAN_EMPTY_PREFILL,
                       "prefill request %d (uid %lld) has %d rows", j, uid,
                       rows);
    if (ph == LSIM_PHASE_DECODE && rows != 1)
      return lsim_fail(eb, LSIM_E_PLAN_DECODE_ROWS,
                       "decode request %d (uid %lld) has %d rows, not 1", j,
                       uid, rows);
  }

  /* distinct uids: sort the raw bit patterns, look for a neighbour pair */
  for (int j = 0; j < n; j++)
    keys[j] = (uint64_t)p->req_uid[j];
  if (n > 1)
    qsort(keys, (size_t)n, sizeof *keys, lsim__cmp_u64);
  for (int i = 1; i < n; i++) {
    if (keys[i] != keys[i - 1])
      continue;
    int first = -1, second = -1;
    for (int j = 0; j < n && second < 0; j++)
      if ((uint64_t)p->req_uid[j] == keys[i]) {
        if (first < 0)
          first = j;
        else
          second = j;
      }
    return lsim_fail(eb, LSIM_E_PLAN_DUP_REQUEST,
                     "requests %d and %d share uid %lld", first, second,
                     (long long)p->req_uid[first]);
  }

  /* one adapter id, one logical rank: sort (adapter, rank) pairs */
  for (int j = 0; j < n; j++)
    if (p->req_adapter[j] != LSIM_BASE)
      keys[m++] = lsim__key(p->req_adapter[j], p->req_rank[j]);
  if (m > 1)
    qsort(keys, (size_t)m, sizeof *keys, lsim__cmp_u64);
  for (int i = 1; i < m; i++)
    if (lsim__key_hi(keys[i]) == lsim__key_hi(keys[i - 1]) &&
        lsim__key_lo(keys[i]) != lsim__key_lo(keys[i - 1]))
      return lsim_fail(eb, LSIM_E_PLAN_FIXED_RANK,
                       "adapter %d appears with ranks %d and %d",
                       (int)lsim__key_hi(keys[i]), lsim__key_lo(keys[i - 1]),
                       lsim__key_lo(keys[i]));
  return 0;
}

/* V3: packed is a permutation with the npre prefills first.  seen[n]. */
static lsim_err lsim__check_packed(const lsim_rowplan *p, unsigned char *seen,
                                   lsim_errbuf *eb) {
  int n = p->n;
  if (n > 0)
    memset(seen, 0, (size_t)n);
  for (int k = 0; k < n; k++) {
    int j = p->packed[k];
    if (j < 0 || j >= n)
      return lsim_fail(eb, LSIM_E_PLAN_PACKED_ORDER,
                       "packed position %d names request %d, outside 0..%d",
                       k, j, n - 1);
    if (seen[j])
      return lsim_fail(eb, LSIM_E_PLAN_PACKED_ORDER,
                       "request %d appears twice in the packed order", j);
    seen[j] = 1;
  }
  for (int k = 0; k < n; k++) {
    int j = p->packed[k];
    if (k < p->npre && p->req_phase[j] != LSIM_PHASE_PREFILL)
      return lsim_fail(eb, LSIM_E_PLAN_PHASE_ORDER,
                       "decode request %d (uid %lld) is packed at position "
                       "%d, before a prefill",
                       j, (long long)p->req_uid[j], k);
    if (k >= p->npre && p->req_phase[j] != LSIM_PHASE_DECODE)
      return lsim_fail(eb, LSIM_E_PLAN_PHASE_ORDER,
                       "prefill request %d (uid %lld) is packed at position "
                       "%d, after a decode",
                       j, (long long)p->req_uid[j], k);
  }
  return 0;
}

/* Rows [*lo, *hi) of packed position k (V6 must hold). */
static void lsim__rows_of(const lsim_rowplan *p, int k, int *lo, int *hi) {
  if (k < p->npre) {
    *lo = p->prefill_indptr[k];
    *hi = p->prefill_indptr[k + 1];
  } else {
    *lo = p->doff + (k - p->npre);
    *hi = *lo + 1;
  }
}

/* ---- validate ----------------------------------------------------------- */

/* V1 */
static lsim_err lsim__check_counts(const lsim_rowplan *p, lsim_errbuf *eb) {
#define LSIM__PRESENT(field, cnt, plus, code) \
  if (!p->field)                              \
    return lsim_fail(eb, code, "array " #field " is missing");
  LSIM__ROWPLAN_ARRAYS(LSIM__PRESENT)
#undef LSIM__PRESENT
  if (p->n < 0 || p->npre < 0 || p->ndec < 0 ||
      (int64_t)p->n != (int64_t)p->npre + p->ndec)
    return lsim_fail(eb, LSIM_E_PLAN_REQ_COUNT,
                     "request counts disagree: n %d, npre %d, ndec %d", p->n,
                     p->npre, p->ndec);
  if (p->phys_rank < 0)
    return lsim_fail(eb, LSIM_E_PLAN_RANK_SLOT, "physical rank %d is negative",
                     p->phys_rank);
  return 0;
}

/* V4 */
static lsim_err lsim__check_inverse(const lsim_rowplan *p, lsim_errbuf *eb) {
  for (int k = 0; k < p->n; k++) {
    int j = p->packed[k];
    if (p->packed_inv[j] != k)
      return lsim_fail(eb, LSIM_E_PLAN_INVERSE,
                       "packed position %d holds request %d but packed_inv "
                       "maps it to %d",
                       k, j, p->packed_inv[j]);
  }
  return 0;
}

/* V5 */
static lsim_err lsim__check_total(const lsim_rowplan *p, lsim_errbuf *eb) {
  int64_t want = 0;
  for (int j = 0; j < p->n; j++)
    want += p->req_rows[j];
  if ((int64_t)p->T == want)
    return 0;
  if (p->T == p->n)
    return lsim_fail(eb, LSIM_E_PLAN_EXPANSION,
                     "row count %d equals the number of requests but the "
                     "requests contribute %lld token rows",
                     p->T, (long long)want);
  return lsim_fail(eb, LSIM_E_PLAN_ROW_COUNT,
                   "row count %d but the requests contribute %lld rows", p->T,
                   (long long)want);
}

/* V6 */
static lsim_err lsim__check_indptr(const lsim_rowplan *p, lsim_errbuf *eb) {
  int64_t acc = 0;
  if (p->prefill_indptr[0] != 0)
    return lsim_fail(eb, LSIM_E_PLAN_INDPTR, "prefill_indptr[0] is %d, not 0",
                     p->prefill_indptr[0]);
  for (int u = 0; u < p->npre; u++) {
    acc += p->req_rows[p->packed[u]];
    if ((int64_t)p->prefill_indptr[u + 1] != acc)
      return lsim_fail(eb, LSIM_E_PLAN_INDPTR,
                       "prefill_indptr[%d] is %d, expected %lld", u + 1,
                       p->prefill_indptr[u + 1], (long long)acc);
  }
  if ((int64_t)p->doff != acc)
    return lsim_fail(eb, LSIM_E_PLAN_DOFF,
                     "doff is %d but the prefills end at row %lld", p->doff,
                     (long long)acc);
  return 0;
}

/* V7 */
static lsim_err lsim__check_rows(const lsim_rowplan *p, lsim_errbuf *eb) {
  for (int k = 0; k < p->n; k++) {
    int j = p->packed[k], lo, hi;
    lsim__rows_of(p, k, &lo, &hi);
    for (int i = lo; i < hi; i++) {
      if (p->row_req[i] != j)
        return lsim_fail(eb, LSIM_E_PLAN_ROW_OWNER,
                         "row %d belongs to request %d but row_req says %d", i,
                         j, p->row_req[i]);
      if (p->row_pos[i] != i - lo)
        return lsim_fail(eb, LSIM_E_PLAN_ROW_OWNER,
                         "row %d is token %d of request %d but row_pos says "
                         "%d",
                         i, i - lo, j, p->row_pos[i]);
      if (p->row_phase[i] != p->req_phase[j])
        return lsim_fail(eb, LSIM_E_PLAN_ROW_OWNER,
                         "row %d has phase %d but its request %d has phase %d",
                         i, p->row_phase[i], j, p->req_phase[j]);
      if (p->row_adapter[i] != p->req_adapter[j])
        return lsim_fail(eb, LSIM_E_PLAN_EXPANSION,
                         "row %d carries adapter %d but its request %d (uid "
                         "%lld) uses %d",
                         i, p->row_adapter[i], j, (long long)p->req_uid[j],
                         p->req_adapter[j]);
      if (p->row_rank[i] != p->req_rank[j])
        return lsim_fail(eb, LSIM_E_PLAN_RANK,
                         "row %d has rank %d but its request %d has rank %d",
                         i, p->row_rank[i], j, p->req_rank[j]);
    }
  }
  return 0;
}

/* V8 */
static lsim_err lsim__check_sample(const lsim_rowplan *p, lsim_errbuf *eb) {
  for (int k = 0; k < p->n; k++) {
    int j = p->packed[k], lo, hi;
    lsim__rows_of(p, k, &lo, &hi);
    if (p->sample_rows[j] != hi - 1)
      return lsim_fail(eb, LSIM_E_PLAN_SAMPLE_ROWS,
                       "request %d (uid %lld) samples row %d, expected its "
                       "last row %d",
                       j, (long long)p->req_uid[j], p->sample_rows[j], hi - 1);
  }
  return 0;
}

/* V9 */
static lsim_err lsim__check_runs(const lsim_rowplan *p, lsim_errbuf *eb) {
  const int *ra = p->row_adapter, *ro = p->run_offsets;
  int want = 0;
  for (int i = 0; i < p->T; i++)
    if (i == 0 || ra[i] != ra[i - 1])
      want++;
  if (p->nruns != want)
    return lsim_fail(eb, LSIM_E_PLAN_RUNS,
                     "nruns is %d but the rows form %d adapter runs", p->nruns,
                     want);
  if (ro[0] != 0)
    return lsim_fail(eb, LSIM_E_PLAN_RUNS, "run_offsets[0] is %d, not 0",
                     ro[0]);
  if (ro[p->nruns] != p->T) {
    if (ro[p->nruns] == p->n)
      return lsim_fail(eb, LSIM_E_PLAN_EXPANSION,
                       "runs end at %d, the number of requests, not at T %d",
                       ro[p->nruns], p->T);
    return lsim_fail(eb, LSIM_E_PLAN_RUNS, "runs end at %d, not at T %d",
                     ro[p->nruns], p->T);
  }
  for (int r = 0; r < p->nruns; r++)
    if (ro[r + 1] <= ro[r])
      return lsim_fail(eb, LSIM_E_PLAN_RUNS,
                       "run_offsets not increasing at run %d (%d then %d)", r,
                       ro[r], ro[r + 1]);
  for (int r = 0; r < p->nruns; r++) {
    for (int i = ro[r]; i < ro[r + 1]; i++)
      if (ra[i] != p->run_adapter[r])
        return lsim_fail(eb, LSIM_E_PLAN_RUNS,
                         "row %d with adapter %d lies in run %d labelled %d", i,
                         ra[i], r, p->run_adapter[r]);
    if (r > 0 && p->run_adapter[r] == p->run_adapter[r - 1])
      return lsim_fail(eb, LSIM_E_PLAN_RUNS,
                       "runs %d and %d share adapter %d: not maximal", r - 1,
                       r, p->run_adapter[r]);
  }
  return 0;
}

/* V10.  keys[T], seen[T]. */
static lsim_err lsim__check_grouped(const lsim_rowplan *p, uint64_t *keys,
                                    unsigned char *seen, lsim_errbuf *eb) {
  const int *ra = p->row_adapter, *so = p->seg_offsets;
  int count = 0, d;
  for (int i = 0; i < p->T; i++)
    if (ra[i] != LSIM_BASE)
      keys[count++] = lsim__key(ra[i], i);
  if (p->nactive < 0 || p->nactive > count)
    return lsim_fail(eb, LSIM_E_PLAN_ROW_COUNT,
                     "nactive is %d but only %d rows use an adapter",
                     p->nactive, count);
  if (p->T > 0)
    memset(seen, 0, (size_t)p->T);
  for (int u = 0; u < p->nactive; u++) {
    int r = p->perm[u];
    if (r < 0 || r >= p->T)
      return lsim_fail(eb, LSIM_E_PLAN_ROW_BOUNDS,
                       "perm[%d] is row %d, outside 0..%d", u, r, p->T - 1);
    if (ra[r] == LSIM_BASE)
      return lsim_fail(eb, LSIM_E_PLAN_BASE_ROW,
                       "perm[%d] is base-only row %d", u, r);
    if (seen[r])
      return lsim_fail(eb, LSIM_E_PLAN_ROW_DUP,
                       "row %d appears twice in perm (again at %d)", r, u);
    seen[r] = 1;
  }
  if (p->nactive < count)
    for (int i = 0; i < p->T; i++)
      if (ra[i] != LSIM_BASE && !seen[i])
        return lsim_fail(eb, LSIM_E_PLAN_ROW_MISSING,
                         "active row %d (adapter %d) is missing from perm", i,
                         ra[i]);
  d = lsim__distinct_hi(keys, count);
  if (p->nseg != d)
    return lsim_fail(eb, LSIM_E_PLAN_PTR_COUNT,
                     "nseg is %d but the active rows use %d adapters", p->nseg,
                     d);
  if (so[0] != 0)
    return lsim_fail(eb, LSIM_E_PLAN_OFFSETS, "seg_offsets[0] is %d, not 0",
                     so[0]);
  if (so[p->nseg] != p->nactive)
    return lsim_fail(eb, LSIM_E_PLAN_OFFSETS,
                     "seg_offsets end at %d, not at nactive %d", so[p->nseg],
                     p->nactive);
  for (int t = 0; t < p->nseg; t++)
    if (so[t + 1] < so[t])
      return lsim_fail(eb, LSIM_E_PLAN_OFFSETS,
                       "seg_offsets decrease at segment %d (%d then %d)", t,
                       so[t], so[t + 1]);
  for (int t = 0; t < p->nseg; t++)
    if (so[t + 1] == so[t])
      return lsim_fail(eb, LSIM_E_PLAN_EMPTY_SEGMENT, "segment %d is empty",
                       t);
  for (int t = 0; t < p->nseg; t++) {
    for (int u = so[t]; u < so[t + 1]; u++)
      if (ra[p->perm[u]] != p->seg_adapter[t])
        return lsim_fail(eb, LSIM_E_PLAN_SEG_ADAPTER,
                         "row %d (adapter %d) lies in segment %d of adapter "
                         "%d",
                         p->perm[u], ra[p->perm[u]], t, p->seg_adapter[t]);
    if (t > 0 && p->seg_adapter[t] <= p->seg_adapter[t - 1])
      return lsim_fail(eb, LSIM_E_PLAN_SEG_ADAPTER,
                       "segment adapters not ascending at %d (%d then %d)", t,
                       p->seg_adapter[t - 1], p->seg_adapter[t]);
  }
  for (int t = 0; t < p->nseg; t++) {
    for (int u = so[t] + 1; u < so[t + 1]; u++)
      if (p->perm[u] < p->perm[u - 1])
        return lsim_fail(eb, LSIM_E_PLAN_GROUP_ORDER,
                         "segment %d lists row %d before row %d: not stable",
                         t, p->perm[u - 1], p->perm[u]);
    if (p->seg_rank[t] != p->row_rank[p->perm[so[t]]])
      return lsim_fail(eb, LSIM_E_PLAN_FIXED_RANK,
                       "segment %d (adapter %d) launches at rank %d but its "
                       "rows have rank %d",
                       t, p->seg_adapter[t], p->seg_rank[t],
                       p->row_rank[p->perm[so[t]]]);
  }
  return 0;
}

/* V11.  keys[T], seen[T]. */
static lsim_err lsim__check_indexed(const lsim_rowplan *p, uint64_t *keys,
                                    unsigned char *seen, lsim_errbuf *eb) {
  const int *ra = p->row_adapter, *st = p->id_starts;
  int d;
  for (int i = 0; i < p->T; i++)
    keys[i] = lsim__key((int64_t)ra[i] + 1, i);
  d = lsim__distinct_hi(keys, p->T);
  if (p->nids != d)
    return lsim_fail(eb, LSIM_E_PLAN_INDEXED,
                     "nids is %d but the rows use %d adapter ids", p->nids, d);
  if (st[0] != 0 || st[p->nids] != p->T)
    return lsim_fail(eb, LSIM_E_PLAN_INDEXED,
                     "id_starts run from %d to %d, not from 0 to T %d", st[0],
                     st[p->nids], p->T);
  for (int t = 0; t < p->nids; t++) {
    if (st[t + 1] <= st[t])
      return lsim_fail(eb, LSIM_E_PLAN_INDEXED,
                       "id_starts not increasing at group %d (%d then %d)", t,
                       st[t], st[t + 1]);
    if (p->id_counts[t] != st[t + 1] - st[t])
      return lsim_fail(eb, LSIM_E_PLAN_INDEXED,
                       "id_counts[%d] is %d but the group spans %d rows", t,
                       p->id_counts[t], st[t + 1] - st[t]);
    if (t > 0 && p->active_ids[t] <= p->active_ids[t - 1])
      return lsim_fail(eb, LSIM_E_PLAN_INDEXED,
                       "active_ids not ascending at %d (%d then %d)", t,
                       p->active_ids[t - 1], p->active_ids[t]);
  }
  if (p->T > 0)
    memset(seen, 0, (size_t)p->T);
  for (int t = 0; t < p->nids; t++)
    for (int u = st[t]; u < st[t + 1]; u++) {
      int r = p->sorted_rows[u];
      if (r < 0 || r >= p->T)
        return lsim_fail(eb, LSIM_E_PLAN_INDEXED,
                         "sorted_rows[%d] is row %d, outside 0..%d", u, r,
                         p->T - 1);
      if (seen[r])
        return lsim_fail(eb, LSIM_E_PLAN_INDEXED,
                         "row %d appears twice in sorted_rows", r);
      seen[r] = 1;
      if (ra[r] != p->active_ids[t])
        return lsim_fail(eb, LSIM_E_PLAN_INDEXED,
                         "row %d (adapter %d) lies in the group of id %d", r,
                         ra[r], p->active_ids[t]);
      if (u > st[t] && r < p->sorted_rows[u - 1])
        return lsim_fail(eb, LSIM_E_PLAN_INDEXED,
                         "group %d lists row %d before row %d: not stable", t,
                         p->sorted_rows[u - 1], r);
    }
  return 0;
}

/* V12.  keys[T], seen[T].  V10 holds, so nactive counts the active rows. */
static lsim_err lsim__check_buckets(const lsim_rowplan *p, uint64_t *keys,
                                    unsigned char *seen, lsim_errbuf *eb) {
  const int *bo = p->bucket_offsets;
  int m = 0, d;
  for (int i = 0; i < p->T; i++)
    if (p->row_adapter[i] != LSIM_BASE)
      keys[m++] = lsim__key(p->row_rank[i], i);
  d = lsim__distinct_hi(keys, m);
  if (p->nbuckets != d)
    return lsim_fail(eb, LSIM_E_PLAN_BUCKET,
                     "nbuckets is %d but the active rows use %d ranks",
                     p->nbuckets, d);
  if (bo[0] != 0 || bo[p->nbuckets] != p->nactive)
    return lsim_fail(eb, LSIM_E_PLAN_BUCKET,
                     "bucket_offsets run from %d to %d, not from 0 to "
                     "nactive %d",
                     bo[0], bo[p->nbuckets], p->nactive);
  for (int t = 0; t < p->nbuckets; t++) {
    if (bo[t + 1] <= bo[t])
      return lsim_fail(eb, LSIM_E_PLAN_BUCKET,
                       "bucket_offsets not increasing at bucket %d", t);
    if (t > 0 && p->bucket_rank[t] <= p->bucket_rank[t - 1])
      return lsim_fail(eb, LSIM_E_PLAN_BUCKET,
                       "bucket ranks not ascending at %d (%d then %d)", t,
                       p->bucket_rank[t - 1], p->bucket_rank[t]);
  }
  if (p->T > 0)
    memset(seen, 0, (size_t)p->T);
  for (int t = 0; t < p->nbuckets; t++)
    for (int u = bo[t]; u < bo[t + 1]; u++) {
      int r = p->bucket_rows[u];
      if (r < 0 || r >= p->T || p->row_adapter[r] == LSIM_BASE || seen[r])
        return lsim_fail(eb, LSIM_E_PLAN_BUCKET,
                         "bucket_rows[%d] is row %d: out of range, base-only "
                         "or repeated",
                         u, r);
      seen[r] = 1;
      if (p->row_rank[r] != p->bucket_rank[t])
        return lsim_fail(eb, LSIM_E_PLAN_BUCKET,
                         "row %d (rank %d) lies in the bucket of rank %d", r,
                         p->row_rank[r], p->bucket_rank[t]);
      if (u > bo[t] && r < p->bucket_rows[u - 1])
        return lsim_fail(eb, LSIM_E_PLAN_BUCKET,
                         "bucket %d lists row %d before row %d: not stable", t,
                         p->bucket_rows[u - 1], r);
    }
  return 0;
}

/* V13 */
static lsim_err lsim__check_ledgers(const lsim_rowplan *p, lsim_errbuf *eb) {
  int64_t truth = 0, padded = (int64_t)p->nactive * p->phys_rank;
  for (int i = 0; i < p->T; i++)
    if (p->row_adapter[i] != LSIM_BASE)
      truth += p->row_rank[i];
  if (p->true_rank_rows != truth)
    return lsim_fail(eb, LSIM_E_PLAN_LEDGER,
                     "true_rank_rows is %lld, the rows sum to %lld",
                     (long long)p->true_rank_rows, (long long)truth);
  if (p->padded_rank_rows != padded)
    return lsim_fail(eb, LSIM_E_PLAN_LEDGER,
                     "padded_rank_rows is %lld, expected %d rows x rank %d",
                     (long long)p->padded_rank_rows, p->nactive, p->phys_rank);
  if (p->wasted_rank_rows != padded - truth)
    return lsim_fail(eb, LSIM_E_PLAN_LEDGER,
                     "wasted_rank_rows is %lld, expected %lld",
                     (long long)p->wasted_rank_rows,
                     (long long)(padded - truth));
  return 0;
}

lsim_err lsim_rowplan_validate(const lsim_rowplan *p, lsim_errbuf *eb) {
  uint64_t *keys = NULL;
  unsigned char *seen = NULL;
  lsim_err err;
  if (!p)
    return lsim_fail(eb, LSIM_E_USAGE, "no plan to validate");
  if ((err = lsim__check_counts(p, eb)))
    return err;
  keys = lsim__alloc(p->n, sizeof *keys);
  seen = lsim__alloc(p->n, 1);
  if (!keys || !seen) {
    err = lsim_fail(eb, LSIM_E_NOMEM, "out of memory validating a plan");
    goto out;
  }
  if ((err = lsim__check_requests(p, p->phys_rank, keys, eb)) ||
      (err = lsim__check_packed(p, seen, eb)) ||
      (err = lsim__check_inverse(p, eb)) || (err = lsim__check_total(p, eb)) ||
      (err = lsim__check_indptr(p, eb)) || (err = lsim__check_rows(p, eb)) ||
      (err = lsim__check_sample(p, eb)) || (err = lsim__check_runs(p, eb)))
    goto out;
  /* from here on T is trusted: re-size the scratch for rows */
  free(keys);
  free(seen);
  keys = lsim__alloc(p->T, sizeof *keys);
  seen = lsim__alloc(p->T, 1);
  if (!keys || !seen) {
    err = lsim_fail(eb, LSIM_E_NOMEM, "out of memory validating a plan");
    goto out;
  }
  if ((err = lsim__check_grouped(p, keys, seen, eb)) ||
      (err = lsim__check_indexed(p, keys, seen, eb)) ||
      (err = lsim__check_buckets(p, keys, seen, eb)) ||
      (err = lsim__check_ledgers(p, eb)))
    goto out;
out:
  free(keys);
  free(seen);
  return err;
}

/* ---- build -------------------------------------------------------------- */

#define LSIM__NEW(field, count)                            \
  do {                                                     \
    q.field = lsim__alloc((count), sizeof *q.field);       \
    if (!q.field) {                                        \
      err = lsim_fail(eb, LSIM_E_NOMEM,                    \
                      "out of memory building a row plan"); \
      goto out;                                            \
    }                                                      \
  } while (0)

lsim_err lsim_rowplan_build(lsim_rowplan *p, const lsim_plan_entry *e, int n,
                            const int *packed, int max_rank, lsim_errbuf *eb) {
  lsim_rowplan q = LSIM_ROWPLAN_INIT;
  uint64_t *keys = NULL;
  unsigned char *seen = NULL;
  lsim_err err = 0;
  int64_t total = 0;
  int m, i, maxr = 0;

  if (!p)
    return lsim_fail(eb, LSIM_E_USAGE, "no plan to build into");
  memset(p, 0, sizeof *p);
  if (n < 0 || (n > 0 && !e))
    return lsim_fail(eb, LSIM_E_PLAN_REQ_COUNT,
                     "a plan needs n >= 0 requests and an entry array (n %d)",
                     n);
  if (max_rank < 0)
    return lsim_fail(eb, LSIM_E_PLAN_RANK_SLOT, "max_rank %d is negative",
                     max_rank);

  /* requests, scheduler order (V2) */
  q.n = n;
  LSIM__NEW(req_uid, n);
  LSIM__NEW(req_adapter, n);
  LSIM__NEW(req_rank, n);
  LSIM__NEW(req_phase, n);
  LSIM__NEW(req_rows, n);
  for (int j = 0; j < n; j++) {
    q.req_uid[j] = e[j].request;
    q.req_adapter[j] = e[j].adapter;
    q.req_rank[j] = e[j].rank;
    q.req_phase[j] = e[j].phase;
    q.req_rows[j] = e[j].rows;
  }
  keys = lsim__alloc(n, sizeof *keys);
  seen = lsim__alloc(n, 1);
  if (!keys || !seen) {
    err = lsim_fail(eb, LSIM_E_NOMEM, "out of memory building a row plan");
    goto out;
  }
  if ((err = lsim__check_requests(&q, max_rank > 0 ? max_rank : INT_MAX, keys,
                                  eb)))
    goto out;
  for (int j = 0; j < n; j++)
    if (q.req_phase[j] == LSIM_PHASE_PREFILL)
      q.npre++;
  q.ndec = n - q.npre;

  /* packed order and its inverse (V3, V4) */
  LSIM__NEW(packed, n);
  LSIM__NEW(packed_inv, n);
  if (packed) {
    memcpy(q.packed, packed, (size_t)n * sizeof *q.packed);
  } else {
    int k = 0;
    for (int ph = LSIM_PHASE_PREFILL; ph <= LSIM_PHASE_DECODE; ph++)
      for (int j = 0; j < n; j++)
        if (q.req_phase[j] == ph)
          q.packed[k++] = j;
  }
  if ((err = lsim__check_packed(&q, seen, eb)))
    goto out;
  for (int k = 0; k < n; k++)
    q.packed_inv[q.packed[k]] = k;

  /* phase coordinates (V5, V6) */
  for (int j = 0; j < n; j++)
    total += q.req_rows[j];
  if (total > INT_MAX) {
    err = lsim_fail(eb, LSIM_E_PLAN_ROW_COUNT,
                    "the requests contribute %lld rows, more than %d",
                    (long long)total, INT_MAX);
    goto out;
  }
  q.T = (int)total;
  LSIM__NEW(prefill_indptr, (int64_t)q.npre + 1);
  for (int u = 0; u < q.npre; u++)
    q.prefill_indptr[u + 1] = q.prefill_indptr[u] + q.req_rows[q.packed[u]];
  q.doff = q.prefill_indptr[q.npre];

  /* token rows, per-token expansion (V7), sampling rows (V8) */
  LSIM__NEW(row_req, q.T);
  LSIM__NEW(row_pos, q.T);
  LSIM__NEW(row_phase, q.T);
  LSIM__NEW(row_adapter, q.T);
  LSIM__NEW(row_rank, q.T);
  LSIM__NEW(sample_rows, n);
  for (int k = 0; k < n; k++) {
    int j = q.packed[k], lo, hi;
    lsim__rows_of(&q, k, &lo, &hi);
    for (i = lo; i < hi; i++) {
      q.row_req[i] = j;
      q.row_pos[i] = i - lo;
      q.row_phase[i] = q.req_phase[j];
      q.row_adapter[i] = q.req_adapter[j];
      q.row_rank[i] = q.req_rank[j];
    }
    q.sample_rows[j] = hi - 1;
  }

  /* contiguous runs in packed order, base runs included (V9) */
  for (i = 0; i < q.T; i++)
    if (i == 0 || q.row_adapter[i] != q.row_adapter[i - 1])
      q.nruns++;
  LSIM__NEW(run_adapter, q.nruns);
  LSIM__NEW(run_offsets, (int64_t)q.nruns + 1);
  m = 0;
  for (i = 0; i < q.T; i++)
    if (i == 0 || q.row_adapter[i] != q.row_adapter[i - 1]) {
      q.run_adapter[m] = q.row_adapter[i];
      q.run_offsets[m++] = i;
    }
  q.run_offsets[q.nruns] = q.T;

  /* scratch for row-sized sorts */
  free(keys);
  keys = lsim__alloc(q.T, sizeof *keys);
  if (!keys) {
    err = lsim_fail(eb, LSIM_E_NOMEM, "out of memory building a row plan");
    goto out;
  }

  /* grouped segments: active rows stably sorted by adapter (V10) */
  m = 0;
  for (i = 0; i < q.T; i++)
    if (q.row_adapter[i] != LSIM_BASE)
      keys[m++] = lsim__key(q.row_adapter[i], i);
  q.nactive = m;
  q.nseg = lsim__distinct_hi(keys, m);
  LSIM__NEW(perm, q.nactive);
  LSIM__NEW(seg_adapter, q.nseg);
  LSIM__NEW(seg_rank, q.nseg);
  LSIM__NEW(seg_offsets, (int64_t)q.nseg + 1);
  for (int u = 0, t = 0; u < m; u++) {
    int r = lsim__key_lo(keys[u]);
    q.perm[u] = r;
    if (u == 0 || lsim__key_hi(keys[u]) != lsim__key_hi(keys[u - 1])) {
      q.seg_adapter[t] = q.row_adapter[r];
      q.seg_rank[t] = q.row_rank[r];
      q.seg_offsets[t++] = u;
    }
  }
  q.seg_offsets[q.nseg] = q.nactive;

  /* indexed metadata: all rows stably sorted by adapter id + 1 (V11) */
  for (i = 0; i < q.T; i++)
    keys[i] = lsim__key((int64_t)q.row_adapter[i] + 1, i);
  q.nids = lsim__distinct_hi(keys, q.T);
  LSIM__NEW(sorted_rows, q.T);
  LSIM__NEW(active_ids, q.nids);
  LSIM__NEW(id_counts, q.nids);
  LSIM__NEW(id_starts, (int64_t)q.nids + 1);
  for (int u = 0, t = -1; u < q.T; u++) {
    q.sorted_rows[u] = lsim__key_lo(keys[u]);
    if (u == 0 || lsim__key_hi(keys[u]) != lsim__key_hi(keys[u - 1])) {
      t++;
      q.active_ids[t] = (int)(lsim__key_hi(keys[u]) - 1);
      q.id_starts[t] = u;
    }
    q.id_counts[t]++;
  }
  q.id_starts[q.nids] = q.T;

  /* rank buckets: active rows stably sorted by logical rank (V12) */
  m = 0;
  for (i = 0; i < q.T; i++)
    if (q.row_adapter[i] != LSIM_BASE)
      keys[m++] = lsim__key(q.row_rank[i], i);
  q.nbuckets = lsim__distinct_hi(keys, m);
  LSIM__NEW(bucket_rank, q.nbuckets);
  LSIM__NEW(bucket_rows, q.nactive);
  LSIM__NEW(bucket_offsets, (int64_t)q.nbuckets + 1);
  for (int u = 0, t = 0; u < m; u++) {
    q.bucket_rows[u] = lsim__key_lo(keys[u]);
    if (u == 0 || lsim__key_hi(keys[u]) != lsim__key_hi(keys[u - 1])) {
      q.bucket_rank[t] = (int)lsim__key_hi(keys[u]);
      q.bucket_offsets[t++] = u;
    }
  }
  q.bucket_offsets[q.nbuckets] = q.nactive;

  /* ledgers (V13) */
  for (i = 0; i < q.T; i++)
    if (q.row_adapter[i] != LSIM_BASE) {
      q.true_rank_rows += q.row_rank[i];
      if (q.row_rank[i] > maxr)
        maxr = q.row_rank[i];
    }
  q.phys_rank = max_rank > 0 ? max_rank : maxr;
  q.padded_rank_rows = (int64_t)q.nactive * q.phys_rank;
  q.wasted_rank_rows = q.padded_rank_rows - q.true_rank_rows;

  /* the input was checked; a failure now is the builder's own */
  {
    lsim_errbuf inner = LSIM_ERRBUF_INIT;
    lsim_err v = lsim_rowplan_validate(&q, &inner);
    if (v == LSIM_E_NOMEM)
      err = lsim_fail(eb, v, "%s", inner.msg);
    else if (v)
      err = lsim_fail(eb, LSIM_E_BUG, "bug: built plan fails %s: %s",
                      lsim_err_name(v), inner.msg);
  }

out:
  free(keys);
  free(seen);
  if (err)
    lsim_rowplan_release(&q);
  else
    *p = q;
  return err;
}

#undef LSIM__NEW

/* ---- ratio, copy, release ----------------------------------------------- */

double lsim_rowplan_padding_ratio(const lsim_rowplan *p) {
  if (!p || p->true_rank_rows <= 0)
    return 1.0;
  return (double)p->padded_rank_rows / (double)p->true_rank_rows;
}

static void *lsim__memdup(const void *src, int64_t count, size_t elt) {
  void *d = lsim__alloc(count, elt);
  if (d && count > 0)
    memcpy(d, src, (size_t)count * elt);
  return d;
}

lsim_err lsim_rowplan_copy(lsim_rowplan *dst, const lsim_rowplan *src,
                           lsim_errbuf *eb) {
  lsim_rowplan q;
  if (!dst || !src)
    return lsim_fail(eb, LSIM_E_USAGE, "rowplan copy needs two plans");
  q = *src; /* scalars; every array is replaced below */
#define LSIM__CLEAR(field, cnt, plus, code) q.field = NULL;
  LSIM__ROWPLAN_ARRAYS(LSIM__CLEAR)
#undef LSIM__CLEAR
#define LSIM__DUP(field, cnt, plus, code)                                   \
  if (src->field) {                                                        \
    int64_t len_ = (int64_t)src->cnt + (plus);                             \
    if (len_ < 0) {                                                        \
      lsim_rowplan_release(&q);                                            \
      return lsim_fail(eb, LSIM_E_USAGE,                                   \
                       "cannot copy " #field ": count " #cnt " is %d",     \
                       src->cnt);                                          \
    }                                                                      \
    q.field = lsim__memdup(src->field, len_, sizeof *src->field);          \
    if (!q.field) {                                                        \
      lsim_rowplan_release(&q);                                            \
      return lsim_fail(eb, LSIM_E_NOMEM, "out of memory copying " #field); \
    }                                                                      \
  }
  LSIM__ROWPLAN_ARRAYS(LSIM__DUP)
#undef LSIM__DUP
  *dst = q;
  return 0;
}

void lsim_rowplan_release(lsim_rowplan *p) {
  if (!p)
    return;
#define LSIM__FREE(field, cnt, plus, code) free(p->field);
  LSIM__ROWPLAN_ARRAYS(LSIM__FREE)
#undef LSIM__FREE
  memset(p, 0, sizeof *p);
}
