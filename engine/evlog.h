/*
** evlog.h: the event log, the one owner of the event sequence.
**
** An lsim_evlog numbers publication events and hands them to the sink
** (event.h).  The engine owns one (lsim_engine_evlog) and emits its state
** changes through it; the world that drives the engine (sim/replay.c) writes
** the events it decides itself, such as the faults it injects, to the same
** log.  Because both go through lsim_evlog_emit, `seq` stays one strictly
** increasing counter across every writer, in emission order.
**
** The log holds no memory of its own: lsim_evlog_init fills a caller-owned
** struct and there is nothing to release.  The sink is copied; its ud is
** borrowed and must outlive the log.
*/
#ifndef LSIM_EVLOG_H
#define LSIM_EVLOG_H

#include "event.h"

typedef struct lsim_evlog {
  int64_t next_seq; /* read-only: seq of the next event */
  lsim_sink sink;   /* private */
} lsim_evlog;

/* Start an empty log writing to sink (NULL or a sink without an event
** callback: events are numbered and dropped). */
void lsim_evlog_init(lsim_evlog *log, const lsim_sink *sink);

/*
** Number *ev (its seq field is overwritten with the next seq) and hand it to
** the sink's event callback.  The seq is consumed even when no callback is
** set.  A callback error is returned with a message naming the kind and seq.
*/
lsim_err lsim_evlog_emit(lsim_evlog *log, lsim_event *ev, lsim_errbuf *eb);

#endif /* LSIM_EVLOG_H */
