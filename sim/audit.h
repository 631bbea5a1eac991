/*
** audit.h: the claim audit and `lorasim audit DB` (docs/RELIABILITY.md,
** "Claim audit" and "Event-log audit").
**
** Every figure lorasim writes as a result carries an evidence class, the
** strongest statement it makes about where the number comes from:
**
**   exact     an exact fact of this run: a count or ratio of its event log,
**             an exact rational comparison by cpu_ref
**   measured  executed and timed in this run (CUDA events around the
**             launch, host time of cpu_ref's evaluation)
**   modeled   predicted by the cost model or a calibration profile:
**             simulated time, latencies and rates of a replay
**   cited     a number from outside this run (a baseline file such as
**             ../shared/bench/RESULTS-h200.md, an earlier measurement)
**
** and a source, what actually produced it (enum lsim_source).  The audit
** derives the ceiling -- the strongest class the source supports, given
** the run's backend and whether the figure is a time (a latency, a rate,
** a speedup) -- and refuses a claim above it with LSIM_E_CLAIM_CEILING
** (the article's typed failure source_claim_ceiling_exceeded).  The order
** is cited < modeled < measured < exact; a time is never exact; a figure
** computed from two sources (a ratio, a comparison) is capped by the
** weaker.  Examples refused: a `model` backend's iteration time labelled
** measured (BACKEND_TIME under model is the modelled cost), a latency
** derived from bytes labelled measured or exact, a ratio to a cited
** baseline labelled measured as if both sides ran here.
**
** Claims are stored next to runs_summary in `runs_evidence` (one row per
** figure, docs/SCHEMA.md) by lsim_claims_store, which audits every claim
** first and writes nothing when one fails.
*/
#ifndef LSIM_AUDIT_H
#define LSIM_AUDIT_H

#include <stdio.h>

#include "../engine/lsim.h"

struct lsim_db;

enum lsim_evidence {
  LSIM_EVID_CITED = 0,
  LSIM_EVID_MODELED = 1,
  LSIM_EVID_MEASURED = 2,
  LSIM_EVID_EXACT = 3
};

enum lsim_source {
  LSIM_SRC_NONE = -1,     /* no second operand */
  LSIM_SRC_LOG = 0,       /* counts and ratios of this run's events/requests */
  LSIM_SRC_SIM_TIME,      /* simulated ticks: durations set by the cost model */
  LSIM_SRC_COST_MODEL,    /* the cost model or a calibration profile */
  LSIM_SRC_BACKEND_TIME,  /* iterations.backend_ns of this run's backend */
  LSIM_SRC_BYTES,         /* byte and page counts */
  LSIM_SRC_EXACT_REF,     /* cpu_ref's exact rational comparison */
  LSIM_SRC_BASELINE,      /* a number read from outside this run */
  LSIM_SRC_MEASURED_CLOCK, /* simulated ticks whose iteration and load
                              spans were this run's measured backend times
                              (--clock measured, docs/FIDELITY.md) */
  LSIM_SRC__COUNT
};

/* The clock a run's simulated time came from, for the claims of its
** figures: the cost model's; the backend's measured times for every
** iteration and load; or measured with some spans the model's (a fallback
** or a span no backend times: disk reads, hotswap shadow copies). */
enum lsim_claim_clock {
  LSIM_CLAIM_CLOCK_MODEL = 0,
  LSIM_CLAIM_CLOCK_MEASURED = 1,
  LSIM_CLAIM_CLOCK_MIXED = 2
};

/* Stable names ("exact", ...; "log", "sim_time", ...); NULL when out of
** range.  _find: the code of a name, -1 when unknown. */
const char *lsim_evidence_name(int cls);
int lsim_evidence_find(const char *name);
const char *lsim_source_name(int src);
int lsim_source_find(const char *name);

typedef struct lsim_claim {
  const char *key; /* the figure's name, e.g. runs_summary.key */
  int claimed;     /* enum lsim_evidence: what the writer says */
  int source;      /* enum lsim_source */
  int operand;     /* a second source for a ratio or comparison, or NONE */
  int time;        /* 1: a duration, latency, rate or speedup */
} lsim_claim;

/* The strongest class the claim's sources support under `backend`
** ("model", "cpu_ref", "cuda"; NULL: nothing executed); -1 when a source
** is out of range. */
int lsim_claim_ceiling(const lsim_claim *c, const char *backend);

/* 0 when c->claimed <= the ceiling; LSIM_E_CLAIM_CEILING naming the key,
** the claim and the ceiling otherwise; LSIM_E_CLAIM_CLASS when the class
** or a source is not one of the names above. */
lsim_err lsim_claim_audit(const lsim_claim *c, const char *backend,
                          lsim_errbuf *eb);

/* Audit all n claims, then (only when every one passes) write them to the
** run's runs_evidence table (created when missing) in one transaction. */
lsim_err lsim_claims_store(struct lsim_db *db, const char *backend,
                           const lsim_claim *c, int n, lsim_errbuf *eb);

/* What lorasim's writers claim for one figure, by its name: a name that
** ends in _ms, _seconds or _per_s, or starts with slo_, is simulated time
** (modeled, source sim_time, a time); one that ends in _bytes is a byte
** count (exact, bytes); anything else is a count or ratio of the run's
** event log (exact, log).  Used for runs_summary keys, compare.csv columns
** and .prom metric names ("_seconds" and "_slo_" anywhere in the name
** count as well, for metric names like lorasim_ttft_seconds_sum). */
lsim_claim lsim_summary_claim(const char *key);

/* The same under a run's clock (enum lsim_claim_clock): under the measured
** clock a time is the measured clock's (source measured_clock), claimed
** measured when every span was measured and modeled when some were the
** model's; under the model clock, lsim_summary_claim.  The exception is
** starvation_threshold_ms, which the cost model sets before the run under
** either clock (modeled, sim_time). */
lsim_claim lsim_summary_claim_clock(const char *key, int clock);

/* compare-evidence.csv: one row (column, class, source, time) per figure
** column of compare.csv, after auditing each under `backend`. */
lsim_err lsim_claims_write_csv(const char *path, const char *backend,
                               int clock, const char *const *keys, int n,
                               lsim_errbuf *eb);

/* The same for the figure columns of a CSV file's header (run parameters
** scheduler, evict, prefetch, seed are not figures), into `out`. */
lsim_err lsim_claims_csv_sidecar(const char *csv, const char *out,
                                 const char *backend, int clock,
                                 lsim_errbuf *eb);

/* Put a "# HELP NAME evidence CLASS (SOURCE)" line before every "# TYPE"
** line of a Prometheus text file (rewritten in place). */
lsim_err lsim_claims_annotate_prom(const char *path, int clock,
                                   lsim_errbuf *eb);

/*
** `lorasim audit DB`: the run's claims (every runs_summary key has a
** runs_evidence row: E_CLAIM_MISSING; names known: E_CLAIM_CLASS; each
** within its ceiling under runs.backend and runs.clock: E_CLAIM_CEILING --
** a figure of source measured_clock in a run whose clock was the model's
** is one) and its event log
** (engine/ledger.h: E_LOG_*).  Findings go to `out` (may be NULL), one
** line each; the first finding's code is returned.
*/
typedef struct lsim_audit_report {
  int64_t claims, events, requests, records;
  int findings;
} lsim_audit_report;
lsim_err lsim_audit_db(const char *path, FILE *out, lsim_audit_report *rep,
                       lsim_errbuf *eb);

int lsim_cmd_audit(int argc, char **argv);

#endif /* LSIM_AUDIT_H */
