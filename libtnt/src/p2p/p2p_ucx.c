/*
 * Point-to-point messages over the communicator's own UCX transport, for
 * communicators of several ranks (p2p.h says why it is its own). Tags: a
 * user tag t of 0 .. INT_MAX goes into the transport's tag layout as
 * sequence t >> 20 and step t & (2^20 - 1), with the sender's rank in the
 * rank field, so a receive from a named rank matches that rank only and an
 * any-source receive leaves the rank field out. The transport keys every
 * tag with this communicator's cookie.
 */
#include "p2p/p2p_impl.h"

#include "transport/shm.h"
#include "transport/ucx/ucx.h"
#include "util/log.h"
#include "util/settings.h"
#include "util/wait.h"

#include <stdio.h>
#include <stdlib.h>

struct tnt_p2p_ucx {
    tnt_ucx_t *ucx;
};

#define P2P_TAG_STEP_BITS 20
/* A user tag's sequence part is below 2^11 (tags are below 2^31); the
 * space goes above it, well inside the 24-bit sequence field. */
#define P2P_SPACE_SHIFT 11

static uint64_t p2p_tag(int tag, int source, int space)
{
    return tnt_ucx_tag(((uint32_t)tag >> P2P_TAG_STEP_BITS) | ((uint32_t)space << P2P_SPACE_SHIFT),
                       source, (uint32_t)tag & ((1u << P2P_TAG_STEP_BITS) - 1));
}

static int p2p_peer_alive(void *arg, int rank)
{
    tnt_comm_t *comm = arg;
    return tnt_shm_local_alive(comm->shm, comm->local_rank_of_rank[rank]);
}

tnt_status_t tnt_p2p_ucx_create(tnt_comm_t *comm, struct tnt_p2p_ucx **ucx_p)
{
    unsigned char *local = malloc((size_t)comm->size);
    if (local == NULL) {
        return tnt_error_raise(TNT_ERR_NO_MEMORY, "tnt_init: out of memory for %d ranks",
                               comm->size);
    }
    for (int r = 0; r < comm->size; r++) {
        local[r] = comm->node_of_rank[r] == comm->node_id;
    }
    tnt_ucx_params_t params = {
        .boot = comm->boot,
        .rank = comm->rank,
        .size = comm->size,
        .connect = NULL, /* every pair connects on its first message */
        .estimated_peers = (size_t)comm->size,
        .timeout_s = comm->timeout_s,
        .spin_us = comm->settings->ucx_spin_us,
        .yield_us = comm->settings->ucx_yield_us,
        .tcp_seg_bytes = comm->settings->ucx_tcp_seg_bytes,
        /* Same-host messages through UCX's sysv shared memory, not posix,
         * which would map 4 MiB of /dev/shm per communicator (ucx_config.c). */
        .avoid_dev_shm = 1,
        .self_ok = 1,
        .local = local,
        .peer_alive = p2p_peer_alive,
        .alive_arg = comm,
    };
    struct tnt_p2p_ucx *p2p = calloc(1, sizeof(*p2p));
    if (p2p == NULL) {
        free(local);
        return tnt_error_raise(TNT_ERR_NO_MEMORY, "tnt_init: out of memory");
    }
    tnt_status_t status = tnt_ucx_create(&params, &p2p->ucx);
    free(local); /* copied into the transport's peer table */
    if (status != TNT_OK) {
        free(p2p);
        return status;
    }
    *ucx_p = p2p;
    return TNT_OK;
}

void tnt_p2p_ucx_destroy(struct tnt_p2p_ucx *p2p)
{
    if (p2p != NULL) {
        tnt_ucx_destroy(p2p->ucx);
        free(p2p);
    }
}

tnt_status_t tnt_p2p_ucx_post(tnt_comm_t *comm, struct tnt_p2p_ucx *p2p, struct tnt_p2p_op *op,
                              void *buf)
{
    tnt_ucx_t *ucx = p2p->ucx;
    int peer = op->peer, tag = op->tag;
    size_t bytes = op->bytes;

    if (tnt_ucx_free_ops(ucx) == 0) {
        /* The user's to fix, and nothing broke: not the transport's
         * pool-exhausted failure. */
        return tnt_error_raise(TNT_ERR_NO_MEMORY,
                               "%s: %d point-to-point operations are already in flight on "
                               "communicator %s; wait for some before posting more",
                               tnt_p2p_op_what(op), TNT_UCX_POOL_SLOTS, comm->name);
    }
    op->posted_ns = tnt_time_ns();
    return op->is_recv ? tnt_ucx_irecv_from(ucx, peer, p2p_tag(tag, peer < 0 ? 0 : peer, op->space),
                                            buf, bytes, &op->result, &op->op)
                       : tnt_ucx_isend_sync(ucx, peer, p2p_tag(tag, comm->rank, op->space), buf,
                                            bytes, &op->op);
}

static const char *describe_op(void *op)
{
    return tnt_p2p_op_what(op);
}

tnt_status_t tnt_p2p_ucx_test(struct tnt_p2p_ucx *p2p, struct tnt_p2p_op *op)
{
    if (op->op == NULL) {
        return TNT_OK; /* already reaped: finished */
    }
    const tnt_ucx_what_t what = { .describe = describe_op, .arg = op };
    return tnt_ucx_test(p2p->ucx, &op->op, op->posted_ns, &what);
}

tnt_status_t tnt_p2p_ucx_wait(struct tnt_p2p_ucx *p2p, struct tnt_p2p_op *op)
{
    if (op->op == NULL) {
        return TNT_OK;
    }
    const tnt_ucx_what_t what = { .describe = describe_op, .arg = op };
    return tnt_ucx_wait_what(p2p->ucx, &op->op, &what);
}
