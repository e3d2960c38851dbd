/*
 * Pipelined ring across nodes: reduce-scatter then allgather, n-1 steps
 * each, so every member sends and receives 2(n-1)/n of the vector, the
 * bandwidth optimum. Each step is cut into chunks of at most
 * net->chunk_bytes (fewer and smaller for small blocks, tnt_mn_chunk_for); up to
 * net->depth chunks are in flight, across step boundaries, and reduce-scatter
 * chunks are reduced as they arrive (or received into the registered
 * staging slots and then reduced: tnt_mn_recv_reduce), so the reduction of
 * one chunk overlaps the transfer of the next. Allgather chunks go straight
 * into the caller's buffer.
 *
 * Bitwise identity: block b is reduced along the ring in one fixed order
 * (starting at member b+1), once, by one member, and then copied to all the
 * others, so every member ends with the same bits; the order depends only
 * on n. The final reduction of each block divides by the divisor before its
 * single rounding.
 */
#include "coll/multinode/multinode_impl.h"

#include "reduce/reduce.h"

static int ring_mod(int a, int n)
{
    return ((a % n) + n) % n;
}

static size_t ring_chunks(size_t bytes, size_t chunk)
{
    return bytes == 0 ? 0 : (bytes + chunk - 1) / chunk;
}

/* What item idx moves: step s = idx / K (reduce-scatter for s < n-1, then
 * allgather), chunk k = idx % K of the step's blocks. */
typedef struct {
    int step;
    size_t chunk;
    int reducing;
    size_t send_off, send_len; /* bytes within buf; len 0: nothing to send */
    size_t recv_off, recv_len; /* bytes within buf; len 0: nothing to receive */
} ring_item_t;

static void ring_item(const tnt_mn_group_op_t *g, size_t idx, size_t K, size_t chunk,
                      ring_item_t *it)
{
    size_t esize = tnt_dtype_size(g->dtype);
    int n = g->n, me = g->me;
    int s = (int)(idx / K);
    int send_b, recv_b;
    size_t off, cnt, k = idx % K;

    it->step = s;
    it->chunk = k;
    it->reducing = s < n - 1;
    if (it->reducing) {
        send_b = ring_mod(me - s, n);
        recv_b = ring_mod(me - s - 1, n);
    } else {
        int a = s - (n - 1);
        send_b = ring_mod(me + 1 - a, n);
        recv_b = ring_mod(me - a, n);
    }
    tnt_slice(g->count, send_b, n, &off, &cnt);
    it->send_off = off * esize + k * chunk;
    it->send_len = k * chunk < cnt * esize ? cnt * esize - k * chunk : 0;
    it->send_len = it->send_len < chunk ? it->send_len : chunk;
    tnt_slice(g->count, recv_b, n, &off, &cnt);
    it->recv_off = off * esize + k * chunk;
    it->recv_len = k * chunk < cnt * esize ? cnt * esize - k * chunk : 0;
    it->recv_len = it->recv_len < chunk ? it->recv_len : chunk;
}

/*
 * One pipeline over all 2(n-1) steps. Every step has K items (K = chunks of
 * block 0, the largest; smaller blocks leave their last item empty), so item
 * idx = step * K + chunk is the same on sender and receiver and serves as
 * the tag. Up to D = min(depth, K) items are in flight; item idx is posted
 * only when item idx - D has finished, which covers every dependency:
 *  - its send reads the chunk that item idx - K (same chunk, previous step)
 *    reduced or received, and idx - K <= idx - D;
 *  - its receive reuses staging slot idx % D, freed by item idx - D;
 *  - a later receive into a block never overlaps a send still in flight
 *    from it (that send is at least (n-1) K >= D items older).
 * Steps therefore overlap: a chunk travels on as soon as it is reduced.
 */
tnt_status_t tnt_mn_allreduce_ring(const tnt_mn_group_op_t *g)
{
    tnt_net_t *net = g->net;
    size_t esize = tnt_dtype_size(g->dtype);
    size_t chunk;
    int n = g->n;
    int right = g->members[ring_mod(g->me + 1, n)];
    int left = g->members[ring_mod(g->me - 1, n)];
    int me_rank = g->members[g->me];
    unsigned char *base = g->buf;
    size_t off0, cnt0, K, items, posted = 0, done = 0;
    int D;
    /* ops[2*slot] receive, ops[2*slot+1] send */
    tnt_ucx_op_t *ops[2 * 64];
    tnt_status_t status = TNT_OK;

    if (n == 1) {
        if (g->divisor > 1) {
            tnt_reduce_divide(g->dtype, g->buf, g->count, g->divisor);
        }
        return TNT_OK;
    }
    tnt_slice(g->count, 0, n, &off0, &cnt0);
    /* Chunks hold whole elements so each one can be reduced by itself, and
     * are sized from the block, so that a block of 1 MiB still streams in
     * about depth chunks instead of going as one (transfer, then reduce). */
    chunk = tnt_mn_chunk_for(cnt0 * esize, net->chunk_bytes, net->depth, esize);
    K = ring_chunks(cnt0 * esize, chunk);
    if (K == 0) {
        return TNT_OK; /* count == 0 */
    }
    D = net->depth < 64 ? net->depth : 64;
    if ((size_t)D > K) {
        D = (int)K;
    }
    items = (size_t)(2 * (n - 1)) * K;
    for (int i = 0; i < 2 * D; i++) {
        ops[i] = NULL;
    }

    while (done < items) {
        while (posted < items && posted - done < (size_t)D) {
            ring_item_t it;
            int slot = (int)(posted % (size_t)D);
            uint32_t tag_step = (uint32_t)posted;

            ring_item(g, posted, K, chunk, &it);
            if (it.recv_len > 0 && it.reducing) {
                /* The partial sum from the left comes first: block b is
                 * accumulated in ring order starting at member b+1. The
                 * last reduce-scatter step completes the block: divide
                 * there. Reducing on arrival is safe: no send reads this
                 * block until this item is done (see above). */
                status = tnt_mn_recv_reduce(
                    g, slot, left, tnt_ucx_tag(g->seq, left, tag_step), base + it.recv_off,
                    it.recv_len, it.step == n - 2 ? g->divisor : 1, 1, 1, &ops[2 * slot]);
            } else if (it.recv_len > 0) {
                status = tnt_ucx_irecv(net->ucx, left, tnt_ucx_tag(g->seq, left, tag_step),
                                       base + it.recv_off, it.recv_len, &ops[2 * slot]);
            }
            if (status == TNT_OK && it.send_len > 0) {
                status = tnt_ucx_isend(net->ucx, right, tnt_ucx_tag(g->seq, me_rank, tag_step),
                                       base + it.send_off, it.send_len, &ops[2 * slot + 1]);
            }
            if (status != TNT_OK) {
                tnt_ucx_waitall(net->ucx, ops, 2 * D, g->what);
                return status;
            }
            posted++;
        }
        {
            ring_item_t it;
            int slot = (int)(done % (size_t)D);

            status = tnt_ucx_waitall(net->ucx, &ops[2 * slot], 2, g->what);
            if (status != TNT_OK) {
                tnt_ucx_waitall(net->ucx, ops, 2 * D, g->what);
                return status;
            }
            ring_item(g, done, K, chunk, &it);
            if (it.reducing && it.recv_len > 0) {
                tnt_mn_recv_reduce_done(g, slot);
            }
        }
        done++;
    }
    return TNT_OK;
}
