/*
** scenario.h: a replay scenario, parsed and validated from JSON.
**
** lsim_scenario_load() reads a JSON file (cJSON), checks every key against
** the schema in docs/SCENARIO.md, and fills an lsim_scenario.  Validation is
** strict: unknown keys, wrong types, non-integers where an integer is due and
** out-of-range values are rejected.  The error message names the file and
** the JSON path ("quickstart.json: $.workers.pool_pages: ...") and the code
** is one of the stable LSIM_E_SCN_* values.  Nothing is written anywhere
** while loading, so a rejected scenario leaves no trace on disk.
**
** Units are in the field names: *_ns nanoseconds, *_us microseconds,
** *_bytes bytes, *_pages pool pages, *_tokens tokens.
*/
#ifndef LSIM_SCENARIO_H
#define LSIM_SCENARIO_H

#include "../backends/backend.h" /* lsim_cost_model */
#include "../backends/shape.h" /* lsim_model_shape */
#include "../engine/lsim.h"
#include "../traces/trace.h" /* lsim_len_dist, lsim_trace */

#define LSIM_MAX_TARGETS 16
#define LSIM_MAX_TENANTS 64
#define LSIM_MAX_RANK_CHOICES 16
#define LSIM_NAME_MAX 64
#define LSIM_PATH_MAX 1024
#define LSIM_MAX_FAULT_TICKS 64
#define LSIM_MAX_HOTSWAPS 64

/* $.workers.adapter_layout: how adapter page demand is derived */
enum { LSIM_LAYOUT_TENSOR = 0, LSIM_LAYOUT_SLORA = 1 };


/* $.hotswaps[i]: one replacement of an adapter's artifact during the run.
** mode is an enum lsim_hs_mode value (engine/engine.h): 0 shadow, 1
** drain_then_overwrite, 2 new_alias; fail forces the outcome of its copy. */
enum { LSIM_HS_FAIL_NONE = 0, LSIM_HS_FAIL_COPY = 1, LSIM_HS_FAIL_DIGEST = 2 };
typedef struct lsim_hotswap_spec {
  double at_s;  /* simulated seconds from the start */
  int adapter;  /* catalog index */
  int mode;
  int fail;     /* LSIM_HS_FAIL_* */
} lsim_hotswap_spec;

typedef struct lsim_target {
  char name[LSIM_NAME_MAX]; /* "q_proj" */
  int64_t d_in, d_out;      /* base projection shape */
} lsim_target;

typedef struct lsim_rank_choice {
  int rank;
  int64_t weight; /* relative frequency in the synthetic catalog */
} lsim_rank_choice;

/* $.adapters.compression (docs/SCENARIO.md, docs/COMPRESSION.md): the
** collection is served compressed.  Either synthetic (method, rank,
** clusters, seed: a seeded cluster assignment of the scenario's adapters)
** or a bundle made by `lorasim compress` (bundle != ""), whose method,
** rank, clusters, assignment and digests are used. */
enum { LSIM_CMPM_JD_FULL = 1, LSIM_CMPM_JD_DIAG = 2 };
typedef struct lsim_compression_spec {
  int on;                  /* the key is present */
  int method;              /* LSIM_CMPM_* (synthetic) */
  int rank;                /* shared rank R (synthetic) */
  int clusters;            /* k (synthetic) */
  uint64_t seed;           /* cluster assignment stream (synthetic) */
  int64_t affinity_weight; /* scheduler affinity cost weight, >= 0 */
  char version[LSIM_NAME_MAX];  /* collection version label */
  char bundle[LSIM_PATH_MAX];   /* resolved bundle path, or "" */
} lsim_compression_spec;

typedef struct lsim_tenant {
  char name[LSIM_NAME_MAX];
  int64_t traffic_weight; /* relative share of arrivals */
} lsim_tenant;

typedef struct lsim_scenario {
  char name[LSIM_NAME_MAX];
  char path[LSIM_PATH_MAX]; /* file it was read from */
  unsigned char sha256[32]; /* of the file's bytes */
  uint64_t seed;
  int64_t ns_per_tick; /* >= 1 */

  /* backend and policies, by registry name */
  char backend[LSIM_NAME_MAX];   /* "model" */
  /* $.execute, $.clock (--execute, --clock win; docs/FIDELITY.md):
  ** execute LSIM_EXECUTE_ADAPTERS (0) or LSIM_EXECUTE_FULL (1) of
  ** backends/backend.h; clock LSIM_CLOCK_MODEL (0) or LSIM_CLOCK_MEASURED
  ** (1).  Which combinations a replay can run is checked by
  ** lsim_replay_check_modes (sim/replay.h), after the overrides. */
  int execute;
  int clock;
  /* `replay --clock-from DB`: a run database whose recorded spans drive
  ** the clock (docs/FIDELITY.md, "Replaying a recorded clock"); "" when
  ** not given.  Implies clock LSIM_CLOCK_MEASURED. */
  char clock_from[LSIM_PATH_MAX];
  char scheduler[LSIM_NAME_MAX]; /* "fcfs" */
  char evict[LSIM_NAME_MAX];     /* "lru" */
  char prefetch[LSIM_NAME_MAX];  /* "none" */

  /* $.workers */
  int workers;
  int64_t pool_pages;      /* pages per worker, shared by adapters and KV */
  int64_t page_bytes;
  double h2d_gbps;         /* host-to-device copy bandwidth, GB/s (1e9 B/s) */
  int64_t load_fixed_us;   /* per-load fixed latency */
  int64_t max_batch_tokens;
  int max_batch_requests;
  int64_t guard_pages;     /* admission safety margin per worker */
  int64_t prefill_chunk;   /* prompt tokens per prefill row; 0: whole prompt */
  int kv_incremental;      /* $.workers.kv_reserve "incremental" (1) or
                              "whole" (0, default) */
  int adapter_layout;      /* LSIM_LAYOUT_TENSOR or LSIM_LAYOUT_SLORA */
  int tp_degree;           /* $.workers.tp_degree: GPUs per worker (TP
                              group), 1..64, default 1; pool_pages is per
                              GPU (docs/TP.md) */
  /* vLLM-parity knobs (docs/SCHEDULING.md "Distinct adapters per batch",
  ** docs/RESIDENCY.md "Host tier" and "Padded-rank slots"); 0 is off */
  int max_loras;           /* distinct adapters in one iteration; with
                              max_lora_rank also adapter slots per worker */
  int max_lora_rank;       /* every slot sized for this rank; larger ranks
                              are refused at arrival */
  int max_cpu_loras;       /* adapters in each worker's host LRU tier */
  double disk_gbps;        /* disk read bandwidth of a host-tier miss */
  int64_t disk_fixed_us;   /* fixed latency of one disk read */

  /* $.model: the whole shape (backends/shape.h), a preset's with the
  ** scenario's keys over it; model.full says whether every dimension is
  ** known (a preset, or hidden, intermediate, q_heads and vocab given).
  ** layers, kv_heads, head_dim and dtype_bytes below are copies of the
  ** model's, kept for the many readers of the simulated sizes. */
  lsim_model_shape model;
  int layers;
  int64_t kv_heads, head_dim;
  int dtype_bytes;
  /* the projections that carry adapters: $.model.targets as given, or
  ** derived from a full shape and $.model.adapter_modules (in module
  ** order, q_proj first) */
  int ntargets;
  lsim_target targets[LSIM_MAX_TARGETS];

  /* $.cost: the model backend's iteration cost, all in ns */
  int64_t iter_fixed_ns;
  int64_t prefill_token_ns;
  int64_t decode_token_ns;
  int64_t segment_ns;  /* per contiguous adapter segment */
  int64_t rank_row_ps; /* per (row x rank) unit of adapter work, in ps */
  int64_t collective_latency_ns; /* per TP collective call (tp_degree > 1) */
  double link_gbps;              /* TP link bandwidth, GB/s; 0: no byte term */
  /* $.cost.profile (resolved against the scenario's directory), the
  ** replay's --profile, or the committed profile $.gpu and
  ** $.model.preset pick (profiles/GPU/PRESET.json): a cost profile
  ** (sim/profile.h); "" when none.  Version 1 replaced the five
  ** coefficients above; version 2 fills cost_prof (the profiled model,
  ** bound to this scenario's shape and targets) and, when it has a copy
  ** model, copy_prof and the two copy terms, which replace h2d_gbps and
  ** load_fixed_us for adapter loads (docs/PROFILE.md). */
  char cost_profile[LSIM_PATH_MAX];
  char gpu[LSIM_NAME_MAX];  /* $.gpu: a GPU class ("h200"); "" when absent */
  lsim_cost_prof cost_prof; /* on: iterations cost the profiled model */
  int copy_prof;            /* 1: copies cost copy_latency_ns + bytes /
                               copy_gbps */
  double copy_latency_ns, copy_gbps;

  /* $.adapters: the synthetic catalog */
  int adapters;
  int nranks;
  lsim_rank_choice ranks[LSIM_MAX_RANK_CHOICES];
  double zipf_s; /* adapter popularity exponent within a tenant; 0 = uniform */
  lsim_compression_spec compression;

  /* $.tenants */
  int ntenants;
  lsim_tenant tenants[LSIM_MAX_TENANTS];

  /* $.trace: exactly one of file or generator */
  char trace_file[LSIM_PATH_MAX]; /* resolved relative to the scenario file */
  int64_t gen_requests;
  double gen_rate_per_s;
  lsim_len_dist gen_prompt;
  lsim_len_dist gen_output;
  lsim_arrivals gen_arrivals;      /* process, modulation, shifts */
  int trace_format;                /* enum lsim_trace_format; GEN: generator */
  int64_t trace_max_requests;      /* 0: every record */
  int trace_block_tokens;          /* Mooncake prefix block size (512) */
  int trace_skip_bad_rows;         /* 1: count and skip malformed rows */
  lsim_servegen_spec trace_servegen; /* format servegen only */
  lsim_assign_spec trace_assign;   /* $.trace.assign */
  lsim_trace_ctl trace_ctl; /* $.trace.rate_scale, window, remap */

  /* $.faults */
  double load_failure_rate; /* probability that one adapter copy fails */
  int max_load_attempts;    /* a request is rejected after this many */
  int ncopy_fail_ticks;     /* the first copy starting at/after each fails */
  int64_t copy_fail_ticks[LSIM_MAX_FAULT_TICKS];
  double digest_failure_rate; /* probability that a copy's bytes are corrupt */
  int ndigest_fail_ticks;
  int64_t digest_fail_ticks[LSIM_MAX_FAULT_TICKS];
  double h2d_slowdown;      /* copy-time factor (>= 1) inside the window */
  int64_t h2d_slowdown_from_tick, h2d_slowdown_until_tick; /* until 0: open */
  double cancel_during_load_rate; /* a loading request is cancelled mid-copy */
  double stale_basis_rate;  /* compressed: a copied core arrives paired with
                               another basis version (E_CMP_STALE_BASIS) */

  /* $.hotswaps (optional) */
  int nhotswaps;
  lsim_hotswap_spec hotswaps[LSIM_MAX_HOTSWAPS];

  /* $.policies.placement and $.fairness (optional; docs/SCHEDULING.md) */
  char placement[LSIM_NAME_MAX]; /* "least_loaded" */
  int64_t fair_w_in, fair_w_out; /* completed-service weights (1, 1) */
  int64_t age_ticks;             /* aging class / prefetch trigger (64) */
  int cluster_window;            /* slora_cluster window (8) */
  int64_t starvation_ticks;      /* interval length judged starved; 0: only
                                    open intervals; -1: key absent, derived
                                    (lsim_scenario_starvation_ticks) */
  int64_t abort_ticks;           /* early abort after this wait; 0 off */
  int64_t slo_ttft_ms, slo_tbt_ms; /* SLO targets; 0: not configured */

  /* $.prefix_cache (optional; docs/PREFIX.md, "The prefix cache in the
  ** replay"): prefix_mode 0 is off (the default), else an enum
  ** lsim_kv_key_mode value (engine/kv.h) */
  int prefix_mode;
  int64_t prefix_block_tokens; /* tokens per block hash ($.trace's 512) */
  int64_t prefix_max_blocks;   /* per worker; 0: as many as the pool holds */
  double prefix_alora_fraction; /* share of the catalog served as aLoRA */
} lsim_scenario;

/* The iteration cost model of sc: the profiled one when a version 2
** profile is in use (sc->cost_prof.on), else the linear one of $.cost. */
void lsim_scenario_cost_model(const lsim_scenario *sc, lsim_cost_model *out);

/* The modelled ns of a host-to-device copy of `bytes`, before rounding:
** the profile's copy model when it has one, else $.workers.h2d_gbps and
** load_fixed_us. */
double lsim_scenario_copy_ns(const lsim_scenario *sc, int64_t bytes);

/* Use the cost profile at path for sc (what $.cost.profile and replay
** --profile do; sim/profile.h): read it, check a version 2 profile
** against sc's model shape (E_DEV_PROFILE_SHAPE), its GPU class against
** $.gpu (E_SCN_CONFLICT) and sc's tp_degree (E_SCN_CONFLICT: a profile
** times one GPU), and set sc's cost fields and cost_profile.  Errors name
** the file; sc is unchanged on failure. */
lsim_err lsim_scenario_use_profile(lsim_scenario *sc, const char *path,
                                   lsim_errbuf *eb);

/* Where $.gpu and $.model.preset find the committed profile: the first
** of $LORASIM_PROFILE_DIR/GPU/PRESET.json, SCENARIO_DIR/../profiles/...,
** SCENARIO_DIR/../../profiles/..., SCENARIO_DIR/profiles/... and the
** source tree's profiles/... that is a
** regular file, into out (LSIM_PATH_MAX); E_DEV_PROFILE_NONE naming every
** place tried when none is. */
lsim_err lsim_scenario_find_profile(const char *basedir, const char *gpu,
                                    const char *preset, char *out,
                                    lsim_errbuf *eb);

/* Load and validate path into *sc.  On error *sc is unspecified. */
lsim_err lsim_scenario_load(lsim_scenario *sc, const char *path,
                            lsim_errbuf *eb);

/* Same, from a JSON text; `name` stands in for the path in messages and
** relative trace paths resolve against `basedir` (may be NULL = "."). */
lsim_err lsim_scenario_parse(lsim_scenario *sc, const char *json, size_t len,
                             const char *name, const char *basedir,
                             lsim_errbuf *eb);

/*
** Where the scenario is and what the command line changes in it, for
** lsim_scenario_load_src and lsim_scenario_parse_src:
**
**   member  NULL: the document is the scenario; else the top-level key of
**           the document that holds it (a sweep grid's inline "base",
**           docs/SWEEP.md).  Relative paths still resolve against the
**           file's directory; a missing member is E_SCN_MISSING.
**   sets    nsets "JSONPATH=VALUE" edits (--set), applied in order to the
**           scenario's JSON before it is validated (sim/json.h,
**           lsim_json_set), so that a bad value has the code and the path
**           it would have in the file.  sc->sha256 stays the digest of the
**           file's bytes: the edits are part of the run's identity through
**           its recorded options (docs/SCHEMA.md, run_options).
*/
#define LSIM_SCENARIO_MAX_SETS 32
typedef struct lsim_scenario_src {
  const char *member;
  int nsets;
  const char *const *sets;
} lsim_scenario_src;

lsim_err lsim_scenario_load_src(lsim_scenario *sc, const char *path,
                                const lsim_scenario_src *src, lsim_errbuf *eb);
lsim_err lsim_scenario_parse_src(lsim_scenario *sc, const char *json,
                                 size_t len, const char *name,
                                 const char *basedir,
                                 const lsim_scenario_src *src,
                                 lsim_errbuf *eb);

/* Open the scenario's trace ($.trace: file, importer and assignment, or the
** generator) with its catalog (tenants, adapters, seed).  skip_bad_rows
** and max_requests (when > 0) override the scenario.  Close with
** lsim_trace_close. */
lsim_err lsim_scenario_trace_open(const lsim_scenario *sc, lsim_trace *t,
                                  int skip_bad_rows, int64_t max_requests,
                                  lsim_errbuf *eb);

/* Lowercase hex of sc->sha256 into out[65]. */
void lsim_scenario_sha_hex(const lsim_scenario *sc, char out[65]);

/* Bytes of one adapter of `rank` over all layers and target modules, as
** held by one GPU: with $.workers.tp_degree N > 1 the factors are sharded
** (docs/TP.md) and this is 1/N of the whole adapter. */
int64_t lsim_scenario_adapter_bytes(const lsim_scenario *sc, int rank);

/* Pool pages of one adapter of `rank` under $.workers.adapter_layout
** (docs/RESIDENCY.md, "Page demand"), in one GPU's pool: with tp_degree
** N > 1 the pages of that GPU's shard (docs/TP.md).  With
** $.workers.max_lora_rank R > 0 a rank below R is padded to R (the slot's
** pages, docs/RESIDENCY.md "Padded-rank slots"). */
int64_t lsim_scenario_adapter_pages(const lsim_scenario *sc, int rank);

/* Compressed collections (synthetic form, or a bundle's R and method):
** bytes and pool pages of one adapter's core (R x R or R elements per
** module and layer) and of one cluster's basis (U and V: the size of a
** rank-R adapter). */
int64_t lsim_scenario_core_bytes(const lsim_scenario *sc, int method, int R);
int64_t lsim_scenario_core_pages(const lsim_scenario *sc, int method, int R);

/* The starvation threshold a replay judges intervals by, in ticks:
** $.fairness.starvation_ticks when the key is given (0: only intervals
** still open at the end are starved), else derived from the workload
** before the run (docs/SCHEDULING.md, "The default threshold"):
**
**   ceil(max(LSIM_STARVE_FLOOR_NS,
**            LSIM_STARVE_ITERS * (T_iter + T_load)) / ns_per_tick)
**
** T_iter: the cost model's time of one full iteration (max_batch_tokens
** prefill rows in max_batch_requests segments, every row at the largest
** rank of $.adapters.ranks); T_load: the copy time of the largest adapter
** (its bytes at h2d_gbps plus load_fixed_us).  Pure: the same scenario
** gives the same threshold.  *derived (may be NULL) says which case. */
#define LSIM_STARVE_ITERS 8
#define LSIM_STARVE_FLOOR_NS INT64_C(1000000) /* 1 ms of simulated time */
int64_t lsim_scenario_starvation_ticks(const lsim_scenario *sc, int *derived);

/* KV bytes one token occupies over all layers (K and V), on one GPU: with
** tp_degree N > 1 its ceil(kv_heads / N) heads. */
int64_t lsim_scenario_kv_bytes_per_token(const lsim_scenario *sc);

/* The clock of a replay: the cost model's times (deterministic, the
** default) or the backend's measured ones (docs/FIDELITY.md). */
enum { LSIM_CLOCK_MODEL = 0, LSIM_CLOCK_MEASURED = 1 };

/* Names of the execution modes ("adapters", "full") and clocks ("model",
** "measured"), by value (NULL out of range); _find: the value of a name,
** -1 when unknown; _names: "a, b" for messages. */
const char *lsim_scenario_execute_name(int execute);
int lsim_scenario_execute_find(const char *name);
const char *lsim_scenario_clock_name(int clock);
int lsim_scenario_clock_find(const char *name);
const char *lsim_scenario_execute_names(void);
const char *lsim_scenario_clock_names(void);

#endif /* LSIM_SCENARIO_H */
