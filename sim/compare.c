/*
** compare.c: `lorasim compare`, one scenario under several schedulers.
**
** The scenario is loaded once; every scheduler named by --schedulers runs
** it with the same seed, evict and prefetch policies, each into its own
** database DIR/SCHEDULER.db (replaced if it exists).  The figures of every
** run come from its summary (lsim_summary, the same numbers runs_summary
** holds) and the per-tenant completed service from the metrics registry;
** nothing is recomputed here.  The table goes to stdout, DIR/compare.csv
** gets the same rows, and DIR/compare-service.png (gnuplot, skipped with a
** note when gnuplot is missing) shows per-tenant service per scheduler.
**
** The runs are sequential and independent: run k's rows are the rows
** `lorasim replay --scheduler k` writes with the same options.
*/
#include "compare.h"
#include "cli.h"

#include "audit.h"
#include "escape.h"
#include "plot_run.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "outfile.h"
#include "../engine/policy/policy.h"
#include "replay.h"
#include "runid.h"
#include "scenario.h"
#include "timeline.h"

#include <sqlite3.h>

#define LSIM__CMP_MAX 16 /* schedulers per comparison */

static volatile sig_atomic_t lsim__cmp_stop = 0;

static void lsim__cmp_on_sigint(int sig) {
  (void)sig;
  lsim__cmp_stop = 1;
}

/* Wall time, for the progress line only (it reaches no file). */
static double lsim__cmp_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One line on stderr per arm done: "compare: 2/4 arms (vtc), elapsed 3s,
** eta 3s", the ETA from the mean wall time of the arms so far. */
static void lsim__cmp_progress(int done, int n, const char *name,
                               double elapsed) {
  char shown[LSIM_ESC_SIZE(LSIM_NAME_MAX)];
  double eta = elapsed / done * (n - done);
  fprintf(stderr, "compare: %d/%d arms (%s done), elapsed %.1fs, eta %.1fs\n",
          done, n, lsim_console_str(shown, sizeof shown, name), elapsed, eta);
  fflush(stderr);
}

static void lsim__cmp_usage(FILE *f) {
  fputs(
      "usage: lorasim compare SCENARIO.json --schedulers A,B,... [options]\n"
      "\n"
      "Run the scenario once per scheduler (same trace, seed, eviction and\n"
      "prefetch), each into its own SQLite database, then print one table\n"
      "and write it as CSV beside the databases, with gnuplot PNGs: TTFT\n"
      "CDF, per-tenant completed service (final and over time), service\n"
      "gap over time, resident adapters and loads over time, starvation\n"
      "intervals.  The databases hold the runs, their summaries, requests\n"
      "and starvation intervals; --full-log also writes every event and\n"
      "iteration row (as `lorasim replay` does), which is several times\n"
      "slower on long traces.\n"
      "\n"
      "options:\n"
      "  --schedulers LIST  comma-separated scheduler names (required,\n"
      "                     at most 16, no repeats)\n"
      "  --evict NAME       override the eviction policy\n"
      "  --prefetch NAME    override the prefetch policy\n"
      "  --seed N           override the scenario seed\n"
      "  --out DIR          output directory (created if missing);\n"
      "                     default results/compare-NAME\n"
      "  --no-plots         do not write the PNGs\n"
      "  --full-log         also log every event and iteration row\n"
      "  --set PATH=VALUE   set one scenario key before validation (as\n"
      "                     replay --set); repeatable\n"
      "  --quiet            no progress line per arm on stderr\n"
      "  -h, --help         this text\n"
      "\n"
      "files: DIR/SCHEDULER.db and .prom per run, DIR/compare.csv, and\n"
      "DIR/compare-{service,ttft,service-time,gap,residency,starvation}\n"
      ".png with their .dat files\n"
      "\n",
      f);
  fputs("registered names:\n", f);
  const char *const *n = lsim_sched_names();
  fprintf(f, "  %-10s", "scheduler");
  for (int i = 0; n[i]; i++)
    fprintf(f, "%s%s", i ? ", " : "", n[i]);
  fputc('\n', f);
  n = lsim_evict_names();
  fprintf(f, "  %-10s", "evict");
  for (int i = 0; n[i]; i++)
    fprintf(f, "%s%s", i ? ", " : "", n[i]);
  fputc('\n', f);
  n = lsim_prefetch_names();
  fprintf(f, "  %-10s", "prefetch");
  for (int i = 0; n[i]; i++)
    fprintf(f, "%s%s", i ? ", " : "", n[i]);
  fputs("\n\nexit status: 0 ok, 1 a run failed, 2 bad usage or input, "
        "130 interrupted\n",
        f);
}

/* Split the comma list into names[] (pointers into buf); -1 with a message
** in eb on an empty, unknown or repeated name or too many. */
static int lsim__cmp_split(char *buf, char **names, int *n, lsim_errbuf *eb) {
  *n = 0;
  for (char *p = buf;;) {
    char *comma = strchr(p, ',');
    if (comma)
      *comma = 0;
    if (!*p) {
      lsim_fail(eb, LSIM_E_USAGE, "--schedulers: empty name in the list");
      return -1;
    }
    if (!lsim_sched_find(p)) {
      lsim_fail(eb, LSIM_E_SCN_POLICY,
                "--schedulers: unknown scheduler '%s' (see lorasim compare "
                "--help)",
                p);
      return -1;
    }
    for (int i = 0; i < *n; i++)
      if (strcmp(names[i], p) == 0) {
        lsim_fail(eb, LSIM_E_USAGE, "--schedulers: '%s' named twice", p);
        return -1;
      }
    if (*n == LSIM__CMP_MAX) {
      lsim_fail(eb, LSIM_E_USAGE, "--schedulers: at most %d names",
                LSIM__CMP_MAX);
      return -1;
    }
    names[(*n)++] = p;
    if (!comma)
      return 0;
    p = comma + 1;
  }
}

/* mkdir -p for a relative or absolute path. */
static int lsim__cmp_mkdirs(const char *dir) {
  char p[1024];
  snprintf(p, sizeof p, "%s", dir);
  for (char *s = p + 1; *s; s++)
    if (*s == '/') {
      *s = 0;
      if (mkdir(p, 0777) != 0 && errno != EEXIST)
        return -1;
      *s = '/';
    }
  if (mkdir(p, 0777) != 0 && errno != EEXIST)
    return -1;
  struct stat sb;
  return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode) ? 0 : -1;
}

typedef struct lsim__cmp_row {
  const char *sched;
  lsim_summary s;
  int64_t *service; /* ntenants */
} lsim__cmp_row;

/* A figure, or empty (CSV) / "-" (table) when the run has none (< 0). */
static void lsim__cmp_csv_num(FILE *f, double v, const char *fmt) {
  fputc(',', f);
  if (v >= 0)
    fprintf(f, fmt, v);
}

static lsim_err lsim__cmp_csv(const char *path, const lsim_scenario *sc,
                              const lsim__cmp_row *rows, int n,
                              lsim_errbuf *eb) {
  lsim_outfile of;
  lsim_err rc = lsim_out_open(&of, path, eb);
  if (rc)
    return rc;
  FILE *f = of.fp;
  fprintf(f, "scheduler,evict,prefetch,seed,completed,rejected,unfinished,"
             "throughput_tokens_per_s,ttft_p50_ms,ttft_p99_ms,tbt_p50_ms,"
             "tbt_p99_ms,slo_ttft_attainment,slo_tbt_attainment,jain,"
             "max_service_gap,starved_load_intervals,"
             "starved_service_intervals,e2e_p50_ms,e2e_p99_ms,max_wait_ms,"
             "loads,load_failures,evictions,hit_rate,load_amplification,"
             "prefetch_precision,prefetch_wasted_bytes,early_aborts,"
             "adapters_per_iteration,segments_per_iteration,"
             "rank_padding_ratio,service_prefill,service_decode,"
             "service_resident,service_cold_loaded,service_rank_le8,"
             "service_rank_16,service_rank_32,service_rank_64,"
             "service_rank_gt64,backlog_service_gap,vtc_bound,iterations,"
             "events,preemptions,migrations,recompute_tokens");
  /* the prefix cache's figures, only when it is on (the columns before
  ** the per-tenant ones stay as they were otherwise) */
  if (sc->prefix_mode != 0)
    fputs(",prefix_lookups,prefix_hit_rate,prefix_block_hit_rate,"
          "prefix_reused_tokens,prefix_corrupt_reuses,"
          "prefix_corrupt_requests,prefix_published_blocks,"
          "prefix_evicted_blocks", f);
  for (int t = 0; t < sc->ntenants; t++) {
    /* one RFC 4180 field whatever the name holds (escape.h) */
    char col[8 + LSIM_NAME_MAX], field[LSIM_ESC_SIZE(8 + LSIM_NAME_MAX)];
    snprintf(col, sizeof col, "service_%s", sc->tenants[t].name);
    lsim_csv_field(field, sizeof field, col);
    fprintf(f, ",%s", field);
  }
  fputc('\n', f);
  for (int i = 0; i < n; i++) {
    const lsim_summary *s = &rows[i].s;
    char q_sched[LSIM_ESC_SIZE(LSIM_NAME_MAX)],
        q_evict[LSIM_ESC_SIZE(LSIM_NAME_MAX)],
        q_prefetch[LSIM_ESC_SIZE(LSIM_NAME_MAX)];
    lsim_csv_field(q_sched, sizeof q_sched, rows[i].sched);
    lsim_csv_field(q_evict, sizeof q_evict, sc->evict);
    lsim_csv_field(q_prefetch, sizeof q_prefetch, sc->prefetch);
    fprintf(f, "%s,%s,%s,%llu,%lld,%lld,%lld", q_sched, q_evict, q_prefetch,
            (unsigned long long)sc->seed,
            (long long)s->completed, (long long)s->rejected,
            (long long)s->unfinished);
    lsim__cmp_csv_num(f, s->throughput_tok_s, "%.3f");
    lsim__cmp_csv_num(f, s->ttft_p50_ms, "%.6f");
    lsim__cmp_csv_num(f, s->ttft_p99_ms, "%.6f");
    lsim__cmp_csv_num(f, s->tbt_p50_ms, "%.6f");
    lsim__cmp_csv_num(f, s->tbt_p99_ms, "%.6f");
    lsim__cmp_csv_num(f, s->slo_ttft_attain, "%.6f");
    lsim__cmp_csv_num(f, s->slo_tbt_attain, "%.6f");
    lsim__cmp_csv_num(f, s->jain, "%.6f");
    fprintf(f, ",%lld,%lld,%lld", (long long)s->max_gap,
            (long long)s->load_starved, (long long)s->service_starved);
    lsim__cmp_csv_num(f, s->e2e_p50_ms, "%.6f");
    lsim__cmp_csv_num(f, s->e2e_p99_ms, "%.6f");
    lsim__cmp_csv_num(f, s->max_wait_ms, "%.6f");
    fprintf(f, ",%lld,%lld,%lld", (long long)s->loads,
            (long long)s->load_failures, (long long)s->evictions);
    lsim__cmp_csv_num(f, s->hit_rate, "%.6f");
    lsim__cmp_csv_num(f, s->load_amplification, "%.6f");
    lsim__cmp_csv_num(f, s->prefetch_precision, "%.6f");
    fprintf(f, ",%lld,%lld", (long long)s->prefetch_wasted_bytes,
            (long long)s->early_aborts);
    lsim__cmp_csv_num(f, s->adapters_per_iter, "%.6f");
    lsim__cmp_csv_num(f, s->segments_per_iter, "%.6f");
    lsim__cmp_csv_num(f, s->rank_padding_ratio, "%.6f");
    fprintf(f, ",%lld,%lld,%lld,%lld", (long long)s->service_prefill,
            (long long)s->service_decode, (long long)s->service_resident,
            (long long)s->service_cold);
    for (int k = 0; k < 5; k++)
      fprintf(f, ",%lld", (long long)s->service_rank[k]);
    lsim__cmp_csv_num(f, (double)s->backlog_gap, "%.0f");
    lsim__cmp_csv_num(f, (double)s->vtc_bound, "%.0f");
    fprintf(f, ",%lld,%lld,%lld,%lld,%lld", (long long)s->iterations,
            (long long)s->events, (long long)s->preemptions,
            (long long)s->migrations, (long long)s->recompute_tokens);
    if (sc->prefix_mode != 0) {
      fprintf(f, ",%lld", (long long)s->prefix_lookups);
      lsim__cmp_csv_num(f, s->prefix_hit_rate, "%.6f");
      lsim__cmp_csv_num(f, s->prefix_block_hit_rate, "%.6f");
      fprintf(f, ",%lld,%lld,%lld,%lld,%lld",
              (long long)s->prefix_reused_tokens,
              (long long)s->prefix_corrupt_reuses,
              (long long)s->prefix_corrupt_requests,
              (long long)s->prefix_published_blocks,
              (long long)s->prefix_evicted_blocks);
    }
    for (int t = 0; t < sc->ntenants; t++)
      fprintf(f, ",%lld", (long long)rows[i].service[t]);
    fputc('\n', f);
  }
  return lsim_out_commit(&of, eb);
}

static void lsim__cmp_cell(FILE *f, double v, int w, const char *fmt) {
  if (v < 0)
    fprintf(f, " %*s", w, "-");
  else
    fprintf(f, fmt, w, v);
}

#define LSIM__CMP_TENANT_COLS 8 /* the CSV has them all */

static void lsim__cmp_print(FILE *f, const lsim_scenario *sc,
                            const lsim__cmp_row *rows, int n) {
  char shown[LSIM_ESC_SIZE(LSIM_NAME_MAX)];
  fprintf(f, "lorasim compare: %s (seed %llu, evict %s, prefetch %s, "
             "%d worker%s)\n",
          lsim_console_str(shown, sizeof shown, sc->name), (unsigned long long)sc->seed, sc->evict, sc->prefetch,
          sc->workers, sc->workers == 1 ? "" : "s");
  fprintf(f, "%-16s %9s %8s %10s %9s %9s %8s %8s %6s %6s %6s %8s %5s %5s",
          "scheduler", "completed", "rejected", "tok/s", "ttft_p50",
          "ttft_p99", "tbt_p50", "tbt_p99", "slo_tt", "slo_tb", "jain",
          "max_gap", "st_ld", "st_sv");
  int nt = sc->ntenants < LSIM__CMP_TENANT_COLS ? sc->ntenants
                                                 : LSIM__CMP_TENANT_COLS;
  for (int t = 0; t < nt; t++)
    fprintf(f, " %10.10s",
            lsim_console_str(shown, sizeof shown, sc->tenants[t].name));
  if (nt < sc->ntenants)
    fprintf(f, " (+%d tenants in the CSV)", sc->ntenants - nt);
  fputc('\n', f);
  for (int i = 0; i < n; i++) {
    const lsim_summary *s = &rows[i].s;
    fprintf(f, "%-16s %9lld %8lld", rows[i].sched, (long long)s->completed,
            (long long)s->rejected);
    lsim__cmp_cell(f, s->throughput_tok_s, 10, " %*.0f");
    lsim__cmp_cell(f, s->ttft_p50_ms, 9, " %*.2f");
    lsim__cmp_cell(f, s->ttft_p99_ms, 9, " %*.2f");
    lsim__cmp_cell(f, s->tbt_p50_ms, 8, " %*.3f");
    lsim__cmp_cell(f, s->tbt_p99_ms, 8, " %*.3f");
    lsim__cmp_cell(f, s->slo_ttft_attain, 6, " %*.3f");
    lsim__cmp_cell(f, s->slo_tbt_attain, 6, " %*.3f");
    lsim__cmp_cell(f, s->jain, 6, " %*.3f");
    fprintf(f, " %8lld %5lld %5lld", (long long)s->max_gap,
            (long long)s->load_starved, (long long)s->service_starved);
    for (int t = 0; t < nt; t++)
      fprintf(f, " %10lld", (long long)rows[i].service[t]);
    fputc('\n', f);
  }
  fputs("(ms of simulated time; tok/s: output tokens of completed requests "
        "per simulated second; slo_tt/slo_tb: SLO attainment; st_ld/st_sv: "
        "starved load/service intervals; tenant columns: completed "
        "service)\n",
        f);
}

/* The PNG: a clustered histogram, one cluster per scheduler, one bar per
** tenant.  *note says why it is missing; returns an error only for I/O. */
static lsim_err lsim__cmp_plot(const char *dir, const lsim_scenario *sc,
                               const lsim__cmp_row *rows, int n, char *png,
                               size_t png_n, char *note, size_t note_n,
                               lsim_errbuf *eb) {
  char dat[1100], gp[1100];
  png[0] = note[0] = 0;
  snprintf(dat, sizeof dat, "%s/compare-service.dat", dir);
  snprintf(gp, sizeof gp, "%s/compare-service.gp", dir);
  lsim_outfile of, pof;
  lsim_err rc = lsim_out_open(&of, dat, eb);
  if (rc)
    return rc;
  FILE *f = of.fp;
  fprintf(f, "scheduler");
  for (int t = 0; t < sc->ntenants; t++) { /* gnuplot columnheads */
    char tok[LSIM_ESC_SIZE(LSIM_NAME_MAX)];
    lsim_dat_token(tok, sizeof tok, sc->tenants[t].name);
    fprintf(f, " %s", tok);
  }
  fputc('\n', f);
  for (int i = 0; i < n; i++) {
    char tok[LSIM_ESC_SIZE(LSIM_NAME_MAX)];
    lsim_dat_token(tok, sizeof tok, rows[i].sched);
    fprintf(f, "%s", tok);
    for (int t = 0; t < sc->ntenants; t++)
      fprintf(f, " %lld", (long long)rows[i].service[t]);
    fputc('\n', f);
  }
  if ((rc = lsim_out_commit(&of, eb)))
    return rc;
  char png_path[1100], title[400];
  char q_dat[LSIM_ESC_SIZE(1100)], q_png[LSIM_ESC_SIZE(1100)],
      q_title[LSIM_ESC_SIZE(400)];
  snprintf(png_path, sizeof png_path, "%s/compare-service.png", dir);
  /* every string of the script is a quoted gnuplot literal (escape.h) */
  if (lsim_gp_path(q_dat, sizeof q_dat, dat) < 0 ||
      lsim_gp_path(q_png, sizeof q_png, png_path) < 0) {
    snprintf(note, note_n, "skipped: the output path has control characters");
    return 0;
  }
  if (!lsim_gnuplot_available()) {
    snprintf(note, note_n, "skipped: gnuplot not found (data in %s)", dat);
    return 0;
  }
  snprintf(title, sizeof title,
           "Completed service per tenant: %s (evict %s, prefetch %s, seed "
           "%llu)",
           sc->name, sc->evict, sc->prefetch, (unsigned long long)sc->seed);
  lsim_gp_string(q_title, sizeof q_title, title, LSIM_GP_REPLACE);
  if ((rc = lsim_out_reserve(&pof, png_path, eb)))
    return rc;
  /* the script names the temporary (same directory, same characters) */
  if (lsim_gp_path(q_png, sizeof q_png, pof.tmp) < 0 ||
      (rc = lsim_out_open(&of, gp, eb))) {
    lsim_out_abort(&pof);
    return rc;
  }
  f = of.fp;
  fprintf(f, "set terminal pngcairo size 900,560 noenhanced\n"
             "set output %s\n"
             "set title %s\n"
             "set ylabel 'completed service (weighted tokens)'\n"
             "set style data histograms\nset style histogram cluster gap 1\n"
             "set style fill solid 0.8 border -1\nset boxwidth 0.9\n"
             "set key outside right\nset grid ytics\nset yrange [0:*]\n"
             "set key autotitle columnhead\nset xtics rotate by -25\n",
          q_png, q_title);
  fprintf(f, "plot ");
  for (int t = 0; t < sc->ntenants; t++)
    fprintf(f, "%s%s using %d%s", t ? ", " : "", q_dat, t + 2,
            t ? "" : ":xtic(1)");
  fputc('\n', f);
  if ((rc = lsim_out_commit(&of, eb))) {
    lsim_out_abort(&pof);
    return rc;
  }
  lsim_errbuf geb = LSIM_ERRBUF_INIT;
  if (lsim_gnuplot_run(gp, &geb)) {
    lsim_out_abort(&pof);
    snprintf(note, note_n, "gnuplot failed on %s (data kept)", gp);
    return 0;
  }
  if ((rc = lsim_out_commit(&pof, eb)))
    return rc;
  snprintf(png, png_n, "%s", png_path);
  return 0;
}

/* ---- per-run series for the plots ---------------------------------------- */

/* The TTFT CDF of a run's completed requests, at most ~400 points, as one
** gnuplot data block: ttft_ms fraction. */
static lsim_err lsim__cmp_ttft(FILE *f, const char *dbpath, double ms_per_tick,
                               lsim_errbuf *eb) {
  sqlite3 *h = NULL;
  sqlite3_stmt *st = NULL;
  lsim_err rc = 0;
  if (sqlite3_open_v2(dbpath, &h, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(h,
                         "SELECT count(*) FROM requests WHERE outcome = 'ok' "
                         "AND first_token_tick IS NOT NULL",
                         -1, &st, NULL) != SQLITE_OK ||
      sqlite3_step(st) != SQLITE_ROW) {
    rc = lsim_fail(eb, LSIM_E_DB, "%s: %s", dbpath, sqlite3_errmsg(h));
    goto done;
  }
  int64_t n = sqlite3_column_int64(st, 0), step = n / 400 + 1, i = 0;
  sqlite3_finalize(st);
  st = NULL;
  if (sqlite3_prepare_v2(h,
                         "SELECT first_token_tick - arrival_tick AS v FROM "
                         "requests WHERE outcome = 'ok' AND first_token_tick "
                         "IS NOT NULL ORDER BY v",
                         -1, &st, NULL) != SQLITE_OK) {
    rc = lsim_fail(eb, LSIM_E_DB, "%s: %s", dbpath, sqlite3_errmsg(h));
    goto done;
  }
  while (sqlite3_step(st) == SQLITE_ROW) {
    i++;
    if (i % step == 0 || i == n || i == 1)
      fprintf(f, "%.6f %.6f\n",
              (double)sqlite3_column_int64(st, 0) * ms_per_tick,
              (double)i / (double)n);
  }
  if (n == 0)
    fputs("0 0\n", f); /* an empty block would end the file's indices */
  fputs("\n\n", f);
done:
  sqlite3_finalize(st);
  sqlite3_close(h);
  return rc;
}

/* Starved intervals of run `idx` as gnuplot vectors: x y dx dy; load
** intervals sit above the run's line, service intervals below it. */
static lsim_err lsim__cmp_starved(FILE *f, const char *dbpath, int idx,
                                  double s_per_tick, lsim_errbuf *eb) {
  sqlite3 *h = NULL;
  sqlite3_stmt *st = NULL;
  lsim_err rc = 0;
  if (sqlite3_open_v2(dbpath, &h, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(h,
                         "SELECT kind, start_tick, end_tick FROM starvation "
                         "WHERE starved = 1 ORDER BY start_tick, kind, entity",
                         -1, &st, NULL) != SQLITE_OK) {
    rc = lsim_fail(eb, LSIM_E_DB, "%s: %s", dbpath, sqlite3_errmsg(h));
    goto done;
  }
  int rows = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    const char *k = (const char *)sqlite3_column_text(st, 0);
    double y = idx + (k && strcmp(k, "load") == 0 ? 0.15 : -0.15);
    double a = (double)sqlite3_column_int64(st, 1) * s_per_tick,
           b = (double)sqlite3_column_int64(st, 2) * s_per_tick;
    fprintf(f, "%.6f %.3f %.6f 0\n", a, y, b - a);
    rows++;
  }
  if (!rows)
    fprintf(f, "0 %d 0 0\n", idx);
  fputs("\n\n", f);
done:
  sqlite3_finalize(st);
  sqlite3_close(h);
  return rc;
}

/* The timeline plots from the .dat files the runs wrote. */
enum { LSIM__TL_TTFT_DAT, LSIM__TL_TL_DAT, LSIM__TL_SV_DAT, LSIM__TL_TTFT_PNG,
       LSIM__TL_ST_PNG, LSIM__TL_GAP_PNG, LSIM__TL_RES_PNG, LSIM__TL_SV_PNG,
       LSIM__TL_N };

/* name as a quoted gnuplot title into out (control bytes as '?'). */
static const char *lsim__cmp_gp_title(char *out, size_t size,
                                      const char *name) {
  lsim_gp_string(out, size, name, LSIM_GP_REPLACE);
  return out;
}

/* *all is set to 1 once every PNG is whole and in place; a gnuplot that
** failed is a note, a path refused or a write that failed an error. */
#define LSIM__CMP_PNGS 5
static lsim_err lsim__cmp_plots2(const char *dir, const lsim_scenario *sc,
                                 const lsim__cmp_row *rows, int n, char *note,
                                 size_t note_n, int *all, lsim_errbuf *eb) {
  static const char *const files[LSIM__TL_N] = {
      "compare-ttft.dat",          "compare-timeline.dat",
      "compare-starvation.dat",    "compare-ttft.png",
      "compare-service-time.png",  "compare-gap.png",
      "compare-residency.png",     "compare-starvation.png"};
  char gp[1100], path[1100], q[LSIM__TL_N][LSIM_ESC_SIZE(1100)];
  char t1[LSIM_ESC_SIZE(2 * LSIM_NAME_MAX + 8)], title[200];
  *all = 0;
  /* every string of the script is a quoted gnuplot literal (escape.h) */
  for (int k = 0; k < LSIM__TL_N; k++) {
    snprintf(path, sizeof path, "%s/%s", dir, files[k]);
    if (lsim_gp_path(q[k], sizeof q[k], path) < 0) {
      snprintf(note, note_n, "skipped: the output path has control "
                             "characters");
      return 0;
    }
  }
  /* the PNGs are reserved temporaries the script names (sim/outfile.h) */
  lsim_outfile pof[LSIM__CMP_PNGS], gof;
  lsim_err rc = 0;
  int np = 0;
  for (; np < LSIM__CMP_PNGS && !rc; np++) {
    snprintf(path, sizeof path, "%s/%s", dir, files[LSIM__TL_TTFT_PNG + np]);
    if ((rc = lsim_out_reserve(&pof[np], path, eb)))
      break;
    if (lsim_gp_path(q[LSIM__TL_TTFT_PNG + np], sizeof q[0], pof[np].tmp) <
        0)
      rc = lsim_fail(eb, LSIM_E_IO, "%s: unquotable temporary", pof[np].tmp);
  }
  snprintf(gp, sizeof gp, "%s/compare-timeline.gp", dir);
  if (!rc)
    rc = lsim_out_open(&gof, gp, eb);
  if (rc) {
    for (int k = 0; k < np; k++)
      lsim_out_abort(&pof[k]);
    return rc;
  }
  FILE *f = gof.fp;
  int nt = sc->ntenants < 8 ? sc->ntenants : 8;
  snprintf(title, sizeof title, "TTFT CDF per scheduler: %s", sc->name);
  fprintf(f, "set terminal pngcairo size 1000,600 noenhanced\n"
             "set key outside right\nset grid\n");
  fprintf(f, "set output %s\n"
             "set title %s\n"
             "set xlabel 'TTFT (ms, log scale)'\nset ylabel 'fraction of "
             "completed requests'\nset logscale x\nset yrange [0:1]\nplot ",
          q[LSIM__TL_TTFT_PNG], lsim__cmp_gp_title(t1, sizeof t1, title));
  for (int i = 0; i < n; i++)
    fprintf(f, "%s%s index %d using 1:2 with steps lw 2 title %s",
            i ? ", " : "", q[LSIM__TL_TTFT_DAT], i,
            lsim__cmp_gp_title(t1, sizeof t1, rows[i].sched));
  fprintf(f, "\nunset logscale x\nset yrange [*:*]\n"
             "set output %s\n"
             "set title 'Completed service per tenant over time (first %d "
             "tenants)'\nset xlabel 'simulated time (s)'\n"
             "set ylabel 'cumulative completed service'\nplot ",
          q[LSIM__TL_ST_PNG], nt);
  for (int i = 0, first = 1; i < n; i++)
    for (int t = 0; t < nt; t++, first = 0) {
      snprintf(title, sizeof title, "%s / %s", rows[i].sched,
               sc->tenants[t].name);
      fprintf(f, "%s%s index %d using 1:%d with lines lw 2 lc %d dt %d "
                 "title %s",
              first ? "" : ", ", q[LSIM__TL_TL_DAT], i, t + 2, i + 1, t + 1,
              lsim__cmp_gp_title(t1, sizeof t1, title));
    }
  fprintf(f, "\nset output %s\n"
             "set title 'Service gap over time (max - min cumulative service "
             "over tenants that have arrived)'\nset ylabel 'service gap'\n"
             "plot ",
          q[LSIM__TL_GAP_PNG]);
  for (int i = 0; i < n; i++)
    fprintf(f, "%s%s index %d using 1:%d with lines lw 2 title %s",
            i ? ", " : "", q[LSIM__TL_TL_DAT], i, sc->ntenants + 2,
            lsim__cmp_gp_title(t1, sizeof t1, rows[i].sched));
  fprintf(f, "\nset output %s\n"
             "set multiplot layout 2,1 title 'Adapter residency and loads'\n"
             "set title ''\nset ylabel 'resident adapters (all workers)'\n"
             "plot ",
          q[LSIM__TL_RES_PNG]);
  for (int i = 0; i < n; i++)
    fprintf(f, "%s%s index %d using 1:%d with steps lw 2 title %s",
            i ? ", " : "", q[LSIM__TL_TL_DAT], i, sc->ntenants + 3,
            lsim__cmp_gp_title(t1, sizeof t1, rows[i].sched));
  fprintf(f, "\nset ylabel 'adapter loads per second'\nplot ");
  for (int i = 0; i < n; i++)
    fprintf(f, "%s%s index %d using 1:%d with steps lw 2 title %s",
            i ? ", " : "", q[LSIM__TL_TL_DAT], i, sc->ntenants + 4,
            lsim__cmp_gp_title(t1, sizeof t1, rows[i].sched));
  fprintf(f, "\nunset multiplot\nset output %s\n"
             "set title 'Starved intervals (above a line: adapter load-"
             "starved; below: tenant service-starved)'\n"
             "set ylabel ''\nset yrange [-0.6:%d.6]\nset ytics (",
          q[LSIM__TL_SV_PNG], n - 1);
  for (int i = 0; i < n; i++)
    fprintf(f, "%s%s %d", i ? ", " : "",
            lsim__cmp_gp_title(t1, sizeof t1, rows[i].sched), i);
  fprintf(f, ")\nplot ");
  for (int i = 0; i < n; i++)
    fprintf(f, "%s%s index %d using 1:2:3:4 with "
               "vectors nohead lw 4 lc %d notitle",
            i ? ", " : "", q[LSIM__TL_SV_DAT], i, i + 1);
  fputc('\n', f);
  if ((rc = lsim_out_commit(&gof, eb))) {
    for (int k = 0; k < LSIM__CMP_PNGS; k++)
      lsim_out_abort(&pof[k]);
    return rc;
  }
  lsim_errbuf geb = LSIM_ERRBUF_INIT;
  if (lsim_gnuplot_run(gp, &geb)) {
    for (int k = 0; k < LSIM__CMP_PNGS; k++)
      lsim_out_abort(&pof[k]);
    snprintf(note, note_n, "gnuplot failed on %s (data kept)", gp);
    return 0;
  }
  for (int k = 0; k < LSIM__CMP_PNGS; k++)
    if ((rc = lsim_out_commit(&pof[k], eb))) {
      for (int m = k + 1; m < LSIM__CMP_PNGS; m++)
        lsim_out_abort(&pof[m]);
      return rc;
    }
  *all = 1;
  return 0;
}

int lsim_compare_main(int argc, char **argv) {
  enum {
    O_SCHEDS = 256,
    O_EVICT,
    O_PREFETCH,
    O_SEED,
    O_OUT,
    O_NOPLOTS,
    O_FULLLOG,
    O_SET,
    O_QUIET
  };
  static const struct option opts[] = {
      {"schedulers", required_argument, NULL, O_SCHEDS},
      {"evict", required_argument, NULL, O_EVICT},
      {"prefetch", required_argument, NULL, O_PREFETCH},
      {"seed", required_argument, NULL, O_SEED},
      {"out", required_argument, NULL, O_OUT},
      {"no-plots", no_argument, NULL, O_NOPLOTS},
      {"full-log", no_argument, NULL, O_FULLLOG},
      {"set", required_argument, NULL, O_SET},
      {"quiet", no_argument, NULL, O_QUIET},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  const char *scheds = NULL, *evict = NULL, *prefetch = NULL, *seed_s = NULL,
             *out = NULL;
  int plots = 1, full_log = 0, quiet = 0, nsets = 0, c;
  const char *sets[LSIM_SCENARIO_MAX_SETS];
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case O_SCHEDS: scheds = optarg; break;
    case O_EVICT: evict = optarg; break;
    case O_PREFETCH: prefetch = optarg; break;
    case O_SEED: seed_s = optarg; break;
    case O_OUT: out = optarg; break;
    case O_NOPLOTS: plots = 0; break;
    case O_FULLLOG: full_log = 1; break;
    case O_QUIET: quiet = 1; break;
    case O_SET:
      if (nsets == LSIM_SCENARIO_MAX_SETS)
        return lsim_cli_fail("compare", LSIM_E_USAGE, "too many --set");
      sets[nsets++] = optarg;
      break;
    case 'h': lsim__cmp_usage(stdout); return 0;
    default: lsim__cmp_usage(stderr); return 2;
    }
  }
  if (optind != argc - 1) {
    fprintf(stderr, "lorasim compare: error: E_USAGE: expected exactly one "
                    "scenario file\n");
    lsim__cmp_usage(stderr);
    return 2;
  }
  if (!scheds)
    return lsim_cli_fail("compare", LSIM_E_USAGE, "--schedulers is required (e.g. "
                                       "--schedulers fcfs,deficit_aging)");
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  char list[1024];
  char *names[LSIM__CMP_MAX];
  int n = 0;
  if (strlen(scheds) >= sizeof list)
    return lsim_cli_fail("compare", LSIM_E_USAGE, "--schedulers: list too long");
  snprintf(list, sizeof list, "%s", scheds);
  if (lsim__cmp_split(list, names, &n, &eb))
    return lsim_cli_fail("compare", eb.code, eb.msg);
  if (evict && !lsim_evict_find(evict)) {
    lsim_fail(&eb, LSIM_E_SCN_POLICY,
              "--evict: unknown name '%s' (see lorasim compare --help)",
              evict);
    return lsim_cli_fail("compare", eb.code, eb.msg);
  }
  if (prefetch && !lsim_prefetch_find(prefetch)) {
    lsim_fail(&eb, LSIM_E_SCN_POLICY,
              "--prefetch: unknown name '%s' (see lorasim compare --help)",
              prefetch);
    return lsim_cli_fail("compare", eb.code, eb.msg);
  }
  uint64_t seed = 0;
  if (seed_s) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(seed_s, &end, 10);
    if (*seed_s == '-' || end == seed_s || *end || errno)
      return lsim_cli_fail("compare", LSIM_E_USAGE,
                           "--seed: expected a non-negative integer");
    seed = v;
  }

  static lsim_scenario sc;
  const lsim_scenario_src src = {NULL, nsets, sets};
  lsim_err rc = lsim_scenario_load_src(&sc, argv[optind], &src, &eb);
  if (rc) {
    lsim_cli_fail("compare", rc, eb.msg);
    return 2;
  }
  if (seed_s)
    sc.seed = seed;
  if (evict)
    snprintf(sc.evict, sizeof sc.evict, "%s", evict);
  if (prefetch)
    snprintf(sc.prefetch, sizeof sc.prefetch, "%s", prefetch);

  char dir[1024];
  if (out) {
    if (strlen(out) > 900)
      return lsim_cli_fail("compare", LSIM_E_USAGE, "--out: path too long");
    snprintf(dir, sizeof dir, "%s", out);
  } else {
    snprintf(dir, sizeof dir, "results/compare-%s", sc.name);
  }
  size_t dl = strlen(dir);
  while (dl > 1 && dir[dl - 1] == '/')
    dir[--dl] = 0;
  if (lsim__cmp_mkdirs(dir)) {
    fprintf(stderr, "lorasim compare: error: %s: cannot create directory %s\n",
            lsim_err_name(LSIM_E_IO), dir);
    return 1;
  }

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = lsim__cmp_on_sigint;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);

  lsim__cmp_row rows[LSIM__CMP_MAX];
  memset(rows, 0, sizeof rows);
  int64_t *service = calloc((size_t)n * (size_t)(sc.ntenants ? sc.ntenants : 1),
                            sizeof(int64_t));
  if (!service)
    return lsim_cli_fail("compare", LSIM_E_NOMEM, "out of memory");
  char tlp[1100], ttp[1100], svp[1100];
  snprintf(tlp, sizeof tlp, "%s/compare-timeline.dat", dir);
  snprintf(ttp, sizeof ttp, "%s/compare-ttft.dat", dir);
  snprintf(svp, sizeof svp, "%s/compare-starvation.dat", dir);
  /* the three series, written as the runs go, go into place at the end
  ** whole (sim/outfile.h) */
  lsim_outfile dof[3];
  int st = 0, ndof = 0;
  const char *const dps[3] = {tlp, ttp, svp};
  for (; ndof < 3; ndof++)
    if ((rc = lsim_out_open(&dof[ndof], dps[ndof], &eb))) {
      st = lsim_cli_fail("compare", rc, eb.msg);
      break;
    }
  FILE *ftl = ndof == 3 ? dof[0].fp : NULL, *ftt = ndof == 3 ? dof[1].fp : NULL,
       *fsv = ndof == 3 ? dof[2].fp : NULL;
  double tick_s = (double)sc.ns_per_tick * 1e-9;
  /* the --set edits, recorded in each run's options (replay --resume
  ** applies them again); nothing is recorded without them */
  const char *ropts[2 * LSIM_SCENARIO_MAX_SETS + 1];
  char setnames[LSIM_SCENARIO_MAX_SETS][16];
  for (int i = 0; i < nsets; i++) {
    lsim_runid_set_name(i, setnames[i]);
    ropts[2 * i] = setnames[i];
    ropts[2 * i + 1] = sets[i];
  }
  ropts[2 * nsets] = NULL;
  double t0 = lsim__cmp_now();
  for (int i = 0; i < n && !st; i++) {
    char dbpath[1100], cmdline[1024];
    snprintf(sc.scheduler, sizeof sc.scheduler, "%s", names[i]);
    snprintf(dbpath, sizeof dbpath, "%s/%s.db", dir, names[i]);
    size_t used = 0;
    for (int a = 0; a < argc && used < sizeof cmdline - 1; a++)
      used += (size_t)snprintf(cmdline + used, sizeof cmdline - used, "%s%s",
                               a ? " " : "lorasim ", argv[a]);
    rows[i].sched = names[i];
    rows[i].service = service + (size_t)i * (size_t)sc.ntenants;
    lsim_timeline tl;
    if (lsim_timeline_init(&tl, sc.ntenants, sc.workers, sc.adapters,
                           sc.ns_per_tick)) {
      st = lsim_cli_fail("compare", LSIM_E_NOMEM, "out of memory");
      break;
    }
    lsim_sink tap = {lsim_timeline_event, NULL, &tl, NULL};
    lsim_replay_opts o = {.db_path = dbpath,
                          .command_line = cmdline,
                          .stop = &lsim__cmp_stop,
                          .tenant_service = rows[i].service,
                          .summary_only = !full_log,
                          .tap = &tap,
                          .run_options = nsets ? ropts : NULL};
    rc = lsim_replay_run(&sc, &o, &rows[i].s, &eb);
    if (rc) {
      st = lsim_cli_fail("compare", rc, eb.msg);
      char prog[LSIM_NAME_MAX + 64];
      snprintf(prog, sizeof prog, "lorasim compare: run of '%s'", names[i]);
      lsim_replay_explain(stderr, prog, &rows[i].s, dbpath);
    } else if (lsim_timeline_write(&tl, ftl, rows[i].s.end_tick,
                                   sc.ns_per_tick) ||
               (rc = lsim__cmp_ttft(ftt, dbpath, tick_s * 1e3, &eb)) ||
               (rc = lsim__cmp_starved(fsv, dbpath, i, tick_s, &eb))) {
      st = lsim_cli_fail("compare", rc ? rc : LSIM_E_IO, rc ? eb.msg : "write failed");
    }
    lsim_timeline_release(&tl);
    if (!st && !quiet)
      lsim__cmp_progress(i + 1, n, names[i], lsim__cmp_now() - t0);
  }
  for (int k = 0; k < ndof; k++) {
    if (st) {
      lsim_out_abort(&dof[k]);
    } else if ((rc = lsim_out_commit(&dof[k], &eb))) {
      st = lsim_cli_fail("compare", rc, eb.msg);
    }
  }
  if (!st) {
    char csv[1100], png[1100], note[1300];
    snprintf(csv, sizeof csv, "%s/compare.csv", dir);
    rc = lsim__cmp_csv(csv, &sc, rows, n, &eb);
    if (!rc) { /* each column's evidence class (sim/audit.c) */
      char evp[1100];
      snprintf(evp, sizeof evp, "%s/compare-evidence.csv", dir);
      rc = lsim_claims_csv_sidecar(csv, evp, sc.backend, &eb);
    }
    png[0] = note[0] = 0;
    if (!rc && plots)
      rc = lsim__cmp_plot(dir, &sc, rows, n, png, sizeof png, note,
                          sizeof note, &eb);
    int all = 0;
    if (!rc && plots && png[0])
      rc = lsim__cmp_plots2(dir, &sc, rows, n, note, sizeof note, &all, &eb);
    if (rc) {
      st = lsim_cli_fail("compare", rc, eb.msg);
    } else {
      /* paths shown with control bytes made visible (escape.h) */
      char shown[LSIM_ESC_SIZE(1300)];
      lsim__cmp_print(stdout, &sc, rows, n);
      printf("  databases   %s/{", lsim_console_str(shown, sizeof shown, dir));
      for (int i = 0; i < n; i++)
        printf("%s%s", i ? "," : "", names[i]);
      printf("}.db\n  csv         %s\n",
             lsim_console_str(shown, sizeof shown, csv));
      if (png[0] && all) /* only files that are whole and in place */
        printf("  plots       %s/compare-{service,ttft,service-time,gap,"
               "residency,starvation}.png\n",
               lsim_console_str(shown, sizeof shown, dir));
      else if (png[0])
        printf("  plots       %s\n",
               lsim_console_str(shown, sizeof shown, png));
      if (note[0])
        printf("  plot        %s\n",
               lsim_console_str(shown, sizeof shown, note));
    }
  }
  free(service);
  return st;
}
