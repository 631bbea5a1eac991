/*
** err_id.h: stable error codes of identities, bindings and the generation
** vector checked at launch validation.  Range -200..-299.
** Append only; never renumber.  docs/IDENTITY.md has the table with the
** meaning of each code.
*/
#define LSIM_ERRCODES_ID(X)                                                 \
  X(LSIM_E_ID_CANON,           -200, "E_ID_CANON")                          \
  X(LSIM_E_ID_MISSING_DIGEST,  -201, "E_ID_MISSING_DIGEST")                 \
  X(LSIM_E_ID_NO_MODULES,      -202, "E_ID_NO_MODULES")                     \
  X(LSIM_E_ID_DUP_MODULE,      -203, "E_ID_DUP_MODULE")                     \
  X(LSIM_E_ID_RANK,            -204, "E_ID_RANK")                           \
  X(LSIM_E_ID_SHAPE,           -205, "E_ID_SHAPE")                          \
  X(LSIM_E_ID_FACTOR_MISSING,  -206, "E_ID_FACTOR_MISSING")                 \
  X(LSIM_E_ID_FACTOR_SIZE,     -207, "E_ID_FACTOR_SIZE")                    \
  X(LSIM_E_ID_DTYPE,           -208, "E_ID_DTYPE")                          \
  X(LSIM_E_ID_SCALING,         -209, "E_ID_SCALING")                        \
  X(LSIM_E_ID_ALPHA,           -210, "E_ID_ALPHA")                          \
  X(LSIM_E_ID_AXES,            -211, "E_ID_AXES")                           \
  X(LSIM_E_ID_INT_RANGE,       -212, "E_ID_INT_RANGE")                      \
  X(LSIM_E_ID_SHARD_WORLD,     -213, "E_ID_SHARD_WORLD")                    \
  X(LSIM_E_ID_SHARD_RANK,      -214, "E_ID_SHARD_RANK")                     \
  X(LSIM_E_ID_SHARD_AXIS,      -215, "E_ID_SHARD_AXIS")                     \
  X(LSIM_E_ID_SHARD_DIV,       -216, "E_ID_SHARD_DIV")                      \
  X(LSIM_E_ID_LAYOUT_AXES,     -217, "E_ID_LAYOUT_AXES")                    \
  X(LSIM_E_ID_LAYOUT_COVER,    -218, "E_ID_LAYOUT_COVER")                   \
  X(LSIM_E_ID_SHARD_RANGE,     -219, "E_ID_SHARD_RANGE")                    \
  X(LSIM_E_ID_LEDGER,          -220, "E_ID_LEDGER")                         \
  X(LSIM_E_ID_GEN_COMPONENT,   -221, "E_ID_GEN_COMPONENT")                  \
  X(LSIM_E_ID_GEN_OVERFLOW,    -222, "E_ID_GEN_OVERFLOW")                   \
  X(LSIM_E_ID_STALE_CATALOG,   -223, "E_ID_STALE_CATALOG")                  \
  X(LSIM_E_ID_STALE_ATTEMPT,   -224, "E_ID_STALE_ATTEMPT")                  \
  X(LSIM_E_ID_STALE_SLOT,      -225, "E_ID_STALE_SLOT")                     \
  X(LSIM_E_ID_STALE_PTABLE,    -226, "E_ID_STALE_PTABLE")                   \
  X(LSIM_E_ID_STALE_PLAN,      -227, "E_ID_STALE_PLAN")                     \
  X(LSIM_E_ID_STALE_CACHE,     -228, "E_ID_STALE_CACHE")                    \
  X(LSIM_E_ID_STALE_RNG,       -229, "E_ID_STALE_RNG")                      \
  X(LSIM_E_ID_REQ_BINDING,     -230, "E_ID_REQ_BINDING")                    \
  X(LSIM_E_ID_REQ_BASE,        -231, "E_ID_REQ_BASE")                       \
  X(LSIM_E_ID_REQ_SEMANTIC,    -232, "E_ID_REQ_SEMANTIC")                   \
  X(LSIM_E_ID_SLOT_BINDING,    -233, "E_ID_SLOT_BINDING")                   \
  X(LSIM_E_ID_SLOT_SEMANTIC,   -234, "E_ID_SLOT_SEMANTIC")                  \
  X(LSIM_E_ID_KERNEL_ABI,      -235, "E_ID_KERNEL_ABI")                     \
  X(LSIM_E_ID_CACHE_SEMANTIC,  -236, "E_ID_CACHE_SEMANTIC")                 \
  X(LSIM_E_ID_FACTOR_HASH,     -237, "E_ID_FACTOR_HASH")
