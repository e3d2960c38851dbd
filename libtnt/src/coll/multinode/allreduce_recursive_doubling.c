/*
 * Recursive doubling across nodes: log2(p) rounds, each an exchange of the
 * whole vector with the partner at distance 2^k. Latency-optimal, so it is
 * the choice for small messages. A non-power-of-two group first folds its
 * 2*(n-p) lowest members pairwise (even into odd), runs on p members, then
 * hands the result back to the folded ones.
 *
 * Bitwise identity: in every round both partners combine the same two
 * operands in the same order (lower member first) with the same kernel, and
 * at every round all members of a block of 2^k hold the same value, so all
 * members end with the same bits. The order is a function of n only, so
 * results are reproducible for a given layout.
 *
 * Vectors larger than the registered staging area are processed in pieces
 * of its size; each piece runs the full algorithm.
 */
#include "coll/multinode/multinode_impl.h"

#include "reduce/reduce.h"

/* Tag step: piece * 64 + round (round < 64 covers 2^62 members); rounds
 * -1 and "last" (fold in / hand back) use 62 and 63. */
#define RD_ROUND_FOLD 62u
#define RD_ROUND_BACK 63u

static uint32_t rd_step(size_t piece, uint32_t round)
{
    return (uint32_t)(piece * 64u + round);
}

/* Original member index of virtual index v after the fold. */
static int rd_real(int v, int rem)
{
    return v < rem ? 2 * v + 1 : v + rem;
}

static tnt_status_t rd_piece(const tnt_mn_group_op_t *g, unsigned char *data, size_t count,
                             size_t piece)
{
    tnt_net_t *net = g->net;
    size_t esize = tnt_dtype_size(g->dtype);
    size_t bytes = count * esize;
    unsigned char *tmp = net->staging;
    int p = 1, rem, v;
    int me_rank = g->members[g->me];
    tnt_status_t status;

    while (p * 2 <= g->n) {
        p *= 2;
    }
    rem = g->n - p;

    /* Fold: members 0..2*rem-1 pair up; the even one hands its data to the
     * odd one and waits for the result. */
    if (g->me < 2 * rem) {
        if (g->me % 2 == 0) {
            int peer = g->members[g->me + 1];
            status = tnt_ucx_sendrecv(net->ucx, peer,
                                      tnt_ucx_tag(g->seq, me_rank, rd_step(piece, RD_ROUND_FOLD)),
                                      data, bytes, -1, 0, NULL, 0, g->what);
            if (status != TNT_OK) {
                return status;
            }
            return tnt_ucx_sendrecv(net->ucx, -1, 0, NULL, 0, peer,
                                    tnt_ucx_tag(g->seq, peer, rd_step(piece, RD_ROUND_BACK)), data,
                                    bytes, g->what);
        }
        int peer = g->members[g->me - 1];
        status = tnt_ucx_sendrecv(net->ucx, -1, 0, NULL, 0, peer,
                                  tnt_ucx_tag(g->seq, peer, rd_step(piece, RD_ROUND_FOLD)), tmp,
                                  bytes, g->what);
        if (status != TNT_OK) {
            return status;
        }
        const void *srcs[2] = { tmp, data }; /* lower member first */
        tnt_reduce_n_div(g->dtype, g->op, data, srcs, 2, count, p == 1 ? g->divisor : 1);
        v = g->me / 2;
    } else {
        v = g->me - rem;
    }

    for (int mask = 1, round = 0; mask < p; mask <<= 1, round++) {
        int pv = v ^ mask;
        int peer = g->members[rd_real(pv, rem)];
        int last = (mask << 1) >= p;

        status = tnt_ucx_sendrecv(
            net->ucx, peer, tnt_ucx_tag(g->seq, me_rank, rd_step(piece, (uint32_t)round)), data,
            bytes, peer, tnt_ucx_tag(g->seq, peer, rd_step(piece, (uint32_t)round)), tmp, bytes,
            g->what);
        if (status != TNT_OK) {
            return status;
        }
        if (pv < v) {
            const void *srcs[2] = { tmp, data };
            tnt_reduce_n_div(g->dtype, g->op, data, srcs, 2, count, last ? g->divisor : 1);
        } else {
            const void *srcs[2] = { data, tmp };
            tnt_reduce_n_div(g->dtype, g->op, data, srcs, 2, count, last ? g->divisor : 1);
        }
    }

    if (g->me < 2 * rem) { /* odd member of a folded pair: hand back */
        int peer = g->members[g->me - 1];
        return tnt_ucx_sendrecv(net->ucx, peer,
                                tnt_ucx_tag(g->seq, me_rank, rd_step(piece, RD_ROUND_BACK)), data,
                                bytes, -1, 0, NULL, 0, g->what);
    }
    return TNT_OK;
}

tnt_status_t tnt_mn_allreduce_recursive_doubling(const tnt_mn_group_op_t *g)
{
    size_t esize = tnt_dtype_size(g->dtype);
    size_t piece_count = g->net->staging_bytes / esize;
    unsigned char *data = g->buf;

    if (g->n == 1) {
        if (g->divisor > 1) {
            tnt_reduce_divide(g->dtype, g->buf, g->count, g->divisor);
        }
        return TNT_OK;
    }
    for (size_t done = 0, piece = 0; done < g->count; piece++) {
        size_t n = g->count - done < piece_count ? g->count - done : piece_count;
        tnt_status_t status = rd_piece(g, data + done * esize, n, piece);
        if (status != TNT_OK) {
            return status;
        }
        done += n;
    }
    return TNT_OK;
}
