/*
** backend_full.h: the cuda backend's `--execute full` mode (backend_full.c):
** each iteration the engine plans is run as a whole forward pass of the
** scenario's model on the GPU (fwd.h), with the KV cache and the adapters
** in the engine's pages of one device pool per worker.  backend_cuda.c
** routes its slots here when cfg->execute is LSIM_EXECUTE_FULL.
*/
#ifndef LSIM_CUDA_BACKEND_FULL_H
#define LSIM_CUDA_BACKEND_FULL_H

#include "../backend.h"

typedef struct lsim_full lsim_full; /* opaque */

/* E_DEV_UNSUPPORTED for what the mode cannot run (no residency geometry, a
** compressed collection, tensor parallelism, a partial or unsupported
** shape, pages that do not hold a whole number of tokens), E_DEV_FIT when
** the model and the pool do not fit the device, E_BACKEND. */
lsim_err lsim_full_open(lsim_full **out, const lsim_backend_cfg *cfg,
                        lsim_errbuf *eb);
void lsim_full_close(lsim_full *f);
/* Every refusal of lsim_full_open (E_DEV_UNSUPPORTED, E_DEV_FIT) without
** opening anything; max_rank: the catalog's largest rank (cfg->adapter_rank
** may be NULL).  The replay runs it before it writes any file. */
lsim_err lsim_full_check(const lsim_backend_cfg *cfg, int max_rank,
                         lsim_errbuf *eb);

lsim_err lsim_full_stage(lsim_full *f, const lsim_res_page_ev *ev,
                         lsim_errbuf *eb);
lsim_err lsim_full_publish(lsim_full *f, const lsim_res_page_ev *ev,
                           lsim_errbuf *eb);
lsim_err lsim_full_retire(lsim_full *f, const lsim_res_page_ev *ev,
                          lsim_errbuf *eb);
lsim_err lsim_full_launch(lsim_full *f, const lsim_res_page_ev *ev,
                          lsim_errbuf *eb);
lsim_err lsim_full_kv(lsim_full *f, const lsim_res_page_ev *ev,
                      lsim_errbuf *eb);
lsim_err lsim_full_finish(lsim_full *f, lsim_errbuf *eb);
void lsim_full_counts(const lsim_full *f, lsim_backend_counts *out);
void lsim_full_page(const lsim_full *f, int w, int64_t page, int *st,
                    int64_t *owner, int64_t *gen);
int64_t lsim_full_load_ns(lsim_full *f, int worker, int object);
lsim_err lsim_full_run(lsim_full *f, const lsim_plan *plan,
                       lsim_backend_result *res, lsim_errbuf *eb);

#endif /* LSIM_CUDA_BACKEND_FULL_H */
