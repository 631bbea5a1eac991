/*
** err_sweep.h: stable error codes of `lorasim sweep` (sim/sweep.c): a
** grid of replays whose cells are not all there, or failed.  Range
** -780..-789.  Append only; never renumber.  docs/RELIABILITY.md ("Exit
** status") and docs/SWEEP.md have the meaning of each code.
*/
#define LSIM_ERRCODES_SWEEP(X)                                              \
  X(LSIM_E_SWEEP_MISSING,      -780, "E_SWEEP_MISSING")                     \
  X(LSIM_E_SWEEP_CELL_FAILED,  -781, "E_SWEEP_CELL_FAILED")
