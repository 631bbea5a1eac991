/*
** cli.h: the one error exit of the lorasim commands.
**
** A command that fails prints one line on stderr,
**
**   lorasim CMD: error: E_NAME: message
**
** and exits with the status lsim_cli_status gives its code: 130 for an
** interruption (E_INTERRUPTED), 2 for bad input (usage, a scenario or
** trace, a compressed collection that cannot be served as given, an
** output path refused before anything is written, a run input that cannot
** be read or no longer matches), 1 for everything else (I/O, the database,
** memory, the backend, a broken invariant).  The table is in cli.c and in
** docs/RELIABILITY.md, "Exit status".
*/
#ifndef LSIM_CLI_H
#define LSIM_CLI_H

#include <stdio.h>

#include "../engine/lsim.h"

/* The exit status of a command that failed with code (0 for 0). */
int lsim_cli_status(lsim_err code);

/* Print "lorasim CMD: error: E_NAME: msg" on stderr (cmd NULL or "":
** "lorasim: error: ...") and return lsim_cli_status(code). */
int lsim_cli_fail(const char *cmd, lsim_err code, const char *msg);

/*
** The commands whose input is one document, `exec` and `compress`, print
** their failure in the form of the exec interface (docs/EXEC.md,
** shared/spec/exec-json.md), which outside checkers parse:
**
**   lorasim: error E_NAME at JSONPATH: message     (or without "at ...")
**
** and, for `exec`, exit with lsim_cli_document_status: 1 for a failure of
** the run itself (the execution families disagree, memory, I/O, a broken
** invariant), 2 for everything else (the document as given).
*/
int lsim_cli_document_status(lsim_err code);

/* Print that line on err (NULL: nowhere); where NULL or "" leaves out
** " at ...". */
void lsim_cli_report_at(FILE *err, lsim_err code, const char *where,
                        const char *msg);

/* The values of --execute and --clock (NULL: not given, *out -1): the
** mode's number (backends/backend.h LSIM_EXECUTE_*, sim/scenario.h
** LSIM_CLOCK_*), or E_SCN_MODE naming the option and the known values. */
lsim_err lsim_cli_modes(const char *execute, const char *clock,
                        int *execute_out, int *clock_out, lsim_errbuf *eb);

#endif /* LSIM_CLI_H */
