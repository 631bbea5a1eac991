/*
** metrics.c: the metrics registry (report.h), a sink fed by publication
** events; the summary of report.c reads it at the end of a run.
*/
#include "report.h"

#include <stdlib.h>
#include <string.h>

/* ---- registry: moves only on publication events ------------------------- */

lsim_err lsim_metrics_init(lsim_metrics *m, int ntenants) {
  memset(m, 0, sizeof *m);
  m->ntenants = ntenants;
  m->tenant_service = calloc((size_t)ntenants, sizeof(int64_t));
  m->tenant_completed = calloc((size_t)ntenants, sizeof(int64_t));
  m->tenant_rejected = calloc((size_t)ntenants, sizeof(int64_t));
  m->tenant_unfinished = calloc((size_t)ntenants, sizeof(int64_t));
  m->tenant_seen = calloc((size_t)ntenants, 1);
  m->insys = calloc((size_t)ntenants, sizeof *m->insys);
  m->insys_since = calloc((size_t)ntenants, sizeof *m->insys_since);
  m->busy_ticks = calloc((size_t)ntenants, sizeof *m->busy_ticks);
  m->tenant_svc_longest = calloc((size_t)ntenants, sizeof(int64_t));
  m->tenant_svc_starved = calloc((size_t)ntenants, sizeof(int64_t));
  for (int t = 0; m->tenant_svc_longest && t < ntenants; t++)
    m->tenant_svc_longest[t] = INT64_MIN;
  m->gap_min = -1;
  m->backlog_gap = -1;
  if (ntenants <= 32) {
    size_t n2 = (size_t)ntenants * (size_t)ntenants;
    m->in_system = calloc((size_t)ntenants, sizeof(int64_t));
    m->pair_hi = calloc(n2, sizeof(int64_t));
    m->pair_lo = calloc(n2, sizeof(int64_t));
    m->pair_on = calloc(n2, 1);
    if (!m->in_system || !m->pair_hi || !m->pair_lo || !m->pair_on) {
      lsim_metrics_release(m);
      return LSIM_E_NOMEM;
    }
    m->backlog_gap = 0;
  }
  if (!m->tenant_service || !m->tenant_completed || !m->tenant_rejected ||
      !m->tenant_unfinished || !m->tenant_seen || !m->insys ||
      !m->insys_since || !m->busy_ticks || !m->tenant_svc_longest ||
      !m->tenant_svc_starved) {
    lsim_metrics_release(m);
    return LSIM_E_NOMEM;
  }
  return 0;
}

/* The max pairwise service gap among seen tenants, after a debit to t:
** the maximum only grows; the minimum is recounted only when its holder
** moved (amortised O(1) per debit). */
static void lsim__gap(lsim_metrics *m, int t) {
  if (m->gap_min < 0 || m->gap_min == t) {
    m->gap_min = -1;
    for (int u = 0; u < m->ntenants; u++)
      if (m->tenant_seen[u] &&
          (m->gap_min < 0 ||
           m->tenant_service[u] < m->tenant_service[m->gap_min]))
        m->gap_min = u;
  }
  if (m->gap_min < 0 || t < 0 || t >= m->ntenants)
    return;
  int64_t g = m->tenant_service[t] - m->tenant_service[m->gap_min];
  if (g > m->max_gap)
    m->max_gap = g;
}

lsim_err lsim_metrics_shape(lsim_metrics *m, int workers, int nadapters,
                            const int *rank) {
  m->workers = workers;
  m->nadapters = nadapters;
  m->rank = rank;
  m->loaded = calloc((size_t)workers * (size_t)nadapters, 1);
  return m->loaded ? 0 : LSIM_E_NOMEM;
}

void lsim_metrics_iteration(lsim_metrics *m, int64_t distinct_adapters,
                            int64_t segments, int64_t true_rank_rows,
                            int64_t padded_rank_rows) {
  m->iters++;
  m->iter_adapters += distinct_adapters;
  m->iter_segments += segments;
  m->true_rank_rows += true_rank_rows;
  m->padded_rank_rows += padded_rank_rows;
}

/* Per-request flags, kept from queue_enqueued to the request record. */
#define LSIM__RQ_COLD 1u    /* missed at queue_enqueued */
#define LSIM__RQ_WAITING 2u /* counted in its tenant's in_system */
#define LSIM__RQ_INSYS 4u   /* counted in its tenant's insys */

static size_t lsim__rq_slot(const lsim_metrics *m, int64_t id) {
  uint64_t h = (uint64_t)id * UINT64_C(0x9E3779B97F4A7C15);
  return (size_t)(h >> 32) & (size_t)(m->rq_cap - 1);
}

/* The flags of request id, or NULL when the map has none. */
static unsigned char *lsim__rq_find(lsim_metrics *m, int64_t id) {
  if (id < 0 || m->rq_cap == 0)
    return NULL;
  for (size_t i = lsim__rq_slot(m, id);; i = (i + 1) & (size_t)(m->rq_cap - 1)) {
    if (m->rq_id[i] == id)
      return &m->rq_flags[i];
    if (m->rq_id[i] < 0)
      return NULL;
  }
}

/* The flags of request id, a zero entry added when absent; NULL when the
** map cannot grow (the projections lose this request, nothing else). */
static unsigned char *lsim__rq(lsim_metrics *m, int64_t id) {
  if (id < 0)
    return NULL;
  unsigned char *f = lsim__rq_find(m, id);
  if (f)
    return f;
  if (2 * (m->rq_n + 1) > m->rq_cap) { /* keep the load at most 1/2 */
    int64_t cap = m->rq_cap ? 2 * m->rq_cap : 1024;
    int64_t *ids = malloc((size_t)cap * sizeof *ids);
    unsigned char *fl = malloc((size_t)cap);
    if (!ids || !fl) {
      free(ids);
      free(fl);
      return NULL;
    }
    int64_t *old_id = m->rq_id, old_cap = m->rq_cap;
    unsigned char *old_fl = m->rq_flags;
    for (int64_t i = 0; i < cap; i++)
      ids[i] = -1;
    m->rq_id = ids;
    m->rq_flags = fl;
    m->rq_cap = cap;
    for (int64_t i = 0; i < old_cap; i++) {
      if (old_id[i] < 0)
        continue;
      size_t j = lsim__rq_slot(m, old_id[i]);
      while (ids[j] >= 0)
        j = (j + 1) & (size_t)(cap - 1);
      ids[j] = old_id[i];
      fl[j] = old_fl[i];
    }
    free(old_id);
    free(old_fl);
  }
  size_t i = lsim__rq_slot(m, id);
  while (m->rq_id[i] >= 0)
    i = (i + 1) & (size_t)(m->rq_cap - 1);
  m->rq_id[i] = id;
  m->rq_flags[i] = 0;
  m->rq_n++;
  return &m->rq_flags[i];
}

/* Request id leaves the map (its record came): backward-shift deletion,
** so no tombstones pile up over a long run. */
static void lsim__rq_drop(lsim_metrics *m, int64_t id) {
  unsigned char *f = lsim__rq_find(m, id);
  if (!f)
    return;
  size_t mask = (size_t)(m->rq_cap - 1), i = (size_t)(f - m->rq_flags);
  for (size_t j = (i + 1) & mask; m->rq_id[j] >= 0; j = (j + 1) & mask) {
    size_t home = lsim__rq_slot(m, m->rq_id[j]);
    /* j's entry may move to the hole at i unless its home lies in (i, j] */
    if (((j - home) & mask) >= ((j - i) & mask)) {
      m->rq_id[i] = m->rq_id[j];
      m->rq_flags[i] = m->rq_flags[j];
      i = j;
    }
  }
  m->rq_id[i] = -1;
  m->rq_n--;
}

static int lsim__rank_bucket(int r) {
  return r <= 8 ? 0 : r <= 16 ? 1 : r <= 32 ? 2 : r <= 64 ? 3 : 4;
}

/* Tenant t's requests in the system move by d at tick now; its
** backlogged ticks grow when the count falls back to 0. */
static void lsim__insys(lsim_metrics *m, int t, int d, lsim_tick now) {
  if (t < 0 || t >= m->ntenants)
    return;
  if (m->insys[t] == 0 && d > 0)
    m->insys_since[t] = now;
  m->insys[t] += d;
  if (m->insys[t] == 0 && d < 0)
    m->busy_ticks[t] += now - m->insys_since[t];
}

/* Tenant t's waiting count moves by d; pairs open when both wait. */
static void lsim__backlog(lsim_metrics *m, int t, int d) {
  if (!m->in_system || t < 0 || t >= m->ntenants)
    return;
  int n = m->ntenants;
  int64_t before = m->in_system[t];
  m->in_system[t] += d;
  if ((before > 0) == (m->in_system[t] > 0))
    return;
  for (int u = 0; u < n; u++) {
    if (u == t)
      continue;
    int i = t < u ? t : u, j = t < u ? u : t;
    size_t k = (size_t)i * (size_t)n + (size_t)j;
    if (m->in_system[t] > 0 && m->in_system[u] > 0) {
      m->pair_on[k] = 1;
      m->pair_hi[k] = m->pair_lo[k] =
          m->tenant_service[i] - m->tenant_service[j];
    } else {
      m->pair_on[k] = 0;
    }
  }
}

static void lsim__backlog_debit(lsim_metrics *m, int t) {
  if (!m->in_system || t < 0 || t >= m->ntenants)
    return;
  int n = m->ntenants;
  for (int u = 0; u < n; u++) {
    if (u == t)
      continue;
    int i = t < u ? t : u, j = t < u ? u : t;
    size_t k = (size_t)i * (size_t)n + (size_t)j;
    if (!m->pair_on[k])
      continue;
    int64_t dd = m->tenant_service[i] - m->tenant_service[j];
    if (dd > m->pair_hi[k])
      m->pair_hi[k] = dd;
    if (dd < m->pair_lo[k])
      m->pair_lo[k] = dd;
    if (m->pair_hi[k] - m->pair_lo[k] > m->backlog_gap)
      m->backlog_gap = m->pair_hi[k] - m->pair_lo[k];
  }
}

void lsim_metrics_interval(lsim_metrics *m, const lsim_interval *iv,
                           int starved) {
  if (strcmp(iv->kind, "load") == 0) {
    m->load_intervals++;
    m->load_starved += starved;
  } else {
    m->service_intervals++;
    m->service_starved += starved;
    int t = iv->entity;
    if (strcmp(iv->kind, "service") == 0 && t >= 0 && t < m->ntenants) {
      if (iv->end - iv->start > m->tenant_svc_longest[t])
        m->tenant_svc_longest[t] = iv->end - iv->start;
      m->tenant_svc_starved[t] += starved;
    }
  }
}

void lsim_metrics_event(lsim_metrics *m, const lsim_event *ev) {
  if (ev->kind > 0 && ev->kind < LSIM_EV__END)
    m->by_kind[ev->kind]++;
  switch (ev->kind) {
  case LSIM_EV_ADAPTER_GENERATION_PUBLISHED:
  case LSIM_EV_BASIS_PUBLISHED:
    m->resident_bytes += ev->bytes;
    if (m->resident_bytes > m->resident_peak)
      m->resident_peak = m->resident_bytes;
    break;
  case LSIM_EV_ADAPTER_EVICTED:
  case LSIM_EV_BASIS_EVICTED:
    m->resident_bytes -= ev->bytes;
    break;
  case LSIM_EV_QUEUE_ENQUEUED:
    if (ev->tenant >= 0 && ev->tenant < m->ntenants &&
        !m->tenant_seen[ev->tenant]) {
      m->tenant_seen[ev->tenant] = 1;
      m->gap_min = -1; /* a new tenant (at 0) may be the new minimum */
    }
    if (ev->value)
      m->hits++;
    else
      m->misses++;
    {
      unsigned char *f = lsim__rq(m, ev->request);
      if (f && !(*f & LSIM__RQ_WAITING)) {
        unsigned char insys = *f & LSIM__RQ_INSYS;
        *f = (unsigned char)((ev->value ? 0 : LSIM__RQ_COLD) |
                             LSIM__RQ_WAITING | insys);
        lsim__backlog(m, ev->tenant, +1);
      }
      if (f && !(*f & LSIM__RQ_INSYS)) {
        *f |= LSIM__RQ_INSYS;
        lsim__insys(m, ev->tenant, +1, ev->tick);
      }
    }
    break;
  case LSIM_EV_PREFIX_HIT:
    m->px_lookups++;
    m->px_hits += ev->generation > 0;
    m->px_lookup_blocks += ev->attempt;
    m->px_hit_blocks += ev->generation;
    m->px_reused_tokens += ev->value;
    break;
  case LSIM_EV_PREFIX_CORRUPT:
    m->px_corrupt_blocks += ev->generation;
    m->px_corrupt_requests++;
    break;
  case LSIM_EV_PREFIX_PUBLISHED:
    m->px_published_blocks += ev->generation;
    break;
  case LSIM_EV_PREFIX_EVICTED:
    m->px_evicted_blocks += ev->generation;
    break;
  case LSIM_EV_ADAPTER_DISK_READ:
    m->disk_bytes += ev->bytes;
    break;
  case LSIM_EV_REQUEST_PREEMPTED: {
    m->preemptions++;
    m->migrations += ev->detail && strcmp(ev->detail, "migrate") == 0;
    m->recompute_tokens += ev->value;
    unsigned char *f = lsim__rq_find(m, ev->request);
    if (f && !(*f & LSIM__RQ_WAITING)) {
      *f |= LSIM__RQ_WAITING; /* waiting for admission again */
      lsim__backlog(m, ev->tenant, +1);
    }
    break;
  }
  case LSIM_EV_KV_RESERVED: {
    unsigned char *f = lsim__rq_find(m, ev->request);
    if (f && (*f & LSIM__RQ_WAITING)) {
      *f &= (unsigned char)~LSIM__RQ_WAITING;
      lsim__backlog(m, ev->tenant, -1);
    }
    break;
  }
  case LSIM_EV_ADAPTER_LOAD_STARTED:
    m->h2d_bytes += ev->bytes;
    if (m->loaded && ev->worker >= 0 && ev->worker < m->workers &&
        ev->adapter >= 0 && ev->adapter < m->nadapters) {
      unsigned char *l =
          &m->loaded[(size_t)ev->worker * (size_t)m->nadapters +
                     (size_t)ev->adapter];
      if (!*l) {
        *l = 1;
        m->distinct_loaded++;
        m->distinct_loaded_bytes += ev->bytes;
      }
    }
    break;
  case LSIM_EV_ITERATION_SELECTED:
    m->rows_planned += ev->value;
    break;
  case LSIM_EV_ITERATION_COMPLETED:
    m->rows_completed += ev->value;
    break;
  case LSIM_EV_COMPLETED_SERVICE_DEBITED:
    if (ev->tenant >= 0 && ev->tenant < m->ntenants)
      m->tenant_service[ev->tenant] += ev->value;
    if (ev->detail && ev->detail[0] == 'p' &&
        strcmp(ev->detail, "prefill") == 0) /* most are "decode" */
      m->prefill_units += ev->value;
    else
      m->decode_units += ev->value;
    const unsigned char *rf = lsim__rq_find(m, ev->request);
    if (rf && (*rf & LSIM__RQ_COLD))
      m->service_cold += ev->value;
    else
      m->service_resident += ev->value;
    if (m->rank && ev->adapter >= 0 && ev->adapter < m->nadapters)
      m->service_rank[lsim__rank_bucket(m->rank[ev->adapter])] += ev->value;
    lsim__gap(m, ev->tenant);
    lsim__backlog_debit(m, ev->tenant);
    break;
  case LSIM_EV_PREFETCH_RELEASED:
    if (ev->value)
      m->prefetch_used++;
    else {
      m->prefetch_wasted++;
      m->prefetch_wasted_bytes += ev->bytes;
    }
    break;
  case LSIM_EV_ADMISSION_REJECTED:
    if (ev->detail && strcmp(ev->detail, "early_abort") == 0)
      m->early_aborts++;
    break;
  default:
    break;
  }
}

void lsim_metrics_request(lsim_metrics *m, const lsim_request_record *rec) {
  int t = rec->tenant >= 0 && rec->tenant < m->ntenants ? rec->tenant : -1;
  unsigned char *f = lsim__rq_find(m, rec->request);
  if (f && (*f & LSIM__RQ_WAITING)) {
    *f &= (unsigned char)~LSIM__RQ_WAITING;
    lsim__backlog(m, rec->tenant, -1);
  }
  if (f && (*f & LSIM__RQ_INSYS)) {
    *f &= (unsigned char)~LSIM__RQ_INSYS;
    lsim__insys(m, rec->tenant, -1, rec->finish_tick);
  }
  /* nothing reads a request's flags after its record */
  lsim__rq_drop(m, rec->request);
  if (rec->prompt_tokens > m->max_prompt)
    m->max_prompt = rec->prompt_tokens;
  {
    lsim_tick until = rec->first_token_tick != LSIM_NONE
                          ? rec->first_token_tick
                          : rec->finish_tick;
    if (until - rec->arrival_tick > m->max_wait_ticks)
      m->max_wait_ticks = until - rec->arrival_tick;
  }
  if (strcmp(rec->outcome, "ok") == 0) {
    m->requests_ok++;
    if (t >= 0)
      m->tenant_completed[t]++;
  } else if (strcmp(rec->outcome, "rejected") == 0 ||
             strcmp(rec->outcome, "cancelled") == 0) {
    /* a cancelled request was withdrawn before service: counted with the
    ** refused ones (the requests table keeps the distinct outcome) */
    m->requests_rejected++;
    if (t >= 0)
      m->tenant_rejected[t]++;
  } else {
    m->requests_unfinished++;
    if (t >= 0)
      m->tenant_unfinished[t]++;
  }
}

void lsim_metrics_release(lsim_metrics *m) {
  free(m->tenant_service);
  free(m->tenant_completed);
  free(m->tenant_rejected);
  free(m->tenant_unfinished);
  free(m->tenant_seen);
  free(m->insys);
  free(m->insys_since);
  free(m->busy_ticks);
  free(m->tenant_svc_longest);
  free(m->tenant_svc_starved);
  m->tenant_svc_longest = m->tenant_svc_starved = NULL;
  m->insys = m->busy_ticks = NULL;
  m->insys_since = NULL;
  free(m->loaded);
  free(m->rq_id);
  free(m->rq_flags);
  m->rq_id = NULL;
  m->rq_flags = NULL;
  m->rq_cap = m->rq_n = 0;
  free(m->in_system);
  free(m->pair_hi);
  free(m->pair_lo);
  free(m->pair_on);
  m->loaded = m->pair_on = NULL;
  m->in_system = m->pair_hi = m->pair_lo = NULL;
  m->tenant_service = m->tenant_completed = NULL;
  m->tenant_rejected = m->tenant_unfinished = NULL;
}
