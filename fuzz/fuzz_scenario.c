/*
** fuzz_scenario.c: the scenario loader (sim/scenario.c) on any bytes.
**
** The input is a scenario's JSON text.  lsim_scenario_parse must accept it
** or reject it with a scenario, trace or generic input code (never E_BUG);
** an accepted scenario's trace is then opened and up to 200 records read,
** and the derived sizes are computed, so the values the loader let through
** are used the way a replay uses them.  Relative trace paths resolve
** against tests/fixtures/replay, where the seed scenarios' traces live.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../sim/scenario.h"
#include "fuzz.h"

static void lsim__check(lsim_err rc, const lsim_errbuf *eb, const char *what) {
  if (rc == LSIM_E_BUG || rc > 0) {
    fprintf(stderr, "fuzz_scenario: %s returned %d: %s\n", what, rc, eb->msg);
    abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static lsim_scenario sc; /* large: kept off the stack */
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_err rc = lsim_scenario_parse(&sc, (const char *)data, size, "fuzz.json",
                                    LSIM_SOURCE_DIR "/tests/fixtures/replay",
                                    &eb);
  lsim__check(rc, &eb, "lsim_scenario_parse");
  if (rc)
    return 0;
  for (int i = 0; i < sc.nranks; i++) {
    if (lsim_scenario_adapter_bytes(&sc, sc.ranks[i].rank) <= 0 ||
        lsim_scenario_adapter_pages(&sc, sc.ranks[i].rank) <= 0) {
      fprintf(stderr, "fuzz_scenario: accepted rank %d has no size\n",
              sc.ranks[i].rank);
      abort();
    }
  }
  (void)lsim_scenario_kv_bytes_per_token(&sc);
  lsim_trace t = {0};
  rc = lsim_scenario_trace_open(&sc, &t, sc.trace_skip_bad_rows, 200, &eb);
  lsim__check(rc, &eb, "lsim_scenario_trace_open");
  if (!rc) {
    lsim_trace_rec r;
    int64_t last = -1;
    int got;
    while ((got = lsim_trace_next(&t, &r, &eb)) == 1) {
      if (r.arrival_ns < last || r.tenant < 0 || r.tenant >= sc.ntenants ||
          r.adapter < 0 || r.adapter >= sc.adapters) {
        fprintf(stderr, "fuzz_scenario: record %lld out of the catalog\n",
                (long long)r.id);
        abort();
      }
      last = r.arrival_ns;
    }
    lsim__check(got, &eb, "lsim_trace_next");
  }
  lsim_trace_close(&t);
  return 0;
}
