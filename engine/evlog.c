/*
** evlog.c: the event log (evlog.h).
*/
#include "evlog.h"

#include <string.h>

void lsim_evlog_init(lsim_evlog *log, const lsim_sink *sink) {
  memset(log, 0, sizeof *log);
  if (sink)
    log->sink = *sink;
}

lsim_err lsim_evlog_emit(lsim_evlog *log, lsim_event *ev, lsim_errbuf *eb) {
  ev->seq = log->next_seq++;
  if (!log->sink.event)
    return 0;
  lsim_err rc = log->sink.event(log->sink.ud, ev);
  if (rc)
    return lsim_fail(eb, rc, "event sink failed on %s (seq %lld)",
                     lsim_event_kind_name(ev->kind), (long long)ev->seq);
  return 0;
}
