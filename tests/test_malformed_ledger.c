/* One-field mutations of real event logs, each refused by the event-log
** audit (engine/ledger.c) with its own stable code (docs/RELIABILITY.md,
** "Malformed-input corpus" and "Event-log audit").
**
** The valid fixtures are the logs of three replays of the repo's own
** scenarios, made by the real binary at the start of each test:
**   F  tests/fixtures/replay/faults.json: 2 workers, copy and digest
**      failures, rollbacks, compensating restores, cancels during loads
**   H  tests/fixtures/replay/hotswap.json (model backend): leases, shadow,
**      drain and new-alias hotswaps, aborts, retiring and reclaimed slots
**   P  tests/fixtures/replay/preempt-migrate.json: preemption by recompute
**      and migration
** Each unmutated log must pass.  Each case then changes ONE field of ONE
** event or request record (the nth match of a kind, optionally with a
** given attempt or detail), runs the whole audit and expects its code; the
** scheduler and recovery contracts of SCHEMA.md in the first tables, the
** lifecycle (lease, hotswap, reclamation) contracts in the last. */
#include <criterion/criterion.h>
#define LSIM_TMP_PREFIX "/tmp/lsim-mledger-"
#include "cli_harness.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ledger.h"
#include "sim/audit.h"

typedef struct logv {
  lsim_event *ev;
  int64_t n;
  lsim_request_record *rec;
  int64_t nrec;
  char **strs; /* owned detail / outcome strings */
  int64_t nstrs;
  lsim_ledger_cfg cfg;
} logv;

static const char *keep(logv *L, const unsigned char *s) {
  if (!s)
    return NULL;
  L->strs = realloc(L->strs, (size_t)(L->nstrs + 1) * sizeof *L->strs);
  cr_assert_not_null(L->strs);
  L->strs[L->nstrs] = strdup((const char *)s);
  return L->strs[L->nstrs++];
}

static int64_t opt(sqlite3_stmt *st, int i) {
  return sqlite3_column_type(st, i) == SQLITE_NULL
             ? LSIM_NONE
             : sqlite3_column_int64(st, i);
}

/* Replay the fixture scenario with the real binary and read its log. */
static void load_log(const char *scn, const char *extra, int max_attempts,
                     logv *L) {
  memset(L, 0, sizeof *L);
  char args[1024];
  snprintf(args, sizeof args,
           "replay '%s/fixtures/replay/%s' --quiet --no-plots --db log.db %s",
           LSIM_TEST_DIR, scn, extra);
  cr_assert_eq(lorasim(args), 0, "%s", out);
  char path[512];
  snprintf(path, sizeof path, "%s/log.db", tmpdir);
  sqlite3 *h;
  cr_assert_eq(sqlite3_open(path, &h), SQLITE_OK);
  sqlite3_stmt *st;
  cr_assert_eq(sqlite3_prepare_v2(h, "SELECT count(*) FROM events", -1, &st,
                                  NULL), SQLITE_OK);
  cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
  int64_t n = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  L->ev = calloc((size_t)n + 1, sizeof *L->ev);
  cr_assert_not_null(L->ev);
  cr_assert_eq(sqlite3_prepare_v2(h,
                                  "SELECT seq,tick,kind,worker,request,tenant,"
                                  "adapter,generation,attempt,pages,bytes,"
                                  "value,detail FROM events ORDER BY seq",
                                  -1, &st, NULL), SQLITE_OK);
  int maxa = -1;
  while (sqlite3_step(st) == SQLITE_ROW) {
    lsim_event *e = &L->ev[L->n++];
    e->seq = sqlite3_column_int64(st, 0);
    e->tick = sqlite3_column_int64(st, 1);
    e->kind = sqlite3_column_int(st, 2);
    e->worker = (int)opt(st, 3);
    e->request = opt(st, 4);
    e->tenant = (int)opt(st, 5);
    e->adapter = (int)opt(st, 6);
    e->generation = opt(st, 7);
    e->attempt = sqlite3_column_int(st, 8);
    e->pages = sqlite3_column_int64(st, 9);
    e->bytes = sqlite3_column_int64(st, 10);
    e->value = sqlite3_column_int64(st, 11);
    e->detail = keep(L, sqlite3_column_text(st, 12));
    if (e->adapter > maxa)
      maxa = e->adapter;
  }
  sqlite3_finalize(st);
  cr_assert_eq(sqlite3_prepare_v2(h, "SELECT count(*), max(workers) FROM "
                                  "requests, runs", -1, &st, NULL), SQLITE_OK);
  cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
  int64_t nr = sqlite3_column_int64(st, 0);
  L->cfg.workers = sqlite3_column_int(st, 1);
  sqlite3_finalize(st);
  L->rec = calloc((size_t)nr + 1, sizeof *L->rec);
  cr_assert_not_null(L->rec);
  cr_assert_eq(sqlite3_prepare_v2(h,
                                  "SELECT request,tenant,adapter,worker,"
                                  "arrival_tick,first_token_tick,finish_tick,"
                                  "prompt_tokens,output_tokens,loads_waited,"
                                  "outcome FROM requests ORDER BY request",
                                  -1, &st, NULL), SQLITE_OK);
  while (sqlite3_step(st) == SQLITE_ROW) {
    lsim_request_record *r = &L->rec[L->nrec++];
    r->request = sqlite3_column_int64(st, 0);
    r->tenant = (int)opt(st, 1);
    r->adapter = (int)opt(st, 2);
    r->worker = (int)opt(st, 3);
    r->arrival_tick = sqlite3_column_int64(st, 4);
    r->first_token_tick = opt(st, 5);
    r->finish_tick = sqlite3_column_int64(st, 6);
    r->prompt_tokens = sqlite3_column_int(st, 7);
    r->output_tokens = sqlite3_column_int(st, 8);
    r->loads_waited = sqlite3_column_int(st, 9);
    r->outcome = keep(L, sqlite3_column_text(st, 10));
  }
  sqlite3_finalize(st);
  sqlite3_close(h);
  L->cfg.nadapters = maxa + 1;
  L->cfg.max_load_attempts = max_attempts;
  cr_assert_gt(L->n, 100);
  cr_assert_gt(L->nrec, 0);
}

static void free_log(logv *L) {
  for (int64_t i = 0; i < L->nstrs; i++)
    free(L->strs[i]);
  free(L->strs);
  free(L->ev);
  free(L->rec);
}

static lsim_err audit(const logv *L, lsim_errbuf *eb) {
  lsim_ledger *g;
  lsim_err rc = lsim_ledger_new(&g, &L->cfg, eb);
  cr_assert_eq(rc, 0, "%s", eb->msg);
  for (int64_t i = 0; !rc && i < L->n; i++)
    rc = lsim_ledger_event(g, &L->ev[i], eb);
  for (int64_t i = 0; !rc && i < L->nrec; i++)
    rc = lsim_ledger_record(g, &L->rec[i], eb);
  if (!rc)
    rc = lsim_ledger_end(g, eb);
  lsim_ledger_release(g);
  return rc;
}

/* ---- the mutation table ---------------------------------------------------- */

enum { REC = -1 }; /* kind: a request record instead of an event */
enum {
  F_SEQ, F_TICK, F_KIND, F_WORKER, F_REQUEST, F_TENANT, F_ADAPTER, F_GEN,
  F_ATTEMPT, F_PAGES, F_BYTES, F_VALUE, F_DETAIL,
  R_REQUEST, R_TENANT, R_ADAPTER, R_ARRIVAL, R_FIRST, R_FINISH, R_PROMPT,
  R_OUTPUT, R_OUTCOME
};
enum {
  OP_ADD,     /* field += arg */
  OP_SET,     /* field = arg */
  OP_STR,     /* string field = sarg */
  OP_FLIP,    /* field ^= 1 (the other worker or tenant) */
  OP_PREV,    /* request = the request of the previous match */
  OP_CLOSED,  /* request = one that finished earlier, same tenant/adapter */
  OP_PREVTICK /* tick = the tick of the event before the previous one - 1 */
};

typedef struct mcase {
  const char *name;
  int kind;            /* event kind, or REC */
  int nth;             /* which match, from 0 */
  int attempt;         /* events: attempt must equal (0: any); records:
                          loads_waited >= this */
  const char *detail;  /* events: detail; records: outcome (NULL: any) */
  int field, op;
  int64_t arg;
  const char *sarg;
  lsim_err code;
} mcase;

static int ev_match(const lsim_event *e, const mcase *c) {
  if (e->kind != c->kind || (c->attempt && e->attempt != c->attempt))
    return 0;
  if (c->detail)
    return e->detail && strcmp(e->detail, c->detail) == 0;
  return 1;
}

static int64_t *ev_field(lsim_event *e, int f, int64_t *tmp) {
  switch (f) {
  case F_SEQ: return &e->seq;
  case F_TICK: return &e->tick;
  case F_REQUEST: return &e->request;
  case F_GEN: return &e->generation;
  case F_PAGES: return &e->pages;
  case F_BYTES: return &e->bytes;
  case F_VALUE: return &e->value;
  case F_KIND: *tmp = e->kind; return tmp;
  case F_WORKER: *tmp = e->worker; return tmp;
  case F_TENANT: *tmp = e->tenant; return tmp;
  case F_ADAPTER: *tmp = e->adapter; return tmp;
  case F_ATTEMPT: *tmp = e->attempt; return tmp;
  }
  return NULL;
}

static void ev_store(lsim_event *e, int f, int64_t v) {
  switch (f) {
  case F_KIND: e->kind = (int)v; break;
  case F_WORKER: e->worker = (int)v; break;
  case F_TENANT: e->tenant = (int)v; break;
  case F_ADAPTER: e->adapter = (int)v; break;
  case F_ATTEMPT: e->attempt = (int)v; break;
  default: break;
  }
}

static void run_case(logv *L, const mcase *c) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  if (c->kind == REC) {
    int64_t i, k = 0;
    for (i = 0; i < L->nrec; i++) {
      const lsim_request_record *r = &L->rec[i];
      if ((!c->detail || strcmp(r->outcome, c->detail) == 0) &&
          r->loads_waited >= c->attempt && k++ == c->nth)
        break;
    }
    cr_assert_lt(i, L->nrec, "%s: no record matches", c->name);
    lsim_request_record saved = L->rec[i], *r = &L->rec[i];
    int64_t v = 0;
    switch (c->field) {
    case R_REQUEST:
      cr_assert_eq(c->op, OP_PREV, "%s", c->name);
      cr_assert_gt(i, 0);
      r->request = L->rec[i - 1].request;
      break;
    case R_TENANT: r->tenant = c->op == OP_FLIP ? r->tenant ^ 1 : (int)c->arg; break;
    case R_ADAPTER: r->adapter = (int)(c->op == OP_ADD ? r->adapter + c->arg : c->arg); break;
    case R_ARRIVAL: v = r->arrival_tick; r->arrival_tick = c->op == OP_ADD ? v + c->arg : c->arg; break;
    case R_FIRST:
      r->first_token_tick = c->op == OP_ADD ? r->arrival_tick + c->arg : c->arg;
      break;
    case R_FINISH:
      r->finish_tick = c->op == OP_ADD ? r->finish_tick + c->arg : r->arrival_tick - 1;
      break;
    case R_PROMPT: r->prompt_tokens = (int)c->arg; break;
    case R_OUTPUT: r->output_tokens += (int)c->arg; break;
    case R_OUTCOME: r->outcome = c->sarg; break;
    default: cr_assert_fail("%s: bad field", c->name);
    }
    cr_assert(memcmp(&saved, r, sizeof saved) != 0, "%s: no change",
              c->name);
    lsim_err rc = audit(L, &eb);
    L->rec[i] = saved;
    cr_expect_eq(rc, c->code, "%s: expected %s, got %s (%s)", c->name,
                 lsim_err_name(c->code), lsim_err_name(rc), eb.msg);
    return;
  }
  int64_t i, k = 0, prev = -1;
  for (i = 0; i < L->n; i++)
    if (ev_match(&L->ev[i], c)) {
      if (k++ == c->nth)
        break;
      prev = i;
    }
  cr_assert_lt(i, L->n, "%s: no event matches", c->name);
  lsim_event saved = L->ev[i], *e = &L->ev[i];
  int64_t tmp, *p;
  switch (c->op) {
  case OP_STR:
    e->detail = c->sarg;
    break;
  case OP_PREV:
    cr_assert_geq(prev, 0, "%s: no previous match", c->name);
    e->request = L->ev[prev].request;
    break;
  case OP_CLOSED: {
    int64_t j;
    for (j = 0; j < i; j++)
      if (L->ev[j].kind == LSIM_EV_REQUEST_FINISHED &&
          L->ev[j].tenant == e->tenant && L->ev[j].adapter == e->adapter &&
          L->ev[j].request != e->request)
        break;
    cr_assert_lt(j, i, "%s: no closed twin", c->name);
    e->request = L->ev[j].request;
    break;
  }
  case OP_PREVTICK:
    cr_assert_gt(i, 1);
    e->tick = L->ev[i - 2].tick - 1;
    break;
  default:
    p = ev_field(e, c->field, &tmp);
    cr_assert_not_null(p, "%s: bad field", c->name);
    *p = c->op == OP_ADD ? *p + c->arg : c->op == OP_FLIP ? *p ^ 1 : c->arg;
    if (p == &tmp)
      ev_store(e, c->field, tmp);
  }
  cr_assert(memcmp(&saved, e, sizeof saved) != 0 ||
                (saved.detail != e->detail),
            "%s: the mutation changed nothing", c->name);
  lsim_err rc = audit(L, &eb);
  L->ev[i] = saved;
  cr_expect_eq(rc, c->code, "%s: expected %s, got %s (%s)", c->name,
               lsim_err_name(c->code), lsim_err_name(rc), eb.msg);
}

static void run_table(const char *scn, const char *extra, int max_attempts,
                      const mcase *t, size_t n) {
  logv L;
  load_log(scn, extra, max_attempts, &L);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(audit(&L, &eb), 0, "the valid log fails: %s", eb.msg);
  for (size_t i = 0; i < n; i++)
    run_case(&L, &t[i]);
  free_log(&L);
}

#define EV(k) LSIM_EV_##k
#define NOTE LSIM_EV_FAULT_INJECTED /* a kind no contract tracks */

/* ---- F: scheduling, service, loads and recovery (faults.json) ------------- */

static const mcase faults_cases[] = {
  /* order and vocabulary */
  {"seq repeated", EV(ITERATION_COMPLETED), 40, 0, NULL, F_SEQ, OP_ADD, -1, NULL, LSIM_E_LOG_ORDER},
  {"tick before the previous event", EV(COMPLETED_SERVICE_DEBITED), 30, 0, NULL, F_TICK, OP_PREVTICK, 0, NULL, LSIM_E_LOG_ORDER},
  {"enqueue tick zero mid-run", EV(QUEUE_ENQUEUED), 50, 0, NULL, F_TICK, OP_SET, 0, NULL, LSIM_E_LOG_ORDER},
  {"kind code 0", EV(ITERATION_SELECTED), 3, 0, NULL, F_KIND, OP_SET, 0, NULL, LSIM_E_LOG_KIND},
  {"kind code past the last", EV(KV_RESERVED), 3, 0, NULL, F_KIND, OP_SET, LSIM_EV__END, NULL, LSIM_E_LOG_KIND},
  {"kind code 99", EV(ADAPTER_LOAD_STARTED), 3, 0, NULL, F_KIND, OP_SET, 99, NULL, LSIM_E_LOG_KIND},
  {"negative attempt", EV(ADAPTER_LOAD_STARTED), 2, 0, NULL, F_ATTEMPT, OP_SET, -1, NULL, LSIM_E_LOG_FIELD},
  {"negative pages", EV(KV_RESERVED), 2, 0, NULL, F_PAGES, OP_SET, -1, NULL, LSIM_E_LOG_FIELD},
  {"negative bytes", EV(ADAPTER_LOAD_STARTED), 4, 0, NULL, F_BYTES, OP_SET, -5, NULL, LSIM_E_LOG_FIELD},
  {"negative value", EV(ITERATION_SELECTED), 4, 0, NULL, F_VALUE, OP_SET, -1, NULL, LSIM_E_LOG_FIELD},
  {"worker out of range", EV(QUEUE_ENQUEUED), 7, 0, NULL, F_WORKER, OP_SET, 7, NULL, LSIM_E_LOG_FIELD},
  {"adapter out of range", EV(ADAPTER_GENERATION_PUBLISHED), 1, 0, NULL, F_ADAPTER, OP_SET, 999, NULL, LSIM_E_LOG_FIELD},
  {"iteration result 'partial'", EV(ITERATION_COMPLETED), 9, 0, NULL, F_DETAIL, OP_STR, 0, "partial", LSIM_E_LOG_FIELD},
  {"debit phase 'bonus'", EV(COMPLETED_SERVICE_DEBITED), 9, 0, NULL, F_DETAIL, OP_STR, 0, "bonus", LSIM_E_LOG_FIELD},
  {"enqueue detail 'warm'", EV(QUEUE_ENQUEUED), 9, 0, NULL, F_DETAIL, OP_STR, 0, "warm", LSIM_E_LOG_FIELD},
  {"finish detail 'done'", EV(REQUEST_FINISHED), 9, 0, NULL, F_DETAIL, OP_STR, 0, "done", LSIM_E_LOG_FIELD},
  {"load failure 'timeout'", EV(ADAPTER_LOAD_FAILED), 0, 0, NULL, F_DETAIL, OP_STR, 0, "timeout", LSIM_E_LOG_FIELD},
  {"cancel detail 'lost'", EV(REQUEST_CANCELLED), 0, 0, NULL, F_DETAIL, OP_STR, 0, "lost", LSIM_E_LOG_FIELD},
  {"plan with a detail", EV(ITERATION_SELECTED), 9, 0, NULL, F_DETAIL, OP_STR, 0, "ok", LSIM_E_LOG_FIELD},
  {"debit without a request", EV(COMPLETED_SERVICE_DEBITED), 11, 0, NULL, F_REQUEST, OP_SET, LSIM_NONE, NULL, LSIM_E_LOG_FIELD},
  /* request identity and closure */
  {"debit for an unknown request", EV(COMPLETED_SERVICE_DEBITED), 12, 0, NULL, F_REQUEST, OP_SET, 999999, NULL, LSIM_E_LOG_UNKNOWN_REQUEST},
  {"admission of an unknown request", EV(KV_RESERVED), 12, 0, NULL, F_REQUEST, OP_SET, 999999, NULL, LSIM_E_LOG_UNKNOWN_REQUEST},
  {"finish of an unknown request", EV(REQUEST_FINISHED), 12, 0, NULL, F_REQUEST, OP_SET, 999999, NULL, LSIM_E_LOG_UNKNOWN_REQUEST},
  {"load opened for an unknown request", EV(ADAPTER_LOAD_STARTED), 6, 1, NULL, F_REQUEST, OP_SET, 999999, NULL, LSIM_E_LOG_UNKNOWN_REQUEST},
  {"debit to another tenant", EV(COMPLETED_SERVICE_DEBITED), 20, 0, NULL, F_TENANT, OP_FLIP, 0, NULL, LSIM_E_LOG_IDENTITY},
  {"finish under another tenant", EV(REQUEST_FINISHED), 20, 0, NULL, F_TENANT, OP_FLIP, 0, NULL, LSIM_E_LOG_IDENTITY},
  {"admission under another adapter", EV(KV_RESERVED), 20, 0, NULL, F_ADAPTER, OP_ADD, 1, NULL, LSIM_E_LOG_IDENTITY},
  {"record under another tenant", REC, 5, 0, "ok", R_TENANT, OP_FLIP, 0, NULL, LSIM_E_LOG_IDENTITY},
  {"record under another adapter", REC, 6, 0, "ok", R_ADAPTER, OP_ADD, 1, NULL, LSIM_E_LOG_IDENTITY},
  {"debit for a finished request", EV(COMPLETED_SERVICE_DEBITED), 3000, 0, NULL, F_REQUEST, OP_CLOSED, 0, NULL, LSIM_E_LOG_AFTER_CLOSE},
  {"admission of a finished request", EV(KV_RESERVED), 300, 0, NULL, F_REQUEST, OP_CLOSED, 0, NULL, LSIM_E_LOG_AFTER_CLOSE},
  {"request enqueued twice", EV(QUEUE_ENQUEUED), 30, 0, NULL, F_REQUEST, OP_PREV, 0, NULL, LSIM_E_LOG_DUP_REQUEST},
  {"second request reuses the first id", EV(QUEUE_ENQUEUED), 1, 0, NULL, F_REQUEST, OP_PREV, 0, NULL, LSIM_E_LOG_DUP_REQUEST},
  /* iterations and completed service */
  {"completion names the next iteration", EV(ITERATION_COMPLETED), 60, 0, NULL, F_GEN, OP_ADD, 1, NULL, LSIM_E_LOG_ITERATION},
  {"plan numbered off by one", EV(ITERATION_SELECTED), 61, 0, NULL, F_GEN, OP_ADD, 1, NULL, LSIM_E_LOG_ITERATION},
  {"completion on the other worker", EV(ITERATION_COMPLETED), 62, 0, NULL, F_WORKER, OP_FLIP, 0, NULL, LSIM_E_LOG_ITERATION},
  {"failed iteration completing rows", EV(ITERATION_COMPLETED), 63, 0, NULL, F_DETAIL, OP_STR, 0, "failed", LSIM_E_LOG_ITERATION},
  {"more rows than planned", EV(ITERATION_COMPLETED), 64, 0, NULL, F_VALUE, OP_ADD, 1000, NULL, LSIM_E_LOG_ITERATION},
  {"debit under an older iteration", EV(COMPLETED_SERVICE_DEBITED), 70, 0, NULL, F_GEN, OP_ADD, -1, NULL, LSIM_E_LOG_PHANTOM_SERVICE},
  {"debit on the other worker", EV(COMPLETED_SERVICE_DEBITED), 71, 0, NULL, F_WORKER, OP_FLIP, 0, NULL, LSIM_E_LOG_PHANTOM_SERVICE},
  {"debit a tick after completion", EV(COMPLETED_SERVICE_DEBITED), 72, 0, "decode", F_TICK, OP_ADD, 1, NULL, LSIM_E_LOG_PHANTOM_SERVICE},
  {"service for a request never admitted", EV(KV_RESERVED), 40, 0, NULL, F_KIND, OP_SET, NOTE, NULL, LSIM_E_LOG_PHANTOM_SERVICE},
  {"debit above the completed rows", EV(COMPLETED_SERVICE_DEBITED), 80, 0, NULL, F_VALUE, OP_ADD, 1000, NULL, LSIM_E_LOG_SERVICE_EXCESS},
  {"completion one row short of its debits", EV(ITERATION_COMPLETED), 81, 0, NULL, F_VALUE, OP_ADD, -1, NULL, LSIM_E_LOG_SERVICE_EXCESS},
  /* loads: attempts, order, generations, rollback */
  {"first load counted as attempt 2", EV(ADAPTER_LOAD_STARTED), 0, 0, NULL, F_ATTEMPT, OP_SET, 2, NULL, LSIM_E_LOG_ATTEMPT},
  {"retry counted as attempt 3", EV(ADAPTER_LOAD_STARTED), 0, 2, NULL, F_ATTEMPT, OP_SET, 3, NULL, LSIM_E_LOG_ATTEMPT},
  {"retry hides as attempt 1", EV(ADAPTER_LOAD_STARTED), 1, 2, NULL, F_ATTEMPT, OP_SET, 1, NULL, LSIM_E_LOG_ATTEMPT},
  {"restore counted as attempt 2", EV(ADAPTER_LOAD_STARTED), 0, 0, "restore", F_ATTEMPT, OP_SET, 2, NULL, LSIM_E_LOG_ATTEMPT},
  {"copy completion of another generation", EV(ADAPTER_LOAD_COMPLETED), 5, 0, NULL, F_GEN, OP_ADD, 1, NULL, LSIM_E_LOG_LOAD_ORPHAN},
  {"copy completion on the other worker", EV(ADAPTER_LOAD_COMPLETED), 6, 0, NULL, F_WORKER, OP_FLIP, 0, NULL, LSIM_E_LOG_LOAD_ORPHAN},
  {"validation of another attempt", EV(ADAPTER_VALIDATED), 7, 0, NULL, F_ATTEMPT, OP_ADD, 1, NULL, LSIM_E_LOG_LOAD_ORPHAN},
  {"failure of another generation", EV(ADAPTER_LOAD_FAILED), 1, 0, NULL, F_GEN, OP_ADD, 1, NULL, LSIM_E_LOG_LOAD_ORPHAN},
  {"publication of an adapter not loading", EV(ADAPTER_GENERATION_PUBLISHED), 8, 0, NULL, F_ADAPTER, OP_ADD, 1, NULL, LSIM_E_LOG_LOAD_ORPHAN},
  {"publication skips a generation", EV(ADAPTER_GENERATION_PUBLISHED), 9, 0, NULL, F_GEN, OP_ADD, 1, NULL, LSIM_E_LOG_GENERATION},
  {"first load reuses generation 0", EV(ADAPTER_LOAD_STARTED), 10, 1, NULL, F_GEN, OP_ADD, -1, NULL, LSIM_E_LOG_GENERATION},
  {"retry reuses the failed generation", EV(ADAPTER_LOAD_STARTED), 0, 2, NULL, F_GEN, OP_ADD, -1, NULL, LSIM_E_LOG_GENERATION},
  {"eviction of an unpublished generation", EV(ADAPTER_EVICTED), 3, 0, NULL, F_GEN, OP_ADD, 1, NULL, LSIM_E_LOG_GENERATION},
  {"retirement of an older generation", EV(ADAPTER_RETIRED), 4, 0, NULL, F_GEN, OP_ADD, -1, NULL, LSIM_E_LOG_GENERATION},
  {"rollback returns one page more", EV(LOAD_ROLLED_BACK), 2, 0, NULL, F_PAGES, OP_ADD, 1, NULL, LSIM_E_LOG_ROLLBACK},
  {"rollback returns one page less", EV(LOAD_ROLLED_BACK), 3, 0, NULL, F_PAGES, OP_ADD, -1, NULL, LSIM_E_LOG_ROLLBACK},
  {"rollback of another generation", EV(LOAD_ROLLED_BACK), 4, 0, NULL, F_GEN, OP_ADD, 1, NULL, LSIM_E_LOG_ROLLBACK},
  {"rollback on the other worker", EV(LOAD_ROLLED_BACK), 5, 0, NULL, F_WORKER, OP_FLIP, 0, NULL, LSIM_E_LOG_ROLLBACK},
  {"failed load holds fewer pages", EV(ADAPTER_LOAD_FAILED), 6, 0, NULL, F_PAGES, OP_ADD, -1, NULL, LSIM_E_LOG_ROLLBACK},
  {"retry before the rollback", EV(LOAD_ROLLED_BACK), 0, 0, NULL, F_KIND, OP_SET, NOTE, NULL, LSIM_E_LOG_ROLLBACK},
  {"cancel returns more than the load holds", EV(REQUEST_CANCELLED), 1, 0, "during_load", F_PAGES, OP_ADD, 100000, NULL, LSIM_E_LOG_ROLLBACK},
  {"KV released twice", EV(KV_RELEASED), 200, 0, NULL, F_REQUEST, OP_CLOSED, 0, NULL, LSIM_E_LOG_KV_ORPHAN},
  /* copy event, validation, publication in that order */
  {"validated before the copy completed", EV(ADAPTER_LOAD_COMPLETED), 3, 0, NULL, F_KIND, OP_SET, NOTE, NULL, LSIM_E_LOG_PUBLISH_ORDER},
  {"restore validated before its copy completed", EV(ADAPTER_LOAD_COMPLETED), 0, 0, "restore", F_KIND, OP_SET, NOTE, NULL, LSIM_E_LOG_PUBLISH_ORDER},
  {"published without validation", EV(ADAPTER_VALIDATED), 4, 0, NULL, F_KIND, OP_SET, NOTE, NULL, LSIM_E_LOG_PUBLISH_ORDER},
  {"restore published without validation", EV(ADAPTER_VALIDATED), 0, 0, "restore", F_KIND, OP_SET, NOTE, NULL, LSIM_E_LOG_PUBLISH_ORDER},
  /* readiness */
  {"admission under an unpublished generation", EV(KV_RESERVED), 100, 0, NULL, F_GEN, OP_ADD, 1, NULL, LSIM_E_LOG_NOT_READY},
  {"admission under generation 0", EV(KV_RESERVED), 101, 0, NULL, F_GEN, OP_SET, 0, NULL, LSIM_E_LOG_NOT_READY},
  /* records against the log */
  {"arrival moved to a later tick", REC, 3, 1, "ok", R_ARRIVAL, OP_ADD, 100, NULL, LSIM_E_LOG_AGE_RESET},
  {"arrival moved earlier", REC, 4, 0, "ok", R_ARRIVAL, OP_ADD, -1, NULL, LSIM_E_LOG_AGE_RESET},
  {"record with one token more", REC, 10, 0, "ok", R_OUTPUT, OP_ADD, 1, NULL, LSIM_E_LOG_RECORD},
  {"record finishing a tick late", REC, 11, 0, "ok", R_FINISH, OP_ADD, 1, NULL, LSIM_E_LOG_RECORD},
  {"finished request recorded unfinished", REC, 12, 0, "ok", R_OUTCOME, OP_STR, 0, "unfinished", LSIM_E_LOG_RECORD},
  {"cancelled request recorded rejected", REC, 0, 0, "cancelled", R_OUTCOME, OP_STR, 0, "rejected", LSIM_E_LOG_RECORD},
  {"first token before arrival", REC, 13, 0, "ok", R_FIRST, OP_ADD, -1, NULL, LSIM_E_LOG_RECORD},
  {"cancelled before it arrived", REC, 1, 0, "cancelled", R_FINISH, OP_SET, 0, NULL, LSIM_E_LOG_RECORD},
  {"two records for one request", REC, 20, 0, NULL, R_REQUEST, OP_PREV, 0, NULL, LSIM_E_LOG_RECORD},
  {"outcome 'exploded'", REC, 14, 0, "ok", R_OUTCOME, OP_STR, 0, "exploded", LSIM_E_LOG_FIELD},
  {"negative prompt", REC, 15, 0, "ok", R_PROMPT, OP_SET, -3, NULL, LSIM_E_LOG_FIELD},
};

Test(malformed_ledger, scheduler_and_recovery, .init = mk_tmp, .fini = rm_tmp) {
  run_table("faults.json", "", 3, faults_cases,
            sizeof faults_cases / sizeof faults_cases[0]);
}

/* ---- P: preemption and migration (preempt-migrate.json) ------------------- */

static const mcase preempt_cases[] = {
  {"service after a migration without re-admission", EV(KV_RESERVED), 6, 0, NULL, F_KIND, OP_SET, NOTE, NULL, LSIM_E_LOG_PHANTOM_SERVICE},
  {"migrated request admitted under generation 2", EV(KV_RESERVED), 7, 0, NULL, F_GEN, OP_ADD, 1, NULL, LSIM_E_LOG_NOT_READY},
  {"preempted request of another tenant", EV(REQUEST_PREEMPTED), 0, 0, NULL, F_TENANT, OP_FLIP, 0, NULL, LSIM_E_LOG_IDENTITY},
  {"preemption detail 'evict'", EV(REQUEST_PREEMPTED), 1, 0, NULL, F_DETAIL, OP_STR, 0, "evict", LSIM_E_LOG_FIELD},
  {"preemption of an unknown request", EV(REQUEST_PREEMPTED), 2, 0, NULL, F_REQUEST, OP_SET, 999999, NULL, LSIM_E_LOG_UNKNOWN_REQUEST},
  {"re-admission under generation 0", EV(KV_RESERVED), 7, 0, NULL, F_GEN, OP_SET, 0, NULL, LSIM_E_LOG_NOT_READY},
};

Test(malformed_ledger, preemption, .init = mk_tmp, .fini = rm_tmp) {
  run_table("preempt-migrate.json", "", 0, preempt_cases,
            sizeof preempt_cases / sizeof preempt_cases[0]);
}

/* ---- H: leases, hotswap, reclamation (hotswap.json) ------------------------ */

static const mcase hotswap_cases[] = {
  /* a lease is released with the handle it was bound with */
  {"release names another catalog generation", EV(LEASE_RELEASED), 10, 0, NULL, F_GEN, OP_ADD, 1, NULL, LSIM_E_LOG_LEASE},
  {"release names another version", EV(LEASE_RELEASED), 11, 0, NULL, F_ATTEMPT, OP_ADD, 1, NULL, LSIM_E_LOG_LEASE},
  {"release names another slot", EV(LEASE_RELEASED), 12, 0, NULL, F_PAGES, OP_ADD, 1, NULL, LSIM_E_LOG_LEASE},
  {"release names another pointer generation", EV(LEASE_RELEASED), 13, 0, NULL, F_BYTES, OP_ADD, 1, NULL, LSIM_E_LOG_LEASE},
  {"release names another slot generation", EV(LEASE_RELEASED), 14, 0, NULL, F_VALUE, OP_ADD, 1, NULL, LSIM_E_LOG_LEASE},
  {"release on the other worker", EV(LEASE_RELEASED), 15, 0, NULL, F_WORKER, OP_FLIP, 0, NULL, LSIM_E_LOG_LEASE},
  {"bound under another catalog generation", EV(LEASE_BOUND), 20, 0, NULL, F_GEN, OP_ADD, 1, NULL, LSIM_E_LOG_LEASE},
  {"bound to another version", EV(LEASE_BOUND), 21, 0, NULL, F_ATTEMPT, OP_ADD, 1, NULL, LSIM_E_LOG_LEASE},
  {"bound with another pointer generation", EV(LEASE_BOUND), 22, 0, NULL, F_BYTES, OP_ADD, 1, NULL, LSIM_E_LOG_LEASE},
  {"bound to a slot generation others do not hold", EV(LEASE_BOUND), 200, 0, NULL, F_VALUE, OP_ADD, 5, NULL, LSIM_E_LOG_LEASE},
  {"release without a binding", EV(LEASE_BOUND), 30, 0, NULL, F_KIND, OP_SET, NOTE, NULL, LSIM_E_LOG_LEASE},
  {"second lease for one request", EV(LEASE_RELEASED), 40, 0, NULL, F_KIND, OP_SET, EV(LEASE_BOUND), NULL, LSIM_E_LOG_LEASE},
  {"bound to the neighbouring slot", EV(LEASE_BOUND), 23, 0, NULL, F_PAGES, OP_ADD, 1, NULL, LSIM_E_LOG_LEASE},
  {"bound on the other worker", EV(LEASE_BOUND), 24, 0, NULL, F_WORKER, OP_FLIP, 0, NULL, LSIM_E_LOG_LEASE},
  /* staging, validation, publication */
  {"validation of another slot", EV(HOTSWAP_VALIDATED), 0, 0, NULL, F_PAGES, OP_ADD, 1, NULL, LSIM_E_LOG_HOTSWAP_ORDER},
  {"validation on the other worker", EV(HOTSWAP_VALIDATED), 0, 0, NULL, F_WORKER, OP_FLIP, 0, NULL, LSIM_E_LOG_HOTSWAP_ORDER},
  {"validation without staging", EV(HOTSWAP_STAGED), 1, 0, "shadow", F_KIND, OP_SET, NOTE, NULL, LSIM_E_LOG_HOTSWAP_ORDER},
  {"shadow published unvalidated", EV(HOTSWAP_VALIDATED), 0, 0, NULL, F_KIND, OP_SET, NOTE, NULL, LSIM_E_LOG_HOTSWAP_ORDER},
  {"new alias published unvalidated", EV(HOTSWAP_VALIDATED), 1, 0, NULL, F_KIND, OP_SET, NOTE, NULL, LSIM_E_LOG_HOTSWAP_ORDER},
  {"drain published without draining", EV(HOTSWAP_STAGED), 0, 0, "drain_then_overwrite", F_KIND, OP_SET, NOTE, NULL, LSIM_E_LOG_HOTSWAP_ORDER},
  {"shadow published into another slot", EV(HOTSWAP_PUBLISHED), 0, 0, "shadow", F_PAGES, OP_ADD, 1, NULL, LSIM_E_LOG_HOTSWAP_ORDER},
  {"new alias validated in another slot", EV(HOTSWAP_VALIDATED), 0, 0, "new_alias", F_PAGES, OP_ADD, 1, NULL, LSIM_E_LOG_HOTSWAP_ORDER},
  {"new alias published into another slot", EV(HOTSWAP_PUBLISHED), 0, 0, "new_alias", F_PAGES, OP_ADD, 1, NULL, LSIM_E_LOG_HOTSWAP_ORDER},
  {"new alias validated without staging", EV(HOTSWAP_STAGED), 0, 0, "new_alias", F_KIND, OP_SET, NOTE, NULL, LSIM_E_LOG_HOTSWAP_ORDER},
  {"drain overwrites another slot", EV(HOTSWAP_PUBLISHED), 0, 0, "drain_then_overwrite", F_PAGES, OP_ADD, 1, NULL, LSIM_E_LOG_HOTSWAP_ORDER},
  {"cold take relabelled shadow", EV(HOTSWAP_PUBLISHED), 0, 0, "cold", F_DETAIL, OP_STR, 0, "shadow", LSIM_E_LOG_HOTSWAP_ORDER},
  {"published catalog generation not bumped", EV(HOTSWAP_PUBLISHED), 0, 0, "shadow", F_GEN, OP_ADD, -1, NULL, LSIM_E_LOG_CATALOG},
  {"drain publication not bumped", EV(HOTSWAP_PUBLISHED), 0, 0, "drain_then_overwrite", F_GEN, OP_ADD, -1, NULL, LSIM_E_LOG_CATALOG},
  {"new alias publication moves back", EV(HOTSWAP_PUBLISHED), 0, 0, "new_alias", F_GEN, OP_ADD, -3, NULL, LSIM_E_LOG_CATALOG},
  {"cold take lowers the catalog", EV(HOTSWAP_PUBLISHED), 1, 0, "cold", F_GEN, OP_ADD, -1, NULL, LSIM_E_LOG_CATALOG},
  /* reclamation */
  {"reclaimed without retiring", EV(SLOT_RETIRING), 0, 0, NULL, F_KIND, OP_SET, NOTE, NULL, LSIM_E_LOG_RECLAIM},
  {"reclaim of another slot", EV(SLOT_RECLAIMED), 0, 0, NULL, F_PAGES, OP_ADD, 1, NULL, LSIM_E_LOG_RECLAIM},
  {"reclaim keeps the pointer generation", EV(SLOT_RECLAIMED), 0, 0, NULL, F_BYTES, OP_ADD, -1, NULL, LSIM_E_LOG_RECLAIM},
  {"reclaim keeps the slot generation", EV(SLOT_RECLAIMED), 1, 0, NULL, F_VALUE, OP_ADD, -1, NULL, LSIM_E_LOG_RECLAIM},
  {"reclaim on the other worker", EV(SLOT_RECLAIMED), 1, 0, NULL, F_WORKER, OP_FLIP, 0, NULL, LSIM_E_LOG_RECLAIM},
  {"retirement recorded for another slot", EV(SLOT_RETIRING), 0, 0, NULL, F_PAGES, OP_ADD, 3, NULL, LSIM_E_LOG_RECLAIM},
  {"retiring slot generation above the reclaim", EV(SLOT_RETIRING), 1, 0, NULL, F_VALUE, OP_ADD, 5, NULL, LSIM_E_LOG_RECLAIM},
  /* the shadow copy's pool charge */
  {"shadow charge under a stale generation", EV(KV_RESERVED), 0, 0, "hotswap_shadow", F_GEN, OP_ADD, 1, NULL, LSIM_E_LOG_NOT_READY},
  {"shadow charge released twice", EV(KV_RESERVED), 1, 0, "hotswap_shadow", F_KIND, OP_SET, NOTE, NULL, LSIM_E_LOG_KV_ORPHAN},
  {"KV charge of no request, no shadow", EV(KV_RESERVED), 0, 0, "hotswap_shadow", F_DETAIL, OP_STR, 0, "prefetch", LSIM_E_LOG_FIELD},
};

Test(malformed_ledger, lifecycle, .init = mk_tmp, .fini = rm_tmp) {
  run_table("hotswap.json", "--backend model", 0, hotswap_cases,
            sizeof hotswap_cases / sizeof hotswap_cases[0]);
}

/* A lease still live on a retiring slot forbids its reclamation: drop the
** release of the last lease on the first reclaimed slot (one field: its
** kind) and the reclamation is refused. */
Test(malformed_ledger, reclaim_under_live_lease, .init = mk_tmp,
     .fini = rm_tmp) {
  logv L;
  load_log("hotswap.json", "--backend model", 0, &L);
  int64_t rec = -1, last = -1;
  for (int64_t i = 0; i < L.n && rec < 0; i++)
    if (L.ev[i].kind == LSIM_EV_SLOT_RECLAIMED)
      rec = i;
  cr_assert_geq(rec, 0);
  int64_t retire_gen = -1;
  for (int64_t i = rec - 1; i >= 0 && retire_gen < 0; i--)
    if (L.ev[i].kind == LSIM_EV_SLOT_RETIRING &&
        L.ev[i].worker == L.ev[rec].worker && L.ev[i].pages == L.ev[rec].pages)
      retire_gen = L.ev[i].value;
  for (int64_t i = 0; i < rec; i++)
    if (L.ev[i].kind == LSIM_EV_LEASE_RELEASED &&
        L.ev[i].worker == L.ev[rec].worker &&
        L.ev[i].pages == L.ev[rec].pages && L.ev[i].value == retire_gen)
      last = i;
  cr_assert_geq(last, 0, "no lease was held on the reclaimed slot");
  L.ev[last].kind = NOTE;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(audit(&L, &eb), LSIM_E_LOG_RECLAIM, "%s", eb.msg);
  cr_assert(strstr(eb.msg, "lease"), "%s", eb.msg);
  L.ev[last].kind = LSIM_EV_LEASE_RELEASED;
  cr_assert_eq(audit(&L, &eb), 0, "%s", eb.msg);
  free_log(&L);
}

/* The real pipeline: `lorasim audit` passes on the runs it writes, under
** every policy combination the fixtures exercise, and names a planted
** violation with exit 1. */
Test(malformed_ledger, cli_audit, .init = mk_tmp, .fini = rm_tmp) {
  static const char *const runs[] = {
      "faults.json --scheduler deficit_aging --prefetch age_triggered",
      "faults.json --scheduler vtc --prefetch queue_lookahead --evict gdsf",
      "hotswap.json --backend model", "withdraw.json",
      "preempt-incremental.json", "kv_deadlock.json"};
  char args[1024];
  for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
    snprintf(args, sizeof args,
             "replay %s/fixtures/replay/%s --quiet --no-plots --db r.db",
             LSIM_TEST_DIR, runs[i]);
    cr_assert_eq(lorasim(args), 0, "%s: %s", runs[i], out);
    cr_assert_eq(lorasim("audit r.db"), 0, "%s: %s", runs[i], out);
    cr_assert(strstr(out, "0 findings"), "%s", out);
  }
  char path[512], sql[256];
  snprintf(path, sizeof path, "%s/r.db", tmpdir);
  snprintf(sql, sizeof sql,
           "UPDATE event_log SET generation = generation + 1 WHERE seq = "
           "(SELECT min(seq) FROM events WHERE kind = %d)",
           LSIM_EV_ADAPTER_GENERATION_PUBLISHED);
  sqlite3 *h;
  cr_assert_eq(sqlite3_open(path, &h), SQLITE_OK);
  cr_assert_eq(sqlite3_exec(h, sql, NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(h);
  cr_assert_eq(lorasim("audit r.db"), 1, "%s", out);
  cr_assert(strstr(out, "E_LOG_GENERATION"), "%s", out);
  cr_assert_eq(lorasim("audit no-such.db"), 2, "%s", out);
}
