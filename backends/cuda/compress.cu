/*
** compress.cu: the shared-basis operator context (compress_gpu.h).
*/
#include <stdlib.h>
#include <string.h>

#include "common.cuh"
#include "compress.cuh"
#include "compress_gpu.h"

struct lsim_cuda_jd {
  int diag, d_in, d_out, R, k, n;
  float *V, *Ut, *S; /* device */
  int *cluster;      /* host copy [n] */
};

extern "C" void lsim_cuda_jd_close(lsim_cuda_jd *J) {
  if (!J)
    return;
  cudaFree(J->V);
  cudaFree(J->Ut);
  cudaFree(J->S);
  free(J->cluster);
  free(J);
}

extern "C" lsim_err lsim_cuda_jd_open(lsim_cuda_jd **out, int diag, int d_in,
                                      int d_out, int R, int k, int n,
                                      const float *U, const float *V,
                                      const float *cores, const int *cluster,
                                      lsim_errbuf *eb) {
  *out = NULL;
  if (d_in < 1 || d_out < 1 || R < 1 || k < 1 || n < 1 || !U || !V ||
      !cores || !cluster)
    return lsim_fail(eb, LSIM_E_USAGE,
                     "jd open: need d_in, d_out, R, k, n >= 1 and arrays");
  for (int i = 0; i < n; i++)
    if (cluster[i] < 0 || cluster[i] >= k)
      return lsim_fail(eb, LSIM_E_USAGE, "jd open: adapter %d has cluster %d",
                       i, cluster[i]);
  lsim_err rc = 0;
  size_t cl = diag ? (size_t)R : (size_t)R * R;
  size_t nv = (size_t)k * d_in * R, nu = (size_t)k * d_out * R;
  float *ut = NULL;
  lsim_cuda_jd *J = (lsim_cuda_jd *)calloc(1, sizeof *J);
  if (!J || !(ut = (float *)malloc(nu * sizeof *ut)) ||
      !(J->cluster = (int *)malloc((size_t)n * sizeof(int)))) {
    rc = lsim_fail(eb, LSIM_E_NOMEM, "jd open");
    goto out;
  }
  J->diag = !!diag;
  J->d_in = d_in;
  J->d_out = d_out;
  J->R = R;
  J->k = k;
  J->n = n;
  memcpy(J->cluster, cluster, (size_t)n * sizeof(int));
  for (int c = 0; c < k; c++) /* U_c [d_out][R] -> Ut_c [R][d_out] */
    for (int o = 0; o < d_out; o++)
      for (int j = 0; j < R; j++)
        ut[((size_t)c * R + j) * d_out + o] = U[((size_t)c * d_out + o) * R + j];
  LSIM_CUDA_TRY(cudaMalloc((void **)&J->V, nv * sizeof(float)), eb);
  LSIM_CUDA_TRY(cudaMalloc((void **)&J->Ut, nu * sizeof(float)), eb);
  LSIM_CUDA_TRY(cudaMalloc((void **)&J->S, (size_t)n * cl * sizeof(float)), eb);
  LSIM_CUDA_TRY(cudaMemcpy(J->V, V, nv * sizeof(float), cudaMemcpyHostToDevice), eb);
  LSIM_CUDA_TRY(cudaMemcpy(J->Ut, ut, nu * sizeof(float), cudaMemcpyHostToDevice), eb);
  LSIM_CUDA_TRY(cudaMemcpy(J->S, cores, (size_t)n * cl * sizeof(float),
                           cudaMemcpyHostToDevice), eb);
out:
  free(ut);
  if (rc)
    lsim_cuda_jd_close(J);
  else
    *out = J;
  return rc;
}

extern "C" lsim_err lsim_cuda_jd_run(lsim_cuda_jd *J, const float *X,
                                     const int *row_adapter, int N, float *Y,
                                     lsim_errbuf *eb) {
  if (!J || N < 0 || (N && (!X || !row_adapter || !Y)))
    return lsim_fail(eb, LSIM_E_USAGE, "jd run: bad arguments");
  if (N == 0)
    return 0;
  lsim_err rc = 0;
  int *host = (int *)malloc((size_t)4 * N * sizeof(int));
  int *dmeta = NULL;
  float *dX = NULL, *dY = NULL, *dT = NULL, *dZ = NULL;
  int *drow = NULL;
  lsim__jd_args a;
  memset(&a, 0, sizeof a);
  int nact = 0, ntiles = 0;
  if (!host) {
    rc = lsim_fail(eb, LSIM_E_NOMEM, "jd run");
    goto out;
  }
  if (lsim__jd_tiles(row_adapter, N, J->cluster, J->n, J->k, host, host + N,
                     host + 2 * N, host + 3 * N, &nact, &ntiles)) {
    rc = lsim_fail(eb, LSIM_E_USAGE, "jd run: a row names an unknown adapter");
    goto out;
  }
  LSIM_CUDA_TRY(cudaMalloc((void **)&dX, (size_t)N * J->d_in * sizeof(float)), eb);
  LSIM_CUDA_TRY(cudaMalloc((void **)&dY, (size_t)N * J->d_out * sizeof(float)), eb);
  LSIM_CUDA_TRY(cudaMalloc((void **)&dT, (size_t)N * J->R * sizeof(float)), eb);
  LSIM_CUDA_TRY(cudaMalloc((void **)&dZ, (size_t)N * J->R * sizeof(float)), eb);
  LSIM_CUDA_TRY(cudaMalloc((void **)&drow, (size_t)N * sizeof(int)), eb);
  LSIM_CUDA_TRY(cudaMalloc((void **)&dmeta, (size_t)4 * N * sizeof(int)), eb);
  LSIM_CUDA_TRY(cudaMemcpy(dX, X, (size_t)N * J->d_in * sizeof(float),
                           cudaMemcpyHostToDevice), eb);
  LSIM_CUDA_TRY(cudaMemcpy(dY, Y, (size_t)N * J->d_out * sizeof(float),
                           cudaMemcpyHostToDevice), eb);
  LSIM_CUDA_TRY(cudaMemcpy(drow, row_adapter, (size_t)N * sizeof(int),
                           cudaMemcpyHostToDevice), eb);
  LSIM_CUDA_TRY(cudaMemcpy(dmeta, host, (size_t)4 * N * sizeof(int),
                           cudaMemcpyHostToDevice), eb);
  /* poison the workspaces: a stage that skips an element cannot pass */
  LSIM_CUDA_TRY(cudaMemset(dT, 0xFF, (size_t)N * J->R * sizeof(float)), eb);
  LSIM_CUDA_TRY(cudaMemset(dZ, 0xFF, (size_t)N * J->R * sizeof(float)), eb);
  a.diag = J->diag;
  a.d_in = J->d_in;
  a.d_out = J->d_out;
  a.R = J->R;
  a.X = dX;
  a.ldx = J->d_in;
  a.Y = dY;
  a.ldy = J->d_out;
  a.V = J->V;
  a.Ut = J->Ut;
  a.S = J->S;
  a.row_adapter = drow;
  a.order = dmeta;
  a.nact = nact;
  a.tile_start = dmeta + N;
  a.tile_count = dmeta + 2 * N;
  a.tile_cluster = dmeta + 3 * N;
  a.ntiles = ntiles;
  a.T = dT;
  a.Z = dZ;
  LSIM_CUDA_TRY(lsim__jd_launch(&a, 0), eb);
  LSIM_CUDA_TRY(cudaDeviceSynchronize(), eb);
  LSIM_CUDA_TRY(cudaMemcpy(Y, dY, (size_t)N * J->d_out * sizeof(float),
                           cudaMemcpyDeviceToHost), eb);
out:
  cudaFree(dX);
  cudaFree(dY);
  cudaFree(dT);
  cudaFree(dZ);
  cudaFree(drow);
  cudaFree(dmeta);
  free(host);
  return rc;
}
