/*
 * libtnt_cuda.so: the CUDA side of libtnt's device collectives, loaded by
 * gpu/device.c at the first device call. It links the CUDA runtime and
 * loads NCCL (libnccl.so.2) itself with dlopen, so that a machine with CUDA
 * but without NCCL still gets the host-staged path. It calls back into
 * libtnt only through the table it is handed (struct tnt_gpu_host_ops).
 *
 * Two transports:
 *  - NCCL: a communicator created by libtnt (rank 0's ncclUniqueId goes out
 *    with the host broadcast), in NCCL's nonblocking mode so that every wait
 *    for it is ours, bounded by TNT_TIMEOUT, and ends in ncclCommAbort.
 *  - host: chunks go device -> pinned host -> host allreduce -> device on a
 *    private copy stream, TNT_GPU_STAGING_SLOTS chunks in flight, ordered
 *    after the caller's stream with one event and joined back with another.
 *
 * Not thread-safe by itself: device.c serialises the calls per context.
 */
#include "gpu/gpu.h"
#include "gpu/plugin.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct tnt_gpu_host_ops *H;

/* ------------------------------------------------------------------------ */
/* NCCL, loaded at run time                                                 */
/* ------------------------------------------------------------------------ */

static struct {
    int ok;
    char error[256];
    ncclResult_t (*GetUniqueId)(ncclUniqueId *);
    ncclResult_t (*CommInitRankConfig)(ncclComm_t *, int, ncclUniqueId, int, ncclConfig_t *);
    ncclResult_t (*CommFinalize)(ncclComm_t);
    ncclResult_t (*CommDestroy)(ncclComm_t);
    ncclResult_t (*CommAbort)(ncclComm_t);
    ncclResult_t (*CommGetAsyncError)(ncclComm_t, ncclResult_t *);
    ncclResult_t (*AllReduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                              cudaStream_t);
    ncclResult_t (*Broadcast)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t,
                              cudaStream_t);
    ncclResult_t (*AllGather)(const void *, void *, size_t, ncclDataType_t, ncclComm_t,
                              cudaStream_t);
    const char *(*GetErrorString)(ncclResult_t);
} N;
static pthread_once_t g_nccl_once = PTHREAD_ONCE_INIT;

static void load_nccl(void)
{
    void *dl = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
#ifdef TNT_NCCL_BUILD_LIBRARY
    /* The NCCL found at build time, for toolkits that keep it outside the
     * loader's path (e.g. /usr/local/cuda/lib). */
    if (dl == NULL) {
        dl = dlopen(TNT_NCCL_BUILD_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    }
#endif
    if (dl == NULL) {
        snprintf(N.error, sizeof(N.error), "cannot load libnccl.so.2: %s", dlerror());
        return;
    }
    int missing = 0;
#define TNT_NCCL_SYM(field, name)             \
    do {                                      \
        *(void **)&N.field = dlsym(dl, name); \
        missing |= (N.field == NULL);         \
    } while (0)
    TNT_NCCL_SYM(GetUniqueId, "ncclGetUniqueId");
    TNT_NCCL_SYM(CommInitRankConfig, "ncclCommInitRankConfig");
    TNT_NCCL_SYM(CommFinalize, "ncclCommFinalize");
    TNT_NCCL_SYM(CommDestroy, "ncclCommDestroy");
    TNT_NCCL_SYM(CommAbort, "ncclCommAbort");
    TNT_NCCL_SYM(CommGetAsyncError, "ncclCommGetAsyncError");
    TNT_NCCL_SYM(AllReduce, "ncclAllReduce");
    TNT_NCCL_SYM(Broadcast, "ncclBroadcast");
    TNT_NCCL_SYM(AllGather, "ncclAllGather");
    TNT_NCCL_SYM(GetErrorString, "ncclGetErrorString");
#undef TNT_NCCL_SYM
    if (missing) {
        /* ncclCommInitRankConfig and nonblocking communicators: NCCL 2.14. */
        snprintf(N.error, sizeof(N.error),
                 "libnccl.so.2 lacks functions libtnt needs; NCCL 2.14 or newer is required");
        dlclose(dl);
        return;
    }
    N.ok = 1;
}

static const char *nccl_str(ncclResult_t r)
{
    return N.GetErrorString != NULL ? N.GetErrorString(r) : "unknown NCCL error";
}

/* ------------------------------------------------------------------------ */
/* Context                                                                  */
/* ------------------------------------------------------------------------ */

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

static tnt_status_t cuda_fail(cudaError_t e, const char *what)
{
    return H->error_raise(TNT_ERR_TRANSPORT, "device collectives: %s failed: %s (%s)", what,
                          cudaGetErrorString(e), cudaGetErrorName(e));
}

/* Runs the calls on the context's device and restores the caller's. */
static tnt_status_t device_enter(const struct ctx *c, int *previous_p)
{
    cudaError_t e = cudaGetDevice(previous_p);
    if (e == cudaSuccess && *previous_p != c->device) {
        e = cudaSetDevice(c->device);
    }
    return e == cudaSuccess ? TNT_OK : cuda_fail(e, "cudaSetDevice");
}

static void device_leave(const struct ctx *c, int previous)
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
    pthread_once(&g_nccl_once, load_nccl);
    peer->nccl_ok = N.ok;
    if (!N.ok) {
        H->log_debug("device collectives: %s", N.error);
    }
    peer->ok = 1;
}

/* Polls a nonblocking NCCL communicator until its pending operation is no
 * longer in progress, for at most the timeout; aborts it on error or
 * timeout, so that no rank stays in a kernel waiting for a dead peer. */
static tnt_status_t nccl_settle(struct ctx *c, ncclResult_t r, const char *what)
{
    tnt_backoff_t backoff;
    H->backoff_init(&backoff, c->p.timeout_s);
    while (r == ncclInProgress) {
        if (H->backoff_wait(&backoff) != 0) {
            N.CommAbort(c->nccl);
            atomic_store_explicit(&c->nccl_aborted, 1, memory_order_release);
            return H->error_raise(TNT_ERR_TIMEOUT,
                                  "%s: NCCL did not finish within %.0f s (a peer is gone or "
                                  "stuck); the NCCL communicator was aborted; see TNT_TIMEOUT",
                                  what, c->p.timeout_s);
        }
        if (N.CommGetAsyncError(c->nccl, &r) != ncclSuccess) {
            break;
        }
    }
    if (r != ncclSuccess) {
        N.CommAbort(c->nccl);
        atomic_store_explicit(&c->nccl_aborted, 1, memory_order_release);
        return H->error_raise(TNT_ERR_TRANSPORT,
                              "%s: NCCL failed: %s; the NCCL communicator was aborted (set "
                              "NCCL_DEBUG=WARN for NCCL's own report)",
                              what, nccl_str(r));
    }
    return TNT_OK;
}

static tnt_status_t nccl_usable(struct ctx *c, const char *what)
{
    if (atomic_load_explicit(&c->nccl_aborted, memory_order_acquire)) {
        return H->error_raise(TNT_ERR_PEER_FAILED,
                              "%s: the NCCL communicator was aborted after an earlier error; "
                              "the job cannot continue, restart it",
                              what);
    }
    return TNT_OK;
}

/* Collective: rank 0 makes the unique id and broadcasts it (with its status,
 * so that a failure there fails everyone at once), every rank initialises,
 * and an allgather of the outcomes makes every rank agree. */
static tnt_status_t nccl_create(struct ctx *c)
{
    struct {
        int32_t status;
        char reason[128];
        ncclUniqueId id;
    } msg;
    tnt_status_t status;

    memset(&msg, 0, sizeof(msg));
    if (c->p.rank == 0) {
        ncclResult_t r = N.GetUniqueId(&msg.id);
        msg.status = (int32_t)r;
        if (r != ncclSuccess) {
            snprintf(msg.reason, sizeof(msg.reason), "%s", nccl_str(r));
        }
    }
    status = H->broadcast(c->p.comm, &msg, sizeof(msg), 0);
    if (status != TNT_OK) {
        return status;
    }
    if (msg.status != ncclSuccess) {
        return H->error_raise(TNT_ERR_TRANSPORT,
                              "NCCL set-up: rank 0 could not create the NCCL unique id: %.128s; "
                              "set NCCL_DEBUG=WARN, or use TNT_GPU_TRANSPORT=host",
                              msg.reason);
    }

    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    int32_t mine = 0; /* 0 = ok */
    ncclResult_t r = N.CommInitRankConfig(&c->nccl, c->p.size, msg.id, c->p.rank, &config);
    if (r == ncclSuccess || r == ncclInProgress) {
        status = nccl_settle(c, r, "NCCL set-up (ncclCommInitRankConfig)");
        mine = status == TNT_OK ? 0 : 1;
    } else {
        H->error_raise(TNT_ERR_TRANSPORT, "NCCL set-up: ncclCommInitRankConfig failed: %s",
                       nccl_str(r));
        mine = 1;
        c->nccl = NULL;
        atomic_store_explicit(&c->nccl_aborted, 1, memory_order_release);
    }
    int32_t *all = malloc((size_t)c->p.size * sizeof(*all));
    if (all == NULL) {
        return H->error_raise(TNT_ERR_NO_MEMORY, "NCCL set-up: out of memory");
    }
    status = H->allgather(c->p.comm, &mine, all, sizeof(mine));
    int bad = -1;
    for (int r2 = 0; status == TNT_OK && r2 < c->p.size && bad < 0; r2++) {
        if (all[r2] != 0) {
            bad = r2;
        }
    }
    free(all);
    if (status == TNT_OK && bad < 0) {
        return TNT_OK;
    }
    if (!atomic_load_explicit(&c->nccl_aborted, memory_order_acquire) && c->nccl != NULL) {
        N.CommAbort(c->nccl);
        atomic_store_explicit(&c->nccl_aborted, 1, memory_order_release);
    }
    if (status != TNT_OK) {
        return status;
    }
    if (bad == c->p.rank) {
        return TNT_ERR_TRANSPORT; /* raised above */
    }
    return H->error_raise(TNT_ERR_PEER_FAILED,
                          "NCCL set-up failed on rank %d (see its message); use "
                          "TNT_GPU_TRANSPORT=host to avoid NCCL",
                          bad);
}

static void staging_free(struct ctx *c)
{
    for (int s = 0; s < TNT_GPU_STAGING_SLOTS; s++) {
        if (c->slot[s] != NULL) {
            cudaFreeHost(c->slot[s]);
        }
        if (c->d2h[s] != NULL) {
            cudaEventDestroy(c->d2h[s]);
        }
        if (c->h2d[s] != NULL) {
            cudaEventDestroy(c->h2d[s]);
        }
    }
    if (c->entry != NULL) {
        cudaEventDestroy(c->entry);
    }
    if (c->exit != NULL) {
        cudaEventDestroy(c->exit);
    }
    if (c->copy_stream != NULL) {
        cudaStreamDestroy(c->copy_stream);
    }
}

/* Pinned chunk buffers, events and the copy stream, all made once here so
 * that the collectives allocate nothing. */
static tnt_status_t staging_create(struct ctx *c)
{
    cudaError_t e;
    /* An allgather chunk holds one piece per rank: at least a byte each. */
    c->slot_bytes = c->p.chunk_bytes > (size_t)c->p.size ? c->p.chunk_bytes : (size_t)c->p.size;
    e = cudaStreamCreateWithFlags(&c->copy_stream, cudaStreamNonBlocking);
    if (e == cudaSuccess) {
        e = cudaEventCreateWithFlags(&c->entry, cudaEventDisableTiming);
    }
    if (e == cudaSuccess) {
        e = cudaEventCreateWithFlags(&c->exit, cudaEventDisableTiming);
    }
    for (int s = 0; e == cudaSuccess && s < TNT_GPU_STAGING_SLOTS; s++) {
        e = cudaHostAlloc(&c->slot[s], c->slot_bytes, cudaHostAllocPortable);
        if (e == cudaSuccess) {
            e = cudaEventCreateWithFlags(&c->d2h[s], cudaEventDisableTiming);
        }
        if (e == cudaSuccess) {
            e = cudaEventCreateWithFlags(&c->h2d[s], cudaEventDisableTiming);
        }
    }
    if (e != cudaSuccess) {
        staging_free(c);
        return H->error_raise(TNT_ERR_NO_MEMORY,
                              "host-staged device collectives: cannot set up %d pinned buffers "
                              "of %zu KiB and their stream: %s; lower TNT_GPU_STAGING_KB",
                              TNT_GPU_STAGING_SLOTS, c->slot_bytes >> 10, cudaGetErrorString(e));
    }
    return TNT_OK;
}

static tnt_status_t context_create(const struct tnt_gpu_context_params *params, void **ctx_p)
{
    struct ctx *c = calloc(1, sizeof(*c));
    tnt_status_t status;
    if (c == NULL) {
        return H->error_raise(TNT_ERR_NO_MEMORY, "device collectives: out of memory");
    }
    c->p = *params;
    cudaError_t e = cudaGetDevice(&c->device);
    if (e != cudaSuccess) {
        status = cuda_fail(e, "cudaGetDevice");
        goto err_free;
    }
    if (params->transport == TNT_GPU_TRANSPORT_NCCL) {
        status = nccl_create(c);
    } else {
        status = staging_create(c);
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
    if (c->p.transport == TNT_GPU_TRANSPORT_NCCL && c->nccl != NULL &&
        atomic_exchange_explicit(&c->nccl_aborted, 1, memory_order_acq_rel) == 0) {
        N.CommAbort(c->nccl);
    }
}

static void context_destroy(void *ctx)
{
    struct ctx *c = ctx;
    if (c->p.transport == TNT_GPU_TRANSPORT_NCCL) {
        if (c->nccl != NULL && !atomic_load_explicit(&c->nccl_aborted, memory_order_acquire)) {
            /* Finalize flushes outstanding work; bounded, and aborted if a
             * peer never gets there. */
            if (nccl_settle(c, N.CommFinalize(c->nccl), "tnt_finalize (ncclCommFinalize)") ==
                TNT_OK) {
                N.CommDestroy(c->nccl);
            }
        }
    } else {
        int previous;
        if (device_enter(c, &previous) == TNT_OK) {
            (void)cudaStreamSynchronize(c->copy_stream);
            staging_free(c);
            device_leave(c, previous);
        }
    }
    free(c);
}

/* ------------------------------------------------------------------------ */
/* Pointer and type checks                                                  */
/* ------------------------------------------------------------------------ */

static tnt_status_t check_device_ptr(const void *ptr, const char *fn, const char *name)
{
    struct cudaPointerAttributes attr;
    cudaError_t e = cudaPointerGetAttributes(&attr, ptr);
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* clear the sticky-free error state */
        return H->error_raise(TNT_ERR_INVALID_ARG, "%s: %s %p is not CUDA memory (%s)", fn, name,
                              ptr, cudaGetErrorString(e));
    }
    if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged) {
        return H->error_raise(TNT_ERR_INVALID_ARG,
                              "%s: %s %p is host memory; use the host collective "
                              "(tnt_allreduce, tnt_broadcast, tnt_allgather) for it",
                              fn, name, ptr);
    }
    return TNT_OK;
}

static ncclDataType_t nccl_dtype(tnt_dtype_t dtype)
{
    switch (dtype) {
    case TNT_FLOAT32:
        return ncclFloat32;
    case TNT_FLOAT64:
        return ncclFloat64;
    case TNT_FLOAT16:
        return ncclFloat16;
    case TNT_BFLOAT16:
        return ncclBfloat16;
    case TNT_INT32:
        return ncclInt32;
    case TNT_INT64:
    default:
        return ncclInt64;
    }
}

static ncclRedOp_t nccl_op(tnt_op_t op)
{
    switch (op) {
    case TNT_SUM:
        return ncclSum;
    case TNT_PROD:
        return ncclProd;
    case TNT_MIN:
        return ncclMin;
    case TNT_MAX:
        return ncclMax;
    case TNT_AVG:
    default:
        /* Integers: sum, then truncating division by the rank count, as on
         * the host path. Floats: NCCL pre-multiplies by 1/size. */
        return ncclAvg;
    }
}

/* ------------------------------------------------------------------------ */
/* Host-staged pipeline                                                     */
/* ------------------------------------------------------------------------ */

static tnt_status_t wait_event(struct ctx *c, cudaEvent_t event, const char *what, size_t chunk)
{
    tnt_backoff_t backoff;
    H->backoff_init(&backoff, c->p.timeout_s);
    for (;;) {
        cudaError_t e = cudaEventQuery(event);
        if (e == cudaSuccess) {
            return TNT_OK;
        }
        if (e != cudaErrorNotReady) {
            return cuda_fail(e, what);
        }
        if (H->backoff_wait(&backoff) != 0) {
            return H->error_raise(TNT_ERR_TIMEOUT,
                                  "%s: the GPU copy of chunk %zu did not finish within %.0f s; "
                                  "is the GPU hung, or the stream blocked by other work? see "
                                  "TNT_TIMEOUT",
                                  what, chunk, c->p.timeout_s);
        }
    }
}

/* Before the host writes a slot: its previous copy back to the device
 * (maybe from the previous collective) must have read it. */
static tnt_status_t slot_acquire(struct ctx *c, int s, const char *what, size_t chunk)
{
    if (!c->h2d_pending[s]) {
        return TNT_OK;
    }
    tnt_status_t status = wait_event(c, c->h2d[s], what, chunk);
    if (status == TNT_OK) {
        c->h2d_pending[s] = 0;
    }
    return status;
}

enum stage_kind { STAGE_ALLREDUCE, STAGE_BROADCAST, STAGE_ALLGATHER };

struct stage_args {
    enum stage_kind kind;
    const char *fn;
    const char *send;
    char *recv;
    size_t esize;
    tnt_dtype_t dtype;
    tnt_op_t op;
    int root;
    size_t bytes_per_rank; /* allgather */
};

/* Copy-out of chunk i into its slot (skipped where the chunk is not sent). */
static tnt_status_t stage_out(struct ctx *c, const struct stage_args *a,
                              const tnt_gpu_chunks_t *plan, size_t i)
{
    size_t off, n;
    int s = (int)(i % TNT_GPU_STAGING_SLOTS);
    if (a->kind == STAGE_BROADCAST && c->p.rank != a->root) {
        return TNT_OK;
    }
    /* No host wait for the slot's previous copy-in: this copy-out is queued
     * behind it on the same stream. */
    tnt_gpu_chunk_at(plan, i, &off, &n);
    char *dst = c->slot[s];
    if (a->kind == STAGE_ALLGATHER) {
        dst += (size_t)c->p.rank * n; /* own piece of the gathered chunk */
    }
    cudaError_t e = cudaMemcpyAsync(dst, a->send + off * a->esize, n * a->esize,
                                    cudaMemcpyDeviceToHost, c->copy_stream);
    if (e == cudaSuccess) {
        e = cudaEventRecord(c->d2h[s], c->copy_stream);
    }
    return e == cudaSuccess ? TNT_OK : cuda_fail(e, "cudaMemcpyAsync (device to host)");
}

/* Host collective on chunk i's slot, then its copy back. */
static tnt_status_t stage_in(struct ctx *c, const struct stage_args *a,
                             const tnt_gpu_chunks_t *plan, size_t i)
{
    size_t off, n;
    int s = (int)(i % TNT_GPU_STAGING_SLOTS);
    int sent = !(a->kind == STAGE_BROADCAST && c->p.rank != a->root);
    tnt_status_t status;
    cudaError_t e = cudaSuccess;

    tnt_gpu_chunk_at(plan, i, &off, &n);
    if (sent) {
        /* The copy-out came after the slot's previous copy-in on the copy
         * stream, so that one is done too. */
        status = wait_event(c, c->d2h[s], a->fn, i);
        if (status == TNT_OK) {
            c->h2d_pending[s] = 0;
        }
    } else {
        status = slot_acquire(c, s, a->fn, i);
    }
    if (status != TNT_OK) {
        return status;
    }
    char *slot = c->slot[s];
    switch (a->kind) {
    case STAGE_ALLREDUCE:
        status = H->allreduce(c->p.comm, slot, slot, n, a->dtype, a->op);
        if (status == TNT_OK) {
            e = cudaMemcpyAsync(a->recv + off * a->esize, slot, n * a->esize,
                                cudaMemcpyHostToDevice, c->copy_stream);
        }
        break;
    case STAGE_BROADCAST:
        status = H->broadcast(c->p.comm, slot, n, a->root);
        /* The root's buffer already holds the data. */
        if (status == TNT_OK && c->p.rank != a->root) {
            e = cudaMemcpyAsync(a->recv + off, slot, n, cudaMemcpyHostToDevice, c->copy_stream);
        }
        break;
    case STAGE_ALLGATHER:
        status = H->allgather(c->p.comm, slot + (size_t)c->p.rank * n, slot, n);
        if (status == TNT_OK) {
            /* Piece r of the chunk goes to row r of recv, at the chunk's
             * offset within the row. */
            e = cudaMemcpy2DAsync(a->recv + off, a->bytes_per_rank, slot, n, n, (size_t)c->p.size,
                                  cudaMemcpyHostToDevice, c->copy_stream);
        }
        break;
    }
    if (status != TNT_OK) {
        return status;
    }
    if (e == cudaSuccess) {
        e = cudaEventRecord(c->h2d[s], c->copy_stream);
    }
    if (e != cudaSuccess) {
        return cuda_fail(e, "cudaMemcpyAsync (host to device)");
    }
    c->h2d_pending[s] = 1;
    return TNT_OK;
}

/* The pipeline: chunk i+SLOTS-1 is copied out while the host works on
 * chunk i and chunk i-1 is copied back in. The copy stream is ordered after
 * the caller's stream on entry and the caller's stream after it on exit, so
 * the result is stream-ordered like a kernel; the host only waits for the
 * copy-outs it needs. Slot reuse is safe without host waits for allreduce
 * and allgather (a copy-out is queued behind the copy-in that last read the
 * slot); broadcast receivers wait explicitly (slot_acquire). */
static tnt_status_t stage_run(struct ctx *c, const struct stage_args *a,
                              const tnt_gpu_chunks_t *plan, cudaStream_t stream)
{
    int previous;
    tnt_status_t status = device_enter(c, &previous);
    if (status != TNT_OK) {
        return status;
    }
    cudaError_t e = cudaEventRecord(c->entry, stream);
    if (e == cudaSuccess) {
        e = cudaStreamWaitEvent(c->copy_stream, c->entry, 0);
    }
    if (e != cudaSuccess) {
        status = cuda_fail(e, "ordering after the caller's stream");
        goto out;
    }
    size_t ahead = TNT_GPU_STAGING_SLOTS - 1;
    for (size_t i = 0; i < plan->num_chunks && i < ahead && status == TNT_OK; i++) {
        status = stage_out(c, a, plan, i);
    }
    for (size_t i = 0; i < plan->num_chunks && status == TNT_OK; i++) {
        status = stage_in(c, a, plan, i);
        if (status == TNT_OK && i + ahead < plan->num_chunks) {
            status = stage_out(c, a, plan, i + ahead);
        }
    }
out:
    /* Even after a failure the caller's stream waits for the copies already
     * queued, so nothing it does next races with them. */
    e = cudaEventRecord(c->exit, c->copy_stream);
    if (e == cudaSuccess) {
        e = cudaStreamWaitEvent(stream, c->exit, 0);
    }
    if (e != cudaSuccess && status == TNT_OK) {
        status = cuda_fail(e, "ordering the caller's stream after the copies");
    }
    device_leave(c, previous);
    return status;
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
    tnt_status_t status = device_enter(c, &previous);
    if (status != TNT_OK) {
        return status;
    }
    cudaError_t e =
        cudaMemcpyAsync(recvbuf, sendbuf, bytes, cudaMemcpyDeviceToDevice, (cudaStream_t)stream);
    device_leave(c, previous);
    return e == cudaSuccess ? TNT_OK : cuda_fail(e, "cudaMemcpyAsync (one rank)");
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
        return one_rank_copy(c, sendbuf, recvbuf, count * H->dtype_size(dtype), stream);
    }
    if (c->p.transport == TNT_GPU_TRANSPORT_NCCL) {
        status = nccl_usable(c, fn);
        if (status == TNT_OK) {
            status = nccl_settle(c,
                                 N.AllReduce(sendbuf, recvbuf, count, nccl_dtype(dtype),
                                             nccl_op(op), c->nccl, (cudaStream_t)stream),
                                 fn);
        }
        return status;
    }
    size_t esize = H->dtype_size(dtype);
    struct stage_args a = { .kind = STAGE_ALLREDUCE,
                            .fn = fn,
                            .send = sendbuf,
                            .recv = recvbuf,
                            .esize = esize,
                            .dtype = dtype,
                            .op = op };
    tnt_gpu_chunks_t plan = tnt_gpu_chunks_plan(count, esize, c->slot_bytes);
    return stage_run(c, &a, &plan, (cudaStream_t)stream);
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
        status = nccl_usable(c, fn);
        if (status == TNT_OK) {
            status = nccl_settle(
                c, N.Broadcast(buf, buf, bytes, ncclInt8, root, c->nccl, (cudaStream_t)stream), fn);
        }
        return status;
    }
    struct stage_args a = {
        .kind = STAGE_BROADCAST, .fn = fn, .send = buf, .recv = buf, .esize = 1, .root = root
    };
    tnt_gpu_chunks_t plan = tnt_gpu_chunks_plan(bytes, 1, c->slot_bytes);
    return stage_run(c, &a, &plan, (cudaStream_t)stream);
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
        status = nccl_usable(c, fn);
        if (status == TNT_OK) {
            status = nccl_settle(c,
                                 N.AllGather(sendbuf, recvbuf, bytes_per_rank, ncclInt8, c->nccl,
                                             (cudaStream_t)stream),
                                 fn);
        }
        return status;
    }
    struct stage_args a = { .kind = STAGE_ALLGATHER,
                            .fn = fn,
                            .send = sendbuf,
                            .recv = recvbuf,
                            .esize = 1,
                            .bytes_per_rank = bytes_per_rank };
    /* Each chunk gathers one piece per rank into one slot. */
    tnt_gpu_chunks_t plan =
        tnt_gpu_chunks_plan(bytes_per_rank, 1, c->slot_bytes / (size_t)c->p.size);
    return stage_run(c, &a, &plan, (cudaStream_t)stream);
}

static tnt_status_t synchronize(void *ctx, void *stream)
{
    const char *fn = "tnt_device_synchronize";
    struct ctx *c = ctx;
    int nccl = c->p.transport == TNT_GPU_TRANSPORT_NCCL;
    tnt_status_t status = nccl ? nccl_usable(c, fn) : TNT_OK;
    tnt_backoff_t backoff;

    if (status != TNT_OK) {
        return status;
    }
    H->backoff_init(&backoff, c->p.timeout_s);
    for (;;) {
        cudaError_t e = cudaStreamQuery((cudaStream_t)stream);
        if (e == cudaSuccess) {
            return TNT_OK;
        }
        if (e != cudaErrorNotReady) {
            return cuda_fail(e, "cudaStreamQuery");
        }
        if (nccl) {
            ncclResult_t async = ncclSuccess;
            if (N.CommGetAsyncError(c->nccl, &async) == ncclSuccess && async != ncclSuccess &&
                async != ncclInProgress) {
                return nccl_settle(c, async, fn);
            }
        }
        if (H->backoff_wait(&backoff) != 0) {
            if (nccl) {
                context_abort(c);
            }
            return H->error_raise(TNT_ERR_TIMEOUT,
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
    .synchronize = synchronize,
};

__attribute__((visibility("default"))) const struct tnt_gpu_plugin_ops *
tnt_gpu_plugin_get(int abi, const struct tnt_gpu_host_ops *host)
{
    if (abi != TNT_GPU_PLUGIN_ABI || host == NULL || host->abi != TNT_GPU_PLUGIN_ABI) {
        return NULL;
    }
    H = host;
    return &g_ops;
}
