/*
** driver.c: a deterministic stand-in for libFuzzer's main (fuzz.h).
**
**   fuzz_X [-n N] [-s SEED] [-m MAXLEN] [-q] PATH...
**
** Every PATH is a file or a directory of files (not recursive; names
** sorted, so the order never depends on the file system).  The driver
** runs each file once as it is -- the seed corpus and the regression
** inputs -- and then N mutants.  A mutant is a corpus entry (picked by a
** splitmix64 stream seeded with SEED) with one to four edits stacked:
**
**   flip      one bit flipped
**   byte      one byte replaced by a random or an "interesting" one
**   insert    a few random bytes, or a token of the input's grammar
**             (quote, brace, comma, newline, a number), inserted
**   delete    a run of bytes removed
**   dup       a run of bytes duplicated in place
**   splice    the tail replaced by the tail of another corpus entry
**   number    a run of digits replaced by an edge value (0, -1, 2^31,
**             2^63, 2^64, 1e308, 1e-400, nan, a 30-digit integer, ...)
**   truncate  the input cut short
**
** Same SEED, same corpus: the same inputs, in the same order.  A crash is
** a crash of this process (a sanitizer report, abort, a signal); before
** each mutant the driver notes its index on stderr when -v is given, and
** on a crash the input is not saved -- rerun with the same -n/-s and -v
** to find it, or use the libFuzzer build, which saves crash-* files.
*/
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

typedef struct lsim__buf {
  uint8_t *p;
  size_t n;
} lsim__buf;

static lsim__buf *lsim__corpus;
static size_t lsim__ncorpus, lsim__cap;

static uint64_t lsim__state;

static uint64_t lsim__next(void) {
  uint64_t z = (lsim__state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static size_t lsim__below(size_t n) { return n ? (size_t)(lsim__next() % n) : 0; }

static void lsim__oom(void) {
  fputs("fuzz driver: out of memory\n", stderr);
  exit(1);
}

static void lsim__add_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    exit(1);
  }
  lsim__buf b = {NULL, 0};
  size_t cap = 0;
  for (;;) {
    if (b.n == cap) {
      cap = cap ? cap * 2 : 4096;
      uint8_t *np = realloc(b.p, cap);
      if (!np)
        lsim__oom();
      b.p = np;
    }
    size_t got = fread(b.p + b.n, 1, cap - b.n, f);
    if (!got)
      break;
    b.n += got;
  }
  fclose(f);
  if (lsim__ncorpus == lsim__cap) {
    lsim__cap = lsim__cap ? lsim__cap * 2 : 64;
    lsim__buf *nc = realloc(lsim__corpus, lsim__cap * sizeof *nc);
    if (!nc)
      lsim__oom();
    lsim__corpus = nc;
  }
  lsim__corpus[lsim__ncorpus++] = b;
}

static int lsim__cmp(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void lsim__add_path(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) {
    perror(path);
    exit(1);
  }
  if (!S_ISDIR(st.st_mode)) {
    lsim__add_file(path);
    return;
  }
  DIR *d = opendir(path);
  if (!d) {
    perror(path);
    exit(1);
  }
  char **names = NULL;
  size_t n = 0, cap = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (de->d_name[0] == '.')
      continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 64;
      char **nn = realloc(names, cap * sizeof *nn);
      if (!nn)
        lsim__oom();
      names = nn;
    }
    size_t len = strlen(path) + strlen(de->d_name) + 2;
    if (!(names[n] = malloc(len)))
      lsim__oom();
    snprintf(names[n++], len, "%s/%s", path, de->d_name);
  }
  closedir(d);
  if (n)
    qsort(names, n, sizeof *names, lsim__cmp);
  for (size_t i = 0; i < n; i++) {
    if (stat(names[i], &st) == 0 && S_ISREG(st.st_mode))
      lsim__add_file(names[i]);
    free(names[i]);
  }
  free(names);
}

/* ---- mutation --------------------------------------------------------------- */

static const char *const lsim__edges[] = {
    "0", "-1", "1", "-0", "2147483647", "2147483648", "-2147483649",
    "4294967296", "9223372036854775807", "9223372036854775808",
    "-9223372036854775809", "18446744073709551616", "1e308", "1e309",
    "-1e308", "1e-400", "4.9e-324", "nan", "NaN", "inf", "-inf", "0.5",
    "1.0000000000000002", "999999999999999999999999999999", "0x10", "1/0",
    "-3/4", "00", "1e3", ""};
static const char *const lsim__tokens[] = {
    "\"", "{", "}", "[", "]", ",", ":", "\n", "\r\n", "\\", "\\u0000",
    "null", "true", "false", "\"\":", "{}", "[]", "#", " ", "\t", "-",
    ".", "e", "\xff", "\xc3\xa9", "\"a\"", ",,", "\"\""};
static const uint8_t lsim__bytes[] = {0, 1, 0x7f, 0x80, 0xff, '\n', '"', ',',
                                      '0', '9', '-', '.', ' ', '{', '}'};

#define LSIM__NEDGES (sizeof lsim__edges / sizeof lsim__edges[0])
#define LSIM__NTOKENS (sizeof lsim__tokens / sizeof lsim__tokens[0])

/* Replace [at, at+del) of *b by ins[0..nins); b->p has room for maxlen. */
static void lsim__splice_in(lsim__buf *b, size_t maxlen, size_t at, size_t del,
                            const uint8_t *ins, size_t nins) {
  if (at > b->n)
    at = b->n;
  if (del > b->n - at)
    del = b->n - at;
  if (b->n - del + nins > maxlen)
    nins = maxlen - (b->n - del);
  memmove(b->p + at + nins, b->p + at + del, b->n - at - del);
  if (nins)
    memcpy(b->p + at, ins, nins);
  b->n = b->n - del + nins;
}

static void lsim__mutate_once(lsim__buf *b, size_t maxlen) {
  uint8_t tmp[64];
  size_t at = lsim__below(b->n + 1);
  switch (lsim__below(9)) {
  case 0: /* flip */
    if (b->n)
      b->p[lsim__below(b->n)] ^= (uint8_t)(1u << lsim__below(8));
    break;
  case 1: /* byte */
    if (b->n)
      b->p[lsim__below(b->n)] =
          lsim__below(2) ? (uint8_t)lsim__next()
                         : lsim__bytes[lsim__below(sizeof lsim__bytes)];
    break;
  case 2: { /* insert */
    if (lsim__below(2)) {
      const char *t = lsim__tokens[lsim__below(LSIM__NTOKENS)];
      lsim__splice_in(b, maxlen, at, 0, (const uint8_t *)t, strlen(t));
    } else {
      size_t n = 1 + lsim__below(8);
      for (size_t i = 0; i < n; i++)
        tmp[i] = (uint8_t)lsim__next();
      lsim__splice_in(b, maxlen, at, 0, tmp, n);
    }
    break;
  }
  case 3: /* delete */
    lsim__splice_in(b, maxlen, at, 1 + lsim__below(lsim__below(2) ? 4 : 64),
                    tmp, 0);
    break;
  case 4: { /* dup */
    size_t n = 1 + lsim__below(64);
    if (at + n > b->n)
      n = b->n - at;
    if (n && n <= sizeof tmp) {
      memcpy(tmp, b->p + at, n);
      lsim__splice_in(b, maxlen, at, 0, tmp, n);
    }
    break;
  }
  case 5: { /* splice: keep [0, at), then another entry's tail */
    const lsim__buf *o = &lsim__corpus[lsim__below(lsim__ncorpus)];
    size_t from = lsim__below(o->n + 1);
    size_t n = o->n - from;
    if (at + n > maxlen)
      n = maxlen - at;
    if (n)
      memcpy(b->p + at, o->p + from, n);
    b->n = at + n;
    break;
  }
  case 6:
  case 7: { /* number: the digit run at or after `at` becomes an edge value */
    size_t s = at;
    while (s < b->n && !(b->p[s] >= '0' && b->p[s] <= '9'))
      s++;
    if (s == b->n) {
      s = 0;
      while (s < b->n && !(b->p[s] >= '0' && b->p[s] <= '9'))
        s++;
    }
    size_t e = s;
    while (e < b->n && ((b->p[e] >= '0' && b->p[e] <= '9') || b->p[e] == '.' ||
                        b->p[e] == 'e' || b->p[e] == '-'))
      e++;
    if (s > 0 && b->p[s - 1] == '-')
      s--;
    const char *v = lsim__edges[lsim__below(LSIM__NEDGES)];
    lsim__splice_in(b, maxlen, s, e - s, (const uint8_t *)v, strlen(v));
    break;
  }
  default: /* truncate */
    b->n = at;
    break;
  }
}

int main(int argc, char **argv) {
  long long runs = 1000;
  unsigned long long seed = 1;
  size_t maxlen = 1 << 16;
  int verbose = 0, i = 1;
  for (; i < argc && argv[i][0] == '-'; i++) {
    if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
      runs = atoll(argv[++i]);
    else if (strcmp(argv[i], "-s") == 0 && i + 1 < argc)
      seed = strtoull(argv[++i], NULL, 10);
    else if (strcmp(argv[i], "-m") == 0 && i + 1 < argc)
      maxlen = (size_t)atoll(argv[++i]);
    else if (strcmp(argv[i], "-v") == 0)
      verbose = 1;
    else {
      fprintf(stderr, "usage: %s [-n N] [-s SEED] [-m MAXLEN] [-v] PATH...\n",
              argv[0]);
      return 2;
    }
  }
  for (; i < argc; i++)
    lsim__add_path(argv[i]);
  if (!lsim__ncorpus) {
    fputs("fuzz driver: empty corpus\n", stderr);
    return 2;
  }
  for (size_t k = 0; k < lsim__ncorpus; k++) {
    if (verbose)
      fprintf(stderr, "corpus %zu\n", k);
    LLVMFuzzerTestOneInput(lsim__corpus[k].p, lsim__corpus[k].n);
  }
  lsim__state = seed;
  lsim__buf b = {malloc(maxlen ? maxlen : 1), 0};
  if (!b.p)
    lsim__oom();
  for (long long r = 0; r < runs; r++) {
    const lsim__buf *src = &lsim__corpus[lsim__below(lsim__ncorpus)];
    b.n = src->n < maxlen ? src->n : maxlen;
    memcpy(b.p, src->p, b.n);
    int edits = 1 + (int)lsim__below(4);
    for (int e = 0; e < edits; e++)
      lsim__mutate_once(&b, maxlen);
    if (verbose)
      fprintf(stderr, "mutant %lld\n", r);
    /* a private copy, exactly b.n bytes: ASan sees any read past the end */
    uint8_t *in = malloc(b.n ? b.n : 1);
    if (!in)
      lsim__oom();
    memcpy(in, b.p, b.n);
    LLVMFuzzerTestOneInput(in, b.n);
    free(in);
  }
  printf("fuzz driver: %zu corpus inputs, %lld mutants (seed %llu): no crash\n",
         lsim__ncorpus, runs, seed);
  for (size_t k = 0; k < lsim__ncorpus; k++)
    free(lsim__corpus[k].p);
  free(lsim__corpus);
  free(b.p);
  return 0;
}
