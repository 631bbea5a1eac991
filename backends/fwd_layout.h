/*
** fwd_layout.h: the host side of the whole-model executor that needs no
** GPU (backends/cuda/fwd.h runs it): where a whole-model adapter's factor
** rows sit in its engine pages, their values, the token ids the executor
** feeds and the RoPE frequencies.  Compiled in every build, so CI checks
** the layout without a device.  docs/CUDA.md, "The whole-model executor".
*/
#ifndef LSIM_FWD_LAYOUT_H
#define LSIM_FWD_LAYOUT_H

#include <stdint.h>

#include "../engine/lsim.h"
#include "shape.h"

#define LSIM_FWD_UNIT 128 /* bytes: rows start on this boundary; page-table
                             entries count these units from the pool */
#define LSIM_FWD_MODS 7   /* q k v o gate up down (enum lsim_shape_module) */
#define LSIM_FWD_NNZ 16   /* non-zeros per A row */

/* Bytes of a factor row of d elements in the image: 2 d rounded up to a
** whole number of units. */
int64_t lsim_fwd_row_bytes(int64_t d);

/*
** The layout of one whole-model adapter of rank r (layers 0..layers-1,
** every module of `mods`, bit m = enum lsim_shape_module m) in npages
** pages of page_bytes: every factor row (A: r rows of d_in, B^T: r rows of
** d_out, each lsim_fwd_row_bytes wide) is placed whole in one page, the
** widest rows first, each into the first page with room (first-fit
** decreasing); no row straddles a page.  off (may be NULL) gets, per
** (layer l, module m, row k < 2r: the A rows then the B^T rows), the row's
** byte offset in the image of npages * page_bytes bytes (page i of the
** image is the adapter's i-th engine page): off[(l * 7 + m) * 2 * r + k]
** (entries of modules outside mods left untouched).  *used (may be NULL)
** the pages it fills.  E_STAGE_FIT when the rows do not fit npages pages
** (the message gives what they need); E_USAGE for a bad shape, rank or
** page size.
*/
lsim_err lsim_fwd_layout(const lsim_model_shape *s, int layers, unsigned mods,
                         int r, int64_t page_bytes, int64_t npages,
                         int64_t *off, int64_t *used, lsim_errbuf *eb);

/* Bytes of an adapter's factors: r (d_in + d_out) per module and layer,
** 2 bytes each, the figure the engine's page count is made from. */
int64_t lsim_fwd_adapter_bytes(const lsim_model_shape *s, int layers,
                               unsigned mods, int r);

/*
** The factor values of artifact `art`, version `ver`, written into its
** image at the layout's offsets (the caller zeroes the image first, so
** padding is zero): A rows carry LSIM_FWD_NNZ entries of +-2^-4 at seeded
** positions, B entries are 2^-6 times {-1, 0, 1}, the scale is
** lsim_fwd_scale() = 1/2 -- dyadic values, so that the delta of an
** integer-valued input is computed exactly by the kernels (the integer
** verify mode), while on real activations it is about 1% of the base
** output.  bf16 bit patterns.  The stream is LSIM_RNG_TENSORS keyed by
** (seed, art, ver, layer, module).
*/
float lsim_fwd_scale(void);
void lsim_fwd_factors(const lsim_model_shape *s, int layers, unsigned mods,
                      int r, uint64_t seed, int art, int ver,
                      const int64_t *off, uint16_t *image);

/* The token id the executor feeds for position pos of request req:
** seeded, uniform over the vocabulary (a decode row does not feed back
** the sampled token: the work is the same, and runs stay reproducible). */
int32_t lsim_fwd_token_id(uint64_t seed, int64_t req, int64_t pos,
                          int64_t vocab);

/* RoPE inverse frequencies of the shape, head_dim / 2 values: theta^(-2i /
** head_dim), with Llama 3.1's band rescaling when the shape's
** rope.scaling is llama3. */
void lsim_fwd_rope_freqs(const lsim_model_shape *s, double *inv_freq);

/* A 64-bit mix (splitmix64's finaliser), shared by the host and the
** device weight generator. */
static inline uint64_t lsim_fwd_mix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

#endif /* LSIM_FWD_LAYOUT_H */
