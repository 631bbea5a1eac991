/*
** identity.h: content identities, bindings and the generation vector.
**
** A multi-adapter runtime needs several identities, not one overloaded
** adapter id (article 0x01G).  Each one here is a SHA-256 digest over a
** canonical byte encoding of a small record; docs/IDENTITY.md describes the
** encoding byte for byte so another implementation can reproduce it.
**
**   base execution ABI  weights, config, transforms, target-module map
**   adapter artifact    method, peft config, base ABI, factor dtype and the
**                       per-module specs (sorted by canonical module name),
**                       with A and B content hashes computed here from the
**                       factor bytes
**   adapter semantic    base ABI + artifact + activation policy
**   local kernel ABI    semantic ABI + kernel family, conversion revision,
**                       dtype, packing, per-module physical layout, TP shard
**   request binding     namespace, request id, attempt, lineage, base ABI,
**                       semantic ABI, generation policy
**   slot binding        worker, epoch, device, slot index, slot generation,
**                       pointer-table generation, semantic and kernel ABI
**   prefix identity     cache ABI, prompt tokens, side inputs, isolation salt
**
** What is deliberately not an input: aliases, display names, URIs, paths,
** human revisions, catalog integer ids and pointers never reach any record
** (there is no field for them).  The prefix identity has no request id,
** attempt, slot or sampling field.
**
** Inputs are caller-owned structs; nothing here keeps a pointer after the
** call returns.  Strings are NUL-terminated "tokens": 1..1024 bytes, each
** in 0x21..0x7e (printable ASCII, no space).  A digest input that is all
** zero bytes counts as missing (LSIM_DIGEST_INIT) and is rejected.
** Enumerations start at 1 so that a zero-filled struct is never valid.
**
** Generations form a vector of independent namespaces (catalog, request
** attempt, slot, pointer table, batch plan, cache snapshot, RNG).  A launch
** snapshot records the vector and the binding digests observed when a plan
** was frozen; lsim_launch_validate() compares every component with its
** owner's current value and fails with one distinct code per component
** and per binding.
**
** Every function returns 0 or a negative LSIM_E_* code with a message in eb
** (eb may be NULL).  On failure the output is left zeroed / empty.
*/
#ifndef LSIM_IDENTITY_H
#define LSIM_IDENTITY_H

#include "lsim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- digests */

#define LSIM_DIGEST_LEN 32
#define LSIM_DIGEST_HEX_SIZE 65 /* 64 lowercase hex digits and a NUL */

typedef struct lsim_digest {
  uint8_t b[LSIM_DIGEST_LEN];
} lsim_digest;
#define LSIM_DIGEST_INIT {{0}}

/* Write 64 lowercase hex digits and a NUL into out; returns out. */
char *lsim_digest_hex(const lsim_digest *d, char out[LSIM_DIGEST_HEX_SIZE]);
int lsim_digest_eq(const lsim_digest *a, const lsim_digest *b);
int lsim_digest_is_zero(const lsim_digest *d); /* "missing" */

/* SHA-256 (OpenSSL EVP) of n bytes at p (p may be NULL when n is 0). */
lsim_err lsim_sha256(const void *p, size_t n, lsim_digest *out,
                     lsim_errbuf *eb);

/* Canonical bytes of a record.  The bytes are owned by the struct;
** lsim_canon_release() frees them and leaves it empty (LSIM_CANON_INIT). */
typedef struct lsim_canon {
  uint8_t *buf; /* read-only for callers */
  size_t len;   /* read-only */
  size_t cap;   /* private */
} lsim_canon;
#define LSIM_CANON_INIT {NULL, 0, 0}
void lsim_canon_release(lsim_canon *c);

/* ------------------------------------------------------- enumerations */

/* Scalar types of factor bytes and kernel storage; the canonical name is
** what gets encoded ("f32", "f16", "bf16", "i8", "i32"). */
enum lsim_dtype {
  LSIM_DT_F32 = 1,
  LSIM_DT_F16 = 2,
  LSIM_DT_BF16 = 3,
  LSIM_DT_I8 = 4,
  LSIM_DT_I32 = 5
};
/* Bytes per scalar; 0 for an unknown dtype. */
int lsim_dtype_size(int dtype);
const char *lsim_dtype_name(int dtype); /* NULL when unknown */

/* How the alpha numerator becomes the scale s = alpha / denominator. */
enum lsim_scaling_rule {
  LSIM_SCALE_ALPHA_OVER_RANK = 1,     /* "alpha_over_rank": alpha / r */
  LSIM_SCALE_ALPHA_OVER_SQRT_RANK = 2 /* "alpha_over_sqrt_rank": rsLoRA */
};

/* Axis names of factor matrices (logical and physical orders). */
enum lsim_axis {
  LSIM_AXIS_RANK = 1,   /* "rank" */
  LSIM_AXIS_INPUT = 2,  /* "input": d_in */
  LSIM_AXIS_OUTPUT = 3  /* "output": d_out */
};

/* Tensor-parallel placement of a rank's factors. */
enum lsim_shard_axis {
  LSIM_SHARD_REPLICATED = 1, /* "replicated": every rank holds A and B */
  LSIM_SHARD_OUTPUT = 2,     /* "output": column parallel; A replicated,
                                B split over d_out */
  LSIM_SHARD_INPUT = 3       /* "input": row parallel; A split over d_in,
                                B replicated */
};

/* ------------------------------------------------------------ inputs */

/* Base execution ABI: four caller-computed SHA-256 digests. */
typedef struct lsim_base_abi_in {
  lsim_digest model_weights;    /* all base weight bytes */
  lsim_digest model_config;     /* the model configuration */
  lsim_digest weight_transform; /* transforms applied at load (fusion...) */
  lsim_digest target_module_map; /* map from module names to projections */
} lsim_base_abi_in;

/*
** One adapted module, in the artifact's mathematical orientation:
** A is [rank, d_in], B is [d_out, rank], both row-major in the artifact
** dtype.  a_axes must be {RANK, INPUT} and b_axes {OUTPUT, RANK}: a caller
** holding a converted orientation (e.g. B as [rank, output]) must say so in
** the kernel layout, not here.  Factor bytes are borrowed for the call;
** their lengths are in bytes.
*/
typedef struct lsim_module_spec {
  const char *name;  /* canonical base-module name, the sort key */
  const char *role;  /* target role, e.g. "q_proj" */
  int64_t d_out;     /* base weight shape [d_out, d_in], elements, */
  int64_t d_in;      /* each 1..2^30 */
  int64_t rank;      /* r_m, 1..2^30 */
  int64_t alpha;     /* alpha numerator, > 0 */
  int scaling;       /* enum lsim_scaling_rule */
  int a_axes[2];     /* enum lsim_axis: logical axes of A */
  int b_axes[2];     /* enum lsim_axis: logical axes of B */
  const void *a_bytes;
  size_t a_len;      /* must be rank * d_in * dtype size */
  const void *b_bytes;
  size_t b_len;      /* must be d_out * rank * dtype size */
} lsim_module_spec;

/* Adapter artifact.  Module order in `modules` does not matter. */
typedef struct lsim_artifact_in {
  const char *method;         /* e.g. "lora" */
  lsim_digest peft_config;    /* the adapter configuration document */
  lsim_digest base_abi;       /* lsim_id_base_abi() of the base */
  int dtype;                  /* enum lsim_dtype of the factor bytes */
  const lsim_module_spec *modules;
  int n_modules;              /* >= 1, names distinct */
} lsim_artifact_in;

/* Adapter semantic ABI.  The base ABI is the artifact's own base_abi. */
typedef struct lsim_semantic_in {
  const lsim_artifact_in *artifact;
  lsim_digest activation_policy; /* fixed digest for always-on LoRA */
} lsim_semantic_in;

/* A TP shard: this worker is rank `rank` of `world`. */
typedef struct lsim_shard {
  int64_t rank;  /* 0 <= rank < world */
  int64_t world; /* >= 1 */
  int axis;      /* enum lsim_shard_axis */
} lsim_shard;

/*
** Physical layout of one module on this rank.  a_axes / b_axes give the
** storage order of the local factors (a permutation of the logical axes;
** {RANK, OUTPUT} is the Punica expand orientation of B).  The ranges state
** which global output rows and input columns this rank's factors cover,
** half-open; they must equal what the shard implies.
*/
typedef struct lsim_module_layout {
  const char *module; /* canonical name of an artifact module */
  int a_axes[2];      /* enum lsim_axis */
  int b_axes[2];      /* enum lsim_axis */
  int64_t out_begin, out_end; /* [begin, end) of d_out held by B here */
  int64_t in_begin, in_end;   /* [begin, end) of d_in held by A here */
} lsim_module_layout;

/*
** Local kernel ABI: one layout per artifact module, any order.  The
** semantic ABI is recomputed from `semantic` (so the artifact's factor
** bytes must still be reachable) and the module shapes come from the same
** artifact, so the kernel ABI cannot name a semantic ABI whose modules it
** did not check its layouts against.
*/
typedef struct lsim_kernel_in {
  const lsim_semantic_in *semantic;
  const char *kernel_family;   /* e.g. "punica_sgmv" */
  int64_t conversion_revision; /* >= 0 */
  int dtype;                   /* enum lsim_dtype of the converted storage */
  const char *packing;         /* e.g. "dense" */
  const lsim_module_layout *layouts;
  int n_layouts;
  lsim_shard shard;
  /* Optional: lsim_tp_manifest_digest() of this rank's TP placement
  ** (engine/tp.h).  All zero = none, and the record's bytes are then
  ** exactly what they were before the field existed. */
  lsim_digest tp_manifest;
} lsim_kernel_in;

typedef struct lsim_request_in {
  const char *request_namespace;
  const char *request_id;
  int64_t attempt;             /* >= 0 */
  const char *lineage_id;
  lsim_digest base_abi;
  lsim_digest adapter_semantic;
  lsim_digest generation_policy; /* sampling / replay policy */
} lsim_request_in;

/* Every integer is an identifier or generation, >= 0. */
typedef struct lsim_slot_in {
  int64_t worker_id;
  int64_t worker_epoch;          /* incarnation of the worker process */
  int64_t device_id;
  int64_t slot_index;
  int64_t slot_generation;
  int64_t pointer_table_generation;
  lsim_digest adapter_semantic;
  lsim_digest kernel_local;
} lsim_slot_in;

typedef struct lsim_prefix_in {
  lsim_digest cache_abi;      /* owned by the cache manifest; it carries
                                 the adapter semantic ABI */
  lsim_digest prompt_tokens;  /* e.g. lsim_id_tokens() */
  lsim_digest side_inputs;    /* images, documents...; a fixed digest when
                                 there are none */
  lsim_digest isolation_salt; /* tenant isolation; a fixed public digest
                                 for a shared cache */
} lsim_prefix_in;

/* ------------------------------------------------------- identities */

/*
** Each record has a _canon function (the exact bytes that are hashed,
** into a caller-owned lsim_canon that is reset first) and a digest
** function (SHA-256 of those bytes).  Both validate the input first.
*/
lsim_err lsim_id_base_abi_canon(const lsim_base_abi_in *in, lsim_canon *out,
                                lsim_errbuf *eb);
lsim_err lsim_id_base_abi(const lsim_base_abi_in *in, lsim_digest *out,
                          lsim_errbuf *eb);
lsim_err lsim_id_artifact_canon(const lsim_artifact_in *in, lsim_canon *out,
                                lsim_errbuf *eb);
lsim_err lsim_id_artifact(const lsim_artifact_in *in, lsim_digest *out,
                          lsim_errbuf *eb);
lsim_err lsim_id_semantic_canon(const lsim_semantic_in *in, lsim_canon *out,
                                lsim_errbuf *eb);
lsim_err lsim_id_semantic(const lsim_semantic_in *in, lsim_digest *out,
                          lsim_errbuf *eb);
lsim_err lsim_id_kernel_canon(const lsim_kernel_in *in, lsim_canon *out,
                              lsim_errbuf *eb);
lsim_err lsim_id_kernel(const lsim_kernel_in *in, lsim_digest *out,
                        lsim_errbuf *eb);
lsim_err lsim_id_request_canon(const lsim_request_in *in, lsim_canon *out,
                               lsim_errbuf *eb);
lsim_err lsim_id_request(const lsim_request_in *in, lsim_digest *out,
                         lsim_errbuf *eb);
lsim_err lsim_id_slot_canon(const lsim_slot_in *in, lsim_canon *out,
                            lsim_errbuf *eb);
lsim_err lsim_id_slot(const lsim_slot_in *in, lsim_digest *out,
                      lsim_errbuf *eb);
lsim_err lsim_id_prefix_canon(const lsim_prefix_in *in, lsim_canon *out,
                              lsim_errbuf *eb);
lsim_err lsim_id_prefix(const lsim_prefix_in *in, lsim_digest *out,
                        lsim_errbuf *eb);

/* Digest of a prompt's token ids (each >= 0); n may be 0. */
lsim_err lsim_id_tokens(const int64_t *tokens, size_t n, lsim_digest *out,
                        lsim_errbuf *eb);

/* Content hash of one factor: SHA-256 of exactly its bytes. */
lsim_err lsim_id_factor_hash(const void *bytes, size_t len, lsim_digest *out,
                             lsim_errbuf *eb);
/* Recompute a factor's hash and compare (staged-copy check before
** publication): LSIM_E_ID_FACTOR_HASH when the bytes drifted. */
lsim_err lsim_id_factor_verify(const void *bytes, size_t len,
                               const lsim_digest *expected, lsim_errbuf *eb);

/* --------------------------------------------------- residency ledger */

/*
** Analytical factor residency of an adapter (no alignment, pages or
** workspace): scalars and bytes of the logical artifact, of one TP rank,
** and summed over all ranks.  The shard's rank selects `local_*`; every
** rank of a valid shard holds the same amount.
*/
typedef struct lsim_residency {
  int64_t logical_scalars; /* sum over modules of r * (d_in + d_out) */
  int64_t logical_bytes;
  int64_t local_scalars;   /* held by shard.rank */
  int64_t local_bytes;
  int64_t cluster_bytes;   /* sum of local bytes over all world ranks */
} lsim_residency;

lsim_err lsim_id_residency(const lsim_module_spec *modules, int n_modules,
                           int dtype, const lsim_shard *shard,
                           lsim_residency *out, lsim_errbuf *eb);
/* Recompute and compare every field of a claimed ledger:
** LSIM_E_ID_LEDGER on the first field that differs. */
lsim_err lsim_id_residency_verify(const lsim_module_spec *modules,
                                  int n_modules, int dtype,
                                  const lsim_shard *shard,
                                  const lsim_residency *claimed,
                                  lsim_errbuf *eb);

/* ------------------------------------------------- generation vector */

/* Components are separate namespaces: never compare one with another. */
enum lsim_gen_component {
  LSIM_GEN_CATALOG = 0,   /* alias / authorization records republished */
  LSIM_GEN_ATTEMPT,       /* request retried or replayed */
  LSIM_GEN_SLOT,          /* physical adapter slot republished */
  LSIM_GEN_POINTER_TABLE, /* kernel pointer / offset metadata rebuilt */
  LSIM_GEN_BATCH_PLAN,    /* row-to-request/adapter map republished */
  LSIM_GEN_CACHE,         /* committed K/V advanced or rolled back */
  LSIM_GEN_RNG,           /* sampling state advanced */
  LSIM_GEN_COUNT
};

typedef struct lsim_genvec {
  int64_t g[LSIM_GEN_COUNT]; /* each >= 0 */
} lsim_genvec;
#define LSIM_GENVEC_INIT {{0}}

const char *lsim_gen_name(int component); /* NULL when out of range */
/* Bump one component: LSIM_E_ID_GEN_COMPONENT for an unknown component,
** LSIM_E_ID_GEN_OVERFLOW when it would pass INT64_MAX. */
lsim_err lsim_genvec_advance(lsim_genvec *v, int component, lsim_errbuf *eb);

/* What a row's launch metadata captured when its plan was frozen. */
typedef struct lsim_launch_snapshot {
  lsim_genvec gen;
  lsim_digest request_binding;
  lsim_digest slot_binding;
  lsim_digest kernel_local; /* kernel ABI the metadata was built for */
} lsim_launch_snapshot;

/* The current state, each part read from its owner just before launch. */
typedef struct lsim_launch_owners {
  lsim_genvec gen; /* component i from the owner of namespace i */
  struct {
    lsim_digest binding, base_abi, adapter_semantic;
  } request;
  struct {
    lsim_digest base_abi, adapter_semantic; /* the catalog's artifact */
  } adapter;
  struct {
    lsim_digest binding, adapter_semantic, kernel_local;
  } slot;
  struct {
    lsim_digest adapter_semantic; /* what the cache's ABI was built on */
  } cache;
} lsim_launch_owners;

/*
** Check a snapshot against its owners, in this order: no digest missing
** and no generation negative; each generation component in enum order
** (LSIM_E_ID_STALE_CATALOG ... LSIM_E_ID_STALE_RNG, a snapshot ahead of
** its owner is as invalid as one behind); then request binding, request
** base vs adapter base, request semantic vs adapter semantic, slot binding,
** slot semantic vs adapter semantic, snapshot kernel ABI vs slot kernel
** ABI, cache semantic vs adapter semantic.  Returns the first failure.
*/
lsim_err lsim_launch_validate(const lsim_launch_snapshot *snap,
                              const lsim_launch_owners *now,
                              lsim_errbuf *eb);

#ifdef __cplusplus
}
#endif

#endif /* LSIM_IDENTITY_H */
