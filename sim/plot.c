/* plot.c: gnuplot scripts drawn as PNG and SVG in the results folder
** (plot.h). */
#include "plot.h"

#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "escape.h"
#include "plot_run.h"

const char *const lsim_plot_ext[LSIM_PLOT_TERMS] = {"png", "svg"};

/* The terminals: the same size and font, so the PNG on screen and the SVG
** in a paper show the same figure. */
static const char *const lsim__term[LSIM_PLOT_TERMS] = {
    "pngcairo size %d,%d noenhanced font 'Sans,10'",
    "svg size %d,%d noenhanced font 'Sans,10' background '#ffffff'"};

lsim_err lsim_plot_begin(lsim_plotset **out, const char *dir,
                         const char *script, lsim_errbuf *eb) {
  *out = NULL;
  lsim_plotset *ps = calloc(1, sizeof *ps);
  if (!ps)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory for a plot script");
  char path[2 * LSIM_OUT_PATH_MAX + 2];
  if (snprintf(ps->dir, sizeof ps->dir, "%s", dir[0] ? dir : ".") >=
          (int)sizeof ps->dir ||
      snprintf(ps->script, sizeof ps->script, "%s", script) >=
          (int)sizeof ps->script) {
    free(ps);
    return lsim_fail(eb, LSIM_E_IO, "%s: path too long", script);
  }
  snprintf(path, sizeof path, "%s/%s", ps->dir, script);
  lsim_err rc = lsim_out_open(&ps->gp, path, eb);
  if (rc) {
    free(ps);
    return rc;
  }
  ps->f = ps->gp.fp;
  char shown[LSIM_ESC_SIZE(LSIM_OUT_PATH_MAX)];
  fprintf(ps->f,
          "# %s: written by lorasim.  Run it in this folder to draw the\n"
          "# figures again from the .dat files beside it:\n"
          "#   gnuplot %s\n"
          "# Each figure is drawn as NAME.png and NAME.svg; lorasim sets\n"
          "# the out_* variables to temporaries it renames into place.\n",
          lsim_console_str(shown, sizeof shown, script),
          lsim_console_str(shown, sizeof shown, script));
  *out = ps;
  return 0;
}

int lsim_plot_figure(lsim_plotset *ps, const char *name, const char *key,
                     lsim_errbuf *eb) {
  if (ps->n == LSIM_PLOT_FIGS) {
    LSIM_BUG(eb, "too many figures in one plot script");
    return -1;
  }
  int k = ps->n;
  snprintf(ps->fig[k].key, sizeof ps->fig[k].key, "%s", key);
  for (int t = 0; t < LSIM_PLOT_TERMS; t++) {
    char path[2 * LSIM_OUT_PATH_MAX + 16], file[LSIM_OUT_PATH_MAX + 8];
    char q[LSIM_ESC_SIZE(LSIM_OUT_PATH_MAX + 8)];
    snprintf(file, sizeof file, "%s.%s", name, lsim_plot_ext[t]);
    snprintf(path, sizeof path, "%s/%s", ps->dir, file);
    if (lsim_gp_path(q, sizeof q, file) < 0) {
      for (int u = 0; u < t; u++)
        lsim_out_abort(&ps->fig[k].of[u]);
      lsim_fail(eb, LSIM_E_IO, "%s: not a gnuplot file name", file);
      return -1;
    }
    if (lsim_out_reserve(&ps->fig[k].of[t], path, eb)) {
      for (int u = 0; u < t; u++)
        lsim_out_abort(&ps->fig[k].of[u]);
      return -1;
    }
    fprintf(ps->f, "if (!exists(\"out_%s_%s\")) out_%s_%s = %s\n", key,
            lsim_plot_ext[t], key, lsim_plot_ext[t], q);
  }
  ps->n++;
  return k;
}

void lsim_plot_term(lsim_plotset *ps, int fig, int t, int w, int h) {
  fprintf(ps->f, "\n# ---- %s.%s\nreset\nset terminal ", ps->fig[fig].key,
          lsim_plot_ext[t]);
  fprintf(ps->f, lsim__term[t], w, h);
  fprintf(ps->f, "\nset output out_%s_%s\n", ps->fig[fig].key,
          lsim_plot_ext[t]);
}

static void lsim__abort_figs(lsim_plotset *ps) {
  for (int k = 0; k < ps->n; k++)
    for (int t = 0; t < LSIM_PLOT_TERMS; t++)
      lsim_out_abort(&ps->fig[k].of[t]);
}

void lsim_plot_abort(lsim_plotset *ps) {
  if (!ps)
    return;
  lsim_out_abort(&ps->gp);
  lsim__abort_figs(ps);
  free(ps);
}

/* The temporary's name without its folder (it is beside the target). */
static const char *lsim__base(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

lsim_err lsim_plot_finish(lsim_plotset *ps, int *drawn, char *note,
                          size_t note_n, lsim_errbuf *eb) {
  *drawn = 0;
  fputs("\nunset output\n", ps->f);
  lsim_err rc = lsim_out_commit(&ps->gp, eb);
  if (rc) {
    lsim__abort_figs(ps);
    free(ps);
    return rc;
  }
  /* out_KEY_EXT = './TMP'; ... (the temporaries' names, quoted) */
  size_t cap = 64, used = 0;
  for (int k = 0; k < ps->n; k++)
    for (int t = 0; t < LSIM_PLOT_TERMS; t++)
      cap += 48 + LSIM_ESC_SIZE(strlen(lsim__base(ps->fig[k].of[t].tmp)));
  char *pre = malloc(cap);
  if (!pre) {
    lsim__abort_figs(ps);
    free(ps);
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory for a plot script");
  }
  pre[0] = 0;
  for (int k = 0; k < ps->n; k++)
    for (int t = 0; t < LSIM_PLOT_TERMS; t++) {
      char q[LSIM_ESC_SIZE(LSIM_OUT_PATH_MAX)];
      if (lsim_gp_path(q, sizeof q, lsim__base(ps->fig[k].of[t].tmp)) < 0) {
        rc = lsim_fail(eb, LSIM_E_IO, "%s: unquotable temporary",
                       ps->fig[k].of[t].tmp);
        free(pre);
        lsim__abort_figs(ps);
        free(ps);
        return rc;
      }
      used += (size_t)snprintf(pre + used, cap - used, "out_%s_%s = %s; ",
                               ps->fig[k].key, lsim_plot_ext[t], q);
    }
  lsim_errbuf geb = LSIM_ERRBUF_INIT;
  char shown[LSIM_ESC_SIZE(LSIM_OUT_PATH_MAX)];
  if (lsim_gnuplot_run_in(ps->dir, ps->script, pre, &geb)) {
    free(pre);
    lsim__abort_figs(ps);
    snprintf(note, note_n, "gnuplot failed on %s/%s (%s; data kept)",
             lsim_console_str(shown, sizeof shown, ps->dir), ps->script,
             geb.msg);
    free(ps);
    return 0;
  }
  free(pre);
  for (int k = 0; k < ps->n; k++)
    for (int t = 0; t < LSIM_PLOT_TERMS; t++)
      if (!rc)
        rc = lsim_out_commit(&ps->fig[k].of[t], eb);
      else
        lsim_out_abort(&ps->fig[k].of[t]);
  free(ps);
  *drawn = !rc;
  return rc;
}

const char *lsim_plot_str(char *out, size_t size, const char *s) {
  lsim_gp_string(out, size, s, LSIM_GP_REPLACE);
  return out;
}

const char *lsim_plot_title(char *out, size_t size, const char *what,
                            const lsim_scenario *sc, const char *extra) {
  char line2[3 * LSIM_PATH_MAX];
  const char *tr = sc->trace_file[0] ? lsim__base(sc->trace_file)
                                     : "generator";
  snprintf(line2, sizeof line2, "scenario %s, trace %s%s%s", sc->name, tr,
           extra ? ", " : "", extra ? extra : "");
  char q1[LSIM_ESC_SIZE(256)], q2[LSIM_ESC_SIZE(sizeof line2)];
  lsim_gp_string(q1, sizeof q1, what, LSIM_GP_REPLACE);
  lsim_gp_string(q2, sizeof q2, line2, LSIM_GP_REPLACE);
  /* a string expression: gnuplot puts the double-quoted \n between */
  snprintf(out, size, "%s.\"\\n\".%s", q1, q2);
  return out;
}

void lsim_plot_layout(int n, int *rows, int *cols, int *w, int *h) {
  if (n < 1)
    n = 1;
  *cols = n == 1 ? 1 : n <= 4 ? 2 : 3;
  *rows = (n + *cols - 1) / *cols;
  *w = *cols == 1 ? 900 : 520 * *cols;
  *h = *rows == 1 ? 560 : 120 + 360 * *rows;
}

int lsim_plot_split(const char *path, char *dir, size_t dn, char *name,
                    size_t nn) {
  const char *s = strrchr(path, '/');
  int a, b;
  if (!s) {
    a = snprintf(dir, dn, ".");
    b = snprintf(name, nn, "%s", path);
  } else {
    a = s == path ? snprintf(dir, dn, "/")
                  : snprintf(dir, dn, "%.*s", (int)(s - path), path);
    b = snprintf(name, nn, "%s", s + 1);
  }
  return a < 0 || (size_t)a >= dn || b < 0 || (size_t)b >= nn || !name[0]
             ? -1
             : 0;
}

lsim_err lsim_plot_demand(sqlite3 *db, const lsim_scenario *sc,
                          int64_t *demand, lsim_errbuf *eb) {
  for (int t = 0; t < sc->ntenants; t++)
    demand[t] = 0;
  /* a request's completed service is w_in * prompt + w_out * (output - 1)
  ** (the first token is the prefill row's result); its demand is the same
  ** over what it asked for.  tenant_summary.demand counts token rows with
  ** both weights 1, so it gives the same shares only when they are equal. */
  const char *sql;
  int weighted = 1;
  if (sc->fair_w_in == sc->fair_w_out &&
      lsim_db_has_column(db, "tenant_summary", "demand")) {
    sql = "SELECT tenant, demand FROM tenant_summary WHERE run_id = 1 AND "
          "tenant >= 0";
    weighted = 0;
  } else if (lsim_db_has_column(db, "requests", "requested_tokens")) {
    sql = "SELECT tenant, sum(?1 * prompt_tokens + ?2 * (requested_tokens - "
          "1)) FROM requests WHERE run_id = 1 GROUP BY tenant";
  } else {
    /* without the requested length the produced one stands in: equal for
    ** completed requests, short for the rest */
    sql = "SELECT tenant, sum(?1 * prompt_tokens + ?2 * max(output_tokens - "
          "1, 0)) FROM requests WHERE run_id = 1 GROUP BY tenant";
  }
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
    goto fail;
  if (weighted) {
    sqlite3_bind_int64(st, 1, sc->fair_w_in);
    sqlite3_bind_int64(st, 2, sc->fair_w_out);
  }
  int step;
  while ((step = sqlite3_step(st)) == SQLITE_ROW) {
    int t = sqlite3_column_int(st, 0);
    if (sqlite3_column_type(st, 0) != SQLITE_NULL && t >= 0 &&
        t < sc->ntenants)
      demand[t] = sqlite3_column_int64(st, 1);
  }
  if (step != SQLITE_DONE)
    goto fail;
  sqlite3_finalize(st);
  return 0;
fail:
  sqlite3_finalize(st);
  return lsim_fail(eb, LSIM_E_DB, "demand query failed: %s",
                   sqlite3_errmsg(db));
}
