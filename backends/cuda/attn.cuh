/*
** attn.cuh: paged attention over the engine's KV page pool, and the append
** of an iteration's new K/V rows into it (issue 19).  C-callable: this
** header needs neither nvcc nor the CUDA headers (the stream travels as a
** void *); the kernels are in attn.cu, the design in docs/CUDA.md
** ("Paged attention").
**
** ---- The KV page layout (the contract with the forward executor) ----------
**
** One device pool of `pool_pages` pages; page p starts at
** pool + p * page_bytes.  A page holds tpp = page_bytes / kv_bytes_per_token
** tokens, kv_bytes_per_token = layers * 2 * kv_heads * head_dim * 2 bytes
** (bf16), so every layer of a token lives in the same page.  Inside a page,
** for layer l the K block, then the V block, each tpp * kv_heads * head_dim
** bf16; block (l, kv) (kv 0 = K, 1 = V) starts at element
**
**     ((l * 2 + kv) * tpp) * kv_heads * head_dim
**
** and inside a block token slot s, kv head h is head_dim contiguous
** elements at element (s * kv_heads + h) * head_dim.  Token t of a sequence
** (t counted from the sequence's first token) is in page
** block_table[t / tpp], slot t % tpp.  tpp need not be a power of two, a
** sequence's pages may be anywhere in the pool, and bytes past the last
** block of a page are never touched.  lsim_cuda_attn_kv_offset below
** computes the element offset.
**
** ---- Rows, heads and the batch ----------------------------------------------
**
** A batch is a plan's packed row order: sequences 0 .. npre-1 are prefill
** entries (rows q_start[j] .. q_start[j+1]-1, causal, attending to the
** ctx[j] tokens already in the cache plus their own rows up to and
** including themselves: chunked prefill and prefix hits are just ctx > 0),
** then decode entries npre .. nseq-1, one row each, attending to ctx[j] + 1
** tokens (the cached ones and their own).  Row i of sequence j is token
** ctx[j] + i of that sequence.
**
** Q, K, V and the output are bf16 rows: row r, head h at
** base + r * ld + h * head_dim (elements).  ld is free (a multiple of 8):
** the fused QKV GEMM output [T][(q_heads + 2 kv_heads) * head_dim] is used
** in place with q = qkv, k = qkv + q_heads * head_dim,
** v = qkv + (q_heads + kv_heads) * head_dim, ldq = ldk = ldv = the row
** width.  Every base pointer 16-byte aligned.
**
** Attention is grouped-query: q head h reads kv head h / (q_heads /
** kv_heads).  Scores q.k / sqrt(head_dim), softmax and both products
** accumulate in fp32 (the probabilities enter the P.V product rounded to
** bf16, as FlashAttention does); the output is rounded once to bf16.
**
** ---- Lifecycle --------------------------------------------------------------
**
**     open (maxima, allocates everything once)
**     per iteration:  plan (host arrays -> one metadata copy)
**        per layer:   append (the layer's new K/V rows into their pages)
**                     run    (that layer's attention, 1-3 launches)
**     close
**
** Nothing here allocates after open, so a forward pass can be captured in
** a CUDA graph: plan enqueues one host-to-device copy from pinned staging
** on the context's stream (the next plan waits for it before reusing the
** staging), append and run only launch kernels on that stream.  A context
** is not thread-safe.  Errors are values (LSIM_E_USAGE for a bad
** configuration, batch, pointer or stride, LSIM_E_STATE for a run without a
** plan, LSIM_E_BACKEND with the CUDA error string); nothing prints or
** aborts.
*/
#ifndef LSIM_CUDA_ATTN_CUH
#define LSIM_CUDA_ATTN_CUH

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "../../engine/lsim.h"

/* ---- the page layout, for the callers that fill or read pages ------------ */

/* Bytes of one token's K and V in every layer (bf16). */
static inline int64_t lsim_cuda_attn_kv_bytes_per_token(int layers,
                                                        int kv_heads,
                                                        int head_dim) {
  return (int64_t)layers * 2 * kv_heads * head_dim * 2;
}

/* Tokens per page (0 when a page cannot hold one token). */
static inline int64_t lsim_cuda_attn_tpp(int64_t page_bytes, int layers,
                                         int kv_heads, int head_dim) {
  int64_t b = lsim_cuda_attn_kv_bytes_per_token(layers, kv_heads, head_dim);
  return b > 0 ? page_bytes / b : 0;
}

/* Element (bf16) offset inside a page of layer l, kv (0 K, 1 V), token slot
** s (< tpp), kv head h: the first of its head_dim elements. */
static inline int64_t lsim_cuda_attn_kv_offset(int64_t tpp, int kv_heads,
                                               int head_dim, int l, int kv,
                                               int64_t s, int h) {
  return (((int64_t)l * 2 + kv) * tpp) * kv_heads * head_dim +
         (s * kv_heads + h) * (int64_t)head_dim;
}

/* ---- the context ------------------------------------------------------------ */

typedef struct lsim_cuda_attn_cfg {
  int device;     /* CUDA device ordinal */
  int q_heads;    /* >= 1, a multiple of kv_heads */
  int kv_heads;   /* >= 1 */
  int head_dim;   /* 64 or 128 */
  int layers;     /* layers stored in one KV page (>= 1) */
  int64_t page_bytes; /* pool page stride: a multiple of 16 that holds at
                      ** least one token (tpp >= 1) */
  int64_t pool_pages; /* block-table entries must be < this */
  int max_seqs;   /* sequences in one batch (>= 1) */
  int max_rows;   /* rows (new tokens) in one batch (>= 1) */
  int64_t max_kv; /* the largest ctx + rows of one sequence (>= 1) */
  void *stream;   /* cudaStream_t for every copy and launch; NULL: the
                  ** context creates (and destroys) its own */
} lsim_cuda_attn_cfg;

typedef struct lsim_cuda_attn_batch {
  int nseq;               /* 0 .. max_seqs sequences */
  int npre;               /* the first npre are prefill entries (0..nseq) */
  const int32_t *q_start; /* [nseq + 1]: q_start[0] = 0; sequence j owns
                          ** rows q_start[j] .. q_start[j+1]-1 (at least
                          ** one; exactly one for a decode entry); the
                          ** total is at most max_rows */
  const int32_t *ctx;     /* [nseq]: tokens of sequence j already in its
                          ** pages (>= 0; ctx + rows <= max_kv) */
  const int32_t *const *block_table; /* [nseq]: sequence j's page indices,
                          ** at least ceil((ctx[j] + rows_j) / tpp) of them,
                          ** each in 0 .. pool_pages-1 */
} lsim_cuda_attn_batch;

/* Knobs for benchmarks and tests; open sets the defaults (all 0). */
typedef struct lsim_cuda_attn_tune {
  int splits;     /* KV splits per decode work item: 0 (default) by shape
                  ** (flash-decoding: enough blocks for about two waves,
                  ** chunks of at least min_chunk tokens), n >= 1 forced */
  int min_chunk;  /* smallest split chunk in tokens (0: 256) */
  int pre_splits; /* prefill tiles: 0 (default) split only when the
                  ** prefill tiles cannot fill the device; n >= 1 forced */
  int wide;       /* benchmarks: the wide kernel's variant, 0 (default) the
                  ** measured best; 1 one block of 8 warps per SM, 2 two
                  ** (128 registers), 3 as 1 with Q in registers */
} lsim_cuda_attn_tune;

typedef struct lsim_cuda_attn lsim_cuda_attn; /* opaque */

/* Open a context: validates cfg (E_USAGE), allocates the metadata buffers
** (device and pinned host) and the split-KV workspace for the maxima.
** *out is NULL on failure.  Errors: E_USAGE, E_NOMEM, E_BACKEND. */
lsim_err lsim_cuda_attn_open(lsim_cuda_attn **out,
                             const lsim_cuda_attn_cfg *cfg, lsim_errbuf *eb);
/* Wait for the stream and free everything the context owns; NULL: no-op. */
void lsim_cuda_attn_close(lsim_cuda_attn *A);

/* Tokens per page of the context's layout. */
int64_t lsim_cuda_attn_page_tokens(const lsim_cuda_attn *A);

/*
** Prepare batch b for the appends and runs that follow (every layer of one
** iteration): validates it (E_USAGE naming the sequence and field: rows,
** ctx, a decode entry with more than one row, a page index out of the pool,
** two new rows written to the same page slot), builds the work lists
** (prefill tiles, decode items with their KV splits, the combine list, the
** append targets) and copies them to the device in one asynchronous copy on
** the stream.  b is not referenced afterwards.  Replaces the previous plan.
*/
lsim_err lsim_cuda_attn_plan(lsim_cuda_attn *A, const lsim_cuda_attn_batch *b,
                             lsim_errbuf *eb);

/*
** Write the batch's new K and V rows of layer `layer` into their pages:
** row r of sequence j (token ctx[j] + r - q_start[j]) goes to page
** block_table[j][t / tpp], slot t % tpp, every kv head.  k, v: device rows
** as described above (post-RoPE), ldk, ldv in elements (multiples of 8,
** >= kv_heads * head_dim).  One launch; nothing else in the pool changes.
*/
lsim_err lsim_cuda_attn_append(lsim_cuda_attn *A, int layer, void *pool,
                               const void *k, int64_t ldk, const void *v,
                               int64_t ldv, lsim_errbuf *eb);

/*
** Attention of layer `layer` for the planned batch: q rows [T][ldq]
** (post-RoPE), out rows [T][ldo] (q_heads * head_dim written per row,
** nothing else), KV read from the pool (the batch's own rows must have been
** appended first).  Launches: the prefill tiles (tensor cores), the decode
** items (split-KV, tensor cores), and the combine of split partials when
** any item was split; each only when it has work.
*/
lsim_err lsim_cuda_attn_run(lsim_cuda_attn *A, int layer, const void *pool,
                            const void *q, int64_t ldq, void *out,
                            int64_t ldo, lsim_errbuf *eb);

/* Wait for the stream; E_BACKEND carries an asynchronous error. */
lsim_err lsim_cuda_attn_sync(lsim_cuda_attn *A, lsim_errbuf *eb);

void lsim_cuda_attn_get_tune(const lsim_cuda_attn *A, lsim_cuda_attn_tune *t);
/* Takes effect at the next plan. */
void lsim_cuda_attn_set_tune(lsim_cuda_attn *A, const lsim_cuda_attn_tune *t);

/* One line describing the prepared plan (tiles, items, splits, launches). */
void lsim_cuda_attn_describe(const lsim_cuda_attn *A, char *buf, size_t n);

/* Test hook: fill the split workspace with NaN, so that a partial the
** combine reads and no block wrote poisons the output. */
lsim_err lsim_cuda_attn_poison(lsim_cuda_attn *A, lsim_errbuf *eb);

#ifdef __cplusplus
}
#endif

#endif /* LSIM_CUDA_ATTN_CUH */
