/*
** backend_cuda.c: the `cuda` replay backend.
**
** Each iteration's adapter work for one d_in x d_out target module runs
** through the paged kernel of the device adapter pool (pool.h) on the
** tensors every tensor backend shares (backends/cpu_ref/materialise.h), in
** fp16 (11 significant bits, so the small-integer deltas of power-of-two
** ranks up to 64 are representable).
**
** Adapters are resident across iterations: an artifact (adapter, version)
** the iteration needs and the pool does not hold is loaded through the
** pool's event-fenced, digest-validated publication (pinned staging, copy
** stream, copy event, SHA-256 of the staged bytes, device checksum) and
** only then named by a launch; when the pool's pages or ids run out, the
** least recently used artifact the iteration does not need is retired, and
** its pages are reused only after its last launch completed.
**
** iterations.backend_ns is device time: two CUDA events on the launch
** stream around the iteration's metadata copy and kernel launch.  With
** verify, the exact reference (cpu_ref, per-row family) is computed too and
** the comparison becomes a `validations` row: bit-exact is required when
** the inputs were representable, a relative error of at most 1e-2
** otherwise; anything worse fails the iteration (and so the run).
** Simulated time still comes from the cost model.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../backend.h"
#include "../cpu_ref/materialise.h"
#include "gpu_exact.h"
#include "pool.h"

#define LSIM__CU_IDS 64        /* pool adapter ids */
#define LSIM__CU_RANK 256      /* largest rank the replay pool takes */
#define LSIM__CU_PAGES 4096    /* pool pages (a page: one 16-wide vector) */

typedef struct lsim__cu_res {
  int art, ver, rank;  /* the artifact */
  int exact;           /* its factors were representable in fp16 */
  int64_t last_iter;   /* last iteration that needed it */
} lsim__cu_res;

typedef struct lsim__cuda_state {
  lsim_backend_cfg cfg;
  lsim_iter_tensors it;
  lsim_cuda_pool *pool;
  void *stream;
  lsim__cu_res res[LSIM__CU_IDS]; /* by pool id; art < 0: unused */
  int *remap;   /* plan id -> pool id */
  int remap_cap;
  uint16_t *hx, *hy, *hA, *hB;
  size_t hx_cap, hy_cap, hf_cap;
  void *dx, *dy;
  size_t dx_cap, dy_cap; /* bytes */
} lsim__cuda_state;

static lsim_err lsim__cuda_open(void *state, const lsim_backend_cfg *cfg,
                                lsim_errbuf *eb) {
  lsim__cuda_state *s = state;
  char desc[256];
  lsim_err rc;
  if (lsim_cuda_describe(desc, sizeof desc) <= 0)
    return lsim_fail(eb, LSIM_E_BACKEND, "backend cuda: %s", desc);
  if (cfg->d_in < 1 || cfg->d_out < 1)
    return lsim_fail(eb, LSIM_E_BACKEND,
                     "cuda needs a tensor shape (d_in, d_out >= 1)");
  s->cfg = *cfg;
  for (int i = 0; i < LSIM__CU_IDS; i++)
    s->res[i].art = -1;
  if ((rc = lsim_cuda_stream_create(&s->stream, eb)))
    return rc;
  lsim_cuda_pool_cfg pc = {0,      LSIM_CUDA_FP16, cfg->d_in,
                           cfg->d_out, LSIM__CU_PAGES, LSIM__CU_IDS,
                           LSIM__CU_RANK, 0, 0, s->stream};
  if ((rc = lsim_cuda_pool_open(&s->pool, &pc, eb))) {
    lsim_cuda_stream_destroy(s->stream);
    s->stream = NULL;
  }
  return rc;
}

/* Grow a host buffer of 16-bit values to n elements. */
static lsim_err lsim__grow16(uint16_t **p, size_t *cap, size_t n,
                             lsim_errbuf *eb) {
  if (n <= *cap)
    return 0;
  uint16_t *q = realloc(*p, n * sizeof *q);
  if (!q)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  *p = q;
  *cap = n;
  return 0;
}

static lsim_err lsim__growdev(void **p, size_t *cap, size_t bytes,
                              lsim_errbuf *eb) {
  if (bytes <= *cap)
    return 0;
  lsim_cuda_free(*p);
  *p = NULL;
  *cap = 0;
  lsim_err rc = lsim_cuda_malloc(p, bytes * 2, eb);
  if (!rc)
    *cap = bytes * 2;
  return rc;
}

/* q rounded to fp16; *exact cleared when that is not q itself. */
static uint16_t lsim__to16(mpq_t q, mpq_t back, int *exact) {
  uint16_t h = lsim_cuda_from_float(LSIM_CUDA_FP16, (float)mpq_get_d(q));
  mpq_set_d(back, (double)lsim_cuda_to_float(LSIM_CUDA_FP16, h));
  if (mpq_cmp(back, q) != 0)
    *exact = 0;
  return h;
}

/* Pool id of an artifact, or -1. */
static int lsim__cu_find(const lsim__cuda_state *s, int art, int ver) {
  for (int i = 0; i < LSIM__CU_IDS; i++)
    if (s->res[i].art == art && s->res[i].ver == ver)
      return i;
  return -1;
}

/* Retire the least recently used artifact not needed by iteration `iter`;
** its pool id, or -1 when every resident artifact is needed. */
static int lsim__cu_evict(lsim__cuda_state *s, int64_t iter, lsim_errbuf *eb,
                          lsim_err *rc) {
  int v = -1;
  for (int i = 0; i < LSIM__CU_IDS; i++)
    if (s->res[i].art >= 0 && s->res[i].last_iter != iter &&
        (v < 0 || s->res[i].last_iter < s->res[v].last_iter))
      v = i;
  if (v >= 0) {
    *rc = lsim_cuda_pool_retire(s->pool, v, eb);
    s->res[v].art = -1;
  }
  return v;
}

/* Make adapter k of the iteration resident and published; *pid its id. */
static lsim_err lsim__cu_ensure(lsim__cuda_state *s, const lsim_qadapter *ad,
                                int art, int ver, int64_t iter, int *pid,
                                lsim_errbuf *eb) {
  lsim_err rc = 0;
  int id = lsim__cu_find(s, art, ver);
  const int d_in = s->cfg.d_in, d_out = s->cfg.d_out, r = ad->rank;
  if (id >= 0 && s->res[id].rank != r) {
    /* the same artifact at another rank (calibration sweeps do this): a
    ** different tensor, so the resident one goes */
    if ((rc = lsim_cuda_pool_retire(s->pool, id, eb)))
      return rc;
    s->res[id].art = -1;
    id = -1;
  }
  if (id >= 0) {
    s->res[id].last_iter = iter;
    *pid = id;
    return 0;
  }
  if (r > LSIM__CU_RANK)
    return lsim_fail(eb, LSIM_E_BACKEND,
                     "backend cuda: adapter %d has rank %d; the device pool "
                     "takes ranks up to %d", art, r, LSIM__CU_RANK);
  for (int i = 0; i < LSIM__CU_IDS && id < 0; i++)
    if (s->res[i].art < 0)
      id = i;
  if (id < 0 && (id = lsim__cu_evict(s, iter, eb, &rc)) < 0)
    return rc ? rc
              : lsim_fail(eb, LSIM_E_BACKEND,
                          "backend cuda: more than %d adapters in one "
                          "iteration", LSIM__CU_IDS);
  if (rc)
    return rc;
  if ((rc = lsim__grow16(&s->hA, &s->hf_cap,
                         (size_t)r * (size_t)(d_in > d_out ? d_in : d_out),
                         eb)))
    return rc;
  uint16_t *nb = realloc(s->hB, s->hf_cap * sizeof *nb);
  if (!nb)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  s->hB = nb;
  int exact = 1;
  mpq_t back;
  mpq_init(back);
  for (int i = 0; i < r; i++)
    for (int j = 0; j < d_in; j++)
      s->hA[(size_t)i * (size_t)d_in + (size_t)j] =
          lsim__to16(LSIM_QAT(&ad->A, i, j), back, &exact);
  for (int i = 0; i < d_out; i++)
    for (int j = 0; j < r; j++)
      s->hB[(size_t)i * (size_t)r + (size_t)j] =
          lsim__to16(LSIM_QAT(&ad->B, i, j), back, &exact);
  float sc = (float)mpq_get_d(ad->scale);
  mpq_set_d(back, (double)sc);
  if (mpq_cmp(back, ad->scale) != 0)
    exact = 0;
  mpq_clear(back);
  for (;;) {
    lsim_errbuf e2 = LSIM_ERRBUF_INIT;
    rc = lsim_cuda_pool_load(s->pool, id, r, sc, s->hA, s->hB, NULL, &e2);
    if (rc != LSIM_E_DEV_NOSPACE) {
      if (rc)
        return lsim_fail(eb, rc, "%s", e2.msg);
      break;
    }
    if (lsim__cu_evict(s, iter, eb, &rc) < 0)
      return rc ? rc : lsim_fail(eb, LSIM_E_DEV_NOSPACE, "%s", e2.msg);
    if (rc)
      return rc;
  }
  /* the one visibility point: after the copy event, digest and checksum */
  if ((rc = lsim_cuda_pool_publish(s->pool, id, 1, NULL, eb)))
    return rc;
  s->res[id] = (lsim__cu_res){art, ver, r, exact, iter};
  *pid = id;
  return 0;
}

static lsim_err lsim__cuda_run(void *state, const lsim_plan *plan,
                               lsim_backend_result *res, lsim_errbuf *eb) {
  lsim__cuda_state *s = state;
  lsim_qmat G = LSIM_QMAT_INIT, R = LSIM_QMAT_INIT;
  const int d_in = s->cfg.d_in, d_out = s->cfg.d_out;
  const int ldx = (d_in + 7) / 8 * 8, ldy = (d_out + 7) / 8 * 8;
  int exact_in = 1, maxa = -1, maxid = -1;
  int64_t ns = -1;
  mpq_t back;
  mpq_init(back);
  lsim_err rc = lsim_iter_tensors_build(&s->it, plan, s->cfg.seed, d_in,
                                        d_out, eb);
  const lsim_rowplan *p = &s->it.rp;
  const int T = p->T;
  if (rc)
    goto out;
  /* the artifact of each plan id, as materialise.c numbers them */
  for (int i = 0; i < plan->n; i++)
    if (plan->e[i].adapter > maxa)
      maxa = plan->e[i].adapter;
  for (int k = 0; k < s->it.nad; k++)
    if (s->it.ad[k].id > maxid)
      maxid = s->it.ad[k].id;
  if (maxid + 1 > s->remap_cap) {
    int *nr = realloc(s->remap, (size_t)(maxid + 1) * sizeof *nr);
    if (!nr) {
      rc = lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
      goto out;
    }
    s->remap = nr;
    s->remap_cap = maxid + 1;
  }
  for (int k = 0; k < s->it.nad && !rc; k++) {
    const lsim_qadapter *ad = &s->it.ad[k];
    int art = ad->id > maxa ? s->it.vad[ad->id - maxa - 1] : ad->id;
    int ver = ad->id > maxa ? s->it.vver[ad->id - maxa - 1] : 0;
    int pid = -1;
    rc = lsim__cu_ensure(s, ad, art, ver, plan->iter, &pid, eb);
    if (!rc) {
      s->remap[ad->id] = pid;
      if (!s->res[pid].exact)
        exact_in = 0;
    }
  }
  if (rc)
    goto out;
  /* X in fp16 and a zeroed Y (the delta alone is compared) */
  if ((rc = lsim__grow16(&s->hx, &s->hx_cap, (size_t)(T > 0 ? T : 1) *
                                                 (size_t)ldx, eb)) ||
      (rc = lsim__grow16(&s->hy, &s->hy_cap, (size_t)(T > 0 ? T : 1) *
                                                 (size_t)ldy, eb)))
    goto out;
  memset(s->hx, 0, (size_t)(T > 0 ? T : 1) * (size_t)ldx * 2);
  for (int t = 0; t < T; t++)
    for (int j = 0; j < d_in; j++)
      s->hx[(size_t)t * (size_t)ldx + (size_t)j] =
          lsim__to16(LSIM_QAT(&s->it.X, t, j), back, &exact_in);
  if (T > 0) {
    if ((rc = lsim__growdev(&s->dx, &s->dx_cap, (size_t)T * (size_t)ldx * 2,
                            eb)) ||
        (rc = lsim__growdev(&s->dy, &s->dy_cap, (size_t)T * (size_t)ldy * 2,
                            eb)) ||
        (rc = lsim_cuda_h2d(s->dx, s->hx, (size_t)T * (size_t)ldx * 2, eb)) ||
        (rc = lsim_cuda_memset(s->dy, 0, (size_t)T * (size_t)ldy * 2, eb)) ||
        (rc = lsim_cuda_pool_run(s->pool, p, s->remap, s->remap_cap, s->dx,
                                 ldx, s->dy, ldy, eb)) ||
        (rc = lsim_cuda_pool_last_ns(s->pool, &ns, eb)) ||
        (rc = lsim_cuda_d2h(s->hy, s->dy, (size_t)T * (size_t)ldy * 2, eb)))
      goto out;
  } else {
    ns = 0;
  }
  if (s->cfg.verify) {
    if ((rc = lsim_qmat_init(&G, T, d_out, eb)))
      goto out;
    for (int t = 0; t < T; t++)
      for (int c = 0; c < d_out; c++)
        mpq_set_d(LSIM_QAT(&G, t, c),
                  (double)lsim_cuda_to_float(
                      LSIM_CUDA_FP16, s->hy[(size_t)t * (size_t)ldy + (size_t)c]));
    rc = lsim_qmat_init(&R, T, d_out, eb);
    if (!rc)
      rc = lsim_ref_delta(p, &s->it.X, s->it.ad, s->it.nad, LSIM_REF_PER_ROW,
                          LSIM_SCALE_PASSED, &R, eb);
    if (!rc) {
      lsim_q_errors(&G, &R, &res->max_abs_err, &res->max_rel_err,
                    &res->exact);
      /* bit-exactness is owed when fp16 holds every input and every exact
      ** output value; otherwise the bound is a relative error of 1e-2 */
      int owed = exact_in && lsim_q_representable(&R, LSIM_CUDA_FP16);
      res->checked = 1;
      res->reference = owed ? "cpu_ref (exact; bit-exact owed)"
                            : "cpu_ref (exact; within 1e-2 owed)";
      if ((owed && !res->exact) || !(res->max_rel_err <= 1e-2))
        rc = lsim_fail(eb, LSIM_E_PATH_MISMATCH,
                       "iteration %lld: cuda paged kernel differs from "
                       "cpu_ref (max abs %.3g, rel %.3g%s)",
                       (long long)plan->iter, res->max_abs_err,
                       res->max_rel_err, owed ? ", bit-exact owed" : "");
    }
  }
out:
  res->backend_ns = rc ? -1 : ns;
  res->ok = rc == 0;
  lsim_qmat_clear(&G);
  lsim_qmat_clear(&R);
  mpq_clear(back);
  return rc;
}

static void lsim__cuda_close(void *state) {
  lsim__cuda_state *s = state;
  lsim_iter_tensors_release(&s->it);
  lsim_cuda_pool_close(s->pool);
  lsim_cuda_stream_destroy(s->stream);
  lsim_cuda_free(s->dx);
  lsim_cuda_free(s->dy);
  free(s->remap);
  free(s->hx);
  free(s->hy);
  free(s->hA);
  free(s->hB);
}

const lsim_backend_ops lsim_backend_cuda = {
    /* .name       = */ "cuda",
    /* .state_size = */ sizeof(lsim__cuda_state),
    /* .open       = */ lsim__cuda_open,
    /* .stage      = */ NULL,
    /* .run        = */ lsim__cuda_run,
    /* .close      = */ lsim__cuda_close,
};
