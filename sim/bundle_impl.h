/*
** bundle_impl.h: the private half of sim/bundle (tools/check_layers.sh
** folds it into that module), shared with the compress command
** (sim/compress_cmd.c), which reads collections and writes and verifies
** bundles with these.  Nothing else includes it.
*/
#ifndef LSIM_BUNDLE_IMPL_H
#define LSIM_BUNDLE_IMPL_H

#include "bundle.h"

#include <cjson/cJSON.h>

#include "json.h"
#include "../compress/jd.h"
#include "../compress/synth.h"

#define LSIM_BUNDLE_MAX_DIM 65536
#define LSIM_BUNDLE_MAX_N 100000
#define LSIM_BUNDLE_NAME_MAX 128

/* One loaded collection: names and the factor storage behind src. */
typedef struct lsim_bundle_coll {
  char base[LSIM_BUNDLE_NAME_MAX], module[LSIM_BUNDLE_NAME_MAX];
  int n, d_in, d_out;
  char **names;
  lsim_jd_source *src;
  double **store; /* [n] A then B of each source (JSON input) */
  lsim_jd_collection syn; /* synthetic input */
  char path[512];         /* JSON path of the last error */
} lsim_bundle_coll;

void lsim_bundle_coll_release(lsim_bundle_coll *c);

/* Collections and bundles go through the shared JSON layer (sim/json.h):
** duplicate keys are E_JSON_DUP_KEY with their path, syntax is E_CMP_JSON,
** and the file through lsim_slurp (FIFOs and devices refused before they
** are opened, at most LSIM_SLURP_CAP bytes, E_FILE_SIZE beyond). */
extern const lsim_json_codes lsim_bundle_json_codes;

/* Read collection JSON root into c (c zeroed by the caller; release it
** with lsim_bundle_coll_release either way); an error names the JSON path
** in c->path with an E_CMP_* code. */
lsim_err lsim_bundle_coll_parse(lsim_bundle_coll *c, const cJSON *root,
                                lsim_errbuf *eb);

/* The digests of a fitted collection (src, ranks and scales filled by the
** caller; the rest derived).  Release with lsim_bundle_ids_release. */
typedef struct lsim_bundle_ids {
  lsim_digest *src, *bases, *cores, set, id;
  int *ranks;
  double *scales;
} lsim_bundle_ids;
void lsim_bundle_ids_release(lsim_bundle_ids *b);
lsim_err lsim_bundle_ids_derive(const lsim_bundle_coll *c,
                                const lsim_jd_config *cfg,
                                const lsim_jd_result *r, lsim_bundle_ids *b,
                                lsim_errbuf *eb);

/* Rebuild a result from bundle JSON o and re-derive every digest; on
** success *out holds its serving identity (release with
** lsim_bundle_release).  c (zeroed by the caller, released by it) carries
** the JSON path of an error. */
lsim_err lsim_bundle_verify(const cJSON *o, lsim_bundle_coll *c,
                            lsim_bundle *out, lsim_errbuf *eb);

#endif /* LSIM_BUNDLE_IMPL_H */
