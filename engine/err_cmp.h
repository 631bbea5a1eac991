/*
** err_cmp.h: stable error codes of collection compression (JD-Full and
** JD-Diag shared-basis adapters): conversion input, fitting, the exact
** checks, the parameter ledger, bundle identity and the serving catalog of
** a compressed collection.  Range -500..-559.  Append only; never
** renumber.  docs/COMPRESSION.md has the table with the meaning of each
** code and the failure it closes.
*/
#define LSIM_ERRCODES_CMP(X)                                                \
  X(LSIM_E_CMP_JSON,           -500, "E_CMP_JSON")                          \
  X(LSIM_E_CMP_TYPE,           -501, "E_CMP_TYPE")                          \
  X(LSIM_E_CMP_MISSING,        -502, "E_CMP_MISSING")                       \
  X(LSIM_E_CMP_UNKNOWN_KEY,    -503, "E_CMP_UNKNOWN_KEY")                   \
  X(LSIM_E_CMP_SHAPE,          -504, "E_CMP_SHAPE")                         \
  X(LSIM_E_CMP_ORIENTATION,    -505, "E_CMP_ORIENTATION")                   \
  X(LSIM_E_CMP_SOURCE_CHECK,   -506, "E_CMP_SOURCE_CHECK")                  \
  X(LSIM_E_CMP_ZERO_NORM,      -507, "E_CMP_ZERO_NORM")                     \
  X(LSIM_E_CMP_RANK,           -508, "E_CMP_RANK")                          \
  X(LSIM_E_CMP_CLUSTERS,       -509, "E_CMP_CLUSTERS")                      \
  X(LSIM_E_CMP_METHOD,         -510, "E_CMP_METHOD")                        \
  X(LSIM_E_CMP_DUP_SOURCE,     -511, "E_CMP_DUP_SOURCE")                    \
  X(LSIM_E_CMP_NO_BREAKEVEN,   -512, "E_CMP_NO_BREAKEVEN")                  \
  X(LSIM_E_CMP_OVERFLOW,       -513, "E_CMP_OVERFLOW")                      \
  X(LSIM_E_CMP_LAPACK,         -514, "E_CMP_LAPACK")                        \
  X(LSIM_E_CMP_NOT_ORTHONORMAL, -515, "E_CMP_NOT_ORTHONORMAL")              \
  X(LSIM_E_CMP_NONFINITE,      -516, "E_CMP_NONFINITE")                     \
  X(LSIM_E_CMP_BUNDLE_DIGEST,  -517, "E_CMP_BUNDLE_DIGEST")                 \
  X(LSIM_E_CMP_STALE_BASIS,    -518, "E_CMP_STALE_BASIS")                   \
  X(LSIM_E_CMP_SOURCE_SET,     -519, "E_CMP_SOURCE_SET")                    \
  X(LSIM_E_CMP_PUBLISH_EARLY,  -520, "E_CMP_PUBLISH_EARLY")                 \
  X(LSIM_E_CMP_TP_SPLIT,       -521, "E_CMP_TP_SPLIT")                      \
  X(LSIM_E_CMP_BASIS_INFLIGHT, -522, "E_CMP_BASIS_INFLIGHT")                \
  X(LSIM_E_CMP_UNKNOWN_ADAPTER, -523, "E_CMP_UNKNOWN_ADAPTER")              \
  X(LSIM_E_CMP_STAGING,        -524, "E_CMP_STAGING")                       \
  X(LSIM_E_CMP_NO_CANDIDATE,   -525, "E_CMP_NO_CANDIDATE")                  \
  X(LSIM_E_CMP_ITERATIONS,     -526, "E_CMP_ITERATIONS")                    \
  X(LSIM_E_CMP_SYNTHETIC,      -527, "E_CMP_SYNTHETIC")                     \
  X(LSIM_E_CMP_REFCOUNT,       -528, "E_CMP_REFCOUNT")                      \
  X(LSIM_E_CMP_NOT_RESIDENT,   -529, "E_CMP_NOT_RESIDENT")                  \
  X(LSIM_E_CMP_BUNDLE,         -530, "E_CMP_BUNDLE")                        \
  X(LSIM_E_CMP_SERVE_CONFLICT, -531, "E_CMP_SERVE_CONFLICT")                \
  X(LSIM_E_CMP_SERVE_CAPACITY, -532, "E_CMP_SERVE_CAPACITY")                \
  X(LSIM_E_CMP_SERVE_MISMATCH, -533, "E_CMP_SERVE_MISMATCH")
