/*
** fwd.h: the whole-model executor (`--execute full`, issue 19): a real
** forward pass of one planned batch of a Llama-shaped decoder on the GPU,
** with the KV cache and the adapters' factors in the engine's pages of one
** device pool.  Design and numbers: docs/CUDA.md, "The whole-model
** executor".  Built only with CUDA.
**
** Per layer: RMSNorm, one fused QKV GEMM, the adapter deltas of q/k/v,
** RoPE (llama3 frequency scaling when the shape has it), K and V of the new
** rows written into the request's KV pages, paged causal attention over
** the prior context and the new rows (GQA), the O GEMM added into the
** residual stream with its delta, RMSNorm, one fused gate/up GEMM with
** their deltas, SiLU(gate) * up, the down GEMM into the residual with its
** delta.  Then the final RMSNorm and the LM head on the sampling rows only,
** and an argmax per sampled sequence.  GEMMs through cuBLAS (blas.h), bf16
** in, fp32 accumulation; the deltas through lorasim's own shrink/expand
** kernels (cuda.h, layered plans).
**
** Weights are seeded random bf16 of the real shapes, generated on the
** device (fwd.cu, lsim_fwd_fill): nothing of their size crosses the host.
**
** The pool: `pages` engine pages of page_bytes each, page p at
** pool + p * page_bytes.  A KV page holds tpp = page_bytes /
** kv_bytes_per_token tokens: for layer l the K block, then the V block,
** each tpp * kv_heads * head_dim bf16, block (l, kv) at element offset
** ((l * 2 + kv) * tpp) * kv_heads * head_dim, token slot s of head h at
** (s * kv_heads + h) * head_dim inside it.  An adapter's pages hold its
** factor rows (lsim_fwd_layout): a factor row never straddles a page.
*/
#ifndef LSIM_CUDA_FWD_H
#define LSIM_CUDA_FWD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "../../engine/lsim.h"
#include "../../engine/rowplan.h"
#include "../fwd_layout.h"
#include "../shape.h"
#include "cuda.h"

/* The adapter image's layout and values, token ids and RoPE frequencies:
** ../fwd_layout.h. */

/* ---- the executor ------------------------------------------------------- */

typedef struct lsim_fwd_cfg {
  const lsim_model_shape *shape; /* full; copied */
  int layers;          /* layers run: 1..shape->layers (0: all) */
  uint64_t seed;       /* weights, token ids */
  int max_rows;        /* rows of one forward (>= 1) */
  int max_seqs;        /* sequences of one forward (>= 1) */
  int64_t max_pages_seq; /* KV pages one sequence may name (>= 1) */
  int npools;          /* device pools (one per worker, >= 1) */
  int64_t pool_pages, page_bytes;
  int64_t kv_bytes_per_token; /* 2 x layers x kv_heads x head_dim x 2 */
  unsigned mods;       /* modules carrying adapters (0: none) */
  int max_rank;        /* largest adapter rank (>= 1 when mods) */
  int max_ids;         /* row-plan adapter ids 0 .. max_ids-1 */
  /* the adapters' residency (lsim_fwd_adapter_*): residency objects
  ** 0 .. objects-1 per pool, rank[obj] (copied) */
  int objects;
  const int *rank;
} lsim_fwd_cfg;

typedef struct lsim_fwd lsim_fwd; /* opaque */

/* What cfg needs on the device, in bytes: weights, the pools, and the
** activations and workspaces of one forward at max_rows. */
void lsim_fwd_need(const lsim_fwd_cfg *cfg, int64_t *weights, int64_t *pools,
                   int64_t *work);

/*
** Check cfg (E_DEV_UNSUPPORTED: a shape or geometry the kernels do not run,
** the message says which), check that it fits the free device memory
** (E_DEV_FIT with every size in the message), then allocate, generate the
** weights and zero the pools.  Nothing is allocated on failure.
*/
lsim_err lsim_fwd_open(lsim_fwd **out, const lsim_fwd_cfg *cfg,
                       lsim_errbuf *eb);
/* The two checks of lsim_fwd_open alone (nothing allocated): what a replay
** runs before it writes any file. */
lsim_err lsim_fwd_check(const lsim_fwd_cfg *cfg, lsim_errbuf *eb);
void lsim_fwd_close(lsim_fwd *F); /* NULL: no-op */

/* Device address of pool i (page p at + p * page_bytes); the executor's
** compute stream and its copy stream (cudaStream_t). */
void *lsim_fwd_pool(lsim_fwd *F, int i);
void *lsim_fwd_stream(lsim_fwd *F);
void *lsim_fwd_copy_stream(lsim_fwd *F);
/* Tokens per KV page. */
int lsim_fwd_tpp(const lsim_fwd *F);

/* One sequence (one plan entry) of a batch: its rows are positions
** ctx .. ctx + rows - 1 of request `request`; its KV pages in token order
** (pages[i] holds positions i * tpp ..); sample: its last row is sampled;
** prefill: a prefill entry (they come first; a decode entry has one row). */
typedef struct lsim_fwd_seq {
  int prefill;
  int rows;
  int64_t ctx;
  int sample;
  int64_t request;
  const int64_t *pages;
  int64_t npages;
} lsim_fwd_seq;

/* An adapter of a batch (row-plan id): its device page tables, for every
** layer and module, ptab + (l * 7 + m) * 2 * rank (int32 units of
** LSIM_FWD_UNIT bytes from the batch's pool), its rank and scale. */
typedef struct lsim_fwd_adapter {
  const int32_t *ptab; /* NULL: absent */
  int rank;
  float scale;
} lsim_fwd_adapter;

typedef struct lsim_fwd_batch {
  int pool;                 /* which pool holds the KV and factors */
  int n;                    /* sequences, in packed order */
  const lsim_fwd_seq *seq;
  /* the adapters: rp's rows are the batch's rows in order; NULL: base
  ** only.  ad[id] for every id rp names (nad entries) */
  const lsim_rowplan *rp;
  const lsim_fwd_adapter *ad;
  int nad;
  int path;                 /* enum lsim_cuda_path for the deltas */
  int onepass;              /* the base projections and their deltas in
                            ** one pass (lsim_cuda_lora_run_gemm, issue
                            ** 23): 0 (default) where the chooser takes it
                            ** and path is AUTO; 1 wherever the plan
                            ** allows it; 2 the partitioned composition
                            ** (cuBLASLt on part of the SMs beside the
                            ** branch; up to LSIM_CUDA_GEMM_MAX_ROWS rows,
                            ** where cuBLASLt is there); -1 never (the
                            ** cuBLAS GEMM, then the branch).  The chooser
                            ** (0) names the partitioned one above 128
                            ** rows, but the executor takes it only when
                            ** asked (2) until it has run on a GPU */
} lsim_fwd_batch;

/*
** Run one forward pass.  Host work (checks, token ids, the block tables,
** the adapter plans and their one metadata copy each) comes first (and
** the composition of each adapted projection: the cuBLAS GEMM then the
** branch, both in one pass, or the GEMM on part of the SMs beside the
** branch, batch->onepass); then
** the device work is enqueued between two CUDA events on the compute
** stream, and *ns (may be NULL) is the device time between them (the call
** waits for it).  E_USAGE for a batch over the cfg's bounds, a sequence
** whose pages do not hold ctx + rows tokens, or a page out of the pool.
*/
lsim_err lsim_fwd_run(lsim_fwd *F, const lsim_fwd_batch *b, int64_t *ns,
                      lsim_errbuf *eb);
/* The sampled token of each sampled sequence of the last run, in order
** (up to max; *n how many); -1 for a row whose logits were all NaN. */
lsim_err lsim_fwd_tokens(lsim_fwd *F, int32_t *out, int max, int *n,
                         lsim_errbuf *eb);

/* ---- the adapters in the pools ------------------------------------------ */

/*
** Stage generation `gen` of residency object obj (artifact art, version
** ver, the cfg's rank) into engine pages pages[0..npages) of pool `pool`:
**   1. the host tier: the adapter's image (npages pages laid out by
**      lsim_fwd_layout, values of lsim_fwd_factors) in pinned host memory,
**      made on first use and kept while the version stays the same, with
**      its 64-bit positional checksum taken when it was made
**   2. the page table of every (layer, module): each row's unit offset
**      through the engine pages, copied to the object's device slot
**   3. on the copy stream: a copy event, the image page by page into the
**      engine pages (one copy per run of consecutive pages), a second
**      event (the load's measured time is between the two), a checksum
**      kernel reading the pages back, a third event
** Nothing is launchable until lsim_fwd_adapter_publish.  E_STAGE_FIT when
** the rows do not fit the pages, E_USAGE, E_NOMEM, E_BACKEND.
*/
lsim_err lsim_fwd_adapter_stage(lsim_fwd *F, int pool, int obj, int art,
                                int ver, const int64_t *pages, int64_t npages,
                                lsim_errbuf *eb);
/* Wait for the staged copy, then validate it (the device checksum of the
** pages equals the image's: E_DEV_CHECKSUM otherwise, and the object stays
** unpublished) and make it launchable.  E_DEV_NO_LOAD without a stage. */
lsim_err lsim_fwd_adapter_publish(lsim_fwd *F, int pool, int obj,
                                  lsim_errbuf *eb);
/* No longer launchable; a copy still in flight is waited for first, so the
** pages can be handed out at once. */
lsim_err lsim_fwd_adapter_retire(lsim_fwd *F, int pool, int obj,
                                 lsim_errbuf *eb);
/* The device page tables of obj's published generation (NULL when none). */
const int32_t *lsim_fwd_adapter_ptab(const lsim_fwd *F, int pool, int obj);
/* The device time of obj's most recent stage copy in ns (waits for it);
** -1 when never staged. */
int64_t lsim_fwd_adapter_load_ns(lsim_fwd *F, int pool, int obj);
/* The host tier image of obj and its layout's row offsets (the verify
** mode reads the factors from it); NULL when none. */
const uint16_t *lsim_fwd_adapter_image(const lsim_fwd *F, int obj,
                                       const int64_t **off);
/* Test hook: flip one byte of obj's host image after its checksum was
** taken (the next stage's publication must fail with E_DEV_CHECKSUM). */
void lsim_fwd__corrupt_image(lsim_fwd *F, int obj, int64_t byte);

/* ---- for tests and the benchmark ---------------------------------------- */

/* Weight tensors of the executor, as lsim_fwd_weight names them. */
enum lsim_fwd_tensor {
  LSIM_FWD_W_EMBED = 0, /* [vocab][hidden] */
  LSIM_FWD_W_FINAL_NORM, /* [hidden] */
  LSIM_FWD_W_LM_HEAD,   /* [vocab][hidden] (the embedding when tied) */
  LSIM_FWD_W_ATTN_NORM, /* per layer [hidden] */
  LSIM_FWD_W_QKV,       /* per layer [(q + 2 kv) head_dim][hidden] */
  LSIM_FWD_W_O,         /* per layer [hidden][q head_dim] */
  LSIM_FWD_W_MLP_NORM,  /* per layer [hidden] */
  LSIM_FWD_W_GATE_UP,   /* per layer [2 intermediate][hidden]: gate rows
                           then up rows */
  LSIM_FWD_W_DOWN       /* per layer [hidden][intermediate] */
};
/* Device address and element count of a weight tensor. */
const void *lsim_fwd_weight(const lsim_fwd *F, int tensor, int layer,
                            int64_t *elems);
/* The residual stream after the last layer, [rows][hidden] bf16, the
** last run's (device address); and its token ids (device, [rows] int32). */
const void *lsim_fwd_hidden(const lsim_fwd *F);
const int32_t *lsim_fwd_token_ids(const lsim_fwd *F);
/* Device time of each stage of the last run, when F was opened with
** LSIM_FWD_PROFILE set in the environment (0 else): GEMMs, attention
** (append + attention), deltas, the rest; and the count of launches. */
typedef struct lsim_fwd_prof {
  int64_t gemm_ns, attn_ns, lora_ns, other_ns, total_ns;
} lsim_fwd_prof;
void lsim_fwd_prof_get(const lsim_fwd *F, lsim_fwd_prof *out);

/* The delta of module m (enum lsim_shape_module), layer l of the last
** run's adapter plan on X [T][ldx] into Y [T][ldy] (device rows of the
** last run's T), then wait: the verify mode's second launch.  E_STATE when
** the last run had no adapter rows or m carries none. */
lsim_err lsim_fwd_delta(lsim_fwd *F, int m, int l, const void *X, int ldx,
                        void *Y, int ldy, lsim_errbuf *eb);
/* dst[i] = lsim_fwd_tern(key, i) as bf16: integer inputs for that mode. */
lsim_err lsim_fwd_fill_tern(void *dst, int64_t n, uint64_t key, void *stream,
                            lsim_errbuf *eb);
static inline int lsim_fwd_tern(uint64_t key, int64_t i) {
  return (int)(lsim_fwd_mix(key ^ lsim_fwd_mix((uint64_t)i)) % 3u) - 1;
}

/* ---- the kernels, one call each (tests time and check them alone) ------ */

/* dst[i] = offset + scale * u_i, u_i uniform in [-1, 1) from (key, i). */
lsim_err lsim_fwd_fill(void *dst, int64_t n, uint64_t key, float scale,
                       float offset, void *stream, lsim_errbuf *eb);
/* out[t] = table[tok[t]] (rows of H bf16, H a multiple of 8). */
lsim_err lsim_fwd_k_embed(void *out, const void *table, const int32_t *tok,
                          int T, int H, void *stream, lsim_errbuf *eb);
/* out[t] = in[rows ? rows[t] : t] * rsqrt(mean(in^2) + eps) * g, fp32
** inside, rounded once; row strides ldo, ldi (multiples of 8). */
lsim_err lsim_fwd_k_rmsnorm(void *out, int ldo, const void *in, int ldi,
                            const int32_t *rows, const void *g, int T, int H,
                            float eps, void *stream, lsim_errbuf *eb);
/* Rotate q heads [0, nq) and k heads [nq, nq + nk) of each row of x
** (stride ld) at position pos[t]: the halves (i, i + d/2) of each head by
** angle pos * inv_freq[i] (device, d/2 doubles), computed in fp64. */
lsim_err lsim_fwd_k_rope(void *x, int ld, const int32_t *pos,
                         const double *inv_freq, int T, int nq, int nk, int d,
                         void *stream, lsim_errbuf *eb);
/* out[t][i] = silu(gu[t][i]) * gu[t][I + i], fp32 inside, rounded once. */
lsim_err lsim_fwd_k_silu_mul(void *out, const void *gu, int T, int I,
                             void *stream, lsim_errbuf *eb);
/* idx[s] = the lowest index of the largest of logits[s][0..V) (fp32),
** NaN never largest, -1 when every value is NaN. */
lsim_err lsim_fwd_k_argmax(int32_t *idx, const float *logits, int S, int V,
                           void *stream, lsim_errbuf *eb);

#ifdef __cplusplus
}
#endif

#endif /* LSIM_CUDA_FWD_H */
