/*
** fidelity.c: `lorasim fidelity` (contract in fidelity.h).
**
** Steps, each a function below: open DB and read its run row
** (lsim__fid_open), read every span with both times into memory
** (lsim__fid_iters, lsim__fid_loads: 56 bytes per iteration, freed at the
** end), compute each group's figures (lsim__fid_group), read DB2's
** latencies when asked (lsim__fid_against), then print and write the
** outputs.  Nothing is written until every figure is computed, so a bad
** input leaves no file behind.
*/
#include "fidelity.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../backends/backend.h"
#include "audit.h"
#include "db.h"
#include "cli.h"
#include "escape.h"
#include "outfile.h"
#include "plot.h"
#include "tenants.h"

enum { LSIM__PH_PREFILL = 0, LSIM__PH_DECODE = 1, LSIM__PH_MIXED = 2 };

/* One span with both times. */
typedef struct lsim__span {
  double e;          /* (model - measured) / measured */
  double model_ms, meas_ms;
  int64_t rows, ctx; /* ctx -1: not recorded */
  int phase;
} lsim__span;

typedef struct lsim__spans {
  lsim__span *v;
  int64_t n, cap;
} lsim__spans;

/* One group's figures (fidelity.h). */
typedef struct lsim__stat {
  const char *section; /* "iterations", "loads" */
  char group[32];
  int64_t n;
  double median_pct, p90_pct, mape_pct, bias_pct;
} lsim__stat;

#define LSIM__MAX_STATS 32

typedef struct lsim__run {
  char path[LSIM_OUT_PATH_MAX];
  char name[128], sha[80], backend[64], sched[64], evict[64], prefetch[64];
  char status[32], clock[32];
  int64_t seed;
  int version;
} lsim__run;

/* The latencies compared with --against. */
static const char *const lsim__lat_keys[] = {"ttft_p50_ms", "ttft_p99_ms",
                                             "tbt_p50_ms", "tbt_p99_ms"};
#define LSIM__NLAT 4

typedef struct lsim__lat {
  double model, meas; /* NAN: none */
  int cls_model, cls_meas, cls_diff;
} lsim__lat;

/* ---- reading ----------------------------------------------------------------- */


static void lsim__col(sqlite3_stmt *st, int i, char *out, size_t n) {
  const unsigned char *t = sqlite3_column_text(st, i);
  snprintf(out, n, "%s", t ? (const char *)t : "");
}

/* Open path read-only and read its run row. */
static lsim_err lsim__fid_open(const char *path, sqlite3 **h, lsim__run *r,
                               lsim_errbuf *eb) {
  struct stat fst;
  *h = NULL;
  memset(r, 0, sizeof *r);
  snprintf(r->path, sizeof r->path, "%s", path);
  if (stat(path, &fst) != 0)
    return lsim_fail(eb, errno == ENOENT || errno == ENOTDIR
                             ? LSIM_E_FILE_MISSING
                             : LSIM_E_IO,
                     "%s: %s", path, strerror(errno));
  if (!S_ISREG(fst.st_mode))
    return lsim_fail(eb, LSIM_E_FID_NOT_RUN, "%s: not a regular file", path);
  if (sqlite3_open_v2(path, h, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
    return lsim_fail(eb, LSIM_E_FID_NOT_RUN, "%s: cannot open: %s", path,
                     *h ? sqlite3_errmsg(*h) : "out of memory");
  sqlite3_busy_timeout(*h, 2000);
  int clock = lsim_db_has_column(*h, "runs", "clock");
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(*h,
                         clock ? "SELECT scenario_name, scenario_sha256, seed, "
                                 "backend, scheduler, evict, prefetch, status, "
                                 "clock FROM runs WHERE run_id = 1"
                               : "SELECT scenario_name, scenario_sha256, seed, "
                                 "backend, scheduler, evict, prefetch, status, "
                                 "'model' FROM runs WHERE run_id = 1",
                         -1, &st, NULL) != SQLITE_OK ||
      sqlite3_step(st) != SQLITE_ROW) {
    lsim_err rc = lsim_fail(eb, LSIM_E_FID_NOT_RUN,
                            "%s: not a lorasim run database (no run row): %s",
                            path, sqlite3_errmsg(*h));
    sqlite3_finalize(st);
    return rc;
  }
  lsim__col(st, 0, r->name, sizeof r->name);
  lsim__col(st, 1, r->sha, sizeof r->sha);
  r->seed = sqlite3_column_int64(st, 2);
  lsim__col(st, 3, r->backend, sizeof r->backend);
  lsim__col(st, 4, r->sched, sizeof r->sched);
  lsim__col(st, 5, r->evict, sizeof r->evict);
  lsim__col(st, 6, r->prefetch, sizeof r->prefetch);
  lsim__col(st, 7, r->status, sizeof r->status);
  lsim__col(st, 8, r->clock, sizeof r->clock);
  sqlite3_finalize(st);
  st = NULL;
  if (sqlite3_prepare_v2(*h, "PRAGMA user_version", -1, &st, NULL) ==
          SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW)
    r->version = sqlite3_column_int(st, 0);
  sqlite3_finalize(st);
  return 0;
}

static lsim_err lsim__push(lsim__spans *s, const lsim__span *sp,
                           lsim_errbuf *eb) {
  if (s->n == s->cap) {
    int64_t cap = s->cap ? 2 * s->cap : 1024;
    lsim__span *nv = realloc(s->v, (size_t)cap * sizeof *nv);
    if (!nv)
      return lsim_fail(eb, LSIM_E_NOMEM, "out of memory reading the spans");
    s->v = nv;
    s->cap = cap;
  }
  s->v[s->n++] = *sp;
  return 0;
}

/* Fill sp's error and times from model and measured ns (measured > 0). */
static void lsim__span_times(lsim__span *sp, int64_t model, int64_t meas) {
  sp->e = (double)(model - meas) / (double)meas;
  sp->model_ms = (double)model / 1e6;
  sp->meas_ms = (double)meas / 1e6;
}

static lsim_err lsim__fid_iters(sqlite3 *h, const lsim__run *r,
                                lsim__spans *out, int *have_ctx,
                                lsim_errbuf *eb) {
  if (!lsim_db_has_column(h, "iterations", "measured_ns"))
    return lsim_fail(eb, LSIM_E_FID_NO_MEASURED,
                     "%s: no measured times: written by a lorasim before "
                     "schema 6 (this one is %d), which did not record "
                     "iterations.measured_ns; replay it again",
                     r->path, r->version);
  *have_ctx = lsim_db_has_column(h, "iterations", "ctx_tokens");
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(h,
                         *have_ctx
                             ? "SELECT prefill_rows, decode_rows, model_ns, "
                               "measured_ns, ctx_tokens FROM iterations WHERE "
                               "result = 'ok' AND measured_ns > 0 AND "
                               "model_ns IS NOT NULL ORDER BY iter"
                             : "SELECT prefill_rows, decode_rows, model_ns, "
                               "measured_ns, NULL FROM iterations WHERE "
                               "result = 'ok' AND measured_ns > 0 AND "
                               "model_ns IS NOT NULL ORDER BY iter",
                         -1, &st, NULL) != SQLITE_OK)
    return lsim_fail(eb, LSIM_E_DB, "%s: reading iterations: %s", r->path,
                     sqlite3_errmsg(h));
  lsim_err rc = 0;
  int step, any_ctx = 0;
  while (!rc && (step = sqlite3_step(st)) == SQLITE_ROW) {
    lsim__span sp;
    int64_t pre = sqlite3_column_int64(st, 0),
            dec = sqlite3_column_int64(st, 1);
    lsim__span_times(&sp, sqlite3_column_int64(st, 2),
                     sqlite3_column_int64(st, 3));
    sp.rows = pre + dec;
    sp.phase = dec == 0    ? LSIM__PH_PREFILL
               : pre == 0 ? LSIM__PH_DECODE
                          : LSIM__PH_MIXED;
    sp.ctx = sqlite3_column_type(st, 4) == SQLITE_NULL
                 ? -1
                 : sqlite3_column_int64(st, 4);
    any_ctx |= sp.ctx >= 0;
    rc = lsim__push(out, &sp, eb);
  }
  if (!rc && step != SQLITE_DONE)
    rc = lsim_fail(eb, LSIM_E_DB, "%s: reading iterations: %s", r->path,
                   sqlite3_errmsg(h));
  sqlite3_finalize(st);
  *have_ctx = any_ctx;
  if (!rc && out->n == 0)
    rc = lsim_fail(eb, LSIM_E_FID_NO_MEASURED,
                   "%s: no iteration has a measured time (backend %s%s): "
                   "replay with --backend cpu_ref or cuda, which time what "
                   "they execute",
                   r->path, r->backend[0] ? r->backend : "?",
                   lsim_backend_flags(r->backend) & LSIM_BACKEND_EXECUTES
                       ? ""
                       : ", which measures nothing");
  return rc;
}

static lsim_err lsim__fid_loads(sqlite3 *h, const lsim__run *r,
                                lsim__spans *out, lsim_errbuf *eb) {
  if (!lsim_db_has_column(h, "loads", "measured_ns"))
    return 0;
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(h,
                         "SELECT model_ns, measured_ns FROM loads WHERE "
                         "kind IN ('load', 'restore') AND measured_ns > 0 "
                         "ORDER BY load",
                         -1, &st, NULL) != SQLITE_OK)
    return lsim_fail(eb, LSIM_E_DB, "%s: reading loads: %s", r->path,
                     sqlite3_errmsg(h));
  lsim_err rc = 0;
  int step;
  while (!rc && (step = sqlite3_step(st)) == SQLITE_ROW) {
    lsim__span sp = {0};
    lsim__span_times(&sp, sqlite3_column_int64(st, 0),
                     sqlite3_column_int64(st, 1));
    sp.ctx = -1;
    rc = lsim__push(out, &sp, eb);
  }
  if (!rc && step != SQLITE_DONE)
    rc = lsim_fail(eb, LSIM_E_DB, "%s: reading loads: %s", r->path,
                   sqlite3_errmsg(h));
  sqlite3_finalize(st);
  return rc;
}

/* ---- the figures ---------------------------------------------------------------- */

static int lsim__cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The value at nearest rank ceil(p n / 100) of sorted v[n]. */
static double lsim__rank(const double *v, int64_t n, int p) {
  int64_t k = ((int64_t)p * n + 99) / 100;
  if (k < 1)
    k = 1;
  return v[k - 1];
}

/* The spans of s that `keep` accepts, as one group; 0 when none. */
static int lsim__fid_group(const lsim__spans *s, double *scratch,
                           int (*keep)(const lsim__span *, int64_t, int64_t),
                           int64_t lo, int64_t hi, lsim__stat *out) {
  int64_t n = 0;
  double sum_abs = 0, sum = 0;
  for (int64_t i = 0; i < s->n; i++) {
    const lsim__span *sp = &s->v[i];
    if (!keep(sp, lo, hi))
      continue;
    scratch[n++] = fabs(sp->e);
    sum_abs += fabs(sp->e);
    sum += sp->e;
  }
  if (n == 0)
    return 0;
  qsort(scratch, (size_t)n, sizeof *scratch, lsim__cmp_d);
  out->n = n;
  out->median_pct = 100 * lsim__rank(scratch, n, 50);
  out->p90_pct = 100 * lsim__rank(scratch, n, 90);
  out->mape_pct = 100 * (sum_abs / (double)n);
  out->bias_pct = 100 * (sum / (double)n);
  return 1;
}

static int lsim__k_all(const lsim__span *s, int64_t lo, int64_t hi) {
  (void)s, (void)lo, (void)hi;
  return 1;
}
static int lsim__k_phase(const lsim__span *s, int64_t lo, int64_t hi) {
  (void)hi;
  return s->phase == lo;
}
static int lsim__k_rows(const lsim__span *s, int64_t lo, int64_t hi) {
  return s->rows >= lo && (hi < 0 || s->rows <= hi);
}
static int lsim__k_ctx(const lsim__span *s, int64_t lo, int64_t hi) {
  return s->ctx >= 0 && s->ctx >= lo && (hi < 0 || s->ctx <= hi);
}

/* Every group of fidelity.h, in its order. */
static int lsim__fid_stats(const lsim__spans *it, int have_ctx,
                           const lsim__spans *ld, lsim__stat *st,
                           lsim_errbuf *eb) {
  int64_t cap = it->n > ld->n ? it->n : ld->n;
  double *scratch = malloc((size_t)(cap ? cap : 1) * sizeof *scratch);
  if (!scratch) {
    lsim_fail(eb, LSIM_E_NOMEM, "out of memory for the figures");
    return -1;
  }
  int n = 0;
#define LSIM__G(sec, spans, fn, lo, hi, ...)                                 \
  do {                                                                     \
    st[n].section = sec;                                                   \
    snprintf(st[n].group, sizeof st[n].group, __VA_ARGS__);                \
    n += lsim__fid_group(spans, scratch, fn, lo, hi, &st[n]);              \
  } while (0)
  LSIM__G("iterations", it, lsim__k_all, 0, 0, "all");
  LSIM__G("iterations", it, lsim__k_phase, LSIM__PH_PREFILL, 0, "prefill_only");
  LSIM__G("iterations", it, lsim__k_phase, LSIM__PH_DECODE, 0, "decode_only");
  LSIM__G("iterations", it, lsim__k_phase, LSIM__PH_MIXED, 0, "mixed");
  static const int64_t rb[] = {1, 2, 8, 32, 128, 512, 2048, 8192};
  for (int i = 0; i < 8; i++) {
    int64_t hi = i + 1 < 8 ? rb[i + 1] - 1 : -1;
    if (hi < 0)
      LSIM__G("iterations", it, lsim__k_rows, rb[i], hi, "rows_%lld+",
              (long long)rb[i]);
    else if (hi == rb[i])
      LSIM__G("iterations", it, lsim__k_rows, rb[i], hi, "rows_%lld",
              (long long)rb[i]);
    else
      LSIM__G("iterations", it, lsim__k_rows, rb[i], hi, "rows_%lld-%lld",
              (long long)rb[i], (long long)hi);
  }
  static const int64_t cb[] = {0, 512, 2048, 8192, 32768, 131072};
  for (int i = 0; have_ctx && i < 6; i++) {
    int64_t hi = i + 1 < 6 ? cb[i + 1] - 1 : -1;
    if (hi < 0)
      LSIM__G("iterations", it, lsim__k_ctx, cb[i], hi, "ctx_%lld+",
              (long long)cb[i]);
    else
      LSIM__G("iterations", it, lsim__k_ctx, cb[i], hi, "ctx_%lld-%lld",
              (long long)cb[i], (long long)hi);
  }
  LSIM__G("loads", ld, lsim__k_all, 0, 0, "all");
#undef LSIM__G
  free(scratch);
  return n;
}

/* ---- --against ------------------------------------------------------------------ */

/* An edit of a key that says how the run was executed and timed, not
** what was run: $.clock, $.execute, $.backend. */
static int lsim__how(const char *edit) {
  static const char *const keys[] = {"clock", "execute", "backend"};
  if (strncmp(edit, "$.", 2) == 0)
    edit += 2;
  for (int i = 0; i < 3; i++) {
    size_t k = strlen(keys[i]);
    if (strncmp(edit, keys[i], k) == 0 && edit[k] == '=')
      return 1;
  }
  return 0;
}

/* The --set edits a run was given (run_options set.N), as one string, in
** their order, without those of lsim__how. */
static void lsim__sets(sqlite3 *h, char *out, size_t n) {
  sqlite3_stmt *st = NULL;
  size_t used = 0;
  out[0] = 0;
  if (sqlite3_prepare_v2(h,
                         "SELECT name, value FROM run_options WHERE run_id = 1 "
                         "AND name LIKE 'set.%' ORDER BY "
                         "CAST(substr(name, 5) AS INTEGER)",
                         -1, &st, NULL) != SQLITE_OK)
    return;
  while (sqlite3_step(st) == SQLITE_ROW && used < n) {
    const char *v = (const char *)sqlite3_column_text(st, 1);
    if (v && !lsim__how(v))
      used += (size_t)snprintf(out + used, n - used, "%s;", v);
  }
  sqlite3_finalize(st);
}

static double lsim__summary(sqlite3 *h, const char *key) {
  sqlite3_stmt *st = NULL;
  double v = NAN;
  if (sqlite3_prepare_v2(h,
                         "SELECT value FROM runs_summary WHERE run_id = 1 AND "
                         "key = ?1",
                         -1, &st, NULL) == SQLITE_OK) {
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW &&
        sqlite3_column_type(st, 0) != SQLITE_NULL)
      v = sqlite3_column_double(st, 0);
  }
  sqlite3_finalize(st);
  return v < 0 ? NAN : v; /* runs_summary's -1: no value */
}

/* The class a run stored for key (runs_evidence), or -1. */
static int lsim__stored_class(sqlite3 *h, const char *key) {
  sqlite3_stmt *st = NULL;
  int cls = -1;
  if (sqlite3_prepare_v2(h,
                         "SELECT class FROM runs_evidence WHERE run_id = 1 "
                         "AND key = ?1",
                         -1, &st, NULL) == SQLITE_OK) {
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW)
      cls = lsim_evidence_find((const char *)sqlite3_column_text(st, 0));
  }
  sqlite3_finalize(st);
  return cls;
}

static lsim_err lsim__fid_against(sqlite3 *h, const lsim__run *a,
                                  sqlite3 *h2, const lsim__run *b,
                                  lsim__lat *lat, lsim_errbuf *eb) {
  char sa[2048], sb[2048];
  lsim__sets(h, sa, sizeof sa);
  lsim__sets(h2, sb, sizeof sb);
  const char *what = strcmp(a->sha, b->sha) != 0  ? "scenario (SHA-256)"
                     : a->seed != b->seed         ? "seed"
                     : strcmp(a->sched, b->sched) ? "scheduler"
                     : strcmp(a->evict, b->evict) ? "eviction policy"
                     : strcmp(a->prefetch, b->prefetch) ? "prefetch policy"
                     : strcmp(sa, sb) != 0        ? "--set edits"
                                                  : NULL;
  if (what)
    return lsim_fail(eb, LSIM_E_FID_MISMATCH,
                     "%s and %s are not replays of the same run: their %s "
                     "do not match (scenario %s seed %lld, scenario %s seed "
                     "%lld)",
                     a->path, b->path, what, a->name, (long long)a->seed,
                     b->name, (long long)b->seed);
  if (strcmp(a->clock, "model") != 0 || strcmp(b->clock, "measured") != 0)
    return lsim_fail(eb, LSIM_E_FID_MISMATCH,
                     "--against compares a model-clock replay (DB) with a "
                     "measured-clock one (DB2): %s ran under the %s clock, "
                     "%s under the %s clock",
                     a->path, a->clock[0] ? a->clock : "model", b->path,
                     b->clock[0] ? b->clock : "model");
  if (strcmp(a->status, "ok") != 0 || strcmp(b->status, "ok") != 0)
    return lsim_fail(eb, LSIM_E_FID_MISMATCH,
                     "--against needs two finished runs: %s is '%s', %s is "
                     "'%s'",
                     a->path, a->status, b->path, b->status);
  for (int i = 0; i < LSIM__NLAT; i++) {
    const char *k = lsim__lat_keys[i];
    lat[i].model = lsim__summary(h, k);
    lat[i].meas = lsim__summary(h2, k);
    /* DB's own claim; DB2's as it stored it, within its ceiling */
    lsim_claim cm = lsim_summary_claim_clock(k, LSIM_CLAIM_CLOCK_MODEL);
    lat[i].cls_model = cm.claimed;
    int c2 = lsim__stored_class(h2, k);
    lsim_claim cx = lsim_summary_claim_clock(k, LSIM_CLAIM_CLOCK_MEASURED);
    int ceil2 = lsim_claim_ceiling(&cx, b->backend);
    lat[i].cls_meas = c2 >= 0 && c2 <= ceil2 ? c2 : LSIM_EVID_MODELED;
    lat[i].cls_diff =
        lat[i].cls_model < lat[i].cls_meas ? lat[i].cls_model : lat[i].cls_meas;
  }
  return 0;
}

/* ---- outputs ---------------------------------------------------------------------- */

static const char *lsim__num(char *out, size_t n, double v) {
  return isnan(v) ? "" : lsim_tenants_num(out, n, v);
}

/* The evidence of the three kinds of figure under the run's backend. */
typedef struct lsim__evid {
  int model, meas, err;
} lsim__evid;

static void lsim__fid_evid(const char *backend, lsim__evid *e) {
  lsim_claim cm = {"model_ns", LSIM_EVID_MODELED, LSIM_SRC_COST_MODEL,
                   LSIM_SRC_NONE, 1};
  lsim_claim cx = {"measured_ns", LSIM_EVID_MEASURED, LSIM_SRC_BACKEND_TIME,
                   LSIM_SRC_NONE, 1};
  lsim_claim ce = {"relative_error", LSIM_EVID_MEASURED, LSIM_SRC_COST_MODEL,
                   LSIM_SRC_BACKEND_TIME, 1};
  /* each as strong as its sources allow, and no stronger */
  e->model = lsim_claim_ceiling(&cm, backend);
  e->meas = lsim_claim_ceiling(&cx, backend);
  e->err = lsim_claim_ceiling(&ce, backend);
}

static void lsim__print(FILE *f, const lsim__run *r, const lsim__run *spans,
                        const lsim__evid *ev, const lsim__stat *st, int n,
                        const lsim__run *b, const lsim__lat *lat) {
  char s1[LSIM_ESC_SIZE(LSIM_OUT_PATH_MAX)], s2[LSIM_ESC_SIZE(128)];
  fprintf(f, "lorasim fidelity: %s (scenario %s, seed %lld, backend %s, "
             "clock %s)\n",
          lsim_console_str(s1, sizeof s1, r->path),
          lsim_console_str(s2, sizeof s2, r->name), (long long)r->seed,
          r->backend, r->clock[0] ? r->clock : "model");
  fprintf(f, "  evidence   model times %s (cost_model); measured times %s "
             "(backend_time, %s); errors %s (cost_model against "
             "backend_time)\n",
          lsim_evidence_name(ev->model), lsim_evidence_name(ev->meas),
          spans->backend, lsim_evidence_name(ev->err));
  if (spans != r)
    fprintf(f, "  spans      from %s (this run measured nothing; the "
               "measured-clock run records both times of every span)\n",
            lsim_console_str(s1, sizeof s1, spans->path));
  fputs("  relative error (model - measured) / measured, percent; median "
        "and p90 of its size\n",
        f);
  const char *sec = NULL;
  for (int i = 0; i < n; i++) {
    if (!sec || strcmp(sec, st[i].section) != 0) {
      sec = st[i].section;
      fprintf(f, "  %-16s %9s %9s %9s %9s %9s\n", sec, "n", "median", "p90",
              "MAPE", "bias");
    }
    fprintf(f, "  %-16s %9lld %9.2f %9.2f %9.2f %+9.2f\n", st[i].group,
            (long long)st[i].n, st[i].median_pct, st[i].p90_pct,
            st[i].mape_pct, st[i].bias_pct);
  }
  if (!b)
    return;
  fprintf(f, "  against    %s (clock measured, backend %s)\n",
          lsim_console_str(s1, sizeof s1, b->path), b->backend);
  fprintf(f, "  %-16s %12s %14s %9s\n", "latency", "model clock",
          "measured clock", "diff %");
  for (int i = 0; i < LSIM__NLAT; i++) {
    double d = (lat[i].model - lat[i].meas) / lat[i].meas * 100;
    fprintf(f, "  %-16s %12.3f %14.3f %+9.2f   (%s against %s)\n",
            lsim__lat_keys[i], lat[i].model, lat[i].meas, d,
            lsim_evidence_name(lat[i].cls_model),
            lsim_evidence_name(lat[i].cls_meas));
  }
}

static lsim_err lsim__write_csv(const char *dir, const lsim__evid *ev,
                                const lsim__stat *st, int n,
                                lsim_errbuf *eb) {
  char path[LSIM_OUT_PATH_MAX + 32], a[64], b[64], c[64], d[64];
  snprintf(path, sizeof path, "%s/fidelity.csv", dir);
  lsim_outfile of;
  lsim_err rc = lsim_out_open(&of, path, eb);
  if (rc)
    return rc;
  fputs("section,group,n,median_pct,p90_pct,mape_pct,bias_pct,class\n",
        of.fp);
  for (int i = 0; i < n; i++)
    fprintf(of.fp, "%s,%s,%lld,%s,%s,%s,%s,%s\n", st[i].section, st[i].group,
            (long long)st[i].n, lsim__num(a, sizeof a, st[i].median_pct),
            lsim__num(b, sizeof b, st[i].p90_pct),
            lsim__num(c, sizeof c, st[i].mape_pct),
            lsim__num(d, sizeof d, st[i].bias_pct),
            lsim_evidence_name(ev->err));
  return lsim_out_commit(&of, eb);
}

static lsim_err lsim__write_e2e(const char *dir, const lsim__lat *lat,
                                lsim_errbuf *eb) {
  char path[LSIM_OUT_PATH_MAX + 32], a[64], b[64], c[64];
  snprintf(path, sizeof path, "%s/fidelity-e2e.csv", dir);
  lsim_outfile of;
  lsim_err rc = lsim_out_open(&of, path, eb);
  if (rc)
    return rc;
  fputs("metric,model_clock,measured_clock,diff_pct,model_clock_class,"
        "measured_clock_class,diff_class\n",
        of.fp);
  for (int i = 0; i < LSIM__NLAT; i++)
    fprintf(of.fp, "%s,%s,%s,%s,%s,%s,%s\n", lsim__lat_keys[i],
            lsim__num(a, sizeof a, lat[i].model),
            lsim__num(b, sizeof b, lat[i].meas),
            lsim__num(c, sizeof c,
                      (lat[i].model - lat[i].meas) / lat[i].meas * 100),
            lsim_evidence_name(lat[i].cls_model),
            lsim_evidence_name(lat[i].cls_meas),
            lsim_evidence_name(lat[i].cls_diff));
  return lsim_out_commit(&of, eb);
}

/* name.dat: "measured_ms model_ms", one block per phase mix for
** iterations (phases 1), one block for loads. */
static lsim_err lsim__write_dat(const char *dir, const char *name,
                                const lsim__spans *s, int phases,
                                lsim_errbuf *eb) {
  char path[LSIM_OUT_PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/%s.dat", dir, name);
  lsim_outfile of;
  lsim_err rc = lsim_out_open(&of, path, eb);
  if (rc)
    return rc;
  fprintf(of.fp, "# measured_ms model_ms%s\n",
          phases ? ": one block per phase mix (prefill only, decode only, "
                   "mixed)"
                 : "");
  /* empty blocks are left out (gnuplot's index counts written ones) */
  int blocks = 0;
  for (int p = 0; p < (phases ? 3 : 1); p++) {
    int64_t k = 0;
    for (int64_t i = 0; i < s->n; i++) {
      if (phases && s->v[i].phase != p)
        continue;
      if (!k++ && blocks++)
        fputs("\n\n", of.fp);
      fprintf(of.fp, "%.9g %.9g\n", s->v[i].meas_ms, s->v[i].model_ms);
    }
  }
  return lsim_out_commit(&of, eb);
}

/* One log-log scatter: predicted (model) against measured, and y = x. */
static void lsim__plot_fig(lsim_plotset *ps, int fig, const char *dat,
                           const char *what, const lsim__run *r,
                           const lsim__spans *s, int phases) {
  static const char *const ph[3] = {"prefill only", "decode only", "mixed"};
  double lo = INFINITY, hi = 0;
  int64_t cnt[3] = {0, 0, 0};
  for (int64_t i = 0; i < s->n; i++) {
    const lsim__span *sp = &s->v[i];
    lo = fmin(lo, fmin(sp->meas_ms, sp->model_ms));
    hi = fmax(hi, fmax(sp->meas_ms, sp->model_ms));
    cnt[phases ? sp->phase : 0]++;
  }
  if (!(lo > 0) || !(hi > 0))
    lo = 1e-3, hi = 1;
  char line2[512], q1[LSIM_ESC_SIZE(128)], q2[LSIM_ESC_SIZE(512)],
      qd[LSIM_ESC_SIZE(128)];
  snprintf(line2, sizeof line2, "scenario %s, seed %lld, backend %s, %lld %s",
           r->name, (long long)r->seed, r->backend, (long long)s->n,
           phases ? "iterations" : "loads");
  lsim_gp_string(q1, sizeof q1, what, LSIM_GP_REPLACE);
  lsim_gp_string(q2, sizeof q2, line2, LSIM_GP_REPLACE);
  lsim_gp_path(qd, sizeof qd, dat);
  for (int t = 0; t < LSIM_PLOT_TERMS; t++) {
    lsim_plot_term(ps, fig, t, 760, 700);
    fprintf(ps->f,
            "set title %s.\"\\n\".%s\n"
            "set logscale xy\nset size square\nset grid\n"
            "set xrange [%.9g:%.9g]\nset yrange [%.9g:%.9g]\n"
            "set xlabel 'measured (ms)'\nset ylabel 'predicted by the cost "
            "model (ms)'\nset key top left\n"
            "plot x with lines dt 2 lc rgb '#808080' title 'y = x'",
            q1, q2, lo / 1.5, hi * 1.5, lo / 1.5, hi * 1.5);
    int block = 0; /* the written blocks (lsim__write_dat) */
    for (int p = 0; p < (phases ? 3 : 1); p++) {
      if (!cnt[p])
        continue;
      fprintf(ps->f, ", %s index %d using 1:2 with points pt 7 ps 0.5 lc %d "
                     "title '%s'",
              qd, block++, p + 1, phases ? ph[p] : "loads");
    }
    fputc('\n', ps->f);
  }
}

static lsim_err lsim__write_plots(const char *dir, const lsim__run *r,
                                  const lsim__spans *it,
                                  const lsim__spans *ld, char *note,
                                  size_t note_n, lsim_errbuf *eb) {
  lsim_err rc;
  if ((rc = lsim__write_dat(dir, "fidelity-iterations", it, 1, eb)) ||
      (ld->n && (rc = lsim__write_dat(dir, "fidelity-loads", ld, 0, eb))))
    return rc;
  lsim_plotset *ps = NULL;
  if ((rc = lsim_plot_begin(&ps, dir, "fidelity-plots.gp", eb)))
    return rc;
  int fi = lsim_plot_figure(ps, "fidelity-iterations", "iterations", eb);
  int fl = fi >= 0 && ld->n
               ? lsim_plot_figure(ps, "fidelity-loads", "loads", eb)
               : 0;
  if (fi < 0 || fl < 0) {
    lsim_plot_abort(ps);
    return eb->code;
  }
  lsim__plot_fig(ps, fi, "fidelity-iterations.dat",
                 "Predicted against measured iteration time", r, it, 1);
  if (ld->n)
    lsim__plot_fig(ps, fl, "fidelity-loads.dat",
                   "Predicted against measured adapter load time", r, ld, 0);
  int drawn = 0;
  return lsim_plot_finish(ps, &drawn, note, note_n, eb);
}

/* cJSON_Add* return NULL on failure; one flag collects them all. */
static void lsim__add(cJSON *obj, const char *key, cJSON *item, int *bad) {
  if (!item || !cJSON_AddItemToObject(obj, key, item)) {
    cJSON_Delete(item);
    *bad = 1;
  }
}

/* A number that reads back as the same double (null for NAN). */
static cJSON *lsim__jnum(double v) {
  char text[64];
  if (isnan(v) || isinf(v))
    return cJSON_CreateNull();
  return cJSON_CreateRaw(lsim_tenants_num(text, sizeof text, v));
}

static cJSON *lsim__jclaim(int cls, const char *src, const char *opd) {
  cJSON *o = cJSON_CreateObject();
  if (!o)
    return NULL;
  int bad = 0;
  lsim__add(o, "class", cJSON_CreateString(lsim_evidence_name(cls)), &bad);
  lsim__add(o, "source", cJSON_CreateString(src), &bad);
  if (opd)
    lsim__add(o, "operand", cJSON_CreateString(opd), &bad);
  if (bad) {
    cJSON_Delete(o);
    return NULL;
  }
  return o;
}

static lsim_err lsim__write_json(const char *path, const lsim__run *r,
                                 const lsim__evid *ev, const lsim__stat *st,
                                 int n, const lsim__run *b,
                                 const lsim__lat *lat, lsim_errbuf *eb) {
  int bad = 0;
  cJSON *root = cJSON_CreateObject();
  if (!root)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory for the JSON report");
  char seed[32];
  snprintf(seed, sizeof seed, "%lld", (long long)r->seed);
  lsim__add(root, "lorasim", cJSON_CreateString(LSIM_VERSION), &bad);
  lsim__add(root, "db", cJSON_CreateString(r->path), &bad);
  lsim__add(root, "scenario", cJSON_CreateString(r->name), &bad);
  lsim__add(root, "seed", cJSON_CreateRaw(seed), &bad);
  lsim__add(root, "backend", cJSON_CreateString(r->backend), &bad);
  lsim__add(root, "clock", cJSON_CreateString(r->clock), &bad);
  cJSON *evid = cJSON_CreateObject();
  lsim__add(root, "evidence", evid, &bad);
  if (evid) {
    lsim__add(evid, "model", lsim__jclaim(ev->model, "cost_model", NULL),
              &bad);
    lsim__add(evid, "measured",
              lsim__jclaim(ev->meas, "backend_time", NULL), &bad);
    lsim__add(evid, "error",
              lsim__jclaim(ev->err, "cost_model", "backend_time"), &bad);
  }
  cJSON *secs[2] = {cJSON_CreateArray(), cJSON_CreateArray()};
  lsim__add(root, "iterations", secs[0], &bad);
  lsim__add(root, "loads", secs[1], &bad);
  for (int i = 0; !bad && i < n; i++) {
    cJSON *g = cJSON_CreateObject();
    cJSON *arr = secs[strcmp(st[i].section, "loads") == 0];
    if (!g || !cJSON_AddItemToArray(arr, g)) {
      cJSON_Delete(g);
      bad = 1;
      break;
    }
    lsim__add(g, "group", cJSON_CreateString(st[i].group), &bad);
    lsim__add(g, "n", lsim__jnum((double)st[i].n), &bad);
    lsim__add(g, "median_pct", lsim__jnum(st[i].median_pct), &bad);
    lsim__add(g, "p90_pct", lsim__jnum(st[i].p90_pct), &bad);
    lsim__add(g, "mape_pct", lsim__jnum(st[i].mape_pct), &bad);
    lsim__add(g, "bias_pct", lsim__jnum(st[i].bias_pct), &bad);
  }
  if (b && !bad) {
    cJSON *ag = cJSON_CreateObject();
    lsim__add(root, "against", ag, &bad);
    if (ag) {
      lsim__add(ag, "db", cJSON_CreateString(b->path), &bad);
      lsim__add(ag, "backend", cJSON_CreateString(b->backend), &bad);
      cJSON *figs = cJSON_CreateArray();
      lsim__add(ag, "figures", figs, &bad);
      for (int i = 0; !bad && i < LSIM__NLAT; i++) {
        cJSON *g = cJSON_CreateObject();
        if (!g || !cJSON_AddItemToArray(figs, g)) {
          cJSON_Delete(g);
          bad = 1;
          break;
        }
        lsim__add(g, "metric", cJSON_CreateString(lsim__lat_keys[i]), &bad);
        lsim__add(g, "model_clock", lsim__jnum(lat[i].model), &bad);
        lsim__add(g, "measured_clock", lsim__jnum(lat[i].meas), &bad);
        lsim__add(g, "diff_pct",
                  lsim__jnum((lat[i].model - lat[i].meas) / lat[i].meas * 100),
                  &bad);
        lsim__add(g, "model_clock_class",
                  cJSON_CreateString(lsim_evidence_name(lat[i].cls_model)),
                  &bad);
        lsim__add(g, "measured_clock_class",
                  cJSON_CreateString(lsim_evidence_name(lat[i].cls_meas)),
                  &bad);
      }
    }
  }
  char *text = bad ? NULL : cJSON_Print(root);
  cJSON_Delete(root);
  if (!text)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory for the JSON report");
  lsim_outfile of;
  lsim_err rc = lsim_out_open(&of, path, eb);
  if (!rc) {
    fputs(text, of.fp);
    fputc('\n', of.fp);
    rc = lsim_out_commit(&of, eb);
  }
  cJSON_free(text);
  return rc;
}

/* ---- the command ------------------------------------------------------------------ */

static void lsim__usage(FILE *f) {
  fputs("usage: lorasim fidelity DB [--against DB2] [--out DIR] [--json PATH]\n"
        "\n"
        "The cost model's clock against the measured one, from a run whose\n"
        "backend timed what it executed (--backend cpu_ref or cuda; either\n"
        "clock): per iteration, the relative error (model - measured) /\n"
        "measured: n, median and p90 of its size, MAPE and signed bias, for\n"
        "all iterations, by phase mix, by rows and by context; the same for\n"
        "adapter loads.  --against DB2, the measured-clock replay of the same\n"
        "scenario, seed and policies: TTFT and TBT p50/p99 of both clocks.\n"
        "Every figure is printed with its evidence class (lorasim audit).\n"
        "\n"
        "options:\n"
        "  --against DB2   the same run under --clock measured\n"
        "  --out DIR       write DIR/fidelity.csv, fidelity-e2e.csv and the\n"
        "                  predicted-against-measured plots (PNG and SVG,\n"
        "                  log-log) with their .dat files and script\n"
        "  --json PATH     every figure as JSON\n"
        "  -h, --help      this text\n"
        "\n"
        "exit status: 0 ok, 1 a write failed, 2 bad usage or input\n"
        "(E_FID_NOT_RUN, E_FID_NO_MEASURED, E_FID_MISMATCH); docs/FIDELITY.md\n",
        f);
}

int lsim_fidelity_main(int argc, char **argv) {
  enum { O_AGAINST = 256, O_OUT, O_JSON };
  static const struct option opts[] = {
      {"against", required_argument, NULL, O_AGAINST},
      {"out", required_argument, NULL, O_OUT},
      {"json", required_argument, NULL, O_JSON},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  const char *against = NULL, *out = NULL, *json = NULL;
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case O_AGAINST: against = optarg; break;
    case O_OUT: out = optarg; break;
    case O_JSON: json = optarg; break;
    case 'h': lsim__usage(stdout); return 0;
    default: lsim__usage(stderr); return 2;
    }
  }
  if (optind != argc - 1) {
    fprintf(stderr, "lorasim fidelity: error: E_USAGE: expected exactly one "
                    "database\n");
    lsim__usage(stderr);
    return 2;
  }
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  char dir[LSIM_OUT_PATH_MAX];
  lsim_err rc = 0;
  if (out) {
    size_t dl = strlen(out);
    if (dl >= sizeof dir - 64)
      return lsim_cli_fail("fidelity", LSIM_E_USAGE, "--out: path too long");
    snprintf(dir, sizeof dir, "%s", out);
    while (dl > 1 && dir[dl - 1] == '/')
      dir[--dl] = 0;
  }
  /* every output refused before anything is read */
  if ((out && (rc = lsim_out_dir_check(dir, &eb))) ||
      (json && (rc = lsim_out_check(json, &eb))))
    return lsim_cli_fail("fidelity", rc, eb.msg);
  static lsim__run ra, rb;
  sqlite3 *h = NULL, *h2 = NULL;
  lsim__spans it = {0}, ld = {0};
  lsim__stat st[LSIM__MAX_STATS];
  lsim__lat lat[LSIM__NLAT];
  int have_ctx = 0, n = 0, status = 0;
  rc = lsim__fid_open(argv[optind], &h, &ra, &eb);
  if (!rc && against)
    rc = lsim__fid_open(against, &h2, &rb, &eb);
  /* The per-iteration and per-load figures come from DB; a model-clock
  ** run on the model backend measured nothing, and then they come from
  ** the measured-clock run of --against, which records the model's time
  ** of every span beside the measured one (the end-to-end comparison
  ** needs no measured time in DB). */
  sqlite3 *hs = h;
  lsim__run *rs = &ra;
  if (!rc) {
    rc = lsim__fid_iters(h, &ra, &it, &have_ctx, &eb);
    if (rc == LSIM_E_FID_NO_MEASURED && against) {
      hs = h2, rs = &rb;
      eb = (lsim_errbuf)LSIM_ERRBUF_INIT;
      rc = lsim__fid_iters(hs, rs, &it, &have_ctx, &eb);
    }
  }
  if (!rc)
    rc = lsim__fid_loads(hs, rs, &ld, &eb);
  if (!rc && against)
    rc = lsim__fid_against(h, &ra, h2, &rb, lat, &eb);
  if (!rc && (n = lsim__fid_stats(&it, have_ctx, &ld, st, &eb)) < 0)
    rc = eb.code;
  lsim__evid ev;
  lsim__fid_evid(rs->backend, &ev);
  char note[1300] = "";
  if (!rc && out && !(rc = lsim_out_mkdir(dir, &eb)) &&
      !(rc = lsim__write_csv(dir, &ev, st, n, &eb)) && against)
    rc = lsim__write_e2e(dir, lat, &eb);
  if (!rc && out)
    rc = lsim__write_plots(dir, rs, &it, &ld, note, sizeof note, &eb);
  if (!rc && json)
    rc = lsim__write_json(json, &ra, &ev, st, n, against ? &rb : NULL, lat,
                          &eb);
  if (rc) {
    status = lsim_cli_fail("fidelity", rc, eb.msg);
  } else {
    lsim__print(stdout, &ra, rs, &ev, st, n, against ? &rb : NULL, lat);
    char shown[LSIM_ESC_SIZE(LSIM_OUT_PATH_MAX)];
    if (out)
      printf("  files      %s/fidelity.csv%s, fidelity-iterations.png/.svg"
             "%s\n",
             lsim_console_str(shown, sizeof shown, dir),
             against ? ", fidelity-e2e.csv" : "",
             ld.n ? ", fidelity-loads.png/.svg" : "");
    if (note[0])
      printf("  plots      %s\n", lsim_console_str(shown, sizeof shown, note));
  }
  free(it.v);
  free(ld.v);
  sqlite3_close(h);
  sqlite3_close(h2);
  return status;
}
