/*
** kvwitness.c: the exact two-layer K/V dependency witness (kvwitness.h).
*/
#include "kvwitness.h"

#include <string.h>

#include "../../engine/kv.h"
#include "cpu_ref.h"

static void lsim__tr_init(lsim_kvw_trace *tr) {
  for (int l = 0; l < LSIM_KVW_MAXL; l++)
    for (int t = 0; t < LSIM_KVW_MAXT; t++) {
      mpq_init(tr->k[l][t]);
      mpq_init(tr->v[l][t]);
      mpq_init(tr->q[l][t]);
      mpq_init(tr->ctx[l][t]);
      for (int u = 0; u < LSIM_KVW_MAXT; u++) {
        mpq_init(tr->score[l][t][u]);
        mpq_init(tr->attn[l][t][u]);
      }
    }
  for (int l = 0; l <= LSIM_KVW_MAXL; l++)
    for (int t = 0; t < LSIM_KVW_MAXT; t++)
      for (int j = 0; j < LSIM_KVW_MAXD; j++)
        mpq_init(tr->h[l][t][j]);
  for (int t = 0; t < LSIM_KVW_MAXT; t++)
    for (int j = 0; j < LSIM_KVW_MAXV; j++)
      mpq_init(tr->logits[t][j]);
  tr->init = 1;
}

void lsim_kvw_trace_clear(lsim_kvw_trace *tr) {
  if (!tr || !tr->init)
    return;
  for (int l = 0; l < LSIM_KVW_MAXL; l++)
    for (int t = 0; t < LSIM_KVW_MAXT; t++) {
      mpq_clear(tr->k[l][t]);
      mpq_clear(tr->v[l][t]);
      mpq_clear(tr->q[l][t]);
      mpq_clear(tr->ctx[l][t]);
      for (int u = 0; u < LSIM_KVW_MAXT; u++) {
        mpq_clear(tr->score[l][t][u]);
        mpq_clear(tr->attn[l][t][u]);
      }
    }
  for (int l = 0; l <= LSIM_KVW_MAXL; l++)
    for (int t = 0; t < LSIM_KVW_MAXT; t++)
      for (int j = 0; j < LSIM_KVW_MAXD; j++)
        mpq_clear(tr->h[l][t][j]);
  for (int t = 0; t < LSIM_KVW_MAXT; t++)
    for (int j = 0; j < LSIM_KVW_MAXV; j++)
      mpq_clear(tr->logits[t][j]);
  tr->init = 0;
}

/* out := parsed s (0 for NULL). */
static lsim_err lsim__q(mpq_t out, const char *s, lsim_errbuf *eb) {
  if (!s) {
    mpq_set_ui(out, 0, 1);
    return 0;
  }
  return lsim_q_parse(out, s, eb);
}

/* Effective weight entry: base + sum of active deltas of (layer, proj). */
static lsim_err lsim__w(mpq_t out, const char *base, int layer, int proj,
                        int idx, int t, const lsim_kvw_delta *d, int nd,
                        lsim_errbuf *eb) {
  mpq_t x;
  lsim_err rc = lsim__q(out, base, eb);
  mpq_init(x);
  for (int i = 0; i < nd && !rc; i++) {
    if (d[i].layer != layer || d[i].proj != proj || (d[i].mask && !d[i].mask[t]))
      continue;
    rc = lsim__q(x, d[i].v[idx], eb);
    if (!rc)
      mpq_add(out, out, x);
  }
  mpq_clear(x);
  return rc;
}

/* out := dot(row, effective column of (layer, proj)) */
static lsim_err lsim__dot(mpq_t out, mpq_t *row, const char *const *w,
                          int layer, int proj, int t, int d,
                          const lsim_kvw_delta *ds, int nd, lsim_errbuf *eb) {
  mpq_t a;
  mpq_init(a);
  mpq_set_ui(out, 0, 1);
  lsim_err rc = 0;
  for (int j = 0; j < d && !rc; j++) {
    rc = lsim__w(a, w[j], layer, proj, j, t, ds, nd, eb);
    mpq_mul(a, a, row[j]);
    mpq_add(out, out, a);
  }
  mpq_clear(a);
  return rc;
}

static lsim_err lsim__check(const lsim_kvw_spec *s, const lsim_kvw_delta *d,
                            int nd, lsim_errbuf *eb) {
  if (s->d < 1 || s->d > LSIM_KVW_MAXD || s->layers < 1 ||
      s->layers > LSIM_KVW_MAXL || s->tokens < 1 ||
      s->tokens > LSIM_KVW_MAXT || s->vocab < 1 || s->vocab > LSIM_KVW_MAXV ||
      nd < 0 || (nd && !d))
    return lsim_fail(eb, LSIM_E_KV_WITNESS_SHAPE, "witness: d %d, layers %d, "
                     "tokens %d, vocab %d outside 1..%d/%d/%d/%d", s->d,
                     s->layers, s->tokens, s->vocab, LSIM_KVW_MAXD,
                     LSIM_KVW_MAXL, LSIM_KVW_MAXT, LSIM_KVW_MAXV);
  if (s->exp_base < 2)
    return lsim_fail(eb, LSIM_E_KV_WITNESS_BASE, "witness: softmax base %d; "
                     "the exact exponential needs an integer base >= 2",
                     s->exp_base);
  for (int i = 0; i < nd; i++) {
    int lm = d[i].proj == LSIM_KV_LM_HEAD;
    if (!(lm || (d[i].proj >= LSIM_KV_Q && d[i].proj <= LSIM_KV_O)) ||
        (lm ? d[i].layer != -1 : (d[i].layer < 0 || d[i].layer >= s->layers)))
      return lsim_fail(eb, LSIM_E_KV_WITNESS_SHAPE, "witness: delta %d on %s "
                       "of layer %d is not a witness projection", i,
                       lsim_kv_proj_name(d[i].proj) ? lsim_kv_proj_name(d[i].proj)
                                                    : "?", d[i].layer);
  }
  return 0;
}

lsim_err lsim_kvw_run(const lsim_kvw_spec *s, const lsim_kvw_delta *ds,
                      int nd, lsim_kvw_trace *tr, lsim_errbuf *eb) {
  if (!s || !tr)
    return lsim_fail(eb, LSIM_E_USAGE, "witness: null argument");
  memset(tr, 0, sizeof *tr);
  lsim__tr_init(tr);
  lsim_err rc = lsim__check(s, ds, nd, eb);
  if (rc)
    return rc;
  tr->layers = s->layers;
  tr->tokens = s->tokens;
  tr->d = s->d;
  tr->vocab = s->vocab;
  int D = s->d, T = s->tokens;
  for (int t = 0; t < T && !rc; t++)
    for (int j = 0; j < D && !rc; j++)
      rc = lsim__q(tr->h[0][t][j], s->x[t][j], eb);
  mpq_t q, z, w, num, den, a;
  mpz_t p;
  mpq_inits(q, z, w, num, den, a, NULL);
  mpz_init(p);
  for (int l = 0; l < s->layers && !rc; l++) {
    for (int t = 0; t < T && !rc; t++) {
      rc = lsim__dot(tr->k[l][t], tr->h[l][t], s->wk[l], l, LSIM_KV_K, t, D,
                     ds, nd, eb);
      if (!rc)
        rc = lsim__dot(tr->v[l][t], tr->h[l][t], s->wv[l], l, LSIM_KV_V, t, D,
                       ds, nd, eb);
    }
    for (int t = 0; t < T && !rc; t++) {
      rc = lsim__dot(q, tr->h[l][t], s->wq[l], l, LSIM_KV_Q, t, D, ds, nd, eb);
      mpq_set(tr->q[l][t], q);
      mpq_set_ui(num, 0, 1);
      mpq_set_ui(den, 0, 1);
      for (int u = 0; u <= t && !rc; u++) {
        mpq_mul(z, q, tr->k[l][u]);
        if (mpz_cmp_ui(mpq_denref(z), 1) != 0 ||
            mpz_cmpabs_ui(mpq_numref(z), 4096) > 0) {
          rc = lsim_fail(eb, LSIM_E_KV_WITNESS_INEXACT, "witness: layer %d "
                         "token %d logit over token %d is not an integer in "
                         "-4096..4096; its weight would not be exact", l, t, u);
          break;
        }
        /* w = b^z exactly */
        long e = mpz_get_si(mpq_numref(z));
        mpz_ui_pow_ui(p, (unsigned long)s->exp_base,
                      (unsigned long)(e < 0 ? -e : e));
        mpq_set_z(w, p);
        if (e < 0)
          mpq_inv(w, w);
        mpq_set(tr->score[l][t][u], z);
        mpq_set(tr->attn[l][t][u], w); /* b^z, normalised below */
        mpq_add(den, den, w);
        mpq_mul(w, w, tr->v[l][u]);
        mpq_add(num, num, w);
      }
      if (rc)
        break;
      mpq_div(a, num, den); /* c_t */
      mpq_set(tr->ctx[l][t], a);
      for (int u = 0; u <= t; u++)
        mpq_div(tr->attn[l][t][u], tr->attn[l][t][u], den);
      for (int j = 0; j < D && !rc; j++) {
        rc = lsim__w(w, s->wo[l][j], l, LSIM_KV_O, j, t, ds, nd, eb);
        mpq_mul(w, w, a);
        mpq_add(tr->h[l + 1][t][j], tr->h[l][t][j], w);
      }
    }
  }
  int L = s->layers;
  for (int t = 0; t < T && !rc; t++)
    for (int c = 0; c < s->vocab && !rc; c++) {
      mpq_set_ui(tr->logits[t][c], 0, 1);
      for (int j = 0; j < D && !rc; j++) {
        rc = lsim__w(w, s->lm[j][c], -1, LSIM_KV_LM_HEAD, j * LSIM_KVW_MAXV + c,
                     t, ds, nd, eb);
        mpq_mul(w, w, tr->h[L][t][j]);
        mpq_add(tr->logits[t][c], tr->logits[t][c], w);
      }
    }
  mpq_clears(q, z, w, num, den, a, NULL);
  mpz_clear(p);
  return rc;
}

int lsim_kvw_kv_equal(const lsim_kvw_trace *a, const lsim_kvw_trace *b) {
  if (a->layers != b->layers || a->tokens != b->tokens)
    return 0;
  for (int l = 0; l < a->layers; l++)
    for (int t = 0; t < a->tokens; t++)
      if (!mpq_equal(a->k[l][t], b->k[l][t]) ||
          !mpq_equal(a->v[l][t], b->v[l][t]))
        return 0;
  return 1;
}

int lsim_kvw_logits_equal(const lsim_kvw_trace *a, const lsim_kvw_trace *b) {
  if (a->tokens != b->tokens || a->vocab != b->vocab)
    return 0;
  for (int t = 0; t < a->tokens; t++)
    for (int c = 0; c < a->vocab; c++)
      if (!mpq_equal(a->logits[t][c], b->logits[t][c]))
        return 0;
  return 1;
}
