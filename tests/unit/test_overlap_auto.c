/*
 * TNT_OVERLAP=auto's choice (comm/progress.c, tnt_overlap_auto): the
 * progress thread runs posted operations across nodes, and on one node only
 * when every local rank's compute threads and its progress thread have a
 * core each. The 2-CPU case with two unpinned ranks is the one that made
 * small-model training 26% slower when the rule looked at one rank's
 * affinity only (each unpinned rank sees both CPUs).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "comm/comm.h"

static void test_one_node(void **state)
{
    (void)state;
    /* 2 CPUs, 2 ranks of 1 compute thread (the launcher's OMP_NUM_THREADS):
     * 4 busy threads on 2 cores, pinned or not. */
    assert_int_equal(tnt_overlap_auto(1, 2, 1, 2), 0);
    /* One rank alone on 2 CPUs: its thread has the second core. */
    assert_int_equal(tnt_overlap_auto(1, 1, 1, 2), 1);
    /* A 64-core node, 8 ranks of 7 threads: exactly one core each. */
    assert_int_equal(tnt_overlap_auto(1, 8, 7, 64), 1);
    /* ... of 8 threads: no room for the progress threads. */
    assert_int_equal(tnt_overlap_auto(1, 8, 8, 64), 0);
    /* One CPU, one rank: the thread could only take turns with the caller. */
    assert_int_equal(tnt_overlap_auto(1, 1, 1, 1), 0);
}

static void test_across_nodes(void **state)
{
    (void)state;
    /* The network moves data while the caller computes. */
    assert_int_equal(tnt_overlap_auto(2, 2, 1, 2), 1);
    assert_int_equal(tnt_overlap_auto(16, 1, 1, 1), 1);
}

static void test_no_overflow(void **state)
{
    (void)state;
    assert_int_equal(tnt_overlap_auto(1, 1 << 20, 1 << 20, 1 << 30), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_node),
        cmocka_unit_test(test_across_nodes),
        cmocka_unit_test(test_no_overflow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
