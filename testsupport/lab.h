/*
** lab.h: the scheduling predicates as separate functions, and the
** article's teaching rules (0x09B-0x09G) as small pure functions that the
** tests pin to exact outcomes.
**
** Predicates (0x09B), each a function of a frozen snapshot:
**
**   feasible(r, w)   base ABI matches; every target module supported; rank
**                    within the worker's limit; layout supported; the
**                    generation asked for equals the request's lease; a
**                    joint (adapter + KV) reservation is possible.
**   ready(r, w)      feasible, and the slot serving the adapter is
**                    resident with that generation published and its copy
**                    complete -- or retiring while r holds a lease on it.
**   eligible(r, w)   ready and legal under the generic batching budget.
**
** Preference orders eligible requests only; lsim_pred_select returns a
** plan (a subset of the eligible, in key order, within the budget).  A
** failed predicate is final: no bonus or weight enters before it.
**
** The engine applies the same predicates in its own state (engine.c:
** visible generation = ready; KV transaction = joint reserve; token and
** request budget = eligible); this module is the reference form.
*/
#ifndef LSIM_LAB_H
#define LSIM_LAB_H

#include "../engine/lsim.h"
#include "../engine/policy/policy.h"

enum lsim_pred_slot_state {
  LSIM_PSLOT_COLD = 0,
  LSIM_PSLOT_LOADING = 1,
  LSIM_PSLOT_RESIDENT = 2,
  LSIM_PSLOT_RETIRING = 3,
  LSIM_PSLOT_FAILED = 4
};

typedef struct lsim_pred_worker {
  uint64_t base_abi;
  uint32_t targets;  /* bit set of supported target modules */
  int max_rank;
  uint32_t layouts;  /* bit set of supported layouts */
  int64_t free_pages; /* joint pool pages a reservation may take */
} lsim_pred_worker;

/* The worker's slot for one adapter. */
typedef struct lsim_pred_slot {
  int state;             /* enum lsim_pred_slot_state */
  int64_t published_gen; /* 0: none */
  int copy_complete;
} lsim_pred_slot;

typedef struct lsim_pred_req {
  int64_t id;
  int tenant;
  uint64_t base_abi;
  int adapter;
  int64_t gen;       /* generation the request names */
  int64_t lease_gen; /* the generation its lease holds */
  int holds_lease;   /* 1: a refcounted lease on the serving slot */
  uint32_t targets;
  int rank;
  int layout;        /* index into the worker's layout bit set */
  int64_t adapter_pages, kv_pages; /* pages a cold reservation needs */
  lsim_tick arrival;
  int tokens;        /* rows it adds to the iteration */
  int64_t affinity_bonus; /* preference only; larger is preferred */
} lsim_pred_req;

int lsim_pred_feasible(const lsim_pred_req *r, const lsim_pred_worker *w,
                       const lsim_pred_slot *slot);
int lsim_pred_ready(const lsim_pred_req *r, const lsim_pred_worker *w,
                    const lsim_pred_slot *slot);
/* ready and within the remaining budget (tokens, request slots) */
int lsim_pred_eligible(const lsim_pred_req *r, const lsim_pred_worker *w,
                       const lsim_pred_slot *slot, int64_t tokens_left,
                       int slots_left);

/*
** Selection (0x09G): classify, then order the eligible by the local key
** (urgency 0; tenant service / weight; minus age; minus affinity bonus;
** arrival; id) and pack within the budget.  slots[i] is request i's slot;
** service[tenant], weight[tenant] (weight NULL: 1).  Writes indices into
** feasible/ready/selected and their counts (any out pointer may be NULL).
*/
void lsim_pred_select(const lsim_pred_req *r, const lsim_pred_slot *slots,
                      int n, const lsim_pred_worker *w,
                      const int64_t *service, const int64_t *weight,
                      lsim_tick now, int64_t token_budget, int max_requests,
                      int *feasible, int *nfeasible, int *ready, int *nready,
                      int *selected, int *nselected);

/*
** PetS two-stage batching (0x09D) as Bellman dynamic programs.  Given n
** items sorted by length (lens ascending) and a cost cost(ud, size,
** max_len) of one group of `size` consecutive items whose longest is
** max_len, partition into consecutive groups at minimum total cost:
** D[i] = min over j <= i of D[j-1] + cost(i-j+1, lens[i-1]).  Ties keep the
** largest last group.  Writes group ends (1-based item counts) into ends
** and returns their number; *total receives the cost.  n <= 64.
*/
int lsim_pets_partition(const int *lens, int n,
                        int64_t (*cost)(void *ud, int size, int max_len),
                        void *ud, int *ends, int64_t *total);

/*
** S-LoRA early abort under overload (0x09F): request i is serviceable when
** now - arrival[i] + est_prefill <= max_latency.  Of the serviceable, when
** arrival_rate > admit_rate (overload) the newest `count` are chosen
** (newest first), otherwise the earliest `count` (earliest first).
** Returns how many indices went to out.
*/
int lsim_slora_abort_choice(lsim_tick now, int64_t est_prefill,
                            int64_t max_latency, const lsim_tick *arrival,
                            int n, int count, double arrival_rate,
                            double admit_rate, int *out);

#endif /* LSIM_LAB_H */
