/*
** checked.h: converting a computed double to an integer count, checked.
**
** A C cast of a double to an integer type is undefined behaviour when the
** value is NaN, infinite or outside the target type's range (C11 6.3.1.4):
** on x86-64 it gives INT64_MIN, which then passes as a very early tick or a
** negative count.  Every place where a tick, ns or byte count is computed
** in floating point converts it through lsim_d2i64_checked, and turns a
** refusal into an error of its own layer (E_SCN_RANGE with the JSON path in
** a replay, E_TRACE_RANGE with the file and line in a trace).
**
** No state, no I/O; static inline so every library may use it.
*/
#ifndef LSIM_CHECKED_H
#define LSIM_CHECKED_H

#include <math.h>
#include <stdint.h>

/* *out = (int64_t)v (truncated toward zero) when v is finite and the
** result lies in [lo, hi]; returns 0 then, else -1 with *out untouched.
** Round (ceil, llround's rule) before calling when truncation is not
** what the caller wants: lsim_d2i64_ceil does it for ceil. */
static inline int lsim_d2i64_checked(double v, int64_t lo, int64_t hi,
                                     int64_t *out) {
  /* [-2^63, 2^63): every double in it converts; INT64_MAX is not a double
  ** (it rounds up to 2^63), so the bound is written as a power of two */
  if (!(v >= -0x1p63 && v < 0x1p63))
    return -1;
  int64_t i = (int64_t)v;
  if (i < lo || i > hi)
    return -1;
  *out = i;
  return 0;
}

/* lsim_d2i64_checked(ceil(v), ...). */
static inline int lsim_d2i64_ceil(double v, int64_t lo, int64_t hi,
                                  int64_t *out) {
  return lsim_d2i64_checked(ceil(v), lo, hi, out);
}

/* Overflow-checked a + b for int64: 0 and *out, or -1. */
static inline int lsim_add_i64_checked(int64_t a, int64_t b, int64_t *out) {
  if ((b > 0 && a > INT64_MAX - b) || (b < 0 && a < INT64_MIN - b))
    return -1;
  *out = a + b;
  return 0;
}

/* Overflow-checked floor(a * b / c) for a, b >= 0 and c > 0, exact (the
** product is taken in 128 bits): 0 and *out, or -1 when an argument is
** out of its range or the result exceeds INT64_MAX. */
static inline int lsim_muldiv_i64_checked(int64_t a, int64_t b, int64_t c,
                                          int64_t *out) {
  if (a < 0 || b < 0 || c <= 0)
    return -1;
  uint64_t p64;
  if (!__builtin_mul_overflow((uint64_t)a, (uint64_t)b, &p64)) {
    /* the usual case: a 64-bit division (the 128-bit one is a libgcc
    ** call, a tenth of the profiled cost model's time) */
    uint64_t q64 = p64 / (uint64_t)c;
    if (q64 > (uint64_t)INT64_MAX)
      return -1;
    *out = (int64_t)q64;
    return 0;
  }
  unsigned __int128 q = (unsigned __int128)a * (uint64_t)b / (uint64_t)c;
  if (q > (unsigned __int128)INT64_MAX)
    return -1;
  *out = (int64_t)q;
  return 0;
}

#endif /* LSIM_CHECKED_H */
