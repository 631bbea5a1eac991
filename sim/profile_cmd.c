/*
** profile_cmd.c: `lorasim profile` (profile_cmd.h, docs/PROFILE.md).
**
** The grid is designed, not sampled from any scenario: prefills of 1 to
** 8192 rows after 0 to 32k tokens of context, decode batches of 1 to 256
** rows at contexts of 128 to 32k, mixed batches, and adapter batches of 1
** to 64 adapters at ranks 8 to 128 over each target set; points whose KV
** and adapter pages do not fit the pool are left out (counted).  Each
** point becomes an engine-shaped plan (entries in packed order with their
** positions: ctx, sample, kv) and is run through the backend exactly as a
** replay runs it: the backend is opened with the pool geometry and
** follows the residency protocol (backends/backend.h), so every sequence's
** KV pages are allocated to its KV object, every adapter is staged into
** its pages and published, each run is announced by a launch of the
** adapters it names, and at the end of the point the adapters are retired
** at their fence and the KV released.  The first run of a point warms up;
** the next `reps` are recorded, each as one row of the measurement file.
** Then the host-to-device copy sizes (1 MiB to 1 GiB, pinned) are timed.
** The fit (sim/profile_fit.c) and the profile follow.
**
** The clock is read only to stop taking new points past --budget-s; no
** recorded number comes from it.
*/
#include "profile_cmd.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../backends/backend.h"
#include "../engine/plan.h"
#include "cli.h"
#include "outfile.h"
#include "profile.h"
#include "profile_fit.h"
#include "replay.h"
#include "scenario.h"
#ifdef LSIM_HAVE_CUDA
#include "../backends/cuda/cuda.h"
#include "../backends/cuda/h2d.h"
#endif

void lsim_profile_usage(FILE *f) {
  fputs(
      "usage: lorasim profile --model PRESET [options]\n"
      "       lorasim profile --model PRESET --fit MEASUREMENTS.csv [options]\n"
      "\n"
      "Run whole forward passes of a designed grid of iteration shapes\n"
      "(prefill, decode, mixed and adapter batches; host-to-device copies)\n"
      "on the GPU through the cuda backend's full executor, record every\n"
      "measurement (CSV), fit the profiled cost model and write a cost\n"
      "profile (JSON, version 2) that scenarios use through $.cost.profile,\n"
      "--profile, or $.gpu with $.model.preset (docs/PROFILE.md).\n"
      "\n"
      "options:\n"
      "  --model PRESET       the model shape (a preset of $.model.preset)\n"
      "  --layers N           run only the first N layers (the profile is\n"
      "                       then for an N-layer model)\n"
      "  --out PATH           profile to write (default\n"
      "                       results/profile-PRESET.json)\n"
      "  --csv PATH           measurements to write (default: the profile's\n"
      "                       path with .csv)\n"
      "  --quick              a smaller grid (about 60 points, 3 reps): a few\n"
      "                       minutes of device time for an 8B model\n"
      "  --reps N             timed runs per point after one warm-up\n"
      "                       (default 5, 3 with --quick)\n"
      "  --target-sets LIST   adapter target sets, of qv, qkvo, all\n"
      "                       (default qv,qkvo,all; --quick: qkvo,all)\n"
      "  --max-ctx N          the longest context of the grid (default\n"
      "                       32768, --quick 16384)\n"
      "  --pool-gib G         the page pool (KV and adapters), GiB (default\n"
      "                       24)\n"
      "  --page-bytes N       page size (default 2097152)\n"
      "  --budget-s S         stop taking new points after S seconds and fit\n"
      "                       what was measured (default: no limit)\n"
      "  --backend NAME       cuda (default), or cpu_ref: the same plans and\n"
      "                       protocol through the exact CPU executor, to\n"
      "                       check them without a GPU (its times are not a\n"
      "                       GPU's, and no copies are timed)\n"
      "  --gpu CLASS          the GPU class recorded (default: from the\n"
      "                       device name, e.g. h200), the directory under\n"
      "                       profiles/ that $.gpu names\n"
      "  --gpu-name NAME      with --fit: the device the file was measured on\n"
      "  --commit SHA         the source commit recorded (default unknown)\n"
      "  --dry-run            write the grid's points (features, ns 0) to the\n"
      "                       CSV and stop: no device needed\n"
      "  --fit PATH           fit a recorded measurement file instead of\n"
      "                       measuring: no device needed\n"
      "  --verbose            print every point\n"
      "  -h, --help           this text\n"
      "\n"
      "Without a CUDA device (and without --fit, --dry-run or --backend\n"
      "cpu_ref) it fails with E_DEV_NO_DEVICE, exit 2, writing nothing.\n"
      "exit status: 0 ok, 1 failed, 2 bad usage or no device\n",
      f);
}

/* ---- options ------------------------------------------------------------- */

/* The target sets a grid may use. */
static const struct {
  const char *name;
  unsigned mods; /* bit m: enum lsim_shape_module m */
} lsim__tsets[] = {
    {"qv", (1u << LSIM_MOD_Q) | (1u << LSIM_MOD_V)},
    {"qkvo", (1u << LSIM_MOD_Q) | (1u << LSIM_MOD_K) | (1u << LSIM_MOD_V) |
                 (1u << LSIM_MOD_O)},
    {"all", (1u << LSIM_MOD_COUNT) - 1},
};
#define LSIM__NTSETS 3

typedef struct lsim__opts {
  const char *model, *out, *csv, *backend, *gpu, *gpu_name, *commit, *fit;
  int layers, quick, reps, max_ctx, dry_run, verbose;
  int tsets[LSIM__NTSETS], ntsets;
  double pool_gib, budget_s;
  int64_t page_bytes;
} lsim__opts;

/* ---- the grid ------------------------------------------------------------ */

typedef struct lsim__gp {
  int cls;             /* LSIM_PROF_* */
  int tset;            /* index into the run's target sets */
  int npre, pre_rows;  /* prefill sequences and their rows */
  int64_t pre_ctx;     /* their prior context */
  int ndec;            /* decode sequences */
  int64_t dec_ctx;     /* their context */
  int nad, rank;       /* adapters (0: base only) and their rank */
} lsim__gp;

typedef struct lsim__grid {
  lsim__gp *p;
  int n, cap;
} lsim__grid;

static lsim_err lsim__add(lsim__grid *g, lsim__gp p, lsim_errbuf *eb) {
  if (g->n == g->cap) {
    int nc = g->cap ? 2 * g->cap : 128;
    lsim__gp *np = realloc(g->p, (size_t)nc * sizeof *np);
    if (!np)
      return lsim_fail(eb, LSIM_E_NOMEM, "out of memory building the grid");
    g->p = np;
    g->cap = nc;
  }
  g->p[g->n++] = p;
  return 0;
}

#define LSIM__N(a) ((int)(sizeof(a) / sizeof((a)[0])))

static lsim_err lsim__grid_build(const lsim__opts *o, lsim__grid *g,
                                 lsim_errbuf *eb) {
  static const int pre_full[] = {1, 8, 32, 128, 256, 512, 1024, 2048, 4096,
                                 8192};
  static const int pre_quick[] = {1, 128, 512, 2048, 8192};
  static const int64_t pctx_full[] = {0, 2048, 8192, 32768};
  static const int64_t pctx_quick[] = {0, 8192};
  static const int dec_full[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
  static const int dec_quick[] = {1, 16, 64, 256};
  static const int64_t dctx_full[] = {128, 512, 2048, 8192, 32768};
  static const int64_t dctx_quick[] = {128, 2048, 8192};
  static const int mix_dec[] = {4, 16, 64, 128};
  static const int64_t mix_ctx[] = {1024, 4096};
  static const int mix_pre[] = {128, 512, 1024, 4096};
  static const int nads_full[] = {1, 4, 16, 64};
  static const int nads_quick[] = {1, 8, 64};
  static const int ranks_full[] = {8, 16, 32, 64, 128};
  static const int ranks_quick[] = {8, 32, 128};
  const int q = o->quick;
  lsim_err rc = 0;
  /* prefill: one sequence after a prior context; then several at once */
  int npre = q ? LSIM__N(pre_quick) : LSIM__N(pre_full);
  int npc = q ? LSIM__N(pctx_quick) : LSIM__N(pctx_full);
  for (int c = 0; c < npc && !rc; c++)
    for (int i = 0; i < npre && !rc; i++) {
      int64_t ctx = q ? pctx_quick[c] : pctx_full[c];
      if (ctx > o->max_ctx)
        continue;
      rc = lsim__add(g, (lsim__gp){LSIM_PROF_PREFILL, 0, 1,
                                   q ? pre_quick[i] : pre_full[i], ctx, 0, 0,
                                   0, 0},
                     eb);
    }
  static const int multi[][2] = {{8, 512}, {4, 256}, {16, 256}, {4, 2048}};
  for (int i = 0; i < (q ? 1 : LSIM__N(multi)) && !rc; i++)
    for (int c = 0; c < (q ? 1 : 2) && !rc; c++)
      rc = lsim__add(g, (lsim__gp){LSIM_PROF_PREFILL, 0, multi[i][0],
                                   multi[i][1], c ? 4096 : 0, 0, 0, 0, 0},
                     eb);
  /* decode batches at a context */
  int nd = q ? LSIM__N(dec_quick) : LSIM__N(dec_full);
  int ndc = q ? LSIM__N(dctx_quick) : LSIM__N(dctx_full);
  for (int c = 0; c < ndc && !rc; c++)
    for (int i = 0; i < nd && !rc; i++) {
      int64_t ctx = q ? dctx_quick[c] : dctx_full[c];
      if (ctx > o->max_ctx)
        continue;
      rc = lsim__add(g, (lsim__gp){LSIM_PROF_DECODE, 0, 0, 0, 0,
                                   q ? dec_quick[i] : dec_full[i], ctx, 0, 0},
                     eb);
    }
  /* mixed: a decode batch with one prefill */
  for (int d = 0; d < LSIM__N(mix_dec) && !rc; d++)
    for (int c = 0; c < LSIM__N(mix_ctx) && !rc; c++)
      for (int p = 0; p < LSIM__N(mix_pre) && !rc; p++) {
        /* quick: 16 decodes with 4096, 64 and 128 with 128 and 1024 */
        if (q && (d == 0 || (d == 1) != (p == 3) || p == 1))
          continue;
        rc = lsim__add(g, (lsim__gp){LSIM_PROF_MIXED, 0, 1, mix_pre[p],
                                     c ? 4096 : 0, mix_dec[d], mix_ctx[c], 0,
                                     0},
                       eb);
      }
  /* adapters: per target set, four base shapes (quick: the mixed one) x
  ** adapters x ranks; the adapters go round robin over the sequences */
  static const lsim__gp lbase[] = {
      {LSIM_PROF_LORA, 0, 0, 0, 0, 8, 1024, 0, 0},
      {LSIM_PROF_LORA, 0, 0, 0, 0, 64, 1024, 0, 0},
      {LSIM_PROF_LORA, 0, 8, 256, 0, 0, 0, 0, 0},
      {LSIM_PROF_LORA, 0, 1, 512, 0, 32, 1024, 0, 0},
  };
  int nna = q ? LSIM__N(nads_quick) : LSIM__N(nads_full);
  int nr = q ? LSIM__N(ranks_quick) : LSIM__N(ranks_full);
  for (int t = 0; t < o->ntsets && !rc; t++)
    for (int b = q ? 3 : 0; b < LSIM__N(lbase) && !rc; b++)
      for (int a = 0; a < nna && !rc; a++)
        for (int r = 0; r < nr && !rc; r++) {
          lsim__gp p = lbase[b];
          p.tset = t;
          p.nad = q ? nads_quick[a] : nads_full[a];
          p.rank = q ? ranks_quick[r] : ranks_full[r];
          if (p.nad > p.npre + p.ndec)
            p.nad = p.npre + p.ndec;
          rc = lsim__add(g, p, eb);
        }
  return rc;
}

/* ---- the model of each target set ---------------------------------------- */

/* A scenario for the shape and target set: what a replay would compute of
** its pages, KV bytes and targets. */
static lsim_err lsim__shape_scn(const lsim__opts *o, int tset, int64_t pages,
                                lsim_scenario *sc, lsim_errbuf *eb) {
  char mods[160] = "", layers[40] = "", json[2048];
  const char *const *names = lsim_shape_module_names();
  for (int m = 0; m < LSIM_MOD_COUNT; m++)
    if (lsim__tsets[tset].mods & (1u << m)) {
      size_t l = strlen(mods);
      snprintf(mods + l, sizeof mods - l, "%s\"%s\"", l ? ", " : "", names[m]);
    }
  if (o->layers > 0)
    snprintf(layers, sizeof layers, ", \"layers\": %d", o->layers);
  int n = snprintf(
      json, sizeof json,
      "{\"name\": \"profile\", \"seed\": 1, \"backend\": \"model\",\n"
      " \"workers\": {\"count\": 1, \"pool_pages\": %lld, \"page_bytes\": "
      "%lld, \"h2d_gbps\": 25, \"max_batch_tokens\": 65536, "
      "\"max_batch_requests\": 1024},\n"
      " \"model\": {\"preset\": \"%s\"%s, \"adapter_modules\": [%s]},\n"
      " \"cost\": {\"iter_fixed_ns\": 0, \"prefill_token_ns\": 0, "
      "\"decode_token_ns\": 0, \"segment_ns\": 0, \"rank_row_ps\": 0},\n"
      " \"adapters\": {\"count\": 1, \"ranks\": [{\"rank\": 8, \"weight\": "
      "1}]},\n"
      " \"tenants\": [{\"name\": \"t\", \"traffic_weight\": 1}],\n"
      " \"trace\": {\"generator\": {\"requests\": 1, \"rate_per_s\": 1,\n"
      "   \"prompt_tokens\": {\"dist\": \"uniform\", \"min\": 1, \"max\": 1},\n"
      "   \"output_tokens\": {\"dist\": \"uniform\", \"min\": 1, \"max\": "
      "1}}}}\n",
      (long long)pages, (long long)o->page_bytes, o->model, layers, mods);
  if (n < 0 || (size_t)n >= sizeof json)
    return lsim_fail(eb, LSIM_E_USAGE, "--model: name too long");
  return lsim_scenario_parse(sc, json, (size_t)n, "lorasim profile", ".", eb);
}

/* ---- measuring ----------------------------------------------------------- */

typedef struct lsim__rows {
  lsim_prof_row *r;
  int n, cap;
} lsim__rows;

static lsim_err lsim__row(lsim__rows *R, const lsim_prof_row *row,
                          lsim_errbuf *eb) {
  if (R->n == R->cap) {
    int nc = R->cap ? 2 * R->cap : 256;
    lsim_prof_row *nr = realloc(R->r, (size_t)nc * sizeof *nr);
    if (!nr)
      return lsim_fail(eb, LSIM_E_NOMEM, "out of memory recording");
    R->r = nr;
    R->cap = nc;
  }
  R->r[R->n++] = *row;
  return 0;
}

/* The pages of the pool: a stack of free page ids, lowest first. */
typedef struct lsim__pages {
  int64_t *free;
  int64_t nfree, total;
} lsim__pages;

static int lsim__take(lsim__pages *P, int64_t n, int64_t *out) {
  if (n > P->nfree)
    return -1;
  for (int64_t i = 0; i < n; i++)
    out[i] = P->free[--P->nfree];
  return 0;
}

static void lsim__give(lsim__pages *P, const int64_t *pg, int64_t n) {
  for (int64_t i = n - 1; i >= 0; i--)
    P->free[P->nfree++] = pg[i];
}

/* The batch bounds the grid stays within: its widest plan has 8192 rows,
** its most sequences 256 (the executor sizes its buffers by them). */
#define LSIM__MAX_TOKENS 8192
#define LSIM__MAX_SEQS 256

/* The catalog of adapter objects: LSIM__ADS per rank of the grid. */
#define LSIM__ADS 64
static const int lsim__cat_ranks[] = {8, 16, 32, 64, 128};
#define LSIM__NCAT (LSIM__ADS * LSIM__N(lsim__cat_ranks))

static int lsim__ad_id(int rank, int i) {
  for (int k = 0; k < LSIM__N(lsim__cat_ranks); k++)
    if (lsim__cat_ranks[k] == rank)
      return k * LSIM__ADS + i;
  return -1;
}

typedef struct lsim__run {
  const lsim__opts *o;
  lsim_backend be;
  lsim_scenario *sc;  /* the target set's */
  lsim__pages pages;
  int64_t tpp;        /* KV tokens per page */
  int64_t kvh;        /* next KV object handle */
  int64_t iter;
  int64_t gen[LSIM__NCAT];
  int64_t seq_req;    /* next request id */
  lsim_plan plan;
  int64_t *pg;        /* scratch page ids: [pool pages] */
} lsim__run;

typedef struct lsim__seqpages {
  int64_t kvh, at, n; /* KV handle, offset into the point's page list */
} lsim__seqpages;

/* The plan of point p (entries in packed order, with positions). */
static lsim_err lsim__plan(lsim__run *X, const lsim__gp *p, int kvbase,
                           lsim_errbuf *eb) {
  lsim_plan *pl = &X->plan;
  lsim_plan_reset(pl);
  pl->iter = X->iter;
  pl->worker = 0;
  pl->positions = 1;
  int n = p->npre + p->ndec;
  lsim_err rc = 0;
  for (int i = 0; i < n && !rc; i++) {
    int pre = i < p->npre;
    int a = p->nad > 0 ? lsim__ad_id(p->rank, i % p->nad) : LSIM_NONE;
    lsim_plan_entry e = {X->seq_req + i,
                         0,
                         a,
                         a >= 0 ? p->rank : 0,
                         pre ? LSIM_PHASE_PREFILL : LSIM_PHASE_DECODE,
                         pre ? p->pre_rows : 1,
                         0,
                         pre ? p->pre_ctx : p->dec_ctx,
                         /* a prefill after prior context is a chunk that
                         ** is not the last: nothing sampled, which tells
                         ** the LM head from the fixed cost */
                         !(pre && p->cls == LSIM_PROF_PREFILL && p->pre_ctx > 0),
                         kvbase + i};
    rc = lsim_plan_push(pl, &e, eb);
  }
  if (!rc)
    rc = lsim_plan_finish(pl, eb);
  for (int i = 0; !rc && i < pl->n; i++)
    if (pl->e[i].adapter >= 0)
      rc = lsim_plan_name(pl, i, X->gen[pl->e[i].adapter], eb);
  return rc;
}

/* Run one grid point: KV and adapters in, warm-up and reps timed runs,
** everything out.  *fits 0 when its pages do not fit the pool (nothing
** ran). */
static lsim_err lsim__point(lsim__run *X, const lsim__gp *p, int point,
                            const char *tsname, lsim__rows *R, int *fits,
                            lsim_errbuf *eb) {
  const int w = 0, nseq = p->npre + p->ndec;
  int64_t need = 0, apages = 0;
  for (int i = 0; i < nseq; i++) {
    int64_t tok = i < p->npre ? p->pre_ctx + p->pre_rows : p->dec_ctx + 1;
    need += (tok + X->tpp - 1) / X->tpp;
  }
  if (p->nad > 0) {
    apages = lsim_scenario_adapter_pages(X->sc, p->rank);
    need += apages * p->nad;
  }
  *fits = need <= X->pages.nfree && apages >= 0;
  if (!*fits)
    return 0;
  lsim_err rc = 0;
  int64_t *pg = X->pg, used = 0;
  lsim__seqpages sp[LSIM__ADS * 8];
  int ads[LSIM__ADS];
  if (nseq > LSIM__N(sp))
    return LSIM_BUG(eb, "grid point with too many sequences");
  /* KV: each sequence's pages to its KV object */
  int kvbase = (int)X->kvh;
  for (int i = 0; i < nseq && !rc; i++) {
    int64_t tok = i < p->npre ? p->pre_ctx + p->pre_rows : p->dec_ctx + 1;
    sp[i] = (lsim__seqpages){X->kvh++, used, (tok + X->tpp - 1) / X->tpp};
    if (lsim__take(&X->pages, sp[i].n, pg + used))
      return LSIM_BUG(eb, "pool pages counted wrong");
    used += sp[i].n;
    lsim_res_page_ev ev = {w, (int)sp[i].kvh, 1, 0, pg + sp[i].at, sp[i].n,
                           0, 0, LSIM_RES_KV_ALLOC};
    rc = X->be.ops ? lsim_backend_kv(&X->be, &ev, eb) : 0;
  }
  /* adapters: staged and published at their pages */
  int64_t aat = used;
  for (int k = 0; k < p->nad && !rc; k++) {
    ads[k] = lsim__ad_id(p->rank, k);
    if (lsim__take(&X->pages, apages, pg + used))
      return LSIM_BUG(eb, "pool pages counted wrong");
    lsim_res_page_ev ev = {w, ads[k], ++X->gen[ads[k]], 0, pg + used, apages,
                           0, 0, 0};
    used += apages;
    if (X->be.ops && !(rc = lsim_backend_stage(&X->be, &ev, eb)))
      rc = lsim_backend_publish(&X->be, &ev, eb);
    /* the stage's copy, as the measured clock times a load: the bytes a
    ** load of this rank copies (lsim_scenario_adapter_bytes) */
    int64_t lns = !rc && X->be.ops ? lsim_backend_load_ns(&X->be, w, ads[k])
                                   : -1;
    if (lns > 0) {
      lsim_prof_row row = {LSIM_PROF_COPY, point, LSIM_PROF_STAGE, "", k,
                           {0}, 0, 0, 1, p->rank,
                           lsim_scenario_adapter_bytes(X->sc, p->rank), lns};
      snprintf(row.targets, sizeof row.targets, "%s", tsname);
      rc = lsim__row(R, &row, eb);
    }
  }
  if (!rc)
    rc = lsim__plan(X, p, kvbase, eb);
  lsim_cost_feat f;
  if (!rc)
    lsim_cost_plan_features(&X->plan, &f);
  int64_t elems = 0;
  for (int t = 0; t < X->sc->ntargets; t++)
    elems += X->sc->targets[t].d_in + X->sc->targets[t].d_out;
  int runs = X->o->dry_run ? 0 : 1 + X->o->reps;
  for (int r = 0; r < runs && !rc; r++) {
    for (int k = 0; k < p->nad && !rc; k++) {
      lsim_res_page_ev ev = {w, ads[k], X->gen[ads[k]], 0, NULL, 0, 0, 0, 0};
      rc = lsim_backend_launch(&X->be, &ev, eb);
    }
    lsim_backend_result res = {-1, 0, 0, 0, NULL, 0, 0};
    X->plan.iter = X->iter++;
    if (rc || (rc = lsim_backend_run(&X->be, &X->plan, &res, eb)))
      break;
    if (!res.ok || res.backend_ns <= 0) {
      rc = lsim_fail(eb, LSIM_E_BACKEND,
                     "point %d: the backend measured no time (%lld ns)",
                     point, (long long)res.backend_ns);
      break;
    }
    if (r == 0)
      continue; /* the warm-up */
    lsim_prof_row row = {LSIM_PROF_ITER, point, p->cls, "", r - 1, f,
                         (int64_t)X->sc->layers * X->sc->ntargets,
                         (int64_t)X->sc->layers * elems,
                         X->plan.distinct_adapters, X->plan.max_rank, 0,
                         res.backend_ns};
    snprintf(row.targets, sizeof row.targets, "%s", tsname);
    rc = lsim__row(R, &row, eb);
  }
  if (!rc && X->o->dry_run) {
    lsim_prof_row row = {LSIM_PROF_ITER, point, p->cls, "", 0, f,
                         (int64_t)X->sc->layers * X->sc->ntargets,
                         (int64_t)X->sc->layers * elems,
                         X->plan.distinct_adapters, X->plan.max_rank, 0, 0};
    snprintf(row.targets, sizeof row.targets, "%s", tsname);
    rc = lsim__row(R, &row, eb);
  }
  /* out again: the adapters at their fence, then the KV */
  for (int k = 0; k < p->nad && !rc; k++) {
    lsim_res_page_ev ev = {w, ads[k], X->gen[ads[k]], 0, pg + aat + k * apages,
                           apages, runs, 1, 0};
    rc = X->be.ops ? lsim_backend_retire(&X->be, &ev, eb) : 0;
  }
  for (int i = 0; i < nseq && !rc; i++) {
    lsim_res_page_ev ev = {w, (int)sp[i].kvh, 1, 0, pg + sp[i].at, sp[i].n,
                           0, 0, LSIM_RES_KV_RELEASE};
    rc = X->be.ops ? lsim_backend_kv(&X->be, &ev, eb) : 0;
  }
  if (!rc)
    lsim__give(&X->pages, pg, used);
  X->seq_req += nseq;
  return rc;
}

/* The backend of one target set, opened as a replay opens it, with the
** pool geometry (so that it follows the residency). */
static lsim_err lsim__open(lsim__run *X, const int *ranks, lsim_errbuf *eb) {
  const lsim__opts *o = X->o;
  /* cuda runs whole forward passes (--execute full) at the target set's
  ** shape; cpu_ref its one exact module (the protocol is the same) */
  int full = strcmp(o->backend, LSIM_CUDA_BACKEND_NAME) == 0;
  lsim_backend_cfg cfg = {
      .seed = 1,
      .d_in = LSIM_REPLAY_TENSOR_DIM,
      .d_out = LSIM_REPLAY_TENSOR_DIM,
      .execute = full ? LSIM_EXECUTE_FULL : LSIM_EXECUTE_ADAPTERS,
      .workers = 1,
      .pool_pages = X->pages.total,
      .page_bytes = o->page_bytes,
      .nadapters = LSIM__NCAT,
      .objects = LSIM__NCAT,
      .adapter_rank = ranks,
      .shape = &X->sc->model,
      .kv_bytes_per_token = lsim_scenario_kv_bytes_per_token(X->sc),
      .max_batch_tokens = LSIM__MAX_TOKENS,
      .max_batch_requests = LSIM__MAX_SEQS};
  lsim_err rc = lsim_backend_open(&X->be, o->backend, &cfg, eb);
  if (!rc && !lsim_backend_follows(&X->be)) {
    lsim_backend_close(&X->be);
    X->be.ops = NULL;
    rc = lsim_fail(eb, LSIM_E_USAGE,
                   "--backend %s does not follow the engine's pages: it "
                   "cannot run the profile's plans",
                   o->backend);
  }
  return rc;
}

static double lsim__now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

typedef struct lsim__tally {
  int points, measured, skipped_fit, skipped_budget, copies;
} lsim__tally;

static lsim_err lsim__measure(const lsim__opts *o, const lsim__grid *g,
                              lsim__rows *R, lsim__tally *t,
                              lsim_errbuf *eb) {
  static lsim_scenario sc;
  int ranks[LSIM__NCAT];
  for (int i = 0; i < LSIM__NCAT; i++)
    ranks[i] = lsim__cat_ranks[i / LSIM__ADS];
  int64_t pool = (int64_t)(o->pool_gib * 1073741824.0) / o->page_bytes;
  lsim__run X;
  memset(&X, 0, sizeof X);
  X.o = o;
  X.plan = (lsim_plan)LSIM_PLAN_INIT;
  X.pages.total = pool;
  X.pages.free = malloc((size_t)pool * sizeof *X.pages.free);
  X.pg = malloc((size_t)pool * sizeof *X.pg);
  if (!X.pages.free || !X.pg) {
    free(X.pages.free);
    free(X.pg);
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory: a pool of %lld pages",
                     (long long)pool);
  }
  for (int64_t i = 0; i < pool; i++)
    X.pages.free[i] = pool - 1 - i; /* page 0 on top */
  X.pages.nfree = pool;
  lsim_err rc = 0;
  double t0 = lsim__now_s();
  int point = 0;
  for (int ti = 0; ti < o->ntsets && !rc; ti++) {
    /* the points of this target set: the base ones run with the first */
    int any = 0;
    for (int i = 0; i < g->n; i++)
      any |= g->p[i].tset == ti && (g->p[i].nad > 0 || ti == 0);
    if (!any)
      continue;
    if ((rc = lsim__shape_scn(o, o->tsets[ti], pool, &sc, eb)))
      break;
    X.sc = &sc;
    int64_t kvb = lsim_scenario_kv_bytes_per_token(&sc);
    X.tpp = kvb > 0 ? o->page_bytes / kvb : 0;
    if (X.tpp < 1) {
      rc = lsim_fail(eb, LSIM_E_USAGE,
                     "--page-bytes %lld holds no token of KV (%lld bytes "
                     "each)",
                     (long long)o->page_bytes, (long long)kvb);
      break;
    }
    /* a dry run opens nothing: it only makes the plans */
    if (!o->dry_run && (rc = lsim__open(&X, ranks, eb)))
      break;
    const char *tsname = lsim__tsets[o->tsets[ti]].name;
    for (int i = 0; i < g->n && !rc; i++) {
      const lsim__gp *p = &g->p[i];
      if (p->tset != ti || (p->nad == 0 && ti != 0))
        continue;
      int fits = 1;
      t->points++;
      if (!o->dry_run && o->budget_s > 0 && lsim__now_s() - t0 > o->budget_s) {
        t->skipped_budget++;
        continue;
      }
      rc = lsim__point(&X, p, point, tsname, R, &fits, eb);
      if (!fits) {
        t->skipped_fit++;
        if (o->verbose)
          printf("profile: point %d (%s, %s) does not fit the pool: left "
                 "out\n", point, lsim_prof_class_name(p->cls), tsname);
        continue;
      }
      if (!rc && o->verbose && !o->dry_run && R->n > 0)
        printf("profile: point %3d %-7s %-4s tokens %5lld decode %3d ctx "
               "%6lld adapters %2d rank %3d: %lld ns\n",
               point, lsim_prof_class_name(p->cls), tsname,
               (long long)R->r[R->n - 1].f.tokens, p->ndec,
               (long long)(p->ndec ? p->dec_ctx : p->pre_ctx), p->nad,
               p->rank, (long long)R->r[R->n - 1].ns);
      t->measured++;
      point++;
    }
    if (!rc && X.be.ops)
      rc = lsim_backend_finish(&X.be, eb);
    if (X.be.ops)
      lsim_backend_close(&X.be);
    X.be.ops = NULL;
  }
  lsim_plan_release(&X.plan);
  free(X.pages.free);
  free(X.pg);
  if (rc)
    return rc;
#ifdef LSIM_HAVE_CUDA
  /* host-to-device copies, pinned: 1 MiB .. 1 GiB */
  if (!o->dry_run && strcmp(o->backend, "cuda") == 0) {
    int64_t ns[64];
    int reps = o->reps < 64 ? o->reps : 64;
    for (int64_t mib = 1; mib <= 1024 && !rc; mib *= o->quick ? 8 : 2) {
      if (o->budget_s > 0 && lsim__now_s() - t0 > o->budget_s)
        break;
      if ((rc = lsim_cuda_h2d_time((size_t)mib << 20, reps + 1, ns, eb)))
        break;
      for (int r = 1; r <= reps && !rc; r++) {
        lsim_prof_row row = {LSIM_PROF_COPY, point, LSIM_PROF_H2D, "-", r - 1,
                             {0},            0,     0, 0,   0,
                             mib << 20,      ns[r]};
        rc = lsim__row(R, &row, eb);
      }
      point++;
      t->copies++;
    }
  }
#endif
  return rc;
}

/* ---- the profile --------------------------------------------------------- */

static void lsim__stats_json(cJSON *o, const lsim_prof_stats *s) {
  cJSON_AddNumberToObject(o, "points", s->n);
  cJSON_AddNumberToObject(o, "mape_pct", s->mape);
  cJSON_AddNumberToObject(o, "median_pct", s->median);
  cJSON_AddNumberToObject(o, "p90_pct", s->p90);
  cJSON_AddNumberToObject(o, "max_pct", s->max);
  cJSON_AddNumberToObject(o, "bias_pct", s->bias);
}

typedef struct lsim__gpu {
  char name[128], cls[64];
  int driver, runtime;
  int64_t mem;
} lsim__gpu;

static lsim_err lsim__write_profile(const lsim__opts *o, const char *path,
                                    const char *csv, const lsim__gpu *gpu,
                                    const lsim_scenario *sc,
                                    const lsim__tally *t,
                                    const lsim_prof_fit *fit,
                                    lsim_errbuf *eb) {
  cJSON *root = cJSON_CreateObject();
  if (!root)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  cJSON_AddNumberToObject(root, "lorasim_profile", 2);
  cJSON *g = cJSON_AddObjectToObject(root, "gpu");
  cJSON_AddStringToObject(g, "name", gpu->name);
  cJSON_AddStringToObject(g, "class", gpu->cls);
  cJSON_AddStringToObject(g, "backend", o->fit ? "recorded" : o->backend);
  if (gpu->driver > 0)
    cJSON_AddNumberToObject(g, "driver", gpu->driver);
  if (gpu->runtime > 0)
    cJSON_AddNumberToObject(g, "runtime", gpu->runtime);
  if (gpu->mem > 0)
    cJSON_AddNumberToObject(g, "memory_bytes", (double)gpu->mem);
  cJSON *m = cJSON_AddObjectToObject(root, "model");
  const lsim_model_shape *s = &sc->model;
  cJSON_AddStringToObject(m, "preset", s->preset);
  cJSON_AddNumberToObject(m, "layers", s->layers);
  cJSON_AddNumberToObject(m, "hidden", (double)s->hidden);
  cJSON_AddNumberToObject(m, "intermediate", (double)s->intermediate);
  cJSON_AddNumberToObject(m, "q_heads", (double)s->q_heads);
  cJSON_AddNumberToObject(m, "kv_heads", (double)s->kv_heads);
  cJSON_AddNumberToObject(m, "head_dim", (double)s->head_dim);
  cJSON_AddNumberToObject(m, "vocab", (double)s->vocab);
  cJSON_AddNumberToObject(m, "dtype_bytes", s->dtype_bytes);
  char when[32];
  time_t now = time(NULL);
  struct tm tmv;
  gmtime_r(&now, &tmv);
  strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tmv);
  cJSON_AddStringToObject(root, "created", when);
  cJSON_AddStringToObject(root, "commit", o->commit);
  cJSON_AddStringToObject(root, "lorasim_version", LSIM_VERSION);
  cJSON *gr = cJSON_AddObjectToObject(root, "grid");
  cJSON_AddStringToObject(gr, "kind", o->quick ? "quick" : "full");
  cJSON_AddNumberToObject(gr, "reps", o->reps);
  cJSON_AddNumberToObject(gr, "points", t->measured);
  cJSON_AddNumberToObject(gr, "left_out_pool", t->skipped_fit);
  cJSON_AddNumberToObject(gr, "left_out_budget", t->skipped_budget);
  cJSON_AddNumberToObject(gr, "copy_sizes", t->copies);
  cJSON_AddNumberToObject(gr, "max_ctx", o->max_ctx);
  cJSON_AddNumberToObject(gr, "page_bytes", (double)o->page_bytes);
  cJSON *ts = cJSON_AddArrayToObject(gr, "target_sets");
  for (int i = 0; ts && i < o->ntsets; i++)
    cJSON_AddItemToArray(ts,
                         cJSON_CreateString(lsim__tsets[o->tsets[i]].name));
  cJSON *co = cJSON_AddObjectToObject(root, "coefficients");
  const char *const *terms = lsim_cost_terms();
  for (int i = 0; i < LSIM_COST_NTERMS; i++)
    cJSON_AddNumberToObject(co, terms[i], fit->coef.c[i]);
  if (fit->copy_on) {
    cJSON *cp = cJSON_AddObjectToObject(root, "copy");
    cJSON_AddNumberToObject(cp, "latency_ns", fit->copy_latency_ns);
    cJSON_AddNumberToObject(cp, "gbps", fit->copy_gbps);
  }
  cJSON *fi = cJSON_AddObjectToObject(root, "fit");
  lsim__stats_json(fi, &fit->all);
  cJSON_AddNumberToObject(fi, "rmse_ns", fit->rmse_ns);
  cJSON *bc = cJSON_AddObjectToObject(fi, "by_class");
  for (int c = 0; bc && c < LSIM_PROF_NCLASS; c++)
    if (fit->cls[c].n > 0)
      lsim__stats_json(cJSON_AddObjectToObject(bc, lsim_prof_class_name(c)),
                       &fit->cls[c]);
  if (fit->copy_on) {
    cJSON *cf = cJSON_AddObjectToObject(root, "copy_fit");
    cJSON_AddStringToObject(cf, "source", fit->copy_source == LSIM_PROF_STAGE
                                              ? "stage"
                                              : "h2d");
    lsim__stats_json(cf, &fit->copy);
  }
  cJSON_AddStringToObject(root, "measurements", csv);
  char *text = cJSON_Print(root);
  cJSON_Delete(root);
  if (!text)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  size_t n = strlen(text);
  char *buf = realloc(text, n + 2);
  if (!buf) {
    free(text);
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  }
  buf[n] = '\n';
  buf[n + 1] = 0;
  lsim_err rc = lsim_out_write_all(path, buf, n + 1, eb);
  free(buf);
  return rc;
}

static void lsim__print_stats(const char *what, const lsim_prof_stats *s) {
  printf("profile: fit %-8s %4d points: MAPE %5.1f%%, median %5.1f%%, p90 "
         "%5.1f%%, max %5.1f%%, bias %+5.1f%%\n",
         what, s->n, s->mape, s->median, s->p90, s->max, s->bias);
}

/* ---- the command --------------------------------------------------------- */

static int lsim__parse_sets(const char *arg, lsim__opts *o) {
  char buf[128];
  if (strlen(arg) >= sizeof buf)
    return -1;
  strcpy(buf, arg);
  o->ntsets = 0;
  for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
    int k = -1;
    for (int i = 0; i < LSIM__NTSETS; i++)
      if (strcmp(tok, lsim__tsets[i].name) == 0)
        k = i;
    if (k < 0 || o->ntsets >= LSIM__NTSETS)
      return -1;
    for (int i = 0; i < o->ntsets; i++)
      if (o->tsets[i] == k)
        return -1;
    o->tsets[o->ntsets++] = k;
  }
  return o->ntsets > 0 ? 0 : -1;
}

static int lsim__num_arg(const char *opt, const char *arg, double lo,
                         double hi, double *out) {
  char *end;
  errno = 0;
  double v = strtod(arg, &end);
  if (end == arg || *end || errno || !(v >= lo && v <= hi)) {
    char m[200];
    snprintf(m, sizeof m, "--%s: expected a number in [%g, %g]", opt, lo, hi);
    return lsim_cli_fail("profile", LSIM_E_USAGE, m);
  }
  *out = v;
  return 0;
}

static void lsim__gpu_class(const char *name, char *out, size_t n) {
  const char *p = strncmp(name, "NVIDIA ", 7) == 0 ? name + 7 : name;
  size_t k = 0;
  for (; *p && *p != ' ' && k + 1 < n; p++) {
    char c = *p;
    if (c >= 'A' && c <= 'Z')
      c = (char)(c - 'A' + 'a');
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
          c == '_' || c == '.'))
      c = '-';
    out[k++] = c;
  }
  out[k] = 0;
  if (k == 0 || out[0] == '.')
    snprintf(out, n, "gpu");
}

int lsim_profile_cmd(int argc, char **argv) {
  enum {
    O_MODEL = 256, O_LAYERS, O_OUT, O_CSV, O_QUICK, O_REPS, O_TSETS,
    O_MAXCTX, O_POOL, O_PAGE, O_BUDGET, O_BACKEND, O_GPU, O_GPUNAME,
    O_COMMIT, O_DRY, O_FIT, O_VERBOSE
  };
  static const struct option opts[] = {
      {"model", required_argument, NULL, O_MODEL},
      {"layers", required_argument, NULL, O_LAYERS},
      {"out", required_argument, NULL, O_OUT},
      {"csv", required_argument, NULL, O_CSV},
      {"quick", no_argument, NULL, O_QUICK},
      {"reps", required_argument, NULL, O_REPS},
      {"target-sets", required_argument, NULL, O_TSETS},
      {"max-ctx", required_argument, NULL, O_MAXCTX},
      {"pool-gib", required_argument, NULL, O_POOL},
      {"page-bytes", required_argument, NULL, O_PAGE},
      {"budget-s", required_argument, NULL, O_BUDGET},
      {"backend", required_argument, NULL, O_BACKEND},
      {"gpu", required_argument, NULL, O_GPU},
      {"gpu-name", required_argument, NULL, O_GPUNAME},
      {"commit", required_argument, NULL, O_COMMIT},
      {"dry-run", no_argument, NULL, O_DRY},
      {"fit", required_argument, NULL, O_FIT},
      {"verbose", no_argument, NULL, O_VERBOSE},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  lsim__opts o = {.backend = "cuda", .commit = "unknown", .pool_gib = 24,
                  .page_bytes = 2097152};
  int reps = 0, maxctx = 0, sets = 0, c;
  double v = 0;
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case O_MODEL: o.model = optarg; break;
    case O_OUT: o.out = optarg; break;
    case O_CSV: o.csv = optarg; break;
    case O_QUICK: o.quick = 1; break;
    case O_BACKEND: o.backend = optarg; break;
    case O_GPU: o.gpu = optarg; break;
    case O_GPUNAME: o.gpu_name = optarg; break;
    case O_COMMIT: o.commit = optarg; break;
    case O_DRY: o.dry_run = 1; break;
    case O_FIT: o.fit = optarg; break;
    case O_VERBOSE: o.verbose = 1; break;
    case O_LAYERS:
      if (lsim__num_arg("layers", optarg, 1, 1024, &v))
        return 2;
      o.layers = (int)v;
      break;
    case O_REPS:
      if (lsim__num_arg("reps", optarg, 1, 63, &v))
        return 2;
      reps = (int)v;
      break;
    case O_MAXCTX:
      if (lsim__num_arg("max-ctx", optarg, 128, 1048576, &v))
        return 2;
      maxctx = (int)v;
      break;
    case O_POOL:
      if (lsim__num_arg("pool-gib", optarg, 0.001, 4096, &o.pool_gib))
        return 2;
      break;
    case O_PAGE:
      if (lsim__num_arg("page-bytes", optarg, 256, 2147483648.0, &v))
        return 2;
      o.page_bytes = (int64_t)v;
      break;
    case O_BUDGET:
      if (lsim__num_arg("budget-s", optarg, 1, 1e6, &o.budget_s))
        return 2;
      break;
    case O_TSETS:
      if (lsim__parse_sets(optarg, &o))
        return lsim_cli_fail("profile", LSIM_E_USAGE,
                             "--target-sets: expected distinct names of qv, "
                             "qkvo, all, comma-separated");
      sets = 1;
      break;
    case 'h': lsim_profile_usage(stdout); return 0;
    default: lsim_profile_usage(stderr); return 2;
    }
  }
  if (optind != argc)
    return lsim_cli_fail("profile", LSIM_E_USAGE,
                         "unexpected argument (see lorasim profile --help)");
  if (!o.model)
    return lsim_cli_fail("profile", LSIM_E_USAGE,
                         "--model PRESET is required (the shape to profile)");
  if (!lsim_shape_preset_find(o.model)) {
    char m[400];
    snprintf(m, sizeof m, "--model: unknown preset (known: ");
    for (const char *const *n = lsim_shape_preset_names(); *n; n++)
      snprintf(m + strlen(m), sizeof m - strlen(m), "%s%s", *n,
               n[1] ? ", " : ")");
    return lsim_cli_fail("profile", LSIM_E_USAGE, m);
  }
  if (strcmp(o.backend, "cuda") && strcmp(o.backend, "cpu_ref"))
    return lsim_cli_fail("profile", LSIM_E_USAGE,
                         "--backend: expected cuda or cpu_ref");
  if (o.fit && o.dry_run)
    return lsim_cli_fail("profile", LSIM_E_USAGE,
                         "--fit and --dry-run exclude each other");
  if (o.gpu_name && !o.fit)
    return lsim_cli_fail("profile", LSIM_E_USAGE,
                         "--gpu-name is for --fit (a measured device names "
                         "itself)");
  o.reps = reps ? reps : (o.quick ? 3 : 5);
  o.max_ctx = maxctx ? maxctx : (o.quick ? 16384 : 32768);
  if (!sets) {
    o.ntsets = o.quick ? 2 : 3;
    o.tsets[0] = o.quick ? 1 : 0;
    o.tsets[1] = o.quick ? 2 : 1;
    o.tsets[2] = 2;
  }
  if (o.gpu) {
    char cls[64];
    lsim__gpu_class(o.gpu, cls, sizeof cls);
    if (strcmp(cls, o.gpu) != 0)
      return lsim_cli_fail("profile", LSIM_E_USAGE,
                           "--gpu: a class of [a-z0-9._-] (e.g. h200)");
  }
  /* the paths, before any work (exit 2 on any machine) */
  char outp[1024], csvp[1024];
  snprintf(outp, sizeof outp, "%s",
           o.out ? o.out : "results/profile-PRESET.json");
  if (!o.out)
    snprintf(outp, sizeof outp, "results/profile-%s.json", o.model);
  if (o.csv)
    snprintf(csvp, sizeof csvp, "%s", o.csv);
  else {
    size_t l = strlen(outp);
    snprintf(csvp, sizeof csvp, "%.*s.csv",
             (int)(l > 5 && !strcmp(outp + l - 5, ".json") ? l - 5 : l), outp);
  }
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_err rc = 0;
  if (o.fit && !strcmp(o.fit, csvp) && !o.csv)
    csvp[0] = 0; /* refitting a file: do not rewrite it */
  if ((!o.dry_run && (rc = lsim_out_check(outp, &eb))) ||
      (csvp[0] && !o.fit && (rc = lsim_out_check(csvp, &eb))))
    return lsim_cli_fail("profile", rc, eb.msg);
  lsim__gpu gpu = {"", "", 0, 0, 0};
  if (!o.fit && !o.dry_run && !strcmp(o.backend, "cuda")) {
#ifdef LSIM_HAVE_CUDA
    char desc[256];
    if (lsim_cuda_describe(desc, sizeof desc) <= 0) {
      char m[400];
      snprintf(m, sizeof m, "profile needs a CUDA device: %s", desc);
      lsim_cli_fail("profile", LSIM_E_DEV_NO_DEVICE, m);
      return 2;
    }
    lsim_cuda_gpu_info(gpu.name, sizeof gpu.name, &gpu.driver, &gpu.runtime,
                       &gpu.mem);
#else
    lsim_cli_fail("profile", LSIM_E_DEV_NO_DEVICE,
                  "profile needs a CUDA device: this lorasim was built "
                  "without CUDA (nvcc was not found at configure time); "
                  "--fit, --dry-run and --backend cpu_ref need none");
    return 2;
#endif
  } else if (!o.fit && !o.dry_run) {
    snprintf(gpu.name, sizeof gpu.name,
             "cpu_ref (the exact CPU executor, not a GPU)");
  }
  if (o.fit)
    snprintf(gpu.name, sizeof gpu.name, "%s",
             o.gpu_name ? o.gpu_name : "unknown (recorded measurements)");
  if (o.gpu)
    snprintf(gpu.cls, sizeof gpu.cls, "%s", o.gpu);
  else if (!strcmp(o.backend, "cpu_ref") && !o.fit)
    snprintf(gpu.cls, sizeof gpu.cls, "cpu_ref");
  else
    lsim__gpu_class(gpu.name, gpu.cls, sizeof gpu.cls);

  /* the model shape, as the profile records it */
  static lsim_scenario shape;
  if ((rc = lsim__shape_scn(&o, 2, 1024, &shape, &eb)))
    return lsim_cli_fail("profile", rc, eb.msg);

  lsim__rows R = {NULL, 0, 0};
  lsim__tally t = {0, 0, 0, 0, 0};
  lsim__grid g = {NULL, 0, 0};
  lsim_prof_fit fit;
  int status = 1;
  if (o.fit) {
    int n = 0;
    if ((rc = lsim_prof_csv_read(o.fit, &R.r, &n, &eb))) {
      lsim_cli_fail("profile", rc, eb.msg);
      return 2;
    }
    R.n = n;
    for (int i = 0; i < n; i++)
      if (i == 0 || R.r[i].point != R.r[i - 1].point ||
          R.r[i].kind != R.r[i - 1].kind) {
        if (R.r[i].kind == LSIM_PROF_COPY)
          t.copies++;
        else
          t.measured++;
      }
    printf("profile: %d measurements of %d points and %d copy sizes from "
           "%s\n", n, t.measured, t.copies, o.fit);
  } else {
    if ((rc = lsim__grid_build(&o, &g, &eb)))
      goto out;
    printf("profile: %s, %s grid of %d points, %d reps, target sets",
           o.model, o.quick ? "quick" : "full", g.n, o.reps);
    for (int i = 0; i < o.ntsets; i++)
      printf("%s%s", i ? "," : " ", lsim__tsets[o.tsets[i]].name);
    printf(", pool %.1f GiB, backend %s%s\n", o.pool_gib, o.backend,
           o.dry_run ? " (dry run)" : "");
    if (gpu.name[0] && !o.dry_run)
      printf("profile: device %s (class %s)\n", gpu.name, gpu.cls);
    if ((rc = lsim__measure(&o, &g, &R, &t, &eb)))
      goto out;
    printf("profile: %d points %s, %d left out (pool), %d left out "
           "(budget), %d copy sizes\n",
           t.measured, o.dry_run ? "planned" : "measured", t.skipped_fit,
           t.skipped_budget, t.copies);
    if ((rc = lsim_prof_csv_write(csvp, R.r, R.n, &eb)))
      goto out;
    printf("profile: measurements written to %s (%d rows)\n", csvp, R.n);
    if (o.dry_run) {
      status = 0;
      goto out;
    }
  }
  if ((rc = lsim_prof_fit_run(R.r, R.n, &fit, &eb)))
    goto out;
  {
    const char *const *terms = lsim_cost_terms();
    printf("profile: coefficients:");
    for (int i = 0; i < LSIM_COST_NTERMS; i++)
      printf("%s %s %.6g", i ? "," : "", terms[i], fit.coef.c[i]);
    printf("\n");
  }
  lsim__print_stats("all", &fit.all);
  for (int k = 0; k < LSIM_PROF_NCLASS; k++)
    if (fit.cls[k].n > 0)
      lsim__print_stats(lsim_prof_class_name(k), &fit.cls[k]);
  if (fit.copy_on) {
    printf("profile: copy model (%s): %.0f ns + bytes / %.3f GB/s\n",
           fit.copy_source == LSIM_PROF_STAGE ? "adapter stages"
                                              : "pinned copies",
           fit.copy_latency_ns, fit.copy_gbps);
    lsim__print_stats("copies", &fit.copy);
  }
  if ((rc = lsim__write_profile(&o, outp, csvp[0] ? csvp : o.fit, &gpu,
                                &shape, &t, &fit, &eb)))
    goto out;
  printf("profile: written to %s\n", outp);
  status = 0;
out:
  free(R.r);
  free(g.p);
  if (rc)
    return lsim_cli_fail("profile", rc, eb.msg);
  return status;
}
