/*
 * Reduce on arrival (multinode_impl.h, tnt_mn_arrival_t): a reducing
 * receive combines each fragment into the result as UCX delivers it, from
 * UCX's own receive buffer, instead of UCX copying the whole chunk into a
 * staging slot that is then reduced. Over TCP that copy was a large share
 * of the CPU time of a 16 MiB allreduce at 16 nodes (the profile:
 * docs/scaling.md, "16 MiB at 16 nodes: what UCX's peer-failure handling
 * costs over TCP").
 *
 * Fragments may split an element: UCX cuts messages at byte offsets set by
 * its segment sizes and headers. Each piece of a split element is copied to
 * the element's place in the chunk's staging slot and the element is marked
 * in a bitmap; tnt_mn_arrival_finish reduces the marked elements once the
 * whole chunk is in, so fragments may come in any order. UCX's data is
 * rarely aligned for the element type (its TCP header is 5 bytes), so the
 * kernels read it with unaligned loads (tnt_reduce_into).
 *
 * Each element is combined exactly as the staged path does it (same two
 * operands in the same order, same divisor), so results stay bitwise
 * identical whichever path, fragment sizes or order.
 */
#include "coll/multinode/multinode_impl.h"

#include "reduce/reduce.h"
#include "util/settings.h"

#include <stdint.h>
#include <string.h>

size_t tnt_mn_arrival_words(size_t chunk_bytes)
{
    /* A 1-byte element is never split, so elements of 2 bytes or more. */
    return (chunk_bytes / 2 + 63) / 64;
}

void tnt_mn_arrival_start(tnt_mn_arrival_t *a, void *dst, void *spill, size_t bytes,
                          tnt_dtype_t dtype, tnt_op_t op, int divisor, int recv_first)
{
    a->dst = dst;
    a->spill = spill;
    a->bytes = bytes;
    a->esize = tnt_dtype_size(dtype);
    a->dtype = dtype;
    a->op = op;
    a->divisor = divisor;
    a->recv_first = recv_first;
    a->staged = 0;
    a->split_lo = SIZE_MAX;
    a->split_hi = 0;
}

static void arrival_combine(const tnt_mn_arrival_t *a, size_t off, const void *in, size_t count)
{
    tnt_reduce_into(a->dtype, a->op, a->dst + off, in, a->recv_first, count, a->divisor);
}

/* A piece of element e: kept in the slot until tnt_mn_arrival_finish. */
static void arrival_split(tnt_mn_arrival_t *a, size_t off, const unsigned char *data, size_t len)
{
    size_t e = off / a->esize, w = e / 64;

    memcpy(a->spill + off, data, len);
    a->split[w] |= (uint64_t)1 << (e % 64);
    if (w < a->split_lo) {
        a->split_lo = w;
    }
    if (w + 1 > a->split_hi) {
        a->split_hi = w + 1;
    }
}

void tnt_mn_arrival_consume(void *arg, size_t off, const void *data, size_t len)
{
    tnt_mn_arrival_t *a = arg;
    const unsigned char *p = data;
    size_t es = a->esize, whole;

    if (off % es != 0) {
        size_t head = es - off % es;
        head = head < len ? head : len;
        arrival_split(a, off, p, head);
        off += head;
        p += head;
        len -= head;
    }
    whole = len - len % es;
    if (whole > 0) {
        arrival_combine(a, off, p, whole / es);
    }
    if (len > whole) {
        arrival_split(a, off + whole, p + whole, len - whole);
    }
}

void tnt_mn_arrival_finish(tnt_mn_arrival_t *a)
{
    if (a->staged) {
        arrival_combine(a, 0, a->spill, a->bytes / a->esize);
        return;
    }
    for (size_t w = a->split_lo; w < a->split_hi; w++) {
        uint64_t bits = a->split[w];
        while (bits != 0) {
            size_t e = w * 64 + (size_t)__builtin_ctzll(bits);
            arrival_combine(a, e * a->esize, a->spill + e * a->esize, 1);
            bits &= bits - 1;
        }
        a->split[w] = 0;
    }
    a->split_lo = SIZE_MAX;
    a->split_hi = 0;
}

tnt_status_t tnt_mn_recv_reduce(const tnt_mn_group_op_t *g, int slot, int peer, uint64_t tag,
                                void *dst, size_t len, int divisor, int recv_first,
                                int allow_arrival, tnt_ucx_op_t **op_p)
{
    tnt_net_t *net = g->net;
    tnt_mn_arrival_t *a = &net->arrival[slot];

    tnt_mn_arrival_start(a, dst, net->staging + (size_t)slot * net->chunk_bytes, len, g->dtype,
                         g->op, divisor, recv_first);
    if (net->reduce_on_arrival == TNT_SETTINGS_ARRIVAL_AUTO) {
        /* A peer connected on first use has no endpoint yet: staged once. */
        allow_arrival = allow_arrival && tnt_ucx_peer_tcp_only(net->ucx, peer);
    }
    if (!allow_arrival || net->reduce_on_arrival == TNT_SETTINGS_ARRIVAL_OFF) {
        a->staged = 1;
        return tnt_ucx_irecv(net->ucx, peer, tag, a->spill, len, op_p);
    }
    return tnt_ucx_irecv_consume(net->ucx, peer, tag, len, tnt_mn_arrival_consume, a, op_p);
}

void tnt_mn_recv_reduce_done(const tnt_mn_group_op_t *g, int slot)
{
    tnt_mn_arrival_finish(&g->net->arrival[slot]);
}
