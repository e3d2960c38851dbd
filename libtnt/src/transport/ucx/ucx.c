/*
 * UCX transport (see ucx.h for the contract), the data path: the request
 * pool, consuming receives, and posting sends and receives. The other
 * files are listed in ucx_impl.h.
 */
#include "transport/ucx/ucx_impl.h"

#include "util/log.h"
#include "util/wait.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static struct tnt_ucx_op *tnt_ucx_pool_op(tnt_ucx_t *ucx, int slot)
{
    return (struct tnt_ucx_op *)(ucx->pool + (size_t)slot * ucx->slot_bytes +
                                 ucx->ucp_request_bytes);
}

static int tnt_ucx_pool_slot_of(const tnt_ucx_t *ucx, const struct tnt_ucx_op *op)
{
    return (int)(((const unsigned char *)op - ucx->ucp_request_bytes - ucx->pool) /
                 ucx->slot_bytes);
}

static struct tnt_ucx_op *tnt_ucx_pool_get(tnt_ucx_t *ucx)
{
    struct tnt_ucx_op *op;

    if (ucx->num_free == 0) {
        return NULL;
    }
    op = tnt_ucx_pool_op(ucx, ucx->free_slots[--ucx->num_free]);
    op->ucx = ucx;
    op->in_use = 1;
    op->pending = 0;
    op->status = UCS_OK;
    op->peer = -1;
    op->is_recv = 0;
    op->bytes = 0;
    op->info.length = 0;
    op->result = NULL;
    op->sync = 0;
    op->flag.bits = 0;
    op->flagged_queued = 0;
    return op;
}

void tnt_ucx_pool_put(tnt_ucx_t *ucx, struct tnt_ucx_op *op)
{
    if (op->flagged_queued) {
        /* Reaped before its flag->fn ran (a failure's clean-up): out of
         * the queue, which is short. */
        struct tnt_ucx_op **link = &ucx->flagged_head, *prev = NULL;
        while (*link != op) {
            prev = *link;
            link = &(*link)->flagged_next;
        }
        *link = op->flagged_next;
        if (ucx->flagged_tail == op) {
            ucx->flagged_tail = prev;
        }
        op->flagged_queued = 0;
    }
    op->in_use = 0;
    ucx->free_slots[ucx->num_free++] = tnt_ucx_pool_slot_of(ucx, op);
}

/* UCX's completion callback of a flagged receive (irecv_from's flag): runs
 * inside UCX (its progress, or the posting call when the message was
 * already here), where no send may be posted, so it only queues the op for
 * tnt_ucx_serve_flagged. Receives complete in the order they matched, and
 * the queue keeps it. */
static void tnt_ucx_flagged_done(void *request, ucs_status_t status,
                                 const ucp_tag_recv_info_t *info, void *user_data)
{
    struct tnt_ucx_op *op = request;
    tnt_ucx_t *ucx = op->ucx;
    uint64_t low = info->sender_tag ^ ucx->low_key; /* the step and rank fields, unkeyed */

    (void)user_data;
    if ((status != UCS_OK && status != UCS_ERR_MESSAGE_TRUNCATED) || (low & op->flag.bits) == 0) {
        return;
    }
    op->flagged_source = (int)((low >> TNT_UCX_TAG_STEP_BITS) & (TNT_UCX_MAX_RANKS - 1));
    op->flagged_bytes = info->length;
    op->flagged_truncated = status == UCS_ERR_MESSAGE_TRUNCATED;
    op->flagged_next = NULL;
    op->flagged_queued = 1;
    if (ucx->flagged_tail != NULL) {
        ucx->flagged_tail->flagged_next = op;
    } else {
        ucx->flagged_head = op;
    }
    ucx->flagged_tail = op;
}

void tnt_ucx_serve_flagged(tnt_ucx_t *ucx)
{
    struct tnt_ucx_op *op;

    while ((op = ucx->flagged_head) != NULL) {
        ucx->flagged_head = op->flagged_next;
        if (ucx->flagged_head == NULL) {
            ucx->flagged_tail = NULL;
        }
        op->flagged_queued = 0;
        /* After a failure nothing moves on: the op is abandoned with the
         * rest (its sender, if alive, learns of the failure the same way). */
        if (ucx->failed == TNT_OK && op->flagged_source < ucx->size) {
            op->flag.fn(op->flag.arg, op->flagged_source, op->flagged_bytes,
                        op->flagged_truncated);
        }
    }
}

/* Consuming receives use a generic datatype whose unpack hands each
 * fragment, where UCX holds it, to the op's consumer: UCX calls unpack
 * with its own receive buffer (eager and rendezvous fragments alike, and
 * its copy of an unexpected message), so the bytes are not copied into a
 * user buffer first. The state is the op (the receive's buffer argument). */
static void *tnt_ucx_consume_start(void *context, void *buffer, size_t count)
{
    (void)context;
    (void)count;
    return buffer;
}

static size_t tnt_ucx_consume_size(void *state)
{
    return ((struct tnt_ucx_op *)state)->bytes;
}

static ucs_status_t tnt_ucx_consume_unpack(void *state, size_t offset, const void *src,
                                           size_t length)
{
    struct tnt_ucx_op *op = state;

    if (offset > op->bytes || length > op->bytes - offset) {
        return UCS_ERR_MESSAGE_TRUNCATED; /* longer than expected: reaped as a mismatch */
    }
    op->consume(op->consume_arg, offset, src, length);
    return UCS_OK;
}

static void tnt_ucx_consume_finish(void *state)
{
    (void)state;
}

const ucp_generic_dt_ops_t tnt_ucx_consume_ops = {
    .start_pack = NULL,
    .start_unpack = tnt_ucx_consume_start,
    .packed_size = tnt_ucx_consume_size,
    .pack = NULL,
    .unpack = tnt_ucx_consume_unpack,
    .finish = tnt_ucx_consume_finish,
};

void *tnt_ucx_staging(tnt_ucx_t *ucx, size_t *bytes_p)
{
    *bytes_p = ucx->staging_bytes;
    return ucx->staging;
}

uint64_t tnt_ucx_tag(uint32_t seq, int src_rank, uint32_t step)
{
    /* seq % TNT_UCX_DATA_SEQS: the values above are control messages'
     * (ucx_impl.h). */
    return ((uint64_t)(seq % TNT_UCX_DATA_SEQS) << TNT_UCX_TAG_SEQ_SHIFT) |
           ((uint64_t)((uint32_t)src_rank & (TNT_UCX_MAX_RANKS - 1)) << TNT_UCX_TAG_STEP_BITS) |
           (uint64_t)(step & ((1u << TNT_UCX_TAG_STEP_BITS) - 1));
}

static int tnt_ucx_in_staging(const tnt_ucx_t *ucx, const void *buf, size_t bytes)
{
    const unsigned char *p = buf, *s = ucx->staging;
    return ucx->staging_memh != NULL && p >= s && bytes <= ucx->staging_bytes &&
           (size_t)(p - s) <= ucx->staging_bytes - bytes;
}

tnt_status_t tnt_ucx_check_peer(tnt_ucx_t *ucx, int peer)
{
    if (ucx->failed != TNT_OK) {
        return tnt_error_set(ucx->failed, "ucx: the job already failed (see the first error)");
    }
    if (peer < 0 || peer >= ucx->size || (peer == ucx->rank && !ucx->self_ok) || ucx->poisoned) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG, "ucx: rank %d has no endpoint to rank %d",
                               ucx->rank, peer);
    }
    if (ucx->peers[peer].ep == NULL) {
        /* First message to or from this peer: connect now. Once per peer
         * for the life of the transport (UCX allocates here), never again
         * on the data path. A receive connects too, so that both sides of
         * every pair that talks hold an endpoint: the peer's failure is
         * reported on it, and the goodbye handshake stays symmetric. A
         * peer on this host that died took its shared memory with it, so
         * connecting fails: that is its death, not the transport's fault. */
        tnt_status_t status =
            tnt_ucx_local_peer_died(ucx, peer) ? TNT_ERR_PEER_FAILED : tnt_ucx_ep_create(ucx, peer);
        if (status != TNT_OK && tnt_ucx_local_peer_died(ucx, peer)) {
            status = tnt_error_raise(TNT_ERR_PEER_FAILED,
                                     "ucx: rank %d on this host died before this rank exchanged "
                                     "a message with it; its own output (or the launcher's) "
                                     "names the cause",
                                     peer);
        }
        if (status != TNT_OK) {
            ucx->failed = status;
            return status;
        }
        tnt_ucx_describe_ep(&ucx->peers[peer]);
        tnt_log_debug("ucx: rank %d -> rank %d via %s (connected on first use)", ucx->rank, peer,
                      ucx->peers[peer].transport);
    }
    if (ucx->peers[peer].failed) {
        ucx->failed = TNT_ERR_PEER_FAILED;
        return tnt_error_raise(TNT_ERR_PEER_FAILED,
                               "ucx: connection to rank %d broke (%s); did it exit or crash? "
                               "its own output names the cause",
                               peer, ucs_status_string(ucx->peers[peer].error));
    }
    return TNT_OK;
}

static void tnt_ucx_start(struct tnt_ucx_op *op, ucs_status_ptr_t ret)
{
    if (ret == NULL) {
        op->pending = 0; /* completed immediately */
        op->status = UCS_OK;
    } else if (UCS_PTR_IS_ERR(ret)) {
        op->pending = 0;
        op->status = UCS_PTR_STATUS(ret);
    } else {
        op->pending = 1; /* ret is our own op (user-provided request) */
    }
}

_Static_assert(sizeof(tnt_ucx_iov_t) == sizeof(ucp_dt_iov_t) &&
                   offsetof(tnt_ucx_iov_t, buf) == offsetof(ucp_dt_iov_t, buffer) &&
                   offsetof(tnt_ucx_iov_t, bytes) == offsetof(ucp_dt_iov_t, length),
               "tnt_ucx_iov_t must have ucp_dt_iov_t's layout");

static size_t tnt_ucx_iov_bytes(const tnt_ucx_iov_t *iov, size_t iovcnt)
{
    size_t bytes = 0;
    for (size_t i = 0; i < iovcnt; i++) {
        bytes += iov[i].bytes;
    }
    return bytes;
}

/* The common start of every send and receive: the peer must be usable and a
 * preallocated request free (running out is a bug in the caller's pipeline
 * depth, and it poisons the transport like any other failure). */
static tnt_status_t tnt_ucx_op_acquire(tnt_ucx_t *ucx, int peer, size_t bytes,
                                       struct tnt_ucx_op **op_p)
{
    struct tnt_ucx_op *op;
    tnt_status_t status = tnt_ucx_check_peer(ucx, peer);

    if (status != TNT_OK) {
        return status;
    }
    op = tnt_ucx_pool_get(ucx);
    if (op == NULL) {
        ucx->failed = TNT_ERR_TRANSPORT;
        return tnt_error_raise(TNT_ERR_TRANSPORT, "ucx: more than %d operations in flight",
                               TNT_UCX_POOL_SLOTS);
    }
    op->peer = peer;
    op->bytes = bytes;
    op->consume = NULL;
    op->consume_arg = NULL;
    *op_p = op;
    return TNT_OK;
}

/* Shared by the contiguous and iov forms: datatype is ucp_dt_make_contig(1)
 * (count = bytes) or ucp_dt_make_iov() (count = iovcnt). */
static tnt_status_t tnt_ucx_post_send(tnt_ucx_t *ucx, int peer, uint64_t tag, const void *buf,
                                      size_t count, size_t bytes, ucp_datatype_t datatype, int sync,
                                      tnt_ucx_op_t **op_p)
{
    ucp_request_param_t param;
    struct tnt_ucx_op *op = NULL;
    tnt_status_t status = tnt_ucx_op_acquire(ucx, peer, bytes, &op);

    if (status != TNT_OK) {
        return status;
    }
    param.op_attr_mask = UCP_OP_ATTR_FIELD_REQUEST | UCP_OP_ATTR_FIELD_DATATYPE;
    param.request = op;
    param.datatype = datatype;
    if (datatype == ucp_dt_make_contig(1) && tnt_ucx_in_staging(ucx, buf, bytes)) {
        param.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
        param.memh = ucx->staging_memh;
    }
    op->sync = sync;
    if (sync) {
        tnt_ucx_start(op, ucp_tag_send_sync_nbx(ucx->peers[peer].ep, buf, count,
                                                tnt_ucx_wire_tag(ucx, tag), &param));
    } else {
        tnt_ucx_start(op, ucp_tag_send_nbx(ucx->peers[peer].ep, buf, count,
                                           tnt_ucx_wire_tag(ucx, tag), &param));
    }
    ucx->bytes_sent += bytes;
    *op_p = op;
    return TNT_OK;
}

/* consume != NULL: a consuming receive (tnt_ucx_irecv_consume); buf, count
 * and datatype are then the op itself, 1 and the generic datatype. */
static tnt_status_t tnt_ucx_post_recv(tnt_ucx_t *ucx, int peer, uint64_t tag, void *buf,
                                      size_t count, size_t bytes, ucp_datatype_t datatype,
                                      tnt_ucx_consume_fn consume, void *arg, tnt_ucx_op_t **op_p)
{
    ucp_request_param_t param;
    struct tnt_ucx_op *op = NULL;
    tnt_status_t status = tnt_ucx_op_acquire(ucx, peer, bytes, &op);

    if (status != TNT_OK) {
        return status;
    }
    op->is_recv = 1;
    op->info.length = bytes;
    if (consume != NULL) {
        op->consume = consume;
        op->consume_arg = arg;
        buf = op; /* the generic datatype's state; its packed size is op->bytes */
        count = 1;
        datatype = ucx->consume_dt;
    }
    param.op_attr_mask =
        UCP_OP_ATTR_FIELD_REQUEST | UCP_OP_ATTR_FIELD_RECV_INFO | UCP_OP_ATTR_FIELD_DATATYPE;
    param.request = op;
    param.datatype = datatype;
    param.recv_info.tag_info = &op->info;
    if (datatype == ucp_dt_make_contig(1) && tnt_ucx_in_staging(ucx, buf, bytes)) {
        param.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
        param.memh = ucx->staging_memh;
    }
    tnt_ucx_start(op, ucp_tag_recv_nbx(ucx->worker, buf, count, tnt_ucx_wire_tag(ucx, tag),
                                       UINT64_MAX, &param));
    *op_p = op;
    return TNT_OK;
}

tnt_status_t tnt_ucx_isend(tnt_ucx_t *ucx, int peer, uint64_t tag, const void *buf, size_t bytes,
                           tnt_ucx_op_t **op_p)
{
    return tnt_ucx_post_send(ucx, peer, tag, buf, bytes, bytes, ucp_dt_make_contig(1), 0, op_p);
}

tnt_status_t tnt_ucx_isend_sync(tnt_ucx_t *ucx, int peer, uint64_t tag, const void *buf,
                                size_t bytes, tnt_ucx_op_t **op_p)
{
    return tnt_ucx_post_send(ucx, peer, tag, buf, bytes, bytes, ucp_dt_make_contig(1), 1, op_p);
}

tnt_status_t tnt_ucx_irecv(tnt_ucx_t *ucx, int peer, uint64_t tag, void *buf, size_t bytes,
                           tnt_ucx_op_t **op_p)
{
    return tnt_ucx_post_recv(ucx, peer, tag, buf, bytes, bytes, ucp_dt_make_contig(1), NULL, NULL,
                             op_p);
}

tnt_status_t tnt_ucx_irecv_consume(tnt_ucx_t *ucx, int peer, uint64_t tag, size_t bytes,
                                   tnt_ucx_consume_fn consume, void *arg, tnt_ucx_op_t **op_p)
{
    return tnt_ucx_post_recv(ucx, peer, tag, NULL, 0, bytes, ucp_dt_make_contig(1), consume, arg,
                             op_p);
}

tnt_status_t tnt_ucx_isendv(tnt_ucx_t *ucx, int peer, uint64_t tag, const tnt_ucx_iov_t *iov,
                            size_t iovcnt, tnt_ucx_op_t **op_p)
{
    return tnt_ucx_post_send(ucx, peer, tag, iov, iovcnt, tnt_ucx_iov_bytes(iov, iovcnt),
                             ucp_dt_make_iov(), 0, op_p);
}

tnt_status_t tnt_ucx_irecvv(tnt_ucx_t *ucx, int peer, uint64_t tag, tnt_ucx_iov_t *iov,
                            size_t iovcnt, tnt_ucx_op_t **op_p)
{
    return tnt_ucx_post_recv(ucx, peer, tag, iov, iovcnt, tnt_ucx_iov_bytes(iov, iovcnt),
                             ucp_dt_make_iov(), NULL, NULL, op_p);
}

/* The tag's rank field, which an any-source receive leaves out of the
 * match. The wire form xors it with the cookie's key (tnt_ucx_wire_tag),
 * which changes no bit outside it, so the mask applies to wire tags too. */
#define TNT_UCX_TAG_ANY_RANK_MASK (~((uint64_t)(TNT_UCX_MAX_RANKS - 1) << TNT_UCX_TAG_STEP_BITS))

tnt_status_t tnt_ucx_irecv_from(tnt_ucx_t *ucx, int peer, uint64_t tag, void *buf, size_t bytes,
                                const tnt_ucx_flag_t *flag, tnt_ucx_recv_result_t *result,
                                tnt_ucx_op_t **op_p)
{
    uint64_t mask = peer >= 0 ? UINT64_MAX : TNT_UCX_TAG_ANY_RANK_MASK;
    ucp_request_param_t param;
    struct tnt_ucx_op *op = NULL;
    tnt_status_t status;

    if (peer >= 0) {
        status = tnt_ucx_op_acquire(ucx, peer, bytes, &op);
    } else if (ucx->failed != TNT_OK) {
        status = tnt_error_set(ucx->failed, "ucx: the job already failed (see the first error)");
    } else if ((op = tnt_ucx_pool_get(ucx)) == NULL) {
        ucx->failed = TNT_ERR_TRANSPORT;
        status = tnt_error_raise(TNT_ERR_TRANSPORT, "ucx: more than %d operations in flight",
                                 TNT_UCX_POOL_SLOTS);
    } else {
        op->peer = -1;
        op->bytes = bytes;
        op->consume = NULL;
        op->consume_arg = NULL;
        status = TNT_OK;
    }
    if (status != TNT_OK) {
        return status;
    }
    op->is_recv = 1;
    op->result = result;
    op->info.length = 0;
    /* UCX 1.13 leaves the receive info unwritten when a receive with a
     * request of ours completes at once (an unexpected message already
     * here), so the receive always completes through the request, whose
     * test fills in sender and length. */
    param.op_attr_mask = UCP_OP_ATTR_FIELD_REQUEST | UCP_OP_ATTR_FIELD_RECV_INFO |
                         UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    param.request = op;
    param.datatype = ucp_dt_make_contig(1);
    param.recv_info.tag_info = &op->info;
    if (flag != NULL && flag->bits != 0) {
        /* The flag bits match anything: the wire form only xors them. */
        op->flag = *flag;
        mask &= ~(uint64_t)(flag->bits & ((1u << TNT_UCX_TAG_STEP_BITS) - 1));
        param.op_attr_mask |= UCP_OP_ATTR_FIELD_CALLBACK;
        param.cb.recv = tnt_ucx_flagged_done;
    }
    tnt_ucx_start(op, ucp_tag_recv_nbx(ucx->worker, buf, bytes, tnt_ucx_wire_tag(ucx, tag), mask,
                                       &param));
    *op_p = op;
    return TNT_OK;
}
