/*
** blis.c: the trace CSV of BLIS (inference-sim) trace replay.
**
**   arrival_time,request_id,model,prefill_tokens,decode_tokens
**   0.0,req_0,llama,"[1,2,3,4,5]","[101,102,103]"
**
** arrival_time is in seconds from the trace start (a decimal of at most 9
** fraction digits); request_id is read past; model, when not empty, becomes
** the record's tenant name (a label, taken modulo the tenants like
** BurstGPT's models); prefill_tokens and decode_tokens are JSON arrays of
** token ids in quoted CSV fields (RFC 4180, traces/util.c), whose lengths
** are the prompt and output lengths.  The five columns come in this order
** (BLIS reads them by position).
*/
#include "internal.h"

#include <stdlib.h>
#include <string.h>

enum { LSIM__L_TIME = 0, LSIM__L_ID, LSIM__L_MODEL, LSIM__L_PREFILL,
       LSIM__L_DECODE, LSIM__L_N };

static const char *const lsim__lcols[LSIM__L_N] = {
    "arrival_time", "request_id", "model", "prefill_tokens", "decode_tokens"};

typedef struct lsim__blis {
  lsim__src base;
  lsim__lines L;
  int have_header;
  char model[64];
} lsim__blis;

static lsim_err lsim__lheader(lsim__blis *b, lsim_errbuf *eb) {
  char *f[LSIM__L_N + 1];
  int nf;
  lsim_err e = lsim__csv_fields(b->L.buf, f, LSIM__L_N, &nf, b->base.path,
                                b->L.line, eb);
  if (e)
    return e;
  int known = 0;
  for (int i = 0; i < nf && i < LSIM__L_N; i++)
    for (int c = 0; c < LSIM__L_N; c++)
      known += strcmp(f[i], lsim__lcols[c]) == 0;
  /* no known column: not a BLIS header, and never quoted */
  if (!known)
    return lsim__rowerr(eb, LSIM_E_TRACE_PARSE, b->base.path, b->L.line,
                        "header", "not a BLIS trace header: expected "
                        "arrival_time,request_id,model,prefill_tokens,"
                        "decode_tokens");
  if (nf != LSIM__L_N)
    return lsim__rowerr(eb, LSIM_E_TRACE_PARSE, b->base.path, b->L.line,
                        "header", "expected the %d columns "
                        "arrival_time,request_id,model,prefill_tokens,"
                        "decode_tokens (got %d)", LSIM__L_N, nf);
  for (int c = 0; c < LSIM__L_N; c++)
    if (strcmp(f[c], lsim__lcols[c]) != 0)
      return lsim__rowerr(eb, LSIM_E_TRACE_UNKNOWN, b->base.path, b->L.line,
                          "header", "column %d must be '%s'", c + 1,
                          lsim__lcols[c]);
  b->have_header = 1;
  return 0;
}

/* The length of a token-id array field as a token count. */
static lsim_err lsim__ltokens(lsim__blis *b, const char *s, int c,
                              int64_t *out, lsim_errbuf *eb, int *fatal) {
  int64_t n;
  int rc = lsim__json_int_array_len(s, &n);
  if (rc == -2) {
    *fatal = 1;
    return lsim_fail(eb, LSIM_E_NOMEM, "%s: out of memory", b->base.path);
  }
  if (rc)
    return lsim__rowerr(eb, *s ? LSIM_E_TRACE_PARSE : LSIM_E_TRACE_MISSING,
                        b->base.path, b->L.line, lsim__lcols[c],
                        "expected a JSON array of token ids such as "
                        "\"[1,2,3]\"");
  if (n < 1 || n > LSIM_TRACE_MAX_TOKENS)
    return lsim__rowerr(eb, LSIM_E_TRACE_RANGE, b->base.path, b->L.line,
                        lsim__lcols[c], "%lld tokens: must be in [1, %d]",
                        (long long)n, LSIM_TRACE_MAX_TOKENS);
  *out = n;
  return 0;
}

static int lsim__blis_next(lsim__src *s, lsim__raw *r, lsim_errbuf *eb,
                           int *fatal) {
  lsim__blis *b = (lsim__blis *)s;
  char *f[LSIM__L_N + 1], q[LSIM__SHOW_BUF];
  for (;;) {
    int rc = lsim__lines_next(&b->L, eb, fatal);
    if (rc <= 0) {
      if (rc == 0 && !b->have_header) {
        *fatal = 1;
        return lsim__rowerr(eb, LSIM_E_TRACE_PARSE, s->path, 1, NULL,
                            "empty file, expected the BLIS trace header");
      }
      return rc;
    }
    if (lsim__skippable(b->L.buf))
      continue;
    if (!b->have_header) {
      lsim_err e = lsim__lheader(b, eb);
      if (e) {
        *fatal = 1;
        return e;
      }
      continue;
    }
    *fatal = 0;
    memset(r, 0, sizeof *r);
    r->deadline_ns = r->cancel_ns = -1;
    r->line = b->L.line;
    r->time_field = "arrival_time";
    int nf;
    lsim_err e = lsim__csv_fields(b->L.buf, f, LSIM__L_N, &nf, s->path,
                                  b->L.line, eb);
    if (e)
      return e;
    if (nf != LSIM__L_N)
      return lsim__rowerr(eb, LSIM_E_TRACE_PARSE, s->path, b->L.line, NULL,
                          "expected %d fields (got %d)", LSIM__L_N, nf);
    const char *ts = f[LSIM__L_TIME], *model = f[LSIM__L_MODEL];
    if (!*ts)
      return lsim__rowerr(eb, LSIM_E_TRACE_MISSING, s->path, b->L.line,
                          "arrival_time", "value is empty");
    int t = lsim__p_time(ts, 1000000000, &r->arrival_ns);
    if (t)
      return lsim__rowerr(eb, t == -1 ? LSIM_E_TRACE_PARSE : LSIM_E_TRACE_RANGE,
                          s->path, b->L.line, "arrival_time",
                          "expected a non-negative number of seconds (got "
                          "'%s')",
                          lsim__show(ts, q, sizeof q));
    if (*model && !lsim__name_ok(model))
      return lsim__rowerr(eb, LSIM_E_TRACE_PARSE, s->path, b->L.line, "model",
                          "expected a model name of 1 to 63 characters of "
                          "[A-Za-z0-9_.:/@+-] (got '%s')",
                          lsim__show(model, q, sizeof q));
    if ((e = lsim__ltokens(b, f[LSIM__L_PREFILL], LSIM__L_PREFILL, &r->prompt,
                           eb, fatal)) ||
        (e = lsim__ltokens(b, f[LSIM__L_DECODE], LSIM__L_DECODE, &r->output,
                           eb, fatal)))
      return e;
    if (*model) {
      snprintf(b->model, sizeof b->model, "%s", model);
      r->has_tenant = 1;
      r->tenant_name = b->model;
    }
    return 1;
  }
}

static void lsim__blis_close(lsim__src *s) {
  lsim__blis *b = (lsim__blis *)s;
  lsim__lines_close(&b->L);
  free(b);
}

static const lsim__src_ops lsim__blis_ops = {
    /* .next = */ lsim__blis_next,
    /* .close = */ lsim__blis_close,
};

static lsim_err lsim__blis_import(lsim__src **out, const lsim__src_args *a,
                                  lsim_errbuf *eb) {
  lsim__blis *b = calloc(1, sizeof *b);
  if (!b)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  b->base.ops = &lsim__blis_ops;
  snprintf(b->base.path, sizeof b->base.path, "%s", a->path);
  snprintf(b->base.desc, sizeof b->base.desc, "blis %.140s", a->path);
  lsim_err rc = lsim__lines_open(&b->L, b->base.path, eb);
  if (rc) {
    free(b);
    return rc;
  }
  *out = &b->base;
  return 0;
}

const lsim__importer lsim__importer_blis = {
    .name = "blis", .open = lsim__blis_import, .file_based = 1,
    .per_request = 1, .tenant_modulo = 1, .sample_name = "input.csv"};
