/*
** compare.h: the `lorasim compare` subcommand (one scenario under several
** schedulers, one table; README.md, docs/SCHEDULING.md).
*/
#ifndef LSIM_COMPARE_H
#define LSIM_COMPARE_H

/* argv[0] is "compare"; returns the process exit status. */
int lsim_compare_main(int argc, char **argv);

#endif /* LSIM_COMPARE_H */
