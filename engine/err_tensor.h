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
**
** Codes from -174 on: the Loop 10 layouts (testsupport/repr.h):
**   E_REPR_SEGMENT         a segment or sub-batch offset vector does not
**                          start at 0, does not strictly increase, or runs
**                          past the rows
**   E_REPR_PERM            a permutation or gather vector is out of range,
**                          repeats a row, or is not stable within a group
**   E_REPR_SEG_IDENTITY    a row inside a segment belongs to another adapter
**   E_REPR_POINTER         a pointer-vector entry addresses no store entry,
**                          A and B pointers of one segment disagree, or two
**                          segments address one adapter
**   E_REPR_FIXED_RANK      mixed ranks in a one-rank (Punica) invocation
**   E_REPR_INDEX           a compact adapter index out of range, or the
**                          index -> adapter map not injective
**   E_REPR_LOCATION        a_start / a_len / a_loc inconsistent (start not
**                          a prefix sum, length != rank, cell outside the
**                          pool or shared), or a free list not a permutation
**   E_REPR_NAME            an adapter name unknown, empty, reserved or
**                          duplicated, or a row gathered under another name
**   E_REPR_REQUEST_ID      a request LoRA id neither -1 nor positive, not
**                          registered, or registered twice
**   E_REPR_SLOT            a token slot out of range, holding another id,
**                          an id active in two slots, or a rank record
**                          that disagrees with the slot table
**   E_REPR_METADATA        sorted rows / active ids / counts / starts
**                          inconsistent or not stable
**   E_REPR_SENTINEL        the -1 no-adapter sentinel broken: a -1 request
**                          mapped to a slot or an adapter request to -1
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
  X(LSIM_E_SLOT_RANK,          -173, "E_SLOT_RANK")                         \
  X(LSIM_E_REPR_SEGMENT,       -174, "E_REPR_SEGMENT")                      \
  X(LSIM_E_REPR_PERM,          -175, "E_REPR_PERM")                         \
  X(LSIM_E_REPR_SEG_IDENTITY,  -176, "E_REPR_SEG_IDENTITY")                 \
  X(LSIM_E_REPR_POINTER,       -177, "E_REPR_POINTER")                      \
  X(LSIM_E_REPR_FIXED_RANK,    -178, "E_REPR_FIXED_RANK")                   \
  X(LSIM_E_REPR_INDEX,         -179, "E_REPR_INDEX")                        \
  X(LSIM_E_REPR_LOCATION,      -180, "E_REPR_LOCATION")                     \
  X(LSIM_E_REPR_NAME,          -181, "E_REPR_NAME")                         \
  X(LSIM_E_REPR_REQUEST_ID,    -182, "E_REPR_REQUEST_ID")                   \
  X(LSIM_E_REPR_SLOT,          -183, "E_REPR_SLOT")                         \
  X(LSIM_E_REPR_METADATA,      -184, "E_REPR_METADATA")                     \
  X(LSIM_E_REPR_SENTINEL,      -185, "E_REPR_SENTINEL")
