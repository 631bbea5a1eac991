/*
** tenants.c: the per-tenant figures (tenants.h) -- computed from the run's
** rows, stored, printed and written as Prometheus text.
**
** One scan of `requests` gives every count, sum and demand; the
** percentiles, taken by nearest rank like the run's own (report.h: the
** p-th percentile of N values is the ceil(p*N/100)-th smallest), are exact
** selections in a bounded budget over that scan and the few more they ask
** for (sim/pctl.h), so memory does not grow with the run.  The all-tenants
** row is taken over the same values, so its p50 and p99 are the
** runs_summary figures.
*/
#include "tenants.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "escape.h"
#include "pctl.h"

static const struct {
  const char *key;
  int count;
} lsim__tf[LSIM_TF_N] = {
#define LSIM__TF_ROW(id, col, cnt) {col, cnt},
    LSIM_TENANT_FIGS(LSIM__TF_ROW)
#undef LSIM__TF_ROW
};

const char *lsim_tenants_key(int k) {
  return k >= 0 && k < LSIM_TF_N ? lsim__tf[k].key : NULL;
}

int lsim_tenants_is_count(int k) {
  return k >= 0 && k < LSIM_TF_N && lsim__tf[k].count;
}

const char *lsim_tenants_name(const lsim_scenario *sc,
                              const lsim_tenant_fig *f) {
  return f->tenant >= 0 && f->tenant < sc->ntenants ? sc->tenants[f->tenant].name
                                                    : "all";
}

const char *lsim_tenants_num(char *out, size_t size, double v) {
  if (isnan(v)) {
    snprintf(out, size, "%s", "");
    return out;
  }
  if (v == floor(v) && fabs(v) < 9007199254740992.0) {
    snprintf(out, size, "%lld", (long long)v);
    return out;
  }
  snprintf(out, size, "%.15g", v);
  if (strtod(out, NULL) != v)
    snprintf(out, size, "%.17g", v);
  return out;
}

/* ---- computing ------------------------------------------------------------ */

/* Groups of the latency selection: (row, metric) for the rows 0..nt (the
** tenants, then all) and the metrics 0 TTFT, 1 TBT, 2 end-to-end, each
** with its p50, p90 and p99. */
#define LSIM__LAT(r, m) ((r) * 3 + (m))
/* Groups of the cold selection: (tenant, window, cold) of the matched
** windows, each with its p50, then (row, cold) pooled over them. */
#define LSIM__WIN(t, w, c) ((((t) * LSIM_TENANTS_WINDOWS) + (w)) * 2 + (c))
#define LSIM__POOL(nt, r, c) \
  ((nt) * LSIM_TENANTS_WINDOWS * 2 + (r) * 2 + (c))

/* integer sums of the time breakdown per row */
enum { LSIM__S_QUEUE, LSIM__S_LOAD, LSIM__S_PREFILL, LSIM__S_DECODE,
       LSIM__S_N };

typedef struct lsim__tscan {
  const lsim_scenario *sc;
  int nt;
  int64_t window;          /* ticks per cold-comparison window */
  int64_t completed;       /* the registry's count of completed requests */
  int64_t (*sum)[LSIM__S_N]; /* [nt + 1] */
  double (*lsum)[3];       /* [nt + 1] latency sums, in scan order */
  int64_t *wcount;         /* [nt * windows * 2] completed with a first token */
  unsigned char *matched;  /* [nt * windows] cold and warm both there */
  lsim_tenant_fig *out;
} lsim__tscan;

/* One scan of the run's requests.  The first (`first` set) counts every
** figure; lat and cold, when not NULL, are fed the latencies (the
** selections' passes). */
static lsim_err lsim__tscan_run(sqlite3 *db, sqlite3_stmt *st, lsim__tscan *T,
                                int first, lsim_pctl *lat, lsim_pctl *cold,
                                lsim_errbuf *eb) {
  int nt = T->nt, step;
  int64_t nok = 0;
  while ((step = sqlite3_step(st)) == SQLITE_ROW) {
    int t = sqlite3_column_int(st, 0);
    if (sqlite3_column_type(st, 0) == SQLITE_NULL || t < 0 || t >= nt)
      return lsim_fail(eb, LSIM_E_DB, "tenant figures: a request row names "
                                      "tenant %d of %d", t, nt);
    const char *oc = (const char *)sqlite3_column_text(st, 5);
    int ok = oc && strcmp(oc, "ok") == 0;
    int refused = oc && (strcmp(oc, "rejected") == 0 ||
                         strcmp(oc, "cancelled") == 0);
    int is_cold = sqlite3_column_int(st, 6);
    int rows[2] = {t, nt};
    if (first) {
      int64_t demand = sqlite3_column_int64(st, 12) +
                       sqlite3_column_int64(st, 13) - 1;
      for (int k = 0; k < 2; k++) {
        double *v = T->out[rows[k]].v;
        v[LSIM_TF_ARRIVED] += 1;
        v[ok ? LSIM_TF_COMPLETED
             : refused ? LSIM_TF_REJECTED : LSIM_TF_UNFINISHED] += 1;
        v[LSIM_TF_OUTPUT_TOKENS] += (double)sqlite3_column_int64(st, 4);
        v[LSIM_TF_DEMAND] += (double)demand;
        v[LSIM_TF_PREEMPTIONS] += sqlite3_column_int(st, 11);
        v[LSIM_TF_COLD_REQUESTS] += is_cold;
        if (ok)
          for (int s = 0; s < LSIM__S_N; s++)
            T->sum[rows[k]][s] += sqlite3_column_int64(st, 7 + s);
      }
    }
    if (!ok)
      continue;
    if (first && ++nok > T->completed)
      return lsim_fail(eb, LSIM_E_BUG, "tenant figures: more completed "
                       "requests than the registry counted (%lld)",
                       (long long)T->completed);
    int64_t arr = sqlite3_column_int64(st, 1),
            fin = sqlite3_column_int64(st, 3);
    int out_tok = sqlite3_column_int(st, 4);
    int64_t ttft = sqlite3_column_type(st, 2) == SQLITE_NULL
                       ? -1
                       : sqlite3_column_int64(st, 2) - arr;
    double x[3];
    x[0] = (double)ttft;
    x[1] = ttft >= 0 && out_tok >= 2
               ? (double)(fin - sqlite3_column_int64(st, 2)) /
                     (double)(out_tok - 1)
               : -1;
    x[2] = (double)(fin - arr);
    for (int m = 0; m < 3; m++) {
      if (x[m] < 0)
        continue;
      for (int k = 0; k < 2; k++) {
        if (first)
          T->lsum[rows[k]][m] += x[m];
        if (lat)
          lsim_pctl_add(lat, LSIM__LAT(rows[k], m), x[m]);
      }
    }
    /* cold vs warm: only requests with a first token take part */
    if (ttft < 0)
      continue;
    int64_t w = arr / T->window;
    if (w < 0 || w >= LSIM_TENANTS_WINDOWS)
      return lsim_fail(eb, LSIM_E_BUG, "tenant figures: arrival tick %lld "
                       "outside the %d windows of %lld ticks",
                       (long long)arr, LSIM_TENANTS_WINDOWS,
                       (long long)T->window);
    int c = is_cold != 0;
    if (first)
      T->wcount[LSIM__WIN(t, w, c)]++;
    if (cold && T->matched[t * LSIM_TENANTS_WINDOWS + w]) {
      lsim_pctl_add(cold, LSIM__WIN(t, w, c), (double)ttft);
      lsim_pctl_add(cold, LSIM__POOL(nt, t, c), (double)ttft);
      lsim_pctl_add(cold, LSIM__POOL(nt, nt, c), (double)ttft);
    }
  }
  if (step != SQLITE_DONE)
    return lsim_fail(eb, LSIM_E_DB, "tenant figures: %s", sqlite3_errmsg(db));
  sqlite3_reset(st);
  return 0;
}

/* The figures.  Percentiles are exact nearest-rank selections in a
** bounded budget (sim/pctl.h): a run whose latencies fit in it takes two
** scans of `requests` (the second for the cold comparison, whose windows
** are known after the first), a longer one a few more; memory does not
** grow with the run. */
lsim_err lsim_tenants_compute(sqlite3 *db, const lsim_scenario *sc,
                              const int64_t *service, int64_t completed,
                              const int64_t *svc_longest,
                              const int64_t *svc_starved,
                              lsim_tenant_fig *out, lsim_errbuf *eb) {
  int nt = sc->ntenants;
  const int W = LSIM_TENANTS_WINDOWS;
  double ms = (double)sc->ns_per_tick / 1e6;
  static const double p3[3] = {50, 90, 99};
  static const int first_fig[3] = {LSIM_TF_TTFT_P50, LSIM_TF_TBT_P50,
                                   LSIM_TF_E2E_P50};
  lsim__tscan T = {sc, nt, 1, completed, NULL, NULL, NULL, NULL, out};
  lsim_pctl *lat = NULL, *cold = NULL;
  int *lat_t = NULL, *win_t = NULL, pool_t[2 * (LSIM_MAX_TENANTS + 1)];
  sqlite3_stmt *st = NULL;
  lsim_err rc = 0;
  int64_t budget = lsim_pctl_budget();
  for (int r = 0; r <= nt; r++) {
    memset(&out[r], 0, sizeof out[r]);
    out[r].tenant = r < nt ? r : -1;
  }
  T.sum = calloc((size_t)nt + 1, sizeof *T.sum);
  T.lsum = calloc((size_t)nt + 1, sizeof *T.lsum);
  T.wcount = calloc((size_t)nt * (size_t)W * 2, sizeof *T.wcount);
  T.matched = calloc((size_t)nt * (size_t)W, 1);
  lat_t = malloc(((size_t)nt + 1) * 9 * sizeof *lat_t);
  win_t = malloc((size_t)nt * (size_t)W * 2 * sizeof *win_t);
  /* half the budget each: the two selections share the later scans */
  lat = lsim_pctl_new((nt + 1) * 3, budget / 2);
  cold = lsim_pctl_new(nt * W * 2 + (nt + 1) * 2, budget / 2);
  if (!T.sum || !T.lsum || !T.wcount || !T.matched || !lat_t || !win_t ||
      !lat || !cold) {
    rc = lsim_fail(eb, LSIM_E_NOMEM, "out of memory for tenant figures");
    goto done;
  }
  for (int r = 0; r <= nt; r++)
    for (int m = 0; m < 3; m++)
      for (int i = 0; i < 3; i++)
        if ((lat_t[(r * 3 + m) * 3 + i] =
                 lsim_pctl_want(lat, LSIM__LAT(r, m), p3[i])) < 0) {
          rc = lsim_fail(eb, LSIM_E_NOMEM, "out of memory for tenant figures");
          goto done;
        }
  /* the cold comparison's window, from the trace's arrivals */
  if (sqlite3_prepare_v2(db,
                         "SELECT coalesce(max(arrival_tick), 0) FROM requests "
                         "WHERE run_id=1",
                         -1, &st, NULL) != SQLITE_OK ||
      sqlite3_step(st) != SQLITE_ROW) {
    rc = lsim_fail(eb, LSIM_E_DB, "tenant figures: %s", sqlite3_errmsg(db));
    goto done;
  }
  T.window = sqlite3_column_int64(st, 0) / W + 1;
  sqlite3_finalize(st);
  st = NULL;
  for (int r = 0; r <= nt; r++)
    out[r].window_ticks = T.window;
  if (sqlite3_prepare_v2(db,
                         "SELECT tenant, arrival_tick, first_token_tick, "
                         "finish_tick, output_tokens, outcome, cold, "
                         "queue_wait_ticks, load_wait_ticks, prefill_ticks, "
                         "decode_ticks, preemptions, prompt_tokens, "
                         "requested_tokens FROM requests WHERE run_id=1",
                         -1, &st, NULL) != SQLITE_OK) {
    rc = lsim_fail(eb, LSIM_E_DB, "tenant figures: %s", sqlite3_errmsg(db));
    goto done;
  }
  /* scan 1: every count and sum, the latencies' first pass, the windows'
  ** cold and warm counts */
  lsim_pctl_pass(lat);
  if ((rc = lsim__tscan_run(db, st, &T, 1, lat, NULL, eb)) ||
      (rc = lsim_pctl_end(lat, eb)))
    goto done;
  /* the matched windows, and what the cold comparison asks */
  for (int t = 0; t < nt; t++)
    for (int w = 0; w < W; w++) {
      int m = T.wcount[LSIM__WIN(t, w, 1)] > 0 &&
              T.wcount[LSIM__WIN(t, w, 0)] > 0;
      T.matched[t * W + w] = (unsigned char)m;
      for (int c = 0; c < 2; c++) {
        int *ti = &win_t[LSIM__WIN(t, w, c)];
        *ti = -1;
        if (m && (*ti = lsim_pctl_want(cold, LSIM__WIN(t, w, c), 50)) < 0) {
          rc = lsim_fail(eb, LSIM_E_NOMEM, "out of memory for tenant figures");
          goto done;
        }
      }
    }
  for (int r = 0; r <= nt; r++)
    for (int c = 0; c < 2; c++)
      if ((pool_t[r * 2 + c] =
               lsim_pctl_want(cold, LSIM__POOL(nt, r, c), 50)) < 0) {
        rc = lsim_fail(eb, LSIM_E_NOMEM, "out of memory for tenant figures");
        goto done;
      }
  /* further scans while either selection needs one: the completed
  ** requests only, and only the columns the latencies need (the others
  ** are not read after the first scan; 'ok' stands for the outcome) */
  sqlite3_finalize(st);
  st = NULL;
  if (sqlite3_prepare_v2(db,
                         "SELECT tenant, arrival_tick, first_token_tick, "
                         "finish_tick, output_tokens, 'ok', cold FROM "
                         "requests WHERE run_id=1 AND outcome='ok'",
                         -1, &st, NULL) != SQLITE_OK) {
    rc = lsim_fail(eb, LSIM_E_DB, "tenant figures: %s", sqlite3_errmsg(db));
    goto done;
  }
  for (;;) {
    int pl = lsim_pctl_pass(lat), pc = lsim_pctl_pass(cold);
    if (!pl && !pc)
      break;
    if ((rc = lsim__tscan_run(db, st, &T, 0, pl ? lat : NULL,
                              pc ? cold : NULL, eb)) ||
        (pl && (rc = lsim_pctl_end(lat, eb))) ||
        (pc && (rc = lsim_pctl_end(cold, eb))))
      goto done;
  }
  /* latencies: count, sum and percentiles per row */
  for (int r = 0; r <= nt; r++)
    for (int m = 0; m < 3; m++) {
      int64_t k = lsim_pctl_count(lat, LSIM__LAT(r, m));
      int64_t *cnt = m == 0 ? &out[r].n_ttft
                     : m == 1 ? &out[r].n_tbt
                              : &out[r].n_e2e;
      double *sp = m == 0 ? &out[r].sum_ttft
                   : m == 1 ? &out[r].sum_tbt
                            : &out[r].sum_e2e;
      *cnt = k;
      *sp = T.lsum[r][m];
      for (int i = 0; i < 3; i++)
        out[r].v[first_fig[m] + i] =
            lsim_pctl_value(lat, lat_t[(r * 3 + m) * 3 + i]) * ms;
    }
  /* Cold vs warm TTFT of each tenant within matched windows: the windows
  ** (arrival_tick / window) in which the tenant had at least one completed
  ** cold request and one completed warm one, both with a first token.  The
  ** cost is the mean over those windows of (p50 cold - p50 warm) in the
  ** window, weighted by the window's cold requests: pooled medians would
  ** compare early cold requests with later warm ones, and under a growing
  ** queue that flips the sign.  Windows in (tenant, window) order. */
  for (int r = 0; r <= nt; r++) {
    double diff = 0;
    for (int t = 0; t < nt; t++) {
      if (r < nt && t != r)
        continue;
      for (int w = 0; w < W; w++) {
        if (!T.matched[t * W + w])
          continue;
        double gc = lsim_pctl_value(cold, win_t[LSIM__WIN(t, w, 1)]);
        double gw = lsim_pctl_value(cold, win_t[LSIM__WIN(t, w, 0)]);
        diff += (double)T.wcount[LSIM__WIN(t, w, 1)] * (gc - gw);
      }
    }
    int64_t nc = lsim_pctl_count(cold, LSIM__POOL(nt, r, 1)),
            nw = lsim_pctl_count(cold, LSIM__POOL(nt, r, 0));
    out[r].v[LSIM_TF_COLD_COMPARED] = (double)nc;
    out[r].v[LSIM_TF_WARM_COMPARED] = (double)nw;
    out[r].v[LSIM_TF_TTFT_COLD_P50] = lsim_pctl_value(cold, pool_t[r * 2 + 1]) * ms;
    out[r].v[LSIM_TF_TTFT_WARM_P50] = lsim_pctl_value(cold, pool_t[r * 2]) * ms;
    out[r].v[LSIM_TF_COLD_TTFT_COST] = nc && nw ? diff / (double)nc * ms : NAN;
  }
  /* means of the breakdown over completed requests; service and demand */
  double svc_all = 0;
  for (int t = 0; t < nt; t++)
    svc_all += (double)service[t];
  for (int r = 0; r <= nt; r++) {
    double *v = out[r].v, c = v[LSIM_TF_COMPLETED];
    v[LSIM_TF_QUEUE_WAIT_MEAN] =
        c > 0 ? (double)T.sum[r][LSIM__S_QUEUE] / c * ms : NAN;
    v[LSIM_TF_LOAD_WAIT_MEAN] =
        c > 0 ? (double)T.sum[r][LSIM__S_LOAD] / c * ms : NAN;
    v[LSIM_TF_PREFILL_MEAN] =
        c > 0 ? (double)T.sum[r][LSIM__S_PREFILL] / c * ms : NAN;
    v[LSIM_TF_DECODE_MEAN] =
        c > 0 ? (double)T.sum[r][LSIM__S_DECODE] / c * ms : NAN;
    v[LSIM_TF_SERVICE] = r < nt ? (double)service[r] : svc_all;
    v[LSIM_TF_SERVICE_SHARE] =
        svc_all > 0 ? v[LSIM_TF_SERVICE] / svc_all : NAN;
    double dem_all = out[nt].v[LSIM_TF_DEMAND];
    v[LSIM_TF_DEMAND_SHARE] = dem_all > 0 ? v[LSIM_TF_DEMAND] / dem_all : NAN;
  }
  /* the service intervals (the starvation table's kind 'service' rows):
  ** the longest, whatever its length, and those judged starved, counted by
  ** the metrics registry as the intervals closed (the same rows; a scan of
  ** the table cost more than the rest of these figures together) */
  for (int t = 0; t < nt; t++) {
    if (svc_longest[t] == INT64_MIN)
      continue;
    double longest = (double)svc_longest[t] * ms;
    out[t].v[LSIM_TF_LONGEST_STARVED] = longest;
    out[t].v[LSIM_TF_STARVED_INTERVALS] = (double)svc_starved[t];
    if (longest > out[nt].v[LSIM_TF_LONGEST_STARVED])
      out[nt].v[LSIM_TF_LONGEST_STARVED] = longest;
    out[nt].v[LSIM_TF_STARVED_INTERVALS] += out[t].v[LSIM_TF_STARVED_INTERVALS];
  }
done:
  sqlite3_finalize(st);
  free(T.sum);
  free(T.lsum);
  free(T.wcount);
  free(T.matched);
  free(lat_t);
  free(win_t);
  lsim_pctl_free(lat);
  lsim_pctl_free(cold);
  return rc;
}

/* ---- tenant_summary --------------------------------------------------------- */

lsim_err lsim_tenants_store(struct lsim_db *db, const lsim_scenario *sc,
                            const lsim_tenant_fig *f, lsim_errbuf *eb) {
  sqlite3 *h = lsim_db_handle(db);
  /* the statements are built from the descriptor: one column per figure,
  ** counts INTEGER, the rest REAL (sim/tenants.h) */
  char create[4096], insert[4096];
  size_t nc = 0, ni = 0;
  nc += (size_t)snprintf(create + nc, sizeof create - nc,
                         "CREATE TABLE IF NOT EXISTS tenant_summary("
                         "run_id INTEGER NOT NULL, tenant INTEGER, "
                         "name TEXT NOT NULL");
  ni += (size_t)snprintf(insert + ni, sizeof insert - ni,
                         "INSERT INTO tenant_summary VALUES(1, ?, ?");
  for (int k = 0; k < LSIM_TF_N && nc < sizeof create && ni < sizeof insert;
       k++) {
    nc += (size_t)snprintf(create + nc, sizeof create - nc, ", %s %s",
                           lsim__tf[k].key,
                           lsim__tf[k].count ? "INTEGER" : "REAL");
    ni += (size_t)snprintf(insert + ni, sizeof insert - ni, ", ?");
  }
  if (nc < sizeof create)
    nc += (size_t)snprintf(create + nc, sizeof create - nc,
                           ", UNIQUE(run_id, tenant))");
  if (ni < sizeof insert)
    ni += (size_t)snprintf(insert + ni, sizeof insert - ni, ")");
  if (nc >= sizeof create || ni >= sizeof insert)
    return LSIM_BUG(eb, "tenant_summary statement too long");
  if (sqlite3_exec(h, create, NULL, NULL, NULL) != SQLITE_OK)
    return lsim_fail(eb, LSIM_E_DB, "creating tenant_summary: %s",
                     sqlite3_errmsg(h));
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(h, insert, -1, &st, NULL) != SQLITE_OK)
    return lsim_fail(eb, LSIM_E_DB, "storing tenant_summary: %s",
                     sqlite3_errmsg(h));
  lsim_err rc = 0;
  for (int r = 0; r <= sc->ntenants && !rc; r++) {
    if (f[r].tenant >= 0)
      sqlite3_bind_int(st, 1, f[r].tenant);
    else
      sqlite3_bind_null(st, 1);
    sqlite3_bind_text(st, 2, lsim_tenants_name(sc, &f[r]), -1,
                      SQLITE_TRANSIENT);
    for (int k = 0; k < LSIM_TF_N; k++) {
      double v = f[r].v[k];
      if (isnan(v))
        sqlite3_bind_null(st, 3 + k);
      else if (lsim__tf[k].count)
        sqlite3_bind_int64(st, 3 + k, (sqlite3_int64)v);
      else
        sqlite3_bind_double(st, 3 + k, v);
    }
    if (sqlite3_step(st) != SQLITE_DONE)
      rc = lsim_fail(eb, LSIM_E_DB, "storing tenant_summary: %s",
                     sqlite3_errmsg(h));
    sqlite3_reset(st);
  }
  sqlite3_finalize(st);
  return rc;
}

/* ---- the console ------------------------------------------------------------ */

/* A figure in a column of width w: "-" when it has none. */
static void lsim__cell(FILE *f, double v, int w, int prec) {
  if (isnan(v))
    fprintf(f, " %*s", w, "-");
  else
    fprintf(f, " %*.*f", w, prec, v);
}

static void lsim__pct(FILE *f, double v, int w) {
  if (isnan(v))
    fprintf(f, " %*s", w, "-");
  else
    fprintf(f, " %*.1f%%", w - 1, 100.0 * v);
}

void lsim_tenants_print(FILE *f, const lsim_scenario *sc,
                        const lsim_tenant_fig *t) {
  char shown[LSIM_ESC_SIZE(LSIM_NAME_MAX)];
  int nt = sc->ntenants;
  /* counts and shares; service and demand in token rows */
  fprintf(f, "  %-14s %8s %9s %8s %10s %12s %7s %7s\n", "tenant", "arrived",
          "completed", "rejected", "unfinished", "service", "svc %",
          "demand %");
  for (int r = 0; r <= nt; r++) {
    const double *v = t[r].v;
    fprintf(f, "  %-14.14s %8.0f %9.0f %8.0f %10.0f %12.0f",
            lsim_console_str(shown, sizeof shown, lsim_tenants_name(sc, &t[r])),
            v[LSIM_TF_ARRIVED], v[LSIM_TF_COMPLETED], v[LSIM_TF_REJECTED],
            v[LSIM_TF_UNFINISHED], v[LSIM_TF_SERVICE]);
    lsim__pct(f, v[LSIM_TF_SERVICE_SHARE], 7);
    lsim__pct(f, v[LSIM_TF_DEMAND_SHARE], 7);
    fputc('\n', f);
  }
  /* latency percentiles, simulated ms */
  fprintf(f, "  %-14s %8s %7s %7s %8s %7s %7s %8s %7s %7s\n", "latency (ms)",
          "TTFT p50", "p90", "p99", "TBT p50", "p90", "p99", "E2E p50",
          "p90", "p99");
  for (int r = 0; r <= nt; r++) {
    const double *v = t[r].v;
    fprintf(f, "  %-14.14s",
            lsim_console_str(shown, sizeof shown, lsim_tenants_name(sc, &t[r])));
    lsim__cell(f, v[LSIM_TF_TTFT_P50], 8, 1);
    lsim__cell(f, v[LSIM_TF_TTFT_P90], 7, 1);
    lsim__cell(f, v[LSIM_TF_TTFT_P99], 7, 1);
    lsim__cell(f, v[LSIM_TF_TBT_P50], 8, 2);
    lsim__cell(f, v[LSIM_TF_TBT_P90], 7, 2);
    lsim__cell(f, v[LSIM_TF_TBT_P99], 7, 2);
    lsim__cell(f, v[LSIM_TF_E2E_P50], 8, 1);
    lsim__cell(f, v[LSIM_TF_E2E_P90], 7, 1);
    lsim__cell(f, v[LSIM_TF_E2E_P99], 7, 1);
    fputc('\n', f);
  }
  /* where TTFT went (means over completed requests), what a cold adapter
  ** cost (p50 cold - p50 warm in matched windows), the longest stretch
  ** without service */
  fprintf(f, "  %-14s %7s %7s %7s %6s %8s %8s %8s %9s %4s\n",
          "TTFT mean ms", "queue", "load", "prefill", "cold", "cold p50",
          "warm p50", "cold +", "unserved", "st");
  for (int r = 0; r <= nt; r++) {
    const double *v = t[r].v;
    fprintf(f, "  %-14.14s",
            lsim_console_str(shown, sizeof shown, lsim_tenants_name(sc, &t[r])));
    lsim__cell(f, v[LSIM_TF_QUEUE_WAIT_MEAN], 7, 1);
    lsim__cell(f, v[LSIM_TF_LOAD_WAIT_MEAN], 7, 1);
    lsim__cell(f, v[LSIM_TF_PREFILL_MEAN], 7, 1);
    lsim__cell(f, v[LSIM_TF_COLD_REQUESTS], 6, 0);
    lsim__cell(f, v[LSIM_TF_TTFT_COLD_P50], 8, 1);
    lsim__cell(f, v[LSIM_TF_TTFT_WARM_P50], 8, 1);
    lsim__cell(f, v[LSIM_TF_COLD_TTFT_COST], 8, 1);
    lsim__cell(f, v[LSIM_TF_LONGEST_STARVED], 9, 1);
    lsim__cell(f, v[LSIM_TF_STARVED_INTERVALS], 4, 0);
    fputc('\n', f);
  }
  fprintf(f, "  (cold +: p50 TTFT of cold minus warm requests of the tenant, "
             "within each %.1f ms\n   arrival window, averaged over windows "
             "by cold requests; unserved: longest\n   wait with no service, "
             "ms; st: intervals judged starved)\n",
          (double)t[nt].window_ticks * (double)sc->ns_per_tick / 1e6);
}

/* ---- Prometheus text -------------------------------------------------------- */

static void lsim__prom_series(FILE *f, const char *name, const char *label,
                              const char *extra, double v) {
  char num[64];
  if (isnan(v))
    return;
  fprintf(f, "%s{tenant=\"%s\"%s} %s\n", name, label, extra ? extra : "",
          lsim_tenants_num(num, sizeof num, v));
}

void lsim_tenants_prom(FILE *f, const lsim_scenario *sc,
                       const lsim_tenant_fig *t) {
  int nt = sc->ntenants;
  char lab[LSIM_MAX_TENANTS][LSIM_ESC_SIZE(LSIM_NAME_MAX)];
  for (int r = 0; r < nt && r < LSIM_MAX_TENANTS; r++)
    if (lsim_prom_label(lab[r], sizeof lab[r], sc->tenants[r].name) < 0)
      snprintf(lab[r], sizeof lab[r], "%d", r);
  if (nt > LSIM_MAX_TENANTS)
    nt = LSIM_MAX_TENANTS;
  /* requests by outcome: the three add up to the arrivals */
  static const struct {
    const char *outcome;
    int k;
  } oc[3] = {{"completed", LSIM_TF_COMPLETED},
             {"rejected", LSIM_TF_REJECTED},
             {"unfinished", LSIM_TF_UNFINISHED}};
  fprintf(f, "# TYPE lorasim_tenant_requests_total counter\n");
  for (int r = 0; r < nt; r++)
    for (int i = 0; i < 3; i++) {
      char extra[64];
      snprintf(extra, sizeof extra, ",outcome=\"%s\"", oc[i].outcome);
      lsim__prom_series(f, "lorasim_tenant_requests_total", lab[r], extra,
                        t[r].v[oc[i].k]);
    }
  /* one series per tenant: name, type, figure, scale */
  static const struct {
    const char *name, *type;
    int k;
    double scale;
  } one[] = {
      {"lorasim_tenant_cold_requests_total", "counter", LSIM_TF_COLD_REQUESTS, 1},
      {"lorasim_tenant_output_tokens_total", "counter", LSIM_TF_OUTPUT_TOKENS, 1},
      {"lorasim_tenant_service_units_total", "counter", LSIM_TF_SERVICE, 1},
      {"lorasim_tenant_demand_units_total", "counter", LSIM_TF_DEMAND, 1},
      {"lorasim_tenant_service_share_ratio", "gauge", LSIM_TF_SERVICE_SHARE, 1},
      {"lorasim_tenant_demand_share_ratio", "gauge", LSIM_TF_DEMAND_SHARE, 1},
      {"lorasim_tenant_queue_wait_mean_seconds", "gauge",
       LSIM_TF_QUEUE_WAIT_MEAN, 1e-3},
      {"lorasim_tenant_load_wait_mean_seconds", "gauge", LSIM_TF_LOAD_WAIT_MEAN,
       1e-3},
      {"lorasim_tenant_prefill_mean_seconds", "gauge", LSIM_TF_PREFILL_MEAN,
       1e-3},
      {"lorasim_tenant_decode_mean_seconds", "gauge", LSIM_TF_DECODE_MEAN,
       1e-3},
      {"lorasim_tenant_preemptions_total", "counter", LSIM_TF_PREEMPTIONS, 1},
      {"lorasim_tenant_ttft_cold_p50_seconds", "gauge", LSIM_TF_TTFT_COLD_P50,
       1e-3},
      {"lorasim_tenant_ttft_warm_p50_seconds", "gauge", LSIM_TF_TTFT_WARM_P50,
       1e-3},
      {"lorasim_tenant_cold_ttft_cost_seconds", "gauge", LSIM_TF_COLD_TTFT_COST,
       1e-3},
      {"lorasim_tenant_longest_starved_seconds", "gauge",
       LSIM_TF_LONGEST_STARVED, 1e-3},
      {"lorasim_tenant_starved_intervals_total", "counter",
       LSIM_TF_STARVED_INTERVALS, 1},
  };
  for (size_t i = 0; i < sizeof one / sizeof one[0]; i++) {
    int any = 0;
    for (int r = 0; r < nt; r++)
      any |= !isnan(t[r].v[one[i].k]);
    if (!any)
      continue; /* no TYPE line without a sample */
    fprintf(f, "# TYPE %s %s\n", one[i].name, one[i].type);
    for (int r = 0; r < nt; r++)
      lsim__prom_series(f, one[i].name, lab[r], NULL,
                        t[r].v[one[i].k] * one[i].scale);
  }
  /* latencies: summaries with p50, p90, p99, _sum and _count */
  static const struct {
    const char *name;
    int first;
  } lat[3] = {{"lorasim_tenant_ttft_seconds", LSIM_TF_TTFT_P50},
              {"lorasim_tenant_tbt_seconds", LSIM_TF_TBT_P50},
              {"lorasim_tenant_e2e_seconds", LSIM_TF_E2E_P50}};
  static const char *const q[3] = {"0.5", "0.9", "0.99"};
  double s_per_tick = (double)sc->ns_per_tick * 1e-9;
  for (int i = 0; i < 3; i++) {
    fprintf(f, "# TYPE %s summary\n", lat[i].name);
    for (int r = 0; r < nt; r++) {
      char extra[32], name[96], num[64];
      for (int k = 0; k < 3; k++) {
        snprintf(extra, sizeof extra, ",quantile=\"%s\"", q[k]);
        lsim__prom_series(f, lat[i].name, lab[r], extra,
                          t[r].v[lat[i].first + k] * 1e-3);
      }
      int64_t n = i == 0 ? t[r].n_ttft : i == 1 ? t[r].n_tbt : t[r].n_e2e;
      double s = i == 0 ? t[r].sum_ttft : i == 1 ? t[r].sum_tbt : t[r].sum_e2e;
      snprintf(name, sizeof name, "%s_sum", lat[i].name);
      fprintf(f, "%s{tenant=\"%s\"} %s\n", name, lab[r],
              lsim_tenants_num(num, sizeof num, s * s_per_tick));
      snprintf(name, sizeof name, "%s_count", lat[i].name);
      fprintf(f, "%s{tenant=\"%s\"} %lld\n", name, lab[r], (long long)n);
    }
  }
}
