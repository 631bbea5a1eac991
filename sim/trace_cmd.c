/* `lorasim trace`: arrives with the trace issue (7) */
#include <stdio.h>

#include "trace_cmd.h"

int lsim_trace_main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  fprintf(stderr, "lorasim: error E_USAGE: 'trace' is not available yet\n");
  return 2;
}
