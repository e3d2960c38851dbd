/*
 * The device (GPU) path of libtnt, the part that needs no CUDA: transport
 * selection and duplicate-GPU detection (plan.c) and chunk planning
 * (chunks.c), pure and unit-tested, and the loader of libtnt_cuda.so
 * behind the public tnt_cuda.h functions (device.c). Nothing here includes
 * a CUDA header.
 *
 * Layering: gpu sits beside fusion, above coll (the device path calls the
 * host collectives for staging and for the NCCL bootstrap). core/init.c
 * calls tnt_gpu_finalize() and tnt_gpu_abort() only.
 */
#ifndef TNT_GPU_GPU_H
#define TNT_GPU_GPU_H

#include <tnt/tnt.h>
#include <tnt/tnt_cuda.h>

#include <stddef.h>
#include <stdint.h>

#include "util/settings.h"

/* ---- settings ------------------------------------------------------------- */

/* What TNT_GPU_TRANSPORT asks for; parsed with every other TNT_* variable by
 * util/settings.c at tnt_init (comm->settings). */
typedef tnt_settings_gpu_t tnt_gpu_request_t;
#define TNT_GPU_REQUEST_AUTO TNT_SETTINGS_GPU_AUTO
#define TNT_GPU_REQUEST_NCCL TNT_SETTINGS_GPU_NCCL
#define TNT_GPU_REQUEST_HOST TNT_SETTINGS_GPU_HOST

/* Chunks in flight on the host-staged path: while the host reduces chunk i,
 * chunk i+1 is being copied out and chunk i-1 copied back in. Each chunk is
 * TNT_GPU_STAGING_KB. */
#define TNT_GPU_STAGING_SLOTS 3

/* ---- selection ------------------------------------------------------------ */

/* What every rank contributes to the selection allgather (fixed layout, sent
 * as bytes). ok == 0: this rank cannot do device collectives; reason says
 * why and error is the status it reports (0: TNT_ERR_UNSUPPORTED). */
struct tnt_gpu_peer {
    uint8_t uuid[16]; /* cudaDeviceProp.uuid of the rank's current device */
    int32_t ok;
    int32_t nccl_ok; /* libnccl.so.2 could be loaded */
    int32_t request; /* tnt_gpu_request_t */
    int32_t device;  /* CUDA device ordinal, for messages */
    int32_t error;   /* tnt_status_t when !ok, e.g. a bad setting */
    char reason[384];
};

/* Collective-free and pure: given every rank's peer record (the same array
 * on every rank), decides the transport identically everywhere. Fails (the
 * same way on every rank) when some rank is not ok, when the ranks ask for
 * different transports, or when NCCL is asked for but unusable (missing on
 * some rank, or two ranks on one GPU). auto picks NCCL when every rank has
 * NCCL and its own GPU, host staging otherwise. */
tnt_status_t tnt_gpu_select(const struct tnt_gpu_peer *peers, int size,
                            tnt_gpu_transport_t *transport_p);

/* Finds two ranks whose UUIDs are equal. Returns 1 and sets *a_p < *b_p to
 * the lowest such pair (by the first rank, then the second), 0 when all
 * differ, -1 when out of memory. */
int tnt_gpu_find_duplicate(const struct tnt_gpu_peer *peers, int size, int *a_p, int *b_p);

/* ---- chunk planning for the host-staged path ------------------------------ */

/* Chunks of a buffer of count elements of esize bytes, each at most
 * chunk_bytes (rounded down to whole elements, at least one element). */
typedef struct {
    size_t count;       /* elements in all */
    size_t chunk_elems; /* elements per chunk (the last may be smaller) */
    size_t num_chunks;  /* 0 for count == 0 */
} tnt_gpu_chunks_t;

tnt_gpu_chunks_t tnt_gpu_chunks_plan(size_t count, size_t esize, size_t chunk_bytes);
/* Element offset and length of chunk i (i < num_chunks). */
void tnt_gpu_chunk_at(const tnt_gpu_chunks_t *plan, size_t i, size_t *offset_p, size_t *count_p);

/* ---- the collective set on device buffers (core/api_composed.c) ----------- */

/* core checks the arguments and runs the agreement round of the host calls
 * (so a device call and a host call fail alike), and gpu/ moves the data.
 * tnt_gpu_enter sets the device path up (collective, on first use) and
 * locks it: the agreement and the data movement of one call are not
 * interleaved with another thread's device call. */
struct tnt_gpu;
tnt_status_t tnt_gpu_enter(tnt_comm_t *comm, const char *fn, struct tnt_gpu **gpu_p);
void tnt_gpu_leave(struct tnt_gpu *gpu);
/* Local: TNT_ERR_INVALID_ARG (raised) unless ptr is CUDA device memory. */
tnt_status_t tnt_gpu_check_device(struct tnt_gpu *gpu, const void *ptr, const char *fn,
                                  const char *name);
tnt_status_t tnt_gpu_reduce(struct tnt_gpu *gpu, const void *sendbuf, void *recvbuf, size_t count,
                            tnt_dtype_t dtype, tnt_op_t op, int root, void *stream);
tnt_status_t tnt_gpu_reduce_scatterv(struct tnt_gpu *gpu, const void *sendbuf, void *recvbuf,
                                     const size_t *recvcounts, tnt_dtype_t dtype, tnt_op_t op,
                                     void *stream);

/* gather, scatter, allgatherv and alltoall(v), all as one exchange of
 * bytes between pairs of ranks (core builds it from the agreed
 * arguments). This rank sends send_bytes[j] bytes from send +
 * send_displs[j] to rank j and receives recv_bytes[r] bytes from rank r
 * into recv + recv_displs[r]; all_send[r * size + j] is what rank r sends
 * to rank j, the same matrix on every rank (the host-staged path chunks
 * every pair alike with it). The pair with itself is a device copy,
 * skipped when source and destination are one (the in-place forms). */
struct tnt_gpu_exchange {
    const char *fn;
    const void *send;
    void *recv;
    const size_t *send_bytes;
    const size_t *send_displs;
    const size_t *recv_bytes;
    const size_t *recv_displs;
    const size_t *all_send;
};
tnt_status_t tnt_gpu_exchange(struct tnt_gpu *gpu, const struct tnt_gpu_exchange *x, void *stream);

/* Point-to-point on device buffers (core/api_p2p.c checks the arguments).
 * Not collective: the device path must be set up already (tnt_device_init
 * or an earlier device collective); otherwise TNT_ERR_UNSUPPORTED saying
 * so. An envelope on the host point-to-point transport, in a tag space of
 * its own, carries the length and resolves an any-source receive; the
 * payload then moves by NCCL or host-staged (gpu/device.c). */
tnt_status_t tnt_gpu_send(tnt_comm_t *comm, const void *buf, size_t bytes, int peer, int tag,
                          void *stream, const char *fn);
tnt_status_t tnt_gpu_recv(tnt_comm_t *comm, void *buf, size_t bytes, int peer, int tag,
                          tnt_recv_info_t *info, void *stream, const char *fn);

/* ---- hooks for core -------------------------------------------------------- */

/* tnt_finalize: destroys the device context (NCCL communicator, pinned
 * buffers). tnt_abort: aborts the NCCL communicator first so no kernel keeps
 * waiting for a peer. Both are no-ops when no device call was made. */
void tnt_gpu_finalize(tnt_comm_t *comm);
void tnt_gpu_abort(tnt_comm_t *comm);

#endif
