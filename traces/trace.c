/*
** trace.c: the synthetic generator and the lorasim CSV reader.
**
** Both yield records one at a time; neither holds more than one record, so
** a replay's memory is independent of the trace length.
*/
#include "trace.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>


/* ---- generator ----------------------------------------------------------- */

static int lsim__draw_len(lsim_rng *r, const lsim_len_dist *d) {
  int64_t v;
  switch (d->kind) {
  case LSIM_DIST_UNIFORM:
    v = d->min + (int64_t)lsim_rng_below(r, (uint64_t)(d->max - d->min + 1));
    break;
  case LSIM_DIST_EXP:
    v = (int64_t)llround(-d->mean * log1p(-lsim_rng_unit(r)));
    break;
  default:
    v = d->min;
  }
  if (v < d->min)
    v = d->min;
  if (v > d->max)
    v = d->max;
  return (int)v;
}

/* Index of the first cdf entry > u among the first n (binary search). */
static int lsim__search(const double *cdf, int n, double u) {
  int lo = 0, hi = n - 1;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (cdf[mid] > u)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

lsim_err lsim_trace_open_gen(lsim_trace *t, const lsim_trace_gen_cfg *cfg,
                             lsim_errbuf *eb) {
  memset(t, 0, sizeof *t);
  if (cfg->ntenants < 1 || cfg->nadapters < cfg->ntenants ||
      cfg->rate_per_s <= 0 || cfg->requests < 0)
    return lsim_fail(eb, LSIM_E_USAGE, "trace generator configuration invalid");
  t->gen = *cfg;
  t->ntenants = cfg->ntenants;
  t->nadapters = cfg->nadapters;
  snprintf(t->path, sizeof t->path, "<generator>");
  lsim_rng_init(&t->rng_arrival, cfg->seed, LSIM_RNG_ARRIVALS);
  lsim_rng_init(&t->rng_tenant, cfg->seed, LSIM_RNG_TENANTS);
  lsim_rng_init(&t->rng_adapter, cfg->seed, LSIM_RNG_ADAPTERS);
  lsim_rng_init(&t->rng_len, cfg->seed, LSIM_RNG_LENGTHS);
  t->zipf_n = (cfg->nadapters + cfg->ntenants - 1) / cfg->ntenants;
  t->tenant_cdf = malloc((size_t)cfg->ntenants * sizeof *t->tenant_cdf);
  t->zipf_cdf = malloc((size_t)t->zipf_n * sizeof *t->zipf_cdf);
  if (!t->tenant_cdf || !t->zipf_cdf) {
    lsim_trace_close(t);
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory opening generator");
  }
  double acc = 0;
  for (int i = 0; i < cfg->ntenants; i++)
    t->tenant_cdf[i] = (acc += (double)cfg->tenant_weights[i]);
  acc = 0;
  for (int k = 0; k < t->zipf_n; k++)
    t->zipf_cdf[k] = (acc += pow((double)(k + 1), -cfg->zipf_s));
  return 0;
}

static int lsim__gen_next(lsim_trace *t, lsim_trace_rec *rec) {
  const lsim_trace_gen_cfg *g = &t->gen;
  if (t->next_id >= g->requests)
    return 0;
  /* Poisson process: exponential gaps with mean 1e9 / rate ns. */
  double gap = -log1p(-lsim_rng_unit(&t->rng_arrival)) * 1e9 / g->rate_per_s;
  t->t_ns += gap;
  rec->id = t->next_id++;
  rec->arrival_ns = (int64_t)t->t_ns;
  double u = lsim_rng_unit(&t->rng_tenant) * t->tenant_cdf[g->ntenants - 1];
  int tenant = lsim__search(t->tenant_cdf, g->ntenants, u);
  /* tenant owns adapters tenant, tenant + T, tenant + 2T, ... */
  int owned = (g->nadapters - tenant + g->ntenants - 1) / g->ntenants;
  double v = lsim_rng_unit(&t->rng_adapter) * t->zipf_cdf[owned - 1];
  int k = lsim__search(t->zipf_cdf, owned, v);
  rec->tenant = tenant;
  rec->adapter = tenant + k * g->ntenants;
  rec->prompt_tokens = lsim__draw_len(&t->rng_len, g->prompt);
  rec->output_tokens = lsim__draw_len(&t->rng_len, g->output);
  return 1;
}

/* ---- CSV ------------------------------------------------------------------- */

static const char lsim__csv_header[] =
    "arrival_us,tenant,adapter,prompt_tokens,output_tokens";

lsim_err lsim_trace_open_csv(lsim_trace *t, const char *path, int ntenants,
                             int nadapters, lsim_errbuf *eb) {
  memset(t, 0, sizeof *t);
  t->is_file = 1;
  t->ntenants = ntenants;
  t->nadapters = nadapters;
  snprintf(t->path, sizeof t->path, "%s", path);
  t->fp = fopen(path, "r");
  if (!t->fp)
    return lsim_fail(eb, LSIM_E_IO, "%s: cannot open: %s", path,
                     strerror(errno));
  return 0;
}

static int lsim__blank(const char *s) {
  for (; *s; s++)
    if (*s != ' ' && *s != '\t' && *s != '\r' && *s != '\n')
      return 0;
  return 1;
}

/* Parse one comma-separated integer field at *p into *out. */
static int lsim__field(char **p, int64_t *out, int last) {
  char *end;
  errno = 0;
  long long v = strtoll(*p, &end, 10);
  if (end == *p || errno)
    return 0;
  while (*end == ' ' || *end == '\t')
    end++;
  if (last) {
    if (*end && *end != '\r' && *end != '\n')
      return 0;
  } else {
    if (*end != ',')
      return 0;
    end++;
  }
  *out = v;
  *p = end;
  return 1;
}

static int lsim__csv_next(lsim_trace *t, lsim_trace_rec *rec,
                          lsim_errbuf *eb) {
  char buf[512];
  for (;;) {
    if (!fgets(buf, sizeof buf, t->fp)) {
      if (ferror(t->fp))
        return lsim_fail(eb, LSIM_E_IO, "%s:%lld: read error", t->path,
                         (long long)t->line + 1);
      if (t->line == 0)
        return lsim_fail(eb, LSIM_E_TRACE_PARSE, "%s:1: empty file, expected header '%s'",
                         t->path, lsim__csv_header);
      return 0;
    }
    t->line++;
    size_t len = strlen(buf);
    if (len == sizeof buf - 1 && buf[len - 1] != '\n')
      return lsim_fail(eb, LSIM_E_TRACE_PARSE, "%s:%lld: line too long",
                       t->path, (long long)t->line);
    if (t->line == 1) {
      buf[strcspn(buf, "\r\n")] = 0;
      if (strcmp(buf, lsim__csv_header) != 0)
        return lsim_fail(eb, LSIM_E_TRACE_PARSE,
                         "%s:1: expected header '%s'", t->path,
                         lsim__csv_header);
      continue;
    }
    if (lsim__blank(buf) || buf[0] == '#')
      continue;
    int64_t f[5];
    char *p = buf;
    for (int i = 0; i < 5; i++)
      if (!lsim__field(&p, &f[i], i == 4))
        return lsim_fail(eb, LSIM_E_TRACE_PARSE,
                         "%s:%lld: field %d: expected an integer (5 fields: %s)",
                         t->path, (long long)t->line, i + 1, lsim__csv_header);
    if (f[0] < 0 || f[0] > INT64_MAX / 1000)
      return lsim_fail(eb, LSIM_E_TRACE_RANGE, "%s:%lld: arrival_us out of range",
                       t->path, (long long)t->line);
    int64_t ns = f[0] * 1000;
    if (t->next_id > 0 && ns < t->last_ns)
      return lsim_fail(eb, LSIM_E_TRACE_ORDER,
                       "%s:%lld: arrival_us %lld before the previous line's",
                       t->path, (long long)t->line, (long long)f[0]);
    if (f[1] < 0 || f[1] >= t->ntenants)
      return lsim_fail(eb, LSIM_E_TRACE_RANGE,
                       "%s:%lld: tenant %lld not in [0, %d)", t->path,
                       (long long)t->line, (long long)f[1], t->ntenants);
    if (f[2] < 0 || f[2] >= t->nadapters)
      return lsim_fail(eb, LSIM_E_TRACE_RANGE,
                       "%s:%lld: adapter %lld not in [0, %d)", t->path,
                       (long long)t->line, (long long)f[2], t->nadapters);
    if (f[3] < 1 || f[3] > 10000000 || f[4] < 1 || f[4] > 10000000)
      return lsim_fail(eb, LSIM_E_TRACE_RANGE,
                       "%s:%lld: token counts must be in [1, 10000000]",
                       t->path, (long long)t->line);
    rec->id = t->next_id++;
    rec->arrival_ns = t->last_ns = ns;
    rec->tenant = (int)f[1];
    rec->adapter = (int)f[2];
    rec->prompt_tokens = (int)f[3];
    rec->output_tokens = (int)f[4];
    return 1;
  }
}

int lsim_trace_next(lsim_trace *t, lsim_trace_rec *rec, lsim_errbuf *eb) {
  return t->is_file ? lsim__csv_next(t, rec, eb) : lsim__gen_next(t, rec);
}

void lsim_trace_close(lsim_trace *t) {
  if (t->fp)
    fclose(t->fp);
  free(t->tenant_cdf);
  free(t->zipf_cdf);
  memset(t, 0, sizeof *t);
}
