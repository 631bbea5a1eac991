/*
** exec_witness.c: the kv_witness mode, the tp object and the Z emission of
** `lorasim exec` (exec_witness.h, docs/EXEC.md).
**
** The numbers come from the exact references only: the witness from
** lsim_kvw_run(), the sharded schedule from lsim_tp_ref_col() and
** lsim_tp_ref_row(), Z from the executed family's trace.  This file reads
** the extra JSON keys, arranges the per-rank and per-layer intermediates
** into the result and checks what must agree: the sharded output against
** the unsharded one, the traced delta against exec's delta, the engine's
** K/V closure rule against what the witness observed.
*/
#include "exec_witness.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../backends/cpu_ref/kvwitness.h"
#include "../backends/cpu_ref/tp.h"
#include "../engine/kv.h"
#include "../engine/tp.h"

/* ---- errors and JSON reading ------------------------------------------------ */

typedef struct lsim__xw {
  char *path;
  size_t np;
  lsim_errbuf *eb;
} lsim__xw;

static lsim_err lsim__at(lsim__xw *w, lsim_err code, const char *path,
                         const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static lsim_err lsim__at(lsim__xw *w, lsim_err code, const char *path,
                         const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (w->np)
    snprintf(w->path, w->np, "%s", path);
  return lsim_fail(w->eb, code, "%s", msg);
}

static const cJSON *lsim__get(const cJSON *o, const char *key) {
  return cJSON_GetObjectItemCaseSensitive(o, key);
}

static lsim_err lsim__need(lsim__xw *w, const cJSON *o, const char *key,
                           const char *path, const cJSON **out) {
  char p[300];
  *out = lsim__get(o, key);
  snprintf(p, sizeof p, "%s.%s", path, key);
  if (!*out)
    return lsim__at(w, LSIM_E_EXEC_MISSING, p, "required field missing");
  return 0;
}

/* A JSON integer in [lo, hi]; `range` is the code for one outside it. */
static lsim_err lsim__int(lsim__xw *w, const cJSON *j, const char *path,
                          long lo, long hi, lsim_err range, long *out) {
  if (!cJSON_IsNumber(j) || j->valuedouble != floor(j->valuedouble) ||
      !isfinite(j->valuedouble))
    return lsim__at(w, LSIM_E_EXEC_TYPE, path, "expected an integer");
  double v = j->valuedouble;
  if (v < (double)lo || v > (double)hi)
    return lsim__at(w, range, path, "expected an integer in [%ld, %ld], got "
                    "%.17g", lo, hi, v);
  *out = (long)v;
  return 0;
}

/* An exact number, as exec.c reads them: a JSON integer (|v| <= 2^53) or
** a rational string. */
static lsim_err lsim__num(lsim__xw *w, const cJSON *j, const char *path,
                          mpq_t out) {
  if (cJSON_IsString(j)) {
    lsim_errbuf e2 = LSIM_ERRBUF_INIT;
    lsim_err rc = lsim_q_parse(out, j->valuestring, &e2);
    return rc ? lsim__at(w, rc, path, "%s", e2.msg) : 0;
  }
  if (cJSON_IsNumber(j)) {
    double v = j->valuedouble;
    if (!isfinite(v) || v != floor(v) || fabs(v) > 9007199254740992.0)
      return lsim__at(w, LSIM_E_RATIONAL, path,
                      "expected an integer or a \"p/q\" string, got %.17g", v);
    mpq_set_d(out, v);
    return 0;
  }
  return lsim__at(w, LSIM_E_EXEC_TYPE, path,
                  "expected an integer or a rational string");
}

/* ---- JSON writing -------------------------------------------------------- */

static cJSON *lsim__q_json(const mpq_t q) {
  char *s = lsim_q_str(q);
  cJSON *j = cJSON_CreateString(s ? s : "?");
  free(s);
  return j;
}

static cJSON *lsim__mat_json(const lsim_qmat *m) {
  cJSON *rows = cJSON_CreateArray();
  for (int i = 0; i < m->rows; i++) {
    cJSON *row = cJSON_CreateArray();
    for (int k = 0; k < m->cols; k++)
      cJSON_AddItemToArray(row, lsim__q_json(LSIM_QAT(m, i, k)));
    cJSON_AddItemToArray(rows, row);
  }
  return rows;
}

/* m's rows in scheduler order (order[0..T)). */
static cJSON *lsim__sched_json(const lsim_qmat *m, const int *order) {
  cJSON *rows = cJSON_CreateArray();
  for (int i = 0; i < m->rows; i++) {
    cJSON *row = cJSON_CreateArray();
    for (int k = 0; k < m->cols; k++)
      cJSON_AddItemToArray(row, lsim__q_json(LSIM_QAT(m, order[i], k)));
    cJSON_AddItemToArray(rows, row);
  }
  return rows;
}

/* ======================================================================== */
/* mode                                                                      */
/* ======================================================================== */

lsim_err lsim_exec_mode_of(const cJSON *root, int *mode, char *path,
                           size_t np, lsim_errbuf *eb) {
  lsim__xw w = {path, np, eb};
  *mode = LSIM_EXEC_MODE_LINEAR;
  const cJSON *j = cJSON_IsObject(root) ? lsim__get(root, "mode") : NULL;
  if (!j)
    return 0;
  if (cJSON_IsString(j) && strcmp(j->valuestring, "linear") == 0)
    return 0;
  if (cJSON_IsString(j) && strcmp(j->valuestring, "kv_witness") == 0) {
    *mode = LSIM_EXEC_MODE_KV_WITNESS;
    return 0;
  }
  return lsim__at(&w, LSIM_E_EXEC_TYPE, "$.mode",
                  "expected \"linear\" or \"kv_witness\"");
}

/* ======================================================================== */
/* kv_witness                                                                */
/* ======================================================================== */

/* The witness spec holds weights as strings; they live here. */
typedef struct lsim__wstore {
  char **s;
  int n, cap;
} lsim__wstore;

static void lsim__wstore_free(lsim__wstore *st) {
  for (int i = 0; i < st->n; i++)
    free(st->s[i]);
  free(st->s);
  st->s = NULL;
  st->n = st->cap = 0;
}

/* Read an exact number at j and keep its canonical string in st. */
static lsim_err lsim__wnum(lsim__xw *w, lsim__wstore *st, const cJSON *j,
                           const char *path, const char **out) {
  mpq_t q;
  mpq_init(q);
  lsim_err rc = lsim__num(w, j, path, q);
  char *s = rc ? NULL : lsim_q_str(q);
  mpq_clear(q);
  if (rc)
    return rc;
  if (st->n == st->cap) {
    int cap = st->cap ? 2 * st->cap : 64;
    char **ns = realloc(st->s, (size_t)cap * sizeof *ns);
    if (!ns) {
      free(s);
      return lsim_fail(w->eb, LSIM_E_NOMEM, "out of memory");
    }
    st->s = ns;
    st->cap = cap;
  }
  if (!s)
    return lsim_fail(w->eb, LSIM_E_NOMEM, "out of memory");
  st->s[st->n++] = s;
  *out = s;
  return 0;
}

/* A vector of exactly n numbers at j into out[0..n). */
static lsim_err lsim__wvec(lsim__xw *w, lsim__wstore *st, const cJSON *j,
                           const char *path, int n, const char **out) {
  char p[320];
  if (!cJSON_IsArray(j))
    return lsim__at(w, LSIM_E_EXEC_TYPE, path, "expected an array");
  if (cJSON_GetArraySize(j) != n)
    return lsim__at(w, LSIM_E_SHAPE, path, "expected %d entries, got %d", n,
                    cJSON_GetArraySize(j));
  int i = 0;
  for (const cJSON *v = j->child; v; v = v->next, i++) {
    snprintf(p, sizeof p, "%s[%d]", path, i);
    lsim_err rc = lsim__wnum(w, st, v, p, &out[i]);
    if (rc)
      return rc;
  }
  return 0;
}

/* The length of array j, within 1..max (E_KV_WITNESS_SHAPE otherwise). */
static lsim_err lsim__wlen(lsim__xw *w, const cJSON *j, const char *path,
                           int max, const char *what, int *n) {
  if (!cJSON_IsArray(j))
    return lsim__at(w, LSIM_E_EXEC_TYPE, path, "expected an array");
  *n = cJSON_GetArraySize(j);
  if (*n < 1 || *n > max)
    return lsim__at(w, LSIM_E_KV_WITNESS_SHAPE, path,
                    "%d %s; the witness takes 1..%d", *n, what, max);
  return 0;
}

static int lsim__proj_find(const char *name) {
  for (int p = 0; p < LSIM_KV_NPROJ; p++)
    if (p != LSIM_KV_MLP && strcmp(lsim_kv_proj_name(p), name) == 0)
      return p;
  return -1;
}

typedef struct lsim__wbatch {
  lsim_kvw_spec spec;
  lsim_kvw_delta *deltas;
  int nd;
  uint8_t mask[LSIM_KVW_MAXT];
  int has_mask;
  lsim__wstore st;
} lsim__wbatch;

static lsim_err lsim__wparse(lsim__xw *w, const cJSON *root,
                             lsim__wbatch *b) {
  lsim_kvw_spec *s = &b->spec;
  const cJSON *j, *x, *layers, *lm;
  char p[320];
  long v = 0;
  lsim_err rc;
  memset(s, 0, sizeof *s);
  if ((rc = lsim__need(w, root, "softmax_base", "$", &j)) ||
      (rc = lsim__int(w, j, "$.softmax_base", 2, 1L << 20,
                      LSIM_E_KV_WITNESS_BASE, &v)))
    return rc;
  s->exp_base = (int)v;
  /* x: [tokens][d] */
  if ((rc = lsim__need(w, root, "x", "$", &x)) ||
      (rc = lsim__wlen(w, x, "$.x", LSIM_KVW_MAXT, "tokens", &s->tokens)))
    return rc;
  if (!cJSON_IsArray(x->child))
    return lsim__at(w, LSIM_E_EXEC_TYPE, "$.x[0]", "expected an array");
  if ((rc = lsim__wlen(w, x->child, "$.x[0]", LSIM_KVW_MAXD,
                       "hidden coordinates", &s->d)))
    return rc;
  int t = 0;
  for (const cJSON *r = x->child; r; r = r->next, t++) {
    snprintf(p, sizeof p, "$.x[%d]", t);
    if ((rc = lsim__wvec(w, &b->st, r, p, s->d, s->x[t])))
      return rc;
  }
  /* layers: [{wq, wk, wv, wo}] */
  if ((rc = lsim__need(w, root, "layers", "$", &layers)) ||
      (rc = lsim__wlen(w, layers, "$.layers", LSIM_KVW_MAXL, "layers",
                       &s->layers)))
    return rc;
  static const char *const keys[4] = {"wq", "wk", "wv", "wo"};
  int l = 0;
  for (const cJSON *o = layers->child; o; o = o->next, l++) {
    char lp[64];
    snprintf(lp, sizeof lp, "$.layers[%d]", l);
    if (!cJSON_IsObject(o))
      return lsim__at(w, LSIM_E_EXEC_TYPE, lp, "expected an object");
    const char **dst[4] = {s->wq[l], s->wk[l], s->wv[l], s->wo[l]};
    for (int k = 0; k < 4; k++) {
      snprintf(p, sizeof p, "%s.%s", lp, keys[k]);
      if ((rc = lsim__need(w, o, keys[k], lp, &j)) ||
          (rc = lsim__wvec(w, &b->st, j, p, s->d, dst[k])))
        return rc;
    }
  }
  /* lm_head: [d][vocab] */
  if ((rc = lsim__need(w, root, "lm_head", "$", &lm)))
    return rc;
  if (!cJSON_IsArray(lm))
    return lsim__at(w, LSIM_E_EXEC_TYPE, "$.lm_head", "expected an array");
  if (cJSON_GetArraySize(lm) != s->d)
    return lsim__at(w, LSIM_E_SHAPE, "$.lm_head", "expected %d rows (one per "
                    "hidden coordinate), got %d", s->d, cJSON_GetArraySize(lm));
  if ((rc = lsim__wlen(w, lm->child, "$.lm_head[0]", LSIM_KVW_MAXV,
                       "vocabulary entries", &s->vocab)))
    return rc;
  int r = 0;
  for (const cJSON *row = lm->child; row; row = row->next, r++) {
    snprintf(p, sizeof p, "$.lm_head[%d]", r);
    if ((rc = lsim__wvec(w, &b->st, row, p, s->vocab, s->lm[r])))
      return rc;
  }
  /* adapter: absent or null (the adapted model is the base) or
  ** {deltas: [{proj, layer, v}], mask} */
  const cJSON *a = lsim__get(root, "adapter");
  if (!a || cJSON_IsNull(a))
    return 0;
  if (!cJSON_IsObject(a))
    return lsim__at(w, LSIM_E_EXEC_TYPE, "$.adapter",
                    "expected an object or null");
  const cJSON *ds;
  if ((rc = lsim__need(w, a, "deltas", "$.adapter", &ds)))
    return rc;
  if (!cJSON_IsArray(ds))
    return lsim__at(w, LSIM_E_EXEC_TYPE, "$.adapter.deltas",
                    "expected an array");
  b->nd = cJSON_GetArraySize(ds);
  if (b->nd > 64)
    return lsim__at(w, LSIM_E_KV_WITNESS_SHAPE, "$.adapter.deltas",
                    "%d deltas; the witness takes at most 64", b->nd);
  b->deltas = calloc((size_t)b->nd + 1, sizeof *b->deltas);
  if (!b->deltas)
    return lsim_fail(w->eb, LSIM_E_NOMEM, "out of memory");
  const cJSON *m = lsim__get(a, "mask");
  if (m && !cJSON_IsNull(m)) {
    if (!cJSON_IsArray(m))
      return lsim__at(w, LSIM_E_EXEC_TYPE, "$.adapter.mask",
                      "expected an array of 0 and 1");
    if (cJSON_GetArraySize(m) != s->tokens)
      return lsim__at(w, LSIM_E_SHAPE, "$.adapter.mask",
                      "expected %d entries (one per token), got %d",
                      s->tokens, cJSON_GetArraySize(m));
    int k = 0;
    for (const cJSON *e = m->child; e; e = e->next, k++) {
      snprintf(p, sizeof p, "$.adapter.mask[%d]", k);
      if ((rc = lsim__int(w, e, p, 0, 1, LSIM_E_SHAPE, &v)))
        return rc;
      b->mask[k] = (uint8_t)v;
    }
    b->has_mask = 1;
  }
  int i = 0;
  for (const cJSON *d = ds->child; d; d = d->next, i++) {
    char dp[64];
    snprintf(dp, sizeof dp, "$.adapter.deltas[%d]", i);
    lsim_kvw_delta *o = &b->deltas[i];
    if (!cJSON_IsObject(d))
      return lsim__at(w, LSIM_E_EXEC_TYPE, dp, "expected an object");
    if ((rc = lsim__need(w, d, "proj", dp, &j)))
      return rc;
    snprintf(p, sizeof p, "%s.proj", dp);
    o->proj = cJSON_IsString(j) ? lsim__proj_find(j->valuestring) : -1;
    if (o->proj < 0)
      return lsim__at(w, LSIM_E_EXEC_TYPE, p, "expected \"q_proj\", "
                      "\"k_proj\", \"v_proj\", \"o_proj\" or \"lm_head\"");
    o->mask = b->has_mask ? b->mask : NULL;
    if (o->proj == LSIM_KV_LM_HEAD) {
      o->layer = -1;
      if (lsim__get(d, "layer"))
        return lsim__at(w, LSIM_E_KV_WITNESS_SHAPE, dp, "lm_head is "
                        "model-level and takes no layer");
      if ((rc = lsim__need(w, d, "v", dp, &j)))
        return rc;
      snprintf(p, sizeof p, "%s.v", dp);
      if (!cJSON_IsArray(j))
        return lsim__at(w, LSIM_E_EXEC_TYPE, p, "expected an array of rows");
      if (cJSON_GetArraySize(j) != s->d)
        return lsim__at(w, LSIM_E_SHAPE, p, "expected %d rows, got %d", s->d,
                        cJSON_GetArraySize(j));
      int k = 0;
      for (const cJSON *row = j->child; row; row = row->next, k++) {
        char rp[340];
        snprintf(rp, sizeof rp, "%s[%d]", p, k);
        if ((rc = lsim__wvec(w, &b->st, row, rp, s->vocab,
                             &o->v[k * LSIM_KVW_MAXV])))
          return rc;
      }
    } else {
      if ((rc = lsim__need(w, d, "layer", dp, &j)))
        return rc;
      snprintf(p, sizeof p, "%s.layer", dp);
      if ((rc = lsim__int(w, j, p, 0, s->layers - 1, LSIM_E_KV_WITNESS_SHAPE,
                          &v)))
        return rc;
      o->layer = (int)v;
      if ((rc = lsim__need(w, d, "v", dp, &j)))
        return rc;
      snprintf(p, sizeof p, "%s.v", dp);
      if ((rc = lsim__wvec(w, &b->st, j, p, s->d, o->v)))
        return rc;
    }
  }
  return 0;
}

static cJSON *lsim__h_json(const lsim_kvw_trace *tr, int l) {
  cJSON *rows = cJSON_CreateArray();
  for (int t = 0; t < tr->tokens; t++) {
    cJSON *row = cJSON_CreateArray();
    for (int j = 0; j < tr->d; j++)
      cJSON_AddItemToArray(row, lsim__q_json(tr->h[l][t][j]));
    cJSON_AddItemToArray(rows, row);
  }
  return rows;
}

static cJSON *lsim__trace_json(const lsim_kvw_trace *tr) {
  cJSON *o = cJSON_CreateObject();
  cJSON *ls = cJSON_AddArrayToObject(o, "layers");
  for (int l = 0; l < tr->layers; l++) {
    cJSON *lo = cJSON_CreateObject();
    cJSON_AddItemToObject(lo, "input", lsim__h_json(tr, l));
    cJSON *k = cJSON_AddArrayToObject(lo, "k");
    cJSON *v = cJSON_AddArrayToObject(lo, "v");
    cJSON *q = cJSON_AddArrayToObject(lo, "q");
    cJSON *sc = cJSON_AddArrayToObject(lo, "scores");
    cJSON *wt = cJSON_AddArrayToObject(lo, "weights");
    cJSON *cx = cJSON_AddArrayToObject(lo, "context");
    for (int t = 0; t < tr->tokens; t++) {
      cJSON_AddItemToArray(k, lsim__q_json(tr->k[l][t]));
      cJSON_AddItemToArray(v, lsim__q_json(tr->v[l][t]));
      cJSON_AddItemToArray(q, lsim__q_json(tr->q[l][t]));
      cJSON *sr = cJSON_CreateArray(), *wr = cJSON_CreateArray();
      for (int u = 0; u <= t; u++) {
        cJSON_AddItemToArray(sr, lsim__q_json(tr->score[l][t][u]));
        cJSON_AddItemToArray(wr, lsim__q_json(tr->attn[l][t][u]));
      }
      cJSON_AddItemToArray(sc, sr);
      cJSON_AddItemToArray(wt, wr);
      cJSON_AddItemToArray(cx, lsim__q_json(tr->ctx[l][t]));
    }
    cJSON_AddItemToObject(lo, "output", lsim__h_json(tr, l + 1));
    cJSON_AddItemToArray(ls, lo);
  }
  cJSON *lg = cJSON_AddArrayToObject(o, "logits");
  for (int t = 0; t < tr->tokens; t++) {
    cJSON *row = cJSON_CreateArray();
    for (int c = 0; c < tr->vocab; c++)
      cJSON_AddItemToArray(row, lsim__q_json(tr->logits[t][c]));
    cJSON_AddItemToArray(lg, row);
  }
  return o;
}

/* The engine's reuse answer for one cached object, as JSON. */
static cJSON *lsim__reuse_json(const lsim_kv_closure *c, int obj) {
  cJSON *o = cJSON_CreateObject();
  lsim_errbuf e2 = LSIM_ERRBUF_INIT;
  lsim_err rc = c ? lsim_kv_reuse_from_base(c, obj, &e2) : 0;
  cJSON_AddBoolToObject(o, "allowed", rc == 0);
  if (rc)
    cJSON_AddStringToObject(o, "code", lsim_err_name(rc));
  else
    cJSON_AddNullToObject(o, "code");
  return o;
}

/* Compare the two runs, ask the engine's closure rule and build the
** verdict; E_PATH_MISMATCH when the rule denies a change the trace shows. */
static lsim_err lsim__verdict(lsim__xw *w, const lsim__wbatch *b,
                              const lsim_kvw_trace *base,
                              const lsim_kvw_trace *ad, cJSON **out) {
  int L = base->layers, T = base->tokens;
  int first = L, hidden = 0;
  cJSON *v = cJSON_CreateObject();
  *out = v;
  cJSON *obs = cJSON_AddObjectToObject(v, "observed");
  cJSON *rows = cJSON_CreateArray();
  for (int l = 0; l < L; l++)
    for (int t = 0; t < T; t++)
      if (!mpq_equal(base->k[l][t], ad->k[l][t]) ||
          !mpq_equal(base->v[l][t], ad->v[l][t])) {
        cJSON *r = cJSON_CreateArray();
        cJSON_AddItemToArray(r, cJSON_CreateNumber(l));
        cJSON_AddItemToArray(r, cJSON_CreateNumber(t));
        cJSON_AddItemToArray(rows, r);
        if (l < first)
          first = l;
      }
  for (int t = 0; t < T; t++)
    for (int j = 0; j < base->d; j++)
      hidden |= !mpq_equal(base->h[L][t][j], ad->h[L][t][j]);
  int kv = !lsim_kvw_kv_equal(base, ad);
  int logits = !lsim_kvw_logits_equal(base, ad);
  cJSON_AddBoolToObject(obs, "kv_changed", kv);
  cJSON_AddNumberToObject(obs, "kv_first_layer", first);
  cJSON_AddItemToObject(obs, "kv_changed_rows", rows);
  cJSON_AddBoolToObject(obs, "hidden_changed", hidden);
  cJSON_AddBoolToObject(obs, "logits_changed", logits);

  /* the engine's rule on the adapter's distinct targets */
  lsim_kv_target tg[64];
  int nt = 0;
  for (int i = 0; i < b->nd; i++) {
    int dup = 0;
    for (int k = 0; k < nt; k++)
      dup |= tg[k].layer == b->deltas[i].layer &&
             tg[k].proj == b->deltas[i].proj;
    if (!dup)
      tg[nt++] = (lsim_kv_target){b->deltas[i].layer, b->deltas[i].proj};
  }
  lsim_kv_closure c;
  memset(&c, 0, sizeof c);
  c.kv_first_layer = L;
  if (nt) {
    lsim_kv_graph g;
    memset(&g, 0, sizeof g);
    g.arch = LSIM_KV_ARCH_SERIAL; /* the witness is a serial decoder */
    g.layers = L;
    /* the revision names the graph; the closure rule does not read it */
    static const char rev[] = "lorasim exec kv_witness: serial scalar-head "
                              "decoder";
    lsim_err rc = lsim_sha256(rev, sizeof rev - 1, &g.revision, w->eb);
    if (!rc)
      rc = lsim_kv_closure_of(&g, tg, nt, &c, w->eb);
    if (rc)
      return lsim__at(w, rc, "$.adapter.deltas", "%s", w->eb->msg);
    cJSON *co = cJSON_AddObjectToObject(v, "closure");
    cJSON_AddBoolToObject(co, "kv_changed", c.kv_changed);
    cJSON_AddBoolToObject(co, "kv_direct", c.kv_direct);
    cJSON_AddNumberToObject(co, "kv_first_layer", c.kv_first_layer);
    cJSON_AddBoolToObject(co, "hidden_changed", c.hidden_changed);
    cJSON_AddBoolToObject(co, "logits_changed", c.logits_changed);
  } else {
    cJSON_AddNullToObject(v, "closure");
  }
  cJSON *ru = cJSON_AddObjectToObject(v, "reuse");
  cJSON_AddItemToObject(ru, "kv", lsim__reuse_json(nt ? &c : NULL,
                                                   LSIM_KV_OBJ_KV));
  cJSON_AddItemToObject(ru, "hidden", lsim__reuse_json(nt ? &c : NULL,
                                                       LSIM_KV_OBJ_HIDDEN));
  cJSON_AddItemToObject(ru, "logits", lsim__reuse_json(nt ? &c : NULL,
                                                       LSIM_KV_OBJ_LOGITS));
  /* the rule may be conservative, never optimistic */
  const char *bad = (kv && !c.kv_changed)           ? "K/V rows"
                    : (first < c.kv_first_layer)    ? "the first K/V layer"
                    : (hidden && !c.hidden_changed) ? "the final hidden rows"
                    : (logits && !c.logits_changed) ? "the prompt logits"
                                                    : NULL;
  cJSON_AddBoolToObject(v, "sound", bad == NULL);
  if (bad)
    return lsim__at(w, LSIM_E_PATH_MISMATCH, "$.adapter", "witness: the K/V "
                    "closure rule keeps %s unchanged but the exact trace "
                    "changes them", bad);
  return 0;
}

lsim_err lsim_exec_witness(const cJSON *root, cJSON **res, char *path,
                           size_t np, lsim_errbuf *eb) {
  lsim__xw w = {path, np, eb};
  lsim__wbatch b;
  memset(&b, 0, sizeof b);
  lsim_kvw_trace base, ad;
  memset(&base, 0, sizeof base);
  memset(&ad, 0, sizeof ad);
  *res = NULL;
  lsim_err rc = lsim__wparse(&w, root, &b);
  if (!rc && (rc = lsim_kvw_run(&b.spec, NULL, 0, &base, eb)))
    rc = lsim__at(&w, rc, "$", "base model: %s", eb->msg);
  if (!rc && (rc = lsim_kvw_run(&b.spec, b.deltas, b.nd, &ad, eb)))
    rc = lsim__at(&w, rc, "$.adapter", "adapted model: %s", eb->msg);
  cJSON *o = NULL, *verdict = NULL;
  if (!rc) {
    o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "mode", "kv_witness");
    cJSON_AddNumberToObject(o, "softmax_base", b.spec.exp_base);
    cJSON_AddItemToObject(o, "base", lsim__trace_json(&base));
    cJSON_AddItemToObject(o, "adapted", lsim__trace_json(&ad));
    rc = lsim__verdict(&w, &b, &base, &ad, &verdict);
    cJSON_AddItemToObject(o, "verdict", verdict);
    cJSON_AddStringToObject(o, "backend", "cpu_ref");
  }
  if (rc) {
    cJSON_Delete(o);
    o = NULL;
  }
  *res = o;
  lsim_kvw_trace_clear(&base);
  lsim_kvw_trace_clear(&ad);
  free(b.deltas);
  lsim__wstore_free(&b.st);
  return rc;
}

/* ======================================================================== */
/* emit: z                                                                   */
/* ======================================================================== */

static lsim_err lsim__z(lsim__xw *w, const lsim_exec_view *v, cJSON *res) {
  const lsim_rowplan *p = v->plan;
  int path = v->path >= 0 ? v->path : LSIM_REF_SGMV;
  lsim_ref_trace tr = LSIM_REF_TRACE_INIT;
  lsim_qmat D = LSIM_QMAT_INIT;
  lsim_err rc = lsim_qmat_init(&D, v->D->rows, v->D->cols, w->eb);
  if (!rc)
    rc = lsim_ref_delta_ex(p, v->X, v->ad, v->nad, path, LSIM_SCALE_PASSED,
                           LSIM_NUM_AUTO, &tr, NULL, &D, w->eb);
  /* the traced run is the one whose delta exec reports */
  if (!rc)
    rc = lsim_ref_compare(v->D, &D, "emit z: traced delta", w->eb);
  int *at = rc ? NULL : malloc(((size_t)p->T + 1) * sizeof *at);
  if (!rc && !at)
    rc = lsim_fail(w->eb, LSIM_E_NOMEM, "out of memory");
  if (!rc) {
    for (int t = 0; t < p->T; t++)
      at[t] = -1;
    for (int u = 0; u < tr.n; u++)
      at[tr.row[u]] = u;
    cJSON *z = cJSON_CreateArray();
    for (int i = 0; i < p->T; i++) {
      int t = v->order[i], u = at[t];
      if (u < 0) {
        cJSON_AddItemToArray(z, cJSON_CreateNull()); /* base-only row */
        continue;
      }
      cJSON *row = cJSON_CreateArray();
      for (int k = 0; k < p->row_rank[t]; k++)
        cJSON_AddItemToArray(row, lsim__q_json(LSIM_QAT(&tr.Z, u, k)));
      cJSON_AddItemToArray(z, row);
    }
    cJSON_AddItemToObject(res, "z", z);
    cJSON_AddStringToObject(res, "z_path", lsim_ref_path_name(path));
  }
  free(at);
  lsim_ref_trace_release(&tr);
  lsim_qmat_clear(&D);
  if (rc)
    snprintf(w->path, w->np, "$.emit");
  return rc;
}

/* ======================================================================== */
/* tp                                                                        */
/* ======================================================================== */

enum { LSIM__TP_COLUMN = 0, LSIM__TP_ROW = 1 };

static lsim_err lsim__tp_parse(lsim__xw *w, const cJSON *tp,
                               const lsim_exec_view *v, int *degree,
                               int *style) {
  const cJSON *j;
  long n = 0;
  lsim_err rc;
  if (!cJSON_IsObject(tp))
    return lsim__at(w, LSIM_E_EXEC_TYPE, "$.tp", "expected an object");
  if ((rc = lsim__need(w, tp, "degree", "$.tp", &j)) ||
      (rc = lsim__int(w, j, "$.tp.degree", 1, LSIM_TP_MAX_WORLD,
                      LSIM_E_TP_WORLD, &n)))
    return rc;
  *degree = (int)n;
  if ((rc = lsim__need(w, tp, "style", "$.tp", &j)))
    return rc;
  if (cJSON_IsString(j) && strcmp(j->valuestring, "column") == 0)
    *style = LSIM__TP_COLUMN;
  else if (cJSON_IsString(j) && strcmp(j->valuestring, "row") == 0)
    *style = LSIM__TP_ROW;
  else
    return lsim__at(w, LSIM_E_TP_FIELD, "$.tp.style",
                    "expected \"column\" (split d_out and the rank) or "
                    "\"row\" (split d_in)");
  /* every split axis divisible by the degree */
  int N = *degree, din = v->X->cols, dout = v->W->rows;
  if (dout % N)
    return lsim__at(w, LSIM_E_TP_DIV, "$.tp.degree", "tp: d_out %d is not "
                    "divisible by degree %d", dout, N);
  if (*style == LSIM__TP_ROW && din % N)
    return lsim__at(w, LSIM_E_TP_DIV, "$.tp.degree", "tp: d_in %d is not "
                    "divisible by degree %d (row parallel splits d_in)", din,
                    N);
  for (int a = 0; *style == LSIM__TP_COLUMN && a < v->nad; a++)
    if (v->ad[a].rank % N)
      return lsim__at(w, LSIM_E_TP_DIV, "$.tp.degree", "tp: adapter '%s' "
                      "rank %d is not divisible by degree %d (column "
                      "parallel splits the rank)", v->ad_names[a],
                      v->ad[a].rank, N);
  return 0;
}

/* dst := X's packed rows rows[0..n) */
static lsim_err lsim__gather(lsim_qmat *dst, const lsim_qmat *X,
                             const int *rows, int n, lsim_errbuf *eb) {
  lsim_err rc = lsim_qmat_init(dst, n, X->cols, eb);
  for (int i = 0; !rc && i < n; i++)
    for (int k = 0; k < X->cols; k++)
      mpq_set(LSIM_QAT(dst, i, k), LSIM_QAT(X, rows[i], k));
  return rc;
}

/* One segment (the rows of one adapter, or the base-only rows when ad is
** NULL) through the sharded schedule; its output rows land in Y and D
** (packed) and its intermediates in seg. */
static lsim_err lsim__tp_segment(const lsim_exec_view *v, int N, int style,
                                 const lsim_qadapter *ad, const int *rows,
                                 int n, lsim_qmat *Y, lsim_qmat *D,
                                 cJSON *seg, lsim_errbuf *eb) {
  const lsim_qmat *W = v->W;
  int din = W->cols, dout = W->rows, is = din / N, os = dout / N;
  lsim_qmat X = LSIM_QMAT_INIT, Bs = LSIM_QMAT_INIT, y = LSIM_QMAT_INIT,
            d = LSIM_QMAT_INIT;
  lsim_qmat fin[LSIM_TP_MAX_WORLD];
  for (int j = 0; j < N; j++)
    fin[j] = (lsim_qmat)LSIM_QMAT_INIT;
  lsim_tp_col_trace ct;
  lsim_tp_row_trace rt;
  memset(&ct, 0, sizeof ct);
  memset(&rt, 0, sizeof rt);
  lsim_err rc = lsim__gather(&X, v->X, rows, n, eb);
  /* the scale is folded into B before sharding: every D_j is scaled */
  if (!rc && ad && !(rc = lsim_qmat_copy(&Bs, &ad->B, eb)))
    for (int i = 0; i < Bs.rows; i++)
      for (int k = 0; k < Bs.cols; k++)
        mpq_mul(LSIM_QAT(&Bs, i, k), LSIM_QAT(&Bs, i, k), ad->scale);
  if (!rc && ad && style == LSIM__TP_COLUMN)
    rc = lsim_tp_ref_col(&X, &ad->A, &Bs, N, &ct, eb);
  if (!rc && ad && style == LSIM__TP_ROW)
    rc = lsim_tp_ref_row(&X, &ad->A, &Bs, W, N, &rt, eb);
  cJSON *ranks = cJSON_AddArrayToObject(seg, "ranks");
  for (int j = 0; !rc && j < N; j++) {
    lsim_qmat a = LSIM_QMAT_INIT, b = LSIM_QMAT_INIT, wj = LSIM_QMAT_INIT,
              xj = LSIM_QMAT_INIT, yb = LSIM_QMAT_INIT;
    cJSON *r = cJSON_CreateObject();
    cJSON_AddItemToArray(ranks, r);
    cJSON_AddNumberToObject(r, "rank", j);
    if (style == LSIM__TP_COLUMN) {
      /* W split on d_out; X replicated */
      rc = lsim_qmat_slice(&wj, W, j * os, (j + 1) * os, 0, din, eb);
      if (!rc && ad)
        rc = lsim_tp_shard_col(&ad->A, &Bs, N, j, &a, &b, eb);
      if (!rc)
        rc = lsim_ref_base(&X, &wj, &yb, eb);
      if (!rc)
        rc = lsim_qmat_copy(&fin[j], &yb, eb); /* Y_j = X W_j^T + D_j */
      if (!rc && ad)
        rc = lsim_qmat_add(&fin[j], &ct.d_local[j], eb);
    } else {
      /* W split on d_in, with the activation */
      rc = lsim_qmat_slice(&wj, W, 0, dout, j * is, (j + 1) * is, eb);
      if (!rc)
        rc = lsim_qmat_slice(&xj, &X, 0, n, j * is, (j + 1) * is, eb);
      if (!rc && ad)
        rc = lsim_tp_shard_row(&ad->A, &Bs, N, j, &a, &b, eb);
      if (!rc)
        rc = ad ? lsim_qmat_copy(&yb, &rt.yb_local[j], eb)
                : lsim_ref_base(&xj, &wj, &yb, eb);
      /* what rank j hands to the final all-reduce: Yb_j + E_j(D_j) */
      if (!rc)
        rc = lsim_qmat_copy(&fin[j], &yb, eb);
      for (int i = 0; !rc && ad && i < n; i++)
        for (int c = 0; c < os; c++)
          mpq_add(LSIM_QAT(&fin[j], i, j * os + c),
                  LSIM_QAT(&fin[j], i, j * os + c),
                  LSIM_QAT(&rt.d_local[j], i, c));
      if (!rc)
        cJSON_AddItemToObject(r, "x", lsim__mat_json(&xj));
    }
    if (!rc) {
      cJSON_AddItemToObject(r, "w", lsim__mat_json(&wj));
      if (ad) {
        cJSON_AddItemToObject(r, "a", lsim__mat_json(&a));
        cJSON_AddItemToObject(r, "b", lsim__mat_json(&b));
        cJSON_AddItemToObject(r, "shrink",
                              lsim__mat_json(style == LSIM__TP_COLUMN
                                                 ? &ct.z_local[j]
                                                 : &rt.p_local[j]));
        cJSON_AddItemToObject(r, "expand",
                              lsim__mat_json(style == LSIM__TP_COLUMN
                                                 ? &ct.d_local[j]
                                                 : &rt.d_local[j]));
      }
      cJSON_AddItemToObject(r, "base", lsim__mat_json(&yb));
      cJSON_AddItemToObject(r, "final_in", lsim__mat_json(&fin[j]));
    }
    lsim_qmat_clear(&a);
    lsim_qmat_clear(&b);
    lsim_qmat_clear(&wj);
    lsim_qmat_clear(&xj);
    lsim_qmat_clear(&yb);
  }
  /* the bottleneck collective (adapter segments only) */
  if (!rc && ad) {
    cJSON *bn = cJSON_AddObjectToObject(seg, "bottleneck");
    cJSON_AddStringToObject(bn, "collective", style == LSIM__TP_COLUMN
                                                  ? "all_gather"
                                                  : "all_reduce_sum");
    cJSON_AddItemToObject(bn, "output",
                          lsim__mat_json(style == LSIM__TP_COLUMN ? &ct.z
                                                                  : &rt.z));
  }
  /* the final collective: the output shards gathered (column) or the
  ** fused base all-reduce (row) */
  if (!rc)
    rc = style == LSIM__TP_COLUMN ? lsim_tp_all_gather(fin, N, &y, eb)
                                  : lsim_tp_all_reduce_sum(fin, N, &y, eb);
  /* the fused reduction must be the one tp.c performed */
  if (!rc && ad && style == LSIM__TP_ROW)
    rc = lsim_ref_compare(&rt.y, &y, "tp: fused all-reduce", eb);
  if (!rc) {
    cJSON *fo = cJSON_AddObjectToObject(seg, "final");
    cJSON_AddStringToObject(fo, "collective", style == LSIM__TP_COLUMN
                                                  ? "all_gather"
                                                  : "all_reduce_sum");
    cJSON_AddItemToObject(fo, "output", lsim__mat_json(&y));
  }
  if (!rc && ad)
    rc = lsim_qmat_copy(&d, style == LSIM__TP_COLUMN ? &ct.d : &rt.d, eb);
  if (!rc && ad)
    cJSON_AddItemToObject(seg, "delta", lsim__mat_json(&d));
  for (int i = 0; !rc && i < n; i++)
    for (int c = 0; c < dout; c++) {
      mpq_set(LSIM_QAT(Y, rows[i], c), LSIM_QAT(&y, i, c));
      if (ad)
        mpq_set(LSIM_QAT(D, rows[i], c), LSIM_QAT(&d, i, c));
    }
  for (int j = 0; j < N; j++)
    lsim_qmat_clear(&fin[j]);
  lsim_tp_col_trace_clear(&ct);
  lsim_tp_row_trace_clear(&rt);
  lsim_qmat_clear(&X);
  lsim_qmat_clear(&Bs);
  lsim_qmat_clear(&y);
  lsim_qmat_clear(&d);
  return rc;
}

static cJSON *lsim__ints(const int *v, int n) {
  cJSON *a = cJSON_CreateArray();
  for (int i = 0; i < n; i++)
    cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]));
  return a;
}

static lsim_err lsim__tp(lsim__xw *w, const cJSON *tpj,
                         const lsim_exec_view *v, cJSON *res) {
  int N = 0, style = 0;
  lsim_err rc = lsim__tp_parse(w, tpj, v, &N, &style);
  if (rc)
    return rc;
  const lsim_rowplan *p = v->plan;
  lsim_qmat Y = LSIM_QMAT_INIT, D = LSIM_QMAT_INIT;
  int *base = malloc(((size_t)p->T + 1) * sizeof *base);
  int nbase = 0;
  if (!base)
    rc = lsim_fail(w->eb, LSIM_E_NOMEM, "out of memory");
  if (!rc)
    rc = lsim_qmat_init(&Y, p->T, v->W->rows, w->eb);
  if (!rc)
    rc = lsim_qmat_init(&D, p->T, v->W->rows, w->eb);
  cJSON *tp = cJSON_CreateObject();
  cJSON_AddNumberToObject(tp, "degree", N);
  cJSON_AddStringToObject(tp, "style", style == LSIM__TP_COLUMN ? "column"
                                                               : "row");
  cJSON *segs = cJSON_AddArrayToObject(tp, "segments");
  /* the plan's adapter segments, then the base-only rows */
  for (int s = 0; !rc && s < p->nseg; s++) {
    const int *rows = p->perm + p->seg_offsets[s];
    int n = p->seg_offsets[s + 1] - p->seg_offsets[s];
    cJSON *seg = cJSON_CreateObject();
    cJSON_AddItemToArray(segs, seg);
    cJSON_AddStringToObject(seg, "adapter", v->ad_names[p->seg_adapter[s]]);
    cJSON_AddItemToObject(seg, "rows", lsim__ints(rows, n));
    rc = lsim__tp_segment(v, N, style, &v->ad[p->seg_adapter[s]], rows, n,
                          &Y, &D, seg, w->eb);
  }
  for (int t = 0; !rc && t < p->T; t++)
    if (p->row_adapter[t] == LSIM_BASE)
      base[nbase++] = t;
  if (!rc && nbase) {
    cJSON *seg = cJSON_CreateObject();
    cJSON_AddItemToArray(segs, seg);
    cJSON_AddNullToObject(seg, "adapter");
    cJSON_AddItemToObject(seg, "rows", lsim__ints(base, nbase));
    rc = lsim__tp_segment(v, N, style, NULL, base, nbase, &Y, &D, seg,
                          w->eb);
  }
  /* sharded == unsharded, exactly */
  if (!rc)
    rc = lsim_ref_compare(v->D, &D, "tp: sharded delta", w->eb);
  if (!rc)
    rc = lsim_ref_compare(v->Y, &Y, "tp: sharded output", w->eb);
  if (!rc) {
    cJSON_AddItemToObject(tp, "delta", lsim__sched_json(&D, v->order));
    cJSON_AddItemToObject(tp, "y", lsim__sched_json(&Y, v->order));
    cJSON_AddBoolToObject(tp, "equals_unsharded", 1);
    cJSON_AddItemToObject(res, "tp", tp);
    tp = NULL;
  } else if (w->np && !w->path[0]) {
    snprintf(w->path, w->np, "$.tp");
  }
  cJSON_Delete(tp);
  free(base);
  lsim_qmat_clear(&Y);
  lsim_qmat_clear(&D);
  return rc;
}

/* ======================================================================== */
/* the hook                                                                  */
/* ======================================================================== */

lsim_err lsim_exec_extras(const cJSON *root, const lsim_exec_view *v,
                          cJSON *res, char *path, size_t np, lsim_errbuf *eb) {
  lsim__xw w = {path, np, eb};
  const cJSON *emit = lsim__get(root, "emit"), *tp = lsim__get(root, "tp");
  int want_z = 0;
  lsim_err rc = 0;
  if (emit) {
    if (!cJSON_IsArray(emit))
      return lsim__at(&w, LSIM_E_EXEC_TYPE, "$.emit",
                      "expected an array of names");
    int i = 0;
    for (const cJSON *e = emit->child; e; e = e->next, i++) {
      char p[64];
      snprintf(p, sizeof p, "$.emit[%d]", i);
      if (!cJSON_IsString(e) || strcmp(e->valuestring, "z") != 0)
        return lsim__at(&w, LSIM_E_EXEC_TYPE, p, "expected \"z\" (the "
                        "shrink output)");
      want_z = 1;
    }
  }
  if ((want_z || tp) && v->use_cuda)
    return lsim__at(&w, LSIM_E_BACKEND, want_z ? "$.emit" : "$.tp",
                    "%s runs on the exact cpu_ref backend only",
                    want_z ? "emit z" : "tp");
  if (np)
    path[0] = 0;
  if (want_z)
    rc = lsim__z(&w, v, res);
  if (!rc && tp)
    rc = lsim__tp(&w, tp, v, res);
  return rc;
}
