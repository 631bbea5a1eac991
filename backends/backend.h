/*
** backend.h: the one interface every execution backend implements.
**
** A backend executes (or, for `model`, only costs) the adapter work of one
** frozen iteration plan.  The simulated duration of an iteration always
** comes from the cost model below, never from a measured time, so a run's
** decisions are identical whatever backend executes it; what a backend
** measures is recorded (iterations.backend_ns) and compared, not obeyed.
**
**   model    cost model only: reports the modelled ns as its backend_ns
**   cpu_ref  executes each iteration's adapter work for one target module
**            exactly (GMP rationals / proven-exact integers) through every
**            execution family and checks that they agree
**   cuda     the same tensors through the CUDA kernels (bf16 in, fp32
**            accumulation); with verify, each iteration is compared with
**            the exact reference (validations table)
**
** Callers use the lsim_backend_* wrappers, never the table directly; the
** `stage` and `close` slots are optional.
*/
#ifndef LSIM_BACKEND_H
#define LSIM_BACKEND_H

#include "../engine/lsim.h"
#include "../engine/plan.h"

/* The iteration cost model, all in nanoseconds. */
typedef struct lsim_cost_model {
  int64_t iter_fixed_ns;    /* per iteration (launch, sync, sampling) */
  int64_t prefill_token_ns; /* per prefill row through the base model */
  int64_t decode_token_ns;  /* per decode row through the base model */
  int64_t segment_ns;       /* per contiguous adapter segment */
  int64_t rank_row_ps;      /* per unit of true-rank rows, picoseconds */
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

/* Modelled duration of an iteration in ns (>= 1). */
int64_t lsim_cost_plan_ns(const lsim_cost_model *c, const lsim_plan *p);

/* What a backend is opened with. */
typedef struct lsim_backend_cfg {
  lsim_cost_model cost;
  uint64_t seed;     /* tensor values derive from it (LSIM_RNG_TENSORS) */
  int d_in, d_out;   /* the one target module a tensor backend executes */
  int verify;        /* cuda: compare every iteration with cpu_ref */
  /* cuda, model shape (docs/CUDA.md "Model-shape replay"): layers > 0
  ** executes layers x ntargets modules per iteration, target t being
  ** target_d_in[t] x target_d_out[t], instead of the one d_in x d_out
  ** module; 0 (the default) keeps the one module. */
  int layers, ntargets;
  const int *target_d_in, *target_d_out;
} lsim_backend_cfg;

typedef struct lsim_backend_result {
  int64_t backend_ns; /* measured or modelled execution time; -1 unknown */
  int ok;             /* 1 when the iteration's result is valid */
  int checked;        /* 1 when the result was compared with a reference */
  int exact;          /* with checked: 1 when it matched exactly */
  const char *reference; /* with checked: what it was compared with */
  double max_abs_err, max_rel_err; /* with checked */
} lsim_backend_result;

typedef struct lsim_backend_ops {
  const char *name;
  size_t state_size;
  lsim_err (*open)(void *state, const lsim_backend_cfg *cfg, lsim_errbuf *eb);
  /* Make `bytes` of adapter `adapter`, generation `gen`, resident on
  ** `worker` (optional; the model backend has nothing to stage). */
  lsim_err (*stage)(void *state, int worker, int adapter, int64_t gen,
                    int64_t bytes, lsim_errbuf *eb);
  lsim_err (*run)(void *state, const lsim_plan *plan,
                  lsim_backend_result *res, lsim_errbuf *eb);
  void (*close)(void *state); /* optional */
} lsim_backend_ops;

const lsim_backend_ops *lsim_backend_find(const char *name);
const char *const *lsim_backend_names(void);

/* An open backend: the table plus state the wrapper allocates. */
typedef struct lsim_backend {
  const lsim_backend_ops *ops; /* read-only */
  void *state;                 /* private */
} lsim_backend;

lsim_err lsim_backend_open(lsim_backend *b, const char *name,
                           const lsim_backend_cfg *cfg, lsim_errbuf *eb);
lsim_err lsim_backend_stage(lsim_backend *b, int worker, int adapter,
                            int64_t gen, int64_t bytes, lsim_errbuf *eb);
lsim_err lsim_backend_run(lsim_backend *b, const lsim_plan *plan,
                          lsim_backend_result *res, lsim_errbuf *eb);
void lsim_backend_close(lsim_backend *b);

#endif /* LSIM_BACKEND_H */
