/*
** backend_ref.c: the `cpu_ref` replay backend.
**
** For every iteration of a replay this backend builds the frozen row plan
** from the engine's plan entries (engine/rowplan.h), materialises the
** iteration's tensors for one target module of shape d_in x d_out, and
** executes the adapter branch exactly through every execution family and
** scale placement (lsim_ref_delta_all): the iteration is valid only if all
** of them agree to the last bit of every rational.  What it measures
** (wall ns of that work) is recorded and never feeds back into time.
**
** Tensor values are a pure function of (seed, adapter, artifact version,
** module) for the factors (version 0, the catalog's original artifact,
** keeps the values it always had; a hotswapped version draws new ones) and of (seed, iteration, request, token position) for the
** inputs, drawn from LSIM_RNG_TENSORS-derived streams: the same trace and
** seed give the same tensors whatever backend runs them, which is what
** lets the CUDA backend be compared with this one on identical traces.
** Integer mode: entries are small integers (|x| <= 4, |A|, |B| <= 3) and
** the scale is 2 / rank, a genuine rational.
**
** Residency (backend.h): opened with the engine's pool geometry, the
** backend follows the engine's pages through a ledger that keeps bytes
** (backends/stage.h).  A stage of adapter a, version v, draws its factors
** for the module (one signed byte per entry, lsim_factors_draw's layout,
** r * (d_in + d_out) bytes) and writes them into the engine's pages, page
** by page; a run checks the plan's rows against the ledger and reads each
** adapter's factors back through its page ids.  A row leased to another
** artifact version than the one its generation holds (a request leased
** across a hotswap, whose new bytes the engine charges as a KV object
** beside the old ones) has its factors drawn from (a, version) as before.
** Compressed bases are staged as page ownership only: the one module
** executes cores as ordinary adapters.
**
** Load time (the load_ns slot): each stage is timed on CLOCK_MONOTONIC
** around everything it does (the ledger's checks, drawing the factors,
** writing them page by page into the host page store), and the last time
** per (worker, object) is kept.  It is a real copy into the engine's
** pages, measured in this process; a replay under `--clock measured`
** ends the load with it.
*/
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../engine/rowplan.h"
#include "../backend.h"
#include "../stage.h"
#include "cpu_ref.h"
#include "materialise.h"

extern const lsim_backend_ops lsim_backend_cpu_ref;

typedef struct lsim__ref_state {
  lsim_backend_cfg cfg;
  lsim_iter_tensors it;
  lsim_stage_ledger L;
  int *rank;          /* [nadapters] */
  int worker;         /* of the plan being built (the fetch callback) */
  signed char *fb;    /* stage scratch */
  size_t fb_cap;
  int64_t *load_ns;   /* [workers][objects] last stage's ns, -1 never */
} lsim__ref_state;

static int64_t lsim__now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static lsim_err lsim__ref_open(void *state, const lsim_backend_cfg *cfg,
                               lsim_errbuf *eb) {
  lsim__ref_state *s = state;
  if (cfg->d_in < 1 || cfg->d_out < 1)
    return lsim_fail(eb, LSIM_E_BACKEND,
                     "cpu_ref needs a tensor shape (d_in, d_out >= 1)");
  if (cfg->execute != LSIM_EXECUTE_ADAPTERS)
    return lsim_fail(eb, LSIM_E_BACKEND,
                     "cpu_ref executes the adapter branch only: --execute "
                     "full needs --backend cuda");
  s->cfg = *cfg;
  s->cfg.target_d_in = s->cfg.target_d_out = NULL;
  s->cfg.adapter_rank = NULL;
  lsim_err rc = lsim_stage_open(&s->L, cfg, 1, eb);
  if (rc || !s->L.on)
    return rc;
  size_t nobj = (size_t)cfg->workers * (size_t)cfg->objects;
  s->rank = malloc((size_t)cfg->nadapters * sizeof *s->rank);
  s->load_ns = malloc((nobj ? nobj : 1) * sizeof *s->load_ns);
  if (!s->rank || !s->load_ns) {
    free(s->rank);
    free(s->load_ns);
    s->rank = NULL;
    s->load_ns = NULL;
    lsim_stage_close(&s->L);
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory opening cpu_ref");
  }
  memcpy(s->rank, cfg->adapter_rank, (size_t)cfg->nadapters * sizeof *s->rank);
  for (size_t i = 0; i < nobj; i++)
    s->load_ns[i] = -1;
  return 0;
}

static lsim_err lsim__ref_stage_do(lsim__ref_state *s,
                                   const lsim_res_page_ev *ev,
                                   lsim_errbuf *eb) {
  lsim_err rc = lsim_stage_on_stage(&s->L, ev, eb);
  if (rc || ev->object >= s->cfg.nadapters)
    return rc; /* a basis: page ownership only */
  int r = s->rank[ev->object];
  size_t n = (size_t)r * (size_t)(s->cfg.d_in + s->cfg.d_out);
  if (n > s->fb_cap) {
    signed char *nb = realloc(s->fb, n);
    if (!nb)
      return lsim_fail(eb, LSIM_E_NOMEM, "out of memory staging");
    s->fb = nb;
    s->fb_cap = n;
  }
  lsim_factors_draw(s->cfg.seed, ev->object, (int)ev->version, r,
                    s->cfg.d_in, s->cfg.d_out, s->fb);
  return lsim_stage_write(&s->L, ev->worker, ev->object, s->fb, (int64_t)n,
                          eb);
}

/* A stage, timed: a failed one leaves the object's last time as it was. */
static lsim_err lsim__ref_stage(void *state, const lsim_res_page_ev *ev,
                                lsim_errbuf *eb) {
  lsim__ref_state *s = state;
  int64_t t0 = lsim__now_ns();
  lsim_err rc = lsim__ref_stage_do(s, ev, eb);
  if (!rc && s->load_ns && ev->worker >= 0 && ev->worker < s->cfg.workers &&
      ev->object >= 0 && ev->object < s->cfg.objects)
    s->load_ns[(size_t)ev->worker * (size_t)s->cfg.objects +
               (size_t)ev->object] = lsim__now_ns() - t0;
  return rc;
}

static int64_t lsim__ref_load_ns(void *state, int w, int obj) {
  const lsim__ref_state *s = state;
  if (!s->load_ns || w < 0 || w >= s->cfg.workers || obj < 0 ||
      obj >= s->cfg.objects)
    return -1;
  return s->load_ns[(size_t)w * (size_t)s->cfg.objects + (size_t)obj];
}

#define LSIM__REF_FWD(fn, on)                                              \
  static lsim_err fn(void *state, const lsim_res_page_ev *ev,             \
                     lsim_errbuf *eb) {                                    \
    return on(&((lsim__ref_state *)state)->L, ev, eb);                     \
  }
LSIM__REF_FWD(lsim__ref_publish, lsim_stage_on_publish)
LSIM__REF_FWD(lsim__ref_retire, lsim_stage_on_retire)
LSIM__REF_FWD(lsim__ref_launch, lsim_stage_on_launch)
LSIM__REF_FWD(lsim__ref_kv, lsim_stage_on_kv)
#undef LSIM__REF_FWD

static lsim_err lsim__ref_finish(void *state, lsim_errbuf *eb) {
  return lsim_stage_finish(&((lsim__ref_state *)state)->L, eb);
}

static void lsim__ref_counts(const void *state, lsim_backend_counts *out) {
  *out = ((const lsim__ref_state *)state)->L.c;
}

static void lsim__ref_page(const void *state, int w, int64_t page, int *st,
                           int64_t *owner, int64_t *gen) {
  lsim_stage_page_get(&((const lsim__ref_state *)state)->L, w, page, st, owner,
                      gen);
}

/* The factors of (art, ver) through the engine's pages when the worker's
** published generation of art holds that version. */
static int lsim__ref_fetch(void *ud, int art, int ver, int r, signed char *out,
                           lsim_errbuf *eb) {
  lsim__ref_state *s = ud;
  const lsim_stage_obj *o = lsim_stage_obj_get(&s->L, s->worker, art);
  if (!o || o->st != LSIM_STAGE_PUBLISHED || o->version != ver ||
      r != s->rank[art])
    return 0;
  lsim_err rc = lsim_stage_read(&s->L, s->worker, art, out,
                                (int64_t)r * (s->cfg.d_in + s->cfg.d_out), eb);
  return rc ? rc : 1;
}

lsim_stage_ledger *lsim_backend_cpu_ref__ledger(lsim_backend *b) {
  return b->ops == &lsim_backend_cpu_ref ? &((lsim__ref_state *)b->state)->L
                                         : NULL;
}

static lsim_err lsim__ref_run(void *state, const lsim_plan *plan,
                              lsim_backend_result *res, lsim_errbuf *eb) {
  lsim__ref_state *s = state;
  int64_t t0 = lsim__now_ns();
  lsim_err rc = lsim_stage_check_run(&s->L, plan, eb);
  if (rc) {
    res->ok = 0;
    return rc;
  }
  s->worker = plan->worker;
  rc = lsim_iter_tensors_build_with(&s->it, plan, s->cfg.seed, s->cfg.d_in,
                                    s->cfg.d_out,
                                    s->L.on ? lsim__ref_fetch : NULL, s, eb);
  if (!rc)
    rc = lsim_ref_delta_all(&s->it.rp, &s->it.X, s->it.ad, s->it.nad, NULL,
                            eb); /* the verdict only */
  res->backend_ns = lsim__now_ns() - t0;
  res->ok = rc == 0;
  res->checked = rc == 0 || rc == LSIM_E_PATH_MISMATCH;
  res->exact = rc == 0;
  res->reference = "cpu_ref: every execution family and scale placement";
  return rc;
}

static void lsim__ref_close(void *state) {
  lsim__ref_state *s = state;
  lsim_iter_tensors_release(&s->it);
  lsim_stage_close(&s->L);
  free(s->rank);
  free(s->fb);
  free(s->load_ns);
}

const lsim_backend_ops lsim_backend_cpu_ref = {
    .name = "cpu_ref",
    .state_size = sizeof(lsim__ref_state),
    .flags = LSIM_BACKEND_EXECUTES,
    .open = lsim__ref_open,
    .run = lsim__ref_run,
    .close = lsim__ref_close,
    .stage = lsim__ref_stage,
    .publish = lsim__ref_publish,
    .retire = lsim__ref_retire,
    .launch = lsim__ref_launch,
    .kv = lsim__ref_kv,
    .finish = lsim__ref_finish,
    .counts = lsim__ref_counts,
    .page = lsim__ref_page,
    .load_ns = lsim__ref_load_ns,
};
