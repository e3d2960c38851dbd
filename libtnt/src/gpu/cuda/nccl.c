/*
 * libtnt_cuda.so, the NCCL path: NCCL loaded at run time (so a machine
 * without it still gets the host-staged path), a communicator created by
 * libtnt (rank 0's ncclUniqueId goes out with the host broadcast), in
 * NCCL's nonblocking mode so that every wait for it is ours, bounded by
 * TNT_TIMEOUT, and ends in ncclCommAbort.
 */
#include "gpu/cuda/cuda_plugin.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    ncclResult_t (*Reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, int,
                           ncclComm_t, cudaStream_t);
    ncclResult_t (*ReduceScatter)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
                                  ncclComm_t, cudaStream_t);
    ncclResult_t (*Send)(const void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*Recv)(void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*GroupStart)(void);
    ncclResult_t (*GroupEnd)(void);
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
    TNT_NCCL_SYM(Reduce, "ncclReduce");
    TNT_NCCL_SYM(ReduceScatter, "ncclReduceScatter");
    TNT_NCCL_SYM(Send, "ncclSend");
    TNT_NCCL_SYM(Recv, "ncclRecv");
    TNT_NCCL_SYM(GroupStart, "ncclGroupStart");
    TNT_NCCL_SYM(GroupEnd, "ncclGroupEnd");
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

int tnt_nccl_load(const char **error_p)
{
    pthread_once(&g_nccl_once, load_nccl);
    *error_p = N.error;
    return N.ok;
}

/* Polls a nonblocking NCCL communicator until its pending operation is no
 * longer in progress, for at most the timeout; aborts it on error or
 * timeout, so that no rank stays in a kernel waiting for a dead peer. */
tnt_status_t tnt_nccl_settle(struct ctx *c, ncclResult_t r, const char *what)
{
    tnt_backoff_t backoff;
    g_host->backoff_init(&backoff, c->p.timeout_s);
    while (r == ncclInProgress) {
        if (g_host->backoff_wait(&backoff) != 0) {
            N.CommAbort(c->nccl);
            atomic_store_explicit(&c->nccl_aborted, 1, memory_order_release);
            return g_host->error_raise(TNT_ERR_TIMEOUT,
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
        return g_host->error_raise(TNT_ERR_TRANSPORT,
                                   "%s: NCCL failed: %s; the NCCL communicator was aborted (set "
                                   "NCCL_DEBUG=WARN for NCCL's own report)",
                                   what, nccl_str(r));
    }
    return TNT_OK;
}

tnt_status_t tnt_nccl_usable(struct ctx *c, const char *what)
{
    if (atomic_load_explicit(&c->nccl_aborted, memory_order_acquire)) {
        return g_host->error_raise(TNT_ERR_PEER_FAILED,
                                   "%s: the NCCL communicator was aborted after an earlier error; "
                                   "the job cannot continue, restart it",
                                   what);
    }
    return TNT_OK;
}

/* Collective: rank 0 makes the unique id and broadcasts it (with its status,
 * so that a failure there fails everyone at once), every rank initialises,
 * and an allgather of the outcomes makes every rank agree. */
tnt_status_t tnt_nccl_create(struct ctx *c)
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
    status = g_host->broadcast(c->p.comm, &msg, sizeof(msg), 0);
    if (status != TNT_OK) {
        return status;
    }
    if (msg.status != ncclSuccess) {
        return g_host->error_raise(
            TNT_ERR_TRANSPORT,
            "NCCL set-up: rank 0 could not create the NCCL unique id: %.128s; "
            "set NCCL_DEBUG=WARN, or use TNT_GPU_TRANSPORT=host",
            msg.reason);
    }

    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    int32_t mine = 0; /* 0 = ok */
    ncclResult_t r = N.CommInitRankConfig(&c->nccl, c->p.size, msg.id, c->p.rank, &config);
    if (r == ncclSuccess || r == ncclInProgress) {
        status = tnt_nccl_settle(c, r, "NCCL set-up (ncclCommInitRankConfig)");
        mine = status == TNT_OK ? 0 : 1;
    } else {
        g_host->error_raise(TNT_ERR_TRANSPORT, "NCCL set-up: ncclCommInitRankConfig failed: %s",
                            nccl_str(r));
        mine = 1;
        c->nccl = NULL;
        atomic_store_explicit(&c->nccl_aborted, 1, memory_order_release);
    }
    int32_t *all = malloc((size_t)c->p.size * sizeof(*all));
    if (all == NULL) {
        return g_host->error_raise(TNT_ERR_NO_MEMORY, "NCCL set-up: out of memory");
    }
    status = g_host->allgather(c->p.comm, &mine, all, sizeof(mine));
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
    return g_host->error_raise(TNT_ERR_PEER_FAILED,
                               "NCCL set-up failed on rank %d (see its message); use "
                               "TNT_GPU_TRANSPORT=host to avoid NCCL",
                               bad);
}

void tnt_nccl_abort(struct ctx *c)
{
    if (c->nccl != NULL &&
        atomic_exchange_explicit(&c->nccl_aborted, 1, memory_order_acq_rel) == 0) {
        N.CommAbort(c->nccl);
    }
}

void tnt_nccl_destroy(struct ctx *c)
{
    if (c->nccl != NULL && !atomic_load_explicit(&c->nccl_aborted, memory_order_acquire)) {
        /* Finalize flushes outstanding work; bounded, and aborted if a
         * peer never gets there. */
        if (tnt_nccl_settle(c, N.CommFinalize(c->nccl), "tnt_finalize (ncclCommFinalize)") ==
            TNT_OK) {
            N.CommDestroy(c->nccl);
        }
    }
}

ncclResult_t tnt_nccl_async_error(struct ctx *c)
{
    ncclResult_t async = ncclSuccess;
    if (N.CommGetAsyncError(c->nccl, &async) != ncclSuccess) {
        return ncclSuccess;
    }
    return async;
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

tnt_status_t tnt_nccl_allreduce(struct ctx *c, const void *sendbuf, void *recvbuf, size_t count,
                                tnt_dtype_t dtype, tnt_op_t op, cudaStream_t stream, const char *fn)
{
    tnt_status_t status = tnt_nccl_usable(c, fn);
    if (status != TNT_OK) {
        return status;
    }
    return tnt_nccl_settle(
        c, N.AllReduce(sendbuf, recvbuf, count, nccl_dtype(dtype), nccl_op(op), c->nccl, stream),
        fn);
}

tnt_status_t tnt_nccl_broadcast(struct ctx *c, void *buf, size_t bytes, int root,
                                cudaStream_t stream, const char *fn)
{
    tnt_status_t status = tnt_nccl_usable(c, fn);
    if (status != TNT_OK) {
        return status;
    }
    return tnt_nccl_settle(c, N.Broadcast(buf, buf, bytes, ncclInt8, root, c->nccl, stream), fn);
}

tnt_status_t tnt_nccl_allgather(struct ctx *c, const void *sendbuf, void *recvbuf,
                                size_t bytes_per_rank, cudaStream_t stream, const char *fn)
{
    tnt_status_t status = tnt_nccl_usable(c, fn);
    if (status != TNT_OK) {
        return status;
    }
    return tnt_nccl_settle(
        c, N.AllGather(sendbuf, recvbuf, bytes_per_rank, ncclInt8, c->nccl, stream), fn);
}

tnt_status_t tnt_nccl_reduce(struct ctx *c, const void *sendbuf, void *recvbuf, size_t count,
                             tnt_dtype_t dtype, tnt_op_t op, int root, cudaStream_t stream,
                             const char *fn)
{
    tnt_status_t status = tnt_nccl_usable(c, fn);
    if (status != TNT_OK) {
        return status;
    }
    return tnt_nccl_settle(
        c, N.Reduce(sendbuf, recvbuf, count, nccl_dtype(dtype), nccl_op(op), root, c->nccl, stream),
        fn);
}

tnt_status_t tnt_nccl_reduce_scatterv(struct ctx *c, const void *sendbuf, void *recvbuf,
                                      const size_t *recvcounts, tnt_dtype_t dtype, tnt_op_t op,
                                      cudaStream_t stream, const char *fn)
{
    tnt_status_t status = tnt_nccl_usable(c, fn);
    if (status != TNT_OK) {
        return status;
    }
    int equal = 1;
    for (int r = 1; r < c->p.size; r++) {
        equal &= recvcounts[r] == recvcounts[0];
    }
    if (equal) {
        /* In place is NCCL's own: recvbuf == sendbuf + rank * recvcount. */
        return tnt_nccl_settle(c,
                               N.ReduceScatter(sendbuf, recvbuf, recvcounts[0], nccl_dtype(dtype),
                                               nccl_op(op), c->nccl, stream),
                               fn);
    }
    /* NCCL has no reduce-scatter with per-rank counts: one reduce per
     * block, rooted at its owner, launched together as one group. Blocks
     * of 0 elements are left out on every rank alike (the counts agree). */
    size_t esize = g_host->dtype_size(dtype), offset = 0;
    ncclResult_t r = N.GroupStart();
    /* Inside a group a nonblocking communicator answers ncclSuccess (the
     * group's end says ncclInProgress); in progress is taken as such too. */
    for (int root = 0; root < c->p.size && (r == ncclSuccess || r == ncclInProgress); root++) {
        size_t n = recvcounts[root];
        if (n > 0) {
            r = N.Reduce((const char *)sendbuf + offset * esize, root == c->p.rank ? recvbuf : NULL,
                         n, nccl_dtype(dtype), nccl_op(op), root, c->nccl, stream);
        }
        offset += n;
    }
    /* A group is always closed, also after a failed call inside it. */
    ncclResult_t end = N.GroupEnd();
    return tnt_nccl_settle(c, r != ncclSuccess && r != ncclInProgress ? r : end, fn);
}

/* gather, scatter, allgatherv, alltoall(v) as NCCL's documentation builds
 * them: one ncclSend per rank this one sends to and one ncclRecv per rank
 * it receives from, all in one group, so that NCCL runs them together and
 * no pair waits for another. Pairs of 0 bytes are left out on both sides
 * alike (every rank has the same matrix); the pair with itself is the
 * caller's device copy. */
tnt_status_t tnt_nccl_exchange(struct ctx *c, const struct tnt_gpu_exchange *x, cudaStream_t stream)
{
    tnt_status_t status = tnt_nccl_usable(c, x->fn);
    if (status != TNT_OK) {
        return status;
    }
    int any = 0;
    for (int j = 0; j < c->p.size; j++) {
        any |= j != c->p.rank && (x->send_bytes[j] > 0 || x->recv_bytes[j] > 0);
    }
    if (!any) {
        return TNT_OK;
    }
    ncclResult_t r = N.GroupStart();
    for (int j = 0; j < c->p.size && (r == ncclSuccess || r == ncclInProgress); j++) {
        if (j != c->p.rank && x->send_bytes[j] > 0) {
            r = N.Send((const char *)x->send + x->send_displs[j], x->send_bytes[j], ncclInt8, j,
                       c->nccl, stream);
        }
    }
    for (int j = 0; j < c->p.size && (r == ncclSuccess || r == ncclInProgress); j++) {
        if (j != c->p.rank && x->recv_bytes[j] > 0) {
            r = N.Recv((char *)x->recv + x->recv_displs[j], x->recv_bytes[j], ncclInt8, j, c->nccl,
                       stream);
        }
    }
    ncclResult_t end = N.GroupEnd();
    return tnt_nccl_settle(c, r != ncclSuccess && r != ncclInProgress ? r : end, x->fn);
}

/* A device message's payload, after the envelope (gpu/device.c). */
tnt_status_t tnt_nccl_p2p(struct ctx *c, int is_recv, void *buf, size_t bytes, int peer,
                          cudaStream_t stream, const char *fn)
{
    tnt_status_t status = tnt_nccl_usable(c, fn);
    if (status != TNT_OK) {
        return status;
    }
    return tnt_nccl_settle(c,
                           is_recv ? N.Recv(buf, bytes, ncclInt8, peer, c->nccl, stream)
                                   : N.Send(buf, bytes, ncclInt8, peer, c->nccl, stream),
                           fn);
}
