/*
** digest.c: the canonical encodings behind the compression identities
** (jd.h; docs/COMPRESSION.md describes them byte for byte).
**
** An encoding is a sequence of fields, each one of:
**   str  u32 length (little-endian) then the bytes
**   u64  8 bytes little-endian (also used for non-negative ints)
**   f64  the IEEE-754 binary64 bit pattern as a u64
**   dig  the 32 digest bytes
** Every record opens with a domain string ("lorasim.jd.source.v1", ...),
** so no two record kinds can share an encoding.
*/
#include <stdlib.h>
#include <string.h>

#include "jd.h"

typedef struct lsim__enc {
  uint8_t *b;
  size_t len, cap;
  int oom;
} lsim__enc;

static void lsim__put(lsim__enc *e, const void *p, size_t n) {
  if (e->oom)
    return;
  if (e->len + n > e->cap) {
    size_t cap = e->cap ? e->cap : 256;
    while (cap < e->len + n)
      cap *= 2;
    uint8_t *nb = realloc(e->b, cap);
    if (!nb) {
      e->oom = 1;
      return;
    }
    e->b = nb;
    e->cap = cap;
  }
  memcpy(e->b + e->len, p, n);
  e->len += n;
}

static void lsim__u64(lsim__enc *e, uint64_t v) {
  uint8_t t[8];
  for (int i = 0; i < 8; i++)
    t[i] = (uint8_t)(v >> (8 * i));
  lsim__put(e, t, 8);
}

static void lsim__str(lsim__enc *e, const char *s) {
  size_t n = s ? strlen(s) : 0;
  uint8_t t[4];
  for (int i = 0; i < 4; i++)
    t[i] = (uint8_t)((uint32_t)n >> (8 * i));
  lsim__put(e, t, 4);
  lsim__put(e, s, n);
}

static void lsim__f64(lsim__enc *e, double d) {
  uint64_t v;
  if (d == 0)
    d = 0.0; /* -0 and +0 encode alike */
  memcpy(&v, &d, sizeof v);
  lsim__u64(e, v);
}

static void lsim__f64s(lsim__enc *e, const double *d, size_t n) {
  lsim__u64(e, n);
  for (size_t t = 0; t < n; t++)
    lsim__f64(e, d[t]);
}

static void lsim__dig(lsim__enc *e, const lsim_digest *d) {
  lsim__put(e, d->b, LSIM_DIGEST_LEN);
}

static lsim_err lsim__done(lsim__enc *e, lsim_digest *out, lsim_errbuf *eb) {
  lsim_err rc;
  if (e->oom)
    rc = lsim_fail(eb, LSIM_E_NOMEM, "canonical encoding");
  else
    rc = lsim_sha256(e->b, e->len, out, eb);
  free(e->b);
  return rc;
}

lsim_err lsim_jd_source_digest(const lsim_jd_source *s, int d_in, int d_out,
                               lsim_digest *out, lsim_errbuf *eb) {
  lsim__enc e = {0};
  lsim__str(&e, "lorasim.jd.source.v1");
  lsim__u64(&e, (uint64_t)d_in);
  lsim__u64(&e, (uint64_t)d_out);
  lsim__u64(&e, (uint64_t)s->rank);
  lsim__f64(&e, s->scale);
  lsim__f64s(&e, s->A, (size_t)s->rank * d_in);
  lsim__f64s(&e, s->B, (size_t)d_out * s->rank);
  return lsim__done(&e, out, eb);
}

lsim_err lsim_jd_source_set_digest(const char *const *names,
                                   const lsim_digest *src, int n,
                                   lsim_digest *out, lsim_errbuf *eb) {
  lsim__enc e = {0};
  lsim__str(&e, "lorasim.jd.source_set.v1");
  lsim__u64(&e, (uint64_t)n);
  for (int i = 0; i < n; i++) {
    lsim__str(&e, names[i]);
    lsim__dig(&e, &src[i]);
  }
  return lsim__done(&e, out, eb);
}

lsim_err lsim_jd_basis_digest(const lsim_jd_result *r, int c,
                              lsim_digest *out, lsim_errbuf *eb) {
  if (c < 0 || c >= r->k)
    return lsim_fail(eb, LSIM_E_CMP_CLUSTERS, "no cluster %d", c);
  lsim__enc e = {0};
  lsim__str(&e, "lorasim.jd.basis.v1");
  lsim__str(&e, lsim_jd_method_name(r->method));
  lsim__u64(&e, (uint64_t)r->d_in);
  lsim__u64(&e, (uint64_t)r->d_out);
  lsim__u64(&e, (uint64_t)r->R);
  lsim__u64(&e, (uint64_t)c);
  lsim__f64s(&e, r->U + (size_t)c * r->d_out * r->R, (size_t)r->d_out * r->R);
  lsim__f64s(&e, r->V + (size_t)c * r->d_in * r->R, (size_t)r->d_in * r->R);
  return lsim__done(&e, out, eb);
}

lsim_err lsim_jd_core_digest(const lsim_jd_result *r, int i,
                             const lsim_digest *basis, lsim_digest *out,
                             lsim_errbuf *eb) {
  if (i < 0 || i >= r->n)
    return lsim_fail(eb, LSIM_E_CMP_UNKNOWN_ADAPTER, "no source %d", i);
  lsim__enc e = {0};
  lsim__str(&e, "lorasim.jd.core.v1");
  lsim__dig(&e, basis);
  lsim__u64(&e, (uint64_t)r->cluster[i]);
  lsim__f64s(&e, r->cores + (size_t)i * r->core_len, (size_t)r->core_len);
  return lsim__done(&e, out, eb);
}

lsim_err lsim_jd_bundle_digest(const lsim_jd_bundle_in *in, lsim_digest *out,
                               lsim_errbuf *eb) {
  const lsim_jd_result *r = in->fit;
  lsim__enc e = {0};
  lsim__str(&e, "lorasim.jd.bundle.v1");
  lsim__str(&e, in->base);
  lsim__str(&e, in->module);
  lsim__str(&e, lsim_jd_method_name(r->method));
  lsim__u64(&e, (uint64_t)r->d_in);
  lsim__u64(&e, (uint64_t)r->d_out);
  lsim__u64(&e, (uint64_t)r->R);
  lsim__u64(&e, (uint64_t)r->k);
  lsim__u64(&e, (uint64_t)in->max_iterations);
  lsim__u64(&e, (uint64_t)in->max_rounds);
  lsim__u64(&e, in->seed);
  lsim__dig(&e, in->source_set);
  lsim__u64(&e, (uint64_t)r->n);
  for (int i = 0; i < r->n; i++) {
    lsim__str(&e, in->names[i]);
    lsim__dig(&e, &in->sources[i]);
    lsim__u64(&e, (uint64_t)in->ranks[i]);
    lsim__f64(&e, in->scales[i]);
    lsim__u64(&e, (uint64_t)r->cluster[i]);
    lsim__f64(&e, r->norm[i]);
    lsim__f64(&e, r->err2[i]);
    lsim__dig(&e, &in->cores[i]);
  }
  for (int c = 0; c < r->k; c++)
    lsim__dig(&e, &in->bases[c]);
  lsim__u64(&e, (uint64_t)r->iterations);
  lsim__u64(&e, (uint64_t)r->rounds);
  lsim__u64(&e, (uint64_t)r->converged);
  lsim__f64(&e, r->total_err2);
  lsim__f64(&e, r->total_norm2);
  return lsim__done(&e, out, eb);
}
