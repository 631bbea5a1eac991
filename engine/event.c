/*
** event.c: names of publication event kinds.
*/
#include "event.h"

const char *lsim_event_kind_name(int kind) {
  switch (kind) {
#define LSIM__EVCASE(sym, val, name) \
  case sym:                          \
    return name;
    LSIM_EVENT_KINDS(LSIM__EVCASE)
#undef LSIM__EVCASE
  }
  return NULL;
}
