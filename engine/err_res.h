/*
** err_res.h: stable error codes of residency, the joint page pool,
** publication transactions, hotswap leases and merge/unmerge.
** Range -350..-419.  Append only; never renumber.  docs/RESIDENCY.md has
** the table with the meaning of each code and the fault it closes.
*/
#define LSIM_ERRCODES_RES(X)                                                \
  X(LSIM_E_RES_ILLEGAL,        -350, "E_RES_ILLEGAL")                       \
  X(LSIM_E_RES_NOSPACE,        -351, "E_RES_NOSPACE")                       \
  X(LSIM_E_RES_NOT_ELIGIBLE,   -352, "E_RES_NOT_ELIGIBLE")                  \
  X(LSIM_E_RES_PUBLISH_EARLY,  -353, "E_RES_PUBLISH_EARLY")                 \
  X(LSIM_E_RES_DIGEST,         -354, "E_RES_DIGEST")                        \
  X(LSIM_E_RES_KERNEL_ABI,     -355, "E_RES_KERNEL_ABI")                    \
  X(LSIM_E_RES_IDENTITY,       -356, "E_RES_IDENTITY")                      \
  X(LSIM_E_RES_OWNERSHIP,      -357, "E_RES_OWNERSHIP")                     \
  X(LSIM_E_RES_DOUBLE_OWNER,   -358, "E_RES_DOUBLE_OWNER")                  \
  X(LSIM_E_RES_CONSERVATION,   -359, "E_RES_CONSERVATION")                  \
  X(LSIM_E_RES_GROWTH,         -360, "E_RES_GROWTH")                        \
  X(LSIM_E_RES_REFCOUNT,       -361, "E_RES_REFCOUNT")                      \
  X(LSIM_E_RES_EVENT_PENDING,  -362, "E_RES_EVENT_PENDING")                 \
  X(LSIM_E_RES_STALE_GEN,      -363, "E_RES_STALE_GEN")                     \
  X(LSIM_E_RES_STALE_HANDLE,   -364, "E_RES_STALE_HANDLE")                  \
  X(LSIM_E_RES_REBIND,         -365, "E_RES_REBIND")                        \
  X(LSIM_E_RES_CATALOG_CAS,    -366, "E_RES_CATALOG_CAS")                   \
  X(LSIM_E_RES_POST_PUBLISH,   -367, "E_RES_POST_PUBLISH")                  \
  X(LSIM_E_RES_SHADOW,         -368, "E_RES_SHADOW")                        \
  X(LSIM_E_RES_PAD_TAIL,       -369, "E_RES_PAD_TAIL")                      \
  X(LSIM_E_RES_MISSING_KEY,    -370, "E_RES_MISSING_KEY")                   \
  X(LSIM_E_RES_RETIRING,       -371, "E_RES_RETIRING")                      \
  X(LSIM_E_RES_TXN,            -372, "E_RES_TXN")                           \
  X(LSIM_E_RES_HOST_SOURCE,    -373, "E_RES_HOST_SOURCE")                   \
  X(LSIM_E_RES_LEAK,           -374, "E_RES_LEAK")                          \
  X(LSIM_E_RES_BACKWARD,       -375, "E_RES_BACKWARD")                      \
  X(LSIM_E_RES_UNMERGE_INEXACT, -376, "E_RES_UNMERGE_INEXACT")              \
  X(LSIM_E_RES_PARTIAL_MERGE,  -377, "E_RES_PARTIAL_MERGE")                 \
  X(LSIM_E_RES_DUP_VICTIM,     -378, "E_RES_DUP_VICTIM")                    \
  X(LSIM_E_RES_LIVE_LAUNCH,    -379, "E_RES_LIVE_LAUNCH")                   \
  X(LSIM_E_RES_INFLIGHT,       -380, "E_RES_INFLIGHT")                      \
  X(LSIM_E_RES_PINNED,         -381, "E_RES_PINNED")                        \
  X(LSIM_E_RES_QUEUED,         -382, "E_RES_QUEUED")                        \
  X(LSIM_E_RES_COPY,           -383, "E_RES_COPY")                          \
  X(LSIM_E_RES_LAYOUT,         -384, "E_RES_LAYOUT")                        \
  X(LSIM_E_RES_SLOTS,          -385, "E_RES_SLOTS")
