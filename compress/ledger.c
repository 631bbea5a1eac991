/*
** ledger.c: exact parameter counts and break-even sizes (ledger.h).
*/
#include "ledger.h"

#include <string.h>

#include "jd.h"

/* a * b and a + b into *out; 1 on overflow. */
static int lsim__mul(int64_t a, int64_t b, int64_t *out) {
  return __builtin_mul_overflow(a, b, out);
}
static int lsim__add(int64_t a, int64_t b, int64_t *out) {
  return __builtin_add_overflow(a, b, out);
}

static lsim_err lsim__args(int64_t r0, int64_t d_in, int64_t d_out,
                           int64_t R, int64_t k, lsim_errbuf *eb) {
  if (r0 < 1 || d_in < 1 || d_out < 1 || R < 1 || k < 1)
    return lsim_fail(eb, LSIM_E_CMP_SHAPE,
                     "ledger needs r0, d_in, d_out, R, k >= 1 (got %lld, "
                     "%lld, %lld, %lld, %lld)", (long long)r0,
                     (long long)d_in, (long long)d_out, (long long)R,
                     (long long)k);
  return 0;
}

lsim_err lsim_jd_ledger_count(int64_t n, int64_t r0, int64_t d_in,
                              int64_t d_out, int64_t R, int64_t k,
                              lsim_jd_ledger *out, lsim_errbuf *eb) {
  memset(out, 0, sizeof *out);
  lsim_err rc = lsim__args(r0, d_in, d_out, R, k, eb);
  if (rc)
    return rc;
  if (n < 1)
    return lsim_fail(eb, LSIM_E_CMP_SHAPE, "ledger needs n >= 1");
  lsim_jd_ledger L = {0};
  int64_t RS = 0, kRS = 0, R2 = 0, nR2 = 0, nR = 0, t = 0;
  int bad = lsim__add(d_in, d_out, &L.S);
  bad |= lsim__mul(n, r0, &t) | lsim__mul(t, L.S, &L.lora);
  bad |= lsim__mul(R, L.S, &RS) | lsim__mul(k, RS, &kRS);
  bad |= lsim__mul(R, R, &R2) | lsim__mul(n, R2, &nR2);
  bad |= lsim__mul(n, R, &nR);
  bad |= lsim__add(RS, nR2, &L.full) | lsim__add(RS, nR, &L.diag);
  bad |= lsim__add(kRS, nR2, &L.full_k) | lsim__add(kRS, nR, &L.diag_k);
  bad |= lsim__add(L.full_k, n, &L.full_k_paper);
  if (bad)
    return lsim_fail(eb, LSIM_E_CMP_OVERFLOW,
                     "parameter count overflows 64 bits");
  *out = L;
  return 0;
}

lsim_err lsim_jd_breakeven(int method, int64_t r0, int64_t d_in,
                           int64_t d_out, int64_t R, int64_t k,
                           int64_t *min_n, int64_t *num, int64_t *den,
                           lsim_errbuf *eb) {
  *min_n = *num = *den = 0;
  lsim_err rc = lsim__args(r0, d_in, d_out, R, k, eb);
  if (rc)
    return rc;
  if (method != LSIM_JD_FULL && method != LSIM_JD_DIAG)
    return lsim_fail(eb, LSIM_E_CMP_METHOD, "unknown method %d", method);
  int64_t S = 0, RS = 0, c = 0, r0S = 0;
  int bad = lsim__add(d_in, d_out, &S) | lsim__mul(R, S, &RS);
  bad |= lsim__mul(k, RS, num) | lsim__mul(r0, S, &r0S);
  c = R;
  if (method == LSIM_JD_FULL)
    bad |= lsim__mul(R, R, &c);
  bad |= __builtin_sub_overflow(r0S, c, den);
  if (bad)
    return lsim_fail(eb, LSIM_E_CMP_OVERFLOW,
                     "break-even terms overflow 64 bits");
  if (*den <= 0)
    return lsim_fail(eb, LSIM_E_CMP_NO_BREAKEVEN,
                     "%s: r0*S - %s = %lld is not positive: no collection "
                     "size saves parameters", lsim_jd_method_name(method),
                     method == LSIM_JD_FULL ? "R^2" : "R", (long long)*den);
  *min_n = *num / *den + 1; /* num >= 1, den >= 1: floor then the next n */
  return 0;
}
