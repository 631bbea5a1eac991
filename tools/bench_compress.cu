/*
** bench_compress.cu: the shared-basis three-stage operator against
** ordinary LoRA on the same collection and the same batch, on one GPU.
**
**   bench_compress [--n N] [--d D] [--r0 r] [--R R] [--k K] [--tokens T]
**                  [--method full|diag] [--reps N] [--warmup N] [--seed S]
**   bench_compress --sweep [--reps N]      the table of docs/COMPRESSION.md
**   bench_compress --check                 integer-mode exactness first
**
** Both operators are fp32 with the same simple kernel style (tiles of <= 8
** rows of one cluster / one adapter, threads over the output columns), so
** the comparison is of the algorithms' data movement and launch count, not
** of tuning: ordinary LoRA is shrink (X A_a^T) + expand (. s B_a^T), two
** launches; JD is project (X V_c) + core + expand (. U_c^T), three.  The
** batch has T rows, each of a uniformly drawn adapter.  Times are CUDA-event
** times of the whole operator, median (and min, max) of --reps runs after
** --warmup runs.  Weight bytes are the bytes of factors/bases/cores the
** batch touches (distinct adapters / clusters), fp32.
**
** Depends only on the CUDA runtime and libc.  Exit status 0 ok, 1 a CUDA
** error or a --check mismatch, 2 bad usage.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../backends/cuda/compress.cuh"

#define CK(call)                                                           \
  do {                                                                     \
    cudaError_t e_ = (call);                                               \
    if (e_ != cudaSuccess) {                                               \
      fprintf(stderr, "bench_compress: %s: %s (%s:%d)\n", #call,           \
              cudaGetErrorString(e_), __FILE__, __LINE__);                 \
      exit(1);                                                             \
    }                                                                      \
  } while (0)

/* ---- ordinary LoRA in the same style ----------------------------------- */

typedef struct lora_args {
  int d_in, d_out, r;
  const float *X;
  float *Y;
  const float *A;  /* [n][r][d_in] */
  const float *Bt; /* [n][r][d_out] (B transposed) */
  const float *scale; /* [n] */
  const int *order, *tile_start, *tile_count, *tile_adapter;
  int ntiles;
  float *T; /* [N][r] */
} lora_args;

static __global__ void lora_shrink(lora_args a) {
  int t = blockIdx.x, start = a.tile_start[t], cnt = a.tile_count[t];
  const float *A = a.A + (size_t)a.tile_adapter[t] * a.r * a.d_in;
  int rows[LSIM__JD_TILE];
  for (int q = 0; q < LSIM__JD_TILE; q++)
    rows[q] = q < cnt ? a.order[start + q] : -1;
  for (int j = threadIdx.x; j < a.r; j += blockDim.x) {
    float acc[LSIM__JD_TILE];
    for (int q = 0; q < LSIM__JD_TILE; q++)
      acc[q] = 0.0f;
    for (int k = 0; k < a.d_in; k++) {
      float v = A[(size_t)j * a.d_in + k];
      for (int q = 0; q < LSIM__JD_TILE; q++)
        if (q < cnt)
          acc[q] = fmaf(a.X[(size_t)rows[q] * a.d_in + k], v, acc[q]);
    }
    for (int q = 0; q < cnt; q++)
      a.T[(size_t)rows[q] * a.r + j] = acc[q];
  }
}

static __global__ void lora_expand(lora_args a) {
  int t = blockIdx.x, start = a.tile_start[t], cnt = a.tile_count[t];
  int ad = a.tile_adapter[t];
  const float *Bt = a.Bt + (size_t)ad * a.r * a.d_out;
  float s = a.scale[ad];
  int rows[LSIM__JD_TILE];
  for (int q = 0; q < LSIM__JD_TILE; q++)
    rows[q] = q < cnt ? a.order[start + q] : -1;
  for (int o = threadIdx.x; o < a.d_out; o += blockDim.x) {
    float acc[LSIM__JD_TILE];
    for (int q = 0; q < LSIM__JD_TILE; q++)
      acc[q] = 0.0f;
    for (int j = 0; j < a.r; j++) {
      float b = Bt[(size_t)j * a.d_out + o];
      for (int q = 0; q < LSIM__JD_TILE; q++)
        if (q < cnt)
          acc[q] = fmaf(a.T[(size_t)rows[q] * a.r + j], b, acc[q]);
    }
    for (int q = 0; q < cnt; q++)
      a.Y[(size_t)rows[q] * a.d_out + o] += s * acc[q];
  }
}

/* ---- configuration and data --------------------------------------------- */

typedef struct cfg {
  int n, d, r0, R, k, tokens, diag, reps, warmup, check;
  unsigned long long seed;
} cfg;

static unsigned long long rng_state;
static unsigned rnd(void) {
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (unsigned)(rng_state >> 33);
}
/* small integers in integer mode (exact in fp32), else in [-1, 1) */
static float val(int ints) {
  if (ints)
    return (float)((int)(rnd() % 5) - 2);
  return (float)((double)(rnd() % 20001) / 10000.0 - 1.0);
}

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return x < y ? -1 : x > y;
}

typedef struct result {
  double lora_ms, jd_ms, lora_min, lora_max, jd_min, jd_max;
  double lora_bytes, jd_bytes;
  int distinct, clusters_hit;
  int mismatches;
} result;

static void *dalloc(size_t bytes) {
  void *p = NULL;
  CK(cudaMalloc(&p, bytes ? bytes : 4));
  return p;
}
static void *up(const void *h, size_t bytes) {
  void *p = dalloc(bytes);
  CK(cudaMemcpy(p, h, bytes, cudaMemcpyHostToDevice));
  return p;
}

/* tiles of <= LSIM__JD_TILE rows of one key (adapter or cluster) */
static int cut_tiles(const int *key, int N, int nkeys, int *order, int *ts,
                     int *tc, int *tk) {
  int m = 0, nt = 0;
  for (int c = 0; c < nkeys; c++) {
    int first = m;
    for (int i = 0; i < N; i++)
      if (key[i] == c)
        order[m++] = i;
    for (int s = first; s < m; s += LSIM__JD_TILE) {
      ts[nt] = s;
      tc[nt] = m - s < LSIM__JD_TILE ? m - s : LSIM__JD_TILE;
      tk[nt++] = c;
    }
  }
  return nt;
}

static double median_ms(cudaEvent_t *ev, int reps, double *mn, double *mx) {
  float *t = (float *)malloc(sizeof(float) * reps);
  for (int i = 0; i < reps; i++)
    CK(cudaEventElapsedTime(&t[i], ev[2 * i], ev[2 * i + 1]));
  qsort(t, reps, sizeof *t, cmp_float);
  *mn = t[0];
  *mx = t[reps - 1];
  double m = reps % 2 ? t[reps / 2] : 0.5 * (t[reps / 2 - 1] + t[reps / 2]);
  free(t);
  return m;
}

static result run(const cfg *c) {
  result res;
  memset(&res, 0, sizeof res);
  rng_state = c->seed;
  int ints = c->check, N = c->tokens, n = c->n, d = c->d, R = c->R;
  size_t cl = c->diag ? (size_t)R : (size_t)R * R;
  /* host data */
  float *X = (float *)malloc(sizeof(float) * N * d);
  float *A = (float *)malloc(sizeof(float) * n * c->r0 * d);
  float *Bt = (float *)malloc(sizeof(float) * n * c->r0 * d);
  float *sc = (float *)malloc(sizeof(float) * n);
  float *V = (float *)malloc(sizeof(float) * c->k * d * R);
  float *Ut = (float *)malloc(sizeof(float) * c->k * R * d);
  float *S = (float *)malloc(sizeof(float) * n * cl);
  int *cluster = (int *)malloc(sizeof(int) * n);
  int *row_ad = (int *)malloc(sizeof(int) * N);
  int *row_cl = (int *)malloc(sizeof(int) * N);
  int *meta = (int *)malloc(sizeof(int) * 4 * N);
  float *Y0 = (float *)malloc(sizeof(float) * N * d);
  float *Y1 = (float *)malloc(sizeof(float) * N * d);
  for (size_t t = 0; t < (size_t)N * d; t++)
    X[t] = val(ints);
  for (size_t t = 0; t < (size_t)n * c->r0 * d; t++) {
    A[t] = val(ints);
    Bt[t] = val(ints);
  }
  for (int i = 0; i < n; i++) {
    sc[i] = ints ? 1.0f : 0.5f;
    cluster[i] = i % c->k;
  }
  for (size_t t = 0; t < (size_t)c->k * d * R; t++) {
    V[t] = val(ints);
    Ut[t] = val(ints);
  }
  for (size_t t = 0; t < (size_t)n * cl; t++)
    S[t] = val(ints);
  char *seen = (char *)calloc((size_t)n + c->k, 1);
  for (int i = 0; i < N; i++) {
    row_ad[i] = (int)(rnd() % (unsigned)n);
    row_cl[i] = cluster[row_ad[i]];
    if (!seen[row_ad[i]]++)
      res.distinct++;
    if (!seen[n + row_cl[i]]++)
      res.clusters_hit++;
  }
  free(seen);
  for (size_t t = 0; t < (size_t)N * d; t++)
    Y0[t] = ints ? (float)((int)(t % 7) - 3) : 0.0f;
  res.lora_bytes = (double)res.distinct * c->r0 * 2.0 * d * 4;
  res.jd_bytes = (double)res.clusters_hit * R * 2.0 * d * 4 +
                 (double)res.distinct * cl * 4;
  /* device */
  float *dX = (float *)up(X, sizeof(float) * N * d);
  float *dY = (float *)up(Y0, sizeof(float) * N * d);
  float *dA = (float *)up(A, sizeof(float) * n * c->r0 * d);
  float *dBt = (float *)up(Bt, sizeof(float) * n * c->r0 * d);
  float *dsc = (float *)up(sc, sizeof(float) * n);
  float *dV = (float *)up(V, sizeof(float) * c->k * d * R);
  float *dUt = (float *)up(Ut, sizeof(float) * c->k * R * d);
  float *dS = (float *)up(S, sizeof(float) * n * cl);
  int *drow = (int *)up(row_ad, sizeof(int) * N);
  int lmeta[4 * 4096 + 4];
  int *lm = N <= 4096 ? lmeta : (int *)malloc(sizeof(int) * 4 * N);
  int lnt = cut_tiles(row_ad, N, n, lm, lm + N, lm + 2 * N, lm + 3 * N);
  int *dlm = (int *)up(lm, sizeof(int) * 4 * N);
  int nact = 0, jnt = 0;
  lsim__jd_tiles(row_ad, N, cluster, n, c->k, meta, meta + N, meta + 2 * N,
                 meta + 3 * N, &nact, &jnt);
  int *djm = (int *)up(meta, sizeof(int) * 4 * N);
  float *dT = (float *)dalloc(sizeof(float) * N * (R > c->r0 ? R : c->r0));
  float *dZ = (float *)dalloc(sizeof(float) * N * R);
  lora_args la = {d, d, c->r0, dX, dY, dA, dBt, dsc, dlm, dlm + N,
                  dlm + 2 * N, dlm + 3 * N, lnt, dT};
  lsim__jd_args ja;
  memset(&ja, 0, sizeof ja);
  ja.diag = c->diag;
  ja.d_in = ja.d_out = d;
  ja.R = R;
  ja.X = dX;
  ja.ldx = d;
  ja.Y = dY;
  ja.ldy = d;
  ja.V = dV;
  ja.Ut = dUt;
  ja.S = dS;
  ja.row_adapter = drow;
  ja.order = djm;
  ja.nact = nact;
  ja.tile_start = djm + N;
  ja.tile_count = djm + 2 * N;
  ja.tile_cluster = djm + 3 * N;
  ja.ntiles = jnt;
  ja.T = dT;
  ja.Z = dZ;
  if (c->check) {
    /* one run each from Y0, compared with a double-precision host
       reference (exact for these integers) */
    lora_shrink<<<lnt, LSIM__JD_THREADS>>>(la);
    lora_expand<<<lnt, LSIM__JD_THREADS>>>(la);
    CK(cudaGetLastError());
    CK(cudaMemcpy(Y1, dY, sizeof(float) * N * d, cudaMemcpyDeviceToHost));
    double *t = (double *)malloc(sizeof(double) * (R > c->r0 ? R : c->r0));
    double *z = (double *)malloc(sizeof(double) * R);
    for (int i = 0; i < N; i++) {
      int a = row_ad[i];
      for (int j = 0; j < c->r0; j++) {
        t[j] = 0;
        for (int k = 0; k < d; k++)
          t[j] += (double)X[(size_t)i * d + k] * A[((size_t)a * c->r0 + j) * d + k];
      }
      for (int o = 0; o < d; o++) {
        double y = Y0[(size_t)i * d + o];
        for (int j = 0; j < c->r0; j++)
          y += sc[a] * t[j] * Bt[((size_t)a * c->r0 + j) * d + o];
        res.mismatches += (float)y != Y1[(size_t)i * d + o];
      }
    }
    CK(cudaMemcpy(dY, Y0, sizeof(float) * N * d, cudaMemcpyHostToDevice));
    CK(lsim__jd_launch(&ja, 0));
    CK(cudaMemcpy(Y1, dY, sizeof(float) * N * d, cudaMemcpyDeviceToHost));
    for (int i = 0; i < N; i++) {
      int a = row_ad[i], cc = cluster[a];
      for (int j = 0; j < R; j++) {
        t[j] = 0;
        for (int k = 0; k < d; k++)
          t[j] += (double)X[(size_t)i * d + k] * V[((size_t)cc * d + k) * R + j];
      }
      for (int p = 0; p < R; p++) {
        if (c->diag) {
          z[p] = S[(size_t)a * R + p] * t[p];
          continue;
        }
        z[p] = 0;
        for (int q = 0; q < R; q++)
          z[p] += S[((size_t)a * R + p) * R + q] * t[q];
      }
      for (int o = 0; o < d; o++) {
        double y = Y0[(size_t)i * d + o];
        for (int j = 0; j < R; j++)
          y += z[j] * Ut[((size_t)cc * R + j) * d + o];
        res.mismatches += (float)y != Y1[(size_t)i * d + o];
      }
    }
    free(t);
    free(z);
  }
  int reps = c->reps;
  cudaEvent_t *ev = (cudaEvent_t *)malloc(sizeof(cudaEvent_t) * 2 * reps);
  for (int i = 0; i < 2 * reps; i++)
    CK(cudaEventCreate(&ev[i]));
  for (int pass = 0; pass < 2; pass++) {
    for (int w = 0; w < c->warmup; w++) {
      if (pass == 0) {
        lora_shrink<<<lnt, LSIM__JD_THREADS>>>(la);
        lora_expand<<<lnt, LSIM__JD_THREADS>>>(la);
      } else {
        CK(lsim__jd_launch(&ja, 0));
      }
    }
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    for (int i = 0; i < reps; i++) {
      CK(cudaEventRecord(ev[2 * i]));
      if (pass == 0) {
        lora_shrink<<<lnt, LSIM__JD_THREADS>>>(la);
        lora_expand<<<lnt, LSIM__JD_THREADS>>>(la);
      } else {
        CK(lsim__jd_launch(&ja, 0));
      }
      CK(cudaEventRecord(ev[2 * i + 1]));
    }
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    if (pass == 0)
      res.lora_ms = median_ms(ev, reps, &res.lora_min, &res.lora_max);
    else
      res.jd_ms = median_ms(ev, reps, &res.jd_min, &res.jd_max);
  }
  for (int i = 0; i < 2 * reps; i++)
    cudaEventDestroy(ev[i]);
  free(ev);
  void *dev[] = {dX, dY, dA, dBt, dsc, dV, dUt, dS, drow, dlm, djm, dT, dZ};
  for (size_t i = 0; i < sizeof dev / sizeof *dev; i++)
    cudaFree(dev[i]);
  if (lm != lmeta)
    free(lm);
  free(X); free(A); free(Bt); free(sc); free(V); free(Ut); free(S);
  free(cluster); free(row_ad); free(row_cl); free(meta); free(Y0); free(Y1);
  return res;
}

static void header(void) {
  printf("%-5s %5s %4s %4s %4s %3s %6s %9s %9s %11s %11s %11s %11s %8s\n",
         "meth", "n", "d", "r0", "R", "k", "tokens", "adapters", "clusters",
         "lora_ms", "jd_ms", "lora_MB", "jd_MB", "jd/lora");
}

static void line(const cfg *c, const result *r) {
  printf("%-5s %5d %4d %4d %4d %3d %6d %9d %9d %11.4f %11.4f %11.3f %11.3f "
         "%8.3f\n",
         c->diag ? "diag" : "full", c->n, c->d, c->r0, c->R, c->k, c->tokens,
         r->distinct, r->clusters_hit, r->lora_ms, r->jd_ms,
         r->lora_bytes / 1e6, r->jd_bytes / 1e6, r->jd_ms / r->lora_ms);
  printf("      min/max ms: lora %.4f/%.4f  jd %.4f/%.4f\n", r->lora_min,
         r->lora_max, r->jd_min, r->jd_max);
}

static int num(const char *s, int *out) {
  char *e;
  long v = strtol(s, &e, 10);
  if (e == s || *e || v < 1 || v > 1 << 20)
    return -1;
  *out = (int)v;
  return 0;
}

int main(int argc, char **argv) {
  cfg c = {1000, 4096, 16, 32, 1, 256, 0, 50, 10, 0, 1};
  int sweep = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    int bad = 0;
    if (!strcmp(a, "--sweep")) sweep = 1;
    else if (!strcmp(a, "--check")) c.check = 1;
    else if (!strcmp(a, "--method") && v) {
      c.diag = !strcmp(v, "diag");
      bad = strcmp(v, "diag") && strcmp(v, "full");
      i++;
    } else if (!strcmp(a, "--n") && v) bad = num(argv[++i], &c.n);
    else if (!strcmp(a, "--d") && v) bad = num(argv[++i], &c.d);
    else if (!strcmp(a, "--r0") && v) bad = num(argv[++i], &c.r0);
    else if (!strcmp(a, "--R") && v) bad = num(argv[++i], &c.R);
    else if (!strcmp(a, "--k") && v) bad = num(argv[++i], &c.k);
    else if (!strcmp(a, "--tokens") && v) bad = num(argv[++i], &c.tokens);
    else if (!strcmp(a, "--reps") && v) bad = num(argv[++i], &c.reps);
    else if (!strcmp(a, "--warmup") && v) bad = num(argv[++i], &c.warmup);
    else if (!strcmp(a, "--seed") && v) {
      c.seed = strtoull(argv[++i], NULL, 10);
    } else bad = 1;
    if (bad || c.k > c.n) {
      fprintf(stderr, "usage: bench_compress [--sweep] [--check] [--n N] "
                      "[--d D] [--r0 r] [--R R] [--k K] [--tokens T] "
                      "[--method full|diag] [--reps N] [--warmup N] "
                      "[--seed S]\n");
      return 2;
    }
  }
  int dev = 0;
  cudaDeviceProp p;
  if (cudaGetDeviceCount(&dev) != cudaSuccess || dev < 1) {
    fprintf(stderr, "bench_compress: no CUDA device\n");
    return 1;
  }
  CK(cudaGetDeviceProperties(&p, 0));
  printf("device: %s, sm_%d%d; fp32; reps %d after %d warm-up; median ms\n",
         p.name, p.major, p.minor, c.reps, c.warmup);
  int mism = 0;
  if (c.check) {
    /* integer mode, sizes where every partial sum is an exact float */
    cfg s = c;
    s.reps = 3;
    s.warmup = 1;
    int shapes[][6] = {{8, 24, 3, 4, 1, 40}, {50, 64, 4, 8, 3, 300},
                       {20, 130, 5, 6, 4, 17}, {7, 33, 2, 9, 7, 1}};
    for (int t = 0; t < 4; t++)
      for (int dg = 0; dg < 2; dg++) {
        s.n = shapes[t][0];
        s.d = shapes[t][1];
        s.r0 = shapes[t][2];
        s.R = shapes[t][3];
        s.k = shapes[t][4];
        s.tokens = shapes[t][5];
        s.diag = dg;
        s.seed = 100 + t;
        result r = run(&s);
        printf("check %s n %d d %d r0 %d R %d k %d tokens %d: %d mismatches\n",
               dg ? "diag" : "full", s.n, s.d, s.r0, s.R, s.k, s.tokens,
               r.mismatches);
        mism += r.mismatches;
      }
    c.check = 0;
    if (mism)
      return 1;
  }
  header();
  if (!sweep) {
    result r = run(&c);
    line(&c, &r);
    return 0;
  }
  int tokens[] = {16, 256, 2048}, Rs[] = {16, 32, 64}, ks[] = {1, 8};
  for (int dg = 0; dg < 2; dg++)
    for (int a = 0; a < 3; a++)
      for (int b = 0; b < 3; b++)
        for (int e = 0; e < 2; e++) {
          cfg s = c;
          s.diag = dg;
          s.tokens = tokens[a];
          s.R = Rs[b];
          s.k = ks[e];
          result r = run(&s);
          line(&s, &r);
        }
  return 0;
}
