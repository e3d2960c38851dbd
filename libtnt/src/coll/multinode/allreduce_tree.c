/*
 * Binomial tree across nodes: reduce to member 0, then broadcast from it.
 * 2 ceil(log2 n) rounds (twice recursive doubling's), but only 2(n-1)
 * messages in all, against recursive doubling's n log2 n: in a round of
 * the reduce only the members that still hold a partial sum take part, so
 * most members send once and then wait. Where ranks share cores (simulated
 * nodes, an oversubscribed host) every message costs its sender's and its
 * receiver's CPU time, and for small vectors the allreduce takes about the
 * job's CPU time divided by the cores: there the fewer messages win (the
 * cost model's shared-host term, cost_model.h).
 *
 * Reduce: in round k (mask = 2^k) a member whose lowest set bit is mask
 * sends its partial sum to member - mask and is done; a member below it
 * with member + mask < n receives and adds (own operand first). Broadcast:
 * the same tree backwards, the whole vector each time. Every round is one
 * tnt_mn_exchange, so large vectors go in pipelined chunks.
 *
 * Bitwise identity: member 0 combines every partial sum in an order fixed
 * by n and divides once, at its last combination; everyone else receives
 * those bits.
 */
#include "coll/multinode/multinode_impl.h"

#include "reduce/reduce.h"

/* Tag steps: reduce round k uses k, broadcast round k uses 64 + k. */
#define TREE_STEP_BCAST 64u

tnt_status_t tnt_mn_allreduce_tree(const tnt_mn_group_op_t *g)
{
    size_t bytes = g->count * tnt_dtype_size(g->dtype);
    int me = g->me, n = g->n, top = 1, round = 0;
    tnt_status_t status;

    if (n == 1) {
        if (g->divisor > 1) {
            tnt_reduce_divide(g->dtype, g->buf, g->count, g->divisor);
        }
        return TNT_OK;
    }
    while (top * 2 < n) {
        top *= 2; /* the largest power of two below n: member 0's last partner */
    }

    /* Reduce to member 0. */
    for (int mask = 1; mask < n; mask <<= 1, round++) {
        tnt_mn_xfer_t x = { .send_to = -1, .recv_from = -1, .divisor = 1, .step = (uint32_t)round };

        if (me & mask) {
            x.send_to = me - mask;
            x.send_len = bytes;
        } else if (me + mask < n) {
            x.recv_from = me + mask;
            x.recv_len = bytes;
            x.reduce = 1;
            x.recv_first = 0;
            x.divisor = me == 0 && mask == top ? g->divisor : 1;
        } else {
            continue;
        }
        status = tnt_mn_exchange(g, &x);
        if (status != TNT_OK || (me & mask)) {
            if (status != TNT_OK) {
                return status;
            }
            break;
        }
    }

    /* Broadcast from member 0: member me gets the result from me - lowbit
     * and passes it on to me + 2^j for every 2^j below its lowest bit. */
    {
        int low = me == 0 ? top * 2 : me & -me;
        round = 0;
        for (int mask = top; mask >= 1; mask >>= 1) {
            tnt_mn_xfer_t x = { .send_to = -1, .recv_from = -1, .divisor = 1 };

            x.step = TREE_STEP_BCAST + (uint32_t)round++;
            if (mask == low) {
                x.recv_from = me - mask;
                x.recv_len = bytes;
            } else if (mask < low && me + mask < n) {
                x.send_to = me + mask;
                x.send_len = bytes;
            } else {
                continue;
            }
            status = tnt_mn_exchange(g, &x);
            if (status != TNT_OK) {
                return status;
            }
        }
    }
    return TNT_OK;
}
