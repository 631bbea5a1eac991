/*
** azure.c: the Azure LLM inference traces (2023 code/conv, 2024 week-long).
**
**   TIMESTAMP,ContextTokens,GeneratedTokens
**   2023-11-16 18:15:46.6805900,374,44
**
** TIMESTAMP is a wall-clock time "YYYY-MM-DD HH:MM:SS[.fraction]" with an
** optional zone suffix ("Z" or "+HH:MM"/"-HH:MM", as the 2024 files may
** carry); it is converted to ns since 1970 (UTC) and the trace clock starts
** at the first record.  ContextTokens is the prompt, GeneratedTokens the
** output.  The traces carry no tenant, adapter or prefix information.
*/
#include "internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct lsim__azure {
  lsim__src base;
  lsim__lines L;
  int have_header;
  int have_base;
  int64_t base_ns;
} lsim__azure;

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian). */
static int64_t lsim__days(int64_t y, int m, int d) {
  y -= m <= 2;
  int64_t era = (y >= 0 ? y : y - 399) / 400;
  int64_t yoe = y - era * 400;
  int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

static int lsim__ndig(const char **p, int n, int *out) {
  int v = 0;
  for (int i = 0; i < n; i++) {
    char c = (*p)[i];
    if (c < '0' || c > '9')
      return -1;
    v = v * 10 + (c - '0');
  }
  *p += n;
  *out = v;
  return 0;
}

/* "2023-11-16 18:15:46.6805900[Z|+hh:mm]" -> ns since the epoch, UTC.
** Returns -1 on a malformed stamp and -2 on a year outside
** [LSIM__YEAR_MIN, LSIM__YEAR_MAX]: ns since 1970 fits an int64 only
** until 2262, and any two stamps of that range subtract without overflow
** (the trace clock is a difference from the first record). */
#define LSIM__YEAR_MIN 1970
#define LSIM__YEAR_MAX 2261
static int lsim__stamp(const char *s, int64_t *ns) {
  static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  int y, mo, d, h, mi, se;
  const char *p = s;
  if (lsim__ndig(&p, 4, &y) || *p++ != '-' || lsim__ndig(&p, 2, &mo) ||
      *p++ != '-' || lsim__ndig(&p, 2, &d) || (*p != ' ' && *p != 'T'))
    return -1;
  p++;
  if (lsim__ndig(&p, 2, &h) || *p++ != ':' || lsim__ndig(&p, 2, &mi) ||
      *p++ != ':' || lsim__ndig(&p, 2, &se))
    return -1;
  if (mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] || h > 23 || mi > 59 ||
      se > 60)
    return -1;
  int64_t frac = 0, nd = 0;
  if (*p == '.') {
    p++;
    while (*p >= '0' && *p <= '9') {
      if (nd < 9) {
        frac = frac * 10 + (*p - '0');
        nd++;
      } else if (nd >= 9) {
        return -1; /* finer than a nanosecond */
      }
      p++;
    }
    if (nd == 0)
      return -1;
    for (int64_t i = nd; i < 9; i++)
      frac *= 10;
  }
  int64_t off = 0;
  if (*p == 'Z') {
    p++;
  } else if (*p == '+' || *p == '-') {
    int sign = *p == '-' ? -1 : 1, oh, om;
    p++;
    if (lsim__ndig(&p, 2, &oh) || *p++ != ':' || lsim__ndig(&p, 2, &om) ||
        oh > 23 || om > 59)
      return -1;
    off = sign * (oh * 3600 + om * 60);
  }
  if (*p)
    return -1;
  if (y < LSIM__YEAR_MIN || y > LSIM__YEAR_MAX)
    return -2;
  int64_t secs = lsim__days(y, mo, d) * 86400 + h * 3600 + mi * 60 + se - off;
  *ns = secs * 1000000000 + frac;
  return 0;
}

static int lsim__azure_next(lsim__src *s, lsim__raw *r, lsim_errbuf *eb,
                            int *fatal) {
  lsim__azure *a = (lsim__azure *)s;
  char *f[4], q[LSIM__SHOW_BUF];
  for (;;) {
    int rc = lsim__lines_next(&a->L, eb, fatal);
    if (rc <= 0) {
      if (rc == 0 && !a->have_header) {
        *fatal = 1;
        return lsim__rowerr(eb, LSIM_E_TRACE_PARSE, s->path, 1, NULL,
                            "empty file, expected the header "
                            "'TIMESTAMP,ContextTokens,GeneratedTokens'");
      }
      return rc;
    }
    if (!a->have_header) {
      if (strcmp(a->L.buf, "TIMESTAMP,ContextTokens,GeneratedTokens") != 0) {
        *fatal = 1;
        return lsim__rowerr(eb, LSIM_E_TRACE_PARSE, s->path, a->L.line,
                            "header",
                            "expected 'TIMESTAMP,ContextTokens,"
                            "GeneratedTokens' (the line is not quoted)");
      }
      a->have_header = 1;
      continue;
    }
    if (a->L.buf[0] == '\0')
      continue; /* a blank line, as at the end of some copies */
    *fatal = 0;
    memset(r, 0, sizeof *r);
    r->deadline_ns = r->cancel_ns = -1;
    r->line = a->L.line;
    r->time_field = "TIMESTAMP";
    int nf;
    lsim_err ce = lsim__csv_fields(a->L.buf, f, 3, &nf, s->path, a->L.line,
                                   eb);
    if (ce)
      return ce;
    if (nf != 3)
      return lsim__rowerr(eb, LSIM_E_TRACE_PARSE, s->path, a->L.line, NULL,
                          "expected 3 fields (got %d)", nf);
    int64_t ns;
    if (!*f[0])
      return lsim__rowerr(eb, LSIM_E_TRACE_MISSING, s->path, a->L.line,
                          "TIMESTAMP", "value is empty");
    int bad = lsim__stamp(f[0], &ns);
    if (bad == -2)
      return lsim__rowerr(eb, LSIM_E_TRACE_RANGE, s->path, a->L.line,
                          "TIMESTAMP", "year outside %d..%d (got '%s')",
                          LSIM__YEAR_MIN, LSIM__YEAR_MAX,
                          lsim__show(f[0], q, sizeof q));
    if (bad)
      return lsim__rowerr(eb, LSIM_E_TRACE_PARSE, s->path, a->L.line,
                          "TIMESTAMP",
                          "expected 'YYYY-MM-DD HH:MM:SS[.fraction]' (got '%s')",
                          lsim__show(f[0], q, sizeof q));
    lsim_err e;
    if ((e = lsim__p_tokens(f[1], s->path, a->L.line, "ContextTokens",
                            &r->prompt, eb)) ||
        (e = lsim__p_tokens(f[2], s->path, a->L.line, "GeneratedTokens",
                            &r->output, eb)))
      return e;
    if (!a->have_base) {
      a->have_base = 1;
      a->base_ns = ns;
    }
    r->arrival_ns = ns - a->base_ns;
    return 1;
  }
}

static void lsim__azure_close(lsim__src *s) {
  lsim__azure *a = (lsim__azure *)s;
  lsim__lines_close(&a->L);
  free(a);
}

static const lsim__src_ops lsim__azure_ops = {
    /* .next = */ lsim__azure_next,
    /* .close = */ lsim__azure_close,
};

static lsim_err lsim__azure_open(lsim__src **out, const char *path, lsim_errbuf *eb) {
  lsim__azure *a = calloc(1, sizeof *a);
  if (!a)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  a->base.ops = &lsim__azure_ops;
  snprintf(a->base.path, sizeof a->base.path, "%s", path);
  snprintf(a->base.desc, sizeof a->base.desc, "azure %.150s", path);
  lsim_err rc = lsim__lines_open(&a->L, a->base.path, eb);
  if (rc) {
    free(a);
    return rc;
  }
  *out = &a->base;
  return 0;
}

static lsim_err lsim__azure_import(lsim__src **out, const lsim__src_args *a,
                                   lsim_errbuf *eb) {
  return lsim__azure_open(out, a->path, eb);
}

const lsim__importer lsim__importer_azure = {
    .name = "azure", .open = lsim__azure_import, .file_based = 1,
    .per_request = 1, .sample_name = "input.csv"};
