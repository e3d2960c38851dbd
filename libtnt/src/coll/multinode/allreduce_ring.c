/*
 * Pipelined ring across nodes: reduce-scatter then allgather, n-1 steps
 * each, so every member sends and receives 2(n-1)/n of the vector, the
 * bandwidth optimum. Each step is cut into chunks of net->chunk_bytes; up to
 * net->depth chunks are in flight, received into the registered staging
 * slots, so the reduction of one chunk overlaps the transfer of the next.
 * Allgather chunks go straight into the caller's buffer.
 *
 * Bitwise identity: block b is reduced along the ring in one fixed order
 * (starting at member b+1), once, by one member, and then copied to all the
 * others, so every member ends with the same bits; the order depends only
 * on n. The final reduction of each block divides by the divisor before its
 * single rounding.
 */
#include "coll/multinode/multinode_impl.h"

#include "coll/reduce.h"

static int ring_mod(int a, int n)
{
    return ((a % n) + n) % n;
}

static size_t ring_chunks(size_t bytes, size_t chunk)
{
    return bytes == 0 ? 0 : (bytes + chunk - 1) / chunk;
}

/* One step: send block send_b to the right, receive block recv_b from the
 * left; reduce (with divisor) into it when reducing, otherwise receive in
 * place. */
static tnt_status_t ring_step(const tnt_mn_group_op_t *g, int step, size_t max_chunks,
                              int send_b, int recv_b, int reducing, int divisor)
{
    tnt_net_t *net = g->net;
    size_t esize = tnt_dtype_size(g->dtype);
    /* Chunks hold whole elements so each one can be reduced by itself. */
    size_t chunk = net->chunk_bytes / esize * esize;
    int right = g->members[ring_mod(g->me + 1, g->n)];
    int left = g->members[ring_mod(g->me - 1, g->n)];
    int me_rank = g->members[g->me];
    unsigned char *base = g->buf;
    size_t send_off, send_cnt, recv_off, recv_cnt;
    size_t send_chunks, recv_chunks, items, posted = 0, done = 0;
    /* ops[2*slot] receive, ops[2*slot+1] send, slot = item % depth */
    tnt_ucx_op_t *ops[2 * 64];
    tnt_status_t status = TNT_OK;
    int depth = net->depth < 64 ? net->depth : 64;

    tnt_mn_block(g->count, send_b, g->n, &send_off, &send_cnt);
    tnt_mn_block(g->count, recv_b, g->n, &recv_off, &recv_cnt);
    send_chunks = ring_chunks(send_cnt * esize, chunk);
    recv_chunks = ring_chunks(recv_cnt * esize, chunk);
    items = send_chunks > recv_chunks ? send_chunks : recv_chunks;
    for (int i = 0; i < 2 * depth; i++) {
        ops[i] = NULL;
    }

    while (done < items) {
        while (posted < items && posted - done < (size_t)depth && status == TNT_OK) {
            int slot = (int)(posted % (size_t)depth);
            /* The tag step is identical on sender and receiver: step and
             * chunk index, with max_chunks computed from block 0, the
             * largest, on every member. */
            uint32_t tag_step = (uint32_t)((size_t)step * max_chunks + posted);

            if (posted < recv_chunks) {
                size_t off = posted * chunk;
                size_t len = recv_cnt * esize - off < chunk ? recv_cnt * esize - off : chunk;
                void *dst = reducing ? (void *)(net->staging + (size_t)slot * net->chunk_bytes)
                                     : (void *)(base + recv_off * esize + off);
                status = tnt_ucx_irecv(net->ucx, left, tnt_ucx_tag(g->seq, left, tag_step), dst,
                                       len, &ops[2 * slot]);
            }
            if (status == TNT_OK && posted < send_chunks) {
                size_t off = posted * chunk;
                size_t len = send_cnt * esize - off < chunk ? send_cnt * esize - off : chunk;
                status = tnt_ucx_isend(net->ucx, right, tnt_ucx_tag(g->seq, me_rank, tag_step),
                                       base + send_off * esize + off, len, &ops[2 * slot + 1]);
            }
            posted++;
        }
        if (status != TNT_OK) {
            tnt_ucx_waitall(net->ucx, ops, 2 * depth, g->what);
            return status;
        }
        {
            int slot = (int)(done % (size_t)depth);
            status = tnt_ucx_waitall(net->ucx, &ops[2 * slot], 2, g->what);
            if (status != TNT_OK) {
                tnt_ucx_waitall(net->ucx, ops, 2 * depth, g->what);
                return status;
            }
            if (reducing && done < recv_chunks) {
                size_t off = done * chunk;
                size_t len = recv_cnt * esize - off < chunk ? recv_cnt * esize - off : chunk;
                unsigned char *dst = base + recv_off * esize + off;
                /* The partial sum from the left comes first: block b is
                 * accumulated in ring order starting at member b+1. */
                const void *srcs[2] = {net->staging + (size_t)slot * net->chunk_bytes, dst};
                tnt_reduce_n_div(g->dtype, g->op, dst, srcs, 2, len / esize, divisor);
            }
        }
        done++;
    }
    return TNT_OK;
}

tnt_status_t tnt_mn_allreduce_ring(const tnt_mn_group_op_t *g)
{
    size_t esize = tnt_dtype_size(g->dtype);
    size_t chunk = g->net->chunk_bytes / esize * esize;
    size_t off0, cnt0, max_chunks;
    int n = g->n, me = g->me;
    tnt_status_t status;

    if (n == 1) {
        if (g->divisor > 1) {
            tnt_reduce_divide(g->dtype, g->buf, g->count, g->divisor);
        }
        return TNT_OK;
    }
    tnt_mn_block(g->count, 0, n, &off0, &cnt0);
    max_chunks = ring_chunks(cnt0 * esize, chunk);
    if (max_chunks == 0) {
        max_chunks = 1;
    }
    /* Reduce-scatter: after step s, block me-s-1 holds s+2 contributions;
     * after n-1 steps member me owns the full reduction of block me+1. */
    for (int s = 0; s < n - 1; s++) {
        status = ring_step(g, s, max_chunks, ring_mod(me - s, n), ring_mod(me - s - 1, n), 1,
                           s == n - 2 ? g->divisor : 1);
        if (status != TNT_OK) {
            return status;
        }
    }
    /* Allgather: pass the finished blocks around. */
    for (int s = 0; s < n - 1; s++) {
        status = ring_step(g, n - 1 + s, max_chunks, ring_mod(me + 1 - s, n),
                           ring_mod(me - s, n), 0, 1);
        if (status != TNT_OK) {
            return status;
        }
    }
    return TNT_OK;
}
