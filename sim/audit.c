/*
** audit.c: the claim audit, the runs_evidence table and `lorasim audit`
** (audit.h).
*/
#include "audit.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../backends/backend.h"
#include "../engine/ledger.h"
#include "db.h"
#include "escape.h"
#include "outfile.h"
#include "scenario.h"

static const char *const lsim__evid[] = {"cited", "modeled", "measured",
                                         "exact"};
static const char *const lsim__src[] = {"log",      "sim_time",  "cost_model",
                                        "backend_time", "bytes", "exact_ref",
                                        "baseline", "measured_clock"};

const char *lsim_evidence_name(int cls) {
  return cls >= 0 && cls <= LSIM_EVID_EXACT ? lsim__evid[cls] : NULL;
}

int lsim_evidence_find(const char *name) {
  for (int i = 0; name && i <= LSIM_EVID_EXACT; i++)
    if (strcmp(name, lsim__evid[i]) == 0)
      return i;
  return -1;
}

const char *lsim_source_name(int src) {
  return src >= 0 && src < LSIM_SRC__COUNT ? lsim__src[src] : NULL;
}

int lsim_source_find(const char *name) {
  for (int i = 0; name && i < LSIM_SRC__COUNT; i++)
    if (strcmp(name, lsim__src[i]) == 0)
      return i;
  return -1;
}

/* A backend that executes and times iterations in this process (its
** registry flags, backends/backend.c). */
static int lsim__executes(const char *backend) {
  return (lsim_backend_flags(backend) & LSIM_BACKEND_EXECUTES) != 0;
}

static int lsim__ceiling1(int src, int time, const char *backend) {
  int c;
  switch (src) {
  case LSIM_SRC_LOG:
  case LSIM_SRC_BYTES:
    /* exact counts; a time derived from them is simulated or inferred */
    c = time ? LSIM_EVID_MODELED : LSIM_EVID_EXACT;
    break;
  case LSIM_SRC_SIM_TIME:
  case LSIM_SRC_COST_MODEL:
    c = LSIM_EVID_MODELED;
    break;
  case LSIM_SRC_BACKEND_TIME:
  case LSIM_SRC_MEASURED_CLOCK:
    c = lsim__executes(backend) ? LSIM_EVID_MEASURED : LSIM_EVID_MODELED;
    break;
  case LSIM_SRC_EXACT_REF:
    c = lsim__executes(backend) ? LSIM_EVID_EXACT : LSIM_EVID_MODELED;
    break;
  case LSIM_SRC_BASELINE:
    c = LSIM_EVID_CITED;
    break;
  default:
    return -1;
  }
  if (time && c > LSIM_EVID_MEASURED)
    c = LSIM_EVID_MEASURED; /* a time is never exact */
  return c;
}

int lsim_claim_ceiling(const lsim_claim *c, const char *backend) {
  int a = lsim__ceiling1(c->source, c->time, backend);
  if (a < 0 || c->operand == LSIM_SRC_NONE)
    return a;
  int b = lsim__ceiling1(c->operand, c->time, backend);
  return b < 0 ? -1 : (a < b ? a : b);
}

lsim_err lsim_claim_audit(const lsim_claim *c, const char *backend,
                          lsim_errbuf *eb) {
  const char *key = c->key ? c->key : "(unnamed)";
  if (!lsim_evidence_name(c->claimed))
    return lsim_fail(eb, LSIM_E_CLAIM_CLASS, "%s: evidence class %d unknown",
                     key, c->claimed);
  int ceil = lsim_claim_ceiling(c, backend);
  if (ceil < 0)
    return lsim_fail(eb, LSIM_E_CLAIM_CLASS, "%s: source %d or operand %d "
                     "unknown", key, c->source, c->operand);
  if (c->claimed > ceil) {
    char ops[64] = "";
    if (c->operand != LSIM_SRC_NONE)
      snprintf(ops, sizeof ops, " against %s", lsim_source_name(c->operand));
    return lsim_fail(eb, LSIM_E_CLAIM_CEILING,
                     "%s: claimed %s, but its source (%s%s%s, backend %s) "
                     "supports at most %s",
                     key, lsim_evidence_name(c->claimed),
                     lsim_source_name(c->source), ops, c->time ? ", a time" : "",
                     backend ? backend : "none", lsim_evidence_name(ceil));
  }
  return 0;
}

/* ---- runs_evidence ------------------------------------------------------------ */

#define LSIM__EVIDENCE_DDL                                                   \
  "CREATE TABLE IF NOT EXISTS runs_evidence("                                \
  " run_id INTEGER NOT NULL, key TEXT NOT NULL, class TEXT NOT NULL,"        \
  " source TEXT NOT NULL, operand TEXT, time INTEGER NOT NULL,"              \
  " PRIMARY KEY(run_id, key))"

lsim_err lsim_claims_store(struct lsim_db *db, const char *backend,
                           const lsim_claim *c, int n, lsim_errbuf *eb) {
  lsim_err rc;
  for (int i = 0; i < n; i++) /* all or nothing: audit every claim first */
    if ((rc = lsim_claim_audit(&c[i], backend, eb)))
      return rc;
  sqlite3 *h = lsim_db_handle(db);
  sqlite3_stmt *st = NULL;
  int autoc = sqlite3_get_autocommit(h);
  if (sqlite3_exec(h, LSIM__EVIDENCE_DDL, NULL, NULL, NULL) != SQLITE_OK ||
      (autoc && sqlite3_exec(h, "BEGIN", NULL, NULL, NULL) != SQLITE_OK) ||
      sqlite3_prepare_v2(h,
                         "INSERT OR REPLACE INTO runs_evidence(run_id,key,"
                         "class,source,operand,time) VALUES(1,?,?,?,?,?)",
                         -1, &st, NULL) != SQLITE_OK)
    goto fail;
  for (int i = 0; i < n; i++) {
    sqlite3_reset(st);
    sqlite3_bind_text(st, 1, c[i].key, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, lsim_evidence_name(c[i].claimed), -1,
                      SQLITE_STATIC);
    sqlite3_bind_text(st, 3, lsim_source_name(c[i].source), -1, SQLITE_STATIC);
    if (c[i].operand == LSIM_SRC_NONE)
      sqlite3_bind_null(st, 4);
    else
      sqlite3_bind_text(st, 4, lsim_source_name(c[i].operand), -1,
                        SQLITE_STATIC);
    sqlite3_bind_int(st, 5, c[i].time);
    if (sqlite3_step(st) != SQLITE_DONE)
      goto fail;
  }
  sqlite3_finalize(st);
  st = NULL;
  if (autoc && sqlite3_exec(h, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
    goto fail;
  return 0;
fail:
  rc = lsim_fail(eb, LSIM_E_DB, "storing evidence: %s", sqlite3_errmsg(h));
  sqlite3_finalize(st);
  if (autoc && !sqlite3_get_autocommit(h))
    sqlite3_exec(h, "ROLLBACK", NULL, NULL, NULL);
  return rc;
}

/*
** What sim/report.c claims for each runs_summary key.  Every replay
** figure comes out of the simulator: counts and ratios of the event log
** are exact facts of the run; anything in simulated time (latencies,
** simulated seconds, rates per simulated second, SLO attainment) is as
** good as the cost model that set the durations, so it is modeled, under
** every backend -- the measured backend time never feeds the clock.
*/
static int lsim__ends(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

lsim_claim lsim_summary_claim(const char *key) {
  lsim_claim c = {key, LSIM_EVID_EXACT, LSIM_SRC_LOG, LSIM_SRC_NONE, 0};
  if (lsim__ends(key, "_ms") || strstr(key, "_seconds") ||
      lsim__ends(key, "_per_s") || strncmp(key, "slo_", 4) == 0 ||
      strstr(key, "_slo_")) {
    c.claimed = LSIM_EVID_MODELED;
    c.source = LSIM_SRC_SIM_TIME;
    c.time = 1;
  } else if (lsim__ends(key, "_bytes") || lsim__ends(key, "_bytes_total")) {
    c.source = LSIM_SRC_BYTES;
  } else if (lsim__ends(key, "jain_normalized")) {
    /* service from the log over each tenant's time in the system: that
    ** time is simulated, so the index is as good as the cost model */
    c.claimed = LSIM_EVID_MODELED;
    c.operand = LSIM_SRC_SIM_TIME;
  }
  return c;
}

lsim_claim lsim_summary_claim_clock(const char *key, int clock) {
  lsim_claim c = lsim_summary_claim(key);
  /* the default starvation threshold is set from the cost model before the
  ** run, whichever clock then drives it */
  if (clock == LSIM_CLAIM_CLOCK_MODEL ||
      strcmp(key, "starvation_threshold_ms") == 0)
    return c;
  int cls = clock == LSIM_CLAIM_CLOCK_MEASURED ? LSIM_EVID_MEASURED
                                               : LSIM_EVID_MODELED;
  if (c.source == LSIM_SRC_SIM_TIME) {
    c.source = LSIM_SRC_MEASURED_CLOCK;
    c.claimed = cls;
  }
  if (c.operand == LSIM_SRC_SIM_TIME) {
    c.operand = LSIM_SRC_MEASURED_CLOCK;
    c.claimed = cls;
  }
  return c;
}

lsim_err lsim_claims_write_csv(const char *path, const char *backend,
                               int clock, const char *const *keys, int n,
                               lsim_errbuf *eb) {
  lsim_err rc;
  for (int i = 0; i < n; i++) {
    lsim_claim c = lsim_summary_claim_clock(keys[i], clock);
    if ((rc = lsim_claim_audit(&c, backend, eb)))
      return rc;
  }
  lsim_outfile of;
  if ((rc = lsim_out_open(&of, path, eb)))
    return rc;
  FILE *f = of.fp;
  fprintf(f, "column,class,source,time\n");
  for (int i = 0; i < n; i++) {
    lsim_claim c = lsim_summary_claim_clock(keys[i], clock);
    const char *cls = lsim_evidence_name(c.claimed),
               *src = lsim_source_name(c.source);
    char field[LSIM_ESC_SIZE(256)]; /* a column name: one RFC 4180 field */
    if (lsim_csv_field(field, sizeof field, keys[i]) < 0) {
      lsim_out_abort(&of);
      return lsim_fail(eb, LSIM_E_IO, "%s: column name too long", path);
    }
    fprintf(f, "%s,%s,%s,%d\n", field, cls ? cls : "?", src ? src : "?",
            c.time);
  }
  return lsim_out_commit(&of, eb);
}

lsim_err lsim_claims_csv_sidecar(const char *csv, const char *out,
                                 const char *backend, int clock,
                                 lsim_errbuf *eb) {
  static const char *const params[] = {"arm",  "scheduler", "evict",
                                       "prefetch", "seed", "tenant",
                                       "name", NULL};
  char line[8192];
  FILE *f = fopen(csv, "r");
  if (!f)
    return lsim_fail(eb, LSIM_E_IO, "%s: cannot read", csv);
  int ok = fgets(line, sizeof line, f) != NULL;
  fclose(f);
  if (!ok)
    return lsim_fail(eb, LSIM_E_IO, "%s: no header", csv);
  /* the header is one RFC 4180 record (escape.h): a quoted column name
  ** may hold a comma */
  enum { NCOL = 256, COLW = 256 };
  char(*cols)[COLW] = malloc(NCOL * sizeof *cols);
  if (!cols)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  const char *keys[NCOL];
  int n = 0, got = 0;
  const char *p = line;
  while (n < NCOL && (got = lsim_csv_next(&p, cols[n], COLW)) == 1) {
    int param = 0;
    for (int i = 0; params[i]; i++)
      param |= strcmp(cols[n], params[i]) == 0;
    if (!param) {
      keys[n] = cols[n];
      n++;
    }
  }
  lsim_err rc = got < 0 ? lsim_fail(eb, LSIM_E_IO, "%s: malformed header", csv)
                        : lsim_claims_write_csv(out, backend, clock, keys, n,
                                                eb);
  free(cols);
  return rc;
}

lsim_err lsim_claims_annotate_prom(const char *path, int clock,
                                   lsim_errbuf *eb) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return lsim_fail(eb, LSIM_E_IO, "%s: cannot read", path);
  char *buf = NULL;
  size_t len = 0, cap = 0, got;
  char chunk[4096];
  while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) {
    if (len + got + 1 > cap) {
      size_t nc = cap ? 2 * cap : 16384;
      while (nc < len + got + 1)
        nc *= 2;
      char *nb = realloc(buf, nc);
      if (!nb) {
        free(buf);
        fclose(f);
        return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
      }
      buf = nb;
      cap = nc;
    }
    memcpy(buf + len, chunk, got);
    len += got;
  }
  fclose(f);
  if (!buf)
    return 0;
  buf[len] = 0;
  /* rewritten whole: a temporary beside path, renamed over it */
  lsim_outfile of;
  lsim_err rc = lsim_out_open(&of, path, eb);
  if (rc) {
    free(buf);
    return rc;
  }
  f = of.fp;
  for (char *line = buf; *line;) {
    char *nl = strchr(line, '\n');
    size_t ll = nl ? (size_t)(nl - line) + 1 : strlen(line);
    if (strncmp(line, "# TYPE ", 7) == 0) {
      char name[256];
      size_t k = 0;
      for (const char *q = line + 7; *q && *q != ' ' && k < sizeof name - 1;)
        name[k++] = *q++;
      name[k] = 0;
      lsim_claim c = lsim_summary_claim_clock(name, clock);
      const char *cls = lsim_evidence_name(c.claimed),
                 *src = lsim_source_name(c.source);
      fprintf(f, "# HELP %s evidence %s (%s)\n", name, cls ? cls : "?",
              src ? src : "?");
    }
    fwrite(line, 1, ll, f);
    line += ll;
  }
  free(buf);
  return lsim_out_commit(&of, eb);
}

/* ---- lorasim audit DB ----------------------------------------------------------- */

static lsim_err lsim__finding(FILE *out, lsim_audit_report *rep,
                              lsim_err *first, lsim_errbuf *first_eb,
                              const lsim_errbuf *e) {
  if (out)
    fprintf(out, "finding: %s: %s\n", lsim_err_name(e->code), e->msg);
  if (!rep->findings++) {
    *first = e->code;
    *first_eb = *e;
  }
  return 0;
}

static lsim_err lsim__audit_claims(sqlite3 *h, const char *backend,
                                   int measured_clock, FILE *out,
                                   lsim_audit_report *rep, lsim_err *first,
                                   lsim_errbuf *feb) {
  sqlite3_stmt *st = NULL;
  int have = 0;
  if (sqlite3_prepare_v2(h,
                         "SELECT count(*) FROM sqlite_master WHERE "
                         "type='table' AND name='runs_evidence'",
                         -1, &st, NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW)
    have = sqlite3_column_int(st, 0);
  sqlite3_finalize(st);
  const char *sql =
      have ? "SELECT s.key, e.class, e.source, e.operand, e.time, "
             "e.key IS NOT NULL FROM runs_summary s LEFT JOIN runs_evidence e "
             "ON e.run_id = s.run_id AND e.key = s.key "
             "UNION ALL SELECT e.key, e.class, e.source, e.operand, e.time, 1 "
             "FROM runs_evidence e WHERE NOT EXISTS (SELECT 1 FROM "
             "runs_summary s WHERE s.key = e.key AND s.run_id = e.run_id) "
             "ORDER BY 1"
           : "SELECT key, NULL, NULL, NULL, 0, 0 FROM runs_summary ORDER BY 1";
  if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) != SQLITE_OK) {
    lsim_errbuf e = LSIM_ERRBUF_INIT;
    lsim_fail(&e, LSIM_E_DB, "reading claims: %s", sqlite3_errmsg(h));
    return lsim__finding(out, rep, first, feb, &e);
  }
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    lsim_errbuf e = LSIM_ERRBUF_INIT;
    const char *key = (const char *)sqlite3_column_text(st, 0);
    rep->claims++;
    if (!sqlite3_column_int(st, 5)) {
      lsim_fail(&e, LSIM_E_CLAIM_MISSING,
                "runs_summary %s: no evidence class in runs_evidence", key);
      lsim__finding(out, rep, first, feb, &e);
      continue;
    }
    const char *cls = (const char *)sqlite3_column_text(st, 1),
               *src = (const char *)sqlite3_column_text(st, 2),
               *opd = (const char *)sqlite3_column_text(st, 3);
    lsim_claim c = {key, lsim_evidence_find(cls), lsim_source_find(src),
                    opd ? lsim_source_find(opd) : LSIM_SRC_NONE,
                    sqlite3_column_int(st, 4) != 0};
    if (c.claimed < 0 || c.source < 0 || (opd && c.operand < 0)) {
      lsim_fail(&e, LSIM_E_CLAIM_CLASS,
                "runs_evidence %s: class '%s', source '%s', operand '%s'", key,
                cls ? cls : "", src ? src : "", opd ? opd : "");
      lsim__finding(out, rep, first, feb, &e);
      continue;
    }
    if (!measured_clock && (c.source == LSIM_SRC_MEASURED_CLOCK ||
                            c.operand == LSIM_SRC_MEASURED_CLOCK)) {
      /* measured_clock is only what a run under --clock measured has */
      lsim_fail(&e, LSIM_E_CLAIM_CEILING,
                "%s: claimed %s from source measured_clock, but the run's "
                "clock is the model's (runs.clock): its times are modeled",
                key, cls);
      lsim__finding(out, rep, first, feb, &e);
    } else if (lsim_claim_audit(&c, backend, &e)) {
      lsim__finding(out, rep, first, feb, &e);
    }
  }
  sqlite3_finalize(st);
  return 0;
}

static int64_t lsim__opt(sqlite3_stmt *st, int i) {
  return sqlite3_column_type(st, i) == SQLITE_NULL ? LSIM_NONE
                                                   : sqlite3_column_int64(st, i);
}

/* complete: 0 for a run that never ended 'ok' (killed, interrupted,
** failed): its log is a prefix, so the end-of-log checks (every request
** has its record) do not apply. */
static lsim_err lsim__audit_log(sqlite3 *h, const char *scenario_path,
                                int workers, int complete, FILE *out,
                                lsim_audit_report *rep, lsim_err *first,
                                lsim_errbuf *feb) {
  lsim_errbuf e = LSIM_ERRBUF_INIT;
  sqlite3_stmt *st = NULL;
  int nadapters = 0, have = 0;
  /* a run written without its event log (lorasim compare without
  ** --full-log) has nothing to replay */
  if (sqlite3_prepare_v2(h, "SELECT EXISTS (SELECT 1 FROM events)", -1, &st,
                         NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW)
    have = sqlite3_column_int(st, 0);
  sqlite3_finalize(st);
  st = NULL;
  if (!have)
    return 0;
  if (sqlite3_prepare_v2(h,
                         "SELECT max(coalesce((SELECT max(adapter) FROM "
                         "events), -1), coalesce((SELECT max(adapter) FROM "
                         "requests), -1))",
                         -1, &st, NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW)
    nadapters = sqlite3_column_int(st, 0) + 1;
  sqlite3_finalize(st);
  lsim_ledger_cfg cfg = {workers > 0 ? workers : 1, nadapters, 0};
  if (scenario_path && *scenario_path) {
    lsim_scenario *sc = calloc(1, sizeof *sc);
    lsim_errbuf ignore = LSIM_ERRBUF_INIT;
    if (sc && lsim_scenario_load(sc, scenario_path, &ignore) == 0 &&
        sc->workers == workers)
      cfg.max_load_attempts = sc->max_load_attempts;
    free(sc);
  }
  lsim_ledger *L = NULL;
  if (lsim_ledger_new(&L, &cfg, &e))
    return lsim__finding(out, rep, first, feb, &e);
  lsim_err rc = 0;
  if (sqlite3_prepare_v2(h,
                         "SELECT seq,tick,kind,worker,request,tenant,adapter,"
                         "generation,attempt,pages,bytes,value,detail FROM "
                         "events WHERE run_id=1 ORDER BY seq",
                         -1, &st, NULL) != SQLITE_OK) {
    lsim_fail(&e, LSIM_E_DB, "reading events: %s", sqlite3_errmsg(h));
    rc = LSIM_E_DB;
  }
  while (!rc && sqlite3_step(st) == SQLITE_ROW) {
    lsim_event ev = {sqlite3_column_int64(st, 0),
                     sqlite3_column_int64(st, 1),
                     sqlite3_column_int(st, 2),
                     (int)lsim__opt(st, 3),
                     lsim__opt(st, 4),
                     (int)lsim__opt(st, 5),
                     (int)lsim__opt(st, 6),
                     lsim__opt(st, 7),
                     sqlite3_column_int(st, 8),
                     sqlite3_column_int64(st, 9),
                     sqlite3_column_int64(st, 10),
                     sqlite3_column_int64(st, 11),
                     (const char *)sqlite3_column_text(st, 12)};
    rep->events++;
    rc = lsim_ledger_event(L, &ev, &e);
  }
  sqlite3_finalize(st);
  st = NULL;
  if (!rc && sqlite3_prepare_v2(h,
                                "SELECT request,tenant,adapter,worker,"
                                "arrival_tick,first_token_tick,finish_tick,"
                                "prompt_tokens,output_tokens,loads_waited,"
                                "outcome FROM requests WHERE run_id=1 ORDER "
                                "BY request",
                                -1, &st, NULL) != SQLITE_OK) {
    lsim_fail(&e, LSIM_E_DB, "reading requests: %s", sqlite3_errmsg(h));
    rc = LSIM_E_DB;
  }
  while (!rc && sqlite3_step(st) == SQLITE_ROW) {
    lsim_request_record r = {sqlite3_column_int64(st, 0),
                             (int)lsim__opt(st, 1),
                             (int)lsim__opt(st, 2),
                             (int)lsim__opt(st, 3),
                             sqlite3_column_int64(st, 4),
                             lsim__opt(st, 5),
                             sqlite3_column_int64(st, 6),
                             sqlite3_column_int(st, 7),
                             sqlite3_column_int(st, 8),
                             sqlite3_column_int(st, 9),
                             (const char *)sqlite3_column_text(st, 10),
                             /* the time breakdown: not audited */
                             0, 0, 0, 0, 0, 0, 0};
    rep->records++;
    rc = lsim_ledger_record(L, &r, &e);
  }
  sqlite3_finalize(st);
  if (!rc && complete)
    rc = lsim_ledger_end(L, &e);
  lsim_ledger_stats ls;
  lsim_ledger_stats_get(L, &ls);
  rep->requests = ls.requests;
  lsim_ledger_release(L);
  if (rc)
    lsim__finding(out, rep, first, feb, &e);
  return 0;
}

lsim_err lsim_audit_db(const char *path, FILE *out, lsim_audit_report *rep,
                       lsim_errbuf *eb) {
  memset(rep, 0, sizeof *rep);
  sqlite3 *h = NULL;
  struct stat fst;
  if (stat(path, &fst) != 0 && (errno == ENOENT || errno == ENOTDIR))
    return lsim_fail(eb, LSIM_E_FILE_MISSING, "%s: no such file or directory",
                     path);
  if (sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
    lsim_err rc = lsim_fail(eb, LSIM_E_IO, "%s: cannot open: %s", path,
                            h ? sqlite3_errmsg(h) : "out of memory");
    sqlite3_close(h);
    return rc;
  }
  sqlite3_stmt *st = NULL;
  char backend[64] = "", scn[1024] = "", status[32] = "", clock[32] = "";
  int workers = 0;
  /* runs.clock since schema 6; an older run's clock was the model's */
  int have_clock = 0;
  if (sqlite3_prepare_v2(h,
                         "SELECT count(*) FROM pragma_table_info('runs') "
                         "WHERE name = 'clock'",
                         -1, &st, NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW)
    have_clock = sqlite3_column_int(st, 0);
  sqlite3_finalize(st);
  st = NULL;
  if (sqlite3_prepare_v2(h,
                         have_clock
                             ? "SELECT backend, workers, scenario_path, "
                               "status, clock FROM runs WHERE run_id=1"
                             : "SELECT backend, workers, scenario_path, "
                               "status, 'model' FROM runs WHERE run_id=1",
                         -1, &st, NULL) != SQLITE_OK ||
      sqlite3_step(st) != SQLITE_ROW) {
    lsim_err rc = lsim_fail(eb, LSIM_E_IO, "%s: not a lorasim run database "
                            "(no runs row): %s", path, sqlite3_errmsg(h));
    sqlite3_finalize(st);
    sqlite3_close(h);
    return rc;
  }
  const unsigned char *t;
  if ((t = sqlite3_column_text(st, 0)))
    snprintf(backend, sizeof backend, "%s", (const char *)t);
  workers = sqlite3_column_int(st, 1);
  if ((t = sqlite3_column_text(st, 2)))
    snprintf(scn, sizeof scn, "%s", (const char *)t);
  if ((t = sqlite3_column_text(st, 3)))
    snprintf(status, sizeof status, "%s", (const char *)t);
  if ((t = sqlite3_column_text(st, 4)))
    snprintf(clock, sizeof clock, "%s", (const char *)t);
  sqlite3_finalize(st);
  lsim_err first = 0;
  lsim_errbuf feb = LSIM_ERRBUF_INIT;
  /* a run that did not end 'ok' is a finding of its own, first: its
  ** figures and records are missing because it stopped, not because a
  ** contract broke (the rows it has are still audited) */
  int complete = strcmp(status, "ok") == 0;
  if (!complete) {
    lsim_errbuf e = LSIM_ERRBUF_INIT;
    lsim_fail(&e, LSIM_E_RUN_INCOMPLETE,
              "%s: run incomplete: its status is '%s', not 'ok' (%s); the "
              "rows it holds are a prefix of the run%s",
              path, status[0] ? status : "(none)",
              strcmp(status, "running") == 0
                  ? "killed, or still in progress"
                  : strcmp(status, "interrupted") == 0 ? "stopped by a signal"
                                                        : "it stopped on an error",
              strcmp(status, "failed") == 0
                  ? ""
                  : "; lorasim replay --resume DB finishes it");
    lsim__finding(out, rep, &first, &feb, &e);
  }
  lsim__audit_claims(h, backend, strcmp(clock, "measured") == 0, out, rep,
                     &first, &feb);
  lsim__audit_log(h, scn, workers, complete, out, rep, &first, &feb);
  sqlite3_close(h);
  if (rep->findings) {
    if (eb)
      *eb = feb;
    return first;
  }
  return 0;
}

/* ---- the command ------------------------------------------------------------------ */

int lsim_cmd_audit(int argc, char **argv) {
  if (argc != 2 || strcmp(argv[1], "--help") == 0 ||
      strcmp(argv[1], "-h") == 0) {
    FILE *f = argc == 2 ? stdout : stderr;
    fputs("usage: lorasim audit DB\n"
          "\n"
          "Audit a run database: every runs_summary figure carries an\n"
          "evidence class (exact, measured, modeled, cited) within what its\n"
          "source supports (E_CLAIM_CEILING, E_CLAIM_CLASS, E_CLAIM_MISSING),\n"
          "and the event log and request rows keep the scheduler, recovery\n"
          "and lifecycle contracts of docs/SCHEMA.md (E_LOG_*).  A run that\n"
          "did not end 'ok' (killed, interrupted, failed) is the finding\n"
          "E_RUN_INCOMPLETE; the rows it holds are audited as a prefix.\n"
          "Exit 0: clean; 1: findings (one line each); 2: not a run database.\n",
          f);
    return argc == 2 ? 0 : 2;
  }
  lsim_audit_report rep;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_err rc = lsim_audit_db(argv[1], stdout, &rep, &eb);
  if (rc && !rep.findings) {
    fprintf(stderr, "lorasim audit: error: %s: %s\n", lsim_err_name(rc),
            eb.msg);
    return 2;
  }
  printf("audit %s: %lld claims, %lld events, %lld request records; "
         "%d finding%s\n",
         argv[1], (long long)rep.claims, (long long)rep.events,
         (long long)rep.records, rep.findings, rep.findings == 1 ? "" : "s");
  return rc ? 1 : 0;
}
