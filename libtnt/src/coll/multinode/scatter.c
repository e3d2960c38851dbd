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

/* The root's own node: its blocks from their places in in. */
static tnt_status_t scatter_root_node(tnt_comm_t *comm, const unsigned char *in, void *recvbuf,
                                      size_t bytes)
{
    tnt_net_t *net = comm->net;
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
    unsigned char *tmp = malloc((size_t)L * bytes);
    if (tmp == NULL) {
        return tnt_error_raise(TNT_ERR_NO_MEMORY, "%s: out of memory for %d x %zu bytes",
                               net->what, L, bytes);
    }
    for (int l = 0; l < L; l++) {
        memcpy(tmp + (size_t)l * bytes, in + (size_t)tnt_mn_rank_at(net, v, l) * bytes, bytes);
    }
    status = tnt_shm_scatter(comm->shm, tmp, recvbuf, bytes, comm->local_rank);
    free(tmp);
    return status;
}

static tnt_status_t scatter_root(tnt_comm_t *comm, const unsigned char *in, void *recvbuf,
                                 size_t bytes, uint32_t seq)
{
    tnt_net_t *net = comm->net;
    const int N = comm->num_nodes, v = comm->node_id;
    const int W = N - 1 < TNT_MN_ROOTED_WINDOW ? N - 1 : TNT_MN_ROOTED_WINDOW;
    tnt_ucx_op_t *ops[TNT_MN_ROOTED_WINDOW];
    tnt_ucx_iov_t *iov = malloc((size_t)comm->size * sizeof(*iov));
    tnt_status_t status = TNT_OK;

    if (iov == NULL) {
        return tnt_error_raise(TNT_ERR_NO_MEMORY, "%s: out of memory for %d ranks", net->what,
                               comm->size);
    }
    for (int i = 0; i < TNT_MN_ROOTED_WINDOW; i++) {
        ops[i] = NULL;
    }
    /* Message i goes to node (v + 1 + i) % N; its iov sits at that node's
     * offset in the layout table, so in-flight iovs never overlap. The
     * send only reads sendbuf (the cast is UCX's iov type). */
    for (int i = 0; i < N - 1 && status == TNT_OK; i++) {
        int node = (v + 1 + i) % N;
        int to = tnt_mn_rank_at(net, node, 0);
        tnt_ucx_iov_t *mine = iov + net->node_offset[node];
        size_t n = tnt_mn_node_iov(net, node, (unsigned char *)in, bytes, mine);

        if (i >= W) {
            status = tnt_ucx_wait(net->ucx, &ops[i % W], net->what);
        }
        if (status == TNT_OK) {
            status = tnt_ucx_isendv(net->ucx, to, tnt_ucx_tag(seq, comm->rank, 0), mine, n,
                                    &ops[i % W]);
        }
        if (status == TNT_OK && i == W - 1) {
            status = scatter_root_node(comm, in, recvbuf, bytes);
        }
    }
    if (status == TNT_OK) {
        status = tnt_ucx_waitall(net->ucx, ops, W, net->what);
    } else {
        tnt_ucx_waitall(net->ucx, ops, W, net->what);
    }
    free(iov);
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
        return scatter_root(comm, sendbuf, recvbuf, bytes, seq);
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
        block = malloc((size_t)L * bytes);
        if (block == NULL) {
            return tnt_error_raise(TNT_ERR_NO_MEMORY, "%s: out of memory for %d x %zu bytes",
                                   net->what, L, bytes);
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
