/*
** err_plan.h: stable error codes of the iteration planner and its launch
** metadata (row expansion, permutation, segments, indexed metadata, rank
** buckets, sampling map).  Range -100..-159.  Append only; never renumber.
** Included by lsim.h; see lsim.h for how codes are used.
*/
#define LSIM_ERRCODES_PLAN(X)                                               \
  X(LSIM_E_PLAN_EMPTY_PREFILL, -100, "E_PLAN_EMPTY_PREFILL")                \
  X(LSIM_E_PLAN_DECODE_ROWS,   -101, "E_PLAN_DECODE_ROWS")                  \
  X(LSIM_E_PLAN_PHASE_ORDER,   -102, "E_PLAN_PHASE_ORDER")                  \
  X(LSIM_E_PLAN_PACKED_ORDER,  -103, "E_PLAN_PACKED_ORDER")                 \
  X(LSIM_E_PLAN_DUP_REQUEST,   -104, "E_PLAN_DUP_REQUEST")                  \
  X(LSIM_E_PLAN_ROW_DUP,       -105, "E_PLAN_ROW_DUP")                      \
  X(LSIM_E_PLAN_ROW_MISSING,   -106, "E_PLAN_ROW_MISSING")                  \
  X(LSIM_E_PLAN_ROW_BOUNDS,    -107, "E_PLAN_ROW_BOUNDS")                   \
  X(LSIM_E_PLAN_BASE_ROW,      -108, "E_PLAN_BASE_ROW")                     \
  X(LSIM_E_PLAN_SEG_ADAPTER,   -109, "E_PLAN_SEG_ADAPTER")                  \
  X(LSIM_E_PLAN_OFFSETS,       -110, "E_PLAN_OFFSETS")                      \
  X(LSIM_E_PLAN_PTR_COUNT,     -111, "E_PLAN_PTR_COUNT")                    \
  X(LSIM_E_PLAN_INDPTR,        -112, "E_PLAN_INDPTR")                       \
  X(LSIM_E_PLAN_DOFF,          -113, "E_PLAN_DOFF")                         \
  X(LSIM_E_PLAN_ROW_COUNT,     -114, "E_PLAN_ROW_COUNT")                    \
  X(LSIM_E_PLAN_EXPANSION,     -115, "E_PLAN_EXPANSION")                    \
  X(LSIM_E_PLAN_SAMPLE_ROWS,   -116, "E_PLAN_SAMPLE_ROWS")                  \
  X(LSIM_E_PLAN_INVERSE,       -117, "E_PLAN_INVERSE")                      \
  X(LSIM_E_PLAN_INDEXED,       -118, "E_PLAN_INDEXED")                      \
  X(LSIM_E_PLAN_RANK,          -119, "E_PLAN_RANK")                         \
  X(LSIM_E_PLAN_RANK_SLOT,     -120, "E_PLAN_RANK_SLOT")                    \
  X(LSIM_E_PLAN_BUCKET,        -121, "E_PLAN_BUCKET")                       \
  X(LSIM_E_PLAN_FIXED_RANK,    -122, "E_PLAN_FIXED_RANK")                   \
  X(LSIM_E_PLAN_UNKNOWN_ADAPTER, -123, "E_PLAN_UNKNOWN_ADAPTER")            \
  X(LSIM_E_PLAN_EMPTY_SEGMENT, -124, "E_PLAN_EMPTY_SEGMENT")                \
  X(LSIM_E_PLAN_RUNS,          -125, "E_PLAN_RUNS")                         \
  X(LSIM_E_PLAN_ROW_OWNER,     -126, "E_PLAN_ROW_OWNER")                    \
  X(LSIM_E_PLAN_REQ_COUNT,     -127, "E_PLAN_REQ_COUNT")                    \
  X(LSIM_E_PLAN_GROUP_ORDER,   -128, "E_PLAN_GROUP_ORDER")                  \
  X(LSIM_E_PLAN_LEDGER,        -129, "E_PLAN_LEDGER")
