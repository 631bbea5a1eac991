/*
** exec.c: `lorasim exec`, one batch in, exact results out.
**
** Reads a JSON batch for one linear target module (docs/EXEC.md and
** shared/spec/exec-json.md), builds the iteration plan with the engine's
** planner, runs the adapter branch on the chosen backend path(s) and writes
** the plan, the adapter delta and the output Y in scheduler order as exact
** rationals.  Input errors exit 2 with one line naming the JSON path and a
** stable code; nothing is written to --out unless the whole run succeeded
** (the file is written beside the target and renamed into place).
**
** The input goes through the shared JSON layer (sim/json.h): duplicate keys
** are refused, integers are exact up to 2^63-1, and out of memory is
** E_NOMEM.  Every step is linear in the size of the batch: ids are found
** through a hash index, the output order by a counting pass, so a batch of
** LSIM_EXEC_MAX_REQUESTS requests (the documented limit, E_EXEC_LIMIT
** beyond) takes time proportional to its rows.
*/
#include "exec.h"
#include "exec_witness.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "json.h"
#include "outfile.h"
#include "slurp.h"
#include "../backends/cpu_ref/cpu_ref.h"
#include "../engine/rowplan.h"
#ifdef LSIM_HAVE_CUDA
#include "../backends/cuda/cuda.h"
#include "../backends/cuda/gpu_exact.h"
#endif

#define LSIM__EXEC_MAX_DIM 65536
#define LSIM__EXEC_MAX_ITEMS 1000000
/* the most requests (and adapters) in one batch: docs/EXEC.md */
#define LSIM_EXEC_MAX_REQUESTS 1000000

/* ---- an index of ids ------------------------------------------------------
** Open addressing over FNV-1a; it answers membership and an id's position
** only, so its slot order never steers anything. */
typedef struct lsim__ids {
  const char **key;
  int *val;
  size_t mask;
} lsim__ids;

static uint64_t lsim__fnv(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static int lsim__ids_init(lsim__ids *ix, int n) {
  size_t cap = 16;
  while (cap < (size_t)n * 2)
    cap *= 2;
  ix->key = calloc(cap, sizeof *ix->key);
  ix->val = calloc(cap, sizeof *ix->val);
  ix->mask = cap - 1;
  return ix->key && ix->val;
}

static void lsim__ids_release(lsim__ids *ix) {
  free(ix->key);
  free(ix->val);
  ix->key = NULL;
  ix->val = NULL;
}

/* The value of id, or -1. */
static int lsim__ids_find(const lsim__ids *ix, const char *id) {
  if (!ix->key)
    return -1;
  for (size_t h = lsim__fnv(id) & ix->mask;; h = (h + 1) & ix->mask) {
    if (!ix->key[h])
      return -1;
    if (strcmp(ix->key[h], id) == 0)
      return ix->val[h];
  }
}

/* Add id -> v (id not present; the table has room by construction). */
static void lsim__ids_add(lsim__ids *ix, const char *id, int v) {
  size_t h = lsim__fnv(id) & ix->mask;
  while (ix->key[h])
    h = (h + 1) & ix->mask;
  ix->key[h] = id;
  ix->val[h] = v;
}

typedef struct lsim__xreq {
  const char *id;
  int phase;
  int adapter; /* index into adapters, or LSIM_BASE */
  lsim_qmat x; /* [rows][d_in] */
} lsim__xreq;

typedef struct lsim__batch {
  int d_in, d_out, max_rank;
  lsim_qmat W;
  int nad;
  const char **ad_names;
  lsim_qadapter *ad;
  int nreq;
  lsim__xreq *req;
  int *packed; /* NULL or [nreq] */
  lsim__ids ad_ix, req_ix; /* adapter and request id -> index */
  char path[512]; /* JSON path of the last error */
} lsim__batch;

/* ---- error helpers ------------------------------------------------------ */

static lsim_err lsim__at(lsim__batch *b, lsim_errbuf *eb, lsim_err code,
                         const char *path, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

static lsim_err lsim__at(lsim__batch *b, lsim_errbuf *eb, lsim_err code,
                         const char *path, const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  snprintf(b->path, sizeof b->path, "%s", path);
  return lsim_fail(eb, code, "%s", msg);
}

/* ---- numbers -------------------------------------------------------------- */

/* An exact number: a JSON integer (|v| <= 2^53) or a rational string. */
static lsim_err lsim__num(lsim__batch *b, const cJSON *j, const char *path,
                          mpq_t out, lsim_errbuf *eb) {
  if (cJSON_IsString(j)) {
    lsim_errbuf e2 = LSIM_ERRBUF_INIT;
    lsim_err rc = lsim_q_parse(out, j->valuestring, &e2);
    if (rc)
      return lsim__at(b, eb, rc, path, "%s", e2.msg);
    return 0;
  }
  if (cJSON_IsNumber(j)) {
    /* exact from the number's text: 2^53 + 1 stays 2^53 + 1 */
    int64_t v = 0;
    lsim_json_int_st st = lsim_json_int(j, &v);
    if (st == LSIM_JSON_INT_RANGE)
      return lsim__at(b, eb, LSIM_E_RATIONAL, path,
                      "integer %s is outside [-2^63, 2^63-1]; give it as a "
                      "\"p/q\" string", lsim_json_num_text(j));
    if (st != LSIM_JSON_INT_OK)
      return lsim__at(b, eb, LSIM_E_RATIONAL, path,
                      "expected an integer or a \"p/q\" string, got %s",
                      lsim_json_num_text(j));
    mpz_set_si(mpq_numref(out), (long)v);
    mpz_set_ui(mpq_denref(out), 1);
    return 0;
  }
  return lsim__at(b, eb, LSIM_E_EXEC_TYPE, path,
                  "expected an integer or a rational string");
}

static lsim_err lsim__int(lsim__batch *b, const cJSON *j, const char *path,
                          int lo, int hi, int *out, lsim_errbuf *eb) {
  if (!cJSON_IsNumber(j))
    return lsim__at(b, eb, LSIM_E_EXEC_TYPE, path, "expected an integer");
  int64_t v = 0;
  if (lsim_json_int(j, &v) != LSIM_JSON_INT_OK || v < lo || v > hi)
    return lsim__at(b, eb, LSIM_E_SHAPE, path,
                    "expected an integer in [%d, %d], got %s", lo, hi,
                    lsim_json_num_text(j));
  *out = (int)v;
  return 0;
}

/* Read a [rows][cols] matrix; rows < 0 accepts any row count >= 1. */
static lsim_err lsim__mat(lsim__batch *b, const cJSON *j, const char *path,
                          int rows, int cols, lsim_qmat *m, lsim_errbuf *eb) {
  char p[560];
  if (!cJSON_IsArray(j))
    return lsim__at(b, eb, LSIM_E_EXEC_TYPE, path, "expected an array of rows");
  int n = cJSON_GetArraySize(j);
  if (rows >= 0 && n != rows)
    return lsim__at(b, eb, LSIM_E_SHAPE, path, "expected %d rows, got %d",
                    rows, n);
  if (n > LSIM__EXEC_MAX_ITEMS)
    return lsim__at(b, eb, LSIM_E_SHAPE, path, "too many rows (%d)", n);
  lsim_err rc = lsim_qmat_init(m, n, cols, eb);
  if (rc)
    return rc;
  int i = 0;
  for (const cJSON *row = j->child; row; row = row->next, i++) {
    snprintf(p, sizeof p, "%s[%d]", path, i);
    if (!cJSON_IsArray(row))
      return lsim__at(b, eb, LSIM_E_EXEC_TYPE, p, "expected an array");
    int c = cJSON_GetArraySize(row);
    if (c != cols)
      return lsim__at(b, eb, LSIM_E_SHAPE, p, "expected %d columns, got %d",
                      cols, c);
    int k = 0;
    for (const cJSON *v = row->child; v; v = v->next, k++) {
      char pv[600];
      snprintf(pv, sizeof pv, "%s[%d]", p, k);
      if ((rc = lsim__num(b, v, pv, LSIM_QAT(m, i, k), eb)))
        return rc;
    }
  }
  return 0;
}

static const cJSON *lsim__get(const cJSON *o, const char *key) {
  return cJSON_GetObjectItemCaseSensitive(o, key);
}

static lsim_err lsim__need(lsim__batch *b, const cJSON *o, const char *key,
                           const char *path, const cJSON **out,
                           lsim_errbuf *eb) {
  *out = lsim__get(o, key);
  if (!*out) {
    char p[600];
    snprintf(p, sizeof p, "%s.%s", path, key);
    return lsim__at(b, eb, LSIM_E_EXEC_MISSING, p, "required field missing");
  }
  return 0;
}

/* ---- parsing the batch ------------------------------------------------------ */

static int lsim__find_adapter(const lsim__batch *b, const char *name) {
  return lsim__ids_find(&b->ad_ix, name);
}

static lsim_err lsim__parse(lsim__batch *b, const cJSON *root,
                            lsim_errbuf *eb) {
  const cJSON *j;
  lsim_err rc;
  char p[600];
  if (!cJSON_IsObject(root))
    return lsim__at(b, eb, LSIM_E_EXEC_TYPE, "$", "expected a JSON object");
  if ((rc = lsim__need(b, root, "d_in", "$", &j, eb)) ||
      (rc = lsim__int(b, j, "$.d_in", 1, LSIM__EXEC_MAX_DIM, &b->d_in, eb)))
    return rc;
  if ((rc = lsim__need(b, root, "d_out", "$", &j, eb)) ||
      (rc = lsim__int(b, j, "$.d_out", 1, LSIM__EXEC_MAX_DIM, &b->d_out, eb)))
    return rc;
  b->max_rank = 0;
  if ((j = lsim__get(root, "max_rank")) &&
      (rc = lsim__int(b, j, "$.max_rank", 1, LSIM__EXEC_MAX_DIM, &b->max_rank,
                      eb)))
    return rc;
  if ((rc = lsim__need(b, root, "W", "$", &j, eb)) ||
      (rc = lsim__mat(b, j, "$.W", b->d_out, b->d_in, &b->W, eb)))
    return rc;

  /* adapters */
  const cJSON *ads;
  if ((rc = lsim__need(b, root, "adapters", "$", &ads, eb)))
    return rc;
  if (!cJSON_IsArray(ads))
    return lsim__at(b, eb, LSIM_E_EXEC_TYPE, "$.adapters", "expected an array");
  b->nad = cJSON_GetArraySize(ads);
  if (b->nad > LSIM_EXEC_MAX_REQUESTS)
    return lsim__at(b, eb, LSIM_E_EXEC_LIMIT, "$.adapters",
                    "%d adapters; a batch holds at most %d", b->nad,
                    LSIM_EXEC_MAX_REQUESTS);
  b->ad = calloc((size_t)b->nad + 1, sizeof *b->ad);
  b->ad_names = calloc((size_t)b->nad + 1, sizeof *b->ad_names);
  if (!b->ad || !b->ad_names || !lsim__ids_init(&b->ad_ix, b->nad))
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  for (int i = 0; i < b->nad; i++)
    mpq_init(b->ad[i].scale);
  int i = 0;
  for (const cJSON *a = ads->child; a; a = a->next, i++) {
    char ap[64];
    snprintf(ap, sizeof ap, "$.adapters[%d]", i);
    if (!cJSON_IsObject(a))
      return lsim__at(b, eb, LSIM_E_EXEC_TYPE, ap, "expected an object");
    lsim_qadapter *ad = &b->ad[i];
    ad->id = i;
    if ((rc = lsim__need(b, a, "id", ap, &j, eb)))
      return rc;
    snprintf(p, sizeof p, "%s.id", ap);
    if (!cJSON_IsString(j) || !j->valuestring[0])
      return lsim__at(b, eb, LSIM_E_EXEC_TYPE, p, "expected a non-empty string");
    if (lsim__find_adapter(b, j->valuestring) >= 0)
      return lsim__at(b, eb, LSIM_E_EXEC_DUP_ID, p, "duplicate adapter id '%s'",
                      j->valuestring);
    b->ad_names[i] = j->valuestring;
    lsim__ids_add(&b->ad_ix, j->valuestring, i);
    if ((rc = lsim__need(b, a, "rank", ap, &j, eb)))
      return rc;
    snprintf(p, sizeof p, "%s.rank", ap);
    if ((rc = lsim__int(b, j, p, 1, LSIM__EXEC_MAX_DIM, &ad->rank, eb)))
      return rc;
    if (b->max_rank > 0 && ad->rank > b->max_rank)
      return lsim__at(b, eb, LSIM_E_PLAN_RANK_SLOT, p,
                      "rank %d is above max_rank %d", ad->rank, b->max_rank);
    /* scale: explicit, else alpha / rank, else 1 */
    if ((j = lsim__get(a, "scale"))) {
      snprintf(p, sizeof p, "%s.scale", ap);
      if ((rc = lsim__num(b, j, p, ad->scale, eb)))
        return rc;
    } else if ((j = lsim__get(a, "alpha"))) {
      snprintf(p, sizeof p, "%s.alpha", ap);
      if ((rc = lsim__num(b, j, p, ad->scale, eb)))
        return rc;
      mpq_t r;
      mpq_init(r);
      mpq_set_si(r, ad->rank, 1);
      mpq_div(ad->scale, ad->scale, r);
      mpq_clear(r);
    } else {
      mpq_set_si(ad->scale, 1, 1);
    }
    if ((rc = lsim__need(b, a, "A", ap, &j, eb)))
      return rc;
    snprintf(p, sizeof p, "%s.A", ap);
    if ((rc = lsim__mat(b, j, p, ad->rank, b->d_in, &ad->A, eb)))
      return rc;
    if ((rc = lsim__need(b, a, "B", ap, &j, eb)))
      return rc;
    snprintf(p, sizeof p, "%s.B", ap);
    if ((rc = lsim__mat(b, j, p, b->d_out, ad->rank, &ad->B, eb)))
      return rc;
  }

  /* requests, in scheduler order */
  const cJSON *reqs;
  if ((rc = lsim__need(b, root, "requests", "$", &reqs, eb)))
    return rc;
  if (!cJSON_IsArray(reqs))
    return lsim__at(b, eb, LSIM_E_EXEC_TYPE, "$.requests", "expected an array");
  b->nreq = cJSON_GetArraySize(reqs);
  if (b->nreq < 1)
    return lsim__at(b, eb, LSIM_E_SHAPE, "$.requests",
                    "expected at least one request");
  if (b->nreq > LSIM_EXEC_MAX_REQUESTS)
    return lsim__at(b, eb, LSIM_E_EXEC_LIMIT, "$.requests",
                    "%d requests; a batch holds at most %d", b->nreq,
                    LSIM_EXEC_MAX_REQUESTS);
  b->req = calloc((size_t)b->nreq, sizeof *b->req);
  if (!b->req || !lsim__ids_init(&b->req_ix, b->nreq))
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  i = 0;
  for (const cJSON *r = reqs->child; r; r = r->next, i++) {
    char rp[64];
    snprintf(rp, sizeof rp, "$.requests[%d]", i);
    lsim__xreq *q = &b->req[i];
    if (!cJSON_IsObject(r))
      return lsim__at(b, eb, LSIM_E_EXEC_TYPE, rp, "expected an object");
    if ((rc = lsim__need(b, r, "id", rp, &j, eb)))
      return rc;
    snprintf(p, sizeof p, "%s.id", rp);
    if (!cJSON_IsString(j) || !j->valuestring[0])
      return lsim__at(b, eb, LSIM_E_EXEC_TYPE, p, "expected a non-empty string");
    if (lsim__ids_find(&b->req_ix, j->valuestring) >= 0)
      return lsim__at(b, eb, LSIM_E_EXEC_DUP_ID, p,
                      "duplicate request id '%s'", j->valuestring);
    q->id = j->valuestring;
    lsim__ids_add(&b->req_ix, j->valuestring, i);
    if ((rc = lsim__need(b, r, "phase", rp, &j, eb)))
      return rc;
    snprintf(p, sizeof p, "%s.phase", rp);
    if (cJSON_IsString(j) && strcmp(j->valuestring, "prefill") == 0)
      q->phase = LSIM_PHASE_PREFILL;
    else if (cJSON_IsString(j) && strcmp(j->valuestring, "decode") == 0)
      q->phase = LSIM_PHASE_DECODE;
    else
      return lsim__at(b, eb, LSIM_E_EXEC_TYPE, p,
                      "expected \"prefill\" or \"decode\"");
    j = lsim__get(r, "adapter");
    snprintf(p, sizeof p, "%s.adapter", rp);
    if (!j || cJSON_IsNull(j)) {
      q->adapter = LSIM_BASE;
    } else if (cJSON_IsString(j)) {
      q->adapter = lsim__find_adapter(b, j->valuestring);
      if (q->adapter < 0)
        return lsim__at(b, eb, LSIM_E_EXEC_UNKNOWN_ADAPTER, p,
                        "unknown adapter '%s'", j->valuestring);
    } else {
      return lsim__at(b, eb, LSIM_E_EXEC_TYPE, p, "expected a string or null");
    }
    if ((rc = lsim__need(b, r, "x", rp, &j, eb)))
      return rc;
    snprintf(p, sizeof p, "%s.x", rp);
    if (cJSON_IsArray(j) && cJSON_GetArraySize(j) == 0)
      return lsim__at(b, eb, q->phase == LSIM_PHASE_PREFILL
                                 ? LSIM_E_PLAN_EMPTY_PREFILL
                                 : LSIM_E_PLAN_DECODE_ROWS,
                      p, "a request needs at least one row");
    if (q->phase == LSIM_PHASE_DECODE && cJSON_IsArray(j) &&
        cJSON_GetArraySize(j) != 1)
      return lsim__at(b, eb, LSIM_E_PLAN_DECODE_ROWS, p,
                      "a decode request has exactly one row, got %d",
                      cJSON_GetArraySize(j));
    if ((rc = lsim__mat(b, j, p, -1, b->d_in, &q->x, eb)))
      return rc;
  }

  /* packed_order: request ids, a permutation within phases */
  if ((j = lsim__get(root, "packed_order")) && !cJSON_IsNull(j)) {
    if (!cJSON_IsArray(j))
      return lsim__at(b, eb, LSIM_E_EXEC_TYPE, "$.packed_order",
                      "expected an array of request ids");
    if (cJSON_GetArraySize(j) != b->nreq)
      return lsim__at(b, eb, LSIM_E_PLAN_PACKED_ORDER, "$.packed_order",
                      "expected %d request ids, got %d", b->nreq,
                      cJSON_GetArraySize(j));
    b->packed = calloc((size_t)b->nreq, sizeof *b->packed);
    int *seen = calloc((size_t)b->nreq, sizeof *seen);
    if (!b->packed || !seen) {
      free(seen);
      return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
    }
    i = 0;
    for (const cJSON *v = j->child; v; v = v->next, i++) {
      snprintf(p, sizeof p, "$.packed_order[%d]", i);
      int k = cJSON_IsString(v) ? lsim__ids_find(&b->req_ix, v->valuestring)
                                : -1;
      if (k < 0 || seen[k]) {
        free(seen);
        return lsim__at(b, eb, LSIM_E_PLAN_PACKED_ORDER, p,
                        k < 0 ? "not a request id" : "request listed twice");
      }
      seen[k] = 1;
      b->packed[i] = k;
    }
    free(seen);
    /* requests pack phase-major: prefills first, whatever the order given */
    int *phased = malloc((size_t)b->nreq * sizeof *phased);
    if (!phased)
      return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
    int n = 0;
    for (int ph = LSIM_PHASE_PREFILL; ph <= LSIM_PHASE_DECODE; ph++)
      for (int m = 0; m < b->nreq; m++)
        if (b->req[b->packed[m]].phase == ph)
          phased[n++] = b->packed[m];
    memcpy(b->packed, phased, (size_t)b->nreq * sizeof *phased);
    free(phased);
  }
  return 0;
}

static void lsim__batch_release(lsim__batch *b) {
  lsim_qmat_clear(&b->W);
  for (int i = 0; b->ad && i < b->nad; i++) {
    mpq_clear(b->ad[i].scale);
    lsim_qmat_clear(&b->ad[i].A);
    lsim_qmat_clear(&b->ad[i].B);
  }
  for (int i = 0; b->req && i < b->nreq; i++)
    lsim_qmat_clear(&b->req[i].x);
  free(b->ad);
  free(b->ad_names);
  free(b->req);
  free(b->packed);
  lsim__ids_release(&b->ad_ix);
  lsim__ids_release(&b->req_ix);
}

/* ---- output ------------------------------------------------------------------ */

static cJSON *lsim__int_array(const int *v, int n) {
  cJSON *a = cJSON_CreateArray();
  for (int i = 0; a && i < n; i++)
    cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]));
  return a;
}

static cJSON *lsim__adapter_name(const lsim__batch *b, int id) {
  return id == LSIM_BASE ? cJSON_CreateNull()
                         : cJSON_CreateString(b->ad_names[id]);
}

static cJSON *lsim__rat_rows(const lsim_qmat *m, const int *order, int n) {
  cJSON *rows = cJSON_CreateArray();
  for (int i = 0; i < n; i++) {
    cJSON *row = cJSON_CreateArray();
    for (int k = 0; k < m->cols; k++) {
      char *s = lsim_q_str(LSIM_QAT(m, order[i], k));
      cJSON_AddItemToArray(row, cJSON_CreateString(s ? s : "?"));
      free(s);
    }
    cJSON_AddItemToArray(rows, row);
  }
  return rows;
}

static cJSON *lsim__plan_json(const lsim__batch *b, const lsim_rowplan *p) {
  cJSON *o = cJSON_CreateObject();
  cJSON *rows = cJSON_AddArrayToObject(o, "packed_rows");
  for (int t = 0; t < p->T; t++) {
    cJSON *r = cJSON_CreateArray();
    cJSON_AddItemToArray(r, cJSON_CreateString(b->req[p->row_req[t]].id));
    cJSON_AddItemToArray(r, cJSON_CreateNumber(p->row_pos[t]));
    cJSON_AddItemToArray(rows, r);
  }
  cJSON_AddItemToObject(o, "prefill_indptr",
                        lsim__int_array(p->prefill_indptr, p->npre + 1));
  cJSON_AddNumberToObject(o, "doff", p->doff);
  cJSON *sa = cJSON_AddArrayToObject(o, "segment_adapters");
  for (int s = 0; s < p->nseg; s++)
    cJSON_AddItemToArray(sa, lsim__adapter_name(b, p->seg_adapter[s]));
  cJSON_AddItemToObject(o, "segment_offsets",
                        lsim__int_array(p->seg_offsets, p->nseg + 1));
  cJSON_AddItemToObject(o, "permutation", lsim__int_array(p->perm, p->nactive));
  cJSON *sr = cJSON_AddObjectToObject(o, "sample_rows");
  for (int j = 0; j < p->n; j++)
    cJSON_AddNumberToObject(sr, b->req[j].id, p->sample_rows[j]);
  cJSON_AddNumberToObject(o, "true_rank_rows", (double)p->true_rank_rows);
  if (b->max_rank > 0) {
    cJSON_AddNumberToObject(o, "padded_rank_rows", (double)p->padded_rank_rows);
    cJSON_AddNumberToObject(o, "wasted_rank_rows", (double)p->wasted_rank_rows);
  }
  /* more than the minimum: every coordinate system of the plan */
  cJSON *runs = cJSON_AddObjectToObject(o, "runs");
  cJSON *ra = cJSON_AddArrayToObject(runs, "adapters");
  for (int r = 0; r < p->nruns; r++)
    cJSON_AddItemToArray(ra, lsim__adapter_name(b, p->run_adapter[r]));
  cJSON_AddItemToObject(runs, "offsets",
                        lsim__int_array(p->run_offsets, p->nruns + 1));
  cJSON *ix = cJSON_AddObjectToObject(o, "indexed");
  cJSON_AddItemToObject(ix, "sorted_rows", lsim__int_array(p->sorted_rows, p->T));
  cJSON *ids = cJSON_AddArrayToObject(ix, "active_ids");
  for (int k = 0; k < p->nids; k++)
    cJSON_AddItemToArray(ids, lsim__adapter_name(b, p->active_ids[k]));
  cJSON_AddItemToObject(ix, "counts", lsim__int_array(p->id_counts, p->nids));
  cJSON_AddItemToObject(ix, "starts", lsim__int_array(p->id_starts, p->nids + 1));
  cJSON *bk = cJSON_AddObjectToObject(o, "rank_buckets");
  cJSON_AddItemToObject(bk, "ranks", lsim__int_array(p->bucket_rank, p->nbuckets));
  cJSON_AddItemToObject(bk, "offsets",
                        lsim__int_array(p->bucket_offsets, p->nbuckets + 1));
  cJSON_AddItemToObject(bk, "rows", lsim__int_array(p->bucket_rows, p->nactive));
  return o;
}

/* Write text to path atomically: a temporary beside it, then rename. */
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


/* ---- the command ------------------------------------------------------------- */

static void lsim__exec_usage(FILE *f) {
  fputs("usage: lorasim exec --in BATCH.json [--out RESULT.json]\n"
        "                    [--backend cpu_ref|cuda] [--path NAME]\n"
        "\n"
        "Run one iteration's adapter work for a single linear module and write\n"
        "the plan, the adapter delta and Y = X W^T + delta, exactly, in\n"
        "scheduler order (docs/EXEC.md).\n"
        "\n"
        "  --in PATH       the batch (JSON); '-' reads standard input\n"
        "  --out PATH      where to write the result (default standard output);\n"
        "                  nothing is written there on error\n"
        "  --backend NAME  cpu_ref (default), or cuda where built and a GPU is\n"
        "                  present: the adapter branch runs on the GPU (bf16 in,\n"
        "                  fp32 accumulation) and is checked against cpu_ref\n"
        "  --path NAME     cpu_ref: all (default: every family, which must agree\n"
        "                  exactly), per_row, grouped, sgmv, indexed, bucketed,\n"
        "                  padded; cuda: auto (default), decode, sgmv, indexed,\n"
        "                  sgmv_mma, indexed_mma, or all\n"
        "\n"
        "Optional batch keys (cpu_ref): \"tp\": {\"degree\": N, \"style\":\n"
        "\"column\"|\"row\"} runs the branch rank by rank and prints each\n"
        "rank's intermediates; \"emit\": [\"z\"] adds the shrink output Z;\n"
        "\"mode\": \"kv_witness\" runs the two-layer K/V dependency witness\n"
        "(examples: tests/fixtures/exec/tp_0x06F4_column.json,\n"
        "kv_witness_0x08C.json).\n"
        "\n"
        "exit status: 0 ok, 1 paths disagree or internal failure, 2 bad input\n",
        f);
}

static int lsim__exec_fail(const lsim__batch *b, lsim_err rc,
                           const lsim_errbuf *eb, FILE *err) {
  lsim_cli_report_at(err, rc, b ? b->path : NULL, eb->msg);
  return lsim_cli_document_status(rc);
}

/* A kv_witness batch (exec_witness.h): cpu_ref only; the result is
** written the way the linear result is.  Returns the exit status. */
static int lsim__exec_witness(const cJSON *root, lsim__batch *b,
                              const char *out, int use_cuda, FILE *err) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cJSON *res = NULL;
  char *txt = NULL;
  lsim_err rc = use_cuda ? lsim_fail(&eb, LSIM_E_BACKEND, "the kv_witness "
                                     "mode runs on cpu_ref only")
                         : lsim_exec_witness(root, &res, b->path,
                                             sizeof b->path, &eb);
  if (!rc && !(txt = cJSON_PrintUnformatted(res)))
    rc = lsim_fail(&eb, LSIM_E_NOMEM, "out of memory printing the result");
  if (!rc && out && *out)
    rc = lsim__write_atomic(out, txt, &eb);
  else if (!rc && !out)
    puts(txt);
  free(txt);
  cJSON_Delete(res);
  return rc ? lsim__exec_fail(b, rc, &eb, err) : 0;
}

/* The codes of the JSON layer's own failures in a batch. */
static const lsim_json_codes lsim__exec_codes = {LSIM_E_EXEC_JSON,
                                                 LSIM_E_JSON_DUP_KEY};

/* A batch that did not parse or could not be read: the exit status. */
static int lsim__exec_unread(const lsim_errbuf *eb, FILE *err) {
  lsim__exec_fail(NULL, eb->code, eb, err);
  return eb->code == LSIM_E_NOMEM || eb->code == LSIM_E_BUG ? 1 : 2;
}

/* Run one parsed batch: `out` is the result file (NULL: stdout, "":
** discarded), errors go to err (NULL: nowhere).  Returns the exit status. */
static int lsim__exec_doc(const lsim_json_doc *doc, const char *out,
                          const char *backend, int use_cuda, int path,
                          int cpath, FILE *err) {
#ifndef LSIM_HAVE_CUDA
  (void)use_cuda;
  (void)cpath;
#endif
  const cJSON *root = doc->root;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim__batch b;
  memset(&b, 0, sizeof b);
  lsim_rowplan plan = LSIM_ROWPLAN_INIT;
  lsim_plan_entry *ents = NULL;
  lsim_qmat X = {0, 0, NULL}, D = {0, 0, NULL}, Y = {0, 0, NULL};
  int status = 0;
  int mode = LSIM_EXEC_MODE_LINEAR;
  lsim_err rc = lsim_exec_mode_of(root, &mode, b.path, sizeof b.path, &eb);
  if (!rc && mode == LSIM_EXEC_MODE_KV_WITNESS) {
    return lsim__exec_witness(root, &b, out, use_cuda, err);
  }
  if (!rc)
    rc = lsim__parse(&b, root, &eb);
  if (!rc) {
    ents = calloc((size_t)b.nreq, sizeof *ents);
    if (!ents)
      rc = lsim_fail(&eb, LSIM_E_NOMEM, "out of memory");
    for (int i = 0; !rc && i < b.nreq; i++) {
      const lsim__xreq *q = &b.req[i];
      ents[i].request = i;
      ents[i].tenant = 0;
      ents[i].adapter = q->adapter;
      ents[i].rank = q->adapter == LSIM_BASE ? 0 : b.ad[q->adapter].rank;
      ents[i].phase = q->phase;
      ents[i].rows = q->x.rows;
    }
    if (!rc) {
      rc = lsim_rowplan_build(&plan, ents, b.nreq, b.packed, b.max_rank, &eb);
      if (rc)
        snprintf(b.path, sizeof b.path, "$.requests");
    }
  }
  if (!rc)
    rc = lsim_qmat_init(&X, plan.T, b.d_in, &eb);
  if (!rc) {
    for (int t = 0; t < plan.T; t++)
      for (int k = 0; k < b.d_in; k++)
        mpq_set(LSIM_QAT(&X, t, k),
                LSIM_QAT(&b.req[plan.row_req[t]].x, plan.row_pos[t], k));
    /* shaped up front: with no adapter at all the width comes from here */
    rc = lsim_qmat_init(&D, plan.T, b.d_out, &eb);
    if (rc)
      ;
    else if (path < 0)
      rc = lsim_ref_delta_all(&plan, &X, b.ad, b.nad, &D, &eb);
    else
      rc = lsim_ref_delta(&plan, &X, b.ad, b.nad, path, LSIM_SCALE_PASSED, &D,
                          &eb);
  }
  cJSON *validation = NULL;
#ifdef LSIM_HAVE_CUDA
  if (!rc && use_cuda) {
    /* run the chosen cuda path(s); the first one's delta is the result */
    lsim_qmat G = LSIM_QMAT_INIT;
    int first = 1, inputs_exact = 1;
    validation = cJSON_CreateObject();
    cJSON_AddStringToObject(validation, "reference", "cpu_ref (exact)");
    cJSON *vp = cJSON_AddArrayToObject(validation, "paths");
    for (int k = cpath < 0 ? 1 : cpath;
         !rc && k <= (cpath < 0 ? LSIM_CUDA_PATH__COUNT - 1 : cpath); k++) {
      int exact_in = 1, used = -1, exact;
      double ae, re;
      int64_t ns;
      rc = lsim_cuda_exact_delta(&plan, &X, b.ad, b.nad, b.d_in, b.d_out,
                                 LSIM_CUDA_BF16, k, &G, &exact_in, &used, &ns,
                                 &eb);
      if (rc && cpath < 0 && rc == LSIM_E_USAGE) {
        rc = 0; /* a path that cannot take this plan (e.g. rank > 128) */
        eb.code = 0;
        continue;
      }
      if (rc)
        break;
      lsim_q_errors(&G, &D, &ae, &re, &exact);
      cJSON *o = cJSON_CreateObject();
      cJSON_AddStringToObject(o, "path", lsim_cuda_path_name(used));
      cJSON_AddNumberToObject(o, "max_abs_err", ae);
      cJSON_AddNumberToObject(o, "max_rel_err", re);
      cJSON_AddBoolToObject(o, "exact", exact);
      cJSON_AddItemToArray(vp, o);
      inputs_exact &= exact_in;
      if (re > 1e-2)
        rc = lsim_fail(&eb, LSIM_E_PATH_MISMATCH,
                       "cuda path %s: relative error %.3g against cpu_ref "
                       "exceeds 1e-2",
                       lsim_cuda_path_name(used), re);
      if (first && !rc) {
        lsim_qmat_clear(&D);
        D = G; /* the output is what the GPU computed */
        G = (lsim_qmat)LSIM_QMAT_INIT;
      }
      lsim_qmat_clear(&G);
      first = 0;
    }
    /* whether bf16 held every input exactly: only then is "exact" owed */
    cJSON_AddBoolToObject(validation, "inputs_exact", inputs_exact);
  }
#endif
  if (!rc)
    rc = lsim_ref_base(&X, &b.W, &Y, &eb);
  if (!rc) {
    for (int t = 0; t < plan.T; t++)
      for (int k = 0; k < b.d_out; k++)
        mpq_add(LSIM_QAT(&Y, t, k), LSIM_QAT(&Y, t, k), LSIM_QAT(&D, t, k));
    /* scheduler order: requests as listed, each request's rows in order */
    int *order = malloc((size_t)plan.T * sizeof *order);
    int *start = calloc((size_t)b.nreq + 1, sizeof *start);
    if (!order || !start) {
      free(order);
      free(start);
      rc = lsim_fail(&eb, LSIM_E_NOMEM, "out of memory");
    } else {
      /* a counting pass: request j's rows in increasing packed position
      ** (rows of one request are packed in order) */
      int n = plan.T;
      for (int t = 0; t < plan.T; t++)
        start[plan.row_req[t] + 1]++;
      for (int j = 0; j < b.nreq; j++)
        start[j + 1] += start[j];
      for (int t = 0; t < plan.T; t++)
        order[start[plan.row_req[t]]++] = t;
      free(start);
      cJSON *res = cJSON_CreateObject();
      cJSON_AddItemToObject(res, "plan", lsim__plan_json(&b, &plan));
      cJSON_AddItemToObject(res, "delta", lsim__rat_rows(&D, order, n));
      cJSON_AddItemToObject(res, "y", lsim__rat_rows(&Y, order, n));
      if (validation) {
        cJSON_AddItemToObject(res, "validation", validation);
        validation = NULL;
      } else {
        cJSON *paths = cJSON_AddArrayToObject(res, "paths");
        for (int k = 0; k < LSIM_REF__COUNT; k++)
          if (path < 0 || path == k)
            cJSON_AddItemToArray(paths,
                                 cJSON_CreateString(lsim_ref_path_name(k)));
      }
      cJSON_AddStringToObject(res, "backend", backend);
      lsim_exec_view view = {&plan, &X, &b.W, b.ad, b.nad, b.ad_names, &D, &Y,
                             order, path, use_cuda};
      rc = lsim_exec_extras(root, &view, res, b.path, sizeof b.path, &eb);
      char *txt = rc ? NULL : cJSON_PrintUnformatted(res);
      cJSON_Delete(res);
      free(order);
      if (rc) {
        ; /* the extras failed: nothing is written */
      } else if (!txt) {
        rc = lsim_fail(&eb, LSIM_E_NOMEM, "out of memory printing the result");
      } else if (out && *out) {
        rc = lsim__write_atomic(out, txt, &eb);
      } else if (!out) {
        puts(txt);
      }
      free(txt);
    }
  }
  if (rc)
    status = lsim__exec_fail(&b, rc, &eb, err);
  cJSON_Delete(validation);
  lsim_qmat_clear(&X);
  lsim_qmat_clear(&D);
  lsim_qmat_clear(&Y);
  lsim_rowplan_release(&plan);
  free(ents);
  lsim__batch_release(&b);
  return status;
}

/* Run one batch given as JSON text (text[len] must be '\0'): `in` names it
** in messages; the rest as lsim__exec_doc. */
static int lsim__exec_text(const char *text, size_t len, const char *in,
                           const char *out, const char *backend, int use_cuda,
                           int path, int cpath, FILE *err) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_json_doc doc;
  if (lsim_json_parse(&doc, text, len, in, &lsim__exec_codes, &eb))
    return lsim__exec_unread(&eb, err);
  int status = lsim__exec_doc(&doc, out, backend, use_cuda, path, cpath, err);
  lsim_json_release(&doc);
  return status;
}

int lsim_exec_main(int argc, char **argv) {
  static const struct option opts[] = {{"in", required_argument, NULL, 'i'},
                                       {"out", required_argument, NULL, 'o'},
                                       {"backend", required_argument, NULL, 'b'},
                                       {"path", required_argument, NULL, 'p'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  const char *in = NULL, *out = NULL, *backend = "cpu_ref", *pathname = "all";
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case 'i': in = optarg; break;
    case 'o': out = optarg; break;
    case 'b': backend = optarg; break;
    case 'p': pathname = optarg; break;
    case 'h': lsim__exec_usage(stdout); return 0;
    default: lsim__exec_usage(stderr); return 2;
    }
  }
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  if (!in || optind != argc) {
    fprintf(stderr, "lorasim: error E_USAGE: exec needs --in BATCH.json and no "
                    "other arguments\n");
    lsim__exec_usage(stderr);
    return 2;
  }
  int use_cuda = strcmp(backend, "cuda") == 0;
  int path = -1;
#ifdef LSIM_HAVE_CUDA
  int cpath = 0;
#endif
#ifdef LSIM_HAVE_CUDA
  if (use_cuda) {
    char desc[256];
    if (lsim_cuda_describe(desc, sizeof desc) <= 0) {
      fprintf(stderr, "lorasim: error E_BACKEND: --backend cuda: %s\n", desc);
      return 2;
    }
    path = LSIM_REF_PER_ROW; /* the exact reference the GPU is checked with */
    /* the cpu_ref default "all" means every cuda path here too */
    int every = strcmp(pathname, "all") == 0;
    cpath = every ? -1 : lsim_cuda_path_find(pathname);
    if (!every && cpath < 0) {
      fprintf(stderr, "lorasim: error E_PATH: unknown cuda --path '%s'\n",
              pathname);
      return 2;
    }
  }
#endif
  if (!use_cuda && strcmp(backend, "cpu_ref") != 0) {
    fprintf(stderr, "lorasim: error E_BACKEND: exec backend '%s' is not "
                    "available in this build\n",
            backend);
    return 2;
  }
#ifndef LSIM_HAVE_CUDA
  if (use_cuda) {
    fprintf(stderr, "lorasim: error E_BACKEND: this build has no CUDA "
                    "backend (nvcc was not found at configure time)\n");
    return 2;
  }
#endif
  if (!use_cuda && strcmp(pathname, "all") != 0 &&
      (path = lsim_ref_path_find(pathname)) < 0) {
    fprintf(stderr, "lorasim: error E_PATH: unknown --path '%s'\n", pathname);
    return 2;
  }

  /* a FIFO or device is refused before it is opened; at most
  ** LSIM_SLURP_CAP bytes; "-" is standard input (sim/slurp.h) */
  const lsim_slurp_opts so = {0, 0, 0, 1, NULL};
  lsim_json_doc doc;
  if (lsim_json_load(&doc, in, &so, &lsim__exec_codes, &eb))
    return lsim__exec_unread(&eb, stderr); /* unreadable: bad input */
#ifdef LSIM_HAVE_CUDA
  int status = lsim__exec_doc(&doc, out, backend, use_cuda, path, cpath,
                              stderr);
#else
  int status = lsim__exec_doc(&doc, out, backend, use_cuda, path, 0, stderr);
#endif
  lsim_json_release(&doc);
  return status;
}

int lsim_exec_text(const char *text, size_t len, const char *name,
                   const char *out, FILE *err) {
  return lsim__exec_text(text, len, name, out, "cpu_ref", 0, -1, 0, err);
}
