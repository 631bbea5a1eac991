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

/* Free the previous iteration's values, keep the buffers. */
static void lsim__clear_values(lsim_iter_tensors *t) {
  for (int k = 0; k < t->nad; k++)
    lsim_qadapter_clear(&t->ad[k]);
  free(t->ad);
  t->ad = NULL;
  t->nad = 0;
  lsim_qmat_clear(&t->X);
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

lsim_err lsim_iter_tensors_build_with(lsim_iter_tensors *t,
                                      const lsim_plan *plan, uint64_t seed,
                                      int d_in, int d_out,
                                      lsim_factor_fetch_fn fetch, void *ud,
                                      lsim_errbuf *eb) {
  lsim_err rc = lsim_iter_rows_build(t, plan, eb);
  if (rc)
    return rc;
  signed char *fb = NULL;
  const lsim_rowplan *p = &t->rp;

  /* the plan's adapters, ascending (its grouped segments) */
  t->ad = calloc((size_t)p->nseg + 1, sizeof *t->ad);
  if (!t->ad)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory materialising tensors");
  for (int k = 0; k < p->nseg && !rc; k++) {
    int id = p->seg_adapter[k], r = p->seg_rank[k];
    lsim_qadapter *ad = &t->ad[k];
    if ((rc = lsim_qadapter_init(ad, id, r, d_in, d_out, eb)))
      break;
    t->nad++;
    int ver, art = lsim_iter_artifact(t, id, &ver);
    signed char *nb =
        realloc(fb, (size_t)r * (size_t)d_in + (size_t)d_out * (size_t)r);
    if (!nb) {
      rc = lsim_fail(eb, LSIM_E_NOMEM, "out of memory materialising tensors");
      break;
    }
    fb = nb;
    int got = fetch ? fetch(ud, art, ver, r, fb, eb) : 0;
    if (got < 0) {
      rc = got;
      break;
    }
    if (!got)
      lsim_factors_draw(seed, art, ver, r, d_in, d_out, fb);
    const signed char *q = fb;
    for (int i = 0; i < r; i++)
      for (int j = 0; j < d_in; j++)
        mpq_set_si(LSIM_QAT(&ad->A, i, j), *q++, 1);
    for (int i = 0; i < d_out; i++)
      for (int j = 0; j < r; j++)
        mpq_set_si(LSIM_QAT(&ad->B, i, j), *q++, 1);
    mpq_set_ui(ad->scale, 2, (unsigned long)r);
    mpq_canonicalize(ad->scale);
  }
  if (!rc)
    rc = lsim_qmat_init(&t->X, p->T, d_in, eb);
  for (int r = 0; !rc && r < p->T; r++) {
    lsim_rng g;
    lsim__keyed(&g, seed, 2 + (uint64_t)plan->iter,
                (uint64_t)p->req_uid[p->row_req[r]], (uint64_t)p->row_pos[r]);
    for (int j = 0; j < d_in; j++)
      mpq_set_si(LSIM_QAT(&t->X, r, j), lsim__small(&g, 1), 1);
  }
  free(fb);
  return rc;
}

void lsim_iter_tensors_release(lsim_iter_tensors *t) {
  lsim__clear_values(t);
  free(t->ents);
  free(t->vad);
  free(t->vver);
  t->ents = NULL;
  t->vad = t->vver = NULL;
  t->ents_cap = 0;
}
