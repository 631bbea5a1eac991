/*
** hosttier.c: the host-memory tier of one worker (hosttier.h), an LRU
** list over object ids.
**
** Invariant: the held objects form one list head .. tail through next[]
** (prev[] mirrors it), n of them, n <= cap; prev[o] == -2 exactly for the
** objects not held.
*/
#include "hosttier.h"

#include <stdlib.h>

#define LSIM__OUT (-2) /* prev[o] of an object the tier does not hold */

lsim_err lsim_host_init(lsim_host_tier *h, int cap, int nobj,
                        lsim_errbuf *eb) {
  *h = (lsim_host_tier)LSIM_HOST_INIT;
  if (cap < 1 || nobj < 1)
    return lsim_fail(eb, LSIM_E_USAGE, "host tier of %d objects out of %d",
                     cap, nobj);
  h->prev = malloc((size_t)nobj * sizeof *h->prev);
  h->next = malloc((size_t)nobj * sizeof *h->next);
  if (!h->prev || !h->next) {
    lsim_host_release(h);
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory creating a host tier");
  }
  for (int o = 0; o < nobj; o++)
    h->prev[o] = h->next[o] = LSIM__OUT;
  h->cap = cap;
  h->nobj = nobj;
  return 0;
}

void lsim_host_release(lsim_host_tier *h) {
  free(h->prev);
  free(h->next);
  *h = (lsim_host_tier)LSIM_HOST_INIT;
}

int lsim_host_has(const lsim_host_tier *h, int o) {
  return h->cap > 0 && o >= 0 && o < h->nobj && h->prev[o] != LSIM__OUT;
}

static void lsim__unlink(lsim_host_tier *h, int o) {
  int p = h->prev[o], n = h->next[o];
  if (p >= 0)
    h->next[p] = n;
  else
    h->head = n;
  if (n >= 0)
    h->prev[n] = p;
  else
    h->tail = p;
  h->prev[o] = h->next[o] = LSIM__OUT;
  h->n--;
}

static void lsim__push_front(lsim_host_tier *h, int o) {
  h->prev[o] = -1;
  h->next[o] = h->head;
  if (h->head >= 0)
    h->prev[h->head] = o;
  else
    h->tail = o;
  h->head = o;
  h->n++;
}

void lsim_host_use(lsim_host_tier *h, int o) {
  if (!lsim_host_has(h, o) || h->head == o)
    return;
  lsim__unlink(h, o);
  lsim__push_front(h, o);
}

int lsim_host_touch(lsim_host_tier *h, int o, int *dropped) {
  *dropped = -1;
  if (h->cap < 1 || o < 0 || o >= h->nobj)
    return 0;
  if (lsim_host_has(h, o)) {
    lsim_host_use(h, o);
    return 1;
  }
  if (h->n >= h->cap) {
    *dropped = h->tail;
    lsim__unlink(h, h->tail);
  }
  lsim__push_front(h, o);
  return 0;
}

int lsim_host_order(const lsim_host_tier *h, int *out, int max) {
  int k = 0;
  for (int o = h->cap > 0 ? h->head : -1; o >= 0 && k < max; o = h->next[o])
    out[k++] = o;
  return k;
}
