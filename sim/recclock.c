/*
** recclock.c: a recorded clock (recclock.h; docs/FIDELITY.md, "Replaying
** a recorded clock").
**
** Two cursors over the recorded database, read-only: its iterations in
** iteration order and its copies in the order they were logged.  The
** replay asks for the next of each as it reaches them; every row is
** checked against what the replay is doing, so a replay that departs from
** the recorded run (another scenario, seed, option or lorasim) stops at
** the first difference instead of drifting.  The span a row gives back is
** the one that drove the recorded clock: the measured ns where the run's
** clock was measured and the row has one, else the model's ns the run
** used in its place.
*/
#include "recclock.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "db.h"

struct lsim_recclock {
  sqlite3 *h;
  sqlite3_stmt *it, *ld;
  int measured;    /* the recorded run's clock was measured */
  int it_done, ld_done;
  int64_t n_it, n_ld; /* rows handed out */
  char path[1024];
};


lsim_err lsim_recclock_open(lsim_recclock **out, const char *path,
                            lsim_errbuf *eb) {
  struct stat fst;
  *out = NULL;
  if (stat(path, &fst) != 0)
    return lsim_fail(eb,
                     errno == ENOENT || errno == ENOTDIR ? LSIM_E_FILE_MISSING
                                                         : LSIM_E_IO,
                     "--clock-from %s: %s", path, strerror(errno));
  if (!S_ISREG(fst.st_mode))
    return lsim_fail(eb, LSIM_E_FID_NOT_RUN,
                     "--clock-from %s: not a regular file", path);
  lsim_recclock *r = calloc(1, sizeof *r);
  if (!r)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  snprintf(r->path, sizeof r->path, "%s", path);
  lsim_err rc = 0;
  if (sqlite3_open_v2(path, &r->h, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
    rc = lsim_fail(eb, LSIM_E_FID_NOT_RUN, "--clock-from %s: cannot open: %s",
                   path, r->h ? sqlite3_errmsg(r->h) : "out of memory");
    goto fail;
  }
  sqlite3_busy_timeout(r->h, 2000);
  /* a run database, finished, whose rows say what drove its clock */
  sqlite3_stmt *st = NULL;
  int has_clock = lsim_db_has_column(r->h, "runs", "clock");
  if (sqlite3_prepare_v2(r->h,
                         has_clock ? "SELECT status, clock FROM runs WHERE "
                                     "run_id = 1"
                                   : "SELECT status, 'model' FROM runs WHERE "
                                     "run_id = 1",
                         -1, &st, NULL) != SQLITE_OK ||
      sqlite3_step(st) != SQLITE_ROW) {
    rc = lsim_fail(eb, LSIM_E_FID_NOT_RUN,
                   "--clock-from %s: not a lorasim run database (no run "
                   "row): %s",
                   path, sqlite3_errmsg(r->h));
    sqlite3_finalize(st);
    goto fail;
  }
  const char *status = (const char *)sqlite3_column_text(st, 0);
  const char *clock = (const char *)sqlite3_column_text(st, 1);
  int ok = status && strcmp(status, "ok") == 0;
  r->measured = clock && strcmp(clock, "measured") == 0;
  char stat_s[32];
  snprintf(stat_s, sizeof stat_s, "%s", status ? status : "NULL");
  sqlite3_finalize(st);
  if (!ok) {
    rc = lsim_fail(eb, LSIM_E_FID_RECORDED,
                   "--clock-from %s: the recorded run did not finish (status "
                   "%s): its clock is not whole",
                   path, stat_s);
    goto fail;
  }
  if (!lsim_db_has_column(r->h, "iterations", "measured_ns") ||
      !lsim_db_has_column(r->h, "loads", "measured_ns")) {
    rc = lsim_fail(eb, LSIM_E_FID_RECORDED,
                   "--clock-from %s: written before schema 6, which "
                   "records no spans (iterations.measured_ns, loads)",
                   path);
    goto fail;
  }
  if (sqlite3_prepare_v2(r->h,
                         "SELECT iter, worker, start_tick, prefill_rows, "
                         "decode_rows, model_ns, measured_ns FROM iterations "
                         "ORDER BY iter",
                         -1, &r->it, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(r->h,
                         "SELECT kind, worker, adapter, model_ns, measured_ns "
                         "FROM loads ORDER BY load",
                         -1, &r->ld, NULL) != SQLITE_OK) {
    rc = lsim_fail(eb, LSIM_E_FID_RECORDED, "--clock-from %s: %s", path,
                   sqlite3_errmsg(r->h));
    goto fail;
  }
  *out = r;
  return 0;
fail:
  lsim_recclock_close(r);
  return rc;
}

/* The span that drove the recorded clock for a row whose model_ns and
** measured_ns are in columns m and m + 1. */
static lsim_err lsim__span(lsim_recclock *r, sqlite3_stmt *st, int m,
                           const char *what, int64_t n, int64_t *drive,
                           int64_t *measured, lsim_errbuf *eb) {
  int null_meas = sqlite3_column_type(st, m + 1) == SQLITE_NULL;
  int64_t model = sqlite3_column_int64(st, m);
  *measured = null_meas ? -1 : sqlite3_column_int64(st, m + 1);
  *drive = r->measured && !null_meas ? *measured : model;
  if (sqlite3_column_type(st, m) == SQLITE_NULL || model < 0 || *drive < 0)
    return lsim_fail(eb, LSIM_E_FID_RECORDED,
                     "--clock-from %s: %s %lld has no usable span", r->path,
                     what, (long long)n);
  return 0;
}

lsim_err lsim_recclock_iter(lsim_recclock *r, int64_t iter, int worker,
                            int64_t start_tick, int64_t prefill_rows,
                            int64_t decode_rows, int64_t *drive_ns,
                            int64_t *measured_ns, lsim_errbuf *eb) {
  int s = r->it_done ? SQLITE_DONE : sqlite3_step(r->it);
  if (s != SQLITE_ROW) {
    r->it_done = 1;
    if (s != SQLITE_DONE)
      return lsim_fail(eb, LSIM_E_FID_RECORDED, "--clock-from %s: %s",
                       r->path, sqlite3_errmsg(r->h));
    return lsim_fail(eb, LSIM_E_FID_RECORDED,
                     "--clock-from %s: this replay runs iteration %lld, but "
                     "the recorded run has only %lld: it departs from the "
                     "recorded run (scenario, seed, options or version)",
                     r->path, (long long)iter, (long long)r->n_it);
  }
  int64_t v[5];
  for (int i = 0; i < 5; i++)
    v[i] = sqlite3_column_int64(r->it, i);
  int64_t want[5] = {iter, worker, start_tick, prefill_rows, decode_rows};
  static const char *const names[5] = {"iteration", "worker", "start tick",
                                       "prefill rows", "decode rows"};
  for (int i = 0; i < 5; i++)
    if (v[i] != want[i])
      return lsim_fail(eb, LSIM_E_FID_RECORDED,
                       "--clock-from %s: iteration %lld departs from the "
                       "recorded run: %s %lld recorded, %lld in this replay "
                       "(scenario, seed, options or version differ)",
                       r->path, (long long)iter, names[i], (long long)v[i],
                       (long long)want[i]);
  r->n_it++;
  return lsim__span(r, r->it, 5, "iteration", iter, drive_ns, measured_ns,
                    eb);
}

lsim_err lsim_recclock_load(lsim_recclock *r, const char *kind, int worker,
                            int adapter, int64_t *drive_ns,
                            int64_t *measured_ns, lsim_errbuf *eb) {
  int s = r->ld_done ? SQLITE_DONE : sqlite3_step(r->ld);
  if (s != SQLITE_ROW) {
    r->ld_done = 1;
    if (s != SQLITE_DONE)
      return lsim_fail(eb, LSIM_E_FID_RECORDED, "--clock-from %s: %s",
                       r->path, sqlite3_errmsg(r->h));
    return lsim_fail(eb, LSIM_E_FID_RECORDED,
                     "--clock-from %s: this replay makes copy %lld, but the "
                     "recorded run made only %lld: it departs from the "
                     "recorded run",
                     r->path, (long long)r->n_ld + 1, (long long)r->n_ld);
  }
  const char *k = (const char *)sqlite3_column_text(r->ld, 0);
  int w = sqlite3_column_int(r->ld, 1), a = sqlite3_column_int(r->ld, 2);
  if (!k || strcmp(k, kind) != 0 || w != worker || a != adapter)
    return lsim_fail(eb, LSIM_E_FID_RECORDED,
                     "--clock-from %s: copy %lld departs from the recorded "
                     "run: %s of adapter %d on worker %d recorded, %s of "
                     "adapter %d on worker %d in this replay",
                     r->path, (long long)r->n_ld + 1, k ? k : "NULL", a, w,
                     kind, adapter, worker);
  r->n_ld++;
  return lsim__span(r, r->ld, 3, "copy", r->n_ld, drive_ns, measured_ns, eb);
}

lsim_err lsim_recclock_finish(lsim_recclock *r, lsim_errbuf *eb) {
  int a = r->it_done ? SQLITE_DONE : sqlite3_step(r->it);
  int b = r->ld_done ? SQLITE_DONE : sqlite3_step(r->ld);
  r->it_done = r->ld_done = 1;
  if (a != SQLITE_DONE || b != SQLITE_DONE)
    return lsim_fail(eb, LSIM_E_FID_RECORDED,
                     "--clock-from %s: this replay ended after %lld "
                     "iterations and %lld copies, but the recorded run has "
                     "more: it departs from the recorded run",
                     r->path, (long long)r->n_it, (long long)r->n_ld);
  return 0;
}

void lsim_recclock_close(lsim_recclock *r) {
  if (!r)
    return;
  sqlite3_finalize(r->it);
  sqlite3_finalize(r->ld);
  sqlite3_close(r->h);
  free(r);
}
