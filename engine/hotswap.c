/*
** hotswap.c: the alias catalog, shadow-copy publication and request
** leases.  The contract is in hotswap.h; invariants:
**
**   H1  the catalog names only PUBLISHED/ACTIVE slots, and each handle in it
**       equals its slot's current (slot generation, pointer generation,
**       digest).
**   H2  a slot's refcount is the number of bound leases on its handle.
**   H3  a slot leaves RETIRING only through lsim_hs_reclaim, with refcount
**       zero and its last-use event complete; every transition to FREE bumps
**       the slot generation and the pointer generation.
*/
#include "hotswap.h"

#include <stdlib.h>

#include "residency.h" /* state names */

typedef struct lsim__hslot {
  int state;
  int64_t slot_gen, ptr_gen;
  lsim_digest digest;
  int refcount;
  int event_complete;
  int alias;
  int validated;
} lsim__hslot;

struct lsim_hs {
  int nslots, naliases;
  lsim__hslot *s;
  int64_t *alias_slot; /* [naliases], -1 unmapped */
  int64_t catalog_gen;
  int64_t free_hint;   /* every slot below it is in use (not ABSENT) */
};

lsim_err lsim_hs_new(lsim_hs **out, int nslots, int naliases,
                     lsim_errbuf *eb) {
  *out = NULL;
  if (nslots < 1 || naliases < 1)
    return lsim_fail(eb, LSIM_E_USAGE, "hotswap: need slots and aliases");
  lsim_hs *h = calloc(1, sizeof *h);
  if (h) {
    h->s = calloc((size_t)nslots, sizeof *h->s);
    h->alias_slot = malloc((size_t)naliases * sizeof *h->alias_slot);
  }
  if (!h || !h->s || !h->alias_slot) {
    lsim_hs_release_all(h);
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  }
  h->nslots = nslots;
  h->naliases = naliases;
  for (int i = 0; i < nslots; i++) {
    h->s[i].state = LSIM_RS_ABSENT; /* free */
    h->s[i].event_complete = 1;
    h->s[i].alias = -1;
  }
  for (int i = 0; i < naliases; i++)
    h->alias_slot[i] = -1;
  *out = h;
  return 0;
}

void lsim_hs_release_all(lsim_hs *h) {
  if (!h)
    return;
  free(h->s);
  free(h->alias_slot);
  free(h);
}

static lsim_err lsim__slot_ok(const lsim_hs *h, int64_t slot,
                              lsim_errbuf *eb) {
  if (slot < 0 || slot >= h->nslots)
    return lsim_fail(eb, LSIM_E_USAGE, "slot %lld out of range",
                     (long long)slot);
  return 0;
}
static lsim_err lsim__alias_ok(const lsim_hs *h, int alias, lsim_errbuf *eb) {
  if (alias < 0 || alias >= h->naliases)
    return lsim_fail(eb, LSIM_E_USAGE, "alias %d out of range", alias);
  return 0;
}

lsim_err lsim_hs_seed_slot(lsim_hs *h, int64_t slot, int64_t sg, int64_t pg,
                           lsim_errbuf *eb) {
  lsim_err rc = lsim__slot_ok(h, slot, eb);
  if (rc)
    return rc;
  if (h->s[slot].state != LSIM_RS_ABSENT || sg < 0 || pg < 0)
    return lsim_fail(eb, LSIM_E_RES_ILLEGAL, "seed: slot %lld is not free",
                     (long long)slot);
  h->s[slot].slot_gen = sg;
  h->s[slot].ptr_gen = pg;
  return 0;
}

void lsim_hs_seed_catalog(lsim_hs *h, int64_t g) { h->catalog_gen = g; }

int64_t lsim_hs_catalog_gen(const lsim_hs *h) { return h->catalog_gen; }

static void lsim__handle_of(const lsim_hs *h, int64_t slot, lsim_hs_handle *o) {
  o->slot = slot;
  o->slot_gen = h->s[slot].slot_gen;
  o->ptr_gen = h->s[slot].ptr_gen;
  o->digest = h->s[slot].digest;
}

static int lsim__handle_eq(const lsim_hs_handle *a, const lsim_hs_handle *b) {
  return a->slot == b->slot &&
         (a->slot < 0 || (a->slot_gen == b->slot_gen &&
                          a->ptr_gen == b->ptr_gen &&
                          lsim_digest_eq(&a->digest, &b->digest)));
}

lsim_err lsim_hs_lookup(const lsim_hs *h, int alias, lsim_hs_handle *out,
                        lsim_errbuf *eb) {
  lsim_err rc = lsim__alias_ok(h, alias, eb);
  if (rc)
    return rc;
  lsim_hs_handle none = {-1, 0, 0, LSIM_DIGEST_INIT};
  if (h->alias_slot[alias] < 0)
    *out = none;
  else
    lsim__handle_of(h, h->alias_slot[alias], out);
  return 0;
}

lsim_err lsim_hs_slot(const lsim_hs *h, int64_t slot, lsim_hs_slot_view *o,
                      lsim_errbuf *eb) {
  lsim_err rc = lsim__slot_ok(h, slot, eb);
  if (rc)
    return rc;
  const lsim__hslot *s = &h->s[slot];
  o->state = s->state;
  o->slot_gen = s->slot_gen;
  o->ptr_gen = s->ptr_gen;
  o->refcount = s->refcount;
  o->event_complete = s->event_complete;
  o->alias = s->alias;
  return 0;
}

/* ---- staging ------------------------------------------------------------- */

lsim_err lsim_hs_stage(lsim_hs *h, int alias, const lsim_digest *digest,
                       int64_t want, int64_t *slot, lsim_errbuf *eb) {
  lsim_err rc = lsim__alias_ok(h, alias, eb);
  if (rc)
    return rc;
  if (lsim_digest_is_zero(digest))
    return lsim_fail(eb, LSIM_E_RES_IDENTITY, "stage: missing artifact digest");
  int64_t i;
  if (want >= 0) {
    if ((rc = lsim__slot_ok(h, want, eb)))
      return rc;
    if (h->s[want].state != LSIM_RS_ABSENT)
      return lsim_fail(eb, LSIM_E_RES_ILLEGAL, "stage: slot %lld is not free",
                       (long long)want);
    i = want;
  } else {
    /* the lowest free slot, as a scan from 0 would find it */
    for (i = h->free_hint; i < h->nslots; i++)
      if (h->s[i].state == LSIM_RS_ABSENT)
        break;
    h->free_hint = i;
    if (i == h->nslots)
      return lsim_fail(eb, LSIM_E_RES_NOSPACE, "stage: no free slot");
  }
  lsim__hslot *s = &h->s[i];
  s->slot_gen++; /* reserve_free_slot(next_generation) */
  s->state = LSIM_RS_LOADING;
  s->digest = *digest;
  s->alias = alias;
  s->validated = 0;
  s->event_complete = 0; /* the copy is in flight */
  *slot = i;
  return 0;
}

lsim_err lsim_hs_copy_done(lsim_hs *h, int64_t slot, int ok,
                           const lsim_digest *staged, int missing_keys,
                           int tail_zero, lsim_errbuf *eb) {
  lsim_err rc = lsim__slot_ok(h, slot, eb);
  if (rc)
    return rc;
  lsim__hslot *s = &h->s[slot];
  if (s->state != LSIM_RS_LOADING || s->event_complete)
    return lsim_fail(eb, LSIM_E_RES_ILLEGAL,
                     "slot %lld: copy event without a copy in flight",
                     (long long)slot);
  if (!ok)
    return lsim_fail(eb, LSIM_E_RES_COPY, "slot %lld: copy failed",
                     (long long)slot);
  if (missing_keys > 0)
    return lsim_fail(eb, LSIM_E_RES_MISSING_KEY,
                     "slot %lld: %d module keys missing from the incoming "
                     "artifact (old factor bytes would survive)",
                     (long long)slot, missing_keys);
  if (!tail_zero)
    return lsim_fail(eb, LSIM_E_RES_PAD_TAIL,
                     "slot %lld: physical-rank tail not zeroed",
                     (long long)slot);
  if (!staged || !lsim_digest_eq(staged, &s->digest))
    return lsim_fail(eb, LSIM_E_RES_DIGEST,
                     "slot %lld: staged digest differs from the artifact",
                     (long long)slot);
  s->event_complete = 1;
  s->validated = 1;
  s->state = LSIM_RS_VALIDATED;
  return 0;
}

lsim_err lsim_hs_publish(lsim_hs *h, int alias, const lsim_hs_handle *expected,
                         int64_t slot, lsim_hs_handle *out, lsim_errbuf *eb) {
  lsim_err rc = lsim__alias_ok(h, alias, eb);
  if (!rc)
    rc = lsim__slot_ok(h, slot, eb);
  if (rc)
    return rc;
  lsim__hslot *s = &h->s[slot];
  if (s->state != LSIM_RS_VALIDATED || !s->validated || !s->event_complete)
    return lsim_fail(eb, LSIM_E_RES_PUBLISH_EARLY,
                     "slot %lld: publication before the copy event and "
                     "validation (%s)",
                     (long long)slot, lsim_res_state_name(s->state));
  if (s->alias != alias)
    return lsim_fail(eb, LSIM_E_RES_CATALOG_CAS,
                     "slot %lld was staged for alias %d, not %d",
                     (long long)slot, s->alias, alias);
  lsim_hs_handle cur;
  lsim_hs_lookup(h, alias, &cur, NULL);
  if (!lsim__handle_eq(&cur, expected))
    return lsim_fail(eb, LSIM_E_RES_CATALOG_CAS,
                     "alias %d no longer maps to the expected handle", alias);
  /* the one atomic visibility point */
  s->ptr_gen++;
  s->state = LSIM_RS_PUBLISHED;
  if (cur.slot >= 0)
    h->s[cur.slot].state = LSIM_RS_RETIRING;
  h->alias_slot[alias] = slot;
  h->catalog_gen++;
  if (out)
    lsim__handle_of(h, slot, out);
  return 0;
}

lsim_err lsim_hs_republish(lsim_hs *h, int alias, const lsim_hs_handle *to,
                           lsim_errbuf *eb) {
  lsim_err rc = lsim__alias_ok(h, alias, eb);
  if (rc)
    return rc;
  if (to->slot < 0 || to->slot >= h->nslots)
    return lsim_fail(eb, LSIM_E_RES_BACKWARD, "republish: no such handle");
  const lsim__hslot *s = &h->s[to->slot];
  lsim_hs_handle live;
  lsim__handle_of(h, to->slot, &live);
  if (s->state == LSIM_RS_RETIRING || !lsim__handle_eq(&live, to) ||
      (s->state != LSIM_RS_PUBLISHED && s->state != LSIM_RS_ACTIVE))
    return lsim_fail(eb, LSIM_E_RES_BACKWARD,
                     "alias %d: mapping back to a retiring or stale handle is "
                     "not a rollback; stage and publish a new generation",
                     alias);
  /* naming the current handle again is a no-op */
  if (h->alias_slot[alias] != to->slot)
    return lsim_fail(eb, LSIM_E_RES_BACKWARD,
                     "alias %d: only a staged generation can be published",
                     alias);
  return 0;
}

static void lsim__to_free(lsim_hs *h, lsim__hslot *s) {
  if (s - h->s < h->free_hint)
    h->free_hint = s - h->s;
  s->state = LSIM_RS_ABSENT;
  s->slot_gen++;
  s->ptr_gen++;
  s->alias = -1;
  s->validated = 0;
  s->event_complete = 1;
  s->digest = (lsim_digest)LSIM_DIGEST_INIT;
}

lsim_err lsim_hs_abort(lsim_hs *h, int64_t slot, lsim_errbuf *eb) {
  lsim_err rc = lsim__slot_ok(h, slot, eb);
  if (rc)
    return rc;
  lsim__hslot *s = &h->s[slot];
  if (s->state != LSIM_RS_LOADING && s->state != LSIM_RS_VALIDATED)
    return lsim_fail(eb, s->state == LSIM_RS_PUBLISHED ||
                                 s->state == LSIM_RS_ACTIVE
                             ? LSIM_E_RES_POST_PUBLISH
                             : LSIM_E_RES_ILLEGAL,
                     "slot %lld is not staged (%s)", (long long)slot,
                     lsim_res_state_name(s->state));
  lsim__to_free(h, s); /* discard_shadow_and_bump_generations */
  return 0;
}

lsim_err lsim_hs_overwrite(lsim_hs *h, int alias, const lsim_digest *digest,
                           lsim_hs_handle *out, lsim_errbuf *eb) {
  lsim_err rc = lsim__alias_ok(h, alias, eb);
  if (rc)
    return rc;
  int64_t slot = h->alias_slot[alias];
  if (slot < 0)
    return lsim_fail(eb, LSIM_E_RES_ILLEGAL, "alias %d is not mapped", alias);
  if (lsim_digest_is_zero(digest))
    return lsim_fail(eb, LSIM_E_RES_IDENTITY, "overwrite: missing digest");
  lsim__hslot *s = &h->s[slot];
  if (s->refcount)
    return lsim_fail(eb, LSIM_E_RES_REFCOUNT,
                     "slot %lld still has %d leases: drain first",
                     (long long)slot, s->refcount);
  if (!s->event_complete)
    return lsim_fail(eb, LSIM_E_RES_EVENT_PENDING,
                     "slot %lld: last-use event incomplete", (long long)slot);
  s->slot_gen++;
  s->ptr_gen++;
  s->digest = *digest;
  s->state = LSIM_RS_PUBLISHED;
  h->catalog_gen++;
  if (out)
    lsim__handle_of(h, slot, out);
  return 0;
}

lsim_err lsim_hs_withdraw(lsim_hs *h, int alias, lsim_errbuf *eb) {
  lsim_err rc = lsim__alias_ok(h, alias, eb);
  if (rc)
    return rc;
  int64_t slot = h->alias_slot[alias];
  if (slot < 0)
    return lsim_fail(eb, LSIM_E_RES_ILLEGAL, "alias %d is not mapped", alias);
  h->s[slot].state = LSIM_RS_RETIRING;
  h->alias_slot[alias] = -1;
  h->catalog_gen++;
  return 0;
}

/* ---- leases ------------------------------------------------------------------ */

lsim_err lsim_hs_resolve(lsim_hs *h, int alias, lsim_hs_lease *lease,
                         lsim_errbuf *eb) {
  lsim_err rc = lsim__alias_ok(h, alias, eb);
  if (rc)
    return rc;
  if (lease->bound)
    return lsim_fail(eb, LSIM_E_RES_REBIND,
                     "the request already holds a lease: aliases are resolved "
                     "once, at admission");
  int64_t slot = h->alias_slot[alias];
  if (slot < 0)
    return lsim_fail(eb, LSIM_E_RES_ILLEGAL, "alias %d is not mapped", alias);
  lsim__hslot *s = &h->s[slot];
  s->refcount++;
  s->state = LSIM_RS_ACTIVE;
  lease->bound = 1;
  lease->alias = alias;
  lease->catalog_gen = h->catalog_gen;
  lsim__handle_of(h, slot, &lease->h);
  return 0;
}

lsim_err lsim_hs_launch(lsim_hs *h, const lsim_hs_lease *lease,
                        lsim_errbuf *eb) {
  if (!lease->bound || lease->h.slot < 0 || lease->h.slot >= h->nslots)
    return lsim_fail(eb, LSIM_E_RES_STALE_HANDLE, "launch without a lease");
  lsim__hslot *s = &h->s[lease->h.slot];
  lsim_hs_handle cur;
  lsim__handle_of(h, lease->h.slot, &cur);
  if (!lsim__handle_eq(&cur, &lease->h) ||
      (s->state != LSIM_RS_ACTIVE && s->state != LSIM_RS_RETIRING &&
       s->state != LSIM_RS_PUBLISHED))
    return lsim_fail(eb, LSIM_E_RES_STALE_HANDLE,
                     "lease names slot %lld at generations %lld/%lld; the slot "
                     "is at %lld/%lld (%s)",
                     (long long)lease->h.slot, (long long)lease->h.slot_gen,
                     (long long)lease->h.ptr_gen, (long long)cur.slot_gen,
                     (long long)cur.ptr_gen, lsim_res_state_name(s->state));
  s->event_complete = 0;
  return 0;
}

lsim_err lsim_hs_event_complete(lsim_hs *h, int64_t slot, lsim_errbuf *eb) {
  lsim_err rc = lsim__slot_ok(h, slot, eb);
  if (rc)
    return rc;
  h->s[slot].event_complete = 1;
  return 0;
}

lsim_err lsim_hs_unlease(lsim_hs *h, lsim_hs_lease *lease, lsim_errbuf *eb) {
  if (!lease->bound || lease->h.slot < 0 || lease->h.slot >= h->nslots)
    return lsim_fail(eb, LSIM_E_RES_ILLEGAL, "no lease to release");
  lsim__hslot *s = &h->s[lease->h.slot];
  if (s->refcount < 1 || s->slot_gen != lease->h.slot_gen)
    return lsim_fail(eb, LSIM_E_RES_STALE_HANDLE,
                     "lease does not match slot %lld", (long long)lease->h.slot);
  s->refcount--;
  if (s->refcount == 0 && s->state == LSIM_RS_ACTIVE)
    s->state = LSIM_RS_IDLE;
  lease->bound = 0;
  return 0;
}

lsim_err lsim_hs_bind_slot(const lsim_hs *h, int64_t slot, lsim_errbuf *eb) {
  lsim_err rc = lsim__slot_ok(h, slot, eb);
  if (rc)
    return rc;
  for (int a = 0; a < h->naliases; a++)
    if (h->alias_slot[a] == slot)
      return 0;
  return lsim_fail(eb, LSIM_E_RES_SHADOW,
                   "slot %lld is not named by the catalog (staged or retired): "
                   "it must stay unreachable",
                   (long long)slot);
}

lsim_err lsim_hs_reclaim(lsim_hs *h, int64_t slot, lsim_errbuf *eb) {
  lsim_err rc = lsim__slot_ok(h, slot, eb);
  if (rc)
    return rc;
  lsim__hslot *s = &h->s[slot];
  if (s->state != LSIM_RS_RETIRING)
    return lsim_fail(eb, LSIM_E_RES_ILLEGAL, "slot %lld is not retiring (%s)",
                     (long long)slot, lsim_res_state_name(s->state));
  if (s->refcount)
    return lsim_fail(eb, LSIM_E_RES_REFCOUNT,
                     "slot %lld: %d leases still hold it (the event alone is "
                     "not enough)",
                     (long long)slot, s->refcount);
  if (!s->event_complete)
    return lsim_fail(eb, LSIM_E_RES_EVENT_PENDING,
                     "slot %lld: last-use event incomplete (refcount zero "
                     "alone is not enough)",
                     (long long)slot);
  lsim__to_free(h, s);
  return 0;
}
