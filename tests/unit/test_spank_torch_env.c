/*
 * The pure parts of the plugin's torchrun variables (spank/torch_env.c):
 * the step's first node from a Slurm node list, and MASTER_PORT from the
 * job id, the step id and the site's range.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "spank/torch_env.h"

static void expect_first(const char *list, const char *want)
{
    char out[64], err[256];

    strcpy(out, "unchanged");
    err[0] = '\0';
    if (tnt_spank_first_node(list, out, sizeof out, err, sizeof err) != 0) {
        fail_msg("'%s': %s", list, err);
    }
    assert_string_equal(out, want);
}

static void expect_error(const char *list, const char *message)
{
    char out[16], err[256];

    strcpy(out, "unchanged");
    assert_int_equal(tnt_spank_first_node(list, out, sizeof out, err, sizeof err), -1);
    assert_non_null(strstr(err, message));
    assert_string_equal(out, "unchanged"); /* set only on success */
}

static void test_first_node(void **state)
{
    (void)state;
    expect_first("n1", "n1");
    expect_first("n[1-4]", "n1");
    expect_first("n[3,1-2]", "n3");              /* the list's order, not sorted */
    expect_first("gpu[07,09-12],cpu3", "gpu07"); /* leading zeros kept */
    expect_first("node17,node3", "node17");
    expect_first("rack[2-3]-n[08-09]", "rack2-n08"); /* every bracket */
    expect_first("n[12]", "n12");
    expect_first(" ,n5 n6", "n5");
    expect_first("login-1.cluster.example", "login-1.cluster.example");
}

static void test_first_node_errors(void **state)
{
    (void)state;
    expect_error("", "names no node");
    expect_error(NULL, "names no node");
    expect_error(",,", "names no node");
    expect_error("n[1-4", "'[' without ']'");
    expect_error("n1-4]", "']' without '['");
    expect_error("n[]", "does not start with a number");
    expect_error("n[a-b]", "does not start with a number");
    expect_error("averyveryverylongnodename[1-2]", "longer than 15 characters");
}

static void test_master_port(void **state)
{
    (void)state;
    /* low + (job * 31 + step) % span: the documented rule. */
    assert_int_equal(tnt_spank_master_port(0, 0, 29500, 30499), 29500);
    assert_int_equal(tnt_spank_master_port(1, 0, 29500, 30499), 29531);
    assert_int_equal(tnt_spank_master_port(1234, 5, 29500, 30499), 29500 + (1234 * 31 + 5) % 1000);
    /* Steps of one job on one node differ while fewer than the span. */
    assert_int_not_equal(tnt_spank_master_port(77, 0, 29500, 30499),
                         tnt_spank_master_port(77, 1, 29500, 30499));
    /* A range of one port, and job ids whose key overflows 32 bits. */
    assert_int_equal(tnt_spank_master_port(99, 3, 31000, 31000), 31000);
    assert_int_equal(tnt_spank_master_port(UINT32_MAX, 7, 1024, 65535),
                     1024 + (int)(((uint64_t)UINT32_MAX * 31 + 7) % 64512));
    for (uint32_t job = 4000000000u; job < 4000000100u; job++) {
        int port = tnt_spank_master_port(job, 0xfffffffeu, 31000, 31009);

        assert_true(port >= 31000 && port <= 31009);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_node),
        cmocka_unit_test(test_first_node_errors),
        cmocka_unit_test(test_master_port),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
