/*
** ledger.h: the event-log audit.  Every figure lorasim reports is derived
** from the publication events of event.h; this module replays those
** events (and the request records) of one run and checks that they obey
** the contracts they publish (docs/SCHEMA.md "Event kinds",
** docs/RELIABILITY.md "Event-log audit"):
**
**   order       seq strictly increasing, tick non-decreasing, known kinds,
**               non-negative quantities, details from each kind's list
**   requests    one enqueue per id; a request event names the tenant and
**               adapter it was enqueued with; nothing after it closed
**               (finished, cancelled, rejected) but its KV/lease release
**   service     a completed_service_debited belongs to the iteration its
**               worker just completed with "ok", at that tick, for a
**               request holding an admission, and the debits of one
**               iteration never exceed its completed rows (no phantom
**               service); a failed iteration completes 0 rows
**   readiness   a request is admitted (kv_reserved) only under the
**               generation currently published and visible on its worker
**   recovery    load attempts count 1, 2, ... within a load sequence;
**               copy-complete, validation and publication follow the open
**               load of that (worker, adapter) in that order; generations
**               advance by one; a rollback returns exactly the pages of
**               the failed attempt; the record's arrival is the enqueue
**               tick (a load never resets the queue clock)
**   lifecycle   a lease is released with the handle it was bound with;
**               hotswap validation and publication follow staging; the
**               catalog generation only grows; a retiring slot is
**               reclaimed only when no live lease names it, under bumped
**               generations
**
** Feed the events in log order with lsim_ledger_event, then the request
** records (any order) with lsim_ledger_record, then lsim_ledger_end.  The
** first violation is returned (LSIM_E_LOG_*, err_log.h) with a message
** naming the event's seq or the request id; the ledger is then spent.
** Pure: no I/O, no clock.
*/
#ifndef LSIM_LEDGER_H
#define LSIM_LEDGER_H

#include "event.h"
#include "lsim.h"

typedef struct lsim_ledger lsim_ledger;

typedef struct lsim_ledger_cfg {
  int workers;           /* bounds the worker field, >= 1 */
  int nadapters;         /* bounds the adapter field, >= 0 */
  int max_load_attempts; /* a load sequence restarts at attempt 1 only after
                            publication or after this many failures; 0:
                            unknown (after any failure) */
} lsim_ledger_cfg;

lsim_err lsim_ledger_new(lsim_ledger **out, const lsim_ledger_cfg *cfg,
                         lsim_errbuf *eb);
void lsim_ledger_release(lsim_ledger *l);

lsim_err lsim_ledger_event(lsim_ledger *l, const lsim_event *ev,
                           lsim_errbuf *eb);
lsim_err lsim_ledger_record(lsim_ledger *l, const lsim_request_record *rec,
                            lsim_errbuf *eb);
/* End of the log: when any record was given, every request the log names
** must have had one. */
lsim_err lsim_ledger_end(lsim_ledger *l, lsim_errbuf *eb);

/* Counters of what was checked. */
typedef struct lsim_ledger_stats {
  int64_t events, requests, records, iterations, debits, loads, failures,
      rollbacks, leases, hotswaps;
} lsim_ledger_stats;
void lsim_ledger_stats_get(const lsim_ledger *l, lsim_ledger_stats *out);

#endif /* LSIM_LEDGER_H */
