/*
 * Checks for the test programs that run as ranks: the integration checks
 * (bootstrap_check, fusion_check, multinode_check and
 * launcher_pmix_client in tests/integration) and the forked ranks
 * of tests/unit/test_shm.c. A failed check prints one line on stderr,
 *
 *   <program> rank <r>: FAILED at <file>:<line>: <message>
 *
 * ("rank <r>" only once the rank is known), and then:
 *   CHECK, CHECK_OK    end the process with exit status 1, for checks that
 *                      what follows depends on;
 *   EXPECT, EXPECT_OK  count the failure in check_failures and go on, for
 *                      independent checks that should all be reported; the
 *                      program turns check_failures into its exit status.
 * Neither hides a return or a goto. CHECK_OK and EXPECT_OK take a call
 * returning tnt_status_t and report its status and tnt_last_error().
 *
 * Before including this header a program defines
 *   CHECK_PROGRAM  its name, a string literal;
 *   CHECK_RANK     an int expression for its rank at the point of the check
 *                  (negative while unknown), evaluated where a check fails.
 */
#ifndef TNT_TESTS_COMMON_CHECK_H
#define TNT_TESTS_COMMON_CHECK_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#if !defined(CHECK_PROGRAM) || !defined(CHECK_RANK)
#error "define CHECK_PROGRAM and CHECK_RANK before including check.h"
#endif

/* Failed EXPECTs so far; unused by programs that only CHECK. */
static int check_failures __attribute__((unused));

__attribute__((format(printf, 4, 5))) static inline void
check_report(int rank, const char *file, int line, const char *fmt, ...)
{
    va_list ap;

    if (rank >= 0) {
        fprintf(stderr, "%s rank %d: FAILED at %s:%d: ", CHECK_PROGRAM, rank, file, line);
    } else {
        fprintf(stderr, "%s: FAILED at %s:%d: ", CHECK_PROGRAM, file, line);
    }
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

#define CHECK(cond, ...)                                                 \
    do {                                                                 \
        if (!(cond)) {                                                   \
            check_report((CHECK_RANK), __FILE__, __LINE__, __VA_ARGS__); \
            exit(1);                                                     \
        }                                                                \
    } while (0)

#define EXPECT(cond, ...)                                                \
    do {                                                                 \
        if (!(cond)) {                                                   \
            check_report((CHECK_RANK), __FILE__, __LINE__, __VA_ARGS__); \
            check_failures++;                                            \
        }                                                                \
    } while (0)

#define CHECK_OK(call)                                                                       \
    do {                                                                                     \
        tnt_status_t check_status_ = (call);                                                 \
        CHECK(check_status_ == TNT_OK, "%s returned %d (%s): %s", #call, (int)check_status_, \
              tnt_status_string(check_status_), tnt_last_error());                           \
    } while (0)

#define EXPECT_OK(call)                                                                       \
    do {                                                                                      \
        tnt_status_t check_status_ = (call);                                                  \
        EXPECT(check_status_ == TNT_OK, "%s returned %d (%s): %s", #call, (int)check_status_, \
               tnt_status_string(check_status_), tnt_last_error());                           \
    } while (0)

#endif /* TNT_TESTS_COMMON_CHECK_H */
