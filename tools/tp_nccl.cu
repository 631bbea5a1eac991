/*
** tp_nccl: the tensor-parallel adapter schedule on two (or more) GPUs over
** NCCL, one host thread per GPU (docs/TP.md, "The NCCL path").
**
**   tp_nccl test  [--gpus N]
**       exact int64 run of both schedules (column parallel with the
**       rank-axis all-gather; row parallel with the rank-width all-reduce
**       and the adapter slices fused into the base final all-reduce): the
**       article's two-rank fixture and random shapes, every rank's output
**       compared with == against the host reference (tools/tp_host_ref.h,
**       which tests/test_tp.c proves equal to the GMP cpu_ref)
**   tp_nccl bench [--gpus N] [--runs R] [--warmup W] [--csv FILE]
**       bf16 collectives at h 4096, ranks 16 and 64, tokens 16/256/2048:
**       the base output all-reduce vs the LoRA collectives (three Q/K/V
**       rank-axis all-gathers + one rank-width all-reduce, separately and
**       in one NCCL group); CUDA events around each call on rank 0, median
**       of R runs after W warm-up runs
**
** Exit 0 pass, 1 failure, 77 skipped (fewer than 2 GPUs, or no
** libnccl.so.2).  Depends on the CUDA runtime (static), libnccl.so.2
** (dlopen) and libc.  NCCL_NVLS_ENABLE=0 is forced; no multicast object is
** ever created.
*/
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../backends/cuda/tp_nccl.cuh"
#include "tp_host_ref.h"

#define SKIP 77
#define MAXG 8

static lsim_nccl_api g_api;
static ncclUniqueId g_id;
static int g_n = 2;

#define CK(x)                                                               \
  do {                                                                      \
    cudaError_t e_ = (x);                                                   \
    if (e_ != cudaSuccess) {                                                \
      fprintf(stderr, "tp_nccl: %s:%d: %s\n", __FILE__, __LINE__,           \
              cudaGetErrorString(e_));                                      \
      return 1;                                                             \
    }                                                                       \
  } while (0)
#define NK(x)                                                               \
  do {                                                                      \
    ncclResult_t r_ = (x);                                                  \
    if (r_ != ncclSuccess) {                                                \
      fprintf(stderr, "tp_nccl: %s:%d: nccl: %s\n", __FILE__, __LINE__,     \
              g_api.GetErrorString(r_));                                    \
      return 1;                                                             \
    }                                                                       \
  } while (0)

/* ------------------------------------------------------------ test cases */

typedef struct tcase {
  const char *name;
  int T, din, dout, r;
  int64_t *x, *a1, *b1, *h, *a2, *b2, *w2; /* global, repository orientation */
  int64_t *want_d1, *want_y;               /* host reference */
  int64_t *got_d1[MAXG], *got_y[MAXG];     /* per rank, from the devices */
  const int64_t *article_d1, *article_y;   /* fixture only */
} tcase;

static uint64_t g_lcg = 0x9e3779b97f4a7c15ull;
static int64_t small(void) {
  g_lcg = g_lcg * 6364136223846793005ull + 1442695040888963407ull;
  return (int64_t)((g_lcg >> 33) % 17) - 8;
}

static int64_t *arr(size_t n) { return (int64_t *)calloc(n ? n : 1, 8); }

static void fill(int64_t *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    p[i] = small();
}

static void case_alloc(tcase *c) {
  c->x = arr((size_t)c->T * c->din);
  c->h = arr((size_t)c->T * c->din);
  c->a1 = arr((size_t)c->r * c->din);
  c->a2 = arr((size_t)c->r * c->din);
  c->b1 = arr((size_t)c->dout * c->r);
  c->b2 = arr((size_t)c->dout * c->r);
  c->w2 = arr((size_t)c->dout * c->din);
  c->want_d1 = arr((size_t)c->T * c->dout);
  c->want_y = arr((size_t)c->T * c->dout);
  for (int j = 0; j < MAXG; j++) {
    c->got_d1[j] = arr((size_t)c->T * c->dout / 1);
    c->got_y[j] = arr((size_t)c->T * c->dout);
  }
}

static void case_reference(tcase *c, int N) {
  int64_t *z = arr((size_t)c->T * c->r);
  lsim_tph_col(c->T, c->din, c->dout, c->r, N, c->x, c->a1, c->b1, z,
               c->want_d1);
  lsim_tph_row(c->T, c->din, c->dout, c->r, N, c->h, c->a2, c->b2, c->w2, z,
               c->want_y);
  free(z);
}

/* The article's two-rank fixture (0x06F4), inputs chosen so that every
** printed intermediate comes out (tests/test_tp.c), here already in the
** repository orientation: A [r][d_in], B [d_out][r], W [d_out][d_in]. */
static const int64_t FX_X[] = {0, 1, 0, 2, 1, 0, 3, 2, 2, 1, 2, 1};
static const int64_t FX_A1[] = {1, 0, 1, 0, 0, 1, 0, 1};
static const int64_t FX_B1[] = {1, 2, 0, 1, 2, 0, -1, 3};
static const int64_t FX_H[] = {-2, -1, 4, -3, 1, 0, 1, -2, 0, -2, -2, -1};
static const int64_t FX_A2[] = {-2, -1, -1, 0, -1, 0, 2, -1};
static const int64_t FX_B2[] = {1, 0, 2, 1, 0, 3, -1, 2};
static const int64_t FX_W2[] = {-3, 5, -3, -4, 6, -8, 5, 5,
                                6, -9, 5, 5, -2, 3, -2, -3};
static const int64_t FX_D1[] = {6, 3, 0, 9, 8, 2, 8, 2, 8, 2, 8, 2};
static const int64_t FX_Y[] = {2, 16, 41, 27, -1, -2, 10, 11, 4, 6, -6, -9};

#define NCASES 5
static tcase g_cases[NCASES];
static int g_ncases;

static void build_cases(int N) {
  tcase *c = &g_cases[g_ncases++];
  c->name = "article fixture";
  c->T = 3, c->din = 4, c->dout = 4, c->r = 2;
  case_alloc(c);
  memcpy(c->x, FX_X, sizeof FX_X);
  memcpy(c->a1, FX_A1, sizeof FX_A1);
  memcpy(c->b1, FX_B1, sizeof FX_B1);
  memcpy(c->h, FX_H, sizeof FX_H);
  memcpy(c->a2, FX_A2, sizeof FX_A2);
  memcpy(c->b2, FX_B2, sizeof FX_B2);
  memcpy(c->w2, FX_W2, sizeof FX_W2);
  c->article_d1 = FX_D1;
  c->article_y = FX_Y;
  if (N != 2) /* the fixture is a two-rank trace */
    g_ncases--;
  static const int shapes[][4] = {
      {5, 64, 48, 16}, {1, 8, 8, 8}, {33, 256, 128, 64}, {7, 4096, 64, 16}};
  for (int s = 0; s < 4; s++) {
    c = &g_cases[g_ncases++];
    c->name = "random";
    c->T = shapes[s][0], c->din = shapes[s][1], c->dout = shapes[s][2];
    c->r = shapes[s][3];
    case_alloc(c);
    fill(c->x, (size_t)c->T * c->din);
    fill(c->h, (size_t)c->T * c->din);
    fill(c->a1, (size_t)c->r * c->din);
    fill(c->a2, (size_t)c->r * c->din);
    fill(c->b1, (size_t)c->dout * c->r);
    fill(c->b2, (size_t)c->dout * c->r);
    fill(c->w2, (size_t)c->dout * c->din);
  }
  for (int i = 0; i < g_ncases; i++)
    case_reference(&g_cases[i], N);
}

/* --------------------------------------------------------- rank threads */

typedef struct rank_arg {
  int j, mode, rc;
  int runs, warmup;
  FILE *csv;
} rank_arg;

static int dup_to_dev(long long **d, const int64_t *h, size_t n) {
  CK(cudaMalloc((void **)d, (n ? n : 1) * 8));
  if (n)
    CK(cudaMemcpy(*d, h, n * 8, cudaMemcpyHostToDevice));
  return 0;
}

/* Host slice of rows [r0, r1) and columns [c0, c1) of a [rows][cols]. */
static int64_t *slice(const int64_t *m, int cols, int r0, int r1, int c0,
                      int c1) {
  int64_t *o = arr((size_t)(r1 - r0) * (c1 - c0));
  for (int i = r0; i < r1; i++)
    for (int k = c0; k < c1; k++)
      o[(size_t)(i - r0) * (c1 - c0) + (k - c0)] = m[(size_t)i * cols + k];
  return o;
}

static int run_case(ncclComm_t comm, cudaStream_t st, int j, tcase *c) {
  int N = g_n, rs = c->r / N, os = c->dout / N, is = c->din / N;
  lsim_tp_rank_i64 s;
  memset(&s, 0, sizeof s);
  s.N = N, s.j = j, s.T = c->T, s.din = c->din, s.dout = c->dout, s.r = c->r;
  /* each GPU receives only its own shards */
  int64_t *a1 = slice(c->a1, c->din, j * rs, (j + 1) * rs, 0, c->din);
  int64_t *b1 = slice(c->b1, c->r, j * os, (j + 1) * os, 0, c->r);
  int64_t *h = slice(c->h, c->din, 0, c->T, j * is, (j + 1) * is);
  int64_t *a2 = slice(c->a2, c->din, 0, c->r, j * is, (j + 1) * is);
  int64_t *b2 = slice(c->b2, c->r, j * os, (j + 1) * os, 0, c->r);
  int64_t *w2 = slice(c->w2, c->din, 0, c->dout, j * is, (j + 1) * is);
  int rc = dup_to_dev(&s.x, c->x, (size_t)c->T * c->din) ||
           dup_to_dev(&s.a1, a1, (size_t)rs * c->din) ||
           dup_to_dev(&s.b1, b1, (size_t)os * c->r) ||
           dup_to_dev(&s.h, h, (size_t)c->T * is) ||
           dup_to_dev(&s.a2, a2, (size_t)c->r * is) ||
           dup_to_dev(&s.b2, b2, (size_t)os * c->r) ||
           dup_to_dev(&s.w2, w2, (size_t)c->dout * is);
  free(a1), free(b1), free(h), free(a2), free(b2), free(w2);
  if (rc)
    return 1;
  CK(cudaMalloc((void **)&s.zt_loc, (size_t)rs * c->T * 8));
  CK(cudaMalloc((void **)&s.zt, (size_t)c->r * c->T * 8));
  CK(cudaMalloc((void **)&s.d1, (size_t)c->T * os * 8));
  CK(cudaMalloc((void **)&s.p, (size_t)c->T * c->r * 8));
  CK(cudaMalloc((void **)&s.y, (size_t)c->T * c->dout * 8));
  int e = lsim_tp_step_i64(&g_api, comm, st, &s);
  if (e) {
    fprintf(stderr, "tp_nccl: rank %d: step failed (%s %d)\n", j,
            e >= 1000 ? "cuda" : "nccl", e >= 1000 ? e - 1000 : e);
    return 1;
  }
  CK(cudaStreamSynchronize(st));
  CK(cudaMemcpy(c->got_d1[j], s.d1, (size_t)c->T * os * 8,
                cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(c->got_y[j], s.y, (size_t)c->T * c->dout * 8,
                cudaMemcpyDeviceToHost));
  long long *bufs[] = {s.x, s.a1, s.b1, s.h, s.a2, s.b2, s.w2,
                       s.zt_loc, s.zt, s.d1, s.p, s.y};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    CK(cudaFree(bufs[i]));
  return 0;
}

static double median(float *v, int n) {
  for (int i = 1; i < n; i++) /* insertion sort: n is a few hundred */
    for (int k = i; k > 0 && v[k - 1] > v[k]; k--) {
      float t = v[k];
      v[k] = v[k - 1];
      v[k - 1] = t;
    }
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

enum { OP_BASE, OP_LORA, OP_LORA_GROUP, OP_N };
static const char *const op_name[OP_N] = {"base_allreduce", "lora_4calls",
                                          "lora_grouped"};

static int bench_op(ncclComm_t comm, cudaStream_t st, int op, void *base,
                    void *gsend, void *grecv, void *red, size_t B, size_t h,
                    size_t r) {
  size_t rs = r / (size_t)g_n;
  if (op == OP_BASE) {
    NK(g_api.AllReduce(base, base, B * h, ncclBfloat16, ncclSum, comm, st));
    return 0;
  }
  if (op == OP_LORA_GROUP)
    NK(g_api.GroupStart());
  for (int q = 0; q < 3; q++) /* Q, K, V rank-axis gathers */
    NK(g_api.AllGather((char *)gsend + q * B * rs * 2,
                       (char *)grecv + q * B * r * 2, B * rs, ncclBfloat16,
                       comm, st));
  NK(g_api.AllReduce(red, red, B * r, ncclBfloat16, ncclSum, comm, st));
  if (op == OP_LORA_GROUP)
    NK(g_api.GroupEnd());
  return 0;
}

static int bench(ncclComm_t comm, cudaStream_t st, rank_arg *a) {
  static const size_t tokens[] = {16, 256, 2048};
  static const size_t ranks[] = {16, 64};
  const size_t h = 4096;
  int R = a->runs, W = a->warmup;
  cudaEvent_t *ev = (cudaEvent_t *)calloc((size_t)2 * R, sizeof *ev);
  float *ms = (float *)calloc((size_t)R, sizeof *ms);
  for (int i = 0; i < 2 * R; i++)
    CK(cudaEventCreate(&ev[i]));
  if (a->j == 0) {
    printf("tp_nccl bench: %d GPUs, bf16, h %zu, median of %d runs after %d "
           "warm-up\n", g_n, h, R, W);
    printf("%6s %4s %16s %12s %12s %14s\n", "tokens", "r", "op", "median_us",
           "bytes/rank", "vs base");
    if (a->csv)
      fprintf(a->csv, "gpus,tokens,h,r,op,median_us,logical_bytes_per_rank,"
                      "ratio_to_base\n");
  }
  for (size_t ti = 0; ti < sizeof tokens / sizeof tokens[0]; ti++)
    for (size_t ri = 0; ri < sizeof ranks / sizeof ranks[0]; ri++) {
      size_t B = tokens[ti], r = ranks[ri];
      void *base, *gsend, *grecv, *red;
      CK(cudaMalloc(&base, B * h * 2));
      CK(cudaMalloc(&gsend, 3 * B * r * 2));
      CK(cudaMalloc(&grecv, 3 * B * r * 2));
      CK(cudaMalloc(&red, B * r * 2));
      CK(cudaMemset(base, 0, B * h * 2));
      CK(cudaMemset(gsend, 0, 3 * B * r * 2));
      CK(cudaMemset(red, 0, B * r * 2));
      double med[OP_N];
      for (int op = 0; op < OP_N; op++) {
        for (int i = 0; i < W; i++)
          if (bench_op(comm, st, op, base, gsend, grecv, red, B, h, r))
            return 1;
        CK(cudaStreamSynchronize(st));
        for (int i = 0; i < R; i++) {
          CK(cudaEventRecord(ev[2 * i], st));
          if (bench_op(comm, st, op, base, gsend, grecv, red, B, h, r))
            return 1;
          CK(cudaEventRecord(ev[2 * i + 1], st));
        }
        CK(cudaStreamSynchronize(st));
        for (int i = 0; i < R; i++)
          CK(cudaEventElapsedTime(&ms[i], ev[2 * i], ev[2 * i + 1]));
        med[op] = median(ms, R) * 1000.0;
      }
      /* logical ring bytes per rank (engine/tp.h ledgers), bf16 */
      size_t N = (size_t)g_n;
      size_t base_b = 2 * (N - 1) * B * h / N * 2;
      size_t lora_b = 5 * (N - 1) * B * r / N * 2;
      if (a->j == 0)
        for (int op = 0; op < OP_N; op++) {
          size_t bytes = op == OP_BASE ? base_b : lora_b;
          printf("%6zu %4zu %16s %12.2f %12zu %13.3fx\n", B, r, op_name[op],
                 med[op], bytes, med[op] / med[OP_BASE]);
          if (a->csv)
            fprintf(a->csv, "%d,%zu,%zu,%zu,%s,%.3f,%zu,%.4f\n", g_n, B, h, r,
                    op_name[op], med[op], bytes, med[op] / med[OP_BASE]);
        }
      CK(cudaFree(base));
      CK(cudaFree(gsend));
      CK(cudaFree(grecv));
      CK(cudaFree(red));
    }
  for (int i = 0; i < 2 * R; i++)
    CK(cudaEventDestroy(ev[i]));
  free(ev);
  free(ms);
  return 0;
}

static int rank_main(rank_arg *a) {
  CK(cudaSetDevice(a->j));
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  ncclComm_t comm;
  NK(g_api.CommInitRank(&comm, g_n, g_id, a->j));
  int rc = 0;
  if (a->mode == 0)
    for (int i = 0; !rc && i < g_ncases; i++)
      rc = run_case(comm, st, a->j, &g_cases[i]);
  else
    rc = bench(comm, st, a);
  CK(cudaStreamSynchronize(st));
  NK(g_api.CommDestroy(comm));
  CK(cudaStreamDestroy(st));
  return rc;
}

static void *rank_thread(void *p) {
  rank_arg *a = (rank_arg *)p;
  a->rc = rank_main(a);
  return NULL;
}

static int verify(void) {
  int bad = 0;
  for (int i = 0; i < g_ncases; i++) {
    tcase *c = &g_cases[i];
    int os = c->dout / g_n, case_bad = 0;
    for (int j = 0; j < g_n; j++) {
      /* column parallel: rank j holds output columns [j os, (j+1) os) */
      for (int t = 0; t < c->T; t++)
        for (int o = 0; o < os; o++) {
          int64_t got = c->got_d1[j][(size_t)t * os + o];
          int64_t want = c->want_d1[(size_t)t * c->dout + j * os + o];
          if (got != want && case_bad++ < 5)
            fprintf(stderr, "  %s: rank %d D1[%d][%d] = %lld, want %lld\n",
                    c->name, j, t, j * os + o, (long long)got,
                    (long long)want);
          if (c->article_d1 && want != c->article_d1[t * c->dout + j * os + o])
            case_bad++;
        }
      /* row parallel: every rank holds the full Y after the all-reduce */
      for (int q = 0; q < c->T * c->dout; q++) {
        if (c->got_y[j][q] != c->want_y[q] && case_bad++ < 5)
          fprintf(stderr, "  %s: rank %d Y[%d] = %lld, want %lld\n", c->name,
                  j, q, (long long)c->got_y[j][q], (long long)c->want_y[q]);
        if (c->article_y && c->want_y[q] != c->article_y[q])
          case_bad++;
      }
    }
    printf("  %-16s T %4d d_in %5d d_out %4d r %3d N %d: %s\n", c->name, c->T,
           c->din, c->dout, c->r, g_n, case_bad ? "MISMATCH" : "exact");
    bad += case_bad != 0;
  }
  return bad;
}

int main(int argc, char **argv) {
  int mode = -1, runs = 200, warmup = 20;
  const char *csv_path = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "test") == 0)
      mode = 0;
    else if (strcmp(argv[i], "bench") == 0)
      mode = 1;
    else if (strcmp(argv[i], "--gpus") == 0 && i + 1 < argc)
      g_n = atoi(argv[++i]);
    else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
      runs = atoi(argv[++i]);
    else if (strcmp(argv[i], "--warmup") == 0 && i + 1 < argc)
      warmup = atoi(argv[++i]);
    else if (strcmp(argv[i], "--csv") == 0 && i + 1 < argc)
      csv_path = argv[++i];
    else
      mode = -2;
  }
  if (mode < 0 || g_n < 2 || g_n > MAXG || runs < 1 || warmup < 0) {
    fprintf(stderr, "usage: tp_nccl test|bench [--gpus N (2..%d)] [--runs R] "
                    "[--warmup W] [--csv FILE]\n", MAXG);
    return 2;
  }
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < g_n) {
    printf("tp_nccl: SKIP: %d GPU(s) visible, %d needed\n", ndev, g_n);
    return SKIP;
  }
  char msg[512];
  if (lsim_nccl_open(&g_api, msg, sizeof msg)) {
    printf("tp_nccl: SKIP: %s (put NCCL's lib directory in "
           "LD_LIBRARY_PATH)\n", msg);
    return SKIP;
  }
  int ver = 0;
  g_api.GetVersion(&ver);
  printf("tp_nccl: %s on %d GPUs, NCCL %d, NCCL_NVLS_ENABLE=%s\n",
         mode ? "bench" : "test", g_n, ver, getenv("NCCL_NVLS_ENABLE"));
  if (g_api.GetUniqueId(&g_id) != ncclSuccess) {
    fprintf(stderr, "tp_nccl: ncclGetUniqueId failed\n");
    return 1;
  }
  if (mode == 0)
    build_cases(g_n);
  FILE *csv = NULL;
  if (csv_path && !(csv = fopen(csv_path, "w"))) {
    perror(csv_path);
    return 1;
  }
  pthread_t th[MAXG];
  rank_arg args[MAXG];
  for (int j = 0; j < g_n; j++) {
    args[j] = (rank_arg){j, mode, 0, runs, warmup, j == 0 ? csv : NULL};
    if (pthread_create(&th[j], NULL, rank_thread, &args[j])) {
      fprintf(stderr, "tp_nccl: pthread_create failed\n");
      return 1;
    }
  }
  int rc = 0;
  for (int j = 0; j < g_n; j++) {
    pthread_join(th[j], NULL);
    rc |= args[j].rc;
  }
  if (csv)
    fclose(csv);
  if (!rc && mode == 0) {
    int bad = verify();
    printf("tp_nccl test: %d case(s), %d mismatch(es)\n", g_ncases, bad);
    rc = bad != 0;
  }
  lsim_nccl_close(&g_api);
  return rc ? 1 : 0;
}
