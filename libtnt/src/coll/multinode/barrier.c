/*
 * Barrier across nodes: shared-memory barrier within the node, a
 * dissemination barrier over UCX among the nodes' local rank 0, then a
 * shared-memory barrier again so that no rank leaves before every node has
 * arrived. ceil(log2(nodes)) rounds of empty messages.
 */
#include "coll/multinode/multinode_impl.h"

#include "transport/shm.h"

#include <stdio.h>

tnt_status_t tnt_multinode_barrier(tnt_comm_t *comm)
{
    tnt_net_t *net = comm->net;
    int N = comm->num_nodes;
    int v = comm->node_id;
    uint32_t seq = net->seq++;
    tnt_status_t status;

    if (comm->local_size > 1) {
        status = tnt_shm_barrier(comm->shm);
        if (status != TNT_OK) {
            return status;
        }
    }
    if (comm->local_rank == 0) {
        snprintf(net->what, sizeof(net->what), "barrier #%llu (across nodes)",
                 (unsigned long long)comm->coll_seq);
        for (int dist = 1, round = 0; dist < N; dist <<= 1, round++) {
            int to = tnt_mn_rank_at(net, (v + dist) % N, 0);
            int from = tnt_mn_rank_at(net, (v - dist + N) % N, 0);
            status = tnt_ucx_sendrecv(net->ucx, to, tnt_ucx_tag(seq, comm->rank, (uint32_t)round),
                                      NULL, 0, from, tnt_ucx_tag(seq, from, (uint32_t)round), NULL,
                                      0, net->what);
            if (status != TNT_OK) {
                return status;
            }
        }
    }
    if (comm->local_size > 1) {
        return tnt_shm_barrier(comm->shm);
    }
    return TNT_OK;
}
