/*
 * The UCX transport's private header: its constants, the transport and
 * request structures, and what its files share. The files:
 *   ucx_config.c  transport selection and UCX configuration (pure helpers)
 *   ucx_wireup.c  create/destroy: context, worker, endpoints, handshakes
 *   ucx.c         the data path: request pool, posting sends and receives
 *   ucx_wait.c    waits, failure handling and the hang doctor's side channel
 *   ucx_ctl.c     the check of a received control message (pure; ucx_ctl.h)
 */
#ifndef TNT_TRANSPORT_UCX_UCX_IMPL_H
#define TNT_TRANSPORT_UCX_UCX_IMPL_H

#include "transport/ucx/ucx.h"
#include "transport/ucx/ucx_ctl.h"

#include "util/wait.h"

#include <ucp/api/ucp.h>

#include <stddef.h>
#include <stdint.h>

/* The tag layout: seq (24 bits) | source rank (20 bits) | step (20 bits).
 * No bit is spare, so the communicator's cookie is mixed into the tags of
 * collectives instead of taking bits of its own: tnt_ucx_wire_tag maps a
 * collective's tag to the tag on the wire by adding a secret offset to the
 * sequence field (modulo TNT_UCX_DATA_SEQS) and xor-ing the low 40 bits with
 * a secret mask, about 64 secret bits in all. That is a bijection on the
 * collectives' tags, so matching is unchanged for the job's ranks, and a
 * process without the cookie cannot name a tag that a posted receive
 * matches. The sequence values above TNT_UCX_DATA_SEQS are control messages
 * (wire-up, goodbye, the hang doctor's side messages): their tags stay in
 * the clear so that a forgery is received, checked against the cookie in
 * its payload, and reported, not left unmatched and unseen. */
#define TNT_UCX_TAG_RANK_BITS 20
#define TNT_UCX_TAG_STEP_BITS 20
#define TNT_UCX_TAG_SEQ_SHIFT (TNT_UCX_TAG_RANK_BITS + TNT_UCX_TAG_STEP_BITS)
#define TNT_UCX_TAG_LOW_MASK  ((1ull << TNT_UCX_TAG_SEQ_SHIFT) - 1)
#define TNT_UCX_MAX_RANKS     (1 << TNT_UCX_TAG_RANK_BITS)
/* TNT_UCX_DATA_SEQS and the control kinds TNT_UCX_SEQ_*: ucx_ctl.h. */
/* A control message's tag: its kind in the sequence field, the sender's
 * rank, step 0. With TNT_UCX_CTL_ANY_MASK it matches any sender. */
#define TNT_UCX_CTL_TAG(seq, rank)                \
    (((uint64_t)(seq) << TNT_UCX_TAG_SEQ_SHIFT) | \
     ((uint64_t)((uint32_t)(rank) & (TNT_UCX_MAX_RANKS - 1)) << TNT_UCX_TAG_STEP_BITS))
#define TNT_UCX_CTL_ANY_MASK \
    (((uint64_t)0xFFFFFFu << TNT_UCX_TAG_SEQ_SHIFT) | ((1ull << TNT_UCX_TAG_STEP_BITS) - 1))
#define TNT_UCX_CTL_RANK(tag) ((int)(((tag) >> TNT_UCX_TAG_STEP_BITS) & (TNT_UCX_MAX_RANKS - 1)))

/* struct tnt_ucx_ctl_header, what every control message starts with: ucx_ctl.h. */

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
    /* A point-to-point receive (tnt_ucx_irecv_from): any length up to
     * bytes, and where to report sender and length. NULL otherwise. */
    tnt_ucx_recv_result_t *result;
    int sync; /* a synchronous send (tnt_ucx_isend_sync) */
    /* irecv_from's flag (bits 0: none), and, once a flagged message
     * completed the receive, its sender, length and whether it was
     * truncated, and the link in the transport's queue of them. */
    tnt_ucx_flag_t flag;
    int flagged_source;
    int flagged_truncated;
    size_t flagged_bytes;
    struct tnt_ucx_op *flagged_next;
    int flagged_queued;
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
    int local;        /* on this host: no peer-failure handling, peer_alive instead */
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
    int avoid_dev_shm;          /* leave UCX's posix transport out */
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
    int self_ok;         /* tnt_ucx_params_t.self_ok */
    int (*peer_alive)(void *arg, int rank);
    void *alive_arg;
    uint64_t alive_checked_ns; /* tnt_ucx_test's last liveness check */
    /* When ucp_worker_progress last did something (tnt_time_ns): the
     * timeouts of tnt_ucx_test count from here. */
    uint64_t last_progress_ns;
    uint64_t bytes_sent;
    uint64_t bytes_received;
    uint64_t bytes_consumed; /* of bytes_received: through consuming receives */
    /* Receives that a flagged message completed (irecv_from's flag), whose
     * flag->fn is still to run, oldest first: UCX's completion callback
     * queues them, tnt_ucx_serve_flagged runs them. */
    struct tnt_ucx_op *flagged_head;
    struct tnt_ucx_op *flagged_tail;

    /* The communicator's cookie (rank 0's, from the address exchange) and
     * the tag keys derived from it (tnt_ucx_wire_tag). */
    uint64_t cookie[2];
    uint64_t seq_key; /* < TNT_UCX_DATA_SEQS */
    uint64_t low_key; /* < 2^TNT_UCX_TAG_SEQ_SHIFT */
    /* Control messages dropped for lacking the cookie (or being malformed),
     * and per kind (TNT_UCX_SEQ_* - TNT_UCX_DATA_SEQS) how many were and
     * when the next may be logged: one line per kind per 10 s at most. */
    uint64_t dropped;
    uint64_t dropped_of_kind[3];
    uint64_t drop_log_after_ns[3];
    /* A side message with its header, for sending (sent at once, so one
     * buffer serves every send) and for receiving. */
    unsigned char side_out[sizeof(struct tnt_ucx_ctl_header) + TNT_UCX_SIDE_MAX];
    unsigned char side_in[sizeof(struct tnt_ucx_ctl_header) + TNT_UCX_SIDE_MAX];
};

/* The tag on the wire for tag (see the layout above): collectives' tags get
 * the communicator's keys, control tags pass unchanged. A few adds and no
 * division: this runs for every message. */
static inline uint64_t tnt_ucx_wire_tag(const tnt_ucx_t *ucx, uint64_t tag)
{
    uint64_t seq = tag >> TNT_UCX_TAG_SEQ_SHIFT;

    if (seq >= TNT_UCX_DATA_SEQS) {
        return tag;
    }
    seq += ucx->seq_key; /* both below TNT_UCX_DATA_SEQS */
    if (seq >= TNT_UCX_DATA_SEQS) {
        seq -= TNT_UCX_DATA_SEQS;
    }
    return (seq << TNT_UCX_TAG_SEQ_SHIFT) | ((tag ^ ucx->low_key) & TNT_UCX_TAG_LOW_MASK);
}

/* A peer on this host (params.local), other than this rank, that
 * peer_alive reports dead: a slow-path check. */
static inline int tnt_ucx_local_peer_died(const tnt_ucx_t *ucx, int peer)
{
    return peer != ucx->rank && ucx->peers[peer].local && ucx->peer_alive != NULL &&
           !ucx->peer_alive(ucx->alive_arg, peer);
}

/* The generic datatype of consuming receives (ucx.c). */
extern const ucp_generic_dt_ops_t tnt_ucx_consume_ops;

/* ucx.c: returns a reaped op's slot to the request pool (leaving the
 * queue of flagged receives if it is still in it). */
void tnt_ucx_pool_put(tnt_ucx_t *ucx, struct tnt_ucx_op *op);
/* ucx.c: runs flag->fn for each queued flagged receive, oldest first. */
void tnt_ucx_serve_flagged(tnt_ucx_t *ucx);
/* ucx_wireup.c: force-closes every endpoint after a failure; creates the
 * endpoint to rank r on first use. */
void tnt_ucx_poison(tnt_ucx_t *ucx);
tnt_status_t tnt_ucx_ep_create(tnt_ucx_t *ucx, int r);
/* ucx.c: the endpoint to peer, made on first use; fails for a peer out of
 * range (or this rank, unless self_ok), after a failure, or when the peer
 * broke. */
tnt_status_t tnt_ucx_check_peer(tnt_ucx_t *ucx, int peer);
/* ucx_config.c: libtnt's status for a UCX one; fills peer->transport,
 * rndv_from and tcp_only from UCX's endpoint query; sets UCX's TCP
 * segment sizes in config (0: UCX's own). */
tnt_status_t tnt_ucx_status_of(ucs_status_t status);
void tnt_ucx_describe_ep(struct tnt_ucx_peer *peer);
void tnt_ucx_config_tcp_segments(ucp_config_t *config, size_t bytes);
void tnt_ucx_config_avoid_dev_shm(ucp_config_t *config);
/* ucx_wait.c: takes one queued control message of kind seq (from sender
 * `from`, or any sender when from < 0) into buf (at most cap bytes; a longer
 * one is consumed and reported as cap + 1 bytes). Returns 1 with its length
 * and the sender's rank as the tag claims it, or 0 when none is queued. */
int tnt_ucx_ctl_take(tnt_ucx_t *ucx, uint32_t seq, int from, void *buf, size_t cap, size_t *bytes_p,
                     int *sender_p);
/* ucx_wait.c: 1 when a control message of bytes (>= the header) carries
 * this communicator's cookie, kind seq and the tag's sender; otherwise 0,
 * after counting and (rate-limited) logging it as dropped. what names the
 * kind for the log ("wire-up hello"). */
int tnt_ucx_ctl_valid(tnt_ucx_t *ucx, uint32_t seq, const void *buf, size_t bytes, size_t expected,
                      int sender, const char *what);
/* ucx_wait.c: waits until the count ranks r with pending[r] set have sent
 * their control message of kind seq (hello, goodbye), dropping forged ones
 * (kind names them in the log: "goodbye"), bounded like tnt_ucx_waitall
 * (what names the wait in errors); clears pending[r] as each arrives. */
tnt_status_t tnt_ucx_ctl_collect(tnt_ucx_t *ucx, uint32_t seq, unsigned char *pending, int count,
                                 const char *what, const char *kind);

#endif
