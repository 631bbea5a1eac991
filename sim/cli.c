/*
** cli.c: the commands' error exit (cli.h).
*/
#include "cli.h"

#include <stdio.h>

#include "escape.h"
#include "scenario.h"

/* Codes that are bad input (exit 2), as ranges [lo, hi] of code values. */
static const struct {
  lsim_err lo, hi;
  const char *what;
} lsim__input[] = {
    {LSIM_E_USAGE, LSIM_E_USAGE, "usage"},
    {LSIM_E_FILE_MISSING, LSIM_E_FILE_MISSING, "an input file not there"},
    {LSIM_E_BACKEND + 1, LSIM_E_SCN_JSON, "scenario and trace input"},
    {LSIM_E_FID_RECORDED, LSIM_E_FID_NO_MEASURED, "a fidelity input"},
    {-559, LSIM_E_CMP_LAPACK - 1, "a compressed collection as given"},
    {LSIM_E_CMP_LAPACK + 1, LSIM_E_CMP_JSON, "a compressed collection as given"},
    {LSIM_E_OUT_SYMLINK, LSIM_E_OUT_SYMLINK, "an output path refused"},
    {LSIM_E_OUT_NOT_REGULAR, LSIM_E_OUT_NOT_REGULAR, "an output path refused"},
    {LSIM_E_OUT_NOT_DB, LSIM_E_OUT_NOT_DB, "an output path refused"},
    {LSIM_E_OUT_NO_DIR, LSIM_E_OUT_NO_DIR, "an output path refused"},
    {LSIM_E_RUN_INPUT_MISSING, LSIM_E_RUN_INPUT_MISSING, "a run input"},
    {LSIM_E_RUN_INPUT_CHANGED, LSIM_E_RUN_INPUT_CHANGED, "a run input"},
    {LSIM_E_RUN_IDENTITY, LSIM_E_RUN_IDENTITY, "a run input"},
    {LSIM_E_DEV_PROFILE, LSIM_E_DEV_PROFILE, "a cost profile"},
    {LSIM_E_DEV_PROFILE_NONE, LSIM_E_DEV_PROFILE_SHAPE, "a cost profile"},
    /* a scenario the whole-model executor refuses (--execute full) */
    {LSIM_E_DEV_UNSUPPORTED, LSIM_E_DEV_FIT, "a scenario the device refuses"},
};

int lsim_cli_status(lsim_err code) {
  if (!code)
    return 0;
  if (code == LSIM_E_INTERRUPTED)
    return 130;
  for (size_t i = 0; i < sizeof lsim__input / sizeof lsim__input[0]; i++)
    if (code >= lsim__input[i].lo && code <= lsim__input[i].hi)
      return 2;
  return 1;
}

int lsim_cli_fail(const char *cmd, lsim_err code, const char *msg) {
  fprintf(stderr, "lorasim%s%s: error: %s: %s\n", cmd && *cmd ? " " : "",
          cmd ? cmd : "", lsim_err_name(code), msg);
  return lsim_cli_status(code);
}

int lsim_cli_document_status(lsim_err code) {
  if (!code)
    return 0;
  return code == LSIM_E_PATH_MISMATCH || code == LSIM_E_NOMEM ||
                 code == LSIM_E_BUG || code == LSIM_E_IO
             ? 1
             : 2;
}

void lsim_cli_report_at(FILE *err, lsim_err code, const char *where,
                        const char *msg) {
  if (!err)
    return;
  if (where && *where)
    fprintf(err, "lorasim: error %s at %s: %s\n", lsim_err_name(code), where,
            msg);
  else
    fprintf(err, "lorasim: error %s: %s\n", lsim_err_name(code), msg);
}

lsim_err lsim_cli_modes(const char *execute, const char *clock,
                        int *execute_out, int *clock_out, lsim_errbuf *eb) {
  char shown[LSIM_ESC_SIZE(64)];
  *execute_out = *clock_out = -1;
  if (execute && (*execute_out = lsim_scenario_execute_find(execute)) < 0)
    return lsim_fail(eb, LSIM_E_SCN_MODE,
                     "--execute: unknown mode '%s' (known: %s)",
                     lsim_console_str(shown, sizeof shown, execute),
                     lsim_scenario_execute_names());
  if (clock && (*clock_out = lsim_scenario_clock_find(clock)) < 0)
    return lsim_fail(eb, LSIM_E_SCN_MODE,
                     "--clock: unknown clock '%s' (known: %s)",
                     lsim_console_str(shown, sizeof shown, clock),
                     lsim_scenario_clock_names());
  return 0;
}
