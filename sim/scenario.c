/*
** scenario.c: read a scenario JSON file and validate it against the schema
** in docs/SCENARIO.md.
**
** The validator is built from a few typed readers (integer, number, string,
** registered name, array, member of a given JSON type) that each check one
** value and, on the first problem, report "<file>: <json path>: <what>"
** with a stable LSIM_E_SCN_* code.  Before any value of an object is read,
** lsim__keys() rejects duplicated and unknown keys.  Objects made only of
** scalars are described by lsim__field tables and read by lsim__fields().
** The cJSON tree is owned by lsim_scenario_parse() alone and freed there on
** every path; the readers only borrow it.
*/
#include "scenario.h"

#include "bundle.h"

#include "../engine/checked.h"
#include "../engine/engine.h"
#include "../engine/kv.h"
#include "../engine/residency.h"

#include "../backends/backend.h"
#include "profile.h"
#include "json.h"
#include "slurp.h"
#include "../engine/policy/policy.h"

#include <cjson/cJSON.h>
#include <openssl/evp.h>

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define LSIM__MAX_FILE_BYTES ((size_t)16 << 20) /* 16 MiB */
#define LSIM__PATHBUF LSIM_JSON_PATHBUF         /* a JSON path */
#define LSIM__INT_LIMIT 9007199254740992.0      /* 2^53 */

#if defined(__GNUC__)
#define LSIM__PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define LSIM__PRINTF(a, b)
#endif

/* ---- messages ------------------------------------------------------------ */

typedef struct lsim__ctx {
  const char *file; /* stands first in every message */
  lsim_errbuf *eb;
} lsim__ctx;

static lsim_err lsim__bad(const lsim__ctx *c, lsim_err code, const char *path,
                          const char *fmt, ...) LSIM__PRINTF(4, 5);

static lsim_err lsim__bad(const lsim__ctx *c, lsim_err code, const char *path,
                          const char *fmt, ...) {
  char what[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return lsim_fail(c->eb, code, "%s: %s: %s", c->file, path, what);
}

/* A user string made safe for a one-line message into out[size] (size >=
** 8): control bytes become '?' and what does not fit is cut to "...". */
static const char *lsim__quote(const char *s, char *out, size_t size) {
  size_t i = 0;
  for (; s[i] && i < size - 4; i++)
    out[i] = ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) ? '?' : s[i];
  if (s[i])
    memcpy(out + i, "...", 4);
  else
    out[i] = '\0';
  return out;
}

/* A number as it would read back: integers plainly, others shortest. */
static const char *lsim__num_str(double v, char out[40]) {
  if (v == floor(v) && fabs(v) < 1e18) {
    snprintf(out, 40, "%.0f", v);
  } else {
    snprintf(out, 40, "%.15g", v);
    if (strtod(out, NULL) != v)
      snprintf(out, 40, "%.17g", v);
  }
  return out;
}

/* strerror, thread-safe and lowercased to fit the message style. */
static const char *lsim__os_err(int e, char out[128]) {
  if (strerror_r(e, out, 128) != 0)
    snprintf(out, 128, "error %d", e);
  if (out[0] >= 'A' && out[0] <= 'Z')
    out[0] = (char)(out[0] - 'A' + 'a');
  return out;
}

/* Join a NULL-terminated list of names with ", ". */
static void lsim__join(char *out, size_t size, const char *const *names) {
  size_t used = 0;
  out[0] = '\0';
  for (int i = 0; names && names[i]; i++) {
    int n = snprintf(out + used, size - used, "%s%s", i ? ", " : "", names[i]);
    if (n < 0 || (size_t)n >= size - used)
      return; /* truncated: good enough for a hint */
    used += (size_t)n;
  }
}

/* ---- JSON paths (sim/json.h) ------------------------------------------- */

#define lsim__type_name lsim_json_type_name
#define lsim__key_path lsim_json_key_path
#define lsim__idx_path lsim_json_idx_path

/* ---- value readers ------------------------------------------------------- */

#define LSIM__REQ 1u     /* the key must be present */
#define LSIM__LO_OPEN 2u /* lower bound excluded (numbers only) */
#define LSIM__HI_OPEN 4u /* upper bound excluded (numbers only) */

/* An integer within [lo, hi]; bounds are at most 2^53 in magnitude.  The
** value is read exactly from its text (sim/json.h), so 9007199254740993 is
** refused rather than rounded to 2^53. */
static lsim_err lsim__int(const lsim__ctx *c, const cJSON *v, const char *path,
                          double lo, double hi, int64_t *out) {
  char got[40], a[40], b[40];
  int64_t x = 0;
  lsim_json_int_st st = lsim_json_int(v, &x);
  if (st == LSIM_JSON_INT_NOT_NUMBER)
    return lsim__bad(c, LSIM_E_SCN_TYPE, path, "must be an integer (got %s)",
                     lsim__type_name(v));
  if (st == LSIM_JSON_INT_RANGE ||
      (st == LSIM_JSON_INT_OK && (x > (int64_t)LSIM__INT_LIMIT ||
                                  x < -(int64_t)LSIM__INT_LIMIT)))
    return lsim__bad(c, LSIM_E_SCN_NOT_INTEGER, path,
                     "must be an integer of magnitude at most 2^53 (got %s)",
                     lsim_json_num_text(v));
  if (st != LSIM_JSON_INT_OK)
    return lsim__bad(c, LSIM_E_SCN_NOT_INTEGER, path,
                     "must be an integer (got %s)",
                     lsim__num_str(v->valuedouble, got));
  double d = (double)x; /* exact: |x| <= 2^53 */
  if (d < lo || d > hi)
    return lsim__bad(
        c, LSIM_E_SCN_RANGE, path, "must be an integer in [%s, %s] (got %s)",
        lsim__num_str(lo, a), lsim__num_str(hi, b), lsim__num_str(d, got));
  *out = x;
  return 0;
}

/* A number within lo..hi, each end open or closed as flags say. */
static lsim_err lsim__real(const lsim__ctx *c, const cJSON *v, const char *path,
                           double lo, double hi, unsigned flags, double *out) {
  char got[40], a[40], b[40];
  if (!cJSON_IsNumber(v))
    return lsim__bad(c, LSIM_E_SCN_TYPE, path, "must be a number (got %s)",
                     lsim__type_name(v));
  double d = v->valuedouble;
  int lo_ok = (flags & LSIM__LO_OPEN) ? d > lo : d >= lo;
  int hi_ok = (flags & LSIM__HI_OPEN) ? d < hi : d <= hi;
  if (!lo_ok || !hi_ok)
    return lsim__bad(c, LSIM_E_SCN_RANGE, path,
                     "must be a number in %c%s, %s%c (got %s)",
                     (flags & LSIM__LO_OPEN) ? '(' : '[', lsim__num_str(lo, a),
                     lsim__num_str(hi, b), (flags & LSIM__HI_OPEN) ? ')' : ']',
                     lsim__num_str(d, got));
  *out = d;
  return 0;
}

/* The characters of a name (the scenario's, a target's, a tenant's, a
** collection version label): names reach gnuplot scripts, CSV headers,
** .dat comments, file names and the console, so none of them may carry a
** quote, a separator, whitespace or a control byte (docs/SCENARIO.md). */
#define LSIM__NAME_CHARS                                                   \
  "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-"

/* A string of 1..size-1 bytes copied into dst[size]; with `ident`, only
** LSIM__NAME_CHARS are allowed (else E_SCN_RANGE). */
static lsim_err lsim__str(const lsim__ctx *c, const cJSON *v, const char *path,
                          int ident, char *dst, size_t size) {
  if (!cJSON_IsString(v))
    return lsim__bad(c, LSIM_E_SCN_TYPE, path, "must be a string (got %s)",
                     lsim__type_name(v));
  const char *s = v->valuestring;
  size_t n = strlen(s);
  if (n == 0 || n >= size)
    return lsim__bad(c, LSIM_E_SCN_RANGE, path,
                     "must be 1 to %zu bytes long (got %zu)", size - 1, n);
  if (ident && strspn(s, LSIM__NAME_CHARS) != n) {
    char q[64];
    return lsim__bad(c, LSIM_E_SCN_RANGE, path,
                     "must use only the characters [A-Za-z0-9_.-] (got '%s')",
                     lsim__quote(s, q, sizeof q));
  }
  memcpy(dst, s, n + 1);
  return 0;
}

/*
** obj[key] into *out, its path into kpath.  `want` is the JSON type it must
** have ("object", "array" or "string").  An absent key is MISSING when
** `required`, else *out is NULL.
*/
static lsim_err lsim__member(const lsim__ctx *c, const cJSON *obj,
                             const char *path, const char *key,
                             const char *want, int required, const cJSON **out,
                             char kpath[LSIM__PATHBUF]) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  lsim__key_path(kpath, path, key);
  *out = NULL;
  if (!v)
    return required ? lsim__bad(c, LSIM_E_SCN_MISSING, kpath,
                                "required key is missing")
                    : 0;
  if (strcmp(lsim__type_name(v), want) != 0)
    return lsim__bad(c, LSIM_E_SCN_TYPE, kpath, "must be %s %s (got %s)",
                     want[0] == 'a' || want[0] == 'o' ? "an" : "a", want,
                     lsim__type_name(v));
  *out = v;
  return 0;
}

/* An array of 1..max elements (already known to be an array). */
static lsim_err lsim__array(const lsim__ctx *c, const cJSON *arr,
                            const char *path, int max, int *n) {
  *n = cJSON_GetArraySize(arr);
  if (*n == 0)
    return lsim__bad(c, LSIM_E_SCN_EMPTY, path, "must not be empty");
  if (*n > max)
    return lsim__bad(c, LSIM_E_SCN_RANGE, path,
                     "must have at most %d elements (got %d)", max, *n);
  return 0;
}

/* Element i of an array, which must be an object. */
static lsim_err lsim__element(const lsim__ctx *c, const cJSON *arr, int i,
                              const char *path, const cJSON **out,
                              char ipath[LSIM__PATHBUF]) {
  *out = cJSON_GetArrayItem(arr, i);
  lsim__idx_path(ipath, path, i);
  if (!cJSON_IsObject(*out))
    return lsim__bad(c, LSIM_E_SCN_TYPE, ipath, "must be an object (got %s)",
                     lsim__type_name(*out));
  return 0;
}

/* ---- scalar tables and the key check ------------------------------------- */

enum { LSIM__I64, LSIM__I32, LSIM__NUM };

typedef struct lsim__field {
  const char *key;
  int type;       /* LSIM__I64 (int64_t *), LSIM__I32 (int *), LSIM__NUM */
  unsigned flags; /* LSIM__REQ, LSIM__LO_OPEN, LSIM__HI_OPEN */
  double lo, hi;  /* bounds; integers use [lo, hi] */
  double def;     /* value taken when the key is optional and absent */
  void *dst;
} lsim__field;

#define LSIM__N(a) ((int)(sizeof(a) / sizeof((a)[0])))

static int lsim__allowed(const char *key, const lsim__field *f, int nf,
                         const char *const *extra) {
  for (int i = 0; i < nf; i++)
    if (strcmp(f[i].key, key) == 0)
      return 1;
  for (int i = 0; extra && extra[i]; i++)
    if (strcmp(extra[i], key) == 0)
      return 1;
  return 0;
}

/*
** Every key of obj must be a field of f[0..nf) or listed in extra.  A key
** given twice was already refused by the JSON layer (E_SCN_DUP).
*/
static lsim_err lsim__keys(const lsim__ctx *c, const cJSON *obj,
                           const char *path, const lsim__field *f, int nf,
                           const char *const *extra) {
  for (const cJSON *k = obj->child; k; k = k->next) {
    char kpath[LSIM__PATHBUF];
    lsim__key_path(kpath, path, k->string);
    if (!lsim__allowed(k->string, f, nf, extra)) {
      const char *names[32];
      int n = 0;
      char list[300];
      for (int i = 0; i < nf && n < 31; i++)
        names[n++] = f[i].key;
      for (int i = 0; extra && extra[i] && n < 31; i++)
        names[n++] = extra[i];
      names[n] = NULL;
      lsim__join(list, sizeof list, names);
      return lsim__bad(c, LSIM_E_SCN_UNKNOWN_KEY, kpath,
                       "unknown key (allowed: %s)", list);
    }
  }
  return 0;
}

/* Read the fields of f from obj (NULL: an absent optional object). */
static lsim_err lsim__fields(const lsim__ctx *c, const cJSON *obj,
                             const char *path, const lsim__field *f, int nf) {
  for (int i = 0; i < nf; i++) {
    char kpath[LSIM__PATHBUF];
    const cJSON *v =
        obj ? cJSON_GetObjectItemCaseSensitive(obj, f[i].key) : NULL;
    lsim__key_path(kpath, path, f[i].key);
    int64_t iv = 0;
    double dv = f[i].def;
    lsim_err err = 0;
    if (!v) {
      if (f[i].flags & LSIM__REQ)
        return lsim__bad(c, LSIM_E_SCN_MISSING, kpath,
                         "required key is missing");
      iv = (int64_t)f[i].def;
    } else if (f[i].type == LSIM__NUM) {
      err = lsim__real(c, v, kpath, f[i].lo, f[i].hi, f[i].flags, &dv);
    } else {
      err = lsim__int(c, v, kpath, f[i].lo, f[i].hi, &iv);
    }
    if (err)
      return err;
    switch (f[i].type) {
    case LSIM__I64:
      *(int64_t *)f[i].dst = iv;
      break;
    case LSIM__I32:
      *(int *)f[i].dst = (int)iv;
      break;
    default:
      *(double *)f[i].dst = dv;
      break;
    }
  }
  return 0;
}

/* A required object member whose keys are exactly the fields of f plus
** extra; its path goes to kpath. */
static lsim_err lsim__object(const lsim__ctx *c, const cJSON *parent,
                             const char *path, const char *key,
                             const lsim__field *f, int nf,
                             const char *const *extra, const cJSON **out,
                             char kpath[LSIM__PATHBUF]) {
  lsim_err err = lsim__member(c, parent, path, key, "object", 1, out, kpath);
  if (!err)
    err = lsim__keys(c, *out, kpath, f, nf, extra);
  if (!err)
    err = lsim__fields(c, *out, kpath, f, nf);
  return err;
}

/* ---- registered names (backend, policies) -------------------------------- */

typedef struct lsim__registry {
  const char *key;  /* JSON key */
  const char *what; /* word for the message */
  const char *def;
  int (*known)(const char *name);
  const char *const *(*names)(void);
  lsim_err code;
  char *dst; /* LSIM_NAME_MAX bytes */
} lsim__registry;

static int lsim__is_backend(const char *n) { return !!lsim_backend_find(n); }
static int lsim__is_sched(const char *n) { return !!lsim_sched_find(n); }
static int lsim__is_evict(const char *n) { return !!lsim_evict_find(n); }
static int lsim__is_prefetch(const char *n) { return !!lsim_prefetch_find(n); }
static int lsim__is_placement(const char *n) {
  return lsim_placement_find(n) >= 0;
}

/* ---- execution mode and clock ($.execute, $.clock) ------------------------ */

static const char *const lsim__execute_names[] = {"adapters", "full", NULL};
static const char *const lsim__clock_names[] = {"model", "measured", NULL};

static int lsim__find(const char *const *names, const char *name) {
  for (int i = 0; name && names[i]; i++)
    if (strcmp(names[i], name) == 0)
      return i;
  return -1;
}

const char *lsim_scenario_execute_name(int e) {
  return e >= 0 && e < 2 ? lsim__execute_names[e] : NULL;
}
int lsim_scenario_execute_find(const char *name) {
  return lsim__find(lsim__execute_names, name);
}
const char *lsim_scenario_clock_name(int k) {
  return k >= 0 && k < 2 ? lsim__clock_names[k] : NULL;
}
int lsim_scenario_clock_find(const char *name) {
  return lsim__find(lsim__clock_names, name);
}
const char *lsim_scenario_execute_names(void) { return "adapters, full"; }
const char *lsim_scenario_clock_names(void) { return "model, measured"; }

/* obj[key], a string naming one of names, into *out (absent: 0, the
** first name); E_SCN_MODE for another string. */
static lsim_err lsim__mode(const lsim__ctx *c, const cJSON *obj,
                           const char *key, const char *const *names,
                           const char *list, int *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  char kpath[LSIM__PATHBUF];
  lsim__key_path(kpath, "$", key);
  *out = 0;
  if (!v)
    return 0;
  if (!cJSON_IsString(v))
    return lsim__bad(c, LSIM_E_SCN_TYPE, kpath, "must be a string (got %s)",
                     lsim__type_name(v));
  int k = lsim__find(names, v->valuestring);
  if (k < 0) {
    char q[64];
    return lsim__bad(c, LSIM_E_SCN_MODE, kpath, "unknown %s '%s' (known: %s)",
                     key, lsim__quote(v->valuestring, q, sizeof q), list);
  }
  *out = k;
  return 0;
}

static lsim_err lsim__named(const lsim__ctx *c, const cJSON *obj,
                            const char *path, const lsim__registry *r) {
  const cJSON *v = obj ? cJSON_GetObjectItemCaseSensitive(obj, r->key) : NULL;
  const char *name = r->def;
  char kpath[LSIM__PATHBUF];
  lsim__key_path(kpath, path, r->key);
  if (v) {
    if (!cJSON_IsString(v))
      return lsim__bad(c, LSIM_E_SCN_TYPE, kpath, "must be a string (got %s)",
                       lsim__type_name(v));
    name = v->valuestring;
  }
  if (!r->known(name)) {
    char q[64], list[256];
    lsim__join(list, sizeof list, r->names());
    return lsim__bad(c, r->code, kpath, "unknown %s '%s' (known: %s)", r->what,
                     lsim__quote(name, q, sizeof q), list);
  }
  size_t n = strlen(name);
  if (n >= LSIM_NAME_MAX)
    return lsim__bad(c, LSIM_E_SCN_RANGE, kpath,
                     "must be 1 to %d bytes long (got %zu)", LSIM_NAME_MAX - 1,
                     n);
  memcpy(r->dst, name, n + 1);
  return 0;
}

/* ---- sections ------------------------------------------------------------ */

static lsim_err lsim__policies(const lsim__ctx *c, const cJSON *root,
                               lsim_scenario *sc) {
  static const char *const keys[] = {"scheduler", "evict", "prefetch",
                                     "placement", NULL};
  const lsim__registry regs[] = {
      {"scheduler", "scheduler", "fcfs", lsim__is_sched, lsim_sched_names,
       LSIM_E_SCN_POLICY, sc->scheduler},
      {"evict", "eviction policy", "lru", lsim__is_evict, lsim_evict_names,
       LSIM_E_SCN_POLICY, sc->evict},
      {"prefetch", "prefetch policy", "none", lsim__is_prefetch,
       lsim_prefetch_names, LSIM_E_SCN_POLICY, sc->prefetch},
      {"placement", "placement policy", "least_loaded", lsim__is_placement,
       lsim_placement_names, LSIM_E_SCN_POLICY, sc->placement},
  };
  const cJSON *o;
  char p[LSIM__PATHBUF];
  lsim_err err = lsim__member(c, root, "$", "policies", "object", 0, &o, p);
  if (!err && o)
    err = lsim__keys(c, o, p, NULL, 0, keys);
  for (int i = 0; !err && i < LSIM__N(regs); i++)
    err = lsim__named(c, o, p, &regs[i]);
  return err;
}

static lsim_err lsim__workers(const lsim__ctx *c, const cJSON *root,
                              lsim_scenario *sc) {
  const lsim__field f[] = {
      {"count", LSIM__I32, LSIM__REQ, 1, 1024, 0, &sc->workers},
      {"pool_pages", LSIM__I64, LSIM__REQ, 1, 1073741824.0, 0, &sc->pool_pages},
      {"page_bytes", LSIM__I64, LSIM__REQ, 256, 2147483648.0, 0,
       &sc->page_bytes},
      {"h2d_gbps", LSIM__NUM, LSIM__REQ, 1e-6, 10000, 0,
       &sc->h2d_gbps},
      {"load_fixed_us", LSIM__I64, 0, 0, 1e9, 0, &sc->load_fixed_us},
      {"max_batch_tokens", LSIM__I64, LSIM__REQ, 1, 16777216.0, 0,
       &sc->max_batch_tokens},
      {"max_batch_requests", LSIM__I32, LSIM__REQ, 1, 65536, 0,
       &sc->max_batch_requests},
      {"guard_pages", LSIM__I64, 0, 0, 1073741824.0, 0, &sc->guard_pages},
      {"prefill_chunk", LSIM__I64, 0, 0, 16777216.0, 0, &sc->prefill_chunk},
      {"tp_degree", LSIM__I32, 0, 1, 64, 1, &sc->tp_degree},
      {"max_loras", LSIM__I32, 0, 0, 65536, 0, &sc->max_loras},
      {"max_lora_rank", LSIM__I32, 0, 0, 4096, 0, &sc->max_lora_rank},
      {"max_cpu_loras", LSIM__I32, 0, 0, 1048576, 0, &sc->max_cpu_loras},
      {"disk_gbps", LSIM__NUM, 0, 1e-6, 10000, 0, &sc->disk_gbps},
      {"disk_fixed_us", LSIM__I64, 0, 0, 1e9, 0, &sc->disk_fixed_us},
  };
  static const char *const extra[] = {"adapter_layout", "kv_reserve", NULL};
  const cJSON *o, *v;
  char p[LSIM__PATHBUF], lp[LSIM__PATHBUF];
  lsim_err err =
      lsim__object(c, root, "$", "workers", f, LSIM__N(f), extra, &o, p);
  sc->kv_incremental = 0;
  if (!err)
    err = lsim__member(c, o, p, "kv_reserve", "string", 0, &v, lp);
  if (!err && v) {
    if (strcmp(v->valuestring, "incremental") == 0)
      sc->kv_incremental = 1;
    else if (strcmp(v->valuestring, "whole") != 0)
      err = lsim__bad(c, LSIM_E_SCN_RANGE, lp,
                      "must be \"whole\" or \"incremental\"");
  }
  if (!err)
    err = lsim__member(c, o, p, "adapter_layout", "string", 0, &v, lp);
  sc->adapter_layout = LSIM_LAYOUT_TENSOR;
  if (!err && v) {
    if (strcmp(v->valuestring, "slora") == 0)
      sc->adapter_layout = LSIM_LAYOUT_SLORA;
    else if (strcmp(v->valuestring, "tensor") != 0)
      err = lsim__bad(c, LSIM_E_SCN_RANGE, lp,
                      "must be \"tensor\" or \"slora\"");
  }
  return err;
}

/* ---- $.model (docs/SCENARIO.md "model", backends/shape.h) --------------- */

/* Whether $.model gives the key `dotted` ("rope.scaling.factor"). */
static int lsim__given(const cJSON *o, const char *dotted) {
  char part[LSIM_NAME_MAX];
  while (o && *dotted) {
    size_t n = strcspn(dotted, ".");
    if (n >= sizeof part || !cJSON_IsObject(o))
      return 0;
    memcpy(part, dotted, n);
    part[n] = '\0';
    o = cJSON_GetObjectItemCaseSensitive(o, part);
    dotted += n + (dotted[n] == '.');
  }
  return o != NULL;
}

static lsim_err lsim__choice(const lsim__ctx *c, const cJSON *obj,
                             const char *path, const char *key,
                             const char *const *names, int def, lsim_err code,
                             int *out);

/* An optional string member of $.model that must be one of names[]: *dst
** (kept when absent) is the enum value, names[0] being `base`. */
static lsim_err lsim__model_choice(const lsim__ctx *c, const cJSON *o,
                                   const char *path, const char *key,
                                   const char *const *names, int base,
                                   int *dst) {
  int i = 0;
  lsim_err err =
      lsim__choice(c, o, path, key, names, *dst - base, LSIM_E_SCN_RANGE, &i);
  if (!err)
    *dst = base + i;
  return err;
}

/* $.model.rope: theta over the preset's, and scaling, which replaces the
** preset's whole ({"type": "none"} removes it). */
static lsim_err lsim__rope(const lsim__ctx *c, const cJSON *o,
                           const char *path, lsim_rope *r) {
  static const char *const extra[] = {"scaling", NULL};
  static const char *const sextra[] = {"type", NULL};
  const lsim__field f[] = {
      {"theta", LSIM__NUM, LSIM__LO_OPEN, 0, 1e12, r->theta, &r->theta},
  };
  const lsim__field sf[] = {
      {"factor", LSIM__NUM, LSIM__REQ, 1, 1024, 0, &r->factor},
      {"low_freq_factor", LSIM__NUM, LSIM__REQ | LSIM__LO_OPEN, 0, 1e6, 0,
       &r->low_freq_factor},
      {"high_freq_factor", LSIM__NUM, LSIM__REQ | LSIM__LO_OPEN, 0, 1e6, 0,
       &r->high_freq_factor},
      {"original_max_position", LSIM__I64, LSIM__REQ, 1, 16777216.0, 0,
       &r->original_max_position},
  };
  const cJSON *ro, *so, *tv;
  char rp[LSIM__PATHBUF], sp[LSIM__PATHBUF], tp[LSIM__PATHBUF];
  lsim_err err = lsim__member(c, o, path, "rope", "object", 0, &ro, rp);
  if (err || !ro)
    return err;
  if ((err = lsim__keys(c, ro, rp, f, LSIM__N(f), extra)) ||
      (err = lsim__fields(c, ro, rp, f, LSIM__N(f))) ||
      (err = lsim__member(c, ro, rp, "scaling", "object", 0, &so, sp)))
    return err;
  if (!so)
    return 0;
  r->scaling = LSIM_ROPE_SCALING_NONE;
  if ((err = lsim__member(c, so, sp, "type", "string", 1, &tv, tp)) ||
      (err = lsim__model_choice(c, so, sp, "type", lsim_shape_scaling_names(),
                                LSIM_ROPE_SCALING_NONE, &r->scaling)))
    return err;
  if (r->scaling == LSIM_ROPE_SCALING_NONE) {
    /* no factors: any other key is one the rule does not have */
    r->factor = r->low_freq_factor = r->high_freq_factor = 0;
    r->original_max_position = 0;
    return lsim__keys(c, so, sp, NULL, 0, sextra);
  }
  if ((err = lsim__keys(c, so, sp, sf, LSIM__N(sf), sextra)))
    return err;
  return lsim__fields(c, so, sp, sf, LSIM__N(sf));
}

/* $.model.adapter_modules: distinct module names into a bit set. */
static lsim_err lsim__adapter_modules(const lsim__ctx *c, const cJSON *o,
                                      const char *path, unsigned *mask,
                                      int *given) {
  const cJSON *arr, *v;
  char ap[LSIM__PATHBUF], ip[LSIM__PATHBUF], q[64], list[200];
  int n = 0;
  lsim_err err = lsim__member(c, o, path, "adapter_modules", "array", 0, &arr,
                              ap);
  *given = arr != NULL;
  if (err || !arr)
    return err;
  if ((err = lsim__array(c, arr, ap, LSIM_MOD_COUNT, &n)))
    return err;
  *mask = 0;
  for (int i = 0; i < n; i++) {
    v = cJSON_GetArrayItem(arr, i);
    lsim__idx_path(ip, ap, i);
    if (!cJSON_IsString(v))
      return lsim__bad(c, LSIM_E_SCN_TYPE, ip, "must be a string (got %s)",
                       lsim__type_name(v));
    int m = lsim_shape_module_find(v->valuestring);
    if (m < 0) {
      lsim__join(list, sizeof list, lsim_shape_module_names());
      return lsim__bad(c, LSIM_E_SCN_RANGE, ip,
                       "unknown module '%s' (known: %s)",
                       lsim__quote(v->valuestring, q, sizeof q), list);
    }
    if (*mask & (1u << m))
      return lsim__bad(c, LSIM_E_SCN_DUP, ip, "module %s is named twice",
                       v->valuestring);
    *mask |= 1u << m;
  }
  return 0;
}

/* $.model.targets as given (unchanged from before presets). */
static lsim_err lsim__targets(const lsim__ctx *c, const cJSON *arr,
                              const char *ap, lsim_scenario *sc) {
  static const char *const tkeys[] = {"name", NULL};
  const cJSON *t, *nm;
  char ip[LSIM__PATHBUF], np[LSIM__PATHBUF];
  lsim_err err = lsim__array(c, arr, ap, LSIM_MAX_TARGETS, &sc->ntargets);
  if (err)
    return err;
  for (int i = 0; i < sc->ntargets; i++) {
    lsim_target *tg = &sc->targets[i];
    const lsim__field ff[] = {
        {"d_in", LSIM__I64, LSIM__REQ, 1, 1048576.0, 0, &tg->d_in},
        {"d_out", LSIM__I64, LSIM__REQ, 1, 1048576.0, 0, &tg->d_out},
    };
    if ((err = lsim__element(c, arr, i, ap, &t, ip)) ||
        (err = lsim__keys(c, t, ip, ff, LSIM__N(ff), tkeys)) ||
        (err = lsim__member(c, t, ip, "name", "string", 1, &nm, np)) ||
        (err = lsim__str(c, nm, np, 1, tg->name, sizeof tg->name)) ||
        (err = lsim__fields(c, t, ip, ff, LSIM__N(ff))))
      return err;
    for (int j = 0; j < i; j++)
      if (strcmp(sc->targets[j].name, tg->name) == 0)
        return lsim__bad(c, LSIM_E_SCN_DUP, np,
                         "duplicate target name (also at [%d])", j);
  }
  return 0;
}

/*
** Explicit targets against the rest of $.model: with adapter_modules they
** must name exactly those modules; with a full shape each target named
** after a module must have that module's dimensions.  Without
** adapter_modules the module bits come from the target names.
*/
static lsim_err lsim__targets_agree(const lsim__ctx *c, const char *ap,
                                    int modules_given, lsim_scenario *sc) {
  lsim_model_shape *m = &sc->model;
  char ip[LSIM__PATHBUF], kp[LSIM__PATHBUF];
  unsigned named = 0;
  for (int i = 0; i < sc->ntargets; i++) {
    const lsim_target *tg = &sc->targets[i];
    int mod = lsim_shape_module_find(tg->name);
    lsim__idx_path(ip, ap, i);
    if (modules_given && (mod < 0 || !(m->adapter_modules & (1u << mod)))) {
      lsim__key_path(kp, ip, "name");
      return lsim__bad(c, LSIM_E_SCN_CONFLICT, kp,
                       "target %s is not one of $.model.adapter_modules",
                       tg->name);
    }
    if (mod < 0)
      continue;
    named |= 1u << mod;
    if (!m->full)
      continue;
    int64_t din, dout;
    lsim_shape_module_dims(m, mod, &din, &dout);
    if (tg->d_in != din || tg->d_out != dout) {
      int in = tg->d_in != din;
      lsim__key_path(kp, ip, in ? "d_in" : "d_out");
      return lsim__bad(c, LSIM_E_SCN_CONFLICT, kp,
                       "the model's shape gives %s %s %" PRId64
                       " (got %" PRId64 ")",
                       tg->name, in ? "d_in" : "d_out", in ? din : dout,
                       in ? tg->d_in : tg->d_out);
    }
  }
  if (modules_given && named != m->adapter_modules) {
    lsim__key_path(kp, "$.model", "adapter_modules");
    for (int mod = 0; mod < LSIM_MOD_COUNT; mod++)
      if ((m->adapter_modules & ~named) & (1u << mod))
        return lsim__bad(c, LSIM_E_SCN_CONFLICT, kp,
                         "names %s, which $.model.targets lacks",
                         lsim_shape_module_names()[mod]);
  }
  m->adapter_modules = named;
  return 0;
}

/*
** $.model: a preset's shape (or a custom one's defaults), each key given
** over it, then the whole checked (lsim_shape_check), then the targets,
** given or derived.  A key a preset fills is optional; without a preset
** layers, kv_heads, head_dim, dtype_bytes (or dtype) and targets (or a full
** shape with adapter_modules) are required, as before presets existed.
*/
static lsim_err lsim__model(const lsim__ctx *c, const cJSON *root,
                            lsim_scenario *sc) {
  static const char *const extra[] = {
      "preset", "norm",   "activation", "dtype", "tie_embeddings",
      "rope",   "adapter_modules",      "targets", NULL};
  static const char *const full_keys[] = {"hidden", "intermediate", "q_heads",
                                          "vocab"};
  lsim_model_shape *m = &sc->model;
  const cJSON *o, *pv, *tv, *arr;
  char p[LSIM__PATHBUF], kp[LSIM__PATHBUF], tp[LSIM__PATHBUF], q[64],
      list[200];
  lsim_err err = lsim__member(c, root, "$", "model", "object", 1, &o, p);
  if (err)
    return err;
  if ((err = lsim__member(c, o, p, "preset", "string", 0, &pv, kp)))
    return err;
  if (pv) {
    const lsim_model_shape *ps = lsim_shape_preset_find(pv->valuestring);
    if (!ps) {
      lsim__join(list, sizeof list, lsim_shape_preset_names());
      return lsim__bad(c, LSIM_E_SCN_RANGE, kp,
                       "unknown model preset '%s' (known: %s)",
                       lsim__quote(pv->valuestring, q, sizeof q), list);
    }
    *m = *ps;
  } else {
    lsim_shape_custom(m);
  }
  /* a preset's value is each key's default; without one the keys the
  ** simulator always needed stay required */
  const unsigned req = pv ? 0 : LSIM__REQ;
  const lsim__field f[] = {
      {"layers", LSIM__I32, req, 1, 1024, m->layers, &m->layers},
      {"kv_heads", LSIM__I64, req, 1, 4096, (double)m->kv_heads, &m->kv_heads},
      {"head_dim", LSIM__I64, req, 1, 65536, (double)m->head_dim,
       &m->head_dim},
      {"dtype_bytes", LSIM__I32, 0, 1, 4, m->dtype_bytes, &m->dtype_bytes},
      {"hidden", LSIM__I64, 0, 1, 1048576.0, (double)m->hidden, &m->hidden},
      {"intermediate", LSIM__I64, 0, 1, 1048576.0, (double)m->intermediate,
       &m->intermediate},
      {"q_heads", LSIM__I64, 0, 1, 4096, (double)m->q_heads, &m->q_heads},
      {"vocab", LSIM__I64, 0, 1, 16777216.0, (double)m->vocab, &m->vocab},
      {"norm_eps", LSIM__NUM, LSIM__LO_OPEN | LSIM__HI_OPEN, 0, 1,
       m->norm_eps, &m->norm_eps},
  };
  if ((err = lsim__keys(c, o, p, f, LSIM__N(f), extra)) ||
      (err = lsim__fields(c, o, p, f, LSIM__N(f))))
    return err;
  lsim__key_path(kp, p, "dtype_bytes");
  if (m->dtype_bytes == 3)
    return lsim__bad(c, LSIM_E_SCN_RANGE, kp, "must be one of 1, 2, 4 (got %d)",
                     m->dtype_bytes);
  if ((err = lsim__model_choice(c, o, p, "norm", lsim_shape_norm_names(),
                          LSIM_NORM_RMSNORM, &m->norm)) ||
      (err = lsim__model_choice(c, o, p, "activation", lsim_shape_act_names(),
                          LSIM_ACT_SILU, &m->activation)) ||
      (err = lsim__model_choice(c, o, p, "dtype", lsim_shape_dtype_names(),
                          LSIM_DTYPE_BF16, &m->dtype)) ||
      (err = lsim__member(c, o, p, "tie_embeddings", "boolean", 0, &tv, tp)) ||
      (err = lsim__rope(c, o, p, &m->rope)))
    return err;
  if (tv)
    m->tie_embeddings = cJSON_IsTrue(tv);
  /* dtype and dtype_bytes say one thing: a given dtype sizes the elements
  ** unless dtype_bytes is given too (then lsim_shape_check compares them) */
  if (lsim__given(o, "dtype") && !lsim__given(o, "dtype_bytes"))
    m->dtype_bytes = lsim_shape_dtype_size(m->dtype);
  lsim__key_path(kp, p, "dtype_bytes");
  if (m->dtype_bytes == 0)
    return lsim__bad(c, LSIM_E_SCN_MISSING, kp,
                     "required key is missing (or give $.model.dtype)");
  /* the dimensions of the forward pass come all together or not at all */
  int nfull = 0;
  for (int i = 0; i < LSIM__N(full_keys); i++)
    nfull += lsim__given(o, full_keys[i]) || pv;
  if (nfull > 0 && nfull < LSIM__N(full_keys))
    for (int i = 0; i < LSIM__N(full_keys); i++)
      if (!lsim__given(o, full_keys[i])) {
        lsim__key_path(kp, p, full_keys[i]);
        return lsim__bad(c, LSIM_E_SCN_MISSING, kp,
                         "required with a full shape: hidden, intermediate, "
                         "q_heads and vocab go together (or use a preset)");
      }
  m->full = nfull == LSIM__N(full_keys);
  lsim_shape_issue is;
  if ((err = lsim_shape_check(m, &is))) {
    /* blame the first key involved that the scenario gives: a preset on
    ** its own passes the check */
    lsim__key_path(kp, p, "preset");
    for (int i = 0; is.keys[i]; i++)
      if (lsim__given(o, is.keys[i])) {
        lsim__key_path(kp, p, is.keys[i]);
        break;
      }
    return lsim__bad(c, is.code, kp, "%s", is.what);
  }

  int modules_given = 0;
  char ap[LSIM__PATHBUF];
  if ((err = lsim__adapter_modules(c, o, p, &m->adapter_modules,
                                   &modules_given)) ||
      (err = lsim__member(c, o, p, "targets", "array", 0, &arr, ap)))
    return err;
  if (arr) {
    if ((err = lsim__targets(c, arr, ap, sc)) ||
        (err = lsim__targets_agree(c, ap, modules_given, sc)))
      return err;
  } else if (!m->full) {
    return lsim__bad(c, LSIM_E_SCN_MISSING, ap,
                     "required key is missing (unless the model has a full "
                     "shape and adapter_modules)");
  } else if (!modules_given) {
    lsim__key_path(kp, p, "adapter_modules");
    lsim__join(list, sizeof list, lsim_shape_module_names());
    return lsim__bad(c, LSIM_E_SCN_MISSING, kp,
                     "required without $.model.targets: the projections "
                     "that carry adapters, of %s",
                     list);
  } else {
    sc->ntargets = 0;
    for (int mod = 0; mod < LSIM_MOD_COUNT; mod++)
      if (m->adapter_modules & (1u << mod)) {
        lsim_target *tg = &sc->targets[sc->ntargets++];
        snprintf(tg->name, sizeof tg->name, "%s",
                 lsim_shape_module_names()[mod]);
        lsim_shape_module_dims(m, mod, &tg->d_in, &tg->d_out);
      }
  }
  sc->layers = m->layers;
  sc->kv_heads = m->kv_heads;
  sc->head_dim = m->head_dim;
  sc->dtype_bytes = m->dtype_bytes;
  return 0;
}

static lsim_err lsim__resolve(const lsim__ctx *c, const cJSON *v,
                              const char *path, const char *basedir,
                              int allow_dir, char *out);

/* $.gpu: a GPU class, the directory of profiles/ that $.model.preset's
** profile is looked up in */
static lsim_err lsim__gpu(const lsim__ctx *c, const cJSON *root,
                          lsim_scenario *sc, const cJSON **gv,
                          char gp[LSIM__PATHBUF]) {
  char q[80];
  lsim_err err = lsim__member(c, root, "$", "gpu", "string", 0, gv, gp);
  sc->gpu[0] = '\0';
  if (err || !*gv)
    return err;
  const char *g = (*gv)->valuestring;
  size_t n = strlen(g);
  int ok = n >= 1 && n < sizeof sc->gpu && g[0] != '.';
  for (size_t i = 0; ok && i < n; i++)
    ok = (g[i] >= 'a' && g[i] <= 'z') || (g[i] >= '0' && g[i] <= '9') ||
         g[i] == '-' || g[i] == '_' || g[i] == '.';
  if (!ok)
    return lsim__bad(c, LSIM_E_SCN_RANGE, gp,
                     "must be a GPU class of 1 to %zu characters of "
                     "[a-z0-9._-], not starting with '.' (got '%s')",
                     sizeof sc->gpu - 1, lsim__quote(g, q, sizeof q));
  memcpy(sc->gpu, g, n + 1);
  return 0;
}

static lsim_err lsim__cost(const lsim__ctx *c, const cJSON *root,
                           const char *basedir, lsim_scenario *sc) {
  static const char *const extra[] = {"profile", NULL};
  const cJSON *gv = NULL, *o = NULL, *pv = NULL;
  char gp[LSIM__PATHBUF], p[LSIM__PATHBUF], pp[LSIM__PATHBUF];
  lsim_err err = lsim__gpu(c, root, sc, &gv, gp);
  if (err)
    return err;
  /* with a profile named ($.cost.profile, or $.gpu), the five linear
  ** coefficients may be left out: the profile gives the iteration cost */
  const cJSON *co = cJSON_GetObjectItemCaseSensitive(root, "cost");
  int named = gv || (cJSON_IsObject(co) &&
                     cJSON_GetObjectItemCaseSensitive(co, "profile"));
  unsigned req = named ? 0 : LSIM__REQ;
  const lsim__field f[] = {
      {"iter_fixed_ns", LSIM__I64, req, 0, 1e12, 0, &sc->iter_fixed_ns},
      {"prefill_token_ns", LSIM__I64, req, 0, 1e12, 0,
       &sc->prefill_token_ns},
      {"decode_token_ns", LSIM__I64, req, 0, 1e12, 0, &sc->decode_token_ns},
      {"segment_ns", LSIM__I64, req, 0, 1e12, 0, &sc->segment_ns},
      {"rank_row_ps", LSIM__I64, req, 0, 1e12, 0, &sc->rank_row_ps},
      {"collective_latency_ns", LSIM__I64, 0, 0, 1e12, 0,
       &sc->collective_latency_ns},
      {"link_gbps", LSIM__NUM, 0, 0, 1e6, 0, &sc->link_gbps},
  };
  sc->cost_profile[0] = '\0';
  if ((co || !gv) &&
      ((err = lsim__object(c, root, "$", "cost", f, LSIM__N(f), extra, &o,
                           p)) ||
       (err = lsim__member(c, o, p, "profile", "string", 0, &pv, pp))))
    return err;
  const char *where = pp;
  if (pv) {
    if ((err = lsim__resolve(c, pv, pp, basedir, 0, sc->cost_profile)))
      return err;
  } else if (gv) {
    char mp[LSIM__PATHBUF];
    lsim__key_path(mp, "$", "model");
    lsim__key_path(mp, mp, "preset");
    if (!sc->model.preset[0])
      return lsim__bad(c, LSIM_E_SCN_MISSING, mp,
                       "required with $.gpu, which picks the profile of "
                       "that preset on that GPU (or name one with "
                       "$.cost.profile)");
    lsim_errbuf e2 = LSIM_ERRBUF_INIT;
    if ((err = lsim_scenario_find_profile(basedir, sc->gpu, sc->model.preset,
                                          sc->cost_profile, &e2)))
      return lsim__bad(c, err, gp, "%s", e2.msg);
    where = gp;
  } else {
    return 0;
  }
  lsim_errbuf e2 = LSIM_ERRBUF_INIT;
  if ((err = lsim_scenario_use_profile(sc, sc->cost_profile, &e2)))
    return lsim__bad(c,
                     err == LSIM_E_DEV_PROFILE_SHAPE || err == LSIM_E_SCN_CONFLICT
                         ? err
                         : LSIM_E_DEV_PROFILE,
                     err == LSIM_E_SCN_CONFLICT && gv ? gp : where, "%s",
                     e2.msg);
  return 0;
}

lsim_err lsim_scenario_use_profile(lsim_scenario *sc, const char *path,
                                   lsim_errbuf *eb) {
  lsim_profile p;
  lsim_err rc = lsim_profile_read(path, &p, eb);
  if (rc)
    return rc;
  char saved[LSIM_PATH_MAX];
  if (snprintf(saved, sizeof saved, "%s", path) >= (int)sizeof saved)
    return lsim_fail(eb, LSIM_E_USAGE, "profile path too long: %s", path);
  if (p.version == 1) {
    sc->iter_fixed_ns = p.linear.iter_fixed_ns;
    sc->prefill_token_ns = p.linear.prefill_token_ns;
    sc->decode_token_ns = p.linear.decode_token_ns;
    sc->segment_ns = p.linear.segment_ns;
    sc->rank_row_ps = p.linear.rank_row_ps;
    sc->cost_prof.on = 0;
    sc->copy_prof = 0;
    memcpy(sc->cost_profile, saved, sizeof saved);
    return 0;
  }
  if ((rc = lsim_profile_check_shape(&p, path, &sc->model, eb)))
    return rc;
  if (sc->gpu[0] && strcmp(sc->gpu, p.gpu_class) != 0)
    return lsim_fail(eb, LSIM_E_SCN_CONFLICT,
                     "$.gpu is '%s', but profile %s was measured on a '%s' "
                     "(%s)", sc->gpu, path, p.gpu_class, p.gpu_name);
  if (sc->tp_degree > 1)
    return lsim_fail(eb, LSIM_E_SCN_CONFLICT,
                     "profile %s times the whole model on one GPU; "
                     "$.workers.tp_degree %d splits it over several (use "
                     "the linear $.cost with collective_latency_ns and "
                     "link_gbps)", path, sc->tp_degree);
  int64_t elems = 0;
  for (int i = 0; i < sc->ntargets; i++)
    elems += sc->targets[i].d_in + sc->targets[i].d_out;
  lsim_cost_prof cp;
  lsim_errbuf e2 = LSIM_ERRBUF_INIT;
  if (lsim_cost_prof_bind(&p.coef, sc->layers, sc->ntargets, elems, &cp, &e2))
    return lsim_fail(eb, LSIM_E_DEV_PROFILE, "profile %s: $.coefficients.%s",
                     path, e2.msg);
  sc->cost_prof = cp;
  sc->copy_prof = p.copy_on;
  sc->copy_latency_ns = p.copy_latency_ns;
  sc->copy_gbps = p.copy_gbps;
  memcpy(sc->cost_profile, saved, sizeof saved);
  return 0;
}

lsim_err lsim_scenario_find_profile(const char *basedir, const char *gpu,
                                    const char *preset, char *out,
                                    lsim_errbuf *eb) {
  const char *env = getenv("LORASIM_PROFILE_DIR");
  const char *bd = basedir && basedir[0] ? basedir : ".";
  char dirs[5][LSIM_PATH_MAX], tried[1600] = "";
  int nd = 0;
  if (env && env[0])
    snprintf(dirs[nd++], LSIM_PATH_MAX, "%s", env);
  /* scenarios/X.json and scenarios/SET/X.json of the source tree */
  snprintf(dirs[nd++], LSIM_PATH_MAX, "%s/../profiles", bd);
  snprintf(dirs[nd++], LSIM_PATH_MAX, "%s/../../profiles", bd);
  snprintf(dirs[nd++], LSIM_PATH_MAX, "%s/profiles", bd);
#ifdef LSIM_SOURCE_DIR
  snprintf(dirs[nd++], LSIM_PATH_MAX, "%s/profiles", LSIM_SOURCE_DIR);
#endif
  for (int i = 0; i < nd; i++) {
    char f[LSIM_PATH_MAX];
    struct stat st;
    int n = snprintf(f, sizeof f, "%s/%s/%s.json", dirs[i], gpu, preset);
    if (n < 0 || (size_t)n >= sizeof f)
      continue;
    if (stat(f, &st) == 0 && S_ISREG(st.st_mode)) {
      memcpy(out, f, (size_t)n + 1);
      return 0;
    }
    size_t tl = strlen(tried);
    snprintf(tried + tl, sizeof tried - tl, "%s%s", tl ? ", " : "", f);
  }
  return lsim_fail(eb, LSIM_E_DEV_PROFILE_NONE,
                   "no profile of preset '%s' on GPU '%s' (tried %s; "
                   "lorasim profile makes one, docs/PROFILE.md)",
                   preset, gpu, tried);
}

void lsim_scenario_cost_model(const lsim_scenario *sc, lsim_cost_model *out) {
  *out = (lsim_cost_model){sc->iter_fixed_ns, sc->prefill_token_ns,
                           sc->decode_token_ns, sc->segment_ns,
                           sc->rank_row_ps, sc->cost_prof};
}

double lsim_scenario_copy_ns(const lsim_scenario *sc, int64_t bytes) {
  if (sc->copy_prof)
    return sc->copy_latency_ns + (double)bytes / sc->copy_gbps;
  return (double)bytes / sc->h2d_gbps + (double)sc->load_fixed_us * 1000.0;
}

/* ---- $.adapters.compression (codes of engine/err_cmp.h) ----------------- */

/* An optional integer obj[key] in [lo, hi] (def when absent); a value out
** of range is `range_code`. */
static lsim_err lsim__cmp_int(const lsim__ctx *c, const cJSON *obj,
                              const char *path, const char *key, int req,
                              double lo, double hi, int64_t def,
                              lsim_err range_code, int64_t *out) {
  char kp[LSIM__PATHBUF], got[40], a[40], b[40];
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  lsim__key_path(kp, path, key);
  *out = def;
  if (!v)
    return req ? lsim__bad(c, LSIM_E_CMP_MISSING, kp, "required key is missing")
               : 0;
  int64_t x = 0;
  lsim_json_int_st st = lsim_json_int(v, &x);
  if (st == LSIM_JSON_INT_NOT_NUMBER)
    return lsim__bad(c, LSIM_E_CMP_TYPE, kp, "must be an integer (got %s)",
                     lsim__type_name(v));
  if (st != LSIM_JSON_INT_OK || x > (int64_t)LSIM__INT_LIMIT ||
      x < -(int64_t)LSIM__INT_LIMIT)
    return lsim__bad(c, LSIM_E_CMP_TYPE, kp, "must be an integer (got %s)",
                     lsim_json_num_text(v));
  double d = (double)x; /* exact: |x| <= 2^53 */
  if (d < lo || d > hi)
    return lsim__bad(c, range_code, kp, "must be an integer in [%s, %s] (got %s)",
                     lsim__num_str(lo, a), lsim__num_str(hi, b),
                     lsim__num_str(d, got));
  *out = x;
  return 0;
}

/* An optional string obj[key] of 1..size-1 bytes into dst (unchanged when
** absent); with `ident`, only LSIM__NAME_CHARS (else E_CMP_TYPE). */
static lsim_err lsim__cmp_str(const lsim__ctx *c, const cJSON *obj,
                              const char *path, const char *key, int req,
                              int ident, char *dst, size_t size) {
  char kp[LSIM__PATHBUF];
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  lsim__key_path(kp, path, key);
  if (!v)
    return req ? lsim__bad(c, LSIM_E_CMP_MISSING, kp, "required key is missing")
               : 0;
  if (!cJSON_IsString(v))
    return lsim__bad(c, LSIM_E_CMP_TYPE, kp, "must be a string (got %s)",
                     lsim__type_name(v));
  size_t n = strlen(v->valuestring);
  if (n == 0 || n >= size)
    return lsim__bad(c, LSIM_E_CMP_TYPE, kp,
                     "must be 1 to %zu bytes long (got %zu)", size - 1, n);
  if (ident && strspn(v->valuestring, LSIM__NAME_CHARS) != n) {
    char q[64];
    return lsim__bad(c, LSIM_E_CMP_TYPE, kp,
                     "must use only the characters [A-Za-z0-9_.-] (got '%s')",
                     lsim__quote(v->valuestring, q, sizeof q));
  }
  memcpy(dst, v->valuestring, n + 1);
  return 0;
}

/*
** $.adapters.compression: the synthetic form {method, rank, clusters,
** seed?} or the bundle form {bundle}, either with affinity_weight? and
** version?.  Cross-section checks (the model's shapes, the pool, features
** that cannot serve it) are in lsim__cross_compression.
*/
static lsim_err lsim__compression(const lsim__ctx *c, const cJSON *adp,
                                  const char *apath, const char *basedir,
                                  lsim_scenario *sc) {
  lsim_compression_spec *cs = &sc->compression;
  const cJSON *o = cJSON_GetObjectItemCaseSensitive(adp, "compression");
  char p[LSIM__PATHBUF], kp[LSIM__PATHBUF];
  lsim__key_path(p, apath, "compression");
  if (!o)
    return 0;
  if (!cJSON_IsObject(o))
    return lsim__bad(c, LSIM_E_CMP_TYPE, p, "must be an object (got %s)",
                     lsim__type_name(o));
  static const char *const keys[] = {"method", "rank", "clusters", "seed",
                                     "bundle", "affinity_weight", "version",
                                     NULL};
  for (const cJSON *k = o->child; k; k = k->next) {
    int known = 0;
    for (int i = 0; keys[i] && !known; i++)
      known = strcmp(k->string, keys[i]) == 0;
    lsim__key_path(kp, p, k->string);
    if (!known) {
      char list[200];
      lsim__join(list, sizeof list, keys);
      return lsim__bad(c, LSIM_E_CMP_UNKNOWN_KEY, kp,
                       "unknown key (allowed: %s)", list);
    }
    for (const cJSON *q = o->child; q != k; q = q->next)
      if (strcmp(q->string, k->string) == 0)
        return lsim__bad(c, LSIM_E_CMP_UNKNOWN_KEY, kp, "duplicate key");
  }
  memset(cs, 0, sizeof *cs);
  cs->on = 1;
  snprintf(cs->version, sizeof cs->version, "v1");
  int64_t v;
  lsim_err err;
  if ((err = lsim__cmp_int(c, o, p, "affinity_weight", 0, 0, 1e12, 0,
                           LSIM_E_CMP_TYPE, &cs->affinity_weight)) ||
      (err = lsim__cmp_str(c, o, p, "version", 0, 1, cs->version,
                           sizeof cs->version)))
    return err;
  const cJSON *bundle = cJSON_GetObjectItemCaseSensitive(o, "bundle");
  if (bundle) {
    static const char *const synth[] = {"method", "rank", "clusters", "seed",
                                        NULL};
    for (int i = 0; synth[i]; i++)
      if (cJSON_GetObjectItemCaseSensitive(o, synth[i])) {
        lsim__key_path(kp, p, synth[i]);
        return lsim__bad(c, LSIM_E_CMP_SERVE_CONFLICT, kp,
                         "a bundle brings its own method, rank, clusters and "
                         "assignment: give either 'bundle' or the synthetic "
                         "form");
      }
    char f[LSIM_PATH_MAX];
    lsim__key_path(kp, p, "bundle");
    if ((err = lsim__cmp_str(c, o, p, "bundle", 1, 0, f, sizeof f)))
      return err;
    int n;
    if (f[0] == '/' || !basedir || !basedir[0] || strcmp(basedir, ".") == 0) {
      n = snprintf(cs->bundle, sizeof cs->bundle, "%s", f);
    } else {
      size_t bl = strlen(basedir);
      n = snprintf(cs->bundle, sizeof cs->bundle, "%s%s%s", basedir,
                   basedir[bl - 1] == '/' ? "" : "/", f);
    }
    if (n < 0 || (size_t)n >= sizeof cs->bundle)
      return lsim__bad(c, LSIM_E_CMP_TYPE, kp,
                       "resolved path is longer than %d bytes",
                       LSIM_PATH_MAX - 1);
    FILE *fp = fopen(cs->bundle, "rb");
    if (!fp) {
      char q[200], why[128];
      return lsim__bad(c, LSIM_E_CMP_BUNDLE, kp, "cannot open '%s': %s",
                       lsim__quote(cs->bundle, q, sizeof q),
                       lsim__os_err(errno, why));
    }
    fclose(fp);
    return 0;
  }
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "method");
  lsim__key_path(kp, p, "method");
  if (!m)
    return lsim__bad(c, LSIM_E_CMP_MISSING, kp,
                     "required key is missing (or give 'bundle')");
  if (!cJSON_IsString(m))
    return lsim__bad(c, LSIM_E_CMP_TYPE, kp, "must be a string (got %s)",
                     lsim__type_name(m));
  if (strcmp(m->valuestring, "jd_full") == 0)
    cs->method = LSIM_CMPM_JD_FULL;
  else if (strcmp(m->valuestring, "jd_diag") == 0)
    cs->method = LSIM_CMPM_JD_DIAG;
  else {
    char q[64];
    return lsim__bad(c, LSIM_E_CMP_METHOD, kp,
                     "must be 'jd_full' or 'jd_diag' (got '%s')",
                     lsim__quote(m->valuestring, q, sizeof q));
  }
  if ((err = lsim__cmp_int(c, o, p, "rank", 1, 1, 4096, 0, LSIM_E_CMP_RANK,
                           &v)))
    return err;
  cs->rank = (int)v;
  if ((err = lsim__cmp_int(c, o, p, "clusters", 1, 1, 1e6, 0,
                           LSIM_E_CMP_CLUSTERS, &v)))
    return err;
  cs->clusters = (int)v;
  if ((err = lsim__cmp_int(c, o, p, "seed", 0, 0, LSIM__INT_LIMIT, -1,
                           LSIM_E_CMP_TYPE, &v)))
    return err;
  cs->seed = v < 0 ? 0 : (uint64_t)v;
  if (v < 0)
    cs->seed = ~(uint64_t)0; /* the scenario seed, filled in by the root */
  return 0;
}

static lsim_err lsim__adapters(const lsim__ctx *c, const cJSON *root,
                               const char *basedir, lsim_scenario *sc) {
  static const char *const extra[] = {"ranks", "compression", NULL};
  const lsim__field f[] = {
      {"count", LSIM__I32, LSIM__REQ, 1, 1e6, 0, &sc->adapters},
      {"zipf_s", LSIM__NUM, 0, 0, 10, 0, &sc->zipf_s},
  };
  const cJSON *o, *arr, *r;
  char p[LSIM__PATHBUF], ap[LSIM__PATHBUF], ip[LSIM__PATHBUF];
  lsim_err err;
  if ((err = lsim__object(c, root, "$", "adapters", f, LSIM__N(f), extra, &o,
                          p)) ||
      (err = lsim__member(c, o, p, "ranks", "array", 1, &arr, ap)) ||
      (err = lsim__array(c, arr, ap, LSIM_MAX_RANK_CHOICES, &sc->nranks)))
    return err;
  for (int i = 0; i < sc->nranks; i++) {
    lsim_rank_choice *rc = &sc->ranks[i];
    const lsim__field rf[] = {
        {"rank", LSIM__I32, LSIM__REQ, 1, 4096, 0, &rc->rank},
        {"weight", LSIM__I64, LSIM__REQ, 1, 1e9, 0, &rc->weight},
    };
    if ((err = lsim__element(c, arr, i, ap, &r, ip)) ||
        (err = lsim__keys(c, r, ip, rf, LSIM__N(rf), NULL)) ||
        (err = lsim__fields(c, r, ip, rf, LSIM__N(rf))))
      return err;
    for (int j = 0; j < i; j++)
      if (sc->ranks[j].rank == rc->rank) {
        char kp[LSIM__PATHBUF];
        lsim__key_path(kp, ip, "rank");
        return lsim__bad(c, LSIM_E_SCN_DUP, kp,
                         "duplicate rank %d (also at [%d])", rc->rank, j);
      }
  }
  return lsim__compression(c, o, p, basedir, sc);
}

static lsim_err lsim__tenants(const lsim__ctx *c, const cJSON *root,
                              lsim_scenario *sc) {
  static const char *const extra[] = {"name", NULL};
  const cJSON *arr, *t, *nm;
  char ap[LSIM__PATHBUF], ip[LSIM__PATHBUF], np[LSIM__PATHBUF];
  lsim_err err;
  if ((err = lsim__member(c, root, "$", "tenants", "array", 1, &arr, ap)) ||
      (err = lsim__array(c, arr, ap, LSIM_MAX_TENANTS, &sc->ntenants)))
    return err;
  for (int i = 0; i < sc->ntenants; i++) {
    lsim_tenant *tn = &sc->tenants[i];
    const lsim__field f[] = {
        {"traffic_weight", LSIM__I64, LSIM__REQ, 1, 1e9, 0,
         &tn->traffic_weight},
    };
    if ((err = lsim__element(c, arr, i, ap, &t, ip)) ||
        (err = lsim__keys(c, t, ip, f, LSIM__N(f), extra)) ||
        (err = lsim__member(c, t, ip, "name", "string", 1, &nm, np)) ||
        (err = lsim__str(c, nm, np, 1, tn->name, sizeof tn->name)) ||
        (err = lsim__fields(c, t, ip, f, LSIM__N(f))))
      return err;
    for (int j = 0; j < i; j++)
      if (strcmp(sc->tenants[j].name, tn->name) == 0)
        return lsim__bad(c, LSIM_E_SCN_DUP, np,
                         "duplicate tenant name (also at [%d])", j);
  }
  return 0;
}

/* Resolve the string v against basedir into out[LSIM_PATH_MAX] and check
** that it names a readable regular file (or, with allow_dir, a
** directory). */
static lsim_err lsim__resolve(const lsim__ctx *c, const cJSON *v,
                              const char *path, const char *basedir,
                              int allow_dir, char *out) {
  const char *f = v->valuestring;
  char full[LSIM_PATH_MAX], q[200], why[128];
  int n;
  if (!f[0])
    return lsim__bad(c, LSIM_E_SCN_TRACE_FILE, path, "must name a file");
  if (f[0] == '/' || !basedir || !basedir[0] || strcmp(basedir, ".") == 0) {
    n = snprintf(full, sizeof full, "%s", f);
  } else {
    size_t bl = strlen(basedir);
    n = snprintf(full, sizeof full, "%s%s%s", basedir,
                 basedir[bl - 1] == '/' ? "" : "/", f);
  }
  if (n < 0 || (size_t)n >= sizeof full)
    return lsim__bad(c, LSIM_E_SCN_RANGE, path,
                     "resolved path is longer than %d bytes",
                     LSIM_PATH_MAX - 1);
  struct stat st;
  if (allow_dir && stat(full, &st) == 0 && S_ISDIR(st.st_mode)) {
    memcpy(out, full, (size_t)n + 1);
    return 0;
  }
  /* the type before the open: fopen of a FIFO blocks until a writer comes */
  if (stat(full, &st) == 0 && !S_ISREG(st.st_mode))
    return lsim__bad(c, LSIM_E_SCN_TRACE_FILE, path,
                     "'%s' is not a regular file%s",
                     lsim__quote(full, q, sizeof q),
                     allow_dir ? " or directory" : "");
  FILE *fp = fopen(full, "rb");
  if (!fp) {
    int e = errno;
    /* the real traces are not in the repository: say where they come from */
    return lsim__bad(c, LSIM_E_SCN_TRACE_FILE, path, "cannot open '%s': %s%s",
                     lsim__quote(full, q, sizeof q), lsim__os_err(e, why),
                     e == ENOENT ? " (a public trace? sh tools/fetch-traces.sh "
                                   "downloads them, docs/TRACES.md)"
                                 : "");
  }
  int regular = fstat(fileno(fp), &st) == 0 && S_ISREG(st.st_mode);
  fclose(fp);
  if (!regular)
    return lsim__bad(c, LSIM_E_SCN_TRACE_FILE, path,
                     "'%s' is not a regular file%s",
                     lsim__quote(full, q, sizeof q),
                     allow_dir ? " or directory" : "");
  memcpy(out, full, (size_t)n + 1);
  return 0;
}

/* An optional string obj[key] that must be one of names[] (NULL-terminated):
** its index into *out, or def when absent; unknown is `code`. */
static lsim_err lsim__choice(const lsim__ctx *c, const cJSON *obj,
                             const char *path, const char *key,
                             const char *const *names, int def, lsim_err code,
                             int *out) {
  const cJSON *v;
  char kp[LSIM__PATHBUF];
  lsim_err err = lsim__member(c, obj, path, key, "string", 0, &v, kp);
  if (err)
    return err;
  *out = def;
  if (!v)
    return 0;
  for (int i = 0; names[i]; i++)
    if (strcmp(names[i], v->valuestring) == 0) {
      *out = i;
      return 0;
    }
  char q[64], list[160];
  lsim__join(list, sizeof list, names);
  return lsim__bad(c, code, kp, "unknown value '%s' (known: %s)",
                   lsim__quote(v->valuestring, q, sizeof q), list);
}

/* A trace format name at obj[key] (absent: *out stays). */
static lsim_err lsim__format(const lsim__ctx *c, const cJSON *obj,
                             const char *path, const char *key, int *out) {
  const char *const *names = lsim_trace_format_names();
  int i = -1;
  lsim_err err =
      lsim__choice(c, obj, path, key, names, -1, LSIM_E_SCN_RANGE, &i);
  /* the list holds the file formats only: its index is not the format's
  ** registry value once an importer follows the generator */
  if (!err && i >= 0)
    *out = lsim_trace_format_find(names[i]);
  return err;
}

/* A length distribution object parent[key]; `field` 0 for prompt lengths,
** 1 for output lengths (what an empirical distribution samples). */
static lsim_err lsim__dist(const lsim__ctx *c, const cJSON *parent,
                           const char *path, const char *key,
                           const char *basedir, int field, lsim_len_dist *d) {
  static const char *const any[] = {"dist", "value", "min",  "max",
                                    "mean", "file",  "format", NULL};
  static const char *const kinds[] = {"fixed", "uniform", "exponential",
                                      "empirical", NULL};
  static const char *const dist_key[] = {"dist", NULL};
  static const char *const emp_keys[] = {"dist", "file", "format", NULL};
  int64_t value = 0, lo = 0, hi = 0;
  double mean = 0;
  const lsim__field fixed[] = {
      {"value", LSIM__I64, LSIM__REQ, 1, 1e7, 0, &value},
  };
  const lsim__field uniform[] = {
      {"min", LSIM__I64, LSIM__REQ, 1, 1e7, 0, &lo},
      {"max", LSIM__I64, LSIM__REQ, 1, 1e7, 0, &hi},
  };
  const lsim__field expo[] = {
      {"mean", LSIM__NUM, LSIM__REQ | LSIM__LO_OPEN, 0, 1e7, 0, &mean},
      {"min", LSIM__I64, LSIM__REQ, 1, 1e7, 0, &lo},
      {"max", LSIM__I64, LSIM__REQ, 1, 1e7, 0, &hi},
  };
  const lsim__field emp[] = {
      {"min", LSIM__I64, 0, 1, 1e7, 1, &lo},
      {"max", LSIM__I64, 0, 1, 1e7, 1e7, &hi},
  };
  const lsim__field *f[] = {fixed, uniform, expo, emp};
  const int nf[] = {LSIM__N(fixed), LSIM__N(uniform), LSIM__N(expo),
                    LSIM__N(emp)};
  const char *const *extra[] = {dist_key, dist_key, dist_key, emp_keys};
  const cJSON *o, *dv;
  char p[LSIM__PATHBUF], dp[LSIM__PATHBUF];
  lsim_err err;
  if ((err = lsim__member(c, parent, path, key, "object", 1, &o, p)) ||
      (err = lsim__keys(c, o, p, NULL, 0, any)) ||
      (err = lsim__member(c, o, p, "dist", "string", 1, &dv, dp)))
    return err;
  int k = 0;
  while (kinds[k] && strcmp(kinds[k], dv->valuestring) != 0)
    k++;
  if (!kinds[k]) {
    char q[64], list[64];
    lsim__join(list, sizeof list, kinds);
    return lsim__bad(c, LSIM_E_SCN_DIST, dp,
                     "unknown distribution '%s' (known: %s)",
                     lsim__quote(dv->valuestring, q, sizeof q), list);
  }
  if ((err = lsim__keys(c, o, p, f[k], nf[k], extra[k])) ||
      (err = lsim__fields(c, o, p, f[k], nf[k])))
    return err;
  memset(d, 0, sizeof *d);
  if (k == 0) {
    d->kind = LSIM_DIST_FIXED;
    d->min = d->max = value;
    return 0;
  }
  if (lo > hi) {
    char kp[LSIM__PATHBUF];
    lsim__key_path(kp, p, "max");
    return lsim__bad(c, LSIM_E_SCN_RANGE, kp,
                     "must be at least min (%" PRId64 ") (got %" PRId64 ")", lo,
                     hi);
  }
  d->kind = k == 1 ? LSIM_DIST_UNIFORM
            : k == 2 ? LSIM_DIST_EXP
                     : LSIM_DIST_EMPIRICAL;
  d->min = lo;
  d->max = hi;
  if (k == 2) {
    if (mean < (double)lo || mean > (double)hi) {
      char kp[LSIM__PATHBUF], got[40];
      lsim__key_path(kp, p, "mean");
      return lsim__bad(c, LSIM_E_SCN_RANGE, kp,
                       "must lie in [min, max] = [%" PRId64 ", %" PRId64
                       "] (got %s)",
                       lo, hi, lsim__num_str(mean, got));
    }
    d->mean = mean;
  }
  if (k == 3) {
    const cJSON *fv;
    char fp[LSIM__PATHBUF];
    if ((err = lsim__member(c, o, p, "file", "string", 1, &fv, fp)) ||
        (err = lsim__resolve(c, fv, fp, basedir, 0, d->file)))
      return err;
    d->format = lsim_trace_format_guess(d->file);
    d->field = field;
    if ((err = lsim__format(c, o, p, "format", &d->format)))
      return err;
    if (d->format == LSIM_TRACE_SERVEGEN) {
      char kp[LSIM__PATHBUF];
      lsim__key_path(kp, p, "format");
      return lsim__bad(c, LSIM_E_SCN_CONFLICT, kp,
                       "an empirical distribution needs a per-request trace, "
                       "not servegen");
    }
  }
  return 0;
}

/* The optional arrival-process keys of $.trace.generator. */
static lsim_err lsim__arrivals(const lsim__ctx *c, const cJSON *gen,
                               const char *gp, const char *basedir,
                               lsim_scenario *sc) {
  static const char *const procs[] = {"poisson", "gamma", NULL};
  static const char *const shift_extra[] = {"tenant_weights", "prompt_tokens",
                                            "output_tokens", NULL};
  lsim_arrivals *a = &sc->gen_arrivals;
  const cJSON *o, *arr, *el;
  char p[LSIM__PATHBUF], ap[LSIM__PATHBUF], ip[LSIM__PATHBUF];
  lsim_err err = lsim__choice(c, gen, gp, "process", procs, LSIM_ARR_POISSON,
                              LSIM_E_SCN_RANGE, &a->process);
  if (err)
    return err;
  const lsim__field cvf[] = {
      {"cv", LSIM__NUM, 0, 1e-3, 100, 0, &a->cv},
  };
  if ((err = lsim__fields(c, gen, gp, cvf, 1)))
    return err;
  int has_cv = cJSON_GetObjectItemCaseSensitive(gen, "cv") != NULL;
  if (has_cv != (a->process == LSIM_ARR_GAMMA)) {
    char kp[LSIM__PATHBUF];
    lsim__key_path(kp, gp, "cv");
    return lsim__bad(c, has_cv ? LSIM_E_SCN_CONFLICT : LSIM_E_SCN_MISSING, kp,
                     has_cv ? "only a gamma process has a cv"
                            : "required key is missing (process is gamma)");
  }
  if ((err = lsim__member(c, gen, gp, "onoff", "object", 0, &o, p)))
    return err;
  if (o) {
    const lsim__field f[] = {
        {"on_s", LSIM__NUM, LSIM__REQ, 1e-6, 1e9, 0, &a->on_s},
        {"off_s", LSIM__NUM, LSIM__REQ, 1e-6, 1e9, 0, &a->off_s},
        {"off_level", LSIM__NUM, 0, 0, 1, 0, &a->off_level},
    };
    if ((err = lsim__keys(c, o, p, f, LSIM__N(f), NULL)) ||
        (err = lsim__fields(c, o, p, f, LSIM__N(f))))
      return err;
    a->onoff = 1;
  }
  if ((err = lsim__member(c, gen, gp, "diurnal", "object", 0, &o, p)))
    return err;
  if (o) {
    const lsim__field f[] = {
        {"period_s", LSIM__NUM, LSIM__REQ | LSIM__LO_OPEN, 0, 1e9, 0,
         &a->period_s},
        {"amplitude", LSIM__NUM, LSIM__REQ | LSIM__HI_OPEN, 0, 1, 0,
         &a->amplitude},
        {"phase_s", LSIM__NUM, 0, -1e9, 1e9, 0, &a->phase_s},
    };
    if ((err = lsim__keys(c, o, p, f, LSIM__N(f), NULL)) ||
        (err = lsim__fields(c, o, p, f, LSIM__N(f))))
      return err;
    if (a->onoff)
      return lsim__bad(c, LSIM_E_SCN_CONFLICT, p,
                       "a generator has on/off phases or a diurnal cycle, "
                       "not both");
    a->diurnal = 1;
  }
  if ((err = lsim__member(c, gen, gp, "shifts", "array", 0, &arr, ap)))
    return err;
  if (!arr)
    return 0;
  if ((err = lsim__array(c, arr, ap, LSIM_TRACE_MAX_SHIFTS, &a->nshifts)))
    return err;
  for (int i = 0; i < a->nshifts; i++) {
    lsim_gen_shift *sh = &a->shifts[i];
    const lsim__field f[] = {
        {"at_s", LSIM__NUM, LSIM__REQ | LSIM__LO_OPEN, 0, 1e12, 0, &sh->at_s},
        {"rate_per_s", LSIM__NUM, LSIM__LO_OPEN, 0, 1e9, 0, &sh->rate_per_s},
    };
    if ((err = lsim__element(c, arr, i, ap, &el, ip)) ||
        (err = lsim__keys(c, el, ip, f, LSIM__N(f), shift_extra)) ||
        (err = lsim__fields(c, el, ip, f, LSIM__N(f))))
      return err;
    if (i > 0 && !(sh->at_s > a->shifts[i - 1].at_s)) {
      char kp[LSIM__PATHBUF];
      lsim__key_path(kp, ip, "at_s");
      return lsim__bad(c, LSIM_E_SCN_RANGE, kp,
                       "must be later than the previous shift's");
    }
    const cJSON *w;
    char wp[LSIM__PATHBUF], wi[LSIM__PATHBUF];
    if ((err = lsim__member(c, el, ip, "tenant_weights", "array", 0, &w, wp)))
      return err;
    if (w) {
      int nw;
      if ((err = lsim__array(c, w, wp, LSIM_TRACE_MAX_TENANTS, &nw)))
        return err;
      if (nw != sc->ntenants)
        return lsim__bad(c, LSIM_E_SCN_CONFLICT, wp,
                         "must have one weight per tenant (%d, got %d)",
                         sc->ntenants, nw);
      for (int j = 0; j < nw; j++) {
        lsim__idx_path(wi, wp, j);
        if ((err = lsim__int(c, cJSON_GetArrayItem(w, j), wi, 1, 1e9,
                             &sh->tenant_weights[j])))
          return err;
      }
      sh->has_weights = 1;
    }
    if (cJSON_GetObjectItemCaseSensitive(el, "prompt_tokens")) {
      if ((err = lsim__dist(c, el, ip, "prompt_tokens", basedir, 0,
                            &sh->prompt)))
        return err;
      sh->has_prompt = 1;
    }
    if (cJSON_GetObjectItemCaseSensitive(el, "output_tokens")) {
      if ((err = lsim__dist(c, el, ip, "output_tokens", basedir, 1,
                            &sh->output)))
        return err;
      sh->has_output = 1;
    }
  }
  return 0;
}

/* $.trace.servegen */
static lsim_err lsim__servegen(const lsim__ctx *c, const cJSON *o,
                               const char *path, const char *basedir,
                               lsim_scenario *sc) {
  static const char *const extra[] = {"clients", "prompt_tokens",
                                      "output_tokens", NULL};
  lsim_servegen_spec *sg = &sc->trace_servegen;
  const lsim__field f[] = {
      {"start_s", LSIM__NUM, 0, 0, 1e12, 0, &sg->start_s},
      {"duration_s", LSIM__NUM, 0, 0, 1e12, 0, &sg->duration_s},
      {"rate_scale", LSIM__NUM, LSIM__LO_OPEN, 0, 1e6, 1, &sg->rate_scale},
  };
  const cJSON *arr;
  char ap[LSIM__PATHBUF], ip[LSIM__PATHBUF];
  lsim_err err;
  if ((err = lsim__keys(c, o, path, f, LSIM__N(f), extra)) ||
      (err = lsim__fields(c, o, path, f, LSIM__N(f))) ||
      (err = lsim__dist(c, o, path, "prompt_tokens", basedir, 0,
                        &sg->prompt)) ||
      (err = lsim__dist(c, o, path, "output_tokens", basedir, 1,
                        &sg->output)) ||
      (err = lsim__member(c, o, path, "clients", "array", 0, &arr, ap)))
    return err;
  if (!arr)
    return 0;
  if ((err = lsim__array(c, arr, ap, 64, &sg->nclients)))
    return err;
  for (int i = 0; i < sg->nclients; i++) {
    int64_t v;
    lsim__idx_path(ip, ap, i);
    if ((err = lsim__int(c, cJSON_GetArrayItem(arr, i), ip, 0, 999999, &v)))
      return err;
    sg->clients[i] = (int)v;
    for (int j = 0; j < i; j++)
      if (sg->clients[j] == sg->clients[i])
        return lsim__bad(c, LSIM_E_SCN_DUP, ip, "client %d listed twice",
                         sg->clients[i]);
  }
  return 0;
}

/* $.trace.assign */
static lsim_err lsim__assign(const lsim__ctx *c, const cJSON *o,
                             const char *path, const char *basedir,
                             lsim_scenario *sc) {
  static const char *const tmodes[] = {"auto", "trace", "weights", "owner",
                                       "modulo", NULL};
  static const char *const amodes[] = {"auto",     "trace",     "zipf",
                                       "uniform",  "distinct",  "identical",
                                       "servegen", NULL};
  static const char *const scopes[] = {"tenant", "catalog", NULL};
  static const char *const extra[] = {"tenants", "adapters", "scope",
                                      "servegen", NULL};
  lsim_assign_spec *as = &sc->trace_assign;
  const lsim__field f[] = {
      {"alpha", LSIM__NUM, 0, 0, 10, 0, &as->alpha},
      {"count", LSIM__I32, 0, 1, 1e6, 0, &as->count},
      {"adapter", LSIM__I32, 0, 0, 1e6, 0, &as->adapter},
  };
  char kp[LSIM__PATHBUF];
  lsim_err err;
  if ((err = lsim__keys(c, o, path, f, LSIM__N(f), extra)) ||
      (err = lsim__fields(c, o, path, f, LSIM__N(f))) ||
      (err = lsim__choice(c, o, path, "tenants", tmodes, LSIM_AT_AUTO,
                          LSIM_E_SCN_RANGE, &as->tenants)) ||
      (err = lsim__choice(c, o, path, "adapters", amodes, LSIM_AA_AUTO,
                          LSIM_E_SCN_RANGE, &as->adapters)) ||
      (err = lsim__choice(c, o, path, "scope", scopes,
                          as->tenants == LSIM_AT_OWNER ? LSIM_SCOPE_CATALOG
                                                       : LSIM_SCOPE_TENANT,
                          LSIM_E_SCN_RANGE, &as->scope)))
    return err;
  as->has_alpha = cJSON_GetObjectItemCaseSensitive(o, "alpha") != NULL;
  if (as->has_alpha && as->adapters != LSIM_AA_ZIPF &&
      as->adapters != LSIM_AA_AUTO) {
    lsim__key_path(kp, path, "alpha");
    return lsim__bad(c, LSIM_E_SCN_CONFLICT, kp,
                     "only the zipf (or auto) adapter assignment has an "
                     "exponent");
  }
  if (as->tenants == LSIM_AT_OWNER && as->scope == LSIM_SCOPE_TENANT) {
    lsim__key_path(kp, path, "scope");
    return lsim__bad(c, LSIM_E_SCN_CONFLICT, kp,
                     "tenants 'owner' follow the adapter, so adapters are "
                     "drawn from the catalog scope");
  }
  int count = as->count ? as->count : sc->adapters;
  if (as->count && (as->count > sc->adapters || as->count < sc->ntenants)) {
    lsim__key_path(kp, path, "count");
    return lsim__bad(c, LSIM_E_SCN_RANGE, kp,
                     "must be in [tenants, adapters.count] = [%d, %d] (got %d)",
                     sc->ntenants, sc->adapters, as->count);
  }
  int has_adapter = cJSON_GetObjectItemCaseSensitive(o, "adapter") != NULL;
  if (has_adapter != (as->adapters == LSIM_AA_IDENTICAL)) {
    lsim__key_path(kp, path, "adapter");
    return lsim__bad(c, has_adapter ? LSIM_E_SCN_CONFLICT : LSIM_E_SCN_MISSING,
                     kp,
                     has_adapter ? "only the identical assignment names an "
                                   "adapter"
                                 : "required key is missing (adapters is "
                                   "'identical')");
  }
  if (has_adapter && as->adapter >= count) {
    lsim__key_path(kp, path, "adapter");
    return lsim__bad(c, LSIM_E_SCN_RANGE, kp,
                     "must be below the adapters in use (%d) (got %d)", count,
                     as->adapter);
  }
  const cJSON *sv;
  if ((err = lsim__member(c, o, path, "servegen", "string", 0, &sv, kp)))
    return err;
  if (!!sv != (as->adapters == LSIM_AA_SERVEGEN))
    return lsim__bad(c, sv ? LSIM_E_SCN_CONFLICT : LSIM_E_SCN_MISSING, kp,
                     sv ? "only the servegen assignment reads client rates"
                        : "required key is missing (adapters is 'servegen')");
  if (sv)
    return lsim__resolve(c, sv, kp, basedir, 1, as->servegen);
  return 0;
}

/* ---- $.trace workload controls (traces/trace.h, lsim_trace_ctl) ----- */

/* The text of a number node: its source text (sim/json.h), or, for a node
** built in memory, the shortest decimal that reads back as the same double,
** so that an exact reader sees 1.1 rather than 1.100000000000000089. */
static const char *lsim__num_text(const cJSON *v, char buf[40]) {
  const char *t = lsim_json_num_text(v);
  if (t)
    return t;
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(buf, 40, "%.*g", prec, v->valuedouble);
    if (strtod(buf, NULL) == v->valuedouble)
      break;
  }
  return buf;
}

/* Seconds in [0, 10^9] at obj[key] as exact ns into *ns (absent: 0, *has
** 0). */
static lsim_err lsim__secs_ns(const lsim__ctx *c, const cJSON *obj,
                              const char *path, const char *key, int64_t *ns,
                              int *has) {
  char kp[LSIM__PATHBUF], buf[40];
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  double d;
  lsim_err err;
  *ns = 0;
  *has = v != NULL;
  lsim__key_path(kp, path, key);
  if (!v)
    return 0;
  if ((err = lsim__real(c, v, kp, 0, 1e9, 0, &d)))
    return err;
  if (lsim_trace_seconds_ns(lsim__num_text(v, buf), ns))
    return lsim__bad(c, LSIM_E_SCN_RANGE, kp,
                     "must be a whole number of nanoseconds (got %s)",
                     lsim__num_text(v, buf));
  return 0;
}

/* A remap key or name: 1..63 characters of [A-Za-z0-9_.:/@+-] (a trace's
** names, docs/TRACES.md). */
static int lsim__remap_name_ok(const char *s) {
  size_t n = strlen(s);
  return n > 0 && n < LSIM_TRACE_REMAP_NAME &&
         strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                   "0123456789_.:/@+-") == n;
}

/* $.trace.remap.{tenants,adapters}.map: {"from": to, ...}, from an index
** or a name of the trace, to an index or a name. */
static lsim_err lsim__remap_map(const lsim__ctx *c, const cJSON *o,
                                const char *path, lsim_trace_map_entry *e,
                                int *n) {
  const cJSON *m;
  char mp[LSIM__PATHBUF], kp[LSIM__PATHBUF], q[64];
  lsim_err err;
  *n = 0;
  if ((err = lsim__member(c, o, path, "map", "object", 0, &m, mp)) || !m)
    return err;
  int len = lsim_json_count(m);
  if (len == 0)
    return lsim__bad(c, LSIM_E_SCN_EMPTY, mp, "must not be empty");
  if (len > LSIM_TRACE_MAX_REMAP)
    return lsim__bad(c, LSIM_E_SCN_RANGE, mp,
                     "must have at most %d entries (got %d)",
                     LSIM_TRACE_MAX_REMAP, len);
  for (const cJSON *k = m->child; k; k = k->next, (*n)++) {
    lsim_trace_map_entry *x = &e[*n];
    lsim__key_path(kp, mp, k->string);
    if (!lsim__remap_name_ok(k->string))
      return lsim__bad(c, LSIM_E_SCN_RANGE, kp,
                       "a key is an index or a name of 1 to 63 characters "
                       "of [A-Za-z0-9_.:/@+-] (got '%s')",
                       lsim__quote(k->string, q, sizeof q));
    memcpy(x->from, k->string, strlen(k->string) + 1);
    x->to_name[0] = '\0';
    if (cJSON_IsString(k)) {
      const char *s = k->valuestring;
      int digits = s[0] != '\0' && strspn(s, "0123456789") == strlen(s);
      if (digits || !lsim__remap_name_ok(s))
        return lsim__bad(c, LSIM_E_SCN_RANGE, kp,
                         "must be an index, or a name of 1 to 63 characters "
                         "of [A-Za-z0-9_.:/@+-] that is not all digits (got "
                         "'%s')",
                         lsim__quote(s, q, sizeof q));
      x->to = -1;
      memcpy(x->to_name, s, strlen(s) + 1);
    } else if (cJSON_IsNumber(k)) {
      if ((err = lsim__int(c, k, kp, 0, 2147483647.0, &x->to)))
        return err;
    } else {
      return lsim__bad(c, LSIM_E_SCN_TYPE, kp,
                       "must be an index or a name (got %s)",
                       lsim__type_name(k));
    }
  }
  return 0;
}

/* $.trace.rate_scale, $.trace.window and $.trace.remap: one stage of the
** trace stream for every source (docs/TRACES.md, "Workload controls"). */
static lsim_err lsim__workload(const lsim__ctx *c, const cJSON *o,
                               const char *path, lsim_trace_ctl *ctl) {
  static const char *const wkeys[] = {"start_s", "end_s", NULL};
  static const char *const rkeys[] = {"tenants", "adapters", NULL};
  static const char *const tkeys[] = {"map", NULL};
  static const char *const akeys[] = {"map", "modulo", "offset", NULL};
  const cJSON *v, *w, *rm, *t, *a;
  char kp[LSIM__PATHBUF], wp[LSIM__PATHBUF], rp[LSIM__PATHBUF],
      tp[LSIM__PATHBUF], ap[LSIM__PATHBUF], buf[40];
  lsim_err err;
  memset(ctl, 0, sizeof *ctl);
  if ((v = cJSON_GetObjectItemCaseSensitive(o, "rate_scale"))) {
    double d;
    lsim__key_path(kp, path, "rate_scale");
    if ((err = lsim__real(c, v, kp, 0, 1e6, LSIM__LO_OPEN, &d)))
      return err;
    if (lsim_trace_decimal(lsim__num_text(v, buf), &ctl->rate_num,
                           &ctl->rate_den))
      return lsim__bad(c, LSIM_E_SCN_RANGE, kp,
                       "must have at most 18 significant digits (got %s)",
                       lsim__num_text(v, buf));
  }
  if ((err = lsim__member(c, o, path, "window", "object", 0, &w, wp)))
    return err;
  if (w) {
    int has_start, has_end;
    if ((err = lsim__keys(c, w, wp, NULL, 0, wkeys)) ||
        (err = lsim__secs_ns(c, w, wp, "start_s", &ctl->window_start_ns,
                             &has_start)) ||
        (err = lsim__secs_ns(c, w, wp, "end_s", &ctl->window_end_ns,
                             &has_end)))
      return err;
    if (!has_start && !has_end)
      return lsim__bad(c, LSIM_E_SCN_MISSING, wp,
                       "needs start_s, end_s or both");
    if (has_end && ctl->window_end_ns <= ctl->window_start_ns) {
      lsim__key_path(kp, wp, "end_s");
      return lsim__bad(c, LSIM_E_SCN_RANGE, kp,
                       "must be after start_s");
    }
  }
  if ((err = lsim__member(c, o, path, "remap", "object", 0, &rm, rp)) || !rm)
    return err;
  if ((err = lsim__keys(c, rm, rp, NULL, 0, rkeys)) ||
      (err = lsim__member(c, rm, rp, "tenants", "object", 0, &t, tp)) ||
      (err = lsim__member(c, rm, rp, "adapters", "object", 0, &a, ap)))
    return err;
  if (!t && !a)
    return lsim__bad(c, LSIM_E_SCN_MISSING, rp, "needs tenants or adapters");
  if (t && ((err = lsim__keys(c, t, tp, NULL, 0, tkeys)) ||
            (err = lsim__remap_map(c, t, tp, ctl->tenant_map,
                                   &ctl->ntenant_map))))
    return err;
  if (t && !ctl->ntenant_map) {
    lsim__key_path(kp, tp, "map");
    return lsim__bad(c, LSIM_E_SCN_MISSING, kp, "required key is missing");
  }
  if (!a)
    return 0;
  const lsim__field af[] = {
      {"modulo", LSIM__I64, 0, 1, 2147483647.0, 0, &ctl->adapter_modulo},
      {"offset", LSIM__I64, 0, 0, 2147483647.0, 0, &ctl->adapter_offset},
  };
  if ((err = lsim__keys(c, a, ap, NULL, 0, akeys)) ||
      (err = lsim__fields(c, a, ap, af, LSIM__N(af))) ||
      (err = lsim__remap_map(c, a, ap, ctl->adapter_map, &ctl->nadapter_map)))
    return err;
  int fold = cJSON_GetObjectItemCaseSensitive(a, "modulo") ||
             cJSON_GetObjectItemCaseSensitive(a, "offset");
  if (fold == !!ctl->nadapter_map)
    return lsim__bad(c, fold ? LSIM_E_SCN_CONFLICT : LSIM_E_SCN_MISSING, ap,
                     fold ? "a map, or a fold (modulo, offset), not both"
                          : "needs a map, or modulo and/or offset");
  return 0;
}

static lsim_err lsim__trace(const lsim__ctx *c, const cJSON *root,
                            const char *basedir, lsim_scenario *sc) {
  static const char *const keys[] = {"file",         "format",
                                     "generator",    "max_requests",
                                     "block_tokens", "servegen",
                                     "assign",       "skip_bad_rows",
                                     "rate_scale",   "window",
                                     "remap",        NULL};
  static const char *const gen_extra[] = {
      "prompt_tokens", "output_tokens", "process", "cv",
      "onoff",         "diurnal",       "shifts",  NULL};
  const lsim__field gf[] = {
      {"requests", LSIM__I64, LSIM__REQ, 1, 1e9, 0, &sc->gen_requests},
      {"rate_per_s", LSIM__NUM, LSIM__REQ | LSIM__LO_OPEN, 0, 1e9, 0,
       &sc->gen_rate_per_s},
  };
  const lsim__field tf[] = {
      {"max_requests", LSIM__I64, 0, 1, 1e15, 0, &sc->trace_max_requests},
      {"block_tokens", LSIM__I32, 0, 1, 1048576, 512, &sc->trace_block_tokens},
      {"skip_bad_rows", LSIM__I32, 0, 0, 1, 0, &sc->trace_skip_bad_rows},
  };
  const cJSON *o, *file, *gen, *sg, *as;
  char p[LSIM__PATHBUF], fp[LSIM__PATHBUF], gp[LSIM__PATHBUF],
      sp[LSIM__PATHBUF], ap[LSIM__PATHBUF];
  lsim_err err;
  if ((err = lsim__member(c, root, "$", "trace", "object", 1, &o, p)) ||
      (err = lsim__keys(c, o, p, tf, 0, keys)) ||
      (err = lsim__fields(c, o, p, tf, LSIM__N(tf))))
    return err;
  int has_file = cJSON_GetObjectItemCaseSensitive(o, "file") != NULL;
  int has_gen = cJSON_GetObjectItemCaseSensitive(o, "generator") != NULL;
  if (has_file == has_gen)
    return lsim__bad(c, LSIM_E_SCN_CONFLICT, p,
                     "must have exactly one of 'file' and 'generator' (got %s)",
                     has_file ? "both" : "neither");
  if ((err = lsim__workload(c, o, p, &sc->trace_ctl)) ||
      (err = lsim__member(c, o, p, "assign", "object", 0, &as, ap)) ||
      (as && (err = lsim__assign(c, as, ap, basedir, sc))) ||
      (err = lsim__member(c, o, p, "servegen", "object", 0, &sg, sp)))
    return err;
  if (has_gen) {
    static const char *const file_only[] = {"format", "servegen",
                                            "block_tokens", NULL};
    for (int i = 0; file_only[i]; i++)
      if (cJSON_GetObjectItemCaseSensitive(o, file_only[i])) {
        char kp[LSIM__PATHBUF];
        lsim__key_path(kp, p, file_only[i]);
        return lsim__bad(c, LSIM_E_SCN_CONFLICT, kp,
                         "belongs to a trace file, not to a generator");
      }
    sc->trace_format = LSIM_TRACE_GEN;
    if ((err = lsim__object(c, o, p, "generator", gf, LSIM__N(gf), gen_extra,
                            &gen, gp)) ||
        (err = lsim__dist(c, gen, gp, "prompt_tokens", basedir, 0,
                          &sc->gen_prompt)) ||
        (err = lsim__dist(c, gen, gp, "output_tokens", basedir, 1,
                          &sc->gen_output)) ||
        (err = lsim__arrivals(c, gen, gp, basedir, sc)))
      return err;
    return 0;
  }
  if ((err = lsim__member(c, o, p, "file", "string", 1, &file, fp)) ||
      (err = lsim__resolve(c, file, fp, basedir, 1, sc->trace_file)))
    return err;
  sc->trace_format = lsim_trace_format_guess(sc->trace_file);
  if ((err = lsim__format(c, o, p, "format", &sc->trace_format)))
    return err;
  struct stat st;
  if ((sc->trace_format != LSIM_TRACE_SERVEGEN || !sg) &&
      stat(sc->trace_file, &st) == 0 && S_ISDIR(st.st_mode)) {
    char q[200];
    return lsim__bad(c, LSIM_E_SCN_TRACE_FILE, fp,
                     "'%s' is not a regular file",
                     lsim__quote(sc->trace_file, q, sizeof q));
  }
  if ((sc->trace_format == LSIM_TRACE_SERVEGEN) != !!sg)
    return sg ? lsim__bad(c, LSIM_E_SCN_CONFLICT, sp,
                          "only a servegen trace has servegen settings")
              : lsim__bad(c, LSIM_E_SCN_MISSING, sp,
                          "required key is missing (the trace is servegen)");
  if (sg && (err = lsim__servegen(c, sg, sp, basedir, sc)))
    return err;
  return 0;
}

/* An optional array of tick integers (>= 0, non-decreasing). */
static lsim_err lsim__ticks(const lsim__ctx *c, const cJSON *o,
                            const char *path, const char *key, int64_t *dst,
                            int *n) {
  const cJSON *a;
  char kp[LSIM__PATHBUF];
  *n = 0;
  if (!o)
    return 0;
  lsim_err err = lsim__member(c, o, path, key, "array", 0, &a, kp);
  if (err || !a)
    return err;
  int len;
  if ((err = lsim__array(c, a, kp, LSIM_MAX_FAULT_TICKS, &len)))
    return err;
  for (int i = 0; i < len; i++) {
    char ip[LSIM__PATHBUF];
    lsim__idx_path(ip, kp, i);
    int64_t t;
    if ((err = lsim__int(c, cJSON_GetArrayItem(a, i), ip, 0, LSIM__INT_LIMIT,
                         &t)))
      return err;
    if (i > 0 && t < dst[i - 1])
      return lsim__bad(c, LSIM_E_SCN_RANGE, ip,
                       "ticks must not decrease (got %" PRId64 " after %" PRId64
                       ")",
                       t, dst[i - 1]);
    dst[i] = t;
  }
  *n = len;
  return 0;
}

static lsim_err lsim__faults(const lsim__ctx *c, const cJSON *root,
                             lsim_scenario *sc) {
  const lsim__field f[] = {
      {"load_failure_rate", LSIM__NUM, LSIM__HI_OPEN, 0, 1, 0,
       &sc->load_failure_rate},
      {"max_load_attempts", LSIM__I32, 0, 1, 1000, 3, &sc->max_load_attempts},
      {"digest_failure_rate", LSIM__NUM, LSIM__HI_OPEN, 0, 1, 0,
       &sc->digest_failure_rate},
      {"h2d_slowdown", LSIM__NUM, 0, 1, 1000, 1, &sc->h2d_slowdown},
      {"h2d_slowdown_from_tick", LSIM__I64, 0, 0, LSIM__INT_LIMIT, 0,
       &sc->h2d_slowdown_from_tick},
      {"h2d_slowdown_until_tick", LSIM__I64, 0, 0, LSIM__INT_LIMIT, 0,
       &sc->h2d_slowdown_until_tick},
      {"cancel_during_load_rate", LSIM__NUM, LSIM__HI_OPEN, 0, 1, 0,
       &sc->cancel_during_load_rate},
      {"stale_basis_rate", LSIM__NUM, LSIM__HI_OPEN, 0, 1, 0,
       &sc->stale_basis_rate},
  };
  static const char *const extra[] = {"copy_fail_ticks", "digest_fail_ticks",
                                      NULL};
  const cJSON *o;
  char p[LSIM__PATHBUF];
  lsim_err err = lsim__member(c, root, "$", "faults", "object", 0, &o, p);
  if (!err && o)
    err = lsim__keys(c, o, p, f, LSIM__N(f), extra);
  if (!err)
    err = lsim__fields(c, o, p, f, LSIM__N(f)); /* o NULL: defaults */
  if (!err)
    err = lsim__ticks(c, o, p, "copy_fail_ticks", sc->copy_fail_ticks,
                      &sc->ncopy_fail_ticks);
  if (!err)
    err = lsim__ticks(c, o, p, "digest_fail_ticks", sc->digest_fail_ticks,
                      &sc->ndigest_fail_ticks);
  if (!err && sc->h2d_slowdown_until_tick &&
      sc->h2d_slowdown_until_tick <= sc->h2d_slowdown_from_tick)
    err = lsim__bad(c, LSIM_E_SCN_CONFLICT, "$.faults.h2d_slowdown_until_tick",
                    "must be after h2d_slowdown_from_tick (or 0: no end)");
  return err;
}

/* $.fairness: scheduling and fairness parameters (docs/SCENARIO.md). */
static lsim_err lsim__fairness(const lsim__ctx *c, const cJSON *root,
                               lsim_scenario *sc) {
  const lsim__field f[] = {
      {"w_in", LSIM__I64, 0, 0, 1e6, 1, &sc->fair_w_in},
      {"w_out", LSIM__I64, 0, 0, 1e6, 1, &sc->fair_w_out},
      {"age_ticks", LSIM__I64, 0, 1, LSIM__INT_LIMIT, 64, &sc->age_ticks},
      {"cluster_window", LSIM__I32, 0, 1, 4096, 8, &sc->cluster_window},
      /* absent: -1, derived from the workload at replay time
      ** (lsim_scenario_starvation_ticks) */
      {"starvation_ticks", LSIM__I64, 0, 0, LSIM__INT_LIMIT, -1,
       &sc->starvation_ticks},
      {"abort_ticks", LSIM__I64, 0, 0, LSIM__INT_LIMIT, 0, &sc->abort_ticks},
      {"slo_ttft_ms", LSIM__I64, 0, 0, 1e9, 0, &sc->slo_ttft_ms},
      {"slo_tbt_ms", LSIM__I64, 0, 0, 1e9, 0, &sc->slo_tbt_ms},
  };
  const cJSON *o;
  char p[LSIM__PATHBUF];
  lsim_err err = lsim__member(c, root, "$", "fairness", "object", 0, &o, p);
  if (!err && o)
    err = lsim__keys(c, o, p, f, LSIM__N(f), NULL);
  if (!err)
    err = lsim__fields(c, o, p, f, LSIM__N(f)); /* o NULL: defaults */
  if (!err && sc->fair_w_in == 0 && sc->fair_w_out == 0)
    err = lsim__bad(c, LSIM_E_SCN_CONFLICT, "$.fairness.w_out",
                    "w_in and w_out cannot both be 0");
  return err;
}

/* $.hotswaps: an optional array of replacements (docs/SCENARIO.md). */
static lsim_err lsim__hotswaps(const lsim__ctx *c, const cJSON *root,
                               lsim_scenario *sc) {
  static const char *const modes[] = {"shadow", "drain_then_overwrite",
                                      "new_alias", NULL};
  static const char *const fails[] = {"none", "copy", "digest", NULL};
  const cJSON *arr;
  char p[LSIM__PATHBUF];
  int n;
  sc->nhotswaps = 0;
  lsim_err err = lsim__member(c, root, "$", "hotswaps", "array", 0, &arr, p);
  if (err || !arr)
    return err;
  if ((err = lsim__array(c, arr, p, LSIM_MAX_HOTSWAPS, &n)))
    return err;
  for (int i = 0; i < n; i++) {
    lsim_hotswap_spec *h = &sc->hotswaps[i];
    const lsim__field f[] = {
        {"at_s", LSIM__NUM, LSIM__REQ, 0, 1e6, 0, &h->at_s},
        {"adapter", LSIM__I32, LSIM__REQ, 0, 1e9, 0, &h->adapter},
    };
    static const char *const extra[] = {"mode", "fail", NULL};
    const cJSON *o, *v;
    char ip[LSIM__PATHBUF], kp[LSIM__PATHBUF];
    if ((err = lsim__element(c, arr, i, p, &o, ip)) ||
        (err = lsim__keys(c, o, ip, f, LSIM__N(f), extra)) ||
        (err = lsim__fields(c, o, ip, f, LSIM__N(f))))
      return err;
    if (h->adapter >= sc->adapters) {
      lsim__key_path(kp, ip, "adapter");
      return lsim__bad(c, LSIM_E_SCN_RANGE, kp,
                       "must be an adapter index below $.adapters.count (%d) "
                       "(got %d)",
                       sc->adapters, h->adapter);
    }
    const char *const *names[2] = {modes, fails};
    const char *keys[2] = {"mode", "fail"};
    int *dst[2] = {&h->mode, &h->fail};
    for (int k = 0; k < 2; k++) {
      *dst[k] = 0;
      if ((err = lsim__member(c, o, ip, keys[k], "string", k == 0, &v, kp)))
        return err;
      if (!v)
        continue;
      int j = 0;
      while (names[k][j] && strcmp(names[k][j], v->valuestring) != 0)
        j++;
      if (!names[k][j]) {
        char list[120], q[64];
        lsim__join(list, sizeof list, names[k]);
        return lsim__bad(c, LSIM_E_SCN_RANGE, kp,
                         "must be one of %s (got '%s')", list,
                         lsim__quote(v->valuestring, q, sizeof q));
      }
      *dst[k] = j;
    }
    if (h->fail != LSIM_HS_FAIL_NONE && h->mode == 1) {
      lsim__key_path(kp, ip, "fail");
      return lsim__bad(c, LSIM_E_SCN_CONFLICT, kp,
                       "drain_then_overwrite rewrites the slot in place and "
                       "has no shadow copy to fail");
    }
  }
  sc->nhotswaps = n;
  return 0;
}

/* The vLLM-parity knobs of $.workers against each other and the catalog
** (docs/SCENARIO.md, `workers`). */
static lsim_err lsim__cross_vllm(const lsim__ctx *c, const lsim_scenario *sc) {
  if (sc->max_lora_rank > 0) {
    const char *kp = "$.workers.max_lora_rank";
    if (sc->max_loras == 0)
      return lsim__bad(c, LSIM_E_SCN_CONFLICT, kp,
                       "padded-rank slots need $.workers.max_loras (the "
                       "number of slots per worker)");
    if (sc->compression.on)
      return lsim__bad(c, LSIM_E_SCN_CONFLICT, kp,
                       "a compressed collection's cores and bases are not "
                       "padded slots ($.adapters.compression)");
    int fits = 0;
    for (int i = 0; i < sc->nranks; i++)
      fits += sc->ranks[i].rank <= sc->max_lora_rank;
    if (!fits)
      return lsim__bad(c, LSIM_E_SCN_CONFLICT, kp,
                       "every rank of $.adapters.ranks exceeds %d: every "
                       "request would be refused",
                       sc->max_lora_rank);
  }
  if (sc->max_cpu_loras == 0) {
    if (sc->disk_gbps > 0)
      return lsim__bad(c, LSIM_E_SCN_CONFLICT, "$.workers.disk_gbps",
                       "has no effect without $.workers.max_cpu_loras (the "
                       "host tier is off: every load copies from host)");
    if (sc->disk_fixed_us > 0)
      return lsim__bad(c, LSIM_E_SCN_CONFLICT, "$.workers.disk_fixed_us",
                       "has no effect without $.workers.max_cpu_loras (the "
                       "host tier is off: every load copies from host)");
    return 0;
  }
  if (sc->disk_gbps <= 0)
    return lsim__bad(c, LSIM_E_SCN_MISSING, "$.workers.disk_gbps",
                     "required when $.workers.max_cpu_loras is set (a host "
                     "tier miss reads the adapter from disk)");
  if (sc->max_loras > 0 && sc->max_cpu_loras < sc->max_loras)
    return lsim__bad(c, LSIM_E_SCN_CONFLICT, "$.workers.max_cpu_loras",
                     "must be at least $.workers.max_loras (%d), as in vLLM "
                     "(got %d)",
                     sc->max_loras, sc->max_cpu_loras);
  return 0;
}

/* Checks that span sections. */
static lsim_err lsim__cross(const lsim__ctx *c, lsim_scenario *sc) {
  if (sc->adapters < sc->ntenants)
    return lsim__bad(c, LSIM_E_SCN_CONFLICT, "$.adapters.count",
                     "must be at least the number of tenants (%d), since "
                     "adapter a belongs to tenant a %% %d (got %d)",
                     sc->ntenants, sc->ntenants, sc->adapters);
  if (sc->tp_degree > 1) {
    /* the sharded schedule needs every split axis divisible (docs/TP.md) */
    int n = sc->tp_degree;
    for (int i = 0; i < sc->ntargets; i++)
      if (sc->targets[i].d_in % n || sc->targets[i].d_out % n)
        return lsim__bad(c, LSIM_E_SCN_CONFLICT, "$.workers.tp_degree",
                         "%d does not divide target %s (d_in %" PRId64
                         ", d_out %" PRId64 ")",
                         n, sc->targets[i].name, sc->targets[i].d_in,
                         sc->targets[i].d_out);
    for (int i = 0; i < sc->nranks; i++)
      if (sc->ranks[i].rank % n)
        return lsim__bad(c, LSIM_E_SCN_CONFLICT, "$.workers.tp_degree",
                         "%d does not divide adapter rank %d (the rank axis "
                         "of column-parallel A is split)",
                         n, sc->ranks[i].rank);
  }
  lsim_err err = lsim__cross_vllm(c, sc);
  if (err)
    return err;
  for (int i = 0; i < sc->nranks; i++) {
    if (sc->max_lora_rank > 0 && sc->ranks[i].rank > sc->max_lora_rank)
      continue; /* refused at arrival (rank_over_max_lora_rank) */
    int64_t pages = lsim_scenario_adapter_pages(sc, sc->ranks[i].rank);
    if (pages < 1 || pages + sc->guard_pages > sc->pool_pages) {
      char ip[LSIM__PATHBUF], kp[LSIM__PATHBUF];
      lsim__idx_path(ip, "$.adapters.ranks", i);
      lsim__key_path(kp, ip, "rank");
      return lsim__bad(c, LSIM_E_SCN_CAPACITY, kp,
                       "an adapter of rank %d needs %" PRId64
                       " pages (plus %" PRId64 " guard) but a worker's pool "
                       "has %" PRId64,
                       sc->ranks[i].rank, pages, sc->guard_pages,
                       sc->pool_pages);
    }
  }
  return 0;
}

/* A compressed collection against the rest of the scenario. */
static lsim_err lsim__cross_compression(const lsim__ctx *c,
                                        const lsim_scenario *sc) {
  const lsim_compression_spec *cs = &sc->compression;
  if (!cs->on) {
    if (sc->stale_basis_rate > 0)
      return lsim__bad(c, LSIM_E_CMP_SERVE_CONFLICT, "$.faults.stale_basis_rate",
                       "only a compressed collection ($.adapters.compression) "
                       "has bases to be stale");
    return 0;
  }
  const char *p = "$.adapters.compression";
  if (sc->tp_degree > 1)
    return lsim__bad(c, LSIM_E_CMP_SERVE_CONFLICT, p,
                     "a compressed collection is served on one GPU per "
                     "worker ($.workers.tp_degree must be 1)");
  if (sc->adapter_layout == LSIM_LAYOUT_SLORA)
    return lsim__bad(c, LSIM_E_CMP_SERVE_CONFLICT, p,
                     "cores and bases use the tensor page layout "
                     "($.workers.adapter_layout must be 'tensor')");
  if (sc->nhotswaps > 0)
    return lsim__bad(c, LSIM_E_CMP_SERVE_CONFLICT, p,
                     "hotswaps replace one adapter's artifact; a compressed "
                     "collection changes by a new bundle version instead");
  char kp[LSIM__PATHBUF];
  if (cs->bundle[0]) {
    /* read and verified now, so a bad bundle is refused before a run
    ** writes anything (the replay reads it again) */
    lsim__key_path(kp, p, "bundle");
    lsim_bundle b;
    lsim_errbuf be = LSIM_ERRBUF_INIT;
    lsim_err rc = lsim_bundle_read(cs->bundle, &b, &be);
    if (rc)
      return lsim__bad(c, rc, kp, "%s", be.msg);
    if (b.n != sc->adapters)
      rc = lsim__bad(c, LSIM_E_CMP_SERVE_MISMATCH, kp,
                     "the bundle has %d sources, $.adapters.count is %d", b.n,
                     sc->adapters);
    for (int i = 0; !rc && i < sc->ntargets; i++)
      if (sc->targets[i].d_in != b.d_in || sc->targets[i].d_out != b.d_out)
        rc = lsim__bad(c, LSIM_E_CMP_SERVE_MISMATCH, kp,
                       "the bundle fits a %d x %d module, target %s is "
                       "%" PRId64 " x %" PRId64,
                       b.d_in, b.d_out, sc->targets[i].name,
                       sc->targets[i].d_in, sc->targets[i].d_out);
    int method = b.method == 1 ? LSIM_CMPM_JD_FULL : LSIM_CMPM_JD_DIAG;
    int64_t need = lsim_scenario_adapter_pages(sc, b.R) +
                   lsim_scenario_core_pages(sc, method, b.R);
    if (!rc && need + sc->guard_pages > sc->pool_pages)
      rc = lsim__bad(c, LSIM_E_CMP_SERVE_CAPACITY, kp,
                     "a basis and one core of rank %d need %" PRId64
                     " pages (plus %" PRId64 " guard) but a worker's pool "
                     "has %" PRId64,
                     b.R, need, sc->guard_pages, sc->pool_pages);
    lsim_bundle_release(&b);
    return rc;
  }
  if (cs->clusters > sc->adapters) {
    lsim__key_path(kp, p, "clusters");
    return lsim__bad(c, LSIM_E_CMP_CLUSTERS, kp,
                     "must be at most $.adapters.count (%d) (got %d)",
                     sc->adapters, cs->clusters);
  }
  for (int i = 0; i < sc->ntargets; i++) {
    int64_t lim = sc->targets[i].d_in < sc->targets[i].d_out
                      ? sc->targets[i].d_in
                      : sc->targets[i].d_out;
    if (cs->rank > lim) {
      lsim__key_path(kp, p, "rank");
      return lsim__bad(c, LSIM_E_CMP_RANK, kp,
                       "must be at most min(d_in, d_out) = %" PRId64
                       " of target %s (got %d)",
                       lim, sc->targets[i].name, cs->rank);
    }
  }
  int64_t need = lsim_scenario_adapter_pages(sc, cs->rank) +
                 lsim_scenario_core_pages(sc, cs->method, cs->rank);
  if (need + sc->guard_pages > sc->pool_pages) {
    lsim__key_path(kp, p, "rank");
    return lsim__bad(c, LSIM_E_CMP_SERVE_CAPACITY, kp,
                     "a basis and one core of rank %d need %" PRId64
                     " pages (plus %" PRId64 " guard) but a worker's pool "
                     "has %" PRId64,
                     cs->rank, need, sc->guard_pages, sc->pool_pages);
  }
  return 0;
}

/* ---- $.prefix_cache (codes of engine/err_kv.h) --------------------------- */

/* An optional integer o[key] in [lo, hi]; absent leaves *out unchanged. */
static lsim_err lsim__px_int(const lsim__ctx *c, const cJSON *o,
                             const char *path, const char *key, double lo,
                             double hi, int64_t *out) {
  char kp[LSIM__PATHBUF], got[40], a[40], b[40];
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  lsim__key_path(kp, path, key);
  if (!v)
    return 0;
  if (!cJSON_IsNumber(v))
    return lsim__bad(c, LSIM_E_KV_SCN_TYPE, kp, "must be an integer (got %s)",
                     lsim__type_name(v));
  double d = v->valuedouble;
  if (d != floor(d) || !(fabs(d) <= LSIM__INT_LIMIT))
    return lsim__bad(c, LSIM_E_KV_SCN_TYPE, kp, "must be an integer (got %s)",
                     lsim__num_str(d, got));
  if (d < lo || d > hi)
    return lsim__bad(c, LSIM_E_KV_SCN_RANGE, kp,
                     "must be an integer in [%s, %s] (got %s)",
                     lsim__num_str(lo, a), lsim__num_str(hi, b),
                     lsim__num_str(d, got));
  *out = (int64_t)d;
  return 0;
}

/*
** $.prefix_cache: {mode, block_tokens?, max_blocks?, alora_fraction?}.  mode "off" (the
** default) leaves the replay exactly as without the key; the other modes
** are lsim_kv_key_mode's names.  The blocks are the trace's prefix block
** hashes, so a generated trace (which has none) is refused.
*/
static lsim_err lsim__prefix_cache(const lsim__ctx *c, const cJSON *root,
                                   lsim_scenario *sc) {
  const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, "prefix_cache");
  const char *p = "$.prefix_cache";
  char kp[LSIM__PATHBUF], q[80];
  sc->prefix_mode = 0;
  sc->prefix_block_tokens =
      sc->trace_block_tokens > 0 ? sc->trace_block_tokens : 512;
  sc->prefix_max_blocks = 0;
  sc->prefix_alora_fraction = 0;
  if (!o)
    return 0;
  if (!cJSON_IsObject(o))
    return lsim__bad(c, LSIM_E_KV_SCN_TYPE, p, "must be an object (got %s)",
                     lsim__type_name(o));
  static const char *const keys[] = {"mode", "block_tokens", "max_blocks",
                                     "alora_fraction", NULL};
  for (const cJSON *k = o->child; k; k = k->next) {
    int known = 0;
    for (int i = 0; keys[i] && !known; i++)
      known = strcmp(k->string, keys[i]) == 0;
    lsim__key_path(kp, p, k->string);
    if (!known) {
      char list[200];
      lsim__join(list, sizeof list, keys);
      return lsim__bad(c, LSIM_E_KV_SCN_TYPE, kp, "unknown key (allowed: %s)",
                       list);
    }
    for (const cJSON *d = o->child; d != k; d = d->next)
      if (strcmp(d->string, k->string) == 0)
        return lsim__bad(c, LSIM_E_KV_SCN_TYPE, kp, "duplicate key");
  }
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "mode");
  lsim__key_path(kp, p, "mode");
  if (!m)
    return lsim__bad(c, LSIM_E_KV_SCN_TYPE, kp, "required key is missing");
  if (!cJSON_IsString(m))
    return lsim__bad(c, LSIM_E_KV_SCN_TYPE, kp, "must be a string (got %s)",
                     lsim__type_name(m));
  int mode = -1;
  if (strcmp(m->valuestring, "off") == 0)
    mode = 0;
  for (int k = LSIM_KV_KEYS_OBLIVIOUS; k <= LSIM_KV_KEYS_ALORA && mode < 0; k++)
    if (strcmp(m->valuestring, lsim_kv_key_mode_name(k)) == 0)
      mode = k;
  if (mode < 0)
    return lsim__bad(c, LSIM_E_KV_SCN_MODE, kp,
                     "unknown mode '%s' (allowed: off, oblivious, "
                     "raw_adapter, semantic, semantic_alora)",
                     lsim__quote(m->valuestring, q, sizeof q));
  lsim_err err;
  if ((err = lsim__px_int(c, o, p, "block_tokens", 1, 1048576,
                          &sc->prefix_block_tokens)) ||
      (err = lsim__px_int(c, o, p, "max_blocks", 0, 1e9,
                          &sc->prefix_max_blocks)))
    return err;
  const cJSON *af = cJSON_GetObjectItemCaseSensitive(o, "alora_fraction");
  lsim__key_path(kp, p, "alora_fraction");
  if (af && !cJSON_IsNumber(af))
    return lsim__bad(c, LSIM_E_KV_SCN_TYPE, kp, "must be a number (got %s)",
                     lsim__type_name(af));
  if (af && !(af->valuedouble >= 0 && af->valuedouble <= 1)) {
    char got[40];
    return lsim__bad(c, LSIM_E_KV_SCN_RANGE, kp,
                     "must be a number in [0, 1] (got %s)",
                     lsim__num_str(af->valuedouble, got));
  }
  if (af)
    sc->prefix_alora_fraction = af->valuedouble;
  if (mode && sc->trace_format == LSIM_TRACE_GEN)
    return lsim__bad(c, LSIM_E_KV_SCN_TRACE, p,
                     "the cache reuses the trace's prefix block hashes; a "
                     "generated trace has none (use a trace file with a "
                     "prefix_blocks column or Mooncake hash_ids)");
  const lsim_evict_ops *ev = lsim_evict_find(sc->evict);
  if (mode && ev && ev->needs_future)
    return lsim__bad(c, LSIM_E_KV_SCN_TRACE, p,
                     "eviction policy '%s' replays through a lookahead that "
                     "keeps no prefix block hashes; use an online policy",
                     sc->evict);
  sc->prefix_mode = mode;
  return 0;
}

static lsim_err lsim__root(const lsim__ctx *c, const cJSON *root,
                           const char *basedir, lsim_scenario *sc) {
  static const char *const extra[] = {"name",  "backend", "policies", "workers",
                                      "model", "cost",    "gpu",
                                      "adapters", "tenants",
                                      "trace", "faults",  "hotswaps",
                                      "fairness", "prefix_cache", "execute",
                                      "clock", NULL};
  int64_t seed = 0;
  const lsim__field f[] = {
      {"seed", LSIM__I64, LSIM__REQ, 0, LSIM__INT_LIMIT, 0, &seed},
      {"ns_per_tick", LSIM__I64, 0, 1, 1e9, 1000, &sc->ns_per_tick},
  };
  const lsim__registry backend = {
      "backend",          "backend",          "model",    lsim__is_backend,
      lsim_backend_names, LSIM_E_SCN_BACKEND, sc->backend};
  const cJSON *nm;
  char np[LSIM__PATHBUF];
  lsim_err err;
  if (!cJSON_IsObject(root))
    return lsim__bad(c, LSIM_E_SCN_TYPE, "$", "must be an object (got %s)",
                     lsim__type_name(root));
  if ((err = lsim__keys(c, root, "$", f, LSIM__N(f), extra)) ||
      (err = lsim__member(c, root, "$", "name", "string", 1, &nm, np)) ||
      (err = lsim__str(c, nm, np, 1, sc->name, sizeof sc->name)) ||
      (err = lsim__fields(c, root, "$", f, LSIM__N(f))) ||
      (err = lsim__named(c, root, "$", &backend)) ||
      (err = lsim__mode(c, root, "execute", lsim__execute_names,
                        lsim_scenario_execute_names(), &sc->execute)) ||
      (err = lsim__mode(c, root, "clock", lsim__clock_names,
                        lsim_scenario_clock_names(), &sc->clock)) ||
      (err = lsim__policies(c, root, sc)) ||
      (err = lsim__workers(c, root, sc)) || (err = lsim__model(c, root, sc)) ||
      (err = lsim__cost(c, root, basedir, sc)) || (err = lsim__adapters(c, root, basedir, sc)) ||
      (err = lsim__tenants(c, root, sc)) ||
      (err = lsim__trace(c, root, basedir, sc)) ||
      (err = lsim__faults(c, root, sc)) ||
      (err = lsim__hotswaps(c, root, sc)) ||
      (err = lsim__fairness(c, root, sc)) ||
      (err = lsim__prefix_cache(c, root, sc)) || (err = lsim__cross(c, sc)) ||
      (err = lsim__cross_compression(c, sc)))
    return err;
  sc->seed = (uint64_t)seed;
  if (sc->compression.on && sc->compression.seed == ~(uint64_t)0)
    sc->compression.seed = sc->seed;
  return 0;
}

/* ---- entry points -------------------------------------------------------- */

/* The scenario inside the parsed document: the root, or src->member; with
** src->sets applied in order (sim/json.h, lsim_json_set), before any
** validation, so that a value given on the command line is checked exactly
** as one in the file. */
static lsim_err lsim__source(const lsim__ctx *c, lsim_json_doc *doc,
                             const lsim_scenario_src *src, cJSON **root) {
  *root = doc->root;
  if (!src)
    return 0;
  if (src->member) {
    char mp[LSIM__PATHBUF];
    lsim__key_path(mp, "$", src->member);
    cJSON *m = cJSON_IsObject(doc->root)
                   ? cJSON_GetObjectItemCaseSensitive(doc->root, src->member)
                   : NULL;
    if (!m)
      return lsim__bad(c, LSIM_E_SCN_MISSING, mp, "required key is missing");
    *root = m;
  }
  static const lsim_json_codes codes = {LSIM_E_SCN_JSON, LSIM_E_SCN_DUP};
  for (int i = 0; i < src->nsets; i++) {
    lsim_err err = lsim_json_set(doc, *root, src->sets[i], &codes, c->eb);
    if (err)
      return err;
  }
  return 0;
}

lsim_err lsim_scenario_parse(lsim_scenario *sc, const char *json, size_t len,
                             const char *name, const char *basedir,
                             lsim_errbuf *eb) {
  return lsim_scenario_parse_src(sc, json, len, name, basedir, NULL, eb);
}

lsim_err lsim_scenario_parse_src(lsim_scenario *sc, const char *json,
                                 size_t len, const char *name,
                                 const char *basedir,
                                 const lsim_scenario_src *src,
                                 lsim_errbuf *eb) {
  lsim__ctx c = {name ? name : "<scenario>", eb};
  if (!sc || (!json && len))
    return lsim_fail(eb, LSIM_E_USAGE, "%s: no scenario or no text given",
                     c.file);
  if (!json)
    json = "";
  memset(sc, 0, sizeof *sc);

  unsigned int mdlen = 0;
  if (!EVP_Digest(json, len, sc->sha256, &mdlen, EVP_sha256(), NULL) ||
      mdlen != sizeof sc->sha256)
    return lsim_fail(eb, LSIM_E_BUG, "%s: sha-256 digest failed", c.file);

  /* syntax, duplicate keys at any depth and exact integers: sim/json.h */
  static const lsim_json_codes codes = {LSIM_E_SCN_JSON, LSIM_E_SCN_DUP};
  lsim_json_doc doc;
  lsim_err err = lsim_json_parse(&doc, json, len, c.file, &codes, eb);
  if (err)
    return err;
  cJSON *root = NULL;
  err = lsim__source(&c, &doc, src, &root);
  if (!err)
    err = lsim__root(&c, root, basedir, sc);
  lsim_json_release(&doc);
  return err;
}

lsim_err lsim_scenario_load(lsim_scenario *sc, const char *path,
                            lsim_errbuf *eb) {
  return lsim_scenario_load_src(sc, path, NULL, eb);
}

lsim_err lsim_scenario_load_src(lsim_scenario *sc, const char *path,
                                const lsim_scenario_src *src,
                                lsim_errbuf *eb) {
  if (!sc || !path)
    return lsim_fail(eb, LSIM_E_USAGE, "no scenario or no path given");
  size_t plen = strlen(path);
  if (plen == 0 || plen >= LSIM_PATH_MAX)
    return lsim_fail(eb, LSIM_E_SCN_RANGE,
                     "scenario path must be 1 to %d bytes long (got %zu)",
                     LSIM_PATH_MAX - 1, plen);

  char dir[LSIM_PATH_MAX];
  const char *slash = strrchr(path, '/');
  if (!slash) {
    memcpy(dir, ".", 2);
  } else if (slash == path) {
    memcpy(dir, "/", 2);
  } else {
    memcpy(dir, path, (size_t)(slash - path));
    dir[slash - path] = '\0';
  }

  char *text = NULL;
  size_t len = 0;
  /* a FIFO or device is refused before it is opened (sim/slurp.h) */
  const lsim_slurp_opts so = {LSIM__MAX_FILE_BYTES, LSIM_E_SCN_RANGE,
                             LSIM_E_IO, 0, NULL};
  lsim_err err = lsim_slurp(path, &so, &text, &len, eb);
  if (err)
    return err;
  err = lsim_scenario_parse_src(sc, text, len, path, dir, src, eb);
  free(text);
  if (err)
    return err;
  memcpy(sc->path, path, plen + 1);
  return 0;
}

void lsim_scenario_sha_hex(const lsim_scenario *sc, char out[65]) {
  static const char hex[] = "0123456789abcdef";
  for (int i = 0; i < 32; i++) {
    out[2 * i] = hex[sc->sha256[i] >> 4];
    out[2 * i + 1] = hex[sc->sha256[i] & 15];
  }
  out[64] = '\0';
}

int64_t lsim_scenario_adapter_bytes(const lsim_scenario *sc, int rank) {
  int64_t per_layer = 0;
  for (int i = 0; i < sc->ntargets; i++)
    per_layer += (int64_t)rank * (sc->targets[i].d_in + sc->targets[i].d_out) *
                 sc->dtype_bytes;
  /* both TP styles hold r (d_in + d_out) / N scalars per rank (docs/TP.md) */
  int n = sc->tp_degree > 1 ? sc->tp_degree : 1;
  return (int64_t)sc->layers * per_layer / n;
}

int64_t lsim_scenario_adapter_pages(const lsim_scenario *sc, int rank) {
  /* padded-rank slots: every slot is sized for max_lora_rank */
  if (sc->max_lora_rank > 0 && rank < sc->max_lora_rank)
    rank = sc->max_lora_rank;
  if (sc->adapter_layout == LSIM_LAYOUT_SLORA) {
    /* S-LoRA paired slots: 4 * rank slots of 2 * L * H * b bytes, H the
    ** widest target input; each slot rounded up to whole pool pages */
    int64_t h = 0;
    for (int i = 0; i < sc->ntargets; i++)
      if (sc->targets[i].d_in > h)
        h = sc->targets[i].d_in;
    if (sc->tp_degree > 1) /* a rank's slot holds its 1/N of the hidden axis */
      h /= sc->tp_degree;
    int64_t slot = lsim_res_slora_slot_bytes(sc->layers, h, sc->dtype_bytes);
    return lsim_res_pages_slora(rank) *
           ((slot + sc->page_bytes - 1) / sc->page_bytes);
  }
  /* vector pages of H = page_bytes / dtype_bytes elements; one module per
  ** target, its factors stacked over the layers (effective rank L * r) */
  lsim_res_module m[LSIM_MAX_TARGETS];
  /* per TP rank: r (d_in + d_out) / N scalars in either style, i.e. the
  ** module with both base axes divided by N (validated divisible) */
  int n = sc->tp_degree > 1 ? sc->tp_degree : 1;
  for (int i = 0; i < sc->ntargets; i++)
    m[i] = (lsim_res_module){(int64_t)sc->layers * rank,
                             sc->targets[i].d_in / n, sc->targets[i].d_out / n};
  int64_t H = sc->page_bytes / sc->dtype_bytes;
  return lsim_res_pages_tensor(m, sc->ntargets, H < 1 ? 1 : H);
}

int64_t lsim_scenario_core_bytes(const lsim_scenario *sc, int method,
                                 int R) {
  int64_t per = method == LSIM_CMPM_JD_FULL ? (int64_t)R * R : R;
  return (int64_t)sc->layers * sc->ntargets * per * sc->dtype_bytes;
}

int64_t lsim_scenario_core_pages(const lsim_scenario *sc, int method, int R) {
  int64_t b = lsim_scenario_core_bytes(sc, method, R);
  int64_t p = (b + sc->page_bytes - 1) / sc->page_bytes;
  return p < 1 ? 1 : p;
}

int64_t lsim_scenario_kv_bytes_per_token(const lsim_scenario *sc) {
  /* TP: a GPU holds its ceil(kv_heads / N) heads (replicated when N
  ** exceeds the KV heads, as grouped-query attention does) */
  int64_t heads = sc->kv_heads;
  if (sc->tp_degree > 1)
    heads = (heads + sc->tp_degree - 1) / sc->tp_degree;
  return 2 * (int64_t)sc->layers * heads * sc->head_dim * sc->dtype_bytes;
}

lsim_err lsim_scenario_trace_open(const lsim_scenario *sc, lsim_trace *t,
                                  int skip_bad_rows, int64_t max_requests,
                                  lsim_errbuf *eb) {
  const char *names[LSIM_MAX_TENANTS];
  int64_t weights[LSIM_MAX_TENANTS];
  for (int i = 0; i < sc->ntenants; i++) {
    names[i] = sc->tenants[i].name;
    weights[i] = sc->tenants[i].traffic_weight;
  }
  lsim_trace_ctx ctx = {sc->seed,    sc->ntenants, names, weights,
                        sc->adapters, sc->zipf_s};
  lsim_trace_spec spec;
  memset(&spec, 0, sizeof spec);
  spec.format = sc->trace_format;
  spec.path = sc->trace_file;
  spec.skip_bad_rows = skip_bad_rows;
  spec.max_requests = max_requests > 0 ? max_requests : sc->trace_max_requests;
  spec.block_tokens = sc->trace_block_tokens;
  spec.servegen = &sc->trace_servegen;
  spec.gen_requests = sc->gen_requests;
  spec.gen_rate_per_s = sc->gen_rate_per_s;
  spec.gen_prompt = &sc->gen_prompt;
  spec.gen_output = &sc->gen_output;
  spec.gen_arrivals = &sc->gen_arrivals;
  spec.assign = &sc->trace_assign;
  spec.ctl = &sc->trace_ctl;
  return lsim_trace_open(t, &spec, &ctx, eb);
}

/* The default starvation threshold (scenario.h).  In doubles: the product
** of the scenario's largest budgets and coefficients passes 2^63 ns, and
** the result is clamped to [1, 2^53] ticks, the key's own range. */
int64_t lsim_scenario_starvation_ticks(const lsim_scenario *sc, int *derived) {
  if (derived)
    *derived = sc->starvation_ticks < 0;
  if (sc->starvation_ticks >= 0)
    return sc->starvation_ticks;
  int rmax = 1;
  for (int i = 0; i < sc->nranks; i++)
    if (sc->ranks[i].weight > 0 && sc->ranks[i].rank > rmax)
      rmax = sc->ranks[i].rank;
  /* the cost model's terms (backends/cost.c, lsim_cost_plan_ns) for the
  ** two fullest plans the batch budget allows */
  double tok = (double)sc->max_batch_tokens,
         req = (double)sc->max_batch_requests;
  double dec = req < tok ? req : tok;
  double seg = req * (double)sc->segment_ns;
  double prefill = (double)sc->iter_fixed_ns + tok * (double)sc->prefill_token_ns +
                   seg + tok * rmax * (double)sc->rank_row_ps / 1000.0;
  double decode = (double)sc->iter_fixed_ns + dec * (double)sc->decode_token_ns +
                  seg + dec * rmax * (double)sc->rank_row_ps / 1000.0;
  if (sc->cost_prof.on) {
    /* the profiled model (docs/PROFILE.md) of the same two plans: a
    ** prefill of the whole token budget split over the request budget,
    ** and a decode of the request budget, each row attending to a context
    ** of the token budget */
    int64_t t = sc->max_batch_tokens, r = sc->max_batch_requests;
    int64_t d = r < t ? r : t, per = t / r > 0 ? t / r : 1;
    lsim_cost_feat fp = {t, r, 0, 0, r, r * (per * (per + 1) / 2), r,
                         t * rmax, 1, 0, r * rmax};
    lsim_cost_feat fd = {d, d, d, d * (t + 1), 0, 0, d, d * rmax, 1,
                         d * rmax, d * rmax};
    prefill = (double)lsim_cost_prof_ns(&sc->cost_prof, &fp);
    decode = (double)lsim_cost_prof_ns(&sc->cost_prof, &fd);
  }
  double iter = prefill > decode ? prefill : decode;
  double load = lsim_scenario_copy_ns(sc, lsim_scenario_adapter_bytes(sc, rmax));
  double ns = LSIM_STARVE_ITERS * (iter + load);
  if (ns < (double)LSIM_STARVE_FLOOR_NS)
    ns = (double)LSIM_STARVE_FLOOR_NS;
  int64_t ticks;
  if (lsim_d2i64_ceil(ns / (double)sc->ns_per_tick, 1, INT64_C(1) << 53,
                      &ticks))
    ticks = INT64_C(1) << 53;
  return ticks;
}
