/*
 * Point-to-point messages (tnt_send, tnt_recv and their posted forms).
 *
 * A communicator of several ranks carries them on a UCX transport of its
 * own, separate from the collectives' (p2p_ucx.c). Why a transport of its
 * own: collectives run one at a time in posting order (comm/comm.h), and a
 * receive may wait for as long as the program likes, so point-to-point
 * traffic cannot queue behind them or block them. A separate UCX worker
 * per communicator gives it its own tag space (no tag of a collective or
 * of another communicator can match, whatever the user's tag) and lets it
 * progress on whichever thread calls tnt_send, tnt_recv, tnt_test or
 * tnt_wait, beside the progress thread. UCX picks shared memory (its mm and
 * CMA transports) between ranks of a host and the network between hosts,
 * and brings tag matching with MPI's order; large messages between ranks
 * of a host are read by the receiver itself (p2p_ucx.c says why).
 *
 * That worker costs every communicator descriptors, memory and two
 * bootstrap allgathers at creation, whether or not it ever sends
 * (docs/c-api.md has the figures), so:
 * - a one-rank communicator makes none: its rank can only talk to itself,
 *   which a matching queue in the process does (p2p_self.c), with the same
 *   matching, ordering, truncation and TNT_TIMEOUT errors;
 * - TNT_P2P=off makes none on any communicator, and every point-to-point
 *   call fails with TNT_ERR_UNSUPPORTED naming the setting. The ranks agree
 *   on it in the layout exchange (core/init.c, comm->p2p_off_rank): one
 *   rank with off turns it off for all, since making the worker is
 *   collective.
 * Making the worker later, at a communicator's first message, would need an
 * address exchange that is not collective (the peer may be in a collective
 * or computing); libtnt has no such channel between nodes.
 *
 * Built with UCX (p2p_ucx.c); p2p_none.c fails the calls that would need it
 * otherwise.
 */
#ifndef TNT_P2P_P2P_H
#define TNT_P2P_P2P_H

#include "comm/comm.h"
#include "transport/ucx/ucx.h"

#include <stdint.h>

/* Collective over comm (two bootstrap allgathers) when comm has several
 * ranks and no rank set TNT_P2P=off; otherwise local and cheap. Sets
 * comm->p2p (NULL with TNT_P2P=off). */
tnt_status_t tnt_p2p_create(tnt_comm_t *comm);
/* Not collective, but waits (bounded) for the goodbyes of the peers this
 * rank exchanged messages with. NULL comm->p2p is a no-op. */
void tnt_p2p_destroy(tnt_comm_t *comm);

/* One send or receive in flight. Owned by the caller (the public request
 * embeds it); the transport's own requests sit in ops. */
struct tnt_p2p_op {
    /* p2p_ucx.c's requests: the message, or a read descriptor in its place,
     * and for a read its acknowledgement (received by the sender, sent by
     * the receiver). */
    tnt_ucx_op_t *ops[2];
    /* p2p_ucx.c's read between ranks of a host: the descriptor a sender
     * sends; the acknowledgement (code, errno), received by the sender or
     * sent by the receiver; and the length the descriptor gave. */
    uint64_t desc[3];
    int32_t ack[2];
    void *transport; /* the struct tnt_p2p_ucx that carries it */
    int read;        /* a descriptor took the message's place (sent, or received) */
    size_t read_bytes;
    int is_recv;
    int peer; /* TNT_ANY_SOURCE for an any-source receive */
    int tag;
    int space; /* enum tnt_p2p_space: a receive matches messages of its own space only */
    size_t bytes;
    uint64_t posted_ns;
    tnt_ucx_recv_result_t result; /* set when a receive succeeded */
    /* What errors name: "tnt_send (8 B, tag 77) to rank 1 on communicator
     * world, rank 0", made from these by tnt_p2p_op_what at the first
     * error (empty until then): formatting it for every message cost about
     * a third of a small message's time between two ranks of a host. */
    const tnt_comm_t *comm;
    const char *fn;
    char what[160];
    /* The in-process path of a one-rank communicator (p2p_self.c), under
     * its lock: the buffer, the link in its queue of unmatched operations,
     * and whether it is still to be matched (pending) or its outcome. */
    void *buf;
    struct tnt_p2p_op *next;
    int pending;
    tnt_status_t status;
};

/* Point-to-point operations that may be in flight on one communicator:
 * half the UCX transport's request pool, since an operation holds up to
 * two of its requests (p2p_ucx.c); the one-rank queue keeps the same limit. */
#define TNT_P2P_MAX_IN_FLIGHT (TNT_UCX_POOL_SLOTS / 2)

/* Tag spaces: the user's messages (tnt_send / tnt_recv) and, apart from
 * them, those of tnt_send_device / tnt_recv_device (gpu/device.c): an
 * envelope with the length, the receiver's reply, and the host-staged
 * payload. A receive in one space never matches a message of another, so
 * a host receive cannot swallow a device message's envelope whatever the
 * tags. */
enum tnt_p2p_space {
    TNT_P2P_USER = 0,
    TNT_P2P_DEVICE_ENVELOPE = 1,
    TNT_P2P_DEVICE_REPLY = 2,
    TNT_P2P_DEVICE_DATA = 3,
};

/* Starts a send (is_recv 0) or a receive; arguments already checked by
 * core/api_p2p.c. */
tnt_status_t tnt_p2p_post(tnt_comm_t *comm, struct tnt_p2p_op *op, int is_recv, void *buf,
                          size_t bytes, int peer, int tag, const char *fn);
/* The same in a given space (tnt_p2p_post is TNT_P2P_USER). */
tnt_status_t tnt_p2p_post_in(tnt_comm_t *comm, struct tnt_p2p_op *op, enum tnt_p2p_space space,
                             int is_recv, void *buf, size_t bytes, int peer, int tag,
                             const char *fn);
/* The name of op for an error message (see struct tnt_p2p_op). */
const char *tnt_p2p_op_what(struct tnt_p2p_op *op);
/* TNT_IN_PROGRESS while it runs, else its final status (once). */
tnt_status_t tnt_p2p_test(tnt_comm_t *comm, struct tnt_p2p_op *op);
/* Blocks (with back-off, bounded by TNT_TIMEOUT without progress). */
tnt_status_t tnt_p2p_wait(tnt_comm_t *comm, struct tnt_p2p_op *op);

#endif
