/* The vLLM-parity knobs of $.workers through the real binary and its
** SQLite rows (docs/SCHEDULING.md "Distinct adapters per batch",
** docs/RESIDENCY.md "Host tier" and "Padded-rank slots"):
**   max_loras      no iteration holds more distinct adapters; a request the
**                  cap keeps waiting still completes, and requests of the
**                  running adapter do not overtake the policy's first choice
**   max_cpu_loras  a load served from the host tier takes the copy alone, a
**                  miss reads from disk first (exact ticks), and an adapter
**                  the host LRU dropped pays the disk again
**   max_lora_rank  every slot's pages are the padded rank's, a larger rank
**                  is refused at arrival, never more than max_loras slots
**                  are held, and the padding shows in rank_padding_ratio
** plus the scenario errors of each knob, with their codes and paths. */
#include <criterion/criterion.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define LSIM_TMP_PREFIX "/tmp/lsim-vllm-"
#include "cli_harness.h"

/* The fixture NAME.json (and NAME.csv when it has one) copied to tmpdir as
** OUT.json with every `from` replaced by `to` (from NULL: unchanged). */
static void variant(const char *name, const char *out_name, const char *from,
                    const char *to) {
  char src[512], dst[512], text[8192], mod[8400];
  snprintf(src, sizeof src, "%s/fixtures/replay/%s.json", LSIM_TEST_DIR, name);
  FILE *f = fopen(src, "r");
  cr_assert_not_null(f, "%s", src);
  size_t n = fread(text, 1, sizeof text - 1, f);
  text[n] = 0;
  fclose(f);
  mod[0] = 0;
  const char *p = text;
  char *at;
  while (from && (at = strstr(p, from)) != NULL) {
    strncat(mod, p, (size_t)(at - p));
    strcat(mod, to);
    p = at + strlen(from);
  }
  cr_assert(!from || p != text, "'%s' is not in %s", from, src);
  strcat(mod, p);
  snprintf(dst, sizeof dst, "%s/%s.json", tmpdir, out_name);
  f = fopen(dst, "w");
  cr_assert_not_null(f);
  fputs(mod, f);
  fclose(f);
  /* the trace beside it, when the fixture reads one */
  snprintf(src, sizeof src, "%s/fixtures/replay/%s.csv", LSIM_TEST_DIR, name);
  FILE *c = fopen(src, "r");
  if (!c)
    return;
  snprintf(dst, sizeof dst, "%s/%s.csv", tmpdir, name);
  f = fopen(dst, "w");
  cr_assert_not_null(f);
  while ((n = fread(text, 1, sizeof text, c)) > 0)
    cr_assert_eq(fwrite(text, 1, n, f), n);
  fclose(c);
  fclose(f);
}

static void replay(const char *name) {
  char args[256];
  snprintf(args, sizeof args, "replay %s.json --db %s.db --quiet --no-plots",
           name, name);
  cr_assert_eq(lorasim(args), 0, "%s", out);
}

/* One number from `sql` over tmpdir/DB.db (-1 for NULL). */
static double q(const char *db, const char *sql) {
  char p[512];
  sqlite3 *h;
  sqlite3_stmt *s;
  snprintf(p, sizeof p, "%s/%s.db", tmpdir, db);
  cr_assert_eq(sqlite3_open_v2(p, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &s, NULL), SQLITE_OK, "%s: %s",
               sql, sqlite3_errmsg(h));
  cr_assert_eq(sqlite3_step(s), SQLITE_ROW, "%s", sql);
  double v = sqlite3_column_type(s, 0) == SQLITE_NULL
                 ? -1
                 : sqlite3_column_double(s, 0);
  sqlite3_finalize(s);
  sqlite3_close(h);
  return v;
}

#define KIND(n) "(SELECT kind FROM event_kinds WHERE name='" n "')"

/* The most adapters that held (or reserved) a slot of one worker at once,
** replayed from the events: + a load that starts (a restore's load was
** counted at adapter_restoring), + a victim handed back to a restore
** transaction, - an eviction, - a rolled-back load. */
#define SLOTS_PEAK                                                          \
  "WITH d AS (SELECT seq, worker, CASE"                                     \
  " WHEN kind=" KIND("adapter_load_started") " AND"                         \
  "  coalesce(detail, '') <> 'restore' THEN 1"                              \
  " WHEN kind=" KIND("adapter_restoring") " THEN 1"                         \
  " WHEN kind=" KIND("adapter_evicted") " THEN -1"                          \
  " WHEN kind=" KIND("load_rolled_back") " THEN -1 ELSE 0 END AS dl"        \
  " FROM events)"                                                           \
  " SELECT max(s) FROM (SELECT sum(dl) OVER (PARTITION BY worker"           \
  " ORDER BY seq) AS s FROM d)"

TestSuite(vllm, .init = mk_tmp, .fini = rm_tmp);

/* ---- max_loras ------------------------------------------------------------ */

Test(vllm, max_loras_bounds_every_iteration_and_starves_no_one) {
  /* tiny.json: 2 workers, 24 adapters, 600 requests, load failures */
  variant("tiny", "free", NULL, NULL);
  variant("tiny", "cap", "\"max_batch_requests\": 8",
          "\"max_batch_requests\": 8, \"max_loras\": 2");
  replay("free");
  replay("cap");
  /* without the cap some batch mixes more than two adapters */
  cr_assert_gt(q("free", "SELECT max(distinct_adapters) FROM iterations"), 2);
  /* with it, none does, on any worker */
  cr_assert_eq(q("cap", "SELECT max(distinct_adapters) FROM iterations"), 2);
  cr_assert_eq(q("cap", "SELECT count(*) FROM iterations WHERE "
                        "distinct_adapters > 2"),
               0);
  /* nobody is left waiting: the cap skips, it never drops a request */
  cr_assert_eq(q("cap", "SELECT count(*) FROM requests WHERE "
                        "outcome='unfinished'"),
               0);
  cr_assert_eq(q("cap", "SELECT count(*) FROM requests WHERE "
                        "outcome='ok'"),
               q("free", "SELECT count(*) FROM requests WHERE outcome='ok'"));
  cr_assert_eq(q("cap", "SELECT count(*) FROM events WHERE kind="
                        KIND("admission_rejected")
                        " AND detail <> 'adapter_load_failed'"),
               0);
}

Test(vllm, max_loras_keeps_the_first_choice_ahead) {
  /* one worker, max_loras 1: request 0 (adapter 0, 30 tokens) runs first;
  ** request 1 (adapter 1) arrives next and is fcfs's first choice from
  ** then on; requests 2..5 (adapter 0) arrive while request 0 runs */
  variant("vllm-cap", "cap", NULL, NULL);
  variant("vllm-cap", "free", "\"max_loras\": 1", "\"max_loras\": 0");
  replay("cap");
  replay("free");
  cr_assert_eq(q("free", "SELECT max(distinct_adapters) FROM iterations"), 2);
  cr_assert_eq(q("cap", "SELECT max(distinct_adapters) FROM iterations"), 1);
  cr_assert_eq(q("cap", "SELECT count(*) FROM requests WHERE outcome='ok'"),
               6);
  /* request 1 waits for adapter 0's batch to drain, then runs */
  cr_assert_gt(q("cap", "SELECT first_token_tick FROM requests WHERE "
                        "request=1"),
               q("cap", "SELECT finish_tick FROM requests WHERE request=0"));
  /* and no later request of adapter 0 overtook it */
  cr_assert_eq(q("cap", "SELECT count(*) FROM requests WHERE request >= 2 "
                        "AND first_token_tick <= (SELECT first_token_tick "
                        "FROM requests WHERE request=1)"),
               0);
  /* without the cap request 1 joins the running batch at once */
  cr_assert_lt(q("free", "SELECT first_token_tick FROM requests WHERE "
                         "request=1"),
               q("free", "SELECT finish_tick FROM requests WHERE request=0"));
}

/* ---- the host tier ---------------------------------------------------------- */

/* ceil(x / y) for the tick arithmetic below */
static int64_t cdiv(int64_t x, int64_t y) { return (x + y - 1) / y; }

/* Ticks of a load of `bytes` under vllm-host.json: disk (on a miss) and
** host-to-device stages, each rounded up to whole ticks of 1000 ns. */
static int64_t load_ticks(int64_t bytes, int miss) {
  const double h2d_gbps = 0.04096, disk_gbps = 0.004096;
  const int64_t load_fixed_us = 20, disk_fixed_us = 500, ns_per_tick = 1000;
  /* bytes / GB/s is ns; both bandwidths divide 4096 bytes exactly */
  int64_t h2d = (int64_t)(bytes / h2d_gbps + 0.5) + load_fixed_us * 1000;
  int64_t disk = (int64_t)(bytes / disk_gbps + 0.5) + disk_fixed_us * 1000;
  return cdiv(h2d, ns_per_tick) + (miss ? cdiv(disk, ns_per_tick) : 0);
}

/* load duration of request r's adapter load: completed - started */
static double load_span(const char *db, int r) {
  char sql[512];
  snprintf(sql, sizeof sql,
           "SELECT c.tick - s.tick FROM events s JOIN events c ON "
           "c.adapter = s.adapter AND c.generation = s.generation AND "
           "c.kind = " KIND("adapter_load_completed") " WHERE s.kind = "
           KIND("adapter_load_started") " AND s.request = %d",
           r);
  return q(db, sql);
}

static double host_kind_of(const char *db, int r) {
  char sql[256];
  snprintf(sql, sizeof sql,
           "SELECT k.name = 'adapter_host_hit' FROM events e JOIN event_kinds "
           "k USING (kind) WHERE e.request = %d AND k.name IN "
           "('adapter_host_hit', 'adapter_disk_read')",
           r);
  return q(db, sql);
}

Test(vllm, host_tier_hits_skip_the_disk_and_the_lru_drops_the_oldest) {
  /* one adapter fits the device at a time: every request reloads; the host
  ** tier holds two.  Adapters by request: 0, 1, 0, 2, 1. */
  variant("vllm-host", "host", NULL, NULL);
  variant("vllm-host", "off",
          ", \"max_cpu_loras\": 2, \"disk_gbps\": 0.004096, "
          "\"disk_fixed_us\": 500",
          "");
  replay("host");
  replay("off");
  int64_t bytes = (int64_t)q("host", "SELECT min(bytes) FROM events WHERE "
                                     "kind=" KIND("adapter_load_started"));
  cr_assert_eq(bytes, (int64_t)q("host", "SELECT max(bytes) FROM events "
                                         "WHERE kind="
                                         KIND("adapter_load_started")));
  cr_assert_eq(q("host", "SELECT count(*) FROM events WHERE kind="
                         KIND("adapter_load_started")),
               5);
  /* request 0, 1: cold, read from disk, then copied */
  for (int r = 0; r <= 1; r++) {
    cr_assert_eq(host_kind_of("host", r), 0, "request %d", r);
    cr_assert_eq(load_span("host", r), load_ticks(bytes, 1), "request %d", r);
  }
  /* request 2: adapter 0 again, evicted from the device but in the host
  ** tier: the copy alone */
  cr_assert_eq(host_kind_of("host", 2), 1);
  cr_assert_eq(load_span("host", 2), load_ticks(bytes, 0));
  cr_assert_lt(load_ticks(bytes, 0), load_ticks(bytes, 1));
  /* request 3: adapter 2 is new; the full tier drops adapter 1, the least
  ** recently touched (adapter 0 was touched by request 2) */
  cr_assert_eq(host_kind_of("host", 3), 0);
  cr_assert_eq(q("host", "SELECT adapter FROM events WHERE kind="
                         KIND("adapter_host_dropped") " ORDER BY seq LIMIT 1"),
               1);
  /* request 4: adapter 1 again, dropped from the host: disk again */
  cr_assert_eq(host_kind_of("host", 4), 0);
  cr_assert_eq(load_span("host", 4), load_ticks(bytes, 1));
  /* the summary counts them */
  cr_assert_eq(q("host", "SELECT value FROM runs_summary WHERE "
                         "key='adapter_host_hits'"),
               1);
  cr_assert_eq(q("host", "SELECT value FROM runs_summary WHERE "
                         "key='adapter_disk_reads'"),
               4);
  cr_assert_eq(q("host", "SELECT value FROM runs_summary WHERE "
                         "key='adapter_disk_read_bytes'"),
               4 * bytes);
  cr_assert_eq(q("host", "SELECT value FROM runs_summary WHERE "
                         "key='adapter_host_dropped'"),
               2);
  /* the event log's ledger accepts the host events (lorasim audit) */
  cr_assert_eq(lorasim("audit host.db"), 0, "%s", out);
  cr_assert_not_null(strstr(out, "0 findings"), "%s", out);
  /* tier off: every load is the copy alone, no host event, no figure */
  for (int r = 0; r <= 4; r++)
    cr_assert_eq(load_span("off", r), load_ticks(bytes, 0), "request %d", r);
  cr_assert_eq(q("off", "SELECT count(*) FROM events WHERE kind IN ("
                        KIND("adapter_host_hit") ", "
                        KIND("adapter_disk_read") ", "
                        KIND("adapter_host_dropped") ")"),
               0);
  cr_assert_eq(q("off", "SELECT count(*) FROM runs_summary WHERE key LIKE "
                        "'adapter_host%' OR key LIKE 'adapter_disk%'"),
               0);
}

/* ---- padded-rank slots ------------------------------------------------------ */

Test(vllm, padded_slots_pad_pages_refuse_large_ranks_and_cap_slots) {
  /* 12 adapters of rank 8 or 64; slots of rank 32, three per worker */
  variant("vllm-slots", "slots", NULL, NULL);
  variant("vllm-slots", "plain", "\"max_loras\": 3, \"max_lora_rank\": 32 ",
          "\"max_loras\": 3 ");
  replay("slots");
  replay("plain");
  /* each adapter's rank from its bytes in the unpadded run:
  ** layers x r x (d_in + d_out) x dtype = 2 x r x 512 x 2 */
  const char *ranks =
      "WITH rk AS (SELECT DISTINCT adapter, bytes / 2048 AS rank FROM "
      "plain.events WHERE kind=" KIND("adapter_generation_published") ") ";
  char path[512], sql[2048];
  snprintf(path, sizeof path, "%s/plain.db", tmpdir);
  /* pages of one tensor-layout module with effective rank L x r:
  ** H = page_bytes / dtype = 2048 elements; ceil(L r 256 / H) twice */
  int64_t pad = 2 * cdiv(2 * 32 * 256, 2048), own = 2 * cdiv(2 * 8 * 256, 2048);
  cr_assert_neq(pad, own);
  /* every publication holds the padded slot's pages, whatever the rank */
  cr_assert_eq(q("slots", "SELECT count(*) FROM events WHERE kind="
                          KIND("adapter_generation_published")),
               q("slots", "SELECT count(*) FROM events WHERE kind="
                          KIND("adapter_generation_published")
                          " AND pages = 16"));
  cr_assert_eq(pad, 16);
  cr_assert_gt(q("slots", "SELECT count(*) FROM events WHERE kind="
                          KIND("adapter_generation_published")),
               0);
  cr_assert_eq(q("plain", "SELECT max(pages) FROM events WHERE kind="
                          KIND("adapter_generation_published")
                          " AND bytes = 2048 * 8"),
               own);
  /* a rank-64 adapter's requests are refused at arrival with the reason;
  ** no rank-8 request is */
  sqlite3 *h;
  char sp[512];
  snprintf(sp, sizeof sp, "%s/slots.db", tmpdir);
  cr_assert_eq(sqlite3_open_v2(sp, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  snprintf(sql, sizeof sql, "ATTACH '%s' AS plain", path);
  cr_assert_eq(sqlite3_exec(h, sql, NULL, NULL, NULL), SQLITE_OK);
  struct {
    const char *what;
    const char *sql;
    double want; /* -1: > 0 */
  } checks[] = {
      {"rank-64 requests", "SELECT count(*) FROM requests r JOIN rk USING "
                           "(adapter) WHERE rk.rank = 64",
       -1},
      {"rank-64 requests not refused for their rank",
       "SELECT count(*) FROM requests r JOIN rk USING (adapter) WHERE "
       "rk.rank = 64 AND (r.outcome <> 'rejected' OR NOT EXISTS (SELECT 1 "
       "FROM events e WHERE e.request = r.request AND e.kind = "
       KIND("admission_rejected") " AND e.detail = "
       "'rank_over_max_lora_rank'))",
       0},
      {"rank-8 requests refused for their rank",
       "SELECT count(*) FROM requests r JOIN rk USING (adapter) WHERE "
       "rk.rank = 8 AND EXISTS (SELECT 1 FROM events e WHERE e.request = "
       "r.request AND e.detail = 'rank_over_max_lora_rank')",
       0},
      {"refusals for the rank",
       "SELECT count(*) FROM events WHERE detail = 'rank_over_max_lora_rank'",
       -1},
      {"rank-64 adapters loaded", "SELECT count(*) FROM events e JOIN rk "
                                  "USING (adapter) WHERE rk.rank = 64 AND "
                                  "e.kind = " KIND("adapter_load_started"),
       0},
  };
  for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++) {
    char full[2048];
    snprintf(full, sizeof full, "%s%s", ranks, checks[i].sql);
    sqlite3_stmt *st;
    cr_assert_eq(sqlite3_prepare_v2(h, full, -1, &st, NULL), SQLITE_OK,
                 "%s: %s", checks[i].what, sqlite3_errmsg(h));
    cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
    double v = sqlite3_column_double(st, 0);
    sqlite3_finalize(st);
    if (checks[i].want < 0)
      cr_assert_gt(v, 0, "%s", checks[i].what);
    else
      cr_assert_eq(v, checks[i].want, "%s: %g", checks[i].what, v);
  }
  sqlite3_close(h);
  /* slots: never more than max_loras held at once, and the cap binds
  ** (the unpadded run holds more adapters than that) */
  cr_assert_leq(q("slots", SLOTS_PEAK), 3);
  cr_assert_gt(q("plain", SLOTS_PEAK), 3);
  /* every row computes at the slot's rank: padded rows are 32 x rows, and
  ** with only rank-8 adapters served the ratio is exactly 4 */
  cr_assert_eq(q("slots", "SELECT count(*) FROM iterations WHERE "
                          "padded_rank_rows <> 32 * (prefill_rows + "
                          "decode_rows)"),
               0);
  cr_assert_eq(q("slots", "SELECT value FROM runs_summary WHERE "
                          "key='rank_padding_ratio'"),
               4.0);
  cr_assert_lt(q("plain", "SELECT value FROM runs_summary WHERE "
                          "key='rank_padding_ratio'"),
               4.0);
  /* the batch cap holds too (max_loras 3) */
  cr_assert_leq(q("slots", "SELECT max(distinct_adapters) FROM iterations"),
                3);
  cr_assert_eq(lorasim("audit slots.db"), 0, "%s", out);
  cr_assert_not_null(strstr(out, "0 findings"), "%s", out);
  /* same seed, same rows */
  cr_assert_eq(lorasim("replay slots.json --db again.db --quiet --no-plots"),
               0, "%s", out);
  const char *digest =
      "SELECT count(*) || ':' || sum(seq * 7 + tick * 13 + kind * 17 + "
      "coalesce(value, 0) * 19 + coalesce(pages, 0) * 23) FROM events";
  cr_assert_eq(q("slots", digest), q("again", digest));
}

/* ---- validation ---------------------------------------------------------------- */

Test(vllm, bad_knobs_are_refused_with_code_and_path) {
  struct {
    const char *fixture, *from, *to, *code, *path;
  } bad[] = {
      {"vllm-slots", "\"max_loras\": 3, ", "", "E_SCN_CONFLICT",
       "$.workers.max_lora_rank"},
      {"vllm-slots", "\"max_lora_rank\": 32", "\"max_lora_rank\": 4",
       "E_SCN_CONFLICT", "$.workers.max_lora_rank"},
      {"vllm-slots", "\"max_loras\": 3", "\"max_loras\": -1", "E_SCN_RANGE",
       "$.workers.max_loras"},
      {"vllm-slots", "\"max_loras\": 3", "\"max_loras\": 2.5",
       "E_SCN_NOT_INTEGER", "$.workers.max_loras"},
      {"vllm-host", ", \"disk_gbps\": 0.004096", "", "E_SCN_MISSING",
       "$.workers.disk_gbps"},
      {"vllm-host", "\"max_cpu_loras\": 2, ", "", "E_SCN_CONFLICT",
       "$.workers.disk_gbps"},
      {"vllm-host", "\"disk_gbps\": 0.004096", "\"disk_gbps\": 0",
       "E_SCN_RANGE", "$.workers.disk_gbps"},
      {"vllm-host", "\"max_cpu_loras\": 2,", "\"max_cpu_loras\": 2, "
                                             "\"max_loras\": 3,",
       "E_SCN_CONFLICT", "$.workers.max_cpu_loras"},
      {"vllm-host", "\"max_cpu_loras\": 2,", "\"max_cpu_lora\": 2,",
       "E_SCN_UNKNOWN_KEY", "$.workers.max_cpu_lora"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char name[32], args[128], db[512];
    snprintf(name, sizeof name, "bad%zu", i);
    variant(bad[i].fixture, name, bad[i].from, bad[i].to);
    snprintf(args, sizeof args, "replay %s.json --db %s.db --no-plots", name,
             name);
    cr_assert_eq(lorasim(args), 2, "case %zu: %s", i, out);
    cr_assert_not_null(strstr(out, bad[i].code), "case %zu: %s", i, out);
    cr_assert_not_null(strstr(out, bad[i].path), "case %zu: %s", i, out);
    snprintf(db, sizeof db, "%s/%s.db", tmpdir, name);
    struct stat stbuf;
    cr_assert_neq(stat(db, &stbuf), 0, "case %zu wrote %s", i, db);
  }
}
