/*
 * Point-to-point messages in a build without UCX (-DTNT_WITH_UCX=OFF):
 * communicators work as usual, and tnt_send / tnt_recv fail with a message
 * that names the build option.
 */
#include "p2p/p2p.h"

#include "util/log.h"

tnt_status_t tnt_p2p_create(tnt_comm_t *comm)
{
    comm->p2p = NULL;
    return TNT_OK;
}

void tnt_p2p_destroy(tnt_comm_t *comm)
{
    (void)comm;
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
    (void)comm;
    (void)space;
    (void)is_recv;
    (void)buf;
    (void)bytes;
    (void)peer;
    (void)tag;
    op->op = NULL;
    return tnt_error_raise(TNT_ERR_UNSUPPORTED,
                           "%s: libtnt was built without UCX (cmake -DTNT_WITH_UCX=ON, needs "
                           "libucx-dev), which carries point-to-point messages",
                           fn);
}

tnt_status_t tnt_p2p_test(tnt_comm_t *comm, struct tnt_p2p_op *op)
{
    (void)comm;
    (void)op;
    return TNT_OK;
}

tnt_status_t tnt_p2p_wait(tnt_comm_t *comm, struct tnt_p2p_op *op)
{
    (void)comm;
    (void)op;
    return TNT_OK;
}
