/*
** test_loop10.c: the article's Loop 10 five-row transaction (0x0AA-0x0AF)
** through the Punica, S-LoRA, PEFT and vLLM layouts (backends/cpu_ref/
** repr.h).
**
**   1. constructed inputs reproduce the article's delta table and Y through
**      cpu_ref (every family, every placement) and the base projection
**   2. each layout holds the article's metadata and gives the exact table
**   3. all four agree with lsim_ref_delta on the same plan
**   4. the article's negative claims: one segment boundary, one scale, one
**      slot mapping, one rank tail or one base-row sentinel changed either
**      changes the output (asserted different) or fails validation with its
**      code (and evaluation then fails with the same code)
**
** Ids: adapter A = 1, adapter B = 2, LSIM_BASE (-1) is the article's
** "__base__"; PEFT names "A", "B"; vLLM lora ids 11 (A) and 22 (B).
*/
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../backends/cpu_ref/cpu_ref.h"
#include "../testsupport/repr.h"
#include "../engine/rowplan.h"
#include "../base/rng.h"

#define BASE LSIM_BASE
#define NELEM(a) ((int)(sizeof(a) / sizeof((a)[0])))

#include "exact_harness.h"


static void qm_is(const lsim_qmat *m, int rows, int cols, const char *spec,
                  const char *what) {
  lsim_qmat w = LSIM_QMAT_INIT;
  qm(&w, rows, cols, spec);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_err rc = lsim_ref_compare(&w, m, what, &eb);
  cr_assert_eq(rc, 0, "%s", eb.msg);
  lsim_qmat_clear(&w);
}

static void q_set(lsim_qmat *m, int i, int j, const char *v) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_q_parse(LSIM_QAT(m, i, j), v, &eb), 0);
}

/* 1 when rows i of a and b are equal (same column count assumed). */
static int row_eq(const lsim_qmat *a, const lsim_qmat *b, int i) {
  for (int c = 0; c < a->cols; c++)
    if (!mpq_equal(LSIM_QAT(a, i, c), LSIM_QAT(b, i, c)))
      return 0;
  return 1;
}

/*
** Assert that got differs from want exactly in the rows flagged in
** `changed` (a string of '0'/'1' per row) and equals it elsewhere.
*/
static void differs_in(const lsim_qmat *want, const lsim_qmat *got,
                       const char *changed, const char *what) {
  cr_assert_eq(got->rows, want->rows);
  cr_assert(!lsim_qmat_equal(want, got), "%s: output did not change", what);
  for (int i = 0; i < want->rows; i++)
    cr_assert_eq(!row_eq(want, got, i), changed[i] == '1',
                 "%s: row %d %s", what, i,
                 changed[i] == '1' ? "did not change" : "changed");
}

/* ======================================================================== */
/* the constructed fixture                                                  */
/* ======================================================================== */
/*
** What the article fixes (0x0AA-0x0AF): five rows with adapters A, A, B,
** base, B; both adapters rank 2 (Z_i in Q^{1x2}); s_A = 1/2, s_B = 3/2;
** d_out = 4; the delta table and the final Y.  It also fixes the layouts'
** metadata: Punica's permuted rows [0,1 | 2,4 | 3] with segment vector
** [0,2,4]; S-LoRA's per-row compact index [0,0,1,-1,1]; PEFT's names
** [A,A,B,__base__,B]; vLLM's lora_index_to_id [22,11], token ids
** [11,11,22,-1,22], slots [1,1,0,-1,0], sorted rows [3,2,4,0,1], active
** slot ids [-1,0,1], counts [1,2,2], starts [0,1,3,5].  It does not print
** X, A, B or the base output, so they are constructed here.
**
** Factors from the deltas.  Divide each delta row by its scale:
**   row 0: [6,3,0,-3]   row 1: [-1,-5,6,2]    (A, delta / (1/2))
**   row 2: [6,3,0,-3]   row 4: [4,1,2,-1]     (B, delta / (3/2))
** Each is z B^T for the row's z = x A^T in Q^2, i.e. a combination of B's
** two columns.  For A take the columns b1 = [2,1,0,-1], b2 = [1,-1,2,0]:
** [6,3,0,-3] = 3 b1 and [-1,-5,6,2] = -2 b1 + 3 b2, so z0 = (3,0) and
** z1 = (-2,3).  For B take c1 = [4,1,2,-1], c2 = [-1,0,-1,0]: [4,1,2,-1] =
** c1 and [6,3,0,-3] = 3 c1 + 6 c2, so z4 = (1,0) and z2 = (3,6).
**
** Why d_in = 4, not the article's 3.  The base output Y - delta is
**   [10,0,1,-1] [0,5,-2,1] [3,3,3,3] [-1,-1,-1,-1] [2,4,6,8]
** whose rows span Q^4 (rank 4: the only relation is row 2 = -3 row 3), so
** no X with three columns has X W^T equal to it; the article's fixture
** states its 5x4 base output directly.  With a fourth input column,
** X W^T = Y_base is solvable once X obeys the same relation:
** X[2] = -3 X[3], which z2 = (3,6) = -3 (-1,-2) permits.
**
** Inputs.  A search over small integers for rows X[0], X[1], X[3], X[4]
** forming a unimodular 4x4 matrix (so that W is integral) and small A
** rows meeting X[0] A_A^T = (3,0), X[1] A_A^T = (-2,3),
** X[3] A_B^T = (-1,-2), X[4] A_B^T = (1,0) gave
**   X[0] = [1,1,0,-2]   X[1] = [-1,2,0,-2]   X[2] = -3 X[3] = [0,3,0,-3]
**   X[3] = [0,-1,0,1]   X[4] = [0,1,1,0]
**   A_A = [[2,-1,0,-1],[-1,1,0,0]]   A_B = [[0,1,0,0],[0,1,-1,-1]]
** and W^T = [X0;X1;X3;X4]^-1 [Yb0;Yb1;Yb3;Yb4], W logical [d_out][d_in]:
**   W = [[2,-6,8,-7],[-3,-1,5,-2],[4,5,1,4],[1,4,4,3]]
** (row 0: [1,1,0,-2] W^T = [2-6+14, -3-1+4, 4+5-8, 1+4-6] = [10,0,1,-1]).
** The base row 3 would receive a nonzero delta from either adapter
** (z = (0,-1) under A, (-1,-2) under B), so its sentinel is observable.
*/
#include "loop10_world.h"

/* rows 0, 1, 2, 4 of the shrink (the base row 3 has none) */
static const char *const L10_Z = "3 0 | -2 3 | 3 6 | 1 0";

/* ======================================================================== */
/* 1. the inputs reproduce the article's table                              */
/* ======================================================================== */

Test(fixture, inputs_reproduce_the_table_through_cpu_ref) {
  l10fx f;
  l10fx_init(&f);
  /* Z of the active rows (per_row order: rows 0, 1, 2, 4) */
  lsim_ref_trace t = LSIM_REF_TRACE_INIT;
  lsim_qmat d = LSIM_QMAT_INIT;
  OK(lsim_ref_delta_ex(&f.p, &f.X, f.ad, 2, LSIM_REF_PER_ROW,
                       LSIM_SCALE_PASSED, LSIM_NUM_GMP, &t, NULL, &d, eb));
  cr_assert_eq(t.n, 4);
  qm_is(&t.Z, 4, 2, L10_Z, "Z");
  qm_is(&d, T, DOUT, L10_DELTA, "delta per_row");
  lsim_ref_trace_release(&t);
  lsim_qmat_clear(&d);
  /* all six families under all three placements agree on the table */
  OK(lsim_ref_delta_all(&f.p, &f.X, f.ad, 2, &d, eb));
  qm_is(&d, T, DOUT, L10_DELTA, "delta all");
  /* the base projection and Y */
  lsim_qmat y = LSIM_QMAT_INIT;
  OK(lsim_ref_base(&f.X, &f.W, &y, eb));
  qm_is(&y, T, DOUT, L10_BASE, "X W^T");
  OK(lsim_qmat_add(&y, &d, eb));
  qm_is(&y, T, DOUT, L10_Y, "Y");
  lsim_qmat_clear(&y);
  lsim_qmat_clear(&d);
  l10fx_fini(&f);
}

/* ======================================================================== */
/* 2. each layout: the article's metadata and the exact table               */
/* ======================================================================== */

static void ints_are(const int *got, const int *want, int n, const char *w) {
  for (int k = 0; k < n; k++)
    cr_assert_eq(got[k], want[k], "%s[%d] = %d, want %d", w, k, got[k],
                 want[k]);
}

/* delta (base NULL), Y (base given), Y in place (out == base) */
static void exact_table(const all4 *a, int which, const l10fx *f) {
  lsim_qmat d = LSIM_QMAT_INIT, y = LSIM_QMAT_INIT, z = LSIM_QMAT_INIT;
  OK(eval_one(a, which, &f->X, NULL, &d, eb));
  qm_is(&d, T, DOUT, L10_DELTA, LNAME[which]);
  OK(eval_one(a, which, &f->X, &f->base, &y, eb));
  qm_is(&y, T, DOUT, L10_Y, LNAME[which]);
  OK(lsim_qmat_copy(&z, &f->base, eb));
  OK(eval_one(a, which, &f->X, &z, &z, eb));
  qm_is(&z, T, DOUT, L10_Y, LNAME[which]);
  lsim_qmat_clear(&d);
  lsim_qmat_clear(&y);
  lsim_qmat_clear(&z);
}

Test(punica, segments_pointers_and_prescaled_store) {
  l10fx f;
  l10fx_init(&f);
  all4 a;
  memset(&a, 0, sizeof a);
  build_punica(&a.pu, &f);
  const lsim_repr_punica *r = &a.pu;
  static const int perm[T] = {0, 1, 2, 4, 3}, seg[3] = {0, 2, 4};
  ints_are(r->perm, perm, T, "perm");
  cr_assert_eq(r->nseg, 2);
  ints_are(r->seg, seg, 3, "seg");
  cr_assert_eq(r->rank, 2);
  /* the base row sits past the last segment */
  cr_assert_eq(r->perm[r->seg[2]], 3);
  /* pointer vectors address the store entries of A then B */
  cr_assert_eq(r->L, 2);
  cr_assert(r->pA[0] == &r->store_A[0] && r->pB[0] == &r->store_B[0]);
  cr_assert(r->pA[1] == &r->store_A[1] && r->pB[1] == &r->store_B[1]);
  /* B stored transposed [r][d_out] with the scale folded in */
  qm_is(&r->store_B[0], 2, DOUT, "1 1/2 0 -1/2 | 1/2 -1/2 1 0", "(s_A B_A)^T");
  qm_is(&r->store_B[1], 2, DOUT, "6 3/2 3 -3/2 | -3/2 0 -3/2 0",
        "(s_B B_B)^T");
  qm_is(&r->store_A[1], 2, DIN, L10_AB, "A_B");
  exact_table(&a, L_PUNICA, &f);
  all4_release(&a);
  l10fx_fini(&f);
}

Test(slora, compact_index_locations_and_true_rank) {
  l10fx f;
  l10fx_init(&f);
  all4 a;
  memset(&a, 0, sizeof a);
  build_slora(&a.sl, &f, NULL, 4);
  const lsim_repr_slora *r = &a.sl;
  static const int idx[T] = {0, 0, 1, -1, 1}, ids[2] = {ID_A, ID_B},
                   start[2] = {0, 2}, len[2] = {2, 2}, loc[4] = {0, 1, 2, 3};
  ints_are(r->row_index, idx, T, "row_index");
  cr_assert_eq(r->n, 2);
  ints_are(r->adapter_id, ids, 2, "adapter_id");
  ints_are(r->a_start, start, 2, "a_start");
  ints_are(r->a_len, len, 2, "a_len");
  ints_are(r->rank, len, 2, "rank");
  cr_assert_eq(r->nloc, 4);
  ints_are(r->a_loc, loc, 4, "a_loc");
  cr_assert_eq(mpq_cmp_si(r->a_scaling[0], 1, 2), 0);
  cr_assert_eq(mpq_cmp_si(r->a_scaling[1], 3, 2), 0);
  exact_table(&a, L_SLORA, &f);
  lsim_repr_slora_release(&a.sl);

  /* a scrambled free list in a larger pool: same table, cells elsewhere */
  static const int fl[7] = {5, 2, 0, 6, 3, 1, 4}, loc2[4] = {5, 2, 0, 6};
  build_slora(&a.sl, &f, fl, 7);
  ints_are(a.sl.a_loc, loc2, 4, "a_loc scrambled");
  /* cell 2 holds rank row 1 of A and column 1 of B */
  qm_is(&a.sl.pool_A, 7, DIN,
        "0 1 0 0 | 0 0 0 0 | -1 1 0 0 | 0 0 0 0 | 0 0 0 0 |"
        "2 -1 0 -1 | 0 1 -1 -1",
        "pool_A");
  qm_is(&a.sl.pool_B, 7, DOUT,
        "4 1 2 -1 | 0 0 0 0 | 1 -1 2 0 | 0 0 0 0 | 0 0 0 0 |"
        "2 1 0 -1 | -1 0 -1 0",
        "pool_B");
  exact_table(&a, L_SLORA, &f);
  all4_release(&a);
  l10fx_fini(&f);
}

Test(peft, named_sub_batches_scatter_into_base) {
  l10fx f;
  l10fx_init(&f);
  all4 a;
  memset(&a, 0, sizeof a);
  build_peft(&a.pf, &f);
  const lsim_repr_peft *r = &a.pf;
  static const int mods[2] = {0, 1}, offs[3] = {0, 2, 4},
                   rows[4] = {0, 1, 2, 4};
  cr_assert_eq(r->nsub, 2);
  ints_are(r->sub_mod, mods, 2, "sub_mod");
  ints_are(r->sub_offsets, offs, 3, "sub_offsets");
  ints_are(r->sub_rows, rows, 4, "sub_rows");
  for (int i = 0; i < T; i++)
    cr_assert_str_eq(r->row_name[i], NAMES[i]);
  exact_table(&a, L_PEFT, &f);
  all4_release(&a);
  l10fx_fini(&f);
}

Test(vllm, slots_padding_absorbed_scale_and_metadata) {
  l10fx f;
  l10fx_init(&f);
  all4 a;
  memset(&a, 0, sizeof a);
  build_vllm(&a.vl, &f, SLOTS);
  const lsim_repr_vllm *r = &a.vl;
  static const int slot[T] = {1, 1, 0, -1, 0}, sorted[T] = {3, 2, 4, 0, 1},
                   act[3] = {-1, 0, 1}, cnt[3] = {1, 2, 2},
                   starts[4] = {0, 1, 3, 5}, ranks[2] = {2, 2};
  cr_assert_eq(r->index_to_id[0], 22);
  cr_assert_eq(r->index_to_id[1], 11);
  ints_are(r->slot_rank, ranks, 2, "slot_rank");
  ints_are(r->token_slot, slot, T, "token_slot");
  ints_are(r->sorted_rows, sorted, T, "sorted_rows");
  cr_assert_eq(r->nids, 3);
  ints_are(r->active_ids, act, 3, "active_ids");
  ints_are(r->counts, cnt, 3, "counts");
  ints_are(r->starts, starts, 4, "starts");
  /* slot 0 = B: A zero-padded to R = 4 rows, B = [s_B B_B | 0] */
  qm_is(&r->slot_A[0], VR, DIN, "0 1 0 0 | 0 1 -1 -1 | 0 0 0 0 | 0 0 0 0",
        "A_pad B");
  qm_is(&r->slot_B[0], DOUT, VR,
        "6 -3/2 0 0 | 3/2 0 0 0 | 3 -3/2 0 0 | -3/2 0 0 0", "B_pad B");
  qm_is(&r->slot_B[1], DOUT, VR,
        "1 1/2 0 0 | 1/2 -1/2 0 0 | 0 1 0 0 | -1/2 0 0 0", "B_pad A");
  exact_table(&a, L_VLLM, &f);
  all4_release(&a);
  l10fx_fini(&f);
}

/* Which slot holds which adapter is placement, not identity. */
Test(vllm, slot_placement_does_not_change_rows) {
  l10fx f;
  l10fx_init(&f);
  all4 a;
  memset(&a, 0, sizeof a);
  static const int64_t table[2] = {11, 22};
  build_vllm(&a.vl, &f, table);
  static const int slot[T] = {0, 0, 1, -1, 1}, sorted[T] = {3, 0, 1, 2, 4};
  ints_are(a.vl.token_slot, slot, T, "token_slot");
  ints_are(a.vl.sorted_rows, sorted, T, "sorted_rows");
  exact_table(&a, L_VLLM, &f);
  /* a third, empty slot and a larger R change nothing either */
  lsim_repr_vllm_release(&a.vl);
  static const int64_t table3[3] = {0, 22, 11};
  OK(lsim_repr_vllm_build(&a.vl, REQ, T, CAT, f.ad, 2, table3, 3, 8, DIN,
                          DOUT, eb));
  cr_assert_eq(a.vl.slot_rank[0], 0);
  exact_table(&a, L_VLLM, &f);
  all4_release(&a);
  l10fx_fini(&f);
}

/* ======================================================================== */
/* 3. the four layouts agree with lsim_ref_delta on the same plan           */
/* ======================================================================== */

Test(agree, every_layout_equals_every_ref_family) {
  l10fx f;
  l10fx_init(&f);
  all4 a;
  memset(&a, 0, sizeof a);
  all4_build(&a, &f);
  lsim_qmat got[L__COUNT];
  for (int w = 0; w < L__COUNT; w++) {
    got[w] = (lsim_qmat)LSIM_QMAT_INIT;
    OK(eval_one(&a, w, &f.X, NULL, &got[w], eb));
  }
  for (int path = 0; path < LSIM_REF__COUNT; path++)
    for (int sm = 0; sm < LSIM_SCALE__COUNT; sm++) {
      lsim_qmat d = LSIM_QMAT_INIT;
      OK(lsim_ref_delta(&f.p, &f.X, f.ad, 2, path, sm, &d, eb));
      for (int w = 0; w < L__COUNT; w++) {
        lsim_errbuf eb = LSIM_ERRBUF_INIT;
        cr_assert_eq(lsim_ref_compare(&d, &got[w], LNAME[w], &eb), 0,
                     "%s vs %s/%s: %s", LNAME[w], lsim_ref_path_name(path),
                     lsim_scale_mode_name(sm), eb.msg);
      }
      lsim_qmat_clear(&d);
    }
  /* and on a random-looking second input: same plan, other X */
  lsim_qmat X2 = LSIM_QMAT_INIT, ref = LSIM_QMAT_INIT;
  qm(&X2, T, DIN, "3 -1/2 2 7 | 0 0 5 -4 | 1/3 1 1 -2 | 9 8 -7 6 | 2 2 -5 1");
  OK(lsim_ref_delta_all(&f.p, &X2, f.ad, 2, &ref, eb));
  for (int w = 0; w < L__COUNT; w++) {
    lsim_qmat d = LSIM_QMAT_INIT;
    OK(eval_one(&a, w, &X2, NULL, &d, eb));
    lsim_errbuf eb = LSIM_ERRBUF_INIT;
    cr_assert_eq(lsim_ref_compare(&ref, &d, LNAME[w], &eb), 0, "%s", eb.msg);
    for (int c = 0; c < DOUT; c++)
      cr_assert_eq(mpq_sgn(LSIM_QAT(&d, 3, c)), 0, "%s: base row nonzero",
                   LNAME[w]);
    lsim_qmat_clear(&d);
  }
  lsim_qmat_clear(&X2);
  lsim_qmat_clear(&ref);
  for (int w = 0; w < L__COUNT; w++)
    lsim_qmat_clear(&got[w]);
  all4_release(&a);
  l10fx_fini(&f);
}

/* ======================================================================== */
/* 4. the article's negative claims                                         */
/* ======================================================================== */

/* A mutated layout: validate and eval both fail with code. */
#define REJECTS(code, lay, a, which, f)                                    \
  do {                                                                     \
    FAILS(code, lsim_repr_##lay##_validate(&(a)->lay##_field, eb));        \
    lsim_qmat o_ = LSIM_QMAT_INIT;                                         \
    FAILS(code, eval_one((a), (which), &(f)->X, NULL, &o_, eb));           \
    cr_assert_null(o_.v, "a failed evaluation left an output allocated"); \
  } while (0)
#define punica_field pu
#define slora_field sl
#define peft_field pf
#define vllm_field vl

/* Evaluate layout `which` (base given) and assert which rows changed. */
static void changes(const all4 *a, int which, const l10fx *f, const char *rows,
                    const char *what) {
  lsim_qmat y = LSIM_QMAT_INIT;
  OK(eval_one(a, which, &f->X, &f->base, &y, eb));
  differs_in(&f->Y, &y, rows, what);
  lsim_qmat_clear(&y);
}

Test(negative, one_segment_boundary) {
  l10fx f;
  l10fx_init(&f);
  all4 a;
  memset(&a, 0, sizeof a);
  all4_build(&a, &f);
  /* Punica [0,2,4]: moving a boundary puts a row under the wrong pointer */
  static const struct {
    int k, v;
    lsim_err code;
  } cases[] = {
      {1, 3, LSIM_E_REPR_SEG_IDENTITY}, /* row 2 (B) under A's pointer */
      {1, 1, LSIM_E_REPR_SEG_IDENTITY}, /* row 1 (A) under B's pointer */
      {2, 5, LSIM_E_BASE_DELTA},        /* base row 3 inside B's segment */
      {2, 3, LSIM_E_SCATTER},           /* row 4 (B) outside every segment */
      {0, 1, LSIM_E_REPR_SEGMENT},      /* vector does not start at 0 */
      {1, 4, LSIM_E_REPR_SEGMENT},      /* empty segment */
      {2, 6, LSIM_E_REPR_SEGMENT},      /* past the rows */
  };
  for (int c = 0; c < NELEM(cases); c++) {
    int keep = a.pu.seg[cases[c].k];
    a.pu.seg[cases[c].k] = cases[c].v;
    REJECTS(cases[c].code, punica, &a, L_PUNICA, &f);
    a.pu.seg[cases[c].k] = keep;
  }
  /* PEFT sub-batch offsets [0,2,4] -> [0,1,4]: row 1 (A) in B's batch */
  a.pf.sub_offsets[1] = 1;
  REJECTS(LSIM_E_REPR_NAME, peft, &a, L_PEFT, &f);
  a.pf.sub_offsets[1] = 3;
  REJECTS(LSIM_E_REPR_NAME, peft, &a, L_PEFT, &f);
  a.pf.sub_offsets[1] = 2;
  a.pf.sub_offsets[2] = 3; /* row 4 (B) gathered by nobody */
  REJECTS(LSIM_E_SCATTER, peft, &a, L_PEFT, &f);
  a.pf.sub_offsets[2] = 4;
  /* vLLM starts [0,1,3,5] -> [0,2,3,5] */
  a.vl.starts[1] = 2;
  REJECTS(LSIM_E_REPR_METADATA, vllm, &a, L_VLLM, &f);
  a.vl.starts[1] = 1;
  /* a boundary that follows a changed assignment is valid and changes Y */
  lsim_repr_punica_release(&a.pu);
  static const int rows2[T] = {ID_A, ID_B, ID_B, BASE, ID_B};
  OK(lsim_repr_punica_build(&a.pu, rows2, T, f.ad, 2, DIN, DOUT, eb));
  static const int seg2[3] = {0, 1, 4};
  ints_are(a.pu.seg, seg2, 3, "seg");
  changes(&a, L_PUNICA, &f, "01000", "punica row 1 moved to B");
  for (int w = 0; w < L__COUNT; w++)
    if (w != L_PUNICA)
      exact_table(&a, w, &f); /* the others untouched */
  all4_release(&a);
  l10fx_fini(&f);
}

Test(negative, one_scale) {
  l10fx f;
  l10fx_init(&f);
  all4 a;
  memset(&a, 0, sizeof a);
  all4_build(&a, &f);
  /* S-LoRA: a_scaling of B from 3/2 to 1/2 */
  mpq_set_si(a.sl.a_scaling[1], 1, 2);
  changes(&a, L_SLORA, &f, "00101", "slora s_B");
  mpq_set_si(a.sl.a_scaling[1], 3, 2);
  /* PEFT: scaling of A from 1/2 to 1 */
  mpq_set_si(a.pf.mod[0].scale, 1, 1);
  changes(&a, L_PEFT, &f, "11000", "peft s_A");
  mpq_set_si(a.pf.mod[0].scale, 1, 2);
  /* Punica: its store is pre-scaled, so a scale lives in B's payload;
  ** one entry of (s_B B_B)^T rescaled by 2/3 (s_B 3/2 -> 1) */
  q_set(&a.pu.store_B[1], 0, 0, "4");
  changes(&a, L_PUNICA, &f, "00101", "punica prescaled B");
  q_set(&a.pu.store_B[1], 0, 0, "6");
  /* vLLM: the absorbed scale of A's slot (slot 1), one entry */
  q_set(&a.vl.slot_B[1], 0, 0, "2");
  changes(&a, L_VLLM, &f, "11000", "vllm absorbed s_A");
  q_set(&a.vl.slot_B[1], 0, 0, "1");
  for (int w = 0; w < L__COUNT; w++)
    exact_table(&a, w, &f);
  all4_release(&a);
  /* rebuilding every layout with s_B = 1/2 changes rows 2 and 4 only */
  mpq_set_si(f.ad[1].scale, 1, 2);
  all4_build(&a, &f);
  for (int w = 0; w < L__COUNT; w++)
    changes(&a, w, &f, "00101", LNAME[w]);
  all4_release(&a);
  l10fx_fini(&f);
}

Test(negative, one_slot_mapping) {
  l10fx f;
  l10fx_init(&f);
  all4 a;
  memset(&a, 0, sizeof a);
  all4_build(&a, &f);
  /* vLLM: token 0 (lora 11) mapped to slot 0, which holds 22 */
  a.vl.token_slot[0] = 0;
  REJECTS(LSIM_E_REPR_SLOT, vllm, &a, L_VLLM, &f);
  a.vl.token_slot[0] = 2; /* no such slot */
  REJECTS(LSIM_E_REPR_SLOT, vllm, &a, L_VLLM, &f);
  a.vl.token_slot[0] = 1;
  /* the slot table flipped under unchanged token slots */
  a.vl.index_to_id[0] = 11;
  a.vl.index_to_id[1] = 22;
  REJECTS(LSIM_E_REPR_SLOT, vllm, &a, L_VLLM, &f);
  a.vl.index_to_id[1] = 11; /* 11 active twice */
  REJECTS(LSIM_E_REPR_SLOT, vllm, &a, L_VLLM, &f);
  a.vl.index_to_id[0] = 22;
  /* a stale slot table: the payloads swapped, ids and metadata intact --
  ** every slot is in bounds, so only the output shows it */
  lsim_qmat t = a.vl.slot_A[0];
  a.vl.slot_A[0] = a.vl.slot_A[1];
  a.vl.slot_A[1] = t;
  t = a.vl.slot_B[0];
  a.vl.slot_B[0] = a.vl.slot_B[1];
  a.vl.slot_B[1] = t;
  OK(lsim_repr_vllm_validate(&a.vl, eb));
  changes(&a, L_VLLM, &f, "11101", "vllm stale slot payloads");
  t = a.vl.slot_B[0];
  a.vl.slot_B[0] = a.vl.slot_B[1];
  a.vl.slot_B[1] = t;
  t = a.vl.slot_A[0];
  a.vl.slot_A[0] = a.vl.slot_A[1];
  a.vl.slot_A[1] = t;
  exact_table(&a, L_VLLM, &f);
  /* S-LoRA: row 0's compact index 0 -> 1 is in range and names B */
  a.sl.row_index[0] = 1;
  changes(&a, L_SLORA, &f, "10000", "slora row 0 -> B");
  a.sl.row_index[0] = 2;
  REJECTS(LSIM_E_REPR_INDEX, slora, &a, L_SLORA, &f);
  a.sl.row_index[0] = 0;
  a.sl.adapter_id[1] = ID_A; /* two compact indexes for one adapter */
  REJECTS(LSIM_E_REPR_INDEX, slora, &a, L_SLORA, &f);
  a.sl.adapter_id[1] = ID_B;
  /* Punica: segment 0's pointers moved to B's store entry */
  a.pu.pA[0] = &a.pu.store_A[1];
  REJECTS(LSIM_E_REPR_POINTER, punica, &a, L_PUNICA, &f);
  a.pu.pB[0] = &a.pu.store_B[1];
  REJECTS(LSIM_E_REPR_POINTER, punica, &a, L_PUNICA, &f);
  lsim_qmat stray = LSIM_QMAT_INIT;
  a.pu.pA[0] = &stray;
  REJECTS(LSIM_E_REPR_POINTER, punica, &a, L_PUNICA, &f);
  a.pu.pA[0] = &a.pu.store_A[0];
  a.pu.pB[0] = &a.pu.store_B[0];
  /* PEFT: the sub-batches' names swapped */
  a.pf.sub_mod[0] = 1;
  a.pf.sub_mod[1] = 0;
  REJECTS(LSIM_E_REPR_NAME, peft, &a, L_PEFT, &f);
  a.pf.sub_mod[1] = 1;
  REJECTS(LSIM_E_REPR_NAME, peft, &a, L_PEFT, &f);
  a.pf.sub_mod[0] = 0;
  for (int w = 0; w < L__COUNT; w++)
    exact_table(&a, w, &f);
  all4_release(&a);
  l10fx_fini(&f);
}

Test(negative, one_rank_tail) {
  l10fx f;
  l10fx_init(&f);
  all4 a;
  memset(&a, 0, sizeof a);
  all4_build(&a, &f);
  /* vLLM: a nonzero value in a padded tail (rank 2 of R = 4) */
  q_set(&a.vl.slot_A[1], 2, 0, "1");
  REJECTS(LSIM_E_PAD_NONZERO, vllm, &a, L_VLLM, &f);
  q_set(&a.vl.slot_A[1], 2, 0, "0");
  q_set(&a.vl.slot_B[0], 3, 3, "-1/7");
  REJECTS(LSIM_E_PAD_NONZERO, vllm, &a, L_VLLM, &f);
  q_set(&a.vl.slot_B[0], 3, 3, "0");
  a.vl.slot_rank[0] = 1; /* the rank record shrinks: row 1 becomes tail */
  REJECTS(LSIM_E_PAD_NONZERO, vllm, &a, L_VLLM, &f);
  a.vl.slot_rank[0] = 5;
  REJECTS(LSIM_E_SLOT_RANK, vllm, &a, L_VLLM, &f);
  a.vl.slot_rank[0] = 0; /* an active id with no rank */
  REJECTS(LSIM_E_REPR_SLOT, vllm, &a, L_VLLM, &f);
  a.vl.slot_rank[0] = 2;
  /* a tail nonzero but a larger rank record: valid, and Y changes */
  q_set(&a.vl.slot_A[1], 2, 0, "1");
  q_set(&a.vl.slot_B[1], 0, 2, "1");
  a.vl.slot_rank[1] = 3;
  changes(&a, L_VLLM, &f, "11000", "vllm rank-3 extent in A's slot");
  a.vl.slot_rank[1] = 2;
  q_set(&a.vl.slot_A[1], 2, 0, "0");
  q_set(&a.vl.slot_B[1], 0, 2, "0");
  /* S-LoRA: a rank that disagrees with its length table */
  a.sl.rank[0] = 1;
  REJECTS(LSIM_E_REPR_LOCATION, slora, &a, L_SLORA, &f);
  a.sl.a_len[0] = 1; /* now a_start[1] is not the prefix sum */
  REJECTS(LSIM_E_REPR_LOCATION, slora, &a, L_SLORA, &f);
  /* made consistent (A truncated to its first rank row): valid, row 1's
  ** delta changes; row 0 has z = (3, 0), so its second rank row never
  ** contributed */
  a.sl.a_start[1] = 1;
  a.sl.nloc = 3;
  a.sl.a_loc[1] = 2;
  a.sl.a_loc[2] = 3;
  changes(&a, L_SLORA, &f, "01000", "slora A at rank 1");
  a.sl.a_loc[2] = 2; /* one cell for two rank rows */
  REJECTS(LSIM_E_REPR_LOCATION, slora, &a, L_SLORA, &f);
  a.sl.a_loc[2] = 4; /* outside the pool */
  REJECTS(LSIM_E_REPR_LOCATION, slora, &a, L_SLORA, &f);
  a.sl.rank[0] = a.sl.a_len[0] = 2;
  a.sl.a_start[1] = 2;
  a.sl.nloc = 4;
  for (int k = 0; k < 4; k++)
    a.sl.a_loc[k] = k;
  /* Punica: the scalar rank is one for the whole invocation */
  a.pu.rank = 3;
  REJECTS(LSIM_E_REPR_FIXED_RANK, punica, &a, L_PUNICA, &f);
  a.pu.rank = 2;
  for (int w = 0; w < L__COUNT; w++)
    exact_table(&a, w, &f);
  all4_release(&a);
  /* builders: mixed ranks under Punica's one rank; a rank above R */
  lsim_qadapter mixed[2];
  memset(mixed, 0, sizeof mixed);
  adapter(&mixed[0], ID_A, 2, DIN, DOUT, L10_AA, L10_BA, "1/2");
  adapter(&mixed[1], ID_B, 3, DIN, DOUT, "0 1 0 0 | 0 1 -1 -1 | 0 0 0 0",
          "4 -1 0 | 1 0 0 | 2 -1 0 | -1 0 0", "3/2");
  lsim_repr_punica pu = LSIM_REPR_PUNICA_INIT;
  FAILS(LSIM_E_REPR_FIXED_RANK,
        lsim_repr_punica_build(&pu, ROWS, T, mixed, 2, DIN, DOUT, eb));
  /* the other three carry a rank per adapter: B with a zero third rank
  ** row still gives the table (true rank 3 in S-LoRA and PEFT, padded in
  ** vLLM) */
  lsim_repr_slora sl = LSIM_REPR_SLORA_INIT;
  lsim_repr_peft pf = LSIM_REPR_PEFT_INIT;
  lsim_repr_vllm vl = LSIM_REPR_VLLM_INIT;
  OK(lsim_repr_slora_build(&sl, ROWS, T, mixed, 2, DIN, DOUT, 5, NULL, eb));
  OK(lsim_repr_peft_build(&pf, NAMES, T, MODS, mixed, 2, DIN, DOUT, eb));
  OK(lsim_repr_vllm_build(&vl, REQ, T, CAT, mixed, 2, SLOTS, 2, VR, DIN, DOUT,
                          eb));
  lsim_qmat d = LSIM_QMAT_INIT;
  OK(lsim_repr_slora_eval(&sl, &f.X, NULL, &d, eb));
  qm_is(&d, T, DOUT, L10_DELTA, "slora mixed");
  OK(lsim_repr_peft_eval(&pf, &f.X, NULL, &d, eb));
  qm_is(&d, T, DOUT, L10_DELTA, "peft mixed");
  OK(lsim_repr_vllm_eval(&vl, &f.X, NULL, &d, eb));
  qm_is(&d, T, DOUT, L10_DELTA, "vllm mixed");
  lsim_qmat_clear(&d);
  lsim_repr_slora_release(&sl);
  lsim_repr_peft_release(&pf);
  lsim_repr_vllm_release(&vl);
  FAILS(LSIM_E_SLOT_RANK, lsim_repr_vllm_build(&vl, REQ, T, CAT, mixed, 2,
                                               SLOTS, 2, 2, DIN, DOUT, eb));
  lsim_qadapter_clear(&mixed[0]);
  lsim_qadapter_clear(&mixed[1]);
  l10fx_fini(&f);
}

Test(negative, base_row_sentinel) {
  l10fx f;
  l10fx_init(&f);
  all4 a;
  memset(&a, 0, sizeof a);
  all4_build(&a, &f);
  /* Punica: the base row permuted into B's segment */
  a.pu.perm[3] = 3;
  a.pu.perm[4] = 4;
  REJECTS(LSIM_E_BASE_DELTA, punica, &a, L_PUNICA, &f);
  a.pu.perm[4] = 3; /* and a permutation that repeats a row */
  REJECTS(LSIM_E_REPR_PERM, punica, &a, L_PUNICA, &f);
  a.pu.perm[3] = 4;
  /* vLLM: base token mapped to a slot, or its id made an adapter's */
  a.vl.token_slot[3] = 0;
  REJECTS(LSIM_E_REPR_SENTINEL, vllm, &a, L_VLLM, &f);
  a.vl.token_slot[3] = -1;
  a.vl.req_id[3] = 22;
  REJECTS(LSIM_E_REPR_SENTINEL, vllm, &a, L_VLLM, &f);
  a.vl.req_id[3] = 0; /* 0 is neither the sentinel nor a lora id */
  REJECTS(LSIM_E_REPR_REQUEST_ID, vllm, &a, L_VLLM, &f);
  a.vl.req_id[3] = -1;
  a.vl.req_id[0] = -1; /* an adapter token made base, slot kept */
  REJECTS(LSIM_E_REPR_SENTINEL, vllm, &a, L_VLLM, &f);
  a.vl.req_id[0] = 11;
  /* S-LoRA: compact index -1 -> 1 is in range: row 3 receives B's delta */
  a.sl.row_index[3] = 1;
  changes(&a, L_SLORA, &f, "00010", "slora base row -> B");
  a.sl.row_index[3] = -1;
  /* PEFT: row 3 renamed B but not gathered; gathered while named base */
  char *keep = a.pf.row_name[3];
  a.pf.row_name[3] = strdup("B");
  REJECTS(LSIM_E_SCATTER, peft, &a, L_PEFT, &f);
  free(a.pf.row_name[3]);
  a.pf.row_name[3] = keep;
  a.pf.sub_rows[3] = 3; /* B's batch gathers rows 2, 3 */
  REJECTS(LSIM_E_BASE_DELTA, peft, &a, L_PEFT, &f);
  a.pf.sub_rows[3] = 4;
  for (int w = 0; w < L__COUNT; w++)
    exact_table(&a, w, &f);
  all4_release(&a);
  /* rebuilt with row 3 assigned to B: valid everywhere, row 3 changes */
  static const int rows3[T] = {ID_A, ID_A, ID_B, ID_B, ID_B};
  static const char *const names3[T] = {"A", "A", "B", "B", "B"};
  static const int64_t req3[T] = {11, 11, 22, 22, 22};
  OK(lsim_repr_punica_build(&a.pu, rows3, T, f.ad, 2, DIN, DOUT, eb));
  OK(lsim_repr_slora_build(&a.sl, rows3, T, f.ad, 2, DIN, DOUT, 4, NULL, eb));
  OK(lsim_repr_peft_build(&a.pf, names3, T, MODS, f.ad, 2, DIN, DOUT, eb));
  OK(lsim_repr_vllm_build(&a.vl, req3, T, CAT, f.ad, 2, SLOTS, 2, VR, DIN,
                          DOUT, eb));
  for (int w = 0; w < L__COUNT; w++)
    changes(&a, w, &f, "00010", LNAME[w]);
  all4_release(&a);
  l10fx_fini(&f);
}

/* ======================================================================== */
/* builders and evaluators refuse bad input with exact codes                */
/* ======================================================================== */

Test(negative, builder_inputs) {
  l10fx f;
  l10fx_init(&f);
  lsim_repr_punica pu = LSIM_REPR_PUNICA_INIT;
  lsim_repr_slora sl = LSIM_REPR_SLORA_INIT;
  lsim_repr_peft pf = LSIM_REPR_PEFT_INIT;
  lsim_repr_vllm vl = LSIM_REPR_VLLM_INIT;
  static const int unknown[T] = {ID_A, 7, ID_B, BASE, ID_B};
  FAILS(LSIM_E_REF_UNKNOWN_ADAPTER,
        lsim_repr_punica_build(&pu, unknown, T, f.ad, 2, DIN, DOUT, eb));
  FAILS(LSIM_E_REF_UNKNOWN_ADAPTER, lsim_repr_slora_build(&sl, unknown, T,
                                                          f.ad, 2, DIN, DOUT,
                                                          4, NULL, eb));
  f.ad[1].id = ID_A;
  FAILS(LSIM_E_REF_DUP_ADAPTER,
        lsim_repr_punica_build(&pu, ROWS, T, f.ad, 2, DIN, DOUT, eb));
  f.ad[1].id = ID_B;
  /* A stored transposed ([d_in][r]) */
  lsim_qmat At = LSIM_QMAT_INIT, keepA = f.ad[0].A;
  qm(&At, DIN, 2, "2 -1 | -1 1 | 0 0 | -1 0");
  f.ad[0].A = At;
  FAILS(LSIM_E_ORIENTATION,
        lsim_repr_punica_build(&pu, ROWS, T, f.ad, 2, DIN, DOUT, eb));
  FAILS(LSIM_E_ORIENTATION, lsim_repr_slora_build(&sl, ROWS, T, f.ad, 2, DIN,
                                                  DOUT, 4, NULL, eb));
  FAILS(LSIM_E_ORIENTATION, lsim_repr_peft_build(&pf, NAMES, T, MODS, f.ad, 2,
                                                 DIN, DOUT, eb));
  FAILS(LSIM_E_ORIENTATION,
        lsim_repr_vllm_build(&vl, REQ, T, CAT, f.ad, 2, SLOTS, 2, VR, DIN,
                             DOUT, eb));
  f.ad[0].A = keepA;
  lsim_qmat_clear(&At);
  /* S-LoRA pool: too small, a free list that is not a permutation */
  FAILS(LSIM_E_NOSPACE,
        lsim_repr_slora_build(&sl, ROWS, T, f.ad, 2, DIN, DOUT, 3, NULL, eb));
  static const int badfl[4] = {0, 1, 1, 3};
  FAILS(LSIM_E_REPR_LOCATION,
        lsim_repr_slora_build(&sl, ROWS, T, f.ad, 2, DIN, DOUT, 4, badfl, eb));
  /* PEFT names */
  static const char *const n_unknown[T] = {"A", "A", "C", "__base__", "B"};
  static const char *const n_empty[T] = {"A", "", "B", "__base__", "B"};
  static const char *const m_base[2] = {"A", "__base__"};
  static const char *const m_dup[2] = {"A", "A"};
  FAILS(LSIM_E_REPR_NAME, lsim_repr_peft_build(&pf, n_unknown, T, MODS, f.ad,
                                               2, DIN, DOUT, eb));
  FAILS(LSIM_E_REPR_NAME, lsim_repr_peft_build(&pf, n_empty, T, MODS, f.ad, 2,
                                               DIN, DOUT, eb));
  FAILS(LSIM_E_REPR_NAME, lsim_repr_peft_build(&pf, NAMES, T, m_base, f.ad, 2,
                                               DIN, DOUT, eb));
  FAILS(LSIM_E_REPR_NAME, lsim_repr_peft_build(&pf, NAMES, T, m_dup, f.ad, 2,
                                               DIN, DOUT, eb));
  /* vLLM registry, activation table and token ids */
  static const int64_t cat_dup[2] = {11, 11}, cat_zero[2] = {0, 22};
  static const int64_t req_unreg[T] = {11, 11, 33, -1, 22};
  static const int64_t req_neg[T] = {11, 11, 22, -2, 22};
  static const int64_t tab_inactive[2] = {22, 0}, tab_twice[2] = {22, 22};
  static const int64_t tab_unreg[2] = {22, 44};
  FAILS(LSIM_E_REPR_REQUEST_ID,
        lsim_repr_vllm_build(&vl, REQ, T, cat_dup, f.ad, 2, SLOTS, 2, VR, DIN,
                             DOUT, eb));
  FAILS(LSIM_E_REPR_REQUEST_ID,
        lsim_repr_vllm_build(&vl, REQ, T, cat_zero, f.ad, 2, SLOTS, 2, VR,
                             DIN, DOUT, eb));
  FAILS(LSIM_E_REPR_REQUEST_ID,
        lsim_repr_vllm_build(&vl, req_unreg, T, CAT, f.ad, 2, SLOTS, 2, VR,
                             DIN, DOUT, eb));
  FAILS(LSIM_E_REPR_REQUEST_ID,
        lsim_repr_vllm_build(&vl, req_neg, T, CAT, f.ad, 2, SLOTS, 2, VR, DIN,
                             DOUT, eb));
  FAILS(LSIM_E_REPR_REQUEST_ID,
        lsim_repr_vllm_build(&vl, REQ, T, CAT, f.ad, 2, tab_unreg, 2, VR, DIN,
                             DOUT, eb));
  FAILS(LSIM_E_REPR_SLOT,
        lsim_repr_vllm_build(&vl, REQ, T, CAT, f.ad, 2, tab_inactive, 2, VR,
                             DIN, DOUT, eb));
  FAILS(LSIM_E_REPR_SLOT,
        lsim_repr_vllm_build(&vl, REQ, T, CAT, f.ad, 2, tab_twice, 2, VR, DIN,
                             DOUT, eb));
  FAILS(LSIM_E_REPR_SLOT, lsim_repr_vllm_build(&vl, REQ, T, CAT, f.ad, 2,
                                               SLOTS, 0, VR, DIN, DOUT, eb));
  /* failed builds leave the layouts released */
  cr_assert_null(pu.perm);
  cr_assert_null(sl.a_loc);
  cr_assert_null(pf.mod);
  cr_assert_null(vl.slot_A);
  l10fx_fini(&f);
}

Test(negative, metadata_and_shapes) {
  l10fx f;
  l10fx_init(&f);
  all4 a;
  memset(&a, 0, sizeof a);
  all4_build(&a, &f);
  /* Punica permutation: out of range; unstable inside a segment */
  a.pu.perm[0] = 5;
  REJECTS(LSIM_E_REPR_PERM, punica, &a, L_PUNICA, &f);
  a.pu.perm[0] = 1;
  a.pu.perm[1] = 0;
  REJECTS(LSIM_E_REPR_PERM, punica, &a, L_PUNICA, &f);
  a.pu.perm[0] = 0;
  a.pu.perm[1] = 1;
  /* vLLM metadata: counts, unstable group, ids out of order */
  a.vl.counts[1] = 1;
  REJECTS(LSIM_E_REPR_METADATA, vllm, &a, L_VLLM, &f);
  a.vl.counts[1] = 2;
  a.vl.sorted_rows[1] = 4;
  a.vl.sorted_rows[2] = 2;
  REJECTS(LSIM_E_REPR_METADATA, vllm, &a, L_VLLM, &f);
  a.vl.sorted_rows[1] = 2;
  a.vl.sorted_rows[2] = 4;
  a.vl.active_ids[1] = 1;
  a.vl.active_ids[2] = 0;
  REJECTS(LSIM_E_REPR_METADATA, vllm, &a, L_VLLM, &f);
  a.vl.active_ids[1] = 0;
  a.vl.active_ids[2] = 1;
  a.vl.nids = 2; /* groups no longer cover the rows */
  REJECTS(LSIM_E_REPR_METADATA, vllm, &a, L_VLLM, &f);
  a.vl.nids = 3;
  /* PEFT: a sub-batch out of row order, a row gathered twice */
  a.pf.sub_rows[2] = 4;
  a.pf.sub_rows[3] = 2;
  REJECTS(LSIM_E_REPR_PERM, peft, &a, L_PEFT, &f);
  a.pf.sub_rows[3] = 4;
  REJECTS(LSIM_E_REPR_PERM, peft, &a, L_PEFT, &f);
  a.pf.sub_rows[2] = 2;
  /* |adapter_names| must equal X's rows; X and base shapes */
  lsim_qmat X4 = LSIM_QMAT_INIT, o = LSIM_QMAT_INIT, bad = LSIM_QMAT_INIT;
  qm(&X4, 4, DIN, "1 1 0 -2 | -1 2 0 -2 | 0 3 0 -3 | 0 -1 0 1");
  qm(&bad, T, 3, "0 0 0 | 0 0 0 | 0 0 0 | 0 0 0 | 0 0 0");
  for (int w = 0; w < L__COUNT; w++) {
    FAILS(LSIM_E_SHAPE, eval_one(&a, w, &X4, NULL, &o, eb));
    FAILS(LSIM_E_SHAPE, eval_one(&a, w, &f.X, &bad, &o, eb));
    FAILS(LSIM_E_SHAPE, eval_one(&a, w, &f.X, NULL, &bad, eb));
    cr_assert_null(o.v);
  }
  lsim_qmat_clear(&X4);
  lsim_qmat_clear(&bad);
  for (int w = 0; w < L__COUNT; w++)
    exact_table(&a, w, &f);
  all4_release(&a);
  all4_release(&a); /* releasing twice is harmless */
  l10fx_fini(&f);
}

/* ======================================================================== */
/* 5. property: seeded random batches, all four against cpu_ref             */
/* ======================================================================== */
/*
** Random d_in, d_out, 1..4 adapters with sparse ids, ranks 1..3 and
** rational entries; 1..12 rows with random adapters or base, one-row
** decode requests.  Punica's single rank forces one rank per batch, so
** every adapter of a batch gets the same rank there; the other three run
** with mixed ranks too.  Every layout must equal lsim_ref_delta_all, and
** every base row must stay exactly zero.
*/
static void rq(lsim_rng *r, mpq_ptr q) {
  long num = (long)lsim_rng_below(r, 19) - 9;
  unsigned long den = 1 + (unsigned long)lsim_rng_below(r, 4);
  mpq_set_si(q, num, den);
  mpq_canonicalize(q);
}

static void prop_run(uint64_t seed, int mixed) {
  lsim_rng g;
  lsim_rng_init(&g, seed, LSIM_RNG_TENSORS);
  int d_in = 1 + (int)lsim_rng_below(&g, 5);
  int d_out = 1 + (int)lsim_rng_below(&g, 5);
  int nad = 1 + (int)lsim_rng_below(&g, 4);
  int n = 1 + (int)lsim_rng_below(&g, 12);
  int r0 = 1 + (int)lsim_rng_below(&g, 3), maxr = 0;
  lsim_qadapter ad[4];
  const char *mods[4] = {"m0", "m1", "m2", "m3"};
  int64_t cat[4], table[5] = {0, 0, 0, 0, 0};
  memset(ad, 0, sizeof ad);
  for (int k = 0; k < nad; k++) {
    int rank = mixed ? 1 + (int)lsim_rng_below(&g, 3) : r0;
    maxr = rank > maxr ? rank : maxr;
    OK(lsim_qadapter_init(&ad[k], 2 * k + (int)lsim_rng_below(&g, 2), rank,
                          d_in, d_out, eb));
    rq(&g, ad[k].scale);
    for (int e = 0; e < rank * d_in; e++)
      rq(&g, ad[k].A.v[e]);
    for (int e = 0; e < rank * d_out; e++)
      rq(&g, ad[k].B.v[e]);
    cat[k] = 100 + 7 * k;
  }
  /* nad + 1 slots, one left empty, the placement rotated per seed */
  int off = (int)lsim_rng_below(&g, (uint64_t)nad + 1);
  for (int k = 0; k < nad; k++)
    table[(k + 1 + off) % (nad + 1)] = cat[k];
  int rows[12];
  const char *names[12];
  int64_t req[12];
  lsim_plan_entry e[12];
  memset(e, 0, sizeof e);
  for (int i = 0; i < n; i++) {
    int k = (int)lsim_rng_below(&g, (uint64_t)nad + 1) - 1; /* -1 base */
    rows[i] = k < 0 ? BASE : ad[k].id;
    names[i] = k < 0 ? LSIM_REPR_BASE_NAME : mods[k];
    req[i] = k < 0 ? -1 : cat[k];
    e[i].request = i;
    e[i].adapter = rows[i];
    e[i].rank = k < 0 ? 0 : ad[k].rank;
    e[i].phase = LSIM_PHASE_DECODE;
    e[i].rows = 1;
  }
  lsim_qmat X = LSIM_QMAT_INIT, ref = LSIM_QMAT_INIT;
  OK(lsim_qmat_init(&X, n, d_in, eb));
  for (int k = 0; k < n * d_in; k++)
    rq(&g, X.v[k]);
  lsim_rowplan p = LSIM_ROWPLAN_INIT;
  OK(lsim_rowplan_build(&p, e, n, NULL, 0, eb));
  OK(lsim_ref_delta_all(&p, &X, ad, nad, &ref, eb));
  int fl[16];
  for (int c = 0; c < 16; c++)
    fl[c] = c;
  for (int c = 15; c > 0; c--) {
    int j = (int)lsim_rng_below(&g, (uint64_t)c + 1), t = fl[c];
    fl[c] = fl[j];
    fl[j] = t;
  }
  all4 a;
  memset(&a, 0, sizeof a);
  if (!mixed)
    OK(lsim_repr_punica_build(&a.pu, rows, n, ad, nad, d_in, d_out, eb));
  OK(lsim_repr_slora_build(&a.sl, rows, n, ad, nad, d_in, d_out, 16, fl, eb));
  OK(lsim_repr_peft_build(&a.pf, names, n, mods, ad, nad, d_in, d_out, eb));
  OK(lsim_repr_vllm_build(&a.vl, req, n, cat, ad, nad, table, nad + 1,
                          maxr + (int)lsim_rng_below(&g, 3), d_in, d_out,
                          eb));
  for (int w = mixed ? L_SLORA : L_PUNICA; w < L__COUNT; w++) {
    lsim_qmat d = LSIM_QMAT_INIT;
    OK(eval_one(&a, w, &X, NULL, &d, eb));
    lsim_errbuf eb = LSIM_ERRBUF_INIT;
    cr_assert_eq(lsim_ref_compare(&ref, &d, LNAME[w], &eb), 0,
                 "seed %llu: %s", (unsigned long long)seed, eb.msg);
    for (int i = 0; i < n; i++)
      for (int c = 0; rows[i] == BASE && c < d_out; c++)
        cr_assert_eq(mpq_sgn(LSIM_QAT(&d, i, c)), 0);
    lsim_qmat_clear(&d);
  }
  all4_release(&a);
  lsim_rowplan_release(&p);
  lsim_qmat_clear(&X);
  lsim_qmat_clear(&ref);
  for (int k = 0; k < nad; k++)
    lsim_qadapter_clear(&ad[k]);
}

Test(property, random_batches_one_rank) {
  for (uint64_t s = 1; s <= 150; s++)
    prop_run(s, 0);
}

Test(property, random_batches_mixed_ranks) {
  for (uint64_t s = 1000; s < 1150; s++)
    prop_run(s, 1);
}

Test(names, layout_codes_are_stable) {
  static const struct {
    lsim_err code;
    int value;
    const char *name;
  } c[] = {
      {LSIM_E_REPR_SEGMENT, -174, "E_REPR_SEGMENT"},
      {LSIM_E_REPR_PERM, -175, "E_REPR_PERM"},
      {LSIM_E_REPR_SEG_IDENTITY, -176, "E_REPR_SEG_IDENTITY"},
      {LSIM_E_REPR_POINTER, -177, "E_REPR_POINTER"},
      {LSIM_E_REPR_FIXED_RANK, -178, "E_REPR_FIXED_RANK"},
      {LSIM_E_REPR_INDEX, -179, "E_REPR_INDEX"},
      {LSIM_E_REPR_LOCATION, -180, "E_REPR_LOCATION"},
      {LSIM_E_REPR_NAME, -181, "E_REPR_NAME"},
      {LSIM_E_REPR_REQUEST_ID, -182, "E_REPR_REQUEST_ID"},
      {LSIM_E_REPR_SLOT, -183, "E_REPR_SLOT"},
      {LSIM_E_REPR_METADATA, -184, "E_REPR_METADATA"},
      {LSIM_E_REPR_SENTINEL, -185, "E_REPR_SENTINEL"},
  };
  for (int k = 0; k < NELEM(c); k++) {
    cr_assert_eq(c[k].code, c[k].value);
    cr_assert_str_eq(lsim_err_name(c[k].code), c[k].name);
  }
  cr_assert_eq(LSIM_E_SLOT_RANK, -173);
}
