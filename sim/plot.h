/*
** plot.h: gnuplot scripts for figures fit for a paper, shared by the
** replay's plots (sim/report.c) and compare's (sim/compare.c).
**
** A script is written into the results folder and names its data files
** and its outputs relative to that folder, so `cd DIR && gnuplot X.gp`
** draws the figures again from the .dat files beside it.  Each figure is
** drawn twice, as NAME.png (pngcairo) and NAME.svg (svg), from the same
** commands.  The script gives each output a variable with the final name
** as its default:
**
**     if (!exists("out_ttft_png")) out_ttft_png = 'run-ttft.png'
**     ...
**     set output out_ttft_png
**
** and lsim_plot_finish runs gnuplot in the folder with those variables
** set (`-e`) to the temporaries of sim/outfile.c, renamed into place once
** gnuplot exited 0: a figure is whole or absent.  gnuplot runs without a
** shell (sim/plot_run.h); every string of the script is a quoted gnuplot
** literal (sim/escape.h).
**
** A panel shows at most LSIM_PLOT_SERIES series; figures with more are
** small multiples (gnuplot multiplot), lsim_plot_layout picks the grid.
*/
#ifndef LSIM_PLOT_H
#define LSIM_PLOT_H

#include <stdio.h>

#include <sqlite3.h>

#include "outfile.h"
#include "scenario.h"

#define LSIM_PLOT_SERIES 6  /* series in one panel, at most */
#define LSIM_PLOT_FIGS 12   /* figures in one script */
#define LSIM_PLOT_TERMS 2   /* png, svg */

extern const char *const lsim_plot_ext[LSIM_PLOT_TERMS]; /* "png", "svg" */

typedef struct lsim_plotset {
  FILE *f;                 /* the script, between begin and finish */
  char dir[LSIM_OUT_PATH_MAX];    /* the results folder (read-only) */
  char script[LSIM_OUT_PATH_MAX]; /* the script's name in dir (read-only) */
  int n;                   /* figures (read-only) */
  /* private */
  lsim_outfile gp;
  struct {
    char key[32];
    lsim_outfile of[LSIM_PLOT_TERMS];
  } fig[LSIM_PLOT_FIGS];
} lsim_plotset;

/* Start the script dir/script (script: a file name, no folder) on the heap:
** *out owns it until lsim_plot_finish or lsim_plot_abort.  dir "" is the
** working directory. */
lsim_err lsim_plot_begin(lsim_plotset **out, const char *dir,
                         const char *script, lsim_errbuf *eb);

/* Add a figure whose outputs are dir/NAME.png and dir/NAME.svg (name: a
** file name without folder or extension); key names its variables
** (out_KEY_png, out_KEY_svg: [a-z0-9_], unique in the script).  Reserves
** the temporaries and writes the variables' defaults.  Returns the
** figure's index, or -1 with eb set (the set is then to be aborted). */
int lsim_plot_figure(lsim_plotset *ps, const char *name, const char *key,
                     lsim_errbuf *eb);

/* Begin drawing figure fig on terminal t (0 png, 1 svg) at w x h pixels:
** reset, the terminal and the output.  The caller writes the figure's
** commands, the same for every t, into ps->f after it. */
void lsim_plot_term(lsim_plotset *ps, int fig, int t, int w, int h);

/* Commit the script, run gnuplot in the folder and put every output in
** place.  *drawn is 1 once every figure is whole and in place; a gnuplot
** that failed leaves the data and the script, sets note and returns 0; a
** write that failed is the error.  ps is freed either way. */
lsim_err lsim_plot_finish(lsim_plotset *ps, int *drawn, char *note,
                          size_t note_n, lsim_errbuf *eb);

/* Drop the script and every reserved output; ps is freed. */
void lsim_plot_abort(lsim_plotset *ps);

/* A two-line title: what, then "scenario NAME, trace TRACE" and, when
** not NULL, extra; as a gnuplot string expression (escape.h, control
** bytes shown as '?').  TRACE is the trace file's name without its folder,
** or "generator". */
const char *lsim_plot_title(char *out, size_t size, const char *what,
                            const lsim_scenario *sc, const char *extra);

/* s as a quoted gnuplot string (titles, labels: control bytes as '?'). */
const char *lsim_plot_str(char *out, size_t size, const char *s);

/* Grid of n panels: *rows x *cols, and the canvas in pixels. */
void lsim_plot_layout(int n, int *rows, int *cols, int *w, int *h);

/* Split path into its folder (dir, "." when it has none) and its last
** component (name); -1 when one does not fit. */
int lsim_plot_split(const char *path, char *dir, size_t dn, char *name,
                    size_t nn);

/*
** What each tenant asked for: w_in * prompt tokens + w_out * output
** tokens over every request that arrived (completed or not), the demand
** that service shares are compared against.  From tenant_summary.demand
** when the run database has that column, else from the requests table.
** demand[ntenants] is filled; a tenant without requests gets 0.
*/
lsim_err lsim_plot_demand(sqlite3 *db, const lsim_scenario *sc,
                          int64_t *demand, lsim_errbuf *eb);

#endif /* LSIM_PLOT_H */
