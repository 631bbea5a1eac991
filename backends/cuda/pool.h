/*
** pool.h: paged adapter residency on the GPU (issue 6 part 2), and the
** stream/event helpers callers without the CUDA headers need.  Built only
** with CUDA (pool.cu); design and error codes in docs/CUDA.md.
**
** One device pool of `pages` pages; a page is one hidden-width vector of
** H = max(d_in, d_out) rounded up to 8 elements of the pool's 16-bit type
** (S-LoRA's unified paging: the geometry of a KV page holding one token's
** vector).  An adapter of rank r occupies 2r pages, anywhere in the pool:
** its r rows of A (d_in wide) and its r rows of B transposed (d_out wide),
** named in that order by the adapter's page table, which lives on the
** device and through which every kernel reads every factor row (the fast
** paths of cuda.h on a paged plan, or the paged kernel).
**
** Loading a generation of adapter id (lsim_cuda_pool_load):
**   1. the factors are packed into page images in pinned host staging and
**      their SHA-256 digest and a 64-bit positional checksum are taken
**      (the digest must equal the caller's artifact digest when given)
**   2. on the pool's dedicated copy stream: the page images and the page
**      table are copied to the device, a checksum kernel reads the pages
**      back in table order, its result is copied to the host, and a
**      cudaEvent (the copy event) is recorded
**   3. lsim_cuda_pool_publish: only when the copy event has completed
**      (E_DEV_PUBLISH_EARLY before), the staged bytes still hash to the
**      digest (E_DEV_DIGEST) and the device checksum equals the host one
**      (E_DEV_CHECKSUM), the generation becomes id's published one:
**      generation + 1, one visibility point.  A failed validation drops
**      the new generation; the previous one stays published and launchable.
**
** Launches (lsim_cuda_pool_run) resolve every adapter through the published
** map at enqueue time (E_DEV_NOT_PUBLISHED for an id without a published
** generation): a launch can never name a generation whose copy has not
** completed and been validated.  After each launch the pool records the
** last-use event of every generation it named.
**
** A generation that is replaced or retired stops being launchable at once;
** its pages and page-table slot are handed to a later load only after the
** copy stream has been made to wait for its last-use event, so a copy can
** never overwrite factors a launch still reads.  All pool writes happen on
** the copy stream; launches only read the pool.
**
** Not thread-safe.  Every CUDA failure is E_BACKEND with the CUDA message.
*/
#ifndef LSIM_CUDA_POOL_H
#define LSIM_CUDA_POOL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "../../engine/identity.h"
#include "../../engine/lsim.h"
#include "../../engine/rowplan.h"

/* ---- streams and device timers -------------------------------------------- */

/* A new stream on the current device (*s NULL on failure).  It is a
** blocking stream: work on it is ordered with the synchronous helpers of
** cuda.h (lsim_cuda_h2d, lsim_cuda_memset), which use the default stream. */
lsim_err lsim_cuda_stream_create(void **s, lsim_errbuf *eb);
void lsim_cuda_stream_destroy(void *s); /* waits for it first; NULL: no-op */

/* A pair of CUDA events on `stream` measuring device time between start
** and stop. */
typedef struct lsim_cuda_timer lsim_cuda_timer;
lsim_err lsim_cuda_timer_open(lsim_cuda_timer **t, void *stream,
                              lsim_errbuf *eb);
lsim_err lsim_cuda_timer_start(lsim_cuda_timer *t, lsim_errbuf *eb);
lsim_err lsim_cuda_timer_stop(lsim_cuda_timer *t, lsim_errbuf *eb);
/* Waits for the stop event; *ns the device time between the two events
** (CUDA's resolution is about 0.5 us). */
lsim_err lsim_cuda_timer_ns(lsim_cuda_timer *t, int64_t *ns, lsim_errbuf *eb);
void lsim_cuda_timer_close(lsim_cuda_timer *t);

/* ---- the pool -------------------------------------------------------------- */

#define LSIM_POOL_MAX_RANK 256

typedef struct lsim_cuda_pool_cfg {
  int device;        /* CUDA device ordinal */
  int dtype;         /* enum lsim_cuda_dtype of the factors, X and Y */
  int d_in, d_out;   /* the module's shape (>= 1) */
  int64_t pages;     /* device pages (>= 2) */
  int max_adapters;  /* adapter ids 0 .. max_adapters-1 (>= 1) */
  int max_rank;      /* largest rank, 1..LSIM_POOL_MAX_RANK */
  int max_objects;   /* page-table slots (generations alive at once);
                        0: 2 * max_adapters + 2 */
  int64_t staging_pages; /* pinned staging; 0: 4 * 2 * max_rank */
  void *stream;      /* launch stream (cudaStream_t); NULL: the pool's own */
} lsim_cuda_pool_cfg;

typedef struct lsim_cuda_pool lsim_cuda_pool; /* opaque */

/* E_USAGE (cfg), E_NOMEM, E_BACKEND; *out NULL on failure. */
lsim_err lsim_cuda_pool_open(lsim_cuda_pool **out,
                             const lsim_cuda_pool_cfg *cfg, lsim_errbuf *eb);
/* Waits for both streams and frees everything.  NULL: no-op. */
void lsim_cuda_pool_close(lsim_cuda_pool *P);

/* Elements per page (H). */
int lsim_cuda_pool_page_elems(const lsim_cuda_pool *P);

/*
** Start loading a new generation of adapter `id`: A [rank][d_in] and
** B [d_out][rank] row-major raw 16-bit values, scale s (finite).  `expect`
** (may be NULL) is the artifact digest of the packed page images
** (lsim_cuda_pool_digest); a mismatch is E_DEV_DIGEST and nothing starts.
** Errors: E_USAGE (id, rank, scale, NULL factor), E_DEV_BUSY (id already
** has a load that is neither published nor dropped), E_DEV_STAGING (the
** staging area is held by loads not yet published), E_DEV_NOSPACE (free
** plus retired pages or page-table slots do not cover 2 * rank), E_BACKEND.
*/
lsim_err lsim_cuda_pool_load(lsim_cuda_pool *P, int id, int rank, float scale,
                             const uint16_t *A, const uint16_t *B,
                             const lsim_digest *expect, lsim_errbuf *eb);

/* The same at the caller's pages: at[0 .. 2 * rank) are device page ids
** (A rows, then B rows, in page-table order), each free or held by a
** retired generation, which is reclaimed first (its pages reused only
** after its last-use event).  A page out of range or given twice: E_USAGE;
** a page of a live generation: E_DEV_BUSY; nothing changes on failure.
** The replay's cuda backend places every adapter at the frames of the
** engine's pages this way (docs/CUDA.md, "The device pool follows the
** engine"). */
lsim_err lsim_cuda_pool_load_at(lsim_cuda_pool *P, int id, int rank,
                                float scale, const uint16_t *A,
                                const uint16_t *B, const lsim_digest *expect,
                                const int64_t *at, lsim_errbuf *eb);

/* The artifact digest lsim_cuda_pool_load would compute for these factors
** in this pool's geometry. */
lsim_err lsim_cuda_pool_digest(const lsim_cuda_pool *P, int rank,
                               const uint16_t *A, const uint16_t *B,
                               lsim_digest *out, lsim_errbuf *eb);

/* 1 when id's pending load's copy event has completed, 0 when not yet;
** E_DEV_NO_LOAD when id has no pending load. */
int lsim_cuda_pool_copy_done(lsim_cuda_pool *P, int id, lsim_errbuf *eb);

/*
** Publish id's pending load (wait: first block until its copy event
** completes).  E_DEV_PUBLISH_EARLY when the event has not completed
** (nothing changes: publish again later), E_DEV_DIGEST / E_DEV_CHECKSUM
** when validation fails (the pending generation is dropped, its pages go
** back to the pool, the published generation is untouched),
** E_DEV_NO_LOAD.  On success *gen (may be NULL) is the new generation and
** the previous one is retired (fenced by its last-use event).
*/
lsim_err lsim_cuda_pool_publish(lsim_cuda_pool *P, int id, int wait,
                                int64_t *gen, lsim_errbuf *eb);

/* Unpublish id and drop its pending load, if any: no later launch can name
** it; its pages are reused only after its last-use event.  Absent: no-op. */
lsim_err lsim_cuda_pool_retire(lsim_cuda_pool *P, int id, lsim_errbuf *eb);

/* State of id: *gen the published generation (0 never; it is kept after a
** retire), *published 1 when launchable, *pending 1 with a load in flight;
** any pointer may be NULL.  E_USAGE for an id out of range. */
lsim_err lsim_cuda_pool_adapter(const lsim_cuda_pool *P, int id, int64_t *gen,
                                int *published, int *pending,
                                lsim_errbuf *eb);

typedef struct lsim_cuda_pool_stats {
  int64_t pages, free_pages, used_pages, fenced_pages; /* fenced: retired,
                                                   awaiting reuse */
  int64_t loads, publishes, failed_validations, fenced_reuses;
  int64_t launches;
} lsim_cuda_pool_stats;
void lsim_cuda_pool_stats_get(const lsim_cuda_pool *P,
                              lsim_cuda_pool_stats *out);

/* The pages of id's published generation in page-table order (A rows,
** then B rows): up to max into pages, *n the count (0 when none). */
void lsim_cuda_pool_pages(const lsim_cuda_pool *P, int id, int64_t *pages,
                          int max, int *n);

/*
** Y += delta for the active rows of p through the page tables: one
** metadata copy and at most two launches on the pool's launch stream (the
** fast paths; one launch for the paged kernel, lsim_cuda_pool_set_path),
** none when no row is active.  Adapter ids of p map to pool ids through remap[id] when
** remap is given (nremap entries; -1: none), else are pool ids.  Every
** mapped id needs a published generation (E_DEV_NOT_PUBLISHED) of the
** plan's rank (E_REF_RANK).  X [T][ldx], Y [T][ldy] device pointers in
** packed row order, ldx >= d_in, ldy >= d_out.  Device time of the copy and
** the launch is measured with CUDA events (lsim_cuda_pool_last_ns).
*/
lsim_err lsim_cuda_pool_run(lsim_cuda_pool *P, const lsim_rowplan *p,
                            const int *remap, int nremap, const void *X,
                            int ldx, void *Y, int ldy, lsim_errbuf *eb);
/*
** Which kernels lsim_cuda_pool_run launches.  path: an enum lsim_cuda_path
** of cuda.h (LSIM_CUDA_PATH_AUTO, the default: the chooser) -- the fast
** paths, every factor row read through the generation's page table
** (lsim_cuda_lora_plan_paged), at most two launches after one metadata
** copy -- or LSIM_CUDA_POOL_PAGED, the correctness-first paged kernel.  A
** run whose X or Y rows are not 16-byte aligned (pointer or stride) uses
** the paged kernel whatever the setting.  An explicit _mma path with a
** rank above 128 fails the run with E_USAGE.  Takes effect at the next run.
*/
#define LSIM_CUDA_POOL_PAGED (-1)
void lsim_cuda_pool_set_path(lsim_cuda_pool *P, int path);
/* The path the last run launched (an enum lsim_cuda_path, never AUTO, or
** LSIM_CUDA_POOL_PAGED); -2 before the first launch. */
int lsim_cuda_pool_last_path(const lsim_cuda_pool *P);
/* Launch knobs of the fast paths (cuda.h's lsim_cuda_lora_tune, copied);
** NULL: the defaults. */
struct lsim_cuda_lora_tune;
void lsim_cuda_pool_set_tune(lsim_cuda_pool *P,
                             const struct lsim_cuda_lora_tune *t);

/*
** The same run in three steps, so that many pools' launches can follow one
** another with nothing in between (model-shape replay captures them into
** one CUDA graph):
**   prepare    the checks of lsim_cuda_pool_run and the plan, whose
**              metadata copy is enqueued on the launch stream now; p and
**              remap must stay valid until mark_used
**   launch     the kernels only (no events, no host synchronisation on the
**              fast paths: capturable); E_STATE when nothing is prepared
**   mark_used  the last-use event of every generation the plan named,
**              recorded on the launch stream (after the graph, when the
**              launches were captured); ends the prepared run
** prepared_fast: 1 when the prepared run is a fast path or launches
** nothing (the paged kernel synchronises on the host: not capturable).
** lsim_cuda_pool_last_ns does not time such a run.
*/
lsim_err lsim_cuda_pool_prepare(lsim_cuda_pool *P, const lsim_rowplan *p,
                                const int *remap, int nremap, const void *X,
                                int ldx, void *Y, int ldy, lsim_errbuf *eb);
int lsim_cuda_pool_prepared_fast(const lsim_cuda_pool *P);
/* The pool's launch stream (a cudaStream_t): where to capture launches. */
void *lsim_cuda_pool_stream(const lsim_cuda_pool *P);
lsim_err lsim_cuda_pool_launch(lsim_cuda_pool *P, lsim_errbuf *eb);
lsim_err lsim_cuda_pool_mark_used(lsim_cuda_pool *P, lsim_errbuf *eb);

/*
** Stream capture of launches into one executable graph, kept between
** captures: a capture of the same topology updates it in place
** (cudaGraphExecUpdate), another is instantiated anew.  end(ok = 0) ends a
** capture whose launches failed and keeps nothing.  counts: how many
** instantiations and in-place updates so far.
*/
typedef struct lsim_cuda_graph lsim_cuda_graph;
lsim_err lsim_cuda_graph_open(lsim_cuda_graph **g, lsim_errbuf *eb);
lsim_err lsim_cuda_graph_begin(lsim_cuda_graph *g, void *stream,
                               lsim_errbuf *eb);
lsim_err lsim_cuda_graph_end(lsim_cuda_graph *g, void *stream, int ok,
                             lsim_errbuf *eb);
lsim_err lsim_cuda_graph_launch(lsim_cuda_graph *g, void *stream,
                                lsim_errbuf *eb);
void lsim_cuda_graph_counts(const lsim_cuda_graph *g, int64_t *captures,
                            int64_t *updates);
void lsim_cuda_graph_close(lsim_cuda_graph *g);

/* Device time in ns of the page copies of id's most recent load (two
** CUDA events on the copy stream around them; waits for the copy); -1
** when id never loaded here. */
int64_t lsim_cuda_pool_load_ns(lsim_cuda_pool *P, int id);

/* Device ns of the last run (waits for it); 0 when it launched nothing. */
lsim_err lsim_cuda_pool_last_ns(lsim_cuda_pool *P, int64_t *ns,
                                lsim_errbuf *eb);
/* Wait for both streams; E_BACKEND carries an asynchronous error. */
lsim_err lsim_cuda_pool_sync(lsim_cuda_pool *P, lsim_errbuf *eb);

/* ---- test hooks (never used by lorasim itself) ---------------------------- */

/* Flip byte `byte` of id's pending staged image (after its digest was
** taken): publication must fail with E_DEV_DIGEST. */
lsim_err lsim_cuda_pool__corrupt_staged(lsim_cuda_pool *P, int id,
                                        size_t byte, lsim_errbuf *eb);
/* Every later launch's blocks (launch_ns) or the copy stream before each
** later load's copy (copy_ns) first spin this long on the device. */
void lsim_cuda_pool__set_delay(lsim_cuda_pool *P, int64_t launch_ns,
                               int64_t copy_ns);
/* 1: hand retired pages to later loads WITHOUT waiting for their last-use
** event (shows the reuse test can fail). */
void lsim_cuda_pool__set_unfenced(lsim_cuda_pool *P, int unfenced);

#ifdef __cplusplus
}
#endif

#endif /* LSIM_CUDA_POOL_H */
