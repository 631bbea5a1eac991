/*
** registry.c: policy tables by name, and the NULL-checking wrappers.
** Adding a policy: write its table in its own file and add its X() line
** below (docs/ARCHITECTURE.md, "Adding things").
*/
#include "policy.h"

#include <string.h>

/*
** The registries, one X() line per policy: X(kind, table) names the table
** `lsim_<kind>_<table>` its own file defines; the policy's name is the
** table's .name, written there only.  The order is the order of the names
** lists (help texts, error messages); for placement it is also the
** scenario's placement index (engine.h, enum lsim_placement): the default
** first.  CMake builds every .c file of engine/policy.
*/
#define LSIM__SCHEDS(X)                                                       \
  X(sched, fcfs)                                                              \
  X(sched, resident_greedy)                                                   \
  X(sched, slora_cluster)                                                     \
  X(sched, deficit_aging)                                                     \
  X(sched, vtc)
#define LSIM__EVICTS(X)                                                       \
  X(evict, lru)                                                               \
  X(evict, lfu)                                                               \
  X(evict, size)                                                              \
  X(evict, gdsf)                                                              \
  X(evict, belady)
#define LSIM__PREFETCHES(X)                                                   \
  X(prefetch, none)                                                           \
  X(prefetch, queue_lookahead)                                                \
  X(prefetch, age_triggered)
#define LSIM__PLACES(X)                                                       \
  X(place, least_loaded)                                                      \
  X(place, round_robin)                                                       \
  X(place, punica_consolidate)                                                \
  X(place, adapter_affinity)

#define LSIM__DECLARE(kind, table)                                            \
  extern const lsim_##kind##_ops lsim_##kind##_##table;
#define LSIM__ENTRY(kind, table) &lsim_##kind##_##table,
LSIM__SCHEDS(LSIM__DECLARE)
LSIM__EVICTS(LSIM__DECLARE)
LSIM__PREFETCHES(LSIM__DECLARE)
LSIM__PLACES(LSIM__DECLARE)

static const lsim_sched_ops *const lsim__scheds[] = {LSIM__SCHEDS(LSIM__ENTRY)};
static const lsim_evict_ops *const lsim__evicts[] = {LSIM__EVICTS(LSIM__ENTRY)};
static const lsim_prefetch_ops *const lsim__prefetches[] = {
    LSIM__PREFETCHES(LSIM__ENTRY)};
static const lsim_place_ops *const lsim__places[] = {LSIM__PLACES(LSIM__ENTRY)};

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

const lsim_place_ops *lsim_place_find(const char *name) {
  LSIM__FIND(lsim_place_ops, lsim__places, name);
}
const lsim_place_ops *lsim_place_at(int index) {
  return index >= 0 && (size_t)index < LSIM__COUNT(lsim__places)
             ? lsim__places[index]
             : NULL;
}
const char *const *lsim_place_names(void) {
  static const char *names[LSIM__COUNT(lsim__places) + 1];
  for (size_t i = 0; i < LSIM__COUNT(lsim__places); i++)
    names[i] = lsim__places[i]->name;
  return names;
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

lsim_err lsim_sched_init(const lsim_sched_ops *o, void *st,
                         const lsim_sched_params *p) {
  return o->init ? o->init(st, p) : 0;
}
size_t lsim_sched_state_bytes(const lsim_sched_ops *o,
                              const lsim_sched_params *p) {
  return o->state_bytes ? o->state_bytes(p) : o->state_size;
}
void lsim_sched_order(const lsim_sched_ops *o, void *st, lsim_tick now,
                      const lsim_sched_cand *c, int n, int *order) {
  o->order(st, now, c, n, order);
}
void lsim_sched_on_service(const lsim_sched_ops *o, void *st, int tenant,
                           int adapter, int64_t in_tokens, int64_t out_tokens) {
  if (o->on_service)
    o->on_service(st, tenant, adapter, in_tokens, out_tokens);
}
int lsim_sched_load_ok(const lsim_sched_ops *o, void *st, lsim_tick now,
                       const lsim_sched_cand *cold, int ready_work) {
  return o->load_ok ? o->load_ok(st, now, cold, ready_work) : 1;
}
void lsim_sched_on_backlog(const lsim_sched_ops *o, void *st, int tenant,
                           int delta) {
  if (o->on_backlog)
    o->on_backlog(st, tenant, delta);
}
int lsim_adapter_cost_cmp(const lsim_adapter_cost *a,
                          const lsim_adapter_cost *b) {
  const int64_t x[9] = {a->load_bytes,    a->basis_bytes, a->added_runs,
                        a->true_rank,     a->padded_rank, a->adapter_pages,
                        a->kv_pages,      a->collective_bytes, a->affinity};
  const int64_t y[9] = {b->load_bytes,    b->basis_bytes, b->added_runs,
                        b->true_rank,     b->padded_rank, b->adapter_pages,
                        b->kv_pages,      b->collective_bytes, b->affinity};
  for (int i = 0; i < 9; i++)
    if (x[i] != y[i])
      return x[i] < y[i] ? -1 : 1;
  return 0;
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
                            int nadapters, int64_t age_ticks) {
  return o->init ? o->init(st, nadapters, age_ticks) : 0;
}
int lsim_prefetch_propose(const lsim_prefetch_ops *o, void *st, lsim_tick now,
                          const lsim_prefetch_view *v, int *out, int max) {
  return o->propose ? o->propose(st, now, v, out, max) : 0;
}

void lsim_policy_sort(int *order, int n,
                      int (*cmp)(const void *ctx, int i, int j),
                      const void *ctx) {
  int tmp[LSIM_POLICY_SORT_MAX];
  if (n > LSIM_POLICY_SORT_MAX)
    n = LSIM_POLICY_SORT_MAX; /* the engine never shows more */
  for (int width = 1; width < n; width *= 2) {
    for (int lo = 0; lo < n; lo += 2 * width) {
      int mid = lo + width < n ? lo + width : n;
      int hi = lo + 2 * width < n ? lo + 2 * width : n;
      int i = lo, j = mid, k = lo;
      while (i < mid && j < hi)
        tmp[k++] = cmp(ctx, order[j], order[i]) < 0 ? order[j++] : order[i++];
      while (i < mid)
        tmp[k++] = order[i++];
      while (j < hi)
        tmp[k++] = order[j++];
    }
    memcpy(order, tmp, (size_t)n * sizeof *order);
  }
}

int lsim_place_pick(const lsim_place_ops *o, void *st,
                    const lsim_place_view *v, const lsim_place_req *r) {
  return o->place(st, v, r);
}
