/*
 * libtnt_cuda.so, the host-staged path: chunks go device -> pinned host ->
 * host collective -> device on a private copy stream, TNT_GPU_STAGING_SLOTS
 * chunks in flight, ordered after the caller's stream with one event and
 * joined back with another. The path for ranks sharing a GPU, and where
 * NCCL is missing.
 */
#include "gpu/cuda/cuda_plugin.h"

#include <stdint.h>
#include <stdlib.h>

void tnt_staged_free(struct ctx *c)
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
tnt_status_t tnt_staged_create(struct ctx *c)
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
        tnt_staged_free(c);
        return g_host->error_raise(
            TNT_ERR_NO_MEMORY,
            "host-staged device collectives: cannot set up %d pinned buffers "
            "of %zu KiB and their stream: %s; lower TNT_GPU_STAGING_KB",
            TNT_GPU_STAGING_SLOTS, c->slot_bytes >> 10, cudaGetErrorString(e));
    }
    return TNT_OK;
}

/* ------------------------------------------------------------------------ */
/* Host-staged pipeline                                                     */
/* ------------------------------------------------------------------------ */

static tnt_status_t wait_event(struct ctx *c, cudaEvent_t event, const char *what, size_t chunk)
{
    tnt_backoff_t backoff;
    g_host->backoff_init(&backoff, c->p.timeout_s);
    for (;;) {
        cudaError_t e = cudaEventQuery(event);
        if (e == cudaSuccess) {
            return TNT_OK;
        }
        if (e != cudaErrorNotReady) {
            return tnt_cuda_fail(e, what);
        }
        if (g_host->backoff_wait(&backoff) != 0) {
            return g_host->error_raise(
                TNT_ERR_TIMEOUT,
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

/* REDUCE and REDUCE_SCATTER reduce each chunk with the host allreduce, as
 * the host tnt_reduce and tnt_reduce_scatterv do (coll/composed.c), so the
 * bits are the host calls' and no scratch buffer is needed; only the part
 * of the chunk that this rank receives is copied back. */
enum stage_kind {
    STAGE_ALLREDUCE,
    STAGE_BROADCAST,
    STAGE_ALLGATHER,
    STAGE_REDUCE,
    STAGE_REDUCE_SCATTER
};

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
    size_t keep_begin;     /* reduce_scatter: this rank's block of the send buffer, */
    size_t keep_end;       /* in elements [begin, end), copied to recv */
};

/* The part of chunk [off, off + n) that this rank copies back, in
 * elements; *count_p is 0 when none. */
static void stage_kept(struct ctx *c, const struct stage_args *a, size_t off, size_t n,
                       size_t *from_p, size_t *count_p)
{
    size_t from = off, to = off + n;
    if (a->kind == STAGE_REDUCE && c->p.rank != a->root) {
        to = from;
    } else if (a->kind == STAGE_REDUCE_SCATTER) {
        from = from > a->keep_begin ? from : a->keep_begin;
        to = to < a->keep_end ? to : a->keep_end;
    }
    *from_p = from;
    *count_p = to > from ? to - from : 0;
}

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
    return e == cudaSuccess ? TNT_OK : tnt_cuda_fail(e, "cudaMemcpyAsync (device to host)");
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
        status = g_host->allreduce(c->p.comm, slot, slot, n, a->dtype, a->op);
        if (status == TNT_OK) {
            e = cudaMemcpyAsync(a->recv + off * a->esize, slot, n * a->esize,
                                cudaMemcpyHostToDevice, c->copy_stream);
        }
        break;
    case STAGE_BROADCAST:
        status = g_host->broadcast(c->p.comm, slot, n, a->root);
        /* The root's buffer already holds the data. */
        if (status == TNT_OK && c->p.rank != a->root) {
            e = cudaMemcpyAsync(a->recv + off, slot, n, cudaMemcpyHostToDevice, c->copy_stream);
        }
        break;
    case STAGE_ALLGATHER:
        status = g_host->allgather(c->p.comm, slot + (size_t)c->p.rank * n, slot, n);
        if (status == TNT_OK) {
            /* Piece r of the chunk goes to row r of recv, at the chunk's
             * offset within the row. */
            e = cudaMemcpy2DAsync(a->recv + off, a->bytes_per_rank, slot, n, n, (size_t)c->p.size,
                                  cudaMemcpyHostToDevice, c->copy_stream);
        }
        break;
    case STAGE_REDUCE:
    case STAGE_REDUCE_SCATTER: {
        size_t from, kept;
        status = g_host->allreduce(c->p.comm, slot, slot, n, a->dtype, a->op);
        stage_kept(c, a, off, n, &from, &kept);
        if (status == TNT_OK && kept == 0) {
            /* Nothing to copy back: the slot is free again once the host
             * allreduce returned. */
            return TNT_OK;
        }
        if (status == TNT_OK) {
            /* recv starts at element keep_begin of the send buffer's
             * layout (0 for reduce). */
            e = cudaMemcpyAsync(a->recv + (from - a->keep_begin) * a->esize,
                                slot + (from - off) * a->esize, kept * a->esize,
                                cudaMemcpyHostToDevice, c->copy_stream);
        }
        break;
    }
    }
    if (status != TNT_OK) {
        return status;
    }
    if (e == cudaSuccess) {
        e = cudaEventRecord(c->h2d[s], c->copy_stream);
    }
    if (e != cudaSuccess) {
        return tnt_cuda_fail(e, "cudaMemcpyAsync (host to device)");
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
    tnt_status_t status = tnt_cuda_enter(c, &previous);
    if (status != TNT_OK) {
        return status;
    }
    cudaError_t e = cudaEventRecord(c->entry, stream);
    if (e == cudaSuccess) {
        e = cudaStreamWaitEvent(c->copy_stream, c->entry, 0);
    }
    if (e != cudaSuccess) {
        status = tnt_cuda_fail(e, "ordering after the caller's stream");
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
        status = tnt_cuda_fail(e, "ordering the caller's stream after the copies");
    }
    tnt_cuda_leave(c, previous);
    return status;
}

tnt_status_t tnt_staged_allreduce(struct ctx *c, const void *sendbuf, void *recvbuf, size_t count,
                                  tnt_dtype_t dtype, tnt_op_t op, cudaStream_t stream,
                                  const char *fn)
{
    size_t esize = g_host->dtype_size(dtype);
    struct stage_args a = { .kind = STAGE_ALLREDUCE,
                            .fn = fn,
                            .send = sendbuf,
                            .recv = recvbuf,
                            .esize = esize,
                            .dtype = dtype,
                            .op = op };
    tnt_gpu_chunks_t plan = tnt_gpu_chunks_plan(count, esize, c->slot_bytes);
    return stage_run(c, &a, &plan, stream);
}

tnt_status_t tnt_staged_broadcast(struct ctx *c, void *buf, size_t bytes, int root,
                                  cudaStream_t stream, const char *fn)
{
    struct stage_args a = {
        .kind = STAGE_BROADCAST, .fn = fn, .send = buf, .recv = buf, .esize = 1, .root = root
    };
    tnt_gpu_chunks_t plan = tnt_gpu_chunks_plan(bytes, 1, c->slot_bytes);
    return stage_run(c, &a, &plan, stream);
}

tnt_status_t tnt_staged_allgather(struct ctx *c, const void *sendbuf, void *recvbuf,
                                  size_t bytes_per_rank, cudaStream_t stream, const char *fn)
{
    struct stage_args a = { .kind = STAGE_ALLGATHER,
                            .fn = fn,
                            .send = sendbuf,
                            .recv = recvbuf,
                            .esize = 1,
                            .bytes_per_rank = bytes_per_rank };
    /* Each chunk gathers one piece per rank into one slot. */
    tnt_gpu_chunks_t plan =
        tnt_gpu_chunks_plan(bytes_per_rank, 1, c->slot_bytes / (size_t)c->p.size);
    return stage_run(c, &a, &plan, stream);
}

tnt_status_t tnt_staged_reduce(struct ctx *c, const void *sendbuf, void *recvbuf, size_t count,
                               tnt_dtype_t dtype, tnt_op_t op, int root, cudaStream_t stream,
                               const char *fn)
{
    size_t esize = g_host->dtype_size(dtype);
    struct stage_args a = { .kind = STAGE_REDUCE,
                            .fn = fn,
                            .send = sendbuf,
                            .recv = recvbuf,
                            .esize = esize,
                            .dtype = dtype,
                            .op = op,
                            .root = root };
    tnt_gpu_chunks_t plan = tnt_gpu_chunks_plan(count, esize, c->slot_bytes);
    return stage_run(c, &a, &plan, stream);
}

tnt_status_t tnt_staged_reduce_scatterv(struct ctx *c, const void *sendbuf, void *recvbuf,
                                        const size_t *recvcounts, tnt_dtype_t dtype, tnt_op_t op,
                                        cudaStream_t stream, const char *fn)
{
    size_t esize = g_host->dtype_size(dtype), total = 0, begin = 0;
    for (int r = 0; r < c->p.size; r++) {
        begin += r < c->p.rank ? recvcounts[r] : 0;
        total += recvcounts[r];
    }
    struct stage_args a = { .kind = STAGE_REDUCE_SCATTER,
                            .fn = fn,
                            .send = sendbuf,
                            .recv = recvbuf,
                            .esize = esize,
                            .dtype = dtype,
                            .op = op,
                            .keep_begin = begin,
                            .keep_end = begin + recvcounts[c->p.rank] };
    tnt_gpu_chunks_t plan = tnt_gpu_chunks_plan(total, esize, c->slot_bytes);
    return stage_run(c, &a, &plan, stream);
}

/* ------------------------------------------------------------------------ */
/* gather, scatter, allgatherv, alltoall(v): rounds through the host        */
/* alltoallv                                                                */
/* ------------------------------------------------------------------------ */

/* Bytes of a pair of n bytes that round k moves, pieces of piece bytes. */
static size_t round_piece(size_t n, size_t k, size_t piece)
{
    size_t from = k * piece;
    return n > from ? (n - from < piece ? n - from : piece) : 0;
}

/* In round k every pair moves its k-th piece of slot_bytes / size bytes:
 * this rank's pieces are copied out, packed in rank order, into slot 0,
 * the host alltoallv (shared memory in a node, UCX between nodes) moves
 * them into slot 1 or 2 by turns, and they are copied in to their places.
 * The copy-in of one round overlaps the next round's copy-out and host
 * exchange; every rank runs the same rounds (the matrix is the same
 * everywhere). */
tnt_status_t tnt_staged_exchange(struct ctx *c, const struct tnt_gpu_exchange *x,
                                 cudaStream_t stream)
{
    const int size = c->p.size, me = c->p.rank;
    const size_t piece = c->slot_bytes / (size_t)size, cells = (size_t)size * (size_t)size;
    size_t max = 0;
    for (size_t i = 0; i < cells; i++) {
        if (i / (size_t)size != i % (size_t)size && x->all_send[i] > max) {
            max = x->all_send[i];
        }
    }
    if (max == 0) {
        return TNT_OK;
    }
    size_t *matrix = malloc(cells * sizeof(size_t));
    if (matrix == NULL) {
        return g_host->error_raise(TNT_ERR_NO_MEMORY, "%s: out of memory for %d x %d sizes", x->fn,
                                   size, size);
    }
    int previous;
    tnt_status_t status = tnt_cuda_enter(c, &previous);
    if (status != TNT_OK) {
        free(matrix);
        return status;
    }
    cudaError_t e = cudaEventRecord(c->entry, stream);
    if (e == cudaSuccess) {
        e = cudaStreamWaitEvent(c->copy_stream, c->entry, 0);
    }
    if (e != cudaSuccess) {
        status = tnt_cuda_fail(e, "ordering after the caller's stream");
    }
    const size_t rounds = (max + piece - 1) / piece;
    for (size_t k = 0; k < rounds && status == TNT_OK; k++) {
        for (size_t i = 0; i < cells; i++) {
            matrix[i] =
                i / (size_t)size == i % (size_t)size ? 0 : round_piece(x->all_send[i], k, piece);
        }
        const size_t *mine = matrix + (size_t)me * (size_t)size;
        size_t at = 0;
        for (int j = 0; j < size && e == cudaSuccess; j++) {
            if (mine[j] > 0) {
                e = cudaMemcpyAsync((char *)c->slot[0] + at,
                                    (const char *)x->send + x->send_displs[j] + k * piece, mine[j],
                                    cudaMemcpyDeviceToHost, c->copy_stream);
                at += mine[j];
            }
        }
        if (e == cudaSuccess && at > 0) {
            e = cudaEventRecord(c->d2h[0], c->copy_stream);
        }
        if (e != cudaSuccess) {
            status = tnt_cuda_fail(e, "cudaMemcpyAsync (device to host)");
            break;
        }
        if (at > 0) {
            /* Queued behind every earlier copy-in of the slot, too. */
            status = wait_event(c, c->d2h[0], x->fn, k);
            if (status == TNT_OK) {
                c->h2d_pending[0] = 0;
            }
        }
        int s = 1 + (int)(k % 2);
        if (status == TNT_OK) {
            status = slot_acquire(c, s, x->fn, k);
        }
        if (status == TNT_OK) {
            status = g_host->alltoallv(c->p.comm, c->slot[0], mine, c->slot[s], matrix);
        }
        at = 0;
        for (int r = 0; r < size && status == TNT_OK && e == cudaSuccess; r++) {
            size_t n = matrix[(size_t)r * (size_t)size + (size_t)me];
            if (n > 0) {
                e = cudaMemcpyAsync((char *)x->recv + x->recv_displs[r] + k * piece,
                                    (char *)c->slot[s] + at, n, cudaMemcpyHostToDevice,
                                    c->copy_stream);
                at += n;
            }
        }
        if (status == TNT_OK && e == cudaSuccess && at > 0) {
            e = cudaEventRecord(c->h2d[s], c->copy_stream);
            c->h2d_pending[s] = e == cudaSuccess;
        }
        if (status == TNT_OK && e != cudaSuccess) {
            status = tnt_cuda_fail(e, "cudaMemcpyAsync (host to device)");
        }
    }
    /* As in stage_run: the caller's stream waits for every queued copy. */
    e = cudaEventRecord(c->exit, c->copy_stream);
    if (e == cudaSuccess) {
        e = cudaStreamWaitEvent(stream, c->exit, 0);
    }
    if (e != cudaSuccess && status == TNT_OK) {
        status = tnt_cuda_fail(e, "ordering the caller's stream after the copies");
    }
    tnt_cuda_leave(c, previous);
    free(matrix);
    return status;
}

/* ------------------------------------------------------------------------ */
/* Device messages: the payload in pieces over the host transport           */
/* ------------------------------------------------------------------------ */

/* Sender: piece i is copied out into slot i % 2 while piece i - 1 is on
 * its way (each host send returns once the receiver has it). Receiver:
 * piece i lands in slot i % 2 and is copied in while piece i + 1 comes. */
tnt_status_t tnt_staged_p2p(struct ctx *c, int is_recv, void *buf, size_t bytes, int peer, int tag,
                            size_t chunk_bytes, cudaStream_t stream, const char *fn)
{
    int previous;
    tnt_status_t status = tnt_cuda_enter(c, &previous);
    if (status != TNT_OK) {
        return status;
    }
    const size_t chunk = chunk_bytes > 0 ? chunk_bytes : 1;
    const size_t pieces = (bytes + chunk - 1) / chunk;
    cudaError_t e = cudaEventRecord(c->entry, stream);
    if (e == cudaSuccess) {
        e = cudaStreamWaitEvent(c->copy_stream, c->entry, 0);
    }
    if (e != cudaSuccess) {
        status = tnt_cuda_fail(e, "ordering after the caller's stream");
    }
    for (size_t i = 0; i < pieces + (is_recv ? 0 : 1) && status == TNT_OK; i++) {
        if (is_recv) {
            int s = (int)(i % 2);
            size_t off = i * chunk, n = bytes - off < chunk ? bytes - off : chunk;
            status = slot_acquire(c, s, fn, i);
            if (status == TNT_OK) {
                status = g_host->p2p_data(c->p.comm, 1, c->slot[s], n, peer, tag, fn);
            }
            if (status == TNT_OK) {
                e = cudaMemcpyAsync((char *)buf + off, c->slot[s], n, cudaMemcpyHostToDevice,
                                    c->copy_stream);
                if (e == cudaSuccess) {
                    e = cudaEventRecord(c->h2d[s], c->copy_stream);
                }
                if (e != cudaSuccess) {
                    status = tnt_cuda_fail(e, "cudaMemcpyAsync (host to device)");
                } else {
                    c->h2d_pending[s] = 1;
                }
            }
            continue;
        }
        /* Sender: copy out piece i (if any), then send piece i - 1. */
        if (i < pieces) {
            int s = (int)(i % 2);
            size_t off = i * chunk, n = bytes - off < chunk ? bytes - off : chunk;
            e = cudaMemcpyAsync(c->slot[s], (const char *)buf + off, n, cudaMemcpyDeviceToHost,
                                c->copy_stream);
            if (e == cudaSuccess) {
                e = cudaEventRecord(c->d2h[s], c->copy_stream);
            }
            if (e != cudaSuccess) {
                status = tnt_cuda_fail(e, "cudaMemcpyAsync (device to host)");
                break;
            }
        }
        if (i > 0) {
            size_t p = i - 1;
            int s = (int)(p % 2);
            size_t off = p * chunk, n = bytes - off < chunk ? bytes - off : chunk;
            status = wait_event(c, c->d2h[s], fn, p);
            if (status == TNT_OK) {
                c->h2d_pending[s] = 0;
                status = g_host->p2p_data(c->p.comm, 0, c->slot[s], n, peer, tag, fn);
            }
        }
    }
    e = cudaEventRecord(c->exit, c->copy_stream);
    if (e == cudaSuccess) {
        e = cudaStreamWaitEvent(stream, c->exit, 0);
    }
    if (e != cudaSuccess && status == TNT_OK) {
        status = tnt_cuda_fail(e, "ordering the caller's stream after the copies");
    }
    tnt_cuda_leave(c, previous);
    return status;
}
