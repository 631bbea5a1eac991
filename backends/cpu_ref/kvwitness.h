/*
** kvwitness.h: the exact K/V dependency witness of article 0x08C/0x08D.
**
** A tiny decoder with a scalar attention head, evaluated in GMP rationals:
** per layer l and token t (causal, u <= t),
**
**     q_t = x_t . (Wq_l + m(t) dWq_l)      k_t, v_t likewise
**     z_u = q_t * k_u                       must be an integer (see below)
**     a_u = b^z_u / sum_{u' <= t} b^z_u'    the softmax over base b
**     c_t = sum_u a_u v_u
**     x'_t = x_t + c_t (Wo_l + m(t) dWo_l)  the residual update
**
** and prompt logits z = x_L (Wlm + m(t) dWlm).  m(t) is the delta's
** activation mask (NULL: always on), so the same code runs ordinary LoRA
** and aLoRA schedules.
**
** Exactness.  softmax(z ln b) = b^z / sum b^z, and for an integer z the
** power b^z is an exact rational, so the attention weights are exact.  The
** article's choice of natural logits [0, log 3] is exactly base b = 3 with
** integer logits [0, 1]: the weights [1/4, 3/4] are the same numbers.  A
** logit that is not an integer has an irrational weight; the witness then
** fails with E_KV_WITNESS_INEXACT instead of rounding.  No MLP (an MLP
** target is covered by the closure rule, not by this witness).
*/
#ifndef LSIM_KVWITNESS_H
#define LSIM_KVWITNESS_H

#include <gmp.h>

#include "../../engine/lsim.h"

#define LSIM_KVW_MAXD 4
#define LSIM_KVW_MAXL 4
#define LSIM_KVW_MAXT 8
#define LSIM_KVW_MAXV 4

/* Weights as rational strings (lsim_q_parse); NULL means 0. */
typedef struct lsim_kvw_spec {
  int d, layers, tokens, vocab; /* 1..MAX each */
  int exp_base;                 /* b >= 2 */
  const char *x[LSIM_KVW_MAXT][LSIM_KVW_MAXD]; /* layer-0 input rows */
  const char *wq[LSIM_KVW_MAXL][LSIM_KVW_MAXD]; /* [d] -> scalar */
  const char *wk[LSIM_KVW_MAXL][LSIM_KVW_MAXD];
  const char *wv[LSIM_KVW_MAXL][LSIM_KVW_MAXD];
  const char *wo[LSIM_KVW_MAXL][LSIM_KVW_MAXD]; /* scalar -> [d] */
  const char *lm[LSIM_KVW_MAXD][LSIM_KVW_MAXV]; /* [d] -> [vocab] */
} lsim_kvw_spec;

/* One adapter delta on one projection (enum lsim_kv_proj of kv.h: Q, K,
** V, O per layer; LM_HEAD with layer -1). */
typedef struct lsim_kvw_delta {
  int layer, proj;
  /* Q/K/V/O: v[j] for input (or output) coordinate j; LM_HEAD:
  ** v[j * LSIM_KVW_MAXV + c] for hidden coordinate j and vocab entry c */
  const char *v[LSIM_KVW_MAXD * LSIM_KVW_MAXV];
  const uint8_t *mask; /* [tokens]; NULL: active everywhere */
} lsim_kvw_delta;

typedef struct lsim_kvw_trace {
  int layers, tokens, d, vocab;
  mpq_t k[LSIM_KVW_MAXL][LSIM_KVW_MAXT];
  mpq_t v[LSIM_KVW_MAXL][LSIM_KVW_MAXT];
  mpq_t h[LSIM_KVW_MAXL + 1][LSIM_KVW_MAXT][LSIM_KVW_MAXD]; /* h[0] = x */
  mpq_t logits[LSIM_KVW_MAXT][LSIM_KVW_MAXV];
  /* the attention of layer l at token t over tokens u <= t (zero past t):
  ** the query, the integer logit z_u, the exact weight a_u and c_t */
  mpq_t q[LSIM_KVW_MAXL][LSIM_KVW_MAXT];
  mpq_t score[LSIM_KVW_MAXL][LSIM_KVW_MAXT][LSIM_KVW_MAXT];
  mpq_t attn[LSIM_KVW_MAXL][LSIM_KVW_MAXT][LSIM_KVW_MAXT];
  mpq_t ctx[LSIM_KVW_MAXL][LSIM_KVW_MAXT];
  int init; /* private */
} lsim_kvw_trace;

/* Run the witness; tr is initialised here (lsim_kvw_trace_clear after,
** also on failure).  E_KV_WITNESS_SHAPE, E_KV_WITNESS_BASE,
** E_KV_WITNESS_INEXACT, E_RATIONAL. */
lsim_err lsim_kvw_run(const lsim_kvw_spec *s, const lsim_kvw_delta *deltas,
                      int ndeltas, lsim_kvw_trace *tr, lsim_errbuf *eb);
void lsim_kvw_trace_clear(lsim_kvw_trace *tr);

/* 1 when every K/V row (and, with logits, every logit) is equal. */
int lsim_kvw_kv_equal(const lsim_kvw_trace *a, const lsim_kvw_trace *b);
int lsim_kvw_logits_equal(const lsim_kvw_trace *a, const lsim_kvw_trace *b);

#endif /* LSIM_KVWITNESS_H */
