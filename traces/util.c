/*
** util.c: the pieces every trace source uses: bounded line reading, CSV
** splitting (RFC 4180), exact number parsing, one-line flat JSON objects
** (over cJSON), and two
** small hash tables (uint64 -> int64, and names numbered by first
** appearance).
**
** Nothing here keeps state between calls beyond what the caller owns.
*/
#include "internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- messages ---------------------------------------------------------- */

lsim_err lsim__rowerr(lsim_errbuf *eb, lsim_err code, const char *path,
                      int64_t line, const char *field, const char *fmt, ...) {
  char what[400], where[300];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  if (line > 0)
    snprintf(where, sizeof where, "%s:%lld", path, (long long)line);
  else
    snprintf(where, sizeof where, "%s", path);
  if (field)
    return lsim_fail(eb, code, "%s: %s: %s", where, field, what);
  return lsim_fail(eb, code, "%s: %s", where, what);
}

const char *lsim__show(const char *s, char *out, size_t size) {
  static const char hex[] = "0123456789abcdef";
  size_t i = 0, o = 0;
  for (; s[i] && i < LSIM__SHOW_MAX; i++) {
    unsigned char ch = (unsigned char)s[i];
    int esc = ch < 0x20 || ch >= 0x7f || ch == '\\' || ch == '\'';
    if (o + (esc ? 4 : 1) + 4 > size)
      break; /* room for "..." and the NUL stays */
    if (esc) {
      out[o++] = '\\';
      out[o++] = 'x';
      out[o++] = hex[ch >> 4];
      out[o++] = hex[ch & 15];
    } else {
      out[o++] = (char)ch;
    }
  }
  if (s[i]) {
    memcpy(out + o, "...", 4);
  } else {
    out[o] = '\0';
  }
  return out;
}

/* ---- lines --------------------------------------------------------------- */

#define LSIM__RBUF 65536

/* The kind of a non-regular file, for messages. */
static const char *lsim__ftype(mode_t m) {
  return S_ISDIR(m)    ? "a directory"
         : S_ISFIFO(m) ? "a FIFO"
         : S_ISCHR(m)  ? "a character device"
         : S_ISBLK(m)  ? "a block device"
         : S_ISSOCK(m) ? "a socket"
                       : "not a regular file";
}

lsim_err lsim__open_regular(const char *path, int *fd_out, lsim_errbuf *eb) {
  struct stat st;
  *fd_out = -1;
  /* the type first: opening a FIFO for reading blocks until a writer
  ** comes, and a device may never end */
  if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
    return lsim_fail(eb, LSIM_E_IO, "%s: cannot read %s as a trace: not a "
                     "regular file", path, lsim__ftype(st.st_mode));
  /* non-blocking, so a file swapped for a FIFO after the stat cannot
  ** block either; fstat then decides on what was really opened */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    return lsim_fail(eb, LSIM_E_IO, "%s: cannot open: %s", path, strerror(e));
  }
  int fl;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return lsim_fail(eb, LSIM_E_IO, "%s: cannot read %s as a trace: not a "
                     "regular file", path, lsim__ftype(st.st_mode));
  }
  if ((fl = fcntl(fd, F_GETFL)) < 0 ||
      fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
    int e = errno;
    close(fd);
    return lsim_fail(eb, LSIM_E_IO, "%s: cannot open: %s", path, strerror(e));
  }
  *fd_out = fd;
  return 0;
}

lsim_err lsim__lines_open(lsim__lines *L, const char *path, lsim_errbuf *eb) {
  memset(L, 0, sizeof *L);
  L->fd = -1;
  L->path = path;
  lsim_err rc = lsim__open_regular(path, &L->fd, eb);
  if (rc)
    return rc;
  L->cap = 4096;
  L->buf = malloc(L->cap);
  L->rbuf = malloc(LSIM__RBUF);
  if (!L->buf || !L->rbuf) {
    lsim__lines_close(L);
    return lsim_fail(eb, LSIM_E_NOMEM, "%s: out of memory", path);
  }
  return 0;
}

/* Refill the read-ahead: 1 bytes, 0 end of file, < 0 E_IO. */
static int lsim__fill(lsim__lines *L, lsim_errbuf *eb) {
  if (L->eof)
    return 0;
  for (;;) {
    ssize_t n = read(L->fd, L->rbuf, LSIM__RBUF);
    if (n > 0) {
      L->rpos = 0;
      L->rlen = (size_t)n;
      return 1;
    }
    if (n == 0) {
      L->eof = 1;
      return 0;
    }
    if (errno != EINTR) {
      int e = errno;
      return lsim_fail(eb, LSIM_E_IO, "%s:%lld: read error: %s", L->path,
                       (long long)L->line + 1, strerror(e));
    }
  }
}

int lsim__lines_next(lsim__lines *L, lsim_errbuf *eb, int *fatal) {
  size_t len = 0;
  int any = 0, r;
  *fatal = 1;
  /* the rest of an over-long line reported by the previous call */
  while (L->skipping) {
    if (L->rpos == L->rlen && (r = lsim__fill(L, eb)) <= 0) {
      if (r < 0)
        return r;
      L->skipping = 0;
      break;
    }
    char *nl = memchr(L->rbuf + L->rpos, '\n', L->rlen - L->rpos);
    if (nl) {
      L->rpos = (size_t)(nl - L->rbuf) + 1;
      L->skipping = 0;
    } else {
      L->rpos = L->rlen;
    }
  }
  for (;;) {
    if (L->rpos == L->rlen) {
      r = lsim__fill(L, eb);
      if (r < 0)
        return r;
      if (r == 0) {
        if (!any)
          return 0;
        break; /* a last line without a newline */
      }
    }
    any = 1;
    const char *s = L->rbuf + L->rpos;
    size_t avail = L->rlen - L->rpos;
    const char *nl = memchr(s, '\n', avail);
    size_t take = nl ? (size_t)(nl - s) : avail;
    /* every byte counts toward the limit, NUL bytes too */
    if (len + take >= LSIM_TRACE_MAX_LINE) {
      L->line++;
      L->rpos += nl ? take + 1 : take;
      L->skipping = !nl;
      L->buf[0] = '\0';
      L->len = 0;
      *fatal = 0;
      return lsim__rowerr(eb, LSIM_E_TRACE_PARSE, L->path, L->line, NULL,
                          "line longer than %d bytes", LSIM_TRACE_MAX_LINE);
    }
    if (len + take + 1 > L->cap) {
      size_t ncap = L->cap;
      while (ncap < len + take + 1)
        ncap *= 2;
      char *nb = realloc(L->buf, ncap);
      if (!nb)
        return lsim_fail(eb, LSIM_E_NOMEM, "%s: out of memory", L->path);
      L->buf = nb;
      L->cap = ncap;
    }
    memcpy(L->buf + len, s, take);
    len += take;
    L->rpos += take;
    if (nl) {
      L->rpos++;
      break;
    }
  }
  L->line++;
  L->buf[len] = '\0';
  while (len > 0 && (L->buf[len - 1] == '\n' || L->buf[len - 1] == '\r'))
    L->buf[--len] = '\0';
  L->len = len;
  const char *z = memchr(L->buf, '\0', len);
  if (z) {
    /* a C string would end here and the row would change silently */
    L->buf[0] = '\0';
    L->len = 0;
    *fatal = 0;
    return lsim__rowerr(eb, LSIM_E_TRACE_PARSE, L->path, L->line, NULL,
                        "NUL byte at column %zu", (size_t)(z - L->buf) + 1);
  }
  return 1;
}

void lsim__lines_close(lsim__lines *L) {
  if (L->fd >= 0)
    close(L->fd);
  free(L->buf);
  free(L->rbuf);
  memset(L, 0, sizeof *L);
  L->fd = -1;
}

int lsim__skippable(const char *s) {
  while (*s == ' ' || *s == '\t')
    s++;
  return *s == '\0' || *s == '#';
}

/* Trailing blanks of s off. */
static void lsim__rtrim(char *s) {
  size_t n = strlen(s);
  while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
    s[--n] = '\0';
}

/*
** RFC 4180 fields, split in place.  A field that starts (after blanks) with
** a double quote runs to the matching closing quote, commas included, and
** a doubled quote inside it stands for one; only blanks may follow it
** before the comma.  An unquoted field runs to the next comma and may not
** hold a quote.  Blanks around a field are not part of it (the readers
** always trimmed them), and the line reader already took off the CR of a
** CRLF line end.  A quoted field does not continue on the next line: no
** trace format this reads puts a line break in a field, and a record that
** spans lines would make every later line number wrong.
*/
lsim_err lsim__csv_fields(char *line, char **f, int max, int *nf,
                          const char *path, int64_t ln, lsim_errbuf *eb) {
  char *p = line;
  int n = 0;
  for (;;) {
    while (*p == ' ' || *p == '\t')
      p++;
    char *start = p;
    int end;
    if (*p == '"') {
      char *w = p, *q = p + 1;
      for (;;) {
        if (*q == '\0')
          return lsim__rowerr(eb, LSIM_E_TRACE_PARSE, path, ln, NULL,
                              "column %zu: a quoted field does not end on its "
                              "line", (size_t)(p - line) + 1);
        if (*q == '"') {
          if (q[1] != '"') {
            q++;
            break;
          }
          q++; /* "" is one quote */
        }
        *w++ = *q++;
      }
      while (*q == ' ' || *q == '\t')
        q++;
      if (*q != ',' && *q != '\0')
        return lsim__rowerr(eb, LSIM_E_TRACE_PARSE, path, ln, NULL,
                            "column %zu: text after the closing quote of a "
                            "field", (size_t)(q - line) + 1);
      end = *q == '\0';
      *w = '\0'; /* w < q: the closing quote at least was read */
      p = end ? q : q + 1;
    } else {
      char *c = p;
      for (; *c && *c != ','; c++)
        if (*c == '"')
          return lsim__rowerr(eb, LSIM_E_TRACE_PARSE, path, ln, NULL,
                              "column %zu: a quote inside an unquoted field "
                              "(quote the whole field, doubling the quote)",
                              (size_t)(c - line) + 1);
      end = *c == '\0';
      *c = '\0';
      lsim__rtrim(start);
      p = end ? c : c + 1;
    }
    if (n < max)
      f[n] = start;
    n++;
    if (end || n > max) {
      *nf = n > max ? max + 1 : n;
      return 0;
    }
  }
}

/* ---- numbers ---------------------------------------------------------------- */

int lsim__all_digits(const char *s) {
  if (!*s)
    return 0;
  for (; *s; s++)
    if (*s < '0' || *s > '9')
      return 0;
  return 1;
}

int lsim__p_i64(const char *s, int64_t *out) {
  const char *p = s;
  if (*p == '-' || *p == '+')
    p++;
  if (!lsim__all_digits(p))
    return -1;
  errno = 0;
  long long v = strtoll(s, NULL, 10);
  if (errno == ERANGE)
    return -2;
  *out = v;
  return 0;
}

int lsim__p_time(const char *s, int64_t unit_ns, int64_t *ns) {
  const char *p = s;
  int64_t ip = 0, frac = 0, scale = 1;
  int ndig = 0, nfrac = 0;
  for (; *p >= '0' && *p <= '9'; p++, ndig++) {
    if (ip > (INT64_MAX - 9) / 10)
      return -2;
    ip = ip * 10 + (*p - '0');
  }
  if (*p == '.') {
    p++;
    for (; *p >= '0' && *p <= '9'; p++, nfrac++) {
      if (nfrac >= 9)
        return -1;
      frac = frac * 10 + (*p - '0');
      scale *= 10;
    }
  }
  if (*p || (ndig == 0 && nfrac == 0))
    return -1;
  if (ip > INT64_MAX / unit_ns)
    return -2;
  int64_t v = ip * unit_ns;
  int64_t f = frac * unit_ns / scale; /* frac < 10^9, unit <= 10^9 */
  if (v > INT64_MAX - f)
    return -2;
  *ns = v + f;
  return 0;
}

int lsim__p_f64(const char *s, double *out) {
  char *end;
  if (!*s)
    return -1;
  errno = 0;
  double v = strtod(s, &end);
  if (*end || errno == ERANGE || !isfinite(v))
    return -1;
  *out = v;
  return 0;
}

lsim_err lsim__p_tokens(const char *s, const char *path, int64_t line,
                        const char *field, int64_t *out, lsim_errbuf *eb) {
  char q[LSIM__SHOW_BUF];
  int64_t v;
  if (!*s)
    return lsim__rowerr(eb, LSIM_E_TRACE_MISSING, path, line, field,
                        "value is empty");
  int rc = lsim__p_i64(s, &v);
  if (rc == -1)
    return lsim__rowerr(eb, LSIM_E_TRACE_PARSE, path, line, field,
                        "expected an integer (got '%s')",
                        lsim__show(s, q, sizeof q));
  if (rc == -2 || v < 1 || v > LSIM_TRACE_MAX_TOKENS)
    return lsim__rowerr(eb, LSIM_E_TRACE_RANGE, path, line, field,
                        "must be in [1, %d] (got %s)", LSIM_TRACE_MAX_TOKENS,
                        lsim__show(s, q, sizeof q));
  *out = v;
  return 0;
}

int lsim__plain_word(const char *s) {
  size_t n = strlen(s);
  return n > 0 && n <= 40 &&
         strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                   "0123456789_ ()-") == n;
}

int lsim__name_ok(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > 63)
    return 0;
  return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                   "0123456789_.:/@+-") == n;
}

/* ---- one-line JSON, through cJSON ---------------------------------------------- */

/*
** cJSON parses the line; one walk over the tree then refuses what the trace
** formats do not allow (a key given twice, a nested object, an array of
** anything but non-negative integers, more than LSIM__JMAX keys) and gives
** every number its source text, so integers are read exactly rather than
** through a double: a scanner steps through the same text to the next
** number literal outside strings, which is the literal of the next number
** node in document order (as sim/json.c does for scenarios; traces/ may not
** include sim/, docs/ARCHITECTURE.md).  A string holding \u0000, which
** cJSON would cut short there, is refused.  Out of memory inside cJSON is
** told from bad syntax by allocation hooks that note a failed malloc.
*/

static _Thread_local int lsim__jnomem;

static void *lsim__jmalloc(size_t n) {
  void *p = malloc(n);
  if (!p)
    lsim__jnomem = 1;
  return p;
}

typedef struct lsim__jscan {
  char *t;
  size_t at;
  int nul_escape; /* a string held \u0000 */
} lsim__jscan;

/* The next number literal at or after sc->at, NUL-terminated in place (the
** byte after a literal is a delimiter cJSON has already read). */
static char *lsim__jnext_number(lsim__jscan *sc) {
  char *t = sc->t;
  size_t i = sc->at;
  while (t[i]) {
    if (t[i] == '"') {
      for (i++; t[i] && t[i] != '"'; i++)
        if (t[i] == '\\' && t[i + 1]) {
          if (strncmp(t + i + 1, "u0000", 5) == 0)
            sc->nul_escape = 1;
          i++;
        }
      if (t[i])
        i++;
    } else if (t[i] == '-' || (t[i] >= '0' && t[i] <= '9')) {
      size_t s = i;
      while (t[i] && strchr("0123456789+-.eE", t[i]))
        i++;
      sc->at = t[i] ? i + 1 : i;
      t[i] = '\0';
      return t + s;
    } else {
      i++;
    }
  }
  sc->at = i;
  return NULL;
}

static int lsim__jpush(lsim__jobj *o, uint64_t v) {
  if (o->arr_n == o->arr_cap) {
    int nc = o->arr_cap ? o->arr_cap * 2 : 256;
    uint64_t *na = realloc(o->arr, (size_t)nc * sizeof *na);
    if (!na)
      return -2;
    o->arr = na;
    o->arr_cap = nc;
  }
  o->arr[o->arr_n++] = v;
  return 0;
}

int lsim__json_line(char *line, lsim__jobj *o, char *why, size_t wl) {
  char kq[LSIM__SHOW_BUF];
  size_t len = strlen(line);
  o->n = 0;
  o->arr_n = 0;
  cJSON_Delete(o->root);
  o->root = NULL;
  cJSON_Hooks hooks = {lsim__jmalloc, free};
  const char *end = NULL;
  lsim__jnomem = 0;
  cJSON_InitHooks(&hooks);
  cJSON *root = cJSON_ParseWithLengthOpts(line, len, &end, 0);
  cJSON_InitHooks(NULL);
  o->root = root;
  if (lsim__jnomem)
    return -2;
  if (!root) {
    snprintf(why, wl, "syntax error at column %zu",
             (size_t)((end ? end : line) - line) + 1);
    return -1;
  }
  const char *p = end;
  while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
    p++;
  if (*p) {
    snprintf(why, wl, "text after the object at column %zu",
             (size_t)(p - line) + 1);
    return -1;
  }
  if (!cJSON_IsObject(root)) {
    snprintf(why, wl, "expected a JSON object");
    return -1;
  }
  lsim__jscan sc = {line, 0, 0};
  for (cJSON *c = root->child; c; c = c->next) {
    const char *key = c->string;
    if (o->n == LSIM__JMAX) {
      snprintf(why, wl, "more than %d keys", LSIM__JMAX);
      return -1;
    }
    for (int i = 0; i < o->n; i++)
      if (strcmp(o->kv[i].key, key) == 0) {
        snprintf(why, wl, "key '%s' appears twice",
                 lsim__show(key, kq, sizeof kq));
        return -1;
      }
    lsim__jkv *kv = &o->kv[o->n];
    memset(kv, 0, sizeof *kv);
    kv->key = key;
    if (cJSON_IsNumber(c)) {
      kv->type = LSIM__J_NUM;
      kv->num = lsim__jnext_number(&sc);
      if (!kv->num) {
        snprintf(why, wl, "number text not found");
        return -1;
      }
    } else if (cJSON_IsString(c)) {
      kv->type = LSIM__J_STR;
      kv->str = c->valuestring;
    } else if (cJSON_IsNull(c)) {
      kv->type = LSIM__J_NULL;
    } else if (cJSON_IsBool(c)) {
      kv->type = LSIM__J_BOOL;
    } else if (cJSON_IsArray(c)) {
      kv->type = LSIM__J_ARR;
      kv->arr_off = o->arr_n;
      for (const cJSON *e = c->child; e; e = e->next) {
        const char *t = cJSON_IsNumber(e) ? lsim__jnext_number(&sc) : NULL;
        int64_t v;
        if (!t || *t == '-' || lsim__p_i64(t, &v) != 0) {
          snprintf(why, wl,
                   "array '%s': elements must be non-negative integers",
                   lsim__show(key, kq, sizeof kq));
          return -1;
        }
        if (lsim__jpush(o, (uint64_t)v))
          return -2;
      }
      kv->arr_n = o->arr_n - kv->arr_off;
    } else {
      snprintf(why, wl, "key '%s': nested objects are not allowed",
               lsim__show(key, kq, sizeof kq));
      return -1;
    }
    o->n++;
  }
  while (lsim__jnext_number(&sc)) /* the strings after the last number */
    ;
  if (sc.nul_escape) {
    snprintf(why, wl, "a string holds \\u0000");
    return -1;
  }
  return 0;
}

int lsim__json_int_array_len(const char *s, int64_t *n) {
  cJSON_Hooks hooks = {lsim__jmalloc, free};
  const char *end = NULL;
  lsim__jnomem = 0;
  cJSON_InitHooks(&hooks);
  cJSON *a = cJSON_ParseWithOpts(s, &end, 1);
  cJSON_InitHooks(NULL);
  int rc = lsim__jnomem ? -2 : a && cJSON_IsArray(a) ? 0 : -1;
  int64_t k = 0;
  for (const cJSON *e = rc ? NULL : a->child; e; e = e->next, k++)
    if (!cJSON_IsNumber(e) || !isfinite(e->valuedouble) ||
        !(e->valuedouble >= 0) || floor(e->valuedouble) != e->valuedouble) {
      rc = -1; /* a token id is a non-negative integer */
      break;
    }
  cJSON_Delete(a);
  if (!rc)
    *n = k;
  return rc;
}

const lsim__jkv *lsim__json_get(const lsim__jobj *o, const char *key) {
  for (int i = 0; i < o->n; i++)
    if (strcmp(o->kv[i].key, key) == 0)
      return &o->kv[i];
  return NULL;
}

void lsim__json_release(lsim__jobj *o) {
  cJSON_Delete(o->root);
  free(o->arr);
  memset(o, 0, sizeof *o);
}

/* ---- hash tables ------------------------------------------------------------------- */

static uint64_t lsim__mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

static int lsim__map_grow(lsim__map *m) {
  size_t ncap = m->cap ? m->cap * 2 : 64;
  lsim__map nm = {calloc(ncap, sizeof(uint64_t)), calloc(ncap, sizeof(int64_t)),
                  calloc(ncap, 1), ncap, 0};
  if (!nm.keys || !nm.vals || !nm.used) {
    lsim__map_release(&nm);
    return -1;
  }
  for (size_t i = 0; i < m->cap; i++) {
    if (!m->used[i])
      continue;
    size_t j = lsim__mix(m->keys[i]) & (ncap - 1);
    while (nm.used[j])
      j = (j + 1) & (ncap - 1);
    nm.used[j] = 1;
    nm.keys[j] = m->keys[i];
    nm.vals[j] = m->vals[i];
    nm.n++;
  }
  lsim__map_release(m);
  *m = nm;
  return 0;
}

int64_t *lsim__map_get(const lsim__map *m, uint64_t key) {
  if (!m->cap)
    return NULL;
  size_t j = lsim__mix(key) & (m->cap - 1);
  while (m->used[j]) {
    if (m->keys[j] == key)
      return &m->vals[j];
    j = (j + 1) & (m->cap - 1);
  }
  return NULL;
}

int64_t *lsim__map_put(lsim__map *m, uint64_t key, int *added) {
  int64_t *v = lsim__map_get(m, key);
  if (added)
    *added = 0;
  if (v)
    return v;
  if ((m->n + 1) * 2 > m->cap && lsim__map_grow(m))
    return NULL;
  size_t j = lsim__mix(key) & (m->cap - 1);
  while (m->used[j])
    j = (j + 1) & (m->cap - 1);
  m->used[j] = 1;
  m->keys[j] = key;
  m->vals[j] = 0;
  m->n++;
  if (added)
    *added = 1;
  return &m->vals[j];
}

void lsim__map_release(lsim__map *m) {
  free(m->keys);
  free(m->vals);
  free(m->used);
  memset(m, 0, sizeof *m);
}

static uint64_t lsim__fnv(const char *s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
  return h;
}

int64_t lsim__names_find(const lsim__names *t, const char *s) {
  int64_t *head = lsim__map_get(&t->by_hash, lsim__fnv(s));
  for (int64_t i = head ? *head - 1 : -1; i >= 0; i = t->next[i])
    if (strcmp(t->str[i], s) == 0)
      return i;
  return -1;
}

int64_t lsim__names_add(lsim__names *t, const char *s) {
  int64_t i = lsim__names_find(t, s);
  if (i >= 0)
    return i;
  if (t->n == t->cap) {
    int64_t nc = t->cap ? t->cap * 2 : 16;
    char **ns = realloc(t->str, (size_t)nc * sizeof *ns);
    if (!ns)
      return -1;
    t->str = ns;
    int64_t *nn = realloc(t->next, (size_t)nc * sizeof *nn);
    if (!nn)
      return -1;
    t->next = nn;
    t->cap = nc;
  }
  char *copy = strdup(s);
  int64_t *head = copy ? lsim__map_put(&t->by_hash, lsim__fnv(s), NULL) : NULL;
  if (!head) {
    free(copy);
    return -1;
  }
  i = t->n++;
  t->str[i] = copy;
  t->next[i] = *head - 1;
  *head = i + 1;
  return i;
}

const char *lsim__names_str(const lsim__names *t, int64_t i) {
  return i >= 0 && i < t->n ? t->str[i] : NULL;
}

void lsim__names_release(lsim__names *t) {
  for (int64_t i = 0; i < t->n; i++)
    free(t->str[i]);
  free(t->str);
  free(t->next);
  lsim__map_release(&t->by_hash);
  memset(t, 0, sizeof *t);
}

int lsim__search(const double *cdf, int n, double u) {
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
