/*
** internal.h: what the trace sources share (private to traces/).
**
** A source (native.c, azure.c, mooncake.c, burstgpt.c, servegen.c, gen.c)
** yields "raw" records: the fields as the file gives them, already checked
** for syntax and range, with the tenant and adapter as the file names them
** (an index, a name, or nothing).  trace.c checks the order of arrivals,
** applies the assignment (assign.c) and counts skipped rows.
**
** A source's next() returns 1 with a record, 0 at the end, or a negative
** code.  A negative code with *fatal == 0 is a bad row: the row has been
** consumed and next() may be called again (skip_bad_rows).  A fatal error
** (header, I/O, memory) ends the stream.
*/
#ifndef LSIM_TRACE_INTERNAL_H
#define LSIM_TRACE_INTERNAL_H

#include <stdarg.h>
#include <stdio.h>

#include "trace.h"

#if defined(__GNUC__)
#define LSIM__FMT(a, b) __attribute__((format(printf, a, b)))
#else
#define LSIM__FMT(a, b)
#endif

/* ---- raw records and sources --------------------------------------------- */

typedef struct lsim__raw {
  int64_t arrival_ns;     /* on the trace clock; may be negative when a file
                             with wall-clock stamps goes back in time */
  const char *time_field; /* column or key name, for ORDER messages */
  int has_tenant;
  int64_t tenant;          /* when has_tenant and !tenant_name */
  const char *tenant_name; /* when has_tenant and the file gave a name */
  int has_adapter;
  int64_t adapter;
  const char *adapter_name;
  int64_t prompt, output;
  int64_t deadline_ns, cancel_ns; /* -1 none */
  const char *slo;                /* NULL none */
  int nblocks;
  const uint64_t *blocks;
  int64_t line; /* 0 when the record has no line (generators) */
} lsim__raw;

typedef struct lsim__src lsim__src;

typedef struct lsim__src_ops {
  int (*next)(lsim__src *s, lsim__raw *r, lsim_errbuf *eb, int *fatal);
  void (*close)(lsim__src *s); /* frees s */
} lsim__src_ops;

struct lsim__src {
  const lsim__src_ops *ops;
  char path[LSIM_TRACE_PATH_MAX]; /* for messages */
  char desc[160];                 /* the source in words */
  int generated;                  /* 1: tenants drawn by weight already */
  int64_t dropped_failed;         /* BurstGPT failed requests dropped */
};

/*
** An importer: one trace format, defined in its own file (native.c holds
** two, csv and jsonl) and listed once in trace.c's LSIM__IMPORTERS.  Its
** index in that list is its enum lsim_trace_format value; the formats
** trace.h names keep their enum, a new one needs none.
*/
typedef struct lsim__src_args {
  const char *path;                   /* file-based importers */
  int block_tokens;                   /* Mooncake prefix block size; 0: 512 */
  const lsim_servegen_spec *servegen; /* ServeGen; NULL elsewhere */
  uint64_t seed;
  /* the whole request (the generator reads it); NULL when a file is
  ** opened for an empirical length distribution */
  const lsim_trace_spec *spec;
  const lsim_trace_ctx *ctx;
} lsim__src_args;

typedef struct lsim__importer {
  const char *name; /* the format name of scenarios and --format */
  lsim_err (*open)(lsim__src **out, const lsim__src_args *a,
                   lsim_errbuf *eb);
  int file_based;    /* 1: reads a.path; 0: the generator */
  int per_request;   /* 1: one record per request of the file (an empirical
                        length distribution may read it) */
  int tenant_modulo; /* 1: its tenants are labels (models, clients): the
                        AUTO tenant mode becomes MODULO */
  /* lsim_trace_format_guess: a directory is the first importer with
  ** guess_dir, a path ending in guess_suffix the first with that suffix,
  ** anything else the first importer of the list */
  int guess_dir;
  const char *guess_suffix;
  const char *sample_name; /* the file name a fuzz harness writes */
} lsim__importer;

/* The importer of enum value `format`, or NULL. */
const lsim__importer *lsim__importer_at(int format);

/* Any file format, by enum lsim_trace_format (not the generator). */
lsim_err lsim__src_open_file(lsim__src **out, int format, const char *path,
                             int block_tokens,
                             const lsim_servegen_spec *sg, uint64_t seed,
                             lsim_errbuf *eb);

/* ServeGen: the ids and time-averaged rates (req/s) of the clients of a
** file or directory, sorted by id; *ids and *rates are malloc'd. */
lsim_err lsim__servegen_rates(const char *path, int **ids, double **rates,
                              int *n, lsim_errbuf *eb);

/* ---- messages -------------------------------------------------------------- */

/* "path:line: field: what" (line 0 and NULL field are left out). */
lsim_err lsim__rowerr(lsim_errbuf *eb, lsim_err code, const char *path,
                      int64_t line, const char *field, const char *fmt, ...)
    LSIM__FMT(6, 7);

/* A value quoted for a message: at most LSIM__SHOW_MAX bytes of s, each
** control, non-ASCII, quote or backslash byte written as \xNN, cut with
** "..." when longer, so an error never echoes more than a short excerpt of
** a file (docs/TRACES.md, "Errors").  Header errors quote nothing. */
#define LSIM__SHOW_MAX 40
#define LSIM__SHOW_BUF (4 * LSIM__SHOW_MAX + 4)
const char *lsim__show(const char *s, char *out, size_t size);

/* ---- lines ------------------------------------------------------------------- */

typedef struct lsim__lines {
  int fd;      /* -1 closed */
  char *rbuf;  /* read-ahead, rpos..rlen unread */
  size_t rpos, rlen;
  int eof;
  int skipping; /* the rest of an over-long line is still to be read */
  char *buf; /* the current line, NUL-terminated, without \r\n */
  size_t cap;
  size_t len;
  int64_t line; /* number of the current line, from 1 */
  const char *path;
} lsim__lines;

/* Open path for reading as a trace: a regular file only.  The type is
** checked before the open (a FIFO would block in open, a device never
** end) and again on the descriptor, which is opened non-blocking and then
** made blocking.  E_IO naming the path and the file's kind otherwise. */
lsim_err lsim__open_regular(const char *path, int *fd, lsim_errbuf *eb);
/* lsim__open_regular and a line buffer; on failure an E_IO message. */
lsim_err lsim__lines_open(lsim__lines *L, const char *path, lsim_errbuf *eb);
/* 1 a line, 0 end of file, < 0: E_IO (fatal), or a bad line with *fatal 0
** and the line counted: one of LSIM_TRACE_MAX_LINE bytes or more, NUL
** bytes included (E_TRACE_PARSE, reported as soon as the limit is passed;
** the rest of the line is skipped by the next call), or a line holding a
** NUL byte (E_TRACE_PARSE naming the column). */
int lsim__lines_next(lsim__lines *L, lsim_errbuf *eb, int *fatal);
void lsim__lines_close(lsim__lines *L);

/* 1 when the line is empty, blank or a '#' comment. */
int lsim__skippable(const char *s);

/* Split one CSV line in place into f[0..max) by RFC 4180: a quoted field
** may hold commas and doubled quotes ("" is one), blanks around a field are
** trimmed.  *nf is the number of fields (max + 1 when there are more).  A
** quote out of place is E_TRACE_PARSE "path:ln: column N: ..." (the line
** is not quoted in the message). */
lsim_err lsim__csv_fields(char *line, char **f, int max, int *nf,
                          const char *path, int64_t ln, lsim_errbuf *eb);

/* ---- numbers ------------------------------------------------------------------ */

/* A decimal integer (optional sign).  0 ok, -1 not an integer, -2 out of
** the int64 range. */
int lsim__p_i64(const char *s, int64_t *out);
/* A non-negative decimal "123" or "123.456" (at most 9 fraction digits,
** no exponent) times unit_ns, exactly: 0 ok, -1 syntax, -2 too large. */
int lsim__p_time(const char *s, int64_t unit_ns, int64_t *ns);
/* A finite decimal number (strtod): 0 ok, -1 not a number. */
int lsim__p_f64(const char *s, double *out);
/* A token count in [1, LSIM_TRACE_MAX_TOKENS] with the row error: 0 or a
** negative code (message names the field). */
lsim_err lsim__p_tokens(const char *s, const char *path, int64_t line,
                        const char *field, int64_t *out, lsim_errbuf *eb);
/* 1 when s is a valid name: 1..63 characters of [A-Za-z0-9_.:/@+-]. */
int lsim__name_ok(const char *s);
/* 1 when s may be quoted in a header error: 1..40 bytes of
** [A-Za-z0-9_ ()-] (a column name, not a line of an arbitrary file). */
int lsim__plain_word(const char *s);
/* 1 when s is made of decimal digits only (and is not empty). */
int lsim__all_digits(const char *s);

/* ---- a flat JSON object on one line (cJSON) ----------------------------------- */

#define LSIM__JMAX 24

enum { LSIM__J_NUM = 1, LSIM__J_STR, LSIM__J_ARR, LSIM__J_NULL, LSIM__J_BOOL };

typedef struct lsim__jkv {
  const char *key;
  int type;
  const char *num; /* LSIM__J_NUM: the number's text, NUL-terminated */
  const char *str; /* LSIM__J_STR: unescaped, NUL-terminated */
  int arr_off, arr_n; /* LSIM__J_ARR: elements in lsim__jobj.arr */
} lsim__jkv;

typedef struct lsim__jobj {
  int n;
  lsim__jkv kv[LSIM__JMAX];
  uint64_t *arr; /* array elements (non-negative integers) of every key */
  int arr_n, arr_cap;
  struct cJSON *root; /* the parsed line: keys and strings point into it */
} lsim__jobj;

/* Parse `line` (modified in place) as one object of scalars and arrays of
** non-negative integers, through cJSON, every number kept as its text so
** integers are read exactly.  0 ok; -1 with why[] set on a syntax error,
** a nested object, a repeated key, a string holding \u0000, or more than
** LSIM__JMAX keys; -2 out of memory.  Pointers stay valid until the next
** call or lsim__json_release. */
int lsim__json_line(char *line, lsim__jobj *o, char *why, size_t whylen);
const lsim__jkv *lsim__json_get(const lsim__jobj *o, const char *key);
/* The length of s as a JSON array of non-negative integers (token ids):
** 0 and *n, -1 not such an array (or text after it), -2 out of memory. */
int lsim__json_int_array_len(const char *s, int64_t *n);
void lsim__json_release(lsim__jobj *o);

/* ---- hash tables ---------------------------------------------------------------- */

/* uint64 key -> int64 value, open addressing; iteration order is never
** used for a decision. */
typedef struct lsim__map {
  uint64_t *keys;
  int64_t *vals;
  unsigned char *used;
  size_t cap, n;
} lsim__map;

/* Pointer to the value of key, inserted as 0 when absent (NULL: no
** memory).  *added (may be NULL) says whether it was inserted. */
int64_t *lsim__map_put(lsim__map *m, uint64_t key, int *added);
int64_t *lsim__map_get(const lsim__map *m, uint64_t key);
void lsim__map_release(lsim__map *m);

/* Strings numbered by first appearance: 0, 1, 2, ... */
typedef struct lsim__names {
  lsim__map by_hash; /* FNV-1a hash -> number + 1 (chained through next) */
  char **str;        /* number -> owned copy */
  int64_t *next;     /* number -> next number with the same hash, -1 */
  int64_t n, cap;
} lsim__names;

/* The number of s, or -1 when absent. */
int64_t lsim__names_find(const lsim__names *t, const char *s);
/* The number of s, adding it when absent; -1 out of memory. */
int64_t lsim__names_add(lsim__names *t, const char *s);
const char *lsim__names_str(const lsim__names *t, int64_t i);
void lsim__names_release(lsim__names *t);

/* ---- length distributions (gen.c) ------------------------------------------------- */

typedef struct lsim__len {
  lsim_len_dist d;
  int64_t *vals; /* empirical: distinct values, ascending */
  double *cdf;   /* empirical: cumulative counts */
  int n;
} lsim__len;

lsim_err lsim__len_init(lsim__len *l, const lsim_len_dist *d, lsim_errbuf *eb);
int64_t lsim__len_draw(const lsim__len *l, lsim_rng *r);
void lsim__len_release(lsim__len *l);

/* Gamma with shape k > 0 and scale 1; Weibull with shape k and scale 1. */
double lsim__gamma(lsim_rng *r, double k);
double lsim__weibull(lsim_rng *r, double k);

/* Index of the first cdf entry > u among cdf[0..n) (binary search). */
int lsim__search(const double *cdf, int n, double u);

/* ---- assignment (assign.c) ------------------------------------------------------- */

typedef struct lsim__assign lsim__assign;

lsim_err lsim__assign_new(lsim__assign **out, const lsim_assign_spec *spec,
                          const lsim_trace_ctx *ctx, int format,
                          lsim_errbuf *eb);
/* Fill rec->tenant, ->adapter, ->tenant_name, ->adapter_name from r; a bad
** row gives a negative code (message "path:line: field: what"). */
lsim_err lsim__assign_do(lsim__assign *a, const lsim__raw *r, int generated,
                         const char *path, lsim_trace_rec *rec,
                         lsim_errbuf *eb);
const char *lsim__assign_desc(const lsim__assign *a);
void lsim__assign_release(lsim__assign *a);

#endif /* LSIM_TRACE_INTERNAL_H */
