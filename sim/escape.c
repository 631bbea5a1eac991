/*
** escape.c: quoting of user strings for each output format (escape.h).
**
** Each writer appends through lsim__put, which refuses to overflow: a
** result is either whole or, on -1, the empty string, so a caller that
** ignores -1 still never writes half an escape.
*/
#include "escape.h"

#include <stdio.h>
#include <string.h>

typedef struct lsim__out {
  char *p;
  size_t size, n;
  int over;
} lsim__out;

static void lsim__put(lsim__out *o, const char *s, size_t len) {
  if (o->over || len >= o->size - o->n) {
    o->over = 1;
    return;
  }
  memcpy(o->p + o->n, s, len);
  o->n += len;
}

static void lsim__putc(lsim__out *o, char c) { lsim__put(o, &c, 1); }

static int lsim__done(lsim__out *o) {
  if (o->size == 0)
    return -1;
  if (o->over) {
    o->p[0] = '\0';
    return -1;
  }
  o->p[o->n] = '\0';
  return (int)o->n;
}

static int lsim__control(unsigned char c) { return c < 0x20 || c == 0x7f; }

int lsim_csv_field(char *out, size_t size, const char *s) {
  lsim__out o = {out, size, 0, size == 0};
  if (!strpbrk(s, ",\"\r\n")) {
    lsim__put(&o, s, strlen(s));
    return lsim__done(&o);
  }
  lsim__putc(&o, '"');
  for (; *s; s++) {
    if (*s == '"')
      lsim__putc(&o, '"');
    lsim__putc(&o, *s);
  }
  lsim__putc(&o, '"');
  return lsim__done(&o);
}

int lsim_csv_next(const char **p, char *out, size_t size) {
  const char *s = *p;
  lsim__out o = {out, size, 0, size == 0};
  if (*s == '\0' || *s == '\r' || *s == '\n') {
    if (size)
      out[0] = '\0';
    return 0;
  }
  if (*s == '"') {
    for (s++;; s++) {
      if (*s == '\0') {
        if (size)
          out[0] = '\0';
        return -1; /* unterminated */
      }
      if (*s == '"') {
        if (s[1] != '"')
          break;
        s++;
      }
      lsim__putc(&o, *s);
    }
    s++; /* the closing quote */
    if (*s != ',' && *s != '\0' && *s != '\r' && *s != '\n') {
      if (size)
        out[0] = '\0';
      return -1; /* text after the closing quote */
    }
  } else {
    size_t len = strcspn(s, ",\r\n");
    if (memchr(s, '"', len)) {
      if (size)
        out[0] = '\0';
      return -1; /* a quote inside an unquoted field */
    }
    lsim__put(&o, s, len);
    s += len;
  }
  if (*s == ',')
    s++;
  *p = s;
  return lsim__done(&o) < 0 ? -1 : 1;
}

int lsim_gp_string(char *out, size_t size, const char *s, int mode) {
  lsim__out o = {out, size, 0, size == 0};
  lsim__putc(&o, '\'');
  for (; *s; s++) {
    if (lsim__control((unsigned char)*s)) {
      if (mode != LSIM_GP_REPLACE) {
        o.over = 1;
        break;
      }
      lsim__putc(&o, '?');
      continue;
    }
    if (*s == '\'')
      lsim__putc(&o, '\'');
    lsim__putc(&o, *s);
  }
  lsim__putc(&o, '\'');
  return lsim__done(&o);
}

int lsim_gp_path(char *out, size_t size, const char *path) {
  char tmp[4200];
  const char *p = path;
  if (path[0] != '/') {
    int n = snprintf(tmp, sizeof tmp, "./%s", path);
    if (n < 0 || (size_t)n >= sizeof tmp) {
      if (size)
        out[0] = '\0';
      return -1;
    }
    p = tmp;
  }
  return lsim_gp_string(out, size, p, LSIM_GP_REFUSE);
}

int lsim_dat_token(char *out, size_t size, const char *s) {
  lsim__out o = {out, size, 0, size == 0};
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    lsim__putc(&o, lsim__control(c) || c == ' ' || c == '"' || c == '#'
                       ? '_'
                       : *s);
  }
  return lsim__done(&o);
}

int lsim_prom_label(char *out, size_t size, const char *s) {
  lsim__out o = {out, size, 0, size == 0};
  for (; *s; s++) {
    if (*s == '\\')
      lsim__put(&o, "\\\\", 2);
    else if (*s == '"')
      lsim__put(&o, "\\\"", 2);
    else if (*s == '\n')
      lsim__put(&o, "\\n", 2);
    else
      lsim__putc(&o, *s);
  }
  return lsim__done(&o);
}

/* The console form of byte c into e[5]; returns its length. */
static size_t lsim__visible(unsigned char c, char e[5]) {
  if (!lsim__control(c)) {
    e[0] = (char)c;
    e[1] = '\0';
  } else if (c == '\n' || c == '\r' || c == '\t') {
    e[0] = '\\';
    e[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
    e[2] = '\0';
  } else {
    snprintf(e, 5, "\\x%02x", c);
  }
  return strlen(e);
}

const char *lsim_console_str(char *out, size_t size, const char *s) {
  char e[5];
  size_t need = 0, n = 0;
  if (size < 8) {
    if (size)
      out[0] = '\0';
    return out;
  }
  for (const char *q = s; *q; q++)
    need += lsim__visible((unsigned char)*q, e);
  /* whole when it fits, else cut with room for "..." and the NUL */
  size_t room = need < size ? size - 1 : size - 4;
  for (; *s; s++) {
    size_t len = lsim__visible((unsigned char)*s, e);
    if (n + len > room)
      break;
    memcpy(out + n, e, len);
    n += len;
  }
  if (need >= size)
    memcpy(out + n, "...", 4);
  else
    out[n] = '\0';
  return out;
}
