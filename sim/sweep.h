/*
** sweep.h: `lorasim sweep`, a grid of replays (docs/SWEEP.md).
**
** A grid file names a base scenario (a path relative to the grid, or an
** inline object under "base"), axes (each a JSON path of the scenario and
** its values: a list or a range), how the axes combine ("product" or
** "zip") and the seeds of every combination.  A cell is one combination
** and one seed: one ordinary replay of the base scenario with the cell's
** --set edits and --seed, written to OUT/cells/NNNN.db (+ .prom), its
** rows byte for byte those of
**
**   lorasim replay BASE --seed S --set PATH=VALUE ... --no-plots
**
** whether it ran alone (--cell), under -j or on MPI.
**
** Cell order.  Cells are numbered from 0: cell = combination * nseeds +
** seed index.  With "product" the combinations are the axes' values in
** nested-loop order, the first axis outermost and the last varying
** fastest; with "zip" combination k takes value k of every axis.
**
** A cell is done when OUT/cells/NNNN.db says 'ok' and its recorded
** identity (the scenario file and its digest, the seed, the --set edits,
** the digests of every input; sim/runid.h) is the cell's: a database left
** by another grid, an edited base or a changed trace is not done.
**
** The local functions below are what the command (sim/sweep_cmd.c) and
** the MPI driver (sim/sweep_mpi.c, built with LSIM_HAVE_MPI) share: every
** process loads the grid itself, runs the cells it is given with
** lsim_sweep_run_cell (each cell written atomically, under its own lock),
** and one of them merges.
*/
#ifndef LSIM_SWEEP_H
#define LSIM_SWEEP_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>

#include "../engine/lsim.h"

typedef struct lsim_sweep lsim_sweep; /* a loaded grid */

/* Limits: cells of one grid, values of one axis, axes. */
#define LSIM_SWEEP_MAX_CELLS 1000000
#define LSIM_SWEEP_MAX_VALUES 10000
#define LSIM_SWEEP_MAX_AXES 16

/* Load and validate grid_path (codes and JSON paths as for scenarios:
** E_SCN_*), check that every combination gives a valid scenario (its
** error, prefixed with the cell's index and values), and keep out_dir
** (NULL: results/sweep-NAME).  sets are --set edits applied to the base
** before the axes' (at most LSIM_SCENARIO_MAX_SETS; a --set of a path an
** axis sets is E_USAGE).  Creates nothing on disk.  *out is released with
** lsim_sweep_release. */
lsim_err lsim_sweep_load(const char *grid_path, const char *out_dir,
                         int nsets, const char *const *sets,
                         lsim_sweep **out, lsim_errbuf *eb);

/* `lorasim sweep merge DIR`: the grid, output directory and --set edits
** recorded in DIR/sweep.json by lsim_sweep_prepare.  E_USAGE when DIR has
** no sweep.json, E_RUN_INPUT_CHANGED when the grid file changed since. */
lsim_err lsim_sweep_load_dir(const char *dir, lsim_sweep **out,
                             lsim_errbuf *eb);

void lsim_sweep_release(lsim_sweep *s);

int64_t lsim_sweep_ncells(const lsim_sweep *s);
const char *lsim_sweep_out_dir(const lsim_sweep *s);

/* Create OUT and OUT/cells and write OUT/sweep.json (the grid path, its
** digest and the --set edits, for `sweep merge`), atomically; every
** process of a run may call it (the content is the same). */
lsim_err lsim_sweep_prepare(lsim_sweep *s, lsim_errbuf *eb);

/* Non-zero *stop (SIGINT) interrupts a running cell (may be NULL). */
void lsim_sweep_set_stop(lsim_sweep *s, volatile sig_atomic_t *stop);

/* 1: the cell's database is complete ('ok') and its identity is the
** cell's; 0 otherwise (absent, unfinished, failed, another run). */
int lsim_sweep_cell_done(const lsim_sweep *s, int64_t cell);

/* Run the cell into OUT/cells/NNNN.db: written to NNNN.db.part and renamed
** into place when the run ended (ok or failed: a failed run keeps its
** error in runs.error; an interrupted one leaves NNNN.db as it was).
** Idempotent: a rerun of a done cell writes the same rows.  Errors of the
** replay (LSIM_E_OUT_LOCKED when another process runs the cell now). */
lsim_err lsim_sweep_run_cell(lsim_sweep *s, int64_t cell, lsim_errbuf *eb);

/* The cell's database path into out[n]. */
void lsim_sweep_cell_path(const lsim_sweep *s, int64_t cell, char *out,
                          size_t n);

/* One line describing the cell ("cell 0003 seed 43 scheduler=fcfs
** pool_pages=512"), console-safe, into out[n]. */
void lsim_sweep_cell_label(const lsim_sweep *s, int64_t cell, char *out,
                           size_t n);

/* Merge every done cell into OUT/sweep.csv, OUT/sweep-stats.csv and
** OUT/sweep.db (docs/SWEEP.md), each written whole.  *missing (may be
** NULL) gets the number of cells not done.  With cells missing and
** allow_partial 0 nothing is written and the result is
** LSIM_E_SWEEP_MISSING, naming the first few. */
lsim_err lsim_sweep_merge(lsim_sweep *s, int allow_partial, int64_t *missing,
                          lsim_errbuf *eb);

/* The two-sided 95% quantile of Student's t with df >= 1 degrees of
** freedom (12.706... for 1, 4.302... for 2, near 1.96 for many): the
** merge's confidence half-width is lsim_sweep_t95(n - 1) * sd / sqrt(n). */
double lsim_sweep_t95(int df);

/* The progress line of a sweep (no newline): "sweep: 12/40 cells, 1
** failed, 3 skipped (done before), elapsed 1m02s, eta 2m30s".  done
** counts cells finished by this run (ok or failed); the ETA is elapsed
** wall time over done times the cells left, for display only. */
void lsim_sweep_progress_line(char *out, size_t n, int64_t done,
                              int64_t failed, int64_t skipped, int64_t total,
                              double elapsed_s);

/* How the command runs the cells (sim/sweep_cmd.c, sim/sweep_mpi.c). */
typedef struct lsim_sweep_run_opts {
  int jobs;   /* -j: worker processes on this machine (>= 1) */
  int resume; /* 1: skip the cells that are done */
  int quiet;  /* 1: no progress lines */
  volatile sig_atomic_t *stop;
} lsim_sweep_run_opts;

/* `lorasim sweep GRID.json --mpi`: the MPI driver (sim/sweep_mpi.c, only
** in a build with LSIM_HAVE_MPI, which must also be defined when
** sim/sweep_cmd.c is compiled: without it --mpi is refused, exit 2).  The
** command has loaded the grid, set the stop flag and run
** lsim_sweep_prepare (every rank does; the files are the same) before it
** calls this on every rank.  Runs the cells over the ranks (o->resume:
** only those not done; o->jobs is a hint it may ignore) and merges on one
** rank; returns the exit status (0, 1 a cell failed, 130 interrupted). */
int lsim_sweep_mpi_main(lsim_sweep *s, const lsim_sweep_run_opts *o);

/* The whole command, `lorasim sweep ...`: returns the exit status. */
int lsim_sweep_main(int argc, char **argv);

#endif /* LSIM_SWEEP_H */
