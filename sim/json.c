/*
** json.c: the shared JSON reading layer (json.h).
**
** Parsing is cJSON's; after it one walk over the tree, in document order,
** (1) refuses a key that appears twice in one object and (2) gives every
** number node its source text: a scanner steps through the same text to the
** next number literal (skipping strings), which is the literal of the next
** number node in document order.  The byte after each literal is a
** delimiter (`,` `]` `}`, white space or the end), so it is overwritten
** with a NUL and the node's valuestring points at the literal in place.
**
** Out of memory inside cJSON is told apart from a syntax error by hooks
** that count failed allocations while the parse runs.
*/
#include "json.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- allocation watch --------------------------------------------------- */

static _Thread_local int lsim__nomem;

static void *lsim__watch_malloc(size_t n) {
  void *p = malloc(n);
  if (!p)
    lsim__nomem = 1;
  return p;
}

/* ---- messages and paths ------------------------------------------------- */

lsim_err lsim_json_fail(lsim_errbuf *eb, lsim_err code, const char *file,
                        const char *path, const char *fmt, ...) {
  char what[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return lsim_fail(eb, code, "%s: %s: %s", file ? file : "<json>", path, what);
}

static void lsim__path_done(char out[LSIM_JSON_PATHBUF], int n) {
  if (n < 0 || n >= LSIM_JSON_PATHBUF)
    memcpy(out + LSIM_JSON_PATHBUF - 4, "...", 4);
}

void lsim_json_key_path(char out[LSIM_JSON_PATHBUF], const char *parent,
                        const char *key) {
  char safe[64];
  size_t i = 0;
  for (; key[i] && i < sizeof safe - 4; i++)
    safe[i] = ((unsigned char)key[i] < 0x20 || key[i] == 0x7f) ? '?' : key[i];
  if (key[i])
    memcpy(safe + i, "...", 4);
  else
    safe[i] = '\0';
  lsim__path_done(out, snprintf(out, LSIM_JSON_PATHBUF, "%s.%s", parent, safe));
}

void lsim_json_idx_path(char out[LSIM_JSON_PATHBUF], const char *parent,
                        int i) {
  lsim__path_done(out, snprintf(out, LSIM_JSON_PATHBUF, "%s[%d]", parent, i));
}

const char *lsim_json_type_name(const cJSON *v) {
  if (cJSON_IsObject(v))
    return "object";
  if (cJSON_IsArray(v))
    return "array";
  if (cJSON_IsString(v))
    return "string";
  if (cJSON_IsNumber(v))
    return "number";
  if (cJSON_IsBool(v))
    return "boolean";
  if (cJSON_IsNull(v))
    return "null";
  return "invalid value";
}

const cJSON *lsim_json_get(const cJSON *obj, const char *key) {
  return cJSON_GetObjectItemCaseSensitive(obj, key);
}

int lsim_json_count(const cJSON *v) {
  int n = 0;
  for (const cJSON *c = v ? v->child : NULL; c; c = c->next)
    n++;
  return n;
}

/* ---- integers ------------------------------------------------------------ */

const char *lsim_json_num_text(const cJSON *v) {
  return cJSON_IsNumber(v) && (v->type & cJSON_IsReference) ? v->valuestring
                                                            : NULL;
}

lsim_json_int_st lsim_json_int(const cJSON *v, int64_t *out) {
  const char *s = lsim_json_num_text(v);
  if (!cJSON_IsNumber(v))
    return LSIM_JSON_INT_NOT_NUMBER;
  if (!s)
    return LSIM_JSON_INT_FRACTION; /* not from this layer: refuse, not guess */
  int neg = *s == '-';
  s += neg;
  /* mantissa digits (integer then fraction part), leading zeros dropped */
  char dig[32];
  int nd = 0, frac = 0, over = 0; /* over: nonzero digits past dig[] */
  long scale = 0;
  for (int infrac = 0;; s++) {
    if (*s == '.' && !infrac) {
      infrac = 1;
      continue;
    }
    if (*s < '0' || *s > '9')
      break;
    if (infrac)
      frac++;
    if (nd == 0 && *s == '0')
      continue;
    if (nd < (int)sizeof dig)
      dig[nd++] = *s;
    else if (*s != '0')
      over = 1;
    else
      scale++; /* a zero dropped from the tail counts as a power of ten */
  }
  long ex = 0;
  if (*s == 'e' || *s == 'E') {
    s++;
    int eneg = *s == '-';
    if (*s == '-' || *s == '+')
      s++;
    for (; *s >= '0' && *s <= '9'; s++)
      if (ex < 100000)
        ex = ex * 10 + (*s - '0');
    if (eneg)
      ex = -ex;
  }
  if (nd == 0) { /* every digit zero: the value is 0, whatever the exponent */
    *out = 0;
    return LSIM_JSON_INT_OK;
  }
  if (over)
    return ex - frac >= 0 ? LSIM_JSON_INT_RANGE : LSIM_JSON_INT_FRACTION;
  scale += ex - frac;
  while (nd > 0 && dig[nd - 1] == '0') {
    nd--;
    scale++;
  }
  if (scale < 0)
    return LSIM_JSON_INT_FRACTION;
  if (nd + scale > 19)
    return LSIM_JSON_INT_RANGE;
  uint64_t lim = neg ? (uint64_t)1 << 63 : ((uint64_t)1 << 63) - 1, u = 0;
  for (int i = 0; i < nd + scale; i++) {
    unsigned d = i < nd ? (unsigned)(dig[i] - '0') : 0;
    if (u > (lim - d) / 10)
      return LSIM_JSON_INT_RANGE;
    u = u * 10 + d;
  }
  *out = neg ? (u == (uint64_t)1 << 63 ? INT64_MIN : -(int64_t)u) : (int64_t)u;
  return LSIM_JSON_INT_OK;
}

lsim_err lsim_json_get_int(const lsim_json_rd *r, const cJSON *obj,
                           const char *path, const char *key, int required,
                           int64_t lo, int64_t hi, int64_t def, int64_t *out) {
  char kp[LSIM_JSON_PATHBUF];
  const cJSON *v = lsim_json_get(obj, key);
  lsim_json_key_path(kp, path, key);
  *out = def;
  if (!v)
    return required ? lsim_json_fail(r->eb, r->missing, r->file, kp,
                                     "required key is missing")
                    : 0;
  int64_t x = 0;
  lsim_json_int_st st = lsim_json_int(v, &x);
  if (st == LSIM_JSON_INT_NOT_NUMBER || st == LSIM_JSON_INT_FRACTION)
    return lsim_json_fail(r->eb, r->type, r->file, kp,
                          "must be an integer in [%lld, %lld] (got %s)",
                          (long long)lo, (long long)hi,
                          st == LSIM_JSON_INT_FRACTION ? lsim_json_num_text(v)
                                                       : lsim_json_type_name(v));
  if (st == LSIM_JSON_INT_RANGE || x < lo || x > hi)
    return lsim_json_fail(r->eb, r->range, r->file, kp,
                          "must be an integer in [%lld, %lld] (got %s)",
                          (long long)lo, (long long)hi, lsim_json_num_text(v));
  *out = x;
  return 0;
}

/* ---- the walk ------------------------------------------------------------ */

typedef struct lsim__frame {
  const struct lsim__frame *up;
  const char *key; /* member key, or NULL for an element */
  int idx;
} lsim__frame;

typedef struct lsim__walk {
  lsim_json_doc *d;
  const lsim_json_codes *codes;
  lsim_errbuf *eb;
  size_t at; /* scanner position in d->text */
} lsim__walk;

static void lsim__frame_path(const lsim__frame *f, char out[LSIM_JSON_PATHBUF]) {
  if (!f || !f->up) {
    memcpy(out, "$", 2);
    return;
  }
  char up[LSIM_JSON_PATHBUF];
  lsim__frame_path(f->up, up);
  if (f->key)
    lsim_json_key_path(out, up, f->key);
  else
    lsim_json_idx_path(out, up, f->idx);
}

/* The next number literal at or after w->at: its start; NUL-terminated. */
static char *lsim__next_number(lsim__walk *w) {
  char *t = w->d->text;
  size_t n = w->d->len, i = w->at;
  while (i < n) {
    char ch = t[i];
    if (ch == '"') {
      for (i++; i < n && t[i] != '"'; i++)
        if (t[i] == '\\')
          i++;
      i++;
    } else if (ch == '-' || (ch >= '0' && ch <= '9')) {
      size_t s = i;
      while (i < n && strchr("0123456789+-.eE", t[i]) && t[i])
        i++;
      t[i] = '\0'; /* a delimiter or the terminating NUL */
      w->at = i < n ? i + 1 : n;
      return t + s;
    } else {
      i++;
    }
  }
  w->at = n;
  return NULL;
}

typedef struct lsim__keyix {
  const char *key;
  int idx;
} lsim__keyix;

static int lsim__keyix_cmp(const void *a, const void *b) {
  const lsim__keyix *x = a, *y = b;
  int c = strcmp(x->key, y->key);
  return c ? c : (x->idx > y->idx) - (x->idx < y->idx);
}

/* Index of the first member (in document order) whose key an earlier
** member has, or -1; -2 out of memory. */
static int lsim__first_dup(const cJSON *obj) {
  int n = lsim_json_count(obj);
  if (n < 2)
    return -1;
  if (n <= 16) {
    int j = 0;
    for (const cJSON *k = obj->child; k; k = k->next, j++)
      for (const cJSON *p = obj->child; p != k; p = p->next)
        if (strcmp(p->string, k->string) == 0)
          return j;
    return -1;
  }
  lsim__keyix *v = malloc((size_t)n * sizeof *v);
  if (!v)
    return -2;
  int j = 0;
  for (const cJSON *k = obj->child; k; k = k->next, j++)
    v[j] = (lsim__keyix){k->string, j};
  qsort(v, (size_t)n, sizeof *v, lsim__keyix_cmp);
  int best = -1;
  for (int i = 1; i < n; i++)
    if (strcmp(v[i].key, v[i - 1].key) == 0 &&
        (i < 2 || strcmp(v[i - 1].key, v[i - 2].key) != 0) &&
        (best < 0 || v[i].idx < best))
      best = v[i].idx; /* the second occurrence of its group */
  free(v);
  return best;
}

static lsim_err lsim__walk_node(lsim__walk *w, cJSON *node,
                                const lsim__frame *f) {
  if (cJSON_IsNumber(node)) {
    char *lit = lsim__next_number(w);
    if (!lit)
      return lsim_fail(w->eb, LSIM_E_BUG, "%s: number text not found",
                       w->d->name);
    node->valuestring = lit;
    node->type |= cJSON_IsReference; /* cJSON_Delete leaves lit alone */
    return 0;
  }
  if (!cJSON_IsObject(node) && !cJSON_IsArray(node))
    return 0;
  if (cJSON_IsObject(node)) {
    int dup = lsim__first_dup(node);
    if (dup == -2)
      return lsim_fail(w->eb, LSIM_E_NOMEM, "%s: out of memory checking keys",
                       w->d->name);
    if (dup >= 0) {
      const cJSON *k = node->child;
      for (int j = 0; j < dup; j++)
        k = k->next;
      lsim__frame kf = {f, k->string, dup};
      char p[LSIM_JSON_PATHBUF];
      lsim__frame_path(&kf, p);
      return lsim_json_fail(w->eb, w->codes->dup, w->d->name, p,
                            "duplicate key");
    }
  }
  int i = 0;
  for (cJSON *c = node->child; c; c = c->next, i++) {
    lsim__frame cf = {f, cJSON_IsObject(node) ? c->string : NULL, i};
    lsim_err err = lsim__walk_node(w, c, &cf);
    if (err)
      return err;
  }
  return 0;
}

/* ---- parsing -------------------------------------------------------------- */

static lsim_err lsim__syntax(const lsim_json_doc *d, const lsim_json_codes *c,
                             size_t at, const char *what, lsim_errbuf *eb) {
  int line = 1;
  size_t col = 1;
  if (at > d->len)
    at = d->len;
  for (size_t i = 0; i < at; i++) {
    if (d->text[i] == '\n') {
      line++;
      col = 1;
    } else {
      col++;
    }
  }
  return lsim_json_fail(eb, c->syntax, d->name, "$",
                        "%s near line %d, column %zu", what, line, col);
}

void lsim_json_release(lsim_json_doc *d) {
  if (!d)
    return;
  cJSON_Delete(d->root);
  free(d->text);
  for (int i = 0; i < d->nkept; i++)
    free(d->kept[i]);
  free(d->kept);
  d->kept = NULL;
  d->nkept = 0;
  d->root = NULL;
  d->text = NULL;
  d->len = 0;
}

lsim_err lsim_json_parse_owned(lsim_json_doc *d, char *text, size_t len,
                               const char *name, const lsim_json_codes *codes,
                               lsim_errbuf *eb) {
  static const lsim_json_codes none = {LSIM_E_IO, LSIM_E_JSON_DUP_KEY};
  const lsim_json_codes *c = codes ? codes : &none;
  *d = (lsim_json_doc)LSIM_JSON_DOC_INIT;
  d->name = name ? name : "<json>";
  d->text = text;
  d->len = len;
  lsim_err err = 0;
  if (!text)
    return lsim_fail(eb, LSIM_E_USAGE, "%s: no text given", d->name);
  const char *nul = memchr(text, '\0', len);
  if (len == 0)
    err = lsim_json_fail(eb, c->syntax, d->name, "$", "invalid json: empty text");
  else if (nul)
    err = lsim__syntax(d, c, (size_t)(nul - text), "invalid json: nul byte", eb);
  if (err) {
    lsim_json_release(d);
    return err;
  }
  /* return_parse_end is what cJSON_GetErrorPtr() would say, without the
  ** shared global; the hooks tell out of memory from bad syntax */
  cJSON_Hooks hooks = {lsim__watch_malloc, free};
  lsim__nomem = 0;
  cJSON_InitHooks(&hooks);
  const char *end = NULL;
  d->root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
  cJSON_InitHooks(NULL);
  if (lsim__nomem) {
    err = lsim_fail(eb, LSIM_E_NOMEM, "%s: out of memory parsing %zu bytes",
                    d->name, len);
  } else if (!d->root) {
    err = lsim__syntax(d, c, end ? (size_t)(end - text) : 0, "invalid json",
                       eb);
  } else {
    size_t at = (size_t)(end - text);
    while (at < len && (text[at] == ' ' || text[at] == '\t' ||
                        text[at] == '\n' || text[at] == '\r'))
      at++;
    if (at < len) {
      err = lsim__syntax(d, c, at,
                         "invalid json: text after the top-level value", eb);
    } else {
      lsim__walk w = {d, c, eb, 0};
      lsim__frame top = {NULL, NULL, 0};
      err = lsim__walk_node(&w, d->root, &top);
    }
  }
  if (err)
    lsim_json_release(d);
  return err;
}

lsim_err lsim_json_parse(lsim_json_doc *d, const char *text, size_t len,
                         const char *name, const lsim_json_codes *codes,
                         lsim_errbuf *eb) {
  char *copy = malloc(len + 1);
  if (!copy) {
    *d = (lsim_json_doc)LSIM_JSON_DOC_INIT;
    return lsim_fail(eb, LSIM_E_NOMEM, "%s: out of memory copying %zu bytes",
                     name ? name : "<json>", len);
  }
  if (len)
    memcpy(copy, text, len);
  copy[len] = '\0';
  return lsim_json_parse_owned(d, copy, len, name, codes, eb);
}

lsim_err lsim_json_load(lsim_json_doc *d, const char *path,
                        const lsim_slurp_opts *opts,
                        const lsim_json_codes *codes, lsim_errbuf *eb) {
  char *text = NULL;
  size_t len = 0;
  *d = (lsim_json_doc)LSIM_JSON_DOC_INIT;
  lsim_err err = lsim_slurp(path, opts, &text, &len, eb);
  if (err)
    return err;
  return lsim_json_parse_owned(d, text, len, path, codes, eb);
}

/* ---- editing: --set ------------------------------------------------------ */

typedef struct lsim__step {
  char key[64]; /* "" for an index step */
  int idx;
} lsim__step;

#define LSIM__SET_MAX_STEPS 16

/* Split PATH (without the value) into steps; -1 when it is not well formed. */
static int lsim__set_steps(const char *p, size_t n, lsim__step *st, int *ns) {
  size_t i = 0;
  *ns = 0;
  if (n > 0 && p[0] == '$')
    i = 1;
  else if (n > 0 && p[0] != '.' && p[0] != '[') {
    /* "workers.count": the "$." is implied */
    i = 0;
    goto key;
  }
  while (i < n) {
    if (p[i] == '.') {
      i++;
    key:
      if (*ns == LSIM__SET_MAX_STEPS)
        return -1;
      size_t k = 0;
      while (i < n && (isalnum((unsigned char)p[i]) || p[i] == '_' ||
                       p[i] == '-')) {
        if (k + 1 >= sizeof st[0].key)
          return -1;
        st[*ns].key[k++] = p[i++];
      }
      if (k == 0)
        return -1;
      st[*ns].key[k] = '\0';
      st[(*ns)++].idx = -1;
    } else if (p[i] == '[') {
      i++;
      if (*ns == LSIM__SET_MAX_STEPS || i >= n || !isdigit((unsigned char)p[i]))
        return -1;
      long v = 0;
      while (i < n && isdigit((unsigned char)p[i])) {
        v = v * 10 + (p[i++] - '0');
        if (v > 1000000)
          return -1;
      }
      if (i >= n || p[i] != ']')
        return -1;
      i++;
      st[*ns].key[0] = '\0';
      st[(*ns)++].idx = (int)v;
    } else {
      return -1;
    }
  }
  return *ns > 0 ? 0 : -1;
}

/* A bare word the convenience reads as a string (json.h). */
static int lsim__bare_word(const char *v) {
  if (!(isalpha((unsigned char)v[0]) || v[0] == '_' || v[0] == '/'))
    return 0;
  for (const char *c = v; *c; c++)
    if (!isalnum((unsigned char)*c) && !strchr("_./:+-", *c))
      return 0;
  return 1;
}

lsim_err lsim_json_set(lsim_json_doc *d, cJSON *at, const char *assign,
                       const lsim_json_codes *codes, lsim_errbuf *eb) {
  static const lsim_json_codes none = {LSIM_E_USAGE, LSIM_E_JSON_DUP_KEY};
  const lsim_json_codes *c = codes ? codes : &none;
  const char *eq = strchr(assign, '=');
  char shown[96];
  size_t an = strlen(assign);
  snprintf(shown, sizeof shown, "%.*s%s", an > 80 ? 80 : (int)an, assign,
           an > 80 ? "..." : "");
  for (char *s = shown; *s; s++)
    if ((unsigned char)*s < 0x20 || *s == 0x7f)
      *s = '?';
  if (!eq)
    return lsim_fail(eb, LSIM_E_USAGE,
                     "--set '%s': expected JSONPATH=VALUE", shown);
  lsim__step st[LSIM__SET_MAX_STEPS];
  int ns = 0;
  if (lsim__set_steps(assign, (size_t)(eq - assign), st, &ns))
    return lsim_fail(eb, LSIM_E_USAGE,
                     "--set '%s': the path must read $.key, $.key[N], ... "
                     "(keys of [A-Za-z0-9_-], at most %d steps)",
                     shown, LSIM__SET_MAX_STEPS);
  /* the value: JSON, or a bare word taken as a string */
  const char *val = eq + 1;
  char name[128];
  snprintf(name, sizeof name, "--set %.*s", (int)(eq - assign) > 96 ? 96
           : (int)(eq - assign), assign);
  lsim_json_doc v = LSIM_JSON_DOC_INIT;
  lsim_errbuf veb = LSIM_ERRBUF_INIT;
  const lsim_json_codes vc = {LSIM_E_USAGE, c->dup};
  lsim_err rc = lsim_json_parse(&v, val, strlen(val), name, &vc, &veb);
  if (rc == LSIM_E_USAGE && lsim__bare_word(val)) {
    cJSON *s = cJSON_CreateString(val);
    if (!s)
      return lsim_fail(eb, LSIM_E_NOMEM, "--set: out of memory");
    v.root = s;
    rc = 0;
  } else if (rc == LSIM_E_USAGE) {
    return lsim_fail(eb, LSIM_E_USAGE,
                     "--set '%s': the value is not JSON (write a string in "
                     "double quotes: --set '$.key=\"text\"')",
                     shown);
  } else if (rc) {
    if (eb)
      *eb = veb;
    return rc;
  }
  /* walk to the parent of the last step; nothing is changed until the
  ** whole path is known to be walkable, except empty objects created on
  ** the way, which are removed again on failure */
  cJSON *node = at ? at : d->root, *made = NULL, *made_in = NULL;
  char where[LSIM_JSON_PATHBUF] = "$", why[2 * LSIM_JSON_PATHBUF + 128] = "";
  for (int i = 0; i < ns && !why[0]; i++) {
    char next[LSIM_JSON_PATHBUF];
    int lastp = i == ns - 1;
    if (st[i].key[0]) {
      lsim_json_key_path(next, where, st[i].key);
      if (!cJSON_IsObject(node)) {
        snprintf(why, sizeof why, "%s is %s %s, not an object", where,
                 cJSON_IsArray(node) ? "an" : "a", lsim_json_type_name(node));
        break;
      }
      if (lastp)
        break;
      cJSON *ch = cJSON_GetObjectItemCaseSensitive(node, st[i].key);
      if (!ch && !st[i + 1].key[0]) {
        snprintf(why, sizeof why,
                 "%s does not exist (an index needs an array that exists)",
                 next);
        break;
      }
      if (!ch) { /* a missing object on the way: validation decides */
        ch = cJSON_CreateObject();
        if (!ch || !cJSON_AddItemToObject(node, st[i].key, ch)) {
          cJSON_Delete(ch);
          if (made)
            cJSON_Delete(cJSON_DetachItemViaPointer(made_in, made));
          lsim_json_release(&v);
          return lsim_fail(eb, LSIM_E_NOMEM, "--set: out of memory");
        }
        if (!made) {
          made = ch;
          made_in = node;
        }
      }
      node = ch;
    } else {
      lsim_json_idx_path(next, where, st[i].idx);
      if (!cJSON_IsArray(node)) {
        snprintf(why, sizeof why, "%s is %s %s, not an array", where,
                 cJSON_IsObject(node) ? "an" : "a", lsim_json_type_name(node));
        break;
      }
      int cnt = lsim_json_count(node);
      if (st[i].idx > cnt || (!lastp && st[i].idx == cnt)) {
        snprintf(why, sizeof why, "%s has %d elements: %s does not exist%s",
                 where, cnt, next,
                 lastp ? " (an index may name the next one, appended)" : "");
        break;
      }
      if (lastp)
        break;
      node = cJSON_GetArrayItem(node, st[i].idx);
    }
    memcpy(where, next, sizeof where);
  }
  const lsim__step *last = &st[ns - 1];
  if (why[0]) {
    if (made)
      cJSON_Delete(cJSON_DetachItemViaPointer(made_in, made));
    lsim_json_release(&v);
    return lsim_fail(eb, LSIM_E_USAGE, "--set '%s': %s", shown, why);
  }
  /* adopt the value's text (its numbers point into it) */
  char **kept = realloc(d->kept, (size_t)(d->nkept + 1) * sizeof *kept);
  if (!kept) {
    if (made)
      cJSON_Delete(cJSON_DetachItemViaPointer(made_in, made));
    lsim_json_release(&v);
    return lsim_fail(eb, LSIM_E_NOMEM, "--set: out of memory");
  }
  d->kept = kept;
  cJSON *item = v.root;
  int ok;
  if (last->key[0]) {
    if (cJSON_GetObjectItemCaseSensitive(node, last->key))
      ok = cJSON_ReplaceItemInObjectCaseSensitive(node, last->key, item);
    else
      ok = cJSON_AddItemToObject(node, last->key, item);
  } else if (last->idx < lsim_json_count(node)) {
    ok = cJSON_ReplaceItemInArray(node, last->idx, item);
  } else {
    ok = cJSON_AddItemToArray(node, item);
  }
  if (!ok) {
    if (made)
      cJSON_Delete(cJSON_DetachItemViaPointer(made_in, made));
    lsim_json_release(&v);
    return lsim_fail(eb, LSIM_E_NOMEM, "--set: out of memory");
  }
  d->kept[d->nkept++] = v.text; /* NULL for a bare word: harmless */
  free(v.kept);                 /* a fresh parse adopted nothing */
  return 0;
}
