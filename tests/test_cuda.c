/*
** test_cuda.c: the CUDA backend against cpu_ref (issue 6).
**
** Compiled everywhere; every test skips with a message when the build has
** no CUDA (nvcc absent at configure time) or the machine has no device.
**
**   1. the device self-test
**   2. the planner's exact fixtures (the article's fixed-rank batch, the
**      mixed-phase / mixed-rank batch in both packings) through every path
**      and both 16-bit types: Y equals cpu_ref's exact Y bit for bit
**   3. seeded random plans and shapes in integer mode (small integers,
**      dyadic scales, sizes where fp32 accumulation and the 16-bit output
**      are exact): many adapters, base rows, one-row segments, prefills
**      longer than a tile and crossing doff, ranks 1..128, sizes that are
**      not multiples of any tile; every path, three launch settings, bit for
**      bit against lsim_ref_delta
**   4. random bf16 values: relative error against the exact reference,
**      reported and <= 1e-2
**   5. errors are values: unknown adapter, wrong rank, no plan, bad strides,
**      a rank above the tensor-core limit, a corrupted plan
**
** Before every run the shrink workspace is poisoned with NaN, the stride
** padding of X holds NaN, and Y has a guard row on each side and canaries
** in its padding: an unwritten, over-read or stray-written element fails.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef LSIM_HAVE_CUDA
#include "backends/cpu_ref/cpu_ref.h"
#include "backends/cuda/cuda.h"
#include "engine/rowplan.h"
#include "base/rng.h"

#define BASE LSIM_BASE
#define PRE LSIM_PHASE_PREFILL
#define DEC LSIM_PHASE_DECODE
#define MAXAD 48

static void need_gpu(void) {
  char d[256];
  if (lsim_cuda_describe(d, sizeof d) <= 0)
    cr_skip_test("no CUDA device: %s (GPU tests run on the device machine)",
                 d);
}

#define OK(call)                                                        \
  do {                                                                  \
    lsim_errbuf eb_ = LSIM_ERRBUF_INIT;                                 \
    lsim_errbuf *eb = &eb_;                                             \
    lsim_err rc_ = (call);                                              \
    cr_assert_eq(rc_, 0, "%s failed: %s: %s", #call, lsim_err_name(rc_), \
                 eb_.msg);                                              \
  } while (0)

#define FAILS(code, call)                                                 \
  do {                                                                    \
    lsim_errbuf eb_ = LSIM_ERRBUF_INIT;                                   \
    lsim_errbuf *eb = &eb_;                                               \
    lsim_err rc_ = (call);                                                \
    cr_assert_eq(rc_, code, "%s: got %s (%s), want %s", #call,            \
                 lsim_err_name(rc_), eb_.msg, lsim_err_name(code));       \
    cr_assert(eb_.msg[0] && eb_.msg[strlen(eb_.msg) - 1] != '.',          \
              "bad message '%s'", eb_.msg);                               \
  } while (0)

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

/* ---- the harness ------------------------------------------------------ */

/* One batch as the GPU sees it (values exact in the dtype) and the exact
** expected Y (from cpu_ref). */
typedef struct kcase {
  lsim_rowplan p;
  int d_in, d_out, nad, maxid;
  int ids[MAXAD], ranks[MAXAD];
  double scale[MAXAD];
  double *X, *Y0, *A[MAXAD], *B[MAXAD];
  lsim_qmat want; /* [T][d_out] */
} kcase;

static void kcase_free(kcase *c) {
  lsim_rowplan_release(&c->p);
  free(c->X);
  free(c->Y0);
  for (int a = 0; a < c->nad; a++) {
    free(c->A[a]);
    free(c->B[a]);
  }
  lsim_qmat_clear(&c->want);
  memset(c, 0, sizeof *c);
}

static void qm_from(lsim_qmat *m, int rows, int cols, const double *v) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_qmat_init(m, rows, cols, &eb), 0);
  for (size_t k = 0; k < (size_t)rows * (size_t)cols; k++)
    mpq_set_d(m->v[k], v[k]);
}

/* want = Y0 + delta, delta from cpu_ref on the given exact adapters (NULL:
** the case's own factors and scales). */
static void compute_want(kcase *c, const lsim_qadapter *given, int ngiven) {
  lsim_qmat X = LSIM_QMAT_INIT, d = LSIM_QMAT_INIT;
  lsim_qadapter ad[MAXAD];
  const lsim_qadapter *use = given;
  int nuse = ngiven;
  memset(ad, 0, sizeof ad);
  qm_from(&X, c->p.T, c->d_in, c->X);
  if (!given) {
    for (int a = 0; a < c->nad; a++) {
      ad[a].id = c->ids[a];
      ad[a].rank = c->ranks[a];
      mpq_init(ad[a].scale);
      mpq_set_d(ad[a].scale, c->scale[a]);
      qm_from(&ad[a].A, c->ranks[a], c->d_in, c->A[a]);
      qm_from(&ad[a].B, c->d_out, c->ranks[a], c->B[a]);
    }
    use = ad;
    nuse = c->nad;
  }
  lsim_qmat_clear(&c->want);
  qm_from(&c->want, c->p.T, c->d_out, c->Y0);
  OK(lsim_qmat_init(&d, c->p.T, c->d_out, eb));
  OK(lsim_ref_delta(&c->p, &X, use, nuse, LSIM_REF_PER_ROW, LSIM_SCALE_PASSED,
                    &d, eb));
  OK(lsim_qmat_add(&c->want, &d, eb));
  lsim_qmat_clear(&X);
  lsim_qmat_clear(&d);
  if (!given)
    for (int a = 0; a < c->nad; a++)
      lsim_qadapter_clear(&ad[a]);
}

/* 1 when every expected entry is exactly a value of the dtype. */
static int want_fits(const kcase *c, int dtype) {
  mpq_t q;
  int ok = 1;
  mpq_init(q);
  for (size_t k = 0; ok && k < (size_t)c->p.T * (size_t)c->d_out; k++) {
    double v = mpq_get_d(c->want.v[k]);
    double r = lsim_cuda_to_float(dtype, lsim_cuda_from_float(dtype, (float)v));
    mpq_set_d(q, r);
    ok = mpq_equal(q, c->want.v[k]) != 0;
  }
  mpq_clear(q);
  return ok;
}

static int round8(int n) { return (n + 7) & ~7; }

/*
** The paged layout of the device pool, built by hand: every factor row of
** every adapter on its own page of a pool whose pages are handed out in a
** random order (fragmented), the rest of each used page zero (the pool's
** page images are zero padded) and unused pages NaN, so a row read through
** a wrong page-table entry poisons Y.  The page is wider than the padded
** rows of the contiguous layout, so a kernel that used the contiguous
** stride would read the wrong row too.
*/
typedef struct pgpool {
  void *dpool;
  int32_t *dptab; /* every adapter's table, one after the other */
  lsim_cuda_paged_ref *ref; /* [maxid + 1] */
  int H;
} pgpool;

static void pgpool_make(pgpool *g, const kcase *c, int dtype, uint64_t seed) {
  const int H = round8(c->d_in > c->d_out ? c->d_in : c->d_out) + 8;
  int np = 5, nt = 0;
  for (int a = 0; a < c->nad; a++)
    np += 2 * c->ranks[a];
  lsim_rng r;
  lsim_rng_init(&r, seed, LSIM_RNG_TENSORS);
  int *perm = malloc((size_t)np * sizeof *perm);
  for (int i = 0; i < np; i++)
    perm[i] = i;
  for (int i = np - 1; i > 0; i--) {
    int j = (int)lsim_rng_below(&r, (uint64_t)i + 1), t = perm[i];
    perm[i] = perm[j], perm[j] = t;
  }
  uint16_t *img = malloc((size_t)np * H * 2);
  int32_t *pt = malloc((size_t)(np - 5) * sizeof *pt + 4);
  for (size_t k = 0; k < (size_t)np * H; k++)
    img[k] = 0xFFFFu; /* NaN in both types */
  memset(g, 0, sizeof *g);
  g->H = H;
  g->ref = calloc((size_t)c->maxid + 1, sizeof *g->ref);
  int next = 0;
  size_t off[MAXAD];
  for (int a = 0; a < c->nad; a++) {
    const int rk = c->ranks[a];
    off[a] = (size_t)nt;
    for (int k = 0; k < 2 * rk; k++) {
      const int pg = perm[next++];
      uint16_t *row = img + (size_t)pg * H;
      memset(row, 0, (size_t)H * 2);
      if (k < rk)
        for (int q = 0; q < c->d_in; q++)
          row[q] = lsim_cuda_from_float(dtype,
                                        (float)c->A[a][(size_t)k * c->d_in + q]);
      else
        for (int o = 0; o < c->d_out; o++)
          row[o] = lsim_cuda_from_float(
              dtype, (float)c->B[a][(size_t)o * rk + (k - rk)]);
      pt[nt++] = pg;
    }
  }
  OK(lsim_cuda_malloc(&g->dpool, (size_t)np * H * 2, eb));
  OK(lsim_cuda_malloc((void **)&g->dptab, (size_t)(nt > 0 ? nt : 1) * 4, eb));
  OK(lsim_cuda_h2d(g->dpool, img, (size_t)np * H * 2, eb));
  OK(lsim_cuda_h2d(g->dptab, pt, (size_t)(nt > 0 ? nt : 1) * 4, eb));
  for (int a = 0; a < c->nad; a++) {
    g->ref[c->ids[a]].ptab = g->dptab + off[a];
    g->ref[c->ids[a]].rank = c->ranks[a];
    g->ref[c->ids[a]].scale = (float)c->scale[a];
  }
  free(perm);
  free(img);
  free(pt);
}

static void pgpool_free(pgpool *g) {
  lsim_cuda_free(g->dpool);
  lsim_cuda_free(g->dptab);
  free(g->ref);
}

/* The case's adapters into a context (NULL for the paged layout). */
static void load_all(lsim_cuda_lora *L, const kcase *c, int dtype) {
  for (int a = 0; a < c->nad; a++) {
    size_t na = (size_t)c->ranks[a] * c->d_in, nb = (size_t)c->d_out * c->ranks[a];
    uint16_t *A = malloc(na * 2), *B = malloc(nb * 2);
    for (size_t i = 0; i < na; i++)
      A[i] = lsim_cuda_from_float(dtype, (float)c->A[a][i]);
    for (size_t i = 0; i < nb; i++)
      B[i] = lsim_cuda_from_float(dtype, (float)c->B[a][i]);
    OK(lsim_cuda_lora_load(L, c->ids[a], c->ranks[a], (float)c->scale[a], A,
                           B, eb));
    free(A);
    free(B);
  }
}

/* Layouts of the factors every path is run on. */
enum { LAY_CONTIG = 0, LAY_PADDED, LAY_PAGED, LAY__N };
static const char *const lay_name[LAY__N] = {"contiguous", "padded slots",
                                             "paged"};

/* Runs of the case under the random seeds' layouts: every path under
** three launch settings on the contiguous layout, every path under the
** default settings on the zero-padded slots (pad_rank = the largest rank)
** and on the fragmented paged layout.  LSIM_CUDA_TEST_FAST=1 (the
** sanitizer runs): the default settings only. */
static int fast_mode(void) {
  const char *e = getenv("LSIM_CUDA_TEST_FAST");
  return e && *e && strcmp(e, "0") != 0;
}

/* Run every path under three launch settings; exact: bit-exact against
** want, else the relative error (returned, worst over runs). */
static double run_all(const kcase *c, int dtype, int exact, const char *tag) {
  const int T = c->p.T;
  const int ldx = round8(c->d_in) + (c->d_in % 3 == 0 ? 8 : 0);
  const int ldy = round8(c->d_out);
  const uint16_t xpad = dtype == LSIM_CUDA_FP16 ? 0x7e00 : 0x7fc0; /* NaN */
  const uint16_t canary = 0x5a5a;
  double worst = 0;
  int rmax = 0;
  for (int a = 0; a < c->nad; a++)
    if (c->ranks[a] > rmax)
      rmax = c->ranks[a];
  size_t nx = (size_t)(T > 0 ? T : 1) * ldx, ny = (size_t)(T + 2) * ldy;
  uint16_t *hx = malloc(nx * 2), *hy = malloc(ny * 2), *out = malloc(ny * 2);
  for (size_t k = 0; k < nx; k++)
    hx[k] = xpad;
  for (size_t k = 0; k < ny; k++)
    hy[k] = canary;
  for (int i = 0; i < T; i++) {
    for (int q = 0; q < c->d_in; q++)
      hx[(size_t)i * ldx + q] =
          lsim_cuda_from_float(dtype, (float)c->X[(size_t)i * c->d_in + q]);
    for (int o = 0; o < c->d_out; o++)
      hy[(size_t)(i + 1) * ldy + o] =
          lsim_cuda_from_float(dtype, (float)c->Y0[(size_t)i * c->d_out + o]);
  }
  void *dx = NULL, *dy = NULL;
  OK(lsim_cuda_malloc(&dx, nx * 2, eb));
  OK(lsim_cuda_malloc(&dy, ny * 2, eb));
  OK(lsim_cuda_h2d(dx, hx, nx * 2, eb));
  mpq_t q;
  mpq_init(q);

  for (int lay = 0; lay < LAY__N; lay++) {
    lsim_cuda_lora *L = NULL;
    lsim_cuda_lora_cfg cfg;
    pgpool g;
    memset(&g, 0, sizeof g);
    memset(&cfg, 0, sizeof cfg);
    cfg.dtype = dtype;
    cfg.d_in = c->d_in;
    cfg.d_out = c->d_out;
    cfg.max_adapters = c->maxid + 1;
    cfg.pad_rank = lay == LAY_PADDED ? (rmax > 0 ? rmax : 1) : 0;
    OK(lsim_cuda_lora_open(&L, &cfg, eb));
    if (lay == LAY_PAGED)
      pgpool_make(&g, c, dtype, (uint64_t)T * 131 + (uint64_t)c->d_in);
    else
      load_all(L, c, dtype);
    lsim_cuda_lora_tune tunes[3];
    lsim_cuda_lora_get_tune(L, &tunes[0]);
    tunes[1] = tunes[0];
    tunes[1].shrink_splits = 3;
    tunes[1].expand_cols = 3;
    tunes[1].shrink_rsplit = 2; /* both rank splits forced */
    tunes[1].expand_rsplit = 2;
    tunes[2] = tunes[0];
    tunes[1].expand_order = 2; /* the balanced order, with the split */
    tunes[2].pdl = 0;
    tunes[2].shrink_splits = 2;
    tunes[2].expand_order = 2; /* and without it */
    const int ntunes = lay == LAY_CONTIG && !fast_mode() ? 3 : 1;
    for (int path = 0; path < LSIM_CUDA_PATH__COUNT; path++) {
      const int mma = path == LSIM_CUDA_PATH_SGMV_MMA ||
                      path == LSIM_CUDA_PATH_INDEXED_MMA;
      for (int ti = 0; ti < ntunes; ti++) {
        if (path == LSIM_CUDA_PATH_AUTO && ti > 0)
          continue;
        lsim_cuda_lora_set_tune(L, &tunes[ti]);
#define PLAN(eb)                                                             \
  (lay == LAY_PAGED ? lsim_cuda_lora_plan_paged(L, &c->p, path, g.dpool, g.H, \
                                                g.ref, c->maxid + 1, eb)      \
                    : lsim_cuda_lora_plan(L, &c->p, path, eb))
        if (mma && rmax > 128) {
          FAILS(LSIM_E_USAGE, PLAN(eb));
          continue;
        }
        OK(PLAN(eb));
#undef PLAN
        char d[256];
        lsim_cuda_lora_describe(L, d, sizeof d);
        OK(lsim_cuda_lora_poison(L, eb));
        OK(lsim_cuda_h2d(dy, hy, ny * 2, eb));
        OK(lsim_cuda_lora_run(L, dx, ldx, (uint16_t *)dy + ldy, ldy, eb));
        OK(lsim_cuda_lora_sync(L, eb));
        OK(lsim_cuda_d2h(out, dy, ny * 2, eb));
        double e2 = 0, r2 = 0;
        for (int i = -1; i <= T; i++) {
          const int base = i >= 0 && i < T && c->p.row_adapter[i] == BASE;
          for (int o = 0; o < ldy; o++) {
            const size_t k = (size_t)(i + 1) * ldy + o;
            if (i < 0 || i == T || o >= c->d_out || base) {
              cr_assert_eq(out[k], hy[k],
                           "%s: %s %s tune %d [%s]: %s (%d,%d) changed: "
                           "%04x -> %04x",
                           tag, lay_name[lay], lsim_cuda_path_name(path), ti,
                           d, base ? "base row" : "guard", i, o, hy[k],
                           out[k]);
              continue;
            }
            const double got = lsim_cuda_to_float(dtype, out[k]);
            cr_assert(got == got, "%s: %s %s tune %d [%s]: Y(%d,%d) is NaN",
                      tag, lay_name[lay], lsim_cuda_path_name(path), ti, d, i,
                      o);
            const mpq_t *w = &LSIM_QAT(&c->want, i, o);
            if (exact) {
              mpq_set_d(q, got);
              if (!mpq_equal(q, *w)) {
                char *ws = lsim_q_str(*w);
                cr_assert_fail("%s: %s %s tune %d [%s]: Y(%d,%d) = %.9g, "
                               "cpu_ref %s (adapter %d)",
                               tag, lay_name[lay], lsim_cuda_path_name(path),
                               ti, d, i, o, got, ws, c->p.row_adapter[i]);
              }
            } else {
              const double wd = mpq_get_d(*w);
              e2 += (got - wd) * (got - wd);
              r2 += wd * wd;
            }
          }
        }
        if (!exact) {
          double rel = r2 > 0 ? sqrt(e2 / r2) : 0;
          if (rel > worst)
            worst = rel;
          cr_assert_leq(rel, 1e-2, "%s: %s %s tune %d: relative error %.3e",
                        tag, lay_name[lay], lsim_cuda_path_name(path), ti,
                        rel);
        }
      }
    }
    if (lay == LAY_PAGED)
      pgpool_free(&g);
    lsim_cuda_lora_close(L);
  }
  mpq_clear(q);
  lsim_cuda_free(dx);
  lsim_cuda_free(dy);
  free(hx);
  free(hy);
  free(out);
  return worst;
}

static double *dup_rows(const char *spec, int n) {
  double *v = calloc((size_t)n, sizeof *v);
  char *s = strdup(spec), *save = NULL;
  int k = 0;
  for (char *t = strtok_r(s, " |", &save); t; t = strtok_r(NULL, " |", &save))
    v[k++] = atof(t);
  cr_assert_eq(k, n, "'%s' has %d values, want %d", spec, k, n);
  free(s);
  return v;
}

/* ---- 1. self-test ------------------------------------------------------ */

Test(cuda, selftest_kernel_matches_cpu_exactly) {
  need_gpu();
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_cuda_selftest(1 << 20, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_cuda_selftest(1, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_cuda_selftest(257, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_cuda_selftest(0, &eb), LSIM_E_USAGE);
}

/* ---- 2. the planner's fixtures ------------------------------------------ */

/* Fixture 1 (docs/PLANNER.md): rows [1,2,1,base,2,2,1,base], rank 2, scales
** 1/2 and 2, d_in 4, d_out 3; Y0 = X W^T and the article's Y table. */
Test(fixtures, fixed_rank_every_path_bit_exact) {
  need_gpu();
  static const int ids[8] = {1, 2, 1, BASE, 2, 2, 1, BASE};
  lsim_plan_entry e[8];
  for (int i = 0; i < 8; i++)
    e[i] = ent(100 + i, ids[i], ids[i] == BASE ? 0 : 2, DEC, 1);
  for (int dtype = 0; dtype < 2; dtype++) {
    kcase c;
    memset(&c, 0, sizeof c);
    OK(lsim_rowplan_build(&c.p, e, 8, NULL, 0, eb));
    c.d_in = 4;
    c.d_out = 3;
    c.nad = 2;
    c.maxid = 2;
    c.ids[0] = 1;
    c.ids[1] = 2;
    c.ranks[0] = c.ranks[1] = 2;
    c.scale[0] = 0.5;
    c.scale[1] = 2;
    c.X = dup_rows("1 0 1 0 | 0 1 0 1 | 1 1 0 0 | 2 0 0 1 |"
                   "0 1 1 0 | 1 0 0 1 | 1 1 1 1 | 0 0 2 1",
                   32);
    c.A[0] = dup_rows("1 0 1 0 | 0 1 0 1", 8);
    c.B[0] = dup_rows("1 0 | 0 1 | 1 1", 6);
    c.A[1] = dup_rows("1 1 0 0 | 0 0 1 1", 8);
    c.B[1] = dup_rows("1 1 | 1 -1 | 0 1", 6);
    /* Y0 = X W^T through cpu_ref's exact base projection */
    {
      lsim_qmat X = LSIM_QMAT_INIT, W = LSIM_QMAT_INIT, Y = LSIM_QMAT_INIT;
      double *w = dup_rows("1 0 0 1 | 0 1 1 0 | 1 1 0 0", 12);
      qm_from(&X, 8, 4, c.X);
      qm_from(&W, 3, 4, w);
      OK(lsim_ref_base(&X, &W, &Y, eb));
      c.Y0 = calloc(24, sizeof *c.Y0);
      for (int k = 0; k < 24; k++)
        c.Y0[k] = mpq_get_d(Y.v[k]);
      lsim_qmat_clear(&X);
      lsim_qmat_clear(&W);
      lsim_qmat_clear(&Y);
      free(w);
    }
    compute_want(&c, NULL, 0);
    /* the article's Y table (docs/PLANNER.md, test_cpu_ref.c F1_Y) */
    static const char *const F1_Y[24] = {"2", "1", "2", "5",   "1",   "3",
                                         "3/2", "3/2", "3", "3", "0", "2",
                                         "4", "2", "3", "6",   "0",   "3",
                                         "3", "3", "4", "1",   "2",   "0"};
    for (int k = 0; k < 24; k++) {
      char *s = lsim_q_str(c.want.v[k]);
      cr_assert_str_eq(s, F1_Y[k], "Y[%d][%d] = %s, the article has %s",
                       k / 3, k % 3, s, F1_Y[k]);
      free(s);
    }
    cr_assert(want_fits(&c, dtype));
    run_all(&c, dtype, 1, dtype ? "fixture 1 fp16" : "fixture 1 bf16");
    kcase_free(&c);
  }
}

/*
** Fixture 2 (docs/PLANNER.md): p0 (a, rank 2, 3 rows), p1 (b, rank 3, 2
** rows), d0 (a), d1 (base), d2 (c, rank 1); d_in 3, d_out 2.  cpu_ref gets
** the fixture's own factors (B_b = [[2/3,0,2/3],[0,2/3,-2/3]], s_b = 3/2:
** not representable in 16 bits); the GPU gets the same adapter with the
** scale folded into B (s_b B_b = [[1,0,1],[0,1,-1]], scale 1), which cpu_ref
** proves equal.  Both the reordered packing [p1,p0,d0,d1,d2] and the
** default one.
*/
Test(fixtures, mixed_phase_mixed_rank_every_path_bit_exact) {
  need_gpu();
  static const int reorder[5] = {1, 0, 2, 3, 4};
  static const char *const xs[8] = {"1 0 1", "1 1 0", "0 3 2", "-1 2 -1",
                                    "1 1 1", "4 -4 -1", "5 -7 3", "2 -1 0"};
  /* X rows keyed by (uid, token position) */
  static const int xuid[8] = {10, 10, 10, 11, 11, 12, 13, 14};
  static const int xpos[8] = {0, 1, 2, 0, 1, 0, 0, 0};
  lsim_plan_entry e[5] = {ent(10, 1, 2, PRE, 3), ent(11, 2, 3, PRE, 2),
                          ent(12, 1, 2, DEC, 1), ent(13, BASE, 0, DEC, 1),
                          ent(14, 3, 1, DEC, 1)};
  for (int pk = 0; pk < 2; pk++)
    for (int dtype = 0; dtype < 2; dtype++) {
      kcase c;
      memset(&c, 0, sizeof c);
      OK(lsim_rowplan_build(&c.p, e, 5, pk ? NULL : reorder, 3, eb));
      cr_assert_eq(c.p.doff, 5);
      c.d_in = 3;
      c.d_out = 2;
      c.nad = 3;
      c.maxid = 3;
      c.X = calloc((size_t)c.p.T * 3, sizeof *c.X);
      for (int i = 0; i < c.p.T; i++) {
        int64_t uid = c.p.req_uid[c.p.row_req[i]];
        int hit = 0;
        for (int k = 0; k < 8; k++)
          if (xuid[k] == uid && xpos[k] == c.p.row_pos[i]) {
            double *v = dup_rows(xs[k], 3);
            memcpy(c.X + (size_t)i * 3, v, 3 * sizeof *v);
            free(v);
            hit = 1;
          }
        cr_assert(hit);
      }
      c.Y0 = calloc((size_t)c.p.T * 2, sizeof *c.Y0);
      for (int k = 0; k < c.p.T * 2; k++)
        c.Y0[k] = (double)((k * 7) % 11 - 5);
      c.ids[0] = 1, c.ranks[0] = 2, c.scale[0] = 0.5;
      c.A[0] = dup_rows("1 0 1 | 0 1 -1", 6);
      c.B[0] = dup_rows("1 2 | -1 1", 4);
      c.ids[1] = 2, c.ranks[1] = 3, c.scale[1] = 1;
      c.A[1] = dup_rows("1 1 0 | 0 1 0 | 0 0 1", 9);
      c.B[1] = dup_rows("1 0 1 | 0 1 -1", 6); /* s_b B_b */
      c.ids[2] = 3, c.ranks[2] = 1, c.scale[2] = 2;
      c.A[2] = dup_rows("1 1 1", 3);
      c.B[2] = dup_rows("2 | 1", 2);
      /* cpu_ref on the fixture's own (rational) factors */
      lsim_qadapter ad[3];
      static const char *const qa[3][4] = {
          {"1/2", "1 0 1 0 1 -1", "1 2 -1 1", ""},
          {"3/2", "1 1 0 0 1 0 0 0 1", "2/3 0 2/3 0 2/3 -2/3", ""},
          {"2", "1 1 1", "2 1", ""}};
      for (int a = 0; a < 3; a++) {
        lsim_errbuf eb = LSIM_ERRBUF_INIT;
        cr_assert_eq(lsim_qadapter_init(&ad[a], c.ids[a], c.ranks[a], 3, 2,
                                        &eb),
                     0);
        cr_assert_eq(lsim_q_parse(ad[a].scale, qa[a][0], &eb), 0);
        char *s = strdup(qa[a][1]), *save = NULL;
        int k = 0;
        for (char *t = strtok_r(s, " ", &save); t;
             t = strtok_r(NULL, " ", &save))
          cr_assert_eq(lsim_q_parse(ad[a].A.v[k++], t, &eb), 0);
        free(s);
        s = strdup(qa[a][2]);
        k = 0;
        for (char *t = strtok_r(s, " ", &save); t;
             t = strtok_r(NULL, " ", &save))
          cr_assert_eq(lsim_q_parse(ad[a].B.v[k++], t, &eb), 0);
        free(s);
      }
      compute_want(&c, ad, 3);
      /* the GPU's folded adapters give the same delta exactly */
      {
        kcase f = c;
        lsim_qmat keep = c.want;
        f.want.v = NULL;
        f.want.rows = f.want.cols = 0;
        compute_want(&f, NULL, 0);
        lsim_errbuf eb = LSIM_ERRBUF_INIT;
        cr_assert_eq(lsim_ref_compare(&keep, &f.want, "folded", &eb), 0, "%s",
                     eb.msg);
        lsim_qmat_clear(&f.want);
      }
      cr_assert(want_fits(&c, dtype));
      char tag[64];
      snprintf(tag, sizeof tag, "fixture 2 %s %s", pk ? "default" : "reordered",
               dtype ? "fp16" : "bf16");
      run_all(&c, dtype, 1, tag);
      for (int a = 0; a < 3; a++)
        lsim_qadapter_clear(&ad[a]);
      kcase_free(&c);
    }
}

/* ---- 3, 4. random plans and shapes ----------------------------------------- */

static void random_case(kcase *c, lsim_rng *r, int big) {
  memset(c, 0, sizeof *c);
  c->d_in = lsim_rng_below(r, 5) == 0 ? 1 + (int)lsim_rng_below(r, 8)
                                      : 1 + (int)lsim_rng_below(r, big ? 1500 : 260);
  c->d_out = lsim_rng_below(r, 5) == 0 ? 1 + (int)lsim_rng_below(r, 8)
                                       : 1 + (int)lsim_rng_below(r, big ? 600 : 260);
  c->nad = 1 + (int)lsim_rng_below(r, big ? MAXAD : 8);
  int id = (int)lsim_rng_below(r, 3), maxr = 0;
  for (int a = 0; a < c->nad; a++) {
    c->ids[a] = id;
    id += 1 + (int)lsim_rng_below(r, 3);
    switch (lsim_rng_below(r, 4)) {
    case 0:
      c->ranks[a] = 1 + (int)lsim_rng_below(r, 4);
      break;
    case 1:
      c->ranks[a] = 1 + (int)lsim_rng_below(r, 128);
      break;
    case 2:
      c->ranks[a] = 16 * (1 + (int)lsim_rng_below(r, 8));
      break;
    default:
      c->ranks[a] = 1 + (int)lsim_rng_below(r, 40);
    }
    if (c->ranks[a] > maxr)
      maxr = c->ranks[a];
    c->scale[a] = ldexp(1.0, (int)lsim_rng_below(r, 4) - 2);
  }
  c->maxid = id;
  int n = 1 + (int)lsim_rng_below(r, big ? 24 : 12), np = 0, nd = 0;
  lsim_plan_entry e[24];
  int pre[24], dec[24], packed[24];
  for (int i = 0; i < n; i++) {
    int phase = lsim_rng_below(r, 2) ? PRE : DEC, rows = 1;
    if (phase == PRE)
      rows = lsim_rng_below(r, 3) == 0 ? 1 + (int)lsim_rng_below(r, big ? 150 : 70)
                                       : 1 + (int)lsim_rng_below(r, 9);
    if (lsim_rng_below(r, 4) == 0) {
      e[i] = ent(100 + i, BASE, 0, phase, rows);
    } else {
      int a = (int)lsim_rng_below(r, (uint64_t)c->nad);
      e[i] = ent(100 + i, c->ids[a], c->ranks[a], phase, rows);
    }
    if (phase == PRE)
      pre[np++] = i;
    else
      dec[nd++] = i;
  }
  for (int i = np - 1; i > 0; i--) {
    int j = (int)lsim_rng_below(r, (uint64_t)i + 1), t = pre[i];
    pre[i] = pre[j], pre[j] = t;
  }
  for (int i = nd - 1; i > 0; i--) {
    int j = (int)lsim_rng_below(r, (uint64_t)i + 1), t = dec[i];
    dec[i] = dec[j], dec[j] = t;
  }
  memcpy(packed, pre, (size_t)np * sizeof(int));
  memcpy(packed + np, dec, (size_t)nd * sizeof(int));
  int R = lsim_rng_below(r, 2) ? 0 : maxr + (int)lsim_rng_below(r, 3);
  OK(lsim_rowplan_build(&c->p, e, n, packed, R, eb));
}

/* Integer values, a fraction rho of them non-zero. */
static void fill_integer(kcase *c, lsim_rng *r, double rho) {
  const int T = c->p.T;
#define RV(mag)                                                               \
  (lsim_rng_unit(r) >= rho                                                    \
       ? 0.0                                                                  \
       : (lsim_rng_below(r, 2) ? 1.0 : -1.0) *                                \
             (double)(1 + lsim_rng_below(r, (mag))))
  free(c->X);
  free(c->Y0);
  c->X = malloc((size_t)(T > 0 ? T : 1) * c->d_in * sizeof *c->X);
  c->Y0 = malloc((size_t)(T > 0 ? T : 1) * c->d_out * sizeof *c->Y0);
  for (size_t k = 0; k < (size_t)T * c->d_in; k++)
    c->X[k] = RV(3);
  for (size_t k = 0; k < (size_t)T * c->d_out; k++)
    c->Y0[k] = (double)((int)lsim_rng_below(r, 33) - 16);
  for (int a = 0; a < c->nad; a++) {
    size_t na = (size_t)c->ranks[a] * c->d_in, nb = (size_t)c->d_out * c->ranks[a];
    free(c->A[a]);
    free(c->B[a]);
    c->A[a] = malloc(na * sizeof(double));
    c->B[a] = malloc(nb * sizeof(double));
    for (size_t k = 0; k < na; k++)
      c->A[a][k] = RV(3);
    for (size_t k = 0; k < nb; k++)
      c->B[a][k] = RV(2);
  }
#undef RV
}

/* The kernels' exactness bounds: |x.A| sums < 2^16 (the hi/lo split of t),
** |t.B| sums < 2^23 (fp32). */
static int bounds_ok(const kcase *c) {
  for (int i = 0; i < c->p.T; i++) {
    int a = -1;
    for (int k = 0; k < c->nad; k++)
      if (c->ids[k] == c->p.row_adapter[i])
        a = k;
    if (a < 0)
      continue;
    const int rk = c->ranks[a];
    double tmax = 0;
    for (int k = 0; k < rk; k++) {
      double m = 0;
      for (int q = 0; q < c->d_in; q++)
        m += fabs(c->X[(size_t)i * c->d_in + q] * c->A[a][(size_t)k * c->d_in + q]);
      if (m >= 65536)
        return 0;
      if (m > tmax)
        tmax = m;
    }
    double bmax = 0;
    for (size_t k = 0; k < (size_t)c->d_out * rk; k++)
      bmax = fmax(bmax, fabs(c->B[a][k]));
    if (tmax * c->scale[a] * bmax * rk >= (1 << 23))
      return 0;
  }
  return 1;
}

/* Random seeds of the integer-mode test: 48, or LSIM_CUDA_TEST_SEEDS (the
** sanitizer runs take a few). */
static int nseeds(void) {
  const char *e = getenv("LSIM_CUDA_TEST_SEEDS");
  int n = e ? atoi(e) : 0;
  return n > 0 && n <= 48 ? n : 48;
}

Test(random, integer_mode_every_path_bit_exact, .timeout = 600) {
  need_gpu();
  int cases = 0, skipped = 0;
  const int ns = nseeds();
  for (uint64_t seed = 1; seed <= (uint64_t)ns; seed++)
    for (int dtype = 0; dtype < 2; dtype++) {
      lsim_rng r;
      lsim_rng_init(&r, seed * 2 + (uint64_t)dtype, LSIM_RNG_TENSORS);
      kcase c;
      random_case(&c, &r, seed % 4 == 0);
      int ok = 0;
      for (double rho = 0.6; rho > 0.004 && !ok; rho *= 0.5) {
        fill_integer(&c, &r, rho);
        if (bounds_ok(&c)) {
          compute_want(&c, NULL, 0);
          ok = want_fits(&c, dtype);
        }
      }
      if (ok) {
        char tag[128];
        snprintf(tag, sizeof tag,
                 "seed %llu %s (T %d, d_in %d, d_out %d, %d adapters)",
                 (unsigned long long)seed, dtype ? "fp16" : "bf16", c.p.T,
                 c.d_in, c.d_out, c.nad);
        run_all(&c, dtype, 1, tag);
        cases++;
      } else {
        skipped++;
      }
      kcase_free(&c);
    }
  cr_log_info("integer mode: %d random cases bit-exact against cpu_ref on "
              "every path and layout (%d draws without an exact fit "
              "skipped)",
              cases, skipped);
  cr_assert_geq(cases, ns * 80 / 48, "only %d exact cases", cases);
}

Test(random, bf16_relative_error_bounded, .timeout = 600) {
  need_gpu();
  double worst = 0;
  for (uint64_t seed = 1; seed <= (fast_mode() ? 2u : 6u); seed++) {
    lsim_rng r;
    lsim_rng_init(&r, 7000 + seed, LSIM_RNG_TENSORS);
    kcase c;
    random_case(&c, &r, 0);
    /* bf16 values on a 2^-8 grid in (-1, 1), scales dyadic: the exact
    ** reference stays in cpu_ref's int64 tier */
    const int T = c.p.T;
    c.X = malloc((size_t)(T > 0 ? T : 1) * c.d_in * sizeof *c.X);
    c.Y0 = malloc((size_t)(T > 0 ? T : 1) * c.d_out * sizeof *c.Y0);
#define GV() (((double)(int)lsim_rng_below(&r, 511) - 255.0) / 256.0)
    for (size_t k = 0; k < (size_t)T * c.d_in; k++)
      c.X[k] = GV();
    for (size_t k = 0; k < (size_t)T * c.d_out; k++)
      c.Y0[k] = GV();
    for (int a = 0; a < c.nad; a++) {
      size_t na = (size_t)c.ranks[a] * c.d_in, nb = (size_t)c.d_out * c.ranks[a];
      c.A[a] = malloc(na * sizeof(double));
      c.B[a] = malloc(nb * sizeof(double));
      for (size_t k = 0; k < na; k++)
        c.A[a][k] = GV();
      for (size_t k = 0; k < nb; k++)
        c.B[a][k] = GV();
    }
#undef GV
    compute_want(&c, NULL, 0);
    char tag[96];
    snprintf(tag, sizeof tag, "bf16 seed %llu (T %d, d_in %d, d_out %d)",
             (unsigned long long)seed, c.p.T, c.d_in, c.d_out);
    double w = run_all(&c, LSIM_CUDA_BF16, 0, tag);
    if (w > worst)
      worst = w;
    kcase_free(&c);
  }
  cr_log_info("random bf16: worst relative error %.3e against the exact "
              "reference (bound 1e-2)",
              worst);
}

/* ---- 5. errors are values ---------------------------------------------------- */

Test(errors, every_misuse_has_its_code) {
  need_gpu();
  lsim_cuda_lora *L = NULL;
  lsim_cuda_lora_cfg cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.d_in = 16;
  cfg.d_out = 8;
  cfg.max_adapters = 4;
  cfg.dtype = 7;
  FAILS(LSIM_E_USAGE, lsim_cuda_lora_open(&L, &cfg, eb));
  cr_assert_null(L);
  cfg.dtype = LSIM_CUDA_BF16;
  OK(lsim_cuda_lora_open(&L, &cfg, eb));

  uint16_t A[200 * 16], B[8 * 200];
  for (int i = 0; i < 200 * 16; i++)
    A[i] = lsim_cuda_from_float(LSIM_CUDA_BF16, (float)(i % 3 - 1));
  for (int i = 0; i < 8 * 200; i++)
    B[i] = lsim_cuda_from_float(LSIM_CUDA_BF16, 1.f);
  FAILS(LSIM_E_USAGE, lsim_cuda_lora_load(L, 4, 2, 1.f, A, B, eb));
  FAILS(LSIM_E_USAGE, lsim_cuda_lora_load(L, 0, 0, 1.f, A, B, eb));
  FAILS(LSIM_E_USAGE, lsim_cuda_lora_load(L, 0, 2, NAN, A, B, eb));
  FAILS(LSIM_E_USAGE, lsim_cuda_lora_load(L, 0, 2, 1.f, NULL, B, eb));
  OK(lsim_cuda_lora_load(L, 0, 2, 1.f, A, B, eb));
  OK(lsim_cuda_lora_load(L, 1, 200, 1.f, A, B, eb));

  void *dx = NULL, *dy = NULL;
  OK(lsim_cuda_malloc(&dx, 4 * 16 * 2, eb));
  OK(lsim_cuda_malloc(&dy, 4 * 8 * 2, eb));
  /* the runs below read X and Y: give them values (compute-sanitizer's
  ** initcheck found this test reading never-written device memory) */
  OK(lsim_cuda_memset(dx, 0, 4 * 16 * 2, eb));
  OK(lsim_cuda_memset(dy, 0, 4 * 8 * 2, eb));
  FAILS(LSIM_E_STATE, lsim_cuda_lora_run(L, dx, 16, dy, 8, eb));

  lsim_plan_entry e[3] = {ent(1, 0, 2, DEC, 1), ent(2, 2, 2, DEC, 1),
                          ent(3, BASE, 0, DEC, 1)};
  lsim_rowplan p = LSIM_ROWPLAN_INIT;
  OK(lsim_rowplan_build(&p, e, 3, NULL, 0, eb));
  FAILS(LSIM_E_REF_UNKNOWN_ADAPTER,
        lsim_cuda_lora_plan(L, &p, LSIM_CUDA_PATH_AUTO, eb));
  lsim_rowplan_release(&p);
  e[1] = ent(2, 1, 3, DEC, 1); /* resident at rank 200 */
  OK(lsim_rowplan_build(&p, e, 3, NULL, 0, eb));
  FAILS(LSIM_E_REF_RANK, lsim_cuda_lora_plan(L, &p, LSIM_CUDA_PATH_AUTO, eb));
  lsim_rowplan_release(&p);
  e[1] = ent(2, 1, 200, DEC, 1);
  OK(lsim_rowplan_build(&p, e, 3, NULL, 0, eb));
  FAILS(LSIM_E_USAGE, lsim_cuda_lora_plan(L, &p, LSIM_CUDA_PATH_SGMV_MMA, eb));
  FAILS(LSIM_E_USAGE, lsim_cuda_lora_plan(L, &p, 99, eb));
  OK(lsim_cuda_lora_plan(L, &p, LSIM_CUDA_PATH_AUTO, eb));
  cr_assert_neq(lsim_cuda_lora_path(L), LSIM_CUDA_PATH_SGMV_MMA);
  FAILS(LSIM_E_USAGE, lsim_cuda_lora_run(L, dx, 12, dy, 8, eb));
  FAILS(LSIM_E_USAGE, lsim_cuda_lora_run(L, (char *)dx + 2, 16, dy, 8, eb));
  FAILS(LSIM_E_USAGE, lsim_cuda_lora_run(L, dx, 16, NULL, 8, eb));
  OK(lsim_cuda_lora_run(L, dx, 16, dy, 8, eb));
  OK(lsim_cuda_lora_sync(L, eb));
  /* unloading an adapter the plan names invalidates the plan */
  OK(lsim_cuda_lora_unload(L, 1, eb));
  FAILS(LSIM_E_STATE, lsim_cuda_lora_run(L, dx, 16, dy, 8, eb));
  /* a corrupted plan fails closed with its planner code */
  lsim_rowplan bad = LSIM_ROWPLAN_INIT;
  OK(lsim_rowplan_copy(&bad, &p, eb));
  bad.seg_offsets[1] = 0;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_err rc = lsim_cuda_lora_plan(L, &bad, LSIM_CUDA_PATH_AUTO, &eb);
  cr_assert(rc <= -100 && rc > -160, "corrupted plan: %s (%s)",
            lsim_err_name(rc), eb.msg);
  lsim_rowplan_release(&bad);

  /* paged plans: a missing page table, another rank, a bad geometry */
  lsim_cuda_paged_ref ref[2];
  memset(ref, 0, sizeof ref);
  void *pool = NULL;
  int32_t *pt = NULL;
  OK(lsim_cuda_malloc(&pool, 8 * 16 * 2, eb));
  OK(lsim_cuda_malloc((void **)&pt, 8 * 4, eb));
  FAILS(LSIM_E_REF_UNKNOWN_ADAPTER,
        lsim_cuda_lora_plan_paged(L, &p, LSIM_CUDA_PATH_AUTO, pool, 16, ref,
                                  2, eb));
  ref[0].ptab = ref[1].ptab = pt;
  ref[0].rank = 2;
  ref[1].rank = 3; /* the plan says 200 */
  ref[0].scale = ref[1].scale = 1.f;
  FAILS(LSIM_E_REF_RANK,
        lsim_cuda_lora_plan_paged(L, &p, LSIM_CUDA_PATH_AUTO, pool, 16, ref,
                                  2, eb));
  ref[1].rank = 200;
  FAILS(LSIM_E_USAGE, lsim_cuda_lora_plan_paged(L, &p, LSIM_CUDA_PATH_AUTO,
                                                pool, 12, ref, 2, eb));
  FAILS(LSIM_E_USAGE, lsim_cuda_lora_plan_paged(L, &p, LSIM_CUDA_PATH_AUTO,
                                                pool, 8, ref, 2, eb));
  FAILS(LSIM_E_USAGE,
        lsim_cuda_lora_plan_paged(L, &p, LSIM_CUDA_PATH_AUTO,
                                  (char *)pool + 2, 16, ref, 2, eb));
  FAILS(LSIM_E_USAGE, lsim_cuda_lora_plan_paged(L, &p, LSIM_CUDA_PATH_SGMV_MMA,
                                                pool, 16, ref, 2, eb));
  lsim_rowplan_release(&p);
  lsim_cuda_free(dx);
  lsim_cuda_free(dy);
  lsim_cuda_lora_close(L);
  lsim_cuda_lora_close(NULL);

  /* the zero-padded slot layout: ranks above the slot are refused */
  cfg.pad_rank = 8;
  OK(lsim_cuda_lora_open(&L, &cfg, eb));
  FAILS(LSIM_E_USAGE, lsim_cuda_lora_load(L, 0, 9, 1.f, A, B, eb));
  OK(lsim_cuda_lora_load(L, 0, 2, 1.f, A, B, eb));
  OK(lsim_cuda_lora_load(L, 1, 8, 1.f, A, B, eb));
  lsim_rowplan q = LSIM_ROWPLAN_INIT;
  e[1] = ent(2, 1, 4, DEC, 1); /* resident at logical rank 8 */
  OK(lsim_rowplan_build(&q, e, 3, NULL, 0, eb));
  FAILS(LSIM_E_REF_RANK, lsim_cuda_lora_plan(L, &q, LSIM_CUDA_PATH_AUTO, eb));
  lsim_rowplan_release(&q);
  e[1] = ent(2, 1, 8, DEC, 1); /* plans name the logical rank */
  OK(lsim_rowplan_build(&q, e, 3, NULL, 0, eb));
  OK(lsim_cuda_lora_plan(L, &q, LSIM_CUDA_PATH_AUTO, eb));
  FAILS(LSIM_E_USAGE, lsim_cuda_lora_plan_paged(L, &q, LSIM_CUDA_PATH_AUTO,
                                                pool, 16, ref, 2, eb));
  lsim_rowplan_release(&q);
  lsim_cuda_lora_close(L);
  lsim_cuda_free(pool);
  lsim_cuda_free(pt);
  cfg.pad_rank = LSIM_CUDA_MAX_RANK + 1;
  FAILS(LSIM_E_USAGE, lsim_cuda_lora_open(&L, &cfg, eb));
}

Test(errors, all_base_plan_launches_nothing) {
  need_gpu();
  lsim_plan_entry e[2] = {ent(1, BASE, 0, PRE, 5), ent(2, BASE, 0, DEC, 1)};
  kcase c;
  memset(&c, 0, sizeof c);
  OK(lsim_rowplan_build(&c.p, e, 2, NULL, 0, eb));
  c.d_in = 9;
  c.d_out = 17;
  c.nad = 1;
  c.maxid = 0;
  c.ids[0] = 0;
  c.ranks[0] = 4;
  c.scale[0] = 1;
  c.A[0] = calloc(4 * 9, sizeof(double));
  c.B[0] = calloc(17 * 4, sizeof(double));
  c.X = calloc(6 * 9, sizeof(double));
  c.Y0 = calloc(6 * 17, sizeof(double));
  for (int k = 0; k < 6 * 17; k++)
    c.Y0[k] = k % 5;
  compute_want(&c, NULL, 0);
  run_all(&c, LSIM_CUDA_BF16, 1, "all base");
  kcase_free(&c);
}


/* ---- the cuda replay backend, checked against cpu_ref on a real trace ---- */
#include <sqlite3.h>
#include <unistd.h>

#include "sim/replay.h"
#include "sim/scenario.h"

static long long q1(const char *db, const char *sql) {
  sqlite3 *h;
  sqlite3_stmt *st;
  cr_assert_eq(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK, "%s", sql);
  cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
  long long v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(h);
  return v;
}

Test(replay, cuda_backend_is_bit_exact_with_cpu_ref_on_every_iteration) {
  char desc[256];
  if (lsim_cuda_describe(desc, sizeof desc) <= 0)
    cr_skip_test("no CUDA device: %s (GPU tests run on the device machine)",
                 desc);
  static lsim_scenario sc;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  char path[600], dir[] = "/tmp/lsim-cudarep-XXXXXX", a[700], b[700];
  snprintf(path, sizeof path, "%s/fixtures/replay/tiny.json", LSIM_TEST_DIR);
  cr_assert_eq(lsim_scenario_load(&sc, path, &eb), 0, "%s", eb.msg);
  cr_assert_not_null(mkdtemp(dir));
  snprintf(a, sizeof a, "%s/model.db", dir);
  snprintf(b, sizeof b, "%s/cuda.db", dir);
  lsim_summary s1, s2;
  lsim_replay_opts o = {.db_path = a, .command_line = "test"};
  cr_assert_eq(lsim_replay_run(&sc, &o, &s1, &eb), 0, "%s", eb.msg);
  snprintf(sc.backend, sizeof sc.backend, "cuda");
  o.db_path = b;
  o.verify = 1;
  cr_assert_eq(lsim_replay_run(&sc, &o, &s2, &eb), 0, "%s", eb.msg);
  /* every iteration ran on the GPU and equalled the exact reference */
  long long iters = q1(b, "SELECT count(*) FROM iterations");
  cr_assert_gt(iters, 0);
  cr_assert_eq(q1(b, "SELECT count(*) FROM validations WHERE exact = 1 AND "
                     "backend = 'cuda'"), iters);
  cr_assert_eq(q1(b, "SELECT count(*) FROM iterations WHERE backend_ns IS NULL "
                     "OR backend_ns <= 0"), 0);
  /* and changed no decision: the same events as the model backend */
  cr_assert_eq(q1(a, "SELECT count(*) FROM events"),
               q1(b, "SELECT count(*) FROM events"));
  /* row for row: nothing in one log that is not in the other */
  sqlite3 *h;
  sqlite3_stmt *st;
  char sql[1600];
  cr_assert_eq(sqlite3_open_v2(a, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  snprintf(sql, sizeof sql, "ATTACH '%s' AS o", b);
  cr_assert_eq(sqlite3_exec(h, sql, NULL, NULL, NULL), SQLITE_OK);
  const char *cols = "seq,tick,kind,worker,request,tenant,adapter,generation,"
                     "attempt,pages,bytes,value,detail";
  snprintf(sql, sizeof sql,
           "SELECT count(*) FROM (SELECT %s FROM main.events EXCEPT "
           "SELECT %s FROM o.events)",
           cols, cols);
  cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
  cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
  cr_assert_eq(sqlite3_column_int64(st, 0), 0, "event rows differ");
  sqlite3_finalize(st);
  sqlite3_close(h);
  char cmd[800];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
}

/* ---- the path chooser (host only: runs without a GPU) ---------------------- */

/* The chooser's pick for a batch of npre prefills of pre_rows rows each and
** ndec decode rows, spread round-robin over nad adapters of rank r (the
** prefills first, then the decodes, as the engine packs them). */
static int chosen_as(int npre, int pre_rows, int ndec, int nad, int r,
                     int paged) {
  lsim_plan_entry e[600];
  int n = 0;
  for (int i = 0; i < npre; i++, n++)
    e[n] = ent(n + 1, i % nad, r, PRE, pre_rows);
  for (int i = 0; i < ndec; i++, n++)
    e[n] = ent(n + 1, i % nad, r, DEC, 1);
  lsim_rowplan p = LSIM_ROWPLAN_INIT;
  OK(lsim_rowplan_build(&p, e, n, NULL, 0, eb));
  int path = lsim_cuda_choose_path(&p, r, paged);
  lsim_rowplan_release(&p);
  return path;
}

static int chosen(int npre, int pre_rows, int ndec, int nad, int r) {
  return chosen_as(npre, pre_rows, ndec, nad, r, 0);
}

Test(choose, the_measured_rule_picks_each_path_where_it_won) {
  /* bench_kernels' workloads keep their paths */
  cr_assert_eq(chosen(0, 0, 64, 64, 16), LSIM_CUDA_PATH_DECODE); /* decode64 */
  cr_assert_eq(chosen(0, 0, 64, 64, 64), LSIM_CUDA_PATH_DECODE);
  cr_assert_eq(chosen(32, 8, 0, 32, 16), LSIM_CUDA_PATH_FUSED); /* mixed256 */
  cr_assert_eq(chosen(32, 8, 0, 32, 64), LSIM_CUDA_PATH_SGMV_MMA);
  cr_assert_eq(chosen(8, 512, 0, 8, 16), LSIM_CUDA_PATH_SGMV_MMA); /* prefill */
  cr_assert_eq(chosen(8, 512, 0, 8, 64), LSIM_CUDA_PATH_SGMV_MMA);
  /* small batches: never the tensor-core tiles (model-shape sweep) */
  cr_assert_eq(chosen(0, 0, 8, 4, 64), LSIM_CUDA_PATH_FUSED); /* 2-row segs */
  cr_assert_eq(chosen(0, 0, 8, 8, 64), LSIM_CUDA_PATH_FUSED); /* 1-row segs */
  cr_assert_eq(chosen(0, 0, 8, 4, 16), LSIM_CUDA_PATH_DECODE);
  cr_assert_eq(chosen(1, 16, 0, 1, 8), LSIM_CUDA_PATH_DECODE); /* one prefill */
  cr_assert_eq(chosen(0, 0, 128, 16, 64), LSIM_CUDA_PATH_FUSED);
  cr_assert_eq(chosen(4, 32, 0, 4, 64), LSIM_CUDA_PATH_FUSED);
  /* beyond 128 rows at small rank: decode while rows x rank <= 2560 */
  cr_assert_eq(chosen(2, 64, 32, 4, 8), LSIM_CUDA_PATH_DECODE);
  cr_assert_eq(chosen(1, 256, 0, 1, 16), LSIM_CUDA_PATH_SGMV_MMA);
  cr_assert_eq(chosen(4, 128, 0, 4, 8), LSIM_CUDA_PATH_SGMV_MMA);
  /* paged plans (the device pool's): the tensor-core tiles at mixed256 r16,
  ** and everything else as for contiguous ones */
  cr_assert_eq(chosen_as(32, 8, 0, 32, 16, 1), LSIM_CUDA_PATH_SGMV_MMA);
  cr_assert_eq(chosen_as(0, 0, 64, 64, 16, 1), LSIM_CUDA_PATH_DECODE);
  cr_assert_eq(chosen_as(0, 0, 8, 4, 64, 1), LSIM_CUDA_PATH_FUSED);
  cr_assert_eq(chosen_as(8, 512, 0, 8, 16, 1), LSIM_CUDA_PATH_SGMV_MMA);
  /* past the tensor-core rank classes */
  cr_assert_eq(chosen(0, 0, 3, 3, 200), LSIM_CUDA_PATH_DECODE);
  cr_assert_eq(chosen(2, 40, 0, 2, 200), LSIM_CUDA_PATH_SGMV);
}

#else
Test(choose, the_measured_rule_picks_each_path_where_it_won) {
  cr_skip_test("CUDA backend not built: nvcc was not found at configure time");
}
Test(replay, cuda_backend_is_bit_exact_with_cpu_ref_on_every_iteration) {
  cr_skip_test("CUDA backend not built: nvcc was not found at configure time");
}
Test(cuda, selftest_kernel_matches_cpu_exactly) {
  cr_skip_test("CUDA backend not built: nvcc was not found at configure time");
}
Test(fixtures, fixed_rank_every_path_bit_exact) {
  cr_skip_test("CUDA backend not built: nvcc was not found at configure time");
}
Test(random, integer_mode_every_path_bit_exact) {
  cr_skip_test("CUDA backend not built: nvcc was not found at configure time");
}
#endif
