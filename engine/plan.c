/*
** plan.c: iteration plan storage and ledgers.
*/
#include "plan.h"

#include <stdlib.h>
#include <string.h>

void lsim_plan_reset(lsim_plan *p) {
  p->n = 0;
  p->prefill_rows = p->decode_rows = 0;
  p->prefill_reqs = p->decode_reqs = 0;
  p->distinct_adapters = p->segments = p->max_rank = 0;
  p->true_rank_rows = p->padded_rank_rows = 0;
  p->sampled = p->decode_ctx = p->prefill_pairs = 0;
  p->lora_segments = 0;
}

lsim_err lsim_plan_push(lsim_plan *p, const lsim_plan_entry *e,
                        lsim_errbuf *eb) {
  if (p->n == p->cap) {
    int cap = p->cap ? 2 * p->cap : 64;
    lsim_plan_entry *ne = realloc(p->e, (size_t)cap * sizeof *ne);
    if (!ne)
      return lsim_fail(eb, LSIM_E_NOMEM, "out of memory growing a plan");
    p->e = ne;
    p->cap = cap;
  }
  p->e[p->n++] = *e;
  return 0;
}

static int lsim__cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* Plans of up to this many entries count their distinct adapters in a
** buffer on the stack (an iteration's batch: max_batch_requests is
** usually 64 or less), and sort it by insertion; a malloc and a qsort per
** iteration were a tenth of a compare's CPU. */
#define LSIM__PLAN_SMALL 128

lsim_err lsim_plan_finish(lsim_plan *p, lsim_errbuf *eb) {
  int seen_decode = 0;
  int prev_adapter = -2;
  int small[LSIM__PLAN_SMALL];
  int *ids = small;
  int nids = 0;
  /* the sums in locals, stored once at the end: stores through p inside
  ** the loop could alias the entries, so the compiler kept every one in
  ** memory (finishing plans was 6% of a compare's instructions) */
  int64_t prefill_rows = 0, decode_rows = 0, true_rank_rows = 0;
  int64_t sampled = 0, decode_ctx = 0, prefill_pairs = 0;
  int prefill_reqs = 0, decode_reqs = 0, segments = 0, lora_segments = 0;
  int max_rank = 0;
  const int pos = p->positions;
  const int n = p->n;
  const lsim_plan_entry *es = p->e;
  if (n > LSIM__PLAN_SMALL) {
    ids = malloc((size_t)n * sizeof *ids);
    if (!ids)
      return lsim_fail(eb, LSIM_E_NOMEM, "out of memory finishing a plan");
  }
  /* ids: the adapter of each segment (a run of entries of one adapter),
  ** enough to count the distinct ones */
  int sorted = 1;
  for (int i = 0; i < n; i++) {
    const lsim_plan_entry *e = &es[i];
    int64_t r = e->rows, ctx = pos && e->ctx > 0 ? e->ctx : 0;
    if (e->phase == LSIM_PHASE_DECODE) {
      seen_decode = 1;
      if (r != 1) {
        if (ids != small)
          free(ids);
        return LSIM_BUG(eb, "decode entry with rows != 1");
      }
      decode_rows += r;
      decode_reqs++;
      decode_ctx += ctx + 1;
    } else {
      if (seen_decode || r < 1) {
        if (ids != small)
          free(ids);
        return LSIM_BUG(eb, "prefill entry after decode or with no rows");
      }
      prefill_rows += r;
      prefill_reqs++;
      prefill_pairs += r * ctx + r * (r + 1) / 2;
    }
    sampled += pos ? (e->sample != 0) : 1;
    if (e->adapter != prev_adapter) {
      segments++;
      if (e->adapter >= 0) {
        lora_segments++;
        if (nids > 0 && e->adapter <= ids[nids - 1])
          sorted = 0;
        ids[nids++] = e->adapter;
      }
    }
    prev_adapter = e->adapter;
    if (e->rank > max_rank)
      max_rank = e->rank;
    true_rank_rows += (int64_t)e->rank * r;
  }
  p->prefill_rows = prefill_rows;
  p->decode_rows = decode_rows;
  p->prefill_reqs = prefill_reqs;
  p->decode_reqs = decode_reqs;
  p->segments = segments;
  p->lora_segments = lora_segments;
  p->max_rank = max_rank;
  p->true_rank_rows = true_rank_rows;
  p->sampled = sampled;
  p->decode_ctx = decode_ctx;
  p->prefill_pairs = prefill_pairs;
  p->padded_rank_rows = (prefill_rows + decode_rows) *
                        (p->slot_rank > 0 ? p->slot_rank : max_rank);
  /* Distinct adapters: sort the segments' ids (already increasing when
  ** the batch is grouped by adapter in id order), count runs (no hashing,
  ** no order dependence on anything but the ids). */
  if (!sorted && ids == small) {
    for (int i = 1; i < nids; i++) {
      int v = ids[i], j = i;
      for (; j > 0 && ids[j - 1] > v; j--)
        ids[j] = ids[j - 1];
      ids[j] = v;
    }
  } else if (!sorted) {
    qsort(ids, (size_t)nids, sizeof *ids, lsim__cmp_int);
  }
  p->distinct_adapters = 0;
  for (int i = 0; i < nids; i++)
    if (i == 0 || ids[i] != ids[i - 1])
      p->distinct_adapters++;
  if (ids != small)
    free(ids);
  return 0;
}

lsim_err lsim_plan_name(lsim_plan *p, int i, int64_t g, lsim_errbuf *eb) {
  if (i < 0 || i >= p->n)
    return LSIM_BUG(eb, "plan entry out of range");
  if (p->gen_cap < p->cap) {
    int64_t *ng = realloc(p->gen, (size_t)p->cap * sizeof *ng);
    if (!ng)
      return lsim_fail(eb, LSIM_E_NOMEM, "out of memory naming generations");
    memset(ng + p->gen_cap, 0, (size_t)(p->cap - p->gen_cap) * sizeof *ng);
    p->gen = ng;
    p->gen_cap = p->cap;
  }
  p->gen[i] = g;
  return 0;
}

int64_t lsim_plan_generation(const lsim_plan *p, int i) {
  return p->gen && i >= 0 && i < p->gen_cap ? p->gen[i] : 0;
}

void lsim_plan_release(lsim_plan *p) {
  free(p->gen);
  free(p->e);
  memset(p, 0, sizeof *p);
}
