/*
** bench_attention.cu: the paged attention kernels of issue 19 (attn.cu),
** timed, and their correctness suite.  Depends on the CUDA runtime (linked
** statically) and libc only; cuBLAS (the bf16 matmul ceiling) is opened
** with dlopen and the FLOP floors are skipped without it.
**
**   bench_attention [--reps N] [--sweep]
**       Llama-3-8B attention shapes (32 q / 8 kv heads, head dim 128, bf16,
**       16-token pages of a 2-layer page layout, pages shuffled over the
**       pool): decode of 64 sequences at 512, 1024, 4096 and 8192 keys;
**       prefill of 8 x 512 tokens without and with 4096 prior tokens.  The
**       layer's attention (lsim_cuda_attn_run, its 1-3 launches) captured
**       as a graph; device time between CUDA events, L2 flushed (256 MiB
**       memset) before every replay, median of N after warm-up; random
**       non-zero data.  Floors: KV bytes / the measured copy bandwidth
**       (decode), FLOPs / the measured cuBLAS bf16 rate (prefill).  The
**       append (one launch) is timed too.  --sweep adds forced KV splits
**       (decode) and every wide-kernel variant (prefill).
**
**   bench_attention --check [--cases N] [--fixed K]
**       tests/attn_cases.h on the fixed awkward cases (the first K of
**       them) and N random ones (default 24): float64 reference, poisoned outputs and workspace,
**       the pool checked byte for byte.  Exit status 1 on a failure.
**       Small N for compute-sanitizer.
*/
#include <cublas_v2.h> /* types only: the library is opened with dlopen */
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "tests/attn_cases.h"

#define CK(call)                                                          \
  do {                                                                    \
    cudaError_t e_ = (call);                                              \
    if (e_ != cudaSuccess) {                                              \
      fprintf(stderr, "bench_attention: %s: %s (line %d)\n", #call,       \
              cudaGetErrorString(e_), __LINE__);                          \
      exit(2);                                                            \
    }                                                                     \
  } while (0)

#define LK(call)                                                          \
  do {                                                                    \
    lsim_errbuf eb_ = LSIM_ERRBUF_INIT;                                   \
    lsim_errbuf *eb = &eb_;                                               \
    lsim_err rc_ = (call);                                                \
    if (rc_) {                                                            \
      fprintf(stderr, "bench_attention: %s: %s: %s\n", #call,             \
              lsim_err_name(rc_), eb_.msg);                               \
      exit(2);                                                            \
    }                                                                     \
  } while (0)

/* ---- the correctness suite -------------------------------------------------------- */

static int check(int ncases, int nfixed) {
  char desc[256];
  if (lsim_cuda_describe(desc, sizeof desc) <= 0) {
    printf("bench_attention --check: no CUDA device (%s)\n", desc);
    return 2;
  }
  printf("bench_attention --check: %s\n", desc);
  std::vector<attn_spec> specs;
  auto mk = [](int H, int KV, int D, int tpp, uint64_t seed) {
    attn_spec s;
    memset(&s, 0, sizeof s);
    s.q_heads = H;
    s.kv_heads = KV;
    s.D = D;
    s.layers = 2;
    s.layer = 1;
    s.tpp = tpp;
    s.qscale = 2.0;
    s.seed = seed;
    return s;
  };
  auto add = [](attn_spec &s, int rows, int ctx, int dec, int rows2) {
    attn_seq_spec &q = s.seq[s.nseq++];
    q.rows = rows;
    q.ctx = ctx;
    q.decode = dec;
    q.rows2 = rows2;
  };
  {
    attn_spec s = mk(4, 1, 64, 3, 1);
    add(s, 1, 0, 0, 1);
    add(s, 5, 0, 0, 0);
    add(s, 1, 2, 0, 3);
    specs.push_back(s);
  }
  {
    attn_spec s = mk(8, 2, 128, 7, 2);
    add(s, 37, 0, 0, 0);
    add(s, 129, 0, 0, 0);
    add(s, 65, 63, 0, 0);
    specs.push_back(s);
  }
  {
    attn_spec s = mk(16, 2, 128, 16, 3);
    add(s, 50, 333, 0, 0);
    add(s, 40, 10, 0, 61);
    add(s, 17, 0, 0, 1);
    specs.push_back(s);
  }
  {
    attn_spec s = mk(8, 2, 128, 16, 4);
    add(s, 3, 2000, 0, 0);
    add(s, 1, 1500, 1, 1);
    add(s, 1, 1999, 1, 0);
    specs.push_back(s);
    s.splits = 5;
    s.pre_splits = 3;
    s.seed = 5;
    specs.push_back(s);
  }
  {
    attn_spec s = mk(8, 1, 64, 13, 6);
    add(s, 100, 700, 0, 0);
    add(s, 20, 0, 0, 0);
    add(s, 1, 600, 1, 0);
    s.pre_splits = 4;
    s.splits = 3;
    specs.push_back(s);
  }
  if (nfixed >= 0 && (size_t)nfixed < specs.size())
    specs.resize((size_t)nfixed);
  for (int i = 0; i < ncases; i++) {
    attn_spec s;
    attn_random_spec(&s, 100 + (uint64_t)i, 6, 700);
    specs.push_back(s);
  }
  int bad = 0;
  double worst = 0;
  for (size_t i = 0; i < specs.size(); i++) {
    attn_result r;
    char why[512] = "";
    const attn_spec &s = specs[i];
    int rc = attn_run_case(&s, &r, why, sizeof why);
    if (rc) {
      printf("case %zu (H %d KV %d D %d tpp %d, %d seqs): FAIL: %s\n", i,
             s.q_heads, s.kv_heads, s.D, s.tpp, s.nseq, why);
      bad++;
    } else {
      worst = std::max(worst, r.max_ratio);
      printf("case %zu (H %d KV %d D %d tpp %d, %d seqs): ok, max err %.3g "
             "(%.2f of bound), rel l2 %.2e, %ld values; %s\n",
             i, s.q_heads, s.kv_heads, s.D, s.tpp, s.nseq, r.max_err,
             r.max_ratio, r.rel_l2, r.checked, r.desc);
    }
  }
  printf("bench_attention --check: %zu cases, %d failed; worst error %.2f of "
         "the bound (2^-8 + 2^-10) max|v|\n",
         specs.size(), bad, worst);
  return bad ? 1 : 0;
}

/* ---- cuBLAS through dlopen (the bf16 matmul ceiling) ------------------------------- */

typedef cublasStatus_t (*f_create)(cublasHandle_t *);
typedef cublasStatus_t (*f_setstream)(cublasHandle_t, cudaStream_t);
typedef cublasStatus_t (*f_gemmex)(cublasHandle_t, cublasOperation_t,
                                   cublasOperation_t, int, int, int,
                                   const void *, const void *, cudaDataType,
                                   int, const void *, cudaDataType, int,
                                   const void *, void *, cudaDataType, int,
                                   cublasComputeType_t, cublasGemmAlgo_t);

/* ---- timing ------------------------------------------------------------------------ */

__global__ void fill_kernel(uint16_t *p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    uint64_t z = (i + 1) * 0x9E3779B97F4A7C15ull + seed;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    float u = (float)(z >> 40) * (2.f / 16777216.f) - 1.f;
    if (u == 0.f)
      u = 0.5f;
    p[i] = __bfloat16_as_ushort(__float2bfloat16_rn(u));
  }
}

struct Timer {
  cudaStream_t s;
  void *flush = nullptr;
  size_t flush_bytes = (size_t)256 << 20;
  int reps = 100;
  cudaEvent_t ev[2 * 1000];
  explicit Timer(cudaStream_t st) : s(st) {
    CK(cudaMalloc(&flush, flush_bytes));
    for (auto &e : ev)
      CK(cudaEventCreate(&e));
  }
  template <typename F> double median(F fn, int warm = 5, int n = 0) {
    n = std::min(n > 0 ? n : reps, 1000);
    for (int i = 0; i < warm; i++)
      fn();
    for (int i = 0; i < n; i++) {
      CK(cudaMemsetAsync(flush, i & 0xff, flush_bytes, s));
      CK(cudaEventRecord(ev[2 * i], s));
      fn();
      CK(cudaEventRecord(ev[2 * i + 1], s));
    }
    CK(cudaStreamSynchronize(s));
    std::vector<float> t(n);
    for (int i = 0; i < n; i++)
      CK(cudaEventElapsedTime(&t[i], ev[2 * i], ev[2 * i + 1]));
    std::sort(t.begin(), t.end());
    return 1e3 * (n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]));
  }
};

struct Shape {
  const char *name;
  int nseq, rows, ctx; /* ctx: prior tokens; decode when rows == 1 */
};

static int bench(int reps, int sweep) {
  cudaStream_t s;
  CK(cudaSetDevice(0));
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  char desc[256];
  lsim_cuda_describe(desc, sizeof desc);
  printf("bench_attention: %s\n", desc);
  Timer tm(s);
  tm.reps = reps;
  double bw, peak = NAN;
  {
    size_t n = (size_t)2 << 30;
    void *a, *b;
    CK(cudaMalloc(&a, n));
    CK(cudaMalloc(&b, n));
    fill_kernel<<<1024, 256, 0, s>>>((uint16_t *)a, n / 2, 7);
    CK(cudaGetLastError());
    double us = tm.median(
        [&] { CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, s)); }, 3,
        20);
    bw = 2.0 * (double)n / (us * 1e-6);
    CK(cudaFree(a));
    CK(cudaFree(b));
  }
  {
    void *lib = dlopen("libcublas.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
      lib = dlopen("libcublas.so.12", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
      lib = dlopen("libcublas.so", RTLD_NOW | RTLD_LOCAL);
    f_create cr = lib ? (f_create)dlsym(lib, "cublasCreate_v2") : nullptr;
    f_setstream ss = lib ? (f_setstream)dlsym(lib, "cublasSetStream_v2") : nullptr;
    f_gemmex gm = lib ? (f_gemmex)dlsym(lib, "cublasGemmEx") : nullptr;
    cublasHandle_t h;
    if (cr && ss && gm && cr(&h) == CUBLAS_STATUS_SUCCESS &&
        ss(h, s) == CUBLAS_STATUS_SUCCESS) {
      const int m = 8192;
      void *a, *b, *c;
      CK(cudaMalloc(&a, (size_t)m * m * 2));
      CK(cudaMalloc(&b, (size_t)m * m * 2));
      CK(cudaMalloc(&c, (size_t)m * m * 2));
      fill_kernel<<<1024, 256, 0, s>>>((uint16_t *)a, (size_t)m * m, 11);
      fill_kernel<<<1024, 256, 0, s>>>((uint16_t *)b, (size_t)m * m, 12);
      CK(cudaGetLastError());
      const float one = 1.f, zero = 0.f;
      double us = tm.median(
          [&] {
            gm(h, CUBLAS_OP_T, CUBLAS_OP_N, m, m, m, &one, a, CUDA_R_16BF, m, b,
               CUDA_R_16BF, m, &zero, c, CUDA_R_16BF, m, CUBLAS_COMPUTE_32F,
               CUBLAS_GEMM_DEFAULT);
          },
          3, 20);
      peak = 2.0 * m * (double)m * m / (us * 1e-6);
      CK(cudaFree(a));
      CK(cudaFree(b));
      CK(cudaFree(c));
    } else {
      printf("cuBLAS unavailable: no FLOP floor\n");
    }
  }
  printf("ceilings: copy %.0f GB/s, bf16 matmul %.0f TFLOP/s\n", bw / 1e9,
         peak / 1e12);

  const int H = 32, KV = 8, D = 128, LAYERS = 2, LAYER = 1, TPP = 16;
  const int64_t page_bytes =
      TPP * lsim_cuda_attn_kv_bytes_per_token(LAYERS, KV, D);
  const Shape shapes[] = {
      {"decode64_ctx512", 64, 1, 511},    {"decode64_ctx1024", 64, 1, 1023},
      {"decode64_ctx4096", 64, 1, 4095},  {"decode64_ctx8192", 64, 1, 8191},
      {"prefill8x512_prior0", 8, 512, 0}, {"prefill8x512_prior4096", 8, 512, 4096},
  };
  printf("\n%-24s %-10s %10s %10s %9s %10s  %s\n", "shape", "knob",
         "median_us", "floor_us", "x_floor", "append_us", "plan");
  for (const Shape &sh : shapes) {
    const int n = sh.nseq, T = n * sh.rows;
    const int64_t kvlen = (int64_t)sh.ctx + sh.rows;
    const int64_t pps = (kvlen + TPP - 1) / TPP;
    const int64_t pool_pages = n * pps + 64;
    /* pages shuffled over the pool */
    std::vector<int32_t> perm(pool_pages);
    for (int64_t i = 0; i < pool_pages; i++)
      perm[i] = (int32_t)i;
    attn_rng r;
    r.s = 99;
    for (int64_t i = pool_pages - 1; i > 0; i--)
      std::swap(perm[i], perm[attn_next(&r) % (uint64_t)(i + 1)]);
    std::vector<const int32_t *> bt(n);
    std::vector<int32_t> qs(n + 1), ctx(n);
    for (int j = 0; j < n; j++) {
      bt[j] = perm.data() + (size_t)j * pps;
      qs[j] = j * sh.rows;
      ctx[j] = sh.ctx;
    }
    qs[n] = T;
    void *pool, *qkv, *out;
    CK(cudaMalloc(&pool, (size_t)(pool_pages * page_bytes)));
    const int64_t W = (int64_t)(H + 2 * KV) * D;
    CK(cudaMalloc(&qkv, (size_t)T * W * 2));
    CK(cudaMalloc(&out, (size_t)T * H * D * 2));
    fill_kernel<<<2048, 256, 0, s>>>((uint16_t *)pool,
                                     (size_t)(pool_pages * page_bytes / 2), 21);
    fill_kernel<<<1024, 256, 0, s>>>((uint16_t *)qkv, (size_t)T * W, 22);
    CK(cudaGetLastError());
    CK(cudaStreamSynchronize(s));
    lsim_cuda_attn_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.q_heads = H;
    cfg.kv_heads = KV;
    cfg.head_dim = D;
    cfg.layers = LAYERS;
    cfg.page_bytes = page_bytes;
    cfg.pool_pages = pool_pages;
    cfg.max_seqs = n;
    cfg.max_rows = T;
    cfg.max_kv = kvlen;
    cfg.stream = s;
    lsim_cuda_attn *A;
    LK(lsim_cuda_attn_open(&A, &cfg, eb));
    lsim_cuda_attn_batch b;
    b.nseq = n;
    b.npre = sh.rows > 1 ? n : 0;
    b.q_start = qs.data();
    b.ctx = ctx.data();
    b.block_table = bt.data();
    const uint16_t *q = (const uint16_t *)qkv;
    /* decode: the automatic splits, then forced ones (--sweep); prefill:
    ** the default wide variant, then each variant (--sweep) */
    std::vector<int> knob = {0};
    if (sweep)
      for (int v : sh.rows == 1 ? std::vector<int>{1, 2, 4, 8}
                                : std::vector<int>{1, 2, 3})
        knob.push_back(v);
    for (int sp : knob) {
      lsim_cuda_attn_tune tu;
      lsim_cuda_attn_get_tune(A, &tu);
      if (sh.rows > 1)
        tu.wide = sp;
      else
        tu.splits = sp;
      lsim_cuda_attn_set_tune(A, &tu);
      LK(lsim_cuda_attn_plan(A, &b, eb));
      LK(lsim_cuda_attn_append(A, LAYER, pool, q + H * D, W, q + (H + KV) * D,
                               W, eb));
      char pd[300];
      lsim_cuda_attn_describe(A, pd, sizeof pd);
      /* the layer's attention as one graph */
      cudaGraph_t g;
      cudaGraphExec_t ge;
      CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      LK(lsim_cuda_attn_run(A, LAYER, pool, q, W, out, (int64_t)H * D, eb));
      CK(cudaStreamEndCapture(s, &g));
      CK(cudaGraphInstantiate(&ge, g, 0));
      double us = tm.median([&] { CK(cudaGraphLaunch(ge, s)); });
      double app = tm.median([&] {
        LK(lsim_cuda_attn_append(A, LAYER, pool, q + H * D, W,
                                 q + (H + KV) * D, W, eb));
      });
      /* every output finite (no unwritten NaN from a stale buffer) */
      std::vector<uint16_t> o((size_t)T * H * D);
      CK(cudaStreamSynchronize(s));
      CK(cudaMemcpy(o.data(), out, o.size() * 2, cudaMemcpyDeviceToHost));
      long nonfinite = 0;
      for (uint16_t x : o)
        nonfinite += (x & 0x7f80u) == 0x7f80u;
      double floor_us;
      if (sh.rows == 1)
        floor_us = (double)n * kvlen * KV * D * 2 * 2 / bw * 1e6;
      else if (sh.ctx == 0)
        floor_us = (double)n * H * (4.0 * sh.rows * sh.rows * D) / 2 / peak * 1e6;
      else
        floor_us = (double)n * H * 4.0 * sh.rows * D *
                   (sh.ctx + sh.rows / 2.0) / peak * 1e6;
      char spn[16];
      if (sp)
        snprintf(spn, sizeof spn, sh.rows == 1 ? "splits %d" : "wide %d", sp);
      else
        snprintf(spn, sizeof spn, "auto");
      printf("%-24s %-10s %10.1f %10.1f %9.2f %10.1f  %s%s\n", sh.name, spn, us,
             floor_us, us / floor_us, app, pd,
             nonfinite ? "  NONFINITE OUTPUT" : "");
      fflush(stdout);
      CK(cudaGraphExecDestroy(ge));
      CK(cudaGraphDestroy(g));
      if (nonfinite) {
        lsim_cuda_attn_close(A);
        return 1;
      }
    }
    lsim_cuda_attn_close(A);
    CK(cudaFree(pool));
    CK(cudaFree(qkv));
    CK(cudaFree(out));
  }
  return 0;
}

int main(int argc, char **argv) {
  int do_check = 0, cases = 24, reps = 100, sweep = 0, fixed = -1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--check"))
      do_check = 1;
    else if (!strcmp(argv[i], "--cases") && i + 1 < argc)
      cases = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--fixed") && i + 1 < argc)
      fixed = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
      reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--sweep"))
      sweep = 1;
    else {
      fprintf(stderr,
              "usage: bench_attention [--reps N] [--sweep]\n"
              "       bench_attention --check [--cases N] [--fixed K]\n");
      return 2;
    }
  }
  if (cases < 0 || reps < 1) {
    fprintf(stderr, "bench_attention: --cases >= 0, --reps >= 1\n");
    return 2;
  }
  return do_check ? check(cases, fixed) : bench(reps, sweep);
}
