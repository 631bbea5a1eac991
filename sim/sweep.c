/*
** sweep.c: the grid of a sweep, its cells and the merge (contract in
** sweep.h, format in docs/SWEEP.md).
**
** A cell is never more than an ordinary replay: its scenario is the base
** file with the cell's --set edits (the command line's first, then one per
** axis, in axis order), its seed is set like --seed, and its run options
** (sim/runid.h) are exactly those `lorasim replay` records for the same
** command line, so the cell's database can be resumed, audited and
** compared like any other.
**
** The merge reads each done cell's figures (runs_summary, and
** tenant_summary when the database has one) and streams them out one
** combination at a time: the cells of one combination are consecutive
** (the seed varies fastest), so memory holds one combination's rows,
** whatever the size of the grid.
*/
#include "sweep.h"

#include <errno.h>
#include <math.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "escape.h"
#include "json.h"
#include "outfile.h"
#include "replay.h"
#include "resume.h"
#include "runid.h"
#include "scenario.h"

#define LSIM__GRID_MAX_BYTES ((size_t)16 << 20)
#define LSIM__NAME 64

/* One value of an axis: the JSON text given to --set, and how the merged
** tables show it. */
enum { LSIM__V_INT, LSIM__V_REAL, LSIM__V_TEXT, LSIM__V_JSON };
typedef struct lsim__val {
  char *json;   /* "512", "\"fcfs\"", "{\"a\":1}" */
  int type;     /* LSIM__V_* */
  int64_t iv;   /* LSIM__V_INT */
  double dv;    /* LSIM__V_REAL */
  char *text;   /* LSIM__V_TEXT: the string; LSIM__V_JSON: json */
} lsim__val;

typedef struct lsim__axis {
  char name[LSIM__NAME];     /* the column of the merged tables */
  char path[LSIM_JSON_PATHBUF]; /* normalised: starts with "$" */
  int nvals;
  lsim__val *vals;
} lsim__axis;

/* The identity of the last combination cell_done checked (its inputs are
** digested once for all its seeds). */
typedef struct lsim__cache {
  int64_t combo; /* -1: empty */
  lsim_runid id;
} lsim__cache;

struct lsim_sweep {
  char grid[LSIM_PATH_MAX];   /* the grid file as given */
  char grid_sha[65];
  char out[LSIM_PATH_MAX];    /* the output directory */
  char base[LSIM_PATH_MAX];   /* the scenario file cells replay */
  int inline_base;            /* 1: base is $.base of the grid file */
  char name[LSIM__NAME];
  int nsets;                  /* the command line's --set edits */
  char **sets;
  int naxes;
  lsim__axis axes[LSIM_SWEEP_MAX_AXES];
  int zip;
  int nseeds;
  int seed_count;             /* 1: seeds are the scenario's seed + i */
  uint64_t *seeds;            /* [nseeds] when listed */
  uint64_t *combo_seed;       /* [ncombos] the scenario seed of each */
  int64_t ncombos, ncells;
  int width;                  /* digits of a cell's file name */
  volatile sig_atomic_t *stop;
  lsim__cache *cache;
};

/* ---- small helpers --------------------------------------------------------- */

static char *lsim__dup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d)
    memcpy(d, s, n);
  return d;
}

/* A growing string. */
typedef struct lsim__buf {
  char *p;
  size_t n, cap;
  int oom;
} lsim__buf;

static void lsim__put(lsim__buf *b, const char *s, size_t n) {
  if (b->oom)
    return;
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->n + n + 1)
      cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
      b->oom = 1;
      return;
    }
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = '\0';
}

static void lsim__puts(lsim__buf *b, const char *s) { lsim__put(b, s, strlen(s)); }

/* A JSON string literal of s. */
static void lsim__put_jstr(lsim__buf *b, const char *s) {
  lsim__puts(b, "\"");
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    char esc[8];
    if (ch == '"' || ch == '\\') {
      esc[0] = '\\';
      esc[1] = (char)ch;
      lsim__put(b, esc, 2);
    } else if (ch < 0x20) {
      snprintf(esc, sizeof esc, "\\u%04x", ch);
      lsim__puts(b, esc);
    } else {
      lsim__put(b, s, 1);
    }
  }
  lsim__puts(b, "\"");
}

/* The JSON text of v, numbers as written in the grid (sim/json.h keeps
** each number's text, so 9007199254740993 stays exact). */
static void lsim__put_json(lsim__buf *b, const cJSON *v) {
  if (cJSON_IsNumber(v)) {
    const char *t = lsim_json_num_text(v);
    char tmp[40];
    if (!t) {
      snprintf(tmp, sizeof tmp, "%.17g", v->valuedouble);
      t = tmp;
    }
    lsim__puts(b, t);
  } else if (cJSON_IsString(v)) {
    lsim__put_jstr(b, v->valuestring);
  } else if (cJSON_IsBool(v)) {
    lsim__puts(b, cJSON_IsTrue(v) ? "true" : "false");
  } else if (cJSON_IsNull(v)) {
    lsim__puts(b, "null");
  } else {
    int obj = cJSON_IsObject(v);
    lsim__puts(b, obj ? "{" : "[");
    for (const cJSON *c = v->child; c; c = c->next) {
      if (c != v->child)
        lsim__puts(b, ",");
      if (obj) {
        lsim__put_jstr(b, c->string);
        lsim__puts(b, ":");
      }
      lsim__put_json(b, c);
    }
    lsim__puts(b, obj ? "}" : "]");
  }
}

/* The shortest text that reads back as v. */
static void lsim__num(char out[40], double v) {
  for (int prec = 15; prec <= 17; prec++) {
    snprintf(out, 40, "%.*g", prec, v);
    if (strtod(out, NULL) == v)
      return;
  }
}

/* ---- the grid file -------------------------------------------------------- */

typedef struct lsim__gctx {
  const char *file;
  lsim_errbuf *eb;
} lsim__gctx;

static lsim_err lsim__gbad(const lsim__gctx *g, lsim_err code,
                           const char *path, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static lsim_err lsim__gbad(const lsim__gctx *g, lsim_err code,
                           const char *path, const char *fmt, ...) {
  char what[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return lsim_json_fail(g->eb, code, g->file, path, "%s", what);
}

/* Unknown keys of obj (keys[] NULL-terminated) are E_SCN_UNKNOWN_KEY. */
static lsim_err lsim__gkeys(const lsim__gctx *g, const cJSON *obj,
                            const char *path, const char *const *keys) {
  for (const cJSON *c = obj->child; c; c = c->next) {
    int ok = 0;
    for (int i = 0; keys[i] && !ok; i++)
      ok = strcmp(c->string, keys[i]) == 0;
    if (!ok) {
      char kp[LSIM_JSON_PATHBUF];
      lsim_json_key_path(kp, path, c->string);
      char known[256] = "";
      for (int i = 0; keys[i]; i++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s",
                 i ? ", " : "", keys[i]);
      return lsim__gbad(g, LSIM_E_SCN_UNKNOWN_KEY, kp,
                        "unknown key (known: %s)", known);
    }
  }
  return 0;
}

/* A name made of [A-Za-z0-9_], not starting with a digit. */
static int lsim__ident(const char *s) {
  if (!*s || (*s >= '0' && *s <= '9'))
    return 0;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
          (*s >= '0' && *s <= '9') || *s == '_'))
      return 0;
  return 1;
}

/* Column names of the merged tables an axis may not take. */
static const char *const lsim__reserved[] = {
    "cell", "combo", "seed", "tenant", "tenant_name", "metric", "value", "n",
    "mean", "sd", "ci95_half", "ci95_lo", "ci95_hi", "db", "done", NULL};

static lsim_err lsim__val_from(lsim__val *v, const cJSON *j) {
  lsim__buf b = {0};
  lsim__put_json(&b, j);
  if (b.oom || !b.p) {
    free(b.p);
    return LSIM_E_NOMEM;
  }
  v->json = b.p;
  int64_t iv;
  if (cJSON_IsNumber(j) && lsim_json_int(j, &iv) == LSIM_JSON_INT_OK) {
    v->type = LSIM__V_INT;
    v->iv = iv;
  } else if (cJSON_IsNumber(j)) {
    v->type = LSIM__V_REAL;
    v->dv = j->valuedouble;
  } else if (cJSON_IsString(j)) {
    v->type = LSIM__V_TEXT;
    if (!(v->text = lsim__dup(j->valuestring)))
      return LSIM_E_NOMEM;
  } else {
    v->type = LSIM__V_JSON;
  }
  return 0;
}

static lsim_err lsim__val_num(lsim__val *v, int is_int, int64_t iv,
                              double dv) {
  char t[40];
  if (is_int) {
    snprintf(t, sizeof t, "%lld", (long long)iv);
    v->type = LSIM__V_INT;
    v->iv = iv;
  } else {
    lsim__num(t, dv);
    if (!strpbrk(t, ".eEn")) /* JSON needs no marker, but keep it a real */
      strcat(t, ".0");
    v->type = LSIM__V_REAL;
    v->dv = dv;
  }
  return (v->json = lsim__dup(t)) ? 0 : LSIM_E_NOMEM;
}

/* $.axes[i].range: {from, to, step}, to included when reached. */
static lsim_err lsim__range(const lsim__gctx *g, const cJSON *r,
                            const char *rp, lsim__axis *ax) {
  static const char *const keys[] = {"from", "to", "step", NULL};
  lsim_err err;
  if (!cJSON_IsObject(r))
    return lsim__gbad(g, LSIM_E_SCN_TYPE, rp, "must be an object (got %s)",
                      lsim_json_type_name(r));
  if ((err = lsim__gkeys(g, r, rp, keys)))
    return err;
  const cJSON *v[3];
  int64_t iv[3];
  int all_int = 1;
  for (int k = 0; k < 3; k++) {
    char kp[LSIM_JSON_PATHBUF];
    lsim_json_key_path(kp, rp, keys[k]);
    v[k] = lsim_json_get(r, keys[k]);
    if (!v[k])
      return lsim__gbad(g, LSIM_E_SCN_MISSING, kp, "required key is missing");
    if (!cJSON_IsNumber(v[k]) || !isfinite(v[k]->valuedouble))
      return lsim__gbad(g, LSIM_E_SCN_TYPE, kp,
                        "must be a finite number (got %s)",
                        lsim_json_type_name(v[k]));
    if (lsim_json_int(v[k], &iv[k]) != LSIM_JSON_INT_OK ||
        iv[k] > (INT64_C(1) << 53) || iv[k] < -(INT64_C(1) << 53))
      all_int = 0;
  }
  char sp[LSIM_JSON_PATHBUF];
  lsim_json_key_path(sp, rp, "step");
  double from = v[0]->valuedouble, to = v[1]->valuedouble,
         step = v[2]->valuedouble;
  if (step == 0 || (to - from) / step < 0)
    return lsim__gbad(g, LSIM_E_SCN_RANGE, sp,
                      "must be non-zero and lead from 'from' to 'to'");
  double span = (to - from) / step;
  /* a real range counts a 'to' it misses by rounding only (1e-9 steps) */
  double cnt = all_int ? floor(span) + 1 : floor(span + 1e-9) + 1;
  if (!(cnt <= LSIM_SWEEP_MAX_VALUES))
    return lsim__gbad(g, LSIM_E_SCN_RANGE, sp,
                      "gives %.0f values; at most %d per axis", cnt,
                      LSIM_SWEEP_MAX_VALUES);
  ax->nvals = (int)cnt;
  ax->vals = calloc((size_t)ax->nvals, sizeof *ax->vals);
  if (!ax->vals)
    return lsim_fail(g->eb, LSIM_E_NOMEM, "out of memory");
  for (int i = 0; i < ax->nvals; i++)
    if (lsim__val_num(&ax->vals[i], all_int, iv[0] + (int64_t)i * iv[2],
                      from + (double)i * step))
      return lsim_fail(g->eb, LSIM_E_NOMEM, "out of memory");
  return 0;
}

/* The default column name of an axis: its path's last key. */
static void lsim__default_name(const char *path, char out[LSIM__NAME]) {
  const char *p = strrchr(path, '.');
  p = p ? p + 1 : path;
  size_t i = 0;
  for (; p[i] && p[i] != '[' && i < LSIM__NAME - 1; i++)
    out[i] = p[i] == '-' ? '_' : p[i];
  out[i] = '\0';
}

static lsim_err lsim__axes(const lsim__gctx *g, const cJSON *arr,
                           lsim_sweep *s) {
  static const char *const keys[] = {"path", "name", "values", "range", NULL};
  lsim_err err;
  if (!cJSON_IsArray(arr))
    return lsim__gbad(g, LSIM_E_SCN_TYPE, "$.axes",
                      "must be an array (got %s)", lsim_json_type_name(arr));
  int n = lsim_json_count(arr);
  if (n > LSIM_SWEEP_MAX_AXES)
    return lsim__gbad(g, LSIM_E_SCN_RANGE, "$.axes",
                      "at most %d axes (got %d)", LSIM_SWEEP_MAX_AXES, n);
  int i = 0;
  for (const cJSON *a = arr->child; a; a = a->next, i++) {
    char ap[LSIM_JSON_PATHBUF], kp[LSIM_JSON_PATHBUF];
    lsim_json_idx_path(ap, "$.axes", i);
    if (!cJSON_IsObject(a))
      return lsim__gbad(g, LSIM_E_SCN_TYPE, ap, "must be an object (got %s)",
                        lsim_json_type_name(a));
    if ((err = lsim__gkeys(g, a, ap, keys)))
      return err;
    lsim__axis *ax = &s->axes[s->naxes++];
    const cJSON *p = lsim_json_get(a, "path");
    lsim_json_key_path(kp, ap, "path");
    if (!p)
      return lsim__gbad(g, LSIM_E_SCN_MISSING, kp, "required key is missing");
    if (!cJSON_IsString(p) || !p->valuestring[0])
      return lsim__gbad(g, LSIM_E_SCN_TYPE, kp,
                        "must be a JSON path such as \"$.workers.pool_pages\"");
    if (strlen(p->valuestring) + 3 > sizeof ax->path)
      return lsim__gbad(g, LSIM_E_SCN_RANGE, kp, "path too long");
    snprintf(ax->path, sizeof ax->path, "%s%s",
             p->valuestring[0] == '$' ? "" : "$.", p->valuestring);
    const cJSON *nm = lsim_json_get(a, "name");
    lsim_json_key_path(kp, ap, "name");
    if (nm && (!cJSON_IsString(nm) || !lsim__ident(nm->valuestring) ||
               strlen(nm->valuestring) >= LSIM__NAME))
      return lsim__gbad(g, LSIM_E_SCN_TYPE, kp,
                        "must be a name of [A-Za-z0-9_] not starting with a "
                        "digit, at most %d bytes",
                        LSIM__NAME - 1);
    if (nm)
      snprintf(ax->name, sizeof ax->name, "%s", nm->valuestring);
    else
      lsim__default_name(ax->path, ax->name);
    if (!lsim__ident(ax->name))
      return lsim__gbad(g, LSIM_E_SCN_MISSING, kp,
                        "the path gives no column name ('%s'): name the axis",
                        ax->name);
    for (int r = 0; lsim__reserved[r]; r++)
      if (strcmp(ax->name, lsim__reserved[r]) == 0)
        return lsim__gbad(g, LSIM_E_SCN_CONFLICT, kp,
                          "'%s' is a column of the merged tables: name the "
                          "axis otherwise",
                          ax->name);
    for (int k = 0; k < s->naxes - 1; k++) {
      if (strcmp(s->axes[k].name, ax->name) == 0)
        return lsim__gbad(g, LSIM_E_SCN_CONFLICT, kp,
                          "axis %d has the column name '%s' too: name them", k,
                          ax->name);
      if (strcmp(s->axes[k].path, ax->path) == 0)
        return lsim__gbad(g, LSIM_E_SCN_CONFLICT, ap,
                          "axis %d sets the same path %s", k, ax->path);
    }
    const cJSON *vals = lsim_json_get(a, "values"),
                *range = lsim_json_get(a, "range");
    if (!!vals == !!range)
      return lsim__gbad(g, vals ? LSIM_E_SCN_CONFLICT : LSIM_E_SCN_MISSING, ap,
                        "give exactly one of 'values' and 'range'");
    if (range) {
      lsim_json_key_path(kp, ap, "range");
      if ((err = lsim__range(g, range, kp, ax)))
        return err;
      continue;
    }
    lsim_json_key_path(kp, ap, "values");
    if (!cJSON_IsArray(vals))
      return lsim__gbad(g, LSIM_E_SCN_TYPE, kp, "must be an array (got %s)",
                        lsim_json_type_name(vals));
    ax->nvals = lsim_json_count(vals);
    if (ax->nvals == 0)
      return lsim__gbad(g, LSIM_E_SCN_EMPTY, kp, "must not be empty");
    if (ax->nvals > LSIM_SWEEP_MAX_VALUES)
      return lsim__gbad(g, LSIM_E_SCN_RANGE, kp, "at most %d values (got %d)",
                        LSIM_SWEEP_MAX_VALUES, ax->nvals);
    ax->vals = calloc((size_t)ax->nvals, sizeof *ax->vals);
    if (!ax->vals)
      return lsim_fail(g->eb, LSIM_E_NOMEM, "out of memory");
    int k = 0;
    for (const cJSON *v = vals->child; v; v = v->next, k++)
      if (lsim__val_from(&ax->vals[k], v))
        return lsim_fail(g->eb, LSIM_E_NOMEM, "out of memory");
  }
  return 0;
}

static lsim_err lsim__seeds(const lsim__gctx *g, const cJSON *v,
                            lsim_sweep *s) {
  int64_t x;
  s->nseeds = 1;
  s->seed_count = 1;
  if (!v)
    return 0;
  if (cJSON_IsNumber(v)) {
    if (lsim_json_int(v, &x) != LSIM_JSON_INT_OK)
      return lsim__gbad(g, LSIM_E_SCN_TYPE, "$.seeds",
                        "must be a count (an integer) or a list of seeds");
    if (x < 1 || x > 10000)
      return lsim__gbad(g, LSIM_E_SCN_RANGE, "$.seeds",
                        "a count must be in [1, 10000] (got %lld)",
                        (long long)x);
    s->nseeds = (int)x;
    return 0;
  }
  if (!cJSON_IsArray(v))
    return lsim__gbad(g, LSIM_E_SCN_TYPE, "$.seeds",
                      "must be a count or a list of seeds (got %s)",
                      lsim_json_type_name(v));
  int n = lsim_json_count(v);
  if (n == 0)
    return lsim__gbad(g, LSIM_E_SCN_EMPTY, "$.seeds", "must not be empty");
  if (n > 10000)
    return lsim__gbad(g, LSIM_E_SCN_RANGE, "$.seeds",
                      "at most 10000 seeds (got %d)", n);
  s->seed_count = 0;
  s->nseeds = n;
  s->seeds = calloc((size_t)n, sizeof *s->seeds);
  if (!s->seeds)
    return lsim_fail(g->eb, LSIM_E_NOMEM, "out of memory");
  int i = 0;
  for (const cJSON *c = v->child; c; c = c->next, i++) {
    char ip[LSIM_JSON_PATHBUF];
    lsim_json_idx_path(ip, "$.seeds", i);
    lsim_json_int_st st = lsim_json_int(c, &x);
    if (st == LSIM_JSON_INT_NOT_NUMBER || st == LSIM_JSON_INT_FRACTION)
      return lsim__gbad(g, LSIM_E_SCN_TYPE, ip,
                        "must be an integer in [0, 2^53]");
    if (st != LSIM_JSON_INT_OK || x < 0 || x > (INT64_C(1) << 53))
      return lsim__gbad(g, LSIM_E_SCN_RANGE, ip,
                        "must be an integer in [0, 2^53]");
    for (int k = 0; k < i; k++)
      if (s->seeds[k] == (uint64_t)x)
        return lsim__gbad(g, LSIM_E_SCN_DUP, ip, "seed %lld given twice",
                          (long long)x);
    s->seeds[i] = (uint64_t)x;
  }
  return 0;
}

static lsim_err lsim__grid(const lsim__gctx *g, const cJSON *root,
                           lsim_sweep *s) {
  static const char *const keys[] = {"name", "base", "axes", "combine",
                                     "seeds", NULL};
  lsim_err err;
  if (!cJSON_IsObject(root))
    return lsim__gbad(g, LSIM_E_SCN_TYPE, "$", "must be an object (got %s)",
                      lsim_json_type_name(root));
  if ((err = lsim__gkeys(g, root, "$", keys)))
    return err;
  const cJSON *nm = lsim_json_get(root, "name");
  if (nm && (!cJSON_IsString(nm) || !nm->valuestring[0] ||
             strlen(nm->valuestring) >= LSIM__NAME ||
             strspn(nm->valuestring,
                    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                    "0123456789._-") != strlen(nm->valuestring)))
    return lsim__gbad(g, LSIM_E_SCN_TYPE, "$.name",
                      "must be 1 to %d bytes of [A-Za-z0-9._-]",
                      LSIM__NAME - 1);
  if (nm) {
    snprintf(s->name, sizeof s->name, "%s", nm->valuestring);
  } else { /* the grid file's name without its directory and .json */
    const char *b = strrchr(s->grid, '/');
    b = b ? b + 1 : s->grid;
    size_t i = 0;
    for (; b[i] && i < LSIM__NAME - 1; i++)
      s->name[i] = strchr("/\\ \t\n", b[i]) || (unsigned char)b[i] < 0x20
                       ? '_'
                       : b[i];
    s->name[i] = '\0';
    char *dot = strrchr(s->name, '.');
    if (dot && dot != s->name)
      *dot = '\0';
  }
  const cJSON *base = lsim_json_get(root, "base");
  if (!base)
    return lsim__gbad(g, LSIM_E_SCN_MISSING, "$.base",
                      "required key is missing");
  if (cJSON_IsObject(base)) {
    s->inline_base = 1;
    snprintf(s->base, sizeof s->base, "%s", s->grid);
  } else if (cJSON_IsString(base) && base->valuestring[0]) {
    const char *b = base->valuestring, *slash = strrchr(s->grid, '/');
    int n;
    if (b[0] == '/' || !slash)
      n = snprintf(s->base, sizeof s->base, "%s", b);
    else
      n = snprintf(s->base, sizeof s->base, "%.*s/%s",
                   (int)(slash - s->grid), s->grid, b);
    if (n < 0 || n >= (int)sizeof s->base)
      return lsim__gbad(g, LSIM_E_SCN_RANGE, "$.base", "path too long");
  } else {
    return lsim__gbad(g, LSIM_E_SCN_TYPE, "$.base",
                      "must be a scenario path (relative to the grid file) "
                      "or a scenario object (got %s)",
                      lsim_json_type_name(base));
  }
  const cJSON *axes = lsim_json_get(root, "axes");
  if (!axes)
    return lsim__gbad(g, LSIM_E_SCN_MISSING, "$.axes",
                      "required key is missing");
  if ((err = lsim__axes(g, axes, s)))
    return err;
  const cJSON *cb = lsim_json_get(root, "combine");
  if (cb && (!cJSON_IsString(cb) || (strcmp(cb->valuestring, "product") &&
                                     strcmp(cb->valuestring, "zip"))))
    return lsim__gbad(g, cJSON_IsString(cb) ? LSIM_E_SCN_RANGE
                                            : LSIM_E_SCN_TYPE,
                      "$.combine", "must be \"product\" or \"zip\"");
  s->zip = cb && strcmp(cb->valuestring, "zip") == 0;
  if ((err = lsim__seeds(g, lsim_json_get(root, "seeds"), s)))
    return err;
  /* the number of combinations and cells, bounded */
  double combos = 1;
  for (int i = 0; i < s->naxes; i++) {
    if (s->zip && s->axes[i].nvals != s->axes[0].nvals) {
      char ap[LSIM_JSON_PATHBUF];
      lsim_json_idx_path(ap, "$.axes", i);
      return lsim__gbad(g, LSIM_E_SCN_CONFLICT, ap,
                        "\"zip\" needs axes of one length: %d values here, "
                        "%d in $.axes[0]",
                        s->axes[i].nvals, s->axes[0].nvals);
    }
    if (!s->zip)
      combos *= s->axes[i].nvals;
  }
  if (s->zip && s->naxes)
    combos = s->axes[0].nvals;
  if (combos * s->nseeds > LSIM_SWEEP_MAX_CELLS)
    return lsim__gbad(g, LSIM_E_SCN_RANGE, "$.axes",
                      "the grid has %.0f cells; at most %d", combos * s->nseeds,
                      LSIM_SWEEP_MAX_CELLS);
  s->ncombos = (int64_t)combos;
  s->ncells = s->ncombos * s->nseeds;
  s->width = 4;
  for (int64_t m = 10000; s->ncells > m; m *= 10)
    s->width++;
  return 0;
}

/* ---- cells ------------------------------------------------------------------ */

/* Open a finished cell database for reading without touching it: a
** read-only connection to a WAL database would leave -wal and -shm files
** behind, so the file is opened immutable (a cell's database only appears
** by rename once its run ended; a WAL left by a crash is ignored, which
** reads the run as unfinished). */
static int lsim__open_ro(const char *path, sqlite3 **h) {
  lsim__buf u = {0};
  lsim__puts(&u, "file:");
  for (const char *p = path; *p; p++) {
    unsigned char ch = (unsigned char)*p;
    char e[4];
    if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
        (ch >= '0' && ch <= '9') || strchr("/-._~", ch)) {
      lsim__put(&u, p, 1);
    } else {
      snprintf(e, sizeof e, "%%%02X", ch);
      lsim__puts(&u, e);
    }
  }
  lsim__puts(&u, "?immutable=1");
  int rc = u.oom ? SQLITE_NOMEM
                 : sqlite3_open_v2(u.p, h, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI,
                                   NULL);
  free(u.p);
  return rc;
}

int64_t lsim_sweep_ncells(const lsim_sweep *s) { return s->ncells; }
const char *lsim_sweep_out_dir(const lsim_sweep *s) { return s->out; }

void lsim_sweep_set_stop(lsim_sweep *s, volatile sig_atomic_t *stop) {
  s->stop = stop;
}

/* The value index of axis a in combination k. */
static int lsim__vi(const lsim_sweep *s, int64_t k, int a) {
  if (s->zip)
    return (int)k;
  for (int i = s->naxes - 1; i > a; i--)
    k /= s->axes[i].nvals;
  return (int)(k % s->axes[a].nvals);
}

static uint64_t lsim__seed(const lsim_sweep *s, int64_t cell) {
  int64_t k = cell / s->nseeds, j = cell % s->nseeds;
  return s->seed_count ? s->combo_seed[k] + (uint64_t)j : s->seeds[j];
}

/* The --set edits of combination k: the command line's, then the axes'
** ("PATH=VALUE", malloc'd into sets[]); returns the count or -1. */
static int lsim__combo_sets(const lsim_sweep *s, int64_t k, char **sets) {
  int n = 0;
  for (int i = 0; i < s->nsets; i++)
    if (!(sets[n++] = lsim__dup(s->sets[i])))
      goto oom;
  for (int a = 0; a < s->naxes; a++) {
    const lsim__axis *ax = &s->axes[a];
    const char *v = ax->vals[lsim__vi(s, k, a)].json;
    size_t len = strlen(ax->path) + strlen(v) + 2;
    if (!(sets[n] = malloc(len)))
      goto oom;
    snprintf(sets[n++], len, "%s=%s", ax->path, v);
  }
  return n;
oom:
  while (n > 0)
    free(sets[--n]);
  return -1;
}

static void lsim__free_sets(char **sets, int n) {
  for (int i = 0; i < n; i++)
    free(sets[i]);
}

/* Load combination k's scenario into *sc (seed: the scenario's). */
static lsim_err lsim__combo_scenario(const lsim_sweep *s, int64_t k,
                                     lsim_scenario *sc, char **sets, int *nsets,
                                     lsim_errbuf *eb) {
  *nsets = lsim__combo_sets(s, k, sets);
  if (*nsets < 0) {
    *nsets = 0;
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  }
  lsim_scenario_src src = {s->inline_base ? "base" : NULL, *nsets,
                           (const char *const *)sets};
  return lsim_scenario_load_src(sc, s->base, &src, eb);
}

void lsim_sweep_cell_path(const lsim_sweep *s, int64_t cell, char *out,
                          size_t n) {
  snprintf(out, n, "%s/cells/%0*lld.db", s->out, s->width, (long long)cell);
}

void lsim_sweep_cell_label(const lsim_sweep *s, int64_t cell, char *out,
                           size_t n) {
  lsim__buf b = {0};
  char t[96];
  snprintf(t, sizeof t, "cell %0*lld seed %llu", s->width, (long long)cell,
           (unsigned long long)lsim__seed(s, cell));
  lsim__puts(&b, t);
  for (int a = 0; a < s->naxes; a++) {
    lsim__puts(&b, " ");
    lsim__puts(&b, s->axes[a].name);
    lsim__puts(&b, "=");
    lsim__puts(&b, s->axes[a].vals[lsim__vi(s, cell / s->nseeds, a)].json);
  }
  lsim_console_str(out, n, b.oom || !b.p ? "cell" : b.p);
  free(b.p);
}

/* The run options of a cell, as `lorasim replay` records them for the same
** command line (sim/main.c): seed, the --set edits, no-plots; a cell of an
** inline base names its member first.  names[] and seedtxt hold the
** strings; returns the number of pairs. */
static int lsim__cell_opts(const lsim_sweep *s, int64_t cell, char **sets,
                           int nsets, const char **ropts,
                           char names[][16], char seedtxt[32]) {
  int nr = 0;
  snprintf(seedtxt, 32, "%llu", (unsigned long long)lsim__seed(s, cell));
  if (s->inline_base) {
    ropts[nr++] = "scenario-member";
    ropts[nr++] = "base";
  }
  ropts[nr++] = "seed";
  ropts[nr++] = seedtxt;
  for (int i = 0; i < nsets; i++) {
    lsim_runid_set_name(i, names[i]);
    ropts[nr++] = names[i];
    ropts[nr++] = sets[i];
  }
  ropts[nr++] = "no-plots";
  ropts[nr++] = "1";
  ropts[nr] = NULL;
  return nr / 2;
}

lsim_err lsim_sweep_run_cell(lsim_sweep *s, int64_t cell, lsim_errbuf *eb) {
  if (cell < 0 || cell >= s->ncells)
    return lsim_fail(eb, LSIM_E_USAGE, "cell %lld: the grid has cells 0 to "
                     "%lld", (long long)cell, (long long)s->ncells - 1);
  lsim_scenario *sc = malloc(sizeof *sc);
  if (!sc)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  char *sets[LSIM_SCENARIO_MAX_SETS];
  int nsets = 0;
  lsim_err rc = lsim__combo_scenario(s, cell / s->nseeds, sc, sets, &nsets, eb);
  if (rc) {
    lsim__free_sets(sets, nsets);
    free(sc);
    return rc;
  }
  sc->seed = lsim__seed(s, cell);
  const char *ropts[2 * (LSIM_SCENARIO_MAX_SETS + 4) + 1];
  char names[LSIM_SCENARIO_MAX_SETS][16], seedtxt[32];
  lsim__cell_opts(s, cell, sets, nsets, ropts, names, seedtxt);

  char final[LSIM_PATH_MAX + 64], tmp[LSIM_PATH_MAX + 80];
  lsim_sweep_cell_path(s, cell, final, sizeof final);
  snprintf(tmp, sizeof tmp, "%s.part", final);
  /* what started it: the replay that gives the same rows, or the cell */
  char cmd[1024];
  lsim__buf b = {0};
  if (s->inline_base) {
    lsim__puts(&b, "lorasim sweep ");
    lsim__puts(&b, s->grid);
    snprintf(cmd, sizeof cmd, " --cell %lld", (long long)cell);
    lsim__puts(&b, cmd);
  } else {
    lsim__puts(&b, "lorasim replay ");
    lsim__puts(&b, s->base);
    lsim__puts(&b, " --seed ");
    lsim__puts(&b, seedtxt);
    for (int i = 0; i < nsets; i++) {
      lsim__puts(&b, " --set ");
      lsim__puts(&b, sets[i]);
    }
    lsim__puts(&b, " --no-plots --db ");
    lsim__puts(&b, final);
  }
  snprintf(cmd, sizeof cmd, "%s", b.oom || !b.p ? "lorasim sweep" : b.p);
  free(b.p);

  lsim_outlock lock = LSIM_OUTLOCK_INIT;
  rc = lsim_out_check(final, eb);
  if (!rc)
    rc = lsim_out_lock(&lock, final, eb);
  if (!rc) {
    lsim_replay_opts o = {.db_path = tmp,
                          .final_path = final,
                          .command_line = cmd,
                          .progress = 0,
                          .plots = 0,
                          .report = NULL,
                          .stop = s->stop,
                          .lock_held = 1,
                          .run_options = ropts};
    lsim_summary sum;
    rc = lsim_replay_run(sc, &o, &sum, eb);
    int ended = sum.db_status && strcmp(sum.db_status, "running") != 0 &&
                rc != LSIM_E_INTERRUPTED;
    lsim_errbuf eb2 = LSIM_ERRBUF_INIT;
    lsim_err irc = ended ? lsim_resume_install(tmp, final, &eb2) : 0;
    if (!ended || irc) { /* nothing of this attempt stays */
      static const char *const sfx[] = {"", "-wal", "-shm"};
      for (int i = 0; i < 3; i++) {
        char p[LSIM_PATH_MAX + 96];
        snprintf(p, sizeof p, "%s%s", tmp, sfx[i]);
        unlink(p);
      }
    }
    if (irc && !rc) {
      rc = irc;
      *eb = eb2;
    }
    lsim_out_unlock(&lock);
  }
  lsim__free_sets(sets, nsets);
  free(sc);
  return rc;
}

int lsim_sweep_cell_done(const lsim_sweep *s, int64_t cell) {
  if (cell < 0 || cell >= s->ncells)
    return 0;
  char path[LSIM_PATH_MAX + 64];
  lsim_sweep_cell_path(s, cell, path, sizeof path);
  struct stat st;
  if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
    return 0;
  sqlite3 *h = NULL;
  sqlite3_stmt *q = NULL;
  int done = 0;
  lsim_runid *rec = malloc(sizeof *rec);
  lsim_scenario *sc = NULL;
  char *sets[LSIM_SCENARIO_MAX_SETS];
  int nsets = 0;
  if (!rec ||
      lsim__open_ro(path, &h) != SQLITE_OK ||
      sqlite3_prepare_v2(h,
                         "SELECT status,scenario_path,scenario_sha256,seed "
                         "FROM runs WHERE run_id=1",
                         -1, &q, NULL) != SQLITE_OK ||
      sqlite3_step(q) != SQLITE_ROW)
    goto out;
  const char *status = (const char *)sqlite3_column_text(q, 0),
             *spath = (const char *)sqlite3_column_text(q, 1),
             *ssha = (const char *)sqlite3_column_text(q, 2);
  if (!status || strcmp(status, "ok") != 0 || !spath ||
      strcmp(spath, s->base) != 0 || !ssha ||
      (uint64_t)sqlite3_column_int64(q, 3) != lsim__seed(s, cell))
    goto out;
  char ssha_copy[65];
  snprintf(ssha_copy, sizeof ssha_copy, "%s", ssha);
  if (lsim_runid_read(h, path, rec, NULL))
    goto out;
  /* the options: exactly the cell's, in order */
  int64_t k = cell / s->nseeds;
  if ((nsets = lsim__combo_sets(s, k, sets)) < 0) {
    nsets = 0;
    goto out;
  }
  const char *ropts[2 * (LSIM_SCENARIO_MAX_SETS + 4) + 1];
  char names[LSIM_SCENARIO_MAX_SETS][16], seedtxt[32];
  int no = lsim__cell_opts(s, cell, sets, nsets, ropts, names, seedtxt);
  if (rec->nopts != no)
    goto out;
  for (int i = 0; i < no; i++)
    if (strcmp(rec->opt[i].name, ropts[2 * i]) ||
        strcmp(rec->opt[i].value, ropts[2 * i + 1]))
      goto out;
  /* the inputs: what the cell's scenario reads now, digested once per
  ** combination */
  lsim__cache *c = s->cache;
  if (c->combo != k) {
    lsim_errbuf eb = LSIM_ERRBUF_INIT;
    c->combo = -1;
    sc = malloc(sizeof *sc);
    lsim__free_sets(sets, nsets);
    int n2 = 0;
    if (!sc || lsim__combo_scenario(s, k, sc, sets, &n2, &eb) ||
        lsim_runid_collect(sc, &c->id, &eb)) {
      nsets = n2;
      goto out;
    }
    nsets = n2;
    c->combo = k;
  }
  done = lsim_runid_same_inputs(rec, &c->id, NULL) == 0;
  for (int i = 0; done && i < c->id.ninputs; i++)
    if (strcmp(c->id.in[i].role, "scenario") == 0)
      done = strcmp(c->id.in[i].sha256, ssha_copy) == 0;
out:
  sqlite3_finalize(q);
  sqlite3_close(h);
  lsim__free_sets(sets, nsets);
  free(sc);
  free(rec);
  return done;
}

/* ---- loading ----------------------------------------------------------------- */

void lsim_sweep_release(lsim_sweep *s) {
  if (!s)
    return;
  for (int i = 0; i < s->nsets; i++)
    free(s->sets[i]);
  free(s->sets);
  for (int a = 0; a < s->naxes; a++) {
    for (int i = 0; s->axes[a].vals && i < s->axes[a].nvals; i++) {
      free(s->axes[a].vals[i].json);
      free(s->axes[a].vals[i].text);
    }
    free(s->axes[a].vals);
  }
  free(s->seeds);
  free(s->combo_seed);
  free(s->cache);
  free(s);
}

/* The path of a --set without its value, normalised like an axis path. */
static void lsim__set_path(const char *set, char *out, size_t n) {
  const char *eq = strchr(set, '=');
  int len = eq ? (int)(eq - set) : (int)strlen(set);
  snprintf(out, n, "%s%.*s", set[0] == '$' ? "" : "$.", len, set);
}

lsim_err lsim_sweep_load(const char *grid_path, const char *out_dir,
                         int nsets, const char *const *sets,
                         lsim_sweep **out, lsim_errbuf *eb) {
  *out = NULL;
  if (!grid_path || !*grid_path || strlen(grid_path) >= LSIM_PATH_MAX)
    return lsim_fail(eb, LSIM_E_USAGE, "grid path must be 1 to %d bytes",
                     LSIM_PATH_MAX - 1);
  lsim_sweep *s = calloc(1, sizeof *s);
  if (!s || !(s->cache = malloc(sizeof *s->cache))) {
    free(s);
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  }
  s->cache->combo = -1;
  snprintf(s->grid, sizeof s->grid, "%s", grid_path);
  lsim_err rc = 0;
  int64_t bytes = 0;
  lsim_scenario *sc = NULL;
  char *csets[LSIM_SCENARIO_MAX_SETS];
  int ncs = 0;
  if (nsets < 0 || nsets + LSIM_SWEEP_MAX_AXES > LSIM_SCENARIO_MAX_SETS) {
    rc = lsim_fail(eb, LSIM_E_USAGE, "at most %d --set on a sweep",
                   LSIM_SCENARIO_MAX_SETS - LSIM_SWEEP_MAX_AXES);
    goto fail;
  }
  /* the grid */
  static const lsim_json_codes codes = {LSIM_E_SCN_JSON, LSIM_E_SCN_DUP};
  const lsim_slurp_opts so = {LSIM__GRID_MAX_BYTES, LSIM_E_SCN_RANGE,
                              LSIM_E_IO, 0, NULL};
  lsim_json_doc doc = LSIM_JSON_DOC_INIT;
  if ((rc = lsim_json_load(&doc, grid_path, &so, &codes, eb)))
    goto fail;
  lsim__gctx g = {s->grid, eb};
  rc = lsim__grid(&g, doc.root, s);
  lsim_json_release(&doc);
  if (rc)
    goto fail;
  if ((rc = lsim_runid_digest("grid", grid_path, s->grid_sha, &bytes, eb)))
    goto fail;
  /* the command line's edits, each checked against the axes */
  s->sets = calloc((size_t)(nsets ? nsets : 1), sizeof *s->sets);
  if (!s->sets) {
    rc = lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
    goto fail;
  }
  for (int i = 0; i < nsets; i++) {
    if (strlen(sets[i]) >= LSIM_PATH_MAX) {
      rc = lsim_fail(eb, LSIM_E_USAGE, "--set: at most %d bytes",
                     LSIM_PATH_MAX - 1);
      goto fail;
    }
    char p[LSIM_PATH_MAX + 4];
    lsim__set_path(sets[i], p, sizeof p);
    for (int a = 0; a < s->naxes; a++)
      if (strcmp(p, s->axes[a].path) == 0) {
        rc = lsim_fail(eb, LSIM_E_USAGE,
                       "--set %s: axis '%s' of %s sets that path", p,
                       s->axes[a].name, s->grid);
        goto fail;
      }
    if (!(s->sets[s->nsets++] = lsim__dup(sets[i]))) {
      rc = lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
      goto fail;
    }
  }
  if (out_dir) {
    if (!*out_dir || strlen(out_dir) > LSIM_PATH_MAX - 64) {
      rc = lsim_fail(eb, LSIM_E_USAGE, "--out: path must be 1 to %d bytes",
                     LSIM_PATH_MAX - 64);
      goto fail;
    }
    snprintf(s->out, sizeof s->out, "%s", out_dir);
  } else {
    snprintf(s->out, sizeof s->out, "results/sweep-%s", s->name);
  }
  size_t ol = strlen(s->out);
  while (ol > 1 && s->out[ol - 1] == '/')
    s->out[--ol] = '\0';
  /* every combination must be a valid scenario before anything runs */
  s->combo_seed = calloc((size_t)s->ncombos, sizeof *s->combo_seed);
  sc = malloc(sizeof *sc);
  if (!s->combo_seed || !sc) {
    rc = lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
    goto fail;
  }
  for (int64_t k = 0; k < s->ncombos; k++) {
    lsim_errbuf e2 = LSIM_ERRBUF_INIT;
    rc = lsim__combo_scenario(s, k, sc, csets, &ncs, &e2);
    lsim__free_sets(csets, ncs);
    ncs = 0;
    if (rc) {
      char label[256];
      lsim_sweep_cell_label(s, k * s->nseeds, label, sizeof label);
      lsim_fail(eb, rc, "%s: %s: %s", s->grid, label, e2.msg);
      goto fail;
    }
    s->combo_seed[k] = sc->seed;
  }
  free(sc);
  *out = s;
  return 0;
fail:
  free(sc);
  lsim_sweep_release(s);
  return rc;
}

/* ---- sweep.json: what `sweep merge DIR` needs ------------------------------- */

static int lsim__mkdir(const char *p) {
  return mkdir(p, 0777) == 0 || errno == EEXIST ? 0 : -1;
}

static int lsim__mkdirs(const char *dir) {
  char p[LSIM_PATH_MAX];
  snprintf(p, sizeof p, "%s", dir);
  for (char *q = p + 1; *q; q++)
    if (*q == '/') {
      *q = '\0';
      if (lsim__mkdir(p))
        return -1;
      *q = '/';
    }
  return lsim__mkdir(p);
}

lsim_err lsim_sweep_prepare(lsim_sweep *s, lsim_errbuf *eb) {
  char cells[LSIM_PATH_MAX + 16];
  snprintf(cells, sizeof cells, "%s/cells", s->out);
  if (lsim__mkdirs(s->out) || lsim__mkdir(cells))
    return lsim_fail(eb, LSIM_E_IO, "cannot create directory %s: %s", cells,
                     strerror(errno));
  lsim__buf b = {0};
  lsim__puts(&b, "{\n  \"grid\": ");
  lsim__put_jstr(&b, s->grid);
  lsim__puts(&b, ",\n  \"grid_sha256\": ");
  lsim__put_jstr(&b, s->grid_sha);
  lsim__puts(&b, ",\n  \"sets\": [");
  for (int i = 0; i < s->nsets; i++) {
    lsim__puts(&b, i ? ", " : "");
    lsim__put_jstr(&b, s->sets[i]);
  }
  lsim__puts(&b, "]\n}\n");
  if (b.oom || !b.p) {
    free(b.p);
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  }
  char path[LSIM_PATH_MAX + 16];
  snprintf(path, sizeof path, "%s/sweep.json", s->out);
  lsim_err rc = lsim_out_write_all(path, b.p, b.n, eb);
  free(b.p);
  return rc;
}

lsim_err lsim_sweep_load_dir(const char *dir, lsim_sweep **out,
                             lsim_errbuf *eb) {
  *out = NULL;
  char path[LSIM_PATH_MAX + 16];
  if (strlen(dir) > LSIM_PATH_MAX - 64)
    return lsim_fail(eb, LSIM_E_USAGE, "%s: path too long", dir);
  snprintf(path, sizeof path, "%s/sweep.json", dir);
  struct stat st;
  if (stat(path, &st) != 0)
    return lsim_fail(eb, LSIM_E_USAGE,
                     "%s: no sweep.json (not the output directory of "
                     "`lorasim sweep`)",
                     dir);
  static const lsim_json_codes codes = {LSIM_E_SCN_JSON, LSIM_E_SCN_DUP};
  const lsim_slurp_opts so = {1 << 20, LSIM_E_SCN_RANGE, LSIM_E_IO, 0, NULL};
  lsim_json_doc doc = LSIM_JSON_DOC_INIT;
  lsim_err rc = lsim_json_load(&doc, path, &so, &codes, eb);
  if (rc)
    return rc;
  const cJSON *grid = lsim_json_get(doc.root, "grid"),
              *sha = lsim_json_get(doc.root, "grid_sha256"),
              *sets = lsim_json_get(doc.root, "sets");
  const char *sv[LSIM_SCENARIO_MAX_SETS];
  int n = 0;
  if (!cJSON_IsString(grid) || !cJSON_IsString(sha) || !cJSON_IsArray(sets) ||
      lsim_json_count(sets) > LSIM_SCENARIO_MAX_SETS)
    rc = lsim_fail(eb, LSIM_E_SCN_TYPE,
                   "%s: expected {\"grid\": PATH, \"grid_sha256\": HEX, "
                   "\"sets\": [...]}",
                   path);
  for (const cJSON *c = rc ? NULL : sets->child; c && !rc; c = c->next)
    if (!cJSON_IsString(c))
      rc = lsim_fail(eb, LSIM_E_SCN_TYPE, "%s: $.sets: strings only", path);
    else
      sv[n++] = c->valuestring;
  char hex[65];
  int64_t bytes;
  if (!rc && !(rc = lsim_runid_digest("grid", grid->valuestring, hex, &bytes,
                                      eb)) &&
      strcmp(hex, sha->valuestring) != 0)
    rc = lsim_fail(eb, LSIM_E_RUN_INPUT_CHANGED,
                   "grid %s changed since the sweep (sha256 %.12s..., "
                   "recorded %.12s...): its cells are another grid's",
                   grid->valuestring, hex, sha->valuestring);
  if (!rc)
    rc = lsim_sweep_load(grid->valuestring, dir, n, sv, out, eb);
  lsim_json_release(&doc);
  return rc;
}

/* ---- progress ------------------------------------------------------------------- */

static void lsim__dur(char *out, size_t n, double s) {
  long t = s < 0 ? 0 : s > 1e8 ? 99999999 : (long)(s + 0.5);
  if (t >= 3600)
    snprintf(out, n, "%ldh%02ldm", t / 3600, t / 60 % 60);
  else if (t >= 60)
    snprintf(out, n, "%ldm%02lds", t / 60, t % 60);
  else
    snprintf(out, n, "%lds", t);
}

void lsim_sweep_progress_line(char *out, size_t n, int64_t done,
                              int64_t failed, int64_t skipped, int64_t total,
                              double elapsed_s) {
  char el[32], eta[32] = "?";
  lsim__dur(el, sizeof el, elapsed_s);
  int64_t left = total - skipped - done;
  if (done > 0)
    lsim__dur(eta, sizeof eta, elapsed_s / (double)done * (double)left);
  snprintf(out, n,
           "sweep: %lld/%lld cells, %lld failed%s%.0lld%s, elapsed %s, "
           "eta %s",
           (long long)(done + skipped), (long long)total, (long long)failed,
           skipped ? ", " : "", (long long)skipped,
           skipped ? " done before" : "", el, left ? eta : "0s");
}

/* ---- the merge --------------------------------------------------------------------- */

/* One figure of one cell. */
typedef struct lsim__row {
  int64_t cell;
  int sidx;        /* seed index */
  int has_tenant;  /* 0: all tenants */
  int64_t tenant;
  char tname[LSIM__NAME];
  char metric[128];       /* a runs_summary key or a tenant_summary column */
  int has_value, is_int;
  int64_t iv;
  double v;
} lsim__row;

typedef struct lsim__rows {
  lsim__row *r;
  size_t n, cap;
} lsim__rows;

static lsim__row *lsim__rows_add(lsim__rows *rs) {
  if (rs->n == rs->cap) {
    size_t cap = rs->cap ? rs->cap * 2 : 256;
    lsim__row *r = realloc(rs->r, cap * sizeof *r);
    if (!r)
      return NULL;
    rs->r = r;
    rs->cap = cap;
  }
  lsim__row *r = &rs->r[rs->n++];
  memset(r, 0, sizeof *r);
  return r;
}

static void lsim__row_value(lsim__row *r, sqlite3_stmt *q, int col) {
  int t = sqlite3_column_type(q, col);
  r->has_value = t == SQLITE_INTEGER || t == SQLITE_FLOAT;
  r->is_int = t == SQLITE_INTEGER;
  r->iv = sqlite3_column_int64(q, col);
  r->v = sqlite3_column_double(q, col);
}

/* (tenant: all first, then by id; metric by name; seed index) */
static int lsim__row_cmp(const void *a, const void *b) {
  const lsim__row *x = a, *y = b;
  if (x->has_tenant != y->has_tenant)
    return x->has_tenant - y->has_tenant;
  if (x->has_tenant && x->tenant != y->tenant)
    return x->tenant < y->tenant ? -1 : 1;
  int c = strcmp(x->metric, y->metric);
  if (c)
    return c;
  return (x->sidx > y->sidx) - (x->sidx < y->sidx);
}

/* The figures of one done cell: runs_summary as the all-tenants row, and
** every numeric column of tenant_summary when present (its all-tenants
** row's figures replace runs_summary's of the same name). */
static lsim_err lsim__cell_rows(const lsim_sweep *s, int64_t cell,
                                lsim__rows *rs, lsim_errbuf *eb) {
  char path[LSIM_PATH_MAX + 64];
  lsim_sweep_cell_path(s, cell, path, sizeof path);
  sqlite3 *h = NULL;
  sqlite3_stmt *q = NULL;
  lsim_err rc = 0;
  size_t first = rs->n;
  int sidx = (int)(cell % s->nseeds);
  char **cols = NULL;
  int ncols = 0;
  lsim__buf sql = {0};
  if (lsim__open_ro(path, &h) != SQLITE_OK) {
    rc = lsim_fail(eb, LSIM_E_DB, "%s: cannot open: %s", path,
                   h ? sqlite3_errmsg(h) : "out of memory");
    goto out;
  }
  if (sqlite3_prepare_v2(h,
                         "SELECT key,value FROM runs_summary WHERE run_id=1 "
                         "ORDER BY key",
                         -1, &q, NULL) != SQLITE_OK) {
    rc = lsim_fail(eb, LSIM_E_DB, "%s: read runs_summary: %s", path,
                   sqlite3_errmsg(h));
    goto out;
  }
  while (sqlite3_step(q) == SQLITE_ROW) {
    const char *k = (const char *)sqlite3_column_text(q, 0);
    lsim__row *r = lsim__rows_add(rs);
    if (!r) {
      rc = lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
      goto out;
    }
    r->cell = cell;
    r->sidx = sidx;
    snprintf(r->tname, sizeof r->tname, "all");
    snprintf(r->metric, sizeof r->metric, "%s", k ? k : "");
    lsim__row_value(r, q, 1);
  }
  sqlite3_finalize(q);
  q = NULL;
  /* tenant_summary, read generically: every column but run_id, tenant and
  ** name is a figure */
  if (sqlite3_prepare_v2(h, "SELECT name FROM pragma_table_info("
                            "'tenant_summary') ORDER BY cid",
                         -1, &q, NULL) != SQLITE_OK) {
    rc = lsim_fail(eb, LSIM_E_DB, "%s: %s", path, sqlite3_errmsg(h));
    goto out;
  }
  while (sqlite3_step(q) == SQLITE_ROW) {
    const char *c = (const char *)sqlite3_column_text(q, 0);
    if (!c || !strcmp(c, "run_id") || !strcmp(c, "tenant") ||
        !strcmp(c, "name"))
      continue;
    char **nc = realloc(cols, (size_t)(ncols + 1) * sizeof *cols);
    if (!nc || !(nc[ncols] = lsim__dup(c))) {
      cols = nc ? nc : cols;
      rc = lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
      goto out;
    }
    cols = nc;
    ncols++;
  }
  sqlite3_finalize(q);
  q = NULL;
  if (ncols > 0) {
    lsim__puts(&sql, "SELECT tenant,name");
    for (int i = 0; i < ncols; i++) {
      lsim__puts(&sql, ",\"");
      for (const char *c = cols[i]; *c; c++)
        lsim__put(&sql, *c == '"' ? "\"\"" : c, *c == '"' ? 2 : 1);
      lsim__puts(&sql, "\"");
    }
    lsim__puts(&sql, " FROM tenant_summary ORDER BY tenant IS NOT NULL, "
                     "tenant");
    if (sql.oom) {
      rc = lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
      goto out;
    }
    if (sqlite3_prepare_v2(h, sql.p, -1, &q, NULL) != SQLITE_OK) {
      rc = lsim_fail(eb, LSIM_E_DB, "%s: read tenant_summary: %s", path,
                     sqlite3_errmsg(h));
      goto out;
    }
    size_t nrs = rs->n;
    while (sqlite3_step(q) == SQLITE_ROW) {
      int has_t = sqlite3_column_type(q, 0) != SQLITE_NULL;
      const char *tn = (const char *)sqlite3_column_text(q, 1);
      for (int i = 0; i < ncols; i++) {
        int t = sqlite3_column_type(q, 2 + i);
        if (t == SQLITE_TEXT || t == SQLITE_BLOB)
          continue; /* not a figure */
        lsim__row *r = NULL;
        if (!has_t) /* replaces runs_summary's figure of that name */
          for (size_t j = first; j < nrs && !r; j++)
            if (strcmp(rs->r[j].metric, cols[i]) == 0)
              r = &rs->r[j];
        if (!r && !(r = lsim__rows_add(rs))) {
          rc = lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
          goto out;
        }
        r->cell = cell;
        r->sidx = sidx;
        r->has_tenant = has_t;
        r->tenant = sqlite3_column_int64(q, 0);
        snprintf(r->tname, sizeof r->tname, "%s",
                 has_t ? (tn ? tn : "") : "all");
        snprintf(r->metric, sizeof r->metric, "%s", cols[i]);
        lsim__row_value(r, q, 2 + i);
      }
    }
  }
  qsort(rs->r + first, rs->n - first, sizeof *rs->r, lsim__row_cmp);
out:
  sqlite3_finalize(q);
  sqlite3_close(h);
  for (int i = 0; i < ncols; i++)
    free(cols[i]);
  free(cols);
  free(sql.p);
  return rc;
}

/*
** The two-sided 95% quantile of Student's t with df degrees of freedom:
** the t with P(|T| <= t) = 0.95, found by bisection on the exact
** distribution function for integer df (the finite series in cos(theta),
** theta = atan(t / sqrt(df))).
*/
static double lsim__t_cdf2(double t, int df) {
  double th = atan(t / sqrt((double)df)), c = cos(th), s = sin(th),
         c2 = c * c;
  if (df % 2) {
    double sum = 0, term = 1;
    if (df > 1) {
      sum = 1;
      for (int k = 3; k <= df - 2; k += 2) {
        term *= c2 * (double)(k - 1) / (double)k;
        sum += term;
      }
      sum *= s * c;
    }
    return 2.0 / 3.14159265358979323846 * (th + sum);
  }
  double sum = 1, term = 1;
  for (int k = 2; k <= df - 2; k += 2) {
    term *= c2 * (double)(k - 1) / (double)k;
    sum += term;
  }
  return s * sum;
}

double lsim_sweep_t95(int df) {
  if (df < 1)
    return NAN;
  double lo = 0, hi = 1000;
  for (int i = 0; i < 200 && hi - lo > 1e-13; i++) {
    double mid = (lo + hi) / 2;
    if (lsim__t_cdf2(mid, df) < 0.95)
      lo = mid;
    else
      hi = mid;
  }
  return (lo + hi) / 2;
}

/* The merged outputs, written as the combinations go. */
typedef struct lsim__merge {
  lsim_sweep *s;
  lsim_outfile csv, stats, db;
  sqlite3 *h;
  sqlite3_stmt *ins_cell, *ins_row, *ins_stat;
  lsim_errbuf *eb;
} lsim__merge;

static void lsim__csv_str(FILE *f, const char *s) {
  char buf[LSIM_ESC_SIZE(1024)];
  if (lsim_csv_field(buf, sizeof buf, s) < 0)
    snprintf(buf, sizeof buf, "?");
  fputs(buf, f);
}

static void lsim__csv_val(FILE *f, const lsim__val *v) {
  char t[48];
  switch (v->type) {
  case LSIM__V_INT:
    fprintf(f, "%lld", (long long)v->iv);
    break;
  case LSIM__V_REAL:
    lsim__num(t, v->dv);
    fputs(t, f);
    break;
  case LSIM__V_TEXT:
    lsim__csv_str(f, v->text);
    break;
  default:
    lsim__csv_str(f, v->json);
  }
}

static void lsim__bind_val(sqlite3_stmt *q, int i, const lsim__val *v) {
  switch (v->type) {
  case LSIM__V_INT:
    sqlite3_bind_int64(q, i, v->iv);
    break;
  case LSIM__V_REAL:
    sqlite3_bind_double(q, i, v->dv);
    break;
  case LSIM__V_TEXT:
    sqlite3_bind_text(q, i, v->text, -1, SQLITE_TRANSIENT);
    break;
  default:
    sqlite3_bind_text(q, i, v->json, -1, SQLITE_TRANSIENT);
  }
}

static void lsim__csv_num(FILE *f, int is_int, int64_t iv, double v) {
  char t[48];
  if (is_int) {
    fprintf(f, "%lld", (long long)iv);
  } else {
    lsim__num(t, v);
    fputs(t, f);
  }
}

static lsim_err lsim__sqlerr(lsim__merge *m, const char *what) {
  return lsim_fail(m->eb, LSIM_E_DB, "%s: %s: %s", m->db.path, what,
                   sqlite3_errmsg(m->h));
}

static int lsim__step_reset(sqlite3_stmt *q) {
  int r = sqlite3_step(q);
  sqlite3_reset(q);
  sqlite3_clear_bindings(q);
  return r == SQLITE_DONE ? 0 : -1;
}

/* The tables and the CSV headers. */
static lsim_err lsim__merge_open(lsim__merge *m) {
  lsim_sweep *s = m->s;
  char p[LSIM_PATH_MAX + 32];
  lsim_err rc;
  snprintf(p, sizeof p, "%s/sweep.csv", s->out);
  if ((rc = lsim_out_open(&m->csv, p, m->eb)))
    return rc;
  snprintf(p, sizeof p, "%s/sweep-stats.csv", s->out);
  if ((rc = lsim_out_open(&m->stats, p, m->eb)))
    return rc;
  snprintf(p, sizeof p, "%s/sweep.db", s->out);
  if ((rc = lsim_out_reserve(&m->db, p, m->eb)))
    return rc;
  fputs("cell,combo,seed", m->csv.fp);
  fputs("combo", m->stats.fp);
  lsim__buf axc = {0}, axq = {0};
  for (int a = 0; a < s->naxes; a++) {
    fprintf(m->csv.fp, ",%s", s->axes[a].name);
    fprintf(m->stats.fp, ",%s", s->axes[a].name);
    lsim__puts(&axc, ",\"");
    lsim__puts(&axc, s->axes[a].name);
    lsim__puts(&axc, "\"");
    lsim__puts(&axq, ",?");
  }
  fputs(",tenant,tenant_name,metric,value\n", m->csv.fp);
  fputs(",tenant,tenant_name,metric,n,mean,sd,ci95_half,ci95_lo,ci95_hi\n",
        m->stats.fp);
  const char *ac = axc.p ? axc.p : "", *aq = axq.p ? axq.p : "";
  rc = axc.oom || axq.oom ? lsim_fail(m->eb, LSIM_E_NOMEM, "out of memory") : 0;
  char *sql = NULL;
  if (!rc && sqlite3_open_v2(m->db.tmp, &m->h,
                             SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                             NULL) != SQLITE_OK)
    rc = lsim__sqlerr(m, "open");
  if (!rc && !(sql = sqlite3_mprintf(
                   "PRAGMA journal_mode=MEMORY;"
                   "PRAGMA user_version=1;"
                   "CREATE TABLE sweep_axes(axis INTEGER PRIMARY KEY, "
                   " name TEXT NOT NULL, path TEXT NOT NULL, "
                   " nvalues INTEGER NOT NULL);"
                   "CREATE TABLE sweep_cells(cell INTEGER PRIMARY KEY, "
                   " combo INTEGER NOT NULL, seed INTEGER NOT NULL%s, "
                   " db TEXT NOT NULL, done INTEGER NOT NULL);"
                   "CREATE TABLE sweep_rows(cell INTEGER NOT NULL, "
                   " combo INTEGER NOT NULL, seed INTEGER NOT NULL%s, "
                   " tenant INTEGER, tenant_name TEXT NOT NULL, "
                   " metric TEXT NOT NULL, value);"
                   "CREATE TABLE sweep_stats(combo INTEGER NOT NULL%s, "
                   " tenant INTEGER, tenant_name TEXT NOT NULL, "
                   " metric TEXT NOT NULL, n INTEGER NOT NULL, mean REAL, "
                   " sd REAL, ci95_half REAL, ci95_lo REAL, ci95_hi REAL);"
                   "BEGIN;",
                   ac, ac, ac)))
    rc = lsim_fail(m->eb, LSIM_E_NOMEM, "out of memory");
  if (!rc && sqlite3_exec(m->h, sql, NULL, NULL, NULL) != SQLITE_OK)
    rc = lsim__sqlerr(m, "create tables");
  sqlite3_free(sql);
  sql = NULL;
  const char *fmt[3] = {
      "INSERT INTO sweep_cells VALUES(?,?,?%s,?,?)",
      "INSERT INTO sweep_rows VALUES(?,?,?%s,?,?,?,?)",
      "INSERT INTO sweep_stats VALUES(?%s,?,?,?,?,?,?,?,?,?)"};
  sqlite3_stmt **qs[3] = {&m->ins_cell, &m->ins_row, &m->ins_stat};
  for (int i = 0; i < 3 && !rc; i++) {
    if (!(sql = sqlite3_mprintf(fmt[i], aq)))
      rc = lsim_fail(m->eb, LSIM_E_NOMEM, "out of memory");
    else if (sqlite3_prepare_v2(m->h, sql, -1, qs[i], NULL) != SQLITE_OK)
      rc = lsim__sqlerr(m, "prepare");
    sqlite3_free(sql);
  }
  sqlite3_stmt *q = NULL;
  if (!rc && sqlite3_prepare_v2(m->h,
                                "INSERT INTO sweep_axes VALUES(?,?,?,?)", -1,
                                &q, NULL) != SQLITE_OK)
    rc = lsim__sqlerr(m, "prepare");
  for (int a = 0; a < s->naxes && !rc; a++) {
    sqlite3_bind_int(q, 1, a);
    sqlite3_bind_text(q, 2, s->axes[a].name, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 3, s->axes[a].path, -1, SQLITE_STATIC);
    sqlite3_bind_int(q, 4, s->axes[a].nvals);
    if (lsim__step_reset(q))
      rc = lsim__sqlerr(m, "insert sweep_axes");
  }
  sqlite3_finalize(q);
  free(axc.p);
  free(axq.p);
  return rc;
}

/* Bind the axis values of combination k from column `at` on. */
static void lsim__bind_axes(const lsim_sweep *s, sqlite3_stmt *q, int at,
                            int64_t k) {
  for (int a = 0; a < s->naxes; a++)
    lsim__bind_val(q, at + a, &s->axes[a].vals[lsim__vi(s, k, a)]);
}

static void lsim__csv_axes(const lsim_sweep *s, FILE *f, int64_t k) {
  for (int a = 0; a < s->naxes; a++) {
    fputc(',', f);
    lsim__csv_val(f, &s->axes[a].vals[lsim__vi(s, k, a)]);
  }
}

static void lsim__csv_tenant(FILE *f, const lsim__row *r) {
  if (r->has_tenant)
    fprintf(f, ",%lld,", (long long)r->tenant);
  else
    fputs(",,", f);
  lsim__csv_str(f, r->tname);
  fputc(',', f);
  lsim__csv_str(f, r->metric);
}

static void lsim__bind_tenant(sqlite3_stmt *q, int at, const lsim__row *r) {
  if (r->has_tenant)
    sqlite3_bind_int64(q, at, r->tenant);
  else
    sqlite3_bind_null(q, at);
  sqlite3_bind_text(q, at + 1, r->tname, -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(q, at + 2, r->metric, -1, SQLITE_TRANSIENT);
}

/* The rows and statistics of combination k, whose done cells' rows are in
** rs (sorted per cell). */
static lsim_err lsim__merge_combo(lsim__merge *m, int64_t k, lsim__rows *rs) {
  lsim_sweep *s = m->s;
  int na = s->naxes;
  for (size_t i = 0; i < rs->n; i++) {
    const lsim__row *r = &rs->r[i];
    uint64_t seed = lsim__seed(s, r->cell);
    fprintf(m->csv.fp, "%lld,%lld,%llu", (long long)r->cell, (long long)k,
            (unsigned long long)seed);
    lsim__csv_axes(s, m->csv.fp, k);
    lsim__csv_tenant(m->csv.fp, r);
    fputc(',', m->csv.fp);
    if (r->has_value)
      lsim__csv_num(m->csv.fp, r->is_int, r->iv, r->v);
    fputc('\n', m->csv.fp);
    sqlite3_stmt *q = m->ins_row;
    sqlite3_bind_int64(q, 1, r->cell);
    sqlite3_bind_int64(q, 2, k);
    sqlite3_bind_int64(q, 3, (int64_t)seed);
    lsim__bind_axes(s, q, 4, k);
    lsim__bind_tenant(q, 4 + na, r);
    if (!r->has_value)
      sqlite3_bind_null(q, 7 + na);
    else if (r->is_int)
      sqlite3_bind_int64(q, 7 + na, r->iv);
    else
      sqlite3_bind_double(q, 7 + na, r->v);
    if (lsim__step_reset(q))
      return lsim__sqlerr(m, "insert sweep_rows");
  }
  /* statistics over the seeds: group by (tenant, metric) */
  qsort(rs->r, rs->n, sizeof *rs->r, lsim__row_cmp);
  for (size_t i = 0; i < rs->n;) {
    size_t j = i;
    int n = 0;
    double sum = 0;
    while (j < rs->n && rs->r[j].has_tenant == rs->r[i].has_tenant &&
           (!rs->r[i].has_tenant || rs->r[j].tenant == rs->r[i].tenant) &&
           strcmp(rs->r[j].metric, rs->r[i].metric) == 0) {
      if (rs->r[j].has_value) {
        n++;
        sum += rs->r[j].v;
      }
      j++;
    }
    double mean = n ? sum / n : NAN, ss = 0;
    for (size_t t = i; t < j; t++)
      if (rs->r[t].has_value)
        ss += (rs->r[t].v - mean) * (rs->r[t].v - mean);
    double sd = n > 1 ? sqrt(ss / (n - 1)) : NAN;
    double half = n > 1 ? lsim_sweep_t95(n - 1) * sd / sqrt((double)n) : NAN;
    const lsim__row *r = &rs->r[i];
    FILE *f = m->stats.fp;
    fprintf(f, "%lld", (long long)k);
    lsim__csv_axes(s, f, k);
    lsim__csv_tenant(f, r);
    fprintf(f, ",%d", n);
    double fig[5] = {mean, sd, half, mean - half, mean + half};
    sqlite3_stmt *q = m->ins_stat;
    sqlite3_bind_int64(q, 1, k);
    lsim__bind_axes(s, q, 2, k);
    lsim__bind_tenant(q, 2 + na, r);
    sqlite3_bind_int(q, 5 + na, n);
    for (int x = 0; x < 5; x++) {
      fputc(',', f);
      if (isfinite(fig[x])) {
        lsim__csv_num(f, 0, 0, fig[x]);
        sqlite3_bind_double(q, 6 + na + x, fig[x]);
      } else {
        sqlite3_bind_null(q, 6 + na + x);
      }
    }
    fputc('\n', f);
    if (lsim__step_reset(q))
      return lsim__sqlerr(m, "insert sweep_stats");
    i = j;
  }
  return 0;
}

lsim_err lsim_sweep_merge(lsim_sweep *s, int allow_partial, int64_t *missing,
                          lsim_errbuf *eb) {
  /* which cells are there, before anything is written */
  int64_t nmiss = 0;
  char first[160] = "";
  unsigned char *done = malloc((size_t)s->ncells);
  if (!done)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  for (int64_t c = 0; c < s->ncells; c++) {
    done[c] = (unsigned char)lsim_sweep_cell_done(s, c);
    if (!done[c] && nmiss++ < 8)
      snprintf(first + strlen(first), sizeof first - strlen(first), "%s%0*lld",
               nmiss > 1 ? ", " : "", s->width, (long long)c);
  }
  if (missing)
    *missing = nmiss;
  if (nmiss && !allow_partial) {
    free(done);
    return lsim_fail(eb, LSIM_E_SWEEP_MISSING,
                     "%s: %lld of %lld cells not done (%s%s); run them "
                     "(--resume, --cell) or merge with --allow-partial",
                     s->out, (long long)nmiss, (long long)s->ncells, first,
                     nmiss > 8 ? ", ..." : "");
  }
  lsim__merge m;
  memset(&m, 0, sizeof m);
  m.s = s;
  m.eb = eb;
  m.csv = m.stats = m.db = (lsim_outfile)LSIM_OUTFILE_INIT;
  lsim_err rc = lsim__merge_open(&m);
  lsim__rows rs = {0};
  for (int64_t k = 0; k < s->ncombos && !rc; k++) {
    rs.n = 0;
    for (int j = 0; j < s->nseeds && !rc; j++) {
      int64_t c = k * s->nseeds + j;
      char cp[LSIM_PATH_MAX + 64];
      lsim_sweep_cell_path(s, c, cp, sizeof cp);
      sqlite3_stmt *q = m.ins_cell;
      sqlite3_bind_int64(q, 1, c);
      sqlite3_bind_int64(q, 2, k);
      sqlite3_bind_int64(q, 3, (int64_t)lsim__seed(s, c));
      lsim__bind_axes(s, q, 4, k);
      /* the path relative to the output directory */
      sqlite3_bind_text(q, 4 + s->naxes, cp + strlen(s->out) + 1, -1,
                        SQLITE_TRANSIENT);
      sqlite3_bind_int(q, 5 + s->naxes, done[c]);
      if (lsim__step_reset(q))
        rc = lsim__sqlerr(&m, "insert sweep_cells");
      if (!rc && done[c])
        rc = lsim__cell_rows(s, c, &rs, eb);
    }
    if (!rc)
      rc = lsim__merge_combo(&m, k, &rs);
  }
  free(rs.r);
  free(done);
  if (!rc && sqlite3_exec(m.h, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
    rc = lsim__sqlerr(&m, "commit");
  sqlite3_finalize(m.ins_cell);
  sqlite3_finalize(m.ins_row);
  sqlite3_finalize(m.ins_stat);
  if (m.h && sqlite3_close(m.h) != SQLITE_OK && !rc)
    rc = lsim_fail(eb, LSIM_E_DB, "%s: close failed", m.db.path);
  if (!rc)
    rc = lsim_out_commit(&m.csv, eb);
  if (!rc)
    rc = lsim_out_commit(&m.stats, eb);
  if (!rc)
    rc = lsim_out_commit(&m.db, eb);
  lsim_out_abort(&m.csv);
  lsim_out_abort(&m.stats);
  lsim_out_abort(&m.db);
  return rc;
}
