/*
** test_hotswap_replay.c: hotswaps driven by a scenario ($.hotswaps), read
** back from the SQLite rows (docs/RESIDENCY.md, "Replay-driven hotswap").
**
** The fixture tests/fixtures/replay/hotswap.json replaces adapter 0 by
** shadow copy twice (the first copy fails), adapter 1 by drain then
** overwrite, adapter 2 under a new alias and adapter 3 with a corrupt
** copy.  Hotswap and lease events put the catalog generation in
** `generation`, the artifact version in `attempt`, the slot in `pages`, the
** slot generation in `value` and the pointer generation in `bytes`.
*/
#include <criterion/criterion.h>
#include <openssl/evp.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/event.h"
#include "sim/replay.h"
#include "sim/scenario.h"

#define FIXTURE LSIM_TEST_DIR "/fixtures/replay/hotswap.json"

static char tmpdir[256];
static char db[512];

static void mk_tmp(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/lsim-hsreplay-XXXXXX");
  cr_assert_not_null(mkdtemp(tmpdir));
  snprintf(db, sizeof db, "%s/a.db", tmpdir);
}

static void rm_tmp(void) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  cr_assert_eq(system(cmd), 0);
}

static void run_fixture(const char *path, uint64_t seed_delta) {
  static lsim_scenario sc;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_scenario_load(&sc, FIXTURE, &eb), 0, "%s", eb.msg);
  sc.seed += seed_delta;
  lsim_replay_opts o = {.db_path = path, .command_line = "test"};
  lsim_summary s;
  cr_assert_eq(lsim_replay_run(&sc, &o, &s, &eb), 0, "%s", eb.msg);
  cr_assert_str_eq(s.status, "ok");
}

/* One integer from `sql` (printf-formatted). */
static int64_t q1(const char *path, const char *fmt, ...) {
  char sql[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(sql, sizeof sql, fmt, ap);
  va_end(ap);
  sqlite3 *h;
  sqlite3_stmt *st;
  cr_assert_eq(sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL),
               SQLITE_OK);
  cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK, "%s: %s",
               sql, sqlite3_errmsg(h));
  cr_assert_eq(sqlite3_step(st), SQLITE_ROW, "%s", sql);
  int64_t v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(h);
  return v;
}

static void digest(const char *path, char hex[65]) {
  sqlite3 *h;
  sqlite3_stmt *st;
  cr_assert_eq(sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL),
               SQLITE_OK);
  cr_assert_eq(sqlite3_prepare_v2(h,
                                  "SELECT seq,tick,kind,worker,request,tenant,"
                                  "adapter,generation,attempt,pages,bytes,"
                                  "value,detail FROM events ORDER BY seq",
                                  -1, &st, NULL),
               SQLITE_OK);
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

#define K_STAGED LSIM_EV_HOTSWAP_STAGED
#define K_PUB LSIM_EV_HOTSWAP_PUBLISHED
#define K_ABORT LSIM_EV_HOTSWAP_ABORTED
#define K_RETIRING LSIM_EV_SLOT_RETIRING
#define K_RECLAIMED LSIM_EV_SLOT_RECLAIMED
#define K_BOUND LSIM_EV_LEASE_BOUND
#define K_RELEASED LSIM_EV_LEASE_RELEASED

TestSuite(hotswap_replay, .init = mk_tmp, .fini = rm_tmp);

/* Shadow copy of adapter 0: in-flight requests keep the old lease to the
** end, later ones bind the new generation, the old slot retires last. */
Test(hotswap_replay, shadow_leases_and_retirement) {
  run_fixture(db, 0);
  int64_t w = q1(db, "SELECT worker FROM events WHERE kind=%d AND adapter=0 "
                     "AND detail='shadow'", K_PUB);
  int64_t pub = q1(db, "SELECT seq FROM events WHERE kind=%d AND adapter=0 "
                       "AND detail='shadow'", K_PUB);
  int64_t snew = q1(db, "SELECT pages FROM events WHERE seq=%lld",
                    (long long)pub);
  int64_t sold = q1(db, "SELECT pages FROM events WHERE kind=%d AND "
                        "adapter=0 AND worker=%lld", K_RETIRING, (long long)w);
  cr_assert_neq(snew, sold);
  /* the catalog generation moves by one at publication, version 2 */
  cr_assert_eq(q1(db, "SELECT attempt FROM events WHERE seq=%lld",
                  (long long)pub), 2);
  /* every lease is released with exactly the handle it was bound with */
  cr_assert_eq(q1(db, "SELECT count(*) FROM events b JOIN events r ON "
                      "r.kind=%d AND r.request=b.request WHERE b.kind=%d AND "
                      "(r.pages!=b.pages OR r.value!=b.value OR "
                      "r.bytes!=b.bytes OR r.attempt!=b.attempt OR "
                      "r.generation!=b.generation)", K_RELEASED, K_BOUND), 0);
  cr_assert_eq(q1(db, "SELECT count(*) FROM events WHERE kind=%d", K_BOUND),
               q1(db, "SELECT count(*) FROM events WHERE kind=%d",
                  K_RELEASED));
  /* leases bound before publication name the old slot and version 0 ... */
  cr_assert_eq(q1(db, "SELECT count(*) FROM events WHERE kind=%d AND "
                      "adapter=0 AND worker=%lld AND seq<%lld AND "
                      "(pages!=%lld OR attempt!=0)", K_BOUND, (long long)w,
                  (long long)pub, (long long)sold), 0);
  /* ... some of them were still in flight at publication ... */
  cr_assert_geq(q1(db, "SELECT count(*) FROM events b WHERE b.kind=%d AND "
                       "b.adapter=0 AND b.worker=%lld AND b.seq<%lld AND "
                       "EXISTS (SELECT 1 FROM events r WHERE r.kind=%d AND "
                       "r.request=b.request AND r.seq>%lld)", K_BOUND,
                   (long long)w, (long long)pub, K_RELEASED, (long long)pub),
                1);
  /* ... and every later one binds the new slot and version 2 */
  cr_assert_gt(q1(db, "SELECT count(*) FROM events WHERE kind=%d AND "
                      "adapter=0 AND worker=%lld AND seq>%lld", K_BOUND,
                  (long long)w, (long long)pub), 0);
  cr_assert_eq(q1(db, "SELECT count(*) FROM events WHERE kind=%d AND "
                      "adapter=0 AND worker=%lld AND seq>%lld AND "
                      "(pages!=%lld OR attempt!=2)", K_BOUND, (long long)w,
                  (long long)pub, (long long)snew), 0);
  /* the old slot is reclaimed after its last lease and after the last
  ** iteration that launched it, with both generations bumped (ABA) */
  int64_t rec = q1(db, "SELECT seq FROM events WHERE kind=%d AND worker=%lld "
                       "AND pages=%lld AND seq>%lld", K_RECLAIMED,
                   (long long)w, (long long)sold, (long long)pub);
  int64_t last = q1(db, "SELECT max(seq) FROM events WHERE kind=%d AND "
                        "worker=%lld AND pages=%lld AND attempt=0",
                    K_RELEASED, (long long)w, (long long)sold);
  cr_assert_gt(rec, last);
  cr_assert_gt(q1(db, "SELECT value FROM events WHERE seq=%lld",
                  (long long)rec),
               q1(db, "SELECT value FROM events WHERE kind=%d AND "
                      "adapter=0 AND worker=%lld", K_RETIRING, (long long)w));
  cr_assert_gt(q1(db, "SELECT bytes FROM events WHERE seq=%lld",
                  (long long)rec),
               q1(db, "SELECT bytes FROM events WHERE kind=%d AND "
                      "adapter=0 AND worker=%lld", K_RETIRING, (long long)w));
  /* the reclaim waits for the last iteration that completed on it */
  int64_t rtick = q1(db, "SELECT tick FROM events WHERE seq=%lld",
                     (long long)rec);
  int64_t ltick = q1(db, "SELECT tick FROM events WHERE seq=%lld",
                     (long long)last);
  cr_assert_geq(rtick, ltick);
  /* mixed-version iterations ran exactly on cpu_ref */
  cr_assert_eq(q1(db, "SELECT count(*) FROM validations WHERE exact=0"), 0);
  cr_assert_gt(q1(db, "SELECT count(*) FROM validations"), 0);
}

/* A failed shadow copy: the old generation stays authoritative. */
Test(hotswap_replay, failed_copy_and_digest_leave_old_generation) {
  run_fixture(db, 0);
  int64_t ab = q1(db, "SELECT seq FROM events WHERE kind=%d AND adapter=0 "
                      "AND detail='copy_failed'", K_ABORT);
  int64_t w = q1(db, "SELECT worker FROM events WHERE seq=%lld",
                 (long long)ab);
  int64_t cg = q1(db, "SELECT generation FROM events WHERE seq=%lld",
                  (long long)ab);
  /* the catalog generation did not move between staging and abort */
  cr_assert_eq(cg, q1(db, "SELECT generation FROM events WHERE kind=%d AND "
                          "adapter=0 AND worker=%lld AND attempt=1",
                      K_STAGED, (long long)w));
  /* the aborted shadow's slot generation was bumped */
  cr_assert_gt(q1(db, "SELECT value FROM events WHERE seq=%lld",
                  (long long)ab),
               q1(db, "SELECT value FROM events WHERE kind=%d AND "
                      "adapter=0 AND worker=%lld AND attempt=1",
                  K_STAGED, (long long)w));
  cr_assert_eq(q1(db, "SELECT count(*) FROM events WHERE kind=%d AND "
                      "detail='copy_failure' AND value=1 AND adapter=0",
                  LSIM_EV_FAULT_INJECTED), 1);
  /* no lease ever named version 1 (the failed one) */
  cr_assert_eq(q1(db, "SELECT count(*) FROM events WHERE kind=%d AND "
                      "adapter=0 AND attempt=1", K_BOUND), 0);
  cr_assert_eq(q1(db, "SELECT count(*) FROM events WHERE kind=%d AND "
                      "adapter=0 AND attempt=1 AND worker=%lld", K_PUB,
                  (long long)w), 0);
  /* a corrupt copy of adapter 3 is caught by the digest check */
  cr_assert_eq(q1(db, "SELECT count(*) FROM events WHERE kind=%d AND "
                      "adapter=3 AND detail='digest_failed'", K_ABORT), 1);
  cr_assert_eq(q1(db, "SELECT count(*) FROM events WHERE kind=%d AND "
                      "adapter=3 AND attempt!=0", K_BOUND), 0);
  /* staged slots never become reachable: no lease names an aborted slot
  ** at its staged generation */
  cr_assert_eq(q1(db, "SELECT count(*) FROM events b JOIN events s ON "
                      "s.kind=%d AND s.worker=b.worker AND s.pages=b.pages "
                      "AND s.value=b.value AND s.detail='shadow' JOIN events "
                      "a ON a.kind=%d AND a.worker=s.worker AND "
                      "a.pages=s.pages AND a.adapter=s.adapter AND "
                      "a.attempt=s.attempt WHERE b.kind=%d", K_STAGED,
                  K_ABORT, K_BOUND), 0);
}

/* Drain then overwrite: new work waits; the overwrite happens only once
** no lease holds the slot; new alias: the adapter migrates. */
Test(hotswap_replay, drain_and_new_alias) {
  run_fixture(db, 0);
  int64_t st = q1(db, "SELECT seq FROM events WHERE kind=%d AND adapter=1 "
                      "AND detail='drain_then_overwrite'", K_STAGED);
  int64_t w = q1(db, "SELECT worker FROM events WHERE seq=%lld",
                 (long long)st);
  int64_t ow = q1(db, "SELECT seq FROM events WHERE kind=%d AND adapter=1 "
                      "AND worker=%lld AND detail='drain_then_overwrite'",
                  K_PUB, (long long)w);
  cr_assert_gt(ow, st);
  cr_assert_eq(q1(db, "SELECT count(*) FROM events WHERE kind=%d AND "
                      "adapter=1 AND worker=%lld AND seq>%lld AND seq<%lld",
                  K_BOUND, (long long)w, (long long)st, (long long)ow), 0);
  cr_assert_eq(q1(db, "SELECT count(*) FROM events b WHERE b.kind=%d AND "
                      "b.adapter=1 AND b.worker=%lld AND b.seq<%lld AND NOT "
                      "EXISTS (SELECT 1 FROM events r WHERE r.kind=%d AND "
                      "r.request=b.request AND r.seq<%lld)", K_BOUND,
                  (long long)w, (long long)st, K_RELEASED, (long long)ow), 0);
  /* same slot, new slot and pointer generations, version 1 */
  int64_t slot = q1(db, "SELECT pages FROM events WHERE seq=%lld",
                    (long long)ow);
  cr_assert_eq(slot, q1(db, "SELECT pages FROM events WHERE seq=%lld",
                        (long long)st));
  cr_assert_gt(q1(db, "SELECT value FROM events WHERE seq=%lld",
                  (long long)ow),
               q1(db, "SELECT value FROM events WHERE seq=%lld",
                  (long long)st));
  cr_assert_eq(q1(db, "SELECT count(*) FROM events WHERE kind=%d AND "
                      "adapter=1 AND worker=%lld AND seq>%lld AND "
                      "(attempt!=1 OR pages!=%lld)", K_BOUND, (long long)w,
                  (long long)ow, (long long)slot), 0);
  /* new alias: published, the old alias's slot retires and is reclaimed */
  int64_t na = q1(db, "SELECT seq FROM events WHERE kind=%d AND adapter=2 "
                      "AND detail='new_alias'", K_PUB);
  int64_t w2 = q1(db, "SELECT worker FROM events WHERE seq=%lld",
                  (long long)na);
  int64_t old = q1(db, "SELECT pages FROM events WHERE kind=%d AND "
                       "adapter=2 AND worker=%lld", K_RETIRING, (long long)w2);
  cr_assert_eq(q1(db, "SELECT count(*) FROM events WHERE kind=%d AND "
                      "worker=%lld AND pages=%lld AND seq>%lld", K_RECLAIMED,
                  (long long)w2, (long long)old, (long long)na), 1);
  cr_assert_eq(q1(db, "SELECT count(*) FROM events WHERE kind=%d AND "
                      "adapter=2 AND worker=%lld AND seq>%lld AND "
                      "attempt!=1", K_BOUND, (long long)w2, (long long)na), 0);
}

Test(hotswap_replay, same_seed_same_rows) {
  char b[600], c[600], ha[65], hb[65], hc[65];
  snprintf(b, sizeof b, "%s/b.db", tmpdir);
  snprintf(c, sizeof c, "%s/c.db", tmpdir);
  run_fixture(db, 0);
  run_fixture(b, 0);
  run_fixture(c, 1);
  digest(db, ha);
  digest(b, hb);
  digest(c, hc);
  cr_assert_str_eq(ha, hb);
  cr_assert_str_neq(ha, hc);
  cr_assert_gt(q1(c, "SELECT count(*) FROM events WHERE kind=%d", K_BOUND),
               0);
}

/*
** A shadow copy sits in the joint pool beside the live version: from its
** staging to the reclaim of the old slot, the pool holds M_old + M_new.
** Each staged shadow on a worker where the adapter is resident reserves
** exactly the adapter's pages (kv_reserved, detail hotswap_shadow) and
** gives them back when the copy aborts or when the retiring slot is
** reclaimed, never earlier.
*/
Test(hotswap_replay, shadow_copy_is_charged_to_the_page_pool) {
  run_fixture(db, 0);
  int64_t charges = q1(db, "SELECT count(*) FROM events WHERE kind=15 AND "
                           "detail='hotswap_shadow'");
  cr_assert_gt(charges, 0);
  /* every charge is released, each exactly once and for the same pages */
  cr_assert_eq(q1(db, "SELECT count(*) FROM events WHERE kind=16 AND "
                      "detail='hotswap_shadow'"),
               charges);
  cr_assert_eq(q1(db, "SELECT coalesce(sum(pages), 0) FROM events WHERE "
                      "kind=15 AND detail='hotswap_shadow'"),
               q1(db, "SELECT coalesce(sum(pages), 0) FROM events WHERE "
                      "kind=16 AND detail='hotswap_shadow'"));
  /* the successful shadow of adapter 0: charged at staging, released at
  ** the reclaim of its old slot on the same worker and tick */
  int64_t w = q1(db, "SELECT worker FROM events WHERE kind=%d AND adapter=0 "
                     "AND detail='shadow'", K_PUB);
  int64_t rel = q1(db, "SELECT max(tick) FROM events WHERE kind=16 AND "
                       "detail='hotswap_shadow' AND adapter=0 AND worker=%lld",
                   (long long)w);
  int64_t reclaim = q1(db, "SELECT max(tick) FROM events WHERE kind=28 AND "
                           "adapter=0 AND worker=%lld", (long long)w);
  int64_t pub = q1(db, "SELECT tick FROM events WHERE kind=%d AND adapter=0 "
                       "AND detail='shadow'", K_PUB);
  cr_assert_eq(rel, reclaim);
  cr_assert_geq(rel, pub);
  /* the failed copy of adapter 0 (first hotswap) was released at its abort */
  int64_t abort_t = q1(db, "SELECT min(tick) FROM events WHERE kind=26 AND "
                           "adapter=0 AND detail='copy_failed'");
  cr_assert_eq(q1(db, "SELECT count(*) FROM events WHERE kind=16 AND "
                      "detail='hotswap_shadow' AND adapter=0 AND tick=%lld",
                  (long long)abort_t),
               q1(db, "SELECT count(*) FROM events WHERE kind=26 AND "
                      "adapter=0 AND detail='copy_failed'"));
  /* while charged, the pages are an adapter's: their size is its demand */
  cr_assert_eq(q1(db, "SELECT count(DISTINCT pages) FROM events WHERE "
                      "kind=15 AND detail='hotswap_shadow' AND adapter=0"),
               1);
}

/*
** A reload after eviction loads the version the alias names: adapter 0 is
** replaced (shadow, version 1) at 5 ms, evicted at 10 ms for two other
** adapters' KV, and reloaded at 20 ms.  The reload validates version 1's
** bytes, the version the request's lease names, not the catalog's 0.
*/
Test(hotswap_replay, reload_after_eviction_loads_the_alias_version) {
  static lsim_scenario sc;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  char path[512];
  snprintf(path, sizeof path, "%s/fixtures/replay/reload_version.json",
           LSIM_TEST_DIR);
  cr_assert_eq(lsim_scenario_load(&sc, path, &eb), 0, "%s", eb.msg);
  lsim_replay_opts o = {.db_path = db, .command_line = "test"};
  lsim_summary s;
  cr_assert_eq(lsim_replay_run(&sc, &o, &s, &eb), 0, "%s", eb.msg);
  cr_assert_eq(q1(db, "SELECT count(*) FROM events WHERE kind=%d AND "
                      "adapter=0 AND detail='shadow'", K_PUB),
               1);
  int64_t evicted = q1(db, "SELECT tick FROM events WHERE kind=11 AND "
                           "adapter=0");
  cr_assert_gt(evicted, q1(db, "SELECT tick FROM events WHERE kind=%d AND "
                               "adapter=0", K_PUB));
  /* the first load validated the catalog's version, the reload version 1 */
  cr_assert_eq(q1(db, "SELECT value FROM events WHERE kind=19 AND adapter=0 "
                      "ORDER BY seq LIMIT 1"),
               0);
  cr_assert_eq(q1(db, "SELECT value FROM events WHERE kind=19 AND adapter=0 "
                      "AND tick > %lld", (long long)evicted),
               1);
  /* and the request bound after the reload names that version */
  cr_assert_eq(q1(db, "SELECT attempt FROM events WHERE kind=%d AND "
                      "request=3", K_BOUND),
               1);
}
