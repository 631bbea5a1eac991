/*
** Identities, bindings, the residency trace and launch validation
** (article 0x01G).  The fixture world is the article's synthetic adapter:
** q_proj rank 2 alpha 4 and v_proj rank 4 alpha 8 over [8, 8] projections,
** 2-byte scalars, two TP ranks with A replicated and B split over output.
*/
#include <criterion/criterion.h>

#include <ctype.h>
#include <openssl/evp.h>
#include <string.h>

#include "engine/identity.h"

/* ----------------------------------------------------------- helpers */


static const char *hex(const lsim_digest *d) {
  static char buf[4][LSIM_DIGEST_HEX_SIZE];
  static int k;
  k = (k + 1) % 4;
  return lsim_digest_hex(d, buf[k]);
}


static int contains(const lsim_canon *c, const char *s) {
  size_t n = strlen(s);
  for (size_t i = 0; i + n <= c->len; i++)
    if (memcmp(c->buf + i, s, n) == 0)
      return 1;
  return 0;
}

#include "identity_world.h"

Test(identity, hex_formatter_matches_a_known_sha256) {
  lsim_digest d;
  cr_assert_eq(lsim_sha256("abc", 3, &d, NULL), 0);
  cr_assert_str_eq(hex(&d), "ba7816bf8f01cfea414140de5dae2223"
                            "b00361a396177a9cb410ff61f20015ad");
  lsim_digest z = LSIM_DIGEST_INIT;
  cr_assert(lsim_digest_is_zero(&z));
  cr_assert_not(lsim_digest_is_zero(&d));
  cr_assert(lsim_digest_eq(&d, &d));
  cr_assert_not(lsim_digest_eq(&d, &z));
}

/* An encoder written from docs/IDENTITY.md, sharing no code with
** engine/identity.c. */
typedef struct tbuf {
  uint8_t b[4096];
  size_t n;
} tbuf;
static void t_raw(tbuf *t, const void *p, size_t n) {
  cr_assert_leq(t->n + n, sizeof t->b);
  memcpy(t->b + t->n, p, n);
  t->n += n;
}
static void t_u32(tbuf *t, uint32_t v) {
  uint8_t b[4] = {v >> 24, (v >> 16) & 255, (v >> 8) & 255, v & 255};
  t_raw(t, b, 4);
}
static void t_i(tbuf *t, int64_t v) {
  uint8_t b[9] = {'i'};
  for (int i = 0; i < 8; i++)
    b[1 + i] = (uint8_t)((uint64_t)v >> (56 - 8 * i));
  t_raw(t, b, 9);
}
static void t_s(tbuf *t, const char *s) {
  t_raw(t, "s", 1);
  t_u32(t, (uint32_t)strlen(s));
  t_raw(t, s, strlen(s));
}
static void t_d(tbuf *t, const lsim_digest *d) {
  t_raw(t, "d", 1);
  t_raw(t, d->b, 32);
}
static void t_m(tbuf *t, uint32_t pairs) {
  t_raw(t, "m", 1);
  t_u32(t, pairs);
}
static void t_l(tbuf *t, uint32_t items) {
  t_raw(t, "l", 1);
  t_u32(t, items);
}

/* The worked example of docs/IDENTITY.md. */
#define WORKED_BASE_ABI \
  "4a5743c78a66c1194c86cbd363468f653eb3316844f39b2ad85068072a54fe1f"

Test(identity, worked_base_abi_digest_matches_an_independent_encoding) {
  world w;
  world_init(&w);
  tbuf t = {{0}, 0};
  t_m(&t, 5);
  t_s(&t, "model_config_sha256");
  t_d(&t, &w.base.model_config);
  t_s(&t, "model_weights_sha256");
  t_d(&t, &w.base.model_weights);
  t_s(&t, "schema");
  t_s(&t, "lorasim.id.base_abi.v1");
  t_s(&t, "target_module_map_sha256");
  t_d(&t, &w.base.target_module_map);
  t_s(&t, "weight_transform_sha256");
  t_d(&t, &w.base.weight_transform);

  lsim_canon c = LSIM_CANON_INIT;
  cr_assert_eq(lsim_id_base_abi_canon(&w.base, &c, NULL), 0);
  cr_assert_eq(c.len, t.n);
  cr_assert_eq(memcmp(c.buf, t.b, t.n), 0);
  lsim_digest ind = sha(t.b, t.n);
  cr_assert(lsim_digest_eq(&ind, &w.base_d));
  cr_assert_str_eq(hex(&w.base_d), WORKED_BASE_ABI, "got %s",
                   hex(&w.base_d));
  lsim_canon_release(&c);
  cr_assert_null(c.buf);
}

static void t_module(tbuf *t, const char *name, const char *role, int64_t r,
                     int64_t alpha, const uint8_t *a, size_t alen,
                     const uint8_t *b, size_t blen) {
  lsim_digest ha = sha(a, alen), hb = sha(b, blen);
  t_m(t, 10);
  t_s(t, "a_axes");
  t_l(t, 2);
  t_s(t, "rank");
  t_s(t, "input");
  t_s(t, "a_sha256");
  t_d(t, &ha);
  t_s(t, "alpha");
  t_i(t, alpha);
  t_s(t, "b_axes");
  t_l(t, 2);
  t_s(t, "output");
  t_s(t, "rank");
  t_s(t, "b_sha256");
  t_d(t, &hb);
  t_s(t, "base_shape");
  t_l(t, 2);
  t_i(t, 8);
  t_i(t, 8);
  t_s(t, "module");
  t_s(t, name);
  t_s(t, "rank");
  t_i(t, r);
  t_s(t, "role");
  t_s(t, role);
  t_s(t, "scaling");
  t_s(t, "alpha_over_rank");
}

#define WORKED_ARTIFACT \
  "87e587962c38b5554d03c829ca765db977c712e987a6b49f3c2da74ee7329be4"

Test(identity, artifact_bytes_match_an_independent_encoding) {
  world w;
  world_init(&w);
  tbuf t = {{0}, 0};
  t_m(&t, 6);
  t_s(&t, "base_abi_sha256");
  t_d(&t, &w.base_d);
  t_s(&t, "dtype");
  t_s(&t, "f16");
  t_s(&t, "method");
  t_s(&t, "lora");
  t_s(&t, "modules");
  t_l(&t, 2);
  t_module(&t, QPROJ, "q_proj", 2, 4, w.qa, sizeof w.qa, w.qb, sizeof w.qb);
  t_module(&t, VPROJ, "v_proj", 4, 8, w.va, sizeof w.va, w.vb, sizeof w.vb);
  t_s(&t, "peft_config_sha256");
  t_d(&t, &w.art.peft_config);
  t_s(&t, "schema");
  t_s(&t, "lorasim.id.adapter_artifact.v1");

  lsim_canon c = LSIM_CANON_INIT;
  cr_assert_eq(lsim_id_artifact_canon(&w.art, &c, NULL), 0);
  cr_assert_eq(c.len, t.n);
  cr_assert_eq(memcmp(c.buf, t.b, t.n), 0);
  lsim_digest ind = sha(t.b, t.n);
  cr_assert(lsim_digest_eq(&ind, &w.art_d));
  cr_assert_str_eq(hex(&w.art_d), WORKED_ARTIFACT, "got %s", hex(&w.art_d));
  lsim_canon_release(&c);
}

/* ------------------------------------------ the rank-and-shard trace */

Test(identity, rank_and_shard_trace_reproduces_the_article_ledger) {
  world w;
  world_init(&w);
  lsim_residency r0, r1;
  lsim_shard s0 = {0, 2, LSIM_SHARD_OUTPUT}, s1 = {1, 2, LSIM_SHARD_OUTPUT};
  cr_assert_eq(lsim_id_residency(w.mods, 2, LSIM_DT_F16, &s0, &r0, NULL), 0);
  cr_assert_eq(lsim_id_residency(w.mods, 2, LSIM_DT_F16, &s1, &r1, NULL), 0);
  /* 2(8+8) + 4(8+8) scalars, 2 bytes each */
  cr_assert_eq(r0.logical_scalars, 96);
  cr_assert_eq(r0.logical_bytes, 192);
  /* (2*8 + 4*2) + (4*8 + 4*4): all of A, half of each B */
  cr_assert_eq(r0.local_scalars, 72);
  cr_assert_eq(r0.local_bytes, 144);
  cr_assert_eq(r0.cluster_bytes, 288);
  cr_assert_eq(r1.local_scalars, 72);
  cr_assert_eq(r1.local_bytes, 144);
  cr_assert_eq(r1.cluster_bytes, 288);
  /* replicated A makes the cluster hold more than the unique payload */
  cr_assert_gt(r0.cluster_bytes, r0.logical_bytes);
  cr_assert_eq(lsim_id_residency_verify(w.mods, 2, LSIM_DT_F16, &s1, &r1,
                                        NULL), 0);

  /* full replication and row-parallel placement, same function */
  lsim_shard rep = {1, 2, LSIM_SHARD_REPLICATED};
  lsim_residency rr;
  cr_assert_eq(lsim_id_residency(w.mods, 2, LSIM_DT_F16, &rep, &rr, NULL), 0);
  cr_assert_eq(rr.local_scalars, 96);
  cr_assert_eq(rr.cluster_bytes, 384);
  lsim_shard one = {0, 1, LSIM_SHARD_OUTPUT};
  cr_assert_eq(lsim_id_residency(w.mods, 2, LSIM_DT_F16, &one, &rr, NULL), 0);
  cr_assert_eq(rr.local_bytes, 192);
  cr_assert_eq(rr.cluster_bytes, 192);
}

Test(identity, each_tp_rank_has_its_own_kernel_abi_and_output_range) {
  world w;
  world_init(&w);
  lsim_digest k0 = w.ker_d, k1;
  w.ker.shard.rank = 1;
  w.lay[0] = layout(QPROJ, 1);
  w.lay[1] = layout(VPROJ, 1);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_id_kernel(&w.ker, &k1, &eb), 0, "%s", eb.msg);
  cr_assert_not(lsim_digest_eq(&k0, &k1));
  /* the rank-1 kernel encoding carries B as [rank, d_out/2] over [4, 8) */
  lsim_canon c = LSIM_CANON_INIT;
  cr_assert_eq(lsim_id_kernel_canon(&w.ker, &c, NULL), 0);
  tbuf t = {{0}, 0};
  t_s(&t, "b_local_shape");
  t_l(&t, 2);
  t_i(&t, 4); /* rank of v_proj */
  t_i(&t, 4); /* d_out / 2 */
  t_s(&t, "b_physical_axes");
  t_l(&t, 2);
  t_s(&t, "rank");
  t_s(&t, "output");
  int found = 0;
  for (size_t i = 0; i + t.n <= c.len; i++)
    found |= memcmp(c.buf + i, t.b, t.n) == 0;
  cr_assert(found);
  tbuf r = {{0}, 0};
  t_s(&r, "output_range");
  t_l(&r, 2);
  t_i(&r, 4);
  t_i(&r, 8);
  found = 0;
  for (size_t i = 0; i + r.n <= c.len; i++)
    found |= memcmp(c.buf + i, r.b, r.n) == 0;
  cr_assert(found);
  lsim_canon_release(&c);

  /* the logical orientation of B is a different kernel ABI, same semantic */
  world_init(&w);
  w.lay[0].b_axes[0] = LSIM_AXIS_OUTPUT;
  w.lay[0].b_axes[1] = LSIM_AXIS_RANK;
  lsim_digest kl, sem;
  cr_assert_eq(lsim_id_kernel(&w.ker, &kl, NULL), 0);
  cr_assert_eq(lsim_id_semantic(&w.sem, &sem, NULL), 0);
  cr_assert_not(lsim_digest_eq(&kl, &w.ker_d));
  cr_assert(lsim_digest_eq(&sem, &w.sem_d));
}

/* ------------------------------------------------ required properties */

Test(identity, reload_into_a_new_slot_generation_changes_only_the_slot) {
  world w;
  world_init(&w);
  lsim_digest art = w.art_d, sem = w.sem_d, pre = w.prefix_d;
  lsim_digest ker = w.ker_d, slot11 = w.slot_d;
  lsim_launch_snapshot old = w.snap;

  /* the same bytes republished: slot generation 12, a rebuilt table */
  w.slot.slot_generation = 12;
  w.slot.pointer_table_generation = 32;
  world_derive(&w);
  cr_assert(lsim_digest_eq(&art, &w.art_d));
  cr_assert(lsim_digest_eq(&sem, &w.sem_d));
  cr_assert(lsim_digest_eq(&ker, &w.ker_d));
  cr_assert(lsim_digest_eq(&pre, &w.prefix_d));
  cr_assert_not(lsim_digest_eq(&slot11, &w.slot_d));

  /* a launch frozen against generation 11 no longer validates */
  w.owners.gen.g[LSIM_GEN_SLOT] = 12;
  w.owners.gen.g[LSIM_GEN_POINTER_TABLE] = 32;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_launch_validate(&old, &w.owners, &eb),
               LSIM_E_ID_STALE_SLOT);
  /* a new snapshot validates */
  w.snap.gen = w.owners.gen;
  cr_assert_eq(lsim_launch_validate(&w.snap, &w.owners, &eb), 0, "%s",
               eb.msg);
}

Test(identity, rank_byte_and_target_changes_change_the_artifact) {
  world base;
  world_init(&base);
  lsim_digest seen[16];
  int n = 0;
  seen[n++] = base.art_d;

  /* v_proj rank 4 -> 2, factors cut to the new shape */
  world w;
  world_init(&w);
  w.mods[1].rank = 2;
  w.mods[1].a_len = 2 * 8 * 2;
  w.mods[1].b_len = 8 * 2 * 2;
  world_derive(&w);
  seen[n++] = w.art_d;
  cr_assert_not(lsim_digest_eq(&w.sem_d, &base.sem_d));
  cr_assert_not(lsim_digest_eq(&w.prefix_d, &base.prefix_d));

  /* one factor byte */
  world_init(&w);
  w.vb[17] ^= 1;
  world_derive(&w);
  seen[n++] = w.art_d;
  cr_assert_not(lsim_digest_eq(&w.sem_d, &base.sem_d));
  cr_assert_not(lsim_digest_eq(&w.prefix_d, &base.prefix_d));

  /* retarget v_proj to k_proj, same bytes, same alias */
  world_init(&w);
  w.mods[1].name = "layers.0.self_attn.k_proj";
  w.mods[1].role = "k_proj";
  w.lay[1].module = w.mods[1].name;
  world_derive(&w);
  seen[n++] = w.art_d;
  cr_assert_not(lsim_digest_eq(&w.prefix_d, &base.prefix_d));

  /* every other field of the artifact matters too */
  world_init(&w);
  w.mods[0].alpha = 8;
  world_derive(&w);
  seen[n++] = w.art_d;
  world_init(&w);
  w.mods[0].scaling = LSIM_SCALE_ALPHA_OVER_SQRT_RANK;
  world_derive(&w);
  seen[n++] = w.art_d;
  world_init(&w);
  w.art.method = "dora";
  world_derive(&w);
  seen[n++] = w.art_d;
  world_init(&w);
  w.art.peft_config = fill(0x56);
  world_derive(&w);
  seen[n++] = w.art_d;
  world_init(&w);
  w.art.dtype = LSIM_DT_BF16;
  world_derive(&w);
  seen[n++] = w.art_d;
  world_init(&w);
  w.base.model_weights = fill(0x12);
  world_derive(&w);
  seen[n++] = w.art_d;
  world_init(&w);
  w.mods[0].role = "q_proj_fused";
  world_derive(&w);
  seen[n++] = w.art_d;
  /* swapping A and B bytes between modules of equal size */
  world_init(&w);
  uint8_t tmp[sizeof w.qa];
  memcpy(tmp, w.qa, sizeof tmp);
  memcpy(w.qa, w.qb, sizeof tmp);
  memcpy(w.qb, tmp, sizeof tmp);
  world_derive(&w);
  seen[n++] = w.art_d;

  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      cr_assert_not(lsim_digest_eq(&seen[i], &seen[j]),
                    "mutations %d and %d collide", i, j);

  /* the activation policy changes the semantic ABI, not the artifact */
  world_init(&w);
  w.sem.activation_policy = fill(0x67);
  world_derive(&w);
  cr_assert(lsim_digest_eq(&w.art_d, &base.art_d));
  cr_assert_not(lsim_digest_eq(&w.sem_d, &base.sem_d));
}

Test(identity, module_and_layout_input_order_do_not_matter) {
  uint8_t oa[3 * 8 * 2], ob[8 * 3 * 2];
  pattern(oa, sizeof oa, 5);
  pattern(ob, sizeof ob, 6);
  world w;
  world_init(&w);
  lsim_module_spec three[3] = {
      w.mods[0], w.mods[1],
      spec("layers.0.self_attn.o_proj", "o_proj", 3, 6, oa, sizeof oa, ob,
           sizeof ob)};
  lsim_module_layout lays[3] = {w.lay[0], w.lay[1],
                                layout("layers.0.self_attn.o_proj", 0)};
  static const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                  {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  lsim_digest first_art, first_ker;
  lsim_canon first = LSIM_CANON_INIT;
  for (int p = 0; p < 6; p++) {
    lsim_module_spec m[3];
    lsim_module_layout l[3];
    for (int i = 0; i < 3; i++) {
      m[i] = three[perms[p][i]];
      l[i] = lays[perms[5 - p][i]]; /* an unrelated order for layouts */
    }
    w.art.modules = m;
    w.art.n_modules = 3;
    w.ker.layouts = l;
    w.ker.n_layouts = 3;
    lsim_digest a, k;
    lsim_errbuf eb = LSIM_ERRBUF_INIT;
    cr_assert_eq(lsim_id_artifact(&w.art, &a, &eb), 0, "%s", eb.msg);
    cr_assert_eq(lsim_id_kernel(&w.ker, &k, &eb), 0, "%s", eb.msg);
    lsim_canon c = LSIM_CANON_INIT;
    cr_assert_eq(lsim_id_artifact_canon(&w.art, &c, NULL), 0);
    if (p == 0) {
      first_art = a;
      first_ker = k;
      first = c;
      continue;
    }
    cr_assert(lsim_digest_eq(&a, &first_art), "permutation %d", p);
    cr_assert(lsim_digest_eq(&k, &first_ker), "permutation %d", p);
    cr_assert_eq(c.len, first.len);
    cr_assert_eq(memcmp(c.buf, first.buf, c.len), 0);
    lsim_canon_release(&c);
  }
  lsim_canon_release(&first);
}

Test(identity, aliases_paths_and_display_names_are_not_inputs) {
  /* A catalog maps names to an artifact input; the names never reach it. */
  world w;
  world_init(&w);
  struct {
    const char *alias, *path, *display;
    const lsim_artifact_in *artifact;
  } catalog[2] = {
      {"customer-blue", "/srv/adapters/blue/v3/adapter.safetensors",
       "Customer Blue v3", &w.art},
      {"customer-green", "s3://bucket/green/adapter_model.bin",
       "Green (legacy)", &w.art},
  };
  lsim_digest d0, d1;
  cr_assert_eq(lsim_id_artifact(catalog[0].artifact, &d0, NULL), 0);
  cr_assert_eq(lsim_id_artifact(catalog[1].artifact, &d1, NULL), 0);
  cr_assert(lsim_digest_eq(&d0, &d1));

  lsim_canon c[6] = {LSIM_CANON_INIT, LSIM_CANON_INIT, LSIM_CANON_INIT,
                     LSIM_CANON_INIT, LSIM_CANON_INIT, LSIM_CANON_INIT};
  cr_assert_eq(lsim_id_artifact_canon(&w.art, &c[0], NULL), 0);
  cr_assert_eq(lsim_id_semantic_canon(&w.sem, &c[1], NULL), 0);
  cr_assert_eq(lsim_id_kernel_canon(&w.ker, &c[2], NULL), 0);
  cr_assert_eq(lsim_id_request_canon(&w.req, &c[3], NULL), 0);
  cr_assert_eq(lsim_id_slot_canon(&w.slot, &c[4], NULL), 0);
  cr_assert_eq(lsim_id_prefix_canon(&w.prefix, &c[5], NULL), 0);
  for (int i = 0; i < 6; i++) {
    for (int k = 0; k < 2; k++) {
      cr_assert_not(contains(&c[i], catalog[k].alias));
      cr_assert_not(contains(&c[i], catalog[k].path));
      cr_assert_not(contains(&c[i], catalog[k].display));
    }
    cr_assert_not(contains(&c[i], "customer"));
    lsim_canon_release(&c[i]);
  }

  /* the same alias over replaced bytes is a different artifact */
  w.qa[0] ^= 0x80;
  cr_assert_eq(lsim_id_artifact(catalog[0].artifact, &d1, NULL), 0);
  cr_assert_not(lsim_digest_eq(&d0, &d1));
}

Test(identity, prefix_ignores_request_and_slot_while_bindings_do_not) {
  world a, b;
  world_init(&a);
  world_init(&b);
  b.req.request_id = "req-18";
  b.req.attempt = 1;
  b.req.lineage_id = "lineage-18";
  b.req.generation_policy = fill(0x78); /* other sampling */
  b.slot.slot_index = 5;
  b.slot.worker_id = 2;
  world_derive(&b);
  cr_assert(lsim_digest_eq(&a.prefix_d, &b.prefix_d));
  cr_assert_not(lsim_digest_eq(&a.req_d, &b.req_d));
  cr_assert_not(lsim_digest_eq(&a.slot_d, &b.slot_d));
  /* an attempt alone changes the request binding */
  world_init(&b);
  b.req.attempt = 1;
  world_derive(&b);
  cr_assert_not(lsim_digest_eq(&a.req_d, &b.req_d));
  /* the prompt does change the prefix */
  world_init(&b);
  b.tokens[4] = 14;
  world_derive(&b);
  cr_assert_not(lsim_digest_eq(&a.prefix_d, &b.prefix_d));
  /* an empty prompt has one digest, whatever pointer it comes with */
  lsim_digest t0, t1;
  cr_assert_eq(lsim_id_tokens(NULL, 0, &t0, NULL), 0);
  cr_assert_eq(lsim_id_tokens(a.tokens, 0, &t1, NULL), 0);
  cr_assert(lsim_digest_eq(&t0, &t1));
}

Test(identity, generation_vector_components_are_independent) {
  lsim_genvec v = LSIM_GENVEC_INIT;
  for (int c = 0; c < LSIM_GEN_COUNT; c++) {
    cr_assert_not_null(lsim_gen_name(c));
    for (int k = 0; k <= c; k++)
      cr_assert_eq(lsim_genvec_advance(&v, c, NULL), 0);
  }
  for (int c = 0; c < LSIM_GEN_COUNT; c++)
    cr_assert_eq(v.g[c], c + 1);
  for (int c = 0; c < LSIM_GEN_COUNT; c++)
    for (int k = c + 1; k < LSIM_GEN_COUNT; k++)
      cr_assert_str_neq(lsim_gen_name(c), lsim_gen_name(k));
  cr_assert_null(lsim_gen_name(LSIM_GEN_COUNT));
  cr_assert_null(lsim_gen_name(-1));
}

Test(identity, a_consistent_launch_validates) {
  world w;
  world_init(&w);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_launch_validate(&w.snap, &w.owners, &eb), 0, "%s",
               eb.msg);
  cr_assert_eq(lsim_id_factor_verify(w.va, sizeof w.va, &w.fexpect, &eb), 0);
  lsim_digest h;
  cr_assert_eq(lsim_id_factor_hash(w.va, sizeof w.va, &h, &eb), 0);
  cr_assert(lsim_digest_eq(&h, &w.fexpect));
}

/* -------------------------------------------------- negative fixtures */

enum op {
  OP_BASE, OP_ARTIFACT, OP_SEMANTIC, OP_KERNEL, OP_REQUEST, OP_SLOT,
  OP_PREFIX, OP_TOKENS, OP_RESIDENCY, OP_LEDGER, OP_LAUNCH, OP_ADVANCE,
  OP_FVERIFY, OP_COUNT
};

static lsim_err run_op(world *w, int op, lsim_errbuf *eb) {
  lsim_digest d;
  lsim_residency r;
  switch (op) {
  case OP_BASE: return lsim_id_base_abi(&w->base, &d, eb);
  case OP_ARTIFACT: return lsim_id_artifact(&w->art, &d, eb);
  case OP_SEMANTIC: return lsim_id_semantic(&w->sem, &d, eb);
  case OP_KERNEL: return lsim_id_kernel(&w->ker, &d, eb);
  case OP_REQUEST: return lsim_id_request(&w->req, &d, eb);
  case OP_SLOT: return lsim_id_slot(&w->slot, &d, eb);
  case OP_PREFIX: return lsim_id_prefix(&w->prefix, &d, eb);
  case OP_TOKENS: return lsim_id_tokens(w->tokens, w->ntok, &d, eb);
  case OP_RESIDENCY:
    return lsim_id_residency(w->art.modules, w->art.n_modules, w->art.dtype,
                             &w->ker.shard, &r, eb);
  case OP_LEDGER:
    return lsim_id_residency_verify(w->art.modules, w->art.n_modules,
                                    w->art.dtype, &w->ker.shard, &w->claimed,
                                    eb);
  case OP_LAUNCH: return lsim_launch_validate(&w->snap, &w->owners, eb);
  case OP_ADVANCE: return lsim_genvec_advance(&w->adv, w->adv_component, eb);
  case OP_FVERIFY:
    return lsim_id_factor_verify(w->fbytes, w->flen, &w->fexpect, eb);
  }
  return LSIM_E_BUG;
}

typedef void (*mutate_fn)(world *, int);

/* canonicalization inputs */
static void m_weights_missing(world *w, int a) {
  (void)a;
  w->base.model_weights = (lsim_digest)LSIM_DIGEST_INIT;
}
static void m_transform_missing(world *w, int a) {
  (void)a;
  w->base.weight_transform = (lsim_digest)LSIM_DIGEST_INIT;
}
static void m_method_empty(world *w, int a) { (void)a; w->art.method = ""; }
static void m_method_space(world *w, int a) {
  (void)a;
  w->art.method = "lo ra";
}
static void m_method_null(world *w, int a) { (void)a; w->art.method = NULL; }
static void m_name_null(world *w, int a) { w->mods[a].name = NULL; }
static void m_name_nonascii(world *w, int a) {
  w->mods[a].name = "layers.0.q\xc3\xa9";
}
static void m_role_long(world *w, int a) {
  w->mods[a].role = w->longname;
}
static void m_role_empty(world *w, int a) { w->mods[a].role = ""; }
static void m_peft_missing(world *w, int a) {
  (void)a;
  w->art.peft_config = (lsim_digest)LSIM_DIGEST_INIT;
}
static void m_art_base_missing(world *w, int a) {
  (void)a;
  w->art.base_abi = (lsim_digest)LSIM_DIGEST_INIT;
}
static void m_no_modules(world *w, int a) { w->art.n_modules = a; }
static void m_dup_module(world *w, int a) {
  (void)a;
  w->mods[1].name = QPROJ;
}
static void m_rank(world *w, int a) { w->mods[1].rank = a; }
static void m_rank_huge(world *w, int a) {
  (void)a;
  w->mods[1].rank = ((int64_t)1 << 30) + 1;
}
static void m_rank_keep_bytes(world *w, int a) {
  (void)a;
  w->mods[1].rank = 2; /* the factor bytes still hold rank 4 */
}
static void m_dout(world *w, int a) { w->mods[0].d_out = a; }
static void m_din_huge(world *w, int a) {
  (void)a;
  w->mods[0].d_in = ((int64_t)1 << 31);
}
static void m_alen_short(world *w, int a) { w->mods[0].a_len -= (size_t)a; }
static void m_blen_long(world *w, int a) { w->mods[1].b_len += (size_t)a; }
static void m_a_null(world *w, int a) {
  (void)a;
  w->mods[0].a_bytes = NULL;
}
static void m_b_null(world *w, int a) {
  (void)a;
  w->mods[1].b_bytes = NULL;
}
static void m_art_dtype(world *w, int a) { w->art.dtype = a; }
static void m_ker_dtype(world *w, int a) { w->ker.dtype = a; }
static void m_scaling(world *w, int a) { w->mods[0].scaling = a; }
static void m_alpha(world *w, int a) { w->mods[1].alpha = a; }
static void m_a_axes_transposed(world *w, int a) {
  (void)a;
  w->mods[0].a_axes[0] = LSIM_AXIS_INPUT;
  w->mods[0].a_axes[1] = LSIM_AXIS_RANK;
}
static void m_b_axes_punica(world *w, int a) {
  (void)a;
  w->mods[1].b_axes[0] = LSIM_AXIS_RANK;
  w->mods[1].b_axes[1] = LSIM_AXIS_OUTPUT;
}
static void m_b_axes_input(world *w, int a) {
  (void)a;
  w->mods[1].b_axes[0] = LSIM_AXIS_INPUT;
}
static void m_activation_missing(world *w, int a) {
  (void)a;
  w->sem.activation_policy = (lsim_digest)LSIM_DIGEST_INIT;
}
static void m_semantic_bad_artifact(world *w, int a) {
  (void)a;
  w->mods[0].a_len = 3;
}
/* kernel ABI */
static void m_family_empty(world *w, int a) {
  (void)a;
  w->ker.kernel_family = "";
}
static void m_packing_null(world *w, int a) {
  (void)a;
  w->ker.packing = NULL;
}
static void m_revision(world *w, int a) { w->ker.conversion_revision = a; }
static void m_world(world *w, int a) { w->ker.shard.world = a; }
static void m_shard_rank(world *w, int a) { w->ker.shard.rank = a; }
static void m_shard_axis(world *w, int a) { w->ker.shard.axis = a; }
static void m_world3(world *w, int a) {
  w->ker.shard.world = 3;
  w->ker.shard.axis = a;
}
static void m_in_axis_odd(world *w, int a) {
  (void)a;
  w->ker.shard.axis = LSIM_SHARD_INPUT;
  w->mods[1].d_in = 7; /* row parallel over 2 ranks needs an even d_in */
  w->mods[1].a_len = (size_t)(4 * 7 * 2);
}
static void m_lay_a_axes(world *w, int a) {
  (void)a;
  w->lay[0].a_axes[1] = LSIM_AXIS_OUTPUT;
}
static void m_lay_b_axes(world *w, int a) {
  (void)a;
  w->lay[1].b_axes[0] = LSIM_AXIS_INPUT;
}
static void m_lay_dup_axis(world *w, int a) {
  (void)a;
  w->lay[1].a_axes[0] = LSIM_AXIS_RANK;
  w->lay[1].a_axes[1] = LSIM_AXIS_RANK;
}
static void m_lay_missing(world *w, int a) { w->ker.n_layouts = a; }
static void m_lay_foreign(world *w, int a) {
  (void)a;
  w->lay[1].module = "layers.0.self_attn.k_proj";
}
static void m_lay_dup(world *w, int a) {
  (void)a;
  w->lay[1].module = QPROJ;
}
static void m_lay_name_empty(world *w, int a) {
  (void)a;
  w->lay[0].module = "";
}
static void m_out_range(world *w, int a) {
  w->lay[1].out_begin += a;
  w->lay[1].out_end += a;
}
static void m_in_range(world *w, int a) { w->lay[0].in_end = a; }
/* request / slot / prefix / tokens */
static void m_req_ns(world *w, int a) {
  (void)a;
  w->req.request_namespace = "tenant a";
}
static void m_req_id(world *w, int a) { (void)a; w->req.request_id = ""; }
static void m_req_lineage(world *w, int a) {
  (void)a;
  w->req.lineage_id = NULL;
}
static void m_req_attempt(world *w, int a) { w->req.attempt = a; }
static void m_req_policy(world *w, int a) {
  (void)a;
  w->req.generation_policy = (lsim_digest)LSIM_DIGEST_INIT;
}
static void m_req_sem(world *w, int a) {
  (void)a;
  w->req.adapter_semantic = (lsim_digest)LSIM_DIGEST_INIT;
}
static void m_slot_gen(world *w, int a) { w->slot.slot_generation = a; }
static void m_slot_ptable(world *w, int a) {
  w->slot.pointer_table_generation = a;
}
static void m_slot_epoch(world *w, int a) { w->slot.worker_epoch = a; }
static void m_slot_kernel(world *w, int a) {
  (void)a;
  w->slot.kernel_local = (lsim_digest)LSIM_DIGEST_INIT;
}
static void m_prefix_salt(world *w, int a) {
  (void)a;
  w->prefix.isolation_salt = (lsim_digest)LSIM_DIGEST_INIT;
}
static void m_prefix_cache(world *w, int a) {
  (void)a;
  w->prefix.cache_abi = (lsim_digest)LSIM_DIGEST_INIT;
}
static void m_token(world *w, int a) { w->tokens[2] = a; }
/* residency ledger */
static void m_claim_local_as_cluster(world *w, int a) {
  (void)a;
  w->claimed.local_bytes = w->claimed.cluster_bytes;
}
static void m_claim_logical(world *w, int a) {
  (void)a;
  w->claimed.logical_scalars = w->claimed.local_scalars;
}
static void m_claim_cluster(world *w, int a) {
  (void)a;
  w->claimed.cluster_bytes = w->claimed.logical_bytes;
}
/* generations */
static void m_adv_component(world *w, int a) { w->adv_component = a; }
static void m_adv_max(world *w, int a) {
  w->adv_component = a;
  w->adv.g[a] = INT64_MAX;
}
static void m_adv_negative(world *w, int a) {
  w->adv_component = a;
  w->adv.g[a] = -3;
}
static void m_owner_ahead(world *w, int a) { w->owners.gen.g[a]++; }
static void m_snapshot_ahead(world *w, int a) { w->snap.gen.g[a]++; }
static void m_gen_negative(world *w, int a) { w->snap.gen.g[a] = -1; }
/* bindings at launch */
static void m_req_binding(world *w, int a) {
  (void)a; /* the owner now holds attempt 1's binding */
  world b;
  world_init(&b);
  b.req.attempt = 1;
  world_derive(&b);
  w->owners.request.binding = b.req_d;
}
static void m_req_base(world *w, int a) {
  (void)a;
  w->owners.adapter.base_abi = fill(0x99);
}
static void m_req_semantic(world *w, int a) {
  (void)a; /* the catalog republished other bytes under the alias */
  w->owners.adapter.adapter_semantic = fill(0x9a);
  w->owners.slot.adapter_semantic = fill(0x9a);
  w->owners.cache.adapter_semantic = fill(0x9a);
}
static void m_slot_binding(world *w, int a) {
  (void)a; /* same generations, different device */
  world b;
  world_init(&b);
  b.slot.device_id = 1;
  world_derive(&b);
  w->owners.slot.binding = b.slot_d;
}
static void m_slot_semantic(world *w, int a) {
  (void)a;
  w->owners.slot.adapter_semantic = fill(0x9b);
}
static void m_kernel_abi(world *w, int a) {
  (void)a; /* the row was built for TP rank 1's layout */
  world b;
  world_init(&b);
  b.ker.shard.rank = 1;
  b.lay[0] = layout(QPROJ, 1);
  b.lay[1] = layout(VPROJ, 1);
  world_derive(&b);
  w->snap.kernel_local = b.ker_d;
}
static void m_cache_semantic(world *w, int a) {
  (void)a;
  w->owners.cache.adapter_semantic = fill(0x9c);
}
static void m_launch_missing(world *w, int a) {
  (void)a;
  w->snap.slot_binding = (lsim_digest)LSIM_DIGEST_INIT;
}
static void m_owner_missing(world *w, int a) {
  (void)a;
  w->owners.cache.adapter_semantic = (lsim_digest)LSIM_DIGEST_INIT;
}
/* factor verification */
static void m_fbyte(world *w, int a) { w->va[a] ^= 0x01; }
static void m_fnull(world *w, int a) {
  (void)a;
  w->fbytes = NULL;
}
static void m_fexpect_missing(world *w, int a) {
  (void)a;
  w->fexpect = (lsim_digest)LSIM_DIGEST_INIT;
}

typedef struct fixture {
  const char *name;
  int op;
  mutate_fn mutate;
  int arg;
  lsim_err want;
} fixture;

static const fixture fixtures[] = {
    /* canonicalization input errors */
    {"base weights digest missing", OP_BASE, m_weights_missing, 0,
     LSIM_E_ID_MISSING_DIGEST},
    {"base transform digest missing", OP_BASE, m_transform_missing, 0,
     LSIM_E_ID_MISSING_DIGEST},
    {"method empty", OP_ARTIFACT, m_method_empty, 0, LSIM_E_ID_CANON},
    {"method with a space", OP_ARTIFACT, m_method_space, 0, LSIM_E_ID_CANON},
    {"method missing", OP_ARTIFACT, m_method_null, 0, LSIM_E_ID_CANON},
    {"module name missing", OP_ARTIFACT, m_name_null, 1, LSIM_E_ID_CANON},
    {"module name not ascii", OP_ARTIFACT, m_name_nonascii, 0,
     LSIM_E_ID_CANON},
    {"role longer than 1024 bytes", OP_ARTIFACT, m_role_long, 0,
     LSIM_E_ID_CANON},
    {"role empty", OP_ARTIFACT, m_role_empty, 1, LSIM_E_ID_CANON},
    {"peft config digest missing", OP_ARTIFACT, m_peft_missing, 0,
     LSIM_E_ID_MISSING_DIGEST},
    {"artifact base abi missing", OP_ARTIFACT, m_art_base_missing, 0,
     LSIM_E_ID_MISSING_DIGEST},
    {"empty module list", OP_ARTIFACT, m_no_modules, 0,
     LSIM_E_ID_NO_MODULES},
    {"negative module count", OP_ARTIFACT, m_no_modules, -1,
     LSIM_E_ID_NO_MODULES},
    {"duplicate module", OP_ARTIFACT, m_dup_module, 0, LSIM_E_ID_DUP_MODULE},
    {"rank zero", OP_ARTIFACT, m_rank, 0, LSIM_E_ID_RANK},
    {"rank negative", OP_ARTIFACT, m_rank, -4, LSIM_E_ID_RANK},
    {"rank above 2^30", OP_ARTIFACT, m_rank_huge, 0, LSIM_E_ID_RANK},
    {"d_out zero", OP_ARTIFACT, m_dout, 0, LSIM_E_ID_SHAPE},
    {"d_in above 2^30", OP_ARTIFACT, m_din_huge, 0, LSIM_E_ID_SHAPE},
    {"rank drift without new factor bytes", OP_ARTIFACT, m_rank_keep_bytes,
     0, LSIM_E_ID_FACTOR_SIZE},
    {"factor a shorter than its shape", OP_ARTIFACT, m_alen_short, 2,
     LSIM_E_ID_FACTOR_SIZE},
    {"factor b longer than its shape", OP_ARTIFACT, m_blen_long, 1,
     LSIM_E_ID_FACTOR_SIZE},
    {"factor a bytes missing", OP_ARTIFACT, m_a_null, 0,
     LSIM_E_ID_FACTOR_MISSING},
    {"factor b bytes missing", OP_ARTIFACT, m_b_null, 0,
     LSIM_E_ID_FACTOR_MISSING},
    {"artifact dtype zero", OP_ARTIFACT, m_art_dtype, 0, LSIM_E_ID_DTYPE},
    {"artifact dtype unknown", OP_ARTIFACT, m_art_dtype, 99,
     LSIM_E_ID_DTYPE},
    {"kernel dtype unknown", OP_KERNEL, m_ker_dtype, 6, LSIM_E_ID_DTYPE},
    {"residency dtype unknown", OP_RESIDENCY, m_art_dtype, -1,
     LSIM_E_ID_DTYPE},
    {"scaling rule unset", OP_ARTIFACT, m_scaling, 0, LSIM_E_ID_SCALING},
    {"scaling rule unknown", OP_ARTIFACT, m_scaling, 7, LSIM_E_ID_SCALING},
    {"alpha zero", OP_ARTIFACT, m_alpha, 0, LSIM_E_ID_ALPHA},
    {"alpha negative", OP_ARTIFACT, m_alpha, -8, LSIM_E_ID_ALPHA},
    {"logical a transposed", OP_ARTIFACT, m_a_axes_transposed, 0,
     LSIM_E_ID_AXES},
    {"logical b in punica orientation", OP_ARTIFACT, m_b_axes_punica, 0,
     LSIM_E_ID_AXES},
    {"logical b names the input axis", OP_RESIDENCY, m_b_axes_input, 0,
     LSIM_E_ID_AXES},
    {"activation policy missing", OP_SEMANTIC, m_activation_missing, 0,
     LSIM_E_ID_MISSING_DIGEST},
    {"semantic over an invalid artifact", OP_SEMANTIC,
     m_semantic_bad_artifact, 0, LSIM_E_ID_FACTOR_SIZE},
    /* local kernel ABI and shard */
    {"kernel family empty", OP_KERNEL, m_family_empty, 0, LSIM_E_ID_CANON},
    {"kernel packing missing", OP_KERNEL, m_packing_null, 0,
     LSIM_E_ID_CANON},
    {"conversion revision negative", OP_KERNEL, m_revision, -1,
     LSIM_E_ID_INT_RANGE},
    {"shard world zero", OP_KERNEL, m_world, 0, LSIM_E_ID_SHARD_WORLD},
    {"shard world above the limit", OP_RESIDENCY, m_world, 65537,
     LSIM_E_ID_SHARD_WORLD},
    {"shard rank equals world", OP_KERNEL, m_shard_rank, 2,
     LSIM_E_ID_SHARD_RANK},
    {"shard rank negative", OP_RESIDENCY, m_shard_rank, -1,
     LSIM_E_ID_SHARD_RANK},
    {"shard axis unset", OP_KERNEL, m_shard_axis, 0, LSIM_E_ID_SHARD_AXIS},
    {"shard axis unknown", OP_RESIDENCY, m_shard_axis, 4,
     LSIM_E_ID_SHARD_AXIS},
    {"d_out not divisible by world", OP_KERNEL, m_world3, LSIM_SHARD_OUTPUT,
     LSIM_E_ID_SHARD_DIV},
    {"d_out not divisible, residency", OP_RESIDENCY, m_world3,
     LSIM_SHARD_OUTPUT, LSIM_E_ID_SHARD_DIV},
    {"d_in not divisible for row parallel", OP_RESIDENCY, m_in_axis_odd, 0,
     LSIM_E_ID_SHARD_DIV},
    {"layout a names the output axis", OP_KERNEL, m_lay_a_axes, 0,
     LSIM_E_ID_LAYOUT_AXES},
    {"layout b names the input axis", OP_KERNEL, m_lay_b_axes, 0,
     LSIM_E_ID_LAYOUT_AXES},
    {"layout a repeats the rank axis", OP_KERNEL, m_lay_dup_axis, 0,
     LSIM_E_ID_LAYOUT_AXES},
    {"layout missing for a module", OP_KERNEL, m_lay_missing, 1,
     LSIM_E_ID_LAYOUT_COVER},
    {"no layouts at all", OP_KERNEL, m_lay_missing, 0,
     LSIM_E_ID_LAYOUT_COVER},
    {"layout for a foreign module", OP_KERNEL, m_lay_foreign, 0,
     LSIM_E_ID_LAYOUT_COVER},
    {"duplicate layout", OP_KERNEL, m_lay_dup, 0, LSIM_E_ID_DUP_MODULE},
    {"layout module name empty", OP_KERNEL, m_lay_name_empty, 0,
     LSIM_E_ID_CANON},
    {"tp output range drift", OP_KERNEL, m_out_range, 4,
     LSIM_E_ID_SHARD_RANGE},
    {"tp input range drift", OP_KERNEL, m_in_range, 4,
     LSIM_E_ID_SHARD_RANGE},
    /* request, slot, prefix, tokens */
    {"request namespace with a space", OP_REQUEST, m_req_ns, 0,
     LSIM_E_ID_CANON},
    {"request id empty", OP_REQUEST, m_req_id, 0, LSIM_E_ID_CANON},
    {"lineage missing", OP_REQUEST, m_req_lineage, 0, LSIM_E_ID_CANON},
    {"attempt negative", OP_REQUEST, m_req_attempt, -1, LSIM_E_ID_INT_RANGE},
    {"generation policy missing", OP_REQUEST, m_req_policy, 0,
     LSIM_E_ID_MISSING_DIGEST},
    {"request semantic abi missing", OP_REQUEST, m_req_sem, 0,
     LSIM_E_ID_MISSING_DIGEST},
    {"slot generation negative", OP_SLOT, m_slot_gen, -1,
     LSIM_E_ID_INT_RANGE},
    {"pointer-table generation negative", OP_SLOT, m_slot_ptable, -5,
     LSIM_E_ID_INT_RANGE},
    {"worker epoch negative", OP_SLOT, m_slot_epoch, -1,
     LSIM_E_ID_INT_RANGE},
    {"slot kernel abi missing", OP_SLOT, m_slot_kernel, 0,
     LSIM_E_ID_MISSING_DIGEST},
    {"prefix isolation salt missing", OP_PREFIX, m_prefix_salt, 0,
     LSIM_E_ID_MISSING_DIGEST},
    {"prefix cache abi missing", OP_PREFIX, m_prefix_cache, 0,
     LSIM_E_ID_MISSING_DIGEST},
    {"prompt token negative", OP_TOKENS, m_token, -2, LSIM_E_ID_INT_RANGE},
    /* residency ledger */
    {"ledger claims cluster bytes per rank", OP_LEDGER,
     m_claim_local_as_cluster, 0, LSIM_E_ID_LEDGER},
    {"ledger claims local as logical", OP_LEDGER, m_claim_logical, 0,
     LSIM_E_ID_LEDGER},
    {"ledger forgets replicated a", OP_LEDGER, m_claim_cluster, 0,
     LSIM_E_ID_LEDGER},
    /* generation vector */
    {"advance unknown component", OP_ADVANCE, m_adv_component,
     LSIM_GEN_COUNT, LSIM_E_ID_GEN_COMPONENT},
    {"advance negative component", OP_ADVANCE, m_adv_component, -1,
     LSIM_E_ID_GEN_COMPONENT},
    {"advance past int64 max", OP_ADVANCE, m_adv_max, LSIM_GEN_CACHE,
     LSIM_E_ID_GEN_OVERFLOW},
    {"advance a negative generation", OP_ADVANCE, m_adv_negative,
     LSIM_GEN_RNG, LSIM_E_ID_INT_RANGE},
    {"stale catalog", OP_LAUNCH, m_owner_ahead, LSIM_GEN_CATALOG,
     LSIM_E_ID_STALE_CATALOG},
    {"stale request attempt", OP_LAUNCH, m_owner_ahead, LSIM_GEN_ATTEMPT,
     LSIM_E_ID_STALE_ATTEMPT},
    {"stale slot", OP_LAUNCH, m_owner_ahead, LSIM_GEN_SLOT,
     LSIM_E_ID_STALE_SLOT},
    {"stale pointer table", OP_LAUNCH, m_owner_ahead,
     LSIM_GEN_POINTER_TABLE, LSIM_E_ID_STALE_PTABLE},
    {"stale batch plan", OP_LAUNCH, m_owner_ahead, LSIM_GEN_BATCH_PLAN,
     LSIM_E_ID_STALE_PLAN},
    {"stale cache snapshot", OP_LAUNCH, m_owner_ahead, LSIM_GEN_CACHE,
     LSIM_E_ID_STALE_CACHE},
    {"stale rng", OP_LAUNCH, m_owner_ahead, LSIM_GEN_RNG,
     LSIM_E_ID_STALE_RNG},
    {"snapshot ahead of the slot owner", OP_LAUNCH, m_snapshot_ahead,
     LSIM_GEN_SLOT, LSIM_E_ID_STALE_SLOT},
    {"snapshot ahead of the cache owner", OP_LAUNCH, m_snapshot_ahead,
     LSIM_GEN_CACHE, LSIM_E_ID_STALE_CACHE},
    {"negative snapshot generation", OP_LAUNCH, m_gen_negative,
     LSIM_GEN_BATCH_PLAN, LSIM_E_ID_INT_RANGE},
    /* binding mismatches */
    {"request binding of another attempt", OP_LAUNCH, m_req_binding, 0,
     LSIM_E_ID_REQ_BINDING},
    {"request and adapter base differ", OP_LAUNCH, m_req_base, 0,
     LSIM_E_ID_REQ_BASE},
    {"request and adapter semantic differ", OP_LAUNCH, m_req_semantic, 0,
     LSIM_E_ID_REQ_SEMANTIC},
    {"slot binding of another device", OP_LAUNCH, m_slot_binding, 0,
     LSIM_E_ID_SLOT_BINDING},
    {"slot publishes another adapter", OP_LAUNCH, m_slot_semantic, 0,
     LSIM_E_ID_SLOT_SEMANTIC},
    {"row kernel abi of another tp rank", OP_LAUNCH, m_kernel_abi, 0,
     LSIM_E_ID_KERNEL_ABI},
    {"cache built on another adapter", OP_LAUNCH, m_cache_semantic, 0,
     LSIM_E_ID_CACHE_SEMANTIC},
    {"snapshot slot binding missing", OP_LAUNCH, m_launch_missing, 0,
     LSIM_E_ID_MISSING_DIGEST},
    {"owner cache semantic missing", OP_LAUNCH, m_owner_missing, 0,
     LSIM_E_ID_MISSING_DIGEST},
    /* staged factor verification */
    {"staged factor byte drift", OP_FVERIFY, m_fbyte, 33,
     LSIM_E_ID_FACTOR_HASH},
    {"staged factor bytes missing", OP_FVERIFY, m_fnull, 0,
     LSIM_E_ID_FACTOR_MISSING},
    {"expected factor hash missing", OP_FVERIFY, m_fexpect_missing, 0,
     LSIM_E_ID_MISSING_DIGEST},
};
#define NFIX ((int)(sizeof fixtures / sizeof fixtures[0]))

Test(identity, baseline_world_passes_every_operation) {
  world w;
  world_init(&w);
  for (int op = 0; op < OP_COUNT; op++) {
    lsim_errbuf eb = LSIM_ERRBUF_INIT;
    cr_assert_eq(run_op(&w, op, &eb), 0, "op %d: %s", op, eb.msg);
  }
}

Test(identity, negative_fixtures_fail_with_their_own_code) {
  cr_assert_geq(NFIX, 30);
  for (int i = 0; i < NFIX; i++) {
    const fixture *f = &fixtures[i];
    world w;
    world_init(&w);
    f->mutate(&w, f->arg);
    lsim_errbuf eb = LSIM_ERRBUF_INIT;
    lsim_err rc = run_op(&w, f->op, &eb);
    cr_assert_eq(rc, f->want, "%s: got %s (%s), want %s", f->name,
                 lsim_err_name(rc), eb.msg, lsim_err_name(f->want));
    cr_assert_eq(eb.code, rc, "%s", f->name);
    size_t n = strlen(eb.msg);
    cr_assert_gt(n, 0, "%s: empty message", f->name);
    cr_assert_neq(eb.msg[n - 1], '.', "%s: message ends in a full stop",
                  f->name);
    cr_assert_not(isupper((unsigned char)eb.msg[0]), "%s: %s", f->name,
                  eb.msg);
    /* the same failure without an errbuf */
    world_init(&w);
    f->mutate(&w, f->arg);
    cr_assert_eq(run_op(&w, f->op, NULL), f->want, "%s", f->name);
  }
}

Test(identity, fixtures_cover_every_identity_code) {
  static const struct {
    lsim_err code;
    const char *name;
  } codes[] = {
#define X(sym, val, name) {sym, name},
      LSIM_ERRCODES_ID(X)
#undef X
  };
  for (size_t c = 0; c < sizeof codes / sizeof codes[0]; c++) {
    int hit = 0;
    for (int i = 0; i < NFIX; i++)
      hit += fixtures[i].want == codes[c].code;
    cr_assert_gt(hit, 0, "no fixture expects %s", codes[c].name);
    cr_assert_str_eq(lsim_err_name(codes[c].code), codes[c].name);
  }
}

Test(identity, failed_outputs_are_left_empty) {
  world w;
  world_init(&w);
  w.mods[1].rank = 0;
  lsim_digest d = fill(0xee);
  cr_assert_eq(lsim_id_artifact(&w.art, &d, NULL), LSIM_E_ID_RANK);
  cr_assert(lsim_digest_is_zero(&d));
  lsim_canon c = LSIM_CANON_INIT;
  world_init(&w);
  cr_assert_eq(lsim_id_artifact_canon(&w.art, &c, NULL), 0);
  cr_assert_gt(c.len, 0);
  w.mods[1].rank = 0;
  cr_assert_eq(lsim_id_artifact_canon(&w.art, &c, NULL), LSIM_E_ID_RANK);
  cr_assert_null(c.buf);
  cr_assert_eq(c.len, 0);
  cr_assert_eq(lsim_id_base_abi(NULL, &d, NULL), LSIM_E_USAGE);
}
