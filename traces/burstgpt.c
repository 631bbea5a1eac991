/*
** burstgpt.c: the BurstGPT traces (CSV).
**
**   Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type
**   5,ChatGPT,472,18,490,Conversation log
**
** (the 8-column release adds "Session ID" and "Elapsed time", which are
** read past).  Timestamp is in seconds, possibly fractional; the trace
** clock starts at the first record.  Model becomes the record's tenant name
** ("ChatGPT", "GPT-4"), Log Type its SLO class ("conversation" or "api").
** Total tokens must equal Request + Response.  A row with 0 response tokens
** is a failed request: it is dropped and counted (lsim_trace_info
** .dropped_failed), not an error.
*/
#include "internal.h"

#include <stdlib.h>
#include <string.h>

enum { LSIM__B_TS = 0, LSIM__B_MODEL, LSIM__B_REQ, LSIM__B_RESP,
       LSIM__B_TOTAL, LSIM__B_LOG, LSIM__B_SESSION, LSIM__B_ELAPSED,
       LSIM__B_N };

static const char *const lsim__bcols[LSIM__B_N] = {
    "Timestamp",    "Model",    "Request tokens", "Response tokens",
    "Total tokens", "Log Type", "Session ID",     "Elapsed time"};

typedef struct lsim__burst {
  lsim__src base;
  lsim__lines L;
  int ncols;
  int col_of[LSIM__B_N]; /* column index of each known column, -1 absent */
  int have_header;
  int have_base;
  int64_t base_ns;
  char model[64];
} lsim__burst;

static lsim_err lsim__bheader(lsim__burst *b, lsim_errbuf *eb) {
  char *f[LSIM__B_N + 1], q[LSIM__SHOW_BUF];
  int nf;
  lsim_err ce = lsim__csv_fields(b->L.buf, f, LSIM__B_N, &nf, b->base.path,
                                 b->L.line, eb);
  if (ce)
    return ce;
  if (nf > LSIM__B_N)
    return lsim__rowerr(eb, LSIM_E_TRACE_PARSE, b->base.path, b->L.line,
                        "header", "more than %d columns", LSIM__B_N);
  for (int c = 0; c < LSIM__B_N; c++)
    b->col_of[c] = -1;
  /* no known column: not a BurstGPT header, and never quoted */
  int known = 0;
  for (int i = 0; i < nf; i++)
    for (int c = 0; c < LSIM__B_N; c++)
      known += strcmp(f[i], lsim__bcols[c]) == 0;
  if (!known)
    return lsim__rowerr(eb, LSIM_E_TRACE_PARSE, b->base.path, b->L.line,
                        "header", "not a BurstGPT header: no known column");
  for (int i = 0; i < nf; i++) {
    int c = 0;
    while (c < LSIM__B_N && strcmp(f[i], lsim__bcols[c]) != 0)
      c++;
    if (c == LSIM__B_N && !lsim__plain_word(f[i]))
      return lsim__rowerr(eb, LSIM_E_TRACE_UNKNOWN, b->base.path, b->L.line,
                          "header", "unknown column %d", i + 1);
    if (c == LSIM__B_N)
      return lsim__rowerr(eb, LSIM_E_TRACE_UNKNOWN, b->base.path, b->L.line,
                          "header", "unknown column '%s'",
                          lsim__show(f[i], q, sizeof q));
    if (b->col_of[c] >= 0)
      return lsim__rowerr(eb, LSIM_E_TRACE_PARSE, b->base.path, b->L.line,
                          "header", "column '%s' given twice", lsim__bcols[c]);
    b->col_of[c] = i;
  }
  for (int c = 0; c < LSIM__B_SESSION; c++)
    if (b->col_of[c] < 0)
      return lsim__rowerr(eb, LSIM_E_TRACE_MISSING, b->base.path, b->L.line,
                          "header", "no '%s' column", lsim__bcols[c]);
  b->ncols = nf;
  b->have_header = 1;
  return 0;
}

static int lsim__burst_next(lsim__src *s, lsim__raw *r, lsim_errbuf *eb,
                            int *fatal) {
  lsim__burst *b = (lsim__burst *)s;
  char *f[LSIM__B_N + 1], q[LSIM__SHOW_BUF];
  for (;;) {
    int rc = lsim__lines_next(&b->L, eb, fatal);
    if (rc <= 0) {
      if (rc == 0 && !b->have_header) {
        *fatal = 1;
        return lsim__rowerr(eb, LSIM_E_TRACE_PARSE, s->path, 1, NULL,
                            "empty file, expected the BurstGPT header");
      }
      return rc;
    }
    if (!b->have_header) {
      lsim_err e = lsim__bheader(b, eb);
      if (e) {
        *fatal = 1;
        return e;
      }
      continue;
    }
    if (b->L.buf[0] == '\0')
      continue;
    *fatal = 0;
    memset(r, 0, sizeof *r);
    r->deadline_ns = r->cancel_ns = -1;
    r->line = b->L.line;
    r->time_field = "Timestamp";
    int nf;
    lsim_err ce = lsim__csv_fields(b->L.buf, f, LSIM__B_N, &nf, s->path,
                                   b->L.line, eb);
    if (ce)
      return ce;
    if (nf != b->ncols)
      return lsim__rowerr(eb, LSIM_E_TRACE_PARSE, s->path, b->L.line, NULL,
                          "expected %d fields as in the header (got %d)",
                          b->ncols, nf);
    const char *ts = f[b->col_of[LSIM__B_TS]];
    const char *model = f[b->col_of[LSIM__B_MODEL]];
    const char *logt = f[b->col_of[LSIM__B_LOG]];
    int64_t ns, req, resp, total;
    if (!*ts)
      return lsim__rowerr(eb, LSIM_E_TRACE_MISSING, s->path, b->L.line,
                          "Timestamp", "value is empty");
    int t = lsim__p_time(ts, 1000000000, &ns);
    if (t)
      return lsim__rowerr(eb, t == -1 ? LSIM_E_TRACE_PARSE : LSIM_E_TRACE_RANGE,
                          s->path, b->L.line, "Timestamp",
                          "expected a non-negative number of seconds (got "
                          "'%s')",
                          lsim__show(ts, q, sizeof q));
    const char *nums[3] = {f[b->col_of[LSIM__B_REQ]], f[b->col_of[LSIM__B_RESP]],
                           f[b->col_of[LSIM__B_TOTAL]]};
    int64_t *dst[3] = {&req, &resp, &total};
    for (int i = 0; i < 3; i++) {
      const char *name = lsim__bcols[LSIM__B_REQ + i];
      if (!*nums[i])
        return lsim__rowerr(eb, LSIM_E_TRACE_MISSING, s->path, b->L.line, name,
                            "value is empty");
      int pr = lsim__p_i64(nums[i], dst[i]);
      if (pr == -1)
        return lsim__rowerr(eb, LSIM_E_TRACE_PARSE, s->path, b->L.line, name,
                            "expected an integer (got '%s')",
                            lsim__show(nums[i], q, sizeof q));
      if (pr == -2 || *dst[i] < 0 || *dst[i] > 2 * (int64_t)LSIM_TRACE_MAX_TOKENS)
        return lsim__rowerr(eb, LSIM_E_TRACE_RANGE, s->path, b->L.line, name,
                            "must be in [0, %d] (got %s)",
                            2 * LSIM_TRACE_MAX_TOKENS,
                            lsim__show(nums[i], q, sizeof q));
    }
    if (total != req + resp)
      return lsim__rowerr(eb, LSIM_E_TRACE_MISMATCH, s->path, b->L.line,
                          "Total tokens",
                          "%lld is not Request + Response tokens = %lld",
                          (long long)total, (long long)(req + resp));
    if (!lsim__name_ok(model))
      return lsim__rowerr(eb, *model ? LSIM_E_TRACE_PARSE : LSIM_E_TRACE_MISSING,
                          s->path, b->L.line, "Model",
                          "expected a model name of 1 to 63 characters of "
                          "[A-Za-z0-9_.:/@+-] (got '%s')",
                          lsim__show(model, q, sizeof q));
    if (strcmp(logt, "Conversation log") == 0)
      r->slo = "conversation";
    else if (strcmp(logt, "API log") == 0)
      r->slo = "api";
    else
      return lsim__rowerr(eb, *logt ? LSIM_E_TRACE_UNKNOWN : LSIM_E_TRACE_MISSING,
                          s->path, b->L.line, "Log Type",
                          "expected 'Conversation log' or 'API log' (got '%s')",
                          lsim__show(logt, q, sizeof q));
    if (resp == 0) {
      s->dropped_failed++; /* a failed request: not served, not an error */
      continue;
    }
    if (req < 1 || req > LSIM_TRACE_MAX_TOKENS || resp > LSIM_TRACE_MAX_TOKENS)
      return lsim__rowerr(eb, LSIM_E_TRACE_RANGE, s->path, b->L.line,
                          req < 1 || req > LSIM_TRACE_MAX_TOKENS
                              ? "Request tokens"
                              : "Response tokens",
                          "must be in [1, %d]", LSIM_TRACE_MAX_TOKENS);
    if (!b->have_base) {
      b->have_base = 1;
      b->base_ns = ns;
    }
    snprintf(b->model, sizeof b->model, "%s", model);
    r->arrival_ns = ns - b->base_ns;
    r->prompt = req;
    r->output = resp;
    r->has_tenant = 1;
    r->tenant_name = b->model;
    return 1;
  }
}

static void lsim__burst_close(lsim__src *s) {
  lsim__burst *b = (lsim__burst *)s;
  lsim__lines_close(&b->L);
  free(b);
}

static const lsim__src_ops lsim__burst_ops = {
    /* .next = */ lsim__burst_next,
    /* .close = */ lsim__burst_close,
};

static lsim_err lsim__burstgpt_open(lsim__src **out, const char *path,
                             lsim_errbuf *eb) {
  lsim__burst *b = calloc(1, sizeof *b);
  if (!b)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  b->base.ops = &lsim__burst_ops;
  snprintf(b->base.path, sizeof b->base.path, "%s", path);
  snprintf(b->base.desc, sizeof b->base.desc, "burstgpt %.140s", path);
  lsim_err rc = lsim__lines_open(&b->L, b->base.path, eb);
  if (rc) {
    free(b);
    return rc;
  }
  *out = &b->base;
  return 0;
}

static lsim_err lsim__burstgpt_import(lsim__src **out, const lsim__src_args *a,
                                      lsim_errbuf *eb) {
  return lsim__burstgpt_open(out, a->path, eb);
}

/* its tenants are the model names */
const lsim__importer lsim__importer_burstgpt = {
    .name = "burstgpt", .open = lsim__burstgpt_import, .file_based = 1,
    .per_request = 1, .tenant_modulo = 1, .sample_name = "input.csv"};
