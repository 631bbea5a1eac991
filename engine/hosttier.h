/*
** hosttier.h: one worker's host-memory tier of adapters (vLLM's
** max_cpu_loras; docs/RESIDENCY.md, "Host tier").
**
** The tier is an index of at most `cap` residency objects (adapters, and
** bases of a compressed collection) whose bytes sit in host memory, kept
** in least-recently-touched order.  The engine touches an object when a
** load of it starts (hit or miss) and when a launch names it; a load of an
** object the tier does not hold reads it from disk first and inserts it,
** dropping the least recently touched object when the tier is full.  The
** order is a doubly linked list over object ids, so every operation is
** O(1) and depends only on the call sequence (no clock, no hashing).
**
** Dropping an object whose host-to-device copy is still in flight is
** allowed: that copy keeps its own buffer until it completes (the world
** times it), the next load of the object misses.  Device residency is not
** tied to the tier either: an adapter may stay on the device after the
** tier dropped it (vLLM keeps GPU slots a subset of its CPU cache; see
** docs/RESIDENCY.md for where lorasim differs).
**
** Caller-owned struct: lsim_host_init / lsim_host_release; LSIM_HOST_INIT
** is the empty (off) tier, on which every query answers "not held".
*/
#ifndef LSIM_HOSTTIER_H
#define LSIM_HOSTTIER_H

#include "lsim.h"

typedef struct lsim_host_tier {
  int cap;          /* read-only: most objects held; 0: off */
  int n;            /* read-only: objects held */
  int nobj;         /* private */
  int head, tail;   /* private: most / least recently touched, -1: none */
  int *prev, *next; /* private: [nobj] links; prev[o] == -2: not held */
} lsim_host_tier;

#define LSIM_HOST_INIT {0, 0, 0, -1, -1, NULL, NULL}

/* A tier of at most cap (>= 1) of the objects 0..nobj-1, empty. */
lsim_err lsim_host_init(lsim_host_tier *h, int cap, int nobj,
                        lsim_errbuf *eb);
void lsim_host_release(lsim_host_tier *h);

/* 1 when the tier holds object o. */
int lsim_host_has(const lsim_host_tier *h, int o);

/* Object o becomes the most recently touched: held already (returns 1, a
** hit), or inserted (returns 0, a miss: the caller reads it from disk).
** An insertion into a full tier first drops the least recently touched
** object into *dropped; otherwise *dropped is -1. */
int lsim_host_touch(lsim_host_tier *h, int o, int *dropped);

/* A held object becomes the most recently touched; nothing else changes
** (a launch naming it).  Not held: no-op. */
void lsim_host_use(lsim_host_tier *h, int o);

/* The held objects from most to least recently touched into out[0..n)
** (at most max); returns how many were written.  For tests and checks. */
int lsim_host_order(const lsim_host_tier *h, int *out, int max);

#endif /* LSIM_HOSTTIER_H */
