/*
 * UCX transport: create and destroy. The UCP context and worker, the
 * request pool and staging registration, the endpoints (wire-up with the
 * handshake, error callbacks, closing), and the per-peer queries.
 */
#include "transport/ucx/ucx_impl.h"

#include "util/log.h"
#include "util/wait.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

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
void tnt_ucx_poison(tnt_ucx_t *ucx)
{
    if (ucx->poisoned) {
        return;
    }
    ucx->poisoned = 1;
    /* A forced close completes locally; bound it anyway. */
    tnt_ucx_close_eps(ucx, 1, 5.0);
}

/* The communicator's cookie: 128 bits from the kernel's CSPRNG, drawn by
 * rank 0 only (the others take its value from the exchange). */
static tnt_status_t tnt_ucx_draw_cookie(uint64_t cookie[2])
{
    unsigned char *p = (unsigned char *)cookie;
    size_t got = 0;

    while (got < 2 * sizeof(uint64_t)) {
        ssize_t n = getrandom(p + got, 2 * sizeof(uint64_t) - got, 0);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return tnt_error_raise(TNT_ERR_SYSTEM,
                                   "ucx: getrandom for the communicator's cookie failed: %s",
                                   n < 0 ? strerror(errno) : "no bytes");
        }
        got += (size_t)n;
    }
    return TNT_OK;
}

/* The keys of tnt_ucx_wire_tag, from the cookie's second word (the first
 * word travels in control messages only). */
static void tnt_ucx_set_cookie(tnt_ucx_t *ucx, const uint64_t cookie[2])
{
    ucx->cookie[0] = cookie[0];
    ucx->cookie[1] = cookie[1];
    ucx->seq_key = (cookie[1] >> TNT_UCX_TAG_SEQ_SHIFT) % TNT_UCX_DATA_SEQS;
    ucx->low_key = cookie[1] & TNT_UCX_TAG_LOW_MASK;
}

/* What each rank contributes to the first allgather: its address length and,
 * from rank 0, the communicator's cookie. The bootstrap (PMIx, a split's
 * parent, the caller's out-of-band exchange) is the one channel that only
 * the communicator's ranks share, so the cookie rides with it. */
struct tnt_ucx_first {
    uint64_t address_len;
    uint64_t cookie[2];
};

/* Gathers every rank's worker address and rank 0's cookie. Addresses can
 * differ in length (different devices per node), so the lengths go first
 * and the blobs are padded to the longest: on success *all_p holds size
 * blobs of *stride_p bytes each, rank r's at r * stride, and the caller
 * frees it. */
static tnt_status_t tnt_ucx_exchange_addresses(tnt_ucx_t *ucx, tnt_boot_t *boot,
                                               unsigned char **all_p, size_t *stride_p)
{
    ucp_address_t *address = NULL;
    size_t address_len = 0;
    uint64_t max_len = 0;
    struct tnt_ucx_first my_first, *firsts = NULL;
    unsigned char *mine = NULL, *all = NULL;
    ucs_status_t us;
    tnt_status_t status;

    us = ucp_worker_get_address(ucx->worker, &address, &address_len);
    if (us != UCS_OK) {
        return tnt_error_raise(TNT_ERR_TRANSPORT, "ucx: ucp_worker_get_address failed: %s",
                               ucs_status_string(us));
    }
    firsts = calloc((size_t)ucx->size, sizeof(*firsts));
    if (firsts == NULL) {
        status =
            tnt_error_raise(TNT_ERR_NO_MEMORY, "ucx: out of memory for %d addresses", ucx->size);
        goto err_release_address;
    }
    memset(&my_first, 0, sizeof(my_first));
    my_first.address_len = address_len;
    if (ucx->rank == 0) {
        status = tnt_ucx_draw_cookie(my_first.cookie);
        if (status != TNT_OK) {
            /* Still takes part, so the other ranks fail in the exchange's
             * check below instead of waiting for this one. */
            my_first.address_len = 0;
        }
    }
    status = tnt_boot_allgather(boot, &my_first, firsts, sizeof(my_first));
    if (status != TNT_OK) {
        goto err_free_firsts;
    }
    if (firsts[0].address_len == 0) {
        status = tnt_error_raise(TNT_ERR_SYSTEM,
                                 "ucx: rank 0 could not draw the communicator's cookie; its "
                                 "own output says why");
        goto err_free_firsts;
    }
    tnt_ucx_set_cookie(ucx, firsts[0].cookie);
    for (int r = 0; r < ucx->size; r++) {
        max_len = firsts[r].address_len > max_len ? firsts[r].address_len : max_len;
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
    free(firsts);
    ucp_worker_release_address(ucx->worker, address);
    *all_p = all;
    *stride_p = (size_t)max_len;
    return TNT_OK;

err_free_blobs:
    free(all);
    free(mine);
err_free_firsts:
    free(firsts);
err_release_address:
    ucp_worker_release_address(ucx->worker, address);
    return status;
}

/* Creates the endpoint to rank r from its gathered address. */
tnt_status_t tnt_ucx_ep_create(tnt_ucx_t *ucx, int r)
{
    struct tnt_ucx_peer *peer = &ucx->peers[r];
    ucp_ep_params_t ep_params;
    ucs_status_t us;

    memset(&ep_params, 0, sizeof(ep_params));
    ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                           UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep_params.address = (const ucp_address_t *)(ucx->addresses + (size_t)r * ucx->address_stride);
    /* A peer on this host (params.local) is watched by peer_alive instead. */
    ep_params.err_mode = peer->local ? UCP_ERR_HANDLING_MODE_NONE : UCP_ERR_HANDLING_MODE_PEER;
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
 * each. At create time (wire-up) every connection is really up afterwards,
 * and a peer that cannot be reached fails tnt_init, not step 1. At destroy
 * time (goodbye) every peer has stopped using this rank, so closing the
 * endpoints cannot break a peer's collective.
 *
 * Each message is a control header with the communicator's cookie. They are
 * the first messages a peer sends on a new connection, and their tags are
 * public (ucx_impl.h), so a stranger who sends one first gets it received
 * and checked: it is dropped with a log line naming the rank it claimed to
 * be, and the wait goes on for the real one. The sends go out in batches
 * that fit the request pool; eager sends complete without the peer's
 * receive, so sending everything before receiving cannot deadlock, and
 * every rank progresses its worker in both phases. */
static tnt_status_t tnt_ucx_handshake(tnt_ucx_t *ucx, uint32_t seq, const char *what,
                                      const char *kind)
{
    enum { BATCH = TNT_UCX_POOL_SLOTS / 2 };
    tnt_ucx_op_t *ops[BATCH];
    const struct tnt_ucx_ctl_header sent = { .cookie = { ucx->cookie[0], ucx->cookie[1] },
                                             .rank = ucx->rank,
                                             .seq = seq };
    unsigned char *pending = calloc((size_t)ucx->size, 1);
    tnt_status_t status = TNT_OK;
    int count = 0;

    if (pending == NULL) {
        return tnt_error_raise(TNT_ERR_NO_MEMORY, "%s: out of memory for %d ranks", what,
                               ucx->size);
    }
    for (int r = 0; r < ucx->size && status == TNT_OK;) {
        int n = 0;

        for (; r < ucx->size && n < BATCH; r++) {
            /* An endpoint to itself (self_ok) needs no handshake: the
             * rank cannot be unreachable or gone from itself. */
            if (ucx->peers[r].ep == NULL || r == ucx->rank) {
                continue;
            }
            pending[r] = 1;
            count++;
            status = tnt_ucx_isend(ucx, r, TNT_UCX_CTL_TAG(seq, ucx->rank), &sent, sizeof(sent),
                                   &ops[n]);
            if (status != TNT_OK) {
                break;
            }
            n++;
        }
        if (status != TNT_OK) {
            (void)tnt_ucx_waitall(ucx, ops, n, what);
        } else {
            status = tnt_ucx_waitall(ucx, ops, n, what);
        }
    }
    if (status == TNT_OK) {
        status = tnt_ucx_ctl_collect(ucx, seq, pending, count, what, kind);
    }
    free(pending);
    return status;
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
    ucx->avoid_dev_shm = params->avoid_dev_shm;
    ucx->failed = TNT_OK;
    ucx->self_ok = params->self_ok;
    ucx->peer_alive = params->peer_alive;
    ucx->alive_arg = params->alive_arg;
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
        ucx->peers[r].local = params->local != NULL && params->local[r];
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

/* The UCP context (from the UCX_* environment) and the size of UCX's part
 * of each request, which the request pool needs. */
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
    if (ucx->avoid_dev_shm) {
        tnt_ucx_config_avoid_dev_shm(config);
    }
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
    status = tnt_ucx_handshake(ucx, TNT_UCX_SEQ_WIREUP, "UCX wire-up", "wire-up hello");
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
        (void)tnt_ucx_handshake(ucx, TNT_UCX_SEQ_GOODBYE, "UCX goodbye (tnt_finalize)", "goodbye");
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

int tnt_ucx_num_endpoints(const tnt_ucx_t *ucx)
{
    return ucx->num_connected;
}

int tnt_ucx_num_side_endpoints(const tnt_ucx_t *ucx)
{
    return ucx->num_side_connected;
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
