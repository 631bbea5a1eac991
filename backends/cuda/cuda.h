/*
** cuda.h: what the CUDA build offers the rest of lorasim so far.
**
** Built only when nvcc is found (CMake defines LSIM_HAVE_CUDA).  The
** segmented LoRA kernels arrive with the CUDA backend issue; this file
** holds the device probe and a self-test that exercises the whole path
** (allocation, copies, a kernel launch, error checks) on the GPU.
** Every CUDA call is checked; a failure becomes LSIM_E_BACKEND with the
** CUDA error string, never an abort.
*/
#ifndef LSIM_CUDA_H
#define LSIM_CUDA_H

#include <stddef.h>

#include "../../engine/lsim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Number of visible CUDA devices (0 when none or no driver), and a one-line
** description of device 0 (or of why there is none) in buf. */
int lsim_cuda_describe(char *buf, size_t n);

/* Run a checked kernel over n elements on device 0 and compare the result
** with the CPU exactly.  LSIM_E_BACKEND on any CUDA error or mismatch. */
lsim_err lsim_cuda_selftest(int n, lsim_errbuf *eb);

#ifdef __cplusplus
}
#endif

#endif /* LSIM_CUDA_H */
