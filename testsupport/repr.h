/*
** repr.h: four serving systems' layouts of one LoRA projection (article
** 0x0A, "Loop 10"), each a real data layout with its own builder,
** validator and exact evaluator.
**
** All four compute the same row algebra as lsim_ref_delta (cpu_ref.h):
**
**     out[i] = base[i] + s_a (X[i] A_a^T) B_a^T    row i of adapter a
**     out[i] = base[i]                             base-only row
**
** but each reaches a row's factors through a different identity, which is
** the point: a pointer position plus a contiguous segment (Punica), a
** compact index into resident location tables (S-LoRA), an adapter name
** (PEFT), a positive request id resolved to an active slot (vLLM).  What
** each layout owns:
**
**   punica  a weight store (A as [r][d_in], B transposed and pre-scaled as
**           (s B)^T [r][d_out]: the kernel takes no scale), a stable
**           permutation making each adapter's rows contiguous with the
**           base rows after the last segment, a segment boundary vector
**           seg[nseg+1], one A and one B pointer per segment and the one
**           scalar rank the pinned wrapper passes with them.  Outputs are
**           scattered back through the inverse permutation.
**   slora   a compact index per row (-1 base), per compact index its
**           adapter id (the directory map), true rank, a_start, a_len,
**           a_scaling, and a flat allocator pool whose cells each hold one
**           rank row of A and the matching column of B; a_loc maps
**           a_start[j] + k to the cell of rank row k.  One target module,
**           so a_len = r (the archived attention-only path spends 4r cells
**           on q, k, v, o).  Evaluation runs at each adapter's true rank.
**   peft    named modules (lora_A, lora_B, scaling) and one adapter name
**           per input row ("__base__" for none); named sub-batches (the
**           rows of each name, in first-appearance order of the names),
**           each gathered, run at once and scatter-added into the base
**           result.
**   vllm    max_loras active slots (lora_index_to_id, 0 = empty) at the
**           physical rank R: A zero-padded to [R][d_in], B with the scale
**           absorbed and zero-padded to [d_out][R]; per token its request
**           LoRA id (-1 none) and slot (-1 none); stable sorted row
**           indexes with the -1 group first, active slot ids, counts and
**           starts.  Rows are read and written in place through them.
**
** Conventions.  Adapter ids are as in the plan (>= 0; LSIM_BASE is -1).
** Every layout owns all its arrays (factors are copied in, in the layout's
** own form); _release frees them and zeroes the struct (safe on a zeroed
** struct and twice).  A builder overwrites *r without freeing it; on
** failure *r is left released.  Fields are read-only for callers; tests
** mutate one of them to check that validation fails closed.
**
** Validation.  Each _validate re-checks the layout from its own arrays
** (counts before lengths, every index range-checked before use) and
** returns the first violated invariant's code; each _eval validates first,
** so a layout mutated after its build never reads out of bounds or
** computes from inconsistent metadata.  A builder checks its input, builds,
** and validates: a failure there is the builder's own fault (E_BUG).
** What validation cannot see (a valid index naming the wrong adapter, a
** wrong scale, factors swapped between two equally shaped slots) changes
** the output instead; tests/test_loop10.c pins both kinds.
**
** Evaluation.  _eval(r, X, base, out, eb): X [T][d_in] in the layout's
** original row order; base NULL (zero) or [T][d_out]; out follows the
** output-matrix rule of cpu_ref.h (zeroed: allocated; else exactly
** [T][d_out]) and may be base itself.  Exact GMP arithmetic throughout.
**
** Codes (engine/err_tensor.h): E_SHAPE, E_ORIENTATION, E_REF_DUP_ADAPTER,
** E_REF_UNKNOWN_ADAPTER, E_BASE_DELTA, E_SCATTER, E_SLOT_RANK,
** E_PAD_NONZERO, E_NOSPACE, and the layout codes E_REPR_SEGMENT,
** E_REPR_PERM, E_REPR_SEG_IDENTITY, E_REPR_POINTER, E_REPR_FIXED_RANK,
** E_REPR_INDEX, E_REPR_LOCATION, E_REPR_NAME, E_REPR_REQUEST_ID,
** E_REPR_SLOT, E_REPR_METADATA, E_REPR_SENTINEL.
*/
#ifndef LSIM_REPR_H
#define LSIM_REPR_H

#include "../backends/cpu_ref/cpu_ref.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LSIM_REPR_BASE_NAME "__base__" /* PEFT's name of the base path */

/* ---- Punica: pointer vectors over contiguous segments -------------------- */

typedef struct lsim_repr_punica {
  int T, d_in, d_out;
  int L;                /* weight-store entries (every supplied adapter) */
  int *store_id;        /* [L] adapter id of store entry l */
  lsim_qmat *store_A;   /* [L] A, [r][d_in] */
  lsim_qmat *store_B;   /* [L] (s B)^T, [r][d_out]: transposed, pre-scaled */
  int rank;             /* the one scalar rank of the invocation */
  int *row_adapter;     /* [T] logical adapter per original row (checks) */
  int *perm;            /* [T] packed position -> original row */
  int nseg;             /* segments: one per adapter used, ascending id */
  int *seg;             /* [nseg + 1] boundary vector, seg[0] == 0 */
  const lsim_qmat **pA; /* [nseg] pointer vector into store_A */
  const lsim_qmat **pB; /* [nseg] pointer vector into store_B */
} lsim_repr_punica;
#define LSIM_REPR_PUNICA_INIT {0}

/*
** Build from the logical assignment row_adapter[0..T) (adapter id or
** LSIM_BASE) and the adapters ad[0..nad) (logical orientation, checked
** with lsim_qadapter_check against d_in/d_out; ids distinct and >= 0).
** Every row's adapter must be supplied (E_REF_UNKNOWN_ADAPTER); every
** adapter the batch uses must have the rank of the first segment's adapter
** (E_REPR_FIXED_RANK: the pinned wrapper passes one rank).
*/
lsim_err lsim_repr_punica_build(lsim_repr_punica *r, const int *row_adapter,
                                int T, const lsim_qadapter *ad, int nad,
                                int d_in, int d_out, lsim_errbuf *eb);
lsim_err lsim_repr_punica_validate(const lsim_repr_punica *r, lsim_errbuf *eb);
lsim_err lsim_repr_punica_eval(const lsim_repr_punica *r, const lsim_qmat *X,
                               const lsim_qmat *base, lsim_qmat *out,
                               lsim_errbuf *eb);
void lsim_repr_punica_release(lsim_repr_punica *r);

/* ---- S-LoRA: compact index into indexed resident state ------------------- */

typedef struct lsim_repr_slora {
  int T, d_in, d_out;
  int n;               /* compact indexes 0..n-1 (adapters the batch uses) */
  int *adapter_id;     /* [n] compact index -> adapter id */
  int *rank;           /* [n] true rank */
  int *a_start;        /* [n] first a_loc entry */
  int *a_len;          /* [n] a_loc entries (== rank: one target module) */
  mpq_t *a_scaling;    /* [n] semantic scale */
  int nloc;            /* a_loc entries == sum of a_len */
  int *a_loc;          /* [nloc] allocator cell of each (adapter, rank row) */
  int ncells;          /* pool capacity */
  lsim_qmat pool_A;    /* [ncells][d_in]: rank row k of A in its cell */
  lsim_qmat pool_B;    /* [ncells][d_out]: column k of B in the same cell */
  int *row_index;      /* [T] compact index per row, -1 for base */
} lsim_repr_slora;
#define LSIM_REPR_SLORA_INIT {0}

/*
** Build as for Punica; compact indexes follow the first appearance of
** each adapter in the rows (the order the loader meets missing adapters).
** Cells come from free_cells[0..ncells) in that order (the allocator's
** free list: a permutation of 0..ncells-1, E_REPR_LOCATION otherwise), or
** 0, 1, 2, ... when free_cells is NULL; E_NOSPACE when the pool is too
** small.
*/
lsim_err lsim_repr_slora_build(lsim_repr_slora *r, const int *row_adapter,
                               int T, const lsim_qadapter *ad, int nad,
                               int d_in, int d_out, int ncells,
                               const int *free_cells, lsim_errbuf *eb);
lsim_err lsim_repr_slora_validate(const lsim_repr_slora *r, lsim_errbuf *eb);
lsim_err lsim_repr_slora_eval(const lsim_repr_slora *r, const lsim_qmat *X,
                              const lsim_qmat *base, lsim_qmat *out,
                              lsim_errbuf *eb);
void lsim_repr_slora_release(lsim_repr_slora *r);

/* ---- PEFT: named modules and named sub-batches --------------------------- */

typedef struct lsim_repr_peft {
  int T, d_in, d_out;
  int nmod;
  char **mod_name;     /* [nmod] owned strings, distinct, not "__base__" */
  lsim_qadapter *mod;  /* [nmod] owned copies: lora_A, lora_B, scaling */
  char **row_name;     /* [T] owned: adapter_names, one per input row */
  int nsub;            /* named sub-batches (the base rows form none) */
  int *sub_mod;        /* [nsub] module of each sub-batch */
  int *sub_offsets;    /* [nsub + 1] into sub_rows */
  int *sub_rows;       /* [sub_offsets[nsub]] gathered rows, ascending */
} lsim_repr_peft;
#define LSIM_REPR_PEFT_INIT {0}

/*
** Build from adapter_names row_name[0..T) and the named modules
** mod_name[i] -> ad[i], i < nmod (factors checked against d_in/d_out; the
** adapters' ids are not used).  Names are non-empty; E_REPR_NAME for an
** unknown row name, a duplicate or reserved module name.
*/
lsim_err lsim_repr_peft_build(lsim_repr_peft *r, const char *const *row_name,
                              int T, const char *const *mod_name,
                              const lsim_qadapter *ad, int nmod, int d_in,
                              int d_out, lsim_errbuf *eb);
lsim_err lsim_repr_peft_validate(const lsim_repr_peft *r, lsim_errbuf *eb);
/* |adapter_names| must equal X's rows (E_SHAPE). */
lsim_err lsim_repr_peft_eval(const lsim_repr_peft *r, const lsim_qmat *X,
                             const lsim_qmat *base, lsim_qmat *out,
                             lsim_errbuf *eb);
void lsim_repr_peft_release(lsim_repr_peft *r);

/* ---- vLLM: request ids, active slots, indexed token metadata ------------- */

typedef struct lsim_repr_vllm {
  int T, d_in, d_out;
  int max_loras;        /* active slots */
  int R;                /* max_lora_rank: every slot's physical rank */
  int64_t *index_to_id; /* [max_loras] lora_index_to_id, 0 = empty slot */
  int *slot_rank;       /* [max_loras] true rank copied in, 0 when empty */
  lsim_qmat *slot_A;    /* [max_loras] [R][d_in], rows >= rank zero */
  lsim_qmat *slot_B;    /* [max_loras] [d_out][R] = [s B | 0], scale 1 */
  int64_t *req_id;      /* [T] token's LoRA request id, -1 for none */
  int *token_slot;      /* [T] its slot, -1 for none */
  int *sorted_rows;     /* [T] rows stably sorted by slot, -1 group first */
  int nids;
  int *active_ids;      /* [nids] ascending slot ids (-1 leads when any) */
  int *counts;          /* [nids] rows per group */
  int *starts;          /* [nids + 1] into sorted_rows, from 0 to T */
} lsim_repr_vllm;
#define LSIM_REPR_VLLM_INIT {0}

/*
** Build from the token request ids req_id[0..T) (-1 or a positive LoRA
** id), the registered adapters cat_id[i] -> ad[i], i < ncat (ids positive
** and distinct, E_REPR_REQUEST_ID; rank <= R, E_SLOT_RANK), and the
** activation table index_to_id[0..max_loras) (0 empty, else a registered
** id, each at most once: E_REPR_SLOT / E_REPR_REQUEST_ID).  Activation
** zeroes each slot and copies the true-rank extent, absorbing s into B.  A
** token whose id is registered but not active fails with E_REPR_SLOT, one
** whose id is not registered (or 0, or below -1) with E_REPR_REQUEST_ID.
*/
lsim_err lsim_repr_vllm_build(lsim_repr_vllm *r, const int64_t *req_id, int T,
                              const int64_t *cat_id, const lsim_qadapter *ad,
                              int ncat, const int64_t *index_to_id,
                              int max_loras, int R, int d_in, int d_out,
                              lsim_errbuf *eb);
lsim_err lsim_repr_vllm_validate(const lsim_repr_vllm *r, lsim_errbuf *eb);
lsim_err lsim_repr_vllm_eval(const lsim_repr_vllm *r, const lsim_qmat *X,
                             const lsim_qmat *base, lsim_qmat *out,
                             lsim_errbuf *eb);
void lsim_repr_vllm_release(lsim_repr_vllm *r);

#ifdef __cplusplus
}
#endif

#endif /* LSIM_REPR_H */
