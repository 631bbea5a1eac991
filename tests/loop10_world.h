/*
** loop10_world.h: the article's five-row loop-10 transaction (two adapters,
** one base row) in the four backend representations of
** backends/cpu_ref/repr.c, shared by test_loop10.c and the loop-10 rows of
** test_typed_failures.c.  Include it after the file's `qm` (exact matrix
** from a spec string) and `OK` (assert a call returns 0) helpers.
*/
#ifndef LSIM_LOOP10_WORLD_H
#define LSIM_LOOP10_WORLD_H

static const char *const L10_X = "1 1 0 -2 | -1 2 0 -2 | 0 3 0 -3 |"
                                 "0 -1 0 1 | 0 1 1 0";
static const char *const L10_W = "2 -6 8 -7 | -3 -1 5 -2 | 4 5 1 4 |"
                                 "1 4 4 3";
static const char *const L10_AA = "2 -1 0 -1 | -1 1 0 0";
static const char *const L10_BA = "2 1 | 1 -1 | 0 2 | -1 0";
static const char *const L10_AB = "0 1 0 0 | 0 1 -1 -1";
static const char *const L10_BB = "4 -1 | 1 0 | 2 -1 | -1 0";
static const char *const L10_BASE = "10 0 1 -1 | 0 5 -2 1 | 3 3 3 3 |"
                                    "-1 -1 -1 -1 | 2 4 6 8";
/* the article's table (0x0AF) */
static const char *const L10_DELTA = "3 3/2 0 -3/2 | -1/2 -5/2 3 1 |"
                                     "9 9/2 0 -9/2 | 0 0 0 0 |"
                                     "6 3/2 3 -3/2";
static const char *const L10_Y = "13 3/2 1 -5/2 | -1/2 5/2 1 2 |"
                                 "12 15/2 3 -3/2 | -1 -1 -1 -1 |"
                                 "8 11/2 9 13/2";

enum { T = 5, DIN = 4, DOUT = 4, ID_A = 1, ID_B = 2, VR = 4 };
static const int ROWS[T] = {ID_A, ID_A, ID_B, BASE, ID_B};
static const char *const NAMES[T] = {"A", "A", "B", LSIM_REPR_BASE_NAME, "B"};
static const char *const MODS[2] = {"A", "B"};
static const int64_t REQ[T] = {11, 11, 22, -1, 22};
static const int64_t CAT[2] = {11, 22};
static const int64_t SLOTS[2] = {22, 11}; /* B in slot 0, A in slot 1 */

typedef struct l10fx {
  lsim_qmat X, W, base, delta, Y;
  lsim_qadapter ad[2]; /* [0] A, [1] B */
  lsim_rowplan p;
} l10fx;

static void l10fx_init(l10fx *f) {
  memset(f, 0, sizeof *f);
  qm(&f->X, T, DIN, L10_X);
  qm(&f->W, DOUT, DIN, L10_W);
  qm(&f->base, T, DOUT, L10_BASE);
  qm(&f->delta, T, DOUT, L10_DELTA);
  qm(&f->Y, T, DOUT, L10_Y);
  adapter(&f->ad[0], ID_A, 2, DIN, DOUT, L10_AA, L10_BA, "1/2");
  adapter(&f->ad[1], ID_B, 2, DIN, DOUT, L10_AB, L10_BB, "3/2");
  /* five one-row decode requests, packed in scheduler order */
  lsim_plan_entry e[T];
  memset(e, 0, sizeof e);
  for (int i = 0; i < T; i++) {
    e[i].request = 100 + i;
    e[i].adapter = ROWS[i];
    e[i].rank = ROWS[i] == BASE ? 0 : 2;
    e[i].phase = LSIM_PHASE_DECODE;
    e[i].rows = 1;
  }
  OK(lsim_rowplan_build(&f->p, e, T, NULL, 0, eb));
}

static void l10fx_fini(l10fx *f) {
  lsim_qmat_clear(&f->X);
  lsim_qmat_clear(&f->W);
  lsim_qmat_clear(&f->base);
  lsim_qmat_clear(&f->delta);
  lsim_qmat_clear(&f->Y);
  lsim_qadapter_clear(&f->ad[0]);
  lsim_qadapter_clear(&f->ad[1]);
  lsim_rowplan_release(&f->p);
}

static void build_punica(lsim_repr_punica *r, const l10fx *f) {
  OK(lsim_repr_punica_build(r, ROWS, T, f->ad, 2, DIN, DOUT, eb));
}
static void build_slora(lsim_repr_slora *r, const l10fx *f, const int *free_cells,
                        int ncells) {
  OK(lsim_repr_slora_build(r, ROWS, T, f->ad, 2, DIN, DOUT, ncells,
                           free_cells, eb));
}
static void build_peft(lsim_repr_peft *r, const l10fx *f) {
  OK(lsim_repr_peft_build(r, NAMES, T, MODS, f->ad, 2, DIN, DOUT, eb));
}
static void build_vllm(lsim_repr_vllm *r, const l10fx *f, const int64_t *table) {
  OK(lsim_repr_vllm_build(r, REQ, T, CAT, f->ad, 2, table, 2, VR, DIN, DOUT,
                          eb));
}

/* The four evaluations behind one signature, for loops over layouts. */
enum { L_PUNICA, L_SLORA, L_PEFT, L_VLLM, L__COUNT };
static const char *const LNAME[L__COUNT] = {"punica", "slora", "peft", "vllm"};

typedef struct all4 {
  lsim_repr_punica pu;
  lsim_repr_slora sl;
  lsim_repr_peft pf;
  lsim_repr_vllm vl;
} all4;

static void all4_build(all4 *a, const l10fx *f) {
  build_punica(&a->pu, f);
  build_slora(&a->sl, f, NULL, 4);
  build_peft(&a->pf, f);
  build_vllm(&a->vl, f, SLOTS);
}

static void all4_release(all4 *a) {
  lsim_repr_punica_release(&a->pu);
  lsim_repr_slora_release(&a->sl);
  lsim_repr_peft_release(&a->pf);
  lsim_repr_vllm_release(&a->vl);
}

static lsim_err eval_one(const all4 *a, int which, const lsim_qmat *X,
                         const lsim_qmat *base, lsim_qmat *out,
                         lsim_errbuf *eb) {
  switch (which) {
  case L_PUNICA:
    return lsim_repr_punica_eval(&a->pu, X, base, out, eb);
  case L_SLORA:
    return lsim_repr_slora_eval(&a->sl, X, base, out, eb);
  case L_PEFT:
    return lsim_repr_peft_eval(&a->pf, X, base, out, eb);
  default:
    return lsim_repr_vllm_eval(&a->vl, X, base, out, eb);
  }
}

#endif /* LSIM_LOOP10_WORLD_H */
