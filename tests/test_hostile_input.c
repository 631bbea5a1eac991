/*
** Hostile inputs (issue 18 items 7, 8, 9 and 12): values whose float to
** integer conversion would overflow, FIFOs and devices given as trace
** files, NUL bytes in trace rows, Mooncake's hash-id cap, a degenerate
** ServeGen window, and secrets quoted in errors.  Each test runs the real
** binary or the real trace library on files it writes to a fresh
** temporary directory.
*/
#define LSIM_TMP_PREFIX "/tmp/lsim-hostile-"
#include "cli_harness.h"

#include <math.h>
#include <sqlite3.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "backends/backend.h"
#include "engine/checked.h"
#include "traces/trace.h"

TestSuite(hostile, .init = mk_tmp, .fini = rm_tmp);

#define QUICKSTART LSIM_TEST_DIR "/../scenarios/quickstart.json"

/* tmpdir/name with the bytes text[0..n). */
static void put_bytes(const char *name, const char *text, size_t n,
                      char *path, size_t pn) {
  snprintf(path, pn, "%s/%s", tmpdir, name);
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f);
  cr_assert_eq(fwrite(text, 1, n, f), n);
  cr_assert_eq(fclose(f), 0);
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f, "%s", path);
  static char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = 0;
  fclose(f);
  return buf;
}

/* tmpdir/s.json: the quickstart with `from` replaced by `to`; with a
** non-NULL trace, its trace section replaced by that JSON object. */
static void scenario(const char *from, const char *to, const char *trace) {
  char text[1 << 16], *s = slurp(QUICKSTART);
  char *t = strstr(s, "\"trace\": {"), *e = strstr(s, "\"faults\"");
  cr_assert(t && e);
  if (trace)
    snprintf(text, sizeof text, "%.*s\"trace\": %s,\n  %s", (int)(t - s), s,
             trace, e);
  else
    snprintf(text, sizeof text, "%s", s);
  if (from) {
    char *p = strstr(text, from);
    cr_assert_not_null(p, "'%s' not in the quickstart", from);
    char rest[1 << 16];
    snprintf(rest, sizeof rest, "%s", p + strlen(from));
    snprintf(p, sizeof text - (size_t)(p - text), "%s%s", to, rest);
  }
  char path[512];
  put_bytes("s.json", text, strlen(text), path, sizeof path);
}

/* ---- item 7: float to integer conversions ------------------------------- */

Test(hostile, checked_conversion_refuses_what_a_cast_cannot_hold) {
  int64_t v = 7;
  cr_assert_eq(lsim_d2i64_checked(NAN, INT64_MIN, INT64_MAX, &v), -1);
  cr_assert_eq(lsim_d2i64_checked(INFINITY, INT64_MIN, INT64_MAX, &v), -1);
  cr_assert_eq(lsim_d2i64_checked(-INFINITY, INT64_MIN, INT64_MAX, &v), -1);
  cr_assert_eq(lsim_d2i64_checked(0x1p63, INT64_MIN, INT64_MAX, &v), -1);
  cr_assert_eq(lsim_d2i64_checked(1e300, INT64_MIN, INT64_MAX, &v), -1);
  cr_assert_eq(v, 7, "a refusal leaves *out alone");
  cr_assert_eq(lsim_d2i64_checked(-0x1p63, INT64_MIN, INT64_MAX, &v), 0);
  cr_assert_eq(v, INT64_MIN);
  cr_assert_eq(lsim_d2i64_checked(0x1p62, 0, INT64_MAX, &v), 0);
  cr_assert_eq(v, INT64_C(1) << 62);
  cr_assert_eq(lsim_d2i64_checked(2.9, 0, 10, &v), 0);
  cr_assert_eq(v, 2);
  cr_assert_eq(lsim_d2i64_checked(11.0, 0, 10, &v), -1);
  cr_assert_eq(lsim_d2i64_ceil(2.1, 0, 10, &v), 0);
  cr_assert_eq(v, 3);
  cr_assert_eq(lsim_add_i64_checked(INT64_MAX, 1, &v), -1);
  cr_assert_eq(lsim_add_i64_checked(INT64_MIN, -1, &v), -1);
}

Test(hostile, a_tiny_link_bandwidth_is_no_undefined_cast) {
  lsim_tp_cost c = {2, 1000, 1e-300, 32, 4096, 2, 2, 2};
  lsim_plan p;
  memset(&p, 0, sizeof p);
  p.prefill_rows = 100;
  cr_assert_eq(lsim_cost_collective_ns(&c, &p, NULL), -1);
  c.link_gbps = 100;
  cr_assert_gt(lsim_cost_collective_ns(&c, &p, NULL), 0);
}

Test(hostile, h2d_gbps_cv_and_on_s_too_small_are_range_errors) {
  static const struct {
    const char *from, *to, *where;
  } k[] = {
      {"\"h2d_gbps\": 25.0", "\"h2d_gbps\": 1e-300", "$.workers.h2d_gbps"},
      {"\"rate_per_s\": 8.0,",
       "\"rate_per_s\": 8.0, \"process\": \"gamma\", \"cv\": 1e-300,",
       "$.trace.generator.cv"},
      {"\"rate_per_s\": 8.0,",
       "\"rate_per_s\": 8.0, \"onoff\": {\"on_s\": 1e-300, \"off_s\": 1},",
       "$.trace.generator.onoff.on_s"},
  };
  for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
    scenario(k[i].from, k[i].to, NULL);
    int rc = lorasim("replay s.json --db s.db --no-plots");
    cr_expect_neq(rc, 0, "%s accepted", k[i].to);
    cr_expect_not_null(strstr(out, "E_SCN_RANGE"), "%s", out);
    cr_expect_not_null(strstr(out, k[i].where), "%s", out);
  }
}

Test(hostile, a_generator_past_the_ns_clock_is_a_range_error) {
  /* mean gap 10^9 s: the fifth arrival passes 2^63 ns; the cast gave
  ** INT64_MIN and a misleading E_TRACE_ORDER */
  scenario("\"rate_per_s\": 8.0,", "\"rate_per_s\": 1e-9,", NULL);
  cr_assert_neq(lorasim("replay s.json --db s.db --no-plots"), 0);
  cr_expect_not_null(strstr(out, "E_TRACE_RANGE"), "%s", out);
  cr_expect_null(strstr(out, "E_TRACE_ORDER"), "%s", out);
  cr_expect_not_null(strstr(out, "$.trace.generator.rate_per_s"), "%s", out);
}

/* ---- item 9: nothing blocks or runs forever ------------------------------- */

Test(hostile, a_fifo_trace_file_is_refused_without_blocking, .timeout = 60) {
  char ff[512];
  snprintf(ff, sizeof ff, "%s/ff.csv", tmpdir);
  cr_assert_eq(mkfifo(ff, 0600), 0);
  int rc = lorasim("trace stats ff.csv");
  cr_assert_neq(rc, 0);
  cr_expect_not_null(strstr(out, "E_IO"), "%s", out);
  cr_expect_not_null(strstr(out, "FIFO"), "%s", out);
  /* the same FIFO as a scenario's trace.file */
  scenario(NULL, NULL, "{ \"file\": \"ff.csv\", \"format\": \"csv\" }");
  rc = lorasim("replay s.json --db s.db --no-plots");
  cr_assert_neq(rc, 0);
  cr_expect_not_null(strstr(out, "E_SCN_TRACE_FILE"), "%s", out);
  cr_expect_not_null(strstr(out, "not a regular file"), "%s", out);
  /* and as a ServeGen file */
  rc = lorasim("trace stats --format servegen ff.csv");
  cr_assert_neq(rc, 0);
  cr_expect_not_null(strstr(out, "FIFO"), "%s", out);
}

Test(hostile, dev_zero_is_refused, .timeout = 60) {
  int rc = lorasim("trace stats --format csv /dev/zero");
  cr_assert_neq(rc, 0);
  cr_expect_not_null(strstr(out, "E_IO"), "%s", out);
  cr_expect_not_null(strstr(out, "character device"), "%s", out);
}

Test(hostile, a_servegen_window_with_shape_1e_300_ends, .timeout = 60) {
  char path[512];
  const char *text = "0,10,1,Gamma,1e-300,1\n600,5,1,Gamma,0.5,1\n";
  put_bytes("chunk-3-trace.csv", text, strlen(text), path, sizeof path);
  int rc = lorasim("trace stats --format servegen chunk-3-trace.csv");
  cr_assert_neq(rc, 0);
  cr_expect_not_null(strstr(out, "E_TRACE_RANGE"), "%s", out);
  cr_expect_not_null(strstr(out, "chunk-3-trace.csv:1: shape"), "%s", out);
  /* skipped, the next window still generates */
  rc = lorasim("trace stats --format servegen --skip-bad-rows "
               "chunk-3-trace.csv");
  cr_assert_eq(rc, 0, "%s", out);
  cr_expect_not_null(strstr(out, "skipped rows    1"), "%s", out);
}

/* ---- item 8: NUL bytes and the hash-id cap --------------------------------- */

/* Open tmpdir/name as fmt (raw mode) and read it all: the record count or
** the error code; *skipped gets the skip count. */
static char first_skipped[512];

static int64_t read_all(int fmt, const char *path, int skip, int block_tokens,
                        int64_t *skipped, lsim_errbuf *eb) {
  lsim_servegen_spec sg;
  memset(&sg, 0, sizeof sg);
  sg.rate_scale = 1;
  sg.prompt.kind = sg.output.kind = LSIM_DIST_FIXED;
  sg.prompt.min = sg.prompt.max = sg.output.min = sg.output.max = 8;
  lsim_trace_spec spec;
  memset(&spec, 0, sizeof spec);
  spec.format = fmt;
  spec.path = path;
  spec.skip_bad_rows = skip;
  spec.block_tokens = block_tokens;
  spec.servegen = &sg;
  lsim_trace_ctx ctx = {1, 0, NULL, NULL, 0, 0};
  lsim_trace t;
  lsim_err rc = lsim_trace_open(&t, &spec, &ctx, eb);
  if (rc)
    return rc;
  lsim_trace_rec r;
  int64_t n = 0;
  int k;
  while ((k = lsim_trace_next(&t, &r, eb)) == 1)
    n++;
  lsim_trace_info info;
  lsim_trace_get_info(&t, &info);
  *skipped = info.skipped;
  snprintf(first_skipped, sizeof first_skipped, "%s", info.first_skipped);
  lsim_trace_close(&t);
  return k < 0 ? k : n;
}

Test(hostile, rows_starting_with_nul_are_errors_with_their_line) {
  /* each: header (if any), a good row, the same row starting with a NUL
  ** byte, the good row again, then a bad row.  The NUL row used to vanish
  ** (fgets saw an empty string and read the next line over it), so it was
  ** neither an error nor counted and every later line number was one low */
  static const struct {
    int fmt;
    const char *name;
    const char *text;
    size_t len;
    int nul_line;
  } k[] = {
#define T(x) x, sizeof(x) - 1
      {LSIM_TRACE_CSV, "n.csv",
       T("arrival_us,prompt_tokens,output_tokens\n1,5,4\n\0001,5,4\n1,5,4\n"
         "2,x,4\n"), 3},
      {LSIM_TRACE_JSONL, "n.jsonl",
       T("{\"arrival_us\": 1, \"prompt_tokens\": 5, \"output_tokens\": 4}\n"
         "\0{\"arrival_us\": 1, \"prompt_tokens\": 5, \"output_tokens\": 4}\n"
         "{\"arrival_us\": 1, \"prompt_tokens\": 5, \"output_tokens\": 4}\n"
         "{\"arrival_us\": 2}\n"), 2},
      {LSIM_TRACE_AZURE, "az.csv",
       T("TIMESTAMP,ContextTokens,GeneratedTokens\n"
         "2023-11-16 18:15:46.6805900,374,44\n"
         "\0002023-11-16 18:15:46.6805900,374,44\n"
         "2023-11-16 18:15:46.6805900,374,44\n"
         "2023-11-16 18:15:47,x,44\n"), 3},
      {LSIM_TRACE_MOONCAKE, "mc.jsonl",
       T("{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 4, "
         "\"hash_ids\": [1]}\n"
         "\0{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 4, "
         "\"hash_ids\": [1]}\n"
         "{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 4, "
         "\"hash_ids\": [1]}\n"
         "{\"timestamp\": 1, \"input_length\": 5}\n"), 2},
      {LSIM_TRACE_BURSTGPT, "bg.csv",
       T("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
         "5,ChatGPT,10,5,15,Conversation log\n"
         "\0005,ChatGPT,10,5,15,Conversation log\n"
         "5,ChatGPT,10,5,15,Conversation log\n"
         "6,ChatGPT,x,5,15,Conversation log\n"), 3},
      {LSIM_TRACE_SERVEGEN, "chunk-1-trace.csv",
       T("0,0,0,,0,0\n\000600,0,0,,0,0\n1200,0,0,,0,0\n1800,x,1,Gamma,0.5,1\n"), 2},
#undef T
  };
  for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
    char path[512], want[600];
    put_bytes(k[i].name, k[i].text, k[i].len, path, sizeof path);
    lsim_errbuf eb = LSIM_ERRBUF_INIT;
    int64_t skipped = 0;
    /* strict: the NUL row is the error, at its own line */
    int64_t rc = read_all(k[i].fmt, path, 0, 0, &skipped, &eb);
    snprintf(want, sizeof want, "%s:%d: NUL byte at column 1", path,
             k[i].nul_line);
    cr_expect_eq(rc, LSIM_E_TRACE_PARSE, "%s: %lld %s", k[i].name,
                 (long long)rc, eb.msg);
    cr_expect_not_null(strstr(eb.msg, want), "%s: '%s' lacks '%s'", k[i].name,
                       eb.msg, want);
    /* skipping: both bad rows are counted, the good ones read */
    rc = read_all(k[i].fmt, path, 1, 0, &skipped, &eb);
    cr_expect_eq(rc, k[i].fmt == LSIM_TRACE_SERVEGEN ? 0 : 2, "%s: %lld %s",
                 k[i].name, (long long)rc, eb.msg);
    cr_expect_eq(skipped, 2, "%s: skipped %lld", k[i].name,
                 (long long)skipped);
    cr_expect_not_null(strstr(first_skipped, want), "%s: '%s'", k[i].name,
                       first_skipped);
  }
}

Test(hostile, a_run_of_nuls_hits_the_line_limit) {
  const char *h = "arrival_us,prompt_tokens,output_tokens\n";
  size_t hl = strlen(h), n = hl + 3 * (1 << 20) + 7;
  char *text = calloc(1, n);
  cr_assert_not_null(text);
  memcpy(text, h, hl);
  memcpy(text + n - 7, "\n1,5,4\n", 7);
  char path[512];
  put_bytes("z.csv", text, n, path, sizeof path);
  free(text);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  int64_t skipped = 0;
  cr_expect_eq(read_all(LSIM_TRACE_CSV, path, 0, 0, &skipped, &eb),
               LSIM_E_TRACE_PARSE, "%s", eb.msg);
  cr_expect_not_null(strstr(eb.msg, "z.csv:2: line longer than 1048576"),
                     "%s", eb.msg);
  /* skipped as one row; the row after it is line 3 and is read */
  cr_expect_eq(read_all(LSIM_TRACE_CSV, path, 1, 0, &skipped, &eb), 1, "%s",
               eb.msg);
  cr_expect_eq(skipped, 1);
}

Test(hostile, mooncake_refuses_more_than_65536_hash_ids) {
  /* 70,000 ids of 128-token blocks match input_length 8,960,000 (under the
  ** 10^7 token cap), so only the id cap can refuse them */
  size_t cap = 70000 * 8 + 200, o = 0;
  char *text = malloc(cap);
  cr_assert_not_null(text);
  o += (size_t)snprintf(text, cap, "{\"timestamp\": 0, \"input_length\": "
                                   "8960000, \"output_length\": 4, "
                                   "\"hash_ids\": [");
  for (int i = 0; i < 70000; i++)
    o += (size_t)snprintf(text + o, cap - o, i ? ",%d" : "%d", i);
  o += (size_t)snprintf(text + o, cap - o, "]}\n");
  char path[512];
  put_bytes("big.jsonl", text, o, path, sizeof path);
  free(text);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  int64_t skipped = 0;
  cr_expect_eq(read_all(LSIM_TRACE_MOONCAKE, path, 0, 128, &skipped, &eb),
               LSIM_E_TRACE_RANGE, "%s", eb.msg);
  cr_expect_not_null(strstr(eb.msg, "big.jsonl:1: hash_ids: more than 65536"),
                     "%s", eb.msg);
}

/* ---- item 12: no secrets in errors ------------------------------------------ */

Test(hostile, a_secret_first_line_is_never_echoed) {
  const char *secret =
      "root:$6$SECRETSALT$Zq9hashhashhash:19000:0:99999:7:::\n"
      "daemon:*:19000:0:99999:7:::\n";
  char path[512];
  put_bytes("shadow", secret, strlen(secret), path, sizeof path);
  static const char *const fmts[] = {"csv", "jsonl", "azure", "mooncake",
                                     "burstgpt", "servegen"};
  for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++) {
    char t[200];
    snprintf(t, sizeof t, "{ \"file\": \"shadow\", \"format\": \"%s\" }",
             fmts[i]);
    scenario(NULL, NULL, t);
    remove(strcat(strcpy(path, tmpdir), "/s.db"));
    int rc = lorasim("replay s.json --db s.db --no-plots");
    cr_expect_neq(rc, 0, "%s: %s", fmts[i], out);
    cr_expect_null(strstr(out, "SECRET"), "%s: stderr echoes: %s", fmts[i],
                   out);
    cr_expect_null(strstr(out, "root"), "%s: stderr echoes: %s", fmts[i], out);
    sqlite3 *db;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
      sqlite3_stmt *st;
      if (sqlite3_prepare_v2(db, "SELECT coalesce(error, '') FROM runs", -1,
                             &st, NULL) == SQLITE_OK) {
        while (sqlite3_step(st) == SQLITE_ROW) {
          const char *e = (const char *)sqlite3_column_text(st, 0);
          cr_expect_null(strstr(e, "SECRET"), "%s: runs.error: %s", fmts[i],
                         e);
        }
        sqlite3_finalize(st);
      }
    }
    sqlite3_close(db); /* a failed open still returns a handle */
  }
}

Test(hostile, a_row_excerpt_is_short_and_escaped) {
  /* after a good header a bad value is quoted, but at most 40 bytes of it,
  ** with control and non-ASCII bytes escaped */
  char text[600];
  int n = snprintf(text, sizeof text,
                   "arrival_us,prompt_tokens,output_tokens\n0,\x1b[31m\xc3\xa9");
  for (int i = 0; i < 100; i++)
    text[n++] = 'S';
  n += snprintf(text + n, sizeof text - (size_t)n, ",4\n");
  char path[512];
  put_bytes("x.csv", text, (size_t)n, path, sizeof path);
  cr_assert_neq(lorasim("trace stats x.csv"), 0);
  cr_expect_not_null(strstr(out, "(got '\\x1b[31m\\xc3\\xa9SSSS"), "%s", out);
  cr_expect_null(strstr(out, "\x1b"), "raw escape byte in: %s", out);
  const char *g = strstr(out, "(got '");
  cr_assert_not_null(g);
  const char *e = strstr(g, "...'");
  cr_assert_not_null(e, "no cut: %s", out);
  /* 7 bytes escaped to 4 characters each... at most 40 source bytes */
  cr_expect_leq(e - (g + 6), 40 * 4, "%s", out);
  int S = 0;
  for (const char *p = g; p < e; p++)
    S += *p == 'S';
  cr_expect_leq(S, 40 - 7, "excerpt longer than 40 bytes: %s", out);
}
