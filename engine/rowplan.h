/*
** rowplan.h: the iteration planner's frozen row-level metadata.
**
** Input: the iteration's requests in scheduler order (lsim_plan_entry:
** request uid, adapter id or LSIM_BASE for the base-only path, logical rank,
** phase, rows), and optionally a packed order (a permutation of request
** indexes that reorders requests within their phase; prefills always pack
** before decodes).  Output: every coordinate system the article separates
** (0x02C, 0x03A), computed once and frozen:
**
**   request coordinates  packed order and its inverse, prefill_indptr, doff,
**                        sample rows (per scheduler request)
**   row coordinates      per packed row: owning request (scheduler index),
**                        token position, phase, adapter, logical rank
**   contiguous runs      maximal same-adapter runs in packed order, base
**                        runs included (may cross doff)
**   grouped segments     stable adapter-grouped permutation of the active
**                        (non-base) rows with CSR-like offsets: the
**                        contiguous (Punica/SGMV) realization
**   indexed metadata     vLLM-style: stable sort of all rows by adapter with
**                        a base sentinel group (-1) first, active ids,
**                        counts, starts
**   rank buckets         active rows stably grouped by logical rank
**   ledgers              true-rank rows, padded-rank rows at the physical
**                        rank R, padding ratio, wasted rank-row values
**
** Conventions: rows are numbered in packed order 0..T-1; "grouped position"
** u indexes perm[]; adapter ids are non-negative, LSIM_BASE (-1) is the
** base-only path.  All arrays are owned by the plan (lsim_rowplan_release).
**
** lsim_rowplan_validate() re-checks every invariant from the arrays alone
** (coverage, injectivity, bounds, offsets, per-segment adapter identity,
** prefill_indptr[P] == doff, T == prefill tokens + decodes, sample rows,
** inverse maps, indexed metadata, buckets, ranks) and returns a distinct
** LSIM_E_PLAN_* code per violated invariant; it never asserts, so a
** corrupted plan (the malformed fixtures mutate one field) fails closed in
** release builds too.  lsim_rowplan_build() calls it before returning.
*/
#ifndef LSIM_ROWPLAN_H
#define LSIM_ROWPLAN_H

#include "lsim.h"
#include "plan.h"

#define LSIM_BASE (-1) /* adapter id of the base-only path */

typedef struct lsim_rowplan {
  /* ---- requests (n = number of requests) ---- */
  int n;              /* requests */
  int npre, ndec;     /* prefill and decode requests */
  int64_t *req_uid;   /* [n] request uid, scheduler order */
  int *req_adapter;   /* [n] adapter id or LSIM_BASE, scheduler order */
  int *req_rank;      /* [n] logical rank (0 for base), scheduler order */
  int *req_phase;     /* [n] LSIM_PHASE_*, scheduler order */
  int *req_rows;      /* [n] rows contributed, scheduler order */
  int *packed;        /* [n] packed position k -> scheduler index */
  int *packed_inv;    /* [n] scheduler index -> packed position */
  int *prefill_indptr; /* [npre + 1] row offsets of packed prefills */
  int doff;           /* first decode row == prefill_indptr[npre] */
  int *sample_rows;   /* [n] per scheduler request: its sampling row */

  /* ---- rows (T = total rows) ---- */
  int T;
  int *row_req;       /* [T] scheduler index of the owning request */
  int *row_pos;       /* [T] token position within the request's rows */
  int *row_phase;     /* [T] */
  int *row_adapter;   /* [T] adapter id or LSIM_BASE */
  int *row_rank;      /* [T] logical rank, 0 for base rows */

  /* ---- contiguous runs in packed order (base runs included) ---- */
  int nruns;
  int *run_adapter;   /* [nruns] */
  int *run_offsets;   /* [nruns + 1], run_offsets[nruns] == T */

  /* ---- stable adapter-grouped segments of active rows ---- */
  int nactive;
  int *perm;          /* [nactive] grouped position u -> packed row */
  int nseg;
  int *seg_adapter;   /* [nseg] ascending adapter ids */
  int *seg_rank;      /* [nseg] */
  int *seg_offsets;   /* [nseg + 1], seg_offsets[nseg] == nactive */

  /* ---- vLLM-style indexed metadata (base sentinel group first) ---- */
  int *sorted_rows;   /* [T] rows stably sorted by adapter id (-1 first) */
  int nids;
  int *active_ids;    /* [nids] -1 (if any base row) then adapter ids */
  int *id_counts;     /* [nids] */
  int *id_starts;     /* [nids + 1] */

  /* ---- rank buckets of active rows ---- */
  int nbuckets;
  int *bucket_rank;   /* [nbuckets] ascending */
  int *bucket_rows;   /* [nactive] packed rows, stable within a bucket */
  int *bucket_offsets; /* [nbuckets + 1] */

  /* ---- ledgers ---- */
  int phys_rank;        /* R: the slot rank (max_rank given, else max) */
  int64_t true_rank_rows;   /* sum of logical ranks over active rows */
  int64_t padded_rank_rows; /* nactive * R */
  int64_t wasted_rank_rows; /* padded - true */
} lsim_rowplan;

#define LSIM_ROWPLAN_INIT {0}

/*
** Build the plan.  e[0..n) are the requests in scheduler order (their
** `request` field is the uid, `adapter` LSIM_BASE or >= 0 with `rank` >= 1,
** base entries rank 0).  packed may be NULL (prefills then decodes, each in
** scheduler order) or a permutation of 0..n-1 in packed order.  max_rank 0
** means "no physical slot rank": R is the largest logical rank; otherwise
** every rank must be <= max_rank (LSIM_E_PLAN_RANK_SLOT).  Errors:
** LSIM_E_PLAN_* with a message naming the request or row.
*/
lsim_err lsim_rowplan_build(lsim_rowplan *p, const lsim_plan_entry *e, int n,
                            const int *packed, int max_rank, lsim_errbuf *eb);

/* Re-check every invariant of a built (possibly mutated) plan. */
lsim_err lsim_rowplan_validate(const lsim_rowplan *p, lsim_errbuf *eb);

/* Padding ratio padded/true (1.0 when there is no active row). */
double lsim_rowplan_padding_ratio(const lsim_rowplan *p);

/* Deep copy (for tests that mutate one field of a valid plan). */
lsim_err lsim_rowplan_copy(lsim_rowplan *dst, const lsim_rowplan *src,
                           lsim_errbuf *eb);

void lsim_rowplan_release(lsim_rowplan *p);

#endif /* LSIM_ROWPLAN_H */
