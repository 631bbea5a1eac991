/*
** servegen.c: arrivals generated from ServeGen per-client window statistics.
**
** A ServeGen file describes one client (an API customer) of one model, one
** 600 s window per line, no header:
**
**   timestamp_s,rate_req_per_s,cv,pattern,shape,scale
**   337800,11.3266,1.1339,Gamma,0.7777,0.0454
**
** pattern is Gamma, Weibull, or empty (an idle window, or rate 0).  The
** source is a file or a directory of chunk-<client>-trace.csv files.
**
** Per client and window [ts, ts + 600): inter-arrival gaps are drawn from
** the window's fitted family with its shape, and with the scale chosen so
** the mean gap is 1 / (rate x rate_scale) (ServeGen's own generator also
** rescales the fitted gaps to the window's rate); the first arrival is one
** gap after ts, and a gap that crosses the window's end ends the window.  A
** window with a rate but no pattern is Poisson.  Each client has its own
** stream (LSIM_TRACE_RNG_CLIENT + client ordinal), so adding a client does
** not move another's arrivals.  Clients are merged by (time, ordinal) with a
** binary heap; each keeps one open file and one window, so memory depends
** on the number of clients only.
**
** A record's tenant is the client's ordinal (clients sorted by id) with the
** name "client-<id>"; lengths come from the spec's distributions, drawn
** from LSIM_TRACE_RNG_SG_LENGTHS in arrival order.
*/
#include "internal.h"

#include "engine/checked.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define LSIM__SG_WINDOW_S 600.0
/* The last window start accepted: (9e9 + 600) s in ns stays below 2^63
** (found by fuzz_trace_servegen: a 3.4e10 s stamp overflowed the ns cast). */
#define LSIM__SG_MAX_TS_S 9e9
/* Shapes a Gamma or Weibull window may have: the fitted shapes of the real
** m-small trace lie in [0.0099, 365] (Gamma) and [0.16, 2.3] (Weibull).
** Outside these the samplers lose the mean (a Gamma shape of 1e-300 draws
** every gap as 0, so the window never ends; a Weibull shape under 0.01
** overflows pow and tgamma). */
#define LSIM__SG_MIN_SHAPE 1e-3
#define LSIM__SG_MAX_SHAPE 1e4
/* The most arrivals one window of one client may draw (a rate of 10^6
** req/s for 600 s is 6 x 10^8); past it the window is a row error, so a
** degenerate fit cannot loop forever. */
#define LSIM__SG_MAX_WINDOW_ARRIVALS 1000000000LL
#define LSIM__SG_MAX_RATE 1e6

typedef struct lsim__client {
  int id, ordinal;
  char name[32];   /* "client-<id>" */
  lsim__lines L;
  char path[LSIM_TRACE_PATH_MAX];
  lsim_rng rng;
  int in_window, done;
  double prev_ts;   /* previous row's timestamp, -1 none */
  double win_end;   /* s */
  double rate;      /* req/s after rate_scale */
  int pattern;      /* 0 exponential, 1 gamma, 2 weibull */
  double shape, scale;
  double t;         /* the pending arrival, s */
  int64_t drawn;    /* gaps drawn in the current window */
} lsim__client;

typedef struct lsim__sg {
  lsim__src base;
  lsim_servegen_spec spec;
  double end_s;    /* INFINITY when open-ended */
  int n;
  lsim__client *c; /* n clients */
  int *heap, nheap;
  int *todo, ntodo; /* clients whose next arrival must be found */
  lsim__len prompt, output;
  lsim_rng rl;
} lsim__sg;

/* ---- the client files ------------------------------------------------------ */

/* "chunk-<id>-trace.csv" -> id, else -1. */
static int lsim__chunk_id(const char *name) {
  if (strncmp(name, "chunk-", 6) != 0)
    return -1;
  const char *p = name + 6, *e = p;
  while (*e >= '0' && *e <= '9')
    e++;
  if (e == p || e - p > 6 || strcmp(e, "-trace.csv") != 0)
    return -1;
  return atoi(p);
}

static int lsim__cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* The client ids of path (a directory, or one file: id from its name or
** 0), sorted.  *dir says whether path is a directory. */
static lsim_err lsim__sg_list(const char *path, int **ids, int *n, int *dir,
                              lsim_errbuf *eb) {
  struct stat st;
  *ids = NULL;
  *n = 0;
  if (stat(path, &st) != 0) {
    int e = errno;
    return lsim_fail(eb, LSIM_E_IO, "%s: cannot open: %s", path, strerror(e));
  }
  *dir = S_ISDIR(st.st_mode);
  if (!*dir) {
    const char *base = strrchr(path, '/');
    int id = lsim__chunk_id(base ? base + 1 : path);
    *ids = malloc(sizeof **ids);
    if (!*ids)
      return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
    (*ids)[0] = id < 0 ? 0 : id;
    *n = 1;
    return 0;
  }
  DIR *d = opendir(path);
  if (!d) {
    int e = errno;
    return lsim_fail(eb, LSIM_E_IO, "%s: cannot open: %s", path, strerror(e));
  }
  int cap = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    int id = lsim__chunk_id(de->d_name);
    if (id < 0)
      continue;
    if (*n == LSIM_TRACE_MAX_CLIENTS) {
      closedir(d);
      free(*ids);
      *ids = NULL;
      return lsim_fail(eb, LSIM_E_TRACE_RANGE, "%s: more than %d clients",
                       path, LSIM_TRACE_MAX_CLIENTS);
    }
    if (*n == cap) {
      cap = cap ? cap * 2 : 64;
      int *ni = realloc(*ids, (size_t)cap * sizeof *ni);
      if (!ni) {
        closedir(d);
        free(*ids);
        *ids = NULL;
        return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
      }
      *ids = ni;
    }
    (*ids)[(*n)++] = id;
  }
  closedir(d);
  if (*n == 0)
    return lsim_fail(eb, LSIM_E_TRACE_MISSING,
                     "%s: no chunk-<client>-trace.csv files", path);
  qsort(*ids, (size_t)*n, sizeof **ids, lsim__cmp_int); /* readdir order varies */
  return 0;
}

static void lsim__sg_file(char *out, size_t size, const char *path, int dir,
                          int id) {
  if (dir)
    snprintf(out, size, "%s/chunk-%d-trace.csv", path, id);
  else
    snprintf(out, size, "%s", path);
}

/* One window row, checked.  Returns 0 and fills the fields, or a row error. */
static lsim_err lsim__sg_row(const char *path, int64_t line, char *buf,
                             double *ts, double *rate, int *pattern,
                             double *shape, double *scale, lsim_errbuf *eb) {
  char *f[7], q[LSIM__SHOW_BUF];
  int nf;
  lsim_err ce = lsim__csv_fields(buf, f, 6, &nf, path, line, eb);
  if (ce)
    return ce;
  if (nf != 6)
    return lsim__rowerr(eb, LSIM_E_TRACE_PARSE, path, line, NULL,
                        "expected 6 fields: timestamp, rate, cv, pattern, "
                        "shape, scale (got %d)",
                        nf);
  static const char *const names[] = {"timestamp", "rate", "cv", "pattern",
                                      "shape", "scale"};
  double v[6] = {0};
  for (int i = 0; i < 6; i++) {
    if (i == 3)
      continue;
    if (i == 2 && !*f[i])
      continue; /* cv may be empty in an idle window */
    if (lsim__p_f64(f[i], &v[i]))
      return lsim__rowerr(eb, *f[i] ? LSIM_E_TRACE_PARSE : LSIM_E_TRACE_MISSING,
                          path, line, names[i], "expected a number (got '%s')",
                          lsim__show(f[i], q, sizeof q));
    if (v[i] < 0)
      return lsim__rowerr(eb, LSIM_E_TRACE_RANGE, path, line, names[i],
                          "must not be negative (got '%s')",
                          lsim__show(f[i], q, sizeof q));
  }
  if (!*f[3])
    *pattern = 0;
  else if (strcmp(f[3], "Gamma") == 0)
    *pattern = 1;
  else if (strcmp(f[3], "Weibull") == 0)
    *pattern = 2;
  else
    return lsim__rowerr(eb, LSIM_E_TRACE_UNKNOWN, path, line, "pattern",
                        "expected Gamma, Weibull or empty (got '%s')",
                        lsim__show(f[3], q, sizeof q));
  /* arrivals become int64 ns: every window must end before 2^63 ns */
  if (v[0] > LSIM__SG_MAX_TS_S)
    return lsim__rowerr(eb, LSIM_E_TRACE_RANGE, path, line, "timestamp",
                        "above %.0f s (got '%s')", LSIM__SG_MAX_TS_S,
                        lsim__show(f[0], q, sizeof q));
  if (v[1] > LSIM__SG_MAX_RATE)
    return lsim__rowerr(eb, LSIM_E_TRACE_RANGE, path, line, "rate",
                        "above %.0f req/s (got '%s')", LSIM__SG_MAX_RATE,
                        lsim__show(f[1], q, sizeof q));
  if (*pattern && v[1] > 0 &&
      !(v[4] >= LSIM__SG_MIN_SHAPE && v[4] <= LSIM__SG_MAX_SHAPE))
    return lsim__rowerr(eb, LSIM_E_TRACE_RANGE, path, line, "shape",
                        "must be in [%g, %g] for a %s window (got '%s')",
                        LSIM__SG_MIN_SHAPE, LSIM__SG_MAX_SHAPE, f[3],
                        lsim__show(f[4], q, sizeof q));
  *ts = v[0];
  *rate = v[1];
  *shape = v[4];
  *scale = v[5];
  return 0;
}

lsim_err lsim__servegen_rates(const char *path, int **ids_out, double **rates,
                              int *n_out, lsim_errbuf *eb) {
  int *ids, n, dir;
  lsim_err rc = lsim__sg_list(path, &ids, &n, &dir, eb);
  if (rc)
    return rc;
  double *r = calloc((size_t)n, sizeof *r);
  if (!r) {
    free(ids);
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  }
  for (int i = 0; !rc && i < n; i++) {
    char file[LSIM_TRACE_PATH_MAX];
    lsim__sg_file(file, sizeof file, path, dir, ids[i]);
    lsim__lines L;
    if ((rc = lsim__lines_open(&L, file, eb)))
      break;
    int64_t rows = 0;
    double sum = 0;
    int fatal;
    for (;;) {
      int lr = lsim__lines_next(&L, eb, &fatal);
      if (lr <= 0) {
        rc = lr;
        break;
      }
      if (lsim__skippable(L.buf))
        continue;
      double ts, rate, shape, scale;
      int pat;
      if ((rc = lsim__sg_row(file, L.line, L.buf, &ts, &rate, &pat, &shape,
                             &scale, eb)))
        break;
      sum += rate;
      rows++;
    }
    lsim__lines_close(&L);
    r[i] = rows ? sum / (double)rows : 0;
  }
  if (rc) {
    free(ids);
    free(r);
    return rc;
  }
  *ids_out = ids;
  *rates = r;
  *n_out = n;
  return 0;
}

/* ---- the heap of clients, by (pending arrival, ordinal) ---------------------- */

static int lsim__before(const lsim__sg *g, int a, int b) {
  const lsim__client *x = &g->c[a], *y = &g->c[b];
  return x->t < y->t || (x->t == y->t && x->ordinal < y->ordinal);
}

static void lsim__heap_push(lsim__sg *g, int c) {
  int i = g->nheap++;
  g->heap[i] = c;
  while (i > 0) {
    int p = (i - 1) / 2;
    if (!lsim__before(g, g->heap[i], g->heap[p]))
      break;
    int t = g->heap[i];
    g->heap[i] = g->heap[p];
    g->heap[p] = t;
    i = p;
  }
}

static int lsim__heap_pop(lsim__sg *g) {
  int top = g->heap[0];
  g->heap[0] = g->heap[--g->nheap];
  int i = 0;
  for (;;) {
    int l = 2 * i + 1, r = l + 1, m = i;
    if (l < g->nheap && lsim__before(g, g->heap[l], g->heap[m]))
      m = l;
    if (r < g->nheap && lsim__before(g, g->heap[r], g->heap[m]))
      m = r;
    if (m == i)
      break;
    int t = g->heap[i];
    g->heap[i] = g->heap[m];
    g->heap[m] = t;
    i = m;
  }
  return top;
}

/* Find client c's next arrival in [start, end): 1 found, 0 the client is
** done, < 0 a row error (the row is consumed; call again) or fatal. */
static int lsim__sg_advance(lsim__sg *g, lsim__client *c, lsim_errbuf *eb,
                            int *fatal) {
  *fatal = 0;
  for (;;) {
    if (!c->in_window) {
      int lr = lsim__lines_next(&c->L, eb, fatal);
      if (lr < 0)
        return lr;
      *fatal = 0; /* a line was read: its errors are row errors */
      if (lr == 0) {
        c->done = 1;
        return 0;
      }
      if (lsim__skippable(c->L.buf))
        continue;
      double ts, rate, shape, scale;
      int pat;
      lsim_err e = lsim__sg_row(c->path, c->L.line, c->L.buf, &ts, &rate, &pat,
                                &shape, &scale, eb);
      if (e)
        return e;
      if (c->prev_ts >= 0 && ts < c->prev_ts + LSIM__SG_WINDOW_S)
        return lsim__rowerr(eb, LSIM_E_TRACE_ORDER, c->path, c->L.line,
                            "timestamp",
                            "%.17g overlaps the previous window (starts %.17g)",
                            ts, c->prev_ts);
      c->prev_ts = ts;
      if (ts >= g->end_s) {
        c->done = 1;
        return 0;
      }
      rate *= g->spec.rate_scale;
      if (ts + LSIM__SG_WINDOW_S <= g->spec.start_s || !(rate > 0))
        continue;
      c->in_window = 1;
      c->win_end = ts + LSIM__SG_WINDOW_S;
      if (c->win_end > g->end_s)
        c->win_end = g->end_s;
      c->rate = rate;
      c->pattern = pat;
      c->shape = shape;
      c->scale = scale;
      c->t = ts;
      c->drawn = 0;
    }
    if (++c->drawn > LSIM__SG_MAX_WINDOW_ARRIVALS) {
      c->in_window = 0; /* the row is consumed: a skip goes on after it */
      return lsim__rowerr(eb, LSIM_E_TRACE_RANGE, c->path, c->L.line, NULL,
                          "the window draws more than %lld arrivals",
                          (long long)LSIM__SG_MAX_WINDOW_ARRIVALS);
    }
    double gap; /* mean 1 / rate */
    if (c->pattern == 1)
      gap = lsim__gamma(&c->rng, c->shape) / (c->shape * c->rate);
    else if (c->pattern == 2)
      gap = lsim__weibull(&c->rng, c->shape) /
            (tgamma(1.0 + 1.0 / c->shape) * c->rate);
    else
      gap = -log1p(-lsim_rng_unit(&c->rng)) / c->rate;
    if (!(gap >= 0)) { /* NaN from a degenerate draw: the row is bad */
      c->in_window = 0;
      return lsim__rowerr(eb, LSIM_E_TRACE_RANGE, c->path, c->L.line, "shape",
                          "the window's gaps are not numbers (shape %g)",
                          c->shape);
    }
    c->t += gap;
    if (!(c->t < c->win_end)) {
      c->in_window = 0;
      continue;
    }
    if (c->t < g->spec.start_s)
      continue;
    return 1;
  }
}

static int lsim__sg_next(lsim__src *s, lsim__raw *r, lsim_errbuf *eb,
                         int *fatal) {
  lsim__sg *g = (lsim__sg *)s;
  while (g->ntodo > 0) {
    lsim__client *c = &g->c[g->todo[g->ntodo - 1]];
    int rc = lsim__sg_advance(g, c, eb, fatal);
    if (rc < 0)
      return rc; /* the client stays on the list: its next row comes next */
    g->ntodo--;
    if (rc == 1)
      lsim__heap_push(g, c->ordinal);
  }
  *fatal = 0;
  if (g->nheap == 0)
    return 0;
  int k = lsim__heap_pop(g);
  lsim__client *c = &g->c[k];
  memset(r, 0, sizeof *r);
  r->deadline_ns = r->cancel_ns = -1;
  r->time_field = "timestamp";
  r->line = c->L.line;
  /* t < win_end <= 9e9 + 600 s and t >= start_s: the cast is in range */
  if (lsim_d2i64_checked((c->t - g->spec.start_s) * 1e9, 0, INT64_MAX,
                         &r->arrival_ns)) {
    *fatal = 1;
    return LSIM_BUG(eb, "servegen arrival out of the ns range");
  }
  r->has_tenant = 1;
  r->tenant = c->ordinal;
  r->prompt = lsim__len_draw(&g->prompt, &g->rl);
  r->output = lsim__len_draw(&g->output, &g->rl);
  g->todo[g->ntodo++] = k;
  /* messages about this record name the client's file */
  snprintf(s->path, sizeof s->path, "%s", c->path);
  return 1;
}

static void lsim__sg_close(lsim__src *s) {
  lsim__sg *g = (lsim__sg *)s;
  for (int i = 0; i < g->n; i++)
    lsim__lines_close(&g->c[i].L);
  free(g->c);
  free(g->heap);
  free(g->todo);
  lsim__len_release(&g->prompt);
  lsim__len_release(&g->output);
  free(g);
}

static const lsim__src_ops lsim__sg_ops = {
    /* .next = */ lsim__sg_next,
    /* .close = */ lsim__sg_close,
};

static lsim_err lsim__servegen_open(lsim__src **out, const char *path,
                             const lsim_servegen_spec *sp, uint64_t seed,
                             lsim_errbuf *eb) {
  if (!sp || !(sp->rate_scale > 0) || sp->start_s < 0 || sp->duration_s < 0 ||
      sp->nclients < 0 || sp->nclients > 64)
    return lsim_fail(eb, LSIM_E_USAGE, "servegen configuration invalid");
  int *ids, n, dir;
  lsim_err rc = lsim__sg_list(path, &ids, &n, &dir, eb);
  if (rc)
    return rc;
  lsim__sg *g = calloc(1, sizeof *g);
  if (!g) {
    free(ids);
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  }
  g->base.ops = &lsim__sg_ops;
  g->spec = *sp;
  g->end_s = sp->duration_s > 0 ? sp->start_s + sp->duration_s : INFINITY;
  snprintf(g->base.path, sizeof g->base.path, "%s", path);
  /* the selected clients, in id order */
  int nsel = sp->nclients ? sp->nclients : n;
  int *sel = malloc((size_t)nsel * sizeof *sel);
  g->c = calloc((size_t)nsel, sizeof *g->c);
  g->heap = malloc((size_t)nsel * sizeof *g->heap);
  g->todo = malloc((size_t)nsel * sizeof *g->todo);
  if (!sel || !g->c || !g->heap || !g->todo) {
    free(sel);
    free(ids);
    lsim__sg_close(&g->base);
    return lsim_fail(eb, LSIM_E_NOMEM, "out of memory");
  }
  if (sp->nclients) {
    memcpy(sel, sp->clients, (size_t)nsel * sizeof *sel);
    qsort(sel, (size_t)nsel, sizeof *sel, lsim__cmp_int);
    for (int i = 0; !rc && i < nsel; i++) {
      int found = 0;
      for (int j = 0; j < n; j++)
        found |= ids[j] == sel[i];
      if (!found)
        rc = lsim_fail(eb, LSIM_E_TRACE_MISSING, "%s: no client %d", path,
                       sel[i]);
      else if (i > 0 && sel[i] == sel[i - 1])
        rc = lsim_fail(eb, LSIM_E_USAGE, "%s: client %d listed twice", path,
                       sel[i]);
    }
  } else {
    memcpy(sel, ids, (size_t)n * sizeof *sel);
  }
  free(ids);
  g->n = nsel;
  for (int i = 0; !rc && i < nsel; i++) {
    lsim__client *c = &g->c[i];
    c->id = sel[i];
    c->ordinal = i;
    c->prev_ts = -1;
    snprintf(c->name, sizeof c->name, "client-%d", c->id);
    lsim__sg_file(c->path, sizeof c->path, path, dir, c->id);
    lsim_rng_init(&c->rng, seed, LSIM_TRACE_RNG_CLIENT + (uint64_t)i);
    rc = lsim__lines_open(&c->L, c->path, eb);
    g->todo[g->ntodo++] = nsel - 1 - i; /* popped from the end: id order */
  }
  free(sel);
  if (!rc)
    rc = lsim__len_init(&g->prompt, &sp->prompt, eb);
  if (!rc)
    rc = lsim__len_init(&g->output, &sp->output, eb);
  if (rc) {
    lsim__sg_close(&g->base);
    return rc;
  }
  lsim_rng_init(&g->rl, seed, LSIM_TRACE_RNG_SG_LENGTHS);
  snprintf(g->base.desc, sizeof g->base.desc,
           "servegen %.80s, %d client(s), from %g s%s, rate x%g", path, nsel,
           sp->start_s, sp->duration_s > 0 ? " for a duration" : " to the end",
           sp->rate_scale);
  *out = &g->base;
  return 0;
}

static lsim_err lsim__servegen_import(lsim__src **out, const lsim__src_args *a,
                                      lsim_errbuf *eb) {
  return lsim__servegen_open(out, a->path, a->servegen, a->seed, eb);
}

/* window statistics, not requests; its tenants are the clients */
const lsim__importer lsim__importer_servegen = {
    .name = "servegen", .open = lsim__servegen_import, .file_based = 1,
    .tenant_modulo = 1, .guess_dir = 1, .sample_name = "chunk-0-trace.csv"};
