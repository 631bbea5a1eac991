/*
** outfile.h: every file lorasim writes goes through here (docs/RELIABILITY.md,
** "Output guarantees").
**
** An output is whole or absent.  lsim_out_open creates a temporary file in
** the target's directory (O_CREAT|O_EXCL|O_NOFOLLOW, mode 0644 less the
** umask); the caller writes through of->fp; lsim_out_commit flushes, checks
** every write, fsyncs, closes and renames the temporary over the target.
** Any failure removes the temporary and leaves the target as it was.
**
** Paths refused, before anything is written and again at the rename:
**   a symbolic link                         LSIM_E_OUT_SYMLINK
**   anything that exists and is not a regular file (device node, FIFO,
**   directory, socket)                      LSIM_E_OUT_NOT_REGULAR
**   a path whose directory does not exist (or is not a directory); the
**   message names the directory, and nothing is created
**                                           LSIM_E_OUT_NO_DIR
** A write, flush, fsync, close or rename that fails is LSIM_E_OUT_WRITE
** with the system's reason (a full disk says "No space left on device").
**
** A file another program writes (gnuplot's PNGs): lsim_out_reserve makes
** the temporary and closes it; hand of->tmp to the program; once it exited
** 0, lsim_out_commit renames the temporary into place if it is a non-empty
** regular file (an empty one is LSIM_E_OUT_WRITE).
**
** One writer per database: lsim_out_lock takes an exclusive flock(2) on
** PATH.lock (created beside PATH, O_NOFOLLOW) and holds it until
** lsim_out_unlock; a second taker gets LSIM_E_OUT_LOCKED at once.  The lock
** file is removed by its holder on release; a taker that finds it replaced
** under it tries again, so two holders never coexist.
*/
#ifndef LSIM_OUTFILE_H
#define LSIM_OUTFILE_H

#include <stdio.h>

#include "../engine/lsim.h"

#define LSIM_OUT_PATH_MAX 4096

typedef struct lsim_outfile {
  FILE *fp;                        /* write here between open and commit */
  char path[LSIM_OUT_PATH_MAX];    /* the target (read-only) */
  char tmp[LSIM_OUT_PATH_MAX];     /* the temporary beside it (read-only) */
  int reserved;                    /* private: another program writes tmp */
  int live;                        /* private: tmp exists and is ours */
} lsim_outfile;
#define LSIM_OUTFILE_INIT {NULL, {0}, {0}, 0, 0}

/* 0 when path is a regular file, or absent with its directory there;
** otherwise the refusal above. */
lsim_err lsim_out_check(const char *path, lsim_errbuf *eb);

/* An output directory (compare --out, prefix --out): 0 when dir is a
** directory or was just created (one level, mode 0777 less the umask);
** LSIM_E_OUT_NO_DIR naming the parent when that does not exist (no parent
** is created), LSIM_E_OUT_NOT_REGULAR when dir exists and is not a
** directory, LSIM_E_OUT_WRITE when mkdir fails otherwise. */
lsim_err lsim_out_mkdir(const char *dir, lsim_errbuf *eb);
/* The same checks, creating nothing (0 when lsim_out_mkdir would make it
** or find it): a command that works a while before it writes refuses a
** bad directory first. */
lsim_err lsim_out_dir_check(const char *dir, lsim_errbuf *eb);

/* Create the temporary for path and open of->fp on it ("w").  On failure
** nothing exists and of needs no abort. */
lsim_err lsim_out_open(lsim_outfile *of, const char *path, lsim_errbuf *eb);

/* Like lsim_out_open, without a stream: of->tmp is for another program. */
lsim_err lsim_out_reserve(lsim_outfile *of, const char *path,
                          lsim_errbuf *eb);

/* Check, fsync, close and rename into place.  On any failure the temporary
** is removed and the target left as it was.  of is spent either way. */
lsim_err lsim_out_commit(lsim_outfile *of, lsim_errbuf *eb);

/* Flush, check, fsync and close of->fp, keeping the temporary (of->tmp
** may then be rewritten in place by another lsim_out_open on it); a later
** lsim_out_commit renames it.  On failure the output is aborted. */
lsim_err lsim_out_close(lsim_outfile *of, lsim_errbuf *eb);

/* Drop the output: close and remove the temporary (no-op when spent). */
void lsim_out_abort(lsim_outfile *of);

/* A whole file at once (text, n bytes). */
lsim_err lsim_out_write_all(const char *path, const void *buf, size_t n,
                            lsim_errbuf *eb);

typedef struct lsim_outlock {
  int fd;                           /* -1 when not held */
  char path[LSIM_OUT_PATH_MAX];     /* PATH.lock */
} lsim_outlock;
#define LSIM_OUTLOCK_INIT {-1, {0}}

/* Take the exclusive lock of target (PATH.lock).  Held until unlock or the
** process ends (the kernel drops flock locks of a dead process). */
lsim_err lsim_out_lock(lsim_outlock *lk, const char *target, lsim_errbuf *eb);
void lsim_out_unlock(lsim_outlock *lk);

/* Flush stdout and check that everything printed reached it; the caller
** maps a failure to a non-zero exit.  Returns 0 or LSIM_E_OUT_WRITE. */
lsim_err lsim_out_stdout_check(lsim_errbuf *eb);

#endif /* LSIM_OUTFILE_H */
