/*
 * Which transport carries a communicator's point-to-point messages (p2p.h
 * says why): none when any rank set TNT_P2P=off, the in-process queue of p2p_self.c for
 * a one-rank communicator, its own UCX worker (p2p_ucx.c) otherwise. The
 * description of each call that errors name is made here, once for both.
 */
#include "p2p/p2p_impl.h"

#include "util/log.h"

#include <stdio.h>
#include <stdlib.h>

struct tnt_p2p {
    /* Exactly one is set, except in a build without UCX, where a
     * communicator of several ranks has neither (p2p_none.c). */
    struct tnt_p2p_ucx *ucx;
    struct tnt_p2p_self *self;
};

tnt_status_t tnt_p2p_create(tnt_comm_t *comm)
{
    comm->p2p = NULL;
    if (comm->p2p_off_rank >= 0) {
        tnt_log_debug("communicator %s: no point-to-point transport (TNT_P2P=off on rank %d)",
                      comm->name, comm->p2p_off_rank);
        return TNT_OK;
    }
    struct tnt_p2p *p2p = calloc(1, sizeof(*p2p));
    if (p2p == NULL) {
        return tnt_error_raise(TNT_ERR_NO_MEMORY, "tnt_init: out of memory");
    }
    tnt_status_t status = comm->size == 1 ? tnt_p2p_self_create(comm, &p2p->self)
                                          : tnt_p2p_ucx_create(comm, &p2p->ucx);
    if (status != TNT_OK) {
        free(p2p);
        return status;
    }
    comm->p2p = p2p;
    return TNT_OK;
}

void tnt_p2p_destroy(tnt_comm_t *comm)
{
    if (comm->p2p != NULL) {
        tnt_p2p_self_destroy(comm->p2p->self);
        tnt_p2p_ucx_destroy(comm->p2p->ucx);
        free(comm->p2p);
        comm->p2p = NULL;
    }
}

const char *tnt_p2p_op_what(struct tnt_p2p_op *op)
{
    if (op->what[0] == '\0') {
        char from[32];
        if (op->peer < 0) {
            snprintf(from, sizeof(from), "any rank");
        } else {
            snprintf(from, sizeof(from), "rank %d", op->peer);
        }
        snprintf(op->what, sizeof(op->what), "%s (%zu B, tag %d) %s %s on communicator %s, rank %d",
                 op->fn, op->bytes, op->tag, op->is_recv ? "from" : "to", from, op->comm->name,
                 op->comm->rank);
    }
    return op->what;
}

tnt_status_t tnt_p2p_post(tnt_comm_t *comm, struct tnt_p2p_op *op, int is_recv, void *buf,
                          size_t bytes, int peer, int tag, const char *fn)
{
    return tnt_p2p_post_in(comm, op, TNT_P2P_USER, is_recv, buf, bytes, peer, tag, fn);
}

tnt_status_t tnt_p2p_post_in(tnt_comm_t *comm, struct tnt_p2p_op *op, enum tnt_p2p_space space,
                             int is_recv, void *buf, size_t bytes, int peer, int tag,
                             const char *fn)
{
    op->ops[0] = op->ops[1] = NULL;
    op->read = 0;
    op->is_recv = is_recv;
    op->peer = peer;
    op->tag = tag;
    op->space = (int)space;
    op->bytes = bytes;
    op->posted_ns = 0;
    op->result.source = -1;
    op->result.bytes = 0;
    op->buf = NULL;
    op->next = NULL;
    op->pending = 0;
    op->status = TNT_OK;
    op->comm = comm;
    op->fn = fn;
    op->what[0] = '\0';
    if (comm->p2p == NULL) {
        return tnt_error_raise(TNT_ERR_UNSUPPORTED,
                               "%s: communicator %s has no point-to-point messages: its rank %d "
                               "had TNT_P2P=off when it (or the communicator it was split from) "
                               "was made; unset TNT_P2P, or set TNT_P2P=on, on every rank before "
                               "tnt_init or tnt_comm_create_oob",
                               tnt_p2p_op_what(op), comm->name, comm->p2p_off_rank);
    }
    if (comm->p2p->self != NULL) {
        return tnt_p2p_self_post(comm->p2p->self, op, buf);
    }
    return tnt_p2p_ucx_post(comm, comm->p2p->ucx, op, buf);
}

tnt_status_t tnt_p2p_test(tnt_comm_t *comm, struct tnt_p2p_op *op)
{
    if (comm->p2p == NULL) {
        return TNT_OK; /* nothing was posted */
    }
    return comm->p2p->self != NULL ? tnt_p2p_self_test(comm->p2p->self, op)
                                   : tnt_p2p_ucx_test(comm->p2p->ucx, op);
}

tnt_status_t tnt_p2p_wait(tnt_comm_t *comm, struct tnt_p2p_op *op)
{
    if (comm->p2p == NULL) {
        return TNT_OK;
    }
    return comm->p2p->self != NULL ? tnt_p2p_self_wait(comm->p2p->self, op)
                                   : tnt_p2p_ucx_wait(comm->p2p->ucx, op);
}
