/*
 * Recursive doubling across nodes: log2(p) rounds, each an exchange of the
 * whole vector with the partner at distance 2^k. Latency-optimal, so it is
 * the choice for small messages between separate nodes (where ranks share
 * cores, the tree's fewer messages win: allreduce_tree.c). A
 * non-power-of-two group first folds its 2*(n-p) lowest members pairwise
 * (even into odd), runs on p members, then hands the result back to the
 * folded ones.
 *
 * Every round is one tnt_mn_exchange: the vector goes in pipelined chunks,
 * so the reduction of one chunk overlaps the transfer of the next, and
 * vectors larger than the staging area need no separate passes.
 *
 * Bitwise identity: in every round both partners combine the same two
 * operands in the same order (lower member first) with the same kernel, and
 * at every round all members of a block of 2^k hold the same value, so all
 * members end with the same bits. The order is a function of n only, so
 * results are reproducible for a given layout.
 */
#include "coll/multinode/multinode_impl.h"

#include "reduce/reduce.h"

/* Tag steps: round k uses k; the fold and the hand-back use these. */
#define RD_STEP_FOLD 62u
#define RD_STEP_BACK 63u

tnt_status_t tnt_mn_allreduce_recursive_doubling(const tnt_mn_group_op_t *g)
{
    size_t bytes = g->count * tnt_dtype_size(g->dtype);
    int p = tnt_mn_pow2_below(g->n);
    int rem = g->n - p, v;
    tnt_mn_xfer_t x = { .send_to = -1, .recv_from = -1, .divisor = 1 };
    tnt_status_t status;

    if (g->n == 1) {
        if (g->divisor > 1) {
            tnt_reduce_divide(g->dtype, g->buf, g->count, g->divisor);
        }
        return TNT_OK;
    }
    x.send_len = x.recv_len = bytes;

    status = tnt_mn_fold_in(g, p, RD_STEP_FOLD, RD_STEP_BACK, &v);
    if (status != TNT_OK || v < 0) {
        return status;
    }

    for (int mask = 1, round = 0; mask < p; mask <<= 1, round++) {
        int pv = v ^ mask;
        int peer = tnt_mn_fold_real(pv, rem);

        x.send_to = peer;
        x.recv_from = peer;
        x.reduce = 1;
        x.recv_first = pv < v;
        x.divisor = (mask << 1) >= p ? g->divisor : 1;
        x.step = (uint32_t)round;
        status = tnt_mn_exchange(g, &x);
        if (status != TNT_OK) {
            return status;
        }
    }

    return tnt_mn_fold_back(g, p, RD_STEP_BACK);
}
