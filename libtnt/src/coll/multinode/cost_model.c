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
}

/* One step: s bytes each way, r bytes reduced (0 or s), pipelined in
 * chunks. */
static double cost_step(double s, double r, const tnt_mn_cost_params_t *p)
{
    double wire = s * p->beta * p->links, reduce = r * p->gamma * p->cpu_share;
    double chunk = s > 0 ? (double)tnt_mn_chunk_for((size_t)s, p->chunk, p->depth, 1) : 1;
    double k = s > 0 ? ceil(s / chunk) : 1;
    double hi = wire > reduce ? wire : reduce, lo = wire > reduce ? reduce : wire;

    return p->alpha + hi + lo / k;
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
        t = (n - 1) * cost_step(block, block, p) + (n - 1) * cost_step(block, 0, p);
        return t;
    }
    case TNT_MN_ALGO_RECURSIVE_DOUBLING:
        t = rounds * cost_step(bytes, bytes, p);
        break;
    case TNT_MN_ALGO_RABENSEIFNER:
    case TNT_MN_ALGO_AUTO: {
        double s = bytes;
        for (int i = 0; i < rounds; i++) {
            s = ceil(s / 2);
            t += cost_step(s, s, p) + cost_step(s, 0, p);
        }
        break;
    }
    }
    if (pow2 != n) {
        t += cost_step(bytes, bytes, p) + cost_step(bytes, 0, p);
    }
    return t;
}

tnt_mn_algo_t tnt_mn_cost_select(int n, double bytes, const tnt_mn_cost_params_t *p)
{
    static const tnt_mn_algo_t order[] = { TNT_MN_ALGO_RECURSIVE_DOUBLING, TNT_MN_ALGO_RABENSEIFNER,
                                           TNT_MN_ALGO_RING };
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
    case TNT_MN_ALGO_AUTO:
        break;
    }
    return "auto";
}
