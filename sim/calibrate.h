/*
** calibrate.h: `lorasim calibrate` (docs/CUDA.md, "Calibration").
**
** The command fits a cost profile (the format and its reader: profile.h)
** to device times measured on the GPU.
*/
#ifndef LSIM_CALIBRATE_H
#define LSIM_CALIBRATE_H

#include <stdio.h>

#include "../engine/lsim.h"

/* `lorasim calibrate ARGS`: the exit status. */
int lsim_calibrate_cmd(int argc, char **argv);
void lsim_calibrate_usage(FILE *f);

#endif /* LSIM_CALIBRATE_H */
