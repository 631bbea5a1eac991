/*
** test_json.c: the shared JSON reading layer (sim/json.h) and the
** whole-file reader (sim/slurp.h).
**
** Covered: duplicate keys refused at any depth with the caller's code and
** the JSON path of the second occurrence (small objects and ones large
** enough for the sorted scan); integers read exactly from their text
** (2^53 + 1, 2^63 - 1 and -2^63 accepted, 2^63 and -2^63 - 1 refused,
** whole literals such as 1e3 accepted, fractions refused); number texts
** not confused by digits inside strings; syntax errors with line and
** column; out of memory inside cJSON reported as E_NOMEM; FIFOs,
** directories and /dev/zero refused before reading, without blocking;
** the size cap; symbolic links followed.  lsim_json_set (--set): values
** replace, add and append with their numbers still exact, a bare word is a
** string, and a path that cannot be walked leaves the tree as it was.
*/
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../sim/json.h"
#include "../sim/slurp.h"

static const lsim_json_codes codes = {LSIM_E_SCN_JSON, LSIM_E_JSON_DUP_KEY};

static lsim_err parse(lsim_json_doc *d, const char *text, lsim_errbuf *eb) {
  return lsim_json_parse(d, text, strlen(text), "t.json", &codes, eb);
}

static void expect_err(const char *text, lsim_err code, const char *msg) {
  lsim_json_doc d;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(parse(&d, text, &eb), code, "%s: got %s (%s)", text,
               lsim_err_name(eb.code), eb.msg);
  cr_assert_not_null(strstr(eb.msg, msg), "%s: want '%s' in '%s'", text, msg,
                     eb.msg);
  cr_assert_null(d.root);
}

Test(json, duplicate_keys_at_any_depth_name_their_path) {
  expect_err("{\"a\": 1, \"a\": 2}", LSIM_E_JSON_DUP_KEY,
             "t.json: $.a: duplicate key");
  expect_err("{\"a\": {\"b\": [1, {\"c\": 1, \"d\": 0, \"c\": 2}]}}",
             LSIM_E_JSON_DUP_KEY, "t.json: $.a.b[1].c: duplicate key");
  expect_err("[[], [{\"x\": {\"y\": true, \"y\": null}}]]",
             LSIM_E_JSON_DUP_KEY, "t.json: $[1][0].x.y: duplicate key");
  /* the caller's code: scenarios keep E_SCN_DUP */
  static const lsim_json_codes scn = {LSIM_E_SCN_JSON, LSIM_E_SCN_DUP};
  lsim_json_doc d;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  const char *t = "{\"k\": {\"q\": 1, \"q\": 1}}";
  cr_assert_eq(lsim_json_parse(&d, t, strlen(t), "s", &scn, &eb),
               LSIM_E_SCN_DUP, "%s", eb.msg);
  /* same key in two different objects is fine */
  cr_assert_eq(parse(&d, "{\"a\": {\"k\": 1}, \"b\": {\"k\": 2}}", &eb), 0,
               "%s", eb.msg);
  lsim_json_release(&d);
}

Test(json, duplicates_in_large_objects_report_the_first_in_document_order) {
  /* 40 keys: k0..k37, then k20 again (index 38) and k5 again (index 39);
  ** the first duplicate in document order is at index 38 */
  char text[2048];
  int n = snprintf(text, sizeof text, "{\"o\": {");
  for (int i = 0; i < 38; i++)
    n += snprintf(text + n, sizeof text - n, "\"k%d\": %d, ", i, i);
  snprintf(text + n, sizeof text - n, "\"k20\": 0, \"k5\": 0}}");
  expect_err(text, LSIM_E_JSON_DUP_KEY, "$.o.k20: duplicate key");
  /* 40 distinct keys pass */
  n = snprintf(text, sizeof text, "{");
  for (int i = 0; i < 40; i++)
    n += snprintf(text + n, sizeof text - n, "%s\"k%d\": %d", i ? ", " : "",
                  i, i);
  snprintf(text + n, sizeof text - n, "}");
  lsim_json_doc d;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(parse(&d, text, &eb), 0, "%s", eb.msg);
  lsim_json_release(&d);
}

/* The integer value of the single element of "[LIT]". */
static lsim_json_int_st int_of(const char *lit, int64_t *v) {
  char text[128];
  snprintf(text, sizeof text, "[%s]", lit);
  lsim_json_doc d;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(parse(&d, text, &eb), 0, "%s: %s", lit, eb.msg);
  *v = 12345;
  lsim_json_int_st st = lsim_json_int(d.root->child, v);
  cr_assert_str_eq(lsim_json_num_text(d.root->child), lit);
  lsim_json_release(&d);
  return st;
}

Test(json, integers_are_exact_to_int64) {
  int64_t v;
  cr_assert_eq(int_of("9007199254740993", &v), LSIM_JSON_INT_OK);
  cr_assert_eq(v, 9007199254740993LL, "2^53 + 1 read as %lld", (long long)v);
  cr_assert_eq(int_of("9223372036854775807", &v), LSIM_JSON_INT_OK);
  cr_assert_eq(v, INT64_MAX);
  cr_assert_eq(int_of("-9223372036854775808", &v), LSIM_JSON_INT_OK);
  cr_assert_eq(v, INT64_MIN);
  cr_assert_eq(int_of("9223372036854775808", &v), LSIM_JSON_INT_RANGE);
  cr_assert_eq(int_of("-9223372036854775809", &v), LSIM_JSON_INT_RANGE);
  cr_assert_eq(int_of("100000000000000000000000", &v), LSIM_JSON_INT_RANGE);
  cr_assert_eq(int_of("1e400", &v), LSIM_JSON_INT_RANGE);
  cr_assert_eq(int_of("0", &v), LSIM_JSON_INT_OK);
  cr_assert_eq(v, 0);
  cr_assert_eq(int_of("-0", &v), LSIM_JSON_INT_OK);
  cr_assert_eq(v, 0);
}

Test(json, whole_literals_are_integers_fractions_are_not) {
  int64_t v;
  static const struct {
    const char *lit;
    int64_t want;
  } whole[] = {{"1e3", 1000},     {"1E3", 1000},   {"1000.0", 1000},
               {"10e+2", 1000},   {"12.30e1", 123}, {"0.5e1", 5},
               {"0e999", 0},      {"-2.5e1", -25},
               {"9.223372036854775807e18", INT64_MAX}};
  for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++) {
    cr_assert_eq(int_of(whole[i].lit, &v), LSIM_JSON_INT_OK, "%s",
                 whole[i].lit);
    cr_assert_eq(v, whole[i].want, "%s read as %lld", whole[i].lit,
                 (long long)v);
  }
  static const char *const frac[] = {"1.5", "1e-1", "0.05", "123e-2",
                                     "9007199254740993.5"};
  for (size_t i = 0; i < sizeof frac / sizeof frac[0]; i++)
    cr_assert_eq(int_of(frac[i], &v), LSIM_JSON_INT_FRACTION, "%s", frac[i]);
  /* not a number at all */
  lsim_json_doc d;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(parse(&d, "[\"7\", true, null]", &eb), 0);
  for (const cJSON *c = d.root->child; c; c = c->next)
    cr_assert_eq(lsim_json_int(c, &v), LSIM_JSON_INT_NOT_NUMBER);
  lsim_json_release(&d);
}

Test(json, number_texts_follow_document_order_past_strings) {
  const char *text = "{\"k1\": \"12\", \"v\": [3, \"4\\\"5 6\", -7e0, "
                     "{\"9\": 8}], \"w\": 18446744073709551616}";
  lsim_json_doc d;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(parse(&d, text, &eb), 0, "%s", eb.msg);
  const cJSON *arr = lsim_json_get(d.root, "v");
  int64_t v;
  cr_assert_eq(lsim_json_int(arr->child, &v), LSIM_JSON_INT_OK);
  cr_assert_eq(v, 3);
  cr_assert_eq(lsim_json_int(arr->child->next->next, &v), LSIM_JSON_INT_OK);
  cr_assert_eq(v, -7);
  cr_assert_eq(lsim_json_int(lsim_json_get(arr->child->next->next->next, "9"),
                             &v),
               LSIM_JSON_INT_OK);
  cr_assert_eq(v, 8);
  cr_assert_str_eq(lsim_json_num_text(lsim_json_get(d.root, "w")),
                   "18446744073709551616");
  cr_assert_eq(lsim_json_int(lsim_json_get(d.root, "w"), &v),
               LSIM_JSON_INT_RANGE);
  /* the strings are untouched */
  cr_assert_str_eq(lsim_json_get(d.root, "k1")->valuestring, "12");
  lsim_json_release(&d);
}

Test(json, generic_reader_messages_carry_file_path_and_code) {
  lsim_json_doc d;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(parse(&d, "{\"n\": 2.5, \"m\": 9223372036854775808}", &eb), 0);
  const lsim_json_rd rd = {"f.json", &eb, LSIM_E_SCN_MISSING, LSIM_E_SCN_TYPE,
                           LSIM_E_SCN_RANGE};
  int64_t v;
  cr_assert_eq(lsim_json_get_int(&rd, d.root, "$.a[3]", "n", 1, 0, 10, 0, &v),
               LSIM_E_SCN_TYPE);
  cr_assert_not_null(strstr(eb.msg, "f.json: $.a[3].n: must be an integer"),
                     "%s", eb.msg);
  cr_assert_eq(lsim_json_get_int(&rd, d.root, "$", "m", 1, 0, INT64_MAX, 0,
                                 &v),
               LSIM_E_SCN_RANGE);
  cr_assert_not_null(strstr(eb.msg, "(got 9223372036854775808)"), "%s",
                     eb.msg);
  cr_assert_eq(lsim_json_get_int(&rd, d.root, "$", "x", 1, 0, 1, 0, &v),
               LSIM_E_SCN_MISSING);
  cr_assert_eq(lsim_json_get_int(&rd, d.root, "$", "x", 0, 0, 1, 1, &v), 0);
  cr_assert_eq(v, 1);
  lsim_json_release(&d);
}

Test(json, syntax_errors_give_line_and_column) {
  expect_err("{\n  \"a\": ,\n}", LSIM_E_SCN_JSON,
             "t.json: $: invalid json near line 2, column 8");
  expect_err("{} x", LSIM_E_SCN_JSON, "text after the top-level value");
  expect_err("", LSIM_E_SCN_JSON, "empty text");
  lsim_json_doc d;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_json_parse(&d, "[1,\0 2]", 7, "t.json", &codes, &eb),
               LSIM_E_SCN_JSON);
  cr_assert_not_null(strstr(eb.msg, "nul byte"), "%s", eb.msg);
}

/* an address-space limit starves ASan's own shadow mappings: the test runs
** in the builds without it (gcc says __SANITIZE_ADDRESS__, clang
** __has_feature(address_sanitizer)) */
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define LSIM_TEST_SANITIZED 1
#endif
#endif
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__) && \
    !defined(LSIM_TEST_SANITIZED)
Test(json, out_of_memory_is_nomem_not_a_syntax_error) {
  /* 3M numbers (6 MB of text) need about 200 MB of cJSON nodes */
  size_t n = 3000000;
  char *text = malloc(2 * n + 2);
  cr_assert_not_null(text);
  text[0] = '[';
  for (size_t i = 0; i < n; i++) {
    text[1 + 2 * i] = '0';
    text[2 + 2 * i] = i + 1 < n ? ',' : ']';
  }
  text[2 * n + 1] = '\0';
  /* address space: what the process has now plus 64 MiB */
  unsigned long pages = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  cr_assert_not_null(f);
  cr_assert_eq(fscanf(f, "%lu", &pages), 1);
  fclose(f);
  struct rlimit rl;
  rl.rlim_cur = rl.rlim_max =
      (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + ((rlim_t)64 << 20);
  cr_assert_eq(setrlimit(RLIMIT_AS, &rl), 0);
  lsim_json_doc d;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_err rc = lsim_json_parse_owned(&d, text, 2 * n + 1, "big.json", &codes,
                                      &eb);
  cr_assert_eq(rc, LSIM_E_NOMEM, "got %s: %s", lsim_err_name(rc), eb.msg);
  cr_assert_not_null(strstr(eb.msg, "out of memory"), "%s", eb.msg);
}
#endif

/* ---- slurp ---------------------------------------------------------------- */

static char dir[64];

static void mk(void) {
  snprintf(dir, sizeof dir, "/tmp/lsim-json-XXXXXX");
  cr_assert_not_null(mkdtemp(dir));
}

static void rm(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
}

/* The tree as compact text, numbers as their source text. */
static void text_of(const cJSON *v, char *out, size_t n) {
  char *t = cJSON_PrintUnformatted(v);
  cr_assert_not_null(t);
  snprintf(out, n, "%s", t);
  cJSON_free(t);
}

Test(json, set_replaces_adds_and_appends_exactly) {
  lsim_json_doc d;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(parse(&d, "{\"a\": {\"b\": 1}, \"l\": [1, 2]}", &eb), 0);
  cr_assert_eq(lsim_json_set(&d, NULL, "$.a.b=9007199254740993", &codes, &eb),
               0, "%s", eb.msg);
  int64_t v = 0;
  cr_assert_eq(lsim_json_int(lsim_json_get(lsim_json_get(d.root, "a"), "b"),
                             &v),
               LSIM_JSON_INT_OK);
  cr_assert_eq(v, INT64_C(9007199254740993));
  cr_assert_eq(lsim_json_set(&d, NULL, "$.a.b=7", &codes, &eb), 0);
  cr_assert_eq(lsim_json_set(&d, NULL, "a.c=fcfs", &codes, &eb), 0);
  cr_assert_eq(lsim_json_set(&d, NULL, "$.l[2]={\"x\": -0.5}", &codes, &eb),
               0);
  cr_assert_eq(lsim_json_set(&d, NULL, "$.l[0]=\"s\"", &codes, &eb), 0);
  cr_assert_eq(lsim_json_set(&d, NULL, "$.n.m.k=true", &codes, &eb), 0);
  char t[256];
  text_of(d.root, t, sizeof t);
  cr_assert_str_eq(t, "{\"a\":{\"b\":7,\"c\":\"fcfs\"},"
                      "\"l\":[\"s\",2,{\"x\":-0.5}],"
                      "\"n\":{\"m\":{\"k\":true}}}");
  /* refused: nothing changes, not even the objects made on the way */
  static const char *const bad[] = {
      "$.a.b.c=1",    "$.l.x=1",     "$.a[0]=1", "$.l[4]=1", "$.q.r[0]=1",
      "$.a.b=1x",     "$.a.b=",      "$..a=1",   "$.a b=1",  "noequals",
      "$.z.y.x[0]=1", "$.a={\"k\":1,\"k\":2}"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    lsim_err rc = lsim_json_set(&d, NULL, bad[i], &codes, &eb);
    cr_assert(rc == LSIM_E_USAGE || rc == LSIM_E_JSON_DUP_KEY, "%s: %s",
              bad[i], lsim_err_name(rc));
    cr_assert_not_null(strstr(eb.msg, "--set"), "%s: %s", bad[i], eb.msg);
    char u[256];
    text_of(d.root, u, sizeof u);
    cr_assert_str_eq(u, t, "%s changed the tree", bad[i]);
  }
  /* an edit under a member: paths are relative to it */
  cJSON *a = (cJSON *)lsim_json_get(d.root, "a");
  cr_assert_eq(lsim_json_set(&d, a, "$.b=2", &codes, &eb), 0);
  cr_assert_eq(lsim_json_int(lsim_json_get(a, "b"), &v), LSIM_JSON_INT_OK);
  cr_assert_eq(v, 2);
  lsim_json_release(&d);
}

Test(slurp, fifo_directory_and_devices_are_refused_before_reading,
     .init = mk, .fini = rm, .timeout = 20) {
  char p[128];
  char *buf;
  size_t len;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  snprintf(p, sizeof p, "%s/in.fifo", dir);
  cr_assert_eq(mkfifo(p, 0600), 0);
  /* a blocking open would hang here: nobody writes the fifo */
  cr_assert_eq(lsim_slurp(p, NULL, &buf, &len, &eb), LSIM_E_FILE_TYPE, "%s",
               eb.msg);
  cr_assert_not_null(strstr(eb.msg, "fifo"), "%s", eb.msg);
  cr_assert_null(buf);
  cr_assert_eq(lsim_slurp(dir, NULL, &buf, &len, &eb), LSIM_E_FILE_TYPE);
  cr_assert_not_null(strstr(eb.msg, "directory"), "%s", eb.msg);
  cr_assert_eq(lsim_slurp("/dev/zero", NULL, &buf, &len, &eb),
               LSIM_E_FILE_TYPE);
  cr_assert_not_null(strstr(eb.msg, "/dev/zero: is a character device"), "%s",
                     eb.msg);
  /* a caller may keep its older code */
  const lsim_slurp_opts o = {0, 0, LSIM_E_IO, 0, NULL};
  cr_assert_eq(lsim_slurp(p, &o, &buf, &len, &eb), LSIM_E_IO);
  snprintf(p, sizeof p, "%s/none", dir);
  cr_assert_eq(lsim_slurp(p, NULL, &buf, &len, &eb), LSIM_E_IO);
}

Test(slurp, size_cap_links_and_contents, .init = mk, .fini = rm) {
  char p[128], l[128];
  char *buf;
  size_t len;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  snprintf(p, sizeof p, "%s/f.json", dir);
  FILE *f = fopen(p, "w");
  cr_assert_not_null(f);
  fputs("0123456789", f);
  fclose(f);
  const lsim_slurp_opts ten = {10, 0, 0, 0, NULL}, nine = {9, 0, 0, 0, "thing"};
  cr_assert_eq(lsim_slurp(p, &ten, &buf, &len, &eb), 0, "%s", eb.msg);
  cr_assert_eq(len, 10);
  cr_assert_str_eq(buf, "0123456789");
  free(buf);
  cr_assert_eq(lsim_slurp(p, &nine, &buf, &len, &eb), LSIM_E_FILE_SIZE);
  cr_assert_not_null(strstr(eb.msg, "thing "), "%s", eb.msg);
  cr_assert_not_null(strstr(eb.msg, "larger than 9 bytes"), "%s", eb.msg);
  /* a symbolic link to an input is read like the input */
  snprintf(l, sizeof l, "%s/link.json", dir);
  cr_assert_eq(symlink(p, l), 0);
  cr_assert_eq(lsim_slurp(l, &ten, &buf, &len, &eb), 0, "%s", eb.msg);
  cr_assert_eq(len, 10);
  free(buf);
  /* the default cap: a sparse file one byte over 256 MiB, refused by size */
  snprintf(p, sizeof p, "%s/huge", dir);
  int fd = open(p, O_WRONLY | O_CREAT, 0600);
  cr_assert_geq(fd, 0);
  cr_assert_eq(ftruncate(fd, (off_t)LSIM_SLURP_CAP + 1), 0);
  close(fd);
  cr_assert_eq(lsim_slurp(p, NULL, &buf, &len, &eb), LSIM_E_FILE_SIZE);
  cr_assert_not_null(strstr(eb.msg, "256 MiB"), "%s", eb.msg);
}
