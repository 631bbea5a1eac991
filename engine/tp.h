/*
** tp.h: tensor-parallel adapter placement (article 0x06F).
**
** A worker that serves a large base model spans N GPUs (the TP degree).
** The adapter branch of a projection must produce its output in the same
** partitioned layout as the base projection it augments, so its factor
** shards and collectives are not free choices: they follow the base.  This
** file states that contract as data and checks it.
**
**   manifest      what rank j of an N-rank group holds of one adapted
**                 projection and which collectives it runs: TP degree and
**                 rank, the base projection's style and shard, each
**                 factor's shard axis / interval / local shape, the
**                 divisibility or padding rule, the bottleneck collective
**                 (kind, axis, reduction, order), the output collective and
**                 which base collective carries it, storage / collective /
**                 accumulation dtypes, implementation revision and the
**                 adapter generation the shards belong to.
**                 lsim_tp_manifest_build() writes the article's schedule;
**                 lsim_tp_validate() fails closed on anything else, one
**                 code per fault (docs/TP.md).  lsim_tp_manifest_digest()
**                 is bound into the local kernel ABI (identity.h,
**                 lsim_kernel_in.tp_manifest).
**   snapshot      a distributed generation snapshot: every member (TP rank)
**                 publishes (generation, content digest) on its own; the
**                 group is launchable only when every member has published
**                 the same pair.  A member that publishes early leaves a
**                 mixed snapshot, never launchable.  The snapshot knows
**                 nothing about TP beyond "N members", so any distributed
**                 publication (a shared basis of a compressed collection,
**                 say) can use it.
**   ledgers       per-rank and cluster resident factor bytes (sharded vs
**                 replicated) and logical collective elements per rank
**                 (ring all-gather (N-1)Br/N, all-reduce 2(N-1)Br/N).
**
** Orientation is the repository's: A [r][d_in], B [d_out][r].  Local
** shapes are given in that orientation.  The two styles:
**
**   COLUMN  base W split on d_out.  A split on the rank axis (the S-LoRA
**           schedule; A replicated is the other valid choice), B split on
**           d_out with the base's interval.  Bottleneck: all-gather on the
**           rank axis, rank order (none when A is replicated).  Output:
**           stays sharded like the base output, no collective.
**   ROW     base W split on d_in; the activation arrives sharded the same
**           way.  A split on d_in with the base's interval, B split on
**           d_out.  Bottleneck: all-reduce with SUM on the rank axis (local
**           shrink results are partial sums).  Output: the disjoint slices
**           ride the base's final all-reduce (SUM, output axis).
**
** Nothing here allocates, prints or reads a clock.
*/
#ifndef LSIM_TP_H
#define LSIM_TP_H

#include "identity.h"
#include "lsim.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LSIM_TP_MAX_WORLD 64

enum lsim_tp_style { LSIM_TP_COLUMN = 1, LSIM_TP_ROW = 2 };

/* Shard axis of a factor: 0 = replicated, else an enum lsim_axis. */
#define LSIM_TP_REPLICATED 0

enum lsim_tp_rule {
  LSIM_TP_DIV_EXACT = 1, /* every split extent divisible by N */
  LSIM_TP_PAD_ZERO = 2   /* ceil(extent/N) per rank, the tail zero-padded */
};

enum lsim_tp_coll_kind {
  LSIM_TP_COLL_NONE = 1,
  LSIM_TP_COLL_ALL_GATHER = 2, /* concatenation in `order` */
  LSIM_TP_COLL_ALL_REDUCE = 3
};

enum lsim_tp_reduction {
  LSIM_TP_RED_NONE = 1, /* gathers */
  LSIM_TP_RED_SUM = 2,
  LSIM_TP_RED_MAX = 3,
  LSIM_TP_RED_MEAN = 4
};

enum lsim_tp_order {
  LSIM_TP_ORDER_RANK_ASC = 1, /* part j from rank j */
  LSIM_TP_ORDER_RANK_DESC = 2
};

enum lsim_tp_fuse {
  LSIM_TP_FUSE_NONE = 1,           /* no base collective carries it */
  LSIM_TP_FUSE_BASE_ALL_REDUCE = 2 /* added before the base final all-reduce */
};

typedef struct lsim_tp_factor {
  int shard_axis;       /* LSIM_TP_REPLICATED or enum lsim_axis */
  int64_t begin, end;   /* global interval on shard_axis held here */
  int64_t rows, cols;   /* local shape, repository orientation */
} lsim_tp_factor;

typedef struct lsim_tp_collective {
  int kind;      /* enum lsim_tp_coll_kind */
  int axis;      /* enum lsim_axis the parts are laid along / reduced on */
  int reduction; /* enum lsim_tp_reduction */
  int order;     /* enum lsim_tp_order */
} lsim_tp_collective;

/* One adapted projection on one rank. */
typedef struct lsim_tp_manifest {
  int64_t world, rank;          /* TP degree and this rank */
  int style;                    /* enum lsim_tp_style of the base */
  int64_t d_in, d_out, r;       /* global shapes */
  int64_t base_begin, base_end; /* base W shard: d_out (COLUMN) / d_in (ROW) */
  int rule;                     /* enum lsim_tp_rule */
  lsim_tp_factor a, b;
  lsim_tp_collective bottleneck; /* after the local shrink */
  lsim_tp_collective output;     /* the adapter output */
  int fused_into;                /* enum lsim_tp_fuse */
  int storage_dtype;             /* enum lsim_dtype of the resident shards */
  int collective_dtype;          /* what travels on the link */
  int accum_dtype;               /* local products accumulate in this */
  int64_t impl_revision;         /* >= 0, the deployed implementation */
  int64_t generation;            /* adapter generation of these shards */
} lsim_tp_manifest;

/* What the group actually is, read from the runtime at validation time. */
typedef struct lsim_tp_group {
  int64_t world, rank;
  int style;
  int64_t d_in, d_out, r;
  int64_t generation; /* the generation being launched */
} lsim_tp_group;

/* Rank `rank`'s interval of an extent split N ways under `rule`, and the
** local (padded) extent.  E_TP_DIV when rule is exact and N does not
** divide the extent; E_TP_WORLD / E_TP_FIELD on bad arguments. */
lsim_err lsim_tp_interval(int64_t extent, int64_t world, int64_t rank,
                          int rule, int64_t *begin, int64_t *end,
                          int64_t *local, lsim_errbuf *eb);

/* Write the article's schedule for `g` (style, shapes, rank) into m. */
lsim_err lsim_tp_manifest_build(const lsim_tp_group *g, int rule,
                                int storage_dtype, int collective_dtype,
                                int accum_dtype, int64_t impl_revision,
                                lsim_tp_manifest *m, lsim_errbuf *eb);

/*
** Check m against the group, in this order: fields (E_TP_FIELD,
** E_TP_WORLD), stale manifest (another degree, rank, style, shape or
** generation: E_TP_STALE_MANIFEST), divisibility (E_TP_DIV), base shard
** interval (E_TP_SHAPE), factor placement vs the base (E_TP_INDEPENDENT),
** local shapes (E_TP_SHAPE), bottleneck collective (E_TP_NO_GATHER,
** E_TP_CONCAT_PARTIALS, E_TP_REDUCTION, E_TP_ORDER), output collective and
** fusion (E_TP_FUSION, E_TP_REDUCTION), dtypes (E_TP_DTYPE).
*/
lsim_err lsim_tp_validate(const lsim_tp_manifest *m, const lsim_tp_group *g,
                          lsim_errbuf *eb);

/* SHA-256 of the manifest's canonical bytes (docs/TP.md); validates the
** fields first (not against a group). */
lsim_err lsim_tp_manifest_digest(const lsim_tp_manifest *m, lsim_digest *out,
                                 lsim_errbuf *eb);

/* ---------------------------------------- distributed generation snapshot */

typedef struct lsim_gensnap {
  int n;                                  /* members, 1..LSIM_TP_MAX_WORLD */
  int64_t gen[LSIM_TP_MAX_WORLD];         /* -1: nothing published yet */
  lsim_digest content[LSIM_TP_MAX_WORLD]; /* what each member published */
} lsim_gensnap;

lsim_err lsim_gensnap_init(lsim_gensnap *s, int n, lsim_errbuf *eb);
/* Member publishes (gen, content).  A generation never goes backwards
** (E_TP_ORDER); content must not be missing (E_TP_FIELD). */
lsim_err lsim_gensnap_publish(lsim_gensnap *s, int member, int64_t gen,
                              const lsim_digest *content, lsim_errbuf *eb);
/* 0 and the common (gen, content) when every member published the same
** pair; E_TP_UNPUBLISHED when a member has published nothing; E_TP_MIXED_GEN
** when generations or contents differ (one member published early). */
lsim_err lsim_gensnap_launchable(const lsim_gensnap *s, int64_t *gen,
                                 lsim_digest *content, lsim_errbuf *eb);

/* ------------------------------------------------------------- ledgers */

/* Resident factor bytes of a set of adapted projections (global shapes),
** sharded per the schedule above or replicated on every rank.  No
** allocator metadata, pages or collective buffers. */
typedef struct lsim_tp_proj {
  int style;              /* enum lsim_tp_style */
  int64_t d_in, d_out, r;
} lsim_tp_proj;

typedef struct lsim_tp_res_ledger {
  int64_t rank_scalars;   /* held by the largest rank (all equal if exact) */
  int64_t rank_bytes;
  int64_t cluster_bytes;  /* summed over the N ranks */
  int64_t replicated_rank_bytes;    /* every rank holds all global factors */
  int64_t replicated_cluster_bytes;
} lsim_tp_res_ledger;

lsim_err lsim_tp_residency(const lsim_tp_proj *p, int n, int64_t world,
                           int rule, int dtype, lsim_tp_res_ledger *out,
                           lsim_errbuf *eb);

/* Recompute and compare every field of a claimed residency ledger:
** E_TP_LEDGER naming the first field that differs. */
lsim_err lsim_tp_residency_verify(const lsim_tp_proj *p, int n,
                                  int64_t world, int rule, int dtype,
                                  const lsim_tp_res_ledger *claimed,
                                  lsim_errbuf *eb);

/* Logical elements received per rank (ring algorithms), no headers,
** topology, startup or overlap. */
typedef struct lsim_tp_coll_ledger {
  int64_t gather_elems;  /* one rank-axis all-gather: (N-1) B r / N */
  int64_t reduce_elems;  /* one rank-width all-reduce: 2 (N-1) B r / N */
  int64_t lora_elems;    /* n_gather gathers + n_reduce reduces */
  int64_t base_elems;    /* the base output all-reduce: 2 (N-1) B h / N */
  int64_t lora_bytes, base_bytes; /* times the collective dtype's size */
  int64_t ratio_num, ratio_den;   /* lora / base in lowest terms */
} lsim_tp_coll_ledger;

/* B tokens, hidden h, rank r; N must divide r and h (E_TP_DIV). */
lsim_err lsim_tp_collectives(int64_t world, int64_t tokens, int64_t h,
                             int64_t r, int n_gather, int n_reduce,
                             int dtype, lsim_tp_coll_ledger *out,
                             lsim_errbuf *eb);

#ifdef __cplusplus
}
#endif

#endif /* LSIM_TP_H */
