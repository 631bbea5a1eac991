/*
** assign.c: give every record a tenant and an adapter of the catalog.
**
** The order of decisions for one record:
**
**   1. tenant, unless the tenant mode is OWNER: the trace's (an index, or a
**      scenario tenant name), the trace's value modulo the tenant count, or
**      a draw by traffic weight (LSIM_TRACE_RNG_ASSIGN_TENANT; for the
**      generator, whose tenants are already drawn by weight, its draw);
**   2. adapter: the trace's (an index, or an alias numbered by first
**      appearance), or drawn within the scope (the tenant's own adapters
**      a % T == t, or the first `count` adapters of the catalog) by Zipf,
**      uniformly, distinct per request (round robin), identical, or by the
**      ServeGen client skew; draws come from LSIM_RNG_ADAPTERS;
**   3. tenant, when the mode is OWNER: adapter % T.
**
** Popularity tables are cumulative weights per scope segment: for the
** tenant scope, tenant t's segment lists its adapters t, t + T, t + 2T, ...
** by rank; for the catalog scope there is one segment 0, 1, ..., count-1.
** A Zipf table with the tenant scope is, entry for entry, the table the
** original generator used, so its draws are unchanged.  Memory: one double
** per adapter in scope, the aliases seen (at most the catalog size), and the
** tenant names.  Nothing depends on hash iteration order.
*/
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct lsim__assign {
  int raw; /* no catalog: report the trace's own values */
  int T, N, count;
  int tmode, amode, scope;
  double alpha;
  int identical;
  char tnames[LSIM_TRACE_MAX_TENANTS][64];
  int has_tnames;
  double tcdf[LSIM_TRACE_MAX_TENANTS];
  lsim_rng rt, ra;
  double *cdf;                          /* popularity, by segment */
  int seg_off[LSIM_TRACE_MAX_TENANTS];  /* tenant scope: segment of t */
  int seg_n[LSIM_TRACE_MAX_TENANTS];
  int64_t distinct;                     /* catalog scope counter */
  int64_t distinct_t[LSIM_TRACE_MAX_TENANTS];
  lsim__names tn, an; /* trace names by first appearance */
  char desc[256];
};

static const char *const lsim__tmode_names[] = {"auto", "trace", "weights",
                                                "owner", "modulo"};
static const char *const lsim__amode_names[] = {
    "auto", "trace", "zipf", "uniform", "distinct", "identical", "servegen"};

/* Weight of the k-th adapter (by rank) of a segment of m adapters. */
static double lsim__weight(const lsim__assign *a, int k, int m,
                           const double *sg_rate, int C) {
  if (a->amode == LSIM_AA_SERVEGEN) {
    int cls = k % C;
    int size = m / C + (cls < m % C ? 1 : 0);
    return sg_rate[cls] / (double)size;
  }
  return pow((double)(k + 1), -a->alpha);
}

static int lsim__cmp_desc(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a < b) - (a > b);
}

static lsim_err lsim__tables(lsim__assign *a, const lsim_assign_spec *sp,
                             lsim_errbuf *eb) {
  double *rate = NULL;
  int C = 0;
  if (a->amode == LSIM_AA_SERVEGEN) {
    int *ids;
    lsim_err rc = lsim__servegen_rates(sp->servegen, &ids, &rate, &C, eb);
    if (rc)
      return rc;
    free(ids);
    /* rank classes by mean rate, busiest first (ties: stable by value) */
    qsort(rate, (size_t)C, sizeof *rate, lsim__cmp_desc);
    if (!(rate[0] > 0)) {
      free(rate);
      return lsim_fail(eb, LSIM_E_TRACE_RANGE,
                       "%s: every client has a zero mean rate", sp->servegen);
    }
    for (int i = 0; i < C; i++)
      if (!(rate[i] > 0))
        rate[i] = rate[0] * 1e-12; /* idle clients: never drawn in practice */
  }
  a->cdf = malloc((size_t)a->count * sizeof *a->cdf);
  if (!a->cdf) {
    free(rate);
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory for adapter popularity");
  }
  if (a->scope == LSIM_SCOPE_CATALOG) {
    double acc = 0;
    for (int k = 0; k < a->count; k++)
      a->cdf[k] = (acc += lsim__weight(a, k, a->count, rate, C));
  } else {
    for (int t = 0; t < a->T; t++) {
      double acc = 0;
      for (int k = 0; k < a->seg_n[t]; k++)
        a->cdf[a->seg_off[t] + k] =
            (acc += lsim__weight(a, k, a->seg_n[t], rate, C));
    }
  }
  free(rate);
  return 0;
}

lsim_err lsim__assign_new(lsim__assign **out, const lsim_assign_spec *spec,
                          const lsim_trace_ctx *ctx, int format,
                          lsim_errbuf *eb) {
  static const lsim_assign_spec defaults;
  const lsim_assign_spec *sp = spec ? spec : &defaults;
  lsim__assign *a = calloc(1, sizeof *a);
  if (!a)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  *out = a;
  a->raw = ctx->ntenants == 0;
  if (a->raw) {
    snprintf(a->desc, sizeof a->desc, "none (the trace's own values)");
    return 0;
  }
  a->T = ctx->ntenants;
  a->N = ctx->nadapters;
  a->count = sp->count > 0 ? sp->count : a->N;
  a->tmode = sp->tenants;
  if (a->tmode == LSIM_AT_AUTO && lsim__importer_at(format) &&
      lsim__importer_at(format)->tenant_modulo)
    a->tmode = LSIM_AT_MODULO; /* their tenants are models and clients */
  a->amode = sp->adapters;
  a->scope = sp->scope;
  a->alpha = sp->has_alpha ? sp->alpha : ctx->zipf_s;
  a->identical = sp->adapter;
  if (a->T < 1 || a->T > LSIM_TRACE_MAX_TENANTS || a->N < a->T ||
      a->count > a->N || a->count < a->T || a->tmode < 0 ||
      a->tmode > LSIM_AT_MODULO || a->amode < 0 ||
      a->amode > LSIM_AA_SERVEGEN || a->scope < 0 ||
      a->scope > LSIM_SCOPE_CATALOG || !(a->alpha >= 0) ||
      (a->tmode == LSIM_AT_OWNER && a->scope == LSIM_SCOPE_TENANT) ||
      (a->amode == LSIM_AA_IDENTICAL &&
       (a->identical < 0 || a->identical >= a->count)) ||
      (a->amode == LSIM_AA_SERVEGEN && !sp->servegen[0]))
    return lsim_fail(eb, LSIM_E_USAGE,
                     "assignment configuration invalid (tenants %d, adapters "
                     "%d, count %d, tenant mode %d, adapter mode %d, scope %d)",
                     a->T, a->N, a->count, a->tmode, a->amode, a->scope);
  if (ctx->tenant_names) {
    a->has_tnames = 1;
    for (int i = 0; i < a->T; i++)
      snprintf(a->tnames[i], sizeof a->tnames[i], "%s", ctx->tenant_names[i]);
  }
  /* tenant scope: tenant t's segment lists t, t + T, ... below count */
  for (int t = 0, off = 0; t < a->T; t++) {
    a->seg_off[t] = off;
    a->seg_n[t] = (a->count - t + a->T - 1) / a->T;
    off += a->seg_n[t];
  }
  double acc = 0;
  for (int i = 0; i < a->T; i++)
    a->tcdf[i] =
        (acc += ctx->tenant_weights ? (double)ctx->tenant_weights[i] : 1.0);
  lsim_rng_init(&a->rt, ctx->seed, LSIM_TRACE_RNG_ASSIGN_TENANT);
  lsim_rng_init(&a->ra, ctx->seed, LSIM_RNG_ADAPTERS);
  if (a->amode == LSIM_AA_AUTO || a->amode == LSIM_AA_ZIPF ||
      a->amode == LSIM_AA_SERVEGEN) {
    lsim_err rc = lsim__tables(a, sp, eb);
    if (rc)
      return rc;
  }
  int n = snprintf(a->desc, sizeof a->desc,
                   "seed %llu; tenants %s over %d; adapters %s", 
                   (unsigned long long)ctx->seed, lsim__tmode_names[a->tmode],
                   a->T, lsim__amode_names[a->amode]);
  if (n > 0 && n < (int)sizeof a->desc) {
    if (a->amode == LSIM_AA_AUTO || a->amode == LSIM_AA_ZIPF)
      n += snprintf(a->desc + n, sizeof a->desc - (size_t)n,
                    "%s alpha %g", a->amode == LSIM_AA_AUTO ? " (else zipf)" : "",
                    a->alpha);
    else if (a->amode == LSIM_AA_IDENTICAL)
      n += snprintf(a->desc + n, sizeof a->desc - (size_t)n, " adapter %d",
                    a->identical);
    else if (a->amode == LSIM_AA_SERVEGEN)
      n += snprintf(a->desc + n, sizeof a->desc - (size_t)n, " from %.80s",
                    sp->servegen);
  }
  if (n > 0 && n < (int)sizeof a->desc)
    snprintf(a->desc + n, sizeof a->desc - (size_t)n,
             ", scope %s, %d of %d adapters",
             a->scope == LSIM_SCOPE_TENANT ? "tenant" : "catalog", a->count,
             a->N);
  return 0;
}

/* The trace's adapter value as an index (aliases numbered on first use). */
static lsim_err lsim__trace_adapter(lsim__assign *a, const lsim__raw *r,
                                    const char *path, int *out,
                                    lsim_errbuf *eb) {
  char q[LSIM__SHOW_BUF];
  if (!r->adapter_name) {
    if (!a->raw && r->adapter >= a->N)
      return lsim__rowerr(eb, LSIM_E_TRACE_RANGE, path, r->line, "adapter",
                          "%lld not in [0, %d)", (long long)r->adapter, a->N);
    *out = (int)r->adapter;
    return 0;
  }
  int64_t k = lsim__names_find(&a->an, r->adapter_name);
  if (k < 0) {
    if (!a->raw && a->an.n >= a->N)
      return lsim__rowerr(eb, LSIM_E_TRACE_ALIAS, path, r->line, "adapter",
                          "alias '%s' would be distinct adapter number %lld but "
                          "the catalog has %d",
                          lsim__show(r->adapter_name, q, sizeof q),
                          (long long)a->an.n + 1, a->N);
    if ((k = lsim__names_add(&a->an, r->adapter_name)) < 0)
      return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  }
  *out = (int)k;
  return 0;
}

static lsim_err lsim__trace_tenant(lsim__assign *a, const lsim__raw *r,
                                   const char *path, int modulo, int *out,
                                   lsim_errbuf *eb) {
  char q[LSIM__SHOW_BUF];
  if (!r->tenant_name) {
    if (!a->raw && !modulo && r->tenant >= a->T)
      return lsim__rowerr(eb, LSIM_E_TRACE_RANGE, path, r->line, "tenant",
                          "%lld not in [0, %d)", (long long)r->tenant, a->T);
    *out = (int)(modulo ? r->tenant % a->T : r->tenant);
    return 0;
  }
  if (!a->raw && !modulo && a->has_tnames) {
    for (int i = 0; i < a->T; i++)
      if (strcmp(a->tnames[i], r->tenant_name) == 0) {
        *out = i;
        return 0;
      }
    return lsim__rowerr(eb, LSIM_E_TRACE_ALIAS, path, r->line, "tenant",
                        "'%s' is not a tenant of the scenario",
                        lsim__show(r->tenant_name, q, sizeof q));
  }
  if (!a->raw && !modulo && lsim__names_find(&a->tn, r->tenant_name) < 0 &&
      a->tn.n >= a->T)
    /* no tenant names given: names are numbered by first appearance */
    return lsim__rowerr(eb, LSIM_E_TRACE_ALIAS, path, r->line, "tenant",
                        "'%s' would be distinct tenant number %lld but there "
                        "are %d tenants",
                        lsim__show(r->tenant_name, q, sizeof q),
                        (long long)a->tn.n + 1, a->T);
  int64_t k = lsim__names_add(&a->tn, r->tenant_name);
  if (k < 0)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  *out = (int)(modulo ? k % a->T : k);
  return 0;
}

lsim_err lsim__assign_do(lsim__assign *a, const lsim__raw *r, int generated,
                         const char *path, lsim_trace_rec *rec,
                         lsim_errbuf *eb) {
  lsim_err rc;
  int t = -1, ad = -1;
  rec->tenant_name = rec->adapter_name = NULL;
  if (a->raw) {
    if (r->has_tenant && (rc = lsim__trace_tenant(a, r, path, 0, &t, eb)))
      return rc;
    if (r->has_adapter && (rc = lsim__trace_adapter(a, r, path, &ad, eb)))
      return rc;
    rec->tenant = t;
    rec->adapter = ad;
    rec->tenant_name = r->has_tenant ? r->tenant_name : NULL;
    rec->adapter_name = r->has_adapter ? r->adapter_name : NULL;
    return 0;
  }
  /* 1. tenant */
  switch (a->tmode) {
  case LSIM_AT_AUTO:
  case LSIM_AT_TRACE:
    if (r->has_tenant) {
      if ((rc = lsim__trace_tenant(a, r, path, 0, &t, eb)))
        return rc;
      rec->tenant_name = r->tenant_name;
      break;
    }
    if (a->tmode == LSIM_AT_TRACE)
      return lsim__rowerr(eb, LSIM_E_TRACE_MISSING, path, r->line, "tenant",
                          "the record has no tenant (assign.tenants is "
                          "'trace')");
    /* auto without a trace tenant: by weight, as below */
    t = lsim__search(a->tcdf, a->T,
                     lsim_rng_unit(&a->rt) * a->tcdf[a->T - 1]);
    break;
  case LSIM_AT_WEIGHTS:
    if (generated && r->has_tenant) {
      t = (int)r->tenant; /* the generator drew it by weight already */
    } else {
      double u = lsim_rng_unit(&a->rt) * a->tcdf[a->T - 1];
      t = lsim__search(a->tcdf, a->T, u);
    }
    break;
  case LSIM_AT_MODULO:
    if (!r->has_tenant)
      return lsim__rowerr(eb, LSIM_E_TRACE_MISSING, path, r->line, "tenant",
                          "the record has no tenant (assign.tenants is "
                          "'modulo')");
    if ((rc = lsim__trace_tenant(a, r, path, 1, &t, eb)))
      return rc;
    break;
  default: /* OWNER: after the adapter */
    break;
  }
  /* 2. adapter */
  int mode = a->amode;
  if (mode == LSIM_AA_AUTO || mode == LSIM_AA_TRACE) {
    if (r->has_adapter) {
      if ((rc = lsim__trace_adapter(a, r, path, &ad, eb)))
        return rc;
      rec->adapter_name = r->adapter_name;
      mode = -1;
    } else if (mode == LSIM_AA_TRACE) {
      return lsim__rowerr(eb, LSIM_E_TRACE_MISSING, path, r->line, "adapter",
                          "the record has no adapter (assign.adapters is "
                          "'trace')");
    } else {
      mode = LSIM_AA_ZIPF;
    }
  }
  if (mode >= 0) {
    int catalog = a->scope == LSIM_SCOPE_CATALOG;
    int m = catalog ? a->count : a->seg_n[t];
    const double *cdf = a->cdf ? a->cdf + (catalog ? 0 : a->seg_off[t]) : NULL;
    int k;
    switch (mode) {
    case LSIM_AA_UNIFORM:
      k = (int)lsim_rng_below(&a->ra, (uint64_t)m);
      break;
    case LSIM_AA_DISTINCT:
      k = catalog ? (int)(a->distinct++ % m) : (int)(a->distinct_t[t]++ % m);
      break;
    case LSIM_AA_IDENTICAL:
      k = -1;
      ad = a->identical;
      break;
    default: /* zipf, servegen: by the popularity table */
      k = lsim__search(cdf, m, lsim_rng_unit(&a->ra) * cdf[m - 1]);
      break;
    }
    if (k >= 0)
      ad = catalog ? k : t + k * a->T;
  }
  /* 3. owner */
  if (a->tmode == LSIM_AT_OWNER) {
    t = ad % a->T;
    rec->tenant_name = NULL;
  }
  rec->tenant = t;
  rec->adapter = ad;
  return 0;
}

const char *lsim__assign_desc(const lsim__assign *a) { return a->desc; }

void lsim__assign_release(lsim__assign *a) {
  if (!a)
    return;
  free(a->cdf);
  lsim__names_release(&a->tn);
  lsim__names_release(&a->an);
  free(a);
}
