/*
 * Point-to-point messages in a build without UCX (-DTNT_WITH_UCX=OFF):
 * communicators work as usual, a one-rank communicator's messages to
 * itself too (p2p_self.c), and tnt_send / tnt_recv between ranks fail with
 * a message that names the build option.
 */
#include "p2p/p2p_impl.h"

#include "util/log.h"

tnt_status_t tnt_p2p_ucx_create(tnt_comm_t *comm, struct tnt_p2p_ucx **ucx_p)
{
    (void)comm;
    *ucx_p = NULL;
    return TNT_OK;
}

void tnt_p2p_ucx_destroy(struct tnt_p2p_ucx *ucx)
{
    (void)ucx;
}

tnt_status_t tnt_p2p_ucx_post(tnt_comm_t *comm, struct tnt_p2p_ucx *ucx, struct tnt_p2p_op *op,
                              void *buf)
{
    (void)comm;
    (void)ucx;
    (void)buf;
    return tnt_error_raise(TNT_ERR_UNSUPPORTED,
                           "%s: libtnt was built without UCX (cmake -DTNT_WITH_UCX=ON, needs "
                           "libucx-dev), which carries point-to-point messages between ranks",
                           tnt_p2p_op_what(op));
}

tnt_status_t tnt_p2p_ucx_test(struct tnt_p2p_ucx *ucx, struct tnt_p2p_op *op)
{
    (void)ucx;
    (void)op;
    return TNT_OK;
}

tnt_status_t tnt_p2p_ucx_wait(struct tnt_p2p_ucx *ucx, struct tnt_p2p_op *op)
{
    (void)ucx;
    (void)op;
    return TNT_OK;
}
