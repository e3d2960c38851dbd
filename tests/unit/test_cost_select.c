/*
 * What the cost model picks (coll/multinode/cost_model.c), as users see it:
 * between separate nodes the binomial tree never wins (twice recursive
 * doubling's rounds, the whole vector each), while on one host shared by
 * many ranks it is the choice for small vectors and Rabenseifner or the
 * ring stay the choice for large ones; a step with every member sending
 * costs the same as before the shared-host rule existed.
 */
#include "coll/multinode/cost_model.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

static const double sizes[] = { 8, 512, 4096, 65536, 1 << 20, 16 << 20, 64 << 20 };
#define NUM_SIZES (sizeof(sizes) / sizeof(sizes[0]))

static void test_separate_nodes_never_tree(void **state)
{
    (void)state;
    for (int links = 1; links <= 8; links *= 2) {
        tnt_mn_cost_params_t p = { .alpha = 1.5e-6, /* InfiniBand HDR */
                                   .beta = 1.0 / 25e9,
                                   .gamma = TNT_MN_COST_GAMMA_S_PER_B,
                                   .links = links,
                                   .cpu_share = 1,
                                   .chunk = 1 << 20,
                                   .depth = 4 };
        for (int n = 2; n <= 1024; n = n < 16 ? n + 1 : n * 2) {
            for (size_t i = 0; i < NUM_SIZES; i++) {
                tnt_mn_algo_t a = tnt_mn_cost_select(n, sizes[i], &p);
                if (a == TNT_MN_ALGO_TREE) {
                    fail_msg("%d nodes x %d ranks, %.0f B: tree picked between separate nodes", n,
                             links, sizes[i]);
                }
                /* Cross-check the reason: more time than recursive doubling. */
                assert_true(tnt_mn_cost(TNT_MN_ALGO_TREE, n, sizes[i], &p) >
                            tnt_mn_cost(TNT_MN_ALGO_RECURSIVE_DOUBLING, n, sizes[i], &p));
            }
        }
    }
}

static tnt_mn_cost_params_t shared_host(int ranks)
{
    tnt_mn_cost_params_t p = { .chunk = 1 << 20, .depth = 4 };
    tnt_mn_cost_shared_host(TNT_MN_COST_ALPHA_S, TNT_MN_COST_BETA_S_PER_B,
                            TNT_MN_COST_GAMMA_S_PER_B, ranks, 2, &p);
    return p;
}

static void test_shared_host_small_tree_large_not(void **state)
{
    (void)state;
    for (int n = 8; n <= 16; n *= 2) {
        tnt_mn_cost_params_t p = shared_host(n);
        assert_int_equal(tnt_mn_cost_select(n, 8, &p), TNT_MN_ALGO_TREE);
        assert_int_equal(tnt_mn_cost_select(n, 4096, &p), TNT_MN_ALGO_TREE);
        assert_int_not_equal(tnt_mn_cost_select(n, 16 << 20, &p), TNT_MN_ALGO_TREE);
        assert_int_not_equal(tnt_mn_cost_select(n, 64 << 20, &p), TNT_MN_ALGO_TREE);
    }
    /* Two ranks on two cores share nothing worth modelling: no tree. */
    {
        tnt_mn_cost_params_t p = shared_host(2);
        for (size_t i = 0; i < NUM_SIZES; i++) {
            assert_int_not_equal(tnt_mn_cost_select(2, sizes[i], &p), TNT_MN_ALGO_TREE);
        }
    }
}

/* Steps in which every member sends (a power-of-two group: no fold) cost
 * what the fitted form says: alpha * n/cores + the larger of wire and
 * reduction + the smaller over the chunks. */
static void test_all_active_steps_unchanged(void **state)
{
    tnt_mn_cost_params_t p = shared_host(16);
    double alpha = TNT_MN_COST_ALPHA_S * 8, m = 8;
    double wire = m * TNT_MN_COST_BETA_S_PER_B * 16, reduce = m * TNT_MN_COST_GAMMA_S_PER_B * 16;
    double step = alpha + (wire > reduce ? wire : reduce) + (wire > reduce ? reduce : wire);

    (void)state;
    assert_float_equal(tnt_mn_cost(TNT_MN_ALGO_RECURSIVE_DOUBLING, 16, m, &p), 4 * step, 1e-12);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_separate_nodes_never_tree),
        cmocka_unit_test(test_shared_host_small_tree_large_not),
        cmocka_unit_test(test_all_active_steps_unchanged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
