/*
** err_fid.h: stable error codes of `lorasim fidelity` (sim/fidelity.c): a
** run database whose times cannot be compared as asked, or replayed as
** asked (`replay --clock-from`, sim/replay.c).  Range
** -790..-799.  Append only; never renumber.  docs/FIDELITY.md and
** docs/RELIABILITY.md ("Exit status") have the meaning of each code; all
** are bad input (exit 2).
*/
#define LSIM_ERRCODES_FID(X)                                                \
  X(LSIM_E_FID_NO_MEASURED,    -790, "E_FID_NO_MEASURED")                   \
  X(LSIM_E_FID_MISMATCH,       -791, "E_FID_MISMATCH")                      \
  X(LSIM_E_FID_NOT_RUN,        -792, "E_FID_NOT_RUN")                       \
  X(LSIM_E_FID_RECORDED,       -793, "E_FID_RECORDED")
