/*
** tp.c: the exact sharded reference of tensor-parallel LoRA (tp.h).
**
** Each rank's work is computed from that rank's shards only: the local
** product of rank j reads X (or H_j), A_j and B_j, never the global
** factors, and the only way information crosses ranks is through
** lsim_tp_all_gather() and lsim_tp_all_reduce_sum().  That is what makes
** "sharded == unsharded" a statement about the schedule and not about a
** shortcut.  Sizes here are small (fixtures, randomized tests), so the
** products are plain GMP loops.
*/
#include "tp.h"

#include <stdlib.h>

/* Shape m as rows x cols per the output-matrix rule of cpu_ref.h. */
static lsim_err lsim__out(lsim_qmat *m, int rows, int cols, lsim_errbuf *eb) {
  if (m->v == NULL && m->rows == 0 && m->cols == 0)
    return lsim_qmat_init(m, rows, cols, eb);
  if (m->rows != rows || m->cols != cols)
    return lsim_fail(eb, LSIM_E_SHAPE,
                     "tp: output matrix is %dx%d, the result is %dx%d",
                     m->rows, m->cols, rows, cols);
  return 0;
}

/* C := X F^T; X [T][k], F [n][k]. */
static lsim_err lsim__mm_nt(lsim_qmat *C, const lsim_qmat *X,
                            const lsim_qmat *F, const char *what,
                            lsim_errbuf *eb) {
  if (X->cols != F->cols)
    return lsim_fail(eb, LSIM_E_SHAPE,
                     "tp: %s: inner sizes differ (%dx%d times (%dx%d)^T)",
                     what, X->rows, X->cols, F->rows, F->cols);
  lsim_err rc = lsim__out(C, X->rows, F->rows, eb);
  if (rc)
    return rc;
  mpq_t t;
  mpq_init(t);
  for (int i = 0; i < X->rows; i++)
    for (int n = 0; n < F->rows; n++) {
      mpq_ptr c = LSIM_QAT(C, i, n);
      mpq_set_ui(c, 0, 1);
      for (int k = 0; k < X->cols; k++) {
        mpq_mul(t, LSIM_QAT(X, i, k), LSIM_QAT(F, n, k));
        mpq_add(c, c, t);
      }
    }
  mpq_clear(t);
  return 0;
}

lsim_err lsim_qmat_transpose(lsim_qmat *dst, const lsim_qmat *src,
                             lsim_errbuf *eb) {
  if (dst == src)
    return lsim_fail(eb, LSIM_E_USAGE, "tp: transpose in place");
  lsim_err rc = lsim__out(dst, src->cols, src->rows, eb);
  if (rc)
    return rc;
  for (int i = 0; i < src->rows; i++)
    for (int j = 0; j < src->cols; j++)
      mpq_set(LSIM_QAT(dst, j, i), LSIM_QAT(src, i, j));
  return 0;
}

lsim_err lsim_qmat_slice(lsim_qmat *dst, const lsim_qmat *src, int r0, int r1,
                         int c0, int c1, lsim_errbuf *eb) {
  if (r0 < 0 || r1 < r0 || r1 > src->rows || c0 < 0 || c1 < c0 ||
      c1 > src->cols)
    return lsim_fail(eb, LSIM_E_SHAPE,
                     "tp: slice [%d,%d)x[%d,%d) outside a %dx%d matrix", r0,
                     r1, c0, c1, src->rows, src->cols);
  if (dst == src)
    return lsim_fail(eb, LSIM_E_USAGE, "tp: slice in place");
  lsim_err rc = lsim__out(dst, r1 - r0, c1 - c0, eb);
  if (rc)
    return rc;
  for (int i = r0; i < r1; i++)
    for (int j = c0; j < c1; j++)
      mpq_set(LSIM_QAT(dst, i - r0, j - c0), LSIM_QAT(src, i, j));
  return 0;
}

lsim_err lsim_tp_all_gather(const lsim_qmat *parts, int n, lsim_qmat *out,
                            lsim_errbuf *eb) {
  if (n < 1)
    return lsim_fail(eb, LSIM_E_TP_WORLD, "tp: all-gather of %d parts", n);
  int rows = parts[0].rows, cols = 0;
  for (int j = 0; j < n; j++) {
    if (parts[j].rows != rows)
      return lsim_fail(eb, LSIM_E_SHAPE,
                       "tp: all-gather part %d has %d rows, part 0 %d", j,
                       parts[j].rows, rows);
    cols += parts[j].cols;
  }
  lsim_err rc = lsim__out(out, rows, cols, eb);
  if (rc)
    return rc;
  int c0 = 0;
  for (int j = 0; j < n; j++) {
    for (int i = 0; i < rows; i++)
      for (int c = 0; c < parts[j].cols; c++)
        mpq_set(LSIM_QAT(out, i, c0 + c), LSIM_QAT(&parts[j], i, c));
    c0 += parts[j].cols;
  }
  return 0;
}

lsim_err lsim_tp_all_reduce_sum(const lsim_qmat *parts, int n, lsim_qmat *out,
                                lsim_errbuf *eb) {
  if (n < 1)
    return lsim_fail(eb, LSIM_E_TP_WORLD, "tp: all-reduce of %d parts", n);
  for (int j = 1; j < n; j++)
    if (parts[j].rows != parts[0].rows || parts[j].cols != parts[0].cols)
      return lsim_fail(eb, LSIM_E_SHAPE,
                       "tp: all-reduce part %d is %dx%d, part 0 %dx%d", j,
                       parts[j].rows, parts[j].cols, parts[0].rows,
                       parts[0].cols);
  lsim_err rc = lsim__out(out, parts[0].rows, parts[0].cols, eb);
  if (rc)
    return rc;
  for (int i = 0; i < parts[0].rows; i++)
    for (int c = 0; c < parts[0].cols; c++) {
      mpq_ptr o = LSIM_QAT(out, i, c);
      mpq_set(o, LSIM_QAT(&parts[0], i, c));
      for (int j = 1; j < n; j++) /* rank order, as the manifest states */
        mpq_add(o, o, LSIM_QAT(&parts[j], i, c));
    }
  return 0;
}

static lsim_err lsim__world(int world, int rank, lsim_errbuf *eb) {
  if (world < 1 || world > LSIM_TP_MAX_WORLD)
    return lsim_fail(eb, LSIM_E_TP_WORLD, "tp: degree %d outside 1..%d",
                     world, LSIM_TP_MAX_WORLD);
  if (rank < 0 || rank >= world)
    return lsim_fail(eb, LSIM_E_TP_WORLD, "tp: rank %d outside 0..%d", rank,
                     world - 1);
  return 0;
}

static lsim_err lsim__div(int extent, int world, const char *axis,
                          lsim_errbuf *eb) {
  if (extent % world)
    return lsim_fail(eb, LSIM_E_TP_DIV,
                     "tp: %s extent %d is not divisible by degree %d", axis,
                     extent, world);
  return 0;
}

/* A [r][d_in], B [d_out][r]: the shared rank must agree. */
static lsim_err lsim__factors(const lsim_qmat *A, const lsim_qmat *B,
                              lsim_errbuf *eb) {
  if (A->rows < 1 || A->cols < 1 || B->rows < 1 || B->cols < 1 ||
      A->rows != B->cols)
    return lsim_fail(eb, LSIM_E_SHAPE,
                     "tp: factors A %dx%d and B %dx%d do not share a rank "
                     "(want A [r][d_in], B [d_out][r])",
                     A->rows, A->cols, B->rows, B->cols);
  return 0;
}

lsim_err lsim_tp_shard_col(const lsim_qmat *A, const lsim_qmat *B, int world,
                           int rank, lsim_qmat *a_loc, lsim_qmat *b_loc,
                           lsim_errbuf *eb) {
  lsim_err rc = lsim__world(world, rank, eb);
  if (!rc)
    rc = lsim__factors(A, B, eb);
  if (!rc)
    rc = lsim__div(A->rows, world, "rank", eb);
  if (!rc)
    rc = lsim__div(B->rows, world, "output", eb);
  if (rc)
    return rc;
  int rs = A->rows / world, os = B->rows / world;
  rc = lsim_qmat_slice(a_loc, A, rank * rs, (rank + 1) * rs, 0, A->cols, eb);
  if (!rc)
    rc = lsim_qmat_slice(b_loc, B, rank * os, (rank + 1) * os, 0, B->cols,
                         eb);
  return rc;
}

lsim_err lsim_tp_shard_row(const lsim_qmat *A, const lsim_qmat *B, int world,
                           int rank, lsim_qmat *a_loc, lsim_qmat *b_loc,
                           lsim_errbuf *eb) {
  lsim_err rc = lsim__world(world, rank, eb);
  if (!rc)
    rc = lsim__factors(A, B, eb);
  if (!rc)
    rc = lsim__div(A->cols, world, "input", eb);
  if (!rc)
    rc = lsim__div(B->rows, world, "output", eb);
  if (rc)
    return rc;
  int is = A->cols / world, os = B->rows / world;
  rc = lsim_qmat_slice(a_loc, A, 0, A->rows, rank * is, (rank + 1) * is, eb);
  if (!rc)
    rc = lsim_qmat_slice(b_loc, B, rank * os, (rank + 1) * os, 0, B->cols,
                         eb);
  return rc;
}

void lsim_tp_col_trace_clear(lsim_tp_col_trace *t) {
  for (int j = 0; j < LSIM_TP_MAX_WORLD; j++) {
    lsim_qmat_clear(&t->z_local[j]);
    lsim_qmat_clear(&t->d_local[j]);
  }
  lsim_qmat_clear(&t->z);
  lsim_qmat_clear(&t->d);
  t->world = 0;
}

void lsim_tp_row_trace_clear(lsim_tp_row_trace *t) {
  for (int j = 0; j < LSIM_TP_MAX_WORLD; j++) {
    lsim_qmat_clear(&t->p_local[j]);
    lsim_qmat_clear(&t->d_local[j]);
    lsim_qmat_clear(&t->yb_local[j]);
  }
  lsim_qmat_clear(&t->z);
  lsim_qmat_clear(&t->d);
  lsim_qmat_clear(&t->y);
  t->world = 0;
}

lsim_err lsim_tp_ref_col(const lsim_qmat *X, const lsim_qmat *A,
                         const lsim_qmat *B, int world, lsim_tp_col_trace *t,
                         lsim_errbuf *eb) {
  lsim_tp_col_trace_clear(t);
  lsim_err rc = lsim__world(world, 0, eb);
  if (!rc)
    rc = lsim__factors(A, B, eb);
  if (!rc && X->cols != A->cols)
    rc = lsim_fail(eb, LSIM_E_SHAPE, "tp: X has %d columns, A [r][d_in] %d",
                   X->cols, A->cols);
  t->world = world;
  /* Local shrink on every rank: Z_j = X A_j^T. */
  for (int j = 0; !rc && j < world; j++) {
    lsim_qmat a = LSIM_QMAT_INIT, b = LSIM_QMAT_INIT;
    rc = lsim_tp_shard_col(A, B, world, j, &a, &b, eb);
    if (!rc)
      rc = lsim__mm_nt(&t->z_local[j], X, &a, "local shrink", eb);
    lsim_qmat_clear(&a);
    lsim_qmat_clear(&b);
  }
  /* The rank-axis all-gather: without it a rank only has its own slice. */
  if (!rc)
    rc = lsim_tp_all_gather(t->z_local, world, &t->z, eb);
  /* Local expand into this rank's output shard: D_j = Z B_j^T. */
  for (int j = 0; !rc && j < world; j++) {
    lsim_qmat a = LSIM_QMAT_INIT, b = LSIM_QMAT_INIT;
    rc = lsim_tp_shard_col(A, B, world, j, &a, &b, eb);
    if (!rc)
      rc = lsim__mm_nt(&t->d_local[j], &t->z, &b, "local expand", eb);
    lsim_qmat_clear(&a);
    lsim_qmat_clear(&b);
  }
  /* The output stays sharded; its concatenation is the global view. */
  if (!rc)
    rc = lsim_tp_all_gather(t->d_local, world, &t->d, eb);
  if (rc)
    lsim_tp_col_trace_clear(t);
  return rc;
}

lsim_err lsim_tp_ref_row(const lsim_qmat *H, const lsim_qmat *A,
                         const lsim_qmat *B, const lsim_qmat *W, int world,
                         lsim_tp_row_trace *t, lsim_errbuf *eb) {
  lsim_tp_row_trace_clear(t);
  lsim_err rc = lsim__world(world, 0, eb);
  if (!rc)
    rc = lsim__factors(A, B, eb);
  if (!rc && H->cols != A->cols)
    rc = lsim_fail(eb, LSIM_E_SHAPE, "tp: H has %d columns, A [r][d_in] %d",
                   H->cols, A->cols);
  if (!rc && W && (W->rows != B->rows || W->cols != A->cols))
    rc = lsim_fail(eb, LSIM_E_SHAPE,
                   "tp: base W is %dx%d, want [d_out %d][d_in %d]", W->rows,
                   W->cols, B->rows, A->cols);
  if (rc)
    return rc;
  t->world = world;
  int T = H->rows, din = A->cols, dout = B->rows;
  int is = din / (world ? world : 1), os = dout / (world ? world : 1);
  lsim_qmat contrib[LSIM_TP_MAX_WORLD];
  for (int j = 0; j < world; j++)
    contrib[j] = (lsim_qmat)LSIM_QMAT_INIT;
  /* Local shrink on the activation shard: a partial sum, not a slice. */
  for (int j = 0; !rc && j < world; j++) {
    lsim_qmat a = LSIM_QMAT_INIT, b = LSIM_QMAT_INIT, h = LSIM_QMAT_INIT;
    rc = lsim_tp_shard_row(A, B, world, j, &a, &b, eb);
    if (!rc)
      rc = lsim_qmat_slice(&h, H, 0, T, j * is, (j + 1) * is, eb);
    if (!rc)
      rc = lsim__mm_nt(&t->p_local[j], &h, &a, "local shrink", eb);
    lsim_qmat_clear(&a);
    lsim_qmat_clear(&b);
    lsim_qmat_clear(&h);
  }
  /* Rank-width all-reduce with addition. */
  if (!rc)
    rc = lsim_tp_all_reduce_sum(t->p_local, world, &t->z, eb);
  for (int j = 0; !rc && j < world; j++) {
    lsim_qmat a = LSIM_QMAT_INIT, b = LSIM_QMAT_INIT, h = LSIM_QMAT_INIT,
              w = LSIM_QMAT_INIT;
    rc = lsim_tp_shard_row(A, B, world, j, &a, &b, eb);
    if (!rc)
      rc = lsim__mm_nt(&t->d_local[j], &t->z, &b, "local expand", eb);
    /* Base partial Yb_j = H_j W_j^T over this rank's input columns. */
    if (!rc)
      rc = lsim_qmat_init(&t->yb_local[j], T, dout, eb);
    if (!rc && W) {
      rc = lsim_qmat_slice(&h, H, 0, T, j * is, (j + 1) * is, eb);
      if (!rc)
        rc = lsim_qmat_slice(&w, W, 0, dout, j * is, (j + 1) * is, eb);
      if (!rc)
        rc = lsim__mm_nt(&t->yb_local[j], &h, &w, "base partial", eb);
    }
    /* What rank j hands to the base collective: Yb_j + E_j(D_j). */
    if (!rc)
      rc = lsim_qmat_copy(&contrib[j], &t->yb_local[j], eb);
    for (int i = 0; !rc && i < T; i++)
      for (int c = 0; c < os; c++)
        mpq_add(LSIM_QAT(&contrib[j], i, j * os + c),
                LSIM_QAT(&contrib[j], i, j * os + c),
                LSIM_QAT(&t->d_local[j], i, c));
    lsim_qmat_clear(&a);
    lsim_qmat_clear(&b);
    lsim_qmat_clear(&h);
    lsim_qmat_clear(&w);
  }
  /* The base path's final all-reduce carries the disjoint adapter slices. */
  if (!rc)
    rc = lsim_tp_all_reduce_sum(contrib, world, &t->y, eb);
  /* D, the adapter's share alone, for the trace: concatenated slices. */
  if (!rc)
    rc = lsim_tp_all_gather(t->d_local, world, &t->d, eb);
  for (int j = 0; j < world; j++)
    lsim_qmat_clear(&contrib[j]);
  if (rc)
    lsim_tp_row_trace_clear(t);
  return rc;
}

lsim_err lsim_tp_ref_full(const lsim_qmat *X, const lsim_qmat *A,
                          const lsim_qmat *B, const lsim_qmat *W,
                          lsim_qmat *out, lsim_errbuf *eb) {
  lsim_err rc = lsim__factors(A, B, eb);
  if (rc)
    return rc;
  lsim_qmat z = LSIM_QMAT_INIT, d = LSIM_QMAT_INIT, y = LSIM_QMAT_INIT;
  rc = lsim__mm_nt(&z, X, A, "shrink", eb);
  if (!rc)
    rc = lsim__mm_nt(&d, &z, B, "expand", eb);
  if (!rc && W)
    rc = lsim__mm_nt(&y, X, W, "base", eb);
  if (!rc && W)
    rc = lsim_qmat_add(&d, &y, eb);
  if (!rc)
    rc = lsim_qmat_copy(out, &d, eb);
  lsim_qmat_clear(&z);
  lsim_qmat_clear(&d);
  lsim_qmat_clear(&y);
  return rc;
}
