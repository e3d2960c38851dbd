/*
 * Prints the C cost model (coll/multinode/cost_model.c) on the grid of
 * tests/bench/cost_model.py --dump, in the same format, so that
 * check_cost_model.sh can compare the two implementations line by line.
 */
#include "coll/multinode/cost_model.h"

#include <stdio.h>

int main(void)
{
    static const int nodes[] = { 2, 3, 4, 5, 7, 8, 13, 16, 64, 256, 1000, 1024 };
    static const double bytes[] = { 8, 4096, 65536, 1 << 20, 3 << 20, 16 << 20, 64 << 20 };
    static const int links[] = { 1, 4 };
    static const tnt_mn_algo_t algos[] = { TNT_MN_ALGO_RECURSIVE_DOUBLING, TNT_MN_ALGO_RABENSEIFNER,
                                           TNT_MN_ALGO_RING, TNT_MN_ALGO_TREE };
    const size_t num_algos = sizeof(algos) / sizeof(algos[0]);

    for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++) {
        tnt_mn_cost_params_t p = { .chunk = 1 << 20, .depth = 4 };
        tnt_mn_cost_shared_host(TNT_MN_COST_ALPHA_S, TNT_MN_COST_BETA_S_PER_B,
                                TNT_MN_COST_GAMMA_S_PER_B, nodes[i], 2, &p);
        for (size_t j = 0; j < sizeof(bytes) / sizeof(bytes[0]); j++) {
            printf("%d %.0f 0", nodes[i], bytes[j]);
            for (size_t a = 0; a < num_algos; a++) {
                printf(" %.9e", tnt_mn_cost(algos[a], nodes[i], bytes[j], &p));
            }
            printf(" %s\n", tnt_mn_algo_name(tnt_mn_cost_select(nodes[i], bytes[j], &p)));
        }
    }
    for (size_t l = 0; l < sizeof(links) / sizeof(links[0]); l++) {
        tnt_mn_cost_params_t p = { .alpha = TNT_MN_COST_ALPHA_S,
                                   .beta = TNT_MN_COST_BETA_S_PER_B,
                                   .gamma = TNT_MN_COST_GAMMA_S_PER_B,
                                   .links = links[l],
                                   .cpu_share = links[l] == 1 ? 1 : 3,
                                   .chunk = 1 << 20,
                                   .depth = 4 };
        for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++) {
            for (size_t j = 0; j < sizeof(bytes) / sizeof(bytes[0]); j++) {
                printf("%d %.0f %d", nodes[i], bytes[j], links[l]);
                for (size_t a = 0; a < num_algos; a++) {
                    printf(" %.9e", tnt_mn_cost(algos[a], nodes[i], bytes[j], &p));
                }
                printf(" %s\n", tnt_mn_algo_name(tnt_mn_cost_select(nodes[i], bytes[j], &p)));
            }
        }
    }
    return 0;
}
