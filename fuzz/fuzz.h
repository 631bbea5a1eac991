/*
** fuzz.h: what the fuzz harnesses share (fuzz/README.md).
**
** Every harness is one libFuzzer target: it defines LLVMFuzzerTestOneInput,
** which takes any bytes and must return 0 without crashing, leaking,
** reading out of bounds or tripping UBSan.  Linked with clang's
** -fsanitize=fuzzer (CMake -DLSIM_FUZZ=ON) it is a libFuzzer binary; in
** every other build it links with fuzz/driver.c, a small deterministic
** mutator that CTest runs for a bounded number of inputs.
**
** Inputs that must be files (the trace importers read paths) go through
** lsim_fuzz_file(): one file per process, under a private temporary
** directory, rewritten for every input and removed at exit.
*/
#ifndef LSIM_FUZZ_H
#define LSIM_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Write data to <private dir>/<name> and return that path (owned by this
** module, valid until the next call).  Aborts on I/O failure: a harness
** that cannot write its input would test nothing. */
const char *lsim_fuzz_file(const char *name, const uint8_t *data, size_t size);

#endif /* LSIM_FUZZ_H */
