/*
** fair.h: the liveness ledgers of the engine (article 0x09H): which
** waiting requests are load-eligible (feasible, adapter not ready) and
** which are execution-eligible (ready), per worker and adapter and per
** tenant, and the two starvation predicates over them:
**
**   LoadStarved(a, w, [t1, t2])   adapter a had a load-eligible waiter on
**                                 worker w throughout, and no generation of
**                                 a was published on w;
**   ServiceStarved(u, [t1, t2])   tenant u had an execution-eligible waiter
**                                 throughout, and no completed service.
**
** Each predicate's maximal interval is handed to the sink's interval
** callback when it closes (event.h, lsim_interval).  The two are kept
** apart on purpose: a cold adapter that never becomes ready starves in
** load, not in service.  Also kept here: which published generations came
** from a prefetch and are not yet used (wasted-prefetch accounting).
**
** Every operation is O(1) except lsim_fair_finish (O(workers x adapters +
** tenants), once).  Internal to engine/.
*/
#ifndef LSIM_FAIR_H
#define LSIM_FAIR_H

#include "event.h"

typedef struct lsim_fair lsim_fair;

lsim_fair *lsim_fair_new(int workers, int nadapters, int ntenants,
                         const lsim_sink *sink);
void lsim_fair_release(lsim_fair *f);

/* A waiting request entered (ready: its adapter generation is visible). */
lsim_err lsim_fair_enqueue(lsim_fair *f, lsim_tick now, int w, int tenant,
                           int adapter, int ready);
/* A waiting request left the queue (admitted, cancelled, rejected,
** finished unserved); was_ready: how it was counted. */
lsim_err lsim_fair_leave(lsim_fair *f, lsim_tick now, int w, int tenant,
                         int adapter, int was_ready);
/* A generation of adapter was published on w: closes its load interval
** ("published"); call before lsim_fair_became_ready for its waiters. */
lsim_err lsim_fair_published(lsim_fair *f, lsim_tick now, int w, int adapter);
/* A counted-cold waiter of tenant became ready on w. */
lsim_err lsim_fair_became_ready(lsim_fair *f, lsim_tick now, int w,
                                int tenant);
/* A ready waiter became cold again (its adapter was evicted under it). */
lsim_err lsim_fair_became_cold(lsim_fair *f, lsim_tick now, int w, int tenant,
                               int adapter);
/* Completed service was debited to tenant. */
lsim_err lsim_fair_debit(lsim_fair *f, lsim_tick now, int tenant);
/* Close every open interval with "open". */
lsim_err lsim_fair_finish(lsim_fair *f, lsim_tick now);

/* Waiting requests of adapter a on w counted cold. */
int lsim_fair_cold(const lsim_fair *f, int w, int adapter);
/* Ready waiting requests on worker w. */
int lsim_fair_ready_waiting(const lsim_fair *f, int w);

/* Prefetch bookkeeping: a prefetched generation was published; the
** adapter was bound by a request (returns 1 once, when that generation was
** a prefetched one not yet used); the adapter was evicted (returns 1 when
** its prefetched generation was never used: wasted). */
void lsim_fair_prefetched(lsim_fair *f, int w, int adapter);
int lsim_fair_prefetch_used(lsim_fair *f, int w, int adapter);
int lsim_fair_prefetch_wasted(lsim_fair *f, int w, int adapter);

#endif /* LSIM_FAIR_H */
