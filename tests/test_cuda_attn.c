/*
** test_cuda_attn.c: paged attention and the KV append (issue 19) against a
** float64 reference (tests/attn_cases.h: the checks, the poisoning and the
** error bound).
**
** Compiled everywhere; every test skips with a message when the build has
** no CUDA or the machine no device.  Shapes are small and awkward: lengths
** that are not multiples of the 64-token tile, of the 16/128-row tiles or
** of tpp (tpp 1, 3, 5, 7, 13, 16), one-token prompts, prefill after prior
** context, a chunked prefill continuing its own first chunk, decode after
** prefill, contexts past 8k, pages shuffled over the pool, GQA ratios 1, 4
** and 8, head dims 64 and 128, mixed prefill + decode batches, forced and
** automatic KV splits; then every misuse with its error code.
*/
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#ifdef LSIM_HAVE_CUDA
#include "attn_cases.h"

static void need_gpu(void) {
  char d[256];
  if (lsim_cuda_describe(d, sizeof d) <= 0)
    cr_skip_test("no CUDA device: %s (GPU tests run on the device machine)",
                 d);
}

static attn_spec base(int H, int KV, int D, int tpp) {
  attn_spec s;
  memset(&s, 0, sizeof s);
  s.q_heads = H;
  s.kv_heads = KV;
  s.D = D;
  s.layers = 2;
  s.layer = 1;
  s.tpp = tpp;
  s.qscale = 2.0;
  s.seed = 1;
  return s;
}

static void add(attn_spec *s, int rows, int ctx, int decode, int rows2) {
  attn_seq_spec *q = &s->seq[s->nseq++];
  q->rows = rows;
  q->ctx = ctx;
  q->decode = decode;
  q->rows2 = rows2;
}

static void check(const attn_spec *s, const char *what) {
  attn_result r;
  char why[512] = "";
  int rc = attn_run_case(s, &r, why, sizeof why);
  cr_assert_eq(rc, 0, "%s: %s", what, why);
  cr_log_info("%s: max err %.3g (%.2f of the bound), rel l2 %.3g over %ld "
              "values; %s",
              what, r.max_err, r.max_ratio, r.rel_l2, r.checked, r.desc);
  cr_assert_gt(r.checked, 0);
}

Test(attn, one_token_prompts_and_short_prefills) {
  need_gpu();
  for (int D = 64; D <= 128; D += 64) {
    attn_spec s = base(4, 1, D, 3);
    add(&s, 1, 0, 0, 1);   /* one-token prompt, then a decode */
    add(&s, 5, 0, 0, 0);
    add(&s, 1, 2, 0, 3);   /* one row after 2 cached, then 3 more */
    check(&s, D == 64 ? "D64" : "D128");
  }
}

Test(attn, awkward_lengths_across_tiles_and_pages) {
  need_gpu();
  attn_spec s = base(8, 2, 128, 7);
  add(&s, 37, 0, 0, 0);
  add(&s, 129, 0, 0, 0); /* 516 packed rows: 5 wide tiles, the last short */
  add(&s, 65, 63, 0, 0);
  s.seed = 2;
  check(&s, "awkward");
}

Test(attn, prefill_with_prior_context_and_chunked_continuation) {
  need_gpu();
  attn_spec s = base(16, 2, 128, 16); /* GQA 8 */
  add(&s, 50, 333, 0, 0);             /* prefix hit */
  add(&s, 40, 10, 0, 61);             /* chunk, then the next chunk */
  add(&s, 17, 0, 0, 1);               /* prefill, then decode */
  s.seed = 3;
  check(&s, "prior+chunked");
}

Test(attn, gqa_ratios_1_4_8_mixed_batches) {
  need_gpu();
  static const int H[3] = {4, 8, 16}, KV[3] = {4, 2, 2};
  for (int i = 0; i < 3; i++) {
    attn_spec s = base(H[i], KV[i], i == 1 ? 64 : 128, 5);
    add(&s, 23, 0, 0, 9);
    add(&s, 3, 100, 0, 0);
    add(&s, 1, 77, 1, 1);
    add(&s, 1, 0, 1, 0);
    add(&s, 1, 300, 1, 1);
    add(&s, 1, 12, 1, 0);
    s.seed = 10 + (uint64_t)i;
    char what[32];
    snprintf(what, sizeof what, "gqa %d", H[i] / KV[i]);
    check(&s, what);
  }
}

Test(attn, long_contexts_split_kv) {
  need_gpu();
  attn_spec s = base(8, 2, 128, 16);
  s.layers = 1;
  s.layer = 0;
  add(&s, 3, 8300, 0, 0); /* a short chunk after 8k: split wide/narrow */
  add(&s, 1, 8200, 1, 1);
  add(&s, 1, 9001, 1, 0);
  add(&s, 1, 1000, 1, 1);
  s.seed = 4;
  check(&s, "long auto");
  s.splits = 7; /* forced, uneven chunks */
  s.pre_splits = 3;
  s.seed = 5;
  check(&s, "long forced");
}

Test(attn, forced_splits_on_prefill_tiles) {
  need_gpu();
  attn_spec s = base(8, 1, 64, 13);
  add(&s, 100, 700, 0, 0);
  add(&s, 20, 0, 0, 0);
  add(&s, 1, 600, 1, 0);
  s.pre_splits = 4;
  s.splits = 3;
  s.seed = 6;
  check(&s, "pre splits");
}

Test(attn, random_awkward_batches) {
  need_gpu();
  for (uint64_t seed = 1; seed <= 12; seed++) {
    attn_spec s;
    attn_random_spec(&s, seed, 6, 700);
    char what[32];
    snprintf(what, sizeof what, "random %d", (int)seed);
    check(&s, what);
  }
}

#define FAILS(code, call)                                                  \
  do {                                                                     \
    lsim_errbuf eb_ = LSIM_ERRBUF_INIT;                                    \
    lsim_errbuf *eb = &eb_;                                                \
    lsim_err rc_ = (call);                                                 \
    cr_assert_eq(rc_, code, "%s: got %s (%s), want %s", #call,             \
                 lsim_err_name(rc_), eb_.msg, lsim_err_name(code));        \
    cr_assert(eb_.msg[0] && eb_.msg[strlen(eb_.msg) - 1] != '.',           \
              "bad message '%s'", eb_.msg);                                \
  } while (0)

Test(attn, misuse_is_an_error_value) {
  need_gpu();
  lsim_cuda_attn_cfg c;
  memset(&c, 0, sizeof c);
  c.q_heads = 8;
  c.kv_heads = 2;
  c.head_dim = 96;
  c.layers = 2;
  c.page_bytes = 2 * lsim_cuda_attn_kv_bytes_per_token(2, 2, 128) * 3;
  c.pool_pages = 10;
  c.max_seqs = 4;
  c.max_rows = 16;
  c.max_kv = 40;
  lsim_cuda_attn *A = NULL;
  FAILS(LSIM_E_USAGE, lsim_cuda_attn_open(&A, &c, eb)); /* head_dim */
  c.head_dim = 128;
  c.q_heads = 5; /* not a multiple of kv_heads */
  FAILS(LSIM_E_USAGE, lsim_cuda_attn_open(&A, &c, eb));
  c.q_heads = 8;
  c.page_bytes = 1000; /* less than a token */
  FAILS(LSIM_E_USAGE, lsim_cuda_attn_open(&A, &c, eb));
  c.page_bytes = 6 * lsim_cuda_attn_kv_bytes_per_token(2, 2, 128); /* tpp 6 */
  lsim_errbuf e0 = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_cuda_attn_open(&A, &c, &e0), 0, "%s", e0.msg);
  cr_assert_eq(lsim_cuda_attn_page_tokens(A), 6);
  void *p = NULL;
  cr_assert_eq(lsim_cuda_malloc(&p, 4096, &e0), 0);
  FAILS(LSIM_E_STATE, lsim_cuda_attn_run(A, 0, p, p, 1024, p, 1024, eb));
  FAILS(LSIM_E_STATE, lsim_cuda_attn_append(A, 0, p, p, 256, p, 256, eb));
  int32_t pt0[4] = {0, 1, 2, 3}, pt1[4] = {4, 5, 6, 7};
  const int32_t *bt[2] = {pt0, pt1};
  int32_t qs[3] = {0, 3, 5}, ctx[2] = {2, 7};
  lsim_cuda_attn_batch b = {2, 1, qs, ctx, bt};
  FAILS(LSIM_E_USAGE, lsim_cuda_attn_plan(A, &b, eb)); /* decode of 2 rows */
  b.npre = 2;
  cr_assert_eq(lsim_cuda_attn_plan(A, &b, &e0), 0, "%s", e0.msg);
  ctx[1] = 39; /* 39 + 2 rows > max_kv 40 */
  FAILS(LSIM_E_USAGE, lsim_cuda_attn_plan(A, &b, eb));
  ctx[1] = 7;
  pt1[1] = 10; /* outside the pool */
  FAILS(LSIM_E_USAGE, lsim_cuda_attn_plan(A, &b, eb));
  /* sequence 1's token 8 (page pt1[1], slot 2) onto sequence 0's token 2
  ** (page 0, slot 2): two new rows, one slot */
  pt1[1] = 0;
  FAILS(LSIM_E_USAGE, lsim_cuda_attn_plan(A, &b, eb));
  pt1[1] = 5;
  qs[0] = 1;
  FAILS(LSIM_E_USAGE, lsim_cuda_attn_plan(A, &b, eb));
  qs[0] = 0;
  cr_assert_eq(lsim_cuda_attn_plan(A, &b, &e0), 0, "%s", e0.msg);
  FAILS(LSIM_E_USAGE, lsim_cuda_attn_run(A, 2, p, p, 1024, p, 1024, eb));
  FAILS(LSIM_E_USAGE, lsim_cuda_attn_run(A, 0, p, p, 1000, p, 1024, eb));
  FAILS(LSIM_E_USAGE,
        lsim_cuda_attn_run(A, 0, p, (char *)p + 2, 1024, p, 1024, eb));
  FAILS(LSIM_E_USAGE, lsim_cuda_attn_append(A, 0, p, p, 200, p, 256, eb));
  lsim_cuda_free(p);
  lsim_cuda_attn_close(A);
}

#else
Test(attn, one_token_prompts_and_short_prefills) {
  cr_skip_test("CUDA backend not built: nvcc was not found at configure time");
}
#endif
