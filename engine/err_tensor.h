/*
** err_tensor.h: stable error codes of exact tensor execution (cpu_ref and
** the checks every backend's results go through).  Range -160..-199.
** Append only; never renumber.
**
** Codes from -170 on (backends/cpu_ref/cpu_ref.h documents when each fires):
**   E_REF_UNKNOWN_ADAPTER  a plan row names an adapter id the caller supplied
**                          no factors for
**   E_REF_DUP_ADAPTER      two supplied adapters (or slots) share one id
**   E_REF_RANK             an adapter's factor rank disagrees with the
**                          logical rank the plan froze for its rows
**   E_SLOT_RANK            a logical rank above the physical slot rank R
*/
#define LSIM_ERRCODES_TENSOR(X)                                             \
  X(LSIM_E_SHAPE,              -160, "E_SHAPE")                             \
  X(LSIM_E_ORIENTATION,        -161, "E_ORIENTATION")                       \
  X(LSIM_E_SCALE_PLACEMENT,    -162, "E_SCALE_PLACEMENT")                   \
  X(LSIM_E_PAD_NONZERO,        -163, "E_PAD_NONZERO")                       \
  X(LSIM_E_PATH_MISMATCH,      -164, "E_PATH_MISMATCH")                     \
  X(LSIM_E_SCATTER,            -165, "E_SCATTER")                           \
  X(LSIM_E_BASE_DELTA,         -166, "E_BASE_DELTA")                        \
  X(LSIM_E_OVERFLOW,           -167, "E_OVERFLOW")                          \
  X(LSIM_E_RATIONAL,           -168, "E_RATIONAL")                          \
  X(LSIM_E_ZERO_DENOM,         -169, "E_ZERO_DENOM")                        \
  X(LSIM_E_REF_UNKNOWN_ADAPTER, -170, "E_REF_UNKNOWN_ADAPTER")              \
  X(LSIM_E_REF_DUP_ADAPTER,    -171, "E_REF_DUP_ADAPTER")                   \
  X(LSIM_E_REF_RANK,           -172, "E_REF_RANK")                          \
  X(LSIM_E_SLOT_RANK,          -173, "E_SLOT_RANK")
