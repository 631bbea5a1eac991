/*
** profile.c: reading cost profiles (profile.h).  `lorasim calibrate`
** (sim/calibrate.c) writes version 1, `lorasim profile` (sim/profile_cmd.c)
** version 2; scenarios and replays read them here, so loading a profile
** needs nothing of either command.
*/
#include "profile.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "json.h"
#include "slurp.h"

/* The five linear coefficients of version 1. */
static lsim_err lsim__v1(const lsim_json_rd *rd, const cJSON *root,
                         lsim_cost_model *out) {
  static const char *const keys[] = {"iter_fixed_ns", "prefill_token_ns",
                                     "decode_token_ns", "segment_ns",
                                     "rank_row_ps"};
  const cJSON *cost = lsim_json_get(root, "cost");
  int64_t v[5];
  lsim_err rc;
  if (!cJSON_IsObject(cost))
    return lsim_json_fail(rd->eb, LSIM_E_DEV_PROFILE, rd->file, "$.cost",
                          "required object is missing");
  for (int i = 0; i < 5; i++)
    if ((rc = lsim_json_get_int(rd, cost, "$.cost", keys[i], 1, 0,
                                1000000000000, 0, &v[i])))
      return rc;
  *out = (lsim_cost_model){v[0], v[1], v[2], v[3], v[4], {0}};
  return 0;
}

/* obj[key], an object (required) */
static lsim_err lsim__obj(const lsim_json_rd *rd, const cJSON *obj,
                          const char *path, const char *key, int required,
                          const cJSON **out) {
  char kp[LSIM_JSON_PATHBUF];
  const cJSON *v = lsim_json_get(obj, key);
  lsim_json_key_path(kp, path, key);
  *out = v;
  if (!v)
    return required ? lsim_json_fail(rd->eb, LSIM_E_DEV_PROFILE, rd->file, kp,
                                     "required object is missing")
                    : 0;
  if (!cJSON_IsObject(v))
    return lsim_json_fail(rd->eb, LSIM_E_DEV_PROFILE, rd->file, kp,
                          "must be an object (got %s)",
                          lsim_json_type_name(v));
  return 0;
}

/* obj[key], a string of 1..n-1 bytes (required) into dst ("" absent) */
static lsim_err lsim__str(const lsim_json_rd *rd, const cJSON *obj,
                          const char *path, const char *key, int required,
                          char *dst, size_t n) {
  char kp[LSIM_JSON_PATHBUF];
  const cJSON *v = lsim_json_get(obj, key);
  lsim_json_key_path(kp, path, key);
  if (dst)
    dst[0] = '\0';
  if (!v)
    return required ? lsim_json_fail(rd->eb, LSIM_E_DEV_PROFILE, rd->file, kp,
                                     "required key is missing")
                    : 0;
  if (!cJSON_IsString(v) || !v->valuestring)
    return lsim_json_fail(rd->eb, LSIM_E_DEV_PROFILE, rd->file, kp,
                          "must be a string (got %s)", lsim_json_type_name(v));
  size_t len = strlen(v->valuestring);
  if (dst && (len == 0 || len >= n))
    return lsim_json_fail(rd->eb, LSIM_E_DEV_PROFILE, rd->file, kp,
                          "must be a string of 1 to %zu bytes", n - 1);
  if (dst)
    memcpy(dst, v->valuestring, len + 1);
  return 0;
}

/* obj[key], a finite number in [lo, hi] (lo excluded when open_lo) */
static lsim_err lsim__num(const lsim_json_rd *rd, const cJSON *obj,
                          const char *path, const char *key, double lo,
                          int open_lo, double hi, double *out) {
  char kp[LSIM_JSON_PATHBUF];
  const cJSON *v = lsim_json_get(obj, key);
  lsim_json_key_path(kp, path, key);
  if (!v)
    return lsim_json_fail(rd->eb, LSIM_E_DEV_PROFILE, rd->file, kp,
                          "required key is missing");
  if (!cJSON_IsNumber(v))
    return lsim_json_fail(rd->eb, LSIM_E_DEV_PROFILE, rd->file, kp,
                          "must be a number (got %s)", lsim_json_type_name(v));
  double x = v->valuedouble;
  if (!isfinite(x) || x < lo || (open_lo && x == lo) || x > hi)
    return lsim_json_fail(rd->eb, LSIM_E_DEV_PROFILE, rd->file, kp,
                          "must be a number in %s%g, %g] (got %s)",
                          open_lo ? "(" : "[", lo, hi, lsim_json_num_text(v));
  *out = x;
  return 0;
}

static lsim_err lsim__v2(const lsim_json_rd *rd, const cJSON *root,
                         lsim_profile *p) {
  const cJSON *gpu, *model, *coef, *copy;
  lsim_err rc;
  if ((rc = lsim__obj(rd, root, "$", "gpu", 1, &gpu)) ||
      (rc = lsim__str(rd, gpu, "$.gpu", "name", 1, p->gpu_name,
                      sizeof p->gpu_name)) ||
      (rc = lsim__str(rd, gpu, "$.gpu", "class", 1, p->gpu_class,
                      sizeof p->gpu_class)))
    return rc;
  for (const char *c = p->gpu_class; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-' ||
          *c == '_' || *c == '.'))
      return lsim_json_fail(rd->eb, LSIM_E_DEV_PROFILE, rd->file,
                            "$.gpu.class",
                            "must be made of [a-z0-9._-] (a file name)");
  if ((rc = lsim__obj(rd, root, "$", "model", 1, &model)) ||
      (rc = lsim__str(rd, model, "$.model", "preset", 0, p->preset,
                      sizeof p->preset)))
    return rc;
  static const struct {
    const char *key;
    int64_t hi;
  } dims[] = {{"layers", 1024},         {"hidden", 1 << 20},
              {"intermediate", 1 << 20}, {"q_heads", 4096},
              {"kv_heads", 4096},        {"head_dim", 65536},
              {"vocab", 1 << 24},        {"dtype_bytes", 4}};
  int64_t d[8];
  for (int i = 0; i < 8; i++)
    if ((rc = lsim_json_get_int(rd, model, "$.model", dims[i].key, 1, 1,
                                dims[i].hi, 0, &d[i])))
      return rc;
  p->layers = (int)d[0];
  p->hidden = d[1];
  p->intermediate = d[2];
  p->q_heads = d[3];
  p->kv_heads = d[4];
  p->head_dim = d[5];
  p->vocab = d[6];
  p->dtype_bytes = (int)d[7];
  if ((rc = lsim__obj(rd, root, "$", "coefficients", 1, &coef)))
    return rc;
  const char *const *terms = lsim_cost_terms();
  for (int i = 0; i < LSIM_COST_NTERMS; i++) {
    /* the decode rank-row and adapter terms came later: a profile
    ** without them has 0 */
    if ((i == LSIM_COST_LORA_DECODE_ELEM ||
         i == LSIM_COST_LORA_ADAPTER_ELEM) &&
        !lsim_json_get(coef, terms[i])) {
      p->coef.c[i] = 0;
      continue;
    }
    if ((rc = lsim__num(rd, coef, "$.coefficients", terms[i], 0,
                        i == LSIM_COST_KNEE, 1e12, &p->coef.c[i])))
      return rc;
  }
  if (p->coef.c[LSIM_COST_KNEE] < 1e-3)
    return lsim_json_fail(rd->eb, LSIM_E_DEV_PROFILE, rd->file,
                          "$.coefficients.knee_tokens",
                          "must be at least 0.001 (got %g)",
                          p->coef.c[LSIM_COST_KNEE]);
  if ((rc = lsim__obj(rd, root, "$", "copy", 0, &copy)))
    return rc;
  if (copy) {
    p->copy_on = 1;
    if ((rc = lsim__num(rd, copy, "$.copy", "latency_ns", 0, 0, 1e12,
                        &p->copy_latency_ns)) ||
        (rc = lsim__num(rd, copy, "$.copy", "gbps", 0, 1, 1e6,
                        &p->copy_gbps)))
      return rc;
  }
  /* what is written for readers: typed, not used */
  const cJSON *fit;
  if ((rc = lsim__str(rd, root, "$", "created", 0, NULL, 0)) ||
      (rc = lsim__str(rd, root, "$", "commit", 0, NULL, 0)) ||
      (rc = lsim__obj(rd, root, "$", "fit", 0, &fit)) ||
      (rc = lsim__obj(rd, root, "$", "grid", 0, &fit)) ||
      (rc = lsim__obj(rd, root, "$", "copy_fit", 0, &fit)))
    return rc;
  return 0;
}

lsim_err lsim_profile_read(const char *path, lsim_profile *out,
                           lsim_errbuf *eb) {
  /* the shared reader (sim/slurp.h, sim/json.h): the file type checked
  ** before opening, at most 1 MiB, duplicate keys refused, exact integers */
  static const lsim_json_codes codes = {LSIM_E_DEV_PROFILE,
                                        LSIM_E_JSON_DUP_KEY};
  const lsim_slurp_opts so = {(size_t)1 << 20, LSIM_E_DEV_PROFILE, 0, 0,
                              "profile"};
  lsim_json_doc doc;
  lsim_errbuf e2 = LSIM_ERRBUF_INIT;
  lsim_err rc = lsim_json_load(&doc, path, &so, &codes, &e2);
  if (rc) {
    int syntax = rc == LSIM_E_DEV_PROFILE && strncmp(e2.msg, "profile ", 8);
    return lsim_fail(eb, rc, "%s%s%s", syntax ? "profile " : "", e2.msg,
                     syntax ? " (not valid JSON)" : "");
  }
  char file[600];
  snprintf(file, sizeof file, "profile %s", path);
  const lsim_json_rd rd = {file, eb, LSIM_E_DEV_PROFILE, LSIM_E_DEV_PROFILE,
                           LSIM_E_DEV_PROFILE};
  const cJSON *root = doc.root;
  int64_t ver = 0;
  lsim_profile p;
  memset(&p, 0, sizeof p);
  if (!cJSON_IsObject(root))
    rc = lsim_json_fail(eb, LSIM_E_DEV_PROFILE, file, "$",
                        "must be an object");
  else if (lsim_json_int(lsim_json_get(root, "lorasim_profile"), &ver) !=
               LSIM_JSON_INT_OK ||
           ver < 1 || ver > LSIM_PROFILE_VERSION)
    rc = lsim_json_fail(eb, LSIM_E_DEV_PROFILE, file, "$.lorasim_profile",
                        "must be 1 (lorasim calibrate) or 2 (lorasim "
                        "profile)");
  else if (ver == 1)
    rc = lsim__v1(&rd, root, &p.linear);
  else
    rc = lsim__v2(&rd, root, &p);
  if (!rc) {
    p.version = (int)ver;
    *out = p;
  }
  lsim_json_release(&doc);
  return rc;
}

lsim_err lsim_profile_check_shape(const lsim_profile *p, const char *file,
                                  const lsim_model_shape *s,
                                  lsim_errbuf *eb) {
  if (p->version < 2)
    return 0;
  const char *name = p->preset[0] ? p->preset : "a custom shape";
  if (!s->full)
    return lsim_fail(eb, LSIM_E_DEV_PROFILE_SHAPE,
                     "profile %s was measured at %s (hidden %lld, %d "
                     "layers); the scenario's $.model is not a full shape "
                     "(give $.model.preset, or hidden, intermediate, "
                     "q_heads and vocab)",
                     file, name, (long long)p->hidden, p->layers);
  const struct {
    const char *key;
    int64_t have, want;
  } d[] = {{"layers", s->layers, p->layers},
           {"hidden", s->hidden, p->hidden},
           {"intermediate", s->intermediate, p->intermediate},
           {"q_heads", s->q_heads, p->q_heads},
           {"kv_heads", s->kv_heads, p->kv_heads},
           {"head_dim", s->head_dim, p->head_dim},
           {"vocab", s->vocab, p->vocab},
           {"dtype_bytes", s->dtype_bytes, p->dtype_bytes}};
  for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
    if (d[i].have != d[i].want)
      return lsim_fail(eb, LSIM_E_DEV_PROFILE_SHAPE,
                       "profile %s was measured at %s with %s %lld; the "
                       "scenario's $.model.%s is %lld (a profile times one "
                       "model shape: run lorasim profile for this one)",
                       file, name, d[i].key, (long long)d[i].want, d[i].key,
                       (long long)d[i].have);
  return 0;
}

lsim_err lsim_profile_load(const char *path, lsim_cost_model *out,
                           lsim_errbuf *eb) {
  lsim_profile p;
  lsim_err rc = lsim_profile_read(path, &p, eb);
  if (rc)
    return rc;
  if (p.version != 1)
    return lsim_fail(eb, LSIM_E_DEV_PROFILE,
                     "profile %s: $.lorasim_profile: version %d needs the "
                     "scenario's model shape (read it with "
                     "lsim_profile_read)", path, p.version);
  *out = p.linear;
  return 0;
}
