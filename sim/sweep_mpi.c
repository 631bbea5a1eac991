/*
** sweep_mpi.c: `mpirun -np N lorasim sweep GRID.json --mpi`, the cells of a
** grid over MPI ranks (docs/SWEEP.md, "MPI").
**
** Every rank has loaded the grid itself (lsim_sweep_load, in the command);
** only cell numbers and result codes cross MPI.  The results are files:
** each cell's database is written by lsim_sweep_run_cell (temp + rename,
** under the cell's flock), so OUT must be one file system that every rank
** sees, and rank 0 merges from it.  MPI_Init runs here and nowhere else: a
** lorasim linked with libmpi never initialises MPI for any other command.
**
** Rank 0 only dispatches (with a single rank it runs every cell itself);
** ranks 1..N-1 are workers.  Two tags, 16 bytes each way:
**
**   worker -> 0   ASK  {cell, rc}    the cell just finished (-1: none yet)
**                                    and its result: 0, LSIM__SKIPPED, or a
**                                    negative lsim_err
**   0 -> worker   WORK {cell, flags} the next cell, or cell -1: stop
**
** Rank 0 answers every ASK with exactly one WORK while it dispatches.  Its
** state per cell: TODO -> HELD (handed out) -> DONE or FAILED; a cell
** leaves HELD only by a report, never by a timeout.
**
** Invariants:
**  1. The first pass hands out every TODO cell once, in cell order.  With
**     --resume the WORK carries LSIM__WF_SKIP_DONE and the worker checks
**     the cell's database first (lsim_sweep_cell_done), so rank 0 never
**     reads a database while workers wait for it.
**  2. Once no TODO cell is left, an ASK is answered with a HELD cell of
**     another rank (round robin over the ranks, LSIM__WF_SKIP_DONE set), so
**     the cell of a rank that died is run again by a live one.  A duplicate
**     is harmless: the run is idempotent and its database replaced
**     atomically; while the first holder is alive its flock makes the
**     duplicate fail at once with E_OUT_LOCKED, and the worker pauses
**     (LSIM__LOCKED_PAUSE_MS, doubling) before it asks again.
**  3. Once every cell is DONE or FAILED (or the run is stopping) every ASK
**     is answered stop.  Rank 0 then waits for the workers it has not
**     stopped, at most LSIM__GRACE_S plus twice the longest cell after the
**     last report (a dead rank never asks again), and merges.
**  4. A worker waits at most LSIM__REPLY_WAIT_S for each reply; rank 0
**     answers in microseconds while it dispatches, so a longer silence
**     means rank 0 died or finished without it: the worker stops, status 1.
**
** What a failure costs (docs/SWEEP.md; tests/sweep_mpi.sh shows each):
** under `mpirun --enable-recovery` a worker rank killed mid-sweep loses no
** cell (invariant 2).  Without that flag Open MPI 4.1 aborts the whole job
** when a rank dies; every cell finished by then is on disk, and the same
** command with --resume runs the rest.  Rank 0 dying ends the dispatch:
** --resume again.
**
** Waiting: a blocking MPI_Recv in Open MPI spins a core.  Rank 0 and a
** worker waiting for its reply poll (MPI_Iprobe / MPI_Test) and sleep
** LSIM__POLL_NS between polls, so `-np 3` on two cores leaves both cores to
** the two workers.  The clock (MPI_Wtime) decides only when to give up
** waiting and when to print progress, never what a cell writes.
*/
#include "sweep_mpi.h"
#include "sweep.h"

#include <errno.h>
#include <mpi.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "escape.h"

enum { LSIM__TAG_ASK = 1, LSIM__TAG_WORK = 2 };

#define LSIM__STOP (-1)          /* WORK cell: stop */
#define LSIM__NONE (-1)          /* ASK cell: nothing finished yet */
#define LSIM__SKIPPED 1          /* ASK rc: the cell was done already */
#define LSIM__WF_SKIP_DONE 1     /* WORK flag: check done first */
#define LSIM__POLL_NS 1000000L   /* 1 ms between polls */
#define LSIM__LOCKED_PAUSE_MS 250 /* first pause after E_OUT_LOCKED */
#define LSIM__LOCKED_PAUSE_MAX_MS 1000 /* below LSIM__GRACE_S */
#define LSIM__GRACE_S 2.0
#define LSIM__REPLY_WAIT_S 60.0

enum { LSIM__TODO = 0, LSIM__HELD, LSIM__DONE, LSIM__FAILED };

void lsim_sweep_mpi_describe(char *out, size_t n) {
  /* Callable before MPI_Init (MPI 3.0); it starts nothing. */
  char lib[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  if (MPI_Get_library_version(lib, &len) != MPI_SUCCESS || len <= 0)
    snprintf(lib, sizeof lib, "unknown MPI library");
  lib[strcspn(lib, ",\n")] = '\0'; /* "Open MPI v4.1.4, package: ..." */
  snprintf(out, n, "built with %s (lorasim sweep --mpi)", lib);
}

static void lsim__nap_ns(long ns) {
  struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

/* ---- the test hook ------------------------------------------------------ */

/* LSIM_SWEEP_TEST_DIE_AFTER=K: a test hook (docs/SWEEP.md, "MPI"): worker
** rank LSIM_SWEEP_TEST_DIE_RANK (default 1) finishes K cells, is handed the
** next one and kills itself with SIGKILL before running it, as a rank
** whose node is lost would, holding a cell nobody else has.  Read only by
** the MPI worker loop; it changes no output. */
static int64_t lsim__die_after(int rank) {
  const char *k = getenv("LSIM_SWEEP_TEST_DIE_AFTER");
  if (!k || !*k)
    return -1;
  const char *r = getenv("LSIM_SWEEP_TEST_DIE_RANK");
  long want = r && *r ? strtol(r, NULL, 10) : 1;
  if (want != rank)
    return -1;
  long v = strtol(k, NULL, 10);
  return v >= 0 ? v : -1;
}

/* ---- running a cell -------------------------------------------------------- */

/* The progress counts of rank 0 (as the -j pool's: done counts the cells
** this run finished, ok or failed; skipped those done before). */
typedef struct lsim__tally {
  int64_t done, failed, skipped, total;
  double t0;
  int quiet;
} lsim__tally;

static void lsim__progress(const lsim__tally *t, const lsim_sweep *s,
                           int64_t cell, int rank) {
  if (t->quiet)
    return;
  char line[256], label[256];
  lsim_sweep_progress_line(line, sizeof line, t->done, t->failed, t->skipped,
                           t->total, MPI_Wtime() - t->t0);
  lsim_sweep_cell_label(s, cell, label, sizeof label);
  fprintf(stderr, "%s (%s, rank %d)\n", line, label, rank);
  fflush(stderr);
}

/* Run one cell on this rank: 0, LSIM__SKIPPED (skip_done and the cell was
** done), or its error, printed here unless it is E_OUT_LOCKED (another rank
** holds the cell) or E_INTERRUPTED. */
static int64_t lsim__run_one(lsim_sweep *s, int64_t cell, int skip_done,
                             int rank) {
  if (skip_done && lsim_sweep_cell_done(s, cell))
    return LSIM__SKIPPED;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_err rc = lsim_sweep_run_cell(s, cell, &eb);
  if (rc && rc != LSIM_E_OUT_LOCKED && rc != LSIM_E_INTERRUPTED) {
    char label[256], shown[LSIM_ESC_SIZE(sizeof eb.msg)];
    lsim_sweep_cell_label(s, cell, label, sizeof label);
    fprintf(stderr, "lorasim sweep: rank %d: %s: error: %s: %s\n", rank,
            label, lsim_err_name(rc),
            lsim_console_str(shown, sizeof shown, eb.msg));
  }
  return rc;
}

/* One rank alone (mpirun -np 1, or a singleton): every cell in order. */
static int lsim__alone(lsim_sweep *s, const lsim_sweep_run_opts *o,
                       lsim__tally *t) {
  for (int64_t c = 0; c < t->total; c++) {
    if (*o->stop)
      return 130;
    int64_t rc = lsim__run_one(s, c, o->resume, 0);
    if (rc == LSIM_E_INTERRUPTED)
      return 130;
    if (rc == LSIM__SKIPPED) {
      t->skipped++;
      continue;
    }
    t->done++;
    t->failed += rc != 0;
    lsim__progress(t, s, c, 0);
  }
  return t->failed ? 1 : 0;
}

/* ---- rank 0: dispatch ---------------------------------------------------- */

typedef struct lsim__disp {
  int64_t ncells;
  int nranks;
  unsigned char *state;   /* per cell: LSIM__TODO ... */
  int64_t *held;          /* per rank: the cell it was last given, or -1 */
  double *given_at;       /* per rank: when (MPI_Wtime), or -1 */
  unsigned char *stopped; /* per rank: answered stop */
  int64_t next;           /* first cell the first pass has not handed out */
  int64_t open;           /* cells neither DONE nor FAILED */
  int rr;                 /* round robin over the ranks (invariant 2) */
  int nstopped;
  int skip_done;          /* --resume */
  double longest;         /* the longest cell run seen, seconds */
} lsim__disp;

/* The next cell for rank r: a TODO cell, else a HELD cell of another rank
** (with LSIM__WF_SKIP_DONE), else LSIM__STOP.  *flags gets the flags. */
static int64_t lsim__pick(lsim__disp *d, int r, int64_t *flags) {
  *flags = d->skip_done ? LSIM__WF_SKIP_DONE : 0;
  while (d->next < d->ncells && d->state[d->next] != LSIM__TODO)
    d->next++;
  if (d->next < d->ncells)
    return d->next++;
  for (int i = 1; i <= d->nranks; i++) {
    int q = (d->rr + i) % d->nranks;
    int64_t c = d->held[q];
    if (q != r && c >= 0 && d->state[c] == LSIM__HELD) {
      d->rr = q;
      *flags = LSIM__WF_SKIP_DONE;
      return c;
    }
  }
  return LSIM__STOP;
}

/* Record rank r's report {cell, rc}. */
static void lsim__report(lsim__disp *d, lsim__tally *t, const lsim_sweep *s,
                         int r, int64_t cell, int64_t rc) {
  if (cell < 0 || cell >= d->ncells)
    return;
  if (rc != LSIM_E_OUT_LOCKED && rc != LSIM__SKIPPED &&
      d->given_at[r] >= 0 && MPI_Wtime() - d->given_at[r] > d->longest)
    d->longest = MPI_Wtime() - d->given_at[r];
  unsigned char *cs = &d->state[cell];
  if (rc == 0 || rc == LSIM__SKIPPED) {
    if (*cs == LSIM__DONE)
      return; /* a duplicate's report */
    if (*cs == LSIM__FAILED) {
      t->done--;
      t->failed--;
    } else {
      d->open--;
    }
    *cs = LSIM__DONE;
    if (rc == 0)
      t->done++;
    else
      t->skipped++;
  } else if (rc == LSIM_E_OUT_LOCKED || rc == LSIM_E_INTERRUPTED) {
    return; /* still HELD: its holder, or another rank later, runs it */
  } else if (*cs == LSIM__HELD) {
    *cs = LSIM__FAILED; /* the worker printed why; a rerun would fail too */
    d->open--;
    t->done++;
    t->failed++;
  } else {
    return;
  }
  lsim__progress(t, s, cell, r);
}

/* Rank 0's loop (invariants 1-3).  Returns 0, 1 (out of memory) or 130
** (interrupted). */
static int lsim__dispatch(lsim_sweep *s, const lsim_sweep_run_opts *o,
                          int nranks, lsim__tally *t) {
  lsim__disp d;
  memset(&d, 0, sizeof d);
  d.ncells = t->total;
  d.nranks = nranks;
  d.skip_done = o->resume;
  d.open = d.ncells;
  /* ncells <= LSIM_SWEEP_MAX_CELLS and nranks is the job's: both bounded */
  d.state = calloc((size_t)d.ncells + 1, 1);
  d.held = malloc(sizeof *d.held * (size_t)nranks);
  d.given_at = malloc(sizeof *d.given_at * (size_t)nranks);
  d.stopped = calloc((size_t)nranks, 1);
  if (!d.state || !d.held || !d.given_at || !d.stopped) {
    free(d.state);
    free(d.held);
    free(d.given_at);
    free(d.stopped);
    lsim_cli_fail("sweep", LSIM_E_NOMEM, "rank 0: out of memory");
    return 1; /* the workers wait LSIM__REPLY_WAIT_S and stop */
  }
  for (int r = 0; r < nranks; r++) {
    d.held[r] = -1;
    d.given_at[r] = -1.0;
  }
  d.stopped[0] = 1;
  d.nstopped = 1;
  int status = 0, stopping = 0;
  double settled = -1.0; /* when the last cell was settled, or the stop */
  if (d.open == 0)
    settled = MPI_Wtime();
  while (d.nstopped < nranks) {
    if (!stopping && *o->stop) {
      stopping = 1;
      status = 130;
      settled = MPI_Wtime();
    }
    if (settled >= 0 && MPI_Wtime() - settled > LSIM__GRACE_S + 2 * d.longest)
      break; /* the ranks not stopped are dead (invariant 3) */
    int flag = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, LSIM__TAG_ASK, MPI_COMM_WORLD, &flag,
                   &st) != MPI_SUCCESS || !flag) {
      lsim__nap_ns(LSIM__POLL_NS);
      continue;
    }
    int64_t ask[2];
    int r = st.MPI_SOURCE;
    if (MPI_Recv(ask, 2, MPI_INT64_T, r, LSIM__TAG_ASK, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE) != MPI_SUCCESS || r <= 0 || r >= nranks)
      continue;
    lsim__report(&d, t, s, r, ask[0], ask[1]);
    if (d.open == 0 && settled < 0)
      settled = MPI_Wtime();
    int64_t work[2] = {LSIM__STOP, 0};
    if (!stopping && ask[1] != LSIM_E_INTERRUPTED && d.open > 0)
      work[0] = lsim__pick(&d, r, &work[1]);
    if (work[0] >= 0) {
      if (d.state[work[0]] == LSIM__TODO)
        d.state[work[0]] = LSIM__HELD;
      d.held[r] = work[0];
      d.given_at[r] = MPI_Wtime();
    } else if (!d.stopped[r]) {
      d.stopped[r] = 1;
      d.nstopped++;
    }
    /* 16 bytes go eagerly: a worker that died after asking costs nothing
    ** here, and with MPI_ERRORS_RETURN a failed send is only reported */
    if (MPI_Send(work, 2, MPI_INT64_T, r, LSIM__TAG_WORK, MPI_COMM_WORLD) !=
        MPI_SUCCESS)
      fprintf(stderr, "lorasim sweep: rank 0: cannot answer rank %d\n", r);
  }
  if (d.nstopped < nranks) {
    fprintf(stderr, "lorasim sweep: rank 0: %d rank(s) never asked again "
                    "(dead or stuck):", nranks - d.nstopped);
    for (int r = 1; r < nranks; r++)
      if (!d.stopped[r])
        fprintf(stderr, " %d", r);
    fputc('\n', stderr);
  }
  free(d.state);
  free(d.held);
  free(d.given_at);
  free(d.stopped);
  return status;
}

/* ---- ranks 1..N-1: work --------------------------------------------------- */

/* Send ask, wait for the reply into work[2]: 0, or -1 when rank 0 is silent
** past LSIM__REPLY_WAIT_S (invariant 4). */
static int lsim__ask(const int64_t ask[2], int64_t work[2]) {
  if (MPI_Send(ask, 2, MPI_INT64_T, 0, LSIM__TAG_ASK, MPI_COMM_WORLD) !=
      MPI_SUCCESS)
    return -1;
  MPI_Request rq;
  if (MPI_Irecv(work, 2, MPI_INT64_T, 0, LSIM__TAG_WORK, MPI_COMM_WORLD,
                &rq) != MPI_SUCCESS)
    return -1;
  double t0 = MPI_Wtime();
  for (;;) {
    int flag = 0;
    if (MPI_Test(&rq, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS)
      return -1;
    if (flag)
      return 0;
    if (MPI_Wtime() - t0 > LSIM__REPLY_WAIT_S) {
      MPI_Cancel(&rq);
      MPI_Wait(&rq, MPI_STATUS_IGNORE);
      return -1;
    }
    lsim__nap_ns(LSIM__POLL_NS);
  }
}

/* A worker's loop: ask, run, report.  Returns its exit status. */
static int lsim__work(lsim_sweep *s, const lsim_sweep_run_opts *o, int rank) {
  int64_t die_after = lsim__die_after(rank), ran = 0;
  int64_t ask[2] = {LSIM__NONE, 0}, work[2];
  long pause_ms = LSIM__LOCKED_PAUSE_MS;
  for (;;) {
    if (lsim__ask(ask, work) != 0) {
      fprintf(stderr, "lorasim sweep: rank %d: rank 0 did not answer within "
                      "%.0f s (it died, or finished without this rank); "
                      "stopping\n", rank, LSIM__REPLY_WAIT_S);
      return 1;
    }
    if (ask[1] == LSIM_E_INTERRUPTED)
      return 130;
    if (work[0] < 0)
      return 0;
    if (die_after >= 0 && ran >= die_after) {
      fflush(NULL);
      raise(SIGKILL); /* the test hook above */
    }
    ask[0] = work[0];
    ask[1] = *o->stop ? LSIM_E_INTERRUPTED
                      : lsim__run_one(s, work[0],
                                      (int)(work[1] & LSIM__WF_SKIP_DONE), rank);
    if (ask[1] == LSIM_E_OUT_LOCKED) {
      /* its holder is alive and running it (invariant 2) */
      lsim__nap_ns(pause_ms * 1000000L);
      if (pause_ms < LSIM__LOCKED_PAUSE_MAX_MS)
        pause_ms *= 2;
    } else {
      pause_ms = LSIM__LOCKED_PAUSE_MS;
      ran++;
    }
  }
}

/* ---- the driver ------------------------------------------------------------ */

/* Rank 0's end, as the -j pool's: merge what is done (the failed cells
** left out, status 1), unless interrupted. */
static int lsim__finish(lsim_sweep *s, const lsim_sweep_run_opts *o,
                        const lsim__tally *t, int st) {
  if (st == 130) {
    fprintf(stderr, "lorasim sweep: interrupted; rerun with --resume to "
                    "finish\n");
    return st;
  }
  if (t->failed)
    fprintf(stderr, "lorasim sweep: %lld of %lld cells failed (each "
            "database says why in runs.error); rerun them with --resume\n",
            (long long)t->failed, (long long)t->total);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  int64_t missing = 0;
  lsim_err rc = lsim_sweep_merge(s, 1, &missing, &eb);
  if (rc) {
    int st2 = lsim_cli_fail("sweep", rc, eb.msg);
    return st ? st : st2;
  }
  if (missing > t->failed) {
    /* the workers said ok, but rank 0 does not see the databases */
    char m[256];
    snprintf(m, sizeof m, "%lld cells reported done are not complete in the "
             "output directory as rank 0 sees it (do all ranks share it?)",
             (long long)(missing - t->failed));
    int st2 = lsim_cli_fail("sweep", LSIM_E_SWEEP_MISSING, m);
    return st ? st : st2;
  }
  if (!o->quiet) {
    char shown[LSIM_ESC_SIZE(1100)];
    printf("sweep: %lld cells%s; merged into %s/sweep.{csv,db} and "
           "sweep-stats.csv\n",
           (long long)t->total,
           missing ? " (some failed: merged without them)" : "",
           lsim_console_str(shown, sizeof shown, lsim_sweep_out_dir(s)));
  }
  return st;
}

/* MPI_Finalize ends with a fence over every rank of the job; when a rank
** has died (the case invariant 2 recovers from under --enable-recovery) the
** survivors' fence can wait for it forever (seen about one run in six with
** Open MPI 4.1).  The sweep's work is on disk and merged by then, so a
** finalize that takes longer than LSIM__FINALIZE_S ends the process with
** the status it was going to return. */
#define LSIM__FINALIZE_S 10
static volatile sig_atomic_t lsim__final_status;

static void lsim__finalize_late(int sig) {
  (void)sig;
  _exit(lsim__final_status);
}

static void lsim__finalize(int st) {
  fflush(NULL);
  lsim__final_status = st;
  signal(SIGALRM, lsim__finalize_late);
  alarm(LSIM__FINALIZE_S);
  MPI_Finalize();
  alarm(0);
  signal(SIGALRM, SIG_DFL);
}

int lsim_sweep_mpi_main(lsim_sweep *s, const lsim_sweep_run_opts *o) {
  int argc = 0;
  char **argv = NULL;
  if (MPI_Init(&argc, &argv) != MPI_SUCCESS)
    return lsim_cli_fail("sweep", LSIM_E_IO, "--mpi: MPI_Init failed");
  /* A lost peer is reported, not fatal to this rank (invariants 2-4). */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, nranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  int st;
  if (rank == 0) {
    /* the command has prepared the output directory (sweep.h) */
    lsim__tally t = {0, 0, 0, lsim_sweep_ncells(s), MPI_Wtime(), o->quiet};
    if (!o->quiet)
      fprintf(stderr, "sweep: %lld cells on %d MPI rank(s)%s\n",
              (long long)t.total, nranks,
              nranks > 1 ? ", rank 0 dispatching" : "");
    st = nranks == 1 ? lsim__alone(s, o, &t)
                     : lsim__dispatch(s, o, nranks, &t);
    st = lsim__finish(s, o, &t, st);
  } else {
    st = lsim__work(s, o, rank);
  }
  lsim__finalize(st);
  return st;
}
