/*
** cuda.h: what the CUDA build offers the rest of lorasim.
**
** Built only when nvcc is found (CMake defines LSIM_HAVE_CUDA).  Every CUDA
** call is checked; a failure becomes LSIM_E_BACKEND with the CUDA error
** string, never an abort.  Nothing here prints.
**
** 1. A device probe and a self-test (device.cu).
**
** 2. The adapter branch of one target module on the GPU (lora.cu, shrink.cu,
**    expand.cu; design in docs/CUDA.md):
**
**        Y[i] += s_a * (X[i] A_a^T) B_a^T    for every active row i of a plan
**
**    with A_a [r_a][d_in] and B_a [d_out][r_a] (the logical orientation of
**    cpu_ref.h), per-adapter logical rank r_a and scale s_a, X, Y and the
**    factors in one 16-bit type (bf16 or fp16), fp32 accumulation.  Y holds
**    the base output and receives the delta in place; rows the plan marks
**    base-only are never read or written.  A context (lsim_cuda_lora) holds
**    one module's adapter table on the device and the current plan's
**    metadata; running a plan is at most two kernel launches (shrink, then
**    expand), and preparing one is one host-to-device copy.
**
**    Lifecycle: open -> load adapters -> plan (per iteration) -> run (per
**    layer/module sharing the plan) -> close.  Launches go to the context's
**    stream and are asynchronous; lsim_cuda_lora_sync waits for them.  A
**    context is not thread-safe.
*/
#ifndef LSIM_CUDA_H
#define LSIM_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" { /* rowplan.h and plan.h carry no linkage guards of their own */
#endif

#include "../../engine/lsim.h"
#include "../../engine/rowplan.h"

/* ---- probe and self-test ------------------------------------------------ */

/* Number of visible CUDA devices (0 when none or no driver), and a one-line
** description of device 0 (or of why there is none) in buf. */
int lsim_cuda_describe(char *buf, size_t n);
/* The L2 hint the factor loads were built with (LSIM_FACTOR_HINT in
** common.cuh: 0 none, 1 streaming loads, 2 an evict_first policy). */
int lsim_cuda_factor_hint(void);

/* Run a checked kernel over n elements on device 0 and compare the result
** with the CPU exactly.  LSIM_E_BACKEND on any CUDA error or mismatch. */
lsim_err lsim_cuda_selftest(int n, lsim_errbuf *eb);

/* ---- device memory for callers without the CUDA headers ------------------ */

/* cudaMalloc / cudaFree / synchronous copies and memset on the current
** device; *p is NULL after a failed malloc. */
lsim_err lsim_cuda_malloc(void **p, size_t bytes, lsim_errbuf *eb);
void lsim_cuda_free(void *p);
lsim_err lsim_cuda_h2d(void *dst, const void *src, size_t bytes,
                       lsim_errbuf *eb);
lsim_err lsim_cuda_d2h(void *dst, const void *src, size_t bytes,
                       lsim_errbuf *eb);
lsim_err lsim_cuda_memset(void *dst, int byte, size_t bytes, lsim_errbuf *eb);

/* ---- 16-bit element types ------------------------------------------------ */

enum lsim_cuda_dtype { LSIM_CUDA_BF16 = 0, LSIM_CUDA_FP16 = 1 };

/* Round-to-nearest-even conversion of f to the type's bits, and back
** (exact).  Unknown dtype: bf16. */
uint16_t lsim_cuda_from_float(int dtype, float f);
float lsim_cuda_to_float(int dtype, uint16_t h);

/* ---- the adapter branch --------------------------------------------------- */

/*
** Execution paths (docs/CUDA.md).  Each consumes the plan's own metadata:
**
**   decode       one row per block: the active rows (perm) with each row's
**                adapter read from row_adapter (S-LoRA's per-row layout);
**                CUDA cores; for one-row segments
**   sgmv         contiguous segments: perm, seg_offsets, seg_adapter;
**                tiles of up to 8 rows of one adapter; CUDA cores
**   indexed      sorted_rows, active_ids, id_starts with the base sentinel
**                group (-1) carried to the device and skipped there; tiles
**                of up to 8 rows; CUDA cores
**   sgmv_mma     as sgmv with tiles of up to 64 rows on the tensor cores
**                (mma.sync, fp32 accumulation); ranks <= 128
**   indexed_mma  as indexed on the tensor cores; ranks <= 128
**   fused        contiguous segments in tiles of up to 8 rows, shrink and
**                expand in ONE launch: a thread-block cluster per tile
**                splits d_in and d_out, the shrink's partial sums meet in
**                distributed shared memory (no workspace, no second
**                launch); CUDA cores; for decode and short segments
**
** LSIM_CUDA_PATH_AUTO lets the chooser pick per plan shape.
*/
enum lsim_cuda_path {
  LSIM_CUDA_PATH_AUTO = 0,
  LSIM_CUDA_PATH_DECODE,
  LSIM_CUDA_PATH_SGMV,
  LSIM_CUDA_PATH_INDEXED,
  LSIM_CUDA_PATH_SGMV_MMA,
  LSIM_CUDA_PATH_INDEXED_MMA,
  LSIM_CUDA_PATH_FUSED,
  LSIM_CUDA_PATH__COUNT
};
/* "auto", "decode", "sgmv", "indexed", "sgmv_mma", "indexed_mma",
** "fused"; "?". */
const char *lsim_cuda_path_name(int path);
/* The path LSIM_CUDA_PATH_AUTO takes for plan p whose largest rank is rmax,
** paged: a paged plan (lsim_cuda_lora_plan_paged) (host only; the rule
** and its measurements: lora.cu, docs/CUDA.md). */
int lsim_cuda_choose_path(const lsim_rowplan *p, int rmax, int paged);
/* The path named `name`; -1 if unknown. */
int lsim_cuda_path_find(const char *name);

#define LSIM_CUDA_MAX_RANK 1024 /* any path; the _mma paths take <= 128 */

typedef struct lsim_cuda_lora_cfg {
  int device;       /* CUDA device ordinal */
  int dtype;        /* enum lsim_cuda_dtype of X, Y and the factors */
  int d_in, d_out;  /* the module's shape (>= 1) */
  int max_adapters; /* adapter ids 0 .. max_adapters-1 (>= 1) */
  void *stream;     /* cudaStream_t for every launch and copy; NULL: the
                    ** context creates (and destroys) its own */
  int pad_rank;     /* 0 (default): every adapter at its own logical rank;
                    ** R > 0: the zero-padded slot layout, kept for
                    ** comparison: every adapter is stored with R rank rows
                    ** (the rows past its rank zero) and the kernels compute
                    ** all R; ranks above R are refused */
} lsim_cuda_lora_cfg;

/* Knobs for benchmarks and tests; lsim_cuda_lora_open sets the defaults. */
typedef struct lsim_cuda_lora_tune {
  int pdl;           /* 1: the expand is a programmatic dependent launch of
                     ** the shrink (overlaps its factor and Y loads with the
                     ** shrink); 0: plain stream order; -1 or 1
                     ** (default): on */
  int split_t;       /* _mma expand: 1 (default): t enters the tensor cores
                     ** as hi + lo 16-bit parts (16 significant bits);
                     ** 0: rounded once to the input type (as vLLM) */
  int shrink_splits; /* d_in ranges of the shrink; 0 (default): by shape */
  int expand_cols;   /* _mma expand column blocks; 0 (default): by shape */
  int only;          /* benchmarks only: 1 launch the shrink alone, 2 the
                     ** expand alone (on a stale workspace), 3 the expand
                     ** alone as a programmatic dependent of the launch
                     ** before it, reading Y only after griddepcontrol.wait
                     ** (bench_kernels: after the base GEMM), 4 both, the
                     ** shrink too as a programmatic dependent of the launch
                     ** before it (completing only after it) and the expand
                     ** reading Y after its wait; 0 (default): both;
                     ** ignored by the one-launch fused path */
  int fused_cs;      /* fused: blocks per cluster (1..16); 0 (default): by
                     ** shape */
  int fused_mt;      /* fused: rows per tile (1, 2, 4, 8); 0 (default): the
                     ** smallest that holds the longest segment, at most 8 */
  int fused_prefetch;/* fused: 1 (default): each block asks L2 for its B
                     ** range before the shrink; 0: no prefetch */
  int fused_preload; /* fused: 1 (default): each thread loads its Y and
                     ** first 8 B rows before the shrink; 0: after it */
  int gemm_bm;       /* one-pass GEMM: rows per block (64, 128, 256, at
                     ** least the plan's rows); 0 (default): the smallest
                     ** that holds them */
  int gemm_cs;       /* one-pass GEMM: K ranges per column tile (1..16);
                     ** 0 (default): by shape */
  int gemm_prefetch; /* one-pass GEMM: 1 (default): each block asks L2 for
                     ** its epilogue's B^T ranges before the main loop */
  int shrink_rsplit; /* _mma shrink, the rank split (16 rank columns per
                     ** block): 0 (default) for short tiles of mixed rank
                     ** classes, 1 never, 2 always */
  int expand_rsplit; /* _mma expand, the rank split (a high-rank tile's
                     ** column ranges over up to 4 blocks): 0 (default)
                     ** never (it lost where measured), 1 by the shrink's
                     ** rule, 2 always */
  int expand_order;  /* _mma expand, the balanced order: its blocks as a
                     ** list of (tile, column block) laid out so that the
                     ** blocks an SM receives in the first waves (block b
                     ** goes with b + sms, b + 2 sms, ...) carry about equal
                     ** bytes, heaviest first: for batches whose tiles differ
                     ** in rank.  0 (default): never (not yet run on a GPU),
                     ** 1 where the tiles' ranks differ, 2 always */
  int gemm_probe;    /* benchmarks only, results wrong: 1 the one-pass
                     ** GEMM's loads without MMAs, 2 no epilogue, 3 both */
  int gemm_kernel;   /* one-pass GEMM: 0 (default) the streaming kernel
                     ** (wgemm) at up to 64 rows and 1024 adapter K'
                     ** columns where the plan and driver allow it, else
                     ** the lgemm kernel; 1 always lgemm; 2 only wgemm
                     ** (run_gemm refuses where it cannot) */
  int gemm_ns;       /* streaming one-pass GEMM: pipeline stages (2..8);
                     ** 0 (default): as many as fit */
  int sms;           /* the SM count the launch rules above size grids
                     ** for (shrink d_in ranges, expand column blocks,
                     ** fused clusters); 0 (default): the device's.  The
                     ** partitioned composition (docs/CUDA.md) gives the
                     ** branch the SMs a concurrent base GEMM leaves */
} lsim_cuda_lora_tune;

typedef struct lsim_cuda_lora lsim_cuda_lora; /* opaque */

/* Open a context on cfg->device.  *out is NULL on failure.  Errors:
** E_USAGE (bad cfg), E_BACKEND, E_NOMEM. */
lsim_err lsim_cuda_lora_open(lsim_cuda_lora **out,
                             const lsim_cuda_lora_cfg *cfg, lsim_errbuf *eb);
/* Wait for outstanding work, free every device and host buffer the context
** owns (adapter factors included).  NULL is a no-op. */
void lsim_cuda_lora_close(lsim_cuda_lora *L);

/*
** Make adapter `id` resident: A [rank][d_in] and B [d_out][rank] row-major
** in the context's dtype (raw 16-bit patterns), scale s.  The factors are
** copied (A with rows padded to a multiple of 8 elements, B transposed to
** rank rows of d_out); the caller keeps its arrays.  Loading an id that is
** resident replaces it.  Waits for the context's stream first, so no launch
** can see a half-written table entry (the event-fenced pool of issue 6
** part 2 replaces this).  A plan naming `id` must be prepared again.
** With cfg.pad_rank R the factors are stored in an R-row slot (rows past
** `rank` zero) and computed at R; plans still name the logical rank.
** Errors: E_USAGE (id, rank 1..LSIM_CUDA_MAX_RANK or above pad_rank, NULL
** factor, scale not finite), E_NOMEM, E_BACKEND.
*/
lsim_err lsim_cuda_lora_load(lsim_cuda_lora *L, int id, int rank, float scale,
                             const uint16_t *A, const uint16_t *B,
                             lsim_errbuf *eb);
/* Free adapter id's factors (waits for the stream).  E_USAGE for an id out
** of range; unloading an absent id is a no-op. */
lsim_err lsim_cuda_lora_unload(lsim_cuda_lora *L, int id, lsim_errbuf *eb);

/*
** Prepare plan p for lsim_cuda_lora_run on `path` (AUTO: the chooser).  The
** plan is re-validated (lsim_rowplan_validate: its E_PLAN_* code on
** failure); every active row's adapter must be resident
** (E_REF_UNKNOWN_ADAPTER) with the plan's logical rank (E_REF_RANK); an
** _mma path needs ranks <= 128 (E_USAGE).  Builds the tile list and copies
** all metadata the kernels read to the device in one asynchronous copy; p
** is not referenced afterwards.  Replaces the previous plan.
*/
lsim_err lsim_cuda_lora_plan(lsim_cuda_lora *L, const lsim_rowplan *p,
                             int path, lsim_errbuf *eb);
/*
** Paged factors (the device pool's layout, pool.h): prepare plan p so that
** every factor row is read through a page table instead of the context's
** own contiguous adapters.  pool: the device address of page 0; a page is
** page_elems 16-bit values (a multiple of 8, at least d_in and d_out
** rounded up to 8); ent[id] for every adapter id the plan names (nent
** entries; ptab NULL: not resident): the device address of its page table
** (2 * rank page indices, the rank rows of A then the rank rows of B
** transposed), its rank and scale.  A page's elements past its row's
** d_in (A) up to the next multiple of 8 must be zero, as in the pool's
** zero-padded page images: the CUDA-core shrink reads whole 16-byte
** vectors and multiplies that tail by X's zero fill.  The per-plan adapter table travels in
** the plan's one metadata copy, so the plan snapshots the page tables'
** addresses, not their contents: the caller keeps the named pages and page
** tables unchanged until the launches that use the plan completed (the
** pool's last-use events).  Same paths, chooser and errors as
** lsim_cuda_lora_plan (E_REF_UNKNOWN_ADAPTER for a missing entry,
** E_REF_RANK for another rank); E_USAGE for a bad geometry or a context
** opened with pad_rank.
*/
typedef struct lsim_cuda_paged_ref {
  const int32_t *ptab; /* device: 2 * rank page indices; NULL: absent */
  int rank;
  float scale;
} lsim_cuda_paged_ref;
lsim_err lsim_cuda_lora_plan_paged(lsim_cuda_lora *L, const lsim_rowplan *p,
                                   int path, const void *pool,
                                   int64_t page_elems,
                                   const lsim_cuda_paged_ref *ent, int nent,
                                   lsim_errbuf *eb);

/*
** Layered factors (the whole-model executor, docs/CUDA.md "The whole-model
** executor"): one plan serves the same module in every layer.  Factor row
** k of a table entry is at base + ptab[k] * unit_elems (A rows, then B^T
** rows, as in a paged plan), but the unit is only an address step: rows
** may be any width and sit anywhere unit-aligned (the executor packs every
** layer's rows into an adapter's engine pages).  ent is [nlayers][nent];
** every named adapter needs an entry of the same rank in every layer.  The
** nlayers tables travel in the plan's one metadata copy, and
** lsim_cuda_lora_run_layer(layer) launches with that layer's table.  A
** row's elements past its d_in up to the next multiple of 8 must be zero.
** Errors as lsim_cuda_lora_plan_paged.
*/
lsim_err lsim_cuda_lora_plan_layers(lsim_cuda_lora *L, const lsim_rowplan *p,
                                    int path, const void *base,
                                    int64_t unit_elems,
                                    const lsim_cuda_paged_ref *ent, int nent,
                                    int nlayers, lsim_errbuf *eb);
/* lsim_cuda_lora_run for one layer of a layered plan (E_USAGE: no such
** layer; a plan of another kind has one layer, 0). */
lsim_err lsim_cuda_lora_run_layer(lsim_cuda_lora *L, int layer, const void *X,
                                  int ldx, void *Y, int ldy, lsim_errbuf *eb);

/* The path of the prepared plan (never AUTO); -1 before the first plan. */
int lsim_cuda_lora_path(const lsim_cuda_lora *L);
/* One line describing the prepared plan's launches (grids, splits). */
void lsim_cuda_lora_describe(const lsim_cuda_lora *L, char *buf, size_t n);

/*
** Y += delta of the prepared plan: X [T][ldx] and Y [T][ldy] are device
** pointers in packed row order (T = the plan's rows), 16-byte aligned,
** ldx >= d_in and ldy >= d_out multiples of 8; columns past d_in / d_out
** are neither read nor written.  At most two launches on the context's
** stream, none when the plan has no active row; asynchronous.  Errors:
** E_STATE (no plan), E_USAGE (pointers, strides), E_BACKEND (launch).
*/
lsim_err lsim_cuda_lora_run(lsim_cuda_lora *L, const void *X, int ldx,
                            void *Y, int ldy, lsim_errbuf *eb);
/* Wait for the context's stream; E_BACKEND carries an asynchronous error. */
lsim_err lsim_cuda_lora_sync(lsim_cuda_lora *L, lsim_errbuf *eb);

void lsim_cuda_lora_get_tune(const lsim_cuda_lora *L, lsim_cuda_lora_tune *t);
/* Takes effect at the next lsim_cuda_lora_plan. */
void lsim_cuda_lora_set_tune(lsim_cuda_lora *L, const lsim_cuda_lora_tune *t);

/*
** The base projection and the branch in one pass (issue 23; lgemm.cuh,
** docs/CUDA.md "Base projection and branch in one pass"):
**
**     Y = beta Y + X W^T + delta            for all T rows of the plan
**
** W [d_out][ldw] row-major (16-bit, the context's type), X [T][ldx], Y
** [T][ldy] in packed row order; base rows get the GEMM alone.  The plan's
** shrink, then one tensor-core GEMM launch (its programmatic dependent)
** that adds the delta in its epilogue: fp32 accumulation, one rounding to
** Y's type.  Available for plans of at most LSIM_CUDA_GEMM_MAX_ROWS rows
** and ranks <= 128 on the decode, sgmv or sgmv_mma path (the others have
** no separate shrink or another row list): lsim_cuda_lora_gemm_ok says,
** with the reason; run_gemm refuses with E_USAGE otherwise.  Errors as
** lsim_cuda_lora_run (E_STATE, E_USAGE for pointers and strides, E_BACKEND).
*/
#define LSIM_CUDA_GEMM_MAX_ROWS 256
lsim_err lsim_cuda_lora_run_gemm(lsim_cuda_lora *L, const void *X, int ldx,
                                 const void *W, int ldw, void *Y, int ldy,
                                 float beta, lsim_errbuf *eb);
/* The same for one layer of a layered plan. */
lsim_err lsim_cuda_lora_run_gemm_layer(lsim_cuda_lora *L, int layer,
                                       const void *X, int ldx, const void *W,
                                       int ldw, void *Y, int ldy, float beta,
                                       lsim_errbuf *eb);
/* 1 when the prepared plan can run lsim_cuda_lora_run_gemm; else 0 and
** *why (if given) says why. */
int lsim_cuda_lora_gemm_ok(const lsim_cuda_lora *L, const char **why);
/* One line: the one-pass GEMM's geometry for the prepared plan. */
void lsim_cuda_lora_gemm_describe(const lsim_cuda_lora *L, char *buf,
                                  size_t n);
/* The composition for plan p (largest rank rmax) on a d_in x d_out module
** (host only): LSIM_CUDA_GEMM_ONEPASS the one-pass GEMM, with
** *branch_path the path to plan for it; LSIM_CUDA_GEMM_PART the caller's
** base GEMM through cuBLASLt on part of the SMs (LSIM_CUDA_PART_SHARE)
** beside the branch on *branch_path, whose grids are sized for the other
** part (tune sms), its delta added after the join (docs/CUDA.md "The
** partitioned composition"); LSIM_CUDA_GEMM_SEQ the caller's base GEMM
** then the branch (*branch_path AUTO). */
#define LSIM_CUDA_GEMM_SEQ 0
#define LSIM_CUDA_GEMM_ONEPASS 1
#define LSIM_CUDA_GEMM_PART 2
/* the partitioned composition gives the branch SMs / LSIM_CUDA_PART_SHARE
** of the device and the GEMM the rest (measured best at mixed256, r16 and
** r64, docs/BENCHMARKS.md) */
#define LSIM_CUDA_PART_SHARE 2
int lsim_cuda_gemm_choose(const lsim_rowplan *p, int rmax, int d_in,
                          int d_out, int *branch_path);

/* Test hook: fill the shrink workspace with NaN bit patterns, so that a
** value the shrink should have written and did not poisons Y. */
lsim_err lsim_cuda_lora_poison(lsim_cuda_lora *L, lsim_errbuf *eb);

#ifdef __cplusplus
}
#endif

#endif /* LSIM_CUDA_H */
