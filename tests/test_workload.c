/*
** test_workload.c: the workload controls of the trace stream (traces/trace.c,
** lsim_trace_ctl): rate_scale, window and remap, on a slice of the real
** Azure conversation trace (skipped with a message when ../shared is
** absent), on native fixtures and on the generator; the scenario keys
** ($.trace.rate_scale, window, remap) with their error codes and paths; a
** replay and `lorasim trace convert` over a window.
**
** Every expectation is computed from the same source read without the
** controls, by the documented rule: a kept arrival a becomes
** floor((a - start) * den / num) ns.
*/
#include <criterion/criterion.h>
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
#define FIX LSIM_SOURCE_DIR "/tests/fixtures/traces"
#define S 1000000000ll

static char tmpdir[256];

static void mk_tmp(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/lsim-workload-XXXXXX");
  cr_assert_not_null(mkdtemp(tmpdir));
}

static void rm_tmp(void) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  cr_assert_eq(system(cmd), 0);
}

TestSuite(workload, .init = mk_tmp, .fini = rm_tmp);

static void need_azure(void) {
  struct stat st;
  if (stat(AZ_CONV, &st) != 0)
    cr_skip_test("shared Azure trace not found at %s: skipping", AZ_CONV);
}

static void put(const char *name, const char *text, char *out, size_t n) {
  snprintf(out, n, "%s/%s", tmpdir, name);
  FILE *f = fopen(out, "w");
  cr_assert_not_null(f);
  fputs(text, f);
  fclose(f);
}

/* The records of one source, kept whole for comparison. */
typedef struct recs {
  int64_t n;
  int64_t *arr, *dl, *cx;
  int *prompt, *output, *tenant, *adapter;
  char (*tname)[64], (*aname)[64];
} recs;

static void recs_release(recs *r) {
  free(r->arr);
  free(r->dl);
  free(r->cx);
  free(r->prompt);
  free(r->output);
  free(r->tenant);
  free(r->adapter);
  free(r->tname);
  free(r->aname);
  memset(r, 0, sizeof *r);
}

/* Read every record of an open trace into *out (at most cap). */
static int read_all(lsim_trace *t, recs *out, int64_t cap, lsim_errbuf *eb) {
  memset(out, 0, sizeof *out);
  out->arr = calloc((size_t)cap, sizeof *out->arr);
  out->dl = calloc((size_t)cap, sizeof *out->dl);
  out->cx = calloc((size_t)cap, sizeof *out->cx);
  out->prompt = calloc((size_t)cap, sizeof *out->prompt);
  out->output = calloc((size_t)cap, sizeof *out->output);
  out->tenant = calloc((size_t)cap, sizeof *out->tenant);
  out->adapter = calloc((size_t)cap, sizeof *out->adapter);
  out->tname = calloc((size_t)cap, sizeof *out->tname);
  out->aname = calloc((size_t)cap, sizeof *out->aname);
  cr_assert(out->arr && out->dl && out->cx && out->prompt && out->output &&
            out->tenant && out->adapter && out->tname && out->aname);
  lsim_trace_rec r;
  int rc;
  while ((rc = lsim_trace_next(t, &r, eb)) == 1) {
    cr_assert_lt(out->n, cap);
    int64_t i = out->n++;
    cr_assert_eq(r.id, i);
    out->arr[i] = r.arrival_ns;
    out->dl[i] = r.deadline_ns;
    out->cx[i] = r.cancel_ns;
    out->prompt[i] = r.prompt_tokens;
    out->output[i] = r.output_tokens;
    out->tenant[i] = r.tenant;
    out->adapter[i] = r.adapter;
    snprintf(out->tname[i], 64, "%s", r.tenant_name ? r.tenant_name : "");
    snprintf(out->aname[i], 64, "%s", r.adapter_name ? r.adapter_name : "");
  }
  return rc;
}

/* Open a file in raw mode (T == 0) or over T tenants / N adapters. */
static lsim_err open_file(lsim_trace *t, int fmt, const char *path,
                          const lsim_trace_ctl *ctl, const lsim_assign_spec *as,
                          int T, int N, int skip, int64_t max,
                          lsim_errbuf *eb) {
  static const char *names[2] = {"gold", "bronze"};
  lsim_trace_spec spec = {0};
  spec.format = fmt;
  spec.path = path;
  spec.ctl = ctl;
  spec.assign = as;
  spec.skip_bad_rows = skip;
  spec.max_requests = max;
  lsim_trace_ctx ctx = {3, T, T == 2 ? names : NULL, NULL, N, 0};
  return lsim_trace_open(t, &spec, &ctx, eb);
}

static void read_file(int fmt, const char *path, const lsim_trace_ctl *ctl,
                      int64_t max, recs *out, lsim_trace_info *info) {
  lsim_trace t;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(open_file(&t, fmt, path, ctl, NULL, 0, 0, 0, max, &eb), 0,
               "%s", eb.msg);
  cr_assert_eq(read_all(&t, out, 40000, &eb), 0, "%s", eb.msg);
  if (info)
    lsim_trace_get_info(&t, info);
  lsim_trace_close(&t);
}

/* floor(a * den / num), the documented rounding. */
static int64_t scaled(int64_t a, int64_t num, int64_t den) {
  return (int64_t)((unsigned __int128)a * (uint64_t)den / (uint64_t)num);
}

/* ---- rate_scale ------------------------------------------------------------ */

Test(workload, rate_scale_divides_every_azure_arrival_exactly) {
  need_azure();
  recs raw, sc;
  read_file(LSIM_TRACE_AZURE, AZ_CONV, NULL, 0, &raw, NULL);
  cr_assert_eq(raw.n, 19366);
  static const int64_t q[][2] = {{2, 1}, {5, 2}, {3, 7}, {1000, 1}};
  for (size_t k = 0; k < sizeof q / sizeof q[0]; k++) {
    lsim_trace_ctl *ctl = calloc(1, sizeof *ctl);
    ctl->rate_num = q[k][0];
    ctl->rate_den = q[k][1];
    lsim_trace_info info;
    read_file(LSIM_TRACE_AZURE, AZ_CONV, ctl, 0, &sc, &info);
    cr_assert_eq(sc.n, raw.n, "scale %lld/%lld", (long long)q[k][0],
                 (long long)q[k][1]);
    for (int64_t i = 0; i < raw.n; i++) {
      cr_assert_eq(sc.arr[i], scaled(raw.arr[i], q[k][0], q[k][1]),
                   "record %lld", (long long)i);
      cr_assert_eq(sc.prompt[i], raw.prompt[i]);
      cr_assert_eq(sc.output[i], raw.output[i]);
      cr_assert_eq(sc.tenant[i], -1);
      cr_assert_eq(sc.adapter[i], -1);
      if (k == 0 && i > 0) {
        /* a scale of 2 halves every gap, to within the one ns the
        ** rounding down of each end can take */
        int64_t g = raw.arr[i] - raw.arr[i - 1], g2 = sc.arr[i] - sc.arr[i - 1];
        cr_assert(g2 == g / 2 || g2 == (g + 1) / 2, "gap %lld -> %lld",
                  (long long)g, (long long)g2);
      }
    }
    cr_expect_not_null(strstr(info.workload, "rate_scale"), "%s",
                       info.workload);
    recs_release(&sc);
    free(ctl);
  }
  /* the Azure trace's own 5.5 req/s at 2x: the span halves */
  cr_expect_lt(raw.arr[raw.n - 1] / 2 - 1, raw.arr[raw.n - 1]);
  recs_release(&raw);
}

Test(workload, deadline_and_cancel_keep_their_distance) {
  recs raw, sc;
  read_file(LSIM_TRACE_CSV, FIX "/native.csv", NULL, 0, &raw, NULL);
  lsim_trace_ctl ctl;
  memset(&ctl, 0, sizeof ctl);
  ctl.rate_num = 4;
  ctl.rate_den = 1;
  read_file(LSIM_TRACE_CSV, FIX "/native.csv", &ctl, 0, &sc, NULL);
  cr_assert_eq(sc.n, raw.n);
  int with_deadline = 0, with_cancel = 0;
  for (int64_t i = 0; i < raw.n; i++) {
    cr_assert_eq(sc.arr[i], raw.arr[i] / 4);
    if (raw.dl[i] >= 0) {
      with_deadline++;
      cr_expect_eq(sc.dl[i] - sc.arr[i], raw.dl[i] - raw.arr[i]);
    } else {
      cr_expect_eq(sc.dl[i], -1);
    }
    if (raw.cx[i] >= 0) {
      with_cancel++;
      cr_expect_eq(sc.cx[i] - sc.arr[i], raw.cx[i] - raw.arr[i]);
    } else {
      cr_expect_eq(sc.cx[i], -1);
    }
  }
  cr_assert_geq(with_deadline, 1);
  cr_assert_geq(with_cancel, 1);
  recs_release(&raw);
  recs_release(&sc);
}

/* ---- window ----------------------------------------------------------------- */

Test(workload, window_keeps_exactly_the_azure_rows_in_range_shifted) {
  need_azure();
  recs raw, w;
  read_file(LSIM_TRACE_AZURE, AZ_CONV, NULL, 0, &raw, NULL);
  const int64_t start = 600 * S, end = 1200 * S + 250000000; /* 1200.25 s */
  static const int64_t q[][2] = {{0, 0}, {2, 1}};
  for (int k = 0; k < 2; k++) {
    lsim_trace_ctl *ctl = calloc(1, sizeof *ctl);
    ctl->window_start_ns = start;
    ctl->window_end_ns = end;
    ctl->rate_num = q[k][0];
    ctl->rate_den = q[k][1];
    lsim_trace_info info;
    read_file(LSIM_TRACE_AZURE, AZ_CONV, ctl, 0, &w, &info);
    int64_t j = 0, before = 0;
    for (int64_t i = 0; i < raw.n; i++) {
      if (raw.arr[i] < start) {
        before++;
        continue;
      }
      if (raw.arr[i] >= end)
        break;
      cr_assert_lt(j, w.n, "record %lld missing", (long long)i);
      int64_t want = raw.arr[i] - start;
      if (k)
        want = scaled(want, q[k][0], q[k][1]);
      cr_assert_eq(w.arr[j], want, "record %lld", (long long)i);
      cr_assert_eq(w.prompt[j], raw.prompt[i]);
      cr_assert_eq(w.output[j], raw.output[i]);
      j++;
    }
    cr_assert_eq(w.n, j);
    cr_assert_gt(j, 1000, "a 10-minute slice of 5.5 req/s");
    cr_assert_eq(info.before_window, before);
    cr_expect_not_null(strstr(info.workload, "window [600 s, 1200.25 s)"),
                       "%s", info.workload);
    recs_release(&w);
    free(ctl);
  }
  /* max_requests counts what comes out of the window */
  lsim_trace_ctl *ctl = calloc(1, sizeof *ctl);
  ctl->window_start_ns = start;
  read_file(LSIM_TRACE_AZURE, AZ_CONV, ctl, 10, &w, NULL);
  cr_assert_eq(w.n, 10);
  for (int64_t i = 0, j = 0; i < raw.n && j < 10; i++)
    if (raw.arr[i] >= start)
      cr_assert_eq(w.arr[j++], raw.arr[i] - start);
  recs_release(&w);
  free(ctl);
  recs_release(&raw);
}

/* ---- the generator ------------------------------------------------------------ */

static void read_gen(const lsim_trace_ctl *ctl, recs *out) {
  static lsim_len_dist len = {LSIM_DIST_FIXED, 8, 8, 0, "", 0, 0};
  lsim_trace_spec spec = {0};
  spec.format = LSIM_TRACE_GEN;
  spec.gen_requests = 3000;
  spec.gen_rate_per_s = 50;
  spec.gen_prompt = spec.gen_output = &len;
  spec.ctl = ctl;
  lsim_trace_ctx ctx = {7, 2, NULL, NULL, 8, 1.0};
  lsim_trace t;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_trace_open(&t, &spec, &ctx, &eb), 0, "%s", eb.msg);
  cr_assert_eq(read_all(&t, out, 3000, &eb), 0, "%s", eb.msg);
  lsim_trace_close(&t);
}

Test(workload, generator_takes_rate_scale_and_window) {
  recs raw, sc, w;
  read_gen(NULL, &raw);
  cr_assert_eq(raw.n, 3000);
  lsim_trace_ctl ctl;
  memset(&ctl, 0, sizeof ctl);
  ctl.rate_num = 2;
  ctl.rate_den = 1;
  read_gen(&ctl, &sc);
  cr_assert_eq(sc.n, raw.n);
  for (int64_t i = 0; i < raw.n; i++) {
    cr_assert_eq(sc.arr[i], raw.arr[i] / 2, "record %lld", (long long)i);
    cr_assert_eq(sc.tenant[i], raw.tenant[i]); /* drawn by the generator */
  }
  memset(&ctl, 0, sizeof ctl);
  ctl.window_start_ns = 10 * S;
  ctl.window_end_ns = 20 * S;
  read_gen(&ctl, &w);
  int64_t j = 0;
  for (int64_t i = 0; i < raw.n; i++)
    if (raw.arr[i] >= 10 * S && raw.arr[i] < 20 * S) {
      cr_assert_lt(j, w.n);
      cr_assert_eq(w.arr[j++], raw.arr[i] - 10 * S);
    }
  cr_assert_eq(w.n, j);
  cr_assert_gt(j, 300, "ten seconds at 50 req/s");
  recs_release(&raw);
  recs_release(&sc);
  recs_release(&w);
}

/* ---- remap -------------------------------------------------------------------- */

static void entry(lsim_trace_map_entry *e, const char *from, int64_t to,
                  const char *to_name) {
  memset(e, 0, sizeof *e);
  snprintf(e->from, sizeof e->from, "%s", from);
  e->to = to;
  if (to_name)
    snprintf(e->to_name, sizeof e->to_name, "%s", to_name);
}

Test(workload, remap_maps_tenants_and_adapters_before_the_assignment) {
  /* native.csv: (gold, summarize/v1) (bronze, summarize/v1) (1, -)
  ** (gold, chat:v7) */
  lsim_trace_ctl *ctl = calloc(1, sizeof *ctl);
  entry(&ctl->tenant_map[0], "gold", -1, "bronze");
  entry(&ctl->tenant_map[1], "1", 0, NULL);
  ctl->ntenant_map = 2;
  entry(&ctl->adapter_map[0], "summarize/v1", 3, NULL);
  ctl->nadapter_map = 1;
  lsim_assign_spec as = {0};
  as.tenants = LSIM_AT_TRACE;
  as.adapters = LSIM_AA_AUTO;
  as.scope = LSIM_SCOPE_CATALOG;
  lsim_trace t;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  recs r;
  cr_assert_eq(open_file(&t, LSIM_TRACE_CSV, FIX "/native.csv", ctl, &as, 2,
                         4, 0, 0, &eb),
               0, "%s", eb.msg);
  cr_assert_eq(read_all(&t, &r, 10, &eb), 0, "%s", eb.msg);
  lsim_trace_close(&t);
  cr_assert_eq(r.n, 4);
  const int want_t[4] = {1, 1, 0, 1}; /* gold -> bronze, "1" -> 0 */
  for (int i = 0; i < 4; i++)
    cr_expect_eq(r.tenant[i], want_t[i], "record %d: tenant %d", i,
                 r.tenant[i]);
  cr_expect_eq(r.adapter[0], 3);
  cr_expect_eq(r.adapter[1], 3);
  /* chat:v7 is the first alias the assignment sees: number 0 */
  cr_expect_eq(r.adapter[3], 0);
  cr_expect_str_eq(r.aname[3], "chat:v7");
  recs_release(&r);

  /* the same map without the tenant entry: gold stays gold */
  ctl->ntenant_map = 0;
  cr_assert_eq(open_file(&t, LSIM_TRACE_CSV, FIX "/native.csv", ctl, &as, 2,
                         4, 0, 0, &eb),
               0, "%s", eb.msg);
  cr_assert_eq(read_all(&t, &r, 10, &eb), 0, "%s", eb.msg);
  lsim_trace_close(&t);
  cr_expect_eq(r.tenant[0], 0);
  cr_expect_eq(r.tenant[2], 1);
  recs_release(&r);
  free(ctl);
}

Test(workload, remap_folds_adapters_and_numbers_no_name_on_a_bad_row) {
  char path[512];
  put("fold.csv",
      "arrival_us,tenant,adapter,prompt_tokens,output_tokens\n"
      "0,gold,0,4,4\n"
      "1,gold,7,4,4\n"
      "2,gold,x,4,4\n"
      "3,nobody,z,4,4\n" /* E_TRACE_ALIAS: skipped, z not numbered */
      "4,bronze,w,4,4\n"
      "5,bronze,x,4,4\n"
      "6,bronze,11,4,4\n",
      path, sizeof path);
  lsim_trace_ctl *ctl = calloc(1, sizeof *ctl);
  ctl->adapter_modulo = 3;
  ctl->adapter_offset = 1;
  lsim_assign_spec as = {0};
  as.tenants = LSIM_AT_TRACE;
  as.adapters = LSIM_AA_TRACE;
  as.scope = LSIM_SCOPE_CATALOG;
  lsim_trace t;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  recs r;
  cr_assert_eq(open_file(&t, LSIM_TRACE_CSV, path, ctl, &as, 2, 4, 1, 0, &eb),
               0, "%s", eb.msg);
  cr_assert_eq(read_all(&t, &r, 10, &eb), 0, "%s", eb.msg);
  lsim_trace_info info;
  lsim_trace_get_info(&t, &info);
  lsim_trace_close(&t);
  cr_assert_eq(info.skipped, 1, "%s", info.first_skipped);
  cr_assert_eq(r.n, 6);
  /* v % 3 + 1: 0 -> 1, 7 -> 2, x (name 0) -> 1, w (name 1, not 2: z was
  ** never numbered) -> 2, x -> 1, 11 -> 3 */
  const int want[6] = {1, 2, 1, 2, 1, 3};
  for (int i = 0; i < 6; i++) {
    cr_expect_eq(r.adapter[i], want[i], "record %d: adapter %d", i,
                 r.adapter[i]);
    cr_expect_str_eq(r.aname[i], "", "a folded adapter is an index");
  }
  /* an offset that leaves the catalog is the assignment's range error */
  ctl->adapter_modulo = 0;
  ctl->adapter_offset = 4;
  cr_assert_eq(open_file(&t, LSIM_TRACE_CSV, path, ctl, &as, 2, 4, 0, 0, &eb),
               0, "%s", eb.msg);
  lsim_trace_rec one;
  cr_expect_eq(lsim_trace_next(&t, &one, &eb), LSIM_E_TRACE_RANGE, "%s",
               eb.msg);
  cr_expect_not_null(strstr(eb.msg, "fold.csv:2: adapter"), "%s", eb.msg);
  lsim_trace_close(&t);
  recs_release(&r);
  free(ctl);
}

Test(workload, bad_controls_are_refused_at_open) {
  lsim_trace_ctl *ctl = calloc(1, sizeof *ctl);
  lsim_trace t;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  ctl->rate_num = 1; /* den 0 */
  cr_expect_eq(open_file(&t, LSIM_TRACE_CSV, FIX "/native.csv", ctl, NULL, 0,
                         0, 0, 0, &eb),
               LSIM_E_USAGE);
  memset(ctl, 0, sizeof *ctl);
  ctl->window_start_ns = 5;
  ctl->window_end_ns = 5;
  cr_expect_eq(open_file(&t, LSIM_TRACE_CSV, FIX "/native.csv", ctl, NULL, 0,
                         0, 0, 0, &eb),
               LSIM_E_USAGE);
  memset(ctl, 0, sizeof *ctl);
  entry(&ctl->adapter_map[0], "a", 1, NULL);
  entry(&ctl->adapter_map[1], "a", 2, NULL);
  ctl->nadapter_map = 2;
  cr_expect_eq(open_file(&t, LSIM_TRACE_CSV, FIX "/native.csv", ctl, NULL, 0,
                         0, 0, 0, &eb),
               LSIM_E_USAGE);
  cr_expect_not_null(strstr(eb.msg, "listed twice"), "%s", eb.msg);
  ctl->nadapter_map = 1;
  ctl->adapter_modulo = 2;
  cr_expect_eq(open_file(&t, LSIM_TRACE_CSV, FIX "/native.csv", ctl, NULL, 0,
                         0, 0, 0, &eb),
               LSIM_E_USAGE);
  free(ctl);
}

Test(workload, decimal_texts_are_exact_fractions) {
  static const struct {
    const char *s;
    int rc;
    int64_t num, den;
  } c[] = {
      {"2", 0, 2, 1},         {"0.5", 0, 1, 2},       {"1.1", 0, 11, 10},
      {"2.50", 0, 5, 2},      {"1e3", 0, 1000, 1},    {"2.5E-1", 0, 1, 4},
      {"0", 0, 0, 1},         {"007", 0, 7, 1},       {".5", 0, 1, 2},
      {"-1", -1, 0, 0},       {"1e", -1, 0, 0},       {"0x10", -1, 0, 0},
      {"", -1, 0, 0},         {"1e19", -2, 0, 0},     {"1e-19", -2, 0, 0},
      {"1.0000000000000000001", -2, 0, 0},
  };
  for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
    int64_t n = -9, d = -9;
    int rc = lsim_trace_decimal(c[i].s, &n, &d);
    cr_expect_eq(rc, c[i].rc, "'%s': rc %d", c[i].s, rc);
    if (!rc && !c[i].rc) {
      cr_expect_eq(n, c[i].num, "'%s': %lld/%lld", c[i].s, (long long)n,
                   (long long)d);
      cr_expect_eq(d, c[i].den, "'%s': %lld/%lld", c[i].s, (long long)n,
                   (long long)d);
    }
  }
  int64_t ns;
  cr_expect_eq(lsim_trace_seconds_ns("600.25", &ns), 0);
  cr_expect_eq(ns, 600250000000ll);
  cr_expect_eq(lsim_trace_seconds_ns("1e-9", &ns), 0);
  cr_expect_eq(ns, 1);
  cr_expect_eq(lsim_trace_seconds_ns("1e-10", &ns), -1);
  cr_expect_eq(lsim_trace_seconds_ns("1e10", &ns), -2);
}

/* ---- scenario keys ------------------------------------------------------------- */

/* A scenario file with its "trace" member (the last) replaced. */
static char *scenario_from(const char *file, const char *trace) {
  FILE *f = fopen(file, "r");
  cr_assert_not_null(f);
  static char base[8192];
  size_t n = fread(base, 1, sizeof base - 1, f);
  fclose(f);
  base[n] = '\0';
  char *at = strstr(base, "\"trace\": ");
  cr_assert_not_null(at);
  static char text[16384];
  snprintf(text, sizeof text, "%.*s\"trace\": %s\n}\n", (int)(at - base), base,
           trace);
  return text;
}

static char *scenario_text(const char *trace) {
  return scenario_from(FIX "/native.json", trace);
}

Test(workload, scenario_keys_are_read_exactly) {
  static lsim_scenario sc;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  const char *text = scenario_text(
      "{\"file\": \"native.csv\", \"rate_scale\": 1.1, \"window\": "
      "{\"start_s\": 0.0005, \"end_s\": 2}, \"remap\": {\"tenants\": "
      "{\"map\": {\"gold\": \"bronze\", \"1\": 0}}, \"adapters\": "
      "{\"modulo\": 3, \"offset\": 1}}}");
  cr_assert_eq(lsim_scenario_parse(&sc, text, strlen(text), "s.json", FIX,
                                   &eb),
               0, "%s", eb.msg);
  const lsim_trace_ctl *c = &sc.trace_ctl;
  cr_expect_eq(c->rate_num, 11);
  cr_expect_eq(c->rate_den, 10);
  cr_expect_eq(c->window_start_ns, 500000);
  cr_expect_eq(c->window_end_ns, 2 * S);
  cr_assert_eq(c->ntenant_map, 2);
  cr_expect_str_eq(c->tenant_map[0].from, "gold");
  cr_expect_str_eq(c->tenant_map[0].to_name, "bronze");
  cr_expect_eq(c->tenant_map[0].to, -1);
  cr_expect_str_eq(c->tenant_map[1].from, "1");
  cr_expect_eq(c->tenant_map[1].to, 0);
  cr_expect_eq(c->adapter_modulo, 3);
  cr_expect_eq(c->adapter_offset, 1);
  /* the scenario's trace opens with them: 0.5 ms .. 2 s of native.csv,
  ** shifted by 0.5 ms and scaled by 10/11 */
  lsim_trace t;
  recs r;
  cr_assert_eq(lsim_scenario_trace_open(&sc, &t, 0, 0, &eb), 0, "%s", eb.msg);
  cr_assert_eq(read_all(&t, &r, 10, &eb), 0, "%s", eb.msg);
  lsim_trace_close(&t);
  cr_assert_eq(r.n, 3); /* arrivals 0.5, 2 and 3 ms (0 is before) */
  cr_expect_eq(r.arr[0], 0);
  cr_expect_eq(r.arr[1], scaled(1500000, 11, 10));
  cr_expect_eq(r.arr[2], scaled(2500000, 11, 10));
  recs_release(&r);
  /* without the keys nothing is set */
  text = scenario_text("{\"file\": \"native.csv\"}");
  cr_assert_eq(lsim_scenario_parse(&sc, text, strlen(text), "s.json", FIX,
                                   &eb),
               0, "%s", eb.msg);
  cr_expect(lsim_trace_ctl_none(&sc.trace_ctl));
}

Test(workload, scenario_keys_refuse_bad_values_with_codes_and_paths) {
  static const struct {
    const char *keys;
    lsim_err code;
    const char *path;
  } c[] = {
      {"\"rate_scale\": 0", LSIM_E_SCN_RANGE, "$.trace.rate_scale"},
      {"\"rate_scale\": -2", LSIM_E_SCN_RANGE, "$.trace.rate_scale"},
      {"\"rate_scale\": \"2\"", LSIM_E_SCN_TYPE, "$.trace.rate_scale"},
      {"\"rate_scale\": 2000000", LSIM_E_SCN_RANGE, "$.trace.rate_scale"},
      {"\"rate_scale\": 1.0000000000000000001", LSIM_E_SCN_RANGE,
       "$.trace.rate_scale: must have at most 18 significant digits"},
      {"\"window\": 10", LSIM_E_SCN_TYPE, "$.trace.window"},
      {"\"window\": {}", LSIM_E_SCN_MISSING, "$.trace.window"},
      {"\"window\": {\"begin\": 1}", LSIM_E_SCN_UNKNOWN_KEY,
       "$.trace.window.begin"},
      {"\"window\": {\"start_s\": 10, \"end_s\": 5}", LSIM_E_SCN_RANGE,
       "$.trace.window.end_s"},
      {"\"window\": {\"start_s\": 1e-10}", LSIM_E_SCN_RANGE,
       "$.trace.window.start_s: must be a whole number of nanoseconds"},
      {"\"window\": {\"start_s\": -1}", LSIM_E_SCN_RANGE,
       "$.trace.window.start_s"},
      {"\"remap\": {}", LSIM_E_SCN_MISSING, "$.trace.remap"},
      {"\"remap\": {\"models\": {}}", LSIM_E_SCN_UNKNOWN_KEY,
       "$.trace.remap.models"},
      {"\"remap\": {\"tenants\": {}}", LSIM_E_SCN_MISSING,
       "$.trace.remap.tenants.map"},
      {"\"remap\": {\"tenants\": {\"map\": {}}}", LSIM_E_SCN_EMPTY,
       "$.trace.remap.tenants.map"},
      {"\"remap\": {\"tenants\": {\"map\": {\"a b\": 1}}}", LSIM_E_SCN_RANGE,
       "$.trace.remap.tenants.map.a b"},
      {"\"remap\": {\"tenants\": {\"map\": {\"gold\": \"12\"}}}",
       LSIM_E_SCN_RANGE, "$.trace.remap.tenants.map.gold"},
      {"\"remap\": {\"tenants\": {\"map\": {\"gold\": -1}}}", LSIM_E_SCN_RANGE,
       "$.trace.remap.tenants.map.gold"},
      {"\"remap\": {\"tenants\": {\"map\": {\"gold\": true}}}",
       LSIM_E_SCN_TYPE, "$.trace.remap.tenants.map.gold"},
      {"\"remap\": {\"tenants\": {\"map\": {\"gold\": 1, \"gold\": 0}}}",
       LSIM_E_SCN_DUP, "$.trace.remap.tenants.map.gold"},
      {"\"remap\": {\"tenants\": {\"modulo\": 2}}", LSIM_E_SCN_UNKNOWN_KEY,
       "$.trace.remap.tenants.modulo"},
      {"\"remap\": {\"adapters\": {}}", LSIM_E_SCN_MISSING,
       "$.trace.remap.adapters"},
      {"\"remap\": {\"adapters\": {\"map\": {\"a\": 1}, \"modulo\": 4}}",
       LSIM_E_SCN_CONFLICT, "$.trace.remap.adapters"},
      {"\"remap\": {\"adapters\": {\"modulo\": 0}}", LSIM_E_SCN_RANGE,
       "$.trace.remap.adapters.modulo"},
      {"\"remap\": {\"adapters\": {\"offset\": 1.5}}", LSIM_E_SCN_NOT_INTEGER,
       "$.trace.remap.adapters.offset"},
  };
  for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
    char trace[512];
    snprintf(trace, sizeof trace, "{\"file\": \"native.csv\", %s}", c[i].keys);
    const char *text = scenario_text(trace);
    static lsim_scenario sc;
    lsim_errbuf eb = LSIM_ERRBUF_INIT;
    lsim_err rc = lsim_scenario_parse(&sc, text, strlen(text), "s.json", FIX,
                                      &eb);
    cr_expect_eq(rc, c[i].code, "case %zu (%s): %s (%d) %s", i, c[i].keys,
                 lsim_err_name(rc), rc, eb.msg);
    cr_expect_not_null(strstr(eb.msg, c[i].path), "case %zu: %s", i, eb.msg);
  }
}

/* ---- a replay and the command over a window -------------------------------------- */

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

Test(workload, replay_of_a_scaled_azure_window) {
  need_azure();
  recs raw;
  read_file(LSIM_TRACE_AZURE, AZ_CONV, NULL, 0, &raw, NULL);
  int64_t n = 0, last = 0;
  for (int64_t i = 0; i < raw.n; i++)
    if (raw.arr[i] >= 600 * S && raw.arr[i] < 660 * S) {
      n++;
      last = (raw.arr[i] - 600 * S) / 4;
    }
  recs_release(&raw);
  cr_assert_gt(n, 100);
  /* bench-azure-1k (its catalog, tenants and assignment) on a minute of
  ** the trace at four times its rate */
  const char *text = scenario_from(
      LSIM_SOURCE_DIR "/scenarios/bench-azure-1k.json",
      "{\"file\": \"" AZ_CONV "\", \"format\": \"azure\", \"rate_scale\": 4, "
      "\"window\": {\"start_s\": 600, \"end_s\": 660}, \"assign\": "
      "{\"tenants\": \"weights\", \"adapters\": \"zipf\", \"alpha\": 1.1}}");
  static lsim_scenario sc;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_scenario_parse(&sc, text, strlen(text), "s.json",
                                   LSIM_SOURCE_DIR "/scenarios", &eb),
               0, "%s", eb.msg);
  char db[512];
  snprintf(db, sizeof db, "%s/w.db", tmpdir);
  lsim_summary sum;
  lsim_replay_opts o = {.db_path = db, .command_line = "test"};
  cr_assert_eq(lsim_replay_run(&sc, &o, &sum, &eb), 0, "%s", eb.msg);
  cr_expect_eq(q1(db, "select count(*) from requests"), n);
  /* ns_per_tick 1000 by default: the last arrival tick is its us */
  cr_expect_eq(q1(db, "select max(arrival_tick) from requests"), last / 1000);
}

Test(workload, trace_convert_takes_the_controls_as_flags) {
  need_azure();
  recs raw;
  read_file(LSIM_TRACE_AZURE, AZ_CONV, NULL, 0, &raw, NULL);
  char out[512], cmd[1400];
  snprintf(out, sizeof out, "%s/w.csv", tmpdir);
  snprintf(cmd, sizeof cmd,
           "%s trace convert --format azure '%s' --start 600 --duration 60 "
           "--rate-scale 2.5 -o '%s' 2>/dev/null",
           LSIM_BIN, AZ_CONV, out);
  cr_assert_eq(system(cmd), 0, "%s", cmd);
  FILE *f = fopen(out, "r");
  cr_assert_not_null(f);
  char line[512];
  int64_t i = 0, j = 0;
  int workload_line = 0;
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '#') {
      workload_line |= strstr(line, "# workload: rate_scale 5/2; window "
                                    "[600 s, 660 s)") != NULL;
      continue;
    }
    if (strncmp(line, "arrival_ns", 10) == 0)
      continue;
    while (i < raw.n && raw.arr[i] < 600 * S)
      i++;
    cr_assert_lt(i, raw.n);
    cr_assert_lt(raw.arr[i], 660 * S);
    long long a = strtoll(line, NULL, 10);
    cr_assert_eq(a, scaled(raw.arr[i] - 600 * S, 5, 2), "row %lld",
                 (long long)j);
    i++;
    j++;
  }
  fclose(f);
  cr_expect(workload_line, "the comment names the controls");
  cr_expect(i == raw.n || raw.arr[i] >= 660 * S, "rows missing at %lld",
            (long long)i);
  cr_expect_gt(j, 100);
  recs_release(&raw);
  snprintf(cmd, sizeof cmd,
           "%s trace convert --format azure '%s' --rate-scale 1/2 -o - "
           ">/dev/null 2>&1",
           LSIM_BIN, AZ_CONV);
  cr_expect_eq(WEXITSTATUS(system(cmd)), 2);
}
