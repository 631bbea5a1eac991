/*
** err.c: stable error names and the errbuf writer.
*/
#include "lsim.h"

#include <stdarg.h>
#include <stdio.h>

const char *lsim_err_name(lsim_err code) {
  switch (code) {
  case LSIM_OK:
    return "OK";
#define LSIM__CASE(sym, val, name) \
  case sym:                        \
    return name;
    LSIM_ERRCODES_ALL(LSIM__CASE)
#undef LSIM__CASE
  }
  return "E_UNKNOWN";
}

lsim_err lsim_fail(lsim_errbuf *eb, lsim_err code, const char *fmt, ...) {
  if (eb) {
    va_list ap;
    va_start(ap, fmt);
    eb->code = code;
    vsnprintf(eb->msg, sizeof eb->msg, fmt, ap);
    va_end(ap);
  }
  return code;
}
