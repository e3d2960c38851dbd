/*
 * Allgather across nodes, in three steps:
 *   1. within the node, every local rank's block is gathered into its
 *      final place in recvbuf (shared-memory allgather into the front of
 *      recvbuf, then each block moved to rank * bytes);
 *   2. the nodes' local rank 0 exchange the node blocks: for small
 *      allgathers by Bruck's algorithm (ceil(log2 n) steps, in step k
 *      node v sends the blocks it holds to node v - 2^k and gets those of
 *      nodes v + 2^k ... from node v + 2^k), for larger ones around a ring
 *      (n - 1 steps, each with one node's blocks, every node sending to its
 *      neighbour only); a node's blocks need not be contiguous in recvbuf
 *      (cyclic placement), so each step is one message made of an iov of
 *      blocks, each received straight into its final place;
 *   3. local rank 0 broadcasts the complete recvbuf within the node.
 */
#include "coll/multinode/multinode_impl.h"

#include "transport/shm.h"

#include <stdio.h>
#include <string.h>

/* Allgathers of up to this many bytes per node on average take Bruck's
 * algorithm: their time is the number of steps (each a network latency,
 * or on shared cores a turn of every process), log2 n instead of n - 1.
 * Larger ones go around the ring, whose messages are a node's blocks
 * each and go to the neighbour only. Measured (docs/multinode.md,
 * "Allgather across nodes"): on 4 nodes the ring was faster from 256 KiB
 * in all, on 16 from 1 MiB. */
#define TNT_MN_ALLGATHER_BRUCK_NODE_MAX (16 * 1024)

/* The blocks of nodes first, first + 1, ... (count nodes, modulo the
 * number of nodes) as an iov into recvbuf, blocks that lie side by side
 * merged into one entry; returns the number of entries (at most the
 * number of ranks, for which net->iov_send and iov_recv have room). */
static size_t nodes_iov(const tnt_net_t *net, int first, int count, unsigned char *recvbuf,
                        size_t bytes, tnt_ucx_iov_t *iov)
{
    const int N = net->comm->num_nodes;
    size_t n = 0;
    for (int k = 0; k < count; k++) {
        int node = (first + k) % N;
        for (int l = 0; l < net->comm->node_sizes[node]; l++) {
            unsigned char *block = recvbuf + (size_t)tnt_mn_rank_at(net, node, l) * bytes;
            if (n > 0 && (unsigned char *)iov[n - 1].buf + iov[n - 1].bytes == block) {
                iov[n - 1].bytes += bytes;
            } else {
                iov[n].buf = block;
                iov[n].bytes = bytes;
                n++;
            }
        }
    }
    return n;
}

/* One step of step 2: the blocks of count nodes from send_first on to
 * node `to`, those of count nodes from recv_first on from node `from`,
 * both posted before either is waited for. */
static tnt_status_t exchange_nodes(tnt_net_t *net, unsigned char *out, size_t bytes, uint32_t seq,
                                   uint32_t step, int count, int to, int send_first, int from,
                                   int recv_first)
{
    tnt_comm_t *comm = net->comm;
    int to_rank = tnt_mn_rank_at(net, to, 0);
    int from_rank = tnt_mn_rank_at(net, from, 0);
    size_t ns = nodes_iov(net, send_first, count, out, bytes, net->iov_send);
    size_t nr = nodes_iov(net, recv_first, count, out, bytes, net->iov_recv);
    tnt_ucx_op_t *ops[2] = { NULL, NULL };

    tnt_status_t status = tnt_ucx_irecvv(net->ucx, from_rank, tnt_ucx_tag(seq, from_rank, step),
                                         net->iov_recv, nr, &ops[0]);
    if (status == TNT_OK) {
        status = tnt_ucx_isendv(net->ucx, to_rank, tnt_ucx_tag(seq, comm->rank, step),
                                net->iov_send, ns, &ops[1]);
    }
    /* After a failed post too: the op already posted is reaped. */
    tnt_status_t waited = tnt_ucx_waitall(net->ucx, ops, 2, net->what);
    return status != TNT_OK ? status : waited;
}

tnt_status_t tnt_multinode_allgather(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                     size_t bytes_per_rank)
{
    tnt_net_t *net = comm->net;
    unsigned char *out = recvbuf;
    size_t bytes = bytes_per_rank;
    int N = comm->num_nodes;
    int v = comm->node_id;
    uint32_t seq = net->seq++;
    tnt_status_t status;

    if (bytes == 0) {
        return TNT_OK;
    }
    snprintf(net->what, sizeof(net->what), "allgather #%llu (across nodes)",
             (unsigned long long)comm->coll_seq);

    /* 1. Local blocks into place. Local ranks follow rank order, so block l
     * moves up from l * bytes to local_to_global[l] * bytes >= l * bytes;
     * moving the highest first never overwrites a block still to move. */
    if (comm->local_size > 1) {
        status = tnt_shm_allgather(comm->shm, sendbuf, out, bytes);
        if (status != TNT_OK) {
            return status;
        }
        for (int l = comm->local_size - 1; l >= 0; l--) {
            size_t to = (size_t)comm->local_to_global[l] * bytes;
            if (to != (size_t)l * bytes) {
                memmove(out + to, out + (size_t)l * bytes, bytes);
            }
        }
    } else if (out + (size_t)comm->rank * bytes != (const unsigned char *)sendbuf) {
        memmove(out + (size_t)comm->rank * bytes, sendbuf, bytes);
    }

    /* 2. Among the nodes' local rank 0. */
    const int bruck = bytes * (size_t)comm->size <= (size_t)N * TNT_MN_ALLGATHER_BRUCK_NODE_MAX;
    if (comm->local_rank == 0 && bruck) {
        /* Bruck: after step k this node holds the blocks of nodes v ..
         * v + 2^(k+1) - 1; the last step brings only those still missing. */
        uint32_t step = 0;
        for (int dist = 1; dist < N; dist *= 2, step++) {
            int count = dist < N - dist ? dist : N - dist;
            status = exchange_nodes(net, out, bytes, seq, step, count, (v - dist + N) % N, v,
                                    (v + dist) % N, (v + dist) % N);
            if (status != TNT_OK) {
                return status;
            }
        }
    } else if (comm->local_rank == 0) {
        for (int s = 0; s < N - 1; s++) {
            status = exchange_nodes(net, out, bytes, seq, (uint32_t)s, 1, (v + 1) % N,
                                    (v - s + N) % N, (v - 1 + N) % N, (v - s - 1 + N) % N);
            if (status != TNT_OK) {
                return status;
            }
        }
    }

    /* 3. Everything from local rank 0 to the rest of the node. */
    if (comm->local_size > 1) {
        return tnt_shm_broadcast(comm->shm, out, bytes * (size_t)comm->size, 0);
    }
    return TNT_OK;
}
