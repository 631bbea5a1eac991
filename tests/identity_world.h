/*
** identity_world.h: the synthetic adapter world of the identity tests
** (q_proj rank 2, v_proj rank 4, two TP ranks) with its digest helpers,
** shared by test_identity.c and test_typed_failures.c.  Functions are
** static inline so a suite may use any subset of them.
*/
#ifndef LSIM_TEST_IDENTITY_WORLD_H
#define LSIM_TEST_IDENTITY_WORLD_H
#include <criterion/criterion.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <string.h>

#include "engine/identity.h"

static inline lsim_digest fill(uint8_t byte) {
  lsim_digest d;
  memset(d.b, byte, sizeof d.b);
  return d;
}

/* SHA-256 through OpenSSL's one-shot call, independent of lsim_sha256. */
static inline lsim_digest sha(const void *p, size_t n) {
  lsim_digest d;
  unsigned int len = 0;
  cr_assert_eq(EVP_Digest(p, n, d.b, &len, EVP_sha256(), NULL), 1);
  cr_assert_eq(len, 32u);
  return d;
}

static inline void pattern(uint8_t *p, size_t n, unsigned salt) {
  for (size_t i = 0; i < n; i++)
    p[i] = (uint8_t)(i * 7u + salt);
}

/* ------------------------------------------------------ fixture world */

#define QPROJ "layers.0.self_attn.q_proj"
#define VPROJ "layers.0.self_attn.v_proj"

typedef struct world {
  uint8_t qa[2 * 8 * 2], qb[8 * 2 * 2]; /* q_proj A [2,8], B [8,2], f16 */
  uint8_t va[4 * 8 * 2], vb[8 * 4 * 2]; /* v_proj A [4,8], B [8,4], f16 */
  lsim_base_abi_in base;
  lsim_digest base_d;
  lsim_module_spec mods[2];
  lsim_artifact_in art;
  lsim_digest art_d;
  lsim_semantic_in sem;
  lsim_digest sem_d;
  lsim_module_layout lay[2];
  lsim_kernel_in ker;
  lsim_digest ker_d;
  lsim_request_in req;
  lsim_digest req_d;
  lsim_slot_in slot;
  lsim_digest slot_d;
  int64_t tokens[5];
  size_t ntok;
  lsim_prefix_in prefix;
  lsim_digest prefix_d;
  lsim_residency claimed;
  lsim_launch_snapshot snap;
  lsim_launch_owners owners;
  lsim_genvec adv;
  int adv_component;
  const void *fbytes;
  size_t flen;
  lsim_digest fexpect;
  char longname[1100];
} world;

static inline lsim_module_spec spec(const char *name, const char *role, int64_t r,
                             int64_t alpha, const uint8_t *a, size_t alen,
                             const uint8_t *b, size_t blen) {
  lsim_module_spec m = {
      name, role, 8, 8, r, alpha, LSIM_SCALE_ALPHA_OVER_RANK,
      {LSIM_AXIS_RANK, LSIM_AXIS_INPUT}, {LSIM_AXIS_OUTPUT, LSIM_AXIS_RANK},
      a, alen, b, blen};
  return m;
}

/* Punica-style physical layout for TP rank q of 2, B split over output. */
static inline lsim_module_layout layout(const char *name, int64_t q) {
  lsim_module_layout l = {name, {LSIM_AXIS_RANK, LSIM_AXIS_INPUT},
                          {LSIM_AXIS_RANK, LSIM_AXIS_OUTPUT},
                          q * 4, q * 4 + 4, 0, 8};
  return l;
}

/* The cache manifest owns the cache ABI; a stand-in derived from the
** semantic ABI is enough to show what the prefix key inherits. */
static inline lsim_digest cache_abi_of(const lsim_digest *sem) {
  uint8_t buf[10 + 32];
  memcpy(buf, "cache-abi:", 10);
  memcpy(buf + 10, sem->b, 32);
  return sha(buf, sizeof buf);
}

/* Recompute every derived digest from the inputs, in dependency order. */
static inline void world_derive(world *w) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_id_base_abi(&w->base, &w->base_d, &eb), 0, "%s", eb.msg);
  w->art.base_abi = w->base_d;
  cr_assert_eq(lsim_id_artifact(&w->art, &w->art_d, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_id_semantic(&w->sem, &w->sem_d, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_id_kernel(&w->ker, &w->ker_d, &eb), 0, "%s", eb.msg);
  w->req.base_abi = w->base_d;
  w->req.adapter_semantic = w->sem_d;
  cr_assert_eq(lsim_id_request(&w->req, &w->req_d, &eb), 0, "%s", eb.msg);
  w->slot.adapter_semantic = w->sem_d;
  w->slot.kernel_local = w->ker_d;
  cr_assert_eq(lsim_id_slot(&w->slot, &w->slot_d, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_id_tokens(w->tokens, w->ntok, &w->prefix.prompt_tokens,
                              &eb), 0, "%s", eb.msg);
  w->prefix.cache_abi = cache_abi_of(&w->sem_d);
  cr_assert_eq(lsim_id_prefix(&w->prefix, &w->prefix_d, &eb), 0, "%s",
               eb.msg);
  cr_assert_eq(lsim_id_residency(w->mods, 2, LSIM_DT_F16, &w->ker.shard,
                                 &w->claimed, &eb), 0, "%s", eb.msg);
  /* a launch snapshot frozen now, and owners that still agree */
  w->snap.request_binding = w->req_d;
  w->snap.slot_binding = w->slot_d;
  w->snap.kernel_local = w->ker_d;
  w->owners.request.binding = w->req_d;
  w->owners.request.base_abi = w->base_d;
  w->owners.request.adapter_semantic = w->sem_d;
  w->owners.adapter.base_abi = w->base_d;
  w->owners.adapter.adapter_semantic = w->sem_d;
  w->owners.slot.binding = w->slot_d;
  w->owners.slot.adapter_semantic = w->sem_d;
  w->owners.slot.kernel_local = w->ker_d;
  w->owners.cache.adapter_semantic = w->sem_d;
}

static inline void world_init(world *w) {
  memset(w, 0, sizeof *w);
  pattern(w->qa, sizeof w->qa, 1);
  pattern(w->qb, sizeof w->qb, 2);
  pattern(w->va, sizeof w->va, 3);
  pattern(w->vb, sizeof w->vb, 4);
  w->base.model_weights = fill(0x11);
  w->base.model_config = fill(0x22);
  w->base.weight_transform = fill(0x33);
  w->base.target_module_map = fill(0x44);
  w->mods[0] = spec(QPROJ, "q_proj", 2, 4, w->qa, sizeof w->qa, w->qb,
                    sizeof w->qb);
  w->mods[1] = spec(VPROJ, "v_proj", 4, 8, w->va, sizeof w->va, w->vb,
                    sizeof w->vb);
  w->art.method = "lora";
  w->art.peft_config = fill(0x55);
  w->art.dtype = LSIM_DT_F16;
  w->art.modules = w->mods;
  w->art.n_modules = 2;
  w->sem.artifact = &w->art;
  w->sem.activation_policy = fill(0x66);
  w->lay[0] = layout(QPROJ, 0);
  w->lay[1] = layout(VPROJ, 0);
  w->ker.semantic = &w->sem;
  w->ker.kernel_family = "punica_sgmv";
  w->ker.conversion_revision = 1;
  w->ker.dtype = LSIM_DT_F16;
  w->ker.packing = "dense";
  w->ker.layouts = w->lay;
  w->ker.n_layouts = 2;
  w->ker.shard = (lsim_shard){0, 2, LSIM_SHARD_OUTPUT};
  w->req.request_namespace = "tenant-a";
  w->req.request_id = "req-17";
  w->req.attempt = 0;
  w->req.lineage_id = "lineage-17";
  w->req.generation_policy = fill(0x77);
  w->slot = (lsim_slot_in){0, 1, 0, 3, 11, 31, LSIM_DIGEST_INIT,
                           LSIM_DIGEST_INIT};
  int64_t toks[5] = {1, 15043, 3186, 29871, 13};
  memcpy(w->tokens, toks, sizeof toks);
  w->ntok = 5;
  w->prefix.side_inputs = sha("", 0);
  w->prefix.isolation_salt = fill(0x88);
  /* generation vector observed at freeze time: catalog 8, attempt 0,
  ** slot 11, pointer table 31, batch plan 5, cache 40, rng 2 */
  lsim_genvec g = {{8, 0, 11, 31, 5, 40, 2}};
  w->snap.gen = g;
  w->owners.gen = g;
  w->adv = g;
  w->adv_component = LSIM_GEN_SLOT;
  w->fbytes = w->va;
  w->flen = sizeof w->va;
  w->fexpect = sha(w->va, sizeof w->va);
  memset(w->longname, 'x', sizeof w->longname - 1);
  world_derive(w);
}

/* ------------------------------------------------- digests and encoding */

#endif /* LSIM_TEST_IDENTITY_WORLD_H */
