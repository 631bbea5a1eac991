/*
** bench_forward.c: the whole-model executor's benchmark (issue 19,
** docs/BENCHMARKS.md "Whole forward"): device time per forward of a
** preset's shape at a decode batch, against the floor of its bytes.
**
**   bench_forward [--preset NAME] [--batch N] [--ctx N] [--reps N]
**                 [--adapters N] [--rank R]
**
** It measures the copy bandwidth once (a device-to-device copy, bytes read
** plus bytes written over the event time), then opens the executor with
** one pool holding every sequence's KV (pages interleaved across
** sequences, filled with random bf16) and N adapters of rank R on every
** module, and times forwards of `batch` decode rows at context `ctx`:
** base only, then with the adapters (batch / N rows each).  Each row:
** the median and the spread of `reps` forwards (CUDA events on the compute
** stream around the whole forward, as iterations.backend_ns), the floor
** (the weight bytes every forward reads -- every layer's projections and
** the LM head; the embedding gather is negligible -- plus the KV bytes of
** the context, plus the adapters' bytes, over the measured bandwidth), the
** ratio, and tokens per second.  A profiled forward (events between
** stages) then splits the time into GEMMs, attention, deltas and the rest.
** Exit status 0, or 1 with a message (no device, no cuBLAS, no fit).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "backends/cuda/cuda.h"
#include "backends/cuda/fwd.h"
#include "backends/fwd_layout.h"
#include "backends/shape.h"
#include "engine/rowplan.h"

static int cmp64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

static int die(const char *what, const lsim_errbuf *eb) {
  fprintf(stderr, "bench_forward: %s: %s\n", what, eb ? eb->msg : "");
  return 1;
}

/* Bytes read plus written per second of a large device copy. */
static double bandwidth(void) {
  const size_t n = (size_t)2 << 30;
  void *a = NULL, *b = NULL;
  cudaEvent_t e0, e1;
  if (cudaMalloc(&a, n) != cudaSuccess || cudaMalloc(&b, n) != cudaSuccess)
    return 0;
  cudaMemset(a, 1, n);
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  float best[9];
  for (int i = 0; i < 9; i++) {
    cudaEventRecord(e0, 0);
    cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, 0);
    cudaEventRecord(e1, 0);
    cudaEventSynchronize(e1);
    cudaEventElapsedTime(&best[i], e0, e1);
  }
  for (int i = 1; i < 9; i++) /* median */
    for (int j = i; j > 0 && best[j] < best[j - 1]; j--) {
      float t = best[j];
      best[j] = best[j - 1];
      best[j - 1] = t;
    }
  cudaFree(a);
  cudaFree(b);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return 2.0 * (double)n / (best[4] * 1e-3);
}

int main(int argc, char **argv) {
  const char *preset = "llama-3-8b";
  int batch = 64, ctx = 1024, reps = 20, nad = 8, rank = 16;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--preset") && i + 1 < argc)
      preset = argv[++i];
    else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
      batch = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--ctx") && i + 1 < argc)
      ctx = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
      reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--adapters") && i + 1 < argc)
      nad = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--rank") && i + 1 < argc)
      rank = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: bench_forward [--preset NAME] [--batch N] "
                      "[--ctx N] [--reps N] [--adapters N] [--rank R]\n");
      return 2;
    }
  }
  if (batch < 1 || batch > 4096 || ctx < 0 || reps < 1 || reps > 1000 ||
      nad < 0 || nad > batch || rank < 1 || rank > 128) {
    fprintf(stderr, "bench_forward: a value out of range\n");
    return 2;
  }
  char desc[256];
  if (lsim_cuda_describe(desc, sizeof desc) <= 0) {
    fprintf(stderr, "bench_forward: no CUDA device: %s\n", desc);
    return 1;
  }
  const lsim_model_shape *ps = lsim_shape_preset_find(preset);
  if (!ps) {
    fprintf(stderr, "bench_forward: unknown preset %s\n", preset);
    return 2;
  }
  lsim_model_shape s = *ps;
  s.adapter_modules = 0x7f;
  const double bw = bandwidth();
  const int64_t kvb = 2 * (int64_t)s.layers * s.kv_heads * s.head_dim * 2;
  const int64_t tpp = 16, pb = kvb * tpp;
  const int64_t per_seq = (ctx + 1 + tpp - 1) / tpp;
  int64_t ad_pages = 0;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  if (nad > 0 && lsim_fwd_layout(&s, s.layers, 0x7f, rank, pb, 1 << 20, NULL,
                                 &ad_pages, &eb))
    return die("layout", &eb);
  const int64_t kv_pages = per_seq * batch;
  const int64_t pages = kv_pages + ad_pages * nad;
  int *ranks = malloc((size_t)(nad > 0 ? nad : 1) * sizeof *ranks);
  for (int a = 0; a < nad; a++)
    ranks[a] = rank;
  printf("device: %s\n", desc);
  printf("copy bandwidth (read + write): %.0f GB/s\n", bw / 1e9);
  printf("shape %s: %d layers, hidden %lld, intermediate %lld, %lld/%lld "
         "heads of %lld, vocab %lld; decode batch %d at context %d; pages of "
         "%lld tokens\n",
         preset, s.layers, (long long)s.hidden, (long long)s.intermediate,
         (long long)s.q_heads, (long long)s.kv_heads, (long long)s.head_dim,
         (long long)s.vocab, batch, ctx, (long long)tpp);
  /* the floor's bytes */
  int64_t wbytes = 0;
  for (int m = 0; m < LSIM_FWD_MODS; m++) {
    int64_t di, dout;
    lsim_shape_module_dims(&s, m, &di, &dout);
    wbytes += di * dout * 2;
  }
  wbytes = wbytes * s.layers + s.vocab * s.hidden * 2;
  const int64_t kvbytes = (int64_t)batch * (ctx + 1) * kvb;
  const int64_t adbytes =
      nad > 0 ? (int64_t)nad * lsim_fwd_adapter_bytes(&s, s.layers, 0x7f, rank)
              : 0;
  int64_t *pg = malloc((size_t)kv_pages * sizeof *pg);
  lsim_fwd_seq *sq = calloc((size_t)batch, sizeof *sq);
  lsim_plan_entry *ent = calloc((size_t)batch, sizeof *ent);
  int64_t *ns = malloc((size_t)reps * sizeof *ns);
  for (int prof = 0; prof < 2; prof++) {
    setenv("LSIM_FWD_PROFILE", prof ? "1" : "0", 1);
    lsim_fwd_cfg c = {.shape = &s, .seed = 7, .max_rows = batch,
                      .max_seqs = batch, .max_pages_seq = per_seq,
                      .npools = 1, .pool_pages = pages, .page_bytes = pb,
                      .kv_bytes_per_token = kvb, .mods = nad > 0 ? 0x7f : 0,
                      .max_rank = rank, .max_ids = nad > 0 ? nad : 1,
                      .objects = nad, .rank = ranks};
    lsim_fwd *F = NULL;
    if (lsim_fwd_open(&F, &c, &eb))
      return die("open", &eb);
    /* random KV everywhere (not zeros: METHOD.md), then the adapters */
    if (lsim_fwd_fill(lsim_fwd_pool(F, 0), pages * pb / 2, 99, 1.0f, 0.0f,
                      lsim_fwd_stream(F), &eb))
      return die("fill", &eb);
    cudaDeviceSynchronize(); /* before the adapters' copies on their stream */
    for (int a = 0; a < nad; a++) {
      int64_t *ap = malloc((size_t)ad_pages * sizeof *ap);
      for (int64_t i = 0; i < ad_pages; i++)
        ap[i] = kv_pages + (int64_t)a * ad_pages + i;
      if (lsim_fwd_adapter_stage(F, 0, a, a, 0, ap, ad_pages, &eb) ||
          lsim_fwd_adapter_publish(F, 0, a, &eb))
        return die("adapter", &eb);
      if (!prof && a == 0)
        printf("adapter load (rank %d, every module, %.1f MB): %.3f ms "
               "(%.1f GB/s host to device)\n",
               rank, (double)ad_pages * pb / 1e6,
               lsim_fwd_adapter_load_ns(F, 0, a) / 1e6,
               (double)ad_pages * pb /
                   (double)lsim_fwd_adapter_load_ns(F, 0, a));
      free(ap);
    }
    /* sequence i's page k is page k * batch + i: interleaved */
    for (int i = 0; i < batch; i++) {
      for (int64_t k = 0; k < per_seq; k++)
        pg[(int64_t)i * per_seq + k] = k * batch + i;
      sq[i] = (lsim_fwd_seq){0, 1, ctx, 1, 1000 + i,
                             pg + (int64_t)i * per_seq, per_seq};
      ent[i] = (lsim_plan_entry){1000 + i, 0,
                                 nad > 0 ? (int)((int64_t)i * nad / batch) : -1,
                                 nad > 0 ? rank : 0, LSIM_PHASE_DECODE, 1, 0,
                                 ctx, 1, 0};
    }
    lsim_rowplan rp = LSIM_ROWPLAN_INIT;
    if (nad > 0 && lsim_rowplan_build(&rp, ent, batch, NULL, 0, &eb))
      return die("row plan", &eb);
    lsim_fwd_adapter *ad = calloc((size_t)(nad > 0 ? nad : 1), sizeof *ad);
    for (int a = 0; a < nad; a++)
      ad[a] = (lsim_fwd_adapter){lsim_fwd_adapter_ptab(F, 0, a), rank,
                                 lsim_fwd_scale()};
    /* lora 0: base only; 1: adapters, the cuBLAS GEMMs then the branches
    ** (onepass -1, what the chooser takes up to 128 rows); 2: adapters,
    ** every adapted projection and its delta in one pass (onepass 1,
    ** issue 23); 3: adapters, the partitioned composition (onepass 2,
    ** what the chooser names above 128 rows) */
    for (int lora = 0; lora < (nad > 0 ? 4 : 1); lora++) {
      lsim_fwd_batch b = {0, batch, sq, lora ? &rp : NULL, ad, nad,
                          LSIM_CUDA_PATH_AUTO,
                          lora == 2 ? 1 : lora == 3 ? 2 : -1};
      const int n = prof ? 1 : reps;
      for (int i = 0; i < 3; i++) /* warm up */
        if (lsim_fwd_run(F, &b, &ns[0], &eb))
          return die("forward", &eb);
      for (int i = 0; i < n; i++)
        if (lsim_fwd_run(F, &b, &ns[i], &eb))
          return die("forward", &eb);
      if (prof) {
        lsim_fwd_prof pr;
        lsim_fwd_prof_get(F, &pr);
        printf("profiled forward%s (events between stages): total %.3f ms = "
               "GEMMs %.3f + attention %.3f + deltas %.3f + the rest %.3f\n",
               lora == 3   ? " with adapters, partitioned (counted as GEMMs)"
               : lora == 2 ? " with adapters, one pass (counted as GEMMs)"
               : lora == 1 ? " with adapters"
                           : "",
               pr.total_ns / 1e6,
               pr.gemm_ns / 1e6, pr.attn_ns / 1e6, pr.lora_ns / 1e6,
               pr.other_ns / 1e6);
        continue;
      }
      qsort(ns, (size_t)n, sizeof *ns, cmp64);
      const double med = (double)ns[n / 2];
      const int64_t bytes = wbytes + kvbytes + (lora ? adbytes : 0);
      const double floor_ns = (double)bytes / bw * 1e9;
      const double gemm_floor = (double)wbytes / bw * 1e9,
                   attn_floor = (double)kvbytes / bw * 1e9,
                   ad_floor = (double)(lora ? adbytes : 0) / bw * 1e9;
      printf("%-22s median %.3f ms (min %.3f, max %.3f, %d forwards); floor "
             "%.3f ms = GEMMs %.3f (%.2f GB) + attention %.3f (%.2f GB KV)"
             "%s; ratio %.2fx; %.0f tokens/s\n",
             lora == 3   ? "fwd + adapters part"
             : lora == 2 ? "fwd + adapters 1pass"
             : lora == 1 ? "forward + adapters"
                         : "forward (base)",
             med / 1e6,
             ns[0] / 1e6, ns[n - 1] / 1e6, n, floor_ns / 1e6,
             gemm_floor / 1e6, wbytes / 1e9, attn_floor / 1e6, kvbytes / 1e9,
             lora ? " + adapters" : "", med / floor_ns, batch / (med * 1e-9));
      if (lora)
        printf("%-22s adapters: %d x rank %d on every module, %.2f GB, floor "
               "%.3f ms\n", "", nad, rank, adbytes / 1e9, ad_floor / 1e6);
    }
    free(ad);
    lsim_rowplan_release(&rp);
    lsim_fwd_close(F);
  }
  free(pg);
  free(sq);
  free(ent);
  free(ns);
  free(ranks);
  return 0;
}
