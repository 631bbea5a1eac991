/*
** test_outputs.c: the output guarantees of docs/RELIABILITY.md ("Output
** guarantees"), against the real binary: no device node or FIFO replaced,
** no symlink followed, every output whole or absent, nothing reported as
** written that is not, 'ok' only once the database is checkpointed and
** every side file is in place, and one writer per --db.
**
** The disk-full cases mount a small tmpfs of their own and need root (and
** a kernel that lets the test mount); otherwise they are skipped, saying so.
*/
#define _DEFAULT_SOURCE
#define LSIM_TMP_PREFIX "/tmp/lsim-outputs-"
#include "cli_harness.h"

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#define QS LSIM_TEST_DIR "/../scenarios/quickstart.json"
#define BATCH LSIM_TEST_DIR "/fixtures/exec/base_only.json"
#define COLL LSIM_TEST_DIR "/fixtures/compress/three.json"
#define TRACE LSIM_TEST_DIR "/fixtures/traces/native.csv"

static void path_in(char *buf, size_t n, const char *name) {
  snprintf(buf, n, "%s/%s", tmpdir, name);
}

static void write_file(const char *name, const char *text) {
  char p[512];
  path_in(p, sizeof p, name);
  FILE *f = fopen(p, "w");
  cr_assert_not_null(f);
  fputs(text, f);
  cr_assert_eq(fclose(f), 0);
}

static void read_file(const char *path, char *buf, size_t n) {
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f, "%s", path);
  size_t got = fread(buf, 1, n - 1, f);
  buf[got] = 0;
  fclose(f);
}

static int exists_in(const char *name) {
  char p[512];
  struct stat st;
  path_in(p, sizeof p, name);
  return lstat(p, &st) == 0;
}

/* No PATH.PID-N.tmp left in the directory. */
static void assert_no_temporaries(const char *dir) {
  char cmd[600], buf[256] = "";
  snprintf(cmd, sizeof cmd, "ls -a '%s' | grep -c '\\.tmp$'", dir);
  FILE *p = popen(cmd, "r");
  cr_assert_not_null(p);
  if (!fgets(buf, sizeof buf, p))
    buf[0] = 0;
  pclose(p);
  cr_assert_eq(atoi(buf), 0, "temporaries left in %s", dir);
}

static void q_text(const char *db, const char *sql, char *out, size_t n) {
  sqlite3 *h = NULL;
  out[0] = 0;
  cr_assert_eq(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
    snprintf(out, n, "%s", (const char *)sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  sqlite3_close(h);
}

/* A disk-full test that failed half way must not leave its tmpfs mounted
** (rm -rf would stop at it). */
static void fini(void) {
  char mnt[512];
  path_in(mnt, sizeof mnt, "mnt");
  umount(mnt);
  rm_tmp();
}

TestSuite(outputs, .init = mk_tmp, .fini = fini, .timeout = 300);

/* ---- item 2: device nodes and FIFOs are never replaced ---------------------- */

/* A character device node of our own in tmpdir (as /dev/null: 1,3) when
** root, else a FIFO.  The system's /dev/null is never handed to a command
** that could replace it: a regressed build would delete it. */
static void make_node(const char *name, char *p, size_t n) {
  path_in(p, n, name);
  if (geteuid() == 0)
    cr_assert_eq(mknod(p, S_IFCHR | 0666, makedev(1, 3)), 0, "%s",
                 strerror(errno));
  else
    cr_assert_eq(mkfifo(p, 0644), 0);
}

static void assert_node(const char *p) {
  struct stat st;
  cr_assert_eq(lstat(p, &st), 0, "%s is gone", p);
  cr_assert(geteuid() == 0 ? S_ISCHR(st.st_mode) : S_ISFIFO(st.st_mode),
            "%s was replaced", p);
}

Test(outputs, db_device_node_and_fifo_refused_and_kept) {
  char p[512];
  struct stat st;
  /* a FIFO of our own */
  path_in(p, sizeof p, "fifo.db");
  cr_assert_eq(mkfifo(p, 0644), 0);
  int rc = lorasim("replay " QS " --db fifo.db --quiet --no-plots");
  cr_assert_eq(rc, 2, "%s", out);
  cr_assert(strstr(out, "E_OUT_NOT_REGULAR"), "%s", out);
  cr_assert(strstr(out, "fifo"), "%s", out);
  cr_assert_eq(lstat(p, &st), 0);
  cr_assert(S_ISFIFO(st.st_mode), "the fifo was replaced");
  cr_assert(!exists_in("fifo.db.lock") && !exists_in("fifo.prom"));

  /* a character device of our own (a FIFO when not root) */
  make_node("null.db", p, sizeof p);
  rc = lorasim("replay " QS " --db null.db --quiet --no-plots");
  cr_assert_eq(rc, 2, "%s", out);
  cr_assert(strstr(out, "E_OUT_NOT_REGULAR"), "%s", out);
  assert_node(p);
  /* --resume of a device is refused the same way */
  rc = lorasim("replay --resume null.db --quiet");
  cr_assert_eq(rc, 2, "%s", out);
  cr_assert(strstr(out, "E_OUT_NOT_REGULAR"), "%s", out);
  assert_node(p);

  /* a -wal that is a FIFO: nothing removed, the old database kept */
  cr_assert_eq(lorasim("replay " QS " --db k.db --quiet --no-plots"), 0, "%s",
               out);
  path_in(p, sizeof p, "k.db-wal");
  cr_assert_eq(mkfifo(p, 0644), 0);
  rc = lorasim("replay " QS " --db k.db --quiet --no-plots");
  cr_assert_eq(rc, 2, "%s", out);
  cr_assert(strstr(out, "E_OUT_NOT_REGULAR"), "%s", out);
  cr_assert(exists_in("k.db"));
  cr_assert_eq(lstat(p, &st), 0);
  cr_assert(S_ISFIFO(st.st_mode));
}

/* --db never deletes a regular file that is not a lorasim database; an
** empty file or an older database of lorasim is replaced (issue 18 item 2). */
Test(outputs, db_over_a_foreign_file_refused_and_kept) {
  char p[512], got[64];
  write_file("precious.db", "precious\n");
  int rc = lorasim("replay " QS " --db precious.db --quiet --no-plots");
  cr_assert_eq(rc, 2, "%s", out);
  cr_assert(strstr(out, "E_OUT_NOT_DB"), "%s", out);
  path_in(p, sizeof p, "precious.db");
  read_file(p, got, sizeof got);
  cr_assert_str_eq(got, "precious\n");
  cr_assert(!exists_in("precious.db.lock") && !exists_in("precious.prom"));
  /* another program's SQLite database is not lorasim's either */
  sqlite3 *h;
  path_in(p, sizeof p, "other.db");
  cr_assert_eq(sqlite3_open(p, &h), SQLITE_OK);
  cr_assert_eq(sqlite3_exec(h, "CREATE TABLE t(x); INSERT INTO t VALUES (7)",
                            NULL, NULL, NULL),
               SQLITE_OK);
  sqlite3_close(h);
  rc = lorasim("replay " QS " --db other.db --quiet --no-plots");
  cr_assert_eq(rc, 2, "%s", out);
  cr_assert(strstr(out, "E_OUT_NOT_DB"), "%s", out);
  q_text(p, "SELECT x FROM t", got, sizeof got);
  cr_assert_str_eq(got, "7");
  /* an empty file (mktemp's) and an older run are replaced */
  write_file("empty.db", "");
  cr_assert_eq(lorasim("replay " QS " --db empty.db --quiet --no-plots"), 0,
               "%s", out);
  cr_assert_eq(lorasim("replay " QS " --db empty.db --quiet --no-plots"), 0,
               "%s", out);
  path_in(p, sizeof p, "empty.db");
  q_text(p, "SELECT status FROM runs", got, sizeof got);
  cr_assert_str_eq(got, "ok");
}

Test(outputs, other_commands_refuse_device_nodes) {
  char p[512];
  make_node("dev", p, sizeof p);
  static const char *const cmds[] = {
      "exec --in " BATCH " --out dev",
      "compress --in " COLL " --rank 2 --out dev",
      "trace convert " TRACE " -o dev",
      "trace stats " TRACE " --plot dev",
  };
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
    int rc = lorasim(cmds[i]);
    cr_assert_neq(rc, 0, "%s: %s", cmds[i], out);
    cr_assert(strstr(out, "E_OUT_NOT_REGULAR"), "%s: %s", cmds[i], out);
    assert_node(p);
  }
  assert_no_temporaries(tmpdir);
}

/* ---- item 3: no symlink followed; whole or absent -------------------------- */

Test(outputs, replay_side_file_symlink_refused_target_untouched) {
  char p[512], buf[256];
  write_file("precious.txt", "keep me\n");
  path_in(p, sizeof p, "link.prom");
  cr_assert_eq(symlink("precious.txt", p), 0);
  int rc = lorasim("replay " QS " --db link.db --quiet --no-plots");
  cr_assert_eq(rc, 2, "%s", out);
  cr_assert(strstr(out, "E_OUT_SYMLINK"), "%s", out);
  cr_assert(strstr(out, "link.prom"), "%s", out);
  path_in(p, sizeof p, "precious.txt");
  read_file(p, buf, sizeof buf);
  cr_assert_str_eq(buf, "keep me\n");
  cr_assert(!exists_in("link.db"), "refused before anything is written");

  /* the same for a plot and for the database itself */
  static const char *const links[] = {"p-ttft.png", "p-plots.gp",
                                      "p-residency.dat", "p.db"};
  for (size_t i = 0; i < sizeof links / sizeof links[0]; i++) {
    path_in(p, sizeof p, links[i]);
    cr_assert_eq(symlink("precious.txt", p), 0);
    rc = lorasim("replay " QS " --db p.db --quiet");
    cr_assert_eq(rc, 2, "%s: %s", links[i], out);
    cr_assert(strstr(out, "E_OUT_SYMLINK"), "%s: %s", links[i], out);
    unlink(p);
    path_in(p, sizeof p, "precious.txt");
    read_file(p, buf, sizeof buf);
    cr_assert_str_eq(buf, "keep me\n", "%s", links[i]);
  }
  assert_no_temporaries(tmpdir);
}

Test(outputs, other_commands_refuse_symlinks) {
  char p[512], buf[256];
  write_file("precious.txt", "keep me\n");
  static const struct {
    const char *link, *cmd;
  } cases[] = {
      {"r.json", "exec --in " BATCH " --out r.json"},
      {"b.json", "compress --in " COLL " --rank 2 --out b.json"},
      {"t.csv", "trace convert " TRACE " -o t.csv"},
      {"rate.png", "trace stats " TRACE " --plot rate.png"},
      {"s.json", "replay " QS " --db s.db --no-plots --quiet --json s.json"},
      /* refused by the run before anything of the comparison is written */
      {"cmp/fcfs.json", "compare " QS " --schedulers fcfs --out cmp"},
      {"cmp/compare.csv", "compare " QS " --schedulers fcfs --out cmp"},
      {"cmp/compare-service.png", "compare " QS " --schedulers fcfs --out cmp"},
  };
  path_in(p, sizeof p, "cmp");
  cr_assert_eq(mkdir(p, 0755), 0);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    path_in(p, sizeof p, cases[i].link);
    cr_assert_eq(symlink(strchr(cases[i].link, '/')
                             ? "../precious.txt"
                             : "precious.txt",
                         p),
                 0);
    int rc = lorasim(cases[i].cmd);
    cr_assert_neq(rc, 0, "%s: %s", cases[i].cmd, out);
    cr_assert(strstr(out, "E_OUT_SYMLINK"), "%s: %s", cases[i].cmd, out);
    unlink(p);
    path_in(p, sizeof p, "precious.txt");
    read_file(p, buf, sizeof buf);
    cr_assert_str_eq(buf, "keep me\n", "%s", cases[i].cmd);
  }
  assert_no_temporaries(tmpdir);
}

Test(outputs, replaced_output_is_whole_and_a_new_inode) {
  /* the old file is replaced by rename, never truncated in place: a reader
  ** holding the old file still sees it whole */
  char p[512], buf[256];
  write_file("r.json", "old result\n");
  path_in(p, sizeof p, "r.json");
  int fd = open(p, O_RDONLY);
  cr_assert(fd >= 0);
  cr_assert_eq(lorasim("exec --in " BATCH " --out r.json"), 0, "%s", out);
  ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  close(fd);
  cr_assert(n > 0);
  buf[n] = 0;
  cr_assert_str_eq(buf, "old result\n");
  read_file(p, buf, sizeof buf);
  cr_assert(buf[0] == '{', "%s", buf);
  assert_no_temporaries(tmpdir);
}

/* ---- item 4: failed writes are failures ------------------------------------ */

Test(outputs, stdout_on_a_full_device_is_an_error) {
  static const char *const cmds[] = {
      "exec --in " BATCH,
      "trace stats " TRACE " --no-plot",
      "replay " QS " --db q.db --no-plots",
      "version",
  };
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s > /dev/full 2>err.txt",
             tmpdir, LSIM_BIN, cmds[i]);
    int st = system(cmd);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) != 0, "%s exited 0", cmds[i]);
    char p[512], buf[1024];
    path_in(p, sizeof p, "err.txt");
    read_file(p, buf, sizeof buf);
    cr_assert(strstr(buf, "E_OUT_WRITE"), "%s: %s", cmds[i], buf);
  }
}

static int mounted_tmpfs(const char *dir, const char *size) {
  char opts[64];
  snprintf(opts, sizeof opts, "size=%s", size);
  return mount("tmpfs", dir, "tmpfs", 0, opts) == 0;
}

/* Leave about `free_bytes` free on the file system of dir. */
static void fill_to(const char *dir, long long free_bytes) {
  char p[512];
  snprintf(p, sizeof p, "%s/filler", dir);
  unlink(p);
  struct statvfs vs;
  cr_assert_eq(statvfs(dir, &vs), 0);
  long long avail = (long long)vs.f_bavail * (long long)vs.f_frsize;
  long long fill = avail - free_bytes;
  if (fill <= 0)
    return;
  int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  cr_assert(fd >= 0);
  static char zero[65536];
  while (fill > 0) {
    ssize_t w = write(fd, zero, fill < (long long)sizeof zero
                                    ? (size_t)fill
                                    : sizeof zero);
    if (w <= 0)
      break;
    fill -= w;
  }
  close(fd);
}

/* Sweep the free space of a small tmpfs across the run's footprint.  At
** every size: exit 0 means status 'ok', every listed file whole and the
** database complete when copied without its -wal; a non-zero exit means
** the database (if any) does not say 'ok'; no temporary is left.  At least
** one size must fail after the events fit (in the side files or the final
** checkpoint) and still not be 'ok' -- the case the issue found. */
Test(outputs, full_disk_never_reports_success) {
  if (geteuid() != 0)
    cr_skip_test("needs root to mount a small tmpfs (not root here)");
  char mnt[512];
  path_in(mnt, sizeof mnt, "mnt");
  cr_assert_eq(mkdir(mnt, 0755), 0);
  if (!mounted_tmpfs(mnt, "12m"))
    cr_skip_test("cannot mount a tmpfs here: %s", strerror(errno));
  int late_failures = 0, oks = 0, fails = 0;
  for (long long kib = 256; kib <= 11 * 1024; kib += 640) {
    char cmd[4096], db[600], buf[4096];
    int rc;
    snprintf(cmd, sizeof cmd, "rm -f '%s'/r*", mnt);
    cr_assert_eq(system(cmd), 0);
    fill_to(mnt, kib * 1024);
    snprintf(cmd, sizeof cmd,
             "cd '%s' && '%s' replay '%s' --db '%s/r.db' > '%s/../so.txt' "
             "2>&1",
             tmpdir, LSIM_BIN, QS, mnt, mnt);
    int st = system(cmd);
    rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    char so[600];
    path_in(so, sizeof so, "so.txt");
    read_file(so, buf, sizeof buf);
    snprintf(db, sizeof db, "%s/r.db", mnt);
    assert_no_temporaries(mnt);
    char status[64] = "", error[600] = "";
    struct stat dst;
    int have_db = stat(db, &dst) == 0 && dst.st_size > 0;
    if (rc == 0) {
      oks++;
      /* the main file alone: copy it without -wal and read it */
      char copy[600];
      path_in(copy, sizeof copy, "copy.db");
      snprintf(cmd, sizeof cmd, "cp '%s' '%s' && rm -f '%s-wal' '%s-shm'", db,
               copy, copy, copy);
      cr_assert_eq(system(cmd), 0);
      q_text(copy, "SELECT status FROM runs", status, sizeof status);
      cr_assert_str_eq(status, "ok", "free %lld KiB: %s", kib, buf);
      char nev[64], want[64];
      q_text(copy, "SELECT count(*) FROM events", nev, sizeof nev);
      q_text(copy, "SELECT events FROM runs", want, sizeof want);
      cr_assert_str_eq(nev, want, "copied database incomplete");
      unlink(copy);
      /* every file the summary lists is whole */
      for (char *l = strstr(buf, "  plot        "); l;
           l = strstr(l + 1, "  plot        ")) {
        char png[600];
        sscanf(l + 14, "%599s", png);
        struct stat ps;
        cr_assert_eq(stat(png, &ps), 0, "%s listed but missing", png);
        cr_assert_gt(ps.st_size, 0, "%s listed but empty", png);
      }
      char prom[600];
      snprintf(prom, sizeof prom, "%s/r.prom", mnt);
      read_file(prom, buf, sizeof buf);
    } else {
      fails++;
      cr_assert_neq(rc, -1);
      if (have_db) {
        q_text(db, "SELECT status FROM runs", status, sizeof status);
        q_text(db, "SELECT error FROM runs", error, sizeof error);
        cr_assert_str_neq(status, "ok",
                          "free %lld KiB: exit %d but the run is ok: %s", kib,
                          rc, buf);
      }
      /* failed after the events fit: in a side file or the checkpoint */
      if (strstr(buf, "r.prom") || strstr(buf, ".png") ||
          strstr(buf, ".dat") || strstr(buf, ".gp") ||
          strstr(buf, "checkpoint")) {
        late_failures++;
        cr_assert(!strstr(buf, "  plot "), "failed run lists plots: %s", buf);
        if (have_db)
          cr_assert(strcmp(status, "failed") == 0 ||
                        strcmp(status, "running") == 0,
                    "status %s", status);
      }
      /* a .prom that exists is whole: its last metric is there */
      char prom[600];
      snprintf(prom, sizeof prom, "%s/r.prom", mnt);
      struct stat ps;
      if (stat(prom, &ps) == 0) {
        static char pbuf[65536];
        read_file(prom, pbuf, sizeof pbuf);
        cr_assert(strstr(pbuf, "lorasim_adapter_completed_service_rank_units"
                               "_total{rank=\"gt64\"}"),
                  "truncated .prom");
      }
    }
  }
  cr_assert_gt(oks, 0, "no size let the run finish");
  cr_assert_gt(fails, 0, "no size was too small");
  cr_assert_gt(late_failures, 0,
               "no size failed after the events fit (side files, checkpoint)");
}

Test(outputs, full_disk_exec_and_convert_leave_nothing) {
  if (geteuid() != 0)
    cr_skip_test("needs root to mount a small tmpfs (not root here)");
  char mnt[512];
  path_in(mnt, sizeof mnt, "mnt");
  cr_assert_eq(mkdir(mnt, 0755), 0);
  if (!mounted_tmpfs(mnt, "64k"))
    cr_skip_test("cannot mount a tmpfs here: %s", strerror(errno));
  fill_to(mnt, 0);
  int rc = lorasim("trace convert " TRACE " -o mnt/t.csv");
  cr_assert_neq(rc, 0, "%s", out);
  cr_assert(strstr(out, "E_OUT_WRITE") || strstr(out, "E_IO"), "%s", out);
  rc = lorasim("exec --in " BATCH " --out mnt/r.json");
  cr_assert_neq(rc, 0, "%s", out);
  cr_assert(strstr(out, "E_OUT_WRITE"), "%s", out);
  cr_assert(!exists_in("mnt/t.csv") && !exists_in("mnt/r.json"),
            "a partial output was left");
  assert_no_temporaries(mnt);
}

/* ---- item 5: one writer per --db ---------------------------------------------- */

static int lock_is_held(const char *path) {
  int fd = open(path, O_RDWR | O_NOFOLLOW);
  if (fd < 0)
    return 0;
  int held = flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  close(fd);
  return held;
}

Test(outputs, second_writer_refused_first_finishes_ok) {
  char cmd[2048], lk[512], rcf[512], buf[4096];
  path_in(lk, sizeof lk, "one.db.lock");
  path_in(rcf, sizeof rcf, "first.rc");
  /* the hook holds the first run for 3 s just after it took the lock */
  snprintf(cmd, sizeof cmd,
           "cd '%s' && (LSIM_TEST_HOLD_LOCK_MS=3000 '%s' replay '%s' --db "
           "one.db --quiet --no-plots > first.out 2>&1; echo $? > first.rc) &",
           tmpdir, LSIM_BIN, QS);
  cr_assert_eq(system(cmd), 0);
  int held = 0;
  for (int i = 0; i < 200 && !(held = lock_is_held(lk)); i++)
    usleep(20000);
  cr_assert(held, "the first run never took its lock");
  int rc = lorasim("replay " QS " --db one.db --quiet --no-plots");
  cr_assert_eq(rc, 1, "%s", out);
  cr_assert(strstr(out, "E_OUT_LOCKED"), "%s", out);
  cr_assert(strstr(out, "one.db"), "%s", out);
  rc = lorasim("replay --resume one.db --quiet");
  cr_assert_neq(rc, 0, "%s", out);
  cr_assert(strstr(out, "E_OUT_LOCKED"), "%s", out);
  struct stat st;
  for (int i = 0; i < 1500 && stat(rcf, &st) != 0; i++)
    usleep(20000);
  cr_assert_eq(stat(rcf, &st), 0, "the first run did not finish");
  usleep(50000);
  read_file(rcf, buf, sizeof buf);
  cr_assert_eq(atoi(buf), 0, "first run: %s", buf);
  char db[512], status[64];
  path_in(db, sizeof db, "one.db");
  q_text(db, "SELECT status FROM runs", status, sizeof status);
  cr_assert_str_eq(status, "ok");
  cr_assert(!exists_in("one.db.lock"), "the lock file is removed on release");
  /* and the path is free again */
  cr_assert_eq(lorasim("replay " QS " --db one.db --quiet --no-plots"), 0,
               "%s", out);
}
