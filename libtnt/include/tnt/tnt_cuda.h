/**
 * @file tnt_cuda.h
 * @brief libtnt collectives on GPU (CUDA device) buffers.
 *
 * A separate header so that CPU-only users never see it. No CUDA type leaks
 * out of it: a stream is passed as `void *` (a `cudaStream_t`, NULL for the
 * legacy default stream), so neither this header nor its users need the CUDA
 * toolkit to compile.
 *
 * libtnt.so itself does not link CUDA or NCCL. The device code lives in
 * `libtnt_cuda.so` (installed next to libtnt, built with TNT_WITH_CUDA=ON),
 * which libtnt loads at the first device call; that library loads NCCL
 * (`libnccl.so.2`) in turn. Where either is missing, or no GPU is visible,
 * every function here returns ::TNT_ERR_UNSUPPORTED and tnt_last_error() names
 * what is missing; the host collectives are not affected.
 *
 * Transports (chosen once per communicator, identically on every rank; see
 * TNT_GPU_TRANSPORT in docs/environment.md):
 *  - ::TNT_GPU_TRANSPORT_NCCL: an NCCL communicator that libtnt creates itself
 *    (rank 0's ncclUniqueId travels over tnt_broadcast, so NCCL needs no
 *    MASTER_ADDR). Needs every rank on its own GPU.
 *  - ::TNT_GPU_TRANSPORT_HOST: device buffers are staged in chunks through
 *    pinned host memory and reduced by the host collectives (shared memory
 *    within a node, UCX between nodes). Works when ranks share a GPU.
 *
 * Stream semantics: every function is enqueued on @p stream with respect to
 * the caller's earlier work on it, and work enqueued on @p stream afterwards
 * sees the result. Results are not ready when the call returns: synchronise
 * the stream (or use tnt_device_synchronize(), which is bounded by
 * TNT_TIMEOUT) before reading them on the host. The device collectives of a
 * communicator are called by every rank in the same order; they are not
 * ordered against the host collectives (which may be issued in between).
 * Device calls may come from any thread but are serialised by libtnt.
 */
#ifndef TNT_TNT_CUDA_H
#define TNT_TNT_CUDA_H

#include <tnt/tnt.h>

#ifdef __cplusplus
extern "C" {
#endif

/** How device buffers travel between ranks. */
typedef enum {
    TNT_GPU_TRANSPORT_NONE = 0, /**< not set up yet (no device collective so far) */
    TNT_GPU_TRANSPORT_NCCL = 1, /**< NCCL communicator created by libtnt */
    TNT_GPU_TRANSPORT_HOST = 2, /**< staged through pinned host memory */
} tnt_gpu_transport_t;

/**
 * Collective: sets up the device path now rather than at the first device
 * collective (loads libtnt_cuda.so, checks that every rank sees a GPU,
 * detects ranks sharing a GPU by device UUID, picks the transport from
 * TNT_GPU_TRANSPORT and creates the NCCL communicator if that is the choice).
 * Uses the calling thread's current CUDA device. Either every rank succeeds
 * or every rank fails, with a message that names the rank at fault. A second
 * call does nothing. Torn down by tnt_finalize().
 */
TNT_API tnt_status_t tnt_device_init(tnt_comm_t *comm);

/** The transport tnt_device_init() chose; ::TNT_GPU_TRANSPORT_NONE before. */
TNT_API tnt_status_t tnt_device_transport(const tnt_comm_t *comm, tnt_gpu_transport_t *transport_p);

/** Short name of a transport: "none", "nccl" or "host". */
TNT_API const char *tnt_gpu_transport_string(tnt_gpu_transport_t transport);

/**
 * Allreduce of device buffers: as tnt_allreduce() (sendbuf == recvbuf: in
 * place; results identical on every rank), enqueued on @p stream.
 * TNT_FLOAT16 / TNT_BFLOAT16 accumulate in float32 on the host path; NCCL
 * accumulates in the element type.
 */
TNT_API tnt_status_t tnt_allreduce_device(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                          size_t count, tnt_dtype_t dtype, tnt_op_t op,
                                          void *stream);

/** Broadcast of a device buffer from @p root, enqueued on @p stream. */
TNT_API tnt_status_t tnt_broadcast_device(tnt_comm_t *comm, void *buf, size_t bytes, int root,
                                          void *stream);

/** Allgather of device buffers, as tnt_allgather(), enqueued on @p stream. */
TNT_API tnt_status_t tnt_allgather_device(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                          size_t bytes_per_rank, void *stream);

/*
 * The collective set on device buffers (docs/gpu.md, "The collective set on
 * device buffers"): the same arguments, in-place forms, checks and
 * cross-rank agreement as the host calls of tnt.h, plus @p stream. Each
 * call first checks its arguments on this rank (including that every
 * buffer it reads or writes is CUDA device memory), then runs the host
 * calls' agreement round: a bad argument on any rank fails every rank with
 * ::TNT_ERR_INVALID_ARG (that rank naming the value), ranks that pass
 * different counts, dtypes, ops or roots (or one calling the host form)
 * fail every rank with ::TNT_ERR_MISMATCH naming the ranks and values, and
 * nothing is enqueued. The agreement is a small host allgather, so these
 * calls return after every rank has entered them (the data still moves on
 * the stream), and, unlike the three calls above, they take their place in
 * the order of the communicator's host collectives: every rank issues them
 * in the same order relative to those. Reductions accumulate as
 * tnt_allreduce_device() does.
 */

/**
 * Reduce of device buffers: as tnt_reduce(), enqueued on @p stream.
 * NCCL: one ncclReduce. Host-staged: chunks through pinned memory and the
 * host allreduce (as tnt_reduce does), copied back on @p root only.
 * @p recvbuf is used on @p root only (may be NULL elsewhere).
 */
TNT_API tnt_status_t tnt_reduce_device(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                       size_t count, tnt_dtype_t dtype, tnt_op_t op, int root,
                                       void *stream);

/**
 * Reduce-scatter of device buffers: as tnt_reduce_scatter() (rank r gets
 * block r of @p recvcount elements; in place: recvbuf == sendbuf + rank *
 * recvcount elements), enqueued on @p stream. NCCL: one ncclReduceScatter.
 * Host-staged: chunks through the host allreduce, each rank copying back
 * its own block.
 */
TNT_API tnt_status_t tnt_reduce_scatter_device(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                               size_t recvcount, tnt_dtype_t dtype, tnt_op_t op,
                                               void *stream);

/**
 * The same with per-rank block sizes, as tnt_reduce_scatterv(). NCCL has no
 * such call: unequal counts become one ncclReduce per non-empty block
 * (rooted at the rank that receives it) in one NCCL group; equal counts
 * take ncclReduceScatter. Host-staged as tnt_reduce_scatter_device().
 */
TNT_API tnt_status_t tnt_reduce_scatterv_device(tnt_comm_t *comm, const void *sendbuf,
                                                void *recvbuf, const size_t *recvcounts,
                                                tnt_dtype_t dtype, tnt_op_t op, void *stream);

/**
 * Gather of device buffers: as tnt_gather() (@p recvbuf used on @p root
 * only; in place on the root: sendbuf is its own block of recvbuf),
 * enqueued on @p stream. NCCL: ncclSend / ncclRecv in one group.
 * Host-staged: pinned chunks through the host alltoallv.
 */
TNT_API tnt_status_t tnt_gather_device(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                       size_t bytes_per_rank, int root, void *stream);

/** Scatter of device buffers: as tnt_scatter() (@p sendbuf used on @p root
 *  only; in place on the root: recvbuf is its own block of sendbuf), on
 *  the paths of tnt_gather_device(). */
TNT_API tnt_status_t tnt_scatter_device(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                        size_t bytes_per_rank, int root, void *stream);

/** Allgather with per-rank sizes, as tnt_allgatherv() (no in-place form),
 *  on the paths of tnt_gather_device(). */
TNT_API tnt_status_t tnt_allgatherv_device(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                           const size_t *recvbytes, void *stream);

/** Alltoall, as tnt_alltoall() (separate buffers), on the paths of
 *  tnt_gather_device(). */
TNT_API tnt_status_t tnt_alltoall_device(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                         size_t bytes_per_rank, void *stream);

/** Alltoall with sizes per pair, as tnt_alltoallv() (every pair must agree,
 *  else ::TNT_ERR_MISMATCH on every rank), on the paths of
 *  tnt_gather_device(). */
TNT_API tnt_status_t tnt_alltoallv_device(tnt_comm_t *comm, const void *sendbuf,
                                          const size_t *sendbytes, void *recvbuf,
                                          const size_t *recvbytes, void *stream);

/*
 * Point-to-point messages on device buffers: tnt_send() / tnt_recv()'s
 * arguments, errors and matching (tags, ::TNT_ANY_SOURCE, a message may be
 * shorter than the receive buffer, a longer one fails the receive with
 * ::TNT_ERR_MISMATCH and is lost), plus @p stream. Not collective, so the
 * device path must already be set up (tnt_device_init() or an earlier
 * device collective on every rank); otherwise ::TNT_ERR_UNSUPPORTED says
 * so. A small envelope travels first over the host point-to-point
 * transport (it carries the length and names the source of an any-source
 * receive: NCCL has neither tags nor any-source receives); the payload
 * then moves by ncclSend / ncclRecv on the NCCL path or in pinned chunks
 * over the host transport on the host-staged path. Device messages have a
 * tag space of their own: a tnt_recv() never matches a tnt_send_device()
 * nor the other way round (the unmatched call times out, TNT_TIMEOUT).
 * Both calls return once the other side has matched the envelope (the
 * payload still moves on the streams). A rank cannot send a device message
 * to itself (::TNT_ERR_INVALID_ARG; there are no posted device forms).
 */

/** Sends @p bytes of device memory from @p buf to @p peer with @p tag,
 *  enqueued on @p stream (the data is read in stream order). */
TNT_API tnt_status_t tnt_send_device(tnt_comm_t *comm, const void *buf, size_t bytes, int peer,
                                     int tag, void *stream);

/** Receives one device message from @p peer (or ::TNT_ANY_SOURCE) with
 *  @p tag into @p buf (up to @p bytes), written in stream order on
 *  @p stream; @p info (may be NULL) gets the source, tag and length. */
TNT_API tnt_status_t tnt_recv_device(tnt_comm_t *comm, void *buf, size_t bytes, int peer, int tag,
                                     tnt_recv_info_t *info, void *stream);

/**
 * Waits until @p stream has finished, for at most TNT_TIMEOUT seconds,
 * checking NCCL for asynchronous errors meanwhile. On a timeout or an NCCL
 * error the NCCL communicator is aborted (ncclCommAbort) so that no kernel
 * waits forever for a dead peer, and later device collectives fail at once.
 */
TNT_API tnt_status_t tnt_device_synchronize(tnt_comm_t *comm, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* TNT_TNT_CUDA_H */
