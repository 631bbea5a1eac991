/*
** native.c: the lorasim trace formats, CSV and JSONL, read and written.
**
** CSV: the first line that is not blank or a '#' comment is the header, a
** list of column names in any order:
**
**   arrival_ns | arrival_us | arrival_ms   exactly one, required
**   prompt_tokens, output_tokens           required
**   tenant, adapter                        optional: an index or a name
**   slo                                    optional: an SLO class name
**   deadline_ns|_us|_ms, cancel_ns|_us|_ms optional: absolute trace time
**   prefix_blocks                          optional: block hashes, blank-
**                                          separated, in prompt order
**
** An empty optional field means "none".  The original five-column format
** (arrival_us,tenant,adapter,prompt_tokens,output_tokens) is one case.
** JSONL: one object per line with the same names as keys; null or an absent
** optional key means "none"; tenant and adapter may be a number or a string.
*/
#include "internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

enum {
  LSIM__C_ARRIVAL = 0,
  LSIM__C_TENANT,
  LSIM__C_ADAPTER,
  LSIM__C_PROMPT,
  LSIM__C_OUTPUT,
  LSIM__C_SLO,
  LSIM__C_DEADLINE,
  LSIM__C_CANCEL,
  LSIM__C_BLOCKS,
  LSIM__C_N
};

static const char *const lsim__col_base[LSIM__C_N] = {
    "arrival", "tenant", "adapter", "prompt_tokens", "output_tokens",
    "slo",     "deadline", "cancel", "prefix_blocks"};

#define LSIM__MAX_COLS 16

typedef struct lsim__native {
  lsim__src base;
  int jsonl;
  lsim__lines L;
  int have_header;
  int ncols;
  int col_of[LSIM__MAX_COLS]; /* CSV column -> LSIM__C_* */
  int64_t unit[LSIM__C_N];    /* ns per unit of the time columns */
  char name[LSIM__C_N][24];   /* the column names as given */
  lsim__jobj J;
  uint64_t *blocks;
  int nblocks, cap_blocks;
} lsim__native;

/* "arrival_us" -> (LSIM__C_ARRIVAL, 1000); -1 unknown. */
static int lsim__col_find(const char *s, int64_t *unit) {
  static const struct {
    const char *suf;
    int64_t ns;
  } units[] = {{"_ns", 1}, {"_us", 1000}, {"_ms", 1000000}};
  *unit = 1;
  for (int c = 0; c < LSIM__C_N; c++) {
    size_t bl = strlen(lsim__col_base[c]);
    if (strncmp(s, lsim__col_base[c], bl) != 0)
      continue;
    int timed = c == LSIM__C_ARRIVAL || c == LSIM__C_DEADLINE ||
                c == LSIM__C_CANCEL;
    if (!timed) {
      if (s[bl] == '\0')
        return c;
      continue;
    }
    for (int u = 0; u < 3; u++)
      if (strcmp(s + bl, units[u].suf) == 0) {
        *unit = units[u].ns;
        return c;
      }
  }
  return -1;
}

static lsim_err lsim__header(lsim__native *n, char *line, lsim_errbuf *eb) {
  char *f[LSIM__MAX_COLS + 1];
  const char *path = n->base.path;
  int64_t ln = n->L.line;
  int nf;
  lsim_err e = lsim__csv_fields(line, f, LSIM__MAX_COLS, &nf, path, ln, eb);
  if (e)
    return e;
  if (nf > LSIM__MAX_COLS)
    return lsim__rowerr(eb, LSIM_E_TRACE_PARSE, path, ln, NULL,
                        "header has more than %d columns", LSIM__MAX_COLS);
  int seen[LSIM__C_N] = {0};
  char q[LSIM__SHOW_BUF];
  /* a first line with no known column at all is not a trace header: it
  ** is never quoted (it may be any file's first line, a secret included) */
  int known = 0;
  for (int i = 0; i < nf; i++) {
    int64_t unit;
    known += lsim__col_find(f[i], &unit) >= 0;
  }
  if (!known)
    return lsim__rowerr(eb, LSIM_E_TRACE_PARSE, path, ln, "header",
                        "not a trace header: no known column (expected "
                        "names such as arrival_us,prompt_tokens,output_tokens)");
  for (int i = 0; i < nf; i++) {
    int64_t unit;
    int c = lsim__col_find(f[i], &unit);
    if (c < 0 && !lsim__plain_word(f[i]))
      return lsim__rowerr(eb, LSIM_E_TRACE_UNKNOWN, path, ln, "header",
                          "unknown column %d (known: arrival_ns|_us|_ms, "
                          "tenant, adapter, prompt_tokens, output_tokens, slo, "
                          "deadline_*, cancel_*, prefix_blocks)", i + 1);
    if (c < 0)
      return lsim__rowerr(eb, LSIM_E_TRACE_UNKNOWN, path, ln, "header",
                          "unknown column '%s' (known: arrival_ns|_us|_ms, "
                          "tenant, adapter, prompt_tokens, output_tokens, slo, "
                          "deadline_*, cancel_*, prefix_blocks)",
                          lsim__show(f[i], q, sizeof q));
    if (seen[c])
      return lsim__rowerr(eb, LSIM_E_TRACE_PARSE, path, ln, "header",
                          "column '%s' given twice",
                          lsim__show(f[i], q, sizeof q));
    seen[c] = 1;
    n->col_of[i] = c;
    n->unit[c] = unit;
    snprintf(n->name[c], sizeof n->name[c], "%s", f[i]);
  }
  static const int req[] = {LSIM__C_ARRIVAL, LSIM__C_PROMPT, LSIM__C_OUTPUT};
  for (int i = 0; i < 3; i++)
    if (!seen[req[i]])
      return lsim__rowerr(eb, LSIM_E_TRACE_MISSING, path, ln, "header",
                          "no %s column%s", lsim__col_base[req[i]],
                          req[i] == LSIM__C_ARRIVAL
                              ? " (arrival_ns, arrival_us or arrival_ms)"
                              : "");
  n->ncols = nf;
  n->have_header = 1;
  return 0;
}

static lsim_err lsim__time(lsim__native *n, const char *s, int c, int64_t *ns,
                           lsim_errbuf *eb) {
  char q[LSIM__SHOW_BUF];
  int rc = lsim__p_time(s, n->unit[c], ns);
  if (rc == -1)
    return lsim__rowerr(eb, LSIM_E_TRACE_PARSE, n->base.path, n->L.line,
                        n->name[c], "expected a non-negative number (got '%s')",
                        lsim__show(s, q, sizeof q));
  if (rc == -2)
    return lsim__rowerr(eb, LSIM_E_TRACE_RANGE, n->base.path, n->L.line,
                        n->name[c], "too large (got '%s')",
                        lsim__show(s, q, sizeof q));
  return 0;
}

/* A tenant or adapter: an index or a name. */
static lsim_err lsim__who(lsim__native *n, const char *s, int c, int *has,
                          int64_t *idx, const char **name, lsim_errbuf *eb) {
  char q[LSIM__SHOW_BUF];
  *has = 0;
  *name = NULL;
  if (!*s)
    return 0;
  *has = 1;
  if (lsim__all_digits(s)) {
    if (lsim__p_i64(s, idx) || *idx > INT32_MAX)
      return lsim__rowerr(eb, LSIM_E_TRACE_RANGE, n->base.path, n->L.line,
                          n->name[c], "index %s is too large",
                          lsim__show(s, q, sizeof q));
    return 0;
  }
  if (s[0] == '-' && lsim__all_digits(s + 1))
    return lsim__rowerr(eb, LSIM_E_TRACE_RANGE, n->base.path, n->L.line,
                        n->name[c], "index %s is negative",
                        lsim__show(s, q, sizeof q));
  if (!lsim__name_ok(s))
    return lsim__rowerr(eb, LSIM_E_TRACE_PARSE, n->base.path, n->L.line,
                        n->name[c],
                        "a name is 1 to 63 characters of [A-Za-z0-9_.:/@+-] "
                        "(got '%s')",
                        lsim__show(s, q, sizeof q));
  *name = s;
  return 0;
}

static int lsim__push_block(lsim__native *n, uint64_t v) {
  if (n->nblocks == n->cap_blocks) {
    int nc = n->cap_blocks ? n->cap_blocks * 2 : 64;
    uint64_t *nb = realloc(n->blocks, (size_t)nc * sizeof *nb);
    if (!nb)
      return -1;
    n->blocks = nb;
    n->cap_blocks = nc;
  }
  n->blocks[n->nblocks++] = v;
  return 0;
}

static lsim_err lsim__blocks_csv(lsim__native *n, char *s, lsim_errbuf *eb,
                                 int *fatal) {
  n->nblocks = 0;
  char *p = s;
  while (*p) {
    while (*p == ' ' || *p == '\t')
      p++;
    if (!*p)
      break;
    char *e = p;
    while (*e >= '0' && *e <= '9')
      e++;
    char save = *e;
    int64_t v;
    *e = '\0';
    int bad = e == p || (save && save != ' ' && save != '\t') ||
              lsim__p_i64(p, &v) != 0;
    *e = save;
    if (bad)
      return lsim__rowerr(eb, LSIM_E_TRACE_PARSE, n->base.path, n->L.line,
                          "prefix_blocks",
                          "expected non-negative integers separated by "
                          "blanks");
    if (n->nblocks == LSIM_TRACE_MAX_BLOCKS)
      return lsim__rowerr(eb, LSIM_E_TRACE_RANGE, n->base.path, n->L.line,
                          "prefix_blocks", "more than %d blocks",
                          LSIM_TRACE_MAX_BLOCKS);
    if (lsim__push_block(n, (uint64_t)v)) {
      *fatal = 1;
      return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
    }
    p = e;
  }
  return 0;
}

static void lsim__raw_init(lsim__raw *r) {
  memset(r, 0, sizeof *r);
  r->deadline_ns = r->cancel_ns = -1;
}

/* Checks shared by both encodings once the fields are read. */
static lsim_err lsim__times_ok(lsim__native *n, lsim__raw *r, lsim_errbuf *eb) {
  if (r->deadline_ns >= 0 && r->deadline_ns < r->arrival_ns)
    return lsim__rowerr(eb, LSIM_E_TRACE_MISMATCH, n->base.path, n->L.line,
                        n->name[LSIM__C_DEADLINE],
                        "deadline is before the arrival");
  if (r->cancel_ns >= 0 && r->cancel_ns < r->arrival_ns)
    return lsim__rowerr(eb, LSIM_E_TRACE_MISMATCH, n->base.path, n->L.line,
                        n->name[LSIM__C_CANCEL], "cancel is before the arrival");
  return 0;
}

static int lsim__csv_row(lsim__native *n, lsim__raw *r, lsim_errbuf *eb,
                         int *fatal) {
  char *f[LSIM__MAX_COLS + 1];
  const char *path = n->base.path;
  int nf;
  lsim_err rc = lsim__csv_fields(n->L.buf, f, LSIM__MAX_COLS, &nf, path,
                                 n->L.line, eb);
  if (rc)
    return rc;
  if (nf != n->ncols)
    return lsim__rowerr(eb, LSIM_E_TRACE_PARSE, path, n->L.line, NULL,
                        "expected %d fields as in the header (got %d)",
                        n->ncols, nf);
  for (int i = 0; i < nf; i++) {
    int c = n->col_of[i];
    const char *s = f[i];
    switch (c) {
    case LSIM__C_ARRIVAL:
      if (!*s)
        return lsim__rowerr(eb, LSIM_E_TRACE_MISSING, path, n->L.line,
                            n->name[c], "value is empty");
      if ((rc = lsim__time(n, s, c, &r->arrival_ns, eb)))
        return rc;
      break;
    case LSIM__C_DEADLINE:
    case LSIM__C_CANCEL:
      if (*s && (rc = lsim__time(n, s, c,
                                 c == LSIM__C_DEADLINE ? &r->deadline_ns
                                                       : &r->cancel_ns,
                                 eb)))
        return rc;
      break;
    case LSIM__C_TENANT:
      if ((rc = lsim__who(n, s, c, &r->has_tenant, &r->tenant,
                          &r->tenant_name, eb)))
        return rc;
      break;
    case LSIM__C_ADAPTER:
      if ((rc = lsim__who(n, s, c, &r->has_adapter, &r->adapter,
                          &r->adapter_name, eb)))
        return rc;
      break;
    case LSIM__C_PROMPT:
    case LSIM__C_OUTPUT:
      if ((rc = lsim__p_tokens(s, path, n->L.line, n->name[c],
                               c == LSIM__C_PROMPT ? &r->prompt : &r->output,
                               eb)))
        return rc;
      break;
    case LSIM__C_SLO:
      if (*s && !lsim__name_ok(s)) {
        char q[LSIM__SHOW_BUF];
        return lsim__rowerr(eb, LSIM_E_TRACE_PARSE, path, n->L.line, "slo",
                            "a name is 1 to 63 characters of "
                            "[A-Za-z0-9_.:/@+-] (got '%s')",
                            lsim__show(s, q, sizeof q));
      }
      r->slo = *s ? s : NULL;
      break;
    case LSIM__C_BLOCKS:
      if ((rc = lsim__blocks_csv(n, f[i], eb, fatal)))
        return rc;
      r->nblocks = n->nblocks;
      r->blocks = n->nblocks ? n->blocks : NULL;
      break;
    }
  }
  return 0;
}

/* A JSON number as an exact time. */
static lsim_err lsim__jtime(lsim__native *n, const lsim__jkv *kv, int c,
                            int64_t *ns, lsim_errbuf *eb) {
  if (kv->type != LSIM__J_NUM)
    return lsim__rowerr(eb, LSIM_E_TRACE_PARSE, n->base.path, n->L.line,
                        kv->key, "must be a number");
  return lsim__time(n, kv->num, c, ns, eb);
}

static lsim_err lsim__jwho(lsim__native *n, const lsim__jkv *kv, int c,
                           int *has, int64_t *idx, const char **name,
                           lsim_errbuf *eb) {
  *has = 0;
  if (kv->type == LSIM__J_NULL)
    return 0;
  if (kv->type == LSIM__J_NUM || kv->type == LSIM__J_STR) {
    if (kv->type == LSIM__J_STR && (lsim__all_digits(kv->str) || !*kv->str))
      return lsim__rowerr(eb, LSIM_E_TRACE_PARSE, n->base.path, n->L.line,
                          kv->key, "a name must not be empty or all digits");
    return lsim__who(n, kv->type == LSIM__J_NUM ? kv->num : kv->str, c, has,
                     idx, name, eb);
  }
  return lsim__rowerr(eb, LSIM_E_TRACE_PARSE, n->base.path, n->L.line, kv->key,
                      "must be an index, a name or null");
}

static int lsim__jsonl_row(lsim__native *n, lsim__raw *r, lsim_errbuf *eb,
                           int *fatal) {
  char why[160];
  const char *path = n->base.path;
  int rc = lsim__json_line(n->L.buf, &n->J, why, sizeof why);
  if (rc == -2) {
    *fatal = 1;
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  }
  if (rc)
    return lsim__rowerr(eb, LSIM_E_TRACE_PARSE, path, n->L.line, NULL,
                        "invalid JSON: %s", why);
  int seen[LSIM__C_N] = {0};
  for (int i = 0; i < n->J.n; i++) {
    const lsim__jkv *kv = &n->J.kv[i];
    int64_t unit;
    int c = lsim__col_find(kv->key, &unit);
    char q[LSIM__SHOW_BUF];
    if (c < 0)
      return lsim__rowerr(eb, LSIM_E_TRACE_UNKNOWN, path, n->L.line, NULL,
                          "unknown key '%s'", lsim__show(kv->key, q, sizeof q));
    if (seen[c])
      return lsim__rowerr(eb, LSIM_E_TRACE_PARSE, path, n->L.line, kv->key,
                          "given twice (in another unit)");
    seen[c] = 1;
    n->unit[c] = unit;
    snprintf(n->name[c], sizeof n->name[c], "%s", kv->key);
    lsim_err e = 0;
    switch (c) {
    case LSIM__C_ARRIVAL:
      e = lsim__jtime(n, kv, c, &r->arrival_ns, eb);
      break;
    case LSIM__C_DEADLINE:
    case LSIM__C_CANCEL:
      if (kv->type != LSIM__J_NULL)
        e = lsim__jtime(n, kv, c,
                        c == LSIM__C_DEADLINE ? &r->deadline_ns : &r->cancel_ns,
                        eb);
      break;
    case LSIM__C_TENANT:
      e = lsim__jwho(n, kv, c, &r->has_tenant, &r->tenant, &r->tenant_name,
                     eb);
      break;
    case LSIM__C_ADAPTER:
      e = lsim__jwho(n, kv, c, &r->has_adapter, &r->adapter, &r->adapter_name,
                     eb);
      break;
    case LSIM__C_PROMPT:
    case LSIM__C_OUTPUT:
      if (kv->type != LSIM__J_NUM)
        e = lsim__rowerr(eb, LSIM_E_TRACE_PARSE, path, n->L.line, kv->key,
                         "must be an integer");
      else
        e = lsim__p_tokens(kv->num, path, n->L.line, kv->key,
                           c == LSIM__C_PROMPT ? &r->prompt : &r->output, eb);
      break;
    case LSIM__C_SLO:
      if (kv->type == LSIM__J_NULL)
        break;
      if (kv->type != LSIM__J_STR || !lsim__name_ok(kv->str))
        e = lsim__rowerr(eb, LSIM_E_TRACE_PARSE, path, n->L.line, "slo",
                         "must be a name of 1 to 63 characters of "
                         "[A-Za-z0-9_.:/@+-] or null");
      else
        r->slo = kv->str;
      break;
    case LSIM__C_BLOCKS:
      if (kv->type == LSIM__J_NULL)
        break;
      if (kv->type != LSIM__J_ARR)
        e = lsim__rowerr(eb, LSIM_E_TRACE_PARSE, path, n->L.line, kv->key,
                         "must be an array of block hashes");
      else if (kv->arr_n > LSIM_TRACE_MAX_BLOCKS)
        e = lsim__rowerr(eb, LSIM_E_TRACE_RANGE, path, n->L.line, kv->key,
                         "more than %d blocks", LSIM_TRACE_MAX_BLOCKS);
      r->nblocks = kv->arr_n;
      r->blocks = kv->arr_n ? n->J.arr + kv->arr_off : NULL;
      break;
    }
    if (e)
      return e;
  }
  static const int req[] = {LSIM__C_ARRIVAL, LSIM__C_PROMPT, LSIM__C_OUTPUT};
  for (int i = 0; i < 3; i++)
    if (!seen[req[i]])
      return lsim__rowerr(eb, LSIM_E_TRACE_MISSING, path, n->L.line,
                          req[i] == LSIM__C_ARRIVAL ? "arrival_ns"
                                                    : lsim__col_base[req[i]],
                          "required key is missing%s",
                          req[i] == LSIM__C_ARRIVAL
                              ? " (arrival_ns, arrival_us or arrival_ms)"
                              : "");
  return 0;
}

static int lsim__native_next(lsim__src *s, lsim__raw *r, lsim_errbuf *eb,
                             int *fatal) {
  lsim__native *n = (lsim__native *)s;
  for (;;) {
    int rc = lsim__lines_next(&n->L, eb, fatal);
    if (rc <= 0) {
      if (rc == 0 && !n->jsonl && !n->have_header) {
        *fatal = 1;
        return lsim__rowerr(eb, LSIM_E_TRACE_PARSE, s->path,
                            n->L.line ? n->L.line : 1, NULL,
                            "no header line (expected column names such as "
                            "arrival_us,tenant,adapter,prompt_tokens,"
                            "output_tokens)");
      }
      return rc;
    }
    if (lsim__skippable(n->L.buf))
      continue;
    if (!n->jsonl && !n->have_header) {
      lsim_err e = lsim__header(n, n->L.buf, eb);
      if (e) {
        *fatal = 1;
        return e;
      }
      continue;
    }
    lsim__raw_init(r);
    *fatal = 0;
    lsim_err e = n->jsonl ? lsim__jsonl_row(n, r, eb, fatal)
                          : lsim__csv_row(n, r, eb, fatal);
    if (!e)
      e = lsim__times_ok(n, r, eb);
    if (e)
      return e;
    r->time_field = n->name[LSIM__C_ARRIVAL];
    r->line = n->L.line;
    return 1;
  }
}

static void lsim__native_close(lsim__src *s) {
  lsim__native *n = (lsim__native *)s;
  lsim__lines_close(&n->L);
  lsim__json_release(&n->J);
  free(n->blocks);
  free(n);
}

static const lsim__src_ops lsim__native_ops = {
    /* .next = */ lsim__native_next,
    /* .close = */ lsim__native_close,
};

static lsim_err lsim__native_open(lsim__src **out, const char *path, int jsonl,
                           lsim_errbuf *eb) {
  lsim__native *n = calloc(1, sizeof *n);
  if (!n)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  n->base.ops = &lsim__native_ops;
  n->jsonl = jsonl;
  snprintf(n->base.path, sizeof n->base.path, "%s", path);
  snprintf(n->base.desc, sizeof n->base.desc, "%s %.140s",
           jsonl ? "jsonl" : "csv", path);
  for (int c = 0; c < LSIM__C_N; c++)
    snprintf(n->name[c], sizeof n->name[c], "%s", lsim__col_base[c]);
  lsim_err rc = lsim__lines_open(&n->L, n->base.path, eb);
  if (rc) {
    free(n);
    return rc;
  }
  *out = &n->base;
  return 0;
}

/* ---- writer ------------------------------------------------------------------ */

static const char lsim__out_header[] =
    "arrival_ns,tenant,adapter,prompt_tokens,output_tokens,slo,deadline_ns,"
    "cancel_ns,prefix_blocks";

lsim_err lsim_trace_writer_open(lsim_trace_writer *w, const char *path,
                                int jsonl, const char *comment,
                                lsim_errbuf *eb) {
  memset(w, 0, sizeof *w);
  w->jsonl = jsonl;
  snprintf(w->path, sizeof w->path, "%s", path);
  if (strcmp(path, "-") == 0) {
    w->fp = stdout;
  } else {
    w->fp = fopen(path, "w");
    if (!w->fp) {
      int e = errno;
      return lsim_fail(eb, LSIM_E_IO, "%s: cannot create: %s", path,
                       strerror(e));
    }
  }
  if (!jsonl) {
    fprintf(w->fp, "%s\n", lsim__out_header);
    for (const char *p = comment; p && *p;) {
      const char *nl = strchr(p, '\n');
      size_t len = nl ? (size_t)(nl - p) : strlen(p);
      fprintf(w->fp, "# %.*s\n", (int)len, p);
      p += len + (nl ? 1 : 0);
    }
  }
  return 0;
}

static void lsim__put_who(FILE *fp, int idx, const char *name, int json) {
  if (name)
    fprintf(fp, json ? "\"%s\"" : "%s", name); /* names never need escaping */
  else if (idx >= 0)
    fprintf(fp, "%d", idx);
  else if (json)
    fputs("null", fp);
}

lsim_err lsim_trace_writer_put(lsim_trace_writer *w, const lsim_trace_rec *r,
                               lsim_errbuf *eb) {
  FILE *fp = w->fp;
  if (w->jsonl) {
    fprintf(fp, "{\"arrival_ns\": %" PRId64 ", \"tenant\": ", r->arrival_ns);
    lsim__put_who(fp, r->tenant, r->tenant_name, 1);
    fputs(", \"adapter\": ", fp);
    lsim__put_who(fp, r->adapter, r->adapter_name, 1);
    fprintf(fp, ", \"prompt_tokens\": %d, \"output_tokens\": %d",
            r->prompt_tokens, r->output_tokens);
    if (r->slo)
      fprintf(fp, ", \"slo\": \"%s\"", r->slo);
    if (r->deadline_ns >= 0)
      fprintf(fp, ", \"deadline_ns\": %" PRId64, r->deadline_ns);
    if (r->cancel_ns >= 0)
      fprintf(fp, ", \"cancel_ns\": %" PRId64, r->cancel_ns);
    if (r->nblocks) {
      fputs(", \"prefix_blocks\": [", fp);
      for (int i = 0; i < r->nblocks; i++)
        fprintf(fp, i ? ", %" PRIu64 : "%" PRIu64, r->blocks[i]);
      fputc(']', fp);
    }
    fputs("}\n", fp);
  } else {
    fprintf(fp, "%" PRId64 ",", r->arrival_ns);
    lsim__put_who(fp, r->tenant, r->tenant_name, 0);
    fputc(',', fp);
    lsim__put_who(fp, r->adapter, r->adapter_name, 0);
    fprintf(fp, ",%d,%d,%s,", r->prompt_tokens, r->output_tokens,
            r->slo ? r->slo : "");
    if (r->deadline_ns >= 0)
      fprintf(fp, "%" PRId64, r->deadline_ns);
    fputc(',', fp);
    if (r->cancel_ns >= 0)
      fprintf(fp, "%" PRId64, r->cancel_ns);
    fputc(',', fp);
    for (int i = 0; i < r->nblocks; i++)
      fprintf(fp, i ? " %" PRIu64 : "%" PRIu64, r->blocks[i]);
    fputc('\n', fp);
  }
  if (ferror(fp))
    return lsim_fail(eb, LSIM_E_IO, "%s: write error", w->path);
  w->n++;
  return 0;
}

lsim_err lsim_trace_writer_close(lsim_trace_writer *w, lsim_errbuf *eb) {
  if (!w->fp)
    return 0;
  int bad = fflush(w->fp) != 0 || ferror(w->fp);
  if (w->fp != stdout && fclose(w->fp) != 0)
    bad = 1;
  w->fp = NULL;
  return bad ? lsim_fail(eb, LSIM_E_IO, "%s: write error", w->path) : 0;
}

/* ---- importers (trace.c lists them) ------------------------------------------ */

static lsim_err lsim__csv_import(lsim__src **out, const lsim__src_args *a,
                                 lsim_errbuf *eb) {
  return lsim__native_open(out, a->path, 0, eb);
}
static lsim_err lsim__jsonl_import(lsim__src **out, const lsim__src_args *a,
                                   lsim_errbuf *eb) {
  return lsim__native_open(out, a->path, 1, eb);
}

const lsim__importer lsim__importer_csv = {
    .name = "csv", .open = lsim__csv_import, .file_based = 1,
    .per_request = 1, .sample_name = "input.csv"};
const lsim__importer lsim__importer_jsonl = {
    .name = "jsonl", .open = lsim__jsonl_import, .file_based = 1,
    .per_request = 1, .guess_suffix = ".jsonl", .sample_name = "input.jsonl"};
