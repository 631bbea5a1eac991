/*
** synth.c: seeded synthetic adapter collections (synth.h).
*/
#include "synth.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/rng.h"

#define LSIM__SYNTH_STREAM 0x73796eu /* "syn" */

static double lsim__gauss(lsim_rng *r) {
  /* Box-Muller; u1 in (0, 1] so the log is finite */
  double u1 = 1.0 - lsim_rng_unit(r), u2 = lsim_rng_unit(r);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void lsim_jd_collection_release(lsim_jd_collection *c) {
  if (!c)
    return;
  free(c->src);
  free(c->data);
  free(c->group);
  memset(c, 0, sizeof *c);
}

lsim_err lsim_jd_synth_make(const lsim_jd_synth *g, lsim_jd_collection *out,
                            lsim_errbuf *eb) {
  memset(out, 0, sizeof *out);
  if (g->n < 1 || g->d_in < 1 || g->d_out < 1 || g->r0 < 1 ||
      g->planted < 1 || g->groups < 1 || g->groups > g->n ||
      !(g->noise >= 0) || !isfinite(g->noise) ||
      (g->structure != LSIM_SYNTH_FULL && g->structure != LSIM_SYNTH_DIAG) ||
      (g->structure == LSIM_SYNTH_DIAG && g->r0 != g->planted) ||
      g->n > 100000 || g->d_in > 65536 || g->d_out > 65536 ||
      g->r0 > LSIM_JD_MAX_SOURCE_RANK || g->planted > 4096)
    return lsim_fail(eb, LSIM_E_CMP_SYNTHETIC,
                     "synthetic collection: need n >= 1, d_in, d_out, r0, "
                     "planted >= 1, 1 <= groups <= n, noise >= 0 and, for "
                     "diag structure, r0 == planted");
  int n = g->n, din = g->d_in, dout = g->d_out, r = g->r0, P = g->planted;
  size_t per = (size_t)r * (din + dout);
  size_t bases = (size_t)g->groups * P * (din + dout);
  out->src = calloc((size_t)n, sizeof *out->src);
  out->data = calloc((size_t)n * per, sizeof *out->data);
  out->group = calloc((size_t)n, sizeof *out->group);
  double *U0 = calloc(bases, sizeof *U0);
  double *CA = calloc((size_t)r * P, sizeof *CA);
  double *CB = calloc((size_t)P * r, sizeof *CB);
  if (!out->src || !out->data || !out->group || !U0 || !CA || !CB) {
    free(U0);
    free(CA);
    free(CB);
    lsim_jd_collection_release(out);
    return lsim_fail(eb, LSIM_E_NOMEM, "synthetic collection of %d", n);
  }
  out->n = n;
  out->d_in = din;
  out->d_out = dout;
  lsim_rng rng;
  lsim_rng_init(&rng, g->seed, LSIM__SYNTH_STREAM);
  /* U0_g [dout][P] then V0_g [din][P], group after group */
  for (int q = 0; q < g->groups; q++) {
    double *U = U0 + (size_t)q * P * (din + dout), *V = U + (size_t)dout * P;
    for (size_t t = 0; t < (size_t)dout * P; t++)
      U[t] = lsim__gauss(&rng) / sqrt((double)dout);
    for (size_t t = 0; t < (size_t)din * P; t++)
      V[t] = lsim__gauss(&rng) / sqrt((double)din);
  }
  for (int i = 0; i < n; i++) {
    int q = i % g->groups;
    const double *U = U0 + (size_t)q * P * (din + dout);
    const double *V = U + (size_t)dout * P;
    double *A = out->data + (size_t)i * per, *B = A + (size_t)r * din;
    out->group[i] = q;
    if (g->structure == LSIM_SYNTH_FULL) {
      for (size_t t = 0; t < (size_t)r * P; t++)
        CA[t] = lsim__gauss(&rng);
      for (size_t t = 0; t < (size_t)P * r; t++)
        CB[t] = lsim__gauss(&rng);
    } else {
      memset(CA, 0, sizeof *CA * (size_t)r * P);
      memset(CB, 0, sizeof *CB * (size_t)P * r);
      for (int j = 0; j < P; j++) {
        CA[j * P + j] = lsim__gauss(&rng);
        CB[j * r + j] = 1;
      }
    }
    for (int p = 0; p < r; p++) /* A = C_A V0^T + noise */
      for (int k = 0; k < din; k++) {
        double a = 0;
        for (int j = 0; j < P; j++)
          a += CA[p * P + j] * V[(size_t)k * P + j];
        A[(size_t)p * din + k] = a + g->noise * lsim__gauss(&rng) /
                                         sqrt((double)din);
      }
    for (int o = 0; o < dout; o++) /* B = U0 C_B + noise */
      for (int p = 0; p < r; p++) {
        double a = 0;
        for (int j = 0; j < P; j++)
          a += U[(size_t)o * P + j] * CB[j * r + p];
        B[(size_t)o * r + p] = a + g->noise * lsim__gauss(&rng) /
                                       sqrt((double)dout);
      }
    out->src[i].rank = r;
    out->src[i].scale = 0.25 + 3.75 * lsim_rng_unit(&rng);
    out->src[i].A = A;
    out->src[i].B = B;
  }
  free(U0);
  free(CA);
  free(CB);
  return 0;
}
