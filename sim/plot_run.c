/*
** plot_run.c: gnuplot by fork/execvp/waitpid (plot_run.h).
**
** The child only calls async-signal-safe functions between fork and exec
** (open, dup2, chdir, execvp, _exit), and reports a failed exec by exit status
** 127, as a shell would (a folder it cannot enter by 126).
*/
#include "plot_run.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define LSIM__GNUPLOT "gnuplot"
#define LSIM__EXEC_FAILED 127

int lsim_gnuplot_available(void) {
  const char *path = getenv("PATH");
  if (!path)
    return 0;
  for (const char *p = path;;) {
    const char *colon = strchr(p, ':');
    size_t len = colon ? (size_t)(colon - p) : strlen(p);
    char cand[4096];
    /* an empty entry is the current directory, as for execvp */
    int n = len ? snprintf(cand, sizeof cand, "%.*s/%s", (int)len, p,
                           LSIM__GNUPLOT)
                : snprintf(cand, sizeof cand, "./%s", LSIM__GNUPLOT);
    struct stat sb;
    if (n > 0 && (size_t)n < sizeof cand && stat(cand, &sb) == 0 &&
        S_ISREG(sb.st_mode) && access(cand, X_OK) == 0)
      return 1;
    if (!colon)
      return 0;
    p = colon + 1;
  }
}

#define LSIM__CHDIR_FAILED 126

lsim_err lsim_gnuplot_run_in(const char *dir, const char *script,
                             const char *preamble, lsim_errbuf *eb) {
  char arg[4200];
  /* gnuplot takes "-..." for an option and loads "<cmd" from a shell, so
  ** a relative script path always starts with "./" */
  int n = snprintf(arg, sizeof arg, "%s%s", script[0] == '/' ? "" : "./",
                   script);
  if (n < 0 || (size_t)n >= sizeof arg)
    return lsim_fail(eb, LSIM_E_IO, "gnuplot: script path too long");
  char *argv[5] = {LSIM__GNUPLOT, NULL, NULL, NULL, NULL};
  int k = 1;
  if (preamble) {
    argv[k++] = "-e";
    argv[k++] = (char *)preamble;
  }
  argv[k] = arg;
  pid_t pid = fork();
  if (pid < 0)
    return lsim_fail(eb, LSIM_E_IO, "gnuplot: cannot fork: %s",
                     strerror(errno));
  if (pid == 0) {
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
      dup2(null, STDIN_FILENO);
      dup2(null, STDERR_FILENO);
      if (null > STDERR_FILENO)
        close(null);
    }
    if (dir && chdir(dir) != 0)
      _exit(LSIM__CHDIR_FAILED);
    execvp(LSIM__GNUPLOT, argv);
    _exit(LSIM__EXEC_FAILED);
  }
  int status;
  pid_t got;
  while ((got = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
    ;
  if (got < 0)
    return lsim_fail(eb, LSIM_E_IO, "gnuplot: waitpid: %s", strerror(errno));
  if (WIFSIGNALED(status))
    return lsim_fail(eb, LSIM_E_IO, "gnuplot killed by signal %d",
                     WTERMSIG(status));
  if (!WIFEXITED(status))
    return lsim_fail(eb, LSIM_E_IO, "gnuplot stopped abnormally");
  if (WEXITSTATUS(status) == LSIM__EXEC_FAILED)
    return lsim_fail(eb, LSIM_E_IO, "gnuplot could not be run (not found)");
  if (dir && WEXITSTATUS(status) == LSIM__CHDIR_FAILED)
    return lsim_fail(eb, LSIM_E_IO, "gnuplot: cannot enter %s", dir);
  if (WEXITSTATUS(status) != 0)
    return lsim_fail(eb, LSIM_E_IO, "gnuplot exited with status %d",
                     WEXITSTATUS(status));
  return 0;
}

lsim_err lsim_gnuplot_run(const char *script, lsim_errbuf *eb) {
  return lsim_gnuplot_run_in(NULL, script, NULL, eb);
}
