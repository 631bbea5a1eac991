/*
** replay.h: replay one scenario through the engine, the world and a
** backend, logging every publication event to a fresh SQLite database.
**
** The world (this module) owns time: the event queue, the streamed trace,
** per-worker copy engines (H2D copies are serialised per worker), fault
** injection for copies, and the iteration cost model.  Within one tick the
** queue delivers copy completions, then iteration completions, then
** arrivals, then one decision step per worker that any of them touched.
**
** Status: the run row reads 'running' from the start, 'ok' only after every
** row committed and every side file (.prom, .dat, .gp, .png) is in place,
** checkpointed into the main database file; 'failed' on an error and 'interrupted' when *stop became
** non-zero (SIGINT).  The replay stops at the first error.
*/
#ifndef LSIM_REPLAY_H
#define LSIM_REPLAY_H

#include <signal.h>
#include <stdio.h>

#include "../engine/lsim.h"
#include "report.h"
#include "scenario.h"

typedef struct lsim_replay_opts {
  const char *db_path;      /* required; the directory must exist */
  const char *command_line; /* recorded in runs.command_line; may be NULL */
  int progress;             /* 1: a progress line on stderr if it is a tty */
  int plots;                /* 1: write gnuplot PNGs next to the database */
  FILE *report;             /* where the summary is printed; NULL: nowhere */
  volatile sig_atomic_t *stop; /* may be NULL; non-zero asks the run to stop */
  /* Optional: called every LSIM_REPLAY_HOOK_EVERY queue events. */
  void (*hook)(void *ud, int64_t queue_events);
  void *hook_ud;
  int verify; /* 1: a tensor backend other than cpu_ref checks every
              ** iteration against cpu_ref (validations table) */
  /* Optional, sc->ntenants entries: filled with each tenant's completed
  ** service (w_in * input + w_out * output tokens) at the end of the run. */
  int64_t *tenant_service;
  /* 1: do not write the events and iterations rows (the run, its summary,
  ** requests, intervals and validations are still written).  Counters and
  ** metrics are unchanged: they come from the same events.  `lorasim
  ** compare` uses it; a replay logs everything. */
  int summary_only;
  /* Optional: a second sink that sees every event, request record and
  ** interval after the database and the metrics registry did. */
  const struct lsim_sink *tap;
  /* Optional: the path the database will have once the run is over, when
  ** the caller writes it elsewhere first and renames it into place
  ** (`lorasim replay --resume`).  The summary and the side files (.prom,
  ** plots) use it.  NULL: db_path. */
  const char *final_path;
  /* 1: the cuda backend runs every layer and target module of the
  ** scenario at its real shapes (docs/CUDA.md "Model-shape replay");
  ** 0: the one LSIM_REPLAY_TENSOR_DIM module.  tensor_layers > 0 caps the
  ** layers executed (0: all of them). */
  int tensor_model;
  int tensor_layers;
  /* 1: the caller already holds final_path's lock (lsim_out_lock; `replay
  ** --resume` holds it from reading the database to installing the
  ** rerun); 0: the run takes it, and refuses with LSIM_E_OUT_LOCKED while
  ** another process holds it. */
  int lock_held;
  /* Optional: the command-line options the run was given, as name, value
  ** pairs ending with NULL ({"seed", "7", "verify", "cpu_ref", NULL});
  ** recorded in run_options with the digests of every input the scenario
  ** reads (sim/runid.h), which `replay --resume` checks. */
  const char *const *run_options;
  /* Optional: what a backend following the residency (cpu_ref, cuda) was
  ** told and checked, filled at the end of the run (as far as it got);
  ** all zero for the model backend.  backends/backend.h. */
  struct lsim_backend_counts *backend_counts;
  /* Optional: the JSON summary's path (sim/sumjson.h; refused, like the
  ** other side files, before anything is written); NULL: none. */
  const char *json_path;
  /* Optional, sc->ntenants + 1 entries: filled with the per-tenant figures
  ** (sim/tenants.h; the all-tenants row last) of a run that ended ok. */
  struct lsim_tenant_fig *tenant_figs;
} lsim_replay_opts;

#define LSIM_REPLAY_HOOK_EVERY 1024

/* The one target module a tensor backend (cpu_ref, cuda) executes per
** iteration during a replay is d x d with this d. */
#define LSIM_REPLAY_TENSOR_DIM 16

/* Run the scenario.  On return *res holds the figures of the run (also on
** failure, as far as it got).  Returns 0, LSIM_E_INTERRUPTED, or an error. */
lsim_err lsim_replay_run(const lsim_scenario *sc, const lsim_replay_opts *o,
                         lsim_summary *res, lsim_errbuf *eb);

/*
** The execution mode and clock of sc (sc->execute, sc->clock, after the
** command line's overrides) against its backend, build and workers; 0 when
** the replay can run them.  Refused, all before any file is written:
**   E_SCN_MODE_BACKEND  --execute full with a backend other than cuda;
**                       --clock measured with a backend that executes
**                       nothing (model: its times are the cost model's)
**   E_SCN_MODE_DEVICE   --execute full in a build without CUDA, or with
**                       no GPU visible (the message says which)
**   E_SCN_MODE_TP       --clock measured with $.workers.tp_degree > 1 (one
**                       device's time has no collectives in it)
** lsim_replay_run calls it first; the commands call it earlier, to refuse
** before they make an output folder.  The messages name the options and
** the scenario keys ($.execute, $.clock).
*/
lsim_err lsim_replay_check_modes(const lsim_scenario *sc, lsim_errbuf *eb);

/* After a failed lsim_replay_run: one line on f, after "PROG: ", saying
** what the database at db_path holds -- "run marked 'failed' in DB" only
** when the run row really was updated (res->db_status), "DB still says
** 'running'" when its end could not be written; when no run row was
** committed: "no database written" (no file), "DB left as it was" (the
** file holds an earlier run), "no run recorded in DB" (it holds none). */
void lsim_replay_explain(FILE *f, const char *prog, const lsim_summary *res,
                         const char *db_path);

#endif /* LSIM_REPLAY_H */
