/*
 * The UCX transport's private header: its constants, the transport and
 * request structures, and what its files share. The files:
 *   ucx_config.c  transport selection and UCX configuration (pure helpers)
 *   ucx_wireup.c  create/destroy: context, worker, endpoints, handshakes
 *   ucx.c         the data path: request pool, posting sends and receives
 *   ucx_wait.c    waits, failure handling and the hang doctor's side channel
 */
#ifndef TNT_TRANSPORT_UCX_UCX_IMPL_H
#define TNT_TRANSPORT_UCX_UCX_IMPL_H

#include "transport/ucx/ucx.h"

#include "util/wait.h"

#include <ucp/api/ucp.h>

#include <stddef.h>
#include <stdint.h>

/* Ops in flight at once. Collectives keep at most 2 * pipeline depth plus a
 * few; the wire-up handshake batches to stay under it. */
#define TNT_UCX_POOL_SLOTS 256
/* The tag layout: seq (24 bits) | source rank (20 bits) | step (20 bits). */
#define TNT_UCX_TAG_RANK_BITS 20
#define TNT_UCX_TAG_STEP_BITS 20
#define TNT_UCX_MAX_RANKS     (1 << TNT_UCX_TAG_RANK_BITS)
/* Side messages (the hang doctor's) use sequence field 2^24 - 1, which no
 * collective's tag has (tnt_ucx_tag), and step 0; any source matches. */
#define TNT_UCX_SIDE_SEQ 0xFFFFFFu
#define TNT_UCX_SIDE_TAG \
    ((uint64_t)TNT_UCX_SIDE_SEQ << (TNT_UCX_TAG_RANK_BITS + TNT_UCX_TAG_STEP_BITS))
#define TNT_UCX_SIDE_TAG_MASK                                                   \
    (((uint64_t)0xFFFFFFu << (TNT_UCX_TAG_RANK_BITS + TNT_UCX_TAG_STEP_BITS)) | \
     ((1ull << TNT_UCX_TAG_STEP_BITS) - 1))
/* Sequence numbers reserved for the wire-up and goodbye handshakes. */
#define TNT_UCX_SEQ_WIREUP    0xFFFFFFu
#define TNT_UCX_SEQ_GOODBYE   0xFFFFFEu
#define TNT_UCX_TRANSPORT_MAX 96

struct tnt_ucx_op {
    tnt_ucx_t *ucx;
    int peer;
    int is_recv;
    int in_use;
    int pending;         /* UCX still owns the request */
    size_t bytes;        /* expected size of a receive */
    ucs_status_t status; /* final UCX status once !pending */
    /* A consuming receive (tnt_ucx_irecv_consume): the generic datatype's
     * state is the op itself, and each fragment goes to consume. */
    tnt_ucx_consume_fn consume;
    void *consume_arg;
    ucp_tag_recv_info_t info;
};

struct tnt_ucx_peer {
    tnt_ucx_t *ucx; /* error callback argument points here */
    int rank;
    ucp_ep_h ep;
    /* Set by the endpoint error callback, which UCX runs from
     * ucp_worker_progress on the thread that drives the worker (the only
     * thread using this transport), so plain ints suffice. */
    int failed;
    ucs_status_t error;
    char transport[TNT_UCX_TRANSPORT_MAX];
    size_t rndv_from; /* tag sends of this size or more take rendezvous; 0: unknown */
    int tcp_only;     /* every UCX lane to this peer is TCP */
};

struct tnt_ucx {
    int rank;
    int size;
    double timeout_s;
    tnt_watch_t *watch; /* the hang doctor, or NULL */
    ucp_context_h context;
    ucp_worker_h worker;
    int efd;                    /* worker wake-up fd, -1 if unavailable */
    uint64_t spin_ns;           /* busy-poll this long before yielding */
    uint64_t yield_ns;          /* then poll with sched_yield this long */
    size_t tcp_seg_bytes;       /* UCX's TCP segment size to set; 0: UCX's */
    struct tnt_ucx_peer *peers; /* size entries; ep NULL when not connected */
    int num_connected;
    int num_side_connected; /* of those, made first by a side message */
    /* Every rank's worker address (rank r's at r * address_stride), kept
     * for endpoints created on first use; NULL for ranks never connected
     * to (allowed is 0). */
    unsigned char *addresses;
    size_t address_stride;
    size_t estimated_eps;

    /* Request pool: slot i is [UCX's request | struct tnt_ucx_op]; the op
     * is what we pass as ucp_request_param_t.request. */
    unsigned char *pool;
    size_t slot_bytes;
    size_t ucp_request_bytes; /* rounded up so the op stays aligned */
    int free_slots[TNT_UCX_POOL_SLOTS];
    int num_free;

    void *staging;
    size_t staging_bytes;
    ucp_mem_h staging_memh;
    ucp_datatype_t consume_dt; /* the generic datatype of consuming receives */

    tnt_status_t failed; /* first failure; TNT_OK while healthy */
    int poisoned;        /* endpoints force-closed after a failure */
    int saying_goodbye;  /* in the goodbye handshake: peers' goodbyes are expected */
    uint64_t bytes_sent;
    uint64_t bytes_received;
    uint64_t bytes_consumed; /* of bytes_received: through consuming receives */
};

/* The generic datatype of consuming receives (ucx.c). */
extern const ucp_generic_dt_ops_t tnt_ucx_consume_ops;

/* ucx.c: returns a reaped op's slot to the request pool. */
void tnt_ucx_pool_put(tnt_ucx_t *ucx, struct tnt_ucx_op *op);
/* ucx_wireup.c: force-closes every endpoint after a failure; creates the
 * endpoint to rank r on first use. */
void tnt_ucx_poison(tnt_ucx_t *ucx);
tnt_status_t tnt_ucx_ep_create(tnt_ucx_t *ucx, int r);
/* ucx_config.c: libtnt's status for a UCX one; fills peer->transport,
 * rndv_from and tcp_only from UCX's endpoint query; sets UCX's TCP
 * segment sizes in config (0: UCX's own). */
tnt_status_t tnt_ucx_status_of(ucs_status_t status);
void tnt_ucx_describe_ep(struct tnt_ucx_peer *peer);
void tnt_ucx_config_tcp_segments(ucp_config_t *config, size_t bytes);

#endif
