/*
 * Multi-node setup: layout tables, the UCX transport, algorithm settings.
 * The algorithms themselves are in the neighbouring files (multinode_impl.h
 * lists them).
 */
#include "coll/multinode/multinode_impl.h"

#include "util/log.h"
#include "util/settings.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Pipeline: chunk size (TNT_MULTINODE_CHUNK_KB, default 1 MiB in
 * util/settings.c) and chunks in flight. Each chunk is one rendezvous, so
 * smaller chunks pay more handshakes, and larger ones gained nothing
 * (figures: docs/multinode.md, "Pipeline chunks"); 4 in flight keep a chunk
 * on the wire while the previous one is reduced. Smaller
 * transfers use smaller chunks (tnt_mn_chunk_for). Staging: 4 x 1 MiB,
 * registered once. The algorithm for each size and node count comes from
 * the cost model (cost_model.h). */
#define TNT_MN_DEPTH 4

static tnt_mn_algo_t tnt_mn_algo_from_settings(tnt_settings_algo_t algo)
{
    switch (algo) {
    case TNT_SETTINGS_ALGO_RECURSIVE_DOUBLING:
        return TNT_MN_ALGO_RECURSIVE_DOUBLING;
    case TNT_SETTINGS_ALGO_RING:
        return TNT_MN_ALGO_RING;
    case TNT_SETTINGS_ALGO_RABENSEIFNER:
        return TNT_MN_ALGO_RABENSEIFNER;
    case TNT_SETTINGS_ALGO_TREE:
        return TNT_MN_ALGO_TREE;
    case TNT_SETTINGS_ALGO_AUTO:
        break;
    }
    return TNT_MN_ALGO_AUTO;
}

static void tnt_mn_free(tnt_net_t *net)
{
    if (net->arrival != NULL) {
        free(net->arrival[0].split); /* one block for every slot */
    }
    free(net->arrival);
    free(net->wide);
    free(net->sizes);
    free(net->iov_recv);
    free(net->iov_send);
    free(net->bounds);
    free(net->group);
    free(net->rank_at);
    free(net->node_offset);
    free(net);
}

/* The peers the collectives talk to. Returns the estimate given to UCX: per
 * distinct node size, the ring's two neighbours, the log2 partners of
 * recursive doubling and Rabenseifner plus the fold partner, and the
 * barrier's and broadcast's log2 peers each (local rank 0 only; a small
 * allgather's Bruck steps talk to the barrier's peers, 2^k nodes either
 * way), capped by the ranks on other nodes. Marks in connect[] the ones
 * wired up at init: with equal node sizes, the ring neighbours and
 * halving/doubling partners in this rank's own group (local rank l of every
 * node), a symmetric relation; everything else (uneven layouts, barrier,
 * broadcast, allgather) connects on first use. */
static size_t tnt_mn_peers(tnt_net_t *net, unsigned char *connect)
{
    tnt_comm_t *comm = net->comm;
    int n = comm->num_nodes, me = comm->node_id;
    int p = tnt_mn_pow2_below(n), rem = n - p, log2n = 0, v;
    size_t estimate, others = (size_t)(comm->size - comm->local_size);

    while ((1 << log2n) < n) {
        log2n++;
    }
    estimate = (size_t)net->num_sizes * (size_t)(2 + log2n + 1);
    if (comm->local_rank == 0) {
        estimate += 2 * (size_t)log2n + (size_t)log2n + 1;
    }
    if (estimate > others) {
        estimate = others;
    }
    if (net->num_sizes != 1) {
        return estimate;
    }
#define MN_CONNECT(member) connect[tnt_mn_rank_at(net, (member), comm->local_rank)] = 1
    MN_CONNECT((me + 1) % n);
    MN_CONNECT((me + n - 1) % n);
    if (me < 2 * rem) {
        MN_CONNECT(me % 2 == 0 ? me + 1 : me - 1);
    }
    if (me >= 2 * rem || me % 2 == 1) {
        v = me < 2 * rem ? me / 2 : me - rem;
        for (int mask = 1; mask < p; mask <<= 1) {
            MN_CONNECT(tnt_mn_fold_real(v ^ mask, rem));
        }
    }
#undef MN_CONNECT
    connect[comm->rank] = 0;
    return estimate;
}

tnt_status_t tnt_multinode_init(tnt_comm_t *comm)
{
    tnt_ucx_params_t params;
    unsigned char *connect;
    int *fill;
    tnt_net_t *net;
    tnt_status_t status;

    net = calloc(1, sizeof(*net));
    if (net == NULL) {
        return tnt_error_raise(TNT_ERR_NO_MEMORY, "multinode: out of memory");
    }
    net->comm = comm;
    net->node_offset = calloc((size_t)comm->num_nodes + 1, sizeof(int));
    net->rank_at = calloc((size_t)comm->size, sizeof(int));
    net->group = calloc((size_t)comm->num_nodes, sizeof(int));
    net->bounds = calloc((size_t)comm->size + 2, sizeof(size_t));
    connect = calloc((size_t)comm->size, 1);
    fill = calloc((size_t)comm->num_nodes, sizeof(int));
    if (net->node_offset == NULL || net->rank_at == NULL || net->group == NULL ||
        net->bounds == NULL || connect == NULL || fill == NULL) {
        status =
            tnt_error_raise(TNT_ERR_NO_MEMORY, "multinode: out of memory for %d ranks", comm->size);
        goto err_free_tables;
    }

    net->min_local_size = comm->size;
    for (int n = 0; n < comm->num_nodes; n++) {
        net->node_offset[n + 1] = net->node_offset[n] + comm->node_sizes[n];
        if (comm->node_sizes[n] < net->min_local_size) {
            net->min_local_size = comm->node_sizes[n];
        }
        if (comm->node_sizes[n] > net->max_local_size) {
            net->max_local_size = comm->node_sizes[n];
        }
    }
    /* Distinct node sizes, ascending: a presence table over 1..max. */
    net->sizes = calloc((size_t)net->max_local_size + 1, sizeof(int));
    if (net->sizes == NULL) {
        status = tnt_error_raise(TNT_ERR_NO_MEMORY, "multinode: out of memory");
        goto err_free_tables;
    }
    for (int n = 0; n < comm->num_nodes; n++) {
        net->sizes[comm->node_sizes[n]] = 1;
    }
    for (int L = 1; L <= net->max_local_size; L++) {
        if (net->sizes[L]) {
            net->sizes[net->num_sizes++] = L;
        }
    }
    /* Local ranks are numbered in rank order, so filling in rank order
     * reproduces them; checked rather than trusted. */
    for (int r = 0; r < comm->size; r++) {
        int n = comm->node_of_rank[r];
        if (comm->local_rank_of_rank[r] != fill[n]) {
            status = tnt_error_raise(TNT_ERR_BOOTSTRAP,
                                     "multinode: rank %d has local rank %d, expected %d on "
                                     "node %d (local ranks must follow rank order)",
                                     r, comm->local_rank_of_rank[r], fill[n], n);
            goto err_free_tables;
        }
        net->rank_at[net->node_offset[n] + fill[n]++] = r;
    }
    net->iov_send = calloc((size_t)comm->size, sizeof(tnt_ucx_iov_t));
    net->iov_recv = calloc((size_t)comm->size, sizeof(tnt_ucx_iov_t));
    if (net->iov_send == NULL || net->iov_recv == NULL) {
        status = tnt_error_raise(TNT_ERR_NO_MEMORY, "multinode: out of memory");
        goto err_free_tables;
    }

    net->forced = tnt_mn_algo_from_settings(comm->settings->allreduce_algo);
    net->chunk_bytes = comm->settings->multinode_chunk_bytes;
    net->rd_max_bytes = comm->settings->multinode_rd_max_bytes; /* SIZE_MAX: by the model */
    net->depth = TNT_MN_DEPTH;
    net->reduce_on_arrival = comm->settings->multinode_reduce_on_arrival;
    net->arrival = calloc((size_t)net->depth, sizeof(*net->arrival));
    if (net->arrival != NULL) {
        size_t words = tnt_mn_arrival_words(net->chunk_bytes);
        uint64_t *split = calloc(words * (size_t)net->depth, sizeof(uint64_t));
        if (split == NULL) {
            free(net->arrival);
            net->arrival = NULL;
        }
        for (int i = 0; split != NULL && i < net->depth; i++) {
            net->arrival[i].split = split + words * (size_t)i;
        }
    }
    if (net->arrival == NULL) {
        status = tnt_error_raise(TNT_ERR_NO_MEMORY, "multinode: out of memory");
        goto err_free_tables;
    }
    net->cost.alpha = comm->settings->multinode_latency_ns > 0
                          ? (double)comm->settings->multinode_latency_ns * 1e-9
                          : TNT_MN_COST_ALPHA_S;
    net->cost.beta = comm->settings->multinode_link_mbps > 0
                         ? 1.0 / ((double)comm->settings->multinode_link_mbps * 1e6)
                         : TNT_MN_COST_BETA_S_PER_B;
    net->cost.gamma = TNT_MN_COST_GAMMA_S_PER_B;
    /* The built-in constants describe the machine they were fitted on, where
     * every rank of the job shares one host (cost_model.h); a cluster's own
     * figures describe one node's link, shared by its ranks. */
    if (comm->settings->multinode_latency_ns > 0 || comm->settings->multinode_link_mbps > 0) {
        net->cost.links = net->max_local_size;
        net->cost.cpu_share = 1;
    } else {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        tnt_mn_cost_shared_host(net->cost.alpha, net->cost.beta, net->cost.gamma, comm->size,
                                cores > 0 ? (int)cores : 1, &net->cost);
    }
    net->cost.chunk = net->chunk_bytes;
    net->cost.depth = net->depth;

    memset(&params, 0, sizeof(params));
    params.estimated_peers = tnt_mn_peers(net, connect);
    params.boot = comm->boot;
    params.rank = comm->rank;
    params.size = comm->size;
    params.connect = connect;
    params.timeout_s = comm->timeout_s;
    params.staging_bytes = net->chunk_bytes * (size_t)net->depth;
    params.spin_us = comm->settings->ucx_spin_us;
    params.yield_us = comm->settings->ucx_yield_us;
    params.tcp_seg_bytes = comm->settings->ucx_tcp_seg_bytes;
    params.watch = comm->watch;
    status = tnt_ucx_create(&params, &net->ucx);
    if (status != TNT_OK) {
        goto err_free_tables;
    }
    {
        size_t bytes;
        net->staging = tnt_ucx_staging(net->ucx, &bytes);
        net->staging_bytes = bytes;
    }
    for (int r = 0; r < comm->size; r++) {
        if (connect[r]) {
            tnt_log_info("multinode: node %d (%s) -> rank %d on node %d over UCX %s (rendezvous "
                         "from %zu B)",
                         comm->node_id, comm->hostname, r, comm->node_of_rank[r],
                         tnt_ucx_peer_transport(net->ucx, r), tnt_ucx_peer_rndv_from(net->ucx, r));
            break; /* one line per rank is enough to show the path */
        }
    }
    free(fill);
    free(connect);
    comm->net = net;
    return TNT_OK;

err_free_tables:
    free(fill);
    free(connect);
    tnt_mn_free(net);
    return status;
}

void tnt_multinode_finalize(tnt_comm_t *comm)
{
    tnt_net_t *net = comm->net;

    if (net == NULL) {
        return;
    }
    tnt_ucx_destroy(net->ucx);
    tnt_mn_free(net);
    comm->net = NULL;
}

int tnt_multinode_side_send(tnt_comm_t *comm, int peer, const void *buf, size_t bytes)
{
    return comm->net != NULL ? tnt_ucx_side_send(comm->net->ucx, peer, buf, bytes) : -1;
}

size_t tnt_multinode_side_recv(tnt_comm_t *comm, void *buf, size_t bytes, int *sender_p)
{
    return comm->net != NULL ? tnt_ucx_side_recv(comm->net->ucx, buf, bytes, sender_p) : 0;
}
