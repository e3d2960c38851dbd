/*
 * The hang doctor's verdict rule (coll/verdict.c), on hand-made tables:
 * who is named, in which collective, which ranks are listed as waiting,
 * who states it, and when nobody is blamed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "coll/doctor.h"
#include "coll/verdict.h"

#define ALLREDUCE_IN  ((uint64_t)TNT_DOCTOR_ALLREDUCE << 2 | INFO_IN)
#define ALLREDUCE_OUT ((uint64_t)TNT_DOCTOR_ALLREDUCE << 2)

static const char *hosts[] = { "n1", "n1", "n2", "n2" };

static void fill(struct tnt_verdict_rank *v, int size)
{
    for (int r = 0; r < size; r++) {
        v[r] = (struct tnt_verdict_rank){ .known = 1,
                                          .waiting = 1,
                                          .seq = 7,
                                          .info = ALLREDUCE_IN,
                                          .host = hosts[r],
                                          .pid = 100 + r };
    }
}

static void test_not_entered(void **state)
{
    (void)state;
    struct tnt_verdict_rank v[4];
    char text[768];
    int reporter = -9;
    fill(v, 4);
    /* Rank 2 finished allreduce #6 and never entered #7. */
    v[2] = (struct tnt_verdict_rank){
        .known = 1, .seq = 6, .info = ALLREDUCE_OUT, .host = "n2", .pid = 102
    };
    assert_int_equal(tnt_verdict_rule(v, 4, 30, "for", text, sizeof text, &reporter), 1);
    assert_int_equal(reporter, 0);
    assert_non_null(strstr(text, "rank 2 (n2, pid 102) has not entered allreduce #7 for 30 s"));
    assert_non_null(strstr(text, "its last was allreduce #6"));
    assert_non_null(strstr(text, "waiting in it: ranks 0-1,3"));
}

static void test_stopped_inside(void **state)
{
    (void)state;
    struct tnt_verdict_rank v[4];
    char text[768];
    int reporter;
    fill(v, 4);
    v[1].waiting = 0; /* inside #7, heartbeat stale: SIGSTOP */
    assert_int_equal(tnt_verdict_rule(v, 4, 30, "for", text, sizeof text, &reporter), 1);
    assert_int_equal(reporter, 0);
    assert_non_null(strstr(text, "rank 1 (n1, pid 101) stopped making progress inside "
                                 "allreduce #7 for 30 s; waiting in it: ranks 0,2-3"));
}

static void test_lowest_seq_then_rank(void **state)
{
    (void)state;
    struct tnt_verdict_rank v[4];
    char text[768];
    int reporter;
    fill(v, 4);
    v[1].waiting = v[3].waiting = 0;
    v[1].seq = 7;
    v[3].seq = 5; /* further behind: named, though its rank is higher */
    v[3].info = ALLREDUCE_OUT;
    assert_int_equal(tnt_verdict_rule(v, 4, 10, "within", text, sizeof text, &reporter), 1);
    assert_non_null(strstr(text, "rank 3 (n2, pid 103) has not entered allreduce #7 within"));
}

static void test_silent_node(void **state)
{
    (void)state;
    struct tnt_verdict_rank v[4];
    char text[768];
    int reporter;
    fill(v, 4);
    v[2].known = v[3].known = 0; /* node n2 never reported */
    v[2].waiting = v[3].waiting = 0;
    assert_int_equal(tnt_verdict_rule(v, 4, 30, "for", text, sizeof text, &reporter), 1);
    assert_non_null(strstr(text, "rank 2 (n2, pid 102) does not answer, nor does any rank on "
                                 "its node"));
    assert_non_null(strstr(text, "ranks 0-1"));
}

static void test_paused_suspect(void **state)
{
    (void)state;
    struct tnt_verdict_rank v[2];
    char text[768] = "";
    int reporter;
    fill(v, 2);
    v[1] = (struct tnt_verdict_rank){
        .known = 1, .seq = 6, .info = ALLREDUCE_OUT | INFO_PAUSED, .host = "n1", .pid = 101
    };
    assert_int_equal(tnt_verdict_rule(v, 2, 30, "for", text, sizeof text, &reporter), 0);
}

static void test_all_waiting(void **state)
{
    (void)state;
    struct tnt_verdict_rank v[4];
    char text[768];
    int reporter;
    fill(v, 4);
    v[2].seq = v[3].seq = 8;
    v[2].info = v[3].info = (uint64_t)TNT_DOCTOR_BROADCAST << 2 | INFO_IN;
    assert_int_equal(tnt_verdict_rule(v, 4, 30, "for", text, sizeof text, &reporter), 1);
    assert_int_equal(reporter, 0);
    assert_non_null(strstr(text, "no rank is behind"));
    assert_non_null(strstr(text, "ranks 0-1 in allreduce #7; ranks 2-3 in broadcast #8"));
}

static void test_same_table_same_line(void **state)
{
    (void)state;
    struct tnt_verdict_rank v[4];
    char a[768], b[768];
    int ra, rb;
    fill(v, 4);
    v[2].waiting = 0;
    tnt_verdict_rule(v, 4, 30, "for", a, sizeof a, &ra);
    tnt_verdict_rule(v, 4, 30, "for", b, sizeof b, &rb);
    assert_string_equal(a, b);
    assert_int_equal(ra, rb);
}

static void test_truncation(void **state)
{
    (void)state;
    struct tnt_verdict_rank v[4];
    char small[40];
    int reporter;
    fill(v, 4);
    v[2].waiting = 0;
    tnt_verdict_rule(v, 4, 30, "for", small, sizeof small, &reporter);
    assert_int_equal(strlen(small), sizeof small - 1);
    assert_string_equal(small + sizeof small - 4, "...");
}

/* A node cut off from the network: none of the other nodes was heard from
 * during this wait. It is this node that cannot be reached, so its verdict
 * names itself, not the lowest silent rank elsewhere (which the nodes
 * still connected to each other would contradict). */
static void test_cut_off_node(void **state)
{
    (void)state;
    static const char *six[] = { "a", "a", "b", "b", "c", "c" };
    struct tnt_verdict_rank v[6];
    char text[768];
    int reporter = -9;
    for (int r = 0; r < 6; r++) {
        v[r] = (struct tnt_verdict_rank){ .known = 1,
                                          .waiting = 0,
                                          .seq = 3, /* stale reports of an earlier wait */
                                          .info = ALLREDUCE_OUT,
                                          .host = six[r],
                                          .pid = 100 + r,
                                          .node = r / 2 };
    }
    v[4].local = v[5].local = v[4].heard = v[5].heard = 1;
    v[4].waiting = v[5].waiting = 1;
    v[4].seq = v[5].seq = 9;
    v[4].info = v[5].info = ALLREDUCE_IN;
    assert_int_equal(tnt_verdict_rule(v, 6, 5, "within", text, sizeof text, &reporter), 1);
    assert_non_null(strstr(text, "node c (ranks 4-5) hears from no other node"));
    assert_non_null(strstr(text, "ranks 0-3 on 2 other nodes"));
    assert_non_null(strstr(text, "allreduce #9"));
    assert_null(strstr(text, "rank 0 ("));
    assert_int_equal(reporter, 4);

    /* One other node still heard from: not cut off, the usual rule. */
    v[2].heard = 1;
    assert_int_equal(tnt_verdict_rule(v, 6, 5, "within", text, sizeof text, &reporter), 1);
    assert_null(strstr(text, "hears from no other node"));

    /* Two nodes: from either side the other one is silent, and nothing
     * tells which link broke; the usual rule names the other node. */
    v[2].heard = 0;
    for (int r = 0; r < 6; r++) {
        v[r].node = r < 4 ? 0 : 1;
    }
    assert_int_equal(tnt_verdict_rule(v, 6, 5, "within", text, sizeof text, &reporter), 1);
    assert_null(strstr(text, "hears from no other node"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_not_entered),          cmocka_unit_test(test_stopped_inside),
        cmocka_unit_test(test_lowest_seq_then_rank), cmocka_unit_test(test_silent_node),
        cmocka_unit_test(test_paused_suspect),       cmocka_unit_test(test_all_waiting),
        cmocka_unit_test(test_same_table_same_line), cmocka_unit_test(test_truncation),
        cmocka_unit_test(test_cut_off_node),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
