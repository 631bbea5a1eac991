/*
** pctl.c: exact nearest-rank percentiles in bounded memory (pctl.h).
**
** Invariants of a target that is not answered after a pass:
**   - its answer's key lies in [lo, hi];
**   - cnt values of its group have keys in [lo, hi], and the answer is
**     the k-th smallest of them (1 <= k <= cnt);
**   - lo and hi are keys of values of the group (so lo == hi answers it).
** A pass either counts [lo, hi] in sub-ranges (HIST) and keeps the one
** holding rank k, or keeps the cnt values (COLLECT) and selects the k-th.
*/
#include "pctl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pct.h"

enum { LSIM__T_OPEN, LSIM__T_HIST, LSIM__T_COLLECT, LSIM__T_DONE };

typedef struct lsim__ptarget {
  int group, state, next; /* next: the group's next target, or -1 */
  double p, value;
  int64_t k, cnt;
  uint64_t lo, hi;
  int shift;            /* HIST: bucket = (key - lo) >> shift */
  int64_t *hc;          /* HIST: LSIM_PCTL_BUCKETS counts, then ... */
  uint64_t *hmin, *hmax; /* ... the smallest and largest key per bucket */
  double *buf;          /* COLLECT: the cnt values of [lo, hi] */
  int64_t nbuf;
} lsim__ptarget;

typedef struct lsim__pgroup {
  int64_t n, n_first;   /* values this pass; in the first pass */
  uint64_t kmin, kmax;  /* first pass: smallest and largest key */
  double *v;            /* first pass: the values, while they fit */
  int64_t nv, cap;
  int head;             /* first target, or -1 */
} lsim__pgroup;

struct lsim_pctl {
  int ngroups, ntargets, tcap;
  lsim__pgroup *g;
  lsim__ptarget *t;
  int64_t budget, used; /* bytes; used: this pass */
  int64_t peak;         /* the most `used` has been */
  int passes;           /* ended */
  int in_pass;
  int overflow;         /* the first pass stopped keeping values */
  int nomem;
};

#define LSIM__HIST_BYTES \
  ((int64_t)LSIM_PCTL_BUCKETS * (int64_t)(sizeof(int64_t) + 2 * sizeof(uint64_t)))

static void lsim__use(lsim_pctl *s, int64_t bytes) {
  s->used += bytes;
  if (s->used > s->peak)
    s->peak = s->used;
}

int64_t lsim_pctl_budget(void) {
  const char *e = getenv("LSIM_TEST_PCTL_BUDGET");
  if (e && *e) {
    char *end;
    long long b = strtoll(e, &end, 10);
    if (*end == '\0' && b > 0)
      return (int64_t)b;
  }
  return LSIM_PCTL_BUDGET;
}

/* An order-preserving key: unsigned order of keys = numeric order. */
static uint64_t lsim__key(double v) {
  uint64_t b;
  memcpy(&b, &v, sizeof b);
  return (b >> 63) ? ~b : b | (UINT64_C(1) << 63);
}

static double lsim__unkey(uint64_t k) {
  uint64_t b = (k >> 63) ? k & ~(UINT64_C(1) << 63) : ~k;
  double v;
  memcpy(&v, &b, sizeof v);
  return v;
}

/* Nearest rank of p in n values, 1..n. */
static int64_t lsim__rank(double p, int64_t n) {
  int64_t rank = (int64_t)ceil(p * (double)n / 100.0);
  return rank < 1 ? 1 : rank > n ? n : rank;
}

lsim_pctl *lsim_pctl_new(int ngroups, int64_t budget) {
  lsim_pctl *s = calloc(1, sizeof *s);
  if (!s)
    return NULL;
  s->ngroups = ngroups;
  s->budget = budget < LSIM__HIST_BYTES ? LSIM__HIST_BYTES : budget;
  s->g = calloc(ngroups > 0 ? (size_t)ngroups : 1, sizeof *s->g);
  if (!s->g) {
    free(s);
    return NULL;
  }
  for (int i = 0; i < ngroups; i++)
    s->g[i].head = -1;
  return s;
}

static void lsim__drop_target(lsim__ptarget *t) {
  free(t->hc);
  free(t->hmin);
  free(t->hmax);
  free(t->buf);
  t->hc = NULL;
  t->hmin = t->hmax = NULL;
  t->buf = NULL;
}

static void lsim__drop_first(lsim_pctl *s) {
  for (int i = 0; i < s->ngroups; i++) {
    free(s->g[i].v);
    s->g[i].v = NULL;
    s->g[i].nv = s->g[i].cap = 0;
  }
}

void lsim_pctl_free(lsim_pctl *s) {
  if (!s)
    return;
  lsim__drop_first(s);
  for (int i = 0; i < s->ntargets; i++)
    lsim__drop_target(&s->t[i]);
  free(s->t);
  free(s->g);
  free(s);
}

int lsim_pctl_want(lsim_pctl *s, int group, double p) {
  if (s->passes > 0 || s->in_pass || group < 0 || group >= s->ngroups)
    return -1;
  if (s->ntargets == s->tcap) {
    int cap = s->tcap ? 2 * s->tcap : 16;
    lsim__ptarget *t = realloc(s->t, (size_t)cap * sizeof *t);
    if (!t)
      return -1;
    s->t = t;
    s->tcap = cap;
  }
  int i = s->ntargets++;
  lsim__ptarget *t = &s->t[i];
  memset(t, 0, sizeof *t);
  t->group = group;
  t->p = p;
  t->value = NAN;
  t->state = LSIM__T_OPEN;
  /* appended at the tail: a group's targets in the order asked */
  t->next = -1;
  int *at = &s->g[group].head;
  while (*at >= 0)
    at = &s->t[*at].next;
  *at = i;
  return i;
}

int lsim_pctl_pass(lsim_pctl *s) {
  if (s->in_pass)
    return 1;
  for (int i = 0; i < s->ngroups; i++)
    s->g[i].n = 0;
  s->used = 0;
  if (s->passes == 0) {
    for (int i = 0; i < s->ngroups; i++)
      s->g[i].kmin = UINT64_MAX, s->g[i].kmax = 0;
    s->in_pass = 1;
    return 1;
  }
  /* plan: when every open target's values fit in the budget together,
  ** keep them all (the last pass).  Otherwise keep only those no larger
  ** than a counting table, and count the others in sub-ranges: one such
  ** pass shrinks each of them about 1,024-fold, after which they usually
  ** fit together (keeping the large ones a few at a time would take a
  ** pass per few targets instead).  In target order while the budget
  ** lasts; a target left over waits for the next pass. */
  int64_t all = 0;
  for (int i = 0; i < s->ntargets; i++)
    if (s->t[i].state != LSIM__T_DONE)
      all += s->t[i].cnt <= s->budget / (int64_t)sizeof(double)
                 ? s->t[i].cnt * (int64_t)sizeof(double)
                 : s->budget + 1;
  int keep_all = all <= s->budget;
  int any = 0;
  for (int i = 0; i < s->ntargets; i++) {
    lsim__ptarget *t = &s->t[i];
    if (t->state == LSIM__T_DONE)
      continue;
    t->state = LSIM__T_OPEN;
    int64_t keep = t->cnt * (int64_t)sizeof(double);
    if ((keep_all || keep <= LSIM__HIST_BYTES) &&
        keep <= s->budget - s->used) {
      if (!(t->buf = malloc((size_t)keep))) {
        s->nomem = 1;
        continue;
      }
      t->nbuf = 0;
      t->state = LSIM__T_COLLECT;
      lsim__use(s, keep);
      any = 1;
    } else if (LSIM__HIST_BYTES <= s->budget - s->used) {
      t->hc = calloc(LSIM_PCTL_BUCKETS, sizeof *t->hc);
      t->hmin = malloc(LSIM_PCTL_BUCKETS * sizeof *t->hmin);
      t->hmax = calloc(LSIM_PCTL_BUCKETS, sizeof *t->hmax);
      if (!t->hc || !t->hmin || !t->hmax) {
        lsim__drop_target(t);
        s->nomem = 1;
        continue;
      }
      for (int b = 0; b < LSIM_PCTL_BUCKETS; b++)
        t->hmin[b] = UINT64_MAX;
      uint64_t span = t->hi - t->lo; /* > 0: lo == hi is answered */
      int bits = 0, want = 0;
      while (bits < 64 && (span >> bits) != 0)
        bits++;
      while ((1 << want) < LSIM_PCTL_BUCKETS)
        want++;
      t->shift = bits > want ? bits - want : 0;
      t->state = LSIM__T_HIST;
      lsim__use(s, LSIM__HIST_BYTES);
      any = 1;
    }
  }
  if (!any && !s->nomem) {
    /* every target is answered (a target left waiting always finds the
    ** whole budget free on a pass of its own) */
    return 0;
  }
  s->in_pass = 1;
  return 1;
}

void lsim_pctl_add(lsim_pctl *s, int group, double v) {
  if (group < 0 || group >= s->ngroups)
    return;
  if (v == 0)
    v = 0.0; /* -0.0 sorts with 0.0 */
  lsim__pgroup *g = &s->g[group];
  uint64_t key = lsim__key(v);
  g->n++;
  if (s->passes == 0) {
    if (key < g->kmin)
      g->kmin = key;
    if (key > g->kmax)
      g->kmax = key;
    if (s->overflow || g->head < 0)
      return;
    if (g->nv == g->cap) {
      int64_t cap = g->cap ? 2 * g->cap : 256;
      int64_t more = (cap - g->cap) * (int64_t)sizeof(double);
      double *nv = more <= s->budget - s->used
                       ? realloc(g->v, (size_t)cap * sizeof *nv)
                       : NULL;
      if (!nv) {
        /* over the budget (or out of memory): count only, narrow later */
        lsim__drop_first(s);
        s->overflow = 1;
        s->used = 0;
        return;
      }
      g->v = nv;
      g->cap = cap;
      lsim__use(s, more);
    }
    g->v[g->nv++] = v;
    return;
  }
  for (int i = g->head; i >= 0; i = s->t[i].next) {
    lsim__ptarget *t = &s->t[i];
    if (key < t->lo || key > t->hi)
      continue;
    if (t->state == LSIM__T_HIST) {
      int b = (int)((key - t->lo) >> t->shift);
      t->hc[b]++;
      if (key < t->hmin[b])
        t->hmin[b] = key;
      if (key > t->hmax[b])
        t->hmax[b] = key;
    } else if (t->state == LSIM__T_COLLECT) {
      if (t->nbuf < t->cnt)
        t->buf[t->nbuf] = v;
      t->nbuf++; /* checked against cnt at the end of the pass */
    }
  }
}

/* The first pass is over: answer from the kept values, or set up every
** target's interval. */
static lsim_err lsim__end_first(lsim_pctl *s) {
  for (int gi = 0; gi < s->ngroups; gi++) {
    lsim__pgroup *g = &s->g[gi];
    g->n_first = g->n;
    int64_t from = 0, prev = 0;
    /* a group's targets in increasing rank when its values were kept:
    ** each selection leaves everything after its pick no smaller */
    for (int i = g->head; i >= 0; i = s->t[i].next) {
      lsim__ptarget *t = &s->t[i];
      if (g->n == 0) {
        t->state = LSIM__T_DONE;
        t->value = NAN;
        continue;
      }
      t->k = lsim__rank(t->p, g->n);
      if (!s->overflow) {
        if (t->k < prev)
          from = 0;
        lsim_pct_kth(g->v + from, g->nv - from, t->k - 1 - from);
        t->value = g->v[t->k - 1];
        from = t->k - 1;
        prev = t->k;
        t->state = LSIM__T_DONE;
        continue;
      }
      t->cnt = g->n;
      t->lo = g->kmin;
      t->hi = g->kmax;
      if (t->lo == t->hi) {
        t->value = lsim__unkey(t->lo);
        t->state = LSIM__T_DONE;
      }
    }
  }
  lsim__drop_first(s);
  return 0;
}

lsim_err lsim_pctl_end(lsim_pctl *s, lsim_errbuf *eb) {
  if (!s->in_pass)
    return 0;
  s->in_pass = 0;
  if (s->nomem) {
    s->nomem = 0;
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory for percentiles");
  }
  if (s->passes++ == 0)
    return lsim__end_first(s);
  for (int gi = 0; gi < s->ngroups; gi++)
    if (s->g[gi].n != s->g[gi].n_first)
      return lsim_fail(eb, LSIM_E_BUG,
                       "percentiles: pass %d saw %lld values of group %d, "
                       "the first %lld",
                       s->passes, (long long)s->g[gi].n, gi,
                       (long long)s->g[gi].n_first);
  for (int i = 0; i < s->ntargets; i++) {
    lsim__ptarget *t = &s->t[i];
    if (t->state == LSIM__T_COLLECT) {
      if (t->nbuf != t->cnt) {
        int64_t got = t->nbuf;
        lsim__drop_target(t);
        return lsim_fail(eb, LSIM_E_BUG,
                         "percentiles: pass %d kept %lld values of an "
                         "interval that held %lld",
                         s->passes, (long long)got, (long long)t->cnt);
      }
      lsim_pct_kth(t->buf, t->cnt, t->k - 1);
      t->value = t->buf[t->k - 1];
      t->state = LSIM__T_DONE;
      lsim__drop_target(t);
    } else if (t->state == LSIM__T_HIST) {
      int64_t below = 0, total = 0;
      int pick = -1;
      for (int b = 0; b < LSIM_PCTL_BUCKETS; b++) {
        if (pick < 0 && below + t->hc[b] >= t->k)
          pick = b;
        else if (pick < 0)
          below += t->hc[b];
        total += t->hc[b];
      }
      if (total != t->cnt || pick < 0) {
        lsim__drop_target(t);
        return lsim_fail(eb, LSIM_E_BUG,
                         "percentiles: pass %d counted %lld values of an "
                         "interval that held %lld",
                         s->passes, (long long)total, (long long)t->cnt);
      }
      t->k -= below;
      t->cnt = t->hc[pick];
      t->lo = t->hmin[pick];
      t->hi = t->hmax[pick];
      lsim__drop_target(t);
      t->state = LSIM__T_OPEN;
      if (t->lo == t->hi) {
        t->value = lsim__unkey(t->lo);
        t->state = LSIM__T_DONE;
      }
    }
  }
  return 0;
}

double lsim_pctl_value(const lsim_pctl *s, int target) {
  return target >= 0 && target < s->ntargets ? s->t[target].value : NAN;
}

int64_t lsim_pctl_count(const lsim_pctl *s, int group) {
  return group >= 0 && group < s->ngroups ? s->g[group].n_first : 0;
}

int lsim_pctl_passes(const lsim_pctl *s) { return s->passes; }

int64_t lsim_pctl_peak(const lsim_pctl *s) { return s->peak; }
