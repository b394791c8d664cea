/* tests/fuzz/fuzz_common.h - shared by the libFuzzer targets.
 *
 * Each target defines LLVMFuzzerTestOneInput. Built two ways:
 *   - tests/tools/run_fuzz.sh: clang -fsanitize=fuzzer,address,undefined (libFuzzer
 *     drives it; corpus in tests/fuzz/corpus/<target>/);
 *   - tests/fuzz/CMakeLists.txt (part of the normal build, any compiler): linked with
 *     replay_main.c, which runs every file of tests/fuzz/corpus/<target>/ and
 *     tests/fuzz/regressions/<target>/ once (ctest fuzz_replay_<target>), so that
 *     crashes found by fuzzing stay fixed (and run under ASan in the sanitizer build
 *     and under valgrind).
 * A target calls FUZZ_CHECK on properties that must hold for every input; a
 * violation aborts with a message (a finding, like a sanitizer report). */
#ifndef DT_FUZZ_COMMON_H
#define DT_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define FUZZ_CHECK(cond, ...)                                                         \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "FUZZ_CHECK failed at %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                             \
            fputc('\n', stderr);                                                      \
            abort();                                                                  \
        }                                                                             \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
