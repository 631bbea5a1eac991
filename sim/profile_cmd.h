/*
** profile_cmd.h: `lorasim profile` (docs/PROFILE.md): measure whole
** forward passes of a designed grid of iteration shapes on the GPU, record
** every measurement, fit the profiled cost model and write a version 2
** cost profile.
*/
#ifndef LSIM_PROFILE_CMD_H
#define LSIM_PROFILE_CMD_H

#include <stdio.h>

/* `lorasim profile ARGS`: the exit status. */
int lsim_profile_cmd(int argc, char **argv);
void lsim_profile_usage(FILE *f);

#endif /* LSIM_PROFILE_CMD_H */
