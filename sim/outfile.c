/*
** outfile.c: whole-or-absent output files and the one-writer lock
** (contract in outfile.h).
**
** Invariants:
**
**   O1  No output is opened through a symbolic link or onto a non-regular
**       file: the target is lstat'ed before the temporary is made and again
**       just before the rename, and the temporary itself is created with
**       O_EXCL|O_NOFOLLOW (it cannot be an existing file or link).
**   O2  The target only ever changes by rename(2) of a complete, fsync'ed
**       temporary: a reader sees the old file, no file, or the new whole
**       file, never a prefix.
**   O3  Every failure path removes the temporary it made (a process killed
**       between open and commit leaves PATH.PID-N.tmp behind, never a
**       truncated PATH).
**
** The lock (lsim_out_lock): open PATH.lock (O_CREAT|O_NOFOLLOW|O_NONBLOCK,
** refused unless regular), flock(LOCK_EX|LOCK_NB), then check that the
** name still points at the locked inode; the holder unlinks the name
** before it closes, so a taker that locked an unlinked inode notices and
** starts over.
*/
#include "outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* path does not exist (or a component is not a directory): 0 when the
** directory it would go in is there, else E_OUT_NO_DIR naming it.  Nothing
** is created: a mistyped --db directory is reported, not made. */
static lsim_err lsim__check_dir(const char *path, lsim_errbuf *eb) {
  char dir[LSIM_OUT_PATH_MAX];
  const char *slash = strrchr(path, '/');
  if (!slash)
    return 0; /* the working directory */
  size_t n = slash == path ? 1 : (size_t)(slash - path);
  if (n >= sizeof dir)
    return lsim_fail(eb, LSIM_E_USAGE, "%s: output path too long", path);
  memcpy(dir, path, n);
  dir[n] = 0;
  struct stat st;
  if (stat(dir, &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR)
      return lsim_fail(eb, LSIM_E_OUT_NO_DIR,
                       "%s: directory does not exist (for %s); create it "
                       "first",
                       dir, path);
    return lsim_fail(eb, LSIM_E_OUT_WRITE, "%s: cannot inspect directory: %s",
                     dir, strerror(errno));
  }
  if (!S_ISDIR(st.st_mode))
    return lsim_fail(eb, LSIM_E_OUT_NO_DIR, "%s: not a directory (for %s)",
                     dir, path);
  return 0;
}

lsim_err lsim_out_check(const char *path, lsim_errbuf *eb) {
  struct stat st;
  if (!path || !*path)
    return lsim_fail(eb, LSIM_E_USAGE, "empty output path");
  if (lstat(path, &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR)
      return lsim__check_dir(path, eb);
    return lsim_fail(eb, LSIM_E_OUT_WRITE, "%s: cannot inspect output path: %s",
                     path, strerror(errno));
  }
  if (S_ISLNK(st.st_mode))
    return lsim_fail(eb, LSIM_E_OUT_SYMLINK,
                     "%s: output path is a symbolic link; refusing to write "
                     "through it (remove it or choose another path)",
                     path);
  if (!S_ISREG(st.st_mode))
    return lsim_fail(eb, LSIM_E_OUT_NOT_REGULAR,
                     "%s: output path exists and is not a regular file (%s); "
                     "refusing to replace it",
                     path,
                     S_ISDIR(st.st_mode)   ? "a directory"
                     : S_ISCHR(st.st_mode) ? "a character device"
                     : S_ISBLK(st.st_mode) ? "a block device"
                     : S_ISFIFO(st.st_mode) ? "a fifo"
                     : S_ISSOCK(st.st_mode) ? "a socket"
                                            : "a special file");
  return 0;
}

/* dir with its trailing slashes taken off, into p; *exists when it is
** there (and a directory: anything else is refused) */
static lsim_err lsim__out_dir(const char *dir, char p[LSIM_OUT_PATH_MAX],
                              int *exists, lsim_errbuf *eb) {
  struct stat st;
  *exists = 0;
  if (!dir || !*dir)
    return lsim_fail(eb, LSIM_E_USAGE, "empty output directory");
  size_t n = strlen(dir);
  if (n >= LSIM_OUT_PATH_MAX)
    return lsim_fail(eb, LSIM_E_USAGE, "%s: output path too long", dir);
  memcpy(p, dir, n + 1);
  while (n > 1 && p[n - 1] == '/')
    p[--n] = 0;
  if (stat(p, &st) == 0) {
    if (!S_ISDIR(st.st_mode))
      return lsim_fail(eb, LSIM_E_OUT_NOT_REGULAR,
                       "%s: exists and is not a directory", dir);
    *exists = 1;
    return 0;
  }
  return lsim__check_dir(p, eb);
}

lsim_err lsim_out_dir_check(const char *dir, lsim_errbuf *eb) {
  char p[LSIM_OUT_PATH_MAX];
  int exists;
  return lsim__out_dir(dir, p, &exists, eb);
}

lsim_err lsim_out_mkdir(const char *dir, lsim_errbuf *eb) {
  char p[LSIM_OUT_PATH_MAX];
  int exists;
  lsim_err rc = lsim__out_dir(dir, p, &exists, eb);
  if (rc || exists)
    return rc;
  if (mkdir(p, 0777) != 0 && errno != EEXIST)
    return lsim_fail(eb, LSIM_E_OUT_WRITE, "%s: cannot create directory: %s",
                     dir, strerror(errno));
  struct stat st;
  if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode))
    return lsim_fail(eb, LSIM_E_OUT_NOT_REGULAR,
                     "%s: exists and is not a directory", dir);
  return 0;
}

/* Make the temporary beside path; *fd is open on it. */
static lsim_err lsim__mktemp(lsim_outfile *of, const char *path, int *fd,
                             lsim_errbuf *eb) {
  static unsigned counter; /* names only; no decision depends on it */
  memset(of, 0, sizeof *of);
  *fd = -1;
  lsim_err rc = lsim_out_check(path, eb);
  if (rc)
    return rc;
  if (snprintf(of->path, sizeof of->path, "%s", path) >=
      (int)sizeof of->path)
    return lsim_fail(eb, LSIM_E_USAGE, "%s: output path too long", path);
  for (int tries = 0; tries < 1000; tries++) {
    if (snprintf(of->tmp, sizeof of->tmp, "%s.%ld-%u.tmp", path,
                 (long)getpid(), counter++) >= (int)sizeof of->tmp)
      return lsim_fail(eb, LSIM_E_USAGE, "%s: output path too long", path);
    *fd = open(of->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
               0644);
    if (*fd >= 0) {
      of->live = 1;
      return 0;
    }
    if (errno != EEXIST)
      return lsim_fail(eb, LSIM_E_OUT_WRITE, "%s: cannot create %s: %s", path,
                       of->tmp, strerror(errno));
  }
  return lsim_fail(eb, LSIM_E_OUT_WRITE, "%s: no free temporary name", path);
}

lsim_err lsim_out_open(lsim_outfile *of, const char *path, lsim_errbuf *eb) {
  int fd;
  lsim_err rc0 = lsim__mktemp(of, path, &fd, eb);
  if (rc0)
    return rc0;
  if (!(of->fp = fdopen(fd, "w"))) {
    lsim_err rc = lsim_fail(eb, LSIM_E_NOMEM, "%s: cannot open a stream: %s",
                            path, strerror(errno));
    close(fd);
    unlink(of->tmp);
    of->live = 0;
    return rc;
  }
  return 0;
}

lsim_err lsim_out_reserve(lsim_outfile *of, const char *path,
                          lsim_errbuf *eb) {
  int fd;
  lsim_err rc0 = lsim__mktemp(of, path, &fd, eb);
  if (rc0)
    return rc0;
  of->reserved = 1;
  if (close(fd) != 0) {
    lsim_err rc = lsim_fail(eb, LSIM_E_OUT_WRITE, "%s: close: %s", of->tmp,
                            strerror(errno));
    lsim_out_abort(of);
    return rc;
  }
  return 0;
}

void lsim_out_abort(lsim_outfile *of) {
  if (of->fp) {
    fclose(of->fp);
    of->fp = NULL;
  }
  if (of->live) {
    unlink(of->tmp);
    of->live = 0;
  }
}

/* fsync the directory holding path, so the rename survives a crash
** (best effort: some file systems refuse fsync on a directory). */
static void lsim__sync_dir(const char *path) {
  char dir[LSIM_OUT_PATH_MAX];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (!slash)
    snprintf(dir, sizeof dir, ".");
  else if (slash == dir)
    dir[1] = 0;
  else
    *slash = 0;
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    (void)fsync(fd);
    close(fd);
  }
}

lsim_err lsim_out_close(lsim_outfile *of, lsim_errbuf *eb) {
  if (!of->live || !of->fp)
    return LSIM_BUG(eb, "lsim_out_close without an open stream");
  FILE *f = of->fp;
  of->fp = NULL;
  int e = 0;
  const char *what = NULL;
  if (fflush(f) != 0)
    e = errno, what = "write";
  else if (ferror(f))
    e = EIO, what = "write";
  else if (fsync(fileno(f)) != 0 && errno != EINVAL && errno != EROFS)
    e = errno, what = "fsync";
  if (fclose(f) != 0 && !what)
    e = errno, what = "close";
  if (!what)
    return 0;
  lsim_out_abort(of);
  return lsim_fail(eb, LSIM_E_OUT_WRITE, "%s: %s failed: %s", of->path, what,
                   strerror(e));
}

lsim_err lsim_out_commit(lsim_outfile *of, lsim_errbuf *eb) {
  lsim_err rc = 0;
  if (!of->live)
    return LSIM_BUG(eb, "lsim_out_commit on a spent output");
  if (of->fp) {
    if ((rc = lsim_out_close(of, eb)))
      return rc;
  } else {
    /* written by another program, or rewritten in place after
    ** lsim_out_close: still ours, a regular file, and (for a program's
    ** output) not empty */
    struct stat st;
    if (lstat(of->tmp, &st) != 0 || !S_ISREG(st.st_mode) ||
        (of->reserved && st.st_size == 0))
      rc = lsim_fail(eb, LSIM_E_OUT_WRITE,
                     "%s: its temporary is missing, not a regular file, or empty",
                     of->path);
    else {
      /* whoever wrote it closed it; make its bytes durable */
      int fd = open(of->tmp, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0 || (fsync(fd) != 0 && errno != EINVAL && errno != EROFS))
        rc = lsim_fail(eb, LSIM_E_OUT_WRITE, "%s: fsync failed: %s",
                       of->path, strerror(errno));
      if (fd >= 0)
        close(fd);
    }
  }
  if (!rc)
    rc = lsim_out_check(of->path, eb);
  if (!rc && rename(of->tmp, of->path) != 0)
    rc = lsim_fail(eb, LSIM_E_OUT_WRITE, "%s: cannot rename %s into place: %s",
                   of->path, of->tmp, strerror(errno));
  if (rc) {
    lsim_out_abort(of);
    return rc;
  }
  of->live = 0;
  lsim__sync_dir(of->path);
  return 0;
}

lsim_err lsim_out_write_all(const char *path, const void *buf, size_t n,
                            lsim_errbuf *eb) {
  lsim_outfile of;
  lsim_err rc = lsim_out_open(&of, path, eb);
  if (rc)
    return rc;
  if (n && fwrite(buf, 1, n, of.fp) != n) {
    rc = lsim_fail(eb, LSIM_E_OUT_WRITE, "%s: write failed: %s", path,
                   strerror(errno));
    lsim_out_abort(&of);
    return rc;
  }
  return lsim_out_commit(&of, eb);
}

/* ---- the lock ----------------------------------------------------------------- */

/* LSIM_TEST_HOLD_LOCK_MS: a test hook (docs/RELIABILITY.md): after taking
** a lock, sleep that many milliseconds (at most 10 s), so a test can start a
** second writer while the first is certainly inside its run.  It changes no
** output. */
static void lsim__test_hold(void) {
  const char *v = getenv("LSIM_TEST_HOLD_LOCK_MS");
  if (!v || !*v)
    return;
  long ms = strtol(v, NULL, 10);
  if (ms <= 0)
    return;
  if (ms > 10000)
    ms = 10000;
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

lsim_err lsim_out_lock(lsim_outlock *lk, const char *target, lsim_errbuf *eb) {
  lk->fd = -1;
  if (snprintf(lk->path, sizeof lk->path, "%s.lock", target) >=
      (int)sizeof lk->path)
    return lsim_fail(eb, LSIM_E_USAGE, "%s: path too long", target);
  for (int tries = 0; tries < 100; tries++) {
    lsim_err rc = lsim_out_check(lk->path, eb);
    if (rc)
      return rc;
    int fd = open(lk->path,
                  O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
    if (fd < 0) {
      if (errno == ELOOP)
        return lsim_fail(eb, LSIM_E_OUT_SYMLINK,
                         "%s: lock file is a symbolic link", lk->path);
      return lsim_fail(eb, LSIM_E_OUT_WRITE, "%s: cannot create lock file: %s",
                       lk->path, strerror(errno));
    }
    struct stat a, b;
    if (fstat(fd, &a) != 0 || !S_ISREG(a.st_mode)) {
      close(fd);
      return lsim_fail(eb, LSIM_E_OUT_NOT_REGULAR,
                       "%s: lock file is not a regular file", lk->path);
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      int e = errno;
      close(fd);
      if (e == EWOULDBLOCK)
        return lsim_fail(eb, LSIM_E_OUT_LOCKED,
                         "%s: another lorasim run is writing this database "
                         "(%s is locked); wait for it or choose another --db",
                         target, lk->path);
      return lsim_fail(eb, LSIM_E_OUT_WRITE, "%s: cannot lock: %s", lk->path,
                       strerror(e));
    }
    if (lstat(lk->path, &b) == 0 && a.st_dev == b.st_dev &&
        a.st_ino == b.st_ino) {
      lk->fd = fd;
      lsim__test_hold();
      return 0;
    }
    close(fd); /* the holder released and removed it meanwhile: again */
  }
  return lsim_fail(eb, LSIM_E_OUT_LOCKED, "%s: the lock file keeps changing",
                   lk->path);
}

void lsim_out_unlock(lsim_outlock *lk) {
  if (lk->fd < 0)
    return;
  unlink(lk->path); /* while still held: see the top of the file */
  close(lk->fd);
  lk->fd = -1;
}

lsim_err lsim_out_stdout_check(lsim_errbuf *eb) {
  errno = 0;
  if (fflush(stdout) != 0 || ferror(stdout))
    return lsim_fail(eb, LSIM_E_OUT_WRITE, "standard output: write failed: %s",
                     errno ? strerror(errno) : "stream error");
  return 0;
}
