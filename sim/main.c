/*
** main.c: the lorasim command line.
**
**   lorasim replay SCENARIO.json [options]   replay a scenario
**   lorasim compare SCENARIO.json --schedulers A,B,...   one table
**   lorasim sweep GRID.json [-j N] | merge DIR  a grid of replays (sweep.c)
**   lorasim bench kernels [options]          the CUDA kernel benchmark
**   lorasim compress --in COLLECTION.json --out BUNDLE.json  (compress_cmd.c)
**   lorasim help [COMMAND]                   usage
**   lorasim version                          version and build
**
** Exit status: 0 success, 1 a run that failed (a write that failed, stdout
** included), 2 bad usage or bad input (scenario, trace, an output path
** refused), 130 interrupted by SIGINT.
*/
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../backends/backend.h"
#include "../backends/shape.h"
#include "../engine/policy/policy.h"
#include "audit.h"
#include "cli.h"
#include "calibrate.h"
#include "profile_cmd.h"
#include "compare.h"
#include "compress_cmd.h"
#include "exec.h"
#include "fidelity.h"
#include "outfile.h"
#include "prefix_report.h"
#include "trace_cmd.h"
#include "replay.h"
#include "resume.h"
#include "runid.h"
#include "scenario.h"
#include "sweep.h"
#ifdef LSIM_HAVE_MPI
#include "sweep_mpi.h"
#endif
#ifdef LSIM_HAVE_CUDA
#include "../backends/cuda/cuda.h"
#endif

static volatile sig_atomic_t lsim__stop = 0;

static void lsim__on_sigint(int sig) {
  (void)sig;
  lsim__stop = 1;
}

/* SIGINT and SIGTERM ask the run to stop at the next event. */
static void lsim__on_signals(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = lsim__on_sigint;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
}

static void lsim__names(FILE *f, const char *what, const char *const *names) {
  fprintf(f, "  %-10s", what);
  for (int i = 0; names[i]; i++)
    fprintf(f, "%s%s", i ? ", " : "", names[i]);
  fputc('\n', f);
}

static void lsim__usage_replay(FILE *f) {
  fputs(
      "usage: lorasim replay SCENARIO.json [options]\n"
      "       lorasim replay --resume DB [--quiet] [--no-plots]\n"
      "\n"
      "Replay the scenario's trace through the engine, log every publication\n"
      "event to a new SQLite database and print a summary.\n"
      "\n"
      "options:\n"
      "  --db PATH          database to write (a regular file there is\n"
      "                     replaced; a link or device node is refused;\n"
      "                     its directory must exist);\n"
      "                     default results/NAME-seedSEED.db\n"
      "  --seed N           override the scenario seed\n"
      "  --scheduler NAME   override the scheduler policy\n"
      "  --evict NAME       override the eviction policy\n"
      "  --prefetch NAME    override the prefetch policy\n"
      "  --backend NAME     override the execution backend\n"
      "  --set PATH=VALUE   set one scenario key before validation, e.g.\n"
      "                     --set '$.workers.pool_pages=512' or\n"
      "                     --set '$.tenants[1].name=\"bulk\"' (VALUE is JSON; a\n"
      "                     bare word is a string); repeatable, applied in\n"
      "                     order, recorded for --resume (docs/SCENARIO.md)\n"
      "  --no-plots         do not write gnuplot PNGs\n"
      "  --summary-only     do not write the events and iterations rows\n"
      "                     (the summary, requests, tenant and starvation\n"
      "                     rows are written as always): for traces of tens\n"
      "                     of millions of requests (docs/TRACES.md)\n"
      "  --quiet            no summary and no progress line\n"
      "  --json PATH        also write the summary as JSON: every printed\n"
      "                     figure, per tenant too (docs/SCHEMA.md)\n"
      "  --skip-bad-rows    count and skip malformed trace rows instead of\n"
      "                     failing (reported in the summary)\n"
      "  --verify cpu_ref   with --backend cuda: compare every iteration with\n"
      "                     the exact reference (validations table)\n"
      "  --tensor-shape S   with --backend cuda: 'small' (default) runs one\n"
      "                     16x16 module per iteration, exactly verified;\n"
      "                     'model' runs every layer and target module at\n"
      "                     the scenario's shapes (docs/CUDA.md)\n"
      "  --tensor-layers N  with --tensor-shape model: run the first N layers\n"
      "                     (env LSIM_CUDA_PATH=decode|sgmv|sgmv_mma|fused|...\n"
      "                     runs one kernel path instead of the chooser's)\n"
      "  --execute MODE     'adapters' (default): the backend runs the adapter\n"
      "                     branch; 'full' (with --backend cuda, on a GPU): a\n"
      "                     whole forward pass per iteration ($.execute)\n"
      "  --clock CLOCK      'model' (default): the cost model times every\n"
      "                     iteration and copy, deterministic; 'measured'\n"
      "                     (with cpu_ref or cuda): the backend's measured\n"
      "                     times do ($.clock; docs/FIDELITY.md)\n"
      "  --clock-from DB    the measured clock with the spans a measured run\n"
      "                     recorded in DB (its iterations and loads): the\n"
      "                     same run again without the GPU, each span also\n"
      "                     priced by this run's cost model (model_ns)\n"
      "  --profile FILE     iteration cost from a cost profile (lorasim\n"
      "                     profile, or lorasim calibrate) instead of $.cost\n"
      "  --resume DB        finish the run recorded in DB (killed or\n"
      "                     interrupted): check the digests of its inputs,\n"
      "                     rerun its scenario, seed, policies and options\n"
      "                     and replace DB once the rerun is ok\n"
      "  -h, --help         this text\n"
      "\n"
      "registered names:\n",
      f);
  lsim__names(f, "scheduler", lsim_sched_names());
  lsim__names(f, "evict", lsim_evict_names());
  lsim__names(f, "prefetch", lsim_prefetch_names());
  lsim__names(f, "backend", lsim_backend_names());
  lsim__names(f, "preset", lsim_shape_preset_names()); /* $.model.preset */
  fputs("\nexit status: 0 ok, 1 run failed, 2 bad usage or input, "
        "130 interrupted\n",
        f);
}

static void lsim__usage(FILE *f) {
  fputs("usage: lorasim COMMAND [options]\n"
        "\n"
        "commands:\n"
        "  replay SCENARIO.json   replay a trace through the simulator\n"
        "  compare SCENARIO.json  run it under several schedulers, one table\n"
        "  sweep GRID.json        a grid of replays (axes x seeds), merged\n"
        "  exec --in BATCH.json   run one batch exactly (plan, delta, Y)\n"
        "  calibrate              fit the cost model to GPU kernel times\n"
        "  profile --model PRESET measure whole forward passes on the GPU and\n"
        "                         write a cost profile (docs/PROFILE.md)\n"
        "  trace convert|stats    import, convert and summarise traces\n"
        "  bench kernels          the CUDA kernel benchmark table (GPU)\n"
        "  prefix                 prefix-cache study: four key modes on a trace\n"
        "  compress --in C.json   shared-basis bundle of an adapter collection\n"
        "  audit DB               audit a run's claims and event log\n"
        "  fidelity DB            the cost model's clock against the measured one\n"
        "  help [COMMAND]         show help for a command\n"
        "  version                print the version and build\n"
        "\n"
        "Run 'lorasim COMMAND --help' for the options of a command.\n",
        f);
}

static int lsim__set_name(char *dst, const char *src, const char *what,
                          int ok, lsim_errbuf *eb) {
  if (!ok) {
    lsim_fail(eb, what[0] == 'b' ? LSIM_E_SCN_BACKEND : LSIM_E_SCN_POLICY,
              "--%s: unknown name '%s' (see lorasim replay --help)", what, src);
    return -1;
  }
  snprintf(dst, LSIM_NAME_MAX, "%s", src);
  return 0;
}

static int lsim__parse_seed(const char *s, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (*s == '-' || end == s || *end || errno)
    return -1;
  *out = v;
  return 0;
}

static int lsim__cmd_replay(int argc, char **argv) {
  enum { O_DB = 256, O_SEED, O_SCHED, O_EVICT, O_PREFETCH, O_BACKEND,
         O_NOPLOTS, O_QUIET, O_VERIFY, O_SKIP, O_PROFILE, O_RESUME,
         O_TSHAPE, O_TLAYERS, O_SET, O_JSON, O_EXECUTE, O_CLOCK, O_CLOCKFROM,
         O_SUMMARY };
  static const struct option opts[] = {
      {"db", required_argument, NULL, O_DB},
      {"seed", required_argument, NULL, O_SEED},
      {"scheduler", required_argument, NULL, O_SCHED},
      {"evict", required_argument, NULL, O_EVICT},
      {"prefetch", required_argument, NULL, O_PREFETCH},
      {"backend", required_argument, NULL, O_BACKEND},
      {"no-plots", no_argument, NULL, O_NOPLOTS},
      {"quiet", no_argument, NULL, O_QUIET},
      {"verify", required_argument, NULL, O_VERIFY},
      {"skip-bad-rows", no_argument, NULL, O_SKIP},
      {"profile", required_argument, NULL, O_PROFILE},
      {"resume", required_argument, NULL, O_RESUME},
      {"tensor-shape", required_argument, NULL, O_TSHAPE},
      {"tensor-layers", required_argument, NULL, O_TLAYERS},
      {"set", required_argument, NULL, O_SET},
      {"json", required_argument, NULL, O_JSON},
      {"execute", required_argument, NULL, O_EXECUTE},
      {"clock", required_argument, NULL, O_CLOCK},
      {"clock-from", required_argument, NULL, O_CLOCKFROM},
      {"summary-only", no_argument, NULL, O_SUMMARY},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  const char *db = NULL, *sched = NULL, *evict = NULL, *prefetch = NULL,
             *backend = NULL, *seed_s = NULL, *profile = NULL,
             *resume = NULL, *tlayers_s = NULL, *json = NULL,
             *execute_s = NULL, *clock_s = NULL, *clock_from = NULL;
  int plots = 1, quiet = 0, verify = 0, skip = 0, summary_only = 0, c;
  int tmodel = 0, tlayers = 0, nsets = 0;
  const char *sets[LSIM_SCENARIO_MAX_SETS];
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case O_DB: db = optarg; break;
    case O_SEED: seed_s = optarg; break;
    case O_SCHED: sched = optarg; break;
    case O_EVICT: evict = optarg; break;
    case O_PREFETCH: prefetch = optarg; break;
    case O_BACKEND: backend = optarg; break;
    case O_NOPLOTS: plots = 0; break;
    case O_QUIET: quiet = 1; break;
    case O_SKIP: skip = 1; break;
    case O_PROFILE: profile = optarg; break;
    case O_RESUME: resume = optarg; break;
    case O_JSON: json = optarg; break;
    case O_EXECUTE: execute_s = optarg; break;
    case O_CLOCK: clock_s = optarg; break;
    case O_CLOCKFROM: clock_from = optarg; break;
    case O_SUMMARY: summary_only = 1; break;
    case O_SET:
      if (nsets == LSIM_SCENARIO_MAX_SETS) {
        fprintf(stderr, "lorasim replay: error: E_USAGE: at most %d --set\n",
                LSIM_SCENARIO_MAX_SETS);
        return 2;
      }
      sets[nsets++] = optarg;
      break;
    case O_TSHAPE:
      if (strcmp(optarg, "model") != 0 && strcmp(optarg, "small") != 0) {
        fprintf(stderr, "lorasim replay: error: E_USAGE: --tensor-shape "
                        "takes 'small' or 'model'\n");
        return 2;
      }
      tmodel = strcmp(optarg, "model") == 0;
      break;
    case O_TLAYERS: {
      char *end;
      long v = strtol(optarg, &end, 10);
      if (*optarg == '\0' || *end != '\0' || v < 1 || v > 1024) {
        fprintf(stderr, "lorasim replay: error: E_USAGE: --tensor-layers "
                        "takes an integer in [1, 1024]\n");
        return 2;
      }
      tlayers = (int)v;
      tlayers_s = optarg;
      break;
    }
    case O_VERIFY:
      if (strcmp(optarg, "cpu_ref") != 0) {
        fprintf(stderr, "lorasim replay: error: E_USAGE: --verify takes "
                        "'cpu_ref'\n");
        return 2;
      }
      verify = 1;
      break;
    case 'h': lsim__usage_replay(stdout); return 0;
    default: lsim__usage_replay(stderr); return 2;
    }
  }
  if (resume) {
    /* the run's own choices come from DB; only output options combine */
    if (optind != argc || db || sched || evict || prefetch || backend ||
        seed_s || verify || skip || tmodel || tlayers || nsets || json ||
        execute_s || clock_s || clock_from || summary_only) {
      fprintf(stderr, "lorasim replay: error: E_USAGE: --resume DB takes no "
                      "scenario and no run options (they come from DB)\n");
      return 2;
    }
    lsim__on_signals();
    return lsim_resume_main(resume, quiet, !plots, &lsim__stop);
  }
  if (optind != argc - 1) {
    fprintf(stderr, "lorasim replay: error: E_USAGE: expected exactly one "
                    "scenario file\n");
    lsim__usage_replay(stderr);
    return 2;
  }
  static lsim_scenario sc;
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  int execute = -1, clock = -1;
  lsim_err rc = lsim_cli_modes(execute_s, clock_s, &execute, &clock, &eb);
  if (rc)
    return lsim_cli_fail("replay", rc, eb.msg);
  /* full execution is the cuda backend's: a build without it says so
  ** before the backend's name is looked up */
  if (execute == LSIM_EXECUTE_FULL && backend &&
      strcmp(backend, LSIM_CUDA_BACKEND_NAME) == 0 &&
      !lsim_backend_find(backend))
    return lsim_cli_fail("replay", LSIM_E_SCN_MODE_DEVICE,
                         "--execute full needs the cuda backend, which this "
                         "build does not have (nvcc was not found at "
                         "configure time: see lorasim version)");
  const lsim_scenario_src src = {NULL, nsets, sets};
  rc = lsim_scenario_load_src(&sc, argv[optind], &src, &eb);
  if (rc) {
    lsim_cli_fail("replay", rc, eb.msg);
    return 2; /* an unreadable scenario is bad input too */
  }
  if (execute >= 0)
    sc.execute = execute;
  if (clock >= 0)
    sc.clock = clock;
  if (clock_from) {
    if (clock == LSIM_CLOCK_MODEL)
      return lsim_cli_fail("replay", LSIM_E_USAGE,
                           "--clock-from drives the clock with recorded "
                           "times: it cannot go with --clock model");
    if (strlen(clock_from) >= sizeof sc.clock_from)
      return lsim_cli_fail("replay", LSIM_E_USAGE, "--clock-from: path too long");
    snprintf(sc.clock_from, sizeof sc.clock_from, "%s", clock_from);
    sc.clock = LSIM_CLOCK_MEASURED;
  }
  if (skip)
    sc.trace_skip_bad_rows = 1;
  if (profile && (rc = lsim_runid_apply_profile(&sc, profile, &eb))) {
    lsim_cli_fail("replay", rc, eb.msg);
    return 2; /* bad input */
  }
  if (seed_s && lsim__parse_seed(seed_s, &sc.seed))
    return lsim_cli_fail("replay", LSIM_E_USAGE,
                     "--seed: expected a non-negative integer");
  if ((sched && lsim__set_name(sc.scheduler, sched, "scheduler",
                               lsim_sched_find(sched) != NULL, &eb)) ||
      (evict && lsim__set_name(sc.evict, evict, "evict",
                               lsim_evict_find(evict) != NULL, &eb)) ||
      (prefetch && lsim__set_name(sc.prefetch, prefetch, "prefetch",
                                  lsim_prefetch_find(prefetch) != NULL, &eb)) ||
      (backend && lsim__set_name(sc.backend, backend, "backend",
                                 lsim_backend_find(backend) != NULL, &eb)))
    return lsim_cli_fail("replay", eb.code, eb.msg);
  /* the modes against the backend, build and workers (exit 2, nothing
  ** written); lsim_replay_run checks again */
  if ((rc = lsim_replay_check_modes(&sc, &eb)))
    return lsim_cli_fail("replay", rc, eb.msg);

#ifdef LSIM_HAVE_CUDA
  if (strcmp(sc.backend, "cuda") == 0) {
    char desc[256];
    if (lsim_cuda_describe(desc, sizeof desc) <= 0) {
      snprintf(eb.msg, sizeof eb.msg, "backend cuda: %s", desc);
      lsim_cli_fail("replay", LSIM_E_BACKEND, eb.msg);
      return 2; /* refused before anything is written */
    }
  }
#endif
  if ((tmodel || tlayers) && strcmp(sc.backend, "cuda") != 0)
    return lsim_cli_fail("replay", LSIM_E_USAGE,
                     "--tensor-shape/--tensor-layers need --backend cuda");
  if (tlayers && !tmodel)
    return lsim_cli_fail("replay", LSIM_E_USAGE,
                     "--tensor-layers needs --tensor-shape model");
  if (verify && strcmp(sc.backend, "cuda") != 0)
    return lsim_cli_fail("replay", LSIM_E_USAGE,
                     "--verify cpu_ref needs --backend cuda (cpu_ref checks "
                     "itself: every family against the others)");
  char dbpath[1024];
  if (db) {
    snprintf(dbpath, sizeof dbpath, "%s", db);
  } else {
    if (mkdir("results", 0777) != 0 && errno != EEXIST)
      return lsim_cli_fail("replay", LSIM_E_IO,
                       "cannot create directory results/");
    snprintf(dbpath, sizeof dbpath, "results/%s-seed%llu.db", sc.name,
             (unsigned long long)sc.seed);
  }

  char cmdline[1024] = "";
  size_t used = 0;
  for (int i = 0; i < argc && used < sizeof cmdline - 1; i++)
    used += (size_t)snprintf(cmdline + used, sizeof cmdline - used, "%s%s",
                             i ? " " : "lorasim ", argv[i]);

  /* the options that override the scenario, recorded for --resume */
  const char *ropts[2 * (16 + LSIM_SCENARIO_MAX_SETS) + 1];
  char setnames[LSIM_SCENARIO_MAX_SETS][16];
  int nr = 0;
#define LSIM__ROPT(cond, name, value) \
  if (cond) {                         \
    ropts[nr++] = (name);             \
    ropts[nr++] = (value);            \
  }
  LSIM__ROPT(seed_s, "seed", seed_s)
  LSIM__ROPT(sched, "scheduler", sched)
  LSIM__ROPT(evict, "evict", evict)
  LSIM__ROPT(prefetch, "prefetch", prefetch)
  LSIM__ROPT(backend, "backend", backend)
  LSIM__ROPT(verify, "verify", "cpu_ref")
  LSIM__ROPT(skip, "skip-bad-rows", "1")
  LSIM__ROPT(profile, "profile", profile)
  LSIM__ROPT(tmodel, "tensor-shape", "model")
  LSIM__ROPT(tlayers, "tensor-layers", tlayers_s)
  LSIM__ROPT(execute_s, "execute", execute_s)
  LSIM__ROPT(clock_s, "clock", clock_s)
  LSIM__ROPT(clock_from, "clock-from", clock_from)
  for (int i = 0; i < nsets; i++) {
    lsim_runid_set_name(i, setnames[i]);
    LSIM__ROPT(1, setnames[i], sets[i])
  }
  LSIM__ROPT(!plots, "no-plots", "1")
  LSIM__ROPT(summary_only, "summary-only", "1")
#undef LSIM__ROPT
  ropts[nr] = NULL;

  lsim__on_signals();

  lsim_replay_opts o = {.db_path = dbpath,
                        .command_line = cmdline,
                        .progress = !quiet,
                        .plots = plots,
                        .report = quiet ? NULL : stdout,
                        .stop = &lsim__stop,
                        .verify = verify,
                        .tensor_model = tmodel,
                        .tensor_layers = tlayers,
                        .run_options = ropts,
                        .json_path = json,
                        .summary_only = summary_only};
  lsim_summary sum;
  rc = lsim_replay_run(&sc, &o, &sum, &eb);
  if (rc) {
    int st = lsim_cli_fail("replay", rc, eb.msg);
    lsim_replay_explain(stderr, "lorasim replay", &sum, dbpath);
    return st;
  }
  return 0;
}

static void lsim__usage_bench(FILE *f) {
  fputs("usage: lorasim bench kernels [--sweep] [--reps N] [--out DIR]\n"
        "       lorasim bench kernels --check [--cases N]\n"
        "\n"
        "Runs the standalone kernel benchmark (bench_kernels, built beside\n"
        "lorasim when nvcc was found, installed in PREFIX/libexec/lorasim;\n"
        "$LSIM_BENCH_KERNELS names another path): one table of workload, rank, path, median device us, GB/s,\n"
        "ratio to the memory/compute floor and to the base GEMM, on GPU 0.\n"
        "See docs/CUDA.md and docs/BENCHMARKS.md.\n",
        f);
}

/* `lorasim bench kernels ...`: exec the standalone benchmark, which
** depends on the CUDA runtime and libc only (it runs as built on a GPU
** machine without SQLite or cJSON), found beside this executable. */
static int lsim__cmd_bench(int argc, char **argv) {
  char path[4096];
  if (argc < 2 || strcmp(argv[1], "--help") == 0 ||
      strcmp(argv[1], "-h") == 0) {
    lsim__usage_bench(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (strcmp(argv[1], "kernels") != 0) {
    fprintf(stderr, "lorasim bench: error: E_USAGE: unknown benchmark '%s' "
            "(known: kernels)\n", argv[1]);
    return 2;
  }
  const char *env = getenv("LSIM_BENCH_KERNELS");
  if (env && *env) {
    snprintf(path, sizeof path, "%s", env);
  } else {
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 32);
    if (n <= 0) {
      fprintf(stderr, "lorasim bench: error: E_IO: cannot find this "
              "executable (/proc/self/exe)\n");
      return 1;
    }
    path[n] = 0;
    char *slash = strrchr(path, '/');
    snprintf(slash ? slash + 1 : path, 32, "bench_kernels");
    /* installed (`cmake --install`): PREFIX/bin/lorasim runs
    ** PREFIX/libexec/lorasim/bench_kernels */
    if (slash && access(path, X_OK) != 0) {
      char alt[sizeof path];
      *slash = 0;
      if (snprintf(alt, sizeof alt, "%s/../libexec/lorasim/bench_kernels",
                   path) < (int)sizeof alt &&
          access(alt, X_OK) == 0)
        snprintf(path, sizeof path, "%s", alt);
      else
        *slash = '/';
    }
  }
  char **av = calloc((size_t)argc + 1, sizeof *av);
  if (!av) {
    fprintf(stderr, "lorasim bench: error: E_NOMEM: out of memory\n");
    return 1;
  }
  av[0] = path;
  for (int i = 2; i < argc; i++)
    av[i - 1] = argv[i];
  fflush(NULL);
  execv(path, av);
  fprintf(stderr, "lorasim bench: error: E_IO: cannot run %s: %s (built only "
          "when nvcc is found; set LSIM_BENCH_KERNELS)\n", path,
          strerror(errno));
  free(av);
  return 1;
}

static int lsim__cmd_version(void) {
  printf("lorasim %s\n", LSIM_VERSION);
#ifdef LSIM_HAVE_CUDA
  char desc[256];
  int n = lsim_cuda_describe(desc, sizeof desc);
  printf("cuda: built for sm_90 (+PTX); %s\n", n > 0 ? desc : desc);
#else
  printf("cuda: not built (nvcc was not found at configure time)\n");
#endif
#ifdef LSIM_HAVE_MPI
  char mpi[256];
  lsim_sweep_mpi_describe(mpi, sizeof mpi);
  printf("mpi: %s\n", mpi);
#else
  printf("mpi: not built (no MPI at configure time, or -DLSIM_MPI=OFF); "
         "lorasim sweep --mpi is refused\n");
#endif
  return 0;
}

static int lsim__dispatch(int argc, char **argv);

/* Every command's results on stdout must have reached it: a full disk or a
** closed pipe behind stdout (`lorasim exec > /dev/full`) is an error. */
int main(int argc, char **argv) {
  int st = lsim__dispatch(argc, argv);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  if (lsim_out_stdout_check(&eb)) {
    fprintf(stderr, "lorasim: error: %s: %s\n", lsim_err_name(eb.code),
            eb.msg);
    return st ? st : 1;
  }
  return st;
}

static int lsim__dispatch(int argc, char **argv) {
  if (argc < 2) {
    lsim__usage(stderr);
    return 2;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "replay") == 0)
    return lsim__cmd_replay(argc - 1, argv + 1);
  if (strcmp(cmd, "compare") == 0)
    return lsim_compare_main(argc - 1, argv + 1);
  if (strcmp(cmd, "sweep") == 0)
    return lsim_sweep_main(argc - 1, argv + 1);
  if (strcmp(cmd, "trace") == 0)
    return lsim_trace_main(argc - 1, argv + 1);
  if (strcmp(cmd, "calibrate") == 0)
    return lsim_calibrate_cmd(argc - 1, argv + 1);
  if (strcmp(cmd, "profile") == 0)
    return lsim_profile_cmd(argc - 1, argv + 1);
  if (strcmp(cmd, "exec") == 0)
    return lsim_exec_main(argc - 1, argv + 1);
  if (strcmp(cmd, "bench") == 0)
    return lsim__cmd_bench(argc - 1, argv + 1);
  if (strcmp(cmd, "prefix") == 0)
    return lsim_prefix_main(argc - 1, argv + 1);
  if (strcmp(cmd, "compress") == 0)
    return lsim_compress_main(argc - 1, argv + 1);
  if (strcmp(cmd, "audit") == 0)
    return lsim_cmd_audit(argc - 1, argv + 1);
  if (strcmp(cmd, "fidelity") == 0)
    return lsim_fidelity_main(argc - 1, argv + 1);
  if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0)
    return lsim__cmd_version();
  if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 ||
      strcmp(cmd, "-h") == 0) {
    if (argc > 2 && strcmp(argv[2], "replay") == 0)
      lsim__usage_replay(stdout);
    else if (argc > 2 && strcmp(argv[2], "bench") == 0)
      lsim__usage_bench(stdout);
    else if (argc > 2 && strcmp(argv[2], "trace") == 0) {
      char *av[] = {"trace", "--help", NULL};
      return lsim_trace_main(2, av);
    } else if (argc > 2 && strcmp(argv[2], "sweep") == 0) {
      char *av[] = {"sweep", "--help", NULL};
      return lsim_sweep_main(2, av);
    } else if (argc > 2 && strcmp(argv[2], "compare") == 0) {
      char *av[] = {"compare", "--help", NULL};
      return lsim_compare_main(2, av);
    } else if (argc > 2 && strcmp(argv[2], "calibrate") == 0) {
      lsim_calibrate_usage(stdout);
    } else if (argc > 2 && strcmp(argv[2], "profile") == 0) {
      lsim_profile_usage(stdout);
    } else if (argc > 2 && strcmp(argv[2], "prefix") == 0) {
      char *av[] = {"prefix", "--help", NULL};
      return lsim_prefix_main(2, av);
    } else if (argc > 2 && strcmp(argv[2], "compress") == 0) {
      char *av[] = {"compress", "--help", NULL};
      return lsim_compress_main(2, av);
    } else if (argc > 2 && strcmp(argv[2], "audit") == 0) {
      char *av[] = {"audit", "--help", NULL};
      return lsim_cmd_audit(2, av);
    } else if (argc > 2 && strcmp(argv[2], "exec") == 0) {
      char *av[] = {"exec", "--help", NULL};
      return lsim_exec_main(2, av);
    } else if (argc > 2 && strcmp(argv[2], "fidelity") == 0) {
      char *av[] = {"fidelity", "--help", NULL};
      return lsim_fidelity_main(2, av);
    }
    else
      lsim__usage(stdout);
    return 0;
  }
  fprintf(stderr, "lorasim: error: E_USAGE: unknown command '%s'\n", cmd);
  lsim__usage(stderr);
  return 2;
}
