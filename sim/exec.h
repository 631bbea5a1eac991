/*
** exec.h: the `lorasim exec` subcommand (docs/EXEC.md).
*/
#ifndef LSIM_EXEC_H
#define LSIM_EXEC_H

#include <stddef.h>
#include <stdio.h>

/* argv[0] is "exec"; returns the process exit status. */
int lsim_exec_main(int argc, char **argv);

/* The same on a batch already in memory, cpu_ref, every path: text[len]
** must be '\0'; `name` stands for the file in messages; the result goes
** to the file `out` (NULL: stdout, "": discarded) and error lines to err
** (NULL: nowhere).  Returns the exit status.  Used by the fuzz harness
** (fuzz/fuzz_exec.c). */
int lsim_exec_text(const char *text, size_t len, const char *name,
                   const char *out, FILE *err);

#endif /* LSIM_EXEC_H */
