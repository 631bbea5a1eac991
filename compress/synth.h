/*
** synth.h: seeded synthetic adapter collections for compression studies.
**
** groups planted structures g = 0..groups-1, each with its own random
** shared bases U0_g [d_out][P] and V0_g [d_in][P] (Gaussian entries scaled
** by 1/sqrt(dim)).  Adapter i belongs to group i % groups and has rank r0:
**
**   structure "full"  A_i = C_A V0_g^T + noise N_A,  B_i = U0_g C_B + noise N_B
**                     with C_A [r0][P], C_B [P][r0] Gaussian: every noise-
**                     free delta lies in span(U0_g) x span(V0_g), so JD-Full
**                     with R = P and one cluster per group is exact
**   structure "diag"  r0 = P, A_i = diag(d_i) V0_g^T + noise N_A,
**                     B_i = U0_g + noise N_B: noise-free deltas are
**                     combinations of the P planted atoms u_j v_j^T, so
**                     JD-Diag with R = P can be exact
**
** noise 0 plants pure structure; a large noise makes the adapters close to
** independent.  Each adapter also gets a magnitude in [0.25, 4) (through
** its scale), so normalisation matters.  Deterministic in the seed.
*/
#ifndef LSIM_COMPRESS_SYNTH_H
#define LSIM_COMPRESS_SYNTH_H

#include "jd.h"

enum { LSIM_SYNTH_FULL = 1, LSIM_SYNTH_DIAG = 2 };

typedef struct lsim_jd_synth {
  int n, d_in, d_out, r0, planted, groups, structure;
  double noise;
  uint64_t seed;
} lsim_jd_synth;

/* The factors, owned; release with lsim_jd_collection_release. */
typedef struct lsim_jd_collection {
  int n, d_in, d_out;
  lsim_jd_source *src; /* [n]; A and B point into data */
  double *data;
  int *group;          /* [n] the planted group */
} lsim_jd_collection;

/* E_CMP_SYNTHETIC for sizes out of range (n, d >= 1, r0 >= 1, P >= 1,
** groups 1..n, r0 == P for "diag", noise finite and >= 0). */
lsim_err lsim_jd_synth_make(const lsim_jd_synth *cfg, lsim_jd_collection *out,
                            lsim_errbuf *eb);
void lsim_jd_collection_release(lsim_jd_collection *c);

#endif /* LSIM_COMPRESS_SYNTH_H */
