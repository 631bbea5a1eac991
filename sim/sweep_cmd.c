/*
** sweep_cmd.c: the `lorasim sweep` command (docs/SWEEP.md): run a grid's
** cells on N local worker processes, one cell (--cell, a Slurm array
** task), or over MPI (--mpi, sim/sweep_mpi.c), and merge.
**
** Workers.  Each cell runs in a child process forked for it, at most N at
** once; the child calls lsim_sweep_run_cell and exits with the cell's exit
** status, its error line (if any) sent back through a pipe so that the
** parent prints it between its progress lines.  The parent holds no SQLite
** connection across a fork (it opens and closes each cell's database to
** check it).  A cell's rows do not depend on which process ran it or when:
** the replay is a pure function of the cell's scenario and seed.
**
** Wall time is read here only for the progress line (elapsed and ETA); it
** reaches no file.
*/
#include "sweep.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "escape.h"
#include "scenario.h"

#define LSIM__MAX_JOBS 256

static volatile sig_atomic_t lsim__sweep_stop = 0;

static void lsim__sweep_on_signal(int sig) {
  (void)sig;
  lsim__sweep_stop = 1;
}

static double lsim__now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void lsim__usage(FILE *f) {
  fputs(
      "usage: lorasim sweep GRID.json [-j N] [--out DIR] [--resume]\n"
      "                     [--set PATH=VALUE]... [--quiet]\n"
      "       lorasim sweep GRID.json --cell I [--out DIR] [--resume]\n"
      "       lorasim sweep GRID.json --list [--out DIR]\n"
      "       lorasim sweep GRID.json --mpi [--out DIR] [--resume]\n"
      "       lorasim sweep merge DIR [--allow-partial]\n"
      "\n"
      "Run a grid of replays: a base scenario, axes (JSON paths and their\n"
      "values), seeds (docs/SWEEP.md).  Each cell (one combination, one\n"
      "seed) is an ordinary replay into DIR/cells/NNNN.db; then the cells'\n"
      "figures are merged into DIR/sweep.csv (one row per cell, tenant and\n"
      "figure), DIR/sweep-stats.csv (mean and 95%% confidence interval over\n"
      "the seeds) and DIR/sweep.db (both, and the cells).\n"
      "\n"
      "options:\n"
      "  -j, --jobs N       run N cells at once, each in its own process\n"
      "                     (default 1)\n"
      "  --out DIR          output directory (default results/sweep-NAME)\n"
      "  --resume           skip the cells whose database is complete and\n"
      "                     matches the cell (scenario, seed, edits, inputs)\n"
      "  --set PATH=VALUE   edit the base scenario for every cell (as replay\n"
      "                     --set; a path an axis sets is refused)\n"
      "  --cell I           run cell I only (a Slurm array task: --cell\n"
      "                     $SLURM_ARRAY_TASK_ID), no merge\n"
      "  --list             print the cells, whether each is done, and the\n"
      "                     replay each one is; run nothing\n"
      "  --mpi              run the cells over MPI ranks (mpirun)\n"
      "  --quiet            no progress lines\n"
      "  --allow-partial    (merge) merge the done cells even when some are\n"
      "                     missing\n"
      "  -h, --help         this text\n"
      "\n"
      "exit status: 0 ok, 1 a cell failed or cells are missing, 2 bad usage\n"
      "or input, 130 interrupted\n",
      f);
}

/* A running child. */
typedef struct lsim__child {
  pid_t pid;
  int64_t cell;
  int fd; /* read end of its error pipe */
} lsim__child;

static void lsim__progress(const lsim_sweep_run_opts *o, int64_t done,
                           int64_t failed, int64_t skipped, int64_t total,
                           double t0, const char *what) {
  if (o->quiet)
    return;
  char line[256];
  lsim_sweep_progress_line(line, sizeof line, done, failed, skipped, total,
                           lsim__now() - t0);
  fprintf(stderr, "%s (%s)\n", line, what);
  fflush(stderr);
}

/* Run every cell not done (all of them without --resume) on o->jobs
** children.  Returns the exit status: 0, 1 (a cell failed), 130. */
static int lsim__pool(lsim_sweep *s, const lsim_sweep_run_opts *o) {
  int64_t n = lsim_sweep_ncells(s), skipped = 0, done = 0, failed = 0;
  int64_t next = 0;
  lsim__child kids[LSIM__MAX_JOBS];
  int nk = 0, st = 0;
  double t0 = lsim__now();
  /* with --resume, which cells are done: checked once, before any runs */
  unsigned char *done_before = o->resume ? calloc((size_t)n, 1) : NULL;
  if (o->resume && !done_before)
    return lsim_cli_fail("sweep", LSIM_E_NOMEM, "out of memory");
  for (int64_t c = 0; o->resume && c < n; c++)
    skipped += done_before[c] = (unsigned char)lsim_sweep_cell_done(s, c);
  for (;;) {
    /* start cells while there is room */
    while (nk < o->jobs && next < n && !*o->stop) {
      int64_t c = next++;
      if (done_before && done_before[c])
        continue;
      int fds[2];
      if (pipe(fds) != 0) {
        lsim_cli_fail("sweep", LSIM_E_IO, "cannot create a pipe");
        *o->stop = 1;
        st = 1;
        break;
      }
      fflush(NULL);
      pid_t pid = fork();
      if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        lsim_cli_fail("sweep", LSIM_E_IO, "cannot fork a worker");
        *o->stop = 1;
        st = 1;
        break;
      }
      if (pid == 0) {
        close(fds[0]);
        lsim_errbuf eb = LSIM_ERRBUF_INIT;
        lsim_err rc = lsim_sweep_run_cell(s, c, &eb);
        if (rc) {
          char line[sizeof eb.msg + 64];
          int len = snprintf(line, sizeof line, "%s: %s", lsim_err_name(rc),
                             eb.msg);
          if (len > 0 && write(fds[1], line, (size_t)len) < 0) {
            /* the exit status still says that it failed */
          }
        }
        close(fds[1]);
        _exit(lsim_cli_status(rc));
      }
      close(fds[1]);
      kids[nk++] = (lsim__child){pid, c, fds[0]};
    }
    if (nk == 0)
      break;
    int wst = 0;
    pid_t pid = waitpid(-1, &wst, 0);
    if (pid < 0) {
      if (errno == EINTR) {
        for (int i = 0; i < nk && *o->stop; i++)
          kill(kids[i].pid, SIGINT); /* the stop reaches every cell */
        continue;
      }
      lsim_cli_fail("sweep", LSIM_E_BUG, "waitpid failed");
      free(done_before);
      return 1;
    }
    int i = 0;
    while (i < nk && kids[i].pid != pid)
      i++;
    if (i == nk)
      continue;
    lsim__child k = kids[i];
    kids[i] = kids[--nk];
    char msg[700] = "";
    ssize_t got = read(k.fd, msg, sizeof msg - 1);
    msg[got > 0 ? got : 0] = '\0';
    close(k.fd);
    int code = WIFEXITED(wst) ? WEXITSTATUS(wst) : 1;
    char label[256];
    lsim_sweep_cell_label(s, k.cell, label, sizeof label);
    if (code == 130 || (*o->stop && code != 0)) {
      st = 130;
      continue; /* interrupted: not done, not failed */
    }
    done++;
    if (code != 0) {
      failed++;
      if (st == 0)
        st = 1;
      char shown[LSIM_ESC_SIZE(700)];
      fprintf(stderr, "lorasim sweep: %s: error: %s\n", label,
              msg[0] ? lsim_console_str(shown, sizeof shown, msg)
                     : "the worker died");
    }
    lsim__progress(o, done, failed, skipped, n, t0, label);
  }
  free(done_before);
  if (*o->stop)
    return 130;
  if (failed) {
    char m[200];
    snprintf(m, sizeof m, "%lld of %lld cells failed (each database says "
             "why in runs.error); rerun them with --resume",
             (long long)failed, (long long)n);
    lsim_cli_fail("sweep", LSIM_E_SWEEP_CELL_FAILED, m);
  }
  return st;
}

static int lsim__merge_cmd(int argc, char **argv) {
  enum { O_PARTIAL = 256 };
  static const struct option opts[] = {
      {"allow-partial", no_argument, NULL, O_PARTIAL},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  int partial = 0, c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case O_PARTIAL: partial = 1; break;
    case 'h': lsim__usage(stdout); return 0;
    default: lsim__usage(stderr); return 2;
    }
  }
  if (optind != argc - 1)
    return lsim_cli_fail("sweep", LSIM_E_USAGE,
                         "merge takes one directory: lorasim sweep merge DIR");
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_sweep *s = NULL;
  lsim_err rc = lsim_sweep_load_dir(argv[optind], &s, &eb);
  if (rc)
    return lsim_cli_fail("sweep", rc, eb.msg);
  int64_t missing = 0;
  rc = lsim_sweep_merge(s, partial, &missing, &eb);
  int st = 0;
  char shown[LSIM_ESC_SIZE(1100)];
  if (rc) {
    st = lsim_cli_fail("sweep", rc, eb.msg);
  } else {
    printf("merged %lld of %lld cells into %s/sweep.{csv,db} and "
           "sweep-stats.csv\n",
           (long long)(lsim_sweep_ncells(s) - missing),
           (long long)lsim_sweep_ncells(s),
           lsim_console_str(shown, sizeof shown, lsim_sweep_out_dir(s)));
    if (missing)
      fprintf(stderr, "lorasim sweep: %lld cells missing (merged without "
              "them: --allow-partial)\n", (long long)missing);
  }
  lsim_sweep_release(s);
  return st;
}

static int lsim__parse_i64(const char *s, int64_t lo, int64_t hi,
                           int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (!*s || *end || errno || v < lo || v > hi)
    return -1;
  *out = v;
  return 0;
}

/* --mpi in a build without MPI is refused before anything is created. */
static int lsim__have_mpi(void) {
#ifdef LSIM_HAVE_MPI
  return 1;
#else
  fprintf(stderr, "lorasim sweep: error: E_USAGE: this lorasim was built "
                  "without MPI (--mpi needs an MPI compiler at configure "
                  "time)\n");
  return 0;
#endif
}

int lsim_sweep_main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "merge") == 0)
    return lsim__merge_cmd(argc - 1, argv + 1);
  enum { O_OUT = 256, O_RESUME, O_SET, O_CELL, O_LIST, O_MPI, O_QUIET };
  static const struct option opts[] = {
      {"jobs", required_argument, NULL, 'j'},
      {"out", required_argument, NULL, O_OUT},
      {"resume", no_argument, NULL, O_RESUME},
      {"set", required_argument, NULL, O_SET},
      {"cell", required_argument, NULL, O_CELL},
      {"list", no_argument, NULL, O_LIST},
      {"mpi", no_argument, NULL, O_MPI},
      {"quiet", no_argument, NULL, O_QUIET},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  const char *out = NULL, *cell_s = NULL;
  const char *sets[LSIM_SCENARIO_MAX_SETS];
  int nsets = 0, resume = 0, list = 0, mpi = 0, quiet = 0, c;
  int64_t jobs = 1, cell = -1;
  optind = 1;
  while ((c = getopt_long(argc, argv, "hj:", opts, NULL)) != -1) {
    switch (c) {
    case 'j':
      if (lsim__parse_i64(optarg, 1, LSIM__MAX_JOBS, &jobs))
        return lsim_cli_fail("sweep", LSIM_E_USAGE,
                             "-j takes an integer in [1, 256]");
      break;
    case O_OUT: out = optarg; break;
    case O_RESUME: resume = 1; break;
    case O_SET:
      if (nsets == LSIM_SCENARIO_MAX_SETS)
        return lsim_cli_fail("sweep", LSIM_E_USAGE, "too many --set");
      sets[nsets++] = optarg;
      break;
    case O_CELL: cell_s = optarg; break;
    case O_LIST: list = 1; break;
    case O_MPI: mpi = 1; break;
    case O_QUIET: quiet = 1; break;
    case 'h': lsim__usage(stdout); return 0;
    default: lsim__usage(stderr); return 2;
    }
  }
  if (optind != argc - 1) {
    lsim_cli_fail("sweep", LSIM_E_USAGE, "expected exactly one grid file");
    lsim__usage(stderr);
    return 2;
  }
  if (list + mpi + !!cell_s > 1)
    return lsim_cli_fail("sweep", LSIM_E_USAGE,
                         "--cell, --list and --mpi exclude each other");
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_sweep *s = NULL;
  lsim_err rc = lsim_sweep_load(argv[optind], out, nsets, sets, &s, &eb);
  if (rc)
    return lsim_cli_fail("sweep", rc, eb.msg);
  int64_t n = lsim_sweep_ncells(s);
  if (cell_s && lsim__parse_i64(cell_s, 0, n - 1, &cell)) {
    char m[128];
    snprintf(m, sizeof m, "--cell takes a cell index in [0, %lld]",
             (long long)n - 1);
    lsim_sweep_release(s);
    return lsim_cli_fail("sweep", LSIM_E_USAGE, m);
  }
  int st = 0;
  if (list) {
    for (int64_t i = 0; i < n; i++) {
      char label[512], path[1200], shown[LSIM_ESC_SIZE(1200)];
      lsim_sweep_cell_label(s, i, label, sizeof label);
      lsim_sweep_cell_path(s, i, path, sizeof path);
      printf("%s %s %s\n", label,
             lsim_sweep_cell_done(s, i) ? "done" : "todo",
             lsim_console_str(shown, sizeof shown, path));
    }
    lsim_sweep_release(s);
    return 0;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = lsim__sweep_on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  lsim_sweep_set_stop(s, &lsim__sweep_stop);
  lsim_sweep_run_opts o = {(int)jobs, resume, quiet, &lsim__sweep_stop};
  if ((mpi && !lsim__have_mpi()) || (rc = lsim_sweep_prepare(s, &eb))) {
    st = mpi ? 2 : lsim_cli_fail("sweep", rc, eb.msg);
    lsim_sweep_release(s);
    return st;
  }
  if (mpi) {
#ifdef LSIM_HAVE_MPI
    st = lsim_sweep_mpi_main(s, &o);
#endif
    lsim_sweep_release(s);
    return st;
  }
  char label[512];
  if (cell >= 0) {
    lsim_sweep_cell_label(s, cell, label, sizeof label);
    if (resume && lsim_sweep_cell_done(s, cell)) {
      if (!quiet)
        fprintf(stderr, "sweep: %s done before\n", label);
    } else if ((rc = lsim_sweep_run_cell(s, cell, &eb))) {
      char shown[LSIM_ESC_SIZE(600)];
      fprintf(stderr, "lorasim sweep: %s: error: %s: %s\n", label,
              lsim_err_name(rc), lsim_console_str(shown, sizeof shown, eb.msg));
      st = lsim_cli_status(rc);
    } else if (!quiet) {
      fprintf(stderr, "sweep: %s ok\n", label);
    }
    lsim_sweep_release(s);
    return st;
  }
  st = lsim__pool(s, &o);
  if (st != 130) {
    int64_t missing = 0;
    rc = lsim_sweep_merge(s, 1, &missing, &eb);
    if (rc) {
      int st2 = lsim_cli_fail("sweep", rc, eb.msg);
      st = st ? st : st2;
    } else if (!quiet) {
      char shown[LSIM_ESC_SIZE(1100)];
      printf("sweep: %lld cells%s; merged into %s/sweep.{csv,db} and "
             "sweep-stats.csv\n",
             (long long)n, missing ? " (some failed: merged without them)"
                                   : "",
             lsim_console_str(shown, sizeof shown, lsim_sweep_out_dir(s)));
    }
  } else {
    fprintf(stderr, "lorasim sweep: interrupted; rerun with --resume to "
                    "finish\n");
  }
  lsim_sweep_release(s);
  return st;
}
