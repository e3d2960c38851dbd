/*
 * The collectives beyond allreduce, broadcast and allgather. On one node,
 * gather, scatter and alltoall(v) have shared-memory algorithms of their
 * own (transport/shm_personalized.c: each rank copies only what is
 * addressed to it). Everything else is composed from those three
 * (coll.c), which keeps their guarantees for free: the transports, the
 * hierarchy across nodes, bitwise identical reductions on every rank, the
 * hang doctor and fail-fast. Composition moves more bytes than a dedicated
 * algorithm would (docs/c-api.md has the cost of each, and
 * docs/benchmarks.md the measured figures); dedicated UCX algorithms can
 * replace them one at a time behind the same calls.
 *
 * Arguments and agreement across ranks are checked by core/api_composed.c
 * before these run.
 */
#include "coll/coll.h"

#include "transport/shm.h"
#include "util/log.h"

#include <stdlib.h>
#include <string.h>

static void *scratch(size_t bytes, const char *fn)
{
    void *p = malloc(bytes > 0 ? bytes : 1);
    if (p == NULL) {
        tnt_error_raise(TNT_ERR_NO_MEMORY, "%s: out of memory for %zu bytes of scratch", fn, bytes);
    }
    return p;
}

/* Scratch of small reductions lives on the stack: no malloc on the way to
 * a collective of a few cache lines. */
#define SMALL_SCRATCH 512

static int one_node(const tnt_comm_t *comm);

tnt_status_t tnt_coll_reduce(tnt_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                             tnt_dtype_t dtype, tnt_op_t op, int root)
{
    if (one_node(comm) && tnt_shm_reduce_eager(comm->shm, count * tnt_dtype_size(dtype))) {
        /* Small: the non-roots hand their vector off (transport/shm.h). */
        tnt_status_t status = tnt_coll_begin(comm, "reduce", TNT_DOCTOR_ALLREDUCE,
                                             (uint64_t)count * tnt_dtype_size(dtype));
        if (status == TNT_OK) {
            status = tnt_shm_reduce(comm->shm, sendbuf, recvbuf, count, dtype, op, root);
        }
        return tnt_coll_end(comm, "reduce", status);
    }
    if (comm->rank == root) {
        return tnt_coll_allreduce(comm, sendbuf, recvbuf, count, dtype, op);
    }
    _Alignas(64) unsigned char small[SMALL_SCRATCH];
    size_t bytes = count * tnt_dtype_size(dtype);
    void *tmp = bytes <= sizeof(small) ? small : scratch(bytes, "tnt_reduce");
    if (tmp == NULL) {
        return TNT_ERR_NO_MEMORY;
    }
    tnt_status_t status = tnt_coll_allreduce(comm, sendbuf, tmp, count, dtype, op);
    if (tmp != small) {
        free(tmp);
    }
    return status;
}

tnt_status_t tnt_coll_reduce_scatterv(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                      const size_t *recvcounts, tnt_dtype_t dtype, tnt_op_t op)
{
    size_t esize = tnt_dtype_size(dtype), total = 0, offset = 0;
    for (int r = 0; r < comm->size; r++) {
        offset += r < comm->rank ? recvcounts[r] : 0;
        total += recvcounts[r];
    }
    _Alignas(64) unsigned char small[SMALL_SCRATCH];
    void *tmp =
        total * esize <= sizeof(small) ? small : scratch(total * esize, "tnt_reduce_scatter");
    if (tmp == NULL) {
        return TNT_ERR_NO_MEMORY;
    }
    tnt_status_t status = tnt_coll_allreduce(comm, sendbuf, tmp, total, dtype, op);
    if (status == TNT_OK && recvcounts[comm->rank] > 0) {
        /* memmove: in place, recvbuf is this rank's block of sendbuf. */
        memmove(recvbuf, (const char *)tmp + offset * esize, recvcounts[comm->rank] * esize);
    }
    if (tmp != small) {
        free(tmp);
    }
    return status;
}

/* One node, several ranks: local ranks are the ranks. */
static int one_node(const tnt_comm_t *comm)
{
    return comm->num_nodes == 1 && comm->size > 1;
}

tnt_status_t tnt_coll_gather(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                             size_t bytes_per_rank, int root)
{
    if (one_node(comm)) {
        tnt_status_t status = tnt_coll_begin(comm, "gather", TNT_DOCTOR_GATHER,
                                             bytes_per_rank * (uint64_t)comm->size);
        if (status == TNT_OK) {
            status = tnt_shm_gather(comm->shm, sendbuf, recvbuf, bytes_per_rank, root);
        }
        return tnt_coll_end(comm, "gather", status);
    }
    if (comm->rank == root) {
        return tnt_coll_allgather(comm, sendbuf, recvbuf, bytes_per_rank);
    }
    void *tmp = scratch(bytes_per_rank * (size_t)comm->size, "tnt_gather");
    if (tmp == NULL) {
        return TNT_ERR_NO_MEMORY;
    }
    tnt_status_t status = tnt_coll_allgather(comm, sendbuf, tmp, bytes_per_rank);
    free(tmp);
    return status;
}

tnt_status_t tnt_coll_scatter(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                              size_t bytes_per_rank, int root)
{
    if (one_node(comm)) {
        tnt_status_t status = tnt_coll_begin(comm, "scatter", TNT_DOCTOR_SCATTER,
                                             bytes_per_rank * (uint64_t)comm->size);
        if (status == TNT_OK) {
            status = tnt_shm_scatter(comm->shm, sendbuf, recvbuf, bytes_per_rank, root);
        }
        return tnt_coll_end(comm, "scatter", status);
    }
    size_t total = bytes_per_rank * (size_t)comm->size;
    void *tmp = comm->rank == root ? (void *)sendbuf : scratch(total, "tnt_scatter");
    if (tmp == NULL) {
        return TNT_ERR_NO_MEMORY;
    }
    /* The root's buffer is only read: broadcast never writes the root's. */
    tnt_status_t status = tnt_coll_broadcast(comm, tmp, total, root);
    const char *mine = (const char *)tmp + (size_t)comm->rank * bytes_per_rank;
    if (status == TNT_OK && (const void *)mine != recvbuf) {
        memmove(recvbuf, mine, bytes_per_rank);
    }
    if (comm->rank != root) {
        free(tmp);
    }
    return status;
}

/* Every rank's block padded to the largest, then packed. */
tnt_status_t tnt_coll_allgatherv(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                 const size_t *recvbytes)
{
    size_t max = 0;
    int equal = 1;
    for (int r = 0; r < comm->size; r++) {
        max = recvbytes[r] > max ? recvbytes[r] : max;
        equal = equal && recvbytes[r] == recvbytes[0];
    }
    if (equal) {
        /* Packed equal blocks are allgather's own layout: no copies. */
        return tnt_coll_allgather(comm, sendbuf, recvbuf, max);
    }
    char *tmp = scratch(max * (size_t)comm->size, "tnt_allgatherv");
    char *padded = scratch(max, "tnt_allgatherv");
    tnt_status_t status = TNT_ERR_NO_MEMORY;
    if (tmp != NULL && padded != NULL) {
        memcpy(padded, sendbuf, recvbytes[comm->rank]);
        memset(padded + recvbytes[comm->rank], 0, max - recvbytes[comm->rank]);
        status = tnt_coll_allgather(comm, padded, tmp, max);
    }
    size_t offset = 0;
    for (int r = 0; status == TNT_OK && r < comm->size; r++) {
        memcpy((char *)recvbuf + offset, tmp + (size_t)r * max, recvbytes[r]);
        offset += recvbytes[r];
    }
    free(tmp);
    free(padded);
    return status;
}

/* Every rank's whole send buffer to every rank (padded to the largest),
 * each keeping the blocks addressed to it: size times the bytes a
 * pairwise exchange moves, in one collective. */
tnt_status_t tnt_coll_alltoallv(tnt_comm_t *comm, const void *sendbuf, const size_t *sendbytes,
                                void *recvbuf, const size_t *all_sendbytes)
{
    if (one_node(comm)) {
        uint64_t bytes = 0;
        for (int j = 0; j < comm->size; j++) {
            bytes += sendbytes[j];
        }
        tnt_status_t status = tnt_coll_begin(comm, "alltoall", TNT_DOCTOR_ALLTOALL, bytes);
        if (status == TNT_OK) {
            status = tnt_shm_alltoallv(comm->shm, sendbuf, recvbuf, all_sendbytes);
        }
        return tnt_coll_end(comm, "alltoall", status);
    }
    const int size = comm->size;
    size_t max = 0, mine = 0;
    for (int r = 0; r < size; r++) {
        size_t total = 0;
        for (int j = 0; j < size; j++) {
            total += all_sendbytes[(size_t)r * (size_t)size + (size_t)j];
        }
        max = total > max ? total : max;
    }
    for (int j = 0; j < size; j++) {
        mine += sendbytes[j];
    }
    if (max == 0) {
        return TNT_OK; /* every block of every rank is empty */
    }
    char *tmp = scratch(max * (size_t)size, "tnt_alltoall");
    char *padded = scratch(max, "tnt_alltoall");
    tnt_status_t status = TNT_ERR_NO_MEMORY;
    if (tmp != NULL && padded != NULL) {
        memcpy(padded, sendbuf, mine);
        memset(padded + mine, 0, max - mine);
        status = tnt_coll_allgather(comm, padded, tmp, max);
    }
    size_t out = 0;
    for (int r = 0; status == TNT_OK && r < size; r++) {
        const size_t *row = all_sendbytes + (size_t)r * (size_t)size;
        size_t offset = 0;
        for (int j = 0; j < comm->rank; j++) {
            offset += row[j];
        }
        memcpy((char *)recvbuf + out, tmp + (size_t)r * max + offset, row[comm->rank]);
        out += row[comm->rank];
    }
    free(tmp);
    free(padded);
    return status;
}
