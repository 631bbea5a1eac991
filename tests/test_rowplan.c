/*
** test_rowplan.c: the iteration planner's row-level metadata
** (engine/rowplan.c).
**
**   1. the article's fixed-rank fixture: eight one-row requests with
**      adapters [1,2,1,base,2,2,1,base]; grouped and indexed metadata, and
**      the exact adapter delta through every realization
**   2. the five-request mixed fixture: phase coordinates, token expansion,
**      runs, sampling rows and the rank ledger, reordered and default
**   3. malformed plans: a valid plan is deep-copied, exactly one field of
**      the copy is changed, and validate must answer one exact code; plus
**      inputs that build must reject; together they cover every planner code
**   4. properties over seeded random batches, checked by brute force, with
**      random single-field corruptions that validate must always catch
**
** The fixtures use adapter ids a = 1, b = 2, c = 3 and LSIM_BASE (-1) for
** the article's base-only id 0.
*/
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../engine/rowplan.h"
#include "../base/rng.h"

#define B LSIM_BASE
#define PRE LSIM_PHASE_PREFILL
#define DEC LSIM_PHASE_DECODE
#define NELEM(a) ((int)(sizeof(a) / sizeof((a)[0])))

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

static void eq_ints(const char *what, const int *got, const int *want,
                    int n) {
  for (int i = 0; i < n; i++)
    cr_assert_eq(got[i], want[i], "%s[%d]: got %d, want %d", what, i, got[i],
                 want[i]);
}

#define EQ_INTS(what, got, ...)                                 \
  do {                                                          \
    static const int want_[] = {__VA_ARGS__};                   \
    eq_ints(what, got, want_, NELEM(want_));                    \
  } while (0)

/* An error message in house style: non-empty, lowercase start, no full stop. */
static void house_message(const lsim_errbuf *eb) {
  size_t len = strlen(eb->msg);
  cr_assert_gt(len, 0, "empty error message");
  cr_assert(!(eb->msg[0] >= 'A' && eb->msg[0] <= 'Z'),
            "message starts uppercase: %s", eb->msg);
  cr_assert_neq(eb->msg[len - 1], '.', "message ends with a full stop: %s",
                eb->msg);
}

/* ---- fixtures --------------------------------------------------------------- */

/* Loop 3: eight one-row requests, one per scheduler row, rank 2. */
static void build_f1(lsim_rowplan *p) {
  static const int ad[8] = {1, 2, 1, B, 2, 2, 1, B};
  lsim_plan_entry e[8];
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  for (int i = 0; i < 8; i++)
    e[i] = ent(1000 + i, ad[i], ad[i] == B ? 0 : 2, DEC, 1);
  cr_assert_eq(lsim_rowplan_build(p, e, 8, NULL, 0, &eb), 0, "%s", eb.msg);
}

/* 0x03B: p0 p1 d0 d1 d2; reordered packs [p1, p0, d0, d1, d2]. */
static void build_f2(lsim_rowplan *p, int reordered, int max_rank) {
  lsim_plan_entry e[5] = {
      ent(100, 1, 2, PRE, 3), /* p0: adapter a */
      ent(101, 2, 3, PRE, 2), /* p1: adapter b */
      ent(200, 1, 2, DEC, 1), /* d0: adapter a */
      ent(201, B, 0, DEC, 1), /* d1: base only */
      ent(202, 3, 1, DEC, 1), /* d2: adapter c */
  };
  static const int order[5] = {1, 0, 2, 3, 4};
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_rowplan_build(p, e, 5, reordered ? order : NULL, max_rank,
                                  &eb),
               0, "%s", eb.msg);
}

/* ---- 1. the fixed-rank fixture ------------------------------------------------ */

Test(rowplan, fixed_rank_fixture_grouped_and_indexed) {
  lsim_rowplan p = LSIM_ROWPLAN_INIT;
  build_f1(&p);
  cr_assert_eq(p.n, 8);
  cr_assert_eq(p.npre, 0);
  cr_assert_eq(p.ndec, 8);
  cr_assert_eq(p.T, 8);
  cr_assert_eq(p.doff, 0);
  EQ_INTS("prefill_indptr", p.prefill_indptr, 0);
  EQ_INTS("row_adapter", p.row_adapter, 1, 2, 1, B, 2, 2, 1, B);
  EQ_INTS("sample_rows", p.sample_rows, 0, 1, 2, 3, 4, 5, 6, 7);

  /* contiguous (Punica-style) realization */
  cr_assert_eq(p.nactive, 6);
  EQ_INTS("perm", p.perm, 0, 2, 6, 1, 4, 5);
  cr_assert_eq(p.nseg, 2);
  EQ_INTS("seg_adapter", p.seg_adapter, 1, 2);
  EQ_INTS("seg_rank", p.seg_rank, 2, 2);
  EQ_INTS("seg_offsets", p.seg_offsets, 0, 3, 6);

  /* indexed (vLLM-style) realization with the base sentinel group */
  EQ_INTS("sorted_rows", p.sorted_rows, 3, 7, 0, 2, 6, 1, 4, 5);
  cr_assert_eq(p.nids, 3);
  EQ_INTS("active_ids", p.active_ids, -1, 1, 2);
  EQ_INTS("id_counts", p.id_counts, 2, 3, 3);
  EQ_INTS("id_starts", p.id_starts, 0, 2, 5, 8);

  /* runs in packed order, base runs included */
  cr_assert_eq(p.nruns, 7);
  EQ_INTS("run_adapter", p.run_adapter, 1, 2, 1, B, 2, 1, B);
  EQ_INTS("run_offsets", p.run_offsets, 0, 1, 2, 3, 4, 6, 7, 8);

  /* one rank: one bucket, no padding */
  cr_assert_eq(p.nbuckets, 1);
  EQ_INTS("bucket_rank", p.bucket_rank, 2);
  EQ_INTS("bucket_rows", p.bucket_rows, 0, 1, 2, 4, 5, 6);
  cr_assert_eq(p.phys_rank, 2);
  cr_assert_eq(p.true_rank_rows, 12);
  cr_assert_eq(p.padded_rank_rows, 12);
  cr_assert_eq(p.wasted_rank_rows, 0);
  cr_assert_eq(lsim_rowplan_padding_ratio(&p), 1.0);
  cr_assert_eq(lsim_rowplan_validate(&p, NULL), 0);
  lsim_rowplan_release(&p);
}

/*
** The fixture's exact shrink/expand/scatter trace, computed through the
** plan's metadata.  Scales are 1/2 and 2, so everything is doubled to stay
** in integers: 2*dY = (2 s_a) (x A_a^T) B_a^T.
*/
static const int f1_x[8][4] = {
    {1, 0, 1, 0}, {0, 1, 0, 1}, {1, 1, 0, 0}, {3, 1, 4, 1},
    {0, 1, 1, 0}, {1, 0, 0, 1}, {1, 1, 1, 1}, {5, 9, 2, 6},
};
static const int f1_a[3][2][4] = {
    {{0}}, {{1, 0, 1, 0}, {0, 1, 0, 1}}, {{1, 1, 0, 0}, {0, 0, 1, 1}}};
static const int f1_b[3][3][2] = {
    {{0}}, {{1, 0}, {0, 1}, {1, 1}}, {{1, 1}, {1, -1}, {0, 1}}};
static const int f1_s2[3] = {0, 1, 4}; /* 2 * scale */

static void f1_delta_row(int row, int adapter, long long out[3]) {
  long long z[2];
  for (int k = 0; k < 2; k++) {
    z[k] = 0;
    for (int c = 0; c < 4; c++)
      z[k] += (long long)f1_x[row][c] * f1_a[adapter][k][c];
  }
  for (int o = 0; o < 3; o++)
    out[o] = f1_s2[adapter] *
             (z[0] * f1_b[adapter][o][0] + z[1] * f1_b[adapter][o][1]);
}

Test(rowplan, fixed_rank_fixture_exact_delta_every_realization) {
  static const long long want[8][3] = {
      {2, 0, 2}, {8, 0, 4}, {1, 1, 2}, {0, 0, 0},
      {8, 0, 4}, {8, 0, 4}, {2, 2, 4}, {0, 0, 0},
  };
  long long seg[8][3], idx[8][3], bkt[8][3], d[3];
  lsim_rowplan p = LSIM_ROWPLAN_INIT;
  build_f1(&p);
  memset(seg, 0, sizeof seg);
  memset(idx, 0, sizeof idx);
  memset(bkt, 0, sizeof bkt);
  /* contiguous: gather through perm, one adapter per segment, scatter */
  for (int t = 0; t < p.nseg; t++)
    for (int u = p.seg_offsets[t]; u < p.seg_offsets[t + 1]; u++) {
      f1_delta_row(p.perm[u], p.seg_adapter[t], d);
      for (int o = 0; o < 3; o++)
        seg[p.perm[u]][o] += d[o];
    }
  /* indexed: the -1 group exits early */
  for (int t = 0; t < p.nids; t++) {
    if (p.active_ids[t] == B)
      continue;
    for (int u = p.id_starts[t]; u < p.id_starts[t + 1]; u++) {
      f1_delta_row(p.sorted_rows[u], p.active_ids[t], d);
      for (int o = 0; o < 3; o++)
        idx[p.sorted_rows[u]][o] += d[o];
    }
  }
  /* rank buckets: the row's own adapter inside one fixed-rank launch */
  for (int t = 0; t < p.nbuckets; t++)
    for (int u = p.bucket_offsets[t]; u < p.bucket_offsets[t + 1]; u++) {
      int r = p.bucket_rows[u];
      f1_delta_row(r, p.row_adapter[r], d);
      for (int o = 0; o < 3; o++)
        bkt[r][o] += d[o];
    }
  for (int r = 0; r < 8; r++)
    for (int o = 0; o < 3; o++) {
      cr_assert_eq(seg[r][o], want[r][o], "segmented row %d col %d", r, o);
      cr_assert_eq(idx[r][o], want[r][o], "indexed row %d col %d", r, o);
      cr_assert_eq(bkt[r][o], want[r][o], "bucketed row %d col %d", r, o);
    }
  lsim_rowplan_release(&p);
}

/* ---- 2. the mixed fixture ------------------------------------------------------ */

Test(rowplan, mixed_fixture_reordered) {
  lsim_rowplan p = LSIM_ROWPLAN_INIT;
  build_f2(&p, 1, 0);
  cr_assert_eq(p.n, 5);
  cr_assert_eq(p.npre, 2);
  cr_assert_eq(p.ndec, 3);
  EQ_INTS("packed", p.packed, 1, 0, 2, 3, 4);
  EQ_INTS("packed_inv", p.packed_inv, 1, 0, 2, 3, 4);
  EQ_INTS("prefill_indptr", p.prefill_indptr, 0, 2, 5);
  cr_assert_eq(p.doff, 5);
  cr_assert_eq(p.T, 8);
  cr_assert_eq(p.T - p.doff, 3, "decode count");

  /* token expansion: rows of p1, p0, then d0, d1, d2 */
  EQ_INTS("row_req", p.row_req, 1, 1, 0, 0, 0, 2, 3, 4);
  EQ_INTS("row_pos", p.row_pos, 0, 1, 0, 1, 2, 0, 0, 0);
  EQ_INTS("row_phase", p.row_phase, PRE, PRE, PRE, PRE, PRE, DEC, DEC, DEC);
  EQ_INTS("row_adapter", p.row_adapter, 2, 2, 1, 1, 1, 1, B, 3);
  EQ_INTS("row_rank", p.row_rank, 3, 3, 2, 2, 2, 2, 0, 1);

  /* runs [b, a, base, c]: a spans the prefill/decode boundary at doff */
  cr_assert_eq(p.nruns, 4);
  EQ_INTS("run_adapter", p.run_adapter, 2, 1, B, 3);
  EQ_INTS("run_offsets", p.run_offsets, 0, 2, 6, 7, 8);

  /* sampling rows, scheduler order [p0, p1, d0, d1, d2] */
  EQ_INTS("sample_rows", p.sample_rows, 4, 1, 5, 6, 7);

  /* grouped segments, ascending adapter ids */
  cr_assert_eq(p.nactive, 7);
  EQ_INTS("perm", p.perm, 2, 3, 4, 5, 0, 1, 7);
  cr_assert_eq(p.nseg, 3);
  EQ_INTS("seg_adapter", p.seg_adapter, 1, 2, 3);
  EQ_INTS("seg_rank", p.seg_rank, 2, 3, 1);
  EQ_INTS("seg_offsets", p.seg_offsets, 0, 4, 6, 7);

  /* indexed metadata */
  EQ_INTS("sorted_rows", p.sorted_rows, 6, 2, 3, 4, 5, 0, 1, 7);
  cr_assert_eq(p.nids, 4);
  EQ_INTS("active_ids", p.active_ids, -1, 1, 2, 3);
  EQ_INTS("id_counts", p.id_counts, 1, 4, 2, 1);
  EQ_INTS("id_starts", p.id_starts, 0, 1, 5, 7, 8);

  /* rank buckets */
  cr_assert_eq(p.nbuckets, 3);
  EQ_INTS("bucket_rank", p.bucket_rank, 1, 2, 3);
  EQ_INTS("bucket_rows", p.bucket_rows, 7, 2, 3, 4, 5, 0, 1);
  EQ_INTS("bucket_offsets", p.bucket_offsets, 0, 1, 5, 7);

  /* ledger at R = 3 (the largest logical rank) */
  cr_assert_eq(p.phys_rank, 3);
  cr_assert_eq(p.true_rank_rows, 15);
  cr_assert_eq(p.padded_rank_rows, 21);
  cr_assert_eq(p.wasted_rank_rows, 6);
  /* 21/15 and the literal 1.4 are both the double nearest to 7/5 */
  cr_assert_eq(lsim_rowplan_padding_ratio(&p), 1.4);
  {
    const int64_t d_in = 3, d_out = 2;
    int64_t f_true = 2 * p.true_rank_rows * (d_in + d_out);
    int64_t f_pad = 2 * p.padded_rank_rows * (d_in + d_out);
    cr_assert_eq(f_true, 150);
    cr_assert_eq(f_pad, 210);
    cr_assert_eq((double)f_pad / (double)f_true,
                 lsim_rowplan_padding_ratio(&p));
  }
  cr_assert_eq(lsim_rowplan_validate(&p, NULL), 0);
  lsim_rowplan_release(&p);
}

Test(rowplan, mixed_fixture_explicit_slot_rank) {
  lsim_rowplan p = LSIM_ROWPLAN_INIT, q = LSIM_ROWPLAN_INIT;
  build_f2(&p, 1, 3);
  cr_assert_eq(p.phys_rank, 3);
  cr_assert_eq(p.padded_rank_rows, 21);
  build_f2(&q, 1, 4);
  cr_assert_eq(q.phys_rank, 4);
  cr_assert_eq(q.true_rank_rows, 15);
  cr_assert_eq(q.padded_rank_rows, 28);
  cr_assert_eq(q.wasted_rank_rows, 13);
  cr_assert_eq(lsim_rowplan_padding_ratio(&q), 28.0 / 15.0);
  lsim_rowplan_release(&p);
  lsim_rowplan_release(&q);
}

Test(rowplan, mixed_fixture_default_packing) {
  lsim_rowplan p = LSIM_ROWPLAN_INIT;
  build_f2(&p, 0, 0);
  EQ_INTS("packed", p.packed, 0, 1, 2, 3, 4);
  EQ_INTS("prefill_indptr", p.prefill_indptr, 0, 3, 5);
  cr_assert_eq(p.doff, 5);
  EQ_INTS("row_req", p.row_req, 0, 0, 0, 1, 1, 2, 3, 4);
  EQ_INTS("row_adapter", p.row_adapter, 1, 1, 1, 2, 2, 1, B, 3);
  EQ_INTS("sample_rows", p.sample_rows, 2, 4, 5, 6, 7);
  /* without the within-phase reorder a's rows split: five runs, not four */
  cr_assert_eq(p.nruns, 5);
  EQ_INTS("run_adapter", p.run_adapter, 1, 2, 1, B, 3);
  EQ_INTS("run_offsets", p.run_offsets, 0, 3, 5, 6, 7, 8);
  EQ_INTS("perm", p.perm, 0, 1, 2, 5, 3, 4, 7);
  EQ_INTS("seg_offsets", p.seg_offsets, 0, 4, 6, 7);
  EQ_INTS("sorted_rows", p.sorted_rows, 6, 0, 1, 2, 5, 3, 4, 7);
  EQ_INTS("bucket_rows", p.bucket_rows, 7, 0, 1, 2, 5, 3, 4);
  /* the ledger does not depend on packing */
  cr_assert_eq(p.true_rank_rows, 15);
  cr_assert_eq(p.padded_rank_rows, 21);
  lsim_rowplan_release(&p);
}

Test(rowplan, default_packing_moves_prefills_first) {
  /* scheduler order interleaves phases; packing is phase-major */
  lsim_plan_entry e[4] = {ent(1, 0, 4, DEC, 1), ent(2, 5, 8, PRE, 2),
                          ent(3, B, 0, DEC, 1), ent(4, 0, 4, PRE, 3)};
  static const int given[4] = {3, 1, 2, 0};
  lsim_rowplan p = LSIM_ROWPLAN_INIT;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_rowplan_build(&p, e, 4, NULL, 8, &eb), 0, "%s", eb.msg);
  EQ_INTS("packed", p.packed, 1, 3, 0, 2);
  EQ_INTS("prefill_indptr", p.prefill_indptr, 0, 2, 5);
  EQ_INTS("sample_rows", p.sample_rows, 5, 1, 6, 4);
  cr_assert_eq(p.phys_rank, 8);
  lsim_rowplan_release(&p);
  /* a within-phase reorder of both phases */
  cr_assert_eq(lsim_rowplan_build(&p, e, 4, given, 0, &eb), 0, "%s", eb.msg);
  EQ_INTS("prefill_indptr", p.prefill_indptr, 0, 3, 5);
  EQ_INTS("row_req", p.row_req, 3, 3, 3, 1, 1, 2, 0);
  EQ_INTS("sample_rows", p.sample_rows, 6, 4, 5, 2);
  EQ_INTS("run_adapter", p.run_adapter, 0, 5, B, 0);
  cr_assert_eq(p.phys_rank, 8);
  lsim_rowplan_release(&p);
}

Test(rowplan, empty_and_base_only_batches) {
  lsim_rowplan p = LSIM_ROWPLAN_INIT;
  lsim_plan_entry e[3] = {ent(1, B, 0, PRE, 4), ent(2, B, 0, DEC, 1),
                          ent(3, B, 0, DEC, 1)};
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_rowplan_build(&p, NULL, 0, NULL, 0, &eb), 0, "%s",
               eb.msg);
  cr_assert_eq(p.T, 0);
  cr_assert_eq(p.nruns + p.nactive + p.nseg + p.nids + p.nbuckets, 0);
  EQ_INTS("run_offsets", p.run_offsets, 0);
  EQ_INTS("id_starts", p.id_starts, 0);
  cr_assert_eq(lsim_rowplan_padding_ratio(&p), 1.0);
  cr_assert_eq(lsim_rowplan_validate(&p, NULL), 0);
  lsim_rowplan_release(&p);

  cr_assert_eq(lsim_rowplan_build(&p, e, 3, NULL, 16, &eb), 0, "%s", eb.msg);
  cr_assert_eq(p.T, 6);
  cr_assert_eq(p.nactive, 0);
  cr_assert_eq(p.nseg, 0);
  cr_assert_eq(p.nbuckets, 0);
  cr_assert_eq(p.nruns, 1);
  cr_assert_eq(p.nids, 1);
  EQ_INTS("active_ids", p.active_ids, -1);
  EQ_INTS("id_counts", p.id_counts, 6);
  cr_assert_eq(p.phys_rank, 16);
  cr_assert_eq(p.padded_rank_rows, 0);
  cr_assert_eq(lsim_rowplan_padding_ratio(&p), 1.0);
  lsim_rowplan_release(&p);
}

Test(rowplan, copy_is_deep_and_release_is_idempotent) {
  lsim_rowplan p = LSIM_ROWPLAN_INIT, q = LSIM_ROWPLAN_INIT;
  build_f2(&p, 1, 0);
  cr_assert_eq(lsim_rowplan_copy(&q, &p, NULL), 0);
  cr_assert_neq(q.perm, p.perm);
  q.perm[0] = 7;
  cr_assert_eq(p.perm[0], 2);
  cr_assert_eq(lsim_rowplan_validate(&p, NULL), 0);
  lsim_rowplan_release(&q);
  lsim_rowplan_release(&q);
  lsim_rowplan_release(&p);
  lsim_rowplan_release(NULL);
  cr_assert_eq(lsim_rowplan_validate(NULL, NULL), LSIM_E_USAGE);
  cr_assert_eq(lsim_rowplan_copy(NULL, &p, NULL), LSIM_E_USAGE);
}

/* ---- 3a. malformed plans: one field of a valid copy ----------------------------- */

enum { M_INT, M_I64, M_ARR, M_ARR64, M_SWAP, M_NULL };

typedef struct mut_case {
  char name[48];
  int fixture; /* 1: fixed-rank; 2: mixed reordered, R 3; 3: mixed default */
  int kind;
  size_t off; /* the field */
  int idx, idx2;
  long long val;
  lsim_err want;
} mut_case;

#define OFF(f) offsetof(lsim_rowplan, f)
#define MI(fx, f, v, code) {#f " = " #v, fx, M_INT, OFF(f), 0, 0, v, code}
#define M64(fx, f, v, code) {#f " = " #v, fx, M_I64, OFF(f), 0, 0, v, code}
#define MA(fx, f, i, v, code) \
  {#f "[" #i "] = " #v, fx, M_ARR, OFF(f), i, 0, v, code}
#define MA64(fx, f, i, v, code) \
  {#f "[" #i "] = " #v, fx, M_ARR64, OFF(f), i, 0, v, code}
#define MS(fx, f, i, k, code) \
  {"swap " #f "[" #i "], [" #k "]", fx, M_SWAP, OFF(f), i, k, 0, code}
#define MN(fx, f, code) {#f " = NULL", fx, M_NULL, OFF(f), 0, 0, 0, code}

/*
** Reference values of fixture 2 (packed [p1, p0, d0, d1, d2], R = 3), for
** reading the table:
**   req_uid [100,101,200,201,202]  req_adapter [1,2,1,-1,3]
**   req_rank [2,3,2,0,1]  req_phase [0,0,1,1,1]  req_rows [3,2,1,1,1]
**   packed [1,0,2,3,4]  prefill_indptr [0,2,5]  doff 5  T 8
**   row_req [1,1,0,0,0,2,3,4]  row_adapter [2,2,1,1,1,1,-1,3]
**   runs [2,1,-1,3] / [0,2,6,7,8]  perm [2,3,4,5,0,1,7]
**   segs [1,2,3] ranks [2,3,1] / [0,4,6,7]
**   sorted_rows [6,2,3,4,5,0,1,7]  ids [-1,1,2,3] counts [1,4,2,1]
**   buckets [1,2,3] rows [7,2,3,4,5,0,1] / [0,1,5,7]  ledger 15/21/6
*/
static mut_case mut_cases[] = {
    /* V1 request counts, missing arrays */
    MI(2, n, 4, LSIM_E_PLAN_REQ_COUNT),
    MI(2, n, 6, LSIM_E_PLAN_REQ_COUNT),
    MI(2, npre, 1, LSIM_E_PLAN_REQ_COUNT),
    MI(2, ndec, 2, LSIM_E_PLAN_REQ_COUNT),
    MI(2, n, -1, LSIM_E_PLAN_REQ_COUNT),
    MN(2, req_uid, LSIM_E_PLAN_REQ_COUNT),
    MN(2, perm, LSIM_E_PLAN_ROW_MISSING),
    MN(2, seg_offsets, LSIM_E_PLAN_PTR_COUNT),
    MN(2, sorted_rows, LSIM_E_PLAN_INDEXED),
    /* V2 requests */
    MA64(2, req_uid, 4, 100, LSIM_E_PLAN_DUP_REQUEST),
    MA(2, req_phase, 2, 7, LSIM_E_PLAN_PHASE_ORDER),
    MA(2, req_phase, 0, 1, LSIM_E_PLAN_DECODE_ROWS),
    MA(2, req_adapter, 4, -2, LSIM_E_PLAN_UNKNOWN_ADAPTER),
    MA(2, req_adapter, 3, 1, LSIM_E_PLAN_RANK),
    MA(2, req_adapter, 4, 2, LSIM_E_PLAN_FIXED_RANK),
    MA(2, req_adapter, 4, 7, LSIM_E_PLAN_EXPANSION),
    MA(2, req_rank, 3, 1, LSIM_E_PLAN_RANK),
    MA(2, req_rank, 4, 0, LSIM_E_PLAN_RANK),
    MA(2, req_rank, 2, 3, LSIM_E_PLAN_FIXED_RANK),
    MA(2, req_rank, 4, 4, LSIM_E_PLAN_RANK_SLOT),
    MA(2, req_rank, 4, 2, LSIM_E_PLAN_RANK),
    MA(2, req_rows, 0, 0, LSIM_E_PLAN_EMPTY_PREFILL),
    MA(2, req_rows, 2, 2, LSIM_E_PLAN_DECODE_ROWS),
    MA(2, req_rows, 1, 3, LSIM_E_PLAN_ROW_COUNT),
    /* more one-field phase and rank mutations (docs/RELIABILITY.md) */
    MA(2, req_rows, 1, 0, LSIM_E_PLAN_EMPTY_PREFILL),
    MA(2, req_rows, 3, 0, LSIM_E_PLAN_DECODE_ROWS),
    MA(2, req_rows, 4, 5, LSIM_E_PLAN_DECODE_ROWS),
    MA(2, req_phase, 1, 1, LSIM_E_PLAN_DECODE_ROWS),
    MA(2, req_phase, 4, 0, LSIM_E_PLAN_PHASE_ORDER),
    MA(2, req_rank, 0, 3, LSIM_E_PLAN_FIXED_RANK),
    MA(2, req_rank, 1, 4, LSIM_E_PLAN_RANK_SLOT),
    MI(2, phys_rank, 0, LSIM_E_PLAN_RANK_SLOT),
    /* V3 packed order, V4 inverse */
    MA(2, packed, 0, 0, LSIM_E_PLAN_PACKED_ORDER),
    MA(2, packed, 4, 5, LSIM_E_PLAN_PACKED_ORDER),
    MA(2, packed, 4, -1, LSIM_E_PLAN_PACKED_ORDER),
    MS(2, packed, 1, 2, LSIM_E_PLAN_PHASE_ORDER),
    MA(2, req_phase, 2, 0, LSIM_E_PLAN_PHASE_ORDER),
    MS(2, packed, 0, 1, LSIM_E_PLAN_INVERSE),
    MA(2, packed_inv, 0, 0, LSIM_E_PLAN_INVERSE),
    MA(2, packed_inv, 4, 99, LSIM_E_PLAN_INVERSE),
    /* V5 row count and expansion */
    MI(2, T, 5, LSIM_E_PLAN_EXPANSION),
    MI(2, T, 9, LSIM_E_PLAN_ROW_COUNT),
    MI(2, T, 7, LSIM_E_PLAN_ROW_COUNT),
    MI(2, T, -1, LSIM_E_PLAN_ROW_COUNT),
    /* V6 phase coordinates */
    MA(2, prefill_indptr, 0, 1, LSIM_E_PLAN_INDPTR),
    MA(2, prefill_indptr, 1, 3, LSIM_E_PLAN_INDPTR),
    MA(2, prefill_indptr, 2, 4, LSIM_E_PLAN_INDPTR),
    MA(3, prefill_indptr, 1, 2, LSIM_E_PLAN_INDPTR),
    MI(2, doff, 4, LSIM_E_PLAN_DOFF),
    MI(2, doff, 6, LSIM_E_PLAN_DOFF),
    MI(3, doff, 3, LSIM_E_PLAN_DOFF),
    /* V7 rows */
    MA(2, row_req, 0, 0, LSIM_E_PLAN_ROW_OWNER),
    MA(2, row_req, 3, 99, LSIM_E_PLAN_ROW_OWNER),
    MA(3, row_req, 0, 1, LSIM_E_PLAN_ROW_OWNER),
    MA(2, row_pos, 4, 1, LSIM_E_PLAN_ROW_OWNER),
    MA(2, row_pos, 5, 1, LSIM_E_PLAN_ROW_OWNER),
    MA(2, row_phase, 5, 0, LSIM_E_PLAN_ROW_OWNER),
    MA(2, row_phase, 0, 1, LSIM_E_PLAN_ROW_OWNER),
    MA(2, row_adapter, 6, 1, LSIM_E_PLAN_EXPANSION),
    MA(2, row_adapter, 2, 2, LSIM_E_PLAN_EXPANSION),
    MA(2, row_rank, 7, 2, LSIM_E_PLAN_RANK),
    MA(2, row_rank, 6, 1, LSIM_E_PLAN_RANK),
    /* V8 sampling rows */
    MA(2, sample_rows, 0, 2, LSIM_E_PLAN_SAMPLE_ROWS),
    MA(2, sample_rows, 1, 0, LSIM_E_PLAN_SAMPLE_ROWS),
    MA(2, sample_rows, 4, 99, LSIM_E_PLAN_SAMPLE_ROWS),
    MA(3, sample_rows, 0, 4, LSIM_E_PLAN_SAMPLE_ROWS),
    /* V9 runs */
    MI(2, nruns, 3, LSIM_E_PLAN_RUNS),
    MI(2, nruns, 5, LSIM_E_PLAN_RUNS),
    MA(2, run_adapter, 2, 1, LSIM_E_PLAN_RUNS),
    MA(2, run_adapter, 1, 2, LSIM_E_PLAN_RUNS),
    MA(2, run_offsets, 0, 1, LSIM_E_PLAN_RUNS),
    MA(2, run_offsets, 4, 5, LSIM_E_PLAN_EXPANSION),
    MA(2, run_offsets, 4, 7, LSIM_E_PLAN_RUNS),
    MA(2, run_offsets, 1, 3, LSIM_E_PLAN_RUNS),
    MA(2, run_offsets, 2, 2, LSIM_E_PLAN_RUNS),
    MA(1, run_offsets, 7, 7, LSIM_E_PLAN_RUNS),
    /* V10 grouped segments */
    MI(2, nactive, 6, LSIM_E_PLAN_ROW_MISSING),
    MI(1, nactive, 5, LSIM_E_PLAN_ROW_MISSING),
    MI(2, nactive, 8, LSIM_E_PLAN_ROW_COUNT),
    MI(2, nactive, -1, LSIM_E_PLAN_ROW_COUNT),
    MA(2, perm, 0, 99, LSIM_E_PLAN_ROW_BOUNDS),
    MA(2, perm, 0, -1, LSIM_E_PLAN_ROW_BOUNDS),
    MA(2, perm, 6, 8, LSIM_E_PLAN_ROW_BOUNDS),
    MA(2, perm, 0, 6, LSIM_E_PLAN_BASE_ROW),
    MA(1, perm, 2, 3, LSIM_E_PLAN_BASE_ROW),
    MA(2, perm, 1, 2, LSIM_E_PLAN_ROW_DUP),
    MA(2, perm, 6, 0, LSIM_E_PLAN_ROW_DUP),
    MS(2, perm, 0, 1, LSIM_E_PLAN_GROUP_ORDER),
    MS(1, perm, 1, 2, LSIM_E_PLAN_GROUP_ORDER),
    MS(2, perm, 3, 4, LSIM_E_PLAN_SEG_ADAPTER),
    MI(2, nseg, 2, LSIM_E_PLAN_PTR_COUNT),
    MI(2, nseg, 4, LSIM_E_PLAN_PTR_COUNT),
    MI(2, nseg, 0, LSIM_E_PLAN_PTR_COUNT),
    MI(1, nseg, 1, LSIM_E_PLAN_PTR_COUNT),
    MA(2, seg_offsets, 0, 1, LSIM_E_PLAN_OFFSETS),
    MA(2, seg_offsets, 3, 6, LSIM_E_PLAN_OFFSETS),
    MA(2, seg_offsets, 2, 3, LSIM_E_PLAN_OFFSETS),
    MA(2, seg_offsets, 1, 0, LSIM_E_PLAN_EMPTY_SEGMENT),
    MA(2, seg_offsets, 2, 4, LSIM_E_PLAN_EMPTY_SEGMENT),
    MA(2, seg_offsets, 1, 5, LSIM_E_PLAN_SEG_ADAPTER),
    MA(1, seg_offsets, 1, 4, LSIM_E_PLAN_SEG_ADAPTER),
    MA(2, seg_adapter, 0, 2, LSIM_E_PLAN_SEG_ADAPTER),
    MA(2, seg_adapter, 2, -1, LSIM_E_PLAN_SEG_ADAPTER),
    MA(2, seg_rank, 1, 2, LSIM_E_PLAN_FIXED_RANK),
    MA(2, seg_rank, 2, 3, LSIM_E_PLAN_FIXED_RANK),
    /* V11 indexed metadata */
    MI(2, nids, 3, LSIM_E_PLAN_INDEXED),
    MI(2, nids, 5, LSIM_E_PLAN_INDEXED),
    MA(2, active_ids, 0, 0, LSIM_E_PLAN_INDEXED),
    MA(2, active_ids, 2, 1, LSIM_E_PLAN_INDEXED),
    MA(2, id_counts, 1, 3, LSIM_E_PLAN_INDEXED),
    MA(1, id_counts, 0, 3, LSIM_E_PLAN_INDEXED),
    MA(2, id_starts, 2, 6, LSIM_E_PLAN_INDEXED),
    MA(2, id_starts, 0, 1, LSIM_E_PLAN_INDEXED),
    MA(2, id_starts, 4, 7, LSIM_E_PLAN_INDEXED),
    MA(2, sorted_rows, 0, 2, LSIM_E_PLAN_INDEXED),
    MA(2, sorted_rows, 7, 8, LSIM_E_PLAN_INDEXED),
    MS(2, sorted_rows, 1, 2, LSIM_E_PLAN_INDEXED),
    /* V12 rank buckets */
    MI(2, nbuckets, 2, LSIM_E_PLAN_BUCKET),
    MI(2, nbuckets, 4, LSIM_E_PLAN_BUCKET),
    MA(2, bucket_rank, 0, 2, LSIM_E_PLAN_BUCKET),
    MA(2, bucket_offsets, 1, 2, LSIM_E_PLAN_BUCKET),
    MA(2, bucket_offsets, 3, 6, LSIM_E_PLAN_BUCKET),
    MA(2, bucket_rows, 0, 6, LSIM_E_PLAN_BUCKET),
    MA(2, bucket_rows, 0, -5, LSIM_E_PLAN_BUCKET),
    MS(2, bucket_rows, 1, 2, LSIM_E_PLAN_BUCKET),
    /* physical slot, V13 ledgers */
    MI(2, phys_rank, 2, LSIM_E_PLAN_RANK_SLOT),
    MI(2, phys_rank, -1, LSIM_E_PLAN_RANK_SLOT),
    MI(2, phys_rank, 4, LSIM_E_PLAN_LEDGER),
    M64(2, true_rank_rows, 14, LSIM_E_PLAN_LEDGER),
    M64(2, padded_rank_rows, 22, LSIM_E_PLAN_LEDGER),
    M64(2, wasted_rank_rows, 5, LSIM_E_PLAN_LEDGER),
};

static void build_fixture(lsim_rowplan *p, int fixture) {
  if (fixture == 1)
    build_f1(p);
  else
    build_f2(p, fixture == 2, fixture == 2 ? 3 : 0);
}

static int *int_field(lsim_rowplan *p, size_t off) {
  int *a;
  memcpy(&a, (char *)p + off, sizeof a);
  return a;
}

ParameterizedTestParameters(rowplan, malformed_plan_fails_closed) {
  return cr_make_param_array(mut_case, mut_cases, NELEM(mut_cases));
}

ParameterizedTest(mut_case *m, rowplan, malformed_plan_fails_closed) {
  lsim_rowplan good = LSIM_ROWPLAN_INIT, bad = LSIM_ROWPLAN_INIT;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  char *field = (char *)&bad + m->off;
  void *saved = NULL;
  build_fixture(&good, m->fixture);
  cr_assert_eq(lsim_rowplan_copy(&bad, &good, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_rowplan_validate(&bad, &eb), 0, "%s", eb.msg);
  switch (m->kind) {
  case M_INT: {
    int v = (int)m->val, old;
    memcpy(&old, field, sizeof old);
    cr_assert_neq(old, v, "%s: not a change", m->name);
    memcpy(field, &v, sizeof v);
    break;
  }
  case M_I64: {
    int64_t v = m->val;
    memcpy(field, &v, sizeof v);
    break;
  }
  case M_ARR: {
    int *a = int_field(&bad, m->off);
    cr_assert_neq(a[m->idx], (int)m->val, "%s: not a change", m->name);
    a[m->idx] = (int)m->val;
    break;
  }
  case M_ARR64: {
    int64_t *a;
    memcpy(&a, field, sizeof a);
    cr_assert_neq(a[m->idx], m->val, "%s: not a change", m->name);
    a[m->idx] = m->val;
    break;
  }
  case M_SWAP: {
    int *a = int_field(&bad, m->off), t = a[m->idx];
    cr_assert_neq(t, a[m->idx2], "%s: not a change", m->name);
    a[m->idx] = a[m->idx2];
    a[m->idx2] = t;
    break;
  }
  case M_NULL: {
    void *null = NULL;
    memcpy(&saved, field, sizeof saved);
    memcpy(field, &null, sizeof null);
    break;
  }
  }
  lsim_err got = lsim_rowplan_validate(&bad, &eb);
  cr_assert_eq(got, m->want, "%s: got %s (%s), want %s", m->name,
               lsim_err_name(got), eb.msg, lsim_err_name(m->want));
  cr_assert_eq(eb.code, got);
  house_message(&eb);
  if (m->kind == M_NULL)
    memcpy(field, &saved, sizeof saved);
  /* the original is untouched by the copy's corruption */
  cr_assert_eq(lsim_rowplan_validate(&good, NULL), 0);
  lsim_rowplan_release(&bad);
  lsim_rowplan_release(&good);
}

/* ---- 3b. inputs that build rejects -------------------------------------------- */

typedef struct bad_build {
  char name[48];
  int n;
  lsim_plan_entry e[4];
  int has_packed;
  int packed[4];
  int max_rank;
  int null_entries;
  lsim_err want;
} bad_build;

#define E_(uid, a, r, ph, rows) {uid, 0, a, r, ph, rows, 0, 0, 0, 0}
#define NOPACK 0, {0}

static bad_build bad_builds[] = {
    {"empty prefill", 1, {E_(1, 0, 2, PRE, 0)}, NOPACK, 0, 0,
     LSIM_E_PLAN_EMPTY_PREFILL},
    {"negative prefill rows", 1, {E_(1, 0, 2, PRE, -3)}, NOPACK, 0, 0,
     LSIM_E_PLAN_EMPTY_PREFILL},
    {"decode with two rows", 1, {E_(1, 0, 2, DEC, 2)}, NOPACK, 0, 0,
     LSIM_E_PLAN_DECODE_ROWS},
    {"decode with no row", 1, {E_(1, B, 0, DEC, 0)}, NOPACK, 0, 0,
     LSIM_E_PLAN_DECODE_ROWS},
    {"duplicate uid", 3,
     {E_(7, 0, 2, PRE, 2), E_(8, 0, 2, DEC, 1), E_(7, B, 0, DEC, 1)},
     NOPACK, 0, 0, LSIM_E_PLAN_DUP_REQUEST},
    {"packed repeats a request", 2,
     {E_(1, 0, 2, PRE, 2), E_(2, 0, 2, PRE, 1)}, 1, {0, 0}, 0, 0,
     LSIM_E_PLAN_PACKED_ORDER},
    {"packed names nobody", 2, {E_(1, 0, 2, PRE, 2), E_(2, 0, 2, PRE, 1)}, 1,
     {0, 2}, 0, 0, LSIM_E_PLAN_PACKED_ORDER},
    {"packed negative", 2, {E_(1, 0, 2, PRE, 2), E_(2, 0, 2, PRE, 1)}, 1,
     {-1, 0}, 0, 0, LSIM_E_PLAN_PACKED_ORDER},
    {"decode packed before prefill", 2,
     {E_(1, 0, 2, PRE, 2), E_(2, 0, 2, DEC, 1)}, 1, {1, 0}, 0, 0,
     LSIM_E_PLAN_PHASE_ORDER},
    {"unknown phase", 1, {E_(1, 0, 2, 2, 1)}, NOPACK, 0, 0,
     LSIM_E_PLAN_PHASE_ORDER},
    {"rank above slot", 2, {E_(1, 0, 2, PRE, 2), E_(2, 1, 4, DEC, 1)},
     NOPACK, 3, 0, LSIM_E_PLAN_RANK_SLOT},
    {"negative max_rank", 1, {E_(1, 0, 2, PRE, 2)}, NOPACK, -1, 0,
     LSIM_E_PLAN_RANK_SLOT},
    {"adapter with rank 0", 1, {E_(1, 0, 0, DEC, 1)}, NOPACK, 0, 0,
     LSIM_E_PLAN_RANK},
    {"base with a rank", 1, {E_(1, B, 2, DEC, 1)}, NOPACK, 0, 0,
     LSIM_E_PLAN_RANK},
    {"adapter id below base", 1, {E_(1, -2, 2, DEC, 1)}, NOPACK, 0, 0,
     LSIM_E_PLAN_UNKNOWN_ADAPTER},
    {"one adapter two ranks", 2, {E_(1, 4, 2, PRE, 2), E_(2, 4, 8, DEC, 1)},
     NOPACK, 0, 0, LSIM_E_PLAN_FIXED_RANK},
    {"rows overflow int", 2,
     {E_(1, 0, 2, PRE, INT_MAX / 2 + 1), E_(2, 0, 2, PRE, INT_MAX / 2 + 1)},
     NOPACK, 0, 0, LSIM_E_PLAN_ROW_COUNT},
    {"negative request count", -1, {E_(1, 0, 2, PRE, 2)}, NOPACK, 0, 0,
     LSIM_E_PLAN_REQ_COUNT},
    {"no entry array", 2, {E_(1, 0, 2, PRE, 2)}, NOPACK, 0, 1,
     LSIM_E_PLAN_REQ_COUNT},
};

ParameterizedTestParameters(rowplan, build_rejects) {
  return cr_make_param_array(bad_build, bad_builds, NELEM(bad_builds));
}

ParameterizedTest(bad_build *b, rowplan, build_rejects) {
  lsim_rowplan p, zero = LSIM_ROWPLAN_INIT;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  memset(&p, 0xA5, sizeof p); /* build must not trust what p held */
  lsim_err got =
      lsim_rowplan_build(&p, b->null_entries ? NULL : b->e, b->n,
                         b->has_packed ? b->packed : NULL, b->max_rank, &eb);
  cr_assert_eq(got, b->want, "%s: got %s (%s), want %s", b->name,
               lsim_err_name(got), eb.msg, lsim_err_name(b->want));
  cr_assert_eq(eb.code, got);
  house_message(&eb);
  cr_assert_eq(memcmp(&p, &zero, sizeof p), 0, "%s: plan not left empty",
               b->name);
  lsim_rowplan_release(&p);
}

/* Every planner code is produced by at least one fixture above. */
Test(rowplan, every_planner_code_is_covered) {
  static const lsim_err codes[] = {
#define CODE(sym, val, name) sym,
      LSIM_ERRCODES_PLAN(CODE)
#undef CODE
  };
  static const char *const names[] = {
#define NAME(sym, val, name) name,
      LSIM_ERRCODES_PLAN(NAME)
#undef NAME
  };
  cr_assert_geq(NELEM(mut_cases), 46);
  for (int c = 0; c < NELEM(codes); c++) {
    int hits = 0;
    cr_assert_eq(codes[c], -100 - c, "%s is not numbered in sequence",
                 names[c]);
    cr_assert_str_eq(lsim_err_name(codes[c]), names[c]);
    for (int i = 0; i < NELEM(mut_cases); i++)
      hits += mut_cases[i].want == codes[c];
    for (int i = 0; i < NELEM(bad_builds); i++)
      hits += bad_builds[i].want == codes[c];
    cr_assert_gt(hits, 0, "%s has no fixture", names[c]);
  }
  cr_assert_geq(codes[NELEM(codes) - 1], -159, "planner codes past -159");
}

/* ---- 4. properties over random batches ----------------------------------------- */

typedef struct shape {
  int nmax;        /* requests 0..nmax */
  int max_rows;    /* prefill rows 1..max_rows */
  int base_pct;    /* chance of a base-only request, percent */
  int pre_pct;     /* chance of a prefill, percent */
  int nadapters;   /* distinct adapter ids to draw from */
  int id_spread;   /* adapter ids drawn from 0..id_spread-1 */
  int reorder_pct; /* chance of an explicit within-phase packed order */
} shape;

static const shape shapes[] = {
    {40, 8, 20, 50, 4, 6, 70},      {40, 1, 0, 0, 1, 1, 50},
    {40, 32, 50, 90, 8, 1000, 70},  {6, 3, 100, 50, 1, 1, 50},
    {25, 4, 10, 30, 12, 40, 100},   {40, 64, 0, 100, 3, 3, 50},
    {1, 5, 30, 50, 2, 2, 50},       {40, 2, 30, 50, 20, INT_MAX, 80},
};

static int draw(lsim_rng *r, int n) {
  return (int)lsim_rng_below(r, (uint64_t)n);
}

/* rank of an adapter id: fixed per id, from a small menu */
static int rank_of(int id, int salt) {
  static const int menu[] = {1, 2, 4, 8, 16, 3};
  return menu[((unsigned)id * 7u + (unsigned)salt) % (unsigned)NELEM(menu)];
}

/* small deterministic integer factors, independent of the plan */
static int fa(int id, int k, int c) {
  return (int)(((unsigned)id * 31u + (unsigned)(k * 7 + c * 3)) % 5u) - 2;
}
static int fb(int id, int o, int k) {
  return (int)(((unsigned)id * 17u + (unsigned)(o * 5 + k * 11)) % 7u) - 3;
}
static int fs(int id) { return 1 + (int)((unsigned)id % 3u); }

/* delta of one row, computed at physical rank R with zero tails */
static void delta(const int *x, int id, int rank, int R, long long out[2]) {
  for (int o = 0; o < 2; o++) {
    out[o] = 0;
    for (int k = 0; k < R; k++) {
      long long z = 0;
      for (int c = 0; c < 3; c++)
        z += (long long)x[c] * (k < rank ? fa(id, k, c) : 0);
      out[o] += z * (k < rank ? fb(id, o, k) : 0);
    }
    out[o] *= fs(id);
  }
}

static void check_against_brute_force(const lsim_rowplan *p,
                                      const lsim_plan_entry *e, int n,
                                      const int *order, int max_rank) {
  int T = 0, want_active = 0, maxr = 0;
  int64_t truth = 0;
  /* expected packing and expansion, from the entries alone */
  int *pk = malloc((size_t)(n ? n : 1) * sizeof *pk);
  cr_assert_not_null(pk);
  if (order) {
    memcpy(pk, order, (size_t)n * sizeof *pk);
  } else {
    int k = 0;
    for (int j = 0; j < n; j++)
      if (e[j].phase == PRE)
        pk[k++] = j;
    for (int j = 0; j < n; j++)
      if (e[j].phase == DEC)
        pk[k++] = j;
  }
  for (int j = 0; j < n; j++) {
    T += e[j].rows;
    if (e[j].adapter != B) {
      want_active += e[j].rows;
      truth += (int64_t)e[j].rows * e[j].rank;
      if (e[j].rank > maxr)
        maxr = e[j].rank;
    }
  }
  cr_assert_eq(p->T, T);
  cr_assert_eq(p->nactive, want_active);
  {
    int i = 0;
    for (int k = 0; k < n; k++)
      for (int s = 0; s < e[pk[k]].rows; s++, i++) {
        cr_assert_eq(p->row_req[i], pk[k]);
        cr_assert_eq(p->row_pos[i], s);
        cr_assert_eq(p->row_adapter[i], e[pk[k]].adapter);
        cr_assert_eq(p->row_rank[i], e[pk[k]].rank);
        cr_assert_eq(p->row_phase[i], e[pk[k]].phase);
      }
  }
  /* every active row exactly once in perm, never a base row */
  {
    int *hits = calloc((size_t)(T ? T : 1), sizeof *hits);
    cr_assert_not_null(hits);
    for (int u = 0; u < p->nactive; u++) {
      cr_assert(p->perm[u] >= 0 && p->perm[u] < T);
      hits[p->perm[u]]++;
    }
    for (int i = 0; i < T; i++)
      cr_assert_eq(hits[i], p->row_adapter[i] == B ? 0 : 1, "row %d", i);
    free(hits);
  }
  /* rows of each segment share its adapter and rank; adapters ascend */
  for (int t = 0; t < p->nseg; t++) {
    cr_assert_lt(p->seg_offsets[t], p->seg_offsets[t + 1]);
    if (t > 0)
      cr_assert_gt(p->seg_adapter[t], p->seg_adapter[t - 1]);
    for (int u = p->seg_offsets[t]; u < p->seg_offsets[t + 1]; u++) {
      cr_assert_eq(p->row_adapter[p->perm[u]], p->seg_adapter[t]);
      cr_assert_eq(p->row_rank[p->perm[u]], p->seg_rank[t]);
    }
  }
  /* indexed: counts sum to T; the sorted rows equal a naive regrouping */
  {
    int sum = 0, u = 0;
    for (int t = 0; t < p->nids; t++) {
      sum += p->id_counts[t];
      for (int i = 0; i < T; i++)
        if (p->row_adapter[i] == p->active_ids[t])
          cr_assert_eq(p->sorted_rows[u++], i, "indexed group %d", t);
    }
    cr_assert_eq(sum, T);
    cr_assert_eq(u, T);
  }
  /* sampling: a row of that request, and its last one */
  for (int j = 0; j < n; j++) {
    int s = p->sample_rows[j];
    cr_assert(s >= 0 && s < T);
    cr_assert_eq(p->row_req[s], j);
    cr_assert_eq(p->row_pos[s], e[j].rows - 1);
    cr_assert(s + 1 == T || p->row_req[s + 1] != j);
  }
  /* runs: a naive count of adapter changes */
  {
    int runs = 0;
    for (int i = 0; i < T; i++)
      runs += i == 0 || p->row_adapter[i] != p->row_adapter[i - 1];
    cr_assert_eq(p->nruns, runs);
    cr_assert_eq(p->run_offsets[p->nruns], T);
  }
  /* buckets: each holds one rank, all active rows once */
  {
    int total = 0;
    for (int t = 0; t < p->nbuckets; t++)
      for (int u = p->bucket_offsets[t]; u < p->bucket_offsets[t + 1]; u++) {
        cr_assert_eq(p->row_rank[p->bucket_rows[u]], p->bucket_rank[t]);
        total++;
      }
    cr_assert_eq(total, want_active);
  }
  /* ledgers, from request-level sums */
  cr_assert_eq(p->phys_rank, max_rank > 0 ? max_rank : maxr);
  cr_assert_eq(p->true_rank_rows, truth);
  cr_assert_eq(p->padded_rank_rows, (int64_t)want_active * p->phys_rank);
  cr_assert_eq(p->wasted_rank_rows, p->padded_rank_rows - truth);
  free(pk);
}

/* The same delta through every realization the plan offers. */
static void check_realizations(const lsim_rowplan *p, lsim_rng *r) {
  int T = p->T;
  size_t sz = (size_t)(T ? T : 1);
  int(*x)[3] = malloc(sz * sizeof *x);
  long long(*ref)[2] = calloc(sz, sizeof *ref);
  long long(*seg)[2] = calloc(sz, sizeof *seg);
  long long(*idx)[2] = calloc(sz, sizeof *idx);
  long long(*bkt)[2] = calloc(sz, sizeof *bkt);
  long long(*pad)[2] = calloc(sz, sizeof *pad);
  long long d[2];
  cr_assert(x && ref && seg && idx && bkt && pad);
  for (int i = 0; i < T; i++)
    for (int c = 0; c < 3; c++)
      x[i][c] = draw(r, 9) - 4;
  for (int i = 0; i < T; i++)
    if (p->row_adapter[i] != B)
      delta(x[i], p->row_adapter[i], p->row_rank[i], p->row_rank[i], ref[i]);
  for (int t = 0; t < p->nseg; t++)
    for (int u = p->seg_offsets[t]; u < p->seg_offsets[t + 1]; u++) {
      delta(x[p->perm[u]], p->seg_adapter[t], p->seg_rank[t], p->seg_rank[t],
            d);
      seg[p->perm[u]][0] += d[0];
      seg[p->perm[u]][1] += d[1];
    }
  for (int t = 0; t < p->nids; t++)
    for (int u = p->id_starts[t]; u < p->id_starts[t + 1]; u++) {
      int row = p->sorted_rows[u];
      if (p->active_ids[t] == B)
        continue;
      delta(x[row], p->active_ids[t], p->row_rank[row], p->phys_rank, d);
      pad[row][0] += d[0];
      pad[row][1] += d[1];
      delta(x[row], p->active_ids[t], p->row_rank[row], p->row_rank[row], d);
      idx[row][0] += d[0];
      idx[row][1] += d[1];
    }
  for (int t = 0; t < p->nbuckets; t++)
    for (int u = p->bucket_offsets[t]; u < p->bucket_offsets[t + 1]; u++) {
      int row = p->bucket_rows[u];
      delta(x[row], p->row_adapter[row], p->bucket_rank[t], p->bucket_rank[t],
            d);
      bkt[row][0] += d[0];
      bkt[row][1] += d[1];
    }
  for (int i = 0; i < T; i++)
    for (int o = 0; o < 2; o++) {
      cr_assert_eq(seg[i][o], ref[i][o], "segmented row %d", i);
      cr_assert_eq(idx[i][o], ref[i][o], "indexed row %d", i);
      cr_assert_eq(bkt[i][o], ref[i][o], "bucketed row %d", i);
      cr_assert_eq(pad[i][o], ref[i][o], "padded row %d", i);
    }
  free(x);
  free(ref);
  free(seg);
  free(idx);
  free(bkt);
  free(pad);
}

/* Fields a corruption may hit, with the count that sizes each array. */
typedef struct field {
  const char *name;
  size_t off;
  int wide;  /* int64 */
  int array; /* 0 scalar; else the array's length comes from len() */
} field;

#define FS(f) {#f, OFF(f), 0, 0}
#define FS64(f) {#f, OFF(f), 1, 0}
#define FA(f) {#f, OFF(f), 0, 1}
static const field fields[] = {
    FS(n), FS(npre), FS(ndec), FS(doff), FS(T), FS(nruns), FS(nactive),
    FS(nseg), FS(nids), FS(nbuckets), FS(phys_rank), FS64(true_rank_rows),
    FS64(padded_rank_rows), FS64(wasted_rank_rows), FA(req_adapter),
    FA(req_rank), FA(req_phase), FA(req_rows), FA(packed), FA(packed_inv),
    FA(prefill_indptr), FA(sample_rows), FA(row_req), FA(row_pos),
    FA(row_phase), FA(row_adapter), FA(row_rank), FA(run_adapter),
    FA(run_offsets), FA(perm), FA(seg_adapter), FA(seg_rank),
    FA(seg_offsets), FA(sorted_rows), FA(active_ids), FA(id_counts),
    FA(id_starts), FA(bucket_rank), FA(bucket_rows), FA(bucket_offsets),
};

static int field_len(const lsim_rowplan *p, size_t off) {
  if (off == OFF(req_adapter) || off == OFF(req_rank) ||
      off == OFF(req_phase) || off == OFF(req_rows) || off == OFF(packed) ||
      off == OFF(packed_inv) || off == OFF(sample_rows))
    return p->n;
  if (off == OFF(prefill_indptr))
    return p->npre + 1;
  if (off == OFF(run_adapter))
    return p->nruns;
  if (off == OFF(run_offsets))
    return p->nruns + 1;
  if (off == OFF(perm) || off == OFF(bucket_rows))
    return p->nactive;
  if (off == OFF(seg_adapter) || off == OFF(seg_rank))
    return p->nseg;
  if (off == OFF(seg_offsets))
    return p->nseg + 1;
  if (off == OFF(active_ids) || off == OFF(id_counts))
    return p->nids;
  if (off == OFF(id_starts))
    return p->nids + 1;
  if (off == OFF(bucket_rank))
    return p->nbuckets;
  if (off == OFF(bucket_offsets))
    return p->nbuckets + 1;
  return p->T; /* row arrays and sorted_rows */
}

static long long new_value(lsim_rng *r, long long old, int T) {
  switch (draw(r, 6)) {
  case 0:
    return old + 1;
  case 1:
    return old - 1;
  case 2:
    return INT_MAX;
  case 3:
    return INT_MIN;
  default:
    return (long long)draw(r, T + 6) - 2;
  }
}

/* Corrupt one field of a copy, at random; validate must say no. */
static int corrupt_and_check(const lsim_rowplan *good, lsim_rng *r) {
  lsim_rowplan bad = LSIM_ROWPLAN_INIT;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  const field *f = &fields[draw(r, NELEM(fields))];
  long long old, v;
  int changed = 0;
  cr_assert_eq(lsim_rowplan_copy(&bad, good, &eb), 0, "%s", eb.msg);
  /* phys_rank is free when no row uses it */
  if (f->off == OFF(phys_rank) && good->nactive == 0)
    goto done;
  if (!f->array) {
    char *at = (char *)&bad + f->off;
    if (f->wide) {
      int64_t w;
      memcpy(&w, at, sizeof w);
      old = w;
      v = new_value(r, old, good->T);
      w = (int64_t)v;
      memcpy(at, &w, sizeof w);
    } else {
      int i;
      memcpy(&i, at, sizeof i);
      old = i;
      v = new_value(r, old, good->T);
      if (v < INT_MIN || v > INT_MAX)
        goto done;
      i = (int)v;
      memcpy(at, &i, sizeof i);
    }
  } else {
    int len = field_len(good, f->off), *a = int_field(&bad, f->off), k;
    if (len <= 0)
      goto done;
    k = draw(r, len);
    old = a[k];
    v = new_value(r, old, good->T);
    if (v < INT_MIN || v > INT_MAX)
      goto done;
    a[k] = (int)v;
  }
  if (v == old)
    goto done;
  changed = 1;
  {
    lsim_err got = lsim_rowplan_validate(&bad, &eb);
    cr_assert_neq(got, 0, "%s changed from %lld to %lld went unnoticed",
                  f->name, old, v);
    cr_assert_eq(eb.code, got);
  }
done:
  lsim_rowplan_release(&bad);
  return changed;
}

/*
** Corrupt several array elements at once (counts stay intact, so every
** array keeps its true length): validate may answer any planner code, or
** even 0 when the changes cancel, but it must never read out of bounds.
*/
static void corrupt_many(const lsim_rowplan *good, lsim_rng *r) {
  lsim_rowplan bad = LSIM_ROWPLAN_INIT;
  int times = 2 + draw(r, 4);
  cr_assert_eq(lsim_rowplan_copy(&bad, good, NULL), 0);
  for (int c = 0; c < times; c++) {
    const field *f = &fields[14 + draw(r, NELEM(fields) - 14)];
    int len = field_len(good, f->off), *a = int_field(&bad, f->off);
    long long v;
    cr_assert(f->array);
    if (len <= 0)
      continue;
    int k = draw(r, len);
    v = new_value(r, a[k], good->T);
    if (v >= INT_MIN && v <= INT_MAX)
      a[k] = (int)v;
  }
  lsim_err got = lsim_rowplan_validate(&bad, NULL);
  cr_assert(got == 0 || (got <= -100 && got >= -159), "got %d", got);
  lsim_rowplan_release(&bad);
}

Test(rowplan, property_random_batches) {
  int built = 0, reordered = 0, corrupted = 0, max_n = 0, max_t = 0;
  for (int it = 0; it < 800; it++) {
    const shape *s = &shapes[it % NELEM(shapes)];
    lsim_rng r;
    lsim_rng_init(&r, 0x10A5EEDULL + (uint64_t)it, 42);
    int n = draw(&r, s->nmax + 1), salt = draw(&r, 6);
    int ids[20], *order = NULL, max_rank = 0, maxr = 0;
    lsim_plan_entry *e = calloc((size_t)(n ? n : 1), sizeof *e);
    lsim_rowplan p = LSIM_ROWPLAN_INIT, q = LSIM_ROWPLAN_INIT;
    lsim_errbuf eb = LSIM_ERRBUF_INIT;
    cr_assert_not_null(e);
    for (int a = 0; a < s->nadapters; a++)
      ids[a] = s->id_spread == INT_MAX ? (int)(lsim_rng_next(&r) >> 33)
                                        : draw(&r, s->id_spread);
    for (int j = 0; j < n; j++) {
      int pre = draw(&r, 100) < s->pre_pct;
      int base = draw(&r, 100) < s->base_pct;
      int id = ids[draw(&r, s->nadapters)];
      /* uids: distinct, not in scheduler order, sometimes negative */
      e[j] = ent((int64_t)((j * 7919 + it) % 100003) - 50000,
                 base ? B : id, base ? 0 : rank_of(id, salt),
                 pre ? PRE : DEC, pre ? 1 + draw(&r, s->max_rows) : 1);
      if (!base && e[j].rank > maxr)
        maxr = e[j].rank;
    }
    if (draw(&r, 100) < s->reorder_pct) {
      /* a random within-phase packed order */
      int np = 0, k = 0;
      order = malloc((size_t)(n ? n : 1) * sizeof *order);
      cr_assert_not_null(order);
      for (int ph = PRE; ph <= DEC; ph++) {
        int start = k;
        for (int j = 0; j < n; j++)
          if (e[j].phase == ph)
            order[k++] = j;
        for (int i = k - 1; i > start; i--) {
          int m = start + draw(&r, i - start + 1), t = order[i];
          order[i] = order[m];
          order[m] = t;
        }
        if (ph == PRE)
          np = k;
      }
      (void)np;
      reordered++;
    }
    if (draw(&r, 3) == 0)
      max_rank = maxr + draw(&r, 4);
    cr_assert_eq(lsim_rowplan_build(&p, e, n, order, max_rank, &eb), 0,
                 "iteration %d: %s", it, eb.msg);
    built++;
    if (n > max_n)
      max_n = n;
    if (p.T > max_t)
      max_t = p.T;
    cr_assert_eq(lsim_rowplan_validate(&p, &eb), 0, "iteration %d: %s", it,
                 eb.msg);
    check_against_brute_force(&p, e, n, order, max_rank);
    check_realizations(&p, &r);
    /* a deep copy is equal and valid */
    cr_assert_eq(lsim_rowplan_copy(&q, &p, &eb), 0);
    cr_assert_eq(q.T, p.T);
    if (p.T > 0)
      cr_assert_eq(memcmp(q.sorted_rows, p.sorted_rows,
                          (size_t)p.T * sizeof *p.sorted_rows),
                   0);
    cr_assert_eq(lsim_rowplan_validate(&q, NULL), 0);
    lsim_rowplan_release(&q);
    /* the default order equals the explicit in-phase scheduler order */
    if (!order && n > 0) {
      lsim_rowplan d = LSIM_ROWPLAN_INIT;
      cr_assert_eq(lsim_rowplan_build(&d, e, n, p.packed, max_rank, &eb), 0);
      cr_assert_eq(memcmp(d.row_req, p.row_req, (size_t)p.T * sizeof(int)),
                   0);
      lsim_rowplan_release(&d);
    }
    for (int c = 0; c < 24; c++)
      corrupted += corrupt_and_check(&p, &r);
    for (int c = 0; c < 8; c++)
      corrupt_many(&p, &r);
    lsim_rowplan_release(&p);
    free(order);
    free(e);
  }
  cr_assert_eq(built, 800);
  cr_assert_gt(reordered, 200);
  cr_assert_gt(corrupted, 10000);
  cr_assert_eq(max_n, 40);
  cr_assert_gt(max_t, 200);
}
