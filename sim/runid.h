/*
** runid.h: a run's identity, the inputs it read and the choices it was
** given, recorded in its database so that `lorasim replay --resume` can
** tell whether a rerun would be the same run (docs/RELIABILITY.md,
** "Resume identity"; tables run_inputs and run_options, docs/SCHEMA.md).
**
** A replay is a pure function of its scenario file, every file the
** scenario names (the trace file or ServeGen directory, empirical length
** files, the ServeGen rates file of $.trace.assign, the cost profile of
** $.cost.profile or --profile, the compression bundle of
** $.adapters.compression.bundle) and the command-line options that
** override it.  lsim_runid_collect lists those files with the SHA-256 and
** size of their bytes; the replay adds the options it was given
** (lsim_runid_option) and the database writer stores both with the run
** row, in the same transaction (lsim_db_begin_run), so that a database
** with a run row always has its identity.
**
** A resume reads the record back (lsim_runid_read), recomputes every
** digest (lsim_runid_verify: E_RUN_INPUT_MISSING, E_RUN_INPUT_CHANGED,
** naming the role and the path), rebuilds the scenario with the recorded
** options, and checks that it reads exactly the recorded inputs
** (lsim_runid_same_inputs).  A database without the record (schema
** version 2 and older) is refused with E_RUN_IDENTITY.
**
** Paths are stored as the run opened them: relative paths are relative to
** the working directory of the run, so a resume runs from that directory.
*/
#ifndef LSIM_RUNID_H
#define LSIM_RUNID_H

#include <sqlite3.h>
#include <stdint.h>

#include "../engine/lsim.h"
#include "scenario.h"

#define LSIM_RUNID_MAX_INPUTS 32
#define LSIM_RUNID_MAX_OPTIONS 64 /* room for LSIM_SCENARIO_MAX_SETS --set */
#define LSIM_RUNID_ROLE 16
#define LSIM_RUNID_OPTNAME 32

/* One input file (or directory) of a run.  role: "scenario", "trace",
** "dist", "assign", "profile", "bundle" (docs/SCHEMA.md, run_inputs). */
typedef struct lsim_run_input {
  char role[LSIM_RUNID_ROLE];
  char path[LSIM_PATH_MAX];
  char sha256[65]; /* 64 lowercase hex digits */
  int64_t bytes;   /* file size; a directory: the sum of its files */
} lsim_run_input;

/* One command-line option the run was given, by its long name without the
** dashes ("seed", "profile", "skip-bad-rows"); a flag has the value "1". */
typedef struct lsim_run_option {
  char name[LSIM_RUNID_OPTNAME];
  char value[LSIM_PATH_MAX];
} lsim_run_option;

typedef struct lsim_runid {
  int ninputs;
  lsim_run_input in[LSIM_RUNID_MAX_INPUTS];
  int nopts;
  lsim_run_option opt[LSIM_RUNID_MAX_OPTIONS];
} lsim_runid;

/* SHA-256 and size of the file at path, or of a directory: the SHA-256 of,
** for every regular file directly in it in byte order of the names, the
** name, a NUL and the file's own 32-byte digest (bytes: the sum of the
** sizes).  E_RUN_INPUT_MISSING when path cannot be opened or read (role
** names it in the message), E_IO when it is neither a regular file nor a
** directory (a FIFO or a device is refused, never read). */
lsim_err lsim_runid_digest(const char *role, const char *path, char hex[65],
                           int64_t *bytes, lsim_errbuf *eb);

/* Reset id's inputs and list the inputs of sc, each digested (the
** scenario file only when sc->path is set; its digest must equal
** sc->sha256, else E_RUN_INPUT_CHANGED).  Options are left as they are. */
lsim_err lsim_runid_collect(const lsim_scenario *sc, lsim_runid *id,
                            lsim_errbuf *eb);

/* Add option name = value (E_BUG when the table is full or the text does
** not fit). */
lsim_err lsim_runid_option(lsim_runid *id, const char *name, const char *value,
                           lsim_errbuf *eb);

/* The value of option name, or NULL when the run was not given it. */
const char *lsim_runid_get(const lsim_runid *id, const char *name);

/* Read the record of database handle h (db_path for messages) into *id.
** E_RUN_IDENTITY when the database has no run_inputs table (an older
** lorasim) or no scenario row in it. */
lsim_err lsim_runid_read(sqlite3 *h, const char *db_path, lsim_runid *id,
                         lsim_errbuf *eb);

/* Recompute the digest of every recorded input: E_RUN_INPUT_MISSING or
** E_RUN_INPUT_CHANGED for the first that is gone or differs. */
lsim_err lsim_runid_verify(const lsim_runid *rec, lsim_errbuf *eb);

/* E_RUN_INPUT_CHANGED unless now lists the same inputs (role, path,
** digest) as rec, in any order. */
lsim_err lsim_runid_same_inputs(const lsim_runid *rec, const lsim_runid *now,
                                lsim_errbuf *eb);

/* The scenario source the run's options name: its --set edits (options
** set.1, set.2, ... in the order given) and, for a sweep cell over an
** inline base, the member of the scenario file that holds the scenario
** (option scenario-member).  src->sets points at sets[], whose strings
** point into id.  E_RUN_IDENTITY when more than LSIM_SCENARIO_MAX_SETS are
** recorded or they are not numbered 1, 2, ... in order. */
lsim_err lsim_runid_scenario_src(const lsim_runid *id, lsim_scenario_src *src,
                                 const char *sets[LSIM_SCENARIO_MAX_SETS],
                                 lsim_errbuf *eb);

/* The option name of the i-th --set (from 0): "set.1", "set.2", ...
** into out[16]. */
void lsim_runid_set_name(int i, char out[16]);

/* Use the cost profile at path for sc and name it in sc->cost_profile
** (replay --profile): lsim_scenario_use_profile, whose errors it returns
** (a version 1 profile replaces the five coefficients; a version 2 one
** must match the model shape). */
lsim_err lsim_runid_apply_profile(lsim_scenario *sc, const char *path,
                                  lsim_errbuf *eb);

#endif /* LSIM_RUNID_H */
