/*
** fuzz_trace.c: one trace importer (traces/) on any bytes.
**
** Compiled once per format with LSIM_FUZZ_FORMAT set to an enum
** lsim_trace_format value.  The input is written to a file and read twice:
**
**   1. raw mode, strict: every record or the first error;
**   2. assigned to a 3-tenant, 16-adapter catalog with skip_bad_rows, the
**      records fed to the statistics accumulator.
**
** Beyond "no crash", what every accepted record must satisfy is checked
** (docs/TRACES.md): arrivals non-decreasing, lengths in
** [1, LSIM_TRACE_MAX_TOKENS], ids 0, 1, 2, ..., and in assigned mode a
** tenant and an adapter inside the catalog.  A violation aborts.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../traces/trace.h"
#include "fuzz.h"

#ifndef LSIM_FUZZ_FORMAT
#error "define LSIM_FUZZ_FORMAT"
#endif

#define LSIM__MAX_RECORDS 4000

static void lsim__die(const char *what, const lsim_trace_rec *r) {
  fprintf(stderr, "fuzz_trace(%s): record %lld: %s\n",
          lsim_trace_format_name(LSIM_FUZZ_FORMAT), r ? (long long)r->id : -1,
          what);
  abort();
}

static void lsim__read(const char *path, int assigned) {
  static const int64_t weights[3] = {3, 1, 1};
  lsim_len_dist len = {.kind = LSIM_DIST_FIXED, .min = 16, .max = 16};
  lsim_servegen_spec sg = {.rate_scale = 1.0, .prompt = len, .output = len};
  lsim_trace_spec spec = {.format = LSIM_FUZZ_FORMAT,
                          .path = path,
                          .skip_bad_rows = assigned,
                          .max_requests = LSIM__MAX_RECORDS,
                          .servegen = &sg};
  lsim_trace_ctx ctx = {.seed = 7,
                        .ntenants = assigned ? 3 : 0,
                        .tenant_weights = assigned ? weights : NULL,
                        .nadapters = 16,
                        .zipf_s = 1.0};
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_trace t = {0};
  lsim_trace_stats *st = NULL;
  lsim_err rc = lsim_trace_open(&t, &spec, &ctx, &eb);
  if (rc == LSIM_E_BUG)
    lsim__die(eb.msg, NULL);
  if (!rc && assigned && lsim_trace_stats_new(&st, &eb))
    lsim__die("cannot allocate statistics", NULL);
  int64_t n = 0, last = -1;
  lsim_trace_rec r;
  int got = 0;
  while (!rc && (got = lsim_trace_next(&t, &r, &eb)) == 1) {
    if (r.id != n++)
      lsim__die("ids are not 0, 1, 2, ...", &r);
    if (r.arrival_ns < last)
      lsim__die("arrival before the previous one", &r);
    last = r.arrival_ns;
    if (r.prompt_tokens < 1 || r.prompt_tokens > LSIM_TRACE_MAX_TOKENS ||
        r.output_tokens < 1 || r.output_tokens > LSIM_TRACE_MAX_TOKENS)
      lsim__die("length out of range", &r);
    if (r.nblocks < 0 || (r.nblocks > 0 && !r.blocks) ||
        r.nblocks > LSIM_TRACE_MAX_BLOCKS)
      lsim__die("prefix blocks inconsistent", &r);
    if (assigned && (r.tenant < 0 || r.tenant >= 3 || r.adapter < 0 ||
                     r.adapter >= 16))
      lsim__die("tenant or adapter outside the catalog", &r);
    if (st && lsim_trace_stats_add(st, &r, &eb))
      lsim__die(eb.msg, &r);
  }
  if (got == LSIM_E_BUG || got > 1)
    lsim__die(eb.msg, NULL);
  if (n > LSIM__MAX_RECORDS)
    lsim__die("more records than max_requests", NULL);
  if (!rc) {
    lsim_trace_info ti;
    lsim_trace_get_info(&t, &ti);
    if (ti.records != n)
      lsim__die("info.records disagrees with the records read", NULL);
  }
  if (st) {
    lsim_trace_summary s;
    lsim_trace_stats_summary(st, &s);
    if (s.requests != n)
      lsim__die("statistics lost a record", NULL);
    lsim_trace_stats_release(st);
  }
  lsim_trace_close(&t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *name = lsim_trace_format_sample_name(LSIM_FUZZ_FORMAT);
  const char *path = lsim_fuzz_file(name, data, size);
  lsim__read(path, 0);
  lsim__read(path, 1);
  return 0;
}
