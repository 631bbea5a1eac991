/*
** compress_ref.h: exact checks of shared-basis compression (article
** 0x06G2, 0x06G4) in GMP rationals; no floating point, results compared
** with ==.
**
** Matrices are lsim_qmat (cpu_ref.h) with the output-matrix rule of that
** header.  Shapes: a delta is [d_out][d_in], U [d_out][R], V [d_in][R], a
** full core [R][R], a diagonal core [1][R].
**
**   lsim_ref_jd_orthonormal  Q^T Q == I exactly (JD-Full's constraint),
**                            else E_CMP_NOT_ORTHONORMAL
**   lsim_ref_jd_core         Sigma = U^T delta V (the optimal full core for
**                            orthonormal bases)
**   lsim_ref_jd_expand       U Sigma V^T, full or diagonal core
**   lsim_ref_jd_full_error   sum_i ||delta_i - U (U^T delta_i V) V^T||_F^2
**                            with orthonormality checked first
**   lsim_ref_jd_diag_kept    the same with the off-diagonal core entries
**                            dropped (the displayed-basis JD-Diag witness)
**   lsim_ref_span_rank       rank of [vec(delta_1) ... vec(delta_n)] by
**                            exact elimination (a rank above R proves that
**                            no rank-R JD-Diag collection is exact)
**   lsim_ref_jd_apply        Y = ((X V) Sigma^T) U^T, the three-stage
**                            runtime operator, full or diagonal core
**   lsim_ref_jd_breakeven    the break-even threshold k R S / (r0 S - c)
**                            as an exact rational (c = R^2 for JD-Full, R
**                            for JD-Diag) and the least saving n;
**                            E_CMP_NO_BREAKEVEN when r0 S - c <= 0
**
** Errors: E_SHAPE, E_CMP_NOT_ORTHONORMAL, E_NOMEM.
*/
#ifndef LSIM_COMPRESS_REF_H
#define LSIM_COMPRESS_REF_H

#include "../backends/cpu_ref/cpu_ref.h"

#ifdef __cplusplus
extern "C" {
#endif

lsim_err lsim_ref_jd_orthonormal(const lsim_qmat *Q, lsim_errbuf *eb);
lsim_err lsim_ref_jd_core(const lsim_qmat *U, const lsim_qmat *V,
                          const lsim_qmat *delta, lsim_qmat *core,
                          lsim_errbuf *eb);
/* diag: core is [1][R] and means diag(core) */
lsim_err lsim_ref_jd_expand(const lsim_qmat *U, const lsim_qmat *V,
                            const lsim_qmat *core, int diag,
                            lsim_qmat *delta, lsim_errbuf *eb);
/* ||a - b||_F^2 into out (initialised) */
lsim_err lsim_ref_fro2_diff(const lsim_qmat *a, const lsim_qmat *b, mpq_t out,
                            lsim_errbuf *eb);
lsim_err lsim_ref_jd_full_error(const lsim_qmat *deltas, int n,
                                const lsim_qmat *U, const lsim_qmat *V,
                                mpq_t out, lsim_errbuf *eb);
lsim_err lsim_ref_jd_diag_kept(const lsim_qmat *deltas, int n,
                               const lsim_qmat *U, const lsim_qmat *V,
                               mpq_t out, lsim_errbuf *eb);
lsim_err lsim_ref_span_rank(const lsim_qmat *deltas, int n, int *rank,
                            lsim_errbuf *eb);
lsim_err lsim_ref_jd_apply(const lsim_qmat *X, const lsim_qmat *U,
                           const lsim_qmat *V, const lsim_qmat *core,
                           int diag, lsim_qmat *Y, lsim_errbuf *eb);

/* full: 1 for JD-Full (c = R^2), 0 for JD-Diag (c = R).  threshold must be
** initialised; *min_n = floor(threshold) + 1. */
lsim_err lsim_ref_jd_breakeven(int full, long r0, long d_in, long d_out,
                               long R, long k, mpq_t threshold, long *min_n,
                               lsim_errbuf *eb);

#ifdef __cplusplus
}
#endif

#endif /* LSIM_COMPRESS_REF_H */
