/* timeline.c: bounded per-run time series (timeline.h). */
#include "timeline.h"

#include <stdlib.h>
#include <string.h>

lsim_err lsim_timeline_init(lsim_timeline *t, int ntenants, int workers,
                            int nadapters, int64_t ns_per_tick) {
  memset(t, 0, sizeof *t);
  t->ntenants = ntenants;
  t->workers = workers;
  t->nadapters = nadapters;
  t->width = (1000000 + ns_per_tick - 1) / ns_per_tick; /* one ms */
  if (t->width < 1)
    t->width = 1;
  t->svc = calloc((size_t)LSIM_TIMELINE_BUCKETS * (size_t)ntenants,
                  sizeof *t->svc);
  t->loads = calloc(LSIM_TIMELINE_BUCKETS, sizeof *t->loads);
  t->rdelta = calloc(LSIM_TIMELINE_BUCKETS, sizeof *t->rdelta);
  t->seen = calloc((size_t)ntenants, 1);
  t->seen_from = calloc((size_t)ntenants, sizeof *t->seen_from);
  t->resident = calloc((size_t)workers * (size_t)nadapters, 1);
  if (!t->svc || !t->loads || !t->rdelta || !t->seen || !t->seen_from ||
      !t->resident) {
    lsim_timeline_release(t);
    return LSIM_E_NOMEM;
  }
  return 0;
}

void lsim_timeline_release(lsim_timeline *t) {
  free(t->svc);
  free(t->loads);
  free(t->rdelta);
  free(t->seen);
  free(t->seen_from);
  free(t->resident);
  memset(t, 0, sizeof *t);
}

/* Halve the resolution: bucket i takes buckets 2i and 2i+1. */
static void lsim__coarsen(lsim_timeline *t) {
  int n = t->ntenants;
  for (int i = 0; i < LSIM_TIMELINE_BUCKETS / 2; i++) {
    for (int k = 0; k < n; k++)
      t->svc[(size_t)i * n + k] =
          t->svc[(size_t)2 * i * n + k] + t->svc[(size_t)(2 * i + 1) * n + k];
    t->loads[i] = t->loads[2 * i] + t->loads[2 * i + 1];
    t->rdelta[i] = t->rdelta[2 * i] + t->rdelta[2 * i + 1];
  }
  size_t half = LSIM_TIMELINE_BUCKETS / 2;
  memset(t->svc + half * (size_t)n, 0, half * (size_t)n * sizeof *t->svc);
  memset(t->loads + half, 0, half * sizeof *t->loads);
  memset(t->rdelta + half, 0, half * sizeof *t->rdelta);
  for (int k = 0; k < n; k++)
    t->seen_from[k] /= 2;
  t->width *= 2;
  t->nb = (t->nb + 1) / 2;
}

static int lsim__bucket(lsim_timeline *t, lsim_tick tick) {
  if (tick < 0)
    tick = 0;
  while (tick / t->width >= LSIM_TIMELINE_BUCKETS)
    lsim__coarsen(t);
  int b = (int)(tick / t->width);
  if (b + 1 > t->nb)
    t->nb = b + 1;
  t->edge = (lsim_tick)t->nb * t->width;
  t->last = b;
  t->lo = (lsim_tick)b * t->width;
  t->hi = t->lo + t->width;
  return b;
}

static void lsim__resident(lsim_timeline *t, int b, int w, int a, int on) {
  if (w < 0 || w >= t->workers || a < 0 || a >= t->nadapters)
    return;
  unsigned char *r = &t->resident[(size_t)w * (size_t)t->nadapters + a];
  if (*r == on)
    return;
  *r = (unsigned char)on;
  t->rdelta[b] += on ? 1 : -1;
}

lsim_err lsim_timeline_event(void *ud, const lsim_event *ev) {
  lsim_timeline *t = ud;
  /* Every event's tick moves the buckets in use (and may coarsen them);
  ** a tick before the edge moves nothing, and then only the kinds below
  ** need their bucket, most often the last one found again: two 64-bit
  ** divisions per event were most of this sink's time. */
  int b;
  lsim_tick tick = ev->tick < 0 ? 0 : ev->tick;
  if (tick >= t->edge)
    b = lsim__bucket(t, tick);
  else if (ev->kind == LSIM_EV_QUEUE_ENQUEUED ||
           ev->kind == LSIM_EV_COMPLETED_SERVICE_DEBITED ||
           ev->kind == LSIM_EV_ADAPTER_LOAD_STARTED ||
           ev->kind == LSIM_EV_ADAPTER_GENERATION_PUBLISHED ||
           ev->kind == LSIM_EV_ADAPTER_RETIRED ||
           ev->kind == LSIM_EV_ADAPTER_LOAD_FAILED)
    b = tick >= t->lo && tick < t->hi ? t->last : lsim__bucket(t, tick);
  else
    return 0;
  switch (ev->kind) {
  case LSIM_EV_QUEUE_ENQUEUED:
    if (ev->tenant >= 0 && ev->tenant < t->ntenants && !t->seen[ev->tenant]) {
      t->seen[ev->tenant] = 1;
      t->seen_from[ev->tenant] = b;
    }
    break;
  case LSIM_EV_COMPLETED_SERVICE_DEBITED:
    if (ev->tenant >= 0 && ev->tenant < t->ntenants)
      t->svc[(size_t)b * t->ntenants + ev->tenant] += ev->value;
    break;
  case LSIM_EV_ADAPTER_LOAD_STARTED:
    t->loads[b]++;
    break;
  case LSIM_EV_ADAPTER_GENERATION_PUBLISHED:
    lsim__resident(t, b, ev->worker, ev->adapter, 1);
    break;
  case LSIM_EV_ADAPTER_RETIRED:
    lsim__resident(t, b, ev->worker, ev->adapter, 0);
    break;
  case LSIM_EV_ADAPTER_LOAD_FAILED:
    /* a compensating reload that failed leaves its victim absent */
    if (ev->detail && strcmp(ev->detail, "restore_failed") == 0)
      lsim__resident(t, b, ev->worker, ev->adapter, 0);
    break;
  default:
    break;
  }
  return 0;
}

int lsim_timeline_write(const lsim_timeline *t, FILE *f, lsim_tick end_tick,
                        int64_t ns_per_tick) {
  int n = t->ntenants;
  int64_t *cum = calloc((size_t)n, sizeof *cum);
  if (!cum)
    return LSIM_E_NOMEM;
  int64_t resident = 0;
  double tick_s = (double)ns_per_tick * 1e-9;
  for (int b = 0; b < t->nb; b++) {
    lsim_tick lo = (lsim_tick)b * t->width, hi = lo + t->width;
    if (hi > end_tick && end_tick > lo)
      hi = end_tick;
    int64_t mx = 0, mn = 0;
    int any = 0;
    for (int k = 0; k < n; k++) {
      cum[k] += t->svc[(size_t)b * n + k];
      if (!t->seen[k] || t->seen_from[k] > b)
        continue;
      if (!any || cum[k] > mx)
        mx = cum[k];
      if (!any || cum[k] < mn)
        mn = cum[k];
      any = 1;
    }
    resident += t->rdelta[b];
    fprintf(f, "%.6f", (double)hi * tick_s);
    for (int k = 0; k < n; k++)
      fprintf(f, " %lld", (long long)cum[k]);
    fprintf(f, " %lld %lld %.3f\n", (long long)(mx - mn), (long long)resident,
            (double)t->loads[b] / ((double)(hi - lo) * tick_s));
  }
  fputs("\n\n", f);
  free(cum);
  return ferror(f) ? LSIM_E_IO : 0;
}
