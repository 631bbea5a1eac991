/*
** trace_cmd.h: the `lorasim trace` subcommand (convert, stats).
*/
#ifndef LSIM_TRACE_CMD_H
#define LSIM_TRACE_CMD_H

/* argv[0] is "trace"; returns the process exit status. */
int lsim_trace_main(int argc, char **argv);

#endif /* LSIM_TRACE_CMD_H */
