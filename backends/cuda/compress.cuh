/*
** compress.cuh: the three-stage operator of a shared-basis (JD) adapter
** collection (article 0x06G4), in fp32:
**
**     Y[i] += ((X[i] V_c) Sigma_a^T) U_c^T      row i of adapter a, cluster c
**
**   stage 1  shared V projection: T[i] = X[i] V_c.  One block per tile of
**            <= LSIM__JD_TILE rows of ONE cluster (rows are ordered by
**            cluster on the host), threads over the R basis columns; every
**            V_c element a thread loads serves all rows of the tile
**   stage 2  per-adapter core: Z[i] = Sigma_a T[i] (JD-Full, R x R) or
**            Z[i] = s_a o T[i] (JD-Diag, elementwise).  One block per row
**   stage 3  shared U^T expansion: Y[i] += Z[i] U_c^T, added into Y in
**            place.  One block per cluster tile, threads over d_out; U is
**            kept transposed on the device (Ut_c [R][d_out]) so a warp's
**            loads are contiguous
**
** Rows whose adapter is -1 (base-only) are in no tile and are never read
** or written.  Accumulation is fp32 in a fixed order per element (j or q
** ascending), so integer-valued inputs whose partial sums stay below 2^24
** give exact results, bit for bit equal to cpu_ref (tests/test_cuda_compress.c).
**
** Everything here is self-contained (CUDA runtime only) and static, so the
** library (compress.cu) and the standalone benchmark
** (tools/bench_compress.cu) compile the same kernels.
*/
#ifndef LSIM_CUDA_COMPRESS_CUH
#define LSIM_CUDA_COMPRESS_CUH

#include <cuda_runtime.h>

#define LSIM__JD_TILE 8      /* rows of one cluster per stage-1/3 block */
#define LSIM__JD_THREADS 128 /* threads per block */

/* One launch's arguments; every pointer is device memory. */
typedef struct lsim__jd_args {
  int diag;          /* 1: JD-Diag cores [R], 0: JD-Full cores [R][R] */
  int d_in, d_out, R;
  const float *X;    /* [N][ldx] */
  int ldx;
  float *Y;          /* [N][ldy], += */
  int ldy;
  const float *V;    /* [k][d_in][R] */
  const float *Ut;   /* [k][R][d_out] (U transposed per cluster) */
  const float *S;    /* [n][R*R] or [n][R] */
  const int *row_adapter; /* [N], -1 = base-only */
  const int *order;  /* [nact] active rows ordered by cluster (stable) */
  int nact;
  const int *tile_start; /* [ntiles] offset into order */
  const int *tile_count; /* [ntiles] rows, 1..LSIM__JD_TILE */
  const int *tile_cluster; /* [ntiles] */
  int ntiles;
  float *T;          /* [N][R] workspace */
  float *Z;          /* [N][R] workspace */
} lsim__jd_args;

/* stage 1: T[row] = X[row] V_c for the rows of one cluster tile */
static __global__ void lsim__jd_project(lsim__jd_args a) {
  int t = blockIdx.x;
  int start = a.tile_start[t], cnt = a.tile_count[t];
  const float *V = a.V + (size_t)a.tile_cluster[t] * a.d_in * a.R;
  int rows[LSIM__JD_TILE];
  for (int q = 0; q < LSIM__JD_TILE; q++)
    rows[q] = q < cnt ? a.order[start + q] : -1;
  for (int j = threadIdx.x; j < a.R; j += blockDim.x) {
    float acc[LSIM__JD_TILE];
    for (int q = 0; q < LSIM__JD_TILE; q++)
      acc[q] = 0.0f;
    for (int k = 0; k < a.d_in; k++) {
      float v = V[(size_t)k * a.R + j];
      for (int q = 0; q < LSIM__JD_TILE; q++)
        if (q < cnt)
          acc[q] = fmaf(a.X[(size_t)rows[q] * a.ldx + k], v, acc[q]);
    }
    for (int q = 0; q < cnt; q++)
      a.T[(size_t)rows[q] * a.R + j] = acc[q];
  }
}

/* stage 2: Z[row] = Sigma_a T[row] (full) or s_a o T[row] (diag) */
static __global__ void lsim__jd_core(lsim__jd_args a) {
  int row = a.order[blockIdx.x];
  int ad = a.row_adapter[row];
  const float *T = a.T + (size_t)row * a.R;
  float *Z = a.Z + (size_t)row * a.R;
  if (a.diag) {
    const float *s = a.S + (size_t)ad * a.R;
    for (int p = threadIdx.x; p < a.R; p += blockDim.x)
      Z[p] = s[p] * T[p];
    return;
  }
  const float *S = a.S + (size_t)ad * a.R * a.R;
  for (int p = threadIdx.x; p < a.R; p += blockDim.x) {
    float acc = 0.0f;
    for (int q = 0; q < a.R; q++)
      acc = fmaf(S[(size_t)p * a.R + q], T[q], acc);
    Z[p] = acc;
  }
}

/* stage 3: Y[row] += Z[row] U_c^T for the rows of one cluster tile */
static __global__ void lsim__jd_expand(lsim__jd_args a) {
  int t = blockIdx.x;
  int start = a.tile_start[t], cnt = a.tile_count[t];
  const float *Ut = a.Ut + (size_t)a.tile_cluster[t] * a.R * a.d_out;
  int rows[LSIM__JD_TILE];
  for (int q = 0; q < LSIM__JD_TILE; q++)
    rows[q] = q < cnt ? a.order[start + q] : -1;
  for (int o = threadIdx.x; o < a.d_out; o += blockDim.x) {
    float acc[LSIM__JD_TILE];
    for (int q = 0; q < LSIM__JD_TILE; q++)
      acc[q] = 0.0f;
    for (int j = 0; j < a.R; j++) {
      float u = Ut[(size_t)j * a.d_out + o];
      for (int q = 0; q < LSIM__JD_TILE; q++)
        if (q < cnt)
          acc[q] = fmaf(a.Z[(size_t)rows[q] * a.R + j], u, acc[q]);
    }
    for (int q = 0; q < cnt; q++)
      a.Y[(size_t)rows[q] * a.ldy + o] += acc[q];
  }
}

/* The three launches on stream s; cudaGetLastError() after them. */
static inline cudaError_t lsim__jd_launch(const lsim__jd_args *a,
                                          cudaStream_t s) {
  if (a->nact == 0)
    return cudaSuccess;
  lsim__jd_project<<<a->ntiles, LSIM__JD_THREADS, 0, s>>>(*a);
  lsim__jd_core<<<a->nact, LSIM__JD_THREADS, 0, s>>>(*a);
  lsim__jd_expand<<<a->ntiles, LSIM__JD_THREADS, 0, s>>>(*a);
  return cudaGetLastError();
}

/*
** Host side: order the active rows by cluster (stable) and cut tiles of at
** most LSIM__JD_TILE rows of one cluster.  order [N], tile arrays [N]
** (enough: every tile holds >= 1 row).  Returns the number of active rows
** in *nact and of tiles in *ntiles; -1 when a row names an adapter outside
** 0..n-1 or a cluster is outside 0..k-1.
*/
static inline int lsim__jd_tiles(const int *row_adapter, int N,
                                 const int *adapter_cluster, int n, int k,
                                 int *order, int *tile_start, int *tile_count,
                                 int *tile_cluster, int *nact, int *ntiles) {
  int m = 0, nt = 0;
  for (int i = 0; i < N; i++)
    if (row_adapter[i] >= n || row_adapter[i] < -1 ||
        (row_adapter[i] >= 0 && (adapter_cluster[row_adapter[i]] < 0 ||
                                 adapter_cluster[row_adapter[i]] >= k)))
      return -1;
  for (int c = 0; c < k; c++) {
    int first = m;
    for (int i = 0; i < N; i++)
      if (row_adapter[i] >= 0 && adapter_cluster[row_adapter[i]] == c)
        order[m++] = i;
    for (int s = first; s < m; s += LSIM__JD_TILE) {
      tile_start[nt] = s;
      tile_count[nt] = m - s < LSIM__JD_TILE ? m - s : LSIM__JD_TILE;
      tile_cluster[nt] = c;
      nt++;
    }
  }
  *nact = m;
  *ntiles = nt;
  return 0;
}

#endif /* LSIM_CUDA_COMPRESS_CUH */
