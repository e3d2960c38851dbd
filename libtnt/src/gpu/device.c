/*
 * The public device-buffer API (tnt_cuda.h): argument checks, the lazy,
 * collective set-up of the device path, and the loader of libtnt_cuda.so.
 *
 * libtnt.so links no CUDA library. The CUDA and NCCL code is in
 * libtnt_cuda.so, loaded here with dlopen at the first device call, so that
 * the same libtnt (and the Python extension over it) runs on machines
 * without CUDA; there the device calls return TNT_ERR_UNSUPPORTED naming
 * what is missing.
 *
 * Set-up is collective and all-or-nothing: every rank contributes one
 * record (can it do device collectives at all, and if not why; its GPU's
 * UUID; whether NCCL loads; what TNT_GPU_TRANSPORT says) to one allgather,
 * and every rank runs the same selection over the same records. A rank that
 * fails locally (bad setting, no GPU, plugin missing) still takes part in
 * the allgather, so its peers fail at once with a message naming it instead
 * of waiting for TNT_TIMEOUT.
 */
#include "gpu/gpu.h"
#include "gpu/plugin.h"

#include "coll/coll.h"
#include "comm/comm.h"
#include "p2p/p2p.h"
#include "util/log.h"
#include "util/wait.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TNT_GPU_PLUGIN_NAME "libtnt_cuda.so"

/* Per communicator, created at the first device call (comm->gpu). */
struct tnt_gpu {
    /* Serialises device calls: the host-staged path owns one set of pinned
     * chunk buffers and the NCCL calls of one communicator must be issued
     * in the same order on every rank. */
    pthread_mutex_t lock;
    tnt_gpu_transport_t transport; /* NONE until set-up succeeded */
    void *ctx;                     /* the plugin's context */
};

/* Serialises the creation of comm->gpu by concurrent first callers. */
static pthread_mutex_t g_gpu_create_lock = PTHREAD_MUTEX_INITIALIZER;

/* ------------------------------------------------------------------------ */
/* Loading libtnt_cuda.so (once per process; never unloaded, CUDA libraries */
/* do not support being unloaded)                                           */
/* ------------------------------------------------------------------------ */

static pthread_once_t g_plugin_once = PTHREAD_ONCE_INIT;
static const struct tnt_gpu_plugin_ops *g_plugin;
static char g_plugin_error[512];

/* The host collectives the device paths use: the collective layer inside
 * the progress section, as core/'s public calls do, without their argument
 * checks (the buffers and arguments are libtnt's own). Not the public calls:
 * gpu/ sits below core/. The allgather also serves the set-up. */
static tnt_status_t host_allgather(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                   size_t bytes_per_rank)
{
    if (bytes_per_rank == 0) {
        return TNT_OK;
    }
    tnt_status_t status = tnt_progress_enter(comm);
    if (status == TNT_OK) {
        status = tnt_coll_allgather(comm, sendbuf, recvbuf, bytes_per_rank);
        tnt_progress_leave(comm);
    }
    return status;
}

#ifdef TNT_WITH_CUDA
/* What libtnt hands to libtnt_cuda.so (plugin.h). */
static void host_log_debug(const char *fmt, ...)
{
    if (!tnt_log_enabled(TNT_LOG_DEBUG)) {
        return;
    }
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    tnt_log(TNT_LOG_DEBUG, "%s", msg);
}

static tnt_status_t host_allreduce(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                   size_t count, tnt_dtype_t dtype, tnt_op_t op)
{
    if (count == 0) {
        return TNT_OK;
    }
    tnt_status_t status = tnt_progress_enter(comm);
    if (status == TNT_OK) {
        status = tnt_coll_allreduce(comm, sendbuf, recvbuf, count, dtype, op);
        tnt_progress_leave(comm);
    }
    return status;
}

static tnt_status_t host_broadcast(tnt_comm_t *comm, void *buf, size_t bytes, int root)
{
    if (bytes == 0) {
        return TNT_OK;
    }
    tnt_status_t status = tnt_progress_enter(comm);
    if (status == TNT_OK) {
        status = tnt_coll_broadcast(comm, buf, bytes, root);
        tnt_progress_leave(comm);
    }
    return status;
}

static tnt_status_t host_alltoallv(tnt_comm_t *comm, const void *sendbuf, const size_t *sendbytes,
                                   void *recvbuf, const size_t *all_send)
{
    tnt_status_t status = tnt_progress_enter(comm);
    if (status == TNT_OK) {
        status = tnt_coll_alltoallv(comm, sendbuf, sendbytes, recvbuf, all_send);
        tnt_progress_leave(comm);
    }
    return status;
}

/* One blocking message of exactly bytes bytes in the given space. */
static tnt_status_t host_p2p(tnt_comm_t *comm, enum tnt_p2p_space space, int is_recv, void *buf,
                             size_t bytes, int peer, int tag, const char *fn,
                             tnt_ucx_recv_result_t *result_p)
{
    struct tnt_p2p_op op;
    tnt_status_t status = tnt_p2p_post_in(comm, &op, space, is_recv, buf, bytes, peer, tag, fn);
    if (status == TNT_OK) {
        status = tnt_p2p_wait(comm, &op);
    }
    if (status == TNT_OK && result_p != NULL) {
        *result_p = op.result;
    }
    return status;
}

static tnt_status_t host_p2p_data(tnt_comm_t *comm, int is_recv, void *buf, size_t bytes, int peer,
                                  int tag, const char *fn)
{
    tnt_ucx_recv_result_t result;
    tnt_status_t status =
        host_p2p(comm, TNT_P2P_DEVICE_DATA, is_recv, buf, bytes, peer, tag, fn, &result);
    if (status == TNT_OK && is_recv && result.bytes != bytes) {
        status = tnt_error_raise(TNT_ERR_MISMATCH,
                                 "%s: a piece of rank %d's device message (tag %d) has %zu bytes, "
                                 "%zu were expected",
                                 fn, peer, tag, result.bytes, bytes);
    }
    return status;
}

static const struct tnt_gpu_host_ops g_host_ops = {
    .abi = TNT_GPU_PLUGIN_ABI,
    .allreduce = host_allreduce,
    .broadcast = host_broadcast,
    .allgather = host_allgather,
    .error_raise = tnt_error_raise,
    .error_set = tnt_error_set,
    .dtype_size = tnt_dtype_size,
    .alltoallv = host_alltoallv,
    .p2p_data = host_p2p_data,
    .log_debug = host_log_debug,
    .backoff_init = tnt_backoff_init,
    .backoff_wait = tnt_backoff_wait,
};

/* The plugin sits next to libtnt.so (build tree and install alike); where
 * libtnt is linked statically that directory is the executable's, so the
 * dynamic loader's own search (RUNPATH, LD_LIBRARY_PATH) comes second. */
static void *open_plugin(char *errors, size_t errors_size)
{
    Dl_info info;
    void *handle = NULL;
    int used = 0;

    if (dladdr((void *)&tnt_device_init, &info) != 0 && info.dli_fname != NULL) {
        const char *slash = strrchr(info.dli_fname, '/');
        if (slash != NULL) {
            char path[4096];
            snprintf(path, sizeof(path), "%.*s/%s", (int)(slash - info.dli_fname), info.dli_fname,
                     TNT_GPU_PLUGIN_NAME);
            handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
            if (handle != NULL) {
                return handle;
            }
            used = snprintf(errors, errors_size, "%s; ", dlerror());
        }
    }
    handle = dlopen(TNT_GPU_PLUGIN_NAME, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL && used >= 0 && (size_t)used < errors_size) {
        snprintf(errors + used, errors_size - (size_t)used, "%s", dlerror());
    }
    return handle;
}
#endif

static void load_plugin(void)
{
#ifdef TNT_WITH_CUDA
    char errors[400] = "";
    void *handle = open_plugin(errors, sizeof(errors));
    if (handle == NULL) {
        snprintf(g_plugin_error, sizeof(g_plugin_error),
                 "cannot load %s (%s); is the CUDA runtime (libcudart.so.%d) installed and on "
                 "LD_LIBRARY_PATH?",
                 TNT_GPU_PLUGIN_NAME, errors, TNT_CUDA_MAJOR);
        return;
    }
    tnt_gpu_plugin_get_fn get;
    /* POSIX allows this conversion for dlsym results. */
    *(void **)&get = dlsym(handle, TNT_GPU_PLUGIN_SYMBOL);
    const struct tnt_gpu_plugin_ops *ops =
        get != NULL ? get(TNT_GPU_PLUGIN_ABI, &g_host_ops) : NULL;
    if (ops == NULL || ops->abi != TNT_GPU_PLUGIN_ABI) {
        snprintf(g_plugin_error, sizeof(g_plugin_error),
                 "%s is from another build of tarantella (no matching %s, ABI %d); reinstall "
                 "libtnt and libtnt_cuda.so together",
                 TNT_GPU_PLUGIN_NAME, TNT_GPU_PLUGIN_SYMBOL, TNT_GPU_PLUGIN_ABI);
        dlclose(handle);
        return;
    }
    g_plugin = ops;
#else
    snprintf(g_plugin_error, sizeof(g_plugin_error),
             "this libtnt was built without CUDA (TNT_WITH_CUDA=OFF or no CUDA toolkit/NCCL at "
             "build time); rebuild with -DTNT_WITH_CUDA=ON on a machine with the CUDA toolkit, "
             "or use tensors on the CPU");
#endif
}

/* ------------------------------------------------------------------------ */
/* Set-up                                                                   */
/* ------------------------------------------------------------------------ */

/* comm->gpu as set by gpu_state(), or NULL; read under the same lock. */
static struct tnt_gpu *gpu_peek(const tnt_comm_t *comm)
{
    pthread_mutex_lock(&g_gpu_create_lock);
    struct tnt_gpu *gpu = comm->gpu;
    pthread_mutex_unlock(&g_gpu_create_lock);
    return gpu;
}

static tnt_status_t gpu_state(tnt_comm_t *comm, struct tnt_gpu **gpu_p)
{
    tnt_status_t status = TNT_OK;
    pthread_mutex_lock(&g_gpu_create_lock);
    if (comm->gpu == NULL) {
        struct tnt_gpu *gpu = calloc(1, sizeof(*gpu));
        if (gpu == NULL) {
            status = tnt_error_raise(TNT_ERR_NO_MEMORY, "out of memory for the device state");
        } else {
            pthread_mutex_init(&gpu->lock, NULL);
            comm->gpu = gpu;
        }
    }
    pthread_mutex_unlock(&g_gpu_create_lock);
    if (status == TNT_OK) {
        *gpu_p = comm->gpu;
    }
    return status;
}

/* This rank's record for the selection allgather. TNT_GPU_TRANSPORT was
 * checked at tnt_init with every other setting. */
static void probe_self(const tnt_comm_t *comm, struct tnt_gpu_peer *me)
{
    memset(me, 0, sizeof(*me));
    me->device = -1;
    me->request = (int32_t)comm->settings->gpu_transport;
    pthread_once(&g_plugin_once, load_plugin);
    if (g_plugin == NULL) {
        snprintf(me->reason, sizeof(me->reason), "%.383s", g_plugin_error);
        return;
    }
    /* Sets ok, uuid, device, nccl_ok, or reason. */
    g_plugin->probe(me);
}

/* Called with gpu->lock held. */
static tnt_status_t setup_locked(tnt_comm_t *comm, struct tnt_gpu *gpu)
{
    struct tnt_gpu_peer me;
    struct tnt_gpu_peer *peers = NULL;
    const size_t chunk_bytes = comm->settings->gpu_staging_bytes;
    tnt_gpu_transport_t transport;
    tnt_status_t status;

    if (gpu->transport != TNT_GPU_TRANSPORT_NONE) {
        return TNT_OK;
    }
#ifndef TNT_WITH_CUDA
    /* Every rank runs the same build, so all fail here alike without
     * communicating. */
    pthread_once(&g_plugin_once, load_plugin);
    return tnt_error_raise(TNT_ERR_UNSUPPORTED, "device collectives: %s", g_plugin_error);
#endif
    probe_self(comm, &me);
    peers = malloc((size_t)comm->size * sizeof(*peers));
    if (peers == NULL) {
        /* Peers are left to time out in the allgather: nothing can be sent. */
        return tnt_error_raise(TNT_ERR_NO_MEMORY,
                               "device set-up: out of memory for %d ranks' GPU records",
                               comm->size);
    }
    status = host_allgather(comm, &me, peers, sizeof(me));
    if (status != TNT_OK) {
        goto err_free_peers;
    }
    status = tnt_gpu_select(peers, comm->size, &transport);
    if (status != TNT_OK) {
        goto err_free_peers;
    }
    struct tnt_gpu_context_params params = {
        .comm = comm,
        .rank = comm->rank,
        .size = comm->size,
        .timeout_s = comm->timeout_s,
        .transport = transport,
        .chunk_bytes = chunk_bytes,
    };
    status = g_plugin->context_create(&params, &gpu->ctx);
    if (status != TNT_OK) {
        goto err_free_peers;
    }
    gpu->transport = transport;
    tnt_log_info("device collectives: transport %s, CUDA device %d, host chunks of %zu KiB",
                 tnt_gpu_transport_string(transport), (int)me.device, chunk_bytes >> 10);
    free(peers);
    return TNT_OK;

err_free_peers:
    free(peers);
    return status;
}

static tnt_status_t check_comm(const tnt_comm_t *comm, const char *fn)
{
    if (comm == NULL) {
        return tnt_error_raise(TNT_ERR_NOT_INITIALIZED,
                               "%s: comm is NULL; call tnt_init() first and pass the "
                               "communicator it returned",
                               fn);
    }
    return TNT_OK;
}

/* Locks the device state, setting it up first if needed. On TNT_OK the
 * caller holds gpu->lock. */
static tnt_status_t enter(tnt_comm_t *comm, const char *fn, struct tnt_gpu **gpu_p)
{
    struct tnt_gpu *gpu;
    tnt_status_t status = gpu_state(comm, &gpu);
    if (status != TNT_OK) {
        return status;
    }
    pthread_mutex_lock(&gpu->lock);
    status = setup_locked(comm, gpu);
    if (status != TNT_OK) {
        pthread_mutex_unlock(&gpu->lock);
        return status;
    }
    *gpu_p = gpu;
    return TNT_OK;
}

/* ------------------------------------------------------------------------ */
/* Public API                                                               */
/* ------------------------------------------------------------------------ */

TNT_API const char *tnt_gpu_transport_string(tnt_gpu_transport_t transport)
{
    switch (transport) {
    case TNT_GPU_TRANSPORT_NONE:
        return "none";
    case TNT_GPU_TRANSPORT_NCCL:
        return "nccl";
    case TNT_GPU_TRANSPORT_HOST:
        return "host";
    }
    return "unknown";
}

TNT_API tnt_status_t tnt_device_init(tnt_comm_t *comm)
{
    struct tnt_gpu *gpu;
    tnt_status_t status = check_comm(comm, "tnt_device_init");
    if (status == TNT_OK) {
        status = enter(comm, "tnt_device_init", &gpu);
    }
    if (status == TNT_OK) {
        pthread_mutex_unlock(&gpu->lock);
    }
    return status;
}

TNT_API tnt_status_t tnt_device_transport(const tnt_comm_t *comm, tnt_gpu_transport_t *transport_p)
{
    tnt_status_t status = check_comm(comm, "tnt_device_transport");
    if (status != TNT_OK) {
        return status;
    }
    if (transport_p == NULL) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG, "tnt_device_transport: transport_p is NULL");
    }
    tnt_gpu_transport_t transport = TNT_GPU_TRANSPORT_NONE;
    struct tnt_gpu *gpu = gpu_peek(comm);
    if (gpu != NULL) {
        pthread_mutex_lock(&gpu->lock);
        transport = gpu->transport;
        pthread_mutex_unlock(&gpu->lock);
    }
    *transport_p = transport;
    return TNT_OK;
}

static int overlap(const void *a, size_t a_bytes, const void *b, size_t b_bytes)
{
    uintptr_t a0 = (uintptr_t)a, b0 = (uintptr_t)b;
    return a0 < b0 + b_bytes && b0 < a0 + a_bytes;
}

TNT_API tnt_status_t tnt_allreduce_device(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                          size_t count, tnt_dtype_t dtype, tnt_op_t op,
                                          void *stream)
{
    const char *fn = "tnt_allreduce_device";
    struct tnt_gpu *gpu;
    tnt_status_t status = check_comm(comm, fn);
    if (status != TNT_OK) {
        return status;
    }
    if ((unsigned)dtype >= (unsigned)TNT_DTYPE_LAST) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG,
                               "%s: dtype %d is not a tnt_dtype_t (TNT_FLOAT32 .. TNT_INT64)", fn,
                               (int)dtype);
    }
    if ((unsigned)op >= (unsigned)TNT_OP_LAST) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG,
                               "%s: op %d is not a tnt_op_t (TNT_SUM, TNT_PROD, TNT_MIN, "
                               "TNT_MAX, TNT_AVG)",
                               fn, (int)op);
    }
    size_t esize = tnt_dtype_size(dtype);
    if (count > SIZE_MAX / esize) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG, "%s: count %zu overflows the address space", fn,
                               count);
    }
    size_t bytes = count * esize;
    if (bytes > 0 && (sendbuf == NULL || recvbuf == NULL)) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG, "%s: %s is NULL but %zu bytes were asked for",
                               fn, sendbuf == NULL ? "sendbuf" : "recvbuf", bytes);
    }
    if (sendbuf != recvbuf && overlap(sendbuf, bytes, recvbuf, bytes)) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG,
                               "%s: sendbuf and recvbuf overlap; pass the same pointer twice for "
                               "an in-place allreduce",
                               fn);
    }
    if (count == 0) {
        return TNT_OK;
    }
    status = enter(comm, fn, &gpu);
    if (status != TNT_OK) {
        return status;
    }
    status = g_plugin->allreduce(gpu->ctx, sendbuf, recvbuf, count, dtype, op, stream);
    pthread_mutex_unlock(&gpu->lock);
    return status;
}

TNT_API tnt_status_t tnt_broadcast_device(tnt_comm_t *comm, void *buf, size_t bytes, int root,
                                          void *stream)
{
    const char *fn = "tnt_broadcast_device";
    struct tnt_gpu *gpu;
    tnt_status_t status = check_comm(comm, fn);
    if (status != TNT_OK) {
        return status;
    }
    if (root < 0 || root >= comm->size) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG,
                               "%s: root %d is not a rank of this job (ranks 0 .. %d)", fn, root,
                               comm->size - 1);
    }
    if (buf == NULL && bytes > 0) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG, "%s: buf is NULL but %zu bytes were asked for",
                               fn, bytes);
    }
    if (bytes == 0) {
        return TNT_OK;
    }
    status = enter(comm, fn, &gpu);
    if (status != TNT_OK) {
        return status;
    }
    status = g_plugin->broadcast(gpu->ctx, buf, bytes, root, stream);
    pthread_mutex_unlock(&gpu->lock);
    return status;
}

TNT_API tnt_status_t tnt_allgather_device(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                          size_t bytes_per_rank, void *stream)
{
    const char *fn = "tnt_allgather_device";
    struct tnt_gpu *gpu;
    tnt_status_t status = check_comm(comm, fn);
    if (status != TNT_OK) {
        return status;
    }
    if (bytes_per_rank > SIZE_MAX / (size_t)comm->size) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG,
                               "%s: %d ranks x %zu bytes overflows the address space", fn,
                               comm->size, bytes_per_rank);
    }
    size_t total = bytes_per_rank * (size_t)comm->size;
    if (bytes_per_rank > 0 && (sendbuf == NULL || recvbuf == NULL)) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG, "%s: %s is NULL but %zu bytes were asked for",
                               fn, sendbuf == NULL ? "sendbuf" : "recvbuf", bytes_per_rank);
    }
    const char *own = (const char *)recvbuf + (size_t)comm->rank * bytes_per_rank;
    if (bytes_per_rank > 0 && (const char *)sendbuf != own &&
        overlap(sendbuf, bytes_per_rank, recvbuf, total)) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG,
                               "%s: sendbuf overlaps recvbuf other than at this rank's own block "
                               "(rank * bytes_per_rank)",
                               fn);
    }
    if (bytes_per_rank == 0) {
        return TNT_OK;
    }
    status = enter(comm, fn, &gpu);
    if (status != TNT_OK) {
        return status;
    }
    status = g_plugin->allgather(gpu->ctx, sendbuf, recvbuf, bytes_per_rank, stream);
    pthread_mutex_unlock(&gpu->lock);
    return status;
}

TNT_API tnt_status_t tnt_device_synchronize(tnt_comm_t *comm, void *stream)
{
    const char *fn = "tnt_device_synchronize";
    tnt_status_t status = check_comm(comm, fn);
    if (status != TNT_OK) {
        return status;
    }
    struct tnt_gpu *gpu = gpu_peek(comm);
    if (gpu == NULL || g_plugin == NULL) {
        return tnt_error_raise(TNT_ERR_UNSUPPORTED,
                               "%s: no device collective was set up on this communicator; call "
                               "tnt_device_init() or a device collective first",
                               fn);
    }
    /* The wait itself is not under gpu->lock: a stuck stream must not keep
     * other threads from issuing (or aborting); the context outlives this
     * call (only tnt_finalize destroys it). */
    pthread_mutex_lock(&gpu->lock);
    void *ctx = gpu->ctx;
    pthread_mutex_unlock(&gpu->lock);
    if (ctx == NULL) {
        return tnt_error_raise(TNT_ERR_UNSUPPORTED,
                               "%s: the device path is not set up (an earlier set-up failed)", fn);
    }
    return g_plugin->synchronize(ctx, stream);
}

/* ------------------------------------------------------------------------ */
/* The collective set on device buffers: core/api_composed.c checks and     */
/* agrees, these move the data                                              */
/* ------------------------------------------------------------------------ */

tnt_status_t tnt_gpu_enter(tnt_comm_t *comm, const char *fn, struct tnt_gpu **gpu_p)
{
    return enter(comm, fn, gpu_p);
}

void tnt_gpu_leave(struct tnt_gpu *gpu)
{
    pthread_mutex_unlock(&gpu->lock);
}

tnt_status_t tnt_gpu_check_device(struct tnt_gpu *gpu, const void *ptr, const char *fn,
                                  const char *name)
{
    (void)gpu; /* entered: the plugin is loaded */
    return g_plugin->check_device(ptr, fn, name);
}

tnt_status_t tnt_gpu_reduce(struct tnt_gpu *gpu, const void *sendbuf, void *recvbuf, size_t count,
                            tnt_dtype_t dtype, tnt_op_t op, int root, void *stream)
{
    return g_plugin->reduce(gpu->ctx, sendbuf, recvbuf, count, dtype, op, root, stream);
}

tnt_status_t tnt_gpu_reduce_scatterv(struct tnt_gpu *gpu, const void *sendbuf, void *recvbuf,
                                     const size_t *recvcounts, tnt_dtype_t dtype, tnt_op_t op,
                                     void *stream)
{
    return g_plugin->reduce_scatterv(gpu->ctx, sendbuf, recvbuf, recvcounts, dtype, op, stream);
}

tnt_status_t tnt_gpu_exchange(struct tnt_gpu *gpu, const struct tnt_gpu_exchange *x, void *stream)
{
    return g_plugin->exchange(gpu->ctx, x, stream);
}

/* ------------------------------------------------------------------------ */
/* Point-to-point on device buffers                                         */
/* ------------------------------------------------------------------------ */

/*
 * A device message is an envelope, a reply and the payload:
 *  1. the sender sends the envelope (length, its staging chunk) with the
 *     user's tag on the host point-to-point transport, in the device
 *     messages' own tag space; it finishes when a tnt_recv_device matched
 *     it, which also names the source of an any-source receive;
 *  2. the receiver answers whether the message fits (and its own chunk);
 *  3. both move the payload: NCCL (ncclSend / ncclRecv on the streams) or
 *     host-staged (pinned chunks over the host transport).
 * NCCL has neither tags nor any-source receives, and matches sends to
 * receives by order per pair of ranks; the envelope gives both, and
 * since each side issues its NCCL call right after the envelope it
 * matched (device calls are serialised per process), the NCCL calls of a
 * pair come in the same order on both sides. A message too long for the
 * receive is refused in the reply: the sender returns TNT_OK (as
 * tnt_send does: the message is lost), the receiver TNT_ERR_MISMATCH.
 */
#define DEVICE_P2P_MAGIC 0x746e7444657631ull /* "tntDev1" */

struct device_envelope {
    uint64_t magic;
    uint64_t bytes;
    uint64_t chunk_bytes;
};

struct device_reply {
    uint64_t magic;
    uint64_t accepted;
    uint64_t chunk_bytes;
    uint64_t capacity;
};

/* Locks an already set-up device path (a point-to-point call is not
 * collective, so it cannot set the path up). */
static tnt_status_t enter_ready(tnt_comm_t *comm, const char *fn, struct tnt_gpu **gpu_p)
{
    pthread_once(&g_plugin_once, load_plugin);
    if (g_plugin == NULL) {
        return tnt_error_raise(TNT_ERR_UNSUPPORTED, "%s: %s", fn, g_plugin_error);
    }
    struct tnt_gpu *gpu = gpu_peek(comm);
    if (gpu != NULL) {
        pthread_mutex_lock(&gpu->lock);
        if (gpu->transport != TNT_GPU_TRANSPORT_NONE && gpu->ctx != NULL) {
            *gpu_p = gpu;
            return TNT_OK;
        }
        pthread_mutex_unlock(&gpu->lock);
    }
    return tnt_error_raise(TNT_ERR_UNSUPPORTED,
                           "%s: the device path of communicator %s is not set up; call "
                           "tnt_device_init() on every rank first (setting it up is collective, "
                           "a message is not)",
                           fn, comm->name);
}

tnt_status_t tnt_gpu_send(tnt_comm_t *comm, const void *buf, size_t bytes, int peer, int tag,
                          void *stream, const char *fn)
{
#ifdef TNT_WITH_CUDA
    struct tnt_gpu *gpu;
    tnt_status_t status = enter_ready(comm, fn, &gpu);
    if (status != TNT_OK) {
        return status;
    }
    if (bytes > 0) {
        status = g_plugin->check_device(buf, fn, "buf");
    }
    struct device_envelope env = { .magic = DEVICE_P2P_MAGIC,
                                   .bytes = bytes,
                                   .chunk_bytes = comm->settings->gpu_staging_bytes };
    struct device_reply reply = { 0 };
    tnt_ucx_recv_result_t result;
    if (status == TNT_OK) {
        status = host_p2p(comm, TNT_P2P_DEVICE_ENVELOPE, 0, &env, sizeof(env), peer, tag, fn, NULL);
    }
    if (status == TNT_OK) {
        status =
            host_p2p(comm, TNT_P2P_DEVICE_REPLY, 1, &reply, sizeof(reply), peer, tag, fn, &result);
    }
    if (status == TNT_OK && (result.bytes != sizeof(reply) || reply.magic != DEVICE_P2P_MAGIC)) {
        status = tnt_error_raise(TNT_ERR_TRANSPORT,
                                 "%s: rank %d's reply to a device message (tag %d) is not one "
                                 "libtnt wrote; are both ranks running the same libtnt?",
                                 fn, peer, tag);
    }
    if (status == TNT_OK && !reply.accepted) {
        /* As tnt_send: the receiver reports it, the message is lost. */
        tnt_log(TNT_LOG_DEBUG,
                "%s: rank %d refused a device message of %zu bytes (tag %d): its buffer holds "
                "%llu",
                fn, peer, bytes, tag, (unsigned long long)reply.capacity);
    } else if (status == TNT_OK && bytes > 0) {
        size_t chunk =
            env.chunk_bytes < reply.chunk_bytes ? env.chunk_bytes : (size_t)reply.chunk_bytes;
        status = g_plugin->send(gpu->ctx, buf, bytes, peer, tag, chunk, stream);
    }
    pthread_mutex_unlock(&gpu->lock);
    return status;
#else
    (void)buf;
    (void)bytes;
    (void)peer;
    (void)tag;
    (void)stream;
    struct tnt_gpu *gpu;
    return enter_ready(comm, fn, &gpu);
#endif
}

tnt_status_t tnt_gpu_recv(tnt_comm_t *comm, void *buf, size_t bytes, int peer, int tag,
                          tnt_recv_info_t *info, void *stream, const char *fn)
{
#ifdef TNT_WITH_CUDA
    struct tnt_gpu *gpu;
    tnt_status_t status = enter_ready(comm, fn, &gpu);
    if (status != TNT_OK) {
        return status;
    }
    if (bytes > 0) {
        status = g_plugin->check_device(buf, fn, "buf");
    }
    struct device_envelope env = { 0 };
    tnt_ucx_recv_result_t result = { 0 };
    if (status == TNT_OK) {
        status =
            host_p2p(comm, TNT_P2P_DEVICE_ENVELOPE, 1, &env, sizeof(env), peer, tag, fn, &result);
    }
    if (status == TNT_OK && (result.bytes != sizeof(env) || env.magic != DEVICE_P2P_MAGIC)) {
        status = tnt_error_raise(TNT_ERR_TRANSPORT,
                                 "%s: rank %d's device message envelope (tag %d) is not one "
                                 "libtnt wrote; are both ranks running the same libtnt?",
                                 fn, result.source, tag);
    }
    int source = result.source;
    struct device_reply reply = { .magic = DEVICE_P2P_MAGIC,
                                  .accepted = env.bytes <= bytes,
                                  .chunk_bytes = comm->settings->gpu_staging_bytes,
                                  .capacity = bytes };
    if (status == TNT_OK) {
        status =
            host_p2p(comm, TNT_P2P_DEVICE_REPLY, 0, &reply, sizeof(reply), source, tag, fn, NULL);
    }
    if (status == TNT_OK && !reply.accepted) {
        status = tnt_error_raise(TNT_ERR_MISMATCH,
                                 "%s: rank %d's message (tag %d) has %llu bytes, more than buf's "
                                 "%zu; it is lost (pass a buffer as large as the longest "
                                 "message)",
                                 fn, source, tag, (unsigned long long)env.bytes, bytes);
    }
    if (status == TNT_OK && env.bytes > 0) {
        size_t chunk =
            reply.chunk_bytes < env.chunk_bytes ? reply.chunk_bytes : (size_t)env.chunk_bytes;
        status = g_plugin->recv(gpu->ctx, buf, (size_t)env.bytes, source, tag, chunk, stream);
    }
    if (status == TNT_OK && info != NULL) {
        info->source = source;
        info->tag = tag;
        info->bytes = (size_t)env.bytes;
    }
    pthread_mutex_unlock(&gpu->lock);
    return status;
#else
    (void)buf;
    (void)bytes;
    (void)peer;
    (void)tag;
    (void)info;
    (void)stream;
    struct tnt_gpu *gpu;
    return enter_ready(comm, fn, &gpu);
#endif
}

/* ------------------------------------------------------------------------ */
/* Hooks for core                                                           */
/* ------------------------------------------------------------------------ */

void tnt_gpu_finalize(tnt_comm_t *comm)
{
    struct tnt_gpu *gpu = comm->gpu;
    if (gpu == NULL) {
        return;
    }
    if (gpu->ctx != NULL && g_plugin != NULL) {
        g_plugin->context_destroy(gpu->ctx);
    }
    pthread_mutex_destroy(&gpu->lock);
    free(gpu);
    comm->gpu = NULL;
}

void tnt_gpu_abort(tnt_comm_t *comm)
{
    /* No lock: the thread holding it may be the one that is stuck. */
    struct tnt_gpu *gpu = comm != NULL ? comm->gpu : NULL;
    if (gpu != NULL && gpu->ctx != NULL && g_plugin != NULL) {
        g_plugin->context_abort(gpu->ctx);
    }
}
