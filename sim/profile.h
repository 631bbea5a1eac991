/*
** profile.h: cost profiles (docs/CUDA.md, "Calibration").
**
** A cost profile is a JSON file holding the five coefficients of the
** iteration cost model (backends/backend.h, lsim_cost_model) fitted to
** device times measured on the GPU:
**
**   {"lorasim_profile": 1,
**    "cost": {"iter_fixed_ns": N, "prefill_token_ns": N,
**             "decode_token_ns": N, "segment_ns": N, "rank_row_ps": N},
**    ...}   (other keys describe the fit and are ignored when loading)
**
** A scenario names one with $.cost.profile, or `lorasim replay --profile
** FILE` does; its coefficients then replace $.cost's, for the iteration
** time of every backend and the backend_ns of the `model` backend.
*/
#ifndef LSIM_PROFILE_H
#define LSIM_PROFILE_H

#include "../backends/backend.h"
#include "../engine/lsim.h"

/* Read a profile.  E_IO (unreadable), E_DEV_PROFILE (not JSON, no
** "lorasim_profile": 1, a missing or negative coefficient), naming the file
** and the JSON path. */
lsim_err lsim_profile_load(const char *path, lsim_cost_model *out,
                           lsim_errbuf *eb);

#endif /* LSIM_PROFILE_H */
