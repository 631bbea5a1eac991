/*
** fidelity.h: `lorasim fidelity DB [--against DB2] [--out DIR] [--json
** PATH]`, the cost model's clock against the measured one
** (docs/FIDELITY.md).
**
** DB is a run database of schema 6 or later whose iterations carry both
** times (iterations.model_ns, the cost model's with TP collectives, and
** iterations.measured_ns, what an executing backend timed), and whose
** loads table carries both copy times.  For every ok iteration with a
** measured time x > 0 and its modelled time m, the relative error is
** e = (m - x) / x; per group of iterations the report gives
**
**   n           iterations in the group
**   median_pct  the nearest-rank median of |e|, in percent
**   p90_pct     the nearest-rank 90th percentile of |e|, in percent
**   mape_pct    the mean of |e|, in percent
**   bias_pct    the mean of e, in percent (> 0: the model is slow)
**
** (nearest rank: the value at rank ceil(p n / 100) of the sorted list,
** computed in integers as (p n + 99) / 100), for the groups all; by phase
** mix (prefill only, decode only, mixed); by rows (prefill + decode rows)
** in buckets 1, 2-7, 8-31, 32-127, 128-511, 512-2047, 2048-8191, 8192+;
** by context (iterations.ctx_tokens, when recorded) in buckets 0-511,
** 512-2047, 2048-8191, 8192-32767, 32768-131071, 131072+; empty groups
** are left out.  The same for the loads (kind load or restore, with a
** measured time): the group all.
**
** With --against DB2: DB2 must be the measured-clock replay of the same
** run as DB, a model-clock replay: the same scenario (SHA-256), seed,
** policies and --set edits, both ended ok (else E_FID_MISMATCH).  The
** report adds TTFT and TBT p50/p99 of each (runs_summary) and their
** relative difference (model clock - measured clock) / measured clock.
**
** Codes (engine/err_fid.h, exit 2): E_FID_NOT_RUN (not a run database),
** E_FID_NO_MEASURED (no iteration with a measured time: a model backend,
** or a database older than schema 6), E_FID_MISMATCH.  A missing file is
** E_FILE_MISSING; an output path refused, outfile.h's codes.
**
** Outputs, through sim/outfile.c: with --out DIR, DIR/fidelity.csv (one
** row per section and group), DIR/fidelity-e2e.csv (with --against),
** DIR/fidelity-iterations.dat and DIR/fidelity-loads.dat (model and
** measured ms per span) and the figures DIR/fidelity-iterations.{png,svg}
** and DIR/fidelity-loads.{png,svg} (log-log, predicted against measured,
** the line y = x) drawn by DIR/fidelity-plots.gp; with --json PATH, every
** figure as JSON.  Every figure carries the evidence class the claim audit
** gives it (sim/audit.h): model times modeled (cost_model), measured times
** measured (backend_time) under an executing backend, their comparison
** modeled (the weaker of the two).
*/
#ifndef LSIM_FIDELITY_H
#define LSIM_FIDELITY_H

#include "../engine/lsim.h"

int lsim_fidelity_main(int argc, char **argv);

#endif /* LSIM_FIDELITY_H */
