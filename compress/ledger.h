/*
** ledger.h: parameter ledgers and break-even collection sizes of shared-
** basis compression (article 0x06G3), in exact 64-bit integers (every
** product is overflow-checked: E_CMP_OVERFLOW, never a wrapped count).
**
** For one adapted matrix shape, S = d_in + d_out, n adapters of rank r0,
** shared rank R and k clusters:
**   ordinary LoRA               n r0 S
**   JD-Full                     R S + n R^2        (k = 1)
**   JD-Diag                     R S + n R
**   clustered JD-Full, payload  k R S + n R^2
**   clustered JD-Full, paper    k R S + n (R^2 + 1)   (one assignment each)
**   clustered JD-Diag, payload  k R S + n R
** A representation saves parameters when n (r0 S - c) > k R S, with c the
** per-adapter core size (R^2 or R).  When r0 S - c > 0 the least saving n
** is floor(k R S / (r0 S - c)) + 1; otherwise no collection size saves
** anything under this count and the break-even fails with
** E_CMP_NO_BREAKEVEN (a saving is never claimed from a non-positive
** denominator).
*/
#ifndef LSIM_COMPRESS_LEDGER_H
#define LSIM_COMPRESS_LEDGER_H

#include "../engine/lsim.h"

typedef struct lsim_jd_ledger {
  int64_t S;
  int64_t lora;
  int64_t full, diag;           /* one shared basis (k = 1) */
  int64_t full_k, full_k_paper; /* k clusters */
  int64_t diag_k;
} lsim_jd_ledger;

/* Every argument >= 1 (k <= n is not required here). */
lsim_err lsim_jd_ledger_count(int64_t n, int64_t r0, int64_t d_in,
                              int64_t d_out, int64_t R, int64_t k,
                              lsim_jd_ledger *out, lsim_errbuf *eb);

/*
** Break-even of method (LSIM_JD_FULL or LSIM_JD_DIAG, jd.h) with k
** clusters: *num = k R S, *den = r0 S - c and *min_n the least n that
** saves parameters.  E_CMP_NO_BREAKEVEN when den <= 0 (num and den are
** still written).
*/
lsim_err lsim_jd_breakeven(int method, int64_t r0, int64_t d_in,
                           int64_t d_out, int64_t R, int64_t k,
                           int64_t *min_n, int64_t *num, int64_t *den,
                           lsim_errbuf *eb);

#endif /* LSIM_COMPRESS_LEDGER_H */
