/*
** report.h: the metrics registry (a sink fed by publication events), the
** end-of-run summary, the Prometheus-format metrics file and the plots.
**
** Counters move only on the publication event that owns them (article
** 0x09K): a cache hit is counted at queue_enqueued, a load at
** adapter_load_started, service at completed_service_debited.  Latency
** percentiles are computed exactly, at the end, from the requests table by
** nearest rank (the p-th percentile of N values is the ceil(p*N/100)-th
** smallest), so memory does not grow with the trace.
**
** TTFT = first_token_tick - arrival_tick; TBT is the per-request mean time
** between output tokens, (finish - first_token) / (output_tokens - 1), over
** requests with at least two tokens (vLLM calls it TPOT).
**
** SLO attainment compares in integers: TTFT meets a target of T ms when
** (first_token - arrival) * ns_per_tick <= T * 10^6; TBT meets it when
** (finish - first_token) * ns_per_tick <= T * 10^6 * (output_tokens - 1).
*/
#ifndef LSIM_REPORT_H
#define LSIM_REPORT_H

#include <sqlite3.h>
#include <stdio.h>

#include "../engine/event.h"
#include "scenario.h"

#define LSIM_REPORT_PLOTS 4 /* the figures of one run (lsim_report_plots) */

typedef struct lsim_metrics {
  int64_t by_kind[LSIM_EV__END];
  int64_t hits, misses;     /* at queue_enqueued */
  int64_t h2d_bytes;        /* at adapter_load_started */
  int64_t rows_planned;     /* at iteration_selected */
  int64_t rows_completed;   /* at iteration_completed */
  int ntenants;
  int64_t *tenant_service;  /* at completed_service_debited */
  int64_t *tenant_completed; /* request records with outcome ok */
  int64_t *tenant_rejected;
  int64_t *tenant_unfinished;
  int64_t requests_ok, requests_rejected, requests_unfinished;
  int64_t prefill_units, decode_units;
  /* scheduling and fairness (docs/SCHEDULING.md), each at its event */
  unsigned char *tenant_seen; /* at queue_enqueued */
  int64_t max_gap;            /* max over debits of max - min service */
  int gap_min;                /* tenant holding the minimum, -1: recount */
  int64_t prefetch_used, prefetch_wasted, prefetch_wasted_bytes;
  int64_t early_aborts;       /* admission_rejected "early_abort" */
  int64_t load_intervals, load_starved, service_intervals, service_starved;
  /* per tenant, its service-starvation intervals (the starvation table's
  ** kind 'service' rows, entity = tenant): the longest, in ticks
  ** (INT64_MIN: none), and how many were judged starved */
  int64_t *tenant_svc_longest, *tenant_svc_starved;
  /* shape (lsim_metrics_shape): workers, adapters and their ranks */
  int workers, nadapters;
  const int *rank;             /* [nadapters], borrowed */
  unsigned char *loaded;       /* [workers * nadapters] loaded at least once */
  int64_t distinct_loaded;     /* (worker, adapter) pairs ever loaded */
  int64_t distinct_loaded_bytes;
  /* per iteration (lsim_metrics_iteration) */
  int64_t iters, iter_adapters, iter_segments, true_rank_rows,
      padded_rank_rows;
  /* completed service projections (article 0x09M): resident vs
  ** cold-loaded request (missed at queue_enqueued), rank bucket
  ** (ceil-pow2 of the adapter's rank: <=8, 16, 32, 64, >64), phase */
  /* per-request flags (cold, waiting, in the system) of the requests
  ** between queue_enqueued and their request record only: an
  ** open-addressing map by request id (linear probing, `rq_cap` a power
  ** of two, id -1 an empty slot), so it holds the requests in flight, not
  ** one byte per request of the trace.  Never iterated: no order of it
  ** reaches a figure. */
  int64_t *rq_id;
  unsigned char *rq_flags;
  int64_t rq_cap, rq_n;
  int64_t service_resident, service_cold;
  int64_t service_rank[5];
  /* backlogged service gap (VTC's guarantee is about clients that are
  ** continuously backlogged): per tenant, requests in the system; per pair
  ** of tenants, the running max and min of S_f - S_g since both became
  ** backlogged; the largest spread seen.  Kept for <= 32 tenants. */
  int64_t *in_system;          /* [ntenants] */
  int64_t *pair_hi, *pair_lo;  /* [ntenants^2] */
  unsigned char *pair_on;      /* [ntenants^2] */
  int64_t backlog_gap;         /* -1 when not kept */
  /* service per backlogged time (docs/SCHEDULING.md, "Normalized Jain
  ** index"): per tenant, its requests in the system (from queue_enqueued
  ** to the request record), since when it has had one, and the ticks it
  ** had one; the weights are borrowed (NULL: all 1) */
  int64_t *insys;              /* [ntenants] */
  lsim_tick *insys_since;      /* [ntenants] */
  int64_t *busy_ticks;         /* [ntenants] */
  const int64_t *tenant_weight;
  int64_t max_prompt;          /* longest prompt seen at enqueue */
  int64_t max_wait_ticks;      /* longest arrival -> first token (or end) */
  int64_t preemptions, migrations, recompute_tokens; /* request_preempted */
  /* adapter (and basis) bytes resident over all workers: + at
  ** adapter_generation_published and basis_published, - at
  ** adapter_evicted and basis_evicted; the largest sum seen */
  int64_t resident_bytes, resident_peak;
  /* the prefix cache (docs/PREFIX.md), at prefix_hit, prefix_corrupt,
  ** prefix_published and prefix_evicted */
  int64_t px_lookups, px_hits, px_lookup_blocks, px_hit_blocks,
      px_reused_tokens, px_corrupt_blocks, px_corrupt_requests,
      px_published_blocks, px_evicted_blocks;
  int64_t disk_bytes; /* host tier: bytes of adapter_disk_read */
} lsim_metrics;

/* Give the registry the run's shape (after lsim_metrics_init). */
lsim_err lsim_metrics_shape(lsim_metrics *m, int workers, int nadapters,
                            const int *rank);
/* One completed iteration's plan figures. */
void lsim_metrics_iteration(lsim_metrics *m, int64_t distinct_adapters,
                            int64_t segments, int64_t true_rank_rows,
                            int64_t padded_rank_rows);

/* A starvation interval closed (replay's interval sink). */
void lsim_metrics_interval(lsim_metrics *m, const lsim_interval *iv,
                           int starved);

lsim_err lsim_metrics_init(lsim_metrics *m, int ntenants);
void lsim_metrics_event(lsim_metrics *m, const lsim_event *ev);
void lsim_metrics_request(lsim_metrics *m, const lsim_request_record *rec);
void lsim_metrics_release(lsim_metrics *m);

/* What drove a replay's clock (sim/replay.c, docs/FIDELITY.md): under the
** measured clock, the iterations and loads that ended at their measured
** time and those that fell back to the model's (the backend measured
** nothing for them), and the spans that are always the model's (host-tier
** disk reads, hotswap shadow copies).  All zero under the model clock. */
typedef struct lsim_replay_clock {
  int measured; /* 1: --clock measured */
  int recorded; /* 1: --clock-from: the measured spans are a recorded
                   run's, not this process's (their claims are modeled) */
  int64_t iters_measured, iters_model;
  int64_t loads_measured, loads_model;
  int64_t other_model;
} lsim_replay_clock;

typedef struct lsim_summary {
  const char *status; /* "ok", "failed", "interrupted" */
  /* what the database's run row says on return: NULL when no run row was
  ** committed (the database was not created, or holds no run), "running"
  ** when the end could not be written (a failed write), else status */
  const char *db_status;
  char db_path[1024];
  char plots[LSIM_REPORT_PLOTS][1100]; /* written PNG paths (each with its
                                          SVG beside it), "" when none */
  char metrics_path[1100];
  char json_path[1100];  /* the JSON summary written, "" when none */
  char plot_note[1200];  /* why plots are missing, "" otherwise */
  int64_t events, queue_events, iterations;
  lsim_tick end_tick;
  double sim_seconds;
  int64_t arrived, completed, rejected, unfinished;
  double ttft_p50_ms, ttft_p99_ms, tbt_p50_ms, tbt_p99_ms; /* -1: none */
  /* the requests the TTFT percentiles are over and their TTFTs summed, in
  ** seconds (the .prom summary's _count and _sum) */
  int64_t ttft_count;
  double ttft_sum_seconds;
  int64_t loads, load_failures, evictions;
  double hit_rate; /* -1 when no arrival */
  double jain;     /* Jain's index over seen tenants' service; -1: none */
  /* Jain's index over x_t = service_t / (weight_t * backlogged ticks_t),
  ** the tenants with backlogged time; -1: none (docs/SCHEDULING.md) */
  double jain_norm;
  /* the starvation threshold the intervals were judged by, ticks (0: only
  ** open intervals), and whether it was derived (no $.fairness key) */
  int64_t starvation_ticks;
  double starvation_ms;
  int starvation_derived;
  int64_t max_gap; /* max pairwise tenant service gap over time */
  double prefetch_precision; /* used / prefetch reservations; -1: none */
  int64_t prefetch_wasted_bytes, early_aborts, load_starved, service_starved;
  /* Output tokens of completed requests per simulated second; -1: no time. */
  double throughput_tok_s;
  /* SLO attainment: the fraction of completed requests whose TTFT (TBT) is
  ** at most $.fairness.slo_ttft_ms (slo_tbt_ms), exact, over the requests
  ** the percentile is taken over; -1 when the target is 0 or none has one. */
  double slo_ttft_attain, slo_tbt_attain;
  /* Malformed trace rows skipped ($.trace.skip_bad_rows / --skip-bad-rows)
  ** and the message of the first one. */
  int64_t trace_rows_skipped;
  char trace_first_skipped[512];
  /* end-to-end latency (finish - arrival) of completed requests; -1: none */
  double e2e_p50_ms, e2e_p99_ms;
  double max_wait_ms; /* longest wait for a first token (or for the end) */
  /* adapter bytes copied / bytes of the distinct (worker, adapter) pairs
  ** ever loaded: 1.0 means every adapter crossed the link once; -1: none */
  double load_amplification;
  double adapters_per_iter, segments_per_iter; /* means; -1: none */
  double rank_padding_ratio; /* padded / true rank rows; -1: none */
  /* completed service projections (lsim_metrics) */
  int64_t service_prefill, service_decode, service_resident, service_cold;
  int64_t service_rank[5]; /* rank <=8, 16, 32, 64, >64 */
  /* largest spread of S_f - S_g while both tenants were backlogged, and
  ** VTC's bound 2 * max(w_in * longest prompt, w_out * max_batch_tokens);
  ** -1 when not kept (more than 32 tenants) */
  int64_t backlog_gap, vtc_bound;
  /* preemption by recompute ($.workers.kv_reserve "incremental") */
  int64_t preemptions, migrations, recompute_tokens;
  /* bytes: the peak of adapter + basis bytes resident (all workers) and
  ** the bytes copied host to device (every adapter_load_started); for a
  ** compressed collection also the basis loads and evictions */
  int64_t resident_peak_bytes, transfer_bytes, basis_loads, basis_evictions;
  /* the prefix cache ($.prefix_cache; stored and printed only when on):
  ** lookups at admission, the share with at least one hit block (-1: no
  ** lookup), hit blocks / looked-up blocks, prompt tokens not recomputed,
  ** hit blocks another adapter's execution computed (oblivious keys: the
  ** correctness violation, counted) and the requests that took them,
  ** blocks published and evicted */
  int prefix_on;
  int64_t prefix_lookups;
  double prefix_hit_rate, prefix_block_hit_rate;
  int64_t prefix_reused_tokens, prefix_corrupt_reuses,
      prefix_corrupt_requests, prefix_published_blocks, prefix_evicted_blocks;
  /* the host tier ($.workers.max_cpu_loras; stored and printed only when
  ** on): loads served from host memory, loads that read from disk first,
  ** the bytes read, and objects the tier's LRU dropped */
  int host_on;
  int64_t host_hits, disk_reads, disk_bytes, host_dropped;
  /* the clock (stored and printed only under the measured clock) */
  lsim_replay_clock clock;
  /* the per-tenant figures (sim/tenants.h), sc->ntenants + 1 rows, while
  ** the replay writes its outputs; borrowed, NULL once it returns */
  const struct lsim_tenant_fig *tenants;
} lsim_summary;

/* Percentiles and totals from the database and the metrics registry. */
lsim_err lsim_report_summarize(sqlite3 *db, const lsim_scenario *sc,
                               const lsim_metrics *m, lsim_summary *s,
                               lsim_errbuf *eb);

/* The summary's figures as runs_summary stores them, in its order: key
** (the unit in the name) and value (-1: no value).  The prefix cache's
** only when it is on.  Returns how many were written to out[0..cap). */
typedef struct lsim_figure {
  const char *k;
  double v;
} lsim_figure;
#define LSIM_REPORT_FIGURES_MAX 96
int lsim_report_figures(const lsim_summary *s, lsim_figure *out, int cap);

/* The clock the summary's times came from, for their evidence claims
** (enum lsim_claim_clock of sim/audit.h). */
int lsim_report_claim_clock(const lsim_summary *s);

/* Store the summary's figures in runs_summary (before the run turns ok). */
struct lsim_db;
lsim_err lsim_report_store(struct lsim_db *db, const lsim_summary *s,
                           lsim_errbuf *eb);

/* Human-readable summary. */
void lsim_report_print(FILE *f, const lsim_scenario *sc,
                       const lsim_metrics *m, const lsim_summary *s);

/* Prometheus text format, bounded labels only. */
lsim_err lsim_report_metrics_file(const char *path, const lsim_scenario *sc,
                                  const lsim_metrics *m, const lsim_summary *s,
                                  lsim_errbuf *eb);

/* The run's figures beside the database (base: its path without
** extension), each as BASE-NAME.png and .svg: TTFT CDF per tenant
** (-ttft), adapter residency over time (-residency), starved intervals per
** tenant (-starvation), service share against demand share per tenant
** (-share); their data in BASE-NAME.dat and the script BASE-plots.gp,
** which names them relative to its folder (sim/plot.h).  tenant_service
** (ntenants, may be NULL: then from the events table) is the completed
** service per tenant.  When gnuplot is missing or fails the function
** writes the data files, sets s->plot_note and returns 0; a PNG is named
** in s->plots only once every figure is whole and in place.  Every string
** in the script is quoted for gnuplot (sim/escape.h), whatever the
** scenario's names hold; a base with a control byte gets data files and a
** note, no script; gnuplot runs without a shell (sim/plot_run.h). */
lsim_err lsim_report_plots(sqlite3 *db, const char *base,
                           const lsim_scenario *sc,
                           const int64_t *tenant_service, lsim_summary *s,
                           lsim_errbuf *eb);

/* The rows of a share data file, one per tenant: name demand demand_share
** service service_share (shares of the sums; 0 when a sum is 0). */
void lsim_report_share_rows(FILE *f, const lsim_scenario *sc,
                            const int64_t *demand, const int64_t *service);

/* Refuse, before a run writes anything, side files of the database at
** db_path that could not be replaced safely: BASE.prom and, with plots,
** BASE-{ttft,residency,starvation,share}.{dat,png,svg}, BASE-plots.gp
** (a link, a device node, a directory: sim/outfile.h).  Every side file
** goes through sim/outfile.c: whole or absent. */
lsim_err lsim_report_check_paths(const char *db_path, int plots,
                                 lsim_errbuf *eb);

#endif /* LSIM_REPORT_H */
