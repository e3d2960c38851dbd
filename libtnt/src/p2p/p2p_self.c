/*
 * Point-to-point messages on a one-rank communicator: the rank can only
 * talk to itself, so a matching queue in the process replaces the UCX
 * worker (p2p.h says why that matters: the worker costs descriptors,
 * memory and a collective exchange at every communicator's creation).
 *
 * What a user sees is what the UCX transport gives (p2p_ucx.c,
 * transport/ucx/ucx_wait.c): a receive takes the first unmatched message
 * with its tag, in the order sent; a send is done only once a receive has
 * taken it (synchronous, as MPI_Ssend), so its buffer is read at the match
 * and never copied aside; a message longer than the buffer fails the
 * receive with TNT_ERR_MISMATCH and is lost; an operation that nothing
 * matched within TNT_TIMEOUT of its post or of the last match fails with
 * TNT_ERR_TIMEOUT and the same words, and after that every call fails at
 * once. At most TNT_P2P_MAX_IN_FLIGHT operations wait unmatched, as on UCX.
 *
 * Both queues hold operations in posting order; an operation is in one of
 * them while pending. The lock is for safety only: point-to-point calls on
 * a communicator come from one thread at a time (docs/c-api.md).
 */
#include "p2p/p2p_impl.h"

#include "util/log.h"
#include "util/wait.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct tnt_p2p_self {
    pthread_mutex_t lock;
    struct tnt_p2p_op *sends; /* unmatched sends, oldest first */
    struct tnt_p2p_op *recvs; /* unmatched receives, oldest first */
    int pending;              /* operations in the two queues */
    int rank;
    double timeout_s;       /* TNT_TIMEOUT; 0 = none */
    uint64_t last_match_ns; /* the last match: "progress" for the timeout */
    tnt_status_t failed;    /* set by the first timeout; then every call fails */
};

tnt_status_t tnt_p2p_self_create(tnt_comm_t *comm, struct tnt_p2p_self **self_p)
{
    struct tnt_p2p_self *self = calloc(1, sizeof(*self));
    if (self == NULL) {
        return tnt_error_raise(TNT_ERR_NO_MEMORY, "tnt_init: out of memory");
    }
    pthread_mutex_init(&self->lock, NULL);
    self->rank = comm->rank;
    self->timeout_s = comm->timeout_s;
    self->failed = TNT_OK;
    *self_p = self;
    return TNT_OK;
}

void tnt_p2p_self_destroy(struct tnt_p2p_self *self)
{
    if (self != NULL) {
        /* Operations still queued belong to requests nobody waited for. */
        pthread_mutex_destroy(&self->lock);
        free(self);
    }
}

static void queue_append(struct tnt_p2p_op **head, struct tnt_p2p_op *op)
{
    struct tnt_p2p_op **p = head;
    while (*p != NULL) {
        p = &(*p)->next;
    }
    op->next = NULL;
    *p = op;
}

static void queue_remove(struct tnt_p2p_op **head, struct tnt_p2p_op *op)
{
    for (struct tnt_p2p_op **p = head; *p != NULL; p = &(*p)->next) {
        if (*p == op) {
            *p = op->next;
            op->next = NULL;
            return;
        }
    }
}

/* The oldest operation in the queue with this tag in this space (every
 * peer is this rank, and an any-source receive matches it too). */
static struct tnt_p2p_op *queue_take(struct tnt_p2p_op **head, int tag, int space)
{
    for (struct tnt_p2p_op **p = head; *p != NULL; p = &(*p)->next) {
        if ((*p)->tag == tag && (*p)->space == space) {
            struct tnt_p2p_op *op = *p;
            *p = op->next;
            op->next = NULL;
            return op;
        }
    }
    return NULL;
}

/* Hands the send's message to the receive; both are done. The receive's
 * error is raised when it is reaped, on the thread that tests or waits. */
static void deliver(struct tnt_p2p_self *self, struct tnt_p2p_op *send, struct tnt_p2p_op *recv)
{
    if (send->bytes > recv->bytes) {
        recv->status = TNT_ERR_MISMATCH; /* the message is lost, as on UCX */
    } else {
        if (send->bytes > 0) {
            memcpy(recv->buf, send->buf, send->bytes);
        }
        recv->result.source = self->rank;
        recv->result.bytes = send->bytes;
        recv->status = TNT_OK;
    }
    send->status = TNT_OK;
    send->pending = 0;
    recv->pending = 0;
    self->last_match_ns = tnt_time_ns();
}

tnt_status_t tnt_p2p_self_post(struct tnt_p2p_self *self, struct tnt_p2p_op *op, void *buf)
{
    tnt_status_t failed;

    op->buf = buf;
    op->posted_ns = tnt_time_ns();
    pthread_mutex_lock(&self->lock);
    failed = self->failed;
    if (failed == TNT_OK && self->pending >= TNT_P2P_MAX_IN_FLIGHT) {
        pthread_mutex_unlock(&self->lock);
        return tnt_error_raise(TNT_ERR_NO_MEMORY,
                               "%s: %d point-to-point operations are already in flight; wait "
                               "for some before posting more",
                               tnt_p2p_op_what(op), TNT_P2P_MAX_IN_FLIGHT);
    }
    if (failed == TNT_OK) {
        struct tnt_p2p_op *match =
            queue_take(op->is_recv ? &self->sends : &self->recvs, op->tag, op->space);
        if (match != NULL) {
            self->pending--;
            deliver(self, op->is_recv ? match : op, op->is_recv ? op : match);
        } else {
            op->pending = 1;
            queue_append(op->is_recv ? &self->recvs : &self->sends, op);
            self->pending++;
        }
    }
    pthread_mutex_unlock(&self->lock);
    if (failed != TNT_OK) {
        return tnt_error_set(failed,
                             "%s: point-to-point messages on this communicator failed earlier "
                             "(see the first error)",
                             tnt_p2p_op_what(op));
    }
    return TNT_OK;
}

/* The words of transport/ucx/ucx_wait.c's timeout, so that a one-rank
 * communicator reads like any other. */
static tnt_status_t timed_out(const struct tnt_p2p_self *self, struct tnt_p2p_op *op)
{
    if (op->is_recv && op->peer < 0) {
        return tnt_error_raise(TNT_ERR_TIMEOUT,
                               "%s: no rank sent a matching message within %g s; see TNT_TIMEOUT",
                               tnt_p2p_op_what(op), self->timeout_s);
    }
    if (op->is_recv) {
        return tnt_error_raise(TNT_ERR_TIMEOUT,
                               "%s: rank %d sent no matching message within %g s; is it still "
                               "running, and does it send with this tag? see TNT_TIMEOUT",
                               tnt_p2p_op_what(op), op->peer, self->timeout_s);
    }
    return tnt_error_raise(TNT_ERR_TIMEOUT,
                           "%s: rank %d posted no matching receive within %g s; is it still "
                           "running, and does it receive with this tag? see TNT_TIMEOUT",
                           tnt_p2p_op_what(op), op->peer, self->timeout_s);
}

tnt_status_t tnt_p2p_self_test(struct tnt_p2p_self *self, struct tnt_p2p_op *op)
{
    enum { DONE, WAITING, TIMED_OUT, FAILED } outcome = DONE;
    tnt_status_t failed;

    pthread_mutex_lock(&self->lock);
    failed = self->failed;
    if (op->pending) {
        uint64_t now = tnt_time_ns();
        uint64_t since = op->posted_ns > self->last_match_ns ? op->posted_ns : self->last_match_ns;
        outcome = WAITING;
        if (failed != TNT_OK) {
            outcome = FAILED;
        } else if (self->timeout_s > 0 && (double)(now - since) >= self->timeout_s * 1e9) {
            outcome = TIMED_OUT;
            self->failed = TNT_ERR_TIMEOUT;
        }
        if (outcome != WAITING) {
            queue_remove(op->is_recv ? &self->recvs : &self->sends, op);
            self->pending--;
            op->pending = 0;
        }
    }
    pthread_mutex_unlock(&self->lock);

    switch (outcome) {
    case WAITING:
        return TNT_IN_PROGRESS;
    case TIMED_OUT:
        return timed_out(self, op);
    case FAILED:
        return tnt_error_set(failed,
                             "%s: point-to-point messages on this communicator failed earlier "
                             "(see the first error)",
                             tnt_p2p_op_what(op));
    case DONE:
        break;
    }
    if (op->status == TNT_ERR_MISMATCH) {
        return tnt_error_raise(TNT_ERR_MISMATCH,
                               "%s: the matching message is longer than the %zu B buffer; pass a "
                               "buffer as large as the largest message",
                               tnt_p2p_op_what(op), op->bytes);
    }
    return op->status;
}

tnt_status_t tnt_p2p_self_wait(struct tnt_p2p_self *self, struct tnt_p2p_op *op)
{
    tnt_backoff_t backoff;
    tnt_status_t status;

    /* No deadline of its own: test times the operation out. */
    tnt_backoff_init(&backoff, 0);
    while ((status = tnt_p2p_self_test(self, op)) == TNT_IN_PROGRESS) {
        (void)tnt_backoff_wait(&backoff);
    }
    return status;
}
