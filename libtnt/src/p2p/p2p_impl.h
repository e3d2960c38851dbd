/*
 * Inside the point-to-point layer: p2p.c picks one of two transports per
 * communicator and hands each call to it (p2p.h says when which).
 *
 *   p2p_ucx.c   ranks of a communicator of several: its own UCX worker
 *               (p2p_none.c in builds without UCX: every call fails)
 *   p2p_self.c  a one-rank communicator: a matching queue in the process
 *
 * post gets peer, tag, bytes, is_recv, comm and fn already filled in (errors
 * name the op with tnt_p2p_op_what) and the arguments checked; test and
 * wait follow p2p.h's tnt_p2p_test and tnt_p2p_wait.
 */
#ifndef TNT_P2P_P2P_IMPL_H
#define TNT_P2P_P2P_IMPL_H

#include "p2p/p2p.h"

struct tnt_p2p_ucx;
struct tnt_p2p_self;

/* Collective over comm (two bootstrap allgathers). */
tnt_status_t tnt_p2p_ucx_create(tnt_comm_t *comm, struct tnt_p2p_ucx **ucx_p);
void tnt_p2p_ucx_destroy(struct tnt_p2p_ucx *ucx);
tnt_status_t tnt_p2p_ucx_post(tnt_comm_t *comm, struct tnt_p2p_ucx *ucx, struct tnt_p2p_op *op,
                              void *buf);
tnt_status_t tnt_p2p_ucx_test(struct tnt_p2p_ucx *ucx, struct tnt_p2p_op *op);
tnt_status_t tnt_p2p_ucx_wait(struct tnt_p2p_ucx *ucx, struct tnt_p2p_op *op);

/* Not collective, opens nothing: a lock, two queues. */
tnt_status_t tnt_p2p_self_create(tnt_comm_t *comm, struct tnt_p2p_self **self_p);
void tnt_p2p_self_destroy(struct tnt_p2p_self *self);
tnt_status_t tnt_p2p_self_post(struct tnt_p2p_self *self, struct tnt_p2p_op *op, void *buf);
tnt_status_t tnt_p2p_self_test(struct tnt_p2p_self *self, struct tnt_p2p_op *op);
tnt_status_t tnt_p2p_self_wait(struct tnt_p2p_self *self, struct tnt_p2p_op *op);

#endif
