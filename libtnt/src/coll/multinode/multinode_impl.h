/*
 * Private to coll/multinode/: the state behind comm->net and the inter-node
 * algorithms, one file each:
 *   allreduce_recursive_doubling.c  latency: log2(n) exchanges of the whole
 *                                   vector (non-powers of two fold in)
 *   allreduce_ring.c                bandwidth: pipelined, chunked ring
 *                                   reduce-scatter + allgather
 *   allreduce_hierarchical.c        the composition used for every
 *                                   allreduce: shm reduce-scatter, then one of
 *                                   the two above across nodes per slice, then
 *                                   shm allgather; selection lives here
 *   broadcast.c, allgather.c, barrier.c
 *   multinode.c                     init/finalize, layout tables
 */
#ifndef TNT_COLL_MULTINODE_IMPL_H
#define TNT_COLL_MULTINODE_IMPL_H

#include "coll/multinode.h"
#include "transport/ucx/ucx.h"
#include "util/slice.h"

#include <stddef.h>
#include <stdint.h>

typedef struct tnt_net tnt_net_t;

typedef enum {
    TNT_MN_ALGO_AUTO,
    TNT_MN_ALGO_RECURSIVE_DOUBLING,
    TNT_MN_ALGO_RING,
} tnt_mn_algo_t;

struct tnt_net {
    tnt_comm_t *comm;
    tnt_ucx_t *ucx;
    /* Collective sequence number for tags; every rank advances it the same
     * way because every rank calls the same collectives in the same order. */
    uint32_t seq;

    /* Layout: rank_at[node_offset[n] + l] is local rank l of node n. */
    int *node_offset; /* num_nodes + 1 entries */
    int *rank_at;     /* size entries */
    int min_local_size;
    int max_local_size;

    /* Scratch preallocated at init, so the data path allocates nothing. */
    int *group;              /* num_nodes entries: one member per node */
    size_t *bounds;          /* size + 2 entries: segment boundaries */
    tnt_ucx_iov_t *iov_send; /* max_local_size entries */
    tnt_ucx_iov_t *iov_recv; /* max_local_size entries */

    /* Registered staging area: ring slots (depth x chunk) and recursive
     * doubling's receive buffer (the whole area). */
    unsigned char *staging;
    size_t staging_bytes;
    size_t chunk_bytes;
    int depth;

    tnt_mn_algo_t forced; /* TNT_ALLREDUCE_ALGO */
    size_t rd_max_bytes;  /* auto: recursive doubling below this */

    char what[96]; /* "allreduce #12 (ring)" for errors */
};

/* One allreduce among n ranks, one per node (members[me] is this rank), on
 * buf in place. op is never TNT_AVG (callers pass TNT_SUM and divisor);
 * divisor > 1 divides the final sums before their single rounding. The
 * result is bitwise identical on every member and depends only on the data
 * and n. Tags use seq. */
typedef struct {
    tnt_net_t *net;
    const int *members;
    int n;
    int me;
    uint32_t seq;
    void *buf;
    size_t count;
    tnt_dtype_t dtype;
    tnt_op_t op;
    int divisor;
    const char *what;
} tnt_mn_group_op_t;

tnt_status_t tnt_mn_allreduce_recursive_doubling(const tnt_mn_group_op_t *g);
tnt_status_t tnt_mn_allreduce_ring(const tnt_mn_group_op_t *g);

/* Local rank l of node n. */
static inline int tnt_mn_rank_at(const tnt_net_t *net, int node, int local)
{
    return net->rank_at[net->node_offset[node] + local];
}

#endif
