/*
** trace_cmd.c: `lorasim trace convert` and `lorasim trace stats`.
**
** Both read a trace through the same stream as a replay (traces/trace.h):
** a file with an importer, or the trace section of a scenario (file,
** importer and assignment, or the generator).  convert writes the records in
** the native format; stats prints counts, span, rates, length percentiles,
** tenants and adapters, prefix reuse, and writes an arrival-rate plot.  What
** was assigned (the assignment in words, with its seed) and what was skipped
** is printed with the result, so a converted file says how it was made.
**
** Exit status: 0 ok, 2 bad usage or bad input (a trace or scenario error),
** 1 anything else (I/O).
*/
#include "trace_cmd.h"
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "outfile.h"
#include "../engine/checked.h"
#include "../engine/lsim.h"
#include "../traces/trace.h"
#include "escape.h"
#include "plot_run.h"
#include "scenario.h"

static void lsim__trace_usage(FILE *f) {
  fputs(
      "usage: lorasim trace convert [options] [FILE] -o OUT\n"
      "       lorasim trace stats   [options] [FILE]\n"
      "\n"
      "Read a trace file (or the trace of --scenario) as a replay would, then\n"
      "write it in the native lorasim format (convert) or print its\n"
      "statistics and write an arrival-rate plot (stats).\n"
      "\n"
      "input:\n"
      "  FILE                 the trace; with --scenario it replaces the\n"
      "                       scenario's trace file\n"
      "  --format NAME        ",
      f);
  char names[256];
  lsim_trace_format_join(names, sizeof names, ", ");
  fprintf(f, "%s\n", names); /* the importer registry (traces/trace.c) */
  fputs(
      "                       (default: a directory is servegen, *.jsonl is\n"
      "                       jsonl, anything else csv)\n"
      "  --scenario S.json    take the trace section, tenants, catalog and seed\n"
      "                       of a scenario (its assignment applies)\n"
      "  --skip-bad-rows      count and skip malformed rows instead of failing\n"
      "  --max-requests N     stop after N records\n"
      "  --block-tokens N     Mooncake prefix block size (default 512)\n"
      "assignment without a scenario (default: none, the trace's own values):\n"
      "  --tenants N          assign over N tenants of equal weight\n"
      "  --adapters N         ... and a catalog of N adapters\n"
      "  --seed N             seed of every random draw (default 0)\n"
      "  --assign-tenants M   auto, trace, weights, owner, modulo\n"
      "  --assign-adapters M  auto, trace, zipf, uniform, distinct, identical,\n"
      "                       servegen\n"
      "  --alpha A            Zipf exponent (default 0: uniform)\n"
      "  --scope S            tenant or catalog\n"
      "  --adapter K          the adapter of --assign-adapters identical\n"
      "  --servegen PATH      client rates for --assign-adapters servegen\n"
      "workload controls (docs/TRACES.md; a servegen FILE without a scenario\n"
      "reads them as its generator's settings instead):\n"
      "  --start S            drop arrivals before second S of the trace and\n"
      "                       make S time 0 (servegen: default 0)\n"
      "  --duration S         keep S seconds from there (servegen: seconds to\n"
      "                       generate, default 600)\n"
      "  --rate-scale X       multiply the arrival rate by X: every time is\n"
      "                       divided by X, exactly (servegen: every client's\n"
      "                       rate, default 1); with --scenario these replace\n"
      "                       its $.trace.rate_scale and window\n"
      "a servegen FILE without a scenario:\n"
      "  --prompt-tokens N    fixed prompt length (default 1024)\n"
      "  --output-tokens N    fixed output length (default 128)\n"
      "output:\n"
      "  -o, --out PATH       convert: the file to write (\"-\": stdout);\n"
      "                       JSONL when it ends in .jsonl or with --jsonl\n"
      "  --jsonl              convert: write JSONL\n"
      "  --plot PATH.png      stats: the plot (default results/NAME-rate.png;\n"
      "                       the series goes to PATH.dat)\n"
      "  --no-plot            stats: no plot\n"
      "  -h, --help           this text\n"
      "\n"
      "exit status: 0 ok, 1 failed (I/O), 2 bad usage or bad input\n",
      f);
}

static int lsim__tdie(const char *cmd, lsim_err code, const char *msg) {
  char prog[64];
  snprintf(prog, sizeof prog, "trace %s", cmd);
  return lsim_cli_fail(prog, code, msg);
}

static int lsim__num(const char *s, double lo, double hi, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || *end || errno || !(v >= lo && v <= hi))
    return -1;
  *out = v;
  return 0;
}

static int lsim__pick(const char *s, const char *const *names) {
  for (int i = 0; names[i]; i++)
    if (strcmp(s, names[i]) == 0)
      return i;
  return -1;
}

typedef struct lsim__topts {
  const char *cmd;
  const char *file, *format, *scenario, *out, *plot, *servegen;
  int skip, jsonl, noplot;
  double max_requests, block_tokens, tenants, adapters, seed, alpha, adapter;
  int has_alpha, has_adapter;
  int tmode, amode, scope;
  double duration, start, rate_scale, prompt, output;
  /* the texts of --rate-scale, --start, --duration (exact workload
  ** controls of a non-servegen trace); NULL when not given */
  const char *rate_text, *start_text, *duration_text;
} lsim__topts;

/* The workload controls the command line gives, over *ctl (a scenario's,
** or zeros): --rate-scale, and a window from --start for --duration. */
static lsim_err lsim__cli_ctl(const lsim__topts *o, lsim_trace_ctl *ctl,
                              lsim_errbuf *eb) {
  int64_t start = 0, dur = 0;
  if (o->rate_text &&
      lsim_trace_decimal(o->rate_text, &ctl->rate_num, &ctl->rate_den))
    return lsim_fail(eb, LSIM_E_USAGE, "--rate-scale: '%s' is not a decimal "
                     "number (such as 2 or 0.5) of at most 18 significant "
                     "digits", o->rate_text);
  if (!o->start_text && !o->duration_text)
    return 0;
  if (o->start_text && lsim_trace_seconds_ns(o->start_text, &start))
    return lsim_fail(eb, LSIM_E_USAGE, "--start: '%s' is not a whole number "
                     "of ns below 2^63", o->start_text);
  if (o->duration_text && lsim_trace_seconds_ns(o->duration_text, &dur))
    return lsim_fail(eb, LSIM_E_USAGE, "--duration: '%s' is not a whole "
                     "number of ns below 2^63", o->duration_text);
  ctl->window_start_ns = start;
  ctl->window_end_ns = 0;
  if (o->duration_text &&
      lsim_add_i64_checked(start, dur, &ctl->window_end_ns))
    return lsim_fail(eb, LSIM_E_USAGE, "--start + --duration is beyond 2^63 "
                     "ns");
  return 0;
}

/* Open the trace the options name. */
static lsim_err lsim__open_scenario(const lsim__topts *o, int format,
                                    lsim_trace *t, lsim_errbuf *eb) {
  lsim_scenario *sc = malloc(sizeof *sc); /* large: not on the stack */
  if (!sc)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  lsim_err rc = lsim_scenario_load(sc, o->scenario, eb);
  if (!rc && o->file) {
    snprintf(sc->trace_file, sizeof sc->trace_file, "%s", o->file);
    sc->trace_format = format >= 0 ? format : lsim_trace_format_guess(o->file);
  } else if (!rc && format >= 0 && sc->trace_format != LSIM_TRACE_GEN) {
    sc->trace_format = format;
  }
  if (!rc && sc->trace_format == LSIM_TRACE_SERVEGEN &&
      !sc->trace_servegen.rate_scale)
    rc = lsim_fail(eb, LSIM_E_USAGE,
                   "a servegen FILE needs the scenario's $.trace.servegen");
  if (!rc && o->block_tokens > 0)
    sc->trace_block_tokens = (int)o->block_tokens;
  if (!rc && sc->trace_format != LSIM_TRACE_SERVEGEN)
    rc = lsim__cli_ctl(o, &sc->trace_ctl, eb);
  /* the trace copies what it keeps: the scenario can go */
  if (!rc)
    rc = lsim_scenario_trace_open(sc, t, o->skip, (int64_t)o->max_requests,
                                  eb);
  free(sc);
  return rc;
}

static lsim_err lsim__open(const lsim__topts *o, lsim_trace *t,
                           lsim_errbuf *eb) {
  int format = -1;
  if (o->format && (format = lsim_trace_format_find(o->format)) < 0) {
    char names[256];
    lsim_trace_format_join(names, sizeof names, ", ");
    return lsim_fail(eb, LSIM_E_USAGE,
                     "--format: unknown format '%s' (known: %s)", o->format,
                     names);
  }
  if (o->scenario)
    return lsim__open_scenario(o, format, t, eb);
  if (!o->file)
    return lsim_fail(eb, LSIM_E_USAGE, "expected a trace FILE or --scenario");
  lsim_servegen_spec sg;
  memset(&sg, 0, sizeof sg);
  sg.start_s = o->start;
  sg.duration_s = o->duration;
  sg.rate_scale = o->rate_scale;
  sg.prompt.kind = sg.output.kind = LSIM_DIST_FIXED;
  sg.prompt.min = sg.prompt.max = (int64_t)o->prompt;
  sg.output.min = sg.output.max = (int64_t)o->output;
  lsim_assign_spec as;
  memset(&as, 0, sizeof as);
  as.tenants = o->tmode;
  as.adapters = o->amode;
  as.scope = o->scope >= 0 ? o->scope
             : o->tmode == LSIM_AT_OWNER ? LSIM_SCOPE_CATALOG
                                         : LSIM_SCOPE_TENANT;
  as.has_alpha = o->has_alpha;
  as.alpha = o->alpha;
  as.adapter = (int)o->adapter;
  if (o->servegen)
    snprintf(as.servegen, sizeof as.servegen, "%s", o->servegen);
  lsim_trace_spec spec;
  memset(&spec, 0, sizeof spec);
  spec.format = format >= 0 ? format : lsim_trace_format_guess(o->file);
  spec.path = o->file;
  spec.skip_bad_rows = o->skip;
  spec.max_requests = (int64_t)o->max_requests;
  spec.block_tokens = (int)o->block_tokens;
  spec.servegen = &sg;
  spec.assign = &as;
  lsim_trace_ctl *ctl = calloc(1, sizeof *ctl); /* large: not on the stack */
  if (!ctl)
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  lsim_err rc = spec.format == LSIM_TRACE_SERVEGEN ? 0
                                                   : lsim__cli_ctl(o, ctl, eb);
  spec.ctl = ctl;
  int T = (int)o->tenants, N = (int)o->adapters;
  if (N > 0 && T == 0)
    T = 1;
  if (T > 0 && N == 0)
    N = T;
  if (!rc && T == 0 && (o->tmode || o->amode || o->has_alpha || o->servegen))
    rc = lsim_fail(eb, LSIM_E_USAGE,
                   "an assignment needs --tenants and/or --adapters");
  if (!rc && N < T)
    rc = lsim_fail(eb, LSIM_E_USAGE,
                   "--adapters (%d) must be at least --tenants (%d)", N, T);
  lsim_trace_ctx ctx = {(uint64_t)o->seed, T, NULL, NULL, N, 0};
  if (!rc)
    rc = lsim_trace_open(t, &spec, &ctx, eb); /* copies the controls */
  free(ctl);
  return rc;
}

/* Strings from the trace, its path and the command line are shown with
** control bytes made visible (escape.h): a path or a row cannot start a
** new line of the report. */
#define LSIM__SHOWN LSIM_ESC_SIZE(1300)

static void lsim__print_info(FILE *f, const lsim_trace_info *in) {
  char shown[LSIM__SHOWN];
  fprintf(f, "source          %s\n",
          lsim_console_str(shown, sizeof shown, in->source));
  fprintf(f, "assignment      %s\n",
          lsim_console_str(shown, sizeof shown, in->assign));
  if (in->workload[0])
    fprintf(f, "workload        %s\n",
            lsim_console_str(shown, sizeof shown, in->workload));
  if (in->before_window)
    fprintf(f, "before window   %lld records dropped\n",
            (long long)in->before_window);
  if (in->dropped_failed)
    fprintf(f, "failed dropped  %lld rows with 0 response tokens\n",
            (long long)in->dropped_failed);
  if (!in->skipped)
    return;
  fprintf(f, "skipped rows    %lld:", (long long)in->skipped);
  for (int i = 0; i < LSIM_TRACE_NCODES; i++)
    if (in->skipped_by_code[i])
      fprintf(f, " %s %lld", lsim_err_name(LSIM_E_TRACE_PARSE - i),
              (long long)in->skipped_by_code[i]);
  fprintf(f, "\nfirst skipped   %s\n",
          lsim_console_str(shown, sizeof shown, in->first_skipped));
}

/* results/<base of the input>-rate.png */
static void lsim__default_plot(const lsim__topts *o, char *out, size_t n) {
  const char *src = o->file ? o->file : o->scenario;
  const char *b = strrchr(src, '/');
  b = b ? b + 1 : src;
  char base[200];
  snprintf(base, sizeof base, "%s", b);
  char *dot = strrchr(base, '.');
  if (dot && dot != base)
    *dot = '\0';
  snprintf(out, n, "results/%s-rate.png", base);
}

/* The arrival-rate plot.  A missing or failing gnuplot is a note; an output
** path refused or a write that failed is an error (sim/outfile.h).  Every
** string of the script is a quoted gnuplot literal (escape.h). */
static lsim_err lsim__plot(const lsim__topts *o, const lsim_trace_stats *st,
                           lsim_errbuf *eb) {
  char png[1024], dat[1100], gp[1100];
  char shown[LSIM__SHOWN], shown2[LSIM__SHOWN];
  char q_png[LSIM_ESC_SIZE(1100)], q_dat[LSIM_ESC_SIZE(1100)];
  if (o->plot)
    snprintf(png, sizeof png, "%s", o->plot);
  else
    lsim__default_plot(o, png, sizeof png);
  size_t len = strlen(png);
  int cut = len > 4 && strcmp(png + len - 4, ".png") == 0 ? 4 : 0;
  snprintf(dat, sizeof dat, "%.*s.dat", (int)(len - (size_t)cut), png);
  snprintf(gp, sizeof gp, "%.*s.gp", (int)(len - (size_t)cut), png);
  if (lsim_gp_path(q_png, sizeof q_png, png) < 0 ||
      lsim_gp_path(q_dat, sizeof q_dat, dat) < 0) {
    printf("plot            skipped: the path has control characters\n");
    return 0;
  }
  if (!o->plot)
    mkdir("results", 0777);
  lsim_outfile dof, gof, pof;
  lsim_err rc;
  if ((rc = lsim_out_check(png, eb)) || (rc = lsim_out_check(gp, eb)) ||
      (rc = lsim_out_open(&dof, dat, eb)))
    return rc;
  if ((rc = lsim_out_close(&dof, eb)) ||
      (rc = lsim_trace_stats_rate_dat(st, dof.tmp, eb))) {
    lsim_out_abort(&dof);
    return rc;
  }
  if ((rc = lsim_out_commit(&dof, eb)))
    return rc;
  lsim_console_str(shown2, sizeof shown2, dat);
  if (!lsim_gnuplot_available()) {
    printf("plot            skipped: gnuplot not found (series in %s)\n",
           shown2);
    return 0;
  }
  if ((rc = lsim_out_reserve(&pof, png, eb)))
    return rc;
  if (lsim_gp_path(q_png, sizeof q_png, pof.tmp) < 0) {
    lsim_out_abort(&pof);
    printf("plot            skipped: the path has control characters\n");
    return 0;
  }
  if ((rc = lsim_out_open(&gof, gp, eb))) {
    lsim_out_abort(&pof);
    return rc;
  }
  FILE *f = gof.fp;
  fprintf(f,
          "set terminal pngcairo size 1000,500\n"
          "set output %s\n"
          "set title 'arrival rate'\n"
          "set xlabel 'trace time (s)'\n"
          "set ylabel 'requests per second'\n"
          "set grid\n"
          "plot %s using 1:2 with steps notitle\n",
          q_png, q_dat);
  if ((rc = lsim_out_commit(&gof, eb))) {
    lsim_out_abort(&pof);
    return rc;
  }
  lsim_errbuf geb = LSIM_ERRBUF_INIT;
  if (lsim_gnuplot_run(gp, &geb)) {
    lsim_out_abort(&pof);
    printf("plot            skipped: gnuplot failed (series in %s)\n",
           shown2);
    return 0;
  }
  remove(gp);
  if ((rc = lsim_out_commit(&pof, eb)))
    return rc;
  printf("plot            %s (series in %s)\n",
         lsim_console_str(shown, sizeof shown, png), shown2);
  return 0;
}

static int lsim__run(const lsim__topts *o) {
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_trace t = {0};
  lsim_err rc = lsim__open(o, &t, &eb);
  if (rc)
    return lsim__tdie(o->cmd, rc, eb.msg);
  lsim_trace_info info;
  lsim_trace_get_info(&t, &info);
  int convert = strcmp(o->cmd, "convert") == 0;
  lsim_trace_writer w = {0};
  lsim_outfile oof = LSIM_OUTFILE_INIT;
  lsim_trace_stats *st = NULL;
  if (convert) {
    /* one comment line each: control bytes of a path made visible */
    char comment[1100], src[LSIM_ESC_SIZE(160)], asg[LSIM_ESC_SIZE(256)],
        wl[LSIM_ESC_SIZE(256)];
    snprintf(comment, sizeof comment,
             "lorasim trace convert\nsource: %s\nassignment: %s%s%s",
             lsim_console_str(src, sizeof src, info.source),
             lsim_console_str(asg, sizeof asg, info.assign),
             info.workload[0] ? "\nworkload: " : "",
             info.workload[0]
                 ? lsim_console_str(wl, sizeof wl, info.workload)
                 : "");
    size_t n = strlen(o->out);
    int jsonl = o->jsonl || (n >= 6 && strcmp(o->out + n - 6, ".jsonl") == 0);
    /* written to a temporary beside o->out, renamed into place whole
    ** (sim/outfile.h); "-" is standard output */
    if (strcmp(o->out, "-") != 0 && !(rc = lsim_out_open(&oof, o->out, &eb)))
      rc = lsim_out_close(&oof, &eb);
    if (!rc)
      rc = lsim_trace_writer_open(&w, oof.live ? oof.tmp : o->out, jsonl,
                                  comment, &eb);
  } else {
    rc = lsim_trace_stats_new(&st, &eb);
  }
  lsim_trace_rec r;
  int got = 0;
  while (!rc && (got = lsim_trace_next(&t, &r, &eb)) == 1)
    rc = convert ? lsim_trace_writer_put(&w, &r, &eb)
                 : lsim_trace_stats_add(st, &r, &eb);
  if (!rc && got < 0)
    rc = got;
  lsim_trace_get_info(&t, &info);
  lsim_trace_close(&t);
  if (convert) {
    lsim_errbuf eb2 = LSIM_ERRBUF_INIT;
    lsim_err rc2 = w.fp ? lsim_trace_writer_close(&w, &eb2) : 0;
    if (rc2 && !rc) {
      rc = rc2;
      eb = eb2;
    }
    if (oof.live && (rc2 = rc ? (lsim_out_abort(&oof), 0)
                              : lsim_out_commit(&oof, &eb2))) {
      rc = rc2;
      eb = eb2;
    }
  }
  if (rc) {
    lsim_trace_stats_release(st);
    return lsim__tdie(o->cmd, rc, eb.msg);
  }
  FILE *rep = convert ? stderr : stdout;
  lsim__print_info(rep, &info);
  if (convert) {
    char shown[LSIM__SHOWN];
    fprintf(rep, "wrote           %lld records to %s\n", (long long)w.n,
            lsim_console_str(shown, sizeof shown, o->out));
  } else {
    lsim_trace_stats_print(st, stdout);
    if (!o->noplot && (rc = lsim__plot(o, st, &eb))) {
      lsim_trace_stats_release(st);
      return lsim__tdie(o->cmd, rc, eb.msg);
    }
    lsim_trace_stats_release(st);
  }
  return 0;
}

int lsim_trace_main(int argc, char **argv) {
  enum { O_FORMAT = 256, O_SCENARIO, O_SKIP, O_MAX, O_BLOCK, O_TENANTS,
         O_ADAPTERS, O_SEED, O_AT, O_AA, O_ALPHA, O_SCOPE, O_ADAPTER, O_SG,
         O_DURATION, O_START, O_RATE, O_PROMPT, O_OUTPUT, O_JSONL, O_PLOT,
         O_NOPLOT };
  static const struct option opts[] = {
      {"format", required_argument, NULL, O_FORMAT},
      {"scenario", required_argument, NULL, O_SCENARIO},
      {"skip-bad-rows", no_argument, NULL, O_SKIP},
      {"max-requests", required_argument, NULL, O_MAX},
      {"block-tokens", required_argument, NULL, O_BLOCK},
      {"tenants", required_argument, NULL, O_TENANTS},
      {"adapters", required_argument, NULL, O_ADAPTERS},
      {"seed", required_argument, NULL, O_SEED},
      {"assign-tenants", required_argument, NULL, O_AT},
      {"assign-adapters", required_argument, NULL, O_AA},
      {"alpha", required_argument, NULL, O_ALPHA},
      {"scope", required_argument, NULL, O_SCOPE},
      {"adapter", required_argument, NULL, O_ADAPTER},
      {"servegen", required_argument, NULL, O_SG},
      {"duration", required_argument, NULL, O_DURATION},
      {"start", required_argument, NULL, O_START},
      {"rate-scale", required_argument, NULL, O_RATE},
      {"prompt-tokens", required_argument, NULL, O_PROMPT},
      {"output-tokens", required_argument, NULL, O_OUTPUT},
      {"out", required_argument, NULL, 'o'},
      {"jsonl", no_argument, NULL, O_JSONL},
      {"plot", required_argument, NULL, O_PLOT},
      {"no-plot", no_argument, NULL, O_NOPLOT},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  static const char *const tmodes[] = {"auto", "trace", "weights", "owner",
                                       "modulo", NULL};
  static const char *const amodes[] = {"auto",     "trace",    "zipf",
                                       "uniform",  "distinct", "identical",
                                       "servegen", NULL};
  static const char *const scopes[] = {"tenant", "catalog", NULL};
  if (argc < 2 || strcmp(argv[1], "--help") == 0 ||
      strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
    lsim__trace_usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  lsim__topts o;
  memset(&o, 0, sizeof o);
  o.cmd = argv[1];
  o.scope = -1;
  o.duration = 600;
  o.rate_scale = 1;
  o.prompt = 1024;
  o.output = 128;
  if (strcmp(o.cmd, "convert") != 0 && strcmp(o.cmd, "stats") != 0) {
    fprintf(stderr,
            "lorasim trace: error: E_USAGE: unknown subcommand '%s' "
            "(convert, stats)\n",
            o.cmd);
    return 2;
  }
  const char *bad = NULL;
  int c;
  optind = 1;
  while ((c = getopt_long(argc - 1, argv + 1, "ho:", opts, NULL)) != -1) {
    switch (c) {
    case O_FORMAT: o.format = optarg; break;
    case O_SCENARIO: o.scenario = optarg; break;
    case O_SKIP: o.skip = 1; break;
    case O_MAX:
      if (lsim__num(optarg, 1, 1e15, &o.max_requests)) bad = "--max-requests";
      break;
    case O_BLOCK:
      if (lsim__num(optarg, 1, 1048576, &o.block_tokens)) bad = "--block-tokens";
      break;
    case O_TENANTS:
      if (lsim__num(optarg, 1, LSIM_TRACE_MAX_TENANTS, &o.tenants)) bad = "--tenants";
      break;
    case O_ADAPTERS:
      if (lsim__num(optarg, 1, 1e6, &o.adapters)) bad = "--adapters";
      break;
    case O_SEED:
      if (lsim__num(optarg, 0, 9007199254740992.0, &o.seed)) bad = "--seed";
      break;
    case O_AT:
      if ((o.tmode = lsim__pick(optarg, tmodes)) < 0) bad = "--assign-tenants";
      break;
    case O_AA:
      if ((o.amode = lsim__pick(optarg, amodes)) < 0) bad = "--assign-adapters";
      break;
    case O_ALPHA:
      if (lsim__num(optarg, 0, 10, &o.alpha)) bad = "--alpha";
      o.has_alpha = 1;
      break;
    case O_SCOPE:
      if ((o.scope = lsim__pick(optarg, scopes)) < 0) bad = "--scope";
      break;
    case O_ADAPTER:
      if (lsim__num(optarg, 0, 1e6, &o.adapter)) bad = "--adapter";
      o.has_adapter = 1;
      break;
    case O_SG: o.servegen = optarg; break;
    case O_DURATION:
      if (lsim__num(optarg, 1e-9, 1e12, &o.duration)) bad = "--duration";
      o.duration_text = optarg;
      break;
    case O_START:
      if (lsim__num(optarg, 0, 1e12, &o.start)) bad = "--start";
      o.start_text = optarg;
      break;
    case O_RATE:
      if (lsim__num(optarg, 1e-9, 1e6, &o.rate_scale)) bad = "--rate-scale";
      o.rate_text = optarg;
      break;
    case O_PROMPT:
      if (lsim__num(optarg, 1, LSIM_TRACE_MAX_TOKENS, &o.prompt)) bad = "--prompt-tokens";
      break;
    case O_OUTPUT:
      if (lsim__num(optarg, 1, LSIM_TRACE_MAX_TOKENS, &o.output)) bad = "--output-tokens";
      break;
    case 'o': o.out = optarg; break;
    case O_JSONL: o.jsonl = 1; break;
    case O_PLOT: o.plot = optarg; break;
    case O_NOPLOT: o.noplot = 1; break;
    case 'h': lsim__trace_usage(stdout); return 0;
    default: lsim__trace_usage(stderr); return 2;
    }
    if (bad) {
      fprintf(stderr, "lorasim trace %s: error: E_USAGE: %s: bad value '%s'\n",
              o.cmd, bad, optarg);
      return 2;
    }
  }
  int nargs = argc - 1 - optind;
  if (nargs > 1) {
    fprintf(stderr, "lorasim trace %s: error: E_USAGE: expected at most one "
                    "trace FILE\n", o.cmd);
    return 2;
  }
  if (nargs == 1)
    o.file = argv[1 + optind];
  if (o.amode == LSIM_AA_IDENTICAL && !o.has_adapter) {
    fprintf(stderr, "lorasim trace %s: error: E_USAGE: --assign-adapters "
                    "identical needs --adapter K\n", o.cmd);
    return 2;
  }
  if (strcmp(o.cmd, "convert") == 0 && !o.out) {
    fprintf(stderr, "lorasim trace convert: error: E_USAGE: -o OUT is "
                    "required\n");
    return 2;
  }
  return lsim__run(&o);
}
