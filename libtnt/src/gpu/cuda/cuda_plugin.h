/*
 * libtnt_cuda.so's private header: the device context shared by the entry
 * points (plugin.c), the NCCL path (nccl.c) and the host-staged path
 * (staged.c).
 */
#ifndef TNT_GPU_CUDA_CUDA_PLUGIN_H
#define TNT_GPU_CUDA_CUDA_PLUGIN_H

#include "gpu/gpu.h"
#include "gpu/plugin.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <stdatomic.h>
#include <stddef.h>

/* libtnt's side of the plugin interface, handed over at load time. */
extern const struct tnt_gpu_host_ops *g_host;

struct ctx {
    struct tnt_gpu_context_params p;
    int device;

    ncclComm_t nccl;
    /* Set once the NCCL communicator is aborted (by an error, a timeout or
     * tnt_abort); it must not be used or destroyed again. Atomic because
     * tnt_abort may come from another thread. */
    atomic_int nccl_aborted;

    /* Host staging (transport host only). */
    size_t slot_bytes;
    void *slot[TNT_GPU_STAGING_SLOTS]; /* pinned */
    int h2d_pending[TNT_GPU_STAGING_SLOTS];
    cudaStream_t copy_stream;
    cudaEvent_t entry; /* the caller's stream reached the collective */
    cudaEvent_t exit;  /* the copy stream finished the collective */
    cudaEvent_t d2h[TNT_GPU_STAGING_SLOTS];
    cudaEvent_t h2d[TNT_GPU_STAGING_SLOTS];
};

/* The failed CUDA call, recorded as a transport error. */
tnt_status_t tnt_cuda_fail(cudaError_t e, const char *what);
/* Runs the calls on the context's device and restores the caller's. */
tnt_status_t tnt_cuda_enter(const struct ctx *c, int *previous_p);
void tnt_cuda_leave(const struct ctx *c, int previous);

/* NCCL (nccl.c). */
/* Loads libnccl.so.2 once; 1 when usable, else 0 with *error_p saying why. */
int tnt_nccl_load(const char **error_p);
tnt_status_t tnt_nccl_create(struct ctx *c);
/* Aborts the communicator once (from any thread). */
void tnt_nccl_abort(struct ctx *c);
/* Flushes and destroys the communicator, bounded by the timeout. */
void tnt_nccl_destroy(struct ctx *c);
/* TNT_ERR_PEER_FAILED once the communicator was aborted. */
tnt_status_t tnt_nccl_usable(struct ctx *c, const char *what);
/* The communicator's asynchronous error, or ncclSuccess. */
ncclResult_t tnt_nccl_async_error(struct ctx *c);
/* Waits out ncclInProgress; aborts on an error or the timeout. */
tnt_status_t tnt_nccl_settle(struct ctx *c, ncclResult_t r, const char *what);
tnt_status_t tnt_nccl_allreduce(struct ctx *c, const void *sendbuf, void *recvbuf, size_t count,
                                tnt_dtype_t dtype, tnt_op_t op, cudaStream_t stream,
                                const char *fn);
tnt_status_t tnt_nccl_broadcast(struct ctx *c, void *buf, size_t bytes, int root,
                                cudaStream_t stream, const char *fn);
tnt_status_t tnt_nccl_allgather(struct ctx *c, const void *sendbuf, void *recvbuf,
                                size_t bytes_per_rank, cudaStream_t stream, const char *fn);
tnt_status_t tnt_nccl_reduce(struct ctx *c, const void *sendbuf, void *recvbuf, size_t count,
                             tnt_dtype_t dtype, tnt_op_t op, int root, cudaStream_t stream,
                             const char *fn);
/* Equal counts: one ncclReduceScatter; otherwise one ncclReduce per rank
 * (rank r the root of its block) in one NCCL group. */
tnt_status_t tnt_nccl_reduce_scatterv(struct ctx *c, const void *sendbuf, void *recvbuf,
                                      const size_t *recvcounts, tnt_dtype_t dtype, tnt_op_t op,
                                      cudaStream_t stream, const char *fn);

/* gather, scatter, allgatherv, alltoall(v): ncclSend / ncclRecv in one
 * group, the pair with itself left to the caller. */
tnt_status_t tnt_nccl_exchange(struct ctx *c, const struct tnt_gpu_exchange *x,
                               cudaStream_t stream);
/* One device message's payload (is_recv 0: ncclSend, 1: ncclRecv). */
tnt_status_t tnt_nccl_p2p(struct ctx *c, int is_recv, void *buf, size_t bytes, int peer,
                          cudaStream_t stream, const char *fn);

/* Host-staged path (staged.c). */
tnt_status_t tnt_staged_create(struct ctx *c);
void tnt_staged_free(struct ctx *c);
tnt_status_t tnt_staged_allreduce(struct ctx *c, const void *sendbuf, void *recvbuf, size_t count,
                                  tnt_dtype_t dtype, tnt_op_t op, cudaStream_t stream,
                                  const char *fn);
tnt_status_t tnt_staged_broadcast(struct ctx *c, void *buf, size_t bytes, int root,
                                  cudaStream_t stream, const char *fn);
tnt_status_t tnt_staged_allgather(struct ctx *c, const void *sendbuf, void *recvbuf,
                                  size_t bytes_per_rank, cudaStream_t stream, const char *fn);
tnt_status_t tnt_staged_reduce(struct ctx *c, const void *sendbuf, void *recvbuf, size_t count,
                               tnt_dtype_t dtype, tnt_op_t op, int root, cudaStream_t stream,
                               const char *fn);
tnt_status_t tnt_staged_reduce_scatterv(struct ctx *c, const void *sendbuf, void *recvbuf,
                                        const size_t *recvcounts, tnt_dtype_t dtype, tnt_op_t op,
                                        cudaStream_t stream, const char *fn);

/* The exchange in rounds of pinned chunks through the host alltoallv, the
 * pair with itself left to the caller. */
tnt_status_t tnt_staged_exchange(struct ctx *c, const struct tnt_gpu_exchange *x,
                                 cudaStream_t stream);
/* One device message's payload in pieces of chunk_bytes over the host
 * point-to-point transport. */
tnt_status_t tnt_staged_p2p(struct ctx *c, int is_recv, void *buf, size_t bytes, int peer, int tag,
                            size_t chunk_bytes, cudaStream_t stream, const char *fn);

#endif
