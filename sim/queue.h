/*
** queue.h: the simulator's event queue, a binary min-heap with a total
** order.
**
** Events are ordered by (tick, cls, seq).  `cls` ranks what happens
** first within one tick (the replay's classes are the LSIM__Q_* enum at the
** top of replay.c: copy completions 0, iteration completions 1, arrivals
** and the other facts of the world 2, decision steps 3); `seq` is a counter
** the queue assigns at push time, so two events equal in tick and class
** leave in the order they were pushed (libuv's timer start_id).  The order
** therefore never depends on heap layout, pointer values or payload: kind,
** worker, a and b are carried, never compared.
*/
#ifndef LSIM_QUEUE_H
#define LSIM_QUEUE_H

#include "../engine/lsim.h"

typedef struct lsim_qev {
  lsim_tick tick;
  int cls;     /* lower runs first within a tick */
  uint64_t seq; /* assigned by lsim_queue_push; ignored on input */
  int kind;    /* caller-defined payload (the replay: what to do, which
                  is not always cls: a cancel is a class-2 fact) */
  int worker;
  int64_t a, b; /* caller-defined payload */
} lsim_qev;

/* All fields private; start from LSIM_QUEUE_INIT (an empty queue, no
** memory).  The heap array grows by doubling from 256 events. */
typedef struct lsim_queue {
  lsim_qev *h;
  size_t n, cap;
  uint64_t next_seq; /* the seq the next push assigns */
} lsim_queue;

#define LSIM_QUEUE_INIT {NULL, 0, 0, 0}

/* Push a copy of *ev whose seq is the queue's next (*ev itself is not
** changed).  LSIM_E_NOMEM when the heap cannot grow; the queue is then
** unchanged. */
lsim_err lsim_queue_push(lsim_queue *q, const lsim_qev *ev);
/* Pop the least event into *out; returns 0 when empty (*out untouched),
** 1 otherwise. */
int lsim_queue_pop(lsim_queue *q, lsim_qev *out);
/* The least event without removing it, or NULL when empty; valid until the
** next push, pop or release. */
const lsim_qev *lsim_queue_peek(const lsim_queue *q);
/* The number of queued events. */
size_t lsim_queue_len(const lsim_queue *q);
/* Free the heap and empty the queue; it may be pushed to again (seq keeps
** counting).  Safe twice. */
void lsim_queue_release(lsim_queue *q);

#endif /* LSIM_QUEUE_H */
