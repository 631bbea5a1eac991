/*
** tp.c: tensor-parallel placement manifests, the distributed generation
** snapshot and the TP ledgers (tp.h).
**
** Invariants the validator enforces (each failure has its own code):
**   1. a manifest belongs to one group: degree, rank, style, global shapes
**      and generation equal the group's (else it is stale)
**   2. the base shard is the style's split of the right axis
**   3. every factor follows the base: COLUMN splits B on d_out with the
**      base's interval and A on the rank axis (or replicates A); ROW splits
**      A on d_in with the base's interval and B on d_out
**   4. a rank-split bottleneck is gathered (rank order); a partial-sum
**      bottleneck is all-reduced with SUM, never concatenated, MAX or MEAN
**   5. a COLUMN output stays sharded; a ROW output rides the base final
**      all-reduce (SUM on the output axis)
**   6. storage <= accumulation width; the link carries one of the two
*/
#include "tp.h"

#include <string.h>

static int lsim__axis_ok(int a) {
  return a == LSIM_AXIS_RANK || a == LSIM_AXIS_INPUT || a == LSIM_AXIS_OUTPUT;
}

lsim_err lsim_tp_interval(int64_t extent, int64_t world, int64_t rank,
                          int rule, int64_t *begin, int64_t *end,
                          int64_t *local, lsim_errbuf *eb) {
  if (world < 1 || world > LSIM_TP_MAX_WORLD || rank < 0 || rank >= world)
    return lsim_fail(eb, LSIM_E_TP_WORLD,
                     "tp: rank %lld of degree %lld is outside 0..%lld, "
                     "1..%d", (long long)rank, (long long)world,
                     (long long)world - 1, LSIM_TP_MAX_WORLD);
  if (extent < 1)
    return lsim_fail(eb, LSIM_E_TP_FIELD, "tp: extent %lld is not positive",
                     (long long)extent);
  int64_t chunk;
  if (rule == LSIM_TP_DIV_EXACT) {
    if (extent % world)
      return lsim_fail(eb, LSIM_E_TP_DIV,
                       "tp: extent %lld is not divisible by degree %lld",
                       (long long)extent, (long long)world);
    chunk = extent / world;
  } else if (rule == LSIM_TP_PAD_ZERO) {
    chunk = (extent + world - 1) / world;
  } else {
    return lsim_fail(eb, LSIM_E_TP_FIELD, "tp: divisibility rule %d is "
                     "unknown", rule);
  }
  int64_t b = rank * chunk, e = b + chunk;
  *begin = b < extent ? b : extent;
  *end = e < extent ? e : extent;
  *local = chunk;
  return 0;
}

static void lsim__coll(lsim_tp_collective *c, int kind, int axis, int red) {
  c->kind = kind;
  c->axis = axis;
  c->reduction = red;
  c->order = LSIM_TP_ORDER_RANK_ASC;
}

static lsim_err lsim__group(const lsim_tp_group *g, lsim_errbuf *eb) {
  if (g->world < 1 || g->world > LSIM_TP_MAX_WORLD || g->rank < 0 ||
      g->rank >= g->world)
    return lsim_fail(eb, LSIM_E_TP_WORLD, "tp: group rank %lld of degree "
                     "%lld is out of range", (long long)g->rank,
                     (long long)g->world);
  if (g->style != LSIM_TP_COLUMN && g->style != LSIM_TP_ROW)
    return lsim_fail(eb, LSIM_E_TP_FIELD, "tp: style %d is unknown",
                     g->style);
  if (g->d_in < 1 || g->d_out < 1 || g->r < 1 || g->generation < 0)
    return lsim_fail(eb, LSIM_E_TP_FIELD, "tp: group shapes or generation "
                     "out of range");
  return 0;
}

lsim_err lsim_tp_manifest_build(const lsim_tp_group *g, int rule,
                                int storage_dtype, int collective_dtype,
                                int accum_dtype, int64_t impl_revision,
                                lsim_tp_manifest *m, lsim_errbuf *eb) {
  memset(m, 0, sizeof *m);
  lsim_err rc = lsim__group(g, eb);
  if (rc)
    return rc;
  int64_t rb, re, rl, ib, ie, il, ob, oe, ol;
  rc = lsim_tp_interval(g->r, g->world, g->rank, rule, &rb, &re, &rl, eb);
  if (!rc)
    rc = lsim_tp_interval(g->d_in, g->world, g->rank, rule, &ib, &ie, &il,
                          eb);
  if (!rc)
    rc = lsim_tp_interval(g->d_out, g->world, g->rank, rule, &ob, &oe, &ol,
                          eb);
  if (rc)
    return rc;
  m->world = g->world;
  m->rank = g->rank;
  m->style = g->style;
  m->d_in = g->d_in;
  m->d_out = g->d_out;
  m->r = g->r;
  m->rule = rule;
  m->storage_dtype = storage_dtype;
  m->collective_dtype = collective_dtype;
  m->accum_dtype = accum_dtype;
  m->impl_revision = impl_revision;
  m->generation = g->generation;
  /* B is split on d_out in both styles. */
  m->b = (lsim_tp_factor){LSIM_AXIS_OUTPUT, ob, oe, ol, g->r};
  if (g->style == LSIM_TP_COLUMN) {
    m->base_begin = ob;
    m->base_end = oe;
    m->a = (lsim_tp_factor){LSIM_AXIS_RANK, rb, re, rl, g->d_in};
    m->b.cols = g->r; /* B_j [d_out/N][r]: the whole gathered bottleneck */
    lsim__coll(&m->bottleneck, LSIM_TP_COLL_ALL_GATHER, LSIM_AXIS_RANK,
               LSIM_TP_RED_NONE);
    lsim__coll(&m->output, LSIM_TP_COLL_NONE, LSIM_AXIS_OUTPUT,
               LSIM_TP_RED_NONE);
    m->fused_into = LSIM_TP_FUSE_NONE;
  } else {
    m->base_begin = ib;
    m->base_end = ie;
    m->a = (lsim_tp_factor){LSIM_AXIS_INPUT, ib, ie, g->r, il};
    lsim__coll(&m->bottleneck, LSIM_TP_COLL_ALL_REDUCE, LSIM_AXIS_RANK,
               LSIM_TP_RED_SUM);
    lsim__coll(&m->output, LSIM_TP_COLL_ALL_REDUCE, LSIM_AXIS_OUTPUT,
               LSIM_TP_RED_SUM);
    m->fused_into = LSIM_TP_FUSE_BASE_ALL_REDUCE;
  }
  return 0;
}

/* Enumerations and ranges of the fields alone. */
static lsim_err lsim__fields(const lsim_tp_manifest *m, lsim_errbuf *eb) {
  if (m->world < 1 || m->world > LSIM_TP_MAX_WORLD || m->rank < 0 ||
      m->rank >= m->world)
    return lsim_fail(eb, LSIM_E_TP_WORLD, "tp manifest: rank %lld of degree "
                     "%lld is out of range", (long long)m->rank,
                     (long long)m->world);
  if (m->style != LSIM_TP_COLUMN && m->style != LSIM_TP_ROW)
    return lsim_fail(eb, LSIM_E_TP_FIELD, "tp manifest: style %d is unknown",
                     m->style);
  if (m->rule != LSIM_TP_DIV_EXACT && m->rule != LSIM_TP_PAD_ZERO)
    return lsim_fail(eb, LSIM_E_TP_FIELD, "tp manifest: divisibility rule "
                     "%d is unknown", m->rule);
  if (m->d_in < 1 || m->d_out < 1 || m->r < 1 || m->generation < 0 ||
      m->impl_revision < 0)
    return lsim_fail(eb, LSIM_E_TP_FIELD, "tp manifest: shapes, generation "
                     "or implementation revision out of range");
  const lsim_tp_factor *f[2] = {&m->a, &m->b};
  for (int i = 0; i < 2; i++)
    if (f[i]->shard_axis != LSIM_TP_REPLICATED &&
        !lsim__axis_ok(f[i]->shard_axis))
      return lsim_fail(eb, LSIM_E_TP_FIELD, "tp manifest: factor %c shard "
                       "axis %d is unknown", "AB"[i], f[i]->shard_axis);
  const lsim_tp_collective *c[2] = {&m->bottleneck, &m->output};
  static const char *const cn[2] = {"bottleneck", "output"};
  for (int i = 0; i < 2; i++)
    if (c[i]->kind < LSIM_TP_COLL_NONE || c[i]->kind > LSIM_TP_COLL_ALL_REDUCE
        || !lsim__axis_ok(c[i]->axis) || c[i]->reduction < LSIM_TP_RED_NONE
        || c[i]->reduction > LSIM_TP_RED_MEAN
        || (c[i]->order != LSIM_TP_ORDER_RANK_ASC &&
            c[i]->order != LSIM_TP_ORDER_RANK_DESC))
      return lsim_fail(eb, LSIM_E_TP_FIELD, "tp manifest: %s collective has "
                       "an unknown kind, axis, reduction or order", cn[i]);
  if (m->fused_into != LSIM_TP_FUSE_NONE &&
      m->fused_into != LSIM_TP_FUSE_BASE_ALL_REDUCE)
    return lsim_fail(eb, LSIM_E_TP_FIELD, "tp manifest: fusion target %d is "
                     "unknown", m->fused_into);
  int dt[3] = {m->storage_dtype, m->collective_dtype, m->accum_dtype};
  for (int i = 0; i < 3; i++)
    if (lsim_dtype_size(dt[i]) == 0)
      return lsim_fail(eb, LSIM_E_TP_DTYPE, "tp manifest: dtype %d is "
                       "unknown", dt[i]);
  return 0;
}

/* A factor's placement vs the expected one: the axis decides
** independence, the interval decides too (another rank's slice). */
static lsim_err lsim__follow(const lsim_tp_factor *f, char name,
                             int want_axis, int64_t b, int64_t e,
                             int replicated_ok, lsim_errbuf *eb) {
  if (f->shard_axis == LSIM_TP_REPLICATED && replicated_ok)
    return 0;
  if (f->shard_axis != want_axis)
    return lsim_fail(eb, LSIM_E_TP_INDEPENDENT, "tp manifest: factor %c is "
                     "sharded on axis %d, the base projection needs axis %d",
                     name, f->shard_axis, want_axis);
  if (f->begin != b || f->end != e)
    return lsim_fail(eb, LSIM_E_TP_INDEPENDENT, "tp manifest: factor %c holds "
                     "[%lld,%lld), this rank's base slice is [%lld,%lld)",
                     name, (long long)f->begin, (long long)f->end,
                     (long long)b, (long long)e);
  return 0;
}

static lsim_err lsim__shape(const lsim_tp_factor *f, char name, int64_t rows,
                            int64_t cols, lsim_errbuf *eb) {
  if (f->rows != rows || f->cols != cols)
    return lsim_fail(eb, LSIM_E_TP_SHAPE, "tp manifest: factor %c local shape "
                     "is [%lld][%lld], the placement implies [%lld][%lld]",
                     name, (long long)f->rows, (long long)f->cols,
                     (long long)rows, (long long)cols);
  return 0;
}

static lsim_err lsim__reduction(const lsim_tp_collective *c, const char *what,
                                lsim_errbuf *eb) {
  if (c->reduction == LSIM_TP_RED_MAX || c->reduction == LSIM_TP_RED_MEAN)
    return lsim_fail(eb, LSIM_E_TP_REDUCTION, "tp manifest: %s all-reduce "
                     "uses %s; the partial sums need SUM", what,
                     c->reduction == LSIM_TP_RED_MAX ? "MAX" : "MEAN");
  if (c->reduction != LSIM_TP_RED_SUM)
    return lsim_fail(eb, LSIM_E_TP_REDUCTION, "tp manifest: %s all-reduce "
                     "names no reduction", what);
  return 0;
}

lsim_err lsim_tp_validate(const lsim_tp_manifest *m, const lsim_tp_group *g,
                          lsim_errbuf *eb) {
  lsim_err rc = lsim__group(g, eb);
  if (!rc)
    rc = lsim__fields(m, eb);
  if (rc)
    return rc;
  /* 1. one group, one generation. */
  if (m->world != g->world)
    return lsim_fail(eb, LSIM_E_TP_STALE_MANIFEST, "tp manifest: written for "
                     "TP degree %lld, the group has degree %lld",
                     (long long)m->world, (long long)g->world);
  if (m->rank != g->rank || m->style != g->style || m->d_in != g->d_in ||
      m->d_out != g->d_out || m->r != g->r)
    return lsim_fail(eb, LSIM_E_TP_STALE_MANIFEST, "tp manifest: rank, style "
                     "or global shape is not this group's");
  if (m->generation != g->generation)
    return lsim_fail(eb, LSIM_E_TP_STALE_MANIFEST, "tp manifest: shards of "
                     "generation %lld, the launch uses generation %lld",
                     (long long)m->generation, (long long)g->generation);
  /* 2. the base shard. */
  int64_t rb, re, rl, ib, ie, il, ob, oe, ol;
  rc = lsim_tp_interval(m->r, m->world, m->rank, m->rule, &rb, &re, &rl, eb);
  if (!rc)
    rc = lsim_tp_interval(m->d_in, m->world, m->rank, m->rule, &ib, &ie, &il,
                          eb);
  if (!rc)
    rc = lsim_tp_interval(m->d_out, m->world, m->rank, m->rule, &ob, &oe, &ol,
                          eb);
  if (rc)
    return rc;
  int col = m->style == LSIM_TP_COLUMN;
  int64_t bb = col ? ob : ib, be = col ? oe : ie;
  if (m->base_begin != bb || m->base_end != be)
    return lsim_fail(eb, LSIM_E_TP_SHAPE, "tp manifest: base shard "
                     "[%lld,%lld) is not rank %lld's %s slice [%lld,%lld)",
                     (long long)m->base_begin, (long long)m->base_end,
                     (long long)m->rank, col ? "d_out" : "d_in",
                     (long long)bb, (long long)be);
  /* 3. factors follow the base; then local shapes. */
  if (col) {
    rc = lsim__follow(&m->b, 'B', LSIM_AXIS_OUTPUT, ob, oe, 0, eb);
    if (!rc)
      rc = lsim__follow(&m->a, 'A', LSIM_AXIS_RANK, rb, re, 1, eb);
    if (!rc)
      rc = lsim__shape(&m->a, 'A',
                       m->a.shard_axis == LSIM_TP_REPLICATED ? m->r : rl,
                       m->d_in, eb);
    if (!rc)
      rc = lsim__shape(&m->b, 'B', ol, m->r, eb);
  } else {
    rc = lsim__follow(&m->a, 'A', LSIM_AXIS_INPUT, ib, ie, 0, eb);
    if (!rc)
      rc = lsim__follow(&m->b, 'B', LSIM_AXIS_OUTPUT, ob, oe, 0, eb);
    if (!rc)
      rc = lsim__shape(&m->a, 'A', m->r, il, eb);
    if (!rc)
      rc = lsim__shape(&m->b, 'B', ol, m->r, eb);
  }
  if (rc)
    return rc;
  /* 4. the bottleneck collective. */
  const lsim_tp_collective *k = &m->bottleneck;
  if (col && m->a.shard_axis == LSIM_AXIS_RANK && m->world > 1) {
    if (k->kind != LSIM_TP_COLL_ALL_GATHER)
      return lsim_fail(eb, LSIM_E_TP_NO_GATHER, "tp manifest: A is split on "
                       "the rank axis but the bottleneck slices are not "
                       "all-gathered (cross-rank terms would be lost)");
    if (k->axis != LSIM_AXIS_RANK || k->reduction != LSIM_TP_RED_NONE)
      return lsim_fail(eb, LSIM_E_TP_NO_GATHER, "tp manifest: the bottleneck "
                       "gather must concatenate on the rank axis");
  } else if (col && m->a.shard_axis == LSIM_TP_REPLICATED) {
    if (k->kind != LSIM_TP_COLL_NONE)
      return lsim_fail(eb, LSIM_E_TP_FIELD, "tp manifest: a replicated A "
                       "needs no bottleneck collective");
  } else if (m->world > 1) {
    if (k->kind == LSIM_TP_COLL_ALL_GATHER)
      return lsim_fail(eb, LSIM_E_TP_CONCAT_PARTIALS, "tp manifest: the "
                       "row-parallel shrink gives partial sums; gathering "
                       "them concatenates unrelated coordinates");
    if (k->kind != LSIM_TP_COLL_ALL_REDUCE)
      return lsim_fail(eb, LSIM_E_TP_REDUCTION, "tp manifest: the "
                       "row-parallel partial sums are never reduced");
    rc = lsim__reduction(k, "bottleneck", eb);
    if (rc)
      return rc;
    if (k->axis != LSIM_AXIS_RANK)
      return lsim_fail(eb, LSIM_E_TP_FIELD, "tp manifest: the bottleneck "
                       "all-reduce must run over the rank-width tensor");
  }
  if (k->kind != LSIM_TP_COLL_NONE && k->order != LSIM_TP_ORDER_RANK_ASC)
    return lsim_fail(eb, LSIM_E_TP_ORDER, "tp manifest: bottleneck parts "
                     "must be taken in rank order");
  /* 5. the output. */
  const lsim_tp_collective *o = &m->output;
  if (col) {
    if (o->kind != LSIM_TP_COLL_NONE || m->fused_into != LSIM_TP_FUSE_NONE)
      return lsim_fail(eb, LSIM_E_TP_FUSION, "tp manifest: a column-parallel "
                       "output stays sharded like the base output; no "
                       "collective may reduce or gather it");
  } else if (m->world > 1) {
    if (o->kind != LSIM_TP_COLL_ALL_REDUCE ||
        m->fused_into != LSIM_TP_FUSE_BASE_ALL_REDUCE || o->axis !=
        LSIM_AXIS_OUTPUT)
      return lsim_fail(eb, LSIM_E_TP_FUSION, "tp manifest: the row-parallel "
                       "output slices must be added before the base final "
                       "all-reduce on the output axis");
    rc = lsim__reduction(o, "output", eb);
    if (rc)
      return rc;
    if (o->order != LSIM_TP_ORDER_RANK_ASC)
      return lsim_fail(eb, LSIM_E_TP_ORDER, "tp manifest: output parts must "
                       "be reduced in rank order");
  }
  /* 6. dtypes. */
  int ss = lsim_dtype_size(m->storage_dtype);
  int as = lsim_dtype_size(m->accum_dtype);
  if (as < ss)
    return lsim_fail(eb, LSIM_E_TP_DTYPE, "tp manifest: accumulation dtype "
                     "%s is narrower than storage %s",
                     lsim_dtype_name(m->accum_dtype),
                     lsim_dtype_name(m->storage_dtype));
  if (m->collective_dtype != m->storage_dtype &&
      m->collective_dtype != m->accum_dtype)
    return lsim_fail(eb, LSIM_E_TP_DTYPE, "tp manifest: collective dtype %s "
                     "is neither the storage nor the accumulation dtype",
                     lsim_dtype_name(m->collective_dtype));
  return 0;
}

/* ------------------------------------------------------ canonical bytes */

static void lsim__be64(uint8_t **p, int64_t v) {
  uint64_t u = (uint64_t)v;
  for (int i = 7; i >= 0; i--)
    *(*p)++ = (uint8_t)(u >> (8 * i));
}

lsim_err lsim_tp_manifest_digest(const lsim_tp_manifest *m, lsim_digest *out,
                                 lsim_errbuf *eb) {
  memset(out, 0, sizeof *out);
  lsim_err rc = lsim__fields(m, eb);
  if (rc)
    return rc;
  static const char tag[] = "lorasim.tp.manifest.v1";
  uint8_t buf[sizeof tag + 40 * 8], *p = buf;
  memcpy(p, tag, sizeof tag); /* with its NUL */
  p += sizeof tag;
  const int64_t v[] = {
      m->world, m->rank, m->style, m->d_in, m->d_out, m->r, m->base_begin,
      m->base_end, m->rule, m->a.shard_axis, m->a.begin, m->a.end, m->a.rows,
      m->a.cols, m->b.shard_axis, m->b.begin, m->b.end, m->b.rows, m->b.cols,
      m->bottleneck.kind, m->bottleneck.axis, m->bottleneck.reduction,
      m->bottleneck.order, m->output.kind, m->output.axis,
      m->output.reduction, m->output.order, m->fused_into, m->storage_dtype,
      m->collective_dtype, m->accum_dtype, m->impl_revision, m->generation};
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
    lsim__be64(&p, v[i]);
  return lsim_sha256(buf, (size_t)(p - buf), out, eb);
}

/* ---------------------------------------- distributed generation snapshot */

lsim_err lsim_gensnap_init(lsim_gensnap *s, int n, lsim_errbuf *eb) {
  memset(s, 0, sizeof *s);
  if (n < 1 || n > LSIM_TP_MAX_WORLD)
    return lsim_fail(eb, LSIM_E_TP_WORLD, "snapshot: %d members outside "
                     "1..%d", n, LSIM_TP_MAX_WORLD);
  s->n = n;
  for (int i = 0; i < n; i++)
    s->gen[i] = -1;
  return 0;
}

lsim_err lsim_gensnap_publish(lsim_gensnap *s, int member, int64_t gen,
                              const lsim_digest *content, lsim_errbuf *eb) {
  if (member < 0 || member >= s->n)
    return lsim_fail(eb, LSIM_E_TP_WORLD, "snapshot: member %d outside "
                     "0..%d", member, s->n - 1);
  if (!content || lsim_digest_is_zero(content) || gen < 0)
    return lsim_fail(eb, LSIM_E_TP_FIELD, "snapshot: member %d publishes a "
                     "missing digest or a negative generation", member);
  if (gen < s->gen[member] ||
      (gen == s->gen[member] && !lsim_digest_eq(content, &s->content[member])))
    return lsim_fail(eb, LSIM_E_TP_ORDER, "snapshot: member %d goes from "
                     "generation %lld back to %lld", member,
                     (long long)s->gen[member], (long long)gen);
  s->gen[member] = gen;
  s->content[member] = *content;
  return 0;
}

lsim_err lsim_gensnap_launchable(const lsim_gensnap *s, int64_t *gen,
                                 lsim_digest *content, lsim_errbuf *eb) {
  if (s->n < 1)
    return lsim_fail(eb, LSIM_E_TP_WORLD, "snapshot: no members");
  for (int i = 0; i < s->n; i++)
    if (s->gen[i] < 0)
      return lsim_fail(eb, LSIM_E_TP_UNPUBLISHED, "snapshot: member %d has "
                       "published nothing", i);
  for (int i = 1; i < s->n; i++)
    if (s->gen[i] != s->gen[0] || !lsim_digest_eq(&s->content[i],
                                                  &s->content[0]))
      return lsim_fail(eb, LSIM_E_TP_MIXED_GEN, "snapshot: member %d holds "
                       "generation %lld, member 0 generation %lld (mixed "
                       "snapshot, not launchable)", i,
                       (long long)s->gen[i], (long long)s->gen[0]);
  if (gen)
    *gen = s->gen[0];
  if (content)
    *content = s->content[0];
  return 0;
}

/* ------------------------------------------------------------- ledgers */

static int64_t lsim__gcd(int64_t a, int64_t b) {
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

lsim_err lsim_tp_residency(const lsim_tp_proj *p, int n, int64_t world,
                           int rule, int dtype, lsim_tp_res_ledger *out,
                           lsim_errbuf *eb) {
  memset(out, 0, sizeof *out);
  int ds = lsim_dtype_size(dtype);
  if (ds == 0)
    return lsim_fail(eb, LSIM_E_TP_DTYPE, "tp ledger: dtype %d is unknown",
                     dtype);
  if (n < 1)
    return lsim_fail(eb, LSIM_E_TP_FIELD, "tp ledger: no projections");
  int64_t rank_max = 0, cluster = 0, global = 0;
  for (int64_t q = 0; q < world || q == 0; q++) {
    int64_t here = 0;
    for (int i = 0; i < n; i++) {
      lsim_tp_group g = {world, q, p[i].style, p[i].d_in, p[i].d_out, p[i].r,
                         0};
      lsim_tp_manifest m;
      lsim_err rc = lsim_tp_manifest_build(&g, rule, dtype, dtype, dtype, 0,
                                           &m, eb);
      if (rc)
        return rc;
      here += m.a.rows * m.a.cols + m.b.rows * m.b.cols;
      if (q == 0)
        global += p[i].r * (p[i].d_in + p[i].d_out);
    }
    if (here > rank_max)
      rank_max = here;
    cluster += here;
  }
  out->rank_scalars = rank_max;
  out->rank_bytes = rank_max * ds;
  out->cluster_bytes = cluster * ds;
  out->replicated_rank_bytes = global * ds;
  out->replicated_cluster_bytes = global * ds * world;
  return 0;
}

lsim_err lsim_tp_residency_verify(const lsim_tp_proj *p, int n,
                                  int64_t world, int rule, int dtype,
                                  const lsim_tp_res_ledger *claimed,
                                  lsim_errbuf *eb) {
  lsim_tp_res_ledger want;
  lsim_err rc = lsim_tp_residency(p, n, world, rule, dtype, &want, eb);
  if (rc)
    return rc;
  const struct {
    const char *name;
    int64_t got, want;
  } f[] = {
      {"rank_scalars", claimed->rank_scalars, want.rank_scalars},
      {"rank_bytes", claimed->rank_bytes, want.rank_bytes},
      {"cluster_bytes", claimed->cluster_bytes, want.cluster_bytes},
      {"replicated_rank_bytes", claimed->replicated_rank_bytes,
       want.replicated_rank_bytes},
      {"replicated_cluster_bytes", claimed->replicated_cluster_bytes,
       want.replicated_cluster_bytes},
  };
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
    if (f[i].got != f[i].want)
      return lsim_fail(eb, LSIM_E_TP_LEDGER, "tp ledger: %s claims %lld, "
                       "the placement gives %lld", f[i].name,
                       (long long)f[i].got, (long long)f[i].want);
  return 0;
}

lsim_err lsim_tp_collectives(int64_t world, int64_t tokens, int64_t h,
                             int64_t r, int n_gather, int n_reduce,
                             int dtype, lsim_tp_coll_ledger *out,
                             lsim_errbuf *eb) {
  memset(out, 0, sizeof *out);
  int ds = lsim_dtype_size(dtype);
  if (ds == 0)
    return lsim_fail(eb, LSIM_E_TP_DTYPE, "tp ledger: dtype %d is unknown",
                     dtype);
  if (world < 1 || world > LSIM_TP_MAX_WORLD)
    return lsim_fail(eb, LSIM_E_TP_WORLD, "tp ledger: degree %lld outside "
                     "1..%d", (long long)world, LSIM_TP_MAX_WORLD);
  if (tokens < 0 || h < 1 || r < 1 || n_gather < 0 || n_reduce < 0)
    return lsim_fail(eb, LSIM_E_TP_FIELD, "tp ledger: tokens, h, r or "
                     "collective counts out of range");
  if (r % world || h % world)
    return lsim_fail(eb, LSIM_E_TP_DIV, "tp ledger: degree %lld must divide "
                     "r %lld and h %lld", (long long)world, (long long)r,
                     (long long)h);
  out->gather_elems = (world - 1) * tokens * (r / world);
  out->reduce_elems = 2 * (world - 1) * tokens * (r / world);
  out->lora_elems = n_gather * out->gather_elems + n_reduce * out->reduce_elems;
  out->base_elems = 2 * (world - 1) * tokens * (h / world);
  out->lora_bytes = out->lora_elems * ds;
  out->base_bytes = out->base_elems * ds;
  /* The ratio does not depend on N or B: (n_g + 2 n_r) r / (2 h). */
  int64_t num = (int64_t)(n_gather + 2 * n_reduce) * r, den = 2 * h;
  int64_t g = lsim__gcd(num, den);
  out->ratio_num = g ? num / g : 0;
  out->ratio_den = g ? den / g : 1;
  return 0;
}
