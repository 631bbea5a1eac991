/*
** timeline.h: bounded time series of one run, fed as a replay tap
** (lsim_replay_opts.tap), for `lorasim compare`'s plots.
**
** Simulated time is cut into at most LSIM_TIMELINE_BUCKETS buckets.  The
** bucket width starts at one millisecond of simulated time and doubles
** (adjacent buckets merged) whenever an event falls past the last bucket,
** so memory is fixed whatever the length of the trace.  Each bucket holds,
** from publication events only: completed service debited per tenant,
** adapter loads started, and the change in resident adapters (a
** (worker, adapter) pair is resident from its adapter_generation_published
** to its adapter_retired or a dropped restore).
*/
#ifndef LSIM_TIMELINE_H
#define LSIM_TIMELINE_H

#include <stdio.h>

#include "../engine/event.h"

#define LSIM_TIMELINE_BUCKETS 512

typedef struct lsim_timeline {
  int ntenants, workers, nadapters;
  lsim_tick width; /* ticks per bucket */
  int nb;          /* buckets in use */
  lsim_tick edge;  /* nb * width: an earlier tick changes neither */
  lsim_tick lo, hi; /* the last bucket found, [lo, hi) in ticks */
  int last;         /* its index */
  int64_t *svc;    /* [BUCKETS * ntenants] service debited in the bucket */
  int64_t *loads;  /* [BUCKETS] loads started */
  int64_t *rdelta; /* [BUCKETS] change in resident (worker, adapter) pairs */
  unsigned char *seen;     /* [ntenants] tenant had an arrival */
  int64_t *seen_from;      /* [ntenants] bucket of its first arrival */
  unsigned char *resident; /* [workers * nadapters] */
} lsim_timeline;

lsim_err lsim_timeline_init(lsim_timeline *t, int ntenants, int workers,
                            int nadapters, int64_t ns_per_tick);
void lsim_timeline_release(lsim_timeline *t);

/* The sink callback (ud: the timeline). */
lsim_err lsim_timeline_event(void *ud, const lsim_event *ev);

/*
** Write the series as a gnuplot data block (two blank lines end it):
** one row per bucket with the bucket's end in seconds, the cumulative
** completed service of every tenant, the max - min of cumulative service
** over tenants that had arrived by then, resident adapters, and loads per
** second in the bucket.  end_tick cuts the last bucket.
*/
int lsim_timeline_write(const lsim_timeline *t, FILE *f, lsim_tick end_tick,
                        int64_t ns_per_tick);

#endif /* LSIM_TIMELINE_H */
