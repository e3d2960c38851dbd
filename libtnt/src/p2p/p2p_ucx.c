/*
 * Point-to-point messages over the communicator's own UCX transport, for
 * communicators of several ranks (p2p.h says why it is its own). Tags: a
 * user tag t of 0 .. INT_MAX goes into the transport's tag layout as
 * sequence t >> 19 (with the tag space above it) and step t & (2^19 - 1),
 * with the sender's rank in the rank field, so a receive from a named rank
 * matches that rank only and an any-source receive leaves the rank field
 * out. The transport keys every tag with this communicator's cookie.
 *
 * Large messages between ranks of a host are read by the receiver. UCX's
 * own rendezvous between processes of a host copies them with CMA too,
 * but measured 0.87-0.96x the bandwidth of OpenMPI from 2 MiB (which reads
 * the whole message with one process_vm_readv): docs/benchmarks.md,
 * "Point-to-point messages read by the receiver". So a message of
 * TNT_P2P_CMA_KB or more to a rank of this host, where every local rank
 * can read the others (tnt_shm_cma_usable), goes as a 24-byte descriptor
 * (magic, length, address) in the message's place: same tag, with step bit
 * 19 set, which no receive matches on, so it takes the message's place in
 * the order of matching too. The receiver that it completes reads the
 * whole message with one process_vm_readv straight into its buffer and
 * acknowledges, with an 8-byte message in the ack space of the message's
 * tag; the send is done when the acknowledgement has come.
 * - The receiver reads and acknowledges from the next test or wait of any
 *   message of the communicator (tnt_ucx_flag_t), as UCX moves its own
 *   rendezvous on: a rank that waits for a later message of the same peer
 *   must not leave the peer's send hanging.
 * - Acknowledgements carry no id: the receiver sends them in the order the
 *   descriptors matched, which for one sender and tag is the order they
 *   were sent, and the sender's receives for them match in the order
 *   posted, which is the same.
 * - Every descriptor that matched is acknowledged, also when the receive
 *   fails (a buffer too short, a read refused): otherwise the sender would
 *   wait for TNT_TIMEOUT and fail its whole transport. Only a sender that
 *   has exited (ESRCH) is not.
 * - The sender trusts nothing in the acknowledgement but its code, and the
 *   receiver reads with the pid the bootstrap gave for that rank, not one
 *   from the message; tags are keyed with the communicator's cookie, so
 *   only its ranks can send either.
 */
#include "p2p/p2p_impl.h"

#include "transport/shm.h"
#include "transport/ucx/ucx.h"
#include "util/log.h"
#include "util/settings.h"
#include "util/wait.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tnt_p2p_ucx {
    tnt_ucx_t *ucx;
    tnt_shm_t *shm;
    /* Messages of this size or more to a rank of this host are read by
     * the receiver; SIZE_MAX: none (TNT_P2P_CMA_KB=0, or no CMA). */
    size_t read_from;
    /* Operations posted and not yet finished: each holds at most two of
     * the transport's request slots (a read's acknowledgement is the
     * second), so at most half the pool may be in flight. */
    int in_flight;
};

#define P2P_TAG_STEP_BITS 19
/* Step bit 19 marks a read descriptor: the wire form only xors the step
 * field, so the bit survives it, and receives leave it out of matching. */
#define P2P_READ_FLAG   (1u << P2P_TAG_STEP_BITS)
/* A user tag's sequence part is below 2^12 (tags are below 2^31); the
 * space goes above it, well inside the 24-bit sequence field. */
#define P2P_SPACE_SHIFT 12
/* A read's acknowledgement goes in its message's space plus this. */
#define P2P_SPACE_ACK   4
_Static_assert(TNT_P2P_DEVICE_DATA < P2P_SPACE_ACK &&
                   ((uint32_t)(2 * P2P_SPACE_ACK) << P2P_SPACE_SHIFT) <= 0xFFFFFDu,
               "tag spaces and acknowledgement spaces fit the sequence field");

#define P2P_DESC_MAGIC 0x746e7452656164ull /* "tntRead" */
/* The acknowledgement's code: read (or the buffer was too short for the
 * message, which the receive reports; to the sender, as with UCX's own
 * protocols, the message was delivered), or not read. */
enum {
    P2P_ACK_READ = 1,
    P2P_ACK_TOO_LONG = 2,
    P2P_ACK_READ_FAILED = 3,
    P2P_ACK_REFUSED = 4,
};

static uint64_t p2p_tag(int tag, int source, int space, uint32_t flag)
{
    return tnt_ucx_tag(((uint32_t)tag >> P2P_TAG_STEP_BITS) | ((uint32_t)space << P2P_SPACE_SHIFT),
                       source, ((uint32_t)tag & (P2P_READ_FLAG - 1)) | flag);
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
    p2p->shm = comm->shm;
    p2p->read_from = comm->settings->p2p_cma_bytes > 0 && comm->shm != NULL &&
                             tnt_shm_cma_usable(comm->shm)
                         ? comm->settings->p2p_cma_bytes
                         : SIZE_MAX;
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

static const char *describe_op(void *op)
{
    return tnt_p2p_op_what(op);
}

/* The receiver's side of a read (tnt_ucx_flag_t.fn): a descriptor of bytes
 * B completed op's receive (truncated: op's buffer was shorter than it).
 * Reads the message into op's buffer and acknowledges, also when it cannot
 * read (see the top of the file); how it went is left in op for
 * p2p_finish. */
static void p2p_read(void *arg, int source, size_t bytes, int truncated)
{
    struct tnt_p2p_op *op = arg;
    struct tnt_p2p_ucx *p2p = op->transport;
    const tnt_comm_t *comm = op->comm;
    uint64_t desc[3] = { 0, 0, 0 };
    int code, err = 0;

    op->read = 1;
    op->read_bytes = 0;
    if (truncated) {
        code = P2P_ACK_TOO_LONG; /* the receive reports it (tnt_ucx_test) */
    } else if (bytes != sizeof(desc) || source == comm->rank ||
               comm->node_of_rank[source] != comm->node_id || p2p->shm == NULL ||
               !tnt_shm_cma_usable(p2p->shm)) {
        /* Not from this host, or CMA is off here (which the probe makes
         * the same on every rank of the host). TNT_P2P_CMA_KB is the
         * sender's alone: a rank that sends none still reads. */
        code = P2P_ACK_REFUSED;
    } else {
        memcpy(desc, op->buf, sizeof(desc));
        op->read_bytes = (size_t)desc[1];
        if (desc[0] != P2P_DESC_MAGIC) {
            code = P2P_ACK_REFUSED;
        } else if (desc[1] > op->bytes) {
            code = P2P_ACK_TOO_LONG;
        } else {
            err = tnt_shm_read_local(p2p->shm, comm->local_rank_of_rank[source], op->buf, desc[2],
                                     (size_t)desc[1]);
            code = err == 0 ? P2P_ACK_READ : P2P_ACK_READ_FAILED;
        }
    }
    /* The receiver keeps its answer where the sender receives it. */
    op->ack[0] = code;
    op->ack[1] = err;
    if (err == ESRCH) {
        return; /* the sender has exited: nobody waits for the answer */
    }
    /* An error here (the transport already failed) is the one the receive
     * reports: the transport's tests fail it from now on. */
    (void)tnt_ucx_isend(p2p->ucx, source,
                        p2p_tag(op->tag, comm->rank, op->space + P2P_SPACE_ACK, 0), op->ack,
                        sizeof(op->ack), &op->ops[1]);
}

/* A read's outcome, once op's requests are all reaped with status. */
static tnt_status_t p2p_read_status(struct tnt_p2p_op *op, tnt_status_t status)
{
    const tnt_comm_t *comm = op->comm;
    int peer = op->is_recv ? op->result.source : op->peer;
    int code = op->ack[0], err = op->ack[1];

    if (status != TNT_OK) {
        return status;
    }
    if (code == P2P_ACK_READ) {
        if (op->is_recv) {
            op->result.bytes = op->read_bytes;
        }
        return TNT_OK;
    }
    if (code == P2P_ACK_TOO_LONG && !op->is_recv) {
        return TNT_OK; /* delivered; the receiver reports its short buffer */
    }
    if (code == P2P_ACK_TOO_LONG) {
        return tnt_error_raise(TNT_ERR_MISMATCH,
                               "%s: the matching message (%zu B, from rank %d) is longer than "
                               "the %zu B buffer; pass a buffer as large as the largest message",
                               tnt_p2p_op_what(op), op->read_bytes, peer, op->bytes);
    }
    if (code == P2P_ACK_READ_FAILED && op->is_recv &&
        (err == ESRCH || !tnt_shm_local_alive(comm->shm, comm->local_rank_of_rank[peer]))) {
        tnt_ucx_fail(((struct tnt_p2p_ucx *)op->transport)->ucx, TNT_ERR_PEER_FAILED);
        return tnt_error_raise(TNT_ERR_PEER_FAILED,
                               "%s: rank %d on this host died while this rank read its message; "
                               "its own output (or the launcher's) names the cause",
                               tnt_p2p_op_what(op), peer);
    }
    if (code == P2P_ACK_READ_FAILED) {
        return tnt_error_raise(TNT_ERR_TRANSPORT,
                               "%s: %s of the message with process_vm_readv failed: %s; set "
                               "TNT_P2P_CMA_KB=0 to send large messages on a host through UCX",
                               tnt_p2p_op_what(op),
                               op->is_recv ? "this rank's read" : "the receiver's read",
                               strerror(err));
    }
    return tnt_error_raise(TNT_ERR_TRANSPORT,
                           "%s: rank %d %s (code %d); is every rank running the same libtnt?",
                           tnt_p2p_op_what(op), peer,
                           op->is_recv ? "sent a malformed read descriptor"
                                       : "answered a read descriptor with an unknown code",
                           code);
}

/* op's requests are all reaped, the first error being status. */
static tnt_status_t p2p_finish(struct tnt_p2p_ucx *p2p, struct tnt_p2p_op *op, tnt_status_t status)
{
    p2p->in_flight--;
    op->pending = 0;
    op->status = op->read ? p2p_read_status(op, status) : status;
    return op->status;
}

tnt_status_t tnt_p2p_ucx_post(tnt_comm_t *comm, struct tnt_p2p_ucx *p2p, struct tnt_p2p_op *op,
                              void *buf)
{
    tnt_ucx_t *ucx = p2p->ucx;
    int peer = op->peer, tag = op->tag;
    size_t bytes = op->bytes;
    tnt_status_t status;

    if (p2p->in_flight >= TNT_P2P_MAX_IN_FLIGHT) {
        /* The user's to fix, and nothing broke: not the transport's
         * pool-exhausted failure. */
        return tnt_error_raise(TNT_ERR_NO_MEMORY,
                               "%s: %d point-to-point operations are already in flight on "
                               "communicator %s; wait for some before posting more",
                               tnt_p2p_op_what(op), TNT_P2P_MAX_IN_FLIGHT, comm->name);
    }
    op->transport = p2p;
    op->buf = buf;
    op->posted_ns = tnt_time_ns();
    if (op->is_recv) {
        const tnt_ucx_flag_t flag = { .bits = P2P_READ_FLAG, .fn = p2p_read, .arg = op };
        status = tnt_ucx_irecv_from(ucx, peer, p2p_tag(tag, peer < 0 ? 0 : peer, op->space, 0), buf,
                                    bytes, &flag, &op->result, &op->ops[0]);
    } else if (bytes >= p2p->read_from && peer != comm->rank &&
               comm->node_of_rank[peer] == comm->node_id) {
        op->read = 1;
        op->desc[0] = P2P_DESC_MAGIC;
        op->desc[1] = bytes;
        op->desc[2] = (uint64_t)(uintptr_t)buf;
        op->ack[0] = 0;
        /* Both post or neither: the second cannot fail once the first
         * did not (same peer, a free slot kept for it, no progress in
         * between to break anything). */
        status = tnt_ucx_irecv(ucx, peer, p2p_tag(tag, peer, op->space + P2P_SPACE_ACK, 0),
                               op->ack, sizeof(op->ack), &op->ops[1]);
        if (status == TNT_OK) {
            status = tnt_ucx_isend_sync(ucx, peer, p2p_tag(tag, comm->rank, op->space, P2P_READ_FLAG),
                                        op->desc, sizeof(op->desc), &op->ops[0]);
        }
    } else {
        status = tnt_ucx_isend_sync(ucx, peer, p2p_tag(tag, comm->rank, op->space, 0), buf, bytes,
                                    &op->ops[0]);
    }
    if (status == TNT_OK) {
        p2p->in_flight++;
        op->pending = 1;
    }
    return status;
}

tnt_status_t tnt_p2p_ucx_test(struct tnt_p2p_ucx *p2p, struct tnt_p2p_op *op)
{
    if (!op->pending) {
        return op->status; /* already finished */
    }
    const tnt_ucx_what_t what = { .describe = describe_op, .arg = op };
    /* In order: reaping the message may start the acknowledgement. */
    for (int i = 0; i < 2; i++) {
        if (op->ops[i] != NULL) {
            tnt_status_t s = tnt_ucx_test(p2p->ucx, &op->ops[i], op->posted_ns, &what);
            if (s != TNT_IN_PROGRESS && s != TNT_OK && op->status == TNT_OK) {
                op->status = s;
            }
        }
    }
    if (op->ops[0] != NULL || op->ops[1] != NULL) {
        return TNT_IN_PROGRESS;
    }
    return p2p_finish(p2p, op, op->status);
}

tnt_status_t tnt_p2p_ucx_wait(struct tnt_p2p_ucx *p2p, struct tnt_p2p_op *op)
{
    if (!op->pending) {
        return op->status;
    }
    const tnt_ucx_what_t what = { .describe = describe_op, .arg = op };
    tnt_status_t status = op->status;
    /* One at a time, in order: reaping the message may start the
     * acknowledgement, and a wait for both would take a receive's
     * TNT_ERR_MISMATCH (a short buffer) for a failure and break the
     * transport to cancel the other. */
    for (int i = 0; i < 2; i++) {
        if (op->ops[i] != NULL) {
            tnt_status_t s = tnt_ucx_wait_what(p2p->ucx, &op->ops[i], &what);
            if (status == TNT_OK) {
                status = s;
            }
        }
    }
    return p2p_finish(p2p, op, status);
}
