/*
** plot_run.h: run gnuplot on a script, without a shell.
**
** Every plot of lorasim (replay, compare, prefix, trace stats) is drawn by
** writing a gnuplot script whose strings went through sim/escape.h and then
** running `gnuplot SCRIPT` here: fork, execvp with an argument vector,
** waitpid.  No shell ever parses a path or a name, so quotes, `$(...)` or
** `;` in an output path are plain bytes.  gnuplot's stdin and stderr are
** /dev/null (the script is its only input; its complaints would garble the
** summary), its stdout is inherited.
*/
#ifndef LSIM_PLOT_RUN_H
#define LSIM_PLOT_RUN_H

#include "../engine/lsim.h"

/* 1 when an executable regular file named gnuplot is on $PATH (searched
** here, as execvp would), else 0.  An empty or unset PATH finds nothing. */
int lsim_gnuplot_available(void);

/* Run gnuplot on `script` and wait for it.  0 when it exited with status
** 0; otherwise LSIM_E_IO with the reason in eb: not found, killed by a
** signal, or its exit status.  A relative script path is passed as
** "./PATH": gnuplot would take "-..." for an option and run "<cmd" (it
** loads such a file name from a shell). */
lsim_err lsim_gnuplot_run(const char *script, lsim_errbuf *eb);

/* The same, run in the folder dir (the child changes into it before exec,
** so the script's relative paths name files there) with, when preamble is
** not NULL, `gnuplot -e PREAMBLE SCRIPT`: commands run before the script
** (sim/plot.c sets the output names there).  script is relative to dir;
** a failure to enter dir is LSIM_E_IO. */
lsim_err lsim_gnuplot_run_in(const char *dir, const char *script,
                             const char *preamble, lsim_errbuf *eb);

#endif /* LSIM_PLOT_RUN_H */
