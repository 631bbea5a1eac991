/*
** test_scenario.c: scenario loading and validation (sim/scenario.c).
**
** The malformed cases start from scenarios/quickstart.json and make one or
** two edits to its text (set a member's value, delete a member, replace or
** append raw text), finding members by key rather than by value so that the
** cases survive changes to quickstart's numbers; each must fail with an
** exact error code and a message that names the JSON path of the defect.  File-level cases (bad
** JSON, missing trace file, unreadable or oversized scenario) use fixtures
** under tests/fixtures/scenarios/ or files written into a mkdtemp directory.
*/
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <openssl/evp.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim/scenario.h"

/* the quickstart as it was before it took the measured profile: the
** hand-set linear $.cost and explicit targets, which these cases edit */
#define QUICKSTART LSIM_SOURCE_DIR "/tests/fixtures/quickstart-linear.json"
#define FIXTURES LSIM_TEST_DIR "/fixtures/scenarios"

/* ---- helpers ------------------------------------------------------------- */

static char *read_all(const char *path, size_t *len) {
  FILE *fp = fopen(path, "rb");
  cr_assert_not_null(fp, "cannot open %s", path);
  cr_assert_eq(fseek(fp, 0, SEEK_END), 0);
  long n = ftell(fp);
  cr_assert_geq(n, 0);
  rewind(fp);
  char *buf = malloc((size_t)n + 1);
  cr_assert_not_null(buf);
  cr_assert_eq(fread(buf, 1, (size_t)n, fp), (size_t)n);
  buf[n] = '\0';
  fclose(fp);
  if (len)
    *len = (size_t)n;
  return buf;
}

static void write_all(const char *path, const char *text, size_t len) {
  FILE *fp = fopen(path, "wb");
  cr_assert_not_null(fp, "cannot create %s", path);
  cr_assert_eq(fwrite(text, 1, len, fp), len);
  cr_assert_eq(fclose(fp), 0);
}

/* text[0..b) + repl + text[e..], in a new buffer. */
static char *splice(const char *text, const char *b, const char *e,
                    const char *repl) {
  size_t head = (size_t)(b - text), rl = strlen(repl), tail = strlen(e);
  char *out = malloc(head + rl + tail + 1);
  cr_assert_not_null(out);
  memcpy(out, text, head);
  memcpy(out + head, repl, rl);
  memcpy(out + head + rl, e, tail + 1);
  return out;
}

/* End of the JSON value starting at p (strings, nesting and scalars). */
static const char *value_end(const char *p) {
  if (*p == '{' || *p == '[') {
    int depth = 0;
    for (; *p; p++) {
      if (*p == '"') {
        for (p++; *p && *p != '"'; p++)
          if (*p == '\\' && p[1])
            p++;
      } else if (*p == '{' || *p == '[') {
        depth++;
      } else if ((*p == '}' || *p == ']') && --depth == 0) {
        return p + 1;
      }
    }
    return p;
  }
  if (*p == '"') {
    for (p++; *p && *p != '"'; p++)
      if (*p == '\\' && p[1])
        p++;
    return *p ? p + 1 : p;
  }
  while (*p && !strchr(",}] \t\r\n", *p))
    p++;
  return p;
}

/*
** Find the member named by `where`: quoted keys separated by '>', each
** searched for after the previous one ("\"adapters\">\"count\"").  Sets
** the start of the last key and the extent of its value; 0 if not found.
*/
static int locate(const char *text, const char *where, const char **key,
                  const char **vb, const char **ve) {
  const char *at = text;
  while (*where) {
    const char *gt = strchr(where, '>');
    size_t n = gt ? (size_t)(gt - where) : strlen(where);
    char tok[64];
    if (n == 0 || n >= sizeof tok)
      return 0;
    memcpy(tok, where, n);
    tok[n] = '\0';
    if (!(at = strstr(at, tok)))
      return 0;
    *key = at;
    at += n;
    where += gt ? n + 1 : n;
  }
  while (*at == ' ' || *at == '\n')
    at++;
  if (*at++ != ':')
    return 0;
  while (*at == ' ' || *at == '\n')
    at++;
  *vb = at;
  *ve = value_end(at);
  return 1;
}

/*
** One edit of a scenario text:
**   's'  set the value of member `where` to `repl`
**   'd'  delete member `where` with its comma
**   'r'  replace the first occurrence of the text `where` by `repl`
**   'a'  append `repl` to the text
** Returns a new buffer, or NULL when `where` is not found.
*/
typedef struct medit {
  char op; /* 0: no edit */
  char where[48];
  char repl[160];
} medit;

static char *apply_edit(const char *text, const medit *e) {
  const char *key, *vb, *ve;
  switch (e->op) {
  case 's':
    return locate(text, e->where, &key, &vb, &ve)
               ? splice(text, vb, ve, e->repl)
               : NULL;
  case 'd':
    if (!locate(text, e->where, &key, &vb, &ve))
      return NULL;
    while (*ve == ' ' || *ve == '\n')
      ve++;
    if (*ve == ',') {
      ve++;
    } else { /* last member: take the comma before it, if any */
      const char *b = key;
      while (b > text && (b[-1] == ' ' || b[-1] == '\n'))
        b--;
      if (b > text && b[-1] == ',')
        key = b - 1;
    }
    return splice(text, key, ve, "");
  case 'r':
    key = strstr(text, e->where);
    return key ? splice(text, key, key + strlen(e->where), e->repl) : NULL;
  case 'a':
    return splice(text, text + strlen(text), text + strlen(text), e->repl);
  default:
    return splice(text, text, text, "");
  }
}

/* quickstart.json with the given edits applied, or NULL (and a failed
** expectation) when an edit finds nothing to work on. */
static char *quickstart_with(const medit *edits, int n) {
  char *text = read_all(QUICKSTART, NULL);
  for (int i = 0; i < n && text; i++) {
    char *next = apply_edit(text, &edits[i]);
    cr_expect_not_null(next, "edit %c '%s' finds nothing in quickstart.json",
                       edits[i].op, edits[i].where);
    free(text);
    text = next;
  }
  return text;
}

static lsim_err parse_text(lsim_scenario *sc, const char *text,
                           lsim_errbuf *eb) {
  return lsim_scenario_parse(sc, text, strlen(text), "quickstart.json",
                             LSIM_SOURCE_DIR "/scenarios", eb);
}

static void expect_fail(lsim_err got, const lsim_errbuf *eb, lsim_err code,
                        const char *path, const char *label) {
  cr_expect_eq(got, code, "%s: expected %s, got %s (%s)", label,
               lsim_err_name(code), lsim_err_name(got), eb->msg);
  cr_expect_eq(eb->code, code, "%s: errbuf code %s", label,
               lsim_err_name(eb->code));
  cr_expect_not_null(strstr(eb->msg, path), "%s: message lacks '%s': %s", label,
                     path, eb->msg);
}

/* A small complete scenario with only the required keys; %s is the value
** of "trace". */
static const char *const k_minimal =
    "{\n"
    "  \"name\": \"mini\",\n"
    "  \"seed\": 7,\n"
    "  \"workers\": { \"count\": 2, \"pool_pages\": 64, \"page_bytes\": "
    "1048576, \"h2d_gbps\": 10, \"max_batch_tokens\": 512, "
    "\"max_batch_requests\": 8 },\n"
    "  \"model\": { \"layers\": 2, \"kv_heads\": 2, \"head_dim\": 64, "
    "\"dtype_bytes\": 2, \"targets\": [ { \"name\": \"q\", \"d_in\": 256, "
    "\"d_out\": 256 } ] },\n"
    "  \"cost\": { \"iter_fixed_ns\": 1, \"prefill_token_ns\": 2, "
    "\"decode_token_ns\": 3, \"segment_ns\": 4, \"rank_row_ps\": 5 },\n"
    "  \"adapters\": { \"count\": 3, \"ranks\": [ { \"rank\": 4, \"weight\": "
    "1 } ] },\n"
    "  \"tenants\": [ { \"name\": \"t0\", \"traffic_weight\": 1 } ],\n"
    "  \"trace\": %s\n"
    "}\n";

static char *minimal_with_trace(const char *trace) {
  size_t n = strlen(k_minimal) + strlen(trace) + 1;
  char *out = malloc(n);
  cr_assert_not_null(out);
  snprintf(out, n, k_minimal, trace);
  return out;
}

/* A fresh mkdtemp directory under /tmp. */
static void make_tmpdir(char dir[64]) {
  snprintf(dir, 64, "/tmp/lsim_scenario_XXXXXX");
  cr_assert_not_null(mkdtemp(dir));
}

/* Remove files (given by full path) and then directories, in order. */
static void remove_all(const char *const *files, const char *const *dirs) {
  for (int i = 0; files[i]; i++)
    cr_expect_eq(unlink(files[i]), 0, "unlink %s", files[i]);
  for (int i = 0; dirs[i]; i++)
    cr_expect_eq(rmdir(dirs[i]), 0, "rmdir %s", dirs[i]);
}

/* ---- a valid scenario ---------------------------------------------------- */

/* The shipped quickstart is the linear one above at the Llama-3-8B shape,
** priced by the committed H100 profile instead of the hand-set $.cost. */
Test(scenario, shipped_quickstart_uses_the_measured_profile) {
  static lsim_scenario lin, sc;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_scenario_load(&lin, QUICKSTART, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_scenario_load(&sc, LSIM_SOURCE_DIR
                                   "/scenarios/quickstart.json", &eb),
               0, "%s", eb.msg);
  cr_expect_str_eq(sc.name, "quickstart");
  cr_assert(sc.cost_prof.on, "the quickstart must be priced by a profile");
  cr_assert(!lin.cost_prof.on);
  cr_expect_str_eq(sc.model.preset, "llama-3-8b");
  cr_assert_eq(sc.ntargets, lin.ntargets);
  for (int i = 0; i < sc.ntargets; i++) {
    cr_expect_str_eq(sc.targets[i].name, lin.targets[i].name);
    cr_expect_eq(sc.targets[i].d_in, lin.targets[i].d_in);
    cr_expect_eq(sc.targets[i].d_out, lin.targets[i].d_out);
  }
  cr_expect_eq(sc.layers, lin.layers);
  cr_expect_eq(sc.kv_heads, lin.kv_heads);
  cr_expect_eq(sc.head_dim, lin.head_dim);
  cr_expect_eq(sc.adapters, lin.adapters);
  cr_expect_eq(sc.pool_pages, lin.pool_pages);
  /* the profile's copy model replaces h2d_gbps and load_fixed_us */
  cr_expect(sc.copy_prof);
  cr_expect_str_eq(sc.gpu, "h100");
}

Test(scenario, quickstart_loads) {
  lsim_scenario sc;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_err err = lsim_scenario_load(&sc, QUICKSTART, &eb);
  cr_assert_eq(err, 0, "load failed: %s", eb.msg);

  cr_expect_str_eq(sc.name, "quickstart-linear");
  cr_expect_str_eq(sc.path, QUICKSTART);
  cr_expect_eq(sc.seed, 42);
  cr_expect_eq(sc.ns_per_tick, 1000);
  cr_expect_str_eq(sc.backend, "model");
  cr_expect_str_eq(sc.scheduler, "fcfs");
  cr_expect_str_eq(sc.evict, "lru");
  cr_expect_str_eq(sc.prefetch, "none");

  cr_expect_eq(sc.workers, 1);
  cr_expect_eq(sc.pool_pages, 768);
  cr_expect_eq(sc.page_bytes, 2097152);
  cr_expect_float_eq(sc.h2d_gbps, 25.0, 1e-12);
  cr_expect_eq(sc.load_fixed_us, 200);
  cr_expect_eq(sc.max_batch_tokens, 4096);
  cr_expect_eq(sc.max_batch_requests, 48);

  cr_expect_eq(sc.layers, 32);
  cr_expect_eq(sc.kv_heads, 8);
  cr_expect_eq(sc.head_dim, 128);
  cr_expect_eq(sc.dtype_bytes, 2);
  cr_assert_eq(sc.ntargets, 4);
  cr_expect_str_eq(sc.targets[0].name, "q_proj");
  cr_expect_eq(sc.targets[0].d_in, 4096);
  cr_expect_eq(sc.targets[0].d_out, 4096);
  cr_expect_str_eq(sc.targets[1].name, "k_proj");
  cr_expect_eq(sc.targets[1].d_out, 1024);
  cr_expect_str_eq(sc.targets[3].name, "o_proj");

  cr_expect_eq(sc.iter_fixed_ns, 4000000);
  cr_expect_eq(sc.prefill_token_ns, 60000);
  cr_expect_eq(sc.decode_token_ns, 120000);
  cr_expect_eq(sc.segment_ns, 15000);
  cr_expect_eq(sc.rank_row_ps, 2000);

  cr_expect_eq(sc.adapters, 40);
  cr_assert_eq(sc.nranks, 3);
  cr_expect_eq(sc.ranks[0].rank, 8);
  cr_expect_eq(sc.ranks[0].weight, 4);
  cr_expect_eq(sc.ranks[1].rank, 16);
  cr_expect_eq(sc.ranks[1].weight, 3);
  cr_expect_eq(sc.ranks[2].rank, 64);
  cr_expect_eq(sc.ranks[2].weight, 1);
  cr_expect_float_eq(sc.zipf_s, 1.1, 1e-12);

  cr_assert_eq(sc.ntenants, 2);
  cr_expect_str_eq(sc.tenants[0].name, "interactive");
  cr_expect_eq(sc.tenants[0].traffic_weight, 3);
  cr_expect_str_eq(sc.tenants[1].name, "batch");
  cr_expect_eq(sc.tenants[1].traffic_weight, 1);

  cr_expect_str_eq(sc.trace_file, "");
  cr_expect_eq(sc.gen_requests, 400);
  cr_expect_float_eq(sc.gen_rate_per_s, 8.0, 1e-12);
  cr_expect_eq(sc.gen_prompt.kind, LSIM_DIST_UNIFORM);
  cr_expect_eq(sc.gen_prompt.min, 64);
  cr_expect_eq(sc.gen_prompt.max, 1024);
  cr_expect_eq(sc.gen_output.kind, LSIM_DIST_EXP);
  cr_expect_float_eq(sc.gen_output.mean, 96.0, 1e-12);
  cr_expect_eq(sc.gen_output.min, 8);
  cr_expect_eq(sc.gen_output.max, 512);

  cr_expect_float_eq(sc.load_failure_rate, 0.02, 1e-12);
  cr_expect_eq(sc.max_load_attempts, 4);
}

Test(scenario, derived_sizes) {
  lsim_scenario sc;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_scenario_load(&sc, QUICKSTART, &eb), 0, "%s", eb.msg);
  /* per layer and rank: q,o 8192 + k,v 5120 = 26624 elements x 2 bytes */
  cr_expect_eq(lsim_scenario_adapter_bytes(&sc, 1), 32 * 26624 * 2);
  cr_expect_eq(lsim_scenario_adapter_bytes(&sc, 64),
               (int64_t)32 * 64 * 26624 * 2);
  cr_expect_eq(lsim_scenario_kv_bytes_per_token(&sc), 2 * 32 * 8 * 128 * 2);
}

Test(scenario, defaults_for_optional_keys) {
  char *text = minimal_with_trace(
      "{ \"generator\": { \"requests\": 5, \"rate_per_s\": 2.5, "
      "\"prompt_tokens\": { \"dist\": \"fixed\", \"value\": 17 }, "
      "\"output_tokens\": { \"dist\": \"uniform\", \"min\": 3, \"max\": 9 } "
      "} }");
  lsim_scenario sc;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_err err = lsim_scenario_parse(&sc, text, strlen(text), "", "", &eb);
  free(text);
  cr_assert_eq(err, 0, "%s", eb.msg);
  cr_expect_eq(sc.ns_per_tick, 1000);
  cr_expect_str_eq(sc.backend, "model");
  cr_expect_str_eq(sc.scheduler, "fcfs");
  cr_expect_str_eq(sc.evict, "lru");
  cr_expect_str_eq(sc.prefetch, "none");
  cr_expect_eq(sc.load_fixed_us, 0);
  cr_expect_float_eq(sc.zipf_s, 0.0, 0.0);
  cr_expect_float_eq(sc.load_failure_rate, 0.0, 0.0);
  cr_expect_eq(sc.max_load_attempts, 3);
  cr_expect_str_eq(sc.path, "");
  cr_expect_eq(sc.gen_prompt.kind, LSIM_DIST_FIXED);
  cr_expect_eq(sc.gen_prompt.min, 17);
  cr_expect_eq(sc.gen_prompt.max, 17);
  cr_expect_eq(sc.gen_output.kind, LSIM_DIST_UNIFORM);
  cr_expect_eq(sc.gen_output.min, 3);
  cr_expect_eq(sc.gen_output.max, 9);
}

Test(scenario, sha256_matches_file_bytes) {
  size_t len = 0;
  char *bytes = read_all(QUICKSTART, &len);
  unsigned char md[32];
  unsigned int mdlen = 0;
  cr_assert_eq(EVP_Digest(bytes, len, md, &mdlen, EVP_sha256(), NULL), 1);
  cr_assert_eq(mdlen, 32u);
  char want[65];
  for (int i = 0; i < 32; i++)
    snprintf(want + 2 * i, 3, "%02x", md[i]);

  lsim_scenario sc;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_scenario_load(&sc, QUICKSTART, &eb), 0, "%s", eb.msg);
  cr_expect_eq(memcmp(sc.sha256, md, 32), 0);
  char hex[65];
  memset(hex, 'x', sizeof hex);
  lsim_scenario_sha_hex(&sc, hex);
  cr_expect_eq(hex[64], '\0');
  cr_expect_str_eq(hex, want);

  /* parse on its own hashes the text it is given */
  lsim_scenario sc2;
  cr_assert_eq(lsim_scenario_parse(&sc2, bytes, len, "q", NULL, &eb), 0, "%s",
               eb.msg);
  cr_expect_eq(memcmp(sc2.sha256, md, 32), 0);
  free(bytes);
}

Test(scenario, trace_file_relative_to_scenario_dir) {
  char dir[64], sub[128], scn[160], csv[160];
  make_tmpdir(dir);
  snprintf(sub, sizeof sub, "%s/nested", dir);
  cr_assert_eq(mkdir(sub, 0700), 0);
  snprintf(scn, sizeof scn, "%s/scn.json", sub);
  snprintf(csv, sizeof csv, "%s/requests.csv", sub);
  const char *rows = "arrival_us,tenant,adapter,prompt_tokens,output_tokens\n"
                     "0,0,0,16,4\n";
  write_all(csv, rows, strlen(rows));
  char *text = minimal_with_trace("{ \"file\": \"requests.csv\" }");
  write_all(scn, text, strlen(text));

  lsim_scenario sc;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_err err = lsim_scenario_load(&sc, scn, &eb);
  cr_expect_eq(err, 0, "%s", eb.msg);
  if (!err) {
    cr_expect_str_eq(sc.trace_file, csv);
    cr_expect_str_eq(sc.path, scn);
    cr_expect_eq(sc.gen_requests, 0);
  }

  /* the same text through parse resolves against the basedir argument */
  err = lsim_scenario_parse(&sc, text, strlen(text), "scn.json", sub, &eb);
  cr_expect_eq(err, 0, "%s", eb.msg);
  if (!err)
    cr_expect_str_eq(sc.trace_file, csv);
  /* ... and not against the working directory */
  err = lsim_scenario_parse(&sc, text, strlen(text), "scn.json", dir, &eb);
  expect_fail(err, &eb, LSIM_E_SCN_TRACE_FILE, "$.trace.file", "wrong dir");

  /* a directory is not a trace file */
  char *text2 = minimal_with_trace("{ \"file\": \"nested\" }");
  err = lsim_scenario_parse(&sc, text2, strlen(text2), "scn.json", dir, &eb);
  expect_fail(err, &eb, LSIM_E_SCN_TRACE_FILE, "$.trace.file", "directory");
  free(text2);

  /* neither file nor generator */
  char *text3 = minimal_with_trace("{ }");
  err = lsim_scenario_parse(&sc, text3, strlen(text3), "scn.json", dir, &eb);
  expect_fail(err, &eb, LSIM_E_SCN_CONFLICT, "$.trace", "neither");
  cr_expect_not_null(strstr(eb.msg, "neither"), "%s", eb.msg);
  free(text3);

  free(text);
  remove_all((const char *const[]){scn, csv, NULL},
             (const char *const[]){sub, dir, NULL});
}

/* ---- file-level failures ------------------------------------------------- */

Test(scenario, missing_file_is_file_missing) {
  lsim_scenario sc;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  const char *path = FIXTURES "/does_not_exist.json";
  expect_fail(lsim_scenario_load(&sc, path, &eb), &eb, LSIM_E_FILE_MISSING,
              path, "missing file");
}

Test(scenario, directory_is_io) {
  lsim_scenario sc;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  expect_fail(lsim_scenario_load(&sc, FIXTURES, &eb), &eb, LSIM_E_IO, FIXTURES,
              "directory");
}

Test(scenario, bad_json_fixture) {
  lsim_scenario sc;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  expect_fail(lsim_scenario_load(&sc, FIXTURES "/bad_json.json", &eb), &eb,
              LSIM_E_SCN_JSON, "bad_json.json: $: invalid json", "bad json");
  cr_expect_not_null(strstr(eb.msg, "line 4"), "%s", eb.msg);
}

Test(scenario, trailing_text_fixture) {
  lsim_scenario sc;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  expect_fail(lsim_scenario_load(&sc, FIXTURES "/trailing_text.json", &eb), &eb,
              LSIM_E_SCN_JSON, "trailing_text.json: $:", "trailing");
  cr_expect_not_null(strstr(eb.msg, "line 2"), "%s", eb.msg);
}

Test(scenario, missing_trace_fixture) {
  lsim_scenario sc;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  expect_fail(lsim_scenario_load(&sc, FIXTURES "/missing_trace.json", &eb), &eb,
              LSIM_E_SCN_TRACE_FILE,
              "missing_trace.json: $.trace.file:", "missing trace");
  cr_expect_not_null(strstr(eb.msg, "no_such_trace.csv"), "%s", eb.msg);
}

Test(scenario, oversized_file_is_range) {
  char dir[64], path[128];
  make_tmpdir(dir);
  snprintf(path, sizeof path, "%s/huge.json", dir);
  size_t n = ((size_t)16 << 20) + 1;
  char *spaces = malloc(n);
  cr_assert_not_null(spaces);
  memset(spaces, ' ', n);
  write_all(path, spaces, n);
  free(spaces);
  lsim_scenario sc;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  expect_fail(lsim_scenario_load(&sc, path, &eb), &eb, LSIM_E_SCN_RANGE,
              "16 MiB", "oversized");
  remove_all((const char *const[]){path, NULL},
             (const char *const[]){dir, NULL});
}

Test(scenario, text_level_failures) {
  lsim_scenario sc;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  expect_fail(lsim_scenario_parse(&sc, "", 0, "e.json", NULL, &eb), &eb,
              LSIM_E_SCN_JSON, "e.json: $: invalid json", "empty");
  expect_fail(lsim_scenario_parse(&sc, "[1, 2]", 6, "a.json", NULL, &eb), &eb,
              LSIM_E_SCN_TYPE, "a.json: $: must be an object", "array");
  expect_fail(lsim_scenario_parse(&sc, "{}\0{}", 5, "z.json", NULL, &eb), &eb,
              LSIM_E_SCN_JSON, "nul byte", "nul");
  /* a prefix of a valid text is cut off mid-value */
  expect_fail(
      lsim_scenario_parse(&sc, "{\"name\": \"x\"}", 8, "p.json", NULL, &eb),
      &eb, LSIM_E_SCN_JSON, "p.json: $: invalid json", "prefix");
}

Test(scenario, too_many_rank_choices) {
  char *base = minimal_with_trace("{ \"file\": \"x.csv\" }");
  char many[1024] = "[";
  for (int r = 1; r <= LSIM_MAX_RANK_CHOICES + 1; r++) {
    char one[48];
    snprintf(one, sizeof one, "%s{ \"rank\": %d, \"weight\": 1 }",
             r > 1 ? ", " : "", r);
    strcat(many, one);
  }
  strcat(many, "]");
  const char *key, *vb, *ve;
  cr_assert(locate(base, "\"ranks\"", &key, &vb, &ve));
  char *text = splice(base, vb, ve, many);
  lsim_scenario sc;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  expect_fail(lsim_scenario_parse(&sc, text, strlen(text), "m.json", NULL, &eb),
              &eb, LSIM_E_SCN_RANGE, "m.json: $.adapters.ranks: must have",
              "17 ranks");
  free(text);
  free(base);
}

Test(scenario, exact_message_format) {
  const medit e = {'s', "\"pool_pages\"", "0"};
  char *text = quickstart_with(&e, 1);
  cr_assert_not_null(text);
  lsim_scenario sc;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_expect_eq(parse_text(&sc, text, &eb), LSIM_E_SCN_RANGE);
  cr_expect_str_eq(eb.msg, "quickstart.json: $.workers.pool_pages: must be "
                           "an integer in [1, 1073741824] (got 0)");
  free(text);
}

/* ---- malformed variants of quickstart.json ------------------------------ */

/* Criterion hands each case to a fresh process of the (position
** independent) test binary, so a case holds its strings, not pointers. */
typedef struct mcase {
  char label[48];
  medit edit[2]; /* applied in order; op 0 = none */
  lsim_err code;
  char path[48]; /* must appear in the message */
} mcase;

#define LONG64                                                                 \
  "\"abcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcd\""
#define TWO_TENANTS                                                            \
  "[ { \"name\": \"a\", \"traffic_weight\": 1 }, "                             \
  "{ \"name\": \"b\", \"traffic_weight\": 1 } ]"
#define PROMPT "\"prompt_tokens\""
#define OUTPUT "\"output_tokens\""
#define GEN "$.trace.generator."

ParameterizedTestParameters(scenario, malformed) {
  static mcase cases[] = {
      /* JSON text */
      {"syntax: double comma",
       {{'s', "\"seed\"", "1,"}},
       LSIM_E_SCN_JSON,
       "line 3"},
      {"syntax: second document",
       {{'a', "", " {}"}},
       LSIM_E_SCN_JSON,
       "$: invalid json"},
      {"syntax: bare word",
       {{'s', "\"zipf_s\"", "one"}},
       LSIM_E_SCN_JSON,
       "$: invalid json"},
      /* unknown keys */
      {"unknown key in workers",
       {{'r', "\"pool_pages\"", "\"poolpages\""}},
       LSIM_E_SCN_UNKNOWN_KEY,
       "$.workers.poolpages"},
      {"unknown top-level key",
       {{'r', "\"seed\"", "\"sed\": 1, \"seed\""}},
       LSIM_E_SCN_UNKNOWN_KEY,
       "$.sed"},
      {"keys are case-sensitive",
       {{'r', "\"layers\"", "\"Layers\""}},
       LSIM_E_SCN_UNKNOWN_KEY,
       "$.model.Layers"},
      {"key foreign to the dist",
       {{'s', PROMPT, "{ \"dist\": \"fixed\", \"value\": 5, \"max\": 9 }"}},
       LSIM_E_SCN_UNKNOWN_KEY,
       GEN "prompt_tokens.max"},
      {"unknown key in a target",
       {{'s', "\"targets\"",
         "[ { \"name\": \"q\", \"d_in\": 8, \"d_out\": 8, \"bias\": 1 } ]"}},
       LSIM_E_SCN_UNKNOWN_KEY,
       "$.model.targets[0].bias"},
      /* duplicates */
      {"duplicate key",
       {{'r', "\"seed\"", "\"seed\": 43, \"seed\""}},
       LSIM_E_SCN_DUP,
       "$.seed"},
      {"duplicate nested key",
       {{'r', "\"h2d_gbps\"", "\"h2d_gbps\": 26, \"h2d_gbps\""}},
       LSIM_E_SCN_DUP,
       "$.workers.h2d_gbps"},
      {"duplicate target name",
       {{'s', "\"targets\"",
         "[ { \"name\": \"q\", \"d_in\": 8, \"d_out\": 8 }, "
         "{ \"name\": \"q\", \"d_in\": 4, \"d_out\": 4 } ]"}},
       LSIM_E_SCN_DUP,
       "$.model.targets[1].name"},
      {"duplicate rank",
       {{'s', "\"ranks\"",
         "[ { \"rank\": 8, \"weight\": 1 }, { \"rank\": 8, \"weight\": 2 } ]"}},
       LSIM_E_SCN_DUP,
       "$.adapters.ranks[1].rank"},
      {"duplicate tenant name",
       {{'s', "\"tenants\"",
         "[ { \"name\": \"a\", \"traffic_weight\": 1 }, "
         "{ \"name\": \"a\", \"traffic_weight\": 2 } ]"}},
       LSIM_E_SCN_DUP,
       "$.tenants[1].name"},
      /* types */
      {"string for integer",
       {{'s', "\"workers\">\"count\"", "\"1\""}},
       LSIM_E_SCN_TYPE,
       "$.workers.count"},
      {"null for integer",
       {{'s', "\"ns_per_tick\"", "null"}},
       LSIM_E_SCN_TYPE,
       "$.ns_per_tick"},
      {"boolean for number",
       {{'s', "\"zipf_s\"", "true"}},
       LSIM_E_SCN_TYPE,
       "$.adapters.zipf_s"},
      {"array for object",
       {{'s', "\"policies\"", "[ \"fcfs\" ]"}},
       LSIM_E_SCN_TYPE,
       "$.policies"},
      {"string for object",
       {{'s', "\"workers\"", "\"big\""}},
       LSIM_E_SCN_TYPE,
       "$.workers"},
      {"object for array",
       {{'s', "\"tenants\"", "{ }"}},
       LSIM_E_SCN_TYPE,
       "$.tenants"},
      {"number for array element",
       {{'s', "\"targets\"", "[ 7 ]"}},
       LSIM_E_SCN_TYPE,
       "$.model.targets[0]"},
      {"number for name", {{'s', "\"name\"", "5"}}, LSIM_E_SCN_TYPE, "$.name"},
      {"number for policy",
       {{'s', "\"evict\"", "1"}},
       LSIM_E_SCN_TYPE,
       "$.policies.evict"},
      /* integers */
      {"fraction for integer",
       {{'s', "\"layers\"", "32.5"}},
       LSIM_E_SCN_NOT_INTEGER,
       "$.model.layers"},
      {"integer beyond 2^53",
       {{'s', "\"seed\"", "1e300"}},
       LSIM_E_SCN_NOT_INTEGER,
       "$.seed"},
      {"just beyond 2^53",
       {{'s', "\"seed\"", "9007199254740994"}},
       LSIM_E_SCN_NOT_INTEGER,
       "$.seed"},
      {"fraction in array element",
       {{'s', "\"weight\"", "4.25"}},
       LSIM_E_SCN_NOT_INTEGER,
       "$.adapters.ranks[0].weight"},
      /* ranges */
      {"zero workers",
       {{'s', "\"workers\">\"count\"", "0"}},
       LSIM_E_SCN_RANGE,
       "$.workers.count"},
      {"negative seed", {{'s', "\"seed\"", "-1"}}, LSIM_E_SCN_RANGE, "$.seed"},
      {"zero bandwidth",
       {{'s', "\"h2d_gbps\"", "0"}},
       LSIM_E_SCN_RANGE,
       "$.workers.h2d_gbps"},
      {"page below 256 bytes",
       {{'s', "\"page_bytes\"", "255"}},
       LSIM_E_SCN_RANGE,
       "$.workers.page_bytes"},
      {"dtype of 3 bytes",
       {{'s', "\"dtype_bytes\"", "3"}},
       LSIM_E_SCN_RANGE,
       "$.model.dtype_bytes"},
      {"failure rate of 1",
       {{'s', "\"load_failure_rate\"", "1"}},
       LSIM_E_SCN_RANGE,
       "$.faults.load_failure_rate"},
      {"bad name characters",
       {{'s', "\"name\"", "\"quick start\""}},
       LSIM_E_SCN_RANGE,
       "$.name"},
      {"empty name", {{'s', "\"name\"", "\"\""}}, LSIM_E_SCN_RANGE, "$.name"},
      {"name too long",
       {{'s', "\"name\"", LONG64}},
       LSIM_E_SCN_RANGE,
       "$.name"},
      {"target name too long",
       {{'s', "\"targets\"",
         "[ { \"name\": " LONG64 ", \"d_in\": 8, \"d_out\": 8 } ]"}},
       LSIM_E_SCN_RANGE,
       "$.model.targets[0].name"},
      {"uniform min above max",
       {{'s', PROMPT, "{ \"dist\": \"uniform\", \"min\": 64, \"max\": 32 }"}},
       LSIM_E_SCN_RANGE,
       GEN "prompt_tokens.max"},
      {"exponential mean above max",
       {{'s', OUTPUT,
         "{ \"dist\": \"exponential\", \"mean\": 600, \"min\": 8, "
         "\"max\": 512 }"}},
       LSIM_E_SCN_RANGE,
       GEN "output_tokens.mean"},
      {"tenant weight too big",
       {{'s', "\"tenants\"",
         "[ { \"name\": \"a\", \"traffic_weight\": 1000000001 } ]"}},
       LSIM_E_SCN_RANGE,
       "$.tenants[0].traffic_weight"},
      /* missing keys */
      {"missing seed", {{'d', "\"seed\"", ""}}, LSIM_E_SCN_MISSING, "$.seed"},
      {"missing head_dim",
       {{'d', "\"head_dim\"", ""}},
       LSIM_E_SCN_MISSING,
       "$.model.head_dim"},
      {"missing cost section",
       {{'d', "\"cost\"", ""}},
       LSIM_E_SCN_MISSING,
       "$.cost"},
      {"missing last key of workers",
       {{'d', "\"max_batch_requests\"", ""}},
       LSIM_E_SCN_MISSING,
       "$.workers.max_batch_requests"},
      {"missing dist",
       {{'s', PROMPT, "{ \"min\": 1, \"max\": 2 }"}},
       LSIM_E_SCN_MISSING,
       GEN "prompt_tokens.dist"},
      {"fixed without value",
       {{'s', PROMPT, "{ \"dist\": \"fixed\" }"}},
       LSIM_E_SCN_MISSING,
       GEN "prompt_tokens.value"},
      {"missing tenant name",
       {{'s', "\"tenants\"", "[ { \"traffic_weight\": 1 } ]"}},
       LSIM_E_SCN_MISSING,
       "$.tenants[0].name"},
      /* registries */
      {"unknown eviction policy",
       {{'s', "\"evict\"", "\"mru\""}},
       LSIM_E_SCN_POLICY,
       "$.policies.evict"},
      {"unknown scheduler",
       {{'s', "\"scheduler\"", "\"edf\""}},
       LSIM_E_SCN_POLICY,
       "$.policies.scheduler"},
      {"unknown prefetch policy",
       {{'s', "\"prefetch\"", "\"\""}},
       LSIM_E_SCN_POLICY,
       "$.policies.prefetch"},
      {"unknown placement policy",
       {{'r', "\"prefetch\": \"none\"",
         "\"prefetch\": \"none\", \"placement\": \"random\""}},
       LSIM_E_SCN_POLICY,
       "$.policies.placement"},
      /* $.fairness: one malformed case per key */
      {"fairness not an object",
       {{'r', "\"policies\":", "\"fairness\": 3, \"policies\":"}},
       LSIM_E_SCN_TYPE,
       "$.fairness"},
      {"fairness unknown key",
       {{'r', "\"policies\":", "\"fairness\": { \"aging\": 1 }, \"policies\":"}},
       LSIM_E_SCN_UNKNOWN_KEY,
       "$.fairness.aging"},
      {"fairness w_in negative",
       {{'r', "\"policies\":", "\"fairness\": { \"w_in\": -1 }, \"policies\":"}},
       LSIM_E_SCN_RANGE,
       "$.fairness.w_in"},
      {"fairness w_out not an integer",
       {{'r', "\"policies\":", "\"fairness\": { \"w_out\": 1.5 }, \"policies\":"}},
       LSIM_E_SCN_NOT_INTEGER,
       "$.fairness.w_out"},
      {"fairness both weights zero",
       {{'r', "\"policies\":", "\"fairness\": { \"w_in\": 0, \"w_out\": 0 }, \"policies\":"}},
       LSIM_E_SCN_CONFLICT,
       "$.fairness.w_out"},
      {"fairness age_ticks zero",
       {{'r', "\"policies\":", "\"fairness\": { \"age_ticks\": 0 }, \"policies\":"}},
       LSIM_E_SCN_RANGE,
       "$.fairness.age_ticks"},
      {"fairness cluster_window zero",
       {{'r', "\"policies\":", "\"fairness\": { \"cluster_window\": 0 }, \"policies\":"}},
       LSIM_E_SCN_RANGE,
       "$.fairness.cluster_window"},
      {"fairness starvation_ticks a string",
       {{'r', "\"policies\":", "\"fairness\": { \"starvation_ticks\": \"4\" }, \"policies\":"}},
       LSIM_E_SCN_TYPE,
       "$.fairness.starvation_ticks"},
      {"fairness abort_ticks negative",
       {{'r', "\"policies\":", "\"fairness\": { \"abort_ticks\": -5 }, \"policies\":"}},
       LSIM_E_SCN_RANGE,
       "$.fairness.abort_ticks"},
      {"fairness slo_ttft_ms negative",
       {{'r', "\"policies\":", "\"fairness\": { \"slo_ttft_ms\": -1 }, \"policies\":"}},
       LSIM_E_SCN_RANGE,
       "$.fairness.slo_ttft_ms"},
      {"fairness slo_tbt_ms not a number",
       {{'r', "\"policies\":", "\"fairness\": { \"slo_tbt_ms\": true }, \"policies\":"}},
       LSIM_E_SCN_TYPE,
       "$.fairness.slo_tbt_ms"},
      {"unknown backend",
       {{'s', "\"backend\"", "\"tpu\""}},
       LSIM_E_SCN_BACKEND,
       "$.backend"},
      /* empty arrays */
      {"no targets",
       {{'s', "\"targets\"", "[]"}},
       LSIM_E_SCN_EMPTY,
       "$.model.targets"},
      {"no rank choices",
       {{'s', "\"ranks\"", "[]"}},
       LSIM_E_SCN_EMPTY,
       "$.adapters.ranks"},
      {"no tenants",
       {{'s', "\"tenants\"", "[ ]"}},
       LSIM_E_SCN_EMPTY,
       "$.tenants"},
      /* conflicts */
      {"fewer adapters than tenants",
       {{'s', "\"tenants\"", TWO_TENANTS},
        {'s', "\"adapters\">\"count\"", "1"}},
       LSIM_E_SCN_CONFLICT,
       "$.adapters.count"},
      {"trace with file and generator",
       {{'s', "\"trace\"", "{ \"file\": \"x.csv\", \"generator\": { } }"}},
       LSIM_E_SCN_CONFLICT,
       "$.trace"},
      {"trace with neither",
       {{'d', "\"generator\"", ""}},
       LSIM_E_SCN_CONFLICT,
       "$.trace"},
      /* trace file */
      {"trace file absent",
       {{'s', "\"trace\"", "{ \"file\": \"no_such_trace.csv\" }"}},
       LSIM_E_SCN_TRACE_FILE,
       "$.trace.file"},
      {"trace file empty",
       {{'s', "\"trace\"", "{ \"file\": \"\" }"}},
       LSIM_E_SCN_TRACE_FILE,
       "$.trace.file"},
      {"trace file is a directory",
       {{'s', "\"trace\"", "{ \"file\": \".\" }"}},
       LSIM_E_SCN_TRACE_FILE,
       "$.trace.file"},
      /* distributions */
      {"unknown distribution",
       {{'s', PROMPT ">\"dist\"", "\"normal\""}},
       LSIM_E_SCN_DIST,
       GEN "prompt_tokens.dist"},
      {"distribution names are exact",
       {{'s', OUTPUT ">\"dist\"", "\"exp\""}},
       LSIM_E_SCN_DIST,
       GEN "output_tokens.dist"},
      /* capacity: a quickstart rank-64 adapter is 52 pages of 2 MiB */
      {"pool too small for rank 64",
       {{'s', "\"pool_pages\"", "40"},
        {'s', "\"ranks\"",
         "[ { \"rank\": 8, \"weight\": 1 }, { \"rank\": 64, \"weight\": 1 } "
         "]"}},
       LSIM_E_SCN_CAPACITY,
       "$.adapters.ranks[1].rank"},
      {"pages too small for any rank",
       {{'s', "\"page_bytes\"", "256"}},
       LSIM_E_SCN_CAPACITY,
       "$.adapters.ranks[0].rank"},
      {"skip_bad_rows is 0 or 1",
       {{'r', "\"generator\": {", "\"skip_bad_rows\": 2, \"generator\": {"}},
       LSIM_E_SCN_RANGE,
       "$.trace.skip_bad_rows"},
      /* issue 4 keys: $.workers and $.faults (one case per key) */
      {"negative guard pages",
       {{'r', "\"max_batch_requests\"", "\"guard_pages\": -1, \"max_batch_requests\""}},
       LSIM_E_SCN_RANGE,
       "$.workers.guard_pages"},
      {"unknown adapter layout",
       {{'r', "\"max_batch_requests\"",
         "\"adapter_layout\": \"paged\", \"max_batch_requests\""}},
       LSIM_E_SCN_RANGE,
       "$.workers.adapter_layout"},
      {"unknown kv reservation mode",
       {{'r', "\"max_batch_requests\"",
         "\"kv_reserve\": \"lazy\", \"max_batch_requests\""}},
       LSIM_E_SCN_RANGE,
       "$.workers.kv_reserve"},
      {"kv reservation mode not a string",
       {{'r', "\"max_batch_requests\"",
         "\"kv_reserve\": 1, \"max_batch_requests\""}},
       LSIM_E_SCN_TYPE,
       "$.workers.kv_reserve"},
      {"copy fail ticks decreasing",
       {{'r', "\"max_load_attempts\"",
         "\"copy_fail_ticks\": [ 5, 3 ], \"max_load_attempts\""}},
       LSIM_E_SCN_RANGE,
       "$.faults.copy_fail_ticks[1]"},
      {"digest failure rate above 1",
       {{'r', "\"max_load_attempts\"",
         "\"digest_failure_rate\": 1.5, \"max_load_attempts\""}},
       LSIM_E_SCN_RANGE,
       "$.faults.digest_failure_rate"},
      {"empty digest fail ticks",
       {{'r', "\"max_load_attempts\"",
         "\"digest_fail_ticks\": [ ], \"max_load_attempts\""}},
       LSIM_E_SCN_EMPTY,
       "$.faults.digest_fail_ticks"},
      {"h2d slowdown below 1",
       {{'r', "\"max_load_attempts\"",
         "\"h2d_slowdown\": 0.5, \"max_load_attempts\""}},
       LSIM_E_SCN_RANGE,
       "$.faults.h2d_slowdown"},
      {"h2d slowdown window negative",
       {{'r', "\"max_load_attempts\"",
         "\"h2d_slowdown_from_tick\": -1, \"max_load_attempts\""}},
       LSIM_E_SCN_RANGE,
       "$.faults.h2d_slowdown_from_tick"},
      {"h2d slowdown window reversed",
       {{'r', "\"max_load_attempts\"",
         "\"h2d_slowdown_from_tick\": 100, \"h2d_slowdown_until_tick\": 50, "
         "\"max_load_attempts\""}},
       LSIM_E_SCN_CONFLICT,
       "$.faults.h2d_slowdown_until_tick"},
      {"cancellation rate a string",
       {{'r', "\"max_load_attempts\"",
         "\"cancel_during_load_rate\": \"often\", \"max_load_attempts\""}},
       LSIM_E_SCN_TYPE,
       "$.faults.cancel_during_load_rate"},
      /* $.hotswaps */
      {"hotswaps not an array",
       {{'r', "\"faults\"", "\"hotswaps\": { }, \"faults\""}},
       LSIM_E_SCN_TYPE,
       "$.hotswaps"},
      {"hotswaps empty",
       {{'r', "\"faults\"", "\"hotswaps\": [ ], \"faults\""}},
       LSIM_E_SCN_EMPTY,
       "$.hotswaps"},
      {"hotswap not an object",
       {{'r', "\"faults\"", "\"hotswaps\": [ 3 ], \"faults\""}},
       LSIM_E_SCN_TYPE,
       "$.hotswaps[0]"},
      {"hotswap unknown key",
       {{'r', "\"faults\"",
         "\"hotswaps\": [ { \"at_s\": 1, \"adapter\": 0, \"mode\": \"shadow\","
         " \"when\": 2 } ], \"faults\""}},
       LSIM_E_SCN_UNKNOWN_KEY,
       "$.hotswaps[0].when"},
      {"hotswap without at_s",
       {{'r', "\"faults\"",
         "\"hotswaps\": [ { \"adapter\": 0, \"mode\": \"shadow\" } ], "
         "\"faults\""}},
       LSIM_E_SCN_MISSING,
       "$.hotswaps[0].at_s"},
      {"hotswap at negative time",
       {{'r', "\"faults\"",
         "\"hotswaps\": [ { \"at_s\": -1, \"adapter\": 0, \"mode\": "
         "\"shadow\" } ], \"faults\""}},
       LSIM_E_SCN_RANGE,
       "$.hotswaps[0].at_s"},
      {"hotswap adapter past the catalog",
       {{'r', "\"faults\"",
         "\"hotswaps\": [ { \"at_s\": 1, \"adapter\": 40, \"mode\": "
         "\"shadow\" } ], \"faults\""}},
       LSIM_E_SCN_RANGE,
       "$.hotswaps[0].adapter"},
      {"hotswap without mode",
       {{'r', "\"faults\"",
         "\"hotswaps\": [ { \"at_s\": 1, \"adapter\": 0 } ], \"faults\""}},
       LSIM_E_SCN_MISSING,
       "$.hotswaps[0].mode"},
      {"hotswap unknown mode",
       {{'r', "\"faults\"",
         "\"hotswaps\": [ { \"at_s\": 1, \"adapter\": 0, \"mode\": "
         "\"inplace\" } ], \"faults\""}},
       LSIM_E_SCN_RANGE,
       "$.hotswaps[0].mode"},
      {"hotswap unknown fail",
       {{'r', "\"faults\"",
         "\"hotswaps\": [ { \"at_s\": 1, \"adapter\": 0, \"mode\": "
         "\"shadow\", \"fail\": \"oom\" } ], \"faults\""}},
       LSIM_E_SCN_RANGE,
       "$.hotswaps[0].fail"},
      {"hotswap fail with drain",
       {{'r', "\"faults\"",
         "\"hotswaps\": [ { \"at_s\": 1, \"adapter\": 0, \"mode\": "
         "\"drain_then_overwrite\", \"fail\": \"copy\" } ], \"faults\""}},
       LSIM_E_SCN_CONFLICT,
       "$.hotswaps[0].fail"},
  };
  return cr_make_param_array(mcase, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(mcase *m, scenario, malformed) {
  int n = m->edit[1].op ? 2 : 1;
  char *text = quickstart_with(m->edit, n);
  cr_assert_not_null(text, "%s: edit failed", m->label);
  lsim_scenario sc;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_err err = parse_text(&sc, text, &eb);
  expect_fail(err, &eb, m->code, m->path, m->label);
  cr_expect_eq(strncmp(eb.msg, "quickstart.json: ", 17), 0,
               "%s: message does not start with the file: %s", m->label,
               eb.msg);
  free(text);
}
