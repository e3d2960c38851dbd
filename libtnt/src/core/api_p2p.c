/*
 * The public point-to-point calls (tnt_send, tnt_recv, their posted forms)
 * and the part of tnt_test / tnt_wait that completes their requests:
 * argument checks here, messages in p2p/p2p.c. A point-to-point request
 * never enters the progress queue (p2p/p2p.h says why); the calls that
 * test or wait for it drive its transport themselves.
 */
#include "comm/comm.h"
#include "core/api.h"
#include "gpu/gpu.h"
#include "p2p/p2p.h"
#include "util/log.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

struct p2p_request {
    struct tnt_request request; /* first: the public request is this */
    struct tnt_p2p_op op;
    tnt_recv_info_t *info;
    int finished; /* the final status is in request.status */
};

static tnt_status_t check_peer(const tnt_comm_t *comm, int peer, int any_ok, const char *fn)
{
    if ((peer < 0 || peer >= comm->size) && !(any_ok && peer == TNT_ANY_SOURCE)) {
        return tnt_error_raise(
            TNT_ERR_INVALID_ARG, "%s: peer %d is not a rank of communicator %s (ranks 0 .. %d%s)",
            fn, peer, comm->name, comm->size - 1, any_ok ? ", or TNT_ANY_SOURCE" : "");
    }
    return TNT_OK;
}

static tnt_status_t check_args(const tnt_comm_t *comm, const void *buf, size_t bytes, int peer,
                               int tag, int is_recv, const char *fn)
{
    tnt_status_t status = tnt_api_check_comm(comm, fn);
    if (status == TNT_OK) {
        status = check_peer(comm, peer, is_recv, fn);
    }
    if (status == TNT_OK && tag < 0) {
        status = tnt_error_raise(TNT_ERR_INVALID_ARG,
                                 "%s: tag %d is negative; tags are 0 .. TNT_TAG_MAX (%d)", fn, tag,
                                 TNT_TAG_MAX);
    }
    if (status == TNT_OK) {
        status = tnt_api_check_buffer(buf, bytes, fn, "buf");
    }
    return status;
}

static void fill_info(const struct tnt_p2p_op *op, tnt_recv_info_t *info)
{
    if (info != NULL) {
        info->source = op->result.source;
        info->tag = op->tag;
        info->bytes = op->result.bytes;
    }
}

/* The blocking forms: post, then wait on this thread. */
static tnt_status_t p2p_blocking(tnt_comm_t *comm, void *buf, size_t bytes, int peer, int tag,
                                 int is_recv, tnt_recv_info_t *info, const char *fn)
{
    struct tnt_p2p_op op;
    tnt_status_t status = check_args(comm, buf, bytes, peer, tag, is_recv, fn);
    if (status == TNT_OK) {
        status = tnt_p2p_post(comm, &op, is_recv, buf, bytes, peer, tag, fn);
    }
    if (status == TNT_OK) {
        status = tnt_p2p_wait(comm, &op);
    }
    if (status == TNT_OK && is_recv) {
        fill_info(&op, info);
    }
    return status;
}

static tnt_status_t p2p_post(tnt_comm_t *comm, void *buf, size_t bytes, int peer, int tag,
                             int is_recv, tnt_recv_info_t *info, tnt_request_t **req_p,
                             const char *fn)
{
    tnt_status_t status = check_args(comm, buf, bytes, peer, tag, is_recv, fn);
    if (status == TNT_OK && req_p == NULL) {
        status = tnt_error_raise(TNT_ERR_INVALID_ARG, "%s: req_p is NULL", fn);
    }
    if (status != TNT_OK) {
        return status;
    }
    struct p2p_request *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        return tnt_error_raise(TNT_ERR_NO_MEMORY, "%s: out of memory for a request", fn);
    }
    status = tnt_p2p_post(comm, &r->op, is_recv, buf, bytes, peer, tag, fn);
    if (status != TNT_OK) {
        free(r);
        return status;
    }
    r->request.comm = comm;
    r->request.p2p = &r->op;
    r->request.heap_allocated = 1;
    r->info = info;
    atomic_store_explicit(&r->request.status, TNT_IN_PROGRESS, memory_order_relaxed);
    *req_p = &r->request;
    return TNT_OK;
}

/* Keeps the final status (and the error's message, which a later tnt_test
 * or tnt_wait repeats) once the transport has reaped the operation. */
static tnt_status_t finish(struct p2p_request *r, tnt_status_t status)
{
    if (status == TNT_OK && r->op.is_recv) {
        fill_info(&r->op, r->info);
    }
    if (status < 0) {
        snprintf(r->request.error, sizeof(r->request.error), "%s", tnt_error_message());
        r->request.error_printed = tnt_error_printed();
    }
    r->finished = 1;
    atomic_store_explicit(&r->request.status, status, memory_order_relaxed);
    return status;
}

tnt_status_t tnt_api_p2p_test(struct tnt_request *req)
{
    struct p2p_request *r = (struct p2p_request *)req;
    if (r->finished) {
        tnt_status_t status = atomic_load_explicit(&req->status, memory_order_relaxed);
        if (status < 0) {
            tnt_error_restore(req->error, req->error_printed);
        }
        return status;
    }
    tnt_status_t status = tnt_p2p_test(req->comm, &r->op);
    return status == TNT_IN_PROGRESS ? status : finish(r, status);
}

tnt_status_t tnt_api_p2p_wait(struct tnt_request *req)
{
    struct p2p_request *r = (struct p2p_request *)req;
    tnt_status_t status =
        r->finished ? tnt_api_p2p_test(req) : finish(r, tnt_p2p_wait(req->comm, &r->op));
    free(r);
    return status;
}

TNT_API tnt_status_t tnt_send(tnt_comm_t *comm, const void *buf, size_t bytes, int peer, int tag)
{
    /* The transport only reads a send's buffer. */
    return p2p_blocking(comm, (void *)buf, bytes, peer, tag, 0, NULL, "tnt_send");
}

TNT_API tnt_status_t tnt_recv(tnt_comm_t *comm, void *buf, size_t bytes, int peer, int tag,
                              tnt_recv_info_t *info)
{
    return p2p_blocking(comm, buf, bytes, peer, tag, 1, info, "tnt_recv");
}

TNT_API tnt_status_t tnt_send_post(tnt_comm_t *comm, const void *buf, size_t bytes, int peer,
                                   int tag, tnt_request_t **req_p)
{
    return p2p_post(comm, (void *)buf, bytes, peer, tag, 0, NULL, req_p, "tnt_send_post");
}

TNT_API tnt_status_t tnt_recv_post(tnt_comm_t *comm, void *buf, size_t bytes, int peer, int tag,
                                   tnt_recv_info_t *info, tnt_request_t **req_p)
{
    return p2p_post(comm, buf, bytes, peer, tag, 1, info, req_p, "tnt_recv_post");
}

/* ---- the _device forms (tnt_cuda.h; the messages in gpu/device.c) ------- */

/* A blocking message to oneself waits for a receive that the same thread
 * can only post afterwards, and there are no posted device forms. */
static tnt_status_t check_not_self(const tnt_comm_t *comm, int peer, const char *fn)
{
    if (peer == comm->rank) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG,
                               "%s: peer %d is this rank; a blocking device message to itself "
                               "would wait for its own receive (copy with cudaMemcpyAsync "
                               "instead)",
                               fn, peer);
    }
    return TNT_OK;
}

TNT_API tnt_status_t tnt_send_device(tnt_comm_t *comm, const void *buf, size_t bytes, int peer,
                                     int tag, void *stream)
{
    const char *fn = "tnt_send_device";
    tnt_status_t status = check_args(comm, buf, bytes, peer, tag, 0, fn);
    if (status == TNT_OK) {
        status = check_not_self(comm, peer, fn);
    }
    return status != TNT_OK ? status : tnt_gpu_send(comm, buf, bytes, peer, tag, stream, fn);
}

TNT_API tnt_status_t tnt_recv_device(tnt_comm_t *comm, void *buf, size_t bytes, int peer, int tag,
                                     tnt_recv_info_t *info, void *stream)
{
    const char *fn = "tnt_recv_device";
    tnt_status_t status = check_args(comm, buf, bytes, peer, tag, 1, fn);
    if (status == TNT_OK) {
        status = check_not_self(comm, peer, fn);
    }
    return status != TNT_OK ? status : tnt_gpu_recv(comm, buf, bytes, peer, tag, info, stream, fn);
}
