/*
** eorder.h: the balanced block order of the tensor-core expand (tune
** expand_order, docs/CUDA.md "The expand's balanced order").  Plain C, no
** CUDA: lora.cu lays out the launch with it, and tests/test_eorder.c checks
** it on machines without a GPU.
*/
#ifndef LSIM_CUDA_EORDER_H
#define LSIM_CUDA_EORDER_H

#ifdef __cplusplus
extern "C" {
#endif

/* The expand's blocks are the pairs (tile k, column block y), k < ntiles,
** y < ny: column block y covers columns [y len, (y + 1) len) of d_out, or,
** with rsplit (the expand's rank split; ny is then 4 x the column blocks),
** sub-range y % 4 of block y / 4, split over min(4, ceil(rank / 16))
** blocks of whole kc-column chunks (a block past them has no columns).
** rank[k] and rows[k] are tile k's rank and rows.
**
** The order: every block is weighed by the bytes it moves, (rank + 2 rows
** + 16) x its columns (its Bt rank rows, its Y rows read and written, and
** a fixed cost), plus 1; taken heaviest first (ties in grid order, k + y
** ntiles), each goes to the slot s < nsm with the least weight so far among
** those with room (slot s holds the positions s, s + nsm, ... below the
** block count; ties: the lowest s), and slot s's j-th block is written at
** position s + j nsm: out[2 p] = k, out[2 p + 1] = y.  In the first waves
** a GPU hands block p and p + nsm, p + 2 nsm ... to one SM, so each SM's
** blocks carry about equal bytes.  Deterministic.
**
** Returns the block count (ntiles x ny), or -1 (out of memory, or a bad
** argument) with out untouched. */
int lsim_cuda_expand_order(int ntiles, const int *rank, const int *rows,
                           int ny, int len, int rsplit, int d_out, int kc,
                           int nsm, int *out);

/* The largest slot weight of an order out (ntiles x ny blocks; NULL: the
** grid's own order, k + y ntiles) on nsm slots, with the weights above:
** what the order minimises (tests).  -1 when out of memory. */
long long lsim_cuda_expand_order_cost(int ntiles, const int *rank,
                                      const int *rows, int ny, int len,
                                      int rsplit, int d_out, int kc, int nsm,
                                      const int *out);

#ifdef __cplusplus
}
#endif

#endif
