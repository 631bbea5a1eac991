/*
** backend.h: the one interface every execution backend implements.
**
** A backend executes (or, for `model`, only costs) the adapter work of one
** frozen iteration plan.  Under the model clock (the default) the
** simulated duration of an iteration comes from the cost model below,
** never from a measured time, so a run's rows are identical whatever
** backend executes it; what a backend measures is recorded
** (iterations.backend_ns, measured_ns) and compared, not obeyed.  Under
** the measured clock (--clock measured, docs/FIDELITY.md) the replay ends
** an iteration at its measured backend_ns and a load at its load_ns.
**
**   model    cost model only: reports the modelled ns as its backend_ns
**   cpu_ref  executes each iteration's adapter work for one target module
**            exactly (GMP rationals / proven-exact integers) through every
**            execution family and checks that they agree
**   cuda     the same tensors through the CUDA kernels (bf16 in, fp32
**            accumulation); with verify, each iteration is compared with
**            the exact reference (validations table)
**
** Callers use the lsim_backend_* wrappers, never the table directly; every
** slot but open and run is optional.
**
** The residency protocol (docs/ARCHITECTURE.md, "Backends").  A backend
** opened with the engine's pool geometry (cfg.pool_pages > 0) follows the
** engine's residency page by page: the replay connects the residency hooks
** of every worker's pool (engine/residency.h, lsim_res_hooks) to the
** wrappers below, so the backend is told, with the page ids the engine
** logs, of
**
**   stage    an adapter's bytes copied into the engine's reservation:
**            (worker, object, version, generation, pages), at the copy's
**            start; the pages must be free in the backend's own map
**   publish  the same generation made visible (one visibility point)
**   retire   the pages given back: a victim (published = 1), fenced by
**            its launches (ev->fence: the launches that named the
**            generation; every one must have been executed by `run`), or
**            a staged copy rolled back (published = 0)
**   launch   a launch snapshot of the engine names a published generation
**   kv       KV pages allocated to / released by a KV object
**
** and `run` checks every adapter row of the plan (adapter, generation on
** plan->worker) against what was staged and published at those pages and
** against the launch snapshot: a launch naming a generation or a page the
** engine had not published fails E_STAGE_LAUNCH; a retire before the last
** launch naming the pages was executed, E_STAGE_FENCE; a protocol call
** out of order (stage into pages the backend does not hold free, publish
** without stage, a KV event on pages it does not hold so), E_STAGE_ORDER;
** a stage the engine never published, met at a retire or at `finish`,
** E_STAGE_UNPUBLISHED; bytes that do not fit the reserved pages,
** E_STAGE_FIT.  The protocol observes: it never changes a decision, so
** event rows are the same whatever backend runs.
**
**   model    records nothing (no slots): it executes nothing, so there is
**            nothing to place; the checking lives in the backends that
**            hold bytes
**   cpu_ref  factor values live at the engine's pages (a sparse host page
**            store: each page holds at most page_bytes bytes, materialised
**            when staged) and are read through the page ids at run
**   cuda     the device pool follows the engine: one frame per engine
**            page, the adapter's factor rows written into the frames of
**            its pages, published and retired with the engine
** A backend opened without the geometry (pool_pages 0) keeps no residency
** (tests and tools that run plans directly).
*/
#ifndef LSIM_BACKEND_H
#define LSIM_BACKEND_H

#include "../engine/lsim.h"
#include "../engine/plan.h"
#include "../engine/residency.h"

/*
** The profiled cost model (docs/PROFILE.md): terms that follow the
** hardware, fitted by `lorasim profile` to whole forward passes measured
** on a GPU at one model shape.  What it reads of a plan:
*/
typedef struct lsim_cost_feat {
  int64_t tokens;        /* T: prefill + decode rows */
  int64_t sampled;       /* S: rows through the LM head (entries with
                            sample = 1; without positions, every decode
                            entry and every prefill entry) */
  int64_t decode_rows;   /* D */
  int64_t decode_ctx;    /* sum over decode rows of ctx + 1: the keys each
                            attends to */
  int64_t prefill_seqs;  /* P: prefill entries */
  int64_t prefill_pairs; /* sum over prefill entries of the causal (query,
                            key) pairs: rows x ctx + rows (rows + 1) / 2 */
  int64_t lora_segments; /* G: contiguous runs of one adapter (base-only
                            runs left out) */
  int64_t rank_rows;     /* R: true-rank rows (padded-rank rows when the
                            plan has a slot_rank) */
  int lora;              /* 1 when any row carries an adapter */
  int64_t decode_rank_rows; /* R_D: the part of R on decode rows (last, so
                            that older positional initialisers read 0) */
  int64_t adapter_ranks; /* U: distinct adapters x the batch's largest rank
                            (the slot rank with padded-rank slots): the
                            factor rows streamed once per adapter */
} lsim_cost_feat;

/* The fitted coefficients as a profile gives them (ns, real numbers;
** docs/PROFILE.md has the formula).  lsim_cost_terms() names them in this
** order, which is also the order of the profile's "coefficients". */
enum {
  LSIM_COST_FIXED = 0,   /* iter_fixed_ns:     per iteration */
  LSIM_COST_GEMM,        /* gemm_weight_ns:    base GEMMs of every layer
                            at or below the knee (weight streaming) */
  LSIM_COST_KNEE,        /* knee_tokens:       rows where the GEMMs turn
                            compute bound: above it they cost
                            gemm_weight_ns x T / knee_tokens */
  LSIM_COST_LM_HEAD,     /* lm_head_ns:        the LM head at or below the
                            knee, when a row is sampled (x S / knee above) */
  LSIM_COST_TOKEN,       /* token_ns:          per row (norms, RoPE,
                            residuals, activation, embedding) */
  LSIM_COST_DECODE_ROW,  /* decode_row_ns:     per decode row (attention's
                            per-sequence work) */
  LSIM_COST_DECODE_CTX,  /* decode_ctx_ns:     per key a decode row attends */
  LSIM_COST_PREFILL_SEQ, /* prefill_seq_ns:    per prefill entry */
  LSIM_COST_PREFILL_PAIR,/* prefill_pair_ns:   per causal (query, key) pair */
  LSIM_COST_LORA_MODULE, /* lora_module_ns:    per adapted module and layer,
                            when a row carries an adapter */
  LSIM_COST_LORA_SEGMENT,/* lora_segment_ns:   per segment, adapted module
                            and layer */
  LSIM_COST_LORA_ELEM,   /* lora_rank_elem_ns: per rank-row and element of
                            d_in + d_out, summed over the adapted modules
                            and layers */
  LSIM_COST_LORA_DECODE_ELEM, /* lora_decode_elem_ns: the same per rank-row
                            of a decode row, on top (optional in a profile,
                            0 when absent) */
  LSIM_COST_LORA_ADAPTER_ELEM, /* lora_adapter_elem_ns: per distinct
                            adapter, rank and element of d_in + d_out over
                            the adapted modules and layers (its factors
                            streamed; optional, 0 when absent) */
  LSIM_COST_NTERMS
};
typedef struct lsim_cost_coef {
  double c[LSIM_COST_NTERMS];
} lsim_cost_coef;

/* The names of the terms ("iter_fixed_ns", ...), in enum order. */
const char *const *lsim_cost_terms(void);

/* The coefficients bound to one scenario: integers, so that a plan's time
** is computed in exact integer arithmetic (femtoseconds for the two terms
** whose unit of work is tiny). */
typedef struct lsim_cost_prof {
  int on;                  /* 0: the linear model of lsim_cost_model */
  int64_t fixed_ps, gemm_ps, lm_head_ps;
  int64_t knee_mtok;       /* the knee in thousandths of a token, >= 1 */
  int64_t token_ps, decode_row_ps, prefill_seq_ps;
  int64_t decode_ctx_fs, prefill_pair_fs;
  int64_t lora_fixed_ps;   /* lora_module_ns x adapted modules x layers */
  int64_t lora_segment_ps; /* lora_segment_ns x adapted modules x layers */
  int64_t lora_rank_row_ps;/* lora_rank_elem_ns x sum (d_in + d_out) x
                              layers */
  int64_t lora_decode_rank_row_ps; /* lora_decode_elem_ns, bound alike */
  int64_t lora_adapter_rank_ps;    /* lora_adapter_elem_ns, bound alike */
} lsim_cost_prof;

/* Bind coefficients to a model: `modules` adapted modules per layer,
** `elems` = sum over them of d_in + d_out, `layers`.  E_USAGE (msg names
** the term) for a negative, non-finite or too large coefficient or a knee
** below 0.001 tokens. */
lsim_err lsim_cost_prof_bind(const lsim_cost_coef *k, int layers, int modules,
                             int64_t elems, lsim_cost_prof *out,
                             lsim_errbuf *eb);

/* The features of a plan (slot_rank as lsim_cost_plan_ns reads it). */
void lsim_cost_plan_features(const lsim_plan *p, lsim_cost_feat *f);

/* The profiled time of features f in ns (>= 1), INT64_MAX when it does
** not fit in int64. */
int64_t lsim_cost_prof_ns(const lsim_cost_prof *c, const lsim_cost_feat *f);

/* The iteration cost model, all in nanoseconds: the hand-set linear one,
** or (prof.on) the profiled one. */
typedef struct lsim_cost_model {
  int64_t iter_fixed_ns;    /* per iteration (launch, sync, sampling) */
  int64_t prefill_token_ns; /* per prefill row through the base model */
  int64_t decode_token_ns;  /* per decode row through the base model */
  int64_t segment_ns;       /* per contiguous adapter segment */
  int64_t rank_row_ps;      /* per unit of true-rank rows (padded-rank
                               rows when the plan has a slot_rank),
                               picoseconds */
  lsim_cost_prof prof;      /* on: replaces the five above */
} lsim_cost_model;

/*
** Tensor parallelism (docs/TP.md): the collective time a TP group adds to
** an iteration, on top of lsim_cost_plan_ns.  Each iteration pays for the
** base path's two all-reduces per layer of tokens x hidden and, when it has
** adapter rows, one rank-axis all-gather per column-parallel target and
** one rank-width all-reduce per row-parallel target per layer, sized by the
** true-rank rows (ring volumes of engine/tp.h):
** calls x latency + bytes / link bandwidth.
*/
typedef struct lsim_tp_cost {
  int tp_degree;            /* <= 1: no collectives */
  int64_t coll_latency_ns;  /* per collective call */
  double link_gbps;         /* GB/s (bytes per ns); 0: no byte term */
  int layers;
  int64_t hidden;           /* elements of one token's hidden state */
  int col_targets, row_targets; /* adapted targets per layer */
  int dtype_bytes;          /* collective payload dtype size */
} lsim_tp_cost;

/* Modelled TP collective time of an iteration in ns (0 when tp_degree <=
** 1), or -1 when the byte term does not fit in int64 (a link_gbps so small
** that the time is beyond the clock); *calls (may be NULL) gets the number
** of collective calls. */
int64_t lsim_cost_collective_ns(const lsim_tp_cost *c, const lsim_plan *p,
                                int64_t *calls);

/* Modelled duration of an iteration in ns (>= 1): the linear model, or
** lsim_cost_prof_ns of the plan's features when c->prof.on. */
int64_t lsim_cost_plan_ns(const lsim_cost_model *c, const lsim_plan *p);

/* What a backend is opened with. */
typedef struct lsim_backend_cfg {
  lsim_cost_model cost;
  uint64_t seed;     /* tensor values derive from it (LSIM_RNG_TENSORS) */
  int d_in, d_out;   /* the one target module a tensor backend executes */
  int verify;        /* cuda: compare every iteration with cpu_ref */
  /* What an iteration executes (--execute, $.execute; docs/FIDELITY.md):
  ** 0 (LSIM_EXECUTE_ADAPTERS) the adapter branch of the target modules,
  ** 1 (LSIM_EXECUTE_FULL) a whole forward pass of the planned batch
  ** (cuda only).  A backend that cannot run the mode refuses it at open
  ** (E_BACKEND); the replay refuses the combination before that. */
  int execute;
  /* cuda, model shape (docs/CUDA.md "Model-shape replay"): layers > 0
  ** executes layers x ntargets modules per iteration, target t being
  ** target_d_in[t] x target_d_out[t], instead of the one d_in x d_out
  ** module; 0 (the default) keeps the one module. */
  int layers, ntargets;
  const int *target_d_in, *target_d_out;
  /* The engine's pool geometry, for the residency protocol; pool_pages 0:
  ** the backend keeps no residency.  objects: residency objects per
  ** worker (adapters, then compressed bases); adapter_rank [nadapters]
  ** (borrowed for open). */
  int workers;
  int64_t pool_pages, page_bytes;
  int nadapters, objects;
  const int *adapter_rank;
  /* cuda, execute full (docs/CUDA.md "The whole-model executor"): the
  ** scenario's model shape (borrowed for open; full, with the modules that
  ** carry adapters in adapter_modules), the engine's KV bytes per token,
  ** and the batch bounds ($.workers.max_batch_tokens, _requests) */
  const struct lsim_model_shape *shape;
  int64_t kv_bytes_per_token;
  int max_batch_tokens, max_batch_requests;
} lsim_backend_cfg;

/* What a backend following the residency was told and checked. */
typedef struct lsim_backend_counts {
  int64_t stages, publishes, retires, aborts; /* retires: published = 1;
                                                 aborts: published = 0 */
  int64_t launches;     /* launch events (object generations named) */
  int64_t runs_checked; /* runs whose adapter rows were checked */
  int64_t kv_allocs, kv_releases; /* KV pages */
  int64_t staged_bytes; /* bytes written into pages */
} lsim_backend_counts;

typedef struct lsim_backend_result {
  int64_t backend_ns; /* measured or modelled execution time; -1 unknown */
  int ok;             /* 1 when the iteration's result is valid */
  int checked;        /* 1 when the result was compared with a reference */
  int exact;          /* with checked: 1 when it matched exactly */
  const char *reference; /* with checked: what it was compared with */
  double max_abs_err, max_rel_err; /* with checked */
} lsim_backend_result;

typedef lsim_err (*lsim_backend_page_fn)(void *state,
                                         const lsim_res_page_ev *ev,
                                         lsim_errbuf *eb);

/* cfg.execute */
enum { LSIM_EXECUTE_ADAPTERS = 0, LSIM_EXECUTE_FULL = 1 };

/* What a backend is, for readers of its runs (sim/audit.c's ceilings). */
#define LSIM_BACKEND_EXECUTES 1u /* executes and times the iterations'
                                    tensor work in this process */

/* The cuda backend's name and flags, here so that a build without nvcc
** still knows them (lsim_backend_flags); backends/cuda/backend_cuda.c's
** table uses them. */
#define LSIM_CUDA_BACKEND_NAME "cuda"
#define LSIM_CUDA_BACKEND_FLAGS LSIM_BACKEND_EXECUTES

typedef struct lsim_backend_ops {
  const char *name;
  size_t state_size;
  unsigned flags; /* LSIM_BACKEND_* */
  lsim_err (*open)(void *state, const lsim_backend_cfg *cfg, lsim_errbuf *eb);
  lsim_err (*run)(void *state, const lsim_plan *plan,
                  lsim_backend_result *res, lsim_errbuf *eb);
  void (*close)(void *state);
  /* the residency protocol (above); all NULL: the backend follows none */
  lsim_backend_page_fn stage, publish, retire, launch, kv;
  lsim_err (*finish)(void *state, lsim_errbuf *eb); /* end of run checks */
  void (*counts)(const void *state, lsim_backend_counts *out);
  /* The backend's own record of page `page` of `worker`: *st an enum
  ** lsim_slot_state (RESERVED: staged, not yet published), *owner the
  ** object or KV handle (-1 free), *gen its generation. */
  void (*page)(const void *state, int worker, int64_t page, int *st,
               int64_t *owner, int64_t *gen);
  /* Optional: the measured time, in ns, of the most recent stage copy of
  ** residency object `object` on `worker` (the bytes the stage protocol
  ** call wrote into the engine's pages), -1 when unknown (never staged,
  ** or not timed).  A replay under the measured clock ends the load at
  ** its start plus this time (docs/FIDELITY.md). */
  int64_t (*load_ns)(void *state, int worker, int object);
} lsim_backend_ops;

const lsim_backend_ops *lsim_backend_find(const char *name);
const char *const *lsim_backend_names(void);
/* The LSIM_BACKEND_* flags of a backend by name, 0 for an unknown one.  A
** backend this build leaves out (cuda without nvcc) still answers with its
** flags (backends/cuda/cuda.h), so a run recorded elsewhere is judged the
** same way; lsim_backend_find and lsim_backend_names know built ones only. */
unsigned lsim_backend_flags(const char *name);

/* An open backend: the table plus state the wrapper allocates. */
typedef struct lsim_backend {
  const lsim_backend_ops *ops; /* read-only */
  void *state;                 /* private */
} lsim_backend;

lsim_err lsim_backend_open(lsim_backend *b, const char *name,
                           const lsim_backend_cfg *cfg, lsim_errbuf *eb);
/* 1 when the open backend follows the residency (it has the protocol
** slots and was opened with pool_pages > 0). */
int lsim_backend_follows(const lsim_backend *b);
/* The residency hooks that forward to b (user data: the lsim_backend). */
const lsim_res_hooks *lsim_backend_res_hooks(void);
lsim_err lsim_backend_stage(lsim_backend *b, const lsim_res_page_ev *ev,
                            lsim_errbuf *eb);
lsim_err lsim_backend_publish(lsim_backend *b, const lsim_res_page_ev *ev,
                              lsim_errbuf *eb);
lsim_err lsim_backend_retire(lsim_backend *b, const lsim_res_page_ev *ev,
                             lsim_errbuf *eb);
lsim_err lsim_backend_launch(lsim_backend *b, const lsim_res_page_ev *ev,
                             lsim_errbuf *eb);
lsim_err lsim_backend_kv(lsim_backend *b, const lsim_res_page_ev *ev,
                         lsim_errbuf *eb);
/* End of run: a stage never published or a launch never executed fails. */
lsim_err lsim_backend_finish(lsim_backend *b, lsim_errbuf *eb);
/* The counts (all zero for a backend that follows nothing). */
void lsim_backend_counts_get(const lsim_backend *b, lsim_backend_counts *out);
/* Compare the backend's page map of worker w with the engine's pool res:
** every ADAPTER and KV slot must be held by the same owner and generation,
** every other slot free in the backend (E_STAGE_PAGES naming the first
** page that differs). */
lsim_err lsim_backend_check_pages(const lsim_backend *b, int w,
                                  const lsim_res *res, lsim_errbuf *eb);
lsim_err lsim_backend_run(lsim_backend *b, const lsim_plan *plan,
                          lsim_backend_result *res, lsim_errbuf *eb);
/* The load_ns slot: -1 for a backend without it (model) or an object it
** never timed. */
int64_t lsim_backend_load_ns(lsim_backend *b, int worker, int object);
void lsim_backend_close(lsim_backend *b);

#endif /* LSIM_BACKEND_H */
