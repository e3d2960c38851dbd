/*
 * Scatter across nodes, gather's mirror (gather.c), each block moved once:
 *   1. the root sends every other node's blocks, straight from their places
 *      in sendbuf (an iov), to that node's leader (local rank 0) as one
 *      message, at most TNT_MN_ROOTED_WINDOW in flight; between the first
 *      window and the rest it scatters its own node's blocks;
 *   2. every other node's leader receives its node's blocks, in local rank
 *      order, and scatters them within the node through shared memory.
 * Compared with the composed form (a broadcast of the whole buffer) no rank
 * receives a block it does not keep.
 *
 * Tags: as gather's (the collectives' own transport, one message per
 * receiving leader and collective, tnt_ucx_tag(seq, root, 0)).
 */
#include "coll/multinode/multinode_impl.h"

#include "transport/shm.h"
#include "util/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The root's own node: its blocks from their places in sendbuf. */
static tnt_status_t scatter_root_node(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                      size_t bytes)
{
    tnt_net_t *net = comm->net;
    const unsigned char *in = sendbuf;
    const int v = comm->node_id, L = comm->local_size;
    const int first = tnt_mn_rank_at(net, v, 0);
    tnt_status_t status;

    if (L == 1) {
        if (in + (size_t)comm->rank * bytes != (const unsigned char *)recvbuf) {
            memcpy(recvbuf, in + (size_t)comm->rank * bytes, bytes);
        }
        return TNT_OK;
    }
    if (tnt_mn_node_contiguous(net, v)) {
        /* One span of in: the one-node scatter's own layout, in place
         * included (recvbuf is then the root's block). */
        return tnt_shm_scatter(comm->shm, in + (size_t)first * bytes, recvbuf, bytes,
                               comm->local_rank);
    }
    unsigned char *tmp = tnt_mn_alloc_blocks(net, L, bytes);
    if (tmp == NULL) {
        return TNT_ERR_NO_MEMORY;
    }
    for (int l = 0; l < L; l++) {
        memcpy(tmp + (size_t)l * bytes, in + (size_t)tnt_mn_rank_at(net, v, l) * bytes, bytes);
    }
    status = tnt_shm_scatter(comm->shm, tmp, recvbuf, bytes, comm->local_rank);
    free(tmp);
    return status;
}

tnt_status_t tnt_multinode_scatter(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                   size_t bytes, int root)
{
    tnt_net_t *net = comm->net;
    const int root_node = comm->node_of_rank[root];
    const int L = comm->local_size;
    const uint32_t seq = net->seq++;
    tnt_status_t status;

    if (bytes == 0) {
        return TNT_OK;
    }
    snprintf(net->what, sizeof(net->what), "scatter #%llu (root %d, across nodes)",
             (unsigned long long)comm->coll_seq, root);
    if (comm->rank == root) {
        return tnt_mn_rooted_root(comm, sendbuf, recvbuf, bytes, seq, 0, scatter_root_node);
    }
    if (comm->node_id == root_node) {
        return tnt_shm_scatter(comm->shm, NULL, recvbuf, bytes, comm->local_rank_of_rank[root]);
    }
    if (comm->local_rank != 0) {
        return tnt_shm_scatter(comm->shm, NULL, recvbuf, bytes, 0);
    }
    /* A non-root node's leader: its node's blocks in one message. */
    unsigned char *block = recvbuf;
    if (L > 1) {
        block = tnt_mn_alloc_blocks(net, L, bytes);
        if (block == NULL) {
            return TNT_ERR_NO_MEMORY;
        }
    }
    tnt_ucx_op_t *op = NULL;
    status = tnt_ucx_irecv(net->ucx, root, tnt_ucx_tag(seq, root, 0), block, (size_t)L * bytes,
                           &op);
    if (status == TNT_OK) {
        status = tnt_ucx_wait(net->ucx, &op, net->what);
    }
    if (status == TNT_OK && L > 1) {
        status = tnt_shm_scatter(comm->shm, block, recvbuf, bytes, 0);
    }
    if (block != recvbuf) {
        free(block);
    }
    return status;
}
