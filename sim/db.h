/*
** db.h: the SQLite event spine, one database file per run.
**
** The database holds the run row, every publication event, one row per
** request and one per iteration (schema: docs/SCHEMA.md).  Writes go
** through prepared statements inside batched transactions (a commit every
** LSIM_DB_BATCH rows) in WAL mode; a run is therefore visible while it is in
** progress and survives a crash up to its last commit.
**
** Status discipline: lsim_db_begin_run commits the run row with status
** 'running' before any event is written; only lsim_db_end_run(..., "ok")
** turns it into 'ok', after the last batch committed.  A run that fails
** ends as 'failed', one stopped by SIGINT as 'interrupted', and one whose
** process died stays 'running': no path leaves a database claiming success
** for a run that did not finish.
**
** Usage:
**   lsim_db *db; lsim_db_open(&db, path, eb);
**   lsim_db_begin_run(db, &info, eb);
**   ... lsim_db_event / lsim_db_request / lsim_db_iteration ...
**   lsim_db_end_run(db, "ok", NULL, eb);
**   lsim_db_close(db);
*/
#ifndef LSIM_DB_H
#define LSIM_DB_H

#include <sqlite3.h>

#include "../engine/event.h"
#include "../engine/lsim.h"

#define LSIM_DB_BATCH 65536 /* rows per committed transaction */

typedef struct lsim_db lsim_db;

typedef struct lsim_run_info {
  const char *scenario_name;
  const char *scenario_path;
  const char *scenario_sha256; /* 64 hex chars */
  uint64_t seed;
  const char *backend;
  const char *scheduler;
  const char *evict;
  const char *prefetch;
  int64_t ns_per_tick;
  int workers;
  const char *command_line; /* may be NULL */
  const char *execute; /* "adapters" (NULL), "full" */
  const char *clock;   /* "model" (NULL), "measured" */
} lsim_run_info;

struct lsim_runid;

typedef struct lsim_iter_record {
  int64_t iter;
  int worker;
  lsim_tick start_tick, end_tick;
  int64_t prefill_rows, decode_rows;
  int prefill_reqs, decode_reqs;
  int distinct_adapters, segments;
  int64_t true_rank_rows, padded_rank_rows;
  int64_t backend_ns; /* -1 when the backend measured nothing */
  const char *result; /* "ok", "failed" */
  /* schema 6 (docs/FIDELITY.md): both times, whichever drove the clock */
  int64_t model_ns;    /* the cost model's, TP collectives included */
  int64_t measured_ns; /* the backend's measured time; -1: none */
  int64_t ctx_tokens;  /* sum over the plan's entries of ctx + rows; -1:
                          not known */
} lsim_iter_record;

/* One copy the world scheduled on a worker's copy engine (loads table). */
typedef struct lsim_load_record {
  int64_t load;         /* 1, 2, ... in the order the copies were started */
  const char *kind;     /* "load", "restore", "hotswap" (a static string) */
  int worker, adapter;
  int attempt;          /* -1 for a hotswap's shadow copy */
  int64_t request;      /* the request it was started for; -1 none */
  int64_t bytes, disk_bytes;
  lsim_tick start_tick, end_tick; /* the copy's start and completion */
  int64_t model_ns;     /* the copy time the scenario's bandwidth gives */
  int64_t measured_ns;  /* the backend's measured stage time; -1: none */
} lsim_load_record;

/* One backend result compared with a reference (validations table). */
typedef struct lsim_validation_record {
  int64_t iter;
  const char *backend;   /* "cpu_ref", "cuda" */
  const char *reference; /* what it was compared with */
  double max_abs_err, max_rel_err;
  int exact;             /* 1 when equal to the last bit */
} lsim_validation_record;

/* Create a fresh database at path (an existing file and its -wal/-shm are
** replaced), apply pragmas and the schema.  Only regular files are
** replaced: a link is LSIM_E_OUT_SYMLINK, a device node, FIFO, directory
** or socket LSIM_E_OUT_NOT_REGULAR, and then nothing is touched
** (sim/outfile.h).  The caller holds the path's
** lock (lsim_out_lock) when another process could write it.  *out is owned by the caller and
** released with lsim_db_close. */
lsim_err lsim_db_open(lsim_db **out, const char *path, lsim_errbuf *eb);

/* Insert the run row (status 'running') and commit it.  Run id is 1. */
lsim_err lsim_db_begin_run(lsim_db *db, const lsim_run_info *info,
                           lsim_errbuf *eb);

/* The same, with the run's identity: the rows of run_inputs and
** run_options (sim/runid.h) are committed in the run row's transaction, so
** a database with a run row always has them.  ident NULL: none recorded
** (a resume of such a database is refused), as lsim_db_begin_run. */
lsim_err lsim_db_begin_identified(lsim_db *db, const lsim_run_info *info,
                                  const struct lsim_runid *ident,
                                  lsim_errbuf *eb);

/* Append rows; these are batched and committed every LSIM_DB_BATCH rows.
** lsim_db_event matches lsim_sink.event (ud is the lsim_db *). */
lsim_err lsim_db_event(void *db, const lsim_event *ev);
lsim_err lsim_db_request(void *db, const lsim_request_record *rec);
lsim_err lsim_db_iteration(lsim_db *db, const lsim_iter_record *it);
lsim_err lsim_db_validation(lsim_db *db, const lsim_validation_record *v);
lsim_err lsim_db_load(lsim_db *db, const lsim_load_record *l);
/* One starvation-predicate interval (starvation table); starved: 1 when
** it was still open at the end or at least $.fairness.starvation_ticks
** long. */
lsim_err lsim_db_interval(lsim_db *db, const lsim_interval *iv, int starved);

/* The run's catalog (tables tenants and adapters, docs/SCHEMA.md): what
** the tenant and adapter integers of the other tables name.  Written in the
** run's transaction like any row; a second row for the same index
** replaces the first (a name the trace gave later).  Strings are copied. */
typedef struct lsim_db_tenant_row {
  int tenant;
  const char *name;
  int64_t weight;         /* the fairness weight the schedulers divide by */
  int64_t traffic_weight; /* $.tenants[i].traffic_weight */
} lsim_db_tenant_row;
typedef struct lsim_db_adapter_row {
  int adapter;
  const char *name;
  int owner;              /* tenant index */
  int rank;
  int64_t bytes, pages;   /* as the engine charges a load of it */
  const char *targets;    /* target module names, comma-separated */
} lsim_db_adapter_row;
lsim_err lsim_db_tenant(lsim_db *db, const lsim_db_tenant_row *t);
lsim_err lsim_db_adapter(lsim_db *db, const lsim_db_adapter_row *a);

/* Record a key/value summary figure of the run (runs_summary table). */
lsim_err lsim_db_summary(lsim_db *db, const char *key, double value);

/* Commit what is pending, then set the run's status ("ok", "failed",
** "interrupted"), its error message (may be NULL), event count and end
** tick, and commit that.  On a write failure the status stays unchanged.
** For "ok" the WAL is checkpointed (TRUNCATE) before the status is written
** and again after it, both checked: on return 0 the main file alone holds
** the whole run.  A failed second checkpoint sets the status back to
** 'failed' with SQLite's reason (as far as the disk lets it) and returns
** LSIM_E_DB. */
lsim_err lsim_db_end_run(lsim_db *db, const char *status, const char *error,
                         lsim_tick end_tick, lsim_errbuf *eb);

/* Events appended so far in this run. */
int64_t lsim_db_event_count(const lsim_db *db);

/* The message of the first failed append or commit ("<path>: <what>:
** <sqlite message> (<code name>, code <extended code>; os: <errno
** text>)"), NULL when none failed. */
const char *lsim_db_failure(const lsim_db *db);

/* The last SQLite error of a failed append, for the caller's message. */
const char *lsim_db_errmsg(lsim_db *db);

/* The underlying handle, for report queries (read-only use). */
sqlite3 *lsim_db_handle(lsim_db *db);

void lsim_db_close(lsim_db *db);

/* May a replay write its database at path?  Yes (0) when nothing is there,
** when it is an empty regular file, or when it is a database of lorasim (a
** SQLite file with a `runs` table), which the run replaces.  Any other
** regular file is refused with LSIM_E_OUT_NOT_DB and left as it was: --db
** never deletes a file that is not one of lorasim's.  (A path that is not a
** regular file is lsim_out_check's to refuse.) */
lsim_err lsim_db_check_target(const char *path, lsim_errbuf *eb);

/* 1 when table (or view) `table` of the open database h has a column
** `col`: how readers of run databases tell a schema's version apart. */
int lsim_db_has_column(sqlite3 *h, const char *table, const char *col);

#endif /* LSIM_DB_H */
