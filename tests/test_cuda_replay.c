/*
** test_cuda_replay.c: `lorasim replay --backend cuda --tensor-shape model`
** (issue 6 part 3): every layer and target module of the scenario at its
** own shape, per iteration, on the GPU.
**
** The GPU tests skip with a message when the build has no CUDA or the
** machine has no device; the option checks run everywhere.
*/
#include <criterion/criterion.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LSIM_TMP_PREFIX "/tmp/lsim-cudarep-"
#include "cli_harness.h"

#define FIX LSIM_TEST_DIR "/fixtures/replay/tiny_model.json"

TestSuite(tshape, .init = mk_tmp, .fini = rm_tmp);

Test(tshape, model_shape_needs_the_cuda_backend) {
  cr_assert_eq(lorasim("replay " FIX " --db x.db --tensor-shape model"), 2,
               "%s", out);
  cr_assert(strstr(out, "E_USAGE") && strstr(out, "--backend cuda"), "%s",
            out);
  cr_assert_eq(lorasim("replay " FIX " --db x.db --tensor-shape huge"), 2,
               "%s", out);
  cr_assert(strstr(out, "'small' or 'model'"), "%s", out);
  cr_assert_eq(lorasim("replay " FIX " --db x.db --backend cuda "
                       "--tensor-layers 0"), 2, "%s", out);
  cr_assert(strstr(out, "--tensor-layers"), "%s", out);
  /* nothing was written for a refused run */
  char p[400];
  snprintf(p, sizeof p, "%s/x.db", tmpdir);
  FILE *f = fopen(p, "rb");
  cr_assert_null(f, "a refused run left %s", p);
}

#ifdef LSIM_HAVE_CUDA
#include "backends/cuda/cuda.h"

static long long q1(const char *db, const char *sql) {
  sqlite3 *h;
  sqlite3_stmt *st;
  cr_assert_eq(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK, "%s", sql);
  cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
  long long v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(h);
  return v;
}

Test(tshape, every_layer_and_target_runs_and_is_bit_exact, .timeout = 600) {
  char desc[256];
  if (lsim_cuda_describe(desc, sizeof desc) <= 0)
    cr_skip_test("no CUDA device: %s (GPU tests run on the device machine)",
                 desc);
  char a[400], b[400], c[400];
  snprintf(a, sizeof a, "%s/model.db", tmpdir);
  snprintf(b, sizeof b, "%s/cuda.db", tmpdir);
  snprintf(c, sizeof c, "%s/one.db", tmpdir);
  cr_assert_eq(lorasim("replay " FIX " --db model.db --no-plots --quiet"), 0,
               "%s", out);
  cr_assert_eq(lorasim("replay " FIX " --db cuda.db --no-plots --quiet "
                       "--backend cuda --tensor-shape model --verify cpu_ref"),
               0, "%s", out);
  long long iters = q1(b, "SELECT count(*) FROM iterations");
  cr_assert_gt(iters, 100);
  /* every iteration was timed on the device and one module instance of it
  ** (rotating over 2 layers x 2 targets) equalled the integer reference */
  cr_assert_eq(q1(b, "SELECT count(*) FROM iterations WHERE backend_ns IS "
                     "NULL OR backend_ns <= 0"), 0);
  cr_assert_eq(q1(b, "SELECT count(*) FROM validations WHERE exact = 1"),
               iters);
  cr_assert_eq(q1(b, "SELECT count(DISTINCT reference) FROM validations"), 4);
  /* the GPU changed no decision */
  cr_assert_eq(q1(a, "SELECT count(*) FROM events"),
               q1(b, "SELECT count(*) FROM events"));
  /* one layer of the two does less device work on the same iterations */
  cr_assert_eq(lorasim("replay " FIX " --db one.db --no-plots --quiet "
                       "--backend cuda --tensor-shape model "
                       "--tensor-layers 1"), 0, "%s", out);
  cr_assert_eq(q1(c, "SELECT count(*) FROM iterations"), iters);
  long long two = q1(b, "SELECT sum(backend_ns) FROM iterations");
  long long one = q1(c, "SELECT sum(backend_ns) FROM iterations");
  cr_assert_lt(one, two, "1 layer %lld ns vs 2 layers %lld ns", one, two);
}
#endif
#ifndef LSIM_HAVE_CUDA
Test(tshape, every_layer_and_target_runs_and_is_bit_exact) {
  cr_skip_test("CUDA backend not built: nvcc was not found at configure time");
}
#endif
