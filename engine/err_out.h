/*
** err_out.h: output files (sim/outfile.c, docs/RELIABILITY.md "Output
** guarantees").  Append only; never renumber.  Range -720..-739.
*/
#ifndef LSIM_ERR_OUT_H
#define LSIM_ERR_OUT_H

#define LSIM_ERRCODES_OUT(X)                                                \
  X(LSIM_E_OUT_SYMLINK,      -720, "E_OUT_SYMLINK")                         \
  X(LSIM_E_OUT_NOT_REGULAR,  -721, "E_OUT_NOT_REGULAR")                     \
  X(LSIM_E_OUT_NOT_DB,       -722, "E_OUT_NOT_DB")                          \
  X(LSIM_E_OUT_WRITE,        -723, "E_OUT_WRITE")                           \
  X(LSIM_E_OUT_LOCKED,       -724, "E_OUT_LOCKED")                          \
  X(LSIM_E_OUT_NO_DIR,       -725, "E_OUT_NO_DIR")

#endif /* LSIM_ERR_OUT_H */
