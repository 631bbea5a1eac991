/*
** kv.c: dependency closure, activation schedules, interval execution
** digests, semantic block keys, reuse checks and switch cases (kv.h).
**
** Design notes.
**
**   K1  Safe direction.  Every decision here may reject equal rows when it
**       lacks a proof (unsupported graph, a target it has no rule for); it
**       never accepts rows whose producer graph it cannot follow.
**   K2  The serial pre-norm closure: a K or V target in layer l changes K/V
**       from layer l on; a Q, O or MLP target in layer l changes the hidden
**       rows that layer l+1 projects, so K/V from layer l+1 on (none when l
**       is the last layer); any layer target changes the final hidden
**       state; an LM-head target changes only the prompt logits.
**   K3  One digest record per purpose, each opening with its schema name,
**       fields in a fixed order with a one-byte tag each (docs/PREFIX.md
**       lists them).  The block key itself is lsim_id_prefix() of
**       identity.c, so it shares that record's canonical encoding.
**   K4  Ownership fields (lsim_kv_owner) are never read here.
*/
#include "kv.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ names */

static const char *const lsim__proj_names[LSIM_KV_NPROJ] = {
    "q_proj", "k_proj", "v_proj", "o_proj", "mlp", "lm_head"};

const char *lsim_kv_proj_name(int p) {
  return p >= 0 && p < LSIM_KV_NPROJ ? lsim__proj_names[p] : NULL;
}

const char *lsim_kv_key_mode_name(int m) {
  switch (m) {
  case LSIM_KV_KEYS_OBLIVIOUS: return "oblivious";
  case LSIM_KV_KEYS_RAW: return "raw_adapter";
  case LSIM_KV_KEYS_SEMANTIC: return "semantic";
  case LSIM_KV_KEYS_ALORA: return "semantic_alora";
  }
  return NULL;
}

const char *lsim_kv_action_name(int a) {
  switch (a) {
  case LSIM_KV_ACT_RECOMPUTE: return "recompute";
  case LSIM_KV_ACT_FORK_BASE: return "fork_base";
  case LSIM_KV_ACT_RETURN_CLEAN: return "return_clean";
  case LSIM_KV_ACT_SHARE_BASE: return "share_base";
  case LSIM_KV_ACT_RECOMPUTE_LOGITS: return "recompute_logits";
  case LSIM_KV_ACT_REUSE: return "reuse";
  }
  return NULL;
}

/* ------------------------------------------------------------ records */

/* A small fixed-capacity record: schema text, then tagged fields. */
typedef struct lsim__rec {
  uint8_t b[256];
  size_t n;
} lsim__rec;

static void lsim__put(lsim__rec *r, const void *p, size_t n) {
  /* every record below is far smaller than the buffer */
  memcpy(r->b + r->n, p, n);
  r->n += n;
}

static void lsim__rec_start(lsim__rec *r, const char *schema) {
  r->n = 0;
  uint8_t len = (uint8_t)strlen(schema);
  lsim__put(r, "s", 1);
  lsim__put(r, &len, 1);
  lsim__put(r, schema, len);
}

static void lsim__rec_i64(lsim__rec *r, int64_t v) {
  uint8_t b[9] = {'i'};
  for (int i = 0; i < 8; i++)
    b[1 + i] = (uint8_t)((uint64_t)v >> (56 - 8 * i));
  lsim__put(r, b, 9);
}

static void lsim__rec_dig(lsim__rec *r, const lsim_digest *d) {
  lsim__put(r, "d", 1);
  lsim__put(r, d->b, LSIM_DIGEST_LEN);
}

static lsim_err lsim__rec_hash(const lsim__rec *r, lsim_digest *out,
                               lsim_errbuf *eb) {
  return lsim_sha256(r->b, r->n, out, eb);
}

/* ------------------------------------------------------------ closure */

static lsim_err lsim__graph_check(const lsim_kv_graph *g, lsim_errbuf *eb) {
  if (!g)
    return lsim_fail(eb, LSIM_E_USAGE, "kv manifest: graph is null");
  if (lsim_digest_is_zero(&g->revision))
    return lsim_fail(eb, LSIM_E_KV_GRAPH_REV, "graph.revision: digest is "
                     "missing (all zero)");
  if (g->arch < LSIM_KV_ARCH_SERIAL || g->arch > LSIM_KV_ARCH_SSM)
    return lsim_fail(eb, LSIM_E_KV_GRAPH_ARCH, "graph.arch: %d is not a known "
                     "architecture", g->arch);
  if (g->layers < 1 || g->layers > LSIM_KV_MAX_LAYERS)
    return lsim_fail(eb, LSIM_E_KV_GRAPH_LAYERS, "graph.layers: %d is outside "
                     "1..%d", g->layers, LSIM_KV_MAX_LAYERS);
  return 0;
}

static lsim_err lsim__targets_check(const lsim_kv_graph *g,
                                    const lsim_kv_target *t, int n,
                                    lsim_errbuf *eb) {
  if (n < 1 || !t)
    return lsim_fail(eb, LSIM_E_KV_NO_TARGETS, "adapter.targets: an adapter "
                     "needs at least one target");
  for (int i = 0; i < n; i++) {
    if (!lsim_kv_proj_name(t[i].proj))
      return lsim_fail(eb, LSIM_E_KV_TARGET_PROJ, "adapter.targets[%d].proj: "
                       "%d is not a known projection", i, t[i].proj);
    int lm = t[i].proj == LSIM_KV_LM_HEAD;
    if (lm ? t[i].layer != -1 : (t[i].layer < 0 || t[i].layer >= g->layers))
      return lsim_fail(eb, LSIM_E_KV_TARGET_LAYER, "adapter.targets[%d].layer:"
                       " %d is outside %s", i, t[i].layer,
                       lm ? "-1 (lm_head is model-level)" : "the graph");
    for (int j = 0; j < i; j++)
      if (t[j].proj == t[i].proj && t[j].layer == t[i].layer)
        return lsim_fail(eb, LSIM_E_KV_TARGET_DUP, "adapter.targets[%d]: "
                         "%s of layer %d is listed twice", i,
                         lsim_kv_proj_name(t[i].proj), t[i].layer);
  }
  return 0;
}

lsim_err lsim_kv_closure_of(const lsim_kv_graph *g, const lsim_kv_target *t,
                            int n, lsim_kv_closure *out, lsim_errbuf *eb) {
  if (!out)
    return lsim_fail(eb, LSIM_E_USAGE, "kv closure: output is null");
  memset(out, 0, sizeof *out);
  lsim_err rc = lsim__graph_check(g, eb);
  if (!rc)
    rc = lsim__targets_check(g, t, n, eb);
  if (rc)
    return rc;
  out->kv_first_layer = g->layers;
  if (g->arch != LSIM_KV_ARCH_SERIAL) {
    /* K1: no rule, no proof */
    out->kv_changed = out->kv_direct = out->hidden_changed = 1;
    out->logits_changed = 1;
    out->kv_first_layer = 0;
    return 0;
  }
  out->proven = 1;
  for (int i = 0; i < n; i++) {
    int l = t[i].layer, first;
    switch (t[i].proj) {
    case LSIM_KV_LM_HEAD: out->logits_changed = 1; continue;
    case LSIM_KV_K:
    case LSIM_KV_V:
      out->kv_direct = 1;
      first = l;
      break;
    default: first = l + 1; break; /* Q, O, MLP: downstream layers */
    }
    out->hidden_changed = 1;
    if (first < out->kv_first_layer)
      out->kv_first_layer = first;
  }
  out->kv_changed = out->kv_first_layer < g->layers;
  out->logits_changed |= out->hidden_changed;
  return 0;
}

lsim_err lsim_kv_reuse_from_base(const lsim_kv_closure *c, int obj,
                                 lsim_errbuf *eb) {
  if (!c)
    return lsim_fail(eb, LSIM_E_USAGE, "kv reuse: closure is null");
  if (!c->proven)
    return lsim_fail(eb, LSIM_E_KV_UNPROVEN, "no dependency rule for this "
                     "architecture: reuse is not proven, recompute");
  switch (obj) {
  case LSIM_KV_OBJ_KV:
    if (c->kv_direct)
      return lsim_fail(eb, LSIM_E_KV_REUSE_KV_TARGET, "adapter targets a K/V "
                       "projection of layer %d", c->kv_first_layer);
    if (c->kv_changed)
      return lsim_fail(eb, LSIM_E_KV_REUSE_DOWNSTREAM, "adapter changes the "
                       "hidden rows that layer %d projects into K/V",
                       c->kv_first_layer);
    return 0;
  case LSIM_KV_OBJ_HIDDEN:
    if (c->hidden_changed)
      return lsim_fail(eb, LSIM_E_KV_REUSE_HIDDEN, "adapter changes the final "
                       "hidden state");
    return 0;
  case LSIM_KV_OBJ_LOGITS:
    if (c->hidden_changed)
      return lsim_fail(eb, LSIM_E_KV_REUSE_HIDDEN, "adapter changes the final "
                       "hidden state, so the prompt logits too");
    if (c->logits_changed)
      return lsim_fail(eb, LSIM_E_KV_REUSE_LOGITS, "adapter changes the LM "
                       "head: K/V equal, prompt logits not");
    return 0;
  }
  return lsim_fail(eb, LSIM_E_USAGE, "kv reuse: unknown object %d", obj);
}

/* ------------------------------------------------------------ activation */

int64_t lsim_kv_last_occurrence(const int64_t *tok, int64_t n,
                                const int64_t *inv, int64_t m) {
  if (!tok || !inv || m < 1 || m > n)
    return -1;
  for (int64_t s = n - m; s >= 0; s--) {
    int64_t k = 0;
    while (k < m && tok[s + k] == inv[k])
      k++;
    if (k == m)
      return s;
  }
  return -1;
}

static int lsim__adapted(const lsim_kv_adapter *a) {
  return a && a->kind != LSIM_KV_BASE;
}

static lsim_err lsim__adapter_check(const lsim_kv_manifest *m,
                                    lsim_errbuf *eb) {
  const lsim_kv_adapter *a = m->adapter;
  if (!a)
    return 0;
  if (a->kind < LSIM_KV_BASE || a->kind > LSIM_KV_ALORA)
    return lsim_fail(eb, LSIM_E_KV_ADAPTER_KIND, "adapter.kind: %d is not "
                     "base, lora or alora", a->kind);
  if (a->kind == LSIM_KV_BASE) {
    if (!lsim_digest_is_zero(&a->semantic) ||
        !lsim_digest_is_zero(&a->artifact) || a->ntargets || a->ninvocation)
      return lsim_fail(eb, LSIM_E_KV_BASE_FIELDS, "adapter: a base request "
                       "carries adapter fields (semantic, artifact, targets "
                       "or invocation)");
    return 0;
  }
  if (lsim_digest_is_zero(&a->semantic))
    return lsim_fail(eb, LSIM_E_KV_SEMANTIC, "adapter.semantic: digest is "
                     "missing (all zero)");
  if (lsim_digest_is_zero(&a->artifact))
    return lsim_fail(eb, LSIM_E_KV_REVISION, "adapter.artifact: the content "
                     "revision is missing; an alias alone does not name the "
                     "operators");
  lsim_kv_closure c;
  lsim_err rc = lsim_kv_closure_of(m->graph, a->targets, a->ntargets, &c, eb);
  if (rc)
    return rc;
  if (a->kind == LSIM_KV_LORA) {
    if (a->ninvocation || a->invocation)
      return lsim_fail(eb, LSIM_E_KV_LORA_INVOCATION, "adapter.invocation: "
                       "an ordinary LoRA is always on and has no invocation");
    return 0;
  }
  if (a->merged)
    return lsim_fail(eb, LSIM_E_KV_MERGED, "adapter.merged: an aLoRA is "
                     "position-gated and cannot run as merged weights");
  if (a->beam)
    return lsim_fail(eb, LSIM_E_KV_BEAM, "adapter.beam: beam search is not "
                     "supported with an aLoRA");
  if (a->ninvocation < 1 || !a->invocation)
    return lsim_fail(eb, LSIM_E_KV_INVOCATION_EMPTY, "adapter.invocation: an "
                     "aLoRA needs its invocation token ids");
  for (int i = 0; i < a->ninvocation; i++)
    if (a->invocation[i] < 0)
      return lsim_fail(eb, LSIM_E_KV_INVOCATION_TOKEN, "adapter.invocation[%d]"
                       ": negative token id %lld", i,
                       (long long)a->invocation[i]);
  if (a->offset_mode == LSIM_KV_OFFSET_DERIVE) {
    if (a->explicit_start != -1)
      return lsim_fail(eb, LSIM_E_KV_OFFSET_MODE, "adapter.explicit_start: "
                       "%lld given while the offset is derived from tokens",
                       (long long)a->explicit_start);
    if (m->embeds_only)
      return lsim_fail(eb, LSIM_E_KV_EMBEDS_ONLY, "manifest.embeds_only: no "
                       "token ids to find the invocation in; give a verified "
                       "explicit offset or reject");
  } else if (a->offset_mode == LSIM_KV_OFFSET_EXPLICIT) {
    if (a->explicit_start < 0 || a->explicit_start >= m->ntokens)
      return lsim_fail(eb, LSIM_E_KV_OFFSET, "adapter.explicit_start: %lld is "
                       "outside 0..%lld", (long long)a->explicit_start,
                       (long long)m->ntokens - 1);
  } else {
    return lsim_fail(eb, LSIM_E_KV_OFFSET_MODE, "adapter.offset_mode: %d is "
                     "not derive or explicit", a->offset_mode);
  }
  return 0;
}

static lsim_err lsim__manifest_check(const lsim_kv_manifest *m,
                                     lsim_errbuf *eb) {
  if (!m)
    return lsim_fail(eb, LSIM_E_USAGE, "kv manifest: null");
  if (lsim_digest_is_zero(&m->base_abi))
    return lsim_fail(eb, LSIM_E_KV_BASE_ABI, "manifest.base_abi: digest is "
                     "missing (all zero)");
  if (lsim_digest_is_zero(&m->cache_abi))
    return lsim_fail(eb, LSIM_E_KV_CACHE_ABI, "manifest.cache_abi: digest is "
                     "missing (all zero)");
  lsim_err rc = lsim__graph_check(m->graph, eb);
  if (rc)
    return rc;
  if (lsim_digest_is_zero(&m->side_inputs))
    return lsim_fail(eb, LSIM_E_KV_SIDE_INPUTS, "manifest.side_inputs: digest "
                     "is missing (use the fixed no-side-input digest)");
  if (lsim_digest_is_zero(&m->isolation))
    return lsim_fail(eb, LSIM_E_KV_ISOLATION, "manifest.isolation: namespace "
                     "salt is missing");
  if (m->block_tokens < 1 || m->block_tokens > (1 << 20))
    return lsim_fail(eb, LSIM_E_KV_BLOCK_TOKENS, "manifest.block_tokens: %lld "
                     "is outside 1..%d", (long long)m->block_tokens, 1 << 20);
  if (m->position_base != 0)
    return lsim_fail(eb, LSIM_E_KV_POSITION, "manifest.position_base: %lld; "
                     "prefix keys cover positions from 0",
                     (long long)m->position_base);
  if (m->ntokens < 1 || (!m->embeds_only && !m->tokens) ||
      (m->embeds_only && m->tokens))
    return lsim_fail(eb, LSIM_E_KV_TOKENS, "manifest.tokens: %lld rows, token "
                     "ids %s%s", (long long)m->ntokens,
                     m->tokens ? "given" : "absent",
                     m->embeds_only ? " with embeds_only" : "");
  for (int64_t i = 0; m->tokens && i < m->ntokens; i++)
    if (m->tokens[i] < 0)
      return lsim_fail(eb, LSIM_E_KV_TOKEN_ID, "manifest.tokens[%lld]: "
                       "negative token id %lld", (long long)i,
                       (long long)m->tokens[i]);
  return lsim__adapter_check(m, eb);
}

/* Activation start of a checked manifest (ntokens: never active). */
static lsim_err lsim__start(const lsim_kv_manifest *m, int64_t *start,
                            lsim_errbuf *eb) {
  const lsim_kv_adapter *a = m->adapter;
  *start = m->ntokens;
  if (!lsim__adapted(a))
    return 0;
  if (a->kind == LSIM_KV_LORA) {
    *start = 0;
    return 0;
  }
  if (a->offset_mode == LSIM_KV_OFFSET_EXPLICIT) {
    *start = a->explicit_start;
    return 0;
  }
  int64_t s = lsim_kv_last_occurrence(m->tokens, m->ntokens, a->invocation,
                                      a->ninvocation);
  if (s < 0) {
    if (a->require_specialization)
      return lsim_fail(eb, LSIM_E_KV_INVOCATION_ABSENT, "manifest.tokens: the "
                       "invocation sequence does not occur and the product "
                       "requires the adapter; not served as base");
    return 0; /* PEFT's row-level fallback: base execution throughout */
  }
  *start = s;
  return 0;
}

lsim_err lsim_kv_activation(const lsim_kv_manifest *m, int64_t *start,
                            uint8_t *mask, lsim_errbuf *eb) {
  if (!start)
    return lsim_fail(eb, LSIM_E_USAGE, "kv activation: output is null");
  *start = 0;
  lsim_err rc = lsim__manifest_check(m, eb);
  if (!rc)
    rc = lsim__start(m, start, eb);
  if (rc) {
    *start = 0;
    return rc;
  }
  for (int64_t i = 0; mask && i < m->ntokens; i++)
    mask[i] = i >= *start;
  return 0;
}

/* ------------------------------------------------------------ digests */

static lsim_err lsim__base_digest(const lsim_kv_manifest *m, lsim_digest *out,
                                  lsim_errbuf *eb) {
  lsim__rec r;
  lsim__rec_start(&r, "lorasim.kv.base_exec.v1");
  lsim__rec_dig(&r, &m->base_abi);
  lsim__rec_dig(&r, &m->graph->revision);
  lsim__rec_i64(&r, m->graph->arch);
  lsim__rec_i64(&r, m->graph->layers);
  return lsim__rec_hash(&r, out, eb);
}

lsim_err lsim_kv_base_digest(const lsim_kv_manifest *m, lsim_digest *out,
                             lsim_errbuf *eb) {
  if (!out)
    return lsim_fail(eb, LSIM_E_USAGE, "kv base digest: output is null");
  memset(out, 0, sizeof *out);
  lsim_err rc = lsim__manifest_check(m, eb);
  if (rc)
    return rc;
  return lsim__base_digest(m, out, eb);
}

/*
** The execution digest of a checked manifest over [s,e) for object `obj`
** (KV or LOGITS), given its base digest and activation start.
*/
static lsim_err lsim__exec(const lsim_kv_manifest *m, int mode, int obj,
                           int64_t s, int64_t e, int64_t start,
                           const lsim_digest *base, lsim_digest *out,
                           lsim_errbuf *eb) {
  (void)s;
  const lsim_kv_adapter *a = m->adapter;
  lsim__rec r;
  if (mode == LSIM_KV_KEYS_OBLIVIOUS || !lsim__adapted(a)) {
    *out = *base;
    return 0;
  }
  if (mode == LSIM_KV_KEYS_RAW) {
    /* conservative, not oblivious: the requested id and its activation
    ** schedule (an aLoRA's start), never normalized to base */
    lsim__rec_start(&r, "lorasim.kv.raw_exec.v1");
    lsim__rec_dig(&r, base);
    lsim__rec_dig(&r, &a->raw_id);
    lsim__rec_i64(&r, a->kind);
    lsim__rec_i64(&r, start);
    return lsim__rec_hash(&r, out, eb);
  }
  lsim_kv_closure c;
  lsim_err rc = lsim_kv_closure_of(m->graph, a->targets, a->ntargets, &c, eb);
  if (rc)
    return rc;
  int changes = obj == LSIM_KV_OBJ_LOGITS ? c.logits_changed : c.kv_changed;
  /* K1/K2: an adapter proven not to change this object keys as base */
  int active = start < m->ntokens; /* the invocation may be absent */
  if (mode == LSIM_KV_KEYS_ALORA && a->kind == LSIM_KV_ALORA && e <= start)
    active = 0; /* 0x08F: wholly before activation, base execution */
  if ((c.proven && !changes) || !active) {
    *out = *base;
    return 0;
  }
  lsim__rec_start(&r, "lorasim.kv.adapted_exec.v1");
  lsim__rec_dig(&r, base);
  lsim__rec_dig(&r, &a->semantic);
  lsim__rec_i64(&r, a->kind);
  lsim__rec_i64(&r, start);
  return lsim__rec_hash(&r, out, eb);
}

static int lsim__mode_ok(int mode) {
  return mode >= LSIM_KV_KEYS_OBLIVIOUS && mode <= LSIM_KV_KEYS_ALORA;
}

lsim_err lsim_kv_interval_digest(const lsim_kv_manifest *m, int mode,
                                 int64_t s, int64_t e, lsim_digest *out,
                                 lsim_errbuf *eb) {
  if (!out)
    return lsim_fail(eb, LSIM_E_USAGE, "kv interval digest: output is null");
  memset(out, 0, sizeof *out);
  if (!lsim__mode_ok(mode))
    return lsim_fail(eb, LSIM_E_USAGE, "kv interval digest: key mode %d",
                     mode);
  lsim_err rc = lsim__manifest_check(m, eb);
  if (rc)
    return rc;
  if (s < 0 || e <= s || e > m->ntokens)
    return lsim_fail(eb, LSIM_E_USAGE, "kv interval [%lld,%lld) outside "
                     "0..%lld", (long long)s, (long long)e,
                     (long long)m->ntokens);
  int64_t start;
  lsim_digest base;
  if ((rc = lsim__start(m, &start, eb)) || (rc = lsim__base_digest(m, &base, eb)))
    return rc;
  rc = lsim__exec(m, mode, LSIM_KV_OBJ_KV, s, e, start, &base, out, eb);
  if (rc)
    memset(out, 0, sizeof *out);
  return rc;
}

void lsim_kv_keys_release(lsim_kv_keys *k) {
  if (!k)
    return;
  free(k->key);
  free(k->logit);
  memset(k, 0, sizeof *k);
}

lsim_err lsim_kv_keys_derive(const lsim_kv_manifest *m, int mode,
                             lsim_kv_keys *out, lsim_errbuf *eb) {
  if (!out)
    return lsim_fail(eb, LSIM_E_USAGE, "kv keys: output is null");
  memset(out, 0, sizeof *out);
  if (!lsim__mode_ok(mode))
    return lsim_fail(eb, LSIM_E_USAGE, "kv keys: key mode %d", mode);
  lsim_err rc = lsim__manifest_check(m, eb);
  if (rc)
    return rc;
  int64_t start;
  lsim_digest base;
  if ((rc = lsim__start(m, &start, eb)) || (rc = lsim__base_digest(m, &base, eb)))
    return rc;
  int64_t B = m->block_tokens;
  int64_t nb = (m->ntokens + B - 1) / B;
  out->key = calloc((size_t)nb, sizeof *out->key);
  out->logit = calloc((size_t)nb, sizeof *out->logit);
  if (!out->key || !out->logit) {
    lsim_kv_keys_release(out);
    return lsim_fail(eb, LSIM_E_NOMEM, "kv keys: %lld blocks", (long long)nb);
  }
  out->nblocks = nb;
  out->full = m->ntokens / B;
  out->block_tokens = B;
  out->ntokens = m->ntokens;
  lsim_digest parent = LSIM_DIGEST_INIT;
  for (int64_t i = 0; i < nb && !rc; i++) {
    int64_t s = i * B, e = s + B < m->ntokens ? s + B : m->ntokens;
    lsim_digest ekv, elog, iabi;
    lsim_prefix_in p;
    lsim__rec r;
    rc = lsim__exec(m, mode, LSIM_KV_OBJ_KV, s, e, start, &base, &ekv, eb);
    if (!rc)
      rc = lsim__exec(m, mode, LSIM_KV_OBJ_LOGITS, s, e, start, &base, &elog,
                      eb);
    if (rc)
      break;
    /* the interval cache ABI: cache manifest + execution + the prefix
    ** before this block (its key) + the block's position range */
    lsim__rec_start(&r, "lorasim.kv.interval_abi.v1");
    lsim__rec_dig(&r, &m->cache_abi);
    lsim__rec_dig(&r, &ekv);
    lsim__rec_dig(&r, &parent);
    lsim__rec_i64(&r, s);
    lsim__rec_i64(&r, e);
    if ((rc = lsim__rec_hash(&r, &iabi, eb)))
      break;
    p.cache_abi = iabi;
    rc = lsim_id_tokens(m->embeds_only ? NULL : m->tokens + s,
                        m->embeds_only ? 0 : (size_t)(e - s), &p.prompt_tokens,
                        eb);
    p.side_inputs = m->side_inputs;
    p.isolation_salt = m->isolation;
    if (!rc)
      rc = lsim_id_prefix(&p, &out->key[i], eb);
    if (rc)
      break;
    lsim__rec_start(&r, "lorasim.kv.prompt_logits.v1");
    lsim__rec_dig(&r, &out->key[i]);
    lsim__rec_dig(&r, &elog);
    rc = lsim__rec_hash(&r, &out->logit[i], eb);
    parent = out->key[i];
  }
  if (rc)
    lsim_kv_keys_release(out);
  return rc;
}

int64_t lsim_kv_common_tokens(const lsim_kv_keys *a, const lsim_kv_keys *b) {
  if (!a || !b || a->block_tokens != b->block_tokens)
    return 0;
  int64_t n = a->full < b->full ? a->full : b->full, i = 0;
  while (i < n && lsim_digest_eq(&a->key[i], &b->key[i]))
    i++;
  return i * a->block_tokens;
}

/* ------------------------------------------------------------ schema */

unsigned lsim_kv_key_schema(int mode) {
  switch (mode) {
  case LSIM_KV_KEYS_OBLIVIOUS: return LSIM_KV_F_REQUIRED & ~LSIM_KV_F_EXEC;
  case LSIM_KV_KEYS_RAW: return LSIM_KV_F_REQUIRED | LSIM_KV_F_RAW_ADAPTER;
  case LSIM_KV_KEYS_SEMANTIC:
  case LSIM_KV_KEYS_ALORA: return LSIM_KV_F_REQUIRED;
  }
  return 0;
}

lsim_err lsim_kv_key_schema_check(unsigned f, int mode, lsim_errbuf *eb) {
  static const struct {
    unsigned bit;
    lsim_err code;
    const char *what;
  } own[] = {
      {LSIM_KV_F_REQUEST_ID, LSIM_E_KV_KEY_REQUEST_ID, "the request id"},
      {LSIM_KV_F_SLOT, LSIM_E_KV_KEY_SLOT, "the adapter slot index"},
      {LSIM_KV_F_SLOT_GEN, LSIM_E_KV_KEY_SLOT_GEN, "the slot generation"},
      {LSIM_KV_F_POINTER_GEN, LSIM_E_KV_KEY_POINTER_GEN,
       "the pointer-table generation"},
      {LSIM_KV_F_BLOCK_IDS, LSIM_E_KV_KEY_BLOCK_IDS, "physical block ids"},
      {LSIM_KV_F_SAMPLING, LSIM_E_KV_KEY_SAMPLING, "the sampling policy"}},
    need[] = {
      {LSIM_KV_F_EXEC, LSIM_E_KV_KEY_NO_EXEC, "the interval execution digest"},
      {LSIM_KV_F_TOKENS, LSIM_E_KV_KEY_NO_TOKENS, "the token ids"},
      {LSIM_KV_F_CACHE_ABI, LSIM_E_KV_KEY_NO_CACHE_ABI, "the cache ABI"},
      {LSIM_KV_F_SIDE, LSIM_E_KV_KEY_NO_SIDE, "the side inputs"},
      {LSIM_KV_F_NAMESPACE, LSIM_E_KV_KEY_NO_NAMESPACE,
       "the isolation namespace"},
      {LSIM_KV_F_GRAPH, LSIM_E_KV_KEY_NO_GRAPH, "the graph revision"}};
  if (f & ~LSIM_KV_F_ALL)
    return lsim_fail(eb, LSIM_E_KV_KEY_UNKNOWN, "key schema: unknown field "
                     "bits 0x%x", f & ~LSIM_KV_F_ALL);
  for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
    if (f & own[i].bit)
      return lsim_fail(eb, own[i].code, "key schema: %s is an ownership "
                       "field, not semantic K/V identity", own[i].what);
  if ((f & LSIM_KV_F_RAW_ADAPTER) && mode != LSIM_KV_KEYS_RAW)
    return lsim_fail(eb, LSIM_E_KV_KEY_RAW_ADAPTER, "key schema: the raw "
                     "adapter id in every interval destroys base-prefix "
                     "sharing; use the interval execution digest");
  for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
    if (!(f & need[i].bit))
      return lsim_fail(eb, need[i].code, "key schema: %s is missing",
                       need[i].what);
  return 0;
}

/* ------------------------------------------------------------ reuse */

/* The effective execution of a checked manifest over rows [0,rows) for an
** object: 0 base, 1 adapted (semantic, start). */
static int lsim__effective(const lsim_kv_manifest *m, const lsim_kv_closure *c,
                           int obj, int64_t start, int64_t rows) {
  if (!lsim__adapted(m->adapter) || start >= rows)
    return 0;
  if (!c->proven)
    return 1;
  switch (obj) {
  case LSIM_KV_OBJ_KV: return c->kv_changed;
  case LSIM_KV_OBJ_HIDDEN: return c->hidden_changed;
  default: return c->logits_changed;
  }
}

static lsim_err lsim__why(const lsim_kv_manifest *m, const lsim_kv_closure *c,
                          int obj, int64_t start, const char *side,
                          lsim_errbuf *eb) {
  if (m->adapter->kind == LSIM_KV_ALORA && start > 0)
    return lsim_fail(eb, LSIM_E_KV_REUSE_TAINTED, "%s rows from %lld ran "
                     "under its aLoRA: adapter-specific, never relabelled",
                     side, (long long)start);
  lsim_err rc = lsim_kv_reuse_from_base(c, obj, eb);
  if (rc)
    return rc;
  return LSIM_BUG(eb, "reuse mismatch without a reason");
}

lsim_err lsim_kv_reuse_check(const lsim_kv_manifest *p,
                             const lsim_kv_manifest *q, int obj, int64_t rows,
                             lsim_errbuf *eb) {
  int64_t sp, sq;
  lsim_err rc = lsim_kv_activation(p, &sp, NULL, eb);
  if (!rc)
    rc = lsim_kv_activation(q, &sq, NULL, eb);
  if (rc)
    return rc;
  if (obj < LSIM_KV_OBJ_KV || obj > LSIM_KV_OBJ_LOGITS)
    return lsim_fail(eb, LSIM_E_USAGE, "kv reuse: unknown object %d", obj);
  if (rows < 0 || rows > p->ntokens || rows > q->ntokens)
    return lsim_fail(eb, LSIM_E_KV_TOKENS, "kv reuse: %lld rows but the "
                     "prompts hold %lld and %lld", (long long)rows,
                     (long long)p->ntokens, (long long)q->ntokens);
  if (!lsim_digest_eq(&p->isolation, &q->isolation))
    return lsim_fail(eb, LSIM_E_KV_REUSE_NAMESPACE, "producer and consumer "
                     "are in different isolation namespaces");
  if (!lsim_digest_eq(&p->base_abi, &q->base_abi))
    return lsim_fail(eb, LSIM_E_KV_REUSE_BASE, "base execution ABIs differ");
  if (!lsim_digest_eq(&p->graph->revision, &q->graph->revision) ||
      p->graph->arch != q->graph->arch || p->graph->layers != q->graph->layers)
    return lsim_fail(eb, LSIM_E_KV_REUSE_GRAPH, "dependency graph revisions "
                     "differ");
  if (!lsim_digest_eq(&p->cache_abi, &q->cache_abi))
    return lsim_fail(eb, LSIM_E_KV_REUSE_CACHE_ABI, "cache ABIs differ "
                     "(representation, layout or position contract)");
  if (!lsim_digest_eq(&p->side_inputs, &q->side_inputs))
    return lsim_fail(eb, LSIM_E_KV_REUSE_SIDE, "side inputs differ");
  if (p->embeds_only != q->embeds_only)
    return lsim_fail(eb, LSIM_E_KV_REUSE_TOKENS, "one side has token ids, "
                     "the other only embeddings");
  for (int64_t i = 0; p->tokens && i < rows; i++)
    if (p->tokens[i] != q->tokens[i])
      return lsim_fail(eb, LSIM_E_KV_REUSE_TOKENS, "token %lld differs (%lld "
                       "vs %lld)", (long long)i, (long long)p->tokens[i],
                       (long long)q->tokens[i]);
  lsim_kv_closure cp = {0}, cq = {0};
  const lsim_kv_adapter *ap = p->adapter, *aq = q->adapter;
  if (lsim__adapted(ap) &&
      (rc = lsim_kv_closure_of(p->graph, ap->targets, ap->ntargets, &cp, eb)))
    return rc;
  if (lsim__adapted(aq) &&
      (rc = lsim_kv_closure_of(q->graph, aq->targets, aq->ntargets, &cq, eb)))
    return rc;
  if ((lsim__adapted(ap) && !cp.proven) || (lsim__adapted(aq) && !cq.proven))
    return lsim_fail(eb, LSIM_E_KV_UNPROVEN, "no dependency rule for this "
                     "architecture: reuse is not proven, recompute");
  if (lsim__adapted(ap) && lsim__adapted(aq) &&
      lsim_digest_eq(&ap->raw_id, &aq->raw_id) &&
      !lsim_digest_eq(&ap->artifact, &aq->artifact))
    return lsim_fail(eb, LSIM_E_KV_REUSE_REVISION,
                     "same alias, different adapter content: the execution "
                     "digest and namespace advance with the revision");
  int ep = lsim__effective(p, &cp, obj, sp, rows);
  int eq = lsim__effective(q, &cq, obj, sq, rows);
  if (ep && eq) {
    if (!lsim_digest_eq(&ap->semantic, &aq->semantic) ||
        ap->kind != aq->kind) {
      if (ap->kind == LSIM_KV_ALORA && sp > 0)
        return lsim__why(p, &cp, obj, sp, "producer", eb);
      return lsim__why(q, &cq, obj, sq, "consumer", eb);
    }
    if (sp != sq)
      return lsim_fail(eb, LSIM_E_KV_REUSE_BOUNDARY, "same adapter, "
                       "activation at %lld vs %lld: rows from %lld differ",
                       (long long)sp, (long long)sq,
                       (long long)(sp < sq ? sp : sq));
  } else if (ep) {
    return lsim__why(p, &cp, obj, sp, "producer", eb);
  } else if (eq) {
    return lsim__why(q, &cq, obj, sq, "consumer", eb);
  }
  if (p->block_tokens != q->block_tokens || rows % p->block_tokens != 0)
    return lsim_fail(eb, LSIM_E_KV_REUSE_BLOCK, "%lld rows stop inside a "
                     "block of %lld tokens: reuse stops at the last full "
                     "common block", (long long)rows,
                     (long long)p->block_tokens);
  return 0;
}

/* ------------------------------------------------------------ switches */

lsim_err lsim_kv_switch_of(const lsim_kv_manifest *from,
                           const lsim_kv_manifest *to, lsim_kv_switch *out,
                           lsim_errbuf *eb) {
  if (!out)
    return lsim_fail(eb, LSIM_E_USAGE, "kv switch: output is null");
  memset(out, 0, sizeof *out);
  lsim_kv_keys a = LSIM_KV_KEYS_INIT, b = LSIM_KV_KEYS_INIT;
  lsim_err rc = lsim_kv_keys_derive(from, LSIM_KV_KEYS_ALORA, &a, eb);
  if (!rc)
    rc = lsim_kv_keys_derive(to, LSIM_KV_KEYS_ALORA, &b, eb);
  if (rc) {
    lsim_kv_keys_release(&a);
    return rc;
  }
  int64_t rows = lsim_kv_common_tokens(&a, &b);
  int logits = rows > 0;
  for (int64_t i = 0; i < rows / a.block_tokens; i++)
    if (!lsim_digest_eq(&a.logit[i], &b.logit[i]))
      logits = 0;
  int64_t n = to->ntokens;
  int fk = from->adapter ? from->adapter->kind : LSIM_KV_BASE;
  int tk = to->adapter ? to->adapter->kind : LSIM_KV_BASE;
  out->kv_rows = rows;
  out->logits_reusable = logits;
  if (rows == 0)
    out->action = LSIM_KV_ACT_RECOMPUTE;
  else if (rows == n && rows == from->ntokens)
    out->action = logits ? LSIM_KV_ACT_REUSE : LSIM_KV_ACT_RECOMPUTE_LOGITS;
  else if (fk == LSIM_KV_ALORA && tk == LSIM_KV_ALORA &&
           !lsim_digest_eq(&from->adapter->semantic, &to->adapter->semantic))
    out->action = LSIM_KV_ACT_SHARE_BASE;
  else if (fk == LSIM_KV_ALORA && tk == LSIM_KV_BASE)
    out->action = LSIM_KV_ACT_RETURN_CLEAN;
  else
    out->action = LSIM_KV_ACT_FORK_BASE;
  lsim_kv_keys_release(&a);
  lsim_kv_keys_release(&b);
  return 0;
}
