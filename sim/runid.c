/*
** runid.c: a run's identity (contract in runid.h, tables in
** docs/SCHEMA.md, checks in docs/RELIABILITY.md "Resume identity").
**
** Digests are streamed (64 KiB reads through OpenSSL's SHA-256), so a
** trace of any size costs one sequential read at the start of a run.  An
** input is opened non-blocking and checked with fstat before anything is
** read: a FIFO or a device named as a trace is refused, never waited on.
*/
#include "runid.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "profile.h"

#define LSIM__CHUNK 65536

static void lsim__hex(const unsigned char d[32], char hex[65]) {
  static const char x[] = "0123456789abcdef";
  for (int i = 0; i < 32; i++) {
    hex[2 * i] = x[d[i] >> 4];
    hex[2 * i + 1] = x[d[i] & 15];
  }
  hex[64] = '\0';
}

/* The digest of an open regular file fd (closed here). */
static lsim_err lsim__digest_fd(int fd, const char *role, const char *path,
                                unsigned char d[32], int64_t *bytes,
                                lsim_errbuf *eb) {
  EVP_MD_CTX *md = EVP_MD_CTX_new();
  unsigned char *buf = malloc(LSIM__CHUNK);
  lsim_err rc = 0;
  if (!md || !buf || !EVP_DigestInit_ex(md, EVP_sha256(), NULL)) {
    rc = lsim_fail(eb, LSIM_E_NOMEM, "%s %s: cannot start a digest", role,
                   path);
    goto out;
  }
  int64_t n = 0;
  for (;;) {
    ssize_t got = read(fd, buf, LSIM__CHUNK);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0) {
      rc = lsim_fail(eb, LSIM_E_RUN_INPUT_MISSING, "%s %s: cannot read: %s",
                     role, path, strerror(errno));
      goto out;
    }
    if (got == 0)
      break;
    if (!EVP_DigestUpdate(md, buf, (size_t)got)) {
      rc = lsim_fail(eb, LSIM_E_BUG, "%s %s: sha-256 digest failed", role,
                     path);
      goto out;
    }
    n += got;
  }
  unsigned int len = 0;
  if (!EVP_DigestFinal_ex(md, d, &len) || len != 32)
    rc = lsim_fail(eb, LSIM_E_BUG, "%s %s: sha-256 digest failed", role, path);
  *bytes = n;
out:
  free(buf);
  EVP_MD_CTX_free(md);
  close(fd);
  return rc;
}

/* Open path without blocking (a FIFO's open would wait for a writer) and
** say what it is: 1 regular file (*fd open), 2 directory, or an error. */
static lsim_err lsim__open_input(const char *role, const char *path, int *fd,
                                 int *kind, lsim_errbuf *eb) {
  *fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (*fd < 0)
    return lsim_fail(eb, LSIM_E_RUN_INPUT_MISSING, "%s %s: cannot open: %s",
                     role, path, strerror(errno));
  struct stat st;
  if (fstat(*fd, &st) != 0) {
    int e = errno;
    close(*fd);
    return lsim_fail(eb, LSIM_E_RUN_INPUT_MISSING, "%s %s: cannot stat: %s",
                     role, path, strerror(e));
  }
  if (S_ISDIR(st.st_mode)) {
    close(*fd);
    *fd = -1;
    *kind = 2;
    return 0;
  }
  if (!S_ISREG(st.st_mode)) {
    close(*fd);
    return lsim_fail(eb, LSIM_E_IO,
                     "%s %s: not a regular file or directory", role, path);
  }
  /* a regular file reads the same with or without O_NONBLOCK; clear it */
  int fl = fcntl(*fd, F_GETFL);
  if (fl >= 0)
    (void)fcntl(*fd, F_SETFL, fl & ~O_NONBLOCK);
  *kind = 1;
  return 0;
}

static int lsim__cmp_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The directory digest of runid.h: regular files only, sorted by name. */
static lsim_err lsim__digest_dir(const char *role, const char *path,
                                 unsigned char d[32], int64_t *bytes,
                                 lsim_errbuf *eb) {
  DIR *dir = opendir(path);
  if (!dir)
    return lsim_fail(eb, LSIM_E_RUN_INPUT_MISSING, "%s %s: cannot open: %s",
                     role, path, strerror(errno));
  char **names = NULL;
  size_t n = 0, cap = 0;
  lsim_err rc = 0;
  struct dirent *de;
  while ((de = readdir(dir)) != NULL) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
      continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 64;
      char **nn = realloc(names, cap * sizeof *nn);
      if (!nn) {
        rc = lsim_fail(eb, LSIM_E_NOMEM, "%s %s: out of memory", role, path);
        break;
      }
      names = nn;
    }
    if (!(names[n] = strdup(de->d_name))) {
      rc = lsim_fail(eb, LSIM_E_NOMEM, "%s %s: out of memory", role, path);
      break;
    }
    n++;
  }
  closedir(dir);
  if (!rc)
    qsort(names, n, sizeof *names, lsim__cmp_name); /* readdir order varies */
  EVP_MD_CTX *md = rc ? NULL : EVP_MD_CTX_new();
  if (!rc && (!md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL)))
    rc = lsim_fail(eb, LSIM_E_NOMEM, "%s %s: cannot start a digest", role,
                   path);
  int64_t total = 0;
  for (size_t i = 0; !rc && i < n; i++) {
    char f[LSIM_PATH_MAX * 2];
    snprintf(f, sizeof f, "%s/%s", path, names[i]);
    struct stat st;
    if (stat(f, &st) != 0 || !S_ISREG(st.st_mode))
      continue; /* only regular files are read as part of a directory */
    int fd, kind;
    unsigned char fd_d[32];
    int64_t fb = 0;
    if ((rc = lsim__open_input(role, f, &fd, &kind, eb)) ||
        (rc = lsim__digest_fd(fd, role, f, fd_d, &fb, eb)))
      break;
    if (!EVP_DigestUpdate(md, names[i], strlen(names[i]) + 1) ||
        !EVP_DigestUpdate(md, fd_d, sizeof fd_d))
      rc = lsim_fail(eb, LSIM_E_BUG, "%s %s: sha-256 digest failed", role,
                     path);
    total += fb;
  }
  unsigned int len = 0;
  if (!rc && (!EVP_DigestFinal_ex(md, d, &len) || len != 32))
    rc = lsim_fail(eb, LSIM_E_BUG, "%s %s: sha-256 digest failed", role, path);
  *bytes = total;
  EVP_MD_CTX_free(md);
  for (size_t i = 0; i < n; i++)
    free(names[i]);
  free(names);
  return rc;
}

lsim_err lsim_runid_digest(const char *role, const char *path, char hex[65],
                           int64_t *bytes, lsim_errbuf *eb) {
  int fd, kind;
  unsigned char d[32];
  lsim_err rc = lsim__open_input(role, path, &fd, &kind, eb);
  if (rc)
    return rc;
  rc = kind == 2 ? lsim__digest_dir(role, path, d, bytes, eb)
                 : lsim__digest_fd(fd, role, path, d, bytes, eb);
  if (!rc)
    lsim__hex(d, hex);
  return rc;
}

/* Add (role, path) once; a second mention of the same file is the same
** input (an empirical length file used for prompt and output lengths). */
static lsim_err lsim__add(lsim_runid *id, const char *role, const char *path,
                          lsim_errbuf *eb) {
  for (int i = 0; i < id->ninputs; i++)
    if (strcmp(id->in[i].role, role) == 0 && strcmp(id->in[i].path, path) == 0)
      return 0;
  if (id->ninputs == LSIM_RUNID_MAX_INPUTS)
    return LSIM_BUG(eb, "more run inputs than LSIM_RUNID_MAX_INPUTS");
  lsim_run_input *in = &id->in[id->ninputs];
  snprintf(in->role, sizeof in->role, "%s", role);
  if (snprintf(in->path, sizeof in->path, "%s", path) >= (int)sizeof in->path)
    return lsim_fail(eb, LSIM_E_USAGE, "%s path too long: %.64s...", role,
                     path);
  lsim_err rc = lsim_runid_digest(role, path, in->sha256, &in->bytes, eb);
  if (rc)
    return rc;
  id->ninputs++;
  return 0;
}

static lsim_err lsim__add_dist(lsim_runid *id, const lsim_len_dist *d,
                               lsim_errbuf *eb) {
  if (d->kind != LSIM_DIST_EMPIRICAL || !d->file[0])
    return 0;
  return lsim__add(id, "dist", d->file, eb);
}

lsim_err lsim_runid_collect(const lsim_scenario *sc, lsim_runid *id,
                            lsim_errbuf *eb) {
  id->ninputs = 0;
  lsim_err rc;
  if (sc->path[0]) {
    if ((rc = lsim__add(id, "scenario", sc->path, eb)))
      return rc;
    char sha[65];
    lsim_scenario_sha_hex(sc, sha);
    if (strcmp(sha, id->in[id->ninputs - 1].sha256) != 0)
      return lsim_fail(eb, LSIM_E_RUN_INPUT_CHANGED,
                       "scenario %s changed while the run was starting",
                       sc->path);
  }
  if (sc->trace_format != LSIM_TRACE_GEN && sc->trace_file[0] &&
      (rc = lsim__add(id, "trace", sc->trace_file, eb)))
    return rc;
  if ((rc = lsim__add_dist(id, &sc->gen_prompt, eb)) ||
      (rc = lsim__add_dist(id, &sc->gen_output, eb)))
    return rc;
  for (int i = 0; i < sc->gen_arrivals.nshifts; i++) {
    const lsim_gen_shift *s = &sc->gen_arrivals.shifts[i];
    if ((s->has_prompt && (rc = lsim__add_dist(id, &s->prompt, eb))) ||
        (s->has_output && (rc = lsim__add_dist(id, &s->output, eb))))
      return rc;
  }
  if ((rc = lsim__add_dist(id, &sc->trace_servegen.prompt, eb)) ||
      (rc = lsim__add_dist(id, &sc->trace_servegen.output, eb)))
    return rc;
  if (sc->trace_assign.servegen[0] &&
      (rc = lsim__add(id, "assign", sc->trace_assign.servegen, eb)))
    return rc;
  if (sc->cost_profile[0] &&
      (rc = lsim__add(id, "profile", sc->cost_profile, eb)))
    return rc;
  if (sc->clock_from[0] &&
      (rc = lsim__add(id, "clock-from", sc->clock_from, eb)))
    return rc;
  if (sc->compression.on && sc->compression.bundle[0] &&
      (rc = lsim__add(id, "bundle", sc->compression.bundle, eb)))
    return rc;
  return 0;
}

lsim_err lsim_runid_option(lsim_runid *id, const char *name, const char *value,
                           lsim_errbuf *eb) {
  if (id->nopts == LSIM_RUNID_MAX_OPTIONS)
    return LSIM_BUG(eb, "more run options than LSIM_RUNID_MAX_OPTIONS");
  lsim_run_option *o = &id->opt[id->nopts];
  if (snprintf(o->name, sizeof o->name, "%s", name) >= (int)sizeof o->name ||
      snprintf(o->value, sizeof o->value, "%s", value) >= (int)sizeof o->value)
    return lsim_fail(eb, LSIM_E_USAGE, "--%s: value too long", name);
  id->nopts++;
  return 0;
}

const char *lsim_runid_get(const lsim_runid *id, const char *name) {
  for (int i = 0; i < id->nopts; i++)
    if (strcmp(id->opt[i].name, name) == 0)
      return id->opt[i].value;
  return NULL;
}

static void lsim__col(sqlite3_stmt *st, int i, char *out, size_t n) {
  const unsigned char *t = sqlite3_column_text(st, i);
  snprintf(out, n, "%s", t ? (const char *)t : "");
}

lsim_err lsim_runid_read(sqlite3 *h, const char *db_path, lsim_runid *id,
                         lsim_errbuf *eb) {
  memset(id, 0, sizeof *id);
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(h,
                         "SELECT role,path,sha256,bytes FROM run_inputs "
                         "WHERE run_id=1 ORDER BY rowid",
                         -1, &st, NULL) != SQLITE_OK) {
    int ver = 0;
    sqlite3_stmt *v = NULL;
    if (sqlite3_prepare_v2(h, "PRAGMA user_version", -1, &v, NULL) ==
            SQLITE_OK &&
        sqlite3_step(v) == SQLITE_ROW)
      ver = sqlite3_column_int(v, 0);
    sqlite3_finalize(v);
    return lsim_fail(eb, LSIM_E_RUN_IDENTITY,
                     "%s: written by an older lorasim (schema version %d) "
                     "that did not record the digests of its inputs; a "
                     "rerun cannot be checked to be the same run: replay the "
                     "scenario instead",
                     db_path, ver);
  }
  lsim_err rc = 0;
  int step;
  while ((step = sqlite3_step(st)) == SQLITE_ROW) {
    if (id->ninputs == LSIM_RUNID_MAX_INPUTS) {
      rc = lsim_fail(eb, LSIM_E_RUN_IDENTITY,
                     "%s: more than %d recorded inputs", db_path,
                     LSIM_RUNID_MAX_INPUTS);
      break;
    }
    lsim_run_input *in = &id->in[id->ninputs++];
    lsim__col(st, 0, in->role, sizeof in->role);
    lsim__col(st, 1, in->path, sizeof in->path);
    lsim__col(st, 2, in->sha256, sizeof in->sha256);
    in->bytes = sqlite3_column_int64(st, 3);
  }
  if (!rc && step != SQLITE_DONE)
    rc = lsim_fail(eb, LSIM_E_DB, "%s: read run_inputs: %s", db_path,
                   sqlite3_errmsg(h));
  sqlite3_finalize(st);
  st = NULL;
  if (!rc && sqlite3_prepare_v2(h,
                                "SELECT name,value FROM run_options WHERE "
                                "run_id=1 ORDER BY rowid",
                                -1, &st, NULL) != SQLITE_OK)
    rc = lsim_fail(eb, LSIM_E_RUN_IDENTITY, "%s: no run_options table: %s",
                   db_path, sqlite3_errmsg(h));
  while (!rc && (step = sqlite3_step(st)) == SQLITE_ROW) {
    if (id->nopts == LSIM_RUNID_MAX_OPTIONS) {
      rc = lsim_fail(eb, LSIM_E_RUN_IDENTITY,
                     "%s: more than %d recorded options", db_path,
                     LSIM_RUNID_MAX_OPTIONS);
      break;
    }
    lsim_run_option *o = &id->opt[id->nopts++];
    lsim__col(st, 0, o->name, sizeof o->name);
    lsim__col(st, 1, o->value, sizeof o->value);
  }
  if (!rc && step != SQLITE_DONE)
    rc = lsim_fail(eb, LSIM_E_DB, "%s: read run_options: %s", db_path,
                   sqlite3_errmsg(h));
  sqlite3_finalize(st);
  if (rc)
    return rc;
  for (int i = 0; i < id->ninputs; i++)
    if (strcmp(id->in[i].role, "scenario") == 0)
      return 0;
  return lsim_fail(eb, LSIM_E_RUN_IDENTITY,
                   "%s: the run's inputs name no scenario file", db_path);
}

lsim_err lsim_runid_verify(const lsim_runid *rec, lsim_errbuf *eb) {
  for (int i = 0; i < rec->ninputs; i++) {
    const lsim_run_input *in = &rec->in[i];
    char hex[65];
    int64_t bytes = 0;
    lsim_err rc = lsim_runid_digest(in->role, in->path, hex, &bytes, eb);
    if (rc == LSIM_E_RUN_INPUT_MISSING || rc == LSIM_E_IO) {
      lsim_err code = rc == LSIM_E_IO ? LSIM_E_RUN_INPUT_CHANGED
                                      : LSIM_E_RUN_INPUT_MISSING;
      if (!eb)
        return code;
      char why[sizeof eb->msg];
      memcpy(why, eb->msg, sizeof why);
      why[sizeof why - 1] = '\0';
      return lsim_fail(eb, code,
                       "%.400s (recorded by the run): a rerun would not be "
                       "the same run",
                       why);
    }
    if (rc)
      return rc;
    if (strcmp(hex, in->sha256) != 0)
      return lsim_fail(eb, LSIM_E_RUN_INPUT_CHANGED,
                       "%s %s changed since the run (sha256 %.12s..., %lld "
                       "bytes; recorded %.12s..., %lld bytes): a rerun would "
                       "not be the same run",
                       in->role, in->path, hex, (long long)bytes, in->sha256,
                       (long long)in->bytes);
  }
  return 0;
}

static const lsim_run_input *lsim__find(const lsim_runid *id,
                                        const lsim_run_input *x) {
  for (int i = 0; i < id->ninputs; i++)
    if (strcmp(id->in[i].role, x->role) == 0 &&
        strcmp(id->in[i].path, x->path) == 0)
      return &id->in[i];
  return NULL;
}

lsim_err lsim_runid_same_inputs(const lsim_runid *rec, const lsim_runid *now,
                                lsim_errbuf *eb) {
  for (int i = 0; i < now->ninputs; i++) {
    const lsim_run_input *x = &now->in[i], *r = lsim__find(rec, x);
    if (!r)
      return lsim_fail(eb, LSIM_E_RUN_INPUT_CHANGED,
                       "the rerun would read %s %s, which the run did not",
                       x->role, x->path);
    if (strcmp(r->sha256, x->sha256) != 0)
      return lsim_fail(eb, LSIM_E_RUN_INPUT_CHANGED,
                       "%s %s changed since the run (sha256 %.12s..., "
                       "recorded %.12s...)",
                       x->role, x->path, x->sha256, r->sha256);
  }
  for (int i = 0; i < rec->ninputs; i++)
    if (!lsim__find(now, &rec->in[i]))
      return lsim_fail(eb, LSIM_E_RUN_INPUT_CHANGED,
                       "the run read %s %s, which the rerun would not",
                       rec->in[i].role, rec->in[i].path);
  return 0;
}

lsim_err lsim_runid_apply_profile(lsim_scenario *sc, const char *path,
                                  lsim_errbuf *eb) {
  if (strlen(path) >= sizeof sc->cost_profile)
    return lsim_fail(eb, LSIM_E_USAGE, "--profile: path too long");
  return lsim_scenario_use_profile(sc, path, eb);
}

void lsim_runid_set_name(int i, char out[16]) {
  snprintf(out, 16, "set.%d", i + 1);
}

lsim_err lsim_runid_scenario_src(const lsim_runid *id, lsim_scenario_src *src,
                                 const char *sets[LSIM_SCENARIO_MAX_SETS],
                                 lsim_errbuf *eb) {
  memset(src, 0, sizeof *src);
  src->member = lsim_runid_get(id, "scenario-member");
  src->sets = sets;
  for (int i = 0; i < id->nopts; i++) {
    if (strncmp(id->opt[i].name, "set.", 4) != 0)
      continue;
    char want[16];
    lsim_runid_set_name(src->nsets, want);
    if (src->nsets == LSIM_SCENARIO_MAX_SETS ||
        strcmp(id->opt[i].name, want) != 0)
      return lsim_fail(eb, LSIM_E_RUN_IDENTITY,
                       "recorded option %s out of order or too many (at most "
                       "%d --set, numbered from set.1)",
                       id->opt[i].name, LSIM_SCENARIO_MAX_SETS);
    sets[src->nsets++] = id->opt[i].value;
  }
  return 0;
}
