/*
** escape.h: every user-supplied string written into a file another program
** reads (CSV, gnuplot scripts and data, Prometheus text) or onto the console
** goes through one of these functions (docs/RELIABILITY.md, "Names in
** outputs").
**
** Scenario validation already restricts names to [A-Za-z0-9._-]
** (docs/SCENARIO.md), so for a validated name every function here copies
** the bytes unchanged.  They exist for what validation does not cover: paths
** given on the command line or inside a scenario, strings from trace files
** and collections, and library callers that fill an lsim_scenario
** themselves.  Defense in depth: a writer never relies on the validator.
**
** Every function writes a NUL-terminated result into out[size] and returns
** its length, or -1 when it does not fit (out is then "") or, for the
** refusing variants, when the input has a byte that cannot be represented.
** A "control byte" is 0x00..0x1f or 0x7f.
*/
#ifndef LSIM_ESCAPE_H
#define LSIM_ESCAPE_H

#include <stddef.h>

/* A buffer large enough for any escaping below of a string of n bytes:
** every byte may become 4 ("\x1b"), plus quotes, "./" and the NUL. */
#define LSIM_ESC_SIZE(n) (4 * (size_t)(n) + 8)

/* CSV (RFC 4180): s as one field.  A field holding a comma, a double quote,
** CR or LF is enclosed in double quotes with inner quotes doubled; any
** other field is copied as is. */
int lsim_csv_field(char *out, size_t size, const char *s);

/* Reads back what lsim_csv_field wrote: the next field of one CSV record
** starting at *p into out[size]; *p moves past the field and its comma.
** Returns 1 when a field was read, 0 at the end of the record (NUL, CR or
** LF), -1 on a malformed or too long field. */
int lsim_csv_next(const char **p, char *out, size_t size);

/* gnuplot: s as a single-quoted string literal, quotes included ('it''s').
** Inside single quotes gnuplot expands neither backslashes, backquotes
** (command substitution) nor @macros, so the only special byte is the
** quote itself, doubled here.  A control byte cannot be represented (a
** newline would end the command): LSIM_GP_REFUSE returns -1 for it,
** LSIM_GP_REPLACE writes '?' in its place (for titles). */
enum { LSIM_GP_REFUSE = 0, LSIM_GP_REPLACE = 1 };
int lsim_gp_string(char *out, size_t size, const char *s, int mode);

/* gnuplot: a file name for `plot '...'` or `set output '...'`.  As
** lsim_gp_string with LSIM_GP_REFUSE, and a relative path is prefixed with
** "./" so that a name starting with '<' (gnuplot reads a shell command's
** output) or '|' (writes into a command), or the special names '', '-',
** '+', '++' and '$block', always names a file. */
int lsim_gp_path(char *out, size_t size, const char *path);

/* A whitespace-separated data token (gnuplot .dat columns, headers):
** whitespace, '"', '#' and control bytes become '_'. */
int lsim_dat_token(char *out, size_t size, const char *s);

/* Prometheus text format label value (without the enclosing quotes):
** backslash, double quote and newline become \\, \" and \n. */
int lsim_prom_label(char *out, size_t size, const char *s);

/* The console and one-line comments (.dat '#', .prom '#', messages): a
** control byte becomes a visible escape (\n, \r, \t or \xHH), so a name
** can neither start a new line nor move the cursor.  Never fails: what
** does not fit is cut and ends in "...".  Returns out, for printf. */
const char *lsim_console_str(char *out, size_t size, const char *s);

#endif /* LSIM_ESCAPE_H */
