/*
 * The public reduce, reduce_scatter(v), gather, scatter, allgatherv and
 * alltoall(v): argument checks, then an agreement round, then the
 * collective (coll/composed.c).
 *
 * The agreement round is one small allgather of what each rank passed. It
 * turns the two ways these calls go wrong across ranks into an error on
 * every rank instead of a hang or wrong data: a bad argument on one rank
 * (a root out of range there alone would otherwise leave the others
 * waiting for it until TNT_TIMEOUT), and ranks that pass different counts,
 * roots, dtypes or ops (MPI leaves both undefined).
 */
#include "coll/coll.h"
#include "comm/comm.h"
#include "core/api.h"
#include "util/hash.h"
#include "util/log.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum composed_kind {
    KIND_REDUCE = 1,
    KIND_REDUCE_SCATTER,
    KIND_GATHER,
    KIND_SCATTER,
    KIND_ALLGATHERV,
    KIND_ALLTOALL,
    KIND_ALLTOALLV,
};

static const char *const kind_fn[] = {
    [KIND_REDUCE] = "tnt_reduce",         [KIND_REDUCE_SCATTER] = "tnt_reduce_scatter(v)",
    [KIND_GATHER] = "tnt_gather",         [KIND_SCATTER] = "tnt_scatter",
    [KIND_ALLGATHERV] = "tnt_allgatherv", [KIND_ALLTOALL] = "tnt_alltoall",
    [KIND_ALLTOALLV] = "tnt_alltoallv",
};

/* What every rank passed; compared field by field with rank 0's. */
struct agreement {
    uint32_t kind;
    int32_t bad; /* this rank's arguments failed its own checks */
    int32_t dtype;
    int32_t op;
    int32_t root;
    int32_t unused;
    uint64_t count;  /* elements, or bytes per rank */
    uint64_t digest; /* of the per-rank counts every rank must pass alike */
};

static uint64_t digest_counts(const size_t *counts, int size)
{
    uint64_t hash = TNT_FNV1A_INIT;
    for (int r = 0; r < size; r++) {
        hash = tnt_fnv1a_u64(hash, (uint64_t)counts[r]);
    }
    return hash;
}

/* Raised on rank 0 and the ranks that differ, recorded quietly elsewhere,
 * so the job prints the difference once per rank that caused it. */
static tnt_status_t disagree(const tnt_comm_t *comm, int r, const char *fn, const char *field,
                             long long theirs, long long rank0s)
{
    const char *fmt = "%s: ranks disagree: rank %d passes %s %lld, rank 0 passes %lld; every rank "
                      "of communicator %s must pass the same";
    if (comm->rank == 0 || comm->rank == r) {
        return tnt_error_raise(TNT_ERR_MISMATCH, fmt, fn, r, field, theirs, rank0s, comm->name);
    }
    return tnt_error_set(TNT_ERR_MISMATCH, fmt, fn, r, field, theirs, rank0s, comm->name);
}

/* The agreement round, inside the caller's progress enter/leave. local is
 * this rank's own check (its error already raised when not TNT_OK). */
static tnt_status_t agree(tnt_comm_t *comm, const char *fn, tnt_status_t local,
                          const struct agreement *mine)
{
    struct agreement *all = malloc((size_t)comm->size * sizeof(*all));
    if (all == NULL) {
        return tnt_error_raise(TNT_ERR_NO_MEMORY, "%s: out of memory for %d ranks", fn, comm->size);
    }
    tnt_status_t status = tnt_coll_allgather(comm, mine, all, sizeof(*mine));
    for (int r = 0; r < comm->size && status == TNT_OK; r++) {
        if (all[r].bad) {
            status = local != TNT_OK ? local
                                     : tnt_error_set(TNT_ERR_INVALID_ARG,
                                                     "%s: rank %d of communicator %s passed a "
                                                     "bad argument (its error says which); "
                                                     "nothing was sent",
                                                     fn, r, comm->name);
        }
    }
    const struct agreement *a0 = &all[0];
    for (int r = 1; r < comm->size && status == TNT_OK; r++) {
        const struct agreement *a = &all[r];
        if (a->kind != a0->kind) {
            const char *k =
                a->kind < sizeof(kind_fn) / sizeof(kind_fn[0]) ? kind_fn[a->kind] : NULL;
            const char *fmt = "%s: ranks disagree: rank %d called %s, rank 0 %s";
            status =
                comm->rank == 0 || comm->rank == r
                    ? tnt_error_raise(TNT_ERR_MISMATCH, fmt, fn, r, k ? k : "?", kind_fn[a0->kind])
                    : tnt_error_set(TNT_ERR_MISMATCH, fmt, fn, r, k ? k : "?", kind_fn[a0->kind]);
        } else if (a->count != a0->count) {
            status = disagree(comm, r, fn, "count", (long long)a->count, (long long)a0->count);
        } else if (a->dtype != a0->dtype) {
            status = disagree(comm, r, fn, "dtype", a->dtype, a0->dtype);
        } else if (a->op != a0->op) {
            status = disagree(comm, r, fn, "op", a->op, a0->op);
        } else if (a->root != a0->root) {
            status = disagree(comm, r, fn, "root", a->root, a0->root);
        } else if (a->digest != a0->digest) {
            status = disagree(comm, r, fn, "per-rank counts with digest", (long long)a->digest,
                              (long long)a0->digest);
        }
    }
    free(all);
    return status;
}

static tnt_status_t check_root(const tnt_comm_t *comm, int root, const char *fn)
{
    if (root < 0 || root >= comm->size) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG,
                               "%s: root %d is not a rank of communicator %s (ranks 0 .. %d)", fn,
                               root, comm->name, comm->size - 1);
    }
    return TNT_OK;
}

static tnt_status_t check_times_size(const tnt_comm_t *comm, size_t bytes, size_t *total_p,
                                     const char *fn)
{
    if (bytes > SIZE_MAX / (size_t)comm->size) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG,
                               "%s: %d ranks x %zu bytes overflows the address space", fn,
                               comm->size, bytes);
    }
    *total_p = bytes * (size_t)comm->size;
    return TNT_OK;
}

/* sendbuf and recvbuf are distinct and apart, or in place as own says. */
static tnt_status_t check_apart(const void *a, size_t a_bytes, const void *b, size_t b_bytes,
                                const void *in_place, const char *fn, const char *how)
{
    if (a != in_place && b != in_place && a_bytes > 0 && b_bytes > 0 &&
        tnt_api_overlap(a, a_bytes, b, b_bytes)) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG, "%s: sendbuf and recvbuf overlap; %s", fn, how);
    }
    return TNT_OK;
}

static tnt_status_t sum_counts(const size_t *counts, int size, size_t esize, size_t *total_p,
                               const char *fn, const char *name)
{
    size_t total = 0;
    if (counts == NULL) {
        return tnt_error_raise(TNT_ERR_INVALID_ARG, "%s: %s is NULL", fn, name);
    }
    for (int r = 0; r < size; r++) {
        if (counts[r] > (SIZE_MAX / esize - total)) {
            return tnt_error_raise(TNT_ERR_INVALID_ARG, "%s: %s overflows the address space", fn,
                                   name);
        }
        total += counts[r];
    }
    *total_p = total;
    return TNT_OK;
}

/* Enters the progress order and runs the agreement round; on TNT_OK the
 * caller runs its collective and then calls tnt_progress_leave. */
static tnt_status_t begin_agreed(tnt_comm_t *comm, const char *fn, tnt_status_t local,
                                 const struct agreement *a)
{
    tnt_status_t status = tnt_progress_enter(comm);
    if (status != TNT_OK) {
        return status;
    }
    status = agree(comm, fn, local, a);
    if (status != TNT_OK) {
        tnt_progress_leave(comm);
    }
    return status;
}

TNT_API tnt_status_t tnt_reduce(tnt_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                                tnt_dtype_t dtype, tnt_op_t op, int root)
{
    const char *fn = "tnt_reduce";
    size_t bytes = 0;
    tnt_status_t status = tnt_api_check_comm(comm, fn);
    if (status != TNT_OK) {
        return status;
    }
    tnt_status_t local = tnt_api_check_reduction(dtype, op, count, &bytes, fn);
    if (local == TNT_OK) {
        local = check_root(comm, root, fn);
    }
    if (local == TNT_OK) {
        local = tnt_api_check_buffer(sendbuf, bytes, fn, "sendbuf");
    }
    if (local == TNT_OK && comm->rank == root) {
        local = tnt_api_check_buffer(recvbuf, bytes, fn, "recvbuf");
        if (local == TNT_OK) {
            local = check_apart(sendbuf, bytes, recvbuf, bytes, recvbuf == sendbuf ? sendbuf : NULL,
                                fn, "pass the same pointer twice for an in-place reduce");
        }
    }
    struct agreement a = { KIND_REDUCE, local != TNT_OK, dtype, op, root, 0, count, 0 };
    tnt_status_t run_status = begin_agreed(comm, fn, local, &a);
    if (run_status != TNT_OK) {
        return run_status;
    }
    if (count > 0) {
        run_status = tnt_coll_reduce(comm, sendbuf, recvbuf, count, dtype, op, root);
    }
    tnt_progress_leave(comm);
    return run_status;
}

static tnt_status_t reduce_scatter_checked(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                           const size_t *recvcounts, size_t equal_count,
                                           tnt_dtype_t dtype, tnt_op_t op, const char *fn)
{
    size_t bytes = 0, total = 0;
    tnt_status_t local = tnt_api_check_reduction(dtype, op, 0, &bytes, fn);
    size_t esize = local == TNT_OK ? tnt_dtype_size(dtype) : 1;
    if (local == TNT_OK) {
        local = sum_counts(recvcounts, comm->size, esize, &total, fn, "recvcounts");
    }
    size_t offset = 0;
    if (local == TNT_OK) {
        for (int r = 0; r < comm->rank; r++) {
            offset += recvcounts[r];
        }
        local = tnt_api_check_buffer(sendbuf, total * esize, fn, "sendbuf");
    }
    if (local == TNT_OK) {
        local = tnt_api_check_buffer(recvbuf, recvcounts[comm->rank] * esize, fn, "recvbuf");
    }
    if (local == TNT_OK) {
        const void *own = (const char *)sendbuf + offset * esize;
        local = check_apart(sendbuf, total * esize, recvbuf, recvcounts[comm->rank] * esize,
                            recvbuf == own ? recvbuf : NULL, fn,
                            "for in place, recvbuf is this rank's block of sendbuf");
    }
    struct agreement a = {
        KIND_REDUCE_SCATTER,
        local != TNT_OK,
        dtype,
        op,
        0,
        0,
        equal_count,
        local == TNT_OK ? digest_counts(recvcounts, comm->size) : 0,
    };
    tnt_status_t run_status = begin_agreed(comm, fn, local, &a);
    if (run_status != TNT_OK) {
        return run_status;
    }
    if (total > 0) {
        run_status = tnt_coll_reduce_scatterv(comm, sendbuf, recvbuf, recvcounts, dtype, op);
    }
    tnt_progress_leave(comm);
    return run_status;
}

TNT_API tnt_status_t tnt_reduce_scatter(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                        size_t recvcount, tnt_dtype_t dtype, tnt_op_t op)
{
    const char *fn = "tnt_reduce_scatter";
    tnt_status_t status = tnt_api_check_comm(comm, fn);
    if (status != TNT_OK) {
        return status;
    }
    size_t *counts = malloc((size_t)comm->size * sizeof(*counts));
    if (counts == NULL) {
        return tnt_error_raise(TNT_ERR_NO_MEMORY, "%s: out of memory", fn);
    }
    for (int r = 0; r < comm->size; r++) {
        counts[r] = recvcount;
    }
    status = reduce_scatter_checked(comm, sendbuf, recvbuf, counts, recvcount, dtype, op, fn);
    free(counts);
    return status;
}

TNT_API tnt_status_t tnt_reduce_scatterv(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                         const size_t *recvcounts, tnt_dtype_t dtype, tnt_op_t op)
{
    const char *fn = "tnt_reduce_scatterv";
    tnt_status_t status = tnt_api_check_comm(comm, fn);
    if (status != TNT_OK) {
        return status;
    }
    return reduce_scatter_checked(comm, sendbuf, recvbuf, recvcounts, 0, dtype, op, fn);
}

/* gather and scatter: the root's buffer holds every rank's block. */
static tnt_status_t rooted_checked(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                   size_t bytes_per_rank, int root, enum composed_kind kind)
{
    const char *fn = kind_fn[kind];
    size_t total = 0;
    tnt_status_t local = check_root(comm, root, fn);
    if (local == TNT_OK) {
        local = check_times_size(comm, bytes_per_rank, &total, fn);
    }
    int gather = kind == KIND_GATHER;
    const void *mine = gather ? sendbuf : recvbuf;
    const void *whole = gather ? recvbuf : sendbuf;
    if (local == TNT_OK) {
        local = tnt_api_check_buffer(mine, bytes_per_rank, fn, gather ? "sendbuf" : "recvbuf");
    }
    if (local == TNT_OK && comm->rank == root) {
        local = tnt_api_check_buffer(whole, total, fn, gather ? "recvbuf" : "sendbuf");
        if (local == TNT_OK) {
            const void *own = (const char *)whole + (size_t)root * bytes_per_rank;
            local = check_apart(mine, bytes_per_rank, whole, total, mine == own ? mine : NULL, fn,
                                "for in place, the root passes its own block of the whole buffer");
        }
    }
    struct agreement a = { kind, local != TNT_OK, 0, 0, root, 0, bytes_per_rank, 0 };
    tnt_status_t run_status = begin_agreed(comm, fn, local, &a);
    if (run_status != TNT_OK) {
        return run_status;
    }
    if (bytes_per_rank > 0) {
        run_status = gather ? tnt_coll_gather(comm, sendbuf, recvbuf, bytes_per_rank, root)
                            : tnt_coll_scatter(comm, sendbuf, recvbuf, bytes_per_rank, root);
    }
    tnt_progress_leave(comm);
    return run_status;
}

TNT_API tnt_status_t tnt_gather(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                size_t bytes_per_rank, int root)
{
    tnt_status_t status = tnt_api_check_comm(comm, "tnt_gather");
    return status != TNT_OK
               ? status
               : rooted_checked(comm, sendbuf, recvbuf, bytes_per_rank, root, KIND_GATHER);
}

TNT_API tnt_status_t tnt_scatter(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                 size_t bytes_per_rank, int root)
{
    tnt_status_t status = tnt_api_check_comm(comm, "tnt_scatter");
    return status != TNT_OK
               ? status
               : rooted_checked(comm, sendbuf, recvbuf, bytes_per_rank, root, KIND_SCATTER);
}

TNT_API tnt_status_t tnt_allgatherv(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                    const size_t *recvbytes)
{
    const char *fn = "tnt_allgatherv";
    size_t total = 0;
    tnt_status_t status = tnt_api_check_comm(comm, fn);
    if (status != TNT_OK) {
        return status;
    }
    tnt_status_t local = sum_counts(recvbytes, comm->size, 1, &total, fn, "recvbytes");
    if (local == TNT_OK) {
        local = tnt_api_check_buffer(sendbuf, recvbytes[comm->rank], fn, "sendbuf");
    }
    if (local == TNT_OK) {
        local = tnt_api_check_buffer(recvbuf, total, fn, "recvbuf");
    }
    if (local == TNT_OK) {
        local = check_apart(sendbuf, recvbytes[comm->rank], recvbuf, total, NULL, fn,
                            "use separate buffers");
    }
    struct agreement a = { KIND_ALLGATHERV,
                           local != TNT_OK,
                           0,
                           0,
                           0,
                           0,
                           0,
                           local == TNT_OK ? digest_counts(recvbytes, comm->size) : 0 };
    tnt_status_t run_status = begin_agreed(comm, fn, local, &a);
    if (run_status != TNT_OK) {
        return run_status;
    }
    if (total > 0) {
        run_status = tnt_coll_allgatherv(comm, sendbuf, recvbuf, recvbytes);
    }
    tnt_progress_leave(comm);
    return run_status;
}

/* alltoall(v)'s second round: every rank's send and receive sizes, so that
 * every rank checks every pair the same way. *all_send_p gets the send
 * sizes, rank r's row at r * size. */
static tnt_status_t agree_pairs(tnt_comm_t *comm, const size_t *sendbytes, const size_t *recvbytes,
                                size_t **all_send_p)
{
    const int size = comm->size;
    const char *fn = "tnt_alltoallv";
    size_t row = 2 * (size_t)size;
    uint64_t *mine = malloc(row * sizeof(uint64_t));
    uint64_t *all = malloc(row * (size_t)size * sizeof(uint64_t));
    size_t *all_send = malloc((size_t)size * (size_t)size * sizeof(size_t));
    tnt_status_t status;
    if (mine == NULL || all == NULL || all_send == NULL) {
        free(mine);
        free(all);
        free(all_send);
        return tnt_error_raise(TNT_ERR_NO_MEMORY, "%s: out of memory for %d x %d sizes", fn, size,
                               size);
    }
    for (int j = 0; j < size; j++) {
        mine[j] = sendbytes[j];
        mine[size + j] = recvbytes[j];
    }
    status = tnt_coll_allgather(comm, mine, all, row * sizeof(uint64_t));
    for (int r = 0; r < size && status == TNT_OK; r++) {
        for (int j = 0; j < size && status == TNT_OK; j++) {
            uint64_t sent = all[(size_t)r * row + (size_t)j];
            uint64_t expected = all[(size_t)j * row + (size_t)size + (size_t)r];
            all_send[(size_t)r * (size_t)size + (size_t)j] = (size_t)sent;
            if (sent != expected) {
                const char *fmt = "%s: rank %d sends %llu bytes to rank %d, which expects %llu "
                                  "(its recvbytes[%d]) in communicator %s";
                status =
                    comm->rank == r || comm->rank == j
                        ? tnt_error_raise(TNT_ERR_MISMATCH, fmt, fn, r, (unsigned long long)sent, j,
                                          (unsigned long long)expected, r, comm->name)
                        : tnt_error_set(TNT_ERR_MISMATCH, fmt, fn, r, (unsigned long long)sent, j,
                                        (unsigned long long)expected, r, comm->name);
            }
        }
    }
    free(mine);
    free(all);
    if (status != TNT_OK) {
        free(all_send);
        return status;
    }
    *all_send_p = all_send;
    return TNT_OK;
}

static tnt_status_t alltoallv_checked(tnt_comm_t *comm, const void *sendbuf,
                                      const size_t *sendbytes, void *recvbuf,
                                      const size_t *recvbytes, size_t equal_bytes,
                                      enum composed_kind kind)
{
    const char *fn = kind_fn[kind];
    size_t send_total = 0, recv_total = 0;
    tnt_status_t local = sum_counts(sendbytes, comm->size, 1, &send_total, fn, "sendbytes");
    if (local == TNT_OK) {
        local = sum_counts(recvbytes, comm->size, 1, &recv_total, fn, "recvbytes");
    }
    if (local == TNT_OK) {
        local = tnt_api_check_buffer(sendbuf, send_total, fn, "sendbuf");
    }
    if (local == TNT_OK) {
        local = tnt_api_check_buffer(recvbuf, recv_total, fn, "recvbuf");
    }
    if (local == TNT_OK) {
        local =
            check_apart(sendbuf, send_total, recvbuf, recv_total, NULL, fn, "use separate buffers");
    }
    struct agreement a = { kind, local != TNT_OK, 0, 0, 0, 0, equal_bytes, 0 };
    tnt_status_t status = tnt_progress_enter(comm);
    if (status != TNT_OK) {
        return status;
    }
    status = agree(comm, fn, local, &a);
    size_t *all_send = NULL;
    if (status == TNT_OK) {
        status = agree_pairs(comm, sendbytes, recvbytes, &all_send);
    }
    if (status == TNT_OK) {
        status = tnt_coll_alltoallv(comm, sendbuf, sendbytes, recvbuf, all_send);
    }
    free(all_send);
    tnt_progress_leave(comm);
    return status;
}

TNT_API tnt_status_t tnt_alltoall(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                  size_t bytes_per_rank)
{
    const char *fn = "tnt_alltoall";
    size_t total;
    tnt_status_t status = tnt_api_check_comm(comm, fn);
    if (status == TNT_OK) {
        status = check_times_size(comm, bytes_per_rank, &total, fn);
    }
    if (status != TNT_OK) {
        return status;
    }
    size_t *counts = malloc((size_t)comm->size * sizeof(*counts));
    if (counts == NULL) {
        return tnt_error_raise(TNT_ERR_NO_MEMORY, "%s: out of memory", fn);
    }
    for (int r = 0; r < comm->size; r++) {
        counts[r] = bytes_per_rank;
    }
    status =
        alltoallv_checked(comm, sendbuf, counts, recvbuf, counts, bytes_per_rank, KIND_ALLTOALL);
    free(counts);
    return status;
}

TNT_API tnt_status_t tnt_alltoallv(tnt_comm_t *comm, const void *sendbuf, const size_t *sendbytes,
                                   void *recvbuf, const size_t *recvbytes)
{
    tnt_status_t status = tnt_api_check_comm(comm, "tnt_alltoallv");
    return status != TNT_OK
               ? status
               : alltoallv_checked(comm, sendbuf, sendbytes, recvbuf, recvbytes, 0, KIND_ALLTOALLV);
}
