/*
** calibrate.c: `lorasim calibrate` and cost profiles (calibrate.h).
**
** The command runs a sweep of synthetic iteration plans through the `cuda`
** replay backend itself (the device pool's chosen kernel, at the
** replay's module shape), so what it fits is exactly what a replay with
** --backend cuda records as iterations.backend_ns: CUDA-event device time
** of the iteration's metadata copy and launch.  Each shape runs `reps`
** times after one warm-up; the median is the measurement.  The five
** coefficients of the cost model are fitted by least squares on the
** relative error (rows weighted by 1/measured), negative coefficients
** dropped to zero and the rest refitted, then rounded to the model's
** integer units.  With --holdout, a scenario is replayed with --backend
** cuda and the profile's prediction of every iteration with adapter rows
** is compared with its measured device time: median and p90 relative
** error.  Nothing here steers a replay's decisions.  Profiles are read by
** sim/profile.c.
*/
#include "calibrate.h"
#include "cli.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "outfile.h"
#include "profile.h"
#include "../engine/plan.h"
#include "json.h"
#include "replay.h"
#include "slurp.h"
#include "scenario.h"
#ifdef LSIM_HAVE_CUDA
#include "../backends/cuda/cuda.h"
#endif

void lsim_calibrate_usage(FILE *f) {
  fputs("usage: lorasim calibrate [options]\n"
        "\n"
        "Sweep iteration shapes (rows, adapters, ranks, prefill/decode mix)\n"
        "through the cuda backend's pool kernels on the GPU, timing each with\n"
        "CUDA events, fit the iteration cost model to the measured device\n"
        "times and write it as a cost profile (JSON) that scenarios\n"
        "($.cost.profile) and `lorasim replay --profile` use.\n"
        "\n"
        "options:\n"
        "  --out PATH           profile to write (default\n"
        "                       results/profile-cuda.json)\n"
        "  --reps N             timed runs per shape after one warm-up\n"
        "                       (default 11)\n"
        "  --holdout SCENARIO   replay it with --backend cuda and report the\n"
        "                       profile's error per iteration against the\n"
        "                       measured device time (median, p90)\n"
        "  --db PATH            database of the held-out replay (default\n"
        "                       results/calibrate-holdout.db)\n"
        "  --verbose            print every shape's measurement and prediction\n"
        "  --tensor-shape S     'small' (default): the replay's 16x16 module;\n"
        "                       'model': every layer and target module of the\n"
        "                       --holdout scenario at its shapes, as replay\n"
        "                       --tensor-shape model runs them\n"
        "  --tensor-layers N    with --tensor-shape model: the first N layers\n"
        "  -h, --help           this text\n"
        "\n"
        "Needs a CUDA build and a device: without one it fails (exit 1).\n"
        "exit status: 0 ok, 1 failed, 2 bad usage\n",
        f);
}

#ifdef LSIM_HAVE_CUDA

static int lsim__cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

static int lsim__cmp_dbl(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The q-quantile (nearest rank) of v[0..n) (sorted here). */
static double lsim__quantile(double *v, int n, double q) {
  if (n <= 0)
    return NAN;
  qsort(v, (size_t)n, sizeof *v, lsim__cmp_dbl);
  int k = (int)ceil(q * n) - 1;
  return v[k < 0 ? 0 : (k >= n ? n - 1 : k)];
}

/* Features of a plan, in the cost model's order. */
static void lsim__features(const lsim_plan *p, double x[5]) {
  x[0] = 1;
  x[1] = (double)p->prefill_rows;
  x[2] = (double)p->decode_rows;
  x[3] = (double)p->segments;
  /* per 1000 rank rows: its coefficient in ns is rank_row_ps in ps */
  x[4] = (double)p->true_rank_rows / 1000.0;
}

/*
** Weighted least squares with non-negative coefficients: minimise
** sum_i ((x_i . c - y_i) / y_i)^2, columns normalised, by normal equations
** (Gaussian elimination with partial pivoting); a negative coefficient is
** fixed at zero and the rest refitted.  c[j] in ns per unit of feature j.
*/
static void lsim__fit(const double (*X)[5], const double *y, int n,
                      double c[5]) {
  int on[5] = {1, 1, 1, 1, 1};
  double scale[5];
  for (int j = 0; j < 5; j++) {
    scale[j] = 0;
    for (int i = 0; i < n; i++)
      if (fabs(X[i][j]) > scale[j])
        scale[j] = fabs(X[i][j]);
    if (scale[j] == 0)
      on[j] = 0;
  }
  for (int round = 0; round < 5; round++) {
    int idx[5], m = 0;
    double M[5][6];
    for (int j = 0; j < 5; j++)
      if (on[j])
        idx[m++] = j;
    memset(M, 0, sizeof M);
    for (int i = 0; i < n; i++) {
      double w = 1.0 / y[i];
      for (int a = 0; a < m; a++) {
        double xa = X[i][idx[a]] / scale[idx[a]] * w;
        for (int b = 0; b < m; b++)
          M[a][b] += xa * X[i][idx[b]] / scale[idx[b]] * w;
        M[a][m] += xa * y[i] * w;
      }
    }
    for (int col = 0; col < m; col++) {
      int piv = col;
      for (int r = col + 1; r < m; r++)
        if (fabs(M[r][col]) > fabs(M[piv][col]))
          piv = r;
      for (int k = 0; k <= m; k++) {
        double t = M[col][k];
        M[col][k] = M[piv][k];
        M[piv][k] = t;
      }
      if (fabs(M[col][col]) < 1e-300)
        continue;
      for (int r = 0; r < m; r++) {
        if (r == col)
          continue;
        double f = M[r][col] / M[col][col];
        for (int k = col; k <= m; k++)
          M[r][k] -= f * M[col][k];
      }
    }
    int neg = -1;
    for (int j = 0; j < 5; j++)
      c[j] = 0;
    for (int a = 0; a < m; a++) {
      double v = fabs(M[a][a]) < 1e-300 ? 0 : M[a][m] / M[a][a];
      c[idx[a]] = v / scale[idx[a]];
      if (c[idx[a]] < 0 && (neg < 0 || c[idx[a]] < c[neg]))
        neg = idx[a];
    }
    if (neg < 0)
      return;
    on[neg] = 0;
  }
  for (int j = 0; j < 5; j++)
    if (c[j] < 0)
      c[j] = 0;
}

/* One sweep shape: requests of one phase mix over nad adapters. */
typedef struct lsim__shape {
  int npre, pre_rows; /* prefill requests and their prompt length */
  int ndec;           /* decode requests */
  int nad, rank;      /* adapters; rank 0: ranks 8,16,32,64 in turn */
} lsim__shape;

static lsim_err lsim__shape_plan(const lsim__shape *s, int64_t iter,
                                 lsim_plan *p, lsim_errbuf *eb) {
  static const int mixed[] = {8, 16, 32, 64};
  lsim_plan_reset(p);
  p->iter = iter;
  int k = 0;
  lsim_err rc = 0;
  for (int i = 0; i < s->npre + s->ndec && !rc; i++, k++) {
    int a = k % s->nad;
    lsim_plan_entry e = {k + 1, 0, a, s->rank ? s->rank : mixed[a % 4],
                         i < s->npre ? LSIM_PHASE_PREFILL : LSIM_PHASE_DECODE,
                         i < s->npre ? s->pre_rows : 1, 0, 0, 0, 0};
    rc = lsim_plan_push(p, &e, eb);
  }
  return rc ? rc : lsim_plan_finish(p, eb);
}

typedef struct lsim__holdout {
  int64_t iterations, used;
  double med, p90, meas_med, pred_med, total_ratio;
} lsim__holdout;

static lsim_err lsim__run_holdout(const char *scn, const char *db,
                                  const lsim_cost_model *cm, int tmodel,
                                  int tlayers, lsim__holdout *h,
                                  lsim_errbuf *eb) {
  static lsim_scenario sc;
  lsim_summary sum;
  lsim_err rc = lsim_scenario_load(&sc, scn, eb);
  sqlite3 *d = NULL;
  sqlite3_stmt *st = NULL;
  double *rel = NULL, *meas = NULL, *pred = NULL;
  int64_t cap = 0;
  double tm = 0, tp = 0;
  if (rc)
    return rc;
  snprintf(sc.backend, sizeof sc.backend, "cuda");
  lsim_replay_opts o = {.db_path = db,
                        .command_line = "lorasim calibrate (held-out replay)",
                        .tensor_model = tmodel,
                        .tensor_layers = tlayers};
  if ((rc = lsim_replay_run(&sc, &o, &sum, eb)))
    return rc;
  if (sqlite3_open_v2(db, &d, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(d,
                         "SELECT prefill_rows, decode_rows, segments, "
                         "true_rank_rows, backend_ns FROM iterations ORDER BY "
                         "iter",
                         -1, &st, NULL) != SQLITE_OK) {
    rc = lsim_fail(eb, LSIM_E_DB, "%s: %s", db, d ? sqlite3_errmsg(d) : "open");
    goto out;
  }
  memset(h, 0, sizeof *h);
  while (sqlite3_step(st) == SQLITE_ROW) {
    h->iterations++;
    lsim_plan p = LSIM_PLAN_INIT;
    p.prefill_rows = sqlite3_column_int64(st, 0);
    p.decode_rows = sqlite3_column_int64(st, 1);
    p.segments = (int)sqlite3_column_int64(st, 2);
    p.true_rank_rows = sqlite3_column_int64(st, 3);
    int64_t m = sqlite3_column_int64(st, 4);
    if (sqlite3_column_type(st, 4) == SQLITE_NULL || m <= 0 ||
        p.true_rank_rows == 0)
      continue; /* nothing launched: no device time to compare */
    if (h->used == cap) {
      cap = cap ? 2 * cap : 1024;
      double *a = realloc(rel, (size_t)cap * sizeof *a);
      if (a)
        rel = a;
      double *b = realloc(meas, (size_t)cap * sizeof *b);
      if (b)
        meas = b;
      double *c = realloc(pred, (size_t)cap * sizeof *c);
      if (c)
        pred = c;
      if (!a || !b || !c) {
        rc = lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
        goto out;
      }
    }
    double pr = (double)lsim_cost_plan_ns(cm, &p);
    rel[h->used] = fabs(pr - (double)m) / (double)m;
    meas[h->used] = (double)m;
    pred[h->used] = pr;
    tm += (double)m;
    tp += pr;
    h->used++;
  }
  if (h->used == 0) {
    rc = lsim_fail(eb, LSIM_E_USAGE,
                   "held-out replay %s ran no iteration with adapter rows",
                   scn);
    goto out;
  }
  h->med = lsim__quantile(rel, (int)h->used, 0.5);
  h->p90 = lsim__quantile(rel, (int)h->used, 0.9);
  h->meas_med = lsim__quantile(meas, (int)h->used, 0.5);
  h->pred_med = lsim__quantile(pred, (int)h->used, 0.5);
  h->total_ratio = tp / tm;
out:
  sqlite3_finalize(st);
  sqlite3_close(d);
  free(rel);
  free(meas);
  free(pred);
  return rc;
}

/* Write the profile beside its target and rename it into place. */
static lsim_err lsim__write_profile(const char *path, const char *json,
                                    lsim_errbuf *eb) {
  size_t n = strlen(json);
  char *buf = malloc(n + 2);
  if (!buf)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  memcpy(buf, json, n);
  buf[n] = '\n';
  lsim_err rc = lsim_out_write_all(path, buf, n + 1, eb); /* sim/outfile.h */
  free(buf);
  return rc;
}

static int lsim__calibrate(const char *out, int reps, const char *holdout,
                           const char *db, int verbose, int tmodel,
                           int tlayers) {
  char desc[256];
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  if (lsim_cuda_describe(desc, sizeof desc) <= 0) {
    char m[400];
    snprintf(m, sizeof m, "calibrate needs a CUDA device: %s", desc);
    return lsim_cli_fail("calibrate", LSIM_E_DEV_NO_DEVICE, m);
  }
  /* the sweep: decode-only, prefill-only and mixed batches over adapter
  ** counts and ranks (0: mixed ranks 8..64 in one batch) */
  static const int ranks[] = {8, 16, 64, 0};
  static const int nads[] = {1, 4, 16, 32};
  static const lsim__shape mix[] = {
      {0, 0, 1, 0, 0},   {0, 0, 8, 0, 0},    {0, 0, 32, 0, 0},
      {0, 0, 128, 0, 0}, {1, 16, 0, 0, 0},   {1, 256, 0, 0, 0},
      {4, 32, 0, 0, 0},  {4, 128, 0, 0, 0},  {2, 64, 32, 0, 0},
      {1, 200, 96, 0, 0}};
  const int nmix = (int)(sizeof mix / sizeof mix[0]);
  const int npts = 4 * 4 * nmix;
  double(*X)[5] = calloc((size_t)npts, sizeof *X);
  double *y = calloc((size_t)npts, sizeof *y), *rel = NULL;
  int64_t *t = calloc((size_t)reps + 1, sizeof *t);
  lsim_backend be = {NULL, NULL};
  lsim_plan p = LSIM_PLAN_INIT;
  lsim_err rc = 0;
  int n = 0, status = 1;
  char *json = NULL;
  cJSON *root = NULL;
  if (!X || !y || !t) {
    rc = lsim_fail(&eb, LSIM_E_NOMEM, "out of memory");
    goto out;
  }
  lsim_backend_cfg cfg = {.seed = 1,
                          .d_in = LSIM_REPLAY_TENSOR_DIM,
                          .d_out = LSIM_REPLAY_TENSOR_DIM};
  /* model shape: the held-out scenario's layers and targets, as a replay
  ** with --tensor-shape model runs them */
  static lsim_scenario msc;
  int tdin[LSIM_MAX_TARGETS], tdout[LSIM_MAX_TARGETS];
  if (tmodel) {
    if ((rc = lsim_scenario_load(&msc, holdout, &eb)))
      goto out;
    for (int i = 0; i < msc.ntargets; i++) {
      tdin[i] = msc.targets[i].d_in;
      tdout[i] = msc.targets[i].d_out;
    }
    cfg.layers = tlayers > 0 && tlayers < msc.layers ? tlayers : msc.layers;
    cfg.ntargets = msc.ntargets;
    cfg.target_d_in = tdin;
    cfg.target_d_out = tdout;
  }
  if ((rc = lsim_backend_open(&be, "cuda", &cfg, &eb)))
    goto out;
  printf("calibrate: %s\n", desc);
  if (tmodel)
    printf("calibrate: pool kernels, fp16, model shape of %s: %d layers x "
           "%d targets, %d shapes x %d reps\n", holdout, cfg.layers,
           cfg.ntargets, npts, reps);
  else
    printf("calibrate: pool kernels, fp16, %d x %d module, %d shapes x %d "
           "reps\n", LSIM_REPLAY_TENSOR_DIM, LSIM_REPLAY_TENSOR_DIM, npts,
           reps);
  int64_t iter = 0;
  for (int ri = 0; ri < 4 && !rc; ri++)
    for (int ai = 0; ai < 4 && !rc; ai++)
      for (int mi = 0; mi < nmix && !rc; mi++) {
        lsim__shape s = mix[mi];
        s.nad = nads[ai];
        s.rank = ranks[ri];
        for (int r = 0; r <= reps && !rc; r++) {
          lsim_backend_result res;
          if ((rc = lsim__shape_plan(&s, iter++, &p, &eb)) ||
              (rc = lsim_backend_run(&be, &p, &res, &eb)))
            break;
          t[r] = res.backend_ns;
        }
        if (rc)
          break;
        qsort(t + 1, (size_t)reps, sizeof *t, lsim__cmp_i64); /* t[0]: warm-up */
        lsim__features(&p, X[n]);
        y[n] = (double)t[1 + reps / 2];
        if (y[n] <= 0) {
          rc = lsim_fail(&eb, LSIM_E_BACKEND, "a shape measured %.0f ns", y[n]);
          break;
        }
        n++;
      }
  if (rc)
    goto out;
  double c[5];
  lsim__fit((const double(*)[5])X, y, n, c);
  lsim_cost_model cm = {llround(c[0]), llround(c[1]), llround(c[2]),
                        llround(c[3]), llround(c[4]), {0}};
  rel = calloc((size_t)n, sizeof *rel);
  if (!rel) {
    rc = lsim_fail(&eb, LSIM_E_NOMEM, "out of memory");
    goto out;
  }
  for (int i = 0; i < n; i++) {
    lsim_plan q = LSIM_PLAN_INIT;
    q.prefill_rows = (int64_t)X[i][1];
    q.decode_rows = (int64_t)X[i][2];
    q.segments = (int)X[i][3];
    q.true_rank_rows = (int64_t)llround(X[i][4] * 1000.0);
    rel[i] = fabs((double)lsim_cost_plan_ns(&cm, &q) - y[i]) / y[i];
  }
  if (verbose)
    for (int i = 0; i < n; i++)
      printf("calibrate: shape %3d: prefill_rows %5.0f decode_rows %4.0f "
             "segments %3.0f true_rank_rows %6.0f measured %7.0f ns, "
             "rel err %5.1f%%\n", i, X[i][1], X[i][2], X[i][3],
             X[i][4] * 1000.0, y[i], 100 * rel[i]);
  double fmed = lsim__quantile(rel, n, 0.5), fp90 = lsim__quantile(rel, n, 0.9);
  double ymin = y[0], ymax = y[0];
  for (int i = 0; i < n; i++) {
    ymin = y[i] < ymin ? y[i] : ymin;
    ymax = y[i] > ymax ? y[i] : ymax;
  }
  printf("calibrate: measured medians %.0f .. %.0f ns per iteration\n", ymin,
         ymax);
  printf("calibrate: fitted cost: iter_fixed_ns %lld, prefill_token_ns %lld, "
         "decode_token_ns %lld, segment_ns %lld, rank_row_ps %lld\n",
         (long long)cm.iter_fixed_ns, (long long)cm.prefill_token_ns,
         (long long)cm.decode_token_ns, (long long)cm.segment_ns,
         (long long)cm.rank_row_ps);
  printf("calibrate: fit (in sample, %d shapes): median rel err %.1f%%, p90 "
         "%.1f%%\n", n, 100 * fmed, 100 * fp90);
  lsim_backend_close(&be);

  root = cJSON_CreateObject();
  cJSON *co = cJSON_CreateObject(), *fit = cJSON_CreateObject();
  if (!root || !co || !fit) {
    cJSON_Delete(co);
    cJSON_Delete(fit);
    rc = lsim_fail(&eb, LSIM_E_NOMEM, "out of memory");
    goto out;
  }
  cJSON_AddNumberToObject(root, "lorasim_profile", 1);
  cJSON_AddStringToObject(root, "kernel", "cuda pool, chosen path over page tables (backend cuda)");
  cJSON_AddStringToObject(root, "device", desc);
  cJSON_AddStringToObject(root, "dtype", "fp16");
  if (tmodel) {
    cJSON_AddStringToObject(root, "tensor_shape", "model");
    cJSON_AddNumberToObject(root, "layers", cfg.layers);
    cJSON *ts = cJSON_AddArrayToObject(root, "targets");
    for (int i = 0; ts && i < cfg.ntargets; i++) {
      cJSON *o = cJSON_CreateObject();
      if (!o)
        break;
      cJSON_AddStringToObject(o, "name", msc.targets[i].name);
      cJSON_AddNumberToObject(o, "d_in", tdin[i]);
      cJSON_AddNumberToObject(o, "d_out", tdout[i]);
      cJSON_AddItemToArray(ts, o);
    }
  } else {
    cJSON_AddStringToObject(root, "tensor_shape", "small");
    cJSON_AddNumberToObject(root, "d_in", LSIM_REPLAY_TENSOR_DIM);
    cJSON_AddNumberToObject(root, "d_out", LSIM_REPLAY_TENSOR_DIM);
  }
  cJSON_AddNumberToObject(co, "iter_fixed_ns", (double)cm.iter_fixed_ns);
  cJSON_AddNumberToObject(co, "prefill_token_ns", (double)cm.prefill_token_ns);
  cJSON_AddNumberToObject(co, "decode_token_ns", (double)cm.decode_token_ns);
  cJSON_AddNumberToObject(co, "segment_ns", (double)cm.segment_ns);
  cJSON_AddNumberToObject(co, "rank_row_ps", (double)cm.rank_row_ps);
  cJSON_AddItemToObject(root, "cost", co);
  cJSON_AddNumberToObject(fit, "shapes", n);
  cJSON_AddNumberToObject(fit, "reps", reps);
  cJSON_AddNumberToObject(fit, "median_rel_err", fmed);
  cJSON_AddNumberToObject(fit, "p90_rel_err", fp90);
  cJSON_AddItemToObject(root, "fit", fit);
  if (holdout) {
    lsim__holdout h;
    if ((rc = lsim__run_holdout(holdout, db, &cm, tmodel, tlayers, &h, &eb)))
      goto out;
    printf("calibrate: held-out replay %s: %lld iterations, %lld with "
           "adapter rows\n", holdout, (long long)h.iterations,
           (long long)h.used);
    printf("calibrate: held-out error per iteration: median %.1f%%, p90 "
           "%.1f%% (measured median %.0f ns, predicted median %.0f ns, "
           "total predicted / measured %.3f)\n",
           100 * h.med, 100 * h.p90, h.meas_med, h.pred_med, h.total_ratio);
    cJSON *ho = cJSON_CreateObject();
    if (ho) {
      cJSON_AddStringToObject(ho, "scenario", holdout);
      cJSON_AddNumberToObject(ho, "iterations", (double)h.used);
      cJSON_AddNumberToObject(ho, "median_rel_err", h.med);
      cJSON_AddNumberToObject(ho, "p90_rel_err", h.p90);
      cJSON_AddNumberToObject(ho, "measured_median_ns", h.meas_med);
      cJSON_AddNumberToObject(ho, "predicted_median_ns", h.pred_med);
      cJSON_AddNumberToObject(ho, "total_ratio", h.total_ratio);
      cJSON_AddItemToObject(root, "holdout", ho);
    }
  }
  json = cJSON_Print(root);
  if (!json) {
    rc = lsim_fail(&eb, LSIM_E_NOMEM, "out of memory");
    goto out;
  }
  if ((rc = lsim__write_profile(out, json, &eb)))
    goto out;
  printf("calibrate: profile written to %s\n", out);
  status = 0;
out:
  if (be.ops)
    lsim_backend_close(&be);
  lsim_plan_release(&p);
  cJSON_Delete(root);
  free(json);
  free(X);
  free(y);
  free(t);
  free(rel);
  if (rc)
    return lsim_cli_fail("calibrate", rc, eb.msg);
  return status;
}
#endif /* LSIM_HAVE_CUDA */

int lsim_calibrate_cmd(int argc, char **argv) {
  enum { O_OUT = 256, O_REPS, O_HOLDOUT, O_DB, O_VERBOSE, O_TSHAPE,
         O_TLAYERS };
  static const struct option opts[] = {
      {"out", required_argument, NULL, O_OUT},
      {"reps", required_argument, NULL, O_REPS},
      {"holdout", required_argument, NULL, O_HOLDOUT},
      {"db", required_argument, NULL, O_DB},
      {"verbose", no_argument, NULL, O_VERBOSE},
      {"tensor-shape", required_argument, NULL, O_TSHAPE},
      {"tensor-layers", required_argument, NULL, O_TLAYERS},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  const char *out = NULL, *holdout = NULL, *db = NULL;
  int reps = 11, verbose = 0, tmodel = 0, tlayers = 0, c;
  char *end;
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case O_OUT: out = optarg; break;
    case O_HOLDOUT: holdout = optarg; break;
    case O_DB: db = optarg; break;
    case O_VERBOSE: verbose = 1; break;
    case O_TSHAPE:
      if (strcmp(optarg, "model") != 0 && strcmp(optarg, "small") != 0)
        return lsim_cli_fail("calibrate", LSIM_E_USAGE,
                             "--tensor-shape: expected 'small' or 'model'");
      tmodel = strcmp(optarg, "model") == 0;
      break;
    case O_TLAYERS:
      errno = 0;
      tlayers = (int)strtol(optarg, &end, 10);
      if (end == optarg || *end || errno || tlayers < 1 || tlayers > 1024)
        return lsim_cli_fail("calibrate", LSIM_E_USAGE, "--tensor-layers: expected 1..1024");
      break;
    case O_REPS:
      errno = 0;
      reps = (int)strtol(optarg, &end, 10);
      if (end == optarg || *end || errno || reps < 1 || reps > 1000)
        return lsim_cli_fail("calibrate", LSIM_E_USAGE, "--reps: expected 1..1000");
      break;
    case 'h': lsim_calibrate_usage(stdout); return 0;
    default: lsim_calibrate_usage(stderr); return 2;
    }
  }
  if (optind != argc)
    return lsim_cli_fail("calibrate", LSIM_E_USAGE, "unexpected argument (see lorasim "
                                       "calibrate --help)");
  if (tmodel && !holdout)
    return lsim_cli_fail("calibrate", LSIM_E_USAGE, "--tensor-shape model takes the "
                                       "model's shape from --holdout "
                                       "SCENARIO");
  if (tlayers && !tmodel)
    return lsim_cli_fail("calibrate", LSIM_E_USAGE,
                         "--tensor-layers needs --tensor-shape model");
  /* the files named on the command line before the device: a missing
  ** --holdout or a --out/--db in no directory is bad input (exit 2) on any
  ** machine, before minutes of measurement */
  {
    lsim_errbuf ieb = LSIM_ERRBUF_INIT;
    struct stat hst;
    lsim_err irc = 0;
    if (holdout && stat(holdout, &hst) != 0 &&
        (errno == ENOENT || errno == ENOTDIR))
      irc = lsim_fail(&ieb, LSIM_E_FILE_MISSING,
                      "%s: no such file or directory", holdout);
    if (!irc && out)
      irc = lsim_out_check(out, &ieb);
    if (!irc && db)
      irc = lsim_out_check(db, &ieb);
    if (irc)
      return lsim_cli_fail("calibrate", irc, ieb.msg);
  }
#ifdef LSIM_HAVE_CUDA
  if ((!out || !db) && mkdir("results", 0777) != 0 && errno != EEXIST)
    return lsim_cli_fail("calibrate", LSIM_E_IO, "cannot create directory results/");
  return lsim__calibrate(out ? out : "results/profile-cuda.json", reps,
                         holdout, db ? db : "results/calibrate-holdout.db",
                         verbose, tmodel, tlayers);
#else
  (void)out;
  (void)holdout;
  (void)db;
  (void)verbose;
  (void)tmodel;
  (void)tlayers;
  return lsim_cli_fail("calibrate", LSIM_E_DEV_NO_DEVICE,
                       "calibrate needs a CUDA device: this lorasim was built "
                       "without CUDA (nvcc was not found at configure time)");
#endif
}
