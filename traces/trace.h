/*
** trace.h: a stream of request arrivals, from a file or a generator.
**
** A trace is read one record at a time (lsim_trace_next) and never loaded
** whole, so replay memory does not grow with trace length.  What a trace
** holds besides the pending record is bounded by the catalog (adapter
** aliases and popularity tables, at most adapters.count entries), the
** tenants (at most LSIM_TRACE_MAX_TENANTS) and, for ServeGen, the clients.
**
** Sources (docs/TRACES.md has the formats):
**
**   LSIM_TRACE_CSV       the native lorasim CSV (a superset of the original
**                        arrival_us,tenant,adapter,prompt_tokens,output_tokens)
**   LSIM_TRACE_JSONL     the native lorasim JSONL, one object per line
**   LSIM_TRACE_AZURE     Azure LLM inference 2023/2024 CSV
**   LSIM_TRACE_MOONCAKE  Mooncake FAST'25 JSONL (prefix block hashes)
**   LSIM_TRACE_BURSTGPT  BurstGPT CSV (6- or 8-column release)
**   LSIM_TRACE_SERVEGEN  ServeGen per-client window statistics: a file or a
**                        directory of chunk-<client>-trace.csv; arrivals are
**                        generated per client, clients become tenants
**   LSIM_TRACE_GEN       the synthetic generator
**   LSIM_TRACE_BLIS      the trace CSV of BLIS (inference-sim): token-id
**                        arrays in quoted fields, their lengths the lengths
**
** Then the assignment stage (traces/assign.c) gives every record a tenant
** and an adapter of the catalog: the trace's own, or drawn by a seeded law
** (Zipf, uniform, distinct, identical, ServeGen client skew).  Every draw
** comes from a seeded lsim_rng stream owned by one purpose.
**
** Errors are values: lsim_trace_open and lsim_trace_next return 0/1 or a
** negative LSIM_E_* code with a message "file:line: field: what".  With
** skip_bad_rows a bad row is counted (lsim_trace_info) and skipped instead;
** header, I/O and memory errors are never skipped.
**
** Units: times in ns on the trace clock (0 = the first record's arrival for
** files with wall-clock stamps), lengths in tokens.
*/
#ifndef LSIM_TRACE_H
#define LSIM_TRACE_H

#include <stdio.h>

#include "../engine/lsim.h"
#include "../base/rng.h"

#define LSIM_TRACE_PATH_MAX 1024
#define LSIM_TRACE_MAX_TENANTS 64   /* the scenario's limit */
#define LSIM_TRACE_MAX_SHIFTS 8     /* distribution shifts of a generator */
#define LSIM_TRACE_MAX_CLIENTS 1024 /* ServeGen clients in one source */
#define LSIM_TRACE_MAX_LINE (1 << 20) /* bytes in one line of a trace file */
#define LSIM_TRACE_MAX_BLOCKS 65536   /* prefix block ids in one record */
#define LSIM_TRACE_MAX_TOKENS 10000000 /* prompt and output lengths */

/*
** Random streams of the trace stage beyond base/rng.h's purposes (their
** values are far from rng.h's small enum).  A ServeGen client c draws from
** LSIM_TRACE_RNG_CLIENT + c; the generator uses LSIM_RNG_ARRIVALS,
** LSIM_RNG_TENANTS and LSIM_RNG_LENGTHS; the assignment of adapters uses
** LSIM_RNG_ADAPTERS and of tenants LSIM_TRACE_RNG_ASSIGN_TENANT.
*/
#define LSIM_TRACE_RNG_ASSIGN_TENANT 0x7472000000000001ull
#define LSIM_TRACE_RNG_SG_LENGTHS 0x7472000000000002ull
#define LSIM_TRACE_RNG_CLIENT 0x7472000100000000ull

/* The built-in importers' values (traces/trace.c lists the importers in
** this order; one added later has the next value and needs no name here). */
enum lsim_trace_format {
  LSIM_TRACE_CSV = 0,
  LSIM_TRACE_JSONL,
  LSIM_TRACE_AZURE,
  LSIM_TRACE_MOONCAKE,
  LSIM_TRACE_BURSTGPT,
  LSIM_TRACE_SERVEGEN,
  LSIM_TRACE_GEN,
  LSIM_TRACE_BLIS /* after the generator: added later (issue 22) */
};

/* The importer registry (traces/trace.c), each format named once there:
** "csv", "jsonl", "azure", "mooncake", "burstgpt", "servegen", "generator",
** "blis".
** lsim_trace_format_name gives "unknown" for a value out of range;
** lsim_trace_format_find knows the file formats only (not "generator") and
** returns -1 for an unknown name. */
int lsim_trace_format_count(void);
const char *lsim_trace_format_name(int format);
int lsim_trace_format_find(const char *name);
/* NULL-terminated list of the file format names, in registry order. */
const char *const *lsim_trace_format_names(void);
/* The file format names joined by sep into buf (always terminated when
** size > 0); returns the length the whole list needs, like snprintf. */
size_t lsim_trace_format_join(char *buf, size_t size, const char *sep);
/* 1 when the format's records are one per request of a file (an empirical
** length distribution may read it): not servegen, not the generator. */
int lsim_trace_format_per_request(int format);
/* The file name a harness (fuzz/fuzz_trace.c) writes an input of the
** format to, e.g. "input.jsonl"; "input" when the importer gives none. */
const char *lsim_trace_format_sample_name(int format);
/* The format a path implies when none is named: ".jsonl" is JSONL, a
** directory is ServeGen, anything else the native CSV. */
int lsim_trace_format_guess(const char *path);

/* One request.  Pointers are owned by the trace and valid until the next
** lsim_trace_next or lsim_trace_close. */
typedef struct lsim_trace_rec {
  int64_t id;         /* 0, 1, 2, ... in arrival order */
  int64_t arrival_ns; /* non-decreasing */
  int tenant;         /* index into the tenants; -1 unassigned (raw mode) */
  int adapter;        /* index into the catalog; -1 unassigned (raw mode) */
  int prompt_tokens;  /* [1, LSIM_TRACE_MAX_TOKENS] */
  int output_tokens;  /* [1, LSIM_TRACE_MAX_TOKENS] */
  int64_t deadline_ns; /* absolute on the trace clock; -1 none */
  int64_t cancel_ns;   /* absolute on the trace clock; -1 none */
  const char *slo;     /* SLO class name; NULL none */
  int nblocks;              /* prefix block hashes, in prompt order */
  const uint64_t *blocks;   /* nblocks entries; NULL when 0 */
  /* The names the source gave, when the index above came from them (a
  ** written trace keeps them); NULL otherwise. */
  const char *tenant_name;
  const char *adapter_name;
} lsim_trace_rec;

/* ---- length distributions ------------------------------------------------ */

/* fixed, uniform [min,max], "exponential" with a mean clamped to
** [min,max], or empirical: the prompt (field 0) or output (field 1) lengths
** of a trace file, sampled by their observed frequency, clamped to
** [min,max]. */
enum lsim_dist_kind {
  LSIM_DIST_FIXED = 0,
  LSIM_DIST_UNIFORM,
  LSIM_DIST_EXP,
  LSIM_DIST_EMPIRICAL
};
typedef struct lsim_len_dist {
  enum lsim_dist_kind kind;
  int64_t min, max; /* inclusive bounds; fixed uses min == max */
  double mean;      /* exponential only */
  /* empirical only */
  char file[LSIM_TRACE_PATH_MAX];
  int format; /* enum lsim_trace_format of file */
  int field;  /* 0 prompt lengths, 1 output lengths */
} lsim_len_dist;

/* ---- the generator -------------------------------------------------------- */

enum lsim_arrival_process { LSIM_ARR_POISSON = 0, LSIM_ARR_GAMMA };

/* From at_s on (simulated seconds), some parameters change (VTC-style
** distribution shift); has_* say which. */
typedef struct lsim_gen_shift {
  double at_s;
  double rate_per_s; /* 0: unchanged */
  int has_weights;
  int64_t tenant_weights[LSIM_TRACE_MAX_TENANTS];
  int has_prompt, has_output;
  lsim_len_dist prompt, output;
} lsim_gen_shift;

/*
** The arrival process beyond a plain Poisson one.  Gaps are drawn in
** "operational time" (mean 1, coefficient of variation cv for gamma) and
** mapped to simulated time through the integrated intensity
** rate(t) x modulation(t): on/off phases (the rate while on, off_level
** times the rate while off, starting on) or a diurnal sine
** 1 + amplitude x sin(2 pi (t + phase_s) / period_s) with amplitude in
** [0, 1) (mean: the rate), never both.  rate(t) is rate_per_s, changed by
** the shifts.
*/
typedef struct lsim_arrivals {
  int process; /* enum lsim_arrival_process */
  double cv;   /* gamma: coefficient of variation of the gaps, > 0 */
  int onoff;
  double on_s, off_s; /* > 0 */
  double off_level;   /* [0, 1] */
  int diurnal;
  double period_s, amplitude, phase_s;
  int nshifts; /* at_s strictly increasing */
  lsim_gen_shift shifts[LSIM_TRACE_MAX_SHIFTS];
} lsim_arrivals;

/* ---- ServeGen ------------------------------------------------------------- */

typedef struct lsim_servegen_spec {
  double start_s;    /* first window to use, s from the files' time 0 */
  double duration_s; /* 0: to the end of the files */
  double rate_scale; /* multiplies every window's rate; > 0 */
  int nclients;      /* 0: every client of the directory */
  int clients[64];   /* client ids to use */
  lsim_len_dist prompt, output; /* lengths (the files carry none) */
} lsim_servegen_spec;

/* ---- assignment ------------------------------------------------------------ */

enum lsim_assign_tenant {
  LSIM_AT_AUTO = 0, /* the trace's tenant if the record has one, else WEIGHTS */
  LSIM_AT_TRACE,    /* the trace's tenant: an index, or a tenant name */
  LSIM_AT_WEIGHTS,  /* drawn by traffic weight */
  LSIM_AT_OWNER,    /* the owner of the record's adapter: adapter % tenants */
  LSIM_AT_MODULO    /* the trace's tenant value v (an index, or the number of
                       a name by first appearance) becomes v % tenants */
};
enum lsim_assign_adapter {
  LSIM_AA_AUTO = 0,  /* the trace's adapter if the record has one, else ZIPF */
  LSIM_AA_TRACE,     /* the trace's adapter: an index, or an alias numbered by
                        first appearance */
  LSIM_AA_ZIPF,      /* rank k (0 = most popular) has weight (k+1)^-alpha */
  LSIM_AA_UNIFORM,
  LSIM_AA_DISTINCT,  /* request i gets the (i mod n)-th adapter of its scope */
  LSIM_AA_IDENTICAL, /* every request gets adapter `adapter` */
  LSIM_AA_SERVEGEN   /* popularity from ServeGen client mean rates */
};
enum lsim_assign_scope {
  LSIM_SCOPE_TENANT = 0, /* among the tenant's own adapters a % tenants == t */
  LSIM_SCOPE_CATALOG     /* among the whole catalog (shared adapters) */
};

typedef struct lsim_assign_spec {
  int tenants;  /* enum lsim_assign_tenant */
  int adapters; /* enum lsim_assign_adapter */
  int scope;    /* enum lsim_assign_scope */
  int has_alpha;
  double alpha; /* zipf exponent; default: the catalog's zipf_s */
  int count;    /* use the first `count` adapters only; 0: all */
  int adapter;  /* identical */
  char servegen[LSIM_TRACE_PATH_MAX]; /* servegen: file or directory */
} lsim_assign_spec;

/* ---- workload controls ($.trace.rate_scale, window, remap) ---------------- */

/*
** One stage of the stream (traces/trace.c) reshapes every source alike,
** file importers and the generator, after the order check and before the
** assignment:
**
**   window   a record arriving before window_start_ns (on the source's own
**            clock) is dropped; the first one at or after window_end_ns
**            ends the stream (the rest of the file is not read); the kept
**            arrivals are shifted so that window_start_ns is time 0;
**   rate     the arrival rate is multiplied by rate_num / rate_den: each
**            shifted arrival t becomes floor(t * rate_den / rate_num) ns,
**            exactly (128-bit product, rounded down); a deadline or cancel
**            time keeps its distance from its own arrival (the clients'
**            patience is not scaled);
**   remap    a tenant or adapter value the trace gives (an index, or a
**            name) found in a map becomes the map's value (an index or a
**            name) before the assignment sees it; adapters may instead be
**            folded: v -> v % adapter_modulo + adapter_offset, where a
**            name's v is its number by first appearance (0, 1, 2, ...).
**
** max_requests counts the records that come out of this stage.
*/
#define LSIM_TRACE_MAX_REMAP 256   /* entries of one map */
#define LSIM_TRACE_REMAP_NAME 64   /* a key or name, NUL included */

typedef struct lsim_trace_map_entry {
  char from[LSIM_TRACE_REMAP_NAME]; /* an index in decimal, or a name */
  int64_t to;                       /* an index; -1 when to_name is set */
  char to_name[LSIM_TRACE_REMAP_NAME];
} lsim_trace_map_entry;

typedef struct lsim_trace_ctl {
  int64_t rate_num, rate_den;  /* both > 0; 0 0: rate as is */
  int64_t window_start_ns;     /* >= 0 */
  int64_t window_end_ns;       /* > window_start_ns; 0: open */
  int ntenant_map;
  lsim_trace_map_entry tenant_map[LSIM_TRACE_MAX_REMAP];
  int nadapter_map;
  lsim_trace_map_entry adapter_map[LSIM_TRACE_MAX_REMAP];
  int64_t adapter_modulo; /* > 0 folds adapters; 0: none */
  int64_t adapter_offset; /* >= 0, added after the fold */
} lsim_trace_ctl;

/* 1 when ctl changes nothing (NULL included). */
int lsim_trace_ctl_none(const lsim_trace_ctl *ctl);

/*
** A non-negative decimal number's text ("2", "0.25", "1.5e3") as a reduced
** fraction *num / *den with den a power of ten: 0 ok, -1 not such a
** number, -2 too precise or too large (num or den beyond 10^18).  The
** rate_scale and window keys are read through it so that a scale of 1.1
** is 11/10 exactly, not the double nearest to it.
*/
int lsim_trace_decimal(const char *s, int64_t *num, int64_t *den);
/* A decimal number of seconds as ns, exactly: 0 ok, -1 syntax or finer
** than 1 ns, -2 beyond 2^63 ns. */
int lsim_trace_seconds_ns(const char *s, int64_t *ns);

/* ---- opening a trace -------------------------------------------------------- */

/* What to read.  Pointers are borrowed during lsim_trace_open only. */
typedef struct lsim_trace_spec {
  int format;        /* enum lsim_trace_format */
  const char *path;  /* every format but LSIM_TRACE_GEN */
  int skip_bad_rows; /* count and skip bad rows instead of failing */
  int64_t max_requests; /* stop after this many records; 0: all */
  int block_tokens;     /* Mooncake prefix block size; 0: 512 */
  const lsim_servegen_spec *servegen; /* LSIM_TRACE_SERVEGEN */
  /* LSIM_TRACE_GEN */
  int64_t gen_requests;
  double gen_rate_per_s;
  const lsim_len_dist *gen_prompt, *gen_output;
  const lsim_arrivals *gen_arrivals; /* NULL: Poisson, no modulation */
  const lsim_assign_spec *assign;    /* NULL: all defaults */
  const lsim_trace_ctl *ctl;         /* workload controls; NULL: none */
} lsim_trace_spec;

/* The catalog the records are assigned to.  ntenants == 0 is raw mode: no
** assignment, tenant and adapter are the trace's own values (an index, or a
** name numbered by first appearance) or -1.  Arrays are copied. */
typedef struct lsim_trace_ctx {
  uint64_t seed;
  int ntenants;                    /* 0..LSIM_TRACE_MAX_TENANTS */
  const char *const *tenant_names; /* ntenants names, or NULL */
  const int64_t *tenant_weights;   /* ntenants weights, or NULL: equal */
  int nadapters;                   /* catalog size; >= ntenants */
  double zipf_s;                   /* default Zipf exponent */
} lsim_trace_ctx;

typedef struct lsim_trace {
  struct lsim__trace_impl *impl; /* private */
} lsim_trace;

/* Open.  On error nothing is left open (lsim_trace_close is still safe). */
lsim_err lsim_trace_open(lsim_trace *t, const lsim_trace_spec *spec,
                         const lsim_trace_ctx *ctx, lsim_errbuf *eb);

/* The original entry point: a native CSV file, no assignment beyond the
** defaults, tenants and adapters checked against the given counts. */
lsim_err lsim_trace_open_csv(lsim_trace *t, const char *path, int ntenants,
                             int nadapters, lsim_errbuf *eb);

/* Next record: returns 1 and fills *rec, 0 at the end, or an lsim_err
** (LSIM_E_TRACE_*, message "file:line: field: what"). */
int lsim_trace_next(lsim_trace *t, lsim_trace_rec *rec, lsim_errbuf *eb);

void lsim_trace_close(lsim_trace *t);

#define LSIM_TRACE_NCODES 20 /* codes -60..-79 */

/* What a trace did so far (read-only snapshot). */
typedef struct lsim_trace_info {
  int64_t records;           /* records returned */
  int64_t skipped;           /* bad rows skipped (skip_bad_rows) */
  int64_t skipped_by_code[LSIM_TRACE_NCODES]; /* index: -60 - code */
  char first_skipped[512];   /* message of the first skipped row */
  int64_t dropped_failed;    /* BurstGPT rows of failed requests (0 output) */
  char source[160];          /* "azure file.csv", "generator gamma cv=2" */
  char assign[256];          /* the assignment in words */
  char workload[256];        /* the workload controls in words; "" none */
  int64_t before_window;     /* records dropped before the window start */
} lsim_trace_info;

void lsim_trace_get_info(const lsim_trace *t, lsim_trace_info *out);

/* ---- writing the native formats ---------------------------------------------- */

typedef struct lsim_trace_writer {
  FILE *fp;   /* private */
  int jsonl;  /* read-only */
  int64_t n;  /* read-only: records written */
  char path[LSIM_TRACE_PATH_MAX];
} lsim_trace_writer;

/* Create path ("-" is stdout) and write the header; `comment`, when not
** NULL, is written as '#' lines after the CSV header (not for JSONL). */
lsim_err lsim_trace_writer_open(lsim_trace_writer *w, const char *path,
                                int jsonl, const char *comment,
                                lsim_errbuf *eb);
lsim_err lsim_trace_writer_put(lsim_trace_writer *w, const lsim_trace_rec *r,
                               lsim_errbuf *eb);
/* Flush and close (stdout is flushed, not closed). */
lsim_err lsim_trace_writer_close(lsim_trace_writer *w, lsim_errbuf *eb);

/* ---- statistics ------------------------------------------------------------------ */

/* Accumulates what `lorasim trace stats` prints.  Memory grows with the
** distinct lengths, tenants, adapters and prefix blocks seen, and with
** nothing else; the arrival-rate histogram keeps at most 4096 bins (their
** width doubles as the span grows). */
typedef struct lsim_trace_stats lsim_trace_stats;

lsim_err lsim_trace_stats_new(lsim_trace_stats **s, lsim_errbuf *eb);
lsim_err lsim_trace_stats_add(lsim_trace_stats *s, const lsim_trace_rec *r,
                              lsim_errbuf *eb);
/* The report, in plain "key  value" lines (docs/TRACES.md). */
void lsim_trace_stats_print(const lsim_trace_stats *s, FILE *f);
/* Figures for tests and callers. */
typedef struct lsim_trace_summary {
  int64_t requests;
  int64_t first_ns, last_ns;
  double rate_per_s;
  int64_t prompt_p50, prompt_p90, prompt_p99, prompt_max;
  int64_t output_p50, output_p90, output_p99, output_max;
  double prompt_mean, output_mean;
  int64_t tenants, adapters; /* distinct assigned values (-1 not counted) */
  int64_t blocks, distinct_blocks, reused_blocks; /* prefix hashes */
  double reuse_ratio; /* reused_blocks / blocks; 0 without blocks */
} lsim_trace_summary;
void lsim_trace_stats_summary(const lsim_trace_stats *s,
                              lsim_trace_summary *out);
/* Write the arrival-rate series ("seconds requests_per_second" lines). */
lsim_err lsim_trace_stats_rate_dat(const lsim_trace_stats *s, const char *path,
                                   lsim_errbuf *eb);
void lsim_trace_stats_release(lsim_trace_stats *s);

#endif /* LSIM_TRACE_H */
