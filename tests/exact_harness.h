/*
** exact_harness.h: helpers for tests of the exact executor: call-and-check
** macros for lsim_err functions and rational matrices written as text.
*/
#ifndef LSIM_EXACT_HARNESS_H
#define LSIM_EXACT_HARNESS_H

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu_ref/cpu_ref.h"

#define OK(call)                                                        \
  do {                                                                  \
    lsim_errbuf eb_ = LSIM_ERRBUF_INIT;                                 \
    lsim_errbuf *eb = &eb_;                                             \
    lsim_err rc_ = (call);                                              \
    cr_assert_eq(rc_, 0, "%s failed: %s: %s", #call, lsim_err_name(rc_), \
                 eb_.msg);                                              \
  } while (0)

/* Expect exactly `code`; the message must be non-empty, lowercase-led and
** without a trailing full stop. */
#define FAILS(code, call)                                                   \
  do {                                                                      \
    lsim_errbuf eb_ = LSIM_ERRBUF_INIT;                                     \
    lsim_errbuf *eb = &eb_;                                                 \
    lsim_err rc_ = (call);                                                  \
    cr_assert_eq(rc_, code, "%s: got %s (%s), want %s", #call,              \
                 lsim_err_name(rc_), eb_.msg, lsim_err_name(code));         \
    size_t n_ = strlen(eb_.msg);                                            \
    cr_assert(n_ > 0 && eb_.msg[n_ - 1] != '.', "bad message '%s'",        \
              eb_.msg);                                                     \
  } while (0)

/* Fill m (rows x cols, initialised here) from whitespace-separated
** rationals. */
static inline void qm(lsim_qmat *m, int rows, int cols, const char *spec) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_qmat_init(m, rows, cols, &eb), 0);
  char *s = strdup(spec), *save = NULL;
  int k = 0;
  for (char *t = strtok_r(s, " \t\n|", &save); t;
       t = strtok_r(NULL, " \t\n|", &save), k++) {
    cr_assert_lt(k, rows * cols, "too many values in '%s'", spec);
    cr_assert_eq(lsim_q_parse(m->v[k], t, &eb), 0, "%s", eb.msg);
  }
  cr_assert_eq(k, rows * cols, "'%s' has %d values, want %d", spec, k,
               rows * cols);
  free(s);
}

static inline void adapter(lsim_qadapter *a, int id, int rank, int d_in, int d_out,
                    const char *A, const char *Bm, const char *scale) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  a->id = id;
  a->rank = rank;
  mpq_init(a->scale);
  cr_assert_eq(lsim_q_parse(a->scale, scale, &eb), 0);
  qm(&a->A, rank, d_in, A);
  qm(&a->B, d_out, rank, Bm);
}

#endif /* LSIM_EXACT_HARNESS_H */
