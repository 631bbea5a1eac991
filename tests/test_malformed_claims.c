/* One-field mutations of valid evidence claims, each refused by the claim
** audit (sim/audit.c) with its stable code: the loop-10 claim-ceiling
** fixtures of the malformed corpus (docs/RELIABILITY.md).  The valid
** fixture is what the summary writer claims for every runs_summary key of
** a real run, which passes under each backend; each case changes one field
** of one claim (its class, source, operand, time flag) or the backend it
** is judged under. */
#include <criterion/criterion.h>
#define LSIM_TMP_PREFIX "/tmp/lsim-mclaims-"
#include "cli_harness.h"

#include <sqlite3.h>
#include <string.h>

#include "sim/audit.h"

static const char *const backends[] = {"model", "cpu_ref", "cuda"};

Test(malformed_claims, writer_claims_pass, .init = mk_tmp, .fini = rm_tmp) {
  char args[512], path[512];
  snprintf(args, sizeof args,
           "replay '%s/fixtures/replay/withdraw.json' --quiet --no-plots "
           "--db r.db", LSIM_TEST_DIR);
  cr_assert_eq(lorasim(args), 0, "%s", out);
  snprintf(path, sizeof path, "%s/r.db", tmpdir);
  sqlite3 *h;
  sqlite3_stmt *st;
  cr_assert_eq(sqlite3_open(path, &h), SQLITE_OK);
  cr_assert_eq(sqlite3_prepare_v2(h, "SELECT key FROM runs_summary", -1, &st,
                                  NULL), SQLITE_OK);
  int n = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    lsim_claim c =
        lsim_summary_claim((const char *)sqlite3_column_text(st, 0));
    for (int b = 0; b < 3; b++) {
      lsim_errbuf eb = LSIM_ERRBUF_INIT;
      cr_assert_eq(lsim_claim_audit(&c, backends[b], &eb), 0, "%s", eb.msg);
    }
    n++;
  }
  sqlite3_finalize(st);
  sqlite3_close(h);
  cr_assert_gt(n, 40);
}

enum { M_CLASS, M_SOURCE, M_OPERAND, M_TIME, M_BACKEND };

typedef struct ccase {
  const char *name;
  lsim_claim valid;
  const char *backend;
  int field;
  int value;
  const char *sbackend; /* M_BACKEND */
  lsim_err code;
} ccase;

#define C(k, cls, src, opd, t) {k, LSIM_EVID_##cls, LSIM_SRC_##src, LSIM_SRC_##opd, t}

static const ccase cases[] = {
  {"simulated TTFT called measured", C("ttft_p50_ms", MODELED, SIM_TIME, NONE, 1), "model", M_CLASS, LSIM_EVID_MEASURED, NULL, LSIM_E_CLAIM_CEILING},
  {"simulated TTFT called exact", C("ttft_p99_ms", MODELED, SIM_TIME, NONE, 1), "cpu_ref", M_CLASS, LSIM_EVID_EXACT, NULL, LSIM_E_CLAIM_CEILING},
  {"simulated seconds called measured on the GPU", C("sim_seconds", MODELED, SIM_TIME, NONE, 1), "cuda", M_CLASS, LSIM_EVID_MEASURED, NULL, LSIM_E_CLAIM_CEILING},
  {"simulated throughput called measured", C("throughput_output_tokens_per_s", MODELED, SIM_TIME, NONE, 1), "cuda", M_CLASS, LSIM_EVID_MEASURED, NULL, LSIM_E_CLAIM_CEILING},
  {"a count relabelled a time", C("requests_completed", EXACT, LOG, NONE, 0), "model", M_TIME, 1, NULL, LSIM_E_CLAIM_CEILING},
  {"wasted bytes relabelled a latency", C("adapter_prefetch_wasted_bytes", EXACT, BYTES, NONE, 0), "cuda", M_TIME, 1, NULL, LSIM_E_CLAIM_CEILING},
  {"device time judged under the model backend", C("iteration_backend_ms", MEASURED, BACKEND_TIME, NONE, 1), "cuda", M_BACKEND, 0, "model", LSIM_E_CLAIM_CEILING},
  {"exact comparison judged under the model backend", C("validations_exact", EXACT, EXACT_REF, NONE, 0), "cpu_ref", M_BACKEND, 0, "model", LSIM_E_CLAIM_CEILING},
  {"measured time with nothing executed", C("iteration_backend_ms", MEASURED, BACKEND_TIME, NONE, 1), "cpu_ref", M_BACKEND, 0, NULL, LSIM_E_CLAIM_CEILING},
  {"a measured time called exact", C("iteration_backend_ms", MEASURED, BACKEND_TIME, NONE, 1), "cuda", M_CLASS, LSIM_EVID_EXACT, NULL, LSIM_E_CLAIM_CEILING},
  {"a ratio to a cited baseline kept as measured", C("x_best", MEASURED, BACKEND_TIME, NONE, 1), "cuda", M_OPERAND, LSIM_SRC_BASELINE, NULL, LSIM_E_CLAIM_CEILING},
  {"a count compared with the cost model kept exact", C("adapter_loads", EXACT, LOG, NONE, 0), "model", M_OPERAND, LSIM_SRC_COST_MODEL, NULL, LSIM_E_CLAIM_CEILING},
  {"a cited baseline called modeled", C("best_us", CITED, BASELINE, NONE, 1), "cuda", M_CLASS, LSIM_EVID_MODELED, NULL, LSIM_E_CLAIM_CEILING},
  {"a modeled time whose source became a citation", C("ttft_p50_ms", MODELED, SIM_TIME, NONE, 1), "model", M_SOURCE, LSIM_SRC_BASELINE, NULL, LSIM_E_CLAIM_CEILING},
  {"the cost model's figure called measured", C("iter_fixed_ns", MODELED, COST_MODEL, NONE, 1), "cuda", M_CLASS, LSIM_EVID_MEASURED, NULL, LSIM_E_CLAIM_CEILING},
  {"evidence class 7", C("iterations", EXACT, LOG, NONE, 0), "model", M_CLASS, 7, NULL, LSIM_E_CLAIM_CLASS},
  {"evidence class -1", C("iterations", EXACT, LOG, NONE, 0), "model", M_CLASS, -1, NULL, LSIM_E_CLAIM_CLASS},
  {"source 99", C("adapter_evictions", EXACT, LOG, NONE, 0), "model", M_SOURCE, 99, NULL, LSIM_E_CLAIM_CLASS},
  {"operand 42", C("adapter_evictions", EXACT, LOG, NONE, 0), "model", M_OPERAND, 42, NULL, LSIM_E_CLAIM_CLASS},
};

Test(malformed_claims, one_field_overclaims) {
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const ccase *k = &cases[i];
    lsim_errbuf eb = LSIM_ERRBUF_INIT;
    cr_assert_eq(lsim_claim_audit(&k->valid, k->backend, &eb), 0,
                 "%s: the valid claim fails: %s", k->name, eb.msg);
    lsim_claim c = k->valid;
    const char *b = k->backend;
    switch (k->field) {
    case M_CLASS: c.claimed = k->value; break;
    case M_SOURCE: c.source = k->value; break;
    case M_OPERAND: c.operand = k->value; break;
    case M_TIME: c.time = k->value; break;
    case M_BACKEND: b = k->sbackend; break;
    }
    cr_expect_eq(lsim_claim_audit(&c, b, &eb), k->code,
                 "%s: expected %s (%s)", k->name, lsim_err_name(k->code),
                 eb.msg);
  }
}

/* The same in a stored run: one column of one runs_evidence row. */
Test(malformed_claims, stored_rows, .init = mk_tmp, .fini = rm_tmp) {
  static const struct {
    const char *name, *sql, *code;
  } rows[] = {
      {"class 'proven'", "UPDATE runs_evidence SET class='proven' WHERE key='iterations'", "E_CLAIM_CLASS"},
      {"source 'folklore'", "UPDATE runs_evidence SET source='folklore' WHERE key='iterations'", "E_CLAIM_CLASS"},
      {"operand 'hearsay'", "UPDATE runs_evidence SET operand='hearsay' WHERE key='iterations'", "E_CLAIM_CLASS"},
      {"row of another key", "UPDATE runs_evidence SET key='iterations_x' WHERE key='iterations'", "E_CLAIM_MISSING"},
      {"TTFT measured", "UPDATE runs_evidence SET class='measured' WHERE key='ttft_p50_ms'", "E_CLAIM_CEILING"},
      {"count turned into a time", "UPDATE runs_evidence SET time=1 WHERE key='requests_completed'", "E_CLAIM_CEILING"},
      {"run moved to the model backend", "UPDATE runs SET backend='model'", NULL},
  };
  char args[512], path[512];
  snprintf(args, sizeof args,
           "replay '%s/fixtures/replay/withdraw.json' --backend cpu_ref "
           "--quiet --no-plots --db r.db", LSIM_TEST_DIR);
  cr_assert_eq(lorasim(args), 0, "%s", out);
  cr_assert_eq(lorasim("audit r.db"), 0, "%s", out);
  snprintf(path, sizeof path, "%s/r.db", tmpdir);
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    char cp[1200];
    snprintf(cp, sizeof cp, "cp '%s' '%s/m.db'", path, tmpdir);
    cr_assert_eq(system(cp), 0);
    char mp[600];
    snprintf(mp, sizeof mp, "%s/m.db", tmpdir);
    sqlite3 *h;
    cr_assert_eq(sqlite3_open(mp, &h), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(h, rows[i].sql, NULL, NULL, NULL), SQLITE_OK,
                 "%s", rows[i].name);
    cr_assert_eq(sqlite3_changes(h), 1, "%s", rows[i].name);
    sqlite3_close(h);
    int rc = lorasim("audit m.db");
    if (rows[i].code) {
      cr_expect_eq(rc, 1, "%s: %s", rows[i].name, out);
      cr_expect(strstr(out, rows[i].code), "%s: %s", rows[i].name, out);
    } else {
      /* every replay claim holds whatever the backend */
      cr_expect_eq(rc, 0, "%s: %s", rows[i].name, out);
    }
  }
}

/* Every output carries its classes: the printed report, the .prom HELP
** lines and compare's compare-evidence.csv; none says measured or exact
** about simulated time. */
Test(malformed_claims, outputs_carry_classes, .init = mk_tmp, .fini = rm_tmp) {
  char args[512];
  snprintf(args, sizeof args,
           "replay '%s/fixtures/replay/withdraw.json' --no-plots --db r.db",
           LSIM_TEST_DIR);
  cr_assert_eq(lorasim(args), 0, "%s", out);
  cr_assert(strstr(out, "evidence    counts exact"), "%s", out);
  char path[512], line[512];
  snprintf(path, sizeof path, "%s/r.prom", tmpdir);
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f);
  int help = 0, type = 0, ttft = 0;
  while (fgets(line, sizeof line, f)) {
    help += strncmp(line, "# HELP ", 7) == 0;
    type += strncmp(line, "# TYPE ", 7) == 0;
    if (strncmp(line, "# HELP lorasim_ttft_seconds ", 28) == 0) {
      ttft = 1;
      cr_assert(strstr(line, "evidence modeled (sim_time)"), "%s", line);
    }
  }
  fclose(f);
  cr_assert_gt(type, 10);
  cr_assert_eq(help, type, "a HELP line with the class before every TYPE");
  cr_assert(ttft);
  snprintf(args, sizeof args,
           "compare '%s/fixtures/replay/withdraw.json' --schedulers fcfs,vtc "
           "--out cmp --no-plots", LSIM_TEST_DIR);
  cr_assert_eq(lorasim(args), 0, "%s", out);
  snprintf(path, sizeof path, "%s/cmp/compare-evidence.csv", tmpdir);
  cr_assert_not_null(f = fopen(path, "r"));
  int rows = 0, timed = 0;
  while (fgets(line, sizeof line, f)) {
    rows++;
    if (strstr(line, "_ms,") || strstr(line, "_per_s,")) {
      timed++;
      cr_assert(strstr(line, ",modeled,sim_time,1"), "%s", line);
    }
  }
  fclose(f);
  cr_assert_gt(rows, 40);
  cr_assert_geq(timed, 8);
  cr_assert_eq(lorasim("audit cmp/vtc.db"), 0, "%s", out);
}
