/*
** resume.h: `lorasim replay --resume DB`, finishing a run that did not end.
**
** A run killed part way (kill -9, power loss) leaves its database with the
** run row 'running' and the events of its last committed batch; one
** stopped by SIGINT leaves it 'interrupted'.  A run is a pure function of
** its inputs and options: the runs row records the seed, policies and
** backend, run_inputs the path and SHA-256 of every file the run read
** (the scenario, its trace, profile, bundle...) and run_options every
** command-line option it was given (sim/runid.h).  A resume checks every
** recorded digest again and refuses when one input is gone
** (E_RUN_INPUT_MISSING) or differs (E_RUN_INPUT_CHANGED), then reruns with
** the recorded options (a --profile is applied again), so resuming is a
** deterministic rerun: the same event rows, byte for byte, as a run that
** was never interrupted.  The rerun writes a fresh database beside the old
** one (DB.resume) and renames it over DB only when it ended 'ok'; until
** then, or when the rerun fails (DB.resume keeps that attempt), DB keeps
** the partial run, never claiming 'ok'.
*/
#ifndef LSIM_RESUME_H
#define LSIM_RESUME_H

#include <signal.h>
#include <stdint.h>

#include "../engine/lsim.h"
#include "runid.h"
#include "scenario.h"

/* What the runs row of a database says about how to rerun it. */
typedef struct lsim_resume_info {
  char status[16];                   /* running, interrupted, failed, ok */
  char scenario_path[LSIM_PATH_MAX]; /* as the run was given it */
  char sha256[65];                   /* of the scenario file's bytes */
  uint64_t seed;
  char backend[LSIM_NAME_MAX], scheduler[LSIM_NAME_MAX];
  char evict[LSIM_NAME_MAX], prefetch[LSIM_NAME_MAX];
  char command_line[1024];
  lsim_runid id; /* the recorded inputs and options (run_inputs, run_options) */
  /* flags from the recorded options that the columns do not hold */
  int skip_bad_rows, verify, no_plots, summary_only;
  int tensor_model, tensor_layers; /* --tensor-shape model, --tensor-layers */
} lsim_resume_info;

/* Read the run row and the identity of db_path.  E_USAGE when the file
** holds no run (it was killed before the row was committed, or it is not
** a lorasim database), E_RUN_IDENTITY when it was written without an
** identity (an older lorasim), E_DB when SQLite cannot read it. */
lsim_err lsim_resume_read(const char *db_path, lsim_resume_info *ri,
                          lsim_errbuf *eb);

/* Check every recorded input (E_RUN_INPUT_MISSING, E_RUN_INPUT_CHANGED,
** naming its role and path), load the recorded scenario into *sc, apply
** the recorded seed, policies, backend, flags and --profile, and check
** that the scenario so built reads exactly the recorded inputs
** (E_RUN_INPUT_CHANGED): rerunning anything else would not be a resume. */
lsim_err lsim_resume_scenario(const lsim_resume_info *ri, lsim_scenario *sc,
                              lsim_errbuf *eb);

/* Put a finished rerun in place: tmp (closed, its WAL checkpointed away)
** is renamed over db after db's -wal and -shm are removed (each path
** checked with lsim_out_check first: a link or a device is refused and
** nothing is touched).  Also used by `lorasim sweep` for its cells. */
lsim_err lsim_resume_install(const char *tmp, const char *db,
                             lsim_errbuf *eb);

/* The whole command: returns the exit status (0 ok, 1 the run failed, 2
** bad input, 130 interrupted).  quiet and no_plots as for replay; stop as
** in lsim_replay_opts. */
int lsim_resume_main(const char *db_path, int quiet, int no_plots,
                     volatile sig_atomic_t *stop);

#endif /* LSIM_RESUME_H */
