/*
** compress_cmd.c: `lorasim compress`, an adapter collection in, an
** immutable shared-basis bundle out (docs/COMPRESSION.md).
**
**   lorasim compress --in COLLECTION.json --out BUNDLE.json [fit options]
**   lorasim compress --synthetic N [synthetic options] --out BUNDLE.json
**   lorasim compress ... --report [--ranks 2,4,8] [--clusters-list 1,2,4]
**   lorasim compress --verify BUNDLE.json
**
** The collection is read and checked completely (shapes, factor
** orientation, the optional manifest probe y = s B A x of every adapter)
** before anything is fitted; input errors exit 2 with one line naming the
** file and the JSON path and a stable code.  The bundle is written beside
** the target and renamed into place only after everything succeeded, so a
** failed run leaves no file.  --verify re-derives every digest of a bundle
** from its contents and fails with E_CMP_BUNDLE_DIGEST on any mismatch.
*/
#include "compress_cmd.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "json.h"
#include "slurp.h"
#include "outfile.h"
#include "../compress/jd.h"
#include "../compress/ledger.h"
#include "../compress/synth.h"

#define LSIM__CMP_MAX_DIM 65536
#define LSIM__CMP_MAX_N 100000
#define LSIM__CMP_NAME_MAX 128

/* One loaded collection: names and the factor storage behind src. */
typedef struct lsim__coll {
  char base[LSIM__CMP_NAME_MAX], module[LSIM__CMP_NAME_MAX];
  int n, d_in, d_out;
  char **names;
  lsim_jd_source *src;
  double **store; /* [n] A then B of each source (JSON input) */
  lsim_jd_collection syn; /* synthetic input */
  char path[512];         /* JSON path of the last error */
} lsim__coll;

static void lsim__coll_release(lsim__coll *c) {
  for (int i = 0; c->names && i < c->n; i++)
    free(c->names[i]);
  for (int i = 0; c->store && i < c->n; i++)
    free(c->store[i]);
  free(c->names);
  free(c->store);
  if (c->syn.src)
    lsim_jd_collection_release(&c->syn);
  else
    free(c->src);
  memset(c, 0, sizeof *c);
}

static lsim_err lsim__at(lsim__coll *c, lsim_errbuf *eb, lsim_err code,
                         const char *path, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

static lsim_err lsim__at(lsim__coll *c, lsim_errbuf *eb, lsim_err code,
                         const char *path, const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  snprintf(c->path, sizeof c->path, "%s", path);
  return lsim_fail(eb, code, "%s", msg);
}

/* Collections and bundles go through the shared JSON layer (sim/json.h):
** duplicate keys are E_JSON_DUP_KEY with their path, syntax is E_CMP_JSON,
** and the file through lsim_slurp (FIFOs and devices refused before they
** are opened, at most LSIM_SLURP_CAP bytes, E_FILE_SIZE beyond). */
static const lsim_json_codes lsim__cmp_codes = {LSIM_E_CMP_JSON,
                                                LSIM_E_JSON_DUP_KEY};

/* ---- reading a collection --------------------------------------------- */

static int lsim__token_ok(const char *s) {
  size_t n = strlen(s);
  if (n < 1 || n >= LSIM__CMP_NAME_MAX)
    return 0;
  for (; *s; s++)
    if (*s < 0x21 || *s > 0x7e)
      return 0;
  return 1;
}

static lsim_err lsim__str(lsim__coll *c, const cJSON *o, const char *key,
                          const char *path, char *out, lsim_errbuf *eb) {
  const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
  char p[600];
  snprintf(p, sizeof p, "%s.%s", path, key);
  if (!j)
    return lsim__at(c, eb, LSIM_E_CMP_MISSING, p, "missing");
  if (!cJSON_IsString(j) || !lsim__token_ok(j->valuestring))
    return lsim__at(c, eb, LSIM_E_CMP_TYPE, p,
                    "want a string of 1..127 printable characters, no spaces");
  snprintf(out, LSIM__CMP_NAME_MAX, "%s", j->valuestring);
  return 0;
}

static lsim_err lsim__int(lsim__coll *c, const cJSON *o, const char *key,
                          const char *path, int lo, int hi, int *out,
                          lsim_errbuf *eb) {
  const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
  char p[600];
  snprintf(p, sizeof p, "%s.%s", path, key);
  if (!j)
    return lsim__at(c, eb, LSIM_E_CMP_MISSING, p, "missing");
  int64_t v = 0;
  if (lsim_json_int(j, &v) != LSIM_JSON_INT_OK || v < lo || v > hi)
    return lsim__at(c, eb, LSIM_E_CMP_TYPE, p, "want an integer in %d..%d", lo,
                    hi);
  *out = (int)v;
  return 0;
}

static lsim_err lsim__keys(lsim__coll *c, const cJSON *o, const char *path,
                           const char *const *allowed, lsim_errbuf *eb) {
  if (!cJSON_IsObject(o))
    return lsim__at(c, eb, LSIM_E_CMP_TYPE, path, "want an object");
  for (const cJSON *k = o->child; k; k = k->next) {
    int ok = 0;
    for (int t = 0; allowed[t]; t++)
      ok |= strcmp(k->string, allowed[t]) == 0;
    if (!ok) {
      char p[600];
      snprintf(p, sizeof p, "%s.%s", path, k->string);
      return lsim__at(c, eb, LSIM_E_CMP_UNKNOWN_KEY, p, "unknown key");
    }
  }
  return 0;
}

/* The shape of a JSON matrix (array of equal-length number arrays). */
static lsim_err lsim__mshape(lsim__coll *c, const cJSON *j, const char *path,
                             int *rows, int *cols, lsim_errbuf *eb) {
  if (!cJSON_IsArray(j) || cJSON_GetArraySize(j) < 1)
    return lsim__at(c, eb, LSIM_E_CMP_TYPE, path,
                    "want a non-empty array of rows");
  *rows = cJSON_GetArraySize(j);
  *cols = -1;
  int i = 0;
  for (const cJSON *r = j->child; r; r = r->next, i++) {
    char p[600];
    snprintf(p, sizeof p, "%s[%d]", path, i);
    if (!cJSON_IsArray(r))
      return lsim__at(c, eb, LSIM_E_CMP_TYPE, p, "want an array of numbers");
    int n = cJSON_GetArraySize(r);
    if (*cols >= 0 && n != *cols)
      return lsim__at(c, eb, LSIM_E_CMP_SHAPE, p,
                      "row has %d entries, row 0 has %d", n, *cols);
    *cols = n;
  }
  return 0;
}

static lsim_err lsim__mread(lsim__coll *c, const cJSON *j, const char *path,
                            double *out, lsim_errbuf *eb) {
  int i = 0;
  size_t t = 0;
  for (const cJSON *r = j->child; r; r = r->next, i++) {
    int k = 0;
    for (const cJSON *v = r->child; v; v = v->next, k++) {
      if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) {
        char p[600];
        snprintf(p, sizeof p, "%s[%d][%d]", path, i, k);
        return lsim__at(c, eb, LSIM_E_CMP_TYPE, p, "want a finite number");
      }
      out[t++] = v->valuedouble;
    }
  }
  return 0;
}

/* A factor of wanted shape [want_r][want_c]: E_CMP_ORIENTATION when it
** arrives transposed, E_CMP_SHAPE otherwise. */
static lsim_err lsim__factor(lsim__coll *c, const cJSON *ad, const char *key,
                             const char *path, int want_r, int want_c,
                             double *out, lsim_errbuf *eb) {
  const cJSON *j = cJSON_GetObjectItemCaseSensitive(ad, key);
  char p[600];
  snprintf(p, sizeof p, "%s.%s", path, key);
  if (!j)
    return lsim__at(c, eb, LSIM_E_CMP_MISSING, p, "missing");
  int r, k;
  lsim_err rc = lsim__mshape(c, j, p, &r, &k, eb);
  if (rc)
    return rc;
  if (r != want_r || k != want_c) {
    if (r == want_c && k == want_r)
      return lsim__at(c, eb, LSIM_E_CMP_ORIENTATION, p,
                      "[%d][%d] is the transpose of the checkpoint "
                      "orientation [%d][%d] (A is [rank][d_in], B is "
                      "[d_out][rank])", r, k, want_r, want_c);
    return lsim__at(c, eb, LSIM_E_CMP_SHAPE, p, "[%d][%d], want [%d][%d]", r,
                    k, want_r, want_c);
  }
  return lsim__mread(c, j, p, out, eb);
}

static lsim_err lsim__vec(lsim__coll *c, const cJSON *o, const char *key,
                          const char *path, int len, double *out,
                          lsim_errbuf *eb) {
  const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
  char p[600];
  snprintf(p, sizeof p, "%s.%s", path, key);
  if (!j)
    return lsim__at(c, eb, LSIM_E_CMP_MISSING, p, "missing");
  if (!cJSON_IsArray(j) || cJSON_GetArraySize(j) != len)
    return lsim__at(c, eb, LSIM_E_CMP_SHAPE, p, "want an array of %d numbers",
                    len);
  int t = 0;
  for (const cJSON *v = j->child; v; v = v->next, t++) {
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) {
      snprintf(p, sizeof p, "%s.%s[%d]", path, key, t);
      return lsim__at(c, eb, LSIM_E_CMP_TYPE, p, "want a finite number");
    }
    out[t] = v->valuedouble;
  }
  return 0;
}

/*
** The manifest probe: reconstruct s B A x from the factors as given and
** compare with the manifest's y.  A wrong scale convention or factors in
** the wrong orientation (also square ones, which no shape check catches)
** fail here, before any fitting.
*/
static lsim_err lsim__probe(lsim__coll *c, const cJSON *ad, const char *path,
                            const lsim_jd_source *s, lsim_errbuf *eb) {
  const cJSON *pr = cJSON_GetObjectItemCaseSensitive(ad, "probe");
  if (!pr)
    return 0;
  char p[600];
  snprintf(p, sizeof p, "%s.probe", path);
  static const char *const keys[] = {"x", "y", NULL};
  lsim_err rc = lsim__keys(c, pr, p, keys, eb);
  if (rc)
    return rc;
  double *x = calloc((size_t)c->d_in, sizeof *x);
  double *y = calloc((size_t)c->d_out, sizeof *y);
  double *ax = calloc((size_t)s->rank, sizeof *ax);
  if (!x || !y || !ax) {
    rc = lsim_fail(eb, LSIM_E_NOMEM, "probe");
    goto out;
  }
  if ((rc = lsim__vec(c, pr, "x", p, c->d_in, x, eb)) ||
      (rc = lsim__vec(c, pr, "y", p, c->d_out, y, eb)))
    goto out;
  for (int q = 0; q < s->rank; q++)
    for (int k = 0; k < c->d_in; k++)
      ax[q] += s->A[(size_t)q * c->d_in + k] * x[k];
  for (int o = 0; o < c->d_out; o++) {
    double got = 0;
    for (int q = 0; q < s->rank; q++)
      got += s->B[(size_t)o * s->rank + q] * ax[q];
    got *= s->scale;
    if (fabs(got - y[o]) > 1e-9 * (1 + fabs(y[o]))) {
      char py[640];
      snprintf(py, sizeof py, "%s.y[%d]", p, o);
      rc = lsim__at(c, eb, LSIM_E_CMP_SOURCE_CHECK, py,
                    "s B A x = %.17g but the manifest says %.17g (wrong "
                    "factor orientation or scale)", got, y[o]);
      goto out;
    }
  }
out:
  free(x);
  free(y);
  free(ax);
  return rc;
}

static lsim_err lsim__parse(lsim__coll *c, const cJSON *root, lsim_errbuf *eb) {
  static const char *const top[] = {"base", "module", "d_in", "d_out",
                                    "adapters", NULL};
  static const char *const adk[] = {"name", "rank", "scale", "A", "B",
                                    "probe", NULL};
  lsim_err rc = lsim__keys(c, root, "$", top, eb);
  if (rc || (rc = lsim__str(c, root, "base", "$", c->base, eb)) ||
      (rc = lsim__str(c, root, "module", "$", c->module, eb)) ||
      (rc = lsim__int(c, root, "d_in", "$", 1, LSIM__CMP_MAX_DIM, &c->d_in,
                      eb)) ||
      (rc = lsim__int(c, root, "d_out", "$", 1, LSIM__CMP_MAX_DIM, &c->d_out,
                      eb)))
    return rc;
  const cJSON *ads = cJSON_GetObjectItemCaseSensitive(root, "adapters");
  if (!ads)
    return lsim__at(c, eb, LSIM_E_CMP_MISSING, "$.adapters", "missing");
  if (!cJSON_IsArray(ads) || cJSON_GetArraySize(ads) < 1 ||
      cJSON_GetArraySize(ads) > LSIM__CMP_MAX_N)
    return lsim__at(c, eb, LSIM_E_CMP_TYPE, "$.adapters",
                    "want an array of 1..%d adapters", LSIM__CMP_MAX_N);
  int n = cJSON_GetArraySize(ads);
  c->names = calloc((size_t)n, sizeof *c->names);
  c->store = calloc((size_t)n, sizeof *c->store);
  c->src = calloc((size_t)n, sizeof *c->src);
  if (!c->names || !c->store || !c->src)
    return lsim_fail(eb, LSIM_E_NOMEM, "%d adapters", n);
  c->n = n;
  int i = 0;
  for (const cJSON *ad = ads->child; ad; ad = ad->next, i++) {
    char p[64], name[LSIM__CMP_NAME_MAX];
    snprintf(p, sizeof p, "$.adapters[%d]", i);
    int rank;
    if ((rc = lsim__keys(c, ad, p, adk, eb)) ||
        (rc = lsim__str(c, ad, "name", p, name, eb)) ||
        (rc = lsim__int(c, ad, "rank", p, 1, LSIM_JD_MAX_SOURCE_RANK, &rank,
                        eb)))
      return rc;
    for (int t = 0; t < i; t++)
      if (strcmp(c->names[t], name) == 0) {
        char pn[80];
        snprintf(pn, sizeof pn, "%s.name", p);
        return lsim__at(c, eb, LSIM_E_CMP_DUP_SOURCE, pn,
                        "adapter '%s' appears twice (also $.adapters[%d])",
                        name, t);
      }
    if (!(c->names[i] = strdup(name)))
      return lsim_fail(eb, LSIM_E_NOMEM, "names");
    const cJSON *sc = cJSON_GetObjectItemCaseSensitive(ad, "scale");
    double scale = 1;
    if (sc) {
      if (!cJSON_IsNumber(sc) || !isfinite(sc->valuedouble) ||
          sc->valuedouble == 0) {
        char ps[80];
        snprintf(ps, sizeof ps, "%s.scale", p);
        return lsim__at(c, eb, LSIM_E_CMP_TYPE, ps,
                        "want a finite non-zero number");
      }
      scale = sc->valuedouble;
    }
    size_t na = (size_t)rank * c->d_in, nb = (size_t)c->d_out * rank;
    double *st = calloc(na + nb, sizeof *st);
    if (!st)
      return lsim_fail(eb, LSIM_E_NOMEM, "factors of %s", name);
    c->store[i] = st;
    if ((rc = lsim__factor(c, ad, "A", p, rank, c->d_in, st, eb)) ||
        (rc = lsim__factor(c, ad, "B", p, c->d_out, rank, st + na, eb)))
      return rc;
    lsim_jd_source *s = &c->src[i];
    s->rank = rank;
    s->scale = scale;
    s->A = st;
    s->B = st + na;
    if ((rc = lsim__probe(c, ad, p, s, eb)))
      return rc;
    if (!(lsim_jd_delta_norm2(s, c->d_in, c->d_out) > 0))
      return lsim__at(c, eb, LSIM_E_CMP_ZERO_NORM, p,
                      "adapter '%s' has a zero update s B A", name);
  }
  return 0;
}

/* ---- the bundle ----------------------------------------------------------- */

typedef struct lsim__bundle {
  lsim_digest *src, *bases, *cores, set, id;
  int *ranks;
  double *scales;
} lsim__bundle;

static void lsim__bundle_release(lsim__bundle *b) {
  free(b->src);
  free(b->ranks);
  free(b->scales);
  free(b->bases);
  free(b->cores);
  memset(b, 0, sizeof *b);
}

/* Every digest of a fitted collection; src given (from the sources). */
static lsim_err lsim__digests(const lsim__coll *c, const lsim_jd_config *cfg,
                              const lsim_jd_result *r, lsim__bundle *b,
                              lsim_errbuf *eb) {
  lsim_err rc = 0;
  b->bases = calloc((size_t)r->k, sizeof *b->bases);
  b->cores = calloc((size_t)r->n, sizeof *b->cores);
  if (!b->bases || !b->cores)
    return lsim_fail(eb, LSIM_E_NOMEM, "digests");
  if ((rc = lsim_jd_source_set_digest((const char *const *)c->names, b->src,
                                      c->n, &b->set, eb)))
    return rc;
  for (int k = 0; k < r->k; k++)
    if ((rc = lsim_jd_basis_digest(r, k, &b->bases[k], eb)))
      return rc;
  for (int i = 0; i < r->n; i++)
    if ((rc = lsim_jd_core_digest(r, i, &b->bases[r->cluster[i]],
                                  &b->cores[i], eb)))
      return rc;
  lsim_jd_bundle_in in = {c->base, c->module, cfg->max_iterations,
                          cfg->max_rounds, cfg->seed,
                          (const char *const *)c->names, b->src, b->ranks,
                          b->scales, &b->set, r, b->bases, b->cores};
  return lsim_jd_bundle_digest(&in, &b->id, eb);
}

static cJSON *lsim__hex(const lsim_digest *d) {
  char h[LSIM_DIGEST_HEX_SIZE];
  return cJSON_CreateString(lsim_digest_hex(d, h));
}

/* A number written with 17 significant digits, so that reading it back
** gives the same binary64 (cJSON's own printer rounds to 15 digits
** whenever they compare equal within its epsilon, which would change the
** digests a reader re-derives). */
static cJSON *lsim__num(double d) {
  char buf[40];
  snprintf(buf, sizeof buf, "%.17g", d == 0 ? 0.0 : d);
  return cJSON_CreateRaw(buf);
}

static void lsim__addnum(cJSON *o, const char *key, double d) {
  cJSON_AddItemToObject(o, key, lsim__num(d));
}

static cJSON *lsim__matrix(const double *m, int rows, int cols) {
  cJSON *a = cJSON_CreateArray();
  for (int i = 0; a && i < rows; i++) {
    cJSON *row = cJSON_CreateArray();
    for (int j = 0; row && j < cols; j++)
      cJSON_AddItemToArray(row, lsim__num(m[(size_t)i * cols + j]));
    cJSON_AddItemToArray(a, row);
  }
  return a;
}

static cJSON *lsim__bundle_json(const lsim__coll *c, const lsim_jd_config *cfg,
                                const lsim_jd_result *r,
                                const lsim__bundle *b) {
  cJSON *o = cJSON_CreateObject();
  char seed[32];
  snprintf(seed, sizeof seed, "%llu", (unsigned long long)cfg->seed);
  cJSON_AddStringToObject(o, "format", "lorasim-jd-bundle");
  cJSON_AddNumberToObject(o, "version", 1);
  cJSON_AddItemToObject(o, "bundle_sha256", lsim__hex(&b->id));
  cJSON_AddStringToObject(o, "base", c->base);
  cJSON_AddStringToObject(o, "module", c->module);
  cJSON_AddStringToObject(o, "method", lsim_jd_method_name(r->method));
  cJSON_AddNumberToObject(o, "d_in", r->d_in);
  cJSON_AddNumberToObject(o, "d_out", r->d_out);
  cJSON_AddNumberToObject(o, "rank", r->R);
  cJSON_AddNumberToObject(o, "clusters", r->k);
  cJSON_AddNumberToObject(o, "max_iterations", cfg->max_iterations);
  cJSON_AddNumberToObject(o, "max_rounds", cfg->max_rounds);
  cJSON_AddStringToObject(o, "seed", seed);
  cJSON_AddStringToObject(o, "normalization", "unit-frobenius");
  cJSON_AddItemToObject(o, "source_set_sha256", lsim__hex(&b->set));
  cJSON *srcs = cJSON_AddArrayToObject(o, "sources");
  for (int i = 0; i < r->n; i++) {
    cJSON *s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "name", c->names[i]);
    cJSON_AddItemToObject(s, "sha256", lsim__hex(&b->src[i]));
    cJSON_AddNumberToObject(s, "rank", b->ranks[i]);
    lsim__addnum(s, "scale", b->scales[i]);
    lsim__addnum(s, "norm", r->norm[i]);
    lsim__addnum(s, "err2", r->err2[i]);
    cJSON_AddNumberToObject(s, "cluster", r->cluster[i]);
    cJSON_AddItemToObject(s, "core_sha256", lsim__hex(&b->cores[i]));
    cJSON_AddItemToArray(srcs, s);
  }
  cJSON *bases = cJSON_AddArrayToObject(o, "bases");
  for (int k = 0; k < r->k; k++) {
    cJSON *s = cJSON_CreateObject();
    cJSON_AddNumberToObject(s, "cluster", k);
    cJSON_AddItemToObject(s, "sha256", lsim__hex(&b->bases[k]));
    cJSON_AddItemToObject(s, "U", lsim__matrix(r->U + (size_t)k * r->d_out *
                                                          r->R,
                                               r->d_out, r->R));
    cJSON_AddItemToObject(s, "V", lsim__matrix(r->V + (size_t)k * r->d_in *
                                                          r->R,
                                               r->d_in, r->R));
    cJSON_AddItemToArray(bases, s);
  }
  cJSON_AddItemToObject(o, "cores",
                        lsim__matrix(r->cores, r->n, r->core_len));
  cJSON *m = cJSON_AddObjectToObject(o, "metrics");
  cJSON_AddNumberToObject(m, "iterations", r->iterations);
  cJSON_AddNumberToObject(m, "rounds", r->rounds);
  cJSON_AddBoolToObject(m, "converged", r->converged);
  lsim__addnum(m, "total_err2", r->total_err2);
  lsim__addnum(m, "total_norm2", r->total_norm2);
  lsim__addnum(m, "rel_err", r->total_err2 / r->total_norm2);
  return o;
}

static lsim_err lsim__write_atomic(const char *path, const char *text,
                                   lsim_errbuf *eb) {
  /* sim/outfile.h: a temporary beside it (O_EXCL|O_NOFOLLOW), every write
  ** checked, renamed into place; a link or a device node is refused */
  lsim_outfile of;
  lsim_err rc = lsim_out_open(&of, path, eb);
  if (rc)
    return rc;
  if (fputs(text, of.fp) < 0 || fputc('\n', of.fp) == EOF) {
    rc = lsim_fail(eb, LSIM_E_OUT_WRITE, "%s: write failed: %s", path,
                   strerror(errno));
    lsim_out_abort(&of);
    return rc;
  }
  return lsim_out_commit(&of, eb);
}

/* ---- --verify ------------------------------------------------------------- */

static const cJSON *lsim__get(const cJSON *o, const char *k) {
  return cJSON_GetObjectItemCaseSensitive(o, k);
}

static int lsim__hex_is(const cJSON *j, const lsim_digest *d) {
  char h[LSIM_DIGEST_HEX_SIZE];
  return cJSON_IsString(j) && strcmp(j->valuestring, lsim_digest_hex(d, h)) == 0;
}

/* Rebuild a result from a bundle's JSON and re-derive every digest; with
** `out`, hand over its serving identity instead of printing. */
static lsim_err lsim__verify(const cJSON *o, lsim__coll *c,
                             lsim_compress_serve *out, lsim_errbuf *eb) {
  static const char *const top[] = {"format", "version", "bundle_sha256",
      "base", "module", "method", "d_in", "d_out", "rank", "clusters",
      "max_iterations", "max_rounds", "seed", "normalization",
      "source_set_sha256", "sources", "bases", "cores", "metrics", NULL};
  lsim_err rc = lsim__keys(c, o, "$", top, eb);
  if (rc)
    return rc;
  const cJSON *fmt = lsim__get(o, "format");
  if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "lorasim-jd-bundle"))
    return lsim__at(c, eb, LSIM_E_CMP_BUNDLE, "$.format",
                    "not a lorasim-jd-bundle");
  lsim_jd_result r = LSIM_JD_RESULT_INIT;
  lsim_jd_config cfg = LSIM_JD_CONFIG_INIT;
  lsim__bundle b = {0};
  const cJSON *me = lsim__get(o, "method"), *seed = lsim__get(o, "seed"),
              *srcs = lsim__get(o, "sources"), *bases = lsim__get(o, "bases"),
              *cores = lsim__get(o, "cores"), *met = lsim__get(o, "metrics");
  if ((rc = lsim__str(c, o, "base", "$", c->base, eb)) ||
      (rc = lsim__str(c, o, "module", "$", c->module, eb)) ||
      (rc = lsim__int(c, o, "d_in", "$", 1, LSIM__CMP_MAX_DIM, &r.d_in, eb)) ||
      (rc = lsim__int(c, o, "d_out", "$", 1, LSIM__CMP_MAX_DIM, &r.d_out,
                      eb)) ||
      (rc = lsim__int(c, o, "rank", "$", 1, LSIM__CMP_MAX_DIM, &r.R, eb)) ||
      (rc = lsim__int(c, o, "clusters", "$", 1, LSIM__CMP_MAX_N, &r.k, eb)) ||
      (rc = lsim__int(c, o, "max_iterations", "$", 1, 1 << 30,
                      &cfg.max_iterations, eb)) ||
      (rc = lsim__int(c, o, "max_rounds", "$", 1, 1 << 30, &cfg.max_rounds,
                      eb)))
    goto out;
  r.method = lsim_jd_method_find(cJSON_IsString(me) ? me->valuestring : NULL);
  if (!r.method) {
    rc = lsim__at(c, eb, LSIM_E_CMP_METHOD, "$.method", "unknown method");
    goto out;
  }
  if (!cJSON_IsString(seed) || !*seed->valuestring) {
    rc = lsim__at(c, eb, LSIM_E_CMP_TYPE, "$.seed", "want a decimal string");
    goto out;
  }
  cfg.seed = strtoull(seed->valuestring, NULL, 10);
  if (!cJSON_IsArray(srcs) || cJSON_GetArraySize(srcs) < 1 ||
      !cJSON_IsArray(bases) || cJSON_GetArraySize(bases) != r.k ||
      !cJSON_IsObject(met)) {
    rc = lsim__at(c, eb, LSIM_E_CMP_BUNDLE, "$", "sources, bases (one per "
                  "cluster) and metrics are required");
    goto out;
  }
  r.n = c->n = cJSON_GetArraySize(srcs);
  r.core_len = r.method == LSIM_JD_FULL ? r.R * r.R : r.R;
  r.U = calloc((size_t)r.k * r.d_out * r.R, sizeof *r.U);
  r.V = calloc((size_t)r.k * r.d_in * r.R, sizeof *r.V);
  r.cores = calloc((size_t)r.n * r.core_len, sizeof *r.cores);
  r.cluster = calloc((size_t)r.n, sizeof *r.cluster);
  r.norm = calloc((size_t)r.n, sizeof *r.norm);
  r.err2 = calloc((size_t)r.n, sizeof *r.err2);
  b.src = calloc((size_t)r.n, sizeof *b.src);
  b.ranks = calloc((size_t)r.n, sizeof *b.ranks);
  b.scales = calloc((size_t)r.n, sizeof *b.scales);
  c->names = calloc((size_t)r.n, sizeof *c->names);
  if (!r.U || !r.V || !r.cores || !r.cluster || !r.norm || !r.err2 ||
      !b.src || !b.ranks || !b.scales || !c->names) {
    rc = lsim_fail(eb, LSIM_E_NOMEM, "bundle");
    goto out;
  }
  int i = 0;
  for (const cJSON *s = srcs->child; s; s = s->next, i++) {
    char p[64], name[LSIM__CMP_NAME_MAX];
    snprintf(p, sizeof p, "$.sources[%d]", i);
    if ((rc = lsim__str(c, s, "name", p, name, eb)) ||
        (rc = lsim__int(c, s, "cluster", p, 0, r.k - 1, &r.cluster[i], eb)) ||
        (rc = lsim__int(c, s, "rank", p, 1, LSIM_JD_MAX_SOURCE_RANK,
                        &b.ranks[i], eb)))
      goto out;
    c->names[i] = strdup(name);
    const cJSON *sh = lsim__get(s, "sha256"), *nm = lsim__get(s, "norm"),
                *e2 = lsim__get(s, "err2"), *sc = lsim__get(s, "scale");
    if (!c->names[i] || !cJSON_IsString(sh) ||
        strlen(sh->valuestring) != 64 || !cJSON_IsNumber(nm) ||
        !cJSON_IsNumber(e2) || !cJSON_IsNumber(sc)) {
      rc = lsim__at(c, eb, LSIM_E_CMP_TYPE, p,
                    "want name, sha256 (64 hex digits), scale, norm, err2");
      goto out;
    }
    b.scales[i] = sc->valuedouble;
    for (int t = 0; t < 32; t++) {
      unsigned v;
      if (sscanf(sh->valuestring + 2 * t, "%2x", &v) != 1) {
        rc = lsim__at(c, eb, LSIM_E_CMP_TYPE, p, "sha256 is not hex");
        goto out;
      }
      b.src[i].b[t] = (uint8_t)v;
    }
    r.norm[i] = nm->valuedouble;
    r.err2[i] = e2->valuedouble;
  }
  int k = 0;
  for (const cJSON *s = bases->child; s; s = s->next, k++) {
    char p[64], pp[80];
    int rows, cols;
    snprintf(p, sizeof p, "$.bases[%d]", k);
    const cJSON *U = lsim__get(s, "U"), *V = lsim__get(s, "V");
    snprintf(pp, sizeof pp, "%s.U", p);
    if ((rc = lsim__mshape(c, U, pp, &rows, &cols, eb)))
      goto out;
    if (rows != r.d_out || cols != r.R) {
      rc = lsim__at(c, eb, LSIM_E_CMP_SHAPE, pp, "want [d_out][rank]");
      goto out;
    }
    if ((rc = lsim__mread(c, U, pp, r.U + (size_t)k * r.d_out * r.R, eb)))
      goto out;
    snprintf(pp, sizeof pp, "%s.V", p);
    if ((rc = lsim__mshape(c, V, pp, &rows, &cols, eb)))
      goto out;
    if (rows != r.d_in || cols != r.R) {
      rc = lsim__at(c, eb, LSIM_E_CMP_SHAPE, pp, "want [d_in][rank]");
      goto out;
    }
    if ((rc = lsim__mread(c, V, pp, r.V + (size_t)k * r.d_in * r.R, eb)))
      goto out;
  }
  int rows, cols;
  if ((rc = lsim__mshape(c, cores, "$.cores", &rows, &cols, eb)))
    goto out;
  if (rows != r.n || cols != r.core_len) {
    rc = lsim__at(c, eb, LSIM_E_CMP_SHAPE, "$.cores",
                  "want [%d][%d] (one row per source)", r.n, r.core_len);
    goto out;
  }
  if ((rc = lsim__mread(c, cores, "$.cores", r.cores, eb)))
    goto out;
  const cJSON *it = lsim__get(met, "iterations"), *ro = lsim__get(met, "rounds"),
              *cv = lsim__get(met, "converged"),
              *te = lsim__get(met, "total_err2"),
              *tn = lsim__get(met, "total_norm2");
  if (!cJSON_IsNumber(it) || !cJSON_IsNumber(ro) || !cJSON_IsBool(cv) ||
      !cJSON_IsNumber(te) || !cJSON_IsNumber(tn)) {
    rc = lsim__at(c, eb, LSIM_E_CMP_TYPE, "$.metrics",
                  "want iterations, rounds, converged, total_err2, "
                  "total_norm2");
    goto out;
  }
  r.iterations = it->valueint;
  r.rounds = ro->valueint;
  r.converged = cJSON_IsTrue(cv);
  r.total_err2 = te->valuedouble;
  r.total_norm2 = tn->valuedouble;
  const cJSON *re = lsim__get(met, "rel_err"),
              *no = lsim__get(o, "normalization");
  if (!cJSON_IsNumber(re) || re->valuedouble != r.total_err2 / r.total_norm2 ||
      !cJSON_IsString(no) || strcmp(no->valuestring, "unit-frobenius")) {
    rc = lsim__at(c, eb, LSIM_E_CMP_BUNDLE, "$.metrics.rel_err",
                  "rel_err must be total_err2 / total_norm2 and "
                  "normalization unit-frobenius");
    goto out;
  }
  if ((rc = lsim__digests(c, &cfg, &r, &b, eb)))
    goto out;
  if (!lsim__hex_is(lsim__get(o, "source_set_sha256"), &b.set)) {
    rc = lsim__at(c, eb, LSIM_E_CMP_BUNDLE_DIGEST, "$.source_set_sha256",
                  "does not match the ordered sources");
    goto out;
  }
  k = 0;
  for (const cJSON *s = bases->child; s; s = s->next, k++)
    if (!lsim__hex_is(lsim__get(s, "sha256"), &b.bases[k])) {
      char p[64];
      snprintf(p, sizeof p, "$.bases[%d].sha256", k);
      rc = lsim__at(c, eb, LSIM_E_CMP_BUNDLE_DIGEST, p,
                    "does not match the basis values");
      goto out;
    }
  i = 0;
  for (const cJSON *s = srcs->child; s; s = s->next, i++)
    if (!lsim__hex_is(lsim__get(s, "core_sha256"), &b.cores[i])) {
      char p[64];
      snprintf(p, sizeof p, "$.sources[%d].core_sha256", i);
      rc = lsim__at(c, eb, LSIM_E_CMP_BUNDLE_DIGEST, p,
                    "does not match the core and its basis");
      goto out;
    }
  if (!lsim__hex_is(lsim__get(o, "bundle_sha256"), &b.id)) {
    rc = lsim__at(c, eb, LSIM_E_CMP_BUNDLE_DIGEST, "$.bundle_sha256",
                  "does not match the bundle contents");
    goto out;
  }
  if (out) {
    out->method = r.method;
    out->R = r.R;
    out->k = r.k;
    out->n = r.n;
    out->d_in = r.d_in;
    out->d_out = r.d_out;
    out->bundle = b.id;
    out->source_set = b.set;
    out->cluster = r.cluster;
    r.cluster = NULL;
    out->basis = b.bases;
    out->core = b.cores;
    b.bases = b.cores = NULL;
  } else {
    char h[LSIM_DIGEST_HEX_SIZE];
    printf("bundle %s ok: %s, R %d, %d cluster(s), %d sources\n",
           lsim_digest_hex(&b.id, h), lsim_jd_method_name(r.method), r.R, r.k,
           r.n);
  }
out:
  lsim_jd_result_release(&r);
  lsim__bundle_release(&b);
  return rc;
}

/* ---- the report ------------------------------------------------------------ */

/* Measured kernel times (tools/gpu_compress.sh writes them): one line per
** configuration, "METHOD R K JD_MS LORA_MS TOKENS"; '#' starts a comment. */
typedef struct lsim__ktime {
  int method, R, k, tokens;
  double jd_ms, lora_ms;
} lsim__ktime;

static lsim_err lsim__read_times(const char *file, lsim__ktime **out, int *n,
                                 lsim_errbuf *eb) {
  *out = NULL;
  *n = 0;
  FILE *f = fopen(file, "r");
  if (!f)
    return lsim_fail(eb, LSIM_E_IO, "%s: cannot open: %s", file,
                     strerror(errno));
  char line[512], meth[32];
  int cap = 0, ln = 0;
  lsim_err rc = 0;
  while (fgets(line, sizeof line, f)) {
    ln++;
    char *h = strchr(line, '#');
    if (h)
      *h = 0;
    if (strspn(line, " \t\r\n") == strlen(line))
      continue;
    lsim__ktime t;
    char tail;
    if (sscanf(line, "%31s %d %d %lf %lf %d %c", meth, &t.R, &t.k, &t.jd_ms,
               &t.lora_ms, &t.tokens, &tail) != 6 ||
        !(t.method = lsim_jd_method_find(meth)) || t.R < 1 || t.k < 1 ||
        !(t.jd_ms > 0) || !(t.lora_ms > 0) || t.tokens < 1) {
      rc = lsim_fail(eb, LSIM_E_CMP_TYPE,
                     "%s:%d: want METHOD R K JD_MS LORA_MS TOKENS", file, ln);
      break;
    }
    if (*n == cap) {
      cap = cap ? 2 * cap : 16;
      lsim__ktime *nt = realloc(*out, sizeof *nt * (size_t)cap);
      if (!nt) {
        rc = lsim_fail(eb, LSIM_E_NOMEM, "kernel times");
        break;
      }
      *out = nt;
    }
    (*out)[(*n)++] = t;
  }
  fclose(f);
  if (rc) {
    free(*out);
    *out = NULL;
    *n = 0;
  }
  return rc;
}

static int lsim__parse_list(const char *s, int *out, int max) {
  int n = 0;
  while (*s && n < max) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || v < 1 || v > LSIM__CMP_MAX_DIM)
      return -1;
    out[n++] = (int)v;
    s = end;
    if (*s == ',')
      s++;
    else if (*s)
      return -1;
  }
  return *s ? -1 : n;
}

/*
** Resident bytes (FP16 parameters plus one int32 assignment per adapter
** when clustered), the bytes to bring one cold adapter to a device whose
** bases are resident, and the reconstruction error, across R and k.
** Kernel time is never inferred from bytes: it stays "not measured".
*/
static lsim_err lsim__report(const lsim__coll *c, const lsim_jd_config *base,
                             const int *ranks, int nr, const int *ks, int nk,
                             const lsim__ktime *kt, int nkt,
                             lsim_errbuf *eb) {
  int r0 = 0;
  for (int i = 0; i < c->n; i++)
    if (c->src[i].rank > r0)
      r0 = c->src[i].rank;
  int64_t S = (int64_t)c->d_in + c->d_out, lora_params = 0;
  for (int i = 0; i < c->n; i++)
    lora_params += (int64_t)c->src[i].rank * S;
  printf("collection: %d adapters, d_in %d, d_out %d, max source rank %d\n",
         c->n, c->d_in, c->d_out, r0);
  printf("ordinary LoRA: resident %lld B, per-adapter transfer %lld B "
         "(fp16), error 0\n\n",
         (long long)(2 * lora_params), (long long)(2 * (int64_t)r0 * S));
  printf("%-8s %4s %3s %14s %8s %12s %12s %12s %9s  %s\n", "method", "R", "k",
         "resident_B", "vs_lora", "adapter_B", "basis_B", "rel_err",
         "converged", "kernel_time");
  for (int m = LSIM_JD_FULL; m <= LSIM_JD_DIAG; m++)
    for (int a = 0; a < nr; a++)
      for (int b = 0; b < nk; b++) {
        lsim_jd_config cfg = *base;
        cfg.method = m;
        cfg.rank = ranks[a];
        cfg.clusters = ks[b];
        lsim_jd_result r = LSIM_JD_RESULT_INIT;
        lsim_errbuf e2 = LSIM_ERRBUF_INIT;
        lsim_err rc =
            lsim_jd_fit(c->src, c->n, c->d_in, c->d_out, &cfg, &r, &e2);
        if (rc == LSIM_E_CMP_RANK || rc == LSIM_E_CMP_CLUSTERS) {
          printf("%-8s %4d %3d  skipped: %s\n", lsim_jd_method_name(m),
                 ranks[a], ks[b], e2.msg);
          continue;
        }
        if (rc) {
          *eb = e2;
          return rc;
        }
        lsim_jd_ledger L;
        if ((rc = lsim_jd_ledger_count(c->n, r0, c->d_in, c->d_out, ranks[a],
                                       ks[b], &L, eb))) {
          lsim_jd_result_release(&r);
          return rc;
        }
        int64_t params = m == LSIM_JD_FULL ? L.full_k : L.diag_k;
        int64_t bytes = 2 * params + (ks[b] > 1 ? 4 * (int64_t)c->n : 0);
        int64_t core_b = 2 * (int64_t)r.core_len;
        int64_t basis_b = 2 * (int64_t)ranks[a] * S;
        char kbuf[160];
        snprintf(kbuf, sizeof kbuf, "not measured");
        for (int t = 0; t < nkt; t++)
          if (kt[t].method == m && kt[t].R == ranks[a] && kt[t].k == ks[b])
            snprintf(kbuf, sizeof kbuf,
                     "jd %.4f ms, lora %.4f ms (%d tokens, cited: a GPU "
                     "measurement read from --kernel-times)",
                     kt[t].jd_ms, kt[t].lora_ms, kt[t].tokens);
        printf("%-8s %4d %3d %14lld %8.4f %12lld %12lld %12.4e %9s  %s\n",
               lsim_jd_method_name(m), ranks[a], ks[b], (long long)bytes,
               (double)bytes / (double)(2 * lora_params), (long long)core_b,
               (long long)basis_b, r.total_err2 / r.total_norm2,
               r.converged ? "yes" : "no", kbuf);
        lsim_jd_result_release(&r);
      }
  printf("\nresident_B: bases and cores in fp16 (+4 B cluster id per adapter "
         "when k > 1);\nadapter_B: one cold adapter's core with its basis "
         "resident; basis_B: one cluster's U and V.\nkernel_time: only from "
         "a GPU measurement (--kernel-times, written by "
         "tools/gpu_compress.sh);\nfewer bytes are never reported as lower "
         "latency.\n");
  return 0;
}

/* ---- the command ------------------------------------------------------------ */

static void lsim__usage(FILE *f) {
  fputs(
      "usage: lorasim compress (--in COLLECTION.json | --synthetic N) [options]\n"
      "       lorasim compress --verify BUNDLE.json\n"
      "\n"
      "Fit shared bases and per-adapter cores to an adapter collection\n"
      "(JD-Full or JD-Diag, optionally clustered) and write an immutable\n"
      "bundle; print its identity and reconstruction metrics.\n"
      "\n"
      "fit options:\n"
      "  --out PATH          bundle to write (JSON; replaced atomically)\n"
      "  --method NAME       jd-full (default) or jd-diag\n"
      "  --rank R            shared rank (default 4)\n"
      "  --clusters K        clusters (default 1)\n"
      "  --max-iter N        iterations per cluster fit (default 10)\n"
      "  --max-rounds N      refit/reassign rounds (default 50)\n"
      "  --seed N            k-means++ seed (default 1)\n"
      "synthetic collection (instead of --in):\n"
      "  --synthetic N       N adapters\n"
      "  --d-in D --d-out D  module shape (default 64 x 64)\n"
      "  --src-rank r0       rank of every adapter (default 8)\n"
      "  --planted P         planted shared rank (default 8)\n"
      "  --groups G          planted groups (default 1)\n"
      "  --structure S       full (default) or diag\n"
      "  --noise s           independent noise per factor entry (default 0)\n"
      "  --synth-seed N      generator seed (default 1)\n"
      "report:\n"
      "  --report            table of bytes and error across --ranks and\n"
      "                      --clusters-list for both methods (no bundle)\n"
      "  --ranks LIST        e.g. 2,4,8 (default: --rank)\n"
      "  --clusters-list L   e.g. 1,2,4 (default: --clusters)\n"
      "  --kernel-times FILE measured GPU times (METHOD R K JD_MS LORA_MS\n"
      "                      TOKENS per line); otherwise 'not measured'\n"
      "\n"
      "exit status: 0 ok, 1 fitting failed, 2 bad usage or input\n",
      f);
}

static int lsim__fail_out(const char *file, const lsim__coll *c,
                          const lsim_errbuf *eb, int status) {
  if (c && c->path[0])
    fprintf(stderr, "lorasim: error %s at %s: %s: %s\n",
            lsim_err_name(eb->code), c->path, file, eb->msg);
  else
    fprintf(stderr, "lorasim: error %s: %s\n", lsim_err_name(eb->code),
            eb->msg);
  return status;
}

static int lsim__posint(const char *s, int lo, int hi, int *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (end == s || *end || errno || v < lo || v > hi)
    return -1;
  *out = (int)v;
  return 0;
}

int lsim_compress_main(int argc, char **argv) {
  enum { O_IN = 256, O_OUT, O_METHOD, O_RANK, O_CLUSTERS, O_ITER, O_ROUNDS,
         O_SEED, O_SYN, O_DIN, O_DOUT, O_SRANK, O_PLANTED, O_GROUPS,
         O_STRUCT, O_NOISE, O_SSEED, O_REPORT, O_RANKS, O_KS, O_VERIFY,
         O_KTIMES };
  static const struct option opts[] = {
      {"in", required_argument, NULL, O_IN},
      {"out", required_argument, NULL, O_OUT},
      {"method", required_argument, NULL, O_METHOD},
      {"rank", required_argument, NULL, O_RANK},
      {"clusters", required_argument, NULL, O_CLUSTERS},
      {"max-iter", required_argument, NULL, O_ITER},
      {"max-rounds", required_argument, NULL, O_ROUNDS},
      {"seed", required_argument, NULL, O_SEED},
      {"synthetic", required_argument, NULL, O_SYN},
      {"d-in", required_argument, NULL, O_DIN},
      {"d-out", required_argument, NULL, O_DOUT},
      {"src-rank", required_argument, NULL, O_SRANK},
      {"planted", required_argument, NULL, O_PLANTED},
      {"groups", required_argument, NULL, O_GROUPS},
      {"structure", required_argument, NULL, O_STRUCT},
      {"noise", required_argument, NULL, O_NOISE},
      {"synth-seed", required_argument, NULL, O_SSEED},
      {"report", no_argument, NULL, O_REPORT},
      {"ranks", required_argument, NULL, O_RANKS},
      {"clusters-list", required_argument, NULL, O_KS},
      {"verify", required_argument, NULL, O_VERIFY},
      {"kernel-times", required_argument, NULL, O_KTIMES},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  const char *in = NULL, *out = NULL, *verify = NULL, *ranks_s = NULL,
             *ks_s = NULL, *ktimes = NULL;
  lsim_jd_config cfg = LSIM_JD_CONFIG_INIT;
  cfg.rank = 4;
  lsim_jd_synth syn = {0, 64, 64, 8, 8, 1, LSIM_SYNTH_FULL, 0, 1};
  int report = 0, bad = 0, c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    char *end;
    switch (c) {
    case O_IN: in = optarg; break;
    case O_OUT: out = optarg; break;
    case O_VERIFY: verify = optarg; break;
    case O_METHOD:
      bad |= !(cfg.method = lsim_jd_method_find(optarg));
      break;
    case O_RANK: bad |= lsim__posint(optarg, 1, 65536, &cfg.rank); break;
    case O_CLUSTERS:
      bad |= lsim__posint(optarg, 1, LSIM__CMP_MAX_N, &cfg.clusters);
      break;
    case O_ITER: bad |= lsim__posint(optarg, 1, 100000, &cfg.max_iterations); break;
    case O_ROUNDS: bad |= lsim__posint(optarg, 1, 100000, &cfg.max_rounds); break;
    case O_SEED:
      errno = 0;
      cfg.seed = strtoull(optarg, &end, 10);
      bad |= *optarg == '-' || end == optarg || *end || errno;
      break;
    case O_SYN: bad |= lsim__posint(optarg, 1, LSIM__CMP_MAX_N, &syn.n); break;
    case O_DIN: bad |= lsim__posint(optarg, 1, 65536, &syn.d_in); break;
    case O_DOUT: bad |= lsim__posint(optarg, 1, 65536, &syn.d_out); break;
    case O_SRANK:
      bad |= lsim__posint(optarg, 1, LSIM_JD_MAX_SOURCE_RANK, &syn.r0);
      break;
    case O_PLANTED: bad |= lsim__posint(optarg, 1, 4096, &syn.planted); break;
    case O_GROUPS: bad |= lsim__posint(optarg, 1, LSIM__CMP_MAX_N, &syn.groups); break;
    case O_STRUCT:
      syn.structure = strcmp(optarg, "full") == 0   ? LSIM_SYNTH_FULL
                      : strcmp(optarg, "diag") == 0 ? LSIM_SYNTH_DIAG
                                                    : 0;
      bad |= !syn.structure;
      break;
    case O_NOISE:
      errno = 0;
      syn.noise = strtod(optarg, &end);
      bad |= end == optarg || *end || errno || !(syn.noise >= 0);
      break;
    case O_SSEED:
      errno = 0;
      syn.seed = strtoull(optarg, &end, 10);
      bad |= *optarg == '-' || end == optarg || *end || errno;
      break;
    case O_REPORT: report = 1; break;
    case O_RANKS: ranks_s = optarg; break;
    case O_KS: ks_s = optarg; break;
    case O_KTIMES: ktimes = optarg; break;
    case 'h': lsim__usage(stdout); return 0;
    default: lsim__usage(stderr); return 2;
    }
    if (bad) {
      fprintf(stderr, "lorasim: error E_USAGE: bad value '%s' for an option "
                      "of compress\n", optarg ? optarg : "");
      return 2;
    }
  }
  int modes = !!in + !!syn.n + !!verify;
  if (optind != argc || modes != 1 || (verify && (out || report)) ||
      (!verify && !report && !out)) {
    fprintf(stderr, "lorasim: error E_USAGE: compress needs exactly one of "
                    "--in, --synthetic, --verify, and --out unless --report "
                    "or --verify\n");
    lsim__usage(stderr);
    return 2;
  }
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim__coll col;
  memset(&col, 0, sizeof col);
  const char *file = in ? in : verify ? verify : "--synthetic";
  int status = 0;
  lsim_json_doc doc = LSIM_JSON_DOC_INIT;
  const cJSON *root = NULL;
  if (in || verify) {
    if (lsim_json_load(&doc, file, NULL, &lsim__cmp_codes, &eb))
      return lsim__fail_out(file, NULL, &eb, eb.code == LSIM_E_NOMEM ? 1 : 2);
    root = doc.root;
  }
  if (verify) {
    lsim_err rc = lsim__verify(root, &col, NULL, &eb);
    status = rc ? lsim__fail_out(file, &col, &eb,
                                 rc == LSIM_E_NOMEM ? 1 : 2)
                : 0;
    goto done;
  }
  lsim_err rc = 0;
  if (in) {
    rc = lsim__parse(&col, root, &eb);
  } else {
    rc = lsim_jd_synth_make(&syn, &col.syn, &eb);
    if (!rc) {
      col.n = col.syn.n;
      col.d_in = col.syn.d_in;
      col.d_out = col.syn.d_out;
      col.src = col.syn.src;
      snprintf(col.base, sizeof col.base, "synthetic-base");
      snprintf(col.module, sizeof col.module, "synthetic.proj");
      col.names = calloc((size_t)col.n, sizeof *col.names);
      for (int i = 0; col.names && i < col.n; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "syn%05d", i);
        col.names[i] = strdup(nm);
      }
    }
  }
  if (rc) {
    status = lsim__fail_out(file, &col, &eb, rc == LSIM_E_NOMEM ? 1 : 2);
    goto done;
  }
  if (report) {
    int ranks[32], ks[32], nr, nk;
    nr = ranks_s ? lsim__parse_list(ranks_s, ranks, 32) : 1;
    nk = ks_s ? lsim__parse_list(ks_s, ks, 32) : 1;
    if (!ranks_s)
      ranks[0] = cfg.rank;
    if (!ks_s)
      ks[0] = cfg.clusters;
    if (nr < 1 || nk < 1) {
      fprintf(stderr, "lorasim: error E_USAGE: --ranks and --clusters-list "
                      "take comma-separated positive integers\n");
      status = 2;
      goto done;
    }
    lsim__ktime *kt = NULL;
    int nkt = 0;
    if (ktimes && (rc = lsim__read_times(ktimes, &kt, &nkt, &eb))) {
      status = lsim__fail_out(ktimes, NULL, &eb, 2);
      goto done;
    }
    rc = lsim__report(&col, &cfg, ranks, nr, ks, nk, kt, nkt, &eb);
    free(kt);
    if (rc)
      status = lsim__fail_out(file, NULL, &eb, 1);
    goto done;
  }
  {
    lsim_jd_result r = LSIM_JD_RESULT_INIT;
    lsim__bundle b = {0};
    char *txt = NULL;
    cJSON *o = NULL;
    b.src = calloc((size_t)col.n, sizeof *b.src);
    b.ranks = calloc((size_t)col.n, sizeof *b.ranks);
    b.scales = calloc((size_t)col.n, sizeof *b.scales);
    if (!b.src || !b.ranks || !b.scales)
      rc = lsim_fail(&eb, LSIM_E_NOMEM, "digests");
    for (int i = 0; !rc && i < col.n; i++) {
      b.ranks[i] = col.src[i].rank;
      b.scales[i] = col.src[i].scale;
    }
    for (int i = 0; !rc && i < col.n; i++)
      rc = lsim_jd_source_digest(&col.src[i], col.d_in, col.d_out, &b.src[i],
                                 &eb);
    if (!rc)
      rc = lsim_jd_fit(col.src, col.n, col.d_in, col.d_out, &cfg, &r, &eb);
    if (rc) {
      /* rank/cluster limits against this collection are bad usage */
      int input = rc == LSIM_E_CMP_RANK || rc == LSIM_E_CMP_CLUSTERS ||
                  rc == LSIM_E_CMP_ZERO_NORM || rc == LSIM_E_CMP_NONFINITE;
      status = lsim__fail_out(file, NULL, &eb, input ? 2 : 1);
    } else if ((rc = lsim__digests(&col, &cfg, &r, &b, &eb))) {
      status = lsim__fail_out(file, NULL, &eb, 1);
    } else if (!(o = lsim__bundle_json(&col, &cfg, &r, &b)) ||
               !(txt = cJSON_PrintUnformatted(o))) {
      eb.code = LSIM_E_NOMEM;
      snprintf(eb.msg, sizeof eb.msg, "bundle text");
      status = lsim__fail_out(file, NULL, &eb, 1);
    } else if ((rc = lsim__write_atomic(out, txt, &eb))) {
      status = lsim__fail_out(out, NULL, &eb, 1);
    } else {
      char h[LSIM_DIGEST_HEX_SIZE];
      printf("bundle %s\n", lsim_digest_hex(&b.id, h));
      printf("source set %s (%d adapters)\n", lsim_digest_hex(&b.set, h),
             col.n);
      printf("%s R %d clusters %d: rel_err %.6e (total err2 %.6e of %.6e), "
             "iterations %d, rounds %d, converged %s\n",
             lsim_jd_method_name(r.method), r.R, r.k,
             r.total_err2 / r.total_norm2, r.total_err2, r.total_norm2,
             r.iterations, r.rounds, r.converged ? "yes" : "no");
      int r0 = 0;
      for (int i = 0; i < col.n; i++)
        r0 = col.src[i].rank > r0 ? col.src[i].rank : r0;
      lsim_jd_ledger L;
      if (!lsim_jd_ledger_count(col.n, r0, col.d_in, col.d_out, r.R, r.k, &L,
                                NULL))
        printf("parameters: lora %lld, %s %lld\n", (long long)L.lora,
               lsim_jd_method_name(r.method),
               (long long)(r.method == LSIM_JD_FULL ? L.full_k : L.diag_k));
      printf("wrote %s\n", out);
    }
    free(txt);
    cJSON_Delete(o);
    lsim__bundle_release(&b);
    lsim_jd_result_release(&r);
  }
done:
  lsim_json_release(&doc);
  lsim__coll_release(&col);
  return status;
}

/* ---- serving a bundle (sim/replay.c) ---------------------------------------- */

void lsim_compress_serve_release(lsim_compress_serve *s) {
  free(s->cluster);
  free(s->basis);
  free(s->core);
  memset(s, 0, sizeof *s);
}

lsim_err lsim_compress_bundle_read(const char *file, lsim_compress_serve *out,
                                   lsim_errbuf *eb) {
  memset(out, 0, sizeof *out);
  lsim_json_doc doc;
  lsim_errbuf e2 = LSIM_ERRBUF_INIT;
  lsim_err rc = lsim_json_load(&doc, file, NULL, &lsim__cmp_codes, &e2);
  if (rc)
    return lsim_fail(eb, rc, "bundle %s", e2.msg);
  const cJSON *root = doc.root;
  lsim__coll col;
  memset(&col, 0, sizeof col);
  rc = lsim__verify(root, &col, out, eb);
  if (rc && eb) {
    char msg[sizeof eb->msg];
    snprintf(msg, sizeof msg, "%s", eb->msg);
    lsim_fail(eb, rc, "bundle %s: %s: %s", file,
              col.path[0] ? col.path : "$", msg);
  }
  lsim__coll_release(&col);
  lsim_json_release(&doc);
  if (rc)
    lsim_compress_serve_release(out);
  return rc;
}
