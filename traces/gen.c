/*
** gen.c: the synthetic generator, length distributions, and the gamma and
** Weibull samplers.
**
** Arrivals.  Gaps are drawn in operational time with mean 1 (exponential
** for Poisson, gamma with shape 1/cv^2 and scale cv^2 for a target CV) and
** mapped to simulated time by inverting the integrated intensity
**
**     L(t) = integral from 0 to t of rate(s) x m(s) ds
**
** where rate() is piecewise constant (rate_per_s, changed by the shifts) and
** m() is the modulation (1, on/off phases, or a diurnal sine; its integral
** M() has a closed form).  Within one rate segment, L(t) = L(start) +
** rate x (M(t) - M(start)), so an arrival is found by walking segments
** forward and inverting M in the last one (closed form, or safeguarded
** Newton for the sine, which is monotone since m >= 1 - amplitude > 0).
** Time only moves forward, so the state is a clock and a segment index.
**
** A plain Poisson generator without modulation or shifts takes the
** original path (one exponential gap in ns per arrival), so scenarios
** written before this file replay bit for bit as before.
**
** Streams: arrivals LSIM_RNG_ARRIVALS, tenants LSIM_RNG_TENANTS, lengths
** LSIM_RNG_LENGTHS (prompt then output per record).
*/
#include "internal.h"

#include "engine/checked.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

/* ---- samplers ------------------------------------------------------------ */

static double lsim__normal(lsim_rng *r) {
  double u1 = lsim_rng_unit(r), u2 = lsim_rng_unit(r);
  return sqrt(-2.0 * log1p(-u1)) * cos(2.0 * M_PI * u2);
}

double lsim__gamma(lsim_rng *r, double k) {
  if (k < 1.0) {
    /* Gamma(k) = Gamma(k + 1) x U^(1/k), in logs to keep tiny values */
    double g = lsim__gamma(r, k + 1.0);
    double u = 1.0 - lsim_rng_unit(r); /* (0, 1] */
    return exp(log(g) + log(u) / k);
  }
  /* Marsaglia and Tsang (2000) */
  double d = k - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
  for (;;) {
    double x, v;
    do {
      x = lsim__normal(r);
      v = 1.0 + c * x;
    } while (v <= 0.0);
    v = v * v * v;
    double u = lsim_rng_unit(r);
    if (u < 1.0 - 0.0331 * x * x * x * x)
      return d * v;
    if (u > 0.0 && log(u) < 0.5 * x * x + d * (1.0 - v + log(v)))
      return d * v;
  }
}

double lsim__weibull(lsim_rng *r, double k) {
  return pow(-log1p(-lsim_rng_unit(r)), 1.0 / k);
}

/* ---- length distributions ---------------------------------------------------- */

static int lsim__cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* The observed frequency of one length field of a trace file. */
static lsim_err lsim__empirical(lsim__len *l, lsim_errbuf *eb) {
  const lsim_len_dist *d = &l->d;
  if (lsim__importer_at(d->format) &&
      !lsim_trace_format_per_request(d->format))
    return lsim_fail(eb, LSIM_E_USAGE,
                     "%s: an empirical length distribution needs a per-request "
                     "trace (not servegen)",
                     d->file);
  lsim__src *src;
  lsim_err rc = lsim__src_open_file(&src, d->format, d->file, 0, NULL, 0, eb);
  if (rc)
    return rc;
  lsim__map counts = {0};
  lsim__raw raw;
  int fatal;
  int64_t total = 0;
  for (;;) {
    int r = src->ops->next(src, &raw, eb, &fatal);
    if (r < 0) {
      rc = r;
      break;
    }
    if (r == 0)
      break;
    int64_t *c = lsim__map_put(&counts, (uint64_t)(d->field ? raw.output
                                                            : raw.prompt),
                               NULL);
    if (!c) {
      rc = lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
      break;
    }
    ++*c;
    total++;
  }
  src->ops->close(src);
  if (!rc && total == 0)
    rc = lsim_fail(eb, LSIM_E_TRACE_MISSING,
                   "%s: no records for an empirical length distribution",
                   d->file);
  if (!rc) {
    l->n = (int)counts.n;
    l->vals = malloc(counts.n * sizeof *l->vals);
    l->cdf = malloc(counts.n * sizeof *l->cdf);
    if (!l->vals || !l->cdf) {
      rc = lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
    } else {
      int k = 0;
      for (size_t i = 0; i < counts.cap; i++)
        if (counts.used[i])
          l->vals[k++] = (int64_t)counts.keys[i];
      /* sorted, so the table does not depend on the hash layout */
      qsort(l->vals, (size_t)l->n, sizeof *l->vals, lsim__cmp_i64);
      double acc = 0;
      for (int i = 0; i < l->n; i++)
        l->cdf[i] = (acc += (double)*lsim__map_get(&counts, (uint64_t)l->vals[i]));
    }
  }
  lsim__map_release(&counts);
  return rc;
}

lsim_err lsim__len_init(lsim__len *l, const lsim_len_dist *d,
                        lsim_errbuf *eb) {
  memset(l, 0, sizeof *l);
  l->d = *d;
  if (d->min < 1 || d->max < d->min || d->max > LSIM_TRACE_MAX_TOKENS)
    return lsim_fail(eb, LSIM_E_USAGE, "length distribution bounds invalid");
  if (d->kind != LSIM_DIST_EMPIRICAL)
    return 0;
  lsim_err rc = lsim__empirical(l, eb);
  if (rc)
    lsim__len_release(l);
  return rc;
}

int64_t lsim__len_draw(const lsim__len *l, lsim_rng *r) {
  const lsim_len_dist *d = &l->d;
  int64_t v;
  switch (d->kind) {
  case LSIM_DIST_UNIFORM:
    v = d->min + (int64_t)lsim_rng_below(r, (uint64_t)(d->max - d->min + 1));
    break;
  case LSIM_DIST_EXP: {
    /* mean <= 10^7 and -log1p(-u) < 40, but clamp before converting */
    double x = -d->mean * log1p(-lsim_rng_unit(r));
    v = x >= (double)d->max ? d->max : (int64_t)llround(x);
    break;
  }
  case LSIM_DIST_EMPIRICAL:
    v = l->vals[lsim__search(l->cdf, l->n,
                             lsim_rng_unit(r) * l->cdf[l->n - 1])];
    break;
  default:
    v = d->min;
  }
  if (v < d->min)
    v = d->min;
  if (v > d->max)
    v = d->max;
  return v;
}

void lsim__len_release(lsim__len *l) {
  free(l->vals);
  free(l->cdf);
  l->vals = NULL;
  l->cdf = NULL;
  l->n = 0;
}

/* ---- the generator ----------------------------------------------------------- */

#define LSIM__NSEG (LSIM_TRACE_MAX_SHIFTS + 1)

typedef struct lsim__gen {
  lsim__src base;
  int64_t requests, n;
  int simple;   /* the original Poisson path */
  double t_ns;  /* simple path: the clock, ns */
  double t_s;   /* general path: the clock, s */
  int cur;      /* general path: the rate segment of t_s */
  lsim_rng ra, rt, rl;
  int T;
  int nseg;
  double seg_at[LSIM__NSEG];   /* start of each segment, s */
  double seg_rate[LSIM__NSEG]; /* requests per second */
  double tcdf[LSIM__NSEG][LSIM_TRACE_MAX_TENANTS];
  int pi[LSIM__NSEG], oi[LSIM__NSEG]; /* sampler of each segment */
  lsim__len len[2 * LSIM__NSEG];
  int nlen;
  lsim_arrivals arr;
  double gamma_k;
} lsim__gen;

/* The integral of the modulation from 0 to t (seconds). */
static double lsim__M(const lsim_arrivals *a, double t) {
  if (a->onoff) {
    double C = a->on_s + a->off_s;
    double k = floor(t / C), x = t - k * C;
    return k * (a->on_s + a->off_level * a->off_s) +
           (x < a->on_s ? x : a->on_s + a->off_level * (x - a->on_s));
  }
  if (a->diurnal) {
    double w = 2.0 * M_PI / a->period_s;
    return t - a->amplitude / w *
                   (cos(w * (t + a->phase_s)) - cos(w * a->phase_s));
  }
  return t;
}

/* The t in [lo, hi] with M(t) = target (M(lo) <= target). */
static double lsim__Minv(const lsim_arrivals *a, double target, double lo,
                         double hi) {
  if (a->onoff) {
    double C = a->on_s + a->off_s, per = a->on_s + a->off_level * a->off_s;
    double k = floor(target / per), y = target - k * per;
    if (y <= a->on_s || a->off_level <= 0)
      return k * C + (y < a->on_s ? y : a->on_s);
    return k * C + a->on_s + (y - a->on_s) / a->off_level;
  }
  if (!a->diurnal)
    return target;
  double w = 2.0 * M_PI / a->period_s;
  double up = lo + (target - lsim__M(a, lo)) / (1.0 - a->amplitude);
  if (up < hi)
    hi = up;
  double t = lo + (target - lsim__M(a, lo));
  if (t > hi)
    t = hi;
  for (int i = 0; i < 100; i++) {
    double f = lsim__M(a, t) - target;
    if (fabs(f) <= 1e-12 * (1.0 + fabs(target)) || hi - lo <= 1e-12 * (1.0 + hi))
      break;
    if (f > 0)
      hi = t;
    else
      lo = t;
    double m = 1.0 + a->amplitude * sin(w * (t + a->phase_s));
    double nt = m > 1e-12 ? t - f / m : -1;
    t = (nt > lo && nt < hi) ? nt : 0.5 * (lo + hi);
  }
  return t;
}

/* Advance the general clock by `need` expected arrivals. */
static void lsim__advance(lsim__gen *g, double need) {
  const lsim_arrivals *a = &g->arr;
  for (;;) {
    double r = g->seg_rate[g->cur];
    double e = g->cur + 1 < g->nseg ? g->seg_at[g->cur + 1] : INFINITY;
    double Mt = lsim__M(a, g->t_s);
    if (isfinite(e)) {
      double avail = r * (lsim__M(a, e) - Mt);
      if (avail < need) {
        need -= avail;
        g->t_s = e;
        g->cur++;
        continue;
      }
    }
    double t = lsim__Minv(a, Mt + need / r, g->t_s, e);
    if (t < g->t_s)
      t = g->t_s;
    g->t_s = t > e ? e : t;
    return;
  }
}

/* An arrival computed in ns (a double) as the record's int64 arrival_ns:
** NaN, infinity or a time past 2^63 ns (about 292 simulated years) is a
** fatal E_TRACE_RANGE naming the generator's keys, never an undefined cast
** (which gave INT64_MIN, reported as a misleading E_TRACE_ORDER). */
static lsim_err lsim__gen_arrival(lsim__gen *g, double ns, int64_t *out,
                                  lsim_errbuf *eb) {
  if (!lsim_d2i64_checked(ns, 0, INT64_MAX, out))
    return 0;
  return lsim_fail(eb, LSIM_E_TRACE_RANGE,
                   "<generator>: request %lld: arrival %g s is past the end of "
                   "the ns clock (2^63 ns, about 292 years): "
                   "$.trace.generator.rate_per_s, onoff or shifts make "
                   "arrivals too sparse",
                   (long long)g->n, ns / 1e9);
}

static int lsim__gen_next(lsim__src *s, lsim__raw *r, lsim_errbuf *eb,
                          int *fatal) {
  lsim__gen *g = (lsim__gen *)s;
  *fatal = 0;
  if (g->n >= g->requests)
    return 0;
  memset(r, 0, sizeof *r);
  r->deadline_ns = r->cancel_ns = -1;
  r->time_field = "arrival";
  int seg = 0;
  if (g->simple) {
    /* Poisson process: exponential gaps with mean 1e9 / rate ns. */
    double gap = -log1p(-lsim_rng_unit(&g->ra)) * 1e9 / g->seg_rate[0];
    g->t_ns += gap;
    if (lsim__gen_arrival(g, g->t_ns, &r->arrival_ns, eb)) {
      *fatal = 1;
      return LSIM_E_TRACE_RANGE;
    }
  } else {
    double need = g->arr.process == LSIM_ARR_GAMMA
                      ? lsim__gamma(&g->ra, g->gamma_k) / g->gamma_k
                      : -log1p(-lsim_rng_unit(&g->ra));
    lsim__advance(g, need);
    if (lsim__gen_arrival(g, g->t_s * 1e9, &r->arrival_ns, eb)) {
      *fatal = 1;
      return LSIM_E_TRACE_RANGE;
    }
    seg = g->cur;
  }
  g->n++;
  double u = lsim_rng_unit(&g->rt) * g->tcdf[seg][g->T - 1];
  r->has_tenant = 1;
  r->tenant = lsim__search(g->tcdf[seg], g->T, u);
  r->prompt = lsim__len_draw(&g->len[g->pi[seg]], &g->rl);
  r->output = lsim__len_draw(&g->len[g->oi[seg]], &g->rl);
  return 1;
}

static void lsim__gen_close(lsim__src *s) {
  lsim__gen *g = (lsim__gen *)s;
  for (int i = 0; i < g->nlen; i++)
    lsim__len_release(&g->len[i]);
  free(g);
}

static const lsim__src_ops lsim__gen_ops = {
    /* .next = */ lsim__gen_next,
    /* .close = */ lsim__gen_close,
};

static lsim_err lsim__gen_len(lsim__gen *g, const lsim_len_dist *d, int *idx,
                              lsim_errbuf *eb) {
  lsim_err rc = lsim__len_init(&g->len[g->nlen], d, eb);
  if (rc)
    return rc;
  *idx = g->nlen++;
  return 0;
}

static lsim_err lsim__gen_open(lsim__src **out, const lsim_trace_spec *spec,
                        const lsim_trace_ctx *ctx, lsim_errbuf *eb) {
  static const lsim_arrivals plain; /* Poisson, no modulation, no shifts */
  const lsim_arrivals *a = spec->gen_arrivals ? spec->gen_arrivals : &plain;
  if (ctx->ntenants < 1 || spec->gen_requests < 0 ||
      !(spec->gen_rate_per_s > 0) || !spec->gen_prompt || !spec->gen_output ||
      a->nshifts < 0 || a->nshifts > LSIM_TRACE_MAX_SHIFTS ||
      (a->onoff && a->diurnal) ||
      (a->process == LSIM_ARR_GAMMA && !(a->cv >= 1e-3 && a->cv <= 100)) ||
      (a->onoff && (!(a->on_s >= 1e-6) || !(a->off_s >= 1e-6) || a->off_level < 0 ||
                    a->off_level > 1)) ||
      (a->diurnal && (!(a->period_s > 0) || a->amplitude < 0 ||
                      a->amplitude >= 1)))
    return lsim_fail(eb, LSIM_E_USAGE, "trace generator configuration invalid");
  lsim__gen *g = calloc(1, sizeof *g);
  if (!g)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory opening the generator");
  g->base.ops = &lsim__gen_ops;
  g->base.generated = 1;
  snprintf(g->base.path, sizeof g->base.path, "<generator>");
  g->requests = spec->gen_requests;
  g->arr = *a;
  g->T = ctx->ntenants;
  g->simple = a->process == LSIM_ARR_POISSON && !a->onoff && !a->diurnal &&
              a->nshifts == 0;
  if (a->process == LSIM_ARR_GAMMA)
    g->gamma_k = 1.0 / (a->cv * a->cv);
  lsim_rng_init(&g->ra, ctx->seed, LSIM_RNG_ARRIVALS);
  lsim_rng_init(&g->rt, ctx->seed, LSIM_RNG_TENANTS);
  lsim_rng_init(&g->rl, ctx->seed, LSIM_RNG_LENGTHS);

  g->nseg = 1 + a->nshifts;
  g->seg_at[0] = 0;
  g->seg_rate[0] = spec->gen_rate_per_s;
  lsim_err rc = lsim__gen_len(g, spec->gen_prompt, &g->pi[0], eb);
  if (!rc)
    rc = lsim__gen_len(g, spec->gen_output, &g->oi[0], eb);
  double acc = 0;
  for (int i = 0; i < g->T; i++)
    g->tcdf[0][i] = (acc += ctx->tenant_weights
                               ? (double)ctx->tenant_weights[i]
                               : 1.0);
  for (int k = 1; !rc && k < g->nseg; k++) {
    const lsim_gen_shift *sh = &a->shifts[k - 1];
    if (!(sh->at_s > g->seg_at[k - 1]) || sh->rate_per_s < 0) {
      rc = lsim_fail(eb, LSIM_E_USAGE,
                     "generator shifts must have increasing times");
      break;
    }
    g->seg_at[k] = sh->at_s;
    g->seg_rate[k] = sh->rate_per_s > 0 ? sh->rate_per_s : g->seg_rate[k - 1];
    g->pi[k] = g->pi[k - 1];
    g->oi[k] = g->oi[k - 1];
    if (sh->has_prompt)
      rc = lsim__gen_len(g, &sh->prompt, &g->pi[k], eb);
    if (!rc && sh->has_output)
      rc = lsim__gen_len(g, &sh->output, &g->oi[k], eb);
    acc = 0;
    for (int i = 0; i < g->T; i++)
      g->tcdf[k][i] = sh->has_weights
                          ? (acc += (double)sh->tenant_weights[i])
                          : g->tcdf[k - 1][i];
  }
  if (rc) {
    lsim__gen_close(&g->base);
    return rc;
  }
  int n = snprintf(g->base.desc, sizeof g->base.desc,
                   "generator %lld requests, %s at %g/s", (long long)g->requests,
                   a->process == LSIM_ARR_GAMMA ? "gamma" : "poisson",
                   spec->gen_rate_per_s);
  if (a->process == LSIM_ARR_GAMMA && n > 0 && n < (int)sizeof g->base.desc)
    n += snprintf(g->base.desc + n, sizeof g->base.desc - (size_t)n,
                  " cv %g", a->cv);
  if (a->onoff && n > 0 && n < (int)sizeof g->base.desc)
    n += snprintf(g->base.desc + n, sizeof g->base.desc - (size_t)n,
                  ", on/off %g s/%g s", a->on_s, a->off_s);
  if (a->diurnal && n > 0 && n < (int)sizeof g->base.desc)
    n += snprintf(g->base.desc + n, sizeof g->base.desc - (size_t)n,
                  ", diurnal %g s x%g", a->period_s, a->amplitude);
  if (a->nshifts && n > 0 && n < (int)sizeof g->base.desc)
    snprintf(g->base.desc + n, sizeof g->base.desc - (size_t)n,
             ", %d shift(s)", a->nshifts);
  *out = &g->base;
  return 0;
}

static lsim_err lsim__gen_import(lsim__src **out, const lsim__src_args *a,
                                 lsim_errbuf *eb) {
  if (!a->spec || !a->ctx)
    return lsim_fail(eb, LSIM_E_USAGE, "the generator needs a trace spec");
  return lsim__gen_open(out, a->spec, a->ctx, eb);
}

const lsim__importer lsim__importer_generator = {
    .name = "generator", .open = lsim__gen_import};
