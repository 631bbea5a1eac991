/*
** err_tp.h: stable error codes of tensor-parallel adapter placement (the
** TP manifest, its collectives, the per-rank ledgers and the distributed
** generation snapshot; engine/tp.h) and of the sharded exact reference
** (backends/cpu_ref/tp.h).  Range -560..-619.
** Append only; never renumber.  docs/TP.md has the table with the meaning
** of each code.
*/
#define LSIM_ERRCODES_TP(X)                                                 \
  X(LSIM_E_TP_WORLD,           -560, "E_TP_WORLD")                          \
  X(LSIM_E_TP_DIV,             -561, "E_TP_DIV")                            \
  X(LSIM_E_TP_NO_GATHER,       -562, "E_TP_NO_GATHER")                      \
  X(LSIM_E_TP_CONCAT_PARTIALS, -563, "E_TP_CONCAT_PARTIALS")                \
  X(LSIM_E_TP_REDUCTION,       -564, "E_TP_REDUCTION")                      \
  X(LSIM_E_TP_STALE_MANIFEST,  -565, "E_TP_STALE_MANIFEST")                 \
  X(LSIM_E_TP_MIXED_GEN,       -566, "E_TP_MIXED_GEN")                      \
  X(LSIM_E_TP_INDEPENDENT,     -567, "E_TP_INDEPENDENT")                    \
  X(LSIM_E_TP_FIELD,           -568, "E_TP_FIELD")                          \
  X(LSIM_E_TP_SHAPE,           -569, "E_TP_SHAPE")                          \
  X(LSIM_E_TP_ORDER,           -570, "E_TP_ORDER")                          \
  X(LSIM_E_TP_FUSION,          -571, "E_TP_FUSION")                         \
  X(LSIM_E_TP_DTYPE,           -572, "E_TP_DTYPE")                          \
  X(LSIM_E_TP_UNPUBLISHED,     -573, "E_TP_UNPUBLISHED")                    \
  X(LSIM_E_TP_LEDGER,          -574, "E_TP_LEDGER")
