/*
** kv.h: adapter-aware KV compatibility (article 0x01E, 0x08..0x08M).
**
** Which cached objects of a prompt prefix may one request reuse from
** another?  The answer here has four parts, all pure functions (no I/O):
**
**   dependency closure   a model-graph description and an adapter's
**                        targets decide what the adapter can change: K/V
**                        rows (directly, or downstream of a Q/O/MLP target),
**                        the final hidden state, the prompt logits.  An
**                        architecture without a rule here is "unproven" and
**                        everything counts as changed (never the other way).
**   activation schedule  ordinary LoRA is active from position 0; activated
**                        LoRA (aLoRA) from the first token of the LAST exact
**                        occurrence of its invocation sequence; a missing
**                        invocation is rejected when the product requires
**                        specialization.
**   interval digest      E[s,e): SHA-256 of the effective operators over
**                        the interval.  Base execution, an aLoRA interval
**                        wholly before its activation and an adapter whose
**                        closure leaves K/V unchanged all normalize to the
**                        base digest; anything else names the adapter's
**                        semantic ABI and its activation start.
**   block keys           one key per block of `block_tokens` tokens, the
**                        project's prefix identity (identity.h,
**                        lsim_id_prefix) over an interval cache ABI that
**                        chains the previous block's key, so a key names
**                        the whole prefix up to its block end.
**
** What is never in a key: request id, adapter slot or slot generation,
** pointer-table generation, physical block ids, sampling policy (the
** lsim_kv_owner record carries them for receipts; no code path reads it
** into a digest).  The raw catalog adapter id enters only the RAW key mode
** kept for the comparison study.
**
** Every function returns 0 or a negative LSIM_E_KV_* code (err_kv.h) with
** a message in eb (may be NULL); outputs are left zeroed on failure.
*/
#ifndef LSIM_KV_H
#define LSIM_KV_H

#include "identity.h"
#include "lsim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------- model graph */

/* Projections of one decoder layer; LM_HEAD is model-level (layer -1). */
enum lsim_kv_proj {
  LSIM_KV_Q = 0,
  LSIM_KV_K,
  LSIM_KV_V,
  LSIM_KV_O,
  LSIM_KV_MLP,
  LSIM_KV_LM_HEAD,
  LSIM_KV_NPROJ
};
const char *lsim_kv_proj_name(int proj); /* "q_proj", ...; NULL unknown */

/* Architectures.  Only the serial pre-norm decoder has a proven closure
** rule; the others are accepted and answered conservatively. */
enum lsim_kv_arch {
  LSIM_KV_ARCH_SERIAL = 1,   /* attention then MLP, residual, pre-norm */
  LSIM_KV_ARCH_PARALLEL = 2, /* parallel attention/MLP block */
  LSIM_KV_ARCH_POSTNORM = 3,
  LSIM_KV_ARCH_SSM = 4       /* recurrent state-space layers */
};

#define LSIM_KV_MAX_LAYERS 4096

typedef struct lsim_kv_graph {
  int arch;             /* enum lsim_kv_arch */
  int layers;           /* 1..LSIM_KV_MAX_LAYERS */
  lsim_digest revision; /* graph revision (part of the manifest) */
} lsim_kv_graph;

typedef struct lsim_kv_target {
  int layer; /* 0..layers-1; -1 for LM_HEAD */
  int proj;  /* enum lsim_kv_proj */
} lsim_kv_target;

/* What an adapter can change.  kv_first_layer: the first layer whose K/V
** rows may differ (== layers when none). */
typedef struct lsim_kv_closure {
  int proven;         /* 0: unsupported graph, every flag below is set */
  int kv_changed;
  int kv_direct;      /* a K or V projection is a target */
  int kv_first_layer;
  int hidden_changed; /* final hidden state */
  int logits_changed; /* prompt logits */
} lsim_kv_closure;

/* Cached objects whose reuse is decided separately. */
enum lsim_kv_object { LSIM_KV_OBJ_KV = 1, LSIM_KV_OBJ_HIDDEN, LSIM_KV_OBJ_LOGITS };

lsim_err lsim_kv_closure_of(const lsim_kv_graph *g, const lsim_kv_target *t,
                            int n, lsim_kv_closure *out, lsim_errbuf *eb);
/* May `obj` computed under the base model be reused by this adapter?  0 yes;
** E_KV_UNPROVEN, E_KV_REUSE_KV_TARGET, E_KV_REUSE_DOWNSTREAM,
** E_KV_REUSE_HIDDEN or E_KV_REUSE_LOGITS with the reason otherwise. */
lsim_err lsim_kv_reuse_from_base(const lsim_kv_closure *c, int obj,
                                 lsim_errbuf *eb);

/* ---------------------------------------------------------- adapters */

enum lsim_kv_kind {
  LSIM_KV_BASE = 1,  /* no adapter */
  LSIM_KV_LORA = 2,  /* always on, from position 0 */
  LSIM_KV_ALORA = 3  /* activated at the invocation sequence */
};

enum lsim_kv_offset_mode {
  LSIM_KV_OFFSET_DERIVE = 1,  /* last exact occurrence in the token ids */
  LSIM_KV_OFFSET_EXPLICIT = 2 /* caller-verified start (inputs_embeds) */
};

typedef struct lsim_kv_adapter {
  int kind;                 /* enum lsim_kv_kind */
  lsim_digest semantic;     /* lsim_id_semantic(): base + artifact +
                               activation policy */
  lsim_digest artifact;     /* content revision (lsim_id_artifact) */
  lsim_digest raw_id;       /* the catalog alias as requested; only the
                               RAW key mode reads it */
  const lsim_kv_target *targets;
  int ntargets;
  const int64_t *invocation; /* aLoRA: the invocation token ids */
  int ninvocation;
  int require_specialization; /* reject a missing invocation */
  int offset_mode;            /* enum lsim_kv_offset_mode (aLoRA) */
  int64_t explicit_start;     /* EXPLICIT: 0..ntokens-1; else -1 */
  int merged;                 /* weights merged into the base (aLoRA: no) */
  int beam;                   /* beam search requested (aLoRA: no) */
} lsim_kv_adapter;

/* Ownership and future-policy fields: receipts keep them, keys never do. */
typedef struct lsim_kv_owner {
  int64_t request_id, slot, slot_generation, pointer_generation;
  lsim_digest sampling;
} lsim_kv_owner;

/* The frozen request manifest.  Pointers are borrowed for the call. */
typedef struct lsim_kv_manifest {
  lsim_digest base_abi;  /* lsim_id_base_abi() */
  lsim_digest cache_abi; /* schema, dtype, quantization, shard, position /
                            RoPE / visibility contract (the M5 cache ABI) */
  const lsim_kv_graph *graph;
  const lsim_kv_adapter *adapter; /* NULL: base */
  const int64_t *tokens;          /* token ids, each >= 0 */
  int64_t ntokens;                /* >= 1 unless embeds_only */
  int embeds_only;                /* inputs_embeds without token ids:
                                     ntokens rows, tokens NULL */
  int64_t position_base;          /* first position id: must be 0 */
  lsim_digest side_inputs;        /* fixed digest when there are none */
  lsim_digest isolation;          /* namespace salt */
  int64_t block_tokens;           /* 1..2^20 */
  lsim_kv_owner owner;            /* never hashed */
} lsim_kv_manifest;

/* Start of the last exact occurrence of inv[0..m) in tok[0..n), or -1.
** m >= 1. */
int64_t lsim_kv_last_occurrence(const int64_t *tok, int64_t n,
                                const int64_t *inv, int64_t m);

/*
** Validate a manifest and derive its activation start: 0 for LoRA, the
** aLoRA start (the first invocation token is adapted), or ntokens for base
** (and for an aLoRA whose invocation is absent when specialization is not
** required: PEFT's base fallback).  mask, when not NULL, receives ntokens
** flags (1 = adapter active at that position).
*/
lsim_err lsim_kv_activation(const lsim_kv_manifest *m, int64_t *start,
                            uint8_t *mask, lsim_errbuf *eb);

/* ---------------------------------------------------------- digests, keys */

/* Key modes.  SEMANTIC and ALORA are correct; RAW is conservative; the
** OBLIVIOUS mode ignores the adapter and is only for the comparison study
** (it serves corrupt hits; lsim_kv_key_schema_check refuses it). */
enum lsim_kv_key_mode {
  LSIM_KV_KEYS_OBLIVIOUS = 1,
  LSIM_KV_KEYS_RAW = 2,      /* raw adapter id in every interval */
  LSIM_KV_KEYS_SEMANTIC = 3, /* semantic ABI + closure, aLoRA as always-on */
  LSIM_KV_KEYS_ALORA = 4     /* SEMANTIC plus the aLoRA interval exception */
};
const char *lsim_kv_key_mode_name(int mode); /* "oblivious", ... */

/* The base execution digest of a manifest's base ABI and graph. */
lsim_err lsim_kv_base_digest(const lsim_kv_manifest *m, lsim_digest *out,
                             lsim_errbuf *eb);
/* E[s,e) under a key mode (0 <= s < e <= ntokens). */
lsim_err lsim_kv_interval_digest(const lsim_kv_manifest *m, int mode,
                                 int64_t s, int64_t e, lsim_digest *out,
                                 lsim_errbuf *eb);

/* Block keys of a manifest: nblocks = ceil(ntokens / block_tokens); only
** the first `full` blocks are complete and may be published or matched. */
typedef struct lsim_kv_keys {
  int64_t nblocks, full, block_tokens, ntokens;
  lsim_digest *key;   /* [nblocks] */
  lsim_digest *logit; /* [nblocks] prompt-logit keys: key + LM-head operator */
} lsim_kv_keys;
#define LSIM_KV_KEYS_INIT {0, 0, 0, 0, NULL, NULL}

/* Derive every block key (caller releases with lsim_kv_keys_release).
** With embeds_only, a block's token ids are replaced by the side-input
** digest and its position range. */
lsim_err lsim_kv_keys_derive(const lsim_kv_manifest *m, int mode,
                             lsim_kv_keys *out, lsim_errbuf *eb);
void lsim_kv_keys_release(lsim_kv_keys *k);

/* Leading equal keys of two derivations, in tokens (whole blocks only). */
int64_t lsim_kv_common_tokens(const lsim_kv_keys *a, const lsim_kv_keys *b);

/* Key schema: which fields a key implementation hashes.  A correct schema
** has every REQUIRED bit and no OWNERSHIP bit; RAW_ADAPTER is refused
** unless the mode is RAW (it destroys aLoRA prefix sharing). */
enum {
  LSIM_KV_F_TOKENS = 1u << 0,
  LSIM_KV_F_EXEC = 1u << 1, /* interval execution digest */
  LSIM_KV_F_CACHE_ABI = 1u << 2,
  LSIM_KV_F_SIDE = 1u << 3,
  LSIM_KV_F_NAMESPACE = 1u << 4,
  LSIM_KV_F_GRAPH = 1u << 5,
  LSIM_KV_F_REQUEST_ID = 1u << 8,
  LSIM_KV_F_SLOT = 1u << 9,
  LSIM_KV_F_SLOT_GEN = 1u << 10,
  LSIM_KV_F_POINTER_GEN = 1u << 11,
  LSIM_KV_F_BLOCK_IDS = 1u << 12,
  LSIM_KV_F_SAMPLING = 1u << 13,
  LSIM_KV_F_RAW_ADAPTER = 1u << 14
};
#define LSIM_KV_F_REQUIRED                                            \
  (LSIM_KV_F_TOKENS | LSIM_KV_F_EXEC | LSIM_KV_F_CACHE_ABI |          \
   LSIM_KV_F_SIDE | LSIM_KV_F_NAMESPACE | LSIM_KV_F_GRAPH)
#define LSIM_KV_F_ALL (LSIM_KV_F_REQUIRED | 0x7f00u)
/* The schema lsim_kv_keys_derive implements for a mode. */
unsigned lsim_kv_key_schema(int mode);
lsim_err lsim_kv_key_schema_check(unsigned fields, int mode, lsim_errbuf *eb);

/* ---------------------------------------------------------- reuse check */

/*
** A reuse claim: the consumer wants the first `rows` rows of `obj` that the
** producer computed.  Checked field by field in this order (the first
** failure is returned): namespace, base ABI, graph revision, cache ABI,
** side inputs, token ids over the rows, closure of each side (unproven
** graph), adapter revision under one alias, execution over the rows
** (direct K/V, downstream K/V, hidden, logits, aLoRA taint, boundary),
** block frontier (rows past the last common full block).
*/
lsim_err lsim_kv_reuse_check(const lsim_kv_manifest *producer,
                             const lsim_kv_manifest *consumer, int obj,
                             int64_t rows, lsim_errbuf *eb);

/* ---------------------------------------------------------- switch cases */

/* Actions of article 0x08J. */
enum lsim_kv_action {
  LSIM_KV_ACT_RECOMPUTE = 1,   /* recompute the full prefix under B */
  LSIM_KV_ACT_FORK_BASE,       /* fork the clean prefix, compute the rest */
  LSIM_KV_ACT_RETURN_CLEAN,    /* back to the saved clean fork */
  LSIM_KV_ACT_SHARE_BASE,      /* share base prefix, distinct suffixes */
  LSIM_KV_ACT_RECOMPUTE_LOGITS, /* reuse K/V, recompute prompt logits */
  LSIM_KV_ACT_REUSE            /* reuse everything */
};
const char *lsim_kv_action_name(int action);

typedef struct lsim_kv_switch {
  int64_t kv_rows;     /* reusable K/V rows (whole blocks) */
  int logits_reusable; /* prompt logits of the covered rows */
  int action;          /* enum lsim_kv_action */
} lsim_kv_switch;

/* A request switching from manifest `from` to `to` mid-way (same tokens):
** what can the second execution reuse of the first's cache (ALORA keys)? */
lsim_err lsim_kv_switch_of(const lsim_kv_manifest *from,
                           const lsim_kv_manifest *to, lsim_kv_switch *out,
                           lsim_errbuf *eb);

#ifdef __cplusplus
}
#endif

#endif /* LSIM_KV_H */
