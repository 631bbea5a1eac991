/*
** test_prefix_replay.c: `lorasim replay` with the adapter-aware prefix cache
** ($.prefix_cache, docs/PREFIX.md "The prefix cache in the replay").
**
** A four-request native trace shares its prefix blocks across two
** adapters, one request at a time (each finishes before the next
** arrives), so every hit is predictable:
**
**   r0 adapter 0  blocks A B C D   publishes A B C D (adapter 0's rows)
**   r1 adapter 1  blocks A B C D   semantic: miss; oblivious: 4 corrupt
**   r2 adapter 0  blocks A B C D   hit 4 (both modes), prefill 266 - 256
**   r3 adapter 1  blocks A B E F   semantic: hit 2 (r1's rows);
**                                  oblivious: hit 2, both corrupt
**
** The runs are read back from the SQLite rows and audited (engine/ledger.c).
** A hand-driven engine checks that publishing, releasing and reclaiming
** keeps the pool conserved, and a slice of the real Mooncake trace (skipped
** when absent) replays with hits.
*/
#include <criterion/criterion.h>
#include <openssl/evp.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/engine.h"
#include "engine/ledger.h"
#include "engine/prefix.h"
#include "sim/audit.h"
#include "sim/compare.h"
#include "sim/replay.h"
#include "sim/scenario.h"

#define MOONCAKE \
  LSIM_SOURCE_DIR "/../shared/data/traces/mooncake-fast25/conversation_trace.jsonl"

static char tmpdir[256];

static void mk_tmp(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/lsim-pxreplay-XXXXXX");
  cr_assert_not_null(mkdtemp(tmpdir));
}

static void rm_tmp(void) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  cr_assert_eq(system(cmd), 0);
}

TestSuite(prefix_replay, .init = mk_tmp, .fini = rm_tmp);

/* ---- fixtures ------------------------------------------------------------ */

static const char trace_csv[] =
    "arrival_ms,tenant,adapter,prompt_tokens,output_tokens,prefix_blocks\n"
    "0,0,0,266,4,11 12 13 14 15\n"
    "1000,0,1,266,4,11 12 13 14 15\n"
    "2000,0,0,266,4,11 12 13 14 15\n"
    "3000,0,1,266,4,11 12 31 32 33\n";

/* The scenario around the trace; `px` is the $.prefix_cache member (with
** its leading comma) or "". */
static void write_scenario(const char *name, const char *trace,
                           const char *extra_trace, const char *px) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", tmpdir, name);
  FILE *f = fopen(p, "w");
  cr_assert_not_null(f);
  fprintf(f,
          "{\"name\": \"pfx\", \"seed\": 7, \"ns_per_tick\": 1000,\n"
          " \"backend\": \"model\",\n"
          " \"policies\": {\"scheduler\": \"fcfs\", \"evict\": \"lru\", "
          "\"prefetch\": \"none\"},\n"
          " \"workers\": {\"count\": 1, \"pool_pages\": 2048, \"page_bytes\": "
          "2097152, \"h2d_gbps\": 25.0, \"load_fixed_us\": 200, "
          "\"max_batch_tokens\": 16384, \"max_batch_requests\": 16, "
          "\"prefill_chunk\": 8192},\n"
          " \"model\": {\"layers\": 32, \"kv_heads\": 8, \"head_dim\": 128, "
          "\"dtype_bytes\": 2, \"targets\": [{\"name\": \"q_proj\", \"d_in\": "
          "4096, \"d_out\": 4096}, {\"name\": \"v_proj\", \"d_in\": 4096, "
          "\"d_out\": 1024}]},\n"
          " \"cost\": {\"iter_fixed_ns\": 1000000, \"prefill_token_ns\": "
          "20000, \"decode_token_ns\": 50000, \"segment_ns\": 1000, "
          "\"rank_row_ps\": 100},\n"
          " \"adapters\": {\"count\": 4, \"ranks\": [{\"rank\": 8, "
          "\"weight\": 1}], \"zipf_s\": 1.0},\n"
          " \"tenants\": [{\"name\": \"t\", \"traffic_weight\": 1}],\n"
          " \"trace\": {\"file\": \"%s\"%s},\n"
          " \"faults\": {\"load_failure_rate\": 0, \"max_load_attempts\": 4}%s\n"
          "}\n",
          trace, extra_trace, px);
  cr_assert_eq(fclose(f), 0);
}

static void write_trace(void) {
  char p[512];
  snprintf(p, sizeof p, "%s/t.csv", tmpdir);
  FILE *f = fopen(p, "w");
  cr_assert_not_null(f);
  fputs(trace_csv, f);
  cr_assert_eq(fclose(f), 0);
}

/* Replay scenario `name` into DB `db` (both in tmpdir). */
static void replay(const char *name, const char *db, lsim_summary *s) {
  static lsim_scenario sc;
  char sp[512], dp[512];
  snprintf(sp, sizeof sp, "%s/%s", tmpdir, name);
  snprintf(dp, sizeof dp, "%s/%s", tmpdir, db);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_scenario_load(&sc, sp, &eb), 0, "%s", eb.msg);
  lsim_replay_opts o = {.db_path = dp, .command_line = "test"};
  cr_assert_eq(lsim_replay_run(&sc, &o, s, &eb), 0, "%s", eb.msg);
  cr_assert_str_eq(s->status, "ok");
}

/* The small trace under mode `mode` ("" for no key at all). */
static void run_mode(const char *mode, const char *db, lsim_summary *s) {
  char name[64], px[128] = "";
  write_trace();
  if (mode[0])
    snprintf(px, sizeof px, ",\n \"prefix_cache\": {\"mode\": \"%s\", "
             "\"block_tokens\": 64}", mode);
  snprintf(name, sizeof name, "s-%s.json", mode[0] ? mode : "nokey");
  write_scenario(name, "t.csv", "", px);
  replay(name, db, s);
}

/* One integer from `sql` (printf-formatted) on tmpdir/db. */
static int64_t q1(const char *db, const char *fmt, ...) {
  char sql[1024], p[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(sql, sizeof sql, fmt, ap);
  va_end(ap);
  snprintf(p, sizeof p, "%s/%s", tmpdir, db);
  sqlite3 *h;
  sqlite3_stmt *st;
  cr_assert_eq(sqlite3_open_v2(p, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK, "%s: %s",
               sql, sqlite3_errmsg(h));
  cr_assert_eq(sqlite3_step(st), SQLITE_ROW, "%s", sql);
  int64_t v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(h);
  return v;
}

/* SHA-256 over every event row and request record, in order. */
static void digest(const char *db, char hex[65]) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", tmpdir, db);
  sqlite3 *h;
  cr_assert_eq(sqlite3_open_v2(p, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
  const char *q[2] = {
      "SELECT seq,tick,kind,worker,request,tenant,adapter,generation,"
      "attempt,pages,bytes,value,detail FROM events ORDER BY seq",
      "SELECT * FROM requests ORDER BY request"};
  for (int k = 0; k < 2; k++) {
    sqlite3_stmt *st;
    cr_assert_eq(sqlite3_prepare_v2(h, q[k], -1, &st, NULL), SQLITE_OK, "%s",
                 sqlite3_errmsg(h));
    while (sqlite3_step(st) == SQLITE_ROW) {
      for (int c = 0; c < sqlite3_column_count(st); c++) {
        const unsigned char *t = sqlite3_column_text(st, c);
        const char *v = t ? (const char *)t : "\\N";
        EVP_DigestUpdate(ctx, v, strlen(v));
        EVP_DigestUpdate(ctx, "\x1f", 1);
      }
      EVP_DigestUpdate(ctx, "\x1e", 1);
    }
    sqlite3_finalize(st);
  }
  unsigned char md[32];
  EVP_DigestFinal_ex(ctx, md, NULL);
  EVP_MD_CTX_free(ctx);
  for (int i = 0; i < 32; i++)
    sprintf(hex + 2 * i, "%02x", md[i]);
  sqlite3_close(h);
}

static void audit_clean(const char *db) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", tmpdir, db);
  lsim_audit_report rep;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_audit_db(p, NULL, &rep, &eb), 0, "%s", eb.msg);
  cr_assert_eq(rep.findings, 0);
}

#define HIT LSIM_EV_PREFIX_HIT
#define CORRUPT LSIM_EV_PREFIX_CORRUPT
#define PUBLISHED LSIM_EV_PREFIX_PUBLISHED
#define DEBIT LSIM_EV_COMPLETED_SERVICE_DEBITED

static int64_t hit_of(const char *db, int req) {
  return q1(db, "SELECT generation FROM events WHERE kind=%d AND request=%d",
            HIT, req);
}

static int64_t corrupt_of(const char *db, int req) {
  return q1(db, "SELECT coalesce(sum(generation), 0) FROM events WHERE "
                "kind=%d AND request=%d", CORRUPT, req);
}

static int64_t prefill_of(const char *db, int req) {
  return q1(db, "SELECT sum(value) FROM events WHERE kind=%d AND request=%d "
                "AND detail='prefill'", DEBIT, req);
}

static int64_t ttft_of(const char *db, int req) {
  return q1(db, "SELECT first_token_tick - arrival_tick FROM requests WHERE "
                "request=%d", req);
}

/* ---- the small trace ----------------------------------------------------- */

Test(prefix_replay, semantic_hits_only_within_an_adapter) {
  lsim_summary s, off;
  run_mode("semantic", "sem.db", &s);
  run_mode("off", "off.db", &off);
  /* 4 full blocks of 64 tokens each (the fifth hash is the partial tail) */
  cr_assert_eq(q1("sem.db", "SELECT count(*) FROM events WHERE kind=%d AND "
                            "attempt=4", HIT), 4);
  cr_assert_eq(hit_of("sem.db", 0), 0);
  cr_assert_eq(hit_of("sem.db", 1), 0); /* adapter 1: none of adapter 0's */
  cr_assert_eq(hit_of("sem.db", 2), 4);
  cr_assert_eq(hit_of("sem.db", 3), 2); /* A B of r1, adapter 1 */
  cr_assert_eq(q1("sem.db", "SELECT count(*) FROM events WHERE kind=%d",
                  CORRUPT), 0);
  cr_assert_eq(s.prefix_corrupt_reuses, 0);
  /* the metrics file carries the same figures (only when the cache is on) */
  char pp[512], line[256], want[128];
  snprintf(pp, sizeof pp, "%s/sem.prom", tmpdir);
  snprintf(want, sizeof want, "lorasim_prefix_reused_tokens_total %lld\n",
           (long long)s.prefix_reused_tokens);
  FILE *pf = fopen(pp, "r");
  cr_assert_not_null(pf, "%s", pp);
  int found = 0;
  while (fgets(line, sizeof line, pf))
    found |= strcmp(line, want) == 0;
  fclose(pf);
  cr_assert(found && s.prefix_reused_tokens > 0, "no '%s' in %s", want, pp);
  snprintf(pp, sizeof pp, "%s/off.prom", tmpdir);
  pf = fopen(pp, "r");
  cr_assert_not_null(pf, "%s", pp);
  found = 0;
  while (fgets(line, sizeof line, pf))
    found |= strncmp(line, "lorasim_prefix_", 15) == 0;
  fclose(pf);
  cr_assert(!found, "the cache is off but %s has prefix metrics", pp);
  /* the first row shrinks by the reused tokens */
  cr_assert_eq(prefill_of("off.db", 2), 266);
  cr_assert_eq(prefill_of("sem.db", 2), 266 - 256);
  cr_assert_eq(prefill_of("sem.db", 3), 266 - 128);
  cr_assert_eq(prefill_of("sem.db", 1), 266);
  cr_assert_eq(q1("sem.db", "SELECT value FROM events WHERE kind=%d AND "
                            "request=2", HIT), 256);
  /* and its first token comes sooner */
  cr_assert_lt(ttft_of("sem.db", 2), ttft_of("off.db", 2));
  cr_assert_lt(ttft_of("sem.db", 3), ttft_of("off.db", 3));
  cr_assert_eq(ttft_of("sem.db", 1), ttft_of("off.db", 1));
  cr_assert_lt(s.ttft_p50_ms, off.ttft_p50_ms);
  /* published: r0 and r1 four each, r3 its two new blocks */
  cr_assert_eq(q1("sem.db", "SELECT sum(generation) FROM events WHERE "
                            "kind=%d", PUBLISHED), 10);
  cr_assert_eq(s.prefix_lookups, 4);
  cr_assert_eq(s.prefix_reused_tokens, 256 + 128);
  cr_assert_eq(s.prefix_published_blocks, 10);
  cr_assert_float_eq(s.prefix_hit_rate, 0.5, 1e-12);
  cr_assert_float_eq(s.prefix_block_hit_rate, 6.0 / 16.0, 1e-12);
  /* summary keys stored, exact from the log */
  cr_assert_eq(q1("sem.db", "SELECT value FROM runs_summary WHERE "
                            "key='prefix_reused_tokens'"), 384);
  cr_assert_eq(q1("sem.db", "SELECT count(*) FROM runs_evidence WHERE key "
                            "LIKE 'prefix_%%' AND class='exact'"), 8);
  cr_assert_eq(q1("off.db", "SELECT count(*) FROM runs_summary WHERE key "
                            "LIKE 'prefix_%%'"), 0);
  audit_clean("sem.db");
  audit_clean("off.db");
}

Test(prefix_replay, oblivious_counts_corrupt_reuse) {
  lsim_summary s, sem;
  run_mode("oblivious", "obl.db", &s);
  run_mode("semantic_alora", "alora.db", &sem);
  cr_assert_eq(hit_of("obl.db", 1), 4);
  cr_assert_eq(corrupt_of("obl.db", 1), 4);
  cr_assert_eq(hit_of("obl.db", 2), 4);
  cr_assert_eq(corrupt_of("obl.db", 2), 0); /* adapter 0's own rows */
  cr_assert_eq(hit_of("obl.db", 3), 2);
  cr_assert_eq(corrupt_of("obl.db", 3), 2);
  cr_assert_eq(s.prefix_corrupt_reuses, 6);
  cr_assert_eq(s.prefix_corrupt_requests, 2);
  cr_assert_eq(q1("obl.db", "SELECT value FROM runs_summary WHERE "
                            "key='prefix_corrupt_reuses'"), 6);
  /* the correct modes never take another adapter's rows */
  cr_assert_eq(sem.prefix_corrupt_reuses, 0);
  cr_assert_eq(hit_of("alora.db", 1), 0);
  audit_clean("obl.db");
  audit_clean("alora.db");
}

Test(prefix_replay, deterministic_and_off_is_unchanged) {
  lsim_summary s;
  char a[65], b[65];
  run_mode("semantic", "a.db", &s);
  run_mode("semantic", "b.db", &s);
  digest("a.db", a);
  digest("b.db", b);
  cr_assert_str_eq(a, b);
  /* "off" is the replay without the key, row for row */
  run_mode("off", "off.db", &s);
  run_mode("", "nokey.db", &s);
  digest("off.db", a);
  digest("nokey.db", b);
  cr_assert_str_eq(a, b);
  cr_assert_eq(q1("off.db", "SELECT count(*) FROM events WHERE kind>=%d AND "
                            "kind<=%d", HIT, CORRUPT), 0);
}

/* A hotswap of adapter 0 between r0 and r2 makes r0's rows another
** execution's: r2 misses (r3 still finds adapter 1's). */
Test(prefix_replay, hotswapped_version_is_not_reused) {
  lsim_summary s;
  write_trace();
  write_scenario("hs.json", "t.csv", "",
                 ",\n \"prefix_cache\": {\"mode\": \"semantic\", "
                 "\"block_tokens\": 64},\n \"hotswaps\": [{\"at_s\": 1.5, "
                 "\"adapter\": 0, \"mode\": \"shadow\"}]");
  replay("hs.json", "hs.db", &s);
  cr_assert_eq(hit_of("hs.db", 2), 0);
  cr_assert_eq(hit_of("hs.db", 3), 2);
  cr_assert_eq(prefill_of("hs.db", 2), 266);
  audit_clean("hs.db");
}

/* The audit refuses a publication past the request's full blocks and an
** eviction of more blocks than the worker holds. */
Test(prefix_replay, ledger_refuses_bad_prefix_events) {
  lsim_summary s;
  run_mode("semantic", "sem.db", &s);
  char p[512];
  snprintf(p, sizeof p, "%s/sem.db", tmpdir);
  for (int bad = 0; bad < 3; bad++) {
    sqlite3 *h;
    sqlite3_stmt *st;
    cr_assert_eq(sqlite3_open_v2(p, &h, SQLITE_OPEN_READONLY, NULL),
                 SQLITE_OK);
    cr_assert_eq(sqlite3_prepare_v2(
                     h,
                     "SELECT seq,tick,kind,worker,request,tenant,adapter,"
                     "generation,attempt,pages,bytes,value,detail FROM "
                     "events ORDER BY seq",
                     -1, &st, NULL),
                 SQLITE_OK);
    lsim_ledger *l;
    lsim_ledger_cfg cfg = {1, 4, 4};
    lsim_errbuf eb = LSIM_ERRBUF_INIT;
    cr_assert_eq(lsim_ledger_new(&l, &cfg, &eb), 0);
    lsim_err rc = 0;
    int mutated = 0;
    while (!rc && sqlite3_step(st) == SQLITE_ROW) {
      lsim_event ev;
      ev.seq = sqlite3_column_int64(st, 0);
      ev.tick = sqlite3_column_int64(st, 1);
      ev.kind = sqlite3_column_int(st, 2);
      int64_t cols[9];
      for (int c = 0; c < 9; c++)
        cols[c] = sqlite3_column_type(st, 3 + c) == SQLITE_NULL
                      ? LSIM_NONE
                      : sqlite3_column_int64(st, 3 + c);
      ev.worker = (int)cols[0];
      ev.request = cols[1];
      ev.tenant = (int)cols[2];
      ev.adapter = (int)cols[3];
      ev.generation = cols[4];
      ev.attempt = (int)cols[5];
      ev.pages = cols[6];
      ev.bytes = cols[7];
      ev.value = cols[8];
      const unsigned char *d = sqlite3_column_text(st, 12);
      char detail[64] = "";
      if (d)
        snprintf(detail, sizeof detail, "%s", (const char *)d);
      ev.detail = d ? detail : NULL;
      if (!mutated && bad == 0 && ev.kind == PUBLISHED) {
        ev.generation += 1; /* one block more than the prompt holds */
        mutated = 1;
      } else if (!mutated && bad == 1 && ev.kind == PUBLISHED) {
        ev.kind = LSIM_EV_PREFIX_EVICTED; /* more than the worker holds */
        ev.request = LSIM_NONE;
        ev.tenant = ev.adapter = LSIM_NONE;
        ev.detail = "reclaim";
        mutated = 1;
      } else if (!mutated && bad == 2 && ev.kind == HIT && ev.request == 2) {
        ev.kind = PUBLISHED; /* publication without the lookup */
        ev.generation = 1;
        ev.attempt = 0;
        ev.detail = NULL;
        mutated = 1;
      }
      rc = lsim_ledger_event(l, &ev, &eb);
    }
    sqlite3_finalize(st);
    sqlite3_close(h);
    lsim_ledger_release(l);
    cr_assert(mutated);
    cr_assert_eq(rc, LSIM_E_LOG_PREFIX, "case %d: %s", bad, eb.msg);
  }
}

/* ---- scenario validation ------------------------------------------------- */

static lsim_err parse_px(const char *px, const char *trace, lsim_errbuf *eb) {
  static lsim_scenario sc;
  char json[2048];
  snprintf(json, sizeof json,
           "{\"name\": \"v\", \"seed\": 1,"
           " \"workers\": {\"count\": 1, \"pool_pages\": 64, \"page_bytes\": "
           "4096, \"h2d_gbps\": 1, \"load_fixed_us\": 1, \"max_batch_tokens\":"
           " 64, \"max_batch_requests\": 4},"
           " \"model\": {\"layers\": 2, \"kv_heads\": 1, \"head_dim\": 8, "
           "\"dtype_bytes\": 2, \"targets\": [{\"name\": \"q_proj\", "
           "\"d_in\": 8, \"d_out\": 8}]},"
           " \"cost\": {\"iter_fixed_ns\": 1, \"prefill_token_ns\": 1, "
           "\"decode_token_ns\": 1, \"segment_ns\": 0, \"rank_row_ps\": 0},"
           " \"adapters\": {\"count\": 2, \"ranks\": [{\"rank\": 8, "
           "\"weight\": 1}], \"zipf_s\": 0},"
           " \"tenants\": [{\"name\": \"t\", \"traffic_weight\": 1}],"
           " \"trace\": %s%s}",
           trace, px);
  return lsim_scenario_parse(&sc, json, strlen(json), "v.json", tmpdir, eb);
}

Test(prefix_replay, scenario_validation) {
  write_trace();
  const char *file = "{\"file\": \"t.csv\"}";
  struct {
    const char *px;
    lsim_err code;
    const char *path;
  } cases[] = {
      {", \"prefix_cache\": {\"mode\": \"semantic\"}", 0, NULL},
      {", \"prefix_cache\": {\"mode\": \"off\", \"max_blocks\": 8}", 0, NULL},
      {", \"prefix_cache\": {\"mode\": \"magic\"}", LSIM_E_KV_SCN_MODE,
       "$.prefix_cache.mode"},
      {", \"prefix_cache\": {\"mode\": 3}", LSIM_E_KV_SCN_TYPE,
       "$.prefix_cache.mode"},
      {", \"prefix_cache\": {}", LSIM_E_KV_SCN_TYPE, "$.prefix_cache.mode"},
      {", \"prefix_cache\": [1]", LSIM_E_KV_SCN_TYPE, "$.prefix_cache"},
      {", \"prefix_cache\": {\"mode\": \"semantic\", \"blocks\": 1}",
       LSIM_E_KV_SCN_TYPE, "$.prefix_cache.blocks"},
      {", \"prefix_cache\": {\"mode\": \"semantic\", \"block_tokens\": 0}",
       LSIM_E_KV_SCN_RANGE, "$.prefix_cache.block_tokens"},
      {", \"prefix_cache\": {\"mode\": \"semantic\", \"block_tokens\": 1.5}",
       LSIM_E_KV_SCN_TYPE, "$.prefix_cache.block_tokens"},
      {", \"prefix_cache\": {\"mode\": \"semantic\", \"max_blocks\": -1}",
       LSIM_E_KV_SCN_RANGE, "$.prefix_cache.max_blocks"},
      {", \"prefix_cache\": {\"mode\": \"semantic_alora\", "
       "\"alora_fraction\": 0.25}",
       0, NULL},
      {", \"prefix_cache\": {\"mode\": \"semantic\", \"alora_fraction\": 1.5}",
       LSIM_E_KV_SCN_RANGE, "$.prefix_cache.alora_fraction"},
      {", \"prefix_cache\": {\"mode\": \"semantic\", \"alora_fraction\": -0.1}",
       LSIM_E_KV_SCN_RANGE, "$.prefix_cache.alora_fraction"},
      {", \"prefix_cache\": {\"mode\": \"semantic\", \"alora_fraction\": \"half\"}",
       LSIM_E_KV_SCN_TYPE, "$.prefix_cache.alora_fraction"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    lsim_errbuf eb = LSIM_ERRBUF_INIT;
    lsim_err rc = parse_px(cases[i].px, file, &eb);
    cr_assert_eq(rc, cases[i].code, "case %zu: %s", i, eb.msg);
    if (cases[i].path)
      cr_assert_not_null(strstr(eb.msg, cases[i].path), "case %zu: %s", i,
                         eb.msg);
  }
  /* a generated trace has no block hashes to reuse */
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(parse_px(", \"prefix_cache\": {\"mode\": \"semantic\"}",
                        "{\"generator\": {\"requests\": 4, \"rate_per_s\": 1,"
                        " \"prompt_tokens\": {\"dist\": \"fixed\", "
                        "\"value\": 8}, \"output_tokens\": {\"dist\": "
                        "\"fixed\", \"value\": 2}}}",
                        &eb),
               LSIM_E_KV_SCN_TRACE, "%s", eb.msg);
  cr_assert_not_null(strstr(eb.msg, "$.prefix_cache"));
  /* the claim audit knows the new keys as exact counts of the log */
  const char *keys[] = {"prefix_hit_rate", "prefix_reused_tokens",
                        "prefix_corrupt_reuses", "prefix_evicted_blocks"};
  for (int i = 0; i < 4; i++) {
    lsim_claim c = lsim_summary_claim(keys[i]);
    cr_assert_eq(c.claimed, LSIM_EVID_EXACT, "%s", keys[i]);
    cr_assert_eq(c.source, LSIM_SRC_LOG, "%s", keys[i]);
    cr_assert_eq(lsim_claim_audit(&c, "model", &eb), 0, "%s", eb.msg);
  }
}

/* lsim_res_kv_shrink: the highest slots go back to FREE, used pages are
** clamped, the object keeps at least one slot. */
Test(prefix_replay, kv_shrink_gives_slots_back) {
  int64_t ap[1] = {1};
  lsim_res_cfg rc = {10, 1, 1, ap, 0, LSIM_DIGEST_INIT};
  lsim_res *r;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_res_new(&r, &rc, &eb), 0, "%s", eb.msg);
  int kv;
  cr_assert_eq(lsim_res_kv_alloc(r, 7, 6, &kv, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_res_kv_shrink(r, kv, 2, &eb), 0, "%s", eb.msg);
  int64_t owned, used;
  cr_assert_eq(lsim_res_kv_pages(r, kv, &owned, &used, &eb), 0);
  cr_assert_eq(owned, 4);
  cr_assert_eq(used, 4);
  lsim_res_view v;
  lsim_res_view_get(r, &v);
  cr_assert_eq(v.free, 6);
  cr_assert_eq(v.kv, 4);
  /* the lowest slots stay: 0..3 are KV, 4 and 5 are free again */
  int st;
  int64_t own, gen;
  lsim_res_slot(r, 3, &st, &own, &gen);
  cr_assert_eq(st, LSIM_SLOT_KV);
  lsim_res_slot(r, 4, &st, &own, &gen);
  cr_assert_eq(st, LSIM_SLOT_FREE);
  cr_assert_eq(lsim_res_kv_shrink(r, kv, 4, &eb), LSIM_E_USAGE);
  cr_assert_eq(lsim_res_kv_shrink(r, kv, -1, &eb), LSIM_E_USAGE);
  cr_assert_eq(lsim_res_check(r, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_res_kv_release(r, kv, &eb), 0);
  lsim_res_view_get(r, &v);
  cr_assert_eq(v.free, 10);
  lsim_res_release(r);
}

/* ---- a hand-driven engine: release and reclaim conserve the pool --------- */

typedef struct pxd {
  int64_t evicted_reclaim, evicted_publish, hits, reused, published;
} pxd;

static lsim_err px_ev(void *ud, const lsim_event *ev) {
  pxd *d = ud;
  if (ev->kind == LSIM_EV_PREFIX_EVICTED) {
    if (strcmp(ev->detail, "reclaim") == 0)
      d->evicted_reclaim += ev->generation;
    else
      d->evicted_publish += ev->generation;
  } else if (ev->kind == LSIM_EV_PREFIX_HIT) {
    d->hits += ev->generation;
    d->reused += ev->value;
  } else if (ev->kind == LSIM_EV_PREFIX_PUBLISHED) {
    d->published += ev->generation;
  }
  return 0;
}

/* One page per token, 4-token blocks (4 pages each), a 40-page pool:
** requests of 13 prompt tokens (3 full blocks) and 2 output tokens. */
Test(prefix_replay, release_and_reclaim_conserve_the_pool) {
  static int rank[2] = {8, 8};
  static int64_t bytes[2] = {2, 2}, pages[2] = {2, 2};
  pxd d = {0};
  lsim_engine_prefix px = {LSIM_KV_KEYS_SEMANTIC, 4, 0, 2, 0};
  lsim_engine_cfg cfg = {
      .workers = 1, .pool_pages = 40, .page_bytes = 1,
      .max_batch_tokens = 64, .max_batch_requests = 4,
      .kv_bytes_per_token = 1, .max_load_attempts = 4, .ntenants = 1,
      .nadapters = 2, .adapter_rank = rank, .adapter_bytes = bytes,
      .adapter_pages = pages, .guard_pages = 0,
      .sched = lsim_sched_find("fcfs"), .evict = lsim_evict_find("lru"),
      .prefetch = lsim_prefetch_find("none"), .sink = {px_ev, NULL, &d, NULL},
      .prefix = &px};
  lsim_engine *e;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_engine_new(&e, &cfg, &eb), 0, "%s", eb.msg);
  /* r0 a0 X, r1 a1 Y, r2 a0 Z (needs a reclaim), r3 a1 Y again, r4 a0 X */
  static const uint64_t blk[3][3] = {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}};
  struct {
    lsim_tick t;
    int adapter, blocks;
  } arr[5] = {{0, 0, 0}, {20, 1, 1}, {40, 0, 2}, {60, 1, 1}, {80, 0, 0}};
  lsim_plan plan = LSIM_PLAN_INIT;
  lsim_load_start loads[8];
  lsim_tick load_end[8], iter_end = -1;
  int load_ad[8], nl = 0, busy = 0;
  for (lsim_tick t = 0; t < 120; t++) {
    for (int i = 0; i < nl; i++)
      if (load_end[i] == t) {
        cr_assert_eq(lsim_engine_load_done(e, 0, load_ad[i], t, 1, &eb), 0,
                     "%s", eb.msg);
        load_end[i] = -1;
      }
    if (busy && iter_end == t) {
      cr_assert_eq(lsim_engine_iter_done(e, 0, t, 1, &eb), 0, "%s", eb.msg);
      busy = 0;
    }
    for (int i = 0; i < 5; i++)
      if (arr[i].t == t) {
        lsim_arrival a = {i, 0, arr[i].adapter, 13, 2};
        int w;
        cr_assert_eq(lsim_engine_arrive_blocks(e, t, &a, blk[arr[i].blocks],
                                               3, &w, &eb),
                     0, "%s", eb.msg);
      }
    int n = 0, sel = 0;
    cr_assert_eq(lsim_engine_step(e, 0, t, loads, 8, &n, &plan, &sel, &eb), 0,
                 "%s", eb.msg);
    for (int i = 0; i < n; i++) {
      cr_assert_lt(nl, 8);
      load_ad[nl] = loads[i].adapter;
      load_end[nl++] = t + 1;
    }
    if (sel) {
      busy = 1;
      iter_end = t + 1;
    }
    /* pool conservation and the cache's own invariants, every tick */
    cr_assert(lsim_engine_check(e), "tick %lld", (long long)t);
    lsim_worker_view v;
    lsim_engine_worker_view(e, 0, &v);
    cr_assert_eq(v.free_pages + v.reserved_pages + v.adapter_pages +
                     v.kv_pages,
                 40);
  }
  cr_assert_eq(lsim_engine_live_requests(e), 0);
  lsim_prefix_stats st;
  lsim_engine_prefix_stats(e, 0, &st);
  /* nothing runs: the pool's KV pages are exactly the cached blocks */
  lsim_worker_view v;
  lsim_engine_worker_view(e, 0, &v);
  cr_assert_eq(v.kv_pages, st.live_blocks * 4);
  cr_assert_eq(st.lru_blocks, st.live_blocks); /* every reference released */
  cr_assert_gt(d.evicted_reclaim, 0, "r2 needed the LRU blocks' pages");
  cr_assert_eq(d.published - d.evicted_reclaim - d.evicted_publish,
               st.live_blocks);
  /* Worked by hand: after r1 the pool holds 2 + 2 adapter pages and X, Y
  ** (12 + 12), 12 free.  r2 (15 KV pages) reclaims X's tail block; r3
  ** reclaims X's other two and Y's tail (deepest blocks are released
  ** first), so it finds Y0 Y1 (adapter 1's own rows): 2 hits, 8 tokens,
  ** and republishes Y2.  r4 finds nothing of X.  Published: 3 + 3 + 3 +
  ** 1 + 3; evicted by reclaims: 1 + 3 + 1 (r4 needs Y2's pages back). */
  cr_assert_eq(d.hits, 2);
  cr_assert_eq(d.reused, 8);
  cr_assert_eq(d.published, 13);
  lsim_engine_release(e);
  lsim_plan_release(&plan);
}

/* ---- the real Mooncake trace ----------------------------------------------- */

Test(prefix_replay, mooncake_slice_hits) {
  struct stat stt;
  if (stat(MOONCAKE, &stt) != 0)
    cr_skip_test("Mooncake trace not found at %s: skipping", MOONCAKE);
  write_scenario("m.json", MOONCAKE,
                 ", \"format\": \"mooncake\", \"max_requests\": 200",
                 ",\n \"prefix_cache\": {\"mode\": \"semantic_alora\"}");
  lsim_summary s;
  replay("m.json", "m.db", &s);
  cr_assert_eq(s.arrived, 200);
  cr_assert_gt(s.prefix_lookups, 0);
  cr_assert_gt(s.prefix_reused_tokens, 0);
  cr_assert_gt(q1("m.db", "SELECT count(*) FROM events WHERE kind=%d AND "
                          "generation>0", HIT), 0);
  cr_assert_eq(s.prefix_corrupt_reuses, 0);
  audit_clean("m.db");
}

/* The small trace under mode `mode` with a share `f` of the catalog served
** as aLoRA adapters ($.prefix_cache.alora_fraction). */
static void run_alora(const char *mode, double f, const char *db,
                      lsim_summary *s) {
  char name[80], px[200];
  write_trace();
  snprintf(px, sizeof px, ",\n \"prefix_cache\": {\"mode\": \"%s\", "
           "\"block_tokens\": 64, \"alora_fraction\": %g}", mode, f);
  snprintf(name, sizeof name, "a-%s-%g.json", mode, f);
  write_scenario(name, "t.csv", "", px);
  replay(name, db, s);
}

Test(prefix_replay, alora_blocks_before_activation_are_shared_under_alora_keys) {
  lsim_summary al, se, ob, lo;
  run_alora("semantic_alora", 1, "al.db", &al);
  run_alora("semantic", 1, "se.db", &se);
  run_alora("oblivious", 1, "ob.db", &ob);
  run_alora("semantic_alora", 0, "lo.db", &lo);
  /* every request is invoked at its last full block (of 4): the 3 before
  ** it are base computation, so adapter 1 reuses them from adapter 0 */
  cr_assert_eq(hit_of("al.db", 1), 3);
  cr_assert_eq(hit_of("al.db", 2), 4); /* adapter 0's own, all 4 */
  cr_assert_eq(hit_of("al.db", 3), 2);
  cr_assert_eq(al.prefix_reused_tokens, (3 + 4 + 2) * 64);
  /* the semantic key ignores the activation: no sharing across adapters */
  cr_assert_eq(hit_of("se.db", 1), 0);
  cr_assert_eq(hit_of("se.db", 2), 4);
  cr_assert_eq(hit_of("se.db", 3), 2); /* adapter 1's own, from request 1 */
  cr_assert_gt(al.prefix_reused_tokens, se.prefix_reused_tokens);
  /* oblivious keys hit all 4 blocks; only the one after the activation,
  ** computed by adapter 0, is corrupt for adapter 1 */
  cr_assert_eq(hit_of("ob.db", 1), 4);
  cr_assert_eq(corrupt_of("ob.db", 1), 1);
  cr_assert_eq(ob.prefix_corrupt_reuses, 1);
  /* fraction 0: ordinary LoRA, as without the key */
  cr_assert_eq(hit_of("lo.db", 1), 0);
  char a[65], b[65];
  lsim_summary plain;
  run_mode("semantic_alora", "plain.db", &plain);
  digest("lo.db", a);
  digest("plain.db", b);
  cr_assert_str_eq(a, b, "alora_fraction 0 changed the rows");
  audit_clean("al.db");
  audit_clean("ob.db");
}

/* `lorasim compare` carries the cache's figures in its CSV when the cache
** is on (and only then), the same numbers the replay reports. */
static int csv_col(const char *header, const char *name) {
  int col = 0;
  size_t n = strlen(name);
  for (const char *p = header; *p; col++) {
    const char *e = strpbrk(p, ",\n");
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len == n && !strncmp(p, name, n))
      return col;
    if (!e || *e == '\n')
      break;
    p = e + 1;
  }
  return -1;
}

static long long csv_cell(const char *line, int col) {
  const char *p = line;
  for (int c = 0; c < col && p; c++) {
    p = strchr(p, ',');
    if (p)
      p++;
  }
  cr_assert_not_null(p, "column %d past the row", col);
  return atoll(p);
}

static void compare_of(const char *scen, const char *dir, char *hdr,
                       char *row, size_t cap) {
  char sp[512], op[512], cp[600];
  snprintf(sp, sizeof sp, "%s/%s", tmpdir, scen);
  snprintf(op, sizeof op, "%s/%s", tmpdir, dir);
  char *argv[] = {"compare", sp, "--schedulers", "fcfs,deficit_aging",
                  "--out", op, "--no-plots", NULL};
  cr_assert_eq(lsim_compare_main(7, argv), 0);
  snprintf(cp, sizeof cp, "%s/compare.csv", op);
  FILE *f = fopen(cp, "r");
  cr_assert_not_null(f, "%s", cp);
  cr_assert_not_null(fgets(hdr, (int)cap, f));
  /* the first run's all-tenants row (tenant empty, name all): the run's
  ** figures are there */
  do
    cr_assert_not_null(fgets(row, (int)cap, f));
  while (!strstr(row, ",,all,"));
  fclose(f);
}

Test(prefix_replay, compare_csv_carries_the_prefix_figures) {
  static char hdr[8192], row[8192];
  lsim_summary s, off;
  run_mode("semantic", "sem.db", &s);
  run_mode("off", "off.db", &off);
  compare_of("s-semantic.json", "cmp-sem", hdr, row, sizeof hdr);
  int lk = csv_col(hdr, "prefix_lookups"), rt = csv_col(hdr,
                                                        "prefix_reused_tokens");
  int pb = csv_col(hdr, "prefix_published_blocks");
  cr_assert(lk > 0 && rt > 0 && pb > 0, "%s", hdr);
  cr_assert_lt(lk, csv_col(hdr, "arrived"), "tenant columns stay last");
  cr_assert_eq(csv_cell(row, lk), s.prefix_lookups);
  cr_assert_eq(csv_cell(row, rt), s.prefix_reused_tokens);
  cr_assert_eq(csv_cell(row, pb), s.prefix_published_blocks);
  compare_of("s-off.json", "cmp-off", hdr, row, sizeof hdr);
  cr_assert_null(strstr(hdr, "prefix_"), "cache off: %s", hdr);
}

