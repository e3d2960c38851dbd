/*
 * Hierarchical allreduce, used for every allreduce that spans nodes:
 *   1. reduce-scatter within the node over shared memory: local rank l
 *      holds the node's reduction of its slice tnt_slice(count, l, L);
 *   2. across nodes, every local rank allreduces its own slice with the ranks
 *      that hold the same elements on the other nodes (recursive doubling,
 *      Rabenseifner or ring, chosen per slice size and node count by the
 *      cost model, cost_model.h), so every local rank drives its share of
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
 * the global size, in the last reduction of each segment. float16 and
 * bfloat16 travel as float32 and are rounded once at the end. The result is
 * therefore identical on all ranks and from run to run for a layout.
 */
#include "coll/multinode/multinode_impl.h"

#include "reduce/reduce.h"
#include "transport/shm.h"
#include "util/log.h"
#include "util/timeline.h"
#include "util/wait.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static tnt_mn_algo_t tnt_mn_select(const tnt_net_t *net, int n, size_t segment_bytes)
{
    if (net->forced != TNT_MN_ALGO_AUTO) {
        return net->forced;
    }
    if (net->rd_max_bytes != SIZE_MAX && segment_bytes < net->rd_max_bytes) {
        return TNT_MN_ALGO_RECURSIVE_DOUBLING;
    }
    return tnt_mn_cost_select(n, (double)segment_bytes, &net->cost);
}

static int tnt_mn_cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

/* Sorted, distinct slice boundaries of every node size in the job, 0 and
 * count included, into the preallocated net->bounds (at most the sum of
 * the distinct sizes + 1 <= size + 1 entries). Returns their number
 * (segments = that minus one). O(sum of distinct node sizes): with one node
 * size (the usual case) just that size's slices, already in order. */
static int tnt_mn_boundaries(tnt_net_t *net, size_t count)
{
    size_t *b = net->bounds;
    int nb = 0;

    b[nb++] = 0;
    for (int i = 0; i < net->num_sizes; i++) {
        int L = net->sizes[i];
        for (int l = 1; l < L; l++) {
            size_t off, cnt;
            tnt_slice(count, l, L, &off, &cnt);
            b[nb++] = off;
        }
    }
    b[nb++] = count;
    if (net->num_sizes > 1) {
        qsort(b, (size_t)nb, sizeof(*b), tnt_mn_cmp_size);
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

static tnt_status_t tnt_mn_allreduce_native(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                            size_t count, tnt_dtype_t dtype, tnt_op_t op);

/* A timeline phase of the running allreduce, from start_ns to now (start_ns
 * is 0 when no timeline recorded at the phase's start). */
static void tnt_mn_phase(const tnt_comm_t *comm, const char *name, const char *algo,
                         uint64_t start_ns, uint64_t bytes)
{
    if (start_ns == 0 || !tnt_tl_enabled()) {
        return;
    }
    tnt_tl_event_t ev = { .start_ns = start_ns,
                          .end_ns = tnt_time_ns(),
                          .bytes = bytes,
                          .number = comm->coll_seq,
                          .name = name,
                          .algo = algo,
                          .comm = comm->tl_comm };
    atomic_init(&ev.kind, TNT_TL_PHASE);
    tnt_tl_add(&ev);
}

static uint64_t tnt_mn_phase_start(void)
{
    return tnt_tl_enabled() ? tnt_time_ns() : 0;
}

/* float16/bfloat16: partial sums of 16-bit values lose bits (and overflow:
 * 6 x 30000 is not a float16) at every hop, so the whole hierarchy runs in
 * float32 on a widened copy and the result is rounded once, like the
 * single-node kernels do. Twice the bytes on the wire, in exchange for the
 * same answer on 1 node and on 1,000. */
static tnt_status_t tnt_mn_allreduce_wide(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                          size_t count, tnt_dtype_t dtype, tnt_op_t op)
{
    tnt_net_t *net = comm->net;
    tnt_status_t status;

    if (count > net->wide_count) {
        /* Grows to the largest 16-bit allreduce once, then is reused. */
        float *wide = NULL;
        if (count > SIZE_MAX / sizeof(float) ||
            posix_memalign((void **)&wide, 64, count * sizeof(float)) != 0) {
            return tnt_error_raise(TNT_ERR_NO_MEMORY,
                                   "allreduce #%llu: no memory for the float32 copy of %zu "
                                   "16-bit elements that crosses nodes",
                                   (unsigned long long)comm->coll_seq, count);
        }
        free(net->wide);
        net->wide = wide;
        net->wide_count = count;
    }
    tnt_reduce_widen(dtype, sendbuf, net->wide, count);
    status = tnt_mn_allreduce_native(comm, net->wide, net->wide, count, TNT_FLOAT32, op);
    if (status != TNT_OK) {
        return status;
    }
    tnt_reduce_narrow(dtype, net->wide, recvbuf, count);
    return TNT_OK;
}

tnt_status_t tnt_multinode_allreduce(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                     size_t count, tnt_dtype_t dtype, tnt_op_t op)
{
    if (count == 0) {
        return TNT_OK;
    }
    if (dtype == TNT_FLOAT16 || dtype == TNT_BFLOAT16) {
        return tnt_mn_allreduce_wide(comm, sendbuf, recvbuf, count, dtype, op);
    }
    return tnt_mn_allreduce_native(comm, sendbuf, recvbuf, count, dtype, op);
}

tnt_status_t tnt_multinode_allreduce_narrow(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                            size_t count, tnt_dtype_t dtype, tnt_op_t op)
{
    /* Every stage is dtype-generic: the shm reduce-scatter and the
     * inter-node combines (arrival.c, tnt_reduce_into) widen 16-bit inputs,
     * combine in float32 and round once per stage. */
    return tnt_mn_allreduce_native(comm, sendbuf, recvbuf, count, dtype, op);
}

static tnt_status_t tnt_mn_allreduce_native(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
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
        uint64_t t0 = tnt_mn_phase_start();
        status = tnt_shm_reduce_scatter(comm->shm, sendbuf, recvbuf, count, dtype, net_op);
        if (status != TNT_OK) {
            return status;
        }
        tnt_mn_phase(comm, "intra-node reduce-scatter", "shm", t0, count * esize);
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
        algo = tnt_mn_select(net, comm->num_nodes, (y - x) * esize);
        comm->tl_algo = tnt_mn_algo_name(algo);
        uint64_t t1 = tnt_mn_phase_start();
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
        status = algo == TNT_MN_ALGO_RING           ? tnt_mn_allreduce_ring(&g)
                 : algo == TNT_MN_ALGO_RABENSEIFNER ? tnt_mn_allreduce_rabenseifner(&g)
                 : algo == TNT_MN_ALGO_TREE         ? tnt_mn_allreduce_tree(&g)
                                                    : tnt_mn_allreduce_recursive_doubling(&g);
        if (status != TNT_OK) {
            return status;
        }
        tnt_mn_phase(comm, "inter-node allreduce", tnt_mn_algo_name(algo), t1, (y - x) * esize);
    }

    /* 3. Every local rank gets every slice. */
    if (comm->local_size > 1) {
        uint64_t t2 = tnt_mn_phase_start();
        status = tnt_shm_allgather_slices(comm->shm, recvbuf, count, dtype);
        if (status != TNT_OK) {
            return status;
        }
        tnt_mn_phase(comm, "intra-node allgather", "shm", t2, count * esize);
    }
    return TNT_OK;
}
