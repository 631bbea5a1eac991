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

static const char *const lsim__fmt_names[LSIM_TRACE_NFORMATS + 1] = {
    "csv", "jsonl", "azure", "mooncake", "burstgpt", "servegen", "generator",
    NULL};

const char *lsim_trace_format_name(int format) {
  return format >= 0 && format < LSIM_TRACE_NFORMATS ? lsim__fmt_names[format]
                                                     : "unknown";
}

int lsim_trace_format_find(const char *name) {
  for (int i = 0; i < LSIM_TRACE_GEN; i++)
    if (strcmp(lsim__fmt_names[i], name) == 0)
      return i;
  return -1;
}

const char *const *lsim_trace_format_names(void) {
  static const char *const files[] = {"csv",      "jsonl",    "azure",
                                      "mooncake", "burstgpt", "servegen",
                                      NULL};
  return files;
}

int lsim_trace_format_guess(const char *path) {
  struct stat st;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
    return LSIM_TRACE_SERVEGEN;
  size_t n = strlen(path);
  if (n >= 6 && strcmp(path + n - 6, ".jsonl") == 0)
    return LSIM_TRACE_JSONL;
  return LSIM_TRACE_CSV;
}

lsim_err lsim__src_open_file(lsim__src **out, int format, const char *path,
                             int block_tokens, const lsim_servegen_spec *sg,
                             uint64_t seed, lsim_errbuf *eb) {
  switch (format) {
  case LSIM_TRACE_CSV:
  case LSIM_TRACE_JSONL:
    return lsim__native_open(out, path, format == LSIM_TRACE_JSONL, eb);
  case LSIM_TRACE_AZURE:
    return lsim__azure_open(out, path, eb);
  case LSIM_TRACE_MOONCAKE:
    return lsim__mooncake_open(out, path, block_tokens, eb);
  case LSIM_TRACE_BURSTGPT:
    return lsim__burstgpt_open(out, path, eb);
  case LSIM_TRACE_SERVEGEN:
    return lsim__servegen_open(out, path, sg, seed, eb);
  default:
    return lsim_fail(eb, LSIM_E_USAGE, "unknown trace format %d", format);
  }
}

lsim_err lsim_trace_open(lsim_trace *t, const lsim_trace_spec *spec,
                         const lsim_trace_ctx *ctx, lsim_errbuf *eb) {
  t->impl = NULL;
  if (!spec || !ctx || ctx->ntenants < 0 ||
      ctx->ntenants > LSIM_TRACE_MAX_TENANTS || spec->max_requests < 0 ||
      (spec->format != LSIM_TRACE_GEN && !spec->path))
    return lsim_fail(eb, LSIM_E_USAGE, "trace specification invalid");
  struct lsim__trace_impl *m = calloc(1, sizeof *m);
  if (!m)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory opening the trace");
  m->skip = spec->skip_bad_rows;
  m->max_requests = spec->max_requests;
  lsim_err rc;
  if (spec->format == LSIM_TRACE_GEN)
    rc = lsim__gen_open(&m->src, spec, ctx, eb);
  else
    rc = lsim__src_open_file(&m->src, spec->format, spec->path,
                             spec->block_tokens, spec->servegen, ctx->seed, eb);
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
