/*
** plan.h: one iteration's frozen plan, as the engine hands it to a backend.
**
** Entries are in packed order: every prefill entry precedes every decode
** entry, each phase in scheduler order.  A prefill entry contributes `rows`
** token rows (its prompt), a decode entry exactly one.  The ledgers
** (true-rank rows, padded-rank rows, contiguous adapter segments) are
** computed once by lsim_plan_finish() and read by backends and the cost
** model.  The plan is immutable once iteration_selected is published.
*/
#ifndef LSIM_PLAN_H
#define LSIM_PLAN_H

#include "lsim.h"

enum lsim_phase { LSIM_PHASE_PREFILL = 0, LSIM_PHASE_DECODE = 1 };

typedef struct lsim_plan_entry {
  int64_t request;
  int tenant;
  int adapter; /* catalog index; LSIM_NONE (-1) for the base-only path */
  int rank;    /* logical rank of the adapter, 0 for base-only */
  int phase;   /* enum lsim_phase */
  int rows;    /* token rows this entry contributes */
  int version; /* artifact version of the request's lease (hotswap); 0 for
                  the catalog's original artifact */
  /* Where the rows sit in the request's sequence, for a backend that runs
  ** the whole forward pass (docs/CUDA.md, "The whole-model executor"); set
  ** by the engine's selection, 0 in plans built elsewhere (then
  ** lsim_plan.positions is 0):
  **   ctx     tokens of the request already in its KV cache before these
  **           rows (prefix-cache reuse and completed prefill chunks; for a
  **           decode row the prompt and every produced token but the last),
  **           so the rows are positions ctx .. ctx + rows - 1
  **   sample  1 when the entry's last row yields a token (a decode row, the
  **           last chunk of a prefill, a recompute); 0 for a prefill chunk
  **           that is not the last
  **   kv      the request's KV object handle in the worker's pool, as the
  **           residency's kv hook names it (lsim_res_page_ev.object); its
  **           pages hold the tokens in allocation order */
  int64_t ctx;
  int sample;
  int kv;
} lsim_plan_entry;

typedef struct lsim_plan {
  int64_t iter; /* iteration number, per run, from 0 */
  int worker;
  lsim_tick start_tick;
  int n, cap;
  lsim_plan_entry *e; /* owned by the plan */
  /* ledgers, filled by lsim_plan_finish */
  int64_t prefill_rows, decode_rows;
  int prefill_reqs, decode_reqs;
  int distinct_adapters; /* distinct non-base adapters */
  int segments;          /* contiguous same-adapter runs in packed order */
  int max_rank;
  int64_t true_rank_rows;   /* sum over rows of the row's logical rank */
  int64_t padded_rank_rows; /* rows x max_rank in the iteration (rows x
                               slot_rank with padded-rank slots) */
  /* The residency generation each entry's launch names (gen[i] for e[i]):
  ** the adapter's published generation on the plan's worker, written by
  ** the driver from the engine's residency view (lsim_plan_name) when a
  ** backend follows the residency (backends/backend.h); NULL: none named.
  ** Owned by the plan; kept across lsim_plan_reset. */
  int64_t *gen;
  int gen_cap;
  /* Padded-rank slots ($.workers.max_lora_rank; the engine sets it on
  ** every plan it selects): every row computes at this rank, so
  ** padded_rank_rows is rows x slot_rank and the cost model prices the
  ** adapter work at it; 0: no slots (rows x max_rank, true-rank cost).
  ** Kept across lsim_plan_reset. */
  int slot_rank;
  /* 1 when every entry's ctx, sample and kv were set by the engine (the
  ** positions a whole-forward backend needs); kept across lsim_plan_reset */
  int positions;
  /* The profiled cost model's counts (backends/cost.c), filled by
  ** lsim_plan_finish in the same pass as the ledgers above (the cost model
  ** used to walk the entries again: a tenth of a compare's CPU).  They
  ** read `positions` as it is when the plan is finished:
  **   sampled        entries that yield a token (every entry without
  **                  positions)
  **   decode_ctx     over decode rows, the context each attends to,
  **                  ctx + 1 (1 a row without positions)
  **   prefill_pairs  over prefill entries, the attention pairs
  **                  rows x ctx + rows (rows + 1) / 2 (ctx 0 without
  **                  positions)
  **   lora_segments  segments of a non-base adapter */
  int64_t sampled, decode_ctx, prefill_pairs;
  int lora_segments;
} lsim_plan;

#define LSIM_PLAN_INIT \
  {0, 0, 0, 0, 0, NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0, NULL, 0, 0, 0, 0, 0, 0, 0}

void lsim_plan_reset(lsim_plan *p);
lsim_err lsim_plan_push(lsim_plan *p, const lsim_plan_entry *e,
                        lsim_errbuf *eb);
/* Compute the ledgers.  Fails with LSIM_E_BUG if packed order is broken. */
lsim_err lsim_plan_finish(lsim_plan *p, lsim_errbuf *eb);
/* Name generation g for entry i (0 <= i < n). */
lsim_err lsim_plan_name(lsim_plan *p, int i, int64_t g, lsim_errbuf *eb);
/* The generation entry i names (0 when none was named). */
int64_t lsim_plan_generation(const lsim_plan *p, int i);
void lsim_plan_release(lsim_plan *p);

#endif /* LSIM_PLAN_H */
