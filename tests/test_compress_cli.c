/*
** test_compress_cli.c: `lorasim compress` through the real binary.
**
** The fixture collection (tests/fixtures/compress/three.json) is the
** article's three-adapter fixture as factors, with a manifest probe per
** adapter.  Covered: a bundle is written and re-verifies; the identity is
** deterministic and changes with the ordered source set; the failure lab's
** conversion rows (wrong orientation, wrong scale) are rejected before any
** fitting with a stable code naming the JSON path, exit 2 and no output;
** a tampered bundle fails --verify; the report never prints a kernel time
** it did not measure.
*/
#define LSIM_TMP_PREFIX "/tmp/lsim-cmp-cli-"
#include "cli_harness.h"

#include <string.h>
#include <sys/stat.h>

#define FIX LSIM_TEST_DIR "/fixtures/compress/three.json"

TestSuite(compress_cli, .init = mk_tmp, .fini = rm_tmp);

static void write_file(const char *name, const char *text) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", tmpdir, name);
  FILE *f = fopen(p, "w");
  cr_assert_not_null(f);
  fputs(text, f);
  fclose(f);
}

static int exists(const char *name) {
  char p[512];
  struct stat st;
  snprintf(p, sizeof p, "%s/%s", tmpdir, name);
  return stat(p, &st) == 0;
}

static char *read_file(const char *name) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", tmpdir, name);
  FILE *f = fopen(p, "r");
  cr_assert_not_null(f, "%s missing", p);
  static char buf[1 << 20];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = 0;
  fclose(f);
  return buf;
}

/* The bundle id printed on the first output line. */
static void bundle_id(char id[65]) {
  cr_assert_eq(strncmp(out, "bundle ", 7), 0, "%s", out);
  memcpy(id, out + 7, 64);
  id[64] = 0;
}

/* A one-adapter-changed variant of the fixture. */
static const char *HEAD =
    "{\"base\": \"toy-base-v1\", \"module\": \"layers.0.proj\", \"d_in\": 3, "
    "\"d_out\": 3, \"adapters\": [";
static const char *AD_A =
    "{\"name\": \"a\", \"rank\": 2, \"scale\": 1, \"A\": [[1,0,0],[0,2,0]], "
    "\"B\": [[1,0],[0,1],[0,0]], \"probe\": {\"x\": [1,2,3], \"y\": [1,4,0]}}";
static const char *AD_C =
    "{\"name\": \"c\", \"rank\": 2, \"scale\": 1, \"A\": [[2,-1,0],[1,1,0]], "
    "\"B\": [[1,0],[0,1],[0,0]]}";

static void collection(const char *name, const char *b) {
  char text[4096];
  snprintf(text, sizeof text, "%s%s, %s, %s]}", HEAD, AD_A, b, AD_C);
  write_file(name, text);
}

static void bad_input(const char *b, const char *code, const char *path) {
  collection("bad.json", b);
  write_file("keep.json", "previous bundle\n");
  int rc = lorasim("compress --in bad.json --rank 2 --out keep.json");
  cr_assert_eq(rc, 2, "exit %d: %s", rc, out);
  cr_assert(strstr(out, code), "want %s: %s", code, out);
  cr_assert(strstr(out, path), "want path %s: %s", path, out);
  cr_assert(strstr(out, "bad.json"), "want the file name: %s", out);
  cr_assert_str_eq(read_file("keep.json"), "previous bundle\n",
                   "a failed run must not touch the output");
  rc = lorasim("compress --in bad.json --rank 2 --out new.json");
  cr_assert_eq(rc, 2);
  cr_assert(!exists("new.json"), "no partial output");
}

Test(compress_cli, fixture_bundle_and_verify) {
  int rc = lorasim("compress --in " FIX " --rank 2 --out b.json");
  cr_assert_eq(rc, 0, "%s", out);
  cr_assert(strstr(out, "jd-full R 2 clusters 1"), "%s", out);
  cr_assert(strstr(out, "parameters: lora 36, jd-full 24"), "%s", out);
  char id[65], id2[65];
  bundle_id(id);
  const char *txt = read_file("b.json");
  cr_assert(strstr(txt, id), "the file carries its identity");
  cr_assert(strstr(txt, "\"source_set_sha256\""));
  cr_assert(strstr(txt, "\"base\":\"toy-base-v1\""));
  cr_assert(strstr(txt, "\"module\":\"layers.0.proj\""));
  rc = lorasim("compress --verify b.json");
  cr_assert_eq(rc, 0, "%s", out);
  cr_assert(strstr(out, id));
  /* deterministic: a second run gives the same identity and bytes */
  char first[1 << 14];
  snprintf(first, sizeof first, "%s", txt);
  rc = lorasim("compress --in " FIX " --rank 2 --out b2.json");
  cr_assert_eq(rc, 0);
  bundle_id(id2);
  cr_assert_str_eq(id, id2);
  cr_assert_str_eq(first, read_file("b2.json"));
  /* jd-diag at R = 2 is a different bundle with 18 parameters */
  rc = lorasim("compress --in " FIX " --rank 2 --method jd-diag --out d.json");
  cr_assert_eq(rc, 0, "%s", out);
  cr_assert(strstr(out, "jd-diag 18"), "%s", out);
  bundle_id(id2);
  cr_assert_str_neq(id, id2);
}

Test(compress_cli, source_set_change_is_a_new_identity) {
  /* the same adapters in another order: another source set, another id */
  static const char *AD_B =
      "{\"name\": \"b\", \"rank\": 2, \"scale\": 1, \"A\": [[0,3,0],[4,0,0]], "
      "\"B\": [[1,0],[0,1],[0,0]]}";
  char text[4096];
  int rc = lorasim("compress --in " FIX " --rank 2 --out b.json");
  cr_assert_eq(rc, 0);
  char id[65], id2[65], set1[65], set2[65];
  bundle_id(id);
  cr_assert(sscanf(strstr(out, "source set ") + 11, "%64s", set1) == 1);
  snprintf(text, sizeof text, "%s%s, %s, %s]}", HEAD, AD_B, AD_A, AD_C);
  write_file("swapped.json", text);
  rc = lorasim("compress --in swapped.json --rank 2 --out s.json");
  cr_assert_eq(rc, 0, "%s", out);
  bundle_id(id2);
  cr_assert(sscanf(strstr(out, "source set ") + 11, "%64s", set2) == 1);
  cr_assert_str_neq(set1, set2);
  cr_assert_str_neq(id, id2);
  /* one factor entry changed: a new source set too */
  collection("changed.json",
             "{\"name\": \"b\", \"rank\": 2, \"scale\": 1, \"A\": "
             "[[0,3,0],[4,0,1]], \"B\": [[1,0],[0,1],[0,0]]}");
  rc = lorasim("compress --in changed.json --rank 2 --out c.json");
  cr_assert_eq(rc, 0, "%s", out);
  cr_assert(sscanf(strstr(out, "source set ") + 11, "%64s", set2) == 1);
  cr_assert_str_neq(set1, set2);
}

/* Failure lab: wrong source factor orientation or scale -> reject. */
Test(compress_cli, lab_transposed_factor_rejected) {
  bad_input("{\"name\": \"b\", \"rank\": 2, \"A\": [[0,4],[3,0],[0,0]], "
            "\"B\": [[1,0],[0,1],[0,0]]}",
            "E_CMP_ORIENTATION", "$.adapters[1].A");
}

Test(compress_cli, lab_transposed_update_caught_by_probe) {
  /* A = B_b^T, B = A_b^T: shapes pass, the update is delta_b^T */
  bad_input("{\"name\": \"b\", \"rank\": 2, \"A\": [[1,0,0],[0,1,0]], "
            "\"B\": [[0,4],[3,0],[0,0]], \"probe\": {\"x\": [1,2,3], "
            "\"y\": [6,4,0]}}",
            "E_CMP_SOURCE_CHECK", "$.adapters[1].probe.y[0]");
}

Test(compress_cli, lab_wrong_scale_caught_by_probe) {
  bad_input("{\"name\": \"b\", \"rank\": 2, \"scale\": 0.5, \"A\": "
            "[[0,3,0],[4,0,0]], \"B\": [[1,0],[0,1],[0,0]], \"probe\": "
            "{\"x\": [1,2,3], \"y\": [6,4,0]}}",
            "E_CMP_SOURCE_CHECK", "$.adapters[1].probe.y[0]");
}

Test(compress_cli, bad_inputs_name_path_and_code) {
  bad_input("{\"name\": \"a\", \"rank\": 2, \"A\": [[0,3,0],[4,0,0]], "
            "\"B\": [[1,0],[0,1],[0,0]]}",
            "E_CMP_DUP_SOURCE", "$.adapters[1].name");
  bad_input("{\"name\": \"b\", \"rank\": 2, \"A\": [[0,3,0],[4,0,0]], "
            "\"B\": [[1,0],[0,1],[0,0]], \"alpha\": 3}",
            "E_CMP_UNKNOWN_KEY", "$.adapters[1].alpha");
  bad_input("{\"name\": \"b\", \"rank\": 2, \"A\": [[0,3,0],[4,0]], "
            "\"B\": [[1,0],[0,1],[0,0]]}",
            "E_CMP_SHAPE", "$.adapters[1].A[1]");
  bad_input("{\"name\": \"b\", \"rank\": 2, \"A\": [[0,3,0],[4,0,\"x\"]], "
            "\"B\": [[1,0],[0,1],[0,0]]}",
            "E_CMP_TYPE", "$.adapters[1].A[1][2]");
  bad_input("{\"name\": \"b\", \"rank\": 2, \"A\": [[0,0,0],[0,0,0]], "
            "\"B\": [[1,0],[0,1],[0,0]]}",
            "E_CMP_ZERO_NORM", "$.adapters[1]");
  bad_input("{\"name\": \"b\", \"A\": [[0,3,0],[4,0,0]], "
            "\"B\": [[1,0],[0,1],[0,0]]}",
            "E_CMP_MISSING", "$.adapters[1].rank");
  write_file("broken.json", "{\"base\": \n\"x\",,}");
  int rc = lorasim("compress --in broken.json --out o.json");
  cr_assert_eq(rc, 2);
  cr_assert(strstr(out, "E_CMP_JSON"), "%s", out);
  cr_assert(strstr(out, "line 2"), "%s", out);
  rc = lorasim("compress --in missing.json --out o.json");
  cr_assert_eq(rc, 2);
  cr_assert(strstr(out, "E_FILE_MISSING") && strstr(out, "missing.json"), "%s",
            out);
  rc = lorasim("compress --in " FIX " --rank 4 --out o.json");
  cr_assert_eq(rc, 2, "%s", out);
  cr_assert(strstr(out, "E_CMP_RANK"), "%s", out);
  rc = lorasim("compress --in " FIX " --rank 2");
  cr_assert_eq(rc, 2, "--out is required");
  cr_assert(!exists("o.json"));
}

Test(compress_cli, tampered_bundle_fails_verify) {
  int rc = lorasim("compress --in " FIX " --rank 2 --out b.json");
  cr_assert_eq(rc, 0);
  char *txt = read_file("b.json");
  /* change the first core entry (1 -> 1.5) */
  char *p = strstr(txt, "\"cores\":[[");
  cr_assert_not_null(p);
  p += strlen("\"cores\":[[");
  char *comma = strchr(p, ',');
  char fixed[1 << 14];
  snprintf(fixed, sizeof fixed, "%.*s%s%s", (int)(p - txt), txt, "1.5",
           comma);
  write_file("t.json", fixed);
  rc = lorasim("compress --verify t.json");
  cr_assert_eq(rc, 2, "%s", out);
  cr_assert(strstr(out, "E_CMP_BUNDLE_DIGEST"), "%s", out);
  cr_assert(strstr(out, "$.sources[0].core_sha256"), "%s", out);
}

Test(compress_cli, synthetic_and_report) {
  int rc = lorasim("compress --synthetic 12 --d-in 10 --d-out 9 --src-rank 2 "
                   "--planted 3 --groups 3 --clusters 3 --rank 3 --out s.json");
  cr_assert_eq(rc, 0, "%s", out);
  cr_assert(strstr(out, "converged yes"), "%s", out);
  double rel = 1;
  cr_assert(sscanf(strstr(out, "rel_err ") + 8, "%lf", &rel) == 1);
  cr_assert_lt(rel, 1e-12, "planted groups, one cluster each: exact");
  rc = lorasim("compress --verify s.json");
  cr_assert_eq(rc, 0, "%s", out);
  rc = lorasim("compress --synthetic 12 --d-in 10 --d-out 9 --src-rank 2 "
               "--planted 3 --groups 3 --report --ranks 2,3 "
               "--clusters-list 1,3");
  cr_assert_eq(rc, 0, "%s", out);
  cr_assert(strstr(out, "kernel_time"), "%s", out);
  cr_assert(strstr(out, "not measured"), "%s", out);
  cr_assert(!exists("s2.json"));
  /* eight rows: 2 methods x 2 ranks x 2 cluster counts */
  int rows = 0;
  for (const char *q = out; (q = strstr(q, "not measured")); q++)
    rows++;
  cr_assert_eq(rows, 8, "%s", out);
  /* a measured time appears only for the configuration it was measured
     for; every other row stays "not measured" */
  write_file("times.txt", "# method R k jd_ms lora_ms tokens\n"
                          "jd-diag 3 1 0.0420 0.0310 256\n");
  rc = lorasim("compress --synthetic 12 --d-in 10 --d-out 9 --src-rank 2 "
               "--planted 3 --groups 3 --report --ranks 2,3 "
               "--clusters-list 1,3 --kernel-times times.txt");
  cr_assert_eq(rc, 0, "%s", out);
  rows = 0;
  for (const char *q = out; (q = strstr(q, "not measured")); q++)
    rows++;
  cr_assert_eq(rows, 7, "%s", out);
  const char *m = strstr(out, "jd 0.0420 ms, lora 0.0310 ms");
  cr_assert_not_null(m, "%s", out);
  /* a time read from a file is cited, never this run's measurement
     (the claim ceiling of docs/RELIABILITY.md) */
  cr_assert(strstr(m, "cited: a GPU measurement read from --kernel-times"),
            "%s", out);
  const char *ls = m;
  while (ls > out && ls[-1] != '\n')
    ls--;
  cr_assert_eq(strncmp(ls, "jd-diag     3   1", 17), 0, "row: %.40s", ls);
  write_file("bad_times.txt", "jd-diag 3 1 fast\n");
  rc = lorasim("compress --synthetic 12 --report --kernel-times "
               "bad_times.txt");
  cr_assert_eq(rc, 2, "%s", out);
  cr_assert(strstr(out, "E_CMP_TYPE") && strstr(out, "bad_times.txt:1"), "%s",
            out);
  rc = lorasim("compress --synthetic 4 --structure diag --src-rank 2 "
               "--planted 3 --report");
  cr_assert_eq(rc, 2, "%s", out);
  cr_assert(strstr(out, "E_CMP_SYNTHETIC"), "%s", out);
}
