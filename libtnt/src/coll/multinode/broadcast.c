/*
 * Broadcast across nodes: a binomial tree over one leader per node (the
 * root on its node, local rank 0 elsewhere), then a shared-memory broadcast
 * from the leader within each node. Large messages are cut into pieces of
 * net->chunk_bytes and pipelined down the tree: a leader forwards piece k
 * to its children while it receives piece k+1.
 */
#include "coll/multinode/multinode_impl.h"

#include "transport/shm.h"

#include <stdio.h>

static int bcast_leader(const tnt_net_t *net, int node, int root, int root_node)
{
    return node == root_node ? root : tnt_mn_rank_at(net, node, 0);
}

tnt_status_t tnt_multinode_broadcast(tnt_comm_t *comm, void *buf, size_t bytes, int root)
{
    tnt_net_t *net = comm->net;
    int N = comm->num_nodes;
    int root_node = comm->node_of_rank[root];
    int leader = bcast_leader(net, comm->node_id, root, root_node);
    uint32_t seq = net->seq++;
    tnt_status_t status;

    if (bytes == 0) {
        return TNT_OK;
    }
    snprintf(net->what, sizeof(net->what), "broadcast #%llu (root %d, across nodes)",
             (unsigned long long)comm->coll_seq, root);

    if (comm->rank == leader) {
        /* Virtual index: the root's node is 0. */
        int v = (comm->node_id - root_node + N) % N;
        int parent = -1;
        int children[32];
        int num_children = 0;
        int mask = 1;
        size_t chunk = net->chunk_bytes;
        size_t pieces = (bytes + chunk - 1) / chunk;
        /* ops[0]: receive of the current piece; then one send per child for
         * each of `window` pieces in flight. */
        enum { WINDOW = 4 };
        tnt_ucx_op_t *recv_op = NULL;
        tnt_ucx_op_t *send_ops[WINDOW * 32];

        /* MPICH's binomial tree: the parent clears the lowest set bit; the
         * children add the powers of two below it (all of them for v = 0). */
        while (mask < N) {
            if (v & mask) {
                parent = bcast_leader(net, ((v - mask) + root_node) % N, root, root_node);
                break;
            }
            mask <<= 1;
        }
        for (mask >>= 1; mask > 0; mask >>= 1) {
            if (v + mask < N) {
                children[num_children++] =
                    bcast_leader(net, (v + mask + root_node) % N, root, root_node);
            }
        }
        for (int i = 0; i < WINDOW * 32; i++) {
            send_ops[i] = NULL;
        }
        for (size_t k = 0; k < pieces; k++) {
            unsigned char *p = (unsigned char *)buf + k * chunk;
            size_t len = bytes - k * chunk < chunk ? bytes - k * chunk : chunk;
            tnt_ucx_op_t **slot = &send_ops[(k % WINDOW) * 32];

            if (parent >= 0) {
                status = tnt_ucx_irecv(net->ucx, parent, tnt_ucx_tag(seq, parent, (uint32_t)k), p,
                                       len, &recv_op);
                if (status == TNT_OK) {
                    status = tnt_ucx_wait(net->ucx, &recv_op, net->what);
                }
                if (status != TNT_OK) {
                    tnt_ucx_waitall(net->ucx, send_ops, WINDOW * 32, net->what);
                    return status;
                }
            }
            /* The slot's sends from piece k - WINDOW must be done first. */
            status = tnt_ucx_waitall(net->ucx, slot, num_children, net->what);
            for (int c = 0; c < num_children && status == TNT_OK; c++) {
                status = tnt_ucx_isend(net->ucx, children[c],
                                       tnt_ucx_tag(seq, comm->rank, (uint32_t)k), p, len, &slot[c]);
            }
            if (status != TNT_OK) {
                tnt_ucx_waitall(net->ucx, send_ops, WINDOW * 32, net->what);
                return status;
            }
        }
        status = tnt_ucx_waitall(net->ucx, send_ops, WINDOW * 32, net->what);
        if (status != TNT_OK) {
            return status;
        }
    }
    if (comm->local_size > 1) {
        return tnt_shm_broadcast(comm->shm, buf, bytes, comm->local_rank_of_rank[leader]);
    }
    return TNT_OK;
}
