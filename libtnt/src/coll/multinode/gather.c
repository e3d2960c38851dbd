/*
 * Gather across nodes, hierarchical, each block moved once:
 *   1. within every node, a shared-memory gather to the node's leader (the
 *      root on its node, local rank 0 elsewhere), blocks in local rank
 *      order;
 *   2. every other node's leader sends its node's blocks to the root as one
 *      message, which the root receives straight into their places in
 *      recvbuf (an iov: a node's ranks need not be contiguous).
 * The root posts its receives (at most TNT_MN_ROOTED_WINDOW in flight)
 * before its own node's gather, so the other nodes' messages arrive while
 * it runs. Compared with the composed form (an allgather kept at the root)
 * nothing goes to a rank that does not keep it: the root takes in
 * (size - local_size) blocks, each non-root leader sends local_size.
 *
 * Tags: the collectives' own transport (net->ucx), so neither a user's
 * tnt_send/tnt_recv (a worker of their own, p2p/p2p.h) nor another
 * communicator can match them; tnt_ucx_tag(seq, sender, 0), one message
 * per sender and collective.
 */
#include "coll/multinode/multinode_impl.h"

#include "transport/shm.h"
#include "util/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t tnt_mn_node_iov(const tnt_net_t *net, int node, unsigned char *base, size_t bytes,
                       tnt_ucx_iov_t *iov)
{
    int L = net->comm->node_sizes[node];
    size_t n = 0;
    for (int l = 0; l < L; l++) {
        int r = tnt_mn_rank_at(net, node, l);
        if (n > 0 && r == tnt_mn_rank_at(net, node, l - 1) + 1) {
            iov[n - 1].bytes += bytes; /* contiguous with the previous block */
            continue;
        }
        iov[n].buf = base + (size_t)r * bytes;
        iov[n].bytes = bytes;
        n++;
    }
    return n;
}

int tnt_mn_node_contiguous(const tnt_net_t *net, int node)
{
    int L = net->comm->node_sizes[node];
    return tnt_mn_rank_at(net, node, L - 1) - tnt_mn_rank_at(net, node, 0) == L - 1;
}

unsigned char *tnt_mn_alloc_blocks(tnt_net_t *net, int count, size_t bytes)
{
    unsigned char *blocks = malloc((size_t)count * bytes);
    if (blocks == NULL) {
        tnt_error_raise(TNT_ERR_NO_MEMORY, "%s: out of memory for %d x %zu bytes", net->what,
                        count, bytes);
    }
    return blocks;
}

tnt_status_t tnt_mn_rooted_root(tnt_comm_t *comm, const void *sendbuf, void *recvbuf, size_t bytes,
                                uint32_t seq, int receive, tnt_mn_own_node_fn own_node)
{
    tnt_net_t *net = comm->net;
    const int N = comm->num_nodes, v = comm->node_id;
    const int W = N - 1 < TNT_MN_ROOTED_WINDOW ? N - 1 : TNT_MN_ROOTED_WINDOW;
    /* A send only reads its blocks (the cast is UCX's iov type). */
    unsigned char *base = receive ? recvbuf : (unsigned char *)sendbuf;
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
    /* Message i is node (v + 1 + i) % N's; its iov sits at that node's
     * offset in the layout table, so in-flight iovs never overlap. */
    for (int i = 0; i < N - 1 && status == TNT_OK; i++) {
        int node = (v + 1 + i) % N;
        int leader = tnt_mn_rank_at(net, node, 0);
        tnt_ucx_iov_t *mine = iov + net->node_offset[node];
        size_t n = tnt_mn_node_iov(net, node, base, bytes, mine);

        if (i >= W) {
            status = tnt_ucx_wait(net->ucx, &ops[i % W], net->what);
        }
        if (status == TNT_OK && receive) {
            status = tnt_ucx_irecvv(net->ucx, leader, tnt_ucx_tag(seq, leader, 0), mine, n,
                                    &ops[i % W]);
        } else if (status == TNT_OK) {
            status = tnt_ucx_isendv(net->ucx, leader, tnt_ucx_tag(seq, comm->rank, 0), mine, n,
                                    &ops[i % W]);
        }
        if (status == TNT_OK && i == W - 1) {
            status = own_node(comm, sendbuf, recvbuf, bytes);
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

/* The root's own node: its blocks into place in recvbuf. */
static tnt_status_t gather_root_node(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                     size_t bytes)
{
    tnt_net_t *net = comm->net;
    unsigned char *out = recvbuf;
    const int v = comm->node_id, L = comm->local_size;
    const int first = tnt_mn_rank_at(net, v, 0);
    tnt_status_t status;

    if (L == 1) {
        if (out + (size_t)comm->rank * bytes != (const unsigned char *)sendbuf) {
            memcpy(out + (size_t)comm->rank * bytes, sendbuf, bytes);
        }
        return TNT_OK;
    }
    if (tnt_mn_node_contiguous(net, v)) {
        /* The node's blocks are one span of out: the one-node gather's own
         * layout, in place included (sendbuf is then the root's block). */
        return tnt_shm_gather(comm->shm, sendbuf, out + (size_t)first * bytes, bytes,
                              comm->local_rank);
    }
    unsigned char *tmp = tnt_mn_alloc_blocks(net, L, bytes);
    if (tmp == NULL) {
        return TNT_ERR_NO_MEMORY;
    }
    status = tnt_shm_gather(comm->shm, sendbuf, tmp, bytes, comm->local_rank);
    for (int l = 0; status == TNT_OK && l < L; l++) {
        unsigned char *to = out + (size_t)tnt_mn_rank_at(net, v, l) * bytes;
        if (to != tmp + (size_t)l * bytes) {
            memcpy(to, tmp + (size_t)l * bytes, bytes);
        }
    }
    free(tmp);
    return status;
}

tnt_status_t tnt_multinode_gather(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
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
    snprintf(net->what, sizeof(net->what), "gather #%llu (root %d, across nodes)",
             (unsigned long long)comm->coll_seq, root);
    if (comm->rank == root) {
        return tnt_mn_rooted_root(comm, sendbuf, recvbuf, bytes, seq, 1, gather_root_node);
    }
    if (comm->node_id == root_node) {
        return tnt_shm_gather(comm->shm, sendbuf, NULL, bytes, comm->local_rank_of_rank[root]);
    }
    if (comm->local_rank != 0) {
        return tnt_shm_gather(comm->shm, sendbuf, NULL, bytes, 0);
    }
    /* A non-root node's leader: its node's blocks, then one message. */
    unsigned char *block = (unsigned char *)sendbuf;
    if (L > 1) {
        block = tnt_mn_alloc_blocks(net, L, bytes);
        if (block == NULL) {
            return TNT_ERR_NO_MEMORY;
        }
        status = tnt_shm_gather(comm->shm, sendbuf, block, bytes, 0);
        if (status != TNT_OK) {
            free(block);
            return status;
        }
    }
    tnt_ucx_op_t *op = NULL;
    status = tnt_ucx_isend(net->ucx, root, tnt_ucx_tag(seq, comm->rank, 0), block,
                           (size_t)L * bytes, &op);
    if (status == TNT_OK) {
        status = tnt_ucx_wait(net->ucx, &op, net->what);
    }
    if (block != sendbuf) {
        free(block);
    }
    return status;
}
