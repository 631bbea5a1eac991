/*
** slurp.c: whole-file reads with the file type checked first and a size
** cap (slurp.h).
*/
#include "slurp.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* strerror, thread-safe and lowercased to fit the message style. */
static const char *lsim__os_err(int e, char out[128]) {
  if (strerror_r(e, out, 128) != 0)
    snprintf(out, 128, "error %d", e);
  if (out[0] >= 'A' && out[0] <= 'Z')
    out[0] = (char)(out[0] - 'A' + 'a');
  return out;
}

static const char *lsim__kind(mode_t m) {
  if (S_ISDIR(m))
    return "a directory";
  if (S_ISFIFO(m))
    return "a fifo";
  if (S_ISCHR(m))
    return "a character device";
  if (S_ISBLK(m))
    return "a block device";
  if (S_ISSOCK(m))
    return "a socket";
  return "not a regular file";
}

const char *lsim_slurp_size_str(size_t cap, char out[32]) {
  if (cap >= ((size_t)1 << 20) && cap % ((size_t)1 << 20) == 0)
    snprintf(out, 32, "%zu MiB", cap >> 20);
  else if (cap >= 1024 && cap % 1024 == 0)
    snprintf(out, 32, "%zu KiB", cap >> 10);
  else
    snprintf(out, 32, "%zu bytes", cap);
  return out;
}

lsim_err lsim_slurp(const char *path, const lsim_slurp_opts *opts, char **out,
                    size_t *len, lsim_errbuf *eb) {
  static const lsim_slurp_opts none = {0, 0, 0, 0, NULL};
  const lsim_slurp_opts *o = opts ? opts : &none;
  size_t cap = o->cap ? o->cap : LSIM_SLURP_CAP;
  lsim_err too_big = o->too_big ? o->too_big : LSIM_E_FILE_SIZE;
  lsim_err not_reg = o->not_reg ? o->not_reg : LSIM_E_FILE_TYPE;
  const char *w = o->what ? o->what : "", *sp = o->what ? " " : "";
  char why[128], sz[32];
  struct stat st;
  *out = NULL;
  *len = 0;
  int is_stdin = o->allow_stdin && strcmp(path, "-") == 0;
  int fd = 0;
  if (!is_stdin) {
    if (stat(path, &st) != 0)
      return errno == ENOENT || errno == ENOTDIR
                 ? lsim_fail(eb, LSIM_E_FILE_MISSING,
                             "%s%s%s: no such file or directory", w, sp, path)
                 : lsim_fail(eb, LSIM_E_IO, "%s%s%s: cannot open: %s", w, sp,
                             path, lsim__os_err(errno, why));
    if (!S_ISREG(st.st_mode))
      return lsim_fail(eb, not_reg,
                       "%s%s%s: is %s, not a regular file", w, sp, path,
                       lsim__kind(st.st_mode));
    if ((uintmax_t)st.st_size > (uintmax_t)cap)
      return lsim_fail(eb, too_big, "%s%s%s: file is larger than %s", w, sp,
                       path, lsim_slurp_size_str(cap, sz));
    fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
      return errno == ENOENT
                 ? lsim_fail(eb, LSIM_E_FILE_MISSING,
                             "%s%s%s: no such file or directory", w, sp, path)
                 : lsim_fail(eb, LSIM_E_IO, "%s%s%s: cannot open: %s", w, sp,
                             path, lsim__os_err(errno, why));
    /* the path may have changed between stat and open */
    int fl = fcntl(fd, F_GETFL);
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || fl < 0 ||
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
      close(fd);
      return lsim_fail(eb, not_reg,
                       "%s%s%s: not a regular file once opened", w, sp, path);
    }
  }
  char *buf = NULL;
  size_t n = 0, have = 0;
  lsim_err err = 0;
  for (;;) {
    if (n == have) {
      if (have > cap) {
        err = lsim_fail(eb, too_big, "%s%s%s: file is larger than %s", w, sp,
                        path, lsim_slurp_size_str(cap, sz));
        break;
      }
      /* room for cap + 1 bytes at most: one byte over tells "too big" */
      size_t want = have ? have * 2 : 65536;
      if (want > cap + 1)
        want = cap + 1;
      if (want <= have)
        want = have + 1;
      char *nb = realloc(buf, want + 1);
      if (!nb) {
        err = lsim_fail(eb, LSIM_E_NOMEM, "%s%s%s: out of memory reading", w,
                        sp, path);
        break;
      }
      buf = nb;
      have = want;
    }
    ssize_t got = read(fd, buf + n, have - n);
    if (got < 0) {
      if (errno == EINTR)
        continue;
      err = lsim_fail(eb, LSIM_E_IO, "%s%s%s: cannot read: %s", w, sp, path,
                      lsim__os_err(errno, why));
      break;
    }
    if (got == 0)
      break;
    n += (size_t)got;
    if (n > cap) {
      err = lsim_fail(eb, too_big, "%s%s%s: file is larger than %s", w, sp,
                      path, lsim_slurp_size_str(cap, sz));
      break;
    }
  }
  if (!is_stdin)
    close(fd);
  if (err) {
    free(buf);
    return err;
  }
  if (!buf && !(buf = malloc(1)))
    return lsim_fail(eb, LSIM_E_NOMEM, "%s%s%s: out of memory reading", w, sp,
                     path);
  buf[n] = '\0';
  *out = buf;
  *len = n;
  return 0;
}
