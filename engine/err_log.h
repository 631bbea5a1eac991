/*
** err_log.h: stable error codes of the event-log audit (engine/ledger.c):
** the publication events and request records of one run checked against
** the scheduler, recovery and lifecycle contracts they publish.
** Range -660..-699.  Append only; never renumber.  docs/RELIABILITY.md
** ("Event-log audit") has the table with the meaning of each code.
*/
#define LSIM_ERRCODES_LOG(X)                                                \
  X(LSIM_E_LOG_ORDER,          -660, "E_LOG_ORDER")                         \
  X(LSIM_E_LOG_KIND,           -661, "E_LOG_KIND")                          \
  X(LSIM_E_LOG_FIELD,          -662, "E_LOG_FIELD")                         \
  X(LSIM_E_LOG_UNKNOWN_REQUEST, -663, "E_LOG_UNKNOWN_REQUEST")              \
  X(LSIM_E_LOG_IDENTITY,       -664, "E_LOG_IDENTITY")                      \
  X(LSIM_E_LOG_AFTER_CLOSE,    -665, "E_LOG_AFTER_CLOSE")                   \
  X(LSIM_E_LOG_DUP_REQUEST,    -666, "E_LOG_DUP_REQUEST")                   \
  X(LSIM_E_LOG_ITERATION,      -667, "E_LOG_ITERATION")                     \
  X(LSIM_E_LOG_PHANTOM_SERVICE, -668, "E_LOG_PHANTOM_SERVICE")              \
  X(LSIM_E_LOG_SERVICE_EXCESS, -669, "E_LOG_SERVICE_EXCESS")                \
  X(LSIM_E_LOG_ATTEMPT,        -670, "E_LOG_ATTEMPT")                       \
  X(LSIM_E_LOG_LOAD_ORPHAN,    -671, "E_LOG_LOAD_ORPHAN")                   \
  X(LSIM_E_LOG_GENERATION,     -672, "E_LOG_GENERATION")                    \
  X(LSIM_E_LOG_PUBLISH_ORDER,  -673, "E_LOG_PUBLISH_ORDER")                 \
  X(LSIM_E_LOG_ROLLBACK,       -674, "E_LOG_ROLLBACK")                      \
  X(LSIM_E_LOG_NOT_READY,      -675, "E_LOG_NOT_READY")                     \
  X(LSIM_E_LOG_KV_ORPHAN,      -676, "E_LOG_KV_ORPHAN")                     \
  X(LSIM_E_LOG_AGE_RESET,      -677, "E_LOG_AGE_RESET")                     \
  X(LSIM_E_LOG_RECORD,         -678, "E_LOG_RECORD")                        \
  X(LSIM_E_LOG_LEASE,          -679, "E_LOG_LEASE")                         \
  X(LSIM_E_LOG_HOTSWAP_ORDER,  -680, "E_LOG_HOTSWAP_ORDER")                 \
  X(LSIM_E_LOG_CATALOG,        -681, "E_LOG_CATALOG")                       \
  X(LSIM_E_LOG_RECLAIM,        -682, "E_LOG_RECLAIM")                       \
  X(LSIM_E_LOG_PREFIX,         -683, "E_LOG_PREFIX")
