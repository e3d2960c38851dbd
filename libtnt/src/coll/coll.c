/*
 * Collective dispatch. One node: the shared-memory algorithms. Several nodes:
 * the hierarchical multi-node ones (coll/multinode.h). A communicator of one
 * rank needs no transport at all.
 *
 * Every collective gets the next sequence number (comm->coll_seq), which
 * error messages use ("allreduce #812"). Once a collective has failed
 * part-way, the ranks are out of step and every later collective fails at
 * once, naming the first failure, instead of waiting TNT_TIMEOUT each.
 */
#include "coll/coll.h"

#include "coll/doctor.h"
#include "coll/multinode.h"
#include "reduce/reduce.h"
#include "transport/shm.h"
#include "util/log.h"
#include "util/settings.h"
#include "util/timeline.h"
#include "util/wait.h"

#include <string.h>

/* The end of a collective that tnt_coll_begin started: the outermost one
 * gives back the error context it replaced. */
static void coll_context_leave(tnt_comm_t *comm)
{
    if (--comm->coll_depth == 0 && comm->error_context.text != NULL) {
        tnt_error_context_swap(comm->coll_context_outer);
    }
}

tnt_status_t tnt_coll_begin(tnt_comm_t *comm, const char *name, tnt_doctor_kind_t kind,
                            uint64_t bytes)
{
    comm->coll_seq++;
    if (comm->coll_depth++ == 0 && comm->error_context.text != NULL) {
        comm->coll_context_outer = tnt_error_context_swap(comm->error_context);
    }
    if (tnt_tl_enabled()) {
        comm->tl_start_ns = tnt_time_ns();
        comm->tl_bytes = bytes;
        comm->tl_algo = comm->num_nodes > 1 ? "multinode" : comm->size > 1 ? "shm" : "local";
    }
    tnt_doctor_enter(comm->doctor, comm->coll_seq, kind);
    if (comm->broken_status != TNT_OK) {
        tnt_doctor_leave(comm->doctor);
        tnt_status_t status =
            tnt_error_raise(TNT_ERR_PEER_FAILED,
                            "%s #%llu not started: %s #%llu failed before it (%s), so the "
                            "ranks are out of step; finalize and restart the job",
                            name, (unsigned long long)comm->coll_seq, comm->broken_name,
                            (unsigned long long)comm->broken_seq,
                            tnt_status_string(comm->broken_status));
        coll_context_leave(comm);
        return status;
    }
    return TNT_OK;
}

int tnt_coll_gather_eager(const tnt_comm_t *comm, size_t bytes_per_rank)
{
    return tnt_shm_gather_eager(comm->shm, bytes_per_rank);
}

int tnt_coll_scatter_eager(const tnt_comm_t *comm, size_t bytes_per_rank)
{
    return tnt_shm_scatter_eager(comm->shm, bytes_per_rank);
}

int tnt_coll_reduce_eager(const tnt_comm_t *comm, size_t bytes)
{
    return tnt_shm_reduce_eager(comm->shm, bytes);
}

void tnt_coll_terms_next(tnt_comm_t *comm, uint64_t terms)
{
    if (tnt_coll_terms_fold(comm)) {
        tnt_shm_terms_next(comm->shm, terms);
    }
}

int tnt_coll_terms_differed(const tnt_comm_t *comm)
{
    return tnt_coll_terms_fold(comm) && tnt_shm_terms_differed(comm->shm);
}

tnt_status_t tnt_coll_settle(tnt_comm_t *comm)
{
    if (comm->shm == NULL || comm->broken_status != TNT_OK) {
        return TNT_OK;
    }
    /* Called from tnt_finalize, outside any call: the wait belongs to the
     * eager call, so the hang doctor sees this rank waiting in it. */
    tnt_doctor_reenter(comm->doctor);
    tnt_status_t status = tnt_shm_settle(comm->shm);
    tnt_doctor_leave(comm->doctor);
    if (status != TNT_OK) {
        comm->broken_status = status;
        comm->broken_seq = comm->coll_seq;
        comm->broken_name = "eager rooted call";
    }
    return status;
}

tnt_status_t tnt_coll_terms_only(tnt_comm_t *comm, const char *name, tnt_doctor_kind_t kind,
                                 uint64_t count, int bad, uint64_t terms)
{
    tnt_status_t status = tnt_coll_begin(comm, name, kind, 0);
    if (status != TNT_OK) {
        return status;
    }
    if (tnt_coll_terms_fold(comm)) {
        status = tnt_shm_terms_only(comm->shm, name, count, bad, terms);
    }
    return tnt_coll_end(comm, name, status);
}

tnt_status_t tnt_coll_end_in_step(tnt_comm_t *comm, const char *name, tnt_status_t status)
{
    tnt_doctor_leave(comm->doctor);
    coll_context_leave(comm);
    if (comm->tl_start_ns != 0) {
        if (tnt_tl_enabled()) {
            tnt_tl_event_t ev = { .start_ns = comm->tl_start_ns,
                                  .end_ns = tnt_time_ns(),
                                  .posted_ns = comm->tl_posted_ns,
                                  .bytes = comm->tl_bytes,
                                  .number = comm->coll_seq,
                                  .name = name,
                                  .algo = comm->tl_algo,
                                  .comm = comm->tl_comm };
            atomic_init(&ev.kind, TNT_TL_COLLECTIVE);
            tnt_tl_add(&ev);
        }
        comm->tl_start_ns = 0;
    }
    return status;
}

/* Argument errors are detected identically on every rank before anything is
 * sent, and so are differences between the arguments that signatures carry
 * (tnt_coll_terms_differed); every other failure leaves the ranks out of
 * step. */
tnt_status_t tnt_coll_end(tnt_comm_t *comm, const char *name, tnt_status_t status)
{
    (void)tnt_coll_end_in_step(comm, name, status);
    if (status < 0 && status != TNT_ERR_INVALID_ARG && status != TNT_ERR_UNSUPPORTED &&
        !(status == TNT_ERR_MISMATCH && tnt_coll_terms_differed(comm)) &&
        comm->broken_status == TNT_OK) {
        comm->broken_status = status;
        comm->broken_seq = comm->coll_seq;
        comm->broken_name = name;
    }
    return status;
}

tnt_status_t tnt_coll_allreduce(tnt_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                                tnt_dtype_t dtype, tnt_op_t op)
{
    return tnt_coll_allreduce_scaled(comm, sendbuf, recvbuf, count, dtype, op, 1.0);
}

tnt_status_t tnt_coll_allreduce_scaled(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                       size_t count, tnt_dtype_t dtype, tnt_op_t op, double scale)
{
    tnt_status_t status = tnt_coll_begin(comm, "allreduce", TNT_DOCTOR_ALLREDUCE,
                                         (uint64_t)count * tnt_dtype_size(dtype));
    if (status != TNT_OK) {
        return status;
    }
    if (comm->size == 1) {
        /* Every op of a single contribution is that contribution (AVG too). */
        if (count > 0) {
            if (sendbuf != recvbuf) {
                tnt_reduce_copy_scaled(dtype, recvbuf, sendbuf, count, scale);
            } else {
                tnt_reduce_scale(dtype, recvbuf, count, scale);
            }
        }
        return tnt_coll_end(comm, "allreduce", TNT_OK);
    }
    if (comm->num_nodes == 1) {
        status = tnt_shm_allreduce_scaled(comm->shm, sendbuf, recvbuf, count, dtype, op, scale);
    } else {
        /* Across nodes the first step is the shm reduce-scatter, which has
         * no scaled form: scale into recvbuf and reduce that in place. */
        if (scale != 1.0 && count > 0) {
            if (sendbuf != recvbuf) {
                tnt_reduce_copy_scaled(dtype, recvbuf, sendbuf, count, scale);
            } else {
                tnt_reduce_scale(dtype, recvbuf, count, scale);
            }
            sendbuf = recvbuf;
        }
        status = tnt_multinode_allreduce(comm, sendbuf, recvbuf, count, dtype, op);
    }
    return tnt_coll_end(comm, "allreduce", status);
}

tnt_status_t tnt_coll_allreduce_narrow(tnt_comm_t *comm, void *buf, size_t count, tnt_dtype_t dtype,
                                       tnt_op_t op)
{
    if (comm->num_nodes == 1) {
        return tnt_coll_allreduce(comm, buf, buf, count, dtype, op);
    }
    tnt_status_t status = tnt_coll_begin(comm, "allreduce", TNT_DOCTOR_ALLREDUCE,
                                         (uint64_t)count * tnt_dtype_size(dtype));
    if (status != TNT_OK) {
        return status;
    }
    status = tnt_multinode_allreduce_narrow(comm, buf, buf, count, dtype, op);
    return tnt_coll_end(comm, "allreduce", status);
}

tnt_status_t tnt_coll_broadcast(tnt_comm_t *comm, void *buf, size_t bytes, int root)
{
    tnt_status_t status = tnt_coll_begin(comm, "broadcast", TNT_DOCTOR_BROADCAST, bytes);
    if (status != TNT_OK) {
        return status;
    }
    if (comm->size == 1) {
        return tnt_coll_end(comm, "broadcast", TNT_OK);
    }
    if (comm->num_nodes == 1) {
        status = tnt_shm_broadcast(comm->shm, buf, bytes, comm->local_rank_of_rank[root]);
    } else {
        status = tnt_multinode_broadcast(comm, buf, bytes, root);
    }
    return tnt_coll_end(comm, "broadcast", status);
}

tnt_status_t tnt_coll_allgather(tnt_comm_t *comm, const void *sendbuf, void *recvbuf,
                                size_t bytes_per_rank)
{
    tnt_status_t status = tnt_coll_begin(comm, "allgather", TNT_DOCTOR_ALLGATHER,
                                         (uint64_t)bytes_per_rank * (uint64_t)comm->size);
    if (status != TNT_OK) {
        return status;
    }
    if (comm->size == 1) {
        if (sendbuf != recvbuf && bytes_per_rank > 0) {
            memmove(recvbuf, sendbuf, bytes_per_rank);
        }
        return tnt_coll_end(comm, "allgather", TNT_OK);
    }
    /* On one node local rank == rank, so the shm layout is the global one. */
    if (comm->num_nodes == 1) {
        status = tnt_shm_allgather(comm->shm, sendbuf, recvbuf, bytes_per_rank);
    } else {
        status = tnt_multinode_allgather(comm, sendbuf, recvbuf, bytes_per_rank);
    }
    return tnt_coll_end(comm, "allgather", status);
}

tnt_status_t tnt_coll_barrier(tnt_comm_t *comm)
{
    tnt_status_t status = tnt_coll_begin(comm, "barrier", TNT_DOCTOR_BARRIER, 0);
    if (status != TNT_OK) {
        return status;
    }
    if (comm->size == 1) {
        return tnt_coll_end(comm, "barrier", TNT_OK);
    }
    if (comm->num_nodes == 1) {
        status = tnt_shm_barrier(comm->shm);
    } else {
        status = tnt_multinode_barrier(comm);
    }
    return tnt_coll_end(comm, "barrier", status);
}

/* Whether an element's summation order depends on the message. On one node
 * shared memory adds the local ranks in local-rank order whatever the size
 * (transport/shm_allreduce.c). Across nodes each node's partial sum is
 * combined by the inter-node algorithm: with two nodes that is one addition
 * of two operands, which IEEE arithmetic makes commutative, so every
 * algorithm gives the same bits. With three or more, recursive doubling,
 * Rabenseifner and the tree each combine in one fixed order for every
 * element, but not the same order as each other, and the ring starts each
 * block at a different node (allreduce_ring.c), so the order depends on the
 * element's offset. TNT_ALLREDUCE_ALGO=auto picks by size, hence fixed only
 * when the user forced one of the three. */
TNT_API int tnt_allreduce_order_fixed(const tnt_comm_t *comm)
{
    if (comm == NULL || comm->num_nodes <= 2) {
        return 1;
    }
    switch (comm->settings->allreduce_algo) {
    case TNT_SETTINGS_ALGO_RECURSIVE_DOUBLING:
    case TNT_SETTINGS_ALGO_RABENSEIFNER:
    case TNT_SETTINGS_ALGO_TREE:
        return 1;
    default:
        return 0;
    }
}
