/*
** prefix_report.h: the `lorasim prefix` subcommand (prefix-cache study).
*/
#ifndef LSIM_PREFIX_REPORT_H
#define LSIM_PREFIX_REPORT_H

/* argv[0] is "prefix"; returns the process exit status. */
int lsim_prefix_main(int argc, char **argv);

#endif /* LSIM_PREFIX_REPORT_H */
