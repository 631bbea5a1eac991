/*
** test_prefix.c: adapter-aware KV compatibility (engine/kv.c), the prefix
** cache (engine/prefix.c) and the exact dependency witness
** (backends/cpu_ref/kvwitness.c) against the article's fixtures (0x08C,
** 0x08D, 0x08E, 0x08J) and its failure list (0x08L).
*/
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../backends/cpu_ref/cpu_ref.h"
#include "../backends/cpu_ref/kvwitness.h"
#include "../engine/kv.h"
#include "../engine/prefix.h"
#include "../engine/residency.h"

/* ---------------------------------------------------------------- fixture */

static lsim_digest D(const char *s) {
  lsim_digest d;
  cr_assert_eq(lsim_sha256(s, strlen(s), &d, NULL), 0);
  return d;
}

static const int64_t TOK4[4] = {11, 12, 99, 100};
static const int64_t INV[2] = {99, 100};
static const lsim_kv_target T_Q0[1] = {{0, LSIM_KV_Q}};
static const lsim_kv_target T_K0[1] = {{0, LSIM_KV_K}};
static const lsim_kv_target T_V1[1] = {{1, LSIM_KV_V}};
static const lsim_kv_target T_LM[1] = {{-1, LSIM_KV_LM_HEAD}};
static const lsim_kv_target T_Q1[1] = {{1, LSIM_KV_Q}};

typedef struct fx {
  lsim_kv_graph g;
  lsim_kv_adapter a;
  lsim_kv_manifest m;
} fx;

static void fx_base(fx *f) {
  memset(f, 0, sizeof *f);
  f->g.arch = LSIM_KV_ARCH_SERIAL;
  f->g.layers = 2;
  f->g.revision = D("graph-r1");
  f->m.base_abi = D("base");
  f->m.cache_abi = D("cache-bf16-paged");
  f->m.graph = &f->g;
  f->m.adapter = NULL;
  f->m.tokens = TOK4;
  f->m.ntokens = 4;
  f->m.side_inputs = D("no-side-inputs");
  f->m.isolation = D("tenant-0");
  f->m.block_tokens = 1;
}

static void fx_lora(fx *f, const char *name, const lsim_kv_target *t, int n) {
  fx_base(f);
  f->a.kind = LSIM_KV_LORA;
  char b[64];
  snprintf(b, sizeof b, "sem-%s", name);
  f->a.semantic = D(b);
  snprintf(b, sizeof b, "art-%s", name);
  f->a.artifact = D(b);
  snprintf(b, sizeof b, "alias-%s", name);
  f->a.raw_id = D(b);
  f->a.targets = t;
  f->a.ntargets = n;
  f->a.explicit_start = -1;
  f->m.adapter = &f->a;
}

static void fx_alora(fx *f, const char *name) {
  fx_lora(f, name, T_Q0, 1);
  f->a.kind = LSIM_KV_ALORA;
  f->a.invocation = INV;
  f->a.ninvocation = 2;
  f->a.require_specialization = 1;
  f->a.offset_mode = LSIM_KV_OFFSET_DERIVE;
}

/* Re-point the internal pointers after a struct copy. */
static void fx_fix(fx *f) {
  f->m.graph = &f->g;
  if (f->m.adapter)
    f->m.adapter = &f->a;
}

/* ---------------------------------------------------------------- aLoRA */

Test(alora, last_occurrence_masks) {
  fx f;
  fx_alora(&f, "A");
  int64_t start;
  uint8_t mask[6];
  cr_assert_eq(lsim_kv_activation(&f.m, &start, mask, NULL), 0);
  cr_assert_eq(start, 2);
  uint8_t want4[4] = {0, 0, 1, 1};
  cr_assert_arr_eq(mask, want4, 4);
  static const int64_t tok6[6] = {99, 100, 11, 99, 100, 12};
  f.m.tokens = tok6;
  f.m.ntokens = 6;
  cr_assert_eq(lsim_kv_activation(&f.m, &start, mask, NULL), 0);
  cr_assert_eq(start, 3, "the LAST occurrence starts at 3, not the first at 0");
  uint8_t want6[6] = {0, 0, 0, 1, 1, 1};
  cr_assert_arr_eq(mask, want6, 6);
  /* backward offset o = T - start */
  cr_assert_eq(6 - start, 3);
  cr_assert_eq(lsim_kv_last_occurrence(tok6, 6, INV, 2), 3);
}

Test(alora, absent_invocation) {
  fx f;
  fx_alora(&f, "A");
  static const int64_t tok[4] = {11, 12, 13, 14};
  f.m.tokens = tok;
  int64_t start;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_kv_activation(&f.m, &start, NULL, &eb),
               LSIM_E_KV_INVOCATION_ABSENT, "%s", eb.msg);
  f.a.require_specialization = 0; /* PEFT fallback: base throughout */
  cr_assert_eq(lsim_kv_activation(&f.m, &start, NULL, NULL), 0);
  cr_assert_eq(start, 4);
  /* the token ids, not a text match: [99, 101] does not contain [99, 100] */
  static const int64_t near[4] = {11, 99, 101, 100};
  f.m.tokens = near;
  f.a.require_specialization = 1;
  cr_assert_eq(lsim_kv_activation(&f.m, &start, NULL, NULL),
               LSIM_E_KV_INVOCATION_ABSENT);
}

Test(alora, pre_invocation_normalizes_to_base) {
  fx b, a;
  fx_base(&b);
  fx_alora(&a, "A");
  lsim_digest base, e;
  cr_assert_eq(lsim_kv_base_digest(&b.m, &base, NULL), 0);
  for (int64_t s = 0; s < 4; s++) {
    cr_assert_eq(lsim_kv_interval_digest(&a.m, LSIM_KV_KEYS_ALORA, s, s + 1,
                                         &e, NULL), 0);
    cr_assert_eq(lsim_digest_eq(&e, &base), s < 2, "interval [%lld,%lld)",
                 (long long)s, (long long)s + 1);
    /* the conservative semantic mode keys every interval with the adapter */
    cr_assert_eq(lsim_kv_interval_digest(&a.m, LSIM_KV_KEYS_SEMANTIC, s, s + 1,
                                         &e, NULL), 0);
    cr_assert_not(lsim_digest_eq(&e, &base));
  }
  /* an interval touching the boundary is adapted */
  cr_assert_eq(lsim_kv_interval_digest(&a.m, LSIM_KV_KEYS_ALORA, 1, 3, &e,
                                       NULL), 0);
  cr_assert_not(lsim_digest_eq(&e, &base));
}

Test(alora, block_frontier_stops_before_boundary_block) {
  fx b, a;
  fx_base(&b);
  fx_alora(&a, "A");
  static const int64_t inv[1] = {12}; /* start 1: inside block [0,2) */
  a.a.invocation = inv;
  a.a.ninvocation = 1;
  b.m.block_tokens = a.m.block_tokens = 2;
  lsim_kv_keys kb = LSIM_KV_KEYS_INIT, ka = LSIM_KV_KEYS_INIT;
  cr_assert_eq(lsim_kv_keys_derive(&b.m, LSIM_KV_KEYS_ALORA, &kb, NULL), 0);
  cr_assert_eq(lsim_kv_keys_derive(&a.m, LSIM_KV_KEYS_ALORA, &ka, NULL), 0);
  cr_assert_eq(lsim_kv_common_tokens(&kb, &ka), 0);
  a.a.invocation = INV; /* start 2: block [0,2) is clean */
  lsim_kv_keys_release(&ka);
  cr_assert_eq(lsim_kv_keys_derive(&a.m, LSIM_KV_KEYS_ALORA, &ka, NULL), 0);
  cr_assert_eq(lsim_kv_common_tokens(&kb, &ka), 2);
  lsim_kv_keys_release(&ka);
  lsim_kv_keys_release(&kb);
}

/* ---------------------------------------------------------------- closure */

Test(closure, serial_rules) {
  lsim_kv_graph g = {LSIM_KV_ARCH_SERIAL, 2, D("g")};
  lsim_kv_closure c;
  cr_assert_eq(lsim_kv_closure_of(&g, T_Q0, 1, &c, NULL), 0);
  cr_assert(c.proven && c.kv_changed && !c.kv_direct && c.kv_first_layer == 1);
  cr_assert_eq(lsim_kv_reuse_from_base(&c, LSIM_KV_OBJ_KV, NULL),
               LSIM_E_KV_REUSE_DOWNSTREAM);
  cr_assert_eq(lsim_kv_closure_of(&g, T_K0, 1, &c, NULL), 0);
  cr_assert(c.kv_direct && c.kv_first_layer == 0);
  cr_assert_eq(lsim_kv_reuse_from_base(&c, LSIM_KV_OBJ_KV, NULL),
               LSIM_E_KV_REUSE_KV_TARGET);
  /* Q in the last layer: no downstream layer projects K/V; hidden moves */
  cr_assert_eq(lsim_kv_closure_of(&g, T_Q1, 1, &c, NULL), 0);
  cr_assert(!c.kv_changed && c.hidden_changed && c.logits_changed);
  cr_assert_eq(lsim_kv_reuse_from_base(&c, LSIM_KV_OBJ_KV, NULL), 0);
  cr_assert_eq(lsim_kv_reuse_from_base(&c, LSIM_KV_OBJ_HIDDEN, NULL),
               LSIM_E_KV_REUSE_HIDDEN);
  /* LM head only: K/V and hidden reusable, logits not */
  cr_assert_eq(lsim_kv_closure_of(&g, T_LM, 1, &c, NULL), 0);
  cr_assert(!c.kv_changed && !c.hidden_changed && c.logits_changed);
  cr_assert_eq(lsim_kv_reuse_from_base(&c, LSIM_KV_OBJ_KV, NULL), 0);
  cr_assert_eq(lsim_kv_reuse_from_base(&c, LSIM_KV_OBJ_HIDDEN, NULL), 0);
  cr_assert_eq(lsim_kv_reuse_from_base(&c, LSIM_KV_OBJ_LOGITS, NULL),
               LSIM_E_KV_REUSE_LOGITS);
  /* any other architecture: no proof, conservative */
  g.arch = LSIM_KV_ARCH_PARALLEL;
  cr_assert_eq(lsim_kv_closure_of(&g, T_LM, 1, &c, NULL), 0);
  cr_assert(!c.proven && c.kv_changed);
  cr_assert_eq(lsim_kv_reuse_from_base(&c, LSIM_KV_OBJ_KV, NULL),
               LSIM_E_KV_UNPROVEN);
}

/* ---------------------------------------------------------------- switches */

static lsim_kv_switch sw(const fx *from, const fx *to) {
  lsim_kv_switch s;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_kv_switch_of(&from->m, &to->m, &s, &eb), 0, "%s", eb.msg);
  return s;
}

Test(switches, article_table) {
  fx base, A, B, aA, aB, aA1, lm, relo;
  fx_base(&base);
  fx_lora(&A, "A", T_Q0, 1);
  fx_lora(&B, "B", T_V1, 1);
  fx_alora(&aA, "aA");
  fx_alora(&aB, "aB");
  aA1 = aA;
  fx_fix(&aA1);
  aA1.a.offset_mode = LSIM_KV_OFFSET_EXPLICIT;
  aA1.a.explicit_start = 1;
  fx_lora(&lm, "lm", T_LM, 1);
  relo = A;
  fx_fix(&relo);
  A.m.owner.slot = 3;
  A.m.owner.slot_generation = 7;
  A.m.owner.pointer_generation = 5;
  A.m.owner.request_id = 1;
  relo.m.owner.slot = 9;
  relo.m.owner.slot_generation = 1;
  relo.m.owner.pointer_generation = 8;
  relo.m.owner.request_id = 2;
  relo.m.owner.sampling = D("top-p-0.9");

  lsim_kv_switch s = sw(&A, &B);
  cr_assert_eq(s.kv_rows, 0);
  cr_assert_eq(s.action, LSIM_KV_ACT_RECOMPUTE);
  s = sw(&base, &aA);
  cr_assert_eq(s.kv_rows, 2);
  cr_assert_eq(s.action, LSIM_KV_ACT_FORK_BASE);
  s = sw(&aA, &base);
  cr_assert_eq(s.kv_rows, 2);
  cr_assert_eq(s.action, LSIM_KV_ACT_RETURN_CLEAN);
  s = sw(&aA, &aB);
  cr_assert_eq(s.kv_rows, 2);
  cr_assert_eq(s.action, LSIM_KV_ACT_SHARE_BASE);
  s = sw(&aA, &aA1);
  cr_assert_eq(s.kv_rows, 1, "same aLoRA, boundary 2 vs 1");
  /* raw keys are conservative, not oblivious: the activation schedule is
  ** in them too, so the other boundary shares nothing */
  lsim_kv_keys k1 = LSIM_KV_KEYS_INIT, k2 = LSIM_KV_KEYS_INIT;
  cr_assert_eq(lsim_kv_keys_derive(&aA.m, LSIM_KV_KEYS_RAW, &k1, NULL), 0);
  cr_assert_eq(lsim_kv_keys_derive(&aA1.m, LSIM_KV_KEYS_RAW, &k2, NULL), 0);
  cr_assert_eq(lsim_kv_common_tokens(&k1, &k2), 0);
  lsim_kv_keys_release(&k1);
  lsim_kv_keys_release(&k2);
  s = sw(&base, &lm);
  cr_assert_eq(s.kv_rows, 4);
  cr_assert_not(s.logits_reusable);
  cr_assert_eq(s.action, LSIM_KV_ACT_RECOMPUTE_LOGITS);
  s = sw(&A, &relo);
  cr_assert_eq(s.kv_rows, 4);
  cr_assert(s.logits_reusable);
  cr_assert_eq(s.action, LSIM_KV_ACT_REUSE);
}

Test(keys, ownership_never_hashed_and_modes_differ) {
  fx a, b;
  fx_lora(&a, "A", T_Q0, 1);
  b = a;
  fx_fix(&b);
  b.m.owner.request_id = 99;
  b.m.owner.slot = 4;
  b.m.owner.slot_generation = 12;
  b.m.owner.pointer_generation = 3;
  b.m.owner.sampling = D("greedy");
  for (int mode = LSIM_KV_KEYS_OBLIVIOUS; mode <= LSIM_KV_KEYS_ALORA; mode++) {
    lsim_kv_keys ka = LSIM_KV_KEYS_INIT, kb = LSIM_KV_KEYS_INIT;
    cr_assert_eq(lsim_kv_keys_derive(&a.m, mode, &ka, NULL), 0);
    cr_assert_eq(lsim_kv_keys_derive(&b.m, mode, &kb, NULL), 0);
    cr_assert_eq(lsim_kv_common_tokens(&ka, &kb), 4);
    lsim_kv_keys_release(&ka);
    lsim_kv_keys_release(&kb);
    cr_assert_eq(lsim_kv_key_schema_check(lsim_kv_key_schema(mode), mode,
                                          NULL),
                 mode == LSIM_KV_KEYS_OBLIVIOUS ? LSIM_E_KV_KEY_NO_EXEC : 0);
  }
  /* raw keys: an alias of the same artifact misses; semantic keys hit */
  b.a.raw_id = D("alias-other");
  lsim_kv_keys ka = LSIM_KV_KEYS_INIT, kb = LSIM_KV_KEYS_INIT;
  lsim_kv_keys_derive(&a.m, LSIM_KV_KEYS_RAW, &ka, NULL);
  lsim_kv_keys_derive(&b.m, LSIM_KV_KEYS_RAW, &kb, NULL);
  cr_assert_eq(lsim_kv_common_tokens(&ka, &kb), 0);
  lsim_kv_keys_release(&ka);
  lsim_kv_keys_release(&kb);
  lsim_kv_keys_derive(&a.m, LSIM_KV_KEYS_SEMANTIC, &ka, NULL);
  lsim_kv_keys_derive(&b.m, LSIM_KV_KEYS_SEMANTIC, &kb, NULL);
  cr_assert_eq(lsim_kv_common_tokens(&ka, &kb), 4);
  lsim_kv_keys_release(&ka);
  lsim_kv_keys_release(&kb);
  /* the namespace salt separates tenants in every mode */
  fx c = a;
  fx_fix(&c);
  c.m.isolation = D("tenant-1");
  lsim_kv_keys_derive(&a.m, LSIM_KV_KEYS_OBLIVIOUS, &ka, NULL);
  lsim_kv_keys_derive(&c.m, LSIM_KV_KEYS_OBLIVIOUS, &kb, NULL);
  cr_assert_eq(lsim_kv_common_tokens(&ka, &kb), 0);
  lsim_kv_keys_release(&ka);
  lsim_kv_keys_release(&kb);
}

/* ---------------------------------------------------------------- cache */

typedef struct cache_fx {
  lsim_res *pool;
  lsim_prefix *pc;
  lsim_prefix_grant grants[2];
} cache_fx;

static void cache_open(cache_fx *c, int64_t slots, int64_t max_blocks) {
  int64_t ap[1] = {1};
  lsim_res_cfg rc = {slots, 4096, 1, ap, 0, LSIM_DIGEST_INIT};
  cr_assert_eq(lsim_res_new(&c->pool, &rc, NULL), 0);
  c->grants[0].principal = 0;
  c->grants[0].ns = D("tenant-0");
  c->grants[1].principal = 1;
  c->grants[1].ns = D("tenant-1");
  lsim_prefix_cfg cfg = {1, 1, max_blocks, 4, c->pool, c->grants, 2};
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_prefix_new(&c->pc, &cfg, &eb), 0, "%s", eb.msg);
}

static void cache_close(cache_fx *c) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_prefix_check(c->pc, &eb), 0, "%s", eb.msg);
  lsim_prefix_release(c->pc);
  lsim_res_view v;
  lsim_res_view_get(c->pool, &v);
  cr_assert_eq(v.kv, 0, "cache pages went back to the pool");
  lsim_res_release(c->pool);
}

static void keys_of(const fx *f, int mode, lsim_kv_keys *k) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_kv_keys_derive(&f->m, mode, k, &eb), 0, "%s", eb.msg);
}

Test(cache, lookup_publish_fork_release_lru) {
  cache_fx c;
  cache_open(&c, 6, 16);
  fx base, aA, aB;
  fx_base(&base);
  fx_alora(&aA, "aA");
  fx_alora(&aB, "aB");
  lsim_kv_keys kb, ka, kB;
  keys_of(&base, LSIM_KV_KEYS_ALORA, &kb);
  keys_of(&aA, LSIM_KV_KEYS_ALORA, &ka);
  keys_of(&aB, LSIM_KV_KEYS_ALORA, &kB);
  lsim_prefix_receipt r1 = LSIM_PREFIX_RECEIPT_INIT,
                      r2 = LSIM_PREFIX_RECEIPT_INIT,
                      r3 = LSIM_PREFIX_RECEIPT_INIT;
  lsim_digest ns = D("tenant-0");
  int64_t pub;
  /* base request: miss, publish 4 blocks */
  cr_assert_eq(lsim_prefix_lookup(c.pc, 0, &ns, &kb, NULL, -1, &r1, NULL), 0);
  cr_assert_eq(r1.hit_blocks, 0);
  cr_assert_eq(lsim_prefix_publish(c.pc, &r1, &kb, NULL, -1, -1, &pub, NULL), 0);
  cr_assert_eq(pub, 4);
  /* aLoRA A: the clean prefix [0,2) hits, its suffix is its own */
  cr_assert_eq(lsim_prefix_lookup(c.pc, 0, &ns, &ka, NULL, 0, &r2, NULL), 0);
  cr_assert_eq(r2.hit_blocks, 2);
  cr_assert_eq(lsim_prefix_refs(c.pc, r2.ref[0]), 2);
  cr_assert_eq(lsim_prefix_publish(c.pc, &r2, &ka, NULL, 0, -1, &pub, NULL), 0);
  cr_assert_eq(pub, 2); /* 6 pages now used */
  /* fork A's clean prefix for aLoRA B, then B's suffix needs pages: none
  ** free and everything referenced -> publication stops early */
  cr_assert_eq(lsim_prefix_fork(c.pc, &r2, 2, &r3, NULL), 0);
  cr_assert_eq(lsim_prefix_refs(c.pc, r3.ref[1]), 3);
  cr_assert_eq(lsim_prefix_publish(c.pc, &r3, &kB, NULL, 1, -1, &pub, NULL), 0);
  cr_assert_eq(pub, 0);
  lsim_prefix_stats st;
  lsim_prefix_stats_get(c.pc, &st);
  cr_assert_eq(st.stopped_full, 1);
  /* release the base request: its tail blocks 2,3 become evictable, the
  ** deepest first; B's publication now evicts them */
  cr_assert_eq(lsim_prefix_unref(c.pc, &r1, NULL), 0);
  cr_assert_eq(lsim_prefix_publish(c.pc, &r3, &kB, NULL, 1, -1, &pub, NULL), 0);
  cr_assert_eq(pub, 2);
  lsim_prefix_stats_get(c.pc, &st);
  cr_assert_eq(st.evictions, 2);
  cr_assert_eq(st.live_blocks, 6);
  lsim_prefix_adapter_stats as;
  lsim_prefix_adapter_stats_get(c.pc, 0, &as);
  cr_assert_eq(as.hit_blocks, 2);
  cr_assert_eq(as.miss_blocks, 2);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_prefix_check(c.pc, &eb), 0, "%s", eb.msg);
  /* copy-on-write: a published block is immutable; cow gives a private copy */
  cr_assert_eq(lsim_prefix_write(c.pc, &r3, 0, NULL), LSIM_E_KV_IMMUTABLE);
  cr_assert_eq(lsim_prefix_cow(c.pc, &r3, 0, NULL), LSIM_E_KV_NOSPACE);
  cr_assert_eq(lsim_prefix_unref(c.pc, &r2, NULL), 0);
  cr_assert_eq(lsim_prefix_cow(c.pc, &r3, 3, NULL), 0);
  cr_assert_eq(lsim_prefix_write(c.pc, &r3, 3, NULL), 0);
  cr_assert_eq(lsim_prefix_check(c.pc, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_prefix_unref(c.pc, &r3, NULL), 0);
  /* the pool needs 4 free slots for an adapter: unreferenced blocks go */
  int64_t freed;
  lsim_res_view v;
  lsim_res_view_get(c.pool, &v);
  int64_t before = v.free;
  cr_assert_eq(lsim_prefix_reclaim(c.pc, 4, &freed, NULL), 0);
  lsim_res_view_get(c.pool, &v);
  cr_assert_geq(v.free, 4);
  cr_assert_eq(v.free - before, freed);
  cr_assert_eq(lsim_prefix_check(c.pc, &eb), 0, "%s", eb.msg);
  lsim_kv_keys_release(&kb);
  lsim_kv_keys_release(&ka);
  lsim_kv_keys_release(&kB);
  cache_close(&c);
}

Test(cache, authorization_before_candidates_and_corrupt_hits) {
  cache_fx c;
  cache_open(&c, 16, 16);
  fx base, A;
  fx_base(&base);
  fx_lora(&A, "A", T_Q0, 1);
  lsim_kv_keys kb, ka, tb, ta;
  keys_of(&base, LSIM_KV_KEYS_OBLIVIOUS, &kb);
  keys_of(&A, LSIM_KV_KEYS_OBLIVIOUS, &ka);
  keys_of(&base, LSIM_KV_KEYS_ALORA, &tb);
  keys_of(&A, LSIM_KV_KEYS_ALORA, &ta);
  lsim_prefix_receipt r = LSIM_PREFIX_RECEIPT_INIT;
  lsim_digest ns0 = D("tenant-0");
  cr_assert_eq(lsim_prefix_lookup(c.pc, 0, &ns0, &kb, &tb, -1, &r, NULL), 0);
  cr_assert_eq(lsim_prefix_publish(c.pc, &r, &kb, &tb, -1, -1, NULL, NULL), 0);
  cr_assert_eq(lsim_prefix_unref(c.pc, &r, NULL), 0);
  lsim_prefix_stats st;
  lsim_prefix_stats_get(c.pc, &st);
  int64_t probes = st.probes;
  /* principal 1 asking for tenant 0's namespace: refused, nothing probed */
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_prefix_lookup(c.pc, 1, &ns0, &kb, NULL, -1, &r, &eb),
               LSIM_E_KV_UNAUTHORIZED);
  lsim_prefix_stats_get(c.pc, &st);
  cr_assert_eq(st.probes, probes);
  cr_assert_eq(st.unauthorized, 1);
  /* oblivious keys serve the base rows to a Q-adapted request: corrupt */
  cr_assert_eq(lsim_prefix_lookup(c.pc, 0, &ns0, &ka, &ta, 0, &r, NULL), 0);
  cr_assert_eq(r.hit_blocks, 4);
  cr_assert_eq(r.corrupt_blocks, 4);
  cr_assert_eq(lsim_prefix_unref(c.pc, &r, NULL), 0);
  lsim_kv_keys_release(&kb);
  lsim_kv_keys_release(&ka);
  lsim_kv_keys_release(&tb);
  lsim_kv_keys_release(&ta);
  cache_close(&c);
}

/* ---------------------------------------------------------------- witness */

static void witness_spec(lsim_kvw_spec *s) {
  memset(s, 0, sizeof *s);
  s->d = 2;
  s->layers = 2;
  s->tokens = 2;
  s->vocab = 2;
  s->exp_base = 3; /* natural logits [0, log 3] == base-3 logits [0, 1] */
  s->x[0][0] = "1";
  s->x[1][0] = "1";
  s->x[1][1] = "1";
  s->wk[0][1] = "1"; /* W^K_0 = [0,1]^T */
  s->wv[0][0] = "1"; /* W^V_0 = [1,2]^T */
  s->wv[0][1] = "2";
  s->wo[0][0] = "1"; /* output direction [1,0] */
  s->wk[1][0] = "2"; /* W^K_1 = [2,0]^T */
  s->wv[1][0] = "1"; /* W^V_1 = [1,1]^T */
  s->wv[1][1] = "1";
  /* W^O_1 = 0: the final hidden row is layer 1's input; W_LM = I */
  s->lm[0][0] = "1";
  s->lm[1][1] = "1";
}

static void q_is(const mpq_t q, const char *want) {
  char *s = lsim_q_str(q);
  cr_assert_str_eq(s, want);
  free(s);
}

Test(witness, two_layer_trace) {
  lsim_kvw_spec s;
  witness_spec(&s);
  lsim_kvw_trace base, qa, ka, la, am;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_kvw_run(&s, NULL, 0, &base, &eb), 0, "%s", eb.msg);
  q_is(base.k[0][0], "0");
  q_is(base.k[0][1], "1");
  q_is(base.v[0][0], "1");
  q_is(base.v[0][1], "3");
  q_is(base.h[1][1][0], "3");
  q_is(base.h[1][1][1], "1");
  q_is(base.k[1][1], "6");
  q_is(base.v[1][1], "4");
  q_is(base.logits[1][0], "3");
  q_is(base.logits[1][1], "1");
  /* Q-only adapter: token 1's logits become [0, 1] (base 3) */
  lsim_kvw_delta dq = {0, LSIM_KV_Q, {"1"}, NULL};
  cr_assert_eq(lsim_kvw_run(&s, &dq, 1, &qa, &eb), 0, "%s", eb.msg);
  q_is(qa.k[0][0], "0");
  q_is(qa.k[0][1], "1");
  q_is(qa.v[0][0], "1");
  q_is(qa.v[0][1], "3");
  q_is(qa.h[1][1][0], "7/2");
  q_is(qa.h[1][1][1], "1");
  q_is(qa.k[1][1], "7");
  q_is(qa.v[1][1], "9/2");
  cr_assert_not(lsim_kvw_kv_equal(&base, &qa));
  /* direct K delta [1,1]^T: layer-0 K becomes [1,3] at once */
  lsim_kvw_delta dk = {0, LSIM_KV_K, {"1", "1"}, NULL};
  cr_assert_eq(lsim_kvw_run(&s, &dk, 1, &ka, &eb), 0, "%s", eb.msg);
  q_is(ka.k[0][0], "1");
  q_is(ka.k[0][1], "3");
  /* LM head only: logits [3,1] -> [6,0], every K/V row unchanged */
  lsim_kvw_delta dl = {-1, LSIM_KV_LM_HEAD, {0}, NULL};
  dl.v[0 * LSIM_KVW_MAXV + 0] = "1";
  dl.v[1 * LSIM_KVW_MAXV + 1] = "-1";
  cr_assert_eq(lsim_kvw_run(&s, &dl, 1, &la, &eb), 0, "%s", eb.msg);
  q_is(la.logits[1][0], "6");
  q_is(la.logits[1][1], "0");
  cr_assert(lsim_kvw_kv_equal(&base, &la));
  cr_assert_not(lsim_kvw_logits_equal(&base, &la));
  /* the Q adapter as an aLoRA active from token 1: token 0 equals base at
  ** every layer (0x08F), token 1 is the Q-adapter trace */
  static const uint8_t mask[2] = {0, 1};
  lsim_kvw_delta dm = {0, LSIM_KV_Q, {"1"}, mask};
  cr_assert_eq(lsim_kvw_run(&s, &dm, 1, &am, &eb), 0, "%s", eb.msg);
  for (int l = 0; l < 2; l++) {
    cr_assert(mpq_equal(am.k[l][0], base.k[l][0]));
    cr_assert(mpq_equal(am.v[l][0], base.v[l][0]));
  }
  cr_assert(mpq_equal(am.k[1][1], qa.k[1][1]));
  /* the closure agrees with the witness: Q-only changes downstream K/V,
  ** LM-head-only changes none */
  lsim_kv_graph g = {LSIM_KV_ARCH_SERIAL, 2, D("g")};
  lsim_kv_closure c;
  lsim_kv_closure_of(&g, T_Q0, 1, &c, NULL);
  cr_assert_eq(c.kv_changed, !lsim_kvw_kv_equal(&base, &qa));
  lsim_kv_closure_of(&g, T_LM, 1, &c, NULL);
  cr_assert_eq(c.kv_changed, !lsim_kvw_kv_equal(&base, &la));
  lsim_kvw_trace_clear(&base);
  lsim_kvw_trace_clear(&qa);
  lsim_kvw_trace_clear(&ka);
  lsim_kvw_trace_clear(&la);
  lsim_kvw_trace_clear(&am);
}

/* ---------------------------------------------------------------- malformed */

/* One case: mutate one field of a valid fixture, run, expect one code. */
typedef lsim_err (*case_fn)(lsim_errbuf *eb);

static lsim_err derive(const fx *f, lsim_errbuf *eb) {
  lsim_kv_keys k = LSIM_KV_KEYS_INIT;
  lsim_err rc = lsim_kv_keys_derive(&f->m, LSIM_KV_KEYS_ALORA, &k, eb);
  lsim_kv_keys_release(&k);
  return rc;
}

#define MCASE(name, setup)                      \
  static lsim_err name(lsim_errbuf *eb) {       \
    fx f;                                       \
    fx_alora(&f, "A");                          \
    setup;                                      \
    return derive(&f, eb);                      \
  }

static const lsim_kv_target T_BADL[1] = {{2, LSIM_KV_Q}};
static const lsim_kv_target T_BADP[1] = {{0, 17}};
static const lsim_kv_target T_DUP[2] = {{0, LSIM_KV_Q}, {0, LSIM_KV_Q}};
static const lsim_kv_target T_LM0[1] = {{0, LSIM_KV_LM_HEAD}};
static const int64_t TOKNEG[4] = {11, -12, 99, 100};
static const int64_t INVNEG[2] = {99, -100};
static const int64_t TOKNO[4] = {11, 12, 13, 14};

MCASE(m_base_abi, f.m.base_abi = (lsim_digest)LSIM_DIGEST_INIT)
MCASE(m_cache_abi, f.m.cache_abi = (lsim_digest)LSIM_DIGEST_INIT)
MCASE(m_graph_rev, f.g.revision = (lsim_digest)LSIM_DIGEST_INIT)
MCASE(m_graph_arch, f.g.arch = 9)
MCASE(m_graph_layers, f.g.layers = 0)
MCASE(m_side, f.m.side_inputs = (lsim_digest)LSIM_DIGEST_INIT)
MCASE(m_isolation, f.m.isolation = (lsim_digest)LSIM_DIGEST_INIT)
MCASE(m_ntokens, f.m.ntokens = 0)
MCASE(m_token_id, f.m.tokens = TOKNEG)
MCASE(m_block_tokens, f.m.block_tokens = 0)
MCASE(m_position, f.m.position_base = 3)
MCASE(m_kind, f.a.kind = 7)
MCASE(m_semantic, f.a.semantic = (lsim_digest)LSIM_DIGEST_INIT)
MCASE(m_revision, f.a.artifact = (lsim_digest)LSIM_DIGEST_INIT)
MCASE(m_no_targets, f.a.ntargets = 0)
MCASE(m_target_layer, f.a.targets = T_BADL)
MCASE(m_target_proj, f.a.targets = T_BADP)
MCASE(m_target_dup, f.a.targets = T_DUP; f.a.ntargets = 2)
MCASE(m_lm_layer, f.a.targets = T_LM0)
MCASE(m_base_fields, f.a.kind = LSIM_KV_BASE)
MCASE(m_lora_invocation, f.a.kind = LSIM_KV_LORA)
MCASE(m_inv_empty, f.a.ninvocation = 0)
MCASE(m_inv_token, f.a.invocation = INVNEG)
MCASE(m_inv_absent, f.m.tokens = TOKNO)
MCASE(m_embeds_only, f.m.embeds_only = 1; f.m.tokens = NULL)
MCASE(m_offset, f.a.offset_mode = LSIM_KV_OFFSET_EXPLICIT;
      f.a.explicit_start = 4)
MCASE(m_offset_mode, f.a.explicit_start = 1)
MCASE(m_offset_enum, f.a.offset_mode = 5)
MCASE(m_merged, f.a.merged = 1)
MCASE(m_beam, f.a.beam = 1)

#define SCASE(name, fields, mode)                                  \
  static lsim_err name(lsim_errbuf *eb) {                          \
    return lsim_kv_key_schema_check((fields), (mode), eb);         \
  }
SCASE(s_request_id, LSIM_KV_F_REQUIRED | LSIM_KV_F_REQUEST_ID, 4)
SCASE(s_slot, LSIM_KV_F_REQUIRED | LSIM_KV_F_SLOT, 4)
SCASE(s_slot_gen, LSIM_KV_F_REQUIRED | LSIM_KV_F_SLOT_GEN, 4)
SCASE(s_ptr_gen, LSIM_KV_F_REQUIRED | LSIM_KV_F_POINTER_GEN, 4)
SCASE(s_block_ids, LSIM_KV_F_REQUIRED | LSIM_KV_F_BLOCK_IDS, 4)
SCASE(s_sampling, LSIM_KV_F_REQUIRED | LSIM_KV_F_SAMPLING, 4)
SCASE(s_raw_adapter, LSIM_KV_F_REQUIRED | LSIM_KV_F_RAW_ADAPTER, 4)
SCASE(s_no_exec, LSIM_KV_F_REQUIRED & ~LSIM_KV_F_EXEC, 4)
SCASE(s_no_tokens, LSIM_KV_F_REQUIRED & ~LSIM_KV_F_TOKENS, 4)
SCASE(s_no_cache_abi, LSIM_KV_F_REQUIRED & ~LSIM_KV_F_CACHE_ABI, 4)
SCASE(s_no_side, LSIM_KV_F_REQUIRED & ~LSIM_KV_F_SIDE, 4)
SCASE(s_no_ns, LSIM_KV_F_REQUIRED & ~LSIM_KV_F_NAMESPACE, 4)
SCASE(s_no_graph, LSIM_KV_F_REQUIRED & ~LSIM_KV_F_GRAPH, 4)
SCASE(s_unknown, LSIM_KV_F_REQUIRED | (1u << 30), 4)

/* Reuse claims: producer p, consumer q one field apart. */
#define RCASE(name, pinit, qinit, obj, rows, mut)          \
  static lsim_err name(lsim_errbuf *eb) {                  \
    fx p, q;                                               \
    pinit;                                                 \
    qinit;                                                 \
    mut;                                                   \
    return lsim_kv_reuse_check(&p.m, &q.m, obj, rows, eb); \
  }
static const int64_t TOKX[4] = {11, 13, 99, 100};
static const int64_t INV12[1] = {12};
RCASE(r_namespace, fx_base(&p), fx_base(&q), LSIM_KV_OBJ_KV, 4,
      q.m.isolation = D("tenant-1"))
RCASE(r_base, fx_base(&p), fx_base(&q), LSIM_KV_OBJ_KV, 4,
      q.m.base_abi = D("base-v2"))
RCASE(r_graph, fx_base(&p), fx_base(&q), LSIM_KV_OBJ_KV, 4,
      q.g.revision = D("graph-r2"))
RCASE(r_cache_abi, fx_base(&p), fx_base(&q), LSIM_KV_OBJ_KV, 4,
      q.m.cache_abi = D("cache-fp8-paged"))
RCASE(r_side, fx_base(&p), fx_base(&q), LSIM_KV_OBJ_KV, 4,
      q.m.side_inputs = D("image-1"))
RCASE(r_tokens, fx_base(&p), fx_base(&q), LSIM_KV_OBJ_KV, 4,
      q.m.tokens = TOKX)
RCASE(r_kv_target, fx_base(&p), fx_lora(&q, "K", T_K0, 1), LSIM_KV_OBJ_KV, 4,
      (void)0)
RCASE(r_downstream, fx_base(&p), fx_lora(&q, "Q", T_Q0, 1), LSIM_KV_OBJ_KV, 4,
      (void)0)
RCASE(r_logits, fx_base(&p), fx_lora(&q, "L", T_LM, 1), LSIM_KV_OBJ_LOGITS, 4,
      (void)0)
RCASE(r_hidden, fx_base(&p), fx_lora(&q, "Q", T_Q1, 1), LSIM_KV_OBJ_HIDDEN, 4,
      (void)0)
RCASE(r_tainted, fx_alora(&p, "A"), fx_base(&q), LSIM_KV_OBJ_KV, 3, (void)0)
RCASE(r_boundary, fx_alora(&p, "A"), fx_alora(&q, "A"), LSIM_KV_OBJ_KV, 3,
      q.a.offset_mode = LSIM_KV_OFFSET_EXPLICIT; q.a.explicit_start = 1)
RCASE(r_block, fx_base(&p), fx_alora(&q, "A"), LSIM_KV_OBJ_KV, 1,
      p.m.block_tokens = q.m.block_tokens = 2; q.a.invocation = INV12;
      q.a.ninvocation = 1)
RCASE(r_unproven, fx_base(&p), fx_lora(&q, "L", T_LM, 1), LSIM_KV_OBJ_KV, 4,
      p.g.arch = q.g.arch = LSIM_KV_ARCH_PARALLEL)
RCASE(r_revision, fx_lora(&p, "A", T_Q0, 1), fx_lora(&q, "A", T_Q0, 1),
      LSIM_KV_OBJ_KV, 4, q.a.artifact = D("art-A-v2"))
RCASE(r_rows, fx_base(&p), fx_base(&q), LSIM_KV_OBJ_KV, 5, (void)0)

/* Cache protocol cases. */
static lsim_err c_with(int which, lsim_errbuf *eb) {
  cache_fx c;
  cache_open(&c, 4, 8);
  fx b;
  fx_base(&b);
  lsim_kv_keys k;
  keys_of(&b, LSIM_KV_KEYS_ALORA, &k);
  lsim_digest ns = D("tenant-0");
  lsim_prefix_receipt r = LSIM_PREFIX_RECEIPT_INIT,
                      r2 = LSIM_PREFIX_RECEIPT_INIT;
  lsim_err rc = 0;
  switch (which) {
  case 0: /* lookup by a principal without a grant */
    rc = lsim_prefix_lookup(c.pc, 7, &ns, &k, NULL, -1, &r, eb);
    break;
  case 1: /* publish without the lookup that opens the receipt */
    rc = lsim_prefix_publish(c.pc, &r, &k, NULL, -1, -1, NULL, eb);
    break;
  case 2: /* publish past the full blocks */
    lsim_prefix_lookup(c.pc, 0, &ns, &k, NULL, -1, &r, NULL);
    rc = lsim_prefix_publish(c.pc, &r, &k, NULL, -1, 5, NULL, eb);
    break;
  case 3: { /* publish a receipt's rows under another request's keys */
    fx a;
    fx_lora(&a, "A", T_Q0, 1);
    lsim_kv_keys ka;
    keys_of(&a, LSIM_KV_KEYS_ALORA, &ka);
    lsim_prefix_lookup(c.pc, 0, &ns, &k, NULL, -1, &r, NULL);
    lsim_prefix_publish(c.pc, &r, &k, NULL, -1, 2, NULL, NULL);
    rc = lsim_prefix_publish(c.pc, &r, &ka, NULL, 0, -1, NULL, eb);
    lsim_kv_keys_release(&ka);
    break;
  }
  case 4: /* write a published block in place */
    lsim_prefix_lookup(c.pc, 0, &ns, &k, NULL, -1, &r, NULL);
    lsim_prefix_publish(c.pc, &r, &k, NULL, -1, -1, NULL, NULL);
    rc = lsim_prefix_write(c.pc, &r, 0, eb);
    break;
  case 5: /* fork more blocks than the receipt holds */
    lsim_prefix_lookup(c.pc, 0, &ns, &k, NULL, -1, &r, NULL);
    lsim_prefix_publish(c.pc, &r, &k, NULL, -1, 2, NULL, NULL);
    rc = lsim_prefix_fork(c.pc, &r, 3, &r2, eb);
    break;
  case 6: /* a handle whose generation moved on */
    lsim_prefix_lookup(c.pc, 0, &ns, &k, NULL, -1, &r, NULL);
    lsim_prefix_publish(c.pc, &r, &k, NULL, -1, 1, NULL, NULL);
    r.ref[0].gen += 100;
    rc = lsim_prefix_write(c.pc, &r, 0, eb);
    r.ref[0].gen -= 100;
    break;
  case 7: { /* release the same references twice */
    lsim_prefix_lookup(c.pc, 0, &ns, &k, NULL, -1, &r, NULL);
    lsim_prefix_publish(c.pc, &r, &k, NULL, -1, 1, NULL, NULL);
    r2 = r;
    r2.ref = malloc(sizeof *r2.ref);
    r2.ref[0] = r.ref[0];
    lsim_prefix_unref(c.pc, &r, NULL);
    rc = lsim_prefix_unref(c.pc, &r2, eb);
    break;
  }
  case 8: { /* a cache without any namespace grant */
    lsim_prefix *pc2;
    lsim_prefix_cfg cfg = {1, 1, 4, 0, c.pool, NULL, 0};
    rc = lsim_prefix_new(&pc2, &cfg, eb);
    break;
  }
  case 9: { /* zero pages per block */
    lsim_prefix *pc2;
    lsim_prefix_cfg cfg = {1, 0, 4, 0, c.pool, c.grants, 1};
    rc = lsim_prefix_new(&pc2, &cfg, eb);
    break;
  }
  case 10: /* copy-on-write with every page referenced */
    lsim_prefix_lookup(c.pc, 0, &ns, &k, NULL, -1, &r, NULL);
    lsim_prefix_publish(c.pc, &r, &k, NULL, -1, -1, NULL, NULL);
    rc = lsim_prefix_cow(c.pc, &r, 0, eb);
    break;
  case 11: { /* keys of another block size */
    fx b2;
    fx_base(&b2);
    b2.m.block_tokens = 2;
    lsim_kv_keys k2;
    keys_of(&b2, LSIM_KV_KEYS_ALORA, &k2);
    rc = lsim_prefix_lookup(c.pc, 0, &ns, &k2, NULL, -1, &r, eb);
    lsim_kv_keys_release(&k2);
    break;
  }
  }
  lsim_prefix_unref(c.pc, &r, NULL);
  lsim_prefix_unref(c.pc, &r2, NULL);
  lsim_kv_keys_release(&k);
  lsim_prefix_release(c.pc);
  lsim_res_release(c.pool);
  return rc;
}
#define CCASE(name, n) \
  static lsim_err name(lsim_errbuf *eb) { return c_with(n, eb); }
CCASE(c_unauthorized, 0)
CCASE(c_publish_order, 1)
CCASE(c_partial, 2)
CCASE(c_relabel, 3)
CCASE(c_immutable, 4)
CCASE(c_fork, 5)
CCASE(c_stale, 6)
CCASE(c_refcount, 7)
CCASE(c_grant, 8)
CCASE(c_cfg, 9)
CCASE(c_nospace, 10)
CCASE(c_block_size, 11)

static lsim_err w_with(int which, lsim_errbuf *eb) {
  lsim_kvw_spec s;
  witness_spec(&s);
  lsim_kvw_trace tr;
  lsim_kvw_delta d = {0, LSIM_KV_Q, {"1/2"}, NULL};
  int nd = 0;
  if (which == 0)
    s.layers = 5;
  else if (which == 1)
    s.exp_base = 1;
  else
    nd = 1; /* logit 1/2 over base 3: sqrt(3) is not rational */
  lsim_err rc = lsim_kvw_run(&s, &d, nd, &tr, eb);
  lsim_kvw_trace_clear(&tr);
  return rc;
}
static lsim_err w_shape(lsim_errbuf *eb) { return w_with(0, eb); }
static lsim_err w_base(lsim_errbuf *eb) { return w_with(1, eb); }
static lsim_err w_inexact(lsim_errbuf *eb) { return w_with(2, eb); }

static const struct {
  const char *name;
  case_fn fn;
  lsim_err want;
} CASES[] = {
    {"base_abi missing", m_base_abi, LSIM_E_KV_BASE_ABI},
    {"cache_abi missing", m_cache_abi, LSIM_E_KV_CACHE_ABI},
    {"graph revision missing", m_graph_rev, LSIM_E_KV_GRAPH_REV},
    {"graph arch unknown", m_graph_arch, LSIM_E_KV_GRAPH_ARCH},
    {"graph layers 0", m_graph_layers, LSIM_E_KV_GRAPH_LAYERS},
    {"side inputs missing", m_side, LSIM_E_KV_SIDE_INPUTS},
    {"isolation missing", m_isolation, LSIM_E_KV_ISOLATION},
    {"no tokens", m_ntokens, LSIM_E_KV_TOKENS},
    {"negative token", m_token_id, LSIM_E_KV_TOKEN_ID},
    {"block tokens 0", m_block_tokens, LSIM_E_KV_BLOCK_TOKENS},
    {"positions not from 0", m_position, LSIM_E_KV_POSITION},
    {"adapter kind unknown", m_kind, LSIM_E_KV_ADAPTER_KIND},
    {"semantic ABI missing", m_semantic, LSIM_E_KV_SEMANTIC},
    {"revision omitted under alias", m_revision, LSIM_E_KV_REVISION},
    {"no targets", m_no_targets, LSIM_E_KV_NO_TARGETS},
    {"target layer out of graph", m_target_layer, LSIM_E_KV_TARGET_LAYER},
    {"target projection unknown", m_target_proj, LSIM_E_KV_TARGET_PROJ},
    {"target listed twice", m_target_dup, LSIM_E_KV_TARGET_DUP},
    {"lm_head given a layer", m_lm_layer, LSIM_E_KV_TARGET_LAYER},
    {"base with adapter fields", m_base_fields, LSIM_E_KV_BASE_FIELDS},
    {"ordinary LoRA with invocation", m_lora_invocation,
     LSIM_E_KV_LORA_INVOCATION},
    {"aLoRA without invocation", m_inv_empty, LSIM_E_KV_INVOCATION_EMPTY},
    {"invocation token negative", m_inv_token, LSIM_E_KV_INVOCATION_TOKEN},
    {"invocation absent served as base", m_inv_absent,
     LSIM_E_KV_INVOCATION_ABSENT},
    {"inputs_embeds disables aLoRA", m_embeds_only, LSIM_E_KV_EMBEDS_ONLY},
    {"explicit offset out of range", m_offset, LSIM_E_KV_OFFSET},
    {"explicit offset in derive mode", m_offset_mode, LSIM_E_KV_OFFSET_MODE},
    {"offset mode unknown", m_offset_enum, LSIM_E_KV_OFFSET_MODE},
    {"aLoRA merged", m_merged, LSIM_E_KV_MERGED},
    {"aLoRA beam search", m_beam, LSIM_E_KV_BEAM},
    {"key has request id", s_request_id, LSIM_E_KV_KEY_REQUEST_ID},
    {"key has slot", s_slot, LSIM_E_KV_KEY_SLOT},
    {"key has slot generation", s_slot_gen, LSIM_E_KV_KEY_SLOT_GEN},
    {"key has pointer generation", s_ptr_gen, LSIM_E_KV_KEY_POINTER_GEN},
    {"key has physical block ids", s_block_ids, LSIM_E_KV_KEY_BLOCK_IDS},
    {"key has sampling policy", s_sampling, LSIM_E_KV_KEY_SAMPLING},
    {"raw aLoRA id before invocation", s_raw_adapter,
     LSIM_E_KV_KEY_RAW_ADAPTER},
    {"adapter omitted after activation", s_no_exec, LSIM_E_KV_KEY_NO_EXEC},
    {"key without tokens", s_no_tokens, LSIM_E_KV_KEY_NO_TOKENS},
    {"key without cache ABI", s_no_cache_abi, LSIM_E_KV_KEY_NO_CACHE_ABI},
    {"key without side inputs", s_no_side, LSIM_E_KV_KEY_NO_SIDE},
    {"key without namespace", s_no_ns, LSIM_E_KV_KEY_NO_NAMESPACE},
    {"key without graph revision", s_no_graph, LSIM_E_KV_KEY_NO_GRAPH},
    {"key with unknown field", s_unknown, LSIM_E_KV_KEY_UNKNOWN},
    {"reuse across namespaces", r_namespace, LSIM_E_KV_REUSE_NAMESPACE},
    {"reuse across base ABIs", r_base, LSIM_E_KV_REUSE_BASE},
    {"reuse across graph revisions", r_graph, LSIM_E_KV_REUSE_GRAPH},
    {"reuse across representations", r_cache_abi, LSIM_E_KV_REUSE_CACHE_ABI},
    {"reuse across side inputs", r_side, LSIM_E_KV_REUSE_SIDE},
    {"reuse across token ids", r_tokens, LSIM_E_KV_REUSE_TOKENS},
    {"base K/V for a direct K adapter", r_kv_target,
     LSIM_E_KV_REUSE_KV_TARGET},
    {"base K/V for a Q-only LoRA", r_downstream, LSIM_E_KV_REUSE_DOWNSTREAM},
    {"K/V match taken as logit match", r_logits, LSIM_E_KV_REUSE_LOGITS},
    {"base hidden state for a last-layer Q LoRA", r_hidden,
     LSIM_E_KV_REUSE_HIDDEN},
    {"tainted aLoRA suffix relabelled base", r_tainted,
     LSIM_E_KV_REUSE_TAINTED},
    {"same aLoRA, other boundary", r_boundary, LSIM_E_KV_REUSE_BOUNDARY},
    {"boundary inside a reused block", r_block, LSIM_E_KV_REUSE_BLOCK},
    {"module-name shortcut on an unproven graph", r_unproven,
     LSIM_E_KV_UNPROVEN},
    {"same alias, new revision", r_revision, LSIM_E_KV_REUSE_REVISION},
    {"reuse past the prompt", r_rows, LSIM_E_KV_TOKENS},
    {"candidate before authorization", c_unauthorized,
     LSIM_E_KV_UNAUTHORIZED},
    {"publish before lookup", c_publish_order, LSIM_E_KV_PUBLISH_ORDER},
    {"publish a partial tail block", c_partial, LSIM_E_KV_PARTIAL_BLOCK},
    {"publish under another key", c_relabel, LSIM_E_KV_RELABEL},
    {"write a published block", c_immutable, LSIM_E_KV_IMMUTABLE},
    {"fork past the receipt", c_fork, LSIM_E_KV_RECEIPT},
    {"stale block handle", c_stale, LSIM_E_KV_STALE_HANDLE},
    {"double release", c_refcount, LSIM_E_KV_REFCOUNT},
    {"cache without grants", c_grant, LSIM_E_KV_GRANT},
    {"cache with zero pages per block", c_cfg, LSIM_E_KV_CFG},
    {"copy-on-write without pages", c_nospace, LSIM_E_KV_NOSPACE},
    {"keys of another block size", c_block_size, LSIM_E_KV_BLOCK_TOKENS},
    {"witness too many layers", w_shape, LSIM_E_KV_WITNESS_SHAPE},
    {"witness softmax base 1", w_base, LSIM_E_KV_WITNESS_BASE},
    {"witness irrational weight", w_inexact, LSIM_E_KV_WITNESS_INEXACT},
};

Test(malformed, one_field_each_fails_closed_with_its_code) {
  int n = (int)(sizeof CASES / sizeof CASES[0]);
  cr_assert_geq(n, 55);
  int distinct = 0;
  for (int i = 0; i < n; i++) {
    lsim_errbuf eb = LSIM_ERRBUF_INIT;
    lsim_err rc = CASES[i].fn(&eb);
    cr_expect_eq(rc, CASES[i].want, "%s: got %s (%s), want %s", CASES[i].name,
                 lsim_err_name(rc), eb.msg, lsim_err_name(CASES[i].want));
    cr_expect(rc == 0 || eb.msg[0], "%s: no message", CASES[i].name);
    int seen = 0;
    for (int j = 0; j < i; j++)
      seen |= CASES[j].want == CASES[i].want;
    distinct += !seen;
  }
  cr_assert_geq(distinct, 52, "%d distinct codes", distinct);
}

Test(malformed, valid_fixtures_pass) {
  /* the unmutated fixtures are valid, so each case fails by its mutation */
  fx f;
  fx_alora(&f, "A");
  cr_assert_eq(derive(&f, NULL), 0);
  fx p, q;
  fx_base(&p);
  fx_base(&q);
  cr_assert_eq(lsim_kv_reuse_check(&p.m, &q.m, LSIM_KV_OBJ_KV, 4, NULL), 0);
  fx_lora(&q, "L", T_LM, 1);
  cr_assert_eq(lsim_kv_reuse_check(&p.m, &q.m, LSIM_KV_OBJ_KV, 4, NULL), 0);
  fx_alora(&q, "A");
  cr_assert_eq(lsim_kv_reuse_check(&p.m, &q.m, LSIM_KV_OBJ_KV, 2, NULL), 0);
  cr_assert_eq(lsim_kv_key_schema_check(LSIM_KV_F_REQUIRED, 4, NULL), 0);
}
