/*
** bundle.c: reading compression inputs (bundle.h, bundle_impl.h): an
** adapter collection for `lorasim compress`, and a bundle, for --verify and
** for a replay that serves it (sim/scenario.c, sim/replay.c).
**
** Both go through the shared JSON layer (sim/json.h) and name the JSON path
** of the first error in the collection state (lsim_bundle_coll.path).  A
** bundle is verified by rebuilding the fitted result from its values and
** re-deriving every digest (source set, bases, cores, the bundle), so a
** bundle that was edited by hand fails with E_CMP_BUNDLE_DIGEST.
*/
#include "bundle_impl.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "../compress/synth.h"

void lsim_bundle_coll_release(lsim_bundle_coll *c) {
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

static lsim_err lsim__at(lsim_bundle_coll *c, lsim_errbuf *eb, lsim_err code,
                         const char *path, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

static lsim_err lsim__at(lsim_bundle_coll *c, lsim_errbuf *eb, lsim_err code,
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
const lsim_json_codes lsim_bundle_json_codes = {LSIM_E_CMP_JSON,
                                                LSIM_E_JSON_DUP_KEY};

/* ---- reading a collection --------------------------------------------- */

static int lsim__token_ok(const char *s) {
  size_t n = strlen(s);
  if (n < 1 || n >= LSIM_BUNDLE_NAME_MAX)
    return 0;
  for (; *s; s++)
    if (*s < 0x21 || *s > 0x7e)
      return 0;
  return 1;
}

static lsim_err lsim__str(lsim_bundle_coll *c, const cJSON *o, const char *key,
                          const char *path, char *out, lsim_errbuf *eb) {
  const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
  char p[600];
  snprintf(p, sizeof p, "%s.%s", path, key);
  if (!j)
    return lsim__at(c, eb, LSIM_E_CMP_MISSING, p, "missing");
  if (!cJSON_IsString(j) || !lsim__token_ok(j->valuestring))
    return lsim__at(c, eb, LSIM_E_CMP_TYPE, p,
                    "want a string of 1..127 printable characters, no spaces");
  snprintf(out, LSIM_BUNDLE_NAME_MAX, "%s", j->valuestring);
  return 0;
}

static lsim_err lsim__int(lsim_bundle_coll *c, const cJSON *o, const char *key,
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

static lsim_err lsim__keys(lsim_bundle_coll *c, const cJSON *o, const char *path,
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
static lsim_err lsim__mshape(lsim_bundle_coll *c, const cJSON *j, const char *path,
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

static lsim_err lsim__mread(lsim_bundle_coll *c, const cJSON *j, const char *path,
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
static lsim_err lsim__factor(lsim_bundle_coll *c, const cJSON *ad, const char *key,
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

static lsim_err lsim__vec(lsim_bundle_coll *c, const cJSON *o, const char *key,
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
static lsim_err lsim__probe(lsim_bundle_coll *c, const cJSON *ad, const char *path,
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

lsim_err lsim_bundle_coll_parse(lsim_bundle_coll *c, const cJSON *root, lsim_errbuf *eb) {
  static const char *const top[] = {"base", "module", "d_in", "d_out",
                                    "adapters", NULL};
  static const char *const adk[] = {"name", "rank", "scale", "A", "B",
                                    "probe", NULL};
  lsim_err rc = lsim__keys(c, root, "$", top, eb);
  if (rc || (rc = lsim__str(c, root, "base", "$", c->base, eb)) ||
      (rc = lsim__str(c, root, "module", "$", c->module, eb)) ||
      (rc = lsim__int(c, root, "d_in", "$", 1, LSIM_BUNDLE_MAX_DIM, &c->d_in,
                      eb)) ||
      (rc = lsim__int(c, root, "d_out", "$", 1, LSIM_BUNDLE_MAX_DIM, &c->d_out,
                      eb)))
    return rc;
  const cJSON *ads = cJSON_GetObjectItemCaseSensitive(root, "adapters");
  if (!ads)
    return lsim__at(c, eb, LSIM_E_CMP_MISSING, "$.adapters", "missing");
  if (!cJSON_IsArray(ads) || cJSON_GetArraySize(ads) < 1 ||
      cJSON_GetArraySize(ads) > LSIM_BUNDLE_MAX_N)
    return lsim__at(c, eb, LSIM_E_CMP_TYPE, "$.adapters",
                    "want an array of 1..%d adapters", LSIM_BUNDLE_MAX_N);
  int n = cJSON_GetArraySize(ads);
  c->names = calloc((size_t)n, sizeof *c->names);
  c->store = calloc((size_t)n, sizeof *c->store);
  c->src = calloc((size_t)n, sizeof *c->src);
  if (!c->names || !c->store || !c->src)
    return lsim_fail(eb, LSIM_E_NOMEM, "%d adapters", n);
  c->n = n;
  int i = 0;
  for (const cJSON *ad = ads->child; ad; ad = ad->next, i++) {
    char p[64], name[LSIM_BUNDLE_NAME_MAX];
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


void lsim_bundle_ids_release(lsim_bundle_ids *b) {
  free(b->src);
  free(b->ranks);
  free(b->scales);
  free(b->bases);
  free(b->cores);
  memset(b, 0, sizeof *b);
}

/* Every digest of a fitted collection; src given (from the sources). */
lsim_err lsim_bundle_ids_derive(const lsim_bundle_coll *c, const lsim_jd_config *cfg,
                              const lsim_jd_result *r, lsim_bundle_ids *b,
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

/* ---- verifying a bundle ------------------------------------------------------ */

static const cJSON *lsim__get(const cJSON *o, const char *k) {
  return cJSON_GetObjectItemCaseSensitive(o, k);
}

static int lsim__hex_is(const cJSON *j, const lsim_digest *d) {
  char h[LSIM_DIGEST_HEX_SIZE];
  return cJSON_IsString(j) && strcmp(j->valuestring, lsim_digest_hex(d, h)) == 0;
}

lsim_err lsim_bundle_verify(const cJSON *o, lsim_bundle_coll *c,
                             lsim_bundle *out, lsim_errbuf *eb) {
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
  lsim_bundle_ids b = {0};
  const cJSON *me = lsim__get(o, "method"), *seed = lsim__get(o, "seed"),
              *srcs = lsim__get(o, "sources"), *bases = lsim__get(o, "bases"),
              *cores = lsim__get(o, "cores"), *met = lsim__get(o, "metrics");
  if ((rc = lsim__str(c, o, "base", "$", c->base, eb)) ||
      (rc = lsim__str(c, o, "module", "$", c->module, eb)) ||
      (rc = lsim__int(c, o, "d_in", "$", 1, LSIM_BUNDLE_MAX_DIM, &r.d_in, eb)) ||
      (rc = lsim__int(c, o, "d_out", "$", 1, LSIM_BUNDLE_MAX_DIM, &r.d_out,
                      eb)) ||
      (rc = lsim__int(c, o, "rank", "$", 1, LSIM_BUNDLE_MAX_DIM, &r.R, eb)) ||
      (rc = lsim__int(c, o, "clusters", "$", 1, LSIM_BUNDLE_MAX_N, &r.k, eb)) ||
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
    char p[64], name[LSIM_BUNDLE_NAME_MAX];
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
  if ((rc = lsim_bundle_ids_derive(c, &cfg, &r, &b, eb)))
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
  {
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
  }
out:
  lsim_jd_result_release(&r);
  lsim_bundle_ids_release(&b);
  return rc;
}

/* ---- serving a bundle (sim/scenario.c, sim/replay.c) ------------------------ */

void lsim_bundle_release(lsim_bundle *s) {
  free(s->cluster);
  free(s->basis);
  free(s->core);
  memset(s, 0, sizeof *s);
}

lsim_err lsim_bundle_read(const char *file, lsim_bundle *out,
                                   lsim_errbuf *eb) {
  memset(out, 0, sizeof *out);
  lsim_json_doc doc;
  lsim_errbuf e2 = LSIM_ERRBUF_INIT;
  lsim_err rc = lsim_json_load(&doc, file, NULL, &lsim_bundle_json_codes, &e2);
  if (rc)
    return lsim_fail(eb, rc, "bundle %s", e2.msg);
  const cJSON *root = doc.root;
  lsim_bundle_coll col;
  memset(&col, 0, sizeof col);
  rc = lsim_bundle_verify(root, &col, out, eb);
  if (rc && eb) {
    char msg[sizeof eb->msg];
    snprintf(msg, sizeof msg, "%s", eb->msg);
    lsim_fail(eb, rc, "bundle %s: %s: %s", file,
              col.path[0] ? col.path : "$", msg);
  }
  lsim_bundle_coll_release(&col);
  lsim_json_release(&doc);
  if (rc)
    lsim_bundle_release(out);
  return rc;
}
