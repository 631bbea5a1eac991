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
**      on a row that fails).
*/
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct lsim__trace_impl {
  lsim__src *src;
  lsim__assign *as;
  int skip;
  int64_t max_requests;
  int64_t next_id;
  int64_t last_ns;
  lsim_trace_info info;
};

/*
** The importers, in enum lsim_trace_format order (the formats trace.h names
** keep their values; a new importer goes at the end and needs no enum
** value).  Adding a trace format: write its importer table in its own file
** and add one X() line here.
*/
#define LSIM__IMPORTERS(X)                                                    \
  X(csv) X(jsonl) X(azure) X(mooncake) X(burstgpt) X(servegen) X(generator)

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
    if (m->max_requests && m->next_id >= m->max_requests)
      return 0;
    lsim__raw r;
    int fatal = 0;
    int got = m->src->ops->next(m->src, &r, eb, &fatal);
    lsim_err rc = 0;
    if (got == 0)
      return 0;
    if (got < 0) {
      rc = got;
    } else if (m->next_id > 0 ? r.arrival_ns < m->last_ns : r.arrival_ns < 0) {
      rc = lsim__rowerr(eb, LSIM_E_TRACE_ORDER, m->src->path, r.line,
                        r.time_field,
                        "arrival at %lld ns is before the previous record's "
                        "%lld ns",
                        (long long)r.arrival_ns,
                        (long long)(m->next_id > 0 ? m->last_ns : 0));
    } else {
      memset(rec, 0, sizeof *rec);
      rc = lsim__assign_do(m->as, &r, m->src->generated, m->src->path, rec, eb);
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
    rec->id = m->next_id++;
    rec->arrival_ns = m->last_ns = r.arrival_ns;
    rec->prompt_tokens = (int)r.prompt;
    rec->output_tokens = (int)r.output;
    rec->deadline_ns = r.deadline_ns;
    rec->cancel_ns = r.cancel_ns;
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
  free(m);
  t->impl = NULL;
}
