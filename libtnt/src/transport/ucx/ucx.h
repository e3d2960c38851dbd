/*
 * UCX transport between ranks on different nodes (UCP tag matching).
 *
 * One UCP context and one worker per rank. Worker addresses are exchanged
 * through the bootstrap (tnt_boot_allgather), never through a side channel.
 * Endpoints use UCP_ERR_HANDLING_MODE_PEER: when a peer dies, UCX reports an
 * error on its endpoint, the error callback marks the peer failed, and every
 * pending or later operation involving it completes with TNT_ERR_PEER_FAILED
 * instead of hanging. The first failure force-closes all endpoints of this
 * rank, so the failure cascades to the rest of the job within milliseconds
 * rather than after TNT_TIMEOUT.
 *
 * The same code runs over InfiniBand/RoCE (UCX picks rc/dc/ud and zero-copy
 * RDMA for large messages) and over TCP (what this machine has).
 *
 * Data path: tnt_ucx_isend/irecv never allocate. UCP requests live in a pool
 * preallocated at create time (ucp_request_param_t.request, user-provided
 * request memory); the staging area that collectives receive into is
 * registered once with ucp_mem_map and handed to UCX with its memh; user
 * buffers go through UCX's own registration cache. Completion is driven by
 * ucp_worker_progress with the backing-off, TNT_TIMEOUT-bounded waits of
 * util/wait.h.
 *
 * Threading: one thread at a time (the caller for blocking collectives, the
 * progress thread for posted ones); the worker is created SERIALIZED.
 */
#ifndef TNT_TRANSPORT_UCX_H
#define TNT_TRANSPORT_UCX_H

#include <tnt/tnt.h>
#include <stddef.h>
#include <stdint.h>

#include "boot/boot.h"
#include "util/watch.h"

typedef struct tnt_ucx tnt_ucx_t;
/* A posted send or receive: a slot of the preallocated request pool. */
typedef struct tnt_ucx_op tnt_ucx_op_t;
/* Ops in flight at once. Collectives keep at most 2 * pipeline depth plus a
 * few; the wire-up handshake batches to stay under it; point-to-point
 * operations hold at most two each, and at most TNT_P2P_MAX_IN_FLIGHT of
 * them are in flight (p2p/p2p.h). */
#define TNT_UCX_POOL_SLOTS 256

typedef struct {
    tnt_boot_t *boot; /* for the address exchange (collective) */
    int rank;
    int size;
    /* size entries (or NULL): nonzero for ranks this rank connects to at
     * create, with the wire-up handshake. Every rank must pass a symmetric
     * relation. Any other rank is connected on first use (a send to it or
     * a receive from it). */
    const unsigned char *connect;
    /* How many peers this rank is expected to talk to (UCX's
     * estimated_num_eps); 0: size. */
    size_t estimated_peers;
    double timeout_s;     /* TNT_TIMEOUT, bounds every wait; 0 = none */
    size_t staging_bytes; /* registered staging area (tnt_ucx_staging) */
    uint64_t spin_us;     /* busy-poll this long before yielding (0: no) */
    uint64_t yield_us;    /* then poll with sched_yield this long before blocking */
    size_t tcp_seg_bytes; /* UCX's TCP segment size (ucx_config.c); 0: UCX's default */
    /* Nonzero: leave UCX's posix transport out, unless UCX_TLS says
     * otherwise (ucx_config.c says why). */
    int avoid_dev_shm;
    /* The hang doctor: polled from slow waits, and then it, not timeout_s,
     * decides when a wait fails (util/watch.h). NULL: timeout_s does. */
    tnt_watch_t *watch;
    /* Nonzero: this rank may send to and receive from itself (an endpoint
     * to its own worker, through UCX's self transport). The point-to-point
     * transport allows it; collectives never talk to themselves. */
    int self_ok;
    /* size entries (or NULL): nonzero for ranks on this rank's host. Their
     * endpoints go without UCX's peer-failure handling, which in UCX 1.13
     * rules out its shared-memory transports (it would pick TCP over
     * loopback, ten times slower for small messages); peer_alive(arg,
     * rank), asked every 10 ms of a wait, tells a dead one instead. */
    const unsigned char *local;
    int (*peer_alive)(void *arg, int rank);
    void *alive_arg;
} tnt_ucx_params_t;

/* Collective over all ranks (calls tnt_boot_allgather twice, even on ranks
 * that connect to nobody). Creates context, worker and the endpoints in
 * params.connect, and wires those up with a handshake so that transport
 * selection and connection errors show up here and not in the first
 * collective. */
tnt_status_t tnt_ucx_create(const tnt_ucx_params_t *params, tnt_ucx_t **ucx_p);
/* Closes endpoints (flushing them unless the job already failed) and frees
 * everything. NULL is a no-op. Not collective, but peers still sending to
 * this rank may see an error, so callers end with a barrier first. */
void tnt_ucx_destroy(tnt_ucx_t *ucx);

/* The registered staging area (params.staging_bytes, 64-byte aligned). */
void *tnt_ucx_staging(tnt_ucx_t *ucx, size_t *bytes_p);

/* Tags: collectives build them with tnt_ucx_tag(); the source rank is part of
 * the tag, so a receive matches exactly one peer's message. seq is the
 * collective's sequence number (wraps below 2^24, safe because collectives
 * complete in order), step distinguishes messages within one collective.
 * The transport mixes the communicator's cookie into every such tag before
 * it goes on the wire (ucx_impl.h), so a process outside the communicator
 * cannot send into a posted receive. */
uint64_t tnt_ucx_tag(uint32_t seq, int src_rank, uint32_t step);

/* Nonblocking, allocation-free. On success *op_p is a pool slot that the
 * caller must pass to tnt_ucx_wait / tnt_ucx_waitall exactly once. Returns
 * TNT_ERR_PEER_FAILED at once when the peer is already known dead,
 * TNT_ERR_TRANSPORT when the pool is exhausted (a bug: collectives keep a
 * bounded number in flight). A receive must get exactly `bytes` bytes. */
tnt_status_t tnt_ucx_isend(tnt_ucx_t *ucx, int peer, uint64_t tag, const void *buf, size_t bytes,
                           tnt_ucx_op_t **op_p);
tnt_status_t tnt_ucx_irecv(tnt_ucx_t *ucx, int peer, uint64_t tag, void *buf, size_t bytes,
                           tnt_ucx_op_t **op_p);

/* A receive that hands the message over as UCX delivers it instead of into a
 * buffer: consume(arg, offset, data, length) runs during progress (inside
 * tnt_ucx_waitall), once per fragment, with data in UCX's
 * own receive buffer and valid only during the call. On success the calls
 * cover [0, bytes) exactly once, in any order, and none comes after the op
 * finished; on an error some may be missing. This saves the copy out of
 * UCX's buffers for data that is only read once, such as a partial sum that
 * is reduced on arrival (coll/multinode/arrival.c). UCX receives into a
 * generic datatype here, so it never uses a zero-copy (RDMA, CMA)
 * rendezvous for these: worth it only where its rendezvous copies anyway
 * (tnt_ucx_peer_tcp_only). */
typedef void (*tnt_ucx_consume_fn)(void *arg, size_t offset, const void *data, size_t length);
tnt_status_t tnt_ucx_irecv_consume(tnt_ucx_t *ucx, int peer, uint64_t tag, size_t bytes,
                                   tnt_ucx_consume_fn consume, void *arg, tnt_ucx_op_t **op_p);

/* Gather/scatter forms: one message made of several pieces (same layout as
 * UCX's ucp_dt_iov_t). The iov array must stay valid until the op is
 * reaped. Used by the allgather, whose node blocks are not contiguous. */
typedef struct {
    void *buf;
    size_t bytes;
} tnt_ucx_iov_t;
tnt_status_t tnt_ucx_isendv(tnt_ucx_t *ucx, int peer, uint64_t tag, const tnt_ucx_iov_t *iov,
                            size_t iovcnt, tnt_ucx_op_t **op_p);
tnt_status_t tnt_ucx_irecvv(tnt_ucx_t *ucx, int peer, uint64_t tag, tnt_ucx_iov_t *iov,
                            size_t iovcnt, tnt_ucx_op_t **op_p);

/* Waits for all n ops (NULL entries are skipped and every entry is set to
 * NULL), progressing the worker with backoff. what names the collective in
 * error messages ("allreduce #12 (ring)"). On an error, ops that did not
 * finish are cancelled and reaped before returning, so their buffers are no
 * longer touched by UCX. */
tnt_status_t tnt_ucx_waitall(tnt_ucx_t *ucx, tnt_ucx_op_t **ops, int n, const char *what);
tnt_status_t tnt_ucx_wait(tnt_ucx_t *ucx, tnt_ucx_op_t **op, const char *what);

/* What an error names, made only when an error needs it: text, or, where
 * text is NULL, what describe(arg) returns. A point-to-point message
 * names itself this way (p2p/p2p.c), because formatting its name on every
 * message cost about a third of a small message's time on one host. */
typedef struct {
    const char *text;
    const char *(*describe)(void *arg);
    void *arg;
} tnt_ucx_what_t;

static inline const char *tnt_ucx_what_text(const tnt_ucx_what_t *what)
{
    return what->text != NULL ? what->text : what->describe(what->arg);
}

/* The caller found that the transport cannot go on (a peer on this host
 * died while this rank read its memory, p2p/p2p_ucx.c): fails it as its
 * own waits do, so that later calls fail at once and destroy waits for no
 * goodbye. status is what later calls report. */
void tnt_ucx_fail(tnt_ucx_t *ucx, tnt_status_t status);

/* tnt_ucx_wait naming the op through what. */
tnt_status_t tnt_ucx_wait_what(tnt_ucx_t *ucx, tnt_ucx_op_t **op, const tnt_ucx_what_t *what);

/* Blocking exchange with two peers (either may be -1 to skip). */
tnt_status_t tnt_ucx_sendrecv(tnt_ucx_t *ucx, int dst, uint64_t send_tag, const void *sendbuf,
                              size_t send_bytes, int src, uint64_t recv_tag, void *recvbuf,
                              size_t recv_bytes, const char *what);

/* Point-to-point messages (p2p/p2p.c) use a transport of their own, with
 * the same tag layout, and these forms:
 *
 * isend_sync completes only once the receiver has matched the message
 * (UCX's synchronous tag send), so a send nobody receives times out like a
 * receive nobody sends to, whatever its size.
 *
 * irecv_from receives at most bytes from peer, or from any rank when peer
 * < 0 (the tag's rank field is then ignored in matching). On success
 * *result says who sent it and how long it was; the transport connects
 * back to an any-source sender, so that both sides of the pair hold an
 * endpoint. A longer message fails the receive with TNT_ERR_MISMATCH but
 * leaves the transport usable.
 *
 * flag (or NULL) lets a sender mark a message: flag->bits are bits of the
 * tag's step field that take no part in matching. When a message with any
 * of them set completes the receive, truncated or not, flag->fn(flag->arg,
 * source, bytes, truncated) runs once, in the order the receives matched,
 * from the next test or wait of this transport (whichever op it waits for:
 * a wait for one message moves another's on), outside UCX's callbacks, so
 * it may post sends, and before the op is reaped. bytes is the message's
 * length, truncated nonzero when it did not fit. The point-to-point
 * transport marks its read descriptors so (p2p/p2p_ucx.c). */
typedef struct {
    int source;
    size_t bytes;
} tnt_ucx_recv_result_t;
typedef struct {
    uint32_t bits;
    void (*fn)(void *arg, int source, size_t bytes, int truncated);
    void *arg;
} tnt_ucx_flag_t;
tnt_status_t tnt_ucx_isend_sync(tnt_ucx_t *ucx, int peer, uint64_t tag, const void *buf,
                                size_t bytes, tnt_ucx_op_t **op_p);
tnt_status_t tnt_ucx_irecv_from(tnt_ucx_t *ucx, int peer, uint64_t tag, void *buf, size_t bytes,
                                const tnt_ucx_flag_t *flag, tnt_ucx_recv_result_t *result,
                                tnt_ucx_op_t **op_p);
/* One round of progress without blocking: TNT_IN_PROGRESS while *op_p
 * runs; otherwise *op_p is reaped (set to NULL) and its status returned.
 * Fails the op (cancelling it and failing the transport, as a wait would)
 * when its peer broke or left, or when the transport made no progress for
 * timeout_s since started_ns (tnt_time_ns) or since the last progress. */
tnt_status_t tnt_ucx_test(tnt_ucx_t *ucx, tnt_ucx_op_t **op_p, uint64_t started_ns,
                          const tnt_ucx_what_t *what);

/* Side messages for the hang doctor, in a tag range no collective uses, on
 * the thread that drives the worker. side_send sends at once or not at all
 * (0, or -1: skipped; buf is free on return either way). side_recv takes one
 * queued side message from any rank into buf, sets *sender_p to the rank
 * that sent it and returns its length (0: none); larger ones are
 * truncated. Every side message carries the communicator's cookie;
 * side_recv drops (and logs, at most every 10 s) those that do not, so what
 * it returns was sent by a rank of this communicator. At most
 * TNT_UCX_SIDE_MAX bytes. */
#define TNT_UCX_SIDE_MAX 8192
int tnt_ucx_side_send(tnt_ucx_t *ucx, int peer, const void *buf, size_t bytes);
size_t tnt_ucx_side_recv(tnt_ucx_t *ucx, void *buf, size_t bytes, int *sender_p);
/* Control messages (wire-up, goodbye, side messages) dropped so far because
 * they lacked the communicator's cookie or were malformed. */
uint64_t tnt_ucx_num_dropped(const tnt_ucx_t *ucx);

/* Diagnostics, checked by the tests to prove the inter-node path is UCX:
 * bytes sent / received through UCX so far, and the transports UCX selected
 * for the endpoint to peer (e.g. "tcp/eth0", "rc_mlx5/mlx5_0:1"; "" if
 * no endpoint). */
uint64_t tnt_ucx_bytes_sent(const tnt_ucx_t *ucx);
/* Endpoints created so far (at create and on first use), how many of them
 * a side message made first (the stall doctor's boards go to every rank
 * off the node, which no estimate covers), and the estimate UCX was given
 * for the algorithms' own. */
int tnt_ucx_num_endpoints(const tnt_ucx_t *ucx);
int tnt_ucx_num_side_endpoints(const tnt_ucx_t *ucx);
size_t tnt_ucx_estimated_endpoints(const tnt_ucx_t *ucx);
uint64_t tnt_ucx_bytes_received(const tnt_ucx_t *ucx);
const char *tnt_ucx_peer_transport(const tnt_ucx_t *ucx, int peer);
/* The message size from which UCX sends tagged messages to peer with its
 * rendezvous protocol, as UCX reports it for the endpoint (over TCP it
 * follows the segment size, TNT_UCX_TCP_SEG_KB); 0 if unknown. */
size_t tnt_ucx_peer_rndv_from(const tnt_ucx_t *ucx, int peer);
/* Of tnt_ucx_bytes_received: the bytes that went through consuming
 * receives (tnt_ucx_irecv_consume). */
uint64_t tnt_ucx_bytes_consumed(const tnt_ucx_t *ucx);
/* 1 when this rank has an endpoint to peer and every UCX lane of it is TCP,
 * where (with peer-failure handling) UCX's rendezvous lands in its own
 * buffers and is copied out of them; RDMA and shared-memory transports
 * deliver it zero-copy. tnt_ucx_transports_tcp_only decides it from a
 * tnt_ucx_peer_transport string ("tcp/eth0,tcp/ib0": 1; "rc_mlx5/mlx5_0:1":
 * 0; "": 0). */
int tnt_ucx_peer_tcp_only(const tnt_ucx_t *ucx, int peer);
int tnt_ucx_transports_tcp_only(const char *transports);
/* 1 when a UCX_TLS value (NULL: unset) lets UCX use its TCP transport:
 * unset, "all", a list naming "tcp" (a ":aux" suffix allowed), or a "^"
 * exclusion list that does not name it. */
int tnt_ucx_tls_includes_tcp(const char *tls);

#endif
