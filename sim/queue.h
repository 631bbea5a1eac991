/*
** queue.h: the simulator's event queue, a binary min-heap with a total
** order.
**
** Events are ordered by (tick, class, seq).  `class` ranks what happens
** first within one tick (see enum lsim_ev_class in replay.c); `seq` is a
** counter the queue assigns at push time, so two events equal in tick and
** class leave in the order they were pushed (libuv's timer start_id).  The
** order therefore never depends on heap layout, pointer values or payload.
*/
#ifndef LSIM_QUEUE_H
#define LSIM_QUEUE_H

#include "../engine/lsim.h"

typedef struct lsim_qev {
  lsim_tick tick;
  int cls;     /* lower runs first within a tick */
  uint64_t seq; /* assigned by lsim_queue_push */
  int kind;    /* caller-defined payload */
  int worker;
  int64_t a, b; /* caller-defined payload */
} lsim_qev;

typedef struct lsim_queue {
  lsim_qev *h; /* private */
  size_t n, cap;
  uint64_t next_seq;
} lsim_queue;

#define LSIM_QUEUE_INIT {NULL, 0, 0, 0}

/* Push a copy of *ev (its seq is overwritten).  LSIM_E_NOMEM on failure. */
lsim_err lsim_queue_push(lsim_queue *q, const lsim_qev *ev);
/* Pop the least event into *out; returns 0 when empty, 1 otherwise. */
int lsim_queue_pop(lsim_queue *q, lsim_qev *out);
/* The least event without removing it, or NULL when empty. */
const lsim_qev *lsim_queue_peek(const lsim_queue *q);
size_t lsim_queue_len(const lsim_queue *q);
void lsim_queue_release(lsim_queue *q);

#endif /* LSIM_QUEUE_H */
