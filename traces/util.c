/*
** util.c: the pieces every trace source uses: bounded line reading, CSV
** splitting, exact number parsing, a one-line flat JSON parser, and two
** small hash tables (uint64 -> int64, and names numbered by first
** appearance).
**
** Nothing here keeps state between calls beyond what the caller owns.
*/
#include "internal.h"

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
    if (e == ENOENT || e == ENOTDIR)
      return lsim_fail(eb, LSIM_E_FILE_MISSING,
                       "%s: no such file or directory", path);
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

static char *lsim__trim(char *s) {
  while (*s == ' ' || *s == '\t')
    s++;
  size_t n = strlen(s);
  while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
    s[--n] = '\0';
  if (n >= 2 && s[0] == '"' && s[n - 1] == '"') {
    s[n - 1] = '\0';
    s++;
  }
  return s;
}

int lsim__csv_split(char *line, char **f, int max) {
  int n = 0;
  char *p = line;
  for (;;) {
    char *comma = strchr(p, ',');
    if (comma)
      *comma = '\0';
    if (n < max)
      f[n] = lsim__trim(p);
    n++;
    if (!comma || n > max)
      return n > max ? max + 1 : n;
    p = comma + 1;
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

/* ---- one-line JSON --------------------------------------------------------------- */

static char *lsim__jws(char *p) {
  while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
    p++;
  return p;
}

/* A string at *pp (after the opening quote), unescaped in place. */
static int lsim__jstr(char **pp, char **out, char *why, size_t wl) {
  char *p = *pp, *w = p;
  *out = p;
  for (;;) {
    unsigned char ch = (unsigned char)*p;
    if (ch == '\0') {
      snprintf(why, wl, "unterminated string");
      return -1;
    }
    if (ch < 0x20) {
      snprintf(why, wl, "control character in a string");
      return -1;
    }
    if (ch == '"')
      break;
    if (ch == '\\') {
      p++;
      switch (*p) {
      case '"': *w++ = '"'; break;
      case '\\': *w++ = '\\'; break;
      case '/': *w++ = '/'; break;
      case 'b': *w++ = '\b'; break;
      case 'f': *w++ = '\f'; break;
      case 'n': *w++ = '\n'; break;
      case 'r': *w++ = '\r'; break;
      case 't': *w++ = '\t'; break;
      case 'u': {
        unsigned v = 0;
        for (int i = 1; i <= 4; i++) {
          char c = p[i];
          int d = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                         : -1;
          if (d < 0) {
            snprintf(why, wl, "bad \\u escape");
            return -1;
          }
          v = v * 16 + (unsigned)d;
        }
        *w++ = (v > 0 && v < 0x80) ? (char)v : '?';
        p += 4;
        break;
      }
      default:
        snprintf(why, wl, "bad escape in a string");
        return -1;
      }
      p++;
      continue;
    }
    *w++ = *p++;
  }
  *w = '\0'; /* w <= p: the closing quote or earlier */
  *pp = p + 1;
  return 0;
}

static int lsim__jnum(char **pp, char **out, char *why, size_t wl) {
  char *p = *pp, *s = p;
  if (*p == '-')
    p++;
  if (!(*p >= '0' && *p <= '9')) {
    snprintf(why, wl, "expected a value");
    return -1;
  }
  while (*p >= '0' && *p <= '9')
    p++;
  if (*p == '.') {
    p++;
    if (!(*p >= '0' && *p <= '9')) {
      snprintf(why, wl, "bad number");
      return -1;
    }
    while (*p >= '0' && *p <= '9')
      p++;
  }
  if (*p == 'e' || *p == 'E') {
    p++;
    if (*p == '+' || *p == '-')
      p++;
    if (!(*p >= '0' && *p <= '9')) {
      snprintf(why, wl, "bad number");
      return -1;
    }
    while (*p >= '0' && *p <= '9')
      p++;
  }
  *out = s;
  *pp = p;
  return 0;
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
  char *p = lsim__jws(line);
  o->n = 0;
  o->arr_n = 0;
  if (*p != '{') {
    snprintf(why, wl, "expected a JSON object");
    return -1;
  }
  p = lsim__jws(p + 1);
  if (*p == '}') {
    p = lsim__jws(p + 1);
    goto end;
  }
  for (;;) {
    char *key;
    if (*p != '"') {
      snprintf(why, wl, "expected a key");
      return -1;
    }
    p++;
    if (lsim__jstr(&p, &key, why, wl))
      return -1;
    p = lsim__jws(p);
    if (*p != ':') {
      snprintf(why, wl, "expected ':' after key '%s'", lsim__show(key, kq, sizeof kq));
      return -1;
    }
    p = lsim__jws(p + 1);
    if (o->n == LSIM__JMAX) {
      snprintf(why, wl, "more than %d keys", LSIM__JMAX);
      return -1;
    }
    lsim__jkv *kv = &o->kv[o->n];
    memset(kv, 0, sizeof *kv);
    kv->key = key;
    char *numtext = NULL, *term = NULL;
    if (*p == '"') {
      p++;
      char *s;
      if (lsim__jstr(&p, &s, why, wl))
        return -1;
      kv->type = LSIM__J_STR;
      kv->str = s;
    } else if (*p == '[') {
      kv->type = LSIM__J_ARR;
      kv->arr_off = o->arr_n;
      p = lsim__jws(p + 1);
      if (*p == ']') {
        p++;
      } else {
        for (;;) {
          char *t;
          if (*p == '-' || lsim__jnum(&p, &t, why, wl)) {
            snprintf(why, wl, "array '%s': elements must be non-negative "
                              "integers", lsim__show(key, kq, sizeof kq));
            return -1;
          }
          char save = *p;
          *p = '\0';
          int64_t v;
          int bad = lsim__p_i64(t, &v) != 0;
          *p = save;
          if (bad) {
            snprintf(why, wl, "array '%s': elements must be non-negative "
                              "integers", lsim__show(key, kq, sizeof kq));
            return -1;
          }
          if (lsim__jpush(o, (uint64_t)v))
            return -2;
          p = lsim__jws(p);
          if (*p == ',') {
            p = lsim__jws(p + 1);
            continue;
          }
          if (*p == ']') {
            p++;
            break;
          }
          snprintf(why, wl, "array '%s': expected ',' or ']'", lsim__show(key, kq, sizeof kq));
          return -1;
        }
      }
      kv->arr_n = o->arr_n - kv->arr_off;
    } else if (*p == '{') {
      snprintf(why, wl, "key '%s': nested objects are not allowed", lsim__show(key, kq, sizeof kq));
      return -1;
    } else if (strncmp(p, "null", 4) == 0) {
      kv->type = LSIM__J_NULL;
      p += 4;
    } else if (strncmp(p, "true", 4) == 0) {
      kv->type = LSIM__J_BOOL;
      p += 4;
    } else if (strncmp(p, "false", 5) == 0) {
      kv->type = LSIM__J_BOOL;
      p += 5;
    } else {
      if (lsim__jnum(&p, &numtext, why, wl))
        return -1;
      kv->type = LSIM__J_NUM;
      kv->num = numtext;
      term = p; /* NUL-terminated below, after the separator is read */
    }
    for (int i = 0; i < o->n; i++)
      if (strcmp(o->kv[i].key, key) == 0) {
        snprintf(why, wl, "key '%s' appears twice", lsim__show(key, kq, sizeof kq));
        return -1;
      }
    o->n++;
    p = lsim__jws(p);
    char sep = *p;
    if (term)
      *term = '\0';
    if (sep == ',') {
      p = lsim__jws(p + 1);
      continue;
    }
    if (sep == '}') {
      p = lsim__jws(p + 1);
      break;
    }
    snprintf(why, wl, "expected ',' or '}'");
    return -1;
  }
end:
  if (*p) {
    snprintf(why, wl, "text after the object");
    return -1;
  }
  return 0;
}

const lsim__jkv *lsim__json_get(const lsim__jobj *o, const char *key) {
  for (int i = 0; i < o->n; i++)
    if (strcmp(o->kv[i].key, key) == 0)
      return &o->kv[i];
  return NULL;
}

void lsim__json_release(lsim__jobj *o) {
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
