/*
** Trace importers, assignment, generators and the `lorasim trace` command.
**
** The real traces are read from LSIM_SOURCE_DIR/../shared/data/traces; the
** tests that need them skip with a message when that directory is absent.
** Malformed inputs are written to a temporary directory per test.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim/replay.h"
#include "sim/scenario.h"
#include "traces/trace.h"

#define DATA LSIM_SOURCE_DIR "/../shared/data/traces"
#define AZ_CONV DATA "/azure-llm-2023/AzureLLMInferenceTrace_conv.csv"
#define AZ_CODE DATA "/azure-llm-2023/AzureLLMInferenceTrace_code.csv"
#define MOONCAKE DATA "/mooncake-fast25/conversation_trace.jsonl"
#define SERVEGEN DATA "/servegen-m-small"
#define FIX LSIM_SOURCE_DIR "/tests/fixtures/traces"

static char tmpdir[256];

static void mk_tmp(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/lsim-traces-XXXXXX");
  cr_assert_not_null(mkdtemp(tmpdir));
}

static void rm_tmp(void) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  cr_assert_eq(system(cmd), 0);
}

TestSuite(traces, .init = mk_tmp, .fini = rm_tmp);

static void need_data(void) {
  struct stat st;
  if (stat(DATA, &st) != 0 || !S_ISDIR(st.st_mode))
    cr_skip_test("shared traces not found at %s: skipping", DATA);
}

/* Write text to tmpdir/name; the path goes to out. */
static void put(const char *name, const char *text, char *out, size_t n) {
  snprintf(out, n, "%s/%s", tmpdir, name);
  FILE *f = fopen(out, "w");
  cr_assert_not_null(f);
  fputs(text, f);
  fclose(f);
}

/* Open a file with a catalog of T tenants named t0, t1, ... (gold/bronze
** for T == 2) and N adapters; T == 0 is raw mode. */
static lsim_err open_file(lsim_trace *t, int fmt, const char *path, int T,
                          int N, uint64_t seed, const lsim_assign_spec *as,
                          int skip, lsim_errbuf *eb) {
  static const char *names2[] = {"gold", "bronze"};
  static char buf[64][16];
  static const char *names[64];
  for (int i = 0; i < 64; i++) {
    snprintf(buf[i], sizeof buf[i], "t%d", i);
    names[i] = buf[i];
  }
  lsim_trace_spec spec = {0};
  spec.format = fmt;
  spec.path = path;
  spec.skip_bad_rows = skip;
  spec.assign = as;
  lsim_trace_ctx ctx = {seed, T, T == 2 ? names2 : names, NULL, N, 0};
  return lsim_trace_open(t, &spec, &ctx, eb);
}

/* Read everything; returns the record count or the error code. */
static int64_t drain(lsim_trace *t, lsim_errbuf *eb) {
  lsim_trace_rec r;
  int64_t n = 0;
  int rc;
  while ((rc = lsim_trace_next(t, &r, eb)) == 1)
    n++;
  return rc < 0 ? rc : n;
}

/* ---- importers on the real files ------------------------------------------ */

Test(traces, azure_conv_and_code_counts_and_lengths) {
  need_data();
  const char *files[2] = {AZ_CONV, AZ_CODE};
  const int64_t want[2] = {19366, 8819};
  const double span[2] = {3501.7, 3436.0};
  const double prompt_mean[2] = {1155, 2048}, output_mean[2] = {211, 28};
  for (int k = 0; k < 2; k++) {
    lsim_trace t;
    lsim_errbuf eb = LSIM_ERRBUF_INIT;
    cr_assert_eq(open_file(&t, LSIM_TRACE_AZURE, files[k], 0, 0, 1, NULL, 0,
                           &eb),
                 0, "%s", eb.msg);
    lsim_trace_rec r;
    int64_t n = 0, first = -1, last = 0;
    double ps = 0, os = 0;
    int rc;
    while ((rc = lsim_trace_next(&t, &r, &eb)) == 1) {
      cr_assert_eq(r.id, n);
      if (first < 0)
        first = r.arrival_ns;
      cr_assert_geq(r.arrival_ns, last);
      last = r.arrival_ns;
      ps += r.prompt_tokens;
      os += r.output_tokens;
      cr_assert_eq(r.tenant, -1);
      cr_assert_eq(r.adapter, -1);
      n++;
    }
    cr_assert_eq(rc, 0, "%s", eb.msg);
    lsim_trace_close(&t);
    cr_expect_eq(n, want[k], "%s: %lld rows", files[k], (long long)n);
    cr_expect_eq(first, 0);
    cr_expect(fabs((double)last * 1e-9 - span[k]) < 1.0, "span %f",
              (double)last * 1e-9);
    cr_expect(fabs(ps / (double)n - prompt_mean[k]) < 1.0, "prompt mean %f",
              ps / (double)n);
    cr_expect(fabs(os / (double)n - output_mean[k]) < 1.0, "output mean %f",
              os / (double)n);
  }
}

Test(traces, mooncake_conversation_records_and_blocks) {
  need_data();
  lsim_trace t;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(open_file(&t, LSIM_TRACE_MOONCAKE, MOONCAKE, 0, 0, 1, NULL, 0,
                         &eb),
               0, "%s", eb.msg);
  lsim_trace_stats *st;
  cr_assert_eq(lsim_trace_stats_new(&st, &eb), 0);
  lsim_trace_rec r;
  int64_t n = 0, blocks = 0;
  int rc;
  while ((rc = lsim_trace_next(&t, &r, &eb)) == 1) {
    cr_assert_eq(r.nblocks, (r.prompt_tokens + 511) / 512, "record %lld",
                 (long long)n);
    blocks += r.nblocks;
    cr_assert_eq(lsim_trace_stats_add(st, &r, &eb), 0);
    n++;
  }
  cr_assert_eq(rc, 0, "%s", eb.msg);
  lsim_trace_close(&t);
  cr_expect_eq(n, 12031);
  cr_expect_eq(blocks, 288500);
  lsim_trace_summary s;
  lsim_trace_stats_summary(st, &s);
  cr_expect_eq(s.distinct_blocks, 182790);
  cr_expect_eq(s.reused_blocks, 105710);
  cr_expect_eq(s.last_ns, 3536999LL * 1000000);
  lsim_trace_stats_release(st);
}

/* Expected arrivals of the ServeGen clients in [0, dur): sum of rate x 600
** over the windows that start before dur. */
static double servegen_expected(double dur) {
  double sum = 0;
  for (int c = 0; c < 64; c++) {
    char path[512], line[512];
    snprintf(path, sizeof path, "%s/chunk-%d-trace.csv", SERVEGEN, c);
    FILE *f = fopen(path, "r");
    if (!f)
      continue;
    while (fgets(line, sizeof line, f)) {
      double ts = atof(line), rate = atof(strchr(line, ',') + 1);
      if (ts < dur)
        sum += rate * 600;
    }
    fclose(f);
  }
  return sum;
}

Test(traces, servegen_clients_become_tenants_at_their_rates) {
  need_data();
  lsim_servegen_spec sg = {0};
  sg.duration_s = 1800;
  sg.rate_scale = 1;
  sg.prompt.kind = LSIM_DIST_FIXED;
  sg.prompt.min = sg.prompt.max = 100;
  sg.output.kind = LSIM_DIST_UNIFORM;
  sg.output.min = 1;
  sg.output.max = 10;
  lsim_trace_spec spec = {0};
  spec.format = LSIM_TRACE_SERVEGEN;
  spec.path = SERVEGEN;
  spec.servegen = &sg;
  lsim_trace_ctx ctx = {3, 43, NULL, NULL, 43, 0};
  uint64_t h[2] = {0, 0};
  int64_t n[2] = {0, 0}, per[43] = {0};
  for (int run = 0; run < 2; run++) {
    lsim_trace t;
    lsim_errbuf eb = LSIM_ERRBUF_INIT;
    cr_assert_eq(lsim_trace_open(&t, &spec, &ctx, &eb), 0, "%s", eb.msg);
    lsim_trace_rec r;
    int rc;
    int64_t last = 0;
    while ((rc = lsim_trace_next(&t, &r, &eb)) == 1) {
      cr_assert_geq(r.arrival_ns, last);
      cr_assert(r.arrival_ns < 1800LL * 1000000000);
      last = r.arrival_ns;
      cr_assert(r.tenant >= 0 && r.tenant < 43);
      cr_assert(r.output_tokens >= 1 && r.output_tokens <= 10);
      h[run] = h[run] * 1099511628211ull ^ (uint64_t)r.arrival_ns ^
               ((uint64_t)r.tenant << 48) ^ (uint64_t)r.adapter << 32;
      if (run == 0)
        per[r.tenant]++;
      n[run]++;
    }
    cr_assert_eq(rc, 0, "%s", eb.msg);
    lsim_trace_close(&t);
  }
  cr_expect_eq(n[0], n[1]);
  cr_expect_eq(h[0], h[1], "same seed, different arrivals");
  double want = servegen_expected(1800);
  cr_expect(fabs((double)n[0] - want) < 0.03 * want, "%lld arrivals, ~%.0f due",
            (long long)n[0], want);
  int active = 0;
  for (int i = 0; i < 43; i++)
    active += per[i] > 0;
  cr_expect_gt(active, 5, "only %d clients produced arrivals", active);
}

Test(traces, burstgpt_published_format) {
  lsim_trace t;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(open_file(&t, LSIM_TRACE_BURSTGPT, FIX "/burstgpt.csv", 0, 0, 1,
                         NULL, 0, &eb),
               0, "%s", eb.msg);
  lsim_trace_rec r[5];
  for (int i = 0; i < 5; i++)
    cr_assert_eq(lsim_trace_next(&t, &r[i], &eb), 1, "%d: %s", i, eb.msg);
  /* copy what the next call would invalidate before checking */
  lsim_trace_rec last = r[4];
  cr_expect_eq(r[4].id, 4);
  cr_expect_eq(last.arrival_ns, 125LL * 1000000000); /* 130 - 5 s */
  cr_expect_eq(last.prompt_tokens, 1024);
  cr_expect_eq(last.output_tokens, 64);
  cr_expect_str_eq(last.slo, "conversation");
  lsim_trace_info info;
  lsim_trace_get_info(&t, &info);
  cr_expect_eq(info.dropped_failed, 1); /* the API row with 0 response tokens */
  cr_assert_eq(lsim_trace_next(&t, &r[0], &eb), 0);
  lsim_trace_close(&t);
  /* with a catalog, models become tenants by first appearance, modulo */
  cr_assert_eq(open_file(&t, LSIM_TRACE_BURSTGPT, FIX "/burstgpt.csv", 2, 4, 1,
                         NULL, 0, &eb),
               0, "%s", eb.msg);
  int tenants[5];
  for (int i = 0; i < 5; i++) {
    cr_assert_eq(lsim_trace_next(&t, &r[0], &eb), 1, "%s", eb.msg);
    tenants[i] = r[0].tenant;
    cr_assert(r[0].adapter >= 0 && r[0].adapter < 4);
    cr_assert_eq(r[0].adapter % 2, r[0].tenant, "tenant scope");
  }
  lsim_trace_close(&t);
  int want[5] = {0, 0, 1, 0, 1}; /* ChatGPT, ChatGPT, GPT-4, ChatGPT, GPT-4 */
  for (int i = 0; i < 5; i++)
    cr_expect_eq(tenants[i], want[i], "record %d", i);
}

Test(traces, blis_csv_with_quoted_token_arrays) {
  /* tests/fixtures/traces/blis.csv: BLIS's trace CSV, token ids as JSON
  ** arrays in quoted fields (commas inside), a request id with doubled
  ** quotes and a comma, an empty model; the lengths are the arrays' */
  static const int64_t arr[4] = {0, 50000000, 125000000, 1500000000};
  static const int prompt[4] = {5, 3, 2, 32}, output[4] = {3, 4, 1, 2};
  static const char *const model[4] = {"llama", "llama", "qwen/2.5-7b", NULL};
  for (int crlf = 0; crlf < 2; crlf++) {
    char path[512];
    if (crlf) {
      /* the same file with CRLF line ends */
      FILE *in = fopen(FIX "/blis.csv", "r");
      cr_assert_not_null(in);
      static char text[4096];
      size_t o = 0;
      int ch;
      while ((ch = fgetc(in)) != EOF && o + 2 < sizeof text) {
        if (ch == '\n')
          text[o++] = '\r';
        text[o++] = (char)ch;
      }
      text[o] = '\0';
      fclose(in);
      put("blis-crlf.csv", text, path, sizeof path);
    } else {
      snprintf(path, sizeof path, "%s", FIX "/blis.csv");
    }
    lsim_trace t;
    lsim_errbuf eb = LSIM_ERRBUF_INIT;
    cr_assert_eq(open_file(&t, LSIM_TRACE_BLIS, path, 0, 0, 1, NULL, 0, &eb),
                 0, "%s", eb.msg);
    lsim_trace_rec r;
    for (int i = 0; i < 4; i++) {
      cr_assert_eq(lsim_trace_next(&t, &r, &eb), 1, "%d: %s", i, eb.msg);
      cr_expect_eq(r.arrival_ns, arr[i], "record %d", i);
      cr_expect_eq(r.prompt_tokens, prompt[i], "record %d", i);
      cr_expect_eq(r.output_tokens, output[i], "record %d", i);
      if (model[i])
        cr_expect_str_eq(r.tenant_name, model[i], "record %d", i);
      else
        cr_expect_eq(r.tenant, -1, "record %d", i);
    }
    cr_expect_eq(lsim_trace_next(&t, &r, &eb), 0, "%s", eb.msg);
    lsim_trace_close(&t);
  }
  /* the format is in the registry: scenarios and --format know it */
  cr_expect_eq(lsim_trace_format_find("blis"), LSIM_TRACE_BLIS);
}

Test(traces, native_csv_rfc4180_quoting_and_jsonl_exact_integers) {
  char path[512];
  put("quoted.csv",
      "\"arrival_us\",\"tenant\",\"adapter\",\"prompt_tokens\",output_tokens\r\n"
      "10, \"gold\" ,\"summarize/v1\",\"5\",4\r\n"
      "20,bronze,,7,\"\"\r\n",
      path, sizeof path);
  lsim_trace t;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(open_file(&t, LSIM_TRACE_CSV, path, 0, 0, 1, NULL, 0, &eb), 0,
               "%s", eb.msg);
  lsim_trace_rec r;
  cr_assert_eq(lsim_trace_next(&t, &r, &eb), 1, "%s", eb.msg);
  cr_expect_eq(r.arrival_ns, 10000);
  cr_expect_str_eq(r.tenant_name, "gold");
  cr_expect_str_eq(r.adapter_name, "summarize/v1");
  cr_expect_eq(r.prompt_tokens, 5);
  /* "" is an empty field: output_tokens is missing */
  cr_expect_eq(lsim_trace_next(&t, &r, &eb), LSIM_E_TRACE_MISSING, "%s",
               eb.msg);
  cr_expect_not_null(strstr(eb.msg, "quoted.csv:3: output_tokens"), "%s",
                     eb.msg);
  lsim_trace_close(&t);
  /* block ids beyond 2^53 are read exactly, not through a double */
  put("big.jsonl",
      "{\"arrival_us\": 1, \"prompt_tokens\": 5, \"output_tokens\": 4, "
      "\"prefix_blocks\": [9007199254740993, 18014398509481985, 0], "
      "\"slo\": \"x1\"}\n",
      path, sizeof path);
  cr_assert_eq(open_file(&t, LSIM_TRACE_JSONL, path, 0, 0, 1, NULL, 0, &eb), 0,
               "%s", eb.msg);
  cr_assert_eq(lsim_trace_next(&t, &r, &eb), 1, "%s", eb.msg);
  cr_assert_eq(r.nblocks, 3);
  cr_expect_eq(r.blocks[0], 9007199254740993ull);
  cr_expect_eq(r.blocks[1], 18014398509481985ull);
  cr_expect_eq(r.blocks[2], 0);
  cr_expect_str_eq(r.slo, "x1");
  lsim_trace_close(&t);
}

Test(traces, native_csv_and_jsonl_agree) {
  const char *files[2] = {FIX "/native.csv", FIX "/native.jsonl"};
  int64_t arr[2][4], dl[2][4], cn[2][4];
  int ten[2][4], ad[2][4], nb[2][4];
  for (int k = 0; k < 2; k++) {
    lsim_trace t;
    lsim_errbuf eb = LSIM_ERRBUF_INIT;
    cr_assert_eq(open_file(&t, k ? LSIM_TRACE_JSONL : LSIM_TRACE_CSV, files[k],
                           2, 4, 9, NULL, 0, &eb),
                 0, "%s", eb.msg);
    lsim_trace_rec r;
    for (int i = 0; i < 4; i++) {
      cr_assert_eq(lsim_trace_next(&t, &r, &eb), 1, "%s", eb.msg);
      arr[k][i] = r.arrival_ns;
      dl[k][i] = r.deadline_ns;
      cn[k][i] = r.cancel_ns;
      ten[k][i] = r.tenant;
      ad[k][i] = r.adapter;
      nb[k][i] = r.nblocks;
    }
    cr_assert_eq(lsim_trace_next(&t, &r, &eb), 0, "%s", eb.msg);
    lsim_trace_close(&t);
  }
  for (int i = 0; i < 4; i++) {
    cr_expect_eq(arr[0][i], arr[1][i]);
    cr_expect_eq(dl[0][i], dl[1][i]);
    cr_expect_eq(cn[0][i], cn[1][i]);
    cr_expect_eq(ten[0][i], ten[1][i]);
    cr_expect_eq(ad[0][i], ad[1][i]);
    cr_expect_eq(nb[0][i], nb[1][i]);
  }
  cr_expect_eq(arr[0][1], 500000);    /* 0.5 ms */
  cr_expect_eq(dl[0][3], 3500000);    /* 3.5 ms */
  cr_expect_eq(cn[0][2], 100000000);  /* 100 ms */
  cr_expect_eq(ten[0][0], 0);         /* gold */
  cr_expect_eq(ten[0][1], 1);         /* bronze */
  cr_expect_eq(ad[0][0], 0);          /* first alias */
  cr_expect_eq(ad[0][1], 0);          /* same alias */
  cr_expect_eq(ad[0][3], 1);          /* second alias */
  cr_expect_eq(ad[0][2] % 2, 1, "drawn within tenant 1's adapters");
  cr_expect_eq(nb[0][3], 3);
}

Test(traces, original_csv_format_still_reads) {
  lsim_trace t;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_trace_open_csv(&t, LSIM_SOURCE_DIR "/traces/samples/tiny.csv",
                                   2, 4, &eb),
               0, "%s", eb.msg);
  lsim_trace_rec r;
  cr_assert_eq(lsim_trace_next(&t, &r, &eb), 1, "%s", eb.msg);
  cr_expect_eq(r.arrival_ns, 543000);
  cr_expect_eq(r.tenant, 1);
  cr_expect_eq(r.adapter, 1);
  cr_expect_eq(r.prompt_tokens, 31);
  cr_expect_eq(r.output_tokens, 10);
  cr_expect_eq(drain(&t, &eb), 39, "%s", eb.msg);
  lsim_trace_close(&t);
}

/* ---- malformed rows --------------------------------------------------------- */

typedef struct bad_case {
  int fmt;
  const char *name; /* file name in tmpdir */
  const char *text;
  lsim_err code;
  const char *where; /* ":line: field" expected in the message */
} bad_case;

#define CSVH "arrival_us,tenant,adapter,prompt_tokens,output_tokens\n"
#define AZH "TIMESTAMP,ContextTokens,GeneratedTokens\n"
#define BGH "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
#define BLH "arrival_time,request_id,model,prefill_tokens,decode_tokens\n"
#define MC(ts, in, out, ids) \
  "{\"timestamp\": " ts ", \"input_length\": " in ", \"output_length\": " out \
  ", \"hash_ids\": " ids "}\n"

static const bad_case k_bad[] = {
    /* native CSV */
    {LSIM_TRACE_CSV, "empty.csv", "", LSIM_E_TRACE_PARSE, "empty.csv:1:"},
    {LSIM_TRACE_CSV, "h1.csv", "arrival_us,tenant,adapter,prompt,output_tokens\n",
     LSIM_E_TRACE_UNKNOWN, "h1.csv:1: header: unknown column 'prompt'"},
    {LSIM_TRACE_CSV, "h2.csv", "arrival_us,tenant,adapter,prompt_tokens\n0,0,0,4\n",
     LSIM_E_TRACE_MISSING, "h2.csv:1: header: no output_tokens"},
    {LSIM_TRACE_CSV, "h3.csv", "arrival_us,arrival_ms,prompt_tokens,output_tokens\n",
     LSIM_E_TRACE_PARSE, "h3.csv:1: header"},
    {LSIM_TRACE_CSV, "f1.csv", CSVH "0,0,0,5\n", LSIM_E_TRACE_PARSE,
     "f1.csv:2: expected 5 fields"},
    {LSIM_TRACE_CSV, "f2.csv", CSVH "0,0,0,5,4\n7,0,0,abc,4\n",
     LSIM_E_TRACE_PARSE, "f2.csv:3: prompt_tokens: expected an integer"},
    {LSIM_TRACE_CSV, "f3.csv", CSVH "0,0,0,,4\n", LSIM_E_TRACE_MISSING,
     "f3.csv:2: prompt_tokens"},
    {LSIM_TRACE_CSV, "f4.csv", CSVH "0,0,0,5,0\n", LSIM_E_TRACE_RANGE,
     "f4.csv:2: output_tokens"},
    {LSIM_TRACE_CSV, "f5.csv", CSVH "0,0,0,10000001,4\n", LSIM_E_TRACE_RANGE,
     "f5.csv:2: prompt_tokens"},
    {LSIM_TRACE_CSV, "f6.csv", CSVH "-5,0,0,5,4\n", LSIM_E_TRACE_PARSE,
     "f6.csv:2: arrival_us"},
    {LSIM_TRACE_CSV, "o1.csv", CSVH "10,0,0,5,4\n5,0,0,5,4\n",
     LSIM_E_TRACE_ORDER, "o1.csv:3: arrival_us"},
    {LSIM_TRACE_CSV, "t1.csv", CSVH "0,3,0,5,4\n", LSIM_E_TRACE_RANGE,
     "t1.csv:2: tenant"},
    {LSIM_TRACE_CSV, "t2.csv", CSVH "0,nobody,0,5,4\n", LSIM_E_TRACE_ALIAS,
     "t2.csv:2: tenant"},
    {LSIM_TRACE_CSV, "a1.csv", CSVH "0,0,9,5,4\n", LSIM_E_TRACE_RANGE,
     "a1.csv:2: adapter"},
    {LSIM_TRACE_CSV, "a2.csv", CSVH "0,0,x,5,4\n0,0,y,5,4\n1,0,x,5,4\n2,0,z,5,4\n",
     LSIM_E_TRACE_ALIAS, "a2.csv:5: adapter"},
    {LSIM_TRACE_CSV, "a3.csv", CSVH "0,0,a b,5,4\n", LSIM_E_TRACE_PARSE,
     "a3.csv:2: adapter"},
    {LSIM_TRACE_CSV, "d1.csv",
     "arrival_us,prompt_tokens,output_tokens,deadline_us\n10,5,4,9\n",
     LSIM_E_TRACE_MISMATCH, "d1.csv:2: deadline_us"},
    /* RFC 4180 quoting: the column of the bad quote, the line not quoted */
    {LSIM_TRACE_CSV, "q1.csv", CSVH "0,\"gold,0,5,4\n", LSIM_E_TRACE_PARSE,
     "q1.csv:2: column 3: a quoted field does not end on its line"},
    {LSIM_TRACE_CSV, "q2.csv", CSVH "0,go\"ld,0,5,4\n", LSIM_E_TRACE_PARSE,
     "q2.csv:2: column 5: a quote inside an unquoted field"},
    {LSIM_TRACE_CSV, "q3.csv", CSVH "0,\"gold\"x,0,5,4\n", LSIM_E_TRACE_PARSE,
     "q3.csv:2: column 9: text after the closing quote"},
    {LSIM_TRACE_CSV, "q4.csv", "\"arrival_us,prompt_tokens,output_tokens\n",
     LSIM_E_TRACE_PARSE, "q4.csv:1: column 1: a quoted field does not end"},
    {LSIM_TRACE_AZURE, "q5.csv", AZH "\"2023-11-16 18:15:46.68\"x,374,44\n",
     LSIM_E_TRACE_PARSE, "q5.csv:2: column 25: text after the closing quote"},
    {LSIM_TRACE_CSV, "b1.csv",
     "arrival_us,prompt_tokens,output_tokens,prefix_blocks\n10,5,4,1 x 2\n",
     LSIM_E_TRACE_PARSE, "b1.csv:2: prefix_blocks"},
    /* native JSONL */
    {LSIM_TRACE_JSONL, "j1.jsonl", "{\"arrival_us\": 1, \"prompt_tokens\": 5,\n",
     LSIM_E_TRACE_PARSE, "j1.jsonl:1: invalid JSON"},
    {LSIM_TRACE_JSONL, "j2.jsonl",
     "{\"arrival_us\": 1, \"prompt_tokens\": 5, \"output_tokens\": 4, \"x\": 1}\n",
     LSIM_E_TRACE_UNKNOWN, "j2.jsonl:1: unknown key 'x'"},
    {LSIM_TRACE_JSONL, "j3.jsonl", "{\"arrival_us\": 1, \"output_tokens\": 4}\n",
     LSIM_E_TRACE_MISSING, "j3.jsonl:1: prompt_tokens"},
    {LSIM_TRACE_JSONL, "j4.jsonl",
     "{\"arrival_us\": 1, \"prompt_tokens\": \"5\", \"output_tokens\": 4}\n",
     LSIM_E_TRACE_PARSE, "j4.jsonl:1: prompt_tokens"},
    {LSIM_TRACE_JSONL, "j5.jsonl",
     "{\"arrival_us\": 1, \"prompt_tokens\": 5, \"prompt_tokens\": 5}\n",
     LSIM_E_TRACE_PARSE, "j5.jsonl:1: invalid JSON: key 'prompt_tokens' appears"},
    {LSIM_TRACE_JSONL, "j6.jsonl",
     "{\"arrival_us\": 1, \"prompt_tokens\": 5, \"output_tokens\": 4, "
     "\"tenant\": {\"a\": 1}}\n",
     LSIM_E_TRACE_PARSE, "j6.jsonl:1: invalid JSON"},
    /* Azure */
    {LSIM_TRACE_AZURE, "az1.csv", "TIMESTAMP,Context,GeneratedTokens\n",
     LSIM_E_TRACE_PARSE, "az1.csv:1: header"},
    {LSIM_TRACE_AZURE, "az2.csv", AZH "2023-11-16 25:15:46.68,374,44\n",
     LSIM_E_TRACE_PARSE, "az2.csv:2: TIMESTAMP"},
    {LSIM_TRACE_AZURE, "az3.csv", AZH "2023-11-16 18:15:46.68,374\n",
     LSIM_E_TRACE_PARSE, "az3.csv:2: expected 3 fields"},
    {LSIM_TRACE_AZURE, "az4.csv", AZH "2023-11-16 18:15:46.68,0,44\n",
     LSIM_E_TRACE_RANGE, "az4.csv:2: ContextTokens"},
    {LSIM_TRACE_AZURE, "az5.csv",
     AZH "2023-11-16 18:15:46.68,10,44\n2023-11-16 18:15:46.60,10,44\n",
     LSIM_E_TRACE_ORDER, "az5.csv:3: TIMESTAMP"},
    {LSIM_TRACE_AZURE, "az6.csv", AZH "2023-11-16 18:15:46.68,10,4x\n",
     LSIM_E_TRACE_PARSE, "az6.csv:2: GeneratedTokens"},
    /* found by fuzz_trace_azure: ns since 1970 overflowed int64 */
    {LSIM_TRACE_AZURE, "az7.csv",
     AZH "2023-11-16 18:15:46.68,10,44\n1701-11-16 18:17:03.97,10,44\n",
     LSIM_E_TRACE_RANGE, "az7.csv:3: TIMESTAMP: year outside 1970..2261"},
    {LSIM_TRACE_AZURE, "az8.csv", AZH "0001-01-01 00:00:00,10,44\n",
     LSIM_E_TRACE_RANGE, "az8.csv:2: TIMESTAMP"},
    /* Mooncake */
    {LSIM_TRACE_MOONCAKE, "m1.jsonl", MC("0", "513", "5", "[1]"),
     LSIM_E_TRACE_MISMATCH, "m1.jsonl:1: hash_ids: expected ceil"},
    {LSIM_TRACE_MOONCAKE, "m2.jsonl",
     "{\"timestamp\": 0, \"input_length\": 5, \"hash_ids\": [1]}\n",
     LSIM_E_TRACE_MISSING, "m2.jsonl:1: output_length"},
    {LSIM_TRACE_MOONCAKE, "m3.jsonl",
     "{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 5, "
     "\"hash_ids\": [1], \"model\": \"k\"}\n",
     LSIM_E_TRACE_UNKNOWN, "m3.jsonl:1: unknown key 'model'"},
    {LSIM_TRACE_MOONCAKE, "m4.jsonl", MC("0", "5", "5", "[-1]"),
     LSIM_E_TRACE_PARSE, "m4.jsonl:1: invalid JSON"},
    {LSIM_TRACE_MOONCAKE, "m5.jsonl", MC("\"0\"", "5", "5", "[1]"),
     LSIM_E_TRACE_PARSE, "m5.jsonl:1: timestamp"},
    {LSIM_TRACE_MOONCAKE, "m6.jsonl", MC("9", "5", "5", "[1]") MC("3", "5", "5", "[1]"),
     LSIM_E_TRACE_ORDER, "m6.jsonl:2: timestamp"},
    /* BurstGPT */
    {LSIM_TRACE_BURSTGPT, "bg1.csv", BGH "5,ChatGPT,10,5,16,Conversation log\n",
     LSIM_E_TRACE_MISMATCH, "bg1.csv:2: Total tokens"},
    {LSIM_TRACE_BURSTGPT, "bg2.csv", BGH "5,ChatGPT,10,5,15,Debug log\n",
     LSIM_E_TRACE_UNKNOWN, "bg2.csv:2: Log Type"},
    {LSIM_TRACE_BURSTGPT, "bg3.csv",
     "Timestamp,Model,Request tokens,Response tokens,Total tokens,Kind\n",
     LSIM_E_TRACE_UNKNOWN, "bg3.csv:1: header"},
    {LSIM_TRACE_BURSTGPT, "bg4.csv",
     "Timestamp,Model,Request tokens,Response tokens,Total tokens\n",
     LSIM_E_TRACE_MISSING, "bg4.csv:1: header: no 'Log Type'"},
    {LSIM_TRACE_BURSTGPT, "bg5.csv", BGH "five,ChatGPT,10,5,15,API log\n",
     LSIM_E_TRACE_PARSE, "bg5.csv:2: Timestamp"},
    /* BLIS */
    {LSIM_TRACE_BLIS, "bl1.csv", "arrival_time,model,request_id,"
     "prefill_tokens,decode_tokens\n",
     LSIM_E_TRACE_UNKNOWN, "bl1.csv:1: header: column 2 must be 'request_id'"},
    {LSIM_TRACE_BLIS, "bl2.csv", BLH "0,r,m,\"[1,2\",\"[3]\"\n",
     LSIM_E_TRACE_PARSE, "bl2.csv:2: prefill_tokens: expected a JSON array"},
    {LSIM_TRACE_BLIS, "bl3.csv", BLH "0,r,m,\"[1,2]\",\"[]\"\n",
     LSIM_E_TRACE_RANGE, "bl3.csv:2: decode_tokens: 0 tokens"},
    {LSIM_TRACE_BLIS, "bl4.csv", BLH "0,r,m,\"[1,-2]\",\"[3]\"\n",
     LSIM_E_TRACE_PARSE, "bl4.csv:2: prefill_tokens"},
    {LSIM_TRACE_BLIS, "bl5.csv", BLH "0,r,m,[1,2],\"[3]\"\n",
     LSIM_E_TRACE_PARSE, "bl5.csv:2: expected 5 fields (got 6)"},
    {LSIM_TRACE_BLIS, "bl6.csv", BLH "1,r,m,\"[1]\",\"[3]\"\n"
     "0.5,r,m,\"[1]\",\"[3]\"\n",
     LSIM_E_TRACE_ORDER, "bl6.csv:3: arrival_time"},
    /* JSONL through cJSON: exact integers, \u0000 refused */
    {LSIM_TRACE_JSONL, "j7.jsonl",
     "{\"arrival_us\": 1, \"prompt_tokens\": 5, \"output_tokens\": 4, "
     "\"slo\": \"a\\u0000b\"}\n",
     LSIM_E_TRACE_PARSE, "j7.jsonl:1: invalid JSON: a string holds \\u0000"},
    {LSIM_TRACE_JSONL, "j8.jsonl",
     "{\"arrival_us\": 1, \"prompt_tokens\": 5, \"output_tokens\": 4} x\n",
     LSIM_E_TRACE_PARSE, "j8.jsonl:1: invalid JSON: text after the object"},
    {LSIM_TRACE_JSONL, "j9.jsonl",
     "{\"arrival_us\": 1, \"prompt_tokens\": 5, \"output_tokens\": 4, "
     "\"prefix_blocks\": [1, [2]]}\n",
     LSIM_E_TRACE_PARSE, "j9.jsonl:1: invalid JSON: array 'prefix_blocks'"},
};

static void check_bad(const bad_case *c, int skip) {
  char path[512];
  put(c->name, c->text, path, sizeof path);
  lsim_trace t;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_err rc = open_file(&t, c->fmt, path, 1, 2, 1, NULL, skip, &eb);
  if (!rc) {
    rc = (lsim_err)drain(&t, &eb);
    lsim_trace_info info;
    lsim_trace_get_info(&t, &info);
    lsim_trace_close(&t);
    if (skip && rc >= 0) {
      /* a bad row was skipped and counted under its code (header errors
      ** are never skipped, so they come out as rc < 0 above) */
      cr_expect_geq(info.skipped, 1, "%s: nothing skipped", c->name);
      cr_expect_geq(info.skipped_by_code[LSIM_E_TRACE_PARSE - c->code], 1,
                    "%s: skipped under another code", c->name);
      cr_expect_not_null(strstr(info.first_skipped, c->where), "%s: %s",
                         c->name, info.first_skipped);
      return;
    }
  }
  cr_expect_eq(rc, c->code, "%s: got %s (%d) '%s'", c->name, lsim_err_name(rc),
               rc, eb.msg);
  cr_expect_not_null(strstr(eb.msg, c->where), "%s: message '%s' lacks '%s'",
                     c->name, eb.msg, c->where);
}

Test(traces, malformed_rows_fail_with_file_line_field_and_code) {
  for (size_t i = 0; i < sizeof k_bad / sizeof k_bad[0]; i++)
    check_bad(&k_bad[i], 0);
}

Test(traces, skip_bad_rows_counts_every_kind) {
  for (size_t i = 0; i < sizeof k_bad / sizeof k_bad[0]; i++)
    check_bad(&k_bad[i], 1);
}

Test(traces, skip_bad_rows_keeps_the_good_ones) {
  char path[512];
  put("mixed.csv",
      CSVH "0,0,0,5,4\n1,0,0,x,4\n2,0,0,5,4\n1,0,0,5,4\n3,0,0,5,0\n4,0,1,6,4\n",
      path, sizeof path);
  lsim_trace t;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(open_file(&t, LSIM_TRACE_CSV, path, 1, 2, 1, NULL, 1, &eb), 0);
  cr_assert_eq(drain(&t, &eb), 3, "%s", eb.msg);
  lsim_trace_info info;
  lsim_trace_get_info(&t, &info);
  lsim_trace_close(&t);
  cr_expect_eq(info.records, 3);
  cr_expect_eq(info.skipped, 3);
  cr_expect_eq(info.skipped_by_code[0], 1);  /* E_TRACE_PARSE */
  cr_expect_eq(info.skipped_by_code[1], 1);  /* E_TRACE_ORDER */
  cr_expect_eq(info.skipped_by_code[2], 1);  /* E_TRACE_RANGE */
  cr_expect_not_null(strstr(info.first_skipped, "mixed.csv:3: prompt_tokens"));
}

Test(traces, servegen_bad_rows) {
  static const struct {
    const char *text;
    lsim_err code;
    const char *where;
  } c[] = {
      {"0,1.5,1.0,Pareto,1,1\n", LSIM_E_TRACE_UNKNOWN, ":1: pattern"},
      {"0,1.5,1.0,Gamma,1\n", LSIM_E_TRACE_PARSE, ":1: expected 6 fields"},
      {"0,-1.5,1.0,Gamma,1,1\n", LSIM_E_TRACE_RANGE, ":1: rate"},
      {"0,1.5,1.0,Gamma,0,1\n", LSIM_E_TRACE_RANGE, ":1: shape"},
      {"0,1.5,1.0,Gamma,1,1\n300,1.5,1.0,Gamma,1,1\n", LSIM_E_TRACE_ORDER,
       ":2: timestamp"},
      /* found by fuzz_trace_servegen: the ns cast of the arrival overflowed */
      {"0,1.5,1.0,Gamma,1,1\n33780144600,1.5,1.0,Gamma,1,1\n",
       LSIM_E_TRACE_RANGE, ":2: timestamp: above 9000000000 s"},
  };
  for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
    char path[512];
    put("chunk-3-trace.csv", c[i].text, path, sizeof path);
    lsim_servegen_spec sg = {0};
    sg.rate_scale = 1;
    sg.prompt.kind = sg.output.kind = LSIM_DIST_FIXED;
    sg.prompt.min = sg.prompt.max = sg.output.min = sg.output.max = 4;
    lsim_trace_spec spec = {0};
    spec.format = LSIM_TRACE_SERVEGEN;
    spec.path = path;
    spec.servegen = &sg;
    lsim_trace_ctx ctx = {1, 1, NULL, NULL, 1, 0};
    lsim_trace t;
    lsim_errbuf eb = LSIM_ERRBUF_INIT;
    cr_assert_eq(lsim_trace_open(&t, &spec, &ctx, &eb), 0, "%s", eb.msg);
    int64_t rc = drain(&t, &eb);
    lsim_trace_close(&t);
    cr_expect_eq(rc, c[i].code, "case %zu: %s", i, eb.msg);
    cr_expect_not_null(strstr(eb.msg, c[i].where), "case %zu: %s", i, eb.msg);
    cr_expect_not_null(strstr(eb.msg, "chunk-3-trace.csv"), "%s", eb.msg);
  }
}

/* ---- assignment ------------------------------------------------------------------ */

/* A generator of n requests at a high rate with the given assignment. */
static lsim_err open_gen(lsim_trace *t, int64_t n, int T, int N, uint64_t seed,
                         const lsim_assign_spec *as, const lsim_arrivals *arr,
                         double rate, lsim_errbuf *eb) {
  static lsim_len_dist len = {LSIM_DIST_FIXED, 8, 8, 0, "", 0, 0};
  lsim_trace_spec spec = {0};
  spec.format = LSIM_TRACE_GEN;
  spec.gen_requests = n;
  spec.gen_rate_per_s = rate;
  spec.gen_prompt = spec.gen_output = &len;
  spec.gen_arrivals = arr;
  spec.assign = as;
  lsim_trace_ctx ctx = {seed, T, NULL, NULL, N, 0};
  return lsim_trace_open(t, &spec, &ctx, eb);
}

Test(traces, zipf_assignment_matches_its_frequencies) {
  enum { N = 50, DRAWS = 200000 };
  lsim_assign_spec as = {0};
  as.adapters = LSIM_AA_ZIPF;
  as.has_alpha = 1;
  as.alpha = 1.0;
  as.scope = LSIM_SCOPE_CATALOG;
  lsim_trace t;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(open_gen(&t, DRAWS, 1, N, 2026, &as, NULL, 1000, &eb), 0, "%s",
               eb.msg);
  int64_t count[N] = {0};
  lsim_trace_rec r;
  while (lsim_trace_next(&t, &r, &eb) == 1)
    count[r.adapter]++;
  lsim_trace_close(&t);
  double h = 0;
  for (int k = 0; k < N; k++)
    h += 1.0 / (k + 1);
  double chi2 = 0;
  for (int k = 0; k < N; k++) {
    double p = 1.0 / (k + 1) / h, e = p * DRAWS;
    double sd = sqrt(DRAWS * p * (1 - p));
    cr_expect(fabs((double)count[k] - e) < 5 * sd, "rank %d: %lld, expected %.0f",
              k, (long long)count[k], e);
    chi2 += ((double)count[k] - e) * ((double)count[k] - e) / e;
  }
  /* 49 degrees of freedom: the 99.9% point is about 85 */
  cr_expect_lt(chi2, 85.0, "chi-square %.1f", chi2);
}

Test(traces, tenant_scope_keeps_adapters_with_their_tenant) {
  lsim_assign_spec as = {0};
  as.adapters = LSIM_AA_UNIFORM;
  lsim_trace t;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(open_gen(&t, 20000, 3, 30, 5, &as, NULL, 1000, &eb), 0, "%s",
               eb.msg);
  lsim_trace_rec r;
  int seen[30] = {0};
  while (lsim_trace_next(&t, &r, &eb) == 1) {
    cr_assert_eq(r.adapter % 3, r.tenant);
    seen[r.adapter] = 1;
  }
  lsim_trace_close(&t);
  for (int a = 0; a < 30; a++)
    cr_expect(seen[a], "adapter %d never drawn", a);
}

Test(traces, distinct_identical_and_owner_assignments) {
  lsim_assign_spec as = {0};
  as.adapters = LSIM_AA_DISTINCT;
  as.scope = LSIM_SCOPE_CATALOG;
  as.tenants = LSIM_AT_OWNER;
  lsim_trace t;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(open_gen(&t, 25, 2, 10, 1, &as, NULL, 1000, &eb), 0, "%s",
               eb.msg);
  lsim_trace_rec r;
  for (int i = 0; i < 25; i++) {
    cr_assert_eq(lsim_trace_next(&t, &r, &eb), 1);
    cr_expect_eq(r.adapter, i % 10);
    cr_expect_eq(r.tenant, r.adapter % 2);
  }
  lsim_trace_close(&t);
  memset(&as, 0, sizeof as);
  as.adapters = LSIM_AA_IDENTICAL;
  as.adapter = 7;
  cr_assert_eq(open_gen(&t, 100, 4, 10, 1, &as, NULL, 1000, &eb), 0, "%s",
               eb.msg);
  int tenants = 0;
  while (lsim_trace_next(&t, &r, &eb) == 1) {
    cr_expect_eq(r.adapter, 7);
    tenants |= 1 << r.tenant;
  }
  lsim_trace_close(&t);
  cr_expect_eq(tenants, 15, "many tenants share one adapter");
  /* owner with the tenant scope is refused */
  as.tenants = LSIM_AT_OWNER;
  as.scope = LSIM_SCOPE_TENANT;
  cr_expect_eq(open_gen(&t, 1, 2, 10, 1, &as, NULL, 1000, &eb), LSIM_E_USAGE);
}

Test(traces, servegen_popularity_follows_client_skew) {
  need_data();
  lsim_assign_spec as = {0};
  as.adapters = LSIM_AA_SERVEGEN;
  as.scope = LSIM_SCOPE_CATALOG;
  snprintf(as.servegen, sizeof as.servegen, "%s", SERVEGEN);
  lsim_trace t;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(open_gen(&t, 100000, 1, 43, 3, &as, NULL, 1000, &eb), 0, "%s",
               eb.msg);
  int64_t count[43] = {0};
  lsim_trace_rec r;
  while (lsim_trace_next(&t, &r, &eb) == 1)
    count[r.adapter]++;
  lsim_trace_close(&t);
  /* busiest clients: about 350.9, 257.2 and 125.9 of ~1174 req/s */
  cr_expect(fabs(count[0] / 1e5 - 350.9 / 1174) < 0.02, "%lld", (long long)count[0]);
  cr_expect(fabs(count[1] / 1e5 - 257.2 / 1174) < 0.02, "%lld", (long long)count[1]);
  cr_expect(count[0] > count[1] && count[1] > count[2] && count[2] > count[10]);
}

static uint64_t digest(lsim_trace *t, int64_t *n) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_trace_rec r;
  uint64_t h = 1469598103934665603ull;
  *n = 0;
  while (lsim_trace_next(t, &r, &eb) == 1) {
    uint64_t v[5] = {(uint64_t)r.arrival_ns, (uint64_t)r.tenant,
                     (uint64_t)r.adapter, (uint64_t)r.prompt_tokens,
                     (uint64_t)r.output_tokens};
    for (int i = 0; i < 5; i++)
      h = (h ^ v[i]) * 1099511628211ull;
    ++*n;
  }
  return h;
}

Test(traces, assignment_is_deterministic_under_a_seed) {
  int modes[] = {LSIM_AA_ZIPF, LSIM_AA_UNIFORM, LSIM_AA_DISTINCT};
  for (int m = 0; m < 3; m++) {
    lsim_assign_spec as = {0};
    as.adapters = modes[m];
    as.tenants = LSIM_AT_WEIGHTS;
    uint64_t h[3];
    for (int run = 0; run < 3; run++) {
      char path[512];
      /* a trace with neither tenants nor adapters: all drawn */
      put("plain.csv",
          "arrival_us,prompt_tokens,output_tokens\n0,5,4\n1,5,4\n2,6,4\n3,5,4\n"
          "4,5,4\n5,5,4\n6,5,4\n7,5,4\n8,5,4\n9,5,4\n10,5,4\n11,5,4\n",
          path, sizeof path);
      lsim_trace t;
      lsim_errbuf eb = LSIM_ERRBUF_INIT;
      cr_assert_eq(open_file(&t, LSIM_TRACE_CSV, path, 4, 40,
                             run == 2 ? 8 : 7, &as, 0, &eb),
                   0, "%s", eb.msg);
      int64_t n;
      h[run] = digest(&t, &n);
      lsim_trace_close(&t);
      cr_assert_eq(n, 12);
    }
    cr_expect_eq(h[0], h[1], "mode %d: same seed, different assignment", m);
    if (modes[m] != LSIM_AA_DISTINCT)
      cr_expect_neq(h[0], h[2], "mode %d: another seed, same assignment", m);
  }
}

/* ---- generators ------------------------------------------------------------------ */

static double gap_cv(lsim_trace *t, int64_t *n) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_trace_rec r;
  double s = 0, s2 = 0, prev = -1;
  *n = 0;
  while (lsim_trace_next(t, &r, &eb) == 1) {
    if (prev >= 0) {
      double g = (double)r.arrival_ns - prev;
      s += g;
      s2 += g * g;
      ++*n;
    }
    prev = (double)r.arrival_ns;
  }
  double mean = s / (double)*n;
  return sqrt(s2 / (double)*n - mean * mean) / mean;
}

Test(traces, gamma_arrivals_have_their_cv) {
  const double cvs[] = {0.5, 1.0, 2.0, 4.0};
  for (int i = 0; i < 4; i++) {
    lsim_arrivals arr = {0};
    arr.process = LSIM_ARR_GAMMA;
    arr.cv = cvs[i];
    lsim_trace t;
    lsim_errbuf eb = LSIM_ERRBUF_INIT;
    cr_assert_eq(open_gen(&t, 200000, 1, 1, 17, NULL, &arr, 100, &eb), 0, "%s",
                 eb.msg);
    int64_t n;
    double cv = gap_cv(&t, &n);
    lsim_trace_close(&t);
    double tol = cvs[i] <= 1 ? 0.03 : 0.08;
    cr_expect(fabs(cv / cvs[i] - 1) < tol, "target cv %g, measured %g", cvs[i],
              cv);
  }
}

Test(traces, onoff_diurnal_and_shift_shape_the_rate) {
  lsim_trace t;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_trace_rec r;
  /* on/off: 2 s on, 3 s off, nothing while off */
  lsim_arrivals arr = {0};
  arr.onoff = 1;
  arr.on_s = 2;
  arr.off_s = 3;
  cr_assert_eq(open_gen(&t, 20000, 1, 1, 1, NULL, &arr, 1000, &eb), 0, "%s",
               eb.msg);
  int64_t last = 0;
  while (lsim_trace_next(&t, &r, &eb) == 1) {
    double x = fmod((double)r.arrival_ns * 1e-9, 5.0);
    cr_assert(x <= 2.0 + 1e-6, "arrival at %f s falls in an off phase",
              (double)r.arrival_ns * 1e-9);
    last = r.arrival_ns;
  }
  lsim_trace_close(&t);
  /* 20 s of on time: the tenth on phase ends at 9 x 5 + 2 = 47 s (the
  ** eleventh starts at 50 s) */
  cr_expect((double)last * 1e-9 > 46.0 && (double)last * 1e-9 < 51.0,
            "last arrival %f s", (double)last * 1e-9);
  /* diurnal: peak quarter against trough quarter of a 100 s cycle */
  memset(&arr, 0, sizeof arr);
  arr.diurnal = 1;
  arr.period_s = 100;
  arr.amplitude = 0.8;
  cr_assert_eq(open_gen(&t, 100000, 1, 1, 1, NULL, &arr, 1000, &eb), 0);
  int64_t peak = 0, trough = 0;
  while (lsim_trace_next(&t, &r, &eb) == 1) {
    double x = fmod((double)r.arrival_ns * 1e-9, 100.0);
    peak += x >= 12.5 && x < 37.5;
    trough += x >= 62.5 && x < 87.5;
  }
  lsim_trace_close(&t);
  /* 1 + 0.8 sin integrates to 25 +- 18.0 s over those quarters: 6:1 */
  cr_expect(peak > 3 * trough, "peak %lld, trough %lld", (long long)peak,
            (long long)trough);
  /* shift: the rate doubles at 10 s and the prompt becomes 99 */
  memset(&arr, 0, sizeof arr);
  arr.nshifts = 1;
  arr.shifts[0].at_s = 10;
  arr.shifts[0].rate_per_s = 2000;
  arr.shifts[0].has_prompt = 1;
  arr.shifts[0].prompt.kind = LSIM_DIST_FIXED;
  arr.shifts[0].prompt.min = arr.shifts[0].prompt.max = 99;
  cr_assert_eq(open_gen(&t, 40000, 1, 1, 1, NULL, &arr, 1000, &eb), 0);
  int64_t before = 0, after = 0;
  while (lsim_trace_next(&t, &r, &eb) == 1) {
    int late = r.arrival_ns >= 10LL * 1000000000;
    cr_assert_eq(r.prompt_tokens, late ? 99 : 8);
    if (r.arrival_ns < 20LL * 1000000000)
      *(late ? &after : &before) += 1;
  }
  lsim_trace_close(&t);
  cr_expect(fabs((double)before - 10000) < 500, "%lld", (long long)before);
  cr_expect(fabs((double)after - 20000) < 700, "%lld", (long long)after);
}

Test(traces, empirical_lengths_come_from_the_trace) {
  need_data();
  lsim_len_dist p = {0}, o = {0};
  p.kind = o.kind = LSIM_DIST_EMPIRICAL;
  p.min = o.min = 1;
  p.max = o.max = 10000000;
  snprintf(p.file, sizeof p.file, "%s", AZ_CONV);
  snprintf(o.file, sizeof o.file, "%s", AZ_CONV);
  p.format = o.format = LSIM_TRACE_AZURE;
  o.field = 1;
  lsim_trace_spec spec = {0};
  spec.format = LSIM_TRACE_GEN;
  spec.gen_requests = 50000;
  spec.gen_rate_per_s = 100;
  spec.gen_prompt = &p;
  spec.gen_output = &o;
  lsim_trace_ctx ctx = {4, 1, NULL, NULL, 1, 0};
  lsim_trace t;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_trace_open(&t, &spec, &ctx, &eb), 0, "%s", eb.msg);
  lsim_trace_rec r;
  double ps = 0, os = 0;
  int maxo = 0;
  while (lsim_trace_next(&t, &r, &eb) == 1) {
    ps += r.prompt_tokens;
    os += r.output_tokens;
    if (r.output_tokens > maxo)
      maxo = r.output_tokens;
  }
  lsim_trace_close(&t);
  cr_expect(fabs(ps / 50000 - 1155) < 25, "prompt mean %f", ps / 50000);
  cr_expect(fabs(os / 50000 - 211) < 6, "output mean %f", os / 50000);
  cr_expect_leq(maxo, 1000);
}

/* ---- scenarios, replay, the command ------------------------------------------------- */

Test(traces, scenario_trace_section_validation) {
  static const struct {
    const char *trace;
    lsim_err code;
    const char *path;
  } c[] = {
      {"{\"file\": \"native.csv\", \"format\": \"parquet\"}", LSIM_E_SCN_RANGE,
       "$.trace.format"},
      {"{\"file\": \"native.csv\", \"servegen\": {}}", LSIM_E_SCN_CONFLICT,
       "$.trace.servegen"},
      {"{\"file\": \"native.csv\", \"assign\": {\"tenants\": \"owner\", "
       "\"scope\": \"tenant\"}}",
       LSIM_E_SCN_CONFLICT, "$.trace.assign.scope"},
      {"{\"file\": \"native.csv\", \"assign\": {\"adapters\": \"identical\"}}",
       LSIM_E_SCN_MISSING, "$.trace.assign.adapter"},
      {"{\"file\": \"native.csv\", \"assign\": {\"adapters\": \"uniform\", "
       "\"alpha\": 1}}",
       LSIM_E_SCN_CONFLICT, "$.trace.assign.alpha"},
      {"{\"file\": \"native.csv\", \"assign\": {\"count\": 99}}",
       LSIM_E_SCN_RANGE, "$.trace.assign.count"},
      {"{\"file\": \"native.csv\", \"assign\": {\"adapters\": \"popular\"}}",
       LSIM_E_SCN_RANGE, "$.trace.assign.adapters"},
      {"{\"generator\": {\"requests\": 5, \"rate_per_s\": 1, \"process\": "
       "\"gamma\", \"prompt_tokens\": {\"dist\": \"fixed\", \"value\": 4}, "
       "\"output_tokens\": {\"dist\": \"fixed\", \"value\": 4}}}",
       LSIM_E_SCN_MISSING, "$.trace.generator.cv"},
      {"{\"generator\": {\"requests\": 5, \"rate_per_s\": 1, \"onoff\": "
       "{\"on_s\": 1, \"off_s\": 1}, \"diurnal\": {\"period_s\": 9, "
       "\"amplitude\": 0.5}, \"prompt_tokens\": {\"dist\": \"fixed\", "
       "\"value\": 4}, \"output_tokens\": {\"dist\": \"fixed\", \"value\": "
       "4}}}",
       LSIM_E_SCN_CONFLICT, "$.trace.generator.diurnal"},
      {"{\"generator\": {\"requests\": 5, \"rate_per_s\": 1, \"shifts\": "
       "[{\"at_s\": 5}, {\"at_s\": 5}], \"prompt_tokens\": {\"dist\": "
       "\"fixed\", \"value\": 4}, \"output_tokens\": {\"dist\": \"fixed\", "
       "\"value\": 4}}}",
       LSIM_E_SCN_RANGE, "$.trace.generator.shifts[1].at_s"},
      {"{\"generator\": {\"requests\": 5, \"rate_per_s\": 1, "
       "\"prompt_tokens\": {\"dist\": \"empirical\", \"file\": \"nope.csv\"}, "
       "\"output_tokens\": {\"dist\": \"fixed\", \"value\": 4}}}",
       LSIM_E_SCN_TRACE_FILE, "$.trace.generator.prompt_tokens.file"},
      {"{\"generator\": {\"requests\": 5, \"rate_per_s\": 1, \"format\": "
       "\"csv\", \"prompt_tokens\": {\"dist\": \"fixed\", \"value\": 4}, "
       "\"output_tokens\": {\"dist\": \"fixed\", \"value\": 4}}}",
       LSIM_E_SCN_UNKNOWN_KEY, "$.trace.generator.format"},
  };
  FILE *f = fopen(FIX "/native.json", "r");
  cr_assert_not_null(f);
  static char base[8192];
  size_t n = fread(base, 1, sizeof base - 1, f);
  fclose(f);
  base[n] = '\0';
  char *at = strstr(base, "\"trace\": ");
  cr_assert_not_null(at);
  for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
    static char text[16384];
    snprintf(text, sizeof text, "%.*s\"trace\": %s\n}\n", (int)(at - base), base,
             c[i].trace);
    static lsim_scenario sc;
    lsim_errbuf eb = LSIM_ERRBUF_INIT;
    lsim_err rc = lsim_scenario_parse(&sc, text, strlen(text), "s.json", FIX,
                                      &eb);
    cr_expect_eq(rc, c[i].code, "case %zu: %s (%d) %s", i, lsim_err_name(rc),
                 rc, eb.msg);
    cr_expect_not_null(strstr(eb.msg, c[i].path), "case %zu: %s", i, eb.msg);
  }
}

static lsim_err run_scenario(const char *path, const char *db, lsim_summary *s,
                             lsim_errbuf *eb) {
  static lsim_scenario sc;
  lsim_err rc = lsim_scenario_load(&sc, path, eb);
  if (rc)
    return rc;
  lsim_replay_opts o = {.db_path = db, .command_line = "test"};
  return lsim_replay_run(&sc, &o, s, eb);
}

static int64_t q1(const char *db, const char *sql) {
  sqlite3 *h;
  sqlite3_stmt *st;
  cr_assert_eq(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK, "%s", sql);
  cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
  int64_t v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(h);
  return v;
}

Test(traces, native_fixture_replays) {
  char db[512];
  snprintf(db, sizeof db, "%s/n.db", tmpdir);
  lsim_summary s;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(run_scenario(FIX "/native.json", db, &s, &eb), 0, "%s", eb.msg);
  cr_expect_eq(q1(db, "SELECT count(*) FROM requests"), 4);
  cr_expect_eq(q1(db, "SELECT adapter FROM requests WHERE request = 0"), 0);
  cr_expect_eq(q1(db, "SELECT adapter FROM requests WHERE request = 1"), 0);
  cr_expect_eq(q1(db, "SELECT adapter FROM requests WHERE request = 3"), 1);
  cr_expect_eq(q1(db, "SELECT adapter % 2 FROM requests WHERE request = 2"), 1,
               "drawn among tenant 1's adapters");
  cr_expect_eq(q1(db, "SELECT tenant FROM requests WHERE request = 1"), 1);
}

Test(traces, azure_conv_replays_end_to_end, .timeout = 300) {
  need_data();
  char db[512];
  snprintf(db, sizeof db, "%s/az.db", tmpdir);
  lsim_summary s;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(run_scenario(FIX "/azure_conv.json", db, &s, &eb), 0, "%s",
               eb.msg);
  cr_expect_eq(q1(db, "SELECT count(*) FROM requests"), 19366);
  cr_expect_eq(q1(db, "SELECT count(*) FROM requests WHERE finish_tick IS NULL"),
               0);
  cr_expect_eq(q1(db, "SELECT status = 'ok' FROM runs"), 1);
  cr_expect_eq(q1(db, "SELECT count(DISTINCT tenant) FROM requests"), 2);
  cr_expect_eq(q1(db, "SELECT sum(adapter % 2 = tenant) FROM requests"), 19366,
               "tenant-scope adapters");
  /* the last arrival is the trace's last timestamp, 3501.72 s in */
  cr_expect_eq(q1(db, "SELECT count(*) FROM requests WHERE outcome = 'ok'"),
               19366);
  /* the last arrival: 19:14:08.4025270 - 18:15:46.6805900 = 3501.721937 s,
  ** in ticks of 1 us */
  cr_expect_eq(q1(db, "SELECT max(arrival_tick) FROM requests"), 3501721937LL);
}

static void sh(const char *cmd, char *out, size_t n) {
  FILE *p = popen(cmd, "r");
  cr_assert_not_null(p);
  size_t k = fread(out, 1, n - 1, p);
  out[k] = '\0';
  int st = pclose(p);
  cr_assert_eq(st, 0, "'%s' failed: %s", cmd, out);
}

Test(traces, convert_round_trip_mooncake) {
  need_data();
  char cmd[2048], out[4096], csv[512], jl[512];
  snprintf(csv, sizeof csv, "%s/m.csv", tmpdir);
  snprintf(jl, sizeof jl, "%s/m.jsonl", tmpdir);
  for (int k = 0; k < 2; k++) {
    snprintf(cmd, sizeof cmd, "%s trace convert --format mooncake %s -o %s 2>&1",
             LSIM_BIN, MOONCAKE, k ? jl : csv);
    sh(cmd, out, sizeof out);
    cr_expect_not_null(strstr(out, "wrote           12031 records"), "%s", out);
  }
  lsim_trace a, b;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  for (int k = 0; k < 2; k++) {
    cr_assert_eq(open_file(&a, LSIM_TRACE_MOONCAKE, MOONCAKE, 0, 0, 1, NULL, 0,
                           &eb),
                 0);
    cr_assert_eq(open_file(&b, k ? LSIM_TRACE_JSONL : LSIM_TRACE_CSV,
                           k ? jl : csv, 0, 0, 1, NULL, 0, &eb),
                 0, "%s", eb.msg);
    lsim_trace_rec x, y;
    int64_t n = 0;
    int ra, rb;
    static uint64_t xb[LSIM_TRACE_MAX_BLOCKS];
    while ((ra = lsim_trace_next(&a, &x, &eb)) == 1) {
      int nb = x.nblocks;
      memcpy(xb, x.blocks, (size_t)nb * sizeof *xb);
      rb = lsim_trace_next(&b, &y, &eb);
      cr_assert_eq(rb, 1, "record %lld: %s", (long long)n, eb.msg);
      cr_assert_eq(x.arrival_ns, y.arrival_ns);
      cr_assert_eq(x.prompt_tokens, y.prompt_tokens);
      cr_assert_eq(x.output_tokens, y.output_tokens);
      cr_assert_eq(nb, y.nblocks);
      cr_assert_eq(memcmp(xb, y.blocks, (size_t)nb * sizeof *xb), 0);
      cr_assert_eq(y.tenant, -1);
      n++;
    }
    cr_assert_eq(ra, 0);
    cr_assert_eq(lsim_trace_next(&b, &y, &eb), 0);
    cr_expect_eq(n, 12031);
    lsim_trace_close(&a);
    lsim_trace_close(&b);
  }
}

Test(traces, convert_records_the_assignment_and_keeps_it) {
  char cmd[4096], out[4096], csv[512], csv2[512];
  snprintf(csv, sizeof csv, "%s/g.csv", tmpdir);
  snprintf(csv2, sizeof csv2, "%s/g2.csv", tmpdir);
  snprintf(cmd, sizeof cmd,
           "%s trace convert --format burstgpt %s/burstgpt.csv --tenants 2 "
           "--adapters 8 --assign-adapters zipf --alpha 1.2 --seed 9 -o %s "
           "2>&1",
           LSIM_BIN, FIX, csv);
  sh(cmd, out, sizeof out);
  cr_expect_not_null(strstr(out, "assignment      seed 9; tenants modulo over "
                                 "2; adapters zipf alpha 1.2, scope tenant"),
                     "%s", out);
  cr_expect_not_null(strstr(out, "failed dropped  1"), "%s", out);
  cr_expect_not_null(strstr(out, "wrote           5 records"), "%s", out);
  /* the file says how it was made, and reads back to the same records */
  snprintf(cmd, sizeof cmd, "grep -c '^# assignment: seed 9' %s", csv);
  sh(cmd, out, sizeof out);
  cr_expect_eq(atoi(out), 1);
  snprintf(cmd, sizeof cmd, "%s trace convert %s -o %s 2>/dev/null && cmp %s %s",
           LSIM_BIN, csv, csv2, csv, csv2);
  FILE *p = popen(cmd, "r");
  int st = pclose(p);
  cr_expect_neq(st, 0, "the comment names another source");
  snprintf(cmd, sizeof cmd,
           "grep -v '^#' %s > %s/a && grep -v '^#' %s > %s/b && cmp %s/a %s/b",
           csv, tmpdir, csv2, tmpdir, tmpdir, tmpdir);
  sh(cmd, out, sizeof out);
}

Test(traces, stats_prints_counts_lengths_and_plot) {
  need_data();
  char cmd[2048], out[8192], png[512];
  snprintf(png, sizeof png, "%s/conv-rate.png", tmpdir);
  snprintf(cmd, sizeof cmd, "%s trace stats --format azure %s --plot %s",
           LSIM_BIN, AZ_CONV, png);
  sh(cmd, out, sizeof out);
  cr_expect_not_null(strstr(out, "requests        19366\n"), "%s", out);
  cr_expect_not_null(strstr(out, "span            3501.72"), "%s", out);
  cr_expect_not_null(strstr(out, "prompt tokens   mean 1154.7  p50 1020"), "%s",
                     out);
  cr_expect_not_null(strstr(out, "output tokens   mean 211.1  p50 129"), "%s",
                     out);
  cr_expect_not_null(strstr(out, "tenants         none assigned"), "%s", out);
  cr_expect_not_null(strstr(out, "plot            "), "%s", out);
  char dat[600];
  snprintf(dat, sizeof dat, "%s/conv-rate.dat", tmpdir);
  struct stat st;
  cr_expect_eq(stat(dat, &st), 0, "no rate series at %s", dat);
  /* with the mooncake trace: prefix reuse */
  snprintf(cmd, sizeof cmd, "%s trace stats --format mooncake %s --no-plot",
           LSIM_BIN, MOONCAKE);
  sh(cmd, out, sizeof out);
  cr_expect_not_null(strstr(out, "prefix blocks   288500 (182790 distinct), "
                                 "105710 reused: reuse ratio 36.64%"),
                     "%s", out);
}

Test(traces, stats_reports_skipped_rows) {
  char path[512], cmd[2048], out[4096];
  put("dirty.csv", CSVH "0,0,0,5,4\n1,0,0,x,4\n2,0,0,5,4\n3,0,0,5,0\n", path,
      sizeof path);
  snprintf(cmd, sizeof cmd, "%s trace stats %s --no-plot 2>&1; echo rc=$?",
           LSIM_BIN, path);
  sh(cmd, out, sizeof out);
  cr_expect_not_null(strstr(out, "E_TRACE_PARSE"), "%s", out);
  cr_expect_not_null(strstr(out, "dirty.csv:3: prompt_tokens"), "%s", out);
  cr_expect_not_null(strstr(out, "rc=2"), "%s", out);
  snprintf(cmd, sizeof cmd, "%s trace stats %s --no-plot --skip-bad-rows",
           LSIM_BIN, path);
  sh(cmd, out, sizeof out);
  cr_expect_not_null(strstr(out, "skipped rows    2: E_TRACE_PARSE 1 "
                                 "E_TRACE_RANGE 1"),
                     "%s", out);
  cr_expect_not_null(strstr(out, "requests        2\n"), "%s", out);
}

/* ---- the importer registry (traces/trace.c) ---------------------------------- */

Test(traces, importer_registry_names_values_and_guess) {
  /* every format has one name, and find and name agree on every file
  ** format; the generator is a format but no file format */
  cr_assert_eq(lsim_trace_format_count(), LSIM_TRACE_BLIS + 1);
  const char *const *n = lsim_trace_format_names();
  int files = 0;
  for (; n[files]; files++) {
    int f = lsim_trace_format_find(n[files]);
    cr_assert_geq(f, 0, "%s", n[files]);
    cr_assert_str_eq(lsim_trace_format_name(f), n[files]);
  }
  cr_assert_eq(files, lsim_trace_format_count() - 1);
  cr_assert_eq(lsim_trace_format_find("generator"), -1);
  cr_assert_str_eq(lsim_trace_format_name(LSIM_TRACE_GEN), "generator");
  cr_assert_str_eq(lsim_trace_format_name(LSIM_TRACE_MOONCAKE), "mooncake");
  /* an importer after the generator keeps the generator's value */
  cr_assert_str_eq(lsim_trace_format_name(LSIM_TRACE_BLIS), "blis");
  cr_assert_str_eq(lsim_trace_format_name(-1), "unknown");
  cr_assert_str_eq(lsim_trace_format_name(lsim_trace_format_count()),
                   "unknown");
  char buf[128];
  size_t need = lsim_trace_format_join(buf, sizeof buf, ", ");
  cr_assert_str_eq(buf,
                   "csv, jsonl, azure, mooncake, burstgpt, servegen, blis");
  cr_assert_eq(need, strlen(buf));
  char small[8];
  cr_assert_eq(lsim_trace_format_join(small, sizeof small, ", "), need);
  cr_assert_str_eq(small, "csv, js");
  /* only per-request files feed an empirical length distribution */
  cr_assert(lsim_trace_format_per_request(LSIM_TRACE_AZURE));
  cr_assert_not(lsim_trace_format_per_request(LSIM_TRACE_SERVEGEN));
  cr_assert_not(lsim_trace_format_per_request(LSIM_TRACE_GEN));
  /* the guess rules of the tables */
  cr_assert_eq(lsim_trace_format_guess(FIX "/native.jsonl"), LSIM_TRACE_JSONL);
  cr_assert_eq(lsim_trace_format_guess(FIX "/native.csv"), LSIM_TRACE_CSV);
  cr_assert_eq(lsim_trace_format_guess(FIX), LSIM_TRACE_SERVEGEN);
  cr_assert_str_eq(lsim_trace_format_sample_name(LSIM_TRACE_SERVEGEN),
                   "chunk-0-trace.csv");
  cr_assert_str_eq(lsim_trace_format_sample_name(LSIM_TRACE_MOONCAKE),
                   "input.jsonl");
}
