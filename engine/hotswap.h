/*
** hotswap.h: adapter replacement under one alias, and request leases
** (article 0x07F-0x07J; docs/RESIDENCY.md, "Hotswap and leases").
**
** A catalog maps each alias to an immutable handle
**
**   (slot, slot generation, pointer generation, artifact digest)
**
** under a catalog generation.  A request resolves its alias once, at
** admission, and keeps the handle (its lease) for its lifetime; every
** launch checks the lease against the slot's current generations and never
** re-resolves the alias.  Slots are fixed-capacity adapter slots; each has
** a residency state (residency.h names) and two counters:
**
**   refcount       leases currently held on the slot's handle
**   last-use event complete or not: the device work of the last launch
**
** Replacement modes (selectable per call):
**
**   shadow copy    lsim_hs_stage into a free slot (slot generation + 1),
**                  lsim_hs_copy_done, then lsim_hs_publish: one
**                  compare-and-publish of the catalog (expected = the old
**                  handle) that bumps the catalog generation and the new
**                  slot's pointer generation; the old slot becomes RETIRING.
**                  Failure before publication: lsim_hs_abort discards the
**                  shadow and bumps both of its generations; the catalog
**                  never changed.
**   drain then overwrite
**                  lsim_hs_overwrite: only when the old slot has refcount 0
**                  and its last-use event complete; rewrites it in place
**                  under new slot and pointer generations.
**   new alias      lsim_hs_stage with a fresh alias and expected handle
**                  "none" (LSIM_HS_NO_HANDLE): callers migrate explicitly.
**
** A RETIRING slot is reclaimed (lsim_hs_reclaim) only when its refcount is
** zero AND its last-use event completed; reclamation bumps slot and pointer
** generations, so a delayed stale handle can never validate again (ABA).
** After publication there is no rollback: recovery publishes another
** generation (a compare-and-publish whose replacement is a retiring or
** older handle is E_RES_BACKWARD).
**
** Every function returns 0 or a negative LSIM_E_RES_* code; nothing
** changes on failure.
*/
#ifndef LSIM_HOTSWAP_H
#define LSIM_HOTSWAP_H

#include "identity.h"
#include "lsim.h"

typedef struct lsim_hs_handle {
  int64_t slot;       /* -1: no handle */
  int64_t slot_gen;
  int64_t ptr_gen;
  lsim_digest digest; /* artifact digest */
} lsim_hs_handle;

/* A request's lease: the handle it resolved at admission. */
typedef struct lsim_hs_lease {
  int bound;          /* 1 after lsim_hs_resolve, 0 after lsim_hs_release */
  int alias;
  int64_t catalog_gen; /* catalog generation it resolved under */
  lsim_hs_handle h;
} lsim_hs_lease;
#define LSIM_HS_LEASE_INIT {0, -1, 0, {-1, 0, 0, LSIM_DIGEST_INIT}}

typedef struct lsim_hs lsim_hs;

lsim_err lsim_hs_new(lsim_hs **out, int nslots, int naliases, lsim_errbuf *eb);
void lsim_hs_release_all(lsim_hs *h);

/* Fixture setup: give a free slot its starting generations, and set the
** catalog generation.  Only while the slot is free / before any publish. */
lsim_err lsim_hs_seed_slot(lsim_hs *h, int64_t slot, int64_t slot_gen,
                           int64_t ptr_gen, lsim_errbuf *eb);
void lsim_hs_seed_catalog(lsim_hs *h, int64_t catalog_gen);

/* Current catalog generation and the handle an alias maps to
** (slot -1 when unmapped). */
int64_t lsim_hs_catalog_gen(const lsim_hs *h);
lsim_err lsim_hs_lookup(const lsim_hs *h, int alias, lsim_hs_handle *out,
                        lsim_errbuf *eb);

typedef struct lsim_hs_slot_view {
  int state; /* enum lsim_res_state */
  int64_t slot_gen, ptr_gen;
  int refcount;
  int event_complete;
  int alias; /* alias it was staged for, or -1 */
} lsim_hs_slot_view;
lsim_err lsim_hs_slot(const lsim_hs *h, int64_t slot, lsim_hs_slot_view *out,
                      lsim_errbuf *eb);

/* ---- staging and publication --------------------------------------------- */

/*
** Stage `digest` for `alias` into free slot `want` (-1: the lowest free
** slot; *slot gets the one used): slot
** generation + 1, state LOADING.  The staged slot is unreachable: no
** catalog entry names it, lsim_hs_resolve cannot return it and
** lsim_hs_bind_slot on it is E_RES_SHADOW.
*/
lsim_err lsim_hs_stage(lsim_hs *h, int alias, const lsim_digest *digest,
                       int64_t want, int64_t *slot, lsim_errbuf *eb);
/*
** The copy-complete event of a staged slot, with the staging checks: the
** staged bytes' digest, every module key of the incoming artifact present
** (missing_keys > 0: E_RES_MISSING_KEY, old bytes would survive), and the
** physical-rank tail zero (tail_zero == 0: E_RES_PAD_TAIL).  On any of
** these the slot stays LOADING and must be aborted.  ok == 0 (the copy
** failed): E_RES_COPY, likewise.
*/
lsim_err lsim_hs_copy_done(lsim_hs *h, int64_t slot, int ok,
                           const lsim_digest *staged, int missing_keys,
                           int tail_zero, lsim_errbuf *eb);
/*
** Compare-and-publish: alias must still map to *expected (E_RES_CATALOG_CAS
** otherwise); the staged slot must be VALIDATED (E_RES_PUBLISH_EARLY when
** its copy event or checks are missing).  The catalog generation + 1, the
** slot's pointer generation + 1, the slot becomes PUBLISHED and the old
** slot RETIRING.  *out (may be NULL) receives the new handle.
*/
lsim_err lsim_hs_publish(lsim_hs *h, int alias, const lsim_hs_handle *expected,
                         int64_t slot, lsim_hs_handle *out, lsim_errbuf *eb);
/* Make the alias name an existing handle again (a "rollback" after
** publication): always E_RES_BACKWARD when that handle is retiring or older
** than the catalog's; recovery stages and publishes a new generation. */
lsim_err lsim_hs_republish(lsim_hs *h, int alias, const lsim_hs_handle *to,
                           lsim_errbuf *eb);
/* Discard a staged slot before publication: FREE, slot and pointer
** generations + 1. */
lsim_err lsim_hs_abort(lsim_hs *h, int64_t slot, lsim_errbuf *eb);
/* Drain-then-overwrite: alias's slot must have refcount 0 and its last-use
** event complete (E_RES_REFCOUNT / E_RES_EVENT_PENDING); it is rewritten in
** place with `digest` under slot and pointer generations + 1 and the catalog
** generation + 1. */
lsim_err lsim_hs_overwrite(lsim_hs *h, int alias, const lsim_digest *digest,
                           lsim_hs_handle *out, lsim_errbuf *eb);

/* Load under a new alias, the migration step: `alias` stops naming its
** slot (catalog generation + 1) and the slot becomes RETIRING, reclaimed
** under the usual rules.  E_RES_ILLEGAL when the alias is not mapped. */
lsim_err lsim_hs_withdraw(lsim_hs *h, int alias, lsim_errbuf *eb);

/* ---- leases and launches -------------------------------------------------- */

/* Admission: resolve alias once into *lease (refcount + 1).  A lease that
** is already bound is E_RES_REBIND (no re-resolution per iteration). */
lsim_err lsim_hs_resolve(lsim_hs *h, int alias, lsim_hs_lease *lease,
                         lsim_errbuf *eb);
/* A launch under the lease: the slot's current generations and digest must
** equal the lease's (E_RES_STALE_HANDLE otherwise); marks the slot's
** last-use event incomplete until lsim_hs_event_complete. */
lsim_err lsim_hs_launch(lsim_hs *h, const lsim_hs_lease *lease,
                        lsim_errbuf *eb);
lsim_err lsim_hs_event_complete(lsim_hs *h, int64_t slot, lsim_errbuf *eb);
/* The request finished: refcount - 1, lease unbound. */
lsim_err lsim_hs_unlease(lsim_hs *h, lsim_hs_lease *lease, lsim_errbuf *eb);
/* Bind a slot directly (what a runtime that exposed staged pointers would
** do): E_RES_SHADOW unless the catalog names the slot. */
lsim_err lsim_hs_bind_slot(const lsim_hs *h, int64_t slot, lsim_errbuf *eb);
/* Reclaim a RETIRING slot: needs refcount 0 (E_RES_REFCOUNT) and its
** last-use event complete (E_RES_EVENT_PENDING); FREE, generations + 1. */
lsim_err lsim_hs_reclaim(lsim_hs *h, int64_t slot, lsim_errbuf *eb);

#endif /* LSIM_HOTSWAP_H */
