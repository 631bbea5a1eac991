/*
** prefix_report.c: `lorasim prefix`, the prefix-cache study of issue 8.
**
** A request trace with prefix block ids (Mooncake FAST'25 by default) is
** assigned adapters by the trace stage (traces/assign.c) and replayed four
** times through the prefix cache (engine/prefix.c), once per key mode:
**
**   oblivious       no adapter in the key (UNSAFE: the run counts the
**                   corrupt hits it would serve, from a second, correct
**                   key derivation kept beside every block)
**   raw_adapter     the requested adapter id in every block key
**   semantic        the adapter semantic ABI through the dependency
**                   closure (LM-head-only adapters share base K/V, aliases
**                   of one artifact share), aLoRA keyed from position 0
**   semantic_alora  the same plus the aLoRA interval exception: blocks
**                   wholly before the invocation are base blocks
**
** The catalog: each adapter gets a class from its own seeded stream
** (LSIM_RNG_CATALOG): ordinary LoRA (q,k,v,o of layer 0), LM-head only,
** aLoRA (q,k,v of layer 0, invocation = the prompt's last
** --invocation-tokens tokens), or an alias of an earlier adapter's
** artifact; a --base-share of requests runs the base model (their own
** stream).  A trace block id stands for block_tokens tokens and is one
** pseudo token of the manifest; a partial last block is never published
** or matched.  The aLoRA offset is explicit (the trace has no token ids):
** the block holding the first invocation token.
**
** Time: arrivals from the trace; each request's prefill is one iteration
** costed by the model backend's cost function (lsim_cost_plan_ns) on the
** first free of --servers prefill servers (FCFS, lowest index on ties);
** its blocks are published when the prefill ends and released when decode
** ends (output tokens x --decode-ms per token).  TTFT = prefill end -
** arrival.  Events are ordered by (time, sequence): the output depends on
** the trace, the options and the seed only.
*/
#include "prefix_report.h"
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outfile.h"
#include "../backends/backend.h"
#include "../engine/kv.h"
#include "../engine/prefix.h"
#include "../engine/residency.h"
#include "../traces/trace.h"
#include "escape.h"
#include "plot_run.h"
#include "../base/rng.h"

#define LSIM__PX_RNG_BASE 0x7078000000000001ull /* base-share draws */
#define LSIM__NMODES 4

enum { LSIM__C_LORA = 0, LSIM__C_LMHEAD, LSIM__C_ALORA, LSIM__C_ALIAS };
static const char *const lsim__class_names[] = {"lora", "lm_head", "alora",
                                                "alias"};

typedef struct lsim__pxopt {
  const char *trace, *format, *out;
  double requests, seed, adapters, zipf, block_tokens, cache_blocks;
  double base_share, lmhead_share, alora_share, alias_share, inv_tokens;
  double prefill_ns, iter_ns, decode_ms, servers;
  int plots;
  int sticky; /* a conversation keeps the adapter of its first turn */
} lsim__pxopt;

typedef struct lsim__adp {
  int cls, root;
  lsim_digest semantic, artifact, raw;
  lsim_kv_adapter a;
} lsim__adp;

/* One request between admission and completion. */
typedef struct lsim__live {
  int used;
  lsim_kv_keys keys, truth;
  lsim_prefix_receipt rc;
  int adapter;
  int64_t full;
} lsim__live;

typedef struct lsim__ev {
  int64_t t, seq;
  int kind; /* 0 publish, 1 release */
  int slot;
} lsim__ev;

typedef struct lsim__mres {
  int64_t requests, prompt_tokens, full_blocks, hit_blocks, hit_tokens;
  int64_t recomputed, corrupt_blocks, corrupt_requests, evictions;
  int64_t published, stopped_full;
  double ttft_mean_ms, ttft_p50_ms, ttft_p99_ms;
} lsim__mres;

static const lsim_kv_target lsim__t_lora[4] = {
    {0, LSIM_KV_Q}, {0, LSIM_KV_K}, {0, LSIM_KV_V}, {0, LSIM_KV_O}};
static const lsim_kv_target lsim__t_alora[3] = {
    {0, LSIM_KV_Q}, {0, LSIM_KV_K}, {0, LSIM_KV_V}};
static const lsim_kv_target lsim__t_lm[1] = {{-1, LSIM_KV_LM_HEAD}};
/* The invocation's token ids are part of the artifact; the study only
** knows where it starts (explicit offset), so this stands for them. */
static const int64_t lsim__inv[1] = {0};

static void lsim__px_usage(FILE *f) {
  fputs(
      "usage: lorasim prefix [options]\n"
      "\n"
      "Replay a trace with prefix block ids through the adapter-aware prefix\n"
      "cache under four key modes (oblivious, raw_adapter, semantic,\n"
      "semantic_alora) and report prefix hit rate, recomputed prefill tokens\n"
      "and TTFT per mode: a table, DIR/prefix.csv, DIR/prefix-adapters.csv\n"
      "and DIR/prefix.png (gnuplot).  The oblivious mode is UNSAFE: it counts\n"
      "the corrupt hits (K/V of another execution) it would have served.\n"
      "\n"
      "options:\n"
      "  --trace PATH        trace (default: the Mooncake conversation trace\n"
      "                      in ../shared/data/traces/mooncake-fast25)\n"
      "  --format NAME       trace format (default mooncake)\n"
      "  --requests N        first N requests only (default: all)\n"
      "  --seed N            seed of every draw (default 0)\n"
      "  --adapters N        catalog size (default 32)\n"
      "  --zipf S            adapter popularity exponent (default 1.0)\n"
      "  --base-share P      share of requests on the base model (0.2)\n"
      "  --lmhead-share P    share of adapters that adapt only the LM head "
      "(0.1)\n"
      "  --alora-share P     share of activated LoRA adapters (0.3)\n"
      "  --alias-share P     share of aliases of an earlier artifact (0.1)\n"
      "  --invocation-tokens N  aLoRA invocation length at the prompt end (8)\n"
      "  --block-tokens N    tokens per trace block id (default 512)\n"
      "  --cache-blocks N    cache capacity in blocks = pool pages "
      "(default 16384)\n"
      "  --servers N         prefill servers (default 2)\n"
      "  --prefill-token-ns N  cost per prefill token (default 20000)\n"
      "  --iter-fixed-ns N   cost per prefill iteration (default 4000000)\n"
      "  --decode-ms N       decode time per output token (default 30)\n"
      "  --sticky            a conversation (requests sharing block 1) keeps\n"
      "                      the adapter of its first request\n"
      "  --out DIR           output directory, made in one that exists\n"
      "                      (default results/prefix)\n"
      "  --no-plots          no PNG\n"
      "  -h, --help          this text\n"
      "\n"
      "exit status: 0 ok, 1 failure, 2 bad usage or input\n",
      f);
}

static int lsim__px_num(const char *s, double lo, double hi, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || *end || errno || !(v >= lo && v <= hi))
    return -1;
  *out = v;
  return 0;
}

static lsim_digest lsim__dg(const char *fmt, int a, int b) {
  char buf[96];
  lsim_digest d;
  int n = snprintf(buf, sizeof buf, fmt, a, b);
  lsim_sha256(buf, (size_t)n, &d, NULL);
  return d;
}

/* The catalog classes, drawn from the catalog stream. */
static void lsim__catalog(const lsim__pxopt *o, lsim__adp *ad, int n) {
  lsim_rng r;
  lsim_rng_init(&r, (uint64_t)o->seed, LSIM_RNG_CATALOG);
  for (int a = 0; a < n; a++) {
    double u = lsim_rng_unit(&r);
    int cls = LSIM__C_LORA, root = a;
    if (u < o->lmhead_share)
      cls = LSIM__C_LMHEAD;
    else if (u < o->lmhead_share + o->alora_share)
      cls = LSIM__C_ALORA;
    else if (u < o->lmhead_share + o->alora_share + o->alias_share && a > 0) {
      cls = LSIM__C_ALIAS;
      root = ad[lsim_rng_below(&r, (uint64_t)a)].root;
    }
    lsim__adp *x = &ad[a];
    memset(x, 0, sizeof *x);
    x->cls = cls;
    x->root = root;
    int rc = cls == LSIM__C_ALIAS ? ad[root].cls : cls;
    x->artifact = lsim__dg("prefix-study artifact %d", root, 0);
    x->semantic = lsim__dg("prefix-study semantic %d kind %d", root, rc);
    x->raw = lsim__dg("prefix-study alias %d", a, 0);
    x->a.kind = rc == LSIM__C_ALORA ? LSIM_KV_ALORA : LSIM_KV_LORA;
    x->a.semantic = x->semantic;
    x->a.artifact = x->artifact;
    x->a.raw_id = x->raw;
    x->a.explicit_start = -1;
    if (rc == LSIM__C_LMHEAD) {
      x->a.targets = lsim__t_lm;
      x->a.ntargets = 1;
    } else if (rc == LSIM__C_ALORA) {
      x->a.targets = lsim__t_alora;
      x->a.ntargets = 3;
      x->a.offset_mode = LSIM_KV_OFFSET_EXPLICIT;
      x->a.invocation = lsim__inv;
      x->a.ninvocation = 1;
    } else {
      x->a.targets = lsim__t_lora;
      x->a.ntargets = 4;
    }
  }
}

/* ---- a binary heap of (t, seq) events --------------------------------- */

typedef struct lsim__heap {
  lsim__ev *e;
  int n, cap;
} lsim__heap;

static int lsim__ev_lt(const lsim__ev *a, const lsim__ev *b) {
  return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static int lsim__heap_push(lsim__heap *h, lsim__ev v) {
  if (h->n == h->cap) {
    int cap = h->cap ? 2 * h->cap : 256;
    lsim__ev *e = realloc(h->e, (size_t)cap * sizeof *e);
    if (!e)
      return -1;
    h->e = e;
    h->cap = cap;
  }
  int i = h->n++;
  while (i > 0 && lsim__ev_lt(&v, &h->e[(i - 1) / 2])) {
    h->e[i] = h->e[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  h->e[i] = v;
  return 0;
}

static lsim__ev lsim__heap_pop(lsim__heap *h) {
  lsim__ev top = h->e[0], last = h->e[--h->n];
  int i = 0;
  for (;;) {
    int c = 2 * i + 1;
    if (c >= h->n)
      break;
    if (c + 1 < h->n && lsim__ev_lt(&h->e[c + 1], &h->e[c]))
      c++;
    if (!lsim__ev_lt(&h->e[c], &last))
      break;
    h->e[i] = h->e[c];
    i = c;
  }
  if (h->n)
    h->e[i] = last;
  return top;
}

static int lsim__cmp_i64(const void *x, const void *y) {
  int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
  return (a > b) - (a < b);
}

/* ---- conversations (--sticky) ---------------------------------------------
** A Mooncake request carries no session id.  Block 0 is shared by nearly
** every request (a system prompt); a request whose block 1 equals an
** earlier request's block 1 continues that conversation, so with --sticky
** it gets the adapter (or the base model) of the conversation's first
** request.  An open-addressing map from that block id to the choice. */

typedef struct lsim__conv {
  uint64_t *key;
  int *val;
  uint8_t *used;
  uint64_t cap, n;
} lsim__conv;

static int lsim__conv_get(lsim__conv *c, uint64_t k, int *v, int put) {
  if (put && 2 * (c->n + 1) > c->cap) {
    lsim__conv d = {0};
    d.cap = c->cap ? 2 * c->cap : 4096;
    d.key = calloc(d.cap, sizeof *d.key);
    d.val = calloc(d.cap, sizeof *d.val);
    d.used = calloc(d.cap, 1);
    if (!d.key || !d.val || !d.used) {
      free(d.key);
      free(d.val);
      free(d.used);
      return -1;
    }
    for (uint64_t i = 0; i < c->cap; i++)
      if (c->used[i])
        lsim__conv_get(&d, c->key[i], &c->val[i], 1);
    free(c->key);
    free(c->val);
    free(c->used);
    *c = d;
  }
  if (!c->cap)
    return 0;
  uint64_t i = (k * 0x9e3779b97f4a7c15ull) & (c->cap - 1);
  while (c->used[i] && c->key[i] != k)
    i = (i + 1) & (c->cap - 1);
  if (c->used[i]) {
    *v = c->val[i];
    return 1;
  }
  if (put) {
    c->used[i] = 1;
    c->key[i] = k;
    c->val[i] = *v;
    c->n++;
  }
  return 0;
}

/* ---- one mode ----------------------------------------------------------- */

typedef struct lsim__run {
  const lsim__pxopt *o;
  lsim__adp *ad;
  int nad;
  lsim_res *pool;
  lsim_prefix *pc;
  lsim__live *live;
  int nlive, cap;
  lsim__heap h;
  int64_t seq;
  lsim__mres *res;
} lsim__run;

static lsim_err lsim__apply(lsim__run *R, lsim__ev ev, lsim_errbuf *eb) {
  lsim__live *L = &R->live[ev.slot];
  if (ev.kind == 0) {
    int64_t pub;
    return lsim_prefix_publish(R->pc, &L->rc, &L->keys, &L->truth, L->adapter,
                               L->full, &pub, eb);
  }
  lsim_err rc = lsim_prefix_unref(R->pc, &L->rc, eb);
  lsim_kv_keys_release(&L->keys);
  lsim_kv_keys_release(&L->truth);
  L->used = 0;
  return rc;
}

static int lsim__slot(lsim__run *R) {
  for (int i = 0; i < R->nlive; i++)
    if (!R->live[i].used)
      return i;
  if (R->nlive == R->cap) {
    int cap = R->cap ? 2 * R->cap : 64;
    lsim__live *l = realloc(R->live, (size_t)cap * sizeof *l);
    if (!l)
      return -1;
    memset(l + R->cap, 0, (size_t)(cap - R->cap) * sizeof *l);
    R->live = l;
    R->cap = cap;
  }
  return R->nlive++;
}

static lsim_err lsim__open_trace(const lsim__pxopt *o, lsim_trace *t,
                                 lsim_errbuf *eb) {
  int format = lsim_trace_format_find(o->format);
  if (format < 0 || format == LSIM_TRACE_GEN || format == LSIM_TRACE_SERVEGEN)
    return lsim_fail(eb, LSIM_E_USAGE, "--format: '%s' is not a trace file "
                     "format with prefix blocks", o->format);
  lsim_assign_spec as;
  memset(&as, 0, sizeof as);
  as.adapters = LSIM_AA_ZIPF;
  as.has_alpha = 1;
  as.alpha = o->zipf;
  lsim_trace_spec spec;
  memset(&spec, 0, sizeof spec);
  spec.format = format;
  spec.path = o->trace;
  spec.max_requests = (int64_t)o->requests;
  spec.block_tokens = (int)o->block_tokens;
  spec.assign = &as;
  lsim_trace_ctx ctx = {(uint64_t)o->seed, 1, NULL, NULL, (int)o->adapters,
                        o->zipf};
  return lsim_trace_open(t, &spec, &ctx, eb);
}

static lsim_err lsim__mode(const lsim__pxopt *o, lsim__adp *ad, int mode,
                           lsim__mres *res, lsim_prefix_adapter_stats *pa,
                           lsim_errbuf *eb) {
  memset(res, 0, sizeof *res);
  lsim__run R;
  memset(&R, 0, sizeof R);
  R.o = o;
  R.ad = ad;
  R.nad = (int)o->adapters;
  R.res = res;
  int64_t ap[1] = {1};
  lsim_res_cfg rcfg = {(int64_t)o->cache_blocks + 1, 1, 1, ap, 0,
                       LSIM_DIGEST_INIT};
  lsim_err rc = lsim_res_new(&R.pool, &rcfg, eb);
  if (rc)
    return rc;
  lsim_prefix_grant g = {0, lsim__dg("prefix-study namespace %d", 0, 0)};
  lsim_prefix_cfg pcfg = {1, 1, (int64_t)o->cache_blocks, R.nad, R.pool, &g,
                          1};
  if ((rc = lsim_prefix_new(&R.pc, &pcfg, eb))) {
    lsim_res_release(R.pool);
    return rc;
  }
  lsim_trace t = {0};
  if ((rc = lsim__open_trace(o, &t, eb))) {
    lsim_prefix_release(R.pc);
    lsim_res_release(R.pool);
    return rc;
  }
  lsim_kv_graph graph = {LSIM_KV_ARCH_SERIAL, 32,
                         lsim__dg("prefix-study graph %d", 0, 0)};
  lsim_kv_manifest m;
  memset(&m, 0, sizeof m);
  m.base_abi = lsim__dg("prefix-study base %d", 0, 0);
  m.cache_abi = lsim__dg("prefix-study cache %d", 0, 0);
  m.graph = &graph;
  m.side_inputs = lsim__dg("no side inputs %d", 0, 0);
  m.isolation = g.ns;
  m.block_tokens = 1;
  lsim_rng rb;
  lsim_rng_init(&rb, (uint64_t)o->seed, LSIM__PX_RNG_BASE);
  lsim_cost_model cost = {(int64_t)o->iter_ns, (int64_t)o->prefill_ns, 0, 0, 0,
                          {0}};
  int S = (int)o->servers;
  int64_t *free_at = calloc((size_t)S, sizeof *free_at);
  int64_t *ttft = NULL, nttft = 0, cttft = 0;
  int64_t *tok = NULL;
  int64_t ctok = 0;
  lsim_plan plan = LSIM_PLAN_INIT;
  lsim__conv conv = {0};
  if (!free_at)
    rc = lsim_fail(eb, LSIM_E_NOMEM, "prefix study: out of memory");
  lsim_trace_rec rec;
  int got;
  while (!rc && (got = lsim_trace_next(&t, &rec, eb)) == 1) {
    /* events due before this arrival */
    while (!rc && R.h.n && R.h.e[0].t <= rec.arrival_ns)
      rc = lsim__apply(&R, lsim__heap_pop(&R.h), eb);
    if (rc)
      break;
    if (rec.nblocks < 1) {
      rc = lsim_fail(eb, LSIM_E_TRACE_MISSING, "request %lld has no prefix "
                     "block ids: the prefix study needs them",
                     (long long)rec.id);
      break;
    }
    if (rec.nblocks > ctok) {
      int64_t *x = realloc(tok, (size_t)rec.nblocks * sizeof *x);
      if (!x) {
        rc = lsim_fail(eb, LSIM_E_NOMEM, "prefix study: out of memory");
        break;
      }
      tok = x;
      ctok = rec.nblocks;
    }
    for (int i = 0; i < rec.nblocks; i++)
      tok[i] = (int64_t)(rec.blocks[i] & INT64_MAX);
    int base = lsim_rng_unit(&rb) < o->base_share;
    int a = base ? -1 : rec.adapter;
    if (o->sticky && rec.nblocks >= 2) {
      int v = a, got1 = lsim__conv_get(&conv, rec.blocks[1], &v, 0);
      if (got1)
        a = v;
      else if (lsim__conv_get(&conv, rec.blocks[1], &v, 1) < 0) {
        rc = lsim_fail(eb, LSIM_E_NOMEM, "prefix study: out of memory");
        break;
      }
    }
    lsim_kv_adapter x;
    m.adapter = NULL;
    if (a >= 0) {
      x = ad[a].a;
      if (x.kind == LSIM_KV_ALORA) {
        int64_t first = rec.prompt_tokens - (int64_t)o->inv_tokens;
        x.explicit_start = (first < 0 ? 0 : first) / (int64_t)o->block_tokens;
        if (x.explicit_start >= rec.nblocks)
          x.explicit_start = rec.nblocks - 1;
      }
      m.adapter = &x;
    }
    m.tokens = tok;
    m.ntokens = rec.nblocks;
    int s = lsim__slot(&R);
    if (s < 0) {
      rc = lsim_fail(eb, LSIM_E_NOMEM, "prefix study: out of memory");
      break;
    }
    lsim__live *L = &R.live[s];
    L->used = 1;
    L->adapter = a;
    L->full = rec.prompt_tokens / (int64_t)o->block_tokens;
    if (L->full > rec.nblocks)
      L->full = rec.nblocks;
    if ((rc = lsim_kv_keys_derive(&m, mode, &L->keys, eb)) ||
        (rc = lsim_kv_keys_derive(&m, LSIM_KV_KEYS_ALORA, &L->truth, eb)))
      break;
    L->keys.full = L->truth.full = L->full; /* partial tail: never shared */
    if ((rc = lsim_prefix_lookup(R.pc, 0, &g.ns, &L->keys, &L->truth, a,
                                 &L->rc, eb)))
      break;
    int64_t hit_tok = L->rc.hit_blocks * (int64_t)o->block_tokens;
    int64_t rows = rec.prompt_tokens - hit_tok;
    if (rows < 1)
      rows = 1;
    res->requests++;
    res->prompt_tokens += rec.prompt_tokens;
    res->full_blocks += L->full;
    res->hit_blocks += L->rc.hit_blocks;
    res->hit_tokens += hit_tok;
    res->recomputed += rows;
    res->corrupt_blocks += L->rc.corrupt_blocks;
    res->corrupt_requests += L->rc.corrupt_blocks > 0;
    /* one prefill iteration through the model backend's cost function */
    lsim_plan_reset(&plan);
    lsim_plan_entry pe = {rec.id, 0, a, a >= 0 ? 16 : 0, LSIM_PHASE_PREFILL,
                          (int)rows, 0, 0, 0, 0};
    if ((rc = lsim_plan_push(&plan, &pe, eb)) ||
        (rc = lsim_plan_finish(&plan, eb)))
      break;
    int64_t svc = lsim_cost_plan_ns(&cost, &plan);
    int best = 0;
    for (int i = 1; i < S; i++)
      if (free_at[i] < free_at[best])
        best = i;
    int64_t start = free_at[best] > rec.arrival_ns ? free_at[best]
                                                   : rec.arrival_ns;
    int64_t end = start + svc;
    free_at[best] = end;
    if (nttft == cttft) {
      int64_t c2 = cttft ? 2 * cttft : 1024;
      int64_t *y = realloc(ttft, (size_t)c2 * sizeof *y);
      if (!y) {
        rc = lsim_fail(eb, LSIM_E_NOMEM, "prefix study: out of memory");
        break;
      }
      ttft = y;
      cttft = c2;
    }
    ttft[nttft++] = end - rec.arrival_ns;
    int64_t done = end + (int64_t)(o->decode_ms * 1e6) * rec.output_tokens;
    lsim__ev e1 = {end, R.seq++, 0, s}, e2 = {done, R.seq++, 1, s};
    if (lsim__heap_push(&R.h, e1) || lsim__heap_push(&R.h, e2))
      rc = lsim_fail(eb, LSIM_E_NOMEM, "prefix study: out of memory");
  }
  if (!rc && got < 0)
    rc = got;
  while (!rc && R.h.n)
    rc = lsim__apply(&R, lsim__heap_pop(&R.h), eb);
  if (!rc)
    rc = lsim_prefix_check(R.pc, eb);
  if (!rc) {
    lsim_prefix_stats st;
    lsim_prefix_stats_get(R.pc, &st);
    res->evictions = st.evictions;
    res->published = st.published;
    res->stopped_full = st.stopped_full;
    for (int a = -1; a < R.nad; a++)
      lsim_prefix_adapter_stats_get(R.pc, a, &pa[a + 1]);
    if (nttft) {
      double sum = 0;
      for (int64_t i = 0; i < nttft; i++)
        sum += (double)ttft[i];
      qsort(ttft, (size_t)nttft, sizeof *ttft, lsim__cmp_i64);
      res->ttft_mean_ms = sum / (double)nttft / 1e6;
      res->ttft_p50_ms = (double)ttft[(nttft - 1) / 2] / 1e6;
      res->ttft_p99_ms = (double)ttft[(nttft - 1) * 99 / 100] / 1e6;
    }
  }
  /* on failure, drop what is still held */
  for (int i = 0; i < R.nlive; i++)
    if (R.live[i].used) {
      lsim_prefix_unref(R.pc, &R.live[i].rc, NULL);
      lsim_kv_keys_release(&R.live[i].keys);
      lsim_kv_keys_release(&R.live[i].truth);
    }
  lsim_plan_release(&plan);
  free(conv.key);
  free(conv.val);
  free(conv.used);
  free(R.live);
  free(R.h.e);
  free(free_at);
  free(ttft);
  free(tok);
  lsim_trace_close(&t);
  lsim_prefix_release(R.pc);
  lsim_res_release(R.pool);
  return rc;
}

/* ---- output --------------------------------------------------------------- */

static double lsim__pct(int64_t a, int64_t b) {
  return b ? 100.0 * (double)a / (double)b : 0.0;
}

static void lsim__table(FILE *f, const lsim__mres *r) {
  fprintf(f, "%-15s %8s %9s %9s %14s %9s %9s %10s %10s %10s %9s\n", "mode",
          "requests", "hit_blk%", "hit_tok%", "recomputed_tok", "recomp%",
          "corrupt", "ttft_mean", "ttft_p50", "ttft_p99", "evicted");
  for (int i = 0; i < LSIM__NMODES; i++)
    fprintf(f, "%-15s %8lld %9.2f %9.2f %14lld %9.2f %9lld %10.1f %10.1f "
               "%10.1f %9lld%s\n",
            lsim_kv_key_mode_name(i + 1), (long long)r[i].requests,
            lsim__pct(r[i].hit_blocks, r[i].full_blocks),
            lsim__pct(r[i].hit_tokens, r[i].prompt_tokens),
            (long long)r[i].recomputed,
            lsim__pct(r[i].recomputed, r[i].prompt_tokens),
            (long long)r[i].corrupt_blocks, r[i].ttft_mean_ms,
            r[i].ttft_p50_ms, r[i].ttft_p99_ms, (long long)r[i].evictions,
            i == 0 ? "  UNSAFE" : "");
  fputs("(hit_blk%: hit blocks / full prompt blocks; hit_tok%, recomp%: of "
        "prompt tokens; corrupt: hit blocks computed under another execution"
        " (served only by the unsafe oblivious keys); ttft in ms of simulated"
        " time)\n",
        f);
}

static lsim_err lsim__csv(const char *dir, const lsim__mres *r,
                          lsim_prefix_adapter_stats *const *pa,
                          const lsim__adp *ad, int nad, lsim_errbuf *eb) {
  char p[1100];
  snprintf(p, sizeof p, "%s/prefix.csv", dir);
  lsim_outfile of;
  lsim_err rc = lsim_out_open(&of, p, eb);
  if (rc)
    return rc;
  FILE *f = of.fp;
  fputs("mode,safe,requests,prompt_tokens,full_blocks,hit_blocks,hit_tokens,"
        "hit_block_rate,hit_token_rate,recomputed_tokens,corrupt_blocks,"
        "corrupt_requests,published,evictions,stopped_full,ttft_mean_ms,"
        "ttft_p50_ms,ttft_p99_ms\n",
        f);
  for (int i = 0; i < LSIM__NMODES; i++)
    fprintf(f, "%s,%d,%lld,%lld,%lld,%lld,%lld,%.6f,%.6f,%lld,%lld,%lld,%lld,"
               "%lld,%lld,%.3f,%.3f,%.3f\n",
            lsim_kv_key_mode_name(i + 1), i != 0, (long long)r[i].requests,
            (long long)r[i].prompt_tokens, (long long)r[i].full_blocks,
            (long long)r[i].hit_blocks, (long long)r[i].hit_tokens,
            lsim__pct(r[i].hit_blocks, r[i].full_blocks) / 100,
            lsim__pct(r[i].hit_tokens, r[i].prompt_tokens) / 100,
            (long long)r[i].recomputed, (long long)r[i].corrupt_blocks,
            (long long)r[i].corrupt_requests, (long long)r[i].published,
            (long long)r[i].evictions, (long long)r[i].stopped_full,
            r[i].ttft_mean_ms, r[i].ttft_p50_ms, r[i].ttft_p99_ms);
  if ((rc = lsim_out_commit(&of, eb)))
    return rc;
  snprintf(p, sizeof p, "%s/prefix-adapters.csv", dir);
  if ((rc = lsim_out_open(&of, p, eb)))
    return rc;
  f = of.fp;
  fputs("mode,adapter,class,root,lookups,hit_blocks,miss_blocks,"
        "corrupt_blocks,published\n",
        f);
  for (int i = 0; i < LSIM__NMODES; i++)
    for (int a = -1; a < nad; a++) {
      const lsim_prefix_adapter_stats *s = &pa[i][a + 1];
      fprintf(f, "%s,%d,%s,%d,%lld,%lld,%lld,%lld,%lld\n",
              lsim_kv_key_mode_name(i + 1), a,
              a < 0 ? "base" : lsim__class_names[ad[a].cls],
              a < 0 ? -1 : ad[a].root, (long long)s->lookups,
              (long long)s->hit_blocks, (long long)s->miss_blocks,
              (long long)s->corrupt_blocks, (long long)s->published);
    }
  return lsim_out_commit(&of, eb);
}

static lsim_err lsim__plot(const char *dir, const lsim__mres *r, char *note,
                           size_t nn, lsim_errbuf *eb) {
  char dat[1100], gp[1100];
  note[0] = 0;
  snprintf(dat, sizeof dat, "%s/prefix.dat", dir);
  snprintf(gp, sizeof gp, "%s/prefix.gp", dir);
  lsim_outfile of, pof;
  lsim_err rc = lsim_out_open(&of, dat, eb);
  if (rc)
    return rc;
  FILE *f = of.fp;
  fputs("# mode hit_token_pct recomputed_pct corrupt_pct ttft_mean_ms "
        "ttft_p99_ms\n",
        f);
  for (int i = 0; i < LSIM__NMODES; i++)
    fprintf(f, "%s %.4f %.4f %.4f %.3f %.3f\n", lsim_kv_key_mode_name(i + 1),
            lsim__pct(r[i].hit_tokens, r[i].prompt_tokens),
            lsim__pct(r[i].recomputed, r[i].prompt_tokens),
            lsim__pct(r[i].corrupt_blocks, r[i].full_blocks),
            r[i].ttft_mean_ms, r[i].ttft_p99_ms);
  if ((rc = lsim_out_commit(&of, eb)))
    return rc;
  char png[1100], q_dat[LSIM_ESC_SIZE(1100)], q_png[LSIM_ESC_SIZE(1100)];
  snprintf(png, sizeof png, "%s/prefix.png", dir);
  /* every string of the script is a quoted gnuplot literal (escape.h) */
  if (lsim_gp_path(q_dat, sizeof q_dat, dat) < 0 ||
      lsim_gp_path(q_png, sizeof q_png, png) < 0) {
    snprintf(note, nn, "skipped: the output path has control characters");
    return 0;
  }
  if (!lsim_gnuplot_available()) {
    snprintf(note, nn, "skipped: gnuplot not found (data in %s)", dat);
    return 0;
  }
  if ((rc = lsim_out_reserve(&pof, png, eb)))
    return rc;
  /* the script names the temporary (same directory, same characters) */
  if (lsim_gp_path(q_png, sizeof q_png, pof.tmp) < 0) {
    lsim_out_abort(&pof);
    snprintf(note, nn, "skipped: the output path has control characters");
    return 0;
  }
  if ((rc = lsim_out_open(&of, gp, eb))) {
    lsim_out_abort(&pof);
    return rc;
  }
  f = of.fp;
  fprintf(f,
          "set terminal pngcairo size 1100,480 noenhanced\n"
          "set output %s\n"
          "set multiplot layout 1,2 title 'prefix cache by key mode "
          "(oblivious is unsafe)'\n"
          "set style data histograms\n"
          "set style histogram clustered gap 1\n"
          "set style fill solid 0.8 border -1\n"
          "set key below\n"
          "set xtics rotate by -20\n"
          "set ylabel '%% of prompt tokens / blocks'\n"
          "set yrange [0:*]\n"
          "plot %s using 2:xtic(1) title 'hit tokens', '' using 3 title "
          "'recomputed prefill', '' using 4 title 'corrupt hit blocks'\n"
          "set ylabel 'TTFT (ms)'\n"
          "plot %s using 5:xtic(1) title 'mean', '' using 6 title 'p99'\n"
          "unset multiplot\n",
          q_png, q_dat, q_dat);
  if ((rc = lsim_out_commit(&of, eb))) {
    lsim_out_abort(&pof);
    return rc;
  }
  lsim_errbuf geb = LSIM_ERRBUF_INIT;
  if (lsim_gnuplot_run(gp, &geb)) {
    lsim_out_abort(&pof);
    snprintf(note, nn, "gnuplot failed on %s (data kept)", gp);
    return 0;
  }
  return lsim_out_commit(&pof, eb);
}

/* ---- the command ------------------------------------------------------------ */

int lsim_prefix_main(int argc, char **argv) {
  enum { O_TRACE = 256, O_FORMAT, O_REQ, O_SEED, O_AD, O_ZIPF, O_BASE, O_LM,
         O_ALORA, O_ALIAS, O_INV, O_BT, O_CB, O_SRV, O_PNS, O_INS, O_DMS,
         O_OUT, O_NOPLOTS, O_STICKY };
  static const struct option opts[] = {
      {"trace", required_argument, NULL, O_TRACE},
      {"format", required_argument, NULL, O_FORMAT},
      {"requests", required_argument, NULL, O_REQ},
      {"seed", required_argument, NULL, O_SEED},
      {"adapters", required_argument, NULL, O_AD},
      {"zipf", required_argument, NULL, O_ZIPF},
      {"base-share", required_argument, NULL, O_BASE},
      {"lmhead-share", required_argument, NULL, O_LM},
      {"alora-share", required_argument, NULL, O_ALORA},
      {"alias-share", required_argument, NULL, O_ALIAS},
      {"invocation-tokens", required_argument, NULL, O_INV},
      {"block-tokens", required_argument, NULL, O_BT},
      {"cache-blocks", required_argument, NULL, O_CB},
      {"servers", required_argument, NULL, O_SRV},
      {"prefill-token-ns", required_argument, NULL, O_PNS},
      {"iter-fixed-ns", required_argument, NULL, O_INS},
      {"decode-ms", required_argument, NULL, O_DMS},
      {"out", required_argument, NULL, O_OUT},
      {"no-plots", no_argument, NULL, O_NOPLOTS},
      {"sticky", no_argument, NULL, O_STICKY},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  lsim__pxopt o = {
      LSIM_SOURCE_DIR
      "/../shared/data/traces/mooncake-fast25/conversation_trace.jsonl",
      "mooncake", "results/prefix", 0, 0, 32, 1.0, 512, 16384,
      0.2, 0.1, 0.3, 0.1, 8, 20000, 4000000, 30, 2, 1, 0};
  int c, out_given = 0;
  const char *bad = NULL;
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case O_TRACE: o.trace = optarg; break;
    case O_FORMAT: o.format = optarg; break;
    case O_OUT: o.out = optarg; out_given = 1; break;
    case O_NOPLOTS: o.plots = 0; break;
    case O_STICKY: o.sticky = 1; break;
    case O_REQ: if (lsim__px_num(optarg, 1, 1e9, &o.requests)) bad = "--requests"; break;
    case O_SEED: if (lsim__px_num(optarg, 0, 9007199254740992.0, &o.seed)) bad = "--seed"; break;
    case O_AD: if (lsim__px_num(optarg, 1, 4096, &o.adapters)) bad = "--adapters"; break;
    case O_ZIPF: if (lsim__px_num(optarg, 0, 10, &o.zipf)) bad = "--zipf"; break;
    case O_BASE: if (lsim__px_num(optarg, 0, 1, &o.base_share)) bad = "--base-share"; break;
    case O_LM: if (lsim__px_num(optarg, 0, 1, &o.lmhead_share)) bad = "--lmhead-share"; break;
    case O_ALORA: if (lsim__px_num(optarg, 0, 1, &o.alora_share)) bad = "--alora-share"; break;
    case O_ALIAS: if (lsim__px_num(optarg, 0, 1, &o.alias_share)) bad = "--alias-share"; break;
    case O_INV: if (lsim__px_num(optarg, 1, 1e6, &o.inv_tokens)) bad = "--invocation-tokens"; break;
    case O_BT: if (lsim__px_num(optarg, 1, 1 << 20, &o.block_tokens)) bad = "--block-tokens"; break;
    case O_CB: if (lsim__px_num(optarg, 1, 1 << 26, &o.cache_blocks)) bad = "--cache-blocks"; break;
    case O_SRV: if (lsim__px_num(optarg, 1, 1024, &o.servers)) bad = "--servers"; break;
    case O_PNS: if (lsim__px_num(optarg, 0, 1e9, &o.prefill_ns)) bad = "--prefill-token-ns"; break;
    case O_INS: if (lsim__px_num(optarg, 0, 1e12, &o.iter_ns)) bad = "--iter-fixed-ns"; break;
    case O_DMS: if (lsim__px_num(optarg, 0, 1e6, &o.decode_ms)) bad = "--decode-ms"; break;
    case 'h': lsim__px_usage(stdout); return 0;
    default: lsim__px_usage(stderr); return 2;
    }
    if (bad) {
      char msg[160];
      snprintf(msg, sizeof msg, "%s: value '%s' is out of range or not a "
               "number", bad, optarg);
      return lsim_cli_fail("prefix", LSIM_E_USAGE, msg);
    }
  }
  if (optind != argc)
    return lsim_cli_fail("prefix", LSIM_E_USAGE, "unexpected argument (see lorasim "
                                      "prefix --help)");
  if (o.lmhead_share + o.alora_share + o.alias_share > 1)
    return lsim_cli_fail("prefix", LSIM_E_USAGE, "--lmhead-share + --alora-share + "
                                      "--alias-share exceed 1");
  if (o.requests != (int64_t)o.requests || o.seed != (uint64_t)o.seed ||
      o.adapters != (int)o.adapters || o.block_tokens != (int)o.block_tokens ||
      o.cache_blocks != (int64_t)o.cache_blocks || o.servers != (int)o.servers)
    return lsim_cli_fail("prefix", LSIM_E_USAGE, "counts and the seed must be integers");
  {
    /* --out DIR is made once the study is done, its parent never: a
    ** mistyped one is refused now (E_OUT_NO_DIR); the default's results/
    ** is made like replay's */
    lsim_errbuf deb = LSIM_ERRBUF_INIT;
    lsim_err drc = out_given ? 0 : lsim_out_mkdir("results", &deb);
    if (drc || (drc = lsim_out_dir_check(o.out, &deb)))
      return lsim_cli_fail("prefix", drc, deb.msg);
  }
  int nad = (int)o.adapters;
  lsim__adp *ad = calloc((size_t)nad, sizeof *ad);
  lsim_prefix_adapter_stats *pa[LSIM__NMODES] = {0};
  for (int i = 0; i < LSIM__NMODES; i++)
    pa[i] = calloc((size_t)nad + 1, sizeof *pa[i]);
  lsim__mres res[LSIM__NMODES];
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_err rc = 0;
  if (!ad || !pa[0] || !pa[1] || !pa[2] || !pa[3])
    rc = lsim_fail(&eb, LSIM_E_NOMEM, "out of memory");
  if (!rc)
    lsim__catalog(&o, ad, nad);
  for (int i = 0; i < LSIM__NMODES && !rc; i++)
    rc = lsim__mode(&o, ad, i + 1, &res[i], pa[i], &eb);
  if (!rc)
    rc = lsim_out_mkdir(o.out, &eb);
  char note[1300] = "";
  if (!rc)
    rc = lsim__csv(o.out, res, pa, ad, nad, &eb);
  if (!rc && o.plots)
    rc = lsim__plot(o.out, res, note, sizeof note, &eb);
  if (!rc) {
    int cls[4] = {0};
    for (int a = 0; a < nad; a++)
      cls[ad[a].cls]++;
    /* paths shown with control bytes made visible (escape.h) */
    char shown[LSIM_ESC_SIZE(1300)], shown2[LSIM_ESC_SIZE(1100)];
    printf("prefix study: %s, %lld requests, seed %llu, %d adapters "
           "(lora %d, lm_head %d, alora %d, alias %d), base share %.2f, "
           "%g-token blocks, cache %lld blocks%s\n",
           lsim_console_str(shown, sizeof shown, o.trace), (long long)res[0].requests, (unsigned long long)o.seed,
           nad, cls[0], cls[1], cls[2], cls[3], o.base_share, o.block_tokens,
           (long long)o.cache_blocks,
           o.sticky ? ", sticky conversations" : "");
    lsim__table(stdout, res);
    lsim_console_str(shown2, sizeof shown2, o.out);
    printf("  csv         %s/prefix.csv, %s/prefix-adapters.csv\n", shown2,
           shown2);
    if (o.plots)
      {
      if (note[0])
        printf("  plot        %s\n",
               lsim_console_str(shown, sizeof shown, note));
      else
        printf("  plot        %s/prefix.png\n", shown2);
    }
  }
  free(ad);
  for (int i = 0; i < LSIM__NMODES; i++)
    free(pa[i]);
  if (rc)
    return lsim_cli_fail("prefix", rc, eb.msg);
  return 0;
}
