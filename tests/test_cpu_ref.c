/*
** test_cpu_ref.c: the exact reference executor (backends/cpu_ref).
**
**   1. the article's fixed-rank fixture (0x02E): Z, D, delta and Y exactly,
**      through every family, every scale placement and every numeric tier
**   2. the variable-rank mixed fixture (0x03B / 0x06C): constructed X, A, B
**      and scales that reproduce the article's ragged Z and packed D,
**      through every family, then again after reordering the prefills
**   3. negative cases, each with its exact code
**   4. properties over seeded random batches: every family and placement
**      agrees with a brute-force oracle written here, base rows stay zero,
**      the integer tiers equal the GMP tier (integers and rationals)
**   5. lsim_ref_delta_all's one-pass int tier: a family made wrong
**      (lsim_ref__fault) is caught under every placement and tier, the one
**      pass equals the one-at-a-time gmp runs, a NULL delta keeps the codes
**
** Adapter ids a = 1, b = 2, c = 3; LSIM_BASE (-1) is the article's base id 0.
*/
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../backends/cpu_ref/cpu_ref.h"
#include "../engine/rowplan.h"
#include "../base/rng.h"

#define BASE LSIM_BASE
#define PRE LSIM_PHASE_PREFILL
#define DEC LSIM_PHASE_DECODE
#define NELEM(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* ---- helpers ------------------------------------------------------------ */

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

#include "exact_harness.h"


/* Assert entry (i, j) of m equals the rational string want. */
static void q_is(const lsim_qmat *m, int i, int j, const char *want,
                 const char *what) {
  char *s = lsim_q_str(LSIM_QAT(m, i, j));
  cr_assert_str_eq(s, want, "%s[%d][%d] = %s, want %s", what, i, j, s, want);
  free(s);
}

/* Assert that m equals the spec (same format as qm). */
static void qm_is(const lsim_qmat *m, int rows, int cols, const char *spec,
                  const char *what) {
  lsim_qmat w = LSIM_QMAT_INIT;
  qm(&w, rows, cols, spec);
  cr_assert_eq(m->rows, rows, "%s rows %d, want %d", what, m->rows, rows);
  cr_assert_eq(m->cols, cols, "%s cols %d, want %d", what, m->cols, cols);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_err rc = lsim_ref_compare(&w, m, what, &eb);
  cr_assert_eq(rc, 0, "%s", eb.msg);
  lsim_qmat_clear(&w);
}

/* ======================================================================== */
/* 1. the fixed-rank fixture of 0x02E                                       */
/* ======================================================================== */
/*
** Scheduler rows 0..7 are eight one-row decode requests (the planner's
** requests own contiguous rows, so the article's req-a rows 0 and 2 become
** two requests; the adapter ids per row are the article's).  Packed order
** is scheduler order.
**
** X: the article gives X_g = X[g] for g = [0,2,6,1,4,5], so
**   X[0] = [1,0,1,0]  X[2] = [1,1,0,0]  X[6] = [1,1,1,1]
**   X[1] = [0,1,0,1]  X[4] = [0,1,1,0]  X[5] = [1,0,0,1]
** Base output wanted: Y - delta, row by row:
**   [1,1,1] [1,1,1] [1,1,2] [3,0,2] [0,2,1] [2,0,1] [2,2,2] [1,2,0]
** W (logical [3][4]): for one output column with weights w = (a,b,c,d) the
** six active rows give a+c = r0, b+d = r1, a+b = r2, b+c = r4, a+d = r5,
** a+b+c+d = r6.  Then a - c = r2 - r4, so a = (r0 + r2 - r4) / 2,
** c = r0 - a, b = r2 - a, d = r5 - a, and b + d = r1, r6 = r0 + r1 must
** hold (they do for all three columns).  Column 0: r = (1,1,1,0,2,2) gives
** (1,0,0,1); column 1: (1,1,1,2,0,2) gives (0,1,1,0); column 2:
** (1,1,2,1,1,2) gives (1,1,0,0).  So W = [[1,0,0,1],[0,1,1,0],[1,1,0,0]]
** and x W^T = (x0 + x3, x1 + x2, x0 + x1).
** Base-only rows: X[3] must give [3,0,2]: x0 + x3 = 3, x1 + x2 = 0,
** x0 + x1 = 2 -> X[3] = [2,0,0,1]; X[7] must give [1,2,0]: x0 = x1 = 0,
** x2 = 2, x3 = 1 -> X[7] = [0,0,2,1].
*/

static const char *const F1_X = "1 0 1 0 | 0 1 0 1 | 1 1 0 0 | 2 0 0 1 |"
                                "0 1 1 0 | 1 0 0 1 | 1 1 1 1 | 0 0 2 1";
static const char *const F1_W = "1 0 0 1 | 0 1 1 0 | 1 1 0 0";
static const char *const F1_Z = "2 0 | 1 1 | 2 2 | 1 1 | 1 1 | 1 1";
static const char *const F1_D = "1 0 1 | 1/2 1/2 1 | 1 1 2 |"
                                "4 0 2 | 4 0 2 | 4 0 2";
static const char *const F1_DY = "1 0 1 | 4 0 2 | 1/2 1/2 1 | 0 0 0 |"
                                 "4 0 2 | 4 0 2 | 1 1 2 | 0 0 0";
static const char *const F1_Y = "2 1 2 | 5 1 3 | 3/2 3/2 3 | 3 0 2 |"
                                "4 2 3 | 6 0 3 | 3 3 4 | 1 2 0";

typedef struct fix1 {
  lsim_rowplan p;
  lsim_qmat X, W;
  lsim_qadapter ad[2];
} fix1;

static void fix1_init(fix1 *f) {
  static const int ids[8] = {1, 2, 1, BASE, 2, 2, 1, BASE};
  lsim_plan_entry e[8];
  for (int i = 0; i < 8; i++)
    e[i] = ent(100 + i, ids[i], ids[i] == BASE ? 0 : 2, DEC, 1);
  memset(f, 0, sizeof *f);
  OK(lsim_rowplan_build(&f->p, e, 8, NULL, 0, eb));
  qm(&f->X, 8, 4, F1_X);
  qm(&f->W, 3, 4, F1_W);
  adapter(&f->ad[0], 1, 2, 4, 3, "1 0 1 0 | 0 1 0 1", "1 0 | 0 1 | 1 1",
          "1/2");
  adapter(&f->ad[1], 2, 2, 4, 3, "1 1 0 0 | 0 0 1 1", "1 1 | 1 -1 | 0 1",
          "2");
}

static void fix1_fini(fix1 *f) {
  lsim_rowplan_release(&f->p);
  lsim_qmat_clear(&f->X);
  lsim_qmat_clear(&f->W);
  lsim_qadapter_clear(&f->ad[0]);
  lsim_qadapter_clear(&f->ad[1]);
}

Test(fixture1, plan_matches_article) {
  fix1 f;
  fix1_init(&f);
  static const int g[6] = {0, 2, 6, 1, 4, 5};
  static const int sorted[8] = {3, 7, 0, 2, 6, 1, 4, 5};
  cr_assert_eq(f.p.nactive, 6);
  for (int u = 0; u < 6; u++)
    cr_assert_eq(f.p.perm[u], g[u]);
  cr_assert_eq(f.p.nseg, 2);
  cr_assert_eq(f.p.seg_offsets[1], 3);
  for (int k = 0; k < 8; k++)
    cr_assert_eq(f.p.sorted_rows[k], sorted[k]);
  cr_assert_eq(f.p.nids, 3);
  cr_assert_eq(f.p.active_ids[0], BASE);
  fix1_fini(&f);
}

Test(fixture1, sgmv_trace_z_d_delta_and_y) {
  fix1 f;
  fix1_init(&f);
  static const int nums[] = {LSIM_NUM_AUTO, LSIM_NUM_GMP, LSIM_NUM_INT64};
  for (int k = 0; k < NELEM(nums); k++) {
    lsim_ref_trace t = LSIM_REF_TRACE_INIT;
    lsim_qmat dy = LSIM_QMAT_INIT;
    int used = -1;
    OK(lsim_ref_delta_ex(&f.p, &f.X, f.ad, 2, LSIM_REF_SGMV,
                         LSIM_SCALE_PASSED, nums[k], &t, &used, &dy, eb));
    cr_assert_eq(used, nums[k] == LSIM_NUM_GMP ? LSIM_NUM_GMP : LSIM_NUM_INT64);
    cr_assert_eq(t.n, 6);
    for (int u = 0; u < 6; u++) {
      cr_assert_eq(t.row[u], f.p.perm[u]);
      cr_assert_eq(t.rank[u], 2);
    }
    qm_is(&t.Z, 6, 2, F1_Z, "Z");
    qm_is(&t.D, 6, 3, F1_D, "D");
    qm_is(&dy, 8, 3, F1_DY, "delta");
    /* Y = X W^T + delta, in every base tier */
    static const int bt[] = {LSIM_NUM_AUTO, LSIM_NUM_GMP, LSIM_NUM_INT64,
                             LSIM_NUM_INT16, LSIM_NUM_INT16_SCALAR};
    for (int b = 0; b < NELEM(bt); b++) {
      lsim_qmat y = LSIM_QMAT_INIT;
      int bu = -1;
      OK(lsim_ref_base_ex(&f.X, &f.W, bt[b], &bu, &y, eb));
      cr_assert_eq(bu, bt[b] == LSIM_NUM_AUTO ? LSIM_NUM_INT16 : bt[b]);
      OK(lsim_qmat_add(&y, &dy, eb));
      qm_is(&y, 8, 3, F1_Y, "Y");
      lsim_qmat_clear(&y);
    }
    lsim_qmat_clear(&dy);
    lsim_ref_trace_release(&t);
  }
  fix1_fini(&f);
}

/* Z under each placement: unscaled for passed and fold_b, s*Z for fold_a. */
static const char *const F1_Z_FOLD_A = "1 0 | 1/2 1/2 | 1 1 | 2 2 | 2 2 | 2 2";

Test(fixture1, every_path_every_placement_every_tier) {
  fix1 f;
  fix1_init(&f);
  static const int nums[] = {LSIM_NUM_AUTO, LSIM_NUM_GMP};
  for (int k = 0; k < NELEM(nums); k++)
    for (int path = 0; path < LSIM_REF__COUNT; path++)
      for (int m = 0; m < LSIM_SCALE__COUNT; m++) {
        lsim_ref_trace t = LSIM_REF_TRACE_INIT;
        lsim_qmat dy = LSIM_QMAT_INIT;
        OK(lsim_ref_delta_ex(&f.p, &f.X, f.ad, 2, path, m, nums[k], &t, NULL,
                             &dy, eb));
        qm_is(&dy, 8, 3, F1_DY, lsim_ref_path_name(path));
        /* the trace, mapped to grouped order through perm */
        lsim_qmat zg = LSIM_QMAT_INIT, dg = LSIM_QMAT_INIT;
        OK(lsim_qmat_init(&zg, 6, 2, eb));
        OK(lsim_qmat_init(&dg, 6, 3, eb));
        cr_assert_eq(t.n, 6);
        for (int u = 0; u < t.n; u++) {
          int gpos = -1;
          for (int v = 0; v < 6; v++)
            if (f.p.perm[v] == t.row[u])
              gpos = v;
          cr_assert_geq(gpos, 0);
          cr_assert_eq(t.rank[u], 2);
          for (int j = 0; j < 2; j++)
            mpq_set(LSIM_QAT(&zg, gpos, j), LSIM_QAT(&t.Z, u, j));
          for (int j = 0; j < 3; j++)
            mpq_set(LSIM_QAT(&dg, gpos, j), LSIM_QAT(&t.D, u, j));
        }
        qm_is(&zg, 6, 2, m == LSIM_SCALE_FOLD_A ? F1_Z_FOLD_A : F1_Z, "Z");
        qm_is(&dg, 6, 3, F1_D, "D");
        lsim_qmat_clear(&zg);
        lsim_qmat_clear(&dg);
        lsim_qmat_clear(&dy);
        lsim_ref_trace_release(&t);
      }
  lsim_qmat all = LSIM_QMAT_INIT;
  OK(lsim_ref_delta_all(&f.p, &f.X, f.ad, 2, &all, eb));
  qm_is(&all, 8, 3, F1_DY, "delta_all");
  lsim_qmat_clear(&all);
  OK(lsim_ref_delta_all_ex(&f.p, &f.X, f.ad, 2, LSIM_NUM_GMP, &all, eb));
  qm_is(&all, 8, 3, F1_DY, "delta_all gmp");
  lsim_qmat_clear(&all);
  fix1_fini(&f);
}

Test(fixture1, preshaped_output_is_overwritten) {
  fix1 f;
  fix1_init(&f);
  lsim_qmat dy = LSIM_QMAT_INIT;
  qm(&dy, 8, 3, "9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9");
  OK(lsim_ref_delta(&f.p, &f.X, f.ad, 2, LSIM_REF_INDEXED, LSIM_SCALE_PASSED,
                    &dy, eb));
  qm_is(&dy, 8, 3, F1_DY, "delta");
  lsim_qmat_clear(&dy);
  fix1_fini(&f);
}

/* ======================================================================== */
/* 2. the variable-rank mixed fixture of 0x03B / 0x06C                      */
/* ======================================================================== */
/*
** Scheduler requests: p0 (uid 10, prefill, 3 rows, a rank 2), p1 (uid 11,
** prefill, 2 rows, b rank 3), d0 (uid 12, decode, a), d1 (uid 13, decode,
** base), d2 (uid 14, decode, c rank 1).  Packed [p1, p0, d0, d1, d2]:
** rows 0-1 p1, rows 2-4 p0, row 5 d0, row 6 d1, row 7 d2.  d_in 3, d_out 2.
**
** The article fixes only Z_ragged and D; X, A, B and the scales are ours:
**
** Shrink.  A_b = [[1,1,0],[0,1,0],[0,0,1]] maps x to (x0+x1, x1, x2), so
** X = (z0 - z1, z1, z2): row 0 (Z [1,2,-1]) -> [-1,2,-1], row 1 ([2,1,1])
** -> [1,1,1].  A_a = [[1,0,1],[0,1,-1]] maps x to (x0+x2, x1-x2); picking
** x2 = t gives X = (z0 - t, z1 + t, t): Z [2,-1] t=1 -> [1,0,1]; [1,1]
** t=0 -> [1,1,0]; [2,1] t=2 -> [0,3,2]; [3,-3] t=-1 -> [4,-4,-1].
** A_c = [[1,1,1]]: Z [1] from X [2,-1,0].  The base row is [5,-7,3].
**
** Expand.  D = s Z B^T is linear in Z, so M = s B is fixed by two rows:
**   a: M [1,1] = [3/2,0] and M [2,-1] = [0,-3/2] give M = [[1/2,1],
**      [-1/2,1/2]]; the other two a-rows then check: M [2,1] = [2,-1/2],
**      M [3,-3] = [-3/2,-3].  Take s_a = 1/2, B_a = [[1,2],[-1,1]].
**   b: rows m of M must satisfy m.[1,2,-1] and m.[2,1,1] as prescribed:
**      M = [[1,0,1],[0,1,-1]] (m0 gives 0 and 3, m1 gives 3 and 0).  Take
**      s_b = 3/2 and B_b = M / s_b = [[2/3,0,2/3],[0,2/3,-2/3]] (rational
**      factors on purpose: the integer tier must carry a denominator).
**   c: M [1] = [4,2]: s_c = 2, B_c = [[2],[1]].
*/

static const char *const F2_D = "0 3 | 3 0 | 0 -3/2 | 3/2 0 | 2 -1/2 |"
                                "-3/2 -3 | 0 0 | 4 2";
/* Z_ragged per packed row, "" for the base row */
static const char *const F2_Z[8] = {"1 2 -1", "2 1 1", "2 -1", "1 1",
                                    "2 1",    "3 -3",  "",     "1"};
/* X rows keyed by (uid, token position) */
typedef struct xrow {
  int64_t uid;
  int pos;
  const char *x;
} xrow;
static const xrow F2_X[8] = {
    {11, 0, "-1 2 -1"}, {11, 1, "1 1 1"}, {10, 0, "1 0 1"},
    {10, 1, "1 1 0"},   {10, 2, "0 3 2"}, {12, 0, "4 -4 -1"},
    {13, 0, "5 -7 3"},  {14, 0, "2 -1 0"}};

typedef struct fix2 {
  lsim_rowplan p;
  lsim_qmat X;
  lsim_qadapter ad[3];
} fix2;

static void fix2_x(fix2 *f) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_qmat_init(&f->X, f->p.T, 3, &eb), 0);
  for (int i = 0; i < f->p.T; i++) {
    int64_t uid = f->p.req_uid[f->p.row_req[i]];
    int pos = f->p.row_pos[i], hit = 0;
    for (int k = 0; k < 8; k++)
      if (F2_X[k].uid == uid && F2_X[k].pos == pos) {
        lsim_qmat one = LSIM_QMAT_INIT;
        qm(&one, 1, 3, F2_X[k].x);
        for (int j = 0; j < 3; j++)
          mpq_set(LSIM_QAT(&f->X, i, j), LSIM_QAT(&one, 0, j));
        lsim_qmat_clear(&one);
        hit = 1;
      }
    cr_assert(hit);
  }
}

static void fix2_init(fix2 *f, const int *packed) {
  lsim_plan_entry e[5] = {ent(10, 1, 2, PRE, 3), ent(11, 2, 3, PRE, 2),
                          ent(12, 1, 2, DEC, 1), ent(13, BASE, 0, DEC, 1),
                          ent(14, 3, 1, DEC, 1)};
  memset(f, 0, sizeof *f);
  OK(lsim_rowplan_build(&f->p, e, 5, packed, 3, eb));
  fix2_x(f);
  adapter(&f->ad[0], 1, 2, 3, 2, "1 0 1 | 0 1 -1", "1 2 | -1 1", "1/2");
  adapter(&f->ad[1], 2, 3, 3, 2, "1 1 0 | 0 1 0 | 0 0 1",
          "2/3 0 2/3 | 0 2/3 -2/3", "3/2");
  adapter(&f->ad[2], 3, 1, 3, 2, "1 1 1", "2 | 1", "2");
}

static void fix2_fini(fix2 *f) {
  lsim_rowplan_release(&f->p);
  lsim_qmat_clear(&f->X);
  for (int i = 0; i < 3; i++)
    lsim_qadapter_clear(&f->ad[i]);
}

/* The packed row of (uid, pos) in plan p. */
static int row_of(const lsim_rowplan *p, int64_t uid, int pos) {
  for (int i = 0; i < p->T; i++)
    if (p->req_uid[p->row_req[i]] == uid && p->row_pos[i] == pos)
      return i;
  cr_assert_fail("no row for uid %lld pos %d", (long long)uid, pos);
  return -1;
}

/* Check a trace's Z rows against the article's ragged Z (given in the
** original packing, addressed by uid/pos through `orig`). */
static void check_z(const fix2 *f, const lsim_rowplan *orig,
                    const lsim_ref_trace *t, int padded_R, int fold_a) {
  cr_assert_eq(t->n, 7, "%d intermediate rows", t->n);
  for (int u = 0; u < t->n; u++) {
    int row = t->row[u];
    int64_t uid = f->p.req_uid[f->p.row_req[row]];
    int orow = row_of(orig, uid, f->p.row_pos[row]);
    lsim_qmat z = LSIM_QMAT_INIT;
    int r = f->p.row_rank[row];
    cr_assert_eq(t->rank[u], padded_R ? padded_R : r);
    qm(&z, 1, r, F2_Z[orow]);
    for (int j = 0; j < r; j++) {
      if (fold_a) { /* Z holds s * x A^T */
        const lsim_qadapter *a = NULL;
        for (int k = 0; k < 3; k++)
          if (f->ad[k].id == f->p.row_adapter[row])
            a = &f->ad[k];
        mpq_mul(LSIM_QAT(&z, 0, j), LSIM_QAT(&z, 0, j), a->scale);
      }
      cr_assert(mpq_equal(LSIM_QAT(&t->Z, u, j), LSIM_QAT(&z, 0, j)),
                "Z row %d (packed %d) col %d", u, row, j);
    }
    for (int j = r; j < t->Z.cols; j++) /* padded or ragged tail */
      cr_assert_eq(mpq_sgn(LSIM_QAT(&t->Z, u, j)), 0);
    lsim_qmat_clear(&z);
  }
}

static void fix2_check_all(fix2 *f, const lsim_rowplan *orig,
                           const lsim_qmat *Dorig) {
  for (int path = 0; path < LSIM_REF__COUNT; path++)
    for (int m = 0; m < LSIM_SCALE__COUNT; m++)
      for (int num = LSIM_NUM_AUTO; num <= LSIM_NUM_GMP; num++) {
        lsim_ref_trace t = LSIM_REF_TRACE_INIT;
        lsim_qmat dy = LSIM_QMAT_INIT;
        OK(lsim_ref_delta_ex(&f->p, &f->X, f->ad, 3, path, m, num, &t, NULL,
                             &dy, eb));
        check_z(f, orig, &t, path == LSIM_REF_PADDED ? 3 : 0,
                m == LSIM_SCALE_FOLD_A);
        /* D, by request uid and token position */
        for (int i = 0; i < f->p.T; i++) {
          int orow = row_of(orig, f->p.req_uid[f->p.row_req[i]],
                            f->p.row_pos[i]);
          for (int j = 0; j < 2; j++)
            cr_assert(mpq_equal(LSIM_QAT(&dy, i, j), LSIM_QAT(Dorig, orow, j)),
                      "%s/%s row %d col %d", lsim_ref_path_name(path),
                      lsim_scale_mode_name(m), i, j);
        }
        /* the trace's D rows are the delta rows they scatter to */
        for (int u = 0; u < t.n; u++)
          for (int j = 0; j < 2; j++)
            cr_assert(mpq_equal(LSIM_QAT(&t.D, u, j),
                                LSIM_QAT(&dy, t.row[u], j)));
        lsim_qmat_clear(&dy);
        lsim_ref_trace_release(&t);
      }
}

Test(fixture2, article_metadata_and_ledger) {
  static const int packed[5] = {1, 0, 2, 3, 4};
  fix2 f;
  fix2_init(&f, packed);
  cr_assert_eq(f.p.T, 8);
  cr_assert_eq(f.p.doff, 5);
  cr_assert_eq(f.p.prefill_indptr[1], 2);
  cr_assert_eq(f.p.phys_rank, 3);
  cr_assert_eq(f.p.true_rank_rows, 15);
  cr_assert_eq(f.p.padded_rank_rows, 21);
  cr_assert_eq(f.p.wasted_rank_rows, 6);
  static const int radapter[8] = {2, 2, 1, 1, 1, 1, BASE, 3};
  for (int i = 0; i < 8; i++)
    cr_assert_eq(f.p.row_adapter[i], radapter[i]);
  fix2_fini(&f);
}

Test(fixture2, ragged_z_and_d_every_path) {
  static const int packed[5] = {1, 0, 2, 3, 4};
  fix2 f;
  fix2_init(&f, packed);
  lsim_qmat D = LSIM_QMAT_INIT;
  qm(&D, 8, 2, F2_D);
  fix2_check_all(&f, &f.p, &D);
  lsim_qmat all = LSIM_QMAT_INIT;
  OK(lsim_ref_delta_all(&f.p, &f.X, f.ad, 3, &all, eb));
  qm_is(&all, 8, 2, F2_D, "delta_all");
  /* base row 6 is exactly zero */
  cr_assert_eq(mpq_sgn(LSIM_QAT(&all, 6, 0)), 0);
  cr_assert_eq(mpq_sgn(LSIM_QAT(&all, 6, 1)), 0);
  lsim_qmat_clear(&all);
  lsim_qmat_clear(&D);
  fix2_fini(&f);
}

Test(fixture2, reordered_prefills_same_rows_by_uid) {
  static const int art[5] = {1, 0, 2, 3, 4};
  static const int swapped[5] = {0, 1, 2, 3, 4};
  fix2 orig, f;
  fix2_init(&orig, art);
  fix2_init(&f, swapped);
  cr_assert_eq(f.p.row_adapter[0], 1, "p0 now packs first");
  lsim_qmat D = LSIM_QMAT_INIT;
  qm(&D, 8, 2, F2_D);
  fix2_check_all(&f, &orig.p, &D);
  lsim_qmat_clear(&D);
  fix2_fini(&f);
  fix2_fini(&orig);
}

Test(fixture2, resident_slots_at_r3) {
  static const int packed[5] = {1, 0, 2, 3, 4};
  fix2 f;
  fix2_init(&f, packed);
  for (int m = 0; m < LSIM_SCALE__COUNT; m++) {
    lsim_qslot s[3];
    for (int k = 0; k < 3; k++) {
      OK(lsim_qslot_init(&s[k], 3, 3, 2, eb));
      OK(lsim_qslot_load(&s[k], &f.ad[k], m, eb));
      OK(lsim_qslot_check(&s[k], eb));
    }
    lsim_ref_trace t = LSIM_REF_TRACE_INIT;
    lsim_qmat dy = LSIM_QMAT_INIT;
    OK(lsim_ref_delta_slots(&f.p, &f.X, s, 3, m, LSIM_NUM_AUTO, &t, &dy, eb));
    qm_is(&dy, 8, 2, F2_D, "slots delta");
    check_z(&f, &f.p, &t, 3, m == LSIM_SCALE_FOLD_A);
    /* indexed order: sorted_rows without the sentinel group */
    int u = 0;
    for (int k = 0; k < f.p.T; k++)
      if (f.p.row_adapter[f.p.sorted_rows[k]] != BASE)
        cr_assert_eq(t.row[u++], f.p.sorted_rows[k]);
    lsim_qmat_clear(&dy);
    lsim_ref_trace_release(&t);
    for (int k = 0; k < 3; k++)
      lsim_qslot_release(&s[k]);
  }
  fix2_fini(&f);
}

Test(fixture2, trace_orders) {
  static const int packed[5] = {1, 0, 2, 3, 4};
  fix2 f;
  fix2_init(&f, packed);
  lsim_ref_trace t = LSIM_REF_TRACE_INIT;
  lsim_qmat dy = LSIM_QMAT_INIT;
  OK(lsim_ref_delta_ex(&f.p, &f.X, f.ad, 3, LSIM_REF_BUCKETED,
                       LSIM_SCALE_PASSED, LSIM_NUM_AUTO, &t, NULL, &dy, eb));
  for (int u = 0; u < 7; u++)
    cr_assert_eq(t.row[u], f.p.bucket_rows[u]);
  OK(lsim_ref_delta_ex(&f.p, &f.X, f.ad, 3, LSIM_REF_SGMV, LSIM_SCALE_PASSED,
                       LSIM_NUM_AUTO, &t, NULL, &dy, eb));
  for (int u = 0; u < 7; u++)
    cr_assert_eq(t.row[u], f.p.perm[u]);
  OK(lsim_ref_delta_ex(&f.p, &f.X, f.ad, 3, LSIM_REF_GROUPED,
                       LSIM_SCALE_PASSED, LSIM_NUM_AUTO, &t, NULL, &dy, eb));
  static const int grouped[7] = {2, 3, 4, 5, 0, 1, 7}; /* a, b, c */
  for (int u = 0; u < 7; u++)
    cr_assert_eq(t.row[u], grouped[u]);
  OK(lsim_ref_delta_ex(&f.p, &f.X, f.ad, 3, LSIM_REF_PER_ROW,
                       LSIM_SCALE_PASSED, LSIM_NUM_AUTO, &t, NULL, &dy, eb));
  static const int active[7] = {0, 1, 2, 3, 4, 5, 7};
  for (int u = 0; u < 7; u++)
    cr_assert_eq(t.row[u], active[u]);
  lsim_qmat_clear(&dy);
  lsim_ref_trace_release(&t);
  fix2_fini(&f);
}

/* ======================================================================== */
/* 3. negative cases                                                        */
/* ======================================================================== */

Test(parse, rationals_canonical) {
  static const struct {
    const char *in, *out;
  } ok[] = {{"0", "0"},       {"-0", "0"},         {"7", "7"},
            {"007", "7"},     {"6/4", "3/2"},      {"-10/4", "-5/2"},
            {"0/5", "0"},     {"-3/1", "-3"},      {"12/0012", "1"},
            {"123456789012345678901234567890/3",
             "41152263004115226300411522630"}};
  mpq_t q;
  mpq_init(q);
  for (int i = 0; i < NELEM(ok); i++) {
    OK(lsim_q_parse(q, ok[i].in, eb));
    char *s = lsim_q_str(q);
    cr_assert_str_eq(s, ok[i].out, "%s -> %s", ok[i].in, s);
    free(s);
  }
  mpq_clear(q);
}

Test(parse, rejects_with_exact_codes) {
  static const char *bad[] = {"abc", "1.5", "",    "1/",   "--1", " 1",
                              "1 ",  "+1",  "1/-2", "1e3", "/2",  "-",
                              "1/2/3", "0x10", "1//2", "-/1"};
  mpq_t q;
  mpq_init(q);
  mpq_set_ui(q, 42, 1);
  for (int i = 0; i < NELEM(bad); i++) {
    FAILS(LSIM_E_RATIONAL, lsim_q_parse(q, bad[i], eb));
    cr_assert_eq(mpq_cmp_ui(q, 42, 1), 0, "out changed by '%s'", bad[i]);
  }
  FAILS(LSIM_E_RATIONAL, lsim_q_parse(q, NULL, eb));
  FAILS(LSIM_E_ZERO_DENOM, lsim_q_parse(q, "1/0", eb));
  FAILS(LSIM_E_ZERO_DENOM, lsim_q_parse(q, "0/0", eb));
  FAILS(LSIM_E_ZERO_DENOM, lsim_q_parse(q, "-5/000", eb));
  cr_assert_eq(mpq_cmp_ui(q, 42, 1), 0);
  mpq_clear(q);
}

Test(names, paths_modes_and_codes) {
  for (int i = 0; i < LSIM_REF__COUNT; i++)
    cr_assert_eq(lsim_ref_path_find(lsim_ref_path_name(i)), i);
  cr_assert_eq(lsim_ref_path_find("bgmv"), -1);
  cr_assert_eq(lsim_ref_path_find(NULL), -1);
  cr_assert_str_eq(lsim_ref_path_name(LSIM_REF__COUNT), "?");
  cr_assert_str_eq(lsim_scale_mode_name(LSIM_SCALE_FOLD_B), "fold_b");
  cr_assert_str_eq(lsim_num_mode_name(LSIM_NUM_INT16), "int16");
  cr_assert_str_eq(lsim_err_name(LSIM_E_REF_UNKNOWN_ADAPTER),
                   "E_REF_UNKNOWN_ADAPTER");
  cr_assert_str_eq(lsim_err_name(LSIM_E_SLOT_RANK), "E_SLOT_RANK");
  cr_assert_eq(LSIM_E_REF_UNKNOWN_ADAPTER, -170);
  cr_assert_eq(LSIM_E_SLOT_RANK, -173);
}

Test(negative, padded_tail_nonzero) {
  static const int packed[5] = {1, 0, 2, 3, 4};
  fix2 f;
  fix2_init(&f, packed);
  lsim_qslot s[3];
  for (int k = 0; k < 3; k++) {
    OK(lsim_qslot_init(&s[k], 3, 3, 2, eb));
    OK(lsim_qslot_load(&s[k], &f.ad[k], LSIM_SCALE_PASSED, eb));
  }
  lsim_qmat dy = LSIM_QMAT_INIT;
  /* adapter c (rank 1): a stale value in A_bar's row 2 */
  mpq_set_si(LSIM_QAT(&s[2].A, 2, 1), 5, 1);
  FAILS(LSIM_E_PAD_NONZERO, lsim_qslot_check(&s[2], eb));
  FAILS(LSIM_E_PAD_NONZERO,
        lsim_ref_delta_slots(&f.p, &f.X, s, 3, LSIM_SCALE_PASSED,
                             LSIM_NUM_AUTO, NULL, &dy, eb));
  cr_assert_null(dy.v, "a failed call frees the output it allocated");
  /* reload zeroes before copying: the tail is clean again */
  OK(lsim_qslot_load(&s[2], &f.ad[2], LSIM_SCALE_PASSED, eb));
  OK(lsim_qslot_check(&s[2], eb));
  /* adapter a (rank 2): a stale value in B_bar's column 2 */
  mpq_set_si(LSIM_QAT(&s[0].B, 1, 2), -1, 3);
  FAILS(LSIM_E_PAD_NONZERO,
        lsim_ref_delta_slots(&f.p, &f.X, s, 3, LSIM_SCALE_PASSED,
                             LSIM_NUM_GMP, NULL, &dy, eb));
  lsim_qslot_reset(&s[0]);
  OK(lsim_qslot_check(&s[0], eb)); /* an empty slot is all zero */
  cr_assert_eq(s[0].adapter, BASE);
  OK(lsim_qslot_load(&s[0], &f.ad[0], LSIM_SCALE_PASSED, eb));
  OK(lsim_ref_delta_slots(&f.p, &f.X, s, 3, LSIM_SCALE_PASSED, LSIM_NUM_AUTO,
                          NULL, &dy, eb));
  qm_is(&dy, 8, 2, F2_D, "clean slots");
  lsim_qmat_clear(&dy);
  for (int k = 0; k < 3; k++)
    lsim_qslot_release(&s[k]);
  fix2_fini(&f);
}

Test(negative, rank_above_slot) {
  static const int packed[5] = {1, 0, 2, 3, 4};
  fix2 f;
  fix2_init(&f, packed);
  lsim_qslot s;
  OK(lsim_qslot_init(&s, 2, 3, 2, eb));
  FAILS(LSIM_E_SLOT_RANK, lsim_qslot_load(&s, &f.ad[1], LSIM_SCALE_PASSED,
                                           eb)); /* b has rank 3 */
  cr_assert_eq(s.adapter, BASE, "a failed load leaves the slot empty");
  lsim_qslot_release(&s);
  /* a plan whose physical rank is below a logical rank */
  lsim_rowplan q;
  OK(lsim_rowplan_copy(&q, &f.p, eb));
  q.phys_rank = 2;
  lsim_qmat dy = LSIM_QMAT_INIT;
  FAILS(LSIM_E_SLOT_RANK, lsim_ref_delta(&q, &f.X, f.ad, 3, LSIM_REF_PADDED,
                                         LSIM_SCALE_PASSED, &dy, eb));
  cr_assert_null(dy.v);
  lsim_rowplan_release(&q);
  fix2_fini(&f);
}

Test(negative, orientation_swapped) {
  fix1 f;
  fix1_init(&f);
  lsim_qadapter bad[2];
  /* A given as [d_in][r], i.e. A^T */
  adapter(&bad[0], 1, 2, 4, 3, "1 0 1 0 | 0 1 0 1", "1 0 | 0 1 | 1 1", "1/2");
  lsim_qmat_clear(&bad[0].A);
  qm(&bad[0].A, 4, 2, "1 0 | 0 1 | 1 0 | 0 1");
  bad[1] = f.ad[1];
  lsim_qmat dy = LSIM_QMAT_INIT;
  for (int path = 0; path < LSIM_REF__COUNT; path++)
    FAILS(LSIM_E_ORIENTATION, lsim_ref_delta(&f.p, &f.X, bad, 2, path,
                                             LSIM_SCALE_PASSED, &dy, eb));
  FAILS(LSIM_E_ORIENTATION, lsim_qadapter_check(&bad[0], 4, 3, eb));
  lsim_qadapter_clear(&bad[0]);
  /* B given as [r][d_out] */
  adapter(&bad[0], 1, 2, 4, 3, "1 0 1 0 | 0 1 0 1", "1 0 | 0 1 | 1 1", "1/2");
  lsim_qmat_clear(&bad[0].B);
  qm(&bad[0].B, 2, 3, "1 0 1 | 0 1 1");
  FAILS(LSIM_E_ORIENTATION, lsim_qadapter_check(&bad[0], 4, 3, eb));
  FAILS(LSIM_E_ORIENTATION, lsim_ref_delta_all(&f.p, &f.X, bad, 2, &dy, eb));
  lsim_qslot s;
  OK(lsim_qslot_init(&s, 2, 4, 3, eb));
  FAILS(LSIM_E_ORIENTATION,
        lsim_qslot_load(&s, &bad[0], LSIM_SCALE_PASSED, eb));
  lsim_qslot_release(&s);
  lsim_qadapter_clear(&bad[0]);
  /* W given as [d_in][d_out] to a preshaped output */
  lsim_qmat wt = LSIM_QMAT_INIT, y = LSIM_QMAT_INIT;
  qm(&wt, 4, 3, "1 0 1 | 0 1 1 | 0 1 0 | 1 0 0");
  OK(lsim_qmat_init(&y, 8, 3, eb));
  FAILS(LSIM_E_ORIENTATION, lsim_ref_base(&f.X, &wt, &y, eb));
  lsim_qmat_clear(&y);
  FAILS(LSIM_E_SHAPE, lsim_ref_base(&f.X, &wt, &y, eb));
  lsim_qmat_clear(&wt);
  cr_assert_null(dy.v);
  fix1_fini(&f);
}

Test(negative, shapes) {
  fix1 f;
  fix1_init(&f);
  lsim_qmat x7 = LSIM_QMAT_INIT, x5 = LSIM_QMAT_INIT, dy = LSIM_QMAT_INIT;
  OK(lsim_qmat_init(&x7, 7, 4, eb)); /* plan has 8 rows */
  OK(lsim_qmat_init(&x5, 8, 5, eb)); /* d_in 5, factors have 4 */
  FAILS(LSIM_E_SHAPE, lsim_ref_delta(&f.p, &x7, f.ad, 2, LSIM_REF_SGMV,
                                     LSIM_SCALE_PASSED, &dy, eb));
  FAILS(LSIM_E_SHAPE, lsim_ref_delta(&f.p, &x5, f.ad, 2, LSIM_REF_SGMV,
                                     LSIM_SCALE_PASSED, &dy, eb));
  OK(lsim_qmat_init(&dy, 8, 4, eb)); /* d_out is 3 */
  FAILS(LSIM_E_SHAPE, lsim_ref_delta(&f.p, &f.X, f.ad, 2, LSIM_REF_PER_ROW,
                                     LSIM_SCALE_PASSED, &dy, eb));
  cr_assert_not_null(dy.v, "a caller-shaped output is left to the caller");
  lsim_qmat_clear(&dy);
  /* adapters disagree on d_out */
  lsim_qadapter two[2];
  two[0] = f.ad[0];
  adapter(&two[1], 2, 2, 4, 2, "1 1 0 0 | 0 0 1 1", "1 1 | 1 -1", "2");
  FAILS(LSIM_E_SHAPE, lsim_ref_delta(&f.p, &f.X, two, 2, LSIM_REF_GROUPED,
                                     LSIM_SCALE_PASSED, &dy, eb));
  lsim_qadapter_clear(&two[1]);
  /* rank field disagrees with the factors */
  adapter(&two[1], 2, 2, 4, 3, "1 1 0 0 | 0 0 1 1", "1 1 | 1 -1 | 0 1", "2");
  two[1].rank = 3;
  FAILS(LSIM_E_SHAPE, lsim_ref_delta(&f.p, &f.X, two, 2, LSIM_REF_GROUPED,
                                     LSIM_SCALE_PASSED, &dy, eb));
  two[1].rank = 2;
  lsim_qadapter_clear(&two[1]);
  /* base projection */
  lsim_qmat w = LSIM_QMAT_INIT, y = LSIM_QMAT_INIT;
  qm(&w, 3, 5, "1 0 0 1 0 | 0 1 1 0 0 | 1 1 0 0 0");
  FAILS(LSIM_E_SHAPE, lsim_ref_base(&f.X, &w, &y, eb));
  OK(lsim_qmat_init(&y, 8, 2, eb));
  FAILS(LSIM_E_SHAPE, lsim_ref_base(&f.X, &f.W, &y, eb));
  lsim_qmat_clear(&y);
  lsim_qmat_clear(&w);
  /* add and compare */
  lsim_qmat a = LSIM_QMAT_INIT, b = LSIM_QMAT_INIT;
  OK(lsim_qmat_init(&a, 2, 2, eb));
  OK(lsim_qmat_init(&b, 2, 3, eb));
  FAILS(LSIM_E_SHAPE, lsim_qmat_add(&a, &b, eb));
  FAILS(LSIM_E_SHAPE, lsim_ref_compare(&a, &b, "x", eb));
  lsim_qmat_clear(&a);
  FAILS(LSIM_E_SHAPE, lsim_qmat_init(&a, -1, 2, eb));
  cr_assert_null(a.v);
  lsim_qmat_clear(&b);
  lsim_qmat_clear(&x7);
  lsim_qmat_clear(&x5);
  fix1_fini(&f);
}

Test(negative, scale_applied_twice_or_never) {
  static const int packed[5] = {1, 0, 2, 3, 4};
  fix2 f;
  fix2_init(&f, packed);
  lsim_qslot s[3];
  lsim_qmat dy = LSIM_QMAT_INIT;
  for (int k = 0; k < 3; k++) {
    OK(lsim_qslot_init(&s[k], 3, 3, 2, eb));
    OK(lsim_qslot_load(&s[k], &f.ad[k], LSIM_SCALE_FOLD_B, eb));
    cr_assert_eq(s[k].placement, LSIM_SCALE_FOLD_B);
  }
  /* folded into B, then passed again at launch: twice */
  FAILS(LSIM_E_SCALE_PLACEMENT,
        lsim_ref_delta_slots(&f.p, &f.X, s, 3, LSIM_SCALE_PASSED,
                             LSIM_NUM_AUTO, NULL, &dy, eb));
  /* a folded launch of folded slots is right (either fold) */
  OK(lsim_ref_delta_slots(&f.p, &f.X, s, 3, LSIM_SCALE_FOLD_B, LSIM_NUM_AUTO,
                          NULL, &dy, eb));
  qm_is(&dy, 8, 2, F2_D, "fold_b");
  OK(lsim_ref_delta_slots(&f.p, &f.X, s, 3, LSIM_SCALE_FOLD_A, LSIM_NUM_AUTO,
                          NULL, &dy, eb));
  qm_is(&dy, 8, 2, F2_D, "fold_b slots, folded launch");
  /* unscaled slots launched as folded: never applied */
  OK(lsim_qslot_load(&s[1], &f.ad[1], LSIM_SCALE_PASSED, eb));
  FAILS(LSIM_E_SCALE_PLACEMENT,
        lsim_ref_delta_slots(&f.p, &f.X, s, 3, LSIM_SCALE_FOLD_B,
                             LSIM_NUM_AUTO, NULL, &dy, eb));
  /* a fold_a slot under a passed launch: twice */
  OK(lsim_qslot_load(&s[1], &f.ad[1], LSIM_SCALE_FOLD_A, eb));
  FAILS(LSIM_E_SCALE_PLACEMENT,
        lsim_ref_delta_slots(&f.p, &f.X, s, 3, LSIM_SCALE_PASSED,
                             LSIM_NUM_GMP, NULL, &dy, eb));
  /* what the check prevents: s_b applied twice really changes the rows */
  mpq_t s2;
  mpq_init(s2);
  mpq_mul(s2, f.ad[1].scale, f.ad[1].scale);
  cr_assert(mpq_cmp_ui(s2, 1, 1) != 0);
  mpq_clear(s2);
  lsim_qmat_clear(&dy);
  for (int k = 0; k < 3; k++)
    lsim_qslot_release(&s[k]);
  fix2_fini(&f);
}

Test(negative, unknown_duplicate_and_wrong_rank_adapters) {
  fix1 f;
  fix1_init(&f);
  lsim_qmat dy = LSIM_QMAT_INIT;
  for (int path = 0; path < LSIM_REF__COUNT; path++)
    FAILS(LSIM_E_REF_UNKNOWN_ADAPTER,
          lsim_ref_delta(&f.p, &f.X, f.ad, 1, path, LSIM_SCALE_PASSED, &dy,
                         eb)); /* adapter 2 missing */
  lsim_qadapter two[2] = {f.ad[0], f.ad[0]};
  FAILS(LSIM_E_REF_DUP_ADAPTER,
        lsim_ref_delta(&f.p, &f.X, two, 2, LSIM_REF_SGMV, LSIM_SCALE_PASSED,
                       &dy, eb));
  /* an adapter whose rank differs from the plan's logical rank */
  lsim_qadapter r3[2];
  r3[0] = f.ad[0];
  adapter(&r3[1], 2, 3, 4, 3, "1 1 0 0 | 0 0 1 1 | 1 0 0 0",
          "1 1 0 | 1 -1 0 | 0 1 0", "2");
  FAILS(LSIM_E_REF_RANK, lsim_ref_delta(&f.p, &f.X, r3, 2, LSIM_REF_INDEXED,
                                        LSIM_SCALE_PASSED, &dy, eb));
  lsim_qadapter_clear(&r3[1]);
  /* extra, unused adapters are fine */
  lsim_qadapter three[3] = {f.ad[1], f.ad[0], f.ad[0]};
  adapter(&three[2], 9, 1, 4, 3, "1 1 1 1", "1 | 1 | 1", "5");
  OK(lsim_ref_delta_all(&f.p, &f.X, three, 3, &dy, eb));
  qm_is(&dy, 8, 3, F1_DY, "extra adapters");
  lsim_qadapter_clear(&three[2]);
  lsim_qmat_clear(&dy);
  FAILS(LSIM_E_USAGE, lsim_ref_delta(&f.p, &f.X, f.ad, 2, LSIM_REF__COUNT,
                                     LSIM_SCALE_PASSED, &dy, eb));
  FAILS(LSIM_E_USAGE, lsim_ref_delta(&f.p, &f.X, f.ad, 2, LSIM_REF_SGMV, 7,
                                     &dy, eb));
  fix1_fini(&f);
}

/* One valid plan, one field changed: each family refuses with its code. */
Test(negative, malformed_plans_fail_closed) {
  fix1 f;
  fix1_init(&f);
  lsim_qmat dy = LSIM_QMAT_INIT;
  lsim_rowplan q;
#define MUTATE(stmt, path, code)                                            \
  do {                                                                      \
    OK(lsim_rowplan_copy(&q, &f.p, eb));                                    \
    stmt;                                                                   \
    FAILS(code, lsim_ref_delta(&q, &f.X, f.ad, 2, path, LSIM_SCALE_PASSED, \
                               &dy, eb));                                   \
    cr_assert_null(dy.v);                                                   \
    lsim_rowplan_release(&q);                                               \
  } while (0)
  /* perm: duplicate, out of bounds, a base row, a wrong adapter */
  MUTATE(q.perm[1] = q.perm[0], LSIM_REF_SGMV, LSIM_E_SCATTER);
  MUTATE(q.perm[2] = 8, LSIM_REF_SGMV, LSIM_E_PLAN_ROW_BOUNDS);
  MUTATE(q.perm[2] = 3, LSIM_REF_SGMV, LSIM_E_BASE_DELTA);
  MUTATE(q.perm[2] = 1, LSIM_REF_SGMV, LSIM_E_PLAN_SEG_ADAPTER);
  MUTATE(q.seg_offsets[1] = 7, LSIM_REF_SGMV, LSIM_E_PLAN_OFFSETS);
  MUTATE(q.seg_adapter[1] = 5, LSIM_REF_SGMV, LSIM_E_REF_UNKNOWN_ADAPTER);
  MUTATE(q.nactive = 5, LSIM_REF_SGMV, LSIM_E_SCATTER);
  /* indexed: an active row in the sentinel group, a base row in a group */
  MUTATE((q.sorted_rows[1] = 0, q.sorted_rows[2] = 7), LSIM_REF_INDEXED,
         LSIM_E_SCATTER);
  MUTATE(q.sorted_rows[2] = 7, LSIM_REF_INDEXED, LSIM_E_BASE_DELTA);
  MUTATE(q.sorted_rows[3] = q.sorted_rows[2], LSIM_REF_PADDED,
         LSIM_E_SCATTER);
  MUTATE(q.id_starts[3] = 7, LSIM_REF_INDEXED, LSIM_E_PLAN_INDEXED);
  MUTATE(q.sorted_rows[5] = -4, LSIM_REF_INDEXED, LSIM_E_PLAN_ROW_BOUNDS);
  /* buckets */
  MUTATE(q.bucket_rank[0] = 3, LSIM_REF_BUCKETED, LSIM_E_PLAN_BUCKET);
  MUTATE(q.bucket_rows[0] = 3, LSIM_REF_BUCKETED, LSIM_E_BASE_DELTA);
  MUTATE(q.bucket_rows[0] = q.bucket_rows[1], LSIM_REF_BUCKETED,
         LSIM_E_SCATTER);
  /* row metadata: the rank the plan froze disagrees with the factors */
  MUTATE(q.row_rank[0] = 1, LSIM_REF_PER_ROW, LSIM_E_REF_RANK);
  MUTATE(q.row_adapter[3] = 4, LSIM_REF_GROUPED, LSIM_E_REF_UNKNOWN_ADAPTER);
#undef MUTATE
  fix1_fini(&f);
}

Test(negative, compare_names_first_difference) {
  lsim_qmat a = LSIM_QMAT_INIT, b = LSIM_QMAT_INIT;
  qm(&a, 2, 2, "1 2 3 4");
  qm(&b, 2, 2, "1 2 3 9/2");
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_ref_compare(&a, &b, "path sgmv", &eb),
               LSIM_E_PATH_MISMATCH);
  cr_assert(strstr(eb.msg, "path sgmv") && strstr(eb.msg, "row 1 column 1") &&
                strstr(eb.msg, "9/2"),
            "%s", eb.msg);
  cr_assert_eq(lsim_ref_compare(&a, &a, NULL, &eb), 0);
  lsim_qmat_clear(&a);
  lsim_qmat_clear(&b);
}

Test(negative, forced_integer_tier_overflows) {
  fix1 f;
  fix1_init(&f);
  /* 2^62 in X: products cannot be bounded in int64 */
  mpq_set_str(LSIM_QAT(&f.X, 0, 0), "4611686018427387904", 10);
  lsim_qmat dy = LSIM_QMAT_INIT, g = LSIM_QMAT_INIT;
  FAILS(LSIM_E_OVERFLOW,
        lsim_ref_delta_ex(&f.p, &f.X, f.ad, 2, LSIM_REF_SGMV,
                          LSIM_SCALE_PASSED, LSIM_NUM_INT64, NULL, NULL, &dy,
                          eb));
  int used = -1;
  OK(lsim_ref_delta_ex(&f.p, &f.X, f.ad, 2, LSIM_REF_SGMV, LSIM_SCALE_PASSED,
                       LSIM_NUM_AUTO, NULL, &used, &dy, eb));
  cr_assert_eq(used, LSIM_NUM_GMP, "auto falls back to gmp");
  OK(lsim_ref_delta_ex(&f.p, &f.X, f.ad, 2, LSIM_REF_PER_ROW,
                       LSIM_SCALE_PASSED, LSIM_NUM_GMP, NULL, NULL, &g, eb));
  OK(lsim_ref_compare(&g, &dy, "auto vs gmp", eb));
  /* x0 = [2^62,0,1,0]: z = x A_1^T = [2^62 + 1, 0], D = 1/2 z B_1^T */
  q_is(&dy, 0, 0, "4611686018427387905/2", "delta");
  /* base: 4 terms of 2^62 * 1 cannot be bounded either; 2^60 can, but
  ** only in int64 */
  lsim_qmat y = LSIM_QMAT_INIT;
  FAILS(LSIM_E_OVERFLOW, lsim_ref_base_ex(&f.X, &f.W, LSIM_NUM_INT64, NULL,
                                          &y, eb));
  OK(lsim_ref_base_ex(&f.X, &f.W, LSIM_NUM_AUTO, &used, &y, eb));
  cr_assert_eq(used, LSIM_NUM_GMP);
  q_is(&y, 0, 0, "4611686018427387904", "Y");
  lsim_qmat_clear(&y);
  mpq_set_str(LSIM_QAT(&f.X, 0, 0), "1152921504606846976", 10);
  FAILS(LSIM_E_OVERFLOW, lsim_ref_base_ex(&f.X, &f.W, LSIM_NUM_INT16, NULL,
                                          &y, eb));
  cr_assert_null(y.v);
  OK(lsim_ref_base_ex(&f.X, &f.W, LSIM_NUM_AUTO, &used, &y, eb));
  cr_assert_eq(used, LSIM_NUM_INT64);
  q_is(&y, 0, 0, "1152921504606846976", "Y");
  lsim_qmat_clear(&y);
  lsim_qmat_clear(&dy);
  lsim_qmat_clear(&g);
  fix1_fini(&f);
}

/* ======================================================================== */
/* 4. properties over seeded random batches                                 */
/* ======================================================================== */

typedef struct rbatch {
  lsim_rowplan p;
  lsim_qmat X;
  lsim_qadapter *ad;
  int nad, d_in, d_out;
} rbatch;

/* A random rational: integers in [-mag, mag], or p/q with q in 1..qmax. */
static void rq(lsim_rng *r, mpq_ptr q, int mag, int qmax) {
  long num = (long)lsim_rng_below(r, 2 * (uint64_t)mag + 1) - mag;
  unsigned long den = qmax > 1 ? 1 + (unsigned long)lsim_rng_below(r, qmax) : 1;
  mpq_set_si(q, num, den);
  mpq_canonicalize(q);
}

static void rq_fill(lsim_rng *r, lsim_qmat *m, int mag, int qmax) {
  for (size_t k = 0; k < (size_t)m->rows * (size_t)m->cols; k++)
    rq(r, m->v[k], mag, qmax);
}

static void shuffle(lsim_rng *r, int *a, int n) {
  for (int i = n - 1; i > 0; i--) {
    int j = (int)lsim_rng_below(r, (uint64_t)i + 1), t = a[i];
    a[i] = a[j];
    a[j] = t;
  }
}

static void rbatch_make(rbatch *b, uint64_t seed, int mag, int qmax) {
  lsim_rng r;
  lsim_rng_init(&r, seed, LSIM_RNG_TENSORS);
  memset(b, 0, sizeof *b);
  b->d_in = 1 + (int)lsim_rng_below(&r, 7);
  b->d_out = 1 + (int)lsim_rng_below(&r, 6);
  b->nad = 1 + (int)lsim_rng_below(&r, 5);
  b->ad = calloc((size_t)b->nad, sizeof *b->ad);
  int maxr = 0;
  for (int k = 0; k < b->nad; k++) {
    lsim_errbuf eb = LSIM_ERRBUF_INIT;
    int id = 3 * k + (int)lsim_rng_below(&r, 3); /* sparse, distinct */
    int rank = 1 + (int)lsim_rng_below(&r, 4);
    cr_assert_eq(lsim_qadapter_init(&b->ad[k], id, rank, b->d_in, b->d_out,
                                    &eb),
                 0);
    rq_fill(&r, &b->ad[k].A, mag, qmax);
    rq_fill(&r, &b->ad[k].B, mag, qmax);
    rq(&r, b->ad[k].scale, 5, 4);
    if (mpq_sgn(b->ad[k].scale) == 0)
      mpq_set_ui(b->ad[k].scale, 3, 2);
    if (rank > maxr)
      maxr = rank;
  }
  /* shuffle the supplied order: lookup is by id */
  for (int k = b->nad - 1; k > 0; k--) {
    int j = (int)lsim_rng_below(&r, (uint64_t)k + 1);
    lsim_qadapter t = b->ad[k];
    b->ad[k] = b->ad[j];
    b->ad[j] = t;
  }
  int n = 1 + (int)lsim_rng_below(&r, 10);
  lsim_plan_entry e[16];
  int pre[16], dec[16], np = 0, nd = 0;
  for (int i = 0; i < n; i++) {
    int phase = lsim_rng_below(&r, 2) ? PRE : DEC;
    int rows = phase == PRE ? 1 + (int)lsim_rng_below(&r, 5) : 1;
    if (lsim_rng_below(&r, 4) == 0) {
      e[i] = ent(1000 + i, BASE, 0, phase, rows);
    } else {
      const lsim_qadapter *a = &b->ad[lsim_rng_below(&r, (uint64_t)b->nad)];
      e[i] = ent(1000 + i, a->id, a->rank, phase, rows);
    }
    if (phase == PRE)
      pre[np++] = i;
    else
      dec[nd++] = i;
  }
  shuffle(&r, pre, np);
  shuffle(&r, dec, nd);
  int packed[16];
  for (int i = 0; i < np; i++)
    packed[i] = pre[i];
  for (int i = 0; i < nd; i++)
    packed[np + i] = dec[i];
  int R = lsim_rng_below(&r, 2) ? 0 : maxr + (int)lsim_rng_below(&r, 3);
  OK(lsim_rowplan_build(&b->p, e, n, packed, R, eb));
  OK(lsim_qmat_init(&b->X, b->p.T, b->d_in, eb));
  rq_fill(&r, &b->X, mag, qmax);
}

static void rbatch_free(rbatch *b) {
  lsim_rowplan_release(&b->p);
  lsim_qmat_clear(&b->X);
  for (int k = 0; k < b->nad; k++)
    lsim_qadapter_clear(&b->ad[k]);
  free(b->ad);
}

/* The test's own oracle: the defining formula, row by row, in mpq. */
static void oracle(const rbatch *b, lsim_qmat *out) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_qmat_init(out, b->p.T, b->d_out, &eb), 0);
  mpq_t z, t;
  mpq_init(z);
  mpq_init(t);
  for (int i = 0; i < b->p.T; i++) {
    const lsim_qadapter *a = NULL;
    for (int k = 0; k < b->nad; k++)
      if (b->ad[k].id == b->p.row_adapter[i])
        a = &b->ad[k];
    if (!a)
      continue;
    for (int k = 0; k < a->rank; k++) {
      mpq_set_ui(z, 0, 1);
      for (int c = 0; c < b->d_in; c++) {
        mpq_mul(t, LSIM_QAT(&b->X, i, c), LSIM_QAT(&a->A, k, c));
        mpq_add(z, z, t);
      }
      mpq_mul(z, z, a->scale);
      for (int o = 0; o < b->d_out; o++) {
        mpq_mul(t, z, LSIM_QAT(&a->B, o, k));
        mpq_add(LSIM_QAT(out, i, o), LSIM_QAT(out, i, o), t);
      }
    }
  }
  mpq_clear(z);
  mpq_clear(t);
}

static void property_run(int mag, int qmax, uint64_t seed0, int count) {
  for (uint64_t seed = seed0; seed < seed0 + (uint64_t)count; seed++) {
    rbatch b;
    rbatch_make(&b, seed, mag, qmax);
    lsim_qmat want = LSIM_QMAT_INIT, all = LSIM_QMAT_INIT;
    oracle(&b, &want);
    OK(lsim_ref_delta_all(&b.p, &b.X, b.ad, b.nad, &all, eb));
    OK(lsim_ref_compare(&want, &all, "delta_all vs oracle", eb));
    for (int i = 0; i < b.p.T; i++)
      if (b.p.row_adapter[i] == BASE)
        for (int j = 0; j < b.d_out; j++)
          cr_assert_eq(mpq_sgn(LSIM_QAT(&all, i, j)), 0, "base row %d", i);
    /* every family in the gmp tier and the forced int64 tier */
    for (int path = 0; path < LSIM_REF__COUNT; path++)
      for (int m = 0; m < LSIM_SCALE__COUNT; m++) {
        lsim_qmat g = LSIM_QMAT_INIT, w = LSIM_QMAT_INIT;
        int used = -1;
        OK(lsim_ref_delta_ex(&b.p, &b.X, b.ad, b.nad, path, m, LSIM_NUM_GMP,
                             NULL, &used, &g, eb));
        cr_assert_eq(used, LSIM_NUM_GMP);
        OK(lsim_ref_compare(&want, &g, "gmp tier", eb));
        OK(lsim_ref_delta_ex(&b.p, &b.X, b.ad, b.nad, path, m, LSIM_NUM_INT64,
                             NULL, &used, &w, eb));
        cr_assert_eq(used, LSIM_NUM_INT64);
        OK(lsim_ref_compare(&g, &w, "int64 tier", eb));
        lsim_qmat_clear(&g);
        lsim_qmat_clear(&w);
      }
    lsim_qmat_clear(&want);
    lsim_qmat_clear(&all);
    rbatch_free(&b);
  }
}

Test(property, random_integer_batches) { property_run(9, 1, 1, 150); }

Test(property, random_rational_batches) { property_run(7, 6, 5000, 120); }

/* Base projection tiers on random sizes (every padding remainder) and
** magnitudes (including several K chunks and the int64-only range). */
Test(property, base_tiers_agree) {
  lsim_rng r;
  lsim_rng_init(&r, 77, LSIM_RNG_TENSORS);
  static const int mags[] = {1, 100, 5000, 32767, 40000};
  for (int it = 0; it < 40; it++) {
    int M = 1 + (int)lsim_rng_below(&r, 9);
    int N = 1 + (int)lsim_rng_below(&r, 8);
    int K = 1 + (int)lsim_rng_below(&r, it < 30 ? 40 : 400);
    int mag = mags[it % NELEM(mags)];
    int qmax = it % 7 == 3 ? 4 : 1;
    lsim_qmat X = LSIM_QMAT_INIT, W = LSIM_QMAT_INIT;
    OK(lsim_qmat_init(&X, M, K, eb));
    OK(lsim_qmat_init(&W, N, K, eb));
    rq_fill(&r, &X, mag, qmax);
    rq_fill(&r, &W, mag, qmax);
    lsim_qmat g = LSIM_QMAT_INIT;
    OK(lsim_ref_base_ex(&X, &W, LSIM_NUM_GMP, NULL, &g, eb));
    static const int tiers[] = {LSIM_NUM_AUTO, LSIM_NUM_INT64, LSIM_NUM_INT16,
                                LSIM_NUM_INT16_SCALAR};
    for (int t = 0; t < NELEM(tiers); t++) {
      lsim_qmat y = LSIM_QMAT_INIT;
      lsim_errbuf eb = LSIM_ERRBUF_INIT;
      int used = -1;
      lsim_err rc = lsim_ref_base_ex(&X, &W, tiers[t], &used, &y, &eb);
      int i16ok = mag <= 32767 && 16 * (int64_t)mag * mag <= INT32_MAX;
      if ((tiers[t] == LSIM_NUM_INT16 || tiers[t] == LSIM_NUM_INT16_SCALAR) &&
          !i16ok && qmax == 1) {
        cr_assert_eq(rc, LSIM_E_OVERFLOW, "%s", eb.msg);
        continue;
      }
      if (rc == LSIM_E_OVERFLOW && qmax > 1)
        continue; /* scaled numerators may leave the int16 range */
      cr_assert_eq(rc, 0, "%s: %s", lsim_num_mode_name(tiers[t]), eb.msg);
      if (tiers[t] == LSIM_NUM_AUTO && qmax == 1)
        cr_assert_eq(used, i16ok ? LSIM_NUM_INT16 : LSIM_NUM_INT64);
      OK(lsim_ref_compare(&g, &y, lsim_num_mode_name(tiers[t]), eb));
      lsim_qmat_clear(&y);
    }
    lsim_qmat_clear(&g);
    lsim_qmat_clear(&X);
    lsim_qmat_clear(&W);
  }
}

/* A wider batch: the integer tier and gmp agree at realistic shapes. */
Test(property, wide_batch_int_equals_gmp) {
  lsim_rng r;
  lsim_rng_init(&r, 4242, LSIM_RNG_TENSORS);
  const int d_in = 96, d_out = 80, nad = 6;
  lsim_qadapter ad[6];
  for (int k = 0; k < nad; k++) {
    OK(lsim_qadapter_init(&ad[k], 10 + k, 1 + k * 3, d_in, d_out, eb));
    rq_fill(&r, &ad[k].A, 1000, 1);
    rq_fill(&r, &ad[k].B, 1000, 1);
    mpq_set_si(ad[k].scale, (long)k - 2, 1 + (unsigned long)(k % 3));
    mpq_canonicalize(ad[k].scale);
  }
  lsim_plan_entry e[24];
  for (int i = 0; i < 24; i++) {
    int k = (int)lsim_rng_below(&r, nad + 1);
    int phase = i < 6 ? PRE : DEC;
    e[i] = ent(i, k == nad ? BASE : ad[k].id, k == nad ? 0 : ad[k].rank, phase,
               phase == PRE ? 1 + i : 1);
  }
  lsim_rowplan p;
  OK(lsim_rowplan_build(&p, e, 24, NULL, 20, eb));
  lsim_qmat X = LSIM_QMAT_INIT;
  OK(lsim_qmat_init(&X, p.T, d_in, eb));
  rq_fill(&r, &X, 1000, 1);
  for (int path = 0; path < LSIM_REF__COUNT; path++) {
    lsim_qmat g = LSIM_QMAT_INIT, w = LSIM_QMAT_INIT;
    int used = -1;
    OK(lsim_ref_delta_ex(&p, &X, ad, nad, path, LSIM_SCALE_FOLD_B, LSIM_NUM_GMP,
                         NULL, NULL, &g, eb));
    OK(lsim_ref_delta_ex(&p, &X, ad, nad, path, LSIM_SCALE_FOLD_B,
                         LSIM_NUM_AUTO, NULL, &used, &w, eb));
    cr_assert_eq(used, LSIM_NUM_INT64);
    OK(lsim_ref_compare(&g, &w, lsim_ref_path_name(path), eb));
    lsim_qmat_clear(&g);
    lsim_qmat_clear(&w);
  }
  lsim_qmat_clear(&X);
  lsim_rowplan_release(&p);
  for (int k = 0; k < nad; k++)
    lsim_qadapter_clear(&ad[k]);
}

Test(property, all_base_and_empty_batches) {
  lsim_plan_entry e[3] = {ent(1, BASE, 0, PRE, 3), ent(2, BASE, 0, DEC, 1),
                          ent(3, BASE, 0, DEC, 1)};
  lsim_rowplan p;
  OK(lsim_rowplan_build(&p, e, 3, NULL, 0, eb));
  lsim_qmat X = LSIM_QMAT_INIT, dy = LSIM_QMAT_INIT;
  qm(&X, 5, 2, "1 2 3 4 5 6 7 8 9 10");
  OK(lsim_qmat_init(&dy, 5, 4, eb)); /* no adapter: d_out from the output */
  OK(lsim_ref_delta_all(&p, &X, NULL, 0, &dy, eb));
  for (int k = 0; k < 20; k++)
    cr_assert_eq(mpq_sgn(dy.v[k]), 0);
  lsim_qmat_clear(&dy);
  lsim_qmat_clear(&X);
  lsim_rowplan_release(&p);
}

/* ======================================================================== */
/* 5. lsim_ref_delta_all: one pass, and what it must still catch            */
/* ======================================================================== */

/* With one family under one placement made wrong (lsim_ref__fault), every
** run of lsim_ref_delta_all fails with E_PATH_MISMATCH naming it (or, when
** the reference per_row/passed itself is the wrong one, the first family
** compared with it), in the one-pass int tier and in gmp, with and without
** a result; the one-pass answer is never taken for such a batch. */
static void wrong_family_caught(const lsim_rowplan *p, const lsim_qmat *X,
                                const lsim_qadapter *ad, int nad) {
  for (int path = 0; path < LSIM_REF__COUNT; path++)
    for (int m = 0; m < LSIM_SCALE__COUNT; m++) {
      char want[64];
      if (path == LSIM_REF_PER_ROW && m == LSIM_SCALE_PASSED)
        snprintf(want, sizeof want, "path per_row, scale fold_a");
      else
        snprintf(want, sizeof want, "path %s, scale %s",
                 lsim_ref_path_name(path), lsim_scale_mode_name(m));
      lsim_ref__fault(path, m);
      long before = lsim_ref__one_pass_count();
      static const int nums[] = {LSIM_NUM_AUTO, LSIM_NUM_GMP};
      for (int k = 0; k < NELEM(nums); k++) {
        lsim_qmat all = LSIM_QMAT_INIT;
        lsim_errbuf e = LSIM_ERRBUF_INIT;
        cr_assert_eq(lsim_ref_delta_all_ex(p, X, ad, nad, nums[k], &all, &e),
                     LSIM_E_PATH_MISMATCH, "%s/%s tier %s: %s",
                     lsim_ref_path_name(path), lsim_scale_mode_name(m),
                     lsim_num_mode_name(nums[k]), e.msg);
        cr_assert(strstr(e.msg, want), "want '%s' in: %s", want, e.msg);
        cr_assert_null(all.v, "a failed run leaves no result");
      }
      lsim_errbuf e = LSIM_ERRBUF_INIT;
      cr_assert_eq(lsim_ref_delta_all(p, X, ad, nad, NULL, &e),
                   LSIM_E_PATH_MISMATCH, "%s", e.msg);
      cr_assert_eq(lsim_ref__one_pass_count(), before,
                   "the one pass answered a batch with a wrong family");
    }
  lsim_ref__fault(-1, -1);
  long before = lsim_ref__one_pass_count();
  OK(lsim_ref_delta_all(p, X, ad, nad, NULL, eb));
  cr_assert_eq(lsim_ref__one_pass_count(), before + 1,
               "without the fault the one pass answers");
}

Test(all, a_wrong_family_is_caught) {
  fix1 f;
  fix1_init(&f);
  wrong_family_caught(&f.p, &f.X, f.ad, 2);
  fix1_fini(&f);
  static const int packed[5] = {1, 0, 2, 3, 4};
  fix2 g; /* mixed ranks, rational factors, physical rank 3 */
  fix2_init(&g, packed);
  wrong_family_caught(&g.p, &g.X, g.ad, 3);
  fix2_fini(&g);
}

/* The one pass answers the batches its bounds cover, with the result the
** one-at-a-time gmp runs give; a batch outside them (2^62 in X) falls to
** those runs, still exact; a NULL delta gives the same verdicts. */
Test(all, one_pass_equals_one_at_a_time) {
  for (uint64_t seed = 300; seed < 340; seed++) {
    rbatch b;
    rbatch_make(&b, seed, 9, seed % 2 ? 1 : 6);
    lsim_qmat one = LSIM_QMAT_INIT, each = LSIM_QMAT_INIT;
    long before = lsim_ref__one_pass_count();
    OK(lsim_ref_delta_all(&b.p, &b.X, b.ad, b.nad, &one, eb));
    cr_assert_eq(lsim_ref__one_pass_count(), before + 1, "seed %llu",
                 (unsigned long long)seed);
    OK(lsim_ref_delta_all_ex(&b.p, &b.X, b.ad, b.nad, LSIM_NUM_GMP, &each,
                             eb));
    cr_assert_eq(lsim_ref__one_pass_count(), before + 1, "gmp runs each");
    OK(lsim_ref_compare(&each, &one, "one pass vs gmp", eb));
    OK(lsim_ref_delta_all(&b.p, &b.X, b.ad, b.nad, NULL, eb));
    lsim_qmat_clear(&one);
    lsim_qmat_clear(&each);
    rbatch_free(&b);
  }
  fix1 f;
  fix1_init(&f);
  mpq_set_str(LSIM_QAT(&f.X, 0, 0), "4611686018427387904", 10);
  lsim_qmat dy = LSIM_QMAT_INIT;
  long before = lsim_ref__one_pass_count();
  OK(lsim_ref_delta_all(&f.p, &f.X, f.ad, 2, &dy, eb));
  cr_assert_eq(lsim_ref__one_pass_count(), before, "2^62 is past int64");
  q_is(&dy, 0, 0, "4611686018427387905/2", "delta");
  lsim_qmat_clear(&dy);
  /* verdict only: the refusals of a single evaluation, codes unchanged */
  lsim_qadapter bad[2];
  adapter(&bad[0], 1, 2, 4, 3, "1 0 1 0 | 0 1 0 1", "1 0 | 0 1 | 1 1", "1/2");
  lsim_qmat_clear(&bad[0].A);
  qm(&bad[0].A, 4, 2, "1 0 | 0 1 | 1 0 | 0 1"); /* A stored [d_in][r] */
  bad[1] = f.ad[1];
  FAILS(LSIM_E_ORIENTATION, lsim_ref_delta_all(&f.p, &f.X, bad, 2, NULL, eb));
  FAILS(LSIM_E_REF_UNKNOWN_ADAPTER,
        lsim_ref_delta_all(&f.p, &f.X, f.ad, 1, NULL, eb));
  lsim_qadapter_clear(&bad[0]);
  fix1_fini(&f);
}

/* The integer products at the edges of their proofs: int16 operands whose
** K-term sums just fit int32 (K = 2, every |value| 32767: shrink with
** d_in = 2, expand with rank 2) and one term past it (K = 3), int32
** operands past int16 (shrink outputs of 32767^2 feeding the expand), mixed
** signs, output widths covering every vector group and the scalar tail.  Row 0 of X and
** row 0 of A hold +32767 only, so their sums reach K * 32767^2.  The one
** pass must equal the gmp runs entry for entry. */
Test(property, integer_products_at_their_bounds) {
  static const long V = 32767;
  static const int ranks[] = {1, 2, 3, 8, 9, 16, 17, 25};
  for (int big_x = 0; big_x < 2; big_x++)
    for (int d_in = 1; d_in <= 5; d_in++)
      for (int r = 0; r < NELEM(ranks); r++) {
        int rank = ranks[r], d_out = 25; /* 16 + 8 + 1 outputs */
        long xv = big_x ? V : 1;
        lsim_plan_entry e[3] = {ent(1, 1, rank, PRE, 2),
                                ent(2, BASE, 0, DEC, 1),
                                ent(3, 1, rank, DEC, 1)};
        lsim_rowplan p;
        OK(lsim_rowplan_build(&p, e, 3, NULL, 0, eb));
        lsim_qmat X = LSIM_QMAT_INIT;
        OK(lsim_qmat_init(&X, p.T, d_in, eb));
        for (int i = 0; i < p.T; i++)
          for (int j = 0; j < d_in; j++)
            mpq_set_si(LSIM_QAT(&X, i, j),
                       i > 0 && (i + j) % 3 == 2 ? -xv : xv, 1);
        lsim_qadapter ad;
        OK(lsim_qadapter_init(&ad, 1, rank, d_in, d_out, eb));
        for (int k = 0; k < rank; k++)
          for (int j = 0; j < d_in; j++)
            mpq_set_si(LSIM_QAT(&ad.A, k, j), k > 0 && (k + j) % 2 ? -V : V,
                       1);
        for (int o = 0; o < d_out; o++)
          for (int k = 0; k < rank; k++)
            mpq_set_si(LSIM_QAT(&ad.B, o, k), o > 0 && (o * k) % 2 ? -V : V,
                       1);
        mpq_set_ui(ad.scale, 1, 3);
        lsim_qmat one = LSIM_QMAT_INIT, each = LSIM_QMAT_INIT;
        long before = lsim_ref__one_pass_count();
        OK(lsim_ref_delta_all(&p, &X, &ad, 1, &one, eb));
        cr_assert_eq(lsim_ref__one_pass_count(), before + 1);
        OK(lsim_ref_delta_all_ex(&p, &X, &ad, 1, LSIM_NUM_GMP, &each, eb));
        OK(lsim_ref_compare(&each, &one, "one pass vs gmp", eb));
        lsim_qmat_clear(&one);
        lsim_qmat_clear(&each);
        lsim_qadapter_clear(&ad);
        lsim_qmat_clear(&X);
        lsim_rowplan_release(&p);
      }
}
