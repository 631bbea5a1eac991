/*
** queue.c: binary min-heap of lsim_qev keyed by (tick, cls, seq).
**
** Invariant: for every i > 0, key(h[(i-1)/2]) < key(h[i]).  Keys are unique
** because seq is, so the pop order is a total order.
*/
#include "queue.h"

#include <stdlib.h>

static int lsim__less(const lsim_qev *x, const lsim_qev *y) {
  if (x->tick != y->tick)
    return x->tick < y->tick;
  if (x->cls != y->cls)
    return x->cls < y->cls;
  return x->seq < y->seq;
}

lsim_err lsim_queue_push(lsim_queue *q, const lsim_qev *ev) {
  if (q->n == q->cap) {
    size_t cap = q->cap ? 2 * q->cap : 256;
    lsim_qev *nh = realloc(q->h, cap * sizeof *nh);
    if (!nh)
      return LSIM_E_NOMEM;
    q->h = nh;
    q->cap = cap;
  }
  lsim_qev e = *ev;
  e.seq = q->next_seq++;
  size_t i = q->n++;
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!lsim__less(&e, &q->h[parent]))
      break;
    q->h[i] = q->h[parent];
    i = parent;
  }
  q->h[i] = e;
  return 0;
}

int lsim_queue_pop(lsim_queue *q, lsim_qev *out) {
  if (q->n == 0)
    return 0;
  *out = q->h[0];
  lsim_qev last = q->h[--q->n];
  size_t i = 0, n = q->n;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= n)
      break;
    if (c + 1 < n && lsim__less(&q->h[c + 1], &q->h[c]))
      c++;
    if (!lsim__less(&q->h[c], &last))
      break;
    q->h[i] = q->h[c];
    i = c;
  }
  if (n > 0)
    q->h[i] = last;
  return 1;
}

const lsim_qev *lsim_queue_peek(const lsim_queue *q) {
  return q->n ? &q->h[0] : NULL;
}

size_t lsim_queue_len(const lsim_queue *q) { return q->n; }

void lsim_queue_release(lsim_queue *q) {
  free(q->h);
  q->h = NULL;
  q->n = q->cap = 0;
}
