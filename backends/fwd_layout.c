/*
** fwd_layout.c: the whole-model adapter's layout in its engine pages, its
** factor values, the executor's token ids and RoPE frequencies
** (fwd_layout.h).
*/
#include "fwd_layout.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/rng.h"

int64_t lsim_fwd_row_bytes(int64_t d) {
  return (2 * d + LSIM_FWD_UNIT - 1) / LSIM_FWD_UNIT * LSIM_FWD_UNIT;
}

int64_t lsim_fwd_adapter_bytes(const lsim_model_shape *s, int layers,
                               unsigned mods, int r) {
  int64_t b = 0;
  for (int m = 0; m < LSIM_FWD_MODS; m++)
    if (mods >> m & 1u) {
      int64_t di, dout;
      lsim_shape_module_dims(s, m, &di, &dout);
      b += (int64_t)r * (di + dout) * 2;
    }
  return b * layers;
}

/* One class of rows of one width: (module, factor) pairs share it. */
typedef struct lsim__fl_class {
  int64_t w; /* row bytes */
} lsim__fl_class;

lsim_err lsim_fwd_layout(const lsim_model_shape *s, int layers, unsigned mods,
                         int r, int64_t page_bytes, int64_t npages,
                         int64_t *off, int64_t *used, lsim_errbuf *eb) {
  if (!s || !s->full || layers < 1 || layers > s->layers || r < 1 ||
      r > 4096 || page_bytes < LSIM_FWD_UNIT || page_bytes % LSIM_FWD_UNIT ||
      npages < 0 || (mods & ~((1u << LSIM_FWD_MODS) - 1u)))
    return lsim_fail(eb, LSIM_E_USAGE,
                     "adapter layout: bad shape, rank %d or page of %lld "
                     "bytes", r, (long long)page_bytes);
  /* the distinct row widths, widest first */
  int64_t wid[2 * LSIM_FWD_MODS];
  int nw = 0;
  for (int m = 0; m < LSIM_FWD_MODS; m++)
    if (mods >> m & 1u) {
      int64_t d[2];
      lsim_shape_module_dims(s, m, &d[0], &d[1]);
      for (int f = 0; f < 2; f++) {
        int64_t w = lsim_fwd_row_bytes(d[f]);
        if (w > page_bytes)
          return lsim_fail(eb, LSIM_E_STAGE_FIT,
                           "adapter layout: a factor row of %lld bytes is "
                           "wider than a page of %lld", (long long)w,
                           (long long)page_bytes);
        int k = 0;
        while (k < nw && wid[k] != w)
          k++;
        if (k == nw)
          wid[nw++] = w;
      }
    }
  for (int i = 1; i < nw; i++) /* descending */
    for (int j = i; j > 0 && wid[j] > wid[j - 1]; j--) {
      int64_t t = wid[j];
      wid[j] = wid[j - 1];
      wid[j - 1] = t;
    }
  int64_t *fill = calloc((size_t)(npages > 0 ? npages : 1), sizeof *fill);
  if (!fill)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  int64_t top = 0, placed = 0, need = 0;
  lsim_err rc = 0;
  for (int c = 0; c < nw && !rc; c++) {
    const int64_t w = wid[c];
    int64_t p = 0; /* pages before p have no room for w (fill only grows) */
    for (int l = 0; l < layers && !rc; l++)
      for (int m = 0; m < LSIM_FWD_MODS && !rc; m++) {
        if (!(mods >> m & 1u))
          continue;
        int64_t d[2];
        lsim_shape_module_dims(s, m, &d[0], &d[1]);
        for (int f = 0; f < 2 && !rc; f++) {
          if (lsim_fwd_row_bytes(d[f]) != w)
            continue;
          for (int k = 0; k < r; k++) {
            while (p < npages && page_bytes - fill[p] < w)
              p++;
            need += w;
            if (p == npages) {
              rc = LSIM_E_STAGE_FIT;
              continue; /* count what the rest would need */
            }
            if (off)
              off[((int64_t)l * LSIM_FWD_MODS + m) * 2 * r +
                  (int64_t)f * r + k] = p * page_bytes + fill[p];
            fill[p] += w;
            placed += w;
            if (p + 1 > top)
              top = p + 1;
          }
        }
      }
  }
  free(fill);
  if (used)
    *used = top;
  if (rc)
    return lsim_fail(eb, LSIM_E_STAGE_FIT,
                     "adapter layout: %lld bytes of factor rows (rank %d, "
                     "%d layers) do not fit %lld pages of %lld bytes with no "
                     "row across a page (%lld placed)", (long long)need, r,
                     layers, (long long)npages, (long long)page_bytes,
                     (long long)placed);
  return 0;
}

float lsim_fwd_scale(void) { return 0.5f; }

#define LSIM__BF_A_POS 0x3D80u /* +2^-4 in bf16 */
#define LSIM__BF_A_NEG 0xBD80u
#define LSIM__BF_B_POS 0x3C80u /* +2^-6 */
#define LSIM__BF_B_NEG 0xBC80u

void lsim_fwd_factors(const lsim_model_shape *s, int layers, unsigned mods,
                      int r, uint64_t seed, int art, int ver,
                      const int64_t *off, uint16_t *image) {
  static const uint16_t tern[4] = {0, LSIM__BF_B_POS, LSIM__BF_B_NEG, 0};
  unsigned char *img = (unsigned char *)image;
  for (int l = 0; l < layers; l++)
    for (int m = 0; m < LSIM_FWD_MODS; m++) {
      if (!(mods >> m & 1u))
        continue;
      int64_t di, dout;
      lsim_shape_module_dims(s, m, &di, &dout);
      lsim_rng g;
      uint64_t k = seed ^ 0xF0D1A7E5EEDull;
      k = lsim_fwd_mix(k ^ (uint64_t)(uint32_t)art);
      k = lsim_fwd_mix(k ^ ((uint64_t)(uint32_t)ver << 20));
      k = lsim_fwd_mix(k ^ ((uint64_t)l << 8 | (uint64_t)m));
      lsim_rng_init(&g, k, LSIM_RNG_TENSORS);
      const int64_t *o = off + ((int64_t)l * LSIM_FWD_MODS + m) * 2 * r;
      for (int i = 0; i < r; i++) {
        uint16_t *row = (uint16_t *)(img + o[i]);
        for (int z = 0; z < LSIM_FWD_NNZ; z++) {
          uint64_t u = lsim_rng_next(&g);
          row[(u >> 1) % (uint64_t)di] = (u & 1) ? LSIM__BF_A_POS
                                                 : LSIM__BF_A_NEG;
        }
      }
      for (int i = 0; i < r; i++) {
        uint16_t *row = (uint16_t *)(img + o[r + i]);
        for (int64_t c = 0; c < dout; c += 32) {
          uint64_t u = lsim_rng_next(&g);
          for (int64_t j = c; j < dout && j < c + 32; j++, u >>= 2)
            row[j] = tern[u & 3];
        }
      }
    }
}

int32_t lsim_fwd_token_id(uint64_t seed, int64_t req, int64_t pos,
                          int64_t vocab) {
  uint64_t h = lsim_fwd_mix(seed ^ 0x70CE1D5ull);
  h = lsim_fwd_mix(h ^ (uint64_t)req);
  h = lsim_fwd_mix(h ^ (uint64_t)pos);
  return vocab > 0 ? (int32_t)(h % (uint64_t)vocab) : 0;
}

void lsim_fwd_rope_freqs(const lsim_model_shape *s, double *inv_freq) {
  const int64_t d = s->head_dim;
  const double pi = 3.14159265358979323846;
  for (int64_t i = 0; i < d / 2; i++) {
    double f = pow(s->rope.theta, -(double)(2 * i) / (double)d);
    if (s->rope.scaling == LSIM_ROPE_SCALING_LLAMA3) {
      const double old = (double)s->rope.original_max_position;
      const double lo = old / s->rope.low_freq_factor;  /* wavelength */
      const double hi = old / s->rope.high_freq_factor; /* wavelength */
      const double wl = 2 * pi / f;
      if (wl > lo) {
        f /= s->rope.factor;
      } else if (wl >= hi) { /* the band between: interpolated */
        double sm = (old / wl - s->rope.low_freq_factor) /
                    (s->rope.high_freq_factor - s->rope.low_freq_factor);
        f = (1 - sm) * f / s->rope.factor + sm * f;
      }
    }
    inv_freq[i] = f;
  }
}
