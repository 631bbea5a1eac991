/*
** registry.c: policy tables by name, and the NULL-checking wrappers.
** Adding a policy: write its table in its own file and list it here.
*/
#include "policy.h"

#include <string.h>

extern const lsim_sched_ops lsim_sched_fcfs;
extern const lsim_evict_ops lsim_evict_lru;
extern const lsim_evict_ops lsim_evict_lfu;
extern const lsim_evict_ops lsim_evict_size;
extern const lsim_evict_ops lsim_evict_gdsf;
extern const lsim_evict_ops lsim_evict_belady;
extern const lsim_prefetch_ops lsim_prefetch_none;

static const lsim_sched_ops *const lsim__scheds[] = {&lsim_sched_fcfs};
static const lsim_evict_ops *const lsim__evicts[] = {
    &lsim_evict_lru, &lsim_evict_lfu, &lsim_evict_size, &lsim_evict_gdsf,
    &lsim_evict_belady};
static const lsim_prefetch_ops *const lsim__prefetches[] = {
    &lsim_prefetch_none};

#define LSIM__COUNT(a) (sizeof(a) / sizeof((a)[0]))

#define LSIM__FIND(type, table, name)                  \
  do {                                                 \
    if (!(name))                                       \
      return NULL;                                     \
    for (size_t i = 0; i < LSIM__COUNT(table); i++)    \
      if (strcmp(table[i]->name, (name)) == 0)         \
        return table[i];                               \
    return NULL;                                       \
  } while (0)

const lsim_sched_ops *lsim_sched_find(const char *name) {
  LSIM__FIND(lsim_sched_ops, lsim__scheds, name);
}
const lsim_evict_ops *lsim_evict_find(const char *name) {
  LSIM__FIND(lsim_evict_ops, lsim__evicts, name);
}
const lsim_prefetch_ops *lsim_prefetch_find(const char *name) {
  LSIM__FIND(lsim_prefetch_ops, lsim__prefetches, name);
}

const char *const *lsim_sched_names(void) {
  static const char *names[LSIM__COUNT(lsim__scheds) + 1];
  for (size_t i = 0; i < LSIM__COUNT(lsim__scheds); i++)
    names[i] = lsim__scheds[i]->name;
  return names;
}
const char *const *lsim_evict_names(void) {
  static const char *names[LSIM__COUNT(lsim__evicts) + 1];
  for (size_t i = 0; i < LSIM__COUNT(lsim__evicts); i++)
    names[i] = lsim__evicts[i]->name;
  return names;
}
const char *const *lsim_prefetch_names(void) {
  static const char *names[LSIM__COUNT(lsim__prefetches) + 1];
  for (size_t i = 0; i < LSIM__COUNT(lsim__prefetches); i++)
    names[i] = lsim__prefetches[i]->name;
  return names;
}

lsim_err lsim_sched_init(const lsim_sched_ops *o, void *st, int ntenants,
                         int nadapters) {
  return o->init ? o->init(st, ntenants, nadapters) : 0;
}
void lsim_sched_order(const lsim_sched_ops *o, void *st, lsim_tick now,
                      const lsim_sched_cand *c, int n, int *order) {
  o->order(st, now, c, n, order);
}
void lsim_sched_on_service(const lsim_sched_ops *o, void *st, int tenant,
                           int adapter, int64_t units) {
  if (o->on_service)
    o->on_service(st, tenant, adapter, units);
}
lsim_err lsim_evict_init(const lsim_evict_ops *o, void *st, int nadapters) {
  return o->init ? o->init(st, nadapters) : 0;
}
int lsim_evict_pick(const lsim_evict_ops *o, void *st, lsim_tick now,
                    const lsim_evict_cand *c, int n) {
  return o->pick(st, now, c, n);
}
size_t lsim_evict_state_bytes(const lsim_evict_ops *o, int nadapters) {
  return o->state_bytes ? o->state_bytes(nadapters) : o->state_size;
}
void lsim_evict_on_use(const lsim_evict_ops *o, void *st, int adapter,
                       lsim_tick now, int64_t pages, int64_t load_cost) {
  if (o->on_use)
    o->on_use(st, adapter, now, pages, load_cost);
}
lsim_err lsim_prefetch_init(const lsim_prefetch_ops *o, void *st,
                            int nadapters) {
  return o->init ? o->init(st, nadapters) : 0;
}
int lsim_prefetch_propose(const lsim_prefetch_ops *o, void *st, int worker,
                          lsim_tick now, int *out, int max) {
  return o->propose ? o->propose(st, worker, now, out, max) : 0;
}
