/*
** backend_full.c: `--execute full` in the cuda backend (backend_full.h).
**
** Opened with the engine's pool geometry, it opens the whole-model
** executor (fwd.h) with one device pool per worker of exactly the engine's
** pages (pool_pages x page_bytes): a KV page holds tpp = page_bytes /
** kv_bytes_per_token tokens, an adapter's pages hold its factor rows
** (fwd_layout.h).  The residency hooks drive it:
**
**   stage    the ledger's checks (backends/stage.h), then the adapter's
**            image is copied from the pinned host tier into its engine
**            pages on the executor's copy stream (lsim_fwd_adapter_stage);
**            the copy runs while the device computes whatever is queued
**   publish  waits for that copy, validates it (device checksum of the
**            pages against the image's) and makes it launchable
**   retire   the ledger's fence check (every launch that named the
**            generation was executed), then not launchable; a copy still
**            in flight (a rolled-back stage) is waited for, so that its
**            pages can be handed to KV at once
**   kv       each KV object's pages in allocation order: token t of a
**            request is in its (t / tpp)-th page (the order the engine
**            hands them out; a release removes the pages it names)
**   run      the plan's entries, in packed order, become the forward's
**            sequences (rows at positions ctx .. ctx + rows - 1, the
**            request's KV pages, sampled or not); its adapters, the
**            published generations the launch named, with their page
**            tables; backend_ns is the device time of the forward (two CUDA
**            events on the compute stream around all of it)
**
** Every forward completes before run returns (the events are waited for),
** so a later stage can never write pages a launch still reads; the
** engine's order (stage into free pages, publish, retire after the
** fence) is checked by the ledger as in the other modes.
**
** Verify (--verify cpu_ref): after the timed forward, one (layer, module)
** per iteration, rotating over all of them, is run again on integer inputs
** in {-1, 0, 1} into a zeroed buffer, through the same plan and the same
** pages, and compared with the exact value computed here from the host
** tier's image (dyadic factors: the exact delta rounded once to bf16 is
** owed, bit for bit), on up to LSIM__FV_ROWS rows.
*/
#include "backend_full.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../engine/plan.h"
#include "../../engine/rowplan.h"
#include "../fwd_layout.h"
#include "../stage.h"
#include "cuda.h"
#include "fwd.h"

#define LSIM__FV_ROWS 8 /* rows compared per verified iteration */

typedef struct lsim__kvl {
  int64_t *pg;
  int64_t n, cap;
} lsim__kvl;

struct lsim_full {
  lsim_backend_cfg cfg;
  lsim_model_shape shape;
  lsim_fwd *F;
  lsim_stage_ledger L;
  int nmods, mod[LSIM_FWD_MODS]; /* the adapted modules, in order */
  /* KV objects per worker: handle -> pages in allocation order */
  lsim__kvl **kv;
  int *nkv;
  /* the run's scratch */
  lsim_plan_entry *ents;
  int ents_cap;
  int *dart, *dver; /* dense id -> artifact, version */
  lsim_fwd_seq *seq;
  lsim_fwd_adapter *ad;
  lsim_rowplan rp;
  /* verify */
  void *dx, *dy;
  size_t dx_cap, dy_cap;
  uint16_t *hy;
  size_t hy_cap;
  int64_t nverified;
  char vref[128];
  int onepass; /* lsim_fwd_batch.onepass: LSIM_CUDA_ONEPASS (auto 0, on 1,
                  part 2, off -1) */
};

static lsim_err lsim__nomem(lsim_errbuf *eb) {
  return lsim_fail(eb, LSIM_E_NOMEM, "out of memory (--execute full)");
}

void lsim_full_close(lsim_full *f) {
  if (!f)
    return;
  lsim_fwd_close(f->F);
  lsim_stage_close(&f->L);
  for (int w = 0; f->kv && w < f->cfg.workers; w++) {
    for (int h = 0; h < f->nkv[w]; h++)
      free(f->kv[w][h].pg);
    free(f->kv[w]);
  }
  free(f->kv);
  free(f->nkv);
  free(f->ents);
  free(f->dart);
  free(f->dver);
  free(f->seq);
  free(f->ad);
  lsim_rowplan_release(&f->rp);
  lsim_cuda_free(f->dx);
  lsim_cuda_free(f->dy);
  free(f->hy);
  free(f);
}

/* The refusals that need no device, and the executor's cfg. */
static lsim_err lsim__full_cfg(const lsim_backend_cfg *cfg,
                               const lsim_model_shape *shape, int maxr,
                               lsim_fwd_cfg *fc, lsim_errbuf *eb) {
#define LSIM__NO(...) lsim_fail(eb, LSIM_E_DEV_UNSUPPORTED, __VA_ARGS__)
  if (cfg->pool_pages < 1)
    return LSIM__NO("--execute full runs the engine's own pages: it needs "
                    "the pool geometry (a replay)");
  if (cfg->objects != cfg->nadapters)
    return LSIM__NO("--execute full does not execute compressed collections "
                    "($.adapters.compression): their cores and bases are "
                    "not whole-model adapters");
  if (!cfg->shape || !cfg->shape->full)
    return LSIM__NO("--execute full needs a full model shape ($.model.preset, "
                    "or hidden, intermediate, q_heads and vocab)");
  if (cfg->max_batch_tokens < 1 || cfg->max_batch_requests < 1)
    return LSIM__NO("--execute full needs the batch bounds");
#undef LSIM__NO
  /* a sequence can hold at most the pool */
  int64_t max_rows = (int64_t)cfg->max_batch_tokens + cfg->max_batch_requests;
  *fc = (lsim_fwd_cfg){
      .shape = shape,
      .layers = 0,
      .seed = cfg->seed,
      .max_rows = (int)(max_rows < (1 << 24) ? max_rows : (1 << 24)),
      .max_seqs = cfg->max_batch_requests,
      .max_pages_seq = cfg->pool_pages,
      .npools = cfg->workers,
      .pool_pages = cfg->pool_pages,
      .page_bytes = cfg->page_bytes,
      .kv_bytes_per_token = cfg->kv_bytes_per_token,
      .mods = shape->adapter_modules & ((1u << LSIM_FWD_MODS) - 1),
      .max_rank = maxr,
      .max_ids = cfg->max_batch_requests,
      .objects = cfg->objects,
      .rank = cfg->adapter_rank,
  };
  return 0;
}

lsim_err lsim_full_check(const lsim_backend_cfg *cfg, int max_rank,
                         lsim_errbuf *eb) {
  lsim_fwd_cfg fc;
  lsim_err rc = lsim__full_cfg(cfg, cfg->shape, max_rank < 1 ? 1 : max_rank,
                               &fc, eb);
  return rc ? rc : lsim_fwd_check(&fc, eb);
}

lsim_err lsim_full_open(lsim_full **out, const lsim_backend_cfg *cfg,
                        lsim_errbuf *eb) {
  *out = NULL;
  int maxr = 1;
  for (int a = 0; cfg->adapter_rank && a < cfg->nadapters; a++)
    if (cfg->adapter_rank[a] > maxr)
      maxr = cfg->adapter_rank[a];
  lsim_fwd_cfg fc;
  lsim_err rc = lsim__full_cfg(cfg, cfg->shape, maxr, &fc, eb);
  if (rc)
    return rc;
  lsim_full *f = calloc(1, sizeof *f);
  if (!f)
    return lsim__nomem(eb);
  f->cfg = *cfg;
  f->shape = *cfg->shape;
  /* LSIM_CUDA_ONEPASS: the adapted projections' composition, a study knob
  ** like LSIM_CUDA_PATH (docs/CUDA.md): auto (the chooser), on (one
  ** pass), part (the GEMM on part of the SMs beside the branch), off */
  {
    const char *op = getenv("LSIM_CUDA_ONEPASS");
    if (op && *op && strcmp(op, "auto") && strcmp(op, "on") &&
        strcmp(op, "off") && strcmp(op, "part")) {
      free(f);
      return lsim_fail(eb, LSIM_E_BACKEND,
                       "LSIM_CUDA_ONEPASS: unknown value '%s' (auto, on, "
                       "off, part)", op);
    }
    f->onepass = !op ? 0
                 : !strcmp(op, "on")   ? 1
                 : !strcmp(op, "part") ? 2
                 : !strcmp(op, "off")  ? -1
                                       : 0;
  }
  f->cfg.shape = &f->shape;
  f->cfg.adapter_rank = NULL;
  f->cfg.target_d_in = f->cfg.target_d_out = NULL;
  fc.shape = &f->shape;
  if ((rc = lsim_stage_open(&f->L, cfg, 0, eb)))
    goto fail;
  for (int m = 0; m < LSIM_FWD_MODS; m++)
    if (fc.mods >> m & 1u)
      f->mod[f->nmods++] = m;
  if ((rc = lsim_fwd_open(&f->F, &fc, eb)))
    goto fail;
  f->kv = calloc((size_t)cfg->workers, sizeof *f->kv);
  f->nkv = calloc((size_t)cfg->workers, sizeof *f->nkv);
  f->seq = calloc((size_t)cfg->max_batch_requests, sizeof *f->seq);
  f->ad = calloc((size_t)cfg->max_batch_requests, sizeof *f->ad);
  f->dart = calloc((size_t)cfg->max_batch_requests, sizeof *f->dart);
  f->dver = calloc((size_t)cfg->max_batch_requests, sizeof *f->dver);
  if (!f->kv || !f->nkv || !f->seq || !f->ad || !f->dart || !f->dver) {
    rc = lsim__nomem(eb);
    goto fail;
  }
  *out = f;
  return 0;
fail:
  lsim_full_close(f);
  return rc;
}

/* ---- the residency ------------------------------------------------------------ */

lsim_err lsim_full_stage(lsim_full *f, const lsim_res_page_ev *ev,
                         lsim_errbuf *eb) {
  lsim_err rc = lsim_stage_on_stage(&f->L, ev, eb);
  if (rc || !f->nmods)
    return rc;
  return lsim_fwd_adapter_stage(f->F, ev->worker, ev->object, ev->object,
                                (int)ev->version, ev->page, ev->npages, eb);
}

lsim_err lsim_full_publish(lsim_full *f, const lsim_res_page_ev *ev,
                           lsim_errbuf *eb) {
  lsim_err rc = lsim_stage_on_publish(&f->L, ev, eb);
  if (rc || !f->nmods)
    return rc;
  return lsim_fwd_adapter_publish(f->F, ev->worker, ev->object, eb);
}

lsim_err lsim_full_retire(lsim_full *f, const lsim_res_page_ev *ev,
                          lsim_errbuf *eb) {
  lsim_err rc = lsim_stage_on_retire(&f->L, ev, eb);
  if (rc || !f->nmods)
    return rc;
  return lsim_fwd_adapter_retire(f->F, ev->worker, ev->object, eb);
}

lsim_err lsim_full_launch(lsim_full *f, const lsim_res_page_ev *ev,
                          lsim_errbuf *eb) {
  return lsim_stage_on_launch(&f->L, ev, eb);
}

lsim_err lsim_full_kv(lsim_full *f, const lsim_res_page_ev *ev,
                      lsim_errbuf *eb) {
  lsim_err rc = lsim_stage_on_kv(&f->L, ev, eb);
  if (rc)
    return rc;
  const int w = ev->worker, h = ev->object;
  if (w < 0 || w >= f->cfg.workers || h < 0)
    return lsim_fail(eb, LSIM_E_STAGE_ORDER, "kv event of worker %d, object "
                     "%d", w, h);
  if (h >= f->nkv[w]) {
    int n = f->nkv[w] ? f->nkv[w] : 16;
    while (n <= h)
      n *= 2;
    lsim__kvl *k = realloc(f->kv[w], (size_t)n * sizeof *k);
    if (!k)
      return lsim__nomem(eb);
    memset(k + f->nkv[w], 0, (size_t)(n - f->nkv[w]) * sizeof *k);
    f->kv[w] = k;
    f->nkv[w] = n;
  }
  lsim__kvl *k = &f->kv[w][h];
  if (ev->op == LSIM_RES_KV_ALLOC) {
    if (k->n + ev->npages > k->cap) {
      int64_t cap = k->cap ? k->cap : 8;
      while (cap < k->n + ev->npages)
        cap *= 2;
      int64_t *p = realloc(k->pg, (size_t)cap * sizeof *p);
      if (!p)
        return lsim__nomem(eb);
      k->pg = p;
      k->cap = cap;
    }
    memcpy(k->pg + k->n, ev->page, (size_t)ev->npages * sizeof *k->pg);
    k->n += ev->npages;
  } else {
    /* remove the named pages, keeping the order of the rest */
    int64_t o = 0;
    for (int64_t i = 0; i < k->n; i++) {
      int gone = 0;
      for (int64_t j = 0; j < ev->npages && !gone; j++)
        gone = ev->page[j] == k->pg[i];
      if (!gone)
        k->pg[o++] = k->pg[i];
    }
    k->n = o;
  }
  return 0;
}

lsim_err lsim_full_finish(lsim_full *f, lsim_errbuf *eb) {
  return lsim_stage_finish(&f->L, eb);
}

void lsim_full_counts(const lsim_full *f, lsim_backend_counts *out) {
  *out = f->L.c;
}

void lsim_full_page(const lsim_full *f, int w, int64_t page, int *st,
                    int64_t *owner, int64_t *gen) {
  lsim_stage_page_get(&f->L, w, page, st, owner, gen);
}

int64_t lsim_full_load_ns(lsim_full *f, int worker, int object) {
  return lsim_fwd_adapter_load_ns(f->F, worker, object);
}

/* ---- a run ----------------------------------------------------------------- */

/* Verify: module instance (layer l, module m) on integer X, compared with
** the exact delta from the host tier's image. */
static lsim_err lsim__verify(lsim_full *f, const lsim_plan *plan,
                             lsim_backend_result *res, lsim_errbuf *eb) {
  const int nm = f->nmods, L = f->shape.layers;
  int64_t k = plan->iter % ((int64_t)L * nm);
  if (k < 0)
    k += (int64_t)L * nm;
  const int l = (int)(k / nm), m = f->mod[k % nm];
  int64_t di, dout;
  lsim_shape_module_dims(&f->shape, m, &di, &dout);
  const lsim_rowplan *p = &f->rp;
  const int T = p->T;
  const uint64_t key = lsim_fwd_mix(f->cfg.seed ^ 0x7E51F1ull) ^
                       (uint64_t)plan->iter;
  size_t bx = (size_t)T * (size_t)di * 2, by = (size_t)T * (size_t)dout * 2;
  lsim_err rc = 0;
  if (bx > f->dx_cap) {
    lsim_cuda_free(f->dx);
    f->dx = NULL;
    f->dx_cap = 0;
    if ((rc = lsim_cuda_malloc(&f->dx, bx, eb)))
      return rc;
    f->dx_cap = bx;
  }
  if (by > f->dy_cap) {
    lsim_cuda_free(f->dy);
    f->dy = NULL;
    f->dy_cap = 0;
    if ((rc = lsim_cuda_malloc(&f->dy, by, eb)))
      return rc;
    f->dy_cap = by;
  }
  if ((size_t)dout > f->hy_cap) {
    uint16_t *h = realloc(f->hy, (size_t)dout * sizeof *h);
    if (!h)
      return lsim__nomem(eb);
    f->hy = h;
    f->hy_cap = (size_t)dout;
  }
  if ((rc = lsim_fwd_fill_tern(f->dx, (int64_t)T * di, key, NULL, eb)) ||
      (rc = lsim_cuda_memset(f->dy, 0, by, eb)) ||
      (rc = lsim_fwd_delta(f->F, m, l, f->dx, (int)di, f->dy, (int)dout, eb)))
    return rc;
  double maxabs = 0, maxrel = 0;
  int ok = 1;
  const int step = T > LSIM__FV_ROWS ? (T + LSIM__FV_ROWS - 1) / LSIM__FV_ROWS
                                     : 1;
  for (int row = 0; row < T && !rc; row += step) {
    if ((rc = lsim_cuda_d2h(f->hy, (const char *)f->dy +
                                       (size_t)row * (size_t)dout * 2,
                            (size_t)dout * 2, eb)))
      break;
    const int id = p->row_adapter[row];
    if (id < 0) { /* a base row: nothing written */
      for (int64_t c = 0; c < dout; c++)
        if (f->hy[c] != 0)
          ok = 0;
      continue;
    }
    const int art = f->dart[id], r = p->row_rank[row];
    const int64_t *off;
    const uint16_t *img = lsim_fwd_adapter_image(f->F, art, &off);
    if (!img) {
      rc = lsim_fail(eb, LSIM_E_STATE, "verify: no host image of adapter %d",
                     art);
      break;
    }
    const unsigned char *ib = (const unsigned char *)img;
    const int64_t *o = off + ((int64_t)l * LSIM_FWD_MODS + m) * 2 * r;
    double sh[LSIM_CUDA_MAX_RANK];
    for (int i = 0; i < r; i++) {
      const uint16_t *a = (const uint16_t *)(ib + o[i]);
      double acc = 0;
      for (int64_t j = 0; j < di; j++)
        if (a[j])
          acc += (double)lsim_cuda_to_float(LSIM_CUDA_BF16, a[j]) *
                 lsim_fwd_tern(key, (int64_t)row * di + j);
      sh[i] = acc * lsim_fwd_scale();
    }
    for (int64_t c = 0; c < dout; c++) {
      double want = 0;
      for (int i = 0; i < r; i++) {
        const uint16_t *b = (const uint16_t *)(ib + o[r + i]);
        if (b[c])
          want += sh[i] * (double)lsim_cuda_to_float(LSIM_CUDA_BF16, b[c]);
      }
      /* the exact value rounded once to bf16 */
      uint16_t wb = lsim_cuda_from_float(LSIM_CUDA_BF16, (float)want);
      if ((double)(float)want != want)
        ok = 0; /* never: dyadic values of a few bits */
      if (wb != f->hy[c]) {
        double got = lsim_cuda_to_float(LSIM_CUDA_BF16, f->hy[c]);
        double e = fabs(got - want);
        ok = 0;
        if (e > maxabs)
          maxabs = e;
        if (want != 0 && e / fabs(want) > maxrel)
          maxrel = e / fabs(want);
      }
    }
  }
  if (rc)
    return rc;
  static const char *const names[LSIM_FWD_MODS] = {
      "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
      "down_proj"};
  snprintf(f->vref, sizeof f->vref,
           "integer reference (exact; bit-exact owed), full forward, layer "
           "%d %s", l, names[m]);
  f->nverified++;
  res->checked = 1;
  res->exact = ok;
  res->max_abs_err = maxabs;
  res->max_rel_err = maxrel;
  res->reference = f->vref;
  if (!ok)
    return lsim_fail(eb, LSIM_E_PATH_MISMATCH,
                     "iteration %lld: the %s delta of layer %d differs from "
                     "the integer reference (max abs %.3g, bit-exact owed)",
                     (long long)plan->iter, names[m], l, maxabs);
  return 0;
}

static lsim_err lsim__run(lsim_full *f, const lsim_plan *plan,
                          lsim_backend_result *res, lsim_errbuf *eb) {
  const int w = plan->worker, n = plan->n;
  lsim_err rc;
  if (!plan->positions && n > 0)
    return lsim_fail(eb, LSIM_E_BACKEND,
                     "--execute full: the plan carries no positions (ctx, "
                     "sample, kv)");
  if (n > f->cfg.max_batch_requests)
    return lsim_fail(eb, LSIM_E_BACKEND,
                     "--execute full: %d entries, at most %d", n,
                     f->cfg.max_batch_requests);
  if (n > f->ents_cap) {
    lsim_plan_entry *e = realloc(f->ents, (size_t)n * sizeof *e);
    if (!e)
      return lsim__nomem(eb);
    f->ents = e;
    f->ents_cap = n;
  }
  /* dense adapter ids (the distinct (adapter, version) pairs, ascending,
  ** so the row plan's segments keep their order) */
  int nd = 0;
  for (int i = 0; i < n; i++) {
    const lsim_plan_entry *e = &plan->e[i];
    f->ents[i] = *e;
    if (e->adapter < 0) {
      f->ents[i].adapter = LSIM_BASE;
      f->ents[i].rank = 0;
      continue;
    }
    int k = 0;
    while (k < nd && (f->dart[k] != e->adapter || f->dver[k] != e->version))
      k++;
    if (k == nd) {
      f->dart[nd] = e->adapter;
      f->dver[nd++] = e->version;
    }
  }
  for (int i = 1; i < nd; i++) /* ascending (adapter, version) */
    for (int j = i; j > 0 && (f->dart[j] < f->dart[j - 1] ||
                              (f->dart[j] == f->dart[j - 1] &&
                               f->dver[j] < f->dver[j - 1]));
         j--) {
      int a = f->dart[j], v = f->dver[j];
      f->dart[j] = f->dart[j - 1];
      f->dver[j] = f->dver[j - 1];
      f->dart[j - 1] = a;
      f->dver[j - 1] = v;
    }
  for (int i = 0; i < n; i++)
    if (f->ents[i].adapter >= 0) {
      int k = 0;
      while (f->dart[k] != plan->e[i].adapter ||
             f->dver[k] != plan->e[i].version)
        k++;
      f->ents[i].adapter = k;
    }
  if ((rc = lsim_rowplan_build(&f->rp, f->ents, n, NULL, 0, eb)))
    return rc;
  for (int k = 0; k < nd; k++) {
    const lsim_stage_obj *o = lsim_stage_obj_get(&f->L, w, f->dart[k]);
    const int32_t *pt = lsim_fwd_adapter_ptab(f->F, w, f->dart[k]);
    if (!o || o->st != LSIM_STAGE_PUBLISHED || o->version != f->dver[k] ||
        !pt)
      return lsim_fail(eb, LSIM_E_DEV_UNSUPPORTED,
                       "--execute full: iteration %lld names adapter %d "
                       "version %d, which the engine does not hold published "
                       "in its pages (a hotswap lease outside the pool is not "
                       "executed)", (long long)plan->iter, f->dart[k],
                       f->dver[k]);
    f->ad[k].ptab = pt;
    f->ad[k].rank = 0; /* from the entries below */
    f->ad[k].scale = lsim_fwd_scale();
  }
  for (int i = 0; i < n; i++)
    if (f->ents[i].adapter >= 0)
      f->ad[f->ents[i].adapter].rank = plan->e[i].rank;
  /* the sequences: packed order is the plan's (prefills first) */
  for (int i = 0; i < n; i++) {
    const lsim_plan_entry *e = &plan->e[i];
    const lsim__kvl *k = w >= 0 && w < f->cfg.workers && e->kv >= 0 &&
                                 e->kv < f->nkv[w]
                             ? &f->kv[w][e->kv]
                             : NULL;
    f->seq[i] = (lsim_fwd_seq){e->phase == LSIM_PHASE_PREFILL,
                               e->rows,
                               e->ctx,
                               e->sample,
                               e->request,
                               k ? k->pg : NULL,
                               k ? k->n : 0};
  }
  lsim_fwd_batch b = {w, n, f->seq, f->rp.nactive > 0 ? &f->rp : NULL,
                      f->ad, nd, LSIM_CUDA_PATH_AUTO, f->onepass};
  int64_t ns = -1;
  if ((rc = lsim_fwd_run(f->F, &b, &ns, eb)))
    return rc;
  res->backend_ns = ns;
  if (f->cfg.verify && f->nmods && f->rp.nactive > 0)
    rc = lsim__verify(f, plan, res, eb);
  return rc;
}

lsim_err lsim_full_run(lsim_full *f, const lsim_plan *plan,
                       lsim_backend_result *res, lsim_errbuf *eb) {
  memset(res, 0, sizeof *res);
  res->backend_ns = -1;
  lsim_err rc = lsim_stage_check_run(&f->L, plan, eb);
  if (!rc)
    rc = lsim__run(f, plan, res, eb);
  if (rc)
    res->backend_ns = -1;
  res->ok = rc == 0;
  return rc;
}
