/*
** h2d.h: timing host-to-device copies and naming the device, for
** `lorasim profile` (sim/profile_cmd.c, docs/PROFILE.md).  Built only with
** CUDA.
*/
#ifndef LSIM_CUDA_H2D_H
#define LSIM_CUDA_H2D_H

#include <stddef.h>
#include <stdint.h>

#include "../../engine/lsim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Time `reps` copies of `bytes` from pinned host memory to device memory,
** each cudaMemcpyAsync on a stream of its own between two CUDA events:
** ns[0..reps) (reps <= 64).  The buffers are allocated for the call and
** freed after it.  E_BACKEND on a CUDA failure, E_USAGE for bad arguments. */
lsim_err lsim_cuda_h2d_time(size_t bytes, int reps, int64_t *ns,
                            lsim_errbuf *eb);

/* Device 0's name, the driver and runtime versions (CUDA's integers, e.g.
** 12080) and its memory in bytes; 0, or -1 with name "unknown". */
int lsim_cuda_gpu_info(char *name, size_t n, int *driver, int *runtime,
                       int64_t *mem);

#ifdef __cplusplus
}
#endif

#endif /* LSIM_CUDA_H2D_H */
