/*
** test_prefix_report.c: `lorasim prefix` on a sample of the real Mooncake
** conversation trace (skipped when the shared traces are absent), run
** through the real binary.
**
** With an unbounded cache and no prefill queueing the key modes are
** ordered by coarseness: equal raw keys imply equal semantic keys, equal
** semantic keys imply equal semantic_alora keys, and those imply equal
** oblivious keys, so hits can only grow along that chain.
*/
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define LSIM_TMP_PREFIX "/tmp/lsim-prefix-"
#include "cli_harness.h"

#define TRACE \
  LSIM_SOURCE_DIR "/../shared/data/traces/mooncake-fast25/conversation_trace.jsonl"

TestSuite(prefix_cli, .init = mk_tmp, .fini = rm_tmp);

static void need_trace(void) {
  struct stat st;
  if (stat(TRACE, &st) != 0)
    cr_skip_test("Mooncake trace not found at %s: skipping", TRACE);
}

typedef struct row {
  char mode[32];
  int safe;
  long long requests, prompt, full, hit_blocks, hit_tokens, recomputed,
      corrupt, corrupt_req, published, evicted;
} row;

/* Read DIR/prefix.csv into r[4]; the whole file into raw (for equality). */
static void read_csv(const char *dir, row r[4], char *raw, size_t n) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s/prefix.csv", tmpdir, dir);
  FILE *f = fopen(p, "r");
  cr_assert_not_null(f, "%s missing; output was:\n%s", p, out);
  size_t k = fread(raw, 1, n - 1, f);
  raw[k] = 0;
  fclose(f);
  char *line = strchr(raw, '\n');
  cr_assert_not_null(line);
  for (int i = 0; i < 4; i++) {
    double hbr, htr;
    int got = sscanf(line + 1, "%31[^,],%d,%lld,%lld,%lld,%lld,%lld,%lf,%lf,"
                     "%lld,%lld,%lld,%lld,%lld", r[i].mode, &r[i].safe, &r[i].requests,
                     &r[i].prompt, &r[i].full, &r[i].hit_blocks,
                     &r[i].hit_tokens, &hbr, &htr, &r[i].recomputed,
                     &r[i].corrupt, &r[i].corrupt_req, &r[i].published,
                     &r[i].evicted);
    cr_assert_eq(got, 14, "row %d of %s", i, p);
    line = strchr(line + 1, '\n');
    cr_assert_not_null(line);
  }
}

Test(prefix_cli, modes_are_ordered_by_key_coarseness) {
  need_trace();
  static char raw[4096];
  row r[4];
  cr_assert_eq(lorasim("prefix --trace '" TRACE "' --requests 80 "
                       "--cache-blocks 2500 --servers 1000 --no-plots "
                       "--out big"), 0, "%s", out);
  read_csv("big", r, raw, sizeof raw);
  cr_assert_str_eq(r[0].mode, "oblivious");
  cr_assert_str_eq(r[1].mode, "raw_adapter");
  cr_assert_str_eq(r[2].mode, "semantic");
  cr_assert_str_eq(r[3].mode, "semantic_alora");
  cr_assert_eq(r[0].safe, 0);
  for (int i = 0; i < 4; i++) {
    cr_assert_eq(r[i].requests, 80);
    cr_assert_eq(r[i].evicted, 0, "the cache must be effectively unbounded");
    cr_assert_eq(r[i].prompt, r[0].prompt);
    cr_assert_geq(r[i].recomputed, r[i].prompt - r[i].hit_tokens);
    cr_assert_eq(r[i].hit_tokens, r[i].hit_blocks * 512);
  }
  cr_assert_geq(r[2].hit_blocks, r[1].hit_blocks, "semantic >= raw");
  cr_assert_geq(r[3].hit_blocks, r[2].hit_blocks, "alora >= semantic");
  cr_assert_geq(r[0].hit_blocks, r[3].hit_blocks, "oblivious >= alora");
  /* the aLoRA exception and the LM-head/alias closure buy something */
  cr_assert_gt(r[3].hit_blocks, r[1].hit_blocks);
  /* adapters differ, so oblivious keys serve corrupt rows; no safe mode
  ** ever does */
  cr_assert_gt(r[0].corrupt, 0);
  cr_assert_gt(r[0].corrupt_req, 0);
  cr_assert_leq(r[0].corrupt, r[0].hit_blocks);
  for (int i = 1; i < 4; i++)
    cr_assert_eq(r[i].corrupt, 0, "%s served a corrupt hit", r[i].mode);
  /* oblivious minus corrupt: never more than the correct semantic_alora */
  cr_assert_leq(r[0].hit_blocks - r[0].corrupt, r[3].hit_blocks);
  /* conversations that keep their adapter: the same order, and the safe
  ** modes stay clean */
  cr_assert_eq(lorasim("prefix --trace '" TRACE "' --requests 80 --sticky "
                       "--cache-blocks 2500 --servers 1000 --no-plots "
                       "--out sticky"), 0, "%s", out);
  cr_assert(strstr(out, "sticky conversations"), "%s", out);
  read_csv("sticky", r, raw, sizeof raw);
  cr_assert_geq(r[2].hit_blocks, r[1].hit_blocks);
  cr_assert_geq(r[3].hit_blocks, r[2].hit_blocks);
  cr_assert_geq(r[0].hit_blocks, r[3].hit_blocks);
  for (int i = 1; i < 4; i++)
    cr_assert_eq(r[i].corrupt, 0, "%s served a corrupt hit", r[i].mode);
}

Test(prefix_cli, same_seed_same_output_other_seed_differs) {
  need_trace();
  static char a[4096], b[4096], c[4096];
  row r[4];
  const char *args = "prefix --trace '" TRACE "' --requests 60 "
                     "--cache-blocks 300 --no-plots";
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "%s --seed 7 --out s7a", args);
  cr_assert_eq(lorasim(cmd), 0, "%s", out);
  cr_assert(strstr(out, "UNSAFE"), "%s", out);
  read_csv("s7a", r, a, sizeof a);
  snprintf(cmd, sizeof cmd, "%s --seed 7 --out s7b", args);
  cr_assert_eq(lorasim(cmd), 0, "%s", out);
  read_csv("s7b", r, b, sizeof b);
  cr_assert_str_eq(a, b);
  snprintf(cmd, sizeof cmd, "%s --seed 8 --out s8", args);
  cr_assert_eq(lorasim(cmd), 0, "%s", out);
  read_csv("s8", r, c, sizeof c);
  cr_assert_str_neq(a, c);
  /* a small cache evicts, and oblivious keys still serve corrupt rows */
  cr_assert_gt(r[1].evicted, 0);
  cr_assert_gt(r[0].corrupt, 0);
}

Test(prefix_cli, bad_input_exits_2) {
  cr_assert_eq(lorasim("prefix --requests 0"), 2, "%s", out);
  cr_assert(strstr(out, "E_USAGE"), "%s", out);
  cr_assert_eq(lorasim("prefix --alora-share 0.8 --lmhead-share 0.5"), 2);
  FILE *f;
  char p[512];
  snprintf(p, sizeof p, "%s/bad.jsonl", tmpdir);
  cr_assert_not_null(f = fopen(p, "w"));
  fputs("{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 5, "
        "\"hash_ids\": [0, 1]}\n{\"timestamp\": 5, \"input_length\": \"x\"}\n",
        f);
  fclose(f);
  cr_assert_eq(lorasim("prefix --trace bad.jsonl --no-plots --out o"), 2,
               "%s", out);
  cr_assert(strstr(out, "E_TRACE"), "%s", out);
  /* nothing half-written */
  struct stat st;
  snprintf(p, sizeof p, "%s/o/prefix.csv", tmpdir);
  cr_assert_neq(stat(p, &st), 0);
}
