/*
** recclock.h: a recorded clock (`lorasim replay --clock-from DB`).
**
** A measured run (`--clock measured`) stores, per iteration and per copy,
** the time that drove its clock.  Replaying the same scenario with the
** same seed and options makes the same decisions as long as every span
** takes the same time, so the run can be made again without the device
** that measured it: the spans come from DB in the order the replay asks
** for them, each checked against what the replay is about to do (worker,
** start tick, rows; worker, adapter, kind), and the replay's own cost
** model still prices every span (model_ns).  A replay that departs from
** the recorded run stops with E_FID_RECORDED naming the first difference.
** docs/FIDELITY.md, "Replaying a recorded clock".
*/
#ifndef LSIM_RECCLOCK_H
#define LSIM_RECCLOCK_H

#include <stdint.h>

#include "../engine/lsim.h"

typedef struct lsim_recclock lsim_recclock;

/* Open DB read-only and check it: a finished run (status ok) of schema
** version 6 or later with its iteration rows.  E_FILE_MISSING,
** E_FID_NOT_RUN (not a run database), E_FID_RECORDED (not usable). */
lsim_err lsim_recclock_open(lsim_recclock **out, const char *path,
                            lsim_errbuf *eb);

/* The next recorded iteration, which must be iteration `iter` of worker
** `worker`, started at `start_tick` with the given rows.  *drive_ns: the
** ns that drove the recorded clock; *measured_ns: its measured ns, or -1. */
lsim_err lsim_recclock_iter(lsim_recclock *r, int64_t iter, int worker,
                            int64_t start_tick, int64_t prefill_rows,
                            int64_t decode_rows, int64_t *drive_ns,
                            int64_t *measured_ns, lsim_errbuf *eb);

/* The next recorded copy (loads table, in its order), which must be of
** `kind` ("load", "restore", "hotswap") on `worker` for `adapter`. */
lsim_err lsim_recclock_load(lsim_recclock *r, const char *kind, int worker,
                            int adapter, int64_t *drive_ns,
                            int64_t *measured_ns, lsim_errbuf *eb);

/* At the end of a run that completed: every recorded row was used. */
lsim_err lsim_recclock_finish(lsim_recclock *r, lsim_errbuf *eb);

void lsim_recclock_close(lsim_recclock *r);

#endif
