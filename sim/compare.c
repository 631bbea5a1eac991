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
#include "plot.h"
#include "plot_run.h"
#include "report.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "outfile.h"
#include "../engine/policy/policy.h"
#include "replay.h"
#include "runid.h"
#include "scenario.h"
#include "tenants.h"
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
      "       lorasim compare SCENARIO.json --arms ARM,ARM,... [options]\n"
      "\n"
      "Run the scenario once per scheduler (same trace, seed, eviction and\n"
      "prefetch), or once per arm (a scheduler with its own eviction and\n"
      "prefetch), each into its own SQLite database, then print one table\n"
      "and write it as CSV beside the databases, with gnuplot figures (PNG\n"
      "and SVG): TTFT CDF, per-tenant completed service (final and over\n"
      "time), service gap over time, resident adapters and loads over\n"
      "time, starvation intervals per arm and per tenant, service share\n"
      "against demand share.  The databases hold the runs, their summaries, requests\n"
      "and starvation intervals; --full-log also writes every event and\n"
      "iteration row (as `lorasim replay` does), which is several times\n"
      "slower on long traces.\n"
      "\n"
      "options:\n"
      "  --schedulers LIST  comma-separated scheduler names (at most 16,\n"
      "                     no repeats); files DIR/SCHEDULER.*\n"
      "  --arms LIST        comma-separated arms SCHED[:EVICT[:PREFETCH]]\n"
      "                     (at most 16, no two the same run); a part\n"
      "                     left out comes from --evict/--prefetch or the\n"
      "                     scenario; files DIR/SCHED-EVICT-PREFETCH.*\n"
      "                     e.g. resident_greedy:lru:none,deficit_aging:lru:\n"
      "                     age_triggered (one of the two lists is required)\n"
      "  --evict NAME       override the eviction policy (of every arm\n"
      "                     that names none)\n"
      "  --prefetch NAME    override the prefetch policy (likewise)\n"
      "  --seed N           override the scenario seed\n"
      "  --out DIR          output directory (created if missing, in a\n"
      "                     directory that exists); default\n"
      "                     results/compare-NAME\n"
      "  --no-plots         do not draw the figures (data files kept)\n"
      "  --full-log         also log every event and iteration row\n"
      "  --set PATH=VALUE   set one scenario key before validation (as\n"
      "                     replay --set); repeatable\n"
      "  --execute MODE     adapters (default) or full, as replay --execute\n"
      "  --clock CLOCK      model (default) or measured (the backend's\n"
      "                     times drive every arm's clock; needs $.backend\n"
      "                     cpu_ref or cuda, e.g. --set backend=cpu_ref)\n"
      "  --quiet            no progress line per arm on stderr\n"
      "  -h, --help         this text\n"
      "\n"
      "files: DIR/SCHEDULER.db (--arms: DIR/SCHED-EVICT-PREFETCH.db),\n"
      ".prom and .json (the JSON summary) per run, DIR/compare.csv (one\n"
      "row per run and tenant, then the run's all-tenants row),\n"
      "DIR/compare-*.dat, and\n"      "DIR/compare-{service,ttft,service-time,gap,residency,starvation,\n"
      "tenant-starvation,share}.{png,svg} drawn by DIR/compare-plots.gp\n"
      "(cd DIR && gnuplot compare-plots.gp draws them again)\n"
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

/* One arm of the comparison: the policies of one run.  With --schedulers
** the label and the file stem are the scheduler's name (the outputs of
** that shorthand are what they always were); with --arms the label is the
** whole triple "sched:evict:prefetch" and the stem "sched-evict-prefetch".
** Registered policy names are [a-z0-9_], so neither holds a separator of
** the other and a stem is a safe file name; distinct arms have distinct
** stems (checked anyway). */
typedef struct lsim__cmp_arm {
  char sched[LSIM_NAME_MAX], evict[LSIM_NAME_MAX], prefetch[LSIM_NAME_MAX];
  char label[3 * LSIM_NAME_MAX];
  char stem[3 * LSIM_NAME_MAX];
} lsim__cmp_arm;

/* "a, b, c": the registered names, for a message. */
static const char *lsim__cmp_known(char *out, size_t size,
                                   const char *const *n) {
  size_t used = 0;
  out[0] = 0;
  for (int i = 0; n[i] && used < size; i++)
    used += (size_t)snprintf(out + used, size - used, "%s%s", i ? ", " : "",
                             n[i]);
  return out;
}

/* Check one part of an arm against its registry; -1 with the message. */
static int lsim__cmp_part(const char *opt, const char *arm, const char *kind,
                          const char *name, int found,
                          const char *const *known, lsim_errbuf *eb) {
  char list[512];
  if (!*name) {
    lsim_fail(eb, LSIM_E_USAGE, "%s: empty %s name in '%s'", opt, kind, arm);
    return -1;
  }
  if (!found) {
    lsim_fail(eb, LSIM_E_SCN_POLICY,
              "%s: unknown %s '%s' (known: %s)", opt, kind, name,
              lsim__cmp_known(list, sizeof list, known));
    return -1;
  }
  return 0;
}

/*
** Split the comma list into arms[] and check every name against the
** registries; -1 with a message in eb on an empty or malformed arm, an
** unknown name or too many arms.  triples 0 (--schedulers): each entry is
** a scheduler name alone.  triples 1 (--arms): SCHED[:EVICT[:PREFETCH]];
** a part left out stays "" for lsim__cmp_complete.  buf is cut up.
*/
static int lsim__cmp_split(char *buf, int triples, lsim__cmp_arm *arms,
                           int *n, lsim_errbuf *eb) {
  const char *opt = triples ? "--arms" : "--schedulers";
  *n = 0;
  for (char *p = buf;;) {
    char *comma = strchr(p, ',');
    if (comma)
      *comma = 0;
    if (!*p) {
      lsim_fail(eb, LSIM_E_USAGE, "%s: empty %s in the list", opt,
                triples ? "arm" : "name");
      return -1;
    }
    if (*n == LSIM__CMP_MAX) {
      lsim_fail(eb, LSIM_E_USAGE, "%s: at most %d %s", opt, LSIM__CMP_MAX,
                triples ? "arms" : "names");
      return -1;
    }
    lsim__cmp_arm *a = &arms[*n];
    memset(a, 0, sizeof *a);
    char *part[3] = {p, NULL, NULL};
    int np = 1;
    if (triples)
      for (char *c = p; *c; c++)
        if (*c == ':') {
          if (np == 3) {
            lsim_fail(eb, LSIM_E_USAGE,
                      "--arms: '%s': an arm is SCHEDULER[:EVICT[:PREFETCH]]",
                      p);
            return -1;
          }
          part[np++] = c + 1;
        }
    char arm[3 * LSIM_NAME_MAX + 8]; /* the arm as given, for messages */
    snprintf(arm, sizeof arm, "%.*s", (int)sizeof arm - 1, p);
    for (int k = 1; k < np; k++)
      part[k][-1] = 0;
    char *dst[3] = {a->sched, a->evict, a->prefetch};
    for (int k = 0; k < np; k++) {
      if (strlen(part[k]) >= LSIM_NAME_MAX) {
        lsim_fail(eb, LSIM_E_USAGE, "%s: name too long in '%s'", opt, arm);
        return -1;
      }
      snprintf(dst[k], LSIM_NAME_MAX, "%s", part[k]);
    }
    if (lsim__cmp_part(opt, arm, "scheduler", a->sched,
                       lsim_sched_find(a->sched) != NULL, lsim_sched_names(),
                       eb) ||
        (np > 1 &&
         lsim__cmp_part(opt, arm, "eviction policy", a->evict,
                        lsim_evict_find(a->evict) != NULL,
                        lsim_evict_names(), eb)) ||
        (np > 2 &&
         lsim__cmp_part(opt, arm, "prefetch policy", a->prefetch,
                        lsim_prefetch_find(a->prefetch) != NULL,
                        lsim_prefetch_names(), eb)))
      return -1;
    if (!triples) /* the shorthand: a name once, as before */
      for (int i = 0; i < *n; i++)
        if (strcmp(arms[i].sched, a->sched) == 0) {
          lsim_fail(eb, LSIM_E_USAGE, "--schedulers: '%s' named twice",
                    a->sched);
          return -1;
        }
    (*n)++;
    if (!comma)
      return 0;
    p = comma + 1;
  }
}

/* Fill the parts an arm left out from the scenario (whose evict and
** prefetch already carry --evict/--prefetch), then make each label and
** file stem; -1 when two arms are the same triple. */
static int lsim__cmp_complete(lsim__cmp_arm *arms, int n, int triples,
                              const lsim_scenario *sc, lsim_errbuf *eb) {
  for (int i = 0; i < n; i++) {
    lsim__cmp_arm *a = &arms[i];
    if (!a->evict[0])
      snprintf(a->evict, sizeof a->evict, "%s", sc->evict);
    if (!a->prefetch[0])
      snprintf(a->prefetch, sizeof a->prefetch, "%s", sc->prefetch);
    if (triples) {
      snprintf(a->label, sizeof a->label, "%s:%s:%s", a->sched, a->evict,
               a->prefetch);
      snprintf(a->stem, sizeof a->stem, "%s-%s-%s", a->sched, a->evict,
               a->prefetch);
    } else {
      snprintf(a->label, sizeof a->label, "%s", a->sched);
      snprintf(a->stem, sizeof a->stem, "%s", a->sched);
    }
    for (int k = 0; k < i; k++)
      if (strcmp(arms[k].label, a->label) == 0 ||
          strcmp(arms[k].stem, a->stem) == 0) {
        lsim_fail(eb, LSIM_E_USAGE,
                  "--arms: arms %d and %d are the same run (%s)", k + 1,
                  i + 1, a->label);
        return -1;
      }
  }
  return 0;
}

typedef struct lsim__cmp_row {
  const char *sched;    /* the arm's policies */
  const char *evict, *prefetch;
  const char *label;    /* the arm in tables and plots (lsim__cmp_arm) */
  lsim_summary s;
  int64_t *service; /* ntenants */
  lsim_tenant_fig *tenants; /* ntenants + 1: the tenants, then all */
} lsim__cmp_row;

/* runs_summary keys the CSV leaves out of the all-tenants row because a
** tenant column of the same figure is there (sim/tenants.h). */
static int lsim__cmp_dup(const char *key) {
  static const char *const alias[] = {"requests_arrived", "requests_completed",
                                      "requests_rejected",
                                      "requests_unfinished", NULL};
  for (int k = 0; k < LSIM_TF_N; k++)
    if (strcmp(key, lsim_tenants_key(k)) == 0)
      return 1;
  for (int i = 0; alias[i]; i++)
    if (strcmp(key, alias[i]) == 0)
      return 1;
  return 0;
}

/* compare.csv in long form: one row per arm and tenant, then the arm's
** all-tenants row (tenant empty, name "all"), each with every tenant
** figure (last); the all row also carries the run's figures (runs_summary
** keys, and events), empty on the tenant rows.  Arms are keyed by their
** label. */
static lsim_err lsim__cmp_csv(const char *path, const lsim_scenario *sc,
                              const lsim__cmp_row *rows, int n,
                              lsim_errbuf *eb) {
  lsim_outfile of;
  lsim_err rc = lsim_out_open(&of, path, eb);
  if (rc)
    return rc;
  FILE *f = of.fp;
  lsim_figure kv[LSIM_REPORT_FIGURES_MAX];
  int nkv = n > 0 ? lsim_report_figures(&rows[0].s, kv,
                                        LSIM_REPORT_FIGURES_MAX)
                  : 0;
  /* the run's columns before the tenant figures: a record's last field
  ** is then never empty (starved_intervals is a count), which a reader
  ** that stops at the line end (lsim_csv_next) counts right */
  fputs("arm,scheduler,evict,prefetch,seed,tenant,name", f);
  for (int j = 0; j < nkv; j++)
    if (!lsim__cmp_dup(kv[j].k))
      fprintf(f, ",%s", kv[j].k);
  fputs(",events", f);
  for (int k = 0; k < LSIM_TF_N; k++)
    fprintf(f, ",%s", lsim_tenants_key(k));
  fputc('\n', f);
  for (int i = 0; i < n; i++) {
    const lsim_summary *s = &rows[i].s;
    char q_arm[LSIM_ESC_SIZE(3 * LSIM_NAME_MAX)],
        q_sched[LSIM_ESC_SIZE(LSIM_NAME_MAX)],
        q_evict[LSIM_ESC_SIZE(LSIM_NAME_MAX)],
        q_prefetch[LSIM_ESC_SIZE(LSIM_NAME_MAX)],
        q_name[LSIM_ESC_SIZE(LSIM_NAME_MAX)], num[64];
    /* one RFC 4180 field whatever a name holds (escape.h) */
    lsim_csv_field(q_arm, sizeof q_arm, rows[i].label);
    lsim_csv_field(q_sched, sizeof q_sched, rows[i].sched);
    lsim_csv_field(q_evict, sizeof q_evict, rows[i].evict);
    lsim_csv_field(q_prefetch, sizeof q_prefetch, rows[i].prefetch);
    nkv = lsim_report_figures(s, kv, LSIM_REPORT_FIGURES_MAX);
    for (int r = 0; r <= sc->ntenants; r++) {
      const lsim_tenant_fig *t = &rows[i].tenants[r];
      lsim_csv_field(q_name, sizeof q_name, lsim_tenants_name(sc, t));
      fprintf(f, "%s,%s,%s,%s,%llu,", q_arm, q_sched, q_evict, q_prefetch,
              (unsigned long long)sc->seed);
      if (t->tenant >= 0)
        fprintf(f, "%d", t->tenant);
      fprintf(f, ",%s", q_name);
      int all = t->tenant < 0;
      for (int j = 0; j < nkv; j++)
        if (!lsim__cmp_dup(kv[j].k))
          fprintf(f, ",%s",
                  all ? lsim_tenants_num(num, sizeof num,
                                         kv[j].v < 0 ? NAN : kv[j].v)
                      : "");
      fputc(',', f);
      if (all)
        fprintf(f, "%lld", (long long)s->events);
      for (int k = 0; k < LSIM_TF_N; k++)
        fprintf(f, ",%s", lsim_tenants_num(num, sizeof num, t->v[k]));
      fputc('\n', f);
    }
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

static void lsim__cmp_print(FILE *f, const lsim_scenario *sc, int triples,
                            const lsim__cmp_row *rows, int n) {
  char shown[LSIM_ESC_SIZE(LSIM_NAME_MAX)];
  /* --arms: each row names its own policies; the first column is as wide
  ** as the longest label */
  int lw = 16;
  for (int i = 0; triples && i < n; i++)
    if ((int)strlen(rows[i].label) > lw)
      lw = (int)strlen(rows[i].label);
  if (triples)
    fprintf(f, "lorasim compare: %s (seed %llu, %d arms "
               "scheduler:evict:prefetch, %d worker%s)\n",
            lsim_console_str(shown, sizeof shown, sc->name),
            (unsigned long long)sc->seed, n, sc->workers,
            sc->workers == 1 ? "" : "s");
  else
    fprintf(f, "lorasim compare: %s (seed %llu, evict %s, prefetch %s, "
               "%d worker%s)\n",
            lsim_console_str(shown, sizeof shown, sc->name),
            (unsigned long long)sc->seed, sc->evict, sc->prefetch,
            sc->workers, sc->workers == 1 ? "" : "s");
  fprintf(f, "%-*s %9s %8s %10s %9s %9s %8s %8s %6s %6s %6s %8s %5s %5s",
          lw, triples ? "arm" : "scheduler", "completed", "rejected", "tok/s", "ttft_p50",
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
    fprintf(f, "%-*s %9lld %8lld", lw, rows[i].label, (long long)s->completed,
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

/* Per run and tenant (the first LSIM__CMP_TENANT_COLS; the CSV has them
** all), then the run's all row: what each tenant got and waited for. */
static void lsim__cmp_print_tenants(FILE *f, const lsim_scenario *sc,
                                    const lsim__cmp_row *rows, int n) {
  char shown[LSIM_ESC_SIZE(LSIM_NAME_MAX)],
      arm[LSIM_ESC_SIZE(3 * LSIM_NAME_MAX)];
  int lw = 16; /* as wide as the longest label, like the table above */
  for (int i = 0; i < n; i++)
    if ((int)strlen(rows[i].label) > lw)
      lw = (int)strlen(rows[i].label);
  int nt = sc->ntenants < LSIM__CMP_TENANT_COLS ? sc->ntenants
                                                 : LSIM__CMP_TENANT_COLS;
  fprintf(f, "%-*s %-12s %9s %9s %6s %6s %8s %8s %9s %4s\n", lw, "per tenant",
          "tenant", "ttft_p50", "ttft_p99", "svc%", "dem%", "load_ms",
          "cold+ms", "unserved", "st");
  for (int i = 0; i < n; i++)
    for (int r = 0; r <= nt; r++) {
      const lsim_tenant_fig *t =
          &rows[i].tenants[r < nt ? r : sc->ntenants];
      const double *v = t->v;
      fprintf(f, "%-*s %-12.12s", lw,
              lsim_console_str(arm, sizeof arm, rows[i].label),
              lsim_console_str(shown, sizeof shown, lsim_tenants_name(sc, t)));
      lsim__cmp_cell(f, isnan(v[LSIM_TF_TTFT_P50]) ? -1 : v[LSIM_TF_TTFT_P50],
                     9, " %*.2f");
      lsim__cmp_cell(f, isnan(v[LSIM_TF_TTFT_P99]) ? -1 : v[LSIM_TF_TTFT_P99],
                     9, " %*.2f");
      lsim__cmp_cell(f, isnan(v[LSIM_TF_SERVICE_SHARE])
                            ? -1
                            : 100 * v[LSIM_TF_SERVICE_SHARE],
                     6, " %*.1f");
      lsim__cmp_cell(f, isnan(v[LSIM_TF_DEMAND_SHARE])
                            ? -1
                            : 100 * v[LSIM_TF_DEMAND_SHARE],
                     6, " %*.1f");
      lsim__cmp_cell(f, isnan(v[LSIM_TF_LOAD_WAIT_MEAN])
                            ? -1
                            : v[LSIM_TF_LOAD_WAIT_MEAN],
                     8, " %*.2f");
      if (isnan(v[LSIM_TF_COLD_TTFT_COST]))
        fprintf(f, " %8s", "-");
      else
        fprintf(f, " %8.2f", v[LSIM_TF_COLD_TTFT_COST]);
      fprintf(f, " %9.1f %4.0f\n", v[LSIM_TF_LONGEST_STARVED],
              v[LSIM_TF_STARVED_INTERVALS]);
    }
  fputs("(svc%/dem%: share of completed service / of demand; load_ms: mean "
        "wait for the adapter's load;\n cold+ms: p50 TTFT cold minus warm, "
        "same tenant and window; unserved: longest wait with no\n service, "
        "ms; st: starved intervals; all tenants: compare.csv)\n",
        f);
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

/* Starved intervals of run `idx` as gnuplot vectors: x y dx dy load;
** load intervals (load 1) sit above the run's line, service intervals
** (load 0) below it (the plot's y axis grows downwards). */
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
    int load = k && strcmp(k, "load") == 0;
    double y = idx + (load ? -0.15 : 0.15); /* the y axis grows downwards */
    double a = (double)sqlite3_column_int64(st, 1) * s_per_tick,
           b = (double)sqlite3_column_int64(st, 2) * s_per_tick;
    fprintf(f, "%.6f %.3f %.6f 0 %d\n", a, y, b - a, load);
    rows++;
  }
  if (!rows)
    fprintf(f, "0 %d 0 0 NaN\n", idx);
  fputs("\n\n", f);
done:
  sqlite3_finalize(st);
  sqlite3_close(h);
  return rc;
}


/* Service-starved intervals of run `idx` per tenant: tenant_row start_s
** end_s; a NaN row when there is none (the block must exist). */
static lsim_err lsim__cmp_tenant_starved(FILE *f, const char *dbpath,
                                         int ntenants, double s_per_tick,
                                         lsim_errbuf *eb) {
  sqlite3 *h = NULL;
  sqlite3_stmt *st = NULL;
  lsim_err rc = 0;
  if (sqlite3_open_v2(dbpath, &h, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(h,
                         "SELECT entity, start_tick, end_tick FROM starvation "
                         "WHERE starved = 1 AND kind = 'service' ORDER BY "
                         "entity, start_tick",
                         -1, &st, NULL) != SQLITE_OK) {
    rc = lsim_fail(eb, LSIM_E_DB, "%s: %s", dbpath, sqlite3_errmsg(h));
    goto done;
  }
  int rows = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    int t = sqlite3_column_int(st, 0);
    if (t < 0 || t >= ntenants)
      continue;
    fprintf(f, "%d %.6f %.6f\n", t,
            (double)sqlite3_column_int64(st, 1) * s_per_tick,
            (double)sqlite3_column_int64(st, 2) * s_per_tick);
    rows++;
  }
  if (!rows)
    fputs("NaN NaN NaN\n", f);
  fputs("\n\n", f);
done:
  sqlite3_finalize(st);
  sqlite3_close(h);
  return rc;
}

/* Demand and service shares of run `idx` per tenant (report.h). */
static lsim_err lsim__cmp_share(FILE *f, const char *dbpath,
                                const lsim_scenario *sc,
                                const int64_t *service, lsim_errbuf *eb) {
  sqlite3 *h = NULL;
  lsim_err rc = 0;
  int64_t *demand = calloc((size_t)(sc->ntenants ? sc->ntenants : 1),
                           sizeof *demand);
  if (!demand)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory for the share plot");
  if (sqlite3_open_v2(dbpath, &h, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
    rc = lsim_fail(eb, LSIM_E_DB, "%s: %s", dbpath, sqlite3_errmsg(h));
  else
    rc = lsim_plot_demand(h, sc, demand, eb);
  if (!rc) {
    lsim_report_share_rows(f, sc, demand, service);
    fputs("\n\n", f);
  }
  sqlite3_close(h);
  free(demand);
  return rc;
}

/* ---- the figures ----------------------------------------------------------- */

/* The final completed service per tenant and arm, for the histogram: a
** header comment, then gnuplot column heads (arm, tenants), one row per
** arm. */
static lsim_err lsim__cmp_service_dat(const char *dir,
                                      const lsim_scenario *sc,
                                      const lsim__cmp_row *rows, int n,
                                      lsim_errbuf *eb) {
  char dat[1100];
  snprintf(dat, sizeof dat, "%s/compare-service.dat", dir);
  lsim_outfile of;
  lsim_err rc = lsim_out_open(&of, dat, eb);
  if (rc)
    return rc;
  FILE *f = of.fp;
  fputs("# completed service per tenant (columns) of each arm (rows); the "
        "next line holds the column heads\n", f);
  fprintf(f, "arm");
  for (int t = 0; t < sc->ntenants; t++) { /* gnuplot columnheads */
    char tok[LSIM_ESC_SIZE(LSIM_NAME_MAX)];
    lsim_dat_token(tok, sizeof tok, sc->tenants[t].name);
    fprintf(f, " %s", tok);
  }
  fputc('\n', f);
  for (int i = 0; i < n; i++) {
    char tok[LSIM_ESC_SIZE(3 * LSIM_NAME_MAX)];
    lsim_dat_token(tok, sizeof tok, rows[i].label);
    fprintf(f, "%s", tok);
    for (int t = 0; t < sc->ntenants; t++)
      fprintf(f, " %lld", (long long)rows[i].service[t]);
    fputc('\n', f);
  }
  return lsim_out_commit(&of, eb);
}

/* The figures, in the order of their keys. */
enum { LSIM__F_SERVICE, LSIM__F_TTFT, LSIM__F_STIME, LSIM__F_GAP,
       LSIM__F_RES, LSIM__F_STARVED, LSIM__F_TSTARVED, LSIM__F_SHARE,
       LSIM__F_N };
static const char *const lsim__cmp_fig[LSIM__F_N] = {
    "service", "ttft", "service-time", "gap", "residency", "starvation",
    "tenant-starvation", "share"};

/* Panels of at most LSIM_PLOT_SERIES arms: chunk p holds arms
** [p*S, min(n, (p+1)*S)); an arm's colour is the same in every figure. */
#define LSIM__CHUNKS(n) (((n) + LSIM_PLOT_SERIES - 1) / LSIM_PLOT_SERIES)
#define LSIM__LC(i) ((i) % LSIM_PLOT_SERIES + 1)

/* Rows of the arms' key below a panel pw pixels wide: m entries of at
** most lw characters (about 7 px each at 10 pt) and their samples. */
static int lsim__cmp_keyrows(int pw, int lw, int m) {
  int per = (pw - 60) / (lw * 7 + 90);
  if (per < 1)
    per = 1;
  return (m + per - 1) / per;
}

/* The arms' key below every panel, with a bottom margin that holds kr
** rows of it: the panels of a figure keep one height and no key covers a
** line. */
static void lsim__cmp_key(FILE *f, int kr) {
  fprintf(f, "set key below\nset bmargin %d\n", 4 + kr);
}

/* Open a figure's drawing on terminal t: the canvas for np panels and,
** when there are several, the multiplot with the title; else the title. */
static void lsim__cmp_canvas(lsim_plotset *ps, int fig, int t, int np,
                             int min_h, const char *title, int lw, int m) {
  int rows, cols, w, h;
  lsim_plot_layout(np, &rows, &cols, &w, &h);
  int kr = m ? lsim__cmp_keyrows(w / cols, lw, m) : 0;
  h += rows * kr * 17;
  if (h < min_h)
    h = min_h;
  lsim_plot_term(ps, fig, t, w, h);
  if (kr) /* m > 0: the panels' series are arms, keyed below */
    lsim__cmp_key(ps->f, kr);
  if (np > 1)
    fprintf(ps->f, "set multiplot layout %d,%d title %s\n", rows, cols,
            title);
  else
    fprintf(ps->f, "set title %s\n", title);
}

/* The title of panel p of arms: "arms 1-6", or none for one panel. */
static void lsim__cmp_panel(FILE *f, int np, int p, int n, const char *what) {
  if (np <= 1)
    return;
  int lo = p * LSIM_PLOT_SERIES, hi = lo + LSIM_PLOT_SERIES;
  fprintf(f, "set title '%s%sarms %d-%d'\n", what ? what : "",
          what ? ", " : "", lo + 1, hi < n ? hi : n);
}

/*
** Every figure of the comparison (docs/SCHEDULING.md), drawn as PNG and
** SVG by one script, DIR/compare-plots.gp, from the .dat files beside it.
** *all is set to 1 once every figure is whole and in place; a gnuplot that
** failed is a note, a write that failed an error.
*/
static lsim_err lsim__cmp_plots(const char *dir, const lsim_scenario *sc,
                                int triples, const lsim__cmp_row *rows,
                                int n, double end_s, int64_t nstarved,
                                char *note, size_t note_n, int *all,
                                lsim_errbuf *eb) {
  *all = 0;
  char qd[LSIM_ESC_SIZE(1100)];
  if (lsim_gp_path(qd, sizeof qd, dir) < 0) {
    snprintf(note, note_n, "skipped: the output path has control "
                           "characters");
    return 0;
  }
  if (!lsim_gnuplot_available()) {
    snprintf(note, note_n, "skipped: gnuplot not found (data in %s)", dir);
    return 0;
  }
  lsim_plotset *ps;
  lsim_err rc = lsim_plot_begin(&ps, dir, "compare-plots.gp", eb);
  if (rc)
    return rc;
  int fig[LSIM__F_N];
  for (int k = 0; k < LSIM__F_N; k++) {
    char name[64], key[32];
    snprintf(name, sizeof name, "compare-%s", lsim__cmp_fig[k]);
    snprintf(key, sizeof key, "%s", lsim__cmp_fig[k]);
    for (char *c = key; *c; c++)
      if (*c == '-')
        *c = '_';
    if ((fig[k] = lsim_plot_figure(ps, name, key, eb)) < 0) {
      lsim_plot_abort(ps);
      return eb->code;
    }
  }
  FILE *f = ps->f;
  const int nt = sc->ntenants, na = LSIM__CHUNKS(n);
  const int m6 = n < LSIM_PLOT_SERIES ? n : LSIM_PLOT_SERIES;
  int lw = 0; /* the longest arm label */
  for (int i = 0; i < n; i++)
    if ((int)strlen(rows[i].label) > lw)
      lw = (int)strlen(rows[i].label);
  char extra[3 * LSIM_NAME_MAX + 64], t1[LSIM_ESC_SIZE(4 * LSIM_PATH_MAX)];
  char q[LSIM_ESC_SIZE(3 * LSIM_NAME_MAX + 8)];
  if (triples)
    snprintf(extra, sizeof extra, "seed %llu", (unsigned long long)sc->seed);
  else
    snprintf(extra, sizeof extra, "evict %s, prefetch %s, seed %llu",
             rows[0].evict, rows[0].prefetch, (unsigned long long)sc->seed);
#define TITLE(what) lsim_plot_title(t1, sizeof t1, (what), sc, extra)
#define ARM(i) lsim_plot_str(q, sizeof q, rows[i].label)

  /* completed service: clusters of arms, at most six tenants a panel */
  int ntp = LSIM__CHUNKS(nt);
  for (int t = 0; t < LSIM_PLOT_TERMS; t++) {
    lsim__cmp_canvas(ps, fig[LSIM__F_SERVICE], t, ntp, 0,
                     TITLE("Completed service per tenant"), lw, 0);
    fputs("set ylabel 'completed service (weighted tokens)'\n"
          "set style data histograms\nset style histogram cluster gap 1\n"
          "set style fill solid 0.8 border -1\nset boxwidth 0.9\n"
          "set key top right\nset grid ytics\nset yrange [0:*]\n"
          "set offsets 0, 0, graph 0.12, 0\n"
          "set key autotitle columnhead\n", f);
    /* long arm labels slant so that neighbours do not overlap */
    fputs(lw > 16 ? "set xtics nomirror rotate by -20 left\nset bmargin 6\n"
                  : "set xtics nomirror\n", f);
    for (int p = 0; p < ntp; p++) {
      int lo = p * LSIM_PLOT_SERIES, hi = lo + LSIM_PLOT_SERIES;
      if (hi > nt)
        hi = nt;
      if (ntp > 1)
        fprintf(f, "set title 'tenants %d-%d'\n", lo + 1, hi);
      fputs("plot ", f);
      for (int k = lo; k < hi; k++)
        fprintf(f, "%s'compare-service.dat' using %d%s lc %d",
                k > lo ? ", " : "", k + 2, k > lo ? "" : ":xtic(1)",
                k - lo + 1);
      fputc('\n', f);
    }
    if (ntp > 1)
      fputs("unset multiplot\n", f);
  }

  /* TTFT CDF: a line per arm */
  for (int t = 0; t < LSIM_PLOT_TERMS; t++) {
    lsim__cmp_canvas(ps, fig[LSIM__F_TTFT], t, na, 0,
                     TITLE("TTFT CDF of completed requests"), lw, m6);
    fputs("set grid\nset logscale x\n"
          "set xlabel 'TTFT (simulated ms, log scale)'\n"
          "set ylabel 'fraction of completed requests'\nset yrange [0:1]\n",
          f);
    for (int p = 0; p < na; p++) {
      lsim__cmp_panel(f, na, p, n, NULL);
      fputs("plot ", f);
      for (int i = p * LSIM_PLOT_SERIES; i < n && i < (p + 1) * LSIM_PLOT_SERIES; i++)
        fprintf(f, "%s'compare-ttft.dat' index %d using 1:2 with steps lw 2 "
                   "lc %d title %s",
                i % LSIM_PLOT_SERIES ? ", " : "", i, LSIM__LC(i), ARM(i));
      fputc('\n', f);
    }
    if (na > 1)
      fputs("unset multiplot\n", f);
  }

  /* cumulative service over time: a panel per tenant (the first six) and
  ** chunk of arms, a line per arm */
  int nts = nt < LSIM_PLOT_SERIES ? nt : LSIM_PLOT_SERIES;
  for (int t = 0; t < LSIM_PLOT_TERMS; t++) {
    lsim__cmp_canvas(ps, fig[LSIM__F_STIME], t, nts * na, 0,
                     TITLE(nt > nts ? "Completed service over time (first "
                                      "6 tenants)"
                                    : "Completed service over time"),
                     lw, m6);
    fputs("set grid\nset xlabel 'simulated time (s)'\n"
          "set ylabel 'cumulative completed service'\n", f);
    for (int k = 0; k < nts; k++)
      for (int p = 0; p < na; p++) {
        char tn[LSIM_ESC_SIZE(LSIM_NAME_MAX + 64)], w[LSIM_NAME_MAX + 64];
        if (nts * na > 1) {
          if (na > 1)
            snprintf(w, sizeof w, "tenant %s, arms %d-%d",
                     sc->tenants[k].name, p * LSIM_PLOT_SERIES + 1,
                     (p + 1) * LSIM_PLOT_SERIES < n
                         ? (p + 1) * LSIM_PLOT_SERIES
                         : n);
          else
            snprintf(w, sizeof w, "tenant %s", sc->tenants[k].name);
          fprintf(f, "set title %s\n", lsim_plot_str(tn, sizeof tn, w));
        }
        fputs("plot ", f);
        for (int i = p * LSIM_PLOT_SERIES;
             i < n && i < (p + 1) * LSIM_PLOT_SERIES; i++)
          fprintf(f, "%s'compare-timeline.dat' index %d using 1:%d with "
                     "lines lw 2 lc %d title %s",
                  i % LSIM_PLOT_SERIES ? ", " : "", i, k + 2, LSIM__LC(i),
                  ARM(i));
        fputc('\n', f);
      }
    if (nts * na > 1)
      fputs("unset multiplot\n", f);
  }

  /* service gap over time: a line per arm */
  for (int t = 0; t < LSIM_PLOT_TERMS; t++) {
    lsim__cmp_canvas(ps, fig[LSIM__F_GAP], t, na, 0,
                     TITLE("Service gap over time (max - min cumulative "
                           "service over tenants that have arrived)"),
                     lw, m6);
    fputs("set grid\nset xlabel 'simulated time (s)'\n"
          "set ylabel 'service gap'\n", f);
    for (int p = 0; p < na; p++) {
      lsim__cmp_panel(f, na, p, n, NULL);
      fputs("plot ", f);
      for (int i = p * LSIM_PLOT_SERIES; i < n && i < (p + 1) * LSIM_PLOT_SERIES; i++)
        fprintf(f, "%s'compare-timeline.dat' index %d using 1:%d with lines "
                   "lw 2 lc %d title %s",
                i % LSIM_PLOT_SERIES ? ", " : "", i, nt + 2, LSIM__LC(i),
                ARM(i));
      fputc('\n', f);
    }
    if (na > 1)
      fputs("unset multiplot\n", f);
  }

  /* residency and loads: two rows of panels, a column per chunk */
  for (int t = 0; t < LSIM_PLOT_TERMS; t++) {
    int w = na == 1 ? 900 : 520 * na, kr = lsim__cmp_keyrows(w / na, lw, m6);
    lsim_plot_term(ps, fig[LSIM__F_RES], t, w, 720 + 2 * 17 * kr);
    lsim__cmp_key(f, kr);
    fprintf(f, "set multiplot layout 2,%d title %s\n", na,
            TITLE("Adapter residency and loads"));
    /* headroom above the lines for the key */
    fputs("set grid\nset xlabel 'simulated time (s)'\n", f);
    for (int r = 0; r < 2; r++)
      for (int p = 0; p < na; p++) {
        lsim__cmp_panel(f, na, p, n, NULL);
        fprintf(f, "set ylabel '%s'\nplot ",
                r ? "adapter loads per second"
                  : "resident adapters (all workers)");
        for (int i = p * LSIM_PLOT_SERIES;
             i < n && i < (p + 1) * LSIM_PLOT_SERIES; i++)
          fprintf(f, "%s'compare-timeline.dat' index %d using 1:%d with "
                     "steps lw 2 lc %d title %s",
                  i % LSIM_PLOT_SERIES ? ", " : "", i, nt + 3 + r,
                  LSIM__LC(i), ARM(i));
        fputc('\n', f);
      }
    fputs("unset multiplot\n", f);
  }

  /* starved intervals per arm: a line per arm, a colour per kind */
  for (int t = 0; t < LSIM_PLOT_TERMS; t++) {
    int h = 150 + 40 * n;
    lsim_plot_term(ps, fig[LSIM__F_STARVED], t, 900, h < 360 ? 360 : h);
    fprintf(f, "set title %s\n",
            TITLE("Starved intervals per arm (above its line: adapter "
                  "load-starved; below: tenant service-starved)"));
    fprintf(f, "set xlabel 'simulated time (s)'\nset xrange [0:%.6f]\n"
               "set yrange [%d.6:-0.6]\nset grid xtics\nset key below\n"
               "set ytics (",
            end_s > 0 ? end_s : 1.0, n - 1);
    for (int i = 0; i < n; i++)
      fprintf(f, "%s%s %d", i ? ", " : "", ARM(i), i);
    fputs(")\n", f);
    if (!nstarved)
      fputs("set label 1 'no starved interval in any arm' at graph 0.5, "
            "graph 0.5 center\n", f);
    fputs("plot 'compare-starvation.dat' using 1:($5 == 1 ? $2 : NaN):3:4 "
          "with vectors nohead lw 6 lc rgb '#2471a3' title 'adapter "
          "load-starved', 'compare-starvation.dat' using 1:($5 == 0 ? $2 : "
          "NaN):3:4 with vectors nohead lw 6 lc rgb '#c0392b' title "
          "'tenant service-starved'\n", f);
  }

  /* service-starved intervals per tenant: a row per tenant, a bar per
  ** interval in its arm's colour (arms side by side within the row) */
  int64_t tstarved = 0;
  for (int i = 0; i < n; i++)
    tstarved += rows[i].s.service_starved;
  for (int t = 0; t < LSIM_PLOT_TERMS; t++) {
    int h = 160 + 30 * nt;
    lsim__cmp_canvas(ps, fig[LSIM__F_TSTARVED], t, na, h < 380 ? 380 : h,
                     TITLE("Service-starved intervals per tenant"), lw, m6);
    fprintf(f, "set xlabel 'simulated time (s)'\nset ylabel 'tenant'\n"
               "set xrange [0:%.6f]\nset yrange [%d.5:-0.5]\n"
               "set grid xtics\nset style fill solid 0.8 border\n",
            end_s > 0 ? end_s : 1.0, nt - 1);
    fputs("set ytics (", f);
    for (int k = 0; k < nt; k++) {
      char tn[LSIM_ESC_SIZE(LSIM_NAME_MAX)];
      fprintf(f, "%s%s %d", k ? ", " : "",
              lsim_plot_str(tn, sizeof tn, sc->tenants[k].name), k);
    }
    fputs(")\n", f);
    if (!tstarved)
      fputs("set label 1 'no service-starved interval in any arm' at graph "
            "0.5, graph 0.5 center\n", f);
    for (int p = 0; p < na; p++) {
      int lo = p * LSIM_PLOT_SERIES,
          m = n - lo < LSIM_PLOT_SERIES ? n - lo : LSIM_PLOT_SERIES;
      lsim__cmp_panel(f, na, p, n, NULL);
      fputs("plot ", f);
      for (int j = 0; j < m; j++) {
        /* arm j of m takes the j-th slice of the tenant's band */
        double y0 = -0.4 + 0.8 * j / m, y1 = -0.4 + 0.8 * (j + 1) / m;
        fprintf(f, "%s'compare-tenant-starvation.dat' index %d using "
                   "(($2+$3)/2):($1+%.4f):2:3:($1+%.4f):($1+%.4f) with "
                   "boxxyerror lc %d title %s",
                j ? ", " : "", lo + j, (y0 + y1) / 2, y0, y1,
                LSIM__LC(lo + j), ARM(lo + j));
      }
      fputc('\n', f);
    }
    if (na > 1)
      fputs("unset multiplot\n", f);
  }

  /* service share against demand share: a point per tenant and arm */
  for (int t = 0; t < LSIM_PLOT_TERMS; t++) {
    int rows_, cols, w, h;
    lsim_plot_layout(na, &rows_, &cols, &w, &h);
    if (na == 1)
      w = 800, h = 680;
    int kr = lsim__cmp_keyrows(w / cols, lw, m6 + 1);
    lsim_plot_term(ps, fig[LSIM__F_SHARE], t, w, h + rows_ * kr * 17);
    lsim__cmp_key(f, kr);
    if (na > 1)
      fprintf(f, "set multiplot layout %d,%d title %s\n", rows_, cols,
              TITLE("Service share against demand share"));
    else
      fprintf(f, "set title %s\n",
              TITLE("Service share against demand share"));
    fputs("set xlabel 'demand share (weighted tokens asked for)'\n"
          "set ylabel 'completed service share'\nset xrange [0:1]\n"
          "set yrange [0:1]\nset size ratio -1\nset grid\n", f);
    for (int p = 0; p < na; p++) {
      lsim__cmp_panel(f, na, p, n, NULL);
      fputs("plot x with lines dt 2 lc rgb '#808080' title 'in proportion "
            "to demand'", f);
      for (int i = p * LSIM_PLOT_SERIES; i < n && i < (p + 1) * LSIM_PLOT_SERIES; i++)
        fprintf(f, ", 'compare-share.dat' index %d using 3:5 with points "
                   "pt %d ps 1.4 lc %d title %s",
                i, 5 + 2 * (i % 4), LSIM__LC(i), ARM(i));
      if (nt <= 12) /* names beside the first arm's points */
        fprintf(f, ", 'compare-share.dat' index %d using 3:5:1 with labels "
                   "offset char 1.2,0 left notitle",
                p * LSIM_PLOT_SERIES);
      fputc('\n', f);
    }
    if (na > 1)
      fputs("unset multiplot\n", f);
  }
#undef TITLE
#undef ARM
  return lsim_plot_finish(ps, all, note, note_n, eb);
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
    O_QUIET,
    O_ARMS,
    O_EXECUTE,
    O_CLOCK
  };
  static const struct option opts[] = {
      {"schedulers", required_argument, NULL, O_SCHEDS},
      {"arms", required_argument, NULL, O_ARMS},
      {"evict", required_argument, NULL, O_EVICT},
      {"prefetch", required_argument, NULL, O_PREFETCH},
      {"seed", required_argument, NULL, O_SEED},
      {"out", required_argument, NULL, O_OUT},
      {"no-plots", no_argument, NULL, O_NOPLOTS},
      {"full-log", no_argument, NULL, O_FULLLOG},
      {"set", required_argument, NULL, O_SET},
      {"quiet", no_argument, NULL, O_QUIET},
      {"execute", required_argument, NULL, O_EXECUTE},
      {"clock", required_argument, NULL, O_CLOCK},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  const char *scheds = NULL, *arms_s = NULL, *evict = NULL, *prefetch = NULL, *seed_s = NULL,
             *out = NULL, *execute_s = NULL, *clock_s = NULL;
  int plots = 1, full_log = 0, quiet = 0, nsets = 0, c;
  const char *sets[LSIM_SCENARIO_MAX_SETS];
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case O_SCHEDS: scheds = optarg; break;
    case O_ARMS: arms_s = optarg; break;
    case O_EVICT: evict = optarg; break;
    case O_PREFETCH: prefetch = optarg; break;
    case O_SEED: seed_s = optarg; break;
    case O_OUT: out = optarg; break;
    case O_NOPLOTS: plots = 0; break;
    case O_FULLLOG: full_log = 1; break;
    case O_QUIET: quiet = 1; break;
    case O_EXECUTE: execute_s = optarg; break;
    case O_CLOCK: clock_s = optarg; break;
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
  if (scheds && arms_s)
    return lsim_cli_fail("compare", LSIM_E_USAGE,
                         "give --arms or --schedulers, not both");
  if (!scheds && !arms_s)
    return lsim_cli_fail("compare", LSIM_E_USAGE,
                         "--schedulers is required (e.g. --schedulers "
                         "fcfs,deficit_aging), or --arms (e.g. --arms "
                         "resident_greedy:lru:none,deficit_aging:lru:"
                         "age_triggered)");
  const int triples = arms_s != NULL;
  const char *list_s = triples ? arms_s : scheds;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  char list[1024];
  static lsim__cmp_arm arms[LSIM__CMP_MAX];
  int n = 0;
  if (strlen(list_s) >= sizeof list)
    return lsim_cli_fail("compare", LSIM_E_USAGE,
                         triples ? "--arms: list too long"
                                 : "--schedulers: list too long");
  snprintf(list, sizeof list, "%s", list_s);
  if (lsim__cmp_split(list, triples, arms, &n, &eb))
    return lsim_cli_fail("compare", eb.code, eb.msg);
  if ((evict && lsim__cmp_part("--evict", evict, "eviction policy", evict,
                               lsim_evict_find(evict) != NULL,
                               lsim_evict_names(), &eb)) ||
      (prefetch && lsim__cmp_part("--prefetch", prefetch, "prefetch policy",
                                  prefetch, lsim_prefetch_find(prefetch) != NULL,
                                  lsim_prefetch_names(), &eb)))
    return lsim_cli_fail("compare", eb.code, eb.msg);
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
  int execute = -1, clock = -1;
  lsim_err rc = lsim_cli_modes(execute_s, clock_s, &execute, &clock, &eb);
  if (rc)
    return lsim_cli_fail("compare", rc, eb.msg);
  const lsim_scenario_src src = {NULL, nsets, sets};
  rc = lsim_scenario_load_src(&sc, argv[optind], &src, &eb);
  if (rc) {
    lsim_cli_fail("compare", rc, eb.msg);
    return 2;
  }
  if (seed_s)
    sc.seed = seed;
  if (execute >= 0)
    sc.execute = execute;
  if (clock >= 0)
    sc.clock = clock;
  /* refused before the output folder is made (exit 2) */
  if ((rc = lsim_replay_check_modes(&sc, &eb)))
    return lsim_cli_fail("compare", rc, eb.msg);
  if (evict)
    snprintf(sc.evict, sizeof sc.evict, "%s", evict);
  if (prefetch)
    snprintf(sc.prefetch, sizeof sc.prefetch, "%s", prefetch);
  if (lsim__cmp_complete(arms, n, triples, &sc, &eb))
    return lsim_cli_fail("compare", eb.code, eb.msg);

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
  /* DIR is made when missing, its parent never: a mistyped --out is
  ** reported (E_OUT_NO_DIR, exit 2) before any run; the default's
  ** results/ is made like replay's */
  if ((!out && (rc = lsim_out_mkdir("results", &eb))) ||
      (rc = lsim_out_mkdir(dir, &eb)))
    return lsim_cli_fail("compare", rc, eb.msg);

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
  lsim_tenant_fig *tfigs =
      calloc((size_t)n * ((size_t)sc.ntenants + 1), sizeof *tfigs);
  if (!service || !tfigs) {
    free(service);
    free(tfigs);
    return lsim_cli_fail("compare", LSIM_E_NOMEM, "out of memory");
  }
  /* the series, written as the runs go (a gnuplot data block per arm, in
  ** the order given), go into place at the end whole (sim/outfile.h);
  ** each file opens with a line naming its columns */
  enum { D_TL, D_TTFT, D_SV, D_TSV, D_SHARE, D_N };
  static const char *const dname[D_N] = {
      "compare-timeline.dat", "compare-ttft.dat", "compare-starvation.dat",
      "compare-tenant-starvation.dat", "compare-share.dat"};
  static const char *const dhead[D_N] = {
      "# time_s, the cumulative completed service of each tenant (scenario "
      "order), service_gap resident_adapters loads_per_s",
      "# ttft_ms cumulative_fraction",
      "# start_s y length_s 0 load (y: the arm's row, growing downwards, "
      "-0.15 for an adapter load-starved (load 1), +0.15 for a tenant "
      "service-starved (load 0))",
      "# tenant_row start_s end_s: the service-starved intervals",
      "# tenant demand demand_share service service_share (demand: w_in * "
      "prompt + w_out * (output - 1) tokens asked for)"};
  lsim_outfile dof[D_N];
  FILE *df[D_N] = {NULL};
  int st = 0, ndof = 0;
  for (; ndof < D_N; ndof++) {
    char dp[1100];
    snprintf(dp, sizeof dp, "%s/%s", dir, dname[ndof]);
    if ((rc = lsim_out_open(&dof[ndof], dp, &eb))) {
      st = lsim_cli_fail("compare", rc, eb.msg);
      break;
    }
    df[ndof] = dof[ndof].fp;
    fprintf(df[ndof], "%s; one block per arm:", dhead[ndof]);
    for (int i = 0; i < n; i++)
      fprintf(df[ndof], " %s", arms[i].label);
    fputc('\n', df[ndof]);
  }
  double tick_s = (double)sc.ns_per_tick * 1e-9;
  /* the --set edits, recorded in each run's options (replay --resume
  ** applies them again); nothing is recorded without them */
  const char *ropts[2 * (LSIM_SCENARIO_MAX_SETS + 2) + 1];
  char setnames[LSIM_SCENARIO_MAX_SETS][16];
  int nr = 0;
  for (int i = 0; i < nsets; i++) {
    lsim_runid_set_name(i, setnames[i]);
    ropts[nr++] = setnames[i];
    ropts[nr++] = sets[i];
  }
  if (execute_s) { /* recorded like replay's, for --resume */
    ropts[nr++] = "execute";
    ropts[nr++] = execute_s;
  }
  if (clock_s) {
    ropts[nr++] = "clock";
    ropts[nr++] = clock_s;
  }
  ropts[nr] = NULL;
  double t0 = lsim__cmp_now();
  for (int i = 0; i < n && !st; i++) {
    char dbpath[1100 + sizeof arms[i].stem],
        jsonpath[1100 + sizeof arms[i].stem], cmdline[1024];
    const lsim__cmp_arm *arm = &arms[i];
    snprintf(sc.scheduler, sizeof sc.scheduler, "%.*s", LSIM_NAME_MAX - 1,
             arm->sched);
    snprintf(sc.evict, sizeof sc.evict, "%.*s", LSIM_NAME_MAX - 1,
             arm->evict);
    snprintf(sc.prefetch, sizeof sc.prefetch, "%.*s", LSIM_NAME_MAX - 1,
             arm->prefetch);
    snprintf(dbpath, sizeof dbpath, "%s/%s.db", dir, arms[i].stem);
    snprintf(jsonpath, sizeof jsonpath, "%s/%s.json", dir, arms[i].stem);
    size_t used = 0;
    for (int a = 0; a < argc && used < sizeof cmdline - 1; a++)
      used += (size_t)snprintf(cmdline + used, sizeof cmdline - used, "%s%s",
                               a ? " " : "lorasim ", argv[a]);
    rows[i].sched = arms[i].sched;
    rows[i].evict = arms[i].evict;
    rows[i].prefetch = arms[i].prefetch;
    rows[i].label = arms[i].label;
    rows[i].service = service + (size_t)i * (size_t)sc.ntenants;
    rows[i].tenants = tfigs + (size_t)i * ((size_t)sc.ntenants + 1);
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
                          .run_options = nr ? ropts : NULL,
                          .json_path = jsonpath,
                          .tenant_figs = rows[i].tenants};
    rc = lsim_replay_run(&sc, &o, &rows[i].s, &eb);
    if (rc) {
      st = lsim_cli_fail("compare", rc, eb.msg);
      char prog[sizeof arms[i].label + 64];
      snprintf(prog, sizeof prog, "lorasim compare: run of '%s'",
               arms[i].label);
      lsim_replay_explain(stderr, prog, &rows[i].s, dbpath);
    } else if (lsim_timeline_write(&tl, df[D_TL], rows[i].s.end_tick,
                                   sc.ns_per_tick) ||
               (rc = lsim__cmp_ttft(df[D_TTFT], dbpath, tick_s * 1e3, &eb)) ||
               (rc = lsim__cmp_starved(df[D_SV], dbpath, i, tick_s, &eb)) ||
               (rc = lsim__cmp_tenant_starved(df[D_TSV], dbpath, sc.ntenants,
                                              tick_s, &eb)) ||
               (rc = lsim__cmp_share(df[D_SHARE], dbpath, &sc,
                                     rows[i].service, &eb))) {
      st = lsim_cli_fail("compare", rc ? rc : LSIM_E_IO, rc ? eb.msg : "write failed");
    }
    lsim_timeline_release(&tl);
    if (!st && !quiet)
      lsim__cmp_progress(i + 1, n, arms[i].label, lsim__cmp_now() - t0);
  }
  for (int k = 0; k < ndof; k++) {
    if (st) {
      lsim_out_abort(&dof[k]);
    } else if ((rc = lsim_out_commit(&dof[k], &eb))) {
      st = lsim_cli_fail("compare", rc, eb.msg);
    }
  }
  if (!st) {
    char csv[1100], note[1300];
    snprintf(csv, sizeof csv, "%s/compare.csv", dir);
    rc = lsim__cmp_csv(csv, &sc, rows, n, &eb);
    if (!rc) { /* each column's evidence class (sim/audit.c) */
      char evp[1100];
      snprintf(evp, sizeof evp, "%s/compare-evidence.csv", dir);
      /* the weakest clock of the arms: mixed when one of them was */
      int clk = LSIM_CLAIM_CLOCK_MODEL;
      for (int i = 0; i < n; i++) {
        int k = lsim_report_claim_clock(&rows[i].s);
        clk = k > clk ? k : clk;
      }
      rc = lsim_claims_csv_sidecar(csv, evp, sc.backend, clk, &eb);
    }
    note[0] = 0;
    if (!rc)
      rc = lsim__cmp_service_dat(dir, &sc, rows, n, &eb);
    int all = 0;
    if (!rc && plots) {
      double end_s = 0;
      int64_t nstarved = 0;
      for (int i = 0; i < n; i++) {
        double e = (double)rows[i].s.end_tick * tick_s;
        end_s = e > end_s ? e : end_s;
        nstarved += rows[i].s.load_starved + rows[i].s.service_starved;
      }
      rc = lsim__cmp_plots(dir, &sc, triples, rows, n, end_s, nstarved, note,
                           sizeof note, &all, &eb);
    }
    if (rc) {
      st = lsim_cli_fail("compare", rc, eb.msg);
    } else {
      /* paths shown with control bytes made visible (escape.h) */
      char shown[LSIM_ESC_SIZE(1300)];
      lsim__cmp_print(stdout, &sc, triples, rows, n);
      lsim__cmp_print_tenants(stdout, &sc, rows, n);
      printf("  databases   %s/{", lsim_console_str(shown, sizeof shown, dir));
      for (int i = 0; i < n; i++)
        printf("%s%s", i ? "," : "", arms[i].stem);
      printf("}.db\n  csv         %s\n",
             lsim_console_str(shown, sizeof shown, csv));
      if (all) /* only files that are whole and in place */
        printf("  plots       %s/compare-{service,ttft,service-time,gap,"
               "residency,starvation,tenant-starvation,share}.{png,svg}\n",
               lsim_console_str(shown, sizeof shown, dir));
      if (note[0])
        printf("  plot        %s\n",
               lsim_console_str(shown, sizeof shown, note));
    }
  }
  free(service);
  free(tfigs);
  return st;
}
