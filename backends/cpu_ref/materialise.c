/*
** materialise.c: a replay iteration's synthetic tensors (materialise.h).
*/
#include "materialise.h"

#include <stdlib.h>
#include <string.h>

#include "../../base/rng.h"

/* A stream keyed by several integers: mix them into one seed. */
static void lsim__keyed(lsim_rng *r, uint64_t seed, uint64_t a, uint64_t b,
                        uint64_t c) {
  uint64_t k = seed;
  k = k * 0x9E3779B97F4A7C15ull ^ (a + 0x632BE59BD9B4E019ull);
  k = k * 0x9E3779B97F4A7C15ull ^ (b + 0x8CB92BA72F3D8DD7ull);
  k = k * 0x9E3779B97F4A7C15ull ^ (c + 0xA0761D6478BD642Full);
  lsim_rng_init(r, k, LSIM_RNG_TENSORS);
}

static long lsim__small(lsim_rng *r, int m) {
  return (long)lsim_rng_below(r, (uint64_t)(2 * m + 1)) - m;
}

/* One cached artifact: the bytes its exact factors were made from. */
typedef struct lsim_factor_ent {
  int art, ver, r, d_in, d_out;
  int64_t used;      /* fc_clock of the last build that used it */
  signed char *bytes; /* [r * (d_in + d_out)] */
  lsim_qadapter q;   /* A, B, scale 2 / r; q.id unused */
} lsim_factor_ent;

static size_t lsim__ent_size(const lsim_factor_ent *e) {
  return (size_t)e->r * ((size_t)e->d_in + (size_t)e->d_out);
}

static void lsim__ent_free(lsim_factor_ent *e) {
  lsim_qadapter_clear(&e->q);
  free(e->bytes);
  free(e);
}

/* Drop the previous iteration's views; keep the buffers and the cache. */
static void lsim__clear_values(lsim_iter_tensors *t) {
  t->nad = 0;
  t->X = (lsim_qmat)LSIM_QMAT_INIT;
  lsim_rowplan_release(&t->rp);
}

lsim_err lsim_iter_rows_build(lsim_iter_tensors *t, const lsim_plan *plan,
                              lsim_errbuf *eb) {
  lsim__clear_values(t);
  if (plan->n > t->ents_cap) {
    lsim_plan_entry *ne = realloc(t->ents, (size_t)plan->n * sizeof *ne);
    if (ne)
      t->ents = ne;
    int *va = realloc(t->vad, (size_t)plan->n * sizeof *va);
    if (va)
      t->vad = va;
    int *vv = realloc(t->vver, (size_t)plan->n * sizeof *vv);
    if (vv)
      t->vver = vv;
    if (!ne || !va || !vv)
      return lsim_fail(eb, LSIM_E_NOMEM, "out of memory materialising tensors");
    t->ents_cap = plan->n;
  }
  if (plan->n > 0)
    memcpy(t->ents, plan->e, (size_t)plan->n * sizeof *t->ents);
  for (int i = 0; i < plan->n; i++)
    if (t->ents[i].adapter < 0) {
      t->ents[i].adapter = LSIM_BASE;
      t->ents[i].rank = 0;
    }
  int maxa = -1, nver = 0;
  for (int i = 0; i < plan->n; i++)
    if (t->ents[i].adapter > maxa)
      maxa = t->ents[i].adapter;
  for (int i = 0; i < plan->n; i++) {
    if (t->ents[i].adapter < 0 || t->ents[i].version <= 0)
      continue;
    int k = 0;
    while (k < nver && (t->vad[k] != t->ents[i].adapter ||
                        t->vver[k] != t->ents[i].version))
      k++;
    if (k == nver) {
      t->vad[k] = t->ents[i].adapter;
      t->vver[k] = t->ents[i].version;
      nver++;
    }
    t->ents[i].adapter = maxa + 1 + k;
  }
  t->maxa = maxa;
  return lsim_rowplan_build(&t->rp, t->ents, plan->n, NULL, 0, eb);
}

int lsim_iter_artifact(const lsim_iter_tensors *t, int id, int *version) {
  int v = 0, a = id;
  if (id > t->maxa) {
    a = t->vad[id - t->maxa - 1];
    v = t->vver[id - t->maxa - 1];
  }
  if (version)
    *version = v;
  return a;
}

void lsim_factors_draw(uint64_t seed, int art, int ver, int r, int d_in,
                       int d_out, signed char *out) {
  lsim_rng g;
  lsim__keyed(&g, seed, 1, (uint64_t)art, (uint64_t)ver);
  size_t n = (size_t)r * (size_t)d_in + (size_t)d_out * (size_t)r;
  for (size_t i = 0; i < n; i++)
    out[i] = (signed char)lsim__small(&g, 1);
}

lsim_err lsim_iter_tensors_build(lsim_iter_tensors *t, const lsim_plan *plan,
                                 uint64_t seed, int d_in, int d_out,
                                 lsim_errbuf *eb) {
  return lsim_iter_tensors_build_with(t, plan, seed, d_in, d_out, NULL, NULL,
                                      eb);
}

/* Evict least recently used artifacts not used by this build until the
** cache holds at most LSIM_FACTOR_CACHE_ENTRIES beyond this build's. */
static void lsim__cache_trim(lsim_iter_tensors *t, size_t need) {
  while (t->fc_held + need > LSIM_FACTOR_CACHE_ENTRIES) {
    int v = -1;
    for (int k = 0; k < t->nfc; k++)
      if (t->fc[k]->used != t->fc_clock &&
          (v < 0 || t->fc[k]->used < t->fc[v]->used))
        v = k;
    if (v < 0)
      return; /* everything cached is in use by this iteration */
    t->fc_held -= lsim__ent_size(t->fc[v]);
    lsim__ent_free(t->fc[v]);
    t->fc[v] = t->fc[--t->nfc];
  }
}

/* The cached factors of (art, ver, r) made from exactly `bytes`: found, or
** (re)built from them. */
static lsim_err lsim__cached(lsim_iter_tensors *t, int art, int ver, int r,
                             int d_in, int d_out, const signed char *bytes,
                             lsim_factor_ent **out, lsim_errbuf *eb) {
  size_t n = (size_t)r * ((size_t)d_in + (size_t)d_out);
  lsim_factor_ent *e = NULL;
  for (int k = 0; k < t->nfc && !e; k++)
    if (t->fc[k]->art == art && t->fc[k]->ver == ver && t->fc[k]->r == r &&
        t->fc[k]->d_in == d_in && t->fc[k]->d_out == d_out)
      e = t->fc[k];
  if (e && memcmp(e->bytes, bytes, n) == 0) {
    e->used = t->fc_clock;
    *out = e;
    return 0;
  }
  if (!e) {
    lsim__cache_trim(t, n);
    if (t->nfc == t->fc_cap) {
      int nc = t->fc_cap ? 2 * t->fc_cap : 16;
      lsim_factor_ent **nf = realloc(t->fc, (size_t)nc * sizeof *nf);
      if (!nf)
        return lsim_fail(eb, LSIM_E_NOMEM, "out of memory caching factors");
      t->fc = nf;
      t->fc_cap = nc;
    }
    e = calloc(1, sizeof *e);
    if (!e || !(e->bytes = malloc(n ? n : 1))) {
      free(e);
      return lsim_fail(eb, LSIM_E_NOMEM, "out of memory caching factors");
    }
    lsim_err rc = lsim_qadapter_init(&e->q, 0, r, d_in, d_out, eb);
    if (rc) {
      free(e->bytes);
      free(e);
      return rc;
    }
    e->art = art;
    e->ver = ver;
    e->r = r;
    e->d_in = d_in;
    e->d_out = d_out;
    t->fc[t->nfc++] = e;
    t->fc_held += n;
  }
  memcpy(e->bytes, bytes, n);
  const signed char *q = bytes;
  for (int i = 0; i < r; i++)
    for (int j = 0; j < d_in; j++)
      mpq_set_si(LSIM_QAT(&e->q.A, i, j), *q++, 1);
  for (int i = 0; i < d_out; i++)
    for (int j = 0; j < r; j++)
      mpq_set_si(LSIM_QAT(&e->q.B, i, j), *q++, 1);
  mpq_set_ui(e->q.scale, 2, (unsigned long)r);
  mpq_canonicalize(e->q.scale);
  e->used = t->fc_clock;
  *out = e;
  return 0;
}

/* X's storage for n entries, initialised once and kept. */
static lsim_err lsim__x_room(lsim_iter_tensors *t, size_t n, lsim_errbuf *eb) {
  if (n <= t->xcap)
    return 0;
  mpq_t *nx = realloc(t->xv, n * sizeof *nx);
  if (!nx)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory materialising tensors");
  /* realloc moved the mpq_t structs, not their limbs: still valid */
  t->xv = nx;
  for (size_t k = t->xcap; k < n; k++)
    mpq_init(t->xv[k]);
  t->xcap = n;
  return 0;
}

lsim_err lsim_iter_tensors_build_with(lsim_iter_tensors *t,
                                      const lsim_plan *plan, uint64_t seed,
                                      int d_in, int d_out,
                                      lsim_factor_fetch_fn fetch, void *ud,
                                      lsim_errbuf *eb) {
  lsim_err rc = lsim_iter_rows_build(t, plan, eb);
  if (rc)
    return rc;
  const lsim_rowplan *p = &t->rp;
  t->fc_clock++;

  /* the plan's adapters, ascending (its grouped segments) */
  if (p->nseg + 1 > t->ad_cap) {
    lsim_qadapter *na = realloc(t->ad, (size_t)(p->nseg + 1) * sizeof *na);
    if (!na)
      return lsim_fail(eb, LSIM_E_NOMEM, "out of memory materialising tensors");
    t->ad = na;
    t->ad_cap = p->nseg + 1;
  }
  for (int k = 0; k < p->nseg && !rc; k++) {
    int id = p->seg_adapter[k], r = p->seg_rank[k];
    int ver, art = lsim_iter_artifact(t, id, &ver);
    size_t n = (size_t)r * (size_t)d_in + (size_t)d_out * (size_t)r;
    if (n > t->fb_cap) {
      signed char *nb = realloc(t->fb, n);
      if (!nb)
        return lsim_fail(eb, LSIM_E_NOMEM,
                         "out of memory materialising tensors");
      t->fb = nb;
      t->fb_cap = n;
    }
    int got = fetch ? fetch(ud, art, ver, r, t->fb, eb) : 0;
    if (got < 0)
      return got;
    if (!got)
      lsim_factors_draw(seed, art, ver, r, d_in, d_out, t->fb);
    lsim_factor_ent *e = NULL;
    if ((rc = lsim__cached(t, art, ver, r, d_in, d_out, t->fb, &e, eb)))
      return rc;
    t->ad[k] = e->q; /* a view: the cache owns the values */
    t->ad[k].id = id;
    t->nad++;
  }
  size_t nx = (size_t)p->T * (size_t)d_in;
  if ((rc = lsim__x_room(t, nx, eb)))
    return rc;
  t->X.rows = p->T;
  t->X.cols = d_in;
  t->X.v = nx ? t->xv : NULL;
  for (int r = 0; r < p->T; r++) {
    lsim_rng g;
    lsim__keyed(&g, seed, 2 + (uint64_t)plan->iter,
                (uint64_t)p->req_uid[p->row_req[r]], (uint64_t)p->row_pos[r]);
    for (int j = 0; j < d_in; j++)
      mpq_set_si(LSIM_QAT(&t->X, r, j), lsim__small(&g, 1), 1);
  }
  return 0;
}

void lsim_iter_tensors_release(lsim_iter_tensors *t) {
  lsim__clear_values(t);
  free(t->ad);
  free(t->ents);
  free(t->vad);
  free(t->vver);
  for (size_t k = 0; k < t->xcap; k++)
    mpq_clear(t->xv[k]);
  free(t->xv);
  for (int k = 0; k < t->nfc; k++)
    lsim__ent_free(t->fc[k]);
  free(t->fc);
  free(t->fb);
  memset(t, 0, sizeof *t);
  t->maxa = -1;
}
