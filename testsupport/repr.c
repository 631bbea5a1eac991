/*
** repr.c: the Loop 10 layouts (see repr.h for the contract).
**
** Design notes and invariants.
**
**  1. One normalized transaction, four identities.  Every layout computes
**     out[i] = base[i] + s_a (X[i] A_a^T) B_a^T exactly (mpq), but reaches
**     a row's factors its own way: Punica through the segment that holds
**     the row's packed position and that segment's pointer pair; S-LoRA
**     through the row's compact index and the location table; PEFT through
**     the name of the sub-batch that gathered the row; vLLM through the
**     row's slot and the sorted-row group.  No evaluator reads another
**     layout's arrays or the engine's row plan.
**
**  2. Scale placement is part of the layout.  Punica's store holds s*B
**     (the kernel takes no scale; the transform is recorded here, not
**     attributed to Punica's converter); S-LoRA applies a_scaling after the
**     expand; PEFT multiplies each sub-batch's expand by its scaling; vLLM
**     absorbs s into the slot's B at activation and launches with 1.
**
**  3. Validation derives, from the layout's arrays alone, that every
**     active row is computed exactly once under its own adapter and that no
**     base row is addressed; counts are checked before they are used as
**     lengths and indexes before they are dereferenced.  Evaluators call it
**     first and then only index within proven bounds.
**
**  4. Builders check their input with the same codes a validator would
**     use, construct, then validate their own result; a failure there is a
**     builder bug (E_BUG).  All groupings are stable sorts by (key, row), so
**     a layout depends on nothing but values.
**
** The worked example (the article's five rows A, A, B, base, B) and its
** constructed inputs live in tests/test_loop10.c.
*/
#include "repr.h"

#include <stdlib.h>
#include <string.h>

/* ======================================================================== */
/* shared helpers                                                           */
/* ======================================================================== */

static size_t lsim__rcnt(int n) { return n > 0 ? (size_t)n : 1; }

/* calloc of n ints (at least one), NULL on failure. */
static int *lsim__ints(int n) { return calloc(lsim__rcnt(n), sizeof(int)); }

static lsim_err lsim__nomem(lsim_errbuf *eb, const char *what) {
  return lsim_fail(eb, LSIM_E_NOMEM, "out of memory for the %s layout", what);
}

/* Resolve adapter id -> index into ad[0..nad), -1 when absent. */
static int lsim__find_ad(const lsim_qadapter *ad, int nad, int id) {
  for (int k = 0; k < nad; k++)
    if (ad[k].id == id)
      return k;
  return -1;
}

/* Check a supplied adapter list: shapes, ids >= 0 and distinct. */
static lsim_err lsim__check_ads(const lsim_qadapter *ad, int nad, int d_in,
                                int d_out, lsim_errbuf *eb) {
  if (nad < 0 || (nad > 0 && !ad))
    return lsim_fail(eb, LSIM_E_USAGE, "adapter list of %d entries is invalid",
                     nad);
  if (d_in < 0 || d_out < 0)
    return lsim_fail(eb, LSIM_E_SHAPE, "projection [%d][%d] is negative",
                     d_out, d_in);
  for (int k = 0; k < nad; k++) {
    lsim_err rc = lsim_qadapter_check(&ad[k], d_in, d_out, eb);
    if (rc)
      return rc;
    if (ad[k].id < 0)
      return lsim_fail(eb, LSIM_E_REF_UNKNOWN_ADAPTER,
                       "adapter id %d is not a catalog index", ad[k].id);
    for (int m = 0; m < k; m++)
      if (ad[m].id == ad[k].id)
        return lsim_fail(eb, LSIM_E_REF_DUP_ADAPTER,
                         "adapter id %d is supplied twice", ad[k].id);
  }
  return 0;
}

/* Check a logical row assignment against the supplied adapters. */
static lsim_err lsim__check_rows(const int *row_adapter, int T,
                                 const lsim_qadapter *ad, int nad,
                                 lsim_errbuf *eb) {
  if (T < 0 || (T > 0 && !row_adapter))
    return lsim_fail(eb, LSIM_E_SHAPE, "row assignment of %d rows is invalid",
                     T);
  for (int i = 0; i < T; i++) {
    int a = row_adapter[i];
    if (a == LSIM_BASE)
      continue;
    if (a < 0 || lsim__find_ad(ad, nad, a) < 0)
      return lsim_fail(eb, LSIM_E_REF_UNKNOWN_ADAPTER,
                       "row %d names adapter %d, which was not supplied", i, a);
  }
  return 0;
}

/*
** Start an evaluation: X must be [T][d_in], base NULL or [T][d_out]; out
** follows cpu_ref's output-matrix rule and receives base (or zeros).
** *fresh says whether out was allocated here.
*/
static lsim_err lsim__begin(const lsim_qmat *X, const lsim_qmat *base,
                            lsim_qmat *out, int T, int d_in, int d_out,
                            const char *who, int *fresh, lsim_errbuf *eb) {
  *fresh = 0;
  if (!X || !out)
    return lsim_fail(eb, LSIM_E_USAGE, "%s: missing input or output", who);
  if (X->rows != T || X->cols != d_in)
    return lsim_fail(eb, LSIM_E_SHAPE, "%s: X is [%d][%d], expected [%d][%d]",
                     who, X->rows, X->cols, T, d_in);
  if (base && (base->rows != T || base->cols != d_out))
    return lsim_fail(eb, LSIM_E_SHAPE,
                     "%s: base is [%d][%d], expected [%d][%d]", who,
                     base->rows, base->cols, T, d_out);
  if (out->rows == 0 && out->cols == 0 && out->v == NULL) {
    lsim_err rc = lsim_qmat_init(out, T, d_out, eb);
    if (rc)
      return rc;
    *fresh = 1;
  } else if (out->rows != T || out->cols != d_out) {
    return lsim_fail(eb, LSIM_E_SHAPE, "%s: out is [%d][%d], expected [%d][%d]",
                     who, out->rows, out->cols, T, d_out);
  }
  if (base != out) {
    size_t n = (size_t)T * (size_t)d_out;
    for (size_t k = 0; k < n; k++) {
      if (base)
        mpq_set(out->v[k], base->v[k]);
      else
        mpq_set_ui(out->v[k], 0, 1);
    }
  }
  return 0;
}

/* acc := sum_k M[i][k] * N[j][k], k < n (both rows at least n wide). */
static void lsim__dot(mpq_t acc, mpq_t tmp, const lsim_qmat *M, int i,
                      const lsim_qmat *N, int j, int n) {
  mpq_set_ui(acc, 0, 1);
  for (int k = 0; k < n; k++) {
    mpq_mul(tmp, LSIM_QAT(M, i, k), LSIM_QAT(N, j, k));
    mpq_add(acc, acc, tmp);
  }
}

/* 1 when every entry of M is an initialised matrix of shape [r][c]. */
static int lsim__is_shape(const lsim_qmat *M, int r, int c) {
  return M->rows == r && M->cols == c &&
         (M->v != NULL || (size_t)r * (size_t)c == 0);
}

/*
** Stable grouping: order rows 0..T-1 by key (ascending), ties by row.
** Counting would do for small keys; a stable insertion sort keeps it
** obviously value-only.  out[T] receives the rows.
*/
static void lsim__stable_by_key(const int *key, int T, int *out) {
  for (int i = 0; i < T; i++) {
    int k = i;
    while (k > 0 && key[out[k - 1]] > key[i]) {
      out[k] = out[k - 1];
      k--;
    }
    out[k] = i;
  }
}

/* ======================================================================== */
/* Punica                                                                   */
/* ======================================================================== */

void lsim_repr_punica_release(lsim_repr_punica *r) {
  if (!r)
    return;
  for (int l = 0; l < r->L; l++) {
    if (r->store_A)
      lsim_qmat_clear(&r->store_A[l]);
    if (r->store_B)
      lsim_qmat_clear(&r->store_B[l]);
  }
  free(r->store_id);
  free(r->store_A);
  free(r->store_B);
  free(r->row_adapter);
  free(r->perm);
  free(r->seg);
  free((void *)r->pA);
  free((void *)r->pB);
  memset(r, 0, sizeof *r);
}

/* Store entry l that p addresses in store[0..L), -1 if none. */
static int lsim__store_of(const lsim_qmat *store, int L, const lsim_qmat *p) {
  for (int l = 0; l < L; l++)
    if (p == &store[l])
      return l;
  return -1;
}

lsim_err lsim_repr_punica_validate(const lsim_repr_punica *r,
                                   lsim_errbuf *eb) {
  if (r->T < 0 || r->L < 0 || r->nseg < 0 || r->d_in < 0 || r->d_out < 0)
    return lsim_fail(eb, LSIM_E_SHAPE, "punica: negative count");
  if (!r->store_id || !r->store_A || !r->store_B || !r->row_adapter ||
      !r->perm)
    return lsim_fail(eb, LSIM_E_SHAPE, "punica: store or row array absent");
  if (!r->seg || !r->pA || !r->pB)
    return lsim_fail(eb, LSIM_E_REPR_SEGMENT,
                     "punica: segment or pointer vector absent");
  for (int l = 0; l < r->L; l++) {
    int rk = r->store_A[l].rows;
    if (rk < 1 || !lsim__is_shape(&r->store_A[l], rk, r->d_in) ||
        !lsim__is_shape(&r->store_B[l], rk, r->d_out))
      return lsim_fail(eb, LSIM_E_SHAPE,
                       "punica: store entry %d is not A [r][%d] with "
                       "(s B)^T [r][%d]",
                       l, r->d_in, r->d_out);
    for (int m = 0; m < l; m++)
      if (r->store_id[m] == r->store_id[l])
        return lsim_fail(eb, LSIM_E_REF_DUP_ADAPTER,
                         "punica: adapter %d is stored twice", r->store_id[l]);
  }
  /* the permutation: a bijection of 0..T-1 */
  int *seen = lsim__ints(r->T);
  if (!seen)
    return lsim__nomem(eb, "punica");
  lsim_err rc = 0;
  for (int k = 0; k < r->T && !rc; k++) {
    int i = r->perm[k];
    if (i < 0 || i >= r->T)
      rc = lsim_fail(eb, LSIM_E_REPR_PERM,
                     "punica: packed position %d holds row %d, outside 0..%d",
                     k, i, r->T - 1);
    else if (seen[i]++)
      rc = lsim_fail(eb, LSIM_E_REPR_PERM,
                     "punica: row %d appears twice in the permutation", i);
  }
  free(seen);
  if (rc)
    return rc;
  /* the boundary vector */
  if (r->seg[0] != 0)
    return lsim_fail(eb, LSIM_E_REPR_SEGMENT,
                     "punica: segment vector starts at %d, not 0", r->seg[0]);
  for (int t = 0; t < r->nseg; t++)
    if (r->seg[t + 1] <= r->seg[t])
      return lsim_fail(eb, LSIM_E_REPR_SEGMENT,
                       "punica: segment %d is [%d, %d): empty or reversed", t,
                       r->seg[t], r->seg[t + 1]);
  if (r->seg[r->nseg] > r->T)
    return lsim_fail(eb, LSIM_E_REPR_SEGMENT,
                     "punica: segments end at %d, past the %d rows",
                     r->seg[r->nseg], r->T);
  /* the pointer vectors: one store entry per segment, A and B agreeing */
  for (int t = 0; t < r->nseg; t++) {
    int la = lsim__store_of(r->store_A, r->L, r->pA[t]);
    int lb = lsim__store_of(r->store_B, r->L, r->pB[t]);
    if (la < 0 || lb < 0)
      return lsim_fail(eb, LSIM_E_REPR_POINTER,
                       "punica: segment %d has a %s pointer outside the weight "
                       "store",
                       t, la < 0 ? "A" : "B");
    if (la != lb)
      return lsim_fail(eb, LSIM_E_REPR_POINTER,
                       "punica: segment %d points at A of adapter %d but B of "
                       "adapter %d",
                       t, r->store_id[la], r->store_id[lb]);
    for (int u = 0; u < t; u++)
      if (r->pA[u] == r->pA[t])
        return lsim_fail(eb, LSIM_E_REPR_POINTER,
                         "punica: segments %d and %d both point at adapter %d",
                         u, t, r->store_id[la]);
    if (r->pA[t]->rows != r->rank)
      return lsim_fail(eb, LSIM_E_REPR_FIXED_RANK,
                       "punica: segment %d's adapter %d has rank %d, the "
                       "invocation passes rank %d",
                       t, r->store_id[la], r->pA[t]->rows, r->rank);
  }
  /* every packed row against its segment's identity */
  for (int t = 0; t < r->nseg; t++) {
    int id = r->store_id[lsim__store_of(r->store_A, r->L, r->pA[t])];
    for (int k = r->seg[t]; k < r->seg[t + 1]; k++) {
      int i = r->perm[k], a = r->row_adapter[i];
      if (a == LSIM_BASE)
        return lsim_fail(eb, LSIM_E_BASE_DELTA,
                         "punica: base row %d (packed %d) lies inside segment "
                         "%d of adapter %d",
                         i, k, t, id);
      if (a != id)
        return lsim_fail(eb, LSIM_E_REPR_SEG_IDENTITY,
                         "punica: row %d (packed %d) of adapter %d lies inside "
                         "segment %d of adapter %d",
                         i, k, a, t, id);
      if (k > r->seg[t] && r->perm[k - 1] > i)
        return lsim_fail(eb, LSIM_E_REPR_PERM,
                         "punica: segment %d is not stable at packed %d", t, k);
    }
  }
  for (int k = r->seg[r->nseg]; k < r->T; k++) {
    int i = r->perm[k];
    if (r->row_adapter[i] != LSIM_BASE)
      return lsim_fail(eb, LSIM_E_SCATTER,
                       "punica: row %d of adapter %d (packed %d) is outside "
                       "every segment",
                       i, r->row_adapter[i], k);
  }
  return 0;
}

lsim_err lsim_repr_punica_build(lsim_repr_punica *r, const int *row_adapter,
                                int T, const lsim_qadapter *ad, int nad,
                                int d_in, int d_out, lsim_errbuf *eb) {
  memset(r, 0, sizeof *r);
  lsim_err rc = lsim__check_ads(ad, nad, d_in, d_out, eb);
  if (!rc)
    rc = lsim__check_rows(row_adapter, T, ad, nad, eb);
  if (rc)
    return rc;
  /* one scalar rank: that of the lowest adapter id in use */
  int first = -1;
  for (int i = 0; i < T; i++)
    if (row_adapter[i] != LSIM_BASE &&
        (first < 0 || row_adapter[i] < ad[first].id))
      first = lsim__find_ad(ad, nad, row_adapter[i]);
  for (int i = 0; first >= 0 && i < T; i++) {
    if (row_adapter[i] == LSIM_BASE)
      continue;
    const lsim_qadapter *a = &ad[lsim__find_ad(ad, nad, row_adapter[i])];
    if (a->rank != ad[first].rank)
      return lsim_fail(eb, LSIM_E_REPR_FIXED_RANK,
                       "punica: adapter %d has rank %d but the invocation "
                       "passes rank %d (adapter %d); split by rank",
                       a->id, a->rank, ad[first].rank, ad[first].id);
  }

  r->T = T;
  r->d_in = d_in;
  r->d_out = d_out;
  r->rank = first >= 0 ? ad[first].rank : 0;
  r->store_id = lsim__ints(nad);
  r->store_A = calloc(lsim__rcnt(nad), sizeof *r->store_A);
  r->store_B = calloc(lsim__rcnt(nad), sizeof *r->store_B);
  r->row_adapter = lsim__ints(T);
  r->perm = lsim__ints(T);
  int *key = lsim__ints(T);
  if (!r->store_id || !r->store_A || !r->store_B || !r->row_adapter ||
      !r->perm || !key) {
    free(key);
    lsim_repr_punica_release(r);
    return lsim__nomem(eb, "punica");
  }
  r->L = nad;
  /* the weight store: A as given, B transposed with the scale folded in */
  for (int l = 0; l < nad && !rc; l++) {
    const lsim_qadapter *a = &ad[l];
    r->store_id[l] = a->id;
    rc = lsim_qmat_copy(&r->store_A[l], &a->A, eb);
    if (!rc)
      rc = lsim_qmat_init(&r->store_B[l], a->rank, d_out, eb);
    for (int j = 0; !rc && j < a->rank; j++)
      for (int c = 0; c < d_out; c++)
        mpq_mul(LSIM_QAT(&r->store_B[l], j, c), LSIM_QAT(&a->B, c, j),
                a->scale);
  }
  /* stable permutation: adapter rows by ascending id, base rows last (the
  ** stable sort puts the -1 group first; it is rotated to the end) */
  int nact = 0, nseg = 0;
  for (int i = 0; i < T; i++) {
    r->row_adapter[i] = row_adapter[i];
    nact += row_adapter[i] != LSIM_BASE;
  }
  if (!rc) {
    lsim__stable_by_key(r->row_adapter, T, key);
    for (int k = 0; k < T; k++)
      r->perm[k] = key[(k + T - nact) % T];
  }
  for (int k = 0; k < nact; k++)
    if (k == 0 || r->row_adapter[r->perm[k]] !=
                      r->row_adapter[r->perm[k - 1]])
      nseg++;
  free(key);
  if (!rc) {
    r->seg = lsim__ints(nseg + 1);
    r->pA = calloc(lsim__rcnt(nseg), sizeof *r->pA);
    r->pB = calloc(lsim__rcnt(nseg), sizeof *r->pB);
    if (!r->seg || !r->pA || !r->pB)
      rc = lsim__nomem(eb, "punica");
  }
  if (rc) {
    lsim_repr_punica_release(r);
    return rc;
  }
  r->nseg = nseg;
  for (int k = 0, t = 0; k < nact; k++) {
    int id = r->row_adapter[r->perm[k]];
    if (k > 0 && id == r->row_adapter[r->perm[k - 1]])
      continue;
    int l = lsim__find_ad(ad, nad, id);
    r->seg[t] = k;
    r->pA[t] = &r->store_A[l];
    r->pB[t] = &r->store_B[l];
    t++;
  }
  r->seg[nseg] = nact;
  rc = lsim_repr_punica_validate(r, eb);
  if (rc) {
    lsim_repr_punica_release(r);
    return LSIM_BUG(eb, "punica builder produced an invalid layout");
  }
  return 0;
}

lsim_err lsim_repr_punica_eval(const lsim_repr_punica *r, const lsim_qmat *X,
                               const lsim_qmat *base, lsim_qmat *out,
                               lsim_errbuf *eb) {
  lsim_err rc = lsim_repr_punica_validate(r, eb);
  if (rc)
    return rc;
  int fresh;
  rc = lsim__begin(X, base, out, r->T, r->d_in, r->d_out, "punica", &fresh,
                   eb);
  if (rc)
    return rc;
  int nact = r->seg[r->nseg];
  lsim_qmat Xp = LSIM_QMAT_INIT, Z = LSIM_QMAT_INIT, D = LSIM_QMAT_INIT;
  int *inv = lsim__ints(r->T);
  if (!inv)
    rc = lsim__nomem(eb, "punica");
  if (!rc)
    rc = lsim_qmat_init(&Xp, nact, r->d_in, eb);
  if (!rc)
    rc = lsim_qmat_init(&Z, nact, r->rank, eb);
  if (!rc)
    rc = lsim_qmat_init(&D, nact, r->d_out, eb);
  if (!rc) {
    mpq_t acc, tmp;
    mpq_init(acc);
    mpq_init(tmp);
    /* gather X into packed order */
    for (int k = 0; k < nact; k++)
      for (int c = 0; c < r->d_in; c++)
        mpq_set(LSIM_QAT(&Xp, k, c), LSIM_QAT(X, r->perm[k], c));
    /* shrink then expand, one segment at a time with its pointer pair */
    for (int t = 0; t < r->nseg; t++) {
      const lsim_qmat *A = r->pA[t], *Bt = r->pB[t];
      for (int k = r->seg[t]; k < r->seg[t + 1]; k++) {
        for (int j = 0; j < r->rank; j++) {
          lsim__dot(acc, tmp, &Xp, k, A, j, r->d_in);
          mpq_set(LSIM_QAT(&Z, k, j), acc);
        }
        for (int c = 0; c < r->d_out; c++) {
          mpq_set_ui(acc, 0, 1);
          for (int j = 0; j < r->rank; j++) {
            mpq_mul(tmp, LSIM_QAT(&Z, k, j), LSIM_QAT(Bt, j, c));
            mpq_add(acc, acc, tmp);
          }
          mpq_set(LSIM_QAT(&D, k, c), acc);
        }
      }
    }
    /* inverse permutation: original row i sits at packed position inv[i] */
    for (int k = 0; k < r->T; k++)
      inv[r->perm[k]] = k;
    for (int i = 0; i < r->T; i++)
      if (inv[i] < nact)
        for (int c = 0; c < r->d_out; c++)
          mpq_add(LSIM_QAT(out, i, c), LSIM_QAT(out, i, c),
                  LSIM_QAT(&D, inv[i], c));
    mpq_clear(acc);
    mpq_clear(tmp);
  }
  free(inv);
  lsim_qmat_clear(&Xp);
  lsim_qmat_clear(&Z);
  lsim_qmat_clear(&D);
  if (rc && fresh)
    lsim_qmat_clear(out);
  return rc;
}

/* ======================================================================== */
/* S-LoRA                                                                   */
/* ======================================================================== */

void lsim_repr_slora_release(lsim_repr_slora *r) {
  if (!r)
    return;
  if (r->a_scaling) {
    for (int j = 0; j < r->n; j++)
      mpq_clear(r->a_scaling[j]);
    free(r->a_scaling);
  }
  free(r->adapter_id);
  free(r->rank);
  free(r->a_start);
  free(r->a_len);
  free(r->a_loc);
  free(r->row_index);
  lsim_qmat_clear(&r->pool_A);
  lsim_qmat_clear(&r->pool_B);
  memset(r, 0, sizeof *r);
}

lsim_err lsim_repr_slora_validate(const lsim_repr_slora *r, lsim_errbuf *eb) {
  if (r->T < 0 || r->n < 0 || r->nloc < 0 || r->ncells < 0 || r->d_in < 0 ||
      r->d_out < 0)
    return lsim_fail(eb, LSIM_E_SHAPE, "slora: negative count");
  if (!r->adapter_id || !r->rank || !r->a_scaling || !r->row_index)
    return lsim_fail(eb, LSIM_E_REPR_INDEX, "slora: index table absent");
  if (!r->a_start || !r->a_len || !r->a_loc)
    return lsim_fail(eb, LSIM_E_REPR_LOCATION, "slora: location table absent");
  if (!lsim__is_shape(&r->pool_A, r->ncells, r->d_in) ||
      !lsim__is_shape(&r->pool_B, r->ncells, r->d_out))
    return lsim_fail(eb, LSIM_E_SHAPE,
                     "slora: pool is not [%d][%d] A cells with [%d][%d] B "
                     "cells",
                     r->ncells, r->d_in, r->ncells, r->d_out);
  /* the compact map: injective, ids are catalog indexes */
  for (int j = 0; j < r->n; j++) {
    if (r->adapter_id[j] < 0)
      return lsim_fail(eb, LSIM_E_REPR_INDEX,
                       "slora: compact index %d maps to adapter %d", j,
                       r->adapter_id[j]);
    for (int m = 0; m < j; m++)
      if (r->adapter_id[m] == r->adapter_id[j])
        return lsim_fail(eb, LSIM_E_REPR_INDEX,
                         "slora: compact indexes %d and %d both map to "
                         "adapter %d",
                         m, j, r->adapter_id[j]);
  }
  for (int i = 0; i < r->T; i++)
    if (r->row_index[i] < -1 || r->row_index[i] >= r->n)
      return lsim_fail(eb, LSIM_E_REPR_INDEX,
                       "slora: row %d has compact index %d, outside -1..%d", i,
                       r->row_index[i], r->n - 1);
  /* start / length / location tables */
  int64_t at = 0;
  for (int j = 0; j < r->n; j++) {
    if (r->rank[j] < 1)
      return lsim_fail(eb, LSIM_E_REPR_LOCATION,
                       "slora: compact index %d has rank %d", j, r->rank[j]);
    if (r->a_len[j] != r->rank[j])
      return lsim_fail(eb, LSIM_E_REPR_LOCATION,
                       "slora: compact index %d has a_len %d for rank %d", j,
                       r->a_len[j], r->rank[j]);
    if (r->a_start[j] != at)
      return lsim_fail(eb, LSIM_E_REPR_LOCATION,
                       "slora: compact index %d starts at %d, not at %lld", j,
                       r->a_start[j], (long long)at);
    at += r->a_len[j];
  }
  if (at != r->nloc)
    return lsim_fail(eb, LSIM_E_REPR_LOCATION,
                     "slora: lengths sum to %lld but a_loc has %d entries",
                     (long long)at, r->nloc);
  int *seen = lsim__ints(r->ncells);
  if (!seen)
    return lsim__nomem(eb, "slora");
  lsim_err rc = 0;
  for (int k = 0; k < r->nloc && !rc; k++) {
    int c = r->a_loc[k];
    if (c < 0 || c >= r->ncells)
      rc = lsim_fail(eb, LSIM_E_REPR_LOCATION,
                     "slora: a_loc[%d] = %d is outside the %d-cell pool", k, c,
                     r->ncells);
    else if (seen[c]++)
      rc = lsim_fail(eb, LSIM_E_REPR_LOCATION,
                     "slora: cell %d is allocated twice (a_loc[%d])", c, k);
  }
  free(seen);
  return rc;
}

lsim_err lsim_repr_slora_build(lsim_repr_slora *r, const int *row_adapter,
                               int T, const lsim_qadapter *ad, int nad,
                               int d_in, int d_out, int ncells,
                               const int *free_cells, lsim_errbuf *eb) {
  memset(r, 0, sizeof *r);
  lsim_err rc = lsim__check_ads(ad, nad, d_in, d_out, eb);
  if (!rc)
    rc = lsim__check_rows(row_adapter, T, ad, nad, eb);
  if (rc)
    return rc;
  if (ncells < 0)
    return lsim_fail(eb, LSIM_E_SHAPE, "slora: pool of %d cells", ncells);
  int *order = lsim__ints(ncells);
  int *used = lsim__ints(ncells);
  int *comp = lsim__ints(T); /* row -> compact index */
  int *cad = lsim__ints(T);  /* compact index -> ad[] index */
  int n = 0, nloc = 0, next = 0;
  if (!order || !used || !comp || !cad) {
    rc = lsim__nomem(eb, "slora");
    goto done;
  }
  for (int k = 0; k < ncells; k++) {
    int c = free_cells ? free_cells[k] : k;
    if (c < 0 || c >= ncells || used[c]++) {
      rc = lsim_fail(eb, LSIM_E_REPR_LOCATION,
                     "slora: free list entry %d (cell %d) is not part of a "
                     "permutation of 0..%d",
                     k, c, ncells - 1);
      goto done;
    }
    order[k] = c;
  }
  /* the loader meets missing adapters in row order */
  for (int i = 0; i < T; i++) {
    comp[i] = -1;
    if (row_adapter[i] == LSIM_BASE)
      continue;
    int x = lsim__find_ad(ad, nad, row_adapter[i]), j = 0;
    while (j < n && cad[j] != x)
      j++;
    if (j == n) {
      cad[n++] = x;
      nloc += ad[x].rank;
    }
    comp[i] = j;
  }
  if (nloc > ncells) {
    rc = lsim_fail(eb, LSIM_E_NOSPACE,
                   "slora: %d cells needed, the pool has %d", nloc, ncells);
    goto done;
  }
  r->T = T;
  r->d_in = d_in;
  r->d_out = d_out;
  r->ncells = ncells;
  r->adapter_id = lsim__ints(n);
  r->rank = lsim__ints(n);
  r->a_start = lsim__ints(n);
  r->a_len = lsim__ints(n);
  r->a_scaling = calloc(lsim__rcnt(n), sizeof *r->a_scaling);
  r->a_loc = lsim__ints(nloc);
  r->row_index = lsim__ints(T);
  if (!r->adapter_id || !r->rank || !r->a_start || !r->a_len ||
      !r->a_scaling || !r->a_loc || !r->row_index) {
    rc = lsim__nomem(eb, "slora");
    goto done;
  }
  r->n = n;
  for (int j = 0; j < n; j++)
    mpq_init(r->a_scaling[j]);
  rc = lsim_qmat_init(&r->pool_A, ncells, d_in, eb);
  if (!rc)
    rc = lsim_qmat_init(&r->pool_B, ncells, d_out, eb);
  if (rc)
    goto done;
  /* append metadata, then copy each rank row into its allocated cell */
  for (int j = 0; j < n; j++) {
    const lsim_qadapter *a = &ad[cad[j]];
    r->adapter_id[j] = a->id;
    r->rank[j] = a->rank;
    r->a_start[j] = next;
    r->a_len[j] = a->rank;
    mpq_set(r->a_scaling[j], a->scale);
    for (int k = 0; k < a->rank; k++, next++) {
      int c = order[next];
      r->a_loc[next] = c;
      for (int q = 0; q < d_in; q++)
        mpq_set(LSIM_QAT(&r->pool_A, c, q), LSIM_QAT(&a->A, k, q));
      for (int q = 0; q < d_out; q++)
        mpq_set(LSIM_QAT(&r->pool_B, c, q), LSIM_QAT(&a->B, q, k));
    }
  }
  r->nloc = nloc;
  for (int i = 0; i < T; i++)
    r->row_index[i] = comp[i];
  if (lsim_repr_slora_validate(r, eb))
    rc = LSIM_BUG(eb, "slora builder produced an invalid layout");
done:
  free(order);
  free(used);
  free(comp);
  free(cad);
  if (rc)
    lsim_repr_slora_release(r);
  return rc;
}

lsim_err lsim_repr_slora_eval(const lsim_repr_slora *r, const lsim_qmat *X,
                              const lsim_qmat *base, lsim_qmat *out,
                              lsim_errbuf *eb) {
  lsim_err rc = lsim_repr_slora_validate(r, eb);
  if (rc)
    return rc;
  int fresh, maxr = 0;
  rc = lsim__begin(X, base, out, r->T, r->d_in, r->d_out, "slora", &fresh, eb);
  if (rc)
    return rc;
  for (int j = 0; j < r->n; j++)
    maxr = r->rank[j] > maxr ? r->rank[j] : maxr;
  lsim_qmat z = LSIM_QMAT_INIT; /* one row's intermediate, true rank wide */
  rc = lsim_qmat_init(&z, 1, maxr, eb);
  if (rc) {
    if (fresh)
      lsim_qmat_clear(out);
    return rc;
  }
  mpq_t acc, tmp;
  mpq_init(acc);
  mpq_init(tmp);
  for (int i = 0; i < r->T; i++) {
    int j = r->row_index[i];
    if (j < 0)
      continue; /* base row: out keeps base */
    const int *loc = &r->a_loc[r->a_start[j]];
    for (int k = 0; k < r->rank[j]; k++) {
      lsim__dot(acc, tmp, X, i, &r->pool_A, loc[k], r->d_in);
      mpq_set(LSIM_QAT(&z, 0, k), acc);
    }
    for (int c = 0; c < r->d_out; c++) {
      mpq_set_ui(acc, 0, 1);
      for (int k = 0; k < r->rank[j]; k++) {
        mpq_mul(tmp, LSIM_QAT(&z, 0, k), LSIM_QAT(&r->pool_B, loc[k], c));
        mpq_add(acc, acc, tmp);
      }
      mpq_mul(acc, acc, r->a_scaling[j]);
      mpq_add(LSIM_QAT(out, i, c), LSIM_QAT(out, i, c), acc);
    }
  }
  mpq_clear(acc);
  mpq_clear(tmp);
  lsim_qmat_clear(&z);
  return 0;
}

/* ======================================================================== */
/* PEFT                                                                     */
/* ======================================================================== */

void lsim_repr_peft_release(lsim_repr_peft *r) {
  if (!r)
    return;
  for (int m = 0; m < r->nmod; m++) {
    if (r->mod_name)
      free(r->mod_name[m]);
    if (r->mod)
      lsim_qadapter_clear(&r->mod[m]);
  }
  for (int i = 0; i < r->T; i++)
    if (r->row_name)
      free(r->row_name[i]);
  free(r->mod_name);
  free(r->mod);
  free(r->row_name);
  free(r->sub_mod);
  free(r->sub_offsets);
  free(r->sub_rows);
  memset(r, 0, sizeof *r);
}

static int lsim__is_base_name(const char *s) {
  return strcmp(s, LSIM_REPR_BASE_NAME) == 0;
}

/* Module index of name in names[0..n), -1 when absent. */
static int lsim__find_name(char *const *names, int n, const char *name) {
  for (int m = 0; m < n; m++)
    if (strcmp(names[m], name) == 0)
      return m;
  return -1;
}

/* Check module names (non-empty, not reserved, distinct). */
static lsim_err lsim__check_mod_names(const char *const *names, int n,
                                      lsim_errbuf *eb) {
  for (int m = 0; m < n; m++) {
    if (!names[m] || !names[m][0])
      return lsim_fail(eb, LSIM_E_REPR_NAME, "peft: module %d has no name", m);
    if (lsim__is_base_name(names[m]))
      return lsim_fail(eb, LSIM_E_REPR_NAME,
                       "peft: module %d is named '%s', which is reserved for "
                       "base rows",
                       m, LSIM_REPR_BASE_NAME);
    for (int k = 0; k < m; k++)
      if (strcmp(names[k], names[m]) == 0)
        return lsim_fail(eb, LSIM_E_REPR_NAME,
                         "peft: modules %d and %d are both named '%.64s'", k,
                         m, names[m]);
  }
  return 0;
}

lsim_err lsim_repr_peft_validate(const lsim_repr_peft *r, lsim_errbuf *eb) {
  if (r->T < 0 || r->nmod < 0 || r->nsub < 0 || r->d_in < 0 || r->d_out < 0)
    return lsim_fail(eb, LSIM_E_SHAPE, "peft: negative count");
  if (!r->mod_name || !r->mod || !r->row_name)
    return lsim_fail(eb, LSIM_E_REPR_NAME, "peft: name table absent");
  if (!r->sub_mod || !r->sub_offsets || !r->sub_rows)
    return lsim_fail(eb, LSIM_E_REPR_SEGMENT, "peft: sub-batch table absent");
  lsim_err rc = lsim__check_mod_names((const char *const *)r->mod_name,
                                      r->nmod, eb);
  if (rc)
    return rc;
  for (int m = 0; m < r->nmod; m++) {
    rc = lsim_qadapter_check(&r->mod[m], r->d_in, r->d_out, eb);
    if (rc)
      return rc;
  }
  for (int i = 0; i < r->T; i++) {
    const char *s = r->row_name[i];
    if (!s || !s[0])
      return lsim_fail(eb, LSIM_E_REPR_NAME, "peft: row %d has no name", i);
    if (!lsim__is_base_name(s) && lsim__find_name(r->mod_name, r->nmod, s) < 0)
      return lsim_fail(eb, LSIM_E_REPR_NAME,
                       "peft: row %d names unknown adapter '%.64s'", i, s);
  }
  /* sub-batches: distinct modules, offsets, gathered rows */
  for (int t = 0; t < r->nsub; t++) {
    if (r->sub_mod[t] < 0 || r->sub_mod[t] >= r->nmod)
      return lsim_fail(eb, LSIM_E_REPR_NAME,
                       "peft: sub-batch %d names module %d, outside 0..%d", t,
                       r->sub_mod[t], r->nmod - 1);
    for (int u = 0; u < t; u++)
      if (r->sub_mod[u] == r->sub_mod[t])
        return lsim_fail(eb, LSIM_E_REPR_NAME,
                         "peft: sub-batches %d and %d are both '%.64s'", u, t,
                         r->mod_name[r->sub_mod[t]]);
  }
  if (r->sub_offsets[0] != 0)
    return lsim_fail(eb, LSIM_E_REPR_SEGMENT,
                     "peft: sub-batch offsets start at %d, not 0",
                     r->sub_offsets[0]);
  for (int t = 0; t < r->nsub; t++)
    if (r->sub_offsets[t + 1] <= r->sub_offsets[t])
      return lsim_fail(eb, LSIM_E_REPR_SEGMENT,
                       "peft: sub-batch %d is [%d, %d): empty or reversed", t,
                       r->sub_offsets[t], r->sub_offsets[t + 1]);
  if (r->sub_offsets[r->nsub] > r->T)
    return lsim_fail(eb, LSIM_E_REPR_SEGMENT,
                     "peft: sub-batches gather %d rows of %d",
                     r->sub_offsets[r->nsub], r->T);
  int *seen = lsim__ints(r->T);
  if (!seen)
    return lsim__nomem(eb, "peft");
  for (int t = 0; t < r->nsub && !rc; t++) {
    const char *name = r->mod_name[r->sub_mod[t]];
    for (int k = r->sub_offsets[t]; k < r->sub_offsets[t + 1] && !rc; k++) {
      int i = r->sub_rows[k];
      if (i < 0 || i >= r->T)
        rc = lsim_fail(eb, LSIM_E_REPR_PERM,
                       "peft: sub-batch '%.64s' gathers row %d, outside "
                       "0..%d",
                       name, i, r->T - 1);
      else if (seen[i]++)
        rc = lsim_fail(eb, LSIM_E_REPR_PERM,
                       "peft: row %d is gathered twice", i);
      else if (lsim__is_base_name(r->row_name[i]))
        rc = lsim_fail(eb, LSIM_E_BASE_DELTA,
                       "peft: base row %d is gathered into sub-batch '%.64s'",
                       i, name);
      else if (strcmp(r->row_name[i], name) != 0)
        rc = lsim_fail(eb, LSIM_E_REPR_NAME,
                       "peft: row %d named '%.64s' is gathered into sub-batch "
                       "'%.64s'",
                       i, r->row_name[i], name);
      else if (k > r->sub_offsets[t] && r->sub_rows[k - 1] > i)
        rc = lsim_fail(eb, LSIM_E_REPR_PERM,
                       "peft: sub-batch '%.64s' is not in row order at %d",
                       name, k);
    }
  }
  for (int i = 0; i < r->T && !rc; i++)
    if (!seen[i] && !lsim__is_base_name(r->row_name[i]))
      rc = lsim_fail(eb, LSIM_E_SCATTER,
                     "peft: row %d named '%.64s' is in no sub-batch", i,
                     r->row_name[i]);
  free(seen);
  return rc;
}

static char *lsim__strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d)
    memcpy(d, s, n);
  return d;
}

lsim_err lsim_repr_peft_build(lsim_repr_peft *r, const char *const *row_name,
                              int T, const char *const *mod_name,
                              const lsim_qadapter *ad, int nmod, int d_in,
                              int d_out, lsim_errbuf *eb) {
  memset(r, 0, sizeof *r);
  if (nmod < 0 || (nmod > 0 && (!ad || !mod_name)))
    return lsim_fail(eb, LSIM_E_USAGE, "peft: module list of %d is invalid",
                     nmod);
  if (T < 0 || (T > 0 && !row_name))
    return lsim_fail(eb, LSIM_E_SHAPE, "peft: %d adapter names are invalid",
                     T);
  if (d_in < 0 || d_out < 0)
    return lsim_fail(eb, LSIM_E_SHAPE, "peft: projection [%d][%d] is negative",
                     d_out, d_in);
  lsim_err rc = lsim__check_mod_names(mod_name, nmod, eb);
  for (int m = 0; m < nmod && !rc; m++)
    rc = lsim_qadapter_check(&ad[m], d_in, d_out, eb);
  for (int i = 0; i < T && !rc; i++) {
    const char *s = row_name[i];
    if (!s || !s[0])
      rc = lsim_fail(eb, LSIM_E_REPR_NAME, "peft: row %d has no name", i);
    else if (!lsim__is_base_name(s) &&
             lsim__find_name((char *const *)mod_name, nmod, s) < 0)
      rc = lsim_fail(eb, LSIM_E_REPR_NAME,
                     "peft: row %d names unknown adapter '%.64s'", i, s);
  }
  if (rc)
    return rc;
  r->d_in = d_in;
  r->d_out = d_out;
  r->mod_name = calloc(lsim__rcnt(nmod), sizeof *r->mod_name);
  r->mod = calloc(lsim__rcnt(nmod), sizeof *r->mod);
  r->row_name = calloc(lsim__rcnt(T), sizeof *r->row_name);
  r->sub_mod = lsim__ints(nmod);
  r->sub_offsets = lsim__ints(nmod + 1);
  r->sub_rows = lsim__ints(T);
  if (!r->mod_name || !r->mod || !r->row_name || !r->sub_mod ||
      !r->sub_offsets || !r->sub_rows) {
    lsim_repr_peft_release(r);
    return lsim__nomem(eb, "peft");
  }
  /* named modules: copies of lora_A, lora_B and scaling */
  for (int m = 0; m < nmod && !rc; m++) {
    r->nmod = m + 1;
    rc = lsim_qadapter_init(&r->mod[m], ad[m].id, ad[m].rank, d_in, d_out, eb);
    if (!rc)
      rc = lsim_qmat_copy(&r->mod[m].A, &ad[m].A, eb);
    if (!rc)
      rc = lsim_qmat_copy(&r->mod[m].B, &ad[m].B, eb);
    if (!rc) {
      mpq_set(r->mod[m].scale, ad[m].scale);
      r->mod_name[m] = lsim__strdup(mod_name[m]);
      if (!r->mod_name[m])
        rc = lsim__nomem(eb, "peft");
    }
  }
  for (int i = 0; i < T && !rc; i++) {
    r->T = i + 1;
    r->row_name[i] = lsim__strdup(row_name[i]);
    if (!r->row_name[i])
      rc = lsim__nomem(eb, "peft");
  }
  if (rc) {
    lsim_repr_peft_release(r);
    return rc;
  }
  r->T = T;
  /* one sub-batch per name, names in first-appearance order */
  int nsub = 0, at = 0;
  for (int i = 0; i < T; i++) {
    if (lsim__is_base_name(row_name[i]))
      continue;
    int m = lsim__find_name(r->mod_name, nmod, row_name[i]), t = 0;
    while (t < nsub && r->sub_mod[t] != m)
      t++;
    if (t < nsub)
      continue;
    r->sub_mod[nsub] = m;
    r->sub_offsets[nsub] = at;
    for (int k = i; k < T; k++)
      if (strcmp(row_name[k], row_name[i]) == 0)
        r->sub_rows[at++] = k;
    nsub++;
  }
  r->sub_offsets[nsub] = at;
  r->nsub = nsub;
  if (lsim_repr_peft_validate(r, eb)) {
    lsim_repr_peft_release(r);
    return LSIM_BUG(eb, "peft builder produced an invalid layout");
  }
  return 0;
}

lsim_err lsim_repr_peft_eval(const lsim_repr_peft *r, const lsim_qmat *X,
                             const lsim_qmat *base, lsim_qmat *out,
                             lsim_errbuf *eb) {
  lsim_err rc = lsim_repr_peft_validate(r, eb);
  if (rc)
    return rc;
  if (X && X->rows != r->T)
    return lsim_fail(eb, LSIM_E_SHAPE,
                     "peft: %d adapter names for %d input rows", r->T,
                     X->rows);
  int fresh;
  /* result = base_layer(x): out starts as the base result */
  rc = lsim__begin(X, base, out, r->T, r->d_in, r->d_out, "peft", &fresh, eb);
  if (rc)
    return rc;
  mpq_t acc, tmp;
  mpq_init(acc);
  mpq_init(tmp);
  for (int t = 0; t < r->nsub && !rc; t++) {
    const lsim_qadapter *a = &r->mod[r->sub_mod[t]];
    int n = r->sub_offsets[t + 1] - r->sub_offsets[t];
    const int *rows = &r->sub_rows[r->sub_offsets[t]];
    lsim_qmat Xs = LSIM_QMAT_INIT, Zs = LSIM_QMAT_INIT, Ds = LSIM_QMAT_INIT;
    rc = lsim_qmat_init(&Xs, n, r->d_in, eb);
    if (!rc)
      rc = lsim_qmat_init(&Zs, n, a->rank, eb);
    if (!rc)
      rc = lsim_qmat_init(&Ds, n, r->d_out, eb);
    if (!rc) {
      /* gather x[rows], lora_A, lora_B, scaling, scatter-add */
      for (int u = 0; u < n; u++)
        for (int c = 0; c < r->d_in; c++)
          mpq_set(LSIM_QAT(&Xs, u, c), LSIM_QAT(X, rows[u], c));
      for (int u = 0; u < n; u++)
        for (int j = 0; j < a->rank; j++) {
          lsim__dot(acc, tmp, &Xs, u, &a->A, j, r->d_in);
          mpq_set(LSIM_QAT(&Zs, u, j), acc);
        }
      for (int u = 0; u < n; u++)
        for (int c = 0; c < r->d_out; c++) {
          lsim__dot(acc, tmp, &Zs, u, &a->B, c, a->rank);
          mpq_mul(LSIM_QAT(&Ds, u, c), acc, a->scale);
        }
      for (int u = 0; u < n; u++)
        for (int c = 0; c < r->d_out; c++)
          mpq_add(LSIM_QAT(out, rows[u], c), LSIM_QAT(out, rows[u], c),
                  LSIM_QAT(&Ds, u, c));
    }
    lsim_qmat_clear(&Xs);
    lsim_qmat_clear(&Zs);
    lsim_qmat_clear(&Ds);
  }
  mpq_clear(acc);
  mpq_clear(tmp);
  if (rc && fresh)
    lsim_qmat_clear(out);
  return rc;
}

/* ======================================================================== */
/* vLLM                                                                     */
/* ======================================================================== */

void lsim_repr_vllm_release(lsim_repr_vllm *r) {
  if (!r)
    return;
  for (int s = 0; s < r->max_loras; s++) {
    if (r->slot_A)
      lsim_qmat_clear(&r->slot_A[s]);
    if (r->slot_B)
      lsim_qmat_clear(&r->slot_B[s]);
  }
  free(r->index_to_id);
  free(r->slot_rank);
  free(r->slot_A);
  free(r->slot_B);
  free(r->req_id);
  free(r->token_slot);
  free(r->sorted_rows);
  free(r->active_ids);
  free(r->counts);
  free(r->starts);
  memset(r, 0, sizeof *r);
}

lsim_err lsim_repr_vllm_validate(const lsim_repr_vllm *r, lsim_errbuf *eb) {
  if (r->T < 0 || r->max_loras < 0 || r->R < 0 || r->nids < 0 ||
      r->d_in < 0 || r->d_out < 0)
    return lsim_fail(eb, LSIM_E_SHAPE, "vllm: negative count");
  if (!r->index_to_id || !r->slot_rank || !r->slot_A || !r->slot_B ||
      !r->req_id || !r->token_slot)
    return lsim_fail(eb, LSIM_E_REPR_SLOT, "vllm: slot table absent");
  if (!r->sorted_rows || !r->active_ids || !r->counts || !r->starts)
    return lsim_fail(eb, LSIM_E_REPR_METADATA, "vllm: token metadata absent");
  /* slots: the table, the rank record, the padded factors and their tails */
  for (int s = 0; s < r->max_loras; s++) {
    int64_t id = r->index_to_id[s];
    int rk = r->slot_rank[s];
    if (!lsim__is_shape(&r->slot_A[s], r->R, r->d_in) ||
        !lsim__is_shape(&r->slot_B[s], r->d_out, r->R))
      return lsim_fail(eb, LSIM_E_SHAPE,
                       "vllm: slot %d is not A [%d][%d] with B [%d][%d]", s,
                       r->R, r->d_in, r->d_out, r->R);
    if (id < 0)
      return lsim_fail(eb, LSIM_E_REPR_SLOT,
                       "vllm: slot %d holds lora id %lld", s, (long long)id);
    for (int u = 0; u < s && id > 0; u++)
      if (r->index_to_id[u] == id)
        return lsim_fail(eb, LSIM_E_REPR_SLOT,
                         "vllm: lora id %lld is active in slots %d and %d",
                         (long long)id, u, s);
    if (rk > r->R)
      return lsim_fail(eb, LSIM_E_SLOT_RANK,
                       "vllm: slot %d records rank %d above max_lora_rank %d",
                       s, rk, r->R);
    if ((id == 0) != (rk == 0) || rk < 0)
      return lsim_fail(eb, LSIM_E_REPR_SLOT,
                       "vllm: slot %d holds lora id %lld with rank %d", s,
                       (long long)id, rk);
    for (int k = rk; k < r->R; k++) {
      for (int c = 0; c < r->d_in; c++)
        if (mpq_sgn(LSIM_QAT(&r->slot_A[s], k, c)) != 0)
          return lsim_fail(eb, LSIM_E_PAD_NONZERO,
                           "vllm: slot %d A tail [%d][%d] is nonzero (rank "
                           "%d of %d)",
                           s, k, c, rk, r->R);
      for (int c = 0; c < r->d_out; c++)
        if (mpq_sgn(LSIM_QAT(&r->slot_B[s], c, k)) != 0)
          return lsim_fail(eb, LSIM_E_PAD_NONZERO,
                           "vllm: slot %d B tail [%d][%d] is nonzero (rank "
                           "%d of %d)",
                           s, c, k, rk, r->R);
    }
  }
  /* tokens: request id -> slot, with -1 as the no-adapter sentinel */
  for (int i = 0; i < r->T; i++) {
    int64_t id = r->req_id[i];
    int s = r->token_slot[i];
    if (id == 0 || id < -1)
      return lsim_fail(eb, LSIM_E_REPR_REQUEST_ID,
                       "vllm: token %d carries lora id %lld", i,
                       (long long)id);
    if ((id == -1) != (s == -1))
      return lsim_fail(eb, LSIM_E_REPR_SENTINEL,
                       "vllm: token %d with lora id %lld is mapped to slot %d",
                       i, (long long)id, s);
    if (id == -1)
      continue;
    if (s < 0 || s >= r->max_loras)
      return lsim_fail(eb, LSIM_E_REPR_SLOT,
                       "vllm: token %d is mapped to slot %d, outside 0..%d", i,
                       s, r->max_loras - 1);
    if (r->index_to_id[s] != id)
      return lsim_fail(eb, LSIM_E_REPR_SLOT,
                       "vllm: token %d wants lora id %lld but slot %d holds "
                       "%lld",
                       i, (long long)id, s, (long long)r->index_to_id[s]);
  }
  /* metadata: groups, counts, starts, a stable permutation of the rows */
  if (r->nids > r->max_loras + 1)
    return lsim_fail(eb, LSIM_E_REPR_METADATA,
                     "vllm: %d groups for %d slots and the sentinel", r->nids,
                     r->max_loras);
  if (r->starts[0] != 0)
    return lsim_fail(eb, LSIM_E_REPR_METADATA,
                     "vllm: starts begin at %d, not 0", r->starts[0]);
  for (int t = 0; t < r->nids; t++) {
    int g = r->active_ids[t];
    if (g < -1 || g >= r->max_loras || (t > 0 && g <= r->active_ids[t - 1]))
      return lsim_fail(eb, LSIM_E_REPR_METADATA,
                       "vllm: active id %d at group %d is out of range or "
                       "out of order",
                       g, t);
    if (r->counts[t] < 1 || r->counts[t] > r->T - r->starts[t] ||
        r->starts[t + 1] != r->starts[t] + r->counts[t])
      return lsim_fail(eb, LSIM_E_REPR_METADATA,
                       "vllm: group %d has count %d with starts %d..%d", t,
                       r->counts[t], r->starts[t], r->starts[t + 1]);
  }
  if (r->starts[r->nids] != r->T)
    return lsim_fail(eb, LSIM_E_REPR_METADATA,
                     "vllm: groups cover %d rows of %d", r->starts[r->nids],
                     r->T);
  int *seen = lsim__ints(r->T);
  if (!seen)
    return lsim__nomem(eb, "vllm");
  lsim_err rc = 0;
  for (int t = 0; t < r->nids && !rc; t++)
    for (int k = r->starts[t]; k < r->starts[t + 1] && !rc; k++) {
      int i = r->sorted_rows[k];
      if (i < 0 || i >= r->T || seen[i]++)
        rc = lsim_fail(eb, LSIM_E_REPR_METADATA,
                       "vllm: sorted row %d (position %d) is out of range or "
                       "repeated",
                       i, k);
      else if (r->token_slot[i] != r->active_ids[t])
        rc = lsim_fail(eb, LSIM_E_REPR_METADATA,
                       "vllm: row %d of slot %d is listed in group %d of "
                       "slot %d",
                       i, r->token_slot[i], t, r->active_ids[t]);
      else if (k > r->starts[t] && r->sorted_rows[k - 1] > i)
        rc = lsim_fail(eb, LSIM_E_REPR_METADATA,
                       "vllm: group %d is not stable at position %d", t, k);
    }
  free(seen);
  return rc;
}

/* Index of lora id `id` in cat[0..n), -1 when absent. */
static int lsim__find_id(const int64_t *cat, int n, int64_t id) {
  for (int k = 0; k < n; k++)
    if (cat[k] == id)
      return k;
  return -1;
}

lsim_err lsim_repr_vllm_build(lsim_repr_vllm *r, const int64_t *req_id, int T,
                              const int64_t *cat_id, const lsim_qadapter *ad,
                              int ncat, const int64_t *index_to_id,
                              int max_loras, int R, int d_in, int d_out,
                              lsim_errbuf *eb) {
  memset(r, 0, sizeof *r);
  if (ncat < 0 || (ncat > 0 && (!ad || !cat_id)))
    return lsim_fail(eb, LSIM_E_USAGE, "vllm: registry of %d is invalid",
                     ncat);
  if (max_loras < 1 || !index_to_id)
    return lsim_fail(eb, LSIM_E_REPR_SLOT, "vllm: max_loras %d, expected >= 1",
                     max_loras);
  if (R < 1)
    return lsim_fail(eb, LSIM_E_SLOT_RANK, "vllm: max_lora_rank %d", R);
  if (T < 0 || (T > 0 && !req_id))
    return lsim_fail(eb, LSIM_E_SHAPE, "vllm: %d token ids are invalid", T);
  if (d_in < 0 || d_out < 0)
    return lsim_fail(eb, LSIM_E_SHAPE, "vllm: projection [%d][%d] is negative",
                     d_out, d_in);
  /* the registered cache */
  for (int k = 0; k < ncat; k++) {
    lsim_err rc = lsim_qadapter_check(&ad[k], d_in, d_out, eb);
    if (rc)
      return rc;
    if (cat_id[k] < 1 || lsim__find_id(cat_id, k, cat_id[k]) >= 0)
      return lsim_fail(eb, LSIM_E_REPR_REQUEST_ID,
                       "vllm: registered lora id %lld is not positive or not "
                       "unique",
                       (long long)cat_id[k]);
    if (ad[k].rank > R)
      return lsim_fail(eb, LSIM_E_SLOT_RANK,
                       "vllm: lora id %lld has rank %d above max_lora_rank %d",
                       (long long)cat_id[k], ad[k].rank, R);
  }
  /* the activation table */
  for (int s = 0; s < max_loras; s++) {
    int64_t id = index_to_id[s];
    if (id == 0)
      continue;
    if (lsim__find_id(cat_id, ncat, id) < 0)
      return lsim_fail(eb, LSIM_E_REPR_REQUEST_ID,
                       "vllm: slot %d activates unregistered lora id %lld", s,
                       (long long)id);
    if (lsim__find_id(index_to_id, s, id) >= 0)
      return lsim_fail(eb, LSIM_E_REPR_SLOT,
                       "vllm: lora id %lld is activated in two slots",
                       (long long)id);
  }
  /* request ids of the tokens */
  for (int i = 0; i < T; i++) {
    int64_t id = req_id[i];
    if (id == -1)
      continue;
    if (id < 1 || lsim__find_id(cat_id, ncat, id) < 0)
      return lsim_fail(eb, LSIM_E_REPR_REQUEST_ID,
                       "vllm: token %d requests lora id %lld, which is not "
                       "registered",
                       i, (long long)id);
    if (lsim__find_id(index_to_id, max_loras, id) < 0)
      return lsim_fail(eb, LSIM_E_REPR_SLOT,
                       "vllm: token %d requests lora id %lld, which is "
                       "registered but not active",
                       i, (long long)id);
  }

  r->T = T;
  r->d_in = d_in;
  r->d_out = d_out;
  r->R = R;
  r->index_to_id = calloc((size_t)max_loras, sizeof *r->index_to_id);
  r->slot_rank = lsim__ints(max_loras);
  r->slot_A = calloc((size_t)max_loras, sizeof *r->slot_A);
  r->slot_B = calloc((size_t)max_loras, sizeof *r->slot_B);
  r->req_id = calloc(lsim__rcnt(T), sizeof *r->req_id);
  r->token_slot = lsim__ints(T);
  r->sorted_rows = lsim__ints(T);
  r->active_ids = lsim__ints(max_loras + 1);
  r->counts = lsim__ints(max_loras + 1);
  r->starts = lsim__ints(max_loras + 2);
  if (!r->index_to_id || !r->slot_rank || !r->slot_A || !r->slot_B ||
      !r->req_id || !r->token_slot || !r->sorted_rows || !r->active_ids ||
      !r->counts || !r->starts) {
    lsim_repr_vllm_release(r);
    return lsim__nomem(eb, "vllm");
  }
  r->max_loras = max_loras;
  lsim_err rc = 0;
  /* activation: zero the slot, copy the true-rank extent, absorb s in B */
  for (int s = 0; s < max_loras && !rc; s++) {
    rc = lsim_qmat_init(&r->slot_A[s], R, d_in, eb);
    if (!rc)
      rc = lsim_qmat_init(&r->slot_B[s], d_out, R, eb);
    if (rc || index_to_id[s] == 0)
      continue;
    const lsim_qadapter *a = &ad[lsim__find_id(cat_id, ncat, index_to_id[s])];
    r->index_to_id[s] = index_to_id[s];
    r->slot_rank[s] = a->rank;
    for (int k = 0; k < a->rank; k++)
      for (int c = 0; c < d_in; c++)
        mpq_set(LSIM_QAT(&r->slot_A[s], k, c), LSIM_QAT(&a->A, k, c));
    for (int c = 0; c < d_out; c++)
      for (int k = 0; k < a->rank; k++)
        mpq_mul(LSIM_QAT(&r->slot_B[s], c, k), LSIM_QAT(&a->B, c, k),
                a->scale);
  }
  if (rc) {
    lsim_repr_vllm_release(r);
    return rc;
  }
  /* token slot mapping, then stable groups with the -1 sentinel first */
  for (int i = 0; i < T; i++) {
    r->req_id[i] = req_id[i];
    r->token_slot[i] = req_id[i] == -1
                           ? -1
                           : lsim__find_id(index_to_id, max_loras, req_id[i]);
  }
  lsim__stable_by_key(r->token_slot, T, r->sorted_rows);
  int nids = 0;
  for (int k = 0; k < T; k++) {
    int g = r->token_slot[r->sorted_rows[k]];
    if (k == 0 || g != r->active_ids[nids - 1]) {
      r->active_ids[nids] = g;
      r->starts[nids] = k;
      nids++;
    }
    r->counts[nids - 1]++;
  }
  r->starts[nids] = T;
  r->nids = nids;
  if (lsim_repr_vllm_validate(r, eb)) {
    lsim_repr_vllm_release(r);
    return LSIM_BUG(eb, "vllm builder produced an invalid layout");
  }
  return 0;
}

lsim_err lsim_repr_vllm_eval(const lsim_repr_vllm *r, const lsim_qmat *X,
                             const lsim_qmat *base, lsim_qmat *out,
                             lsim_errbuf *eb) {
  lsim_err rc = lsim_repr_vllm_validate(r, eb);
  if (rc)
    return rc;
  int fresh;
  rc = lsim__begin(X, base, out, r->T, r->d_in, r->d_out, "vllm", &fresh, eb);
  if (rc)
    return rc;
  lsim_qmat z = LSIM_QMAT_INIT; /* one row's intermediate, R wide */
  rc = lsim_qmat_init(&z, 1, r->R, eb);
  if (rc) {
    if (fresh)
      lsim_qmat_clear(out);
    return rc;
  }
  mpq_t acc, tmp;
  mpq_init(acc);
  mpq_init(tmp);
  for (int t = 0; t < r->nids; t++) {
    int s = r->active_ids[t];
    if (s < 0)
      continue; /* the no-adapter group keeps the base result */
    const lsim_qmat *A = &r->slot_A[s], *B = &r->slot_B[s];
    for (int k = r->starts[t]; k < r->starts[t + 1]; k++) {
      int i = r->sorted_rows[k];
      /* shrink and expand at the physical rank R, scale already in B */
      for (int j = 0; j < r->R; j++) {
        lsim__dot(acc, tmp, X, i, A, j, r->d_in);
        mpq_set(LSIM_QAT(&z, 0, j), acc);
      }
      for (int c = 0; c < r->d_out; c++) {
        lsim__dot(acc, tmp, &z, 0, B, c, r->R);
        mpq_add(LSIM_QAT(out, i, c), LSIM_QAT(out, i, c), acc);
      }
    }
  }
  mpq_clear(acc);
  mpq_clear(tmp);
  lsim_qmat_clear(&z);
  return 0;
}
