/*
 * The collectives beyond allreduce, broadcast and allgather. Gather,
 * scatter and alltoall(v) have algorithms of their own, in which each rank
 * moves only what is addressed to it: on one node through shared memory
 * (transport/shm_personalized.c), across nodes through shared memory
 * within each node and the collectives' UCX transport between them
 * (coll/multinode/gather.c, scatter.c, alltoallv.c). Everything else is
 * composed from allreduce and allgather (coll.c), which keeps their
 * guarantees for free: the transports, the hierarchy across nodes, bitwise
 * identical reductions on every rank, the hang doctor and fail-fast.
 * Composition moves more bytes than a dedicated algorithm would
 * (docs/c-api.md has the cost of each, and docs/benchmarks.md the measured
 * figures).
 *
 * Arguments and agreement across ranks are checked by core/api_composed.c
 * before these run.
 */
#include "coll/coll.h"

#include "coll/multinode.h"
#include "transport/shm.h"
#include "util/dtype.h"
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
    if (one_node(comm) && tnt_shm_reduce_eager(comm->shm, count * tnt_dtype_bytes(dtype))) {
        /* Small: the non-roots hand their vector off (transport/shm.h). */
        tnt_status_t status = tnt_coll_begin(comm, "reduce", TNT_DOCTOR_ALLREDUCE,
                                             (uint64_t)count * tnt_dtype_bytes(dtype));
        if (status == TNT_OK) {
            status = tnt_shm_reduce(comm->shm, sendbuf, recvbuf, count, dtype, op, root);
        }
        return tnt_coll_end(comm, "reduce", status);
    }
    if (comm->rank == root) {
        return tnt_coll_allreduce(comm, sendbuf, recvbuf, count, dtype, op);
    }
    _Alignas(64) unsigned char small[SMALL_SCRATCH];
    size_t bytes = count * tnt_dtype_bytes(dtype);
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
    size_t esize = tnt_dtype_bytes(dtype), total = 0, offset = 0;
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

/* gather and scatter of one rank: its block is the whole buffer. */
static void own_block(const void *from, void *to, size_t bytes)
{
    if (from != to && bytes > 0) {
        memmove(to, from, bytes);
    }
}

/* One node: the shared-memory algorithm. Across nodes: each block crosses
 * once, to the root's node only (coll/multinode/gather.c). */
tnt_status_t tnt_coll_gather(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                             size_t bytes_per_rank, int root)
{
    tnt_status_t status =
        tnt_coll_begin(comm, "gather", TNT_DOCTOR_GATHER, bytes_per_rank * (uint64_t)comm->size);
    if (status != TNT_OK) {
        return status;
    }
    if (comm->size == 1) {
        own_block(sendbuf, recvbuf, bytes_per_rank);
    } else if (one_node(comm)) {
        status = tnt_shm_gather(comm->shm, sendbuf, recvbuf, bytes_per_rank, root);
    } else {
        status = tnt_multinode_gather(comm, sendbuf, recvbuf, bytes_per_rank, root);
    }
    return tnt_coll_end(comm, "gather", status);
}

/* One node: the shared-memory algorithm. Across nodes: each node gets only
 * its own blocks (coll/multinode/scatter.c). */
tnt_status_t tnt_coll_scatter(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                              size_t bytes_per_rank, int root)
{
    tnt_status_t status = tnt_coll_begin(comm, "scatter", TNT_DOCTOR_SCATTER,
                                         bytes_per_rank * (uint64_t)comm->size);
    if (status != TNT_OK) {
        return status;
    }
    if (comm->size == 1) {
        own_block(sendbuf, recvbuf, bytes_per_rank);
    } else if (one_node(comm)) {
        status = tnt_shm_scatter(comm->shm, sendbuf, recvbuf, bytes_per_rank, root);
    } else {
        status = tnt_multinode_scatter(comm, sendbuf, recvbuf, bytes_per_rank, root);
    }
    return tnt_coll_end(comm, "scatter", status);
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

/* One node: the shared-memory exchange. Across nodes: shared memory for
 * the node's own pairs, a pairwise UCX exchange for the rest
 * (coll/multinode/alltoallv.c); each block moves once, from its sender to
 * its receiver. */
tnt_status_t tnt_coll_alltoallv(tnt_comm_t *comm, const void *sendbuf, const size_t *sendbytes,
                                void *recvbuf, const size_t *all_sendbytes)
{
    uint64_t bytes = 0;
    for (int j = 0; j < comm->size; j++) {
        bytes += sendbytes[j];
    }
    if (!one_node(comm)) {
        /* As the composed form did: nothing to move, no collective. */
        uint64_t moved = 0;
        for (size_t i = 0; i < (size_t)comm->size * (size_t)comm->size; i++) {
            moved |= all_sendbytes[i];
        }
        if (moved == 0) {
            return TNT_OK; /* every block of every rank is empty, which every rank knows */
        }
    }
    tnt_status_t status = tnt_coll_begin(comm, "alltoall", TNT_DOCTOR_ALLTOALL, bytes);
    if (status != TNT_OK) {
        return status;
    }
    if (comm->size == 1) {
        own_block(sendbuf, recvbuf, sendbytes[0]);
    } else if (one_node(comm)) {
        status = tnt_shm_alltoallv(comm->shm, sendbuf, recvbuf, all_sendbytes);
    } else {
        status = tnt_multinode_alltoallv(comm, sendbuf, sendbytes, recvbuf, all_sendbytes);
    }
    return tnt_coll_end(comm, "alltoall", status);
}

tnt_status_t tnt_coll_check_pairs(const tnt_comm_t *comm, const char *fn, const uint64_t *sizes,
                                  size_t *all_send)
{
    const int size = comm->size;
    const size_t row = 2 * (size_t)size;
    for (int r = 0; r < size; r++) {
        for (int j = 0; j < size; j++) {
            uint64_t sent = sizes[(size_t)r * row + (size_t)j];
            uint64_t expected = sizes[(size_t)j * row + (size_t)size + (size_t)r];
            all_send[(size_t)r * (size_t)size + (size_t)j] = (size_t)sent;
            if (sent != expected) {
                /* Printed by the two ranks of the pair; the others fail
                 * quietly with the same words. */
                const char *fmt = "%s: rank %d sends %llu bytes to rank %d, which expects %llu "
                                  "(its recvbytes[%d]) in communicator %s";
                return comm->rank == r || comm->rank == j
                           ? tnt_error_raise(TNT_ERR_MISMATCH, fmt, fn, r, (unsigned long long)sent,
                                             j, (unsigned long long)expected, r, comm->name)
                           : tnt_error_set(TNT_ERR_MISMATCH, fmt, fn, r, (unsigned long long)sent,
                                           j, (unsigned long long)expected, r, comm->name);
            }
        }
    }
    return TNT_OK;
}

int tnt_coll_alltoallv_sized_fits(const tnt_comm_t *comm)
{
    return tnt_coll_terms_fold(comm) && tnt_shm_alltoallv_sized_fits(comm->shm);
}

tnt_status_t tnt_coll_alltoallv_sized(tnt_comm_t *comm, const char *fn, const void *sendbuf,
                                      const size_t *sendbytes, void *recvbuf,
                                      const size_t *recvbytes, uint64_t *sizes, size_t *all_send)
{
    uint64_t bytes = 0;
    for (int j = 0; j < comm->size; j++) {
        bytes += sendbytes[j];
    }
    tnt_status_t status = tnt_coll_begin(comm, "alltoall", TNT_DOCTOR_ALLTOALL, bytes);
    if (status != TNT_OK) {
        return status;
    }
    status = tnt_shm_alltoallv_sized_start(comm->shm, sendbuf, sendbytes, recvbytes, sizes);
    if (status == TNT_OK) {
        status = tnt_coll_check_pairs(comm, fn, sizes, all_send);
        if (status != TNT_OK) {
            return tnt_coll_end_in_step(comm, "alltoall", status);
        }
        status = tnt_shm_alltoallv_sized_finish(comm->shm, sendbuf, recvbuf, all_send);
    }
    return tnt_coll_end(comm, "alltoall", status);
}
