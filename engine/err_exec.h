/*
** err_exec.h: stable error codes of `lorasim exec` input (JSON batches).
** Range -300..-349.  Append only; never renumber.
*/
#define LSIM_ERRCODES_EXEC(X)                                               \
  X(LSIM_E_EXEC_JSON,          -300, "E_JSON")                              \
  X(LSIM_E_EXEC_TYPE,          -301, "E_TYPE")                              \
  X(LSIM_E_EXEC_MISSING,       -302, "E_MISSING")                           \
  X(LSIM_E_EXEC_UNKNOWN_KEY,   -303, "E_UNKNOWN_KEY")                       \
  X(LSIM_E_EXEC_DUP_ID,        -304, "E_DUP_ID")                            \
  X(LSIM_E_EXEC_UNKNOWN_ADAPTER, -305, "E_UNKNOWN_ADAPTER")                 \
  X(LSIM_E_EXEC_PATH,          -306, "E_PATH")                              \
  X(LSIM_E_EXEC_LIMIT,         -307, "E_EXEC_LIMIT")
