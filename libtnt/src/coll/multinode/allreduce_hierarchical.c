/*
 * Hierarchical allreduce, used for every allreduce that spans nodes:
 *   1. reduce-scatter within the node over shared memory: local rank l
 *      holds the node's reduction of its slice tnt_slice(count, l, L);
 *   2. across nodes, every local rank allreduces its own slice with the ranks
 *      that hold the same elements on the other nodes (recursive doubling or
 *      ring, chosen per slice size), so every local rank drives its share of
 *      the network traffic;
 *   3. allgather of the slices within the node over shared memory.
 *
 * Nodes with different numbers of ranks (srun -N 2 -n 5) slice the vector
 * differently, so step 2 works on segments: the union of all nodes' slice
 * boundaries cuts the vector into segments, each held by exactly one rank
 * per node. A rank runs one inter-node allreduce per segment inside its
 * slice, in increasing order; every rank of the job computes the same
 * segment list, and a segment's group is one rank per node, in node order.
 * (Waiting only ever goes to a segment that starts earlier, so this cannot
 * deadlock.) With equal node sizes there is exactly one segment per local
 * rank, the group being "local rank l of every node".
 *
 * Reproducibility: shm reduces in local-rank order, the inter-node
 * algorithms in an order fixed by the node count, and AVG divides once, by
 * the global size, in the last reduction of each segment. The result is
 * therefore identical on all ranks and from run to run for a layout.
 */
#include "coll/multinode/multinode_impl.h"

#include "reduce/reduce.h"
#include "transport/shm.h"
#include "util/log.h"

#include <stdio.h>
#include <string.h>

static const char *tnt_mn_algo_name(tnt_mn_algo_t algo)
{
    return algo == TNT_MN_ALGO_RING ? "ring" : "recursive_doubling";
}

static tnt_mn_algo_t tnt_mn_select(const tnt_net_t *net, size_t segment_bytes)
{
    if (net->forced != TNT_MN_ALGO_AUTO) {
        return net->forced;
    }
    return segment_bytes < net->rd_max_bytes ? TNT_MN_ALGO_RECURSIVE_DOUBLING : TNT_MN_ALGO_RING;
}

/* Sorted, distinct slice boundaries of every node size in the job, 0 and
 * count included. Returns their number (segments = that minus one). Uses
 * the preallocated net->bounds (size + 2 entries: at most sum of local
 * sizes interior boundaries are distinct... bounded by size + 1). */
static int tnt_mn_boundaries(tnt_net_t *net, size_t count)
{
    tnt_comm_t *comm = net->comm;
    size_t *b = net->bounds;
    int nb = 0;

    b[nb++] = 0;
    b[nb++] = count;
    for (int n = 0; n < comm->num_nodes; n++) {
        int L = comm->node_sizes[n];
        int seen = 0;
        /* Nodes of equal size give equal boundaries: add each size once. */
        for (int m = 0; m < n && !seen; m++) {
            seen = comm->node_sizes[m] == L;
        }
        if (seen) {
            continue;
        }
        for (int l = 1; l < L; l++) {
            size_t off, cnt;
            tnt_slice(count, l, L, &off, &cnt);
            b[nb++] = off;
        }
    }
    /* Insertion sort: a handful of entries in practice. */
    for (int i = 1; i < nb; i++) {
        size_t x = b[i];
        int j = i - 1;
        while (j >= 0 && b[j] > x) {
            b[j + 1] = b[j];
            j--;
        }
        b[j + 1] = x;
    }
    int u = 0;
    for (int i = 0; i < nb; i++) {
        if (u == 0 || b[i] != b[u - 1]) {
            b[u++] = b[i];
        }
    }
    return u;
}

/* Index of the slice of a node of L ranks that contains element x. */
static int tnt_mn_slice_of(size_t count, int L, size_t x)
{
    size_t base = count / (size_t)L, extra = count % (size_t)L;
    size_t big = extra * (base + 1); /* elements in the first `extra` slices */

    if (x < big) {
        return (int)(x / (base + 1));
    }
    return (int)(extra + (x - big) / base);
}

tnt_status_t tnt_multinode_allreduce(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                     size_t count, tnt_dtype_t dtype, tnt_op_t op)
{
    tnt_net_t *net = comm->net;
    size_t esize = tnt_dtype_size(dtype);
    tnt_op_t net_op = op == TNT_AVG ? TNT_SUM : op;
    int divisor = op == TNT_AVG ? comm->size : 1;
    size_t my_off, my_cnt;
    uint32_t seq_base;
    int nb;
    tnt_status_t status;

    if (count == 0) {
        return TNT_OK;
    }
    seq_base = net->seq;

    /* 1. Node reduction of my slice. */
    if (comm->local_size > 1) {
        status = tnt_shm_reduce_scatter(comm->shm, sendbuf, recvbuf, count, dtype, net_op);
        if (status != TNT_OK) {
            return status;
        }
    } else if (sendbuf != recvbuf) {
        memcpy(recvbuf, sendbuf, count * esize);
    }

    /* 2. Across nodes, segment by segment. */
    nb = tnt_mn_boundaries(net, count);
    net->seq += (uint32_t)nb; /* one tag sequence per segment */
    tnt_slice(count, comm->local_rank, comm->local_size, &my_off, &my_cnt);
    for (int s = 0; s + 1 < nb; s++) {
        size_t x = net->bounds[s], y = net->bounds[s + 1];
        tnt_mn_group_op_t g;
        tnt_mn_algo_t algo;

        if (x < my_off || y > my_off + my_cnt) {
            continue;
        }
        for (int n = 0; n < comm->num_nodes; n++) {
            net->group[n] = tnt_mn_rank_at(net, n, tnt_mn_slice_of(count, comm->node_sizes[n], x));
        }
        algo = tnt_mn_select(net, (y - x) * esize);
        snprintf(net->what, sizeof(net->what), "allreduce #%llu (%s across nodes)",
                 (unsigned long long)comm->coll_seq, tnt_mn_algo_name(algo));
        g.net = net;
        g.members = net->group;
        g.n = comm->num_nodes;
        g.me = comm->node_id;
        g.seq = seq_base + (uint32_t)s;
        g.buf = (unsigned char *)recvbuf + x * esize;
        g.count = y - x;
        g.dtype = dtype;
        g.op = net_op;
        g.divisor = divisor;
        g.what = net->what;
        status = algo == TNT_MN_ALGO_RING ? tnt_mn_allreduce_ring(&g)
                                          : tnt_mn_allreduce_recursive_doubling(&g);
        if (status != TNT_OK) {
            return status;
        }
    }

    /* 3. Every local rank gets every slice. */
    if (comm->local_size > 1) {
        status = tnt_shm_allgather_slices(comm->shm, recvbuf, count, dtype);
        if (status != TNT_OK) {
            return status;
        }
    }
    return TNT_OK;
}
