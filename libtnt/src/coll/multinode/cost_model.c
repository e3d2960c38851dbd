/*
 * The cost model of cost_model.h. Every line here has its twin in
 * tests/bench/cost_model.py; change both (unit.cost_model compares them).
 */
#include "coll/multinode/cost_model.h"

#include <math.h>

size_t tnt_mn_chunk_for(size_t bytes, size_t chunk, int depth, size_t esize)
{
    size_t want = depth > 1 ? (bytes + (size_t)depth - 1) / (size_t)depth : bytes;

    if (want < TNT_MN_MIN_CHUNK_BYTES) {
        want = TNT_MN_MIN_CHUNK_BYTES;
    }
    if (want > chunk) {
        want = chunk;
    }
    want = want / esize * esize;
    return want < esize ? esize : want;
}

void tnt_mn_cost_shared_host(double alpha, double beta, double gamma, int ranks, int cores,
                             tnt_mn_cost_params_t *p)
{
    double over = cores > 0 ? (double)ranks / cores : 1;

    p->alpha = alpha * (over > 1 ? over : 1);
    p->beta = beta;
    p->gamma = gamma;
    p->links = ranks;
    p->cpu_share = ranks;
    p->shared_host = 1;
    p->cores = cores > 0 ? cores : 1;
}

static double cost_at_least_one(double x)
{
    return x > 1 ? x : 1;
}

/* One step: s bytes each way, r bytes reduced (0 or s), pipelined in
 * chunks, with `active` of the n members sending (cost_model.h: on a
 * shared host the shared parts scale with active / n). With every member
 * active this is the plain form the constants were fitted with. */
static double cost_step(double s, double r, int active, int n, const tnt_mn_cost_params_t *p)
{
    double alpha = p->alpha, links = p->links, cpu_share = p->cpu_share;

    if (p->shared_host && active < n) {
        double f = (double)active / n, over = p->links / p->cores;
        alpha = p->alpha / cost_at_least_one(over) * cost_at_least_one(over * f);
        links = links * f > p->cores ? links * f : p->cores;
        cpu_share = cpu_share * f > p->cores ? cpu_share * f : p->cores;
    }
    {
        double wire = s * p->beta * links, reduce = r * p->gamma * cpu_share;
        double chunk = s > 0 ? (double)tnt_mn_chunk_for((size_t)s, p->chunk, p->depth, 1) : 1;
        double k = s > 0 ? ceil(s / chunk) : 1;
        double hi = wire > reduce ? wire : reduce, lo = wire > reduce ? reduce : wire;

        return alpha + hi + lo / k;
    }
}

/* Members of 0 .. n-1 whose lowest set bit is mask: the senders of the
 * binomial tree's round for mask. */
static int tree_senders(int n, int mask)
{
    return n > mask ? (n - mask - 1) / (2 * mask) + 1 : 0;
}

double tnt_mn_cost(tnt_mn_algo_t algo, int n, double bytes, const tnt_mn_cost_params_t *p)
{
    int pow2 = 1, rounds = 0;
    double t = 0;

    if (n <= 1) {
        return 0;
    }
    while (pow2 * 2 <= n) {
        pow2 *= 2;
        rounds++;
    }
    switch (algo) {
    case TNT_MN_ALGO_RING: {
        double block = ceil(bytes / n);
        /* The ring pipelines across its steps too, but each step still
         * waits for its first chunk: the per-step form holds. */
        t = (n - 1) * cost_step(block, block, n, n, p) + (n - 1) * cost_step(block, 0, n, n, p);
        return t;
    }
    case TNT_MN_ALGO_TREE:
        /* Reduce rounds, then the same rounds back as the broadcast. */
        for (int mask = 1; mask < n; mask <<= 1) {
            int senders = tree_senders(n, mask);
            t += cost_step(bytes, bytes, senders, n, p) + cost_step(bytes, 0, senders, n, p);
        }
        return t;
    case TNT_MN_ALGO_RECURSIVE_DOUBLING:
        t = rounds * cost_step(bytes, bytes, pow2, n, p);
        break;
    case TNT_MN_ALGO_RABENSEIFNER:
    case TNT_MN_ALGO_AUTO: {
        double s = bytes;
        for (int i = 0; i < rounds; i++) {
            s = ceil(s / 2);
            t += cost_step(s, s, pow2, n, p) + cost_step(s, 0, pow2, n, p);
        }
        break;
    }
    }
    if (pow2 != n) {
        t += cost_step(bytes, bytes, n - pow2, n, p) + cost_step(bytes, 0, n - pow2, n, p);
    }
    return t;
}

tnt_mn_algo_t tnt_mn_cost_select(int n, double bytes, const tnt_mn_cost_params_t *p)
{
    static const tnt_mn_algo_t order[] = { TNT_MN_ALGO_RECURSIVE_DOUBLING, TNT_MN_ALGO_RABENSEIFNER,
                                           TNT_MN_ALGO_RING, TNT_MN_ALGO_TREE };
    tnt_mn_algo_t best = order[0];
    double best_t = tnt_mn_cost(best, n, bytes, p);

    for (size_t i = 1; i < sizeof(order) / sizeof(order[0]); i++) {
        double t = tnt_mn_cost(order[i], n, bytes, p);
        if (t < best_t) {
            best = order[i];
            best_t = t;
        }
    }
    return best;
}

const char *tnt_mn_algo_name(tnt_mn_algo_t algo)
{
    switch (algo) {
    case TNT_MN_ALGO_RING:
        return "ring";
    case TNT_MN_ALGO_RECURSIVE_DOUBLING:
        return "recursive_doubling";
    case TNT_MN_ALGO_RABENSEIFNER:
        return "rabenseifner";
    case TNT_MN_ALGO_TREE:
        return "tree";
    case TNT_MN_ALGO_AUTO:
        break;
    }
    return "auto";
}
