/*
 * UCX transport: see ucx.h for the contract. Layout of this file: pool of
 * requests, endpoint error handling, create/destroy, data path, waits.
 */
#include "transport/ucx/ucx.h"

#include "util/log.h"
#include "util/wait.h"

#include <ucp/api/ucp.h>

#include <errno.h>
#include <stddef.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

/* ------------------------------------------------------------------------ */
/* Request pool                                                              */
/* ------------------------------------------------------------------------ */

static struct tnt_ucx_op *pool_op(tnt_ucx_t *ucx, int slot)
{
    return (struct tnt_ucx_op *)(ucx->pool + (size_t)slot * ucx->slot_bytes +
                                 ucx->ucp_request_bytes);
}

static int pool_slot_of(const tnt_ucx_t *ucx, const struct tnt_ucx_op *op)
{
    return (int)(((const unsigned char *)op - ucx->ucp_request_bytes - ucx->pool) /
                 ucx->slot_bytes);
}

static struct tnt_ucx_op *pool_get(tnt_ucx_t *ucx)
{
    struct tnt_ucx_op *op;

    if (ucx->num_free == 0) {
        return NULL;
    }
    op = pool_op(ucx, ucx->free_slots[--ucx->num_free]);
    op->ucx = ucx;
    op->in_use = 1;
    op->pending = 0;
    op->status = UCS_OK;
    op->peer = -1;
    op->is_recv = 0;
    op->bytes = 0;
    op->info.length = 0;
    return op;
}

static void pool_put(tnt_ucx_t *ucx, struct tnt_ucx_op *op)
{
    op->in_use = 0;
    ucx->free_slots[ucx->num_free++] = pool_slot_of(ucx, op);
}

/* ------------------------------------------------------------------------ */
/* Failures                                                                  */
/* ------------------------------------------------------------------------ */

static void tnt_ucx_ep_error_cb(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    struct tnt_ucx_peer *peer = arg;

    (void)ep;
    if (!peer->failed) {
        peer->failed = 1;
        peer->error = status;
        tnt_log_debug("ucx: endpoint to rank %d failed: %s", peer->rank, ucs_status_string(status));
    }
}

/* Closes every endpoint still open: forced when `force` or when the peer's
 * endpoint already failed (completes locally), gracefully otherwise (flushes
 * what is still in flight to the peer). The closes together wait at most
 * timeout_s; a request UCX still holds after that is left to it. */
static void tnt_ucx_close_eps(tnt_ucx_t *ucx, int force, double timeout_s)
{
    tnt_backoff_t backoff;

    tnt_backoff_init(&backoff, timeout_s);
    for (int r = 0; r < ucx->size; r++) {
        struct tnt_ucx_peer *peer = &ucx->peers[r];
        int force_this = force || peer->failed;
        ucp_request_param_t param = {
            .op_attr_mask = force_this ? UCP_OP_ATTR_FIELD_FLAGS : 0,
            .flags = force_this ? UCP_EP_CLOSE_FLAG_FORCE : 0,
        };
        ucs_status_ptr_t req;

        if (peer->ep == NULL) {
            continue;
        }
        req = ucp_ep_close_nbx(peer->ep, &param);
        peer->ep = NULL;
        if (req == NULL || UCS_PTR_IS_ERR(req)) {
            continue;
        }
        while (ucp_request_check_status(req) == UCS_INPROGRESS) {
            ucp_worker_progress(ucx->worker);
            if (tnt_backoff_wait(&backoff) != 0) {
                break;
            }
        }
        if (ucp_request_check_status(req) != UCS_INPROGRESS) {
            ucp_request_free(req);
        }
    }
}

/* Force-closes every endpoint after the first failure. The peers' endpoints
 * to this rank then fail too (their TCP connection or QP breaks), so every
 * rank of the job learns about the failure within milliseconds instead of
 * each waiting out TNT_TIMEOUT on a neighbour that has given up. */
static void tnt_ucx_poison(tnt_ucx_t *ucx)
{
    if (ucx->poisoned) {
        return;
    }
    ucx->poisoned = 1;
    /* A forced close completes locally; bound it anyway. */
    tnt_ucx_close_eps(ucx, 1, 5.0);
}

static tnt_status_t tnt_ucx_status_of(ucs_status_t status)
{
    switch (status) {
    case UCS_OK:
        return TNT_OK;
    case UCS_ERR_NO_MEMORY:
        return TNT_ERR_NO_MEMORY;
    case UCS_ERR_MESSAGE_TRUNCATED:
        return TNT_ERR_MISMATCH;
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_CANCELED:
    case UCS_ERR_IO_ERROR:
    case UCS_ERR_REJECTED:
    case UCS_ERR_NOT_CONNECTED:
        return TNT_ERR_PEER_FAILED;
    case UCS_ERR_TIMED_OUT:
        return TNT_ERR_TIMEOUT;
    default:
        return TNT_ERR_TRANSPORT;
    }
}

tnt_status_t tnt_ucx_failed(const tnt_ucx_t *ucx)
{
    return ucx->failed;
}

/* ------------------------------------------------------------------------ */
/* Setup                                                                     */
/* ------------------------------------------------------------------------ */

/* Reads the transports UCX chose for an endpoint out of ucp_ep_print_info
 * (1.13 has no query for them): lines like
 *   "#                 lane[0]:  3:tcp/eth0.0 md[1]  ..." -> "tcp/eth0". */
int tnt_ucx_transports_tcp_only(const char *transports)
{
    const char *p = transports;

    if (p == NULL || *p == '\0') {
        return 0;
    }
    for (;;) {
        if (strncmp(p, "tcp/", 4) != 0) {
            return 0;
        }
        p = strchr(p, ',');
        if (p == NULL) {
            return 1;
        }
        p++;
    }
}

static void tnt_ucx_describe_ep(struct tnt_ucx_peer *peer)
{
    char *text = NULL;
    size_t len = 0;
    FILE *stream = open_memstream(&text, &len);
    size_t used = 0;

    peer->transport[0] = '\0';
    if (stream == NULL) {
        return;
    }
    ucp_ep_print_info(peer->ep, stream);
    fclose(stream);
    peer->rndv_from = 0;
    for (char *line = strtok(text, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        char *lane = strstr(line, "lane[");
        char *colon;
        char name[64];
        size_t n;

        /* "tag_send: 0..<egr/short>..8185..<egr/zcopy>..8192..<rndv>..(inf)" */
        if (strstr(line, "tag_send:") != NULL && strstr(line, "..<rndv>") != NULL) {
            char *end = strstr(line, "..<rndv>");
            char *start = end;
            while (start > line && start[-1] >= '0' && start[-1] <= '9') {
                start--;
            }
            if (start < end) {
                peer->rndv_from = (size_t)strtoull(start, NULL, 10);
            }
            continue;
        }
        if (lane == NULL || (colon = strchr(lane + 5, ':')) == NULL) {
            continue;
        }
        /* after "lane[i]:" comes " <rsc>:<tl>/<dev> ..." */
        colon = strchr(colon + 1, ':');
        if (colon == NULL) {
            continue;
        }
        n = strcspn(colon + 1, " .\t");
        if (n == 0 || n >= sizeof(name)) {
            continue;
        }
        memcpy(name, colon + 1, n);
        name[n] = '\0';
        if (strstr(peer->transport, name) != NULL) {
            continue;
        }
        if (used + n + 2 < sizeof(peer->transport)) {
            used += (size_t)snprintf(peer->transport + used, sizeof(peer->transport) - used, "%s%s",
                                     used ? "," : "", name);
        }
    }
    free(text);
    peer->tcp_only = tnt_ucx_transports_tcp_only(peer->transport);
}

/* Gathers every rank's worker address. Addresses can differ in length
 * (different devices per node), so the lengths go first and the blobs are
 * padded to the longest: on success *all_p holds size blobs of *stride_p
 * bytes each, rank r's at r * stride, and the caller frees it. */
static tnt_status_t tnt_ucx_exchange_addresses(tnt_ucx_t *ucx, tnt_boot_t *boot,
                                               unsigned char **all_p, size_t *stride_p)
{
    ucp_address_t *address = NULL;
    size_t address_len = 0;
    uint64_t my_len, max_len = 0;
    uint64_t *lens = NULL;
    unsigned char *mine = NULL, *all = NULL;
    ucs_status_t us;
    tnt_status_t status;

    us = ucp_worker_get_address(ucx->worker, &address, &address_len);
    if (us != UCS_OK) {
        return tnt_error_raise(TNT_ERR_TRANSPORT, "ucx: ucp_worker_get_address failed: %s",
                               ucs_status_string(us));
    }
    lens = calloc((size_t)ucx->size, sizeof(*lens));
    if (lens == NULL) {
        status =
            tnt_error_raise(TNT_ERR_NO_MEMORY, "ucx: out of memory for %d addresses", ucx->size);
        goto err_release_address;
    }
    my_len = address_len;
    status = tnt_boot_allgather(boot, &my_len, lens, sizeof(my_len));
    if (status != TNT_OK) {
        goto err_free_lens;
    }
    for (int r = 0; r < ucx->size; r++) {
        max_len = lens[r] > max_len ? lens[r] : max_len;
    }
    mine = calloc(1, max_len);
    all = calloc((size_t)ucx->size, max_len);
    if (mine == NULL || all == NULL) {
        status = tnt_error_raise(TNT_ERR_NO_MEMORY, "ucx: out of memory for %d addresses of %zu B",
                                 ucx->size, (size_t)max_len);
        goto err_free_blobs;
    }
    memcpy(mine, address, address_len);
    status = tnt_boot_allgather(boot, mine, all, max_len);
    if (status != TNT_OK) {
        goto err_free_blobs;
    }
    free(mine);
    free(lens);
    ucp_worker_release_address(ucx->worker, address);
    *all_p = all;
    *stride_p = (size_t)max_len;
    return TNT_OK;

err_free_blobs:
    free(all);
    free(mine);
err_free_lens:
    free(lens);
err_release_address:
    ucp_worker_release_address(ucx->worker, address);
    return status;
}

/* Creates the endpoint to rank r from its gathered address. */
static tnt_status_t tnt_ucx_ep_create(tnt_ucx_t *ucx, int r)
{
    struct tnt_ucx_peer *peer = &ucx->peers[r];
    ucp_ep_params_t ep_params;
    ucs_status_t us;

    memset(&ep_params, 0, sizeof(ep_params));
    ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                           UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep_params.address = (const ucp_address_t *)(ucx->addresses + (size_t)r * ucx->address_stride);
    ep_params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep_params.err_handler.cb = tnt_ucx_ep_error_cb;
    ep_params.err_handler.arg = peer;
    us = ucp_ep_create(ucx->worker, &ep_params, &peer->ep);
    if (us != UCS_OK) {
        peer->ep = NULL;
        return tnt_error_raise(TNT_ERR_TRANSPORT,
                               "ucx: cannot create an endpoint to rank %d: %s; check "
                               "UCX_TLS / UCX_NET_DEVICES (ucx_info -d lists the "
                               "transports this node has)",
                               r, ucs_status_string(us));
    }
    ucx->num_connected++;
    return TNT_OK;
}

/* Exchanges addresses with every rank (collective), keeps them for
 * endpoints made on first use, and creates the endpoints in connect now.
 * Endpoints created before a failure stay open for the caller to close. */
static tnt_status_t tnt_ucx_connect(tnt_ucx_t *ucx, tnt_boot_t *boot, const unsigned char *connect)
{
    tnt_status_t status;

    status = tnt_ucx_exchange_addresses(ucx, boot, &ucx->addresses, &ucx->address_stride);
    if (status != TNT_OK) {
        return status;
    }
    for (int r = 0; r < ucx->size; r++) {
        if (connect != NULL && connect[r] && r != ucx->rank) {
            status = tnt_ucx_ep_create(ucx, r);
            if (status != TNT_OK) {
                return status;
            }
        }
    }
    return TNT_OK;
}

/* Sends one small message to every connected peer and receives one from
 * each, in batches that fit the pool. At create time (wire-up) every
 * connection is really up afterwards, and a peer that cannot be reached fails
 * tnt_init, not step 1. At destroy time (goodbye) every peer has stopped
 * using this rank, so closing the endpoints cannot break a peer's
 * collective. */
static tnt_status_t tnt_ucx_handshake(tnt_ucx_t *ucx, uint32_t seq, const char *what)
{
    enum { BATCH = TNT_UCX_POOL_SLOTS / 2 };
    tnt_ucx_op_t *ops[2 * BATCH];
    int32_t sent = ucx->rank;
    int32_t received[BATCH];
    int r = 0;

    while (r < ucx->size) {
        int n = 0, k = 0;
        tnt_status_t status;

        for (; r < ucx->size && k < BATCH; r++) {
            if (ucx->peers[r].ep == NULL) {
                continue;
            }
            status = tnt_ucx_irecv(ucx, r, tnt_ucx_tag(seq, r, 0), &received[k],
                                   sizeof(received[k]), &ops[n]);
            if (status != TNT_OK) {
                tnt_ucx_waitall(ucx, ops, n, what);
                return status;
            }
            n++;
            status =
                tnt_ucx_isend(ucx, r, tnt_ucx_tag(seq, ucx->rank, 0), &sent, sizeof(sent), &ops[n]);
            if (status != TNT_OK) {
                tnt_ucx_waitall(ucx, ops, n, what);
                return status;
            }
            n++;
            k++;
        }
        status = tnt_ucx_waitall(ucx, ops, n, what);
        if (status != TNT_OK) {
            return status;
        }
    }
    return TNT_OK;
}

/* The tnt_ucx_t and its peer table, with nothing of UCX's yet. */
static tnt_status_t tnt_ucx_alloc(const tnt_ucx_params_t *params, tnt_ucx_t **ucx_p)
{
    tnt_ucx_t *ucx = calloc(1, sizeof(*ucx));

    if (ucx == NULL) {
        return tnt_error_raise(TNT_ERR_NO_MEMORY, "ucx: out of memory");
    }
    ucx->rank = params->rank;
    ucx->size = params->size;
    ucx->timeout_s = params->timeout_s;
    ucx->watch = params->watch;
    ucx->efd = -1;
    ucx->spin_ns = params->spin_us * 1000;
    ucx->yield_ns = params->yield_us * 1000;
    ucx->tcp_seg_bytes = params->tcp_seg_bytes;
    ucx->failed = TNT_OK;
    ucx->estimated_eps =
        params->estimated_peers > 0 ? params->estimated_peers : (size_t)params->size;
    ucx->peers = calloc((size_t)params->size, sizeof(*ucx->peers));
    if (ucx->peers == NULL) {
        free(ucx);
        return tnt_error_raise(TNT_ERR_NO_MEMORY, "ucx: out of memory for %d peers", params->size);
    }
    for (int r = 0; r < params->size; r++) {
        ucx->peers[r].ucx = ucx;
        ucx->peers[r].rank = r;
    }
    *ucx_p = ucx;
    return TNT_OK;
}

static void tnt_ucx_free(tnt_ucx_t *ucx)
{
    free(ucx->addresses);
    free(ucx->peers);
    free(ucx);
}

/* UCX's TCP transport moves a message of up to one segment as one eager
 * message and anything longer as a rendezvous of segment-sized active
 * messages, each copied once more out of UCX's receive buffer (with
 * peer-failure handling UCX 1.13 has no zero-copy rendezvous over TCP).
 * Its segments (64 KiB received, 8 KiB sent) are small for the 32 KiB-1 MiB
 * chunks of the multi-node algorithms: each chunk then costs a rendezvous
 * and many small socket calls. Sets both sizes to `bytes`, except where the
 * user set UCX's own variable, and not at all when UCX_TLS leaves TCP out
 * (UCX would warn about settings no transport uses). The names are the TCP
 * transport's own (UCX applies a key to every transport that has it; in
 * UCX 1.13 only TCP has these two). docs/multinode.md, "TCP segments". */
static void tnt_ucx_config_tcp_segments(ucp_config_t *config, size_t bytes)
{
    static const char *const names[] = { "RX_SEG_SIZE", "TX_SEG_SIZE" };
    char value[32];

    if (bytes == 0 || !tnt_ucx_tls_includes_tcp(getenv("UCX_TLS"))) {
        return;
    }
    snprintf(value, sizeof(value), "%zu", bytes);
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char env_name[32];
        ucs_status_t us;

        snprintf(env_name, sizeof(env_name), "UCX_TCP_%s", names[i]);
        if (getenv(env_name) != NULL) {
            continue;
        }
        us = ucp_config_modify(config, names[i], value);
        if (us != UCS_OK) {
            /* Only slower, not wrong: UCX keeps its own size. */
            tnt_log_warn("ucx: setting %s=%s failed (%s); UCX keeps its own TCP segments. "
                         "Set TNT_UCX_TCP_SEG_KB=0 to silence this",
                         env_name, value, ucs_status_string(us));
        }
    }
}

int tnt_ucx_tls_includes_tcp(const char *tls)
{
    int exclude = 0, named_tcp = 0, named_all = 0;

    if (tls == NULL || *tls == '\0') {
        return 1; /* UCX's default: all */
    }
    if (*tls == '^') {
        exclude = 1;
        tls++;
    }
    while (*tls != '\0') {
        size_t n = strcspn(tls, ","), name_len = strcspn(tls, ",:");

        if (name_len == 3 && strncasecmp(tls, "tcp", 3) == 0) {
            named_tcp = 1;
        } else if (name_len == 3 && strncasecmp(tls, "all", 3) == 0) {
            named_all = 1;
        }
        tls += n;
        if (*tls == ',') {
            tls++;
        }
    }
    return exclude ? !named_tcp : named_tcp || named_all;
}

/* The UCP context (from the UCX_* environment) and the size of UCX's part
 * of each request, which the request pool needs. */
/* Consuming receives use a generic datatype whose unpack hands each
 * fragment, where UCX holds it, to the op's consumer: UCX calls unpack
 * with its own receive buffer (eager and rendezvous fragments alike, and
 * its copy of an unexpected message), so the bytes are not copied into a
 * user buffer first. The state is the op (the receive's buffer argument). */
static void *tnt_ucx_consume_start(void *context, void *buffer, size_t count)
{
    (void)context;
    (void)count;
    return buffer;
}

static size_t tnt_ucx_consume_size(void *state)
{
    return ((struct tnt_ucx_op *)state)->bytes;
}

static ucs_status_t tnt_ucx_consume_unpack(void *state, size_t offset, const void *src,
                                           size_t length)
{
    struct tnt_ucx_op *op = state;

    if (offset > op->bytes || length > op->bytes - offset) {
        return UCS_ERR_MESSAGE_TRUNCATED; /* longer than expected: reaped as a mismatch */
    }
    op->consume(op->consume_arg, offset, src, length);
    return UCS_OK;
}

static void tnt_ucx_consume_finish(void *state)
{
    (void)state;
}

static const ucp_generic_dt_ops_t tnt_ucx_consume_ops = {
    .start_pack = NULL,
    .start_unpack = tnt_ucx_consume_start,
    .packed_size = tnt_ucx_consume_size,
    .pack = NULL,
    .unpack = tnt_ucx_consume_unpack,
    .finish = tnt_ucx_consume_finish,
};

static tnt_status_t tnt_ucx_context_create(tnt_ucx_t *ucx)
{
    ucp_config_t *config = NULL;
    ucp_params_t ucp_params;
    ucp_context_attr_t context_attr;
    ucs_status_t us;

    us = ucp_config_read(NULL, NULL, &config);
    if (us != UCS_OK) {
        return tnt_error_raise(TNT_ERR_TRANSPORT,
                               "ucx: reading the UCX configuration failed: %s; check the "
                               "UCX_* environment variables",
                               ucs_status_string(us));
    }
    tnt_ucx_config_tcp_segments(config, ucx->tcp_seg_bytes);
    memset(&ucp_params, 0, sizeof(ucp_params));
    ucp_params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED |
                            UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
    ucp_params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
    ucp_params.mt_workers_shared = 0;
    /* The peers the algorithms use, not every rank: UCX sizes its
     * resources by this and leaves out transports (RC above about 256)
     * when told to expect too many. */
    ucp_params.estimated_num_eps = ucx->estimated_eps;
    us = ucp_init(&ucp_params, config, &ucx->context);
    ucp_config_release(config);
    if (us != UCS_OK) {
        return tnt_error_raise(TNT_ERR_TRANSPORT,
                               "ucx: ucp_init failed: %s; is UCX installed with a usable "
                               "transport (ucx_info -d)? check UCX_TLS",
                               ucs_status_string(us));
    }

    context_attr.field_mask = UCP_ATTR_FIELD_REQUEST_SIZE;
    us = ucp_context_query(ucx->context, &context_attr);
    if (us != UCS_OK) {
        ucp_cleanup(ucx->context);
        return tnt_error_raise(TNT_ERR_TRANSPORT, "ucx: ucp_context_query failed: %s",
                               ucs_status_string(us));
    }
    ucx->ucp_request_bytes = (context_attr.request_size + 63) & ~(size_t)63;
    us = ucp_dt_create_generic(&tnt_ucx_consume_ops, NULL, &ucx->consume_dt);
    if (us != UCS_OK) {
        ucp_cleanup(ucx->context);
        return tnt_error_raise(TNT_ERR_TRANSPORT, "ucx: ucp_dt_create_generic failed: %s",
                               ucs_status_string(us));
    }
    return TNT_OK;
}

/* TNT_UCX_POOL_SLOTS request slots, all free. */
static tnt_status_t tnt_ucx_pool_create(tnt_ucx_t *ucx)
{
    ucx->slot_bytes = ucx->ucp_request_bytes + ((sizeof(struct tnt_ucx_op) + 63) & ~(size_t)63);
    if (posix_memalign((void **)&ucx->pool, 64, ucx->slot_bytes * TNT_UCX_POOL_SLOTS) != 0) {
        ucx->pool = NULL;
        return tnt_error_raise(TNT_ERR_NO_MEMORY, "ucx: out of memory for the request pool");
    }
    memset(ucx->pool, 0, ucx->slot_bytes * TNT_UCX_POOL_SLOTS);
    for (int i = 0; i < TNT_UCX_POOL_SLOTS; i++) {
        ucx->free_slots[i] = TNT_UCX_POOL_SLOTS - 1 - i;
    }
    ucx->num_free = TNT_UCX_POOL_SLOTS;
    return TNT_OK;
}

/* The worker and, where UCX offers one, its wake-up fd. */
static tnt_status_t tnt_ucx_worker_create(tnt_ucx_t *ucx)
{
    ucp_worker_params_t worker_params;
    ucs_status_t us;

    memset(&worker_params, 0, sizeof(worker_params));
    worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    /* Called from one thread at a time (caller or progress thread), see
     * coll/coll.h; UCX's own async thread is internally synchronised. */
    worker_params.thread_mode = UCS_THREAD_MODE_SERIALIZED;
    us = ucp_worker_create(ucx->context, &worker_params, &ucx->worker);
    if (us != UCS_OK) {
        return tnt_error_raise(TNT_ERR_TRANSPORT, "ucx: ucp_worker_create failed: %s",
                               ucs_status_string(us));
    }
    if (ucp_worker_get_efd(ucx->worker, &ucx->efd) != UCS_OK) {
        ucx->efd = -1; /* fall back to sleeping backoff */
    }
    return TNT_OK;
}

/* Staging memory for receives that collectives reduce from: registered
 * once, so RDMA transports never register on the data path. None when bytes
 * is 0. */
static tnt_status_t tnt_ucx_staging_create(tnt_ucx_t *ucx, size_t bytes)
{
    ucp_mem_map_params_t map_params;
    ucs_status_t us;

    ucx->staging_bytes = bytes;
    if (bytes == 0) {
        return TNT_OK;
    }
    if (posix_memalign(&ucx->staging, 4096, bytes) != 0) {
        ucx->staging = NULL;
        return tnt_error_raise(TNT_ERR_NO_MEMORY, "ucx: out of memory for %zu B of staging memory",
                               bytes);
    }
    memset(ucx->staging, 0, bytes);
    memset(&map_params, 0, sizeof(map_params));
    map_params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    map_params.address = ucx->staging;
    map_params.length = bytes;
    us = ucp_mem_map(ucx->context, &map_params, &ucx->staging_memh);
    if (us != UCS_OK) {
        free(ucx->staging);
        ucx->staging = NULL;
        return tnt_error_raise(TNT_ERR_TRANSPORT,
                               "ucx: registering %zu B of staging memory failed: %s; "
                               "check the locked-memory limit (ulimit -l)",
                               bytes, ucs_status_string(us));
    }
    return TNT_OK;
}

static void tnt_ucx_staging_destroy(tnt_ucx_t *ucx)
{
    if (ucx->staging_memh != NULL) {
        ucp_mem_unmap(ucx->context, ucx->staging_memh);
    }
    free(ucx->staging);
}

tnt_status_t tnt_ucx_create(const tnt_ucx_params_t *params, tnt_ucx_t **ucx_p)
{
    tnt_ucx_t *ucx = NULL;
    tnt_status_t status;

    if (params->size > TNT_UCX_MAX_RANKS) {
        return tnt_error_raise(TNT_ERR_UNSUPPORTED,
                               "ucx: %d ranks exceed the %d that the tag layout supports",
                               params->size, TNT_UCX_MAX_RANKS);
    }
    status = tnt_ucx_alloc(params, &ucx);
    if (status != TNT_OK) {
        return status;
    }
    status = tnt_ucx_context_create(ucx);
    if (status != TNT_OK) {
        goto err_free_ucx;
    }
    status = tnt_ucx_pool_create(ucx);
    if (status != TNT_OK) {
        goto err_cleanup_context;
    }
    status = tnt_ucx_worker_create(ucx);
    if (status != TNT_OK) {
        goto err_free_pool;
    }
    status = tnt_ucx_staging_create(ucx, params->staging_bytes);
    if (status != TNT_OK) {
        goto err_destroy_worker;
    }
    status = tnt_ucx_connect(ucx, params->boot, params->connect);
    if (status != TNT_OK) {
        goto err_close_eps;
    }
    status = tnt_ucx_handshake(ucx, TNT_UCX_SEQ_WIREUP, "UCX wire-up");
    if (status != TNT_OK) {
        goto err_close_eps;
    }
    for (int r = 0; r < ucx->size; r++) {
        if (ucx->peers[r].ep != NULL) {
            tnt_ucx_describe_ep(&ucx->peers[r]);
            tnt_log_debug("ucx: rank %d -> rank %d via %s", ucx->rank, r, ucx->peers[r].transport);
        }
    }
    *ucx_p = ucx;
    return TNT_OK;

err_close_eps:
    tnt_ucx_poison(ucx);
    tnt_ucx_staging_destroy(ucx);
err_destroy_worker:
    ucp_worker_destroy(ucx->worker);
err_free_pool:
    free(ucx->pool);
err_cleanup_context:
    ucp_dt_destroy(ucx->consume_dt);
    ucp_cleanup(ucx->context);
err_free_ucx:
    tnt_ucx_free(ucx);
    return status;
}

void tnt_ucx_destroy(tnt_ucx_t *ucx)
{
    if (ucx == NULL) {
        return;
    }
    if (ucx->failed == TNT_OK) {
        /* Bounded like any wait, but by at most 30 s: a peer that never
         * finalizes must not hold this rank's exit for TNT_TIMEOUT. A
         * failure here poisons and we close hard. */
        double timeout_s = ucx->timeout_s;
        if (ucx->timeout_s <= 0 || ucx->timeout_s > 30) {
            ucx->timeout_s = 30;
        }
        ucx->saying_goodbye = 1;
        (void)tnt_ucx_handshake(ucx, TNT_UCX_SEQ_GOODBYE, "UCX goodbye (tnt_finalize)");
        ucx->timeout_s = timeout_s;
    }
    if (ucx->failed != TNT_OK) {
        tnt_ucx_poison(ucx);
    }
    /* Graceful close: flushes what is still in flight to each peer. */
    tnt_ucx_close_eps(ucx, 0, ucx->timeout_s > 0 && ucx->timeout_s < 10 ? ucx->timeout_s : 10);
    tnt_ucx_staging_destroy(ucx);
    ucp_worker_destroy(ucx->worker);
    free(ucx->pool);
    ucp_dt_destroy(ucx->consume_dt);
    ucp_cleanup(ucx->context);
    tnt_ucx_free(ucx);
}

void *tnt_ucx_staging(tnt_ucx_t *ucx, size_t *bytes_p)
{
    *bytes_p = ucx->staging_bytes;
    return ucx->staging;
}

uint64_t tnt_ucx_tag(uint32_t seq, int src_rank, uint32_t step)
{
    /* seq % (2^24 - 1): the all-ones value is the side messages' (below). */
    return ((uint64_t)(seq % TNT_UCX_SIDE_SEQ) << (TNT_UCX_TAG_RANK_BITS + TNT_UCX_TAG_STEP_BITS)) |
           ((uint64_t)((uint32_t)src_rank & (TNT_UCX_MAX_RANKS - 1)) << TNT_UCX_TAG_STEP_BITS) |
           (uint64_t)(step & ((1u << TNT_UCX_TAG_STEP_BITS) - 1));
}

int tnt_ucx_num_endpoints(const tnt_ucx_t *ucx)
{
    return ucx->num_connected;
}

size_t tnt_ucx_estimated_endpoints(const tnt_ucx_t *ucx)
{
    return ucx->estimated_eps;
}

uint64_t tnt_ucx_bytes_sent(const tnt_ucx_t *ucx)
{
    return ucx->bytes_sent;
}

uint64_t tnt_ucx_bytes_received(const tnt_ucx_t *ucx)
{
    return ucx->bytes_received;
}

uint64_t tnt_ucx_bytes_consumed(const tnt_ucx_t *ucx)
{
    return ucx->bytes_consumed;
}

int tnt_ucx_peer_tcp_only(const tnt_ucx_t *ucx, int peer)
{
    return peer >= 0 && peer < ucx->size && ucx->peers[peer].ep != NULL &&
           ucx->peers[peer].tcp_only;
}

size_t tnt_ucx_peer_rndv_from(const tnt_ucx_t *ucx, int peer)
{
    if (peer < 0 || peer >= ucx->size) {
        return 0;
    }
    return ucx->peers[peer].rndv_from;
}

const char *tnt_ucx_peer_transport(const tnt_ucx_t *ucx, int peer)
{
    if (peer < 0 || peer >= ucx->size) {
        return "";
    }
    return ucx->peers[peer].transport;
}

/* ------------------------------------------------------------------------ */
/* Data path                                                                 */
/* ------------------------------------------------------------------------ */

static int tnt_ucx_in_staging(const tnt_ucx_t *ucx, const void *buf, size_t bytes)
{
    const unsigned char *p = buf, *s = ucx->staging;
    return ucx->staging_memh != NULL && p >= s && bytes <= ucx->staging_bytes &&
           (size_t)(p - s) <= ucx->staging_bytes - bytes;
}

static tnt_status_t tnt_ucx_check_peer(tnt_ucx_t *ucx, int peer)
{
    if (ucx->failed != TNT_OK) {
        return tnt_error_set(ucx->failed, "ucx: the job already failed (see the first error)");
    }
    if (peer < 0 || peer >= ucx->size || peer == ucx->rank || ucx->poisoned) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG, "ucx: rank %d has no endpoint to rank %d",
                               ucx->rank, peer);
    }
    if (ucx->peers[peer].ep == NULL) {
        /* First message to or from this peer: connect now. Once per peer
         * for the life of the transport (UCX allocates here), never again
         * on the data path. A receive connects too, so that both sides of
         * every pair that talks hold an endpoint: the peer's failure is
         * reported on it, and the goodbye handshake stays symmetric. */
        tnt_status_t status = tnt_ucx_ep_create(ucx, peer);
        if (status != TNT_OK) {
            ucx->failed = status;
            return status;
        }
        tnt_ucx_describe_ep(&ucx->peers[peer]);
        tnt_log_debug("ucx: rank %d -> rank %d via %s (connected on first use)", ucx->rank, peer,
                      ucx->peers[peer].transport);
    }
    if (ucx->peers[peer].failed) {
        ucx->failed = TNT_ERR_PEER_FAILED;
        return tnt_error_raise(TNT_ERR_PEER_FAILED,
                               "ucx: connection to rank %d broke (%s); did it exit or crash? "
                               "its own output names the cause",
                               peer, ucs_status_string(ucx->peers[peer].error));
    }
    return TNT_OK;
}

static void tnt_ucx_start(struct tnt_ucx_op *op, ucs_status_ptr_t ret)
{
    if (ret == NULL) {
        op->pending = 0; /* completed immediately */
        op->status = UCS_OK;
    } else if (UCS_PTR_IS_ERR(ret)) {
        op->pending = 0;
        op->status = UCS_PTR_STATUS(ret);
    } else {
        op->pending = 1; /* ret is our own op (user-provided request) */
    }
}

_Static_assert(sizeof(tnt_ucx_iov_t) == sizeof(ucp_dt_iov_t) &&
                   offsetof(tnt_ucx_iov_t, buf) == offsetof(ucp_dt_iov_t, buffer) &&
                   offsetof(tnt_ucx_iov_t, bytes) == offsetof(ucp_dt_iov_t, length),
               "tnt_ucx_iov_t must have ucp_dt_iov_t's layout");

static size_t tnt_ucx_iov_bytes(const tnt_ucx_iov_t *iov, size_t iovcnt)
{
    size_t bytes = 0;
    for (size_t i = 0; i < iovcnt; i++) {
        bytes += iov[i].bytes;
    }
    return bytes;
}

/* The common start of every send and receive: the peer must be usable and a
 * preallocated request free (running out is a bug in the caller's pipeline
 * depth, and it poisons the transport like any other failure). */
static tnt_status_t tnt_ucx_op_acquire(tnt_ucx_t *ucx, int peer, size_t bytes,
                                       struct tnt_ucx_op **op_p)
{
    struct tnt_ucx_op *op;
    tnt_status_t status = tnt_ucx_check_peer(ucx, peer);

    if (status != TNT_OK) {
        return status;
    }
    op = pool_get(ucx);
    if (op == NULL) {
        ucx->failed = TNT_ERR_TRANSPORT;
        return tnt_error_raise(TNT_ERR_TRANSPORT, "ucx: more than %d operations in flight",
                               TNT_UCX_POOL_SLOTS);
    }
    op->peer = peer;
    op->bytes = bytes;
    op->consume = NULL;
    op->consume_arg = NULL;
    *op_p = op;
    return TNT_OK;
}

/* Shared by the contiguous and iov forms: datatype is ucp_dt_make_contig(1)
 * (count = bytes) or ucp_dt_make_iov() (count = iovcnt). */
static tnt_status_t tnt_ucx_post_send(tnt_ucx_t *ucx, int peer, uint64_t tag, const void *buf,
                                      size_t count, size_t bytes, ucp_datatype_t datatype,
                                      tnt_ucx_op_t **op_p)
{
    ucp_request_param_t param;
    struct tnt_ucx_op *op = NULL;
    tnt_status_t status = tnt_ucx_op_acquire(ucx, peer, bytes, &op);

    if (status != TNT_OK) {
        return status;
    }
    param.op_attr_mask = UCP_OP_ATTR_FIELD_REQUEST | UCP_OP_ATTR_FIELD_DATATYPE;
    param.request = op;
    param.datatype = datatype;
    if (datatype == ucp_dt_make_contig(1) && tnt_ucx_in_staging(ucx, buf, bytes)) {
        param.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
        param.memh = ucx->staging_memh;
    }
    tnt_ucx_start(op, ucp_tag_send_nbx(ucx->peers[peer].ep, buf, count, tag, &param));
    ucx->bytes_sent += bytes;
    *op_p = op;
    return TNT_OK;
}

/* consume != NULL: a consuming receive (tnt_ucx_irecv_consume); buf, count
 * and datatype are then the op itself, 1 and the generic datatype. */
static tnt_status_t tnt_ucx_post_recv(tnt_ucx_t *ucx, int peer, uint64_t tag, void *buf,
                                      size_t count, size_t bytes, ucp_datatype_t datatype,
                                      tnt_ucx_consume_fn consume, void *arg, tnt_ucx_op_t **op_p)
{
    ucp_request_param_t param;
    struct tnt_ucx_op *op = NULL;
    tnt_status_t status = tnt_ucx_op_acquire(ucx, peer, bytes, &op);

    if (status != TNT_OK) {
        return status;
    }
    op->is_recv = 1;
    op->info.length = bytes;
    if (consume != NULL) {
        op->consume = consume;
        op->consume_arg = arg;
        buf = op; /* the generic datatype's state; its packed size is op->bytes */
        count = 1;
        datatype = ucx->consume_dt;
    }
    param.op_attr_mask =
        UCP_OP_ATTR_FIELD_REQUEST | UCP_OP_ATTR_FIELD_RECV_INFO | UCP_OP_ATTR_FIELD_DATATYPE;
    param.request = op;
    param.datatype = datatype;
    param.recv_info.tag_info = &op->info;
    if (datatype == ucp_dt_make_contig(1) && tnt_ucx_in_staging(ucx, buf, bytes)) {
        param.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
        param.memh = ucx->staging_memh;
    }
    tnt_ucx_start(op, ucp_tag_recv_nbx(ucx->worker, buf, count, tag, UINT64_MAX, &param));
    *op_p = op;
    return TNT_OK;
}

tnt_status_t tnt_ucx_isend(tnt_ucx_t *ucx, int peer, uint64_t tag, const void *buf, size_t bytes,
                           tnt_ucx_op_t **op_p)
{
    return tnt_ucx_post_send(ucx, peer, tag, buf, bytes, bytes, ucp_dt_make_contig(1), op_p);
}

tnt_status_t tnt_ucx_irecv(tnt_ucx_t *ucx, int peer, uint64_t tag, void *buf, size_t bytes,
                           tnt_ucx_op_t **op_p)
{
    return tnt_ucx_post_recv(ucx, peer, tag, buf, bytes, bytes, ucp_dt_make_contig(1), NULL, NULL,
                             op_p);
}

tnt_status_t tnt_ucx_irecv_consume(tnt_ucx_t *ucx, int peer, uint64_t tag, size_t bytes,
                                   tnt_ucx_consume_fn consume, void *arg, tnt_ucx_op_t **op_p)
{
    return tnt_ucx_post_recv(ucx, peer, tag, NULL, 0, bytes, ucp_dt_make_contig(1), consume, arg,
                             op_p);
}

tnt_status_t tnt_ucx_isendv(tnt_ucx_t *ucx, int peer, uint64_t tag, const tnt_ucx_iov_t *iov,
                            size_t iovcnt, tnt_ucx_op_t **op_p)
{
    return tnt_ucx_post_send(ucx, peer, tag, iov, iovcnt, tnt_ucx_iov_bytes(iov, iovcnt),
                             ucp_dt_make_iov(), op_p);
}

tnt_status_t tnt_ucx_irecvv(tnt_ucx_t *ucx, int peer, uint64_t tag, tnt_ucx_iov_t *iov,
                            size_t iovcnt, tnt_ucx_op_t **op_p)
{
    return tnt_ucx_post_recv(ucx, peer, tag, iov, iovcnt, tnt_ucx_iov_bytes(iov, iovcnt),
                             ucp_dt_make_iov(), NULL, NULL, op_p);
}

/* Updates op->pending/status from UCX. Returns nonzero when finished. */
static int tnt_ucx_poll_op(struct tnt_ucx_op *op)
{
    ucs_status_t us;

    if (!op->pending) {
        return 1;
    }
    if (op->is_recv) {
        us = ucp_tag_recv_request_test(op, &op->info);
    } else {
        us = ucp_request_check_status(op);
    }
    if (us == UCS_INPROGRESS) {
        return 0;
    }
    op->pending = 0;
    op->status = us;
    return 1;
}

int tnt_ucx_test(tnt_ucx_t *ucx, tnt_ucx_op_t *op)
{
    ucp_worker_progress(ucx->worker);
    return tnt_ucx_poll_op(op);
}

/* Blocks for the next event, or briefly sleeps when there is no wake-up fd.
 * Only reached after the spin/yield phase of the backoff. */
static void tnt_ucx_block(tnt_ucx_t *ucx, tnt_backoff_t *backoff)
{
    struct pollfd pfd;

    if (ucx->efd < 0) {
        (void)tnt_backoff_wait(backoff);
        return;
    }
    /* Arming fails with BUSY when events are already pending: progress them. */
    if (ucp_worker_arm(ucx->worker) != UCS_OK) {
        return;
    }
    pfd.fd = ucx->efd;
    pfd.events = POLLIN;
    pfd.revents = 0;
    /* At most 1 ms, like the sleeping backoff: the fd reliably signals
     * arrivals, but a send waiting for socket space may only move on during
     * the next progress call. EINTR is harmless here. */
    (void)poll(&pfd, 1, 1);
}

/* Finishes one op: converts its UCX status, accounts bytes, frees the slot. */
static tnt_status_t tnt_ucx_reap(tnt_ucx_t *ucx, struct tnt_ucx_op *op, const char *what)
{
    tnt_status_t status = TNT_OK;
    int peer = op->peer;

    if (op->status != UCS_OK) {
        status = tnt_ucx_status_of(op->status);
        if (ucx->failed == TNT_OK && op->status != UCS_ERR_CANCELED) {
            ucx->failed = status;
            status = tnt_error_raise(status,
                                     "%s: %s rank %d failed: %s; did rank %d exit or crash? "
                                     "its own output names the cause",
                                     what, op->is_recv ? "receive from" : "send to", peer,
                                     ucs_status_string(op->status), peer);
        }
    } else if (op->is_recv) {
        if (op->info.length != op->bytes) {
            status = tnt_error_raise(TNT_ERR_MISMATCH,
                                     "%s: expected %zu B from rank %d but got %zu B; do all "
                                     "ranks call the same collectives with the same sizes?",
                                     what, op->bytes, peer, (size_t)op->info.length);
            if (ucx->failed == TNT_OK) {
                ucx->failed = status;
            }
        } else {
            ucx->bytes_received += op->bytes;
            ucx->bytes_consumed += op->consume != NULL ? op->bytes : 0;
        }
    }
    pool_put(ucx, op);
    return status;
}

/* Reaps every op in ops[0..n) that has finished (NULLing its entry) and
 * keeps the first error in *status. Returns how many finished. */
static int tnt_ucx_reap_finished(tnt_ucx_t *ucx, tnt_ucx_op_t **ops, int n, const char *what,
                                 tnt_status_t *status)
{
    int finished = 0;

    for (int i = 0; i < n; i++) {
        if (ops[i] != NULL && tnt_ucx_poll_op(ops[i])) {
            tnt_status_t s = tnt_ucx_reap(ucx, ops[i], what);
            if (*status == TNT_OK) {
                *status = s;
            }
            ops[i] = NULL;
            finished++;
        }
    }
    return finished;
}

/* A dead peer: its pending receives would never complete. Fails the
 * transport when an unfinished op goes to or comes from a peer whose
 * endpoint broke. */
static tnt_status_t tnt_ucx_check_peers(tnt_ucx_t *ucx, tnt_ucx_op_t **ops, int n, const char *what)
{
    for (int i = 0; i < n; i++) {
        if (ops[i] != NULL && ucx->peers[ops[i]->peer].failed) {
            int peer = ops[i]->peer;
            ucx->failed = TNT_ERR_PEER_FAILED;
            return tnt_error_raise(TNT_ERR_PEER_FAILED,
                                   "%s: connection to rank %d broke (%s); did it exit or crash? "
                                   "its own output names the cause",
                                   what, peer, ucs_status_string(ucx->peers[peer].error));
        }
    }
    return TNT_OK;
}

/* A peer that left: a rank in tnt_finalize sends its goodbye to every
 * connected peer before it waits for theirs, so a goodbye from a rank that
 * an unfinished op still waits for means that rank's program ended while
 * this collective needs it; nothing would ever complete the op. Without
 * this check the op waits for TNT_TIMEOUT, and the leaving rank waits up
 * to 30 s for goodbyes that never come. The goodbye stays queued (probed,
 * not received) for this rank's own handshake. */
static tnt_status_t tnt_ucx_check_left(tnt_ucx_t *ucx, tnt_ucx_op_t **ops, int n, const char *what)
{
    if (ucx->saying_goodbye) {
        return TNT_OK;
    }
    for (int i = 0; i < n; i++) {
        ucp_tag_recv_info_t info;
        int peer;

        if (ops[i] == NULL) {
            continue;
        }
        peer = ops[i]->peer;
        if (ucp_tag_probe_nb(ucx->worker, tnt_ucx_tag(TNT_UCX_SEQ_GOODBYE, peer, 0), UINT64_MAX, 0,
                             &info) != NULL) {
            ucx->failed = TNT_ERR_PEER_FAILED;
            return tnt_error_raise(TNT_ERR_PEER_FAILED,
                                   "%s: rank %d left the job (it called tnt_finalize: its program "
                                   "is ending) while this rank still waits for it; its own "
                                   "output shows why it ended early",
                                   what, peer);
        }
    }
    return TNT_OK;
}

/* After a failure: cancels every op still pending, poisons the endpoints so
 * the rest of the job notices, and reaps the cancelled requests, which
 * complete during progress, so no buffer is touched after the wait
 * returns. */
static void tnt_ucx_abandon(tnt_ucx_t *ucx, tnt_ucx_op_t **ops, int n, int remaining)
{
    tnt_backoff_t reap;

    for (int i = 0; i < n; i++) {
        if (ops[i] != NULL && ops[i]->pending) {
            ucp_request_cancel(ucx->worker, ops[i]);
        }
    }
    tnt_ucx_poison(ucx);
    tnt_backoff_init(&reap, 5.0);
    while (remaining > 0) {
        ucp_worker_progress(ucx->worker);
        for (int i = 0; i < n; i++) {
            if (ops[i] != NULL && tnt_ucx_poll_op(ops[i])) {
                pool_put(ucx, ops[i]);
                ops[i] = NULL;
                remaining--;
            }
        }
        if (remaining > 0 && tnt_backoff_wait(&reap) != 0) {
            /* UCX kept them: leak the slots rather than reuse memory UCX
             * may still write (the transport is dead anyway). */
            for (int i = 0; i < n; i++) {
                ops[i] = NULL;
            }
            remaining = 0;
        }
    }
}

/* No progress for timeout_s: fails the transport, naming the peer of the
 * first unfinished op. */
static tnt_status_t tnt_ucx_timed_out(tnt_ucx_t *ucx, tnt_ucx_op_t **ops, int n, const char *what)
{
    int peer = -1;

    for (int i = 0; i < n && peer < 0; i++) {
        if (ops[i] != NULL) {
            peer = ops[i]->peer;
        }
    }
    ucx->failed = TNT_ERR_TIMEOUT;
    return tnt_error_raise(TNT_ERR_TIMEOUT,
                           "%s: rank %d did not answer within %g s; is it still running? see "
                           "TNT_TIMEOUT",
                           what, peer, ucx->timeout_s);
}

/* One idle round of a wait, waited_ns after the wait began or last saw an
 * op finish: busy-polling for spin_ns (TNT_UCX_SPIN_US, off by default),
 * then polling with sched_yield between polls for yield_ns
 * (TNT_UCX_YIELD_US), then sleeping on the worker's event fd, 1 ms at a
 * time.
 *
 * Why yield: on a host with more ranks than cores every message step waits
 * for its receiver to get a core. Sleeping costs a wake-up per step (arm,
 * poll, the sender's softirq waking the receiver, two context switches) and
 * a sleeping rank runs only when the scheduler gets to it; a yielding rank
 * stays runnable, notices its message at its next turn, and hands its core
 * straight to a rank that has work (sched_yield returns at once when no
 * other task wants the core, so with a core per rank this is a busy-poll).
 * Measured with 16 simulated nodes on 2 vCPUs (docs/multinode.md): 8 B
 * latency 440 us sleeping right away, 330-360 us yielding for 1 ms, CPU
 * time per allreduce down by a sixth. No pause-spin before it: 16 rounds of
 * progress plus pause loops (the generic backoff's first phase) cost
 * ~20 us of CPU per wait, which on an oversubscribed host is taken from
 * the rank being waited for (8 B at 16 simulated nodes: 670 us with them,
 * 440 us without). Pure busy-polling (TNT_UCX_SPIN_US) is the opposite:
 * it holds the core the peer needs, 1.5-10x slower on shared cores. */
static void tnt_ucx_idle(tnt_ucx_t *ucx, tnt_backoff_t *backoff, uint64_t waited_ns)
{
    if (waited_ns < ucx->spin_ns) {
        tnt_cpu_relax();
    } else if (waited_ns - ucx->spin_ns < ucx->yield_ns) {
        sched_yield();
    } else {
        tnt_ucx_block(ucx, backoff);
    }
}

tnt_status_t tnt_ucx_waitall(tnt_ucx_t *ucx, tnt_ucx_op_t **ops, int n, const char *what)
{
    tnt_status_t status = TNT_OK;
    tnt_backoff_t backoff;
    uint64_t spin_start, waited_ns, left_checked_ns = 0, last_progress_ns;
    int remaining = 0;

    for (int i = 0; i < n; i++) {
        remaining += ops[i] != NULL;
    }
    tnt_backoff_init(&backoff, tnt_watch_own_timeout(ucx->watch, ucx->timeout_s));
    spin_start = tnt_time_ns();
    last_progress_ns = spin_start;
    while (remaining > 0) {
        int progressed = 0;
        int finished;

        while (ucp_worker_progress(ucx->worker) != 0) {
            progressed = 1;
        }
        finished = tnt_ucx_reap_finished(ucx, ops, n, what, &status);
        remaining -= finished;
        if (remaining == 0) {
            break;
        }
        if (status == TNT_OK) {
            status = tnt_ucx_check_peers(ucx, ops, n, what);
        }
        if (status != TNT_OK || ucx->failed != TNT_OK) {
            if (status == TNT_OK) {
                status = tnt_error_set(ucx->failed, "%s: the job already failed", what);
            }
            tnt_ucx_abandon(ucx, ops, n, remaining);
            return status;
        }
        if (progressed || finished) {
            last_progress_ns = tnt_time_ns();
            /* The timeout bounds time without progress, not the transfer:
             * a 1 GiB allreduce over TCP may legitimately take long. */
            if (finished) {
                tnt_backoff_init(&backoff, tnt_watch_own_timeout(ucx->watch, ucx->timeout_s));
                spin_start = tnt_time_ns();
            }
            continue;
        }
        if (backoff.deadline_ns != UINT64_MAX && tnt_time_ns() >= backoff.deadline_ns) {
            status = tnt_ucx_timed_out(ucx, ops, n, what);
            continue; /* the failure branch above cancels and reaps */
        }
        waited_ns = tnt_time_ns() - spin_start;
        status = tnt_watch_poll(ucx->watch, waited_ns); /* cheap while short */
        if (status != TNT_OK) {
            ucx->failed = status;
            continue; /* the failure branch above cancels and reaps */
        }
        /* Every 10 ms of a wait, once nothing at all has moved for 10 ms: a
         * probe of UCX's queue of unexpected messages per op, off the fast
         * path. A peer's goodbye follows its data on the same connection,
         * but with several lanes its last fragments could still be on the
         * way; those would count as progress. */
        if (waited_ns >= left_checked_ns + 10000000 &&
            tnt_time_ns() - last_progress_ns >= 10000000) {
            left_checked_ns = waited_ns;
            status = tnt_ucx_check_left(ucx, ops, n, what);
            if (status != TNT_OK) {
                continue; /* the failure branch above cancels and reaps */
            }
        }
        tnt_ucx_idle(ucx, &backoff, waited_ns);
    }
    return status;
}

/* Side messages go to ranks no collective may have talked to yet (endpoints
 * are made on first use), so they connect too: the sender to the receiver,
 * and the receiver back to the sender, which keeps every pair that talked
 * symmetric for the goodbye handshake. Only the stalled-job path sends them.
 * A failure here is not the job's failure: returns -1 and the doctor tries
 * again later. */
static int tnt_ucx_side_connect(tnt_ucx_t *ucx, int peer)
{
    if (ucx->peers[peer].ep != NULL) {
        return 0;
    }
    if (tnt_ucx_ep_create(ucx, peer) != TNT_OK) {
        return -1;
    }
    tnt_ucx_describe_ep(&ucx->peers[peer]);
    return 0;
}

int tnt_ucx_side_send(tnt_ucx_t *ucx, int peer, const void *buf, size_t bytes)
{
    ucp_request_param_t param;
    ucs_status_ptr_t ret;

    if (ucx->failed != TNT_OK || peer < 0 || peer >= ucx->size || peer == ucx->rank ||
        ucx->poisoned || tnt_ucx_side_connect(ucx, peer) != 0 || ucx->peers[peer].failed) {
        return -1;
    }
    /* Sent at once or not at all: the caller's buffer is free on return and
     * no request outlives the call; a message that cannot go now is skipped
     * (the doctor sends again a second later). */
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL;
    ret =
        ucp_tag_send_nbx(ucx->peers[peer].ep, buf, bytes,
                         TNT_UCX_SIDE_TAG | ((uint64_t)ucx->rank << TNT_UCX_TAG_STEP_BITS), &param);
    if (ret == NULL) {
        return 0;
    }
    if (!UCS_PTR_IS_ERR(ret)) {
        /* Not expected with FORCE_IMM_CMPL; never leave a request behind. */
        ucp_request_cancel(ucx->worker, ret);
        ucp_request_free(ret);
    }
    return -1;
}

static void tnt_ucx_side_recv_done(void *request, ucs_status_t status,
                                   const ucp_tag_recv_info_t *info, void *user_data)
{
    (void)request;
    (void)status;
    (void)info;
    (void)user_data;
}

size_t tnt_ucx_side_recv(tnt_ucx_t *ucx, void *buf, size_t bytes)
{
    ucp_tag_recv_info_t info;
    ucp_tag_message_h msg;
    ucp_request_param_t param;
    ucs_status_ptr_t ret;
    ucs_status_t st = UCS_OK;

    ucp_worker_progress(ucx->worker);
    msg = ucp_tag_probe_nb(ucx->worker, TNT_UCX_SIDE_TAG, TNT_UCX_SIDE_TAG_MASK, 1, &info);
    if (msg == NULL) {
        return 0;
    }
    if (info.length > bytes) {
        /* Not one of ours: receive into nothing would fail; drop it by
         * truncation (UCX reports MESSAGE_TRUNCATED, which is fine here). */
        info.length = bytes;
    }
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK;
    param.cb.recv = tnt_ucx_side_recv_done;
    ret = ucp_tag_msg_recv_nbx(ucx->worker, buf, bytes, msg, &param);
    if (UCS_PTR_IS_ERR(ret)) {
        return 0;
    }
    if (ret != NULL) {
        /* Eager messages are already here: this finishes in a few progress
         * calls; bounded anyway. */
        tnt_backoff_t backoff;
        tnt_backoff_init(&backoff, 1.0);
        while ((st = ucp_request_check_status(ret)) == UCS_INPROGRESS) {
            ucp_worker_progress(ucx->worker);
            if (tnt_backoff_wait(&backoff) != 0) {
                ucp_request_cancel(ucx->worker, ret);
                break;
            }
        }
        while (ucp_request_check_status(ret) == UCS_INPROGRESS) {
            ucp_worker_progress(ucx->worker);
        }
        ucp_request_free(ret);
    }
    if (st != UCS_OK) {
        return 0;
    }
    int sender = (int)((info.sender_tag >> TNT_UCX_TAG_STEP_BITS) & (TNT_UCX_MAX_RANKS - 1));
    if (sender < ucx->size && sender != ucx->rank && !ucx->poisoned) {
        (void)tnt_ucx_side_connect(ucx, sender);
    }
    return info.length;
}

tnt_status_t tnt_ucx_wait(tnt_ucx_t *ucx, tnt_ucx_op_t **op, const char *what)
{
    return tnt_ucx_waitall(ucx, op, 1, what);
}

tnt_status_t tnt_ucx_sendrecv(tnt_ucx_t *ucx, int dst, uint64_t send_tag, const void *sendbuf,
                              size_t send_bytes, int src, uint64_t recv_tag, void *recvbuf,
                              size_t recv_bytes, const char *what)
{
    tnt_ucx_op_t *ops[2] = { NULL, NULL };
    tnt_status_t status = TNT_OK;

    if (src >= 0) {
        status = tnt_ucx_irecv(ucx, src, recv_tag, recvbuf, recv_bytes, &ops[0]);
    }
    if (status == TNT_OK && dst >= 0) {
        status = tnt_ucx_isend(ucx, dst, send_tag, sendbuf, send_bytes, &ops[1]);
    }
    if (status != TNT_OK) {
        tnt_ucx_waitall(ucx, ops, 2, what);
        return status;
    }
    return tnt_ucx_waitall(ucx, ops, 2, what);
}
