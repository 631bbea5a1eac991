/*
** compress_cmd.h: the `lorasim compress` subcommand (docs/COMPRESSION.md).
*/
#ifndef LSIM_COMPRESS_CMD_H
#define LSIM_COMPRESS_CMD_H

#include "../engine/identity.h"
#include "../engine/lsim.h"

/* argv[0] is "compress"; returns the process exit status. */
int lsim_compress_main(int argc, char **argv);

/* A verified bundle's serving identity: every digest re-derived from the
** bundle's values (as --verify does).  Release with
** lsim_compress_serve_release. */
typedef struct lsim_compress_serve {
  int method;            /* LSIM_JD_FULL (1) or LSIM_JD_DIAG (2) */
  int R, k, n, d_in, d_out;
  int *cluster;          /* [n] */
  lsim_digest bundle, source_set;
  lsim_digest *basis;    /* [k] */
  lsim_digest *core;     /* [n] */
} lsim_compress_serve;

/* Read and verify a `lorasim compress` bundle; errors name the file and the
** JSON path, with an E_CMP_* code. */
lsim_err lsim_compress_bundle_read(const char *file, lsim_compress_serve *out,
                                   lsim_errbuf *eb);
void lsim_compress_serve_release(lsim_compress_serve *s);

#endif /* LSIM_COMPRESS_CMD_H */
