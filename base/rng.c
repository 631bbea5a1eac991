/*
** rng.c: SplitMix64 seeding and xoshiro256** generation (Blackman and
** Vigna's public-domain reference algorithms, written out here).
*/
#include "rng.h"

static uint64_t lsim__splitmix(uint64_t *x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static uint64_t lsim__rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

void lsim_rng_init(lsim_rng *r, uint64_t seed, uint64_t stream) {
  /* Mix the stream id in through a second SplitMix round so that streams
  ** of neighbouring seeds do not overlap trivially. */
  uint64_t x = seed;
  uint64_t k = lsim__splitmix(&x) ^ (stream * 0xD1B54A32D192ED03ull);
  for (int i = 0; i < 4; i++)
    r->s[i] = lsim__splitmix(&k);
}

uint64_t lsim_rng_next(lsim_rng *r) {
  uint64_t *s = r->s;
  uint64_t out = lsim__rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = lsim__rotl(s[3], 45);
  return out;
}

double lsim_rng_unit(lsim_rng *r) {
  return (double)(lsim_rng_next(r) >> 11) * 0x1.0p-53;
}

uint64_t lsim_rng_below(lsim_rng *r, uint64_t n) {
  /* Rejection sampling: drop the top partial block of 2^64 mod n values. */
  uint64_t limit = UINT64_MAX - (UINT64_MAX % n);
  uint64_t v;
  do
    v = lsim_rng_next(r);
  while (v >= limit);
  return v % n;
}
