/*
 * Allgather across nodes, in three steps:
 *   1. within the node, every local rank's block is gathered into its
 *      final place in recvbuf (shared-memory allgather into the front of
 *      recvbuf, then each block moved to rank * bytes);
 *   2. the nodes' local rank 0 pass the node blocks around a ring (n-1
 *      steps); a node's blocks need not be contiguous in recvbuf (cyclic
 *      placement), so each step is one message made of an iov of blocks;
 *   3. local rank 0 broadcasts the complete recvbuf within the node.
 */
#include "coll/multinode/multinode_impl.h"

#include "transport/shm.h"

#include <stdio.h>
#include <string.h>

static size_t allgather_iov(tnt_net_t *net, int node, unsigned char *recvbuf, size_t bytes,
                            tnt_ucx_iov_t *iov)
{
    int L = net->comm->node_sizes[node];
    for (int l = 0; l < L; l++) {
        iov[l].buf = recvbuf + (size_t)tnt_mn_rank_at(net, node, l) * bytes;
        iov[l].bytes = bytes;
    }
    return (size_t)L;
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

    /* 2. Ring over the nodes' local rank 0. */
    if (comm->local_rank == 0) {
        int right = tnt_mn_rank_at(net, (v + 1) % N, 0);
        int left = tnt_mn_rank_at(net, (v - 1 + N) % N, 0);
        for (int s = 0; s < N - 1; s++) {
            int send_node = (v - s + N) % N;
            int recv_node = (v - s - 1 + N) % N;
            size_t ns = allgather_iov(net, send_node, out, bytes, net->iov_send);
            size_t nr = allgather_iov(net, recv_node, out, bytes, net->iov_recv);
            tnt_ucx_op_t *ops[2] = { NULL, NULL };

            status = tnt_ucx_irecvv(net->ucx, left, tnt_ucx_tag(seq, left, (uint32_t)s),
                                    net->iov_recv, nr, &ops[0]);
            if (status == TNT_OK) {
                status = tnt_ucx_isendv(net->ucx, right, tnt_ucx_tag(seq, comm->rank, (uint32_t)s),
                                        net->iov_send, ns, &ops[1]);
            }
            if (status != TNT_OK) {
                tnt_ucx_waitall(net->ucx, ops, 2, net->what);
                return status;
            }
            status = tnt_ucx_waitall(net->ucx, ops, 2, net->what);
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
