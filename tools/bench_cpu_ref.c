/*
** bench_cpu_ref.c: wall time of exact cpu_ref evaluation (integer mode).
**
**   bench_cpu_ref [--rows T] [--din N] [--dout N] [--rank R] [--adapters A]
**                 [--mag V] [--runs K] [--no-base] [--gmp-rows G] [--seed S]
**
** Defaults: the target shape, T = 256 packed rows (16 prefills of
** 12 rows, then 64 decodes), d_in = d_out = 4096, 32 adapters of rank 16,
** integer entries uniform in [-100, 100], scales in {1/2, 3/4, 1, 2}, every
** adapter used, one thread.  For each measured step it prints the median
** (and min, max) wall seconds of K >= 5 runs:
**
**   delta/<path>      lsim_ref_delta, AUTO tier, scale passed (qmat in,
**                     canonical qmat out: conversions included)
**   delta/padded resident  lsim_ref_delta_slots over slots loaded once
**                     (delta/padded loads fresh mpq slots on every call)
**   delta/sgmv/<mode> the two folded scale placements
**   base              lsim_ref_base, AUTO tier (X W^T, 256 x 4096 x 4096)
**   base+delta        lsim_ref_base + lsim_ref_delta(sgmv) + lsim_qmat_add
**
** Every path's delta is compared exactly with per_row's before timing is
** reported.  --gmp-rows G additionally times the GMP tier on the first G
** rows' worth of requests (a plan of its own) to show the gap.
** Setup (random tensors, plan) is not timed.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../backends/cpu_ref/cpu_ref.h"
#include "../engine/rowplan.h"
#include "../base/rng.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void die(const char *what, lsim_err rc, const lsim_errbuf *eb) {
  fprintf(stderr, "bench_cpu_ref: %s: %s: %s\n", what, lsim_err_name(rc),
          eb->msg);
  exit(1);
}

static void fill(lsim_rng *r, lsim_qmat *m, int mag) {
  size_t n = (size_t)m->rows * (size_t)m->cols;
  for (size_t k = 0; k < n; k++)
    mpq_set_si(m->v[k], (long)lsim_rng_below(r, 2 * (uint64_t)mag + 1) - mag,
               1);
}

static void report(const char *name, double *t, int runs) {
  qsort(t, (size_t)runs, sizeof *t, cmp_d);
  printf("| %-22s | %9.4f | %9.4f | %9.4f |\n", name, t[runs / 2], t[0],
         t[runs - 1]);
  fflush(stdout);
}

int main(int argc, char **argv) {
  int T = 256, din = 4096, dout = 4096, rank = 16, nad = 32, mag = 100;
  int runs = 5, base = 1, gmp_rows = 0;
  uint64_t seed = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define OPT(flag, var)                  \
  if (strcmp(a, flag) == 0 && v) {      \
    var = atoi(v);                      \
    i++;                                \
    continue;                           \
  }
    OPT("--rows", T)
    OPT("--din", din)
    OPT("--dout", dout)
    OPT("--rank", rank)
    OPT("--adapters", nad)
    OPT("--mag", mag)
    OPT("--runs", runs)
    OPT("--gmp-rows", gmp_rows)
#undef OPT
    if (strcmp(a, "--seed") == 0 && v) {
      seed = strtoull(v, NULL, 10);
      i++;
      continue;
    }
    if (strcmp(a, "--no-base") == 0) {
      base = 0;
      continue;
    }
    fprintf(stderr, "usage: bench_cpu_ref [--rows T] [--din N] [--dout N] "
                    "[--rank R] [--adapters A] [--mag V] [--runs K] "
                    "[--no-base] [--gmp-rows G] [--seed S]\n");
    return 2;
  }
  if (runs < 1 || T < 1 || nad < 1 || rank < 1) {
    fprintf(stderr, "bench_cpu_ref: sizes and runs must be positive\n");
    return 2;
  }
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_err rc;
  lsim_rng r;
  lsim_rng_init(&r, seed, LSIM_RNG_TENSORS);

  /* requests: 16 prefills of 12 rows (192 rows) then decodes, adapters
  ** round-robin so every adapter is used, then shuffled */
  int npre = T >= 256 ? 16 : T / 16, prows = 12;
  if (npre * prows > T)
    npre = 0;
  int ndec = T - npre * prows, n = npre + ndec;
  lsim_plan_entry *e = calloc((size_t)n, sizeof *e);
  int *ids = malloc((size_t)n * sizeof *ids);
  for (int k = 0; k < n; k++)
    ids[k] = k % nad;
  for (int k = n - 1; k > 0; k--) {
    int j = (int)lsim_rng_below(&r, (uint64_t)k + 1), t = ids[k];
    ids[k] = ids[j];
    ids[j] = t;
  }
  for (int k = 0; k < n; k++) {
    e[k].request = k;
    e[k].adapter = ids[k];
    e[k].rank = rank;
    e[k].phase = k < npre ? LSIM_PHASE_PREFILL : LSIM_PHASE_DECODE;
    e[k].rows = k < npre ? prows : 1;
  }
  lsim_rowplan p;
  if ((rc = lsim_rowplan_build(&p, e, n, NULL, 0, &eb)))
    die("plan", rc, &eb);

  static const char *const scales[4] = {"1/2", "3/4", "1", "2"};
  lsim_qadapter *ad = calloc((size_t)nad, sizeof *ad);
  for (int k = 0; k < nad; k++) {
    if ((rc = lsim_qadapter_init(&ad[k], k, rank, din, dout, &eb)))
      die("adapter", rc, &eb);
    fill(&r, &ad[k].A, mag);
    fill(&r, &ad[k].B, mag);
    lsim_q_parse(ad[k].scale, scales[k % 4], &eb);
  }
  lsim_qmat X = LSIM_QMAT_INIT, W = LSIM_QMAT_INIT;
  if ((rc = lsim_qmat_init(&X, p.T, din, &eb)))
    die("X", rc, &eb);
  fill(&r, &X, mag);
  double t0 = now_s();
  if (base) {
    if ((rc = lsim_qmat_init(&W, dout, din, &eb)))
      die("W", rc, &eb);
    fill(&r, &W, mag);
  }
  double setup = now_s() - t0;

  printf("cpu_ref benchmark: T=%d (prefills %dx%d, decodes %d), d_in=%d, "
         "d_out=%d, %d adapters of rank %d, entries in [-%d, %d], %d runs, "
         "W setup %.1f s (untimed)\n\n",
         p.T, npre, prows, ndec, din, dout, nad, rank, mag, mag, runs, setup);
  printf("| %-22s | %9s | %9s | %9s |\n", "step", "median s", "min s",
         "max s");
  printf("|%s|%s|%s|%s|\n", "------------------------", "----------:",
         "----------:", "----------:");

  double *t = malloc((size_t)runs * sizeof *t);
  lsim_qmat ref = LSIM_QMAT_INIT, d = LSIM_QMAT_INIT;
  for (int path = 0; path < LSIM_REF__COUNT; path++) {
    int used = -1;
    for (int k = 0; k < runs; k++) {
      lsim_qmat_clear(&d);
      double a = now_s();
      rc = lsim_ref_delta_ex(&p, &X, ad, nad, path, LSIM_SCALE_PASSED,
                             LSIM_NUM_AUTO, NULL, &used, &d, &eb);
      t[k] = now_s() - a;
      if (rc)
        die(lsim_ref_path_name(path), rc, &eb);
    }
    if (used != LSIM_NUM_INT64)
      fprintf(stderr, "note: %s ran in the %s tier\n",
              lsim_ref_path_name(path), lsim_num_mode_name(used));
    if (path == LSIM_REF_PER_ROW) {
      ref = d;
      d = (lsim_qmat)LSIM_QMAT_INIT;
    } else if ((rc = lsim_ref_compare(&ref, &d, lsim_ref_path_name(path),
                                      &eb))) {
      die("compare", rc, &eb);
    }
    char name[40];
    snprintf(name, sizeof name, "delta/%s", lsim_ref_path_name(path));
    report(name, t, runs);
  }
  {
    /* padded execution from resident slots (loaded once, untimed): what a
    ** launch costs once the slots are resident, without the slot loads
    ** that delta/padded repeats on every call */
    lsim_qslot *slots = calloc((size_t)nad, sizeof *slots);
    for (int k = 0; k < nad; k++)
      if ((rc = lsim_qslot_init(&slots[k], p.phys_rank, din, dout, &eb)) ||
          (rc = lsim_qslot_load(&slots[k], &ad[k], LSIM_SCALE_FOLD_B, &eb)))
        die("slot", rc, &eb);
    for (int k = 0; k < runs; k++) {
      lsim_qmat_clear(&d);
      double a = now_s();
      rc = lsim_ref_delta_slots(&p, &X, slots, nad, LSIM_SCALE_FOLD_B,
                                LSIM_NUM_AUTO, NULL, &d, &eb);
      t[k] = now_s() - a;
      if (rc)
        die("slots", rc, &eb);
    }
    if ((rc = lsim_ref_compare(&ref, &d, "resident slots", &eb)))
      die("compare", rc, &eb);
    report("delta/padded resident", t, runs);
    for (int k = 0; k < nad; k++)
      lsim_qslot_release(&slots[k]);
    free(slots);
  }
  for (int m = LSIM_SCALE_FOLD_A; m < LSIM_SCALE__COUNT; m++) {
    for (int k = 0; k < runs; k++) {
      lsim_qmat_clear(&d);
      double a = now_s();
      rc = lsim_ref_delta(&p, &X, ad, nad, LSIM_REF_SGMV, m, &d, &eb);
      t[k] = now_s() - a;
      if (rc)
        die("fold", rc, &eb);
    }
    if ((rc = lsim_ref_compare(&ref, &d, lsim_scale_mode_name(m), &eb)))
      die("compare", rc, &eb);
    char name[40];
    snprintf(name, sizeof name, "delta/sgmv/%s", lsim_scale_mode_name(m));
    report(name, t, runs);
  }
  if (base) {
    lsim_qmat y = LSIM_QMAT_INIT;
    int used = -1;
    for (int k = 0; k < runs; k++) {
      lsim_qmat_clear(&y);
      double a = now_s();
      rc = lsim_ref_base_ex(&X, &W, LSIM_NUM_AUTO, &used, &y, &eb);
      t[k] = now_s() - a;
      if (rc)
        die("base", rc, &eb);
    }
    char name[40];
    snprintf(name, sizeof name, "base (%s)", lsim_num_mode_name(used));
    report(name, t, runs);
    for (int k = 0; k < runs; k++) {
      lsim_qmat_clear(&y);
      lsim_qmat_clear(&d);
      double a = now_s();
      if ((rc = lsim_ref_base(&X, &W, &y, &eb)) ||
          (rc = lsim_ref_delta(&p, &X, ad, nad, LSIM_REF_SGMV,
                               LSIM_SCALE_PASSED, &d, &eb)) ||
          (rc = lsim_qmat_add(&y, &d, &eb)))
        die("base+delta", rc, &eb);
      t[k] = now_s() - a;
    }
    report("base+delta (sgmv)", t, runs);
    lsim_qmat_clear(&y);
  }
  if (gmp_rows > 0) {
    /* the GMP tier on a prefix of decode-only requests */
    int g = gmp_rows < p.T ? gmp_rows : p.T;
    lsim_plan_entry *ge = calloc((size_t)g, sizeof *ge);
    for (int k = 0; k < g; k++) {
      ge[k] = e[0];
      ge[k].request = k;
      ge[k].adapter = k % nad;
      ge[k].phase = LSIM_PHASE_DECODE;
      ge[k].rows = 1;
    }
    lsim_rowplan gp;
    lsim_qmat gx = LSIM_QMAT_INIT, gd = LSIM_QMAT_INIT, id = LSIM_QMAT_INIT;
    if ((rc = lsim_rowplan_build(&gp, ge, g, NULL, 0, &eb)) ||
        (rc = lsim_qmat_init(&gx, g, din, &eb)))
      die("gmp plan", rc, &eb);
    for (int i = 0; i < g; i++)
      for (int j = 0; j < din; j++)
        mpq_set(LSIM_QAT(&gx, i, j), LSIM_QAT(&X, i, j));
    double a = now_s();
    if ((rc = lsim_ref_delta_ex(&gp, &gx, ad, nad, LSIM_REF_SGMV,
                                LSIM_SCALE_PASSED, LSIM_NUM_GMP, NULL, NULL,
                                &gd, &eb)))
      die("gmp", rc, &eb);
    double tg = now_s() - a;
    a = now_s();
    if ((rc = lsim_ref_delta(&gp, &gx, ad, nad, LSIM_REF_SGMV,
                             LSIM_SCALE_PASSED, &id, &eb)))
      die("int", rc, &eb);
    double ti = now_s() - a;
    if ((rc = lsim_ref_compare(&gd, &id, "gmp vs int64", &eb)))
      die("compare", rc, &eb);
    printf("\nGMP tier, %d decode rows, one run: %.3f s (int64 tier %.4f s, "
           "%.0fx; results identical)\n",
           g, tg, ti, ti > 0 ? tg / ti : 0.0);
    lsim_qmat_clear(&gx);
    lsim_qmat_clear(&gd);
    lsim_qmat_clear(&id);
    lsim_rowplan_release(&gp);
    free(ge);
  }
  free(t);
  lsim_qmat_clear(&ref);
  lsim_qmat_clear(&d);
  lsim_qmat_clear(&X);
  lsim_qmat_clear(&W);
  for (int k = 0; k < nad; k++)
    lsim_qadapter_clear(&ad[k]);
  free(ad);
  free(e);
  free(ids);
  lsim_rowplan_release(&p);
  return 0;
}
