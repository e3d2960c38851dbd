/*
 * libtnt_cuda.so: the CUDA side of libtnt's device collectives, loaded by
 * gpu/device.c at the first device call. It links the CUDA runtime and
 * loads NCCL (libnccl.so.2) itself with dlopen, so that a machine with CUDA
 * but without NCCL still gets the host-staged path. It calls back into
 * libtnt only through the table it is handed (struct tnt_gpu_host_ops).
 *
 * This file: the entry points (probe, context life cycle, the collectives'
 * checks and dispatch, synchronize). The two transports:
 *  - NCCL (nccl.c): a nonblocking communicator libtnt creates, every wait
 *    bounded by TNT_TIMEOUT and ended with ncclCommAbort;
 *  - host (staged.c): chunks staged through pinned host memory and the host
 *    collectives, pipelined on a private copy stream.
 *
 * Not thread-safe by itself: device.c serialises the calls per context.
 */
#include "gpu/cuda/cuda_plugin.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const struct tnt_gpu_host_ops *g_host;

tnt_status_t tnt_cuda_fail(cudaError_t e, const char *what)
{
    return g_host->error_raise(TNT_ERR_TRANSPORT, "device collectives: %s failed: %s (%s)", what,
                               cudaGetErrorString(e), cudaGetErrorName(e));
}

tnt_status_t tnt_cuda_enter(const struct ctx *c, int *previous_p)
{
    cudaError_t e = cudaGetDevice(previous_p);
    if (e == cudaSuccess && *previous_p != c->device) {
        e = cudaSetDevice(c->device);
    }
    return e == cudaSuccess ? TNT_OK : tnt_cuda_fail(e, "cudaSetDevice");
}

void tnt_cuda_leave(const struct ctx *c, int previous)
{
    if (previous != c->device) {
        (void)cudaSetDevice(previous);
    }
}

static void probe(struct tnt_gpu_peer *peer)
{
    int count = 0, device = -1;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        snprintf(peer->reason, sizeof(peer->reason),
                 "no usable GPU (cudaGetDeviceCount: %s); check nvidia-smi, "
                 "CUDA_VISIBLE_DEVICES and srun --gpus-per-task",
                 e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return;
    }
    struct cudaDeviceProp prop;
    e = cudaGetDevice(&device);
    if (e == cudaSuccess) {
        e = cudaGetDeviceProperties(&prop, device);
    }
    if (e != cudaSuccess) {
        snprintf(peer->reason, sizeof(peer->reason), "cannot query the current CUDA device: %s",
                 cudaGetErrorString(e));
        return;
    }
    memcpy(peer->uuid, prop.uuid.bytes, sizeof(peer->uuid));
    peer->device = device;
    const char *nccl_error = NULL;
    peer->nccl_ok = tnt_nccl_load(&nccl_error);
    if (!peer->nccl_ok) {
        g_host->log_debug("device collectives: %s", nccl_error);
    }
    peer->ok = 1;
}

static tnt_status_t context_create(const struct tnt_gpu_context_params *params, void **ctx_p)
{
    struct ctx *c = calloc(1, sizeof(*c));
    tnt_status_t status;
    if (c == NULL) {
        return g_host->error_raise(TNT_ERR_NO_MEMORY, "device collectives: out of memory");
    }
    c->p = *params;
    cudaError_t e = cudaGetDevice(&c->device);
    if (e != cudaSuccess) {
        status = tnt_cuda_fail(e, "cudaGetDevice");
        goto err_free;
    }
    if (params->transport == TNT_GPU_TRANSPORT_NCCL) {
        status = tnt_nccl_create(c);
    } else {
        status = tnt_staged_create(c);
    }
    if (status != TNT_OK) {
        goto err_free;
    }
    *ctx_p = c;
    return TNT_OK;

err_free:
    free(c);
    return status;
}

static void context_abort(void *ctx)
{
    struct ctx *c = ctx;
    if (c->p.transport == TNT_GPU_TRANSPORT_NCCL) {
        tnt_nccl_abort(c);
    }
}

static void context_destroy(void *ctx)
{
    struct ctx *c = ctx;
    if (c->p.transport == TNT_GPU_TRANSPORT_NCCL) {
        tnt_nccl_destroy(c);
    } else {
        int previous;
        if (tnt_cuda_enter(c, &previous) == TNT_OK) {
            (void)cudaStreamSynchronize(c->copy_stream);
            tnt_staged_free(c);
            tnt_cuda_leave(c, previous);
        }
    }
    free(c);
}

/* ------------------------------------------------------------------------ */
/* Pointer checks                                                           */
/* ------------------------------------------------------------------------ */

static tnt_status_t check_device_ptr(const void *ptr, const char *fn, const char *name)
{
    struct cudaPointerAttributes attr;
    cudaError_t e = cudaPointerGetAttributes(&attr, ptr);
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* clear the sticky-free error state */
        return g_host->error_raise(TNT_ERR_INVALID_ARG, "%s: %s %p is not CUDA memory (%s)", fn,
                                   name, ptr, cudaGetErrorString(e));
    }
    if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged) {
        return g_host->error_raise(TNT_ERR_INVALID_ARG,
                                   "%s: %s %p is host memory; use the host collective "
                                   "(the same call without _device) for it",
                                   fn, name, ptr);
    }
    return TNT_OK;
}

/* ------------------------------------------------------------------------ */
/* Collectives                                                              */
/* ------------------------------------------------------------------------ */

/* One rank: every reduction is the identity, so the result is the input.
 * NCCL is not asked: its one-rank avg kernel leaves the tail of the output
 * unwritten before NCCL 2.29.7 (NVIDIA/nccl#1950; seen here on an H100 with
 * NCCL 2.28.9, float64 avg of 4099 elements out of place). */
static tnt_status_t one_rank_copy(struct ctx *c, const void *sendbuf, void *recvbuf, size_t bytes,
                                  void *stream)
{
    if (sendbuf == recvbuf || bytes == 0) {
        return TNT_OK;
    }
    int previous;
    tnt_status_t status = tnt_cuda_enter(c, &previous);
    if (status != TNT_OK) {
        return status;
    }
    cudaError_t e =
        cudaMemcpyAsync(recvbuf, sendbuf, bytes, cudaMemcpyDeviceToDevice, (cudaStream_t)stream);
    tnt_cuda_leave(c, previous);
    return e == cudaSuccess ? TNT_OK : tnt_cuda_fail(e, "cudaMemcpyAsync (one rank)");
}

static tnt_status_t allreduce(void *ctx, const void *sendbuf, void *recvbuf, size_t count,
                              tnt_dtype_t dtype, tnt_op_t op, void *stream)
{
    const char *fn = "tnt_allreduce_device";
    struct ctx *c = ctx;
    tnt_status_t status = check_device_ptr(sendbuf, fn, "sendbuf");
    if (status == TNT_OK && recvbuf != sendbuf) {
        status = check_device_ptr(recvbuf, fn, "recvbuf");
    }
    if (status != TNT_OK) {
        return status;
    }
    if (c->p.size == 1) {
        return one_rank_copy(c, sendbuf, recvbuf, count * g_host->dtype_size(dtype), stream);
    }
    if (c->p.transport == TNT_GPU_TRANSPORT_NCCL) {
        return tnt_nccl_allreduce(c, sendbuf, recvbuf, count, dtype, op, (cudaStream_t)stream, fn);
    }
    return tnt_staged_allreduce(c, sendbuf, recvbuf, count, dtype, op, (cudaStream_t)stream, fn);
}

static tnt_status_t broadcast(void *ctx, void *buf, size_t bytes, int root, void *stream)
{
    const char *fn = "tnt_broadcast_device";
    struct ctx *c = ctx;
    tnt_status_t status = check_device_ptr(buf, fn, "buf");
    if (status != TNT_OK) {
        return status;
    }
    if (c->p.transport == TNT_GPU_TRANSPORT_NCCL) {
        return tnt_nccl_broadcast(c, buf, bytes, root, (cudaStream_t)stream, fn);
    }
    return tnt_staged_broadcast(c, buf, bytes, root, (cudaStream_t)stream, fn);
}

static tnt_status_t allgather(void *ctx, const void *sendbuf, void *recvbuf, size_t bytes_per_rank,
                              void *stream)
{
    const char *fn = "tnt_allgather_device";
    struct ctx *c = ctx;
    tnt_status_t status = check_device_ptr(sendbuf, fn, "sendbuf");
    if (status == TNT_OK) {
        status = check_device_ptr(recvbuf, fn, "recvbuf");
    }
    if (status != TNT_OK) {
        return status;
    }
    if (c->p.transport == TNT_GPU_TRANSPORT_NCCL) {
        return tnt_nccl_allgather(c, sendbuf, recvbuf, bytes_per_rank, (cudaStream_t)stream, fn);
    }
    return tnt_staged_allgather(c, sendbuf, recvbuf, bytes_per_rank, (cudaStream_t)stream, fn);
}

static tnt_status_t check_device(const void *ptr, const char *fn, const char *name)
{
    return check_device_ptr(ptr, fn, name);
}

static tnt_status_t reduce(void *ctx, const void *sendbuf, void *recvbuf, size_t count,
                           tnt_dtype_t dtype, tnt_op_t op, int root, void *stream)
{
    const char *fn = "tnt_reduce_device";
    struct ctx *c = ctx;
    if (c->p.size == 1) {
        return one_rank_copy(c, sendbuf, recvbuf, count * g_host->dtype_size(dtype), stream);
    }
    if (c->p.transport == TNT_GPU_TRANSPORT_NCCL) {
        return tnt_nccl_reduce(c, sendbuf, recvbuf, count, dtype, op, root, (cudaStream_t)stream,
                               fn);
    }
    return tnt_staged_reduce(c, sendbuf, recvbuf, count, dtype, op, root, (cudaStream_t)stream, fn);
}

static tnt_status_t reduce_scatterv(void *ctx, const void *sendbuf, void *recvbuf,
                                    const size_t *recvcounts, tnt_dtype_t dtype, tnt_op_t op,
                                    void *stream)
{
    const char *fn = "tnt_reduce_scatter(v)_device";
    struct ctx *c = ctx;
    if (c->p.size == 1) {
        return one_rank_copy(c, sendbuf, recvbuf, recvcounts[0] * g_host->dtype_size(dtype),
                             stream);
    }
    if (c->p.transport == TNT_GPU_TRANSPORT_NCCL) {
        return tnt_nccl_reduce_scatterv(c, sendbuf, recvbuf, recvcounts, dtype, op,
                                        (cudaStream_t)stream, fn);
    }
    return tnt_staged_reduce_scatterv(c, sendbuf, recvbuf, recvcounts, dtype, op,
                                      (cudaStream_t)stream, fn);
}

/* The pair with itself is a device copy on the caller's stream, before
 * the transport's part (which is ordered after it), skipped when the
 * in-place forms make source and destination one. */
static tnt_status_t exchange(void *ctx, const struct tnt_gpu_exchange *x, void *stream)
{
    struct ctx *c = ctx;
    const int me = c->p.rank;
    const char *from = (const char *)x->send + x->send_displs[me];
    char *to = (char *)x->recv + x->recv_displs[me];
    tnt_status_t status = TNT_OK;
    if (x->send_bytes[me] > 0) {
        status = one_rank_copy(c, from, to, x->send_bytes[me], stream);
    }
    if (status != TNT_OK || c->p.size == 1) {
        return status;
    }
    if (c->p.transport == TNT_GPU_TRANSPORT_NCCL) {
        return tnt_nccl_exchange(c, x, (cudaStream_t)stream);
    }
    return tnt_staged_exchange(c, x, (cudaStream_t)stream);
}

static tnt_status_t dev_send(void *ctx, const void *buf, size_t bytes, int peer, int tag,
                             size_t chunk_bytes, void *stream)
{
    const char *fn = "tnt_send_device";
    struct ctx *c = ctx;
    if (c->p.transport == TNT_GPU_TRANSPORT_NCCL) {
        return tnt_nccl_p2p(c, 0, (void *)buf, bytes, peer, (cudaStream_t)stream, fn);
    }
    return tnt_staged_p2p(c, 0, (void *)buf, bytes, peer, tag, chunk_bytes, (cudaStream_t)stream,
                          fn);
}

static tnt_status_t dev_recv(void *ctx, void *buf, size_t bytes, int peer, int tag,
                             size_t chunk_bytes, void *stream)
{
    const char *fn = "tnt_recv_device";
    struct ctx *c = ctx;
    if (c->p.transport == TNT_GPU_TRANSPORT_NCCL) {
        return tnt_nccl_p2p(c, 1, buf, bytes, peer, (cudaStream_t)stream, fn);
    }
    return tnt_staged_p2p(c, 1, buf, bytes, peer, tag, chunk_bytes, (cudaStream_t)stream, fn);
}

static tnt_status_t synchronize(void *ctx, void *stream)
{
    const char *fn = "tnt_device_synchronize";
    struct ctx *c = ctx;
    int nccl = c->p.transport == TNT_GPU_TRANSPORT_NCCL;
    tnt_status_t status = nccl ? tnt_nccl_usable(c, fn) : TNT_OK;
    tnt_backoff_t backoff;

    if (status != TNT_OK) {
        return status;
    }
    g_host->backoff_init(&backoff, c->p.timeout_s);
    for (;;) {
        cudaError_t e = cudaStreamQuery((cudaStream_t)stream);
        if (e == cudaSuccess) {
            return TNT_OK;
        }
        if (e != cudaErrorNotReady) {
            return tnt_cuda_fail(e, "cudaStreamQuery");
        }
        if (nccl) {
            ncclResult_t async = tnt_nccl_async_error(c);
            if (async != ncclSuccess && async != ncclInProgress) {
                return tnt_nccl_settle(c, async, fn);
            }
        }
        if (g_host->backoff_wait(&backoff) != 0) {
            if (nccl) {
                context_abort(c);
            }
            return g_host->error_raise(
                TNT_ERR_TIMEOUT,
                "%s: the stream did not finish within %.0f s%s; see "
                "TNT_TIMEOUT",
                fn, c->p.timeout_s,
                nccl ? " (a peer is gone or stuck in another collective); the "
                       "NCCL communicator was aborted"
                     : "");
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Entry point                                                              */
/* ------------------------------------------------------------------------ */

static const struct tnt_gpu_plugin_ops g_ops = {
    .abi = TNT_GPU_PLUGIN_ABI,
    .probe = probe,
    .context_create = context_create,
    .context_destroy = context_destroy,
    .context_abort = context_abort,
    .allreduce = allreduce,
    .broadcast = broadcast,
    .allgather = allgather,
    .check_device = check_device,
    .reduce = reduce,
    .reduce_scatterv = reduce_scatterv,
    .exchange = exchange,
    .send = dev_send,
    .recv = dev_recv,
    .synchronize = synchronize,
};

__attribute__((visibility("default"))) const struct tnt_gpu_plugin_ops *
tnt_gpu_plugin_get(int abi, const struct tnt_gpu_host_ops *host)
{
    if (abi != TNT_GPU_PLUGIN_ABI || host == NULL || host->abi != TNT_GPU_PLUGIN_ABI) {
        return NULL;
    }
    g_host = host;
    return &g_ops;
}
