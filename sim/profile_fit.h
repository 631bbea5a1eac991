/*
** profile_fit.h: the measurements of `lorasim profile` and the fit of the
** profiled cost model to them (docs/PROFILE.md).  No device here: the
** command measures (sim/profile_cmd.c) and this module reads, writes and
** fits what was measured, so a recorded file can be refitted anywhere
** (`lorasim profile --fit FILE`), and the tests fit a file checked in.
**
** The measurement file is CSV with one header line (LSIM_PROF_CSV_HEADER)
** and one row per timed run: kind `iter` (one forward pass of a grid
** point's plan: its features, lsim_cost_feat, and the adapted modules and
** elements it was measured with) or `copy` (one host-to-device copy of
** `bytes`).  A point is timed reps times; the fit takes each point's
** median.
*/
#ifndef LSIM_PROFILE_FIT_H
#define LSIM_PROFILE_FIT_H

#include <stdint.h>

#include "../backends/backend.h"
#include "../engine/lsim.h"

#define LSIM_PROF_CSV_HEADER                                                \
  "kind,point,class,targets,rep,tokens,sampled,decode_rows,decode_ctx,"     \
  "prefill_seqs,prefill_pairs,lora,lora_segments,rank_rows,lora_modules,"   \
  "lora_elems,adapters,max_rank,bytes,ns,decode_rank_rows"
/* The header of files written before decode_rank_rows was recorded; they
** are read with that feature 0 (docs/PROFILE.md) */
#define LSIM_PROF_CSV_HEADER_V1                                             \
  "kind,point,class,targets,rep,tokens,sampled,decode_rows,decode_ctx,"     \
  "prefill_seqs,prefill_pairs,lora,lora_segments,rank_rows,lora_modules,"   \
  "lora_elems,adapters,max_rank,bytes,ns"

enum { LSIM_PROF_ITER = 0, LSIM_PROF_COPY = 1 };
/* copy classes: a pinned copy timed alone, or an adapter's stage as the
** backend timed it (what the measured clock ends a load with) */
enum { LSIM_PROF_H2D = 0, LSIM_PROF_STAGE = 1 };
/* grid classes, in report order */
enum {
  LSIM_PROF_PREFILL = 0,
  LSIM_PROF_DECODE,
  LSIM_PROF_MIXED,
  LSIM_PROF_LORA,
  LSIM_PROF_NCLASS
};
const char *lsim_prof_class_name(int cls); /* "prefill", ... */

typedef struct lsim_prof_row {
  int kind;               /* LSIM_PROF_ITER or _COPY */
  int point;              /* grid point (a copy size is a point too) */
  int cls;                /* LSIM_PROF_PREFILL..; copies: LSIM_PROF_H2D
                             or LSIM_PROF_STAGE */
  char targets[32];       /* the target set's name ("qkvo"), "-" none */
  int rep;                /* 0.. */
  lsim_cost_feat f;       /* kind iter */
  int64_t lora_modules;   /* layers x adapted modules */
  int64_t lora_elems;     /* layers x sum of d_in + d_out over them */
  int adapters, max_rank; /* distinct adapters, largest rank */
  int64_t bytes;          /* kind copy */
  int64_t ns;             /* the measured device time */
} lsim_prof_row;

/* Append rows to / write them as the CSV at path (sim/outfile.c). */
lsim_err lsim_prof_csv_write(const char *path, const lsim_prof_row *rows,
                             int n, lsim_errbuf *eb);
/* Read a measurement file; *rows malloc'd (free it).  E_DEV_PROFILE with
** FILE:LINE and the column for a bad header, field or value; at most
** 1,000,000 rows. */
lsim_err lsim_prof_csv_read(const char *path, lsim_prof_row **rows, int *n,
                            lsim_errbuf *eb);

/* Fit statistics of a set of points, relative errors in percent. */
typedef struct lsim_prof_stats {
  int n;
  double mape, median, p90, max, bias;
} lsim_prof_stats;

typedef struct lsim_prof_fit {
  lsim_cost_coef coef;         /* ns (knee in tokens) */
  lsim_prof_stats all;         /* iteration points */
  lsim_prof_stats cls[LSIM_PROF_NCLASS];
  double rmse_ns;              /* root mean square residual, ns */
  int copy_on;                 /* copy points were measured */
  int copy_source;             /* the class fitted: LSIM_PROF_STAGE when
                                  stages of two sizes or more were timed,
                                  else LSIM_PROF_H2D */
  double copy_latency_ns, copy_gbps;
  lsim_prof_stats copy;
} lsim_prof_fit;

/* Fit the profiled model to the rows' point medians: the knee by a search
** over log-spaced candidates refined by golden section, the other
** coefficients by non-negative least squares on the relative error
** (Lawson-Hanson, each subproblem by LAPACK's QR solver); the copy model
** by the same on the copy points (the stage copies when they span two
** sizes or more, else the pinned copies).  Residuals are those of the model as a
** replay computes it (lsim_cost_prof_bind, lsim_cost_prof_ns).  E_USAGE
** when there is no iteration point. */
lsim_err lsim_prof_fit_run(const lsim_prof_row *rows, int n,
                           lsim_prof_fit *out, lsim_errbuf *eb);

/* The bound model's prediction for an iteration row, in ns (its own
** modules and elements). */
int64_t lsim_prof_predict(const lsim_cost_coef *k, const lsim_prof_row *r);

#endif /* LSIM_PROFILE_FIT_H */
