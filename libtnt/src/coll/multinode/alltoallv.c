/*
 * Alltoall(v) across nodes: every block goes straight from its sender to
 * its receiver, once.
 *   - Pairs on the same node exchange through shared memory: one
 *     tnt_shm_alltoallv over the node's ranks, with their blocks in place
 *     when the node's ranks are consecutive, packed otherwise.
 *   - Pairs on different nodes exchange over UCX in a pairwise schedule: at
 *     step k (1 .. size-1) rank r sends to (r + k) % size and receives from
 *     (r - k) % size, skipping its own node's ranks and empty blocks (every
 *     rank knows every size: the agreement round gave it the whole matrix).
 *     Up to TNT_MN_PAIRWISE_WINDOW steps are in flight; step k + W is
 *     posted once step k finished. No rank waits for a remote message
 *     before its node's shared-memory exchange (the first window is only
 *     posted), and every rank advances through the steps in the same
 *     order, so the smallest step anyone waits for can always complete.
 * Compared with the composed form (every rank's whole send buffer to every
 * rank, padded to the largest) each rank moves only its own blocks.
 *
 * Tags: the collectives' own transport (no user tnt_send/tnt_recv and no
 * other communicator can match them), tnt_ucx_tag(seq, sender, 0): one
 * message per ordered pair and collective.
 */
#include "coll/multinode/multinode_impl.h"

#include "transport/shm.h"
#include "util/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The node's own pairs. sdispl/rdispl: where rank j's blocks sit. */
static tnt_status_t alltoallv_local(tnt_comm_t *comm, const unsigned char *sendbuf,
                                    const size_t *sendbytes, const size_t *sdispl,
                                    unsigned char *recvbuf, const size_t *all_send,
                                    const size_t *rdispl)
{
    tnt_net_t *net = comm->net;
    const int L = comm->local_size, size = comm->size, me = comm->rank;
    const int *g = comm->local_to_global;
    size_t send_total = 0, recv_total = 0;
    tnt_status_t status;

    if (L == 1) {
        if (sendbytes[me] > 0) {
            memcpy(recvbuf + rdispl[me], sendbuf + sdispl[me], sendbytes[me]);
        }
        return TNT_OK;
    }
    size_t *local = malloc((size_t)L * (size_t)L * sizeof(size_t));
    if (local == NULL) {
        return tnt_error_raise(TNT_ERR_NO_MEMORY, "%s: out of memory for %d x %d sizes",
                               net->what, L, L);
    }
    for (int a = 0; a < L; a++) {
        for (int b = 0; b < L; b++) {
            local[(size_t)a * (size_t)L + (size_t)b] =
                all_send[(size_t)g[a] * (size_t)size + (size_t)g[b]];
        }
    }
    for (int b = 0; b < L; b++) {
        send_total += sendbytes[g[b]];
        recv_total += all_send[(size_t)g[b] * (size_t)size + (size_t)me];
    }
    if (tnt_mn_node_contiguous(net, comm->node_id)) {
        /* Blocks are packed in rank order, so the node's blocks are one
         * span of each buffer: the one-node exchange's own layout. */
        status = tnt_shm_alltoallv(comm->shm, sendbuf + sdispl[g[0]], recvbuf + rdispl[g[0]],
                                   local);
        free(local);
        return status;
    }
    unsigned char *tmp = malloc(send_total + recv_total > 0 ? send_total + recv_total : 1);
    if (tmp == NULL) {
        free(local);
        return tnt_error_raise(TNT_ERR_NO_MEMORY, "%s: out of memory for %zu bytes", net->what,
                               send_total + recv_total);
    }
    size_t at = 0;
    for (int b = 0; b < L; b++) {
        memcpy(tmp + at, sendbuf + sdispl[g[b]], sendbytes[g[b]]);
        at += sendbytes[g[b]];
    }
    status = tnt_shm_alltoallv(comm->shm, tmp, tmp + send_total, local);
    at = send_total;
    for (int a = 0; status == TNT_OK && a < L; a++) {
        size_t n = all_send[(size_t)g[a] * (size_t)size + (size_t)me];
        memcpy(recvbuf + rdispl[g[a]], tmp + at, n);
        at += n;
    }
    free(tmp);
    free(local);
    return status;
}

/* Step k's send and receive (either may be skipped) into ops[0..1]. */
static tnt_status_t alltoallv_post(tnt_comm_t *comm, int k, uint32_t seq,
                                   const unsigned char *sendbuf, const size_t *sendbytes,
                                   const size_t *sdispl, unsigned char *recvbuf,
                                   const size_t *all_send, const size_t *rdispl,
                                   tnt_ucx_op_t **ops)
{
    tnt_net_t *net = comm->net;
    const int size = comm->size, me = comm->rank;
    const int to = (me + k) % size, from = (me - k + size) % size;
    tnt_status_t status = TNT_OK;

    size_t in = all_send[(size_t)from * (size_t)size + (size_t)me];
    if (comm->node_of_rank[from] != comm->node_id && in > 0) {
        status = tnt_ucx_irecv(net->ucx, from, tnt_ucx_tag(seq, from, 0), recvbuf + rdispl[from],
                               in, &ops[0]);
    }
    if (status == TNT_OK && comm->node_of_rank[to] != comm->node_id && sendbytes[to] > 0) {
        status = tnt_ucx_isend(net->ucx, to, tnt_ucx_tag(seq, me, 0), sendbuf + sdispl[to],
                               sendbytes[to], &ops[1]);
    }
    return status;
}

tnt_status_t tnt_multinode_alltoallv(tnt_comm_t *comm, const void *sendbuf,
                                     const size_t *sendbytes, void *recvbuf,
                                     const size_t *all_send)
{
    tnt_net_t *net = comm->net;
    const int size = comm->size, me = comm->rank;
    const int steps = size - 1;
    const int W = steps < TNT_MN_PAIRWISE_WINDOW ? steps : TNT_MN_PAIRWISE_WINDOW;
    const uint32_t seq = net->seq++;
    const unsigned char *in = sendbuf;
    unsigned char *out = recvbuf;
    tnt_ucx_op_t *ops[2 * TNT_MN_PAIRWISE_WINDOW];
    tnt_status_t status = TNT_OK;

    snprintf(net->what, sizeof(net->what), "alltoall #%llu (pairwise, across nodes)",
             (unsigned long long)comm->coll_seq);
    size_t *displ = malloc(2 * (size_t)size * sizeof(size_t));
    if (displ == NULL) {
        return tnt_error_raise(TNT_ERR_NO_MEMORY, "%s: out of memory for %d ranks", net->what,
                               size);
    }
    size_t *sdispl = displ, *rdispl = displ + size, s = 0, r = 0;
    for (int j = 0; j < size; j++) {
        sdispl[j] = s;
        rdispl[j] = r;
        s += sendbytes[j];
        r += all_send[(size_t)j * (size_t)size + (size_t)me];
    }
    for (int i = 0; i < 2 * TNT_MN_PAIRWISE_WINDOW; i++) {
        ops[i] = NULL;
    }
    /* Step k (1-based) uses slot (k - 1) % W. */
    for (int k = 1; k <= W && status == TNT_OK; k++) {
        status = alltoallv_post(comm, k, seq, in, sendbytes, sdispl, out, all_send, rdispl,
                                &ops[2 * ((k - 1) % W)]);
    }
    if (status == TNT_OK) {
        status = alltoallv_local(comm, in, sendbytes, sdispl, out, all_send, rdispl);
    }
    for (int k = 1; k <= steps && status == TNT_OK; k++) {
        tnt_ucx_op_t **slot = &ops[2 * ((k - 1) % W)];
        status = tnt_ucx_waitall(net->ucx, slot, 2, net->what);
        if (status == TNT_OK && k + W <= steps) {
            status = alltoallv_post(comm, k + W, seq, in, sendbytes, sdispl, out, all_send,
                                    rdispl, slot);
        }
    }
    if (status != TNT_OK) {
        tnt_ucx_waitall(net->ucx, ops, 2 * W, net->what);
    }
    free(displ);
    return status;
}
