/*
** slurp.h: the one reader of whole input files (scenarios, exec batches,
** compress collections and bundles, cost profiles).
**
** lsim_slurp checks the path with stat(2) before it opens anything and
** refuses what is not a regular file (a FIFO, a device, a directory, a
** socket) with E_FILE_TYPE, so that neither a FIFO nor /dev/zero can block
** or grow a read without end (a caller may keep an older code instead).  It opens with O_NONBLOCK (a FIFO swapped in
** after the stat cannot block the open either), clears it, checks the
** opened file again with fstat(2), reads at most `cap` bytes and refuses a
** longer file with `too_big` (E_FILE_SIZE unless the caller keeps an
** older code).  Symbolic links are followed: inputs may be links.  Every
** read error is reported (E_IO with the reason); running out of memory is
** E_NOMEM.  "-" reads standard input when `allow_stdin` is set (a pipe is
** the point there; the cap still holds).
**
** On success *out is a malloc'd buffer of *len + 1 bytes, NUL-terminated,
** that the caller now owns.  On failure *out is NULL and eb says why,
** naming the path.
*/
#ifndef LSIM_SLURP_H
#define LSIM_SLURP_H

#include <stddef.h>

#include "../engine/lsim.h"

/* The default size cap: 256 MiB. */
#define LSIM_SLURP_CAP ((size_t)256 << 20)

typedef struct lsim_slurp_opts {
  size_t cap;       /* the most bytes accepted; 0 = LSIM_SLURP_CAP */
  lsim_err too_big; /* the code of a file over cap; 0 = LSIM_E_FILE_SIZE */
  lsim_err not_reg; /* the code of a non-regular file; 0 = LSIM_E_FILE_TYPE */
  int allow_stdin;  /* "-" is standard input */
  const char *what; /* word before the path in messages ("profile"), or NULL */
} lsim_slurp_opts;

lsim_err lsim_slurp(const char *path, const lsim_slurp_opts *opts, char **out,
                    size_t *len, lsim_errbuf *eb);

/* cap as the message says it: "16 MiB", "1 KiB", "100 bytes". */
const char *lsim_slurp_size_str(size_t cap, char out[32]);

#endif /* LSIM_SLURP_H */
