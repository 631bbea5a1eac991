/*
** err_run.h: stable error codes of a run's identity (sim/runid.c): the
** digests of every input a replay read, recorded in its database and
** checked by `lorasim replay --resume`, and the audit of a run that never
** ended.  Range -760..-779.  Append only; never renumber.
** docs/RELIABILITY.md ("Resume identity") has the meaning of each code.
*/
#define LSIM_ERRCODES_RUN(X)                                                \
  X(LSIM_E_RUN_INPUT_CHANGED,  -760, "E_RUN_INPUT_CHANGED")                 \
  X(LSIM_E_RUN_INPUT_MISSING,  -761, "E_RUN_INPUT_MISSING")                 \
  X(LSIM_E_RUN_IDENTITY,       -762, "E_RUN_IDENTITY")                      \
  X(LSIM_E_RUN_INCOMPLETE,     -763, "E_RUN_INCOMPLETE")
