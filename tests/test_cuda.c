/* CUDA build path: compiled everywhere, run where a GPU is present. */
#include <criterion/criterion.h>
#include <stdio.h>

#ifdef LSIM_HAVE_CUDA
#include "backends/cuda/cuda.h"

Test(cuda, selftest_kernel_matches_cpu_exactly) {
  char desc[256];
  int n = lsim_cuda_describe(desc, sizeof desc);
  if (n <= 0)
    cr_skip_test("no CUDA device: %s (GPU tests run on the device machine)",
                 desc);
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  cr_assert_eq(lsim_cuda_selftest(1 << 20, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_cuda_selftest(1, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_cuda_selftest(257, &eb), 0, "%s", eb.msg);
  cr_assert_eq(lsim_cuda_selftest(0, &eb), LSIM_E_USAGE);
}
#else
Test(cuda, selftest_kernel_matches_cpu_exactly) {
  cr_skip_test("CUDA backend not built: nvcc was not found at configure time");
}
#endif
