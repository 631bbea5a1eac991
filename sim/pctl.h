/*
** pctl.h: exact nearest-rank percentiles of groups of values in bounded
** memory, over a stream the caller can feed again (a query over the run's
** `requests` rows).
**
** The p-th percentile of N values is the ceil(p*N/100)-th smallest (at
** least the 1st, at most the N-th), exactly the value a sort would put
** there: the summary's and tenant_summary's figures (docs/SCHEMA.md).
**
** How.  The first pass counts every group and keeps its values while they
** fit in the budget; when all of them fit, each target is selected from
** them (quickselect) and one pass was enough.  Otherwise the values are
** dropped, and every target narrows an interval of values that holds its
** answer: a pass counts the values of that interval in 1,024 sub-ranges
** (LSIM_PCTL_BUCKETS), the one holding the target's rank becomes the next
** interval (cut to the smallest and largest value seen in it), and once an
** interval's values fit in what is left of the budget, the next pass keeps
** them and selects among them.  An interval whose values are all equal is
** the answer at once.  Values are ordered by their IEEE-754 bits made
** unsigned (an order-preserving key), so each pass divides the key range
** by up to 1,024 and 64-bit keys need at most 7 narrowing passes; a
** latency distribution typically needs two or three passes in all.
** Targets that do not fit in one pass's budget wait for the next.  Memory:
** at most the budget plus a few words per group and target; time: one
** feed of the stream per pass.
**
** The caller feeds the same multiset of values on every pass (in any
** order); a count that differs from the first pass's is reported as
** LSIM_E_BUG.  -0.0 is taken as 0.0; NaN must not be fed.
**
**   lsim_pctl *s = lsim_pctl_new(ngroups, budget);
**   int t = lsim_pctl_want(s, group, 99);     before the first pass
**   while (lsim_pctl_pass(s)) {
**     for each value: lsim_pctl_add(s, group, v);
**     if ((rc = lsim_pctl_end(s, eb))) ...;
**   }
**   lsim_pctl_value(s, t);                     NAN when the group is empty
**   lsim_pctl_free(s);
*/
#ifndef LSIM_PCTL_H
#define LSIM_PCTL_H

#include <stdint.h>

#include "../engine/lsim.h"

/* The default budget, bytes: the values kept at once plus the counting
** tables (LSIM_PCTL_BUCKETS x 24 bytes per target being narrowed). */
#define LSIM_PCTL_BUDGET (INT64_C(32) << 20)
#define LSIM_PCTL_BUCKETS 1024

typedef struct lsim_pctl lsim_pctl;

/* The budget in bytes the run's summaries use: LSIM_PCTL_BUDGET, or the
** environment's LSIM_TEST_PCTL_BUDGET (bytes, at least the counting table
** of one target) so that tests can take the multi-pass path on small
** runs. */
int64_t lsim_pctl_budget(void);

/* A selection over groups 0..ngroups-1 in at most `budget` bytes (raised to
** one counting table when smaller); NULL when out of memory. */
lsim_pctl *lsim_pctl_new(int ngroups, int64_t budget);
void lsim_pctl_free(lsim_pctl *s);

/* Ask for the p-th percentile (0 < p <= 100) of a group; returns the
** target's index, or -1 when out of memory or after the first pass. */
int lsim_pctl_want(lsim_pctl *s, int group, double p);

/* 1: feed every value again (a pass begins); 0: every target is answered. */
int lsim_pctl_pass(lsim_pctl *s);
void lsim_pctl_add(lsim_pctl *s, int group, double v);
/* End the pass: LSIM_E_NOMEM, or LSIM_E_BUG when the values fed differ in
** number from the first pass's. */
lsim_err lsim_pctl_end(lsim_pctl *s, lsim_errbuf *eb);

double lsim_pctl_value(const lsim_pctl *s, int target);
int64_t lsim_pctl_count(const lsim_pctl *s, int group);
int lsim_pctl_passes(const lsim_pctl *s); /* passes ended so far */
/* The most bytes of values and counting tables held at once (at most the
** budget; the few words per group and target come on top). */
int64_t lsim_pctl_peak(const lsim_pctl *s);

#endif /* LSIM_PCTL_H */
