/*
** gpu_exact.c: exactly specified adapter work on the GPU (gpu_exact.h).
*/
#include "gpu_exact.h"

#include <math.h>
#include <stdlib.h>

#include "pool.h"

/* Set *m (initialised) to the exact value of float f. */
static void lsim__q_from_float(mpq_t m, float f) { mpq_set_d(m, (double)f); }

lsim_err lsim_cuda_exact_delta(const lsim_rowplan *p, const lsim_qmat *X,
                               const lsim_qadapter *ad, int nad, int d_in,
                               int d_out, int dtype, int path, lsim_qmat *D,
                               int *exact_in, int *used_path, int64_t *ns,
                               lsim_errbuf *eb) {
  const int dt = dtype;
  const int ldx = (d_in + 7) / 8 * 8, ldy = (d_out + 7) / 8 * 8;
  lsim_cuda_lora *L = NULL;
  lsim_cuda_timer *tm = NULL;
  void *stream = NULL;
  uint16_t *hx = NULL, *hA = NULL, *hB = NULL;
  float *hy = NULL;
  void *dx = NULL, *dy = NULL;
  lsim_err rc = 0;
  mpq_t back;
  mpq_init(back);
  int T = p->T > 0 ? p->T : 1;
  int maxid = 0;
  for (int a = 0; a < nad; a++)
    if (ad[a].id + 1 > maxid)
      maxid = ad[a].id + 1;
  lsim_cuda_lora_cfg cfg = {0, dt, d_in, d_out, maxid > 0 ? maxid : 1, NULL,
                            0};
#define LSIM__TO16(dst, q)                                                  \
  do {                                                                      \
    float f_ = (float)mpq_get_d(q);                                         \
    (dst) = lsim_cuda_from_float(dt, f_);                                   \
    lsim__q_from_float(back, lsim_cuda_to_float(dt, (dst)));                \
    if (mpq_cmp(back, q) != 0)                                              \
      *exact_in = 0;                                                        \
  } while (0)
  *exact_in = 1;
  hx = calloc((size_t)T * (size_t)ldx, sizeof *hx);
  hy = calloc((size_t)T * (size_t)ldy, sizeof *hy);
  if (!hx || !hy) {
    rc = lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
    goto out;
  }
  if ((rc = lsim_cuda_stream_create(&stream, eb)) ||
      (rc = lsim_cuda_timer_open(&tm, stream, eb)))
    goto out;
  cfg.stream = stream;
  if ((rc = lsim_cuda_lora_open(&L, &cfg, eb)))
    goto out;
  for (int a = 0; a < nad && !rc; a++) {
    const lsim_qadapter *A1 = &ad[a];
    uint16_t *nA = realloc(hA, (size_t)A1->rank * (size_t)d_in * sizeof *hA);
    if (nA)
      hA = nA;
    uint16_t *nB = realloc(hB, (size_t)d_out * (size_t)A1->rank * sizeof *hB);
    if (nB)
      hB = nB;
    if (!nA || !nB) {
      rc = lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
      break;
    }
    for (int i = 0; i < A1->rank; i++)
      for (int j = 0; j < d_in; j++)
        LSIM__TO16(hA[(size_t)i * (size_t)d_in + (size_t)j],
                   LSIM_QAT(&A1->A, i, j));
    for (int i = 0; i < d_out; i++)
      for (int j = 0; j < A1->rank; j++)
        LSIM__TO16(hB[(size_t)i * (size_t)A1->rank + (size_t)j],
                   LSIM_QAT(&A1->B, i, j));
    float sc = (float)mpq_get_d(A1->scale);
    lsim__q_from_float(back, sc);
    if (mpq_cmp(back, A1->scale) != 0)
      *exact_in = 0;
    rc = lsim_cuda_lora_load(L, A1->id, A1->rank, sc, hA, hB, eb);
  }
  if (rc)
    goto out;
  for (int t = 0; t < p->T; t++)
    for (int k = 0; k < d_in; k++)
      LSIM__TO16(hx[(size_t)t * (size_t)ldx + (size_t)k], LSIM_QAT(X, t, k));
#undef LSIM__TO16
  if ((rc = lsim_cuda_lora_plan(L, p, path, eb)))
    goto out;
  *used_path = lsim_cuda_lora_path(L);
  if ((rc = lsim_cuda_malloc(&dx, (size_t)T * (size_t)ldx * 2, eb)) ||
      (rc = lsim_cuda_malloc(&dy, (size_t)T * (size_t)ldy * 2, eb)) ||
      (rc = lsim_cuda_h2d(dx, hx, (size_t)T * (size_t)ldx * 2, eb)) ||
      (rc = lsim_cuda_memset(dy, 0, (size_t)T * (size_t)ldy * 2, eb)) ||
      (rc = lsim_cuda_lora_sync(L, eb)) ||
      (rc = lsim_cuda_timer_start(tm, eb)) ||
      (rc = lsim_cuda_lora_run(L, dx, ldx, dy, ldy, eb)) ||
      (rc = lsim_cuda_timer_stop(tm, eb)) ||
      (rc = lsim_cuda_lora_sync(L, eb)) ||
      (rc = lsim_cuda_timer_ns(tm, ns, eb)) ||
      (rc = lsim_cuda_d2h(hx, dy, (size_t)T * (size_t)ldy * 2, eb)))
    goto out;
  if ((rc = lsim_qmat_init(D, p->T, d_out, eb)))
    goto out;
  for (int t = 0; t < p->T; t++)
    for (int k = 0; k < d_out; k++)
      lsim__q_from_float(LSIM_QAT(D, t, k),
                         lsim_cuda_to_float(dt, hx[(size_t)t * (size_t)ldy +
                                                   (size_t)k]));
out:
  lsim_cuda_free(dx);
  lsim_cuda_free(dy);
  lsim_cuda_lora_close(L);
  lsim_cuda_timer_close(tm);
  lsim_cuda_stream_destroy(stream);
  free(hx);
  free(hy);
  free(hA);
  free(hB);
  mpq_clear(back);
  return rc;
}

/* Normwise errors of got against the exact ref: max |got - ref| and that
** over max |ref| (0 when ref is all zero and got equals it). */
void lsim_q_errors(const lsim_qmat *got, const lsim_qmat *ref, double *abs_err,
                   double *rel_err, int *exact) {
  double mx = 0, mr = 0;
  mpq_t d;
  mpq_init(d);
  *exact = 1;
  for (int i = 0; i < ref->rows; i++)
    for (int k = 0; k < ref->cols; k++) {
      mpq_sub(d, LSIM_QAT(got, i, k), LSIM_QAT(ref, i, k));
      if (mpq_sgn(d))
        *exact = 0;
      double e = fabs(mpq_get_d(d)), r = fabs(mpq_get_d(LSIM_QAT(ref, i, k)));
      if (e > mx)
        mx = e;
      if (r > mr)
        mr = r;
    }
  mpq_clear(d);
  *abs_err = mx;
  *rel_err = mr > 0 ? mx / mr : (mx > 0 ? INFINITY : 0);
}

int lsim_q_representable(const lsim_qmat *m, int dtype) {
  mpq_t back;
  mpq_init(back);
  int ok = 1;
  for (int i = 0; ok && i < m->rows; i++)
    for (int k = 0; ok && k < m->cols; k++) {
      float f = (float)mpq_get_d(LSIM_QAT(m, i, k));
      mpq_set_d(back, (double)lsim_cuda_to_float(dtype,
                                                 lsim_cuda_from_float(dtype, f)));
      ok = mpq_cmp(back, LSIM_QAT(m, i, k)) == 0;
    }
  mpq_clear(back);
  return ok;
}
