/*
** gpu_exact.h: run an exactly specified adapter branch on the GPU and
** compare it with the exact reference.  Used by `lorasim exec --backend
** cuda` and by the `cuda` replay backend.  Built only with CUDA.
*/
#ifndef LSIM_GPU_EXACT_H
#define LSIM_GPU_EXACT_H

#include "../cpu_ref/cpu_ref.h"
#include "cuda.h"

/*
** The adapter branch of plan p on device 0 through cuda path `path`
** (enum lsim_cuda_path): X and the factors rounded to dtype (bf16 or
** fp16; X, the factors and the output share it), each scale to
** fp32, the delta accumulated into a zeroed output, which is returned in
** *D (T x d_out, packed row order; initialised here) as the exact values
** of the GPU's floats.  *exact_in: 1 when every input, factor and scale
** was representable exactly.  *used_path: the path that ran (never AUTO).
** *ns: device time of the launches in ns, between two CUDA events
** recorded on the context's stream around them.
*/
lsim_err lsim_cuda_exact_delta(const lsim_rowplan *p, const lsim_qmat *X,
                               const lsim_qadapter *ad, int nad, int d_in,
                               int d_out, int dtype, int path, lsim_qmat *D,
                               int *exact_in, int *used_path, int64_t *ns,
                               lsim_errbuf *eb);

/* 1 when every entry of m is exactly representable in dtype (enum
** lsim_cuda_dtype): only then can a 16-bit output equal it bit for bit. */
int lsim_q_representable(const lsim_qmat *m, int dtype);

/* Normwise errors of got against the exact ref: max |got - ref| and that
** over max |ref| (0 when both are all zero; infinity when only ref is). */
void lsim_q_errors(const lsim_qmat *got, const lsim_qmat *ref, double *abs_err,
                   double *rel_err, int *exact);

#endif /* LSIM_GPU_EXACT_H */
