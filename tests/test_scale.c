/* Memory that does not grow with the trace (issue 24): the bounded exact
** percentile selection (sim/pctl.c) against sorting, in budgets from one
** counting table to everything at once; a replay's summary and
** tenant_summary equal in the smallest budget and the default one; and
** the trace readers holding one record however long the file is. */
#include <criterion/criterion.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../sim/pctl.h"
#include "../traces/trace.h"

#define LSIM_TMP_PREFIX "/tmp/lsim-scale-"
#include "cli_harness.h"

#if defined(__SANITIZE_ADDRESS__)
#define LSIM_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LSIM_TEST_ASAN 1
#endif
#endif
#ifdef LSIM_TEST_ASAN
/* ASan's runtime has it (sanitizer/allocator_interface.h, a header gcc
** does not ship) */
size_t __sanitizer_get_current_allocated_bytes(void);
/* bytes the program has allocated and not freed (ASan's allocator) */
static size_t heap_in_use(void) {
  return __sanitizer_get_current_allocated_bytes();
}
#else
#include <malloc.h>
/* bytes the program has allocated and not freed (glibc's arenas and the
** chunks it mapped on their own) */
static size_t heap_in_use(void) {
  struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
}
#endif

TestSuite(scale, .init = mk_tmp, .fini = rm_tmp);

/* ---- the selection ---------------------------------------------------------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t next_u64(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

static int cmp_dbl(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

enum { NG = 6, N = 60000 };

/* group g's i-th value: several shapes, duplicates, negatives, zeros */
static double value(int g, uint64_t r) {
  switch (g) {
  case 0: return (double)(r % 50);                      /* few distinct */
  case 1: return exp((double)(r % 1000000) / 50000.0);  /* 20 binades */
  case 2: return 7.25;                                  /* all equal */
  case 3: return (double)(int64_t)(r % 2001) - 1000.0;  /* signs, zero */
  case 4: return (double)(r % 3) * 1e-300;              /* tiny */
  default: return (double)(r >> 11) / (double)(1ull << 53); /* [0, 1) */
  }
}

static double *vals[NG];
static int64_t nv[NG];

static void make_values(void) {
  for (int g = 0; g < NG; g++) {
    vals[g] = malloc(N * sizeof *vals[g]);
    cr_assert_not_null(vals[g]);
    nv[g] = g == 5 ? 0 : g == 4 ? 1 : N - g * 1000; /* group 5 empty */
    for (int64_t i = 0; i < nv[g]; i++)
      vals[g][i] = value(g, next_u64());
  }
}

static void feed(lsim_pctl *s) {
  /* interleaved, in the same order every pass */
  for (int64_t i = 0; i < N; i++)
    for (int g = 0; g < NG; g++)
      if (i < nv[g])
        lsim_pctl_add(s, g, vals[g][i]);
}

Test(scale, selection_equals_sorting_in_any_budget) {
  static const double ps[] = {50, 90, 99, 0.01, 100, 37.5};
  enum { NP = sizeof ps / sizeof ps[0] };
  make_values();
  double want[NG][NP];
  for (int g = 0; g < NG; g++) {
    double *c = malloc((size_t)(nv[g] ? nv[g] : 1) * sizeof *c);
    memcpy(c, vals[g], (size_t)nv[g] * sizeof *c);
    qsort(c, (size_t)nv[g], sizeof *c, cmp_dbl);
    for (int i = 0; i < NP; i++) {
      if (nv[g] == 0) {
        want[g][i] = NAN;
        continue;
      }
      int64_t r = (int64_t)ceil(ps[i] * (double)nv[g] / 100.0);
      r = r < 1 ? 1 : r > nv[g] ? nv[g] : r;
      want[g][i] = c[r - 1];
    }
    free(c);
  }
  /* one counting table at a time; a few tables and small collections;
  ** everything in the first pass */
  static const int64_t budgets[] = {1, 200000, 1 << 26};
  for (int b = 0; b < 3; b++) {
    lsim_pctl *s = lsim_pctl_new(NG, budgets[b]);
    cr_assert_not_null(s);
    int t[NG][NP];
    for (int g = 0; g < NG; g++)
      for (int i = 0; i < NP; i++)
        cr_assert_geq(t[g][i] = lsim_pctl_want(s, g, ps[i]), 0);
    lsim_errbuf eb = LSIM_ERRBUF_INIT;
    while (lsim_pctl_pass(s)) {
      feed(s);
      cr_assert_eq(lsim_pctl_end(s, &eb), 0, "%s", eb.msg);
      cr_assert_lt(lsim_pctl_passes(s), 200, "no end in sight");
    }
    for (int g = 0; g < NG; g++) {
      cr_assert_eq(lsim_pctl_count(s, g), nv[g]);
      for (int i = 0; i < NP; i++) {
        double v = lsim_pctl_value(s, t[g][i]);
        cr_assert(isnan(want[g][i]) ? isnan(v) : v == want[g][i],
                  "budget %lld group %d p%g: %.17g, sorting gives %.17g",
                  (long long)budgets[b], g, ps[i], v, want[g][i]);
      }
    }
    int64_t all = 0;
    for (int g = 0; g < NG; g++)
      all += nv[g] * (int64_t)sizeof(double);
    if (b < 2) {
      /* the values never fit: several passes, never over the budget
      ** (raised to one counting table) */
      int64_t cap = budgets[b] < LSIM_PCTL_BUCKETS * 24
                        ? LSIM_PCTL_BUCKETS * 24
                        : budgets[b];
      cr_assert_gt(lsim_pctl_passes(s), 2);
      cr_assert_leq(lsim_pctl_peak(s), cap, "peak %lld over %lld",
                    (long long)lsim_pctl_peak(s), (long long)cap);
      cr_assert_lt(lsim_pctl_peak(s), all / 4);
    } else {
      cr_assert_eq(lsim_pctl_passes(s), 1, "everything fits: one pass");
    }
    lsim_pctl_free(s);
  }
  for (int g = 0; g < NG; g++)
    free(vals[g]);
}

Test(scale, selection_refuses_a_stream_that_changed) {
  lsim_pctl *s = lsim_pctl_new(1, 1);
  cr_assert_geq(lsim_pctl_want(s, 0, 50), 0);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  int pass = 0;
  lsim_err rc = 0;
  while (!rc && lsim_pctl_pass(s)) {
    /* 10,000 values, then one fewer: the first pass keeps nothing (the
    ** values do not fit), so a second pass must come and see the change */
    int n = pass++ == 0 ? 10000 : 9999;
    for (int i = 0; i < n; i++)
      lsim_pctl_add(s, 0, (double)i);
    rc = lsim_pctl_end(s, &eb);
  }
  cr_assert_eq(rc, LSIM_E_BUG, "%d: %s", rc, eb.msg);
  cr_assert(strstr(eb.msg, "the first 10000"), "%s", eb.msg);
  lsim_pctl_free(s);
}

/* ---- the summaries in the smallest budget ------------------------------------- */

/* every row of `sql` in db, as text */
static void rows(const char *db, const char *sql, char *buf, size_t size) {
  sqlite3 *h;
  sqlite3_stmt *st;
  size_t n = 0;
  buf[0] = 0;
  cr_assert_eq(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK,
               "%s", db);
  cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK, "%s",
               sqlite3_errmsg(h));
  while (sqlite3_step(st) == SQLITE_ROW) {
    for (int c = 0; c < sqlite3_column_count(st); c++) {
      const char *v = (const char *)sqlite3_column_text(st, c);
      n += (size_t)snprintf(buf + n, size - n, "%s|", v ? v : "NULL");
      cr_assert_lt(n, size);
    }
    n += (size_t)snprintf(buf + n, size - n, "\n");
  }
  sqlite3_finalize(st);
  sqlite3_close(h);
  cr_assert_gt(n, 0, "%s: no rows", sql);
}

Test(scale, summaries_are_exact_in_the_smallest_budget) {
  static const char *const sc[] = {
      LSIM_SOURCE_DIR "/scenarios/quickstart.json",
      LSIM_SOURCE_DIR "/tests/fixtures/replay/fault_slice.json",
      LSIM_SOURCE_DIR "/tests/fixtures/replay/starve.json"};
  static const char *const q[] = {
      "SELECT * FROM runs_summary ORDER BY key",
      "SELECT * FROM tenant_summary ORDER BY tenant"};
  static char a[1 << 16], b[1 << 16];
  for (int i = 0; i < 3; i++) {
    char args[1024], da[512], db[512];
    /* fault_slice reads the Azure trace of ../shared (absent from a clean
    ** clone; tools/fetch-traces.sh): checked when it is there */
    if (i == 1 && access(LSIM_SOURCE_DIR "/../shared/data/traces/"
                         "azure-llm-2023/AzureLLMInferenceTrace_conv.csv",
                         R_OK) != 0) {
      fprintf(stderr, "scale: %s skipped, its Azure trace is not here\n",
              sc[i]);
      continue;
    }
    snprintf(args, sizeof args, "replay '%s' --db big.db --no-plots --quiet",
             sc[i]);
    cr_assert_eq(lorasim(args), 0, "%s", out);
    /* one counting table: every percentile takes the multi-pass path */
    setenv("LSIM_TEST_PCTL_BUDGET", "1", 1);
    snprintf(args, sizeof args, "replay '%s' --db small.db --no-plots --quiet",
             sc[i]);
    int st = lorasim(args);
    unsetenv("LSIM_TEST_PCTL_BUDGET");
    cr_assert_eq(st, 0, "%s", out);
    snprintf(da, sizeof da, "%s/big.db", tmpdir);
    snprintf(db, sizeof db, "%s/small.db", tmpdir);
    for (int k = 0; k < 2; k++) {
      rows(da, q[k], a, sizeof a);
      rows(db, q[k], b, sizeof b);
      cr_assert_str_eq(b, a, "%s: %s differs in the smallest budget", sc[i],
                       q[k]);
    }
  }
}

/* ---- the trace readers ---------------------------------------------------- */

enum { ROWS = 200000, WARM = 2000 };

/* Read `path` (format) to the end; the heap in use after WARM records and
** at the end, the trace still open. */
static void read_all(const char *path, int format, size_t *h_warm,
                     size_t *h_end) {
  lsim_trace t;
  lsim_trace_spec spec = {.format = format, .path = path};
  lsim_trace_ctx ctx = {.seed = 1, .ntenants = 2, .nadapters = 100};
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_trace_open(&t, &spec, &ctx, &eb), 0, "%s", eb.msg);
  lsim_trace_rec rec;
  int64_t n = 0;
  int r;
  while ((r = lsim_trace_next(&t, &rec, &eb)) == 1) {
    cr_assert_eq(rec.id, n);
    if (++n == WARM)
      *h_warm = heap_in_use();
  }
  cr_assert_eq(r, 0, "%s", eb.msg);
  *h_end = heap_in_use();
  lsim_trace_close(&t);
  cr_assert_eq(n, ROWS);
}

Test(scale, trace_readers_hold_one_record) {
  char csv[512], jsonl[512];
  snprintf(csv, sizeof csv, "%s/long.csv", tmpdir);
  snprintf(jsonl, sizeof jsonl, "%s/long.jsonl", tmpdir);
  FILE *fc = fopen(csv, "w"), *fj = fopen(jsonl, "w");
  cr_assert(fc && fj);
  fputs("arrival_us,tenant,adapter,prompt_tokens,output_tokens,slo,"
        "prefix_blocks\n", fc);
  for (int i = 0; i < ROWS; i++) {
    /* names repeat (a few aliases), prefix blocks vary per row */
    fprintf(fc, "%d,%d,a%d,%d,%d,s%d,%d %d\n", i * 10, i % 2, i % 37,
            16 + i % 500, 1 + i % 30, i % 3, i, i + 1);
    fprintf(fj, "{\"arrival_us\": %d, \"tenant\": %d, \"adapter\": \"a%d\", "
                "\"prompt_tokens\": %d, \"output_tokens\": %d, "
                "\"prefix_blocks\": [%d, %d]}\n",
            i * 10, i % 2, i % 37, 16 + i % 500, 1 + i % 30, i, i + 1);
  }
  cr_assert_eq(fclose(fc), 0);
  cr_assert_eq(fclose(fj), 0);
  static const int formats[2] = {LSIM_TRACE_CSV, LSIM_TRACE_JSONL};
  const char *paths[2] = {csv, jsonl};
  for (int f = 0; f < 2; f++) {
    size_t warm = 0, end = 0;
    read_all(paths[f], formats[f], &warm, &end);
    /* 198,000 more records read: a reader that kept them (or a table
    ** that grew per row) would hold megabytes more; one that streams
    ** holds what it held after WARM, give or take a buffer's growth */
    cr_assert_leq(end, warm + 64 * 1024,
                  "%s: %zu bytes in use after %d records, %zu after %d",
                  paths[f], warm, WARM, end, ROWS);
  }
}
