/*
** bundle.h: reading a `lorasim compress` bundle for serving
** (docs/COMPRESSION.md).  The scenario loader checks a scenario's bundle
** with it and the replay takes the serving identity from it; the compress
** command (sim/compress_cmd.c) writes bundles.
*/
#ifndef LSIM_BUNDLE_H
#define LSIM_BUNDLE_H

#include "../engine/identity.h"
#include "../engine/lsim.h"

/* A verified bundle's serving identity: every digest re-derived from the
** bundle's values (as `compress --verify` does).  Release with
** lsim_bundle_release. */
typedef struct lsim_bundle {
  int method;            /* LSIM_JD_FULL (1) or LSIM_JD_DIAG (2) */
  int R, k, n, d_in, d_out;
  int *cluster;          /* [n] */
  lsim_digest bundle, source_set;
  lsim_digest *basis;    /* [k] */
  lsim_digest *core;     /* [n] */
} lsim_bundle;

/* Read and verify a `lorasim compress` bundle; errors name the file and the
** JSON path, with an E_CMP_* code.  On error *out holds nothing. */
lsim_err lsim_bundle_read(const char *file, lsim_bundle *out,
                          lsim_errbuf *eb);
void lsim_bundle_release(lsim_bundle *b);

#endif /* LSIM_BUNDLE_H */
