/*
** stats.c: what `lorasim trace stats` reports about a trace.
**
** Exact figures: length percentiles are nearest-rank over a value -> count
** table (memory grows with the distinct lengths, not the requests); tenant
** and adapter shares come from per-value counts; a prefix block is "reused"
** when its hash was seen before in the trace (an unbounded cache).  The
** arrival-rate series keeps at most LSIM__BINS bins: when the span
** outgrows them, neighbouring bins are merged and the width doubles.
** Output is sorted by value or count, never by hash layout.
*/
#include "internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define LSIM__BINS 4096

struct lsim_trace_stats {
  int64_t n;
  int64_t first_ns, last_ns;
  double prompt_sum, output_sum;
  lsim__map prompt, output;   /* length -> count */
  lsim__map tenants, adapters; /* index -> count */
  lsim__map blocks;            /* hash -> count */
  int64_t nblocks, reused;
  int64_t bin_ns;              /* width of a rate bin */
  int64_t bins[LSIM__BINS];
  int nbins;                   /* bins in use */
};

lsim_err lsim_trace_stats_new(lsim_trace_stats **s, lsim_errbuf *eb) {
  *s = calloc(1, sizeof **s);
  if (!*s)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  (*s)->bin_ns = 1000000; /* 1 ms, doubled as needed */
  return 0;
}

static int lsim__count(lsim__map *m, uint64_t key) {
  int64_t *v = lsim__map_put(m, key, NULL);
  if (!v)
    return -1;
  ++*v;
  return 0;
}

lsim_err lsim_trace_stats_add(lsim_trace_stats *s, const lsim_trace_rec *r,
                              lsim_errbuf *eb) {
  if (s->n == 0)
    s->first_ns = r->arrival_ns;
  s->last_ns = r->arrival_ns;
  s->n++;
  s->prompt_sum += r->prompt_tokens;
  s->output_sum += r->output_tokens;
  if (lsim__count(&s->prompt, (uint64_t)r->prompt_tokens) ||
      lsim__count(&s->output, (uint64_t)r->output_tokens) ||
      (r->tenant >= 0 && lsim__count(&s->tenants, (uint64_t)r->tenant)) ||
      (r->adapter >= 0 && lsim__count(&s->adapters, (uint64_t)r->adapter)))
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  for (int i = 0; i < r->nblocks; i++) {
    int added;
    int64_t *v = lsim__map_put(&s->blocks, r->blocks[i], &added);
    if (!v)
      return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
    ++*v;
    s->nblocks++;
    s->reused += !added;
  }
  int64_t b = r->arrival_ns / s->bin_ns;
  while (b >= LSIM__BINS) {
    for (int i = 0; i < LSIM__BINS / 2; i++)
      s->bins[i] = s->bins[2 * i] + s->bins[2 * i + 1];
    memset(s->bins + LSIM__BINS / 2, 0, sizeof s->bins / 2);
    s->nbins = (s->nbins + 1) / 2;
    s->bin_ns *= 2;
    b = r->arrival_ns / s->bin_ns;
  }
  s->bins[b]++;
  if (b + 1 > s->nbins)
    s->nbins = (int)b + 1;
  return 0;
}

typedef struct lsim__vc {
  int64_t v, c;
} lsim__vc;

static int lsim__by_value(const void *a, const void *b) {
  const lsim__vc *x = a, *y = b;
  return (x->v > y->v) - (x->v < y->v);
}

static int lsim__by_count(const void *a, const void *b) {
  const lsim__vc *x = a, *y = b;
  if (x->c != y->c)
    return (x->c < y->c) - (x->c > y->c);
  return (x->v > y->v) - (x->v < y->v);
}

/* The map's (key, count) pairs, sorted by cmp; NULL when empty or no
** memory. */
static lsim__vc *lsim__pairs(const lsim__map *m,
                             int (*cmp)(const void *, const void *)) {
  if (!m->n)
    return NULL;
  lsim__vc *p = malloc(m->n * sizeof *p);
  if (!p)
    return NULL;
  size_t k = 0;
  for (size_t i = 0; i < m->cap; i++)
    if (m->used[i])
      p[k++] = (lsim__vc){(int64_t)m->keys[i], m->vals[i]};
  qsort(p, m->n, sizeof *p, cmp);
  return p;
}

/* Nearest-rank percentiles p50, p90, p99 and the max of a length table. */
static void lsim__pct(const lsim__map *m, int64_t n, int64_t out[4]) {
  memset(out, 0, 4 * sizeof *out);
  lsim__vc *p = lsim__pairs(m, lsim__by_value);
  if (!p)
    return;
  static const double q[3] = {0.50, 0.90, 0.99};
  for (int j = 0; j < 3; j++) {
    int64_t rank = (int64_t)(q[j] * (double)n);
    if ((double)rank < q[j] * (double)n)
      rank++;
    if (rank < 1)
      rank = 1;
    int64_t cum = 0;
    for (size_t i = 0; i < m->n; i++) {
      cum += p[i].c;
      if (cum >= rank) {
        out[j] = p[i].v;
        break;
      }
    }
  }
  out[3] = p[m->n - 1].v;
  free(p);
}

void lsim_trace_stats_summary(const lsim_trace_stats *s,
                              lsim_trace_summary *o) {
  memset(o, 0, sizeof *o);
  o->requests = s->n;
  o->first_ns = s->first_ns;
  o->last_ns = s->last_ns;
  double span = (double)(s->last_ns - s->first_ns) * 1e-9;
  o->rate_per_s = s->n > 1 && span > 0 ? (double)(s->n - 1) / span : 0;
  int64_t p[4];
  lsim__pct(&s->prompt, s->n, p);
  o->prompt_p50 = p[0];
  o->prompt_p90 = p[1];
  o->prompt_p99 = p[2];
  o->prompt_max = p[3];
  lsim__pct(&s->output, s->n, p);
  o->output_p50 = p[0];
  o->output_p90 = p[1];
  o->output_p99 = p[2];
  o->output_max = p[3];
  o->prompt_mean = s->n ? s->prompt_sum / (double)s->n : 0;
  o->output_mean = s->n ? s->output_sum / (double)s->n : 0;
  o->tenants = (int64_t)s->tenants.n;
  o->adapters = (int64_t)s->adapters.n;
  o->blocks = s->nblocks;
  o->distinct_blocks = (int64_t)s->blocks.n;
  o->reused_blocks = s->reused;
  o->reuse_ratio = s->nblocks ? (double)s->reused / (double)s->nblocks : 0;
}

void lsim_trace_stats_print(const lsim_trace_stats *s, FILE *f) {
  lsim_trace_summary o;
  lsim_trace_stats_summary(s, &o);
  fprintf(f, "requests        %" PRId64 "\n", o.requests);
  fprintf(f, "span            %.3f s (first arrival %.3f s, last %.3f s)\n",
          (double)(o.last_ns - o.first_ns) * 1e-9, (double)o.first_ns * 1e-9,
          (double)o.last_ns * 1e-9);
  int64_t peak = 0;
  for (int i = 0; i < s->nbins; i++)
    if (s->bins[i] > peak)
      peak = s->bins[i];
  fprintf(f, "rate            %.3f req/s mean, %.3f req/s peak (bins of %.3f s)\n",
          o.rate_per_s, (double)peak / ((double)s->bin_ns * 1e-9),
          (double)s->bin_ns * 1e-9);
  fprintf(f,
          "prompt tokens   mean %.1f  p50 %" PRId64 "  p90 %" PRId64
          "  p99 %" PRId64 "  max %" PRId64 "\n",
          o.prompt_mean, o.prompt_p50, o.prompt_p90, o.prompt_p99,
          o.prompt_max);
  fprintf(f,
          "output tokens   mean %.1f  p50 %" PRId64 "  p90 %" PRId64
          "  p99 %" PRId64 "  max %" PRId64 "\n",
          o.output_mean, o.output_p50, o.output_p90, o.output_p99,
          o.output_max);
  const lsim__map *ms[2] = {&s->tenants, &s->adapters};
  const char *what[2] = {"tenants         ", "adapters        "};
  for (int k = 0; k < 2; k++) {
    if (!ms[k]->n) {
      fprintf(f, "%snone assigned\n", what[k]);
      continue;
    }
    lsim__vc *p = lsim__pairs(ms[k], lsim__by_count);
    fprintf(f, "%s%zu distinct; most requested:", what[k], ms[k]->n);
    for (size_t i = 0; p && i < ms[k]->n && i < 5; i++)
      fprintf(f, " %" PRId64 " (%.1f%%)", p[i].v,
              100.0 * (double)p[i].c / (double)s->n);
    if (p && k == 1 && ms[k]->n >= 100) {
      size_t top = ms[k]->n / 100;
      int64_t c = 0;
      for (size_t i = 0; i < top; i++)
        c += p[i].c;
      fprintf(f, "; top 1%% carry %.1f%%", 100.0 * (double)c / (double)s->n);
    }
    fputc('\n', f);
    free(p);
  }
  if (o.blocks)
    fprintf(f,
            "prefix blocks   %" PRId64 " (%" PRId64 " distinct), %" PRId64
            " reused: reuse ratio %.2f%%\n",
            o.blocks, o.distinct_blocks, o.reused_blocks,
            100.0 * o.reuse_ratio);
  else
    fprintf(f, "prefix blocks   none in the trace\n");
}

lsim_err lsim_trace_stats_rate_dat(const lsim_trace_stats *s, const char *path,
                                   lsim_errbuf *eb) {
  FILE *fp = fopen(path, "w");
  if (!fp)
    return lsim_fail(eb, LSIM_E_IO, "%s: cannot create", path);
  double w = (double)s->bin_ns * 1e-9;
  fprintf(fp, "# bin start (s), arrivals per second over bins of %.6f s\n", w);
  for (int i = 0; i < s->nbins; i++)
    fprintf(fp, "%.6f %.6f\n", (double)i * w, (double)s->bins[i] / w);
  int bad = ferror(fp);
  if (fclose(fp) != 0 || bad)
    return lsim_fail(eb, LSIM_E_IO, "%s: write error", path);
  return 0;
}

void lsim_trace_stats_release(lsim_trace_stats *s) {
  if (!s)
    return;
  lsim__map_release(&s->prompt);
  lsim__map_release(&s->output);
  lsim__map_release(&s->tenants);
  lsim__map_release(&s->adapters);
  lsim__map_release(&s->blocks);
  free(s);
}
