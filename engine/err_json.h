/*
** err_json.h: stable error codes of the input layer shared by every JSON
** file lorasim reads (sim/json.h) and of its whole-file reader
** (sim/slurp.h), and the one code of an input file that is not there
** (E_FILE_MISSING, whichever command and reader: exit 2).
** Range -700..-719.  Append only; never renumber.
** docs/RELIABILITY.md ("Inputs") has the table.
*/
#define LSIM_ERRCODES_JSON(X)                                               \
  X(LSIM_E_JSON_DUP_KEY,       -700, "E_JSON_DUP_KEY")                      \
  X(LSIM_E_FILE_TYPE,          -701, "E_FILE_TYPE")                         \
  X(LSIM_E_FILE_SIZE,          -702, "E_FILE_SIZE")                         \
  X(LSIM_E_FILE_MISSING,       -703, "E_FILE_MISSING")
