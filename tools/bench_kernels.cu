/*
** bench_kernels.cu: `lorasim bench kernels` as a standalone executable.
**
** Depends on the CUDA runtime (linked statically) and libc only: cuBLAS,
** for the base GEMM and the matmul ceiling, is opened with dlopen at run
** time and its rows are skipped when it is absent.  The engine's planner
** (engine/rowplan.c, engine/err.c) is compiled in.
**
**   bench_kernels [--sweep] [--reps N] [--out DIR]
**       The table of issue 6: for decode64 (64 rows over 64 adapters, one
**       row each, shuffled), mixed256 (256 rows over 32 adapters, 8 each,
**       shuffled) and prefill4096 (4096 rows over 8 adapters in 512-row
**       segments), h_in = h_out = 4096, bf16, ranks 16, 64, a mixed-rank
**       batch (8, 16, 32, 64 by adapter) and the same batch at the mean
**       rank (30): every path, the chosen one, the base GEMM (cuBLAS) and
**       base + branch.  Device time of a replayed CUDA graph between CUDA
**       events, L2 flushed (256 MiB memset) before every replay, median;
**       random non-zero data; the copy bandwidth (2 GiB device-to-device)
**       and the bf16 matmul rate (cuBLAS 8192^3) measured in the same run
**       give the floor, max(ideal bytes / bandwidth, flops / rate), ideal
**       bytes = the adapters' A and B + X read + Y read and written.
**       --sweep adds rows for other split / column-block settings.
**       Base GEMM plus branch: every composition of Comp (seq, fork,
**       forkpdl, seqpdl, side, beta1, chunkC; below) captured as one graph,
**       checked once against the GEMM's own output plus the float64 delta
**       (the bf16 bound, CompRef) and timed; exit status 1 if one is
**       outside the bound.
**
**   bench_kernels --compose [--reps N] [--out DIR]
**       Only the compositions (and the branch alone) at ranks 16 and 64.
**
**   bench_kernels --part [--reps N] [--out DIR]
**       The partitioned compositions (issue 23) at decode64 and mixed256,
**       ranks 16 and 64: the base GEMM through cuBLASLt targeting nsm - k
**       SMs beside the branch (side, fork, forkpdl), the branch on green
**       contexts of k SMs, their baselines; a table of the best per k.
**
**   bench_kernels --check [--cases N]
**       The kernel correctness suite without SQLite, GMP or Criterion:
**       seeded random shapes and plans (base rows, one-row segments,
**       prefills crossing tiles and doff, ranks 1..128, sizes that are not
**       multiples of any tile), integer mode checked bit for bit against an
**       int64 reference on every path, both 16-bit types and several launch
**       settings, with the workspace poisoned, NaN in the stride padding of
**       X, canaries around Y; then random bf16 values, relative error
**       against a float64 reference (<= 1e-2); then every composition of
**       the base GEMM (cuBLAS) and the branch on three batches (check_compose:
**       all output rows written, within the bf16 bound of GEMM + delta,
**       identical when the graph runs again; skipped without cuBLAS).  Exit
**       status 1 on any failure.  Small --cases for compute-sanitizer.
*/
#include <cublas_v2.h> /* types only: the library is opened with dlopen */
#include <cuda.h>       /* types only: green contexts through dlopen */
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdarg.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "backends/cuda/blas.h"
#include "backends/cuda/cuda.h"

#define CK(call)                                                           \
  do {                                                                     \
    cudaError_t e_ = (call);                                               \
    if (e_ != cudaSuccess) {                                               \
      fprintf(stderr, "bench_kernels: %s: %s (line %d)\n", #call,          \
              cudaGetErrorString(e_), __LINE__);                           \
      exit(2);                                                             \
    }                                                                      \
  } while (0)

#define LK(call)                                                           \
  do {                                                                     \
    lsim_errbuf eb_ = LSIM_ERRBUF_INIT;                                    \
    lsim_errbuf *eb = &eb_;                                                \
    lsim_err rc_ = (call);                                                 \
    if (rc_) {                                                             \
      fprintf(stderr, "bench_kernels: %s: %s: %s\n", #call,                \
              lsim_err_name(rc_), eb_.msg);                                \
      exit(2);                                                             \
    }                                                                      \
  } while (0)

/* ---- small helpers ----------------------------------------------------------- */

struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  int below(int n) { return (int)(next() % (uint64_t)n); }
  double unit() { return (double)(next() >> 11) * (1.0 / 9007199254740992.0); }
};

static void shuffle(Rng &r, std::vector<int> &v) {
  for (int i = (int)v.size() - 1; i > 0; i--)
    std::swap(v[i], v[r.below(i + 1)]);
}

static int round8(int n) { return (n + 7) & ~7; }

static lsim_plan_entry ent(int64_t uid, int adapter, int rank, int phase,
                           int rows) {
  lsim_plan_entry e;
  memset(&e, 0, sizeof e);
  e.request = uid;
  e.adapter = adapter;
  e.rank = rank;
  e.phase = phase;
  e.rows = rows;
  return e;
}

/* Uniform in [-scale, scale), never exactly zero, rounded to bf16. */
__global__ void fill_kernel(uint16_t *p, size_t n, uint64_t seed,
                            float scale) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    uint64_t z = (seed + i) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    float u = (float)(z >> 40) * (1.0f / 16777216.0f) * 2.f - 1.f;
    if (u == 0.f)
      u = 0.5f;
    p[i] = __bfloat16_as_ushort(__float2bfloat16_rn(u * scale));
  }
}

static void dev_fill(uint16_t *p, size_t n, uint64_t seed, float scale,
                     cudaStream_t s) {
  fill_kernel<<<1024, 256, 0, s>>>(p, n, seed, scale);
  CK(cudaGetLastError());
}

static void host_fill(std::vector<uint16_t> &v, Rng &r, float scale) {
  for (auto &x : v) {
    float u = (float)(r.unit() * 2.0 - 1.0);
    if (u == 0.f)
      u = 0.5f;
    x = lsim_cuda_from_float(LSIM_CUDA_BF16, u * scale);
  }
}

static float bf(uint16_t h) { return lsim_cuda_to_float(LSIM_CUDA_BF16, h); }

/* ---- cuBLAS through dlopen ------------------------------------------------------ */

typedef cublasStatus_t (*f_create)(cublasHandle_t *);
typedef cublasStatus_t (*f_setstream)(cublasHandle_t, cudaStream_t);
typedef cublasStatus_t (*f_setws)(cublasHandle_t, void *, size_t);
typedef cublasStatus_t (*f_gemmex)(cublasHandle_t, cublasOperation_t,
                                   cublasOperation_t, int, int, int,
                                   const void *, const void *, cudaDataType,
                                   int, const void *, cudaDataType, int,
                                   const void *, void *, cudaDataType, int,
                                   cublasComputeType_t, cublasGemmAlgo_t);

struct Blas {
  void *lib = nullptr;
  cublasHandle_t h = nullptr;
  f_gemmex gemm = nullptr;
  void *ws = nullptr;
  std::string why;
  bool open(cudaStream_t s) {
    const char *names[] = {"libcublas.so.13", "libcublas.so.12",
                           "libcublas.so"};
    for (const char *n : names)
      if ((lib = dlopen(n, RTLD_NOW | RTLD_LOCAL)))
        break;
    if (!lib) {
      why = std::string("dlopen libcublas: ") + dlerror();
      return false;
    }
    f_create cr = (f_create)dlsym(lib, "cublasCreate_v2");
    f_setstream ss = (f_setstream)dlsym(lib, "cublasSetStream_v2");
    f_setws sw = (f_setws)dlsym(lib, "cublasSetWorkspace_v2");
    gemm = (f_gemmex)dlsym(lib, "cublasGemmEx");
    setstream = ss;
    if (!cr || !ss || !sw || !gemm) {
      why = "cublas symbols missing";
      return false;
    }
    if (cr(&h) != CUBLAS_STATUS_SUCCESS) {
      why = "cublasCreate failed";
      return false;
    }
    CK(cudaMalloc(&ws, 64 << 20));
    if (ss(h, s) != CUBLAS_STATUS_SUCCESS ||
        sw(h, ws, 64 << 20) != CUBLAS_STATUS_SUCCESS) {
      why = "cublas stream/workspace failed";
      return false;
    }
    return true;
  }
  /* Y[n][m] = X[n][k] W^T, W [m][k], all row-major bf16. */
  bool run(int n, int m, int k, const void *X, const void *W, void *Y) {
    return run(n, m, k, X, k, W, Y, m, 0.f);
  }
  /* Y[n][m] = X[n][k] W^T + beta Y, row strides ldx and ldy */
  bool run(int n, int m, int k, const void *X, int ldx, const void *W,
           void *Y, int ldy, float beta) {
    const float one = 1.f;
    return gemm(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, W, CUDA_R_16BF, k,
                X, CUDA_R_16BF, ldx, &beta, Y, CUDA_R_16BF, ldy,
                CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) ==
           CUBLAS_STATUS_SUCCESS;
  }
  f_setstream setstream = nullptr;
  bool stream(cudaStream_t s) {
    return setstream(h, s) == CUBLAS_STATUS_SUCCESS;
  }
};

/* ---- timing ---------------------------------------------------------------------------- */

/* Read n 16-byte vectors (sum into sink so the loads stay); CS: streaming
** loads (ld.global.cs, evict first), else plain read-only ones (__ldg). */
template <bool CS = true>
__global__ void read_kernel(const uint4 *p, size_t n, float *sink) {
  uint32_t acc = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    uint4 v = CS ? __ldcs(p + i) : __ldg(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678u)
    sink[threadIdx.x] = 1.f;
}

struct Timer {
  cudaStream_t s;
  void *flush = nullptr;
  size_t flush_bytes = (size_t)256 << 20;
  int reps = 100;
  std::vector<cudaEvent_t> ev;
  explicit Timer(cudaStream_t st) : s(st) {
    CK(cudaMalloc(&flush, flush_bytes));
    ev.resize(2 * 1000);
    for (auto &e : ev)
      CK(cudaEventCreate(&e));
  }
  /* median device time (us) of fn() between events, L2 flushed first */
  bool clean = false; /* flush by reading (clean lines) instead of memset */
  float *sink = nullptr;
  template <typename F> double median(F fn, int warm = 5, int n = 0) {
    if (n <= 0)
      n = reps;
    n = std::min(n, 1000);
    if (!sink)
      CK(cudaMalloc(&sink, 1 << 20));
    for (int i = 0; i < warm; i++)
      fn();
    for (int i = 0; i < n; i++) {
      if (clean) {
        read_kernel<<<1024, 256, 0, s>>>((const uint4 *)flush,
                                         flush_bytes / 16, sink);
        CK(cudaGetLastError());
      } else {
        CK(cudaMemsetAsync(flush, i & 0xff, flush_bytes, s));
      }
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

/* Capture fn() on stream s into an executable graph; false on failure. */
template <typename F>
static bool capture(cudaStream_t s, F fn, cudaGraphExec_t *ge,
                    std::string *why, unsigned long long flags = 0) {
  cudaGraph_t g = nullptr;
  cudaError_t e = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  if (e != cudaSuccess) {
    *why = cudaGetErrorString(e);
    return false;
  }
  bool ok = fn();
  e = cudaStreamEndCapture(s, &g);
  if (!ok || e != cudaSuccess) {
    *why = ok ? cudaGetErrorString(e) : "launch failed during capture";
    if (g)
      cudaGraphDestroy(g);
    cudaGetLastError();
    return false;
  }
  e = cudaGraphInstantiateWithFlags(ge, g, flags);
  cudaGraphDestroy(g);
  if (e != cudaSuccess) {
    *why = cudaGetErrorString(e);
    cudaGetLastError();
    return false;
  }
  return true;
}

/*
** The device pool's paged layout, for the suite and the benchmark: every
** factor row of every adapter on its own page (pw elements: the module's
** width rounded up to 8, plus `extra`: pw), pages handed out in a random order
** from a pool with `spare` pages more than needed, so page tables are
** fragmented.  Used pages are zero past their row (as the pool's page
** images), unused pages NaN.  ref[id] names adapter id's page table.
*/
struct Paged {
  void *pool = nullptr;
  int32_t *ptab = nullptr;
  int64_t pw = 0; /* elements per page */
  std::vector<lsim_cuda_paged_ref> ref;
  void build(int d_in, int d_out, const std::vector<int> &ids,
             const std::vector<int> &ranks, const std::vector<float> &scale,
             const std::vector<std::vector<uint16_t>> &A,
             const std::vector<std::vector<uint16_t>> &B, uint64_t seed,
             int extra, int spare_pct = 25) {
    pw = round8(std::max(d_in, d_out)) + extra;
    size_t used = 0;
    for (int r : ranks)
      used += 2 * (size_t)r;
    const size_t np = used + used * spare_pct / 100 + 3;
    std::vector<int> perm(np);
    for (size_t i = 0; i < np; i++)
      perm[i] = (int)i;
    Rng rng(seed);
    shuffle(rng, perm);
    std::vector<uint16_t> img(np * (size_t)pw, 0xFFFFu); /* NaN in both */
    std::vector<int32_t> pt(used > 0 ? used : 1);
    int maxid = 0;
    for (int id : ids)
      maxid = std::max(maxid, id);
    ref.assign((size_t)maxid + 1, lsim_cuda_paged_ref{nullptr, 0, 0.f});
    std::vector<size_t> off(ids.size());
    size_t n = 0;
    for (size_t a = 0; a < ids.size(); a++) {
      const int r = ranks[a];
      off[a] = n;
      for (int k = 0; k < 2 * r; k++, n++) {
        uint16_t *row = &img[(size_t)perm[n] * pw];
        std::fill(row, row + pw, (uint16_t)0);
        if (k < r)
          memcpy(row, &A[a][(size_t)k * d_in], (size_t)d_in * 2);
        else
          for (int o = 0; o < d_out; o++)
            row[o] = B[a][(size_t)o * r + (k - r)];
        pt[n] = perm[n];
      }
    }
    CK(cudaMalloc(&pool, img.size() * 2));
    CK(cudaMalloc((void **)&ptab, pt.size() * 4));
    CK(cudaMemcpy(pool, img.data(), img.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(ptab, pt.data(), pt.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaDeviceSynchronize()); /* pageable copies: see run_case */
    for (size_t a = 0; a < ids.size(); a++)
      ref[ids[a]] = lsim_cuda_paged_ref{ptab + off[a], ranks[a], scale[a]};
  }
  void release() {
    if (pool)
      CK(cudaFree(pool));
    if (ptab)
      CK(cudaFree(ptab));
    pool = nullptr;
    ptab = nullptr;
    ref.clear();
  }
};

/* ---- the base GEMM and the adapter branch in one graph --------------------------------- */

/*
** How a serving engine runs one target module: Y = X W^T (the base GEMM,
** cuBLAS), then Y += delta (the branch) in place.  The shrink reads only X
** and the factors, never Y, so it need not wait for the GEMM.  Compositions
** (each captured as one graph, launched on one stream):
**   seq     the GEMM, then the branch (shrink, expand) on the same stream;
**   fork    the graph forks at its start: the GEMM on a second stream, the
**           shrink on the first, concurrently; an event joins them before
**           the expand, which adds into the GEMM's output in place (the
**           expand is then an ordinary launch: with PDL it would load Y
**           before waiting, while the GEMM may still write it);
**   forkpdl the same, but the expand is a programmatic dependent launch
**           (tune only = 3): it starts while its prerequisites finish,
**           prefetches its factors, and reads Y and the workspace only
**           after griddepcontrol.wait;
**   beta1   the delta first: Y zeroed by a memset (forked beside the
**           shrink), the expand into it, then the GEMM with beta = 1;
**   seqpdl  seq with both launches of the branch programmatic dependents
**           (tune only = 4): the shrink, which does not read Y, may start
**           as soon as the GEMM's blocks let it and completes only after
**           the GEMM; the expand reads Y after its wait;
**   side    the whole branch beside the GEMM: a zeroed buffer D (memset),
**           the shrink and the expand into D on the first stream while the
**           GEMM runs on the second; after the join one small kernel adds D
**           into Y (Y is N rows: small at decode shapes); the delta is
**           rounded to bf16 in D, then the sum once more;
**   chunkC  the GEMM in C row chunks on the first stream; chunk j's branch
**           (its own context and plan over the rows of chunk j) on its own
**           stream: its shrink forked at the start, its expand after GEMM
**           chunk j, so that it overlaps GEMM chunk j+1.
** prio: 0 every stream at the default priority; 1 the branch's stream at
** the highest; 2 the GEMM's.  Graphs are instantiated with node priorities
** (stream capture copies each stream's priority into its kernel nodes).
** splits: the shrink's d_in ranges (0: the chooser's rule); fewer ranges,
** fewer blocks beside the GEMM.
*/
enum {
  COMP_SEQ,
  COMP_FORK,
  COMP_BETA1,
  COMP_CHUNK,
  COMP_FORKPDL,
  COMP_SIDE,
  COMP_SEQPDL,
  COMP_DIAG, /* not a composition: the GEMM beside the shrink alone */
  COMP_GREEN, /* the branch on a green context of k SMs (a hard partition),
              ** the GEMM on one of the other nsm - k (prio 0) or on the
              ** whole device (prio 1); the delta into D, added after the
              ** join (issue 23) */
  COMP_GEMM1 /* one pass: the shrink, then lsim_cuda_lora_run_gemm (the
             ** GEMM with the expand in its epilogue; issue 23) */
};

/* Y[i] += D[i] over n rows of d_out (bf16, fp32 sum rounded once) */
__global__ void add_rows_kernel(uint16_t *Y, const uint16_t *D, int n,
                                int d_out, int ldy) {
  const int per = d_out / 8; /* d_out a multiple of 8 here */
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n * per;
       i += gridDim.x * blockDim.x) {
    const size_t off = (size_t)(i / per) * ldy + (size_t)(i % per) * 8;
    uint4 y = *reinterpret_cast<const uint4 *>(Y + off);
    const uint4 d = *reinterpret_cast<const uint4 *>(D + off);
    uint32_t *yw = &y.x;
    const uint32_t *dw = &d.x;
    for (int k = 0; k < 4; k++) {
      float lo = __uint_as_float(yw[k] << 16) + __uint_as_float(dw[k] << 16);
      float hi = __uint_as_float(yw[k] & 0xffff0000u) +
                 __uint_as_float(dw[k] & 0xffff0000u);
      yw[k] = (uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(lo)) |
              ((uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(hi)) << 16);
    }
    *reinterpret_cast<uint4 *>(Y + off) = y;
  }
}
struct CompVar {
  std::string label;
  int kind, path, splits, prio, chunks;
  int gcs = 0, gbm = 0, gpf = 1; /* gemm1: tune gemm_cs, gemm_bm, prefetch */
  float beta = 0.f;              /* gemm1: Y = beta Y + X W^T + delta */
  int gk = 1;  /* one-pass kernel (tune gemm_kernel): 1 lgemm ("gemm1"),
               ** 2 the streaming wgemm ("gemm2") */
  int gns = 0; /* gemm2: tune gemm_ns (stages) */
  int smt = -1; /* the base GEMM: -1 cuBLAS GemmEx; >= 0 cuBLASLt with
                ** this SM count target (0: all SMs): the partitioned
                ** compositions (issue 23) */
  int bsms = 0; /* the branch's grids sized for this many SMs (tune sms;
                ** 0: all) */
  bool eager = false; /* launched directly, not as a graph (timing only:
                      ** compare only with other eager rows) */
};

#define COMP_MAXCH 8

/* The rows [r0, r1) of a batch whose packed order is the plan's default
** (prefills, then decodes, each in the order of e), as entries of their own. */
static std::vector<lsim_plan_entry>
rows_between(const std::vector<lsim_plan_entry> &e, int r0, int r1) {
  std::vector<lsim_plan_entry> out;
  int row = 0;
  for (int ph = 0; ph < 2; ph++)
    for (const lsim_plan_entry &x : e) {
      if ((x.phase == LSIM_PHASE_PREFILL) != (ph == 0))
        continue;
      int a = std::max(row, r0), b = std::min(row + x.rows, r1);
      if (a < b) {
        lsim_plan_entry y = x;
        y.rows = b - a;
        out.push_back(y);
      }
      row += x.rows;
    }
  return out;
}

/*
** Green contexts (CUDA driver API, opened with dlopen like cuBLAS): the
** device's SMs split into a partition of k for the branch and one of the
** rest for the GEMM, each with its own stream, so neither kernel's blocks
** can take the other's SMs (cuBLASLt's SM count target is only a hint to
** its heuristic).  Lb: a lorasim context on the branch's stream.
*/
struct Green {
  int k = 0, ka = 0, kb = 0; /* asked; SMs of the GEMM's and branch's */
  CUgreenCtx ga = nullptr, gb = nullptr;
  cudaStream_t sa = nullptr, sb = nullptr;
  lsim_cuda_lora *Lb = nullptr;
};
struct GreenApi {
  void *lib = nullptr;
  bool ok = false;
  std::string why;
  CUresult (*get_res)(CUdevice, CUdevResource *, CUdevResourceType) = nullptr;
  CUresult (*split)(CUdevResource *, unsigned *, const CUdevResource *,
                    CUdevResource *, unsigned, unsigned) = nullptr;
  CUresult (*gen)(CUdevResourceDesc *, CUdevResource *, unsigned) = nullptr;
  CUresult (*create)(CUgreenCtx *, CUdevResourceDesc, CUdevice,
                     unsigned) = nullptr;
  CUresult (*stream)(CUstream *, CUgreenCtx, unsigned, int) = nullptr;
  bool open() {
    if (!(lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL))) {
      why = "dlopen libcuda.so.1";
      return false;
    }
    *(void **)&get_res = dlsym(lib, "cuDeviceGetDevResource");
    *(void **)&split = dlsym(lib, "cuDevSmResourceSplitByCount");
    *(void **)&gen = dlsym(lib, "cuDevResourceGenerateDesc");
    *(void **)&create = dlsym(lib, "cuGreenCtxCreate");
    *(void **)&stream = dlsym(lib, "cuGreenCtxStreamCreate");
    ok = get_res && split && gen && create && stream;
    if (!ok)
      why = "green context symbols missing";
    return ok;
  }
  /* the SMs split into k (rounded up by the driver) and the rest */
  bool make(Green &g, int k, const lsim_cuda_lora_cfg &cfg0) {
    CUdevResource all, part, rest;
    unsigned n = 1;
    memset(&rest, 0, sizeof rest);
    CUgreenCtx c[2];
    CUdevResource *r[2] = {&rest, &part};
    if (get_res(0, &all, CU_DEV_RESOURCE_TYPE_SM) != CUDA_SUCCESS ||
        split(&part, &n, &all, &rest, 0, (unsigned)k) != CUDA_SUCCESS ||
        n != 1) {
      why = "SM split failed";
      return false;
    }
    for (int i = 0; i < 2; i++) {
      CUdevResourceDesc d;
      CUstream st;
      if (gen(&d, r[i], 1) != CUDA_SUCCESS ||
          create(&c[i], d, 0, CU_GREEN_CTX_DEFAULT_STREAM) != CUDA_SUCCESS ||
          stream(&st, c[i], CU_STREAM_NON_BLOCKING, 0) != CUDA_SUCCESS) {
        why = "green context or stream failed";
        return false;
      }
      (i ? g.sb : g.sa) = (cudaStream_t)st;
    }
    g.k = k;
    g.ga = c[0];
    g.gb = c[1];
    g.ka = (int)rest.sm.smCount;
    g.kb = (int)part.sm.smCount;
    lsim_cuda_lora_cfg cfg = cfg0;
    cfg.stream = g.sb;
    lsim_errbuf eb = LSIM_ERRBUF_INIT;
    if (lsim_cuda_lora_open(&g.Lb, &cfg, &eb)) {
      why = eb.msg;
      return false;
    }
    return true;
  }
};

struct Comp {
  Blas *blas = nullptr;
  GreenApi gapi;
  std::vector<Green> green; /* one per k asked */
  Green *gcur = nullptr;    /* the prepared one */
  lsim_blas *lb = nullptr; /* cuBLASLt (blas.c), for v.smt >= 0 */
  cudaStream_t s = nullptr;                    /* L's stream: the origin */
  cudaStream_t g_lo = nullptr, g_hi = nullptr; /* the GEMM's fork streams */
  cudaStream_t s_hi = nullptr;                 /* Lhi's stream */
  cudaStream_t c_st[COMP_MAXCH] = {};          /* chunk contexts' streams */
  lsim_cuda_lora *L = nullptr, *Lhi = nullptr, *Lc[COMP_MAXCH] = {};
  cudaEvent_t ev[4 * COMP_MAXCH + 4];
  int nch = 0;
  lsim_rowplan cp[COMP_MAXCH];
  int ncp = 0, cut[COMP_MAXCH + 1];
  lsim_cuda_lora_tune tune0;
  uint16_t *D = nullptr; /* the side composition's delta buffer */
  size_t dcap = 0;

  /* L is the caller's context (stream s); nch chunk contexts */
  void open(const lsim_cuda_lora_cfg &cfg0, lsim_cuda_lora *L0, Blas *b,
            int nchunk) {
    blas = b;
    L = L0;
    s = (cudaStream_t)cfg0.stream;
    nch = nchunk;
    int least, greatest;
    CK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    CK(cudaStreamCreateWithPriority(&g_lo, cudaStreamNonBlocking, least));
    CK(cudaStreamCreateWithPriority(&g_hi, cudaStreamNonBlocking, greatest));
    CK(cudaStreamCreateWithPriority(&s_hi, cudaStreamNonBlocking, greatest));
    lsim_cuda_lora_cfg cfg = cfg0;
    cfg.stream = s_hi;
    LK(lsim_cuda_lora_open(&Lhi, &cfg, eb));
    for (int j = 0; j < nch; j++) {
      CK(cudaStreamCreateWithPriority(&c_st[j], cudaStreamNonBlocking,
                                      greatest));
      cfg.stream = c_st[j];
      LK(lsim_cuda_lora_open(&Lc[j], &cfg, eb));
    }
    for (auto &e : ev)
      CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    lsim_cuda_lora_get_tune(L, &tune0);
    memset(cp, 0, sizeof cp);
  }
  void load(int id, int rank, float scale, const uint16_t *A,
            const uint16_t *B, bool chunks) {
    LK(lsim_cuda_lora_load(Lhi, id, rank, scale, A, B, eb));
    for (Green &g : green)
      LK(lsim_cuda_lora_load(g.Lb, id, rank, scale, A, B, eb));
    for (int j = 0; chunks && j < nch; j++)
      LK(lsim_cuda_lora_load(Lc[j], id, rank, scale, A, B, eb));
  }
  void close() {
    release_chunks();
    if (D)
      cudaFree(D);
    lsim_cuda_lora_close(Lhi);
    for (Green &g : green) { /* the green contexts live until exit */
      lsim_cuda_lora_close(g.Lb);
      g.Lb = nullptr;
    }
    for (int j = 0; j < nch; j++) {
      lsim_cuda_lora_close(Lc[j]);
      cudaStreamDestroy(c_st[j]);
    }
    for (auto &e : ev)
      cudaEventDestroy(e);
    cudaStreamDestroy(g_lo);
    cudaStreamDestroy(g_hi);
    cudaStreamDestroy(s_hi);
  }
  void release_chunks() {
    for (int j = 0; j < ncp; j++)
      lsim_rowplan_release(&cp[j]);
    ncp = 0;
  }
  /* plan C for v (AUTO: the chooser's pick, or sgmv_mma where it picks the
  ** one-launch fused path, which cannot be split); false: not applicable */
  bool plan_one(lsim_cuda_lora *C, const lsim_rowplan *p, const CompVar &v,
                std::string *why) {
    lsim_cuda_lora_tune t = tune0;
    t.shrink_splits = v.splits;
    t.gemm_cs = v.gcs;
    t.gemm_bm = v.gbm;
    t.gemm_prefetch = v.gpf;
    t.gemm_probe = v.kind == COMP_GEMM1 ? v.prio : 0;
    t.gemm_kernel = v.gk;
    t.gemm_ns = v.gns;
    t.sms = v.bsms;
    lsim_cuda_lora_set_tune(C, &t);
    lsim_errbuf eb = LSIM_ERRBUF_INIT;
    int path = v.path;
    if (v.kind == COMP_GEMM1 && path == LSIM_CUDA_PATH_AUTO) {
      int rmax = 0;
      for (int i = 0; i < p->nseg; i++)
        rmax = std::max(rmax, p->seg_rank[i]);
      /* the shrink path a one-pass plan takes (the composition chooser
      ** itself takes the one pass nowhere: measured slower) */
      lsim_cuda_gemm_choose(p, rmax, 0, 0, &path);
      if (path == LSIM_CUDA_PATH_AUTO) {
        *why = "no one-pass GEMM for this shape";
        return false;
      }
    }
    if (lsim_cuda_lora_plan(C, p, path, &eb)) {
      *why = eb.msg;
      return false;
    }
    const char *gw = "";
    if (v.kind == COMP_GEMM1 && !lsim_cuda_lora_gemm_ok(C, &gw)) {
      *why = gw;
      return false;
    }
    if (v.kind != COMP_SEQ && v.kind != COMP_SIDE && v.kind != COMP_GEMM1 &&
        lsim_cuda_lora_path(C) == LSIM_CUDA_PATH_FUSED &&
        lsim_cuda_lora_plan(C, p, LSIM_CUDA_PATH_SGMV_MMA, &eb)) {
      *why = eb.msg;
      return false;
    }
    if (lsim_cuda_lora_sync(C, &eb)) {
      *why = eb.msg;
      return false;
    }
    return true;
  }
  /* prepare the contexts for v: p the whole batch, e its entries */
  int ldy_max = 0; /* the widest Y row stride the side composition meets */
  bool prepare(const CompVar &v, const lsim_rowplan *p,
               const std::vector<lsim_plan_entry> &e, int N,
               std::string *why) {
    release_chunks();
    if (v.kind == COMP_CHUNK) {
      if (v.chunks > nch) {
        *why = "too few chunk contexts";
        return false;
      }
      for (int j = 0; j <= v.chunks; j++)
        cut[j] = (int)((int64_t)N * j / v.chunks);
      for (int j = 0; j < v.chunks; j++) {
        std::vector<lsim_plan_entry> ej = rows_between(e, cut[j], cut[j + 1]);
        lsim_errbuf eb = LSIM_ERRBUF_INIT;
        if (lsim_rowplan_build(&cp[j], ej.data(), (int)ej.size(), NULL, 0,
                               &eb)) {
          *why = eb.msg;
          return false;
        }
        ncp = j + 1;
        if (!plan_one(Lc[j], &cp[j], v, why))
          return false;
      }
      return true;
    }
    if (v.kind == COMP_GREEN) {
      gcur = nullptr;
      for (Green &g : green)
        if (g.k == v.chunks)
          gcur = &g;
      if (!gcur) {
        *why = "no green context of " + std::to_string(v.chunks) + " SMs";
        return false;
      }
    }
    if ((v.kind == COMP_SIDE || v.kind == COMP_GREEN) &&
        (size_t)N * ldy_max > dcap) {
      if (D)
        CK(cudaFree(D));
      dcap = (size_t)N * ldy_max;
      CK(cudaMalloc((void **)&D, dcap * 2));
    }
    if (v.kind == COMP_GREEN)
      return plan_one(gcur->Lb, p, v, why);
    return plan_one((v.kind == COMP_FORK || v.kind == COMP_FORKPDL ||
                     v.kind == COMP_SIDE || v.kind == COMP_DIAG) &&
                            v.prio == 1
                        ? Lhi
                        : L,
                    p, v, why);
  }
  /* the shrink (only 1), the expand (only 2) or both (0) of C */
  static bool part(lsim_cuda_lora *C, int only, const void *X, int ldx,
                   void *Y, int ldy) {
    lsim_cuda_lora_tune t;
    lsim_cuda_lora_get_tune(C, &t);
    t.only = only;
    lsim_cuda_lora_set_tune(C, &t);
    bool ok = lsim_cuda_lora_run(C, X, ldx, Y, ldy, NULL) == 0;
    t.only = 0;
    lsim_cuda_lora_set_tune(C, &t);
    return ok;
  }
  /* capture v (prepared) into an executable graph */
  bool build(const CompVar &v, int N, int d_in, int d_out, const uint16_t *X,
             int ldx, const uint16_t *W, uint16_t *Y, int ldy,
             cudaGraphExec_t *ge, std::string *why, bool eager = false) {
    auto rec = [&](int i, cudaStream_t st) {
      return cudaEventRecord(ev[i], st) == cudaSuccess;
    };
    auto wt = [&](cudaStream_t st, int i) {
      return cudaStreamWaitEvent(st, ev[i], 0) == cudaSuccess;
    };
    const int smt = v.smt;
    lsim_blas *lbp = lb;
    auto gemm = [=](cudaStream_t st, int r0, int r1, float beta) {
      if (smt >= 0)
        return lbp && lsim_blas_gemm_lt(lbp, st, smt, r1 - r0, d_out, d_in,
                                        X + (size_t)r0 * ldx, ldx, W,
                                        Y + (size_t)r0 * ldy, ldy, beta, 0,
                                        NULL) == 0;
      return blas->stream(st) &&
             blas->run(r1 - r0, d_out, d_in, X + (size_t)r0 * ldx, ldx, W,
                       Y + (size_t)r0 * ldy, ldy, beta);
    };
    cudaStream_t O = s;
    std::function<bool()> fn;
    switch (v.kind) {
    case COMP_SEQ:
      fn = [&] {
        return gemm(s, 0, N, 0.f) &&
               lsim_cuda_lora_run(L, X, ldx, Y, ldy, NULL) == 0;
      };
      break;
    case COMP_FORK:
    case COMP_FORKPDL: {
      lsim_cuda_lora *C = v.prio == 1 ? Lhi : L;
      O = v.prio == 1 ? s_hi : s;
      cudaStream_t G = v.prio == 2 ? g_hi : g_lo;
      const int ex = v.kind == COMP_FORKPDL ? 3 : 2;
      fn = [=] {
        return rec(0, O) && wt(G, 0) && gemm(G, 0, N, 0.f) && rec(1, G) &&
               part(C, 1, X, ldx, Y, ldy) && wt(O, 1) &&
               part(C, ex, X, ldx, Y, ldy);
      };
      break;
    }
    case COMP_SEQPDL:
      fn = [&] { return gemm(s, 0, N, 0.f) && part(L, 4, X, ldx, Y, ldy); };
      break;
    case COMP_GEMM1:
      fn = [&] {
        return lsim_cuda_lora_run_gemm(L, X, ldx, W, d_in, Y, ldy, v.beta,
                                       NULL) == 0;
      };
      break;
    case COMP_SIDE:
    case COMP_DIAG: {
      lsim_cuda_lora *C = v.prio == 1 ? Lhi : L;
      O = v.prio == 1 ? s_hi : s;
      cudaStream_t G = v.prio == 2 ? g_hi : g_lo;
      uint16_t *Dp = D;
      const bool diag = v.kind == COMP_DIAG;
      fn = [=] {
        if (diag)
          return rec(0, O) && wt(G, 0) && gemm(G, 0, N, 0.f) && rec(1, G) &&
                 part(C, 1, X, ldx, Y, ldy) && wt(O, 1);
        if (!(rec(0, O) && wt(G, 0) && gemm(G, 0, N, 0.f) && rec(1, G) &&
              cudaMemsetAsync(Dp, 0, (size_t)N * ldy * 2, O) == cudaSuccess &&
              lsim_cuda_lora_run(C, X, ldx, Dp, ldy, NULL) == 0 && wt(O, 1)))
          return false;
        add_rows_kernel<<<264, 256, 0, O>>>(Y, Dp, N, d_out, ldy);
        return cudaGetLastError() == cudaSuccess;
      };
      break;
    }
    case COMP_GREEN: {
      Green *g = gcur;
      cudaStream_t G = v.prio == 1 ? g_lo : g->sa;
      uint16_t *Dp = D;
      fn = [=] {
        if (!(rec(0, O) && wt(G, 0) && gemm(G, 0, N, 0.f) && rec(1, G) &&
              wt(g->sb, 0) &&
              cudaMemsetAsync(Dp, 0, (size_t)N * ldy * 2, g->sb) ==
                  cudaSuccess &&
              lsim_cuda_lora_run(g->Lb, X, ldx, Dp, ldy, NULL) == 0 &&
              rec(2, g->sb) && wt(O, 1) && wt(O, 2)))
          return false;
        add_rows_kernel<<<264, 256, 0, O>>>(Y, Dp, N, d_out, ldy);
        return cudaGetLastError() == cudaSuccess;
      };
      break;
    }
    case COMP_BETA1:
      fn = [&] {
        return rec(0, s) && wt(g_lo, 0) &&
               cudaMemsetAsync(Y, 0, (size_t)N * ldy * 2, g_lo) ==
                   cudaSuccess &&
               rec(1, g_lo) && part(L, 1, X, ldx, Y, ldy) && wt(s, 1) &&
               part(L, 2, X, ldx, Y, ldy) && gemm(s, 0, N, 1.f);
      };
      break;
    case COMP_CHUNK:
      fn = [&] {
        const int c = v.chunks;
        bool ok = rec(0, s);
        for (int j = 0; ok && j < c; j++)
          ok = wt(c_st[j], 0) &&
               part(Lc[j], 1, X + (size_t)cut[j] * ldx, ldx,
                    Y + (size_t)cut[j] * ldy, ldy);
        for (int j = 0; ok && j < c; j++)
          ok = gemm(s, cut[j], cut[j + 1], 0.f) && rec(2 + j, s) &&
               wt(c_st[j], 2 + j) &&
               part(Lc[j], 2, X + (size_t)cut[j] * ldx, ldx,
                    Y + (size_t)cut[j] * ldy, ldy) &&
               rec(2 + c + j, c_st[j]);
        for (int j = 0; ok && j < c; j++)
          ok = wt(s, 2 + c + j);
        return ok;
      };
      break;
    }
    if (eager) { /* launched directly, no graph (timing only) */
      const bool ok = fn();
      blas->stream(s);
      if (!ok)
        *why = "eager launch failed";
      return ok;
    }
    bool ok = capture(O, fn, ge, why, cudaGraphInstantiateFlagUseNodePriority);
    blas->stream(s);
    return ok;
  }
};

/*
** The reference of a composition: the base GEMM's own output G (bf16, run
** alone) plus the branch's delta in float64 (the exact factors, scale and
** X).  The bf16 bound: |y - (G + delta)| <= 2^-7 (|G| + |delta|) + acc,
** two units in the last place of the larger term: the output is rounded
** once (G + delta), or, for beta1, delta and the sum each once, and the
** GEMM's own output may differ from G by one rounding.  acc: where W is
** known on the host, 2 d_in 2^-24 sum_j |x_j w_j|, what two fp32
** summations of the same products in different orders (another GEMM
** algorithm: a row chunk, beta = 1) may differ by; else 0.
*/
struct CompRef {
  int d_in = 0, d_out = 0, N = 0, ldx = 0, ldy = 0;
  const std::vector<uint16_t> *X = nullptr; /* N x ldx */
  std::vector<int> row_ad; /* packed row -> adapter index, -1 base */
  const std::vector<int> *rk = nullptr;
  const std::vector<float> *sc = nullptr;
  const std::vector<std::vector<uint16_t>> *A = nullptr, *B = nullptr;
  std::vector<int> sample;
  std::vector<double> delta; /* [sample][d_out] */
  const std::vector<uint16_t> *W = nullptr; /* d_out x d_in, optional */
  std::vector<double> acc;                  /* [sample][d_out] */
  void prepare() {
    delta.assign(sample.size() * (size_t)d_out, 0.0);
    acc.assign(sample.size() * (size_t)d_out, 0.0);
    for (size_t si = 0; W && si < sample.size(); si++) {
      const uint16_t *xr = &(*X)[(size_t)sample[si] * ldx];
      for (int o = 0; o < d_out; o++) {
        const uint16_t *wr = &(*W)[(size_t)o * d_in];
        double sa = 0;
        for (int c = 0; c < d_in; c++)
          sa += fabs((double)bf(xr[c]) * (double)bf(wr[c]));
        acc[si * d_out + o] = ldexp(2.0 * d_in * sa, -24);
      }
    }
    std::vector<double> t;
    for (size_t si = 0; si < sample.size(); si++) {
      const int i = sample[si], a = row_ad[i];
      if (a < 0)
        continue;
      const int r = (*rk)[a];
      t.assign(r, 0.0);
      const uint16_t *xr = &(*X)[(size_t)i * ldx];
      for (int k = 0; k < r; k++) {
        const uint16_t *ar = &(*A)[a][(size_t)k * d_in];
        double acc = 0;
        for (int c = 0; c < d_in; c++)
          acc += (double)bf(xr[c]) * (double)bf(ar[c]);
        t[k] = acc * (*sc)[a];
      }
      for (int o = 0; o < d_out; o++) {
        double d = 0;
        for (int k = 0; k < r; k++)
          d += t[k] * (double)bf((*B)[a][(size_t)o * r + k]);
        delta[si * d_out + o] = d;
      }
    }
  }
  /* worst error in units of the bound (<= 1 passes), NaN if any output
  ** of the N rows is NaN; rel: relative error of the delta part */
  double compare(const std::vector<uint16_t> &Y, const std::vector<uint16_t> &G,
                 double *rel) const {
    for (int i = 0; i < N; i++)
      for (int o = 0; o < d_out; o++) {
        float y = bf(Y[(size_t)i * ldy + o]);
        if (y != y)
          return NAN;
      }
    double worst = 0, e2 = 0, r2 = 0;
    for (size_t si = 0; si < sample.size(); si++) {
      const int i = sample[si];
      for (int o = 0; o < d_out; o++) {
        const double g = bf(G[(size_t)i * ldy + o]),
                     d = delta[si * d_out + o],
                     y = bf(Y[(size_t)i * ldy + o]);
        const double err = fabs(y - (g + d));
        const double tol =
            ldexp(fabs(g) + fabs(d), -7) + acc[si * d_out + o] + 1e-30;
        worst = std::max(worst, err / tol);
        e2 += (y - g - d) * (y - g - d);
        r2 += d * d;
      }
    }
    *rel = r2 > 0 ? sqrt(e2 / r2) : 0.0;
    return worst;
  }
};

/* ---- the benchmark ------------------------------------------------------------------- */

#define H 4096
#define POOL 64

struct Work {
  const char *name;
  int rows, nad, prefill;
  double best[2];        /* best existing kernel, us, at r16 / r64 */
  const char *who[2];
  double target[2];      /* issue 6 targets at r16 / r64 */
};

static const Work WORKS[3] = {
    {"decode64", 64, 64, 0, {17.8, 38.2}, {"S-LoRA BGMV", "S-LoRA BGMV"},
     {10, 25}},
    {"mixed256", 256, 32, 0, {30.2, 42.5}, {"S-LoRA BGMV", "vLLM Triton"},
     {10, 20}},
    {"prefill4096", 4096, 8, 1, {66.9, 91.5}, {"vLLM Triton", "vLLM Triton"},
     {37, 40}},
};

/* rank settings: 16, 64, mixed (8/16/32/64 by adapter), all at 30 */
static const int RSET[4] = {16, 64, -1, 30};
static int rank_of(int rset, int a) {
  static const int mix[4] = {8, 16, 32, 64};
  return rset > 0 ? rset : mix[a % 4];
}
static const char *rset_name(int rset, char *buf) {
  if (rset < 0)
    return "8-64";
  snprintf(buf, 16, "%d", rset);
  return buf;
}

struct Row {
  std::string wl, rank, path, note, geom;
  double us = NAN, gbs = NAN, xfloor = NAN, xbase = NAN, relerr = NAN;
  double clean_us = NAN; /* read-only flush: no dirty lines to write back */
  double best = NAN, target = NAN;
};

static void print_table(const std::vector<Row> &rows, FILE *f, double bw,
                        double peak, int full) {
  fprintf(f,
          "copy %.0f GB/s (read+write), bf16 matmul %.0f TFLOP/s; floor = "
          "max(ideal bytes / copy, flops / matmul)\n",
          bw / 1e9, peak / 1e12);
  fprintf(f, "%-12s %-5s %-24s %9s %8s %7s %7s %7s %9s %8s %8s  %s\n",
          "workload", "rank", "path", "median_us", "clean_us", "GB/s",
          "x_floor", "x_base", "relerr", "best_us", "target", "note");
  for (const Row &r : rows) {
    if (!full && r.path.find('=') != std::string::npos &&
        r.path.rfind("auto", 0) != 0 && r.path.find("split_t") == std::string::npos)
      continue; /* sweep rows: in the file only */
    auto num = [](double v, const char *fmt, char *b) {
      if (v != v)
        snprintf(b, 32, "-");
      else
        snprintf(b, 32, fmt, v);
      return b;
    };
    char b1[32], b2[32], b3[32], b4[32], b5[32], b6[32], b7[32], b8[32];
    fprintf(f, "%-12s %-5s %-24s %9s %8s %7s %7s %7s %9s %8s %8s  %s\n",
            r.wl.c_str(), r.rank.c_str(), r.path.c_str(),
            num(r.us, "%.2f", b1), num(r.clean_us, "%.2f", b8),
            num(r.gbs, "%.0f", b2),
            num(r.xfloor, "%.2f", b3), num(r.xbase, "%.2f", b4),
            num(r.relerr, "%.1e", b5), num(r.best, "%.1f", b6),
            num(r.target, "%.0f", b7),
            (r.note + (full && !r.geom.empty() ? " [" + r.geom + "]" : ""))
                .c_str());
  }
}

extern "C" void lsim_cuda_wg_trace_print(FILE *f); /* wgemm.cu */

/* --gemm1: only the one-pass GEMM rows at decode64 and mixed256, r16 and
** r64, with timing probes (a quick round, and what ncu is pointed at) */
static int g_quick = 0;
/* --part: only the partitioned compositions (issue 23): the base GEMM
** through cuBLASLt on part of the SMs beside the branch, against cuBLAS
** and the best earlier compositions, at decode64 and mixed256 */
static int g_part = 0;
/* BENCH_GEMM1_ONLY=WORKLOAD:RANK:LABEL (each part may be empty): only the
** one-pass rows of that workload, rank and label substring -- one kernel
** under ncu */
static bool g1_only(const char *wl, const char *rank, const std::string &l) {
  const char *f = getenv("BENCH_GEMM1_ONLY");
  if (!f || !*f)
    return true;
  std::string a(f), parts[3];
  int k = 0;
  for (char ch : a) {
    if (ch == ':' && k < 2)
      k++;
    else
      parts[k] += ch;
  }
  return (parts[0].empty() || parts[0] == wl) &&
         (parts[1].empty() || parts[1] == rank) &&
         (parts[2].empty() || l.find(parts[2]) != std::string::npos);
}

static int bench(int sweep, int reps, const char *outdir, int compose) {
  cudaStream_t s;
  CK(cudaSetDevice(0));
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  char desc[256];
  lsim_cuda_describe(desc, sizeof desc);
  printf("bench_kernels: %s\n", desc);
  Timer tm(s);
  tm.reps = reps;

  /* ceilings */
  double bw, peak = NAN;
  {
    size_t n = (size_t)2 << 30;
    void *a, *b;
    CK(cudaMalloc(&a, n));
    CK(cudaMalloc(&b, n));
    dev_fill((uint16_t *)a, n / 2, 7, 1.f, s);
    double us = tm.median(
        [&] { CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, s)); }, 3,
        20);
    bw = 2.0 * (double)n / (us * 1e-6);
    CK(cudaFree(a));
    CK(cudaFree(b));
  }
  Blas blas;
  bool have_blas = blas.open(s);
  if (have_blas) {
    int m = 8192;
    void *a, *b, *c;
    CK(cudaMalloc(&a, (size_t)m * m * 2));
    CK(cudaMalloc(&b, (size_t)m * m * 2));
    CK(cudaMalloc(&c, (size_t)m * m * 2));
    dev_fill((uint16_t *)a, (size_t)m * m, 11, 1.f, s);
    dev_fill((uint16_t *)b, (size_t)m * m, 12, 1.f, s);
    double us = tm.median([&] { blas.run(m, m, m, a, b, c); }, 3, 20);
    peak = 2.0 * m * (double)m * m / (us * 1e-6);
    CK(cudaFree(a));
    CK(cudaFree(b));
    CK(cudaFree(c));
  } else {
    printf("cuBLAS unavailable (%s): no base GEMM rows; the floor uses "
           "bytes only\n",
           blas.why.c_str());
  }
  printf("ceilings: copy %.0f GB/s, bf16 matmul %.0f TFLOP/s\n", bw / 1e9,
         peak / 1e12);
  printf("factor loads: L2 hint %d (LSIM_FACTOR_HINT; 0 none, 1 streaming, "
         "2 evict_first policy)\n",
         lsim_cuda_factor_hint());
  /* what the flush costs: one read-only kernel over S bytes after the
  ** memset flush (dirty L2 lines to write back) and after a read flush */
  {
    float *sink2;
    void *buf;
    CK(cudaMalloc(&sink2, 4096));
    CK(cudaMalloc(&buf, (size_t)128 << 20));
    dev_fill((uint16_t *)buf, (size_t)64 << 20, 3, 1.f, s);
    printf("flush probe: one read kernel over S MB, dirty (memset) / clean "
           "(read) flush, us:");
    for (size_t mb : {0, 8, 17, 34, 67, 128}) {
      size_t n = (mb << 20) / 16;
      auto fn = [&] {
        read_kernel<<<1024, 256, 0, s>>>((const uint4 *)buf, n, sink2);
      };
      double d = tm.median(fn);
      tm.clean = true;
      double c = tm.median(fn);
      tm.clean = false;
      printf("  %zu MB %.2f / %.2f", mb, d, c);
    }
    printf("\nflush probe, plain (non-streaming) loads, dirty flush, us:");
    for (size_t mb : {17, 67}) {
      size_t n = (mb << 20) / 16;
      printf("  %zu MB %.2f", mb, tm.median([&] {
               read_kernel<false>
                   <<<1024, 256, 0, s>>>((const uint4 *)buf, n, sink2);
             }));
    }
    printf("\n");
    CK(cudaFree(buf));
    CK(cudaFree(sink2));
  }

  lsim_cuda_lora *L = nullptr;
  lsim_cuda_lora_cfg cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.device = 0;
  cfg.dtype = LSIM_CUDA_BF16;
  cfg.d_in = H;
  cfg.d_out = H;
  cfg.max_adapters = POOL;
  cfg.stream = s;
  LK(lsim_cuda_lora_open(&L, &cfg, eb));
  lsim_cuda_lora_tune tune0;
  lsim_cuda_lora_get_tune(L, &tune0);
  /* the base GEMM plus the branch: the extra contexts of the compositions */
  Comp comp;
  lsim_blas *lb = nullptr; /* cuBLASLt: the GEMM on part of the SMs */
  if (have_blas) {
    comp.open(cfg, L, &blas, COMP_MAXCH);
    comp.ldy_max = H;
    lsim_errbuf leb = LSIM_ERRBUF_INIT;
    if (lsim_blas_open(&lb, s, &leb) || !lsim_blas_has_lt(lb)) {
      printf("cuBLASLt unavailable (%s): no partitioned rows\n",
             lb ? "no cublasLt" : leb.msg);
      lsim_blas_close(lb);
      lb = nullptr;
    }
    comp.lb = lb;
    /* green contexts for the hard partitions of --part */
    if (g_part && !comp.gapi.open())
      printf("green contexts unavailable (%s)\n", comp.gapi.why.c_str());
    for (int k : {16, 24, 32, 48, 66}) {
      if (!g_part || !comp.gapi.ok)
        break;
      Green g;
      if (comp.gapi.make(g, k, cfg)) {
        printf("green contexts: %d SMs for the branch, %d for the GEMM\n",
               g.kb, g.ka);
        comp.green.push_back(g);
      } else {
        printf("green context of %d SMs: %s\n", k, comp.gapi.why.c_str());
      }
    }
  }
  const int nsm = prop.multiProcessorCount;
  /* the zero-padded slot layout at the mixed batch's largest rank, for
  ** comparison on the mixed-rank batch */
  lsim_cuda_lora *Lpad = nullptr;
  cfg.pad_rank = 64;
  LK(lsim_cuda_lora_open(&Lpad, &cfg, eb));
  cfg.pad_rank = 0;

  uint16_t *dX, *dY, *dW, *dYb;
  CK(cudaMalloc(&dX, (size_t)4096 * H * 2));
  CK(cudaMalloc(&dY, (size_t)4096 * H * 2));
  CK(cudaMalloc(&dYb, (size_t)4096 * H * 2));
  CK(cudaMalloc(&dW, (size_t)H * H * 2));
  dev_fill(dW, (size_t)H * H, 99, 1.f / 64.f, s);

  std::vector<Row> rows;
  int comp_failures = 0;
  bool pdl_graph_ok = true;
  std::string pdl_why;

  for (int ri = 0; ri < (compose || g_quick ? 2 : 4); ri++) {
    for (int wi = 0; wi < (g_quick || g_part ? 2 : 3); wi++) {
      const Work &W = WORKS[wi];
      const int rset = RSET[ri];
      char rb[16];
      const char *rname = rset_name(rset, rb);
      Rng rng(1000 + 17 * wi + ri);
      /* adapters in random slots of the pool */
      std::vector<int> slots(POOL);
      for (int i = 0; i < POOL; i++)
        slots[i] = i;
      shuffle(rng, slots);
      slots.resize(W.nad);
      std::sort(slots.begin(), slots.end());
      std::vector<int> rk(W.nad);
      std::vector<float> sc(W.nad);
      std::vector<std::vector<uint16_t>> hA(W.nad), hB(W.nad);
      double ad_bytes = 0;
      for (int a = 0; a < W.nad; a++) {
        rk[a] = rank_of(rset, a);
        sc[a] = (float)(0.5 + 1.5 * rng.unit());
        hA[a].resize((size_t)rk[a] * H);
        hB[a].resize((size_t)H * rk[a]);
        host_fill(hA[a], rng, 1.f / 64.f);
        host_fill(hB[a], rng, 1.f / sqrtf((float)rk[a]));
        LK(lsim_cuda_lora_load(L, slots[a], rk[a], sc[a], hA[a].data(),
                               hB[a].data(), eb));
        if (rset < 0)
          LK(lsim_cuda_lora_load(Lpad, slots[a], rk[a], sc[a], hA[a].data(),
                                 hB[a].data(), eb));
        if (have_blas && (!compose || rset == 16 || rset == 64))
          comp.load(slots[a], rk[a], sc[a], hA[a].data(), hB[a].data(),
                    W.prefill != 0);
        ad_bytes += (double)rk[a] * (2.0 * H) * 2.0;
      }
      /* the same adapters in a fragmented paged pool (page = h = 4096
      ** elements, 25% spare pages, random page order) */
      Paged pg;
      pg.build(H, H, slots, rk, sc, hA, hB, 77 + 13 * wi + ri, 0);
      /* rows -> adapter index */
      std::vector<int> ad_of_row;
      std::vector<lsim_plan_entry> e;
      if (W.prefill) {
        int per = W.rows / W.nad;
        for (int a = 0; a < W.nad; a++) {
          e.push_back(ent(a, slots[a], rk[a], LSIM_PHASE_PREFILL, per));
          for (int j = 0; j < per; j++)
            ad_of_row.push_back(a);
        }
      } else {
        int per = W.rows / W.nad;
        for (int a = 0; a < W.nad; a++)
          for (int j = 0; j < per; j++)
            ad_of_row.push_back(a);
        shuffle(rng, ad_of_row);
        for (int i = 0; i < W.rows; i++)
          e.push_back(ent(i, slots[ad_of_row[i]], rk[ad_of_row[i]],
                          LSIM_PHASE_DECODE, 1));
      }
      lsim_rowplan p{};
      LK(lsim_rowplan_build(&p, e.data(), (int)e.size(), NULL, 0, eb));
      const int N = W.rows;
      dev_fill(dX, (size_t)N * H, 5000 + wi * 10 + ri, 1.f, s);
      std::vector<uint16_t> hX((size_t)N * H);
      CK(cudaMemcpyAsync(hX.data(), dX, hX.size() * 2, cudaMemcpyDeviceToHost,
                         s));
      CK(cudaStreamSynchronize(s));
      double rank_rows = 0;
      for (int i = 0; i < N; i++)
        rank_rows += rk[ad_of_row[i]];
      const double bytes = ad_bytes + (double)N * H * 2 + (double)N * H * 4;
      const double flops = 2.0 * rank_rows * (2.0 * H);
      const double floor_us =
          1e6 * std::max(bytes / bw, peak == peak ? flops / peak : 0.0);
      const int rix = rset == 64 ? 1 : 0;
      const double best = (rset == 16 || rset == 64) ? W.best[rix] : NAN;
      const double target = (rset == 16 || rset == 64) ? W.target[rix] : NAN;

      /* sample rows for the reference: all for decode64, else 64 spread */
      std::vector<int> sample;
      for (int i = 0; i < N; i += std::max(1, N / 64))
        sample.push_back(i);
      auto relerr = [&](void) -> double {
        std::vector<uint16_t> hy((size_t)N * H);
        CK(cudaMemcpy(hy.data(), dY, hy.size() * 2, cudaMemcpyDeviceToHost));
        double e2 = 0, r2 = 0;
        std::vector<double> t;
        for (int i : sample) {
          int a = ad_of_row[i];
          t.assign(rk[a], 0.0);
          for (int k = 0; k < rk[a]; k++) {
            double acc = 0;
            const uint16_t *ar = &hA[a][(size_t)k * H];
            const uint16_t *xr = &hX[(size_t)i * H];
            for (int c = 0; c < H; c++)
              acc += (double)bf(xr[c]) * (double)bf(ar[c]);
            t[k] = acc;
          }
          for (int o = 0; o < H; o++) {
            double d = 0;
            for (int k = 0; k < rk[a]; k++)
              d += t[k] * (double)bf(hB[a][(size_t)o * rk[a] + k]);
            d *= sc[a];
            double y = bf(hy[(size_t)i * H + o]);
            if (y != y)
              return NAN;
            e2 += (y - d) * (y - d);
            r2 += d * d;
          }
        }
        return sqrt(e2 / r2);
      };

      double base_us = NAN;
      if (have_blas) {
        cudaGraphExec_t ge;
        std::string why;
        if (capture(s, [&] { return blas.run(N, H, H, dX, dW, dYb); }, &ge,
                    &why)) {
          base_us = tm.median([&] { CK(cudaGraphLaunch(ge, s)); });
          cudaGraphExecDestroy(ge);
          Row r;
          r.wl = W.name;
          r.rank = rname;
          r.path = "base_gemm (cuBLAS)";
          r.us = base_us;
          double bb = 2.0 * ((double)N * H * 2 + (double)H * H);
          r.gbs = bb / (base_us * 1e-6) / 1e9;
          r.xbase = 1.0;
          rows.push_back(r);
        } else {
          printf("base gemm capture failed: %s\n", why.c_str());
        }
      }
      if (have_blas && g_part) {
        Row r;
        r.wl = W.name;
        r.rank = rname;
        r.path = "base_gemm (cuBLAS, eager)";
        r.us = tm.median([&] {
          if (!blas.run(N, H, H, dX, dW, dYb))
            exit(2);
        });
        r.xbase = r.us / base_us;
        rows.push_back(r);
      }
      /* the same GEMM through cuBLASLt, targeting all SMs (0) and fewer:
      ** what the partitioned compositions' GEMM costs alone */
      for (int k : {0, 8, 16, 24, 32, 48, 66, 80, 100}) {
        if (!lb || !g_part)
          break;
        const int smt = k ? nsm - k : 0;
        cudaGraphExec_t ge;
        std::string why;
        Row r;
        r.wl = W.name;
        r.rank = rname;
        r.path = "base_gemm (cuBLASLt, " + std::to_string(smt) + " SMs)";
        if (capture(s,
                    [&] {
                      return lsim_blas_gemm_lt(lb, s, smt, N, H, H, dX, H, dW,
                                               dYb, H, 0.f, 0, NULL) == 0;
                    },
                    &ge, &why)) {
          r.us = tm.median([&] { CK(cudaGraphLaunch(ge, s)); });
          cudaGraphExecDestroy(ge);
          r.xbase = r.us / base_us;
          char ab[160];
          lsim_blas_lt_describe(lb, N, H, H, H, H, 0, smt, ab, sizeof ab);
          r.note = ab;
        } else {
          r.note = "skipped: " + why;
        }
        rows.push_back(r);
      }

      struct Var {
        int path;
        lsim_cuda_lora_tune t;
        std::string label;
        int layout = 0; /* 0 contiguous, 1 paged, 2 padded slots */
      };
      std::vector<Var> vars;
      for (int path = 1;
           path < LSIM_CUDA_PATH__COUNT && !compose && !g_quick; path++)
        vars.push_back({path, tune0, lsim_cuda_path_name(path)});
      /* every path again through the page tables, and on the mixed batch
      ** in padded slots */
      for (int lay = 1; lay <= 2 && !compose && !g_quick; lay++) {
        if (lay == 2 && rset >= 0)
          continue;
        for (int path = 0; path < LSIM_CUDA_PATH__COUNT; path++) {
          Var v{path, tune0,
                std::string(lsim_cuda_path_name(path)) +
                    (lay == 1 ? " paged" : " padded64")};
          v.layout = lay;
          vars.push_back(v);
        }
      }
      /* the chosen path, and its variants */
      vars.push_back({LSIM_CUDA_PATH_AUTO, tune0, "auto"});
      if (g_quick || g_part) {
      } else if (compose) {
        /* the branch alone and each of its launches alone */
        for (int path : {LSIM_CUDA_PATH_SGMV_MMA, LSIM_CUDA_PATH_DECODE}) {
          if (path == LSIM_CUDA_PATH_DECODE && W.prefill)
            continue;
          vars.push_back({path, tune0, lsim_cuda_path_name(path)});
          for (int only = 1; only <= 2; only++) {
            lsim_cuda_lora_tune t = tune0;
            t.only = only;
            vars.push_back({path, t,
                            std::string(lsim_cuda_path_name(path)) +
                                (only == 1 ? " shrink=only" : " expand=only")});
          }
          lsim_cuda_lora_tune t = tune0;
          t.only = 1;
          t.shrink_splits = 1;
          vars.push_back({path, t, std::string(lsim_cuda_path_name(path)) +
                                       " shrink=only splits=1"});
        }
      } else {
        lsim_cuda_lora_tune t = tune0;
        t.pdl = 0;
        vars.push_back({LSIM_CUDA_PATH_AUTO, t, "auto pdl=0"});
        t = tune0;
        t.split_t = 0;
        vars.push_back({LSIM_CUDA_PATH_SGMV_MMA, t, "sgmv_mma split_t=0"});
        /* the tensor-core shrink's rank split (16 rank columns per block)
        ** forced off and on: the chooser's rule against both */
        for (int rs = 1; rs <= 2; rs++) {
          t = tune0;
          t.shrink_rsplit = rs;
          vars.push_back({LSIM_CUDA_PATH_AUTO, t,
                          "auto rsplit=" + std::to_string(rs)});
        }
        /* the expand's rank split (1 by the rule, 2 always), alone and
        ** with the shrink's forced on */
        for (int rs = 1; rs <= 2; rs++) {
          t = tune0;
          t.expand_rsplit = rs;
          vars.push_back({LSIM_CUDA_PATH_AUTO, t,
                          "auto ersplit=" + std::to_string(rs)});
          t.shrink_rsplit = 2;
          vars.push_back({LSIM_CUDA_PATH_AUTO, t,
                          "auto rsplit=2 ersplit=" + std::to_string(rs)});
        }
        /* the expand's balanced order (1 where the tiles' ranks differ, 2
        ** always), alone and with its rank split */
        for (int eo = 1; eo <= 2; eo++) {
          t = tune0;
          t.expand_order = eo;
          vars.push_back({LSIM_CUDA_PATH_AUTO, t,
                          "auto eorder=" + std::to_string(eo)});
        }
        t = tune0;
        t.expand_order = 2;
        t.expand_rsplit = 2;
        vars.push_back({LSIM_CUDA_PATH_AUTO, t, "auto eorder=2 ersplit=2"});
        t = tune0;
        t.pdl = 0;
        vars.push_back({LSIM_CUDA_PATH_SGMV_MMA, t, "sgmv_mma pdl=0"});
        t = tune0;
        t.fused_prefetch = !tune0.fused_prefetch;
        vars.push_back({LSIM_CUDA_PATH_FUSED, t,
                        "fused prefetch=" + std::to_string(t.fused_prefetch)});
        t = tune0;
        t.fused_preload = 0;
        vars.push_back({LSIM_CUDA_PATH_FUSED, t, "fused preload=0"});
        /* where the time goes: each launch alone */
        for (int path : {LSIM_CUDA_PATH_SGMV_MMA, LSIM_CUDA_PATH_SGMV,
                         LSIM_CUDA_PATH_DECODE})
          for (int only = 1; only <= 2; only++) {
            t = tune0;
            t.only = only;
            vars.push_back({path, t,
                            std::string(path ? lsim_cuda_path_name(path)
                                             : "auto") +
                                (only == 1 ? " shrink=only" : " expand=only")});
          }
      }
      if (sweep) {
        for (int pdl = 0; pdl <= 1; pdl++)
          for (int v : {1, 2, 4, 8}) {
            lsim_cuda_lora_tune t = tune0;
            t.pdl = pdl;
            t.shrink_splits = v;
            vars.push_back({LSIM_CUDA_PATH_SGMV_MMA, t,
                            "sgmv_mma pdl=" + std::to_string(pdl) +
                                " splits=" + std::to_string(v)});
          }
        for (int v : {4, 8, 16}) {
          lsim_cuda_lora_tune t = tune0;
          t.expand_cols = v;
          vars.push_back({LSIM_CUDA_PATH_SGMV_MMA, t,
                          "sgmv_mma cols=" + std::to_string(v)});
        }
        for (int v : {1, 2}) {
          lsim_cuda_lora_tune t = tune0;
          t.shrink_splits = v;
          vars.push_back({LSIM_CUDA_PATH_DECODE, t,
                          "decode splits=" + std::to_string(v)});
        }
        if (!W.prefill)
          for (int mt : {1, 2, 8})
            for (int cs : {2, 4, 8, 16}) {
              lsim_cuda_lora_tune t = tune0;
              t.fused_mt = mt;
              t.fused_cs = cs;
              vars.push_back({LSIM_CUDA_PATH_FUSED, t,
                              "fused mt=" + std::to_string(mt) + " cs=" +
                                  std::to_string(cs)});
            }
      }

      for (Var &v : vars) {
        Row r;
        r.wl = W.name;
        r.rank = rname;
        r.best = best;
        r.target = target;
        lsim_cuda_lora_tune t = v.t;
        if (!pdl_graph_ok)
          t.pdl = 0;
        lsim_cuda_lora *LL = v.layout == 2 ? Lpad : L;
        auto plan = [&](lsim_errbuf *e) {
          return v.layout == 1
                     ? lsim_cuda_lora_plan_paged(LL, &p, v.path, pg.pool, pg.pw,
                                                 pg.ref.data(),
                                                 (int)pg.ref.size(), e)
                     : lsim_cuda_lora_plan(LL, &p, v.path, e);
        };
        lsim_cuda_lora_set_tune(LL, &t);
        lsim_errbuf eb = LSIM_ERRBUF_INIT;
        lsim_err rc = plan(&eb);
        if (rc) {
          r.path = v.label;
          r.note = std::string("skipped: ") + eb.msg;
          rows.push_back(r);
          continue;
        }
        int chosen = lsim_cuda_lora_path(LL);
        r.path = v.path == LSIM_CUDA_PATH_AUTO
                     ? v.label + " -> " + lsim_cuda_path_name(chosen)
                     : v.label;
        /* correctness on this path: delta into Y = 0 */
        if (!t.only) {
          CK(cudaMemsetAsync(dY, 0, (size_t)N * H * 2, s));
          LK(lsim_cuda_lora_run(LL, dX, H, dY, H, eb));
          LK(lsim_cuda_lora_sync(LL, eb));
          r.relerr = relerr();
        }
        cudaGraphExec_t ge;
        std::string why;
        bool ok = capture(
            s, [&] { return lsim_cuda_lora_run(LL, dX, H, dY, H, NULL) == 0; },
            &ge, &why);
        if (!ok && t.pdl) {
          pdl_graph_ok = false;
          pdl_why = why;
          t.pdl = 0;
          lsim_cuda_lora_set_tune(LL, &t);
          LK(plan(eb));
          ok = capture(
              s,
              [&] { return lsim_cuda_lora_run(LL, dX, H, dY, H, NULL) == 0; },
              &ge, &why);
        }
        if (!ok) {
          r.note = "capture failed: " + why;
          rows.push_back(r);
          continue;
        }
        r.us = tm.median([&] { CK(cudaGraphLaunch(ge, s)); });
        if (v.path == LSIM_CUDA_PATH_AUTO && v.label == "auto") {
          tm.clean = true; /* the same with a read-only L2 flush */
          r.clean_us = tm.median([&] { CK(cudaGraphLaunch(ge, s)); });
          tm.clean = false;
        }
        cudaGraphExecDestroy(ge);
        r.gbs = bytes / (r.us * 1e-6) / 1e9;
        r.xfloor = r.us / floor_us;
        r.xbase = r.us / base_us;
        char d[256];
        lsim_cuda_lora_describe(LL, d, sizeof d);
        r.geom = d;
        if (v.path == LSIM_CUDA_PATH_AUTO && v.label == "auto" &&
            target == target)
          r.note = r.us <= target ? "MET target" : "MISSED target";
        rows.push_back(r);
      }

      /* base + chosen branch, one graph */
      if (have_blas) {
        lsim_cuda_lora_set_tune(L, &tune0);
        if (!pdl_graph_ok) {
          lsim_cuda_lora_tune t = tune0;
          t.pdl = 0;
          lsim_cuda_lora_set_tune(L, &t);
        }
        LK(lsim_cuda_lora_plan(L, &p, LSIM_CUDA_PATH_AUTO, eb));
        cudaGraphExec_t ge;
        std::string why;
        if (capture(s,
                    [&] {
                      return blas.run(N, H, H, dX, dW, dYb) &&
                             lsim_cuda_lora_run(L, dX, H, dYb, H, NULL) == 0;
                    },
                    &ge, &why)) {
          Row r;
          r.wl = W.name;
          r.rank = rname;
          r.path = "base + auto";
          r.us = tm.median([&] { CK(cudaGraphLaunch(ge, s)); });
          cudaGraphExecDestroy(ge);
          r.xbase = r.us / base_us;
          r.note = W.prefill ? "target <= 1.08x base" : "target <= 1.3x base";
          r.note = std::string(r.xbase <= (W.prefill ? 1.08 : 1.3) ? "MET "
                                                                   : "MISSED ") +
                   r.note;
          rows.push_back(r);
        } else {
          printf("base+branch capture failed: %s\n", why.c_str());
        }
      }
      /* base + branch, composed as a serving engine would (Comp): each
      ** composition checked once against the GEMM's own output plus the
      ** float64 delta (the bf16 bound), then timed */
      if (have_blas && (rset == 16 || rset == 64) && !g_quick) {
        CompRef ref;
        ref.d_in = H;
        ref.d_out = H;
        ref.N = N;
        ref.ldx = H;
        ref.ldy = H;
        ref.X = &hX;
        ref.row_ad = ad_of_row;
        ref.rk = &rk;
        ref.sc = &sc;
        ref.A = &hA;
        ref.B = &hB;
        for (int i = 0; i < N; i += std::max(1, N / 24))
          ref.sample.push_back(i);
        ref.prepare();
        std::vector<uint16_t> hG((size_t)N * H), hY((size_t)N * H);
        CK(cudaStreamSynchronize(s));
        if (!blas.run(N, H, H, dX, dW, dYb))
          printf("base gemm failed\n");
        CK(cudaStreamSynchronize(s));
        CK(cudaMemcpy(hG.data(), dYb, hG.size() * 2, cudaMemcpyDeviceToHost));
        std::vector<CompVar> cv;
        cv.push_back({"seq", COMP_SEQ, LSIM_CUDA_PATH_AUTO, 0, 0, 0});
        if (g_part && lb) {
          /* the partitioned compositions: the GEMM through cuBLASLt
          ** targeting nsm - k SMs, the branch beside it (side: into D,
          ** added after the join; fork: the shrink beside, the expand
          ** after; forkpdl: the expand a programmatic dependent), its
          ** grids sized for all SMs or for k; prio 0 equal, 2 the GEMM's
          ** stream high, so its blocks are placed first */
          for (int path : {LSIM_CUDA_PATH_DECODE, LSIM_CUDA_PATH_SGMV_MMA}) {
            CompVar v{std::string("seqpdl ") + lsim_cuda_path_name(path),
                      COMP_SEQPDL, path, 0, 0, 0};
            cv.push_back(v);
            v.smt = 0;
            v.label += " lt";
            cv.push_back(v);
          }
          /* hard partitions: the branch on a green context of k SMs; the
          ** GEMM on the other one (prio 0) or on the whole device (prio
          ** 1), targeting nsm - k; as graphs and launched directly */
          for (const Green &g : comp.green)
            for (int path : {LSIM_CUDA_PATH_AUTO, LSIM_CUDA_PATH_DECODE,
                             LSIM_CUDA_PATH_SGMV_MMA})
              for (int pr : {0, 1})
                for (bool eg : {false, true}) {
                  CompVar v{std::string("green ") +
                                lsim_cuda_path_name(path) +
                                " k=" + std::to_string(g.k) +
                                " prio=" + std::to_string(pr) +
                                (eg ? " (eager)" : ""),
                            COMP_GREEN, path, 0, pr, g.k};
                  v.smt = nsm - g.k;
                  v.bsms = g.kb;
                  v.eager = eg;
                  cv.push_back(v);
                }
          /* the same method's baselines, launched directly */
          for (int path : {LSIM_CUDA_PATH_DECODE, LSIM_CUDA_PATH_SGMV_MMA}) {
            CompVar v{std::string("seqpdl ") + lsim_cuda_path_name(path) +
                          " (eager)",
                      COMP_SEQPDL, path, 0, 0, 0};
            v.eager = true;
            cv.push_back(v);
            v = CompVar{std::string("pside ") + lsim_cuda_path_name(path) +
                            " k=66 prio=2 bsms=66 (eager)",
                        COMP_SIDE, path, 0, 2, 0};
            v.smt = nsm - 66;
            v.bsms = 66;
            v.eager = true;
            cv.push_back(v);
          }
          for (int k : {0, 8, 16, 24, 32, 48, 66, 80, 100}) {
            const int smt = k ? nsm - k : 0;
            for (int kind : {COMP_SIDE, COMP_FORK, COMP_FORKPDL})
              for (int path : {LSIM_CUDA_PATH_AUTO, LSIM_CUDA_PATH_DECODE,
                               LSIM_CUDA_PATH_SGMV_MMA})
                for (int pr : {0, 2})
                  for (int bs : {0, k}) {
                    if ((bs && !k) || (kind != COMP_SIDE &&
                                       path == LSIM_CUDA_PATH_AUTO) ||
                        (kind == COMP_FORKPDL && (pr || !bs)))
                      continue;
                    CompVar v{std::string(kind == COMP_SIDE   ? "pside "
                                          : kind == COMP_FORK ? "pfork "
                                                              : "pforkpdl ") +
                                  lsim_cuda_path_name(path) +
                                  " k=" + std::to_string(k) +
                                  " prio=" + std::to_string(pr) +
                                  " bsms=" + std::to_string(bs),
                              kind, path, 0, pr, 0};
                    v.smt = smt;
                    v.bsms = bs;
                    cv.push_back(v);
                  }
          }
        }
        const size_t npart = cv.size();
        std::vector<int> fpaths;
        if (g_part && lb)
          fpaths = {};
        else if (W.prefill)
          fpaths = {LSIM_CUDA_PATH_SGMV_MMA};
        else
          fpaths = {LSIM_CUDA_PATH_DECODE, LSIM_CUDA_PATH_SGMV_MMA,
                    LSIM_CUDA_PATH_SGMV};
        for (int path : fpaths)
          for (int sp : {0, 1, 2}) {
            if (path == LSIM_CUDA_PATH_DECODE && sp)
              continue;
            for (int pr = 0; pr < 3; pr++)
              cv.push_back({std::string("fork ") + lsim_cuda_path_name(path) +
                                " splits=" + std::to_string(sp) +
                                " prio=" + std::to_string(pr),
                            COMP_FORK, path, sp, pr, 0});
          }
        for (int path : fpaths)
          for (int sp : {0, 2}) {
            if (sp && !W.prefill)
              continue;
            for (int pr = 0; pr < 2; pr++)
              cv.push_back({std::string("forkpdl ") +
                                lsim_cuda_path_name(path) + " splits=" +
                                std::to_string(sp) + " prio=" +
                                std::to_string(pr),
                            COMP_FORKPDL, path, sp, pr, 0});
          }
        for (int path : {LSIM_CUDA_PATH_AUTO, LSIM_CUDA_PATH_DECODE,
                         LSIM_CUDA_PATH_SGMV_MMA}) {
          if (W.prefill && path != LSIM_CUDA_PATH_AUTO)
            continue;
          for (int pr = 0; pr < 3; pr++)
            cv.push_back({std::string("side ") + lsim_cuda_path_name(path) +
                              " prio=" + std::to_string(pr),
                          COMP_SIDE, path, 0, pr, 0});
        }
        for (int path : fpaths)
          for (int sp : {0, 2}) {
            if (sp && !W.prefill)
              continue;
            cv.push_back({std::string("seqpdl ") + lsim_cuda_path_name(path) +
                              " splits=" + std::to_string(sp),
                          COMP_SEQPDL, path, sp, 0, 0});
          }
        cv.push_back({"diag", COMP_DIAG, LSIM_CUDA_PATH_AUTO, 0, 0, 0});
        cv.push_back({"beta1", COMP_BETA1, LSIM_CUDA_PATH_AUTO, 0, 0, 0});
        if (W.prefill)
          for (int c : {2, 4, 8})
            for (int sp : {0, 1})
              cv.push_back({"chunk" + std::to_string(c) + " sgmv_mma splits=" +
                                std::to_string(sp),
                            COMP_CHUNK, LSIM_CUDA_PATH_SGMV_MMA, sp, 1, c});
        if (g_part && lb)
          cv.resize(npart);
        for (const CompVar &v : cv) {
          Row r;
          r.wl = W.name;
          r.rank = rname;
          r.path = v.kind == COMP_DIAG
                       ? "diag: gemm || shrink, no expand (not a result)"
                       : "base + " + v.label;
          std::string why;
          cudaGraphExec_t ge = nullptr;
          if (!comp.prepare(v, &p, e, N, &why) ||
              !comp.build(v, N, H, H, dX, H, dW, dYb, H, &ge, &why,
                          v.eager)) {
            r.note = "skipped: " + why;
            rows.push_back(r);
            cudaGetLastError();
            continue;
          }
          if (v.kind == COMP_SEQ)
            r.path += std::string(" ") +
                      lsim_cuda_path_name(lsim_cuda_lora_path(comp.L));
          auto launch = [&] {
            if (v.eager) {
              std::string w2;
              if (!comp.build(v, N, H, H, dX, H, dW, dYb, H, nullptr, &w2,
                              true)) {
                fprintf(stderr, "bench_kernels: %s: %s\n", v.label.c_str(),
                        w2.c_str());
                exit(2);
              }
            } else {
              CK(cudaGraphLaunch(ge, s));
            }
          };
          CK(cudaDeviceSynchronize()); /* the build's eager launch, if any */
          CK(cudaMemsetAsync(dYb, 0xff, (size_t)N * H * 2, s)); /* NaN */
          launch();
          CK(cudaDeviceSynchronize());
          CK(cudaMemcpy(hY.data(), dYb, hY.size() * 2,
                        cudaMemcpyDeviceToHost));
          double rel = 0, worst = 0;
          if (v.kind != COMP_DIAG)
            worst = ref.compare(hY, hG, &rel);
          r.relerr = rel;
          char nb[96];
          snprintf(nb, sizeof nb, "err/bound %.2f", worst);
          if (!(worst <= 1.0)) {
            comp_failures++;
            printf("COMPOSE FAIL %s r=%s %s: %s\n", W.name, rname,
                   v.label.c_str(), nb);
          }
          r.us = tm.median(launch);
          if (ge)
            cudaGraphExecDestroy(ge);
          r.xbase = r.us / base_us;
          r.note = std::string(r.xbase <= (W.prefill ? 1.08 : 1.3) ? "MET "
                                                                   : "MISSED ") +
                   nb;
          rows.push_back(r);
        }
        comp.release_chunks();
      }
      /* the base projection and the branch in one pass (issue 23): the
      ** chooser's pick and its variants (the shrink's path, K ranges per
      ** cluster, rows per block, the B^T prefetch), and the one-pass GEMM
      ** with no adapter rows (its GEMM alone); every one checked once
      ** against the cuBLAS GEMM plus the float64 delta, then timed */
      if (have_blas && N <= LSIM_CUDA_GEMM_MAX_ROWS && !g_part) {
        CompRef ref;
        ref.d_in = H;
        ref.d_out = H;
        ref.N = N;
        ref.ldx = H;
        ref.ldy = H;
        ref.X = &hX;
        ref.row_ad = ad_of_row;
        ref.rk = &rk;
        ref.sc = &sc;
        ref.A = &hA;
        ref.B = &hB;
        for (int i = 0; i < N; i += std::max(1, N / 24))
          ref.sample.push_back(i);
        ref.prepare();
        std::vector<uint16_t> hG((size_t)N * H), hY((size_t)N * H);
        CK(cudaStreamSynchronize(s));
        if (!blas.run(N, H, H, dX, dW, dYb))
          printf("base gemm failed\n");
        CK(cudaStreamSynchronize(s));
        CK(cudaMemcpy(hG.data(), dYb, hG.size() * 2, cudaMemcpyDeviceToHost));
        int maxseg = 0;
        for (int t = 0; t < p.nseg; t++)
          maxseg = std::max(maxseg, p.seg_offsets[t + 1] - p.seg_offsets[t]);
        std::vector<CompVar> cv;
        auto g1 = [&](const std::string &l, int path, int gcs, int gbm,
                      int gpf) {
          CompVar v{"gemm1 " + l, COMP_GEMM1, path, 0, 0, 0};
          v.gcs = gcs;
          v.gbm = gbm;
          v.gpf = gpf;
          cv.push_back(v);
        };
        g1("auto", LSIM_CUDA_PATH_AUTO, 0, 0, 1);
        g1("auto prefetch=0", LSIM_CUDA_PATH_AUTO, 0, 0, 0);
        for (int pr = 1; pr <= 3; pr++) {
          g1("auto probe=" + std::to_string(pr) + " (timing only)",
             LSIM_CUDA_PATH_AUTO, 0, 0, 1);
          cv.back().prio = pr; /* carried to tune.gemm_probe */
        }
        for (int path : {LSIM_CUDA_PATH_DECODE, LSIM_CUDA_PATH_SGMV,
                         LSIM_CUDA_PATH_SGMV_MMA}) {
          if (path == LSIM_CUDA_PATH_DECODE && maxseg > 1)
            continue;
          for (int c : {0, 2, 4, 8})
            g1(std::string(lsim_cuda_path_name(path)) + " cs=" +
                   std::to_string(c),
               path, c, 0, 1);
        }
        if (N <= 64)
          for (int bm : {128, 256})
            g1("auto bm=" + std::to_string(bm), LSIM_CUDA_PATH_AUTO, 0, bm,
               1);
        /* the streaming one-pass GEMM (wgemm.cu): its default, the loads
        ** alone, K ranges, stages, the shrink's path */
        auto g2 = [&](const std::string &l, int path, int gcs, int gns) {
          CompVar v{"gemm2 " + l, COMP_GEMM1, path, 0, 0, 0};
          v.gcs = gcs;
          v.gns = gns;
          v.gk = 2;
          cv.push_back(v);
        };
        g2("auto", LSIM_CUDA_PATH_AUTO, 0, 0);
        g2("auto probe=1 (timing only)", LSIM_CUDA_PATH_AUTO, 0, 0);
        cv.back().prio = 1;
        for (int c : {1, 2, 4, 8})
          g2("auto cs=" + std::to_string(c), LSIM_CUDA_PATH_AUTO, c, 0);
        for (int ns : {3, 4, 6})
          g2("auto ns=" + std::to_string(ns), LSIM_CUDA_PATH_AUTO, 0, ns);
        for (int path : {LSIM_CUDA_PATH_DECODE, LSIM_CUDA_PATH_SGMV_MMA})
          if (path != LSIM_CUDA_PATH_DECODE || maxseg <= 1)
            g2(lsim_cuda_path_name(path), path, 0, 0);
        for (const CompVar &v : cv) {
          if (!g1_only(W.name, rname, v.label))
            continue;
          Row r;
          r.wl = W.name;
          r.rank = rname;
          r.path = "base + " + v.label;
          std::string why;
          cudaGraphExec_t ge;
          if (!comp.prepare(v, &p, e, N, &why) ||
              !comp.build(v, N, H, H, dX, H, dW, dYb, H, &ge, &why)) {
            r.note = "skipped: " + why;
            rows.push_back(r);
            cudaGetLastError();
            continue;
          }
          char gd[256];
          lsim_cuda_lora_gemm_describe(comp.L, gd, sizeof gd);
          r.geom = gd;
          CK(cudaMemsetAsync(dYb, 0xff, (size_t)N * H * 2, s)); /* NaN */
          CK(cudaGraphLaunch(ge, s));
          CK(cudaStreamSynchronize(s));
          CK(cudaMemcpy(hY.data(), dYb, hY.size() * 2,
                        cudaMemcpyDeviceToHost));
          double rel = 0, worst = v.prio ? 0.0 : ref.compare(hY, hG, &rel);
          r.relerr = rel;
          char nb[96];
          snprintf(nb, sizeof nb, "err/bound %.2f", worst);
          if (!(worst <= 1.0)) {
            comp_failures++;
            printf("GEMM1 FAIL %s r=%s %s: %s\n", W.name, rname,
                   v.label.c_str(), nb);
          }
          r.us = tm.median([&] { CK(cudaGraphLaunch(ge, s)); });
          if (v.gk == 2 && getenv("LSIM_WG_TRACE")) {
            CK(cudaStreamSynchronize(s));
            printf("%s r=%s %s:\n", W.name, rname, v.label.c_str());
            lsim_cuda_wg_trace_print(stdout);
          }
          cudaGraphExecDestroy(ge);
          r.xbase = r.us / base_us;
          r.note = std::string(r.xbase <= 1.3 ? "MET " : "MISSED ") +
                   "(<= 1.3x) " + nb;
          rows.push_back(r);
        }
        /* the one-pass GEMMs with no adapter rows: their GEMM alone */
        for (int gk = 1; gk <= 2; gk++)
        if (g1_only(W.name, rname,
                    gk == 1 ? "gemm1 no adapter rows"
                            : "gemm2 no adapter rows")) {
          std::vector<lsim_plan_entry> e0;
          for (int i = 0; i < N; i++)
            e0.push_back(ent(i, LSIM_BASE, 0, LSIM_PHASE_DECODE, 1));
          lsim_rowplan p0{};
          LK(lsim_rowplan_build(&p0, e0.data(), (int)e0.size(), NULL, 0, eb));
          CompVar v{"gemm1 no adapter rows", COMP_GEMM1,
                    LSIM_CUDA_PATH_SGMV, 0, 0, 0};
          v.gk = gk;
          if (gk == 2) { /* sweeps: BENCH_GEMM2_CS, BENCH_GEMM2_NS */
            const char *ec = getenv("BENCH_GEMM2_CS"),
                       *en = getenv("BENCH_GEMM2_NS");
            v.gcs = ec ? atoi(ec) : 0;
            v.gns = en ? atoi(en) : 0;
          }
          Row r;
          r.wl = W.name;
          r.rank = rname;
          r.path = gk == 1 ? "gemm1 alone (no adapter rows)"
                           : "gemm2 alone (no adapter rows)";
          std::string why;
          cudaGraphExec_t ge;
          if (comp.prepare(v, &p0, e0, N, &why) &&
              comp.build(v, N, H, H, dX, H, dW, dYb, H, &ge, &why)) {
            CK(cudaMemsetAsync(dYb, 0xff, (size_t)N * H * 2, s));
            CK(cudaGraphLaunch(ge, s));
            CK(cudaStreamSynchronize(s));
            CK(cudaMemcpy(hY.data(), dYb, hY.size() * 2,
                          cudaMemcpyDeviceToHost));
            /* against the cuBLAS GEMM alone (W is not on the host here,
            ** so no per-element fp32 term: the relative error over all
            ** rows, two bf16 roundings at most, 2^-8) */
            double e2 = 0, g2 = 0;
            for (size_t i = 0; i < hY.size(); i++) {
              const double y = bf(hY[i]), g0 = bf(hG[i]);
              e2 += (y - g0) * (y - g0);
              g2 += g0 * g0;
            }
            const double worst = sqrt(e2 / g2) / ldexp(1.0, -8);
            if (!(worst <= 1.0)) {
              comp_failures++;
              printf("GEMM%d FAIL %s r=%s no adapter rows: rel/2^-8 "
                     "%.2f\n",
                     gk, W.name, rname, worst);
            }
            r.us = tm.median([&] { CK(cudaGraphLaunch(ge, s)); });
            if (gk == 2 && getenv("LSIM_WG_TRACE")) {
              CK(cudaStreamSynchronize(s));
              printf("%s r=%s gemm2 alone:\n", W.name, rname);
              lsim_cuda_wg_trace_print(stdout);
            }
            cudaGraphExecDestroy(ge);
            r.xbase = r.us / base_us;
            char nb[64];
            snprintf(nb, sizeof nb, "rel err / 2^-8 %.2f", worst);
            r.note = nb;
          } else {
            r.note = "skipped: " + why;
            cudaGetLastError();
          }
          rows.push_back(r);
          lsim_rowplan_release(&p0);
        }
      }
      pg.release();
      lsim_rowplan_release(&p);
      fflush(stdout);
      printf("done %s r=%s\n", W.name, rname);
    }
  }
  if (!pdl_graph_ok)
    printf("note: programmatic dependent launch could not be captured in a "
           "graph (%s); pdl=0 used\n",
           pdl_why.c_str());

  /* mixed-rank ratio: the chosen path at 8-64 against the same at 30 */
  printf("\nmixed-rank batch (ranks 8,16,32,64 by adapter) vs every adapter "
         "at the mean rank 30, chosen path (target <= 1.15x):\n");
  for (int wi = 0; wi < 3; wi++) {
    double mix = NAN, mean = NAN;
    for (const Row &r : rows)
      if (r.wl == WORKS[wi].name && r.path.rfind("auto ->", 0) == 0) {
        if (r.rank == "8-64")
          mix = r.us;
        if (r.rank == "30")
          mean = r.us;
      }
    printf("  %-12s mixed %.2f us, mean-rank %.2f us, ratio %.2f %s\n",
           WORKS[wi].name, mix, mean, mix / mean,
           mix / mean <= 1.15 ? "MET" : "MISSED");
    /* the same with the expand's balanced order and rank split forced */
    for (const char *lab : {"auto eorder=1 ->", "auto eorder=2 ->",
                            "auto eorder=2 ersplit=2 ->",
                            "auto ersplit=2 ->"}) {
      double mv = NAN, me = NAN;
      for (const Row &r : rows)
        if (r.wl == WORKS[wi].name && r.path.rfind(lab, 0) == 0) {
          if (r.rank == "8-64")
            mv = r.us;
          if (r.rank == "30")
            me = r.us;
        }
      printf("    %-28s mixed %.2f us (%.2f of the mean rank's chosen), "
             "mean-rank %.2f us\n",
             lab, mv, mv / mean, me);
    }
  }
  printf("\n");
  print_table(rows, stdout, bw, peak, 0);
  /* the summary of issue 6: the chosen path per workload against the
  ** targets, and base + branch against the base GEMM */
  printf("\nsummary: chosen path (auto) per workload; x_best = time / the "
         "strongest existing kernel (RESULTS-h200.md)\n");
  printf("%-12s %-5s %-22s %9s %7s %7s %7s %8s %6s %8s  %s\n", "workload",
         "rank", "path", "median_us", "GB/s", "x_floor", "x_base", "best_us",
         "x_best", "target", "base+branch / base");
  for (const Row &r : rows) {
    if (r.path.rfind("auto ->", 0) != 0)
      continue;
    double bb = NAN;
    for (const Row &q : rows)
      if (q.wl == r.wl && q.rank == r.rank && q.path == "base + auto")
        bb = q.xbase;
    const bool pre = r.wl == "prefill4096";
    char tgt[32], bst[32], xb[32], bbs[48];
    snprintf(tgt, sizeof tgt, r.target == r.target ? "%.0f %s" : "-",
             r.target, r.us <= r.target ? "MET" : "MISSED");
    snprintf(bst, sizeof bst, r.best == r.best ? "%.1f" : "-", r.best);
    snprintf(xb, sizeof xb, r.best == r.best ? "%.2f" : "-", r.us / r.best);
    snprintf(bbs, sizeof bbs, bb == bb ? "%.2fx (<= %.2fx %s)" : "-", bb,
             pre ? 1.08 : 1.3, bb <= (pre ? 1.08 : 1.3) ? "MET" : "MISSED");
    printf("%-12s %-5s %-22s %9.2f %7.0f %7.2f %7.2f %8s %6s %8s  %s\n",
           r.wl.c_str(), r.rank.c_str(), r.path.c_str() + 8, r.us, r.gbs,
           r.xfloor, r.xbase, bst, xb, tgt, bbs);
  }
  /* the cost of paging: every path through the page tables against the
  ** same path on contiguous factors, same run */
  auto find = [&](const std::string &wl, const std::string &rank,
                  const std::string &path) -> double {
    for (const Row &q : rows)
      if (q.wl == wl && q.rank == rank && q.path == path)
        return q.us;
    return NAN;
  };
  printf("\npaged (factor rows through a fragmented page table, page = 4096 "
         "elements) vs contiguous, same path, us (ratio):\n");
  printf("%-12s %-5s", "workload", "rank");
  for (int path = 1; path < LSIM_CUDA_PATH__COUNT; path++)
    printf(" %22s", lsim_cuda_path_name(path));
  printf("\n");
  for (int ri = 0; ri < 3; ri++)
    for (int wi = 0; wi < 3; wi++) {
      char rb[16];
      const std::string rk = rset_name(RSET[ri], rb);
      printf("%-12s %-5s", WORKS[wi].name, rk.c_str());
      for (int path = 1; path < LSIM_CUDA_PATH__COUNT; path++) {
        const std::string nm = lsim_cuda_path_name(path);
        double c = find(WORKS[wi].name, rk, nm),
               g = find(WORKS[wi].name, rk, nm + " paged");
        char b[40];
        snprintf(b, sizeof b, "%.2f/%.2f (%.2f)", c, g, g / c);
        printf(" %22s", b);
      }
      printf("\n");
    }
  printf("\nmixed-rank batch (8,16,32,64): per-adapter rank vs zero-padded "
         "slots at rank 64, same path, us (ratio padded / per-rank):\n");
  for (int wi = 0; wi < 3; wi++) {
    printf("%-12s %-5s", WORKS[wi].name, "8-64");
    for (int path = 1; path < LSIM_CUDA_PATH__COUNT; path++) {
      const std::string nm = lsim_cuda_path_name(path);
      double c = find(WORKS[wi].name, "8-64", nm),
             g = find(WORKS[wi].name, "8-64", nm + " padded64");
      char b[40];
      snprintf(b, sizeof b, "%.2f/%.2f (%.2f)", c, g, g / c);
      printf(" %22s", b);
    }
    printf("\n");
  }
  /* base GEMM plus branch: every composition against the GEMM alone */
  printf("\nbase GEMM + branch, one graph (us; ratio to the GEMM alone; "
         "issue 23 targets <= 1.3x decode shapes, <= 1.08x prefill):\n");
  printf("%-12s %-5s %8s %8s %8s %8s %8s %8s %8s %8s  %s\n", "workload",
         "rank", "gemm", "branch", "seq", "fork", "side", "beta1", "chunk",
         "best", "best is");
  for (int ri = 0; ri < 2; ri++)
    for (int wi = 0; wi < 3; wi++) {
      char rb[16];
      const std::string rk = rset_name(RSET[ri], rb);
      double base = find(WORKS[wi].name, rk, "base_gemm (cuBLAS)"), br = NAN,
             best[5] = {NAN, NAN, NAN, NAN, NAN}, top = NAN;
      std::string top_is;
      for (const Row &q : rows) {
        if (q.wl != WORKS[wi].name || q.rank != rk || q.us != q.us)
          continue;
        if (q.path.rfind("auto ->", 0) == 0)
          br = q.us;
        static const char *pre[5] = {"base + seq ", "base + fork",
                                     "base + side", "base + beta1",
                                     "base + chunk"};
        for (int k = 0; k < 5; k++)
          if (q.path.rfind(pre[k], 0) == 0 && !(q.us >= best[k]))
            best[k] = q.us;
        if (q.path.rfind("base + ", 0) == 0 &&
            q.path.find("timing only") == std::string::npos &&
            !(q.us >= top)) {
          top = q.us;
          top_is = q.path.substr(7);
        }
      }
      const double lim = wi == 2 ? 1.08 : 1.3;
      printf("%-12s %-5s %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f  %s "
             "(%.2fx; seq %.2fx) %s\n",
             WORKS[wi].name, rk.c_str(), base, br, best[0], best[1], best[2],
             best[3], best[4], top, top_is.c_str(), top / base, best[0] / base,
             top / base <= lim ? "MET" : "MISSED");
    }
  /* the partitioned compositions (issue 23, --part): the best of each k
  ** against cuBLAS and the best unpartitioned composition, same run */
  if (g_part) {
    printf("\nbase GEMM (cuBLASLt on nsm - k SMs) beside the branch (us; "
           "ratio to the cuBLAS GEMM alone; target <= 1.3x):\n");
    printf("%-10s %-4s %7s %7s %7s %7s", "workload", "rank", "gemm", "lt",
           "branch", "seqpdl");
    const int ks[] = {0, 8, 16, 24, 32, 48, 66, 80, 100};
    for (int k : ks)
      printf(" %6s%-2d", "k=", k);
    printf("  best partitioned\n");
    for (int ri = 0; ri < 2; ri++)
      for (int wi = 0; wi < 2; wi++) {
        char rb[16];
        const std::string rk = rset_name(RSET[ri], rb);
        const double base = find(WORKS[wi].name, rk, "base_gemm (cuBLAS)");
        double lt0 = NAN, br = NAN, sp = NAN, top = NAN, bk[9];
        std::string top_is;
        for (double &x : bk)
          x = NAN;
        for (const Row &q : rows) {
          if (q.wl != WORKS[wi].name || q.rank != rk || q.us != q.us)
            continue;
          if (q.path == "base_gemm (cuBLASLt, 0 SMs)")
            lt0 = q.us;
          if (q.path.rfind("auto ->", 0) == 0)
            br = q.us;
          if ((q.path.rfind("base + seq", 0) == 0) &&
              q.path.find(" lt") == std::string::npos &&
              q.path.find("(eager)") == std::string::npos && !(q.us >= sp))
            sp = q.us;
          if ((q.path.rfind("base + p", 0) != 0 &&
               q.path.rfind("base + green", 0) != 0) ||
              q.path.find("(eager)") != std::string::npos)
            continue;
          const size_t kp = q.path.find(" k=");
          const int k = kp == std::string::npos ? -1 : atoi(q.path.c_str() + kp + 3);
          for (int j = 0; j < 9; j++)
            if (k == ks[j] && !(q.us >= bk[j]))
              bk[j] = q.us;
          if (!(q.us >= top)) {
            top = q.us;
            top_is = q.path.substr(7);
          }
        }
        printf("%-10s %-4s %7.2f %7.2f %7.2f %7.2f", WORKS[wi].name,
               rk.c_str(), base, lt0, br, sp);
        for (int j = 0; j < 9; j++)
          printf(" %8.2f", bk[j]);
        printf("  %.2f (%.2fx; seqpdl %.2fx) %s %s\n", top, top / base,
               sp / base, top_is.c_str(), top / base <= 1.3 ? "MET" : "MISSED");
      }
    printf("\nthe hard partition (green contexts) and its baselines: as "
           "graphs, and launched directly (eager; compare eager with eager):"
           "\n");
    for (int ri = 0; ri < 2; ri++)
      for (int wi = 0; wi < 2; wi++) {
        char rb[16];
        const std::string rk = rset_name(RSET[ri], rb);
        const double base = find(WORKS[wi].name, rk, "base_gemm (cuBLAS)");
        const double ebase =
            find(WORKS[wi].name, rk, "base_gemm (cuBLAS, eager)");
        double b[5] = {NAN, NAN, NAN, NAN, NAN};
        std::string bi[5];
        static const char *pre[5] = {"base + green", "base + green",
                                     "base + seqpdl", "base + pside",
                                     "base + seqpdl"};
        for (const Row &q : rows) {
          if (q.wl != WORKS[wi].name || q.rank != rk || q.us != q.us)
            continue;
          const bool eg = q.path.find("(eager)") != std::string::npos;
          for (int j = 0; j < 5; j++)
            if (q.path.rfind(pre[j], 0) == 0 && eg == (j >= 1 && j <= 3) &&
                (j != 4 || q.path.find(" lt") == std::string::npos) &&
                !(q.us >= b[j])) {
              b[j] = q.us;
              bi[j] = q.path.substr(7);
            }
        }
        printf("%-10s %-4s graph: cuBLAS %.2f, green %.2f (%.2fx) [%s], "
               "seqpdl %.2f (%.2fx)\n",
               WORKS[wi].name, rk.c_str(), base, b[0], b[0] / base,
               bi[0].c_str(), b[4], b[4] / base);
        printf("%-10s %-4s eager: cuBLAS %.2f, green %.2f (%.2fx) [%s], "
               "seqpdl %.2f (%.2fx), pside %.2f (%.2fx)\n",
               WORKS[wi].name, rk.c_str(), ebase, b[1], b[1] / ebase,
               bi[1].c_str(), b[2], b[2] / ebase, b[3], b[3] / ebase);
      }
  }
  /* the base projection and the branch in one pass (issue 23) */
  printf("\nbase GEMM + branch in one pass (issue 23; us; ratio to the cuBLAS "
         "GEMM alone; targets <= 1.3x at decode64 and mixed256):\n");
  printf("%-12s %-5s %8s %8s %8s %9s %8s %8s %8s  %s\n", "workload", "rank",
         "gemm", "seq", "gemm1", "gemm1/gm", "best1", "best1/gm", "alone",
         "best one-pass variant");
  for (int ri = 0; ri < 4; ri++)
    for (int wi = 0; wi < 2; wi++) {
      char rb[16];
      const std::string rk = rset_name(RSET[ri], rb);
      const double base = find(WORKS[wi].name, rk, "base_gemm (cuBLAS)");
      const double seq = find(WORKS[wi].name, rk, "base + auto");
      const double one = find(WORKS[wi].name, rk, "base + gemm1 auto");
      const double alone =
          find(WORKS[wi].name, rk, "gemm1 alone (no adapter rows)");
      double top = NAN;
      std::string top_is;
      for (const Row &q : rows)
        if (q.wl == WORKS[wi].name && q.rank == rk &&
            q.path.rfind("base + gemm1", 0) == 0 && q.us == q.us &&
            q.path.find("timing only") == std::string::npos &&
            !(q.us >= top)) {
          top = q.us;
          top_is = q.path.substr(13);
        }
      printf("%-12s %-5s %8.2f %8.2f %8.2f %9.2f %8.2f %8.2f %8.2f  %s %s\n",
             WORKS[wi].name, rk.c_str(), base, seq, one, one / base, top,
             top / base, alone, top_is.c_str(),
             RSET[ri] > 0 && RSET[ri] != 30
                 ? (one / base <= 1.3 ? "(one pass: MET)"
                                      : "(one pass: MISSED)")
                 : "");
    }
  printf("mixed ranks through the one-pass GEMM (chosen), 8-64 vs mean rank "
         "30:");
  for (int wi = 0; wi < 2; wi++) {
    const double a = find(WORKS[wi].name, "8-64", "base + gemm1 auto"),
                 b = find(WORKS[wi].name, "30", "base + gemm1 auto");
    printf("  %s %.2f / %.2f = %.2f", WORKS[wi].name, a, b, a / b);
  }
  printf("\n");
  if (comp_failures)
    printf("compositions: %d outside the bf16 bound\n", comp_failures);
  else
    printf("compositions: every one within the bf16 bound of GEMM + delta\n");
  if (outdir) {
    std::string f = std::string(outdir) + "/bench_kernels.txt";
    FILE *o = fopen(f.c_str(), "w");
    if (o) {
      fprintf(o, "%s\n", desc);
      print_table(rows, o, bw, peak, 1);
      fclose(o);
    }
  }
  if (have_blas)
    comp.close();
  lsim_blas_close(lb);
  lsim_cuda_lora_close(L);
  lsim_cuda_lora_close(Lpad);
  return comp_failures ? 1 : 0;
}

/* ---- the correctness suite ----------------------------------------------------------- */

struct Case {
  int d_in = 0, d_out = 0, nad = 0, maxid = 0;
  std::vector<int> ids, ranks, sexp;
  lsim_rowplan p{};
  std::vector<double> X, Y0, want; /* exact values */
  std::vector<std::vector<double>> A, B;
};

static double dt_round(int dtype, double v) {
  return (double)lsim_cuda_to_float(dtype,
                                    lsim_cuda_from_float(dtype, (float)v));
}

/* Random plan of the case's adapters. */
static void make_plan(Case &c, Rng &r, int big) {
  int n = 1 + r.below(big ? 24 : 12);
  std::vector<lsim_plan_entry> e;
  std::vector<int> pre, dec;
  for (int i = 0; i < n; i++) {
    int phase = r.below(2) ? LSIM_PHASE_PREFILL : LSIM_PHASE_DECODE;
    int rows = 1;
    if (phase == LSIM_PHASE_PREFILL)
      rows = r.below(3) == 0 ? 1 + r.below(big ? 150 : 70) : 1 + r.below(9);
    if (r.below(4) == 0) {
      e.push_back(ent(100 + i, LSIM_BASE, 0, phase, rows));
    } else {
      int a = r.below(c.nad);
      e.push_back(ent(100 + i, c.ids[a], c.ranks[a], phase, rows));
    }
    (phase == LSIM_PHASE_PREFILL ? pre : dec).push_back(i);
  }
  shuffle(r, pre);
  shuffle(r, dec);
  std::vector<int> packed(pre);
  packed.insert(packed.end(), dec.begin(), dec.end());
  int maxr = *std::max_element(c.ranks.begin(), c.ranks.end());
  int R = r.below(2) ? 0 : maxr + r.below(3);
  LK(lsim_rowplan_build(&c.p, e.data(), n, packed.data(), R, eb));
}

static int adapter_index(const Case &c, int id) {
  for (int a = 0; a < c.nad; a++)
    if (c.ids[a] == id)
      return a;
  return -1;
}

/* Integer values with density rho; false if the exact result does not fit
** the dtype (or the exactness bounds of the kernels). */
static bool fill_integer(Case &c, Rng &r, double rho, int dtype) {
  const int T = c.p.T;
  auto val = [&](int mag) -> double {
    if (r.unit() >= rho)
      return 0.0;
    int v = 1 + r.below(mag);
    return r.below(2) ? v : -v;
  };
  c.X.assign((size_t)T * c.d_in, 0);
  for (auto &x : c.X)
    x = val(3);
  for (int a = 0; a < c.nad; a++) {
    c.A[a].assign((size_t)c.ranks[a] * c.d_in, 0);
    c.B[a].assign((size_t)c.d_out * c.ranks[a], 0);
    for (auto &x : c.A[a])
      x = val(3);
    for (auto &x : c.B[a])
      x = val(2);
  }
  c.Y0.assign((size_t)T * c.d_out, 0);
  for (auto &y : c.Y0)
    y = (double)(r.below(33) - 16);
  c.want = c.Y0;
  const double ylim = dtype == LSIM_CUDA_FP16 ? 2048 : 256;
  for (int i = 0; i < T; i++) {
    int a = adapter_index(c, c.p.row_adapter[i]);
    if (a < 0)
      continue;
    const int rk = c.ranks[a];
    const double s = ldexp(1.0, c.sexp[a]);
    std::vector<double> t(rk);
    for (int k = 0; k < rk; k++) {
      double acc = 0, mag = 0;
      for (int q = 0; q < c.d_in; q++) {
        acc += c.X[(size_t)i * c.d_in + q] * c.A[a][(size_t)k * c.d_in + q];
        mag += fabs(c.X[(size_t)i * c.d_in + q] *
                    c.A[a][(size_t)k * c.d_in + q]);
      }
      if (mag >= 65536) /* hi/lo split and fp32 partial sums stay exact */
        return false;
      t[k] = acc * s;
    }
    for (int o = 0; o < c.d_out; o++) {
      double d = 0, mag = 0;
      for (int k = 0; k < rk; k++) {
        d += t[k] * c.B[a][(size_t)o * rk + k];
        mag += fabs(t[k] * c.B[a][(size_t)o * rk + k]);
      }
      if (mag >= 1 << 23)
        return false;
      double y = c.Y0[(size_t)i * c.d_out + o] + d;
      if (fabs(y) > ylim || dt_round(dtype, y) != y)
        return false;
      c.want[(size_t)i * c.d_out + o] = y;
    }
  }
  return true;
}

/* Random (non-integer) values rounded to the dtype, float64 reference. */
static void fill_random(Case &c, Rng &r, int dtype) {
  const int T = c.p.T;
  auto val = [&](double sc) { return dt_round(dtype, (r.unit() * 2 - 1) * sc); };
  c.X.assign((size_t)T * c.d_in, 0);
  for (auto &x : c.X)
    x = val(1);
  for (int a = 0; a < c.nad; a++) {
    c.A[a].assign((size_t)c.ranks[a] * c.d_in, 0);
    c.B[a].assign((size_t)c.d_out * c.ranks[a], 0);
    for (auto &x : c.A[a])
      x = val(1.0 / sqrt((double)c.d_in));
    for (auto &x : c.B[a])
      x = val(1.0 / sqrt((double)c.ranks[a]));
  }
  c.Y0.assign((size_t)T * c.d_out, 0);
  for (auto &y : c.Y0)
    y = val(0.5);
  c.want = c.Y0;
  for (int i = 0; i < T; i++) {
    int a = adapter_index(c, c.p.row_adapter[i]);
    if (a < 0)
      continue;
    const int rk = c.ranks[a];
    const double s = ldexp(1.0, c.sexp[a]) * 0.75;
    std::vector<double> t(rk);
    for (int k = 0; k < rk; k++) {
      double acc = 0;
      for (int q = 0; q < c.d_in; q++)
        acc += c.X[(size_t)i * c.d_in + q] * c.A[a][(size_t)k * c.d_in + q];
      t[k] = acc * s;
    }
    for (int o = 0; o < c.d_out; o++) {
      double d = 0;
      for (int k = 0; k < rk; k++)
        d += t[k] * c.B[a][(size_t)o * rk + k];
      c.want[(size_t)i * c.d_out + o] += d;
    }
  }
}

static void make_case(Case &c, Rng &r, int big) {
  c.d_in = r.below(5) == 0 ? 1 + r.below(8) : 1 + r.below(big ? 2200 : 300);
  c.d_out = r.below(5) == 0 ? 1 + r.below(8) : 1 + r.below(big ? 700 : 300);
  c.nad = 1 + r.below(big ? 40 : 10);
  c.ids.clear();
  c.ranks.clear();
  c.sexp.clear();
  int id = r.below(3);
  for (int a = 0; a < c.nad; a++) {
    c.ids.push_back(id);
    id += 1 + r.below(3);
    int rk;
    switch (r.below(4)) {
    case 0:
      rk = 1 + r.below(4);
      break;
    case 1:
      rk = 1 + r.below(128);
      break;
    case 2:
      rk = 16 * (1 + r.below(8));
      break;
    default:
      rk = 1 + r.below(40);
    }
    c.ranks.push_back(rk);
    c.sexp.push_back(r.below(4) - 2);
  }
  c.maxid = id;
  c.A.assign(c.nad, {});
  c.B.assign(c.nad, {});
  make_plan(c, r, big);
}

struct Checker {
  int failures = 0, runs = 0;
  double worst_rel = 0;
  void fail(const char *fmt, ...) __attribute__((format(printf, 2, 3))) {
    if (failures++ < 25) {
      va_list ap;
      va_start(ap, fmt);
      fputs("FAIL ", stdout);
      vprintf(fmt, ap);
      fputc('\n', stdout);
      va_end(ap);
    }
  }
};

/* Run every path and setting on the case; exact or relative check. */
static void run_case(Checker &ck, Case &c, int dtype, int exact,
                     const char *tag) {
  const int T = c.p.T;
  const int ldx = round8(c.d_in) + (c.d_in % 3 == 0 ? 8 : 0);
  const int ldy = round8(c.d_out);
  const uint16_t xpad = dtype == LSIM_CUDA_FP16 ? 0x7e00 : 0x7fc0; /* NaN */
  const uint16_t canary = 0x5a5a;
  const int rmax = *std::max_element(c.ranks.begin(), c.ranks.end());
  std::vector<uint16_t> hx((size_t)(T > 0 ? T : 1) * ldx, xpad);
  for (int i = 0; i < T; i++)
    for (int q = 0; q < c.d_in; q++)
      hx[(size_t)i * ldx + q] =
          lsim_cuda_from_float(dtype, (float)c.X[(size_t)i * c.d_in + q]);
  /* Y with one guard row before and after, canaries in the padding */
  std::vector<uint16_t> hy((size_t)(T + 2) * ldy, canary);
  for (int i = 0; i < T; i++)
    for (int o = 0; o < c.d_out; o++)
      hy[(size_t)(i + 1) * ldy + o] =
          lsim_cuda_from_float(dtype, (float)c.Y0[(size_t)i * c.d_out + o]);
  uint16_t *dx, *dy;
  CK(cudaMalloc(&dx, hx.size() * 2));
  CK(cudaMalloc(&dy, hy.size() * 2));
  CK(cudaMemcpy(dx, hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
  /* a pageable cudaMemcpy may return before its DMA lands, and the
  ** context's stream does not wait for the legacy stream: wait here */
  CK(cudaDeviceSynchronize());
  std::vector<uint16_t> out(hy.size());

  /* three layouts of the factors: contiguous (every path, three launch
  ** settings), zero-padded slots at the largest rank and a fragmented
  ** paged pool (every path, default settings) */
  for (int lay = 0; lay < 3; lay++) {
  static const char *const lay_name[3] = {"contiguous", "padded", "paged"};
  lsim_cuda_lora *L = nullptr;
  lsim_cuda_lora_cfg cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.dtype = dtype;
  cfg.d_in = c.d_in;
  cfg.d_out = c.d_out;
  cfg.max_adapters = c.maxid + 1;
  cfg.pad_rank = lay == 1 ? rmax : 0;
  LK(lsim_cuda_lora_open(&L, &cfg, eb));
  Paged pg;
  std::vector<std::vector<uint16_t>> fa(c.nad), fb(c.nad);
  std::vector<float> fs(c.nad);
  for (int a = 0; a < c.nad; a++) {
    fa[a].resize(c.A[a].size());
    fb[a].resize(c.B[a].size());
    for (size_t i = 0; i < fa[a].size(); i++)
      fa[a][i] = lsim_cuda_from_float(dtype, (float)c.A[a][i]);
    for (size_t i = 0; i < fb[a].size(); i++)
      fb[a][i] = lsim_cuda_from_float(dtype, (float)c.B[a][i]);
    fs[a] = (float)(ldexp(1.0, c.sexp[a]) * (exact ? 1.0 : 0.75));
    if (lay < 2)
      LK(lsim_cuda_lora_load(L, c.ids[a], c.ranks[a], fs[a], fa[a].data(),
                             fb[a].data(), eb));
  }
  if (lay == 2)
    pg.build(c.d_in, c.d_out, c.ids, c.ranks, fs, fa, fb,
             (uint64_t)c.p.T * 977 + (uint64_t)c.d_out, 8);

  lsim_cuda_lora_tune t0;
  lsim_cuda_lora_get_tune(L, &t0);
  std::vector<lsim_cuda_lora_tune> tunes;
  tunes.push_back(t0);
  {
    lsim_cuda_lora_tune t = t0;
    t.shrink_splits = 3;
    t.expand_cols = 3;
    t.shrink_rsplit = 2; /* the rank splits forced on every case */
    t.expand_rsplit = 2;
    t.expand_order = 2; /* and the expand's balanced order */
    tunes.push_back(t);
    t = t0;
    t.pdl = 0;
    t.shrink_splits = 2;
    tunes.push_back(t);
  }
  if (lay > 0)
    tunes.resize(1);
  for (int path = 0; path < LSIM_CUDA_PATH__COUNT; path++) {
    for (size_t ti = 0; ti < tunes.size(); ti++) {
      if (path == LSIM_CUDA_PATH_AUTO && ti > 0)
        continue;
      lsim_cuda_lora_set_tune(L, &tunes[ti]);
      lsim_errbuf eb = LSIM_ERRBUF_INIT;
      lsim_err rc = lay == 2 ? lsim_cuda_lora_plan_paged(
                                   L, &c.p, path, pg.pool, pg.pw,
                                   pg.ref.data(), (int)pg.ref.size(), &eb)
                             : lsim_cuda_lora_plan(L, &c.p, path, &eb);
      if (rc == LSIM_E_USAGE && rmax > 128 &&
          (path == LSIM_CUDA_PATH_SGMV_MMA ||
           path == LSIM_CUDA_PATH_INDEXED_MMA))
        continue;
      if (rc) {
        ck.fail("%s: plan %s: %s: %s", tag, lsim_cuda_path_name(path),
                lsim_err_name(rc), eb.msg);
        continue;
      }
      LK(lsim_cuda_lora_poison(L, eb));
      CK(cudaMemcpy(dy, hy.data(), hy.size() * 2, cudaMemcpyHostToDevice));
      CK(cudaDeviceSynchronize()); /* see above */
      rc = lsim_cuda_lora_run(L, dx, ldx, dy + ldy, ldy, &eb);
      if (!rc)
        rc = lsim_cuda_lora_sync(L, &eb);
      ck.runs++;
      if (rc) {
        ck.fail("%s: run %s: %s: %s", tag, lsim_cuda_path_name(path),
                lsim_err_name(rc), eb.msg);
        continue;
      }
      CK(cudaMemcpy(out.data(), dy, out.size() * 2, cudaMemcpyDeviceToHost));
      char d0[256], d[300];
      lsim_cuda_lora_describe(L, d0, sizeof d0);
      snprintf(d, sizeof d, "%s; %s", lay_name[lay], d0);
      int bad = 0;
      double e2 = 0, r2 = 0;
      for (int i = -1; i <= T && bad < 3; i++) {
        const bool base = i >= 0 && i < T && c.p.row_adapter[i] == LSIM_BASE;
        for (int o = 0; o < ldy && bad < 3; o++) {
          const size_t k = (size_t)(i + 1) * ldy + o;
          if (i < 0 || i == T || o >= c.d_out || base) {
            if (out[k] != hy[k]) {
              ck.fail("%s %s tune %zu [%s]: %s (%d,%d) changed: %04x -> %04x",
                      tag, lsim_cuda_path_name(path), ti, d,
                      i < 0 || i == T ? "guard row" : base ? "base row"
                                                           : "padding",
                      i, o, hy[k], out[k]);
              bad++;
            }
            continue;
          }
          const double got = lsim_cuda_to_float(dtype, out[k]);
          const double want = c.want[(size_t)i * c.d_out + o];
          if (exact) {
            if (!(got == want)) {
              ck.fail("%s %s tune %zu [%s]: Y(%d,%d) = %.9g, want %.9g "
                      "(adapter %d)",
                      tag, lsim_cuda_path_name(path), ti, d, i, o, got, want,
                      c.p.row_adapter[i]);
              bad++;
            }
          } else {
            if (got != got) {
              ck.fail("%s %s: Y(%d,%d) is NaN", tag,
                      lsim_cuda_path_name(path), i, o);
              bad++;
            }
            e2 += (got - want) * (got - want);
            r2 += want * want;
          }
        }
      }
      if (!exact && bad == 0) {
        double rel = r2 > 0 ? sqrt(e2 / r2) : 0;
        ck.worst_rel = std::max(ck.worst_rel, rel);
        if (rel > 1e-2)
          ck.fail("%s %s tune %zu [%s]: relative error %.3e > 1e-2", tag,
                  lsim_cuda_path_name(path), ti, d, rel);
      }
    }
  }
  pg.release();
  lsim_cuda_lora_close(L);
  }
  CK(cudaFree(dx));
  CK(cudaFree(dy));
}

/*
** The base GEMM plus the branch in one graph (Comp): every composition on
** three batches (decode-like, mixed with base rows and a non-square module,
** prefill-like with chunk cuts inside segments), random bf16 values; the
** output of all rows must be written (poisoned with NaN first), within the
** bf16 bound of the GEMM's own output plus the float64 delta on every
** checked row, and identical bit for bit when the graph runs again.
*/
static void check_compose(Checker &ck) {
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  Blas blas;
  if (!blas.open(s)) {
    printf("compose: skipped, cuBLAS unavailable (%s)\n", blas.why.c_str());
    CK(cudaStreamDestroy(s));
    return;
  }
  int nvar = 0, ngemm_run = 0, ngemm_refused = 0, nvar_part = 0;
  int nsm = 0;
  CK(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, 0));
  double worst_all = 0;
  for (int cs = 0; cs < 3; cs++) {
    Rng r(4242 + cs);
    const int d_in = cs == 1 ? 1000 : 1024, d_out = cs == 1 ? 776 : 1024;
    const int ldx = round8(d_in) + (cs == 1 ? 8 : 0), ldy = round8(d_out);
    const int nad = cs == 2 ? 5 : 16 + 8 * cs;
    std::vector<int> ids(nad), rk(nad);
    std::vector<float> sc(nad);
    std::vector<std::vector<uint16_t>> A(nad), B(nad);
    std::vector<int> slots(64);
    for (int i = 0; i < 64; i++)
      slots[i] = i;
    shuffle(r, slots);
    static const int rset[4] = {8, 16, 32, 64};
    for (int a = 0; a < nad; a++) {
      ids[a] = slots[a];
      rk[a] = cs == 0 ? 16 : rset[r.below(4)];
      sc[a] = (float)(0.5 + r.unit());
      A[a].resize((size_t)rk[a] * d_in);
      B[a].resize((size_t)d_out * rk[a]);
      host_fill(A[a], r, 1.f / 32.f);
      host_fill(B[a], r, 1.f / sqrtf((float)rk[a]));
    }
    /* entries: prefills first, then decodes (the default packed order) */
    std::vector<lsim_plan_entry> e;
    std::vector<int> row_ad;
    int uid = 1;
    auto add = [&](int a, int phase, int rows) {
      e.push_back(ent(uid++, a < 0 ? LSIM_BASE : ids[a], a < 0 ? 0 : rk[a],
                      phase, rows));
    };
    if (cs == 2) {
      add(0, LSIM_PHASE_PREFILL, 150);
      add(-1, LSIM_PHASE_PREFILL, 40);
      add(1, LSIM_PHASE_PREFILL, 200);
      add(2, LSIM_PHASE_PREFILL, 96);
      add(3, LSIM_PHASE_PREFILL, 250);
      for (int i = 0; i < 12; i++)
        add(i % 3 == 0 ? -1 : 4, LSIM_PHASE_DECODE, 1);
    } else {
      if (cs == 1) {
        add(r.below(nad), LSIM_PHASE_PREFILL, 5);
        add(-1, LSIM_PHASE_PREFILL, 7);
        add(r.below(nad), LSIM_PHASE_PREFILL, 9);
      }
      const int nd = cs == 0 ? 56 : 160;
      for (int i = 0; i < nd; i++)
        add(r.below(8) == 0 ? -1 : r.below(nad), LSIM_PHASE_DECODE, 1);
    }
    for (int ph = 0; ph < 2; ph++)
      for (const lsim_plan_entry &x : e)
        if ((x.phase == LSIM_PHASE_PREFILL) == (ph == 0))
          for (int j = 0; j < x.rows; j++) {
            int a = -1;
            for (int q = 0; q < nad; q++)
              if (x.adapter == ids[q])
                a = q;
            row_ad.push_back(x.adapter == LSIM_BASE ? -1 : a);
          }
    const int N = (int)row_ad.size();
    lsim_rowplan p{};
    LK(lsim_rowplan_build(&p, e.data(), (int)e.size(), NULL, 0, eb));
    std::vector<uint16_t> hX((size_t)N * ldx, 0), hW((size_t)d_out * d_in);
    {
      std::vector<uint16_t> row(d_in);
      for (int i = 0; i < N; i++) {
        host_fill(row, r, 1.f);
        memcpy(&hX[(size_t)i * ldx], row.data(), (size_t)d_in * 2);
      }
      host_fill(hW, r, 1.f / 32.f);
    }
    uint16_t *dX, *dW, *dY;
    CK(cudaMalloc(&dX, hX.size() * 2));
    CK(cudaMalloc(&dW, hW.size() * 2));
    CK(cudaMalloc(&dY, (size_t)N * ldy * 2));
    CK(cudaMemcpy(dX, hX.data(), hX.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dW, hW.data(), hW.size() * 2, cudaMemcpyHostToDevice));
    lsim_cuda_lora_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.dtype = LSIM_CUDA_BF16;
    cfg.d_in = d_in;
    cfg.d_out = d_out;
    cfg.max_adapters = 64;
    cfg.stream = s;
    lsim_cuda_lora *L = nullptr;
    LK(lsim_cuda_lora_open(&L, &cfg, eb));
    Comp comp;
    comp.open(cfg, L, &blas, COMP_MAXCH);
    comp.ldy_max = ldy;
    lsim_blas *lb = nullptr; /* cuBLASLt: the partitioned compositions */
    {
      lsim_errbuf leb = LSIM_ERRBUF_INIT;
      if (lsim_blas_open(&lb, s, &leb) || !lsim_blas_has_lt(lb)) {
        lsim_blas_close(lb);
        lb = nullptr;
      }
      comp.lb = lb;
    }
    for (int a = 0; a < nad; a++) {
      LK(lsim_cuda_lora_load(L, ids[a], rk[a], sc[a], A[a].data(),
                             B[a].data(), eb));
      comp.load(ids[a], rk[a], sc[a], A[a].data(), B[a].data(), true);
    }
    CompRef ref;
    ref.d_in = d_in;
    ref.d_out = d_out;
    ref.N = N;
    ref.ldx = ldx;
    ref.ldy = ldy;
    ref.X = &hX;
    ref.row_ad = row_ad;
    ref.rk = &rk;
    ref.sc = &sc;
    ref.A = &A;
    ref.B = &B;
    ref.W = &hW;
    for (int i = 0; i < N; i += (N > 300 ? 3 : 1))
      ref.sample.push_back(i);
    ref.prepare();
    std::vector<uint16_t> hG((size_t)N * ldy), hY(hG.size()), hY2(hG.size());
    CK(cudaMemset(dY, 0xff, hG.size() * 2));
    if (!blas.run(N, d_out, d_in, dX, ldx, dW, dY, ldy, 0.f))
      ck.fail("compose case %d: base gemm failed", cs);
    CK(cudaStreamSynchronize(s));
    CK(cudaMemcpy(hG.data(), dY, hG.size() * 2, cudaMemcpyDeviceToHost));
    std::vector<CompVar> cv;
    cv.push_back({"seq", COMP_SEQ, LSIM_CUDA_PATH_AUTO, 0, 0, 0});
    for (int path = 0; path < LSIM_CUDA_PATH__COUNT; path++) {
      if (path == LSIM_CUDA_PATH_FUSED)
        continue;
      for (int pr = 0; pr < 3; pr++)
        cv.push_back({std::string("fork ") + lsim_cuda_path_name(path) +
                          " prio=" + std::to_string(pr),
                      COMP_FORK, path, pr == 1 ? 1 : 0, pr, 0});
      for (int pr = 0; pr < 2; pr++)
        cv.push_back({std::string("forkpdl ") + lsim_cuda_path_name(path) +
                          " prio=" + std::to_string(pr),
                      COMP_FORKPDL, path, 0, pr, 0});
    }
    for (int path : {LSIM_CUDA_PATH_AUTO, LSIM_CUDA_PATH_DECODE,
                     LSIM_CUDA_PATH_SGMV_MMA, LSIM_CUDA_PATH_FUSED})
      for (int pr = 0; pr < 2; pr++)
        cv.push_back({std::string("side ") + lsim_cuda_path_name(path) +
                          " prio=" + std::to_string(pr),
                      COMP_SIDE, path, 0, pr, 0});
    for (int path = 0; path < LSIM_CUDA_PATH__COUNT; path++)
      if (path != LSIM_CUDA_PATH_FUSED)
        cv.push_back({std::string("seqpdl ") + lsim_cuda_path_name(path),
                      COMP_SEQPDL, path, 0, 0, 0});
    cv.push_back({"beta1", COMP_BETA1, LSIM_CUDA_PATH_AUTO, 0, 0, 0});
    for (int c : {2, 3, 8})
      cv.push_back({"chunk" + std::to_string(c), COMP_CHUNK,
                    LSIM_CUDA_PATH_AUTO, c == 3 ? 1 : 0, 1, c});
    /* the partitioned compositions (issue 23): the GEMM through cuBLASLt
    ** targeting nsm - k SMs beside the branch (side, fork), the branch's
    ** grids sized for k or for all */
    int npart = 0;
    for (int k : {16, 66}) {
      if (!lb)
        break;
      for (int kind : {COMP_SIDE, COMP_FORK})
        for (int path : {LSIM_CUDA_PATH_AUTO, LSIM_CUDA_PATH_DECODE,
                         LSIM_CUDA_PATH_SGMV_MMA, LSIM_CUDA_PATH_FUSED})
          for (int pr : {0, 2}) {
            if (kind == COMP_FORK && (path == LSIM_CUDA_PATH_AUTO ||
                                      path == LSIM_CUDA_PATH_FUSED))
              continue;
            CompVar v{std::string(kind == COMP_SIDE ? "pside " : "pfork ") +
                          lsim_cuda_path_name(path) + " k=" +
                          std::to_string(k) + " prio=" + std::to_string(pr),
                      kind, path, 0, pr, 0};
            v.smt = nsm - k;
            v.bsms = pr ? k : 0;
            cv.push_back(v);
            npart++;
          }
    }
    if (lb) {
      CompVar v{"seqpdl decode lt", COMP_SEQPDL, LSIM_CUDA_PATH_DECODE, 0, 0,
                0};
      v.smt = 0;
      cv.push_back(v);
      npart++;
    }
    nvar_part += npart;
    /* the one pass (issue 23): every shrink path it takes, cluster sizes,
    ** rows per block, with and without the prefetch, beta 0 and 1 (Y
    ** preset to G: the result must be 2 G + delta); refused (E_USAGE) on
    ** the fused and indexed paths and above 256 rows */
    const int ngemm0 = (int)cv.size();
    for (int path : {LSIM_CUDA_PATH_AUTO, LSIM_CUDA_PATH_DECODE,
                     LSIM_CUDA_PATH_SGMV, LSIM_CUDA_PATH_SGMV_MMA,
                     LSIM_CUDA_PATH_INDEXED, LSIM_CUDA_PATH_FUSED})
      for (int gcs : {0, 1, 2, 8})
        for (float beta : {0.f, 1.f}) {
          if ((path == LSIM_CUDA_PATH_INDEXED ||
               path == LSIM_CUDA_PATH_FUSED) &&
              (gcs || beta != 0.f))
            continue;
          CompVar v{std::string("gemm1 ") + lsim_cuda_path_name(path) +
                        " cs=" + std::to_string(gcs) +
                        (beta != 0.f ? " beta=1" : ""),
                    COMP_GEMM1, path, 0, 0, 0};
          v.gcs = gcs;
          v.gpf = gcs != 2;
          v.beta = beta;
          cv.push_back(v);
        }
    for (int gbm : {128, 256}) {
      CompVar v{"gemm1 auto bm=" + std::to_string(gbm), COMP_GEMM1,
                LSIM_CUDA_PATH_AUTO, 0, 0, 0};
      v.gbm = gbm;
      cv.push_back(v);
    }
    /* the streaming one-pass GEMM (wgemm.cu): every shrink path it
    ** takes, K ranges 1, 2, 8 and the rule's, 2 and the most stages,
    ** beta 0 and 1; refused as above */
    for (int path : {LSIM_CUDA_PATH_AUTO, LSIM_CUDA_PATH_DECODE,
                     LSIM_CUDA_PATH_SGMV, LSIM_CUDA_PATH_SGMV_MMA,
                     LSIM_CUDA_PATH_INDEXED, LSIM_CUDA_PATH_FUSED})
      for (int gcs : {0, 1, 2, 8})
        for (float beta : {0.f, 1.f}) {
          if ((path == LSIM_CUDA_PATH_INDEXED ||
               path == LSIM_CUDA_PATH_FUSED) &&
              (gcs || beta != 0.f))
            continue;
          CompVar v{std::string("gemm2 ") + lsim_cuda_path_name(path) +
                        " cs=" + std::to_string(gcs) +
                        (gcs == 2 ? " ns=2" : "") +
                        (beta != 0.f ? " beta=1" : ""),
                    COMP_GEMM1, path, 0, 0, 0};
          v.gcs = gcs;
          v.gns = gcs == 2 ? 2 : 0;
          v.beta = beta;
          v.gk = 2;
          cv.push_back(v);
        }
    std::vector<uint16_t> hG2(hG.size());
    for (size_t i = 0; i < hG.size(); i++) /* 2 G: exact in bf16 */
      hG2[i] = lsim_cuda_from_float(LSIM_CUDA_BF16, 2.f * bf(hG[i]));
    int vi = -1;
    for (const CompVar &v : cv) {
      std::string why;
      cudaGraphExec_t ge;
      ck.runs++;
      nvar++;
      vi++;
      const bool g1 = vi >= ngemm0;
      const bool refuse = g1 && (N > LSIM_CUDA_GEMM_MAX_ROWS ||
                                 v.path == LSIM_CUDA_PATH_INDEXED ||
                                 v.path == LSIM_CUDA_PATH_FUSED);
      if (!comp.prepare(v, &p, e, N, &why) ||
          !comp.build(v, N, d_in, d_out, dX, ldx, dW, dY, ldy, &ge, &why)) {
        if (refuse) {
          ngemm_refused++;
          cudaGetLastError();
          continue;
        }
        ck.fail("compose case %d %s: %s", cs, v.label.c_str(), why.c_str());
        cudaGetLastError();
        continue;
      }
      if (refuse) {
        ck.fail("compose case %d %s: ran, but a plan of %d rows on this "
                "path should be refused", cs, v.label.c_str(), N);
        cudaGraphExecDestroy(ge);
        continue;
      }
      if (g1)
        ngemm_run++;
      for (int k = 0; k < 2; k++) {
        if (v.beta != 0.f)
          CK(cudaMemcpyAsync(dY, hG.data(), hG.size() * 2,
                             cudaMemcpyHostToDevice, s));
        else
          CK(cudaMemsetAsync(dY, 0xff, hG.size() * 2, s));
        CK(cudaGraphLaunch(ge, s));
        CK(cudaStreamSynchronize(s));
        CK(cudaMemcpy(k ? hY2.data() : hY.data(), dY, hG.size() * 2,
                      cudaMemcpyDeviceToHost));
      }
      cudaGraphExecDestroy(ge);
      double rel, worst = ref.compare(hY, v.beta != 0.f ? hG2 : hG, &rel);
      if (!(worst <= 1.0))
        ck.fail("compose case %d (N %d, %dx%d) %s: error %.3g x the bf16 "
                "bound%s",
                cs, N, d_in, d_out, v.label.c_str(), worst,
                worst != worst ? " (an output row left unwritten)" : "");
      else
        worst_all = std::max(worst_all, worst);
      for (int i = 0; i < N; i++)
        if (memcmp(&hY[(size_t)i * ldy], &hY2[(size_t)i * ldy],
                   (size_t)d_out * 2)) {
          ck.fail("compose case %d %s: row %d differs between two runs", cs,
                  v.label.c_str(), i);
          break;
        }
    }
    comp.close();
    lsim_blas_close(lb);
    lsim_cuda_lora_close(L);
    lsim_rowplan_release(&p);
    CK(cudaFree(dX));
    CK(cudaFree(dW));
    CK(cudaFree(dY));
  }
  printf("compose: %d compositions over 3 batches (seq, fork on every "
         "two-launch path x 3 priorities, forkpdl x 2, side x 4 paths x 2, "
         "seqpdl, beta1, chunk2/3/8, %d partitioned (cuBLASLt on nsm - k "
         "SMs: side and fork, k 16 and 66), the one-pass gemm1: %d run, %d "
         "refused as they should be), worst error "
         "%.2f of the bf16 bound\n",
         nvar, nvar_part, ngemm_run, ngemm_refused, worst_all);
  CK(cudaStreamDestroy(s));
}

static int check(int cases) {
  Checker ck;
  char desc[256];
  if (lsim_cuda_describe(desc, sizeof desc) <= 0) {
    printf("bench_kernels --check: no CUDA device (%s)\n", desc);
    return 77;
  }
  printf("bench_kernels --check: %s\n", desc);
  int exact_cases = 0, skipped = 0;
  for (int seed = 1; seed <= cases; seed++) {
    for (int dtype = 0; dtype < 2; dtype++) {
      Rng r(seed * 7919 + dtype);
      Case c;
      make_case(c, r, seed % 4 == 0);
      bool ok = false;
      for (double rho = 0.6; rho > 0.004 && !ok; rho *= 0.5)
        ok = fill_integer(c, r, rho, dtype);
      char tag[96];
      snprintf(tag, sizeof tag,
               "int seed %d %s (T %d, d_in %d, d_out %d, %d adapters)", seed,
               dtype ? "fp16" : "bf16", c.p.T, c.d_in, c.d_out, c.nad);
      if (!ok) {
        skipped++;
      } else {
        run_case(ck, c, dtype, 1, tag);
        exact_cases++;
      }
      lsim_rowplan_release(&c.p);
    }
  }
  int rand_cases = std::max(2, cases / 8);
  for (int seed = 1; seed <= rand_cases; seed++) {
    Rng r(seed * 104729);
    Case c;
    make_case(c, r, 1);
    fill_random(c, r, LSIM_CUDA_BF16);
    char tag[96];
    snprintf(tag, sizeof tag, "random bf16 seed %d (T %d, d_in %d, d_out %d)",
             seed, c.p.T, c.d_in, c.d_out);
    run_case(ck, c, LSIM_CUDA_BF16, 0, tag);
    lsim_rowplan_release(&c.p);
  }
  check_compose(ck);
  printf("check: %d integer cases (%d skipped: no exact fit), %d random "
         "bf16 cases, %d runs, %d failures; integer mode exact %s; random "
         "bf16 worst relative error %.3e (bound 1e-2)\n",
         exact_cases, skipped, rand_cases, ck.runs, ck.failures,
         ck.failures ? "NO" : "yes", ck.worst_rel);
  return ck.failures ? 1 : 0;
}

int main(int argc, char **argv) {
  int do_check = 0, cases = 60, sweep = 0, reps = 100, compose = 0;
  const char *out = getenv("OUT");
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--check"))
      do_check = 1;
    else if (!strcmp(argv[i], "--cases") && i + 1 < argc)
      cases = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--sweep"))
      sweep = 1;
    else if (!strcmp(argv[i], "--compose"))
      compose = 1;
    else if (!strcmp(argv[i], "--part"))
      compose = g_part = 1;
    else if (!strcmp(argv[i], "--gemm1"))
      g_quick = 1;
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
      reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--out") && i + 1 < argc)
      out = argv[++i];
    else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      printf("usage: bench_kernels [--sweep|--compose|--part] [--reps N] [--out DIR] | "
             "--check [--cases N]\n"
             "  (no option)  the kernel table of issue 6 (docs/CUDA.md)\n"
             "  --sweep      add the tuning rows (in DIR/bench_kernels.txt)\n"
             "  --compose    only the base GEMM + branch compositions (and the\n"
             "               branch alone) at ranks 16 and 64\n"
             "  --part       only the partitioned compositions (cuBLASLt on\n"
             "               part of the SMs beside the branch; issue 23)\n"
             "  --reps N     timed replays per row (median; default 100)\n"
             "  --out DIR    also write the full table there ($OUT)\n"
             "  --check      the correctness suite (exit 1 on a failure)\n"
             "  --cases N    seeds of the suite (default 60)\n");
      return 0;
    } else {
      fprintf(stderr,
              "usage: bench_kernels [--sweep|--compose|--part] [--reps N] [--out DIR] | "
              "--check [--cases N]\n");
      return 2;
    }
  }
  if (do_check)
    return check(cases);
  char desc[256];
  if (lsim_cuda_describe(desc, sizeof desc) <= 0) {
    printf("bench_kernels: no CUDA device (%s)\n", desc);
    return 77;
  }
  return bench(sweep, reps, out, compose);
}
