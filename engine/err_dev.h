/*
** err_dev.h: stable error codes of the device adapter pool (paged
** residency on the GPU, backends/cuda/pool.cu), of `lorasim calibrate`
** and cost profiles (-629, -640.., docs/PROFILE.md),
** and of the stage/retire protocol between the engine's residency and a
** backend (backends/backend.h, docs/ARCHITECTURE.md "Backends").
** Range -620..-659.  Append only; never renumber.  docs/CUDA.md has the
** table with the meaning of each code.
*/
#define LSIM_ERRCODES_DEV(X)                                                \
  X(LSIM_E_DEV_NOT_PUBLISHED,  -620, "E_DEV_NOT_PUBLISHED")                 \
  X(LSIM_E_DEV_PUBLISH_EARLY,  -621, "E_DEV_PUBLISH_EARLY")                 \
  X(LSIM_E_DEV_DIGEST,         -622, "E_DEV_DIGEST")                        \
  X(LSIM_E_DEV_CHECKSUM,       -623, "E_DEV_CHECKSUM")                      \
  X(LSIM_E_DEV_NOSPACE,        -624, "E_DEV_NOSPACE")                       \
  X(LSIM_E_DEV_STAGING,        -625, "E_DEV_STAGING")                       \
  X(LSIM_E_DEV_BUSY,           -626, "E_DEV_BUSY")                          \
  X(LSIM_E_DEV_NO_LOAD,        -627, "E_DEV_NO_LOAD")                       \
  X(LSIM_E_DEV_NO_DEVICE,      -628, "E_DEV_NO_DEVICE")                     \
  X(LSIM_E_DEV_PROFILE,        -629, "E_DEV_PROFILE")                      \
  X(LSIM_E_STAGE_LAUNCH,       -630, "E_STAGE_LAUNCH")                     \
  X(LSIM_E_STAGE_UNPUBLISHED,  -631, "E_STAGE_UNPUBLISHED")                \
  X(LSIM_E_STAGE_FENCE,        -632, "E_STAGE_FENCE")                      \
  X(LSIM_E_STAGE_ORDER,        -633, "E_STAGE_ORDER")                      \
  X(LSIM_E_STAGE_FIT,          -634, "E_STAGE_FIT")                        \
  X(LSIM_E_STAGE_PAGES,        -635, "E_STAGE_PAGES")                     \
  X(LSIM_E_DEV_FIT,            -636, "E_DEV_FIT")                          \
  X(LSIM_E_DEV_UNSUPPORTED,    -637, "E_DEV_UNSUPPORTED")                  \
  X(LSIM_E_DEV_PROFILE_SHAPE,  -640, "E_DEV_PROFILE_SHAPE")                \
  X(LSIM_E_DEV_PROFILE_NONE,   -641, "E_DEV_PROFILE_NONE")
