/*
** trace.c: the trace stream: open a source, check arrival order, assign
** tenants and adapters, count skipped rows.
**
** Invariants of an open trace:
**   1. records come out with ids 0, 1, 2, ... and non-decreasing arrival_ns
**      (a record that would go back in time is an E_TRACE_ORDER bad row);
**   2. at most one record is held (the source's current row), so memory does
**      not depend on the trace length;
**   3. with skip_bad_rows, a bad row never changes the state that later rows
**      see except the skip counters (and, for aliases, nothing is numbered
**      on a row that fails);
**   4. the workload controls (trace.h, lsim_trace_ctl) act in one place,
**      between the order check and the assignment, so every source gets
**      them alike: a record outside the window draws nothing and numbers
**      no alias, and the order check still sees it.
*/
#include "internal.h"
#include "../engine/checked.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct lsim__trace_impl {
  lsim__src *src;
  lsim__assign *as;
  int skip;
  int64_t max_requests;
  int64_t next_id;
  int64_t seen;    /* records past the order check, windowed out included */
  int64_t last_ns; /* the last such record's arrival on the source clock */
  int ended;       /* the window's end was reached */
  int has_ctl;
  lsim_trace_ctl ctl;  /* maps sorted by `from` */
  lsim__names folded;  /* adapter names numbered for the fold */
  lsim_trace_info info;
};

/*
** The importers, in enum lsim_trace_format order (the formats trace.h names
** keep their values; a new importer goes at the end and needs no enum
** value).  Adding a trace format: write its importer table in its own file
** and add one X() line here.
*/
#define LSIM__IMPORTERS(X)                                                    \
  X(csv) X(jsonl) X(azure) X(mooncake) X(burstgpt) X(servegen) X(generator) \
  X(blis)

#define LSIM__DECLARE(n) extern const lsim__importer lsim__importer_##n;
LSIM__IMPORTERS(LSIM__DECLARE)
#undef LSIM__DECLARE
#define LSIM__ENTRY(n) &lsim__importer_##n,
static const lsim__importer *const lsim__importers[] = {
    LSIM__IMPORTERS(LSIM__ENTRY)};
#undef LSIM__ENTRY
#define LSIM__NIMPORTERS                                                      \
  ((int)(sizeof lsim__importers / sizeof lsim__importers[0]))

const lsim__importer *lsim__importer_at(int format) {
  return format >= 0 && format < LSIM__NIMPORTERS ? lsim__importers[format]
                                                  : NULL;
}

int lsim_trace_format_count(void) { return LSIM__NIMPORTERS; }

const char *lsim_trace_format_name(int format) {
  const lsim__importer *im = lsim__importer_at(format);
  return im ? im->name : "unknown";
}

int lsim_trace_format_find(const char *name) {
  for (int i = 0; name && i < LSIM__NIMPORTERS; i++)
    if (lsim__importers[i]->file_based &&
        strcmp(lsim__importers[i]->name, name) == 0)
      return i;
  return -1;
}

const char *const *lsim_trace_format_names(void) {
  static const char *files[LSIM__NIMPORTERS + 1];
  int n = 0;
  for (int i = 0; i < LSIM__NIMPORTERS; i++)
    if (lsim__importers[i]->file_based)
      files[n++] = lsim__importers[i]->name;
  files[n] = NULL;
  return files;
}

size_t lsim_trace_format_join(char *buf, size_t size, const char *sep) {
  const char *const *n = lsim_trace_format_names();
  size_t len = 0;
  if (size)
    buf[0] = '\0';
  for (int i = 0; n[i]; i++) {
    int w = snprintf(buf + (len < size ? len : size),
                     len < size ? size - len : 0, "%s%s", i ? sep : "", n[i]);
    len += w > 0 ? (size_t)w : 0;
  }
  return len;
}

int lsim_trace_format_per_request(int format) {
  const lsim__importer *im = lsim__importer_at(format);
  return im && im->per_request;
}

const char *lsim_trace_format_sample_name(int format) {
  const lsim__importer *im = lsim__importer_at(format);
  return im && im->sample_name ? im->sample_name : "input";
}

int lsim_trace_format_guess(const char *path) {
  struct stat st;
  int dir = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
  size_t n = strlen(path);
  for (int i = 0; dir && i < LSIM__NIMPORTERS; i++)
    if (lsim__importers[i]->guess_dir)
      return i;
  for (int i = 0; i < LSIM__NIMPORTERS; i++) {
    const char *sfx = lsim__importers[i]->guess_suffix;
    size_t k = sfx ? strlen(sfx) : 0;
    if (k && n >= k && strcmp(path + n - k, sfx) == 0)
      return i;
  }
  return 0;
}

/* ---- workload controls --------------------------------------------------- */

/* Distinct adapter names the fold numbers (memory bound of the stage). */
#define LSIM__FOLD_NAMES_MAX (1 << 20)
#define LSIM__E18 1000000000000000000ll

int lsim_trace_ctl_none(const lsim_trace_ctl *c) {
  return !c || (!c->rate_num && !c->rate_den && !c->window_start_ns &&
                !c->window_end_ns && !c->ntenant_map && !c->nadapter_map &&
                !c->adapter_modulo && !c->adapter_offset);
}

static int64_t lsim__gcd(int64_t a, int64_t b) {
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

int lsim_trace_decimal(const char *s, int64_t *num, int64_t *den) {
  const char *p = s, *ip, *fp = NULL;
  size_t ni = 0, nf = 0;
  for (ip = p; *p >= '0' && *p <= '9'; p++)
    ni++;
  if (*p == '.') {
    fp = ++p;
    for (; *p >= '0' && *p <= '9'; p++)
      nf++;
  }
  if (ni + nf == 0)
    return -1;
  long ex = 0;
  if (*p == 'e' || *p == 'E') {
    int neg = 0;
    p++;
    if (*p == '+' || *p == '-')
      neg = *p++ == '-';
    if (!(*p >= '0' && *p <= '9'))
      return -1;
    for (; *p >= '0' && *p <= '9'; p++)
      if ((ex = ex * 10 + (*p - '0')) > 1000)
        return -2;
    if (neg)
      ex = -ex;
  }
  if (*p)
    return -1;
  while (nf > 0 && fp[nf - 1] == '0') /* 1.50 is 3/2, not 150/100 */
    nf--;
  int64_t m = 0;
  for (size_t i = 0; i < ni + nf; i++) {
    int d = (i < ni ? ip[i] : fp[i - ni]) - '0';
    if (m > (LSIM__E18 - d) / 10)
      return -2;
    m = m * 10 + d;
  }
  long scale = ex - (long)nf; /* value = m * 10^scale */
  int64_t d = 1;
  if (m == 0) {
    scale = 0;
  }
  for (; scale > 0; scale--) {
    if (m > LSIM__E18 / 10)
      return -2;
    m *= 10;
  }
  for (; scale < 0; scale++) {
    if (d > LSIM__E18 / 10)
      return -2;
    d *= 10;
  }
  int64_t g = m ? lsim__gcd(m, d) : d;
  *num = m / g;
  *den = d / g;
  return 0;
}

int lsim_trace_seconds_ns(const char *s, int64_t *ns) {
  int64_t n, d;
  int rc = lsim_trace_decimal(s, &n, &d);
  if (rc)
    return rc;
  unsigned __int128 v = (unsigned __int128)n * 1000000000u;
  if (v % (uint64_t)d)
    return -1; /* finer than a nanosecond */
  v /= (uint64_t)d;
  if (v > (unsigned __int128)INT64_MAX)
    return -2;
  *ns = (int64_t)v;
  return 0;
}

static int lsim__entry_cmp(const void *a, const void *b) {
  return strcmp(((const lsim_trace_map_entry *)a)->from,
                ((const lsim_trace_map_entry *)b)->from);
}

/* Check one map and sort it by `from` (lookups are binary searches). */
static lsim_err lsim__map_prepare(lsim_trace_map_entry *e, int n,
                                  const char *what, lsim_errbuf *eb) {
  if (n < 0 || n > LSIM_TRACE_MAX_REMAP)
    return lsim_fail(eb, LSIM_E_USAGE, "%s map: %d entries (at most %d)",
                     what, n, LSIM_TRACE_MAX_REMAP);
  for (int i = 0; i < n; i++) {
    e[i].from[LSIM_TRACE_REMAP_NAME - 1] = '\0';
    e[i].to_name[LSIM_TRACE_REMAP_NAME - 1] = '\0';
    if (!(lsim__all_digits(e[i].from) || lsim__name_ok(e[i].from)) ||
        (e[i].to < 0 && !lsim__name_ok(e[i].to_name)) || e[i].to > INT32_MAX)
      return lsim_fail(eb, LSIM_E_USAGE, "%s map: entry %d is not an index "
                       "or name to an index or name", what, i);
  }
  qsort(e, (size_t)n, sizeof *e, lsim__entry_cmp);
  for (int i = 1; i < n; i++)
    if (strcmp(e[i].from, e[i - 1].from) == 0)
      return lsim_fail(eb, LSIM_E_USAGE, "%s map: '%s' listed twice", what,
                       e[i].from);
  return 0;
}

static const lsim_trace_map_entry *
lsim__map_find(const lsim_trace_map_entry *e, int n, const char *key) {
  lsim_trace_map_entry k;
  size_t len = strlen(key);
  if (!n || len >= sizeof k.from)
    return NULL;
  memcpy(k.from, key, len + 1);
  return bsearch(&k, e, (size_t)n, sizeof *e, lsim__entry_cmp);
}

/* "600", "0.25" or "1e-09": exact seconds of ns, for the description. */
static void lsim__secs(char *out, size_t n, int64_t ns) {
  int64_t s = ns / 1000000000, f = ns % 1000000000;
  if (!f) {
    snprintf(out, n, "%" PRId64, s);
    return;
  }
  char fr[16];
  snprintf(fr, sizeof fr, "%09" PRId64, f);
  for (size_t k = strlen(fr); k > 0 && fr[k - 1] == '0'; k--)
    fr[k - 1] = '\0';
  snprintf(out, n, "%" PRId64 ".%s", s, fr);
}

static lsim_err lsim__ctl_prepare(struct lsim__trace_impl *m,
                                  const lsim_trace_ctl *in, lsim_errbuf *eb) {
  lsim_trace_ctl *c = &m->ctl;
  *c = *in;
  if ((c->rate_num || c->rate_den) && (c->rate_num <= 0 || c->rate_den <= 0))
    return lsim_fail(eb, LSIM_E_USAGE, "rate scale %" PRId64 "/%" PRId64
                     " must be positive", c->rate_num, c->rate_den);
  if (c->window_start_ns < 0 ||
      (c->window_end_ns && c->window_end_ns <= c->window_start_ns))
    return lsim_fail(eb, LSIM_E_USAGE, "window must have 0 <= start < end");
  if (c->adapter_modulo < 0 || c->adapter_offset < 0 ||
      c->adapter_offset > INT32_MAX || c->adapter_modulo > INT32_MAX ||
      (c->nadapter_map && (c->adapter_modulo || c->adapter_offset)))
    return lsim_fail(eb, LSIM_E_USAGE,
                     "adapter remap: a map, or a fold (modulo >= 0, offset "
                     ">= 0), not both");
  lsim_err rc;
  if ((rc = lsim__map_prepare(c->tenant_map, c->ntenant_map, "tenant", eb)) ||
      (rc = lsim__map_prepare(c->adapter_map, c->nadapter_map, "adapter",
                              eb)))
    return rc;
  m->has_ctl = 1;
  /* the controls in words, for trace stats and convert's comment */
  char *w = m->info.workload;
  size_t cap = sizeof m->info.workload, used = 0;
#define LSIM__PUT(...)                                                        \
  do {                                                                        \
    int k_ = snprintf(w + used, cap - used, __VA_ARGS__);                     \
    if (k_ > 0)                                                               \
      used = used + (size_t)k_ < cap ? used + (size_t)k_ : cap - 1;           \
  } while (0)
  if (c->rate_num) {
    if (c->rate_den == 1)
      LSIM__PUT("rate_scale %" PRId64, c->rate_num);
    else
      LSIM__PUT("rate_scale %" PRId64 "/%" PRId64, c->rate_num, c->rate_den);
  }
  if (c->window_start_ns || c->window_end_ns) {
    char a[40], b[40];
    lsim__secs(a, sizeof a, c->window_start_ns);
    lsim__secs(b, sizeof b, c->window_end_ns);
    LSIM__PUT("%swindow [%s s, %s%s)", used ? "; " : "", a,
              c->window_end_ns ? b : "end", c->window_end_ns ? " s" : "");
  }
  if (c->ntenant_map)
    LSIM__PUT("%stenants remapped (%d entries)", used ? "; " : "",
              c->ntenant_map);
  if (c->nadapter_map)
    LSIM__PUT("%sadapters remapped (%d entries)", used ? "; " : "",
              c->nadapter_map);
  if (c->adapter_modulo)
    LSIM__PUT("%sadapters v %% %" PRId64 " + %" PRId64, used ? "; " : "",
              c->adapter_modulo, c->adapter_offset);
  else if (c->adapter_offset)
    LSIM__PUT("%sadapters v + %" PRId64, used ? "; " : "", c->adapter_offset);
#undef LSIM__PUT
  return 0;
}

/* Remap the trace's tenant and adapter values of r.  *fold_name is the
** adapter name to number once the record is accepted (invariant 3). */
static lsim_err lsim__remap(struct lsim__trace_impl *m, lsim__raw *r,
                            const char **fold_name, lsim_errbuf *eb) {
  const lsim_trace_ctl *c = &m->ctl;
  char key[24];
  *fold_name = NULL;
  if (c->ntenant_map && r->has_tenant) {
    const char *k = r->tenant_name;
    if (!k) {
      snprintf(key, sizeof key, "%" PRId64, r->tenant);
      k = key;
    }
    const lsim_trace_map_entry *e = lsim__map_find(c->tenant_map,
                                                   c->ntenant_map, k);
    if (e) {
      r->tenant = e->to >= 0 ? e->to : 0;
      r->tenant_name = e->to >= 0 ? NULL : e->to_name;
    }
  }
  if (!r->has_adapter)
    return 0;
  if (c->nadapter_map) {
    const char *k = r->adapter_name;
    if (!k) {
      snprintf(key, sizeof key, "%" PRId64, r->adapter);
      k = key;
    }
    const lsim_trace_map_entry *e = lsim__map_find(c->adapter_map,
                                                   c->nadapter_map, k);
    if (e) {
      r->adapter = e->to >= 0 ? e->to : 0;
      r->adapter_name = e->to >= 0 ? NULL : e->to_name;
    }
  } else if (c->adapter_modulo || c->adapter_offset) {
    int64_t v = r->adapter;
    if (r->adapter_name) {
      v = lsim__names_find(&m->folded, r->adapter_name);
      if (v < 0) {
        if (m->folded.n >= LSIM__FOLD_NAMES_MAX)
          return lsim__rowerr(eb, LSIM_E_TRACE_RANGE, m->src->path, r->line,
                              "adapter", "more than %d distinct adapter "
                              "names to fold", LSIM__FOLD_NAMES_MAX);
        v = m->folded.n; /* numbered once the record is accepted */
        *fold_name = r->adapter_name;
      }
    }
    if (c->adapter_modulo)
      v %= c->adapter_modulo;
    if (v > INT32_MAX - c->adapter_offset)
      return lsim__rowerr(eb, LSIM_E_TRACE_RANGE, m->src->path, r->line,
                          "adapter", "index %" PRId64 " + offset %" PRId64
                          " is beyond %d", v, c->adapter_offset, INT32_MAX);
    r->adapter = v + c->adapter_offset;
    r->adapter_name = NULL;
  }
  return 0;
}

/* The arrival, deadline and cancel times of an accepted record r on the
** output clock: shifted to the window's start, then rate-scaled. */
static lsim_err lsim__retime(const struct lsim__trace_impl *m,
                             const lsim__raw *r, lsim_trace_rec *rec,
                             lsim_errbuf *eb) {
  const lsim_trace_ctl *c = &m->ctl;
  int64_t t = r->arrival_ns - c->window_start_ns; /* >= 0: inside */
  if (c->rate_num &&
      lsim_muldiv_i64_checked(t, c->rate_den, c->rate_num, &t))
    return lsim__rowerr(eb, LSIM_E_TRACE_RANGE, m->src->path, r->line,
                        r->time_field, "arrival beyond 2^63 ns once scaled "
                        "by rate_scale %" PRId64 "/%" PRId64,
                        c->rate_num, c->rate_den);
  rec->arrival_ns = t;
  rec->deadline_ns = rec->cancel_ns = -1;
  /* a deadline or cancel keeps its distance from its own arrival */
  if ((r->deadline_ns >= 0 &&
       lsim_add_i64_checked(t, r->deadline_ns - r->arrival_ns,
                            &rec->deadline_ns)) ||
      (r->cancel_ns >= 0 &&
       lsim_add_i64_checked(t, r->cancel_ns - r->arrival_ns, &rec->cancel_ns)))
    return lsim__rowerr(eb, LSIM_E_TRACE_RANGE, m->src->path, r->line,
                        r->time_field, "deadline or cancel beyond 2^63 ns");
  return 0;
}

lsim_err lsim__src_open_file(lsim__src **out, int format, const char *path,
                             int block_tokens, const lsim_servegen_spec *sg,
                             uint64_t seed, lsim_errbuf *eb) {
  const lsim__importer *im = lsim__importer_at(format);
  if (!im || !im->file_based)
    return lsim_fail(eb, LSIM_E_USAGE, "unknown trace format %d", format);
  lsim__src_args a = {path, block_tokens, sg, seed, NULL, NULL};
  return im->open(out, &a, eb);
}

lsim_err lsim_trace_open(lsim_trace *t, const lsim_trace_spec *spec,
                         const lsim_trace_ctx *ctx, lsim_errbuf *eb) {
  t->impl = NULL;
  const lsim__importer *im = spec ? lsim__importer_at(spec->format) : NULL;
  if (!spec || !ctx || ctx->ntenants < 0 ||
      ctx->ntenants > LSIM_TRACE_MAX_TENANTS || spec->max_requests < 0 ||
      ((!im || im->file_based) && !spec->path))
    return lsim_fail(eb, LSIM_E_USAGE, "trace specification invalid");
  struct lsim__trace_impl *m = calloc(1, sizeof *m);
  if (!m)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory opening the trace");
  m->skip = spec->skip_bad_rows;
  m->max_requests = spec->max_requests;
  lsim_err rc;
  if (im && !im->file_based) {
    lsim__src_args a = {spec->path, spec->block_tokens, spec->servegen,
                        ctx->seed, spec, ctx};
    rc = im->open(&m->src, &a, eb);
  } else {
    rc = lsim__src_open_file(&m->src, spec->format, spec->path,
                             spec->block_tokens, spec->servegen, ctx->seed, eb);
  }
  if (!rc)
    rc = lsim__assign_new(&m->as, spec->assign, ctx, spec->format, eb);
  if (!rc && !lsim_trace_ctl_none(spec->ctl))
    rc = lsim__ctl_prepare(m, spec->ctl, eb);
  if (rc) {
    if (m->src)
      m->src->ops->close(m->src);
    lsim__assign_release(m->as);
    free(m);
    return rc;
  }
  snprintf(m->info.source, sizeof m->info.source, "%s", m->src->desc);
  snprintf(m->info.assign, sizeof m->info.assign, "%s",
           lsim__assign_desc(m->as));
  t->impl = m;
  return 0;
}

lsim_err lsim_trace_open_csv(lsim_trace *t, const char *path, int ntenants,
                             int nadapters, lsim_errbuf *eb) {
  lsim_trace_spec spec = {0};
  spec.format = LSIM_TRACE_CSV;
  spec.path = path;
  lsim_trace_ctx ctx = {0, ntenants, NULL, NULL, nadapters, 0};
  return lsim_trace_open(t, &spec, &ctx, eb);
}

static int lsim__is_row_code(lsim_err rc) {
  return rc <= LSIM_E_TRACE_PARSE && rc > LSIM_E_TRACE_PARSE - LSIM_TRACE_NCODES;
}

int lsim_trace_next(lsim_trace *t, lsim_trace_rec *rec, lsim_errbuf *eb) {
  struct lsim__trace_impl *m = t->impl;
  if (!m)
    return lsim_fail(eb, LSIM_E_USAGE, "trace is not open");
  for (;;) {
    if (m->ended || (m->max_requests && m->next_id >= m->max_requests))
      return 0;
    lsim__raw r;
    int fatal = 0;
    int got = m->src->ops->next(m->src, &r, eb, &fatal);
    lsim_err rc = 0;
    const char *fold_name = NULL;
    if (got == 0)
      return 0;
    if (got < 0) {
      rc = got;
    } else if (m->seen > 0 ? r.arrival_ns < m->last_ns : r.arrival_ns < 0) {
      rc = lsim__rowerr(eb, LSIM_E_TRACE_ORDER, m->src->path, r.line,
                        r.time_field,
                        "arrival at %lld ns is before the previous record's "
                        "%lld ns",
                        (long long)r.arrival_ns,
                        (long long)(m->seen > 0 ? m->last_ns : 0));
    } else if (m->has_ctl && r.arrival_ns < m->ctl.window_start_ns) {
      m->seen++;
      m->last_ns = r.arrival_ns;
      m->info.before_window++;
      continue;
    } else if (m->has_ctl && m->ctl.window_end_ns &&
               r.arrival_ns >= m->ctl.window_end_ns) {
      m->ended = 1;
      return 0;
    } else {
      memset(rec, 0, sizeof *rec);
      if (!m->has_ctl || !(rc = lsim__remap(m, &r, &fold_name, eb)))
        rc = lsim__assign_do(m->as, &r, m->src->generated, m->src->path, rec,
                             eb);
      if (!rc && m->has_ctl)
        rc = lsim__retime(m, &r, rec, eb);
    }
    if (rc) {
      if (fatal || !m->skip || !lsim__is_row_code(rc))
        return rc;
      if (m->info.skipped == 0 && eb)
        snprintf(m->info.first_skipped, sizeof m->info.first_skipped, "%s",
                 eb->msg);
      m->info.skipped++;
      m->info.skipped_by_code[LSIM_E_TRACE_PARSE - rc]++;
      if (eb) {
        eb->code = 0;
        eb->msg[0] = '\0';
      }
      continue;
    }
    if (fold_name && lsim__names_add(&m->folded, fold_name) < 0)
      return lsim_fail(eb, LSIM_E_NOMEM, "out of memory folding adapters");
    m->seen++;
    rec->id = m->next_id++;
    m->last_ns = r.arrival_ns;
    if (!m->has_ctl) {
      rec->arrival_ns = r.arrival_ns;
      rec->deadline_ns = r.deadline_ns;
      rec->cancel_ns = r.cancel_ns;
    }
    rec->prompt_tokens = (int)r.prompt;
    rec->output_tokens = (int)r.output;
    rec->slo = r.slo;
    rec->nblocks = r.nblocks;
    rec->blocks = r.blocks;
    m->info.records = m->next_id;
    return 1;
  }
}

void lsim_trace_get_info(const lsim_trace *t, lsim_trace_info *out) {
  memset(out, 0, sizeof *out);
  if (!t->impl)
    return;
  *out = t->impl->info;
  out->dropped_failed = t->impl->src->dropped_failed;
}

void lsim_trace_close(lsim_trace *t) {
  struct lsim__trace_impl *m = t->impl;
  if (!m)
    return;
  m->src->ops->close(m->src);
  lsim__assign_release(m->as);
  lsim__names_release(&m->folded);
  free(m);
  t->impl = NULL;
}
