/*
** test_tp_sim.c: TP workers in the simulator (docs/TP.md, "Simulator").
** $.workers.tp_degree, per-GPU page demand, the per-rank fault draws and
** distributed publication, and the collective cost term.
*/
#include <criterion/criterion.h>
#include <openssl/evp.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/backend.h"
#include "sim/replay.h"
#include "sim/scenario.h"

static char *quickstart_json(size_t *len) {
  char path[512];
  /* the linear-cost quickstart: TP is priced by $.cost, not a profile */
  snprintf(path, sizeof path, "%s/tests/fixtures/quickstart-linear.json",
           LSIM_SOURCE_DIR);
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f);
  char *buf = malloc(1 << 16);
  *len = fread(buf, 1, (1 << 16) - 1, f);
  buf[*len] = 0;
  fclose(f);
  return buf;
}

/* The quickstart with `workers_extra` inserted into $.workers, `cost_extra`
** into $.cost and `faults` replacing $.faults (each may be ""/NULL). */
static lsim_err scenario(lsim_scenario *sc, const char *workers_extra,
                         const char *cost_extra, const char *faults,
                         lsim_errbuf *eb) {
  size_t len;
  char *q = quickstart_json(&len);
  char *out = malloc(len + 4096);
  const char *w = strstr(q, "\"count\": 1,");
  const char *c = strstr(q, "\"iter_fixed_ns\"");
  const char *fl = strstr(q, "\"faults\"");
  cr_assert(w && c && fl && w < c && c < fl);
  const char *fe = strchr(fl, '}');
  size_t n = 0;
  n += (size_t)sprintf(out + n, "%.*s%s ", (int)(w - q), q, workers_extra);
  n += (size_t)sprintf(out + n, "%.*s%s ", (int)(c - w), w, cost_extra);
  if (faults)
    n += (size_t)sprintf(out + n, "%.*s\"faults\": %s%s", (int)(fl - c), c,
                         faults, fe + 1);
  else
    n += (size_t)sprintf(out + n, "%s", c);
  lsim_err rc = lsim_scenario_parse(sc, out, n, "tp.json", LSIM_SOURCE_DIR,
                                    eb);
  free(q);
  free(out);
  return rc;
}

static void run(const lsim_scenario *sc, const char *db, lsim_summary *s) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  unlink(db);
  lsim_replay_opts o = {.db_path = db, .command_line = "test"};
  cr_assert_eq(lsim_replay_run(sc, &o, s, &eb), 0, "%s", eb.msg);
}

static void digest(const char *db, const char *sql, char hex[65]) {
  sqlite3 *h;
  sqlite3_stmt *st;
  cr_assert_eq(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
  while (sqlite3_step(st) == SQLITE_ROW) {
    for (int c = 0; c < sqlite3_column_count(st); c++) {
      const unsigned char *t = sqlite3_column_text(st, c);
      const char *v = t ? (const char *)t : "\\N";
      EVP_DigestUpdate(ctx, v, strlen(v));
      EVP_DigestUpdate(ctx, "\x1f", 1);
    }
    EVP_DigestUpdate(ctx, "\x1e", 1);
  }
  unsigned char md[32];
  EVP_DigestFinal_ex(ctx, md, NULL);
  EVP_MD_CTX_free(ctx);
  for (int i = 0; i < 32; i++)
    sprintf(hex + 2 * i, "%02x", md[i]);
  sqlite3_finalize(st);
  sqlite3_close(h);
}

Test(tp_sim, degree_one_is_byte_identical) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_scenario a, b;
  cr_assert_eq(scenario(&a, "", "", NULL, &eb), 0, "%s", eb.msg);
  cr_assert_eq(scenario(&b, "\"tp_degree\": 1,",
                        "\"collective_latency_ns\": 5000, \"link_gbps\": 50,",
                        NULL, &eb),
               0, "%s", eb.msg);
  cr_assert_eq(a.tp_degree, 1);
  lsim_summary sa, sb;
  run(&a, "/tmp/lsim-tp-a.db", &sa);
  run(&b, "/tmp/lsim-tp-b.db", &sb);
  char ha[65], hb[65];
  digest("/tmp/lsim-tp-a.db",
         "SELECT seq,tick,kind,worker,request,adapter,value FROM events "
         "ORDER BY seq", ha);
  digest("/tmp/lsim-tp-b.db",
         "SELECT seq,tick,kind,worker,request,adapter,value FROM events "
         "ORDER BY seq", hb);
  cr_assert_str_eq(ha, hb);
  cr_assert_eq(sa.iterations, sb.iterations);
  cr_assert_eq(sa.end_tick, sb.end_tick);
  unlink("/tmp/lsim-tp-a.db");
  unlink("/tmp/lsim-tp-b.db");
}

Test(tp_sim, per_gpu_page_demand_and_kv) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_scenario one, two, four;
  cr_assert_eq(scenario(&one, "", "", NULL, &eb), 0);
  cr_assert_eq(scenario(&two, "\"tp_degree\": 2,", "", NULL, &eb), 0, "%s",
               eb.msg);
  cr_assert_eq(scenario(&four, "\"tp_degree\": 4,", "", NULL, &eb), 0);
  /* r (d_in + d_out) / N per GPU in either style */
  cr_assert_eq(lsim_scenario_adapter_bytes(&two, 16) * 2,
               lsim_scenario_adapter_bytes(&one, 16));
  cr_assert_eq(lsim_scenario_adapter_bytes(&four, 64) * 4,
               lsim_scenario_adapter_bytes(&one, 64));
  /* pages of the shard: never more than the whole, at least 1/N of it */
  for (int r = 8; r <= 64; r *= 2) {
    int64_t p1 = lsim_scenario_adapter_pages(&one, r);
    int64_t p4 = lsim_scenario_adapter_pages(&four, r);
    cr_assert_leq(p4, p1);
    cr_assert_geq(p4 * 4, p1);
  }
  /* 8 KV heads: 4 per GPU at degree 2 */
  cr_assert_eq(lsim_scenario_kv_bytes_per_token(&two) * 2,
               lsim_scenario_kv_bytes_per_token(&one));
}

Test(tp_sim, bad_degrees_fail_with_paths) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_scenario sc;
  cr_assert_eq(scenario(&sc, "\"tp_degree\": 3,", "", NULL, &eb),
               LSIM_E_SCN_CONFLICT);
  cr_assert(strstr(eb.msg, "$.workers.tp_degree"), "%s", eb.msg);
  cr_assert_eq(scenario(&sc, "\"tp_degree\": 16,", "", NULL, &eb),
               LSIM_E_SCN_CONFLICT, "rank 8 is not divisible by 16: %s",
               eb.msg);
  cr_assert_eq(scenario(&sc, "\"tp_degree\": 0,", "", NULL, &eb),
               LSIM_E_SCN_RANGE);
  cr_assert_eq(scenario(&sc, "", "\"link_gbps\": -1,", NULL, &eb),
               LSIM_E_SCN_RANGE);
}

Test(tp_sim, collective_cost_formula) {
  lsim_tp_cost c;
  memset(&c, 0, sizeof c);
  lsim_plan p;
  memset(&p, 0, sizeof p);
  p.prefill_rows = 6;
  p.decode_rows = 4;
  p.true_rank_rows = 160;
  c.tp_degree = 2;
  c.coll_latency_ns = 1000;
  c.link_gbps = 100;
  c.layers = 1;
  c.hidden = 4096;
  c.col_targets = 1;
  c.row_targets = 1;
  c.dtype_bytes = 2;
  int64_t calls;
  /* base: 2 all-reduces of 2 (N-1)/N x 10 tokens x 4096 = 2 x 40960
  ** elements; LoRA: one gather 1/2 x 160 + one all-reduce 2 x 1/2 x 160 =
  ** 240; 82160 x 2 bytes / 100 B/ns = 1643.2 -> 1644 ns; 4 calls x 1000 */
  cr_assert_eq(lsim_cost_collective_ns(&c, &p, &calls), 5644);
  cr_assert_eq(calls, 4);
  /* no adapter rows: only the base all-reduces; 81920 x 2 / 100 = 1638.4 */
  p.true_rank_rows = 0;
  cr_assert_eq(lsim_cost_collective_ns(&c, &p, &calls), 2000 + 1639);
  cr_assert_eq(calls, 2);
  /* degree 4: (N-1)/N = 3/4 of the same volumes */
  c.tp_degree = 4;
  p.true_rank_rows = 160;
  /* 2 x 2 x 3/4 x 10 x 4096 = 122880; 3/4 x 160 x 3 = 360; x 2 / 100 */
  cr_assert_eq(lsim_cost_collective_ns(&c, &p, &calls), 4000 + 2465);
  c.tp_degree = 1;
  cr_assert_eq(lsim_cost_collective_ns(&c, &p, &calls), 0);
  cr_assert_eq(calls, 0);
}

Test(tp_sim, degree_two_replay_pays_collectives_and_draws_per_rank) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_scenario free_links, costly, one, eight;
  cr_assert_eq(scenario(&free_links, "\"tp_degree\": 2,", "", NULL, &eb), 0);
  cr_assert_eq(scenario(&costly, "\"tp_degree\": 2,",
                        "\"collective_latency_ns\": 20000, \"link_gbps\": 50,",
                        NULL, &eb),
               0);
  lsim_summary sf, sc;
  run(&free_links, "/tmp/lsim-tp-f.db", &sf);
  run(&costly, "/tmp/lsim-tp-c.db", &sc);
  cr_assert_eq(sf.completed, 400);
  cr_assert_eq(sc.completed, 400);
  cr_assert_gt(sc.end_tick, sf.end_tick, "collectives add simulated time");
  /* A higher per-copy fault rate: degree 8 draws 8 copies per load. */
  const char *faults = "{ \"load_failure_rate\": 0.05, "
                       "\"max_load_attempts\": 50 }";
  cr_assert_eq(scenario(&one, "", "", faults, &eb), 0, "%s", eb.msg);
  cr_assert_eq(scenario(&eight, "\"tp_degree\": 8,", "", faults, &eb), 0,
               "%s", eb.msg);
  lsim_summary s1, s8;
  run(&one, "/tmp/lsim-tp-1.db", &s1);
  run(&eight, "/tmp/lsim-tp-8.db", &s8);
  double f1 = (double)s1.load_failures / (double)s1.loads;
  double f8 = (double)s8.load_failures / (double)s8.loads;
  cr_assert_gt(f8, 2 * f1, "group failure rate %.3f vs single %.3f", f8, f1);
  unlink("/tmp/lsim-tp-f.db");
  unlink("/tmp/lsim-tp-c.db");
  unlink("/tmp/lsim-tp-1.db");
  unlink("/tmp/lsim-tp-8.db");
}

Test(tp_sim, listed_fault_on_one_rank_never_publishes) {
  /* A copy-fault tick hits only the first rank copying at/after it; the
  ** other rank's copy succeeds, yet the load fails and nothing is
  ** published (the mixed snapshot is not launchable). */
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_scenario sc;
  cr_assert_eq(scenario(&sc, "\"tp_degree\": 2,", "",
                        "{ \"copy_fail_ticks\": [0], "
                        "\"max_load_attempts\": 4 }",
                        &eb),
               0, "%s", eb.msg);
  lsim_summary s;
  run(&sc, "/tmp/lsim-tp-t.db", &s);
  cr_assert_eq(s.load_failures, 1);
  sqlite3 *h;
  sqlite3_stmt *st;
  cr_assert_eq(sqlite3_open_v2("/tmp/lsim-tp-t.db", &h, SQLITE_OPEN_READONLY,
                               NULL),
               SQLITE_OK);
  /* the first load's adapter: its first event after the failure is not a
  ** publication at the failure's tick */
  cr_assert_eq(sqlite3_prepare_v2(
                   h,
                   /* 20 fault_injected, 13 adapter_load_failed,
                   ** 5 adapter_generation_published (docs/SCHEMA.md) */
                   "SELECT f.tick, (SELECT count(*) FROM events e WHERE "
                   "e.adapter = f.adapter AND e.tick = f.tick AND e.kind = "
                   "13), (SELECT count(*) FROM events e WHERE e.adapter = "
                   "f.adapter AND e.tick = f.tick AND e.kind = 5) "
                   "FROM events f WHERE f.kind = 20 LIMIT 1",
                   -1, &st, NULL),
               SQLITE_OK, "%s", sqlite3_errmsg(h));
  cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
  cr_assert_eq(sqlite3_column_int64(st, 1), 1, "the load failed");
  cr_assert_eq(sqlite3_column_int64(st, 2), 0, "and was not published");
  sqlite3_finalize(st);
  sqlite3_close(h);
  unlink("/tmp/lsim-tp-t.db");
}

Test(tp_sim, tp2_scenario_under_every_scheduler) {
  static const char *const scheds[] = {"fcfs", "resident_greedy",
                                       "slora_cluster", "deficit_aging",
                                       "vtc"};
  char path[512];
  snprintf(path, sizeof path, "%s/scenarios/tp2.json", LSIM_SOURCE_DIR);
  for (size_t i = 0; i < sizeof scheds / sizeof scheds[0]; i++) {
    lsim_errbuf eb = LSIM_ERRBUF_INIT;
    lsim_scenario sc;
    cr_assert_eq(lsim_scenario_load(&sc, path, &eb), 0, "%s", eb.msg);
    cr_assert_eq(sc.tp_degree, 2);
    snprintf(sc.scheduler, sizeof sc.scheduler, "%s", scheds[i]);
    lsim_summary s;
    run(&sc, "/tmp/lsim-tp-s.db", &s);
    cr_assert_eq(s.arrived, 400, "%s", scheds[i]);
    cr_assert_eq(s.completed + s.rejected + s.unfinished, 400, "%s",
                 scheds[i]);
    unlink("/tmp/lsim-tp-s.db");
  }
}
