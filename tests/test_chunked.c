/* Chunked prefill ($.workers.prefill_chunk) through the binary: off by
** default (the existing rows do not move), every prompt prefilled in chunks
** of at most the configured size with the first token on the last one,
** service debited per chunk and summing to the prompt, and long prompts
** admitted that the unchunked budget refuses. */
#include <criterion/criterion.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define LSIM_TMP_PREFIX "/tmp/lsim-chunk-"
#include "cli_harness.h"

/* tiny.json with `extra` inserted into $.workers (after max_batch_requests)
** and max_batch_tokens replaced by `budget`, written to tmpdir/NAME. */
static void variant(const char *name, const char *extra, int budget) {
  char src[512], dst[512], text[8192], mod[8300];
  snprintf(src, sizeof src, "%s/fixtures/replay/tiny.json", LSIM_TEST_DIR);
  FILE *f = fopen(src, "r");
  cr_assert_not_null(f);
  size_t n = fread(text, 1, sizeof text - 1, f);
  text[n] = 0;
  fclose(f);
  const char *key = "\"max_batch_tokens\": 512, \"max_batch_requests\": 8";
  char *at = strstr(text, key);
  cr_assert_not_null(at);
  *at = 0;
  snprintf(mod, sizeof mod, "%s\"max_batch_tokens\": %d, "
                            "\"max_batch_requests\": 8%s%s",
           text, budget, extra, at + strlen(key));
  snprintf(dst, sizeof dst, "%s/%s", tmpdir, name);
  f = fopen(dst, "w");
  cr_assert_not_null(f);
  fputs(mod, f);
  fclose(f);
}

static double q(const char *rel, const char *sql) {
  char p[512];
  sqlite3 *h;
  sqlite3_stmt *s;
  snprintf(p, sizeof p, "%s/%s", tmpdir, rel);
  cr_assert_eq(sqlite3_open_v2(p, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &s, NULL), SQLITE_OK, "%s",
               sqlite3_errmsg(h));
  cr_assert_eq(sqlite3_step(s), SQLITE_ROW);
  double v = sqlite3_column_type(s, 0) == SQLITE_NULL
                 ? -1
                 : sqlite3_column_double(s, 0);
  sqlite3_finalize(s);
  sqlite3_close(h);
  return v;
}

static const char *DIGEST =
    "SELECT count(*) * 1000003 + sum((seq * 7 + tick * 13 + kind * 17 + "
    "coalesce(value, 0) * 19 + coalesce(request, 0)) % 1000003) FROM events";

#define DEBIT "(SELECT kind FROM event_kinds WHERE name='completed_service_debited')"

TestSuite(chunked, .init = mk_tmp, .fini = rm_tmp);

Test(chunked, off_or_larger_than_every_prompt_changes_nothing) {
  variant("a.json", "", 512);
  variant("b.json", ", \"prefill_chunk\": 0", 512);
  variant("c.json", ", \"prefill_chunk\": 128", 512); /* prompts <= 128 */
  cr_assert_eq(lorasim("replay a.json --db a.db --quiet --no-plots"), 0, "%s",
               out);
  cr_assert_eq(lorasim("replay b.json --db b.db --quiet --no-plots"), 0, "%s",
               out);
  cr_assert_eq(lorasim("replay c.json --db c.db --quiet --no-plots"), 0, "%s",
               out);
  cr_assert_eq(q("a.db", DIGEST), q("b.db", DIGEST));
  cr_assert_eq(q("a.db", DIGEST), q("c.db", DIGEST));
}

Test(chunked, prompts_are_prefilled_in_chunks) {
  variant("k.json", ", \"prefill_chunk\": 24", 512);
  cr_assert_eq(lorasim("replay k.json --db k.db --quiet --no-plots"), 0, "%s",
               out);
  cr_assert_eq(lorasim("replay k.json --db k2.db --quiet --no-plots"), 0, "%s",
               out);
  cr_assert_eq(q("k.db", DIGEST), q("k2.db", DIGEST)); /* deterministic */
  cr_assert_gt(q("k.db", "SELECT count(*) FROM requests WHERE outcome='ok'"),
               500);
  /* no prefill row above the chunk */
  cr_assert_eq(q("k.db", "SELECT max(value) FROM events WHERE kind=" DEBIT
                         " AND detail='prefill'"),
               24);
  /* per completed request: prefill debits sum to the prompt, in
  ** ceil(prompt / 24) chunks, the last one at the first token */
  cr_assert_eq(
      q("k.db",
        "SELECT count(*) FROM requests r WHERE outcome='ok' AND ("
        " (SELECT sum(value) FROM events e WHERE e.request=r.request AND "
        "  e.kind=" DEBIT " AND e.detail='prefill') <> r.prompt_tokens OR"
        " (SELECT count(*) FROM events e WHERE e.request=r.request AND "
        "  e.kind=" DEBIT " AND e.detail='prefill') <> "
        "  (r.prompt_tokens + 23) / 24 OR"
        " (SELECT max(tick) FROM events e WHERE e.request=r.request AND "
        "  e.kind=" DEBIT " AND e.detail='prefill') <> r.first_token_tick)"),
      0);
  /* at least one prompt really was split */
  cr_assert_gt(q("k.db", "SELECT count(*) FROM requests WHERE outcome='ok' "
                         "AND prompt_tokens > 24"),
               0);
  /* the batch budget holds per iteration */
  cr_assert_leq(q("k.db", "SELECT max(prefill_rows + decode_rows) FROM "
                          "iterations"),
                512);
}

Test(chunked, long_prompts_fit_a_small_budget_only_when_chunked) {
  /* budget 64 tokens: prompts of up to 128 are refused unchunked */
  variant("s.json", "", 64);
  variant("t.json", ", \"prefill_chunk\": 32", 64);
  cr_assert_eq(lorasim("replay s.json --db s.db --quiet --no-plots"), 0, "%s",
               out);
  cr_assert_eq(lorasim("replay t.json --db t.db --quiet --no-plots"), 0, "%s",
               out);
  cr_assert_gt(q("s.db", "SELECT count(*) FROM events_named WHERE "
                         "kind_name='admission_rejected' AND "
                         "detail='prompt_over_batch_budget'"),
               0);
  cr_assert_eq(q("t.db", "SELECT count(*) FROM events_named WHERE "
                         "kind_name='admission_rejected' AND "
                         "detail='prompt_over_batch_budget'"),
               0);
  cr_assert_leq(q("t.db", "SELECT max(prefill_rows + decode_rows) FROM "
                          "iterations"),
                64);
  cr_assert_gt(q("t.db", "SELECT count(*) FROM requests WHERE outcome='ok' "
                         "AND prompt_tokens > 64"),
               0);
}

Test(chunked, bad_values_are_refused) {
  variant("n.json", ", \"prefill_chunk\": -1", 512);
  cr_assert_eq(lorasim("replay n.json --db n.db --quiet"), 2);
  cr_assert_not_null(strstr(out, "E_SCN_RANGE"), "%s", out);
  cr_assert_not_null(strstr(out, "$.workers.prefill_chunk"), "%s", out);
  variant("m.json", ", \"prefill_chunk\": 1.5", 512);
  cr_assert_eq(lorasim("replay m.json --db m.db --quiet"), 2);
  cr_assert_not_null(strstr(out, "E_SCN_NOT_INTEGER"), "%s", out);
}
