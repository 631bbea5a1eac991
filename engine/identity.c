/*
** identity.c: canonical encoding, identity digests, residency ledger and
** launch validation.
**
** Design notes.
**
**  1. Validate, then encode.  Every public entry point checks its whole
**     input first, in a fixed order that does not depend on the caller's
**     module order (names are checked in caller order, everything else
**     after sorting), and only then writes bytes.  So the encoder itself
**     can fail only on allocation or on a bug in this file.
**
**  2. The encoder is a tiny typed writer (docs/IDENTITY.md has the bytes):
**     'i' int64 big-endian, 's' u32 length + bytes, 'd' 32 raw bytes,
**     'l' u32 count + items, 'm' u32 count + (key, value) pairs.  Map keys
**     are string literals written here in ascending byte order; the
**     encoder re-checks the order and the declared counts on every write
**     and reports a violation as LSIM_E_BUG, so a mistyped key list fails
**     every test instead of silently producing a different digest.
**
**  3. Errors inside the encoder are sticky: the first one is kept, later
**     writes are no-ops, and the caller checks once at the end.
**
**  4. Modules (and kernel layouts) are put in order by sorting pointers to
**     the caller's specs with strcmp, which compares unsigned bytes; equal
**     neighbours after sorting are duplicates.  No ordering anywhere
**     depends on a pointer value.
**
**  5. Local factor shapes and the output / input ranges of a TP rank come
**     from one helper (lsim__local) used by both the kernel ABI and the
**     residency ledger, so the two cannot disagree.
*/
#include "identity.h"

#include <openssl/evp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LSIM__TOKEN_MAX 1024
#define LSIM__DIM_MAX ((int64_t)1 << 30)
#define LSIM__WORLD_MAX 65536
#define LSIM__DEPTH 8

/* ------------------------------------------------------------ digests */

char *lsim_digest_hex(const lsim_digest *d, char out[LSIM_DIGEST_HEX_SIZE]) {
  static const char hx[] = "0123456789abcdef";
  for (int i = 0; i < LSIM_DIGEST_LEN; i++) {
    out[2 * i] = hx[d->b[i] >> 4];
    out[2 * i + 1] = hx[d->b[i] & 15];
  }
  out[2 * LSIM_DIGEST_LEN] = '\0';
  return out;
}

int lsim_digest_eq(const lsim_digest *a, const lsim_digest *b) {
  return memcmp(a->b, b->b, LSIM_DIGEST_LEN) == 0;
}

int lsim_digest_is_zero(const lsim_digest *d) {
  uint8_t acc = 0;
  for (int i = 0; i < LSIM_DIGEST_LEN; i++)
    acc |= d->b[i];
  return acc == 0;
}

lsim_err lsim_sha256(const void *p, size_t n, lsim_digest *out,
                     lsim_errbuf *eb) {
  if (!out || (!p && n))
    return lsim_fail(eb, LSIM_E_USAGE, "sha-256: null argument");
  memset(out, 0, sizeof *out);
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  if (!ctx)
    return lsim_fail(eb, LSIM_E_NOMEM, "sha-256: cannot allocate a context");
  unsigned int len = 0;
  int ok = EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 &&
           (n == 0 || EVP_DigestUpdate(ctx, p, n) == 1) &&
           EVP_DigestFinal_ex(ctx, out->b, &len) == 1 &&
           len == LSIM_DIGEST_LEN;
  EVP_MD_CTX_free(ctx);
  if (!ok) {
    memset(out, 0, sizeof *out);
    return LSIM_BUG(eb, "openssl sha-256 failed");
  }
  return 0;
}

void lsim_canon_release(lsim_canon *c) {
  if (!c)
    return;
  free(c->buf);
  c->buf = NULL;
  c->len = c->cap = 0;
}

/* ------------------------------------------------------- enumerations */

int lsim_dtype_size(int dtype) {
  switch (dtype) {
  case LSIM_DT_F32: return 4;
  case LSIM_DT_F16: return 2;
  case LSIM_DT_BF16: return 2;
  case LSIM_DT_I8: return 1;
  case LSIM_DT_I32: return 4;
  }
  return 0;
}

const char *lsim_dtype_name(int dtype) {
  switch (dtype) {
  case LSIM_DT_F32: return "f32";
  case LSIM_DT_F16: return "f16";
  case LSIM_DT_BF16: return "bf16";
  case LSIM_DT_I8: return "i8";
  case LSIM_DT_I32: return "i32";
  }
  return NULL;
}

static const char *lsim__scaling_name(int s) {
  switch (s) {
  case LSIM_SCALE_ALPHA_OVER_RANK: return "alpha_over_rank";
  case LSIM_SCALE_ALPHA_OVER_SQRT_RANK: return "alpha_over_sqrt_rank";
  }
  return NULL;
}

static const char *lsim__axis_name(int a) {
  switch (a) {
  case LSIM_AXIS_RANK: return "rank";
  case LSIM_AXIS_INPUT: return "input";
  case LSIM_AXIS_OUTPUT: return "output";
  }
  return NULL;
}

static const char *lsim__shard_axis_name(int a) {
  switch (a) {
  case LSIM_SHARD_REPLICATED: return "replicated";
  case LSIM_SHARD_OUTPUT: return "output";
  case LSIM_SHARD_INPUT: return "input";
  }
  return NULL;
}

/* ------------------------------------------------------------ encoder */

enum {
  LSIM__T_INT = 'i',
  LSIM__T_TEXT = 's',
  LSIM__T_DIGEST = 'd',
  LSIM__T_LIST = 'l',
  LSIM__T_MAP = 'm'
};

typedef struct lsim__enc {
  lsim_canon *c;
  lsim_errbuf *eb;
  lsim_err err; /* first error; later writes do nothing */
  int depth;
  int top_done; /* the single top-level value has been written */
  struct {
    int is_map;
    uint32_t left;    /* items (or pairs) still to come */
    int want_value;   /* a key was written, its value is next */
    const char *last; /* previous key, for the order check */
  } st[LSIM__DEPTH];
} lsim__enc;

static void lsim__enc_start(lsim__enc *e, lsim_canon *c, lsim_errbuf *eb) {
  memset(e, 0, sizeof *e);
  e->c = c;
  e->eb = eb;
  c->len = 0;
}

#define LSIM__ENC_BUG(e, what)              \
  do {                                      \
    if (!(e)->err)                          \
      (e)->err = LSIM_BUG((e)->eb, (what)); \
  } while (0)

static void lsim__raw(lsim__enc *e, const void *p, size_t n) {
  if (e->err || n == 0)
    return;
  lsim_canon *c = e->c;
  if (c->len + n > c->cap) {
    size_t cap = c->cap ? c->cap : 256;
    while (cap < c->len + n)
      cap *= 2;
    uint8_t *nb = realloc(c->buf, cap);
    if (!nb) {
      e->err = lsim_fail(e->eb, LSIM_E_NOMEM, "canonical encoding: out of "
                         "memory at %zu bytes", c->len + n);
      return;
    }
    c->buf = nb;
    c->cap = cap;
  }
  memcpy(c->buf + c->len, p, n);
  c->len += n;
}

static void lsim__u8(lsim__enc *e, unsigned v) {
  uint8_t b = (uint8_t)v;
  lsim__raw(e, &b, 1);
}

static void lsim__u32(lsim__enc *e, uint32_t v) {
  uint8_t b[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8),
                  (uint8_t)v};
  lsim__raw(e, b, 4);
}

/* Account for one value at the current nesting level. */
static void lsim__slot(lsim__enc *e) {
  if (e->err)
    return;
  if (e->depth == 0) {
    if (e->top_done)
      LSIM__ENC_BUG(e, "second top-level value");
    e->top_done = 1;
    return;
  }
  if (e->st[e->depth - 1].is_map) {
    if (!e->st[e->depth - 1].want_value)
      LSIM__ENC_BUG(e, "map value without a key");
    e->st[e->depth - 1].want_value = 0;
  } else {
    if (e->st[e->depth - 1].left == 0)
      LSIM__ENC_BUG(e, "list longer than declared");
    else
      e->st[e->depth - 1].left--;
  }
}

static void lsim__text_bytes(lsim__enc *e, const char *s) {
  size_t n = strlen(s);
  if (n > UINT32_MAX) {
    if (!e->err)
      e->err = lsim_fail(e->eb, LSIM_E_ID_CANON, "text of %zu bytes is too "
                         "long to encode", n);
    return;
  }
  lsim__u8(e, LSIM__T_TEXT);
  lsim__u32(e, (uint32_t)n);
  lsim__raw(e, s, n);
}

static void lsim__int(lsim__enc *e, int64_t v) {
  lsim__slot(e);
  uint64_t u = (uint64_t)v;
  uint8_t b[8];
  for (int i = 0; i < 8; i++)
    b[i] = (uint8_t)(u >> (56 - 8 * i));
  lsim__u8(e, LSIM__T_INT);
  lsim__raw(e, b, 8);
}

static void lsim__text(lsim__enc *e, const char *s) {
  lsim__slot(e);
  lsim__text_bytes(e, s);
}

static void lsim__digest(lsim__enc *e, const lsim_digest *d) {
  lsim__slot(e);
  lsim__u8(e, LSIM__T_DIGEST);
  lsim__raw(e, d->b, LSIM_DIGEST_LEN);
}

static void lsim__begin(lsim__enc *e, int tag, size_t count) {
  lsim__slot(e);
  if (e->err)
    return;
  if (e->depth == LSIM__DEPTH) {
    LSIM__ENC_BUG(e, "nesting too deep");
    return;
  }
  if (count > UINT32_MAX) {
    e->err = lsim_fail(e->eb, LSIM_E_ID_CANON, "%zu items are too many to "
                       "encode", count);
    return;
  }
  lsim__u8(e, (unsigned)tag);
  lsim__u32(e, (uint32_t)count);
  e->st[e->depth].is_map = tag == LSIM__T_MAP;
  e->st[e->depth].left = (uint32_t)count;
  e->st[e->depth].want_value = 0;
  e->st[e->depth].last = NULL;
  e->depth++;
}

static void lsim__map(lsim__enc *e, size_t pairs) {
  lsim__begin(e, LSIM__T_MAP, pairs);
}

static void lsim__list(lsim__enc *e, size_t items) {
  lsim__begin(e, LSIM__T_LIST, items);
}

static void lsim__key(lsim__enc *e, const char *k) {
  if (e->err)
    return;
  if (e->depth == 0 || !e->st[e->depth - 1].is_map) {
    LSIM__ENC_BUG(e, "key outside a map");
    return;
  }
  if (e->st[e->depth - 1].want_value || e->st[e->depth - 1].left == 0) {
    LSIM__ENC_BUG(e, "key where a value or the map end belongs");
    return;
  }
  const char *last = e->st[e->depth - 1].last;
  if (last && strcmp(last, k) >= 0) {
    LSIM__ENC_BUG(e, "map keys not in ascending byte order");
    return;
  }
  e->st[e->depth - 1].last = k;
  e->st[e->depth - 1].left--;
  e->st[e->depth - 1].want_value = 1;
  lsim__text_bytes(e, k);
}

static void lsim__end(lsim__enc *e) {
  if (e->err)
    return;
  if (e->depth == 0) {
    LSIM__ENC_BUG(e, "end without a container");
    return;
  }
  if (e->st[e->depth - 1].left != 0 || e->st[e->depth - 1].want_value) {
    LSIM__ENC_BUG(e, "container shorter than declared");
    return;
  }
  e->depth--;
}

/* Close the encoding; on failure the canonical buffer is released. */
static lsim_err lsim__enc_finish(lsim__enc *e) {
  if (!e->err && (e->depth != 0 || !e->top_done))
    LSIM__ENC_BUG(e, "unfinished encoding");
  if (e->err)
    lsim_canon_release(e->c);
  return e->err;
}

/* Shorthands for keyed values and pairs. */
static void lsim__kint(lsim__enc *e, const char *k, int64_t v) {
  lsim__key(e, k);
  lsim__int(e, v);
}
static void lsim__ktext(lsim__enc *e, const char *k, const char *s) {
  lsim__key(e, k);
  lsim__text(e, s);
}
static void lsim__kdigest(lsim__enc *e, const char *k, const lsim_digest *d) {
  lsim__key(e, k);
  lsim__digest(e, d);
}
static void lsim__kpair_int(lsim__enc *e, const char *k, int64_t a,
                            int64_t b) {
  lsim__key(e, k);
  lsim__list(e, 2);
  lsim__int(e, a);
  lsim__int(e, b);
  lsim__end(e);
}
static void lsim__kpair_text(lsim__enc *e, const char *k, const char *a,
                             const char *b) {
  lsim__key(e, k);
  lsim__list(e, 2);
  lsim__text(e, a);
  lsim__text(e, b);
  lsim__end(e);
}

/* ---------------------------------------------------------- validation */

/* A text field: present, 1..LSIM__TOKEN_MAX bytes in 0x21..0x7e. */
static lsim_err lsim__token(const char *s, const char *ctx, const char *field,
                            lsim_errbuf *eb) {
  if (!s)
    return lsim_fail(eb, LSIM_E_ID_CANON, "%s%s is missing", ctx, field);
  size_t n = 0;
  for (; s[n]; n++) {
    unsigned char ch = (unsigned char)s[n];
    if (n == LSIM__TOKEN_MAX)
      return lsim_fail(eb, LSIM_E_ID_CANON, "%s%s is longer than %d bytes",
                       ctx, field, LSIM__TOKEN_MAX);
    if (ch < 0x21 || ch > 0x7e)
      return lsim_fail(eb, LSIM_E_ID_CANON, "%s%s has byte 0x%02x at offset "
                       "%zu, outside printable ascii without space", ctx,
                       field, ch, n);
  }
  if (n == 0)
    return lsim_fail(eb, LSIM_E_ID_CANON, "%s%s is empty", ctx, field);
  return 0;
}

static lsim_err lsim__need(const lsim_digest *d, const char *field,
                           lsim_errbuf *eb) {
  if (lsim_digest_is_zero(d))
    return lsim_fail(eb, LSIM_E_ID_MISSING_DIGEST, "%s digest is missing "
                     "(all zero)", field);
  return 0;
}

static lsim_err lsim__nonneg(int64_t v, const char *field, lsim_errbuf *eb) {
  if (v < 0)
    return lsim_fail(eb, LSIM_E_ID_INT_RANGE, "%s %lld is negative", field,
                     (long long)v);
  return 0;
}

static lsim_err lsim__dtype(int dtype, const char *field, lsim_errbuf *eb) {
  if (!lsim_dtype_name(dtype))
    return lsim_fail(eb, LSIM_E_ID_DTYPE, "%s %d is not a known dtype", field,
                     dtype);
  return 0;
}

static int lsim__cmp_module(const void *a, const void *b) {
  const lsim_module_spec *x = *(const lsim_module_spec *const *)a;
  const lsim_module_spec *y = *(const lsim_module_spec *const *)b;
  return strcmp(x->name, y->name);
}

static int lsim__cmp_layout(const void *a, const void *b) {
  const lsim_module_layout *x = *(const lsim_module_layout *const *)a;
  const lsim_module_layout *y = *(const lsim_module_layout *const *)b;
  return strcmp(x->module, y->module);
}

/*
** Check names, sort, reject duplicates.  On success *out is a malloc'd
** array of n pointers into `m`, ascending by name; the caller frees it.
*/
static lsim_err lsim__sorted_modules(const lsim_module_spec *m, int n,
                                     const lsim_module_spec ***out,
                                     lsim_errbuf *eb) {
  *out = NULL;
  if (n <= 0)
    return lsim_fail(eb, LSIM_E_ID_NO_MODULES, "adapter has %d modules, "
                     "needs at least one", n);
  if (!m)
    return lsim_fail(eb, LSIM_E_USAGE, "module array is null");
  for (int i = 0; i < n; i++) {
    lsim_err rc = lsim__token(m[i].name, "module ", "name", eb);
    if (rc)
      return rc;
  }
  const lsim_module_spec **v = malloc((size_t)n * sizeof *v);
  if (!v)
    return lsim_fail(eb, LSIM_E_NOMEM, "cannot sort %d modules", n);
  for (int i = 0; i < n; i++)
    v[i] = &m[i];
  qsort(v, (size_t)n, sizeof *v, lsim__cmp_module);
  for (int i = 1; i < n; i++)
    if (strcmp(v[i - 1]->name, v[i]->name) == 0) {
      lsim_err rc = lsim_fail(eb, LSIM_E_ID_DUP_MODULE, "module %s appears "
                              "more than once", v[i]->name);
      free(v);
      return rc;
    }
  *out = v;
  return 0;
}

/* Shape, rank and logical axes: what the ledger and kernel ABI need. */
static lsim_err lsim__module_shape(const lsim_module_spec *m,
                                   lsim_errbuf *eb) {
  if (m->d_out < 1 || m->d_out > LSIM__DIM_MAX || m->d_in < 1 ||
      m->d_in > LSIM__DIM_MAX)
    return lsim_fail(eb, LSIM_E_ID_SHAPE, "module %s: base shape [%lld, "
                     "%lld] is outside 1..2^30", m->name, (long long)m->d_out,
                     (long long)m->d_in);
  if (m->rank < 1 || m->rank > LSIM__DIM_MAX)
    return lsim_fail(eb, LSIM_E_ID_RANK, "module %s: rank %lld is outside "
                     "1..2^30", m->name, (long long)m->rank);
  if (m->a_axes[0] != LSIM_AXIS_RANK || m->a_axes[1] != LSIM_AXIS_INPUT)
    return lsim_fail(eb, LSIM_E_ID_AXES, "module %s: logical axes of a must "
                     "be [rank, input], got [%d, %d]", m->name, m->a_axes[0],
                     m->a_axes[1]);
  if (m->b_axes[0] != LSIM_AXIS_OUTPUT || m->b_axes[1] != LSIM_AXIS_RANK)
    return lsim_fail(eb, LSIM_E_ID_AXES, "module %s: logical axes of b must "
                     "be [output, rank], got [%d, %d]", m->name, m->b_axes[0],
                     m->b_axes[1]);
  return 0;
}

static lsim_err lsim__factor(const lsim_module_spec *m, const char *which,
                             const void *p, size_t len, int64_t rows,
                             int64_t cols, int dsize, lsim_errbuf *eb) {
  /* rows, cols <= 2^30 and dsize <= 4, so the product fits in 2^62 */
  int64_t want = rows * cols * dsize;
  if (!p)
    return lsim_fail(eb, LSIM_E_ID_FACTOR_MISSING, "module %s: factor %s "
                     "bytes are missing", m->name, which);
  if ((uint64_t)len != (uint64_t)want)
    return lsim_fail(eb, LSIM_E_ID_FACTOR_SIZE, "module %s: factor %s has "
                     "%zu bytes, shape [%lld, %lld] needs %lld", m->name,
                     which, len, (long long)rows, (long long)cols,
                     (long long)want);
  return 0;
}

static lsim_err lsim__module_full(const lsim_module_spec *m, int dsize,
                                  lsim_errbuf *eb) {
  char ctx[LSIM__TOKEN_MAX + 16];
  snprintf(ctx, sizeof ctx, "module %s: ", m->name);
  lsim_err rc = lsim__token(m->role, ctx, "role", eb);
  if (!rc)
    rc = lsim__module_shape(m, eb);
  if (rc)
    return rc;
  if (m->alpha <= 0)
    return lsim_fail(eb, LSIM_E_ID_ALPHA, "module %s: alpha numerator %lld "
                     "is not positive", m->name, (long long)m->alpha);
  if (!lsim__scaling_name(m->scaling))
    return lsim_fail(eb, LSIM_E_ID_SCALING, "module %s: scaling rule %d is "
                     "unknown", m->name, m->scaling);
  rc = lsim__factor(m, "a", m->a_bytes, m->a_len, m->rank, m->d_in, dsize,
                    eb);
  if (!rc)
    rc = lsim__factor(m, "b", m->b_bytes, m->b_len, m->d_out, m->rank, dsize,
                      eb);
  return rc;
}

static lsim_err lsim__shard(const lsim_shard *s, lsim_errbuf *eb) {
  if (s->world < 1 || s->world > LSIM__WORLD_MAX)
    return lsim_fail(eb, LSIM_E_ID_SHARD_WORLD, "shard world size %lld is "
                     "outside 1..%d", (long long)s->world, LSIM__WORLD_MAX);
  if (!lsim__shard_axis_name(s->axis))
    return lsim_fail(eb, LSIM_E_ID_SHARD_AXIS, "shard axis %d is unknown",
                     s->axis);
  if (s->rank < 0 || s->rank >= s->world)
    return lsim_fail(eb, LSIM_E_ID_SHARD_RANK, "shard rank %lld is outside "
                     "0..%lld", (long long)s->rank, (long long)s->world - 1);
  return 0;
}

/* ------------------------------------------------- local factor shapes */

typedef struct lsim__local {
  int64_t a_rank, a_in;  /* local A, logical orientation [rank, input] */
  int64_t b_out, b_rank; /* local B, logical orientation [output, rank] */
  int64_t out_begin, out_end, in_begin, in_end;
} lsim__local;

/* What rank q of a (validated) shard holds of module m. */
static lsim_err lsim__local_of(const lsim_module_spec *m, const lsim_shard *s,
                               int64_t q, lsim__local *o, lsim_errbuf *eb) {
  o->a_rank = o->b_rank = m->rank;
  o->a_in = m->d_in;
  o->b_out = m->d_out;
  o->out_begin = o->in_begin = 0;
  o->out_end = m->d_out;
  o->in_end = m->d_in;
  if (s->axis == LSIM_SHARD_OUTPUT) {
    if (m->d_out % s->world)
      return lsim_fail(eb, LSIM_E_ID_SHARD_DIV, "module %s: d_out %lld is "
                       "not divisible by world size %lld", m->name,
                       (long long)m->d_out, (long long)s->world);
    o->b_out = m->d_out / s->world;
    o->out_begin = q * o->b_out;
    o->out_end = o->out_begin + o->b_out;
  } else if (s->axis == LSIM_SHARD_INPUT) {
    if (m->d_in % s->world)
      return lsim_fail(eb, LSIM_E_ID_SHARD_DIV, "module %s: d_in %lld is "
                       "not divisible by world size %lld", m->name,
                       (long long)m->d_in, (long long)s->world);
    o->a_in = m->d_in / s->world;
    o->in_begin = q * o->a_in;
    o->in_end = o->in_begin + o->a_in;
  }
  return 0;
}

/* ------------------------------------------------------ digest helper */

static lsim_err lsim__hash_canon(lsim_err rc, lsim_canon *c, lsim_digest *out,
                                 lsim_errbuf *eb) {
  if (!rc)
    rc = lsim_sha256(c->buf, c->len, out, eb);
  lsim_canon_release(c);
  if (rc)
    memset(out, 0, sizeof *out);
  return rc;
}

#define LSIM__DIGEST_FN(fn, canon_fn, in_type)                          \
  lsim_err fn(const in_type *in, lsim_digest *out, lsim_errbuf *eb) {   \
    if (!out)                                                           \
      return lsim_fail(eb, LSIM_E_USAGE, #fn ": output is null");       \
    memset(out, 0, sizeof *out);                                        \
    lsim_canon c = LSIM_CANON_INIT;                                     \
    return lsim__hash_canon(canon_fn(in, &c, eb), &c, out, eb);         \
  }

#define LSIM__CANON_ARGS(fn, in, out, eb)                             \
  do {                                                                \
    if (!(in) || !(out))                                              \
      return lsim_fail((eb), LSIM_E_USAGE, fn ": null argument");     \
    (out)->len = 0;                                                   \
  } while (0)

/* ------------------------------------------------------ base ABI */

lsim_err lsim_id_base_abi_canon(const lsim_base_abi_in *in, lsim_canon *out,
                                lsim_errbuf *eb) {
  LSIM__CANON_ARGS("base abi", in, out, eb);
  lsim_err rc = lsim__need(&in->model_weights, "model weights", eb);
  if (!rc)
    rc = lsim__need(&in->model_config, "model config", eb);
  if (!rc)
    rc = lsim__need(&in->weight_transform, "weight transform", eb);
  if (!rc)
    rc = lsim__need(&in->target_module_map, "target module map", eb);
  if (rc) {
    lsim_canon_release(out);
    return rc;
  }
  lsim__enc e;
  lsim__enc_start(&e, out, eb);
  lsim__map(&e, 5);
  lsim__kdigest(&e, "model_config_sha256", &in->model_config);
  lsim__kdigest(&e, "model_weights_sha256", &in->model_weights);
  lsim__ktext(&e, "schema", "lorasim.id.base_abi.v1");
  lsim__kdigest(&e, "target_module_map_sha256", &in->target_module_map);
  lsim__kdigest(&e, "weight_transform_sha256", &in->weight_transform);
  lsim__end(&e);
  return lsim__enc_finish(&e);
}

LSIM__DIGEST_FN(lsim_id_base_abi, lsim_id_base_abi_canon, lsim_base_abi_in)

/* ------------------------------------------------------ artifact */

/* Validate an artifact; on success *sorted holds the module order. */
static lsim_err lsim__artifact_check(const lsim_artifact_in *in,
                                     const lsim_module_spec ***sorted,
                                     lsim_errbuf *eb) {
  *sorted = NULL;
  lsim_err rc = lsim__token(in->method, "artifact ", "method", eb);
  if (!rc)
    rc = lsim__need(&in->peft_config, "peft config", eb);
  if (!rc)
    rc = lsim__need(&in->base_abi, "artifact base abi", eb);
  if (!rc)
    rc = lsim__dtype(in->dtype, "artifact dtype", eb);
  if (!rc)
    rc = lsim__sorted_modules(in->modules, in->n_modules, sorted, eb);
  if (rc)
    return rc;
  int dsize = lsim_dtype_size(in->dtype);
  for (int i = 0; i < in->n_modules; i++) {
    rc = lsim__module_full((*sorted)[i], dsize, eb);
    if (rc) {
      free(*sorted);
      *sorted = NULL;
      return rc;
    }
  }
  return 0;
}

static void lsim__module_enc(lsim__enc *e, const lsim_module_spec *m) {
  lsim_digest ha, hb;
  lsim_err rc = lsim_sha256(m->a_bytes, m->a_len, &ha, e->eb);
  if (!rc)
    rc = lsim_sha256(m->b_bytes, m->b_len, &hb, e->eb);
  if (rc) {
    if (!e->err)
      e->err = rc;
    return;
  }
  lsim__map(e, 10);
  lsim__kpair_text(e, "a_axes", lsim__axis_name(m->a_axes[0]),
                   lsim__axis_name(m->a_axes[1]));
  lsim__kdigest(e, "a_sha256", &ha);
  lsim__kint(e, "alpha", m->alpha);
  lsim__kpair_text(e, "b_axes", lsim__axis_name(m->b_axes[0]),
                   lsim__axis_name(m->b_axes[1]));
  lsim__kdigest(e, "b_sha256", &hb);
  lsim__kpair_int(e, "base_shape", m->d_out, m->d_in);
  lsim__ktext(e, "module", m->name);
  lsim__kint(e, "rank", m->rank);
  lsim__ktext(e, "role", m->role);
  lsim__ktext(e, "scaling", lsim__scaling_name(m->scaling));
  lsim__end(e);
}

lsim_err lsim_id_artifact_canon(const lsim_artifact_in *in, lsim_canon *out,
                                lsim_errbuf *eb) {
  LSIM__CANON_ARGS("artifact", in, out, eb);
  const lsim_module_spec **v;
  lsim_err rc = lsim__artifact_check(in, &v, eb);
  if (rc) {
    lsim_canon_release(out);
    return rc;
  }
  lsim__enc e;
  lsim__enc_start(&e, out, eb);
  lsim__map(&e, 6);
  lsim__kdigest(&e, "base_abi_sha256", &in->base_abi);
  lsim__ktext(&e, "dtype", lsim_dtype_name(in->dtype));
  lsim__ktext(&e, "method", in->method);
  lsim__key(&e, "modules");
  lsim__list(&e, (size_t)in->n_modules);
  for (int i = 0; i < in->n_modules; i++)
    lsim__module_enc(&e, v[i]);
  lsim__end(&e);
  lsim__kdigest(&e, "peft_config_sha256", &in->peft_config);
  lsim__ktext(&e, "schema", "lorasim.id.adapter_artifact.v1");
  lsim__end(&e);
  free(v);
  return lsim__enc_finish(&e);
}

LSIM__DIGEST_FN(lsim_id_artifact, lsim_id_artifact_canon, lsim_artifact_in)

/* ------------------------------------------------------ semantic ABI */

lsim_err lsim_id_semantic_canon(const lsim_semantic_in *in, lsim_canon *out,
                                lsim_errbuf *eb) {
  LSIM__CANON_ARGS("semantic abi", in, out, eb);
  if (!in->artifact) {
    lsim_canon_release(out);
    return lsim_fail(eb, LSIM_E_USAGE, "semantic abi: artifact is null");
  }
  lsim_digest art;
  lsim_err rc = lsim__need(&in->activation_policy, "activation policy", eb);
  if (!rc)
    rc = lsim_id_artifact(in->artifact, &art, eb);
  if (rc) {
    lsim_canon_release(out);
    return rc;
  }
  lsim__enc e;
  lsim__enc_start(&e, out, eb);
  lsim__map(&e, 4);
  lsim__kdigest(&e, "activation_policy_sha256", &in->activation_policy);
  lsim__kdigest(&e, "adapter_artifact_sha256", &art);
  lsim__kdigest(&e, "base_abi_sha256", &in->artifact->base_abi);
  lsim__ktext(&e, "schema", "lorasim.id.adapter_semantic.v1");
  lsim__end(&e);
  return lsim__enc_finish(&e);
}

LSIM__DIGEST_FN(lsim_id_semantic, lsim_id_semantic_canon, lsim_semantic_in)

/* ------------------------------------------------------ kernel ABI */

static int lsim__is_perm(const int ax[2], int x, int y) {
  return (ax[0] == x && ax[1] == y) || (ax[0] == y && ax[1] == x);
}

/* Local extent along a physical axis of a factor. */
static int64_t lsim__extent(int axis, const lsim__local *l) {
  switch (axis) {
  case LSIM_AXIS_RANK: return l->a_rank; /* == l->b_rank */
  case LSIM_AXIS_INPUT: return l->a_in;
  case LSIM_AXIS_OUTPUT: return l->b_out;
  }
  return -1;
}

/*
** Check every layout against its module; on success locals[i] is the local
** shape of mods[i] and lays[i] its layout (both in module order).
*/
static lsim_err lsim__layouts_check(const lsim_kernel_in *in,
                                    const lsim_module_spec **mods, int n,
                                    const lsim_module_layout **lays,
                                    lsim__local *locals, lsim_errbuf *eb) {
  int nl = in->n_layouts;
  if (nl < 0 || (nl > 0 && !in->layouts))
    return lsim_fail(eb, LSIM_E_USAGE, "kernel abi: bad layout array");
  for (int i = 0; i < nl; i++) {
    lsim_err rc = lsim__token(in->layouts[i].module, "layout ", "module", eb);
    if (rc)
      return rc;
  }
  const lsim_module_layout **v = malloc((size_t)(nl ? nl : 1) * sizeof *v);
  if (!v)
    return lsim_fail(eb, LSIM_E_NOMEM, "cannot sort %d layouts", nl);
  for (int i = 0; i < nl; i++)
    v[i] = &in->layouts[i];
  qsort(v, (size_t)nl, sizeof *v, lsim__cmp_layout);
  lsim_err rc = 0;
  for (int i = 1; i < nl && !rc; i++)
    if (strcmp(v[i - 1]->module, v[i]->module) == 0)
      rc = lsim_fail(eb, LSIM_E_ID_DUP_MODULE, "layout for module %s appears "
                     "more than once", v[i]->module);
  /* merge the two sorted name lists: they must be equal */
  int i = 0, j = 0;
  while (!rc && (i < n || j < nl)) {
    int c = i == n ? 1 : j == nl ? -1 : strcmp(mods[i]->name, v[j]->module);
    if (c < 0)
      rc = lsim_fail(eb, LSIM_E_ID_LAYOUT_COVER, "module %s has no kernel "
                     "layout", mods[i]->name);
    else if (c > 0)
      rc = lsim_fail(eb, LSIM_E_ID_LAYOUT_COVER, "kernel layout names "
                     "module %s, which the artifact does not have",
                     v[j]->module);
    else
      lays[i++] = v[j++];
  }
  for (int k = 0; k < n && !rc; k++) {
    const lsim_module_spec *m = mods[k];
    const lsim_module_layout *l = lays[k];
    rc = lsim__local_of(m, &in->shard, in->shard.rank, &locals[k], eb);
    if (rc)
      break;
    if (!lsim__is_perm(l->a_axes, LSIM_AXIS_RANK, LSIM_AXIS_INPUT))
      rc = lsim_fail(eb, LSIM_E_ID_LAYOUT_AXES, "module %s: physical axes "
                     "of a [%d, %d] are not an order of rank and input",
                     m->name, l->a_axes[0], l->a_axes[1]);
    else if (!lsim__is_perm(l->b_axes, LSIM_AXIS_OUTPUT, LSIM_AXIS_RANK))
      rc = lsim_fail(eb, LSIM_E_ID_LAYOUT_AXES, "module %s: physical axes "
                     "of b [%d, %d] are not an order of output and rank",
                     m->name, l->b_axes[0], l->b_axes[1]);
    else if (l->out_begin != locals[k].out_begin ||
             l->out_end != locals[k].out_end)
      rc = lsim_fail(eb, LSIM_E_ID_SHARD_RANGE, "module %s: declared output "
                     "range [%lld, %lld) differs from the shard's [%lld, "
                     "%lld)", m->name, (long long)l->out_begin,
                     (long long)l->out_end, (long long)locals[k].out_begin,
                     (long long)locals[k].out_end);
    else if (l->in_begin != locals[k].in_begin ||
             l->in_end != locals[k].in_end)
      rc = lsim_fail(eb, LSIM_E_ID_SHARD_RANGE, "module %s: declared input "
                     "range [%lld, %lld) differs from the shard's [%lld, "
                     "%lld)", m->name, (long long)l->in_begin,
                     (long long)l->in_end, (long long)locals[k].in_begin,
                     (long long)locals[k].in_end);
  }
  free(v);
  return rc;
}

lsim_err lsim_id_kernel_canon(const lsim_kernel_in *in, lsim_canon *out,
                              lsim_errbuf *eb) {
  LSIM__CANON_ARGS("kernel abi", in, out, eb);
  if (!in->semantic || !in->semantic->artifact) {
    lsim_canon_release(out);
    return lsim_fail(eb, LSIM_E_USAGE, "kernel abi: semantic input is null");
  }
  const lsim_artifact_in *art = in->semantic->artifact;
  const lsim_module_spec **mods = NULL;
  const lsim_module_layout **lays = NULL;
  lsim__local *locals = NULL;
  lsim_digest sem;
  lsim_err rc = lsim_id_semantic(in->semantic, &sem, eb);
  if (!rc)
    rc = lsim__token(in->kernel_family, "kernel ", "family", eb);
  if (!rc)
    rc = lsim__nonneg(in->conversion_revision, "kernel conversion revision",
                      eb);
  if (!rc)
    rc = lsim__dtype(in->dtype, "kernel dtype", eb);
  if (!rc)
    rc = lsim__token(in->packing, "kernel ", "packing", eb);
  if (!rc)
    rc = lsim__shard(&in->shard, eb);
  if (!rc)
    rc = lsim__sorted_modules(art->modules, art->n_modules, &mods, eb);
  if (!rc) {
    int n = art->n_modules;
    lays = malloc((size_t)n * sizeof *lays);
    locals = malloc((size_t)n * sizeof *locals);
    if (!lays || !locals)
      rc = lsim_fail(eb, LSIM_E_NOMEM, "kernel abi: out of memory");
  }
  if (!rc)
    rc = lsim__layouts_check(in, mods, art->n_modules, lays, locals, eb);
  if (rc) {
    free(mods);
    free(lays);
    free(locals);
    lsim_canon_release(out);
    return rc;
  }
  lsim__enc e;
  lsim__enc_start(&e, out, eb);
  int has_tp = !lsim_digest_is_zero(&in->tp_manifest);
  lsim__map(&e, has_tp ? 9 : 8);
  lsim__kdigest(&e, "adapter_semantic_sha256", &sem);
  lsim__kint(&e, "conversion_revision", in->conversion_revision);
  lsim__ktext(&e, "dtype", lsim_dtype_name(in->dtype));
  lsim__ktext(&e, "kernel_family", in->kernel_family);
  lsim__key(&e, "local_module_layouts");
  lsim__list(&e, (size_t)art->n_modules);
  for (int i = 0; i < art->n_modules; i++) {
    const lsim_module_layout *l = lays[i];
    const lsim__local *lc = &locals[i];
    lsim__map(&e, 7);
    lsim__kpair_int(&e, "a_local_shape", lsim__extent(l->a_axes[0], lc),
                    lsim__extent(l->a_axes[1], lc));
    lsim__kpair_text(&e, "a_physical_axes", lsim__axis_name(l->a_axes[0]),
                     lsim__axis_name(l->a_axes[1]));
    lsim__kpair_int(&e, "b_local_shape", lsim__extent(l->b_axes[0], lc),
                    lsim__extent(l->b_axes[1], lc));
    lsim__kpair_text(&e, "b_physical_axes", lsim__axis_name(l->b_axes[0]),
                     lsim__axis_name(l->b_axes[1]));
    lsim__kpair_int(&e, "input_range", lc->in_begin, lc->in_end);
    lsim__ktext(&e, "module", mods[i]->name);
    lsim__kpair_int(&e, "output_range", lc->out_begin, lc->out_end);
    lsim__end(&e);
  }
  lsim__end(&e);
  lsim__ktext(&e, "packing", in->packing);
  lsim__key(&e, "parallel_shard");
  lsim__map(&e, 3);
  lsim__ktext(&e, "axis", lsim__shard_axis_name(in->shard.axis));
  lsim__kint(&e, "rank", in->shard.rank);
  lsim__kint(&e, "world_size", in->shard.world);
  lsim__end(&e);
  lsim__ktext(&e, "schema", "lorasim.id.kernel_local.v1");
  if (has_tp) /* keys stay sorted: "tp_..." follows "schema" */
    lsim__kdigest(&e, "tp_manifest_sha256", &in->tp_manifest);
  lsim__end(&e);
  free(mods);
  free(lays);
  free(locals);
  return lsim__enc_finish(&e);
}

LSIM__DIGEST_FN(lsim_id_kernel, lsim_id_kernel_canon, lsim_kernel_in)

/* ------------------------------------------------------ request binding */

lsim_err lsim_id_request_canon(const lsim_request_in *in, lsim_canon *out,
                               lsim_errbuf *eb) {
  LSIM__CANON_ARGS("request binding", in, out, eb);
  lsim_err rc = lsim__token(in->request_namespace, "request ", "namespace",
                            eb);
  if (!rc)
    rc = lsim__token(in->request_id, "request ", "id", eb);
  if (!rc)
    rc = lsim__nonneg(in->attempt, "request attempt", eb);
  if (!rc)
    rc = lsim__token(in->lineage_id, "request ", "lineage id", eb);
  if (!rc)
    rc = lsim__need(&in->base_abi, "request base abi", eb);
  if (!rc)
    rc = lsim__need(&in->adapter_semantic, "request adapter semantic abi",
                    eb);
  if (!rc)
    rc = lsim__need(&in->generation_policy, "generation policy", eb);
  if (rc) {
    lsim_canon_release(out);
    return rc;
  }
  lsim__enc e;
  lsim__enc_start(&e, out, eb);
  lsim__map(&e, 8);
  lsim__kdigest(&e, "adapter_semantic_sha256", &in->adapter_semantic);
  lsim__kint(&e, "attempt", in->attempt);
  lsim__kdigest(&e, "base_abi_sha256", &in->base_abi);
  lsim__kdigest(&e, "generation_policy_sha256", &in->generation_policy);
  lsim__ktext(&e, "lineage_id", in->lineage_id);
  lsim__ktext(&e, "request_id", in->request_id);
  lsim__ktext(&e, "request_namespace", in->request_namespace);
  lsim__ktext(&e, "schema", "lorasim.id.request_binding.v1");
  lsim__end(&e);
  return lsim__enc_finish(&e);
}

LSIM__DIGEST_FN(lsim_id_request, lsim_id_request_canon, lsim_request_in)

/* ------------------------------------------------------ slot binding */

lsim_err lsim_id_slot_canon(const lsim_slot_in *in, lsim_canon *out,
                            lsim_errbuf *eb) {
  LSIM__CANON_ARGS("slot binding", in, out, eb);
  lsim_err rc = lsim__nonneg(in->worker_id, "worker id", eb);
  if (!rc)
    rc = lsim__nonneg(in->worker_epoch, "worker epoch", eb);
  if (!rc)
    rc = lsim__nonneg(in->device_id, "device id", eb);
  if (!rc)
    rc = lsim__nonneg(in->slot_index, "slot index", eb);
  if (!rc)
    rc = lsim__nonneg(in->slot_generation, "slot generation", eb);
  if (!rc)
    rc = lsim__nonneg(in->pointer_table_generation,
                      "pointer-table generation", eb);
  if (!rc)
    rc = lsim__need(&in->adapter_semantic, "slot adapter semantic abi", eb);
  if (!rc)
    rc = lsim__need(&in->kernel_local, "slot local kernel abi", eb);
  if (rc) {
    lsim_canon_release(out);
    return rc;
  }
  lsim__enc e;
  lsim__enc_start(&e, out, eb);
  lsim__map(&e, 9);
  lsim__kdigest(&e, "adapter_semantic_sha256", &in->adapter_semantic);
  lsim__kint(&e, "device_id", in->device_id);
  lsim__kdigest(&e, "local_kernel_abi_sha256", &in->kernel_local);
  lsim__kint(&e, "pointer_table_generation", in->pointer_table_generation);
  lsim__ktext(&e, "schema", "lorasim.id.slot_binding.v1");
  lsim__kint(&e, "slot_generation", in->slot_generation);
  lsim__kint(&e, "slot_index", in->slot_index);
  lsim__kint(&e, "worker_epoch", in->worker_epoch);
  lsim__kint(&e, "worker_id", in->worker_id);
  lsim__end(&e);
  return lsim__enc_finish(&e);
}

LSIM__DIGEST_FN(lsim_id_slot, lsim_id_slot_canon, lsim_slot_in)

/* ------------------------------------------------------ prefix identity */

lsim_err lsim_id_prefix_canon(const lsim_prefix_in *in, lsim_canon *out,
                              lsim_errbuf *eb) {
  LSIM__CANON_ARGS("prefix identity", in, out, eb);
  lsim_err rc = lsim__need(&in->cache_abi, "cache abi", eb);
  if (!rc)
    rc = lsim__need(&in->prompt_tokens, "prompt tokens", eb);
  if (!rc)
    rc = lsim__need(&in->side_inputs, "side inputs", eb);
  if (!rc)
    rc = lsim__need(&in->isolation_salt, "isolation salt", eb);
  if (rc) {
    lsim_canon_release(out);
    return rc;
  }
  lsim__enc e;
  lsim__enc_start(&e, out, eb);
  lsim__map(&e, 5);
  lsim__kdigest(&e, "cache_abi_sha256", &in->cache_abi);
  lsim__kdigest(&e, "isolation_salt_sha256", &in->isolation_salt);
  lsim__kdigest(&e, "prompt_tokens_sha256", &in->prompt_tokens);
  lsim__ktext(&e, "schema", "lorasim.id.prefix.v1");
  lsim__kdigest(&e, "side_inputs_sha256", &in->side_inputs);
  lsim__end(&e);
  return lsim__enc_finish(&e);
}

LSIM__DIGEST_FN(lsim_id_prefix, lsim_id_prefix_canon, lsim_prefix_in)

lsim_err lsim_id_tokens(const int64_t *tokens, size_t n, lsim_digest *out,
                        lsim_errbuf *eb) {
  if (!out || (!tokens && n))
    return lsim_fail(eb, LSIM_E_USAGE, "prompt tokens: null argument");
  memset(out, 0, sizeof *out);
  for (size_t i = 0; i < n; i++)
    if (tokens[i] < 0)
      return lsim_fail(eb, LSIM_E_ID_INT_RANGE, "prompt token %zu has "
                       "negative id %lld", i, (long long)tokens[i]);
  lsim_canon c = LSIM_CANON_INIT;
  lsim__enc e;
  lsim__enc_start(&e, &c, eb);
  lsim__map(&e, 2);
  lsim__ktext(&e, "schema", "lorasim.id.prompt_tokens.v1");
  lsim__key(&e, "tokens");
  lsim__list(&e, n);
  for (size_t i = 0; i < n && !e.err; i++)
    lsim__int(&e, tokens[i]);
  lsim__end(&e);
  lsim__end(&e);
  return lsim__hash_canon(lsim__enc_finish(&e), &c, out, eb);
}

/* ------------------------------------------------------ factor hashes */

lsim_err lsim_id_factor_hash(const void *bytes, size_t len, lsim_digest *out,
                             lsim_errbuf *eb) {
  if (!out)
    return lsim_fail(eb, LSIM_E_USAGE, "factor hash: output is null");
  memset(out, 0, sizeof *out);
  if (!bytes)
    return lsim_fail(eb, LSIM_E_ID_FACTOR_MISSING, "factor bytes are "
                     "missing");
  return lsim_sha256(bytes, len, out, eb);
}

lsim_err lsim_id_factor_verify(const void *bytes, size_t len,
                               const lsim_digest *expected, lsim_errbuf *eb) {
  if (!expected)
    return lsim_fail(eb, LSIM_E_USAGE, "factor verify: expected is null");
  lsim_err rc = lsim__need(expected, "expected factor", eb);
  lsim_digest got;
  if (!rc)
    rc = lsim_id_factor_hash(bytes, len, &got, eb);
  if (rc)
    return rc;
  if (!lsim_digest_eq(&got, expected)) {
    char a[LSIM_DIGEST_HEX_SIZE], b[LSIM_DIGEST_HEX_SIZE];
    return lsim_fail(eb, LSIM_E_ID_FACTOR_HASH, "factor bytes hash to %s, "
                     "expected %s", lsim_digest_hex(&got, a),
                     lsim_digest_hex(expected, b));
  }
  return 0;
}

/* ------------------------------------------------------ residency */

static int lsim__add(int64_t *acc, int64_t v) {
  if (v > INT64_MAX - *acc)
    return 0;
  *acc += v;
  return 1;
}

lsim_err lsim_id_residency(const lsim_module_spec *modules, int n_modules,
                           int dtype, const lsim_shard *shard,
                           lsim_residency *out, lsim_errbuf *eb) {
  if (!shard || !out)
    return lsim_fail(eb, LSIM_E_USAGE, "residency: null argument");
  memset(out, 0, sizeof *out);
  const lsim_module_spec **v = NULL;
  lsim_err rc = lsim__dtype(dtype, "residency dtype", eb);
  if (!rc)
    rc = lsim__shard(shard, eb);
  if (!rc)
    rc = lsim__sorted_modules(modules, n_modules, &v, eb);
  for (int i = 0; i < n_modules && !rc; i++)
    rc = lsim__module_shape(v[i], eb);
  if (rc) {
    free(v);
    return rc;
  }
  int64_t dsize = lsim_dtype_size(dtype);
  lsim_residency r = {0, 0, 0, 0, 0};
  int ok = 1;
  for (int i = 0; i < n_modules && ok; i++) {
    const lsim_module_spec *m = v[i];
    /* each term is below 2^61, so only the running sums can overflow */
    ok = lsim__add(&r.logical_scalars, m->rank * m->d_in) &&
         lsim__add(&r.logical_scalars, m->d_out * m->rank);
  }
  for (int64_t q = 0; q < shard->world && ok && !rc; q++) {
    int64_t scal = 0;
    for (int i = 0; i < n_modules && ok && !rc; i++) {
      lsim__local l;
      rc = lsim__local_of(v[i], shard, q, &l, eb);
      if (!rc)
        ok = lsim__add(&scal, l.a_rank * l.a_in) &&
             lsim__add(&scal, l.b_out * l.b_rank);
    }
    if (rc || !ok)
      break;
    ok = scal <= INT64_MAX / dsize && lsim__add(&r.cluster_bytes,
                                                scal * dsize);
    if (q == shard->rank) {
      r.local_scalars = scal;
      r.local_bytes = scal * dsize;
    }
  }
  free(v);
  if (rc)
    return rc;
  if (!ok || r.logical_scalars > INT64_MAX / dsize)
    return lsim_fail(eb, LSIM_E_ID_SHAPE, "residency ledger overflows int64");
  r.logical_bytes = r.logical_scalars * dsize;
  *out = r;
  return 0;
}

lsim_err lsim_id_residency_verify(const lsim_module_spec *modules,
                                  int n_modules, int dtype,
                                  const lsim_shard *shard,
                                  const lsim_residency *claimed,
                                  lsim_errbuf *eb) {
  if (!claimed)
    return lsim_fail(eb, LSIM_E_USAGE, "residency verify: claim is null");
  lsim_residency r;
  lsim_err rc = lsim_id_residency(modules, n_modules, dtype, shard, &r, eb);
  if (rc)
    return rc;
  static const struct {
    const char *name;
    size_t off;
  } f[] = {
      {"logical scalars", offsetof(lsim_residency, logical_scalars)},
      {"logical bytes", offsetof(lsim_residency, logical_bytes)},
      {"local scalars", offsetof(lsim_residency, local_scalars)},
      {"local bytes", offsetof(lsim_residency, local_bytes)},
      {"cluster bytes", offsetof(lsim_residency, cluster_bytes)},
  };
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
    int64_t want, got;
    memcpy(&want, (const char *)&r + f[i].off, sizeof want);
    memcpy(&got, (const char *)claimed + f[i].off, sizeof got);
    if (want != got)
      return lsim_fail(eb, LSIM_E_ID_LEDGER, "residency ledger: %s claimed "
                       "%lld, derived %lld", f[i].name, (long long)got,
                       (long long)want);
  }
  return 0;
}

/* ------------------------------------------------------ generations */

static const struct {
  const char *name;
  lsim_err stale;
} lsim__gen[LSIM_GEN_COUNT] = {
    [LSIM_GEN_CATALOG] = {"catalog", LSIM_E_ID_STALE_CATALOG},
    [LSIM_GEN_ATTEMPT] = {"request attempt", LSIM_E_ID_STALE_ATTEMPT},
    [LSIM_GEN_SLOT] = {"slot", LSIM_E_ID_STALE_SLOT},
    [LSIM_GEN_POINTER_TABLE] = {"pointer table", LSIM_E_ID_STALE_PTABLE},
    [LSIM_GEN_BATCH_PLAN] = {"batch plan", LSIM_E_ID_STALE_PLAN},
    [LSIM_GEN_CACHE] = {"cache snapshot", LSIM_E_ID_STALE_CACHE},
    [LSIM_GEN_RNG] = {"rng", LSIM_E_ID_STALE_RNG},
};

const char *lsim_gen_name(int component) {
  if (component < 0 || component >= LSIM_GEN_COUNT)
    return NULL;
  return lsim__gen[component].name;
}

lsim_err lsim_genvec_advance(lsim_genvec *v, int component, lsim_errbuf *eb) {
  if (!v)
    return lsim_fail(eb, LSIM_E_USAGE, "generation vector is null");
  if (component < 0 || component >= LSIM_GEN_COUNT)
    return lsim_fail(eb, LSIM_E_ID_GEN_COMPONENT, "generation component %d "
                     "is unknown", component);
  if (v->g[component] < 0)
    return lsim_fail(eb, LSIM_E_ID_INT_RANGE, "%s generation %lld is "
                     "negative", lsim__gen[component].name,
                     (long long)v->g[component]);
  if (v->g[component] == INT64_MAX)
    return lsim_fail(eb, LSIM_E_ID_GEN_OVERFLOW, "%s generation cannot "
                     "advance past %lld", lsim__gen[component].name,
                     (long long)INT64_MAX);
  v->g[component]++;
  return 0;
}

static lsim_err lsim__same(const lsim_digest *a, const lsim_digest *b,
                           lsim_err code, const char *what, lsim_errbuf *eb) {
  if (lsim_digest_eq(a, b))
    return 0;
  char x[LSIM_DIGEST_HEX_SIZE], y[LSIM_DIGEST_HEX_SIZE];
  return lsim_fail(eb, code, "%s (%.16s vs %.16s)", what,
                   lsim_digest_hex(a, x), lsim_digest_hex(b, y));
}

lsim_err lsim_launch_validate(const lsim_launch_snapshot *snap,
                              const lsim_launch_owners *now,
                              lsim_errbuf *eb) {
  if (!snap || !now)
    return lsim_fail(eb, LSIM_E_USAGE, "launch validate: null argument");
  const struct {
    const lsim_digest *d;
    const char *name;
  } need[] = {
      {&snap->request_binding, "snapshot request binding"},
      {&snap->slot_binding, "snapshot slot binding"},
      {&snap->kernel_local, "snapshot local kernel abi"},
      {&now->request.binding, "request binding"},
      {&now->request.base_abi, "request base abi"},
      {&now->request.adapter_semantic, "request adapter semantic abi"},
      {&now->adapter.base_abi, "adapter base abi"},
      {&now->adapter.adapter_semantic, "adapter semantic abi"},
      {&now->slot.binding, "slot binding"},
      {&now->slot.adapter_semantic, "slot adapter semantic abi"},
      {&now->slot.kernel_local, "slot local kernel abi"},
      {&now->cache.adapter_semantic, "cache adapter semantic abi"},
  };
  for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
    lsim_err rc = lsim__need(need[i].d, need[i].name, eb);
    if (rc)
      return rc;
  }
  for (int c = 0; c < LSIM_GEN_COUNT; c++)
    if (snap->gen.g[c] < 0 || now->gen.g[c] < 0)
      return lsim_fail(eb, LSIM_E_ID_INT_RANGE, "%s generation is negative "
                       "(snapshot %lld, owner %lld)", lsim__gen[c].name,
                       (long long)snap->gen.g[c], (long long)now->gen.g[c]);
  for (int c = 0; c < LSIM_GEN_COUNT; c++)
    if (snap->gen.g[c] != now->gen.g[c])
      return lsim_fail(eb, lsim__gen[c].stale, "stale %s generation: "
                       "snapshot %lld, owner %lld", lsim__gen[c].name,
                       (long long)snap->gen.g[c], (long long)now->gen.g[c]);
  lsim_err rc = lsim__same(&snap->request_binding, &now->request.binding,
                           LSIM_E_ID_REQ_BINDING,
                           "request binding differs from the snapshot", eb);
  if (!rc)
    rc = lsim__same(&now->request.base_abi, &now->adapter.base_abi,
                    LSIM_E_ID_REQ_BASE,
                    "request base abi differs from the adapter's", eb);
  if (!rc)
    rc = lsim__same(&now->request.adapter_semantic,
                    &now->adapter.adapter_semantic, LSIM_E_ID_REQ_SEMANTIC,
                    "request semantic abi differs from the adapter's", eb);
  if (!rc)
    rc = lsim__same(&snap->slot_binding, &now->slot.binding,
                    LSIM_E_ID_SLOT_BINDING,
                    "slot binding differs from the snapshot", eb);
  if (!rc)
    rc = lsim__same(&now->slot.adapter_semantic,
                    &now->adapter.adapter_semantic, LSIM_E_ID_SLOT_SEMANTIC,
                    "slot semantic abi differs from the adapter's", eb);
  if (!rc)
    rc = lsim__same(&snap->kernel_local, &now->slot.kernel_local,
                    LSIM_E_ID_KERNEL_ABI,
                    "snapshot kernel abi differs from the slot's", eb);
  if (!rc)
    rc = lsim__same(&now->cache.adapter_semantic,
                    &now->adapter.adapter_semantic, LSIM_E_ID_CACHE_SEMANTIC,
                    "cache semantic abi differs from the adapter's", eb);
  return rc;
}
