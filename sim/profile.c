/*
** profile.c: reading cost profiles (profile.h).  `lorasim calibrate`
** (sim/calibrate.c) writes them; scenarios and replays read them here, so
** loading a profile needs nothing of the command.
*/
#include "profile.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "json.h"
#include "slurp.h"

lsim_err lsim_profile_load(const char *path, lsim_cost_model *out,
                           lsim_errbuf *eb) {
  static const char *const keys[] = {"iter_fixed_ns", "prefill_token_ns",
                                     "decode_token_ns", "segment_ns",
                                     "rank_row_ps"};
  /* the shared reader (sim/slurp.h, sim/json.h): the file type checked
  ** before opening, at most 1 MiB, duplicate keys refused, exact integers */
  static const lsim_json_codes codes = {LSIM_E_DEV_PROFILE,
                                        LSIM_E_JSON_DUP_KEY};
  const lsim_slurp_opts so = {(size_t)1 << 20, LSIM_E_DEV_PROFILE, 0, 0,
                              "profile"};
  lsim_json_doc doc;
  lsim_errbuf e2 = LSIM_ERRBUF_INIT;
  lsim_err rc = lsim_json_load(&doc, path, &so, &codes, &e2);
  if (rc) {
    int syntax = rc == LSIM_E_DEV_PROFILE && strncmp(e2.msg, "profile ", 8);
    return lsim_fail(eb, rc, "%s%s%s", syntax ? "profile " : "", e2.msg,
                     syntax ? " (not valid JSON)" : "");
  }
  char file[600];
  snprintf(file, sizeof file, "profile %s", path);
  const lsim_json_rd rd = {file, eb, LSIM_E_DEV_PROFILE, LSIM_E_DEV_PROFILE,
                           LSIM_E_DEV_PROFILE};
  const cJSON *root = doc.root;
  const cJSON *ver = lsim_json_get(root, "lorasim_profile");
  const cJSON *cost = lsim_json_get(root, "cost");
  int64_t one = 0, v[5];
  if (lsim_json_int(ver, &one) != LSIM_JSON_INT_OK || one != 1) {
    rc = lsim_json_fail(eb, LSIM_E_DEV_PROFILE, file, "$.lorasim_profile",
                        "must be 1");
    goto out;
  }
  if (!cJSON_IsObject(cost)) {
    rc = lsim_json_fail(eb, LSIM_E_DEV_PROFILE, file, "$.cost",
                        "required object is missing");
    goto out;
  }
  for (int i = 0; i < 5; i++)
    if ((rc = lsim_json_get_int(&rd, cost, "$.cost", keys[i], 1, 0,
                                1000000000000, 0, &v[i])))
      goto out;
  *out = (lsim_cost_model){v[0], v[1], v[2], v[3], v[4]};
out:
  lsim_json_release(&doc);
  return rc;
}

