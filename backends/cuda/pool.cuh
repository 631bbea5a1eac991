/*
** pool.cuh: the device side of the paged adapter pool (pool.cu, pool.h).
**
** The pool is `pages` pages of H 16-bit elements.  A generation's page
** table is 2 * rank page indices (rank rows of A, then rank rows of B
** transposed) in its page-table slot, ptab[slot * TW .. + 2 * rank), TW =
** 2 * max_rank.  The paged kernel reads factor row k of A at
** pool + ptab[slot * TW + k] * H and row k of B^T at
** pool + ptab[slot * TW + rank + k] * H.
**
** Launch metadata (one int32 buffer, one copy per launch):
**
**   tiles [ntiles][3]   segment, first grouped position u0, rows (<= 8)
**   segs  [nseg][3]     page-table slot, rank, scale (float bits)
**   perm  [nactive]     the plan's grouped position -> packed row
*/
#ifndef LSIM_CUDA_POOL_CUH
#define LSIM_CUDA_POOL_CUH

#include "common.cuh"
#include "pool.h"

#define LSIM__PG_TR 8        /* rows per paged tile */
#define LSIM__PG_THREADS 128 /* 4 warps */

struct lsim__paged_args {
  const uint16_t *pool;
  const int32_t *ptab;
  const int32_t *meta;
  const uint16_t *X;
  uint16_t *Y;
  int64_t H;
  int TW, d_in, d_out, ldx, ldy, ntiles, nseg;
  int64_t delay_ns;
};

/* The positional checksum of one element: the value (plus one, so that a
** zero still counts) times an odd mix of its index in the image; the image
** checksum is the sum of these modulo 2^64 (order-free, so a device
** reduction with atomics equals the host's loop). */
__host__ __device__ static inline uint64_t lsim__pg_term(uint64_t idx,
                                                         uint16_t v) {
  uint64_t m = idx * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  m ^= m >> 29;
  return ((uint64_t)v + 1u) * (m | 1u);
}

#endif /* LSIM_CUDA_POOL_CUH */
