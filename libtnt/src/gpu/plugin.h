/*
 * The interface between libtnt (device.c) and libtnt_cuda.so (cuda/plugin.c).
 *
 * libtnt dlopen()s libtnt_cuda.so at the first device call and asks it for
 * its operations table with tnt_gpu_plugin_get(); in return it hands over a
 * table of the libtnt functions the plugin needs (host collectives, errors,
 * bounded waits). The plugin therefore needs no symbol from libtnt and works
 * the same whether libtnt is the shared library or linked statically (unit
 * and integration tests).
 *
 * Bump TNT_GPU_PLUGIN_ABI whenever either table or a struct here changes; a
 * mismatch is reported as "libtnt_cuda.so is from another build".
 */
#ifndef TNT_GPU_PLUGIN_H
#define TNT_GPU_PLUGIN_H

#include <tnt/tnt.h>
#include <tnt/tnt_cuda.h>

#include <stddef.h>

#include "gpu/gpu.h"
#include "util/wait.h"

#define TNT_GPU_PLUGIN_ABI    3
#define TNT_GPU_PLUGIN_SYMBOL "tnt_gpu_plugin_get"

/* What libtnt gives the plugin. */
struct tnt_gpu_host_ops {
    int abi;
    tnt_status_t (*allreduce)(tnt_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                              tnt_dtype_t dtype, tnt_op_t op);
    tnt_status_t (*broadcast)(tnt_comm_t *comm, void *buf, size_t bytes, int root);
    tnt_status_t (*allgather)(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                              size_t bytes_per_rank);
    /* tnt_error_raise / tnt_error_set and tnt_log (printf formats). */
    tnt_status_t (*error_raise)(tnt_status_t status, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
    tnt_status_t (*error_set)(tnt_status_t status, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
    size_t (*dtype_size)(tnt_dtype_t dtype);
    /* The host alltoallv of the collective layer: rank r sends
     * all_send[r * size + j] bytes to rank j, packed in rank order on both
     * sides (the host-staged exchange). */
    tnt_status_t (*alltoallv)(tnt_comm_t *comm, const void *sendbuf, const size_t *sendbytes,
                              void *recvbuf, const size_t *all_send);
    /* One blocking host point-to-point message in the device messages'
     * own tag space (p2p/p2p.h: TNT_P2P_DEVICE_DATA), of exactly bytes
     * bytes: the host-staged payload of tnt_send_device. */
    tnt_status_t (*p2p_data)(tnt_comm_t *comm, int is_recv, void *buf, size_t bytes, int peer,
                             int tag, const char *fn);
    void (*log_debug)(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
    void (*backoff_init)(tnt_backoff_t *backoff, double timeout_s);
    int (*backoff_wait)(tnt_backoff_t *backoff);
};

/* Everything a device context needs to know about the job. */
struct tnt_gpu_context_params {
    tnt_comm_t *comm;
    int rank;
    int size;
    double timeout_s;
    tnt_gpu_transport_t transport;
    size_t chunk_bytes; /* host-staged path: bytes per chunk */
};

/* What the plugin gives libtnt. Functions returning tnt_status_t have
 * recorded the error message (through host->error_raise) when they fail. */
struct tnt_gpu_plugin_ops {
    int abi;
    /* Local and collective-free: this rank's current device, its UUID and
     * whether NCCL loads. Fills peer->ok = 0 and peer->reason when no device
     * collective is possible here (no GPU visible, driver too old). */
    void (*probe)(struct tnt_gpu_peer *peer);
    /* Collective over params->comm when the transport is NCCL (the unique id
     * broadcast, the init, a status allgather so every rank agrees). */
    tnt_status_t (*context_create)(const struct tnt_gpu_context_params *params, void **ctx_p);
    void (*context_destroy)(void *ctx);
    /* Async-signal-unsafe but safe from a dying thread: ncclCommAbort. */
    void (*context_abort)(void *ctx);
    tnt_status_t (*allreduce)(void *ctx, const void *sendbuf, void *recvbuf, size_t count,
                              tnt_dtype_t dtype, tnt_op_t op, void *stream);
    tnt_status_t (*broadcast)(void *ctx, void *buf, size_t bytes, int root, void *stream);
    tnt_status_t (*allgather)(void *ctx, const void *sendbuf, void *recvbuf, size_t bytes_per_rank,
                              void *stream);
    /* TNT_ERR_INVALID_ARG (raised, naming fn and name) unless ptr is
     * device (or managed) memory. */
    tnt_status_t (*check_device)(const void *ptr, const char *fn, const char *name);
    /* The collective set (core/api_composed.c has checked the arguments and
     * made the ranks agree): recvbuf is written on root only. */
    tnt_status_t (*reduce)(void *ctx, const void *sendbuf, void *recvbuf, size_t count,
                           tnt_dtype_t dtype, tnt_op_t op, int root, void *stream);
    /* recvcounts: elements per rank (size entries); rank r's block starts
     * at the sum of the counts before it; in place when recvbuf is this
     * rank's block of sendbuf. */
    tnt_status_t (*reduce_scatterv)(void *ctx, const void *sendbuf, void *recvbuf,
                                    const size_t *recvcounts, tnt_dtype_t dtype, tnt_op_t op,
                                    void *stream);
    /* gather, scatter, allgatherv, alltoall(v) (gpu.h) */
    tnt_status_t (*exchange)(void *ctx, const struct tnt_gpu_exchange *x, void *stream);
    /* The payload of a device message whose envelope both sides have
     * matched (gpu/device.c): exactly bytes > 0 bytes to / from peer (not
     * this rank). chunk_bytes: the host-staged chunk both sides agreed on. */
    tnt_status_t (*send)(void *ctx, const void *buf, size_t bytes, int peer, int tag,
                         size_t chunk_bytes, void *stream);
    tnt_status_t (*recv)(void *ctx, void *buf, size_t bytes, int peer, int tag, size_t chunk_bytes,
                         void *stream);
    tnt_status_t (*synchronize)(void *ctx, void *stream);
};

typedef const struct tnt_gpu_plugin_ops *(*tnt_gpu_plugin_get_fn)(
    int abi, const struct tnt_gpu_host_ops *host);

#endif
