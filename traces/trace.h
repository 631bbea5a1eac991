/*
** trace.h: a stream of request arrivals.
**
** A trace is read one record at a time (lsim_trace_next) and never loaded
** whole, so replay memory does not grow with trace length.  Two sources:
**
**   - the synthetic generator: Poisson arrivals, tenants by traffic weight,
**     adapters of a tenant by a Zipf law, prompt and output lengths from
**     length distributions; every draw comes from its own seeded stream;
**   - a lorasim CSV file, one request per line (docs/TRACES.md):
**       arrival_us,tenant,adapter,prompt_tokens,output_tokens
**     with a header line, arrivals non-decreasing.
**
** Adapters are owned by tenants: adapter a belongs to tenant a % ntenants.
*/
#ifndef LSIM_TRACE_H
#define LSIM_TRACE_H

#include <stdio.h>

#include "../engine/lsim.h"
#include "../sim/rng.h"

typedef struct lsim_trace_rec {
  int64_t id;         /* 0, 1, 2, ... in arrival order */
  int64_t arrival_ns; /* non-decreasing */
  int tenant;
  int adapter;
  int prompt_tokens; /* >= 1 */
  int output_tokens; /* >= 1 */
} lsim_trace_rec;

/* A length distribution: fixed, uniform [min,max], or geometric-like
** "exponential" with a mean, clamped to [min,max]. */
enum lsim_dist_kind { LSIM_DIST_FIXED = 0, LSIM_DIST_UNIFORM, LSIM_DIST_EXP };
typedef struct lsim_len_dist {
  enum lsim_dist_kind kind;
  int64_t min, max; /* inclusive bounds; fixed uses min == max */
  double mean;      /* exponential only */
} lsim_len_dist;

typedef struct lsim_trace_gen_cfg {
  int64_t requests;
  double rate_per_s;
  int ntenants;
  const int64_t *tenant_weights; /* ntenants entries */
  int nadapters;
  double zipf_s;
  const lsim_len_dist *prompt;
  const lsim_len_dist *output;
  uint64_t seed;
} lsim_trace_gen_cfg;

typedef struct lsim_trace {
  /* private */
  int is_file;
  FILE *fp;
  char path[1024];
  int64_t line;
  int64_t next_id;
  int64_t last_ns;
  int ntenants, nadapters;
  /* generator */
  lsim_trace_gen_cfg gen;
  double t_ns; /* generator arrival clock, ns */
  lsim_rng rng_arrival, rng_tenant, rng_adapter, rng_len;
  double *tenant_cdf;  /* ntenants */
  double *zipf_cdf;    /* over a tenant's adapters, by popularity rank */
  int zipf_n;          /* entries in zipf_cdf: the most any tenant owns */
} lsim_trace;

/* Open a generator stream.  Copies cfg (the pointed-to arrays must outlive
** the trace).  Release with lsim_trace_close. */
lsim_err lsim_trace_open_gen(lsim_trace *t, const lsim_trace_gen_cfg *cfg,
                             lsim_errbuf *eb);

/* Open a CSV file; tenant and adapter indexes are checked against the
** given counts as records are read. */
lsim_err lsim_trace_open_csv(lsim_trace *t, const char *path, int ntenants,
                             int nadapters, lsim_errbuf *eb);

/* Next record: returns 1 and fills *rec, 0 at the end, or an lsim_err
** (LSIM_E_TRACE_*, message "file:line: ..."). */
int lsim_trace_next(lsim_trace *t, lsim_trace_rec *rec, lsim_errbuf *eb);

void lsim_trace_close(lsim_trace *t);

#endif /* LSIM_TRACE_H */
