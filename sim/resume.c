/*
** resume.c: `lorasim replay --resume DB` (contract in resume.h).
**
** Steps, each a function below:
**
**   1. lsim_resume_read       the runs row: scenario path and SHA-256,
**                             seed, policies, backend, command line; the
**                             run_inputs and run_options rows
**   2. lsim_resume_scenario   recompute every recorded digest, load the
**                             scenario, apply the recorded choices and
**                             options, check it reads the same inputs
**   3. lsim_replay_run        into DB.resume (any old DB.resume and its
**                             -wal/-shm are replaced by lsim_db_open)
**   4. lsim_resume_install    remove DB's -wal and -shm, rename
**                             DB.resume over DB
**
** One writer.  DB's lock (DB.lock, sim/outfile.h) is taken before step 1
** and held through step 4, so a second replay or resume of DB is refused
** with E_OUT_LOCKED while this one runs.
**
** Crash safety.  Until step 4, DB is untouched: a resume killed in step 3
** leaves DB as it was (still 'running'), and a later resume starts over.
** In step 4 the old -wal goes first: from then on DB holds an older but
** self-consistent state of the same partial run (its last checkpoint),
** never a WAL applied to the wrong file; rename(2) then swaps in the
** finished run at once.  The finished database is closed, so its WAL was
** checkpointed and removed by SQLite; step 4 checks that DB.resume-wal is
** gone before renaming.
*/
#include "resume.h"
#include "cli.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../backends/backend.h"
#include "../engine/policy/policy.h"
#include "outfile.h"
#include "replay.h"

static void lsim__col(sqlite3_stmt *st, int i, char *out, size_t n) {
  const unsigned char *t = sqlite3_column_text(st, i);
  snprintf(out, n, "%s", t ? (const char *)t : "");
}


lsim_err lsim_resume_read(const char *db_path, lsim_resume_info *ri,
                          lsim_errbuf *eb) {
  memset(ri, 0, sizeof *ri);
  if (access(db_path, F_OK) != 0)
    return lsim_fail(eb, LSIM_E_FILE_MISSING, "%s: no such database",
                     db_path);
  sqlite3 *h = NULL;
  /* read-write: opening a database whose writer died replays its WAL */
  if (sqlite3_open_v2(db_path, &h, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
    lsim_err rc = lsim_fail(eb, LSIM_E_DB, "%s: cannot open database: %s",
                            db_path, h ? sqlite3_errmsg(h) : "out of memory");
    sqlite3_close(h);
    return rc;
  }
  sqlite3_busy_timeout(h, 2000);
  sqlite3_stmt *st = NULL;
  lsim_err rc = 0;
  if (sqlite3_prepare_v2(h,
                         "SELECT status,scenario_path,scenario_sha256,seed,"
                         "backend,scheduler,evict,prefetch,command_line "
                         "FROM runs WHERE run_id=1",
                         -1, &st, NULL) != SQLITE_OK) {
    rc = lsim_fail(eb, LSIM_E_USAGE,
                   "%s: not a lorasim run database (%s): replay the "
                   "scenario instead",
                   db_path, sqlite3_errmsg(h));
  } else {
    int step = sqlite3_step(st);
    if (step == SQLITE_ROW) {
      lsim__col(st, 0, ri->status, sizeof ri->status);
      lsim__col(st, 1, ri->scenario_path, sizeof ri->scenario_path);
      lsim__col(st, 2, ri->sha256, sizeof ri->sha256);
      ri->seed = (uint64_t)sqlite3_column_int64(st, 3);
      lsim__col(st, 4, ri->backend, sizeof ri->backend);
      lsim__col(st, 5, ri->scheduler, sizeof ri->scheduler);
      lsim__col(st, 6, ri->evict, sizeof ri->evict);
      lsim__col(st, 7, ri->prefetch, sizeof ri->prefetch);
      lsim__col(st, 8, ri->command_line, sizeof ri->command_line);
      if (!ri->scenario_path[0])
        rc = lsim_fail(eb, LSIM_E_USAGE, "%s: the run row names no scenario",
                       db_path);
    } else if (step == SQLITE_DONE) {
      rc = lsim_fail(eb, LSIM_E_USAGE,
                     "%s: no run recorded (the process died before the run "
                     "began): replay the scenario instead",
                     db_path);
    } else {
      rc = lsim_fail(eb, LSIM_E_DB, "%s: read run: %s", db_path,
                     sqlite3_errmsg(h));
    }
  }
  sqlite3_finalize(st);
  /* the identity, and the flags it holds that the columns do not */
  if (!rc && strcmp(ri->status, "ok") != 0 &&
      !(rc = lsim_runid_read(h, db_path, &ri->id, eb))) {
    const char *v;
    ri->skip_bad_rows = lsim_runid_get(&ri->id, "skip-bad-rows") != NULL;
    ri->verify = lsim_runid_get(&ri->id, "verify") != NULL;
    ri->no_plots = lsim_runid_get(&ri->id, "no-plots") != NULL;
    ri->summary_only = lsim_runid_get(&ri->id, "summary-only") != NULL;
    ri->tensor_model = (v = lsim_runid_get(&ri->id, "tensor-shape")) &&
                       strcmp(v, "model") == 0;
    ri->tensor_layers =
        (v = lsim_runid_get(&ri->id, "tensor-layers")) ? atoi(v) : 0;
  }
  sqlite3_close(h);
  return rc;
}

static lsim_err lsim__set(char *dst, const char *name, const char *what,
                          int known, lsim_errbuf *eb) {
  if (!known)
    return lsim_fail(eb, LSIM_E_USAGE,
                     "the run used %s '%s', which this build does not have",
                     what, name);
  snprintf(dst, LSIM_NAME_MAX, "%s", name);
  return 0;
}

lsim_err lsim_resume_scenario(const lsim_resume_info *ri, lsim_scenario *sc,
                              lsim_errbuf *eb) {
  /* every recorded input as it is now, before anything reads it */
  lsim_err rc = lsim_runid_verify(&ri->id, eb);
  if (rc)
    return rc;
  /* the recorded --set edits (and a sweep cell's inline base) again */
  const char *sets[LSIM_SCENARIO_MAX_SETS];
  lsim_scenario_src src;
  if ((rc = lsim_runid_scenario_src(&ri->id, &src, sets, eb)) ||
      (rc = lsim_scenario_load_src(sc, ri->scenario_path, &src, eb)))
    return rc;
  char sha[65];
  lsim_scenario_sha_hex(sc, sha);
  if (strcmp(sha, ri->sha256) != 0)
    return lsim_fail(eb, LSIM_E_USAGE,
                     "%s changed since the run (sha256 %.12s..., recorded "
                     "%.12s...): a rerun would not be the same run",
                     ri->scenario_path, sha, ri->sha256);
  sc->seed = ri->seed;
  if ((rc = lsim__set(sc->backend, ri->backend, "backend",
                      lsim_backend_find(ri->backend) != NULL, eb)) ||
      (rc = lsim__set(sc->scheduler, ri->scheduler, "scheduler",
                      lsim_sched_find(ri->scheduler) != NULL, eb)) ||
      (rc = lsim__set(sc->evict, ri->evict, "eviction policy",
                      lsim_evict_find(ri->evict) != NULL, eb)) ||
      (rc = lsim__set(sc->prefetch, ri->prefetch, "prefetch policy",
                      lsim_prefetch_find(ri->prefetch) != NULL, eb)))
    return rc;
  if (ri->skip_bad_rows)
    sc->trace_skip_bad_rows = 1;
  const char *profile = lsim_runid_get(&ri->id, "profile");
  if (profile && (rc = lsim_runid_apply_profile(sc, profile, eb)))
    return rc;
  /* --execute and --clock as the run was given them (the scenario's own
  ** $.execute / $.clock came back with the file and its --set edits) */
  int execute, clock;
  if ((rc = lsim_cli_modes(lsim_runid_get(&ri->id, "execute"),
                           lsim_runid_get(&ri->id, "clock"), &execute, &clock,
                           eb)))
    return rc;
  if (execute >= 0)
    sc->execute = execute;
  if (clock >= 0)
    sc->clock = clock;
  const char *cf = lsim_runid_get(&ri->id, "clock-from");
  if (cf) {
    if (strlen(cf) >= sizeof sc->clock_from)
      return lsim_fail(eb, LSIM_E_RUN_IDENTITY, "clock-from: path too long");
    snprintf(sc->clock_from, sizeof sc->clock_from, "%s", cf);
    sc->clock = LSIM_CLOCK_MEASURED;
  }
  /* the scenario so rebuilt must read what the run read, no more */
  static lsim_runid now;
  if ((rc = lsim_runid_collect(sc, &now, eb)))
    return rc;
  return lsim_runid_same_inputs(&ri->id, &now, eb);
}

lsim_err lsim_resume_install(const char *tmp, const char *db,
                             lsim_errbuf *eb) {
  char p[LSIM_PATH_MAX + 64];
  snprintf(p, sizeof p, "%s-wal", tmp);
  if (access(p, F_OK) == 0)
    return lsim_fail(eb, LSIM_E_DB,
                     "%s: the finished run still has a write-ahead log; "
                     "%s is left as it was",
                     tmp, db);
  static const char *const sfx[] = {"-wal", "-shm"};
  lsim_err rc = lsim_out_check(db, eb);
  for (int i = 0; i < 2 && !rc; i++) {
    snprintf(p, sizeof p, "%s%s", db, sfx[i]);
    rc = lsim_out_check(p, eb);
  }
  if (rc)
    return rc; /* nothing removed, nothing renamed */
  for (int i = 0; i < 2; i++) {
    snprintf(p, sizeof p, "%s%s", db, sfx[i]);
    if (unlink(p) != 0 && errno != ENOENT)
      return lsim_fail(eb, LSIM_E_DB, "%s: cannot remove: %s", p,
                       strerror(errno));
  }
  if (rename(tmp, db) != 0)
    return lsim_fail(eb, LSIM_E_DB, "cannot rename %s to %s: %s", tmp, db,
                     strerror(errno));
  return 0;
}

static int lsim__resume_locked(const char *db_path, int quiet, int no_plots,
                               volatile sig_atomic_t *stop);

int lsim_resume_main(const char *db_path, int quiet, int no_plots,
                     volatile sig_atomic_t *stop) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  /* one writer: DB's lock is held from the read to the install */
  lsim_outlock lock = LSIM_OUTLOCK_INIT;
  lsim_err rc = lsim_out_check(db_path, &eb); /* never a link or a device */
  if (!rc)
    rc = lsim_out_lock(&lock, db_path, &eb);
  if (rc)
    return lsim_cli_fail("replay", rc, eb.msg);
  int st = lsim__resume_locked(db_path, quiet, no_plots, stop);
  lsim_out_unlock(&lock);
  return st;
}

static int lsim__resume_locked(const char *db_path, int quiet, int no_plots,
                               volatile sig_atomic_t *stop) {
  static lsim_resume_info ri;
  static lsim_scenario sc;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_err rc = lsim_resume_read(db_path, &ri, &eb);
  if (rc)
    return lsim_cli_fail("replay", rc, eb.msg);
  if (strcmp(ri.status, "ok") == 0) {
    if (!quiet)
      printf("%s: the run already ended ok; nothing to resume\n", db_path);
    return 0;
  }
  if ((rc = lsim_resume_scenario(&ri, &sc, &eb)))
    return lsim_cli_fail("replay", rc, eb.msg);
  char tmp[LSIM_PATH_MAX + 16];
  if (snprintf(tmp, sizeof tmp, "%s.resume", db_path) >= (int)sizeof tmp)
    return lsim_cli_fail("replay", LSIM_E_USAGE, "database path too long");
  if (!quiet)
    printf("resuming %s: %s seed %llu (%s, was '%s')\n", db_path,
           ri.scenario_path, (unsigned long long)ri.seed, ri.scheduler,
           ri.status);
  /* the rerun records the run's own options, so it can be resumed too */
  static const char *ropts[2 * LSIM_RUNID_MAX_OPTIONS + 1];
  for (int i = 0; i < ri.id.nopts; i++) {
    ropts[2 * i] = ri.id.opt[i].name;
    ropts[2 * i + 1] = ri.id.opt[i].value;
  }
  ropts[2 * ri.id.nopts] = NULL;
  lsim_replay_opts o = {.db_path = tmp,
                        .final_path = db_path,
                        .command_line = ri.command_line,
                        .progress = !quiet,
                        .plots = !(no_plots || ri.no_plots),
                        .report = quiet ? NULL : stdout,
                        .stop = stop,
                        .verify = ri.verify,
                        .tensor_model = ri.tensor_model,
                        .tensor_layers = ri.tensor_layers,
                        .summary_only = ri.summary_only,
                        .lock_held = 1,
                        .run_options = ropts};
  lsim_summary sum;
  rc = lsim_replay_run(&sc, &o, &sum, &eb);
  if (rc == LSIM_E_INTERRUPTED) {
    /* not an outcome: keep the partial run and drop the unfinished rerun */
    unlink(tmp);
    char p[LSIM_PATH_MAX + 64];
    snprintf(p, sizeof p, "%s-wal", tmp);
    unlink(p);
    snprintf(p, sizeof p, "%s-shm", tmp);
    unlink(p);
    fprintf(stderr, "lorasim replay: resume interrupted; %s left as it was\n",
            db_path);
    return lsim_cli_fail("replay", rc, eb.msg);
  }
  if (rc) {
    /* a rerun that failed replaces nothing: DB keeps the partial run */
    int st = lsim_cli_fail("replay", rc, eb.msg);
    lsim_replay_explain(stderr, "lorasim replay: the rerun", &sum, tmp);
    fprintf(stderr, "lorasim replay: %s left as it was\n", db_path);
    return st;
  }
  if ((rc = lsim_resume_install(tmp, db_path, &eb)))
    return lsim_cli_fail("replay", rc, eb.msg);
  return 0;
}
