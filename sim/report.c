/*
** report.c: the summary, the metrics file, plots (the metrics registry
** they read is metrics.c).
*/
#include "report.h"

#include "../engine/kv.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "db.h"
#include "escape.h"
#include "outfile.h"
#include "pctl.h"
#include "plot.h"
#include "plot_run.h"
#include "tenants.h"

/* ---- exact percentiles from the requests table --------------------------- */

#define LSIM__TTFT_EXPR "(first_token_tick - arrival_tick)"
#define LSIM__TTFT_COND "first_token_tick IS NOT NULL"
#define LSIM__TBT_EXPR \
  "((finish_tick - first_token_tick) * 1.0 / (output_tokens - 1))"
#define LSIM__TBT_COND "output_tokens >= 2"
#define LSIM__TTFT_MEETS "(first_token_tick - arrival_tick) * ?1 <= ?2"
#define LSIM__TBT_MEETS \
  "(finish_tick - first_token_tick) * ?1 <= ?3 * (output_tokens - 1)"

/* The fraction of the n requests with a metric that met its SLO (k of
** them); -1 when no SLO is set or no request had the metric. */
static double lsim__attain(int64_t slo_ms, int64_t n, int64_t k) {
  return slo_ms > 0 && n > 0 ? (double)k / (double)n : -1;
}

lsim_err lsim_report_summarize(sqlite3 *db, const lsim_scenario *sc,
                               const lsim_metrics *m, lsim_summary *s,
                               lsim_errbuf *eb) {
  double ms = (double)sc->ns_per_tick / 1e6;
  lsim_err rc;
  static const double pp[2] = {50, 99};
  /* One scan of the completed requests gives every figure of the table
  ** (it was one query per percentile, then one per metric, plus count,
  ** sum and attainment queries): per row SQLite computes the TTFT, TBT and
  ** end-to-end expressions, their conditions and the SLO tests, exactly as
  ** the former queries' WHERE and select lists did.  The values go to a
  ** bounded selection (sim/pctl.h): they are kept and each percentile
  ** selected when they fit its budget, otherwise the query runs again,
  ** feeding only the values, until every percentile is narrowed down.  The
  ** sums are exact in ticks, skip NULLs and fail on overflow, as SQL's
  ** sum(). */
  char sql[1024];
  snprintf(sql, sizeof sql,
           "SELECT " LSIM__TTFT_COND ", " LSIM__TTFT_EXPR ", %s, "
           LSIM__TBT_COND ", " LSIM__TBT_EXPR ", %s, "
           "(finish_tick - arrival_tick), output_tokens FROM requests "
           "WHERE run_id=1 AND outcome='ok'",
           sc->slo_ttft_ms > 0 ? LSIM__TTFT_MEETS : "NULL",
           sc->slo_tbt_ms > 0 ? LSIM__TBT_MEETS : "NULL");
  int64_t ttft_ticks = 0, out_tokens = 0, ttft_met = 0, tbt_met = 0;
  const char *why = NULL;
  sqlite3_stmt *st = NULL;
  int step = SQLITE_ERROR, tg[3][2];
  lsim_pctl *sel = lsim_pctl_new(3, lsim_pctl_budget());
  if (!sel)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory for percentiles");
  for (int k = 0; k < 3; k++)
    for (int i = 0; i < 2; i++)
      if ((tg[k][i] = lsim_pctl_want(sel, k, pp[i])) < 0) {
        lsim_pctl_free(sel);
        return lsim_fail(eb, LSIM_E_NOMEM, "out of memory for percentiles");
      }
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
    sqlite3_bind_int64(st, 1, sc->ns_per_tick);
    sqlite3_bind_int64(st, 2, sc->slo_ttft_ms * 1000000);
    sqlite3_bind_int64(st, 3, sc->slo_tbt_ms * 1000000);
    for (int first = 1; !why && lsim_pctl_pass(sel); first = 0) {
      while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        if (sqlite3_column_int(st, 0)) { /* a first token: TTFT */
          lsim_pctl_add(sel, 0, sqlite3_column_double(st, 1));
          if (first && sqlite3_column_type(st, 1) != SQLITE_NULL &&
              __builtin_add_overflow(ttft_ticks, sqlite3_column_int64(st, 1),
                                     &ttft_ticks)) {
            why = "integer overflow"; /* what SQL's sum() says */
            break;
          }
          ttft_met += first && sqlite3_column_type(st, 2) != SQLITE_NULL &&
                      sqlite3_column_int(st, 2) != 0;
        }
        if (sqlite3_column_int(st, 3)) { /* two tokens or more: TBT */
          lsim_pctl_add(sel, 1, sqlite3_column_double(st, 4));
          tbt_met += first && sqlite3_column_type(st, 5) != SQLITE_NULL &&
                     sqlite3_column_int(st, 5) != 0;
        }
        lsim_pctl_add(sel, 2, sqlite3_column_double(st, 6));
        if (first && sqlite3_column_type(st, 7) != SQLITE_NULL &&
            __builtin_add_overflow(out_tokens, sqlite3_column_int64(st, 7),
                                   &out_tokens)) {
          why = "integer overflow";
          break;
        }
      }
      if (why || step != SQLITE_DONE)
        break;
      sqlite3_reset(st);
      if ((rc = lsim_pctl_end(sel, eb)))
        goto done;
    }
  }
  if (why || step != SQLITE_DONE) {
    rc = lsim_fail(eb, LSIM_E_DB, "summary query failed: %s",
                   why ? why : sqlite3_errmsg(db));
    goto done;
  }
  double v2[3][2];
  for (int k = 0; k < 3; k++)
    for (int i = 0; i < 2; i++) {
      double x = lsim_pctl_value(sel, tg[k][i]);
      v2[k][i] = isnan(x) ? -1 : x;
    }
  s->ttft_p50_ms = v2[0][0] < 0 ? -1 : v2[0][0] * ms;
  s->ttft_p99_ms = v2[0][1] < 0 ? -1 : v2[0][1] * ms;
  s->slo_ttft_attain =
      lsim__attain(sc->slo_ttft_ms, lsim_pctl_count(sel, 0), ttft_met);
  /* the summary's _count and _sum (Prometheus text format): over the same
  ** requests as the quantiles, the sum exact in ticks */
  s->ttft_count = lsim_pctl_count(sel, 0);
  s->ttft_sum_seconds = (double)ttft_ticks * (double)sc->ns_per_tick / 1e9;
  s->tbt_p50_ms = v2[1][0] < 0 ? -1 : v2[1][0] * ms;
  s->tbt_p99_ms = v2[1][1] < 0 ? -1 : v2[1][1] * ms;
  s->slo_tbt_attain =
      lsim__attain(sc->slo_tbt_ms, lsim_pctl_count(sel, 1), tbt_met);
  s->e2e_p50_ms = v2[2][0] < 0 ? -1 : v2[2][0] * ms;
  s->e2e_p99_ms = v2[2][1] < 0 ? -1 : v2[2][1] * ms;
  rc = 0;
done:
  sqlite3_finalize(st);
  lsim_pctl_free(sel);
  if (rc)
    return rc;
  s->max_wait_ms = (double)m->max_wait_ticks * ms;
  s->load_amplification =
      m->distinct_loaded_bytes > 0
          ? (double)m->h2d_bytes / (double)m->distinct_loaded_bytes
          : -1;
  s->adapters_per_iter =
      m->iters ? (double)m->iter_adapters / (double)m->iters : -1;
  s->segments_per_iter =
      m->iters ? (double)m->iter_segments / (double)m->iters : -1;
  s->rank_padding_ratio =
      m->true_rank_rows > 0
          ? (double)m->padded_rank_rows / (double)m->true_rank_rows
          : -1;
  s->service_prefill = m->prefill_units;
  s->service_decode = m->decode_units;
  s->service_resident = m->service_resident;
  s->service_cold = m->service_cold;
  memcpy(s->service_rank, m->service_rank, sizeof s->service_rank);
  s->preemptions = m->preemptions;
  s->migrations = m->migrations;
  s->recompute_tokens = m->recompute_tokens;
  s->backlog_gap = m->backlog_gap;
  if (m->backlog_gap < 0) {
    s->vtc_bound = -1;
  } else {
    int64_t a = (int64_t)sc->fair_w_in * m->max_prompt,
            b = (int64_t)sc->fair_w_out * sc->max_batch_tokens;
    s->vtc_bound = 2 * (a > b ? a : b);
  }
  s->completed = m->requests_ok;
  s->rejected = m->requests_rejected;
  s->unfinished = m->requests_unfinished;
  s->loads = m->by_kind[LSIM_EV_ADAPTER_LOAD_STARTED];
  s->resident_peak_bytes = m->resident_peak;
  s->transfer_bytes = m->h2d_bytes;
  s->basis_loads = m->by_kind[LSIM_EV_BASIS_PUBLISHED];
  s->basis_evictions = m->by_kind[LSIM_EV_BASIS_EVICTED];
  s->prefix_on = sc->prefix_mode != 0;
  s->prefix_lookups = m->px_lookups;
  s->prefix_hit_rate =
      m->px_lookups > 0 ? (double)m->px_hits / (double)m->px_lookups : -1;
  s->prefix_block_hit_rate =
      m->px_lookup_blocks > 0
          ? (double)m->px_hit_blocks / (double)m->px_lookup_blocks
          : -1;
  s->prefix_reused_tokens = m->px_reused_tokens;
  s->prefix_corrupt_reuses = m->px_corrupt_blocks;
  s->prefix_corrupt_requests = m->px_corrupt_requests;
  s->prefix_published_blocks = m->px_published_blocks;
  s->prefix_evicted_blocks = m->px_evicted_blocks;
  s->host_on = sc->max_cpu_loras > 0;
  s->host_hits = m->by_kind[LSIM_EV_ADAPTER_HOST_HIT];
  s->disk_reads = m->by_kind[LSIM_EV_ADAPTER_DISK_READ];
  s->disk_bytes = m->disk_bytes;
  s->host_dropped = m->by_kind[LSIM_EV_ADAPTER_HOST_DROPPED];
  s->load_failures = m->by_kind[LSIM_EV_ADAPTER_LOAD_FAILED];
  s->evictions = m->by_kind[LSIM_EV_ADAPTER_EVICTED];
  s->hit_rate = m->hits + m->misses
                    ? (double)m->hits / (double)(m->hits + m->misses)
                    : -1;
  s->sim_seconds = (double)s->end_tick * (double)sc->ns_per_tick * 1e-9;
  s->throughput_tok_s =
      s->sim_seconds > 0 ? (double)out_tokens / s->sim_seconds : -1;
  double sum = 0, sq = 0;
  int nseen = 0;
  for (int t = 0; t < m->ntenants; t++)
    if (m->tenant_seen[t]) {
      double x = (double)m->tenant_service[t];
      sum += x;
      sq += x * x;
      nseen++;
    }
  s->jain = nseen && sq > 0 ? sum * sum / ((double)nseen * sq) : -1;
  /* normalized: each tenant's service per unit of weight and of the time
  ** it had a request in the system (one still open at the end counts to
  ** the end) */
  sum = sq = 0;
  nseen = 0;
  for (int t = 0; t < m->ntenants; t++) {
    int64_t busy = m->busy_ticks[t];
    if (m->insys[t] > 0 && s->end_tick > m->insys_since[t])
      busy += s->end_tick - m->insys_since[t];
    if (busy <= 0)
      continue;
    double w = m->tenant_weight ? (double)m->tenant_weight[t] : 1.0;
    double x = (double)m->tenant_service[t] / (w * (double)busy);
    sum += x;
    sq += x * x;
    nseen++;
  }
  s->jain_norm = nseen && sq > 0 ? sum * sum / ((double)nseen * sq) : -1;
  s->starvation_ticks =
      lsim_scenario_starvation_ticks(sc, &s->starvation_derived);
  s->starvation_ms = (double)s->starvation_ticks * ms;
  s->max_gap = m->max_gap;
  int64_t pf = m->by_kind[LSIM_EV_PREFETCH_RESERVED];
  s->prefetch_precision = pf ? (double)m->prefetch_used / (double)pf : -1;
  s->prefetch_wasted_bytes = m->prefetch_wasted_bytes;
  s->early_aborts = m->early_aborts;
  s->load_starved = m->load_starved;
  s->service_starved = m->service_starved;
  return 0;
}

int lsim_report_figures(const lsim_summary *s, lsim_figure *out, int cap) {
  const lsim_figure kv[] = {{"sim_seconds", s->sim_seconds},
            {"iterations", (double)s->iterations},
            {"requests_arrived", (double)s->arrived},
            {"requests_completed", (double)s->completed},
            {"requests_rejected", (double)s->rejected},
            {"requests_unfinished", (double)s->unfinished},
            {"ttft_p50_ms", s->ttft_p50_ms},
            {"ttft_p99_ms", s->ttft_p99_ms},
            {"tbt_p50_ms", s->tbt_p50_ms},
            {"tbt_p99_ms", s->tbt_p99_ms},
            {"adapter_loads", (double)s->loads},
            {"adapter_load_failures", (double)s->load_failures},
            {"adapter_evictions", (double)s->evictions},
            {"adapter_cache_hit_rate", s->hit_rate},
            {"trace_rows_skipped", (double)s->trace_rows_skipped},
            {"tenant_service_jain", s->jain},
            {"tenant_service_max_gap", (double)s->max_gap},
            {"tenant_service_jain_normalized", s->jain_norm},
            {"starvation_threshold_ms", s->starvation_ms},
            {"adapter_prefetch_precision_ratio", s->prefetch_precision},
            {"adapter_prefetch_wasted_bytes", (double)s->prefetch_wasted_bytes},
            {"requests_early_aborted", (double)s->early_aborts},
            {"adapter_load_starved_intervals", (double)s->load_starved},
            {"tenant_service_starved_intervals", (double)s->service_starved},
            {"throughput_output_tokens_per_s", s->throughput_tok_s},
            {"slo_ttft_attainment", s->slo_ttft_attain},
            {"slo_tbt_attainment", s->slo_tbt_attain},
            {"e2e_p50_ms", s->e2e_p50_ms},
            {"e2e_p99_ms", s->e2e_p99_ms},
            {"max_wait_ms", s->max_wait_ms},
            {"adapter_load_amplification", s->load_amplification},
            {"iteration_distinct_adapters_mean", s->adapters_per_iter},
            {"iteration_segments_mean", s->segments_per_iter},
            {"rank_padding_ratio", s->rank_padding_ratio},
            {"service_prefill", (double)s->service_prefill},
            {"service_decode", (double)s->service_decode},
            {"service_resident", (double)s->service_resident},
            {"service_cold_loaded", (double)s->service_cold},
            {"service_rank_le8", (double)s->service_rank[0]},
            {"service_rank_16", (double)s->service_rank[1]},
            {"service_rank_32", (double)s->service_rank[2]},
            {"service_rank_64", (double)s->service_rank[3]},
            {"service_rank_gt64", (double)s->service_rank[4]},
            {"tenant_service_backlog_gap", (double)s->backlog_gap},
            {"vtc_bound", (double)s->vtc_bound},
            {"requests_preempted", (double)s->preemptions},
            {"requests_migrated", (double)s->migrations},
            {"recompute_tokens", (double)s->recompute_tokens},
            {"adapter_resident_bytes_peak", (double)s->resident_peak_bytes},
            {"adapter_transfer_bytes", (double)s->transfer_bytes},
            {"basis_loads", (double)s->basis_loads},
            {"basis_evictions", (double)s->basis_evictions},
            /* the prefix cache: last, stored only when it is on */
            {"prefix_lookups", (double)s->prefix_lookups},
            {"prefix_hit_rate", s->prefix_hit_rate},
            {"prefix_block_hit_rate", s->prefix_block_hit_rate},
            {"prefix_reused_tokens", (double)s->prefix_reused_tokens},
            {"prefix_corrupt_reuses", (double)s->prefix_corrupt_reuses},
            {"prefix_corrupt_requests", (double)s->prefix_corrupt_requests},
            {"prefix_published_blocks", (double)s->prefix_published_blocks},
            {"prefix_evicted_blocks", (double)s->prefix_evicted_blocks},
            /* the host tier: stored only when it is on */
            {"adapter_host_hits", (double)s->host_hits},
            {"adapter_disk_reads", (double)s->disk_reads},
            {"adapter_disk_read_bytes", (double)s->disk_bytes},
            {"adapter_host_dropped", (double)s->host_dropped},
            /* the measured clock: stored only under it */
            {"clock_measured_iterations", (double)s->clock.iters_measured},
            {"clock_model_iterations", (double)s->clock.iters_model},
            {"clock_measured_loads", (double)s->clock.loads_measured},
            {"clock_model_loads", (double)s->clock.loads_model},
            {"clock_model_other_copies", (double)s->clock.other_model}};
  enum { NKV_ALL = sizeof kv / sizeof kv[0], NPX = 8, NHT = 4, NCK = 5 };
  _Static_assert(NKV_ALL <= LSIM_REPORT_FIGURES_MAX,
                 "raise LSIM_REPORT_FIGURES_MAX");
  int n = 0;
  for (size_t i = 0; i < NKV_ALL && n < cap; i++) {
    int ck = i >= NKV_ALL - NCK, ht = !ck && i >= NKV_ALL - NCK - NHT,
        px = !ck && !ht && i >= NKV_ALL - NCK - NHT - NPX;
    if ((px && !s->prefix_on) || (ht && !s->host_on) ||
        (ck && !s->clock.measured))
      continue;
    out[n++] = kv[i];
  }
  return n;
}

int lsim_report_claim_clock(const lsim_summary *s) {
  const lsim_replay_clock *k = &s->clock;
  if (!k->measured)
    return LSIM_CLAIM_CLOCK_MODEL;
  /* a recorded clock: this process measured nothing, so its times claim
  ** no more than modeled (the recorded run holds the measured evidence) */
  if (k->recorded)
    return LSIM_CLAIM_CLOCK_MIXED;
  return k->iters_model || k->loads_model || k->other_model
             ? LSIM_CLAIM_CLOCK_MIXED
             : LSIM_CLAIM_CLOCK_MEASURED;
}

lsim_err lsim_report_store(struct lsim_db *db, const lsim_summary *s,
                           lsim_errbuf *eb) {
  lsim_figure kv[LSIM_REPORT_FIGURES_MAX];
  const size_t NKV =
      (size_t)lsim_report_figures(s, kv, LSIM_REPORT_FIGURES_MAX);
  /* each figure's evidence class (sim/audit.c): audited before anything is
  ** written, so a figure that claims more than its source never lands */
  lsim_claim claims[LSIM_REPORT_FIGURES_MAX];
  int clock = lsim_report_claim_clock(s);
  for (size_t i = 0; i < NKV; i++)
    claims[i] = lsim_summary_claim_clock(kv[i].k, clock);
  char backend[64] = "";
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(lsim_db_handle(db),
                         "SELECT backend FROM runs WHERE run_id=1", -1, &st,
                         NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
    snprintf(backend, sizeof backend, "%s",
             (const char *)sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  for (size_t i = 0; i < NKV; i++) {
    lsim_err rc = lsim_claim_audit(&claims[i], backend, eb);
    if (rc)
      return rc;
  }
  for (size_t i = 0; i < NKV; i++)
    if (lsim_db_summary(db, kv[i].k, kv[i].v))
      return lsim_fail(eb, LSIM_E_DB, "storing summary: %s",
                       lsim_db_errmsg(db));
  return lsim_claims_store(db, backend, claims, (int)NKV, eb);
}

/* ---- printing ------------------------------------------------------------ */

static void lsim__ms(FILE *f, double v) {
  if (v < 0)
    fprintf(f, "%10s", "-");
  else
    fprintf(f, "%7.1f ms", v);
}

void lsim_report_print(FILE *f, const lsim_scenario *sc,
                       const lsim_metrics *m, const lsim_summary *s) {
  /* names and paths are shown with control bytes made visible (escape.h) */
  char shown[LSIM_ESC_SIZE(1200)]; /* the longest: plot_note */
  fprintf(f, "lorasim replay: %s (seed %llu, backend %s, scheduler %s, "
             "evict %s, prefetch %s, %d worker%s",
          lsim_console_str(shown, sizeof shown, sc->name), (unsigned long long)sc->seed, sc->backend, sc->scheduler,
          sc->evict, sc->prefetch, sc->workers, sc->workers == 1 ? "" : "s");
  if (sc->tp_degree > 1) /* docs/TP.md; nothing changes at degree 1 */
    fprintf(f, " of %d GPUs (tensor parallel)", sc->tp_degree);
  fputs(")\n", f);
  fprintf(f, "  simulated   %.3f s, %lld iterations, %lld events logged\n",
          s->sim_seconds, (long long)s->iterations, (long long)s->events);
  fprintf(f, "  requests    %lld arrived, %lld completed, %lld rejected, "
             "%lld unfinished\n",
          (long long)s->arrived, (long long)s->completed,
          (long long)s->rejected, (long long)s->unfinished);
  fprintf(f, "  TTFT        p50 ");
  lsim__ms(f, s->ttft_p50_ms);
  fprintf(f, "   p99 ");
  lsim__ms(f, s->ttft_p99_ms);
  fprintf(f, "\n  TBT         p50 ");
  lsim__ms(f, s->tbt_p50_ms);
  fprintf(f, "   p99 ");
  lsim__ms(f, s->tbt_p99_ms);
  fprintf(f, "\n  adapters    %lld loads (%lld failed), %lld evictions, "
             "cache hit rate ",
          (long long)s->loads, (long long)s->load_failures,
          (long long)s->evictions);
  if (s->hit_rate < 0)
    fprintf(f, "-\n");
  else
    fprintf(f, "%.1f%%\n", 100.0 * s->hit_rate);
  fprintf(f, "  bytes       %lld resident at peak, %lld copied host to device\n",
          (long long)s->resident_peak_bytes, (long long)s->transfer_bytes);
  const lsim_compression_spec *cs = &sc->compression;
  if (cs->on) {
    /* kernel time stays the model backend's arithmetic: no measurement of
    ** this collection backs a claim that it is faster (docs/COMPRESSION.md) */
    if (cs->bundle[0])
      fprintf(f, "  compressed  bundle %s",
              lsim_console_str(shown, sizeof shown, cs->bundle));
    else
      fprintf(f, "  compressed  %s R %d, %d clusters (synthetic)",
              cs->method == LSIM_CMPM_JD_FULL ? "jd_full" : "jd_diag",
              cs->rank, cs->clusters);
    fprintf(f, ": %lld basis loads, %lld basis evictions; kernel time "
               "modeled (three-stage arithmetic), not measured\n",
            (long long)s->basis_loads, (long long)s->basis_evictions);
  }
  if (s->prefix_on) {
    /* only oblivious keys can take rows another adapter computed */
    fprintf(f, "  prefix      %s keys, %lld-token blocks: %lld lookups, hit "
               "rate ", lsim_kv_key_mode_name(sc->prefix_mode),
            (long long)sc->prefix_block_tokens, (long long)s->prefix_lookups);
    if (s->prefix_hit_rate < 0)
      fprintf(f, "-");
    else
      fprintf(f, "%.1f%% (blocks %.1f%%)", 100.0 * s->prefix_hit_rate,
              100.0 * s->prefix_block_hit_rate);
    fprintf(f, ", %lld tokens reused, %lld blocks published, %lld evicted, "
               "%lld corrupt reuses%s\n",
            (long long)s->prefix_reused_tokens,
            (long long)s->prefix_published_blocks,
            (long long)s->prefix_evicted_blocks,
            (long long)s->prefix_corrupt_reuses,
            s->prefix_corrupt_reuses > 0 ? " (UNSAFE: rows of another "
                                           "adapter's execution)"
                                         : "");
  }
  if (s->host_on)
    fprintf(f, "  host tier   %d adapters per worker: %lld host hits, %lld "
               "disk reads (%lld bytes), %lld dropped\n",
            sc->max_cpu_loras, (long long)s->host_hits,
            (long long)s->disk_reads, (long long)s->disk_bytes,
            (long long)s->host_dropped);
  if (sc->slo_ttft_ms > 0 || sc->slo_tbt_ms > 0) {
    struct {
      const char *what;
      int64_t ms;
      double v;
    } slo[2] = {{"TTFT", sc->slo_ttft_ms, s->slo_ttft_attain},
                {"TBT", sc->slo_tbt_ms, s->slo_tbt_attain}};
    fprintf(f, "  SLO       ");
    for (int i = 0; i < 2; i++) {
      if (slo[i].ms <= 0)
        continue;
      fprintf(f, "  %s <= %lld ms: ", slo[i].what, (long long)slo[i].ms);
      if (slo[i].v < 0)
        fprintf(f, "-");
      else
        fprintf(f, "%.1f%%", 100.0 * slo[i].v);
    }
    fputc('\n', f);
  }
  /* fairness (docs/SCHEDULING.md): both Jain indices, and the backlogged
  ** service gap against VTC's bound */
  fprintf(f, "  fairness    Jain ");
  if (s->jain < 0)
    fprintf(f, "-");
  else
    fprintf(f, "%.3f", s->jain);
  fprintf(f, " (service), ");
  if (s->jain_norm < 0)
    fprintf(f, "-");
  else
    fprintf(f, "%.3f", s->jain_norm);
  fprintf(f, " (normalized); backlogged service gap ");
  if (s->backlog_gap < 0)
    fprintf(f, "not kept (over 32 tenants)\n");
  else
    fprintf(f, "%lld, vtc bound %lld: %s\n", (long long)s->backlog_gap,
            (long long)s->vtc_bound,
            s->backlog_gap <= s->vtc_bound ? "held" : "exceeded");
  fprintf(f, "  starvation  threshold %lld ticks (%.3f ms, %s); starved "
             "intervals: %lld load, %lld service\n",
          (long long)s->starvation_ticks, s->starvation_ms,
          s->starvation_derived ? "derived from the workload"
          : s->starvation_ticks ? "$.fairness.starvation_ticks"
                                : "0: only intervals open at the end",
          (long long)s->load_starved, (long long)s->service_starved);
  if (s->tenants) {
    /* per tenant and all (sim/tenants.h): counts, shares, latencies, the
    ** breakdown of TTFT, the cold cost, the longest stretch unserved */
    lsim_tenants_print(f, sc, s->tenants);
  } else {
    fprintf(f, "  %-16s %10s %10s %10s %18s\n", "tenant", "completed",
            "rejected", "unfinished", "service (tokens)");
    for (int t = 0; t < m->ntenants; t++)
      fprintf(f, "  %-16s %10lld %10lld %10lld %18lld\n",
              lsim_console_str(shown, sizeof shown, sc->tenants[t].name),
              (long long)m->tenant_completed[t],
              (long long)m->tenant_rejected[t],
              (long long)m->tenant_unfinished[t],
              (long long)m->tenant_service[t]);
  }
  if (s->trace_rows_skipped > 0)
    fprintf(f, "  trace       %lld malformed rows skipped (first: %s)\n",
            (long long)s->trace_rows_skipped,
            lsim_console_str(shown, sizeof shown, s->trace_first_skipped));
  if (s->clock.measured) {
    const lsim_replay_clock *k = &s->clock;
    fprintf(f, "  clock       measured%s: %lld iterations and %lld loads ended "
               "at the %s measured time; %lld iterations, %lld loads "
               "and %lld other copies (disk reads, hotswaps) at the model's\n",
            k->recorded ? " (recorded, --clock-from)" : "",
            (long long)k->iters_measured, (long long)k->loads_measured,
            k->recorded ? "recorded run's" : "backend's",
            (long long)k->iters_model, (long long)k->loads_model,
            (long long)k->other_model);
    if (k->recorded)
      fprintf(f, "  evidence    counts exact (this run's event log); times "
                 "modeled here (spans replayed from a recorded run, which "
                 "holds their evidence); runs_evidence\n");
    else
      fprintf(f, "  evidence    counts exact (this run's event log); times "
                 "%s (simulated clock driven by %s's measured times); "
                 "runs_evidence\n",
              lsim_report_claim_clock(s) == LSIM_CLAIM_CLOCK_MEASURED
                  ? "measured"
                  : "modeled (some spans at the model's time)",
              sc->backend);
  } else {
    fprintf(f, "  evidence    counts exact (this run's event log); times "
               "modeled (simulated clock, cost model); runs_evidence\n");
  }
  fprintf(f, "  database    %s\n",
          lsim_console_str(shown, sizeof shown, s->db_path));
  if (s->metrics_path[0])
    fprintf(f, "  metrics     %s\n",
            lsim_console_str(shown, sizeof shown, s->metrics_path));
  if (s->json_path[0])
    fprintf(f, "  json        %s\n",
            lsim_console_str(shown, sizeof shown, s->json_path));
  for (int i = 0; i < LSIM_REPORT_PLOTS; i++)
    if (s->plots[i][0])
      fprintf(f, "  plot        %s\n",
              lsim_console_str(shown, sizeof shown, s->plots[i]));
  if (s->plot_note[0])
    fprintf(f, "  plots       %s\n",
            lsim_console_str(shown, sizeof shown, s->plot_note));
}

/* ---- Prometheus text ---------------------------------------------------------- */

lsim_err lsim_report_metrics_file(const char *path, const lsim_scenario *sc,
                                  const lsim_metrics *m, const lsim_summary *s,
                                  lsim_errbuf *eb) {
  lsim_outfile of;
  lsim_err rc = lsim_out_open(&of, path, eb);
  if (rc)
    return rc;
  FILE *f = of.fp;
  char shown[LSIM_ESC_SIZE(LSIM_NAME_MAX)]; /* a comment: one line */
  fprintf(f, "# lorasim %s metrics of scenario %s; labels are bounded "
             "(no raw request, tenant or adapter ids)\n",
          LSIM_VERSION, lsim_console_str(shown, sizeof shown, sc->name));
  fprintf(f, "# TYPE lorasim_publication_events_total counter\n");
  for (int k = 1; k < LSIM_EV__END; k++)
    fprintf(f, "lorasim_publication_events_total{kind=\"%s\"} %lld\n",
            lsim_event_kind_name(k), (long long)m->by_kind[k]);
  struct {
    const char *name, *type;
    double v;
  } rows[] = {
      {"lorasim_adapter_requests_offered_total", "counter",
       (double)m->by_kind[LSIM_EV_QUEUE_ENQUEUED] +
           (double)s->rejected},
      {"lorasim_adapter_requests_rejected_total", "counter",
       (double)s->rejected},
      {"lorasim_adapter_cache_hits_total", "counter", (double)m->hits},
      {"lorasim_adapter_cache_misses_total", "counter", (double)m->misses},
      {"lorasim_adapter_load_requests_total", "counter", (double)s->loads},
      {"lorasim_adapter_load_failures_total", "counter",
       (double)s->load_failures},
      {"lorasim_adapter_h2d_bytes_total", "counter", (double)m->h2d_bytes},
      {"lorasim_adapter_evictions_total", "counter", (double)s->evictions},
      {"lorasim_adapter_compensating_rollbacks_total", "counter",
       (double)m->by_kind[LSIM_EV_LOAD_ROLLED_BACK]},
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
    fprintf(f, "# TYPE %s %s\n%s %.17g\n", rows[i].name, rows[i].type,
            rows[i].name, rows[i].v);
  fprintf(f, "# TYPE lorasim_adapter_completed_service_units_total counter\n"
             "lorasim_adapter_completed_service_units_total"
             "{phase=\"prefill\"} %lld\n"
             "lorasim_adapter_completed_service_units_total"
             "{phase=\"decode\"} %lld\n",
          (long long)m->prefill_units, (long long)m->decode_units);
  fprintf(f, "# TYPE lorasim_ttft_seconds summary\n");
  if (s->ttft_p50_ms >= 0)
    fprintf(f, "lorasim_ttft_seconds{quantile=\"0.5\"} %.9g\n"
               "lorasim_ttft_seconds{quantile=\"0.99\"} %.9g\n",
            s->ttft_p50_ms / 1e3, s->ttft_p99_ms / 1e3);
  fprintf(f, "lorasim_ttft_seconds_sum %.9f\n"
             "lorasim_ttft_seconds_count %lld\n",
          s->ttft_sum_seconds, (long long)s->ttft_count);
  /* scheduling and liveness: bounded labels only (kind, result) */
  fprintf(f,
          "# TYPE lorasim_adapter_prefetch_requests_total counter\n"
          "lorasim_adapter_prefetch_requests_total{result=\"used\"} %lld\n"
          "lorasim_adapter_prefetch_requests_total{result=\"wasted\"} %lld\n"
          "# TYPE lorasim_adapter_prefetch_wasted_bytes_total counter\n"
          "lorasim_adapter_prefetch_wasted_bytes_total %lld\n"
          "# TYPE lorasim_adapter_requests_early_aborted_total counter\n"
          "lorasim_adapter_requests_early_aborted_total %lld\n"
          "# TYPE lorasim_adapter_load_starvation_intervals_total counter\n"
          "lorasim_adapter_load_starvation_intervals_total %lld\n"
          "# TYPE lorasim_adapter_service_starvation_intervals_total counter\n"
          "lorasim_adapter_service_starvation_intervals_total %lld\n"
          "# TYPE lorasim_adapter_completed_service_gap gauge\n"
          "lorasim_adapter_completed_service_gap %lld\n",
          (long long)m->prefetch_used, (long long)m->prefetch_wasted,
          (long long)m->prefetch_wasted_bytes, (long long)m->early_aborts,
          (long long)m->load_starved, (long long)m->service_starved,
          (long long)m->max_gap);
  if (s->slo_ttft_attain >= 0)
    fprintf(f, "# TYPE lorasim_slo_ttft_attainment_ratio gauge\n"
               "lorasim_slo_ttft_attainment_ratio %.9g\n",
            s->slo_ttft_attain);
  if (s->slo_tbt_attain >= 0)
    fprintf(f, "# TYPE lorasim_slo_tbt_attainment_ratio gauge\n"
               "lorasim_slo_tbt_attainment_ratio %.9g\n",
            s->slo_tbt_attain);
  if (s->jain >= 0)
    fprintf(f, "# TYPE lorasim_tenant_service_jain gauge\n"
               "lorasim_tenant_service_jain %.9g\n",
            s->jain);
  if (s->jain_norm >= 0)
    fprintf(f, "# TYPE lorasim_tenant_service_jain_normalized gauge\n"
               "lorasim_tenant_service_jain_normalized %.9g\n",
            s->jain_norm);
  /* the scheduling figures of docs/SCHEDULING.md ("More figures"); a
  ** figure the run does not have (-1) is left out */
  struct {
    const char *name, *type;
    double v;
  } more[] = {
      {"lorasim_e2e_p50_seconds", "gauge",
       s->e2e_p50_ms < 0 ? -1 : s->e2e_p50_ms / 1e3},
      {"lorasim_e2e_p99_seconds", "gauge",
       s->e2e_p99_ms < 0 ? -1 : s->e2e_p99_ms / 1e3},
      {"lorasim_max_wait_seconds", "gauge", s->max_wait_ms / 1e3},
      {"lorasim_adapter_load_amplification_ratio", "gauge",
       s->load_amplification},
      {"lorasim_iteration_distinct_adapters_mean", "gauge",
       s->adapters_per_iter},
      {"lorasim_iteration_segments_mean", "gauge", s->segments_per_iter},
      {"lorasim_rank_padding_ratio", "gauge", s->rank_padding_ratio},
      {"lorasim_adapter_completed_service_resident_units_total", "counter",
       (double)s->service_resident},
      {"lorasim_adapter_completed_service_cold_loaded_units_total", "counter",
       (double)s->service_cold},
      {"lorasim_tenant_service_backlog_gap", "gauge", (double)s->backlog_gap},
      {"lorasim_vtc_bound", "gauge", (double)s->vtc_bound},
      {"lorasim_starvation_threshold_seconds", "gauge",
       s->starvation_ms / 1e3},
      {"lorasim_requests_preempted_total", "counter", (double)s->preemptions},
      {"lorasim_requests_migrated_total", "counter", (double)s->migrations},
  };
  for (size_t i = 0; i < sizeof more / sizeof more[0]; i++)
    if (more[i].v >= 0)
      fprintf(f, "# TYPE %s %s\n%s %.9g\n", more[i].name, more[i].type,
              more[i].name, more[i].v);
  /* residency bytes (every run) and, when on, the compressed collection
  ** and the prefix cache (docs/COMPRESSION.md, docs/PREFIX.md) */
  fprintf(f, "# TYPE lorasim_adapter_resident_peak_bytes gauge\n"
             "lorasim_adapter_resident_peak_bytes %lld\n",
          (long long)s->resident_peak_bytes);
  if (s->basis_loads > 0)
    fprintf(f, "# TYPE lorasim_adapter_basis_loads_total counter\n"
               "lorasim_adapter_basis_loads_total %lld\n"
               "# TYPE lorasim_adapter_basis_evictions_total counter\n"
               "lorasim_adapter_basis_evictions_total %lld\n",
            (long long)s->basis_loads, (long long)s->basis_evictions);
  if (s->prefix_on)
    fprintf(f, "# TYPE lorasim_prefix_lookups_total counter\n"
               "lorasim_prefix_lookups_total %lld\n"
               "# TYPE lorasim_prefix_hit_ratio gauge\n"
               "lorasim_prefix_hit_ratio %.9g\n"
               "# TYPE lorasim_prefix_reused_tokens_total counter\n"
               "lorasim_prefix_reused_tokens_total %lld\n"
               "# TYPE lorasim_prefix_corrupt_reuses_total counter\n"
               "lorasim_prefix_corrupt_reuses_total %lld\n"
               "# TYPE lorasim_prefix_published_blocks_total counter\n"
               "lorasim_prefix_published_blocks_total %lld\n"
               "# TYPE lorasim_prefix_evicted_blocks_total counter\n"
               "lorasim_prefix_evicted_blocks_total %lld\n",
            (long long)s->prefix_lookups, s->prefix_hit_rate,
            (long long)s->prefix_reused_tokens,
            (long long)s->prefix_corrupt_reuses,
            (long long)s->prefix_published_blocks,
            (long long)s->prefix_evicted_blocks);
  static const char *const rb[5] = {"le8", "16", "32", "64", "gt64"};
  fprintf(f,
          "# TYPE lorasim_adapter_completed_service_rank_units_total counter\n");
  for (int k = 0; k < 5; k++)
    fprintf(f, "lorasim_adapter_completed_service_rank_units_total"
               "{rank=\"%s\"} %lld\n",
            rb[k], (long long)s->service_rank[k]);
  /* per tenant (sim/tenants.h): one bounded label, tenant="NAME" */
  if (s->tenants)
    lsim_tenants_prom(f, sc, s->tenants);
  /* each metric's evidence class as its HELP line (sim/audit.c), added to
  ** the temporary, which then goes into place whole */
  if ((rc = lsim_out_close(&of, eb)))
    return rc;
  if ((rc = lsim_claims_annotate_prom(of.tmp, lsim_report_claim_clock(s),
                                      eb))) {
    lsim_out_abort(&of);
    return rc;
  }
  return lsim_out_commit(&of, eb);
}

/* ---- plots -------------------------------------------------------------------- */

static lsim_err lsim__write_ttft_dat(sqlite3 *db, const char *path,
                                     const lsim_scenario *sc,
                                     lsim_errbuf *eb) {
  lsim_outfile of;
  lsim_err orc = lsim_out_open(&of, path, eb);
  if (orc)
    return orc;
  FILE *f = of.fp;
  double ms = (double)sc->ns_per_tick / 1e6;
  fputs("# ttft_ms cumulative_fraction: one block per tenant, in the "
        "scenario's order\n", f);
  for (int t = 0; t < sc->ntenants; t++) {
    sqlite3_stmt *st = NULL;
    int64_t n = 0, i = 0;
    const char *cnt = "SELECT count(*) FROM requests WHERE run_id=1 AND "
                      "outcome='ok' AND first_token_tick IS NOT NULL AND tenant=?1";
    const char *sel = "SELECT first_token_tick - arrival_tick AS v FROM requests "
                      "WHERE run_id=1 AND outcome='ok' AND first_token_tick IS "
                      "NOT NULL AND tenant=?1 ORDER BY v";
    if (sqlite3_prepare_v2(db, cnt, -1, &st, NULL) == SQLITE_OK) {
      sqlite3_bind_int(st, 1, t);
      if (sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
    char shown[LSIM_ESC_SIZE(LSIM_NAME_MAX)]; /* one comment line */
    fprintf(f, "# tenant %s: ttft_ms cumulative_fraction\n",
            lsim_console_str(shown, sizeof shown, sc->tenants[t].name));
    if (sqlite3_prepare_v2(db, sel, -1, &st, NULL) != SQLITE_OK) {
      lsim_out_abort(&of);
      return lsim_fail(eb, LSIM_E_DB, "plot query: %s", sqlite3_errmsg(db));
    }
    sqlite3_bind_int(st, 1, t);
    while (sqlite3_step(st) == SQLITE_ROW)
      fprintf(f, "%.6f %.6f\n", sqlite3_column_double(st, 0) * ms,
              (double)(++i) / (double)n);
    sqlite3_finalize(st);
    if (i == 0)
      fprintf(f, "0 0\n"); /* keeps the gnuplot index of every tenant */
    fprintf(f, "\n\n");
  }
  return lsim_out_commit(&of, eb);
}

static lsim_err lsim__write_residency_dat(sqlite3 *db, const char *path,
                                          const lsim_scenario *sc,
                                          lsim_errbuf *eb) {
  lsim_outfile of;
  lsim_err orc = lsim_out_open(&of, path, eb);
  if (orc)
    return orc;
  FILE *f = of.fp;
  const char *sql =
      "SELECT tick, kind, pages FROM events WHERE run_id=1 AND kind IN "
      "(?1, ?2, ?3, ?4) ORDER BY seq";
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
    lsim_out_abort(&of);
    return lsim_fail(eb, LSIM_E_DB, "plot query: %s", sqlite3_errmsg(db));
  }
  sqlite3_bind_int(st, 1, LSIM_EV_ADAPTER_GENERATION_PUBLISHED);
  /* an adapter leaves residency when it is taken as a victim (its pages
  ** go to the transaction); a restored victim is published again */
  sqlite3_bind_int(st, 2, LSIM_EV_ADAPTER_EVICTED);
  sqlite3_bind_int(st, 3, LSIM_EV_KV_RESERVED);
  sqlite3_bind_int(st, 4, LSIM_EV_KV_RELEASED);
  double s_per_tick = (double)sc->ns_per_tick * 1e-9;
  int64_t resident = 0, apages = 0, kvpages = 0;
  fprintf(f, "# time_s resident_adapters adapter_pages kv_pages "
             "(summed over workers)\n0 0 0 0\n");
  while (sqlite3_step(st) == SQLITE_ROW) {
    int64_t tick = sqlite3_column_int64(st, 0);
    int kind = sqlite3_column_int(st, 1);
    int64_t pages = sqlite3_column_int64(st, 2);
    if (kind == LSIM_EV_ADAPTER_GENERATION_PUBLISHED)
      resident++, apages += pages;
    else if (kind == LSIM_EV_ADAPTER_EVICTED)
      resident--, apages -= pages;
    else if (kind == LSIM_EV_KV_RESERVED)
      kvpages += pages;
    else
      kvpages -= pages;
    fprintf(f, "%.6f %lld %lld %lld\n", (double)tick * s_per_tick,
            (long long)resident, (long long)apages, (long long)kvpages);
  }
  sqlite3_finalize(st);
  return lsim_out_commit(&of, eb);
}

/* Starved intervals per tenant (the y row): block 0 the tenant's own
** service-starved intervals; block 1 the load-starved intervals of the
** adapters it had a request waiting on (arrived before the interval ended,
** no first token before it began) on that worker.  Rows: row start_s end_s.
** An empty block holds one NaN row, so that every index exists. */
static lsim_err lsim__write_starvation_dat(sqlite3 *db, const char *path,
                                           const lsim_scenario *sc,
                                           int64_t *nrows, lsim_errbuf *eb) {
  static const char *const sql[2] = {
      "SELECT entity, start_tick, end_tick FROM starvation WHERE run_id=1 "
      "AND kind='service' AND starved=1 ORDER BY entity, start_tick",
      "SELECT DISTINCT r.tenant, s.start_tick, s.end_tick FROM starvation s "
      "JOIN requests r ON r.run_id=1 AND r.adapter=s.entity AND "
      "r.worker IS s.worker WHERE s.run_id=1 AND s.kind='load' AND "
      "s.starved=1 AND r.arrival_tick < s.end_tick AND "
      "coalesce(r.first_token_tick, r.finish_tick, s.end_tick) > "
      "s.start_tick ORDER BY r.tenant, s.start_tick, s.end_tick"};
  static const char *const what[2] = {
      "service-starved intervals of the tenant",
      "load-starved intervals of adapters the tenant waited on"};
  lsim_outfile of;
  *nrows = 0;
  lsim_err rc = lsim_out_open(&of, path, eb);
  if (rc)
    return rc;
  FILE *f = of.fp;
  double s_per_tick = (double)sc->ns_per_tick * 1e-9;
  fputs("# tenant_row start_s end_s: block 0 service-starved, block 1 "
        "load-starved (rows: tenants in the scenario's order)\n", f);
  for (int k = 0; k < 2; k++) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, sql[k], -1, &st, NULL) != SQLITE_OK) {
      lsim_out_abort(&of);
      return lsim_fail(eb, LSIM_E_DB, "plot query: %s", sqlite3_errmsg(db));
    }
    fprintf(f, "# %s\n", what[k]);
    int rows = 0, step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
      int t = sqlite3_column_int(st, 0);
      if (t < 0 || t >= sc->ntenants)
        continue;
      fprintf(f, "%d %.6f %.6f\n", t,
              (double)sqlite3_column_int64(st, 1) * s_per_tick,
              (double)sqlite3_column_int64(st, 2) * s_per_tick);
      rows++;
    }
    *nrows += rows;
    sqlite3_finalize(st);
    if (step != SQLITE_DONE) {
      lsim_out_abort(&of);
      return lsim_fail(eb, LSIM_E_DB, "plot query: %s", sqlite3_errmsg(db));
    }
    if (!rows)
      fputs("NaN NaN NaN\n", f);
    fputs("\n\n", f);
  }
  return lsim_out_commit(&of, eb);
}

/* Completed service per tenant from the run's ledger (events). */
static lsim_err lsim__tenant_service(sqlite3 *db, const lsim_scenario *sc,
                                     int64_t *svc, lsim_errbuf *eb) {
  sqlite3_stmt *st = NULL;
  for (int t = 0; t < sc->ntenants; t++)
    svc[t] = 0;
  if (sqlite3_prepare_v2(db,
                         "SELECT tenant, sum(value) FROM events WHERE "
                         "run_id=1 AND kind=?1 GROUP BY tenant",
                         -1, &st, NULL) != SQLITE_OK)
    return lsim_fail(eb, LSIM_E_DB, "plot query: %s", sqlite3_errmsg(db));
  sqlite3_bind_int(st, 1, LSIM_EV_COMPLETED_SERVICE_DEBITED);
  while (sqlite3_step(st) == SQLITE_ROW) {
    int t = sqlite3_column_int(st, 0);
    if (t >= 0 && t < sc->ntenants)
      svc[t] = sqlite3_column_int64(st, 1);
  }
  sqlite3_finalize(st);
  return 0;
}

/* Demand and service shares per tenant: tenant demand demand_share service
** service_share (a share of nothing is 0). */
void lsim_report_share_rows(FILE *f, const lsim_scenario *sc,
                            const int64_t *demand, const int64_t *service) {
  double dsum = 0, ssum = 0;
  for (int t = 0; t < sc->ntenants; t++) {
    dsum += (double)demand[t];
    ssum += (double)service[t];
  }
  for (int t = 0; t < sc->ntenants; t++) {
    char tok[LSIM_ESC_SIZE(LSIM_NAME_MAX)];
    lsim_dat_token(tok, sizeof tok, sc->tenants[t].name);
    fprintf(f, "%s %lld %.6f %lld %.6f\n", tok, (long long)demand[t],
            dsum > 0 ? (double)demand[t] / dsum : 0.0, (long long)service[t],
            ssum > 0 ? (double)service[t] / ssum : 0.0);
  }
}

static lsim_err lsim__write_share_dat(sqlite3 *db, const char *path,
                                      const lsim_scenario *sc,
                                      const int64_t *tenant_service,
                                      lsim_errbuf *eb) {
  size_t nt = (size_t)(sc->ntenants > 0 ? sc->ntenants : 1);
  int64_t *demand = calloc(2 * nt, sizeof *demand), *svc = demand + nt;
  if (!demand)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory for the share plot");
  lsim_err rc = lsim_plot_demand(db, sc, demand, eb);
  if (!rc && tenant_service)
    memcpy(svc, tenant_service, (size_t)sc->ntenants * sizeof *svc);
  else if (!rc)
    rc = lsim__tenant_service(db, sc, svc, eb);
  lsim_outfile of;
  if (!rc && !(rc = lsim_out_open(&of, path, eb))) {
    fputs("# tenant demand demand_share service service_share (demand: "
          "w_in * prompt + w_out * (output - 1) tokens asked for)\n",
          of.fp);
    lsim_report_share_rows(of.fp, sc, demand, svc);
    rc = lsim_out_commit(&of, eb);
  }
  free(demand);
  return rc;
}

/* The figures of one run: the data files' suffixes, then the figures'. */
static const char *const lsim__dat_side[] = {"-ttft.dat", "-residency.dat",
                                             "-starvation.dat", "-share.dat"};
static const char *const lsim__fig_side[LSIM_REPORT_PLOTS] = {
    "-ttft", "-residency", "-starvation", "-share"};

/* The y tics of the tenant rows: ('a' 0, 'b' 1, ...). */
static void lsim__tenant_tics(FILE *f, const lsim_scenario *sc) {
  fputs("set ytics (", f);
  for (int t = 0; t < sc->ntenants; t++) {
    char q[LSIM_ESC_SIZE(LSIM_NAME_MAX)];
    fprintf(f, "%s%s %d", t ? ", " : "",
            lsim_plot_str(q, sizeof q, sc->tenants[t].name), t);
  }
  fputs(")\n", f);
}

lsim_err lsim_report_plots(sqlite3 *db, const char *base,
                           const lsim_scenario *sc,
                           const int64_t *tenant_service, lsim_summary *s,
                           lsim_errbuf *eb) {
  char dat[4][1100];
  for (int i = 0; i < 4; i++)
    snprintf(dat[i], sizeof dat[i], "%s%s", base, lsim__dat_side[i]);
  int64_t nstarved = 0;
  lsim_err rc = lsim__write_ttft_dat(db, dat[0], sc, eb);
  if (!rc)
    rc = lsim__write_residency_dat(db, dat[1], sc, eb);
  if (!rc)
    rc = lsim__write_starvation_dat(db, dat[2], sc, &nstarved, eb);
  if (!rc)
    rc = lsim__write_share_dat(db, dat[3], sc, tenant_service, eb);
  if (rc)
    return rc;
  /* the script lives beside the data and names it relative to that
  ** folder (sim/plot.h); every string is a quoted gnuplot literal
  ** (escape.h), and a path with a control byte has none: no script */
  char dir[1100], stem[1100], file[1200];
  char q[4][LSIM_ESC_SIZE(1200)], qdir[LSIM_ESC_SIZE(1100)];
  int bad = lsim_plot_split(base, dir, sizeof dir, stem, sizeof stem) < 0 ||
            lsim_gp_path(qdir, sizeof qdir, dir) < 0;
  for (int i = 0; i < 4 && !bad; i++) {
    snprintf(file, sizeof file, "%s%s", stem, lsim__dat_side[i]);
    bad = lsim_gp_path(q[i], sizeof q[i], file) < 0;
  }
  if (bad) {
    snprintf(s->plot_note, sizeof s->plot_note,
             "skipped: the output path has control characters");
    return 0;
  }
  if (!lsim_gnuplot_available()) {
    snprintf(s->plot_note, sizeof s->plot_note,
             "skipped: gnuplot not found (data in %s-*.dat)", base);
    return 0;
  }
  lsim_plotset *ps;
  snprintf(file, sizeof file, "%s-plots.gp", stem);
  if ((rc = lsim_plot_begin(&ps, dir, file, eb)))
    return rc;
  int fig[LSIM_REPORT_PLOTS];
  static const char *const key[LSIM_REPORT_PLOTS] = {"ttft", "residency",
                                                     "starvation", "share"};
  for (int i = 0; i < LSIM_REPORT_PLOTS; i++) {
    snprintf(file, sizeof file, "%s%s", stem, lsim__fig_side[i]);
    if ((fig[i] = lsim_plot_figure(ps, file, key[i], eb)) < 0) {
      lsim_plot_abort(ps);
      return eb->code;
    }
  }
  FILE *f = ps->f;
  char extra[4 * LSIM_NAME_MAX + 40], title[LSIM_ESC_SIZE(4 * LSIM_PATH_MAX)];
  char q1[LSIM_ESC_SIZE(LSIM_NAME_MAX + 40)];
  snprintf(extra, sizeof extra, "%s / %s / %s, seed %llu", sc->scheduler,
           sc->evict, sc->prefetch, (unsigned long long)sc->seed);
  double end_s = (double)s->end_tick * (double)sc->ns_per_tick * 1e-9;
  int nt = sc->ntenants;
  /* TTFT CDF per tenant: at most LSIM_PLOT_SERIES tenants a panel */
  int np = (nt + LSIM_PLOT_SERIES - 1) / LSIM_PLOT_SERIES, rows, cols, w, h;
  lsim_plot_layout(np, &rows, &cols, &w, &h);
  for (int t = 0; t < LSIM_PLOT_TERMS; t++) {
    lsim_plot_term(ps, fig[0], t, w, h);
    lsim_plot_title(title, sizeof title, "TTFT CDF per tenant", sc, extra);
    fputs("set xlabel 'time to first token (simulated ms, log scale)'\n"
          "set ylabel 'fraction of completed requests'\n"
          "set logscale x\nset grid\nset key bottom right\n"
          "set yrange [0:1]\n", f);
    if (np > 1)
      fprintf(f, "set multiplot layout %d,%d title %s\n", rows, cols, title);
    else
      fprintf(f, "set title %s\n", title);
    for (int p = 0; p < np; p++) {
      int lo = p * LSIM_PLOT_SERIES, hi = lo + LSIM_PLOT_SERIES;
      if (hi > nt)
        hi = nt;
      if (np > 1)
        fprintf(f, "set title 'tenants %d-%d'\n", lo + 1, hi);
      fputs("plot ", f);
      for (int k = lo; k < hi; k++)
        fprintf(f, "%s%s index %d using 1:2 with steps lw 2 lc %d title %s",
                k > lo ? ", " : "", q[0], k, k - lo + 1,
                lsim_plot_str(q1, sizeof q1, sc->tenants[k].name));
      fputc('\n', f);
    }
    if (np > 1)
      fputs("unset multiplot\n", f);
  }
  /* residency: three series */
  for (int t = 0; t < LSIM_PLOT_TERMS; t++) {
    lsim_plot_term(ps, fig[1], t, 900, 560);
    fprintf(f, "set title %s\n",
            lsim_plot_title(title, sizeof title, "Pool residency over time",
                            sc, extra));
    fprintf(f, "set xlabel 'simulated time (s)'\nset ylabel 'pages'\n"
               "set y2label 'resident adapters'\nset y2tics\nset ytics "
               "nomirror\nset grid\nset key below\n");
    fprintf(f, "plot %s using 1:3 with steps lw 2 title 'adapter pages', "
               "%s using 1:4 with steps lw 1 title 'KV pages', "
               "%s using 1:2 axes x1y2 with steps lw 1 dt 2 title "
               "'resident adapters'\n",
            q[1], q[1], q[1]);
  }
  /* starvation timeline: a row per tenant (the first at the top), a bar
  ** per starved interval, a colour per kind */
  h = 150 + 26 * nt;
  if (h < 360)
    h = 360;
  for (int t = 0; t < LSIM_PLOT_TERMS; t++) {
    lsim_plot_term(ps, fig[2], t, 900, h);
    fprintf(f, "set title %s\n",
            lsim_plot_title(title, sizeof title,
                            "Starved intervals per tenant", sc, extra));
    fprintf(f, "set xlabel 'simulated time (s)'\nset ylabel 'tenant'\n"
               "set xrange [0:%.6f]\nset yrange [%d.5:-0.5]\n"
               "set grid xtics\nset key below\nset style fill solid 0.8 "
               "border\n",
            end_s > 0 ? end_s : 1.0, nt - 1);
    lsim__tenant_tics(f, sc);
    if (!nstarved) /* say so rather than leave the panel blank */
      fputs("set label 1 'no starved interval in this run' at graph 0.5, "
            "graph 0.5 center\n", f);
    fprintf(f, "plot %s index 0 using (($2+$3)/2):($1-0.2):2:3:($1-0.4):"
               "($1) with boxxyerror lc rgb '#c0392b' title 'service-starved "
               "(the tenant waited ready, unserved)', "
               "%s index 1 using (($2+$3)/2):($1+0.2):2:3:($1):($1+0.4) "
               "with boxxyerror lc rgb '#2471a3' title 'load-starved (it "
               "waited on an adapter that was not loaded)'\n",
            q[2], q[2]);
  }
  /* service share against demand share, one point per tenant */
  for (int t = 0; t < LSIM_PLOT_TERMS; t++) {
    lsim_plot_term(ps, fig[3], t, 760, 640);
    fprintf(f, "set title %s\n",
            lsim_plot_title(title, sizeof title,
                            "Service share against demand share", sc, extra));
    fprintf(f, "set xlabel 'demand share (weighted tokens asked for)'\n"
               "set ylabel 'completed service share'\n"
               "set xrange [0:1]\nset yrange [0:1]\nset size ratio -1\n"
               "set grid\nset key top left\n"
               "plot x with lines dt 2 lc rgb '#808080' title 'service in "
               "proportion to demand', %s using 3:5 with points pt 7 ps 1.4 "
               "lc rgb '#c0392b' title 'tenant'%s",
            q[3], nt <= 12 ? ", " : "\n");
    if (nt <= 12)
      fprintf(f, "%s using 3:5:1 with labels offset char 1,0.6 left "
                 "notitle\n",
              q[3]);
  }
  int drawn = 0;
  if ((rc = lsim_plot_finish(ps, &drawn, s->plot_note, sizeof s->plot_note,
                             eb)))
    return rc;
  /* a PNG is listed only once it is whole and in place (its SVG too) */
  for (int i = 0; drawn && i < LSIM_REPORT_PLOTS; i++)
    snprintf(s->plots[i], sizeof s->plots[i], "%s%s.png", base,
             lsim__fig_side[i]);
  return 0;
}

lsim_err lsim_report_check_paths(const char *db_path, int plots,
                                 lsim_errbuf *eb) {
  char base[1024], p[1100];
  snprintf(base, sizeof base, "%s", db_path);
  size_t len = strlen(base);
  if (len > 3 && strcmp(base + len - 3, ".db") == 0)
    base[len - 3] = 0;
  snprintf(p, sizeof p, "%s.prom", base);
  lsim_err rc = lsim_out_check(p, eb);
  if (rc || !plots)
    return rc;
  snprintf(p, sizeof p, "%s-plots.gp", base);
  if ((rc = lsim_out_check(p, eb)))
    return rc;
  for (size_t i = 0; i < sizeof lsim__dat_side / sizeof lsim__dat_side[0];
       i++) {
    snprintf(p, sizeof p, "%s%s", base, lsim__dat_side[i]);
    if ((rc = lsim_out_check(p, eb)))
      return rc;
  }
  for (int i = 0; i < LSIM_REPORT_PLOTS; i++)
    for (int t = 0; t < LSIM_PLOT_TERMS; t++) {
      snprintf(p, sizeof p, "%s%s.%s", base, lsim__fig_side[i],
               lsim_plot_ext[t]);
      if ((rc = lsim_out_check(p, eb)))
        return rc;
    }
  return 0;
}
