/*
** mooncake.c: the Mooncake FAST'25 traces (JSONL).
**
**   {"timestamp": 0, "input_length": 6758, "output_length": 500,
**    "hash_ids": [0, 1, 2, ...]}
**
** timestamp is the arrival in ms from the trace start; input_length and
** output_length are token counts; hash_ids are the prefix blocks of the
** prompt, block_tokens (512) tokens each, so there must be exactly
** ceil(input_length / block_tokens) of them.  Equal ids are reusable KV
** blocks.  Every key is required and no other key is allowed.
*/
#include "internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct lsim__mooncake {
  lsim__src base;
  lsim__lines L;
  lsim__jobj J;
  int block_tokens;
} lsim__mooncake;

static int lsim__mooncake_next(lsim__src *s, lsim__raw *r, lsim_errbuf *eb,
                               int *fatal) {
  lsim__mooncake *m = (lsim__mooncake *)s;
  char why[160], q[LSIM__SHOW_BUF];
  static const char *const keys[] = {"timestamp", "input_length",
                                     "output_length", "hash_ids"};
  for (;;) {
    int rc = lsim__lines_next(&m->L, eb, fatal);
    if (rc <= 0)
      return rc;
    if (lsim__skippable(m->L.buf))
      continue;
    *fatal = 0;
    memset(r, 0, sizeof *r);
    r->deadline_ns = r->cancel_ns = -1;
    r->line = m->L.line;
    r->time_field = "timestamp";
    int jr = lsim__json_line(m->L.buf, &m->J, why, sizeof why);
    if (jr == -2) {
      *fatal = 1;
      return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
    }
    if (jr)
      return lsim__rowerr(eb, LSIM_E_TRACE_PARSE, s->path, m->L.line, NULL,
                          "invalid JSON: %s", why);
    for (int i = 0; i < m->J.n; i++) {
      const char *k = m->J.kv[i].key;
      int known = 0;
      for (int j = 0; j < 4; j++)
        known |= strcmp(k, keys[j]) == 0;
      if (!known)
        return lsim__rowerr(eb, LSIM_E_TRACE_UNKNOWN, s->path, m->L.line,
                            NULL, "unknown key '%s'",
                            lsim__show(k, q, sizeof q));
    }
    const lsim__jkv *kv[4];
    for (int j = 0; j < 4; j++) {
      kv[j] = lsim__json_get(&m->J, keys[j]);
      if (!kv[j])
        return lsim__rowerr(eb, LSIM_E_TRACE_MISSING, s->path, m->L.line,
                            keys[j], "required key is missing");
      int want = j == 3 ? LSIM__J_ARR : LSIM__J_NUM;
      if (kv[j]->type != want)
        return lsim__rowerr(eb, LSIM_E_TRACE_PARSE, s->path, m->L.line,
                            keys[j], "must be %s",
                            j == 3 ? "an array of block ids" : "a number");
    }
    int t = lsim__p_time(kv[0]->num, 1000000, &r->arrival_ns);
    if (t)
      return lsim__rowerr(eb, t == -1 ? LSIM_E_TRACE_PARSE : LSIM_E_TRACE_RANGE,
                          s->path, m->L.line, "timestamp",
                          "expected a non-negative number of ms (got %s)",
                          lsim__show(kv[0]->num, q, sizeof q));
    lsim_err e;
    if ((e = lsim__p_tokens(kv[1]->num, s->path, m->L.line, "input_length",
                            &r->prompt, eb)) ||
        (e = lsim__p_tokens(kv[2]->num, s->path, m->L.line, "output_length",
                            &r->output, eb)))
      return e;
    if (kv[3]->arr_n > LSIM_TRACE_MAX_BLOCKS)
      return lsim__rowerr(eb, LSIM_E_TRACE_RANGE, s->path, m->L.line,
                          "hash_ids", "more than %d block ids (got %d)",
                          LSIM_TRACE_MAX_BLOCKS, kv[3]->arr_n);
    int64_t want = (r->prompt + m->block_tokens - 1) / m->block_tokens;
    if (kv[3]->arr_n != want)
      return lsim__rowerr(eb, LSIM_E_TRACE_MISMATCH, s->path, m->L.line,
                          "hash_ids",
                          "expected ceil(input_length / %d) = %lld block ids "
                          "(got %d)",
                          m->block_tokens, (long long)want, kv[3]->arr_n);
    r->nblocks = kv[3]->arr_n;
    r->blocks = r->nblocks ? m->J.arr + kv[3]->arr_off : NULL;
    return 1;
  }
}

static void lsim__mooncake_close(lsim__src *s) {
  lsim__mooncake *m = (lsim__mooncake *)s;
  lsim__lines_close(&m->L);
  lsim__json_release(&m->J);
  free(m);
}

static const lsim__src_ops lsim__mooncake_ops = {
    /* .next = */ lsim__mooncake_next,
    /* .close = */ lsim__mooncake_close,
};

static lsim_err lsim__mooncake_open(lsim__src **out, const char *path,
                             int block_tokens, lsim_errbuf *eb) {
  lsim__mooncake *m = calloc(1, sizeof *m);
  if (!m)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  m->base.ops = &lsim__mooncake_ops;
  m->block_tokens = block_tokens > 0 ? block_tokens : 512;
  snprintf(m->base.path, sizeof m->base.path, "%s", path);
  snprintf(m->base.desc, sizeof m->base.desc, "mooncake %.120s (blocks of %d)",
           path, m->block_tokens);
  lsim_err rc = lsim__lines_open(&m->L, m->base.path, eb);
  if (rc) {
    free(m);
    return rc;
  }
  *out = &m->base;
  return 0;
}

static lsim_err lsim__mooncake_import(lsim__src **out, const lsim__src_args *a,
                                      lsim_errbuf *eb) {
  return lsim__mooncake_open(out, a->path, a->block_tokens, eb);
}

const lsim__importer lsim__importer_mooncake = {
    .name = "mooncake", .open = lsim__mooncake_import, .file_based = 1,
    .per_request = 1, .sample_name = "input.jsonl"};
