/*
** fair.c: liveness ledgers and starvation intervals (see fair.h).
**
** Invariants:
**   F1  cold[w][a] counts waiting requests on w of adapter a counted cold;
**       lstart[w][a] >= 0 exactly when cold[w][a] > 0.
**   F2  tready[u] counts waiting requests of tenant u counted ready, over
**       all workers; sstart[u] >= 0 exactly when tready[u] > 0.  sstart is
**       the later of "became eligible" and "last completed service".
**   F3  an interval is reported only when it is non-empty (end > start).
*/
#include "fair.h"

#include <stdlib.h>

struct lsim_fair {
  int workers, na, nt;
  lsim_sink sink;
  int *cold;            /* [workers * na] */
  lsim_tick *lstart;    /* [workers * na], -1: closed */
  unsigned char *pf;    /* [workers * na] prefetched generation unused */
  int *wready;          /* [workers] */
  int *tready;          /* [nt] */
  lsim_tick *sstart;    /* [nt], -1: closed */
};

lsim_fair *lsim_fair_new(int workers, int na, int nt, const lsim_sink *sink) {
  lsim_fair *f = calloc(1, sizeof *f);
  if (!f)
    return NULL;
  size_t n = (size_t)workers * (size_t)na;
  f->workers = workers;
  f->na = na;
  f->nt = nt;
  f->sink = *sink;
  f->cold = calloc(n, sizeof *f->cold);
  f->lstart = malloc(n * sizeof *f->lstart);
  f->pf = calloc(n, 1);
  f->wready = calloc((size_t)workers, sizeof *f->wready);
  f->tready = calloc((size_t)nt, sizeof *f->tready);
  f->sstart = malloc((size_t)nt * sizeof *f->sstart);
  if (!f->cold || !f->lstart || !f->pf || !f->wready || !f->tready ||
      !f->sstart) {
    lsim_fair_release(f);
    return NULL;
  }
  for (size_t i = 0; i < n; i++)
    f->lstart[i] = -1;
  for (int t = 0; t < nt; t++)
    f->sstart[t] = -1;
  return f;
}

void lsim_fair_release(lsim_fair *f) {
  if (!f)
    return;
  free(f->cold);
  free(f->lstart);
  free(f->pf);
  free(f->wready);
  free(f->tready);
  free(f->sstart);
  free(f);
}

static lsim_err lsim__report(lsim_fair *f, const char *kind, int w, int ent,
                             lsim_tick start, lsim_tick end, const char *by) {
  if (end <= start || !f->sink.interval)
    return 0;
  lsim_interval iv = {kind, w, ent, start, end, by};
  return f->sink.interval(f->sink.ud, &iv);
}

static lsim_err lsim__tready_add(lsim_fair *f, lsim_tick now, int t, int d) {
  if (t < 0 || t >= f->nt)
    return 0;
  int before = f->tready[t];
  f->tready[t] += d;
  if (before == 0 && f->tready[t] > 0)
    f->sstart[t] = now;
  if (before > 0 && f->tready[t] == 0) {
    lsim_tick s = f->sstart[t];
    f->sstart[t] = -1;
    return lsim__report(f, "service", LSIM_NONE, t, s, now, "drained");
  }
  return 0;
}

static lsim_err lsim__cold_add(lsim_fair *f, lsim_tick now, int w, int a,
                               int d) {
  size_t k = (size_t)w * (size_t)f->na + (size_t)a;
  int before = f->cold[k];
  f->cold[k] += d;
  if (f->cold[k] < 0)
    f->cold[k] = 0;
  if (before == 0 && f->cold[k] > 0)
    f->lstart[k] = now;
  if (before > 0 && f->cold[k] == 0) {
    lsim_tick s = f->lstart[k];
    f->lstart[k] = -1;
    return lsim__report(f, "load", w, a, s, now, "drained");
  }
  return 0;
}

lsim_err lsim_fair_enqueue(lsim_fair *f, lsim_tick now, int w, int tenant,
                           int adapter, int ready) {
  if (ready) {
    f->wready[w]++;
    return lsim__tready_add(f, now, tenant, +1);
  }
  return lsim__cold_add(f, now, w, adapter, +1);
}

lsim_err lsim_fair_leave(lsim_fair *f, lsim_tick now, int w, int tenant,
                         int adapter, int was_ready) {
  if (was_ready) {
    f->wready[w]--;
    return lsim__tready_add(f, now, tenant, -1);
  }
  return lsim__cold_add(f, now, w, adapter, -1);
}

lsim_err lsim_fair_published(lsim_fair *f, lsim_tick now, int w, int a) {
  size_t k = (size_t)w * (size_t)f->na + (size_t)a;
  if (f->cold[k] == 0)
    return 0;
  lsim_tick s = f->lstart[k];
  f->cold[k] = 0;
  f->lstart[k] = -1;
  return lsim__report(f, "load", w, a, s, now, "published");
}

lsim_err lsim_fair_became_ready(lsim_fair *f, lsim_tick now, int w,
                                int tenant) {
  f->wready[w]++;
  return lsim__tready_add(f, now, tenant, +1);
}

lsim_err lsim_fair_became_cold(lsim_fair *f, lsim_tick now, int w, int tenant,
                               int adapter) {
  f->wready[w]--;
  lsim_err rc = lsim__tready_add(f, now, tenant, -1);
  return rc ? rc : lsim__cold_add(f, now, w, adapter, +1);
}

lsim_err lsim_fair_debit(lsim_fair *f, lsim_tick now, int t) {
  if (t < 0 || t >= f->nt || f->tready[t] == 0)
    return 0;
  lsim_tick s = f->sstart[t];
  f->sstart[t] = now;
  return lsim__report(f, "service", LSIM_NONE, t, s, now, "served");
}

lsim_err lsim_fair_finish(lsim_fair *f, lsim_tick now) {
  for (int w = 0; w < f->workers; w++)
    for (int a = 0; a < f->na; a++) {
      size_t k = (size_t)w * (size_t)f->na + (size_t)a;
      if (f->cold[k] > 0) {
        lsim_err rc = lsim__report(f, "load", w, a, f->lstart[k], now, "open");
        if (rc)
          return rc;
        f->cold[k] = 0;
        f->lstart[k] = -1;
      }
    }
  for (int t = 0; t < f->nt; t++)
    if (f->tready[t] > 0) {
      lsim_err rc =
          lsim__report(f, "service", LSIM_NONE, t, f->sstart[t], now, "open");
      if (rc)
        return rc;
      f->tready[t] = 0;
      f->sstart[t] = -1;
    }
  return 0;
}

int lsim_fair_ready_waiting(const lsim_fair *f, int w) { return f->wready[w]; }

int lsim_fair_cold(const lsim_fair *f, int w, int a) {
  return f->cold[(size_t)w * (size_t)f->na + (size_t)a];
}

void lsim_fair_prefetched(lsim_fair *f, int w, int a) {
  f->pf[(size_t)w * (size_t)f->na + (size_t)a] = 1;
}

int lsim_fair_prefetch_used(lsim_fair *f, int w, int a) {
  unsigned char *p = &f->pf[(size_t)w * (size_t)f->na + (size_t)a];
  int was = *p;
  *p = 0;
  return was;
}

int lsim_fair_prefetch_wasted(lsim_fair *f, int w, int a) {
  return lsim_fair_prefetch_used(f, w, a);
}
