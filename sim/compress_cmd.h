/*
** compress_cmd.h: the `lorasim compress` subcommand (docs/COMPRESSION.md).
*/
#ifndef LSIM_COMPRESS_CMD_H
#define LSIM_COMPRESS_CMD_H

#include "../engine/lsim.h"

/* argv[0] is "compress"; returns the process exit status. */
int lsim_compress_main(int argc, char **argv);

#endif /* LSIM_COMPRESS_CMD_H */
