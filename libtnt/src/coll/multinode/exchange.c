/*
 * The pipelined pairwise step (multinode_impl.h, tnt_mn_exchange) that
 * recursive doubling and Rabenseifner are made of. Chunk c is one send and
 * one receive; up to D = min(depth, chunks) chunks are in flight, and chunk
 * c + D is posted as soon as chunk c has finished, so while chunk c is
 * reduced (on arrival, or from its staging slot: tnt_mn_recv_reduce) the
 * next ones are on the wire.
 *
 * Hazards: chunk c's receive uses staging slot c % D, free once chunk c - D
 * finished (and was reduced). When the send and receive regions are the
 * same (recursive doubling), chunk c of the region is overwritten by its
 * reduction only after chunk c's own send completed.
 */
#include "coll/multinode/multinode_impl.h"

#include "reduce/reduce.h"

#define XFER_CHUNK_TAGS 4096u

static size_t xfer_len(size_t total, size_t c, size_t chunk)
{
    size_t start = c * chunk;
    if (start >= total) {
        return 0;
    }
    return total - start < chunk ? total - start : chunk;
}

tnt_status_t tnt_mn_exchange(const tnt_mn_group_op_t *g, const tnt_mn_xfer_t *x)
{
    tnt_net_t *net = g->net;
    size_t esize = tnt_dtype_size(g->dtype);
    size_t send_len = x->send_to >= 0 ? x->send_len : 0;
    size_t recv_len = x->recv_from >= 0 ? x->recv_len : 0;
    size_t longest = send_len > recv_len ? send_len : recv_len;
    size_t chunk = tnt_mn_chunk_for(longest, net->chunk_bytes, net->depth, esize);
    size_t items, posted = 0, done = 0;
    int me_rank = g->members[g->me];
    int send_rank = x->send_to >= 0 ? g->members[x->send_to] : -1;
    int recv_rank = x->recv_from >= 0 ? g->members[x->recv_from] : -1;
    unsigned char *base = g->buf;
    tnt_ucx_op_t *ops[2 * 64];
    int D;
    /* Recursive doubling sends and receives the same region: a chunk may
     * be reduced only after its own send completed, so never on arrival. */
    int same_region = send_len > 0 && recv_len > 0 && x->send_off < x->recv_off + recv_len &&
                      x->recv_off < x->send_off + send_len;
    tnt_status_t status = TNT_OK;

    if (longest == 0) {
        return TNT_OK;
    }
    items = (longest + chunk - 1) / chunk;
    D = net->depth < 64 ? net->depth : 64;
    if ((size_t)D > items) {
        D = (int)items;
    }
    for (int i = 0; i < 2 * D; i++) {
        ops[i] = NULL;
    }
    while (done < items) {
        while (posted < items && posted - done < (size_t)D) {
            int slot = (int)(posted % (size_t)D);
            uint32_t step = x->step * XFER_CHUNK_TAGS + (uint32_t)(posted % XFER_CHUNK_TAGS);
            size_t rl = xfer_len(recv_len, posted, chunk);
            size_t sl = xfer_len(send_len, posted, chunk);

            if (rl > 0 && x->reduce) {
                status =
                    tnt_mn_recv_reduce(g, slot, recv_rank, tnt_ucx_tag(g->seq, recv_rank, step),
                                       base + x->recv_off + posted * chunk, rl, x->divisor,
                                       x->recv_first, !same_region, &ops[2 * slot]);
            } else if (rl > 0) {
                status = tnt_ucx_irecv(net->ucx, recv_rank, tnt_ucx_tag(g->seq, recv_rank, step),
                                       base + x->recv_off + posted * chunk, rl, &ops[2 * slot]);
            }
            if (status == TNT_OK && sl > 0) {
                status = tnt_ucx_isend(net->ucx, send_rank, tnt_ucx_tag(g->seq, me_rank, step),
                                       base + x->send_off + posted * chunk, sl, &ops[2 * slot + 1]);
            }
            if (status != TNT_OK) {
                tnt_ucx_waitall(net->ucx, ops, 2 * D, g->what);
                return status;
            }
            posted++;
        }
        {
            int slot = (int)(done % (size_t)D);
            size_t rl = xfer_len(recv_len, done, chunk);

            status = tnt_ucx_waitall(net->ucx, &ops[2 * slot], 2, g->what);
            if (status != TNT_OK) {
                tnt_ucx_waitall(net->ucx, ops, 2 * D, g->what);
                return status;
            }
            if (x->reduce && rl > 0) {
                tnt_mn_recv_reduce_done(g, slot);
            }
        }
        done++;
    }
    return TNT_OK;
}

tnt_status_t tnt_mn_fold_in(const tnt_mn_group_op_t *g, int p, uint32_t step_fold,
                            uint32_t step_back, int *virtual_p)
{
    const size_t bytes = g->count * tnt_dtype_size(g->dtype);
    const int rem = g->n - p;
    tnt_mn_xfer_t x = { .send_to = -1, .recv_from = -1, .divisor = 1 };
    tnt_status_t status;

    if (g->me >= 2 * rem) {
        *virtual_p = g->me - rem;
        return TNT_OK;
    }
    if (g->me % 2 == 0) {
        /* The even member hands its vector over and waits for the result. */
        x.send_to = g->me + 1;
        x.send_len = bytes;
        x.step = step_fold;
        status = tnt_mn_exchange(g, &x);
        if (status != TNT_OK) {
            return status;
        }
        x.send_to = -1;
        x.send_len = 0;
        x.recv_from = g->me + 1;
        x.recv_len = bytes;
        x.step = step_back;
        status = tnt_mn_exchange(g, &x);
        if (status == TNT_OK) {
            *virtual_p = -1;
        }
        return status;
    }
    x.recv_from = g->me - 1;
    x.recv_len = bytes;
    x.reduce = 1;
    x.recv_first = 1; /* lower member first */
    x.step = step_fold;
    status = tnt_mn_exchange(g, &x);
    if (status == TNT_OK) {
        *virtual_p = g->me / 2;
    }
    return status;
}

tnt_status_t tnt_mn_fold_back(const tnt_mn_group_op_t *g, int p, uint32_t step_back)
{
    if (g->me >= 2 * (g->n - p)) {
        return TNT_OK;
    }
    /* Only odd members of a folded pair get here: even ones left in
     * tnt_mn_fold_in with the result. */
    tnt_mn_xfer_t back = { .send_to = g->me - 1,
                           .send_len = g->count * tnt_dtype_size(g->dtype),
                           .recv_from = -1,
                           .divisor = 1,
                           .step = step_back };
    return tnt_mn_exchange(g, &back);
}
