/*
** exec.h: the `lorasim exec` subcommand (docs/EXEC.md).
*/
#ifndef LSIM_EXEC_H
#define LSIM_EXEC_H

/* argv[0] is "exec"; returns the process exit status. */
int lsim_exec_main(int argc, char **argv);

#endif /* LSIM_EXEC_H */
