/*
** sumjson.c: the run's summary as JSON (sumjson.h), built with cJSON.
*/
#include "sumjson.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outfile.h"

/* A figure: null for "no value" (NAN, or -1 in runs_summary's convention,
** passed here as NAN by the caller).  Its text is ours (lsim_tenants_num:
** it reads back as the same double; cJSON's own printing may drop the
** last bit), so the JSON, the CSV and the database agree exactly. */
static cJSON *lsim__num(double v) {
  char text[64];
  if (isnan(v) || isinf(v))
    return cJSON_CreateNull();
  return cJSON_CreateRaw(lsim_tenants_num(text, sizeof text, v));
}

/* cJSON_Add* return NULL on failure; one flag collects them all. */
static void lsim__add(cJSON *obj, const char *key, cJSON *item, int *bad) {
  if (!item || !cJSON_AddItemToObject(obj, key, item)) {
    cJSON_Delete(item);
    *bad = 1;
  }
}

static void lsim__str(cJSON *obj, const char *key, const char *v, int *bad) {
  lsim__add(obj, key, v ? cJSON_CreateString(v) : cJSON_CreateNull(), bad);
}

lsim_err lsim_sumjson_write(const char *path, const lsim_scenario *sc,
                            const lsim_summary *s, lsim_errbuf *eb) {
  int bad = 0;
  cJSON *root = cJSON_CreateObject();
  if (!root)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory for the JSON summary");
  char seed[32];
  snprintf(seed, sizeof seed, "%llu", (unsigned long long)sc->seed);
  lsim__str(root, "lorasim", LSIM_VERSION, &bad);
  lsim__str(root, "scenario", sc->name, &bad);
  /* the seed is a uint64: its digits, exactly (a double would round) */
  lsim__add(root, "seed", cJSON_CreateRaw(seed), &bad);
  lsim__str(root, "backend", sc->backend, &bad);
  lsim__str(root, "scheduler", sc->scheduler, &bad);
  lsim__str(root, "evict", sc->evict, &bad);
  lsim__str(root, "prefetch", sc->prefetch, &bad);
  lsim__add(root, "workers", lsim__num(sc->workers), &bad);
  lsim__add(root, "ns_per_tick", lsim__num((double)sc->ns_per_tick),
            &bad);
  lsim__add(root, "events", lsim__num((double)s->events), &bad);
  lsim__add(root, "end_tick", lsim__num((double)s->end_tick), &bad);
  /* runs_summary, in its order; -1 is its "no value" */
  cJSON *sum = cJSON_CreateObject();
  lsim__add(root, "summary", sum, &bad);
  lsim_figure kv[LSIM_REPORT_FIGURES_MAX];
  int n = lsim_report_figures(s, kv, LSIM_REPORT_FIGURES_MAX);
  for (int i = 0; sum && i < n; i++)
    lsim__add(sum, kv[i].k, lsim__num(kv[i].v < 0 ? NAN : kv[i].v), &bad);
  if (s->trace_rows_skipped > 0)
    lsim__str(root, "trace_first_skipped", s->trace_first_skipped, &bad);
  /* tenant_summary: the tenants, then all */
  cJSON *ten = cJSON_CreateArray();
  lsim__add(root, "tenants", ten, &bad);
  for (int r = 0; ten && s->tenants && r <= sc->ntenants; r++) {
    const lsim_tenant_fig *t = &s->tenants[r];
    cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddItemToArray(ten, o)) {
      cJSON_Delete(o);
      bad = 1;
      break;
    }
    lsim__add(o, "tenant",
              t->tenant >= 0 ? lsim__num(t->tenant)
                             : cJSON_CreateNull(),
              &bad);
    lsim__str(o, "name", lsim_tenants_name(sc, t), &bad);
    for (int k = 0; k < LSIM_TF_N; k++)
      lsim__add(o, lsim_tenants_key(k), lsim__num(t->v[k]), &bad);
  }
  /* the files, as the console lists them */
  cJSON *files = cJSON_CreateObject();
  lsim__add(root, "files", files, &bad);
  if (files) {
    lsim__str(files, "database", s->db_path, &bad);
    lsim__str(files, "metrics", s->metrics_path[0] ? s->metrics_path : NULL,
              &bad);
    cJSON *pl = cJSON_CreateArray();
    lsim__add(files, "plots", pl, &bad);
    for (int i = 0; pl && i < LSIM_REPORT_PLOTS; i++)
      if (s->plots[i][0]) {
        cJSON *p = cJSON_CreateString(s->plots[i]);
        if (!p || !cJSON_AddItemToArray(pl, p)) {
          cJSON_Delete(p);
          bad = 1;
        }
      }
    lsim__str(files, "plot_note", s->plot_note[0] ? s->plot_note : NULL,
              &bad);
  }
  char *text = bad ? NULL : cJSON_Print(root);
  cJSON_Delete(root);
  if (!text)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory for the JSON summary");
  lsim_outfile of;
  lsim_err rc = lsim_out_open(&of, path, eb);
  if (!rc) {
    fputs(text, of.fp);
    fputc('\n', of.fp);
    rc = lsim_out_commit(&of, eb);
  }
  cJSON_free(text);
  return rc;
}
