/*
 * What the fuzz harnesses share: FUZZ_CHECK, which reports a broken
 * property and aborts (libFuzzer then saves the input as a crash), and the
 * cookie the UCX and hang-doctor harnesses give their communicator. The
 * corpus generator (make_corpus.py) writes the same cookie into the valid
 * messages, so that the fuzzer starts past the cookie check: 128 bits
 * compared with xor and or, which no mutation finds by chance.
 */
#ifndef TNT_TESTS_FUZZ_CHECK_H
#define TNT_TESTS_FUZZ_CHECK_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define FUZZ_COOKIE_0 0x0123456789abcdefull
#define FUZZ_COOKIE_1 0xfedcba9876543210ull

/* A harness that silences stderr around a noisy call saves the real one
 * here first, so a failed check is still reported (each harness is one
 * translation unit, hence static). */
static int fuzz_report_fd = -1;

#define FUZZ_CHECK(cond, ...)                                                     \
    do {                                                                          \
        if (!(cond)) {                                                            \
            dprintf(fuzz_report_fd >= 0 ? fuzz_report_fd : 2,                     \
                    "%s:%d: fuzz check failed: %s: ", __FILE__, __LINE__, #cond); \
            dprintf(fuzz_report_fd >= 0 ? fuzz_report_fd : 2, __VA_ARGS__);       \
            dprintf(fuzz_report_fd >= 0 ? fuzz_report_fd : 2, "\n");              \
            abort();                                                              \
        }                                                                         \
    } while (0)

/* Reads a little-endian unsigned integer of n bytes from *data, advancing
 * it; missing bytes read as 0, so every input has a meaning. */
static inline uint32_t fuzz_take(const uint8_t **data, size_t *size, int n)
{
    uint32_t v = 0;
    for (int i = 0; i < n; i++) {
        if (*size > 0) {
            v |= (uint32_t) * *data << (8 * i);
            (*data)++;
            (*size)--;
        }
    }
    return v;
}

#endif
