/*
** test_cuda_compress.c: the GPU three-stage shared-basis operator against
** cpu_ref (backends/cuda/compress.cu vs backends/cpu_ref/compress_ref.c).
**
** Compiled everywhere; every test skips with a message when the build has
** no CUDA or the machine has no device (run tools/gpu_compress.sh on the
** device machine).
**
**   1. the article's fixture: adapter b on X gives [[6,4,0],[-3,0,0]]
**   2. integer mode, seeded: many adapters, several clusters, base-only
**      rows, rows of one cluster more than a tile, JD-Full and JD-Diag;
**      Y (which starts non-zero) equals Y0 + cpu_ref's exact
**      ((X V_c) Sigma_a^T) U_c^T bit for bit, and base-only rows are
**      untouched
**   3. errors are values
*/
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef LSIM_HAVE_CUDA
#include "testsupport/compress_ref.h"
#include "backends/cuda/compress_gpu.h"
#include "backends/cuda/cuda.h"
#include "base/rng.h"

static void need_gpu(void) {
  char d[256];
  if (lsim_cuda_describe(d, sizeof d) <= 0)
    cr_skip_test("no CUDA device: %s (run tools/gpu_compress.sh on the "
                 "device machine)", d);
}

#define OK(call)                                                        \
  do {                                                                  \
    lsim_errbuf eb_ = LSIM_ERRBUF_INIT;                                 \
    lsim_errbuf *eb = &eb_;                                             \
    lsim_err rc_ = (call);                                              \
    cr_assert_eq(rc_, 0, "%s failed: %s: %s", #call, lsim_err_name(rc_), \
                 eb_.msg);                                              \
  } while (0)

/* m [rows][cols] from floats (exact small integers) */
static void qfrom(lsim_qmat *m, int rows, int cols, const float *v) {
  OK(lsim_qmat_init(m, rows, cols, eb));
  for (int i = 0; i < rows * cols; i++)
    mpq_set_si(m->v[i], (long)v[i], 1);
}

Test(cuda_compress, fixture_adapter_b) {
  need_gpu();
  /* U = V = [[1,0],[0,1],[0,0]], cores a, b, c; one cluster */
  const float U[6] = {1, 0, 0, 1, 0, 0}, V[6] = {1, 0, 0, 1, 0, 0};
  const float S[12] = {1, 0, 0, 2, 0, 3, 4, 0, 2, -1, 1, 1};
  const int cluster[3] = {0, 0, 0};
  lsim_cuda_jd *J = NULL;
  OK(lsim_cuda_jd_open(&J, 0, 3, 3, 2, 1, 3, U, V, S, cluster, eb));
  const float X[6] = {1, 2, 3, 0, -1, 2};
  const int rows[2] = {1, 1};
  float Y[6] = {0};
  OK(lsim_cuda_jd_run(J, X, rows, 2, Y, eb));
  const float want[6] = {6, 4, 0, -3, 0, 0};
  for (int t = 0; t < 6; t++)
    cr_assert_eq(Y[t], want[t], "Y[%d] = %g, want %g", t, Y[t], want[t]);
  lsim_cuda_jd_close(J);
}

static void random_case(int diag, int d_in, int d_out, int R, int k, int n,
                        int N, uint64_t seed) {
  lsim_rng rng;
  lsim_rng_init(&rng, seed, 6);
  int cl = diag ? R : R * R;
  float *U = malloc(sizeof(float) * k * d_out * R);
  float *V = malloc(sizeof(float) * k * d_in * R);
  float *S = malloc(sizeof(float) * n * cl);
  float *X = malloc(sizeof(float) * N * d_in);
  float *Y = malloc(sizeof(float) * N * d_out);
  float *Y0 = malloc(sizeof(float) * N * d_out);
  int *cluster = malloc(sizeof(int) * n), *rows = malloc(sizeof(int) * N);
  cr_assert(U && V && S && X && Y && Y0 && cluster && rows);
#define SMALL() ((float)((int)lsim_rng_below(&rng, 5) - 2))
  for (int t = 0; t < k * d_out * R; t++)
    U[t] = SMALL();
  for (int t = 0; t < k * d_in * R; t++)
    V[t] = SMALL();
  for (int t = 0; t < n * cl; t++)
    S[t] = SMALL();
  for (int t = 0; t < N * d_in; t++)
    X[t] = SMALL();
  for (int t = 0; t < N * d_out; t++)
    Y[t] = Y0[t] = (float)((int)lsim_rng_below(&rng, 201) - 100);
  for (int i = 0; i < n; i++)
    cluster[i] = (int)lsim_rng_below(&rng, (uint64_t)k);
  for (int i = 0; i < N; i++) /* about one row in six is base-only */
    rows[i] = lsim_rng_below(&rng, 6) == 0
                  ? -1
                  : (int)lsim_rng_below(&rng, (uint64_t)n);
#undef SMALL
  lsim_cuda_jd *J = NULL;
  OK(lsim_cuda_jd_open(&J, diag, d_in, d_out, R, k, n, U, V, S, cluster, eb));
  OK(lsim_cuda_jd_run(J, X, rows, N, Y, eb));
  lsim_cuda_jd_close(J);
  for (int i = 0; i < N; i++) {
    if (rows[i] < 0) {
      cr_assert_eq(memcmp(Y + (size_t)i * d_out, Y0 + (size_t)i * d_out,
                          sizeof(float) * d_out), 0,
                   "base-only row %d was written", i);
      continue;
    }
    int a = rows[i], c = cluster[a];
    lsim_qmat qX = LSIM_QMAT_INIT, qU = LSIM_QMAT_INIT, qV = LSIM_QMAT_INIT,
              qS = LSIM_QMAT_INIT, qY = LSIM_QMAT_INIT;
    qfrom(&qX, 1, d_in, X + (size_t)i * d_in);
    qfrom(&qU, d_out, R, U + (size_t)c * d_out * R);
    qfrom(&qV, d_in, R, V + (size_t)c * d_in * R);
    qfrom(&qS, diag ? 1 : R, R, S + (size_t)a * cl);
    OK(lsim_ref_jd_apply(&qX, &qU, &qV, &qS, diag, &qY, eb));
    for (int o = 0; o < d_out; o++) {
      mpq_t w;
      mpq_init(w);
      mpq_set_si(w, (long)Y0[(size_t)i * d_out + o], 1);
      mpq_add(w, w, LSIM_QAT(&qY, 0, o));
      cr_assert_eq(mpz_cmp_ui(mpq_denref(w), 1), 0);
      long want = mpz_get_si(mpq_numref(w));
      cr_assert_eq(Y[(size_t)i * d_out + o], (float)want,
                   "%s row %d col %d: gpu %g, cpu_ref %ld",
                   diag ? "diag" : "full", i, o, Y[(size_t)i * d_out + o],
                   want);
      mpq_clear(w);
    }
    lsim_qmat *all[] = {&qX, &qU, &qV, &qS, &qY};
    for (int t = 0; t < 5; t++)
      lsim_qmat_clear(all[t]);
  }
  free(U); free(V); free(S); free(X); free(Y); free(Y0);
  free(cluster); free(rows);
}

Test(cuda_compress, integer_mode_bit_exact) {
  need_gpu();
  for (int diag = 0; diag <= 1; diag++) {
    random_case(diag, 24, 20, 4, 1, 5, 40, 1);       /* tiles of one cluster */
    random_case(diag, 37, 29, 6, 3, 11, 70, 2);      /* odd sizes */
    random_case(diag, 130, 200, 16, 4, 40, 90, 3);   /* > 128 threads */
    random_case(diag, 8, 8, 1, 2, 2, 1, 4);          /* R = 1, one row */
  }
}

Test(cuda_compress, errors_are_values) {
  need_gpu();
  const float U[6] = {1, 0, 0, 1, 0, 0}, S[4] = {1, 0, 0, 1};
  const int bad_cluster[1] = {3}, cluster[1] = {0};
  lsim_cuda_jd *J = NULL;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_cuda_jd_open(&J, 0, 3, 3, 2, 1, 1, U, U, S, bad_cluster,
                                 &eb), LSIM_E_USAGE);
  cr_assert_null(J);
  OK(lsim_cuda_jd_open(&J, 0, 3, 3, 2, 1, 1, U, U, S, cluster, eb));
  float X[3] = {1, 1, 1}, Y[3] = {0};
  int rows[1] = {5};
  cr_assert_eq(lsim_cuda_jd_run(J, X, rows, 1, Y, &eb), LSIM_E_USAGE);
  lsim_cuda_jd_close(J);
}

#else

Test(cuda_compress, skipped_without_cuda) {
  cr_skip_test("this build has no CUDA (nvcc not found at configure time)");
}

#endif
