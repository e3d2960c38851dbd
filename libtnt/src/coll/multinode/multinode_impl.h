/*
 * Private to coll/multinode/: the state behind comm->net and the inter-node
 * algorithms, one file each:
 *   allreduce_recursive_doubling.c  latency: log2(n) exchanges of the whole
 *                                   vector (non-powers of two fold in)
 *   allreduce_rabenseifner.c        bandwidth with log2(n) steps: recursive
 *                                   halving reduce-scatter + recursive
 *                                   doubling allgather
 *   allreduce_ring.c                bandwidth: pipelined, chunked ring
 *                                   reduce-scatter + allgather
 *   allreduce_tree.c                fewest messages: binomial reduce to
 *                                   member 0, then binomial broadcast
 *   exchange.c                      the pipelined pairwise exchange the first
 *                                   two are made of
 *   allreduce_hierarchical.c        the composition used for every
 *                                   allreduce: shm reduce-scatter, then one of
 *                                   the three above across nodes per slice,
 *                                   then shm allgather
 *   arrival.c                       reducing received chunks as UCX delivers
 *                                   them (no copy into staging first)
 *   cost_model.c                    the alpha-beta-gamma model that selects
 *   broadcast.c, allgather.c, barrier.c
 *   gather.c, scatter.c             rooted: shm within the node, one message
 *                                   per node between its leader and the root
 *   alltoallv.c                     shm within the node, pairwise UCX
 *                                   exchange between nodes
 *   multinode.c                     init/finalize, layout tables
 */
#ifndef TNT_COLL_MULTINODE_IMPL_H
#define TNT_COLL_MULTINODE_IMPL_H

#include "coll/multinode.h"
#include "coll/multinode/cost_model.h"
#include "transport/ucx/ucx.h"
#include "util/slice.h"

#include <stddef.h>
#include <stdint.h>

typedef struct tnt_net tnt_net_t;

/* Reduce on arrival (arrival.c): the state of one reducing receive of a
 * chunk, kept per staging slot. Its fragments are combined into dst as UCX
 * hands them over (tnt_mn_arrival_consume, a tnt_ucx_consume_fn); pieces
 * of elements split between fragments wait in spill (the chunk's staging
 * slot, same offsets) and are combined by tnt_mn_arrival_finish once the
 * receive completed. dst = in op dst (recv_first) or dst op in, divided by
 * divisor: exactly the staged path's combination. After a failed receive
 * the state is not reused (the transport stays failed). */
typedef struct {
    unsigned char *dst;
    unsigned char *spill;
    uint64_t *split;           /* bit e: element e is split; tnt_mn_arrival_words(chunk) words */
    size_t split_lo, split_hi; /* words that may hold set bits: [lo, hi) */
    size_t bytes;
    size_t esize;
    tnt_dtype_t dtype;
    tnt_op_t op;
    int divisor;
    int recv_first;
    int staged; /* received whole into spill: combined by finish */
} tnt_mn_arrival_t;

size_t tnt_mn_arrival_words(size_t chunk_bytes);
void tnt_mn_arrival_start(tnt_mn_arrival_t *a, void *dst, void *spill, size_t bytes,
                          tnt_dtype_t dtype, tnt_op_t op, int divisor, int recv_first);
void tnt_mn_arrival_consume(void *arg, size_t offset, const void *data, size_t length);
void tnt_mn_arrival_finish(tnt_mn_arrival_t *a);

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
    /* The distinct node sizes, ascending: slice boundaries depend only on
     * them, so an allreduce's segments cost O(sum of these), not O(nodes^2). */
    int *sizes;
    int num_sizes;

    /* Scratch preallocated at init, so the data path allocates nothing. */
    int *group;              /* num_nodes entries: one member per node */
    size_t *bounds;          /* size + 2 entries: segment boundaries */
    tnt_ucx_iov_t *iov_send; /* size entries: allgather's blocks */
    tnt_ucx_iov_t *iov_recv; /* size entries */

    /* Registered staging area: ring slots (depth x chunk) and recursive
     * doubling's receive buffer (the whole area). */
    unsigned char *staging;
    size_t staging_bytes;
    size_t chunk_bytes;
    int depth;
    /* TNT_MULTINODE_REDUCE_ON_ARRIVAL (auto: from peers reached over TCP
     * only): reducing receives go through arrival[slot] (split bitmaps
     * preallocated) instead of the staging copy. */
    int reduce_on_arrival;
    tnt_mn_arrival_t *arrival; /* depth entries */

    /* float16/bfloat16 go across nodes as float32 partial sums, rounded
     * once at the end: this buffer holds the widened vector. It grows to
     * the largest 16-bit allreduce seen and is then reused. */
    float *wide;
    size_t wide_count;

    tnt_mn_algo_t forced;      /* TNT_ALLREDUCE_ALGO */
    size_t rd_max_bytes;       /* TNT_MULTINODE_RD_MAX_KB; SIZE_MAX: cost model */
    tnt_mn_cost_params_t cost; /* auto: the cost model's parameters */

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
tnt_status_t tnt_mn_allreduce_rabenseifner(const tnt_mn_group_op_t *g);
tnt_status_t tnt_mn_allreduce_ring(const tnt_mn_group_op_t *g);
tnt_status_t tnt_mn_allreduce_tree(const tnt_mn_group_op_t *g);

/* One pairwise step of a group operation, pipelined in chunks of
 * tnt_mn_chunk_for(): send g->buf[send_off, +send_len) to member send_to
 * while receiving recv_len bytes from member recv_from, either straight
 * into g->buf + recv_off (reduce == 0) or into the staging slots and then
 * combined into g->buf + recv_off (received operand first when recv_first,
 * divided by divisor before its rounding). Offsets and lengths are bytes
 * of whole elements; a member of -1 or a length of 0 skips that side. The
 * two regions must not overlap unless they are the same region (then each
 * chunk is sent before it is overwritten). Chunk c of the step is tagged
 * step * 4096 + c (mod the tag's step bits; at most depth chunks are in
 * flight, so a wrapped tag never matches a live one). */
typedef struct {
    int send_to;
    size_t send_off, send_len;
    int recv_from;
    size_t recv_off, recv_len;
    int reduce;
    int recv_first;
    int divisor;
    uint32_t step;
} tnt_mn_xfer_t;

tnt_status_t tnt_mn_exchange(const tnt_mn_group_op_t *g, const tnt_mn_xfer_t *x);

/* The reducing receive of one chunk in staging slot `slot` (arrival.c),
 * shared by the ring and tnt_mn_exchange: len bytes from rank peer are
 * combined into dst (received operand first when recv_first, divided by
 * divisor). Reduced on arrival when TNT_MULTINODE_REDUCE_ON_ARRIVAL says so
 * for this peer (auto: reached over TCP only, where UCX's rendezvous copies
 * anyway; RDMA's zero-copy rendezvous into the slot is cheaper) and the
 * caller allows it (nothing may read dst until the receive is reaped: no
 * send from that region in flight), else received into the slot. After the receive
 * was reaped successfully, tnt_mn_recv_reduce_done completes the
 * combination. */
tnt_status_t tnt_mn_recv_reduce(const tnt_mn_group_op_t *g, int slot, int peer, uint64_t tag,
                                void *dst, size_t len, int divisor, int recv_first,
                                int allow_arrival, tnt_ucx_op_t **op_p);
void tnt_mn_recv_reduce_done(const tnt_mn_group_op_t *g, int slot);

/* Non-power-of-two groups: the largest power of two p <= n and how members
 * fold into it. Members 0 .. 2*(n-p)-1 pair up (even, odd); the even one
 * hands its vector to the odd one before and gets the result after. */
static inline int tnt_mn_pow2_below(int n)
{
    int p = 1;
    while (p * 2 <= n) {
        p *= 2;
    }
    return p;
}

/* The fold shared by recursive doubling and Rabenseifner (exchange.c), with
 * each algorithm's own tag steps. fold_in: sets *virtual_p to this member's
 * index 0 .. p-1, or to -1 for an even member of a folded pair, which then
 * already holds the result and is done. fold_back: the odd member of a pair
 * hands the result back (nothing for the others). */
tnt_status_t tnt_mn_fold_in(const tnt_mn_group_op_t *g, int p, uint32_t step_fold,
                            uint32_t step_back, int *virtual_p);
tnt_status_t tnt_mn_fold_back(const tnt_mn_group_op_t *g, int p, uint32_t step_back);

/* Member index of virtual index v (0 .. p-1) after the fold. */
static inline int tnt_mn_fold_real(int v, int rem)
{
    return v < rem ? 2 * v + 1 : v + rem;
}

/* Messages in flight at once: the root of a gather or scatter (one per
 * other node), and alltoall(v)'s pairwise steps (a send and a receive
 * each). Both stay far below the transport's pool (TNT_UCX_POOL_SLOTS),
 * which the hang doctor's side messages share. */
#define TNT_MN_ROOTED_WINDOW   32
#define TNT_MN_PAIRWISE_WINDOW 16

/* Node n's blocks of bytes each, at rank * bytes from base, as an iov in
 * local rank order, consecutive ranks merged into one entry; iov has room
 * for node_sizes[n] entries. Returns the entries used. (gather.c) */
size_t tnt_mn_node_iov(const tnt_net_t *net, int node, unsigned char *base, size_t bytes,
                       tnt_ucx_iov_t *iov);
/* 1 when node n's ranks are consecutive (its blocks are one span). */
int tnt_mn_node_contiguous(const tnt_net_t *net, int node);
/* Room for count blocks of bytes each; NULL (the error raised, naming the
 * call in net->what) when there is none. (gather.c) */
unsigned char *tnt_mn_alloc_blocks(tnt_net_t *net, int count, size_t bytes);
/* The root's side of a gather (receive nonzero) or scatter across nodes:
 * one message from or to each other node's leader, in node order starting
 * after the root's own, over that node's blocks where they lie in recvbuf
 * (gather) or sendbuf (scatter), at most TNT_MN_ROOTED_WINDOW in flight;
 * once the first window is posted, own_node(comm, sendbuf, recvbuf, bytes)
 * does the root's own node, so the messages move while it runs.
 * (gather.c) */
typedef tnt_status_t (*tnt_mn_own_node_fn)(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                           size_t bytes);
tnt_status_t tnt_mn_rooted_root(tnt_comm_t *comm, const void *sendbuf, void *recvbuf, size_t bytes,
                                uint32_t seq, int receive, tnt_mn_own_node_fn own_node);

/* Local rank l of node n. */
static inline int tnt_mn_rank_at(const tnt_net_t *net, int node, int local)
{
    return net->rank_at[net->node_offset[node] + local];
}

#endif
