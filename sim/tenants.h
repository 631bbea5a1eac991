/*
** tenants.h: the per-tenant figures of a run (issue 21): who was served,
** how fast, at what share of what they asked for, what a cold adapter cost
** them in TTFT, and how long they went without service.
**
** One row per tenant of the scenario plus the all-tenants row, computed at
** the end of a run from the run's own rows: the `requests` table (counts,
** latencies, the time breakdown of each request, demand), the `starvation`
** table (the service intervals) and the metrics registry's service ledger
** (completed service, moved only at completed_service_debited).  The same
** array is stored in `tenant_summary`, printed, written to the `.prom` file,
** the JSON summary and `compare.csv`: every output takes its names and
** values from LSIM_TENANT_FIGS below, so they agree by construction (and
** tests/test_study.c checks that they do, and that each figure equals SQL
** over the rows).  Definitions: docs/SCHEMA.md, `tenant_summary`.
**
** A figure with no value (a percentile over no request, a share of
** nothing, a cold comparison without a matched window) is NAN: NULL in
** SQLite, an empty CSV cell, JSON null, left out of the .prom file.
*/
#ifndef LSIM_TENANTS_H
#define LSIM_TENANTS_H

#include <sqlite3.h>
#include <stdio.h>

#include "scenario.h"

/* Cold vs warm TTFT is compared per tenant within windows of arrival
** time: the span from tick 0 to the last arrival cut into this many equal
** windows (window = last arrival / LSIM_TENANTS_WINDOWS + 1 ticks; the
** same for every run of one trace, whatever the scheduler). */
#define LSIM_TENANTS_WINDOWS 100

/* X(ID, column, 1 when an integer count) in column order. */
#define LSIM_TENANT_FIGS(X)                                                \
  X(ARRIVED, "arrived", 1)                                                 \
  X(COMPLETED, "completed", 1)                                             \
  X(REJECTED, "rejected", 1)                                               \
  X(UNFINISHED, "unfinished", 1)                                           \
  X(OUTPUT_TOKENS, "output_tokens", 1)                                     \
  X(TTFT_P50, "ttft_p50_ms", 0)                                            \
  X(TTFT_P90, "ttft_p90_ms", 0)                                            \
  X(TTFT_P99, "ttft_p99_ms", 0)                                            \
  X(TBT_P50, "tbt_p50_ms", 0)                                              \
  X(TBT_P90, "tbt_p90_ms", 0)                                              \
  X(TBT_P99, "tbt_p99_ms", 0)                                              \
  X(E2E_P50, "e2e_p50_ms", 0)                                              \
  X(E2E_P90, "e2e_p90_ms", 0)                                              \
  X(E2E_P99, "e2e_p99_ms", 0)                                              \
  X(SERVICE, "service", 1)                                                 \
  X(SERVICE_SHARE, "service_share", 0)                                     \
  X(DEMAND, "demand", 1)                                                   \
  X(DEMAND_SHARE, "demand_share", 0)                                       \
  X(QUEUE_WAIT_MEAN, "queue_wait_mean_ms", 0)                              \
  X(LOAD_WAIT_MEAN, "load_wait_mean_ms", 0)                                \
  X(PREFILL_MEAN, "prefill_mean_ms", 0)                                    \
  X(DECODE_MEAN, "decode_mean_ms", 0)                                      \
  X(PREEMPTIONS, "preemptions", 1)                                         \
  X(COLD_REQUESTS, "cold_requests", 1)                                     \
  X(COLD_COMPARED, "cold_compared", 1)                                     \
  X(WARM_COMPARED, "warm_compared", 1)                                     \
  X(TTFT_COLD_P50, "ttft_cold_p50_ms", 0)                                  \
  X(TTFT_WARM_P50, "ttft_warm_p50_ms", 0)                                  \
  X(COLD_TTFT_COST, "cold_ttft_cost_ms", 0)                                \
  X(LONGEST_STARVED, "longest_starved_ms", 0)                              \
  X(STARVED_INTERVALS, "starved_intervals", 1)

enum {
#define LSIM__TF_ENUM(id, col, cnt) LSIM_TF_##id,
  LSIM_TENANT_FIGS(LSIM__TF_ENUM)
#undef LSIM__TF_ENUM
  LSIM_TF_N
};

typedef struct lsim_tenant_fig {
  int tenant;          /* tenant index; -1 for the all-tenants row */
  double v[LSIM_TF_N]; /* indexed by LSIM_TF_*; NAN: no value */
  /* behind the latency percentiles, for the .prom summaries' _count and
  ** _sum: how many values, and their sum in ticks (TBT: in ticks per
  ** token) */
  int64_t n_ttft, n_tbt, n_e2e;
  double sum_ttft, sum_tbt, sum_e2e;
  int64_t window_ticks; /* the cold comparison's window (the same in every
                           row) */
} lsim_tenant_fig;

/* Column name of figure k ("ttft_p50_ms"); NULL out of range. */
const char *lsim_tenants_key(int k);
/* 1 when figure k is an integer count. */
int lsim_tenants_is_count(int k);
/* The row's name: the scenario's tenant name, or "all". */
const char *lsim_tenants_name(const lsim_scenario *sc,
                              const lsim_tenant_fig *f);

/* Compute out[0..ntenants) (tenant t in out[t]) and out[ntenants] (all
** tenants) from the run's requests table in db and the metrics registry's
** figures per tenant: completed service (service[ntenants]), the longest
** service-starvation interval in ticks (svc_longest[ntenants], INT64_MIN
** for none) and the starved ones among them (svc_starved[ntenants]), and
** the count of completed requests (completed: the rows must not exceed
** it, or it is LSIM_E_BUG).  Memory stays within the percentile budget of
** sim/pctl.h whatever the run's length. */
lsim_err lsim_tenants_compute(sqlite3 *db, const lsim_scenario *sc,
                              const int64_t *service, int64_t completed,
                              const int64_t *svc_longest,
                              const int64_t *svc_starved,
                              lsim_tenant_fig *out, lsim_errbuf *eb);

/* Write the rows into tenant_summary (created when missing), in the run's
** open transaction, before the run turns ok. */
struct lsim_db;
lsim_err lsim_tenants_store(struct lsim_db *db, const lsim_scenario *sc,
                            const lsim_tenant_fig *f, lsim_errbuf *eb);

/* The console table (at most 96 columns wide). */
void lsim_tenants_print(FILE *f, const lsim_scenario *sc,
                        const lsim_tenant_fig *t);

/* The per-tenant metrics of the .prom file: each series has one bounded
** label, tenant="NAME" (at most LSIM_MAX_TENANTS values, escaped); no
** HELP lines (lsim_claims_annotate_prom adds them). */
void lsim_tenants_prom(FILE *f, const lsim_scenario *sc,
                       const lsim_tenant_fig *t);

/* v as text that reads back as the same double (the shortest of %.15g,
** %.17g; an integer without a fraction), "" for NAN.  Returns out. */
const char *lsim_tenants_num(char *out, size_t size, double v);

#endif /* LSIM_TENANTS_H */
