/*
** stage.h: the residency ledger a backend keeps to follow the engine's
** pages (the protocol of backend.h, docs/ARCHITECTURE.md "Backends").
**
** One ledger per open backend: for every worker, a record of each of the
** engine's pool pages (free, staged, adapter or KV, its owner and
** generation, and -- when the backend keeps bytes -- the bytes written
** into it) and of each residency object (none, staged or published, its
** generation, artifact version, pages, and how many launches named it and
** how many of those `run` executed).  The lsim_stage_on_* calls apply one
** protocol event each and fail with the E_STAGE_* code of backend.h when
** the event does not follow from the ledger's state; nothing changes on
** failure.  lsim_stage_check_run checks a plan's adapter rows before a
** backend executes it.
**
** Bytes (keep_bytes): an object's bytes are spread over its pages in page
** order, each page holding at most page_bytes; a page stores only the
** bytes written to it (a sparse store: a 2 MiB page that holds 512 bytes
** of the replay's one module costs 512 bytes).
*/
#ifndef LSIM_STAGE_H
#define LSIM_STAGE_H

#include "backend.h"

enum { LSIM_STAGE_NONE = 0, LSIM_STAGE_STAGED = 1, LSIM_STAGE_PUBLISHED = 2 };

typedef struct lsim_stage_obj {
  int st;              /* LSIM_STAGE_* */
  int64_t gen, version;
  int64_t npages;
  int64_t *page;       /* [npages] the engine's page ids, in its order */
  int64_t launched;    /* launch events naming this generation */
  int64_t executed;    /* of those, executed by a checked run */
  int pending;         /* named by a launch not yet run */
  int64_t nbytes;      /* bytes written (keep_bytes) */
} lsim_stage_obj;

typedef struct lsim_stage_page {
  int st;              /* enum lsim_slot_state; RESERVED: staged */
  int owner;           /* object or KV handle; -1 free */
  int64_t gen;
  int32_t nbytes;
  unsigned char *bytes; /* keep_bytes: [nbytes] */
} lsim_stage_page;

typedef struct lsim_stage_ledger {
  int on;              /* opened with pool_pages > 0 */
  int workers, objects, keep_bytes;
  int64_t pool_pages, page_bytes;
  lsim_stage_page *pg; /* [workers][pool_pages] */
  lsim_stage_obj *ob;  /* [workers][objects] */
  int *pend, *npend;   /* [workers][objects] pending launch lists, counts */
  lsim_backend_counts c;
} lsim_stage_ledger;

/* Open from a backend's cfg (off, and 0, when cfg->pool_pages is 0). */
lsim_err lsim_stage_open(lsim_stage_ledger *L, const lsim_backend_cfg *cfg,
                         int keep_bytes, lsim_errbuf *eb);
void lsim_stage_close(lsim_stage_ledger *L);

lsim_err lsim_stage_on_stage(lsim_stage_ledger *L, const lsim_res_page_ev *ev,
                             lsim_errbuf *eb);
lsim_err lsim_stage_on_publish(lsim_stage_ledger *L,
                               const lsim_res_page_ev *ev, lsim_errbuf *eb);
lsim_err lsim_stage_on_retire(lsim_stage_ledger *L, const lsim_res_page_ev *ev,
                              lsim_errbuf *eb);
lsim_err lsim_stage_on_launch(lsim_stage_ledger *L, const lsim_res_page_ev *ev,
                              lsim_errbuf *eb);
lsim_err lsim_stage_on_kv(lsim_stage_ledger *L, const lsim_res_page_ev *ev,
                          lsim_errbuf *eb);

/* Write len bytes of a staged object (keep_bytes) into its pages.
** E_STAGE_FIT when they exceed npages x page_bytes, E_STAGE_ORDER when the
** object is not staged. */
lsim_err lsim_stage_write(lsim_stage_ledger *L, int w, int obj,
                          const void *bytes, int64_t len, lsim_errbuf *eb);
/* Read an object's bytes back through its page ids into buf (len bytes,
** at most what was written: E_STAGE_FIT otherwise). */
lsim_err lsim_stage_read(const lsim_stage_ledger *L, int w, int obj, void *buf,
                         int64_t len, lsim_errbuf *eb);

/* Check plan's adapter rows: each (adapter, generation) published on
** plan->worker at pages the ledger still holds for it, and named by the
** launch snapshot since the worker's last run (E_STAGE_LAUNCH).  Then the
** snapshot counts as executed. */
lsim_err lsim_stage_check_run(lsim_stage_ledger *L, const lsim_plan *plan,
                              lsim_errbuf *eb);
/* End of run: E_STAGE_UNPUBLISHED for a stage never published,
** E_STAGE_FENCE for a launch never executed. */
lsim_err lsim_stage_finish(const lsim_stage_ledger *L, lsim_errbuf *eb);

/* The record of one page (backend.h's page slot); st -1 when off. */
void lsim_stage_page_get(const lsim_stage_ledger *L, int w, int64_t page,
                         int *st, int64_t *owner, int64_t *gen);
/* An object's record, or NULL when off or out of range. */
const lsim_stage_obj *lsim_stage_obj_get(const lsim_stage_ledger *L, int w,
                                         int obj);

/* Test-only: flip one stored byte of page `page` (a page written but not
** rewritten since: the read then returns the flipped value). */
void lsim_stage__flip(lsim_stage_ledger *L, int w, int64_t page, int32_t at);

/* Test-only: the ledger of an open cpu_ref backend (NULL for another). */
lsim_stage_ledger *lsim_backend_cpu_ref__ledger(lsim_backend *b);

#endif /* LSIM_STAGE_H */
