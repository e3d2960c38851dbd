/*
 * The public collectives: argument checks, then either inline execution
 * (blocking calls, after earlier nonblocking ones have finished, so that the
 * order of collectives is the order of calls, and holding the in-flight word
 * so that nothing posted meanwhile from another thread runs beside them) or
 * a request for the progress thread (the _post calls).
 *
 * Arguments are checked identically on every rank before anything is sent,
 * so a bad argument fails locally and leaves the communicator usable.
 */
#include "core/api.h"
#include "comm/comm.h"

#include "coll/coll.h"
#include "util/log.h"

#include <stdint.h>
#include <stdlib.h>

tnt_status_t tnt_api_check_comm(const tnt_comm_t *comm, const char *fn)
{
    if (comm == NULL) {
        return tnt_error_raise(TNT_ERR_NOT_INITIALIZED,
                               "%s: comm is NULL; call tnt_init() first and pass the "
                               "communicator it returned",
                               fn);
    }
    return TNT_OK;
}

tnt_status_t tnt_api_check_buffer(const void *buf, size_t bytes, const char *fn, const char *name)
{
    if (buf == NULL && bytes > 0) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG,
                               "%s: %s is NULL but %zu bytes were asked "
                               "for",
                               fn, name, bytes);
    }
    return TNT_OK;
}

int tnt_api_overlap(const void *a, size_t a_bytes, const void *b, size_t b_bytes)
{
    uintptr_t a0 = (uintptr_t)a, b0 = (uintptr_t)b;
    return a0 < b0 + b_bytes && b0 < a0 + a_bytes;
}

tnt_status_t tnt_api_check_reduction(tnt_dtype_t dtype, tnt_op_t op, size_t count, size_t *bytes_p,
                                     const char *fn)
{
    if ((unsigned)dtype >= (unsigned)TNT_DTYPE_LAST) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG,
                               "%s: dtype %d is not a tnt_dtype_t "
                               "(TNT_FLOAT32 .. TNT_INT64)",
                               fn, (int)dtype);
    }
    if ((unsigned)op >= (unsigned)TNT_OP_LAST) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG,
                               "%s: op %d is not a tnt_op_t "
                               "(TNT_SUM, TNT_PROD, TNT_MIN, TNT_MAX, TNT_AVG)",
                               fn, (int)op);
    }
    size_t esize = tnt_dtype_size(dtype);
    if (count > SIZE_MAX / esize) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG, "%s: count %zu overflows the address space", fn,
                               count);
    }
    *bytes_p = count * esize;
    return TNT_OK;
}

static tnt_status_t check_allreduce(const tnt_comm_t *comm, const void *sendbuf,
                                    const void *recvbuf, size_t count, tnt_dtype_t dtype,
                                    tnt_op_t op, const char *fn)
{
    tnt_status_t status = tnt_api_check_comm(comm, fn);
    if (status != TNT_OK) {
        return status;
    }
    size_t bytes = 0;
    status = tnt_api_check_reduction(dtype, op, count, &bytes, fn);
    if (status != TNT_OK) {
        return status;
    }
    status = tnt_api_check_buffer(sendbuf, bytes, fn, "sendbuf");
    if (status == TNT_OK) {
        status = tnt_api_check_buffer(recvbuf, bytes, fn, "recvbuf");
    }
    if (status == TNT_OK && sendbuf != recvbuf && tnt_api_overlap(sendbuf, bytes, recvbuf, bytes)) {
        status = tnt_error_raise(TNT_ERR_INVALID_ARG,
                                 "%s: sendbuf and recvbuf overlap; pass the "
                                 "same pointer twice for an in-place allreduce",
                                 fn);
    }
    return status;
}

static tnt_status_t check_broadcast(const tnt_comm_t *comm, const void *buf, size_t bytes, int root,
                                    const char *fn)
{
    tnt_status_t status = tnt_api_check_comm(comm, fn);
    if (status != TNT_OK) {
        return status;
    }
    if (root < 0 || root >= comm->size) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG,
                               "%s: root %d is not a rank of this job "
                               "(ranks 0 .. %d)",
                               fn, root, comm->size - 1);
    }
    return tnt_api_check_buffer(buf, bytes, fn, "buf");
}

/* ------------------------------------------------------------------------ */
/* Blocking                                                                  */
/* ------------------------------------------------------------------------ */

TNT_API tnt_status_t tnt_barrier(tnt_comm_t *comm)
{
    tnt_status_t status = tnt_api_check_comm(comm, "tnt_barrier");
    if (status == TNT_OK) {
        status = tnt_progress_enter(comm);
    }
    if (status == TNT_OK) {
        status = tnt_coll_barrier(comm);
        tnt_progress_leave(comm);
    }
    return status;
}

TNT_API tnt_status_t tnt_allreduce(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                   size_t count, tnt_dtype_t dtype, tnt_op_t op)
{
    tnt_status_t status =
        check_allreduce(comm, sendbuf, recvbuf, count, dtype, op, "tnt_allreduce");
    if (status != TNT_OK || count == 0) {
        return status;
    }
    status = tnt_progress_enter(comm);
    if (status != TNT_OK) {
        return status;
    }
    status = tnt_coll_allreduce(comm, sendbuf, recvbuf, count, dtype, op);
    tnt_progress_leave(comm);
    return status;
}

TNT_API tnt_status_t tnt_broadcast(tnt_comm_t *comm, void *buf, size_t bytes, int root)
{
    tnt_status_t status = check_broadcast(comm, buf, bytes, root, "tnt_broadcast");
    if (status != TNT_OK || bytes == 0) {
        return status;
    }
    status = tnt_progress_enter(comm);
    if (status != TNT_OK) {
        return status;
    }
    status = tnt_coll_broadcast(comm, buf, bytes, root);
    tnt_progress_leave(comm);
    return status;
}

TNT_API tnt_status_t tnt_allgather(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                   size_t bytes_per_rank)
{
    const char *fn = "tnt_allgather";
    tnt_status_t status = tnt_api_check_comm(comm, fn);
    if (status != TNT_OK) {
        return status;
    }
    if (bytes_per_rank > SIZE_MAX / (size_t)comm->size) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG,
                               "%s: %d ranks x %zu bytes overflows the "
                               "address space",
                               fn, comm->size, bytes_per_rank);
    }
    size_t total = bytes_per_rank * (size_t)comm->size;
    status = tnt_api_check_buffer(sendbuf, bytes_per_rank, fn, "sendbuf");
    if (status == TNT_OK) {
        status = tnt_api_check_buffer(recvbuf, total, fn, "recvbuf");
    }
    if (status != TNT_OK || bytes_per_rank == 0) {
        return status;
    }
    /* sendbuf may be this rank's own block of recvbuf (in place); any other
     * overlap would be overwritten while being read. */
    const char *own = (const char *)recvbuf + (size_t)comm->rank * bytes_per_rank;
    if ((const char *)sendbuf != own && tnt_api_overlap(sendbuf, bytes_per_rank, recvbuf, total)) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG,
                               "%s: sendbuf overlaps recvbuf other than "
                               "at this rank's own block (rank * bytes_per_rank)",
                               fn);
    }
    status = tnt_progress_enter(comm);
    if (status != TNT_OK) {
        return status;
    }
    status = tnt_coll_allgather(comm, sendbuf, recvbuf, bytes_per_rank);
    tnt_progress_leave(comm);
    return status;
}

/* ------------------------------------------------------------------------ */
/* Nonblocking                                                               */
/* ------------------------------------------------------------------------ */

static tnt_status_t execute_allreduce(tnt_comm_t *comm, struct tnt_request *req)
{
    return tnt_coll_allreduce(comm, req->args.allreduce.sendbuf, req->args.allreduce.recvbuf,
                              req->args.allreduce.count, req->args.allreduce.dtype,
                              req->args.allreduce.op);
}

static tnt_status_t execute_broadcast(tnt_comm_t *comm, struct tnt_request *req)
{
    return tnt_coll_broadcast(comm, req->args.broadcast.buf, req->args.broadcast.bytes,
                              req->args.broadcast.root);
}

static struct tnt_request *request_alloc(tnt_comm_t *comm, const char *fn)
{
    struct tnt_request *req = calloc(1, sizeof(*req));
    if (req == NULL) {
        tnt_error_raise(TNT_ERR_NO_MEMORY, "%s: out of memory for a request", fn);
        return NULL;
    }
    req->heap_allocated = 1;
    req->comm = comm;
    return req;
}

/* Empty operations complete at once: they communicate nothing, exactly as
 * the blocking calls with count 0 do. */
static tnt_status_t post_or_complete(tnt_comm_t *comm, struct tnt_request *req, int empty,
                                     tnt_request_t **req_p)
{
    if (empty) {
        atomic_store_explicit(&req->status, TNT_OK, memory_order_relaxed);
    } else {
        tnt_status_t status = tnt_progress_post(comm, req);
        if (status != TNT_OK) {
            free(req);
            return status;
        }
    }
    *req_p = req;
    return TNT_OK;
}

TNT_API tnt_status_t tnt_allreduce_post(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                        size_t count, tnt_dtype_t dtype, tnt_op_t op,
                                        tnt_request_t **req_p)
{
    const char *fn = "tnt_allreduce_post";
    tnt_status_t status = check_allreduce(comm, sendbuf, recvbuf, count, dtype, op, fn);
    if (status != TNT_OK) {
        return status;
    }
    if (req_p == NULL) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG, "%s: req_p is NULL", fn);
    }
    struct tnt_request *req = request_alloc(comm, fn);
    if (req == NULL) {
        return TNT_ERR_NO_MEMORY;
    }
    req->execute = execute_allreduce;
    req->args.allreduce.sendbuf = sendbuf;
    req->args.allreduce.recvbuf = recvbuf;
    req->args.allreduce.count = count;
    req->args.allreduce.dtype = dtype;
    req->args.allreduce.op = op;
    return post_or_complete(comm, req, count == 0, req_p);
}

TNT_API tnt_status_t tnt_broadcast_post(tnt_comm_t *comm, void *buf, size_t bytes, int root,
                                        tnt_request_t **req_p)
{
    const char *fn = "tnt_broadcast_post";
    tnt_status_t status = check_broadcast(comm, buf, bytes, root, fn);
    if (status != TNT_OK) {
        return status;
    }
    if (req_p == NULL) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG, "%s: req_p is NULL", fn);
    }
    struct tnt_request *req = request_alloc(comm, fn);
    if (req == NULL) {
        return TNT_ERR_NO_MEMORY;
    }
    req->execute = execute_broadcast;
    req->args.broadcast.buf = buf;
    req->args.broadcast.bytes = bytes;
    req->args.broadcast.root = root;
    return post_or_complete(comm, req, bytes == 0, req_p);
}

TNT_API tnt_status_t tnt_test(tnt_request_t *req)
{
    if (req == NULL) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG, "tnt_test: req is NULL");
    }
    if (req->p2p != NULL) {
        return tnt_api_p2p_test(req);
    }
    tnt_status_t status = atomic_load_explicit(&req->status, memory_order_acquire);
    if (status < 0) {
        /* Same message on this thread as a tnt_wait would give. */
        return tnt_progress_wait(req->comm, req);
    }
    if (status == TNT_IN_PROGRESS) {
        tnt_progress_poke(req->comm);
    }
    return status;
}

TNT_API tnt_status_t tnt_wait(tnt_request_t *req)
{
    if (req == NULL) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG, "tnt_wait: req is NULL");
    }
    if (req->p2p != NULL) {
        return tnt_api_p2p_wait(req);
    }
    tnt_status_t status = tnt_progress_wait(req->comm, req);
    /* If the wait itself gave up, the progress thread still owns the request;
     * it is leaked rather than freed under its feet. */
    if (atomic_load_explicit(&req->status, memory_order_acquire) != TNT_IN_PROGRESS &&
        req->heap_allocated) {
        free(req);
    }
    return status;
}
