/* The tensor-core expand's balanced block order (backends/cuda/eorder.c):
** a permutation of the grid's blocks, never less balanced than the grid's
** own order, and at mixed256's shape (the case it exists for) close to the
** bound of the bytes.  Plain C: runs where there is no GPU. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/eorder.h"
#include "base/rng.h"

#define KC 64

typedef struct {
  int ntiles, ny, len, rsplit, d_out, nsm;
  int rank[512], rows[512];
} shape;

/* the weight the order uses, recomputed here from its definition */
static long long weight(const shape *s, int k, int y) {
  int c0 = y * s->len, c1 = c0 + s->len;
  if (s->rsplit) {
    const int r = s->rank[k];
    int f = (r + 15) / 16;
    f = f < 1 ? 1 : f > 4 ? 4 : f;
    const int sl = (s->len / f + KC - 1) / KC * KC, sub = y % 4;
    const int r0 = (y / 4) * s->len;
    if (sub >= f)
      return 1;
    c0 = r0 + sub * sl;
    c1 = c0 + sl < r0 + s->len ? c0 + sl : r0 + s->len;
  }
  if (c1 > s->d_out)
    c1 = s->d_out;
  return c1 > c0 ? (long long)(s->rank[k] + 2 * s->rows[k] + 16) * (c1 - c0) + 1
                 : 1;
}

/* checks out is a permutation of the blocks; returns the largest slot
** weight, and the total and heaviest block through *tot, *wmax */
static long long check_perm(const shape *s, const int *out, long long *tot,
                            long long *wmax) {
  const int n = s->ntiles * s->ny;
  char *seen = calloc((size_t)n, 1);
  long long *load = calloc((size_t)s->nsm, sizeof *load), most = 0;
  cr_assert(seen && load);
  *tot = 0;
  *wmax = 0;
  for (int p = 0; p < n; p++) {
    const int k = out[2 * p], y = out[2 * p + 1];
    cr_assert(k >= 0 && k < s->ntiles && y >= 0 && y < s->ny,
              "position %d holds (%d, %d), outside %d x %d", p, k, y,
              s->ntiles, s->ny);
    cr_assert_eq(seen[(size_t)y * s->ntiles + k], 0,
                 "block (%d, %d) is laid out twice", k, y);
    seen[(size_t)y * s->ntiles + k] = 1;
    const long long w = weight(s, k, y);
    load[p % s->nsm] += w;
    *tot += w;
    if (w > *wmax)
      *wmax = w;
  }
  for (int i = 0; i < s->nsm; i++)
    if (load[i] > most)
      most = load[i];
  free(seen);
  free(load);
  return most;
}

static long long order(const shape *s, int *out) {
  return lsim_cuda_expand_order(s->ntiles, s->rank, s->rows, s->ny, s->len,
                                s->rsplit, s->d_out, KC, s->nsm, out);
}

static long long cost(const shape *s, const int *out) {
  return lsim_cuda_expand_order_cost(s->ntiles, s->rank, s->rows, s->ny,
                                     s->len, s->rsplit, s->d_out, KC, s->nsm,
                                     out);
}

/* mixed256 of bench_kernels: 32 adapters of 8 rows, ranks 8, 16, 32, 64 by
** adapter, d_out 4096 in 16 blocks of 256 columns, 132 SMs */
static void mixed256(shape *s, int rsplit) {
  memset(s, 0, sizeof *s);
  s->ntiles = 32;
  s->ny = 16 * (rsplit ? 4 : 1);
  s->len = 256;
  s->rsplit = rsplit;
  s->d_out = 4096;
  s->nsm = 132;
  for (int k = 0; k < 32; k++) {
    s->rank[k] = 8 << (k % 4);
    s->rows[k] = 8;
  }
}

Test(eorder, mixed256_every_block_once_and_its_sms_near_the_mean) {
  for (int rsplit = 0; rsplit <= 1; rsplit++) {
    shape s;
    mixed256(&s, rsplit);
    const int n = s.ntiles * s.ny;
    int *out = malloc(2 * (size_t)n * sizeof *out);
    cr_assert_eq(order(&s, out), n);
    long long tot, wmax;
    const long long most = check_perm(&s, out, &tot, &wmax);
    cr_assert_eq(most, cost(&s, out), "the cost function disagrees");
    const long long grid = cost(&s, NULL);
    const long long mean = (tot + s.nsm - 1) / s.nsm;
    /* the grid's order hands an SM four blocks of one rank: at rank 64
    ** four times (64 + 16 + 16) x 256 columns */
    if (!rsplit)
      cr_assert_eq(grid, 4LL * ((64 + 16 + 16) * 256 + 1));
    /* balanced: within the heaviest block of the mean (the list
    ** schedule's bound), and well under the grid's order */
    cr_assert(most <= mean + wmax, "rsplit %d: %lld > mean %lld + %lld",
              rsplit, most, mean, wmax);
    cr_assert(most * 10 <= grid * 7, "rsplit %d: %lld against the grid's %lld",
              rsplit, most, grid);
    free(out);
  }
}

Test(eorder, one_rank_keeps_the_balance_of_the_grid) {
  shape s;
  mixed256(&s, 0);
  for (int k = 0; k < 32; k++)
    s.rank[k] = 30;
  int out[2 * 512];
  cr_assert_eq(order(&s, out), 512);
  long long tot, wmax;
  const long long most = check_perm(&s, out, &tot, &wmax);
  cr_assert_eq(most, cost(&s, NULL), "uniform blocks: %lld against %lld",
               most, cost(&s, NULL));
}

Test(eorder, random_shapes_permutation_and_never_worse_than_the_grid) {
  lsim_rng g;
  lsim_rng_init(&g, 20261206, LSIM_RNG_ARRIVALS);
  for (int c = 0; c < 300; c++) {
    shape s;
    memset(&s, 0, sizeof s);
    s.ntiles = 1 + (int)(lsim_rng_next(&g) % 64);
    s.rsplit = (int)(lsim_rng_next(&g) % 2);
    s.len = KC * (1 + (int)(lsim_rng_next(&g) % 8));
    s.d_out = 1 + (int)(lsim_rng_next(&g) % 5000);
    s.ny = (s.d_out + s.len - 1) / s.len * (s.rsplit ? 4 : 1);
    if (s.ntiles * s.ny > 512) {
      s.ny = 512 / s.ntiles;
      if (s.ny < 1)
        s.ny = 1;
    }
    s.nsm = 1 + (int)(lsim_rng_next(&g) % 140);
    for (int k = 0; k < s.ntiles; k++) {
      s.rank[k] = 1 + (int)(lsim_rng_next(&g) % 128);
      s.rows[k] = 1 + (int)(lsim_rng_next(&g) % 64);
    }
    const int n = s.ntiles * s.ny;
    int *out = malloc(2 * (size_t)n * sizeof *out);
    cr_assert_eq(order(&s, out), n, "case %d", c);
    long long tot, wmax;
    const long long most = check_perm(&s, out, &tot, &wmax);
    cr_assert(most <= cost(&s, NULL),
              "case %d: %lld, worse than the grid's %lld", c, most,
              cost(&s, NULL));
    cr_assert(most <= (tot + s.nsm - 1) / s.nsm + wmax,
              "case %d: %lld over the list schedule's bound", c, most);
    /* the same input gives the same order */
    int *again = malloc(2 * (size_t)n * sizeof *again);
    cr_assert_eq(order(&s, again), n);
    cr_assert_eq(memcmp(out, again, 2 * (size_t)n * sizeof *out), 0);
    free(again);
    free(out);
  }
}

Test(eorder, bad_arguments_leave_the_output_alone) {
  int rank[2] = {16, 16}, rows[2] = {8, 8}, out[8];
  memset(out, 0x5a, sizeof out);
  cr_assert_eq(lsim_cuda_expand_order(0, rank, rows, 2, 64, 0, 128, KC, 4,
                                      out), -1);
  cr_assert_eq(lsim_cuda_expand_order(2, rank, rows, 2, 64, 0, 128, KC, 0,
                                      out), -1);
  cr_assert_eq(lsim_cuda_expand_order(2, NULL, rows, 2, 64, 0, 128, KC, 4,
                                      out), -1);
  for (size_t i = 0; i < sizeof out; i++)
    cr_assert_eq(((unsigned char *)out)[i], 0x5a);
}
