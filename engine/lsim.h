/*
** lsim.h: the vocabulary every lorasim layer shares.
**
** Errors are values.  A function that can fail returns an lsim_err: 0 on
** success, a negative LSIM_E_* code on failure, and writes a one-line,
** lowercase message without a full stop into the caller's lsim_errbuf (which
** may be NULL when the caller only wants the code).  The numeric codes and
** their names are stable: scripts and tests match on the names printed by
** lsim_err_name(), so a code is never renumbered or reused.
**
** Time is an integer tick count (lsim_tick).  The scenario fixes how many
** nanoseconds one tick is; nothing below sim/ knows about wall time.
*/
#ifndef LSIM_H
#define LSIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LSIM_VERSION "0.1.0"

typedef int64_t lsim_tick;   /* simulated time, in ticks */
typedef int lsim_err;        /* 0 ok, negative LSIM_E_* */

/*
** Stable error codes.  Append only; never renumber.  Groups:
**   -1..-19   generic
**   -20..-59  scenario files (JSON path in the message)
**   -60..-79  trace files (file:line in the message)
**   -80..-99  runtime / engine / backend
**   -100..-159 planner metadata (err_plan.h)
**   -160..-199 exact tensors (err_tensor.h)
**   -200..-299 identities and generations (err_id.h)
**   -300..-349 `lorasim exec` input (err_exec.h)
**   -350..-419 residency, pool, hotswap (err_res.h)
**   -420..-499 KV compatibility and the prefix cache (err_kv.h)
**   -500..-559 collection compression (err_cmp.h)
**   -560..-619 tensor-parallel placement (err_tp.h)
**   -620..-659 device adapter pool, calibration (err_dev.h)
**   -660..-699 event-log audit (err_log.h)
**   -700..-719 JSON input layer and whole-file reads (err_json.h)
**   -720..-739 output files: paths refused, writes failed, locks (err_out.h)
**   -760..-779 run identity and resume (err_run.h)
**   -780..-789 sweeps (err_sweep.h)
**   -790..-799 the fidelity report (err_fid.h)
** Claim audit (sim/audit.c, docs/RELIABILITY.md): -84..-86 below.
*/
#define LSIM_ERRCODES(X)                                                    \
  X(LSIM_E_NOMEM,            -1,  "E_NOMEM")                                \
  X(LSIM_E_IO,               -2,  "E_IO")                                   \
  X(LSIM_E_USAGE,            -3,  "E_USAGE")                                \
  X(LSIM_E_DB,               -4,  "E_DB")                                   \
  X(LSIM_E_INTERRUPTED,      -5,  "E_INTERRUPTED")                          \
  X(LSIM_E_BUG,              -6,  "E_BUG")                                  \
  X(LSIM_E_SCN_JSON,         -20, "E_SCN_JSON")                             \
  X(LSIM_E_SCN_UNKNOWN_KEY,  -21, "E_SCN_UNKNOWN_KEY")                      \
  X(LSIM_E_SCN_TYPE,         -22, "E_SCN_TYPE")                             \
  X(LSIM_E_SCN_RANGE,        -23, "E_SCN_RANGE")                            \
  X(LSIM_E_SCN_MISSING,      -24, "E_SCN_MISSING")                          \
  X(LSIM_E_SCN_POLICY,       -25, "E_SCN_POLICY")                           \
  X(LSIM_E_SCN_BACKEND,      -26, "E_SCN_BACKEND")                          \
  X(LSIM_E_SCN_DUP,          -27, "E_SCN_DUP")                              \
  X(LSIM_E_SCN_EMPTY,        -28, "E_SCN_EMPTY")                            \
  X(LSIM_E_SCN_CONFLICT,     -29, "E_SCN_CONFLICT")                         \
  X(LSIM_E_SCN_NOT_INTEGER,  -30, "E_SCN_NOT_INTEGER")                      \
  X(LSIM_E_SCN_TRACE_FILE,   -31, "E_SCN_TRACE_FILE")                       \
  X(LSIM_E_SCN_DIST,         -32, "E_SCN_DIST")                             \
  X(LSIM_E_SCN_CAPACITY,     -33, "E_SCN_CAPACITY")                         \
  X(LSIM_E_SCN_MODE,         -34, "E_SCN_MODE")                             \
  X(LSIM_E_SCN_MODE_BACKEND, -35, "E_SCN_MODE_BACKEND")                     \
  X(LSIM_E_SCN_MODE_TP,      -36, "E_SCN_MODE_TP")                          \
  X(LSIM_E_SCN_MODE_DEVICE,  -37, "E_SCN_MODE_DEVICE")                      \
  X(LSIM_E_TRACE_PARSE,      -60, "E_TRACE_PARSE")                          \
  X(LSIM_E_TRACE_ORDER,      -61, "E_TRACE_ORDER")                          \
  X(LSIM_E_TRACE_RANGE,      -62, "E_TRACE_RANGE")                          \
  X(LSIM_E_TRACE_MISSING,    -63, "E_TRACE_MISSING")                        \
  X(LSIM_E_TRACE_UNKNOWN,    -64, "E_TRACE_UNKNOWN")                        \
  X(LSIM_E_TRACE_MISMATCH,   -65, "E_TRACE_MISMATCH")                       \
  X(LSIM_E_TRACE_ALIAS,      -66, "E_TRACE_ALIAS")                          \
  X(LSIM_E_BACKEND,          -80, "E_BACKEND")                              \
  X(LSIM_E_POLICY,           -81, "E_POLICY")                               \
  X(LSIM_E_STATE,            -82, "E_STATE")                                \
  X(LSIM_E_NOSPACE,          -83, "E_NOSPACE")                            \
  X(LSIM_E_CLAIM_CEILING,    -84, "E_CLAIM_CEILING")                      \
  X(LSIM_E_CLAIM_CLASS,      -85, "E_CLAIM_CLASS")                        \
  X(LSIM_E_CLAIM_MISSING,    -86, "E_CLAIM_MISSING")

#include "err_dev.h"
#include "err_cmp.h"
#include "err_exec.h"
#include "err_fid.h"
#include "err_id.h"
#include "err_json.h"
#include "err_kv.h"
#include "err_log.h"
#include "err_out.h"
#include "err_plan.h"
#include "err_res.h"
#include "err_run.h"
#include "err_sweep.h"
#include "err_tensor.h"
#include "err_tp.h"

/* Every code of every domain, for enumeration (lsim_err_name, docs). */
#define LSIM_ERRCODES_ALL(X) \
  LSIM_ERRCODES(X)           \
  LSIM_ERRCODES_PLAN(X)      \
  LSIM_ERRCODES_TENSOR(X)    \
  LSIM_ERRCODES_ID(X)        \
  LSIM_ERRCODES_EXEC(X)      \
  LSIM_ERRCODES_RES(X)       \
  LSIM_ERRCODES_DEV(X)       \
  LSIM_ERRCODES_KV(X)        \
  LSIM_ERRCODES_CMP(X)       \
  LSIM_ERRCODES_TP(X)        \
  LSIM_ERRCODES_LOG(X)       \
  LSIM_ERRCODES_OUT(X) \
  LSIM_ERRCODES_RUN(X) \
  LSIM_ERRCODES_JSON(X) \
  LSIM_ERRCODES_SWEEP(X)     \
  LSIM_ERRCODES_FID(X)

enum {
#define LSIM__ENUM(sym, val, name) sym = val,
  LSIM_OK = 0,
  LSIM_ERRCODES_ALL(LSIM__ENUM)
#undef LSIM__ENUM
};

/* The stable name of an error code ("E_SCN_RANGE"); "E_UNKNOWN" otherwise. */
const char *lsim_err_name(lsim_err code);

/* A caller-owned message buffer.  LSIM_ERRBUF_INIT zero-fills it. */
typedef struct lsim_errbuf {
  lsim_err code;
  char msg[512];
} lsim_errbuf;
#define LSIM_ERRBUF_INIT {0, {0}}

/*
** Record an error in eb (when eb is not NULL) and return code, so that
** callers can write `return lsim_fail(eb, LSIM_E_IO, "open %s", path);`.
*/
lsim_err lsim_fail(lsim_errbuf *eb, lsim_err code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/*
** LSIM_BUG: an invariant that the code itself broke (never bad input).
** Library code reports it as LSIM_E_BUG through the errbuf; it does not
** abort, so the caller can still flush and mark the run failed.
*/
#define LSIM_BUG(eb, what) \
  lsim_fail((eb), LSIM_E_BUG, "bug: %s (%s:%d)", (what), __FILE__, __LINE__)

#ifdef __cplusplus
}
#endif

#endif /* LSIM_H */
