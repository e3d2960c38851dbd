/*
 * Rabenseifner's allreduce across nodes: a reduce-scatter by recursive
 * halving (log2 p steps; in step k each member sends half of its current
 * range to the partner at distance p/2^(k+1) and reduces the other half),
 * then an allgather by recursive doubling (the same partners in reverse
 * order, each step doubling the range held). Every member sends and
 * receives 2 (p-1)/p of the vector, as in the ring, but in 2 log2 p steps
 * instead of 2 (n-1): the bandwidth-optimal choice once the ring's step
 * latency adds up (many nodes, mid-size messages). Thakur, Rabenseifner and
 * Gropp, "Optimization of Collective Communication Operations in MPICH"
 * (IJHPCA 2005), section 4.
 *
 * Non-power-of-two groups fold in as in recursive doubling: members
 * 0 .. 2*(n-p)-1 pair up, the even one hands its vector to the odd one
 * first and gets the result back at the end.
 *
 * Ranges are in elements: the range of virtual member v before step k is
 * fixed by the bits of v above the step's mask, so partners agree on it;
 * the lower half goes to the member whose bit is clear.
 *
 * Bitwise identity: each element is reduced along one fixed tree (lower
 * virtual member first at every step), once, by the member that ends up
 * owning it, which divides in the last halving step before the single
 * rounding; the allgather and the hand-back only copy. So every member
 * ends with the same bits, and the order depends only on n.
 */
#include "coll/multinode/multinode_impl.h"

#include "reduce/reduce.h"

#define RAB_STEP_FOLD  126u
#define RAB_STEP_BACK  127u
#define RAB_MAX_ROUNDS 32 /* 2^31 members is far beyond the tag's ranks */

/* Of the range [lo, hi) that two partners held together in a round, the
 * half that is not [part_lo, part_hi): what one gives away in the
 * reduce-scatter, and receives back in the allgather. */
static inline void rab_other_half(size_t lo, size_t hi, size_t part_lo, size_t part_hi,
                                  size_t *other_lo, size_t *other_hi)
{
    *other_lo = part_lo == lo ? part_hi : lo;
    *other_hi = part_lo == lo ? hi : part_lo;
}

tnt_status_t tnt_mn_allreduce_rabenseifner(const tnt_mn_group_op_t *g)
{
    size_t esize = tnt_dtype_size(g->dtype);
    int p = tnt_mn_pow2_below(g->n);
    int rem = g->n - p, v, rounds = 0;
    /* lo[k], hi[k]: this member's element range before halving step k;
     * lo[rounds], hi[rounds]: the range it owns after the reduce-scatter. */
    size_t lo[RAB_MAX_ROUNDS + 1], hi[RAB_MAX_ROUNDS + 1];
    tnt_status_t status;

    if (g->n == 1) {
        if (g->divisor > 1) {
            tnt_reduce_divide(g->dtype, g->buf, g->count, g->divisor);
        }
        return TNT_OK;
    }

    status = tnt_mn_fold_in(g, p, RAB_STEP_FOLD, RAB_STEP_BACK, &v);
    if (status != TNT_OK || v < 0) {
        return status;
    }

    lo[0] = 0;
    hi[0] = g->count;
    for (int mask = p >> 1; mask > 0; mask >>= 1, rounds++) {
        size_t mid = lo[rounds] + (hi[rounds] - lo[rounds]) / 2;
        int upper = (v & mask) != 0;
        lo[rounds + 1] = upper ? mid : lo[rounds];
        hi[rounds + 1] = upper ? hi[rounds] : mid;
    }

    /* Reduce-scatter: send the half I give away, reduce the half I keep. */
    for (int k = 0, mask = p >> 1; k < rounds; k++, mask >>= 1) {
        int pv = v ^ mask;
        size_t keep_lo = lo[k + 1], keep_hi = hi[k + 1];
        size_t give_lo, give_hi;
        rab_other_half(lo[k], hi[k], keep_lo, keep_hi, &give_lo, &give_hi);
        tnt_mn_xfer_t rs = {
            .send_to = tnt_mn_fold_real(pv, rem),
            .send_off = give_lo * esize,
            .send_len = (give_hi - give_lo) * esize,
            .recv_from = tnt_mn_fold_real(pv, rem),
            .recv_off = keep_lo * esize,
            .recv_len = (keep_hi - keep_lo) * esize,
            .reduce = 1,
            .recv_first = pv < v,
            .divisor = k == rounds - 1 ? g->divisor : 1,
            .step = (uint32_t)k,
        };
        status = tnt_mn_exchange(g, &rs);
        if (status != TNT_OK) {
            return status;
        }
    }

    /* Allgather: the same partners in reverse; send what I hold, receive
     * the partner's half of the range we held together. */
    for (int k = rounds - 1, mask = 1; k >= 0; k--, mask <<= 1) {
        int pv = v ^ mask;
        size_t mine_lo = lo[k + 1], mine_hi = hi[k + 1];
        size_t other_lo, other_hi;
        rab_other_half(lo[k], hi[k], mine_lo, mine_hi, &other_lo, &other_hi);
        tnt_mn_xfer_t ag = {
            .send_to = tnt_mn_fold_real(pv, rem),
            .send_off = mine_lo * esize,
            .send_len = (mine_hi - mine_lo) * esize,
            .recv_from = tnt_mn_fold_real(pv, rem),
            .recv_off = other_lo * esize,
            .recv_len = (other_hi - other_lo) * esize,
            .divisor = 1,
            .step = (uint32_t)(RAB_MAX_ROUNDS + k),
        };
        status = tnt_mn_exchange(g, &ag);
        if (status != TNT_OK) {
            return status;
        }
    }

    return tnt_mn_fold_back(g, p, RAB_STEP_BACK);
}
