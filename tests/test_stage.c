/*
** test_stage.c: the stage/retire protocol between the engine's residency
** and a backend (backends/backend.h, docs/ARCHITECTURE.md "Backends"),
** against cpu_ref.
**
**   - a replay with evictions, failed loads (copy and digest faults) and
**     hotswaps (tests/fixtures/replay/stage.json) runs clean with cpu_ref
**     following the residency; its stage / publish / retire / abort / run
**     counts equal the engine's loads started, generations published,
**     evictions, failed loads and iterations in the events table, and its
**     event rows equal the model backend's (the protocol only observes)
**   - a residency driven by hand with the hooks attached to cpu_ref: after
**     every transaction the backend's page map is the residency's (page ids
**     and generations), factor bytes are read back through the page ids,
**     and a victim's retire comes after its last launch ran
**   - materialised factors are those of the bytes an iteration obtained
**     (pages or drawn), through the factor cache, which stays bounded
**   - negative: a launch naming an unpublished generation, a run the
**     engine never launched, a retire before the launch ran, a stage that
**     is never published, a stage into held pages fail with their codes
*/
#include <criterion/criterion.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/backend.h"
#include "backends/cpu_ref/materialise.h"
#include "backends/stage.h"
#include "engine/residency.h"
#include "sim/replay.h"
#include "sim/scenario.h"

#define FIXTURE LSIM_TEST_DIR "/fixtures/replay/stage.json"

static char tmpdir[256];

static void mk_tmp(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/lsim-stage-XXXXXX");
  cr_assert_not_null(mkdtemp(tmpdir));
}

static void rm_tmp(void) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  cr_assert_eq(system(cmd), 0);
}

static int64_t q1(const char *path, const char *sql) {
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

static int64_t kind_count(const char *path, int kind) {
  char sql[128];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM events WHERE kind = %d",
           kind);
  return q1(path, sql);
}

/* Digest of every event row (the byte-identity check). */
static void events_hex(const char *path, char out[65]) {
  char cmd[700];
  snprintf(cmd, sizeof cmd,
           "sqlite3 '%s' 'select * from events' | sha256sum | cut -c1-64",
           path);
  FILE *f = popen(cmd, "r");
  cr_assert_not_null(f);
  cr_assert_not_null(fgets(out, 65, f));
  pclose(f);
}

static void run_fixture(const char *backend, const char *db,
                        lsim_backend_counts *c) {
  static lsim_scenario sc;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_scenario_load(&sc, FIXTURE, &eb), 0, "%s", eb.msg);
  snprintf(sc.backend, sizeof sc.backend, "%s", backend);
  lsim_replay_opts o = {.db_path = db, .command_line = "test",
                        .backend_counts = c};
  lsim_summary s;
  cr_assert_eq(lsim_replay_run(&sc, &o, &s, &eb), 0, "%s", eb.msg);
  cr_assert_str_eq(s.status, "ok");
}

Test(stage, replay_counts_follow_the_engine, .init = mk_tmp, .fini = rm_tmp) {
  char db[512];
  snprintf(db, sizeof db, "%s/ref.db", tmpdir);
  lsim_backend_counts c;
  run_fixture("cpu_ref", db, &c);
  int64_t started = kind_count(db, 3), published = kind_count(db, 5),
          evicted = kind_count(db, 11), failed = kind_count(db, 13),
          iters = kind_count(db, 6), hs = kind_count(db, 25);
  /* the fixture exercises what the protocol must follow */
  cr_assert_gt(evicted, 5, "evictions: %lld", (long long)evicted);
  cr_assert_gt(failed, 2, "failed loads: %lld", (long long)failed);
  cr_assert_gt(hs, 0, "hotswaps published: %lld", (long long)hs);
  cr_assert_eq(c.stages, started, "stages %lld, loads started %lld",
               (long long)c.stages, (long long)started);
  cr_assert_eq(c.publishes, published, "publishes %lld, published %lld",
               (long long)c.publishes, (long long)published);
  cr_assert_eq(c.retires, evicted, "retires %lld, evicted %lld",
               (long long)c.retires, (long long)evicted);
  cr_assert_eq(c.aborts, failed, "aborts %lld, failed loads %lld",
               (long long)c.aborts, (long long)failed);
  cr_assert_eq(c.runs_checked, iters, "runs %lld, iterations %lld",
               (long long)c.runs_checked, (long long)iters);
  cr_assert_geq(c.launches, iters);
  cr_assert_gt(c.kv_allocs, 0);
  cr_assert_eq(c.kv_allocs, c.kv_releases, "every KV page went back");
  /* rank 8 and 16 adapters, 16 x 16 module: 256 or 512 bytes per stage */
  cr_assert_geq(c.staged_bytes, 256 * c.stages);
  cr_assert_leq(c.staged_bytes, 512 * c.stages);

  /* the protocol observes: the model backend's rows are the same */
  char db2[512], h1[65], h2[65];
  snprintf(db2, sizeof db2, "%s/model.db", tmpdir);
  lsim_backend_counts m;
  run_fixture("model", db2, &m);
  cr_assert_eq(m.stages + m.publishes + m.retires + m.runs_checked, 0,
               "the model backend records nothing");
  events_hex(db, h1);
  events_hex(db2, h2);
  cr_assert_str_eq(h1, h2, "event rows differ between cpu_ref and model");
}

/* ---- a residency driven by hand, hooks on cpu_ref ------------------------ */

#define NA 3
#define SLOTS 12
static const int64_t apages[NA] = {4, 4, 4};
static const int arank[NA] = {8, 16, 8};

typedef struct hand {
  lsim_res *r;
  lsim_backend be;
  lsim_stage_ledger *L;
} hand;

static void hand_open(hand *h) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_res_cfg rc = {SLOTS, 4096, NA, apages, 0, {{0}}};
  cr_assert_eq(lsim_res_new(&h->r, &rc, &eb), 0, "%s", eb.msg);
  lsim_backend_cfg bc = {.seed = 7, .d_in = 16, .d_out = 16, .workers = 1,
                         .pool_pages = SLOTS, .page_bytes = 4096,
                         .nadapters = NA, .objects = NA,
                         .adapter_rank = arank};
  cr_assert_eq(lsim_backend_open(&h->be, "cpu_ref", &bc, &eb), 0, "%s",
               eb.msg);
  cr_assert(lsim_backend_follows(&h->be));
  h->L = lsim_backend_cpu_ref__ledger(&h->be);
  cr_assert_not_null(h->L);
  cr_assert_eq(lsim_res_set_hooks(h->r, lsim_backend_res_hooks(), &h->be, 0,
                                  &eb),
               0);
  for (int a = 0; a < NA; a++) {
    lsim_digest d = {{0}};
    d.b[0] = (unsigned char)(a + 1);
    cr_assert_eq(lsim_res_register(h->r, a, &d, &d, &eb), 0, "%s", eb.msg);
  }
}

static void hand_close(hand *h) {
  lsim_backend_close(&h->be);
  lsim_res_release(h->r);
}

/* The backend's map equals the residency's, and every visible adapter's
** ledger pages are its slot list. */
static void same_pages(hand *h) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_backend_check_pages(&h->be, 0, h->r, &eb), 0, "%s",
               eb.msg);
  for (int a = 0; a < NA; a++) {
    lsim_res_adapter_view v;
    lsim_res_adapter(h->r, a, &v);
    const lsim_stage_obj *o = lsim_stage_obj_get(h->L, 0, a);
    if (v.pages == 0 || v.state == LSIM_RS_RETIRING)
      continue;
    cr_assert_eq(o->st, LSIM_STAGE_PUBLISHED);
    cr_assert_eq(o->gen, v.generation);
    cr_assert_eq(o->npages, v.pages);
    for (int64_t j = 0; j < v.pages; j++)
      cr_assert_eq(o->page[j], v.slot[j], "adapter %d page %lld", a,
                   (long long)j);
  }
}

/* Load a as a prefetch with the given victims; publish unless fail. */
static lsim_err load(hand *h, int a, const int *vict, int nv, int fail,
                     lsim_errbuf *eb) {
  lsim_res_req q = {LSIM_TXN_PREFETCH, a, -1, 0, 0};
  int64_t txn;
  lsim_err rc = lsim_res_begin_with(h->r, &q, vict, nv, &txn, eb);
  if (rc)
    return rc;
  cr_assert_eq(lsim_res_copy_start(h->r, txn, eb), 0, "%s", eb->msg);
  cr_assert_eq(lsim_res_copy_done(h->r, txn, eb), 0);
  if (fail) {
    int64_t rest[NA];
    int nr;
    return lsim_res_rollback(h->r, txn, rest, NA, &nr, eb);
  }
  lsim_digest d = {{0}};
  d.b[0] = (unsigned char)(a + 1);
  int64_t gen;
  int kv;
  cr_assert_eq(lsim_res_validate(h->r, txn, &d, eb), 0, "%s", eb->msg);
  cr_assert_eq(lsim_res_publish(h->r, txn, 0, &gen, eb), 0, "%s", eb->msg);
  return lsim_res_commit(h->r, txn, 0, &kv, eb);
}

/* One decode row of adapter a, naming generation gen. */
static void plan_of(lsim_plan *p, int a, int64_t gen, int64_t iter) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_plan_reset(p);
  lsim_plan_entry e = {1, 0, a, arank[a], LSIM_PHASE_DECODE, 1, 0, 0, 0, 0};
  cr_assert_eq(lsim_plan_push(p, &e, &eb), 0);
  cr_assert_eq(lsim_plan_finish(p, &eb), 0);
  cr_assert_eq(lsim_plan_name(p, 0, gen, &eb), 0);
  p->iter = iter;
  p->worker = 0;
}

/* Launch a (engine side), run it on the backend, complete it. */
static lsim_err launch_run(hand *h, int a, int64_t iter, lsim_errbuf *eb) {
  lsim_res_adapter_view v;
  lsim_res_adapter(h->r, a, &v);
  lsim_plan p = LSIM_PLAN_INIT;
  plan_of(&p, a, v.generation, iter);
  lsim_err rc = lsim_res_launch(h->r, a, +1, eb);
  lsim_backend_result br;
  if (!rc)
    rc = lsim_backend_run(&h->be, &p, &br, eb);
  lsim_errbuf tmp = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_res_launch(h->r, a, -1, &tmp), 0);
  lsim_plan_release(&p);
  return rc;
}

Test(stage, pages_follow_the_residency) {
  hand h;
  hand_open(&h);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(load(&h, 0, NULL, 0, 0, &eb), 0, "%s", eb.msg);
  same_pages(&h);
  cr_assert_eq(load(&h, 1, NULL, 0, 0, &eb), 0, "%s", eb.msg);
  same_pages(&h);
  /* the factor bytes at adapter 1's pages are its drawn factors */
  signed char want[16 * 32], got[16 * 32];
  lsim_factors_draw(7, 1, 0, 16, 16, 16, want);
  cr_assert_eq(lsim_stage_read(h.L, 0, 1, got, sizeof got, &eb), 0, "%s",
               eb.msg);
  cr_assert_arr_eq(got, want, sizeof want);
  cr_assert_eq(launch_run(&h, 1, 0, &eb), 0, "%s", eb.msg);
  cr_assert_eq(launch_run(&h, 0, 1, &eb), 0, "%s", eb.msg);
  cr_assert_eq(load(&h, 2, NULL, 0, 0, &eb), 0, "%s", eb.msg);
  same_pages(&h);
  /* the pool is full: a KV txn of 4 pages evicting 1 takes its pages */
  lsim_res_adapter_view v1;
  lsim_res_adapter(h.r, 1, &v1);
  int64_t p1 = v1.slot[0];
  int victims[1] = {1};
  lsim_res_req q = {LSIM_TXN_KV, 2, 9, 4, 0};
  int64_t txn;
  cr_assert_eq(lsim_res_begin_with(h.r, &q, victims, 1, &txn, &eb), 0, "%s",
               eb.msg);
  int kv;
  cr_assert_eq(lsim_res_commit(h.r, txn, 0, &kv, &eb), 0, "%s", eb.msg);
  same_pages(&h);
  int st;
  int64_t own, gen;
  h.be.ops->page(h.be.state, 0, p1, &st, &own, &gen);
  cr_assert_eq(st, LSIM_SLOT_KV, "adapter 1's old page went to the KV object");
  cr_assert_eq(own, kv);
  /* release the KV, reload 1 with a failed copy (rolled back), then ok */
  cr_assert_eq(lsim_res_unbind(h.r, 2, 0, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_res_kv_release(h.r, kv, &eb), 0, "%s", eb.msg);
  same_pages(&h);
  lsim_digest d1 = {{2}};
  cr_assert_eq(lsim_res_register(h.r, 1, &d1, &d1, &eb), 0, "%s", eb.msg);
  cr_assert_eq(load(&h, 1, NULL, 0, 1, &eb), 0, "%s", eb.msg);
  same_pages(&h);
  cr_assert_eq(load(&h, 1, NULL, 0, 0, &eb), 0, "%s", eb.msg);
  same_pages(&h);
  lsim_backend_counts c;
  lsim_backend_counts_get(&h.be, &c);
  cr_assert_eq(c.stages, 5);    /* 0, 1, 2, 1 (failed), 1 */
  cr_assert_eq(c.publishes, 4);
  cr_assert_eq(c.retires, 1);   /* 1, for the KV txn */
  cr_assert_eq(c.aborts, 1);
  cr_assert_eq(c.runs_checked, 2);
  cr_assert_eq(c.kv_allocs, 4);
  cr_assert_eq(c.kv_releases, 4);
  cr_assert_eq(lsim_backend_finish(&h.be, &eb), 0, "%s", eb.msg);
  hand_close(&h);
}

/* ---- negative: what the protocol refuses --------------------------------- */

Test(stage, forged_launch_fails) {
  hand h;
  hand_open(&h);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(load(&h, 0, NULL, 0, 0, &eb), 0, "%s", eb.msg);
  lsim_plan p = LSIM_PLAN_INIT;
  lsim_backend_result br;
  /* adapter 1 was never published: its launch is forged */
  plan_of(&p, 1, 1, 0);
  cr_assert_eq(lsim_backend_run(&h.be, &p, &br, &eb), LSIM_E_STAGE_LAUNCH);
  cr_assert(strstr(eb.msg, "not published"), "%s", eb.msg);
  /* a generation the engine did not publish (0 holds generation 1) */
  plan_of(&p, 0, 2, 0);
  cr_assert_eq(lsim_backend_run(&h.be, &p, &br, &eb), LSIM_E_STAGE_LAUNCH);
  /* the right generation, but no launch of the engine named it */
  plan_of(&p, 0, 1, 0);
  cr_assert_eq(lsim_backend_run(&h.be, &p, &br, &eb), LSIM_E_STAGE_LAUNCH);
  cr_assert(strstr(eb.msg, "no launch"), "%s", eb.msg);
  /* a page overwritten behind the engine's back (a KV alloc the engine
  ** never made, forged through the protocol) */
  const lsim_stage_obj *o = lsim_stage_obj_get(h.L, 0, 0);
  int64_t pg = o->page[0];
  lsim_res_page_ev kv = {0, 5, 1, 0, &pg, 1, 0, 0, LSIM_RES_KV_ALLOC};
  cr_assert_eq(lsim_backend_kv(&h.be, &kv, &eb), LSIM_E_STAGE_ORDER);
  lsim_plan_release(&p);
  hand_close(&h);
}

Test(stage, retire_before_the_launch_ran_fails) {
  hand h;
  hand_open(&h);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(load(&h, 0, NULL, 0, 0, &eb), 0, "%s", eb.msg);
  /* the engine launched generation 1 of 0; the backend never ran it */
  cr_assert_eq(lsim_res_launch(h.r, 0, +1, &eb), 0);
  cr_assert_eq(lsim_res_launch(h.r, 0, -1, &eb), 0);
  lsim_res_adapter_view v;
  lsim_res_adapter(h.r, 0, &v);
  lsim_res_page_ev ev = {0, 0, 1, 0, v.slot, v.pages, 1, 1, 0};
  cr_assert_eq(lsim_backend_retire(&h.be, &ev, &eb), LSIM_E_STAGE_FENCE);
  cr_assert_eq(lsim_backend_finish(&h.be, &eb), LSIM_E_STAGE_FENCE);
  hand_close(&h);
}

Test(stage, unpublished_stage_fails) {
  hand h;
  hand_open(&h);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  int64_t pages[4] = {8, 9, 10, 11};
  /* a stage the engine never published: met at retire and at finish */
  lsim_res_page_ev ev = {0, 2, 1, 0, pages, 4, 0, 0, 0};
  cr_assert_eq(lsim_backend_stage(&h.be, &ev, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_backend_finish(&h.be, &eb), LSIM_E_STAGE_UNPUBLISHED);
  ev.published = 1;
  cr_assert_eq(lsim_backend_retire(&h.be, &ev, &eb), LSIM_E_STAGE_UNPUBLISHED);
  /* a stage into pages the backend holds for another object */
  lsim_res_page_ev ev2 = {0, 1, 1, 0, pages, 2, 0, 0, 0};
  cr_assert_eq(lsim_backend_stage(&h.be, &ev2, &eb), LSIM_E_STAGE_ORDER);
  /* bytes that do not fit: rank 16 at 16 x 16 is 512 bytes > 1 x 256 */
  lsim_backend_cfg bc = {.seed = 7, .d_in = 16, .d_out = 16, .workers = 1,
                         .pool_pages = SLOTS, .page_bytes = 256,
                         .nadapters = NA, .objects = NA,
                         .adapter_rank = arank};
  lsim_backend small;
  cr_assert_eq(lsim_backend_open(&small, "cpu_ref", &bc, &eb), 0);
  lsim_res_page_ev ev3 = {0, 1, 1, 0, pages, 1, 0, 0, 0};
  cr_assert_eq(lsim_backend_stage(&small, &ev3, &eb), LSIM_E_STAGE_FIT);
  lsim_backend_close(&small);
  hand_close(&h);
}

Test(stage, run_reads_factors_through_the_pages) {
  hand h;
  hand_open(&h);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(load(&h, 0, NULL, 0, 0, &eb), 0, "%s", eb.msg);
  const lsim_stage_obj *o = lsim_stage_obj_get(h.L, 0, 0);
  signed char a[8 * 32], b[8 * 32];
  cr_assert_eq(lsim_stage_read(h.L, 0, 0, a, sizeof a, &eb), 0);
  lsim_stage__flip(h.L, 0, o->page[0], 3);
  cr_assert_eq(lsim_stage_read(h.L, 0, 0, b, sizeof b, &eb), 0);
  cr_assert_neq(a[3], b[3], "the read goes through the page's bytes");
  cr_assert_eq(memcmp(a + 4, b + 4, sizeof a - 4), 0);
  cr_assert_eq(launch_run(&h, 0, 0, &eb), 0, "%s", eb.msg);
  hand_close(&h);
}

/* ---- materialised factors are the bytes obtained, cached or not ---------- */

typedef struct fetched {
  int art;            /* the artifact served from `bytes` (version 0) */
  signed char *bytes; /* its factors, lsim_factors_draw's layout */
  int calls;
} fetched;

static int fetch_one(void *ud, int art, int ver, int r, signed char *out,
                     lsim_errbuf *eb) {
  (void)eb;
  fetched *f = ud;
  f->calls++;
  if (art != f->art || ver != 0)
    return 0;
  memcpy(out, f->bytes, (size_t)r * 32);
  return 1;
}

/* A plan of one decode row per (adapter, version, rank). */
static void plan_rows(lsim_plan *p, int n, const int *a, const int *ver,
                      const int *rank, int64_t iter) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_plan_reset(p);
  for (int i = 0; i < n; i++) {
    lsim_plan_entry e = {.request = 10 + i, .adapter = a[i],
                         .rank = rank[i], .phase = LSIM_PHASE_DECODE,
                         .rows = 1, .version = ver[i]};
    cr_assert_eq(lsim_plan_push(p, &e, &eb), 0, "%s", eb.msg);
  }
  cr_assert_eq(lsim_plan_finish(p, &eb), 0, "%s", eb.msg);
  p->iter = iter;
}

/* Every entry of the view ad equals bytes (A then B, row-major), scale
** 2 / r. */
static void factors_are(const lsim_qadapter *ad, const signed char *bytes) {
  const signed char *q = bytes;
  for (int i = 0; i < ad->rank; i++)
    for (int j = 0; j < 16; j++, q++)
      cr_assert_eq(mpq_cmp_si(LSIM_QAT(&ad->A, i, j), *q, 1), 0,
                   "adapter %d A[%d][%d]", ad->id, i, j);
  for (int i = 0; i < 16; i++)
    for (int j = 0; j < ad->rank; j++, q++)
      cr_assert_eq(mpq_cmp_si(LSIM_QAT(&ad->B, i, j), *q, 1), 0,
                   "adapter %d B[%d][%d]", ad->id, i, j);
  cr_assert_eq(mpq_cmp_ui(ad->scale, 2, (unsigned long)ad->rank), 0);
}

Test(stage, materialised_factors_follow_the_bytes_obtained) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_iter_tensors t = LSIM_ITER_TENSORS_INIT;
  lsim_plan p = LSIM_PLAN_INIT;
  signed char pg[8 * 32], d1[16 * 32], d0v1[8 * 32];
  lsim_factors_draw(7, 0, 0, 8, 16, 16, pg);
  lsim_factors_draw(7, 1, 0, 16, 16, 16, d1);
  lsim_factors_draw(7, 0, 1, 8, 16, 16, d0v1);
  fetched f = {0, pg, 0};
  /* adapter 0 from "pages", 1 drawn, 0 at version 1 drawn (a lease across
  ** a hotswap): three artifacts, each with its own values */
  static const int a[3] = {0, 1, 0}, ver[3] = {0, 0, 1}, rk[3] = {8, 16, 8};
  for (int it = 0; it < 4; it++) {
    if (it == 1)
      pg[5] = (signed char)(pg[5] == 1 ? -1 : pg[5] + 1); /* page rewritten */
    if (it == 3)
      lsim_factors_draw(7, 0, 0, 8, 16, 16, pg); /* and back */
    plan_rows(&p, 3, a, ver, rk, it);
    cr_assert_eq(lsim_iter_tensors_build_with(&t, &p, 7, 16, 16, fetch_one,
                                              &f, &eb),
                 0, "%s", eb.msg);
    cr_assert_eq(t.nad, 3);
    for (int k = 0; k < t.nad; k++) {
      int v, art = lsim_iter_artifact(&t, t.ad[k].id, &v);
      factors_are(&t.ad[k], art == 1 ? d1 : v == 1 ? d0v1 : pg);
    }
    cr_assert_eq(t.X.rows, 3);
  }
  cr_assert_eq(f.calls, 12, "every build asks for every artifact's bytes");
  /* far more artifacts than the cache holds: it stays bounded, and one
  ** evicted long ago comes back with its own values */
  enum { RK = 64, PER = RK * 32 };
  int n = 2 * LSIM_FACTOR_CACHE_ENTRIES / PER;
  signed char want[PER];
  for (int it = 0; it <= n; it++) {
    int art = it < n ? it : 0, one = 0;
    plan_rows(&p, 1, &art, &one, (const int[]){RK}, it);
    cr_assert_eq(lsim_iter_tensors_build(&t, &p, 9, 16, 16, &eb), 0, "%s",
                 eb.msg);
    cr_assert_leq(t.fc_held, (size_t)LSIM_FACTOR_CACHE_ENTRIES + PER);
  }
  lsim_factors_draw(9, 0, 0, RK, 16, 16, want);
  factors_are(&t.ad[0], want);
  lsim_plan_release(&p);
  lsim_iter_tensors_release(&t);
}

/* ---- the cuda backend's device pool follows the engine (GPU) ------------- */

#ifdef LSIM_HAVE_CUDA
#include "backends/cuda/cuda.h"

/* Run `path` with backend cuda (verify against cpu_ref), then model, and
** check the device pool followed the engine: bit-exact on every
** iteration, stage / publish / retire / abort counts equal to the engine's
** loads / publications / evictions / failed loads, and the same event rows
** as the model backend. */
static void cuda_follows(const char *path, int tensor_model) {
  char desc[256];
  if (lsim_cuda_describe(desc, sizeof desc) <= 0)
    cr_skip_test("no CUDA device: %s (GPU tests run on the device machine)",
                 desc);
  static lsim_scenario sc;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  char db[512], db2[512], h1[65], h2[65];
  snprintf(db, sizeof db, "%s/cuda.db", tmpdir);
  snprintf(db2, sizeof db2, "%s/model.db", tmpdir);
  cr_assert_eq(lsim_scenario_load(&sc, path, &eb), 0, "%s", eb.msg);
  snprintf(sc.backend, sizeof sc.backend, "cuda");
  lsim_backend_counts c;
  lsim_replay_opts o = {.db_path = db, .command_line = "test", .verify = 1,
                        .tensor_model = tensor_model, .backend_counts = &c};
  lsim_summary s;
  cr_assert_eq(lsim_replay_run(&sc, &o, &s, &eb), 0, "%s", eb.msg);
  int64_t iters = kind_count(db, 6);
  cr_assert_eq(c.stages, kind_count(db, 3), "stages %lld", (long long)c.stages);
  cr_assert_eq(c.publishes, kind_count(db, 5));
  cr_assert_eq(c.retires, kind_count(db, 11));
  cr_assert_eq(c.aborts, kind_count(db, 13));
  cr_assert_eq(c.runs_checked, iters);
  cr_assert_eq(q1(db, "SELECT count(*) FROM validations WHERE exact = 1"),
               iters, "every iteration bit-exact against cpu_ref");
  fprintf(stderr,
          "stage_gpu %s: iterations %lld stages %lld publishes %lld retires "
          "%lld aborts %lld (events: loads %lld evictions %lld failed %lld)\n",
          path, (long long)iters, (long long)c.stages, (long long)c.publishes,
          (long long)c.retires, (long long)c.aborts,
          (long long)kind_count(db, 3), (long long)kind_count(db, 11),
          (long long)kind_count(db, 13));
  snprintf(sc.backend, sizeof sc.backend, "model");
  lsim_replay_opts o2 = {.db_path = db2, .command_line = "test"};
  cr_assert_eq(lsim_replay_run(&sc, &o2, &s, &eb), 0, "%s", eb.msg);
  events_hex(db, h1);
  events_hex(db2, h2);
  cr_assert_str_eq(h1, h2, "the device pool changed a decision");
}

Test(stage_gpu, quickstart_device_pool_follows_the_engine, .init = mk_tmp,
     .fini = rm_tmp, .timeout = 600) {
  cuda_follows(LSIM_TEST_DIR "/../scenarios/quickstart.json", 0);
}

Test(stage_gpu, faults_and_hotswaps_device_pool_follows_the_engine,
     .init = mk_tmp, .fini = rm_tmp, .timeout = 600) {
  cuda_follows(FIXTURE, 0);
}

Test(stage_gpu, model_shape_device_pools_follow_the_engine, .init = mk_tmp,
     .fini = rm_tmp, .timeout = 600) {
  cuda_follows(FIXTURE, 1);
}
#else
Test(stage_gpu, quickstart_device_pool_follows_the_engine) {
  cr_skip_test("CUDA backend not built: nvcc was not found at configure time");
}
#endif

/* ---- backend registry flags (sim/audit.c's ceilings read them) ----------- */

Test(stage, backend_flags_say_which_backends_execute) {
  cr_assert(lsim_backend_flags("cpu_ref") & LSIM_BACKEND_EXECUTES);
  cr_assert_eq(lsim_backend_flags("model"), 0u);
  cr_assert_eq(lsim_backend_flags("nope"), 0u);
  cr_assert_eq(lsim_backend_flags(NULL), 0u);
  /* known with or without nvcc: a cuda run is judged the same anywhere */
  cr_assert(lsim_backend_flags("cuda") & LSIM_BACKEND_EXECUTES);
  for (const char *const *n = lsim_backend_names(); *n; n++)
    cr_assert_eq(lsim_backend_find(*n)->flags, lsim_backend_flags(*n), "%s",
                 *n);
}
